/*
 * SBC-4 block commands: READ/WRITE (6/10/12/16), VERIFY and WRITE AND
 * VERIFY (10/12/16, BYTCHK 00b/01b/11b), ORWRITE(16), COMPARE AND WRITE,
 * WRITE SAME (10/16, NDOB; UNMAP on thin LUs, ANCHOR where ANC_SUP=1),
 * PRE-FETCH and SYNCHRONIZE CACHE (10/16), READ CAPACITY (10/16) and READ
 * DEFECT DATA (10/12).  Parse checks every CDB field and the LBA range
 * (core_ns_range_ok, overflow safe) and builds cmd->req; exec submits it
 * to the block core, whose status comes back through
 * scsi_status_from_core().  The GROUP NUMBER of reads and writes becomes
 * the request's hints and, for a permanent stream, its placement
 * (streams.c).  RD/WR/VR/ORPROTECT are pi.c's: on an LU with protection
 * information a non-zero value moves each block with its 8 bytes of PI
 * (core_ns_xfer_bytes) and sets the request's checks; READ/WRITE/VERIFY(32)
 * (type 2 LUs) decode here like the 16-byte forms.
 */
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"

/* cmd->aux flags for medium commands */
#define AUX_REPLICATE (1u << 31)  /* VERIFY BYTCHK=11b: replicate one block at exec */
#define AUX_LEN_MASK  0x7fffffffu /* READ: bytes of data-in on success */

struct rw_fields {
        uint64_t lba;
        uint32_t nlb;
        uint8_t flags;     /* CDB byte 1 (byte 10 of a 32-byte CDB; 0 for 6-byte CDBs) */
        uint8_t flags_off; /* where flags sit */
        uint8_t protect;   /* RD/WR/VR/ORPROTECT (flags bits 7:5) */
        bool md;           /* the transfer carries each block's protection information */
        uint8_t lba_off;   /* where the LBA sits, for the field pointer */
        uint8_t len_off;   /* where the transfer length sits */
        uint8_t grp_off;   /* group number byte, 0 if none */
};

static void decode(const uint8_t *c, struct rw_fields *f)
{
        memset(f, 0, sizeof(*f));
        switch (c[0]) {
        case SCSI_OP_READ_6:
        case SCSI_OP_WRITE_6:
                f->lba = slate_be24(c + 1) & 0x1fffff;
                f->nlb = c[4] ? c[4] : 256;
                f->lba_off = 1, f->len_off = 4;
                break;
        case SCSI_OP_READ_10:
        case SCSI_OP_WRITE_10:
        case SCSI_OP_WRITE_VERIFY_10:
        case SCSI_OP_VERIFY_10:
        case SCSI_OP_PREFETCH_10:
        case SCSI_OP_SYNC_CACHE_10:
        case SCSI_OP_WRITE_SAME_10:
                f->flags = c[1];
                f->lba = slate_be32(c + 2);
                f->nlb = slate_be16(c + 7);
                f->lba_off = 2, f->len_off = 7, f->grp_off = 6;
                break;
        case SCSI_OP_READ_12:
        case SCSI_OP_WRITE_12:
        case SCSI_OP_WRITE_VERIFY_12:
        case SCSI_OP_VERIFY_12:
                f->flags = c[1];
                f->lba = slate_be32(c + 2);
                f->nlb = slate_be32(c + 6);
                f->lba_off = 2, f->len_off = 6, f->grp_off = 10;
                break;
        case SCSI_OP_COMPARE_AND_WRITE:
                f->flags = c[1];
                f->lba = slate_be64(c + 2);
                f->nlb = c[13];
                f->lba_off = 2, f->len_off = 13, f->grp_off = 14;
                break;
        case SCSI_OP_VARIABLE_LENGTH: /* READ/WRITE/VERIFY(32) */
                f->flags = c[10];
                f->lba = slate_be64(c + 12);
                f->nlb = slate_be32(c + 28);
                f->lba_off = 12, f->len_off = 28, f->grp_off = 6;
                break;
        default: /* 16-byte forms */
                f->flags = c[1];
                f->lba = slate_be64(c + 2);
                f->nlb = slate_be32(c + 10);
                f->lba_off = 2, f->len_off = 10, f->grp_off = 14;
                break;
        }
        f->flags_off = c[0] == SCSI_OP_VARIABLE_LENGTH ? 10 : 1;
        f->protect = f->flags >> 5;
}

