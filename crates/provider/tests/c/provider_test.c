/*
 * The nostd provider through the system libfabric, as an application uses it:
 * fi_getinfo -> fi_fabric -> fi_domain -> CQs of every format, an EQ, an AV, a
 * counter, memory regions; closes in the wrong order (-FI_EBUSY), then in the
 * right one; NULLs where an application might pass them (-FI_EINVAL, no crash);
 * RDM and DGRAM endpoints talking to themselves: lifecycle, bindings, names,
 * options, operation flags, aliases, messages, tagged messages with FI_PEEK /
 * FI_CLAIM / FI_DISCARD, fi_cancel, counters, FD wait objects with fi_trywait,
 * RMA writes and reads and atomics between two domains.
 *
 * Run with FI_PROVIDER_PATH=<dir holding libnostd-fi.so> FI_PROVIDER=nostd.
 * Prints one line per check; exits 0 when every check passed.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_tagged.h>
#include <poll.h>
#include <time.h>

#include "expect.h"

static struct fi_info *getinfo(enum fi_ep_type type)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;

	hints->fabric_attr->prov_name = strdup("nostd");
	hints->ep_attr->type = type;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), 0);
	fi_freeinfo(hints);
	return info;
}

static void test_getinfo(void)
{
	struct fi_info *hints, *info = NULL, *cur;
	int n = 0;

	info = getinfo(FI_EP_DGRAM);
	EXPECT_TRUE(info != NULL);
	for (cur = info; cur; cur = cur->next) {
		n++;
		EXPECT(cur->ep_attr->type, FI_EP_DGRAM);
		EXPECT(strcmp(cur->fabric_attr->prov_name, "nostd"), 0);
		EXPECT(strcmp(cur->fabric_attr->name, "nostd"), 0);
		EXPECT(cur->fabric_attr->prov_version, FI_VERSION(1, 0));
		EXPECT(cur->fabric_attr->api_version, FI_VERSION(1, 17));
		EXPECT(cur->addr_format, FI_SOCKADDR_IN);
		EXPECT(cur->src_addrlen, sizeof(struct sockaddr_in));
		EXPECT(cur->domain_attr->threading, FI_THREAD_SAFE);
		EXPECT_TRUE(cur->domain_attr->name != NULL);
		EXPECT_TRUE(cur->caps & FI_MSG);
	}
	EXPECT_TRUE(n > 0);
	fi_freeinfo(info);

	/* Something we do not offer: no data. */
	hints = fi_allocinfo();
	hints->fabric_attr->prov_name = strdup("nostd");
	hints->caps = FI_COLLECTIVE;
	info = NULL;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), -FI_ENODATA);
	EXPECT_TRUE(info == NULL);
	/* An enum value the provider cannot know: no data either. */
	hints->caps = 0;
	hints->domain_attr->threading = (enum fi_threading)77;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), -FI_ENODATA);
	fi_freeinfo(hints);

	/* A numeric destination resolves into dest_addr. */
	hints = fi_allocinfo();
	hints->fabric_attr->prov_name = strdup("nostd");
	info = NULL;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", "4242", 0, hints, &info), 0);
	if (info) {
		struct sockaddr_in *sin = info->dest_addr;
		EXPECT(info->dest_addrlen, sizeof(*sin));
		EXPECT(ntohs(sin->sin_port), 4242);
		EXPECT(sin->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
		fi_freeinfo(info);
	}
	fi_freeinfo(hints);

	/* Traffic-class labels are granted as asked (fabtests' ping-pongs ask for
	 * FI_TC_LOW_LATENCY, fi_rma_bw for FI_TC_BULK_DATA); a DSCP marking is not. */
	hints = fi_allocinfo();
	hints->fabric_attr->prov_name = strdup("nostd");
	hints->ep_attr->type = FI_EP_RDM;
	hints->tx_attr->tclass = FI_TC_LOW_LATENCY;
	hints->domain_attr->tclass = FI_TC_BULK_DATA;
	info = NULL;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), 0);
	for (cur = info; cur; cur = cur->next) {
		EXPECT(cur->tx_attr->tclass, FI_TC_LOW_LATENCY);
		EXPECT(cur->domain_attr->tclass, FI_TC_BULK_DATA);
	}
	fi_freeinfo(info);
	hints->tx_attr->tclass = fi_tc_dscp_set(46);
	info = NULL;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), -FI_ENODATA);
	fi_freeinfo(hints);
}

static void test_eq(struct fid_fabric *fabric, struct fid_eq **eq_out)
{
	struct fi_eq_attr attr = { .flags = FI_WRITE, .wait_obj = FI_WAIT_UNSPEC };
	struct fi_eq_entry in = { .context = (void *)0x1234, .data = 99 }, out;
	struct fi_eq_err_entry err;
	struct fid_eq *eq = NULL;
	uint32_t event = 0;
	char text[64];

	EXPECT(fi_eq_open(fabric, NULL, &eq, NULL), -FI_EINVAL);
	EXPECT(fi_eq_open(fabric, &attr, NULL, NULL), -FI_EINVAL);
	attr.wait_obj = FI_WAIT_MUTEX_COND;
	EXPECT(fi_eq_open(fabric, &attr, &eq, NULL), -FI_ENOSYS);
	attr.wait_obj = FI_WAIT_UNSPEC;
	EXPECT(fi_eq_open(fabric, &attr, &eq, (void *)0xe0), 0);
	EXPECT_TRUE(eq->fid.context == (void *)0xe0);
	EXPECT_TRUE(eq->fid.fclass == FI_CLASS_EQ);

	EXPECT(fi_eq_write(eq, FI_NOTIFY, &in, sizeof in, 0), sizeof in);
	EXPECT(fi_eq_read(eq, NULL, &out, sizeof out, 0), -FI_EINVAL);
	EXPECT(fi_eq_read(eq, &event, NULL, sizeof out, 0), -FI_EINVAL);
	EXPECT(fi_eq_read(eq, &event, &out, sizeof out, FI_PEEK), sizeof out);
	EXPECT(fi_eq_read(eq, &event, &out, sizeof out, 0), sizeof out);
	EXPECT(event, FI_NOTIFY);
	EXPECT_TRUE(out.context == (void *)0x1234);
	EXPECT(out.data, 99);
	EXPECT(fi_eq_read(eq, &event, &out, sizeof out, 0), -FI_EAGAIN);
	EXPECT(fi_eq_sread(eq, &event, &out, sizeof out, 10, 0), -FI_EAGAIN);
	EXPECT(fi_eq_write(eq, FI_NOTIFY, NULL, 8, 0), -FI_EINVAL);
	EXPECT(fi_eq_readerr(eq, NULL, 0), -FI_EINVAL);
	memset(&err, 0, sizeof err);
	EXPECT(fi_eq_readerr(eq, &err, 0), -FI_EAGAIN);
	EXPECT_TRUE(fi_eq_strerror(eq, -FI_EAGAIN, NULL, NULL, 0) != NULL);
	EXPECT_TRUE(fi_eq_strerror(eq, FI_EAGAIN, NULL, text, sizeof text) == text);
	EXPECT(strcmp(text, fi_strerror(FI_EAGAIN)), 0);
	*eq_out = eq;
}

static void test_cq(struct fid_domain *domain, struct fid_cq **keep)
{
	static const enum fi_cq_format formats[] = {
		FI_CQ_FORMAT_UNSPEC, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG,
		FI_CQ_FORMAT_DATA, FI_CQ_FORMAT_TAGGED,
	};
	struct fi_cq_tagged_entry buf[4];
	struct fi_cq_err_entry err;
	fi_addr_t src[4];
	struct fid_cq *cq;
	size_t i;

	for (i = 0; i < sizeof formats / sizeof formats[0]; i++) {
		struct fi_cq_attr attr = { .size = 16, .format = formats[i] };

		cq = NULL;
		EXPECT(fi_cq_open(domain, &attr, &cq, (void *)0xc0), 0);
		if (!cq)
			continue;
		EXPECT_TRUE(cq->fid.fclass == FI_CLASS_CQ);
		EXPECT_TRUE(cq->fid.context == (void *)0xc0);
		EXPECT(fi_cq_read(cq, buf, 4), -FI_EAGAIN);
		EXPECT(fi_cq_readfrom(cq, buf, 4, src), -FI_EAGAIN);
		EXPECT(fi_cq_read(cq, NULL, 4), -FI_EINVAL);
		EXPECT(fi_cq_readfrom(cq, buf, 4, NULL), -FI_EINVAL);
		EXPECT(fi_cq_readerr(cq, NULL, 0), -FI_EINVAL);
		memset(&err, 0, sizeof err);
		EXPECT(fi_cq_readerr(cq, &err, 0), -FI_EAGAIN);
		/* No wait object: the blocking calls are invalid. */
		EXPECT(fi_cq_sread(cq, buf, 1, NULL, 0), -FI_ENOSYS);
		EXPECT(fi_cq_signal(cq), -FI_ENOSYS);
		EXPECT(fi_close(&cq->fid), 0);
	}

	{
		struct fi_cq_attr attr = { .format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_UNSPEC };
		size_t threshold = 2;

		EXPECT(fi_cq_open(domain, NULL, &cq, NULL), -FI_EINVAL);
		EXPECT(fi_cq_open(domain, &attr, NULL, NULL), -FI_EINVAL);
		attr.format = (enum fi_cq_format)42;
		EXPECT(fi_cq_open(domain, &attr, &cq, NULL), -FI_EINVAL);
		attr.format = FI_CQ_FORMAT_MSG;
		attr.wait_obj = FI_WAIT_MUTEX_COND;
		EXPECT(fi_cq_open(domain, &attr, &cq, NULL), -FI_ENOSYS);
		attr.wait_obj = FI_WAIT_UNSPEC;
		attr.wait_cond = FI_CQ_COND_THRESHOLD;
		cq = NULL;
		EXPECT(fi_cq_open(domain, &attr, &cq, NULL), 0);
		if (!cq)
			return;
		EXPECT(fi_cq_sread(cq, buf, 1, &threshold, 10), -FI_EAGAIN);
		EXPECT(fi_cq_sreadfrom(cq, buf, 1, src, NULL, 0), -FI_EAGAIN);
		EXPECT(fi_cq_signal(cq), 0);
		EXPECT(fi_cq_sread(cq, buf, 1, NULL, -1), -FI_EAGAIN);
		EXPECT_TRUE(fi_cq_strerror(cq, -FI_ETRUNC, NULL, NULL, 0) != NULL);
		*keep = cq;
	}
}

