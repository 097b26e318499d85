/*
 * Get Features / Set Features (NVMe Base 2.0 5.15, 5.27): Arbitration,
 * Power Management, Temperature Threshold, Error Recovery, Volatile Write
 * Cache (the namespaces' shared wce, the same bit SCSI's WCE shows),
 * Number of Queues, Asynchronous Event Configuration, Keep Alive Timer,
 * Host Behavior Support, Host Identifier, Namespace Write Protection
 * Config (84h, 5.27.1.28 and 8.12: the core's write-protect reasons
 * SOFTWARE, POWER_CYCLE and PERMANENT, so SCSI hosts see the same state),
 * and the namespace-specific Reservation Notification Mask and Reservation
 * Persistence (resv.c), FDP (1Dh) and FDP Events (1Eh) (fdp.c).  Nothing
 * else is saveable; SEL
 * current/default/saved/supported-capabilities are all answered.
 */
#include <string.h>

#include "nvme/internal.h"

struct feat {
        bool io, disc; /* available on I/O / discovery controllers */
        bool changeable;
        bool ns; /* namespace specific: NSID names one active namespace */
};

static const struct feat feats[256] = {
    [NVME_FEAT_ARBITRATION] = {true, false, true},
    [NVME_FEAT_POWER_MGMT] = {true, false, true},
    [NVME_FEAT_TEMP_THRESH] = {true, false, true},
    [NVME_FEAT_ERR_RECOVERY] = {true, false, true},
    [NVME_FEAT_VOLATILE_WC] = {true, false, true},
    [NVME_FEAT_NUM_QUEUES] = {true, false, true},
    [NVME_FEAT_ASYNC_EVENT] = {true, true, true},
    [NVME_FEAT_KATO] = {true, true, true},
    [NVME_FEAT_WRITE_ATOMIC] = {true, false, true},
    [NVME_FEAT_HOST_BEHAVIOR] = {true, false, true},
    [NVME_FEAT_FDP] = {true, false, true},              /* per endurance group (fdp.c) */
    [NVME_FEAT_FDP_EVENTS] = {true, false, true, true}, /* per namespace and handle (fdp.c) */
    [NVME_FEAT_HOST_ID] = {true, false, false},
    [NVME_FEAT_WRITE_PROTECT] = {true, false, true, true},
    [NVME_FEAT_RESV_MASK] = {true, false, true, true},
    [NVME_FEAT_RESV_PERSIST] = {true, false, true, true},
};

static bool feat_ok(struct nvme_ctrl *ctrl, uint8_t fid)
{
        return ctrl->subsys->discovery ? feats[fid].disc : feats[fid].io;
}

static uint32_t aec_mask(struct nvme_ctrl *ctrl)
{
        return ctrl->subsys->discovery
                   ? NVME_AEN_CFG_DISC_CHANGE
                   : NVME_AEN_CFG_NS_ATTR | NVME_AEN_CFG_ANA_CHANGE | NVME_AEN_CFG_LBA_STATUS;
}

/* The write cache setting of the first attached namespace (all are set together). */
static bool vwc_current(struct nvme_subsys *s, uint32_t nsid)
{
        struct core_ns *ns = nvme_ns_lookup(s, nsid);
        for (uint32_t i = 1; !ns && i <= NVME_MAX_NSID; i++)
                ns = nvme_ns_lookup(s, i);
        if (!ns)
                return true;
        bool wce = atomic_load(&ns->wce);
        core_ns_put(ns);
        return wce;
}

/* A namespace-specific feature's NSID: one active namespace (cmd->ns), no broadcast. */
static bool feat_ns(struct nvme_cmd *cmd)
{
        uint32_t nsid = nvme_nsid(cmd);
        if (nsid == 0 || nsid == 0xffffffffu) {
                nvme_invalid_field(cmd, offsetof(struct nvme_sqe, nsid));
                return false;
        }
        cmd->ns = nvme_ns_lookup(cmd->queue->ctrl->subsys, nsid);
        if (!cmd->ns) {
                nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS,
                            offsetof(struct nvme_sqe, nsid), -1);
                return false;
        }
        return true;
}

/* Feature 84h's state from the core's reasons: the strongest host-settable one. */
static uint32_t wps_of(uint32_t wp)
{
        if (wp & CORE_WP_PERMANENT)
                return NVME_WPS_PERMANENT;
        if (wp & CORE_WP_POWER_CYCLE)
                return NVME_WPS_UNTIL_POWER_CYC;
        return (wp & CORE_WP_SOFTWARE) ? NVME_WPS_WRITE_PROTECT : NVME_WPS_NONE;
}