/* decode() and whether the transfer carries protection information. */
static void decode_pi(const struct scsi_cmd *cmd, struct rw_fields *f)
{
        decode(cmd->cdb, f);
        f->md = scsi_pi_host_md(cmd, f->protect);
}

/* Bytes of nlb blocks on the wire (with their protection information when f->md). */
static uint64_t wire_bytes(const struct scsi_cmd *cmd, const struct rw_fields *f, uint64_t nlb)
{
        return core_ns_xfer_bytes(cmd->ns, nlb, f->md);
}

/* Common checks: group byte reserved bits, protection field, LBA range. */
/* op: what the command would have been in the core, for the statistics of a refusal. */
static bool check_common(struct scsi_cmd *cmd, const struct rw_fields *f, uint8_t byte1_ok,
                         enum core_op op)
{
        const uint8_t *c = cmd->cdb;
        if (c[0] == SCSI_OP_VARIABLE_LENGTH) {
                if (c[7] != 0x18) { /* ADDITIONAL CDB LENGTH */
                        scsi_sense_invalid_field(cmd, true, 7, 7);
                        return false;
                }
                for (uint8_t i = 2; i < 6; i++) {
                        if (c[i]) {
                                scsi_sense_invalid_field(cmd, true, i, 7);
                                return false;
                        }
                }
                if (c[11]) {
                        scsi_sense_invalid_field(cmd, true, 11, 7);
                        return false;
                }
        }
        /* RD/WR/VR/ORPROTECT: what this LU's protection information allows (pi.c). */
        if (!scsi_pi_protect_ok(cmd, f->protect, f->flags_off))
                return false;
        if (f->flags & ~byte1_ok & 0x1f) {
                scsi_sense_invalid_field(cmd, true, f->flags_off,
                                         31 - __builtin_clz(f->flags & ~byte1_ok & 0x1f));
                return false;
        }
        if (f->grp_off && (c[f->grp_off] & 0xc0)) {
                scsi_sense_invalid_field(cmd, true, f->grp_off, 7);
                return false;
        }
        if (!core_ns_range_ok(cmd->ns, f->lba, f->nlb)) {
                scsi_status_from_core(cmd, CORE_E_LBA_RANGE, 0, false);
                core_stats_reject(cmd->ns, cmd->nexus ? cmd->nexus->host : NULL, op,
                                  CORE_E_LBA_RANGE);
                return false;
        }
        return true;
}

static bool check_wp(struct scsi_cmd *cmd)
{
        return scsi_check_state(cmd, CORE_CHK_WRITABLE);
}

/* Room for data beside scratch (scratch: the transport's, or the second half of buf). */
static uint32_t data_room(const struct scsi_cmd *cmd, bool scratch)
{
        return scratch && !cmd->scratch ? cmd->buf_len / 2 : cmd->buf_len;
}

static uint32_t scratch_room(const struct scsi_cmd *cmd)
{
        return cmd->scratch ? cmd->scratch_len : cmd->buf_len / 2;
}

/*
 * The CDB's transfer (bytes) against MAXIMUM TRANSFER LENGTH, and what will
 * be moved (moved: EDTL may cut it short) against the transport's buffer --
 * beside the scratch when the core needs one (compares).
 */
static bool check_xfer(struct scsi_cmd *cmd, const struct rw_fields *f, uint64_t bytes,
                       uint64_t moved, bool scratch)
{
        if (bytes > CORE_MAX_TRANSFER_BYTES || moved > data_room(cmd, scratch)) {
                scsi_sense_invalid_field(cmd, true, f->len_off, 7);
                return false;
        }
        return true;
}

