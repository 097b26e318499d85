/*
 * SBC-4 logical block provisioning (4.7) on thin LUs: UNMAP (5.32) and
 * GET LBA STATUS (5.7, with the report types of SBC-5 including 10h,
 * the LBAs that may return unrecovered errors: issue 15).  Both are thin-only: a fully provisioned
 * LU (LBPME=0) answers UNMAP with INVALID COMMAND OPERATION CODE and reports every block mapped.
 * Deallocation is the core's CORE_OP_DEALLOCATE (blocks read back as zeroes: LBPRZ=1); the map is
 * the core's core_ns_lba_status() (the backing file's own allocation).  UNMAP with ANCHOR anchors
 * instead (4.7.3.4: space kept, reads zeroes) where the core can (core_ns_can_anchor: ANC_SUP=1 in
 * VPD B2h), and is INVALID FIELD IN CDB elsewhere; GET LBA STATUS reports anchored blocks (2h).
 */
#include <stdlib.h>
#include <string.h>

#include "slate/spec/scsi.h"
#include "core/worker.h"
#include "scsi/internal.h"

#define UNMAP_HDR  8
#define UNMAP_DESC 16

/* ---- UNMAP ---- */

enum scsi_parse_result scsi_lbp_unmap(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint32_t len = slate_be16(c + 7);

        cmd->xfer_len = len;
        if (!cmd->ns->thin) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x20, 0x00);
                return SCSI_PARSE_DONE;
        }
        if ((c[1] & 0x01) && !core_ns_can_anchor(cmd->ns)) { /* ANCHOR with ANC_SUP=0 */
                scsi_sense_invalid_field(cmd, true, 1, 0);
                return SCSI_PARSE_DONE;
        }
        if (c[1] & 0xfe) {
                scsi_sense_invalid_field(cmd, true, 1, 31 - __builtin_clz(c[1] & 0xfe));
                return SCSI_PARSE_DONE;
        }
        if (c[6] & 0xc0) {
                scsi_sense_invalid_field(cmd, true, 6, 7);
                return SCSI_PARSE_DONE;
        }
        if (!scsi_check_state(cmd, CORE_CHK_WRITABLE))
                return SCSI_PARSE_DONE;
        if (len == 0) { /* not an error: nothing to unmap */
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        if (len < UNMAP_HDR) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a,
                               0x00); /* PARAMETER LIST LENGTH ERROR */
                return SCSI_PARSE_DONE;
        }
        if (len > cmd->edtl) {
                scsi_sense_invalid_field(cmd, true, 7, 7);
                return SCSI_PARSE_DONE;
        }
        cmd->data_out_len = len;
        return SCSI_PARSE_EXEC;
}

static void unmap_next(struct scsi_cmd *cmd);

static void unmap_done(struct core_req *req)
{
        struct scsi_cmd *cmd = req->cb_arg;
        if (req->status != CORE_OK) {
                scsi_status_from_core(cmd, req->status, req->info, req->info_valid);
                cmd->done(cmd);
                return;
        }
        unmap_next(cmd);
}

/*
 * Submits the next non-empty descriptor (cmd->aux: its index), or finishes.
 * The descriptors after it that continue its range (the next LBA, or no
 * blocks) go in the same request: one backend round trip for a list of
 * adjacent blocks (libiscsi's Unmap.Simple sends up to 256 one-block
 * descriptors in a row, 32,896 in all: one DEALLOCATE each cost 8 s on an
 * RBD image).  The sum fits: exec checked it against MAX UNMAP LBA COUNT.
 */
static void unmap_next(struct scsi_cmd *cmd)
{
        const uint8_t *b = cmd->buf;
        while (cmd->aux < cmd->nlb) {
                const uint8_t *d = b + UNMAP_HDR + (size_t)cmd->aux * UNMAP_DESC;
                cmd->aux++;
                uint32_t n = slate_be32(d + 8);
                if (!n)
                        continue;
                uint64_t lba = slate_be64(d);
                while (cmd->aux < cmd->nlb) {
                        const uint8_t *e = b + UNMAP_HDR + (size_t)cmd->aux * UNMAP_DESC;
                        uint32_t en = slate_be32(e + 8);
                        if (en && slate_be64(e) != lba + n)
                                break;
                        n += en;
                        cmd->aux++;
                }
                core_req_init(&cmd->req, cmd->ns, CORE_OP_DEALLOCATE, lba, n,
                              (cmd->cdb[1] & 0x01) ? CORE_REQ_ANCHOR : 0, cmd->reactor, unmap_done,
                              cmd);
                cmd->req.nexus = cmd->nexus ? &cmd->nexus->id : NULL;
                cmd->req.host = cmd->nexus ? cmd->nexus->host : NULL;
                core_req_submit(&cmd->req);
                return;
        }
        scsi_cmd_good(cmd);
        cmd->done(cmd);
}

