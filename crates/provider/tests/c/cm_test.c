/*
 * FI_EP_MSG through libfabric (fi_cm(3), fi_eq(3)): a passive endpoint on loopback,
 * connect / accept with CM data, messages both ways, a tagged message and an RMA
 * write on the connection, shutdown (FI_SHUTDOWN at both ends); refusals with reject
 * data of every size 0..=256 (and CONNREQ data of every size); 100 connection requests
 * pending at once against the default backlog; reconnecting after shutdown, waiting on
 * the EQ's fd; and a peer process killed mid-transfer, which the survivor sees as
 * FI_SHUTDOWN or an error entry within the retry budget; and passive endpoints opened
 * and closed while another thread reads their EQ (each read runs a pass on their
 * domains); and two accepted connections sharing one receive context.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "expect.h"

#define CM_MAX 256
#define PENDING 100

static struct fid_fabric *fabric;
static struct fi_info *info;    /* the MSG info (loopback) */
static struct fid_eq *seq, *ceq; /* server-side and client-side EQs */
static struct fid_pep *pep;
static unsigned char pep_name[64];
static size_t pep_len;

/* A connected endpoint with its domain and CQ. */
struct conn {
	struct fid_domain *dom;
	struct fid_cq *cq;
	struct fid_ep *ep;
};

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* fi_eq_read until something other than -FI_EAGAIN, at most `ms`. */
static ssize_t eq_wait(struct fid_eq *eq, uint32_t *event, void *buf, size_t len, long ms)
{
	struct timespec t0;
	ssize_t r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		r = fi_eq_read(eq, event, buf, len, 0);
	} while (r == -FI_EAGAIN && ms_since(&t0) < ms && !usleep(200));
	return r;
}

/* The next completion of `cq` (0) or its error (-err), at most `ms`. */
static int cq_wait(struct fid_cq *cq, struct fi_cq_tagged_entry *e, long ms)
{
	struct fi_cq_err_entry err;
	struct timespec t0;
	ssize_t r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		r = fi_cq_read(cq, e, 1);
	} while (r == -FI_EAGAIN && ms_since(&t0) < ms && !usleep(100));
	if (r == 1)
		return 0;
	if (r == -FI_EAVAIL) {
		memset(&err, 0, sizeof err);
		fi_cq_readerr(cq, &err, 0);
		return -err.err;
	}
	return (int)r;
}

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		b[i] = (unsigned char)(seed * 31 + i * 7 + 1);
}

static int same(const unsigned char *b, size_t n, unsigned seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i] != (unsigned char)(seed * 31 + i * 7 + 1))
			return 0;
	return 1;
}

/* An endpoint of `dom` (the request's `handle` when `ri` is a CONNREQ info) bound to
 * `cq` and `eq`. */
static struct fid_ep *open_ep(struct fid_domain *dom, struct fi_info *ri, struct fid_cq *cq,
			      struct fid_eq *eq, void *ctx)
{
	struct fid_ep *ep = NULL;

	EXPECT(fi_endpoint(dom, ri, &ep, ctx), 0);
	if (!ep)
		return NULL;
	EXPECT(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_ep_bind(ep, &eq->fid, 0), 0);
	return ep;
}

static struct fid_cq *open_cq(struct fid_domain *dom)
{
	struct fi_cq_attr a = { .format = FI_CQ_FORMAT_TAGGED, .size = 256 };
	struct fid_cq *cq = NULL;

	EXPECT(fi_cq_open(dom, &a, &cq, NULL), 0);
	return cq;
}

/* The server side of one request: reads FI_CONNREQ (its data `n` bytes of `seed`),
 * returns its info (NULL on failure). */
static struct fi_info *server_connreq(size_t n, unsigned seed)
{
	unsigned char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_cm_entry *e = (void *)buf;
	uint32_t event = 0;
	ssize_t r;

	memset(buf, 0, sizeof buf);
	r = eq_wait(seq, &event, buf, sizeof buf, 10000);
	EXPECT(r, (ssize_t)(sizeof *e + n));
	EXPECT(event, FI_CONNREQ);
	if (r < 0 || event != FI_CONNREQ)
		return NULL;
	EXPECT_TRUE(e->fid == &pep->fid);
	EXPECT_TRUE(e->info && e->info->handle);
	EXPECT_TRUE(same(e->data, n, seed));
	return e->info;
}

/* Waits for FI_CONNECTED on `eq` for `ep`, with `n` bytes of data of `seed`. */
static void expect_connected(struct fid_eq *eq, struct fid_ep *ep, size_t n, unsigned seed)
{
	unsigned char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_cm_entry *e = (void *)buf;
	uint32_t event = 0;

	memset(buf, 0, sizeof buf);
	EXPECT(eq_wait(eq, &event, buf, sizeof buf, 10000), (ssize_t)(sizeof *e + n));
	EXPECT(event, FI_CONNECTED);
	EXPECT_TRUE(e->fid == &ep->fid);
	EXPECT_TRUE(same(e->data, n, seed));
}

