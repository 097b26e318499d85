/*
 * MODE SENSE(6)/(10) and MODE SELECT(6)/(10) (SPC-5 6.11-6.14, 7.5): the
 * Read-Write Error Recovery page (01h, SBC-4 6.5.10: all zero, nothing
 * changeable; sg_format reads the block descriptor with it), the
 * caching page (08h, SBC-4 6.5.5; WCE maps to core_ns.wce), the control
 * page (0Ah, SPC-5 7.5.8; D_SENSE and SWP changeable), the IO advice hints
 * grouping page (0Ah/05h, SBC-4 6.5.7; built and selected by streams.c:
 * IO ADVICE HINTS MODE, CS_ENBLE, IC_ENABLE and the logical block markup
 * changeable, ST_ENBLE fixed; not saved), the informational
 * exceptions control page (1Ch, SPC-5 7.5.12) and, on a thin LU whose
 * backend reports its allocation, the Logical Block Provisioning page
 * (1Ch/02h, SBC-4 6.5.8) with one threshold descriptor: a soft threshold,
 * armed increasing, on the used LBA mapping resource, its THRESHOLD COUNT
 * in threshold sets (2^THRESHOLD EXPONENT blocks, VPD B2h).  ENABLED and
 * the count are changeable and are the core's soft threshold
 * (core_ns_set_provision: persisted, so the saved values are the current
 * ones); SITUA is 0 and not changeable: the unit attention goes to every
 * I_T nexus.  Page control current/changeable/default; saved only for the
 * provisioning page (others: 39h/00h); block descriptors (short, or long
 * with LLBAA), and the WP bit in the device-specific parameter.  A MODE
 * SELECT that changes anything establishes MODE PARAMETERS CHANGED on the
 * other I_T nexuses.
 */
#include <errno.h>
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"

enum { PC_CURRENT = 0, PC_CHANGEABLE = 1, PC_DEFAULT = 2, PC_SAVED = 3 };

#define RWER_LEN    12 /* Read-Write Error Recovery (SBC-4 6.5.10): no retries to tune */
#define CACHING_LEN 20
#define CONTROL_LEN 12
#define IEC_LEN     12
#define LBP_LEN     24 /* 16-byte header + one threshold descriptor */
#define LBP_DESC    16 /* offset of the threshold descriptor */

static bool lbp_page_present(const struct core_ns *ns)
{
        return core_ns_provision_supported(ns);
}

/* The pages, in the order MODE SENSE returns them (page, then subpage). */
static const struct mode_page {
        uint8_t page, subpage;
        uint32_t len;
        bool (*present)(const struct core_ns *ns); /* NULL: every LU */
} mode_pages[] = {
    {0x01, 0x00, RWER_LEN, NULL}, /* sg_format reads its block descriptor with it */
    {0x08, 0x00, CACHING_LEN, NULL},
    {0x0a, 0x00, CONTROL_LEN, NULL},
    {0x0a, 0x02, SCSI_APPTAG_HDR, scsi_apptag_page_present}, /* Application Tag (pi.c) */
    {0x0a, 0x05, SCSI_GROUPING_LEN, NULL}, /* IO advice hints grouping (streams.c) */
    {0x1c, 0x00, IEC_LEN, NULL},
    {0x1c, 0x02, LBP_LEN, lbp_page_present},
};

static const struct mode_page *find_page(const struct core_ns *ns, uint8_t page, uint8_t subpage)
{
        for (unsigned i = 0; i < sizeof(mode_pages) / sizeof(mode_pages[0]); i++) {
                const struct mode_page *mp = &mode_pages[i];
                if (mp->page == page && mp->subpage == subpage && (!mp->present || mp->present(ns)))
                        return mp;
        }
        return NULL;
}

/* Does a MODE SENSE of (page, subpage) return mp?  3Fh: every page; FFh: every subpage. */
static bool page_selected(const struct mode_page *mp, uint8_t page, uint8_t subpage)
{
        if (page != 0x3f && mp->page != page)
                return false;
        return subpage == 0xff || mp->subpage == subpage;
}

