/*
 * Sanitize (NVMe Base 2.0 5.24, sanitize operations 8.21) and the Sanitize
 * Status log page (5.16.1.25).  An NVMe sanitize covers the NVM subsystem:
 * every namespace attached to the controller's subsystem.  Each runs as
 * the block core's sanitize operation (core/sanitize.c, the same one SCSI
 * SANITIZE starts), so a sanitize started over either protocol is seen by
 * both: I/O gets Sanitize In Progress (core_req_submit), admin commands
 * the opcode table does not mark NVME_OPF_SANITIZE_OK get it here
 * (8.21.1: only Identify, Get Log Page, Get/Set Features, Abort, Keep
 * Alive, AER and Fabrics commands are processed), the log reports the
 * progress, and the end raises the Sanitize Operation Completed event
 * (admin.c, from the core's event).
 *
 * Supported: Block Erase (deallocates every block; with No-Deallocate
 * After Sanitize it writes zeroes instead), Overwrite (OWPASS passes of
 * the 32-bit OVRPAT, inverted between passes with OIPBP), Exit Failure
 * Mode, and Crypto Erase (a new data key, core/crypt.h) when every
 * namespace of the subsystem is encrypted at rest (SANICAP.CES follows);
 * not media verification (EMVS).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/internal.h"

struct ns_set {
        struct core_ns *ns[NVME_MAX_NSID];
        unsigned n;
};

/* Every namespace attached to s, with a reference each. */
static void ns_collect(struct nvme_subsys *s, struct ns_set *set)
{
        set->n = 0;
        for (uint32_t nsid = 1; nsid <= NVME_MAX_NSID; nsid++) {
                struct core_ns *ns = nvme_ns_lookup(s, nsid);
                if (ns)
                        set->ns[set->n++] = ns;
        }
}

static void ns_release(struct ns_set *set)
{
        for (unsigned i = 0; i < set->n; i++)
                core_ns_put(set->ns[i]);
        set->n = 0;
}

bool nvme_subsys_crypto_erasable(struct nvme_subsys *s)
{
        unsigned n = 0;
        bool all = true;
        for (uint32_t nsid = 1; nsid <= NVME_MAX_NSID; nsid++) {
                struct core_ns *ns = nvme_ns_lookup(s, nsid);
                if (!ns)
                        continue;
                n++;
                all = all && ns->crypt;
                core_ns_put(ns);
        }
        return n && all;
}

bool nvme_subsys_sanitizing(struct nvme_subsys *s)
{
        for (uint32_t nsid = 1; nsid <= NVME_MAX_NSID; nsid++) {
                struct core_ns *ns = nvme_ns_lookup(s, nsid);
                if (!ns)
                        continue;
                bool running = core_ns_sanitize_state(ns) == CORE_SAN_RUNNING;
                core_ns_put(ns);
                if (running)
                        return true;
        }
        return false;
}

static const uint32_t san_rsvd = 0xfffffc00u; /* CDW10 bits 31:10 (EMVS: not supported) */

/* Parse: every field, and whether the subsystem's namespaces allow it now. */
enum nvme_parse_result nvme_sanitize_parse(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw10 = nvme_cdw(cmd, 10);
        uint8_t sanact = cdw10 & 7;
        struct ns_set *set;
        enum core_status st = CORE_OK;

        if (cdw10 & san_rsvd)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10) + 1);
        if (sanact < NVME_SANACT_EXIT_FAILURE || sanact > NVME_SANACT_CRYPTO_ERASE ||
            (sanact == NVME_SANACT_CRYPTO_ERASE && !nvme_subsys_crypto_erasable(ctrl->subsys)))
                /* reserved, or Crypto Erase where SANICAP.CES = 0 */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(10), 0);
        set = malloc(sizeof(*set));
        if (!set)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INTERNAL, NVME_LOC_NONE, -1);
        ns_collect(ctrl->subsys, set);
        for (unsigned i = 0; i < set->n && st == CORE_OK; i++) {
                if (core_ns_sanitize_state(set->ns[i]) == CORE_SAN_RUNNING)
                        st = CORE_E_SANITIZE_IN_PROGRESS;
                else if (sanact != NVME_SANACT_EXIT_FAILURE)
                        /* 8.14: a write-protected namespace refuses a sanitize. */
                        st = core_ns_check(set->ns[i], CORE_CHK_WRITABLE | CORE_CHK_STARTED);
        }
        ns_release(set);
        free(set);
        if (st != CORE_OK) {
                nvme_status_from_core(cmd, st);
                return NVME_PARSE_DONE;
        }
        return NVME_PARSE_EXEC;
}

