/*
 * The DPDK API dp-dpdk uses: the exported functions bindgen binds directly, and the
 * shim_* wrappers of csrc/shim.c around DPDK's static inline functions and macros
 * (bindgen cannot bind those: they have no symbol in the shared libraries).
 *
 * Compiled with the flags of `pkg-config --cflags libdpdk` (which include
 * `-include rte_config.h`).
 */
#ifndef DP_DPDK_SHIM_H
#define DP_DPDK_SHIM_H

#include <stdint.h>

#include <rte_common.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>

/* rte_eth_rx_burst: up to n received mbufs of queue (port, queue) into pkts. */
uint16_t shim_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);
/* rte_eth_tx_burst: hands up to n mbufs to the queue; the driver owns those it took. */
uint16_t shim_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n);

/* rte_pktmbuf_alloc: a reset mbuf, or NULL when the pool is empty. */
struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *mp);
/* rte_pktmbuf_alloc_bulk: n reset mbufs, or none (returns non-zero). */
int shim_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned n);
/* rte_pktmbuf_free: frees every segment of the chain. */
void shim_pktmbuf_free(struct rte_mbuf *m);
/* rte_pktmbuf_append: the first byte of len new bytes at the tail, or NULL. */
char *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len);
/* rte_pktmbuf_trim: removes len bytes at the tail; non-zero if there are fewer. */
int shim_pktmbuf_trim(struct rte_mbuf *m, uint16_t len);
/* rte_pktmbuf_mtod: the first data byte of the first segment. */
void *shim_pktmbuf_mtod(struct rte_mbuf *m);
/* The first segment's data: its address and, in *len, rte_pktmbuf_data_len. */
void *shim_pktmbuf_data(struct rte_mbuf *m, uint16_t *len);
/* rte_pktmbuf_data_len / rte_pktmbuf_pkt_len / m->nb_segs. */
uint16_t shim_pktmbuf_data_len(const struct rte_mbuf *m);
uint32_t shim_pktmbuf_pkt_len(const struct rte_mbuf *m);
uint16_t shim_pktmbuf_nb_segs(const struct rte_mbuf *m);
/* rte_pktmbuf_headroom / rte_pktmbuf_tailroom. */
uint16_t shim_pktmbuf_headroom(const struct rte_mbuf *m);
uint16_t shim_pktmbuf_tailroom(const struct rte_mbuf *m);
/* rte_pktmbuf_data_room_size of a pktmbuf pool. */
uint16_t shim_pktmbuf_data_room_size(struct rte_mempool *mp);

/* rte_errno (a per-thread variable behind a macro). */
int shim_errno(void);
/* rte_lcore_id (RTE_MAX_LCORE-free: LCORE_ID_ANY on threads EAL does not know). */
unsigned shim_lcore_id(void);
/* LCORE_ID_ANY. */
unsigned shim_lcore_id_any(void);

/* rte_eth_link_get_nowait, unpacked: 1 up, 0 down, negative errno on error;
 * *speed gets the speed in Mbit/s. */
int shim_link_status(uint16_t port, uint32_t *speed);

/* Whether the port's link is up (rte_eth_link_get_nowait): 1 up, else 0. */
int shim_link_up(uint16_t port);

/* The rte_device of a port (for rte_dev_remove), or NULL. */
struct rte_device *shim_port_device(uint16_t port);

#endif

/* A pktmbuf pool like rte_pktmbuf_pool_create's, but created with
 * RTE_MEMPOOL_F_NO_IOVA_CONTIG so that its objects are packed back to back in one
 * memory chunk, page boundaries or not (see Mempool::new_packed); NULL and rte_errno
 * on failure. */
struct rte_mempool *shim_pktmbuf_pool_create_packed(const char *name, unsigned n,
						     unsigned cache, uint16_t data_room,
						     int socket);
/* Where the objects of `mp` lie relative to the start of its first memory chunk:
 * *span gets the end of the last object (headers included), *packed the bytes
 * populated_size objects take back to back (what net_af_xdp registers as its UMEM),
 * *chunks the number of memory chunks. */
void shim_mempool_layout(struct rte_mempool *mp, uint64_t *span, uint64_t *packed,
			 uint32_t *chunks);
