/*
 * One iSCSI connection on one reactor (RFC 7143 full feature phase, 4.2,
 * 11.3-11.19): the PDU receive state machine, the send queue, the task
 * pool, and the full-feature PDUs -- SCSI Command with immediate and
 * unsolicited data, R2T/Data-Out, Data-In with status piggy-backing, SCSI
 * Response with sense and residuals, CmdSN windowing, NOP, Text
 * (SendTargets), Task Management, Logout and Reject.
 *
 * I/O: the socket is non-blocking; io_uring POLL_ADD tells us when it is
 * readable (re-armed) or writable again (only while the send queue is
 * stuck), and recv()/sendmsg() move the bytes -- data lands directly in
 * the task's buffer and is sent from it.
 *
 * Task lifetime: a task holds references -- its owner (dropped when the
 * exchange is over or aborted), one per queued tx, one while inside
 * scsi_cmd_exec().  The connection is freed only when every task is back
 * on the free list and no poll is in flight, so a command whose backend
 * I/O is running is never freed under it.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/fault.h"
#include "iscsi/internal.h"
#include "rt/crc.h"
#include "rt/lazymap.h"
#include "rt/limits.h"
#include "rt/log.h"
#include "rt/reactor.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                              */

void iscsi_conn_warn(struct iscsi_conn *c, const char *fmt, ...)
{
        if (c->warned)
                return;
        c->warned = true;
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        /* A garbage flood must not flood the log: one budget for all connections. */
        static struct rt_log_ratelimit rl = RT_LOG_RATELIMIT_INIT("iSCSI protocol violations");
        if (rt_log_ratelimit(&rl, ISCSI_MOD))
                LOG_WARN(ISCSI_MOD, "%s: protocol violation: %s", c->peer, msg);
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
        return a < b ? a : b;
}

void iscsi_conn_update_window(struct iscsi_conn *c)
{
        struct iscsi_session *s = c->sess;
        if (!s)
                return;
        uint32_t free_slots =
            c->outstanding < ISCSI_QUEUE_DEPTH ? ISCSI_QUEUE_DEPTH - c->outstanding : 0;
        uint32_t max = s->exp_cmdsn - 1 + free_slots;
        /* MaxCmdSN never moves backwards (RFC 7143 4.2.2.1). */
        if (iscsi_sn_gt(max, s->max_cmdsn))
                s->max_cmdsn = max;
}

void iscsi_conn_fill_sn(struct iscsi_conn *c, be32 *statsn, be32 *exp_cmdsn, be32 *max_cmdsn,
                        bool with_status)
{
        if (statsn)
                put_be32(statsn, with_status ? c->statsn++ : c->statsn);
        if (c->sess) {
                iscsi_conn_update_window(c);
                put_be32(exp_cmdsn, c->sess->exp_cmdsn);
                put_be32(max_cmdsn, c->sess->max_cmdsn);
        }
}

void iscsi_tx_seal(struct iscsi_conn *c, struct iscsi_tx *tx)
{
        struct iscsi_bhs *h = (struct iscsi_bhs *)tx->hdr;
        put_be24(&h->data_segment_len, tx->data_len);
        tx->hdr_len = ISCSI_BHS_LEN;
        if (c->hdigest) {
                iscsi_digest_put(tx->hdr + ISCSI_BHS_LEN, rt_crc32c(tx->hdr, ISCSI_BHS_LEN));
                tx->hdr_len += ISCSI_DIGEST_LEN;
        }
        uint32_t pad = (4 - (tx->data_len & 3)) & 3;
        memset(tx->trailer, 0, sizeof(tx->trailer));
        tx->trailer_len = pad;
        if (c->ddigest && tx->data_len) {
                uint32_t crc = rt_crc32c_update(RT_CRC32C_INIT, tx->data, tx->data_len);
                crc = rt_crc32c_update(crc, tx->trailer, pad);
                iscsi_digest_put(tx->trailer + pad, rt_crc32c_final(crc));
                tx->trailer_len += ISCSI_DIGEST_LEN;
        }
}

void iscsi_conn_enqueue(struct iscsi_conn *c, struct iscsi_tx *tx)
{
        struct rt_txitem *it = &tx->it;
        it->iovcnt = 0;
        const uint8_t *parts[3] = {tx->hdr, tx->data, tx->trailer};
        uint32_t lens[3] = {tx->hdr_len, tx->data_len, tx->trailer_len};
        for (int i = 0; i < 3; i++)
                if (lens[i]) {
                        it->iov[it->iovcnt].iov_base = (void *)parts[i];
                        it->iov[it->iovcnt].iov_len = lens[i];
                        it->iovcnt++;
                }
        uint32_t zmin = rt_zc_min();
        it->zc = zmin && tx->data_len >= zmin && rt_txq_zc_enable(&c->txq, c->fd);
        tx->queued = true;
        rt_txq_push(&c->txq, it);
}

static struct iscsi_tx *txq_pop(struct iscsi_conn *c)
{
        struct rt_txitem *it = rt_txq_pop(&c->txq);
        if (!it)
                return NULL;
        struct iscsi_tx *tx = (struct iscsi_tx *)((char *)it - offsetof(struct iscsi_tx, it));
        tx->queued = false;
        return tx;
}

/* ------------------------------------------------------------------ */
/* Reactor plumbing                                                     */

static void conn_try_free(struct iscsi_conn *c);
static void rx_process(struct iscsi_conn *c);
static void ev_zc_fn(struct rt_event *ev, int res);

static void arm_poll(struct iscsi_conn *c, bool out)
{
        if (c->state == ISCSI_CONN_CLOSING)
                return;
        bool *armed = out ? &c->poll_out : &c->poll_in;
        if (*armed)
                return;
        *armed = true;
        struct io_uring_sqe *sqe = rt_sqe(c->r);
        io_uring_prep_poll_add(sqe, c->fd, out ? POLLOUT : POLLIN);
        io_uring_sqe_set_data(sqe, out ? &c->ev_out : &c->ev_in);
}

static void rx_arm(struct iscsi_conn *c)
{
        if (c->state != ISCSI_CONN_CLOSING && c->rx_state != ISCSI_RX_STOP &&
            c->rx_state != ISCSI_RX_HDR)
                arm_poll(c, false);
}

/* rt_txq_flush callback: a PDU is out; false once its done() closed the connection. */
static bool conn_tx_sent(struct rt_txitem *it, void *arg)
{
        struct iscsi_conn *c = arg;
        struct iscsi_tx *tx = (struct iscsi_tx *)((char *)it - offsetof(struct iscsi_tx, it));
        tx->queued = false;
        if (tx->done)
                tx->done(c, tx);
        return c->state != ISCSI_CONN_CLOSING;
}

/* Wait for zero-copy notifications (poll_add always reports POLLERR; ask nothing else). */
static void zc_arm(struct iscsi_conn *c)
{
        if (c->state == ISCSI_CONN_CLOSING || c->poll_zc)
                return;
        c->poll_zc = true;
        struct io_uring_sqe *sqe = rt_sqe(c->r);
        io_uring_prep_poll_add(sqe, c->fd, 0);
        io_uring_sqe_set_data(sqe, &c->ev_zc);
}

/* Hand back the PDUs whose zero-copy notifications came; wait for the rest. */
static void zc_reap(struct iscsi_conn *c)
{
        int rc = rt_txq_zc_reap(&c->txq, c->fd, conn_tx_sent, c);
        if (c->state == ISCSI_CONN_CLOSING)
                return;
        if (rc < 0)
                iscsi_conn_close(c, "reading zero-copy notifications failed");
        else
                iscsi_conn_flush(c); /* what done() queued; waits for the rest (zc_arm) */
}

static void ev_zc_fn(struct rt_event *ev, int res)
{
        struct iscsi_conn *c =
            (struct iscsi_conn *)((char *)ev - offsetof(struct iscsi_conn, ev_zc));
        c->poll_zc = false;
        if (c->state == ISCSI_CONN_CLOSING) {
                conn_try_free(c);
                return;
        }
        if (res > 0 && (res & POLLHUP) && !(res & POLLERR)) {
                iscsi_conn_close(c, "connection closed with zero-copy sends outstanding");
                return;
        }
        zc_reap(c);
}

void iscsi_conn_flush(struct iscsi_conn *c)
{
        if (c->state == ISCSI_CONN_CLOSING)
                return;
        int rc = rt_txq_flush(&c->txq, c->fd, conn_tx_sent, c);
        if (c->state != ISCSI_CONN_CLOSING && rt_txq_zc_busy(&c->txq))
                zc_arm(c);
        if (rc == -EAGAIN)
                arm_poll(c, true);
        else if (rc < 0)
                iscsi_conn_close(c, "send error");
}

static void ev_in_fn(struct rt_event *ev, int res)
{
        struct iscsi_conn *c =
            (struct iscsi_conn *)((char *)ev - offsetof(struct iscsi_conn, ev_in));
        c->poll_in = false;
        if (c->state == ISCSI_CONN_CLOSING) {
                conn_try_free(c);
                return;
        }
        if (res > 0 && (res & POLLERR) && rt_txq_zc_busy(&c->txq)) {
                zc_reap(c); /* notifications, not data: re-arming alone would fire again */
                if (c->state == ISCSI_CONN_CLOSING)
                        return;
        }
        rx_process(c);
        if (c->state == ISCSI_CONN_CLOSING)
                return;
        iscsi_conn_flush(c);
        rx_arm(c);
}

static void ev_out_fn(struct rt_event *ev, int res)
{
        struct iscsi_conn *c =
            (struct iscsi_conn *)((char *)ev - offsetof(struct iscsi_conn, ev_out));
        (void)res;
        c->poll_out = false;
        if (c->state == ISCSI_CONN_CLOSING) {
                conn_try_free(c);
                return;
        }
        iscsi_conn_flush(c);
}

