/*
 * Sense data and status for the SCSI personality: builds fixed (70h) or
 * descriptor (72h) format sense as the LU's D_SENSE bit selects (SPC-5
 * 4.4), turns "where did the check fail" into the sense-key-specific field
 * pointer (SPC-5 4.4.2.4.2), and maps the block core's protocol-neutral
 * status to SAM status + sense key/ASC/ASCQ (the one translator from
 * core status to SCSI).
 */
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"

static bool want_desc(struct scsi_cmd *cmd)
{
        if (!cmd->ns || !cmd->ns->scsi_state)
                return false;
        return ((struct scsi_lu_state *)cmd->ns->scsi_state)->d_sense;
}

uint8_t scsi_sense_build(uint8_t *out, bool desc, uint8_t key, uint8_t asc, uint8_t ascq,
                         bool info_valid, uint64_t info, const uint8_t *sks)
{
        memset(out, 0, SCSI_SENSE_MAX);
        if (desc) {
                struct scsi_sense_desc_hdr *h = (void *)out;
                uint8_t *p = out + sizeof(*h);
                h->response_code = 0x72;
                h->key = key & 0x0f;
                h->asc = asc;
                h->ascq = ascq;
                if (info_valid) {
                        struct scsi_sense_desc_info *d = (void *)p;
                        d->type = 0x00;
                        d->len = 0x0a;
                        d->valid = 0x80;
                        put_be64(&d->information, info);
                        p += sizeof(*d);
                }
                if (sks) {
                        struct scsi_sense_desc_sks *d = (void *)p;
                        d->type = 0x02;
                        d->len = 0x06;
                        memcpy(d->sks, sks, 3);
                        p += sizeof(*d);
                }
                h->additional_len = (uint8_t)(p - out - sizeof(*h));
                return (uint8_t)(p - out);
        } else {
                struct scsi_sense_fixed *f = (void *)out;
                f->response_code = 0x70;
                f->key = key & 0x0f;
                if (info_valid) {
                        /* The fixed format has 4 bytes; larger values are not valid there. */
                        if (info <= UINT32_MAX)
                                f->response_code |= 0x80;
                        put_be32(&f->information, (uint32_t)info);
                }
                f->additional_len = sizeof(*f) - 8;
                f->asc = asc;
                f->ascq = ascq;
                if (sks)
                        memcpy(f->sks, sks, 3);
                return sizeof(*f);
        }
}

void scsi_sense_full(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq, bool info_valid,
                     uint64_t info, const uint8_t *sks)
{
        cmd->status = SAM_STAT_CHECK_CONDITION;
        cmd->data_in_len = 0;
        cmd->sense_len =
            scsi_sense_build(cmd->sense, want_desc(cmd), key, asc, ascq, info_valid, info, sks);
}

void scsi_sense_set(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq)
{
        scsi_sense_full(cmd, key, asc, ascq, false, 0, NULL);
}

void scsi_sense_field(struct scsi_cmd *cmd, uint8_t asc, uint8_t ascq, bool in_cdb, uint16_t byte,
                      int bit)
{
        uint8_t sks[3];
        sks[0] = 0x80 | (in_cdb ? 0x40 : 0);
        if (bit >= 0 && bit < 8)
                sks[0] |= 0x08 | (uint8_t)bit;
        sks[1] = (uint8_t)(byte >> 8);
        sks[2] = (uint8_t)byte;
        scsi_sense_full(cmd, SK_ILLEGAL_REQUEST, asc, ascq, false, 0, sks);
}

void scsi_sense_invalid_field(struct scsi_cmd *cmd, bool in_cdb, uint16_t byte, int bit)
{
        scsi_sense_field(cmd, in_cdb ? 0x24 : 0x26, 0x00, in_cdb, byte, bit);
}

