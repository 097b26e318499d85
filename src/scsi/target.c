/*
 * The SCSI personality's dispatcher and target-side state (SAM-5): the
 * parse/execute entry points a transport calls, LUN lookup (SAM-5 4.6,
 * SPC-5 table "logical unit not supported" handling), unit attention
 * conditions per I_T nexus per LUN (SAM-5 5.14, SPC-5 4.5), task
 * management side effects (LUN reset, target reset, I_T nexus loss),
 * the LUN map of a target port, and the per-LU SCSI state that hangs off
 * core_ns.scsi_state, including a removable LU's medium (SBC-4 4.10:
 * MEDIUM NOT PRESENT once ejected; PREVENT ALLOW MEDIUM REMOVAL state per
 * I_T nexus, cleared by nexus loss, LUN reset and target reset).  Also
 * the pure parse entry point for the CDB fuzzer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"
#include "scsi/pr.h"
#include "core/media.h"
#include "rt/log.h"

/* ---- per-LU state ---- */

struct scsi_lu_state *scsi_lu_state(struct core_ns *ns)
{
        struct scsi_lu_state *st = __atomic_load_n(&ns->scsi_state, __ATOMIC_ACQUIRE);
        if (st) {
                if (!st->streams_ready) /* a racing first user is still setting it up */
                        scsi_streams_lu_init(ns, st, true);
                return st;
        }
        pthread_mutex_lock(&ns->lock);
        st = ns->scsi_state;
        if (!st) {
                st = calloc(1, sizeof(*st));
                if (st) {
                        ns->scsi_state_free = free;
                        __atomic_store_n(&ns->scsi_state, st, __ATOMIC_RELEASE);
                }
        }
        pthread_mutex_unlock(&ns->lock);
        /* Outside ns->lock: it takes the core's placement ids (streams.c). */
        if (st)
                scsi_streams_lu_init(ns, st, true);
        return st;
}

bool scsi_check_state(struct scsi_cmd *cmd, unsigned chk)
{
        enum core_status st = core_ns_check(cmd->ns, chk);
        if (st == CORE_OK)
                return true;
        scsi_status_from_core(cmd, st, 0, false);
        /*
         * The core counts the refusal of a medium access command as the
         * request it would have been (NVMe's are refused in
         * core_req_submit and counted there).
         */
        const struct scsi_op *op = cmd->op;
        if (op && (op->flags & SCSI_OPF_MEDIUM) && (op->flags & (SCSI_OPF_READS | SCSI_OPF_WRITES)))
                core_stats_reject(cmd->ns, cmd->nexus ? cmd->nexus->host : NULL,
                                  (op->flags & SCSI_OPF_WRITES) ? CORE_OP_WRITE : CORE_OP_READ, st);
        return false;
}

/* ---- unit attentions ---- */

static const uint8_t ua_sense[SCSI_UA_MAX][2] = {
    [SCSI_UA_POWER_ON] = {0x29, 0x00},
    [SCSI_UA_BUS_RESET] = {0x29, 0x02},
    [SCSI_UA_DEVICE_RESET] = {0x29, 0x03},
    [SCSI_UA_MODE_CHANGED] = {0x2a, 0x01},
    [SCSI_UA_RESERVATIONS_PREEMPTED] = {0x2a, 0x03},
    [SCSI_UA_RESERVATIONS_RELEASED] = {0x2a, 0x04},
    [SCSI_UA_REGISTRATIONS_PREEMPTED] = {0x2a, 0x05},
    [SCSI_UA_CAPACITY_CHANGED] = {0x2a, 0x09},
    [SCSI_UA_LUNS_CHANGED] = {0x3f, 0x0e},
    [SCSI_UA_MEDIUM_CHANGED] = {0x28, 0x00},
    [SCSI_UA_INQUIRY_CHANGED] = {0x3f, 0x03},
    [SCSI_UA_THIN_THRESHOLD] = {0x38, 0x07},
    [SCSI_UA_ELEMENT_CHANGED] = {0x0b, 0x14},
    [SCSI_UA_ALUA_CHANGED] = {0x2a, 0x06},
};

/* Consumes the highest-priority pending UA (lowest bit) into cmd's sense. */
static bool ua_take(struct scsi_cmd *cmd)
{
        _Atomic uint32_t *slot;
        uint32_t v, bit;
        if (!cmd->nexus || cmd->lun >= SCSI_MAX_LUNS)
                return false;
        slot = &cmd->nexus->ua[cmd->lun];
        v = atomic_load(slot);
        while (v) {
                bit = (uint32_t)__builtin_ctz(v);
                if (atomic_compare_exchange_weak(slot, &v, v & ~(1u << bit))) {
                        if (bit >= SCSI_UA_MAX)
                                return false;
                        scsi_sense_set(cmd, SK_UNIT_ATTENTION, ua_sense[bit][0], ua_sense[bit][1]);
                        return true;
                }
        }
        return false;
}