static void rx_defer_fn(struct rt_defer *d)
{
        struct iscsi_conn *c =
            (struct iscsi_conn *)((char *)d - offsetof(struct iscsi_conn, rx_defer));
        c->rx_defer_armed = false;
        if (c->state == ISCSI_CONN_CLOSING) {
                conn_try_free(c);
                return;
        }
        rx_process(c);
        if (c->state == ISCSI_CONN_CLOSING)
                return;
        iscsi_conn_flush(c);
        rx_arm(c);
}

/*
 * Flush on the next loop turn: the commands that complete in one turn (a
 * backend's completions run one after another) go out in one sendmsg
 * instead of one each.
 */
static void tx_defer_fn(struct rt_defer *d)
{
        struct iscsi_conn *c =
            (struct iscsi_conn *)((char *)d - offsetof(struct iscsi_conn, tx_defer));
        c->tx_defer_armed = false;
        if (c->state == ISCSI_CONN_CLOSING) {
                conn_try_free(c);
                return;
        }
        iscsi_conn_flush(c);
}

static void conn_flush_soon(struct iscsi_conn *c)
{
        if (c->tx_defer_armed || c->state == ISCSI_CONN_CLOSING)
                return;
        c->tx_defer_armed = true;
        rt_defer(c->r, &c->tx_defer);
}

static void rx_kick(struct iscsi_conn *c)
{
        if (c->rx_defer_armed)
                return;
        c->rx_defer_armed = true;
        rt_defer(c->r, &c->rx_defer);
}

/* ------------------------------------------------------------------ */
/* Tasks                                                                */

static struct iscsi_task *task_get(struct iscsi_conn *c, bool immediate)
{
        struct iscsi_task *t = c->free_tasks;
        if (!t && c->task_hw == c->nr_tasks)
                return NULL;
        /* Keep the reserve for immediate PDUs so NOP/TMF still flow at a full window. */
        if (!immediate && c->outstanding >= ISCSI_QUEUE_DEPTH &&
            c->nr_free <= ISCSI_TASK_RESERVE / 2)
                return NULL;
        if (t) {
                c->free_tasks = t->next_free;
        } else { /* a task's first use: its pages are the region's zeroes */
                t = &c->tasks[c->task_hw];
                t->idx = c->task_hw;
                t->buf = c->region + (size_t)t->idx * ISCSI_TASK_BUF_LEN;
                c->task_hw++;
        }
        c->nr_free--;
        uint8_t *buf = t->buf;
        uint32_t idx = t->idx, gen = t->r2t_gen;
        memset(t, 0, offsetof(struct iscsi_task, cmd));
        t->conn = c;
        t->idx = idx;
        t->buf = buf;
        t->r2t_gen = gen;
        t->refs = 1;
        t->immediate = immediate;
        t->ttt = ISCSI_RESERVED_TAG;
        t->state = ISCSI_TASK_CTL;
        if (!immediate)
                c->outstanding++;
        return t;
}

static void logout_check(struct iscsi_conn *c);

/* The task's data buffer is one lent by the reactor's pool. */
static bool task_has_big(const struct iscsi_task *t)
{
        return t->is_scsi && t->cmd.buf && t->cmd.buf != t->buf;
}

static void task_put(struct iscsi_task *t);
static void conn_bw_arm(struct iscsi_conn *c);

/* A task that is over stops waiting for a large buffer (and drops the wait's reference). */
static void task_unwait(struct iscsi_task *t)
{
        struct iscsi_conn *c = t->conn;
        if (!t->buf_wait)
                return;
        if (t == c->bw_head && c->bw_armed) {
                if (!rt_bigbuf_cancel(c->r, &c->bw))
                        return; /* already lent: conn_big_granted gives it back */
                c->bw_armed = false;
        }
        struct iscsi_task **pp = &c->bw_head, *prev = NULL;
        while (*pp && *pp != t) {
                prev = *pp;
                pp = &(*pp)->next_free;
        }
        if (*pp) {
                *pp = t->next_free;
                if (c->bw_tail == t)
                        c->bw_tail = prev;
        }
        t->buf_wait = false;
        task_put(t);
        conn_bw_arm(c);
}

static void task_put(struct iscsi_task *t)
{
        struct iscsi_conn *c = t->conn;
        if (--t->refs > 0)
                return;
        if (task_has_big(t)) {
                rt_bigbuf_put(c->r, t->cmd.buf, t->cmd.buf_len);
                t->cmd.buf = t->buf;
        }
        t->state = ISCSI_TASK_FREE;
        t->next_free = c->free_tasks;
        c->free_tasks = t;
        c->nr_free++;
        if (!t->immediate && c->outstanding)
                c->outstanding--;
        if (c->state == ISCSI_CONN_CLOSING) {
                conn_try_free(c);
                return;
        }
        if (c->rx_state == ISCSI_RX_HDR)
                rx_kick(c);
        if (c->state == ISCSI_CONN_LOGOUT)
                logout_check(c);
}

/* Drop the owner reference once. */
static void task_finish(struct iscsi_task *t)
{
        if (t->finished)
                return;
        t->finished = true;
        task_unwait(t);
        task_put(t);
}

static void task_send(struct iscsi_task *t, struct iscsi_tx *tx,
                      void (*done)(struct iscsi_conn *, struct iscsi_tx *))
{
        tx->done = done;
        tx->arg = t;
        t->refs++;
        iscsi_tx_seal(t->conn, tx);
        iscsi_conn_enqueue(t->conn, tx);
}

/* ------------------------------------------------------------------ */
/* Responses to SCSI commands                                           */

static void scsi_tx_done(struct iscsi_conn *c, struct iscsi_tx *tx);

static void build_scsi_rsp(struct iscsi_task *t)
{
        struct iscsi_conn *c = t->conn;
        struct scsi_cmd *cmd = &t->cmd;
        struct iscsi_scsi_rsp *r = (struct iscsi_scsi_rsp *)t->tx.hdr;
        memset(r, 0, sizeof(*r));
        r->opcode = ISCSI_OP_SCSI_RSP;
        r->flags = ISCSI_FLAG_FINAL | t->rsp_flags;
        r->response = ISCSI_RESPONSE_COMPLETED;
        r->status = cmd->status;
        put_be32(&r->itt, t->itt);
        iscsi_conn_fill_sn(c, &r->statsn, &r->exp_cmdsn, &r->max_cmdsn, true);
        put_be32(&r->exp_datasn, t->datain_sn + t->r2tsn);
        put_be32(&r->residual, t->residual);
        t->tx.data = NULL;
        t->tx.data_len = 0;
        if (cmd->sense_len && cmd->status != SAM_STAT_GOOD) {
                uint32_t sl = cmd->sense_len > SCSI_SENSE_MAX ? SCSI_SENSE_MAX : cmd->sense_len;
                t->rsp_data[0] = (uint8_t)(sl >> 8);
                t->rsp_data[1] = (uint8_t)sl;
                memcpy(t->rsp_data + 2, cmd->sense, sl);
                t->tx.data = t->rsp_data;
                t->tx.data_len = 2 + sl;
        }
        t->rsp_sent = true;
        rt_stats_cur()->cmds[RT_XPORT_ISCSI]++;
        task_send(t, &t->tx, scsi_tx_done);
}

static void build_datain(struct iscsi_task *t, bool piggyback)
{
        struct iscsi_conn *c = t->conn;
        struct iscsi_params *p = &c->sess->params;
        uint32_t off = t->datain_off;
        uint32_t len = min_u32(t->datain_total - off, c->mrdsl_out);
        uint32_t burst = p->max_burst ? p->max_burst : 262144;
        len = min_u32(len, burst - (off % burst));
        bool last = off + len == t->datain_total;

        struct iscsi_data_in *d = (struct iscsi_data_in *)t->tx.hdr;
        memset(d, 0, sizeof(*d));
        d->opcode = ISCSI_OP_DATA_IN;
        if (last || (off + len) % burst == 0)
                d->flags |= ISCSI_FLAG_FINAL;
        memcpy(d->lun, t->lun_raw, 8);
        put_be32(&d->itt, t->itt);
        put_be32(&d->ttt, ISCSI_RESERVED_TAG);
        if (last && piggyback) {
                d->flags |= ISCSI_DATAIN_STATUS | ISCSI_FLAG_FINAL | t->rsp_flags;
                d->status = t->cmd.status;
                put_be32(&d->residual, t->residual);
                iscsi_conn_fill_sn(c, &d->statsn, &d->exp_cmdsn, &d->max_cmdsn, true);
                t->rsp_sent = true;
                rt_stats_cur()->cmds[RT_XPORT_ISCSI]++;
        } else {
                iscsi_conn_fill_sn(c, NULL, &d->exp_cmdsn, &d->max_cmdsn, false);
        }
        put_be32(&d->datasn, t->datain_sn++);
        put_be32(&d->buffer_offset, off);
        t->tx.data = t->cmd.buf + off;
        t->tx.data_len = len;
        t->datain_off = off + len;
        task_send(t, &t->tx, scsi_tx_done);
}

static bool task_piggyback(const struct iscsi_task *t)
{
        return t->cmd.status == SAM_STAT_GOOD || !t->cmd.sense_len;
}

/* Next PDU of a SCSI task's answer, or the end of the task. */
static void scsi_tx_next(struct iscsi_task *t)
{
        if (t->datain_off < t->datain_total)
                build_datain(t, task_piggyback(t));
        else if (!t->rsp_sent)
                build_scsi_rsp(t);
        else
                task_finish(t);
}

static void scsi_tx_done(struct iscsi_conn *c, struct iscsi_tx *tx)
{
        struct iscsi_task *t = tx->arg;
        if (c->state == ISCSI_CONN_CLOSING || t->aborted)
                task_finish(t);
        else
                scsi_tx_next(t);
        task_put(t);
}

