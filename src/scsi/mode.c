/*
 * MODE SENSE(6)/(10) and MODE SELECT(6)/(10) (SPC-5 6.11-6.14, 7.5): the
 * caching page (08h, SBC-4 6.5.5; WCE maps to core_ns.wce), the control
 * page (0Ah, SPC-5 7.5.8; D_SENSE and SWP changeable) and the
 * informational exceptions control page (1Ch, SPC-5 7.5.12), with page
 * control current/changeable/default (saved values are not supported:
 * 39h/00h), block descriptors (short, or long with LLBAA), and the WP bit
 * in the device-specific parameter.  A MODE SELECT that changes anything
 * establishes MODE PARAMETERS CHANGED on the other I_T nexuses.
 */
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"

enum { PC_CURRENT = 0, PC_CHANGEABLE = 1, PC_DEFAULT = 2, PC_SAVED = 3 };

#define CACHING_LEN 20
#define CONTROL_LEN 12
#define IEC_LEN     12

static const uint8_t mode_pages[] = {0x08, 0x0a, 0x1c};

static uint32_t page_len(uint8_t page)
{
        switch (page) {
        case 0x08:
                return CACHING_LEN;
        case 0x0a:
                return CONTROL_LEN;
        case 0x1c:
                return IEC_LEN;
        }
        return 0;
}

/* Writes one page for the given page control; returns its length. */
static uint32_t build_page(struct scsi_cmd *cmd, uint8_t page, int pc, uint8_t *p)
{
        struct core_ns *ns = cmd->ns;
        struct scsi_lu_state *st = ns->scsi_state;
        uint32_t len = page_len(page);

        memset(p, 0, len);
        p[0] = page;
        p[1] = (uint8_t)(len - 2);
        switch (page) {
        case 0x08:
                if (pc == PC_CHANGEABLE)
                        p[2] = 0x04;
                else if (pc == PC_DEFAULT)
                        p[2] = ns->be.volatile_cache ? 0x04 : 0;
                else
                        p[2] = atomic_load(&ns->wce) ? 0x04 : 0;
                break;
        case 0x0a:
                if (pc == PC_CHANGEABLE) {
                        p[2] = 0x04; /* D_SENSE */
                        p[4] = 0x08; /* SWP */
                } else {
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
                if (pc != PC_CHANGEABLE)
                        p[2] = 0x08; /* DEXCPT: no informational exceptions reported */
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
        if (pc == PC_SAVED) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x39, 0x00);
                return SCSI_PARSE_DONE;
        }
        if (subpage != 0x00 && subpage != 0xff) {
                scsi_sense_invalid_field(cmd, true, 3, 7);
                return SCSI_PARSE_DONE;
        }
        if (page != 0x3f && !page_len(page)) {
                scsi_sense_invalid_field(cmd, true, 2, 5);
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
        if (page == 0x3f) {
                for (unsigned i = 0; i < sizeof(mode_pages); i++)
                        len += build_page(cmd, mode_pages[i], pc, b + len);
        } else {
                len += build_page(cmd, page, pc, b + len);
        }
        if (ten) {
                struct scsi_mode_hdr10 *h = (void *)b;
                put_be16(&h->data_len, (uint16_t)(len - 2));
                h->dev_specific = 0x10 | (core_ns_wp(ns) ? 0x80 : 0);
                h->longlba = bd == 16 ? 0x01 : 0;
                put_be16(&h->bd_len, (uint16_t)bd);
        } else {
                struct scsi_mode_hdr6 *h = (void *)b;
                h->data_len = (uint8_t)(len - 1);
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

/* Checks and applies one page; returns false with sense set on error. */
static bool select_page(struct scsi_cmd *cmd, const uint8_t *p, uint32_t off, bool *changed)
{
        struct core_ns *ns = cmd->ns;
        struct scsi_lu_state *st = ns->scsi_state;
        uint8_t page = p[0] & 0x3f;
        uint32_t len = page_len(page);
        uint8_t cur[32], chg[32];

        if (!len || (p[0] & 0x40)) {
                scsi_sense_invalid_field(cmd, false, (uint16_t)off, 5);
                return false;
        }
        if (p[1] != len - 2) {
                scsi_sense_invalid_field(cmd, false, (uint16_t)(off + 1), 7);
                return false;
        }
        build_page(cmd, page, PC_CURRENT, cur);
        build_page(cmd, page, PC_CHANGEABLE, chg);
        for (uint32_t i = 2; i < len; i++) {
                uint8_t diff = (uint8_t)((p[i] ^ cur[i]) & ~chg[i]);
                if (diff) {
                        scsi_sense_invalid_field(cmd, false, (uint16_t)(off + i),
                                                 31 - __builtin_clz(diff));
                        return false;
                }
        }
        /* Shared state changes through the core, which tells every other host
         * (MODE PARAMETERS CHANGED here, NVMe events there); D_SENSE is ours. */
        switch (page) {
        case 0x08:
                core_ns_set_wce(ns, p[2] & 0x04, cmd->nexus);
                break;
        case 0x0a: {
                bool d = p[2] & 0x04;
                if (d != st->d_sense) {
                        st->d_sense = d;
                        *changed = true;
                }
                core_ns_set_wp(ns, CORE_WP_SOFTWARE, p[4] & 0x08, cmd->nexus);
                break;
        }
        }
        return true;
}

void scsi_mode_select_exec(struct scsi_cmd *cmd)
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
                plen = (uint32_t)b[off + 1] + 2;
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
        scsi_cmd_finish_deferred(cmd);
}
