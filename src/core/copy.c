/*
 * The core copy engine (core/copy.h): NVMe Copy (NVM Command Set 1.0
 * 3.3.2) and SCSI EXTENDED COPY / WRITE USING TOKEN (SPC-4 6.3, 6.6; SBC-4
 * 5.47) are both this.  A copy is a list of ranges walked in order, each
 * in chunks: every chunk is checked against the namespaces' state again
 * (the same checks as the up-front pass), so a copy that meets a write
 * protection, a sanitize or a reservation half way stops there with the
 * status a read or write would have got.
 *
 * Two ways to move a chunk:
 *  - offload: both namespaces on a backend with a copy op (file:
 *    copy_file_range, a reflink on XFS/btrfs).  The call blocks, so it
 *    runs on one of a few core worker threads; the worker hands the chunk
 *    back to the copy's reactor with rt_defer_remote (no allocation).
 *  - buffered: a read of the source into a chunk buffer and a write of
 *    it to the destination, through core_req_submit like any host I/O.
 *    Each reactor has a fixed set of chunk buffers (allocated once, on
 *    first use); a copy holds one only for the chunk in flight and, when
 *    none is free, parks until one is handed to it.
 *
 * Overlap inside one range (same namespace): the chunks walk from the end
 * when the destination lies after the source, so every source block is
 * read before anything overwrites it (memmove); an offloaded chunk is at
 * most the distance between the two (copy_file_range refuses overlapping
 * ranges of one file).
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/copy.h"
#include "core/ns.h"
#include "rt/log.h"

#define COPY_CHUNK_BYTES         (1u << 20)  /* buffered: one read + one write */
#define COPY_BUFS_PER_REACTOR    4u          /* buffered chunks in flight per reactor */
#define COPY_OFFLOAD_CHUNK_BYTES (32u << 20) /* offload: one copy_file_range, cancel granule */
#define COPY_WORKERS             2u
#define COPY_MAX_REACTORS        1024u

enum {
        ST_IDLE = 0,
        ST_PARKED, /* waiting for a chunk buffer */
        ST_READ,   /* buffered: source read in flight */
        ST_WRITE,  /* buffered: destination write in flight */
        ST_WORKER, /* offload: chunk on a worker thread */
        ST_FLUSH,  /* FUA: flushing a destination */
        ST_DONE,
};

/* ---- per-reactor chunk buffers (touched only by their reactor) ---- */

struct copy_pool {
        void *free[COPY_BUFS_PER_REACTOR];
        unsigned nfree;
        struct core_copy *wait_head, *wait_tail;
};

static struct copy_pool *_Atomic pools[COPY_MAX_REACTORS];

static struct copy_pool *pool_of(struct rt_reactor *r)
{
        unsigned i = rt_index(r);
        if (i >= COPY_MAX_REACTORS)
                return NULL;
        struct copy_pool *p = atomic_load_explicit(&pools[i], memory_order_acquire);
        if (p)
                return p;
        /* Once per reactor, the first time it copies: never on the per-I/O path again. */
        p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        for (unsigned k = 0; k < COPY_BUFS_PER_REACTOR; k++) {
                void *b = NULL;
                if (posix_memalign(&b, 4096, COPY_CHUNK_BYTES))
                        break;
                p->free[p->nfree++] = b;
        }
        if (p->nfree == 0) {
                free(p);
                return NULL;
        }
        atomic_store_explicit(&pools[i], p, memory_order_release);
        return p;
}

static void on_step(struct rt_defer *d);

static void pool_put(struct core_copy *c)
{
        struct copy_pool *p = pool_of(c->reactor);
        void *b = c->buf;
        c->buf = NULL;
        if (!b || !p)
                return;
        struct core_copy *w = p->wait_head;
        if (w) {
                /* Straight to the longest waiter: no copy starves. */
                p->wait_head = w->wait_next;
                if (!p->wait_head)
                        p->wait_tail = NULL;
                w->wait_next = NULL;
                w->buf = b;
                w->stage = ST_IDLE;
                w->defer.fn = on_step;
                rt_defer(w->reactor, &w->defer);
                return;
        }
        p->free[p->nfree++] = b;
}

