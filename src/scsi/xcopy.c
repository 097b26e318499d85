/*
 * Third-party copy, the SCSI side (SPC-5 5.17, 6.3 COPY OPERATION ABORT,
 * 6.4 EXTENDED COPY(LID4), 6.5 EXTENDED COPY(LID1), 6.18-6.26 the RECEIVE
 * commands): the CDBs and the parameter lists are checked here; the data
 * moves in the block core's copy engine (core/copy.h, the one NVMe Copy
 * drives too), never over the network.
 *
 * EXTENDED COPY (LID1, and LID4 with its 48-byte header and 4-byte LIST
 * IDENTIFIER): identification CSCD descriptors (E4h) name the source and
 * destination logical units by a VPD 83h designator (any LU designator
 * Slate reports: NAA, UUID); a CSCD resolves to any LU the issuing
 * initiator reaches through any target port of this slated (target.c), so
 * copies between LUs and targets work.  Block -> block segment descriptors
 * (02h) and block with offset -> block with offset (0Ah) in whole blocks
 * (byte offsets and byte counts multiples of the block size) become the
 * ranges of one core copy; the command completes when the copy does,
 * except LID4 with IMMED, which completes once every segment is checked
 * and leaves the copy running in the background.  Every descriptor is
 * checked, and every segment resolved and range-checked, before any data
 * moves: a bad segment leaves nothing half done.  ABORT TASK, COPY
 * OPERATION ABORT, resets and I_T nexus loss cancel the copy at its next
 * chunk.
 *
 * Copy operations and their results live in one bounded store
 * (SCSI_XCOPY_MAX_CONCURRENT slots, no allocation): per I_T nexus and
 * LIST IDENTIFIER, as the RECEIVE commands read them (LID1: COPY STATUS,
 * RECEIVE DATA, FAILED SEGMENT DETAILS; LID4: RECEIVE COPY STATUS,
 * RECEIVE COPY DATA, RECEIVE ROD TOKEN INFORMATION; OPERATING PARAMETERS
 * reports the limits).  A result is kept until the same nexus reuses its
 * LIST ID, the nexus ends, or the store needs the slot for a new copy (the
 * oldest finished result goes first); LID1 failed segment details are
 * discarded once returned.  A LIST ID in use by a running copy of the same
 * nexus gets OPERATION IN PROGRESS.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "slate/spec/scsi.h"
#include "core/copy.h"
#include "scsi/internal.h"

/*
 * Protection information (issue 10): each block's PI moves with it (core/copy.h);
 * the source blocks are checked as a READ with RDPROTECT 000b checks them
 * (guard; type 1: the reference tag, from the LBA), so a copy never
 * spreads a block a read would call corrupt.  SPC-5 gives EXTENDED COPY
 * no protection field.
 */
static void pi_ranges(struct core_copy_range *r, unsigned n)
{
        for (unsigned i = 0; i < n; i++) {
                if (!r[i].src)
                        continue;
                r[i].src_chk = CORE_PI_CHK_GUARD;
                if (scsi_lu_pi_type(r[i].src) == 1)
                        r[i].src_chk |= CORE_PI_CHK_REF;
                r[i].src_ref = (uint32_t)r[i].src_lba;
        }
}

/* Token copy (ODX, below): sizes and ROD types (SPC-5 5.17.6, SBC-4 5.9). */
#define ODX_TOKEN_LEN       512u
#define ODX_WUT_HDR         536u
#define ODX_ROD_DEFAULT     0x00800000u
#define ODX_ROD_CHANGE_VULN 0x00800001u
#define ODX_ROD_ANY         0x0080ffffu
#define ODX_ROD_ZERO        0xffff0001u
#define ODX_RANGE_LEN       16u

/* COPY MANAGER STATUS (SPC-5 6.18.3) */
#define CMS_IN_PROGRESS 0x00
#define CMS_DONE_OK     0x01
#define CMS_DONE_ERROR  0x02

enum xc_state { XC_FREE = 0, XC_RUNNING, XC_DONE };

/* The command that started a copy operation (its service action of 83h). */
enum xc_kind { XC_LID1 = 0x00, XC_LID4 = 0x01, XC_PT = 0x10, XC_WUT = 0x11 };

struct xc_op {
        enum xc_state state;
        enum xc_kind kind;
        const struct scsi_nexus *nexus; /* owner; NULL once the nexus is gone */
        bool has_id;                    /* LIST ID USAGE 00b/10b: results are kept */
        uint32_t list_id;  /* one name space for every copy command of a nexus (SPC-5 5.17.4.2) */
        uint64_t seq;      /* age, for eviction */
        bool status_valid; /* COPY STATUS not returned yet (it is discarded once returned) */
        bool immed; /* EXTENDED COPY(LID4) or WRITE USING TOKEN with IMMED: no command waits */
        int token;  /* POPULATE TOKEN: the token it created (index), or -1 */
        uint64_t token_id;
        bool partial; /* WRITE USING TOKEN: the token had fewer blocks than asked for */
        bool zeroing; /* WRITE USING TOKEN of the block device zero token */

        /* Results (RECEIVE COPY RESULTS). */
        uint8_t cms;
        uint16_t segs_done;
        uint64_t bytes_done;
        uint8_t cmd_status;            /* SAM status of the EXTENDED COPY */
        uint8_t sense[SCSI_SENSE_MAX]; /* its sense, for FAILED SEGMENT DETAILS */
        uint8_t sense_len;
        bool details; /* failed segment details held */

        /* While it runs. */
        struct scsi_cmd *cmd;
        unsigned nseg;
        struct core_ns *cscd_ns[SCSI_XCOPY_MAX_CSCD]; /* referenced */
        struct core_copy copy;
        /* The issuing nexus's identity for the copy's reservation checks: a copy, since an
         * IMMED copy outlives its command and may outlive the nexus. */
        struct core_pr_nexus nexus_id;
        struct core_copy_range ranges[SCSI_XCOPY_MAX_SEGS];
        uint16_t seg_of_range[SCSI_XCOPY_MAX_SEGS];
        uint32_t block_size;
};

static pthread_mutex_t xc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct xc_op xc_ops[SCSI_XCOPY_MAX_CONCURRENT];
static uint64_t xc_seq;

/* ---- parameter list (SPC-5 6.4.3) ---- */

static int err_il(struct scsi_xcopy_err *e, uint8_t asc, uint8_t ascq, int field, int bit)
{
        e->copy_aborted = false;
        e->asc = asc;
        e->ascq = ascq;
        e->field = field;
        e->bit = bit;
        return -EINVAL;
}

static int err_ca(struct scsi_xcopy_err *e, uint8_t asc, uint8_t ascq, unsigned seg, int field)
{
        e->copy_aborted = true;
        e->asc = asc;
        e->ascq = ascq;
        e->segment = (uint16_t)seg;
        e->field = field;
        e->bit = -1;
        return -EINVAL;
}

/* The LID4 header (SPC-5 6.4.2): 48 bytes, the LID1 fields moved and a 4-byte LIST IDENTIFIER. */
static int lid4_header(const uint8_t *p, struct scsi_xcopy_list *l, struct scsi_xcopy_err *e)
{
        bool g_sense = (p[15] & 0x02) != 0;

        if (p[0] != 0x01) /* PARAMETER LIST FORMAT */
                return err_il(e, 0x26, 0x00, 0, 7);
        l->list_id = slate_be32(p + 20);
        l->immed = (p[15] & 0x01) != 0;
        /* SPC-5 6.4.2: IMMED with G_SENSE, or with no list identifier, is INVALID FIELD IN CDB. */
        if (l->immed && (g_sense || l->usage == 0x03))
                return err_il(e, 0x24, 0x00, -1, -1);
        if (slate_be16(p + 2) != 0x0020) /* HEADER CSCD DESCRIPTOR LIST LENGTH */
                return err_il(e, 0x26, 0x00, 2, 7);
        for (int i = 4; i <= 14; i++)
                if (p[i])
                        return err_il(e, 0x26, 0x00, i, 7);
        if (p[15] & 0xfc)
                return err_il(e, 0x26, 0x00, 15, 7);
        /* Our choice: GOOD status never carries sense data here, so G_SENSE is refused. */
        if (g_sense)
                return err_il(e, 0x26, 0x00, 15, 1);
        if (p[16] != 0xff) /* HEADER CSCD DESCRIPTOR TYPE CODE */
                return err_il(e, 0x26, 0x00, 16, 7);
        for (int i = 17; i <= 41; i++)
                if ((i < 20 || i > 23) && p[i])
                        return err_il(e, 0x26, 0x00, i, 7);
        return 0;
}