static void task_respond(struct iscsi_task *t)
{
        struct scsi_cmd *cmd = &t->cmd;
        t->state = ISCSI_TASK_TX;
        uint32_t sent = 0;
        if (cmd->dir_read && cmd->data_in_len) {
                sent = min_u32(cmd->data_in_len, t->edtl);
                sent = min_u32(sent, cmd->buf_len);
        }
        if (!t->rsp_preset) {
                /* RFC 7143 11.4.5: residuals against the expected data transfer length. */
                bool reads = cmd->dir_read || cmd->data_in_len;
                if (cmd->xfer_len > t->edtl) {
                        t->rsp_flags = ISCSI_RSP_OVERFLOW;
                        t->residual = cmd->xfer_len - t->edtl;
                } else if (reads && sent < t->edtl) {
                        t->rsp_flags = ISCSI_RSP_UNDERFLOW;
                        t->residual = t->edtl - sent;
                } else if (!reads && t->edtl > cmd->xfer_len) {
                        t->rsp_flags = ISCSI_RSP_UNDERFLOW;
                        t->residual = t->edtl - cmd->xfer_len;
                }
        }
        t->datain_total = sent;
        t->datain_off = 0;
        scsi_tx_next(t);
}

/* ------------------------------------------------------------------ */
/* SCSI execution                                                       */

static void tmf_respond(struct iscsi_task *tmf);

static void scsi_done(struct scsi_cmd *cmd)
{
        struct iscsi_task *t = cmd->priv;
        struct iscsi_conn *c = t->conn;
        t->exec_pending = false;
        c->exec_count--;
        if (t->aborted || c->state == ISCSI_CONN_CLOSING) {
                struct iscsi_task *tmf = t->tmf;
                t->tmf = NULL;
                if (tmf && tmf->tmf_wait && --tmf->tmf_wait == 0 && c->state != ISCSI_CONN_CLOSING)
                        tmf_respond(tmf);
                task_finish(t);
                task_put(t);
                if (c->state != ISCSI_CONN_CLOSING)
                        iscsi_conn_flush(c);
                return;
        }
        task_respond(t);
        task_put(t);
        conn_flush_soon(c);
}

static void task_exec(struct iscsi_task *t)
{
        struct iscsi_conn *c = t->conn;
        t->state = ISCSI_TASK_EXEC;
        t->exec_pending = true;
        t->refs++;
        c->exec_count++;
        scsi_cmd_exec(&t->cmd);
}

static void r2t_tx_done(struct iscsi_conn *c, struct iscsi_tx *tx);

static void send_r2t(struct iscsi_task *t)
{
        struct iscsi_conn *c = t->conn;
        if (t->tx_r2t.queued) {
                t->r2t_wanted = true;
                return;
        }
        struct iscsi_params *p = &c->sess->params;
        t->r2t_off = t->next_off;
        t->r2t_len = min_u32(t->want - t->next_off, p->max_burst ? p->max_burst : 262144);
        t->r2t_gen = (t->r2t_gen + 1) & 0x7fff;
        t->ttt = (t->r2t_gen << 16) | t->idx;
        t->datasn = 0;

        struct iscsi_r2t *r = (struct iscsi_r2t *)t->tx_r2t.hdr;
        memset(r, 0, sizeof(*r));
        r->opcode = ISCSI_OP_R2T;
        r->flags = ISCSI_FLAG_FINAL;
        memcpy(r->lun, t->lun_raw, 8);
        put_be32(&r->itt, t->itt);
        put_be32(&r->ttt, t->ttt);
        iscsi_conn_fill_sn(c, &r->statsn, &r->exp_cmdsn, &r->max_cmdsn, false);
        put_be32(&r->r2tsn, t->r2tsn++);
        put_be32(&r->buffer_offset, t->r2t_off);
        put_be32(&r->desired_len, t->r2t_len);
        t->tx_r2t.data = NULL;
        t->tx_r2t.data_len = 0;
        task_send(t, &t->tx_r2t, r2t_tx_done);
}

/* Data moved for a SCSI task: ask for more, or run it. */
static void task_data_progress(struct iscsi_task *t)
{
        if (t->aborted || t->state != ISCSI_TASK_RX_DATA || t->buf_wait)
                return;
        if (!t->unsol_done)
                return; /* unsolicited Data-Out still to come */
        if (t->next_off < t->want) {
                if (t->ttt == ISCSI_RESERVED_TAG)
                        send_r2t(t);
                return;
        }
        if (t->parse_done)
                task_respond(t);
        else
                task_exec(t);
}

static void r2t_tx_done(struct iscsi_conn *c, struct iscsi_tx *tx)
{
        struct iscsi_task *t = tx->arg;
        if (c->state != ISCSI_CONN_CLOSING && t->r2t_wanted && !t->aborted) {
                t->r2t_wanted = false;
                t->ttt = ISCSI_RESERVED_TAG;
                task_data_progress(t);
        }
        task_put(t);
}

/* ------------------------------------------------------------------ */
/* Control answers                                                      */

static void ctl_tx_done(struct iscsi_conn *c, struct iscsi_tx *tx)
{
        struct iscsi_task *t = tx->arg;
        bool close_after =
            c->state != ISCSI_CONN_CLOSING && (t->tmf_close || t->opcode == ISCSI_OP_LOGOUT_REQ);
        task_finish(t);
        task_put(t);
        if (close_after)
                iscsi_conn_close(c,
                                 t->opcode == ISCSI_OP_LOGOUT_REQ ? "logout" : "target cold reset");
}

static void send_reject(struct iscsi_task *t, uint8_t reason, const uint8_t *bhs)
{
        struct iscsi_conn *c = t->conn;
        memcpy(t->buf, bhs, ISCSI_BHS_LEN);
        struct iscsi_reject *r = (struct iscsi_reject *)t->tx.hdr;
        memset(r, 0, sizeof(*r));
        r->opcode = ISCSI_OP_REJECT;
        r->flags = ISCSI_FLAG_FINAL;
        r->reason = reason;
        put_be32(&r->itt, ISCSI_RESERVED_TAG);
        iscsi_conn_fill_sn(c, &r->statsn, &r->exp_cmdsn, &r->max_cmdsn, true);
        t->tx.data = t->buf;
        t->tx.data_len = ISCSI_BHS_LEN;
        t->opcode = ISCSI_OP_REJECT;
        task_send(t, &t->tx, ctl_tx_done);
}

static void tmf_respond(struct iscsi_task *t)
{
        struct iscsi_conn *c = t->conn;
        struct iscsi_tmf_rsp *r = (struct iscsi_tmf_rsp *)t->tx.hdr;
        memset(r, 0, sizeof(*r));
        r->opcode = ISCSI_OP_TASK_MGMT_RSP;
        r->flags = ISCSI_FLAG_FINAL;
        r->response = t->tmf_response;
        put_be32(&r->itt, t->itt);
        iscsi_conn_fill_sn(c, &r->statsn, &r->exp_cmdsn, &r->max_cmdsn, true);
        t->tx.data = NULL;
        t->tx.data_len = 0;
        task_send(t, &t->tx, ctl_tx_done);
}

static void send_logout_rsp(struct iscsi_task *t, uint8_t response)
{
        struct iscsi_conn *c = t->conn;
        struct iscsi_logout_rsp *r = (struct iscsi_logout_rsp *)t->tx.hdr;
        memset(r, 0, sizeof(*r));
        r->opcode = ISCSI_OP_LOGOUT_RSP;
        r->flags = ISCSI_FLAG_FINAL;
        r->response = response;
        put_be32(&r->itt, t->itt);
        iscsi_conn_fill_sn(c, &r->statsn, &r->exp_cmdsn, &r->max_cmdsn, true);
        if (response == ISCSI_LOGOUT_RSP_OK) {
                put_be16(&r->time2wait, (uint16_t)c->sess->params.time2wait);
                put_be16(&r->time2retain, (uint16_t)c->sess->params.time2retain);
        }
        t->tx.data = NULL;
        t->tx.data_len = 0;
        task_send(t, &t->tx, ctl_tx_done);
}

/* Logout: answer once only the logout task is left. */
static void logout_check(struct iscsi_conn *c)
{
        if (c->logout_rsp_sent || !c->logout_task)
                return;
        if (c->nr_free + 1 < c->nr_tasks)
                return;
        c->logout_rsp_sent = true;
        LOG_INFO(ISCSI_MOD, "%s: logout (initiator %s)", c->peer, c->sess->initiator);
        /*
         * The I_T nexus ends now, before the response: an initiator that
         * logs straight back in must find what the old nexus held (PREVENT,
         * RESERVE(6)) already released, not released later when this
         * connection's memory is freed.
         */
        iscsi_session_end_nexus(c->sess);
        send_logout_rsp(c->logout_task, ISCSI_LOGOUT_RSP_OK);
        iscsi_conn_flush(c); /* a no-op when called from inside a flush */
}

/* ------------------------------------------------------------------ */
/* Receive: header stage (choose where the data goes)                   */

enum { HDR_OK = 0, HDR_PARK = 1 };

/* CmdSN window check (RFC 7143 3.2.2.1); no state change. */
static bool cmdsn_ok(struct iscsi_conn *c, bool immediate, uint32_t cmdsn)
{
        struct iscsi_session *s = c->sess;
        if (immediate)
                return true;
        return !iscsi_sn_lt(cmdsn, s->exp_cmdsn) && !iscsi_sn_gt(cmdsn, s->max_cmdsn);
}

static void cmdsn_advance(struct iscsi_conn *c, bool immediate, uint32_t cmdsn)
{
        struct iscsi_session *s = c->sess;
        if (!immediate && !iscsi_sn_lt(cmdsn, s->exp_cmdsn))
                s->exp_cmdsn = cmdsn + 1;
}

static int cdb_from_pdu(struct iscsi_conn *c, struct scsi_cmd *cmd)
{
        const struct iscsi_scsi_cmd *h = (const struct iscsi_scsi_cmd *)c->bhs;
        memcpy(cmd->cdb, h->cdb, 16);
        cmd->cdb_len = 16;
        uint32_t off = 0;
        while (off + 4 <= c->ahs_len) {
                const struct iscsi_ahs_hdr *a = (const struct iscsi_ahs_hdr *)(c->ahs + off);
                uint32_t alen = get_be16(&a->ahs_len);
                uint32_t total = (4 + alen + 3) & ~3u;
                if (alen == 0 || off + 3 + alen > c->ahs_len)
                        return -EPROTO;
                if (a->ahs_type == ISCSI_AHS_EXTENDED_CDB) {
                        uint32_t ext = alen - 1; /* the reserved byte counts in AHSLength */
                        if (16 + ext > SCSI_CDB_MAX)
                                return -EPROTO;
                        memcpy(cmd->cdb + 16, c->ahs + off + 4, ext);
                        cmd->cdb_len = (uint16_t)(16 + ext);
                }
                off += total;
        }
        return 0;
}

