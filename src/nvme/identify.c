/*
 * Identify (NVMe Base 2.0 5.17; NVM Command Set 1.0 4.1.5): CNS 00h
 * namespace, 01h controller (I/O or discovery), 02h/07h active NSID lists,
 * 03h namespace identification descriptors, 05h/06h NVM command set
 * specific namespace/controller, 08h I/O command set independent namespace.
 * Every identifier derives from the core namespace identity: NGUID and
 * UUID are ns->uuid, EUI-64 is ns->eui64 (the SCSI side's VPD 83h uses the
 * same fields).  The LBA formats, protection information and ELBAFs are
 * pi.c's.  Identify finishes inline: the 4096 bytes go C2H from buf.
 */
#include <stdio.h>
#include <string.h>

#include "core/ana.h"
#include "core/atomic.h"
#include "nvme/internal.h"

static void pad_copy(char *dst, size_t n, const char *src)
{
        size_t l = strlen(src);
        memset(dst, ' ', n);
        memcpy(dst, src, l < n ? l : n);
}

static unsigned mdts_shift(void)
{
        unsigned s = 0;
        while ((4096u << (s + 1)) <= CORE_MAX_TRANSFER_BYTES)
                s++;
        return s;
}

/*
 * EDSTT: our estimate of an extended device self-test of every namespace,
 * in minutes: their capacity read at the namespace's self-test pacing, or
 * at an assumed 100 MiB/s when unpaced; at least 1.
 */
static uint16_t edstt_minutes(struct nvme_subsys *s)
{
        uint64_t secs = 0;
        for (uint32_t i = 1; i <= NVME_MAX_NSID; i++) {
                struct core_ns *ns = nvme_ns_lookup(s, i);
                if (!ns)
                        continue;
                uint64_t rate = ns->selftest_rate_mibps ? ns->selftest_rate_mibps : 100;
                secs += ((core_ns_blocks(ns) << ns->block_shift) >> 20) / rate + 1;
                core_ns_put(ns);
        }
        uint64_t m = (secs + 59) / 60;
        return (uint16_t)(m < 1 ? 1 : m > 0xffff ? 0xffff : m);
}

