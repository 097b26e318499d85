/*
 * Fused Compare and Write (NVMe Base 2.0 3.4.2, NVM Command Set 1.0
 * 3.2.1): a Compare with FUSE 01b followed on the same submission queue by
 * a Write with FUSE 10b over the same NSID, SLBA and NLB, executed as one
 * core CORE_OP_COMPARE_AND_WRITE (the core holds the range lock over the
 * read, the compare and the write, so no other command sees or slips into
 * the middle; the same operation SCSI COMPARE AND WRITE uses).  A pair
 * within NACWU (the namespace's atomic unit) keeps the Write's
 * CORE_REQ_ATOMIC, so the core writes its half through the atomic-write
 * engine: all or nothing across a crash as well.
 *
 * "The next command on the queue" is the next one nvme_cmd_parse sees on
 * it.  The queue keeps one pointer (nvme_queue.fuse_first) to a parsed
 * first half; the two commands are linked when the second is parsed.  Each
 * half's data reaches nvme_cmd_exec on its own (in-capsule or after R2T,
 * in either order): the first to arrive waits (fuse_ready), the second
 * submits the pair, built on the Write's core request with iov = compare
 * data then write data, and both CQEs complete together.  No allocation:
 * the state lives in the two commands and the queue.
 *
 * Failures: a FUSE 10b command with no first half before it is refused
 * with Command Aborted due to Missing Fused Command (0Ah); a first half
 * followed by anything else completes with Missing Fused Command; a second
 * half that is refused (or does not match the first: Invalid Field, our
 * choice) takes its first half down with Command Aborted due to Failed
 * Fused Command (09h); a miscompare completes the Compare with Compare
 * Failure (85h) and the Write with Failed Fused Command; any other error
 * of the pair goes on the Write (our choice), the Compare getting Failed
 * Fused Command.  A half the transport drops (queue closing) or whose
 * data fails (digest) releases its peer the same way, so a waiting half
 * never holds a queue's teardown.
 */
#include <string.h>

#include "core/atomic.h"
#include "nvme/internal.h"
#include "rt/reactor.h"

enum { FUSE_NONE = 0, FUSE_FIRST = 1, FUSE_SECOND = 2 };

static void fuse_clear(struct nvme_cmd *c)
{
        c->fuse_peer = NULL;
        c->fuse = FUSE_NONE;
        c->fuse_fail = 0;
        c->fuse_ready = false;
}

static void fuse_set_failed(struct nvme_cmd *c, uint8_t sc)
{
        /* Missing: the host's sequence was wrong (DNR); Failed: the peer's fault. */
        nvme_set_status(c, NVME_SCT_GENERIC, sc, sc == NVME_SC_FUSED_MISSING);
        if (c->queue)
                nvme_ctrl_log_error(c->queue->ctrl, c, NVME_LOC_NONE, c->req.lba);
}

/*
 * c will not run as part of a pair: complete it now (deferred) if it
 * already executed and waits, else when it executes.
 */
static void fuse_fail(struct nvme_cmd *c, uint8_t sc)
{
        bool ready = c->fuse_ready;
        fuse_clear(c);
        if (ready) {
                fuse_set_failed(c, sc);
                nvme_cmd_complete_deferred(c);
        } else {
                c->fuse_fail = sc;
        }
}

enum nvme_parse_result nvme_fused_check(struct nvme_cmd *cmd, const struct nvme_cmd *first)
{
        uint8_t fuse = cmd->sqe[1] & 0x3, opc = cmd->sqe[0];
        if (fuse == FUSE_NONE)
                return NVME_PARSE_EXEC;
        /* Only Compare + Write fuse (FUSES bit 0), and only on I/O queues. */
        if (fuse == 0x3 || cmd->queue->qid == 0 || opc == NVME_OPC_FABRICS ||
            (fuse == FUSE_FIRST && opc != NVME_IO_COMPARE) ||
            (fuse == FUSE_SECOND && opc != NVME_IO_WRITE))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, 1, 0);
        if (fuse == FUSE_SECOND) {
                if (!first)
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_FUSED_MISSING, 1, 0);
                /* Same namespace, SLBA and NLB as the Compare. */
                if (nvme_cdw(cmd, 1) != nvme_cdw(first, 1))
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, 4, -1);
                if (nvme_cdw(cmd, 10) != nvme_cdw(first, 10) ||
                    nvme_cdw(cmd, 11) != nvme_cdw(first, 11))
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                           NVME_SQE_OFF_CDW(10), -1);
                if ((nvme_cdw(cmd, 12) & 0xffff) != (nvme_cdw(first, 12) & 0xffff))
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                           NVME_SQE_OFF_CDW(12), -1);
        }
        return NVME_PARSE_EXEC;
}

