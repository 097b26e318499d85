/*
 * NVMe reservations (NVMe Base 2.0 7.2 Reservation Acquire, 7.3 Register,
 * 7.4 Release, 7.5 Report, 8.19 Reservations; 5.16.1.22 Reservation
 * Notification log page; 5.27.1.22/23 features 82h Reservation
 * Notification Mask and 83h Reservation Persistence) on the core's one
 * reservation model (core/pr.c), so that a reservation taken over NVMe is
 * honoured over iSCSI and the reverse.
 *
 * The registrant.  NVMe registers a host, not a controller: every
 * controller with the same Host Identifier shares one registration
 * (8.19.1).  A host is a core_pr_nexus with initiator
 * "nvme:<hostnqn>,hostid,0x<32 hex digits of the 128-bit HOSTID>" and target
 * "<subsystem NQN>" (nvme_ctrl_pr_id); SCSI READ FULL STATUS shows that name
 * in an iSCSI-format TransportID.
 *
 * Translation to the core's SPC model: types 1-6 are SPC types 1, 3, 5, 6,
 * 7, 8; Register is REGISTER (register_new: the same key again succeeds),
 * Unregister and Replace are REGISTER / REGISTER AND IGNORE EXISTING KEY
 * (IEKEY) of an already registered host (registered_only); CPTPL is APTPL
 * (00b: unchanged); Acquire is RESERVE, PREEMPT, PREEMPT AND ABORT; Release
 * is RELEASE, CLEAR.  A new key of zero is rejected (Invalid Field): the
 * core, like SPC, reads key 0 as "unregister".  IEKEY on Acquire and Release
 * is Invalid Field (RESCAP.IEKEY13: IEKEY as defined from revision 1.3).
 *
 * Reservation Report returns the extended data structure only: hosts on
 * fabrics have 128-bit identifiers, so EDS = 0 is Host Identifier
 * Inconsistent.  Each registrant is one entry with CNTLID FFFFh (dynamic
 * controller model: a host may have several controllers, or none).  Its
 * HOSTID is the host's own for NVMe registrants; a SCSI registrant (an I_T
 * nexus) has none, so it is reported with a deterministic stand-in:
 * XXH64 (xxhash, seed 0) of the initiator port name followed by XXH64 of
 * the target port name, both big-endian — the same nexus always reads the same, and
 * two nexuses differ.
 *
 * PREEMPT AND ABORT: the preempted host's commands still being processed
 * complete normally (the standard allows a controller to complete rather
 * than abort commands already being processed); every later command from
 * it meets the new reservation in core_req_submit.
 *
 * Notifications: the core publishes CORE_NS_EV_RESERVATION for each
 * registrant an operation affected; admin.c hands it to nvme_resv_notify
 * for every controller of that host, which queues Registration Preempted,
 * Reservation Released or Reservation Preempted entries (unless masked by
 * feature 82h) and raises the "Reservation Log Page Available" event.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <xxhash.h>

#include "nvme/internal.h"
#include "rt/log.h"

#define CDW10_IEKEY (1u << 3)

/* ---- Identity ---- */

static void hex(char *out, const uint8_t *p, size_t n)
{
        static const char d[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = d[p[i] >> 4];
                out[2 * i + 1] = d[p[i] & 15];
        }
        out[2 * n] = 0;
}

const struct core_pr_nexus *nvme_ctrl_pr_id(struct nvme_ctrl *ctrl)
{
        if (atomic_load_explicit(&ctrl->pr_id_ready, memory_order_acquire))
                return &ctrl->pr_id;
        pthread_mutex_lock(&ctrl->lock);
        if (!atomic_load(&ctrl->pr_id_ready)) {
                char h[33];
                hex(h, ctrl->hostid, 16);
                memset(&ctrl->pr_id, 0, sizeof(ctrl->pr_id));
                snprintf(ctrl->pr_id.initiator, sizeof(ctrl->pr_id.initiator),
                         "nvme:%.223s,hostid,0x%s", ctrl->hostnqn, h);
                snprintf(ctrl->pr_id.target, sizeof(ctrl->pr_id.target), "%s", ctrl->subsys->nqn);
                atomic_store_explicit(&ctrl->pr_id_ready, true, memory_order_release);
        }
        pthread_mutex_unlock(&ctrl->lock);
        return &ctrl->pr_id;
}

