/*
 * NVMe status: the one table from the core's protocol-neutral status to an
 * NVMe Status Code Type / Status Code (Base 2.0 4.6.1.2, NVM Command Set 1.0
 * 4.1.1), the one table from a transport's transfer errors (nvme.h) to
 * status, the CQE status writer, and the Error Information log entries
 * (Base 2.0 5.16.1.2) that every rejection records with the location of the
 * offending field ("every rejection says where").
 */
#include <string.h>

#include "nvme/internal.h"
#include "rt/reactor.h"

static const struct nvme_status_map status_map[CORE_STATUS_MAX] = {
    [CORE_OK] = {NVME_SCT_GENERIC, NVME_SC_SUCCESS, false},
    [CORE_E_LBA_RANGE] = {NVME_SCT_GENERIC, NVME_SC_LBA_RANGE, true},
    [CORE_E_INVALID_FIELD] = {NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, true},
    [CORE_E_INVALID_PARAM] = {NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, true},
    [CORE_E_PARAM_LIST_LENGTH] = {NVME_SCT_GENERIC, NVME_SC_SGL_INVALID_DATA_LEN, true},
    [CORE_E_INVALID_OPCODE] = {NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE, true},
    [CORE_E_MISCOMPARE] = {NVME_SCT_MEDIA, NVME_SC_COMPARE_FAILED, true},
    [CORE_E_WRITE_PROTECT] = {NVME_SCT_GENERIC, NVME_SC_NS_WRITE_PROTECTED, true},
    [CORE_E_MEDIUM_ERROR] = {NVME_SCT_MEDIA, NVME_SC_READ_ERROR, false},
    [CORE_E_WRITE_ERROR] = {NVME_SCT_MEDIA, NVME_SC_WRITE_FAULT, false},
    [CORE_E_RESERVATION_CONFLICT] = {NVME_SCT_GENERIC, NVME_SC_RESERVATION_CONFLICT, true},
    [CORE_E_NOT_READY] = {NVME_SCT_GENERIC, NVME_SC_NS_NOT_READY, false},
    [CORE_E_NO_RESOURCES] = {NVME_SCT_GENERIC, NVME_SC_CMD_INTERRUPTED, false},
    [CORE_E_ABORTED] = {NVME_SCT_GENERIC, NVME_SC_ABORT_REQ, false},
    [CORE_E_INTERNAL] = {NVME_SCT_GENERIC, NVME_SC_INTERNAL, false},
    [CORE_E_TRANSFER_TOO_LONG] = {NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, true},
    [CORE_E_SAVE_NOT_SUPPORTED] = {NVME_SCT_CMD_SPECIFIC, NVME_SC_FEATURE_NOT_SAVEABLE, true},
    [CORE_E_PR_INSUFFICIENT_REG] = {NVME_SCT_GENERIC, NVME_SC_INTERNAL, true},
    [CORE_E_WRITE_PROTECT_SOFTWARE] = {NVME_SCT_GENERIC, NVME_SC_NS_WRITE_PROTECTED, true},
    [CORE_E_NO_MEDIUM] = {NVME_SCT_GENERIC, NVME_SC_NS_NOT_READY, false},
    [CORE_E_SANITIZE_IN_PROGRESS] = {NVME_SCT_GENERIC, NVME_SC_SANITIZE_IN_PROGRESS, true},
    [CORE_E_SANITIZE_FAILED] = {NVME_SCT_GENERIC, NVME_SC_SANITIZE_FAILED, true},
    /* NUSE would exceed NCAP (the limit): Capacity Exceeded; a retry cannot help until space
     * is freed, so DNR. */
    [CORE_E_SPACE_ALLOC_FAILED] = {NVME_SCT_GENERIC, NVME_SC_CAP_EXCEEDED, true},
    [CORE_E_COPY_LIMIT] = {NVME_SCT_CMD_SPECIFIC, NVME_SC_CMD_SIZE_LIMIT, true},
    [CORE_E_COPY_INCOMPATIBLE] = {NVME_SCT_CMD_SPECIFIC, NVME_SC_INCOMPATIBLE_NS, true},
    /* Media and Data Integrity Errors: Unrecovered Read Error; rereading cannot help (DNR). */
    [CORE_E_UNRECOVERED_READ] = {NVME_SCT_MEDIA, NVME_SC_READ_ERROR, true},
    /* No NVMe status for depopulation: Namespace Not Ready, retry later (no DNR). */
    [CORE_E_DEPOP_IN_PROGRESS] = {NVME_SCT_GENERIC, NVME_SC_NS_NOT_READY, false},
    /* Media and Data Integrity Errors: End-to-end Guard / Application Tag / Reference Tag
     * Check Error; the same data fails the same way again (DNR). */
    [CORE_E_PI_GUARD] = {NVME_SCT_MEDIA, NVME_SC_GUARD_CHECK, true},
    [CORE_E_PI_APPTAG] = {NVME_SCT_MEDIA, NVME_SC_APPTAG_CHECK, true},
    [CORE_E_PI_REFTAG] = {NVME_SCT_MEDIA, NVME_SC_REFTAG_CHECK, true},
    /* Path Related Status (Base 2.0 fig. 97, core/ana.h): Asymmetric Access Inaccessible /
     * Persistent Loss / Transition; no DNR: the host retries on another path.  NVMe has no
     * standby: inaccessible. */
    [CORE_E_ANA_INACCESSIBLE] = {NVME_SCT_PATH, NVME_SC_ANA_INACCESSIBLE, false},
    [CORE_E_ANA_STANDBY] = {NVME_SCT_PATH, NVME_SC_ANA_INACCESSIBLE, false},
    [CORE_E_ANA_PERSISTENT_LOSS] = {NVME_SCT_PATH, NVME_SC_ANA_PERSISTENT_LOSS, false},
    [CORE_E_ANA_TRANSITION] = {NVME_SCT_PATH, NVME_SC_ANA_TRANSITION, false},
};