/* Writes one page for the given page control; returns its length. */
static uint32_t build_page(struct scsi_cmd *cmd, const struct mode_page *mp, int pc, uint8_t *p)
{
        struct core_ns *ns = cmd->ns;
        struct scsi_lu_state *st = ns->scsi_state;
        uint32_t len = mp->len;
        bool pi;

        memset(p, 0, len);
        p[0] = mp->page;
        if (mp->subpage) {
                p[0] |= 0x40; /* SPF: sub_page format */
                p[1] = mp->subpage;
                slate_put_be(p + 2, 2, len - 4);
        } else {
                p[1] = (uint8_t)(len - 2);
        }
        switch (mp->page) {
        case 0x08:
                if (pc == PC_CHANGEABLE)
                        p[2] = 0x04;
                else if (pc == PC_DEFAULT)
                        p[2] = ns->be.volatile_cache ? 0x04 : 0;
                else
                        p[2] = atomic_load(&ns->wce) ? 0x04 : 0;
                break;
        case 0x0a:
                if (mp->subpage == 0x05) {
                        scsi_grouping_page_build(ns, pc, p);
                        break;
                }
                if (mp->subpage == 0x02)
                        return scsi_apptag_page_build(ns, pc, p);
                /* With PI (pi.c): ATO 1, fixed (we never modify an application tag);
                 * ATMPE changeable: the Application Tag mode page is used. */
                pi = scsi_lu_pi_type(ns) != 0;
                if (pc == PC_CHANGEABLE) {
                        p[2] = 0x04; /* D_SENSE */
                        p[4] = 0x08; /* SWP */
                        p[5] = pi ? 0x20 : 0;
                } else {
                        if (pi)
                                p[5] =
                                    0x80 | (pc == PC_CURRENT && atomic_load(&st->atmpe) ? 0x20 : 0);
                        p[2] = 0x02; /* GLTSD: no log parameters to save */
                        if (pc == PC_CURRENT) {
                                p[2] |= st->d_sense ? 0x04 : 0;
                                p[4] = (core_ns_wp(ns) & CORE_WP_SOFTWARE) ? 0x08 : 0;
                        }
                        p[8] = 0xff; /* BUSY TIMEOUT PERIOD: unlimited */
                        p[9] = 0xff;
                }
                break;
        case 0x1c:
                if (mp->subpage == 0x02) {
                        uint8_t *d = p + LBP_DESC;
                        uint64_t thr = atomic_load(&ns->prov.threshold);
                        /* SITUA (byte 4) 0: every I_T nexus gets the unit attention. */
                        if (pc == PC_CHANGEABLE) {
                                d[0] = 0x80; /* ENABLED */
                                slate_put_be(d + 4, 4, 0xffffffffu);
                                break;
                        }
                        /* THRESHOLD TYPE 000b soft, THRESHOLD ARMING 000b increasing. */
                        d[1] = 0x02; /* THRESHOLD RESOURCE: used LBA mapping resource */
                        if (pc != PC_DEFAULT && thr) {
                                d[0] = 0x80;
                                slate_put_be(d + 4, 4, thr / CORE_PROV_SET_BYTES);
                        }
                } else if (pc != PC_CHANGEABLE) {
                        p[2] = 0x08; /* DEXCPT: no informational exceptions reported */
                }
                break;
        }
        return len;
}