int scsi_xcopy_parse_list(const uint8_t *p, uint32_t len, bool lid4, struct scsi_xcopy_list *l,
                          struct scsi_xcopy_err *e)
{
        /* Where the header's fields are: LID1 (SPC-5 6.5.2) or LID4 (6.4.2). */
        const uint32_t hl = lid4 ? SCSI_XCOPY_LID4_HDR : SCSI_XCOPY_LID1_HDR;
        const int f_cscd = lid4 ? 42 : 2, f_seg = lid4 ? 44 : 8, f_inl = lid4 ? 46 : 12;
        const int f_id = lid4 ? 20 : 0;
        uint32_t tdll, sdll, inl, off, end;

        memset(l, 0, sizeof(*l));
        memset(e, 0, sizeof(*e));
        l->lid4 = lid4;
        if (len < hl)
                return err_il(e, 0x1a, 0x00, -1, -1); /* PARAMETER LIST LENGTH ERROR */
        l->usage = (p[1] >> 3) & 0x03;
        l->priority = p[1] & 0x07;
        if (p[1] & 0xc0)
                return err_il(e, 0x26, 0x00, 1, (p[1] & 0x80) ? 7 : 6);
        if (l->usage == 0x01) /* reserved */
                return err_il(e, 0x26, 0x00, 1, 4);
        if (lid4) {
                if (lid4_header(p, l, e) < 0)
                        return -EINVAL;
                tdll = slate_be16(p + 42);
                sdll = slate_be16(p + 44);
                inl = slate_be16(p + 46);
        } else {
                l->list_id = p[0];
                for (int i = 4; i < 8; i++)
                        if (p[i])
                                return err_il(e, 0x26, 0x00, i, 7);
                tdll = slate_be16(p + 2);
                sdll = slate_be32(p + 8);
                inl = slate_be32(p + 12);
        }
        if (l->usage == 0x03 && l->list_id) /* no list ID: LIST IDENTIFIER zero */
                return err_il(e, 0x26, 0x00, f_id, 7);
        if ((uint64_t)tdll + sdll > SCSI_XCOPY_MAX_DESC_LIST)
                return err_il(e, 0x1a, 0x00, -1, -1);
        if ((uint64_t)hl + tdll + sdll + inl > len)
                return err_il(e, 0x1a, 0x00, -1, -1);
        if (inl) /* MAXIMUM INLINE DATA LENGTH is 0: no segment type here uses it */
                return err_il(e, 0x26, 0x00, f_inl, 7);

        /* CSCD descriptors: identification descriptors (E4h), 32 bytes each. */
        for (off = hl, end = hl + tdll; off < end; off += SCSI_XCOPY_CSCD_LEN) {
                const uint8_t *d = p + off;
                if (l->ncscd == SCSI_XCOPY_MAX_CSCD) /* TOO MANY TARGET DESCRIPTORS */
                        return err_il(e, 0x26, 0x06, f_cscd, 7);
                if (d[0] != 0xe4) /* UNSUPPORTED TARGET DESCRIPTOR TYPE CODE */
                        return err_il(e, 0x26, 0x07, (int)off, 7);
                if (end - off < SCSI_XCOPY_CSCD_LEN)
                        return err_il(e, 0x26, 0x00, f_cscd, 7);
                /*
                 * Byte 1: LU ID TYPE and NUL are ignored for identification
                 * descriptors (SPC-4 and later); the peripheral device type
                 * must be a block device, the only kind Slate serves.
                 */
                if (d[1] & 0x1f)
                        return err_il(e, 0x26, 0x00, (int)off + 1, 4);
                if (d[7] > 20) /* DESIGNATOR LENGTH: the field is 20 bytes */
                        return err_il(e, 0x26, 0x00, (int)off + 7, 7);
                l->cscd[l->ncscd++] = d;
        }

        /*
         * Segment descriptors: block -> block (02h, 28 bytes) and block with
         * offset -> block with offset (0Ah, 32 bytes: NUMBER OF BYTES @8,
         * the two LBAs @12 and @20, the two BLOCK DEVICE BYTE OFFSETs @28
         * and @30; SPC-5 6.4.6.12).
         */
        for (off = hl + tdll, end = off + sdll; off < end;) {
                const uint8_t *d = p + off;
                struct scsi_xcopy_seg *s;
                uint32_t dl;
                if (l->nseg == SCSI_XCOPY_MAX_SEGS) /* TOO MANY SEGMENT DESCRIPTORS */
                        return err_il(e, 0x26, 0x08, f_seg, 7);
                if (d[0] == 0x02)
                        dl = SCSI_XCOPY_SEG_B2B_LEN;
                else if (d[0] == 0x0a)
                        dl = SCSI_XCOPY_SEG_B2B_OFF_LEN;
                else /* UNSUPPORTED SEGMENT DESCRIPTOR TYPE CODE */
                        return err_il(e, 0x26, 0x09, (int)off, 7);
                if (end - off < 4 || slate_be16(d + 2) != dl - 4)
                        return err_il(e, 0x26, 0x00, (int)off + 2, 7);
                if (end - off < dl)
                        return err_il(e, 0x1a, 0x00, -1, -1);
                s = &l->seg[l->nseg++];
                s->type = d[0];
                s->src = slate_be16(d + 4);
                s->dst = slate_be16(d + 6);
                s->src_lba = slate_be64(d + 12);
                s->dst_lba = slate_be64(d + 20);
                if (d[0] == 0x02) {
                        /* Byte 1: FCO (2), DC (1), CAT (0); the rest is reserved. */
                        if (d[1] & 0xf8)
                                return err_il(e, 0x26, 0x00, (int)off + 1, 7);
                        if (d[8] || d[9])
                                return err_il(e, 0x26, 0x00, (int)off + (d[8] ? 8 : 9), 7);
                        s->dc = (d[1] & 0x02) != 0;
                        s->nlb = slate_be16(d + 10);
                } else {
                        /* Byte 1: CAT (0) only; 0Ah has no DC bit. */
                        if (d[1] & 0xfe)
                                return err_il(e, 0x26, 0x00, (int)off + 1, 7);
                        s->nbytes = slate_be32(d + 8);
                        s->src_off = slate_be16(d + 28);
                        s->dst_off = slate_be16(d + 30);
                }
                off += dl;
        }
        return 0;
}

static void err_to_sense(struct scsi_cmd *cmd, const struct scsi_xcopy_err *e)
{
        if (e->copy_aborted)
                scsi_sense_copy_aborted(cmd, e->asc, e->ascq, e->segment, e->field, true);
        else if (e->field >= 0)
                scsi_sense_field(cmd, e->asc, e->ascq, false, (uint16_t)e->field, e->bit);
        else
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, e->asc, e->ascq);
}

/* ---- the store ---- */

/* Caller holds xc_lock. */
static struct xc_op *find_op(const struct scsi_nexus *nx, uint32_t list_id)
{
        for (unsigned i = 0; i < SCSI_XCOPY_MAX_CONCURRENT; i++) {
                struct xc_op *op = &xc_ops[i];
                if (op->state != XC_FREE && op->has_id && op->nexus == nx && op->list_id == list_id)
                        return op;
        }
        return NULL;
}