static void expect_shutdown(struct fid_eq *eq, struct fid_ep *ep, long ms)
{
	struct fi_eq_cm_entry e;
	uint32_t event = 0;

	memset(&e, 0, sizeof e);
	EXPECT(eq_wait(eq, &event, &e, sizeof e, ms), sizeof e);
	EXPECT(event, FI_SHUTDOWN);
	EXPECT_TRUE(e.fid == &ep->fid);
}

/* Accepts request `ri` on a new domain: the accepting endpoint, connected. */
static struct conn accept_conn(struct fi_info *ri, const void *data, size_t n)
{
	struct conn s = { 0 };

	EXPECT(fi_domain(fabric, ri, &s.dom, NULL), 0);
	if (!s.dom)
		return s;
	s.cq = open_cq(s.dom);
	s.ep = open_ep(s.dom, ri, s.cq, seq, (void *)0x5e);
	EXPECT(fi_enable(s.ep), 0);
	EXPECT(fi_accept(s.ep, data, n), 0);
	/* Accepted once only. */
	EXPECT(fi_accept(s.ep, NULL, 0), -FI_EINVAL);
	return s;
}

static void close_conn(struct conn *c)
{
	if (c->ep)
		EXPECT(fi_close(&c->ep->fid), 0);
	if (c->cq)
		EXPECT(fi_close(&c->cq->fid), 0);
	if (c->dom)
		EXPECT(fi_close(&c->dom->fid), 0);
	memset(c, 0, sizeof *c);
}

/* Connect, accept, messages both ways, a tagged message, an RMA write, fi_getpeer,
 * shutdown seen at both ends. */