static const struct nvme_status_map internal_error = {NVME_SCT_GENERIC, NVME_SC_INTERNAL, false};

const struct nvme_status_map *nvme_status_map(enum core_status st)
{
        if ((unsigned)st >= CORE_STATUS_MAX)
                return &internal_error;
        /* Rows left out of the table would read as success: never let them. */
        if (st != CORE_OK && status_map[st].sct == 0 && status_map[st].sc == 0)
                return &internal_error;
        return &status_map[st];
}

void nvme_set_status(struct nvme_cmd *cmd, uint8_t sct, uint8_t sc, bool dnr)
{
        uint16_t v = (uint16_t)(((unsigned)sc << 1) | ((unsigned)(sct & 7) << 9));
        if (dnr && (sct || sc))
                v |= NVME_STATUS_DNR;
        slate_put_le(cmd->cqe + 14, 2, v); /* phase bit 0: fabrics */
}

uint16_t nvme_cqe_status(const struct nvme_cmd *cmd)
{
        return (uint16_t)(slate_get_le(cmd->cqe + 14, 2) >> 1);
}

void nvme_ctrl_log_error(struct nvme_ctrl *ctrl, struct nvme_cmd *cmd, uint16_t loc, uint64_t lba)
{
        if (!ctrl)
                return;
        pthread_mutex_lock(&ctrl->lock);
        struct nvme_error_log *e = &ctrl->errlog[ctrl->err_head % NVME_ERRLOG_ENTRIES];
        memset(e, 0, sizeof(*e));
        ctrl->err_count++;
        ctrl->err_head = (ctrl->err_head + 1) % NVME_ERRLOG_ENTRIES;
        put_le64(&e->error_count, ctrl->err_count);
        put_le16(&e->sqid, cmd->queue ? cmd->queue->qid : 0);
        put_le16(&e->cmdid, (uint16_t)slate_get_le(cmd->sqe + 2, 2));
        put_le16(&e->status, (uint16_t)slate_get_le(cmd->cqe + 14, 2));
        put_le16(&e->param_loc, loc);
        put_le64(&e->lba, lba);
        put_le32(&e->nsid, nvme_nsid(cmd));
        e->trtype = NVMF_TRTYPE_TCP;
        pthread_mutex_unlock(&ctrl->lock);
        /*
         * More (M, Base 2.0 4.6.1, CQE status field bit 13): the Error Information log holds an
         * entry for this completion.  Set after the entry took the status, as the Linux target
         * does, so the logged status field reads without it.
         */
        slate_put_le(cmd->cqe + 14, 2, slate_get_le(cmd->cqe + 14, 2) | NVME_STATUS_M);
}

/* Status (DNR when dnr) plus an Error Information entry locating SQE byte `byte`, bit `bit`. */
static void reject_at(struct nvme_cmd *cmd, uint8_t sct, uint8_t sc, bool dnr, uint16_t byte,
                      int bit)
{
        nvme_set_status(cmd, sct, sc, dnr);
        uint16_t loc = NVME_LOC_NONE;
        if (byte != NVME_LOC_NONE)
                loc = (uint16_t)((byte & 0xff) | ((bit >= 0 ? (unsigned)bit & 7 : 0) << 8));
        if (cmd->queue)
                nvme_ctrl_log_error(cmd->queue->ctrl, cmd, loc, 0);
}

enum nvme_parse_result nvme_reject(struct nvme_cmd *cmd, uint8_t sct, uint8_t sc, uint16_t byte,
                                   int bit)
{
        reject_at(cmd, sct, sc, true, byte, bit);
        return NVME_PARSE_DONE;
}

