/*
 * The self-test engine (core/selftest.h): SCSI SEND DIAGNOSTIC self-tests
 * (SPC-5 5.16) and NVMe Device Self-test (NVMe Base 2.0 8.11) both run
 * here.  A test reads the medium through core_req_submit into one buffer
 * allocated when it starts, one piece at a time; between pieces it yields
 * the reactor (rt_defer) or, when paced, waits on a timer.  When a piece
 * fails it takes the first block that cannot be read from the core's
 * answer (req->info, as the media model gives it), or else reads that
 * piece again one block at a time to find it, and ends there.
 *
 * Its reads are the core's own (no nexus: reservations do not stop them;
 * CORE_REQ_SELFTEST: not counted as host I/O in the statistics, so the
 * read counters hosts see stay theirs).
 */
#include "core/selftest.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/ns.h"
#include "core/req.h"
#include "rt/log.h"

struct core_selftest {
        struct core_ns *ns;
        enum core_selftest_kind kind;
        bool background, log;
        _Atomic int abort; /* enum core_selftest_result to end with; 0 = go on */
        void (*done)(void *arg, const struct core_selftest_outcome *o);
        void *arg;
        struct rt_reactor *reactor;
        uint8_t *buf;
        uint32_t piece_blocks;
        uint64_t rate; /* bytes per second; 0 = unpaced */
        /* The pieces: the extended test walks [0, end); the short one CORE_SELFTEST_SHORT_PIECES.
         */
        uint64_t end;       /* blocks when started */
        uint64_t next_lba;  /* extended: next block to read */
        unsigned piece;     /* short: next piece */
        unsigned pieces;    /* short: how many */
        uint64_t probe_lba; /* a failed piece read again block by block: next block */
        uint64_t probe_end; /* and its end; probe_lba == probe_end: not probing */
        uint64_t probe_start;
        enum core_status probe_status;
        _Atomic uint64_t done_blocks;
        uint64_t total_blocks;
        uint64_t start_ns;
        struct core_req req;
        struct rt_timer timer;
        struct rt_defer defer;
};

static const char *const result_names[] = {
    [CORE_STR_OK] = "ok",
    [CORE_STR_ABORTED_CMD] = "aborted-by-command",
    [CORE_STR_ABORTED_RESET] = "aborted-by-reset",
    [CORE_STR_ABORTED_REMOVED] = "aborted-namespace-removed",
    [CORE_STR_ABORTED_SANITIZE] = "aborted-by-sanitize",
    [CORE_STR_ABORTED_OTHER] = "aborted",
    [CORE_STR_FAILED] = "failed",
    [CORE_STR_ERROR] = "error",
    [CORE_STR_RUNNING] = "running",
};

const char *core_selftest_result_name(enum core_selftest_result r)
{
        return (unsigned)r < sizeof(result_names) / sizeof(result_names[0]) ? result_names[r]
                                                                            : "unknown";
}

/* ---- the results log ---- */

void core_selftest_log_init(struct core_selftest_log *l)
{
        memset(l, 0, sizeof(*l));
        pthread_mutex_init(&l->lock, NULL);
        l->next_seq = 1;
}

void core_selftest_log_fini(struct core_selftest_log *l)
{
        pthread_mutex_destroy(&l->lock);
}

void core_selftest_log_add(struct core_selftest_log *l, const struct core_selftest_entry *e)
{
        pthread_mutex_lock(&l->lock);
        l->e[l->head] = *e;
        l->e[l->head].seq = l->next_seq++;
        l->head = (l->head + 1) % CORE_SELFTEST_LOG_MAX;
        if (l->n < CORE_SELFTEST_LOG_MAX)
                l->n++;
        pthread_mutex_unlock(&l->lock);
}

