/*
 * Large data buffers, shared by every connection of a reactor.  A transport
 * keeps a buffer per command slot sized for ordinary transfers; a command
 * that moves more borrows a contiguous buffer from its reactor's pool and
 * returns it when the command is over, so a big transfer costs memory only
 * while it runs, and the memory all big transfers together can hold is
 * bounded by the pool size, whatever the number of connections.
 *
 * Each reactor has one pool: a lazily backed mapping of rt_bigbuf_pool_bytes()
 * cut into chunks (RT_BIGBUF_CHUNK); a buffer is a run of contiguous chunks
 * (first fit, lowest address first, so the pages already touched are reused).
 * Nothing blocks: when the pool cannot serve a request the caller parks a
 * waiter, and waiters are served strictly in arrival order -- a buffer given
 * back goes to the oldest waiter whose request now fits, through a deferred
 * callback on the reactor.  Everything but rt_bigbuf_configure() and
 * rt_bigbuf_stats() runs on the reactor's own thread.
 */
#ifndef RT_BIGBUF_H
#define RT_BIGBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rt/reactor.h"

#define RT_BIGBUF_CHUNK       (1u << 20)
#define RT_BIGBUF_DEFAULT_MIB 64u

/* A parked request for a buffer (owned by the caller; must outlive the wait). */
struct rt_bigbuf_wait {
        /* Called on a later loop iteration with buf (len bytes) now the caller's. */
        void (*fn)(struct rt_bigbuf_wait *w);
        size_t len;
        void *buf;
        /* Private. */
        struct rt_bigbuf_wait *next;
        struct rt_defer defer;
        bool queued;
};

struct rt_bigbuf_stats {
        uint64_t pool_bytes; /* per reactor */
        uint64_t in_use;     /* bytes lent out now (all reactors) */
        uint64_t peak;       /* most bytes lent out at once on one reactor */
        uint64_t grants;     /* buffers lent */
        uint64_t waits;      /* requests that had to wait */
        unsigned waiting;    /* requests waiting now */
};

/*
 * Pool size per reactor, in bytes (a multiple of RT_BIGBUF_CHUNK, at least
 * one chunk).  Call before any reactor takes a buffer (start-up); later calls
 * affect only pools not created yet.  0 or -EINVAL.
 */
int rt_bigbuf_configure(uint64_t pool_bytes);
uint64_t rt_bigbuf_pool_bytes(void);

/*
 * A buffer of at least len bytes (rounded up to whole chunks) from r's pool,
 * or NULL when the pool cannot serve it now (or waiters are queued ahead) or
 * len exceeds the pool.  *got is the rounded length, to pass back to put.
 */
void *rt_bigbuf_get(struct rt_reactor *r, size_t len, size_t *got);
/* Bytes r's pool holds (creating it): the most one request can get; 0 if it cannot be made. */
size_t rt_bigbuf_capacity(struct rt_reactor *r);
/* Give back a buffer from rt_bigbuf_get or a waiter (len as received). */
void rt_bigbuf_put(struct rt_reactor *r, void *buf, size_t len);
/*
 * Park w (w->fn, w->len set; len <= pool size) until a buffer is free: then
 * w->buf and w->len (rounded) are set and w->fn(w) runs from a deferred call.
 * Returns -EINVAL if len can never be served.
 */
int rt_bigbuf_wait(struct rt_reactor *r, struct rt_bigbuf_wait *w);
/*
 * Withdraw a parked w.  true: it was waiting and is gone (fn will not run).
 * false: it was already served -- fn runs (or ran) and owns the buffer.
 */
bool rt_bigbuf_cancel(struct rt_reactor *r, struct rt_bigbuf_wait *w);

/* Counters over every reactor's pool (any thread; approximate while I/O runs). */
void rt_bigbuf_stats(struct rt_bigbuf_stats *st);
/* Unmap every pool (after the reactors stopped). */
void rt_bigbuf_fini(void);

#endif
