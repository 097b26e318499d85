/*
 * Protection information in the SCSI personality (issue 10; SBC-4 4.22,
 * 5.3, 6.5.3): the LU's format as SCSI shows it, the RDPROTECT /
 * WRPROTECT / VRPROTECT / ORPROTECT fields of the medium commands mapped
 * onto the core's per-request protection settings (struct core_req.pi),
 * FORMAT UNIT with FMTPINFO, PROTECTION FIELD USAGE and the protection
 * interval exponent, and the Application Tag mode page (0Ah/02h).  The
 * checks themselves are the core's (core/pi.c, the data path's protection
 * stage); their failures come back as CORE_E_PI_* (sense.c: ABORTED
 * COMMAND 10h/01h-03h with the LBA in INFORMATION).
 *
 * Choices where SBC-4 leaves one:
 *  - Every LU reports PROTECT=1 (it can be formatted with types 1, 2 and 3,
 *    Extended INQUIRY SPT 111b); PROT_EN says whether it is.  The
 *    protection information is 8 bytes (T10 CRC16 guard) per protection
 *    interval.
 *  - ATO is 1 and not changeable on an LU with PI (the device server never
 *    modifies an application tag); ATMPE is changeable (default 0) and,
 *    when 1, the Application Tag mode page's ranges are what application
 *    tags are checked against (with any xxPROTECT that checks them, and
 *    RDPROTECT/VRPROTECT 000b), and what a WRPROTECT 000b write stores as
 *    its generated application tag (the first block's range for the whole
 *    command: the core generates one tag per command).
 *  - Without the page, a 10/12/16-byte CDB gives no expected application
 *    tag: application tags are checked only by the 32-byte CDBs (their
 *    EXPECTED LOGICAL BLOCK APPLICATION TAG under the MASK).
 *  - READ/WRITE/VERIFY(32) exist on type 2 LUs only (elsewhere they are
 *    unsupported operation codes, and not listed); on type 2 LUs a
 *    non-zero xxPROTECT in a 10/12/16-byte CDB is INVALID COMMAND
 *    OPERATION CODE (SBC-4 4.22.2.4), and a WRPROTECT 000b write there
 *    generates reference tags from the LBA (the 32-byte CDB's EXPECTED
 *    INITIAL LOGICAL BLOCK REFERENCE TAG otherwise); reads with
 *    RDPROTECT 000b in a short CDB do not check type 2 reference tags.
 *  - FORMAT UNIT runs to its end before status (IMMED accepted, nothing to
 *    poll), keeps the data (every block's protection information all FFh:
 *    unchecked until written), takes no defect list and no initialization
 *    pattern.
 *  - WRITE ATOMIC, WRITE SCATTERED and WRITE STREAM keep refusing a
 *    non-zero WRPROTECT (their data path does not carry protection
 *    information); WRPROTECT 000b generates it as for WRITE.
 */
#include <errno.h>
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"

uint8_t scsi_lu_pi_type(const struct core_ns *ns)
{
        struct core_pi_fmt f;
        if (!ns)
                return 0;
        core_ns_pi_fmt(ns, &f);
        return f.type;
}

uint8_t scsi_lu_pi_exp(const struct core_ns *ns)
{
        struct core_pi_fmt f;
        core_ns_pi_fmt(ns, &f);
        return f.type ? f.pi_exp : 0;
}

bool scsi_pi_protect_ok(struct scsi_cmd *cmd, uint8_t protect, uint8_t off)
{
        uint8_t type;
        if (!protect)
                return true;
        type = scsi_lu_pi_type(cmd->ns);
        if (!type || protect > 4) {
                /* No protection information on this LU, or a reserved value. */
                scsi_sense_invalid_field(cmd, true, off, 7);
                return false;
        }
        if (type == 2 && cmd->cdb[0] != SCSI_OP_VARIABLE_LENGTH) {
                /* SBC-4 4.22.2.4: type 2 protection needs the 32-byte CDBs. */
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x20, 0x00);
                return false;
        }
        return true;
}

bool scsi_pi_host_md(const struct scsi_cmd *cmd, uint8_t protect)
{
        return protect && scsi_lu_pi_type(cmd->ns);
}

static bool apptab_on(const struct core_ns *ns)
{
        const struct scsi_lu_state *st = ns->scsi_state;
        return st && atomic_load_explicit(&st->atmpe, memory_order_relaxed);
}