/* The 128-bit Host Identifier of a registrant (see the top of this file). */
static void reg_hostid(const struct core_pr_nexus *nx, uint8_t out[16])
{
        const char *p = strncmp(nx->initiator, "nvme:", 5) ? NULL : strrchr(nx->initiator, ',');
        if (p && p - nx->initiator >= 12 && !strncmp(p - 7, ",hostid", 7) &&
            !strncmp(p, ",0x", 3) && strlen(p + 3) == 32) {
                bool ok = true;
                for (int i = 0; i < 16 && ok; i++)
                        ok = isxdigit((unsigned char)p[3 + 2 * i]) &&
                             isxdigit((unsigned char)p[4 + 2 * i]) &&
                             sscanf(p + 3 + 2 * i, "%2hhx", &out[i]) == 1;
                if (ok)
                        return;
        }
        slate_put_be(out, 8, XXH64(nx->initiator, strlen(nx->initiator), 0));
        slate_put_be(out + 8, 8, XXH64(nx->target, strlen(nx->target), 0));
}

/* ---- Types ---- */

static const uint8_t spc_of_nvme[7] = {
    0,
    CORE_PR_WRITE_EXCLUSIVE,
    CORE_PR_EXCLUSIVE_ACCESS,
    CORE_PR_WE_REGS_ONLY,
    CORE_PR_EA_REGS_ONLY,
    CORE_PR_WE_ALL_REGS,
    CORE_PR_EA_ALL_REGS,
};

static uint8_t nvme_of_spc(enum core_pr_type t)
{
        for (uint8_t i = 1; i < sizeof(spc_of_nvme); i++)
                if (spc_of_nvme[i] == t)
                        return i;
        return 0;
}

/* ---- Parse ---- */

/* The namespace and the 8 or 16 bytes of data every H2C reservation command carries. */
static enum nvme_parse_result resv_parse(struct nvme_cmd *cmd, uint32_t len)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        cmd->ns = nvme_ns_lookup(ctrl->subsys, nvme_nsid(cmd));
        if (!cmd->ns)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
        if (!nvme_xfer(cmd, len, true))
                return NVME_PARSE_DONE;
        return NVME_PARSE_EXEC;
}

enum nvme_parse_result nvme_resv_register_parse(struct nvme_cmd *cmd)
{
        uint32_t cdw10 = nvme_cdw(cmd, 10);
        if ((cdw10 & 7) > 2) /* RREGA: register, unregister, replace */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(10), 0);
        if ((cdw10 >> 30) == 1) /* CPTPL 01b is reserved */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(10) + 3, 6);
        return resv_parse(cmd, sizeof(struct nvme_resv_keys));
}

static bool rtype_ok(struct nvme_cmd *cmd, uint32_t cdw10)
{
        uint8_t rtype = (cdw10 >> 8) & 0xff;
        if (rtype >= 1 && rtype <= 6)
                return true;
        nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10) + 1);
        return false;
}

enum nvme_parse_result nvme_resv_acquire_parse(struct nvme_cmd *cmd)
{
        uint32_t cdw10 = nvme_cdw(cmd, 10);
        if ((cdw10 & 7) > 2) /* RACQA: acquire, preempt, preempt and abort */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(10), 0);
        if (cdw10 & CDW10_IEKEY)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(10), 3);
        if (!rtype_ok(cmd, cdw10))
                return NVME_PARSE_DONE;
        return resv_parse(cmd, sizeof(struct nvme_resv_keys));
}

enum nvme_parse_result nvme_resv_release_parse(struct nvme_cmd *cmd)
{
        uint32_t cdw10 = nvme_cdw(cmd, 10);
        if ((cdw10 & 7) > 1) /* RRELA: release, clear */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(10), 0);
        if (cdw10 & CDW10_IEKEY)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(10), 3);
        if ((cdw10 & 7) == 0 && !rtype_ok(cmd, cdw10)) /* Clear ignores RTYPE */
                return NVME_PARSE_DONE;
        return resv_parse(cmd, 8);
}

/* ---- Execute: Register, Acquire, Release ---- */

