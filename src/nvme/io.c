/*
 * NVM command set I/O commands (NVM Command Set Specification 1.0 chapter
 * 3): Read, Write, Compare, Write Zeroes, Verify, Flush and Dataset
 * Management, each translated into one core request carrying the host's
 * registrant identity, so the core applies reservations to it (Dataset
 * Management with AD: one per range).  On a thin namespace, Write Zeroes
 * with DEAC and DSM with AD deallocate (CORE_OP_DEALLOCATE: the blocks
 * read back as zeroes, DLFEAT 001b).  Parse checks the
 * NSID, the LBA range (overflow-safe core_ns_range_ok), MDTS and the SGL;
 * exec submits to the core and maps the core status with status.c.
 * Protection information (pi.c): PRINFO and the tags become the request's
 * pi, and the transfer is extended LBAs when the namespace has metadata
 * (unless PRACT strips a PI-only one).
 * Write Uncorrectable marks its blocks unrecoverable in the core
 * (core/media.h): reads of them fail with Unrecovered Read Error until a
 * write replaces their data.
 */
#include <errno.h>
#include <string.h>

#include "core/atomic.h"
#include "core/flash.h"
#include "core/media.h"
#include "nvme/internal.h"
#include "rt/reactor.h"

#define CDW12_FUA   (1u << 30)
#define CDW12_LR    (1u << 31)
#define CDW12_DTYPE (0xfu << 20)
#define CDW12_DEAC  (1u << 25)

/* Looks up the command's namespace; false = rejected (Invalid Namespace or Format). */
static bool io_ns(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        cmd->ns = nvme_ns_lookup(ctrl->subsys, nvme_nsid(cmd));
        if (!cmd->ns) {
                nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
                return false;
        }
        return true;
}

static void io_req_init(struct nvme_cmd *cmd, enum core_op op, uint64_t lba, uint32_t nlb)
{
        core_req_init(&cmd->req, cmd->ns, op, lba, nlb, 0, cmd->reactor, NULL, cmd);
        /* The host, for the core's reservation check (resv.c). */
        cmd->req.nexus = nvme_ctrl_pr_id(cmd->queue->ctrl);
        cmd->req.host = cmd->queue->ctrl->host;
}

/*
 * Access hints (CORE_HINT_*) from an NVMe access frequency (AF), access
 * latency (AL) and sequential flag, as Read/Write CDW13 and the DSM
 * context attributes give them (NVM 1.0 fig. 40, 41).  AF 1 (typical) and
 * 0 say nothing; 7 (speculative read, Linux's readahead) is sequential; 8
 * (overwritten soon) is a short lifetime.
 */
uint8_t nvme_access_hints(unsigned af, unsigned al, bool seq)
{
        static const uint8_t by_af[16] = {
            [2] = CORE_HINT_READ_RARE | CORE_HINT_WRITE_RARE,
            [3] = CORE_HINT_READ_FREQ | CORE_HINT_WRITE_RARE,
            [4] = CORE_HINT_READ_RARE | CORE_HINT_WRITE_FREQ,
            [5] = CORE_HINT_READ_FREQ | CORE_HINT_WRITE_FREQ,
            [6] = CORE_HINT_READ_RARE,
            [7] = CORE_HINT_SEQUENTIAL,
            [8] = CORE_HINT_WRITE_FREQ,
        };
        uint8_t h = by_af[af & 0xf];
        if (al == 3)
                h |= CORE_HINT_LOW_LATENCY;
        if (seq)
                h |= CORE_HINT_SEQUENTIAL;
        return h;
}

/*
 * SLBA in CDW10/11, NLB (0's based) in CDW12 15:0: range and MDTS checks.
 * op: the core operation the command would be, for the statistics of a refusal.
 */
static bool io_range(struct nvme_cmd *cmd, enum core_op op, uint64_t *lba, uint32_t *nlb,
                     uint64_t *bytes)
{
        *lba = (uint64_t)nvme_cdw(cmd, 10) | ((uint64_t)nvme_cdw(cmd, 11) << 32);
        *nlb = (nvme_cdw(cmd, 12) & 0xffff) + 1;
        if (!core_ns_range_ok(cmd->ns, *lba, *nlb)) {
                nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_LBA_RANGE, NVME_SQE_OFF_CDW(10), -1);
                core_stats_reject(cmd->ns, cmd->queue->ctrl->host, op, CORE_E_LBA_RANGE);
                return false;
        }
        *bytes = (uint64_t)*nlb << cmd->ns->block_shift;
        return true;
}