void scsi_lbp_unmap_exec(struct scsi_cmd *cmd)
{
        const uint8_t *b = cmd->buf;
        uint32_t len = cmd->data_out_len;
        uint32_t dlen, bdlen, ndesc;
        uint64_t total = 0;
        bool any = false;

        scsi_cmd_good(cmd);
        dlen = slate_be16(b);
        bdlen = slate_be16(b + 2);
        /*
         * The lengths must fit what was sent (SBC-4 5.32.2: the data length
         * counts the bytes after itself); an incomplete last descriptor is
         * ignored.
         */
        if (dlen + 2u > len || bdlen + (uint32_t)UNMAP_HDR > len) {
                scsi_sense_invalid_field(cmd, false, bdlen + UNMAP_HDR > len ? 2 : 0, 7);
                goto out;
        }
        ndesc = bdlen / UNMAP_DESC;
        if (ndesc > SCSI_LBP_MAX_UNMAP_DESC) {
                scsi_sense_invalid_field(cmd, false, 2, 7);
                goto out;
        }
        /* Check every descriptor before deallocating anything. */
        for (uint32_t i = 0; i < ndesc; i++) {
                const uint8_t *d = b + UNMAP_HDR + (size_t)i * UNMAP_DESC;
                uint64_t lba = slate_be64(d);
                uint32_t n = slate_be32(d + 8);
                if (!core_ns_range_ok(cmd->ns, lba, n)) {
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x21, 0x00);
                        goto out;
                }
                total += n;
                any |= n != 0;
        }
        if (total > SCSI_LBP_MAX_UNMAP_LBAS) {
                scsi_sense_invalid_field(cmd, false, UNMAP_HDR + 8, 7);
                goto out;
        }
        if (!any)
                goto out; /* GOOD, nothing to do */
        cmd->nlb = ndesc;
        cmd->aux = 0;
        unmap_next(cmd);
        return;
out:
        scsi_cmd_finish_deferred(cmd);
}

/* ---- GET LBA STATUS ---- */

#define LBA_STATUS_MAX_DESC 512
/* Runs looked at for one command at most (report types that skip runs). */
#define LBA_STATUS_MAX_RUNS 4096

/* REPORT TYPE (SBC-4 5.7.2 / SBC-5): which descriptors a report type returns. */
enum {
        RT_ALL = 0x00,
        RT_NONZERO = 0x01, /* provisioning status other than 0h */
        RT_MAPPED = 0x02,
        RT_DEALLOCATED = 0x03,
        RT_ANCHORED = 0x04,
        RT_UNRECOVERED = 0x10, /* LBAs that may return unrecovered errors */
};

static bool rt_selects(uint8_t rt, uint8_t prov, bool bad)
{
        switch (rt) {
        case RT_ALL:
                return true;
        case RT_NONZERO:
                return prov != 0;
        case RT_MAPPED:
                return prov == 0;
        case RT_DEALLOCATED:
                return prov == 1;
        case RT_ANCHORED:
                return prov == 2;
        default: /* RT_UNRECOVERED */
                return bad;
        }
}

/*
 * GET LBA STATUS (16): from the starting LBA, one descriptor per run of
 * blocks with the same provisioning status (core_ns_lba_status) and the
 * same recoverability (core_ns_unrecoverable: marked ranges and the blocks
 * of failed elements), ADDITIONAL STATUS 01h ("may contain unrecovered
 * errors") on the bad runs; the report type filters them.  NUMBER OF
 * LOGICAL BLOCKS is 32 bits: a longer run takes several descriptors.
 */
static void lba_status_reply(struct scsi_cmd *cmd);

enum scsi_parse_result scsi_lbp_get_lba_status(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        struct core_ns *ns = cmd->ns;
        uint64_t lba = slate_be64(c + 2);
        uint32_t alloc = slate_be32(c + 10);
        uint8_t rt = c[14];

        cmd->xfer_len = alloc;
        if (rt > RT_ANCHORED && rt != RT_UNRECOVERED) {
                scsi_sense_invalid_field(cmd, true, 14, 7);
                return SCSI_PARSE_DONE;
        }
        if (lba >= core_ns_blocks(ns)) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x21, 0x00);
                return SCSI_PARSE_DONE;
        }
        if (alloc == 0) {
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        if (core_ns_lba_status_remote(ns))
                return SCSI_PARSE_EXEC; /* scsi_lbp_get_lba_status_exec: off the reactor */
        lba_status_reply(cmd);
        return SCSI_PARSE_DONE;
}

