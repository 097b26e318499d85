/*
 * File backend: a sparse file driven through the reactor's io_uring ring.
 *
 * Reads and writes go through an O_DIRECT descriptor when the file system
 * allows it and the I/O is aligned, otherwise through a buffered one (both
 * on the same file; the kernel keeps them coherent).  FUA writes carry
 * RWF_DSYNC; FLUSH is fdatasync (IORING_FSYNC_DATASYNC).  WRITE_ZEROES
 * punches a hole (reads return zeroes, space is returned), falling back to
 * FALLOC_FL_ZERO_RANGE where punching is not supported.
 *
 * Anchoring (WRITE_ZEROES with CORE_REQ_ANCHOR) is FALLOC_FL_ZERO_RANGE:
 * ext4 and xfs keep the blocks allocated as unwritten extents, which read
 * zeroes and which FIEMAP flags FIEMAP_EXTENT_UNWRITTEN, so the file
 * system stays the one provisioning map (crash-safe, nothing of ours to
 * keep).  It is offered only where that holds, decided at open: a regular
 * file on ext4 or xfs whose FIEMAP works.  Elsewhere (tmpfs, other file
 * systems, block devices) the namespace cannot anchor (SCSI ANC_SUP=0).
 *
 * With shared_reservations the reservation state lives in files next to the
 * data file, shared by every gateway exporting it (file_pr.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <linux/falloc.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/file_pr.h"
#include "rt/log.h"

struct file_be {
        int fd_buf;
        int fd_direct; /* -1 when the file system refuses O_DIRECT */
        uint32_t direct_align;
        bool punch_ok;
        struct file_pr *pr; /* shared_reservations: the state next to the file */
        char path[4096];    /* for log lines */
};

/* Can this file keep zeroed blocks allocated and show them as unwritten extents? */
static bool anchor_capable(int fd, const struct stat *st)
{
        struct statfs sfs;
        struct fiemap fm;
        if (!S_ISREG(st->st_mode) || fstatfs(fd, &sfs))
                return false;
        if (sfs.f_type != EXT4_SUPER_MAGIC && sfs.f_type != XFS_SUPER_MAGIC)
                return false;
        memset(&fm, 0, sizeof(fm));
        fm.fm_length = FIEMAP_MAX_OFFSET; /* count the extents only: does FIEMAP work? */
        return ioctl(fd, FS_IOC_FIEMAP, &fm) == 0;
}

static int file_open(struct backend *be, const struct backend_params *p)
{
        struct file_be *f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        int flags = O_RDWR | O_CLOEXEC | (p->create ? O_CREAT : 0);
        f->fd_buf = open(p->path, flags, 0600); /* a disk: its owner's only */
        if (f->fd_buf < 0) {
                int rc = -errno;
                free(f);
                return rc;
        }
        struct stat st;
        if (fstat(f->fd_buf, &st)) {
                int rc = -errno;
                close(f->fd_buf);
                free(f);
                return rc;
        }
        if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode)) {
                close(f->fd_buf);
                free(f);
                return -EINVAL;
        }
        uint64_t size = (uint64_t)st.st_size;
        if (S_ISREG(st.st_mode) && p->size_bytes > size) {
                /* Sparse growth: no blocks are allocated until written. */
                if (ftruncate(f->fd_buf, (off_t)p->size_bytes)) {
                        int rc = -errno;
                        close(f->fd_buf);
                        free(f);
                        return rc;
                }
                size = p->size_bytes;
        }
        f->fd_direct = open(p->path, O_RDWR | O_CLOEXEC | O_DIRECT);
        f->direct_align = 512;
        f->punch_ok = true;
        snprintf(f->path, sizeof(f->path), "%s", p->path);
        be->priv = f;
        be->size_bytes = p->size_bytes ? p->size_bytes : size;
        be->volatile_cache = true;
        /* Holes are punched in the file system's blocks (st_blksize: 4 KiB on ext4, xfs, tmpfs). */
        be->alloc_unit = st.st_blksize > 0 && !(st.st_blksize & (st.st_blksize - 1))
                             ? (uint32_t)st.st_blksize
                             : 0;
        be->can_anchor = anchor_capable(f->fd_buf, &st);
        if (p->shared_reservations) {
                int rc = file_pr_open(&f->pr, p->path, be);
                if (rc) {
                        if (f->fd_direct >= 0)
                                close(f->fd_direct);
                        close(f->fd_buf);
                        free(f);
                        be->priv = NULL;
                        return rc;
                }
                be->pr_shared = true;
        }
        LOG_DEBUG("file", "%s: %s", p->path, f->fd_direct >= 0 ? "O_DIRECT" : "buffered");
        return 0;
}