static void id_ctrl(struct nvme_ctrl *ctrl, struct nvme_id_ctrl *id)
{
        struct nvme_subsys *s = ctrl->subsys;
        bool disc = s->discovery;

        pad_copy(id->sn, sizeof(id->sn), s->serial);
        pad_copy(id->mn, sizeof(id->mn), s->model);
        pad_copy(id->fr, sizeof(id->fr), s->fr);
        id->rab = 6;
        /* The subsystem may have several controllers, and reports ANA (ana.c): several
         * gateways may export it, each with its own states. */
        id->cmic = disc ? 0 : NVME_CMIC_MULTI_CTRL | NVME_CMIC_ANA;
        id->mdts = (uint8_t)mdts_shift();
        put_le16(&id->cntlid, ctrl->cntlid);
        put_le32(&id->ver, NVME_VS_1_4);
        put_le32(&id->oaes,
                 disc ? NVME_AEN_CFG_DISC_CHANGE
                      : NVME_AEN_CFG_NS_ATTR | NVME_AEN_CFG_ANA_CHANGE | NVME_AEN_CFG_LBA_STATUS);
        /*
         * 128-bit host identifier; on I/O controllers endurance groups (one
         * per namespace, ENDGID = NSID) and Flexible Data Placement (fdp.c:
         * enabled in the groups of the namespaces with the flash model).
         */
        put_le32(&id->ctratt,
                 NVME_CTRATT_HOSTID128 |
                     (disc ? 0 : NVME_CTRATT_ENDGRPS | NVME_CTRATT_FDPS | NVME_CTRATT_ELBAS));
        id->cntrltype = disc ? NVME_CTRL_TYPE_DISC : NVME_CTRL_TYPE_IO;
        id->acl = 3;
        id->aerl = NVME_AERL - 1;
        id->frmw = (1u << 1) | 1u; /* one slot, read-only */
        /* Unrecoverable blocks (lbastatus.c); Directives (directive.c); self-test (selftest.c). */
        if (!disc) {
                put_le16(&id->oacs, NVME_OACS_GET_LBA_STATUS | NVME_OACS_DIRECTIVES |
                                        NVME_OACS_DEVICE_SELF_TEST | NVME_OACS_FORMAT);
                /* Format NVM (pi.c): per namespace, no secure erase (FNA 0). */
                id->fna = 0;
                put_le16(&id->endgidmax, NVME_MAX_NSID);
                id->dsto = 0x01; /* one device self-test operation at a time in the subsystem */
                put_le16(&id->edstt, edstt_minutes(s));
        }
        /* SMART per namespace (log.c); effects log; extended data; Persistent Event log (pel.c) */
        id->lpa = disc ? (1u << 2) : (1u << 0) | (1u << 1) | (1u << 2) | (1u << 4);
        id->elpe = NVME_ERRLOG_ENTRIES - 1;
        id->npss = 0;
        put_le16(&id->wctemp, NVME_WCTEMP);
        put_le16(&id->cctemp, NVME_CCTEMP);
        put_le16(&id->kas, 10); /* 100 ms units: 1 s granularity */
        id->sqes = (6 << 4) | 6;
        id->cqes = (4 << 4) | 4;
        put_le16(&id->maxcmd, NVME_TRANSPORT_QUEUE_DEPTH);
        if (!disc) {
                put_le32(&id->nn, NVME_MAX_NSID);
                put_le16(&id->oncs, NVME_ONCS_COMPARE | NVME_ONCS_WRITE_UNCOR | NVME_ONCS_DSM |
                                        NVME_ONCS_WRITE_ZEROES | NVME_ONCS_SAVE_SELECT |
                                        NVME_ONCS_RESERVATIONS | NVME_ONCS_VERIFY | NVME_ONCS_COPY |
                                        NVME_ONCS_COPY_SA | NVME_ONCS_ALL_FAST);
                /* Copy (copy.c): every format; 2h/3h once enabled by Host Behavior Support. */
                put_le16(&id->ocfs, 0xf);
                id->vwc = 0x01 | (0x2 << 1); /* present; Flush to FFFFFFFFh not supported */
                /*
                 * Atomic writes (core/atomic.h): each namespace states its own
                 * (NSFEAT NSABP, NAWUN/NAWUPF); the controller-wide values
                 * are our choice of one block (0's based 0), what holds for
                 * every namespace.  Fused Compare and Write (fused.c, FUSES
                 * bit 0): ACWU one block controller-wide, NACWU per namespace.
                 */
                put_le16(&id->awun, 0);
                put_le16(&id->awupf, 0);
                put_le16(&id->acwu, 0);
                put_le16(&id->fuses, 0x1);
                /* Feature 84h: every namespace write protection state (8.12). */
                id->nwpc = NVME_NWPC_WP | NVME_NWPC_UNTIL_PWR_CY | NVME_NWPC_PERMANENT;
                /* Block erase and overwrite (core/sanitize.c); crypto erase when every
                 * namespace is encrypted at rest (core/crypt.h).  NDAS is honoured
                 * (NDI = 0). */
                /* ANA (ana.c): every state, groups 1..CORE_ANA_GROUPS; a namespace's
                 * group may change while attached (ANACAP bit 6 clear: namespace_set). */
                id->anatt = NVME_ANATT_S;
                id->anacap = NVME_ANACAP_OPTIMIZED | NVME_ANACAP_NON_OPTIMIZED |
                             NVME_ANACAP_INACCESSIBLE | NVME_ANACAP_PERSISTENT_LOSS |
                             NVME_ANACAP_CHANGE;
                put_le32(&id->anagrpmax, CORE_ANA_GROUPS);
                put_le32(&id->nanagrpid, CORE_ANA_GROUPS);
                /* Linux sizes the ANA log with MNAN and refuses ANA without it (1..NN). */
                put_le32(&id->mnan, NVME_MAX_NSID);
                put_le32(&id->sanicap, NVME_SANICAP_BES | NVME_SANICAP_OWS |
                                           NVME_SANICAP_NODMMAS_NOT |
                                           (nvme_subsys_crypto_erasable(s) ? NVME_SANICAP_CES : 0));
        }
        put_le32(&id->sgls, (1u << 0) | (1u << 20)); /* SGLs; Offset (in-capsule) data blocks */
        snprintf(id->subnqn, sizeof(id->subnqn), "%s", s->nqn);
        put_le32(&id->ioccsz, (64 + NVME_TRANSPORT_ICD_BYTES) / 16);
        put_le32(&id->iorcsz, 1);
        id->msdbd = 1;
        put_le16(&id->psd[0].mp, 1000); /* 10.00 W, nominal */
}

/* Reservations (resv.c): persist through power loss, every type, IEKEY as in 1.3+. */
#define RESCAP_ALL                                                                                 \
        (NVME_RESCAP_PTPL | NVME_RESCAP_WE | NVME_RESCAP_EA | NVME_RESCAP_WE_RO |                  \
         NVME_RESCAP_EA_RO | NVME_RESCAP_WE_AR | NVME_RESCAP_EA_AR | NVME_RESCAP_IEKEY13)