static void task_parse(struct iscsi_task *t);
static int task_big_buffer(struct iscsi_task *t);

static int hdr_scsi_cmd(struct iscsi_conn *c)
{
        const struct iscsi_scsi_cmd *h = (const struct iscsi_scsi_cmd *)c->bhs;
        struct iscsi_session *s = c->sess;
        bool immediate = h->opcode & ISCSI_OP_IMMEDIATE;
        uint32_t cmdsn = get_be32(&h->cmdsn);

        c->rx_dst = NULL;
        if (!cmdsn_ok(c, immediate, cmdsn))
                return HDR_OK; /* outside the window: silently dropped */

        struct iscsi_task *t = task_get(c, immediate);
        if (!t)
                return HDR_PARK;
        cmdsn_advance(c, immediate, cmdsn);
        t->opcode = ISCSI_OP_SCSI_CMD;
        t->itt = get_be32(&h->itt);
        t->cmdsn = cmdsn;
        memcpy(t->lun_raw, h->lun, 8);
        c->rx_task = t;

        if (s->type != ISCSI_SESS_NORMAL) {
                iscsi_conn_warn(c, "SCSI command in a discovery session");
                t->opcode = ISCSI_OP_REJECT; /* answered at dispatch */
                return HDR_OK;
        }

        bool w = h->flags & ISCSI_CMD_WRITE;
        uint32_t imm = c->dsl;
        t->is_scsi = true;
        t->edtl = get_be32(&h->edtl);
        if (imm &&
            (!w || !s->params.immediate_data || imm > s->params.first_burst || imm > t->edtl)) {
                iscsi_conn_warn(c, "bad immediate data (%u bytes)", imm);
                t->is_scsi = false;
                t->opcode = ISCSI_OP_REJECT;
                return HDR_OK;
        }

        struct scsi_cmd *cmd = &t->cmd;
        memset(cmd, 0, offsetof(struct scsi_cmd, req));
        if (cdb_from_pdu(c, cmd)) {
                iscsi_conn_warn(c, "bad AHS");
                t->is_scsi = false;
                t->opcode = ISCSI_OP_REJECT;
                return HDR_OK;
        }
        uint64_t lun = iscsi_lun_decode(h->lun);
        cmd->lun = lun;
        cmd->task_attr = h->flags & ISCSI_CMD_ATTR_MASK;
        cmd->nexus = &s->nexus;
        cmd->edtl = t->edtl;
        cmd->dir_read = h->flags & ISCSI_CMD_READ;
        cmd->dir_write = w;
        /* Data in the slot's first half (or a pool buffer), the core's scratch in its second. */
        cmd->buf = t->buf;
        cmd->buf_len = ISCSI_TASK_BUF_LEN / 2;
        cmd->scratch = t->buf + ISCSI_TASK_BUF_LEN / 2;
        cmd->scratch_len = ISCSI_TASK_BUF_LEN / 2;
        cmd->reactor = c->r;
        cmd->done = scsi_done;
        cmd->priv = t;

        t->unsol_len = 0;
        if (w) {
                t->unsol_len = imm;
                if (!s->params.initial_r2t)
                        t->unsol_len = min_u32(t->edtl, s->params.first_burst);
                if (t->unsol_len < imm)
                        t->unsol_len = imm;
        }
        t->unsol_done = t->unsol_len == imm;
        t->state = ISCSI_TASK_RX_DATA;

        if (t->edtl > CORE_SMALL_TRANSFER_BYTES && task_big_buffer(t) == HDR_PARK) {
                c->rx_dst = t->buf; /* immediate data waits in the task's own buffer */
                return HDR_OK;
        }
        task_parse(t);
        c->rx_dst = cmd->buf;
        return HDR_OK;
}

/* Parse the task's command into cmd->buf: its final status now, or how much data it wants. */
static void task_parse(struct iscsi_task *t)
{
        struct scsi_cmd *cmd = &t->cmd;
        bool w = cmd->dir_write;
        if (scsi_cmd_parse(cmd) == SCSI_PARSE_DONE) {
                t->parse_done = true;
                t->want = 0;
        } else if (cmd->data_out_len > cmd->buf_len) {
                scsi_cmd_reject_xfer(cmd, SCSI_XFER_TOO_LONG);
                t->parse_done = true;
        } else if (cmd->data_out_len && (!w || cmd->data_out_len > t->edtl)) {
                /* The initiator would send less than the command needs
                 * (FCP-4 9.4.2 b): write nothing, report the overflow. */
                scsi_cmd_reject_xfer(cmd, SCSI_XFER_SHORT_OUT);
                t->parse_done = true;
                t->rsp_preset = true;
                uint32_t need =
                    cmd->xfer_len > cmd->data_out_len ? cmd->xfer_len : cmd->data_out_len;
                t->rsp_flags = ISCSI_RSP_OVERFLOW;
                t->residual = need - (w ? t->edtl : 0);
        } else {
                t->want = cmd->data_out_len;
        }
}

/*
 * The large buffer came: move the unsolicited data already received (at most
 * FirstBurstLength, including a PDU of this task still coming in, whose
 * remaining bytes then land in the new buffer) into it and parse.
 */
static void task_switch_big(struct iscsi_task *t, uint8_t *big, size_t len)
{
        struct iscsi_conn *c = t->conn;
        struct scsi_cmd *cmd = &t->cmd;
        uint32_t end = t->next_off;
        bool receiving = c->rx_task == t && c->rx_dst;
        if (receiving) {
                uint32_t off = (uint32_t)(c->rx_dst - t->buf);
                if (off + c->dsl > end)
                        end = off + c->dsl;
                c->rx_dst = big + off;
        }
        if (end) {
                memcpy(big, t->buf, end);
                rt_count_copy(RT_COPY_ISCSI, end);
        }
        LOG_DEBUG(ISCSI_MOD, "%s: ITT 0x%x got its %zu-byte buffer; %u bytes moved over%s", c->peer,
                  t->itt, len, end, receiving ? " (a PDU half read)" : "");
        cmd->buf = big;
        cmd->buf_len = (uint32_t)len;
        task_parse(t);
}

static size_t task_big_len(const struct iscsi_task *t)
{
        return min_u32(t->edtl, CORE_MAX_TRANSFER_BYTES);
}

/* The pool lent a buffer for the connection's oldest waiting task. */
static void conn_big_granted(struct rt_bigbuf_wait *w)
{
        struct iscsi_conn *c = (struct iscsi_conn *)((char *)w - offsetof(struct iscsi_conn, bw));
        struct iscsi_task *t = c->bw_head;
        c->bw_armed = false;
        c->bw_head = t->next_free;
        if (!c->bw_head)
                c->bw_tail = NULL;
        t->buf_wait = false;
        if (t->aborted || t->finished || t->state != ISCSI_TASK_RX_DATA ||
            c->state == ISCSI_CONN_CLOSING) {
                /* Over without it (aborted, or failed in its data phase). */
                rt_bigbuf_put(c->r, w->buf, w->len);
        } else {
                task_switch_big(t, w->buf, w->len);
                task_data_progress(t);
        }
        conn_bw_arm(c);
        task_put(t); /* the wait's reference */
        iscsi_conn_flush(c);
}

/* Ask the pool for the oldest waiting task's buffer (one request per connection). */
static void conn_bw_arm(struct iscsi_conn *c)
{
        if (c->bw_armed || !c->bw_head || c->state == ISCSI_CONN_CLOSING)
                return;
        c->bw.fn = conn_big_granted;
        c->bw.len = task_big_len(c->bw_head);
        if (rt_bigbuf_wait(c->r, &c->bw) == 0)
                c->bw_armed = true;
}

/*
 * A transfer above what the task's own buffer holds: borrow from the
 * reactor's pool.  HDR_OK: cmd->buf is the large buffer (or, if the pool
 * can never lend that much, still the task's: parse refuses the length).
 * HDR_PARK: the task waits for a buffer (conn_big_granted) and the
 * connection reads on; never the whole connection parked, since the
 * Data-Out that would let other tasks give their buffers back may be behind
 * this PDU.
 */
static int task_big_buffer(struct iscsi_task *t)
{
        struct iscsi_conn *c = t->conn;
        size_t want = task_big_len(t), got;
        uint8_t *b = c->bw_head ? NULL : rt_bigbuf_get(c->r, want, &got);
        if (b) {
                t->cmd.buf = b;
                t->cmd.buf_len = (uint32_t)got;
                return HDR_OK;
        }
        if (want > rt_bigbuf_capacity(c->r))
                return HDR_OK; /* never: parse refuses the length */
        t->buf_wait = true;
        t->refs++;
        t->next_free = NULL;
        if (c->bw_tail)
                c->bw_tail->next_free = t;
        else
                c->bw_head = t;
        c->bw_tail = t;
        conn_bw_arm(c);
        return HDR_PARK;
}

static struct iscsi_task *find_unsol_task(struct iscsi_conn *c, uint32_t itt)
{
        for (uint32_t i = 0; i < c->task_hw; i++) {
                struct iscsi_task *t = &c->tasks[i];
                if (t->state == ISCSI_TASK_RX_DATA && t->itt == itt && !t->unsol_done &&
                    !t->aborted)
                        return t;
        }
        return NULL;
}