static void test_av(struct fid_domain *domain, struct fid_av **keep)
{
	struct fi_av_attr attr = { .type = FI_AV_TABLE, .count = 8 };
	struct sockaddr_in sin[2], back;
	fi_addr_t fa[2] = { FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL }, one;
	struct fid_av *av = NULL;
	size_t len;
	char text[64];
	const char *s;

	EXPECT(fi_av_open(domain, NULL, &av, NULL), -FI_EINVAL);
	EXPECT(fi_av_open(domain, &attr, NULL, NULL), -FI_EINVAL);
	attr.name = "shared";
	EXPECT(fi_av_open(domain, &attr, &av, NULL), -FI_ENOSYS);
	attr.name = NULL;
	EXPECT(fi_av_open(domain, &attr, &av, (void *)0xa0), 0);
	if (!av)
		return;
	EXPECT_TRUE(av->fid.fclass == FI_CLASS_AV);

	memset(sin, 0, sizeof sin);
	sin[0].sin_family = AF_INET;
	sin[0].sin_port = htons(5000);
	sin[0].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin[1].sin_family = AF_INET;
	sin[1].sin_port = htons(6000);
	inet_pton(AF_INET, "10.0.0.2", &sin[1].sin_addr);
	EXPECT(fi_av_insert(av, sin, 2, fa, 0, NULL), 2);
	EXPECT(fa[0], 0);
	EXPECT(fa[1], 1);
	EXPECT(fi_av_insert(av, NULL, 1, fa, 0, NULL), -FI_EINVAL);
	EXPECT(fi_av_insert(av, sin, 1, NULL, 0, NULL), 1); /* a second use of sin[0] */

	len = sizeof back;
	EXPECT(fi_av_lookup(av, fa[1], &back, &len), 0);
	EXPECT(len, sizeof back);
	EXPECT(back.sin_port, sin[1].sin_port);
	EXPECT(back.sin_addr.s_addr, sin[1].sin_addr.s_addr);
	len = 4;
	EXPECT(fi_av_lookup(av, fa[1], &back, &len), -FI_ETOOSMALL);
	EXPECT(len, sizeof back);
	EXPECT(fi_av_lookup(av, fa[1], &back, NULL), -FI_EINVAL);
	len = sizeof back;
	EXPECT(fi_av_lookup(av, 1000, &back, &len), -FI_ENOENT);

	len = sizeof text;
	s = fi_av_straddr(av, &sin[1], text, &len);
	EXPECT_TRUE(s == text);
	EXPECT(strcmp(text, "fi_sockaddr_in://10.0.0.2:6000"), 0);
	EXPECT(len, strlen("fi_sockaddr_in://10.0.0.2:6000") + 1);
	len = sizeof text;
	EXPECT_TRUE(fi_av_straddr(av, NULL, text, &len) == NULL);
	EXPECT_TRUE(fi_av_straddr(av, &sin[1], text, NULL) == NULL);

	EXPECT(fi_av_insertsvc(av, "10.0.0.3", "7000", &one, 0, NULL), 1);
	len = sizeof back;
	EXPECT(fi_av_lookup(av, one, &back, &len), 0);
	EXPECT(ntohs(back.sin_port), 7000);
	EXPECT(fi_av_insertsvc(av, NULL, "7000", &one, 0, NULL), -FI_EINVAL);

	EXPECT(fi_av_remove(av, &fa[1], 1, 0), 0);
	len = sizeof back;
	EXPECT(fi_av_lookup(av, fa[1], &back, &len), -FI_ENOENT);
	EXPECT(fi_av_remove(av, NULL, 1, 0), -FI_EINVAL);
	*keep = av;
}

