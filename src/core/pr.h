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
#include "core/worker.h"
#include "rt/reactor.h"

#define CORE_PR_MAX_REGS  64
#define CORE_PR_NEXUS_MAX 300

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
        char initiator[CORE_PR_NEXUS_MAX];       /* initiator port name (with ISID for iSCSI) */
        char target[CORE_PR_NEXUS_MAX];          /* target port name */
        uint16_t rel_tgt_port;                   /* relative target port identifier */
        uint8_t transport_id[CORE_PR_NEXUS_MAX]; /* encoded TransportID (SPC 7.6.4) for READ FULL
                                                    STATUS */
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
/* Registrations and reservation whatever APTPL says (the state shared with other gateways). */
struct json_t *core_pr_to_json_all(const struct core_pr *pr);
int core_pr_from_json(struct core_pr *pr, const struct json_t *j);

/* ---- Additions (src/core/pr.c): the reservation model's operations. ---- */

struct core_ns;

/* PERSISTENT RESERVE OUT service actions, SPC encoding (NVMe maps onto these). */
enum core_pr_action {
        CORE_PR_REGISTER = 0,
        CORE_PR_RESERVE = 1,
        CORE_PR_RELEASE = 2,
        CORE_PR_CLEAR = 3,
        CORE_PR_PREEMPT = 4,
        CORE_PR_PREEMPT_ABORT = 5,
        CORE_PR_REGISTER_IGNORE = 6,
        CORE_PR_REGISTER_MOVE = 7,
};

#define CORE_PR_SCOPE_LU 0

/* Events for other nexuses, reported through core_pr_cmd.notify (bit mask). */
#define CORE_PR_EV_RES_PREEMPTED  (1u << 0) /* reservation removed by CLEAR/PREEMPT */
#define CORE_PR_EV_RES_RELEASED   (1u << 1) /* RO/AR reservation released, or type changed */
#define CORE_PR_EV_REGS_PREEMPTED (1u << 2) /* this registration was removed by PREEMPT */
#define CORE_PR_EV_ABORT          (1u << 3) /* PREEMPT AND ABORT: abort this nexus's tasks */

/* Which field a CORE_E_INVALID_FIELD / CORE_E_INVALID_PARAM refers to. */
enum core_pr_field {
        CORE_PR_F_NONE = 0,
        CORE_PR_F_ACTION,    /* service action (CDB) */
        CORE_PR_F_TYPE,      /* reservation type (CDB) */
        CORE_PR_F_SCOPE,     /* scope (CDB) */
        CORE_PR_F_SA_KEY,    /* service action reservation key (parameter data) */
        CORE_PR_F_SPEC_I_PT, /* SPEC_I_PT (parameter data; unsupported) */
        CORE_PR_F_DEST,      /* REGISTER AND MOVE destination (TransportID/port) */
        CORE_PR_F_RELEASE,   /* RELEASE with wrong type/scope: INVALID RELEASE OF PR */
};

struct core_pr_cmd {
        enum core_pr_action action;
        enum core_pr_type type; /* RESERVE, RELEASE, PREEMPT* */
        uint8_t scope;
        uint64_t key;    /* RESERVATION KEY */
        uint64_t sa_key; /* SERVICE ACTION RESERVATION KEY */
        bool aptpl, all_tg_pt, spec_i_pt;
        bool unreg;                       /* REGISTER AND MOVE: unregister the source */
        const struct core_pr_nexus *dest; /* REGISTER AND MOVE: destination nexus */
        /*
         * Called (under ns->lock, so it must only record) for every other
         * registrant or nexus an operation affects, with CORE_PR_EV_* bits.
         */
        void (*notify)(void *arg, const struct core_pr_reg *reg, unsigned events);
        void *notify_arg;
        /*
         * NVMe Reservation Register semantics (all false for SPC):
         * registered_only: self must already be registered, else
         * RESERVATION CONFLICT (Unregister, Replace); register_new: a
         * registered self's REGISTER succeeds without change when sa_key is
         * its key and conflicts otherwise (Register); aptpl_keep: leave
         * APTPL as it is (CPTPL 00b "no change").
         */
        bool registered_only, register_new, aptpl_keep;

        /* Out. */
        enum core_pr_field bad_field;
        bool save; /* state must be persisted (APTPL set, or just cleared) */
};