unsigned core_selftest_log_read(struct core_selftest_log *l, struct core_selftest_entry *out)
{
        pthread_mutex_lock(&l->lock);
        unsigned n = l->n;
        for (unsigned i = 0; i < n; i++)
                out[i] = l->e[(l->head + CORE_SELFTEST_LOG_MAX - 1 - i) % CORE_SELFTEST_LOG_MAX];
        pthread_mutex_unlock(&l->lock);
        return n;
}

static struct timespec t0;

static void set_t0(void)
{
        clock_gettime(CLOCK_MONOTONIC, &t0);
}

uint64_t core_power_on_hours(void)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        struct timespec now;
        /* The first call starts the clock: slated makes it at start-up (core_ns_create). */
        pthread_once(&once, set_t0);
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (uint64_t)(now.tv_sec - t0.tv_sec) / 3600u;
}

/* ---- informational exceptions ---- */

void core_ns_note_exception(struct core_ns *ns, enum core_exception e)
{
        atomic_store_explicit(&ns->exception, (uint8_t)e, memory_order_release);
}

enum core_exception core_ns_last_exception(const struct core_ns *ns)
{
        return (enum core_exception)atomic_load_explicit(&ns->exception, memory_order_acquire);
}

/* ---- the engine ---- */

static void step(struct core_selftest *t);

static void finish(struct core_selftest *t, const struct core_selftest_outcome *o)
{
        struct core_ns *ns = t->ns;
        void (*done)(void *, const struct core_selftest_outcome *) = t->done;
        void *arg = t->arg;
        struct core_selftest_outcome out = *o;

        if (out.result == CORE_STR_FAILED)
                core_ns_note_exception(ns, CORE_EXC_SELFTEST_FAILED);
        if (t->log) {
                struct core_selftest_entry e = {.kind = t->kind,
                                                .background = t->background,
                                                .poh = core_power_on_hours(),
                                                .o = out};
                core_selftest_log_add(&ns->selftest_log, &e);
        }
        pthread_mutex_lock(&ns->lock);
        ns->selftest = NULL;
        pthread_mutex_unlock(&ns->lock);
        if (out.result == CORE_STR_FAILED)
                LOG_WARN("core", "namespace %s: %s self-test failed at lba %llu (%s)", ns->name,
                         t->kind == CORE_ST_SHORT ? "short" : "extended",
                         (unsigned long long)out.fail_lba, core_status_name(out.status));
        else
                LOG_INFO("core", "namespace %s: %s self-test %s in %.1f s", ns->name,
                         t->kind == CORE_ST_SHORT ? "short" : "extended",
                         core_selftest_result_name(out.result), (rt_now_ns() - t->start_ns) / 1e9);
        free(t->buf);
        free(t);
        if (done)
                done(arg, &out);
        core_ns_put(ns);
}

static void end_with(struct core_selftest *t, enum core_selftest_result r)
{
        struct core_selftest_outcome o = {.result = r};
        finish(t, &o);
}

/* Statuses that say the namespace's state stopped the read, not its medium. */
static enum core_selftest_result state_abort(enum core_status st)
{
        switch (st) {
        case CORE_E_SANITIZE_IN_PROGRESS:
        case CORE_E_SANITIZE_FAILED:
                return CORE_STR_ABORTED_SANITIZE;
        case CORE_E_NOT_READY:
        case CORE_E_NO_MEDIUM:
        case CORE_E_LBA_RANGE: /* shrunk under the test */
        case CORE_E_ABORTED:
                return CORE_STR_ABORTED_OTHER;
        case CORE_E_NO_RESOURCES:
        case CORE_E_INTERNAL:
                return CORE_STR_ERROR;
        default:
                return CORE_STR_OK; /* the medium's own failure */
        }
}

static void read_piece(struct core_selftest *t, uint64_t lba, uint32_t nlb);