static void id_ns(struct core_ns *ns, uint32_t nsid, struct nvme_id_ns *id)
{
        uint64_t nb = core_ns_blocks(ns); /* one value, should a resize run */
        put_le64(&id->nsze, nb);
        put_le64(&id->ncap, nb);
        put_le64(&id->nuse, nb);
        if (ns->thin) {
                /*
                 * THINP, and NUSE from what the backend really holds (file:
                 * st_blocks; mem: the pages it holds; null cannot tell, so
                 * all is in use).
                 * Deallocated blocks read zeroes (DLFEAT 001b) and Write
                 * Zeroes may deallocate (DEAC, bit 3).
                 */
                int64_t alloc = core_ns_allocated_bytes(ns);
                uint64_t limit = atomic_load(&ns->prov.limit) >> ns->block_shift;
                id->nsfeat |= NVME_NSFEAT_THINP;
                if (alloc >= 0) {
                        uint64_t used = ((uint64_t)alloc + ns->block_size - 1) >> ns->block_shift;
                        put_le64(&id->nuse, used < nb ? used : nb);
                }
                /* NCAP: what may be allocated, the provisioning limit when there is one. */
                if (limit && limit < nb)
                        put_le64(&id->ncap, limit);
                id->dlfeat = 0x08 | 0x01;
        }
        uint32_t gran = core_ns_dealloc_granularity(ns);
        if (gran) {
                /*
                 * OPTPERF: the backend allocates and frees space in units
                 * of gran blocks (the file system's block, the page), so
                 * that is the preferred write and deallocate granularity
                 * and alignment (0's based); NOWS the same, since larger
                 * writes gain nothing more on a file or in RAM.  Linux
                 * makes NPWG io_min and NOWS io_opt.
                 */
                id->nsfeat |= NVME_NSFEAT_OPTPERF;
                put_le16(&id->npwg, (uint16_t)(gran - 1));
                put_le16(&id->npwa, (uint16_t)(gran - 1));
                put_le16(&id->npdg, (uint16_t)(gran - 1));
                put_le16(&id->npda, (uint16_t)(gran - 1));
                put_le16(&id->nows, (uint16_t)(gran - 1));
        }
        struct core_atomic_limits al;
        core_ns_atomic_limits(ns, &al);
        /* On a format with metadata too: the journal records it with the data. */
        if (al.max_blocks > 1) {
                /*
                 * NSABP: every Write of up to NAWUPF + 1 blocks is atomic,
                 * across power loss too (the journal), so NAWUN = NAWUPF;
                 * no atomic boundaries (NABSN = NABSPF = 0, NABO = 0).  A
                 * fused Compare and Write runs under the core's range lock,
                 * so it is atomic against other commands at any size; NACWU
                 * promises the same unit as NAWUN.  Linux takes NAWUPF for
                 * queue/atomic_write_unit_max_bytes.
                 */
                uint32_t m = al.max_blocks - 1 > 0xffff ? 0xffff : al.max_blocks - 1;
                id->nsfeat |= NVME_NSFEAT_NSABP;
                put_le16(&id->nawun, (uint16_t)m);
                put_le16(&id->nawupf, (uint16_t)m);
                put_le16(&id->nacwu, (uint16_t)m);
                /*
                 * The object path (rbd): a Write is atomic inside one RADOS
                 * object, so the object is the atomic boundary, normal and
                 * power-fail (0's based, as NAWUN; NABO 0: boundaries at
                 * multiples of it from LBA 0, what Linux requires).  A fused
                 * Compare and Write is atomic only against this gateway's
                 * commands (its range lock): NACWU one block.
                 */
                if (al.boundary_blocks > 1) {
                        uint32_t b =
                            al.boundary_blocks - 1 > 0xffff ? 0xffff : al.boundary_blocks - 1;
                        put_le16(&id->nabsn, (uint16_t)b);
                        put_le16(&id->nabspf, (uint16_t)b);
                        put_le16(&id->nabo, 0);
                        put_le16(&id->nacwu, 0);
                }
        }
        /* The LBA formats: the namespace's block size with 0, 8 or 16 bytes of metadata (pi.c). */
        nvme_pi_id_ns(ns, id);
        id->nmic = 1; /* may be attached to several controllers */
        put_le32(&id->anagrpid, core_ns_ana_group(ns));
        id->rescap = RESCAP_ALL;
        id->nsattr = core_ns_wp(ns) ? 1 : 0; /* write protected, for any reason */
        memcpy(id->nguid, ns->uuid, 16);
        slate_put_be(id->eui64, 8, ns->eui64);
        put_le16(&id->endgid, (uint16_t)nsid); /* its own endurance group (fdp.c) */
        uint16_t mssrl;
        uint32_t mcl;
        nvme_copy_limits(ns, &mssrl, &mcl, &id->msrc);
        put_le16(&id->mssrl, mssrl);
        put_le32(&id->mcl, mcl);
}

