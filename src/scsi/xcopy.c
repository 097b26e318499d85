/*
 * Third-party copy, the SCSI side (SPC-5 5.17, 6.4 EXTENDED COPY(LID1),
 * 6.18 RECEIVE COPY RESULTS): the CDBs and the parameter list are checked
 * here; the data moves in the block core's copy engine (core/copy.h, the
 * one NVMe Copy drives too), never over the network.
 *
 * EXTENDED COPY(LID1): identification CSCD descriptors (E4h) name the
 * source and destination logical units by a VPD 83h designator (any LU
 * designator Slate reports: NAA, UUID); a CSCD resolves to any LU the
 * issuing initiator reaches through any target port of this slated
 * (target.c), so copies between LUs and targets work.  Block -> block
 * segment descriptors (02h) become the ranges of one core copy; the
 * command completes when the copy does (LID1 is synchronous for the
 * host).  Every descriptor is checked, and every segment resolved and
 * range-checked, before any data moves: a bad segment leaves nothing
 * half done.  ABORT TASK, resets and I_T nexus loss cancel the copy at its
 * next chunk.
 *
 * Copy operations and their results live in one bounded store
 * (SCSI_XCOPY_MAX_CONCURRENT slots, no allocation): per I_T nexus and
 * LIST IDENTIFIER, as RECEIVE COPY RESULTS reads them (COPY STATUS,
 * RECEIVE DATA, FAILED SEGMENT DETAILS; OPERATING PARAMETERS reports the
 * limits).  A result is kept until the same nexus reuses its LIST ID, the
 * nexus ends, or the store needs the slot for a new copy (the oldest
 * finished result goes first); failed segment details are discarded once
 * returned.  A LIST ID in use by a running copy of the same nexus gets
 * OPERATION IN PROGRESS.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "slate/spec/scsi.h"
#include "core/copy.h"
#include "scsi/internal.h"

#define XC_HDR 16

/* COPY MANAGER STATUS (SPC-5 6.18.3) */
#define CMS_IN_PROGRESS 0x00
#define CMS_DONE_OK     0x01
#define CMS_DONE_ERROR  0x02

enum xc_state { XC_FREE = 0, XC_RUNNING, XC_DONE };

struct xc_op {
        enum xc_state state;
        const struct scsi_nexus *nexus; /* owner; NULL once the nexus is gone */
        bool has_id;                    /* LIST ID USAGE 00b/10b: results are kept */
        uint8_t list_id;
        uint64_t seq; /* age, for eviction */

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

int scsi_xcopy_parse_list(const uint8_t *p, uint32_t len, struct scsi_xcopy_list *l,
                          struct scsi_xcopy_err *e)
{
        uint32_t tdll, sdll, inl, off, end;

        memset(l, 0, sizeof(*l));
        memset(e, 0, sizeof(*e));
        if (len < XC_HDR)
                return err_il(e, 0x1a, 0x00, -1, -1); /* PARAMETER LIST LENGTH ERROR */
        l->list_id = p[0];
        l->usage = (p[1] >> 3) & 0x03;
        l->priority = p[1] & 0x07;
        if (p[1] & 0xc0)
                return err_il(e, 0x26, 0x00, 1, (p[1] & 0x80) ? 7 : 6);
        if (l->usage == 0x01) /* reserved */
                return err_il(e, 0x26, 0x00, 1, 4);
        if (l->usage == 0x03 && l->list_id) /* no list ID: LIST IDENTIFIER zero */
                return err_il(e, 0x26, 0x00, 0, 7);
        for (int i = 4; i < 8; i++)
                if (p[i])
                        return err_il(e, 0x26, 0x00, i, 7);
        tdll = slate_be16(p + 2);
        sdll = slate_be32(p + 8);
        inl = slate_be32(p + 12);
        if ((uint64_t)tdll + sdll > SCSI_XCOPY_MAX_DESC_LIST)
                return err_il(e, 0x1a, 0x00, -1, -1);
        if ((uint64_t)XC_HDR + tdll + sdll + inl > len)
                return err_il(e, 0x1a, 0x00, -1, -1);
        if (inl) /* MAXIMUM INLINE DATA LENGTH is 0: no segment type here uses it */
                return err_il(e, 0x26, 0x00, 12, 7);