/*
 * Set Features 84h (Base 2.0 5.27.1.28, 8.12): No Write Protect and Write
 * Protect toggle the software reason (the one SCSI's SWP shows); Until
 * Power Cycle lasts until slated restarts; Permanent is persisted and
 * final.  Leaving either of those two states is Feature Not Changeable;
 * asking for the state the namespace is already in changes nothing.  A
 * management (CONFIG) reason is outside this feature: NSATTR shows it,
 * WPS does not.  The core tells the other controllers and the SCSI hosts.
 */
static enum nvme_parse_result set_write_protect(struct nvme_cmd *cmd, uint32_t cdw11)
{
        static const uint32_t reason[] = {
            [NVME_WPS_NONE] = CORE_WP_SOFTWARE,
            [NVME_WPS_WRITE_PROTECT] = CORE_WP_SOFTWARE,
            [NVME_WPS_UNTIL_POWER_CYC] = CORE_WP_POWER_CYCLE,
            [NVME_WPS_PERMANENT] = CORE_WP_PERMANENT,
        };
        uint32_t wps = cdw11 & NVME_WPS_MASK;
        if (cdw11 & ~NVME_WPS_MASK) /* reserved */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(11), 3);
        if (wps > NVME_WPS_PERMANENT)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(11), 0);
        if (!feat_ns(cmd))
                return NVME_PARSE_DONE;
        uint32_t cur = wps_of(core_ns_wp(cmd->ns));
        if (wps == cur)
                return NVME_PARSE_DONE;
        if (cur == NVME_WPS_UNTIL_POWER_CYC || cur == NVME_WPS_PERMANENT)
                return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_FEATURE_NOT_CHANGEABLE,
                                   NVME_SQE_OFF_CDW(11), 0);
        if (core_ns_set_wp(cmd->ns, reason[wps], wps != NVME_WPS_NONE, cmd->queue->ctrl))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INTERNAL, NVME_LOC_NONE, -1);
        return NVME_PARSE_DONE;
}

enum nvme_parse_result nvme_get_features_parse(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw10 = nvme_cdw(cmd, 10), cdw11 = nvme_cdw(cmd, 11);
        uint8_t fid = cdw10 & 0xff, sel = (cdw10 >> 8) & 7;
        uint32_t dw0 = 0, len = 0;

        if (!feat_ok(ctrl, fid))
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10));
        if (sel > NVME_SEL_SUPPORTED)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(10) + 1, 0);
        if (fid == NVME_FEAT_RESV_MASK || fid == NVME_FEAT_RESV_PERSIST)
                return nvme_resv_get_feature(cmd, fid, sel); /* namespace-specific (resv.c) */
        if (fid == NVME_FEAT_FDP || fid == NVME_FEAT_FDP_EVENTS)
                return nvme_fdp_get_feature(cmd, fid, sel);
        if (fid == NVME_FEAT_HOST_BEHAVIOR && sel != NVME_SEL_SUPPORTED)
                len = sizeof(struct nvme_host_behavior);
        if (fid == NVME_FEAT_HOST_ID && sel != NVME_SEL_SUPPORTED) {
                if (!(cdw11 & 1)) /* EXHID: fabrics use the 128-bit identifier */
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11));
                len = 16;
        }
        if (!nvme_xfer(cmd, len, false))
                return NVME_PARSE_DONE;
        if (sel == NVME_SEL_SUPPORTED) {
                nvme_cqe_dw0(cmd, (feats[fid].changeable ? NVME_FEAT_CAP_CHANGEABLE : 0) |
                                      (feats[fid].ns ? NVME_FEAT_CAP_NS : 0));
                return NVME_PARSE_DONE;
        }
        bool cur = sel == NVME_SEL_CURRENT;
        if (fid == NVME_FEAT_WRITE_PROTECT) {
                if (feat_ns(cmd))
                        nvme_cqe_dw0(cmd, cur ? wps_of(core_ns_wp(cmd->ns)) : NVME_WPS_NONE);
                return NVME_PARSE_DONE;
        }

        pthread_mutex_lock(&ctrl->lock);
        switch (fid) {
        case NVME_FEAT_ARBITRATION:
                dw0 = cur ? ctrl->feat_arb : 0;
                break;
        case NVME_FEAT_POWER_MGMT:
                dw0 = cur ? ctrl->feat_pm : 0;
                break;
        case NVME_FEAT_TEMP_THRESH: {
                uint32_t thsel = (cdw11 >> 20) & 3;
                if (thsel > 1) {
                        pthread_mutex_unlock(&ctrl->lock);
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11) + 2);
                }
                if (thsel == 0)
                        dw0 = cur ? ctrl->temp_over : NVME_WCTEMP;
                else
                        dw0 = cur ? ctrl->temp_under : 0;
                dw0 |= cdw11 & (0x3fu << 16);
                break;
        }
        case NVME_FEAT_ERR_RECOVERY:
                dw0 = cur ? ctrl->feat_err_rec : 0;
                break;
        case NVME_FEAT_WRITE_ATOMIC:
                dw0 = cur ? ctrl->feat_wan : 0;
                break;
        case NVME_FEAT_VOLATILE_WC:
                dw0 = cur ? vwc_current(ctrl->subsys, nvme_nsid(cmd)) : 1;
                break;
        case NVME_FEAT_NUM_QUEUES: {
                uint32_t n = (cur ? ctrl->nr_io_queues : NVME_MAX_IO_QUEUES) - 1u;
                dw0 = n | (n << 16);
                break;
        }
        case NVME_FEAT_ASYNC_EVENT:
                dw0 = cur ? ctrl->aec : 0;
                break;
        case NVME_FEAT_KATO:
                dw0 = cur ? ctrl->kato_ms : 0;
                break;
        case NVME_FEAT_HOST_BEHAVIOR:
                if (cur) {
                        memcpy(cmd->buf, &ctrl->hb, sizeof(ctrl->hb));
                } else {
                        /* Default: CDFE as copy_cross_namespace sets it (subsystem.c). */
                        memset(cmd->buf, 0, sizeof(ctrl->hb));
                        put_le16(&((struct nvme_host_behavior *)cmd->buf)->cdfe,
                                 ctrl->copy_xns ? 0x0c : 0);
                }
                break;
        case NVME_FEAT_HOST_ID:
                memcpy(cmd->buf, ctrl->hostid, 16);
                break;
        }
        pthread_mutex_unlock(&ctrl->lock);
        nvme_cqe_dw0(cmd, dw0);
        return NVME_PARSE_DONE;
}