/* REQUEST SENSE reports a pending unit attention (SPC-5 6.39). */
bool scsi_ua_take(struct scsi_cmd *cmd)
{
        return ua_take(cmd);
}

static void nexus_ua_set(struct scsi_nexus *nx, uint64_t lun, enum scsi_ua ua)
{
        if (lun == UINT64_MAX) {
                for (unsigned l = 0; l < SCSI_MAX_LUNS; l++)
                        atomic_fetch_or(&nx->ua[l], 1u << ua);
        } else if (lun < SCSI_MAX_LUNS) {
                atomic_fetch_or(&nx->ua[lun], 1u << ua);
        }
}

void scsi_target_ua(struct scsi_target *tgt, uint64_t lun, enum scsi_ua ua, struct scsi_nexus *skip)
{
        if (!tgt || (unsigned)ua >= SCSI_UA_MAX)
                return;
        pthread_mutex_lock(&tgt->lock);
        for (struct scsi_nexus *nx = tgt->nexus_list; nx; nx = nx->next)
                if (nx != skip)
                        nexus_ua_set(nx, lun, ua);
        pthread_mutex_unlock(&tgt->lock);
}

/* ---- removable medium: prevention per I_T nexus (SBC-4 5.15) ---- */

/*
 * nx's prevention for LUN l (mapped to ns, or NULL) becomes on; keeps the
 * LU's count of preventing nexuses in step.  Caller holds the target lock
 * (or owns an unshared nexus).
 */
static void prevent_update(struct scsi_nexus *nx, unsigned l, struct core_ns *ns, bool on)
{
        struct scsi_lu_state *st;
        if (l >= SCSI_MAX_LUNS || !nx->prevent[l] == !on)
                return;
        nx->prevent[l] = on;
        st = ns ? __atomic_load_n(&ns->scsi_state, __ATOMIC_ACQUIRE) : NULL;
        if (st)
                atomic_fetch_add(&st->prevent_count, on ? 1 : -1);
}

void scsi_prevent_set(struct scsi_cmd *cmd, bool on)
{
        struct scsi_nexus *nx = cmd->nexus;
        struct scsi_target *tgt = nx ? nx->target : NULL;
        if (!nx || cmd->lun >= SCSI_MAX_LUNS)
                return;
        if (tgt)
                pthread_mutex_lock(&tgt->lock);
        prevent_update(nx, (unsigned)cmd->lun, cmd->ns, on);
        if (tgt)
                pthread_mutex_unlock(&tgt->lock);
}

bool scsi_removal_prevented(struct core_ns *ns)
{
        struct scsi_lu_state *st = __atomic_load_n(&ns->scsi_state, __ATOMIC_ACQUIRE);
        return st && atomic_load(&st->prevent_count) > 0;
}

/* ---- namespace events -> unit attentions ---- */

/* Every SCSI target port, for events about a namespace (its LUNs on any target). */
static pthread_mutex_t targets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct scsi_target *targets;

