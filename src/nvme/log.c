/*
 * Get Log Page (NVMe Base 2.0 5.16): 01h Error Information, 02h SMART /
 * Health Information (controller-wide, or per namespace: LPA bit 0), 03h
 * Firmware Slot Information, 04h Changed Namespace List, 05h Commands
 * Supported and Effects (from the opcode tables), 06h Device Self-test
 * (selftest.c), 09h Endurance Group Information and 20h..23h Flexible Data
 * Placement (fdp.c, LSI = endurance group), 0Dh Persistent Event (pel.c),
 * 0Eh LBA Status Information (lbastatus.c), 80h Reservation Notification
 * (resv.c), 81h Sanitize Status (sanitize.c), C0h the vendor-specific
 * provisioning status (the page of the provisioning threshold event,
 * admin.c), and 70h Discovery on discovery controllers.  NUMDL/NUMDU give
 * the length, LPOL/LPOU a dword-aligned offset (LPA bit 2); bytes past the
 * end of a log read as zeroes; 0Ch Asymmetric Namespace Access (ana.c).
 * RAE = 0 on 04h/0Ch/70h/80h/81h/C0h unmasks the
 * matching event.
 */
#include <stdlib.h>
#include <string.h>

#include "core/ana.h"
#include "core/media.h"
#include "nvme/internal.h"

static void put_u128(uint8_t *p, uint64_t v)
{
        memset(p, 0, 16);
        slate_put_le(p, 8, v);
}

/*
 * LPA bit 0: the SMART / Health log per namespace.  With an NSID of an
 * active namespace, Data Units Read/Written and Host Read/Write Commands
 * are that namespace's, counted by the core for every command it executed
 * on it (whichever host and protocol sent it: the namespace is shared), and
 * Media and Data Integrity Errors its medium's (core/media.h) plus its
 * failed backend reads and writes; the other fields are the controller's
 * (temperature, spare, power, errors).
 */
static void smart_log_ns(struct core_ns *ns, struct nvme_smart_log *l)
{
        struct core_stats_sum sum;
        struct core_media_stats ms;
        core_stats_sum(&ns->stats, &sum);
        core_media_get_stats(ns, &ms);
        put_u128(l->data_units_read, (sum.bytes[CORE_OPC_READ] / 512 + 999) / 1000);
        put_u128(l->data_units_written, (sum.bytes[CORE_OPC_WRITE] / 512 + 999) / 1000);
        put_u128(l->host_reads, sum.ops[CORE_OPC_READ]);
        put_u128(l->host_writes, sum.ops[CORE_OPC_WRITE]);
        put_u128(l->media_errors, ms.media_errors + sum.errors[CORE_E_MEDIUM_ERROR] +
                                      sum.errors[CORE_E_WRITE_ERROR]);
}

/*
 * SMART / Health.  Media and Data Integrity Errors: the unrecovered reads
 * and failed-element writes of the attached namespaces' media (core/media.h,
 * whichever host met them: the medium's count), plus backend I/O errors
 * this controller saw.  A FAILED element sets critical warning bit 2 (NVM
 * subsystem reliability degraded).
 */