enum nvme_parse_result nvme_io_rw_parse(struct nvme_cmd *cmd)
{
        uint32_t cdw12 = nvme_cdw(cmd, 12), cdw13 = nvme_cdw(cmd, 13);
        bool write = cmd->sqe[0] == NVME_IO_WRITE;
        unsigned dtype = (cdw12 & CDW12_DTYPE) >> 20;
        uint16_t dspec = cdw13 >> 16;
        uint64_t lba, bytes;
        uint32_t nlb;

        if (!io_ns(cmd))
                return NVME_PARSE_DONE;
        /*
         * Directives (directive.c, fdp.c): a Write may name a stream (DTYPE
         * 01h, once the host enabled Streams) or a placement identifier
         * (DTYPE 02h, on an FDP namespace); nothing else takes one.
         */
        if (dtype && (!write ||
                      (dtype == NVME_DIR_STREAMS &&
                       !nvme_streams_enabled(cmd->queue->ctrl, nvme_nsid(cmd))) ||
                      (dtype == NVME_DIR_DATA_PLACEMENT && !nvme_fdp_enabled(cmd->ns)) ||
                      dtype > NVME_DIR_DATA_PLACEMENT))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, 50, 4);
        if (!io_range(cmd, write ? CORE_OP_WRITE : CORE_OP_READ, &lba, &nlb, &bytes))
                return NVME_PARSE_DONE;
        /* Protection information (pi.c): the transfer holds extended LBAs unless PRACT strips. */
        struct nvme_pi_io pi;
        if (!nvme_pi_io_parse(cmd, lba, write ? NVME_PI_IO_WRITE : NVME_PI_IO_READ, &pi))
                return NVME_PARSE_DONE;
        bytes = core_ns_xfer_bytes(cmd->ns, nlb, pi.host_md);
        if (bytes > CORE_MAX_TRANSFER_BYTES) /* MDTS (metadata included) */
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
        if (!nvme_xfer(cmd, (uint32_t)bytes, write))
                return NVME_PARSE_DONE;
        io_req_init(cmd, write ? CORE_OP_WRITE : CORE_OP_READ, lba, nlb);
        nvme_pi_io_apply(&cmd->req, &pi);
        if (cdw12 & CDW12_FUA)
                cmd->req.flags |= CORE_REQ_FUA;
        /* NAWUN/NAWUPF promise it: a Write that fits is atomic, its metadata with it (the
         * core's journal records both).  One block without metadata is atomic by itself. */
        if (write && (nlb > 1 || pi.fmt.md_size) && core_atomic_fits(cmd->ns, lba, nlb))
                cmd->req.flags |= CORE_REQ_ATOMIC;
        cmd->req.iov[0].iov_base = cmd->buf;
        cmd->req.iov[0].iov_len = bytes;
        cmd->req.iovcnt = 1;
        /* CDW13 DSM: AF 3:0, AL 5:4, SEQREQ 6, INCOMPRESSIBLE 7, for the core's hint counts. */
        cmd->req.hints =
            nvme_access_hints(cdw13 & 0xf, (cdw13 >> 4) & 3, cdw13 & NVME_RW_DSM_SEQREQ) |
            (cdw13 & 0x80 ? CORE_HINT_INCOMPRESSIBLE : 0);
        if (write) {
                uint16_t pl = 0;
                int rc = 0;
                if (dtype == NVME_DIR_STREAMS && dspec) /* stream 0: an ordinary Write */
                        rc = nvme_stream_placement(cmd, nvme_nsid(cmd), dspec, &pl);
                else if (nvme_fdp_enabled(cmd->ns))
                        rc = nvme_fdp_placement(cmd, dtype == NVME_DIR_DATA_PLACEMENT, dspec, &pl);
                if (rc) /* Streams disabled meanwhile */
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, 50, 4);
                cmd->req.placement = pl;
        }
        return NVME_PARSE_EXEC;
}

enum nvme_parse_result nvme_io_compare_parse(struct nvme_cmd *cmd)
{
        uint64_t lba, bytes;
        uint32_t nlb;