static void req_init(struct scsi_cmd *cmd, enum core_op op, uint64_t lba, uint32_t nlb,
                     uint32_t flags)
{
        core_req_init(&cmd->req, cmd->ns, op, lba, nlb, flags, cmd->reactor, scsi_sbc_req_done,
                      cmd);
        cmd->req.nexus = cmd->nexus ? &cmd->nexus->id : NULL;
        cmd->req.host = cmd->nexus ? cmd->nexus->host : NULL;
        cmd->lba = lba;
        cmd->nlb = nlb;
}

static void req_data(struct scsi_cmd *cmd, uint32_t bytes)
{
        cmd->req.iov[0].iov_base = cmd->buf;
        cmd->req.iov[0].iov_len = bytes;
        cmd->req.iovcnt = bytes ? 1 : 0;
}

static void req_scratch(struct scsi_cmd *cmd)
{
        cmd->req.scratch = cmd->scratch ? cmd->scratch : cmd->buf + cmd->buf_len / 2;
        cmd->req.scratch_len = scratch_room(cmd);
}

/* The command's GROUP NUMBER (cmd->req built): hints, permanent stream, statistics. */
static void group_tag(struct scsi_cmd *cmd, const struct rw_fields *f, bool write)
{
        if (f->grp_off)
                scsi_group_tag(cmd, cmd->cdb[f->grp_off], write);
}

static uint32_t io_flags(uint8_t byte1)
{
        return ((byte1 & 0x08) ? CORE_REQ_FUA : 0) | ((byte1 & 0x10) ? CORE_REQ_DPO : 0);
}

void scsi_sbc_req_done(struct core_req *req)
{
        struct scsi_cmd *cmd = req->cb_arg;
        scsi_status_from_core(cmd, req->status, req->info, req->info_valid);
        if (req->status == CORE_OK && req->op == CORE_OP_READ)
                cmd->data_in_len = cmd->aux & AUX_LEN_MASK;
        cmd->done(cmd);
}

static enum scsi_parse_result good_done(struct scsi_cmd *cmd)
{
        scsi_cmd_good(cmd);
        return SCSI_PARSE_DONE;
}

/* ---- READ / WRITE ---- */

enum scsi_parse_result scsi_sbc_rw(struct scsi_cmd *cmd)
{
        bool write = cmd->op && ((const struct scsi_op *)cmd->op)->dir == SCSI_DIR_OUT;
        struct rw_fields f;
        uint32_t bs, nlb;
        uint64_t bytes;

        decode_pi(cmd, &f);
        /* A block on the wire: its data, and its protection information when the CDB asks. */
        bs = (uint32_t)wire_bytes(cmd, &f, 1);
        bytes = (uint64_t)f.nlb * bs;
        cmd->xfer_len = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
        /* 6-byte forms have no flags; others: DPO, FUA, RARC (read), obsolete bits 1..0. */
        if (!check_common(cmd, &f, write ? 0x1b : 0x1f, write ? CORE_OP_WRITE : CORE_OP_READ))
                return SCSI_PARSE_DONE;
        if (!check_xfer(cmd, &f, bytes, bytes < cmd->edtl ? bytes : cmd->edtl, false))
                return SCSI_PARSE_DONE;
        if (write && !check_wp(cmd))
                return SCSI_PARSE_DONE;
        if (write) {
                /* EDTL < transfer length: write only the whole blocks the host sends. */
                nlb = f.nlb;
                if ((uint64_t)cmd->edtl < bytes)
                        nlb = cmd->edtl / bs;
                if (!nlb)
                        return good_done(cmd);
                req_init(cmd, CORE_OP_WRITE, f.lba, nlb, io_flags(f.flags));
                req_data(cmd, nlb * bs);
                scsi_pi_setup(cmd, true, f.protect, true);
                group_tag(cmd, &f, true);
                cmd->data_out_len = nlb * bs;
        } else {
                uint32_t want = (uint64_t)cmd->edtl < bytes ? cmd->edtl : (uint32_t)bytes;
                nlb = (want + bs - 1) / bs;
                if (!nlb)
                        return good_done(cmd);
                req_init(cmd, CORE_OP_READ, f.lba, nlb, io_flags(f.flags));
                req_data(cmd, nlb * bs);
                scsi_pi_setup(cmd, false, f.protect, true);
                group_tag(cmd, &f, false);
                cmd->aux = want;
        }
        return SCSI_PARSE_EXEC;
}