static int hdr_data_out(struct iscsi_conn *c)
{
        const struct iscsi_data_out *h = (const struct iscsi_data_out *)c->bhs;
        uint32_t itt = get_be32(&h->itt), ttt = get_be32(&h->ttt);
        uint32_t off = get_be32(&h->buffer_offset), datasn = get_be32(&h->datasn);
        struct iscsi_task *t = NULL;

        c->rx_dst = NULL;
        c->rx_task = NULL;
        if (ttt == ISCSI_RESERVED_TAG) {
                t = find_unsol_task(c, itt);
                if (!t)
                        return HDR_OK; /* aborted or unknown: discard */
                if (off != t->next_off || (uint64_t)off + c->dsl > t->unsol_len ||
                    datasn != t->datasn)
                        goto bad;
        } else {
                uint32_t idx = ttt & 0xffff;
                if (idx >= c->task_hw)
                        return HDR_OK;
                t = &c->tasks[idx];
                if (t->state != ISCSI_TASK_RX_DATA || t->ttt != ttt || t->itt != itt || t->aborted)
                        return HDR_OK;
                if (off != t->next_off ||
                    (uint64_t)off + c->dsl > (uint64_t)t->r2t_off + t->r2t_len ||
                    datasn != t->datasn)
                        goto bad;
        }
        if ((uint64_t)off + c->dsl > t->cmd.buf_len)
                goto bad;
        c->rx_task = t;
        c->rx_dst = t->cmd.buf + off;
        return HDR_OK;
bad:
        /* ERL 0 offers no recovery of the sequence: the command fails with
         * ABORTED COMMAND, DATA PHASE ERROR; the rest of its data is dropped
         * and the connection stays up. */
        iscsi_conn_warn(c, "Data-Out ITT 0x%x: DataSN %u / offset %u out of sequence", itt, datasn,
                        off);
        scsi_cmd_reject_xfer(&t->cmd, SCSI_XFER_DATA_PHASE);
        t->parse_done = true;
        t->rsp_preset = true;
        t->want = 0;
        t->unsol_done = true;
        t->ttt = ISCSI_RESERVED_TAG;
        task_respond(t);
        return HDR_OK;
}

static void dispatch_data_out(struct iscsi_conn *c)
{
        struct iscsi_task *t = c->rx_task;
        const struct iscsi_data_out *h = (const struct iscsi_data_out *)c->bhs;
        if (!t)
                return;
        c->rx_task = NULL;
        t->next_off += c->dsl;
        t->datasn++;
        if (get_be32(&h->ttt) == ISCSI_RESERVED_TAG) {
                if ((h->flags & ISCSI_FLAG_FINAL) || t->next_off >= t->unsol_len) {
                        t->unsol_done = true;
                        if (t->next_off < t->unsol_len && t->next_off < t->want)
                                t->unsol_len = t->next_off;
                        t->datasn = 0;
                }
        } else if (t->next_off >= t->r2t_off + t->r2t_len) {
                t->ttt = ISCSI_RESERVED_TAG;
        }
        task_data_progress(t);
}

/* NOP-In pings (daemon_status "iscsi_nop"). */
static struct {
        atomic_uint_fast64_t sent, answered, timeouts;
} nop_stats;

/* PDUs answered through a task: NOP-Out (ping), Text, TMF, Logout, Reject. */
static int hdr_ctl(struct iscsi_conn *c, uint8_t op, bool immediate, uint32_t cmdsn, bool need_task)
{
        c->rx_dst = NULL;
        c->rx_task = NULL;
        if (!cmdsn_ok(c, immediate, cmdsn))
                return HDR_OK;
        if (!need_task) {
                cmdsn_advance(c, immediate, cmdsn);
                return HDR_OK;
        }
        struct iscsi_task *t = task_get(c, immediate);
        if (!t)
                return HDR_PARK;
        cmdsn_advance(c, immediate, cmdsn);
        t->opcode = op;
        t->itt = get_be32(&((const struct iscsi_bhs *)c->bhs)->itt);
        t->cmdsn = cmdsn;
        memcpy(t->lun_raw, ((const struct iscsi_bhs *)c->bhs)->lun, 8);
        c->rx_task = t;
        return HDR_OK;
}

static int rx_header(struct iscsi_conn *c)
{
        const struct iscsi_bhs *h = (const struct iscsi_bhs *)c->bhs;
        uint8_t op = h->opcode & ISCSI_OPCODE_MASK;
        bool immediate = h->opcode & ISCSI_OP_IMMEDIATE;
        uint32_t cmdsn = slate_be32(c->bhs + 24);
        int rc;

        c->rx_dst = NULL;
        c->rx_task = NULL;
        if (c->state == ISCSI_CONN_LOGIN) {
                if (c->text_in_len + c->dsl > ISCSI_TEXT_MAX)
                        return -EMSGSIZE;
                c->rx_dst = (uint8_t *)c->text_in + c->text_in_len;
                return HDR_OK;
        }
        /* Fault injection (core/fault.h): a drop rule may close this connection now. */
        if (core_fault_on() && !c->rx_fault_asked && c->sess &&
            c->sess->type == ISCSI_SESS_NORMAL) {
                c->rx_fault_asked = true;
                if (core_fault_conn_pdu("iscsi", c->sess->initiator, c->peer,
                                        op == ISCSI_OP_SCSI_CMD))
                        return -ECONNABORTED;
        }
        if (c->rx_unknown_op) {
                rc = hdr_ctl(c, ISCSI_OP_REJECT, true, 0, true);
                if (rc == HDR_OK && c->rx_task)
                        c->rx_task->opcode = ISCSI_OP_REJECT;
                return rc;
        }
        switch (op) {
        case ISCSI_OP_SCSI_CMD:
                return hdr_scsi_cmd(c);
        case ISCSI_OP_DATA_OUT:
                return hdr_data_out(c);
        case ISCSI_OP_NOP_OUT: {
                bool reply = get_be32(&h->itt) != ISCSI_RESERVED_TAG;
                /* The answer to our NOP-In ping (11.18.3: ITT reserved, our TTT echoed). */
                uint32_t ttt = get_be32(&((const struct iscsi_nop *)h)->ttt);
                if (!reply && c->nop_pending && ttt == c->nop_ttt) {
                        c->nop_pending = false;
                        atomic_fetch_add(&nop_stats.answered, 1);
                        iscsi_conn_guard_full(c); /* the next ping an interval from now */
                }
                rc = hdr_ctl(c, op, immediate, cmdsn, reply);
                if (rc == HDR_OK && c->rx_task)
                        c->rx_dst = c->rx_task->buf;
                return rc;
        }
        case ISCSI_OP_TEXT_REQ:
                if (c->text_in_len + c->dsl > ISCSI_TEXT_MAX)
                        return -EMSGSIZE;
                rc = hdr_ctl(c, op, immediate, cmdsn, true);
                if (rc == HDR_OK && c->rx_task)
                        c->rx_dst = (uint8_t *)c->text_in + c->text_in_len;
                return rc;
        case ISCSI_OP_TASK_MGMT_REQ:
        case ISCSI_OP_LOGOUT_REQ:
                return hdr_ctl(c, op, immediate, cmdsn, true);
        default: /* SNACK (ERL 0), Login in full feature phase */
                rc = hdr_ctl(c, op, true, 0, true);
                if (rc == HDR_OK && c->rx_task)
                        c->rx_task->opcode = ISCSI_OP_REJECT;
                return rc;
        }
}

/* ------------------------------------------------------------------ */
/* Receive: dispatch of a complete PDU                                  */

static void dispatch_nop(struct iscsi_conn *c, struct iscsi_task *t)
{
        if (!t)
                return;
        struct iscsi_nop *r = (struct iscsi_nop *)t->tx.hdr;
        memset(r, 0, sizeof(*r));
        r->opcode = ISCSI_OP_NOP_IN;
        r->flags = ISCSI_FLAG_FINAL;
        memcpy(r->lun, t->lun_raw, 8);
        put_be32(&r->itt, t->itt);
        put_be32(&r->ttt, ISCSI_RESERVED_TAG);
        iscsi_conn_fill_sn(c, &r->sn, &r->exp_sn, &r->max_cmdsn, true);
        t->tx.data = t->buf;
        t->tx.data_len = min_u32(c->dsl, c->mrdsl_out);
        task_send(t, &t->tx, ctl_tx_done);
}

static int text_key_cb(void *arg, const char *key, const char *val)
{
        struct iscsi_conn *c = arg;
        if (!strcmp(key, "SendTargets")) {
                bool discovery = c->sess->type == ISCSI_SESS_DISCOVERY;
                if (!*val && discovery)
                        return 0; /* empty SendTargets only means "this target" in a normal session
                                   */
                int rc = iscsi_send_targets(&c->text_out, val, c->sess->target_name,
                                            c->sess->initiator, &c->local, discovery);
                return rc == -ENOSPC ? 0 : rc;
        }
        int rc = iscsi_text_add(&c->text_out, key, "NotUnderstood");
        return rc == -ENOSPC ? 0 : rc;
}

static void send_text_chunk(struct iscsi_conn *c, struct iscsi_task *t)
{
        uint32_t rem = c->text_out.len - c->text_out_off;
        uint32_t len = min_u32(rem, c->mrdsl_out);
        bool more = len < rem;
        struct iscsi_text *r = (struct iscsi_text *)t->tx.hdr;
        memset(r, 0, sizeof(*r));
        r->opcode = ISCSI_OP_TEXT_RSP;
        r->flags = more ? ISCSI_FLAG_CONTINUE : ISCSI_FLAG_FINAL;
        memcpy(r->lun, t->lun_raw, 8);
        put_be32(&r->itt, t->itt);
        if (more) {
                c->text_ttt = 0x10000u | (++c->text_gen & 0xffff);
                put_be32(&r->ttt, c->text_ttt);
        } else {
                c->text_ttt = ISCSI_RESERVED_TAG;
                put_be32(&r->ttt, ISCSI_RESERVED_TAG);
        }
        iscsi_conn_fill_sn(c, &r->sn, &r->exp_sn, &r->max_cmdsn, true);
        /* The response text is copied into the task so a new request cannot change it mid-send. */
        memcpy(t->buf, c->text_out.buf + c->text_out_off, len);
        t->tx.data = t->buf;
        t->tx.data_len = len;
        c->text_out_off += len;
        if (!more) {
                c->text_out.len = 0;
                c->text_out_off = 0;
        }
        task_send(t, &t->tx, ctl_tx_done);
}

