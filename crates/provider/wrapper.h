/* Everything the provider needs from the installed libfabric 1.17 headers. */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_ext.h>
/* struct fi_provider, FI_EXT_INI, fi_param_define / fi_param_get (external providers). */
#include <rdma/providers/fi_prov.h>
