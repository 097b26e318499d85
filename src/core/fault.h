/*
 * Fault injection for host testing: rules, set over RPC (fault_set /
 * fault_clear / fault_list), that make I/O fail with a chosen core status,
 * add latency, or drop a transport connection, so host error handling can
 * be exercised against a misbehaving device.  Off by default; not
 * persisted (a restart forgets every rule).
 *
 * Two hooks:
 *   - core_req_submit (core/req.c) asks core_fault_io() about every
 *     request a host issued, after the request's own checks: it may fail
 *     with a status and/or be held back on a reactor timer first.
 *   - the transports ask core_fault_conn_pdu() about every PDU a
 *     connected host sends: true means close the connection now.
 * With no rule set each hook costs one atomic load of a pointer
 * (core_fault_active).  With rules, a mutex guards the table (the rules'
 * counters and PRNG); nothing is allocated per I/O.
 */
#ifndef CORE_FAULT_H
#define CORE_FAULT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct core_req;
struct core_fault_table;

#define CORE_FAULT_MAX_RULES      32
#define CORE_FAULT_NAME_MAX       224 /* namespace, host (IQN / host NQN) */
#define CORE_FAULT_PEER_MAX       64
#define CORE_FAULT_MAX_LATENCY_US 60000000u /* 60 s */

/* Which requests a rule applies to (bits of enum core_op_class). */
#define CORE_FAULT_OPS_ALL 0xfu

struct core_fault_rule {
        /* Selection (empty string / full range: any). */
        char ns[CORE_FAULT_NAME_MAX];
        char host[CORE_FAULT_NAME_MAX]; /* iSCSI initiator name or NVMe host NQN */
        char transport[8];              /* "iscsi", "nvme" or "" */
        char peer[CORE_FAULT_PEER_MAX]; /* connection rules: peer address prefix */
        unsigned ops;                   /* bit (1 << core_op_class) */
        uint64_t lba_first, lba_last;   /* inclusive */
        /* When a selected request is hit: per_mille of them at random, or every Nth. */
        uint32_t per_mille; /* 0..1000 */
        uint32_t every;     /* 0: use per_mille; N: the Nth, 2Nth, ... */
        uint64_t seed;      /* PRNG seed (0: chosen at set time) */
        /* What a hit does. */
        enum core_status status; /* CORE_OK: no failure (latency only) */
        uint32_t latency_us;
        bool drop;      /* connection rule: close the connection */
        uint64_t after; /* drop: after this many commands on matching connections */
        uint64_t count; /* disarm after this many hits; 0 = never */

        /* Filled by the table. */
        uint32_t id;
        uint64_t seen; /* selected requests / commands */
        uint64_t hits; /* injections made */
        bool armed;
};

/* Non-NULL while any rule is set: the hooks' only cost otherwise. */
extern struct core_fault_table *_Atomic core_fault_active;

static inline bool core_fault_on(void)
{
        return atomic_load_explicit(&core_fault_active, memory_order_acquire) != NULL;
}

/*
 * Fill r with the defaults (every op, every LBA, always, no effect) before
 * setting fields.
 */
void core_fault_rule_init(struct core_fault_rule *r);

/*
 * Parse the textual fields the RPC takes; 0 or -EINVAL with a message.
 * ops: comma-separated "read", "write", "flush", "other", "all".
 * status: a core status name (core_status_name, '-' or '_' alike), not "ok".
 */
int core_fault_parse_ops(const char *s, unsigned *ops, char *err, size_t errlen);
int core_fault_parse_status(const char *s, enum core_status *st, char *err, size_t errlen);

/*
 * Add a rule (copied); *id gets its id.  -EINVAL (with a message) for a
 * rule that does nothing or contradicts itself, -ENOSPC when the table is
 * full.
 */
int core_fault_add(const struct core_fault_rule *r, uint32_t *id, char *err, size_t errlen);
/* Remove rule id (-ENOENT), or every rule (id 0). Returns how many were removed. */
int core_fault_clear(uint32_t id);
/* Copy of each rule, in id order, under the lock. */
void core_fault_foreach(void (*fn)(const struct core_fault_rule *r, void *arg), void *arg);

/*
 * The I/O hook (core_req_submit, with core_fault_on()): whether req is
 * hit by a rule, and if so the status to finish with (CORE_OK: run it)
 * and the latency to add first.  Returns false when nothing applies.
 */
bool core_fault_io(const struct core_req *req, enum core_status *st, uint32_t *latency_us);

/*
 * The connection hook: a PDU arrived on a connection of a connected host
 * (transport "iscsi"/"nvme", host its initiator name / host NQN, peer its
 * address).  is_cmd: it carries a command (counts toward 'after').
 * Returns true when a drop rule says to close the connection now.
 */
bool core_fault_conn_pdu(const char *transport, const char *host, const char *peer, bool is_cmd);

#endif