static void test_cntr(struct fid_domain *domain, struct fid_cntr **keep)
{
	struct fi_cntr_attr attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC };
	struct fid_cntr *cntr = NULL;

	EXPECT(fi_cntr_open(domain, NULL, &cntr, NULL), -FI_EINVAL);
	EXPECT(fi_cntr_open(domain, &attr, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_cntr_open(domain, &attr, &cntr, (void *)0xd0), 0);
	if (!cntr)
		return;
	EXPECT_TRUE(cntr->fid.fclass == FI_CLASS_CNTR);
	EXPECT(fi_cntr_read(cntr), 0);
	EXPECT(fi_cntr_add(cntr, 5), 0);
	EXPECT(fi_cntr_read(cntr), 5);
	EXPECT(fi_cntr_set(cntr, 7), 0);
	EXPECT(fi_cntr_read(cntr), 7);
	EXPECT(fi_cntr_adderr(cntr, 2), 0);
	EXPECT(fi_cntr_readerr(cntr), 2);
	EXPECT(fi_cntr_seterr(cntr, 0), 0);
	EXPECT(fi_cntr_readerr(cntr), 0);
	EXPECT(fi_cntr_wait(cntr, 7, 100), 0);
	EXPECT(fi_cntr_wait(cntr, 8, 10), -FI_ETIMEDOUT);
	*keep = cntr;

	/* FI_WAIT_NONE: fi_cntr(3) calls fi_cntr_wait invalid there; it polls (fabtests'
	 * fi_multi_mr waits so), with the same answers and timeout. */
	attr.wait_obj = FI_WAIT_NONE;
	cntr = NULL;
	EXPECT(fi_cntr_open(domain, &attr, &cntr, NULL), 0);
	if (!cntr)
		return;
	EXPECT(fi_cntr_add(cntr, 3), 0);
	EXPECT(fi_cntr_wait(cntr, 3, 100), 0);
	{
		struct timespec t0, t;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		EXPECT(fi_cntr_wait(cntr, 4, 20), -FI_ETIMEDOUT);
		clock_gettime(CLOCK_MONOTONIC, &t);
		EXPECT_TRUE((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= 19);
	}
	EXPECT(fi_close(&cntr->fid), 0);
}

static void test_mr(struct fid_domain *domain, struct fid_mr **keep)
{
	static char buf[4096];
	struct iovec iov[2] = { { buf, 100 }, { buf + 200, 100 } };
	struct fi_mr_attr attr = { .mr_iov = iov, .iov_count = 2, .access = FI_SEND,
				   .requested_key = 44 };
	struct fid_mr *mr = NULL, *mr2 = NULL;

	EXPECT(fi_mr_reg(domain, buf, sizeof buf, FI_SEND | FI_RECV, 0, 42, 0, NULL, NULL),
	       -FI_EINVAL);
	EXPECT(fi_mr_regattr(domain, NULL, 0, &mr), -FI_EINVAL);
	EXPECT(fi_mr_regv(domain, NULL, 2, FI_SEND, 0, 43, 0, &mr, NULL), -FI_EINVAL);
	EXPECT(fi_mr_reg(domain, buf, sizeof buf, FI_SEND | FI_RECV, 0, 42, 0, &mr, (void *)0xf0),
	       0);
	if (!mr)
		return;
	EXPECT_TRUE(mr->fid.fclass == FI_CLASS_MR);
	EXPECT_TRUE(mr->fid.context == (void *)0xf0);
	EXPECT(fi_mr_key(mr), 42);
	EXPECT_TRUE(fi_mr_desc(mr) != NULL);
	EXPECT(fi_mr_reg(domain, buf, sizeof buf, FI_SEND, 0, 42, 0, &mr2, NULL), -FI_ENOKEY);
	EXPECT(fi_mr_regattr(domain, &attr, 0, &mr2), 0);
	if (mr2) {
		EXPECT(fi_mr_key(mr2), 44);
		EXPECT(fi_close(&mr2->fid), 0);
	}
	EXPECT(fi_mr_regv(domain, iov, 2, FI_RECV, 0, 45, 0, &mr2, NULL), 0);
	if (mr2)
		EXPECT(fi_close(&mr2->fid), 0);
	*keep = mr;
}

/* Reads one completion (blocking up to 2 s); returns fi_cq_sread's result. */
static ssize_t next(struct fid_cq *cq, struct fi_cq_tagged_entry *e)
{
	return fi_cq_sread(cq, e, 1, NULL, 2000);
}

static void test_ep(struct fid_fabric *fabric, struct fid_domain *domain, struct fi_info *info)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_FD };
	struct fi_cq_attr nowait_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_FD };
	struct fid_cq *cq = NULL, *nowait = NULL;
	struct fid_av *av = NULL;
	struct fid_cntr *cntr = NULL;
	struct fid_ep *ep = NULL, *alias = NULL, *peer = NULL;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	struct fi_context ctx[4];
	char name[64], tx[256], rx[256];
	size_t len, optlen, v;
	fi_addr_t self = FI_ADDR_NOTAVAIL;
	uint64_t flags;
	struct iovec iov;
	struct fi_msg_tagged tmsg;
	struct fi_msg msg;
	struct fid *fids[1];
	int fd = -1, i;
	struct pollfd pfd;

	EXPECT(fi_cq_open(domain, &cq_attr, &cq, NULL), 0);
	EXPECT(fi_cq_open(domain, &nowait_attr, &nowait, NULL), 0);
	EXPECT(fi_av_open(domain, &av_attr, &av, NULL), 0);
	EXPECT(fi_cntr_open(domain, &cntr_attr, &cntr, NULL), 0);
	if (!cq || !nowait || !av || !cntr)
		return;

	/* Lifecycle: bindings before enable, in the core's rules. */
	EXPECT(fi_endpoint(domain, info, &ep, (void *)0xe9), 0);
	if (!ep)
		return;
	EXPECT_TRUE(ep->fid.fclass == FI_CLASS_EP);
	EXPECT_TRUE(ep->fid.context == (void *)0xe9);
	EXPECT(fi_send(ep, tx, 8, NULL, 0, NULL), -FI_EOPBADSTATE);
	EXPECT(fi_recv(ep, rx, 8, NULL, 0, NULL), -FI_EOPBADSTATE);
	EXPECT(fi_enable(ep), -FI_ENOCQ);
	EXPECT(fi_ep_bind(ep, NULL, 0), -FI_EINVAL);
	EXPECT(fi_ep_bind(ep, &domain->fid, 0), -FI_EINVAL);
	EXPECT(fi_ep_bind(ep, &cq->fid, 0), -FI_EINVAL);
	EXPECT(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_ep_bind(ep, &nowait->fid, FI_TRANSMIT), -FI_EINVAL); /* a second TX CQ */
	EXPECT(fi_enable(ep), -FI_ENOAV);
	EXPECT(fi_ep_bind(ep, &av->fid, 0), 0);
	EXPECT(fi_ep_bind(ep, &cntr->fid, FI_SEND), 0);
	EXPECT(fi_close(&cq->fid), -FI_EBUSY);
	EXPECT(fi_enable(ep), 0);
	EXPECT(fi_enable(ep), -FI_EOPBADSTATE);
	EXPECT(fi_ep_bind(ep, &nowait->fid, FI_RECV), -FI_EOPBADSTATE);
	EXPECT(fi_control(&ep->fid, 12345, NULL), -FI_ENOSYS);

	/* Names. */
	len = 0;
	EXPECT(fi_getname(&ep->fid, NULL, &len), -FI_ETOOSMALL);
	EXPECT(len, sizeof(struct sockaddr_in));
	EXPECT(fi_getname(&ep->fid, name, NULL), -FI_EINVAL);
	len = sizeof name;
	EXPECT(fi_getname(&ep->fid, name, &len), 0);
	EXPECT(len, sizeof(struct sockaddr_in));
	EXPECT(((struct sockaddr_in *)name)->sin_family, AF_INET);
	EXPECT_TRUE(((struct sockaddr_in *)name)->sin_port != 0); /* the real bound port */
	/* Its own address only; connectionless: no peer, no fi_connect. */
	EXPECT(fi_setname(&ep->fid, name, len), 0);
	EXPECT(fi_getpeer(ep, name, &len), -FI_ENOSYS);
	EXPECT(fi_connect(ep, name, NULL, 0), -FI_EINVAL);
	/* The peer: a second endpoint of the domain (same socket, its own id). */
	EXPECT(fi_endpoint(domain, info, &peer, NULL), 0);
	if (!peer)
		return;
	EXPECT(fi_ep_bind(peer, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_ep_bind(peer, &av->fid, 0), 0);
	EXPECT(fi_enable(peer), 0);
	len = sizeof name;
	EXPECT(fi_getname(&peer->fid, name, &len), 0);
	EXPECT(fi_av_insert(av, name, 1, &self, 0, NULL), 1);

	/* Options. */
	optlen = sizeof v;
	EXPECT(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &optlen), 0);
	EXPECT(optlen, sizeof v);
	v = 128;
	EXPECT(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, sizeof v), 0);
	v = 0;
	EXPECT(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &optlen), 0);
	EXPECT(v, 128);
	optlen = 2;
	EXPECT(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, &optlen), -FI_ETOOSMALL);
	optlen = sizeof v;
	EXPECT(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, NULL, &optlen), -FI_EINVAL);
	EXPECT(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, NULL), -FI_EINVAL);
	EXPECT(fi_getopt(&ep->fid, FI_OPT_ENDPOINT, 77, &v, &optlen), -FI_ENOPROTOOPT);
	EXPECT(fi_getopt(&ep->fid, 5, FI_OPT_MIN_MULTI_RECV, &v, &optlen), -FI_ENOPROTOOPT);
	EXPECT(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &v, sizeof v), -FI_EOPNOTSUPP);
	EXPECT(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, NULL, sizeof v), -FI_EINVAL);
	EXPECT(fi_setopt(&ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &v, 1), -FI_EINVAL);

	/* Default operation flags. */
	flags = FI_TRANSMIT;
	EXPECT(fi_control(&ep->fid, FI_GETOPSFLAG, &flags), 0);
	flags = FI_TRANSMIT | FI_COMPLETION;
	EXPECT(fi_control(&ep->fid, FI_SETOPSFLAG, &flags), 0);
	flags = FI_TRANSMIT;
	EXPECT(fi_control(&ep->fid, FI_GETOPSFLAG, &flags), 0);
	EXPECT_TRUE(flags & FI_COMPLETION);
	flags = FI_TRANSMIT | FI_RECV;
	EXPECT(fi_control(&ep->fid, FI_GETOPSFLAG, &flags), -FI_EINVAL);
	EXPECT(fi_control(&ep->fid, FI_SETOPSFLAG, &flags), -FI_EINVAL);
	EXPECT(fi_control(&ep->fid, FI_GETOPSFLAG, NULL), -FI_EINVAL);
	EXPECT(fi_control(&ep->fid, FI_SETOPSFLAG, NULL), -FI_EINVAL);

	/* Wait objects: FI_GETWAIT, fi_trywait, the fd readable when data arrives. */
	EXPECT(fi_control(&cq->fid, FI_GETWAIT, NULL), -FI_EINVAL);
	EXPECT(fi_control(&nowait->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	EXPECT(fi_control(&cntr->fid, FI_GETWAIT, &fd), 0);
	EXPECT(fi_control(&cq->fid, FI_GETWAIT, &fd), 0);
	EXPECT_TRUE(fd >= 0);
	fids[0] = &cq->fid;
	EXPECT(fi_trywait(fabric, fids, 1), 0);
	fids[0] = &nowait->fid;
	EXPECT(fi_trywait(fabric, fids, 1), -FI_EINVAL);
	fids[0] = &cq->fid;

	/* Messages to ourselves. */
	for (i = 0; i < (int)sizeof tx; i++)
		tx[i] = (char)(i * 3 + 1);
	memset(rx, 0, sizeof rx);
	EXPECT(fi_recv(peer, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, &ctx[0]), 0);
	EXPECT(fi_send(ep, tx, 100, NULL, self, &ctx[1]), 0);
	pfd.fd = fd;
	pfd.events = POLLIN;
	EXPECT(poll(&pfd, 1, 2000), 1); /* the fd wakes a waiter: no busy polling needed */
	for (i = 0; i < 2; i++) {
		EXPECT(next(cq, &e), 1);
		if (e.op_context == &ctx[0]) {
			EXPECT(e.len, 100);
			EXPECT_TRUE(e.flags & FI_RECV);
			EXPECT(memcmp(rx, tx, 100), 0);
		} else {
			EXPECT_TRUE(e.op_context == &ctx[1]);
			EXPECT_TRUE(e.flags & FI_SEND);
		}
	}
	EXPECT(fi_cntr_read(cntr), 1);
	EXPECT(fi_cntr_wait(cntr, 1, 100), 0);
	fids[0] = &cntr->fid;
	EXPECT(fi_trywait(fabric, fids, 1), 0);
	fids[0] = &cq->fid;

	EXPECT(fi_recv(peer, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, &ctx[0]), 0);
	EXPECT(fi_senddata(ep, tx, 10, NULL, 0xdada, self, &ctx[1]), 0);
	for (i = 0; i < 2; i++) {
		EXPECT(next(cq, &e), 1);
		if (e.op_context == &ctx[0]) {
			EXPECT_TRUE(e.flags & FI_REMOTE_CQ_DATA);
			EXPECT(e.data, 0xdada);
		}
	}
	EXPECT(fi_trywait(fabric, fids, 1), 0);
	EXPECT(fi_recv(peer, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, &ctx[0]), 0);
	EXPECT(fi_inject(ep, tx, 20, self), 0);
	EXPECT(next(cq, &e), 1);
	EXPECT_TRUE(e.op_context == &ctx[0]);
	EXPECT(e.len, 20);
	EXPECT(fi_trywait(fabric, fids, 1), 0);

	/* A NULL receive buffer with a length holds nothing (as other providers take
	 * it: fabtests' fi_shared_ctx -e msg): an empty message completes into it, one
	 * with data is truncated, and nothing is written at address 0. */
	EXPECT(fi_recv(peer, NULL, 64, NULL, FI_ADDR_UNSPEC, &ctx[0]), 0);
	EXPECT(fi_send(ep, tx, 0, NULL, self, &ctx[1]), 0);
	for (i = 0; i < 2; i++) {
		EXPECT(next(cq, &e), 1);
		if (e.op_context == &ctx[0]) {
			EXPECT(e.len, 0);
			EXPECT_TRUE(e.flags & FI_RECV);
		}
	}
	EXPECT(fi_trecv(peer, NULL, 64, NULL, FI_ADDR_UNSPEC, 7, 0, &ctx[0]), 0);
	EXPECT(fi_tsend(ep, tx, 8, NULL, self, 7, &ctx[1]), 0);
	{
		struct fi_cq_err_entry te;
		int got_send = 0, got_trunc = 0;

		for (i = 0; i < 2; i++) {
			ssize_t k = next(cq, &e);

			if (k == 1) {
				got_send += e.op_context == &ctx[1];
				continue;
			}
			EXPECT(k, -FI_EAVAIL);
			memset(&te, 0, sizeof te);
			EXPECT(fi_cq_readerr(cq, &te, 0), 1);
			EXPECT_TRUE(te.op_context == &ctx[0]);
			EXPECT(te.err, FI_ETRUNC);
			EXPECT(te.olen, 8);
			got_trunc++;
		}
		EXPECT(got_send, 1);
		EXPECT(got_trunc, 1);
	}
	EXPECT(fi_send(ep, NULL, 8, NULL, self, NULL), -FI_EINVAL);
	EXPECT(fi_trywait(fabric, fids, 1), 0);

	/* sendmsg / recvv with flags; NULL and wrong arguments. */
	iov.iov_base = tx;
	iov.iov_len = 30;
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = &iov;
	msg.iov_count = 1;
	msg.addr = self;
	msg.context = &ctx[1];
	EXPECT(fi_recvv(peer, &iov, NULL, 1, FI_ADDR_UNSPEC, &ctx[0]), 0);
	EXPECT(fi_sendmsg(ep, &msg, FI_COMPLETION | FI_TRANSMIT_COMPLETE), 0);
	EXPECT(next(cq, &e), 1);
	EXPECT(next(cq, &e), 1);
	EXPECT(fi_sendmsg(ep, NULL, 0), -FI_EINVAL);
	EXPECT(fi_recvmsg(ep, NULL, 0), -FI_EINVAL);
	EXPECT(fi_recvv(ep, NULL, NULL, 2, FI_ADDR_UNSPEC, NULL), -FI_EINVAL);
	EXPECT(fi_sendv(ep, &iov, NULL, 99, self, NULL), -FI_EINVAL);
	EXPECT(fi_send(ep, NULL, 8, NULL, self, NULL), -FI_EINVAL);
	EXPECT(fi_tsendmsg(ep, NULL, 0), -FI_EINVAL);
	EXPECT(fi_trecvmsg(ep, NULL, 0), -FI_EINVAL);
	EXPECT(fi_send(ep, tx, 8, NULL, 12345, NULL), -FI_EINVAL); /* not in the AV */
	/* The inline wrappers dereference the fid before calling in; the entry points
	 * themselves refuse NULL and other objects. */
	EXPECT(ep->ops->cancel(NULL, NULL), -FI_EINVAL);
	EXPECT(ep->ops->cancel(&cq->fid, NULL), -FI_EINVAL);
	EXPECT(ep->msg->send(NULL, tx, 8, NULL, self, NULL), -FI_EINVAL);
	EXPECT(ep->tagged->recv((struct fid_ep *)cq, rx, 8, NULL, 0, 0, 0, NULL), -FI_EINVAL);
	EXPECT(ep->cm->getname(NULL, name, &len), -FI_EINVAL);
	EXPECT(ep->fid.ops->bind(NULL, &cq->fid, 0), -FI_EINVAL);
	EXPECT(ep->fid.ops->control(&cq->fid, FI_ENABLE, NULL), -FI_EINVAL);
	EXPECT(ep->ops->getopt(NULL, 0, 0, &v, &optlen), -FI_EINVAL);
	EXPECT(ep->ops->tx_size_left(NULL), -FI_EINVAL);

	/* Tagged: a message waits unexpected; FI_PEEK sees it, FI_PEEK | FI_CLAIM
	 * reserves it for a context, FI_CLAIM with that context receives it. */
	EXPECT(fi_tsend(ep, tx, 40, NULL, self, 5, &ctx[1]), 0);
	EXPECT(next(cq, &e), 1); /* the send completes: the message is here */
	EXPECT_TRUE(e.op_context == &ctx[1]);
	memset(&tmsg, 0, sizeof tmsg);
	iov.iov_base = rx;
	iov.iov_len = sizeof rx;
	tmsg.msg_iov = &iov;
	tmsg.iov_count = 1;
	tmsg.addr = FI_ADDR_UNSPEC;
	tmsg.tag = 5;
	tmsg.context = &ctx[2];
	EXPECT(fi_trecvmsg(peer, &tmsg, FI_PEEK), 0);
	EXPECT(next(cq, &e), 1);
	EXPECT_TRUE(e.op_context == &ctx[2]);
	EXPECT(e.len, 40);
	EXPECT(e.tag, 5);
	EXPECT(fi_trecvmsg(peer, &tmsg, FI_PEEK | FI_CLAIM), 0);
	EXPECT(next(cq, &e), 1);
	EXPECT(fi_trecvmsg(peer, &tmsg, FI_PEEK), 0); /* claimed: no longer visible */
	EXPECT(next(cq, &e), -FI_EAVAIL);
	memset(&err, 0, sizeof err);
	EXPECT(fi_cq_readerr(cq, &err, 0), 1);
	EXPECT(err.err, FI_ENOMSG);
	memset(rx, 0, sizeof rx);
	EXPECT(fi_trecvmsg(peer, &tmsg, FI_CLAIM), 0);
	EXPECT(next(cq, &e), 1);
	EXPECT_TRUE(e.op_context == &ctx[2]);
	EXPECT(e.len, 40);
	EXPECT(memcmp(rx, tx, 40), 0);

	/* FI_PEEK | FI_DISCARD drops a message. */
	EXPECT(fi_tinject(ep, tx, 8, self, 6), 0);
	tmsg.tag = 6;
	for (i = 0; i < 200; i++) { /* until the injected message has arrived */
		EXPECT_TRUE(fi_cq_read(cq, &e, 1) == -FI_EAGAIN);
		EXPECT(fi_trecvmsg(peer, &tmsg, FI_PEEK), 0);
		if (next(cq, &e) == 1)
			break;
		fi_cq_readerr(cq, &err, 0);
	}
	EXPECT(fi_trecvmsg(peer, &tmsg, FI_PEEK | FI_DISCARD), 0);
	EXPECT(next(cq, &e), 1);
	EXPECT(fi_trecvmsg(peer, &tmsg, FI_PEEK), 0);
	EXPECT(next(cq, &e), -FI_EAVAIL);
	EXPECT(fi_cq_readerr(cq, &err, 0), 1);
	EXPECT(err.err, FI_ENOMSG);

	/* fi_cancel of a posted receive: an FI_ECANCELED error entry. */
	EXPECT(fi_trecv(peer, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, 99, 0, &ctx[3]), 0);
	EXPECT(fi_cancel(&peer->fid, &ctx[3]), 0);
	EXPECT(next(cq, &e), -FI_EAVAIL);
	memset(&err, 0, sizeof err);
	EXPECT(fi_cq_readerr(cq, &err, 0), 1);
	EXPECT(err.err, FI_ECANCELED);
	EXPECT_TRUE(err.op_context == &ctx[3]);
	EXPECT(fi_cancel(&peer->fid, &ctx[3]), 0); /* nothing left to cancel: still 0 */

	/* A completion is queued: fi_trywait says read first. */
	EXPECT(fi_tsenddata(ep, tx, 4, NULL, 7, self, 8, &ctx[1]), 0);
	for (i = 0; i < 100 && fi_trywait(fabric, fids, 1) == 0; i++)
		poll(&pfd, 1, 20);
	EXPECT(fi_trywait(fabric, fids, 1), -FI_EAGAIN);
	EXPECT(next(cq, &e), 1);
	EXPECT(fi_trecv(peer, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, 8, 0, &ctx[0]), 0);
	EXPECT(next(cq, &e), 1);
	EXPECT(e.data, 7);

	/* Which atomics are served (the operations themselves: test_rma). */
	len = 0;
	EXPECT(fi_atomicvalid(ep, FI_UINT64, FI_SUM, &len), 0);
	EXPECT_TRUE(len >= 1);
	EXPECT(fi_fetch_atomicvalid(ep, FI_DOUBLE, FI_ATOMIC_READ, &len), 0);
	EXPECT(fi_compare_atomicvalid(ep, FI_INT32, FI_CSWAP_GE, &len), 0);
	EXPECT(fi_atomicvalid(ep, FI_UINT64, FI_CSWAP, &len), -FI_EOPNOTSUPP);
	EXPECT(fi_atomicvalid(ep, FI_FLOAT, FI_BOR, &len), -FI_EOPNOTSUPP);
	EXPECT(fi_atomicvalid(ep, FI_DOUBLE_COMPLEX, FI_SUM, &len), -FI_EOPNOTSUPP);
	EXPECT(fi_atomicvalid(ep, FI_LONG_DOUBLE, FI_SUM, &len), -FI_EOPNOTSUPP);
	EXPECT(fi_atomicvalid(ep, FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
	{
		struct fi_atomic_attr aa = { 0, 0 };

		EXPECT(fi_query_atomic(domain, FI_UINT64, FI_SUM, &aa, 0), 0);
		EXPECT(aa.size, 8);
		EXPECT_TRUE(aa.count >= 1);
		EXPECT(fi_query_atomic(domain, FI_INT32, FI_CSWAP, &aa, FI_COMPARE_ATOMIC), 0);
		EXPECT(aa.size, 4);
		EXPECT(fi_query_atomic(domain, FI_INT32, FI_CSWAP, &aa, 0), -FI_EOPNOTSUPP);
		EXPECT(fi_query_atomic(domain, FI_FLOAT, FI_BOR, &aa, 0), -FI_EOPNOTSUPP);
		EXPECT(fi_query_atomic(domain, FI_UINT64, FI_SUM, NULL, 0), -FI_EINVAL);
	}

	/* An alias with its own flags; the endpoint cannot close while it exists. */
	EXPECT(fi_ep_alias(ep, &alias, FI_TRANSMIT | FI_RECV), -FI_EINVAL);
	EXPECT(fi_ep_alias(ep, &alias, FI_TRANSMIT | FI_COMPLETION), 0);
	if (alias) {
		flags = FI_TRANSMIT;
		EXPECT(fi_control(&alias->fid, FI_GETOPSFLAG, &flags), 0);
		EXPECT(flags, FI_COMPLETION);
		EXPECT(fi_recv(peer, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, &ctx[0]), 0);
		EXPECT(fi_send(alias, tx, 12, NULL, self, &ctx[1]), 0);
		EXPECT(next(cq, &e), 1);
		EXPECT(next(cq, &e), 1);
		EXPECT(fi_close(&ep->fid), -FI_EBUSY);
		EXPECT(fi_close(&alias->fid), 0);
	}

	EXPECT(fi_close(&ep->fid), 0);
	EXPECT(fi_close(&peer->fid), 0);
	EXPECT(fi_close(&cntr->fid), 0);
	EXPECT(fi_close(&av->fid), 0);
	EXPECT(fi_close(&nowait->fid), 0);
	EXPECT(fi_close(&cq->fid), 0);
}

/* A DGRAM endpoint on the same domain: send to itself. */
static void test_dgram(struct fid_domain *domain)
{
	struct fi_info *info = getinfo(FI_EP_DGRAM);
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_MSG, .wait_obj = FI_WAIT_UNSPEC };
	struct fi_av_attr av_attr = { .type = FI_AV_MAP };
	struct fid_cq *cq = NULL;
	struct fid_av *av = NULL;
	struct fid_ep *ep = NULL;
	struct fi_cq_msg_entry e[2];
	char name[64], buf[64] = "datagram", out[64];
	size_t len = sizeof name;
	fi_addr_t self;
	int n = 0, k;

	if (!info)
		return;
	EXPECT(fi_cq_open(domain, &cq_attr, &cq, NULL), 0);
	EXPECT(fi_av_open(domain, &av_attr, &av, NULL), 0);
	EXPECT(fi_endpoint(domain, info, &ep, NULL), 0);
	if (cq && av && ep) {
		EXPECT(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV), 0);
		EXPECT(fi_ep_bind(ep, &av->fid, 0), 0);
		EXPECT(fi_enable(ep), 0);
		EXPECT(fi_getname(&ep->fid, name, &len), 0);
		EXPECT(fi_av_insert(av, name, 1, &self, 0, NULL), 1);
		EXPECT(fi_recv(ep, out, sizeof out, NULL, FI_ADDR_UNSPEC, out), 0);
		EXPECT(fi_send(ep, buf, 9, NULL, self, buf), 0);
		while (n < 2) {
			k = (int)fi_cq_sread(cq, &e[n], 2 - n, NULL, 2000);
			if (k <= 0)
				break;
			n += k;
		}
		EXPECT(n, 2);
		EXPECT(strcmp(out, "datagram"), 0);
		/* Beyond the link MTU: -FI_EMSGSIZE. */
		EXPECT(fi_send(ep, buf, info->ep_attr->max_msg_size + 1, NULL, self, NULL),
		       -FI_EMSGSIZE);
	}
	if (ep)
		EXPECT(fi_close(&ep->fid), 0);
	if (av)
		EXPECT(fi_close(&av->fid), 0);
	if (cq)
		EXPECT(fi_close(&cq->fid), 0);
	fi_freeinfo(info);
}

/* One side of test_more: a domain with a wait-less CQ, an AV and an enabled RDM endpoint. */
struct side {
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
};

static int open_side(struct fid_fabric *fabric, struct fi_info *info, struct side *s)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };

	memset(s, 0, sizeof *s);
	EXPECT(fi_domain(fabric, info, &s->domain, NULL), 0);
	if (!s->domain)
		return -1;
	EXPECT(fi_cq_open(s->domain, &cq_attr, &s->cq, NULL), 0);
	EXPECT(fi_av_open(s->domain, &av_attr, &s->av, NULL), 0);
	EXPECT(fi_endpoint(s->domain, info, &s->ep, NULL), 0);
	if (!s->cq || !s->av || !s->ep)
		return -1;
	EXPECT(fi_ep_bind(s->ep, &s->cq->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_ep_bind(s->ep, &s->av->fid, 0), 0);
	EXPECT(fi_enable(s->ep), 0);
	return 0;
}