void scsi_pi_setup(struct scsi_cmd *cmd, bool write, uint8_t protect, bool xfer)
{
        /* The checks of xxPROTECT 000b-100b (SBC-4 tables 'RDPROTECT field' ff.). */
        static const unsigned chk_of[5] = {
            CORE_PI_CHK_GUARD | CORE_PI_CHK_APP | CORE_PI_CHK_REF,
            CORE_PI_CHK_GUARD | CORE_PI_CHK_APP | CORE_PI_CHK_REF,
            CORE_PI_CHK_APP | CORE_PI_CHK_REF,
            0,
            CORE_PI_CHK_GUARD,
        };
        struct core_ns *ns = cmd->ns;
        struct core_req *r = &cmd->req;
        const uint8_t *c = cmd->cdb;
        bool v32 = c[0] == SCSI_OP_VARIABLE_LENGTH;
        struct core_pi_fmt f;
        uint64_t ref;
        bool tab;

        core_ns_pi_fmt(ns, &f);
        if (!f.type || protect > 4)
                return;
        ref = v32 ? slate_be32(c + 20) : (uint32_t)cmd->lba;
        tab = apptab_on(ns);
        r->pi.host_md = protect && xfer;
        if (write && (!protect || !xfer)) { /* the device server generates it */
                uint16_t app = 0;
                const struct core_pi_apptab *t =
                    atomic_load_explicit(&ns->apptab, memory_order_acquire);
                if (tab && t)
                        core_pi_apptab_lookup(t, cmd->lba, &app);
                r->pi.gen = true;
                r->pi.gen_ref = ref;
                r->pi.gen_app = app;
                return;
        }
        unsigned chk = chk_of[protect];
        if (!v32 && !tab)
                chk &= ~(unsigned)CORE_PI_CHK_APP; /* no expected application tag */
        if (f.type == 2 && !v32)
                chk &= ~(unsigned)CORE_PI_CHK_REF; /* no expected initial reference tag */
        r->pi.chk = chk;
        r->pi.ref = ref;
        r->pi.use_apptab = tab;
        if (v32) {
                r->pi.app = slate_be16(c + 24);
                r->pi.app_mask = slate_be16(c + 26);
        }
}

/*
 * ORWRITE reads the blocks it ORs into: their stored protection
 * information is checked as a READ with RDPROTECT 000b would check it
 * (guard; reference tag from the LBA on type 1; application tags only
 * against the Application Tag mode page with ATMPE), so an ORWRITE never
 * builds on data a read would report as corrupt, whatever ORPROTECT says
 * of the Data-Out buffer (our choice: SBC-4 5.11 gives ORPROTECT to the
 * transferred protection information only).
 */
void scsi_pi_setup_rmw(struct scsi_cmd *cmd)
{
        struct core_req *r = &cmd->req;
        uint8_t type = scsi_lu_pi_type(cmd->ns);
        bool tab = apptab_on(cmd->ns);
        unsigned chk = CORE_PI_CHK_GUARD | CORE_PI_CHK_REF;

        if (!type)
                return;
        if (type == 2)
                chk &= ~(unsigned)CORE_PI_CHK_REF; /* no expected initial reference tag */
        if (tab) {
                chk |= CORE_PI_CHK_APP;
                r->pi.use_apptab = true;
        }
        r->pi.rmw_chk = chk;
        r->pi.rmw_ref = (uint32_t)cmd->lba;
}

/* ---- FORMAT UNIT (SBC-4 5.3) ---- */

enum scsi_parse_result scsi_pi_format_parse(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint8_t fmtpinfo = c[1] >> 6;
        bool fmtdata = c[1] & 0x10;

        if (fmtpinfo == 1) { /* reserved */
                scsi_sense_invalid_field(cmd, true, 1, 6);
                return SCSI_PARSE_DONE;
        }
        if (c[4] & 0xfe) { /* FFMT 00b/01b only: the data is kept either way */
                scsi_sense_invalid_field(cmd, true, 4, 31 - __builtin_clz(c[4] & 0xfe));
                return SCSI_PARSE_DONE;
        }
        if (!scsi_check_state(cmd, CORE_CHK_WRITABLE))
                return SCSI_PARSE_DONE;
        if (fmtdata) {
                /* The list's length is in its header: take what the initiator sends. */
                uint32_t hdr = (c[1] & 0x20) ? 8 : 4;
                uint32_t len = cmd->edtl < cmd->buf_len ? cmd->edtl : cmd->buf_len;
                if (len < hdr) {
                        cmd->xfer_len = cmd->edtl;
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                        return SCSI_PARSE_DONE;
                }
                cmd->xfer_len = len;
                cmd->data_out_len = len;
        }
        return SCSI_PARSE_EXEC;
}