/* The command's fields into *cp; false: cmd has its status. */
static bool resv_prepare(struct nvme_cmd *cmd, struct core_pr_cmd *cp)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw10 = nvme_cdw(cmd, 10);
        const struct nvme_resv_keys *d = (const struct nvme_resv_keys *)cmd->buf;
        uint64_t crkey = get_le64(&d->crkey);
        uint64_t nkey = cmd->data_len >= 16 ? get_le64(&d->nkey) : 0;
        uint8_t act = cdw10 & 7, rtype = (cdw10 >> 8) & 0xff;
        bool iekey = cdw10 & CDW10_IEKEY;
        struct core_pr_cmd c = {.scope = CORE_PR_SCOPE_LU, .key = crkey};

        if (!ctrl || !cmd->ns) {
                nvme_set_status(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR, true);
                return false;
        }
        switch (cmd->sqe[0]) {
        case NVME_IO_RESV_REGISTER: {
                uint8_t cptpl = cdw10 >> 30;
                c.aptpl_keep = cptpl == 0;
                c.aptpl = cptpl == 3;
                c.sa_key = act == 1 ? 0 : nkey;
                if (act != 1 && nkey == 0) {
                        /* The core reads key 0 as "unregister" (SPC): not a key to register. */
                        nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, NVME_LOC_NONE,
                                    -1);
                        return false;
                }
                if (act == 0) {
                        c.action = CORE_PR_REGISTER;
                        c.key = 0; /* CRKEY is not used by Register */
                        c.register_new = true;
                } else {
                        c.action = iekey ? CORE_PR_REGISTER_IGNORE : CORE_PR_REGISTER;
                        c.registered_only = true;
                }
                break;
        }
        case NVME_IO_RESV_ACQUIRE:
                c.type = (enum core_pr_type)spc_of_nvme[rtype <= 6 ? rtype : 0];
                c.sa_key = nkey;
                c.action = act == 0   ? CORE_PR_RESERVE
                           : act == 1 ? CORE_PR_PREEMPT
                                      : CORE_PR_PREEMPT_ABORT;
                break;
        case NVME_IO_RESV_RELEASE:
                c.type = (enum core_pr_type)spc_of_nvme[rtype <= 6 ? rtype : 0];
                c.action = act == 0 ? CORE_PR_RELEASE : CORE_PR_CLEAR;
                break;
        default:
                nvme_set_status(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE, true);
                return false;
        }
        *cp = c;
        return true;
}

static void resv_finish(struct nvme_cmd *cmd, enum core_status st, const struct core_pr_cmd *c)
{
        if (st == CORE_E_INVALID_FIELD || st == CORE_E_INVALID_PARAM) {
                /* Type (RELEASE of another type), or PREEMPT with PRKEY 0. */
                nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                            c->bad_field == CORE_PR_F_SA_KEY ? NVME_LOC_NONE
                                                             : NVME_SQE_OFF_CDW(10) + 1,
                            -1);
                return;
        }
        nvme_status_from_core(cmd, st);
}

void nvme_resv_do(struct nvme_cmd *cmd)
{
        struct core_pr_cmd c;
        if (!resv_prepare(cmd, &c))
                return;
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        resv_finish(cmd, core_ns_pr_out(cmd->ns, nvme_ctrl_pr_id(ctrl), &c, ctrl), &c);
}

/* On a namespace with shared state the command runs on a core worker (core_ns_pr_out_submit). */
static void resv_job_done(struct core_pr_job *j)
{
        struct nvme_cmd *cmd = j->arg;
        resv_finish(cmd, j->st, &j->c);
        free(j);
        nvme_cmd_complete(cmd);
}

void nvme_resv_exec(struct nvme_cmd *cmd)
{
        struct core_pr_job *j;
        if (!cmd->ns || !cmd->queue->ctrl || !core_ns_pr_shared(cmd->ns) ||
            !(j = calloc(1, sizeof(*j)))) {
                nvme_resv_do(cmd);
                nvme_cmd_complete_deferred(cmd);
                return;
        }
        if (!resv_prepare(cmd, &j->c)) {
                free(j);
                nvme_cmd_complete_deferred(cmd);
                return;
        }
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        j->ns = cmd->ns;
        j->self = *nvme_ctrl_pr_id(ctrl);
        j->origin = ctrl;
        j->reactor = cmd->reactor;
        j->cb = resv_job_done;
        j->arg = cmd;
        core_ns_pr_out_submit(j);
}

/* ---- Report ---- */

