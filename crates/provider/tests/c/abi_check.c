/*
 * The provider seen through any libfabric.so.1, loaded at run time (argv[1]): the
 * check of crates/provider/tests/abi.rs for libfabric 2.x, whose headers are not
 * installed. Only the entry points are taken from the library (dlsym, so the symbol
 * versions are the library's current ones); the structures used are those 1.17 and
 * 2.x share (fi_info; fi_domain_attr up to tclass), and the 2.x fields of
 * fi_domain_attr are reached by the offsets fi_domain(3) of 2.5 gives them.
 *
 * Prints "core MAJOR.MINOR", then for every entry of fi_getinfo(min(core, 2.5)) the
 * library's own fi_tostr(FI_TYPE_INFO) of it and of its fi_dupinfo copy (each after a
 * "--- info" / "--- dup" line), then one "hints NAME rc" line per hints probe (and
 * for the 2.0 semantics probes that matched, a "grant NAME ..." line with what the
 * first entry granted; caps in hex, as 2.5.1's fi_tostr names none of 2.0's new
 * capability bits), and a
 * "cntr NAME rc" line per counter probe.
 * FI_PROVIDER=nostd selects the provider.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

typedef uint32_t (*version_fn)(void);
typedef int (*getinfo_fn)(uint32_t, const char *, const char *, uint64_t,
			  const struct fi_info *, struct fi_info **);
typedef void (*freeinfo_fn)(struct fi_info *);
typedef struct fi_info *(*dupinfo_fn)(const struct fi_info *);
typedef char *(*tostr_fn)(const void *, int);

static getinfo_fn getinfo;
static freeinfo_fn freeinfo;
static dupinfo_fn dupinfo;
static tostr_fn tostr;

/* fi_domain_attr offsets of the fields libfabric 1.20, 2.0 and 2.5 appended. */
#define OFF_MAX_EP_AUTH_KEY 192
#define OFF_MAX_GROUP_ID 200

/* fi_getinfo with hints from the library's own allocator (so of its own sizes), one
 * 2.x field set; prints the result code. */
static void probe(uint32_t version, const char *name, size_t off, uint64_t value,
		  size_t width)
{
	struct fi_info *hints = dupinfo(NULL), *info = NULL;
	if (!hints) {
		printf("hints %s nomem\n", name);
		return;
	}
	hints->ep_attr->type = FI_EP_RDM;
	if (width == 8)
		memcpy((char *) hints->domain_attr + off, &value, 8);
	else if (width == 4) {
		uint32_t v = (uint32_t) value;
		memcpy((char *) hints->domain_attr + off, &v, 4);
	}
	int rc = getinfo(version, NULL, NULL, 0, hints, &info);
	printf("hints %s %d\n", name, rc);
	freeinfo(info);
	freeinfo(hints);
}

/* Values of libfabric 2.0 (absent from the 1.17 headers this is built with). */
#define V2_PROGRESS_CONTROL_UNIFIED 3
#define V2_TAGGED_DIRECTED_RECV (1ULL << 45)
#define V2_TAGGED_MULTI_RECV (1ULL << 46)
#define V2_EXACT_DIRECTED_RECV (1ULL << 48)
#define V2_CNTR_EVENTS_BYTES 1

/* fi_getinfo at `version` with RDM hints asking `caps` and `progress` (the 1.x
 * data_progress slot, 2.x's `progress`); prints the result code and what was
 * granted. */
static void probe_semantics(uint32_t version, const char *name, uint64_t caps, int progress)
{
	struct fi_info *hints = dupinfo(NULL), *info = NULL;
	if (!hints) {
		printf("hints %s nomem\n", name);
		return;
	}
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = caps;
	hints->domain_attr->data_progress = (enum fi_progress) progress;
	int rc = getinfo(version, NULL, NULL, 0, hints, &info);
	printf("hints %s %d\n", name, rc);
	if (rc == 0)
		printf("grant %s progress=%d control=%d caps=0x%llx\n", name,
		       (int) info->domain_attr->data_progress,
		       (int) info->domain_attr->control_progress,
		       (unsigned long long) info->caps);
	freeinfo(info);
	freeinfo(hints);
}

