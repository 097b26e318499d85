/*
 * INQUIRY data: the standard INQUIRY data (SPC-5 6.7.2) and the vital
 * product data pages we support (SPC-5 7.7, SBC-4 6.6): 00h supported
 * pages, 80h unit serial number, 83h device identification (NAA-6, UUID,
 * T10 vendor ID, and the target port's SCSI name string, relative port
 * and port group), 86h extended INQUIRY, B0h block limits and B1h block
 * device characteristics, 8Fh third-party copy (the limits xcopy.c
 * enforces), and on thin LUs B2h logical block provisioning
 * (with the Block Limits unmap fields).  B0h's atomic fields come from
 * the core's atomic limits (core/atomic.h); B7h block limits extension
 * carries the stream limits (streams.c: MAXIMUM NUMBER OF STREAMS, RSCS=1
 * for the permanent streams) and the WRITE SCATTERED limits; 86h sets
 * GROUP_SUP (GROUP NUMBER is honoured, streams.c); C0h is Slate's vendor page for the atomic
 * scattered write (atomic.c).  Every designator derives from the namespace UUID (see STANDARDS.md
 * section 5).
 */
#include <stdio.h>
#include <string.h>

#include "core/ana.h"
#include "core/atomic.h"
#include "slate/spec/scsi.h"
#include "scsi/internal.h"
#include "core/media.h"

#define SLATE_VENDOR   "SLATE   "
#define SLATE_PRODUCT  "slate-disk      "
#define SLATE_REVISION "0001"

/* Supported pages, ascending (VPD 00h); B2h on thin LUs only. */
static const uint8_t vpd_pages[] = {0x00, 0x80, 0x83, 0x86, 0x8f,
                                    0xb0, 0xb1, 0xb2, 0xb7, SCSI_VPD_SLATE_ATOMIC};

static uint8_t peripheral(const struct scsi_cmd *cmd)
{
        return cmd->ns ? 0x00 : 0x7f; /* qualifier 0 type 0 (disk) / qualifier 3 type 1Fh */
}