/* The Reservation Status data structure (extended) of ns->pr as it stands, into buf. */
static void report_fill(struct nvme_cmd *cmd)
{
        uint64_t len = ((uint64_t)nvme_cdw(cmd, 10) + 1) * 4; /* NUMD, 0's based */
        uint8_t page[sizeof(struct nvme_resv_status_ext) +
                     CORE_PR_MAX_REGS * sizeof(struct nvme_resv_ctrl_ext)];
        memset(page, 0, sizeof(page));
        struct nvme_resv_status_ext *h = (struct nvme_resv_status_ext *)page;
        struct nvme_resv_ctrl_ext *e = (struct nvme_resv_ctrl_ext *)(h + 1);
        const struct core_pr *pr = &cmd->ns->pr;
        unsigned n = 0;

        pthread_mutex_lock(&cmd->ns->lock);
        put_le32(&h->gen, pr->generation);
        h->rtype = nvme_of_spc(pr->type);
        h->ptpls = pr->aptpl;
        for (int i = 0; i < CORE_PR_MAX_REGS; i++) {
                const struct core_pr_reg *r = &pr->regs[i];
                if (!r->used)
                        continue;
                put_le16(&e[n].cntlid, 0xffff);
                e[n].rcsts = pr->type != CORE_PR_NONE &&
                             (core_pr_type_all_regs(pr->type) || pr->holder == i);
                put_le64(&e[n].rkey, r->key);
                reg_hostid(&r->nexus, e[n].hostid);
                n++;
        }
        pthread_mutex_unlock(&cmd->ns->lock);
        slate_put_le(h->regctl, 2, n);

        memset(cmd->buf, 0, (size_t)len);
        nvme_copy_window(cmd->buf, (uint32_t)len, 0, page, 0,
                         (uint32_t)(sizeof(*h) + n * sizeof(*e)));
}

enum nvme_parse_result nvme_resv_report_parse(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint64_t len = ((uint64_t)nvme_cdw(cmd, 10) + 1) * 4; /* NUMD, 0's based */
        if (!(nvme_cdw(cmd, 11) & 1))
                /* EDS = 0 asks for 64-bit host identifiers; ours are 128-bit. */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_HOSTID_INCONSISTENT,
                                   NVME_SQE_OFF_CDW(11), 0);
        if (len > CORE_MAX_TRANSFER_BYTES)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10));
        cmd->ns = nvme_ns_lookup(ctrl->subsys, nvme_nsid(cmd));
        if (!cmd->ns)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
        if (!nvme_xfer(cmd, (uint32_t)len, false))
                return NVME_PARSE_DONE;

        /*
         * Reservations kept with shared storage (rbd, a shared file): report
         * the stored state, not our copy's, reloaded on a core worker
         * (nvme_resv_report_exec) so the reactor never waits on the storage.
         */
        if (core_ns_pr_shared(cmd->ns))
                return NVME_PARSE_EXEC;
        report_fill(cmd);
        return NVME_PARSE_DONE;
}

struct report_job {
        struct core_pr_refresh_job j;
        struct nvme_cmd *cmd;
};

static void report_job_done(struct core_pr_refresh_job *j)
{
        struct report_job *rj = (struct report_job *)j;
        struct nvme_cmd *cmd = rj->cmd;
        free(rj);
        report_fill(cmd);
        nvme_cmd_complete(cmd);
}

void nvme_resv_report_exec(struct nvme_cmd *cmd)
{
        struct report_job *rj = calloc(1, sizeof(*rj));
        if (!rj) {
                nvme_status_from_core(cmd, CORE_E_NO_RESOURCES);
                cmd->data_len = 0;
                nvme_cmd_complete_deferred(cmd);
                return;
        }
        rj->cmd = cmd;
        rj->j.ns = cmd->ns;
        rj->j.reactor = cmd->reactor;
        rj->j.cb = report_job_done;
        core_ns_pr_refresh_submit(&rj->j);
}

/* ---- Notifications: log page 80h, features 82h/83h ---- */

void nvme_resv_notify(struct nvme_ctrl *ctrl, uint32_t nsid, unsigned pr_events)
{
        static const struct {
                unsigned ev;
                uint8_t type, mask;
        } map[] = {
            {CORE_PR_EV_REGS_PREEMPTED, NVME_RESV_LOG_REG_PREEMPTED, NVME_RESV_MASK_REGPRE},
            {CORE_PR_EV_RES_RELEASED, NVME_RESV_LOG_RESV_RELEASED, NVME_RESV_MASK_RESREL},
            {CORE_PR_EV_RES_PREEMPTED, NVME_RESV_LOG_RESV_PREEMPTED, NVME_RESV_MASK_RESPRE},
        };
        bool raise = false;
        if (nsid == 0 || nsid > NVME_MAX_NSID)
                return;
        pthread_mutex_lock(&ctrl->lock);
        for (unsigned i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
                if (!(pr_events & map[i].ev) || (ctrl->resv_mask[nsid] & map[i].mask))
                        continue;
                /* The count never reads 0 (an empty page) and skips what was lost. */
                if (++ctrl->resv_count == 0)
                        ctrl->resv_count = 1;
                if (ctrl->resv_n == NVME_RESV_LOG_MAX) {
                        ctrl->resv_lost++;
                        continue;
                }
                struct nvme_resv_notify_log *l =
                    &ctrl->resv_log[(ctrl->resv_head + ctrl->resv_n) % NVME_RESV_LOG_MAX];
                memset(l, 0, sizeof(*l));
                put_le64(&l->count, ctrl->resv_count);
                l->type = map[i].type;
                put_le32(&l->nsid, nsid);
                ctrl->resv_n++;
                raise = true;
        }
        pthread_mutex_unlock(&ctrl->lock);
        if (raise)
                nvme_ctrl_raise(ctrl, NVME_EVT_RESV, nsid);
}

