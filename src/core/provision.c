/*
 * Provisioned-capacity limits of a thin namespace (SBC-4 4.7.3.7 resource
 * exhaustion, 4.7.3.8 thresholds; NVMe Base 2.0 NCAP/NUSE and Capacity
 * Exceeded): a hard limit and a soft threshold of allocated bytes, both
 * the namespace's, set through core_ns_set_provision() (RPC, config, SCSI
 * MODE SELECT of the Logical Block Provisioning mode page) and persisted
 * in its metadata.
 *
 * The backend's own allocation (the file's blocks) is the truth, but
 * asking for it on every write would cost a system call per I/O.  So the
 * data path keeps a running estimate instead: every allocating write adds
 * the most it can allocate (the file-system blocks it touches) before it
 * runs, and completion only ends its "in flight" reservation.  The
 * estimate is therefore never below the real figure, only above it
 * (overwrites, deallocations); it is brought back to the truth
 * (allocated() + what is in flight) whenever a write would cross the
 * limit, when space is freed, and when a host or management reads the
 * counters.  Only a write whose estimate crosses the hard limit is looked
 * at precisely: its blocks' provisioning status (core_ns_lba_status), so
 * that overwriting mapped blocks, which allocates nothing, still succeeds
 * at the limit, and a write that does need new space fails with
 * CORE_E_SPACE_ALLOC_FAILED (SCSI SPACE ALLOCATION FAILED WRITE PROTECT,
 * NVMe Capacity Exceeded).  Nothing else changes: the namespace is not
 * write protected as a whole (CORE_WP_SPACE stays clear), deallocation
 * always works and brings the namespace back under its limit.
 *
 * The soft threshold is crossed when the allocated bytes reach it:
 * CORE_NS_EV_SPACE_THRESHOLD is published once (origin NULL: every host is
 * told), and re-armed when the usage is back below the threshold (after a
 * deallocation, or a new threshold).  The sanitize engine's own writes are
 * not limited (an overwrite must reach every block).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/ns.h"
#include "core/pool.h"
#include "core/provision.h"
#include "core/req.h"
#include "rt/log.h"

/* What one write can allocate per touched block: a file-system block (file.c punches 4 KiB). */
static uint64_t alloc_unit(const struct core_ns *ns)
{
        return ns->block_size > 4096 ? ns->block_size : 4096;
}

/* The file-system blocks a byte range [start, end) touches, in bytes. */
static uint64_t span(const struct core_ns *ns, uint64_t start, uint64_t end)
{
        uint64_t u = alloc_unit(ns);
        return ((end + u - 1) / u - start / u) * u;
}

bool core_ns_provision_supported(const struct core_ns *ns)
{
        return ns->thin && ns->be.ops && ns->be.ops->allocated && ns->be.ops->map_status;
}

/* The namespace's pool when that has a limit (pool.c), else NULL. */
static struct core_pool *limiting_pool(const struct core_ns *ns)
{
        struct core_pool *p = atomic_load_explicit(&ns->pool, memory_order_acquire);
        return p && atomic_load_explicit(&p->limit, memory_order_relaxed) ? p : NULL;
}

static bool tracked(const struct core_ns *ns)
{
        return core_ns_provision_supported(ns) &&
               (atomic_load_explicit(&ns->prov.limit, memory_order_relaxed) ||
                atomic_load_explicit(&ns->prov.threshold, memory_order_relaxed) ||
                limiting_pool(ns));
}

/*
 * The estimate back to the truth: what the backend has allocated plus
 * what writes in flight may still add.  A compare-and-swap so that a
 * reservation made meanwhile is never lost.  Returns the allocated bytes,
 * or -errno.
 */
static int64_t refresh(struct core_ns *ns)
{
        int64_t real = core_ns_allocated_bytes(ns);
        if (real < 0)
                return real;
        uint64_t old = atomic_load(&ns->prov.est), now;
        do {
                now = (uint64_t)real + atomic_load(&ns->prov.inflight);
        } while (!atomic_compare_exchange_weak(&ns->prov.est, &old, now));
        return real;
}

static void publish(struct core_ns *ns, enum core_ns_event_type type, core_origin_t origin,
                    uint32_t old_val, uint32_t new_val)
{
        struct core_ns_event ev = {
            .type = type, .ns = ns, .origin = origin, .old_val = old_val, .new_val = new_val};
        core_ns_publish(&ev);
}

/* Compare the real usage with the threshold: publish a crossing, re-arm below it. */
static void check_threshold(struct core_ns *ns, int64_t real)
{
        uint64_t thr = atomic_load(&ns->prov.threshold);
        if (real < 0)
                return;
        if (thr && (uint64_t)real >= thr) {
                bool was = false;
                if (!atomic_compare_exchange_strong(&ns->prov.reached, &was, true))
                        return;
                LOG_INFO("core",
                         "namespace %s: soft threshold reached: %llu bytes allocated, threshold "
                         "%llu",
                         ns->name, (unsigned long long)real, (unsigned long long)thr);
                publish(ns, CORE_NS_EV_SPACE_THRESHOLD, NULL, 0,
                        (uint32_t)(((uint64_t)real) / CORE_PROV_SET_BYTES));
        } else if (atomic_exchange(&ns->prov.reached, false)) {
                LOG_INFO("core",
                         "namespace %s: usage %llu bytes below the soft threshold: re-armed",
                         ns->name, (unsigned long long)real);
        }
}