        if (!io_ns(cmd))
                return NVME_PARSE_DONE;
        if (!io_range(cmd, CORE_OP_COMPARE, &lba, &nlb, &bytes))
                return NVME_PARSE_DONE;
        struct nvme_pi_io pi;
        if (!nvme_pi_io_parse(cmd, lba, NVME_PI_IO_COMPARE, &pi))
                return NVME_PARSE_DONE;
        bytes = core_ns_xfer_bytes(cmd->ns, nlb, pi.host_md);
        /* The core reads the medium into scratch piece by piece: the transport's
         * second buffer, or the second half of buf. */
        if (bytes > CORE_MAX_TRANSFER_BYTES ||
            bytes > (cmd->scratch ? cmd->buf_len : cmd->buf_len / 2))
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
        if (!nvme_xfer(cmd, (uint32_t)bytes, true))
                return NVME_PARSE_DONE;
        io_req_init(cmd, CORE_OP_COMPARE, lba, nlb);
        nvme_pi_io_apply(&cmd->req, &pi);
        cmd->req.iov[0].iov_base = cmd->buf;
        cmd->req.iov[0].iov_len = bytes;
        cmd->req.iovcnt = 1;
        cmd->req.scratch = cmd->scratch ? cmd->scratch : cmd->buf + cmd->buf_len / 2;
        cmd->req.scratch_len = cmd->scratch ? cmd->scratch_len : cmd->buf_len / 2;
        return NVME_PARSE_EXEC;
}

/* Commands over an LBA range that carry no data: Write Zeroes and Verify. */
static enum nvme_parse_result range_only_parse(struct nvme_cmd *cmd, enum core_op op, bool fua_ok)
{
        uint32_t cdw12 = nvme_cdw(cmd, 12);
        uint64_t lba, bytes;
        uint32_t nlb;

        if (!io_ns(cmd))
                return NVME_PARSE_DONE;
        if (!io_range(cmd, op, &lba, &nlb, &bytes))
                return NVME_PARSE_DONE;
        struct nvme_pi_io pi;
        if (!nvme_pi_io_parse(cmd, lba, NVME_PI_IO_NODATA, &pi))
                return NVME_PARSE_DONE;
        io_req_init(cmd, op, lba, nlb);
        nvme_pi_io_apply(&cmd->req, &pi);
        if (fua_ok && (cdw12 & CDW12_FUA))
                cmd->req.flags |= CORE_REQ_FUA;
        return NVME_PARSE_EXEC;
}

enum nvme_parse_result nvme_io_write_zeroes_parse(struct nvme_cmd *cmd)
{
        /* DEAC on a thin namespace: deallocate, which reads back as zeroes just the same. */
        bool deac = (nvme_cdw(cmd, 12) & CDW12_DEAC) != 0;
        enum nvme_parse_result r = range_only_parse(cmd, CORE_OP_WRITE_ZEROES, true);
        if (r == NVME_PARSE_EXEC && deac && cmd->ns->thin)
                cmd->req.op = CORE_OP_DEALLOCATE;
        return r;
}

enum nvme_parse_result nvme_io_verify_parse(struct nvme_cmd *cmd)
{
        return range_only_parse(cmd, CORE_OP_VERIFY, false);
}

/*
 * Write Uncorrectable (NVM Command Set 1.0 3.3.6): SLBA, NLB; no data.
 * The write command group for reservations, refused like a write on a
 * write-protected, sanitizing or depopulating namespace.
 */
enum nvme_parse_result nvme_io_write_uncor_parse(struct nvme_cmd *cmd)
{
        uint64_t lba, bytes;
        uint32_t nlb;
        if (!io_ns(cmd))
                return NVME_PARSE_DONE;
        if (!io_range(cmd, CORE_OP_WRITE, &lba, &nlb, &bytes))
                return NVME_PARSE_DONE;
        return NVME_PARSE_EXEC;
}

