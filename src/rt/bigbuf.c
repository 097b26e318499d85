/*
 * The per-reactor pools of large data buffers (rt/bigbuf.h): one lazily
 * backed MAP_NORESERVE mapping per reactor, created on the reactor's first
 * request, a bitmap of chunks lent out, and a FIFO of parked waiters.  Only
 * the owning reactor's thread touches its pool; the counters are atomics so
 * that management (daemon_status) can read them from another thread.
 */
#include "rt/bigbuf.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "rt/log.h"

#define MAX_POOLS 1024 /* slated -m allows up to 1024 reactors */

struct pool {
        uint8_t *base;
        size_t nchunks;
        uint64_t *used; /* bit per chunk */
        struct rt_bigbuf_wait *head, *tail;
        _Atomic uint64_t in_use, peak, grants, waits;
        _Atomic unsigned nwait;
};

static struct pool *_Atomic pools[MAX_POOLS];
static _Atomic uint64_t cfg_bytes = (uint64_t)RT_BIGBUF_DEFAULT_MIB << 20;

int rt_bigbuf_configure(uint64_t bytes)
{
        if (bytes < RT_BIGBUF_CHUNK || bytes % RT_BIGBUF_CHUNK || bytes > (1ull << 40))
                return -EINVAL;
        atomic_store(&cfg_bytes, bytes);
        return 0;
}

uint64_t rt_bigbuf_pool_bytes(void)
{
        return atomic_load(&cfg_bytes);
}

static struct pool *pool_of(struct rt_reactor *r)
{
        unsigned idx = rt_index(r);
        if (idx >= MAX_POOLS)
                return NULL;
        struct pool *p = atomic_load_explicit(&pools[idx], memory_order_acquire);
        if (p)
                return p;
        size_t bytes = (size_t)atomic_load(&cfg_bytes);
        p = calloc(1, sizeof(*p));
        if (!p)
                return NULL;
        p->nchunks = bytes / RT_BIGBUF_CHUNK;
        p->used = calloc((p->nchunks + 63) / 64, sizeof(uint64_t));
        /* Untouched chunks cost no memory; first fit keeps reusing touched ones. */
        p->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (!p->used || p->base == MAP_FAILED) {
                LOG_ERR("rt", "reactor %u: cannot map a %zu MiB large-buffer pool", idx,
                        bytes >> 20);
                if (p->base != MAP_FAILED)
                        munmap(p->base, bytes);
                free(p->used);
                free(p);
                return NULL;
        }
        atomic_store_explicit(&pools[idx], p, memory_order_release);
        return p;
}

static bool bit(const struct pool *p, size_t i)
{
        return (p->used[i / 64] >> (i % 64)) & 1;
}

static void set_bits(struct pool *p, size_t first, size_t n, bool on)
{
        for (size_t i = first; i < first + n; i++) {
                if (on)
                        p->used[i / 64] |= 1ull << (i % 64);
                else
                        p->used[i / 64] &= ~(1ull << (i % 64));
        }
}

static size_t chunks_for(size_t len)
{
        return len ? (len + RT_BIGBUF_CHUNK - 1) / RT_BIGBUF_CHUNK : 1;
}

/* First run of n free chunks; SIZE_MAX if none. */
static size_t find_run(const struct pool *p, size_t n)
{
        size_t run = 0;
        for (size_t i = 0; i < p->nchunks; i++) {
                run = bit(p, i) ? 0 : run + 1;
                if (run == n)
                        return i + 1 - n;
        }
        return SIZE_MAX;
}

static void *take(struct pool *p, size_t len, size_t *got)
{
        size_t n = chunks_for(len);
        size_t first = find_run(p, n);
        if (first == SIZE_MAX)
                return NULL;
        set_bits(p, first, n, true);
        uint64_t now = atomic_fetch_add(&p->in_use, (uint64_t)n * RT_BIGBUF_CHUNK) +
                       (uint64_t)n * RT_BIGBUF_CHUNK;
        if (now > atomic_load(&p->peak))
                atomic_store(&p->peak, now);
        atomic_fetch_add(&p->grants, 1);
        *got = n * RT_BIGBUF_CHUNK;
        return p->base + first * RT_BIGBUF_CHUNK;
}