static void dispatch_text(struct iscsi_conn *c, struct iscsi_task *t)
{
        const struct iscsi_text *h = (const struct iscsi_text *)c->bhs;
        uint32_t ttt = get_be32(&h->ttt);
        c->text_in_len += c->dsl;

        if (h->flags & ISCSI_FLAG_CONTINUE) {
                /* More request text follows: answer empty (RFC 7143 11.10.2). */
                c->text_out.len = 0;
                c->text_out_off = 0;
                send_text_chunk(c, t);
                return;
        }
        if (ttt != ISCSI_RESERVED_TAG && ttt == c->text_ttt && c->text_out_off < c->text_out.len &&
            c->text_in_len == 0) {
                send_text_chunk(c, t); /* continuation of a long response */
                return;
        }
        c->text_out.len = 0;
        c->text_out_off = 0;
        if (iscsi_text_parse(c->text_in, c->text_in_len, text_key_cb, c)) {
                c->text_in_len = 0;
                send_reject(t, ISCSI_REJECT_PROTOCOL_ERROR, c->bhs);
                return;
        }
        c->text_in_len = 0;
        send_text_chunk(c, t);
}

static bool lun_exists(struct iscsi_conn *c, uint64_t lun)
{
        struct iscsi_session *s = c->sess;
        if (!s->tgt || lun >= SCSI_MAX_LUNS)
                return false;
        return atomic_load(&s->tgt->scsi.luns[lun]) != NULL;
}

static void abort_one(struct iscsi_task *x, struct iscsi_task *tmf)
{
        x->aborted = true;
        switch (x->state) {
        case ISCSI_TASK_RX_DATA:
                task_finish(x);
                break;
        case ISCSI_TASK_EXEC:
                if (tmf && !x->tmf) {
                        x->tmf = tmf;
                        tmf->tmf_wait++;
                }
                if (x->exec_pending)
                        scsi_cmd_abort(&x->cmd);
                break;
        default:
                break;
        }
}

/* Abort every SCSI task (of one LUN, or all when lun == UINT64_MAX) not already answering. */
static void abort_tasks(struct iscsi_conn *c, uint64_t lun, struct iscsi_task *tmf)
{
        for (uint32_t i = 0; i < c->task_hw; i++) {
                struct iscsi_task *x = &c->tasks[i];
                if (x == tmf || !x->is_scsi || x->finished || x->aborted)
                        continue;
                if (x->state != ISCSI_TASK_RX_DATA && x->state != ISCSI_TASK_EXEC)
                        continue;
                if (lun != UINT64_MAX && iscsi_lun_decode(x->lun_raw) != lun)
                        continue;
                abort_one(x, tmf);
        }
}

/*
 * PREEMPT AND ABORT from another I_T nexus (SPC-5 5.14.11.5): the tasks of
 * this session on lun are aborted as ABORT TASK SET would abort them, with
 * no response (TAS = 0 in the control mode page), except a task whose PDU is
 * being received right now: its data would land in a freed task, and the
 * command or write that follows is checked against the new reservation
 * anyway (parse, and core_req_submit).  Runs on the connection's reactor.
 */
void iscsi_conn_abort_lun(struct iscsi_conn *c, uint64_t lun)
{
        if (c->state != ISCSI_CONN_FULL && c->state != ISCSI_CONN_LOGOUT)
                return;
        struct iscsi_task *receiving = c->rx_state != ISCSI_RX_BHS ? c->rx_task : NULL;
        unsigned n = 0;
        for (uint32_t i = 0; i < c->task_hw; i++) {
                struct iscsi_task *x = &c->tasks[i];
                if (x == receiving || !x->is_scsi || x->finished || x->aborted)
                        continue;
                if (x->state != ISCSI_TASK_RX_DATA && x->state != ISCSI_TASK_EXEC)
                        continue;
                if (iscsi_lun_decode(x->lun_raw) != lun)
                        continue;
                abort_one(x, NULL);
                n++;
        }
        if (n)
                LOG_INFO(ISCSI_MOD, "%s: %u task(s) on LUN %llu aborted by PREEMPT AND ABORT",
                         c->peer, n, (unsigned long long)lun);
        iscsi_conn_flush(c);
}

static void dispatch_tmf(struct iscsi_conn *c, struct iscsi_task *t)
{
        const struct iscsi_tmf_req *h = (const struct iscsi_tmf_req *)c->bhs;
        uint8_t func = h->function & ISCSI_TMF_FUNC_MASK;
        uint64_t lun = iscsi_lun_decode(h->lun);
        uint32_t rtt = get_be32(&h->rtt);
        struct iscsi_session *s = c->sess;
        uint8_t resp = ISCSI_TMF_RSP_COMPLETE;

        t->tmf_wait = 0;
        if (s->type != ISCSI_SESS_NORMAL) {
                t->tmf_response = ISCSI_TMF_RSP_NOT_SUPPORTED;
                tmf_respond(t);
                return;
        }
        switch (func) {
        case ISCSI_TMF_ABORT_TASK: {
                struct iscsi_task *x = NULL;
                for (uint32_t i = 0; i < c->task_hw; i++) {
                        struct iscsi_task *y = &c->tasks[i];
                        if (y != t && y->is_scsi && y->itt == rtt && !y->finished && !y->aborted &&
                            (y->state == ISCSI_TASK_RX_DATA || y->state == ISCSI_TASK_EXEC)) {
                                x = y;
                                break;
                        }
                }
                if (!x)
                        resp = ISCSI_TMF_RSP_NO_TASK;
                else
                        abort_one(x, t);
                break;
        }
        case ISCSI_TMF_ABORT_TASK_SET:
        case ISCSI_TMF_CLEAR_TASK_SET:
                if (!lun_exists(c, lun)) {
                        resp = ISCSI_TMF_RSP_NO_LUN;
                        break;
                }
                abort_tasks(c, lun, t);
                break;
        case ISCSI_TMF_LUN_RESET:
                if (!lun_exists(c, lun)) {
                        resp = ISCSI_TMF_RSP_NO_LUN;
                        break;
                }
                abort_tasks(c, lun, t);
                scsi_lun_reset(&s->nexus, lun);
                break;
        case ISCSI_TMF_TARGET_WARM_RESET:
        case ISCSI_TMF_TARGET_COLD_RESET:
                abort_tasks(c, UINT64_MAX, t);
                scsi_target_reset(&s->nexus, func == ISCSI_TMF_TARGET_COLD_RESET);
                t->tmf_close = func == ISCSI_TMF_TARGET_COLD_RESET;
                break;
        case ISCSI_TMF_CLEAR_ACA:
                resp = ISCSI_TMF_RSP_NOT_SUPPORTED;
                break;
        case ISCSI_TMF_TASK_REASSIGN:
                resp = ISCSI_TMF_RSP_NO_REASSIGN;
                break;
        default:
                resp = ISCSI_TMF_RSP_REJECTED;
                break;
        }
        t->tmf_response = resp;
        if (t->tmf_wait == 0)
                tmf_respond(t);
}

static void dispatch_logout(struct iscsi_conn *c, struct iscsi_task *t)
{
        const struct iscsi_logout_req *h = (const struct iscsi_logout_req *)c->bhs;
        uint8_t reason = h->reason & ISCSI_LOGOUT_REASON_MASK;
        if (reason == ISCSI_LOGOUT_REMOVE_FOR_RECOVERY) {
                t->opcode = ISCSI_OP_NOP_OUT; /* answer without closing */
                send_logout_rsp(t, ISCSI_LOGOUT_RSP_RECOVERY_UNSUP);
                return;
        }
        if (reason == ISCSI_LOGOUT_CLOSE_CONNECTION && get_be16(&h->cid) != c->cid) {
                t->opcode = ISCSI_OP_NOP_OUT;
                send_logout_rsp(t, ISCSI_LOGOUT_RSP_CID_NOT_FOUND);
                return;
        }
        /* Stop reading; commands waiting for data are over; answer when the
         * commands in the backend have completed (and sent their status). */
        c->state = ISCSI_CONN_LOGOUT;
        c->rx_state = ISCSI_RX_STOP;
        c->logout_task = t;
        for (uint32_t i = 0; i < c->task_hw; i++) {
                struct iscsi_task *x = &c->tasks[i];
                if (x->is_scsi && x->state == ISCSI_TASK_RX_DATA && !x->finished) {
                        x->aborted = true;
                        task_finish(x);
                }
        }
        logout_check(c);
}

static void rx_dispatch(struct iscsi_conn *c)
{
        const struct iscsi_bhs *h = (const struct iscsi_bhs *)c->bhs;
        uint8_t op = h->opcode & ISCSI_OPCODE_MASK;
        struct iscsi_task *t = c->rx_task;

        if (c->state == ISCSI_CONN_LOGIN) {
                c->text_in_len += c->dsl;
                iscsi_login_rx(c);
                return;
        }
        if (c->rx_unknown_op) {
                c->rx_unknown_op = false;
                if (t) {
                        c->rx_task = NULL;
                        send_reject(t, ISCSI_REJECT_CMD_NOT_SUPPORTED, c->bhs);
                }
                return;
        }
        if (op == ISCSI_OP_DATA_OUT) {
                dispatch_data_out(c);
                return;
        }
        c->rx_task = NULL;
        if (!t)
                return;
        if (t->opcode == ISCSI_OP_REJECT) {
                send_reject(t,
                            op == ISCSI_OP_SCSI_CMD || op == ISCSI_OP_SNACK_REQ ||
                                    op == ISCSI_OP_LOGIN_REQ
                                ? ISCSI_REJECT_PROTOCOL_ERROR
                                : ISCSI_REJECT_CMD_NOT_SUPPORTED,
                            c->bhs);
                return;
        }
        switch (op) {
        case ISCSI_OP_SCSI_CMD:
                if (t->state == ISCSI_TASK_RX_DATA) {
                        t->next_off = c->dsl;
                        task_data_progress(t);
                }
                break;
        case ISCSI_OP_NOP_OUT:
                dispatch_nop(c, t);
                break;
        case ISCSI_OP_TEXT_REQ:
                dispatch_text(c, t);
                break;
        case ISCSI_OP_TASK_MGMT_REQ:
                dispatch_tmf(c, t);
                break;
        case ISCSI_OP_LOGOUT_REQ:
                dispatch_logout(c, t);
                break;
        default:
                send_reject(t, ISCSI_REJECT_PROTOCOL_ERROR, c->bhs);
                break;
        }
}

