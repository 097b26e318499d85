/*
 * SBC-4 atomic and scattered writes (issue 8), on the block core's
 * atomic-write engine (core/atomic.h):
 *
 *   WRITE ATOMIC(16) 9Ch and (32) 7Fh/000Fh: every CDB field checked, the
 *   LBA range, then the namespace's atomic limits (core_atomic_check: the
 *   length, ATOMIC ALIGNMENT, ATOMIC TRANSFER LENGTH GRANULARITY and the
 *   ATOMIC BOUNDARY; on an rbd namespace also no crossing of an object
 *   without an ATOMIC BOUNDARY, pointed at the LBA), each refusal as
 *   ILLEGAL REQUEST / INVALID FIELD IN CDB with the field pointer at the
 *   failing field; then one CORE_OP_WRITE with CORE_REQ_ATOMIC.
 *
 *   WRITE SCATTERED(16) 9Fh/12h and (32) 7Fh/0011h: the CDB, then the
 *   data-out buffer's LBA range descriptors, decoded in place into struct
 *   core_lba_range (no allocation per command), then one
 *   CORE_OP_WRITE_SCATTERED.  Slate's extension: when the whole write fits
 *   the namespace's scatter limits (scatter_max_blocks/_ranges, shown in
 *   vendor VPD page C0h), it is submitted with CORE_REQ_ATOMIC, so all of
 *   its ranges land together or none does.  Always on when it fits: a host
 *   that reads page C0h knows which scattered writes are atomic; one that
 *   does not loses nothing.
 *
 * WRITE ATOMIC's WRPROTECT is a WRITE's (pi.c): on an LU with protection
 * information the Data-Out buffer carries it when WRPROTECT is not 000b
 * and it is checked as asked (the 32-byte CDB's expected initial reference
 * tag, application tag and mask included), else the device server
 * generates it; the core journals the blocks' metadata with their data, so
 * the write is all-or-nothing for both (core/atomic.c).  WRITE SCATTERED
 * keeps WRPROTECT 000b (its descriptors' tags are ignored, as SBC-4 says
 * for 000b).
 */
#include <string.h>

#include "core/atomic.h"
#include "slate/spec/scsi.h"
#include "scsi/internal.h"

/* The decoded fields of a WRITE ATOMIC CDB and where each sits (field pointers). */
struct wa_fields {
        uint64_t lba;
        uint32_t nlb;
        uint16_t boundary;
        uint8_t flags; /* WRPROTECT 7:5, DPO 4, FUA 3, reserved 2:0 */
        uint8_t flags_off, lba_off, len_off, bnd_off, grp_off;
};

static void wa_decode(const uint8_t *c, struct wa_fields *f)
{
        if (c[0] == SCSI_OP_WRITE_ATOMIC_16) {
                f->flags = c[1];
                f->lba = slate_be64(c + 2);
                f->boundary = slate_be16(c + 10);
                f->nlb = slate_be16(c + 12);
                f->flags_off = 1, f->lba_off = 2, f->bnd_off = 10, f->len_off = 12;
                f->grp_off = 14;
        } else { /* 7Fh, service action 000Fh */
                f->boundary = slate_be16(c + 4);
                f->flags = c[10];
                f->lba = slate_be64(c + 12);
                f->nlb = slate_be32(c + 28);
                f->flags_off = 10, f->lba_off = 12, f->bnd_off = 4, f->len_off = 28;
                f->grp_off = 6;
        }
}

static uint32_t io_flags(uint8_t flags)
{
        return ((flags & 0x08) ? CORE_REQ_FUA : 0) | ((flags & 0x10) ? CORE_REQ_DPO : 0);
}

static void req_setup(struct scsi_cmd *cmd, enum core_op op, uint64_t lba, uint32_t nlb,
                      uint32_t flags)
{
        core_req_init(&cmd->req, cmd->ns, op, lba, nlb, flags, cmd->reactor, scsi_sbc_req_done,
                      cmd);
        cmd->req.nexus = cmd->nexus ? &cmd->nexus->id : NULL;
        cmd->req.host = cmd->nexus ? cmd->nexus->host : NULL;
        cmd->lba = lba;
        cmd->nlb = nlb;
}

/* The 32-byte CDBs: ADDITIONAL CDB LENGTH is 18h. */
static bool check_varlen(struct scsi_cmd *cmd)
{
        if (cmd->cdb[0] == SCSI_OP_VARIABLE_LENGTH && cmd->cdb[7] != 0x18) {
                scsi_sense_invalid_field(cmd, true, 7, 7);
                return false;
        }
        return true;
}