/* The unit attentions a namespace event establishes (SPC-5 table "unit attention"). */
static uint32_t event_ua(const struct core_ns_event *ev)
{
        uint32_t b = 0;
        switch (ev->type) {
        case CORE_NS_EV_CAPACITY:
        case CORE_NS_EV_FORMAT: /* READ CAPACITY(16) P_TYPE, PROT_EN, P_I_EXPONENT (pi.c) */
                return 1u << SCSI_UA_CAPACITY_CHANGED;
        case CORE_NS_EV_WRITE_PROTECT: /* SWP and the WP bit of the mode data */
        case CORE_NS_EV_WRITE_CACHE:   /* WCE of the caching page */
                return 1u << SCSI_UA_MODE_CHANGED;
        case CORE_NS_EV_READY:
                /* A medium was loaded: NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED. */
                if (ev->old_val == CORE_NS_NO_MEDIUM && ev->new_val != CORE_NS_NO_MEDIUM)
                        return 1u << SCSI_UA_MEDIUM_CHANGED;
                return 0;
        case CORE_NS_EV_IDENTITY:
                return 1u << SCSI_UA_INQUIRY_CHANGED;
        case CORE_NS_EV_PROVISIONING:
                /* The threshold is the Logical Block Provisioning mode page's (mode.c). */
                if (ev->new_val & CORE_PROV_CHG_THRESHOLD)
                        return 1u << SCSI_UA_MODE_CHANGED;
                return 0;
        case CORE_NS_EV_SPACE_THRESHOLD:
                /* SBC-4 4.7.3.8.4, SITUA=0: every I_T nexus (origin NULL). */
                return 1u << SCSI_UA_THIN_THRESHOLD;
        case CORE_NS_EV_MEDIA:
                /*
                 * SBC-4 depopulation: an element's health or state changed
                 * (failed, degraded, healed, depopulated, restored).  A change of
                 * the marked ranges alone (WRITE LONG, media_mark, a healing
                 * write) establishes none: GET LBA STATUS reports them.
                 */
                if (ev->new_val & (CORE_MEDIA_CHG_ELEMENT | CORE_MEDIA_CHG_DEPOP))
                        return 1u << SCSI_UA_ELEMENT_CHANGED;
                return 0;
        case CORE_NS_EV_ANA:
                /* SPC-5 5.16.2.6: the LU's access state, or its target port group, changed
                 * (implicit ALUA: management changed it, every nexus is told). */
                return 1u << SCSI_UA_ALUA_CHANGED;
        case CORE_NS_EV_RESERVATION:
                if (ev->pr_events & CORE_PR_EV_RES_PREEMPTED)
                        b |= 1u << SCSI_UA_RESERVATIONS_PREEMPTED;
                if (ev->pr_events & CORE_PR_EV_RES_RELEASED)
                        b |= 1u << SCSI_UA_RESERVATIONS_RELEASED;
                if (ev->pr_events & CORE_PR_EV_REGS_PREEMPTED)
                        b |= 1u << SCSI_UA_REGISTRATIONS_PREEMPTED;
                return b;
        default:
                return 0;
        }
}

/*
 * A namespace event: the unit attention goes to every I_T nexus, of every
 * target port that maps the namespace, but the one whose command made the
 * change (SPC-5 5.14, 7.5: "other I_T nexuses").  Reservation events go
 * only to the nexuses of the registrant named, whichever protocol or
 * target port changed the reservation; for PREEMPT AND ABORT those nexuses'
 * tasks on the LUN are aborted too (SPC-5 5.14.11.5), through the
 * transport's callback.
 */
static void on_ns_event(const struct core_ns_event *ev, void *arg)
{
        (void)arg;
        uint32_t ua = event_ua(ev);
        bool abort = ev->type == CORE_NS_EV_RESERVATION && (ev->pr_events & CORE_PR_EV_ABORT);
        if (!ua && !abort)
                return;
        pthread_mutex_lock(&targets_lock);
        for (struct scsi_target *tgt = targets; tgt; tgt = tgt->next) {
                pthread_mutex_lock(&tgt->lock);
                for (unsigned l = 0; l < SCSI_MAX_LUNS; l++) {
                        if (atomic_load(&tgt->luns[l]) != ev->ns)
                                continue;
                        for (struct scsi_nexus *nx = tgt->nexus_list; nx; nx = nx->next) {
                                if ((const void *)nx == ev->origin)
                                        continue;
                                if (ev->pr_reg && !core_pr_reg_names(ev->pr_reg, &nx->id))
                                        continue;
                                if (ua)
                                        atomic_fetch_or(&nx->ua[l], ua);
                                void (*abort_fn)(struct scsi_nexus *, uint64_t) =
                                    __atomic_load_n(&nx->abort_tasks, __ATOMIC_ACQUIRE);
                                if (abort && abort_fn)
                                        abort_fn(nx, l);
                        }
                }
                pthread_mutex_unlock(&tgt->lock);
        }
        pthread_mutex_unlock(&targets_lock);
}

/* Two initiator port names ("<name>,i,0x<isid>") of one initiator device. */
static bool same_initiator(const char *a, const char *b)
{
        const char *ea = strstr(a, ",i,"), *eb = strstr(b, ",i,");
        size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
        return la == lb && !memcmp(a, b, la);
}

/*
 * Third-party copy (xcopy.c): a CSCD names a LU by designator.  The copy
 * manager reaches the LUs of nx's own target port and those of every
 * target port the same initiator has logged in to: what the initiator
 * could read and write itself, nothing more.
 */