/* A slot for a new copy of nx (caller holds xc_lock): a free one, else the oldest result. */
static struct xc_op *alloc_op(void)
{
        struct xc_op *old = NULL;
        for (unsigned i = 0; i < SCSI_XCOPY_MAX_CONCURRENT; i++) {
                struct xc_op *op = &xc_ops[i];
                if (op->state == XC_FREE)
                        return op;
                if (op->state == XC_DONE && (!old || op->seq < old->seq))
                        old = op;
        }
        return old;
}

void scsi_xcopy_nexus_lost(const struct scsi_nexus *nx)
{
        pthread_mutex_lock(&xc_lock);
        for (unsigned i = 0; i < SCSI_XCOPY_MAX_CONCURRENT; i++) {
                struct xc_op *op = &xc_ops[i];
                if (op->nexus != nx || op->state == XC_FREE)
                        continue;
                if (op->state == XC_DONE)
                        op->state = XC_FREE;
                else
                        op->nexus = NULL; /* freed when it ends */
        }
        pthread_mutex_unlock(&xc_lock);
}

/* ---- EXTENDED COPY(LID1) ---- */

enum scsi_parse_result scsi_xcopy_parse(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint32_t len = slate_be32(c + 10);

        cmd->xfer_len = len;
        if (c[1] & 0xe0) {
                scsi_sense_invalid_field(cmd, true, 1, 7);
                return SCSI_PARSE_DONE;
        }
        for (uint16_t i = 2; i <= 14; i++) {
                if (i >= 10 && i <= 13)
                        continue;
                if (c[i]) {
                        scsi_sense_invalid_field(cmd, true, i, 7);
                        return SCSI_PARSE_DONE;
                }
        }
        if (len == 0) { /* SPC-5 6.4.1: not an error, nothing to copy */
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        if (len > SCSI_XCOPY_MAX_PARAM_LEN || len > cmd->buf_len || len > cmd->edtl) {
                scsi_sense_invalid_field(cmd, true, 10, 7);
                return SCSI_PARSE_DONE;
        }
        cmd->data_out_len = len;
        return SCSI_PARSE_EXEC;
}

struct odx_token;
static int pt_check(struct scsi_cmd *cmd, struct odx_token *t, uint32_t *rod_type);
static int wut_check(struct scsi_cmd *cmd, uint64_t *blocks);
static struct odx_token *fuzz_token(void);

void scsi_xcopy_fuzz_params(struct scsi_cmd *cmd, uint32_t len)
{
        struct scsi_xcopy_list l;
        struct scsi_xcopy_err e;
        uint32_t rod_type;
        uint64_t blocks;
        if (cmd->cdb[0] != SCSI_OP_EXTENDED_COPY)
                return;
        cmd->data_out_len = len;
        switch (cmd->cdb[1] & 0x1f) {
        case 0x00:
        case 0x01:
                if (scsi_xcopy_parse_list(cmd->buf, len, (cmd->cdb[1] & 0x1f) == 0x01, &l, &e) < 0)
                        err_to_sense(cmd, &e);
                break;
        case 0x10:
                (void)pt_check(cmd, fuzz_token(), &rod_type);
                break;
        case 0x11:
                if (len >= ODX_WUT_HDR)
                        (void)wut_check(cmd, &blocks);
                break;
        }
}

/* Drop the CSCD references of op (its copy is over or never started). */
static void put_refs(struct xc_op *op)
{
        for (unsigned i = 0; i < SCSI_XCOPY_MAX_CSCD; i++) {
                if (op->cscd_ns[i])
                        core_ns_put(op->cscd_ns[i]);
                op->cscd_ns[i] = NULL;
        }
}

/* The LU a CSCD names, referenced in op->cscd_ns (resolved once per list). */
static struct core_ns *cscd_ns(struct scsi_cmd *cmd, struct xc_op *op,
                               const struct scsi_xcopy_list *l, unsigned idx)
{
        const uint8_t *desig = l->cscd[idx] + 4;
        if (op->cscd_ns[idx])
                return op->cscd_ns[idx];
        if (scsi_vpd_lu_designator_match(cmd->ns, desig)) {
                core_ns_get(cmd->ns);
                op->cscd_ns[idx] = cmd->ns;
        } else {
                op->cscd_ns[idx] = scsi_lu_by_designator(cmd->nexus, desig);
        }
        return op->cscd_ns[idx];
}

/* Resolve every segment into op's ranges; 0, or -EINVAL with the COPY ABORTED in *e. */
static int build_ranges(struct scsi_cmd *cmd, struct xc_op *op, const struct scsi_xcopy_list *l,
                        struct scsi_xcopy_err *e)
{
        unsigned n = 0;
        for (unsigned i = 0; i < l->nseg; i++) {
                const struct scsi_xcopy_seg *s = &l->seg[i];
                struct core_ns *src, *dst;
                uint64_t src_lba, dst_lba;
                uint32_t nlb;
                if (s->src >= l->ncscd) /* UNREACHABLE COPY TARGET */
                        return err_ca(e, 0x08, 0x04, i, 4);
                if (s->dst >= l->ncscd)
                        return err_ca(e, 0x08, 0x04, i, 6);
                src = cscd_ns(cmd, op, l, s->src);
                if (!src) /* COPY TARGET DEVICE NOT REACHABLE */
                        return err_ca(e, 0x0d, 0x02, i, 4);
                dst = cscd_ns(cmd, op, l, s->dst);
                if (!dst)
                        return err_ca(e, 0x0d, 0x02, i, 6);
                /* DISK BLOCK LENGTH of each CSCD, and one block size for both ends. */
                if (slate_be24(l->cscd[s->src] + 29) != src->block_size ||
                    slate_be24(l->cscd[s->dst] + 29) != dst->block_size ||
                    src->block_size != dst->block_size)
                        return err_ca(e, 0x26, 0x0c, i, -1);
                nlb = s->nlb;
                src_lba = s->src_lba;
                dst_lba = s->dst_lba;
                if (s->type == 0x0a) {
                        /*
                         * 0Ah in whole blocks only (the engine copies blocks):
                         * byte offsets and the byte count multiples of the
                         * block size (DATA SEGMENT GRANULARITY, RECEIVE COPY
                         * OPERATING PARAMETERS), else COPY ABORTED, INVALID
                         * FIELD IN PARAMETER LIST pointing at the field.
                         */
                        uint32_t bs = src->block_size;
                        if (s->nbytes % bs)
                                return err_ca(e, 0x26, 0x00, i, 8);
                        if (s->src_off % bs)
                                return err_ca(e, 0x26, 0x00, i, 28);
                        if (s->dst_off % bs)
                                return err_ca(e, 0x26, 0x00, i, 30);
                        if (s->nbytes / bs > SCSI_XCOPY_MAX_SEG_BLOCKS) /* MAXIMUM SEGMENT LENGTH */
                                return err_ca(e, 0x26, 0x00, i, 8);
                        nlb = s->nbytes / bs;
                        src_lba += s->src_off / bs;
                        dst_lba += s->dst_off / bs;
                }
                /* Beyond the end of a copy target: the segment pointer names the LBA. */
                if (src_lba < s->src_lba || !core_ns_range_ok(src, src_lba, nlb))
                        return err_ca(e, 0x00, 0x00, i, 12);
                if (dst_lba < s->dst_lba || !core_ns_range_ok(dst, dst_lba, nlb))
                        return err_ca(e, 0x00, 0x00, i, 20);
                if (!nlb)
                        continue;
                op->ranges[n] = (struct core_copy_range){
                    .src = src, .src_lba = src_lba, .dst = dst, .dst_lba = dst_lba, .nlb = nlb};
                op->seg_of_range[n] = (uint16_t)i;
                n++;
        }
        op->copy.nranges = n;
        return 0;
}

/* Record how op ended (status/sense of cmd), and free an anonymous one (caller holds xc_lock). */
static void op_finish_locked(struct xc_op *op, uint8_t status, const uint8_t *sense,
                             uint8_t sense_len, uint16_t segs, uint64_t bytes)
{
        op->cms = status == SAM_STAT_GOOD ? CMS_DONE_OK : CMS_DONE_ERROR;
        op->segs_done = segs;
        op->bytes_done = bytes;
        op->cmd_status = status;
        op->sense_len = sense_len;
        memcpy(op->sense, sense, sense_len);
        op->details = status != SAM_STAT_GOOD;
        op->status_valid = true;
        op->cmd = NULL;
        op->seq = ++xc_seq;
        op->state = op->has_id && op->nexus ? XC_DONE : XC_FREE;
}

static void op_finish(struct xc_op *op, struct scsi_cmd *cmd, uint16_t segs, uint64_t bytes)
{
        pthread_mutex_lock(&xc_lock);
        op_finish_locked(op, cmd->status, cmd->sense, cmd->sense_len, segs, bytes);
        pthread_mutex_unlock(&xc_lock);
}

/*
 * A slot for a new copy operation of cmd's nexus with list_id (has_id:
 * results kept): NULL with cmd's sense set when the LIST ID is in use by a
 * running operation (OPERATION IN PROGRESS) or no slot is free (BUSY).
 */
static struct xc_op *start_op(struct scsi_cmd *cmd, enum xc_kind kind, bool has_id,
                              uint32_t list_id)
{
        struct xc_op *op;
        pthread_mutex_lock(&xc_lock);
        if (has_id) {
                op = find_op(cmd->nexus, list_id);
                if (op && op->state == XC_RUNNING) {
                        pthread_mutex_unlock(&xc_lock);
                        /* SPC-5 5.17.4.2: a duplicate LIST ID of a copy still running. */
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x00, 0x16);
                        return NULL;
                }
                if (op) /* the same LIST ID again: the old results go */
                        op->state = XC_FREE;
        }
        op = alloc_op();
        if (!op) {
                pthread_mutex_unlock(&xc_lock);
                scsi_status_from_core(cmd, CORE_E_NO_RESOURCES, 0, false);
                return NULL;
        }
        memset(op, 0, sizeof(*op));
        op->state = XC_RUNNING;
        op->kind = kind;
        op->nexus = cmd->nexus;
        op->has_id = has_id;
        op->list_id = list_id;
        op->cms = CMS_IN_PROGRESS;
        op->cmd = cmd;
        op->token = -1;
        op->block_size = cmd->ns->block_size;
        pthread_mutex_unlock(&xc_lock);
        return op;
}