/* Reset to "no registrations, no reservation" (holder = -1). */
void core_pr_init(struct core_pr *pr);
/* Same I_T nexus (initiator port and target port; names compare case-insensitively). */
bool core_pr_nexus_eq(const struct core_pr_nexus *a, const struct core_pr_nexus *b);
/* Is reg (used or not: events carry copies) a registration of nexus, honouring ALL_TG_PT? */
bool core_pr_reg_names(const struct core_pr_reg *reg, const struct core_pr_nexus *nexus);
/* The registration of nexus (honouring ALL_TG_PT), or NULL. Caller holds ns->lock. */
const struct core_pr_reg *core_pr_find_reg(const struct core_pr *pr,
                                           const struct core_pr_nexus *nexus);
/* Is nexus a reservation holder (any registrant for the *_ALL_REGS types)? */
bool core_pr_is_holder(const struct core_pr *pr, const struct core_pr_nexus *nexus);
static inline bool core_pr_type_all_regs(enum core_pr_type t)
{
        return t == CORE_PR_WE_ALL_REGS || t == CORE_PR_EA_ALL_REGS;
}
bool core_pr_type_valid(unsigned type);

/*
 * Execute one PERSISTENT RESERVE OUT service action from nexus self
 * (SPC-5 5.14.7-5.14.11, 6.17).  Caller holds ns->lock.  Returns CORE_OK,
 * CORE_E_RESERVATION_CONFLICT, CORE_E_INVALID_FIELD (a CDB field; see
 * c->bad_field), CORE_E_INVALID_PARAM (parameter data), or
 * CORE_E_PR_INSUFFICIENT_REG.  Does not persist: see c->save, or use
 * core_ns_pr_out().
 */
enum core_status core_pr_out(struct core_pr *pr, const struct core_pr_nexus *self,
                             struct core_pr_cmd *c);
/*
 * core_pr_out() under ns->lock, then core_ns_save_meta() when c->save;
 * then, with the lock dropped, one CORE_NS_EV_RESERVATION event per
 * registrant the operation affected (its registration in ev->pr_reg, the
 * CORE_PR_EV_* bits in ev->pr_events, origin as given), so that every
 * personality tells its hosts: SCSI unit attentions and task aborts on every
 * target port, NVMe reservation notifications.  c->notify, if set, is still
 * called under the lock.  Must not be called with a SCSI target lock or an
 * NVMe controller lock held (the listeners take them).
 */
enum core_status core_ns_pr_out(struct core_ns *ns, const struct core_pr_nexus *self,
                                struct core_pr_cmd *c, const void *origin);

/*
 * Namespaces whose backend keeps the reservation state with the storage
 * (backend_ops.pr_load/pr_store with be.pr_shared: rbd, shared by every
 * gateway exporting the image; a file with shared_reservations): core_ns_pr_out() and
 * core_ns_pr_set_aptpl() go through core_pr_shared_update(), and ns->pr is this gateway's copy,
 * which the per-I/O check reads.  RESERVE(6)/RELEASE(6) stay per gateway.
 *
 * core_pr_shared_update: read the stored state, apply(pr, arg) to it,
 * store it if that returned CORE_OK, guarded by the version read; when
 * another gateway stored first, retry(arg) (may be NULL) and start over.
 * The result becomes ns->pr.  Blocking (cluster or file round trips, the
 * other gateways' acks): PR OUT and the NVMe reservation commands call it
 * on a core worker (core_ns_pr_out_submit below), Set Features 83h on the
 * reactor.  PERSISTENT RESERVE IN and Reservation Report reload the stored
 * state on a core worker too (core_ns_pr_refresh_submit).  Returns apply's status, or
 * CORE_E_INTERNAL when the storage failed, CORE_E_NO_RESOURCES when it
 * kept losing.  Caller holds no lock.
 */
enum core_status core_pr_shared_update(struct core_ns *ns,
                                       enum core_status (*apply)(struct core_pr *pr, void *arg),
                                       void *arg, void (*retry)(void *arg));