struct core_ns *scsi_lu_by_designator(const struct scsi_nexus *nx, const uint8_t *desc)
{
        struct core_ns *found = NULL;
        if (!nx)
                return NULL;
        pthread_mutex_lock(&targets_lock);
        for (struct scsi_target *tgt = targets; tgt && !found; tgt = tgt->next) {
                /* The nexus whose LUN mask applies: nx itself, or the initiator's on tgt. */
                const struct scsi_nexus *via = tgt == nx->target ? nx : NULL;
                pthread_mutex_lock(&tgt->lock);
                for (struct scsi_nexus *o = tgt->nexus_list; o && !via; o = o->next)
                        if (same_initiator(o->id.initiator, nx->id.initiator))
                                via = o;
                for (unsigned l = 0; via && l < SCSI_MAX_LUNS; l++) {
                        if (!scsi_nexus_sees(via, l))
                                continue;
                        struct core_ns *ns = atomic_load(&tgt->luns[l]);
                        if (ns && scsi_vpd_lu_designator_match(ns, desc)) {
                                core_ns_get(ns);
                                found = ns;
                                break;
                        }
                }
                pthread_mutex_unlock(&tgt->lock);
        }
        pthread_mutex_unlock(&targets_lock);
        return found;
}

static void listen_once(void)
{
        if (core_ns_listen(on_ns_event, NULL))
                LOG_ERR("scsi", "cannot listen to namespace events");
}

/* ---- nexus lifetime and task management ---- */

static void copy_str(char *dst, size_t cap, const char *src)
{
        size_t n = src ? strnlen(src, cap - 1) : 0;
        if (n)
                memcpy(dst, src, n);
        dst[n] = '\0';
}

void scsi_nexus_init(struct scsi_nexus *nx, struct scsi_target *tgt, const char *initiator_port,
                     const char *target_port, const uint8_t *transport_id, uint16_t tid_len)
{
        memset(nx, 0, sizeof(*nx));
        nx->target = tgt;
        copy_str(nx->id.initiator, sizeof(nx->id.initiator), initiator_port);
        copy_str(nx->id.target, sizeof(nx->id.target), target_port);
        nx->id.rel_tgt_port = tgt ? tgt->rel_port_id : 1;
        if (transport_id && tid_len) {
                if (tid_len > sizeof(nx->id.transport_id))
                        tid_len = sizeof(nx->id.transport_id);
                memcpy(nx->id.transport_id, transport_id, tid_len);
                nx->id.transport_id_len = tid_len;
        }
        for (unsigned l = 0; l < SCSI_MAX_LUNS; l++)
                atomic_init(&nx->ua[l], 1u << SCSI_UA_POWER_ON);
        for (unsigned w = 0; w < SCSI_LUN_WORDS; w++)
                atomic_init(&nx->lun_mask[w], UINT64_MAX);
        if (tgt) {
                /* The host is the initiator name: the port name less ",i,0x<ISID>". */
                char host[CORE_HOST_NAME_MAX];
                copy_str(host, sizeof(host), initiator_port);
                char *isid = strstr(host, ",i,");
                if (isid)
                        *isid = '\0';
                nx->host = core_host_get("iscsi", host);
                pthread_mutex_lock(&tgt->lock);
                nx->next = tgt->nexus_list;
                tgt->nexus_list = nx;
                pthread_mutex_unlock(&tgt->lock);
        }
}

void scsi_nexus_set_abort(struct scsi_nexus *nx,
                          void (*abort_tasks)(struct scsi_nexus *nx, uint64_t lun))
{
        __atomic_store_n(&nx->abort_tasks, abort_tasks, __ATOMIC_RELEASE);
}

/* Caller holds tgt's lock (or owns a nexus on no target). */
static void nexus_set_luns_locked(struct scsi_target *tgt, struct scsi_nexus *nx,
                                  const uint64_t *mask, bool notify)
{
        bool changed = false;
        for (unsigned w = 0; w < SCSI_LUN_WORDS; w++) {
                uint64_t v = mask ? mask[w] : UINT64_MAX;
                if (atomic_exchange(&nx->lun_mask[w], v) != v)
                        changed = true;
        }
        if (changed && notify && tgt)
                for (unsigned l = 0; l < SCSI_MAX_LUNS; l++)
                        if (scsi_nexus_sees(nx, l) && atomic_load(&tgt->luns[l]))
                                atomic_fetch_or(&nx->ua[l], 1u << SCSI_UA_LUNS_CHANGED);
}

void scsi_nexus_set_luns(struct scsi_nexus *nx, const uint64_t *mask, bool notify)
{
        struct scsi_target *tgt = nx->target;
        if (tgt)
                pthread_mutex_lock(&tgt->lock);
        nexus_set_luns_locked(tgt, nx, mask, notify);
        if (tgt)
                pthread_mutex_unlock(&tgt->lock);
}

void scsi_target_set_luns(struct scsi_target *tgt, const char *initiator, const uint64_t *mask)
{
        pthread_mutex_lock(&tgt->lock);
        for (struct scsi_nexus *nx = tgt->nexus_list; nx; nx = nx->next)
                if (same_initiator(nx->id.initiator, initiator))
                        nexus_set_luns_locked(tgt, nx, mask, true);
        pthread_mutex_unlock(&tgt->lock);
}