void *rt_bigbuf_get(struct rt_reactor *r, size_t len, size_t *got)
{
        struct pool *p = pool_of(r);
        if (!p || p->head || chunks_for(len) > p->nchunks)
                return NULL; /* waiters come first */
        return take(p, len, got);
}

size_t rt_bigbuf_capacity(struct rt_reactor *r)
{
        struct pool *p = pool_of(r);
        return p ? p->nchunks * RT_BIGBUF_CHUNK : 0;
}

static void grant_fn(struct rt_defer *d)
{
        struct rt_bigbuf_wait *w =
            (struct rt_bigbuf_wait *)((char *)d - offsetof(struct rt_bigbuf_wait, defer));
        w->fn(w);
}

/* Serve the oldest waiters while their requests fit. */
static void serve(struct rt_reactor *r, struct pool *p)
{
        while (p->head) {
                struct rt_bigbuf_wait *w = p->head;
                size_t got;
                void *buf = take(p, w->len, &got);
                if (!buf)
                        return;
                p->head = w->next;
                if (!p->head)
                        p->tail = NULL;
                atomic_fetch_sub(&p->nwait, 1);
                w->queued = false;
                w->buf = buf;
                w->len = got;
                w->defer.fn = grant_fn;
                rt_defer(r, &w->defer);
        }
}

void rt_bigbuf_put(struct rt_reactor *r, void *buf, size_t len)
{
        struct pool *p = pool_of(r);
        if (!p || !buf)
                return;
        size_t first = (size_t)((uint8_t *)buf - p->base) / RT_BIGBUF_CHUNK;
        size_t n = chunks_for(len);
        set_bits(p, first, n, false);
        atomic_fetch_sub(&p->in_use, (uint64_t)n * RT_BIGBUF_CHUNK);
        serve(r, p);
}

int rt_bigbuf_wait(struct rt_reactor *r, struct rt_bigbuf_wait *w)
{
        struct pool *p = pool_of(r);
        if (!p)
                return -ENOMEM;
        if (chunks_for(w->len) > p->nchunks)
                return -EINVAL;
        w->buf = NULL;
        w->next = NULL;
        w->queued = true;
        if (p->tail)
                p->tail->next = w;
        else
                p->head = w;
        p->tail = w;
        atomic_fetch_add(&p->nwait, 1);
        atomic_fetch_add(&p->waits, 1);
        serve(r, p); /* the pool may have room and nobody ahead */
        return 0;
}

bool rt_bigbuf_cancel(struct rt_reactor *r, struct rt_bigbuf_wait *w)
{
        struct pool *p = pool_of(r);
        if (!p || !w->queued)
                return false;
        struct rt_bigbuf_wait **pp = &p->head, *prev = NULL;
        while (*pp && *pp != w) {
                prev = *pp;
                pp = &(*pp)->next;
        }
        if (!*pp)
                return false;
        *pp = w->next;
        if (p->tail == w)
                p->tail = prev;
        w->queued = false;
        atomic_fetch_sub(&p->nwait, 1);
        /* A smaller request behind it may fit now. */
        serve(r, p);
        return true;
}

void rt_bigbuf_stats(struct rt_bigbuf_stats *st)
{
        *st = (struct rt_bigbuf_stats){.pool_bytes = atomic_load(&cfg_bytes)};
        for (unsigned i = 0; i < MAX_POOLS; i++) {
                struct pool *p = atomic_load_explicit(&pools[i], memory_order_acquire);
                if (!p)
                        continue;
                st->in_use += atomic_load(&p->in_use);
                uint64_t pk = atomic_load(&p->peak);
                if (pk > st->peak)
                        st->peak = pk;
                st->grants += atomic_load(&p->grants);
                st->waits += atomic_load(&p->waits);
                st->waiting += atomic_load(&p->nwait);
        }
}

void rt_bigbuf_fini(void)
{
        for (unsigned i = 0; i < MAX_POOLS; i++) {
                struct pool *p = atomic_exchange(&pools[i], NULL);
                if (!p)
                        continue;
                munmap(p->base, p->nchunks * RT_BIGBUF_CHUNK);
                free(p->used);
                free(p);
        }
}