enum scsi_parse_result scsi_mode_sense(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        bool ten = c[0] == SCSI_OP_MODE_SENSE_10;
        bool dbd = c[1] & 0x08;
        bool llbaa = ten && (c[1] & 0x10);
        int pc = c[2] >> 6;
        uint8_t page = c[2] & 0x3f;
        uint8_t subpage = c[3];
        uint32_t alloc = ten ? slate_be16(c + 7) : c[4];
        uint32_t hdr = ten ? 8 : 4, bd = 0, len;
        uint8_t *b = cmd->buf;
        struct core_ns *ns = cmd->ns;

        cmd->xfer_len = alloc;
        if (c[1] & (ten ? 0xe7 : 0xf7)) {
                scsi_sense_invalid_field(cmd, true, 1, 7);
                return SCSI_PARSE_DONE;
        }
        bool any = false;
        for (unsigned i = 0; i < sizeof(mode_pages) / sizeof(mode_pages[0]); i++)
                any |= page_selected(&mode_pages[i], page, subpage) &&
                       find_page(ns, mode_pages[i].page, mode_pages[i].subpage);
        if (!any) {
                if (page == 0x3f || find_page(ns, page, 0))
                        scsi_sense_invalid_field(cmd, true, 3, 7);
                else
                        scsi_sense_invalid_field(cmd, true, 2, 5);
                return SCSI_PARSE_DONE;
        }
        /* Saved values: only the provisioning page has them (the core persists the threshold). */
        if (pc == PC_SAVED && !(page == 0x1c && subpage == 0x02)) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x39, 0x00);
                return SCSI_PARSE_DONE;
        }
        memset(b, 0, hdr);
        if (!dbd)
                bd = llbaa ? 16 : 8;
        len = hdr;
        if (bd == 8) {
                struct scsi_mode_bd_short *d = (void *)(b + len);
                memset(d, 0, sizeof(*d));
                put_be32(&d->num_blocks,
                         ns->num_blocks > UINT32_MAX ? UINT32_MAX : (uint32_t)ns->num_blocks);
                put_be24(&d->block_len, ns->block_size);
        } else if (bd == 16) {
                struct scsi_mode_bd_long *d = (void *)(b + len);
                memset(d, 0, sizeof(*d));
                put_be64(&d->num_blocks, ns->num_blocks);
                put_be32(&d->block_len, ns->block_size);
        }
        len += bd;
        for (unsigned i = 0; i < sizeof(mode_pages) / sizeof(mode_pages[0]); i++) {
                const struct mode_page *mp = &mode_pages[i];
                if (page_selected(mp, page, subpage) && find_page(ns, mp->page, mp->subpage))
                        len += build_page(cmd, mp, pc, b + len);
        }
        if (ten) {
                struct scsi_mode_hdr10 *h = (void *)b;
                put_be16(&h->data_len, (uint16_t)(len - 2));
                h->dev_specific = 0x10 | (core_ns_wp(ns) ? 0x80 : 0);
                h->longlba = bd == 16 ? 0x01 : 0;
                put_be16(&h->bd_len, (uint16_t)bd);
        } else {
                struct scsi_mode_hdr6 *h = (void *)b;
                /* One byte: the grouping page does not fit; what does fit is sent (our choice). */
                h->data_len = (uint8_t)(len - 1 > 0xff ? 0xff : len - 1);
                h->dev_specific = 0x10 | (core_ns_wp(ns) ? 0x80 : 0);
                h->bd_len = (uint8_t)bd;
        }
        scsi_cmd_data_in(cmd, len, alloc);
        return SCSI_PARSE_DONE;
}

enum scsi_parse_result scsi_mode_select(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        bool ten = c[0] == SCSI_OP_MODE_SELECT_10;
        uint32_t len = ten ? slate_be16(c + 7) : c[4];

        cmd->xfer_len = len;
        if (c[1] & 0x01) {
                /* SP: we keep no saved pages. */
                scsi_sense_invalid_field(cmd, true, 1, 0);
                return SCSI_PARSE_DONE;
        }
        if (c[1] & 0xee) {
                scsi_sense_invalid_field(cmd, true, 1, 7);
                return SCSI_PARSE_DONE;
        }
        if (len == 0) {
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        if (len > cmd->edtl) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                return SCSI_PARSE_DONE;
        }
        cmd->data_out_len = len;
        return SCSI_PARSE_EXEC;
}

/* The Logical Block Provisioning page's threshold descriptor, checked: the core's threshold. */
static bool select_lbp(struct scsi_cmd *cmd, const uint8_t *p, uint32_t off)
{
        struct core_ns *ns = cmd->ns;
        const uint8_t *d = p + LBP_DESC;
        uint64_t count = slate_be32(d + 4);
        char err[128];
        if ((d[0] & 0x80) && count == 0) {
                scsi_sense_invalid_field(cmd, false, (uint16_t)(off + LBP_DESC + 4), 7);
                return false;
        }
        uint64_t thr = (d[0] & 0x80) ? count * CORE_PROV_SET_BYTES : 0;
        int rc = core_ns_set_provision(ns, atomic_load(&ns->prov.limit), thr, cmd->nexus, err,
                                       sizeof(err));
        if (rc == -EINVAL) { /* above the hard limit */
                scsi_sense_invalid_field(cmd, false, (uint16_t)(off + LBP_DESC + 4), 7);
                return false;
        }
        if (rc) {
                scsi_status_from_core(cmd, CORE_E_INTERNAL, 0, false);
                return false;
        }
        return true;
}

