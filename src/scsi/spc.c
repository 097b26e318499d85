/*
 * SPC-5 primary commands: INQUIRY (6.7; pages in vpd.c), REPORT LUNS
 * (6.33), REQUEST SENSE (6.39), TEST UNIT READY (6.47), REPORT SUPPORTED
 * OPERATION CODES (6.35, generated from the opcode table), START STOP UNIT
 * (SBC-4 5.25) and PREVENT ALLOW MEDIUM REMOVAL (SBC-4 5.15) -- with the
 * eject/load of a removable LU's medium (SBC-4 4.10) --, plus the
 * thin wrappers that hand PERSISTENT RESERVE IN/OUT and RESERVE/RELEASE(6)
 * to pr.c.  Everything here completes inline in parse, except PR OUT which
 * needs its parameter data first.
 */
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"

enum scsi_parse_result scsi_spc_inquiry(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint32_t alloc = slate_be16(c + 3);
        uint32_t len;
        int r;

        cmd->xfer_len = alloc;
        if (c[1] & 0xfe) {
                scsi_sense_invalid_field(cmd, true, 1, (c[1] & 0x02) ? 1 : 7);
                return SCSI_PARSE_DONE;
        }
        if (!(c[1] & 0x01)) {
                if (c[2]) {
                        scsi_sense_invalid_field(cmd, true, 2, 7);
                        return SCSI_PARSE_DONE;
                }
                len = scsi_inquiry_std_build(cmd, cmd->buf);
                scsi_cmd_data_in(cmd, len, alloc);
                return SCSI_PARSE_DONE;
        }
        if (!cmd->ns) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x25, 0x00);
                return SCSI_PARSE_DONE;
        }
        r = scsi_vpd_build(cmd, c[2], cmd->buf, cmd->buf_len);
        if (r < 0) {
                scsi_sense_invalid_field(cmd, true, 2, 7);
                return SCSI_PARSE_DONE;
        }
        scsi_cmd_data_in(cmd, (uint32_t)r, alloc);
        return SCSI_PARSE_DONE;
}

enum scsi_parse_result scsi_spc_report_luns(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint32_t alloc = slate_be32(c + 6);
        struct scsi_target *tgt = cmd->nexus ? cmd->nexus->target : NULL;
        uint8_t *b = cmd->buf;
        uint32_t n = 0;

        cmd->xfer_len = alloc;
        if (c[2] > 0x02) {
                scsi_sense_invalid_field(cmd, true, 2, 7);
                return SCSI_PARSE_DONE;
        }
        if (alloc < 16) {
                scsi_sense_invalid_field(cmd, true, 6, 7);
                return SCSI_PARSE_DONE;
        }
        memset(b, 0, 8);
        /* Select report 01h lists only well known LUs; we have none. */
        if (tgt && c[2] != 0x01) {
                for (unsigned l = 0; l < SCSI_MAX_LUNS; l++) {
                        if (!atomic_load(&tgt->luns[l]) || !scsi_nexus_sees(cmd->nexus, l))
                                continue;
                        memset(b + 8 + n * 8, 0, 8);
                        b[8 + n * 8 + 1] = (uint8_t)l; /* peripheral device addressing */
                        n++;
                }
        }
        slate_put_be(b, 4, n * 8);
        scsi_cmd_data_in(cmd, 8 + n * 8, alloc);
        return SCSI_PARSE_DONE;
}

enum scsi_parse_result scsi_spc_request_sense(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        bool desc = c[1] & 0x01;
        uint32_t alloc = c[4];
        uint8_t len;

        cmd->xfer_len = alloc;
        if (c[1] & 0xfe) {
                scsi_sense_invalid_field(cmd, true, 1, 1);
                return SCSI_PARSE_DONE;
        }
        if (!cmd->ns) {
                len = scsi_sense_build(cmd->buf, desc, SK_ILLEGAL_REQUEST, 0x25, 0x00, false, 0,
                                       NULL);
        } else if (scsi_ua_take(cmd)) {
                /* Re-encode the unit attention in the format the CDB asks for. */
                uint8_t key, asc, ascq;
                if (cmd->sense[0] == 0x72) {
                        key = cmd->sense[1], asc = cmd->sense[2], ascq = cmd->sense[3];
                } else {
                        key = cmd->sense[2] & 0x0f, asc = cmd->sense[12], ascq = cmd->sense[13];
                }
                len = scsi_sense_build(cmd->buf, desc, key, asc, ascq, false, 0, NULL);
        } else if (core_ns_ready(cmd->ns) == CORE_NS_NO_MEDIUM) {
                len = scsi_sense_build(cmd->buf, desc, SK_NOT_READY, 0x3a, 0x02, false, 0, NULL);
        } else if (core_ns_ready(cmd->ns) == CORE_NS_STOPPED) {
                len = scsi_sense_build(cmd->buf, desc, SK_NOT_READY, 0x04, 0x02, false, 0, NULL);
        } else {
                len = scsi_sense_build(cmd->buf, desc, SK_NO_SENSE, 0x00, 0x00, false, 0, NULL);
        }
        cmd->sense_len = 0;
        scsi_cmd_data_in(cmd, len, alloc);
        return SCSI_PARSE_DONE;
}