static void test_connect(struct conn *cl)
{
	unsigned char hello[6], world[] = "world!";
	unsigned char sbuf[4096], rbuf[4096], target[256], src[256];
	unsigned char a[64], b[64];
	size_t alen, blen;
	struct fi_cq_tagged_entry e;
	struct fi_info *ri;
	struct conn s;
	struct fid_mr *mr = NULL;
	uint64_t raddr;
	uint32_t event;

	fill(hello, sizeof hello, 0);
	cl->ep = open_ep(cl->dom, info, cl->cq, ceq, (void *)0xc1);
	EXPECT(fi_enable(cl->ep), 0);
	/* Not connected yet. */
	alen = sizeof a;
	EXPECT(fi_getpeer(cl->ep, a, &alen), -FI_ENOTCONN);
	EXPECT(fi_send(cl->ep, sbuf, 8, NULL, 0, sbuf), -FI_ENOTCONN);
	EXPECT(fi_shutdown(cl->ep, 0), -FI_ENOTCONN);
	EXPECT(fi_connect(cl->ep, pep_name, hello, sizeof hello), 0);
	EXPECT(fi_connect(cl->ep, pep_name, NULL, 0), -FI_EISCONN);
	/* The request's data is what fi_connect sent. */
	ri = server_connreq(sizeof hello, 0);
	if (!ri)
		return;
	s = accept_conn(ri, world, sizeof world);
	fi_freeinfo(ri);
	if (!s.ep)
		return;
	{
		unsigned char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
		struct fi_eq_cm_entry *ce = (void *)buf;

		EXPECT(eq_wait(ceq, &event, buf, sizeof buf, 10000), sizeof *ce + sizeof world);
		EXPECT(event, FI_CONNECTED);
		EXPECT_TRUE(ce->fid == &cl->ep->fid);
		EXPECT(memcmp(ce->data, world, sizeof world), 0);
	}
	/* The accepting side's FI_CONNECTED has no data. */
	expect_connected(seq, s.ep, 0, 0);

	/* Each side's peer is the other's name. */
	alen = sizeof a;
	blen = sizeof b;
	EXPECT(fi_getpeer(cl->ep, a, &alen), 0);
	EXPECT(fi_getname(&s.ep->fid, b, &blen), 0);
	EXPECT(alen, blen);
	EXPECT(memcmp(a, b, alen), 0);
	alen = sizeof a;
	blen = sizeof b;
	EXPECT(fi_getpeer(s.ep, a, &alen), 0);
	EXPECT(fi_getname(&cl->ep->fid, b, &blen), 0);
	EXPECT(alen, blen);
	EXPECT(memcmp(a, b, alen), 0);
	/* fi_setname of an active endpoint: its own address only. */
	EXPECT(fi_setname(&cl->ep->fid, b, blen), 0);

	/* Messages both ways (dest_addr is ignored on a connected endpoint). */
	fill(sbuf, sizeof sbuf, 1);
	memset(rbuf, 0, sizeof rbuf);
	EXPECT(fi_recv(s.ep, rbuf, sizeof rbuf, NULL, FI_ADDR_UNSPEC, rbuf), 0);
	EXPECT(fi_send(cl->ep, sbuf, sizeof sbuf, NULL, FI_ADDR_UNSPEC, sbuf), 0);
	EXPECT(cq_wait(cl->cq, &e, 5000), 0);
	EXPECT_TRUE(e.op_context == sbuf);
	EXPECT(cq_wait(s.cq, &e, 5000), 0);
	EXPECT_TRUE(e.op_context == rbuf);
	EXPECT(e.len, sizeof rbuf);
	EXPECT_TRUE(same(rbuf, sizeof rbuf, 1));
	fill(sbuf, 100, 2);
	memset(rbuf, 0, sizeof rbuf);
	EXPECT(fi_recv(cl->ep, rbuf, sizeof rbuf, NULL, 0, rbuf), 0);
	EXPECT(fi_send(s.ep, sbuf, 100, NULL, 0, sbuf), 0);
	EXPECT(cq_wait(s.cq, &e, 5000), 0);
	EXPECT(cq_wait(cl->cq, &e, 5000), 0);
	EXPECT(e.len, 100);
	EXPECT_TRUE(same(rbuf, 100, 2));

	/* A tagged message (the tag selects it). */
	if (info->caps & FI_TAGGED) {
		memset(rbuf, 0, sizeof rbuf);
		EXPECT(fi_trecv(s.ep, rbuf, sizeof rbuf, NULL, 0, 0x77, 0, rbuf), 0);
		EXPECT(fi_tsend(cl->ep, sbuf, 100, NULL, 0, 0x77, sbuf), 0);
		EXPECT(cq_wait(cl->cq, &e, 5000), 0);
		EXPECT(cq_wait(s.cq, &e, 5000), 0);
		EXPECT(e.tag, 0x77);
		EXPECT_TRUE(same(rbuf, 100, 2));
	}

	/* An RMA write into a region of the accepting side. */
	if (info->caps & FI_RMA) {
		memset(target, 0, sizeof target);
		EXPECT(fi_mr_reg(s.dom, target, sizeof target, FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL),
		       0);
		if (mr) {
			raddr = (info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) ? (uintptr_t)target : 0;
			fill(src, sizeof src, 3);
			EXPECT(fi_write(cl->ep, src, sizeof src, NULL, 0, raddr, fi_mr_key(mr), src),
			       0);
			EXPECT(cq_wait(cl->cq, &e, 5000), 0);
			EXPECT_TRUE(e.op_context == src);
			EXPECT(memcmp(target, src, sizeof src), 0);
			EXPECT(fi_close(&mr->fid), 0);
		}
	}

	/* Shutdown: the data goes first, then FI_SHUTDOWN at both ends. */
	fill(sbuf, 64, 4);
	memset(rbuf, 0, sizeof rbuf);
	EXPECT(fi_recv(s.ep, rbuf, sizeof rbuf, NULL, 0, rbuf), 0);
	EXPECT(fi_send(cl->ep, sbuf, 64, NULL, 0, sbuf), 0);
	EXPECT(fi_shutdown(cl->ep, 0), 0);
	EXPECT(fi_send(cl->ep, sbuf, 64, NULL, 0, sbuf), -FI_ENOTCONN);
	expect_shutdown(seq, s.ep, 10000);
	EXPECT(cq_wait(s.cq, &e, 5000), 0);
	EXPECT_TRUE(same(rbuf, 64, 4));
	expect_shutdown(ceq, cl->ep, 10000);
	/* Nothing more for either. */
	EXPECT(fi_eq_read(seq, &event, NULL, 0, 0), -FI_EAGAIN);
	EXPECT(fi_eq_read(ceq, &event, NULL, 0, 0), -FI_EAGAIN);
	cq_wait(cl->cq, &e, 100); /* the send's completion, if not read yet */
	EXPECT(fi_close(&cl->ep->fid), 0);
	cl->ep = NULL;
	close_conn(&s);
}

/* Reject with data of every size 0..=256, after CONNREQ data of the same size; error
 * data to a buffer of the application's for odd sizes, the provider's for even. */