/* ---- VERIFY / WRITE AND VERIFY ---- */

static void verify_exec(struct scsi_cmd *cmd)
{
        if (cmd->aux & AUX_REPLICATE) {
                uint32_t bs = (uint32_t)core_ns_xfer_bytes(cmd->ns, 1, cmd->req.pi.host_md);
                for (uint32_t i = 1; i < cmd->nlb; i++)
                        memcpy(cmd->buf + (size_t)i * bs, cmd->buf, bs);
        }
        core_req_submit(&cmd->req);
}

enum scsi_parse_result scsi_sbc_verify(struct scsi_cmd *cmd)
{
        struct rw_fields f;
        uint32_t bs;
        uint8_t bytchk;
        uint64_t bytes;

        decode_pi(cmd, &f);
        bs = (uint32_t)wire_bytes(cmd, &f, 1);
        bytchk = (f.flags >> 1) & 0x03;
        if (!check_common(cmd, &f, 0x16, CORE_OP_VERIFY))
                return SCSI_PARSE_DONE;
        if (bytchk == 0x02) {
                scsi_sense_invalid_field(cmd, true, 1, 2);
                return SCSI_PARSE_DONE;
        }
        bytes = (uint64_t)f.nlb * bs;
        if (bytchk == 0) {
                cmd->xfer_len = 0;
                if (!f.nlb)
                        return good_done(cmd);
                req_init(cmd, CORE_OP_VERIFY, f.lba, f.nlb, io_flags(f.flags & 0x10));
                scsi_pi_setup(cmd, false, f.protect, false);
                return SCSI_PARSE_EXEC;
        }
        if (!check_xfer(cmd, &f, bytes, bytes, true))
                return SCSI_PARSE_DONE;
        cmd->xfer_len = bytchk == 0x03 ? (f.nlb ? bs : 0) : (uint32_t)bytes;
        if (!f.nlb)
                return good_done(cmd);
        if (cmd->edtl < cmd->xfer_len) {
                scsi_sense_invalid_field(cmd, true, f.len_off, 7);
                return SCSI_PARSE_DONE;
        }
        req_init(cmd, CORE_OP_COMPARE, f.lba, f.nlb, io_flags(f.flags & 0x10));
        req_data(cmd, (uint32_t)bytes);
        scsi_pi_setup(cmd, false, f.protect, true);
        req_scratch(cmd);
        cmd->data_out_len = cmd->xfer_len;
        if (bytchk == 0x03)
                cmd->aux = AUX_REPLICATE;
        return SCSI_PARSE_EXEC;
}

enum scsi_parse_result scsi_sbc_write_verify(struct scsi_cmd *cmd)
{
        struct rw_fields f;
        uint32_t bs, nlb;
        uint64_t bytes;

        decode_pi(cmd, &f);
        bs = (uint32_t)wire_bytes(cmd, &f, 1);
        bytes = (uint64_t)f.nlb * bs;
        cmd->xfer_len = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
        if (!check_common(cmd, &f, 0x13, CORE_OP_WRITE))
                return SCSI_PARSE_DONE;
        if (f.flags & 0x04) { /* BYTCHK 10b/11b are reserved here */
                scsi_sense_invalid_field(cmd, true, 1, 2);
                return SCSI_PARSE_DONE;
        }
        if (!check_xfer(cmd, &f, bytes, bytes < cmd->edtl ? bytes : cmd->edtl, false) ||
            !check_wp(cmd))
                return SCSI_PARSE_DONE;
        nlb = f.nlb;
        if ((uint64_t)cmd->edtl < bytes)
                nlb = cmd->edtl / bs;
        if (!nlb)
                return good_done(cmd);
        /* Written durably before status; the medium check is the write itself. */
        req_init(cmd, CORE_OP_WRITE, f.lba, nlb, CORE_REQ_FUA | io_flags(f.flags & 0x10));
        req_data(cmd, nlb * bs);
        scsi_pi_setup(cmd, true, f.protect, true);
        group_tag(cmd, &f, true);
        cmd->data_out_len = nlb * bs;
        return SCSI_PARSE_EXEC;
}