static void wut_done(struct xc_op *op, enum core_status st, uint64_t blocks);

/* The copy's nexus for reservation checks: op's own copy of cmd's (NULL: none). */
static const struct core_pr_nexus *op_nexus(struct xc_op *op, const struct scsi_cmd *cmd)
{
        if (!cmd->nexus)
                return NULL;
        op->nexus_id = cmd->nexus->id;
        return &op->nexus_id;
}

static void copy_done(struct core_copy *c)
{
        struct xc_op *op = c->cb_arg;
        struct scsi_cmd *cmd = op->cmd, tmp;
        uint64_t blocks = atomic_load(&c->blocks_done);
        uint16_t segs = (uint16_t)op->nseg;

        put_refs(op);
        if (op->kind == XC_WUT) {
                wut_done(op, c->status, blocks);
                return;
        }
        if (!cmd) { /* LID4 with IMMED: the result is for RECEIVE COPY STATUS(LID4) */
                memset(&tmp, 0, sizeof(tmp));
                cmd = &tmp;
        }
        cmd->aux = 0;
        if (c->status == CORE_OK) {
                scsi_cmd_good(cmd);
        } else {
                uint8_t asc, ascq;
                unsigned seg =
                    c->failed_range < c->nranges ? op->seg_of_range[c->failed_range] : op->nseg;
                segs = (uint16_t)seg;
                if (scsi_core_sense_code(c->status, &asc, &ascq))
                        scsi_sense_copy_aborted(cmd, asc, ascq, seg, -1, true);
                else /* RESERVATION CONFLICT, BUSY, TASK ABORTED */
                        scsi_status_from_core(cmd, c->status, 0, false);
        }
        op_finish(op, cmd, segs, blocks * op->block_size);
        if (cmd != &tmp)
                cmd->done(cmd);
}

void scsi_xcopy_exec(struct scsi_cmd *cmd)
{
        bool lid4 = (cmd->cdb[1] & 0x1f) == 0x01;
        struct scsi_xcopy_list l;
        struct scsi_xcopy_err e;
        struct xc_op *op;

        cmd->aux = 0;
        if (scsi_xcopy_parse_list(cmd->buf, cmd->data_out_len, lid4, &l, &e) < 0) {
                err_to_sense(cmd, &e);
                goto out;
        }
        op = start_op(cmd, lid4 ? XC_LID4 : XC_LID1, l.usage != 0x03, l.list_id);
        if (!op)
                goto out;
        op->nseg = l.nseg;

        core_copy_init(&op->copy, op->ranges, 0, 0, cmd->reactor, copy_done, op);
        op->copy.nexus = op_nexus(op, cmd);
        if (build_ranges(cmd, op, &l, &e) < 0) {
                put_refs(op);
                err_to_sense(cmd, &e);
                op_finish(op, cmd, e.segment, 0);
                goto out;
        }
        if (op->copy.nranges == 0) { /* only empty segments */
                put_refs(op);
                scsi_cmd_good(cmd);
                op_finish(op, cmd, (uint16_t)l.nseg, 0);
                goto out;
        }
        op->block_size = op->ranges[0].src->block_size;
        cmd->aux = (uint32_t)(op - xc_ops) + 1;
        if (l.immed) {
                /* LID4 IMMED: GOOD once every segment checked, the copy goes on behind. */
                pthread_mutex_lock(&xc_lock);
                op->immed = true;
                op->cmd = NULL;
                pthread_mutex_unlock(&xc_lock);
                cmd->aux = 0;
                scsi_cmd_good(cmd);
                scsi_cmd_finish_deferred(cmd);
        }
        pi_ranges(op->ranges, op->copy.nranges);
        core_copy_submit(&op->copy);
        return;
out:
        scsi_cmd_finish_deferred(cmd);
}

void scsi_xcopy_abort(struct scsi_cmd *cmd)
{
        struct xc_op *op;
        if (!cmd->aux || cmd->aux > SCSI_XCOPY_MAX_CONCURRENT)
                return;
        op = &xc_ops[cmd->aux - 1];
        /* On the command's reactor: the copy cannot end under our feet here. */
        if (op->state == XC_RUNNING && op->cmd == cmd)
                core_copy_cancel(&op->copy);
}

/* COPY OPERATION ABORT (SPC-5 6.3): like ABORT TASK for the copy operation with that LIST ID. */
enum scsi_parse_result scsi_copy_op_abort_parse(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        struct xc_op *op;

        if (c[1] & 0xe0) {
                scsi_sense_invalid_field(cmd, true, 1, 7);
                return SCSI_PARSE_DONE;
        }
        for (uint16_t i = 6; i <= 14; i++) {
                if (c[i]) {
                        scsi_sense_invalid_field(cmd, true, i, 7);
                        return SCSI_PARSE_DONE;
                }
        }
        pthread_mutex_lock(&xc_lock);
        op = cmd->nexus ? find_op(cmd->nexus, slate_be32(c + 2)) : NULL;
        if (!op || op->state != XC_RUNNING) {
                pthread_mutex_unlock(&xc_lock);
                /* Not processing a copy operation with that list identifier. */
                scsi_sense_invalid_field(cmd, true, 2, 7);
                return SCSI_PARSE_DONE;
        }
        /* Under xc_lock the operation cannot end and its slot be reused meanwhile. */
        core_copy_cancel(&op->copy);
        pthread_mutex_unlock(&xc_lock);
        scsi_cmd_good(cmd);
        return SCSI_PARSE_DONE;
}

/* ---- RECEIVE COPY RESULTS (SPC-5 6.18) ---- */

/* Progress of a running EXTENDED COPY: whole segments and bytes so far (caller holds xc_lock). */
static void progress(const struct xc_op *op, uint16_t *segs, uint64_t *bytes)
{
        uint64_t blocks = atomic_load(&op->copy.blocks_done), sum = 0;
        unsigned r = 0;
        while (r < op->copy.nranges && sum + op->ranges[r].nlb <= blocks)
                sum += op->ranges[r++].nlb;
        *segs = r < op->copy.nranges ? op->seg_of_range[r] : (uint16_t)op->nseg;
        *bytes = blocks * op->block_size;
}