static void test_reject(struct conn *cl)
{
	unsigned char data[CM_MAX + 1], mine[CM_MAX];
	struct fi_eq_err_entry err;
	struct fi_info *ri;
	uint32_t event;
	size_t n;
	ssize_t r;
	int ok = 1;

	for (n = 0; n <= CM_MAX && ok; n++) {
		cl->ep = open_ep(cl->dom, info, cl->cq, ceq, (void *)n);
		fill(data, n, (unsigned)n);
		EXPECT(fi_connect(cl->ep, pep_name, data, n), 0);
		ri = server_connreq(n, (unsigned)n);
		if (!ri) {
			ok = 0;
			break;
		}
		fill(data, n, (unsigned)n + 1000);
		EXPECT(fi_reject(pep, ri->handle, data, CM_MAX + 1), -FI_EINVAL);
		EXPECT(fi_reject(pep, ri->handle, data, n), 0);
		/* Answered: a second answer is refused. */
		EXPECT(fi_reject(pep, ri->handle, NULL, 0), -FI_EINVAL);
		fi_freeinfo(ri);
		r = eq_wait(ceq, &event, NULL, 0, 10000);
		EXPECT(r, -FI_EAVAIL);
		memset(&err, 0, sizeof err);
		if (n % 2) {
			err.err_data = mine;
			err.err_data_size = sizeof mine;
		}
		EXPECT(fi_eq_readerr(ceq, &err, 0), sizeof err);
		EXPECT(err.err, FI_ECONNREFUSED);
		EXPECT_TRUE(err.fid == &cl->ep->fid);
		EXPECT_TRUE(err.context == (void *)n);
		EXPECT(err.err_data_size, n);
		EXPECT_TRUE(n == 0 || (err.err_data && same(err.err_data, n, (unsigned)n + 1000)));
		if (n % 2)
			EXPECT_TRUE(err.err_data == mine);
		/* Refused: this endpoint cannot connect again. */
		EXPECT(fi_connect(cl->ep, pep_name, NULL, 0), -FI_EISCONN);
		EXPECT(fi_close(&cl->ep->fid), 0);
		cl->ep = NULL;
		if (failures)
			ok = 0;
	}
	/* More CM data than FI_OPT_CM_DATA_SIZE. */
	cl->ep = open_ep(cl->dom, info, cl->cq, ceq, NULL);
	EXPECT(fi_connect(cl->ep, pep_name, data, CM_MAX + 1), -FI_EINVAL);
	EXPECT(fi_close(&cl->ep->fid), 0);
	cl->ep = NULL;
}

/* 100 endpoints connect at once: every request is reported once (the backlog of 64
 * holds the rest back until answered), every tenth accepted, the others refused with
 * their index as data. */
