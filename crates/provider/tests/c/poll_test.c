/*
 * Poll sets and wait sets of the nostd provider (fi_poll(3)) through the system
 * libfabric: an RDM endpoint sending to itself, its transmit and receive CQs and a
 * send counter in a poll set (each named when it has an event, none when idle), the
 * same objects in wait sets of every kind (fi_wait, FI_GETWAIT, fi_trywait), and the
 * refusals (-FI_EBUSY, -FI_EINVAL, -FI_EALREADY); and asynchronous AV inserts (FI_EVENT),
 * whose completions come to an EQ in a wait set; and a critical endpoint error on the
 * EQ: a peer process killed and restarted on the same address while nothing was in
 * flight to it.
 *
 * Run with FI_PROVIDER_PATH=<dir holding libnostd-fi.so> FI_PROVIDER=nostd.
 * Prints one line per failed check; exits 0 when every check passed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#include "expect.h"

static long ms_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* An RDM endpoint that sends to itself, with its objects. */
struct rig {
	struct fid_domain *domain;
	struct fid_cq *txcq, *rxcq;
	struct fid_cntr *cntr;
	struct fid_av *av;
	struct fid_ep *ep;
	fi_addr_t self;
	char tx[64], rx[64];
};

/* Opens the rig's objects; CQs and counter with `wait` (a wait set when `set`). */
static int open_rig(struct fid_fabric *fabric, struct fi_info *info, struct rig *r,
		    enum fi_wait_obj wait, struct fid_wait *set)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = wait,
				      .wait_set = set };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = wait,
					  .wait_set = set };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	char name[64];
	size_t len = sizeof name;

	memset(r, 0, sizeof *r);
	EXPECT(fi_domain(fabric, info, &r->domain, NULL), 0);
	if (!r->domain)
		return -1;
	EXPECT(fi_cq_open(r->domain, &cq_attr, &r->txcq, &r->txcq), 0);
	EXPECT(fi_cq_open(r->domain, &cq_attr, &r->rxcq, &r->rxcq), 0);
	EXPECT(fi_cntr_open(r->domain, &cntr_attr, &r->cntr, &r->cntr), 0);
	EXPECT(fi_av_open(r->domain, &av_attr, &r->av, NULL), 0);
	EXPECT(fi_endpoint(r->domain, info, &r->ep, NULL), 0);
	if (!r->txcq || !r->rxcq || !r->cntr || !r->av || !r->ep)
		return -1;
	EXPECT(fi_ep_bind(r->ep, &r->txcq->fid, FI_TRANSMIT), 0);
	EXPECT(fi_ep_bind(r->ep, &r->rxcq->fid, FI_RECV), 0);
	EXPECT(fi_ep_bind(r->ep, &r->cntr->fid, FI_SEND), 0);
	EXPECT(fi_ep_bind(r->ep, &r->av->fid, 0), 0);
	EXPECT(fi_enable(r->ep), 0);
	EXPECT(fi_getname(&r->ep->fid, name, &len), 0);
	EXPECT(fi_av_insert(r->av, name, 1, &r->self, 0, NULL), 1);
	return 0;
}

static void close_rig(struct rig *r)
{
	if (r->ep)
		EXPECT(fi_close(&r->ep->fid), 0);
	if (r->av)
		EXPECT(fi_close(&r->av->fid), 0);
	if (r->cntr)
		EXPECT(fi_close(&r->cntr->fid), 0);
	if (r->rxcq)
		EXPECT(fi_close(&r->rxcq->fid), 0);
	if (r->txcq)
		EXPECT(fi_close(&r->txcq->fid), 0);
	if (r->domain)
		EXPECT(fi_close(&r->domain->fid), 0);
}

/* A receive, then a send to itself. */
static void post_pair(struct rig *r)
{
	strcpy(r->tx, "poll set");
	memset(r->rx, 0, sizeof r->rx);
	EXPECT(fi_recv(r->ep, r->rx, sizeof r->rx, NULL, FI_ADDR_UNSPEC, r->rx), 0);
	EXPECT(fi_send(r->ep, r->tx, 9, NULL, r->self, r->tx), 0);
}