/* COPY STATUS (00h): 12 bytes. */
static uint32_t copy_status(const struct xc_op *op, uint8_t *b)
{
        uint64_t count = op->bytes_done;
        uint16_t segs = op->segs_done;
        uint8_t units = 0;

        if (op->state == XC_RUNNING)
                progress(op, &segs, &count);
        /* TRANSFER COUNT UNITS: bytes, then powers of 1024 until it fits in 32 bits. */
        while (count > UINT32_MAX && units < 6) {
                count >>= 10;
                units++;
        }
        memset(b, 0, 12);
        slate_put_be(b, 4, 8);
        b[4] = op->cms; /* HDD 0: no held data is ever discarded (none is held) */
        slate_put_be(b + 5, 2, segs);
        b[7] = units;
        slate_put_be(b + 8, 4, count);
        return 12;
}

/* OPERATING PARAMETERS (03h): the limits scsi_xcopy_parse_list enforces. */
static uint32_t op_params(const struct core_ns *ns, uint8_t *b)
{
        memset(b, 0, 47);
        slate_put_be(b, 4, 43);
        b[4] = 0x01; /* SNLID: LIST ID USAGE 11b (no list identifier) is supported */
        slate_put_be(b + 8, 2, SCSI_XCOPY_MAX_CSCD);
        slate_put_be(b + 10, 2, SCSI_XCOPY_MAX_SEGS);
        slate_put_be(b + 12, 4, SCSI_XCOPY_MAX_DESC_LIST);
        slate_put_be(b + 16, 4, (uint64_t)SCSI_XCOPY_MAX_SEG_BLOCKS << ns->block_shift);
        /* MAXIMUM INLINE DATA LENGTH, HELD DATA LIMIT, MAXIMUM STREAM DEVICE TRANSFER SIZE: 0 */
        slate_put_be(b + 34, 2, SCSI_XCOPY_MAX_CONCURRENT); /* TOTAL CONCURRENT COPIES */
        b[36] = SCSI_XCOPY_MAX_CONCURRENT;                  /* MAXIMUM CONCURRENT COPIES */
        b[37] = (uint8_t)ns->block_shift;                   /* DATA SEGMENT GRANULARITY */
        b[43] = 3;                                          /* IMPLEMENTED DESCRIPTOR LIST LENGTH */
        b[44] = 0x02;
        b[45] = 0x0a;
        b[46] = 0xe4;
        return 47;
}

static enum scsi_parse_result lid4_results(struct scsi_cmd *cmd, uint8_t sa);

enum scsi_parse_result scsi_rcr_parse(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint8_t sa = c[1] & 0x1f;
        uint32_t alloc = slate_be32(c + 10), n = 0;
        uint8_t *b = cmd->buf;
        struct xc_op *op;

        cmd->xfer_len = alloc;
        if (c[1] & 0xe0) {
                scsi_sense_invalid_field(cmd, true, 1, 7);
                return SCSI_PARSE_DONE;
        }
        if (sa >= 0x05 && sa <= 0x07) /* a 4-byte LIST IDENTIFIER */
                return lid4_results(cmd, sa);
        for (uint16_t i = 3; i <= 14; i++) {
                if (i >= 10 && i <= 13)
                        continue;
                if (c[i]) {
                        scsi_sense_invalid_field(cmd, true, i, 7);
                        return SCSI_PARSE_DONE;
                }
        }
        if (sa == 0x03) {
                n = op_params(cmd->ns, b);
                scsi_cmd_data_in(cmd, n, alloc);
                return SCSI_PARSE_DONE;
        }
        pthread_mutex_lock(&xc_lock);
        op = cmd->nexus ? find_op(cmd->nexus, c[2]) : NULL;
        if (op && op->kind != XC_LID1)
                op = NULL;
        if (op && sa == 0x00 && op->state == XC_DONE && !op->status_valid)
                op = NULL; /* its COPY STATUS was returned already */
        if (!op) {
                pthread_mutex_unlock(&xc_lock);
                /* No copy operation of this nexus with that LIST IDENTIFIER. */
                scsi_sense_invalid_field(cmd, true, 2, 7);
                return SCSI_PARSE_DONE;
        }
        switch (sa) {
        case 0x00:
                n = copy_status(op, b);
                /* SPC-5 6.25: discarded once returned; the record may still hold details. */
                if (op->state == XC_DONE) {
                        op->status_valid = false;
                        if (!op->details)
                                op->state = XC_FREE;
                }
                break;
        case 0x01: /* RECEIVE DATA: no segment type here holds data */
                memset(b, 0, 4);
                n = 4;
                break;
        case 0x04: /* FAILED SEGMENT DETAILS */
                memset(b, 0, 60);
                if (op->state == XC_DONE && op->details) {
                        slate_put_be(b, 4, 56u + op->sense_len);
                        b[56] = op->cmd_status;
                        slate_put_be(b + 58, 2, op->sense_len);
                        memcpy(b + 60, op->sense, op->sense_len);
                        n = 60u + op->sense_len;
                        /* Discarded once transferred whole (SPC-5 6.18.5). */
                        if (alloc >= n) {
                                op->details = false;
                                if (!op->status_valid)
                                        op->state = XC_FREE;
                        }
                } else {
                        n = 4; /* AVAILABLE DATA 0: running, or it did not fail */
                }
                break;
        default: /* the opcode table has no other service action */
                n = 0;
                break;
        }
        pthread_mutex_unlock(&xc_lock);
        scsi_cmd_data_in(cmd, n, alloc);
        return SCSI_PARSE_DONE;
}

/*
 * ---- Token copy ("ODX"): POPULATE TOKEN, WRITE USING TOKEN (SBC-4 5.9,
 * 5.53), RECEIVE ROD TOKEN INFORMATION (SPC-5 6.26) ----
 *
 * A ROD token is 512 bytes of type "point in time copy - default"
 * (800000h) or, when asked, "change vulnerable" (800001h): Slate keeps no
 * snapshot, so a token stays valid only while its source LU is not
 * written.  The check is the namespace's write counter (core stats
 * write_ops: every write, write zeroes, unmap, copy chunk), captured at
 * POPULATE TOKEN and compared at every WRITE USING TOKEN: any write to
 * the source LU after the token was made, anywhere in it, revokes the
 * token (INVALID TOKEN OPERATION, TOKEN REVOKED), which costs nothing on
 * the data path.  The token names its source by the creator LU
 * descriptor (an identification CSCD), resolved at use like an EXTENDED
 * COPY CSCD, so a token is usable through any target port whose initiator
 * reaches the source LU; bytes the host cannot guess (getrandom) make it
 * unforgeable.  Tokens live in a bounded store (SCSI_ODX_MAX_TOKENS) until
 * their inactivity timeout passes, DEL_TKN deletes them, or a new token
 * needs the slot (an expired one first, else the least recently used).  The block device zero ROD
 * token (FFFF0001h) makes WRITE USING TOKEN write zeroes.
 */

struct odx_token {
        bool used;
        uint8_t bytes[ODX_TOKEN_LEN];
        uint64_t id;
        const struct core_ns *src; /* identity only: resolved again at each use */
        uint64_t write_gen;        /* core_stats_ops(WRITE) of src at POPULATE TOKEN */
        uint32_t block_size;
        uint32_t timeout_s;
        uint64_t last_use_s;
        unsigned nranges;
        struct {
                uint64_t lba;
                uint32_t nlb;
        } r[SCSI_ODX_MAX_RANGES];
        uint64_t blocks;
};