/* A buffer for c now (true), or c parked until pool_put hands it one (false). */
static bool pool_get(struct core_copy *c, enum core_status *st)
{
        struct copy_pool *p = pool_of(c->reactor);
        *st = CORE_OK;
        if (!p) {
                *st = CORE_E_NO_RESOURCES;
                return false;
        }
        if (p->nfree) {
                c->buf = p->free[--p->nfree];
                return true;
        }
        c->stage = ST_PARKED;
        c->wait_next = NULL;
        if (p->wait_tail)
                p->wait_tail->wait_next = c;
        else
                p->wait_head = c;
        p->wait_tail = c;
        return false;
}

/* ---- worker threads for blocking offload (core/worker.h) ---- */

static struct core_workers copy_workers = CORE_WORKERS_INIT("core_copy", COPY_WORKERS);

static struct core_copy *copy_of_work(struct core_work *w)
{
        return (struct core_copy *)((char *)w - offsetof(struct core_copy, job.work));
}

/* On a worker thread: one chunk through the backend's copy (copy_file_range). */
static void copy_chunk_run(struct core_work *w)
{
        struct core_copy *c = copy_of_work(w);
        const struct core_copy_range *r = &c->ranges[c->cur];
        uint64_t done = 0;
        int res = 0;
        while (done < c->job.len) {
                int64_t n = r->dst->be.ops->copy(&r->dst->be, c->job.dst_off + done, &r->src->be,
                                                 c->job.src_off + done, c->job.len - done);
                if (n < 0) {
                        res = (int)n;
                        break;
                }
                done += (uint64_t)n;
                /* Progress per call, not per chunk: a reflink-less chunk takes a while. */
                c->job.progress += (uint64_t)n;
                atomic_fetch_add_explicit(&r->dst->copy_stats.active_done, (uint64_t)n,
                                          memory_order_relaxed);
        }
        c->job.res = done == c->job.len ? 0 : (res ? res : -EIO);
        if (res && done)
                c->job.res = -EIO; /* part copied: not a refusal we can fall back from */
}

/* ---- the copy ---- */

static void fire_cb(struct rt_defer *d)
{
        struct core_copy *c = (struct core_copy *)((char *)d - offsetof(struct core_copy, defer));
        c->cb(c);
}

/* Take the copy's bytes back out of its destinations' active_* (success or not). */
static void active_end(struct core_copy *c)
{
        if (!c->active)
                return;
        c->active = false;
        for (unsigned i = 0; i < c->nranges; i++) {
                const struct core_copy_range *r = &c->ranges[i];
                uint64_t total = r->nlb << r->dst->block_shift, done = 0;
                if (i < c->cur)
                        done = total;
                else if (i == c->cur)
                        done = (c->cur_done << r->dst->block_shift) + c->job.progress;
                atomic_fetch_sub_explicit(&r->dst->copy_stats.active_done, done,
                                          memory_order_relaxed);
                atomic_fetch_sub_explicit(&r->dst->copy_stats.active_bytes, total,
                                          memory_order_relaxed);
        }
}

/* The same metadata format on both (none on both included). */
static bool same_md_fmt(const struct core_ns *a, const struct core_ns *b)
{
        struct core_pi_fmt fa, fb;
        core_ns_pi_fmt(a, &fa);
        core_ns_pi_fmt(b, &fb);
        if (!fa.md_size || !fb.md_size)
                return fa.md_size == fb.md_size;
        return fa.type == fb.type && fa.md_size == fb.md_size && fa.guard == fb.guard &&
               fa.pi_exp == fb.pi_exp && fa.pi_first == fb.pi_first && fa.sts == fb.sts;
}

