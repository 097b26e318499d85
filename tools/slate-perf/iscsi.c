/*
 * slate-perf's iSCSI transport: libiscsi's asynchronous API (RFC 7143
 * sessions, SBC-4 READ(16)/WRITE(16)) driven from one poll() loop per
 * connection with iscsi_which_events()/iscsi_service().  Each worker logs in
 * its own session (libiscsi picks a random ISID per context, so sessions do
 * not reinstate each other) and keeps the queue depth full; data moves
 * between the socket and per-slot buffers through libiscsi's iovec task
 * variants, so this file allocates nothing per I/O (libiscsi itself does
 * allocate its task and PDU structures).  libiscsi negotiates header digests
 * but has no data digest.  No standard section of our own.
 */
#include "perf.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * libiscsi installs <iscsi/iscsi.h>, but under the project's -Isrc that name
 * is our own src/iscsi/iscsi.h.  The meson build adds libiscsi's header
 * folder itself; a bare compile with only the system paths reaches the same
 * files through /usr/include.
 */
#if __has_include(<scsi-lowlevel.h>)
#include <iscsi.h>
#include <scsi-lowlevel.h>
#else
#include <../include/iscsi/iscsi.h>
#include <../include/iscsi/scsi-lowlevel.h>
#endif

#define ISCSI_PERF_INITIATOR "iqn.2026-12.io.slate:slate-perf"
#define ISCSI_DRAIN_S        10

struct iscsi_tctx {
        char portal[512];
        char target[512];
        int lun;
        uint16_t stream[2]; /* --place stream: the ids STREAM CONTROL assigned (tags 1, 2) */
        const struct perf_opts *o;
};

/*
 * STREAM CONTROL (SBC-4 5.27, 9Eh/14h): OPEN (STR_CTL 01b) returns the
 * assigned stream id in bytes 4-5 of its parameter data; CLOSE (10b) the
 * stream STR_ID names.  0, or -EIO with a message.
 */
static int stream_control(struct iscsi_context *ctx, int lun, bool open, uint16_t *id)
{
        unsigned char cdb[16] = {0x9e, (unsigned char)(0x14 | (open ? 1 : 2) << 5)};
        if (!open) {
                cdb[4] = (unsigned char)(*id >> 8);
                cdb[5] = (unsigned char)*id;
        }
        cdb[13] = open ? 8 : 0; /* ALLOCATION LENGTH (bytes 10-13) */
        struct scsi_task *task =
            scsi_create_task(16, cdb, open ? SCSI_XFER_READ : SCSI_XFER_NONE, open ? 8 : 0);
        if (!task)
                return -ENOMEM;
        int rc = 0;
        if (!iscsi_scsi_command_sync(ctx, lun, task, NULL) || task->status != SCSI_STATUS_GOOD ||
            (open && task->datain.size < 6)) {
                fprintf(stderr, "slate-perf: STREAM CONTROL %s failed: %s\n",
                        open ? "OPEN" : "CLOSE", iscsi_get_error(ctx));
                rc = -EIO;
        } else if (open) {
                *id = (uint16_t)(task->datain.data[4] << 8 | task->datain.data[5]);
        }
        scsi_free_scsi_task(task);
        return rc;
}