/* Execute: start the operation on every namespace, or leave failure mode. */
void nvme_sanitize_exec(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue ? cmd->queue->ctrl : NULL;
        uint32_t cdw10 = nvme_cdw(cmd, 10), ovrpat = nvme_cdw(cmd, 11);
        uint8_t sanact = cdw10 & 7, owpass = (cdw10 >> NVME_SAN_OWPASS_SHIFT) & 0xf;
        uint8_t pattern[4];
        struct core_sanitize_params p = {
            .action = sanact == NVME_SANACT_OVERWRITE      ? CORE_SANACT_OVERWRITE
                      : sanact == NVME_SANACT_CRYPTO_ERASE ? CORE_SANACT_CRYPTO_ERASE
                                                           : CORE_SANACT_BLOCK_ERASE,
            .ause = (cdw10 & NVME_SAN_AUSE) != 0,
            .no_dealloc = (cdw10 & NVME_SAN_NDAS) != 0,
        };
        struct ns_set *set = malloc(sizeof(*set));
        enum core_status st = CORE_OK;
        int rc = 0;

        if (!ctrl || !set) {
                free(set);
                nvme_status_from_core(cmd, ctrl ? CORE_E_NO_RESOURCES : CORE_E_ABORTED);
                nvme_cmd_complete_deferred(cmd);
                return;
        }
        if (p.action == CORE_SANACT_OVERWRITE) {
                p.passes = owpass ? owpass : 16;
                p.invert = (cdw10 & NVME_SAN_OIPBP) != 0;
                slate_put_le(pattern, 4, ovrpat);
                p.pattern = pattern;
                p.pattern_len = 4;
        }
        ns_collect(ctrl->subsys, set);
        if (sanact == NVME_SANACT_EXIT_FAILURE) {
                /* Restricted completion mode (AUSE was 0): only a new sanitize leaves it. */
                for (unsigned i = 0; i < set->n; i++)
                        if (core_ns_sanitize_exit_failure(set->ns[i], ctrl) < 0)
                                st = CORE_E_SANITIZE_FAILED;
        } else {
                for (unsigned i = 0; i < set->n && rc == 0; i++)
                        rc = core_sanitize_start(set->ns[i], &p, ctrl, cmd->reactor, NULL, NULL);
                if (rc == -EBUSY) /* an iSCSI host got there first */
                        st = CORE_E_SANITIZE_IN_PROGRESS;
                else if (rc < 0)
                        st = CORE_E_NO_RESOURCES;
        }
        ns_release(set);
        free(set);
        if (st != CORE_OK)
                nvme_status_from_core(cmd, st);
        nvme_cmd_complete_deferred(cmd);
}

static uint32_t max_est(uint32_t a, uint32_t b)
{
        if (a == NVME_SANITIZE_NO_TIME || b == NVME_SANITIZE_NO_TIME)
                return NVME_SANITIZE_NO_TIME;
        return a > b ? a : b;
}

