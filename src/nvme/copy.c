/*
 * NVMe Copy (NVM Command Set 1.2 3.3.2, I/O opcode 19h): a thin
 * translation of the Source Range entries into one core copy (core/copy.h),
 * which checks and moves the data; this file only reads the command.
 *
 * Formats: 0h and 1h (source = the command's namespace) and, once the
 * host enabled them in Host Behavior Support CDFE (Base 2.1 5.27.1.18),
 * 2h and 3h (a Source Namespace Identifier per entry: copies across the
 * subsystem's namespaces).  1h and 3h differ from 0h and 2h only by their
 * longer protection information tags (80-bit ELBT for the 32b and 64b
 * guards).  Source Options FCO (fast copy only) never fails: every copy
 * here is done inside the target (ONCS NVMAFC).
 *
 * Protection information (issue 10; NVM Command Set 3.3.2.3): each block's
 * metadata moves with it (core/copy.h; source and destination need the
 * same format, else Incompatible Namespace or Format), a type 1 block's
 * reference tag set to its destination LBA.  PRINFOR's PRCHK checks every
 * source block against its range's ELBT/ELBAT/ELBATM (PRACT means nothing
 * for a read that returns no data: ignored); PRINFOW with PRACT generates
 * the destination's PI from ILBRT (CDW14, CDW3 above 32 bits) and LBAT
 * (CDW15), without PRACT its PRCHK checks what is written against ILBRT,
 * LBAT and LBATM.  A type 1 ELBT or ILBRT that is not the LBA with the
 * reference tag checked: Invalid Protection Information; STCR/STCW
 * (storage tag checks, PIC.STCRS 0): Invalid Field.  Without PI the fields
 * are ignored, as 3.3.2.3 says.
 *
 * Limits (Identify Namespace MSRC, MSSRL, MCL) are the core engine's
 * (CORE_COPY_MAX_*) in the namespace's blocks; beyond them: Command Size
 * Limit Exceeded.  A source in the destination namespace that overlaps the
 * destination is refused for formats 2h/3h (Overlapping I/O Range) and
 * copied as if read first for 0h/1h (the standard leaves the result open).
 *
 * Nothing is allocated per command: the parsed ranges and the core copy
 * live in the command's data buffer, past the descriptor list.
 */
#include <string.h>

#include "core/copy.h"
#include "nvme/internal.h"

#define CDW12_NR         0xffu
#define CDW12_DESFMT     (0xfu << 8)
#define CDW12_DTYPE      (0xfu << 20)
#define CDW12_FUA        (1u << 30)
#define CDW12_PRINFOR(x) (((x) >> 12) & 0xfu)
#define CDW12_PRINFOW(x) (((x) >> 26) & 0xfu)
#define CDW12_STCW       (1u << 24)
#define CDW12_STCR       (1u << 25)
#define PRINFO_PRACT     0x8u
#define PRINFO_GUARD     0x4u
#define PRINFO_APP       0x2u
#define PRINFO_REF       0x1u

struct copy_ctx {
        struct core_copy copy;
        struct core_copy_range ranges[CORE_COPY_MAX_RANGES];
        struct core_ns *refs[CORE_COPY_MAX_RANGES]; /* source namespaces other than the command's */
        unsigned nrefs;
};

/* Past the longest descriptor list (128 entries of 40 bytes), page aligned. */
#define COPY_CTX_OFF 8192u
_Static_assert(CORE_COPY_MAX_RANGES * sizeof(struct nvme_copy_range_ext) <= COPY_CTX_OFF,
               "descriptor list overlaps the copy context");
_Static_assert(CORE_COPY_MAX_RANGES <= 256, "MSRC is one byte, 0's based");

void nvme_copy_limits(const struct core_ns *ns, uint16_t *mssrl, uint32_t *mcl, uint8_t *msrc)
{
        uint64_t range = CORE_COPY_MAX_RANGE_BYTES >> ns->block_shift;
        uint64_t total = CORE_COPY_MAX_BYTES >> ns->block_shift;
        *mssrl = (uint16_t)(range < UINT16_MAX ? range : UINT16_MAX);
        *mcl = (uint32_t)(total < UINT32_MAX ? total : UINT32_MAX);
        *msrc = (uint8_t)(CORE_COPY_MAX_RANGES - 1);
}

static unsigned entry_size(unsigned fmt)
{
        return fmt == 1 || fmt == 3 ? sizeof(struct nvme_copy_range_ext)
                                    : sizeof(struct nvme_copy_range);
}

static struct copy_ctx *ctx_of(struct nvme_cmd *cmd)
{
        return (struct copy_ctx *)(cmd->buf + COPY_CTX_OFF);
}

