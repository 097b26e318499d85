/*
 * End-to-end data protection in the NVMe personality (issue 10; NVM
 * Command Set 1.0 5.2 and 5.3, Base 2.0 5.23 Format NVM).  The core keeps
 * each block's metadata and runs the checks (core/pi.h, core/ns.h
 * "Protection information"); this file is the NVMe face of it:
 *
 *  - the LBA formats a namespace offers, all at its block size and all
 *    with metadata as extended LBAs (the only form NVMe over Fabrics
 *    carries: MC bit 0, never a separate buffer):
 *      0  MS 0
 *      1  MS 8,  16b guard (8-byte PI)
 *      2  MS 16, 16b guard (8-byte PI in the first or last 8 bytes, DPS PIP)
 *      3  MS 16, 32b guard, STS 16 (16-byte PI; 80 bits storage+reference
 *         space = 16-bit storage tag + 64-bit reference tag: the core
 *         takes no reference tag wider than 64 bits)
 *      4  MS 16, 64b guard (16-byte PI, 48-bit reference tag) -- only when
 *         this build's ISA-L has CRC-64/NVME (core_pi_have_crc64())
 *    Identify Namespace NLBAF/LBAF/FLBAS/MC/DPC/DPS, and the NVM Command
 *    Set Identify Namespace (CNS 05h) ELBAF per format (CTRATT ELBAS);
 *  - Format NVM (LBAF, MSET, PI, PIL; SES 0 only) -> core_ns_format on a
 *    worker thread (it waits for the namespace's commands in flight); the
 *    core's CORE_NS_EV_FORMAT reaches every other controller as Namespace
 *    Attribute Changed (admin.c);
 *  - PRINFO (PRACT, PRCHK) and the tags (CDW2/3/14 ILBRT, CDW15 LBAT and
 *    LBATM) of Read, Write, Compare, Verify and Write Zeroes -> struct
 *    core_req.pi, and the transfer length (core_ns_xfer_bytes): PRACT with
 *    metadata that is only the PI moves data only (the core inserts and
 *    strips, what the Linux host does for such a namespace); any other
 *    metadata format moves extended LBAs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "nvme/internal.h"
#include "rt/log.h"
#include "rt/reactor.h"

#define CDW12_PRACT (1u << 29)
#define CDW12_PRCHK (7u << 26) /* 28 guard, 27 application tag, 26 reference tag */
#define CDW12_STC   (1u << 24) /* storage tag check (not supported: PIC.STCRS = 0) */

#define FMT_MSET (1u << 4)
#define FMT_PIL  (1u << 8)

struct lbafmt {
        uint16_t ms;
        uint8_t guard; /* enum core_pi_guard (the ELBAF PIF) */
        uint8_t sts;
};

static const struct lbafmt lbafs[] = {
    {0, CORE_PI_GUARD_CRC16, 0},    {8, CORE_PI_GUARD_CRC16, 0},  {16, CORE_PI_GUARD_CRC16, 0},
    {16, CORE_PI_GUARD_CRC32C, 16}, {16, CORE_PI_GUARD_CRC64, 0},
};

unsigned nvme_pi_nlbaf(void)
{
        unsigned n = sizeof(lbafs) / sizeof(lbafs[0]);
        return core_pi_have_crc64() ? n : n - 1;
}

/* The namespace's current format's index (the first that matches). */
unsigned nvme_pi_cur_lbaf(const struct core_pi_fmt *f)
{
        unsigned n = nvme_pi_nlbaf(), any = 0;
        bool found = false;
        for (unsigned i = 0; i < n; i++) {
                if (lbafs[i].ms != f->md_size)
                        continue;
                if (!found) {
                        any = i;
                        found = true;
                }
                if (lbafs[i].guard == f->guard && lbafs[i].sts == f->sts)
                        return i;
        }
        return any;
}

/* FLBAS: format index bits 3:0 (6:5 upper: none), bit 4 extended LBAs. */
static uint8_t flbas(const struct core_pi_fmt *f)
{
        return (uint8_t)((nvme_pi_cur_lbaf(f) & 0xf) | (f->md_size ? 0x10 : 0));
}

uint8_t nvme_pi_flbas(const struct core_ns *ns)
{
        struct core_pi_fmt f;
        core_ns_pi_fmt(ns, &f);
        return flbas(&f);
}

void nvme_pi_id_ns(struct core_ns *ns, struct nvme_id_ns *id)
{
        struct core_pi_fmt f;
        core_ns_pi_fmt(ns, &f);
        unsigned n = nvme_pi_nlbaf();
        id->nlbaf = (uint8_t)(n - 1);
        id->flbas = flbas(&f);
        id->mc = 0x01; /* extended data LBAs; no separate metadata buffer */
        /* DPC: types 1, 2, 3, PI in the first or the last bytes of the metadata. */
        id->dpc = 0x1f;
        id->dps = (uint8_t)(f.type & 7) | (f.type && f.pi_first ? 0x08 : 0);
        for (unsigned i = 0; i < n; i++) {
                put_le16(&id->lbaf[i].ms, lbafs[i].ms);
                id->lbaf[i].lbads = (uint8_t)ns->block_shift;
                id->lbaf[i].rp = lbafs[i].ms ? 1 : 0; /* better, best */
        }
}