_Static_assert(SCSI_ODX_MAX_TOKEN_BYTES <= CORE_COPY_MAX_BYTES, "a token is one core copy");
_Static_assert(2 * SCSI_ODX_MAX_RANGES + SCSI_ODX_MAX_TOKEN_BYTES / CORE_COPY_MAX_RANGE_BYTES <=
                   CORE_COPY_MAX_RANGES,
               "a WRITE USING TOKEN maps to at most CORE_COPY_MAX_RANGES ranges");
_Static_assert(SCSI_ODX_MAX_RANGES <= SCSI_XCOPY_MAX_SEGS, "zeroing uses the segment ranges");

static struct odx_token tokens[SCSI_ODX_MAX_TOKENS];

static struct odx_token *fuzz_token(void)
{
        static struct odx_token t;
        return &t;
}
static uint64_t token_seq;

static uint64_t now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec;
}

static bool token_expired(const struct odx_token *t, uint64_t now)
{
        return now - t->last_use_s > t->timeout_s;
}

/* Check the block device range descriptors at p (n bytes) against ns: 0, or the sense set. */
static int odx_ranges(struct scsi_cmd *cmd, const uint8_t *p, uint32_t off, uint32_t n,
                      uint64_t *blocks)
{
        uint64_t total = 0;
        if (n % ODX_RANGE_LEN || n == 0) {
                scsi_sense_invalid_field(cmd, false, (uint16_t)(off - 2), 7);
                return -1;
        }
        if (n / ODX_RANGE_LEN > SCSI_ODX_MAX_RANGES) { /* TOO MANY SEGMENT DESCRIPTORS */
                scsi_sense_field(cmd, 0x26, 0x08, false, (uint16_t)(off - 2), 7);
                return -1;
        }
        for (uint32_t k = 0; k < n; k += ODX_RANGE_LEN) {
                const uint8_t *d = p + off + k;
                uint64_t lba = slate_be64(d);
                uint32_t nlb = slate_be32(d + 8);
                if (!core_ns_range_ok(cmd->ns, lba, nlb)) {
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x21, 0x00);
                        return -1;
                }
                total += nlb;
        }
        if (total > SCSI_ODX_MAX_TOKEN_BYTES >> cmd->ns->block_shift) {
                scsi_sense_invalid_field(cmd, false, (uint16_t)(off + 8), 7);
                return -1;
        }
        *blocks = total;
        return 0;
}

/* The CDB of POPULATE TOKEN and WRITE USING TOKEN (SBC-4 5.9, 5.53): same layout. */
enum scsi_parse_result scsi_odx_parse(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint32_t len = slate_be32(c + 10);
        uint32_t min = (c[1] & 0x1f) == 0x10 ? 16u + ODX_RANGE_LEN : ODX_WUT_HDR + ODX_RANGE_LEN;

        cmd->xfer_len = len;
        if (c[1] & 0xe0) {
                scsi_sense_invalid_field(cmd, true, 1, 7);
                return SCSI_PARSE_DONE;
        }
        for (uint16_t i = 2; i <= 5; i++) {
                if (c[i]) {
                        scsi_sense_invalid_field(cmd, true, i, 7);
                        return SCSI_PARSE_DONE;
                }
        }
        if (c[14] & 0xe0) {
                scsi_sense_invalid_field(cmd, true, 14, 7);
                return SCSI_PARSE_DONE;
        }
        if (len == 0) { /* nothing to do (SBC-4 5.9.1) */
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        if (len < min) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                return SCSI_PARSE_DONE;
        }
        if (len > SCSI_XCOPY_MAX_PARAM_LEN || len > cmd->buf_len || len > cmd->edtl) {
                scsi_sense_invalid_field(cmd, true, 10, 7);
                return SCSI_PARSE_DONE;
        }
        if ((c[1] & 0x1f) == 0x11 && !scsi_check_state(cmd, CORE_CHK_WRITABLE))
                return SCSI_PARSE_DONE;
        cmd->data_out_len = len;
        return SCSI_PARSE_EXEC;
}

/* The parameter list of POPULATE TOKEN: 0 with the token's ranges in *t, or the sense set. */
static int pt_check(struct scsi_cmd *cmd, struct odx_token *t, uint32_t *rod_type)
{
        const uint8_t *p = cmd->buf;
        uint32_t len = cmd->data_out_len, dl = slate_be16(p), rdl = slate_be16(p + 14), to;

        if (dl + 2u > len || dl + 2u < 16u + rdl || 16u + rdl > len) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                return -1;
        }
        if (p[2] & 0xfc) {
                scsi_sense_invalid_field(cmd, false, 2, 7);
                return -1;
        }
        *rod_type = ODX_ROD_DEFAULT;
        if (p[2] & 0x02) { /* RTV */
                uint32_t rt = slate_be32(p + 8);
                if (rt == ODX_ROD_CHANGE_VULN || rt == ODX_ROD_ANY)
                        *rod_type = ODX_ROD_CHANGE_VULN;
                else if (rt != ODX_ROD_DEFAULT) {
                        scsi_sense_invalid_field(cmd, false, 8, 7);
                        return -1;
                }
        }
        to = slate_be32(p + 4);
        if (to > SCSI_ODX_MAX_INACTIVITY_S) {
                scsi_sense_invalid_field(cmd, false, 4, 7);
                return -1;
        }
        t->timeout_s = to ? to : SCSI_ODX_DEFAULT_INACTIVITY_S;
        if (odx_ranges(cmd, p, 16, rdl, &t->blocks) < 0)
                return -1;
        t->nranges = rdl / ODX_RANGE_LEN;
        for (unsigned i = 0; i < t->nranges; i++) {
                t->r[i].lba = slate_be64(p + 16 + 16 * i);
                t->r[i].nlb = slate_be32(p + 16 + 16 * i + 8);
        }
        return 0;
}

/* The identification CSCD naming ns (its NAA designator), for the creator LU field. */
static void creator_desc(const struct core_ns *ns, uint8_t *d)
{
        uint8_t inq[1024];
        struct scsi_cmd tmp;
        memset(&tmp, 0, sizeof(tmp));
        tmp.ns = (struct core_ns *)ns;
        memset(d, 0, 32);
        d[0] = 0xe4;
        if (scsi_vpd_build(&tmp, 0x83, inq, sizeof(inq)) > 8) {
                const uint8_t *naa = inq + 4; /* the first designator: NAA */
                memcpy(d + 4, naa, 4u + naa[3]);
                d[4] &= 0x0f;
                d[5] &= 0x3f;
        }
        slate_put_be(d + 29, 3, ns->block_size);
}

static void pt_exec(struct scsi_cmd *cmd)
{
        struct odx_token t = {0};
        uint32_t rod_type;
        struct xc_op *op;
        uint64_t now = now_s();
        int slot = -1;

        if (pt_check(cmd, &t, &rod_type) < 0)
                goto out;
        op = start_op(cmd, XC_PT, true, slate_be32(cmd->cdb + 6));
        if (!op)
                goto out;
        t.used = true;
        t.src = cmd->ns;
        t.write_gen = core_stats_ops(&cmd->ns->stats, CORE_OPC_WRITE);
        t.block_size = cmd->ns->block_size;
        t.last_use_s = now;
        slate_put_be(t.bytes, 4, rod_type);
        slate_put_be(t.bytes + 6, 2, ODX_TOKEN_LEN - 8);
        creator_desc(cmd->ns, t.bytes + 16);
        slate_put_be(t.bytes + 56, 8, t.blocks << cmd->ns->block_shift); /* bytes represented */
        if (getrandom(t.bytes + 128, 32, GRND_NONBLOCK) != 32) {
                /* No entropy yet: a token others could guess is no token. */
                scsi_status_from_core(cmd, CORE_E_NO_RESOURCES, 0, false);
                op_finish(op, cmd, 0, 0);
                goto out;
        }
        pthread_mutex_lock(&xc_lock);
        /* A free or expired slot, else the least recently used token is deleted. */
        for (unsigned i = 0; i < SCSI_ODX_MAX_TOKENS; i++) {
                if (!tokens[i].used || token_expired(&tokens[i], now)) {
                        slot = (int)i;
                        break;
                }
                if (slot < 0 || tokens[i].last_use_s < tokens[slot].last_use_s)
                        slot = (int)i;
        }
        t.id = ((uint64_t)slot << 48) | (++token_seq & 0xffffffffffffull);
        slate_put_be(t.bytes + 8, 8, t.id);
        tokens[slot] = t;
        op->token = slot;
        op->token_id = t.id;
        pthread_mutex_unlock(&xc_lock);
        scsi_cmd_good(cmd);
        op_finish(op, cmd, 1, t.blocks);
out:
        scsi_cmd_finish_deferred(cmd);
}