void nvme_resv_log(struct nvme_ctrl *ctrl, struct nvme_resv_notify_log *out)
{
        bool more;
        memset(out, 0, sizeof(*out));
        pthread_mutex_lock(&ctrl->lock);
        if (ctrl->resv_n) {
                *out = ctrl->resv_log[ctrl->resv_head];
                ctrl->resv_head = (ctrl->resv_head + 1) % NVME_RESV_LOG_MAX;
                ctrl->resv_n--;
                out->nalp = (uint8_t)(ctrl->resv_n > 255 ? 255 : ctrl->resv_n);
        }
        more = ctrl->resv_n > 0;
        if (more) /* delivered again once the host has read this one (RAE = 0) */
                ctrl->aen_pending |= NVME_EVT_RESV;
        pthread_mutex_unlock(&ctrl->lock);
}

/* Namespace-specific features: NSID names an attached namespace (or all, for Set). */
static bool feature_nsid(struct nvme_cmd *cmd, bool all_ok)
{
        uint32_t nsid = nvme_nsid(cmd);
        if (all_ok && nsid == 0xffffffffu)
                return true;
        if (!nvme_ns_active(cmd->queue->ctrl->subsys, nsid)) {
                nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
                return false;
        }
        return true;
}

enum nvme_parse_result nvme_resv_get_feature(struct nvme_cmd *cmd, uint8_t fid, uint8_t sel)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        if (!nvme_xfer(cmd, 0, false))
                return NVME_PARSE_DONE;
        if (sel == NVME_SEL_SUPPORTED) {
                nvme_cqe_dw0(cmd, NVME_FEAT_CAP_CHANGEABLE | NVME_FEAT_CAP_NS);
                return NVME_PARSE_DONE;
        }
        if (!feature_nsid(cmd, false))
                return NVME_PARSE_DONE;
        uint32_t nsid = nvme_nsid(cmd), dw0 = 0;
        if (sel == NVME_SEL_CURRENT && fid == NVME_FEAT_RESV_MASK) {
                pthread_mutex_lock(&ctrl->lock);
                dw0 = ctrl->resv_mask[nsid];
                pthread_mutex_unlock(&ctrl->lock);
        } else if (sel == NVME_SEL_CURRENT || sel == NVME_SEL_SAVED) {
                /* PTPL is the namespace's persisted APTPL: current and saved agree. */
                if (fid == NVME_FEAT_RESV_PERSIST) {
                        struct core_ns *ns = nvme_ns_lookup(ctrl->subsys, nsid);
                        if (ns) {
                                pthread_mutex_lock(&ns->lock);
                                dw0 = ns->pr.aptpl;
                                pthread_mutex_unlock(&ns->lock);
                                core_ns_put(ns);
                        }
                }
        }
        nvme_cqe_dw0(cmd, dw0);
        return NVME_PARSE_DONE;
}

enum nvme_parse_result nvme_resv_set_feature(struct nvme_cmd *cmd, uint8_t fid)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw11 = nvme_cdw(cmd, 11), nsid = nvme_nsid(cmd);
        uint32_t valid = fid == NVME_FEAT_RESV_MASK
                             ? NVME_RESV_MASK_REGPRE | NVME_RESV_MASK_RESREL | NVME_RESV_MASK_RESPRE
                             : 1u;
        if (cdw11 & ~valid)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11));
        if (!feature_nsid(cmd, true))
                return NVME_PARSE_DONE;
        for (uint32_t i = 1; i <= NVME_MAX_NSID; i++) {
                if (nsid != 0xffffffffu && i != nsid)
                        continue;
                struct core_ns *ns = nvme_ns_lookup(ctrl->subsys, i);
                if (!ns)
                        continue;
                if (fid == NVME_FEAT_RESV_MASK) {
                        pthread_mutex_lock(&ctrl->lock);
                        ctrl->resv_mask[i] = (uint8_t)cdw11;
                        pthread_mutex_unlock(&ctrl->lock);
                } else if (core_ns_pr_set_aptpl(ns, cdw11 & 1) < 0) {
                        core_ns_put(ns);
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INTERNAL, NVME_LOC_NONE,
                                           -1);
                }
                core_ns_put(ns);
        }
        return NVME_PARSE_DONE;
}
