/*
 * Scalable endpoints of the nostd provider through the system libfabric
 * (fi_endpoint(3) "SCALABLE ENDPOINTS", fi_av(3) rx_ctx_bits and fi_rx_addr):
 * getinfo's context limits, fi_scalable_ep with 3 contexts on one domain and a plain
 * endpoint on another, each transmit context sending to a different receive context,
 * a plain endpoint that names no context reaching context 0, the binding and state
 * errors, closing a context with receives queued (canceled), and the close order;
 * then scalable endpoints whose other side is a shared context (FI_SHARED_CONTEXT
 * for rx_ctx_cnt with an srx, for tx_ctx_cnt with an stx).
 *
 * Run with FI_PROVIDER_PATH=<dir holding libnostd-fi.so> FI_PROVIDER=nostd.
 * Prints one line per failed check; exits 0 when every check passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>

#define N 3
#define BITS 2

#include "expect.h"

/* Reads one entry of `cq` (successes, or with `err` an error entry), polling for
 * up to about two seconds; returns 1 when one came. */
static int read_one(struct fid_cq *cq, struct fi_cq_entry *e, struct fi_cq_err_entry *err)
{
	struct timespec t0, t;
	ssize_t k;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		k = fi_cq_read(cq, e, 1);
		if (k == 1)
			return 1;
		if (k == -FI_EAVAIL && err) {
			memset(err, 0, sizeof *err);
			return fi_cq_readerr(cq, err, 0) == 1;
		}
		if (k != -FI_EAGAIN)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > 2000)
			return 0;
	}
}

/* A scalable endpoint on `d` with N contexts on one side and a shared context on the
 * other (`shared_rx`: the receive side), talking to b's plain endpoint `ep` (CQ `cqb`,
 * AV `avb`): the shared context and the shared side's CQ bind to the scalable
 * endpoint, a message from b lands in a buffer posted to the srx (or in receive
 * context 0), and the transmit side (the contexts, or the scalable endpoint itself on
 * an stx) reaches b. Everything is closed again. */
