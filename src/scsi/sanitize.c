/*
 * SANITIZE (SBC-4 5.30, sanitize operations 4.11): OVERWRITE and EXIT
 * FAILURE MODE.  The CDB and the OVERWRITE parameter list are checked
 * synchronously; the overwrite itself is a background operation of the
 * logical unit, not of the command: it runs on the reactor of the command
 * that started it, writes the initialization pattern (inverted between
 * passes when INVERT is set) over every block OVERWRITE COUNT times through
 * the block core's WRITE SAME, flushes, and only then leaves the "sanitize
 * in progress" state.  It survives ABORT TASK, LUN and target resets and
 * I_T nexus loss (4.11.3); meanwhile the dispatcher answers every command
 * but INQUIRY, REPORT LUNS and REQUEST SENSE with NOT READY, SANITIZE IN
 * PROGRESS and a progress indication.  A failed overwrite leaves the LU in
 * sanitize failure mode (medium access gets MEDIUM ERROR, SANITIZE COMMAND
 * FAILED) until a sanitize succeeds or, if the failed command had AUSE
 * set, EXIT FAILURE MODE.
 *
 * BLOCK ERASE and CRYPTOGRAPHIC ERASE are not in the opcode table (see
 * opcodes.c), so they are rejected as an unsupported service action and
 * the Block Device Characteristics page reports WABEREQ = WACEREQ = 0.
 *
 * The overwrite is paced (SANITIZE_RATE_MIBPS, overridable by the
 * SLATE_SANITIZE_MIBPS environment variable, 0 = unpaced): a sanitize
 * cannot be stopped once started, and unpaced it would monopolise the
 * backend and the reactor that other namespaces share.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"

#define SANITIZE_CHUNK_BYTES (1u << 20) /* one WRITE SAME request at a time */
#define SANITIZE_RATE_MIBPS  8u

static uint64_t rate_bytes_per_s(void)
{
        static _Atomic int64_t rate = -1;
        int64_t r = atomic_load(&rate);
        if (r < 0) {
                const char *e = getenv("SLATE_SANITIZE_MIBPS");
                char *end = NULL;
                unsigned long v = e ? strtoul(e, &end, 10) : SANITIZE_RATE_MIBPS;
                if (e && (end == e || *end != '\0' || v > (1ul << 20)))
                        v = SANITIZE_RATE_MIBPS;
                r = (int64_t)v << 20;
                atomic_store(&rate, r);
        }
        return (uint64_t)r;
}

static struct scsi_lu_state *lu(struct scsi_cmd *cmd)
{
        return cmd->ns->scsi_state;
}

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

/* ---- the background overwrite ---- */

static void san_step(struct scsi_sanitize *san);

static void san_release(struct scsi_sanitize *san)
{
        free(san->pattern);
        free(san->scratch);
        san->pattern = NULL;
        san->scratch = NULL;
}

static void san_finish(struct scsi_sanitize *san, bool ok)
{
        struct scsi_cmd *w = san->waiter;
        struct core_ns *ns = san->ns;

        san_release(san);
        san->waiter = NULL;
        san->ns = NULL;
        core_ns_sanitize_end(ns, ok, san->cmd_ause, san->origin);
        if (w) {
                if (ok)
                        scsi_cmd_good(w);
                else
                        scsi_status_from_core(w, CORE_E_SANITIZE_FAILED, 0, false);
                w->done(w);
        }
        core_ns_put(ns);
}

static void san_req_done(struct core_req *req)
{
        struct scsi_sanitize *san = req->cb_arg;
        uint64_t rate, due, now;

        if (req->status != CORE_OK) {
                san_finish(san, false);
                return;
        }
        if (req->op == CORE_OP_FLUSH) {
                san_finish(san, true);
                return;
        }
        san->next_lba += req->nlb;
        san->done_blocks += req->nlb;
        core_ns_sanitize_progress(san->ns,
                                  (uint16_t)(san->done_blocks * 65535u / san->total_blocks));
        rate = rate_bytes_per_s();
        now = rt_now_ns();
        due = now;
        if (rate) {
                /* Keep the average at the rate since the start (bytes * 1e9 / rate, no overflow).
                 */
                unsigned __int128 b = (unsigned __int128)san->done_blocks * san->ns->block_size;
                due = san->start_ns + (uint64_t)(b * 1000000000u / rate);
        }
        if (due > now + 1000000u) {
                rt_timer_arm(san->reactor, &san->timer, (due - now) / 1000000u);
                return;
        }
        /* Continue on the next loop iteration, not inside the core's callback. */
        rt_defer(san->reactor, &san->defer);
}

static void san_timer(struct rt_timer *t)
{
        san_step((struct scsi_sanitize *)((char *)t - offsetof(struct scsi_sanitize, timer)));
}