/* fi_cntr_open on a domain of the first RDM entry at `version`, `events` as given. */
static void probe_cntr(void *lib, uint32_t version, const char *name, int events)
{
	typedef int (*fabric_fn)(struct fi_fabric_attr *, struct fid_fabric **, void *);
	fabric_fn fabric_open = (fabric_fn) dlsym(lib, "fi_fabric");
	struct fi_info *hints = dupinfo(NULL), *info = NULL;
	struct fid_fabric *fabric = NULL;
	struct fid_domain *domain = NULL;
	struct fid_cntr *cntr = NULL;
	struct fi_cntr_attr attr = { .events = (enum fi_cntr_events) events };
	int rc;

	if (!hints || !fabric_open) {
		printf("cntr %s setup\n", name);
		return;
	}
	hints->ep_attr->type = FI_EP_RDM;
	rc = getinfo(version, NULL, NULL, 0, hints, &info);
	if (!rc)
		rc = fabric_open(info->fabric_attr, &fabric, NULL);
	if (!rc)
		rc = fi_domain(fabric, info, &domain, NULL);
	if (!rc) {
		rc = fi_cntr_open(domain, &attr, &cntr, NULL);
		printf("cntr %s %d\n", name, rc);
	} else {
		printf("cntr %s setup %d\n", name, rc);
	}
	if (cntr)
		fi_close(&cntr->fid);
	if (domain)
		fi_close(&domain->fid);
	if (fabric)
		fi_close(&fabric->fid);
	freeinfo(info);
	freeinfo(hints);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s LIBFABRIC.so\n", argv[0]);
		return 2;
	}
	void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
	if (!lib) {
		fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
		return 2;
	}
	version_fn version = (version_fn) dlsym(lib, "fi_version");
	getinfo = (getinfo_fn) dlsym(lib, "fi_getinfo");
	freeinfo = (freeinfo_fn) dlsym(lib, "fi_freeinfo");
	dupinfo = (dupinfo_fn) dlsym(lib, "fi_dupinfo");
	tostr = (tostr_fn) dlsym(lib, "fi_tostr");
	if (!version || !getinfo || !freeinfo || !dupinfo || !tostr) {
		fprintf(stderr, "%s lacks an fi_* entry point\n", argv[1]);
		return 2;
	}
	uint32_t core = version();
	uint32_t want = core < FI_VERSION(2, 5) ? core : FI_VERSION(2, 5);
	printf("core %u.%u\n", FI_MAJOR(core), FI_MINOR(core));

	struct fi_info *info = NULL;
	int rc = getinfo(want, NULL, NULL, 0, NULL, &info);
	if (rc) {
		fprintf(stderr, "fi_getinfo(%u.%u): %d\n", FI_MAJOR(want), FI_MINOR(want),
			rc);
		return 1;
	}
	for (struct fi_info *cur = info; cur; cur = cur->next) {
		printf("--- info\n%s", tostr(cur, FI_TYPE_INFO));
		struct fi_info *dup = dupinfo(cur);
		if (!dup) {
			fprintf(stderr, "fi_dupinfo failed\n");
			return 1;
		}
		printf("--- dup\n%s", tostr(dup, FI_TYPE_INFO));
		freeinfo(dup);
	}
	freeinfo(info);

	if (core >= FI_VERSION(2, 0)) {
		probe(want, "none", 0, 0, 0);
		probe(want, "max_ep_auth_key=1", OFF_MAX_EP_AUTH_KEY, 1, 8);
		probe(want, "max_ep_auth_key=2", OFF_MAX_EP_AUTH_KEY, 2, 8);
		probe(want, "max_group_id=1", OFF_MAX_GROUP_ID, 1, 4);
		/* 2.0's semantics, and the same values asked at API 1.17 (where bit 48
		 * is FI_VARIABLE_MSG and progress 3 names nothing). */
		probe_semantics(want, "control_unified", FI_MSG | FI_TAGGED,
				V2_PROGRESS_CONTROL_UNIFIED);
		probe_semantics(FI_VERSION(1, 17), "control_unified@1.17", FI_MSG | FI_TAGGED,
				V2_PROGRESS_CONTROL_UNIFIED);
		probe_semantics(want, "auto", FI_MSG | FI_TAGGED, FI_PROGRESS_AUTO);
		probe_semantics(want, "tagged_directed_recv", FI_TAGGED | V2_TAGGED_DIRECTED_RECV,
				0);
		probe_semantics(want, "exact_directed_recv", FI_TAGGED | V2_EXACT_DIRECTED_RECV,
				0);
		probe_semantics(FI_VERSION(1, 17), "exact_directed_recv@1.17",
				FI_TAGGED | V2_EXACT_DIRECTED_RECV, 0);
		probe_semantics(want, "tagged_multi_recv", FI_TAGGED | V2_TAGGED_MULTI_RECV, 0);
		probe_cntr(lib, want, "events_comp", FI_CNTR_EVENTS_COMP);
		probe_cntr(lib, want, "events_bytes", V2_CNTR_EVENTS_BYTES);
		probe_cntr(lib, FI_VERSION(1, 17), "events_bytes@1.17", V2_CNTR_EVENTS_BYTES);
	}
	return 0;
}