static void test_pending(struct conn *cl)
{
	static struct fid_ep *eps[PENDING];
	static int seen[PENDING];
	unsigned char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	struct fi_eq_cm_entry *e = (void *)buf;
	struct conn acc[PENDING / 10];
	struct fi_eq_err_entry err;
	unsigned char idx;
	uint32_t event;
	int i, got = 0, nacc = 0, connected = 0, refused = 0, sconnected = 0;
	struct timespec t0;
	ssize_t r;

	memset(acc, 0, sizeof acc);
	for (i = 0; i < PENDING; i++) {
		eps[i] = open_ep(cl->dom, info, cl->cq, ceq, (void *)(uintptr_t)(i + 1));
		idx = (unsigned char)i;
		EXPECT(fi_connect(eps[i], pep_name, &idx, 1), 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < PENDING && ms_since(&t0) < 30000) {
		r = eq_wait(seq, &event, buf, sizeof buf, 1000);
		if (r == -FI_EAGAIN)
			continue;
		if (r == sizeof *e && event == FI_CONNECTED) {
			/* An accepted one is up (accepting ones share this EQ). */
			sconnected++;
			continue;
		}
		EXPECT(r, sizeof *e + 1);
		EXPECT(event, FI_CONNREQ);
		if (r != sizeof *e + 1 || event != FI_CONNREQ)
			break;
		i = e->data[0];
		EXPECT(seen[i], 0);
		seen[i]++;
		got++;
		if (i % 10 == 0) {
			acc[nacc++] = accept_conn(e->info, NULL, 0);
		} else {
			idx = (unsigned char)i;
			EXPECT(fi_reject(pep, e->info->handle, &idx, 1), 0);
		}
		fi_freeinfo(e->info);
	}
	printf("pending: %d requests answered in %ld ms\n", got, ms_since(&t0));
	EXPECT(got, PENDING);
	/* Each connector's answer. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (connected + refused < got && ms_since(&t0) < 30000) {
		r = fi_eq_read(ceq, &event, buf, sizeof buf, 0);
		if (r == -FI_EAGAIN) {
			usleep(200);
			continue;
		}
		if (r == -FI_EAVAIL) {
			unsigned char d[CM_MAX];

			memset(&err, 0, sizeof err);
			err.err_data = d;
			err.err_data_size = sizeof d;
			EXPECT(fi_eq_readerr(ceq, &err, 0), sizeof err);
			EXPECT(err.err, FI_ECONNREFUSED);
			i = (int)(uintptr_t)err.context - 1;
			EXPECT(err.err_data_size, 1);
			EXPECT(d[0], i);
			EXPECT_TRUE(i % 10 != 0);
			refused++;
			continue;
		}
		EXPECT(r, sizeof *e);
		EXPECT(event, FI_CONNECTED);
		for (i = 0; i < PENDING; i++)
			if (e->fid == &eps[i]->fid)
				break;
		EXPECT_TRUE(i < PENDING && i % 10 == 0);
		connected++;
	}
	printf("pending: %d connected, %d refused in %ld ms\n", connected, refused, ms_since(&t0));
	EXPECT(connected, PENDING / 10);
	EXPECT(refused, PENDING - PENDING / 10);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (sconnected < nacc && ms_since(&t0) < 10000) {
		r = eq_wait(seq, &event, buf, sizeof buf, 1000);
		if (r == sizeof *e && event == FI_CONNECTED)
			sconnected++;
	}
	EXPECT(sconnected, PENDING / 10);
	for (i = 0; i < PENDING; i++)
		EXPECT(fi_close(&eps[i]->fid), 0);
	for (i = 0; i < nacc; i++)
		close_conn(&acc[i]);
	/* The closed connectors' peers see FI_SHUTDOWN (or an error entry); drop them. */
	for (;;) {
		r = eq_wait(seq, &event, buf, sizeof buf, 200);
		if (r == -FI_EAVAIL) {
			memset(&err, 0, sizeof err);
			r = fi_eq_readerr(seq, &err, 0);
		}
		if (r < 0)
			break;
	}
}

/* Three rounds of connect, one message, shutdown by the accepting side; the listener
 * stays. The server waits for FI_CONNREQ on the EQ's fd (fi_trywait, then poll). */
static void test_reconnect(struct conn *cl)
{
	struct fi_cq_tagged_entry e;
	struct fi_info *ri;
	struct pollfd p = { .events = POLLIN };
	struct fid *fids[1] = { &seq->fid };
	unsigned char msg[32], rx[32];
	int round, fd = -1, woke;
	struct timespec t0;
	struct conn s;

	EXPECT(fi_control(&seq->fid, FI_GETWAIT, &fd), 0);
	for (round = 0; round < 3; round++) {
		cl->ep = open_ep(cl->dom, info, cl->cq, ceq, NULL);
		/* Nothing yet: the EQ can be waited on. */
		EXPECT(fi_trywait(fabric, fids, 1), 0);
		EXPECT(fi_connect(cl->ep, pep_name, NULL, 0), 0);
		p.fd = fd;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		woke = 0;
		while (!woke && ms_since(&t0) < 10000)
			woke = poll(&p, 1, 100) == 1;
		EXPECT(woke, 1);
		ri = server_connreq(0, 0);
		if (!ri)
			return;
		s = accept_conn(ri, NULL, 0);
		fi_freeinfo(ri);
		expect_connected(ceq, cl->ep, 0, 0);
		expect_connected(seq, s.ep, 0, 0);
		fill(msg, sizeof msg, (unsigned)round);
		memset(rx, 0, sizeof rx);
		EXPECT(fi_recv(cl->ep, rx, sizeof rx, NULL, 0, rx), 0);
		EXPECT(fi_send(s.ep, msg, sizeof msg, NULL, 0, msg), 0);
		EXPECT(cq_wait(cl->cq, &e, 5000), 0);
		EXPECT_TRUE(same(rx, sizeof rx, (unsigned)round));
		EXPECT(cq_wait(s.cq, &e, 5000), 0);
		EXPECT(fi_shutdown(s.ep, 0), 0);
		expect_shutdown(ceq, cl->ep, 10000);
		expect_shutdown(seq, s.ep, 10000);
		EXPECT(fi_close(&cl->ep->fid), 0);
		cl->ep = NULL;
		close_conn(&s);
	}
}

/* The peer process: connects to the passive endpoint named in hex, then receives
 * until killed. */
static int child(const char *hex)
{
	struct fi_cq_tagged_entry e;
	struct fi_eq_cm_entry ce;
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fid_eq *eq = NULL;
	struct conn c = { 0 };
	static unsigned char rx[8][65536];
	unsigned char name[64];
	unsigned x;
	size_t i, n = strlen(hex) / 2;
	uint32_t event;
	int k;

	if (n > sizeof name)
		return 2;
	for (i = 0; i < n; i++) {
		sscanf(hex + 2 * i, "%2x", &x);
		name[i] = (unsigned char)x;
	}
	if (fi_eq_open(fabric, &eq_attr, &eq, NULL) || fi_domain(fabric, info, &c.dom, NULL))
		return 3;
	c.cq = open_cq(c.dom);
	c.ep = open_ep(c.dom, info, c.cq, eq, NULL);
	if (!c.ep || fi_enable(c.ep))
		return 3;
	for (k = 0; k < 8; k++)
		fi_recv(c.ep, rx[k], sizeof rx[k], NULL, 0, rx[k]);
	if (fi_connect(c.ep, name, NULL, 0) || eq_wait(eq, &event, &ce, sizeof ce, 10000) !=
	    sizeof ce || event != FI_CONNECTED)
		return 4;
	printf("child: connected\n");
	fflush(stdout);
	for (i = 0; i < 60000; i++) { /* killed long before */
		if (fi_cq_read(c.cq, &e, 1) == 1)
			fi_recv(c.ep, e.op_context, 65536, NULL, 0, e.op_context);
		usleep(100);
	}
	return 5;
}

/* A peer process killed while we send to it: FI_SHUTDOWN (or an error entry) within
 * the retry budget, and the sends in flight fail rather than hang. */
static void test_peer_killed(void)
{
	static unsigned char tx[65536];
	char hex[130];
	struct fi_cq_tagged_entry e;
	struct fi_eq_err_entry err;
	struct fi_eq_cm_entry ce;
	struct fi_info *ri;
	struct timespec t0;
	struct conn s;
	uint32_t event = 0;
	size_t i;
	int sent = 0, status, done = 0, inflight = 0;
	long took = -1;
	ssize_t r;
	pid_t pid;

	for (i = 0; i < pep_len; i++)
		sprintf(hex + 2 * i, "%02x", pep_name[i]);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", "cm_test", "child", hex, (char *)NULL);
		_exit(6);
	}
	EXPECT_TRUE(pid > 0);
	if (pid <= 0)
		return;
	ri = server_connreq(0, 0);
	if (!ri) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return;
	}
	s = accept_conn(ri, NULL, 0);
	fi_freeinfo(ri);
	expect_connected(seq, s.ep, 0, 0);
	fill(tx, sizeof tx, 9);
	/* Some data gets through, then the peer dies with sends in flight. */
	for (sent = 0; sent < 16; sent++) {
		EXPECT(fi_send(s.ep, tx, sizeof tx, NULL, 0, tx), 0);
		EXPECT(cq_wait(s.cq, &e, 10000), 0);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!done && ms_since(&t0) < 60000) {
		if (inflight < 4 && fi_send(s.ep, tx, sizeof tx, NULL, 0, tx) == 0)
			inflight++;
		while (inflight > 0 && fi_cq_read(s.cq, &e, 1) != -FI_EAGAIN)
			inflight--;
		r = fi_eq_read(seq, &event, &ce, sizeof ce, 0);
		if (r == sizeof ce && event == FI_SHUTDOWN) {
			EXPECT_TRUE(ce.fid == &s.ep->fid);
			done = 1;
		} else if (r == -FI_EAVAIL) {
			memset(&err, 0, sizeof err);
			EXPECT(fi_eq_readerr(seq, &err, 0), sizeof err);
			EXPECT_TRUE(err.fid == &s.ep->fid);
			done = 1;
		} else {
			usleep(1000);
		}
	}
	took = ms_since(&t0);
	EXPECT(done, 1);
	printf("peer killed: reported after %ld ms\n", took);
	/* No more sends on a connection that is over. */
	EXPECT(fi_send(s.ep, tx, 8, NULL, 0, tx), -FI_ENOTCONN);
	close_conn(&s);
}