void nvme_pi_id_ns_nvm(struct core_ns *ns, uint8_t *p)
{
        (void)ns;
        /* LBSTM (bytes 7:0) 0 and PIC (byte 8) 0: no storage tag checking (STCRS 0). */
        unsigned n = nvme_pi_nlbaf();
        for (unsigned i = 0; i < n; i++) /* ELBAF: STS bits 6:0, PIF bits 8:7 */
                slate_put_le(p + 12 + 4 * i, 4,
                             (uint32_t)lbafs[i].sts | ((uint32_t)lbafs[i].guard << 7));
}

/* ---- Format NVM ---- */

enum nvme_parse_result nvme_format_parse(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw10 = nvme_cdw(cmd, 10);
        uint32_t nsid = nvme_nsid(cmd);
        unsigned lbaf = (cdw10 & 0xf) | ((cdw10 >> 8) & 0x30);
        unsigned pi = (cdw10 >> 5) & 7, ses = (cdw10 >> 9) & 7;

        /* FNA bit 0 = 0: formats are per namespace; no broadcast NSID. */
        if (nsid == 0 || nsid > NVME_MAX_NSID)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
        if (cdw10 & 0xffffc000u)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10) + 2);
        /* SES 1/2 (user data / cryptographic erase): not with a format here. */
        if (ses)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(10) + 1, 1);
        cmd->ns = nvme_ns_lookup(ctrl->subsys, nsid);
        if (!cmd->ns)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
        /*
         * Invalid Format: an LBA format we do not offer, metadata in a
         * separate buffer (MSET 0: fabrics carry none), protection
         * information without room for it.
         */
        if (lbaf >= nvme_pi_nlbaf() || (lbafs[lbaf].ms && !(cdw10 & FMT_MSET)) || (pi > 3) ||
            (pi && !lbafs[lbaf].ms))
                return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_FORMAT,
                                   NVME_SQE_OFF_CDW(10), -1);
        struct core_pi_fmt f = {
            .block_size = cmd->ns->block_size,
            .md_size = lbafs[lbaf].ms,
            .type = (uint8_t)pi,
            .guard = lbafs[lbaf].guard,
            .sts = lbafs[lbaf].sts,
            .pi_first = (cdw10 & FMT_PIL) != 0,
        };
        char err[160];
        if (core_pi_fmt_check(&f, err, sizeof(err)))
                return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_FORMAT,
                                   NVME_SQE_OFF_CDW(10), -1);
        enum core_status st = core_ns_check(cmd->ns, CORE_CHK_SANITIZING | CORE_CHK_WRITABLE |
                                                         CORE_CHK_SANITIZE_FAILED);
        if (st != CORE_OK) {
                nvme_status_from_core(cmd, st);
                return NVME_PARSE_DONE;
        }
        return NVME_PARSE_EXEC;
}

/* The format on a worker thread, its status back on the command's reactor. */
static void format_do(struct nvme_cmd *cmd)
{
        uint32_t cdw10 = nvme_cdw(cmd, 10);
        unsigned lbaf = (cdw10 & 0xf) | ((cdw10 >> 8) & 0x30);
        struct core_pi_fmt f = {
            .block_size = cmd->ns->block_size,
            .md_size = lbafs[lbaf].ms,
            .type = (uint8_t)((cdw10 >> 5) & 7),
            .guard = lbafs[lbaf].guard,
            .sts = lbafs[lbaf].sts,
            .pi_first = (cdw10 & FMT_PIL) != 0,
        };
        char err[256] = "";
        int rc =
            core_ns_format(cmd->ns, &f, cmd->queue ? cmd->queue->ctrl : NULL, err, sizeof(err));
        if (rc == 0) {
                nvme_set_status(cmd, 0, 0, false);
                return;
        }
        LOG_INFO("nvme", "format of namespace %u refused: %s", nvme_nsid(cmd), err);
        if (rc == -EINVAL || rc == -ENOTSUP)
                nvme_set_status(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_FORMAT, true);
        else if (rc == -EBUSY && core_ns_sanitize_state(cmd->ns) == CORE_SAN_RUNNING)
                nvme_status_from_core(cmd, CORE_E_SANITIZE_IN_PROGRESS);
        else if (rc == -EBUSY) /* commands in flight did not drain: try again */
                nvme_status_from_core(cmd, CORE_E_NO_RESOURCES);
        else
                nvme_status_from_core(cmd, CORE_E_INTERNAL);
}