static void shared_side(struct fid_domain *d, const struct fi_info *base, int shared_rx,
			struct fid_ep *ep, struct fid_cq *cqb, struct fid_av *avb)
{
	struct fi_info *info = fi_dupinfo(base);
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .rx_ctx_bits = BITS };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT };
	struct fid_ep *sep = NULL, *ctx[N], *srx = NULL, *bad = NULL;
	struct fid_stx *stx = NULL;
	struct fid_cq *cq = NULL, *ctxcq[N];
	struct fid_av *av = NULL;
	struct fi_cq_entry e;
	char name[64], buf[64], bbuf[64];
	size_t len;
	fi_addr_t to_b = FI_ADDR_UNSPEC, to_sep = FI_ADDR_UNSPEC;
	int i;

	info->ep_attr->tx_ctx_cnt = shared_rx ? N : FI_SHARED_CONTEXT;
	info->ep_attr->rx_ctx_cnt = shared_rx ? FI_SHARED_CONTEXT : N;
	EXPECT(fi_scalable_ep(d, info, &sep, NULL), 0);
	EXPECT(fi_av_open(d, &av_attr, &av, NULL), 0);
	EXPECT(fi_cq_open(d, &cq_attr, &cq, NULL), 0);
	if (!sep || !av || !cq)
		return;
	EXPECT(fi_scalable_ep_bind(sep, &av->fid, 0), 0);
	if (shared_rx) {
		EXPECT(fi_srx_context(d, info->rx_attr, &srx, NULL), 0);
		EXPECT(fi_rx_context(sep, 0, NULL, &bad, NULL), -FI_EINVAL);
		EXPECT(fi_scalable_ep_bind(sep, &cq->fid, FI_TRANSMIT), -FI_EINVAL);
		EXPECT(fi_scalable_ep_bind(sep, &cq->fid, FI_RECV), 0);
		EXPECT(fi_enable(sep), -FI_EOPBADSTATE);
		EXPECT(fi_scalable_ep_bind(sep, &srx->fid, 0), 0);
	} else {
		EXPECT(fi_stx_context(d, info->tx_attr, &stx, NULL), 0);
		EXPECT(fi_tx_context(sep, 0, NULL, &bad, NULL), -FI_EINVAL);
		EXPECT(fi_scalable_ep_bind(sep, &stx->fid, 0), 0);
		EXPECT(fi_enable(sep), -FI_ENOCQ);
		EXPECT(fi_scalable_ep_bind(sep, &cq->fid, FI_TRANSMIT), 0);
	}
	for (i = 0; i < N; i++) {
		ctxcq[i] = NULL;
		ctx[i] = NULL;
		EXPECT(fi_cq_open(d, &cq_attr, &ctxcq[i], NULL), 0);
		if (shared_rx) {
			EXPECT(fi_tx_context(sep, i, NULL, &ctx[i], NULL), 0);
			EXPECT(fi_ep_bind(ctx[i], &ctxcq[i]->fid, FI_TRANSMIT), 0);
		} else {
			EXPECT(fi_rx_context(sep, i, NULL, &ctx[i], NULL), 0);
			EXPECT(fi_ep_bind(ctx[i], &ctxcq[i]->fid, FI_RECV), 0);
		}
		EXPECT(fi_enable(ctx[i]), 0);
	}
	EXPECT(fi_enable(sep), 0);
	len = sizeof name;
	EXPECT(fi_getname(&ep->fid, name, &len), 0);
	EXPECT(fi_av_insert(av, name, 1, &to_b, 0, NULL), 1);
	len = sizeof name;
	EXPECT(fi_getname(&sep->fid, name, &len), 0);
	EXPECT(fi_av_insert(avb, name, 1, &to_sep, 0, NULL), 1);

	/* b to the scalable endpoint. */
	memset(buf, 0, sizeof buf);
	if (shared_rx)
		EXPECT(fi_recv(srx, buf, sizeof buf, NULL, FI_ADDR_UNSPEC, (void *)0x600), 0);
	else
		EXPECT(fi_recv(ctx[0], buf, sizeof buf, NULL, FI_ADDR_UNSPEC, (void *)0x600), 0);
	EXPECT(fi_send(ep, "to the sep", 11, NULL, to_sep, (void *)0xb2), 0);
	EXPECT(read_one(cqb, &e, NULL), 1);
	EXPECT((long)e.op_context, 0xb2);
	EXPECT(read_one(shared_rx ? cq : ctxcq[0], &e, NULL), 1);
	EXPECT((long)e.op_context, 0x600);
	EXPECT(strcmp(buf, "to the sep"), 0);

	/* The transmit side to b: each context, or the endpoint itself on the stx. */
	for (i = 0; i < (shared_rx ? N : 1); i++) {
		struct fid_ep *from = shared_rx ? ctx[i] : sep;

		memset(bbuf, 0, sizeof bbuf);
		snprintf(buf, sizeof buf, "shared %d from %d", shared_rx, i);
		EXPECT(fi_recv(ep, bbuf, sizeof bbuf, NULL, FI_ADDR_UNSPEC, (void *)0xb3), 0);
		EXPECT(fi_send(from, buf, strlen(buf) + 1, NULL, to_b, (void *)(long)(0x700 + i)), 0);
		EXPECT(read_one(shared_rx ? ctxcq[i] : cq, &e, NULL), 1);
		EXPECT((long)e.op_context, 0x700 + i);
		do {
			EXPECT(read_one(cqb, &e, NULL), 1);
		} while ((long)e.op_context != 0xb3 && failures == 0);
		EXPECT(strcmp(bbuf, buf), 0);
	}

	if (srx)
		EXPECT(fi_close(&srx->fid), -FI_EBUSY);
	for (i = 0; i < N; i++) {
		if (ctx[i])
			EXPECT(fi_close(&ctx[i]->fid), 0);
		if (ctxcq[i])
			EXPECT(fi_close(&ctxcq[i]->fid), 0);
	}
	EXPECT(fi_close(&sep->fid), 0);
	if (srx)
		EXPECT(fi_close(&srx->fid), 0);
	if (stx)
		EXPECT(fi_close(&stx->fid), 0);
	EXPECT(fi_close(&cq->fid), 0);
	EXPECT(fi_close(&av->fid), 0);
	fi_freeinfo(info);
}

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL;
	struct fid_fabric *fabric = NULL;
	struct fid_domain *da = NULL, *db = NULL;
	struct fid_av *ava = NULL, *avb = NULL;
	struct fid_cq *txcq[N], *rxcq[N], *cqb = NULL;
	struct fid_ep *sep = NULL, *tx[N], *rx[N], *ep = NULL, *bad = NULL;
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .rx_ctx_bits = BITS };
	struct fi_av_attr plain_av = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_CONTEXT };
	struct fi_cq_entry e;
	struct fi_cq_err_entry err;
	char name[64], bufs[N][64], out[N][16];
	size_t len;
	fi_addr_t to_b = FI_ADDR_UNSPEC, to_a = FI_ADDR_UNSPEC;
	int i;

	hints->fabric_attr->prov_name = strdup("nostd");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_NAMED_RX_CTX;
	hints->ep_attr->tx_ctx_cnt = N;
	hints->ep_attr->rx_ctx_cnt = N;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &info), 0);
	if (!info) {
		printf("FAIL: no scalable RDM info\n");
		return 1;
	}
	EXPECT_TRUE(info->caps & FI_NAMED_RX_CTX);
	EXPECT(info->ep_attr->tx_ctx_cnt, N);
	EXPECT(info->ep_attr->rx_ctx_cnt, N);
	EXPECT_TRUE(info->domain_attr->max_ep_tx_ctx >= N);
	EXPECT_TRUE(info->domain_attr->max_ep_rx_ctx >= N);

	EXPECT(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	EXPECT(fi_domain(fabric, info, &da, NULL), 0);
	EXPECT(fi_domain(fabric, info, &db, NULL), 0);
	if (!fabric || !da || !db)
		return 1;
	/* A plain endpoint cannot have several contexts. */
	EXPECT(fi_endpoint(da, info, &bad, NULL), -FI_EINVAL);
	EXPECT(fi_scalable_ep(da, info, &sep, (void *)0x5e), 0);
	if (!sep)
		return 1;
	EXPECT(fi_av_open(da, &av_attr, &ava, NULL), 0);
	EXPECT(fi_scalable_ep_bind(sep, &ava->fid, 0), 0);
	EXPECT(fi_tx_context(sep, N, NULL, &bad, NULL), -FI_EINVAL);
	for (i = 0; i < N; i++) {
		EXPECT(fi_tx_context(sep, i, NULL, &tx[i], NULL), 0);
		EXPECT(fi_rx_context(sep, i, NULL, &rx[i], NULL), 0);
		EXPECT(fi_cq_open(da, &cq_attr, &txcq[i], NULL), 0);
		EXPECT(fi_cq_open(da, &cq_attr, &rxcq[i], NULL), 0);
	}
	EXPECT(fi_tx_context(sep, 0, NULL, &bad, NULL), -FI_EBUSY);
	for (i = 0; i < N; i++) {
		/* A transmit context binds transmit CQs only. */
		EXPECT(fi_ep_bind(tx[i], &txcq[i]->fid, FI_RECV), -FI_EINVAL);
		EXPECT(fi_enable(tx[i]), -FI_ENOCQ);
		EXPECT(fi_ep_bind(tx[i], &txcq[i]->fid, FI_TRANSMIT), 0);
		EXPECT(fi_enable(tx[i]), 0);
		EXPECT(fi_enable(tx[i]), -FI_EOPBADSTATE);
		EXPECT(fi_ep_bind(rx[i], &rxcq[i]->fid, FI_RECV), 0);
		EXPECT(fi_enable(rx[i]), 0);
	}
	EXPECT(fi_enable(sep), 0);

	/* Side b: a plain endpoint, an AV without context bits. */
	EXPECT(fi_cq_open(db, &cq_attr, &cqb, NULL), 0);
	EXPECT(fi_av_open(db, &plain_av, &avb, NULL), 0);
	EXPECT(fi_endpoint(db, info, &bad, NULL), -FI_EINVAL);
	info->ep_attr->tx_ctx_cnt = 1;
	info->ep_attr->rx_ctx_cnt = 1;
	EXPECT(fi_endpoint(db, info, &ep, NULL), 0);
	if (!ep || !cqb || !avb)
		return 1;
	EXPECT(fi_tx_context(ep, 0, NULL, &bad, NULL), -FI_ENOSYS);
	EXPECT(fi_ep_bind(ep, &cqb->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_ep_bind(ep, &avb->fid, 0), 0);
	EXPECT(fi_enable(ep), 0);

	len = sizeof name;
	EXPECT(fi_getname(&ep->fid, name, &len), 0);
	EXPECT(fi_av_insert(ava, name, 1, &to_b, 0, NULL), 1);
	len = sizeof name;
	EXPECT(fi_getname(&sep->fid, name, &len), 0);
	EXPECT(fi_av_insert(avb, name, 1, &to_a, 0, NULL), 1);

	/* b names no context: its message reaches receive context 0 only. */
	for (i = 0; i < N; i++) {
		memset(bufs[i], 0, sizeof bufs[i]);
		EXPECT(fi_recv(rx[i], bufs[i], sizeof bufs[i], NULL, FI_ADDR_UNSPEC,
			       (void *)(long)(0x100 + i)), 0);
	}
	EXPECT(fi_send(ep, "plain", 6, NULL, to_a, (void *)0xb0), 0);
	EXPECT(read_one(cqb, &e, NULL), 1);
	EXPECT((long)e.op_context, 0xb0);
	EXPECT(read_one(rxcq[0], &e, NULL), 1);
	EXPECT((long)e.op_context, 0x100);
	EXPECT(strcmp(bufs[0], "plain"), 0);

	/* Each transmit context of a sends to b, completing on its own CQ. */
	for (i = 0; i < N; i++) {
		snprintf(out[i], sizeof out[i], "ctx %d", i);
		EXPECT(fi_recv(ep, bufs[0], sizeof bufs[0], NULL, FI_ADDR_UNSPEC, (void *)0xb1), 0);
		EXPECT(fi_send(tx[i], out[i], strlen(out[i]) + 1, NULL, to_b,
			       (void *)(long)(0x200 + i)), 0);
		EXPECT(read_one(txcq[i], &e, NULL), 1);
		EXPECT((long)e.op_context, 0x200 + i);
		do {
			EXPECT(read_one(cqb, &e, NULL), 1);
		} while ((long)e.op_context != 0xb1 && failures == 0);
		EXPECT(strcmp(bufs[0], out[i]), 0);
	}
	/* b's AV has rx_ctx_bits 0, so b cannot name a context; a's AV (BITS bits) can:
	 * a's transmit context 0 sends to each of its own receive contexts by fi_rx_addr. */
	len = sizeof name;
	EXPECT(fi_getname(&sep->fid, name, &len), 0);
	{
		fi_addr_t self = FI_ADDR_UNSPEC;

		EXPECT(fi_av_insert(ava, name, 1, &self, 0, NULL), 1);
		for (i = 1; i < N; i++) {
			EXPECT(fi_send(tx[0], out[i], strlen(out[i]) + 1, NULL,
				       fi_rx_addr(self, i, BITS), (void *)0x400), 0);
			EXPECT(read_one(txcq[0], &e, NULL), 1);
		}
		for (i = 1; i < N; i++) {
			EXPECT(read_one(rxcq[i], &e, NULL), 1);
			/* The receives posted before b's message, still waiting. */
			EXPECT((long)e.op_context, 0x100 + i);
			EXPECT(strcmp(bufs[i], out[i]), 0);
		}
	}

	/* A shared context on one side. */
	shared_side(da, info, 1, ep, cqb, avb);
	shared_side(da, info, 0, ep, cqb, avb);

	/* Closing a receive context cancels what it had posted; the endpoint closes
	 * only after its contexts (-FI_EBUSY), and CQs only after their contexts. */
	EXPECT(fi_recv(rx[1], bufs[1], sizeof bufs[1], NULL, FI_ADDR_UNSPEC, (void *)0x501), 0);
	EXPECT(fi_close(&sep->fid), -FI_EBUSY);
	EXPECT(fi_close(&rxcq[1]->fid), -FI_EBUSY);
	EXPECT(fi_close(&rx[1]->fid), 0);
	EXPECT(read_one(rxcq[1], &e, &err), 1);
	EXPECT(err.err, FI_ECANCELED);
	EXPECT((long)err.op_context, 0x501);
	for (i = 0; i < N; i++) {
		EXPECT(fi_close(&tx[i]->fid), 0);
		if (i != 1)
			EXPECT(fi_close(&rx[i]->fid), 0);
		EXPECT(fi_close(&txcq[i]->fid), 0);
		EXPECT(fi_close(&rxcq[i]->fid), 0);
	}
	EXPECT(fi_close(&ava->fid), -FI_EBUSY);
	EXPECT(fi_close(&sep->fid), 0);
	EXPECT(fi_close(&ava->fid), 0);
	EXPECT(fi_close(&ep->fid), 0);
	EXPECT(fi_close(&avb->fid), 0);
	EXPECT(fi_close(&cqb->fid), 0);
	EXPECT(fi_close(&da->fid), 0);
	EXPECT(fi_close(&db->fid), 0);
	EXPECT(fi_close(&fabric->fid), 0);
	fi_freeinfo(info);
	fi_freeinfo(hints);

	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