uint8_t scsi_sense_build_copy(uint8_t *out, bool desc, uint8_t asc, uint8_t ascq, uint32_t segment,
                              int field, bool sd)
{
        uint8_t sks[3], len;
        if (field >= 0) {
                /* SPC-5 4.4.2.4.6 segment pointer: SD = relative to the segment descriptor. */
                sks[0] = 0x80 | (sd ? 0x20 : 0);
                sks[1] = (uint8_t)(field >> 8);
                sks[2] = (uint8_t)field;
        }
        len = scsi_sense_build(out, desc, SK_COPY_ABORTED, asc, ascq, false, 0,
                               field >= 0 ? sks : NULL);
        if (!desc) {
                struct scsi_sense_fixed *f = (void *)out;
                put_be32(&f->cmd_specific, segment);
                return len;
        }
        /* Command-specific information descriptor (type 01h): the segment number. */
        uint8_t *d = out + len;
        memset(d, 0, 12);
        d[0] = 0x01;
        d[1] = 0x0a;
        slate_put_be(d + 4, 8, segment);
        out[7] = (uint8_t)(out[7] + 12);
        return (uint8_t)(len + 12);
}

void scsi_sense_copy_aborted(struct scsi_cmd *cmd, uint8_t asc, uint8_t ascq, uint32_t segment,
                             int field, bool sd)
{
        cmd->status = SAM_STAT_CHECK_CONDITION;
        cmd->data_in_len = 0;
        cmd->sense_len =
            scsi_sense_build_copy(cmd->sense, want_desc(cmd), asc, ascq, segment, field, sd);
}

void scsi_cmd_reject_xfer(struct scsi_cmd *cmd, enum scsi_xfer_error e)
{
        switch (e) {
        case SCSI_XFER_TOO_LONG:
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x24, 0x00);
                return;
        case SCSI_XFER_SHORT_OUT:
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x0e, 0x03);
                return;
        case SCSI_XFER_DATA_PHASE:
                scsi_sense_set(cmd, SK_ABORTED_COMMAND, 0x4b, 0x00);
                return;
        }
        scsi_status_from_core(cmd, CORE_E_INTERNAL, 0, false);
}

void scsi_cmd_good(struct scsi_cmd *cmd)
{
        cmd->status = SAM_STAT_GOOD;
        cmd->sense_len = 0;
}

void scsi_cmd_data_in(struct scsi_cmd *cmd, uint32_t len, uint32_t alloc_len)
{
        uint32_t n = len < alloc_len ? len : alloc_len;
        if (n > cmd->buf_len)
                n = cmd->buf_len;
        cmd->data_in_len = n;
        cmd->xfer_len = alloc_len;
        scsi_cmd_good(cmd);
}

struct status_map {
        uint8_t sam;
        uint8_t key, asc, ascq;
};

