/*
 * A namespace's metadata store (core/pistore.h): a second backend instance
 * of the namespace's type, md_per_block bytes per block.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/ns.h"
#include "core/pistore.h"
#include "rt/log.h"

int core_pistore_open(struct core_ns *ns, uint32_t md_per_block, bool reset,
                      struct core_pistore **out, char *err, size_t errlen)
{
        struct core_pistore *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        const struct backend_ops *ops = backend_find(ns->backend_name);
        if (!ops || ns->be.size_shared) {
                /* Shared storage (rbd): its metadata would have to live in the cluster too. */
                free(s);
                snprintf(err, errlen, "no metadata store on the %s backend (yet)",
                         ns->backend_name);
                return -ENOTSUP;
        }
        s->md_per_block = md_per_block;
        s->persistent = strcmp(ops->name, "file") == 0;
        if (s->persistent) {
                snprintf(s->path, sizeof(s->path), "%s/%s.pi", core_state_dir(), ns->name);
                /* A reset starts from an empty file: every block's metadata a hole (escape). */
                if (reset && unlink(s->path) && errno != ENOENT) {
                        int rc = -errno;
                        snprintf(err, errlen, "metadata store %s: %s", s->path, strerror(errno));
                        free(s);
                        return rc;
                }
        }
        struct backend_params bp = {
            .path = s->path,
            .size_bytes = core_ns_blocks(ns) * md_per_block,
            .create = true,
        };
        int rc = ops->open(&s->be, &bp);
        if (rc) {
                snprintf(err, errlen, "metadata store (%s backend) %s: %s", ops->name, s->path,
                         strerror(-rc));
                free(s);
                return rc;
        }
        s->be.ops = ops;
        /* A file left longer by an older, larger format: only our part is used. */
        *out = s;
        return 0;
}

void core_pistore_close(struct core_pistore *s)
{
        if (!s)
                return;
        if (s->be.ops)
                s->be.ops->close(&s->be);
        free(s);
}

int core_pistore_resize(struct core_pistore *s, uint64_t num_blocks)
{
        if (!s->be.ops->resize)
                return -EOPNOTSUPP;
        return s->be.ops->resize(&s->be, num_blocks * s->md_per_block);
}

void core_pistore_submit(struct core_pistore *s, struct core_req *req, enum core_op op,
                         uint64_t lba, uint64_t nlb, const struct iovec *iov, int iovcnt, bool fua)
{
        s->be.ops->submit(&s->be, req, op, lba * s->md_per_block, nlb * s->md_per_block, iov,
                          iovcnt, fua);
}

bool core_pistore_rw_now(struct core_pistore *s, enum core_op op, uint64_t lba, uint64_t nlb,
                         void *buf)
{
        return s->be.ops->rw_now && s->be.ops->rw_now(&s->be, op, lba * s->md_per_block,
                                                      nlb * s->md_per_block, buf) == 0;
}
