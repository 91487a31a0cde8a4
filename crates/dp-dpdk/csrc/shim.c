/*
 * Wrappers around DPDK's static inline functions and macros, so Rust can call them
 * through an ordinary symbol. Each one is a single call or field access; see shim.h.
 */
#include <string.h>

#include "shim.h"

uint16_t shim_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t shim_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
	return rte_eth_tx_burst(port, queue, pkts, n);
}

struct rte_mbuf *shim_pktmbuf_alloc(struct rte_mempool *mp)
{
	return rte_pktmbuf_alloc(mp);
}

int shim_pktmbuf_alloc_bulk(struct rte_mempool *mp, struct rte_mbuf **mbufs, unsigned n)
{
	return rte_pktmbuf_alloc_bulk(mp, mbufs, n);
}

void shim_pktmbuf_free(struct rte_mbuf *m)
{
	rte_pktmbuf_free(m);
}

char *shim_pktmbuf_append(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_append(m, len);
}

int shim_pktmbuf_trim(struct rte_mbuf *m, uint16_t len)
{
	return rte_pktmbuf_trim(m, len);
}

void *shim_pktmbuf_mtod(struct rte_mbuf *m)
{
	return rte_pktmbuf_mtod(m, void *);
}

void *shim_pktmbuf_data(struct rte_mbuf *m, uint16_t *len)
{
	*len = rte_pktmbuf_data_len(m);
	return rte_pktmbuf_mtod(m, void *);
}

uint16_t shim_pktmbuf_data_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_data_len(m);
}

uint32_t shim_pktmbuf_pkt_len(const struct rte_mbuf *m)
{
	return rte_pktmbuf_pkt_len(m);
}

uint16_t shim_pktmbuf_nb_segs(const struct rte_mbuf *m)
{
	return m->nb_segs;
}

uint16_t shim_pktmbuf_headroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_headroom(m);
}

uint16_t shim_pktmbuf_tailroom(const struct rte_mbuf *m)
{
	return rte_pktmbuf_tailroom(m);
}

uint16_t shim_pktmbuf_data_room_size(struct rte_mempool *mp)
{
	return rte_pktmbuf_data_room_size(mp);
}

int shim_errno(void)
{
	return rte_errno;
}

unsigned shim_lcore_id(void)
{
	return rte_lcore_id();
}

unsigned shim_lcore_id_any(void)
{
	return LCORE_ID_ANY;
}

int shim_link_up(uint16_t port)
{
	struct rte_eth_link link;

	link.link_status = RTE_ETH_LINK_DOWN;
	if (rte_eth_link_get_nowait(port, &link) < 0)
		return 0;
	return link.link_status == RTE_ETH_LINK_UP;
}

int shim_link_status(uint16_t port, uint32_t *speed)
{
	struct rte_eth_link link;
	int ret;

	memset(&link, 0, sizeof(link));
	ret = rte_eth_link_get_nowait(port, &link);
	if (ret < 0)
		return ret;
	*speed = link.link_speed;
	return link.link_status == RTE_ETH_LINK_UP ? 1 : 0;
}

struct rte_device *shim_port_device(uint16_t port)
{
	struct rte_eth_dev_info info;

	if (rte_eth_dev_info_get(port, &info) != 0)
		return NULL;
	return info.device;
}

struct rte_mempool *shim_pktmbuf_pool_create_packed(const char *name, unsigned n,
						     unsigned cache, uint16_t data_room,
						     int socket)
{
	/* rte_pktmbuf_pool_create_by_ops with one flag more. */
	struct rte_pktmbuf_pool_private priv = {
		.mbuf_data_room_size = data_room,
		.mbuf_priv_size = 0,
	};
	unsigned elt_size = sizeof(struct rte_mbuf) + (unsigned)data_room;
	struct rte_mempool *mp;
	int ret;

	mp = rte_mempool_create_empty(name, n, elt_size, cache,
				      sizeof(struct rte_pktmbuf_pool_private), socket,
				      RTE_MEMPOOL_F_NO_IOVA_CONTIG);
	if (mp == NULL)
		return NULL;
	ret = rte_mempool_set_ops_byname(mp, rte_mbuf_best_mempool_ops(), NULL);
	if (ret != 0) {
		rte_mempool_free(mp);
		rte_errno = -ret;
		return NULL;
	}
	rte_pktmbuf_pool_init(mp, &priv);
	ret = rte_mempool_populate_default(mp);
	if (ret < 0) {
		rte_mempool_free(mp);
		rte_errno = -ret;
		return NULL;
	}
	rte_mempool_obj_iter(mp, rte_pktmbuf_init, NULL);
	return mp;
}

struct layout {
	uintptr_t base;
	size_t header;
	size_t total;
	uint64_t span;
};

static void layout_obj(struct rte_mempool *mp, void *arg, void *obj, unsigned idx)
{
	struct layout *l = arg;
	uint64_t end = (uintptr_t)obj - l->header + l->total - l->base;

	(void)mp;
	(void)idx;
	if (end > l->span)
		l->span = end;
}

void shim_mempool_layout(struct rte_mempool *mp, uint64_t *span, uint64_t *packed,
			 uint32_t *chunks)
{
	struct rte_mempool_memhdr *first = STAILQ_FIRST(&mp->mem_list);
	struct layout l = {
		.base = first != NULL ? (uintptr_t)first->addr : 0,
		.header = mp->header_size,
		.total = mp->header_size + mp->elt_size + mp->trailer_size,
		.span = 0,
	};

	rte_mempool_obj_iter(mp, layout_obj, &l);
	*span = l.span;
	*packed = (uint64_t)mp->populated_size * l.total;
	*chunks = mp->nb_mem_chunks;
}