static void close_side(struct side *s)
{
	if (s->ep)
		EXPECT(fi_close(&s->ep->fid), 0);
	if (s->av)
		EXPECT(fi_close(&s->av->fid), 0);
	if (s->cq)
		EXPECT(fi_close(&s->cq->fid), 0);
	if (s->domain)
		EXPECT(fi_close(&s->domain->fid), 0);
}

/* Inserts each side's endpoint address into the other's AV. */
static void insert_each_other(struct side *a, struct side *b, fi_addr_t *to_b, fi_addr_t *to_a)
{
	char name[64];
	size_t len = sizeof name;

	EXPECT(fi_getname(&b->ep->fid, name, &len), 0);
	EXPECT(fi_av_insert(a->av, name, 1, to_b, 0, NULL), 1);
	len = sizeof name;
	EXPECT(fi_getname(&a->ep->fid, name, &len), 0);
	EXPECT(fi_av_insert(b->av, name, 1, to_a, 0, NULL), 1);
}

/* Polls `cq` (which progresses only its own domain) until `want` entries came or about
 * `ms` milliseconds passed; returns how many came. */
static int poll_cq(struct fid_cq *cq, struct fi_cq_tagged_entry *e, int want, int ms)
{
	struct timespec t0, t;
	int n = 0;
	ssize_t k;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		/* want 0: one progress pass through a read of nothing. */
		k = fi_cq_read(cq, want ? &e[n] : NULL, want ? 1 : 0);
		if (k > 0)
			n++;
		else if (k != -FI_EAGAIN)
			return n;
		if (n >= want)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return n;
	}
}