/* End with st: the callback from the reactor's defer queue (never inside submit). */
static void finish(struct core_copy *c, enum core_status st)
{
        if (c->buf)
                pool_put(c);
        active_end(c);
        c->stage = ST_DONE;
        c->status = st;
        if (st != CORE_OK)
                c->failed_range = c->cur;
        c->defer.fn = fire_cb;
        rt_defer(c->reactor, &c->defer);
}

/*
 * One range against the namespaces' state, as the equivalent read of the
 * source and write of the destination would be (core_req_submit's order:
 * state, reservation, range).
 */
static enum core_status check_range(const struct core_copy *c, const struct core_copy_range *r)
{
        const unsigned base =
            CORE_CHK_ACCESS | CORE_CHK_STARTED | CORE_CHK_SANITIZING | CORE_CHK_SANITIZE_FAILED;
        if (!r->src || !r->dst)
                return CORE_E_INTERNAL;
        if (r->src->block_size != r->dst->block_size)
                return CORE_E_COPY_INCOMPATIBLE;
        /* Protection information (issue 10): the metadata moves, so the formats must agree. */
        if (!same_md_fmt(r->src, r->dst))
                return CORE_E_COPY_INCOMPATIBLE;
        enum core_status st = core_ns_check(r->src, base);
        if (st == CORE_OK)
                st = core_ns_check(r->dst, base | CORE_CHK_WRITABLE);
        if (st != CORE_OK)
                return st;
        if (core_ns_pr_conflict(r->src, c->nexus, true, false) ||
            core_ns_pr_conflict(r->dst, c->nexus, false, true))
                return CORE_E_RESERVATION_CONFLICT;
        if (!core_ns_range_ok(r->src, r->src_lba, r->nlb) ||
            !core_ns_range_ok(r->dst, r->dst_lba, r->nlb))
                return CORE_E_LBA_RANGE;
        return CORE_OK;
}

/* Limits and every range, before any data moves. */
static enum core_status validate(struct core_copy *c)
{
        if (c->nranges > CORE_COPY_MAX_RANGES) {
                c->cur = CORE_COPY_MAX_RANGES;
                return CORE_E_COPY_LIMIT;
        }
        if (c->nranges && !c->ranges)
                return CORE_E_INTERNAL;
        uint64_t total = 0;
        for (unsigned i = 0; i < c->nranges; i++) {
                const struct core_copy_range *r = &c->ranges[i];
                c->cur = i;
                enum core_status st = check_range(c, r);
                if (st != CORE_OK)
                        return st;
                /* Blocks fit the namespace (checked above), so the shift cannot overflow. */
                uint64_t bytes = r->nlb << r->dst->block_shift;
                if (bytes > CORE_COPY_MAX_RANGE_BYTES)
                        return CORE_E_COPY_LIMIT;
                total += bytes;
                if (total > CORE_COPY_MAX_BYTES)
                        return CORE_E_COPY_LIMIT;
        }
        c->cur = 0;
        return CORE_OK;
}

static void chunk_done(struct core_copy *c)
{
        const struct core_copy_range *r = &c->ranges[c->cur];
        if (c->buf)
                pool_put(c);
        uint64_t bytes = (uint64_t)c->chunk_nlb << r->dst->block_shift;
        c->cur_done += c->chunk_nlb;
        atomic_fetch_add_explicit(&r->dst->copy_stats.bytes, bytes, memory_order_relaxed);
        /* An offloaded chunk's worker already added what it copied. */
        atomic_fetch_add_explicit(&r->dst->copy_stats.active_done, bytes - c->job.progress,
                                  memory_order_relaxed);
        c->job.progress = 0;
        atomic_fetch_add_explicit(&c->blocks_done, c->chunk_nlb, memory_order_release);
        c->stage = ST_IDLE;
        c->defer.fn = on_step;
        rt_defer(c->reactor, &c->defer);
}

static void req_done(struct core_req *req);