static uint32_t ns_desc_list(struct core_ns *ns, uint8_t *p)
{
        uint32_t off = 0;
        struct nvme_ns_id_desc *d;

        d = (struct nvme_ns_id_desc *)(p + off);
        d->nidt = NVME_NIDT_EUI64;
        d->nidl = 8;
        slate_put_be(p + off + 4, 8, ns->eui64);
        off += 4 + 8;
        d = (struct nvme_ns_id_desc *)(p + off);
        d->nidt = NVME_NIDT_NGUID;
        d->nidl = 16;
        memcpy(p + off + 4, ns->uuid, 16);
        off += 4 + 16;
        d = (struct nvme_ns_id_desc *)(p + off);
        d->nidt = NVME_NIDT_UUID;
        d->nidl = 16;
        memcpy(p + off + 4, ns->uuid, 16);
        off += 4 + 16;
        d = (struct nvme_ns_id_desc *)(p + off);
        d->nidt = NVME_NIDT_CSI;
        d->nidl = 1;
        p[off + 4] = NVME_CSI_NVM;
        off += 4 + 1;
        return off;
}

static void active_list(struct nvme_subsys *s, uint32_t after, uint8_t *p)
{
        unsigned n = 0;
        for (uint32_t i = after + 1; i <= NVME_MAX_NSID && n < 1024; i++)
                if (nvme_ns_active(s, i))
                        slate_put_le(p + 4 * n++, 4, i);
}

enum nvme_parse_result nvme_identify_parse(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        struct nvme_subsys *s = ctrl->subsys;
        uint8_t cns = nvme_cdw(cmd, 10) & 0xff;
        uint8_t csi = nvme_cdw(cmd, 11) >> 24;
        uint32_t nsid = nvme_nsid(cmd);
        uint8_t *p = cmd->buf;

        if (!nvme_xfer(cmd, 4096, false))
                return NVME_PARSE_DONE;
        memset(p, 0, 4096);
        if (s->discovery && cns != NVME_CNS_CTRL)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10));

        switch (cns) {
        case NVME_CNS_CTRL:
                id_ctrl(ctrl, (struct nvme_id_ctrl *)p);
                break;
        case NVME_CNS_NS:
        case NVME_CNS_NS_DESC_LIST:
        case NVME_CNS_NS_INDEPENDENT:
        case NVME_CNS_CSI_NS: {
                if (cns == NVME_CNS_CSI_NS && csi != NVME_CSI_NVM)
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11) + 3);
                if (nsid == 0 || nsid > NVME_MAX_NSID)
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
                cmd->ns = nvme_ns_lookup(s, nsid);
                if (!cmd->ns) {
                        /* A valid but inactive NSID reads as zeroes for CNS 00h
                         * (Base 2.0 5.17.2.1). */
                        if (cns == NVME_CNS_NS)
                                break;
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
                }
                if (cns == NVME_CNS_NS) {
                        id_ns(cmd->ns, nsid, (struct nvme_id_ns *)p);
                } else if (cns == NVME_CNS_NS_DESC_LIST) {
                        ns_desc_list(cmd->ns, p);
                } else if (cns == NVME_CNS_NS_INDEPENDENT) {
                        struct nvme_id_ns_indep *id = (struct nvme_id_ns_indep *)p;
                        id->nmic = 1;
                        put_le32(&id->anagrpid, core_ns_ana_group(cmd->ns));
                        id->rescap = RESCAP_ALL;
                        id->nsattr = core_ns_wp(cmd->ns) ? 1 : 0;
                        id->nstat = core_ns_ready(cmd->ns) == CORE_NS_READY; /* NRDY */
                        put_le16(&id->endgid, (uint16_t)nsid);
                } else if (cns == NVME_CNS_CSI_NS)
                        nvme_pi_id_ns_nvm(cmd->ns, p); /* ELBAF per LBA format (pi.c) */
                break;
        }
        case NVME_CNS_ACTIVE_NS_LIST:
        case NVME_CNS_CSI_ACTIVE_NS_LIST:
                if (cns == NVME_CNS_CSI_ACTIVE_NS_LIST && csi != NVME_CSI_NVM)
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11) + 3);
                if (nsid >= 0xfffffffeu)
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
                active_list(s, nsid, p);
                break;
        case NVME_CNS_CSI_CTRL:
                if (csi != NVME_CSI_NVM)
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11) + 3);
                /* VSL/WZSL/WUSL/DMRL/DMRSL/DMSL = 0: no limits beyond MDTS. */
                break;
        default:
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10));
        }
        return NVME_PARSE_DONE;
}
