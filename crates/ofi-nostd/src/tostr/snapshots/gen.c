/* Regenerates the fi_tostr snapshots from the system libfabric 1.17:
 *   cc gen.c -o /tmp/gen -lfabric && /tmp/gen .
 * and `fi_info -p udp | head -6 > fi_info_udp_short.txt`,
 * `fi_info -p udp -v | head -86 > fi_info_udp_verbose.txt` (first entry only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

static const char *dir;

static void put(const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

static void line(FILE *f, const char *label, unsigned v, const void *d, enum fi_type t)
{
	fprintf(f, "%s %u: %s\n", label, v, fi_tostr(d, t));
}

int main(int argc, char **argv)
{
	dir = argc > 1 ? argv[1] : ".";
	struct fi_info *info = fi_allocinfo();
	info->caps = FI_MSG | FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV |
		     FI_MULTI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
	info->mode = FI_CONTEXT;
	info->addr_format = FI_SOCKADDR_IN;
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons(4791);
	inet_pton(AF_INET, "10.1.2.3", &sin.sin_addr);
	sin.sin_zero[1] = 7;
	info->src_addr = &sin;
	info->src_addrlen = 16;
	info->tx_attr->caps = FI_MSG | FI_TAGGED | FI_SEND;
	info->tx_attr->op_flags = FI_TRANSMIT_COMPLETE | FI_INJECT;
	info->tx_attr->msg_order = FI_ORDER_SAS;
	info->tx_attr->inject_size = 1024;
	info->tx_attr->size = 1024;
	info->tx_attr->iov_limit = 4;
	info->tx_attr->tclass = FI_TC_BULK_DATA;
	info->rx_attr->caps = FI_MSG | FI_TAGGED | FI_RECV | FI_MULTI_RECV | FI_SOURCE | FI_DIRECTED_RECV;
	info->rx_attr->msg_order = FI_ORDER_SAS;
	info->rx_attr->comp_order = FI_ORDER_STRICT;
	info->rx_attr->size = 512;
	info->rx_attr->iov_limit = 4;
	info->rx_attr->mode = FI_CONTEXT;
	info->ep_attr->type = FI_EP_RDM;
	info->ep_attr->protocol = FI_PROV_SPECIFIC | 0x006E7301;
	info->ep_attr->protocol_version = 1;
	info->ep_attr->max_msg_size = 4294967295UL;
	info->ep_attr->mem_tag_format = 0xaaaaaaaaaaaaaaaaULL;
	info->ep_attr->tx_ctx_cnt = 1;
	info->ep_attr->rx_ctx_cnt = 1;
	info->ep_attr->auth_key_size = 3;
	info->domain_attr->name = strdup("eth0");
	info->domain_attr->threading = FI_THREAD_SAFE;
	info->domain_attr->control_progress = FI_PROGRESS_MANUAL;
	info->domain_attr->data_progress = FI_PROGRESS_AUTO;
	info->domain_attr->resource_mgmt = FI_RM_ENABLED;
	info->domain_attr->av_type = FI_AV_TABLE;
	info->domain_attr->mr_mode = FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
	info->domain_attr->mr_key_size = 8;
	info->domain_attr->cq_data_size = 8;
	info->domain_attr->cq_cnt = 128;
	info->domain_attr->ep_cnt = 64;
	info->domain_attr->tx_ctx_cnt = 1;
	info->domain_attr->rx_ctx_cnt = 1;
	info->domain_attr->max_ep_tx_ctx = 1;
	info->domain_attr->max_ep_rx_ctx = 1;
	info->domain_attr->cntr_cnt = 32;
	info->domain_attr->mr_iov_limit = 1;
	info->domain_attr->caps = FI_LOCAL_COMM | FI_REMOTE_COMM;
	info->domain_attr->mode = FI_RESTRICTED_COMP;
	info->domain_attr->auth_key_size = 5;
	info->domain_attr->max_err_data = 16;
	info->domain_attr->mr_cnt = 1024;
	info->domain_attr->tclass = FI_TC_DSCP | 46;
	info->fabric_attr->name = strdup("nostd");
	info->fabric_attr->prov_name = strdup("nostd");
	info->fabric_attr->prov_version = FI_VERSION(1, 0);
	info->fabric_attr->api_version = FI_VERSION(1, 17);

	put("info_sockaddr_in.txt", fi_tostr(info, FI_TYPE_INFO));
	put("domain_attr.txt", fi_tostr(info->domain_attr, FI_TYPE_DOMAIN_ATTR));
	put("ep_attr.txt", fi_tostr(info->ep_attr, FI_TYPE_EP_ATTR));
	put("tx_attr.txt", fi_tostr(info->tx_attr, FI_TYPE_TX_ATTR));
	put("rx_attr.txt", fi_tostr(info->rx_attr, FI_TYPE_RX_ATTR));
	put("fabric_attr.txt", fi_tostr(info->fabric_attr, FI_TYPE_FABRIC_ATTR));

	struct sockaddr_in d;
	memset(&d, 0, sizeof d);
	d.sin_family = AF_INET;
	d.sin_port = htons(9228);
	inet_pton(AF_INET, "192.168.0.1", &d.sin_addr);
	info->dest_addr = &d;
	info->dest_addrlen = 16;
	info->addr_format = FI_SOCKADDR;
	put("info_sockaddr.txt", fi_tostr(info, FI_TYPE_INFO));

	char s1[] = "fi_addr_nostd://10.1.2.3:4791/7", s2[] = "fi_sockaddr_in://192.168.0.1:9228";
	info->addr_format = FI_ADDR_STR;
	info->src_addr = s1;
	info->src_addrlen = sizeof s1;
	info->dest_addr = s2;
	info->dest_addrlen = sizeof s2;
	put("info_str.txt", fi_tostr(info, FI_TYPE_INFO));

	info->addr_format = FI_FORMAT_UNSPEC;
	info->src_addr = &sin;
	info->src_addrlen = 16;
	info->dest_addr = NULL;
	info->dest_addrlen = 0;
	free(info->domain_attr->name);
	info->domain_attr->name = NULL;
	free(info->fabric_attr->name);
	info->fabric_attr->name = NULL;
	put("info_unspec_null_names.txt", fi_tostr(info, FI_TYPE_INFO));

	/* Flag words, enums and addresses, one per line. */
	char path[512];
	snprintf(path, sizeof path, "%s/values.txt", dir);
	FILE *f = fopen(path, "w");
	uint64_t all = ~0ULL, zero = 0;
	line(f, "caps", 0, &all, FI_TYPE_CAPS);
	line(f, "caps", 1, &zero, FI_TYPE_CAPS);
	line(f, "op_flags", 0, &all, FI_TYPE_OP_FLAGS);
	line(f, "mode", 0, &all, FI_TYPE_MODE);
	line(f, "msg_order", 0, &all, FI_TYPE_MSG_ORDER);
	line(f, "cq_event_flags", 0, &all, FI_TYPE_CQ_EVENT_FLAGS);
	int mr_all = -1;
	line(f, "mr_mode", 0, &mr_all, FI_TYPE_MR_MODE);
	for (unsigned i = 0; i < 18; i++)
		line(f, "addr_format", i, &i, FI_TYPE_ADDR_FORMAT);
	unsigned ps = FI_PROV_SPECIFIC | 5;
	line(f, "addr_format", ps, &ps, FI_TYPE_ADDR_FORMAT);
	for (unsigned i = 0; i < 28; i++)
		line(f, "protocol", i, &i, FI_TYPE_PROTOCOL);
	line(f, "protocol", ps, &ps, FI_TYPE_PROTOCOL);
	for (unsigned i = 0; i < 7; i++)
		line(f, "ep_type", i, &i, FI_TYPE_EP_TYPE);
	for (unsigned i = 0; i < 7; i++)
		line(f, "threading", i, &i, FI_TYPE_THREADING);
	for (unsigned i = 0; i < 4; i++)
		line(f, "progress", i, &i, FI_TYPE_PROGRESS);
	for (unsigned i = 0; i < 4; i++)
		line(f, "av_type", i, &i, FI_TYPE_AV_TYPE);
	for (unsigned i = 0; i < 8; i++)
		line(f, "eq_event", i, &i, FI_TYPE_EQ_EVENT);
	for (unsigned i = 0; i < 6; i++)
		line(f, "cq_format", i, &i, FI_TYPE_CQ_FORMAT);
	for (unsigned i = 0; i < 12; i++)
		line(f, "op_type", i, &i, FI_TYPE_OP_TYPE);
	for (unsigned i = 0; i < 17; i++)
		line(f, "atomic_type", i, &i, FI_TYPE_ATOMIC_TYPE);
	for (unsigned i = 0; i < 20; i++)
		line(f, "atomic_op", i, &i, FI_TYPE_ATOMIC_OP);
	for (unsigned i = 0; i < 10; i++)
		line(f, "collective_op", i, &i, FI_TYPE_COLLECTIVE_OP);
	for (unsigned i = 0; i < 7; i++)
		line(f, "hmem_iface", i, &i, FI_TYPE_HMEM_IFACE);
	for (unsigned i = 0; i < 5; i++)
		line(f, "log_level", i, &i, FI_TYPE_LOG_LEVEL);
	for (unsigned i = 0; i < 11; i++)
		line(f, "log_subsys", i, &i, FI_TYPE_LOG_SUBSYS);
	line(f, "version", 0, &zero, FI_TYPE_VERSION);
	uint64_t co[] = { 0, 0x1FF, 0x100, 0x1FF | (1 << 16), 1 << 16, 0x3 };
	for (unsigned i = 0; i < 6; i++) {
		struct fi_tx_attr tx;
		memset(&tx, 0, sizeof tx);
		tx.comp_order = co[i];
		char *s = fi_tostr(&tx, FI_TYPE_TX_ATTR);
		char *l = strstr(s, "comp_order: ");
		*strchr(l, '\n') = 0;
		fprintf(f, "comp_order %u: %s\n", i, l + strlen("comp_order: "));
	}
	fclose(f);
	return 0;
}