/*
 * A chunk's read of the source on a namespace with metadata: extended
 * LBAs (the metadata comes with the data), checked as c->pi.src_chk asks.
 */
static void pi_read_setup(struct core_copy *c, const struct core_copy_range *r)
{
        struct core_pi_fmt f;
        core_ns_pi_fmt(r->src, &f);
        if (!f.md_size)
                return;
        struct core_req *q = &c->req;
        q->pi.host_md = true;
        q->pi.chk = r->src_chk;
        q->pi.ref = r->src_ref + (c->chunk_lba << f.pi_exp);
        q->pi.app = r->src_app;
        q->pi.app_mask = r->src_app_mask;
}

/*
 * ...and its write to the destination: the metadata as read, type 1
 * reference tags moved to the destination LBAs (or, dst_gen, the PI
 * generated anew by the protection stage), checked as dst_chk asks.
 */
static void pi_write_setup(struct core_copy *c, const struct core_copy_range *r)
{
        struct core_pi_fmt f;
        core_ns_pi_fmt(r->dst, &f);
        if (!f.md_size)
                return;
        struct core_req *q = &c->req;
        /* Types 2, 3: the blocks of the ranges before this one and of the chunks before. */
        uint64_t before = c->chunk_lba;
        for (unsigned i = 0; i < c->cur; i++)
                before += c->ranges[i].nlb;
        uint64_t ref = f.type == CORE_PI_TYPE1 ? q->lba : c->pi.dst_ref + (before << f.pi_exp);
        q->pi.host_md = true;
        if (c->pi.dst_gen) {
                q->pi.gen = true;
                q->pi.gen_app = c->pi.dst_app;
                q->pi.gen_ref = ref;
                return;
        }
        if (f.type == CORE_PI_TYPE1)
                core_pi_retag(&f, (struct core_pi_buf){c->buf, NULL}, c->chunk_nlb, q->lba);
        q->pi.chk = c->pi.dst_chk;
        q->pi.ref = ref;
        q->pi.app = c->pi.dst_app;
        q->pi.app_mask = c->pi.dst_app_mask;
}

static void flush_next(struct core_copy *c)
{
        if (!(c->flags & CORE_REQ_FUA)) {
                finish(c, CORE_OK);
                return;
        }
        /* FUA: each distinct destination durable before the copy completes. */
        while (c->flush_idx < c->nranges) {
                unsigned i = c->flush_idx++;
                struct core_ns *dst = c->ranges[i].dst;
                bool seen = false;
                for (unsigned j = 0; j < i && !seen; j++)
                        seen = c->ranges[j].dst == dst;
                if (seen)
                        continue;
                core_req_init(&c->req, dst, CORE_OP_FLUSH, 0, 0, 0, c->reactor, req_done, c);
                c->req.nexus = c->nexus;
                c->stage = ST_FLUSH;
                core_req_submit(&c->req);
                return;
        }
        finish(c, CORE_OK);
}

static void req_done(struct core_req *req)
{
        struct core_copy *c = req->cb_arg;
        if (req->status != CORE_OK) {
                finish(c, req->status);
                return;
        }
        switch (c->stage) {
        case ST_READ: {
                const struct core_copy_range *r = &c->ranges[c->cur];
                core_req_init(&c->req, r->dst, CORE_OP_WRITE, r->dst_lba + c->chunk_lba,
                              c->chunk_nlb, 0, c->reactor, req_done, c);
                c->req.nexus = c->nexus;
                c->req.iov[0].iov_base = c->buf;
                c->req.iov[0].iov_len = core_ns_xfer_bytes(r->dst, c->chunk_nlb, true);
                c->req.iovcnt = 1;
                pi_write_setup(c, r);
                c->stage = ST_WRITE;
                core_req_submit(&c->req);
                return;
        }
        case ST_WRITE:
                chunk_done(c);
                return;
        case ST_FLUSH:
                flush_next(c);
                return;
        default:
                finish(c, CORE_E_INTERNAL);
                return;
        }
}