static const struct status_map core_map[CORE_STATUS_MAX] = {
    [CORE_OK] = {SAM_STAT_GOOD, 0, 0, 0},
    [CORE_E_LBA_RANGE] = {SAM_STAT_CHECK_CONDITION, SK_ILLEGAL_REQUEST, 0x21, 0x00},
    [CORE_E_INVALID_FIELD] = {SAM_STAT_CHECK_CONDITION, SK_ILLEGAL_REQUEST, 0x24, 0x00},
    [CORE_E_INVALID_PARAM] = {SAM_STAT_CHECK_CONDITION, SK_ILLEGAL_REQUEST, 0x26, 0x00},
    [CORE_E_PARAM_LIST_LENGTH] = {SAM_STAT_CHECK_CONDITION, SK_ILLEGAL_REQUEST, 0x1a, 0x00},
    [CORE_E_INVALID_OPCODE] = {SAM_STAT_CHECK_CONDITION, SK_ILLEGAL_REQUEST, 0x20, 0x00},
    [CORE_E_MISCOMPARE] = {SAM_STAT_CHECK_CONDITION, SK_MISCOMPARE, 0x1d, 0x00},
    [CORE_E_WRITE_PROTECT] = {SAM_STAT_CHECK_CONDITION, SK_DATA_PROTECT, 0x27, 0x00},
    [CORE_E_MEDIUM_ERROR] = {SAM_STAT_CHECK_CONDITION, SK_MEDIUM_ERROR, 0x11, 0x00},
    [CORE_E_WRITE_ERROR] = {SAM_STAT_CHECK_CONDITION, SK_MEDIUM_ERROR, 0x0c, 0x00},
    [CORE_E_RESERVATION_CONFLICT] = {SAM_STAT_RESERVATION_CONFLICT, 0, 0, 0},
    [CORE_E_NOT_READY] = {SAM_STAT_CHECK_CONDITION, SK_NOT_READY, 0x04, 0x02},
    [CORE_E_NO_RESOURCES] = {SAM_STAT_BUSY, 0, 0, 0},
    [CORE_E_ABORTED] = {SAM_STAT_TASK_ABORTED, 0, 0, 0},
    [CORE_E_INTERNAL] = {SAM_STAT_CHECK_CONDITION, SK_HARDWARE_ERROR, 0x44, 0x00},
    [CORE_E_TRANSFER_TOO_LONG] = {SAM_STAT_CHECK_CONDITION, SK_ILLEGAL_REQUEST, 0x24, 0x00},
    [CORE_E_SAVE_NOT_SUPPORTED] = {SAM_STAT_CHECK_CONDITION, SK_ILLEGAL_REQUEST, 0x39, 0x00},
    [CORE_E_PR_INSUFFICIENT_REG] = {SAM_STAT_CHECK_CONDITION, SK_ILLEGAL_REQUEST, 0x55, 0x04},
    [CORE_E_WRITE_PROTECT_SOFTWARE] = {SAM_STAT_CHECK_CONDITION, SK_DATA_PROTECT, 0x27, 0x02},
    [CORE_E_NO_MEDIUM] = {SAM_STAT_CHECK_CONDITION, SK_NOT_READY, 0x3a, 0x02},
    [CORE_E_SANITIZE_IN_PROGRESS] = {SAM_STAT_CHECK_CONDITION, SK_NOT_READY, 0x04, 0x1b},
    [CORE_E_SANITIZE_FAILED] = {SAM_STAT_CHECK_CONDITION, SK_MEDIUM_ERROR, 0x31, 0x03},
    /* SBC-4 4.7.3.7: SPACE ALLOCATION FAILED WRITE PROTECT. */
    [CORE_E_SPACE_ALLOC_FAILED] = {SAM_STAT_CHECK_CONDITION, SK_DATA_PROTECT, 0x27, 0x07},
    /* EXTENDED COPY / WRITE USING TOKEN: the parameter list asked for what we cannot do. */
    [CORE_E_COPY_LIMIT] = {SAM_STAT_CHECK_CONDITION, SK_ILLEGAL_REQUEST, 0x26, 0x00},
    [CORE_E_COPY_INCOMPATIBLE] = {SAM_STAT_CHECK_CONDITION, SK_ILLEGAL_REQUEST, 0x26, 0x00},
    /* SBC-4 4.18 (core/media.h): UNRECOVERED READ ERROR, the LBA in the INFORMATION field. */
    [CORE_E_UNRECOVERED_READ] = {SAM_STAT_CHECK_CONDITION, SK_MEDIUM_ERROR, 0x11, 0x00},
    /* SBC-4 4.37 depopulation: NOT READY, DEPOPULATION IN PROGRESS. */
    [CORE_E_DEPOP_IN_PROGRESS] = {SAM_STAT_CHECK_CONDITION, SK_NOT_READY, 0x04, 0x24},
    /* SBC-4 4.22 protection information checks: ABORTED COMMAND with LOGICAL BLOCK GUARD /
     * APPLICATION TAG / REFERENCE TAG CHECK FAILED, the failing LBA in the INFORMATION field
     * (the caller passes core_pi_err.lba). */
    [CORE_E_PI_GUARD] = {SAM_STAT_CHECK_CONDITION, SK_ABORTED_COMMAND, 0x10, 0x01},
    [CORE_E_PI_APPTAG] = {SAM_STAT_CHECK_CONDITION, SK_ABORTED_COMMAND, 0x10, 0x02},
    [CORE_E_PI_REFTAG] = {SAM_STAT_CHECK_CONDITION, SK_ABORTED_COMMAND, 0x10, 0x03},
    /* SPC-5 5.16.2.4 (core/ana.h): NOT READY, LOGICAL UNIT NOT ACCESSIBLE, TARGET PORT IN
     * UNAVAILABLE (0Ch) / STANDBY (0Bh) STATE, ASYMMETRIC ACCESS STATE TRANSITION (0Ah).
     * Offline (persistent loss) has no code of its own: our choice, unavailable's. */
    [CORE_E_ANA_INACCESSIBLE] = {SAM_STAT_CHECK_CONDITION, SK_NOT_READY, 0x04, 0x0c},
    [CORE_E_ANA_STANDBY] = {SAM_STAT_CHECK_CONDITION, SK_NOT_READY, 0x04, 0x0b},
    [CORE_E_ANA_PERSISTENT_LOSS] = {SAM_STAT_CHECK_CONDITION, SK_NOT_READY, 0x04, 0x0c},
    [CORE_E_ANA_TRANSITION] = {SAM_STAT_CHECK_CONDITION, SK_NOT_READY, 0x04, 0x0a},
};

