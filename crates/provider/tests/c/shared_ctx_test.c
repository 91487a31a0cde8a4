/*
 * Shared transmit and receive contexts of the nostd provider through the system
 * libfabric (fi_endpoint(3) "SHARED CONTEXTS"): getinfo's FI_SHARED_CONTEXT and
 * max_ep_stx_ctx / max_ep_srx_ctx, N RDM endpoints of one domain on one fi_stx_context
 * and one fi_srx_context, receives posted to the context taken by whichever endpoint
 * a message reaches (completing on that endpoint's CQ), tagged receives, a receive
 * posted through a bound endpoint, sends of every endpoint through the shared
 * transmit context, fi_cancel on the context, an FI_MULTI_RECV buffer on the
 * context that every endpoint's messages fill, the binding and
 * enable errors, and the close order (-FI_EBUSY while endpoints are bound).
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
#include <rdma/fi_tagged.h>

#define N 3

#include "expect.h"

/* Reads one entry of `cq` (successes, or with `err` an error entry), polling for
 * up to about two seconds; returns 1 when one came. */
static int read_one(struct fid_cq *cq, struct fi_cq_tagged_entry *e, struct fi_cq_err_entry *err)
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

int main(void)
{
	struct fi_info *hints = fi_allocinfo(), *info = NULL, *plain = NULL;
	struct fid_fabric *fabric = NULL;
	struct fid_domain *da = NULL, *db = NULL;
	struct fid_av *ava = NULL, *avb = NULL;
	struct fid_cq *txcq[N], *rxcq[N], *cqb = NULL;
	struct fid_ep *ep[N], *srx = NULL, *b = NULL, *bad = NULL;
	struct fid_stx *stx = NULL;
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_TAGGED };
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	char name[64], bufs[N + 2][64], out[N][16], multi[2 * N][16], big[2 * N * 16 + 16];
	size_t len, min_free = 16, opt, optlen;
	fi_addr_t to_a[N], to_b = FI_ADDR_UNSPEC;
	int i, k, seen, releases;
	struct iovec iov;
	struct fi_msg msg;

	hints->fabric_attr->prov_name = strdup("nostd");
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_TAGGED | FI_MULTI_RECV;
	hints->ep_attr->tx_ctx_cnt = FI_SHARED_CONTEXT;
	hints->ep_attr->rx_ctx_cnt = FI_SHARED_CONTEXT;
	EXPECT(fi_getinfo(FI_VERSION(1, 17), "127.0.0.1", NULL, FI_SOURCE, hints, &info), 0);
	if (!info) {
		printf("FAIL: no shared-context RDM info\n");
		return 1;
	}
	EXPECT(info->ep_attr->tx_ctx_cnt, FI_SHARED_CONTEXT);
	EXPECT(info->ep_attr->rx_ctx_cnt, FI_SHARED_CONTEXT);
	EXPECT_TRUE(info->domain_attr->max_ep_stx_ctx >= N);
	EXPECT_TRUE(info->domain_attr->max_ep_srx_ctx >= N);
	plain = fi_dupinfo(info);
	plain->ep_attr->tx_ctx_cnt = 1;
	plain->ep_attr->rx_ctx_cnt = 1;

	EXPECT(fi_fabric(info->fabric_attr, &fabric, NULL), 0);
	EXPECT(fi_domain(fabric, info, &da, NULL), 0);
	EXPECT(fi_domain(fabric, info, &db, NULL), 0);
	if (!fabric || !da || !db)
		return 1;
	EXPECT(fi_stx_context(da, info->tx_attr, &stx, (void *)0x57), 0);
	EXPECT(fi_srx_context(da, info->rx_attr, &srx, (void *)0x58), 0);
	EXPECT(fi_av_open(da, &av_attr, &ava, NULL), 0);
	if (!stx || !srx || !ava)
		return 1;
	for (i = 0; i < N; i++) {
		EXPECT(fi_endpoint(da, info, &ep[i], NULL), 0);
		EXPECT(fi_cq_open(da, &cq_attr, &txcq[i], NULL), 0);
		EXPECT(fi_cq_open(da, &cq_attr, &rxcq[i], NULL), 0);
		EXPECT(fi_ep_bind(ep[i], &txcq[i]->fid, FI_TRANSMIT), 0);
		EXPECT(fi_ep_bind(ep[i], &rxcq[i]->fid, FI_RECV), 0);
		EXPECT(fi_ep_bind(ep[i], &ava->fid, 0), 0);
		/* Opened with FI_SHARED_CONTEXT: enabling needs the contexts bound. */
		EXPECT(fi_enable(ep[i]), -FI_EOPBADSTATE);
		EXPECT(fi_ep_bind(ep[i], &stx->fid, FI_TRANSMIT), -FI_EINVAL);
		EXPECT(fi_ep_bind(ep[i], &stx->fid, 0), 0);
		EXPECT(fi_ep_bind(ep[i], &stx->fid, 0), -FI_EINVAL);
		EXPECT(fi_ep_bind(ep[i], &srx->fid, 0), 0);
		EXPECT(fi_ep_bind(ep[i], &srx->fid, 0), -FI_EINVAL);
		EXPECT(fi_setopt(&ep[i]->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min_free,
				 sizeof min_free), 0);
		EXPECT(fi_enable(ep[i]), 0);
	}
	/* An endpoint with its own contexts takes no shared one. */
	EXPECT(fi_endpoint(da, plain, &bad, NULL), 0);
	EXPECT(fi_ep_bind(bad, &srx->fid, 0), -FI_EINVAL);
	EXPECT(fi_ep_bind(bad, &stx->fid, 0), -FI_EINVAL);
	EXPECT(fi_close(&bad->fid), 0);
	/* The contexts close only after their endpoints. */
	EXPECT(fi_close(&srx->fid), -FI_EBUSY);
	EXPECT(fi_close(&stx->fid), -FI_EBUSY);

	/* Side b: a plain endpoint. */
	EXPECT(fi_cq_open(db, &cq_attr, &cqb, NULL), 0);
	EXPECT(fi_av_open(db, &av_attr, &avb, NULL), 0);
	EXPECT(fi_endpoint(db, plain, &b, NULL), 0);
	if (!b || !cqb || !avb)
		return 1;
	EXPECT(fi_ep_bind(b, &cqb->fid, FI_TRANSMIT | FI_RECV), 0);
	EXPECT(fi_ep_bind(b, &avb->fid, 0), 0);
	EXPECT(fi_enable(b), 0);
	len = sizeof name;
	EXPECT(fi_getname(&b->fid, name, &len), 0);
	EXPECT(fi_av_insert(ava, name, 1, &to_b, 0, NULL), 1);
	for (i = 0; i < N; i++) {
		len = sizeof name;
		EXPECT(fi_getname(&ep[i]->fid, name, &len), 0);
		EXPECT(fi_av_insert(avb, name, 1, &to_a[i], 0, NULL), 1);
	}

	/* N receives on the context; b sends one message to each endpoint: each lands
	 * in one of them, on the CQ of the endpoint it was sent to. */
	for (i = 0; i < N; i++) {
		memset(bufs[i], 0, sizeof bufs[i]);
		EXPECT(fi_recv(srx, bufs[i], sizeof bufs[i], NULL, FI_ADDR_UNSPEC,
			       (void *)(long)i), 0);
	}
	for (i = 0; i < N; i++) {
		snprintf(out[i], sizeof out[i], "to ep %d", i);
		EXPECT(fi_send(b, out[i], strlen(out[i]) + 1, NULL, to_a[i],
			       (void *)(long)(0x200 + i)), 0);
		EXPECT(read_one(cqb, &e, NULL), 1);
	}
	seen = 0;
	for (i = 0; i < N; i++) {
		EXPECT(read_one(rxcq[i], &e, NULL), 1);
		if ((long)e.op_context >= 0 && (long)e.op_context < N) {
			EXPECT(strcmp(bufs[(long)e.op_context], out[i]), 0);
			seen |= 1 << (long)e.op_context;
		}
	}
	EXPECT(seen, (1 << N) - 1);

	/* A tagged receive on the context, posted after the message arrived at ep 1;
	 * one posted through ep 0 goes to the context and takes ep 2's message. */
	EXPECT(fi_tsend(b, "tagged", 7, NULL, to_a[1], 0x77, (void *)0x300), 0);
	EXPECT(read_one(cqb, &e, NULL), 1);
	memset(bufs[N], 0, sizeof bufs[N]);
	EXPECT(fi_trecv(srx, bufs[N], sizeof bufs[N], NULL, FI_ADDR_UNSPEC, 0x77, 0,
			(void *)0x301), 0);
	EXPECT(read_one(rxcq[1], &e, NULL), 1);
	EXPECT((long)e.op_context, 0x301);
	EXPECT(e.tag, 0x77);
	EXPECT(strcmp(bufs[N], "tagged"), 0);
	memset(bufs[N + 1], 0, sizeof bufs[N + 1]);
	EXPECT(fi_recv(ep[0], bufs[N + 1], sizeof bufs[N + 1], NULL, FI_ADDR_UNSPEC,
		       (void *)0x302), 0);
	EXPECT(fi_send(b, "via ep 0", 9, NULL, to_a[2], (void *)0x303), 0);
	EXPECT(read_one(cqb, &e, NULL), 1);
	EXPECT(read_one(rxcq[2], &e, NULL), 1);
	EXPECT((long)e.op_context, 0x302);
	EXPECT(strcmp(bufs[N + 1], "via ep 0"), 0);

	/* Every endpoint sends through the shared transmit context; completions on its
	 * own CQ. */
	for (i = 0; i < N; i++) {
		memset(bufs[0], 0, sizeof bufs[0]);
		EXPECT(fi_recv(b, bufs[0], sizeof bufs[0], NULL, FI_ADDR_UNSPEC, (void *)0xb1), 0);
		EXPECT(fi_send(ep[i], out[i], strlen(out[i]) + 1, NULL, to_b,
			       (void *)(long)(0x400 + i)), 0);
		EXPECT(read_one(txcq[i], &e, NULL), 1);
		EXPECT((long)e.op_context, 0x400 + i);
		EXPECT(read_one(cqb, &e, NULL), 1);
		EXPECT((long)e.op_context, 0xb1);
		EXPECT(strcmp(bufs[0], out[i]), 0);
	}

	/* fi_cancel on the context: FI_ECANCELED on its first endpoint's CQ. */
	EXPECT(fi_recv(srx, bufs[0], sizeof bufs[0], NULL, FI_ADDR_UNSPEC, (void *)0x501), 0);
	EXPECT(fi_cancel(&srx->fid, (void *)0x501), 0);
	EXPECT(read_one(rxcq[0], &e, &err), 1);
	EXPECT(err.err, FI_ECANCELED);
	EXPECT((long)err.op_context, 0x501);
	/* A send through a shared context is the endpoint's, not the context's. */
	EXPECT(fi_send(srx, "x", 2, NULL, to_b, NULL), -FI_EINVAL);

	/* FI_MULTI_RECV on the context: one buffer with room for 2N 16-byte messages
	 * and 16 bytes more takes two sent to each endpoint, packed back to back in it,
	 * each on the CQ of the endpoint it reached, in order per endpoint. The
	 * context's own FI_OPT_MIN_MULTI_RECV (32, the endpoints' is 16) releases it:
	 * the last piece, which leaves 16 bytes, carries FI_MULTI_RECV. */
	optlen = sizeof opt;
	EXPECT(fi_getopt(&srx->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &opt, &optlen), 0);
	EXPECT(opt, 64);
	opt = 32;
	EXPECT(fi_setopt(&srx->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &opt, sizeof opt), 0);
	opt = 0;
	EXPECT(fi_getopt(&srx->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &opt, &optlen), 0);
	EXPECT(opt, 32);
	EXPECT(fi_setopt(&srx->fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &opt, sizeof opt),
	       -FI_ENOPROTOOPT);
	memset(big, 0, sizeof big);
	iov.iov_base = big;
	iov.iov_len = sizeof big;
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = &iov;
	msg.iov_count = 1;
	msg.addr = FI_ADDR_UNSPEC;
	msg.context = (void *)0x700;
	EXPECT(fi_recvmsg(srx, &msg, FI_MULTI_RECV), 0);
	for (k = 0; k < 2 * N; k++) {
		memset(multi[k], 0, sizeof multi[k]);
		snprintf(multi[k], sizeof multi[k], "multi %d to %d", k, k % N);
		EXPECT(fi_send(b, multi[k], sizeof multi[k], NULL, to_a[k % N],
			       (void *)(long)(0x710 + k)), 0);
		EXPECT(read_one(cqb, &e, NULL), 1);
	}
	seen = 0;
	releases = 0;
	for (k = 0; k < 2 * N; k++) {
		long at;

		EXPECT(read_one(rxcq[k % N], &e, NULL), 1);
		EXPECT((long)e.op_context, 0x700);
		EXPECT(e.len, 16);
		at = (char *)e.buf - big;
		EXPECT_TRUE(at >= 0 && at + 16 <= (long)sizeof big && at % 16 == 0);
		if (at >= 0 && at + 16 <= (long)sizeof big && at % 16 == 0) {
			EXPECT(memcmp(big + at, multi[k], 16), 0);
			seen |= 1 << (at / 16);
		}
		releases += !!(e.flags & FI_MULTI_RECV);
	}
	EXPECT(seen, (1 << (2 * N)) - 1);
	EXPECT(releases, 1);

	/* Close: a receive still waits in the context; endpoints, then contexts. */
	EXPECT(fi_recv(srx, bufs[0], sizeof bufs[0], NULL, FI_ADDR_UNSPEC, (void *)0x601), 0);
	for (i = 0; i < N; i++) {
		EXPECT(fi_close(&ep[i]->fid), 0);
		EXPECT(fi_close(&txcq[i]->fid), 0);
		EXPECT(fi_close(&rxcq[i]->fid), 0);
	}
	EXPECT(fi_close(&srx->fid), 0);
	EXPECT(fi_close(&stx->fid), 0);
	EXPECT(fi_close(&ava->fid), 0);
	EXPECT(fi_close(&b->fid), 0);
	EXPECT(fi_close(&avb->fid), 0);
	EXPECT(fi_close(&cqb->fid), 0);
	EXPECT(fi_close(&da->fid), 0);
	EXPECT(fi_close(&db->fid), 0);
	EXPECT(fi_close(&fabric->fid), 0);
	fi_freeinfo(plain);
	fi_freeinfo(info);
	fi_freeinfo(hints);

	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