/* FI_MORE (fi_msg(3)): sends posted with it wait for the send without it, then leave
 * together. Two domains, so reading the receiver's CQ cannot progress the sender;
 * FI_THREAD_DOMAIN, so no watchdog progresses it either. */
static void test_more(struct fid_fabric *fabric)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct side a, b;
	struct fi_cq_tagged_entry e[8], ea[8];
	int got_a = 0, got_b = 0;
	char tx[4][16], rx[5][16];
	fi_addr_t to_b = FI_ADDR_NOTAVAIL, to_a = FI_ADDR_NOTAVAIL;
	struct iovec iov;
	struct fi_msg msg;
	int i;

	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	hints->fabric_attr->prov_name = strdup("nostd");
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), 0);
	fi_freeinfo(hints);
	if (!info || open_side(fabric, info, &a) || open_side(fabric, info, &b))
		goto out;
	insert_each_other(&a, &b, &to_b, &to_a);
	for (i = 0; i < 5; i++)
		EXPECT(fi_recv(b.ep, rx[i], sizeof rx[i], NULL, FI_ADDR_UNSPEC, rx[i]), 0);
	/* The session first: one send, completed on both sides. */
	EXPECT(fi_send(a.ep, "hello", 6, NULL, to_b, NULL), 0);
	/* Manual progress: both sides are polled (B acknowledges through its reads). */
	for (i = 0, got_b = 0; i < 2000 && (got_a < 1 || got_b < 1); i++) {
		if (got_a < 1)
			got_a += poll_cq(a.cq, ea, 1, 0);
		if (got_b < 1)
			got_b += poll_cq(b.cq, e, 1, 0);
		else
			poll_cq(b.cq, e, 0, 0);
	}
	EXPECT(got_b, 1);
	EXPECT(strcmp(rx[0], "hello"), 0);
	EXPECT(got_a, 1); /* the send's completion */
	/* Three sends with FI_MORE: nothing leaves while the receiver polls. */
	for (i = 0; i < 4; i++) {
		snprintf(tx[i], sizeof tx[i], "more %d", i);
		iov.iov_base = tx[i];
		iov.iov_len = strlen(tx[i]) + 1;
		memset(&msg, 0, sizeof msg);
		msg.msg_iov = &iov;
		msg.iov_count = 1;
		msg.addr = to_b;
		msg.context = tx[i];
		EXPECT(fi_sendmsg(a.ep, &msg, FI_INJECT | (i < 3 ? FI_MORE : 0)), 0);
		if (i == 2)
			EXPECT(poll_cq(b.cq, e, 1, 20), 0);
	}
	/* The last one (without FI_MORE) sent the batch: B gets all four, in order, and A
	 * their completions (both sides polled). */
	for (i = 0, got_a = 0, got_b = 0; i < 2000 && (got_a < 4 || got_b < 4); i++) {
		if (got_b < 4)
			got_b += poll_cq(b.cq, &e[got_b], 1, 0);
		else
			poll_cq(b.cq, e, 0, 0);
		if (got_a < 4)
			got_a += poll_cq(a.cq, &ea[got_a], 1, 0);
	}
	EXPECT(got_b, 4);
	for (i = 0; i < got_b; i++) {
		EXPECT_TRUE(e[i].op_context == rx[i + 1]);
		EXPECT(strcmp(rx[i + 1], tx[i]), 0);
	}
	EXPECT(got_a, 4);