static void file_close(struct backend *be)
{
        struct file_be *f = be->priv;
        if (!f)
                return;
        file_pr_close(f->pr);
        be->pr_shared = false;
        if (f->fd_direct >= 0)
                close(f->fd_direct);
        close(f->fd_buf);
        free(f);
        be->priv = NULL;
}

static bool aligned(const struct file_be *f, uint64_t off, uint64_t len, const struct iovec *iov,
                    int iovcnt)
{
        uint64_t a = f->direct_align - 1;
        if ((off | len) & a)
                return false;
        for (int i = 0; i < iovcnt; i++)
                if (((uintptr_t)iov[i].iov_base | iov[i].iov_len) & a)
                        return false;
        return true;
}

static void file_submit(struct backend *be, struct core_req *req, enum core_op op, uint64_t off,
                        uint64_t len, const struct iovec *iov, int iovcnt, bool fua);

/* The I/O in flight is recorded in req->bio, so a refused one can be retried another way. */
static void file_done(struct rt_event *ev, int res)
{
        struct core_req *req = (struct core_req *)((char *)ev - offsetof(struct core_req, ev));
        struct backend *be = req->bio.be;
        struct file_be *f = be->priv;
        if (res == -EINVAL && req->bio.direct) {
                /* The file system wants larger O_DIRECT alignment: raise it and go buffered. */
                if (f->direct_align < 4096) {
                        f->direct_align = 4096;
                        LOG_INFO("file",
                                 "%s: O_DIRECT needs 4 KiB alignment; smaller I/O is buffered",
                                 f->path);
                }
                req->bio.direct = false;
                file_submit(be, req, req->bio.op, req->bio.off, req->bio.len, req->bio.iov,
                            req->bio.iovcnt, req->bio.fua);
                return;
        }
        if ((res == -EOPNOTSUPP || res == -EINVAL) && req->bio.op == CORE_OP_WRITE_ZEROES &&
            f->punch_ok && !(req->flags & CORE_REQ_ANCHOR)) {
                f->punch_ok = false;
                file_submit(be, req, req->bio.op, req->bio.off, req->bio.len, NULL, 0, false);
                return;
        }
        if (res >= 0 && (req->bio.op == CORE_OP_READ || req->bio.op == CORE_OP_WRITE) &&
            (uint64_t)res != req->bio.len) {
                LOG_WARN("file", "%s: short %s at %llu: %d of %llu bytes", f->path,
                         req->bio.op == CORE_OP_READ ? "read" : "write",
                         (unsigned long long)req->bio.off, res, (unsigned long long)req->bio.len);
                res = -EIO;
        }
        core_backend_done(req, res);
}