static void req_done(struct core_req *req)
{
        struct core_selftest *t = req->cb_arg;
        struct core_ns *ns = t->ns;

        if (req->status != CORE_OK) {
                enum core_selftest_result a = state_abort(req->status);
                if (a != CORE_STR_OK) {
                        end_with(t, a);
                        return;
                }
                /* The core said which block (the media model does): no need to look. */
                if (req->info_valid && req->info >= req->lba && req->info - req->lba < req->nlb) {
                        struct core_selftest_outcome o = {.result = CORE_STR_FAILED,
                                                          .fail_lba = req->info,
                                                          .status = req->status,
                                                          .segment = 1};
                        finish(t, &o);
                        return;
                }
                if (req->nlb == 1) {
                        /* The first block of the piece that cannot be read. */
                        struct core_selftest_outcome o = {.result = CORE_STR_FAILED,
                                                          .fail_lba = req->lba,
                                                          .status = req->status,
                                                          .segment = 1};
                        finish(t, &o);
                        return;
                }
                /* Read that piece again, block by block, to find where it fails. */
                t->probe_start = t->probe_lba = req->lba;
                t->probe_end = req->lba + req->nlb;
                t->probe_status = req->status;
        } else if (t->probe_lba != t->probe_end) {
                t->probe_lba++;
                if (t->probe_lba == t->probe_end) {
                        /* Every block read alone: the failure came and went; report it so. */
                        struct core_selftest_outcome o = {.result = CORE_STR_FAILED,
                                                          .fail_lba = t->probe_start,
                                                          .status = t->probe_status,
                                                          .segment = 1};
                        finish(t, &o);
                        return;
                }
        } else {
                atomic_fetch_add_explicit(&t->done_blocks, req->nlb, memory_order_relaxed);
        }
        uint64_t now = rt_now_ns(), due = now;
        if (t->rate) {
                unsigned __int128 b = (unsigned __int128)atomic_load(&t->done_blocks)
                                      << ns->block_shift;
                due = t->start_ns + (uint64_t)(b * 1000000000u / t->rate);
        }
        if (due > now + 1000000u) {
                rt_timer_arm(t->reactor, &t->timer, (due - now) / 1000000u);
                return;
        }
        rt_defer(t->reactor, &t->defer);
}

static void on_timer(struct rt_timer *tm)
{
        step((struct core_selftest *)((char *)tm - offsetof(struct core_selftest, timer)));
}

static void on_defer(struct rt_defer *d)
{
        step((struct core_selftest *)((char *)d - offsetof(struct core_selftest, defer)));
}

static void read_piece(struct core_selftest *t, uint64_t lba, uint32_t nlb)
{
        struct core_req *r = &t->req;
        core_req_init(r, t->ns, CORE_OP_READ, lba, nlb, CORE_REQ_SELFTEST, t->reactor, req_done, t);
        r->iov[0].iov_base = t->buf;
        r->iov[0].iov_len = (size_t)nlb << t->ns->block_shift;
        r->iovcnt = 1;
        core_req_submit(r);
}

/* Where short-test piece i starts: spread evenly, the first at 0, the last ending at the end. */
static uint64_t short_piece_lba(const struct core_selftest *t, unsigned i)
{
        if (t->pieces <= 1)
                return 0;
        uint64_t span = t->end - t->piece_blocks;
        return (uint64_t)((unsigned __int128)span * i / (t->pieces - 1));
}

static void step(struct core_selftest *t)
{
        int why = atomic_load_explicit(&t->abort, memory_order_acquire);
        if (why) {
                end_with(t, (enum core_selftest_result)why);
                return;
        }
        if (t->probe_lba != t->probe_end) {
                read_piece(t, t->probe_lba, 1);
                return;
        }
        if (t->kind == CORE_ST_EXTENDED) {
                if (t->next_lba >= t->end) {
                        end_with(t, CORE_STR_OK);
                        return;
                }
                uint64_t left = t->end - t->next_lba;
                uint32_t n = (uint32_t)(left < t->piece_blocks ? left : t->piece_blocks);
                uint64_t lba = t->next_lba;
                t->next_lba += n;
                read_piece(t, lba, n);
                return;
        }
        if (t->piece >= t->pieces) {
                end_with(t, CORE_STR_OK);
                return;
        }
        uint64_t lba = short_piece_lba(t, t->piece++);
        uint64_t left = t->end - lba;
        read_piece(t, lba, (uint32_t)(left < t->piece_blocks ? left : t->piece_blocks));
}