out:
	close_side(&a);
	close_side(&b);
	if (info)
		fi_freeinfo(info);
}

/* FI_PROGRESS_AUTO (fi_domain(3)): a domain that asks for it progresses with no
 * application call. B's application posts a receive and then never calls into its
 * domain; A (manual, FI_THREAD_DOMAIN: no watchdog either) sends to B and polls only
 * its own CQ. A's send completes only once B's domain answered A's handshake and
 * acknowledged the message by itself; B's completion is then waiting in its CQ. */
static void test_auto_progress(struct fid_fabric *fabric)
{
	struct fi_info *hints = fi_allocinfo(), *manual = NULL, *automatic = NULL;
	struct side a, b;
	struct fi_cq_tagged_entry e;
	char rx[16];
	fi_addr_t to_b = FI_ADDR_NOTAVAIL, to_a = FI_ADDR_NOTAVAIL;
	int got;

	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	hints->fabric_attr->prov_name = strdup("nostd");
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &manual), 0);
	if (manual)
		EXPECT(manual->domain_attr->data_progress, FI_PROGRESS_MANUAL);
	hints->domain_attr->data_progress = FI_PROGRESS_AUTO;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &automatic), 0);
	fi_freeinfo(hints);
	if (!manual || !automatic)
		goto out;
	EXPECT(automatic->domain_attr->data_progress, FI_PROGRESS_AUTO);
	if (open_side(fabric, manual, &a) || open_side(fabric, automatic, &b))
		goto out;
	insert_each_other(&a, &b, &to_b, &to_a);
	memset(rx, 0, sizeof rx);
	EXPECT(fi_recv(b.ep, rx, sizeof rx, NULL, FI_ADDR_UNSPEC, rx), 0);
	/* From here on B's application calls nothing until A's send completed. */
	EXPECT(fi_send(a.ep, "automatic", 10, NULL, to_b, (void *)0xa0), 0);
	got = poll_cq(a.cq, &e, 1, 5000);
	EXPECT(got, 1);
	if (got == 1)
		EXPECT_TRUE(e.op_context == (void *)0xa0);
	EXPECT(fi_cq_read(b.cq, &e, 1), 1);
	EXPECT_TRUE(e.op_context == rx);
	EXPECT(strcmp(rx, "automatic"), 0);
out:
	close_side(&a);
	close_side(&b);
	if (manual)
		fi_freeinfo(manual);
	if (automatic)
		fi_freeinfo(automatic);
}

/* Polls both sides until `a` got `want_a` completions and `b` `want_b`, or about 5 s
 * passed; an error completion on `a` is read with fi_cq_readerr and counted with
 * its error code in `a_err`. Returns 0 when everything came. */
static int poll_both(struct side *a, struct fi_cq_data_entry *ea, int want_a, int *a_err,
		     struct side *b, struct fi_cq_data_entry *eb, int want_b)
{
	struct fi_cq_err_entry err;
	int got_a = 0, got_b = 0, i;
	ssize_t k;

	for (i = 0; i < 500000 && (got_a < want_a || got_b < want_b); i++) {
		k = fi_cq_read(a->cq, got_a < want_a ? &ea[got_a] : NULL, got_a < want_a);
		if (k == 1) {
			got_a++;
		} else if (k == -FI_EAVAIL) {
			memset(&err, 0, sizeof err);
			if (fi_cq_readerr(a->cq, &err, 0) == 1) {
				*a_err = err.err;
				ea[got_a].op_context = err.op_context;
				ea[got_a].flags = err.flags;
				got_a++;
			}
		}
		k = fi_cq_read(b->cq, got_b < want_b ? &eb[got_b] : NULL, got_b < want_b);
		if (k == 1)
			got_b++;
	}
	EXPECT(got_a, want_a);
	EXPECT(got_b, want_b);
	return got_a == want_a && got_b == want_b ? 0 : -1;
}

/* RMA (fi_rma(3)) between two domains: fi_writedata (remote CQ data at the target),
 * fi_read back, fi_inject_write, a write to a bad key (an error completion,
 * -FI_EACCES) and a read past the region's end. */
static void test_rma(struct fid_fabric *fabric)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct side a, b;
	struct fi_cq_data_entry ea[4], eb[4];
	static char src[5000], dst[5100], target[8192];
	struct fid_mr *mr = NULL;
	struct fid_cntr *writes = NULL;
	struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP };
	fi_addr_t to_b = FI_ADDR_NOTAVAIL, to_a = FI_ADDR_NOTAVAIL;
	uint64_t key, base;
	int err = 0, i;

	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	hints->fabric_attr->prov_name = strdup("nostd");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_RMA | FI_ATOMIC | FI_RMA_EVENT;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), 0);
	fi_freeinfo(hints);
	if (!info || open_side(fabric, info, &a) || open_side(fabric, info, &b))
		goto out;
	EXPECT_TRUE(info->caps & FI_RMA);
	EXPECT(info->tx_attr->rma_iov_limit, 1);
	insert_each_other(&a, &b, &to_b, &to_a);
	memset(target, 0, sizeof target);
	EXPECT(fi_mr_reg(b.domain, target, sizeof target, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 7,
			 0, &mr, NULL), 0);
	if (!mr)
		goto out;
	key = fi_mr_key(mr);
	/* FI_RMA_EVENT: a counter bound to the region counts the writes it served. */
	EXPECT(fi_cntr_open(b.domain, &cntr_attr, &writes, NULL), 0);
	if (writes) {
		EXPECT(fi_mr_bind(mr, &writes->fid, FI_SEND), -FI_EINVAL);
		EXPECT(fi_mr_bind(mr, &writes->fid, FI_REMOTE_WRITE), 0);
	}
	base = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? (uint64_t)(uintptr_t)target : 0;
	for (i = 0; i < (int)sizeof src; i++)
		src[i] = (char)(i * 7 + 3);

	/* 5,000 bytes (several packets) with remote CQ data, 100 bytes into the region. */
	EXPECT(fi_writedata(a.ep, src, sizeof src, NULL, 0xd47a, to_b, base + 100, key,
			    (void *)0xb1), 0);
	if (poll_both(&a, ea, 1, &err, &b, eb, 1) == 0) {
		EXPECT(err, 0);
		EXPECT_TRUE(ea[0].op_context == (void *)0xb1);
		EXPECT(ea[0].flags, FI_RMA | FI_WRITE);
		EXPECT(eb[0].flags, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA);
		EXPECT(eb[0].data, 0xd47a);
		EXPECT(eb[0].len, sizeof src);
	}
	EXPECT(memcmp(target + 100, src, sizeof src), 0);

	/* Read it back, 100 bytes more (zeros). */
	memset(dst, 0x5a, sizeof dst);
	EXPECT(fi_read(a.ep, dst, sizeof dst, NULL, to_b, base + 100, key, (void *)0xb2), 0);
	if (poll_both(&a, ea, 1, &err, &b, eb, 0) == 0) {
		EXPECT(err, 0);
		EXPECT_TRUE(ea[0].op_context == (void *)0xb2);
		EXPECT(ea[0].flags, FI_RMA | FI_READ);
	}
	EXPECT(memcmp(dst, src, sizeof src), 0);
	EXPECT(dst[5050], 0);

	/* fi_inject_write has no completion; a read after it sees it (RAW order). */
	EXPECT(fi_inject_write(a.ep, "injected", 9, to_b, base + 8000, key), 0);
	EXPECT(fi_read(a.ep, dst, 9, NULL, to_b, base + 8000, key, (void *)0xb3), 0);
	if (poll_both(&a, ea, 1, &err, &b, eb, 0) == 0)
		EXPECT_TRUE(ea[0].op_context == (void *)0xb3);
	EXPECT(strcmp(dst, "injected"), 0);

	/* A bad key and a range past the region's end: error completions. */
	EXPECT(fi_write(a.ep, src, 16, NULL, to_b, base, key + 1, (void *)0xb4), 0);
	err = 0;
	if (poll_both(&a, ea, 1, &err, &b, eb, 0) == 0) {
		EXPECT(err, FI_EACCES);
		EXPECT_TRUE(ea[0].op_context == (void *)0xb4);
	}
	EXPECT(fi_read(a.ep, dst, 16, NULL, to_b, base + sizeof target - 8, key, (void *)0xb5), 0);
	err = 0;
	if (poll_both(&a, ea, 1, &err, &b, eb, 0) == 0)
		EXPECT(err, FI_EACCES);

	/* Atomics on a counter at offset 4096 of the region (8-byte aligned). */
	{
		uint64_t *counter = (uint64_t *)(target + 4096);
		uint64_t one = 1, old = 0, cmp, swap, vals[2] = { 0x10, 0x20 };
		uint64_t where = base + 4096;

		*counter = 40;
		err = 0;
		EXPECT(fi_fetch_atomic(a.ep, &one, 1, NULL, &old, NULL, to_b, where, key, FI_UINT64,
				       FI_SUM, (void *)0xc1), 0);
		if (poll_both(&a, ea, 1, &err, &b, eb, 0) == 0) {
			EXPECT(err, 0);
			EXPECT(ea[0].flags, FI_ATOMIC | FI_READ);
		}
		EXPECT(old, 40);
		EXPECT(*counter, 41);
		cmp = 41;
		swap = 7;
		EXPECT(fi_compare_atomic(a.ep, &swap, 1, NULL, &cmp, NULL, &old, NULL, to_b, where,
					 key, FI_UINT64, FI_CSWAP, (void *)0xc2), 0);
		if (poll_both(&a, ea, 1, &err, &b, eb, 0) == 0)
			EXPECT(err, 0);
		EXPECT(old, 41);
		EXPECT(*counter, 7);
		/* Two elements, no fetch; then fi_inject_atomic, seen by an ATOMIC_READ. */
		counter[1] = 1;
		EXPECT(fi_atomic(a.ep, vals, 2, NULL, to_b, where, key, FI_UINT64, FI_BOR,
				 (void *)0xc3), 0);
		if (poll_both(&a, ea, 1, &err, &b, eb, 0) == 0)
			EXPECT(ea[0].flags, FI_ATOMIC | FI_WRITE);
		EXPECT(counter[0], 0x17);
		EXPECT(counter[1], 0x21);
		EXPECT(fi_inject_atomic(a.ep, &one, 1, to_b, where, key, FI_UINT64, FI_SUM), 0);
		vals[0] = vals[1] = 0;
		EXPECT(fi_fetch_atomic(a.ep, NULL, 2, NULL, vals, NULL, to_b, where, key, FI_UINT64,
				       FI_ATOMIC_READ, (void *)0xc4), 0);
		if (poll_both(&a, ea, 1, &err, &b, eb, 0) == 0)
			EXPECT_TRUE(ea[0].op_context == (void *)0xc4);
		EXPECT(vals[0], 0x18);
		EXPECT(vals[1], 0x21);
		/* A bad key: an error completion, nothing changed. */
		err = 0;
		EXPECT(fi_atomic(a.ep, &one, 1, NULL, to_b, where, key + 1, FI_UINT64, FI_SUM,
				 (void *)0xc5), 0);
		if (poll_both(&a, ea, 1, &err, &b, eb, 0) == 0)
			EXPECT(err, FI_EACCES);
		EXPECT(counter[0], 0x18);
	}
	/* Writes, inject writes and updating atomics that succeeded: 6. */
	if (writes)
		EXPECT(fi_cntr_read(writes), 6);
	/* The region closes with the counter still bound (fabtests' fi_multi_mr closes its
	 * regions first), and the counter after it. */
	if (mr && writes) {
		EXPECT(fi_close(&mr->fid), 0);
		mr = NULL;
	}