void scsi_nexus_fini(struct scsi_nexus *nx)
{
        struct scsi_target *tgt = nx->target;
        if (!tgt)
                return;
        pthread_mutex_lock(&tgt->lock);
        for (struct scsi_nexus **pp = &tgt->nexus_list; *pp; pp = &(*pp)->next) {
                if (*pp == nx) {
                        *pp = nx->next;
                        break;
                }
        }
        /* I_T nexus loss releases the nexus's RESERVE(6) (SPC-2 5.5.1) and
         * its medium removal prevention (SBC-4 5.15). */
        scsi_pr_nexus_lost(nx);
        for (unsigned l = 0; l < SCSI_MAX_LUNS; l++)
                prevent_update(nx, l, atomic_load(&tgt->luns[l]), false);
        pthread_mutex_unlock(&tgt->lock);
        memset(nx->prevent, 0, sizeof(nx->prevent));
        scsi_xcopy_nexus_lost(nx);
        core_host_put(nx->host);
        nx->host = NULL;
        nx->target = NULL;
        nx->next = NULL;
}

static void lun_reset_locked(struct scsi_target *tgt, unsigned l)
{
        struct core_ns *ns = atomic_load(&tgt->luns[l]);
        if (ns)
                scsi_pr_reset(ns);
        /* SBC-4 5.15: a LUN reset (and so a target reset) allows removal. */
        for (struct scsi_nexus *nx = tgt->nexus_list; nx; nx = nx->next)
                prevent_update(nx, l, ns, false);
}

void scsi_lun_reset(struct scsi_nexus *nx, uint64_t lun)
{
        struct scsi_target *tgt = nx->target;
        if (!tgt || lun >= SCSI_MAX_LUNS)
                return;
        pthread_mutex_lock(&tgt->lock);
        lun_reset_locked(tgt, (unsigned)lun);
        /*
         * SAM-5 6.3.3: a logical unit reset establishes a unit attention
         * for every I_T nexus, the one that asked for the reset included.
         */
        for (struct scsi_nexus *o = tgt->nexus_list; o; o = o->next)
                nexus_ua_set(o, lun, SCSI_UA_DEVICE_RESET);
        pthread_mutex_unlock(&tgt->lock);
}

void scsi_target_reset(struct scsi_nexus *nx, bool cold)
{
        struct scsi_target *tgt = nx->target;
        if (!tgt)
                return;
        pthread_mutex_lock(&tgt->lock);
        for (unsigned l = 0; l < SCSI_MAX_LUNS; l++)
                lun_reset_locked(tgt, l);
        for (struct scsi_nexus *o = tgt->nexus_list; o; o = o->next)
                if (o != nx)
                        nexus_ua_set(o, UINT64_MAX, cold ? SCSI_UA_POWER_ON : SCSI_UA_BUS_RESET);
        pthread_mutex_unlock(&tgt->lock);
}

/* ---- LUN map ---- */

void scsi_target_init(struct scsi_target *tgt, const char *name, uint16_t tpgt)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, listen_once);
        memset(tgt, 0, sizeof(*tgt));
        copy_str(tgt->name, sizeof(tgt->name), name);
        tgt->tpgt = tpgt;
        /* Offset by the gateway id (core/ana.h): unique across the gateways of one LU. */
        tgt->rel_port_id = core_gateway_rel_port(tpgt ? tpgt : 1);
        pthread_mutex_init(&tgt->lock, NULL);
        for (unsigned l = 0; l < SCSI_MAX_LUNS; l++)
                atomic_init(&tgt->luns[l], NULL);
        pthread_mutex_lock(&targets_lock);
        tgt->next = targets;
        targets = tgt;
        pthread_mutex_unlock(&targets_lock);
}

void scsi_target_fini(struct scsi_target *tgt)
{
        pthread_mutex_lock(&targets_lock);
        for (struct scsi_target **pp = &targets; *pp; pp = &(*pp)->next) {
                if (*pp == tgt) {
                        *pp = tgt->next;
                        break;
                }
        }
        pthread_mutex_unlock(&targets_lock);
        pthread_mutex_destroy(&tgt->lock);
}

