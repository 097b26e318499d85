/*
 * Asymmetric access (issue 14): several gateways, one namespace.  Two or
 * more slated processes export the same namespace (an rbd image); each is
 * one gateway, named by its gateway id, and each reports, per access
 * group, how well it reaches the namespaces in that group.  NVMe speaks
 * this as Asymmetric Namespace Access (Base 2.0 8.1: ANA groups and
 * states, log 0Ch, the ANA change notice), SCSI as implicit ALUA (SPC-5
 * 5.16: target port groups and asymmetric access states, REPORT TARGET
 * PORT GROUPS, VPD 83h designators).  The model is one, here:
 *
 * - a gateway has CORE_ANA_GROUPS access groups (ids 1..CORE_ANA_GROUPS),
 *   each in one state (enum core_ana_state; every group starts optimized);
 * - a namespace belongs to one group (core_ns.ana_group, default 1);
 * - the gateway id (0 = a lone gateway, else 1..CORE_GATEWAY_ID_MAX)
 *   offsets what must differ between gateways exporting one namespace:
 *   NVMe controller IDs (a host refuses two controllers of one subsystem
 *   with one CNTLID) and SCSI relative target port identifiers and target
 *   port group numbers (one group per gateway and access group: the state
 *   is the gateway's).  The NVMe ANA group ID is the group itself, the
 *   same on every gateway (a namespace's ANAGRPID must not depend on the
 *   path).
 *
 * A group's configured state changes only through core_ana_set_state (its
 * effective state also by the takeover rule below), a namespace's
 * group only through core_ns_set_ana_group; each change is published as
 * CORE_NS_EV_ANA for every namespace it concerns (old/new: the states), so
 * the NVMe personality raises the ANA change notice and the SCSI one the
 * unit attention ASYMMETRIC ACCESS STATE CHANGED.  core_ns_check
 * (CORE_CHK_ACCESS) refuses medium access in a group that cannot be
 * accessed, for both personalities.
 */
#ifndef CORE_ANA_H
#define CORE_ANA_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

struct core_ns;

#define CORE_ANA_GROUPS     16u /* group ids 1..16: NVMe NANAGRPID and ANAGRPMAX */
#define CORE_GATEWAY_ID_MAX 15u

enum core_ana_state {
        CORE_ANA_OPTIMIZED = 0,   /* NVMe 01h, SCSI active/optimized (0h) */
        CORE_ANA_NON_OPTIMIZED,   /* NVMe 02h, SCSI active/non-optimized (1h) */
        CORE_ANA_STANDBY,         /* SCSI standby (2h); NVMe has none: inaccessible (03h) */
        CORE_ANA_INACCESSIBLE,    /* NVMe 03h, SCSI unavailable (3h) */
        CORE_ANA_PERSISTENT_LOSS, /* NVMe 04h, SCSI offline (Eh) */
        CORE_ANA_TRANSITIONING,   /* NVMe change (0Fh), SCSI transitioning (Fh) */
        CORE_ANA_STATE_MAX
};

/* "optimized", "non-optimized", "standby", "inaccessible", "persistent-loss", "transitioning". */
const char *core_ana_state_name(enum core_ana_state s);
/* The state named s (the names above); 0 or -EINVAL. */
int core_ana_state_parse(const char *s, enum core_ana_state *out);

/* A group's state now (any thread); group 0 or beyond CORE_ANA_GROUPS reads optimized. */
enum core_ana_state core_ana_state(uint32_t group);
/*
 * Set a group's state (control path): publishes CORE_NS_EV_ANA for every
 * namespace of the group and counts one change (core_ana_change_count).
 * 0, or -EINVAL for a group outside 1..CORE_ANA_GROUPS or a bad state.
 */
int core_ana_set_state(uint32_t group, enum core_ana_state st, const void *origin);
/* Changes of any group's state or any namespace's group since start (NVMe CHGCNT). */
uint64_t core_ana_change_count(void);
/* The change count when group last changed (its state, or a namespace joined or left); 0: never. */
uint64_t core_ana_group_change_count(uint32_t group);
/* Whether a namespace of a group in state st may be accessed: CORE_OK or the status. */
enum core_status core_ana_access(enum core_ana_state st);