/* fi_poll until `want` distinct members were named or 3 s passed; `seen` gets 1 for
 * txcq, 2 for rxcq, 4 for the counter. */
static int poll_for(struct fid_poll *ps, struct rig *r, int want)
{
	struct timespec t0;
	void *ctx[8];
	int seen = 0, n, i;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((seen & want) != want && ms_since(&t0) < 3000) {
		n = fi_poll(ps, ctx, 8);
		EXPECT_TRUE(n >= 0);
		for (i = 0; i < n; i++) {
			if (ctx[i] == &r->txcq)
				seen |= 1;
			else if (ctx[i] == &r->rxcq)
				seen |= 2;
			else if (ctx[i] == &r->cntr)
				seen |= 4;
			else
				EXPECT_TRUE(!"unknown context");
		}
	}
	return seen;
}

static void test_poll_set(struct fid_fabric *fabric, struct fi_info *info)
{
	struct fi_poll_attr attr = { .flags = 0 }, bad = { .flags = 1 };
	struct fid_poll *ps = NULL;
	struct fi_cq_entry e;
	struct rig r;
	void *ctx[8];
	int i, idle = 0;

	if (open_rig(fabric, info, &r, FI_WAIT_NONE, NULL) == 0) {
		EXPECT(fi_poll_open(r.domain, &bad, &ps), -FI_EINVAL);
		EXPECT(fi_poll_open(r.domain, &attr, NULL), -FI_EINVAL);
		EXPECT(fi_poll_open(r.domain, &attr, &ps), 0);
	}
	if (!ps) {
		close_rig(&r);
		return;
	}
	EXPECT_TRUE(ps->fid.fclass == FI_CLASS_POLL);
	EXPECT(fi_poll_add(ps, &r.txcq->fid, 0), 0);
	EXPECT(fi_poll_add(ps, &r.rxcq->fid, 0), 0);
	EXPECT(fi_poll_add(ps, &r.cntr->fid, 0), 0);
	EXPECT(fi_poll_add(ps, &r.txcq->fid, 0), -FI_EALREADY);
	EXPECT(fi_poll_add(ps, &r.domain->fid, 0), -FI_EINVAL);
	EXPECT(fi_poll_add(ps, NULL, 0), -FI_EINVAL);
	EXPECT(fi_poll_add(ps, &r.av->fid, 0), -FI_EINVAL);
	EXPECT(fi_poll(ps, NULL, 1), -FI_EINVAL);
	EXPECT(fi_poll(ps, ctx, -1), -FI_EINVAL);

	/* Idle: nothing, however often it is asked. */
	for (i = 0; i < 100; i++)
		idle += fi_poll(ps, ctx, 8);
	EXPECT(idle, 0);

	/* A message to itself: both CQs and the send counter are named. */
	post_pair(&r);
	EXPECT(poll_for(ps, &r, 7), 7);
	/* The CQs stay named until read; the counter was reported once. */
	EXPECT(fi_poll(ps, ctx, 8), 2);
	EXPECT(fi_poll(ps, ctx, 1), 1);
	EXPECT(fi_cq_read(r.txcq, &e, 1), 1);
	EXPECT_TRUE(e.op_context == r.tx);
	EXPECT(fi_poll(ps, ctx, 8), 1);
	EXPECT_TRUE(ctx[0] == &r.rxcq);
	EXPECT(fi_cq_read(r.rxcq, &e, 1), 1);
	EXPECT_TRUE(e.op_context == r.rx);
	EXPECT(strcmp(r.rx, "poll set"), 0);
	EXPECT(fi_poll(ps, ctx, 8), 0);
	EXPECT(fi_cntr_read(r.cntr), 1);
	/* fi_cntr_add changes the counter: news again, once. */
	EXPECT(fi_cntr_add(r.cntr, 1), 0);
	EXPECT(fi_poll(ps, ctx, 8), 1);
	EXPECT_TRUE(ctx[0] == &r.cntr);
	EXPECT(fi_poll(ps, ctx, 8), 0);

	/* Members cannot be closed; the set cannot be closed with members. */
	EXPECT(fi_close(&r.txcq->fid), -FI_EBUSY);
	EXPECT(fi_close(&ps->fid), -FI_EBUSY);
	EXPECT(fi_poll_del(ps, &r.txcq->fid, 0), 0);
	EXPECT(fi_poll_del(ps, &r.txcq->fid, 0), -FI_EINVAL);
	EXPECT(fi_poll_del(ps, &r.rxcq->fid, 1), -FI_EINVAL);
	EXPECT(fi_poll_del(ps, &r.rxcq->fid, 0), 0);
	/* Only the counter is left: a send names it alone. */
	post_pair(&r);
	EXPECT(poll_for(ps, &r, 4), 4);
	EXPECT(fi_poll_del(ps, &r.cntr->fid, 0), 0);
	EXPECT(fi_close(&ps->fid), 0);
	/* The second pair's completions (the counter came with the send's). */
	EXPECT(fi_cq_read(r.txcq, &e, 1), 1);
	for (i = 0; i < 1000 && fi_cq_read(r.rxcq, &e, 1) == -FI_EAGAIN; i++)
		usleep(1000);
	EXPECT_TRUE(e.op_context == r.rx);
	close_rig(&r);
}