out:
	if (writes)
		EXPECT(fi_close(&writes->fid), 0);
	if (mr)
		EXPECT(fi_close(&mr->fid), 0);
	close_side(&a);
	close_side(&b);
	if (info)
		fi_freeinfo(info);
}

/* Polls both sides until A has `want_a` completions and B `want_b` (both are polled:
 * each side's progress runs only through its own reads); B's go to `eb`. */
static void pump(struct side *a, int want_a, struct side *b, struct fi_cq_tagged_entry *eb,
		 int want_b)
{
	struct fi_cq_tagged_entry ea;
	struct fi_cq_err_entry err;
	int got_a = 0, got_b = 0, i;

	for (i = 0; i < 20000 && (got_a < want_a || got_b < want_b); i++) {
		memset(&err, 0, sizeof err);
		if (fi_cq_readerr(a->cq, &err, 0) == 1 || fi_cq_readerr(b->cq, &err, 0) == 1) {
			EXPECT(err.err, 0);
			return;
		}
		if (got_a < want_a)
			got_a += poll_cq(a->cq, &ea, 1, 0);
		else
			poll_cq(a->cq, &ea, 0, 0);
		if (got_b < want_b)
			got_b += poll_cq(b->cq, &eb[got_b], 1, 0);
		else
			poll_cq(b->cq, eb, 0, 0);
	}
	EXPECT(got_a, want_a);
	EXPECT(got_b, want_b);
}

/* Local descriptors (fi_mr(3)). Without FI_MR_LOCAL a provider ignores `desc`, and
 * applications pass anything there (fabtests' fi_multi_recv -M passes fi_mr_desc()
 * where an array of descriptors belongs): every call below gets a `desc` that faults
 * if read, and every message, tagged message, write and read arrives. With FI_MR_LOCAL
 * every call reads them: the same calls with registered buffers and their regions'
 * descriptors pass, a NULL descriptor is -FI_EINVAL and a buffer outside its region
 * -FI_EACCES, at the one-buffer calls as at the vector and msg ones. */