enum scsi_parse_result scsi_spc_tur(struct scsi_cmd *cmd)
{
        scsi_cmd_good(cmd);
        return SCSI_PARSE_DONE;
}

/* ---- REPORT SUPPORTED OPERATION CODES ---- */

static uint32_t put_timeouts(uint8_t *p, const struct scsi_op *op)
{
        struct scsi_rsoc_timeouts *t = (void *)p;
        memset(t, 0, sizeof(*t));
        put_be16(&t->desc_len, 0x0a);
        put_be32(&t->nominal, op->timeout);
        put_be32(&t->recommended, op->timeout * 2);
        return sizeof(*t);
}

static uint32_t rsoc_one(uint8_t *b, const struct scsi_op *op, bool rctd, const struct core_ns *ns)
{
        uint32_t len = 4;
        memset(b, 0, 4);
        if (!op) {
                b[1] = 0x01; /* not supported */
                return 4;
        }
        b[1] = 0x03 | (rctd ? 0x80 : 0);
        b[2] = 0;
        b[3] = op->cdb_len;
        memcpy(b + 4, op->usage, op->cdb_len);
        /* An LU with protection information takes the xxPROTECT field (pi.c). */
        if ((op->flags & SCSI_OPF_PROTECT) && scsi_lu_pi_type(ns))
                b[4 + (op->opcode == SCSI_OP_VARIABLE_LENGTH ? 10 : 1)] |= 0xe0;
        len += op->cdb_len;
        if (rctd)
                len += put_timeouts(b + len, op);
        return len;
}

enum scsi_parse_result scsi_spc_rsoc(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        bool rctd = c[2] & 0x80;
        uint8_t opts = c[2] & 0x07;
        uint8_t req_op = c[3];
        uint16_t req_sa = slate_be16(c + 4);
        uint32_t alloc = slate_be32(c + 6);
        uint8_t *b = cmd->buf;
        uint32_t len = 0;

        cmd->xfer_len = alloc;
        if (c[2] & 0x78) {
                scsi_sense_invalid_field(cmd, true, 2, 6);
                return SCSI_PARSE_DONE;
        }
        switch (opts) {
        case 0: {
                len = 4;
                for (const struct scsi_op *op = scsi_op_next(NULL); op; op = scsi_op_next(op)) {
                        struct scsi_rsoc_cmd_desc *d = (void *)(b + len);
                        if (!scsi_op_for_lu(op, cmd->ns))
                                continue;
                        memset(d, 0, sizeof(*d));
                        d->opcode = op->opcode;
                        put_be16(&d->sa, op->has_sa ? op->sa : 0);
                        d->flags = (op->has_sa ? 0x01 : 0) | (rctd ? 0x02 : 0);
                        put_be16(&d->cdb_len, op->cdb_len);
                        len += sizeof(*d);
                        if (rctd)
                                len += put_timeouts(b + len, op);
                }
                slate_put_be(b, 4, len - 4);
                break;
        }
        case 1:
                if (scsi_op_has_sa(req_op)) {
                        scsi_sense_invalid_field(cmd, true, 2, 2);
                        return SCSI_PARSE_DONE;
                }
                len =
                    rsoc_one(b, scsi_op_for_lu(scsi_op_lookup(req_op, 0), cmd->ns), rctd, cmd->ns);
                break;
        case 2:
                if (!scsi_op_has_sa(req_op)) {
                        scsi_sense_invalid_field(cmd, true, 2, 2);
                        return SCSI_PARSE_DONE;
                }
                len = rsoc_one(b, scsi_op_for_lu(scsi_op_lookup(req_op, req_sa), cmd->ns), rctd,
                               cmd->ns);
                break;
        case 3:
                if (scsi_op_has_sa(req_op))
                        len = rsoc_one(b, scsi_op_for_lu(scsi_op_lookup(req_op, req_sa), cmd->ns),
                                       rctd, cmd->ns);
                else
                        len = rsoc_one(
                            b, req_sa ? NULL : scsi_op_for_lu(scsi_op_lookup(req_op, 0), cmd->ns),
                            rctd, cmd->ns);
                break;
        default:
                scsi_sense_invalid_field(cmd, true, 2, 2);
                return SCSI_PARSE_DONE;
        }
        scsi_cmd_data_in(cmd, len, alloc);
        return SCSI_PARSE_DONE;
}