static void file_submit(struct backend *be, struct core_req *req, enum core_op op, uint64_t off,
                        uint64_t len, const struct iovec *iov, int iovcnt, bool fua)
{
        struct file_be *f = be->priv;
        struct io_uring_sqe *sqe = rt_sqe(req->reactor);
        req->ev.fn = file_done;
        backend_bio_set(req, be, op, off, len, iov, iovcnt, fua);
        switch (op) {
        case CORE_OP_READ:
        case CORE_OP_WRITE: {
                bool direct = f->fd_direct >= 0 && aligned(f, off, len, iov, iovcnt);
                req->bio.direct = direct;
                int fd = direct ? f->fd_direct : f->fd_buf;
                if (op == CORE_OP_READ)
                        io_uring_prep_readv(sqe, fd, iov, (unsigned)iovcnt, off);
                else {
                        io_uring_prep_writev(sqe, fd, iov, (unsigned)iovcnt, off);
                        if (fua)
                                sqe->rw_flags = RWF_DSYNC;
                }
                break;
        }
        case CORE_OP_FLUSH:
                io_uring_prep_fsync(sqe, f->fd_buf, IORING_FSYNC_DATASYNC);
                break;
        case CORE_OP_WRITE_ZEROES: {
                bool punch = f->punch_ok && !(req->flags & CORE_REQ_ANCHOR);
                io_uring_prep_fallocate(sqe, f->fd_buf,
                                        punch ? FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE
                                              : FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE,
                                        off, len);
                break;
        }
        default:
                io_uring_prep_nop(sqe);
                break;
        }
        io_uring_sqe_set_data(sqe, &req->ev);
}

/*
 * A regular file is truncated to the new size: growing is sparse (no
 * blocks allocated until written, reads return zeroes), shrinking returns
 * the space past the end.  A block device cannot change size here; it may
 * only be "resized" within what the device already has.
 */
static int file_resize(struct backend *be, uint64_t size_bytes)
{
        struct file_be *f = be->priv;
        struct stat st;
        if (size_bytes == 0 || size_bytes > (uint64_t)INT64_MAX)
                return -EINVAL;
        if (fstat(f->fd_buf, &st))
                return -errno;
        if (S_ISBLK(st.st_mode)) {
                off_t end = lseek(f->fd_buf, 0, SEEK_END);
                if (end < 0)
                        return -errno;
                if (size_bytes > (uint64_t)end)
                        return -ENOSPC;
        } else if (ftruncate(f->fd_buf, (off_t)size_bytes)) {
                return -errno;
        }
        be->size_bytes = size_bytes;
        LOG_INFO("file", "%s: resized to %llu bytes", f->path, (unsigned long long)size_bytes);
        return 0;
}

/*
 * Of a range SEEK_DATA found no data in, [off, off + len): anchored
 * (unwritten extents: space kept) or deallocated (no extent), and for how
 * long.  FIEMAP names the extents from off; a run ends where the status
 * changes or the extents asked for run out (the caller asks again).
 */
static void file_nodata_status(struct file_be *f, uint64_t off, uint64_t len, enum core_prov *st,
                               uint64_t *run)
{
        enum { NEXT = 16 };
        /* struct fiemap and the extents after it (its flexible array member). */
        uint64_t q[(sizeof(struct fiemap) + NEXT * sizeof(struct fiemap_extent)) / 8];
        struct fiemap *fm = (struct fiemap *)q;
        *st = CORE_PROV_DEALLOCATED;
        *run = len;
        memset(q, 0, sizeof(q));
        fm->fm_start = off;
        fm->fm_length = len;
        fm->fm_extent_count = NEXT;
        if (ioctl(f->fd_buf, FS_IOC_FIEMAP, fm) || fm->fm_mapped_extents == 0)
                return; /* no extent at all: a hole */
        uint64_t end = off + len, at = off;
        for (uint32_t i = 0; i < fm->fm_mapped_extents && i < NEXT; i++) {
                const struct fiemap_extent *e = &fm->fm_extents[i];
                uint64_t e_end = e->fe_logical + e->fe_length;
                if (e_end <= at)
                        continue;
                enum core_prov s =
                    (e->fe_flags & FIEMAP_EXTENT_UNWRITTEN) ? CORE_PROV_ANCHORED : CORE_PROV_MAPPED;
                if (e->fe_logical > at) { /* a hole before this extent */
                        if (at == off) {
                                *run = (e->fe_logical < end ? e->fe_logical : end) - off;
                                return; /* deallocated */
                        }
                        break;
                }
                if (at == off)
                        *st = s;
                else if (s != *st)
                        break;
                at = e_end < end ? e_end : end;
                if (at == end || (e->fe_flags & FIEMAP_EXTENT_LAST))
                        break;
        }
        if (at > off)
                *run = at - off;
}