/*
 * PERSISTENT RESERVE OUT / NVMe Reservation Register, Acquire, Release off
 * the reactor: on a namespace whose state is shared (core_pr_shared_update:
 * cluster or file round trips, and waiting for the other gateways' acks,
 * up to 3 s when one died) core_ns_pr_out runs on a core worker thread, so
 * the reactor that received the command goes on with every other I/O; on
 * any other namespace it runs at once on the caller's reactor, as before.
 * Either way j->cb(j) runs on j->reactor, never from inside the submit,
 * with j->st and j->c's outputs (bad_field, save) set.  The issuer fills
 * ns, self, c (c.dest, if set, must stay valid until cb), origin, reactor,
 * cb, arg, and owns j until cb.  RESERVE(6)/RELEASE(6), PR IN and Set
 * Features 83h stay synchronous.
 */
struct core_pr_job {
        struct core_ns *ns;
        struct core_pr_nexus self;
        struct core_pr_cmd c;
        const void *origin;
        struct rt_reactor *reactor;
        void (*cb)(struct core_pr_job *j);
        void *arg;
        enum core_status st; /* out */
        /* private */
        struct core_work work_;
};
void core_ns_pr_out_submit(struct core_pr_job *j);
/* Does ns keep its reservation state with shared storage (the job goes to a worker)? */
bool core_ns_pr_shared(const struct core_ns *ns);

/*
 * Reload ns->pr from the stored state (blocking): at open, when another
 * gateway tells of a change, before PERSISTENT RESERVE IN and Reservation
 * Report.  0 (also for namespaces without shared state) or -errno.
 */
int core_ns_pr_refresh(struct core_ns *ns);

/*
 * core_ns_pr_refresh() off the reactor: on a namespace with shared state
 * it runs on a core worker (the same two threads as PR OUT) and cb then
 * runs on reactor; otherwise (or with no worker) the reload runs here and
 * cb is deferred.  cb exactly once, never inside the call; rc = its result.
 */
struct core_pr_refresh_job {
        struct core_ns *ns;
        struct rt_reactor *reactor;
        void (*cb)(struct core_pr_refresh_job *j);
        void *arg;
        int rc; /* out */
        /* private */
        struct core_work work_;
};
void core_ns_pr_refresh_submit(struct core_pr_refresh_job *j);

/*
 * Set APTPL / NVMe Persist Through Power Loss (Set Features 83h) and save
 * the state.  0 or a negative errno from core_ns_save_meta().
 */
int core_ns_pr_set_aptpl(struct core_ns *ns, bool on);

/*
 * The one reservation check for commands of either personality: does a
 * command from nexus that reads (is_read) and/or writes (is_write) the
 * medium conflict with the namespace's reservation?  Lock-free when there
 * is none; nexus NULL (the core's own I/O, e.g. sanitize) never conflicts.
 * Takes ns->lock otherwise.
 */
bool core_ns_pr_conflict(struct core_ns *ns, const struct core_pr_nexus *nexus, bool is_read,
                         bool is_write);

/*
 * SPC-2 RESERVE/RELEASE with the SPC-5 5.14.3 exceptions.  Caller holds
 * ns->lock.  Reserve: CORE_OK or CORE_E_RESERVATION_CONFLICT.  Release:
 * CORE_OK (a no-op unless self holds it) or CORE_E_RESERVATION_CONFLICT.
 */
enum core_status core_pr_legacy_reserve(struct core_pr *pr, const struct core_pr_nexus *self);
enum core_status core_pr_legacy_release(struct core_pr *pr, const struct core_pr_nexus *self);
/* I_T nexus loss / LU reset: drop a RESERVE(6) held by nexus (NULL: by anyone). */
void core_pr_legacy_drop(struct core_pr *pr, const struct core_pr_nexus *nexus);

/* Lock-free peek for the data path: is any reservation (persistent or legacy) present? */
static inline bool core_pr_any_reservation(const struct core_pr *pr)
{
        return __atomic_load_n(&pr->type, __ATOMIC_ACQUIRE) != CORE_PR_NONE ||
               __atomic_load_n(&pr->legacy_reserved, __ATOMIC_ACQUIRE);
}

/*
 * Persistence (core_pr_to_json/core_pr_from_json above): with APTPL clear
 * only {"aptpl": false} is stored, so registrations do not survive a
 * restart (SPC-5 5.14.5); from_json leaves pr empty when it fails.
 */

#endif