/* Bytes the range would newly allocate: its unmapped runs, in file-system blocks. */
static int unmapped_bytes(struct core_ns *ns, uint64_t lba, uint64_t nlb, uint64_t *out)
{
        uint64_t end = lba + nlb, n = 0;
        *out = 0;
        while (lba < end) {
                enum core_prov st;
                uint64_t run;
                int rc = core_ns_lba_status(ns, lba, end - lba, &st, &run);
                if (rc)
                        return rc;
                /* Anchored blocks keep their space: only deallocated ones cost more. */
                if (st == CORE_PROV_DEALLOCATED)
                        n += span(ns, lba << ns->block_shift, (lba + run) << ns->block_shift);
                lba += run;
        }
        *out = n;
        return 0;
}

static void unreserve(struct core_req *req)
{
        struct core_prov_limits *p = &req->ns->prov;
        atomic_fetch_sub(&p->est, req->prov_bytes);
        atomic_fetch_sub(&p->inflight, req->prov_bytes);
        if (req->prov_pool) {
                struct core_pool *pool = atomic_load(&req->ns->pool);
                atomic_fetch_sub(&pool->est, req->prov_bytes);
                atomic_fetch_sub(&pool->inflight, req->prov_bytes);
                req->prov_pool = false;
        }
        req->prov_bytes = 0;
}

enum core_status core_prov_reserve(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        struct core_prov_limits *p = &ns->prov;
        req->prov_bytes = 0;
        req->prov_pool = false;
        if ((req->flags & CORE_REQ_SANITIZE) || !tracked(ns))
                return CORE_OK;
        uint64_t start = req->lba << ns->block_shift;
        uint64_t need = span(ns, start, start + ((uint64_t)req->nlb << ns->block_shift));
        uint64_t limit = atomic_load_explicit(&p->limit, memory_order_relaxed);
        atomic_fetch_add(&p->inflight, need);
        uint64_t est = atomic_fetch_add(&p->est, need) + need;
        req->prov_bytes = need;
        /* The directory's pool, if it has a limit, reserves the same way. */
        struct core_pool *pool = limiting_pool(ns);
        uint64_t plimit = 0, pest = 0;
        if (pool) {
                plimit = atomic_load_explicit(&pool->limit, memory_order_relaxed);
                atomic_fetch_add(&pool->inflight, need);
                pest = atomic_fetch_add(&pool->est, need) + need;
                req->prov_pool = true;
        }
        bool over = limit && est > limit, pool_over = plimit && pest > plimit;
        if (!over && !pool_over)
                return CORE_OK; /* the common case: no system call */

        /* An estimate would cross a limit: look at this write precisely. */
        uint64_t fresh;
        if (unmapped_bytes(ns, req->lba, req->nlb, &fresh) != 0)
                fresh = need; /* cannot tell: assume all of it is new */
        else if (fresh == 0) {
                unreserve(req); /* an overwrite of mapped blocks allocates nothing */
                return CORE_OK;
        }
        if (over) {
                int64_t real = refresh(ns);
                uint64_t others = atomic_load(&p->inflight) - need;
                if (real < 0 || (uint64_t)real + others + fresh > limit)
                        goto refuse;
        }
        if (pool_over) {
                uint64_t real = core_pool_refresh(pool);
                uint64_t others = atomic_load(&pool->inflight) - need;
                if (real + others + fresh > plimit)
                        goto refuse;
        }
        return CORE_OK;
refuse:
        unreserve(req);
        LOG_DEBUG("core", "namespace %s: write at lba %llu needs %llu bytes beyond the %s limit",
                  ns->name, (unsigned long long)req->lba, (unsigned long long)fresh,
                  pool_over ? "pool" : "namespace");
        return CORE_E_SPACE_ALLOC_FAILED;
}

void core_prov_done(struct core_req *req, enum core_status st)
{
        struct core_ns *ns = req->ns;
        struct core_prov_limits *p = &ns->prov;
        if (req->prov_bytes) {
                /* Written (or failed): the space is in allocated() now, or was never taken. */
                atomic_fetch_sub(&p->inflight, req->prov_bytes);
                if (req->prov_pool)
                        atomic_fetch_sub(&atomic_load(&ns->pool)->inflight, req->prov_bytes);
                req->prov_pool = false;
                req->prov_bytes = 0;
                uint64_t thr = atomic_load_explicit(&p->threshold, memory_order_relaxed);
                if (st == CORE_OK && thr && !atomic_load(&p->reached) &&
                    atomic_load(&p->est) >= thr)
                        check_threshold(ns, refresh(ns));
        }
        if (req->prov_frees) {
                req->prov_frees = false;
                if (st == CORE_OK && tracked(ns))
                        check_threshold(ns, refresh(ns));
        }
}