static void write_uncor_done(void *arg, int rc)
{
        struct nvme_cmd *cmd = arg;
        if (rc == -ERANGE) /* the capacity shrank meanwhile */
                nvme_status_from_core(cmd, CORE_E_LBA_RANGE);
        else if (rc == -ENOSPC) /* too many separate ranges: the device cannot track more */
                nvme_status_from_core(cmd, CORE_E_NO_RESOURCES);
        else if (rc)
                nvme_status_from_core(cmd, CORE_E_WRITE_ERROR);
        else
                nvme_set_status(cmd, 0, 0, false);
        nvme_cmd_complete(cmd);
}

void nvme_io_write_uncor_exec(struct nvme_cmd *cmd)
{
        struct core_ns *ns = cmd->ns;
        uint64_t lba = (uint64_t)nvme_cdw(cmd, 10) | ((uint64_t)nvme_cdw(cmd, 11) << 32);
        uint32_t nlb = (nvme_cdw(cmd, 12) & 0xffff) + 1;
        io_req_init(cmd, CORE_OP_WRITE, lba, nlb); /* for the error log's LBA */
        enum core_status st =
            core_ns_check(ns, CORE_CHK_ACCESS | CORE_CHK_SANITIZING | CORE_CHK_STARTED |
                                  CORE_CHK_SANITIZE_FAILED | CORE_CHK_WRITABLE);
        if (st == CORE_OK && (atomic_load(&ns->media_flags) & CORE_MEDIA_F_DEPOP))
                st = CORE_E_DEPOP_IN_PROGRESS;
        if (st == CORE_OK &&
            core_ns_pr_conflict(ns, nvme_ctrl_pr_id(cmd->queue->ctrl), false, true))
                st = CORE_E_RESERVATION_CONFLICT;
        if (st == CORE_OK && !core_ns_range_ok(ns, lba, nlb))
                st = CORE_E_LBA_RANGE;
        if (st == CORE_OK) {
                int rc = core_media_mark_async(ns, lba, nlb, true, cmd->queue->ctrl, cmd->reactor,
                                               write_uncor_done, cmd);
                if (rc == 0)
                        return;
                st = CORE_E_NO_RESOURCES;
        }
        nvme_status_from_core(cmd, st);
        nvme_cmd_complete_deferred(cmd);
}

enum nvme_parse_result nvme_io_flush_parse(struct nvme_cmd *cmd)
{
        /* VWC bits 2:1 = 10b: NSID FFFFFFFFh is not supported for Flush. */
        if (!io_ns(cmd))
                return NVME_PARSE_DONE;
        io_req_init(cmd, CORE_OP_FLUSH, 0, 0);
        return NVME_PARSE_EXEC;
}

enum nvme_parse_result nvme_io_dsm_parse(struct nvme_cmd *cmd)
{
        uint32_t nr = (nvme_cdw(cmd, 10) & 0xff) + 1;
        if (!io_ns(cmd))
                return NVME_PARSE_DONE;
        /* DSM runs no core request, yet it is in the write command group (8.19). */
        if (core_ns_pr_conflict(cmd->ns, nvme_ctrl_pr_id(cmd->queue->ctrl), false, true)) {
                nvme_status_from_core(cmd, CORE_E_RESERVATION_CONFLICT);
                return NVME_PARSE_DONE;
        }
        /*
         * The host may describe more data than the ranges: Linux always
         * sends a whole 256-range (4 KiB) buffer.  Take what it describes, up
         * to that, and read only the NR ranges.
         */
        uint32_t len = nr * (uint32_t)sizeof(struct nvme_dsm_range);
        uint32_t sgl = (uint32_t)slate_get_le(cmd->sqe + 32, 4);
        if (sgl > len && sgl <= 256 * sizeof(struct nvme_dsm_range))
                len = sgl;
        if (!nvme_xfer(cmd, len, true))
                return NVME_PARSE_DONE;
        return NVME_PARSE_EXEC;
}

static void dsm_next(struct nvme_cmd *cmd);

static void dsm_done(struct core_req *req)
{
        struct nvme_cmd *cmd = req->cb_arg;
        if (req->status != CORE_OK) {
                nvme_status_from_core(cmd, req->status);
                nvme_cmd_complete(cmd);
                return;
        }
        dsm_next(cmd);
}