static void test_desc(struct fid_fabric *fabric, int local)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct side a, b;
	struct fi_cq_tagged_entry eb[8];
	/* A's buffers, B's receive buffers, B's RMA target. */
	static char abuf[4096], bbuf[4096], target[4096];
	char outside[16] = "not registered";
	struct fid_mr *amr = NULL, *bmr = NULL, *tmr = NULL;
	fi_addr_t to_b = FI_ADDR_NOTAVAIL, to_a = FI_ADDR_NOTAVAIL;
	void *d = (void *)(uintptr_t)8, **dv = (void **)(uintptr_t)8;
	void *rd = d, **rdv = dv, *av_desc[2], *bv_desc[2], *null_desc[2] = { NULL, NULL };
	struct iovec iov[2];
	struct fi_msg msg;
	struct fi_msg_tagged tmsg;
	struct fi_msg_rma rmsg;
	struct fi_rma_iov riov;
	uint64_t key, base;
	int i;

	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	hints->fabric_attr->prov_name = strdup("nostd");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_RMA;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED |
				      (local ? FI_MR_LOCAL : 0);
	EXPECT(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info), 0);
	fi_freeinfo(hints);
	if (!info)
		goto out;
	/* The provider needs no registration (it offers no FI_MR_LOCAL); a domain opened
	 * with it all the same requires registered buffers. */
	EXPECT(info->domain_attr->mr_mode & FI_MR_LOCAL, 0);
	if (local)
		info->domain_attr->mr_mode |= FI_MR_LOCAL;
	if (open_side(fabric, info, &a) || open_side(fabric, info, &b))
		goto out;
	insert_each_other(&a, &b, &to_b, &to_a);
	EXPECT(fi_mr_reg(b.domain, target, sizeof target, FI_REMOTE_READ | FI_REMOTE_WRITE, 0,
			 1, 0, &tmr, NULL), 0);
	if (local) {
		EXPECT(fi_mr_reg(a.domain, abuf, sizeof abuf,
				 FI_SEND | FI_RECV | FI_READ | FI_WRITE, 0, 2, 0, &amr, NULL), 0);
		EXPECT(fi_mr_reg(b.domain, bbuf, sizeof bbuf, FI_RECV, 0, 3, 0, &bmr, NULL), 0);
		if (!amr || !bmr)
			goto out;
		d = av_desc[0] = av_desc[1] = fi_mr_desc(amr);
		rd = bv_desc[0] = bv_desc[1] = fi_mr_desc(bmr);
		dv = av_desc;
		rdv = bv_desc;
	}
	if (!tmr)
		goto out;
	key = fi_mr_key(tmr);
	base = info->domain_attr->mr_mode & FI_MR_VIRT_ADDR ? (uint64_t)(uintptr_t)target : 0;
	memset(bbuf, 0, sizeof bbuf);
	for (i = 0; i < 8; i++)
		snprintf(abuf + 64 * i, 64, "desc %d", i);

	/* Messages: four receives, four sends, every form with a descriptor. */
	EXPECT(fi_recv(b.ep, bbuf, 64, rd, FI_ADDR_UNSPEC, NULL), 0);
	iov[0].iov_base = bbuf + 64;
	iov[0].iov_len = 32;
	iov[1].iov_base = bbuf + 96;
	iov[1].iov_len = 32;
	EXPECT(fi_recvv(b.ep, iov, rdv, 2, FI_ADDR_UNSPEC, NULL), 0);
	iov[0].iov_base = bbuf + 128;
	iov[0].iov_len = 64;
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = iov;
	msg.desc = rdv;
	msg.iov_count = 1;
	msg.addr = FI_ADDR_UNSPEC;
	EXPECT(fi_recvmsg(b.ep, &msg, 0), 0);
	EXPECT(fi_recv(b.ep, bbuf + 192, 64, rd, FI_ADDR_UNSPEC, NULL), 0);
	EXPECT(fi_send(a.ep, abuf, 64, d, to_b, NULL), 0);
	iov[0].iov_base = abuf + 64;
	iov[0].iov_len = 32;
	iov[1].iov_base = abuf + 96;
	iov[1].iov_len = 32;
	EXPECT(fi_sendv(a.ep, iov, dv, 2, to_b, NULL), 0);
	iov[0].iov_base = abuf + 128;
	iov[0].iov_len = 64;
	msg.desc = dv;
	msg.addr = to_b;
	EXPECT(fi_sendmsg(a.ep, &msg, FI_COMPLETION), 0);
	EXPECT(fi_senddata(a.ep, abuf + 192, 64, d, 0xda7a, to_b, NULL), 0);
	pump(&a, 4, &b, eb, 4);
	EXPECT(memcmp(bbuf, abuf, 256), 0);
	EXPECT(eb[3].data, 0xda7a);

	/* Tagged, the same four forms. */
	EXPECT(fi_trecv(b.ep, bbuf + 256, 64, rd, FI_ADDR_UNSPEC, 1, 0, NULL), 0);
	iov[0].iov_base = bbuf + 320;
	iov[0].iov_len = 32;
	iov[1].iov_base = bbuf + 352;
	iov[1].iov_len = 32;
	EXPECT(fi_trecvv(b.ep, iov, rdv, 2, FI_ADDR_UNSPEC, 2, 0, NULL), 0);
	iov[0].iov_base = bbuf + 384;
	iov[0].iov_len = 64;
	memset(&tmsg, 0, sizeof tmsg);
	tmsg.msg_iov = iov;
	tmsg.desc = rdv;
	tmsg.iov_count = 1;
	tmsg.addr = FI_ADDR_UNSPEC;
	tmsg.tag = 3;
	EXPECT(fi_trecvmsg(b.ep, &tmsg, 0), 0);
	EXPECT(fi_trecv(b.ep, bbuf + 448, 64, rd, FI_ADDR_UNSPEC, 4, 0, NULL), 0);
	EXPECT(fi_tsend(a.ep, abuf + 256, 64, d, to_b, 1, NULL), 0);
	iov[0].iov_base = abuf + 320;
	iov[0].iov_len = 32;
	iov[1].iov_base = abuf + 352;
	iov[1].iov_len = 32;
	EXPECT(fi_tsendv(a.ep, iov, dv, 2, to_b, 2, NULL), 0);
	iov[0].iov_base = abuf + 384;
	iov[0].iov_len = 64;
	tmsg.desc = dv;
	tmsg.addr = to_b;
	EXPECT(fi_tsendmsg(a.ep, &tmsg, FI_COMPLETION), 0);
	EXPECT(fi_tsenddata(a.ep, abuf + 448, 64, d, 0x7a9, to_b, 4, NULL), 0);
	pump(&a, 4, &b, eb, 4);
	EXPECT(memcmp(bbuf + 256, abuf + 256, 256), 0);
	EXPECT(eb[3].tag, 4);

	/* RMA: three writes into B's target, three reads back into A's buffer. */
	EXPECT(fi_write(a.ep, abuf, 64, d, to_b, base, key, NULL), 0);
	iov[0].iov_base = abuf + 64;
	iov[0].iov_len = 32;
	iov[1].iov_base = abuf + 96;
	iov[1].iov_len = 32;
	EXPECT(fi_writev(a.ep, iov, dv, 2, to_b, base + 64, key, NULL), 0);
	iov[0].iov_base = abuf + 128;
	iov[0].iov_len = 64;
	riov.addr = base + 128;
	riov.len = 64;
	riov.key = key;
	memset(&rmsg, 0, sizeof rmsg);
	rmsg.msg_iov = iov;
	rmsg.desc = dv;
	rmsg.iov_count = 1;
	rmsg.addr = to_b;
	rmsg.rma_iov = &riov;
	rmsg.rma_iov_count = 1;
	EXPECT(fi_writemsg(a.ep, &rmsg, FI_COMPLETION), 0);
	pump(&a, 3, &b, eb, 0);
	EXPECT(memcmp(target, abuf, 192), 0);
	EXPECT(fi_read(a.ep, abuf + 1024, 64, d, to_b, base, key, NULL), 0);
	iov[0].iov_base = abuf + 1088;
	iov[0].iov_len = 32;
	iov[1].iov_base = abuf + 1120;
	iov[1].iov_len = 32;
	EXPECT(fi_readv(a.ep, iov, dv, 2, to_b, base + 64, key, NULL), 0);
	iov[0].iov_base = abuf + 1152;
	iov[0].iov_len = 64;
	EXPECT(fi_readmsg(a.ep, &rmsg, FI_COMPLETION), 0);
	pump(&a, 3, &b, eb, 0);
	EXPECT(memcmp(abuf + 1024, abuf, 192), 0);

	if (local) {
		/* A NULL descriptor, and a buffer its descriptor's region does not hold. */
		EXPECT(fi_send(a.ep, abuf, 8, NULL, to_b, NULL), -FI_EINVAL);
		EXPECT(fi_tsend(a.ep, outside, 8, d, to_b, 1, NULL), -FI_EACCES);
		EXPECT(fi_recv(b.ep, bbuf, 8, NULL, FI_ADDR_UNSPEC, NULL), -FI_EINVAL);
		EXPECT(fi_trecv(b.ep, outside, 8, rd, FI_ADDR_UNSPEC, 1, 0, NULL), -FI_EACCES);
		iov[0].iov_base = abuf;
		iov[0].iov_len = 8;
		EXPECT(fi_sendv(a.ep, iov, null_desc, 1, to_b, NULL), -FI_EINVAL);
		EXPECT(fi_write(a.ep, outside, 8, d, to_b, base, key, NULL), -FI_EACCES);
		EXPECT(fi_readv(a.ep, iov, null_desc, 1, to_b, base, key, NULL), -FI_EINVAL);
		/* Inject copies the buffer at once: no descriptor needed (fi_msg(3)). */
		EXPECT(fi_recv(b.ep, bbuf + 512, 16, rd, FI_ADDR_UNSPEC, NULL), 0);
		EXPECT(fi_inject(a.ep, outside, sizeof outside, to_b), 0);
		pump(&a, 0, &b, eb, 1);
		EXPECT(strcmp(bbuf + 512, outside), 0);
	}
out:
	if (tmr)
		EXPECT(fi_close(&tmr->fid), 0);
	if (amr)
		EXPECT(fi_close(&amr->fid), 0);
	if (bmr)
		EXPECT(fi_close(&bmr->fid), 0);
	close_side(&a);
	close_side(&b);
	if (info)
		fi_freeinfo(info);
}

int main(void)
{
	struct fi_info *info;
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_eq *eq = NULL;
	struct fid_cq *cq = NULL;
	struct fid_av *av = NULL;
	struct fid_cntr *cntr = NULL;
	struct fid_mr *mr = NULL;
	struct fid_ep *ep = NULL;
	struct fid *wrong[1];

	test_getinfo();

	info = getinfo(FI_EP_RDM);
	if (!info) {
		printf("FAIL: no RDM info from the nostd provider\n");
		return 1;
	}
	EXPECT(info->ep_attr->type, FI_EP_RDM);
	EXPECT(fi_fabric(info->fabric_attr, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_fabric(info->fabric_attr, &fabric, (void *)0xfa), 0);
	if (!fabric)
		return 1;
	EXPECT_TRUE(fabric->fid.fclass == FI_CLASS_FABRIC);
	EXPECT_TRUE(fabric->fid.context == (void *)0xfa);
	EXPECT(fabric->api_version, FI_VERSION(1, 17));

	EXPECT(fi_domain(fabric, NULL, &domain, NULL), -FI_EINVAL);
	EXPECT(fi_domain(fabric, info, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_domain(fabric, info, &domain, (void *)0xd1), 0);
	if (!domain)
		return 1;
	EXPECT_TRUE(domain->fid.fclass == FI_CLASS_DOMAIN);
	EXPECT_TRUE(domain->fid.context == (void *)0xd1);
	EXPECT(fi_endpoint(domain, info, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_endpoint(domain, NULL, &ep, NULL), -FI_EINVAL);
	/* Passive endpoints are FI_EP_MSG only (tests/c/cm_test.c). */
	EXPECT(fi_passive_ep(fabric, info, NULL, NULL), -FI_EINVAL);
	EXPECT(fi_wait_open(fabric, NULL, NULL), -FI_EINVAL);

	test_eq(fabric, &eq);
	test_cq(domain, &cq);
	test_av(domain, &av);
	test_cntr(domain, &cntr);
	test_mr(domain, &mr);
	test_ep(fabric, domain, info);
	test_dgram(domain);
	test_more(fabric);
	test_auto_progress(fabric);
	test_rma(fabric);
	test_desc(fabric, 0);
	test_desc(fabric, 1);

	/* fi_trywait: a domain is not a waitable object; a wait-less CQ cannot wait. */
	wrong[0] = &domain->fid;
	EXPECT(fi_trywait(fabric, wrong, 1), -FI_EINVAL);
	EXPECT(fi_trywait(fabric, NULL, 1), -FI_EINVAL);
	if (cq) {
		wrong[0] = &cq->fid;
		EXPECT(fi_trywait(fabric, wrong, 1), 0);
	}

	/* The wrong order: parents first. */
	EXPECT(fi_close(&fabric->fid), -FI_EBUSY);
	EXPECT(fi_close(&domain->fid), -FI_EBUSY);

	/* The right order. */
	if (mr)
		EXPECT(fi_close(&mr->fid), 0);
	if (cntr)
		EXPECT(fi_close(&cntr->fid), 0);
	if (av)
		EXPECT(fi_close(&av->fid), 0);
	EXPECT(fi_close(&fabric->fid), -FI_EBUSY);
	if (cq)
		EXPECT(fi_close(&cq->fid), 0);
	EXPECT(fi_close(&domain->fid), 0);
	EXPECT(fi_close(&fabric->fid), -FI_EBUSY); /* the EQ */
	if (eq)
		EXPECT(fi_close(&eq->fid), 0);
	EXPECT(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);

	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