/* The descriptors from the starting LBA on (the CDB checked), into cmd's buffer. */
static void lba_status_reply(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        struct core_ns *ns = cmd->ns;
        uint64_t lba = slate_be64(c + 2);
        uint32_t alloc = slate_be32(c + 10);
        uint8_t rt = c[14];
        uint8_t *b = cmd->buf;
        uint32_t n = 0, cap, runs = 0;

        /* As many descriptors as the allocation length holds (at least one). */
        cap = alloc < 24 ? 1 : (alloc - 8) / 16;
        if (cap > LBA_STATUS_MAX_DESC)
                cap = LBA_STATUS_MAX_DESC;
        memset(b, 0, 8 + (size_t)cap * 16);
        while (n < cap && runs++ < LBA_STATUS_MAX_RUNS) {
                /* PROVISIONING STATUS (SBC-4 table 63): mapped 0h, deallocated 1h, anchored 2h */
                static const uint8_t prov[] = {[CORE_PROV_MAPPED] = 0x00,
                                               [CORE_PROV_DEALLOCATED] = 0x01,
                                               [CORE_PROV_ANCHORED] = 0x02};
                uint64_t end = core_ns_blocks(ns);
                struct core_lba_range bad;
                enum core_prov st = CORE_PROV_MAPPED;
                uint64_t run;
                bool is_bad = false;
                if (lba >= end)
                        break;
                if (rt == RT_UNRECOVERED) {
                        /* Straight to the next bad run: no provisioning walk. */
                        if (!core_ns_unrecoverable(ns, lba, end - lba, &bad)) {
                                lba = end; /* scanned to the end */
                                break;
                        }
                        lba = bad.lba;
                        run = bad.nlb;
                        is_bad = true;
                        if (core_ns_lba_status(ns, lba, run, &st, &run))
                                st = CORE_PROV_MAPPED, run = bad.nlb;
                } else {
                        if (core_ns_lba_status(ns, lba, UINT32_MAX, &st, &run))
                                break;
                        if (core_ns_unrecoverable(ns, lba, run, &bad)) {
                                if (bad.lba == lba)
                                        run = bad.nlb, is_bad = true;
                                else
                                        run = bad.lba - lba;
                        }
                }
                if (run > UINT32_MAX)
                        run = UINT32_MAX;
                if (run == 0)
                        break;
                if (rt_selects(rt, prov[st], is_bad)) {
                        uint8_t *d = b + 8 + (size_t)n * 16;
                        slate_put_be(d, 8, lba);
                        slate_put_be(d + 8, 4, run);
                        d[12] = prov[st];
                        d[13] = is_bad ? 0x01 : 0x00; /* ADDITIONAL STATUS */
                        n++;
                }
                lba += run;
        }
        slate_put_be(b, 4, 4 + (uint64_t)n * 16);
        /*
         * Byte 7: COMPLETION CONDITION (bits 3:1) -- 3h the end of the medium
         * was reached, 1h the allocation length was; 0h when the run limit
         * stopped the scan -- and RTP (bit 0): the REPORT TYPE was processed.
         */
        if (lba >= core_ns_blocks(ns))
                b[7] = 3u << 1;
        else if (n == cap)
                b[7] = 1u << 1;
        b[7] |= 0x01;
        scsi_cmd_data_in(cmd, 8 + n * 16, alloc);
}

/* GET LBA STATUS on remote storage: the walk on a core worker, the answer from the reactor. */
struct lba_status_job {
        struct core_work w;
        struct scsi_cmd *cmd;
};

static void lba_status_run(struct core_work *w)
{
        lba_status_reply(((struct lba_status_job *)w)->cmd);
}

static void lba_status_done(struct core_work *w)
{
        struct scsi_cmd *cmd = ((struct lba_status_job *)w)->cmd;
        free(w);
        cmd->done(cmd);
}

void scsi_lbp_get_lba_status_exec(struct scsi_cmd *cmd)
{
        struct lba_status_job *j = calloc(1, sizeof(*j));
        if (!j) {
                scsi_status_from_core(cmd, CORE_E_NO_RESOURCES, 0, false);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        j->cmd = cmd;
        j->w = (struct core_work){
            .run = lba_status_run, .done = lba_status_done, .reactor = cmd->reactor};
        if (!core_work_submit(&core_query_workers, &j->w))
                core_work_inline(&j->w);
}
