/*
 * The provisioning-limit hooks for the rest of the core (req.c, ns.c):
 * reserving space for an allocating write, accounting its completion and
 * deallocations, and the namespace metadata part.  Personalities use
 * core/ns.h (core_ns_set_provision, core_ns_provision_info).
 */
#ifndef CORE_PROVISION_H
#define CORE_PROVISION_H

#ifndef SLATE_MODULE_CORE
#error "core/provision.h is private to src/core/; personalities use core/ns.h"
#endif

#include <jansson.h>

#include "core/ns.h"
#include "core/req.h"

/*
 * Before an allocating write runs: reserves the space it may need (a
 * running estimate; the backend is asked only when the estimate would
 * cross the hard limit).  CORE_OK, or CORE_E_SPACE_ALLOC_FAILED when the
 * write needs space beyond the limit.  Sets req->prov_bytes.
 */
enum core_status core_prov_reserve(struct core_req *req);
/* When a request that reserved space (req->prov_bytes) or freed space (req->prov_frees) ends. */
void core_prov_done(struct core_req *req, enum core_status st);
/* At create/reopen (ns unshared): the first estimate and the threshold's state. */
void core_prov_init(struct core_ns *ns);
/* The "provision" member of the metadata body; NULL when no limit or threshold is set. */
json_t *core_prov_to_json(struct core_ns *ns);
/* Restore it (at load, ns unshared): 0 or -EINVAL. */
int core_prov_from_json(struct core_ns *ns, json_t *j);

#endif