/* Reads a completion from `cq` into `e`, fi_wait-ing on `ws` between tries (at most
 * 20 waits of up to a second); returns what the last read returned. */
static ssize_t wait_read(struct fid_wait *ws, struct fid_cq *cq, struct fi_cq_entry *e)
{
	ssize_t k = -FI_EAGAIN;
	int i, w;

	for (i = 0; i < 20 && k == -FI_EAGAIN; i++) {
		k = fi_cq_read(cq, e, 1);
		if (k == -FI_EAGAIN) {
			w = fi_wait(ws, 1000);
			EXPECT_TRUE(w == 0 || w == -FI_ETIMEDOUT);
		}
	}
	return k;
}

/* A wait set of `kind` over the rig's CQs and counter and an EQ. */
static void test_wait_set(struct fid_fabric *fabric, struct fi_info *info, enum fi_wait_obj kind)
{
	struct fi_wait_attr attr = { .wait_obj = kind };
	struct fi_eq_attr eq_attr = { .flags = FI_WRITE, .wait_obj = FI_WAIT_SET };
	struct fi_cq_attr cq_attr = { .wait_obj = FI_WAIT_SET };
	struct fid_wait *ws = NULL;
	struct fid_eq *eq = NULL;
	struct fid_cq *cq = NULL;
	struct fid *fids[1];
	struct fi_cq_entry e;
	struct fi_wait_pollfd pfds = { 0 };
	struct pollfd fds[8];
	enum fi_wait_obj got = FI_WAIT_NONE;
	struct timespec t0;
	struct rig r;
	uint32_t event;
	char buf[64];
	int fd = -1, i, n;

	printf("wait set of kind %d\n", kind);
	EXPECT(fi_wait_open(fabric, &attr, &ws), 0);
	if (!ws)
		return;
	EXPECT_TRUE(ws->fid.fclass == FI_CLASS_WAIT);
	EXPECT(fi_control(&ws->fid, FI_GETWAITOBJ, &got), 0);
	EXPECT(got, kind);
	eq_attr.wait_set = ws;
	EXPECT(fi_eq_open(fabric, &eq_attr, &eq, &eq), 0);
	if (open_rig(fabric, info, &r, FI_WAIT_SET, ws) != 0 || !eq)
		goto out;
	/* FI_WAIT_SET needs one of our wait sets. */
	EXPECT(fi_cq_open(r.domain, &cq_attr, &cq, NULL), -FI_EINVAL);
	cq_attr.wait_set = (struct fid_wait *)r.domain;
	EXPECT(fi_cq_open(r.domain, &cq_attr, &cq, NULL), -FI_EINVAL);
	/* Members wait through the set only. */
	EXPECT(fi_cq_sread(r.txcq, &e, 1, NULL, 0), -FI_ENOSYS);
	EXPECT(fi_cntr_wait(r.cntr, 1, 0), -FI_ENOSYS);
	EXPECT(fi_control(&r.txcq->fid, FI_GETWAITOBJ, &got), 0);
	EXPECT(got, kind);
	EXPECT(fi_close(&ws->fid), -FI_EBUSY);

	/* Idle: fi_wait times out, fi_trywait says blocking is safe. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	EXPECT(fi_wait(ws, 20), -FI_ETIMEDOUT);
	EXPECT_TRUE(ms_since(&t0) >= 19);
	fids[0] = &ws->fid;
	EXPECT(fi_trywait(fabric, fids, 1), 0);

	if (kind == FI_WAIT_FD || kind == FI_WAIT_UNSPEC) {
		EXPECT(fi_control(&ws->fid, FI_GETWAIT, &fd), 0);
		EXPECT(fi_control(&r.rxcq->fid, FI_GETWAIT, &n), 0);
		EXPECT(n, fd);
		fds[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
		EXPECT(poll(fds, 1, 0), 0);
		n = epoll_create1(0);
		{
			struct epoll_event ev = { .events = EPOLLIN }, out;

			EXPECT(epoll_ctl(n, EPOLL_CTL_ADD, fd, &ev), 0);
			/* The set's fd wakes an epoll of the application's on an event. */
			EXPECT(fi_eq_write(eq, FI_NOTIFY, buf, 8, 0), 8);
			EXPECT(epoll_wait(n, &out, 1, 3000), 1);
		}
		close(n);
		EXPECT(fi_trywait(fabric, fids, 1), -FI_EAGAIN);
		EXPECT(fi_eq_read(eq, &event, buf, sizeof buf, 0), 8);
		EXPECT(event, FI_NOTIFY);
		EXPECT(fi_trywait(fabric, fids, 1), 0);
		EXPECT(poll(fds, 1, 0), 0);
		/* Frames and completions wake it too. */
		post_pair(&r);
		EXPECT(poll(fds, 1, 3000), 1);
	} else if (kind == FI_WAIT_POLLFD) {
		EXPECT(fi_control(&ws->fid, FI_GETWAIT, &pfds), -FI_ETOOSMALL);
		EXPECT(pfds.nfds, 4); /* the EQ, two CQs, the counter */
		pfds.fd = fds;
		EXPECT(fi_control(&ws->fid, FI_GETWAIT, &pfds), 0);
		EXPECT(pfds.nfds, 4);
		EXPECT(poll(fds, 4, 0), 0);
		post_pair(&r);
		EXPECT_TRUE(poll(fds, 4, 3000) >= 1);
	} else {
		EXPECT(fi_control(&ws->fid, FI_GETWAIT, &fd), -FI_ENODATA);
		post_pair(&r);
	}
	EXPECT(fi_eq_write(eq, FI_NOTIFY, buf, 8, 0), 8);
	EXPECT(fi_wait(ws, 3000), 0);
	EXPECT(fi_eq_read(eq, &event, buf, sizeof buf, 0), 8);
	EXPECT(wait_read(ws, r.txcq, &e), 1);
	EXPECT_TRUE(e.op_context == r.tx);
	EXPECT(wait_read(ws, r.rxcq, &e), 1);
	EXPECT_TRUE(e.op_context == r.rx);
	EXPECT(strcmp(r.rx, "poll set"), 0);
	EXPECT(fi_cntr_read(r.cntr), 1);
	/* Everything read: idle again. */
	EXPECT(fi_wait(ws, 10), -FI_ETIMEDOUT);
	if (kind == FI_WAIT_POLLFD) {
		i = (int)pfds.change_index;
		EXPECT(fi_control(&ws->fid, FI_GETWAIT, &pfds), 0);
		EXPECT(pfds.change_index, i);
	}