void nvme_sanitize_log(struct nvme_ctrl *ctrl, struct nvme_sanitize_log *log)
{
        static const uint8_t sstat[] = {
            [CORE_SAN_NEVER] = NVME_SSTAT_NEVER,
            [CORE_SAN_DONE] = NVME_SSTAT_DONE,
            [CORE_SAN_RUNNING] = NVME_SSTAT_IN_PROGRESS,
            [CORE_SAN_FAILED] = NVME_SSTAT_FAILED,
        };
        /* Which namespace speaks for the subsystem: one in progress, else failed, else done. */
        static const int rank[] = {[CORE_SAN_NEVER] = 0,
                                   [CORE_SAN_DONE] = 1,
                                   [CORE_SAN_FAILED] = 2,
                                   [CORE_SAN_RUNNING] = 3};
        struct core_sanitize_info best = {0}, in;
        uint32_t eto = 0, eto1 = 0, etbe = 0, etce = 0;
        bool any = false, untouched = true;
        uint16_t sprog = 0xffff;

        memset(log, 0, sizeof(*log));
        for (uint32_t nsid = 1; nsid <= NVME_MAX_NSID; nsid++) {
                struct core_ns *ns = nvme_ns_lookup(ctrl->subsys, nsid);
                if (!ns)
                        continue;
                core_sanitize_info(ns, &in);
                unsigned owp = in.p.action == CORE_SANACT_OVERWRITE ? in.p.passes : 1;
                eto = max_est(eto, core_sanitize_estimate_s(ns, CORE_SANACT_OVERWRITE, owp));
                eto1 = max_est(eto1, core_sanitize_estimate_s(ns, CORE_SANACT_OVERWRITE, 1));
                etbe = max_est(etbe, core_sanitize_estimate_s(ns, CORE_SANACT_BLOCK_ERASE, 1));
                etce = max_est(etce, core_sanitize_estimate_s(ns, CORE_SANACT_CRYPTO_ERASE, 1));
                core_ns_put(ns);
                if (in.state == CORE_SAN_RUNNING && in.progress < sprog)
                        sprog = in.progress; /* the slowest one */
                untouched &= in.untouched;
                if (!any || rank[in.state] > rank[best.state])
                        best = in;
                any = true;
        }
        if (!any)
                eto = eto1 = etbe = etce = NVME_SANITIZE_NO_TIME;
        uint16_t ss = sstat[best.state];
        if (best.p.action == CORE_SANACT_OVERWRITE)
                ss |= (uint16_t)((best.passes_done & 0x1f) << NVME_SSTAT_OPC_SHIFT);
        if (any && untouched)
                ss |= NVME_SSTAT_GDE;
        uint32_t dw10 = 0;
        if (best.p.action == CORE_SANACT_BLOCK_ERASE)
                dw10 = NVME_SANACT_BLOCK_ERASE;
        else if (best.p.action == CORE_SANACT_CRYPTO_ERASE)
                dw10 = NVME_SANACT_CRYPTO_ERASE;
        else if (best.p.action == CORE_SANACT_OVERWRITE)
                dw10 = NVME_SANACT_OVERWRITE | ((best.p.passes & 0xfu) << NVME_SAN_OWPASS_SHIFT) |
                       (best.p.invert ? NVME_SAN_OIPBP : 0);
        if (dw10) {
                dw10 |= best.p.ause ? NVME_SAN_AUSE : 0;
                dw10 |= best.p.no_dealloc ? NVME_SAN_NDAS : 0;
        }
        put_le16(&log->sprog, best.state == CORE_SAN_RUNNING ? sprog : 0xffff);
        put_le16(&log->sstat, ss);
        put_le32(&log->scdw10, dw10);
        put_le32(&log->eto, eto);
        put_le32(&log->etbe, etbe);
        put_le32(&log->etce, etce);
        put_le32(&log->etond, eto);
        put_le32(&log->etbend, eto1); /* without deallocation, zeroes are written once */
        /* Without deallocation a crypto erase is the key change alone. */
        put_le32(&log->etcend, any && etce != NVME_SANITIZE_NO_TIME ? 1 : NVME_SANITIZE_NO_TIME);
}