/* ------------------------------------------------------------------ */
/* Receive state machine                                                */

/* Read more of the current piece: 1 complete, 0 would block, -1 EOF/error. */
static int rx_fill(struct iscsi_conn *c, uint8_t *buf, uint32_t len)
{
        while (c->rx_off < len) {
                ssize_t n = rt_rxbuf_read(&c->ra, c->fd, buf + c->rx_off, len - c->rx_off);
                if (n == 0 || (n < 0 && n != -EAGAIN))
                        return -1;
                if (n < 0)
                        return 0;
                c->rx_off += (uint32_t)n;
        }
        return 1;
}

static void rx_process(struct iscsi_conn *c)
{
        int r;
        while (c->state != ISCSI_CONN_CLOSING && c->rx_state != ISCSI_RX_STOP) {
                switch (c->rx_state) {
                case ISCSI_RX_BHS: {
                        r = rx_fill(c, c->bhs, ISCSI_BHS_LEN);
                        if (r <= 0)
                                goto out;
                        struct iscsi_conn_limits lim = {
                            .login_phase = c->state == ISCSI_CONN_LOGIN,
                            .max_recv = c->mrdsl_in,
                        };
                        int rc = iscsi_pdu_check_bhs(c->bhs, &lim, &c->ahs_len, &c->dsl);
                        c->rx_unknown_op = false;
                        if (rc == -EOPNOTSUPP) {
                                iscsi_conn_warn(c, "unknown opcode 0x%02x", c->bhs[0]);
                                c->rx_unknown_op = true;
                        } else if (rc) {
                                iscsi_conn_warn(c, "bad header (opcode 0x%02x, %u data bytes)",
                                                c->bhs[0], c->dsl);
                                iscsi_conn_close(c, "protocol error");
                                return;
                        }
                        c->rx_off = 0;
                        c->rx_state = c->ahs_len   ? ISCSI_RX_AHS
                                      : c->hdigest ? ISCSI_RX_HDIGEST
                                                   : ISCSI_RX_HDR;
                        break;
                }
                case ISCSI_RX_AHS:
                        r = rx_fill(c, c->ahs, c->ahs_len);
                        if (r <= 0)
                                goto out;
                        c->rx_off = 0;
                        c->rx_state = c->hdigest ? ISCSI_RX_HDIGEST : ISCSI_RX_HDR;
                        break;
                case ISCSI_RX_HDIGEST: {
                        r = rx_fill(c, c->dig, ISCSI_DIGEST_LEN);
                        if (r <= 0)
                                goto out;
                        uint32_t crc = rt_crc32c_update(RT_CRC32C_INIT, c->bhs, ISCSI_BHS_LEN);
                        crc = rt_crc32c_final(rt_crc32c_update(crc, c->ahs, c->ahs_len));
                        if (crc != iscsi_digest_get(c->dig)) {
                                iscsi_conn_warn(c, "header digest error");
                                iscsi_conn_close(c, "header digest error");
                                return;
                        }
                        c->rx_off = 0;
                        c->rx_state = ISCSI_RX_HDR;
                        break;
                }
                case ISCSI_RX_HDR: {
                        int rc = rx_header(c);
                        if (rc == HDR_PARK)
                                return; /* resumed by rx_kick() when a task frees */
                        c->rx_fault_asked = false;
                        if (rc < 0) {
                                if (rc == -EMSGSIZE)
                                        iscsi_conn_warn(c, "text request too long");
                                iscsi_conn_close(c, rc == -ECONNABORTED
                                                        ? "fault injection: connection dropped"
                                                        : "protocol error");
                                return;
                        }
                        c->rx_off = 0;
                        c->rx_crc = RT_CRC32C_INIT;
                        c->rx_state = c->dsl ? ISCSI_RX_DATA : ISCSI_RX_DISPATCH;
                        break;
                }
                case ISCSI_RX_DATA: {
                        uint32_t before = c->rx_off;
                        if (c->rx_dst) {
                                r = rx_fill(c, c->rx_dst, c->dsl);
                                if (c->ddigest && c->rx_off > before)
                                        c->rx_crc = rt_crc32c_update(c->rx_crc, c->rx_dst + before,
                                                                     c->rx_off - before);
                        } else {
                                /* Discard through the scratch buffer, one chunk at a time. */
                                uint32_t chunk = min_u32(c->dsl - c->rx_off, sizeof(c->scratch));
                                uint32_t base = c->rx_off;
                                c->rx_off = 0;
                                r = rx_fill(c, c->scratch, chunk);
                                uint32_t got = c->rx_off;
                                if (c->ddigest && got)
                                        c->rx_crc = rt_crc32c_update(c->rx_crc, c->scratch, got);
                                c->rx_off = base + got;
                                if (r > 0 && c->rx_off < c->dsl)
                                        continue;
                        }
                        if (r <= 0)
                                goto out;
                        c->rx_off = 0;
                        if (c->dsl & 3)
                                c->rx_state = ISCSI_RX_PAD;
                        else
                                c->rx_state = c->ddigest ? ISCSI_RX_DDIGEST : ISCSI_RX_DISPATCH;
                        break;
                }
                case ISCSI_RX_PAD: {
                        uint32_t pad = 4 - (c->dsl & 3);
                        r = rx_fill(c, c->dig, pad);
                        if (r <= 0)
                                goto out;
                        if (c->ddigest)
                                c->rx_crc = rt_crc32c_update(c->rx_crc, c->dig, pad);
                        c->rx_off = 0;
                        c->rx_state = c->ddigest ? ISCSI_RX_DDIGEST : ISCSI_RX_DISPATCH;
                        break;
                }
                case ISCSI_RX_DDIGEST:
                        r = rx_fill(c, c->dig, ISCSI_DIGEST_LEN);
                        if (r <= 0)
                                goto out;
                        if (rt_crc32c_final(c->rx_crc) != iscsi_digest_get(c->dig)) {
                                /* ERL 0: no recovery within the connection. */
                                iscsi_conn_warn(c, "data digest error");
                                iscsi_conn_close(c, "data digest error");
                                return;
                        }
                        c->rx_off = 0;
                        c->rx_state = ISCSI_RX_DISPATCH;
                        break;
                case ISCSI_RX_DISPATCH:
                        c->rx_off = 0;
                        c->rx_state = ISCSI_RX_BHS;
                        c->last_rx_ns = rt_now_ns();
                        rx_dispatch(c);
                        break;
                case ISCSI_RX_STOP:
                        return;
                }
        }
        return;
out:
        if (r < 0)
                iscsi_conn_close(c, c->state == ISCSI_CONN_LOGIN ? "closed during login"
                                                                 : "closed by initiator");
}

/* ------------------------------------------------------------------ */
/* Lifetime                                                             */

/* Connections started and not yet freed (iscsi_conn_live). */
static atomic_uint live_conns;

/*
 * The connection object is its own anonymous mapping: zero-filled pages the
 * kernel backs on first touch, so the parts an idle connection never uses
 * (the read-ahead, the scratch buffer) cost no memory until bytes arrive.
 */
static struct iscsi_conn *conn_alloc(void)
{
        return rt_lazy_map(sizeof(struct iscsi_conn));
}

static void conn_release(struct iscsi_conn *c)
{
        rt_lazy_unmap(c, sizeof(*c));
}

struct iscsi_conn *iscsi_conn_new(int fd)
{
        struct iscsi_conn *c = conn_alloc();
        if (!c)
                return NULL;
        c->fd = fd;
        c->admit.bucket = -1;
        c->ev_in.fn = ev_in_fn;
        c->ev_out.fn = ev_out_fn;
        c->ev_zc.fn = ev_zc_fn;
        c->rx_defer.fn = rx_defer_fn;
        c->tx_defer.fn = tx_defer_fn;
        c->mrdsl_in = ISCSI_LOGIN_MRDSL;
        c->mrdsl_out = ISCSI_LOGIN_MRDSL;
        c->text_ttt = ISCSI_RESERVED_TAG;
        snprintf(c->peer, sizeof(c->peer), "fd%d", fd);
        c->text_in = c->text_in_buf;
        c->text_out.buf = c->text_out_buf;
        c->text_out.cap = ISCSI_TEXT_MAX;
        /* No tasks yet: a connection still logging in costs its login buffers only. */
        return c;
}

int iscsi_conn_tasks_init(struct iscsi_conn *c)
{
        if (c->tasks)
                return 0;
        /* One lazily backed region (rt/lazymap.h), the task table then the task
         * buffers, and no loop over the tasks: a connection pays for the tasks it has
         * had in flight at once, not for the whole window (144 tasks: ~0.5 MiB of table
         * alone). */
        uint32_t n = ISCSI_QUEUE_DEPTH + ISCSI_TASK_RESERVE;
        c->tasks =
            rt_lazy_pool(n, sizeof(*c->tasks), ISCSI_TASK_BUF_LEN, &c->region, &c->region_len);
        if (!c->tasks)
                return -ENOMEM;
        c->nr_tasks = n;
        c->task_hw = 0;
        c->free_tasks = NULL;
        c->nr_free = c->nr_tasks;
        return 0;
}

/*
 * A NOP-In asking for an answer (RFC 7143 11.19: ITT reserved, a TTT of
 * ours, LUN 0, StatSN not advanced).  It goes through a reserve task like
 * any immediate answer; false when none is free (the next tick retries).
 */
