/*
 * SEND DIAGNOSTIC (SPC-5 6.42) and RECEIVE DIAGNOSTIC RESULTS (SPC-5 6.29).
 * The self-tests are the core's (core/selftest.c, shared with NVMe Device
 * Self-test): this file maps the CDB onto it.
 *
 * - SELFTEST=1, the default self-test: a short self-test in the
 *   foreground; the command ends when it does: GOOD, or CHECK CONDITION,
 *   HARDWARE ERROR, LOGICAL UNIT FAILED SELF-TEST (3Eh/03h).  Not logged
 *   (SPC-5 leaves the default self-test out of the Self-Test Results page).
 * - SELF-TEST CODE 001b / 010b: background short / extended self-test;
 *   the command ends at once, the result goes to the Self-Test Results log
 *   page (10h).  100b aborts it.  101b / 110b: the same in the foreground
 *   (the command ends with the test, failures as for the default test).
 *   Our choice: a foreground self-test does not make other commands wait
 *   (they run beside it; the standard lets a device server do so for
 *   commands that do not conflict with it).
 * - Diagnostic pages: only Supported Diagnostic Pages (00h).  SEND
 *   DIAGNOSTIC with PF=1 and page 00h is accepted (it has no effect);
 *   RECEIVE DIAGNOSTIC RESULTS returns page 00h listing itself.
 *
 * A self-test while one runs on the LU (from this or another host, SCSI or
 * NVMe), and an abort when none runs in the background: ILLEGAL REQUEST,
 * INVALID FIELD IN CDB pointing at SELF-TEST CODE.
 */
#include <errno.h>
#include <string.h>

#include "core/selftest.h"
#include "slate/spec/scsi.h"
#include "scsi/internal.h"

#define STC_BG_SHORT    0x1
#define STC_BG_EXTENDED 0x2
#define STC_ABORT       0x4
#define STC_FG_SHORT    0x5
#define STC_FG_EXTENDED 0x6

enum scsi_parse_result scsi_diag_send_parse(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint8_t stc = c[1] >> 5;
        bool pf = c[1] & 0x10, selftest = c[1] & 0x04;
        uint32_t len = slate_be16(c + 3);

        cmd->xfer_len = len;
        if (c[1] & 0x08) { /* reserved */
                scsi_sense_invalid_field(cmd, true, 1, 3);
                return SCSI_PARSE_DONE;
        }
        if (c[2]) {
                scsi_sense_invalid_field(cmd, true, 2, 31 - __builtin_clz(c[2]));
                return SCSI_PARSE_DONE;
        }
        if (selftest || stc) {
                /* A self-test has no parameter list; SELFTEST=1 needs SELF-TEST CODE 000b. */
                if (selftest && stc) {
                        scsi_sense_invalid_field(cmd, true, 1, 7);
                        return SCSI_PARSE_DONE;
                }
                if (len) {
                        scsi_sense_invalid_field(cmd, true, 3, 7);
                        return SCSI_PARSE_DONE;
                }
                if (stc == 0x3 || stc == 0x7) { /* reserved codes */
                        scsi_sense_invalid_field(cmd, true, 1, 7);
                        return SCSI_PARSE_DONE;
                }
                cmd->data_out_len = 0;
                return SCSI_PARSE_EXEC;
        }
        /* SELFTEST=0, code 000b: the diagnostic pages of the parameter list (PF=1). */
        if (len && !pf) {
                scsi_sense_invalid_field(cmd, true, 1, 4); /* vendor-specific pages: none */
                return SCSI_PARSE_DONE;
        }
        if (len > 4096) {
                scsi_sense_invalid_field(cmd, true, 3, 7);
                return SCSI_PARSE_DONE;
        }
        cmd->data_out_len = len;
        return SCSI_PARSE_EXEC;
}

/* The core's outcome of a foreground test, on the reactor that started it. */
static void fg_done(void *arg, const struct core_selftest_outcome *o)
{
        struct core_ns *ns = arg;
        struct scsi_lu_state *st = ns->scsi_state;
        struct scsi_cmd *w = st ? st->diag_waiter : NULL;
        if (!w)
                return; /* the command was aborted; the test's result is in the log */
        st->diag_waiter = NULL;
        switch (o->result) {
        case CORE_STR_OK:
                scsi_cmd_good(w);
                break;
        case CORE_STR_FAILED:
        case CORE_STR_ERROR:
                scsi_sense_set(w, SK_HARDWARE_ERROR, 0x3e, 0x03); /* LU FAILED SELF-TEST */
                break;
        default:
                /* Stopped by a sanitize, a stop, a removal: the test did not end. */
                scsi_sense_set(w, SK_ABORTED_COMMAND, 0x00, 0x00);
                break;
        }
        w->done(w);
}