/* Decode FORMAT UNIT into a format; 0, or -1 with the sense set. */
int scsi_pi_format_decode(struct scsi_cmd *cmd, const uint8_t *p, uint32_t len,
                          struct core_pi_fmt *out)
{
        const uint8_t *c = cmd->cdb;
        uint8_t fmtpinfo = c[1] >> 6, pfu = 0, exp = 0, type;
        bool longlist = c[1] & 0x20;
        uint32_t hdr = longlist ? 8 : 4, dll = 0;

        if (c[1] & 0x10) {
                if (len < hdr) {
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                        return -1;
                }
                if (p[0] & 0xf8) {
                        scsi_sense_invalid_field(cmd, false, 0, 31 - __builtin_clz(p[0] & 0xf8));
                        return -1;
                }
                pfu = p[0] & 0x07;
                /* FOV 0: DPRY, DCRT, STPF and IP must be 0; no initialization pattern. */
                if (!(p[1] & 0x80) && (p[1] & 0x78)) {
                        scsi_sense_invalid_field(cmd, false, 1, 31 - __builtin_clz(p[1] & 0x78));
                        return -1;
                }
                if (p[1] & 0x08) {
                        scsi_sense_invalid_field(cmd, false, 1, 3);
                        return -1;
                }
                if (longlist) {
                        if (p[2]) {
                                scsi_sense_invalid_field(cmd, false, 2, 7);
                                return -1;
                        }
                        if (p[3] & 0xf0) { /* P_I_INFORMATION */
                                scsi_sense_invalid_field(cmd, false, 3, 7);
                                return -1;
                        }
                        exp = p[3] & 0x0f;
                        dll = slate_be32(p + 4);
                } else {
                        dll = slate_be16(p + 2);
                }
                if (dll) { /* no defects to list */
                        scsi_sense_invalid_field(cmd, false, longlist ? 4 : 2, 7);
                        return -1;
                }
        }
        /* SBC-4 table 'FMTPINFO and PROTECTION FIELD USAGE' (PROTECT 1). */
        switch (fmtpinfo) {
        case 0:
                type = 0;
                break;
        case 2:
                type = 1;
                break;
        default:
                type = (pfu & 1) ? 3 : 2;
                break;
        }
        if ((fmtpinfo != 3 && pfu) || pfu > 3) {
                scsi_sense_invalid_field(cmd, false, 0, 2);
                return -1;
        }
        /* The exponent counts only with PFU 010b/011b. */
        if (exp && !(pfu & 2)) {
                scsi_sense_invalid_field(cmd, false, 3, 3);
                return -1;
        }
        if (exp > CORE_PI_MAX_EXP || (cmd->ns->block_size >> exp) < CORE_PI_MIN_INTERVAL) {
                scsi_sense_invalid_field(cmd, false, 3, 3);
                return -1;
        }
        memset(out, 0, sizeof(*out));
        out->block_size = cmd->ns->block_size;
        out->type = type;
        out->md_size = type ? 8 : 0;
        out->guard = CORE_PI_GUARD_CRC16;
        out->pi_exp = type ? exp : 0;
        out->pi_first = true;
        return 0;
}

void scsi_pi_format_exec(struct scsi_cmd *cmd)
{
        struct core_pi_fmt f;
        char err[160];
        int rc;

        if (scsi_pi_format_decode(cmd, cmd->buf, cmd->data_out_len, &f) == 0) {
                rc = core_ns_format(cmd->ns, &f, cmd->nexus, err, sizeof(err));
                if (rc == 0)
                        scsi_cmd_good(cmd);
                else if (rc == -EBUSY)
                        scsi_status_from_core(cmd, CORE_E_SANITIZE_IN_PROGRESS, 0, false);
                else if (rc == -EINVAL || rc == -ENOTSUP)
                        scsi_sense_invalid_field(cmd, true, 1, 7); /* FMTPINFO: not here */
                else
                        scsi_sense_set(cmd, SK_MEDIUM_ERROR, 0x31,
                                       0x01); /* FORMAT COMMAND FAILED */
        }
        scsi_cmd_finish_deferred(cmd);
}