/* Deallocates the next non-empty range (cmd->aux: its index), or completes. */
static void dsm_next(struct nvme_cmd *cmd)
{
        uint32_t nr = (nvme_cdw(cmd, 10) & 0xff) + 1;
        const struct nvme_dsm_range *r = (const struct nvme_dsm_range *)cmd->buf;
        while (cmd->aux < nr) {
                const struct nvme_dsm_range *x = &r[cmd->aux++];
                uint32_t n = get_le32(&x->nlb);
                if (!n)
                        continue;
                io_req_init(cmd, CORE_OP_DEALLOCATE, get_le64(&x->slba), n);
                uint32_t ca = get_le32(&x->cattr);
                cmd->req.hints = nvme_access_hints(NVME_DSM_CA_AF(ca), NVME_DSM_CA_AL(ca),
                                                   ca & (NVME_DSM_CA_SR | NVME_DSM_CA_SW));
                cmd->req.cb = dsm_done;
                core_req_submit(&cmd->req);
                return;
        }
        nvme_set_status(cmd, 0, 0, false);
        nvme_cmd_complete(cmd);
}

/*
 * Ranges are in buf now: check them and count the hints; AD on a thin
 * namespace deallocates every range, one core request after the other
 * (nothing is deallocated when a range is out of bounds).
 */
void nvme_io_dsm_exec(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t attr = nvme_cdw(cmd, 11);
        uint32_t nr = (nvme_cdw(cmd, 10) & 0xff) + 1;
        const struct nvme_dsm_range *r = (const struct nvme_dsm_range *)cmd->buf;

        for (uint32_t i = 0; i < nr; i++) {
                uint64_t slba = get_le64(&r[i].slba);
                uint32_t n = get_le32(&r[i].nlb);
                if (!core_ns_range_ok(cmd->ns, slba, n)) {
                        nvme_set_status(cmd, NVME_SCT_GENERIC, NVME_SC_LBA_RANGE, true);
                        nvme_ctrl_log_error(ctrl, cmd, NVME_LOC_NONE, slba);
                        nvme_cmd_complete_deferred(cmd);
                        return;
                }
                if (get_le32(&r[i].cattr) & 0xff) /* access frequency/latency/sequential hints */
                        atomic_fetch_add_explicit(&ctrl->dsm_access_hints, 1, memory_order_relaxed);
        }
        atomic_fetch_add_explicit(&ctrl->dsm_cmds, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&ctrl->dsm_ranges, nr, memory_order_relaxed);
        if (attr & NVME_DSM_AD)
                atomic_fetch_add_explicit(&ctrl->dsm_ad, 1, memory_order_relaxed);
        if (attr & NVME_DSM_IDR)
                atomic_fetch_add_explicit(&ctrl->dsm_idr, 1, memory_order_relaxed);
        if (attr & NVME_DSM_IDW)
                atomic_fetch_add_explicit(&ctrl->dsm_idw, 1, memory_order_relaxed);
        bool any = false;
        for (uint32_t i = 0; i < nr; i++)
                any |= get_le32(&r[i].nlb) != 0;
        if ((attr & NVME_DSM_AD) && cmd->ns->thin && any) {
                cmd->aux = 0;
                dsm_next(cmd);
                return;
        }
        nvme_set_status(cmd, 0, 0, false);
        nvme_cmd_complete_deferred(cmd);
}

static void io_done(struct core_req *req)
{
        struct nvme_cmd *cmd = req->cb_arg;
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;

        nvme_status_from_core(cmd, req->status);
        if (ctrl && req->status == CORE_OK) {
                if (req->op == CORE_OP_READ)
                        atomic_fetch_add_explicit(&ctrl->host_reads, 1, memory_order_relaxed);
                else if (req->op == CORE_OP_WRITE)
                        atomic_fetch_add_explicit(&ctrl->host_writes, 1, memory_order_relaxed);
        } else if (ctrl && (req->status == CORE_E_MEDIUM_ERROR ||
                            (req->status == CORE_E_WRITE_ERROR && !req->info_valid))) {
                /* Backend failures; the media model's errors the core counts (SMART: log.c). */
                atomic_fetch_add_explicit(&ctrl->media_errors, 1, memory_order_relaxed);
        }
        nvme_cmd_complete(cmd);
}

void nvme_io_submit(struct nvme_cmd *cmd)
{
        cmd->req.cb = io_done;
        cmd->req.cb_arg = cmd;
        cmd->req.reactor = cmd->reactor;
        core_req_submit(&cmd->req);
}