        /* CSCD descriptors: identification descriptors (E4h), 32 bytes each. */
        for (off = XC_HDR, end = XC_HDR + tdll; off < end; off += SCSI_XCOPY_CSCD_LEN) {
                const uint8_t *d = p + off;
                if (l->ncscd == SCSI_XCOPY_MAX_CSCD) /* TOO MANY TARGET DESCRIPTORS */
                        return err_il(e, 0x26, 0x06, 2, 7);
                if (d[0] != 0xe4) /* UNSUPPORTED TARGET DESCRIPTOR TYPE CODE */
                        return err_il(e, 0x26, 0x07, (int)off, 7);
                if (end - off < SCSI_XCOPY_CSCD_LEN)
                        return err_il(e, 0x26, 0x00, 2, 7);
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

        /* Segment descriptors: block -> block (02h), 28 bytes each. */
        for (off = XC_HDR + tdll, end = off + sdll; off < end; off += SCSI_XCOPY_SEG_B2B_LEN) {
                const uint8_t *d = p + off;
                struct scsi_xcopy_seg *s;
                if (l->nseg == SCSI_XCOPY_MAX_SEGS) /* TOO MANY SEGMENT DESCRIPTORS */
                        return err_il(e, 0x26, 0x08, 8, 7);
                if (d[0] != 0x02) /* UNSUPPORTED SEGMENT DESCRIPTOR TYPE CODE */
                        return err_il(e, 0x26, 0x09, (int)off, 7);
                if (end - off < 4 || slate_be16(d + 2) != SCSI_XCOPY_SEG_B2B_LEN - 4)
                        return err_il(e, 0x26, 0x00, (int)off + 2, 7);
                if (end - off < SCSI_XCOPY_SEG_B2B_LEN)
                        return err_il(e, 0x1a, 0x00, -1, -1);
                /* Byte 1: FCO (2), DC (1), CAT (0); the rest is reserved. */
                if (d[1] & 0xf8)
                        return err_il(e, 0x26, 0x00, (int)off + 1, 7);
                if (d[8] || d[9])
                        return err_il(e, 0x26, 0x00, (int)off + (d[8] ? 8 : 9), 7);
                s = &l->seg[l->nseg++];
                s->src = slate_be16(d + 4);
                s->dst = slate_be16(d + 6);
                s->dc = (d[1] & 0x02) != 0;
                s->nlb = slate_be16(d + 10);
                s->src_lba = slate_be64(d + 12);
                s->dst_lba = slate_be64(d + 20);
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
static struct xc_op *find_op(const struct scsi_nexus *nx, uint8_t list_id)
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

void scsi_xcopy_fuzz_params(struct scsi_cmd *cmd, uint32_t len)
{
        struct scsi_xcopy_list l;
        struct scsi_xcopy_err e;
        if (cmd->cdb[0] == SCSI_OP_EXTENDED_COPY && (cmd->cdb[1] & 0x1f) == 0x00 &&
            scsi_xcopy_parse_list(cmd->buf, len, &l, &e) < 0)
                err_to_sense(cmd, &e);
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
                /* Beyond the end of a copy target: the segment pointer names the LBA. */
                if (!core_ns_range_ok(src, s->src_lba, s->nlb))
                        return err_ca(e, 0x00, 0x00, i, 12);
                if (!core_ns_range_ok(dst, s->dst_lba, s->nlb))
                        return err_ca(e, 0x00, 0x00, i, 20);
                if (!s->nlb)
                        continue;
                op->ranges[n] = (struct core_copy_range){.src = src,
                                                         .src_lba = s->src_lba,
                                                         .dst = dst,
                                                         .dst_lba = s->dst_lba,
                                                         .nlb = s->nlb};
                op->seg_of_range[n] = (uint16_t)i;
                n++;
        }
        op->copy.nranges = n;
        return 0;
}

/* Record how op ended (status/sense of cmd), and free an anonymous one (caller holds xc_lock). */
static void op_finish_locked(struct xc_op *op, struct scsi_cmd *cmd, uint16_t segs, uint64_t bytes)
{
        op->cms = cmd->status == SAM_STAT_GOOD ? CMS_DONE_OK : CMS_DONE_ERROR;
        op->segs_done = segs;
        op->bytes_done = bytes;
        op->cmd_status = cmd->status;
        op->sense_len = cmd->sense_len;
        memcpy(op->sense, cmd->sense, cmd->sense_len);
        op->details = cmd->status != SAM_STAT_GOOD;
        op->cmd = NULL;
        op->seq = ++xc_seq;
        op->state = op->has_id && op->nexus ? XC_DONE : XC_FREE;
}

static void copy_done(struct core_copy *c)
{
        struct xc_op *op = c->cb_arg;
        struct scsi_cmd *cmd = op->cmd;
        uint64_t blocks = atomic_load(&c->blocks_done);
        uint16_t segs = (uint16_t)op->nseg;

        put_refs(op);
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
        pthread_mutex_lock(&xc_lock);
        op_finish_locked(op, cmd, segs, blocks * op->block_size);
        pthread_mutex_unlock(&xc_lock);
        cmd->done(cmd);
}

void scsi_xcopy_exec(struct scsi_cmd *cmd)
{
        struct scsi_xcopy_list l;
        struct scsi_xcopy_err e;
        struct xc_op *op;

        cmd->aux = 0;
        if (scsi_xcopy_parse_list(cmd->buf, cmd->data_out_len, &l, &e) < 0) {
                err_to_sense(cmd, &e);
                goto out;
        }
        pthread_mutex_lock(&xc_lock);
        if (l.usage != 0x03) {
                op = find_op(cmd->nexus, l.list_id);
                if (op && op->state == XC_RUNNING) {
                        pthread_mutex_unlock(&xc_lock);
                        /* SPC-5 5.17.4.2: a duplicate LIST ID of a copy still running. */
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x00, 0x16);
                        goto out;
                }
                if (op) /* the same LIST ID again: the old results go */
                        op->state = XC_FREE;
        }
        op = alloc_op();
        if (!op) {
                pthread_mutex_unlock(&xc_lock);
                scsi_status_from_core(cmd, CORE_E_NO_RESOURCES, 0, false);
                goto out;
        }
        memset(op, 0, sizeof(*op));
        op->state = XC_RUNNING;
        op->nexus = cmd->nexus;
        op->has_id = l.usage != 0x03;
        op->list_id = l.list_id;
        op->cms = CMS_IN_PROGRESS;
        op->cmd = cmd;
        op->nseg = l.nseg;
        op->block_size = cmd->ns->block_size;
        pthread_mutex_unlock(&xc_lock);

        core_copy_init(&op->copy, op->ranges, 0, 0, cmd->reactor, copy_done, op);
        op->copy.nexus = cmd->nexus ? &cmd->nexus->id : NULL;
        if (build_ranges(cmd, op, &l, &e) < 0) {
                put_refs(op);
                err_to_sense(cmd, &e);
                pthread_mutex_lock(&xc_lock);
                op_finish_locked(op, cmd, e.segment, 0);
                pthread_mutex_unlock(&xc_lock);
                goto out;
        }
        if (op->copy.nranges == 0) { /* only empty segments */
                put_refs(op);
                scsi_cmd_good(cmd);
                pthread_mutex_lock(&xc_lock);
                op_finish_locked(op, cmd, (uint16_t)l.nseg, 0);
                pthread_mutex_unlock(&xc_lock);
                goto out;
        }
        op->block_size = op->ranges[0].src->block_size;
        cmd->aux = (uint32_t)(op - xc_ops) + 1;
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

/* ---- RECEIVE COPY RESULTS (SPC-5 6.18) ---- */

/* COPY STATUS (00h): 12 bytes. */
static uint32_t copy_status(const struct xc_op *op, uint8_t *b)
{
        uint64_t count = op->bytes_done;
        uint16_t segs = op->segs_done;
        uint8_t units = 0;

        if (op->state == XC_RUNNING) {
                /* Progress of the running copy: whole segments and bytes so far. */
                uint64_t blocks = atomic_load(&op->copy.blocks_done), sum = 0;
                unsigned r = 0;
                while (r < op->copy.nranges && sum + op->ranges[r].nlb <= blocks)
                        sum += op->ranges[r++].nlb;
                segs = r < op->copy.nranges ? op->seg_of_range[r] : (uint16_t)op->nseg;
                count = blocks * op->block_size;
        }
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
        memset(b, 0, 46);
        slate_put_be(b, 4, 42);
        b[4] = 0x01; /* SNLID: LIST ID USAGE 11b (no list identifier) is supported */
        slate_put_be(b + 8, 2, SCSI_XCOPY_MAX_CSCD);
        slate_put_be(b + 10, 2, SCSI_XCOPY_MAX_SEGS);
        slate_put_be(b + 12, 4, SCSI_XCOPY_MAX_DESC_LIST);
        slate_put_be(b + 16, 4, (uint64_t)SCSI_XCOPY_MAX_SEG_BLOCKS << ns->block_shift);
        /* MAXIMUM INLINE DATA LENGTH, HELD DATA LIMIT, MAXIMUM STREAM DEVICE TRANSFER SIZE: 0 */
        slate_put_be(b + 34, 2, SCSI_XCOPY_MAX_CONCURRENT); /* TOTAL CONCURRENT COPIES */
        b[36] = SCSI_XCOPY_MAX_CONCURRENT;                  /* MAXIMUM CONCURRENT COPIES */
        b[37] = (uint8_t)ns->block_shift;                   /* DATA SEGMENT GRANULARITY */
        b[43] = 2;                                          /* IMPLEMENTED DESCRIPTOR LIST LENGTH */
        b[44] = 0x02;
        b[45] = 0xe4;
        return 46;
}

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
        if (!op) {
                pthread_mutex_unlock(&xc_lock);
                /* No copy operation of this nexus with that LIST IDENTIFIER. */
                scsi_sense_invalid_field(cmd, true, 2, 7);
                return SCSI_PARSE_DONE;
        }
        switch (sa) {
        case 0x00:
                n = copy_status(op, b);
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
                        if (alloc >= n)
                                op->details = false;
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