/* INVALID TOKEN OPERATION (23h/ascq). */
static void token_error(struct scsi_cmd *cmd, uint8_t ascq)
{
        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x23, ascq);
}

/* Zeroes for the block device zero ROD token: one core request per destination range. */
static void zero_next(struct core_req *req);

static void zero_submit(struct xc_op *op)
{
        struct scsi_cmd *cmd = op->cmd;
        while (op->nseg < op->copy.nranges) {
                struct core_copy_range *r = &op->ranges[op->nseg];
                core_req_init(&cmd->req, r->dst, CORE_OP_WRITE_ZEROES, r->dst_lba, (uint32_t)r->nlb,
                              0, cmd->reactor, zero_next, op);
                cmd->req.nexus = cmd->nexus ? &cmd->nexus->id : NULL;
                core_req_submit(&cmd->req);
                return;
        }
        wut_done(op, CORE_OK, atomic_load(&op->copy.blocks_done));
}

static void zero_next(struct core_req *req)
{
        struct xc_op *op = req->cb_arg;
        if (req->status != CORE_OK) {
                wut_done(op, req->status, atomic_load(&op->copy.blocks_done));
                return;
        }
        if (atomic_load(&op->copy.cancel)) { /* ABORT TASK or COPY OPERATION ABORT */
                atomic_fetch_add(&op->copy.blocks_done, op->ranges[op->nseg].nlb);
                wut_done(op, CORE_E_ABORTED, atomic_load(&op->copy.blocks_done));
                return;
        }
        atomic_fetch_add(&op->copy.blocks_done, op->ranges[op->nseg].nlb);
        op->nseg++;
        zero_submit(op);
}

/*
 * The destination ranges of a WRITE USING TOKEN, filled in order from the
 * token's data starting offset blocks into it: the core copy ranges, split
 * where a source or a destination range ends or CORE_COPY_MAX_RANGE_BYTES
 * would be exceeded.  Returns the blocks mapped (fewer than the
 * destination asks for when the token runs out).
 */
static uint64_t wut_map(struct xc_op *op, const struct odx_token *t, struct core_ns *src,
                        struct core_ns *dst, const uint8_t *d, unsigned nd, uint64_t offset)
{
        unsigned si = 0, n = 0;
        uint64_t s_off = offset, total = 0, max = CORE_COPY_MAX_RANGE_BYTES >> dst->block_shift;
        while (si < t->nranges && s_off >= t->r[si].nlb)
                s_off -= t->r[si++].nlb;
        for (unsigned di = 0; di < nd; di++) {
                uint64_t lba = slate_be64(d + 16 * di), left = slate_be32(d + 16 * di + 8);
                while (left && si < t->nranges && n < CORE_COPY_MAX_RANGES) {
                        uint64_t k = t->r[si].nlb - s_off;
                        if (k > left)
                                k = left;
                        if (k > max)
                                k = max;
                        op->ranges[n++] = (struct core_copy_range){.src = src,
                                                                   .src_lba = t->r[si].lba + s_off,
                                                                   .dst = dst,
                                                                   .dst_lba = lba,
                                                                   .nlb = k};
                        lba += k;
                        left -= k;
                        total += k;
                        s_off += k;
                        if (s_off == t->r[si].nlb) {
                                si++;
                                s_off = 0;
                        }
                }
        }
        op->copy.nranges = n;
        return total;
}

/*
 * The parameter list of WRITE USING TOKEN without the token store: lengths,
 * flags, destination ranges, the token's length and type.  0 with the
 * destination's block count in *blocks, or the sense set.
 */
static int wut_check(struct scsi_cmd *cmd, uint64_t *blocks)
{
        const uint8_t *p = cmd->buf, *tok = p + 16;
        uint32_t len = cmd->data_out_len, dl = slate_be16(p), rdl = slate_be16(p + 534);
        uint32_t rod_type = slate_be32(tok);

        if (dl + 2u > len || dl + 2u < ODX_WUT_HDR + rdl || ODX_WUT_HDR + rdl > len) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                return -1;
        }
        if (p[2] & 0xfc) {
                scsi_sense_invalid_field(cmd, false, 2, 7);
                return -1;
        }
        if (odx_ranges(cmd, p, ODX_WUT_HDR, rdl, blocks) < 0)
                return -1;
        if (slate_be16(tok + 6) != ODX_TOKEN_LEN - 8) {
                token_error(cmd, 0x0a); /* INVALID TOKEN LENGTH */
                return -1;
        }
        if (rod_type == ODX_ROD_ZERO) {
                if (slate_be64(p + 8)) { /* no offset into zeroes */
                        scsi_sense_invalid_field(cmd, false, 8, 7);
                        return -1;
                }
        } else if (rod_type != ODX_ROD_DEFAULT && rod_type != ODX_ROD_CHANGE_VULN) {
                token_error(cmd, 0x01); /* UNSUPPORTED TOKEN TYPE */
                return -1;
        }
        return 0;
}

static void wut_exec(struct scsi_cmd *cmd)
{
        const uint8_t *p = cmd->buf, *tok = p + 16;
        uint32_t rdl = slate_be16(p + 534);
        uint64_t offset = slate_be64(p + 8), blocks, mapped, now = now_s();
        uint32_t rod_type = slate_be32(tok);
        struct odx_token t;
        struct core_ns *src = NULL;
        struct xc_op *op;
        int slot;

        if (wut_check(cmd, &blocks) < 0)
                goto out;
        if (rod_type == ODX_ROD_ZERO) {
                memset(&t, 0, sizeof(t));
        } else {
                uint64_t id = slate_be64(tok + 8);
                slot = (int)(id >> 48);
                pthread_mutex_lock(&xc_lock);
                if (slot >= (int)SCSI_ODX_MAX_TOKENS || !tokens[slot].used ||
                    tokens[slot].id != id || memcmp(tokens[slot].bytes, tok, ODX_TOKEN_LEN)) {
                        pthread_mutex_unlock(&xc_lock);
                        token_error(cmd, 0x04); /* TOKEN UNKNOWN */
                        goto out;
                }
                if (token_expired(&tokens[slot], now)) {
                        tokens[slot].used = false;
                        pthread_mutex_unlock(&xc_lock);
                        token_error(cmd, 0x07); /* TOKEN EXPIRED */
                        goto out;
                }
                tokens[slot].last_use_s = now;
                t = tokens[slot];
                pthread_mutex_unlock(&xc_lock);
                /* The source LU, as this initiator reaches it, and unchanged since. */
                src = scsi_vpd_lu_designator_match(cmd->ns, tok + 20)
                          ? (core_ns_get(cmd->ns), cmd->ns)
                          : scsi_lu_by_designator(cmd->nexus, tok + 20);
                if (!src) {
                        token_error(cmd, 0x04);
                        goto out;
                }
                if (src != t.src || core_stats_ops(&src->stats, CORE_OPC_WRITE) != t.write_gen) {
                        core_ns_put(src);
                        token_error(cmd, 0x06); /* TOKEN REVOKED */
                        goto out;
                }
                if (src->block_size != cmd->ns->block_size) {
                        core_ns_put(src);
                        scsi_sense_invalid_field(cmd, false, 16, 7);
                        goto out;
                }
                if (offset >= t.blocks) { /* OFFSET INTO ROD beyond its data */
                        core_ns_put(src);
                        scsi_sense_invalid_field(cmd, false, 8, 7);
                        goto out;
                }
        }
        op = start_op(cmd, XC_WUT, true, slate_be32(cmd->cdb + 6));
        if (!op) {
                if (src)
                        core_ns_put(src);
                goto out;
        }
        /* IMMED: the copy goes on in the background (zeroing never does). */
        op->immed = (p[2] & 0x01) && rod_type != ODX_ROD_ZERO;
        op->zeroing = rod_type == ODX_ROD_ZERO;
        core_copy_init(&op->copy, op->ranges, 0, 0, cmd->reactor, copy_done, op);
        op->copy.nexus = op_nexus(op, cmd);
        core_ns_get(cmd->ns);
        op->cscd_ns[0] = cmd->ns;
        op->cscd_ns[1] = src;
        if (rod_type == ODX_ROD_ZERO) {
                unsigned nd = rdl / ODX_RANGE_LEN;
                for (unsigned i = 0; i < nd; i++)
                        op->ranges[i] = (struct core_copy_range){
                            .dst = cmd->ns,
                            .dst_lba = slate_be64(p + ODX_WUT_HDR + 16 * i),
                            .nlb = slate_be32(p + ODX_WUT_HDR + 16 * i + 8)};
                op->copy.nranges = nd;
                mapped = blocks;
        } else {
                mapped =
                    wut_map(op, &t, src, cmd->ns, p + ODX_WUT_HDR, rdl / ODX_RANGE_LEN, offset);
        }
        /* Fewer blocks than asked for: "completed with partial ROD token usage" (03h). */
        op->partial = mapped < blocks;
        if (p[2] & 0x02 && rod_type != ODX_ROD_ZERO) { /* DEL_TKN: this is its last use */
                pthread_mutex_lock(&xc_lock);
                if (tokens[t.id >> 48].id == t.id)
                        tokens[t.id >> 48].used = false;
                pthread_mutex_unlock(&xc_lock);
        }
        cmd->aux = (uint32_t)(op - xc_ops) + 1;
        if (op->immed) {
                /* IMMED: status now; RECEIVE ROD TOKEN INFORMATION reports the end. */
                scsi_cmd_good(cmd);
                op->cmd = NULL;
                cmd->aux = 0;
                scsi_cmd_finish_deferred(cmd);
        }
        if (op->zeroing) {
                op->nseg = 0;
                zero_submit(op);
                return;
        }
        if (op->copy.nranges == 0) {
                wut_done(op, CORE_OK, 0);
                return;
        }
        pi_ranges(op->ranges, op->copy.nranges);
        core_copy_submit(&op->copy);
        return;
out:
        scsi_cmd_finish_deferred(cmd);
}