uint32_t scsi_inquiry_std_build(struct scsi_cmd *cmd, uint8_t *out)
{
        struct scsi_inquiry_std *q = (void *)out;
        static const uint16_t versions[] = {
            0x00a0, /* SAM-5 */
            0x05c0, /* SPC-5 */
            0x0460, /* SPC-4 */
            0x0600, /* SBC-4 */
            0x04c0, /* SBC-3 */
            0x0960, /* iSCSI */
        };
        memset(q, 0, sizeof(*q));
        q->peripheral = peripheral(cmd);
        if (cmd->ns && cmd->ns->removable)
                q->rmb = 0x80;   /* RMB: removable medium (SBC-4 4.10) */
        q->version = 0x06;       /* SPC-4: what iscsi-test-cu accepts (4..6) */
        q->flags3 = 0x10 | 0x02; /* HISUP, response data format 2 */
        q->additional_len = sizeof(*q) - 5;
        /* 3PC: third-party copy (EXTENDED COPY, xcopy.c); PROTECT: an LU can be formatted with
         * protection information (pi.c; READ CAPACITY(16) PROT_EN says whether it is). */
        q->flags5 = 0x08 | (cmd->ns ? 0x01 : 0);
        q->flags5 |= 0x10; /* TPGS 01b: implicit ALUA (alua.c) */
        q->flags7 = 0x02;  /* CMDQUE */
        memcpy(q->vendor, SLATE_VENDOR, 8);
        memcpy(q->product, SLATE_PRODUCT, 16);
        memcpy(q->revision, SLATE_REVISION, 4);
        for (unsigned i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
                put_be16(&q->version_desc[i], versions[i]);
        return sizeof(*q);
}

static void uuid_hex(const struct core_ns *ns, char out[33])
{
        for (int i = 0; i < 16; i++)
                snprintf(out + 2 * i, 3, "%02x", ns->uuid[i]);
}

static uint32_t desig(uint8_t *p, uint8_t proto_codeset, uint8_t piv_assoc_type, const void *data,
                      uint8_t len)
{
        struct scsi_designator_hdr *h = (void *)p;
        h->proto_codeset = proto_codeset;
        h->piv_assoc_type = piv_assoc_type;
        h->reserved = 0;
        h->len = len;
        memcpy(p + sizeof(*h), data, len);
        return sizeof(*h) + len;
}

/* The designators of the logical unit itself (association 00b): NAA-6, UUID, T10 vendor ID. */
static uint32_t vpd83_lu(const struct core_ns *ns, uint8_t *p)
{
        uint8_t d[64];
        uint32_t n = 0;
        char hex[33];

        /* NAA-6: CORE_COMPANY_ID, 36 bits from the UUID, then the EUI-64 as extension. */
        memset(d, 0, 16);
        d[0] = 0x60 | (uint8_t)(CORE_COMPANY_ID >> 20);
        d[1] = (uint8_t)(CORE_COMPANY_ID >> 12);
        d[2] = (uint8_t)(CORE_COMPANY_ID >> 4);
        d[3] = (uint8_t)((CORE_COMPANY_ID & 0xf) << 4) | (ns->uuid[0] & 0x0f);
        memcpy(d + 4, ns->uuid + 1, 4);
        slate_put_be(d + 8, 8, ns->eui64);
        n += desig(p + n, 0x01, 0x03, d, 16);

        /* UUID designator (type 0Ah): locally assigned RFC 4122 UUID. */
        memset(d, 0, 18);
        d[0] = 0x10;
        memcpy(d + 2, ns->uuid, 16);
        n += desig(p + n, 0x01, 0x0a, d, 18);

        /* T10 vendor ID: vendor + UUID in hex. */
        uuid_hex(ns, hex);
        memcpy(d, SLATE_VENDOR, 8);
        memcpy(d + 8, hex, 32);
        n += desig(p + n, 0x02, 0x01, d, 40);
        return n;
}

static uint32_t vpd83(struct scsi_cmd *cmd, uint8_t *p)
{
        struct scsi_target *tgt = cmd->nexus ? cmd->nexus->target : NULL;
        uint8_t d[256];
        uint32_t n = vpd83_lu(cmd->ns, p);

        if (tgt) {
                /* SCSI name string of the target port (iSCSI: "<name>,t,0x<tpgt>"). */
                int l = snprintf((char *)d, 240, "%s,t,0x%04x", tgt->name, tgt->tpgt);
                uint8_t len;
                if (l < 0)
                        l = 0;
                if (l > 235)
                        l = 235;
                len = (uint8_t)((l + 1 + 3) & ~3); /* null terminated, multiple of 4 */
                memset(d + l, 0, (size_t)(len - l));
                n += desig(p + n, 0x53, 0x98, d, len);
                /* Relative target port identifier. */
                memset(d, 0, 4);
                slate_put_be(d + 2, 2, tgt->rel_port_id);
                n += desig(p + n, 0x51, 0x94, d, 4);
                /* Target port group (ALUA, alua.c): the LU's access group on this gateway. */
                memset(d, 0, 4);
                slate_put_be(d + 2, 2, core_gateway_tpg(core_ns_ana_group(cmd->ns)));
                n += desig(p + n, 0x51, 0x95, d, 4);
        }
        return n;
}

bool scsi_vpd_lu_designator_match(const struct core_ns *ns, const uint8_t *desc)
{
        uint8_t buf[128];
        uint32_t n = vpd83_lu(ns, buf);
        if ((desc[1] & 0x30) != 0) /* association: the logical unit */
                return false;
        for (uint32_t off = 0; off + 4 <= n; off += 4u + buf[off + 3]) {
                const uint8_t *d = buf + off;
                if ((d[0] & 0x0f) == (desc[0] & 0x0f) && (d[1] & 0x0f) == (desc[1] & 0x0f) &&
                    d[3] == desc[3] && !memcmp(d + 4, desc + 4, d[3]))
                        return true;
        }
        return false;
}

/*
 * Third-party Copy VPD page (SPC-5 7.7.18): what the copy manager does,
 * consistent with what xcopy.c enforces.  The supported commands come from
 * the opcode table (83h and 84h service actions), so the page cannot claim
 * a command the dispatcher does not run.
 */
static uint32_t tpc_desc_hdr(uint8_t *p, uint16_t type, uint32_t body)
{
        /* Descriptor lengths are multiples of 4 (SPC-5 7.7.18.1). */
        uint32_t len = (body + 3u) & ~3u;
        slate_put_be(p, 2, type);
        slate_put_be(p + 2, 2, len);
        return 4 + len;
}

static uint32_t vpd8f(struct scsi_cmd *cmd, uint8_t *p)
{
        struct core_ns *ns = cmd->ns;
        uint32_t n = 0, k;
        uint8_t *d;

        /* 0001h Supported Commands: every 83h/84h service action of the opcode table. */
        d = p + n;
        k = 1;
        for (unsigned opc = SCSI_OP_EXTENDED_COPY; opc <= SCSI_OP_RECEIVE_COPY_RESULTS; opc++) {
                uint8_t *e = d + 4 + k, nsa = 0;
                e[0] = (uint8_t)opc;
                for (const struct scsi_op *op = scsi_op_next(NULL); op; op = scsi_op_next(op))
                        if (op->opcode == opc)
                                e[2 + nsa++] = (uint8_t)op->sa;
                e[1] = nsa;
                if (nsa)
                        k += 2u + nsa;
        }
        d[4] = (uint8_t)(k - 1); /* COMMANDS SUPPORTED LIST LENGTH */
        n += tpc_desc_hdr(d, 0x0001, k);

        /* 0004h Parameter Data (EXTENDED COPY(LID1) limits). */
        d = p + n;
        slate_put_be(d + 8, 2, SCSI_XCOPY_MAX_CSCD);
        slate_put_be(d + 10, 2, SCSI_XCOPY_MAX_SEGS);
        slate_put_be(d + 12, 4, SCSI_XCOPY_MAX_DESC_LIST);
        slate_put_be(d + 16, 4, 0); /* MAXIMUM INLINE DATA LENGTH */
        n += tpc_desc_hdr(d, 0x0004, 28);

        /* 0008h Supported Descriptors: block -> block segments (02h, 0Ah), identification CSCDs. */
        d = p + n;
        d[4] = 3;
        d[5] = 0x02;
        d[6] = 0x0a;
        d[7] = 0xe4;
        n += tpc_desc_hdr(d, 0x0008, 4);

        /* 000Ch Supported CSCD Descriptor IDs: none above 07FFh. */
        d = p + n;
        n += tpc_desc_hdr(d, 0x000c, 2);

        /* 0000h Block Device ROD Token Limits (SBC-4 6.6.7.2): what POPULATE TOKEN takes. */
        d = p + n;
        slate_put_be(d + 10, 2, SCSI_ODX_MAX_RANGES);
        slate_put_be(d + 12, 4, SCSI_ODX_MAX_INACTIVITY_S);
        slate_put_be(d + 16, 4, SCSI_ODX_DEFAULT_INACTIVITY_S);
        slate_put_be(d + 20, 8, SCSI_ODX_MAX_TOKEN_BYTES >> ns->block_shift); /* blocks */
        slate_put_be(d + 28, 8, SCSI_ODX_MAX_TOKEN_BYTES >> ns->block_shift); /* optimal */
        n += tpc_desc_hdr(d, 0x0000, 32);

        /* 0106h ROD Token Features: no remote tokens; lifetime is the inactivity timeout. */
        d = p + n;
        d[4] = 0x00;                                        /* REMOTE TOKENS: none */
        slate_put_be(d + 16, 4, 1);                         /* MINIMUM TOKEN LIFETIME */
        slate_put_be(d + 20, 4, SCSI_ODX_MAX_INACTIVITY_S); /* MAXIMUM TOKEN LIFETIME */
        slate_put_be(d + 24, 4, SCSI_ODX_MAX_INACTIVITY_S); /* MAXIMUM TOKEN INACTIVITY TIMEOUT */
        n += tpc_desc_hdr(d, 0x0106, 44);

        /* 0108h Supported ROD Token and ROD Types: point in time (in and out), block zero (in). */
        d = p + n;
        slate_put_be(d + 6, 2, 2 * 64);
        slate_put_be(d + 8, 4, 0x00800000u);
        d[8 + 4] = 0x03; /* TOKEN_IN, TOKEN_OUT */
        slate_put_be(d + 8 + 64, 4, 0xffff0001u);
        d[8 + 64 + 4] = 0x02; /* TOKEN_IN */
        n += tpc_desc_hdr(d, 0x0108, 4 + 2 * 64);

        /* 8001h General Copy Operations. */
        d = p + n;
        slate_put_be(d + 4, 4, SCSI_XCOPY_MAX_CONCURRENT); /* TOTAL CONCURRENT COPIES */
        slate_put_be(d + 8, 4,
                     SCSI_XCOPY_MAX_CONCURRENT); /* MAXIMUM IDENTIFIED CONCURRENT COPIES */
        slate_put_be(d + 12, 4, (uint64_t)SCSI_XCOPY_MAX_SEG_BLOCKS << ns->block_shift);
        d[16] = (uint8_t)ns->block_shift; /* DATA SEGMENT GRANULARITY (log 2): one block */
        d[17] = 0;                        /* INLINE DATA GRANULARITY */
        n += tpc_desc_hdr(d, 0x8001, 28);
        return n;
}

int scsi_vpd_build(struct scsi_cmd *cmd, uint8_t page, uint8_t *out, uint32_t cap)
{
        struct core_ns *ns = cmd->ns;
        struct scsi_vpd_hdr *h = (void *)out;
        uint8_t *p = out + sizeof(*h);
        uint32_t n = 0;

        if (cap < 1024 || !ns)
                return -1;
        memset(out, 0, 1024);
        h->peripheral = peripheral(cmd);
        h->page_code = page;
        switch (page) {
        case 0x00:
                for (unsigned i = 0; i < sizeof(vpd_pages); i++)
                        if (vpd_pages[i] != 0xb2 || ns->thin)
                                p[n++] = vpd_pages[i];
                break;
        case 0x80: {
                char hex[33];
                uuid_hex(ns, hex);
                memcpy(p, hex, 32);
                n = 32;
                break;
        }
        case 0x83:
                n = vpd83(cmd, p);
                break;
        case 0x8f:
                n = vpd8f(cmd, p);
                break;
        case 0x86:
                n = 0x3c;
                /* SPT 111b: types 1, 2 and 3; GRD_CHK, APP_CHK, REF_CHK (pi.c). */
                p[0] = (0x07 << 3) | 0x04 | 0x02 | 0x01;
                p[1] = 0x10 | 0x01; /* GROUP_SUP (streams.c), SIMPSUP */
                p[3] = 0x10 | 0x01; /* P_I_I_SUP (P_I_EXPONENT), LUICLR */
                break;
        case 0xb0: {
                struct scsi_vpd_block_limits *b = (void *)out;
                /* With PI a block may carry its metadata on the wire (pi.c). */
                uint32_t max_blocks =
                    (uint32_t)(CORE_MAX_TRANSFER_BYTES / core_ns_xfer_bytes(ns, 1, true));
                uint32_t opt_blocks = CORE_SMALL_TRANSFER_BYTES >> ns->block_shift;
                uint32_t caw = opt_blocks / 2; /* compare and write halves in one slot buffer */
                n = 0x3c;
                b->max_caw_len = (uint8_t)(caw > 255 ? 255 : caw);
                /* A write of whole physical blocks avoids a read-modify-write. */
                put_be16(&b->opt_xfer_len_gran, (uint16_t)(1u << ns->phys_exp));
                put_be32(&b->max_xfer_len, max_blocks);
                put_be32(&b->opt_xfer_len, opt_blocks);
                put_be32(&b->max_prefetch_len, max_blocks);
                put_be64(&b->max_write_same_len, SCSI_MAX_WRITE_SAME_LEN);
                if (ns->thin) {
                        /* The backend frees space in its allocation unit (core's rule). */
                        uint32_t gran = core_ns_dealloc_granularity(ns);
                        put_be32(&b->max_unmap_lba_count, SCSI_LBP_MAX_UNMAP_LBAS);
                        put_be32(&b->max_unmap_desc_count, SCSI_LBP_MAX_UNMAP_DESC);
                        put_be32(&b->opt_unmap_gran, gran);
                        put_be32(&b->unmap_gran_align, 0x80000000u); /* UGAVALID, aligned at 0 */
                }
                /* Atomic writes (SBC-4 6.6.4): what WRITE ATOMIC honours (core/atomic.h). */
                struct core_atomic_limits al;
                core_ns_atomic_limits(ns, &al);
                put_be32(&b->max_atomic_xfer_len, al.max_blocks);
                put_be32(&b->atomic_align, al.align_blocks);
                put_be32(&b->atomic_xfer_len_gran, al.gran_blocks);
                put_be32(&b->max_atomic_xfer_len_boundary, al.max_with_boundary);
                put_be32(&b->max_atomic_boundary_size, al.max_boundary);
                break;
        }
        case 0xb7: {
                /* Block Limits Extension (SBC-4 6.6.5): streams (streams.c), WRITE SCATTERED. */
                struct scsi_scatter_limits sl;
                scsi_scatter_limits(ns, &sl);
                n = 0x3c;
                scsi_streams_vpd_b7(ns, out);
                slate_put_be(out + 16, 4, sl.max_range_blocks);
                slate_put_be(out + 22, 2, sl.max_ranges);
                slate_put_be(out + 24, 4, sl.max_total_blocks);
                break;
        }
        case SCSI_VPD_SLATE_ATOMIC: {
                /*
                 * Slate's vendor page (atomic.c): a WRITE SCATTERED of at most
                 * SCATTER MAX BLOCKS in at most SCATTER MAX RANGES descriptors is
                 * atomic as a whole.  Bytes 4-7 page version (1), 8-11 blocks,
                 * 12-15 ranges, 16-19 MAXIMUM ATOMIC TRANSFER LENGTH for reference.
                 */
                struct core_atomic_limits al;
                core_ns_atomic_limits(ns, &al);
                n = 0x1c;
                slate_put_be(out + 4, 4, 1);
                slate_put_be(out + 8, 4, al.scatter_max_blocks);
                slate_put_be(out + 12, 4, al.scatter_max_blocks ? al.scatter_max_ranges : 0);
                slate_put_be(out + 16, 4, al.max_blocks);
                break;
        }
        case 0xb2:
                if (!ns->thin)
                        return -1;
                n = 4;
                /*
                 * THRESHOLD EXPONENT: a threshold set is CORE_PROV_SET_BYTES, the unit
                 * of the mode page 1Ch/02h threshold count and the log page 0Ch counts.
                 */
                p[0] = scsi_lbp_threshold_exponent(ns);
                /* LBPU, LBPWS, LBPWS10, LBPRZ 001b; ANC_SUP per namespace; DP 0 (no descriptor). */
                p[1] = 0x80 | 0x40 | 0x20 | 0x04 | (core_ns_can_anchor(ns) ? 0x02 : 0);
                p[2] = 0x02; /* PROVISIONING TYPE: thin */
                break;
        case 0xb1:
                n = 0x3c;
                p[1] = 0x01; /* MEDIUM ROTATION RATE: non-rotating */
                /* WABEREQ 01b: a read after SANITIZE BLOCK ERASE succeeds (zeroes); thin only. */
                if (ns->thin)
                        p[3] = 0x40;
                /* WACEREQ 01b: a read after CRYPTOGRAPHIC ERASE succeeds; encrypted LUs only. */
                if (ns->crypt)
                        p[3] |= 0x10;
                /* DEPOPULATION TIME (SBC-4 6.6.2, bytes 12-15): the nominal seconds a
                 * REMOVE ELEMENT AND TRUNCATE takes, on an LU with physical elements. */
                if (core_media_elements(ns))
                        slate_put_be(out + 12, 4, SCSI_DEPOP_TIME_S);
                break;
        default:
                return -1;
        }
        put_be16(&h->page_len, (uint16_t)n);
        return (int)(sizeof(*h) + n);
}