/* ---- The Application Tag mode page (SBC-4 6.5.3) ---- */

bool scsi_apptag_page_present(const struct core_ns *ns)
{
        return scsi_lu_pi_type(ns) != 0;
}

uint32_t scsi_apptag_page_build(struct core_ns *ns, int pc, uint8_t *p)
{
        struct core_pi_apptag_range r[SCSI_APPTAG_MAX_DESC];
        size_t n = 0;
        uint32_t len;

        if (pc == 1) /* changeable: one descriptor's every field */
                n = 1;
        else if (pc != 2)
                n = core_ns_apptab(ns, r, SCSI_APPTAG_MAX_DESC);
        len = SCSI_APPTAG_HDR + (uint32_t)n * SCSI_APPTAG_DESC;
        memset(p, 0, len);
        p[0] = 0x40 | 0x0a;
        p[1] = 0x02;
        slate_put_be(p + 2, 2, len - 4);
        for (size_t i = 0; i < n; i++) {
                uint8_t *d = p + SCSI_APPTAG_HDR + i * SCSI_APPTAG_DESC;
                if (pc == 1) {
                        d[0] = 0x80;
                        memset(d + 6, 0xff, 18);
                        continue;
                }
                d[0] = i + 1 == n ? 0x80 : 0; /* LAST */
                slate_put_be(d + 6, 2, r[i].app);
                slate_put_be(d + 8, 8, r[i].lba);
                slate_put_be(d + 16, 8, r[i].count);
        }
        return len;
}

int scsi_apptag_page_select(struct scsi_cmd *cmd, const uint8_t *p, uint32_t off, bool *changed)
{
        struct core_pi_apptag_range r[SCSI_APPTAG_MAX_DESC];
        uint32_t plen = slate_be16(p + 2) + 4u, n = 0;
        uint64_t cap = core_ns_blocks(cmd->ns);
        char err[128];

        if (plen < SCSI_APPTAG_HDR || (plen - SCSI_APPTAG_HDR) % SCSI_APPTAG_DESC ||
            (plen - SCSI_APPTAG_HDR) / SCSI_APPTAG_DESC > SCSI_APPTAG_MAX_DESC) {
                scsi_sense_invalid_field(cmd, false, (uint16_t)(off + 2), 7);
                return -EINVAL;
        }
        for (uint32_t i = 4; i < SCSI_APPTAG_HDR; i++) {
                if (p[i]) {
                        scsi_sense_invalid_field(cmd, false, (uint16_t)(off + i), 7);
                        return -EINVAL;
                }
        }
        bool last = false;
        for (uint32_t o = SCSI_APPTAG_HDR; o < plen; o += SCSI_APPTAG_DESC) {
                const uint8_t *d = p + o;
                if (last) { /* a descriptor after the LAST one */
                        scsi_sense_invalid_field(cmd, false, (uint16_t)(off + o), 7);
                        return -EINVAL;
                }
                last = d[0] & 0x80;
                for (uint32_t i = 0; i < 6; i++) {
                        uint8_t bad = (uint8_t)(i ? d[i] : d[i] & 0x7f);
                        if (bad) {
                                scsi_sense_invalid_field(cmd, false, (uint16_t)(off + o + i),
                                                         31 - __builtin_clz(bad));
                                return -EINVAL;
                        }
                }
                r[n].app = (uint16_t)slate_be16(d + 6);
                r[n].lba = slate_be64(d + 8);
                r[n].count = slate_be64(d + 16);
                if (r[n].lba > cap || r[n].count > cap - r[n].lba) {
                        scsi_sense_invalid_field(cmd, false, (uint16_t)(off + o + 8), 7);
                        return -EINVAL;
                }
                n++;
        }
        if (core_ns_set_apptab(cmd->ns, r, n, cmd->nexus, err, sizeof(err)) < 0) {
                /* Overlapping ranges: point at the first descriptor. */
                scsi_sense_invalid_field(cmd, false, (uint16_t)(off + SCSI_APPTAG_HDR + 8), 7);
                return -EINVAL;
        }
        *changed = true;
        return 0;
}