/*
 * Transfer errors a transport reports (nvme.h) -> status and the SQE field
 * at fault: the data pointer is SQE bytes 24..39 (Base 2.0 4.3.2: address
 * 24..31, length 32..35, SGL identifier 39 with the type in bits 7:4 and
 * the subtype in bits 3:0); PSDT is byte 1 bits 7:6.
 */
struct xfer_error_map {
        uint8_t sct, sc;
        bool dnr;
        uint16_t byte;
        int8_t bit;
};

static const struct xfer_error_map xfer_errors[NVME_XFER_ERROR_MAX] = {
    [NVME_XFER_PSDT] = {NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, true, 1, 6},
    [NVME_XFER_SGL_TYPE] = {NVME_SCT_GENERIC, NVME_SC_SGL_INVALID_TYPE, true, 39, 4},
    [NVME_XFER_SGL_SUBTYPE] = {NVME_SCT_GENERIC, NVME_SC_SGL_INVALID_SUBTYPE, true, 39, 0},
    [NVME_XFER_ICD_OFFSET] = {NVME_SCT_GENERIC, NVME_SC_SGL_INVALID_OFFSET, true, 24, -1},
    [NVME_XFER_ICD_LENGTH] = {NVME_SCT_GENERIC, NVME_SC_SGL_INVALID_OFFSET, true, 32, -1},
    [NVME_XFER_ICD_C2H] = {NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, true, 39, -1},
    [NVME_XFER_SGL_LENGTH] = {NVME_SCT_GENERIC, NVME_SC_SGL_INVALID_DATA_LEN, true, 32, -1},
    [NVME_XFER_DIGEST] = {NVME_SCT_GENERIC, NVME_SC_TRANSIENT_TRANSPORT, false, NVME_LOC_NONE, -1},
};

void nvme_xfer_status(struct nvme_cmd *cmd, enum nvme_xfer_error e)
{
        if ((unsigned)e >= NVME_XFER_ERROR_MAX || e == NVME_XFER_OK) {
                reject_at(cmd, NVME_SCT_GENERIC, NVME_SC_INTERNAL, false, NVME_LOC_NONE, -1);
                return;
        }
        const struct xfer_error_map *m = &xfer_errors[e];
        reject_at(cmd, m->sct, m->sc, m->dnr, m->byte, m->bit);
}

void nvme_cqe_init(struct nvme_cmd *cmd)
{
        memset(cmd->cqe, 0, sizeof(cmd->cqe));
        memcpy(cmd->cqe + 12, cmd->sqe + 2, 2); /* CID */
        slate_put_le(cmd->cqe + 10, 2, cmd->queue ? cmd->queue->qid : 0);
}

void nvme_cmd_reject_xfer(struct nvme_cmd *cmd, enum nvme_xfer_error e)
{
        nvme_fused_forget(cmd); /* a fused peer completes on its own */
        if (cmd->ns) {          /* parsed (NVME_PARSE_EXEC) but never executed */
                core_ns_put(cmd->ns);
                cmd->ns = NULL;
        }
        cmd->op = NULL;
        cmd->data_len = 0;
        cmd->h2c = false;
        nvme_cqe_init(cmd);
        nvme_xfer_status(cmd, e);
}

void nvme_status_from_core(struct nvme_cmd *cmd, enum core_status st)
{
        const struct nvme_status_map *m = nvme_status_map(st);
        nvme_set_status(cmd, m->sct, m->sc, m->dnr);
        /* Media and protection errors name the failing block (core/media.h, core/pi.h:
         * info = its LBA). */
        uint64_t lba = cmd->req.lba;
        bool names_block = st == CORE_E_UNRECOVERED_READ || st == CORE_E_WRITE_ERROR ||
                           st == CORE_E_PI_GUARD || st == CORE_E_PI_APPTAG ||
                           st == CORE_E_PI_REFTAG;
        if (names_block && cmd->req.info_valid)
                lba = cmd->req.info;
        if (st != CORE_OK && cmd->queue)
                nvme_ctrl_log_error(cmd->queue->ctrl, cmd, NVME_LOC_NONE, lba);
}

/* Completion (here, beside the status, so a transport's tests link without the dispatcher). */
static void complete_fn(struct rt_defer *d)
{
        struct nvme_cmd *cmd = (struct nvme_cmd *)((char *)d - offsetof(struct nvme_cmd, defer));
        nvme_cmd_complete(cmd);
}

void nvme_cmd_complete(struct nvme_cmd *cmd)
{
        if (cmd->ns) {
                core_ns_put(cmd->ns);
                cmd->ns = NULL;
        }
        cmd->done(cmd);
}

void nvme_cmd_complete_deferred(struct nvme_cmd *cmd)
{
        cmd->defer.fn = complete_fn;
        cmd->defer.next = NULL;
        rt_defer(cmd->reactor, &cmd->defer);
}