void nvme_smart_build(struct nvme_subsys *s, struct nvme_ctrl *ctrl, struct nvme_smart_log *l)
{
        uint64_t rbytes = 0, wbytes = 0, media = 0;
        bool failed = false;
        struct core_stats_sum sum;
        for (uint32_t i = 1; i <= NVME_MAX_NSID; i++) {
                struct core_ns *ns = nvme_ns_lookup(s, i);
                if (!ns)
                        continue;
                core_stats_sum(&ns->stats, &sum);
                rbytes += sum.bytes[CORE_OPC_READ];
                wbytes += sum.bytes[CORE_OPC_WRITE];
                struct core_media_stats ms;
                core_media_get_stats(ns, &ms);
                media += ms.media_errors;
                for (uint32_t e = 1; e <= core_media_elements(ns); e++) {
                        struct core_elem_info ei;
                        if (!core_media_element_info(ns, e, &ei) && ei.state == CORE_ELEM_FAILED)
                                failed = true;
                }
                core_ns_put(ns);
        }
        uint64_t errs = 0;
        uint16_t over = NVME_WCTEMP, under = 0;
        if (ctrl) {
                pthread_mutex_lock(&ctrl->lock);
                errs = ctrl->err_count;
                over = ctrl->temp_over;
                under = ctrl->temp_under;
                pthread_mutex_unlock(&ctrl->lock);
                media += atomic_load(&ctrl->media_errors);
        }
        if (failed)
                l->critical_warning |= 1u << 2; /* reliability degraded */

        if (NVME_TEMP_KELVIN > over || NVME_TEMP_KELVIN < under)
                l->critical_warning |= 1u << 1; /* temperature threshold */
        put_le16(&l->temperature, NVME_TEMP_KELVIN);
        l->avail_spare = 100;
        l->spare_thresh = 10;
        /* Data units: thousands of 512-byte units, rounded up (Base 2.0 fig. 207). */
        put_u128(l->data_units_read, (rbytes / 512 + 999) / 1000);
        put_u128(l->data_units_written, (wbytes / 512 + 999) / 1000);
        put_u128(l->host_reads, ctrl ? atomic_load(&ctrl->host_reads) : 0);
        put_u128(l->host_writes, ctrl ? atomic_load(&ctrl->host_writes) : 0);
        put_u128(l->power_cycles, 1);
        put_u128(l->power_on_hours, nvme_uptime_s() / 3600);
        put_u128(l->media_errors, media);
        put_u128(l->num_err_log_entries, errs);
        put_le16(&l->temp_sensor[0], NVME_TEMP_KELVIN);
}

static void error_log(struct nvme_ctrl *ctrl, struct nvme_error_log *out)
{
        pthread_mutex_lock(&ctrl->lock);
        unsigned n =
            ctrl->err_count < NVME_ERRLOG_ENTRIES ? (unsigned)ctrl->err_count : NVME_ERRLOG_ENTRIES;
        for (unsigned i = 0; i < n; i++) /* newest first */
                out[i] = ctrl->errlog[(ctrl->err_head + NVME_ERRLOG_ENTRIES - 1 - i) %
                                      NVME_ERRLOG_ENTRIES];
        pthread_mutex_unlock(&ctrl->lock);
}

static void changed_ns_log(struct nvme_ctrl *ctrl, uint8_t *p, bool clear)
{
        pthread_mutex_lock(&ctrl->lock);
        if (ctrl->nchanged > 1024) {
                slate_put_le(p, 4, 0xffffffffu);
        } else {
                for (unsigned i = 0; i < ctrl->nchanged; i++)
                        slate_put_le(p + 4 * i, 4, ctrl->changed_ns[i]);
        }
        if (clear)
                ctrl->nchanged = 0;
        pthread_mutex_unlock(&ctrl->lock);
}

/* C0h: one entry per NSID whose namespace has a provisioning limit or threshold. */
static void prov_log(struct nvme_ctrl *ctrl, uint8_t *p, uint32_t cap)
{
        struct nvme_vs_prov_hdr *h = (void *)p;
        uint32_t n = 0;
        for (uint32_t i = 1; i <= NVME_MAX_NSID; i++) {
                if (sizeof(*h) + (n + 1) * sizeof(struct nvme_vs_prov_entry) > cap)
                        break;
                struct core_ns *ns = nvme_ns_lookup(ctrl->subsys, i);
                if (!ns)
                        continue;
                struct core_prov_info pi;
                core_ns_provision_info(ns, &pi);
                core_ns_put(ns);
                if (!pi.limit && !pi.threshold && !pi.pooled)
                        continue;
                struct nvme_vs_prov_entry *e =
                    (void *)(p + sizeof(*h) + n++ * sizeof(struct nvme_vs_prov_entry));
                put_le32(&e->nsid, i);
                put_le32(&e->flags, (pi.reached ? 1u : 0) | (pi.limit ? 2u : 0) |
                                        (pi.threshold ? 4u : 0) | (pi.pooled ? 8u : 0));
                put_le64(&e->capacity, pi.capacity);
                put_le64(&e->limit, pi.limit);
                put_le64(&e->threshold, pi.threshold);
                put_le64(&e->mapped, pi.mapped);
                put_le64(&e->available, pi.available);
        }
        put_le32(&h->entries, n);
}