/* ---- COMPARE AND WRITE / ORWRITE ---- */

enum scsi_parse_result scsi_sbc_caw(struct scsi_cmd *cmd)
{
        struct rw_fields f;
        uint32_t bs;
        uint32_t max;
        uint64_t bytes;

        decode_pi(cmd, &f);
        bs = (uint32_t)wire_bytes(cmd, &f, 1);
        max = (CORE_SMALL_TRANSFER_BYTES / 2) / bs;
        bytes = 2ull * f.nlb * bs;
        cmd->xfer_len = (uint32_t)bytes;
        if (cmd->cdb[10] || cmd->cdb[11] || cmd->cdb[12]) {
                scsi_sense_invalid_field(cmd, true, 10, 7);
                return SCSI_PARSE_DONE;
        }
        if (!check_common(cmd, &f, 0x1a, CORE_OP_COMPARE_AND_WRITE))
                return SCSI_PARSE_DONE;
        if (f.nlb > (max > 255 ? 255 : max)) {
                scsi_sense_invalid_field(cmd, true, 13, 7);
                return SCSI_PARSE_DONE;
        }
        if (!check_wp(cmd))
                return SCSI_PARSE_DONE;
        /*
         * The data-out must be exactly the compare and write halves.  This
         * also catches a 256-block request whose one-byte NUMBER OF LOGICAL
         * BLOCKS wrapped to 0 while the initiator sends 256 blocks of data.
         */
        if (cmd->edtl != bytes) {
                scsi_sense_invalid_field(cmd, true, 13, 7);
                return SCSI_PARSE_DONE;
        }
        if (!f.nlb)
                return good_done(cmd);
        req_init(cmd, CORE_OP_COMPARE_AND_WRITE, f.lba, f.nlb, io_flags(f.flags));
        req_data(cmd, (uint32_t)bytes);
        scsi_pi_setup(cmd, true, f.protect, true);
        group_tag(cmd, &f, true);
        req_scratch(cmd);
        cmd->data_out_len = (uint32_t)bytes;
        return SCSI_PARSE_EXEC;
}

enum scsi_parse_result scsi_sbc_orwrite(struct scsi_cmd *cmd)
{
        struct rw_fields f;
        uint64_t bytes;

        decode_pi(cmd, &f);
        bytes = wire_bytes(cmd, &f, f.nlb);
        cmd->xfer_len = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
        /* media |= data happens in scratch: it must hold the whole range. */
        if (!check_common(cmd, &f, 0x1a, CORE_OP_ORWRITE) ||
            !check_xfer(cmd, &f, bytes, bytes > scratch_room(cmd) ? UINT32_MAX : bytes, true) ||
            !check_wp(cmd))
                return SCSI_PARSE_DONE;
        if (!f.nlb)
                return good_done(cmd);
        if (cmd->edtl < bytes) {
                scsi_sense_invalid_field(cmd, true, f.len_off, 7);
                return SCSI_PARSE_DONE;
        }
        req_init(cmd, CORE_OP_ORWRITE, f.lba, f.nlb, io_flags(f.flags));
        req_data(cmd, (uint32_t)bytes);
        scsi_pi_setup(cmd, true, f.protect, true);
        scsi_pi_setup_rmw(cmd);
        group_tag(cmd, &f, true);
        req_scratch(cmd);
        cmd->data_out_len = (uint32_t)bytes;
        return SCSI_PARSE_EXEC;
}

/* ---- WRITE SAME ---- */

