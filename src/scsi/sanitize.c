/*
 * SANITIZE (SBC-4 5.30, sanitize operations 4.11): the SCSI side only.
 * The CDB and the OVERWRITE parameter list are checked here, synchronously;
 * the operation itself is the block core's (core/sanitize.c, shared with
 * NVMe Sanitize): a background operation of the namespace, not of the
 * command.  With IMMED the command completes once the operation started;
 * without, it completes when the operation ends, unless ABORT TASK, a
 * reset or I_T nexus loss ends it first (4.11.3): the command goes, the
 * operation continues.  Meanwhile the dispatcher answers every command but
 * INQUIRY, REPORT LUNS and REQUEST SENSE with NOT READY, SANITIZE IN
 * PROGRESS and a progress indication, whoever started it.  A failed
 * sanitize leaves sanitize failure mode (MEDIUM ERROR, SANITIZE COMMAND
 * FAILED) until one succeeds or, if the failed one had AUSE set, EXIT
 * FAILURE MODE.
 *
 * The opcode table (opcodes.c) decides which service actions exist:
 * OVERWRITE and EXIT FAILURE MODE everywhere, BLOCK ERASE on LUs with
 * logical block provisioning (LBPME=1, GET LBA STATUS), which is how SBC-4
 * and libiscsi expect a block erase to be checked: every block ends
 * deallocated and reads zeroes (LBPRZ, VPD B1h WABEREQ 01b); CRYPTOGRAPHIC
 * ERASE on LUs encrypted at rest (core/crypt.h; WACEREQ 01b).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"

enum scsi_parse_result scsi_sanitize_request_sense(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        if (cmd->ns && !(c[1] & 0xfe)) {
                if (core_ns_sanitize_state(cmd->ns) == CORE_SAN_RUNNING) {
                        /* SPC-5 4.4.2.4.4: the progress indication. */
                        uint16_t p = atomic_load(&cmd->ns->san_progress);
                        uint8_t sks[3] = {0x80, (uint8_t)(p >> 8), (uint8_t)p};
                        uint8_t len = scsi_sense_build(cmd->buf, c[1] & 0x01, SK_NOT_READY, 0x04,
                                                       0x1b, false, 0, sks);
                        cmd->sense_len = 0;
                        scsi_cmd_data_in(cmd, len, c[4]);
                        return SCSI_PARSE_DONE;
                }
        }
        return scsi_spc_request_sense(cmd);
}

int scsi_sanitize_check_overwrite(const uint8_t *p, uint32_t len, uint32_t block_size,
                                  uint16_t *byte, int *bit)
{
        uint32_t ipl;
        if (len < 5) {
                *byte = 2, *bit = 7;
                return -EINVAL;
        }
        if (p[0] & 0x60) { /* TEST: vendor test modes, none here */
                *byte = 0, *bit = 6;
                return -EINVAL;
        }
        if (!(p[0] & 0x1f)) { /* OVERWRITE COUNT */
                *byte = 0, *bit = 4;
                return -EINVAL;
        }
        if (p[1]) {
                *byte = 1, *bit = 7;
                return -EINVAL;
        }
        ipl = slate_be16(p + 2);
        if (ipl == 0 || ipl > block_size || ipl + 4 != len) {
                *byte = 2, *bit = 7;
                return -EINVAL;
        }
        return 0;
}

/* ---- parse ---- */