enum nvme_parse_result nvme_get_log_parse(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw10 = nvme_cdw(cmd, 10), cdw11 = nvme_cdw(cmd, 11), cdw14 = nvme_cdw(cmd, 14);
        uint8_t lid = cdw10 & 0xff;
        bool rae = cdw10 & (1u << 15);
        uint64_t numd = (((uint64_t)(cdw11 & 0xffff) << 16) | (cdw10 >> 16)) + 1;
        uint64_t lpo = (uint64_t)nvme_cdw(cmd, 12) | ((uint64_t)nvme_cdw(cmd, 13) << 32);
        uint8_t csi = cdw14 >> 24;

        if (numd * 4 > CORE_MAX_TRANSFER_BYTES)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10) + 2);
        if (lpo & 3)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
        if (cdw14 & (1u << 23)) /* offset type: index (not supported) */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(14) + 2, 7);
        uint32_t len = (uint32_t)(numd * 4);
        uint8_t lsp = (cdw10 >> 8) & 0x7f;
        bool disc = ctrl->subsys->discovery;
        if (disc != (lid == NVME_LOG_DISCOVERY))
                return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_LOG_PAGE,
                                   NVME_SQE_OFF_CDW(10), -1);
        if (!nvme_xfer(cmd, len, false))
                return NVME_PARSE_DONE;
        memset(cmd->buf, 0, len);

        if (lid == NVME_LOG_DISCOVERY) {
                int rc = nvmf_discovery_log(ctrl, cmd->queue, cmd->buf, len, lpo);
                if (rc < 0)
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
                if (!rae)
                        nvme_ctrl_log_read(ctrl, lid);
                return NVME_PARSE_DONE;
        }

        if (lid == NVME_LOG_PERSISTENT_EVENT) /* its own buffer: larger than a page */
                return nvme_pel_log_page(cmd, lsp, len, lpo);

        if (lid == NVME_LOG_ANA) { /* ana.c; up to 4.6 KiB: its own buffer too */
                if (lsp & ~1u)     /* only RGO */
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10) + 1);
                /*
                 * Its size is the largest it can be (what hosts compute from
                 * NANAGRPID and MNAN, and nvme-cli reads in 4 KiB pieces),
                 * zeroes past the descriptors.
                 */
                if (lpo > NVME_ANA_LOG_MAX)
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
                uint8_t *a = calloc(1, NVME_ANA_LOG_MAX);
                if (!a)
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INTERNAL, NVME_LOC_NONE,
                                           -1);
                nvme_ana_log(ctrl->subsys, lsp & 1, a, NVME_ANA_LOG_MAX);
                nvme_copy_window(cmd->buf, len, lpo, a, 0, NVME_ANA_LOG_MAX);
                free(a);
                if (!rae)
                        nvme_ctrl_log_read(ctrl, lid);
                return NVME_PARSE_DONE;
        }

        union {
                uint8_t raw[4096];
                struct nvme_smart_log smart;
                struct nvme_fw_slot_log fw;
                struct nvme_effects_log effects;
                struct nvme_error_log err[NVME_ERRLOG_ENTRIES];
                struct nvme_resv_notify_log resv;
                struct nvme_sanitize_log san;
        } page;
        uint32_t size;
        memset(&page, 0, sizeof(page));

        switch (lid) {
        case NVME_LOG_ERROR:
                error_log(ctrl, page.err);
                size = sizeof(page.err);
                break;
        case NVME_LOG_SMART:
                nvme_smart_build(ctrl->subsys, ctrl, &page.smart);
                if (nvme_nsid(cmd) && nvme_nsid(cmd) != 0xffffffffu) {
                        struct core_ns *ns = nvme_ns_lookup(ctrl->subsys, nvme_nsid(cmd));
                        if (!ns)
                                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4,
                                                   -1);
                        smart_log_ns(ns, &page.smart);
                        core_ns_put(ns);
                }
                size = sizeof(page.smart);
                break;
        case NVME_LOG_FW_SLOT:
                page.fw.afi = 1;
                memset(page.fw.frs[0], ' ', 8);
                memcpy(page.fw.frs[0], ctrl->subsys->fr, strnlen(ctrl->subsys->fr, 8));
                size = sizeof(page.fw);
                break;
        case NVME_LOG_CHANGED_NS:
                size = 4096;
                if (lpo > size)
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
                changed_ns_log(ctrl, page.raw, !rae);
                break;
        case NVME_LOG_RESV_NOTIFY:
                if (lpo > sizeof(page.resv))
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
                nvme_resv_log(ctrl, &page.resv); /* consumes the oldest entry */
                size = sizeof(page.resv);
                break;
        case NVME_LOG_CMD_EFFECTS:
                if (csi != NVME_CSI_NVM)
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(14) + 3);
                nvme_effects_log_build(&page.effects);
                size = sizeof(page.effects);
                break;
        case NVME_LOG_DEVICE_SELF_TEST:
                nvme_dst_log(ctrl, page.raw);
                size = NVME_DST_LOG_SIZE;
                break;
        case NVME_LOG_SANITIZE:
                nvme_sanitize_log(ctrl, &page.san);
                size = sizeof(page.san);
                break;
        case NVME_LOG_LBA_STATUS:
                size = nvme_lba_status_log(ctrl, page.raw, sizeof(page.raw));
                break;
        case NVME_LOG_ENDURANCE: {
                uint16_t endgid = cdw11 >> 16; /* one group per namespace, ENDGID = NSID */
                if (endgid == 0 || endgid > NVME_MAX_NSID ||
                    !(cmd->ns = nvme_ns_lookup(ctrl->subsys, endgid)))
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11) + 2);
                size = nvme_endurance_log(cmd, page.raw, sizeof(page.raw));
                break;
        }
        case NVME_LOG_FDP_CONFIGS:
        case NVME_LOG_FDP_RUH_USAGE:
        case NVME_LOG_FDP_STATS:
        case NVME_LOG_FDP_EVENTS: {
                /* LSI: the endurance group, one per namespace (ENDGID = NSID, fdp.c). */
                uint16_t endgid = cdw11 >> 16;
                if (endgid == 0 || endgid > NVME_MAX_NSID ||
                    !(cmd->ns = nvme_ns_lookup(ctrl->subsys, endgid)) || !nvme_fdp_enabled(cmd->ns))
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11) + 2);
                if (lid != NVME_LOG_FDP_EVENTS && (cdw10 >> 8) & 0x7f) /* LSP */
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10) + 1);
                size = nvme_fdp_log(cmd, lid, endgid, (cdw10 >> 8) & 1, page.raw, sizeof(page.raw));
                break;
        }
        case NVME_LOG_VS_PROVISIONING:
                prov_log(ctrl, page.raw, sizeof(page.raw));
                size = sizeof(page.raw);
                break;
        default:
                return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_LOG_PAGE,
                                   NVME_SQE_OFF_CDW(10), -1);
        }
        if (lpo > size)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
        nvme_copy_window(cmd->buf, len, lpo, page.raw, 0, size);
        if (!rae)
                nvme_ctrl_log_read(ctrl, lid);
        return NVME_PARSE_DONE;
}
