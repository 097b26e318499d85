/*
 * Null backend: writes are discarded and reads leave the buffer as it is,
 * like SPDK's null bdev.  It exists to measure what the protocol layers
 * cost without any storage behind them.
 */
#include <errno.h>

#include "backend/sync.h"

static int null_open(struct backend *be, const struct backend_params *p)
{
        if (p->size_bytes == 0)
                return -EINVAL;
        be->size_bytes = p->size_bytes;
        be->volatile_cache = false;
        return 0;
}

static void null_close(struct backend *be)
{
        (void)be;
}

static void null_submit(struct backend *be, struct core_req *req, enum core_op op, uint64_t off,
                        uint64_t len, const struct iovec *iov, int iovcnt, bool fua)
{
        (void)be, (void)op, (void)off, (void)iov, (void)iovcnt, (void)fua;
        backend_sync_done(req, (int)(len > 0x7fffffff ? 0x7fffffff : len));
}

static int null_resize(struct backend *be, uint64_t size_bytes)
{
        if (size_bytes == 0)
                return -EINVAL;
        be->size_bytes = size_bytes;
        return 0;
}

const struct backend_ops backend_null_ops = {
    .name = "null",
    .open = null_open,
    .close = null_close,
    .submit = null_submit,
    .resize = null_resize,
};