static void san_defer(struct rt_defer *d)
{
        san_step((struct scsi_sanitize *)((char *)d - offsetof(struct scsi_sanitize, defer)));
}

static void san_submit(struct scsi_sanitize *san, enum core_op op, uint64_t lba, uint32_t nlb)
{
        struct core_req *r = &san->req;
        core_req_init(r, san->ns, op, lba, nlb, CORE_REQ_SANITIZE, san->reactor, san_req_done, san);
        if (op == CORE_OP_WRITE_SAME) {
                r->iov[0].iov_base = san->pattern;
                r->iov[0].iov_len = san->ns->block_size;
                r->iovcnt = 1;
                r->scratch = san->scratch;
                r->scratch_len = san->scratch_len;
        }
        core_req_submit(r);
}

static void san_step(struct scsi_sanitize *san)
{
        struct core_ns *ns = san->ns;
        uint64_t left, per;

        if (san->next_lba >= ns->num_blocks) {
                if (--san->passes_left == 0) {
                        /* The overwrite is done when it is on stable media. */
                        san_submit(san, CORE_OP_FLUSH, 0, 0);
                        return;
                }
                if (san->invert)
                        for (uint32_t i = 0; i < ns->block_size; i++)
                                san->pattern[i] = (uint8_t)~san->pattern[i];
                san->next_lba = 0;
        }
        left = ns->num_blocks - san->next_lba;
        per = san->scratch_len >> ns->block_shift;
        san_submit(san, CORE_OP_WRITE_SAME, san->next_lba, (uint32_t)(left < per ? left : per));
}

void scsi_sanitize_exec(struct scsi_cmd *cmd)
{
        struct core_ns *ns = cmd->ns;
        struct scsi_sanitize *san = &lu(cmd)->san;
        const uint8_t *p = cmd->buf;
        uint32_t len = cmd->data_out_len, bs = ns->block_size, ipl;
        uint64_t chunk;
        uint16_t byte;
        int bit;

        if (scsi_sanitize_check_overwrite(p, len, bs, &byte, &bit) < 0) {
                scsi_sense_invalid_field(cmd, false, byte, bit);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        /* Another nexus, or an NVMe host, may have started one since parse. */
        if (core_ns_sanitize_begin(ns, cmd->nexus) < 0) {
                scsi_status_from_core(cmd, CORE_E_SANITIZE_IN_PROGRESS, 0, false);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        chunk = ns->num_blocks << ns->block_shift;
        if (chunk > SANITIZE_CHUNK_BYTES)
                chunk = SANITIZE_CHUNK_BYTES;
        if (chunk < bs)
                chunk = bs;
        san->pattern = malloc(bs);
        san->scratch = malloc(chunk);
        if (!san->pattern || !san->scratch) {
                san_release(san);
                core_ns_sanitize_end(ns, false, true, cmd->nexus);
                scsi_status_from_core(cmd, CORE_E_NO_RESOURCES, 0, false);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        ipl = slate_be16(p + 2);
        for (uint32_t i = 0; i < bs; i++)
                san->pattern[i] = p[4 + i % ipl];
        core_ns_get(ns);
        san->ns = ns;
        san->reactor = cmd->reactor;
        san->scratch_len = (uint32_t)chunk;
        san->passes_left = p[0] & 0x1f;
        san->invert = p[0] & 0x80;
        san->cmd_ause = cmd->cdb[1] & 0x20;
        san->next_lba = 0;
        san->done_blocks = 0;
        san->total_blocks = ns->num_blocks * san->passes_left;
        if (!san->total_blocks)
                san->total_blocks = 1;
        san->start_ns = rt_now_ns();
        memset(&san->timer, 0, sizeof(san->timer));
        san->timer.fn = san_timer;
        san->defer.fn = san_defer;
        san->defer.next = NULL;
        san->origin = cmd->nexus;
        if (cmd->cdb[1] & 0x80) {
                /* IMMED: status now that the CDB and parameter list are good. */
                san->waiter = NULL;
                scsi_cmd_good(cmd);
                scsi_cmd_finish_deferred(cmd);
        } else {
                san->waiter = cmd;
        }
        rt_defer(san->reactor, &san->defer);
}

void scsi_sanitize_abort(struct scsi_cmd *cmd)
{
        struct scsi_sanitize *san;
        if (!cmd->ns || !cmd->ns->scsi_state)
                return;
        san = &lu(cmd)->san;
        if (san->waiter != cmd)
                return;
        /* The command ends; the sanitize operation does not (SBC-4 4.11.3). */
        san->waiter = NULL;
        cmd->status = SAM_STAT_TASK_ABORTED;
        cmd->sense_len = 0;
        cmd->data_in_len = 0;
        scsi_cmd_finish_deferred(cmd);
}