enum nvme_parse_result nvme_io_copy_parse(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw12 = nvme_cdw(cmd, 12);
        unsigned nr = cdw12 & CDW12_NR; /* 0's based */
        unsigned fmt = (cdw12 & CDW12_DESFMT) >> 8;

        cmd->ns = nvme_ns_lookup(ctrl->subsys, nvme_nsid(cmd));
        if (!cmd->ns)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
        /* A format we do not support, or 2h/3h the host has not enabled: Invalid Field. */
        uint16_t enabled = 0x3 | atomic_load_explicit(&ctrl->copy_fmts, memory_order_relaxed);
        if (fmt > NVME_COPY_FMT_MAX || !(enabled & (1u << fmt)))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(12) + 1, 0);
        if (cdw12 & CDW12_DTYPE) /* no directives enabled */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(12) + 2, 4);
        if (nr > CORE_COPY_MAX_RANGES - 1) /* NR > MSRC */
                return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_CMD_SIZE_LIMIT,
                                   NVME_SQE_OFF_CDW(12), 0);
        if (cmd->buf_len < COPY_CTX_OFF + sizeof(struct copy_ctx))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INTERNAL, NVME_LOC_NONE, -1);
        /* The host may describe more than NR entries (as for DSM): read what it describes. */
        uint32_t len = (nr + 1) * entry_size(fmt);
        uint32_t sgl = (uint32_t)slate_get_le(cmd->sqe + 32, 4);
        if (sgl > len && sgl <= COPY_CTX_OFF)
                len = sgl;
        if (!nvme_xfer(cmd, len, true))
                return NVME_PARSE_DONE;
        return NVME_PARSE_EXEC;
}

static void put_refs(struct copy_ctx *x)
{
        for (unsigned i = 0; i < x->nrefs; i++)
                core_ns_put(x->refs[i]);
        x->nrefs = 0;
}

static void copy_done(struct core_copy *c)
{
        struct nvme_cmd *cmd = c->cb_arg;
        struct copy_ctx *x = ctx_of(cmd);
        if (c->status != CORE_OK && c->failed_range < c->nranges)
                cmd->req.lba = c->ranges[c->failed_range].dst_lba;
        nvme_status_from_core(cmd, c->status);
        /*
         * 3.3.2 Command Completion: on failure DW0 is the lowest numbered
         * entry not copied; 0 when nothing reached the destination.  Ranges
         * go in order, so that is the one the copy stopped in.
         */
        if (c->status != CORE_OK)
                nvme_cqe_dw0(cmd, atomic_load(&c->blocks_done) ? c->failed_range : 0);
        put_refs(x);
        nvme_cmd_complete(cmd);
}

/* Refuse before any data moved (DW0 0), with an error log entry for the LBA. */
static enum nvme_parse_result refuse(struct nvme_cmd *cmd, uint8_t sct, uint8_t sc, uint64_t lba)
{
        nvme_copy_release(cmd);
        nvme_set_status(cmd, sct, sc, true);
        if (cmd->queue)
                nvme_ctrl_log_error(cmd->queue->ctrl, cmd, NVME_LOC_NONE, lba);
        return NVME_PARSE_DONE;
}

void nvme_copy_release(struct nvme_cmd *cmd)
{
        put_refs(ctx_of(cmd));
}

static unsigned prchk(unsigned prinfo, const struct core_pi_fmt *f)
{
        unsigned c = 0;
        if (prinfo & PRINFO_GUARD)
                c |= CORE_PI_CHK_GUARD;
        if (prinfo & PRINFO_APP)
                c |= CORE_PI_CHK_APP;
        if ((prinfo & PRINFO_REF) && f->type != CORE_PI_TYPE3)
                c |= CORE_PI_CHK_REF;
        return c;
}

/*
 * PRINFOR and the entries' expected tags, PRINFOW and the command's tags
 * (file comment), onto the ranges and the core copy; NVME_PARSE_EXEC, or
 * the refusal.
 */
