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
