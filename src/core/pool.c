/*
 * Provisioning pools: a hard limit of allocated space shared by the thin
 * file namespaces whose data files are in one directory (one file system
 * area an administrator hands to several namespaces).  A pool is named by
 * the directory (its real path); pool_set creates or changes it, and a
 * namespace belongs to the pool of its data file's directory from the
 * moment both exist, until it is freed.  Pools are never freed (a limit of
 * 0 switches one off), so the data path reads ns->pool without a
 * reference; the member list is under pools_lock, taken after the
 * namespace registry's lock when both are held.
 *
 * Enforcement works like a namespace's own limit (provision.c): a running
 * estimate per pool, reservations for allocating writes, and a precise
 * look (the members' allocation, summed) only when the estimate would
 * cross the limit.  A pool has no soft threshold of its own.  A write
 * refused by the pool fails like one refused by its namespace's limit
 * (CORE_E_SPACE_ALLOC_FAILED); SCSI reports the LU's available resources
 * as not dedicated to it (LOG SENSE 0Ch SCOPE 10b).
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ns.h"
#include "core/pool.h"
#include "rt/log.h"

#define CORE_POOLS_MAX 64 /* pools are never freed: a bound on what RPCs can create */

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static struct core_pool *pools;

/* The real path of the directory holding ns's data file, or -errno. */
static int ns_dir(const struct core_ns *ns, char *out)
{
        char tmp[4096];
        if (strcmp(ns->backend_name, "file") != 0 || !ns->path[0])
                return -EINVAL;
        snprintf(tmp, sizeof(tmp), "%s", ns->path);
        if (!realpath(dirname(tmp), out))
                return -errno;
        return 0;
}

static struct core_pool *find_locked(const char *real)
{
        for (struct core_pool *p = pools; p; p = p->next)
                if (strcmp(p->dir, real) == 0)
                        return p;
        return NULL;
}

/* Link ns into p's members (once).  Lock order: the registry's lock, then pools_lock. */
static void link_locked(struct core_pool *p, struct core_ns *ns)
{
        if (atomic_load(&ns->pool))
                return;
        ns->pool_next = p->members;
        p->members = ns;
        atomic_store(&ns->pool, p);
}

void core_pool_join(struct core_ns *ns)
{
        char real[PATH_MAX];
        if (!ns->thin || ns_dir(ns, real))
                return;
        pthread_mutex_lock(&pools_lock);
        struct core_pool *p = find_locked(real);
        if (p)
                link_locked(p, ns);
        pthread_mutex_unlock(&pools_lock);
}

void core_pool_leave(struct core_ns *ns)
{
        struct core_pool *p = atomic_load(&ns->pool);
        if (!p)
                return;
        pthread_mutex_lock(&pools_lock);
        for (struct core_ns **pp = &p->members; *pp; pp = &(*pp)->pool_next) {
                if (*pp == ns) {
                        *pp = ns->pool_next;
                        break;
                }
        }
        pthread_mutex_unlock(&pools_lock);
}

/* The members' allocated bytes, summed (pools_lock: members cannot go meanwhile). */
static uint64_t sum(struct core_pool *p, unsigned *members)
{
        uint64_t bytes = 0;
        unsigned n = 0;
        pthread_mutex_lock(&pools_lock);
        for (struct core_ns *ns = p->members; ns; ns = ns->pool_next) {
                int64_t b = core_ns_allocated_bytes(ns);
                if (b > 0)
                        bytes += (uint64_t)b;
                n++;
        }
        pthread_mutex_unlock(&pools_lock);
        if (members)
                *members = n;
        return bytes;
}

uint64_t core_pool_refresh(struct core_pool *p)
{
        uint64_t real = sum(p, NULL);
        uint64_t old = atomic_load(&p->est), now;
        do {
                now = real + atomic_load(&p->inflight);
        } while (!atomic_compare_exchange_weak(&p->est, &old, now));
        return real;
}

static void join_one(struct core_ns *ns, void *arg)
{
        char real[PATH_MAX];
        struct core_pool *p = arg;
        if (!ns->thin || ns_dir(ns, real) || strcmp(real, p->dir) != 0)
                return;
        pthread_mutex_lock(&pools_lock);
        link_locked(p, ns);
        pthread_mutex_unlock(&pools_lock);
}

int core_pool_set(const char *dir, uint64_t limit, char *err, size_t errlen)
{
        char real[PATH_MAX];
        err[0] = 0;
        if (!dir || !realpath(dir, real)) {
                snprintf(err, errlen, "pool directory %s: %s", dir ? dir : "(none)",
                         strerror(errno));
                return -ENOENT;
        }
        pthread_mutex_lock(&pools_lock);
        struct core_pool *p = find_locked(real);
        unsigned n = 0;
        for (struct core_pool *q = pools; q; q = q->next)
                n++;
        if (!p && limit && n >= CORE_POOLS_MAX) {
                pthread_mutex_unlock(&pools_lock);
                snprintf(err, errlen, "at most %d pools", CORE_POOLS_MAX);
                return -ENOSPC;
        }
        if (!p && limit) {
                p = calloc(1, sizeof(*p));
                if (!p) {
                        pthread_mutex_unlock(&pools_lock);
                        return -ENOMEM;
                }
                snprintf(p->dir, sizeof(p->dir), "%s", real);
                p->next = pools;
                pools = p;
        }
        if (p)
                atomic_store(&p->limit, limit);
        pthread_mutex_unlock(&pools_lock);
        if (!p)
                return 0; /* removing a limit that never was */
        core_ns_foreach(join_one, p);
        core_pool_refresh(p);
        LOG_INFO("core", "pool %s: limit %llu bytes", p->dir, (unsigned long long)limit);
        return 0;
}

static void info(struct core_pool *p, struct core_pool_info *out)
{
        unsigned n;
        uint64_t bytes = sum(p, &n);
        snprintf(out->dir, sizeof(out->dir), "%s", p->dir);
        out->limit = atomic_load(&p->limit);
        out->mapped = bytes;
        out->available = out->limit > bytes ? out->limit - bytes : 0;
        out->members = n;
}

int core_pool_info(const struct core_pool *pool, struct core_pool_info *out)
{
        memset(out, 0, sizeof(*out));
        if (!pool || !atomic_load(&pool->limit))
                return -ENOENT;
        info((struct core_pool *)pool, out);
        return 0;
}

void core_pool_foreach(void (*fn)(const struct core_pool_info *pi, void *arg), void *arg)
{
        /* Pools are never freed: walk without the lock, which the sums do not need. */
        pthread_mutex_lock(&pools_lock);
        struct core_pool *head = pools;
        pthread_mutex_unlock(&pools_lock);
        for (struct core_pool *p = head; p; p = p->next) {
                struct core_pool_info pi;
                if (core_pool_info(p, &pi) == 0)
                        fn(&pi, arg);
        }
}