out:
	close_rig(&r);
	if (eq)
		EXPECT(fi_close(&eq->fid), 0);
	if (kind == FI_WAIT_POLLFD) {
		i = (int)pfds.change_index;
		pfds.nfds = 0;
		EXPECT(fi_control(&ws->fid, FI_GETWAIT, &pfds), 0);
		EXPECT(pfds.nfds, 0);
		EXPECT_TRUE(pfds.change_index > (uint64_t)i);
	}
	EXPECT(fi_close(&ws->fid), 0);
}

static void test_wait_open(struct fid_fabric *fabric)
{
	struct fi_wait_attr attr = { .wait_obj = FI_WAIT_FD, .flags = 1 };
	struct fid_wait *ws = NULL;

	EXPECT(fi_wait_open(fabric, NULL, &ws), -FI_EINVAL);
	EXPECT(fi_wait_open(fabric, &attr, &ws), -FI_EINVAL);
	attr.flags = 0;
	EXPECT(fi_wait_open(fabric, &attr, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_MUTEX_COND;
	EXPECT(fi_wait_open(fabric, &attr, &ws), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_NONE;
	EXPECT(fi_wait_open(fabric, &attr, &ws), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_SET;
	EXPECT(fi_wait_open(fabric, &attr, &ws), -FI_EINVAL);
	attr.wait_obj = 99;
	EXPECT(fi_wait_open(fabric, &attr, &ws), -FI_EINVAL);
	EXPECT_TRUE(ws == NULL);
}

/* FI_EVENT (fi_av(3)): inserts return 0 and complete on the bound EQ, one error entry
 * per failed address, then FI_AV_COMPLETE with the count; the EQ's wait set wakes. */
static void test_av_event(struct fid_fabric *fabric, struct fi_info *info)
{
	struct fi_wait_attr wattr = { .wait_obj = FI_WAIT_FD };
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_SET };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .flags = FI_EVENT };
	struct fid_domain *domain = NULL;
	struct fid_wait *ws = NULL;
	struct fid_eq *eq = NULL;
	struct fid_av *av = NULL;
	struct sockaddr_in addrs[3];
	fi_addr_t fa[3];
	struct fi_eq_entry entry;
	struct fi_eq_err_entry err;
	uint32_t event;
	int ctx, fd = -1;
	struct pollfd pfd;

	EXPECT(fi_wait_open(fabric, &wattr, &ws), 0);
	EXPECT(fi_domain(fabric, info, &domain, NULL), 0);
	if (!ws || !domain)
		return;
	eq_attr.wait_set = ws;
	EXPECT(fi_eq_open(fabric, &eq_attr, &eq, NULL), 0);
	EXPECT(fi_av_open(domain, &av_attr, &av, NULL), 0);
	if (!eq || !av)
		goto out;
	memset(addrs, 0, sizeof addrs);
	addrs[0].sin_family = AF_INET;
	addrs[0].sin_port = htons(4711);
	addrs[0].sin_addr.s_addr = htonl(0x7f000001);
	addrs[1].sin_family = 12345; /* not an address */
	addrs[2] = addrs[0];
	addrs[2].sin_port = htons(4712);
	EXPECT(fi_av_insert(av, addrs, 3, fa, 0, &ctx), -FI_ENOEQ);
	EXPECT(fi_av_bind(av, &domain->fid, 0), -FI_EINVAL);
	EXPECT(fi_av_bind(av, &eq->fid, 0), 0);
	EXPECT(fi_close(&eq->fid), -FI_EBUSY);
	EXPECT(fi_av_insert(av, addrs, 3, fa, FI_SYNC_ERR, &ctx), -FI_EINVAL);
	EXPECT(fi_control(&ws->fid, FI_GETWAIT, &fd), 0);
	pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
	EXPECT(fi_wait(ws, 0), -FI_ETIMEDOUT); /* arms the EQ */
	EXPECT(fi_av_insert(av, addrs, 3, fa, 0, &ctx), 0);
	EXPECT(poll(&pfd, 1, 1000), 1);
	EXPECT(fi_eq_read(eq, &event, &entry, sizeof entry, 0), -FI_EAVAIL);
	EXPECT(fi_eq_readerr(eq, &err, 0), sizeof err);
	EXPECT_TRUE(err.fid == &av->fid);
	EXPECT_TRUE(err.context == &ctx);
	EXPECT(err.data, 1);
	EXPECT_TRUE(err.err > 0);
	EXPECT(fi_eq_read(eq, &event, &entry, sizeof entry, 0), sizeof entry);
	EXPECT(event, FI_AV_COMPLETE);
	EXPECT_TRUE(entry.fid == &av->fid);
	EXPECT_TRUE(entry.context == &ctx);
	EXPECT(entry.data, 2);
	EXPECT_TRUE(fa[0] != FI_ADDR_NOTAVAIL && fa[2] != FI_ADDR_NOTAVAIL);
	EXPECT(fa[1], FI_ADDR_NOTAVAIL);
	/* An insert of nothing completes too. */
	EXPECT(fi_av_insert(av, addrs, 0, fa, 0, &ctx), 0);
	EXPECT(fi_eq_read(eq, &event, &entry, sizeof entry, 0), sizeof entry);
	EXPECT(event, FI_AV_COMPLETE);
	EXPECT(entry.data, 0);
	EXPECT(fi_eq_read(eq, &event, &entry, sizeof entry, 0), -FI_EAGAIN);
out:
	if (av)
		EXPECT(fi_close(&av->fid), 0);
	if (eq)
		EXPECT(fi_close(&eq->fid), 0);
	EXPECT(fi_close(&domain->fid), 0);
	EXPECT(fi_close(&ws->fid), 0);
}

/* An RDM endpoint on the loopback domain at `port` (0: any). */
static struct fi_info *loopback_info(const char *port)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;

	hints->fabric_attr->prov_name = strdup("nostd");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", port, FI_SOURCE, hints, &info), 0);
	fi_freeinfo(hints);
	return info;
}

/* The peer process: an endpoint at `port` sends one message to the address in hex
 * `peer` and, once it completed (the session is established), waits to be killed. */
static int child(const char *port, const char *peer)
{
	struct fi_info *info = loopback_info(port);
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_UNSPEC };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_cq *cq = NULL;
	struct fid_av *av = NULL;
	struct fid_ep *ep = NULL;
	unsigned char addr[64];
	struct fi_cq_entry e;
	fi_addr_t to;
	size_t i, n = strlen(peer) / 2;
	unsigned x;
	char msg[] = "restart";

	if (!info || n > sizeof addr)
		return 2;
	for (i = 0; i < n; i++) {
		sscanf(peer + 2 * i, "%2x", &x);
		addr[i] = (unsigned char)x;
	}
	if (fi_fabric(info->fabric_attr, &fabric, NULL) || fi_domain(fabric, info, &domain, NULL) ||
	    fi_cq_open(domain, &cq_attr, &cq, NULL) || fi_av_open(domain, &av_attr, &av, NULL) ||
	    fi_endpoint(domain, info, &ep, NULL) ||
	    fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV) || fi_ep_bind(ep, &av->fid, 0) ||
	    fi_enable(ep) || fi_av_insert(av, addr, 1, &to, 0, NULL) != 1 ||
	    fi_send(ep, msg, sizeof msg, NULL, to, msg) ||
	    fi_cq_sread(cq, &e, 1, NULL, 5000) != 1)
		return 3;
	printf("child: sent\n");
	fflush(stdout);
	for (i = 0; i < 600; i++) { /* killed long before */
		fi_cq_read(cq, &e, 0);
		usleep(10000);
	}
	return 4;
}