/* The cache is the namespaces' (the same bit SCSI's WCE shows): the core tells the others. */
static void set_vwc(struct nvme_ctrl *ctrl, bool wce)
{
        for (uint32_t i = 1; i <= NVME_MAX_NSID; i++) {
                struct core_ns *ns = nvme_ns_lookup(ctrl->subsys, i);
                if (ns) {
                        core_ns_set_wce(ns, wce, ctrl);
                        core_ns_put(ns);
                }
        }
}

enum nvme_parse_result nvme_set_features_parse(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw10 = nvme_cdw(cmd, 10), cdw11 = nvme_cdw(cmd, 11);
        uint8_t fid = cdw10 & 0xff;
        enum nvme_parse_result r = NVME_PARSE_DONE;
        bool start_ka = false;

        if (!feat_ok(ctrl, fid))
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10));
        /* FDP's state is the configuration's: asking to save it is asking for what is kept. */
        if (fid == NVME_FEAT_FDP || fid == NVME_FEAT_FDP_EVENTS)
                return nvme_fdp_set_feature(cmd, fid);
        if (cdw10 & (1u << 31))
                return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_FEATURE_NOT_SAVEABLE,
                                   NVME_SQE_OFF_CDW(10) + 3, 7);
        if (!feats[fid].changeable)
                return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_FEATURE_NOT_CHANGEABLE,
                                   NVME_SQE_OFF_CDW(10), -1);
        if (!nvme_xfer(cmd, fid == NVME_FEAT_HOST_BEHAVIOR ? sizeof(struct nvme_host_behavior) : 0,
                       true))
                return NVME_PARSE_DONE;
        if (fid == NVME_FEAT_RESV_MASK || fid == NVME_FEAT_RESV_PERSIST)
                return nvme_resv_set_feature(cmd, fid); /* namespace-specific (resv.c) */
        if (fid == NVME_FEAT_WRITE_PROTECT)
                return set_write_protect(cmd, cdw11);

        pthread_mutex_lock(&ctrl->lock);
        switch (fid) {
        case NVME_FEAT_ARBITRATION:
                ctrl->feat_arb = cdw11;
                break;
        case NVME_FEAT_POWER_MGMT:
                if (cdw11 & 0x1f) { /* only power state 0 exists (NPSS = 0) */
                        pthread_mutex_unlock(&ctrl->lock);
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11));
                }
                ctrl->feat_pm = cdw11 & 0xff;
                break;
        case NVME_FEAT_TEMP_THRESH: {
                uint32_t tmpsel = (cdw11 >> 16) & 0xf, thsel = (cdw11 >> 20) & 3;
                if (thsel > 1 || (tmpsel > 1 && tmpsel != 0xf)) {
                        pthread_mutex_unlock(&ctrl->lock);
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11) + 2);
                }
                if (thsel == 0)
                        ctrl->temp_over = cdw11 & 0xffff;
                else
                        ctrl->temp_under = cdw11 & 0xffff;
                break;
        }
        case NVME_FEAT_ERR_RECOVERY:
                if (cdw11 & (1u << 16)) { /* DULBE: deallocated/unwritten errors unsupported */
                        pthread_mutex_unlock(&ctrl->lock);
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                           NVME_SQE_OFF_CDW(11) + 2, 0);
                }
                ctrl->feat_err_rec = cdw11 & 0xffff;
                break;
        case NVME_FEAT_WRITE_ATOMIC:
                /*
                 * DN (bit 0): the host needs only AWUPF/NAWUPF.  Ours equal
                 * AWUN/NAWUN (every atomic write survives power loss), so
                 * the bit is kept and reported and changes nothing.
                 */
                ctrl->feat_wan = cdw11 & 1;
                break;
        case NVME_FEAT_VOLATILE_WC:
                pthread_mutex_unlock(&ctrl->lock);
                set_vwc(ctrl, cdw11 & 1);
                return NVME_PARSE_DONE;
        case NVME_FEAT_NUM_QUEUES: {
                uint32_t nsq = cdw11 & 0xffff, ncq = cdw11 >> 16;
                bool io_queues = false;
                for (uint16_t i = 1; i <= ctrl->max_qid; i++)
                        io_queues |= ctrl->queues[i] != NULL;
                if (nsq == 0xffff || ncq == 0xffff) {
                        pthread_mutex_unlock(&ctrl->lock);
                        return nvme_invalid_field(cmd,
                                                  NVME_SQE_OFF_CDW(11) + (nsq == 0xffff ? 0 : 2));
                }
                if (io_queues) {
                        pthread_mutex_unlock(&ctrl->lock);
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR,
                                           NVME_SQE_OFF_CDW(10), -1);
                }
                uint32_t n = (nsq > ncq ? nsq : ncq) + 1;
                if (n > NVME_MAX_IO_QUEUES)
                        n = NVME_MAX_IO_QUEUES;
                ctrl->nr_io_queues = (uint16_t)n;
                nvme_cqe_dw0(cmd, (n - 1) | ((n - 1) << 16));
                break;
        }
        case NVME_FEAT_ASYNC_EVENT:
                ctrl->aec = cdw11 & aec_mask(ctrl);
                break;
        case NVME_FEAT_KATO:
                if (cdw11 == 0 && ctrl->subsys->discovery)
                        cdw11 = NVME_DEFAULT_KATO_MS;
                ctrl->kato_ms = cdw11;
                start_ka = cdw11 != 0;
                break;
        case NVME_FEAT_HOST_BEHAVIOR:
                r = NVME_PARSE_EXEC; /* the 512 bytes arrive before exec */
                break;
        }
        pthread_mutex_unlock(&ctrl->lock);
        if (start_ka)
                nvme_ctrl_ka_start(ctrl);
        return r;
}