static void *format_worker(void *arg)
{
        struct nvme_cmd *cmd = arg;
        format_do(cmd);
        rt_defer_remote(cmd->reactor, &cmd->defer);
        return NULL;
}

static void format_worker_done(struct rt_defer *d)
{
        struct nvme_cmd *cmd = (struct nvme_cmd *)((char *)d - offsetof(struct nvme_cmd, defer));
        nvme_cmd_complete(cmd);
}

void nvme_format_exec(struct nvme_cmd *cmd)
{
        if (cmd->reactor) {
                pthread_t t;
                pthread_attr_t at;
                pthread_attr_init(&at);
                pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
                cmd->defer.fn = format_worker_done;
                cmd->defer.next = NULL;
                int rc = pthread_create(&t, &at, format_worker, cmd);
                pthread_attr_destroy(&at);
                if (rc == 0)
                        return;
                nvme_status_from_core(cmd, CORE_E_NO_RESOURCES);
                nvme_cmd_complete_deferred(cmd);
                return;
        }
        format_do(cmd); /* no reactor (unit tests): here */
        nvme_cmd_complete_deferred(cmd);
}

/* ---- PRINFO and the tags of I/O commands ---- */

bool nvme_pi_io_parse(struct nvme_cmd *cmd, uint64_t lba, enum nvme_pi_io_kind kind,
                      struct nvme_pi_io *out)
{
        uint32_t cdw12 = nvme_cdw(cmd, 12);
        struct core_pi_fmt f;
        core_ns_pi_fmt(cmd->ns, &f);
        memset(out, 0, sizeof(*out));
        out->fmt = f;
        if (f.type == CORE_PI_TYPE0) {
                /* No protection information: nothing to act on or check. */
                if (cdw12 & (CDW12_PRACT | CDW12_PRCHK | CDW12_STC)) {
                        nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, 51, 2);
                        return false;
                }
                out->host_md = f.md_size != 0 && kind != NVME_PI_IO_NODATA;
                return true;
        }
        if (cdw12 & CDW12_STC) { /* PIC.STCRS = 0 */
                nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, 51, 0);
                return false;
        }
        bool pract = (cdw12 & CDW12_PRACT) != 0;
        unsigned ref_bits = core_pi_ref_bits(&f);
        uint64_t ref_mask = ref_bits >= 64 ? UINT64_MAX : (1ull << ref_bits) - 1;
        /* The reference tag: CDW14 bits 31:0, CDW3 bits 63:32 (16b guard: CDW14 only). */
        uint64_t ref = nvme_cdw(cmd, 14);
        if (f.guard != CORE_PI_GUARD_CRC16)
                ref |= (uint64_t)nvme_cdw(cmd, 3) << 32;
        ref &= ref_mask;
        uint32_t cdw15 = nvme_cdw(cmd, 15);
        if (cdw12 & (1u << 28))
                out->chk |= CORE_PI_CHK_GUARD;
        if (cdw12 & (1u << 27))
                out->chk |= CORE_PI_CHK_APP;
        if ((cdw12 & (1u << 26)) && f.type != CORE_PI_TYPE3)
                out->chk |= CORE_PI_CHK_REF;
        /*
         * Type 1: the reference tag is the LBA's low bits, so an ILBRT that
         * is not is Invalid Protection Information (NVM 1.0 5.2.1.1) when
         * it is to be checked.
         */
        if (f.type == CORE_PI_TYPE1 && (out->chk & CORE_PI_CHK_REF) && ref != (lba & ref_mask)) {
                nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_INVALID_PI, 56, -1);
                return false;
        }
        out->ref = ref;
        out->app = (uint16_t)cdw15;
        out->app_mask = (uint16_t)(cdw15 >> 16);
        out->gen_ref = f.type == CORE_PI_TYPE1 ? (lba & ref_mask) : ref;
        out->gen_app = (uint16_t)cdw15;
        /* PRACT with metadata that is only the PI: data only, the core inserts/strips. */
        out->host_md = !(pract && f.md_size == core_pi_tuple_size(&f));
        switch (kind) {
        case NVME_PI_IO_WRITE:
                /* The controller generates the PI: what the host sent is replaced, not checked. */
                out->gen = pract;
                if (pract)
                        out->chk = 0;
                break;
        case NVME_PI_IO_NODATA:
                out->host_md = false; /* Verify, Write Zeroes move no data */
                out->gen = true;
                break;
        case NVME_PI_IO_READ:
        case NVME_PI_IO_COMPARE:
                break;
        }
        return true;
}

void nvme_pi_io_apply(struct core_req *req, const struct nvme_pi_io *p)
{
        req->pi.host_md = p->host_md;
        req->pi.gen = p->gen;
        req->pi.chk = p->chk;
        req->pi.ref = p->ref;
        req->pi.app = p->app;
        req->pi.app_mask = p->app_mask;
        req->pi.gen_ref = p->gen_ref;
        req->pi.gen_app = p->gen_app;
}