static void on_worker_done(struct core_work *w)
{
        struct core_copy *c = copy_of_work(w);
        const struct core_copy_range *r = &c->ranges[c->cur];
        int res = c->job.res;
        if (res == -EOPNOTSUPP || res == -EXDEV || res == -EINVAL || res == -ENOSYS) {
                /* Nothing copied: this backend pair will not offload, so use buffers. */
                LOG_DEBUG("core", "copy %s -> %s: no offload (%d), buffered", r->src->name,
                          r->dst->name, res);
                c->no_offload = true;
                c->stage = ST_IDLE;
                c->defer.fn = on_step;
                rt_defer(c->reactor, &c->defer);
                return;
        }
        if (res < 0) {
                LOG_DEBUG("core", "copy %s -> %s at lba %llu: %d", r->src->name, r->dst->name,
                          (unsigned long long)(r->dst_lba + c->chunk_lba), res);
                finish(c, res == -ENOSPC ? CORE_E_WRITE_ERROR : CORE_E_MEDIUM_ERROR);
                return;
        }
        uint64_t bytes = c->job.len;
        /* The offloaded chunk is one read of the source and one write of the destination. */
        core_stats_start(&r->src->stats);
        core_stats_end(&r->src->stats, CORE_OPC_READ, CORE_OK, bytes, CORE_LAT_NONE);
        core_stats_start(&r->dst->stats);
        core_stats_end(&r->dst->stats, CORE_OPC_WRITE, CORE_OK, bytes, CORE_LAT_NONE);
        chunk_done(c);
}

/*
 * copy_file_range bypasses the core's write path, so a destination with a
 * provisioning limit or threshold (core/provision.c) copies through core
 * writes, which reserve space against the limit like any host write.
 */
static bool dst_provisioned(const struct core_ns *ns)
{
        return atomic_load_explicit(&ns->prov.limit, memory_order_relaxed) ||
               atomic_load_explicit(&ns->prov.threshold, memory_order_relaxed);
}

static bool can_offload(const struct core_copy *c, const struct core_copy_range *r)
{
        /* Ciphertext is bound to its LBA and key (core/crypt.h): never copied as is. */
        /* Nor is a block's metadata, which lives in the metadata store (core/pistore.h). */
        return !c->no_offload && r->src->be.ops == r->dst->be.ops && r->src->be.ops->copy &&
               !r->src->crypt && !r->dst->crypt && !dst_provisioned(r->dst) &&
               !core_ns_md_per_block(r->src) && core_workers_ready(&copy_workers);
}