static enum nvme_parse_result pi_decode(struct nvme_cmd *cmd, struct copy_ctx *x, unsigned n,
                                        unsigned fmt, uint64_t sdlba)
{
        uint32_t cdw12 = nvme_cdw(cmd, 12);
        struct core_pi_fmt f;
        core_ns_pi_fmt(cmd->ns, &f);
        if (f.type == CORE_PI_TYPE0)
                return NVME_PARSE_EXEC;
        if (cdw12 & (CDW12_STCW | CDW12_STCR))
                return refuse(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, sdlba);
        unsigned rb = core_pi_ref_bits(&f);
        uint64_t mask = rb >= 64 ? UINT64_MAX : (1ull << rb) - 1;
        unsigned rchk = prchk(CDW12_PRINFOR(cdw12), &f);
        for (unsigned i = 0; i < n && rchk; i++) {
                const uint8_t *e = cmd->buf + (size_t)i * entry_size(fmt);
                struct core_copy_range *r = &x->ranges[i];
                /* 0h/2h: ELBT 24-27, ELBAT 28-29, ELBATM 30-31; 1h/3h: ELBT 26-35 (its
                 * low 64 bits here), ELBAT 36-37, ELBATM 38-39. */
                bool ext = fmt == 1 || fmt == 3;
                r->src_chk = rchk;
                r->src_ref = (ext ? slate_get_le(e + 26, 8) : slate_get_le(e + 24, 4)) & mask;
                r->src_app = (uint16_t)slate_get_le(e + (ext ? 36 : 28), 2);
                r->src_app_mask = (uint16_t)slate_get_le(e + (ext ? 38 : 30), 2);
                if (f.type == CORE_PI_TYPE1 && (rchk & CORE_PI_CHK_REF) &&
                    r->src_ref != (r->src_lba & mask))
                        return refuse(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_PI, r->src_lba);
        }
        unsigned w = CDW12_PRINFOW(cdw12);
        uint64_t ref = nvme_cdw(cmd, 14);
        if (f.guard != CORE_PI_GUARD_CRC16)
                ref |= (uint64_t)nvme_cdw(cmd, 3) << 32;
        ref &= mask;
        uint32_t cdw15 = nvme_cdw(cmd, 15);
        x->copy.pi.dst_gen = (w & PRINFO_PRACT) != 0;
        x->copy.pi.dst_chk = x->copy.pi.dst_gen ? 0 : prchk(w, &f);
        x->copy.pi.dst_ref = ref;
        x->copy.pi.dst_app = (uint16_t)cdw15;
        x->copy.pi.dst_app_mask = (uint16_t)(cdw15 >> 16);
        if (f.type == CORE_PI_TYPE1 && (x->copy.pi.dst_chk & CORE_PI_CHK_REF) &&
            ref != (sdlba & mask))
                return refuse(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_PI, sdlba);
        return NVME_PARSE_EXEC;
}

enum nvme_parse_result nvme_copy_decode(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw12 = nvme_cdw(cmd, 12);
        unsigned n = (cdw12 & CDW12_NR) + 1;
        unsigned fmt = (cdw12 & CDW12_DESFMT) >> 8;
        unsigned esz = entry_size(fmt);
        uint32_t nsid = nvme_nsid(cmd);
        uint64_t sdlba = (uint64_t)nvme_cdw(cmd, 10) | ((uint64_t)nvme_cdw(cmd, 11) << 32);
        struct copy_ctx *x = ctx_of(cmd);
        uint16_t mssrl;
        uint32_t mcl;
        uint8_t msrc;
        uint64_t total = 0;

        x->nrefs = 0;
        if (!ctrl || !cmd->ns || n * esz > cmd->data_len)
                return refuse(cmd, NVME_SCT_GENERIC, NVME_SC_INTERNAL, 0);
        nvme_copy_limits(cmd->ns, &mssrl, &mcl, &msrc);
        for (unsigned i = 0; i < n; i++) {
                const struct nvme_copy_range *e =
                    (const struct nvme_copy_range *)(cmd->buf + (size_t)i * esz);
                uint64_t slba = get_le64(&e->slba);
                uint32_t nlb = (uint32_t)get_le16(&e->nlb) + 1;
                if (nlb > mssrl || total + nlb > mcl)
                        return refuse(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_CMD_SIZE_LIMIT, slba);
                struct core_ns *src = cmd->ns;
                uint32_t snsid = fmt >= 2 ? get_le32(&e->snsid) : nsid;
                if (snsid != nsid) {
                        if (snsid == 0 || snsid == 0xffffffffu || snsid > NVME_MAX_NSID)
                                return refuse(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, slba);
                        src = nvme_ns_lookup(ctrl->subsys, snsid);
                        if (!src) /* inactive NSID */
                                return refuse(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, slba);
                        x->refs[x->nrefs++] = src;
                }
                x->ranges[i] = (struct core_copy_range){.src = src,
                                                        .src_lba = slba,
                                                        .dst = cmd->ns,
                                                        .dst_lba = sdlba + total,
                                                        .nlb = nlb};
                total += nlb;
        }
        /* The whole destination at once: sdlba + total must not wrap past the end. */
        if (!core_ns_range_ok(cmd->ns, sdlba, total))
                return refuse(cmd, NVME_SCT_GENERIC, NVME_SC_LBA_RANGE, sdlba);
        if (fmt >= 2) {
                for (unsigned i = 0; i < n; i++) {
                        const struct core_copy_range *r = &x->ranges[i];
                        if (r->src == cmd->ns && r->src_lba < sdlba + total &&
                            sdlba < r->src_lba + r->nlb)
                                return refuse(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_OVERLAPPING_RANGE,
                                              r->src_lba);
                }
        }
        cmd->req.lba = sdlba;
        core_copy_init(&x->copy, x->ranges, n, (cdw12 & CDW12_FUA) ? CORE_REQ_FUA : 0, cmd->reactor,
                       copy_done, cmd);
        x->copy.nexus = nvme_ctrl_pr_id(ctrl);
        return pi_decode(cmd, x, n, fmt, sdlba);
}

void nvme_io_copy_exec(struct nvme_cmd *cmd)
{
        if (nvme_copy_decode(cmd) != NVME_PARSE_EXEC) {
                nvme_cmd_complete_deferred(cmd);
                return;
        }
        core_copy_submit(&ctx_of(cmd)->copy);
}