enum scsi_parse_result scsi_sbc_write_same(struct scsi_cmd *cmd)
{
        struct rw_fields f;
        bool sixteen = cmd->cdb[0] == SCSI_OP_WRITE_SAME_16;
        uint32_t bs;
        bool ndob;

        decode_pi(cmd, &f);
        bs = (uint32_t)wire_bytes(cmd, &f, 1);
        ndob = sixteen && (f.flags & 0x01);
        cmd->xfer_len = ndob ? 0 : bs;
        /* UNMAP/ANCHOR pass the common check so write protection is reported first. */
        if (!check_common(cmd, &f, (sixteen ? 0x01 : 0x00) | 0x18, CORE_OP_WRITE_SAME))
                return SCSI_PARSE_DONE;
        if (!check_wp(cmd))
                return SCSI_PARSE_DONE;
        /*
         * SBC-4 5.48: ANCHOR needs UNMAP and ANC_SUP=1; UNMAP needs a thin
         * LU (LBPWS=0 otherwise).
         */
        bool anchor = f.flags & 0x10;
        if ((anchor && (!(f.flags & 0x08) || !core_ns_can_anchor(cmd->ns))) ||
            ((f.flags & 0x08) && !cmd->ns->thin)) {
                scsi_sense_invalid_field(cmd, true, 1, anchor ? 4 : 3);
                return SCSI_PARSE_DONE;
        }
        if (f.nlb > SCSI_MAX_WRITE_SAME_LEN) { /* Block Limits MAXIMUM WRITE SAME LENGTH */
                scsi_sense_invalid_field(cmd, true, f.len_off, 7);
                return SCSI_PARSE_DONE;
        }
        if (!f.nlb) {
                /*
                 * WSNZ=0 in the Block Limits page: zero blocks means from
                 * LBA to the end of the medium (SBC-4 5.48).  The range
                 * check above already refused an LBA past the end.
                 */
                uint64_t rest = cmd->ns->num_blocks - f.lba;
                if (rest > SCSI_MAX_WRITE_SAME_LEN) {
                        /* More than MAXIMUM WRITE SAME LENGTH to the end (SBC-4 5.48). */
                        scsi_sense_invalid_field(cmd, true, f.len_off, 7);
                        return SCSI_PARSE_DONE;
                }
                if (rest == 0)
                        return good_done(cmd);
                f.nlb = (uint32_t)rest;
        }
        if (ndob) {
                req_init(cmd, (f.flags & 0x08) ? CORE_OP_DEALLOCATE : CORE_OP_WRITE_ZEROES, f.lba,
                         f.nlb, anchor ? CORE_REQ_ANCHOR : 0);
                scsi_pi_setup(cmd, true, f.protect, false);
                return SCSI_PARSE_EXEC;
        }
        if (cmd->edtl != bs) {
                scsi_sense_invalid_field(cmd, true, f.len_off, 7);
                return SCSI_PARSE_DONE;
        }
        if (f.flags & 0x08) {
                /*
                 * UNMAP on a thin LU: deallocate the range (it reads back as
                 * zeroes, LBPRZ=1) whatever the block holds, as hosts and
                 * libiscsi expect; the data-out block is taken and ignored.
                 */
                req_init(cmd, CORE_OP_DEALLOCATE, f.lba, f.nlb, anchor ? CORE_REQ_ANCHOR : 0);
                cmd->data_out_len = bs;
                return SCSI_PARSE_EXEC;
        }
        req_init(cmd, CORE_OP_WRITE_SAME, f.lba, f.nlb, 0);
        req_data(cmd, bs);
        scsi_pi_setup(cmd, true, f.protect, true);
        group_tag(cmd, &f, true);
        req_scratch(cmd); /* the core replicates the block there */
        cmd->data_out_len = bs;
        return SCSI_PARSE_EXEC;
}

/* ---- PRE-FETCH / SYNCHRONIZE CACHE ---- */