static bool send_nop_ping(struct iscsi_conn *c)
{
        struct iscsi_task *t = task_get(c, true);
        if (!t)
                return false;
        t->opcode = ISCSI_OP_NOP_IN;
        t->itt = ISCSI_RESERVED_TAG;
        struct iscsi_nop *r = (struct iscsi_nop *)t->tx.hdr;
        memset(r, 0, sizeof(*r));
        r->opcode = ISCSI_OP_NOP_IN;
        r->flags = ISCSI_FLAG_FINAL;
        c->nop_ttt = (c->nop_ttt + 1) & 0x7fffffffu; /* never the reserved tag */
        put_be32(&r->itt, ISCSI_RESERVED_TAG);
        put_be32(&r->ttt, c->nop_ttt);
        iscsi_conn_fill_sn(c, &r->sn, &r->exp_sn, &r->max_cmdsn, false);
        t->tx.data = t->buf;
        t->tx.data_len = 0;
        c->nop_pending = true;
        c->nop_sent_ns = rt_now_ns();
        atomic_fetch_add(&nop_stats.sent, 1);
        task_send(t, &t->tx, ctl_tx_done);
        iscsi_conn_flush(c); /* from a timer: nothing else flushes */
        return true;
}

/*
 * A normal session's guard tick: ping a quiet one, close one whose ping
 * went unanswered for nop_timeout_ms.  Re-arms itself; with pings off it
 * looks again after the default interval, so a reload turning them on (or
 * shortening the interval) takes effect within one old interval.
 */
static void guard_normal(struct iscsi_conn *c)
{
        uint32_t every = atomic_load(&rt_limits.nop_interval_ms);
        uint32_t tmo = atomic_load(&rt_limits.nop_timeout_ms);
        uint64_t now = rt_now_ns();
        if (c->nop_pending) {
                uint64_t waited_ms = (now - c->nop_sent_ns) / 1000000u;
                if (tmo && waited_ms >= tmo) {
                        char why[64];
                        snprintf(why, sizeof(why), "no answer to a NOP-In in %u ms", tmo);
                        atomic_fetch_add(&nop_stats.timeouts, 1);
                        iscsi_conn_close(c, why);
                        return;
                }
                if (tmo) {
                        rt_timer_arm(c->r, &c->guard, tmo - waited_ms);
                        return;
                }
                c->nop_pending = false; /* no timeout: a ping is never owed */
        }
        if (!every) {
                rt_timer_arm(c->r, &c->guard, RT_NOP_INTERVAL_DEFAULT_MS);
                return;
        }
        uint64_t quiet_ms = (now - c->last_rx_ns) / 1000000u;
        if (quiet_ms >= every && c->nr_free == c->nr_tasks && send_nop_ping(c)) {
                rt_timer_arm(c->r, &c->guard, tmo ? tmo : every);
                return;
        }
        rt_timer_arm(c->r, &c->guard, quiet_ms >= every ? every : every - quiet_ms);
}

void iscsi_conn_guard_full(struct iscsi_conn *c)
{
        if (!c->r || !c->sess || !c->sess->tgt)
                return;
        uint32_t every = atomic_load(&rt_limits.nop_interval_ms);
        rt_timer_cancel(c->r, &c->guard);
        rt_timer_arm(c->r, &c->guard, every ? every : RT_NOP_INTERVAL_DEFAULT_MS);
}

void iscsi_nop_stats(uint64_t *sent, uint64_t *answered, uint64_t *timeouts)
{
        *sent = atomic_load(&nop_stats.sent);
        *answered = atomic_load(&nop_stats.answered);
        *timeouts = atomic_load(&nop_stats.timeouts);
}

/*
 * The connection's guard (rt/limits.h): a login not finished by the login
 * timeout closes the connection; a discovery session idle (no PDU, nothing
 * outstanding) for the idle timeout is closed too; a normal session is
 * pinged with NOP-Ins when quiet (guard_normal).
 */
static void guard_fn(struct rt_timer *t)
{
        struct iscsi_conn *c =
            (struct iscsi_conn *)((char *)t - offsetof(struct iscsi_conn, guard));
        char why[64];
        if (c->state == ISCSI_CONN_LOGIN) {
                uint32_t login = atomic_load(&rt_limits.login_timeout_ms);
                if (!login) { /* no limit (a reload may have lifted it): look again later */
                        uint32_t idle = atomic_load(&rt_limits.idle_timeout_ms);
                        rt_timer_arm(c->r, &c->guard, idle ? idle : RT_LOGIN_TIMEOUT_DEFAULT_MS);
                        return;
                }
                snprintf(why, sizeof(why), "login not finished in %u ms", login);
                iscsi_conn_close(c, why);
                return;
        }
        if (c->state != ISCSI_CONN_FULL || !c->sess)
                return; /* closing or logging out */
        if (c->sess->tgt) {
                guard_normal(c);
                return;
        }
        uint32_t idle = atomic_load(&rt_limits.idle_timeout_ms);
        if (!idle)
                return;
        uint64_t now = rt_now_ns(), quiet_ms = (now - c->last_rx_ns) / 1000000u;
        if (quiet_ms >= idle && c->nr_free == c->nr_tasks) {
                snprintf(why, sizeof(why), "discovery session idle for %u ms", idle);
                iscsi_conn_close(c, why);
                return;
        }
        rt_timer_arm(c->r, &c->guard, quiet_ms >= idle ? idle : idle - quiet_ms);
}

void iscsi_conn_start(void *arg)
{
        struct iscsi_conn *c = arg;
        c->r = rt_current();
        c->last_rx_ns = rt_now_ns();
        c->guard.fn = guard_fn;
        uint32_t login_ms = atomic_load(&rt_limits.login_timeout_ms);
        uint32_t idle_ms = atomic_load(&rt_limits.idle_timeout_ms);
        if (login_ms || idle_ms) /* with no login limit, the first check comes after idle_ms */
                rt_timer_arm(c->r, &c->guard, login_ms ? login_ms : idle_ms);
        atomic_fetch_add(&live_conns, 1);
        rt_sock_peer_name(c->fd, c->peer, sizeof(c->peer));
        socklen_t sl = sizeof(c->local);
        getsockname(c->fd, (struct sockaddr *)&c->local, &sl);
        rt_sock_tune(c->fd);
        LOG_DEBUG(ISCSI_MOD, "%s: connection accepted", c->peer);
        arm_poll(c, false);
}

static void conn_free(struct iscsi_conn *c)
{
        if (c->r)
                rt_timer_cancel(c->r, &c->guard);
        rt_conn_release(&c->admit);
        if (c->sess)
                iscsi_session_release(c->sess);
        else if (c->login.tgt)
                iscsi_tgt_put(c->login.tgt);
        c->sess = NULL;
        c->login.tgt = NULL;
        if (c->fd >= 0)
                close(c->fd);
        bool started = c->r != NULL;
        if (c->tasks) /* the mapping: the task table, then region */
                rt_lazy_unmap(c->tasks, c->region_len);
        conn_release(c);
        if (started)
                atomic_fetch_sub(&live_conns, 1);
}

static bool conn_drained(const struct iscsi_conn *c)
{
        return !c->poll_in && !c->poll_out && !c->poll_zc && !c->rx_defer_armed &&
               !c->tx_defer_armed && c->nr_free == c->nr_tasks && rt_txq_empty(&c->txq);
}

static void close_defer_fn(struct rt_defer *d)
{
        struct iscsi_conn *c =
            (struct iscsi_conn *)((char *)d - offsetof(struct iscsi_conn, close_defer));
        c->close_deferred = false;
        if (conn_drained(c))
                conn_free(c);
}

static void conn_try_free(struct iscsi_conn *c)
{
        /* Freed from a later loop iteration, never under a caller's feet. */
        if (c->close_deferred || !conn_drained(c))
                return;
        c->close_deferred = true;
        rt_defer(c->r, &c->close_defer);
}

void iscsi_conn_close(struct iscsi_conn *c, const char *reason)
{
        if (c->state == ISCSI_CONN_CLOSING)
                return;
        c->state = ISCSI_CONN_CLOSING;
        c->rx_state = ISCSI_RX_STOP;
        c->close_defer.fn = close_defer_fn;
        snprintf(c->close_reason, sizeof(c->close_reason), "%s", reason);
        static struct rt_log_ratelimit rl = RT_LOG_RATELIMIT_INIT("iSCSI connections closed");
        if (rt_log_ratelimit(&rl, ISCSI_MOD))
                LOG_INFO(ISCSI_MOD, "%s: connection closed (%s)", c->peer, reason);
        if (c->fd >= 0)
                shutdown(c->fd, SHUT_RDWR);
        if (c->fd >= 0 && rt_txq_zc_busy(&c->txq)) {
                /* The kernel still refers to buffers about to be released: reset the
                 * connection so it drops them rather than sends them. */
                rt_txq_zc_abort(&c->txq, c->fd);
                c->fd = -1;
        }
        /* Queued PDUs will never go out: release what they hold. */
        for (struct iscsi_tx *tx; (tx = txq_pop(c));) {
                if (tx->done)
                        tx->done(c, tx);
        }
        /* Every task not inside the backend ends now; those inside end in scsi_done. */
        for (uint32_t i = 0; i < c->task_hw; i++) {
                struct iscsi_task *t = &c->tasks[i];
                if (t->state == ISCSI_TASK_FREE)
                        continue;
                t->aborted = true;
                if (!t->exec_pending)
                        task_finish(t);
                else if (t->is_scsi)
                        scsi_cmd_abort(&t->cmd);
        }
        conn_try_free(c);
}

int iscsi_conn_attach(int fd, struct rt_reactor *r)
{
        struct iscsi_conn *c = iscsi_conn_new(fd);
        if (!c)
                return -ENOMEM;
        int rc = rt_msg_send(r, iscsi_conn_start, c);
        if (rc < 0) {
                c->fd = -1; /* the caller keeps its fd */
                conn_free(c);
        }
        return rc;
}

unsigned iscsi_connections(void)
{
        return atomic_load(&live_conns);
}

unsigned iscsi_conn_live(void)
{
        return atomic_load(&live_conns);
}
