/*
 * RAM backend: an anonymous MAP_NORESERVE mapping, so untouched blocks cost
 * no memory and read as zeroes.  Data is lost when the daemon exits (the
 * namespace reports no volatile cache: there is nothing to flush to).
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "backend/sync.h"

static int mem_open(struct backend *be, const struct backend_params *p)
{
        if (p->size_bytes == 0)
                return -EINVAL;
        void *m = mmap(NULL, p->size_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED)
                return -errno;
        be->priv = m;
        be->size_bytes = p->size_bytes;
        be->volatile_cache = false;
        return 0;
}

static void mem_close(struct backend *be)
{
        if (be->priv)
                munmap(be->priv, be->size_bytes);
        be->priv = NULL;
}

static void mem_submit(struct backend *be, struct core_req *req, enum core_op op, uint64_t off,
                       uint64_t len, const struct iovec *iov, int iovcnt, bool fua)
{
        (void)fua;
        uint8_t *base = (uint8_t *)be->priv + off;
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
        case CORE_OP_WRITE_ZEROES:
                memset(base, 0, len);
                done = len;
                break;
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
};