static void step(struct core_copy *c)
{
        if (atomic_load_explicit(&c->cancel, memory_order_acquire)) {
                finish(c, CORE_E_ABORTED);
                return;
        }
        while (c->cur < c->nranges && c->cur_done >= c->ranges[c->cur].nlb) {
                c->cur++;
                c->cur_done = 0;
        }
        if (c->cur >= c->nranges) {
                flush_next(c);
                return;
        }
        const struct core_copy_range *r = &c->ranges[c->cur];
        enum core_status st = check_range(c, r);
        if (st != CORE_OK) {
                finish(c, st);
                return;
        }
        uint32_t shift = r->dst->block_shift;
        uint64_t left = r->nlb - c->cur_done;
        bool same = r->src == r->dst;
        if (same && r->src_lba == r->dst_lba) {
                /* Onto itself: every block already holds what it would get. */
                c->chunk_nlb = (uint32_t)(left < UINT32_MAX ? left : UINT32_MAX);
                chunk_done(c);
                return;
        }
        uint64_t dist = r->dst_lba > r->src_lba ? r->dst_lba - r->src_lba : r->src_lba - r->dst_lba;
        bool overlap = same && dist < r->nlb;
        bool backward = overlap && r->dst_lba > r->src_lba;
        uint64_t max;
        bool offload = can_offload(c, r);
        if (offload) {
                max = COPY_OFFLOAD_CHUNK_BYTES >> shift;
                if (overlap && dist < max)
                        max = dist; /* copy_file_range: never overlapping within one call */
        } else {
                if (!c->buf && !pool_get(c, &st)) {
                        if (st != CORE_OK)
                                finish(c, st);
                        return; /* parked: pool_put hands us a buffer and steps us */
                }
                /* With metadata the chunk is extended LBAs: data and metadata per block. */
                max = COPY_CHUNK_BYTES / (((uint64_t)1 << shift) + core_ns_md_per_block(r->src));
        }
        uint64_t n = left < max ? left : max;
        c->chunk_nlb = (uint32_t)n;
        c->chunk_lba = backward ? r->nlb - c->cur_done - n : c->cur_done;
        if (offload) {
                c->job.src_off = (r->src_lba + c->chunk_lba) << shift;
                c->job.dst_off = (r->dst_lba + c->chunk_lba) << shift;
                c->job.len = n << shift;
                c->job.res = 0;
                c->job.progress = 0;
                c->stage = ST_WORKER;
                c->job.work.run = copy_chunk_run;
                c->job.work.done = on_worker_done;
                c->job.work.reactor = c->reactor;
                if (!core_work_submit(&copy_workers, &c->job.work)) {
                        /* can_offload saw a thread, so never; buffers if it ever is. */
                        c->no_offload = true;
                        c->stage = ST_IDLE;
                        c->defer.fn = on_step;
                        rt_defer(c->reactor, &c->defer);
                }
                return;
        }
        core_req_init(&c->req, r->src, CORE_OP_READ, r->src_lba + c->chunk_lba, (uint32_t)n, 0,
                      c->reactor, req_done, c);
        c->req.nexus = c->nexus;
        c->req.iov[0].iov_base = c->buf;
        c->req.iov[0].iov_len = core_ns_xfer_bytes(r->src, n, true);
        c->req.iovcnt = 1;
        pi_read_setup(c, r);
        c->stage = ST_READ;
        core_req_submit(&c->req);
}

static void on_step(struct rt_defer *d)
{
        step((struct core_copy *)((char *)d - offsetof(struct core_copy, defer)));
}

void core_copy_init(struct core_copy *c, const struct core_copy_range *ranges, unsigned nranges,
                    uint32_t flags, struct rt_reactor *reactor, void (*cb)(struct core_copy *c),
                    void *cb_arg)
{
        memset(c, 0, sizeof(*c));
        c->ranges = ranges;
        c->nranges = nranges;
        c->flags = flags;
        c->reactor = reactor;
        c->cb = cb;
        c->cb_arg = cb_arg;
}

void core_copy_submit(struct core_copy *c)
{
        c->status = CORE_OK;
        c->failed_range = 0;
        c->cur = 0;
        c->cur_done = 0;
        c->flush_idx = 0;
        c->buf = NULL;
        c->no_offload = false;
        c->active = false;
        c->job.progress = 0;
        c->stage = ST_IDLE;
        atomic_store_explicit(&c->blocks_done, 0, memory_order_relaxed);
        enum core_status st = validate(c);
        if (st != CORE_OK) {
                finish(c, st);
                return;
        }
        if (c->nranges)
                atomic_fetch_add_explicit(&c->ranges[0].dst->copy_stats.ops, 1,
                                          memory_order_relaxed);
        for (unsigned i = 0; i < c->nranges; i++)
                atomic_fetch_add_explicit(&c->ranges[i].dst->copy_stats.active_bytes,
                                          c->ranges[i].nlb << c->ranges[i].dst->block_shift,
                                          memory_order_relaxed);
        c->active = true;
        c->defer.fn = on_step;
        rt_defer(c->reactor, &c->defer);
}

void core_copy_cancel(struct core_copy *c)
{
        atomic_store_explicit(&c->cancel, true, memory_order_release);
}