void core_prov_init(struct core_ns *ns)
{
        atomic_store(&ns->prov.inflight, 0);
        atomic_store(&ns->prov.reached, false);
        int64_t real = core_ns_provision_supported(ns) ? core_ns_allocated_bytes(ns) : -1;
        atomic_store(&ns->prov.est, real > 0 ? (uint64_t)real : 0);
        uint64_t thr = atomic_load(&ns->prov.threshold);
        /* Already above when it opens: hosts connecting later were not there to be told. */
        if (real >= 0 && thr && (uint64_t)real >= thr)
                atomic_store(&ns->prov.reached, true);
}

int core_ns_set_provision(struct core_ns *ns, uint64_t limit, uint64_t threshold,
                          core_origin_t origin, char *err, size_t errlen)
{
        err[0] = 0;
        if ((limit || threshold) && !core_ns_provision_supported(ns)) {
                snprintf(err, errlen,
                         "provisioning limits need a thin namespace on a backend that reports its "
                         "allocation (file)");
                return -EOPNOTSUPP;
        }
        if (limit % ns->block_size) {
                snprintf(err, errlen, "provision_limit must be a multiple of block_size %u",
                         ns->block_size);
                return -EINVAL;
        }
        if (threshold % CORE_PROV_SET_BYTES) {
                snprintf(err, errlen, "provision_threshold must be a multiple of %u bytes (1 MiB)",
                         CORE_PROV_SET_BYTES);
                return -EINVAL;
        }
        if (threshold / CORE_PROV_SET_BYTES > UINT32_MAX) {
                snprintf(err, errlen, "provision_threshold is too large");
                return -EINVAL;
        }
        if (limit && threshold > limit) {
                snprintf(err, errlen, "provision_threshold must not exceed provision_limit");
                return -EINVAL;
        }
        pthread_mutex_lock(&ns->lock);
        uint64_t old_limit = atomic_load(&ns->prov.limit);
        uint64_t old_thr = atomic_load(&ns->prov.threshold);
        uint32_t chg = (old_limit != limit ? CORE_PROV_CHG_LIMIT : 0) |
                       (old_thr != threshold ? CORE_PROV_CHG_THRESHOLD : 0);
        if (!chg) {
                pthread_mutex_unlock(&ns->lock);
                return 0;
        }
        atomic_store(&ns->prov.limit, limit);
        atomic_store(&ns->prov.threshold, threshold);
        int rc = core_ns_save_meta(ns);
        if (rc) {
                atomic_store(&ns->prov.limit, old_limit);
                atomic_store(&ns->prov.threshold, old_thr);
                pthread_mutex_unlock(&ns->lock);
                snprintf(err, errlen, "saving metadata: %s", strerror(-rc));
                return rc;
        }
        pthread_mutex_unlock(&ns->lock);
        LOG_INFO("core", "namespace %s: provision limit %llu bytes, threshold %llu bytes", ns->name,
                 (unsigned long long)limit, (unsigned long long)threshold);
        publish(ns, CORE_NS_EV_PROVISIONING, origin, 0, chg);
        if (tracked(ns))
                check_threshold(ns, refresh(ns));
        else
                atomic_store(&ns->prov.reached, false);
        return 0;
}

void core_ns_provision_info(struct core_ns *ns, struct core_prov_info *out)
{
        memset(out, 0, sizeof(*out));
        out->capacity = core_ns_blocks(ns) << ns->block_shift;
        out->limit = atomic_load(&ns->prov.limit);
        out->threshold = atomic_load(&ns->prov.threshold);
        out->mapped = out->capacity;
        int64_t real = core_ns_provision_supported(ns) ? core_ns_allocated_bytes(ns) : -1;
        if (real >= 0) {
                out->tracked = true;
                out->mapped = (uint64_t)real;
                if (tracked(ns))
                        refresh(ns);
        }
        out->deallocated = out->capacity > out->mapped ? out->capacity - out->mapped : 0;
        uint64_t room = out->limit ? out->limit : out->capacity;
        out->available = room > out->mapped ? room - out->mapped : 0;
        struct core_pool_info pool;
        if (core_pool_info(atomic_load(&ns->pool), &pool) == 0 && pool.available < out->available) {
                out->available = pool.available; /* shared with the pool's other namespaces */
                out->pooled = true;
        }
        out->reached = atomic_load(&ns->prov.reached);
}

json_t *core_prov_to_json(struct core_ns *ns)
{
        uint64_t limit = atomic_load(&ns->prov.limit), thr = atomic_load(&ns->prov.threshold);
        if (!limit && !thr)
                return NULL;
        return json_pack("{s:I, s:I}", "limit", (json_int_t)limit, "threshold", (json_int_t)thr);
}

int core_prov_from_json(struct core_ns *ns, json_t *j)
{
        json_int_t limit = 0, thr = 0;
        if (json_unpack(j, "{s:I, s:I}", "limit", &limit, "threshold", &thr) || limit < 0 ||
            thr < 0 || (limit && thr > limit))
                return -EINVAL;
        atomic_store(&ns->prov.limit, (uint64_t)limit);
        atomic_store(&ns->prov.threshold, (uint64_t)thr);
        return 0;
}
