/*
 * Persistent reservations, protocol-neutral (SPC-5 5.14; NVMe reservations
 * map onto the same model).  A registrant is an I_T nexus, named by the
 * personality: for iSCSI "<initiator-name>,i,0x<isid>" plus the target
 * port "<target-name>,t,0x<tpgt>".  State is protected by core_ns.lock and
 * persisted in the namespace metadata when APTPL is set.
 *
 * Types use SPC encoding (the NVMe personality translates at its edge).
 */
#ifndef CORE_PR_H
#define CORE_PR_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

#define CORE_PR_MAX_REGS    64
#define CORE_PR_NEXUS_MAX   300

enum core_pr_type {
	CORE_PR_NONE = 0,
	CORE_PR_WRITE_EXCLUSIVE = 1,
	CORE_PR_EXCLUSIVE_ACCESS = 3,
	CORE_PR_WE_REGS_ONLY = 5,
	CORE_PR_EA_REGS_ONLY = 6,
	CORE_PR_WE_ALL_REGS = 7,
	CORE_PR_EA_ALL_REGS = 8,
};

struct core_pr_nexus {
	char initiator[CORE_PR_NEXUS_MAX]; /* initiator port name (with ISID for iSCSI) */
	char target[CORE_PR_NEXUS_MAX];    /* target port name */
	uint16_t rel_tgt_port;             /* relative target port identifier */
	uint8_t transport_id[CORE_PR_NEXUS_MAX]; /* encoded TransportID (SPC 7.6.4) for READ FULL STATUS */
	uint16_t transport_id_len;
};

struct core_pr_reg {
	bool used;
	uint64_t key;
	struct core_pr_nexus nexus;
	bool all_tg_pt;
};

struct core_pr {
	uint32_t generation;
	struct core_pr_reg regs[CORE_PR_MAX_REGS];
	enum core_pr_type type; /* CORE_PR_NONE: no persistent reservation */
	int holder;             /* index into regs; for *_ALL_REGS types any registrant holds it */
	uint8_t scope;
	bool aptpl;
	/* SPC-2 RESERVE(6)/RELEASE(6), which conflicts with persistent reservations. */
	bool legacy_reserved;
	struct core_pr_nexus legacy_holder;
};

/*
 * Does a command from nexus conflict with the reservation state?
 * is_write: the command modifies the medium; is_read: it reads it.
 * Caller holds ns->lock.
 */
bool core_pr_conflict(const struct core_pr *pr, const struct core_pr_nexus *nexus, bool is_read,
		      bool is_write);

/* Persistence in the namespace metadata (jansson objects; new reference / 0 or -EINVAL). */
struct json_t;
struct json_t *core_pr_to_json(const struct core_pr *pr);
int core_pr_from_json(struct core_pr *pr, const struct json_t *j);

#endif