void nvme_set_features_exec(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        if ((nvme_cdw(cmd, 10) & 0xff) == NVME_FEAT_FDP_EVENTS) {
                nvme_fdp_set_events_exec(cmd);
                return;
        }
        const struct nvme_host_behavior *hb = (const struct nvme_host_behavior *)cmd->buf;
        /* CDFE: only Copy formats 2h and 3h need enabling (copy.c). */
        uint16_t cdfe = get_le16(&hb->cdfe);
        if (hb->acre > 1 || hb->etdas > 1 || hb->lbafee > 1 || (cdfe & ~0xcu)) {
                nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, NVME_LOC_NONE, -1);
        } else {
                /* copy_cross_namespace keeps 2h/3h on whatever the host writes: Linux 6.9+
                 * sends Host Behavior Support at connect (ACRE/LBAFEE, because CTRATT ELBAS
                 * is set) with CDFE 0, and gives user space no way to send it again. */
                if (ctrl->copy_xns)
                        cdfe |= 0x0c;
                pthread_mutex_lock(&ctrl->lock);
                ctrl->hb = *hb;
                put_le16(&ctrl->hb.cdfe, cdfe);
                atomic_store_explicit(&ctrl->copy_fmts, cdfe, memory_order_relaxed);
                pthread_mutex_unlock(&ctrl->lock);
        }
        nvme_cmd_complete_deferred(cmd);
}