struct reader {
	struct fid_eq *eq;
	atomic_int stop;
	long reads, unexpected;
};

static void *read_loop(void *arg)
{
	struct reader *r = arg;
	unsigned char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	uint32_t ev;

	/* Bounded: the main thread stops it after its loop (or at the cap). */
	while (!atomic_load(&r->stop) && r->reads < 50000000) {
		ssize_t n = fi_eq_read(r->eq, &ev, buf, sizeof buf, 0);

		r->reads++;
		if (n != -FI_EAGAIN)
			r->unexpected++;
	}
	return NULL;
}

/* Passive endpoints bound to an EQ that another thread keeps reading, each closed
 * while those reads run passes on its private domain: every call succeeds, nothing is
 * read but -FI_EAGAIN, and the EQ closes once they are gone. */
static void test_close_while_reading(void)
{
	struct fi_eq_attr attr = { .wait_obj = FI_WAIT_NONE };
	struct reader r = { 0 };
	pthread_t t;
	int i;

	EXPECT(fi_eq_open(fabric, &attr, &r.eq, NULL), 0);
	if (!r.eq)
		return;
	EXPECT(pthread_create(&t, NULL, read_loop, &r), 0);
	for (i = 0; i < 200; i++) {
		struct fid_pep *p = NULL;

		EXPECT(fi_passive_ep(fabric, info, &p, NULL), 0);
		if (!p)
			break;
		EXPECT(fi_pep_bind(p, &r.eq->fid, 0), 0);
		EXPECT(fi_listen(p), 0);
		EXPECT(fi_close(&p->fid), 0);
	}
	atomic_store(&r.stop, 1);
	EXPECT(pthread_join(t, NULL), 0);
	EXPECT_TRUE(r.reads > 0);
	EXPECT(r.unexpected, 0);
	EXPECT(fi_close(&r.eq->fid), 0);
}

/* A passive endpoint and its EQ closed with a CONNREQ nobody read (seen with FI_PEEK):
 * the provider frees that request's info (AddressSanitizer's leak check fails the
 * program otherwise). */