static struct iscsi_context *iscsi_login(const struct perf_opts *o, struct iscsi_tctx *t, char *err,
                                         size_t errlen)
{
        struct iscsi_context *ctx = iscsi_create_context(ISCSI_PERF_INITIATOR);
        if (!ctx) {
                snprintf(err, errlen, "cannot create an iSCSI context");
                return NULL;
        }
        struct iscsi_url *url = iscsi_parse_full_url(ctx, o->url);
        if (!url) {
                snprintf(err, errlen, "bad iSCSI URL %.200s: %.200s", o->url, iscsi_get_error(ctx));
                goto fail;
        }
        snprintf(t->portal, sizeof(t->portal), "%s", url->portal);
        snprintf(t->target, sizeof(t->target), "%s", url->target);
        t->lun = url->lun;
        iscsi_destroy_url(url);
        iscsi_set_session_type(ctx, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(ctx,
                                o->hdgst ? ISCSI_HEADER_DIGEST_CRC32C : ISCSI_HEADER_DIGEST_NONE);
        iscsi_set_targetname(ctx, t->target);
        iscsi_set_noautoreconnect(ctx, 1);
        if (iscsi_full_connect_sync(ctx, t->portal, t->lun) != 0) {
                snprintf(err, errlen, "login to %.200s at %.100s failed: %.200s", t->target,
                         t->portal, iscsi_get_error(ctx));
                goto fail;
        }
        return ctx;
fail:
        iscsi_destroy_context(ctx);
        return NULL;
}

static int iscsi_probe(const struct perf_opts *o, struct perf_geom *g, void **tctx)
{
        struct iscsi_tctx *t = calloc(1, sizeof(*t));
        char err[600];
        if (!t)
                return -ENOMEM;
        struct iscsi_context *ctx = iscsi_login(o, t, err, sizeof(err));
        if (!ctx) {
                fprintf(stderr, "slate-perf: %s\n", err);
                free(t);
                return -ECONNREFUSED;
        }
        int rc = 0;
        struct scsi_task *task = iscsi_readcapacity16_sync(ctx, t->lun);
        struct scsi_readcapacity16 *rc16 = NULL;
        if (!task || task->status != SCSI_STATUS_GOOD || !(rc16 = scsi_datain_unmarshall(task))) {
                fprintf(stderr, "slate-perf: READ CAPACITY(16) failed: %s\n", iscsi_get_error(ctx));
                rc = -EIO;
        } else if (rc16->block_length < 512 || rc16->block_length > 65536) {
                fprintf(stderr, "slate-perf: unusable block length %u\n", rc16->block_length);
                rc = -EIO;
        } else {
                g->lba_size = rc16->block_length;
                g->nblocks = rc16->returned_lba + 1;
                g->max_io = 0;
                /*
                 * --pi: the LU's protection (READ CAPACITY(16) PROT_EN,
                 * P_TYPE, P_I_EXPONENT), 8 bytes per interval after the
                 * data; WRPROTECT/RDPROTECT 001b carry it (SBC-4 4.22).
                 * Type 2 needs the 32-byte CDBs: not here.
                 */
                if (o->pi && !rc16->prot_en) {
                        fprintf(stderr, "slate-perf: --pi: the LU has no protection information\n");
                        rc = -ENOTSUP;
                } else if (o->pi && rc16->p_type == 1) {
                        fprintf(stderr, "slate-perf: --pi: type 2 needs READ/WRITE(32)\n");
                        rc = -ENOTSUP;
                } else if (o->pi) {
                        g->pi = (struct core_pi_fmt){.block_size = g->lba_size,
                                                     .md_size = 8,
                                                     .type = (uint8_t)(rc16->p_type + 1),
                                                     .guard = CORE_PI_GUARD_CRC16,
                                                     .pi_exp = rc16->p_i_exp};
                        char why[128];
                        if (core_pi_fmt_check(&g->pi, why, sizeof(why))) {
                                fprintf(stderr, "slate-perf: --pi: %s\n", why);
                                rc = -ENOTSUP;
                        }
                        g->md_size = (uint32_t)core_pi_md_per_block(&g->pi);
                }
                snprintf(g->desc, sizeof(g->desc), "%.200s lun %d (%llu x %u B)", t->target, t->lun,
                         (unsigned long long)g->nblocks, g->lba_size);
        }
        if (task)
                scsi_free_scsi_task(task);
        /* --place stream: one stream per lifetime, opened for the whole run. */
        t->o = o;
        for (unsigned i = 0; i < 2 && !rc && o->place == PERF_PLACE_STREAM; i++)
                rc = stream_control(ctx, t->lun, true, &t->stream[i]);
        if (o->verbose && o->place == PERF_PLACE_STREAM && !rc)
                fprintf(stderr, "slate-perf: streams %u (hot) and %u (cold) opened\n", t->stream[0],
                        t->stream[1]);
        iscsi_logout_sync(ctx);
        iscsi_destroy_context(ctx);
        if (rc) {
                free(t);
                return rc;
        }
        if (o->verbose)
                fprintf(stderr, "slate-perf: %s\n", g->desc);
        *tctx = t;
        return 0;
}

struct iscsi_slot {
        struct iscsi_worker *iw;
        struct scsi_iovec iov;
        uint64_t start_ns;
        uint64_t lba;
        bool write;
};

struct iscsi_worker {
        struct perf_worker *w;
        struct iscsi_context *ctx;
        struct iscsi_tctx *t;
        struct iscsi_slot *slots;
        unsigned outstanding;
        bool running;
        bool reported;
};

static void slot_submit(struct iscsi_slot *s);

static void slot_done(struct iscsi_context *ctx, int status, void *command_data, void *private)
{
        struct iscsi_slot *s = private;
        struct iscsi_worker *iw = s->iw;
        struct scsi_task *task = command_data;
        (void)ctx;
        bool ok = status == SCSI_STATUS_GOOD;
        struct perf_worker *w = iw->w;
        if (ok && !s->write && w->o->pi &&
            perf_pi_check(w, s->iov.iov_base, w->bs / w->g->lba_size, s->lba) != 0)
                ok = false; /* counted in pi_host */
        /* ABORTED COMMAND, LOGICAL BLOCK GUARD / APPLICATION TAG / REFERENCE TAG CHECK FAILED */
        if (status == SCSI_STATUS_CHECK_CONDITION && task &&
            task->sense.key == SCSI_SENSE_COMMAND_ABORTED) {
                if (task->sense.ascq == 0x1001)
                        w->st.pi_guard++;
                else if (task->sense.ascq == 0x1002)
                        w->st.pi_app++;
                else if (task->sense.ascq == 0x1003)
                        w->st.pi_ref++;
        }
        if (!ok && !iw->reported) {
                iw->reported = true;
                fprintf(stderr, "slate-perf: connection %u: %s failed: %s\n", iw->w->id,
                        s->write ? "write" : "read", iscsi_get_error(iw->ctx));
        }
        if (task)
                scsi_free_scsi_task(task);
        iw->outstanding--;
        if (status == SCSI_STATUS_CANCELLED)
                return;
        if (perf_io_done(iw->w, s->write, s->start_ns, perf_now_ns(), ok) && iw->running)
                slot_submit(s);
        else
                iw->running = false;
}

static void slot_submit(struct iscsi_slot *s)
{
        struct iscsi_worker *iw = s->iw;
        struct perf_worker *w = iw->w;
        struct perf_io io;
        perf_next_io(w, &io);
        s->write = io.write;
        s->lba = io.lba;
        /* --pi: each block's data followed by its protection information */
        uint32_t nlb = w->bs / w->g->lba_size, ext = w->g->lba_size + w->g->md_size;
        s->iov.iov_len = (size_t)nlb * ext;
        s->start_ns = perf_now_ns();
        struct scsi_task *task;
        if (w->o->pi && io.write) {
                perf_pi_fill(w, s->iov.iov_base, nlb, io.lba, 0);
                task = iscsi_write16_iov_task(iw->ctx, iw->t->lun, io.lba, NULL,
                                              (uint32_t)s->iov.iov_len, (int)ext, 1, 0, 0, 0, 0,
                                              slot_done, s, &s->iov, 1);
        } else if (w->o->pi) {
                task = iscsi_read16_iov_task(iw->ctx, iw->t->lun, io.lba, (uint32_t)s->iov.iov_len,
                                             (int)ext, 1, 0, 0, 0, 0, slot_done, s, &s->iov, 1);
        } else if (io.write && w->tag && w->o->place == PERF_PLACE_STREAM) {
                /* WRITE STREAM(16) (SBC-4 5.53): LBA 2-9, STR_ID 10-11, TRANSFER LENGTH 12-13 */
                uint16_t sid = iw->t->stream[w->tag - 1];
                unsigned char cdb[16] = {0x9a};
                for (int i = 0; i < 8; i++)
                        cdb[2 + i] = (unsigned char)(io.lba >> (56 - 8 * i));
                cdb[10] = (unsigned char)(sid >> 8);
                cdb[11] = (unsigned char)sid;
                cdb[12] = (unsigned char)(nlb >> 8);
                cdb[13] = (unsigned char)nlb;
                task = scsi_create_task(16, cdb, SCSI_XFER_WRITE, (int)w->bs);
                if (task) {
                        scsi_task_set_iov_out(task, &s->iov, 1);
                        if (iscsi_scsi_command_async(iw->ctx, iw->t->lun, task, slot_done, NULL,
                                                     s)) {
                                scsi_free_scsi_task(task);
                                task = NULL;
                        }
                }
        } else if (io.write) {
                /* --place group: GROUP NUMBER (byte 14 bits 5:0) = the worker's tag */
                task = iscsi_write16_iov_task(
                    iw->ctx, iw->t->lun, io.lba, NULL, w->bs, (int)w->g->lba_size, 0, 0, 0, 0,
                    w->o->place == PERF_PLACE_GROUP ? w->tag : 0, slot_done, s, &s->iov, 1);
        } else {
                task =
                    iscsi_read16_iov_task(iw->ctx, iw->t->lun, io.lba, w->bs, (int)w->g->lba_size,
                                          0, 0, 0, 0, 0, slot_done, s, &s->iov, 1);
        }
        if (!task) {
                if (!w->rc) {
                        snprintf(w->err, sizeof(w->err), "cannot queue a SCSI command: %s",
                                 iscsi_get_error(iw->ctx));
                        w->rc = -EIO;
                }
                iw->running = false;
                return;
        }
        iw->outstanding++;
}

static void iscsi_worker(struct perf_worker *w)
{
        const struct perf_opts *o = w->o;
        struct iscsi_worker iw = {.w = w, .t = w->tctx};
        char err[600];
        iw.ctx = iscsi_login(o, iw.t, err, sizeof(err));
        if (!iw.ctx) {
                perf_worker_fail(w, -ECONNREFUSED, "%s", err);
                return;
        }
        iw.slots = calloc(o->qd, sizeof(*iw.slots));
        if (!iw.slots) {
                perf_worker_fail(w, -ENOMEM, "out of memory");
                goto out;
        }
        for (unsigned i = 0; i < o->qd; i++) {
                iw.slots[i].iw = &iw;
                size_t len = w->bs + (size_t)(w->bs / w->g->lba_size) * w->g->md_size;
                if (posix_memalign(&iw.slots[i].iov.iov_base, 4096, len)) {
                        perf_worker_fail(w, -ENOMEM, "out of memory");
                        goto out;
                }
                perf_fill_pattern(iw.slots[i].iov.iov_base, (uint32_t)len,
                                  ((uint64_t)w->id << 32) | i);
        }
        if (perf_worker_ready(w))
                goto out;
        iw.running = true;
        for (unsigned i = 0; i < o->qd && iw.running; i++)
                slot_submit(&iw.slots[i]);
        uint64_t drain_deadline = 0;
        bool worked = true; /* the socket was ready at the last look */
        while (!w->rc) {
                uint64_t now = perf_now_ns();
                if (!perf_running(now)) {
                        iw.running = false;
                        if (!iw.outstanding)
                                break;
                        if (!drain_deadline)
                                drain_deadline = now + (uint64_t)ISCSI_DRAIN_S * 1000000000u;
                        else if (now > drain_deadline) {
                                snprintf(w->err, sizeof(w->err),
                                         "%u I/Os still outstanding %d s after the run",
                                         iw.outstanding, ISCSI_DRAIN_S);
                                w->rc = -ETIMEDOUT;
                                break;
                        }
                }
                struct pollfd pfd = {.fd = iscsi_get_fd(iw.ctx),
                                     .events = (short)iscsi_which_events(iw.ctx)};
                /*
                 * Polling modes look without sleeping first, and sleep only
                 * when perf_poll_spin says so; off sleeps in poll() at once.
                 */
                int n = 0;
                if (o->poll != PERF_POLL_OFF)
                        n = poll(&pfd, 1, 0);
                if (n == 0 && !perf_poll_spin(w, worked, now))
                        n = poll(&pfd, 1, 100);
                worked = n > 0; /* a completion or a send follows (libiscsi's service) */
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        snprintf(w->err, sizeof(w->err), "poll: %s", strerror(errno));
                        w->rc = -errno;
                        break;
                }
                if (iscsi_service(iw.ctx, n > 0 ? pfd.revents : 0) < 0) {
                        snprintf(w->err, sizeof(w->err), "iSCSI connection failed: %s",
                                 iscsi_get_error(iw.ctx));
                        w->rc = -EIO;
                        break;
                }
        }
        if (w->rc)
                atomic_fetch_add(&perf_run.failed, 1);
        else
                iscsi_logout_sync(iw.ctx);
out:
        iscsi_destroy_context(iw.ctx);
        if (iw.slots)
                for (unsigned i = 0; i < o->qd; i++)
                        free(iw.slots[i].iov.iov_base);
        free(iw.slots);
}

static void iscsi_close(void *tctx)
{
        struct iscsi_tctx *t = tctx;
        if (t && t->o->place == PERF_PLACE_STREAM) { /* close the streams the probe opened */
                char err[600];
                struct iscsi_context *ctx = iscsi_login(t->o, t, err, sizeof(err));
                if (ctx) {
                        for (unsigned i = 0; i < 2; i++)
                                if (t->stream[i])
                                        stream_control(ctx, t->lun, false, &t->stream[i]);
                        iscsi_logout_sync(ctx);
                        iscsi_destroy_context(ctx);
                }
        }
        free(tctx);
}

const struct perf_transport perf_iscsi = {
    .name = "iscsi",
    .probe = iscsi_probe,
    .worker = iscsi_worker,
    .close = iscsi_close,
};