/*
 * The file system is the provisioning map: SEEK_DATA/SEEK_HOLE tell which
 * ranges have data (written blocks, and unwritten ones with data in the
 * page cache), and that is exactly what survives a crash.  Where the file
 * can anchor, FIEMAP tells the anchored (unwritten) blocks from holes in
 * the ranges without data.  Where the file system cannot tell (a block
 * device, an old file system), all is reported mapped.
 */
static int file_map_status(struct backend *be, uint64_t off, uint64_t len, enum core_prov *st,
                           uint64_t *run)
{
        struct file_be *f = be->priv;
        *st = CORE_PROV_MAPPED;
        *run = len;
        off_t data = lseek(f->fd_buf, (off_t)off, SEEK_DATA);
        uint64_t nodata = 0; /* bytes without data from off */
        if (data < 0) {
                if (errno != ENXIO) /* ENXIO: no data from off to the end of the file */
                        return 0;   /* cannot tell: mapped */
                nodata = len;
        } else if ((uint64_t)data > off) {
                nodata = (uint64_t)data - off < len ? (uint64_t)data - off : len;
        }
        if (nodata) {
                if (be->can_anchor) {
                        file_nodata_status(f, off, nodata, st, run);
                } else {
                        *st = CORE_PROV_DEALLOCATED;
                        *run = nodata;
                }
                return 0;
        }
        off_t hole = lseek(f->fd_buf, (off_t)off, SEEK_HOLE);
        if (hole > (off_t)off && (uint64_t)hole - off < len)
                *run = (uint64_t)hole - off;
        return 0;
}

static int64_t file_allocated(struct backend *be)
{
        struct file_be *f = be->priv;
        struct stat st;
        if (fstat(f->fd_buf, &st))
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -ENOTSUP;
        return (int64_t)st.st_blocks * 512;
}

/*
 * copy_file_range between two data files (or within one): the kernel
 * reflinks where the file system shares extents (XFS, btrfs), else copies
 * in the page cache; either way no byte comes up to user space.  Through
 * the buffered descriptors: the kernel keeps them coherent with O_DIRECT.
 */
static int64_t file_copy(struct backend *dst, uint64_t dst_off, struct backend *src,
                         uint64_t src_off, uint64_t len)
{
        struct file_be *d = dst->priv, *s = src->priv;
        loff_t in = (loff_t)src_off, out = (loff_t)dst_off;
        ssize_t n = copy_file_range(s->fd_buf, &in, d->fd_buf, &out, len, 0);
        if (n < 0)
                return -errno;
        if (n == 0)
                return -EIO; /* the source ends early: not within the namespace */
        return n;
}

static int file_be_pr_load(struct backend *be, char **text, uint64_t *version)
{
        struct file_be *f = be->priv;
        return f->pr ? file_pr_load(f->pr, text, version) : -EOPNOTSUPP;
}

static int file_be_pr_store(struct backend *be, const char *text, uint64_t *version)
{
        struct file_be *f = be->priv;
        return f->pr ? file_pr_store(f->pr, text, version) : -EOPNOTSUPP;
}

const struct backend_ops backend_file_ops = {
    .name = "file",
    .open = file_open,
    .close = file_close,
    .submit = file_submit,
    .resize = file_resize,
    .map_status = file_map_status,
    .allocated = file_allocated,
    .copy = file_copy,
    .pr_load = file_be_pr_load,
    .pr_store = file_be_pr_store,
};
