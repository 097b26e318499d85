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
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/sync.h"

#define MEM_GROW_FACTOR 4
#define MEM_RESERVE_MIN (64ull << 30)

struct mem_be {
        uint8_t *base;     /* never moves while the backend is open */
        uint64_t reserved; /* bytes of address space at base */
        uint64_t open_len; /* bytes from base made accessible (page multiple) */
};

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
                        madvise(m->base + keep, m->open_len - keep, MADV_DONTNEED);
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
        uint8_t *base = ((struct mem_be *)be->priv)->base + off;
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
                break;
        case CORE_OP_WRITE_ZEROES: {
                /* Zero the partial pages at the ends, drop the whole pages between. */
                uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
                uint64_t a = page_up(off), b = (off + len) & ~(pg - 1);
                if (a < b) {
                        uint8_t *m0 = ((struct mem_be *)be->priv)->base;
                        memset(base, 0, a - off);
                        if (madvise(m0 + a, b - a, MADV_DONTNEED))
                                memset(m0 + a, 0, b - a);
                        memset(m0 + b, 0, off + len - b);
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

const struct backend_ops backend_mem_ops = {
    .name = "mem",
    .open = mem_open,
    .close = mem_close,
    .submit = mem_submit,
    .resize = mem_resize,
};
