/*
 * RAM backend: an anonymous MAP_NORESERVE mapping, so untouched blocks cost
 * no memory and read as zeroes.  Data is lost when the daemon exits (the
 * namespace reports no volatile cache: there is nothing to flush to).
 *
 * Resizing without ever moving the buffer reactors read and write: open
 * reserves address space for MEM_GROW_FACTOR times the size (at least
 * MEM_RESERVE_MIN; inaccessible, so it costs neither memory nor commit
 * charge) and makes only the namespace's part accessible.  Growing makes
 * more of the reservation accessible, up to its end (-ENOSPC beyond);
 * shrinking keeps the pages mapped (a request admitted before the shrink
 * may still touch them) and only drops their contents, so blocks that
 * come back with a later grow read as zeroes.
 *
 * The provisioning map is a bit per page: set once a write has put data
 * in the page, cleared when WRITE_ZEROES (deallocation) drops it with
 * MADV_DONTNEED, which returns the page to the system.  Pages are the
 * allocation unit: a partial page is zeroed in place and stays allocated.
 * Why not a memfd, whose holes the kernel would track: reading a hole
 * through a shared mapping of one allocates the page (shmem faults fill
 * holes), so a host reading a thin namespace would fill it, while reads of
 * untouched anonymous memory map the shared zero page and cost nothing.
 * Bits are set after the data is written and cleared before the page is
 * dropped, so however a write and a deallocation of one page interleave,
 * the map never calls a page that holds data deallocated.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/sync.h"
#include "rt/reactor.h"

#define MEM_GROW_FACTOR 4
#define MEM_RESERVE_MIN (64ull << 30)

struct mem_be {
        uint8_t *base;     /* never moves while the backend is open */
        uint64_t reserved; /* bytes of address space at base */
        uint64_t open_len; /* bytes from base made accessible (page multiple) */
        unsigned pg_shift;
        _Atomic uint64_t *map;  /* a bit per page of the reservation: the page holds data */
        uint64_t map_bytes;     /* of the map's own (MAP_NORESERVE) mapping */
        _Atomic uint64_t pages; /* bits set */
};

/* Set (on) or clear the map bits of pages [first, last], keeping the count. */
static void map_mark(struct mem_be *m, uint64_t first, uint64_t last, bool on)
{
        for (uint64_t p = first; p <= last;) {
                uint64_t w = p >> 6, lo = p & 63;
                uint64_t hi = (last >> 6) == w ? (last & 63) : 63;
                uint64_t mask = (hi - lo == 63 ? ~0ull : ((1ull << (hi - lo + 1)) - 1)) << lo;
                uint64_t old =
                    on ? atomic_fetch_or_explicit(&m->map[w], mask, memory_order_release)
                       : atomic_fetch_and_explicit(&m->map[w], ~mask, memory_order_release);
                uint64_t changed = (uint64_t)__builtin_popcountll((on ? ~old : old) & mask);
                if (on)
                        atomic_fetch_add_explicit(&m->pages, changed, memory_order_relaxed);
                else
                        atomic_fetch_sub_explicit(&m->pages, changed, memory_order_relaxed);
                p += hi - lo + 1;
        }
}

static bool map_bit(const struct mem_be *m, uint64_t p)
{
        return (atomic_load_explicit(&m->map[p >> 6], memory_order_acquire) >> (p & 63)) & 1;
}

/* Drop the whole pages of [a, b) (page aligned): map first, then the memory. */
static void drop_pages(struct mem_be *m, uint64_t a, uint64_t b)
{
        if (a >= b)
                return;
        map_mark(m, a >> m->pg_shift, (b >> m->pg_shift) - 1, false);
        if (madvise(m->base + a, b - a, MADV_DONTNEED)) {
                /* Cannot give them back: zero them, and they stay allocated. */
                memset(m->base + a, 0, b - a);
                map_mark(m, a >> m->pg_shift, (b >> m->pg_shift) - 1, true);
        }
}

static uint64_t page_up(uint64_t n)
{
        uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
        return (n + pg - 1) & ~(pg - 1);
}