/* ---- START STOP UNIT / PREVENT ALLOW MEDIUM REMOVAL ---- */

enum scsi_parse_result scsi_spc_start_stop(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        struct core_ns *ns = cmd->ns;
        uint8_t pc = c[4] >> 4;

        if (c[1] & 0xfe) {
                scsi_sense_invalid_field(cmd, true, 1, 1);
                return SCSI_PARSE_DONE;
        }
        if (c[3] & 0xf0) {
                scsi_sense_invalid_field(cmd, true, 3, 7);
                return SCSI_PARSE_DONE;
        }
        if (c[4] & 0x08) {
                scsi_sense_invalid_field(cmd, true, 4, 3);
                return SCSI_PARSE_DONE;
        }
        switch (pc) {
        case 0x0:
                break;
        case 0x1:
        case 0x2:
        case 0x3:
        case 0x7:
        case 0xa:
        case 0xb:
                /* Power conditions: we have none to enter; START and LOEJ are ignored. */
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        default:
                scsi_sense_invalid_field(cmd, true, 4, 7);
                return SCSI_PARSE_DONE;
        }
        if ((c[4] & 0x02) && !cmd->ns->removable) {
                /* LOEJ: the medium is not removable (RMB=0). */
                scsi_sense_invalid_field(cmd, true, 4, 1);
                return SCSI_PARSE_DONE;
        }
        if (c[4] & 0x02) {
                /* SBC-4 5.25: while any I_T nexus prevents medium removal,
                 * LOEJ is refused (the tray stays as it is, either way). */
                if (scsi_removal_prevented(cmd->ns)) {
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x53, 0x02);
                        return SCSI_PARSE_DONE;
                }
                /* Load and start (the core tells the others the medium may
                 * have changed), or stop and eject (ejecting an empty drive
                 * is a no-op). */
                core_ns_set_ready(ns, (c[4] & 0x01) ? CORE_NS_READY : CORE_NS_NO_MEDIUM,
                                  cmd->nexus);
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        if (core_ns_ready(ns) == CORE_NS_NO_MEDIUM) {
                if (c[4] & 0x01) {
                        /* START without a medium cannot make the LU ready. */
                        scsi_sense_set(cmd, SK_NOT_READY, 0x3a, 0x02);
                        return SCSI_PARSE_DONE;
                }
        } else {
                core_ns_set_ready(ns, (c[4] & 0x01) ? CORE_NS_READY : CORE_NS_STOPPED, cmd->nexus);
        }
        scsi_cmd_good(cmd);
        return SCSI_PARSE_DONE;
}

enum scsi_parse_result scsi_spc_prevent_allow(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        if (c[4] & 0xfc) {
                scsi_sense_invalid_field(cmd, true, 4, 7);
                return SCSI_PARSE_DONE;
        }
        if ((c[4] & 0x03) > 1) {
                scsi_sense_invalid_field(cmd, true, 4, 1);
                return SCSI_PARSE_DONE;
        }
        /* Tracked per I_T nexus on every LU; only a removable LU's START
         * STOP UNIT LOEJ looks at it. */
        scsi_prevent_set(cmd, c[4] & 0x01);
        scsi_cmd_good(cmd);
        return SCSI_PARSE_DONE;
}

/* ---- persistent reservations (pr.c does the work) ---- */

enum scsi_parse_result scsi_spc_pr_in(struct scsi_cmd *cmd)
{
        cmd->xfer_len = slate_be16(cmd->cdb + 7);
        scsi_cmd_good(cmd);
        if (cmd->ns && core_ns_pr_shared(cmd->ns))
                return SCSI_PARSE_EXEC; /* scsi_pr_in_exec: the stored state, off the reactor */
        scsi_pr_in(cmd);
        return SCSI_PARSE_DONE;
}

enum scsi_parse_result scsi_spc_pr_out(struct scsi_cmd *cmd)
{
        uint32_t len = slate_be32(cmd->cdb + 5);
        cmd->xfer_len = len;
        if (len > cmd->buf_len / 2 || len > CORE_MAX_TRANSFER_BYTES) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                return SCSI_PARSE_DONE;
        }
        cmd->data_out_len = len < cmd->edtl ? len : cmd->edtl;
        return SCSI_PARSE_EXEC;
}

enum scsi_parse_result scsi_spc_reserve6(struct scsi_cmd *cmd)
{
        scsi_cmd_good(cmd);
        scsi_reserve6(cmd);
        return SCSI_PARSE_DONE;
}

enum scsi_parse_result scsi_spc_release6(struct scsi_cmd *cmd)
{
        scsi_cmd_good(cmd);
        scsi_release6(cmd);
        return SCSI_PARSE_DONE;
}