uint8_t scsi_core_sense_key(enum core_status st)
{
        if ((unsigned)st >= CORE_STATUS_MAX)
                st = CORE_E_INTERNAL;
        return core_map[st].key;
}

bool scsi_core_sense_code(enum core_status st, uint8_t *asc, uint8_t *ascq)
{
        const struct status_map *m;
        if ((unsigned)st >= CORE_STATUS_MAX)
                st = CORE_E_INTERNAL;
        m = &core_map[st];
        if (m->sam != SAM_STAT_CHECK_CONDITION)
                return false;
        *asc = m->asc;
        *ascq = m->ascq;
        return true;
}

void scsi_status_from_core(struct scsi_cmd *cmd, enum core_status st, uint64_t info,
                           bool info_valid)
{
        const struct status_map *m;
        if ((unsigned)st >= CORE_STATUS_MAX)
                st = CORE_E_INTERNAL;
        m = &core_map[st];
        if (st == CORE_E_SANITIZE_IN_PROGRESS && cmd->ns) {
                /* SPC-5 4.4.2.4.4: NOT READY with the progress indication. */
                uint16_t p = atomic_load(&cmd->ns->san_progress);
                uint8_t sks[3] = {0x80, (uint8_t)(p >> 8), (uint8_t)p};
                scsi_sense_full(cmd, m->key, m->asc, m->ascq, false, 0, sks);
                return;
        }
        if (m->sam == SAM_STAT_CHECK_CONDITION) {
                scsi_sense_full(cmd, m->key, m->asc, m->ascq, info_valid, info, NULL);
                return;
        }
        cmd->status = m->sam;
        cmd->sense_len = 0;
        if (m->sam != SAM_STAT_GOOD)
                cmd->data_in_len = 0;
}

static void finish_deferred_cb(struct rt_defer *d)
{
        struct core_req *req = (struct core_req *)((char *)d - offsetof(struct core_req, defer));
        struct scsi_cmd *cmd = (struct scsi_cmd *)((char *)req - offsetof(struct scsi_cmd, req));
        cmd->done(cmd);
}

void scsi_cmd_finish_deferred(struct scsi_cmd *cmd)
{
        cmd->req.defer.fn = finish_deferred_cb;
        cmd->req.defer.next = NULL;
        rt_defer(cmd->reactor, &cmd->req.defer);
}