enum scsi_parse_result scsi_sbc_prefetch(struct scsi_cmd *cmd)
{
        struct rw_fields f;
        decode(cmd->cdb, &f);
        if (!check_common(cmd, &f, 0x02, CORE_OP_PREFETCH))
                return SCSI_PARSE_DONE;
        if (!f.nlb)
                return good_done(cmd);
        /* GOOD, not CONDITION MET: we make no promise the range fits a cache. */
        req_init(cmd, CORE_OP_PREFETCH, f.lba, f.nlb, 0);
        return SCSI_PARSE_EXEC;
}

enum scsi_parse_result scsi_sbc_sync_cache(struct scsi_cmd *cmd)
{
        struct rw_fields f;
        decode(cmd->cdb, &f);
        /* IMMED (bit 1) and the obsolete SYNC_NV (bit 2) are accepted. */
        if (!check_common(cmd, &f, 0x06, CORE_OP_FLUSH))
                return SCSI_PARSE_DONE;
        req_init(cmd, CORE_OP_FLUSH, f.lba, f.nlb, 0);
        return SCSI_PARSE_EXEC;
}

/* ---- READ CAPACITY / READ DEFECT DATA ---- */

enum scsi_parse_result scsi_sbc_read_capacity10(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        struct core_ns *ns = cmd->ns;
        uint64_t last = core_ns_blocks(ns) - 1; /* never 0 blocks; one load (resize) */

        cmd->xfer_len = 8;
        if (!(c[8] & 0x01) && slate_be32(c + 2)) {
                scsi_sense_invalid_field(cmd, true, 2, 7);
                return SCSI_PARSE_DONE;
        }
        slate_put_be(cmd->buf, 4, last > UINT32_MAX ? UINT32_MAX : last);
        slate_put_be(cmd->buf + 4, 4, ns->block_size);
        scsi_cmd_data_in(cmd, 8, 8);
        return SCSI_PARSE_DONE;
}

enum scsi_parse_result scsi_sbc_read_capacity16(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        struct core_ns *ns = cmd->ns;
        struct scsi_read_capacity16 *d = (void *)cmd->buf;
        uint32_t alloc = slate_be32(c + 10);

        cmd->xfer_len = alloc;
        if (!(c[14] & 0x01) && slate_be64(c + 2)) {
                scsi_sense_invalid_field(cmd, true, 2, 7);
                return SCSI_PARSE_DONE;
        }
        memset(d, 0, sizeof(*d));
        put_be64(&d->last_lba, core_ns_blocks(ns) - 1);
        put_be32(&d->block_len, ns->block_size);
        /*
         * P_TYPE (type - 1) and PROT_EN, P_I_EXPONENT (pi.c); LBPPBE:
         * logical blocks per physical block (exponent), the first one
         * aligned at LBA 0; thin: LBPME and LBPRZ (deallocated blocks read
         * zeroes).
         */
        uint8_t type = scsi_lu_pi_type(ns);
        if (type)
                d->prot = (uint8_t)(((type - 1) << 1) | 0x01);
        d->lbppbe = (uint8_t)(ns->phys_exp | (scsi_lu_pi_exp(ns) << 4));
        if (ns->thin)
                put_be16(&d->lowest_aligned, 0xc000);
        scsi_cmd_data_in(cmd, sizeof(*d), alloc);
        return SCSI_PARSE_DONE;
}

enum scsi_parse_result scsi_sbc_read_defect(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint8_t *b = cmd->buf;
        bool twelve = c[0] == SCSI_OP_READ_DEFECT_DATA_12;
        uint8_t req = twelve ? c[1] : c[2];
        uint32_t alloc = twelve ? slate_be32(c + 6) : slate_be16(c + 7);
        uint32_t len = twelve ? 8 : 4;

        cmd->xfer_len = alloc;
        memset(b, 0, len);
        /* An empty list in the requested format; PLISTV/GLISTV as requested. */
        b[1] = req & 0x1f;
        scsi_cmd_data_in(cmd, len, alloc);
        return SCSI_PARSE_DONE;
}

/* VERIFY's exec step (the opcode table points here). */
void scsi_sbc_verify_exec(struct scsi_cmd *cmd)
{
        verify_exec(cmd);
}