int scsi_target_map_lun(struct scsi_target *tgt, uint32_t lun, struct core_ns *ns)
{
        if (lun >= SCSI_MAX_LUNS || !ns)
                return -EINVAL;
        pthread_mutex_lock(&tgt->lock);
        if (atomic_load(&tgt->luns[lun])) {
                pthread_mutex_unlock(&tgt->lock);
                return -EEXIST;
        }
        core_ns_get(ns);
        for (struct scsi_nexus *nx = tgt->nexus_list; nx; nx = nx->next) {
                for (unsigned l = 0; l < SCSI_MAX_LUNS; l++)
                        if (atomic_load(&tgt->luns[l]))
                                atomic_fetch_or(&nx->ua[l], 1u << SCSI_UA_LUNS_CHANGED);
                atomic_store(&nx->ua[lun], 1u << SCSI_UA_POWER_ON);
                prevent_update(nx, lun, NULL, false);
        }
        atomic_store(&tgt->luns[lun], ns);
        pthread_mutex_unlock(&tgt->lock);
        return 0;
}

int scsi_target_unmap_lun(struct scsi_target *tgt, uint32_t lun)
{
        struct core_ns *ns;
        if (lun >= SCSI_MAX_LUNS)
                return -EINVAL;
        pthread_mutex_lock(&tgt->lock);
        ns = atomic_exchange(&tgt->luns[lun], NULL);
        if (!ns) {
                pthread_mutex_unlock(&tgt->lock);
                return -ENOENT;
        }
        for (struct scsi_nexus *nx = tgt->nexus_list; nx; nx = nx->next) {
                for (unsigned l = 0; l < SCSI_MAX_LUNS; l++)
                        if (atomic_load(&tgt->luns[l]))
                                atomic_fetch_or(&nx->ua[l], 1u << SCSI_UA_LUNS_CHANGED);
                prevent_update(nx, lun, ns, false);
        }
        pthread_mutex_unlock(&tgt->lock);
        core_ns_put(ns);
        return 0;
}

/* ---- parse / execute ---- */

static struct core_ns *lookup_lun(struct scsi_cmd *cmd)
{
        struct scsi_target *tgt = cmd->nexus ? cmd->nexus->target : NULL;
        /* One bitmap test for LUN masking: a LUN the nexus may not see is not there. */
        if (!tgt || !scsi_nexus_sees(cmd->nexus, cmd->lun))
                return NULL;
        return atomic_load(&tgt->luns[cmd->lun]);
}

enum scsi_parse_result scsi_cmd_parse(struct scsi_cmd *cmd)
{
        const struct scsi_op *op;
        bool sa_unknown;
        uint8_t control;

        cmd->status = SAM_STAT_GOOD;
        cmd->sense_len = 0;
        cmd->data_in_len = 0;
        cmd->data_out_len = 0;
        cmd->xfer_len = 0;
        cmd->op = NULL;
        cmd->lba = 0;
        cmd->nlb = 0;
        cmd->aux = 0;
        cmd->ns = lookup_lun(cmd);

        if (cmd->cdb_len < 6 || cmd->cdb_len > SCSI_CDB_MAX) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x20, 0x00);
                return SCSI_PARSE_DONE;
        }
        op = scsi_op_find(cmd->cdb, &sa_unknown);
        if (op && cmd->ns && !scsi_op_for_lu(op, cmd->ns)) {
                /* Not offered on this LU: as if absent from the table. */
                sa_unknown = op->has_sa;
                op = NULL;
        }
        if (!cmd->ns && !(op && (op->flags & SCSI_OPF_NO_LUN))) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x25, 0x00);
                return SCSI_PARSE_DONE;
        }
        if (cmd->ns && !scsi_lu_state(cmd->ns)) {
                scsi_status_from_core(cmd, CORE_E_NO_RESOURCES, 0, false);
                return SCSI_PARSE_DONE;
        }
        if (!op) {
                if (sa_unknown)
                        scsi_sense_invalid_field(cmd, true, scsi_op_sa_off(cmd->cdb[0]),
                                                 scsi_op_sa_off(cmd->cdb[0]) == 1 ? 4 : 7);
                else
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x20, 0x00);
                return SCSI_PARSE_DONE;
        }
        if (cmd->cdb_len < op->cdb_len) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x20, 0x00);
                return SCSI_PARSE_DONE;
        }
        cmd->op = op;
        /* Control byte: no ACA (NACA) and no linked commands. */
        control = cmd->cdb[scsi_op_control_off(op)];
        if (control & 0x04) {
                scsi_sense_invalid_field(cmd, true, scsi_op_control_off(op), 2);
                return SCSI_PARSE_DONE;
        }
        if (control & 0x01) {
                scsi_sense_invalid_field(cmd, true, scsi_op_control_off(op), 0);
                return SCSI_PARSE_DONE;
        }
        if (cmd->ns) {
                /* SBC-4 4.11.3: while a sanitize runs, only the commands the
                 * table marks SANITIZE_OK are processed; a pending unit
                 * attention waits until it is over. */
                if (!(op->flags & SCSI_OPF_SANITIZE_OK) &&
                    !scsi_check_state(cmd, CORE_CHK_SANITIZING))
                        return SCSI_PARSE_DONE;
                if (!(op->flags & SCSI_OPF_UA_OK) && ua_take(cmd))
                        return SCSI_PARSE_DONE;
                /* The namespace's state (core/state.c): medium present
                 * (SBC-4 4.10), started, not in sanitize failure mode. */
                unsigned chk = 0;
                if (op->flags & (SCSI_OPF_MEDIUM | SCSI_OPF_NEEDS_MEDIUM))
                        chk |= CORE_CHK_MEDIUM;
                /* ALUA (SPC-5 5.16.2.4): in standby, unavailable, offline or transitioning
                 * only the commands without medium access run (INQUIRY, REPORT TARGET PORT
                 * GROUPS, REQUEST SENSE, mode and log pages, reservations ...). */
                if (op->flags & SCSI_OPF_MEDIUM)
                        chk |= CORE_CHK_ACCESS | CORE_CHK_STARTED | CORE_CHK_SANITIZE_FAILED;
                if (chk && !scsi_check_state(cmd, chk))
                        return SCSI_PARSE_DONE;
                if (!(op->flags & SCSI_OPF_PR_EXEMPT) &&
                    scsi_pr_conflict(cmd, op->flags & SCSI_OPF_READS,
                                     op->flags & SCSI_OPF_WRITES)) {
                        cmd->status = SAM_STAT_RESERVATION_CONFLICT;
                        return SCSI_PARSE_DONE;
                }
        }
        return op->parse(cmd);
}