/* WRPROTECT (pi: what the LU's protection allows), reserved flag bits, the group byte's. */
static bool check_flags(struct scsi_cmd *cmd, uint8_t flags, uint8_t flags_off, uint8_t ok_bits,
                        uint8_t grp_off, bool pi)
{
        if (pi) {
                if (!scsi_pi_protect_ok(cmd, flags >> 5, flags_off))
                        return false;
        } else if (flags & 0xe0) {
                scsi_sense_invalid_field(cmd, true, flags_off, 7);
                return false;
        }
        if (flags & ~ok_bits & 0x1f) {
                scsi_sense_invalid_field(cmd, true, flags_off,
                                         31 - __builtin_clz(flags & ~ok_bits & 0x1fu));
                return false;
        }
        if (cmd->cdb[grp_off] & 0xc0) {
                scsi_sense_invalid_field(cmd, true, grp_off, 7);
                return false;
        }
        return true;
}

static void reject_range(struct scsi_cmd *cmd, enum core_op op)
{
        scsi_status_from_core(cmd, CORE_E_LBA_RANGE, 0, false);
        core_stats_reject(cmd->ns, cmd->nexus ? cmd->nexus->host : NULL, op, CORE_E_LBA_RANGE);
}

bool scsi_lu_has_atomic(const struct core_ns *ns)
{
        struct core_atomic_limits l;
        if (!ns)
                return false;
        core_ns_atomic_limits(ns, &l);
        return l.max_blocks || l.max_with_boundary;
}

/* ---- WRITE ATOMIC (16) / (32) ---- */

enum scsi_parse_result scsi_sbc_write_atomic(struct scsi_cmd *cmd)
{
        struct core_ns *ns = cmd->ns;
        struct wa_fields f;
        uint64_t bytes;

        wa_decode(cmd->cdb, &f);
        uint8_t protect = f.flags >> 5;
        bytes = core_ns_xfer_bytes(ns, f.nlb, scsi_pi_host_md(cmd, protect));
        cmd->xfer_len = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
        if (!check_varlen(cmd) || !check_flags(cmd, f.flags, f.flags_off, 0x18, f.grp_off, true))
                return SCSI_PARSE_DONE;
        if (!core_ns_range_ok(ns, f.lba, f.nlb)) {
                reject_range(cmd, CORE_OP_WRITE);
                return SCSI_PARSE_DONE;
        }
        if (bytes > CORE_MAX_TRANSFER_BYTES || bytes > cmd->buf_len) {
                scsi_sense_invalid_field(cmd, true, f.len_off, 7);
                return SCSI_PARSE_DONE;
        }
        if (!scsi_check_state(cmd, CORE_CHK_WRITABLE))
                return SCSI_PARSE_DONE;
        if (!f.nlb) {
                scsi_cmd_good(cmd); /* SBC-4: a transfer length of zero is not an error */
                return SCSI_PARSE_DONE;
        }
        switch (core_atomic_check(ns, f.lba, f.nlb, f.boundary)) {
        case CORE_ATOMIC_OK:
                break;
        case CORE_ATOMIC_BAD_ALIGN:
        case CORE_ATOMIC_BAD_CROSSING: /* the LBA puts it across an object (rbd) */
                scsi_sense_invalid_field(cmd, true, f.lba_off, 7);
                return SCSI_PARSE_DONE;
        case CORE_ATOMIC_BAD_BOUNDARY:
                scsi_sense_invalid_field(cmd, true, f.bnd_off, 7);
                return SCSI_PARSE_DONE;
        case CORE_ATOMIC_BAD_LENGTH:
        case CORE_ATOMIC_BAD_GRAN:
                scsi_sense_invalid_field(cmd, true, f.len_off, 7);
                return SCSI_PARSE_DONE;
        case CORE_ATOMIC_UNSUPPORTED:
        default:
                /* The limits went away since the opcode was offered: as if never offered. */
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x20, 0x00);
                return SCSI_PARSE_DONE;
        }
        req_setup(cmd, CORE_OP_WRITE, f.lba, f.nlb, io_flags(f.flags) | CORE_REQ_ATOMIC);
        cmd->req.atomic_boundary = f.boundary;
        scsi_pi_setup(cmd, true, protect, true);
        scsi_group_tag(cmd, cmd->cdb[f.grp_off], true); /* streams.c */
        cmd->req.iov[0].iov_base = cmd->buf;
        cmd->req.iov[0].iov_len = (size_t)bytes;
        cmd->req.iovcnt = 1;
        /* The whole data or nothing: an initiator sending less (EDTL short) is refused by the
         * transport (SCSI_XFER_SHORT_OUT), never written in part. */
        cmd->data_out_len = (uint32_t)bytes;
        return SCSI_PARSE_EXEC;
}