/* Checks and applies one page; returns false with sense set on error. */
static bool select_page(struct scsi_cmd *cmd, const uint8_t *p, uint32_t off, bool *changed)
{
        struct core_ns *ns = cmd->ns;
        struct scsi_lu_state *st = ns->scsi_state;
        bool spf = p[0] & 0x40;
        const struct mode_page *mp = find_page(ns, p[0] & 0x3f, spf ? p[1] : 0);
        uint8_t cur[SCSI_GROUPING_LEN], chg[SCSI_GROUPING_LEN]; /* the longest page */

        if (!mp || (mp->subpage != 0) != spf) {
                scsi_sense_invalid_field(cmd, false,
                                         (uint16_t)(off + (mp    ? 0
                                                           : spf ? 1
                                                                 : 0)),
                                         mp    ? 6
                                         : spf ? 7
                                               : 5);
                return false;
        }
        uint32_t len = mp->len, hdr = spf ? 4 : 2;
        if (mp->page == 0x0a && mp->subpage == 0x02) /* variable length (pi.c) */
                return scsi_apptag_page_select(cmd, p, off, changed) == 0;
        if ((spf ? slate_be16(p + 2) : p[1]) != len - hdr) {
                scsi_sense_invalid_field(cmd, false, (uint16_t)(off + (spf ? 2 : 1)), 7);
                return false;
        }
        build_page(cmd, mp, PC_CURRENT, cur);
        build_page(cmd, mp, PC_CHANGEABLE, chg);
        for (uint32_t i = hdr; i < len; i++) {
                uint8_t diff = (uint8_t)((p[i] ^ cur[i]) & ~chg[i]);
                if (diff) {
                        scsi_sense_invalid_field(cmd, false, (uint16_t)(off + i),
                                                 31 - __builtin_clz(diff));
                        return false;
                }
        }
        /* Shared state changes through the core, which tells every other host
         * (MODE PARAMETERS CHANGED here, NVMe events there); D_SENSE is ours. */
        switch (mp->page) {
        case 0x08:
                core_ns_set_wce(ns, p[2] & 0x04, cmd->nexus);
                break;
        case 0x0a: {
                if (mp->subpage == 0x05)
                        return scsi_grouping_page_select(cmd, p, off, changed) == 0;
                bool d = p[2] & 0x04;
                if (d != st->d_sense) {
                        st->d_sense = d;
                        *changed = true;
                }
                core_ns_set_wp(ns, CORE_WP_SOFTWARE, p[4] & 0x08, cmd->nexus);
                if (scsi_lu_pi_type(ns)) {
                        bool atmpe = p[5] & 0x20;
                        if (atmpe != atomic_load(&st->atmpe)) {
                                atomic_store(&st->atmpe, atmpe);
                                *changed = true;
                        }
                }
                break;
        }
        case 0x1c:
                if (mp->subpage == 0x02)
                        return select_lbp(cmd, p, off);
                break;
        }
        return true;
}

void scsi_mode_select_apply(struct scsi_cmd *cmd)
{
        const uint8_t *b = cmd->buf;
        bool ten = cmd->cdb[0] == SCSI_OP_MODE_SELECT_10;
        uint32_t len = cmd->data_out_len, hdr = ten ? 8 : 4, bd, off;
        bool changed = false;

        scsi_cmd_good(cmd);
        if (len < hdr) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                goto out;
        }
        bd = ten ? slate_be16(b + 6) : b[3];
        if (hdr + bd > len) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                goto out;
        }
        if (b[ten ? 2 : 1] != 0) { /* medium type */
                scsi_sense_invalid_field(cmd, false, ten ? 2 : 1, 7);
                goto out;
        }
        /* Block descriptors: accept only what we report (block length or 0). */
        for (off = hdr; off < hdr + bd;) {
                bool lng = ten && (b[4] & 0x01);
                uint32_t dl = lng ? 16 : 8;
                uint32_t blen = lng ? slate_be32(b + off + 12) : slate_be24(b + off + 5);
                if (off + dl > hdr + bd) {
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                        goto out;
                }
                if (blen && blen != cmd->ns->block_size) {
                        scsi_sense_invalid_field(cmd, false, (uint16_t)(off + (lng ? 12 : 5)), 7);
                        goto out;
                }
                off += dl;
        }
        for (off = hdr + bd; off < len;) {
                uint32_t plen;
                if (off + 2 > len) {
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                        goto out;
                }
                if ((b[off] & 0x40) && off + 4 > len) {
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                        goto out;
                }
                plen = (b[off] & 0x40) ? slate_be16(b + off + 2) + 4u : (uint32_t)b[off + 1] + 2;
                if (off + plen > len) {
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                        goto out;
                }
                if (!select_page(cmd, b + off, off, &changed))
                        goto out;
                off += plen;
        }
        if (changed && cmd->nexus)
                scsi_target_ua(cmd->nexus->target, cmd->lun, SCSI_UA_MODE_CHANGED, cmd->nexus);
out:
        return;
}

void scsi_mode_select_exec(struct scsi_cmd *cmd)
{
        scsi_mode_select_apply(cmd);
        scsi_cmd_finish_deferred(cmd);
}