void scsi_diag_pages(struct scsi_cmd *cmd)
{
        const uint8_t *p = cmd->buf;
        uint32_t len = cmd->data_out_len, off = 0;
        while (off < len) {
                if (len - off < 4) {
                        scsi_sense_field(cmd, 0x1a, 0x00, false, (uint16_t)off, -1);
                        return;
                }
                uint32_t plen = slate_be16(p + off + 2);
                if (p[off] != 0x00) { /* only Supported Diagnostic Pages */
                        scsi_sense_invalid_field(cmd, false, (uint16_t)off, 7);
                        return;
                }
                if (off + 4 + plen > len) {
                        scsi_sense_invalid_field(cmd, false, (uint16_t)(off + 2), 7);
                        return;
                }
                off += 4 + plen;
        }
        scsi_cmd_good(cmd);
}

void scsi_diag_send_exec(struct scsi_cmd *cmd)
{
        struct core_ns *ns = cmd->ns;
        const uint8_t *c = cmd->cdb;
        uint8_t stc = c[1] >> 5;
        bool selftest = c[1] & 0x04;
        enum core_selftest_kind kind = CORE_ST_SHORT;
        bool background = false;
        int rc;

        if (!selftest && stc == 0) {
                scsi_diag_pages(cmd);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        if (stc == STC_ABORT) {
                bool bg = false;
                if (!core_selftest_running(ns, NULL, &bg, NULL) || !bg ||
                    core_selftest_abort(ns, CORE_STR_ABORTED_CMD) < 0)
                        scsi_sense_invalid_field(cmd, true, 1, 7);
                else
                        scsi_cmd_good(cmd);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        if (stc == STC_BG_EXTENDED || stc == STC_FG_EXTENDED)
                kind = CORE_ST_EXTENDED;
        background = stc == STC_BG_SHORT || stc == STC_BG_EXTENDED;
        struct scsi_lu_state *st = background ? NULL : scsi_lu_state(ns);
        if (!background && (!st || st->diag_waiter)) {
                /* One foreground test per LU at a time (and the state to wait in). */
                scsi_sense_invalid_field(cmd, true, 1, selftest ? 2 : 7);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        rc = core_selftest_start(ns, kind, background, !selftest, cmd->reactor,
                                 background ? NULL : fg_done, ns);
        if (rc < 0) {
                if (rc == -EBUSY)
                        scsi_sense_invalid_field(cmd, true, 1, selftest ? 2 : 7);
                else
                        scsi_status_from_core(cmd, CORE_E_NO_RESOURCES, 0, false);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        if (background) {
                scsi_cmd_good(cmd);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        /* The core never calls back from inside the start: safe to register now. */
        st->diag_waiter = cmd;
}

void scsi_diag_send_abort(struct scsi_cmd *cmd)
{
        struct scsi_lu_state *st;
        if (!cmd->ns || !cmd->ns->scsi_state)
                return;
        st = cmd->ns->scsi_state;
        if (st->diag_waiter != cmd)
                return;
        /* SPC-5 5.16.2: aborting the command aborts its foreground self-test. */
        st->diag_waiter = NULL;
        core_selftest_abort(cmd->ns, CORE_STR_ABORTED_OTHER);
        cmd->status = SAM_STAT_TASK_ABORTED;
        cmd->sense_len = 0;
        cmd->data_in_len = 0;
        scsi_cmd_finish_deferred(cmd);
}

enum scsi_parse_result scsi_diag_receive(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint32_t alloc = slate_be16(c + 3);
        uint8_t *b = cmd->buf;

        cmd->xfer_len = alloc;
        if (c[1] & 0xfe) {
                scsi_sense_invalid_field(cmd, true, 1, 31 - __builtin_clz(c[1] & 0xfe));
                return SCSI_PARSE_DONE;
        }
        /* PCV=1: the page asked for; PCV=0: the results of the last SEND DIAGNOSTIC (none: 00h). */
        if ((c[1] & 0x01) && c[2] != 0x00) {
                scsi_sense_invalid_field(cmd, true, 2, 7);
                return SCSI_PARSE_DONE;
        }
        if (!(c[1] & 0x01) && c[2]) {
                scsi_sense_invalid_field(cmd, true, 2, 7);
                return SCSI_PARSE_DONE;
        }
        memset(b, 0, 8);
        b[0] = 0x00;                /* Supported Diagnostic Pages */
        slate_put_be(b + 2, 2, 1u); /* one page code follows */
        b[4] = 0x00;
        scsi_cmd_data_in(cmd, 5, alloc);
        return SCSI_PARSE_DONE;
}
