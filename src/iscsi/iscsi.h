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

/*
 * CHAP credentials a login must present (README "Security"): of target, or
 * of discovery sessions when target is NULL.  user "" or NULL switches CHAP
 * off; a user needs a secret of 12 to 255 bytes (RFC 7143 9.2.1: at least
 * 96 bits); mutual_user/mutual_secret (optional) are what the target
 * answers a mutual challenge with, and must differ from the initiator's.
 * Takes effect for logins that start afterwards.  0 or -errno with err.
 */
int iscsi_auth_set(const char *target, const char *user, const char *secret,
                   const char *mutual_user, const char *mutual_secret, char *err, size_t errlen);
/*
 * Every CHAP setting as a list of iscsi_target_auth params (discovery's
 * without "target"); the secrets only when with_secrets (new reference).
 */
struct json_t *iscsi_auth_json(bool with_secrets);

/*
 * Initiator ACLs (README "Security"): a target with entries admits only the
 * initiators they name (others: Login Status 0202h, and SendTargets hides
 * the target from them); without entries it is open.  iscsi_acl_add adds
 * or replaces initiator's entry: luns (NULL: every LUN) is a list such as
 * "0,2,4-7" of the LUNs it sees; chap_user.. (optional) are its own CHAP
 * credentials, overriding the target's, checked as iscsi_auth_set checks
 * them.  A change applies at once to the initiator's sessions: a changed
 * LUN set raises REPORTED LUNS DATA HAS CHANGED, a removed admission
 * closes them.  0 or -errno with err.
 */
int iscsi_acl_add(const char *target, const char *initiator, const char *luns,
                  const char *chap_user, const char *chap_secret, const char *mutual_user,
                  const char *mutual_secret, char *err, size_t errlen);
int iscsi_acl_remove(const char *target, const char *initiator, char *err, size_t errlen);
/*
 * The ACL entries as iscsi_acl_add params (of target, or of all when NULL);
 * the secrets only when with_secrets (new reference).
 */
struct json_t *iscsi_acl_json(const char *target, bool with_secrets);

/* Describe state as JSON for the RPCs (new references). */
struct json_t *iscsi_portals_json(void);
struct json_t *iscsi_targets_json(void);
struct json_t *iscsi_sessions_json(void);
/* NOP-In pings sent, answered, and connections closed for want of an answer (since start). */
void iscsi_nop_stats(uint64_t *sent, uint64_t *answered, uint64_t *timeouts);
/* Connections open now (daemon_status). */
unsigned iscsi_connections(void);

#endif