/* Runs this program as the peer at `port`, sending to `name`. */
static pid_t spawn_child(const char *port, const unsigned char *name, size_t len)
{
	char hex[130];
	size_t i;
	pid_t pid;

	for (i = 0; i < len && i < 64; i++)
		sprintf(hex + 2 * i, "%02x", name[i]);
	pid = fork();
	if (pid == 0) {
		execl("/proc/self/exe", "poll_test", "child", port, hex, (char *)NULL);
		_exit(5);
	}
	return pid;
}

/* A critical error (fi_endpoint(3)): the peer process dies without closing and starts
 * again on the same address; nothing was in flight to it, so only the EQ bound to our
 * endpoint reports the reset session: fi_eq_readerr gives the endpoint and
 * FI_ECONNRESET. */
static void test_critical(void)
{
	struct fi_info *info = loopback_info(NULL);
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT, .wait_obj = FI_WAIT_UNSPEC };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_eq *eq = NULL;
	struct fid_cq *cq = NULL;
	struct fid_av *av = NULL;
	struct fid_ep *ep = NULL;
	struct fi_eq_err_entry err;
	struct fi_cq_entry e;
	struct timespec t0;
	unsigned char name[64];
	char rx[64], port[16];
	size_t len = sizeof name;
	uint32_t event;
	pid_t pid;
	int round, status, fd = -1;
	struct fid *eq_fid;
	struct pollfd pfd;
	ssize_t k = -FI_EAGAIN;

	if (!info)
		return;
	snprintf(port, sizeof port, "%d", 20000 + (int)(getpid() % 20000));
	EXPECT(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	if (!fabric)
		return;
	EXPECT(fi_eq_open(fabric, &eq_attr, &eq, NULL), 0);
	EXPECT(fi_domain(fabric, info, &domain, NULL), 0);
	if (!eq || !domain)
		return;
	EXPECT(fi_cq_open(domain, &cq_attr, &cq, NULL), 0);
	EXPECT(fi_av_open(domain, &av_attr, &av, NULL), 0);
	EXPECT(fi_endpoint(domain, info, &ep, (void *)0xe7), 0);
	if (!cq || !av || !ep)
		return;
	EXPECT(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_ep_bind(ep, &av->fid, 0), 0);
	EXPECT(fi_ep_bind(ep, &eq->fid, 0), 0);
	EXPECT(fi_enable(ep), 0);
	EXPECT(fi_getname(&ep->fid, name, &len), 0);
	/* A waiter sleeps on the EQ's descriptor: the pass that records a critical
	 * error makes it readable. */
	EXPECT(fi_control(&eq->fid, FI_GETWAIT, &fd), 0);
	EXPECT_TRUE(fd >= 0);
	eq_fid = &eq->fid;
	for (round = 0; round < 2; round++) {
		memset(rx, 0, sizeof rx);
		EXPECT(fi_recv(ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, rx), 0);
		pid = spawn_child(port, name, len);
		EXPECT_TRUE(pid > 0);
		EXPECT(fi_cq_sread(cq, &e, 1, NULL, 5000), 1);
		EXPECT(strcmp(rx, "restart"), 0);
		if (round == 0) {
			/* A healthy session: no error on the EQ, and nothing to wake for. */
			EXPECT(fi_eq_read(eq, &event, NULL, 0, 0), -FI_EAGAIN);
			EXPECT(fi_trywait(fabric, &eq_fid, 1), 0);
			pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
			EXPECT(poll(&pfd, 1, 0), 0);
		} else {
			/* The restarted peer reset the session in a pass of the read
			 * above: the EQ's descriptor is readable before the EQ is read. */
			pfd = (struct pollfd){ .fd = fd, .events = POLLIN };
			EXPECT(poll(&pfd, 1, 0), 1);
			clock_gettime(CLOCK_MONOTONIC, &t0);
			do {
				k = fi_eq_readerr(eq, &err, 0);
			} while (k == -FI_EAGAIN && ms_since(&t0) < 5000 && !usleep(1000));
			EXPECT(k, sizeof err);
			EXPECT_TRUE(err.fid == &ep->fid);
			EXPECT_TRUE(err.context == (void *)0xe7);
			EXPECT(err.err, FI_ECONNRESET);
			EXPECT(err.data, 1);
			EXPECT(fi_eq_readerr(eq, &err, 0), -FI_EAGAIN);
		}
		/* Dies without closing anything. */
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
	}
	EXPECT(fi_close(&ep->fid), 0);
	EXPECT(fi_close(&av->fid), 0);
	EXPECT(fi_close(&cq->fid), 0);
	EXPECT(fi_close(&domain->fid), 0);
	EXPECT(fi_close(&eq->fid), 0);
	EXPECT(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
}

int main(int argc, char **argv)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fabric = NULL;

	if (argc == 4 && !strcmp(argv[1], "child")) {
		fi_freeinfo(hints);
		return child(argv[2], argv[3]);
	}
	hints->fabric_attr->prov_name = strdup("nostd");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), 0);
	fi_freeinfo(hints);
	if (!info)
		return 1;
	EXPECT(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	if (!fabric)
		return 1;
	test_poll_set(fabric, info);
	test_wait_open(fabric);
	test_wait_set(fabric, info, FI_WAIT_FD);
	test_wait_set(fabric, info, FI_WAIT_UNSPEC);
	test_wait_set(fabric, info, FI_WAIT_POLLFD);
	test_wait_set(fabric, info, FI_WAIT_YIELD);
	test_av_event(fabric, info);
	EXPECT(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	test_critical();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