void nvme_fused_parsed(struct nvme_cmd *cmd, struct nvme_cmd *first, enum nvme_parse_result r)
{
        uint8_t fuse = cmd->sqe[1] & 0x3;
        if (first) {
                if (fuse == FUSE_SECOND && r == NVME_PARSE_EXEC) {
                        first->fuse_peer = cmd;
                        cmd->fuse_peer = first;
                        cmd->fuse = FUSE_SECOND;
                } else {
                        fuse_fail(first,
                                  fuse == FUSE_SECOND ? NVME_SC_FUSED_FAIL : NVME_SC_FUSED_MISSING);
                }
        }
        if (fuse == FUSE_FIRST && r == NVME_PARSE_EXEC) {
                cmd->fuse = FUSE_FIRST;
                cmd->queue->fuse_first = cmd;
        }
}

static void fused_done(struct core_req *req)
{
        struct nvme_cmd *second = req->cb_arg, *first = second->fuse_peer;
        struct nvme_ctrl *ctrl = second->queue->ctrl;
        fuse_clear(first);
        fuse_clear(second);
        if (req->status == CORE_OK) {
                nvme_set_status(first, 0, 0, false);
                nvme_set_status(second, 0, 0, false);
                if (ctrl)
                        atomic_fetch_add_explicit(&ctrl->host_writes, 1, memory_order_relaxed);
        } else if (req->status == CORE_E_MISCOMPARE) {
                nvme_status_from_core(first, req->status);
                fuse_set_failed(second, NVME_SC_FUSED_FAIL);
        } else {
                nvme_status_from_core(second, req->status);
                fuse_set_failed(first, NVME_SC_FUSED_FAIL);
                if (ctrl &&
                    (req->status == CORE_E_MEDIUM_ERROR || req->status == CORE_E_WRITE_ERROR))
                        atomic_fetch_add_explicit(&ctrl->media_errors, 1, memory_order_relaxed);
        }
        nvme_cmd_complete(first);
        nvme_cmd_complete(second);
}

/* Both halves' data is in: one compare-and-write on the Write's core request. */
static void fused_submit(struct nvme_cmd *first, struct nvme_cmd *second)
{
        struct core_req *req = &second->req;
        req->op = CORE_OP_COMPARE_AND_WRITE;
        /*
         * The range lock makes it atomic against every other command; a pair
         * that fits NACWU keeps CORE_REQ_ATOMIC from the Write's parse, so its
         * write half goes through the atomic-write engine (crash-atomic too).
         */
        /* Each half's transfer: with metadata, extended LBAs unless PRACT strips (pi.c);
         * halves that disagree are refused by the core (length). */
        req->iov[0].iov_base = first->buf;
        req->iov[0].iov_len = first->data_len;
        req->iov[1].iov_base = second->buf;
        req->iov[1].iov_len = second->data_len;
        req->iovcnt = 2;
        req->scratch = first->req.scratch;
        req->scratch_len = first->req.scratch_len;
        req->cb = fused_done;
        req->cb_arg = second;
        req->reactor = second->reactor;
        core_req_submit(req);
}

bool nvme_fused_exec(struct nvme_cmd *cmd)
{
        if (cmd->fuse_fail) {
                uint8_t sc = cmd->fuse_fail;
                fuse_clear(cmd);
                fuse_set_failed(cmd, sc);
                nvme_cmd_complete_deferred(cmd);
                return true;
        }
        if (cmd->fuse == FUSE_NONE)
                return false;
        struct nvme_cmd *peer = cmd->fuse_peer;
        if (!peer || !peer->fuse_ready) {
                cmd->fuse_ready = true; /* the peer is not parsed, or its data not in */
                return true;
        }
        peer->fuse_ready = false;
        if (cmd->fuse == FUSE_FIRST)
                fused_submit(cmd, peer);
        else
                fused_submit(peer, cmd);
        return true;
}

/* cmd will never execute: unlink it from its queue and its peer. */
void nvme_fused_forget(struct nvme_cmd *cmd)
{
        struct nvme_queue *q = cmd->queue;
        if (q && q->fuse_first == cmd)
                q->fuse_first = NULL;
        struct nvme_cmd *peer = cmd->fuse_peer;
        fuse_clear(cmd);
        if (peer)
                fuse_fail(peer, NVME_SC_FUSED_FAIL);
}

void nvme_cmd_abandon(struct nvme_cmd *cmd)
{
        nvme_fused_forget(cmd);
        if (cmd->ns) {
                core_ns_put(cmd->ns);
                cmd->ns = NULL;
        }
        cmd->op = NULL;
}

void nvme_queue_fused_abort(struct nvme_queue *q)
{
        struct nvme_cmd *first = q->fuse_first;
        if (!first)
                return;
        q->fuse_first = NULL;
        fuse_fail(first, NVME_SC_FUSED_MISSING);
}
