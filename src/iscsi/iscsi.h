/*
 * The iSCSI transport (RFC 7143) as the rest of the daemon sees it:
 * target nodes with LUN maps, portals (listening sockets), and the list of
 * sessions.  All functions here are control path (main thread or RPC
 * thread); they return 0 or a negative errno and fill err for the RPC
 * caller.  Connections and the data path live on reactors.
 */
#ifndef ISCSI_ISCSI_H
#define ISCSI_ISCSI_H

#include <stddef.h>
#include <stdint.h>

#include "scsi/scsi.h"

struct json_t;

int iscsi_init(void);
void iscsi_fini(void); /* closes portals and every connection */

int iscsi_portal_add(const char *addr, uint16_t port, char *err, size_t errlen);
int iscsi_portal_del(const char *addr, uint16_t port, char *err, size_t errlen);

int iscsi_target_add(const char *iqn, char *err, size_t errlen);
int iscsi_target_del(const char *iqn, char *err, size_t errlen);
int iscsi_lun_map(const char *iqn, uint32_t lun, const char *ns_name, char *err, size_t errlen);
int iscsi_lun_unmap(const char *iqn, uint32_t lun, char *err, size_t errlen);
/* Is ns exported anywhere? (namespace_delete refuses while it is) */
int iscsi_ns_in_use(const struct core_ns *ns);

/* Describe state as JSON for the RPCs (new references). */
struct json_t *iscsi_portals_json(void);
struct json_t *iscsi_targets_json(void);
struct json_t *iscsi_sessions_json(void);

#endif