void scsi_cmd_exec(struct scsi_cmd *cmd)
{
        const struct scsi_op *op = cmd->op;
        if (op && op->exec) {
                op->exec(cmd);
                return;
        }
        if (!op || !cmd->ns) {
                /* Nothing to execute: parse already decided (should not happen). */
                if (cmd->status == SAM_STAT_GOOD && !op)
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x20, 0x00);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        core_req_submit(&cmd->req);
}

void scsi_cmd_abort(struct scsi_cmd *cmd)
{
        const struct scsi_op *op = cmd->op;
        if (op && op->abort)
                op->abort(cmd);
}

/* ---- fuzz entry point ---- */

/* The fuzz LU's backend: thin, reporting a fixed allocation (the provisioning page is present). */
static int fuzz_map_status(struct backend *be, uint64_t off, uint64_t len, enum core_prov *st,
                           uint64_t *run)
{
        (void)be;
        *st = (off >> 20) & 1 ? CORE_PROV_MAPPED : CORE_PROV_DEALLOCATED;
        *run = len;
        return 0;
}

static int64_t fuzz_allocated(struct backend *be)
{
        (void)be;
        return 64 << 20;
}

static const struct backend_ops fuzz_be_ops = {
    .name = "fuzz", .map_status = fuzz_map_status, .allocated = fuzz_allocated};

/*
 * One fuzz input: a CDB, and for a command with a parameter list that is
 * checked synchronously (MODE SELECT), the bytes after the CDB as that list.
 */
