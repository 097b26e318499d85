/*
 * Asymmetric Namespace Access (NVMe Base 2.0 8.1, 5.16.1.12): the NVMe
 * speaking of the core's access groups (core/ana.h).  The ANA group ID is
 * the core's group, the same on every gateway; the state is this
 * gateway's.  Log 0Ch has one descriptor per group that holds a namespace
 * attached to the controller's subsystem (group IDs ascending), each with
 * its NSIDs unless the host asked for groups only (LSP bit 0, RGO).  A
 * change of a group's state or of a namespace's group is the ANA change
 * notice (admin.c, AEC bit 11), masked until the host reads this log with
 * RAE cleared.  Identify (identify.c) reports CMIC bit 3, ANACAP, ANATT,
 * ANAGRPMAX, NANAGRPID and each namespace's ANAGRPID.
 */
#include <string.h>

#include "core/ana.h"
#include "nvme/internal.h"

uint8_t nvme_ana_state(enum core_ana_state st)
{
        switch (st) {
        case CORE_ANA_OPTIMIZED:
                return NVME_ANA_OPTIMIZED;
        case CORE_ANA_NON_OPTIMIZED:
                return NVME_ANA_NON_OPTIMIZED;
        case CORE_ANA_PERSISTENT_LOSS:
                return NVME_ANA_PERSISTENT_LOSS;
        case CORE_ANA_TRANSITIONING:
                return NVME_ANA_CHANGE;
        case CORE_ANA_STANDBY: /* NVMe has no standby */
        case CORE_ANA_INACCESSIBLE:
        default:
                return NVME_ANA_INACCESSIBLE;
        }
}

uint32_t nvme_ana_log(struct nvme_subsys *s, bool rgo, uint8_t *p, uint32_t cap)
{
        /* Which NSIDs each group has: one pass over the subsystem's namespaces. */
        uint8_t group_of[NVME_MAX_NSID + 1];
        uint32_t count[CORE_ANA_GROUPS + 1] = {0};
        for (uint32_t nsid = 1; nsid <= NVME_MAX_NSID; nsid++) {
                struct core_ns *ns = nvme_ns_lookup(s, nsid);
                group_of[nsid] = 0;
                if (!ns)
                        continue;
                uint32_t g = core_ns_ana_group(ns);
                core_ns_put(ns);
                if (g && g <= CORE_ANA_GROUPS) {
                        group_of[nsid] = (uint8_t)g;
                        count[g]++;
                }
        }
        struct nvme_ana_log_hdr *h = (void *)p;
        uint32_t off = sizeof(*h);
        uint16_t ngrps = 0;
        if (cap < off)
                return 0;
        memset(h, 0, sizeof(*h));
        put_le64(&h->chgcnt, core_ana_change_count());
        for (uint32_t g = 1; g <= CORE_ANA_GROUPS; g++) {
                if (!count[g])
                        continue;
                uint32_t nn = rgo ? 0 : count[g];
                if (off + sizeof(struct nvme_ana_group_desc) + 4u * nn > cap)
                        break;
                struct nvme_ana_group_desc *d = (void *)(p + off);
                memset(d, 0, sizeof(*d));
                put_le32(&d->grpid, g);
                put_le32(&d->nnsids, nn);
                put_le64(&d->chgcnt, core_ana_group_change_count(g));
                d->state = nvme_ana_state(core_ana_state(g));
                off += sizeof(*d);
                for (uint32_t nsid = 1; nn && nsid <= NVME_MAX_NSID; nsid++)
                        if (group_of[nsid] == g) {
                                slate_put_le(p + off, 4, nsid);
                                off += 4;
                        }
                ngrps++;
        }
        put_le16(&h->ngrps, ngrps);
        return off;
}
