/*
 * Get LBA Status (NVMe Base 2.0 5.20) and the LBA Status Information log
 * page (0Eh, 5.16.1.15): which blocks may return an unrecovered read
 * error, so a host can read them while it still can and rewrite them.
 * Both answer from the core's failing-media model (core/media.h), the one
 * list the SCSI personality answers GET LBA STATUS report type 10h from.
 *
 * Tracked and untracked: blocks marked unrecoverable (Write
 * Uncorrectable, WRITE LONG, media_mark) are tracked; the blocks of a
 * physical element that failed are untracked until a scan finds them.
 * ATYPE 11h reports the tracked blocks; ATYPE 10h scans (the failed
 * elements' blocks become tracked: core_media_scan) and reports them all.
 * The log page lists, per namespace, the ranges that hold such blocks
 * (tracked or not), recommends ATYPE 10h while some are untracked and 11h
 * otherwise, gives the untracked count as ESTULB, and its generation
 * counter LSGC is the sum of the namespaces' media generations (each
 * change of their unrecoverable blocks or elements moves it); a change
 * raises the LBA Status Information Alert (admin.c).
 *
 * Choices where the standard leaves one: RL 0h examines to the end of the
 * namespace; a scan tracks every failed element at once.
 */
#include <string.h>

#include "core/media.h"
#include "nvme/internal.h"

/* Longest run one descriptor can carry (NLB is 32 bits). */
#define DESC_MAX_NLB 0xffffffffull

/* The next descriptor's range at or after lba, below end; false when none. */
static bool next_range(struct core_ns *ns, uint64_t lba, uint64_t end, bool tracked,
                       struct core_lba_range *r)
{
        if (lba >= end)
                return false;
        int found = tracked ? core_media_unrecoverable_tracked(ns, lba, end - lba, r)
                            : core_ns_unrecoverable(ns, lba, end - lba, r);
        if (found != 1)
                return false;
        if (r->nlb > DESC_MAX_NLB)
                r->nlb = DESC_MAX_NLB;
        return r->nlb > 0;
}

enum nvme_parse_result nvme_get_lba_status_parse(struct nvme_cmd *cmd)
{
        uint64_t slba = (uint64_t)nvme_cdw(cmd, 10) | ((uint64_t)nvme_cdw(cmd, 11) << 32);
        uint64_t len = ((uint64_t)nvme_cdw(cmd, 12) + 1) * 4; /* MNDW is 0's based */
        uint32_t cdw13 = nvme_cdw(cmd, 13);
        uint32_t rl = cdw13 & 0xffff;
        uint8_t atype = (uint8_t)(cdw13 >> 24);
        uint32_t nsid = nvme_nsid(cmd);

        if (nsid == 0 || nsid > NVME_MAX_NSID ||
            !(cmd->ns = nvme_ns_lookup(cmd->queue->ctrl->subsys, nsid)))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS,
                                   offsetof(struct nvme_sqe, nsid), -1);
        if (atype != NVME_LBAS_ATYPE_SCAN && atype != NVME_LBAS_ATYPE_TRACKED)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(13) + 3);
        if (len > CORE_MAX_TRANSFER_BYTES)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
        uint64_t nsze = core_ns_blocks(cmd->ns);
        if (slba >= nsze)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_LBA_RANGE, NVME_SQE_OFF_CDW(10),
                                   -1);
        if (!nvme_xfer(cmd, (uint32_t)len, false))
                return NVME_PARSE_DONE;

        uint64_t end = rl == 0 || rl > nsze - slba ? nsze : slba + rl;
        bool tracked = atype == NVME_LBAS_ATYPE_TRACKED;
        if (!tracked) /* 10h: the scan finds the failed elements' blocks */
                core_media_scan(cmd->ns, cmd->queue->ctrl);
        uint32_t cap = len >= sizeof(struct nvme_lba_status_hdr)
                           ? (uint32_t)((len - sizeof(struct nvme_lba_status_hdr)) /
                                        sizeof(struct nvme_lba_status_desc))
                           : 0;
        struct nvme_lba_status_desc *d =
            (struct nvme_lba_status_desc *)(cmd->buf + sizeof(struct nvme_lba_status_hdr));
        struct core_lba_range r;
        uint32_t n = 0;
        uint64_t lba = slba;
        memset(cmd->buf, 0, len);
        while (n < cap && next_range(cmd->ns, lba, end, tracked, &r)) {
                put_le64(&d[n].dslba, r.lba);
                put_le32(&d[n].nlb, (uint32_t)r.nlb);
                d[n].status = 0; /* may return unrecovered read errors */
                lba = r.lba + r.nlb;
                n++;
        }
        struct nvme_lba_status_hdr h = {0};
        put_le32(&h.nlsd, n);
        h.cmpc =
            next_range(cmd->ns, lba, end, tracked, &r) ? NVME_LBAS_CMPC_MNDW : NVME_LBAS_CMPC_RL;
        memcpy(cmd->buf, &h, len < sizeof(h) ? len : sizeof(h));
        return NVME_PARSE_DONE;
}

uint32_t nvme_lba_status_log(struct nvme_ctrl *ctrl, uint8_t *p, uint32_t cap)
{
        struct nvme_lba_status_log_hdr *h = (struct nvme_lba_status_log_hdr *)p;
        uint32_t off = sizeof(*h), elements = 0, gen = 0;
        uint64_t untracked = 0;

        memset(p, 0, cap);
        for (uint32_t nsid = 1; nsid <= NVME_MAX_NSID; nsid++) {
                struct core_ns *ns = nvme_ns_lookup(ctrl->subsys, nsid);
                if (!ns)
                        continue;
                uint64_t nsze = core_ns_blocks(ns), lba = 0;
                uint32_t el = off, nrld = 0;
                struct core_media_stats ms;
                core_media_get_stats(ns, &ms);
                gen += ms.generation;
                uint64_t ns_untracked = core_media_untracked_blocks(ns);
                untracked += ns_untracked;
                struct core_lba_range r;
                while (next_range(ns, lba, nsze, false, &r)) {
                        lba = r.lba + r.nlb;
                        uint32_t at = el + sizeof(struct nvme_lba_status_ns_element) +
                                      nrld * sizeof(struct nvme_lba_range_desc);
                        if (at + sizeof(struct nvme_lba_range_desc) > cap)
                                break; /* no room for more */
                        struct nvme_lba_range_desc *rd = (struct nvme_lba_range_desc *)(p + at);
                        put_le64(&rd->rslba, r.lba);
                        put_le32(&rd->rnlb, (uint32_t)r.nlb);
                        nrld++;
                }
                core_ns_put(ns);
                if (!nrld || el + sizeof(struct nvme_lba_status_ns_element) > cap)
                        continue;
                struct nvme_lba_status_ns_element *e =
                    (struct nvme_lba_status_ns_element *)(p + el);
                put_le32(&e->neid, nsid);
                put_le32(&e->nrld, nrld);
                e->ratype = ns_untracked ? NVME_LBAS_ATYPE_SCAN : NVME_LBAS_ATYPE_TRACKED;
                off = el + sizeof(*e) + nrld * sizeof(struct nvme_lba_range_desc);
                elements++;
        }
        put_le32(&h->lslplen, off);
        put_le32(&h->nlslne, elements);
        put_le32(&h->estulb, untracked > UINT32_MAX ? UINT32_MAX : (uint32_t)untracked);
        put_le16(&h->lsgc, (uint16_t)gen); /* moves with every change (see the top) */
        return off;
}