int scsi_fuzz_one(const uint8_t *cdb, size_t len)
{
        static struct core_ns ns;
        static struct scsi_lu_state st;
        static struct scsi_target tgt;
        static struct scsi_nexus nx;
        static struct scsi_cmd cmd;
        static _Alignas(16) uint8_t buf[2 * CORE_MAX_TRANSFER_BYTES];
        static bool init;

        if (!init) {
                memset(&ns, 0, sizeof(ns));
                strcpy(ns.name, "fuzz");
                ns.block_size = 512;
                ns.block_shift = 9;
                ns.num_blocks = 1u << 20;
                ns.thin = true;
                ns.be.ops = &fuzz_be_ops;
                pthread_mutex_init(&ns.lock, NULL);
                ns.scsi_state = &st;
                scsi_target_init(&tgt, "iqn.2024-01.org.slate:fuzz", 1);
                atomic_store(&tgt.luns[0], &ns);
                /* Physical elements, so the depopulation commands parse deep. */
                char err[64];
                if (core_media_init(&ns) == 0)
                        core_media_configure(&ns, 4, 2048, err, sizeof(err));
                init = true;
        }
        if (len < 1)
                return 0;
        memset(&cmd, 0, sizeof(cmd));
        scsi_nexus_init(&nx, NULL, "iqn.fuzz,i,0x1", "iqn.2024-01.org.slate:fuzz,t,0x1", NULL, 0);
        nx.target = &tgt;
        /*
         * Clear the power-on UA on LUN 0 half of the time so parsing goes deep: for odd
         * opcodes, and for even ones (WRITE STREAM 9Ah, SERVICE ACTION IN 9Eh, WRITE(10)
         * 2Ah ...) when bit 4 of the last byte is set.
         */
        if ((cdb[0] & 1) || (len > 1 && (cdb[len - 1] & 0x10)))
                atomic_store(&nx.ua[0], 0);
        size_t full = len;
        if (len > SCSI_CDB_MAX)
                len = SCSI_CDB_MAX;
        memcpy(cmd.cdb, cdb, len);
        cmd.cdb_len = (uint16_t)(len < 16 ? 16 : len);
        cmd.lun = len > 1 ? (cdb[len - 1] & 1) : 0;
        ns.removable = len > 1 && (cdb[len - 1] & 2);
        /* Thin provisioning and anchoring too, so UNMAP/WRITE SAME/GET LBA STATUS parse deep. */
        ns.thin = len > 1 && (cdb[len - 1] & 4);
        ns.be.can_anchor = len > 1 && (cdb[len - 1] & 8);
        /* 8 logical blocks per physical block, so WRITE LONG's PBLOCK is accepted. */
        ns.phys_exp = len > 1 && (cdb[len - 1] & 0x20) ? 3 : 0;
        /* Protection information type 0-3 by the last byte's two high bits (pi.c: the
         * xxPROTECT fields, the 32-byte CDBs, the Application Tag mode page). */
        uint8_t pit = len > 1 ? (uint8_t)(cdb[len - 1] >> 6) : 0;
        ns.pi = (struct core_pi_fmt){.block_size = 512,
                                     .md_size = pit ? 8 : 0,
                                     .type = pit,
                                     .guard = CORE_PI_GUARD_CRC16,
                                     .pi_first = true};
        atomic_store(&ns.wp, 0);
        atomic_store(&ns.ready, CORE_NS_READY);
        atomic_store(&ns.san_state, CORE_SAN_NEVER);
        cmd.nexus = &nx;
        cmd.edtl = CORE_MAX_TRANSFER_BYTES;
        cmd.buf = buf;
        cmd.buf_len = sizeof(buf);
        st = (struct scsi_lu_state){0};
        scsi_streams_lu_init(&ns, &st, false);
        atomic_store(&ns.prov.limit, 0);
        atomic_store(&ns.prov.threshold, 0);
        enum scsi_parse_result r = scsi_cmd_parse(&cmd);
        /* The bytes after the command's CDB are its Data-Out (parameter list). */
        if (r == SCSI_PARSE_EXEC && cmd.op && full > ((const struct scsi_op *)cmd.op)->cdb_len) {
                size_t cl = ((const struct scsi_op *)cmd.op)->cdb_len;
                uint32_t n = full - cl > cmd.buf_len ? cmd.buf_len : (uint32_t)(full - cl);
                if (n > cmd.data_out_len)
                        n = cmd.data_out_len;
                memmove(buf, cdb + cl, n);
                scsi_xcopy_fuzz_params(&cmd, n);
                scsi_scatter_fuzz_params(&cmd, n);
                /* FORMAT UNIT's parameter list, decoded (not applied). */
                if (((const struct scsi_op *)cmd.op)->exec == scsi_pi_format_exec) {
                        struct core_pi_fmt f;
                        scsi_pi_format_decode(&cmd, buf, n, &f);
                }
                /* SEND DIAGNOSTIC's diagnostic pages (SELFTEST=0, SELF-TEST CODE 000b). */
                if (((const struct scsi_op *)cmd.op)->exec == scsi_diag_send_exec &&
                    !(cmd.cdb[1] & 0xe4)) {
                        cmd.data_out_len = n;
                        scsi_diag_pages(&cmd);
                }
        }
        if (cmd.data_in_len > cmd.buf_len || cmd.data_out_len > cmd.buf_len ||
            cmd.sense_len > SCSI_SENSE_MAX)
                abort();
        const struct scsi_op *op = cmd.op;
        if (r == SCSI_PARSE_EXEC && op && op->exec == scsi_mode_select_exec) {
                uint32_t cdb_len = op->cdb_len, n = 0;
                if (full > cdb_len)
                        n = (uint32_t)(full - cdb_len) < cmd.data_out_len
                                ? (uint32_t)(full - cdb_len)
                                : cmd.data_out_len;
                memset(buf, 0, cmd.data_out_len);
                memcpy(buf, cdb + cdb_len, n);
                scsi_mode_select_apply(&cmd);
                if (cmd.data_in_len > cmd.buf_len || cmd.sense_len > SCSI_SENSE_MAX)
                        abort();
                /* The Application Tag page's tables (retired ones are kept until close). */
                core_ns_pi_close(&ns);
        }
        return 0;
}
