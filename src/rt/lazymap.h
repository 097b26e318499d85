/*
 * Zero-filled memory backed on first touch: anonymous MAP_NORESERVE
 * mappings, so a connection pays for the pages it touches -- the few
 * command slots a short-lived connection used, not its whole window -- and
 * setting them up needs no loop over the slots.  Used for the per-queue
 * command pools of both transports and for their connection structures.
 */
#ifndef RT_LAZYMAP_H
#define RT_LAZYMAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

/* len bytes of zeroes; NULL when the mapping fails.  Free with rt_lazy_unmap. */
static inline void *rt_lazy_map(size_t len)
{
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return p == MAP_FAILED ? NULL : p;
}

/*
 * A pool in one mapping: a table of n entries of entry bytes (page-rounded),
 * then n buffers of buf_len bytes.  Returns the table (the mapping's start)
 * with *bufs and the mapping's *len; NULL when the mapping fails.
 */
static inline void *rt_lazy_pool(size_t n, size_t entry, size_t buf_len, uint8_t **bufs,
                                 size_t *len)
{
        size_t pg = (size_t)sysconf(_SC_PAGESIZE);
        size_t tab = (n * entry + pg - 1) / pg * pg;
        void *p = rt_lazy_map(tab + n * buf_len);
        if (!p)
                return NULL;
        *bufs = (uint8_t *)p + tab;
        *len = tab + n * buf_len;
        return p;
}

static inline void rt_lazy_unmap(void *p, size_t len)
{
        if (p)
                munmap(p, len);
}

#endif