static int mem_open(struct backend *be, const struct backend_params *p)
{
        if (p->size_bytes == 0 || p->size_bytes > (1ull << 60))
                return -EINVAL;
        struct mem_be *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        uint64_t want = page_up(p->size_bytes);
        uint64_t reserve = want * MEM_GROW_FACTOR;
        if (reserve < MEM_RESERVE_MIN)
                reserve = MEM_RESERVE_MIN;
        void *base =
            mmap(NULL, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == MAP_FAILED) { /* no room to grow: exactly the size */
                reserve = want;
                base = mmap(NULL, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                            -1, 0);
        }
        if (base == MAP_FAILED || mprotect(base, want, PROT_READ | PROT_WRITE)) {
                int rc = -errno;
                if (base != MAP_FAILED)
                        munmap(base, reserve);
                free(m);
                return rc;
        }
        m->pg_shift = (unsigned)__builtin_ctzll(page_up(1));
        m->map_bytes = page_up(((reserve >> m->pg_shift) + 63) / 64 * 8);
        void *map = mmap(NULL, m->map_bytes, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (map == MAP_FAILED) {
                int rc = -errno;
                munmap(base, reserve);
                free(m);
                return rc;
        }
        m->map = map;
        m->base = base;
        m->reserved = reserve;
        m->open_len = want;
        be->priv = m;
        be->size_bytes = p->size_bytes;
        be->volatile_cache = false;
        be->alloc_unit = (uint32_t)sysconf(_SC_PAGESIZE); /* pages are dropped whole */
        return 0;
}

static void mem_close(struct backend *be)
{
        struct mem_be *m = be->priv;
        if (m) {
                munmap(m->base, m->reserved);
                munmap((void *)m->map, m->map_bytes);
                free(m);
        }
        be->priv = NULL;
}

static int mem_resize(struct backend *be, uint64_t size_bytes)
{
        struct mem_be *m = be->priv;
        uint64_t want = page_up(size_bytes);
        if (size_bytes == 0)
                return -EINVAL;
        if (want > m->reserved)
                return -ENOSPC;
        if (size_bytes < be->size_bytes) {
                /* Zero the partial page past the end, drop whole pages. */
                uint64_t keep = page_up(size_bytes);
                memset(m->base + size_bytes, 0, keep - size_bytes);
                if (m->open_len > keep)
                        drop_pages(m, keep, m->open_len);
        } else if (want > m->open_len) {
                if (mprotect(m->base + m->open_len, want - m->open_len, PROT_READ | PROT_WRITE))
                        return -errno;
                m->open_len = want;
        }
        be->size_bytes = size_bytes;
        return 0;
}

static void mem_submit(struct backend *be, struct core_req *req, enum core_op op, uint64_t off,
                       uint64_t len, const struct iovec *iov, int iovcnt, bool fua)
{
        (void)fua;
        struct mem_be *m = be->priv;
        uint8_t *base = m->base + off;
        uint64_t done = 0;
        switch (op) {
        case CORE_OP_READ:
        case CORE_OP_WRITE:
                for (int i = 0; i < iovcnt && done < len; i++) {
                        uint64_t n = iov[i].iov_len < len - done ? iov[i].iov_len : len - done;
                        if (op == CORE_OP_READ)
                                memcpy(iov[i].iov_base, base + done, n);
                        else
                                memcpy(base + done, iov[i].iov_base, n);
                        done += n;
                }
                rt_count_copy(RT_COPY_BACKEND_MEM, done);
                if (op == CORE_OP_WRITE && done)
                        map_mark(m, off >> m->pg_shift, (off + done - 1) >> m->pg_shift, true);
                break;
        case CORE_OP_WRITE_ZEROES: {
                /* Zero the partial pages at the ends, drop the whole pages between. */
                uint64_t pg = 1ull << m->pg_shift;
                uint64_t a = page_up(off), b = (off + len) & ~(pg - 1);
                if (a < b) {
                        memset(base, 0, a - off);
                        drop_pages(m, a, b);
                        memset(m->base + b, 0, off + len - b);
                } else {
                        memset(base, 0, len);
                }
                done = len;
                break;
        }
        case CORE_OP_FLUSH:
                break;
        default:
                backend_sync_done(req, -EOPNOTSUPP);
                return;
        }
        backend_sync_done(req, (int)(done > 0x7fffffff ? 0x7fffffff : done));
}

static int mem_rw_now(struct backend *be, enum core_op op, uint64_t off, uint64_t len, void *buf)
{
        struct mem_be *m = be->priv;
        if (op == CORE_OP_READ) {
                memcpy(buf, m->base + off, len);
                return 0;
        }
        if (op != CORE_OP_WRITE)
                return -EOPNOTSUPP;
        memcpy(m->base + off, buf, len);
        if (len)
                map_mark(m, off >> m->pg_shift, (off + len - 1) >> m->pg_shift, true);
        return 0;
}

/* The run of pages with the status of the one holding off, within [off, off + len). */
static int mem_map_status(struct backend *be, uint64_t off, uint64_t len, enum core_prov *st,
                          uint64_t *run)
{
        struct mem_be *m = be->priv;
        uint64_t end = off + len, p = off >> m->pg_shift;
        uint64_t last = (end - 1) >> m->pg_shift;
        if (len == 0 || end > m->reserved)
                return -EINVAL;
        bool on = map_bit(m, p);
        uint64_t same = on ? ~0ull : 0;
        for (p++; p <= last; p++) {
                if (!(p & 63) && last - p >= 63 &&
                    atomic_load_explicit(&m->map[p >> 6], memory_order_acquire) == same) {
                        p += 63; /* 64 pages alike */
                        continue;
                }
                if (map_bit(m, p) != on)
                        break;
        }
        uint64_t stop = p << m->pg_shift;
        *st = on ? CORE_PROV_MAPPED : CORE_PROV_DEALLOCATED;
        *run = (stop < end ? stop : end) - off;
        return 0;
}

static int64_t mem_allocated(struct backend *be)
{
        struct mem_be *m = be->priv;
        return (int64_t)(atomic_load_explicit(&m->pages, memory_order_relaxed) << m->pg_shift);
}

const struct backend_ops backend_mem_ops = {
    .name = "mem",
    .open = mem_open,
    .close = mem_close,
    .submit = mem_submit,
    .rw_now = mem_rw_now,
    .resize = mem_resize,
    .map_status = mem_map_status,
    .allocated = mem_allocated,
};