int core_selftest_start(struct core_ns *ns, enum core_selftest_kind kind, bool background, bool log,
                        struct rt_reactor *r,
                        void (*done)(void *arg, const struct core_selftest_outcome *o), void *arg)
{
        if (kind != CORE_ST_SHORT && kind != CORE_ST_EXTENDED)
                return -EINVAL;
        struct core_selftest *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        uint64_t blocks = core_ns_blocks(ns);
        uint64_t piece = CORE_SELFTEST_PIECE_BYTES >> ns->block_shift;
        if (piece > blocks)
                piece = blocks ? blocks : 1;
        t->buf = malloc((size_t)piece << ns->block_shift);
        if (!t->buf) {
                free(t);
                return -ENOMEM;
        }
        t->ns = ns;
        t->kind = kind;
        t->background = background;
        t->log = log;
        t->done = done;
        t->arg = arg;
        t->reactor = r;
        t->piece_blocks = (uint32_t)piece;
        t->end = blocks;
        t->rate = (uint64_t)ns->selftest_rate_mibps << 20;
        if (kind == CORE_ST_SHORT) {
                uint64_t all = blocks / piece;
                t->pieces =
                    all < CORE_SELFTEST_SHORT_PIECES ? (unsigned)all : CORE_SELFTEST_SHORT_PIECES;
                if (t->pieces == 0 && blocks)
                        t->pieces = 1;
                t->total_blocks = (uint64_t)t->pieces * piece;
        } else {
                t->total_blocks = blocks;
        }
        if (!t->total_blocks)
                t->total_blocks = 1;
        t->timer.fn = on_timer;
        t->defer.fn = on_defer;
        pthread_mutex_lock(&ns->lock);
        if (ns->selftest) {
                pthread_mutex_unlock(&ns->lock);
                free(t->buf);
                free(t);
                return -EBUSY;
        }
        ns->selftest = t;
        pthread_mutex_unlock(&ns->lock);
        core_ns_get(ns);
        t->start_ns = rt_now_ns();
        LOG_INFO("core", "namespace %s: %s %s self-test started", ns->name,
                 background ? "background" : "foreground",
                 kind == CORE_ST_SHORT ? "short" : "extended");
        rt_defer(r, &t->defer);
        return 0;
}

int core_selftest_abort(struct core_ns *ns, enum core_selftest_result why)
{
        int rc = -ENOENT;
        pthread_mutex_lock(&ns->lock);
        if (ns->selftest) {
                int zero = 0;
                atomic_compare_exchange_strong(&ns->selftest->abort, &zero, (int)why);
                rc = 0;
        }
        pthread_mutex_unlock(&ns->lock);
        return rc;
}

bool core_selftest_running(struct core_ns *ns, enum core_selftest_kind *kind, bool *background,
                           unsigned *percent)
{
        bool on = false;
        pthread_mutex_lock(&ns->lock);
        struct core_selftest *t = ns->selftest;
        if (t) {
                on = true;
                if (kind)
                        *kind = t->kind;
                if (background)
                        *background = t->background;
                if (percent) {
                        uint64_t d = atomic_load_explicit(&t->done_blocks, memory_order_relaxed);
                        *percent = (unsigned)(d * 100 / t->total_blocks);
                        if (*percent > 99)
                                *percent = 99; /* 100 only once it ended */
                }
        }
        pthread_mutex_unlock(&ns->lock);
        return on;
}

unsigned core_selftest_results(struct core_ns *ns, struct core_selftest_entry *out)
{
        return core_selftest_log_read(&ns->selftest_log, out);
}