/* The namespace's group (any thread). */
uint32_t core_ns_ana_group(const struct core_ns *ns);
/* Move a namespace to group (1..CORE_ANA_GROUPS): CORE_NS_EV_ANA when it changed; 0 or -EINVAL. */
int core_ns_set_ana_group(struct core_ns *ns, uint32_t group, const void *origin);

/*
 * The gateway id: set once at start-up, before any host connects
 * (options.gateway_id); 0 or -EINVAL when above CORE_GATEWAY_ID_MAX.
 */
int core_gateway_set_id(unsigned id);
unsigned core_gateway_id(void);
/*
 * The NVMe controller IDs this gateway hands out: 1..FFEFh alone, else
 * id * 1000h .. id * 1000h + FFFh (FFEFh at most: FFF0h and up are
 * reserved), so two gateways of one subsystem never give a host one CNTLID
 * twice.
 */
void core_gateway_cntlid_range(uint16_t *lo, uint16_t *hi);
/* SCSI relative target port identifier of the gateway's local port n (1..255). */
uint16_t core_gateway_rel_port(uint16_t n);
/* SCSI target port group number of access group g on this gateway. */
uint16_t core_gateway_tpg(uint32_t group);
/* The access group of a target port group number of this gateway; 0 when it is not ours. */
uint32_t core_gateway_tpg_group(uint16_t tpg);

/*
 * Automatic takeover (issue 14: "a gateway that dies makes its paths
 * inaccessible; the others take over").  Each group has a configured
 * state (what ana_group_set and the config say, what config_save writes)
 * and an effective state (what hosts see: core_ana_state).  A gateway may
 * list its peers (ana_peers_set: the other gateways, each named by one TCP
 * port it listens on, and the groups that peer is optimized for; default
 * every group).  Reactor 0 probes each peer with a non-blocking TCP
 * connect every interval; CORE_ANA_PEER_PROBES failed probes in a row make
 * a peer down, as many good ones make it up again.  The rule, one place:
 *
 *   a group configured non-optimized or standby is optimized while every
 *   peer listed for it is down (and at least one is listed); otherwise it
 *   is what is configured.
 *
 * So a standby gateway promotes its paths when the optimized one dies and
 * gives them back (fails back) when that one answers again, as the Ceph
 * NVMe-oF gateway returns a load-balancing group to its gateway when it
 * comes back.  The dead gateway's own paths simply vanish (its connections
 * drop; a host sees the path gone).  Each change of an effective state is
 * published as CORE_NS_EV_ANA like a configured one.
 */
#define CORE_ANA_PEERS_MAX     8u
#define CORE_ANA_PEER_PROBES   2u    /* probes in a row that change a peer's verdict */
#define CORE_ANA_PEER_INTERVAL 1000u /* default probe interval, ms */
#define CORE_ANA_PEER_ADDR_MAX 64u

struct core_ana_peer {
        char host[CORE_ANA_PEER_ADDR_MAX]; /* numeric IPv4 or IPv6 address */
        uint16_t port;
        uint32_t groups; /* bit g: the peer is optimized for group g */
};

/* The configured state of a group (what ana_group_set said); optimized outside 1..16. */
enum core_ana_state core_ana_configured_state(uint32_t group);
/*
 * Parse a peer list: "HOST:PORT[/G[+G..]]" items separated by commas
 * ("[v6]:PORT" for IPv6; no groups = every group); "" is no peer.  The
 * count, or -EINVAL with err set.
 */
int core_ana_peers_parse(const char *s, struct core_ana_peer *out, unsigned max, char *err,
                         size_t errlen);
/* The peer list back in that form (config_save, ana_group_list). */
void core_ana_peers_format(const struct core_ana_peer *p, unsigned n, char *out, size_t len);
/*
 * Replace the peer list (control path); every peer starts up.  Probing
 * runs on reactor 0 while the list is not empty (not at all without
 * reactors: unit tests drive core_ana_peer_report).  0 or -EINVAL.
 */
int core_ana_peers_set(const struct core_ana_peer *p, unsigned n, unsigned interval_ms);
/* The peer list, each peer's verdict (up) and the interval; the count. */
unsigned core_ana_peers_get(struct core_ana_peer *p, bool *up, unsigned max, unsigned *interval_ms);
/* One probe's result for peer i (the prober; tests): may change effective states. */
void core_ana_peer_report(unsigned i, bool ok);

#endif