/* ---- WRITE SCATTERED (16) / (32) ---- */

struct ws_fields {
        uint16_t lbdof;  /* LOGICAL BLOCK DATA OFFSET (blocks) */
        uint16_t nr;     /* NUMBER OF LBA RANGE DESCRIPTORS */
        uint32_t bt_len; /* BUFFER TRANSFER LENGTH (blocks) */
        uint8_t flags;   /* WRPROTECT 7:5, DPO 4, FUA 3 */
        uint8_t flags_off, lbdof_off, nr_off, bt_off, grp_off;
};

static void ws_decode(const uint8_t *c, struct ws_fields *f)
{
        if (c[0] == SCSI_OP_SERVICE_ACTION_OUT_16) {
                f->flags = c[2];
                f->lbdof = slate_be16(c + 4);
                f->nr = slate_be16(c + 8);
                f->bt_len = slate_be32(c + 10);
                f->flags_off = 2, f->lbdof_off = 4, f->nr_off = 8, f->bt_off = 10;
                f->grp_off = 14;
        } else { /* 7Fh, service action 0011h */
                f->flags = c[10];
                f->lbdof = slate_be16(c + 12);
                f->nr = slate_be16(c + 16);
                f->bt_len = slate_be32(c + 28);
                f->flags_off = 10, f->lbdof_off = 12, f->nr_off = 16, f->bt_off = 28;
                f->grp_off = 6;
        }
}

void scsi_scatter_limits(const struct core_ns *ns, struct scsi_scatter_limits *out)
{
        uint32_t max = CORE_MAX_TRANSFER_BYTES >> ns->block_shift;
        out->max_ranges = SCSI_SCATTER_MAX_RANGES;
        out->max_range_blocks = max;
        /* BUFFER TRANSFER LENGTH: the data after the smallest descriptor area (one block). */
        out->max_total_blocks = max - 1;
}

enum scsi_parse_result scsi_sbc_write_scattered(struct scsi_cmd *cmd)
{
        struct core_ns *ns = cmd->ns;
        struct scsi_scatter_limits lim;
        struct ws_fields f;
        uint64_t bytes;

        ws_decode(cmd->cdb, &f);
        /*
         * The Data-Out Buffer: LBDOF blocks of header and descriptors, then
         * BUFFER TRANSFER LENGTH blocks of data (as sg3_utils' sg_write_x
         * sends it and Linux scsi_debug takes it).
         */
        bytes = ((uint64_t)f.lbdof + f.bt_len) << ns->block_shift;
        cmd->xfer_len = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
        if (!check_varlen(cmd) || !check_flags(cmd, f.flags, f.flags_off, 0x18, f.grp_off, false))
                return SCSI_PARSE_DONE;
        scsi_scatter_limits(ns, &lim);
        /* SBC-4: no descriptors, or no blocks to transfer, is not an error. */
        if (!f.nr || !f.bt_len) {
                if (!scsi_check_state(cmd, CORE_CHK_WRITABLE))
                        return SCSI_PARSE_DONE;
                cmd->xfer_len = 0;
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        if (f.nr > lim.max_ranges) {
                scsi_sense_invalid_field(cmd, true, f.nr_off, 7);
                return SCSI_PARSE_DONE;
        }
        /* The header and the descriptors sit before the data, in LBDOF blocks. */
        if (!f.lbdof) {
                scsi_sense_invalid_field(cmd, true, f.lbdof_off, 7);
                return SCSI_PARSE_DONE;
        }
        if ((uint64_t)SCSI_SCATTER_DESC_LEN * (f.nr + 1u) >
            ((uint64_t)f.lbdof << ns->block_shift)) {
                scsi_sense_invalid_field(cmd, true, f.nr_off, 7);
                return SCSI_PARSE_DONE;
        }
        if (f.bt_len > lim.max_total_blocks || bytes > CORE_MAX_TRANSFER_BYTES ||
            bytes > cmd->buf_len) {
                scsi_sense_invalid_field(cmd, true, f.bt_off, 7);
                return SCSI_PARSE_DONE;
        }
        if (!scsi_check_state(cmd, CORE_CHK_WRITABLE))
                return SCSI_PARSE_DONE;
        cmd->aux = f.nr;
        cmd->lba = f.lbdof;
        cmd->data_out_len = (uint32_t)bytes;
        return SCSI_PARSE_EXEC;
}

int scsi_scatter_parse(const struct core_ns *ns, uint8_t *buf, uint32_t len, uint32_t nr,
                       uint32_t lbdof, struct core_lba_range **ranges, uint64_t *total,
                       struct scsi_scatter_err *e)
{
        uint64_t sum = 0;
        uint64_t data_blocks;
        struct scsi_scatter_limits lim;
        /* Decoded in place: range i over bytes [32 + 16i, 48 + 16i), below descriptor i + 1. */
        struct core_lba_range *r = (struct core_lba_range *)(void *)(buf + SCSI_SCATTER_DESC_LEN);