static void test_unread_connreq(struct conn *cl)
{
	struct fi_eq_attr attr = { .wait_obj = FI_WAIT_NONE };
	unsigned char buf[sizeof(struct fi_eq_cm_entry) + CM_MAX];
	unsigned char name[64];
	size_t len = sizeof name;
	struct fid_eq *eq = NULL;
	struct fid_pep *p = NULL;
	struct fid_ep *ep;
	struct timespec t0;
	uint32_t event = 0;
	ssize_t r;

	EXPECT(fi_eq_open(fabric, &attr, &eq, NULL), 0);
	EXPECT(fi_passive_ep(fabric, info, &p, NULL), 0);
	if (!eq || !p)
		return;
	EXPECT(fi_pep_bind(p, &eq->fid, 0), 0);
	EXPECT(fi_listen(p), 0);
	EXPECT(fi_getname(&p->fid, name, &len), 0);
	ep = open_ep(cl->dom, info, cl->cq, ceq, NULL);
	EXPECT(fi_connect(ep, name, "x", 1), 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		r = fi_eq_read(eq, &event, buf, sizeof buf, FI_PEEK);
	} while (r == -FI_EAGAIN && ms_since(&t0) < 10000 && !usleep(200));
	EXPECT(r, sizeof(struct fi_eq_cm_entry) + 1);
	EXPECT(event, FI_CONNREQ);
	EXPECT(fi_close(&ep->fid), 0);
	EXPECT(fi_close(&p->fid), 0);
	EXPECT(fi_close(&eq->fid), 0);
}

static struct fi_info *msg_info(void)
{
	struct fi_info *hints = fi_allocinfo(), *got = NULL;

	hints->fabric_attr->prov_name = strdup("nostd");
	hints->ep_attr->type = FI_EP_MSG;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &got), 0);
	fi_freeinfo(hints);
	return got;
}

/* Two connections accepted on one domain share one receive context (as ofi_rxm's
 * connected endpoints do): the buffers posted to it take both connections' messages,
 * each message once, intact and in order per connection, completing on the CQ of
 * the connection it came on; the context closes only after its endpoints. */
static void test_shared_rx(void)
{
	struct conn c[2];
	struct fid_domain *sdom = NULL;
	struct fid_ep *srx = NULL, *sep[2] = { NULL, NULL };
	struct fid_cq *scq[2] = { NULL, NULL };
	struct fi_cq_tagged_entry e;
	struct fi_eq_cm_entry ce;
	unsigned char bufs[4][64], msg[2][2][48];
	int used[4] = { 0, 0, 0, 0 };
	uint32_t event;
	int i, j, k, n;

	memset(c, 0, sizeof c);
	for (i = 0; i < 2; i++) {
		struct fi_info *ri;

		EXPECT(fi_domain(fabric, info, &c[i].dom, NULL), 0);
		if (!c[i].dom)
			return;
		c[i].cq = open_cq(c[i].dom);
		c[i].ep = open_ep(c[i].dom, info, c[i].cq, ceq, (void *)(long)(0xd0 + i));
		EXPECT(fi_enable(c[i].ep), 0);
		EXPECT(fi_connect(c[i].ep, pep_name, NULL, 0), 0);
		ri = server_connreq(0, 0);
		if (!ri)
			return;
		if (i == 0) {
			EXPECT(fi_domain(fabric, ri, &sdom, NULL), 0);
			if (!sdom)
				return;
			EXPECT(fi_srx_context(sdom, ri->rx_attr, &srx, (void *)0x58), 0);
			if (!srx)
				return;
		}
		ri->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
		scq[i] = open_cq(sdom);
		sep[i] = open_ep(sdom, ri, scq[i], seq, (void *)(long)(0xe0 + i));
		fi_freeinfo(ri);
		if (!sep[i])
			return;
		/* Opened for a shared receive context: it must be bound first. */
		EXPECT(fi_enable(sep[i]), -FI_EOPBADSTATE);
		EXPECT(fi_ep_bind(sep[i], &srx->fid, 0), 0);
		EXPECT(fi_enable(sep[i]), 0);
		EXPECT(fi_accept(sep[i], NULL, 0), 0);
		expect_connected(ceq, c[i].ep, 0, 0);
		expect_connected(seq, sep[i], 0, 0);
	}
	for (k = 0; k < 4; k++) {
		memset(bufs[k], 0, sizeof bufs[k]);
		EXPECT(fi_recv(srx, bufs[k], sizeof bufs[k], NULL, FI_ADDR_UNSPEC, bufs[k]), 0);
	}
	for (j = 0; j < 2; j++)
		for (i = 0; i < 2; i++) {
			fill(msg[i][j], sizeof msg[i][j], 40 + 2 * i + j);
			EXPECT(fi_send(c[i].ep, msg[i][j], sizeof msg[i][j], NULL, 0, msg[i][j]), 0);
		}
	for (i = 0; i < 2; i++) {
		for (j = 0; j < 2; j++) {
			EXPECT(cq_wait(c[i].cq, &e, 5000), 0);
			EXPECT(cq_wait(scq[i], &e, 5000), 0);
			EXPECT(e.len, sizeof msg[i][j]);
			for (k = 0, n = -1; k < 4; k++)
				if (e.op_context == bufs[k])
					n = k;
			EXPECT_TRUE(n >= 0 && !used[n]);
			if (n < 0 || used[n])
				continue;
			used[n] = 1;
			/* Connection i's messages, in its order, whichever buffers they took. */
			EXPECT_TRUE(same(bufs[n], sizeof msg[i][j], 40 + 2 * i + j));
		}
		EXPECT(fi_cq_read(scq[i], &e, 1), -FI_EAGAIN);
	}
	EXPECT(fi_close(&srx->fid), -FI_EBUSY);
	for (i = 0; i < 2; i++) {
		EXPECT(fi_shutdown(c[i].ep, 0), 0);
		memset(&ce, 0, sizeof ce);
		EXPECT(eq_wait(seq, &event, &ce, sizeof ce, 10000), sizeof ce);
		EXPECT(event, FI_SHUTDOWN);
		EXPECT_TRUE(ce.fid == &sep[0]->fid || ce.fid == &sep[1]->fid);
	}
	for (i = 0; i < 2; i++) {
		EXPECT(fi_close(&sep[i]->fid), 0);
		EXPECT(fi_close(&scq[i]->fid), 0);
		memset(&ce, 0, sizeof ce);
		EXPECT(eq_wait(ceq, &event, &ce, sizeof ce, 10000), sizeof ce);
		EXPECT(event, FI_SHUTDOWN);
		EXPECT_TRUE(ce.fid == &c[0].ep->fid || ce.fid == &c[1].ep->fid);
	}
	for (i = 0; i < 2; i++)
		close_conn(&c[i]);
	EXPECT(fi_close(&srx->fid), 0);
	EXPECT(fi_close(&sdom->fid), 0);
}