enum scsi_parse_result scsi_sanitize_parse(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint8_t sa = c[1] & 0x1f;
        uint32_t len = slate_be16(c + 7);

        cmd->xfer_len = len;
        if (c[1] & 0x40) {
                scsi_sense_invalid_field(cmd, true, 1, 6);
                return SCSI_PARSE_DONE;
        }
        for (uint16_t i = 2; i <= 6; i++) {
                if (c[i]) {
                        scsi_sense_invalid_field(cmd, true, i, 7);
                        return SCSI_PARSE_DONE;
                }
        }
        if (!scsi_check_state(cmd, CORE_CHK_STARTED))
                return SCSI_PARSE_DONE;
        if (sa == SCSI_SANITIZE_EXIT_FAILURE) {
                if (len) {
                        scsi_sense_invalid_field(cmd, true, 7, 7);
                        return SCSI_PARSE_DONE;
                }
                if (core_ns_sanitize_exit_failure(cmd->ns, cmd->nexus) < 0) {
                        /* Only a successful sanitize leaves this failure mode. */
                        scsi_status_from_core(cmd, CORE_E_SANITIZE_FAILED, 0, false);
                        return SCSI_PARSE_DONE;
                }
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        if (sa == SCSI_SANITIZE_BLOCK_ERASE || sa == SCSI_SANITIZE_CRYPTO_ERASE) {
                if (len) { /* no parameter list */
                        scsi_sense_invalid_field(cmd, true, 7, 7);
                        return SCSI_PARSE_DONE;
                }
                if (!scsi_check_state(cmd, CORE_CHK_WRITABLE))
                        return SCSI_PARSE_DONE;
                cmd->data_out_len = 0;
                return SCSI_PARSE_EXEC;
        }
        /* OVERWRITE: a 4-byte header and a pattern of 1..block size bytes. */
        if (len < 5 || len > cmd->ns->block_size + 4u || cmd->edtl < len) {
                scsi_sense_invalid_field(cmd, true, 7, 7);
                return SCSI_PARSE_DONE;
        }
        if (!scsi_check_state(cmd, CORE_CHK_WRITABLE))
                return SCSI_PARSE_DONE;
        cmd->data_out_len = len;
        return SCSI_PARSE_EXEC;
}

/* ---- execute: the operation itself is the core's (core/sanitize.c) ---- */

/* The core's completion, on the reactor that started it: end the waiting command, if any. */
static void san_done(void *arg, bool ok)
{
        struct core_ns *ns = arg;
        struct scsi_lu_state *st = ns->scsi_state;
        struct scsi_cmd *w = st ? st->san_waiter : NULL;
        if (!w)
                return;
        st->san_waiter = NULL;
        if (ok)
                scsi_cmd_good(w);
        else
                scsi_status_from_core(w, CORE_E_SANITIZE_FAILED, 0, false);
        w->done(w);
}

void scsi_sanitize_exec(struct scsi_cmd *cmd)
{
        struct core_ns *ns = cmd->ns;
        const uint8_t *c = cmd->cdb, *p = cmd->buf;
        struct core_sanitize_params sp = {.ause = (c[1] & 0x20) != 0};
        uint16_t byte;
        int bit, rc;

        if ((c[1] & 0x1f) == SCSI_SANITIZE_OVERWRITE) {
                if (scsi_sanitize_check_overwrite(p, cmd->data_out_len, ns->block_size, &byte,
                                                  &bit) < 0) {
                        scsi_sense_invalid_field(cmd, false, byte, bit);
                        scsi_cmd_finish_deferred(cmd);
                        return;
                }
                sp.action = CORE_SANACT_OVERWRITE;
                sp.passes = p[0] & 0x1f;
                sp.invert = (p[0] & 0x80) != 0;
                sp.pattern_len = slate_be16(p + 2);
                sp.pattern = p + 4;
        } else if ((c[1] & 0x1f) == SCSI_SANITIZE_CRYPTO_ERASE) {
                sp.action = CORE_SANACT_CRYPTO_ERASE;
        } else {
                sp.action = CORE_SANACT_BLOCK_ERASE;
        }
        /* Another nexus, or an NVMe host, may have started one since parse. */
        rc = core_sanitize_start(ns, &sp, cmd->nexus, cmd->reactor, san_done, ns);
        if (rc < 0) {
                scsi_status_from_core(
                    cmd, rc == -EBUSY ? CORE_E_SANITIZE_IN_PROGRESS : CORE_E_NO_RESOURCES, 0,
                    false);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        if (c[1] & 0x80) {
                /* IMMED: status now that the CDB and parameter list are good. */
                scsi_cmd_good(cmd);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        /* The core never calls back from inside the start: safe to register now. */
        scsi_lu_state(ns)->san_waiter = cmd;
}

void scsi_sanitize_abort(struct scsi_cmd *cmd)
{
        struct scsi_lu_state *st;
        if (!cmd->ns || !cmd->ns->scsi_state)
                return;
        st = cmd->ns->scsi_state;
        if (st->san_waiter != cmd)
                return;
        /* The command ends; the sanitize operation does not (SBC-4 4.11.3). */
        st->san_waiter = NULL;
        cmd->status = SAM_STAT_TASK_ABORTED;
        cmd->sense_len = 0;
        cmd->data_in_len = 0;
        scsi_cmd_finish_deferred(cmd);
}