        scsi_scatter_limits(ns, &lim);
        memset(e, 0, sizeof(*e));
        if ((uint64_t)lbdof << ns->block_shift > len ||
            (uint64_t)SCSI_SCATTER_DESC_LEN * (nr + 1u) > ((uint64_t)lbdof << ns->block_shift)) {
                e->in_cdb = true; /* the CDB promised more than the buffer holds */
                e->field = -1;
                return -1;
        }
        data_blocks = (len >> ns->block_shift) - lbdof;
        for (uint32_t i = 0; i < nr; i++) {
                const uint8_t *d = buf + SCSI_SCATTER_DESC_LEN * (i + 1u);
                uint64_t lba = slate_be64(d);
                uint32_t nlb = slate_be32(d + 8);
                uint32_t off = SCSI_SCATTER_DESC_LEN * (i + 1u);
                if (nlb > lim.max_range_blocks) {
                        e->field = (int)(off + 8);
                        return -1;
                }
                if (!core_ns_range_ok(ns, lba, nlb)) {
                        e->lba_range = true;
                        e->field = (int)off;
                        return -1;
                }
                for (uint32_t j = 0; j < i && nlb; j++) {
                        if (r[j].nlb && lba < r[j].lba + r[j].nlb && r[j].lba < lba + nlb) {
                                e->field = (int)off; /* overlaps an earlier descriptor */
                                return -1;
                        }
                }
                sum += nlb;
                r[i].lba = lba;
                r[i].nlb = nlb;
        }
        if (sum > data_blocks || sum > lim.max_total_blocks) {
                /* More blocks described than BUFFER TRANSFER LENGTH brings. */
                e->in_cdb = true;
                e->field = -1;
                return -1;
        }
        *ranges = r;
        *total = sum;
        return 0;
}

void scsi_sbc_write_scattered_exec(struct scsi_cmd *cmd)
{
        struct core_ns *ns = cmd->ns;
        struct core_lba_range *ranges;
        struct core_atomic_limits al;
        struct scsi_scatter_err e;
        struct ws_fields f;
        uint64_t total;
        uint32_t nr = cmd->aux, lbdof = (uint32_t)cmd->lba, flags;

        ws_decode(cmd->cdb, &f);
        if (scsi_scatter_parse(ns, cmd->buf, cmd->data_out_len, nr, lbdof, &ranges, &total, &e) <
            0) {
                if (e.lba_range)
                        reject_range(cmd, CORE_OP_WRITE_SCATTERED);
                else if (e.in_cdb)
                        scsi_sense_invalid_field(cmd, true, f.bt_off, 7);
                else
                        scsi_sense_invalid_field(cmd, false, (uint16_t)e.field, 7);
                cmd->done(cmd);
                return;
        }
        flags = io_flags(f.flags);
        core_ns_atomic_limits(ns, &al);
        if (al.scatter_max_blocks && total <= al.scatter_max_blocks && nr <= al.scatter_max_ranges)
                flags |= CORE_REQ_ATOMIC; /* Slate's extension: the whole write, atomically */
        req_setup(cmd, CORE_OP_WRITE_SCATTERED, 0, (uint32_t)total, flags);
        cmd->req.ranges = ranges;
        cmd->req.nr_ranges = nr;
        scsi_group_tag(cmd, cmd->cdb[f.grp_off], true); /* streams.c */
        cmd->req.iov[0].iov_base = cmd->buf + ((size_t)lbdof << ns->block_shift);
        cmd->req.iov[0].iov_len = (size_t)total << ns->block_shift;
        cmd->req.iovcnt = 1;
        core_req_submit(&cmd->req);
}

void scsi_scatter_fuzz_params(struct scsi_cmd *cmd, uint32_t len)
{
        struct core_lba_range *ranges;
        struct scsi_scatter_err e;
        uint64_t total;
        if (cmd->op == NULL ||
            ((const struct scsi_op *)cmd->op)->exec != scsi_sbc_write_scattered_exec)
                return;
        (void)scsi_scatter_parse(cmd->ns, cmd->buf, len, cmd->aux, (uint32_t)cmd->lba, &ranges,
                                 &total, &e);
}