int main(int argc, char **argv)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_FD };
	struct fi_info *rdm, *hints;
	struct conn cl = { 0 };
	size_t opt, len = sizeof opt;

	info = msg_info();
	if (!info)
		return 1;
	EXPECT(info->ep_attr->type, FI_EP_MSG);
	EXPECT(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	if (!fabric)
		return 1;
	if (argc == 3 && !strcmp(argv[1], "child"))
		return child(argv[2]);

	/* Plain RDM hints still get RDM first. */
	hints = fi_allocinfo();
	hints->fabric_attr->prov_name = strdup("nostd");
	rdm = NULL;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &rdm), 0);
	EXPECT_TRUE(rdm && rdm->ep_attr->type == FI_EP_RDM);
	fi_freeinfo(rdm);
	fi_freeinfo(hints);

	EXPECT(fi_eq_open(fabric, &eq_attr, &seq, NULL), 0);
	eq_attr.wait_obj = FI_WAIT_UNSPEC;
	EXPECT(fi_eq_open(fabric, &eq_attr, &ceq, NULL), 0);
	EXPECT(fi_passive_ep(fabric, info, &pep, (void *)0x9e), 0);
	if (!seq || !ceq || !pep)
		return 1;
	/* Not listening without an EQ. */
	EXPECT(fi_listen(pep), -FI_ENOEQ);
	EXPECT(fi_pep_bind(pep, &seq->fid, 0), 0);
	EXPECT(fi_pep_bind(pep, &seq->fid, 0), -FI_EINVAL);
	EXPECT(fi_listen(pep), 0);
	EXPECT(fi_listen(pep), -FI_EOPBADSTATE);
	EXPECT(fi_getopt(&pep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &opt, &len), 0);
	EXPECT(opt, CM_MAX);
	pep_len = sizeof pep_name;
	EXPECT(fi_getname(&pep->fid, pep_name, &pep_len), 0);
	EXPECT(pep_len, 16);
	/* Bound: the EQ cannot close. */
	EXPECT(fi_close(&seq->fid), -FI_EBUSY);

	EXPECT(fi_domain(fabric, info, &cl.dom, NULL), 0);
	if (!cl.dom)
		return 1;
	cl.cq = open_cq(cl.dom);
	{
		struct fid_ep *ep = open_ep(cl.dom, info, cl.cq, ceq, NULL);

		len = sizeof opt;
		EXPECT(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &opt, &len), 0);
		EXPECT(opt, CM_MAX);
		/* fi_accept without a request; fi_listen / fi_reject on an active endpoint. */
		EXPECT(fi_accept(ep, NULL, 0), -FI_EINVAL);
		EXPECT(fi_close(&ep->fid), 0);
	}

	test_connect(&cl);
	printf("connect: %d checks, %d failed\n", checks, failures);
	test_reject(&cl);
	printf("reject: %d checks, %d failed\n", checks, failures);
	test_pending(&cl);
	printf("pending: %d checks, %d failed\n", checks, failures);
	test_reconnect(&cl);
	printf("reconnect: %d checks, %d failed\n", checks, failures);
	test_peer_killed();
	test_close_while_reading();
	printf("close while reading: %d checks, %d failed\n", checks, failures);
	test_unread_connreq(&cl);
	printf("unread connreq: %d checks, %d failed\n", checks, failures);
	test_shared_rx();
	printf("shared rx: %d checks, %d failed\n", checks, failures);

	close_conn(&cl);
	EXPECT(fi_close(&pep->fid), 0);
	EXPECT(fi_close(&seq->fid), 0);
	EXPECT(fi_close(&ceq->fid), 0);
	EXPECT(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