static void wut_done(struct xc_op *op, enum core_status st, uint64_t blocks)
{
        struct scsi_cmd *cmd = op->cmd, tmp;

        put_refs(op);
        if (!cmd) { /* IMMED: nobody waits; the result is for RECEIVE ROD TOKEN INFORMATION */
                memset(&tmp, 0, sizeof(tmp));
                cmd = &tmp;
        }
        cmd->aux = 0;
        if (st == CORE_OK)
                scsi_cmd_good(cmd);
        else
                scsi_status_from_core(cmd, st, 0, false);
        op_finish(op, cmd, st == CORE_OK, blocks);
        if (cmd != &tmp)
                cmd->done(cmd);
}

void scsi_odx_exec(struct scsi_cmd *cmd)
{
        cmd->aux = 0;
        if ((cmd->cdb[1] & 0x1f) == 0x10)
                pt_exec(cmd);
        else
                wut_exec(cmd);
}

/* COPY OPERATION STATUS (SPC-5 6.24) of a token operation. */
static uint8_t odx_status(const struct xc_op *op)
{
        if (op->state == XC_RUNNING)
                return op->cmd ? 0x11 : 0x12;        /* in progress, foreground / background */
        if (op->cmd_status == SAM_STAT_TASK_ABORTED) /* ABORT TASK, COPY OPERATION ABORT */
                return 0x60;
        if (op->cmd_status != SAM_STAT_GOOD)
                return 0x02;
        return op->partial ? 0x03 : 0x01;
}

/*
 * RECEIVE COPY STATUS(LID4) (05h), RECEIVE COPY DATA(LID4) (06h), RECEIVE
 * ROD TOKEN INFORMATION (07h) (SPC-5 6.24, 6.20, 6.26): one 32-byte
 * header and the sense data, then no held data (06h) or the ROD token
 * POPULATE TOKEN made (07h).  For the copy operations with a 4-byte LIST
 * IDENTIFIER: EXTENDED COPY(LID4), POPULATE TOKEN, WRITE USING TOKEN.
 */
static enum scsi_parse_result lid4_results(struct scsi_cmd *cmd, uint8_t sa)
{
        const uint8_t *c = cmd->cdb;
        uint32_t alloc = slate_be32(c + 10), n, slen = 0;
        uint64_t count;
        uint16_t segs = 0;
        uint8_t *b = cmd->buf;
        struct xc_op *op;

        cmd->xfer_len = alloc;
        for (uint16_t i = 6; i <= 14; i++) {
                if ((i < 10 || i > 13) && c[i]) {
                        scsi_sense_invalid_field(cmd, true, i, 7);
                        return SCSI_PARSE_DONE;
                }
        }
        pthread_mutex_lock(&xc_lock);
        op = cmd->nexus ? find_op(cmd->nexus, slate_be32(c + 2)) : NULL;
        if (!op || op->kind == XC_LID1) {
                pthread_mutex_unlock(&xc_lock);
                scsi_sense_invalid_field(cmd, true, 2, 7);
                return SCSI_PARSE_DONE;
        }
        memset(b, 0, 32u + SCSI_SENSE_MAX + 4u + 2u + ODX_TOKEN_LEN);
        b[4] = (uint8_t)op->kind; /* RESPONSE TO SERVICE ACTION */
        b[5] = odx_status(op);
        count = op->bytes_done;
        if (op->state == XC_RUNNING) {
                slate_put_be(b + 8, 4, 100); /* ESTIMATED STATUS UPDATE DELAY, ms */
                if (op->kind == XC_LID4)
                        progress(op, &segs, &count);
                else
                        count = atomic_load(&op->copy.blocks_done);
        } else {
                slate_put_be(b + 8, 4, 0xfffffffeu); /* completed: no update to wait for */
                b[12] = op->cmd_status;
                slen = op->sense_len;
                segs = op->segs_done;
                memcpy(b + 32, op->sense, slen);
        }
        b[13] = (uint8_t)((slen + 3u) & ~3u); /* LENGTH OF THE SENSE DATA FIELD: a multiple of 4 */
        b[14] = (uint8_t)slen;
        if (op->kind == XC_LID4) {
                b[15] = 0x00; /* TRANSFER COUNT UNITS: bytes */
                slate_put_be(b + 24, 2, segs);
        } else {
                b[15] = 0xf1; /* logical blocks; no segment descriptors */
        }
        slate_put_be(b + 16, 8, count);
        n = 32u + b[13];
        if (sa == 0x06) {
                n += 4; /* HELD DATA LENGTH 0: no segment type here holds data */
        } else if (sa == 0x07) {
                /* The token POPULATE TOKEN made, while it exists (a descriptor of 514 bytes). */
                if (op->state == XC_DONE && op->kind == XC_PT && op->token >= 0 &&
                    tokens[op->token].used && tokens[op->token].id == op->token_id) {
                        slate_put_be(b + n, 4, 2u + ODX_TOKEN_LEN);
                        memcpy(b + n + 6, tokens[op->token].bytes, ODX_TOKEN_LEN);
                        n += 4u + 2u + ODX_TOKEN_LEN;
                } else {
                        n += 4;
                }
        }
        slate_put_be(b, 4, n - 4);
        /* RRTI: discarded once transferred whole, or when asked with ALLOCATION LENGTH 0. */
        if (sa == 0x07 && op->state == XC_DONE && (alloc == 0 || alloc >= n))
                op->state = XC_FREE;
        pthread_mutex_unlock(&xc_lock);
        scsi_cmd_data_in(cmd, n, alloc);
        return SCSI_PARSE_DONE;
}
