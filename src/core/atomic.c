/*
 * Atomic writes (core/atomic.h): the limits, the checks, and the engine
 * that makes a write all-or-nothing across a crash.
 *
 * Paths, chosen at open from the backend: mem gets CORE_ATOMIC_ORDER (its
 * data does not survive a crash, so the range lock of core/req.c, which
 * keeps every other command off an atomic write's blocks, is the whole
 * guarantee); null gets NONE; file gets CORE_ATOMIC_JOURNAL, or
 * CORE_ATOMIC_NATIVE when statx says the backing file or block device
 * takes RWF_ATOMIC writes of at least two blocks: then a write that meets
 * RWF_ATOMIC's rules (a power-of-two length within the unit, naturally
 * aligned, O_DIRECT-aligned buffers) goes to the backend as one
 * pwritev2(RWF_ATOMIC) through an O_DIRECT descriptor, on the journal
 * thread (never on a reactor), and every other atomic write through the
 * journal as before; atomic_write_max is capped by the unit max.  A
 * backend whose store applies a write inside one unit all or nothing (rbd:
 * one RADOS object, backend.atomic_unit) gets CORE_ATOMIC_OBJECT: no
 * journal (a second gateway could not replay one kept on this machine),
 * atomic_write_max capped by the unit, the unit an atomic boundary
 * (core_atomic_limits_make); the range lock of core/req.c keeps this
 * gateway's other commands off an atomic write, the OSD the rest.
 *
 * The intent journal is <state_dir>/<name>.atomic, beside the namespace's
 * metadata.  Layout: two 512-byte checkpoint headers at 0 and 512 (written
 * alternately; the valid one with the larger generation counts), then
 * records from 4096 on: struct core_atomic_rec, the ranges (lba, nlb), the
 * data.  One thread per namespace runs the journal; per batch of queued
 * atomic writes (group commit) it appends their records, makes them
 * durable with ONE fdatasync, then writes each in place (buffered, through
 * its own descriptor of the data file) and completes them on their
 * reactors.  Records are retired by a checkpoint: fdatasync of the data
 * file, then a header naming the last applied sequence number, synced.
 * A checkpoint is taken when the journal is full (it then starts again at
 * 4096), and before a flush or a FUA write completes whenever records were
 * applied since the last one: otherwise recovery could replay an old
 * record over data acknowledged as durable after it.
 *
 * A namespace with metadata (protection information, core/pistore.h): an
 * atomic write's record carries the blocks' metadata (stored form) after
 * their data, and both are applied in place from it -- the data to the
 * data file, then the metadata to the store's file (pfd) -- and both are
 * synced by a checkpoint or a FUA write, and replayed by recovery.  So
 * across kill -9 or a power cut every block of the write has its old data
 * with its old metadata (the record was not whole: nothing of it was
 * applied, since in-place writes wait for the journal sync) or its new
 * data with its new metadata (the whole record replayed over whatever part
 * of the in-place writes got out); no escape step is needed, unlike a
 * plain write's escape -> data -> metadata (core/req.c pi_store_md).  The
 * protection stage checks or generates the PI before the record is made,
 * as for any write; a check that fails journals nothing.  Such a record
 * has one range (WRITE SCATTERED is not run with metadata) and the
 * namespace's md_per_block; a format drains and checkpoints the journal
 * first (core_atomic_pi_quiesce), so no record outlives its format.
 *
 * Recovery at open reads the records from 4096 while they are whole
 * (magic, sizes and checksum), their sequence numbers consecutive; those
 * newer than the checkpoint are written again in place, in order; the
 * first torn record ends the scan (it was never acknowledged: completion
 * waits for the journal sync).  Then a data sync and a new checkpoint.
 *
 * Test hook (all builds): SLATE_FAULT_ATOMIC=record:N | synced:N |
 * inplace:N makes the daemon SIGKILL itself at the Nth journal record
 * (half of it written), after the Nth record's journal sync (before its
 * in-place write), or halfway through the Nth in-place write.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "core/atomic.h"
#include "core/ns.h"
#include "core/pistore.h"
#include "core/req.h"
#include "rt/crc.h"
#include "rt/log.h"

#define JHDR_MAGIC  CORE_ATOMIC_JHDR_MAGIC
#define REC_START   CORE_ATOMIC_REC_START
#define BATCH_MAX   64
#define REC_HDR_MAX (sizeof(struct core_atomic_rec) + CORE_ATOMIC_SCATTER_RANGES * 16u)

/*
 * Linux 6.11 UAPI values (include/uapi/linux/stat.h, fs.h) that Debian 12's
 * glibc and kernel headers lack; a kernel without them ignores the statx
 * mask bit and refuses the pwritev2 flag (EOPNOTSUPP / EINVAL).
 */
#ifndef STATX_WRITE_ATOMIC
#define STATX_WRITE_ATOMIC 0x00010000U
#endif
#ifndef STATX_ATTR_WRITE_ATOMIC
#define STATX_ATTR_WRITE_ATOMIC 0x00400000ULL
#endif
#ifndef STATX_DIOALIGN
#define STATX_DIOALIGN 0x00002000U
#endif
#ifndef RWF_ATOMIC
#define RWF_ATOMIC 0x00000040
#endif
/* Byte offsets in the kernel's struct statx (256 bytes) of the fields glibc 2.36 does not name. */
#define STX_OFF_MASK         0x00
#define STX_OFF_ATTRIBUTES   0x08
#define STX_OFF_DIO_MEM      0x98
#define STX_OFF_DIO_OFF      0x9c
#define STX_OFF_AWU_MIN      0xa8
#define STX_OFF_AWU_MAX      0xac
#define STX_OFF_AWU_SEGMENTS 0xb0

struct core_atomic {
        enum core_atomic_path path;
        struct core_ns *ns;
        int jfd, dfd;
        int pfd;                       /* the metadata store's file (-1: none) */
        uint32_t mdpb;                 /* its bytes per block */
        int nfd;                       /* NATIVE: the data, O_DIRECT */
        struct core_atomic_native nat; /* NATIVE: what the backend offers */
        uint32_t unit_blocks;          /* OBJECT: the store's atomic unit (backend.atomic_unit) */
        char jpath[4200];
        uint64_t head;            /* next record offset */
        uint64_t seq;             /* last sequence number written */
        _Atomic uint64_t applied; /* last sequence number applied in place */
        _Atomic uint64_t ckpt;    /* last sequence number retired by a checkpoint */
        uint64_t gen;             /* checkpoint header generation */
        pthread_t thr;
        bool thr_started;
        pthread_mutex_t mu;
        pthread_cond_t cv;
        struct core_req *qhead, *qtail;
        bool stop;
        bool idle;                                        /* the thread waits for work (under mu) */
        _Alignas(8) uint8_t hbuf[BATCH_MAX][REC_HDR_MAX]; /* record headers of one batch */
        _Atomic uint64_t written; /* last sequence number written to the journal */
        struct jitem {            /* records written, not yet applied in place */
                uint64_t joff;    /* the data's offset in the journal */
                uint32_t nr;
                uint32_t md_len; /* the metadata after the data (one range) */
                struct core_lba_range r[CORE_ATOMIC_SCATTER_RANGES];
                struct core_req *req; /* NULL: acknowledged already (not FUA) */
                uint64_t slots;       /* its range-lock entries, held until applied */
                bool active;          /* its count in ns->atomic_active */
                int res;
        } items[BATCH_MAX];
        int nitems;
        /* Records of the batch gathered for one pwritev from wstart. */
        struct iovec wiov[BATCH_MAX * (2 + CORE_REQ_MAX_IOV)];
        int nw;
        uint64_t wstart;
        uint8_t *bounce; /* copy_file_range fallback (another file system) */
        bool no_cfr;
};

/* ---- Test hook ---- */

enum fault_kind { FAULT_NONE, FAULT_RECORD, FAULT_SYNCED, FAULT_INPLACE };
static enum fault_kind fault_kind;
static long fault_at;
static _Atomic long fault_count[4];

static void fault_init(void)
{
        const char *e = getenv("SLATE_FAULT_ATOMIC");
        if (!e || !*e)
                return;
        const char *c = strchr(e, ':');
        if (!c)
                return;
        long n = atol(c + 1);
        if (n <= 0)
                return;
        if (!strncmp(e, "record", 6))
                fault_kind = FAULT_RECORD;
        else if (!strncmp(e, "synced", 6))
                fault_kind = FAULT_SYNCED;
        else if (!strncmp(e, "inplace", 7))
                fault_kind = FAULT_INPLACE;
        fault_at = n;
        LOG_WARN("atomic", "test hook SLATE_FAULT_ATOMIC=%s: the daemon will kill itself", e);
}

static bool fault_hit(enum fault_kind k)
{
        return fault_kind == k && atomic_fetch_add(&fault_count[k], 1) + 1 == fault_at;
}

static void fault_die(const char *where)
{
        LOG_WARN("atomic", "test hook: SIGKILL %s", where);
        raise(SIGKILL);
}

/* ---- Limits ---- */

const char *core_atomic_path_name(enum core_atomic_path p)
{
        switch (p) {
        case CORE_ATOMIC_ORDER:
                return "order";
        case CORE_ATOMIC_JOURNAL:
                return "journal";
        case CORE_ATOMIC_NATIVE:
                return "native";
        case CORE_ATOMIC_OBJECT:
                return "object";
        default:
                return "none";
        }
}

static uint32_t stx_u32(const uint8_t *b, unsigned off)
{
        uint32_t v;
        memcpy(&v, b + off, sizeof(v));
        return v;
}

bool core_atomic_native_probe(const char *path, struct core_atomic_native *out)
{
        memset(out, 0, sizeof(*out));
        _Alignas(8) uint8_t b[256] = {0};
        if (syscall(SYS_statx, AT_FDCWD, path, 0, STATX_WRITE_ATOMIC | STATX_DIOALIGN, b) != 0)
                return false;
        uint64_t attrs;
        memcpy(&attrs, b + STX_OFF_ATTRIBUTES, sizeof(attrs));
        uint32_t mask = stx_u32(b, STX_OFF_MASK);
        if (!(mask & STATX_WRITE_ATOMIC) || !(attrs & STATX_ATTR_WRITE_ATOMIC))
                return false;
        out->supported = true;
        out->unit_min = stx_u32(b, STX_OFF_AWU_MIN);
        out->unit_max = stx_u32(b, STX_OFF_AWU_MAX);
        out->segments_max = stx_u32(b, STX_OFF_AWU_SEGMENTS);
        if (mask & STATX_DIOALIGN) {
                out->mem_align = stx_u32(b, STX_OFF_DIO_MEM);
                out->offset_align = stx_u32(b, STX_OFF_DIO_OFF);
        }
        return true;
}

static bool pow2(uint64_t v)
{
        return v && !(v & (v - 1));
}

enum core_atomic_path core_atomic_choose_file(const struct core_atomic_native *nat,
                                              uint32_t block_size, uint32_t *cap_bytes)
{
        *cap_bytes = CORE_ATOMIC_MAX_BYTES;
        if (!nat->supported || !nat->unit_min || nat->unit_min > block_size ||
            nat->unit_max < 2u * block_size || !pow2(nat->unit_max) ||
            (nat->offset_align && block_size % nat->offset_align))
                return CORE_ATOMIC_JOURNAL;
        if (nat->unit_max < *cap_bytes)
                *cap_bytes = nat->unit_max;
        return CORE_ATOMIC_NATIVE;
}

bool core_atomic_native_fits(const struct core_atomic_native *nat, uint64_t off, uint64_t len,
                             const struct iovec *iov, int iovcnt)
{
        if (!nat->supported || !pow2(len) || len < nat->unit_min || len > nat->unit_max ||
            off % len || iovcnt < 1 ||
            (uint32_t)iovcnt > (nat->segments_max ? nat->segments_max : 1))
                return false;
        uint64_t ma = nat->mem_align ? nat->mem_align : 512,
                 la = nat->offset_align ? nat->offset_align : 512;
        uint64_t sum = 0;
        for (int i = 0; i < iovcnt; i++) {
                if ((uintptr_t)iov[i].iov_base % ma || iov[i].iov_len % la)
                        return false;
                sum += iov[i].iov_len;
        }
        return sum >= len;
}

/* The largest power of two at most v (v > 0). */
static uint32_t pow2_floor(uint32_t v)
{
        while (v & (v - 1))
                v &= v - 1;
        return v;
}

void core_atomic_limits_make(enum core_atomic_path path, uint32_t max_blocks, uint32_t unit_blocks,
                             struct core_atomic_limits *out)
{
        memset(out, 0, sizeof(*out));
        out->path = path;
        if (path == CORE_ATOMIC_NONE || max_blocks == 0)
                return;
        out->max_blocks = max_blocks;
        out->max_with_boundary = max_blocks;
        if (path == CORE_ATOMIC_OBJECT) {
                /*
                 * One write op on one RADOS object is all or nothing; a write
                 * across two objects is two ops.  So the object (the stripe
                 * unit) is an atomic boundary: a write without ATOMIC BOUNDARY
                 * must stay inside one (core_atomic_check), and an ATOMIC
                 * BOUNDARY must divide it, so that every piece SBC-4 splits the
                 * write into lies in one object and librbd's per-object ops
                 * are those pieces' atomic writes.  No multi-range atomic
                 * WRITE SCATTERED: its ranges may lie in different objects.
                 */
                if (max_blocks > unit_blocks)
                        out->max_blocks = out->max_with_boundary = max_blocks = unit_blocks;
                out->align_blocks = 1;
                out->gran_blocks = 1;
                out->boundary_blocks = unit_blocks;
                out->max_boundary = pow2_floor(max_blocks);
                return;
        }
        out->max_boundary = max_blocks; /* the whole write is atomic, boundary or not */
        out->scatter_max_blocks = max_blocks;
        out->scatter_max_ranges = CORE_ATOMIC_SCATTER_RANGES;
}

void core_ns_atomic_limits(const struct core_ns *ns, struct core_atomic_limits *out)
{
        const struct core_atomic *a = ns->atomic;
        uint32_t max =
            atomic_load_explicit(&ns->atomic_max_bytes, memory_order_relaxed) >> ns->block_shift;
        core_atomic_limits_make(a ? a->path : CORE_ATOMIC_NONE, max, a ? a->unit_blocks : 0, out);
}

/* Whether [lba, lba + nlb) crosses a multiple of bnd (0: there is none). */
static bool crosses(uint64_t lba, uint32_t nlb, uint32_t bnd)
{
        return bnd && nlb && lba / bnd != (lba + nlb - 1) / bnd;
}

enum core_atomic_bad core_atomic_check_limits(const struct core_atomic_limits *l, uint64_t lba,
                                              uint32_t nlb, uint32_t boundary)
{
        if (l->max_blocks == 0)
                return CORE_ATOMIC_UNSUPPORTED;
        if (l->align_blocks > 1 && lba % l->align_blocks)
                return CORE_ATOMIC_BAD_ALIGN;
        if (l->gran_blocks > 1 && nlb % l->gran_blocks)
                return CORE_ATOMIC_BAD_GRAN;
        if (boundary) {
                /* The pieces between multiples of boundary must each lie in one unit. */
                if (boundary > l->max_boundary ||
                    (l->boundary_blocks && l->boundary_blocks % boundary))
                        return CORE_ATOMIC_BAD_BOUNDARY;
                if (nlb > l->max_with_boundary)
                        return CORE_ATOMIC_BAD_LENGTH;
                return CORE_ATOMIC_OK;
        }
        if (nlb > l->max_blocks)
                return CORE_ATOMIC_BAD_LENGTH;
        if (crosses(lba, nlb, l->boundary_blocks))
                return CORE_ATOMIC_BAD_CROSSING;
        return CORE_ATOMIC_OK;
}

enum core_atomic_bad core_atomic_check(const struct core_ns *ns, uint64_t lba, uint32_t nlb,
                                       uint32_t boundary)
{
        struct core_atomic_limits l;
        core_ns_atomic_limits(ns, &l);
        return core_atomic_check_limits(&l, lba, nlb, boundary);
}

bool core_atomic_fits_limits(const struct core_atomic_limits *l, uint64_t lba, uint32_t nlb)
{
        /* NVMe: a Write across an atomic boundary (NABSPF) is simply not atomic. */
        return l->max_blocks && nlb <= l->max_blocks && !crosses(lba, nlb, l->boundary_blocks);
}

bool core_atomic_fits(const struct core_ns *ns, uint64_t lba, uint32_t nlb)
{
        struct core_atomic_limits l;
        core_ns_atomic_limits(ns, &l);
        return core_atomic_fits_limits(&l, lba, nlb);
}

/* ---- Journal I/O ---- */

static int write_full(int fd, const void *buf, size_t len, uint64_t off)
{
        const uint8_t *p = buf;
        while (len) {
                ssize_t n = pwrite(fd, p, len, (off_t)off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                p += n;
                len -= (size_t)n;
                off += (uint64_t)n;
        }
        return 0;
}

static int writev_full(int fd, struct iovec *iov, int cnt, uint64_t off)
{
        while (cnt > 0) {
                ssize_t n = pwritev(fd, iov, cnt, (off_t)off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                off += (uint64_t)n;
                while (cnt > 0 && (size_t)n >= iov->iov_len) {
                        n -= (ssize_t)iov->iov_len;
                        iov++;
                        cnt--;
                }
                if (cnt > 0) {
                        iov->iov_base = (uint8_t *)iov->iov_base + n;
                        iov->iov_len -= (size_t)n;
                }
        }
        return 0;
}

static int write_header(struct core_atomic *a, uint64_t ckpt)
{
        struct core_atomic_jhdr h;
        memset(&h, 0, sizeof(h));
        memcpy(h.magic, JHDR_MAGIC, 8);
        h.version = 1;
        h.block_size = a->ns->block_size;
        h.gen = a->gen + 1;
        h.ckpt_seq = ckpt;
        h.crc = rt_crc32c(&h, offsetof(struct core_atomic_jhdr, crc));
        int rc = write_full(a->jfd, &h, sizeof(h), (h.gen & 1) * 512);
        if (rc == 0 && fdatasync(a->jfd))
                rc = -errno;
        if (rc == 0) {
                a->gen = h.gen;
                atomic_store_explicit(&a->ckpt, ckpt, memory_order_release);
        }
        return rc;
}

/* The valid header with the larger generation: 1, or 0 when there is none. */
static int read_header(int fd, struct core_atomic_jhdr *out)
{
        int found = 0;
        for (int i = 0; i < 2; i++) {
                struct core_atomic_jhdr h;
                if (pread(fd, &h, sizeof(h), i * 512) != (ssize_t)sizeof(h))
                        continue;
                if (memcmp(h.magic, JHDR_MAGIC, 8) || h.version != 1 ||
                    h.crc != rt_crc32c(&h, offsetof(struct core_atomic_jhdr, crc)))
                        continue;
                if (!found || h.gen > out->gen)
                        *out = h;
                found = 1;
        }
        return found;
}

/* The data of req: a flat view as an iovec clipped to len (cnt entries into out). */
static int data_iov(const struct core_req *req, uint64_t skip, uint64_t len, struct iovec *out)
{
        int n = 0;
        for (int i = 0; i < req->iovcnt && len; i++) {
                uint64_t l = req->iov[i].iov_len;
                if (skip >= l) {
                        skip -= l;
                        continue;
                }
                uint64_t take = l - skip < len ? l - skip : len;
                out[n].iov_base = (uint8_t *)req->iov[i].iov_base + skip;
                out[n].iov_len = take;
                n++;
                len -= take;
                skip = 0;
        }
        return n;
}

/* Ranges of an atomic request (WRITE: one). */
static uint32_t req_ranges(const struct core_req *req, struct core_lba_range *one,
                           const struct core_lba_range **rs)
{
        if (req->op == CORE_OP_WRITE_SCATTERED) {
                *rs = req->ranges;
                return req->nr_ranges;
        }
        one->lba = req->lba;
        one->nlb = req->nlb;
        *rs = one;
        return 1;
}

static void checkpoint_now(struct core_atomic *a, bool reset);

/* Write the gathered records; 0 or -errno. */
static int write_staged(struct core_atomic *a)
{
        int rc = 0;
        if (a->nw)
                rc = writev_full(a->jfd, a->wiov, a->nw, a->wstart);
        a->nw = 0;
        a->wstart = a->head;
        if (rc == 0)
                atomic_store_explicit(&a->written, a->seq, memory_order_release);
        return rc;
}

/*
 * Gather req's record at a->head (header in hb, then req's data); written
 * by write_staged.  0 or -errno.
 */
static int append_record(struct core_atomic *a, struct core_req *req, uint8_t *hb, uint64_t *joff)
{
        struct core_ns *ns = a->ns;
        struct core_lba_range one;
        const struct core_lba_range *rs;
        uint32_t nr = req_ranges(req, &one, &rs);
        uint64_t dlen = 0;
        for (uint32_t i = 0; i < nr; i++)
                dlen += rs[i].nlb << ns->block_shift;
        uint64_t mlen = req->atomic_md ? req->atomic_md_len : 0;
        if (mlen && (nr != 1 || a->pfd < 0 || mlen != rs[0].nlb * a->mdpb))
                return -EINVAL; /* metadata: one range, a store to apply it to */
        struct core_atomic_rec *r = (struct core_atomic_rec *)hb;
        uint32_t hlen = (uint32_t)(sizeof(*r) + nr * 16u);
        uint64_t ddlen = dlen; /* the blocks' data; dlen becomes the record's data_len */
        dlen += mlen;
        if (REC_START + hlen + dlen > CORE_ATOMIC_JOURNAL_BYTES)
                return -EINVAL;
        if (a->head + hlen + dlen > CORE_ATOMIC_JOURNAL_BYTES) {
                /* run_batch applied every record before: nothing is gathered. */
                checkpoint_now(a, true);
                a->wstart = a->head;
        }
        memset(r, 0, sizeof(*r));
        r->magic = CORE_ATOMIC_REC_MAGIC;
        r->hdr_len = hlen;
        r->seq = a->seq + 1;
        r->nr_ranges = nr;
        r->data_len = dlen;
        for (uint32_t i = 0; i < nr; i++) {
                memcpy(hb + sizeof(*r) + i * 16, &rs[i].lba, 8);
                memcpy(hb + sizeof(*r) + i * 16 + 8, &rs[i].nlb, 8);
        }
        struct iovec *iov = a->wiov + a->nw;
        iov[0].iov_base = hb;
        iov[0].iov_len = hlen;
        int n = 1 + data_iov(req, 0, ddlen, iov + 1);
        if (mlen) {
                iov[n].iov_base = (void *)req->atomic_md;
                iov[n].iov_len = mlen;
                n++;
        }
        uint32_t crc = RT_CRC32C_INIT;
        for (int i = 0; i < n; i++)
                crc = rt_crc32c_update(crc, iov[i].iov_base, iov[i].iov_len);
        r->crc = rt_crc32c_final(crc);
        if (fault_hit(FAULT_RECORD)) {
                /* The records before whole, half of this one, then the process dies. */
                write_staged(a);
                uint64_t half = (hlen + dlen) / 2;
                for (int i = 0; i < n && half; i++) {
                        uint64_t l = iov[i].iov_len < half ? iov[i].iov_len : half;
                        if (write_full(a->jfd, iov[i].iov_base, l, a->head))
                                break;
                        a->head += l;
                        half -= l;
                }
                fault_die("mid journal record");
        }
        a->nw += n;
        *joff = a->head + hlen;
        a->head += hlen + dlen;
        a->seq = r->seq;
        atomic_fetch_add_explicit(&ns->atomic_stats.journal_bytes, hlen + dlen,
                                  memory_order_relaxed);
        return 0;
}

/* Copy len bytes of the journal at joff to the data file at doff; 0 or -errno. */
static int copy_out(struct core_atomic *a, int dfd, uint64_t joff, uint64_t doff, uint64_t len)
{
        while (len && !a->no_cfr) {
                loff_t in = (loff_t)joff, out = (loff_t)doff;
                ssize_t n = copy_file_range(a->jfd, &in, dfd, &out, len, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 &&
                    (errno == EXDEV || errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL)) {
                        a->no_cfr = true; /* another file system: through the bounce buffer */
                        break;
                }
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                joff += (uint64_t)n;
                doff += (uint64_t)n;
                len -= (uint64_t)n;
        }
        while (len) {
                size_t chunk = len < CORE_ATOMIC_MAX_BYTES ? len : CORE_ATOMIC_MAX_BYTES;
                ssize_t n = pread(a->jfd, a->bounce, chunk, (off_t)joff);
                if (n <= 0)
                        return n < 0 ? -errno : -EIO;
                int rc = write_full(dfd, a->bounce, (size_t)n, doff);
                if (rc)
                        return rc;
                joff += (uint64_t)n;
                doff += (uint64_t)n;
                len -= (uint64_t)n;
        }
        return 0;
}

/* Write an item's data in place, from its journal record; 0 or -errno. */
static int apply_in_place(struct core_atomic *a, const struct jitem *it)
{
        struct core_ns *ns = a->ns;
        uint64_t joff = it->joff;
        bool die = fault_hit(FAULT_INPLACE);
        for (uint32_t i = 0; i < it->nr; i++) {
                uint64_t len = it->r[i].nlb << ns->block_shift;
                if (die) {
                        /* Half of the first range (at least one block), then die. */
                        uint64_t half = len > ns->block_size
                                            ? (len / 2) & ~(uint64_t)(ns->block_size - 1)
                                            : len;
                        copy_out(a, a->dfd, joff, it->r[i].lba << ns->block_shift, half);
                        fault_die("mid in-place write");
                }
                int rc = copy_out(a, a->dfd, joff, it->r[i].lba << ns->block_shift, len);
                if (rc)
                        return rc;
                joff += len;
        }
        /* Then the metadata (after the data in the record): see core_atomic_pi_* below. */
        if (it->md_len)
                return copy_out(a, a->pfd, joff, it->r[0].lba * a->mdpb, it->md_len);
        return 0;
}

static void defer_done(struct rt_defer *d)
{
        struct core_req *req = (struct core_req *)((char *)d - offsetof(struct core_req, defer));
        core_backend_done(req, req->be_res);
}

static void complete(struct core_req *req, int res)
{
        req->be_res = res;
        req->defer.fn = defer_done;
        rt_defer_remote(req->reactor, &req->defer);
}

/* Data sync, then a header retiring every applied record; reset: restart at REC_START. */
static void checkpoint_now(struct core_atomic *a, bool reset)
{
        if (fdatasync(a->dfd) || (a->pfd >= 0 && fdatasync(a->pfd)))
                LOG_ERR("atomic", "namespace %s: data sync: %s", a->ns->name, strerror(errno));
        uint64_t applied = atomic_load(&a->applied);
        if (write_header(a, applied))
                LOG_ERR("atomic", "namespace %s: journal checkpoint: %s", a->ns->name,
                        strerror(errno));
        atomic_fetch_add_explicit(&a->ns->atomic_stats.checkpoints, 1, memory_order_relaxed);
        if (reset)
                a->head = REC_START;
}

/*
 * Make the pending items durable and apply them: one journal sync for all
 * (group commit), then each in place, then their range locks go; the FUA
 * ones are synced in place too and complete now (the others completed
 * when their records were written).
 */
static void flush_items(struct core_atomic *a)
{
        struct core_ns *ns = a->ns;
        if (!a->nitems)
                return;
        int e = fdatasync(a->jfd) ? -errno : 0;
        atomic_fetch_add_explicit(&ns->atomic_stats.journal_syncs, 1, memory_order_relaxed);
        if (e)
                LOG_ERR("atomic", "namespace %s: journal sync: %s", ns->name, strerror(-e));
        if (fault_hit(FAULT_SYNCED))
                fault_die("after the journal sync, before the in-place write");
        bool fua = false;
        for (int i = 0; i < a->nitems; i++) {
                struct jitem *it = &a->items[i];
                it->res = e ? e : apply_in_place(a, it);
                if (it->res && !it->req)
                        LOG_ERR("atomic",
                                "namespace %s: in-place write of an acknowledged atomic write "
                                "failed (%s); the journal keeps it for the next open",
                                ns->name, strerror(-it->res));
                if (it->req)
                        fua = true;
        }
        atomic_store_explicit(&a->applied, a->seq, memory_order_release);
        int se = fua && (fdatasync(a->dfd) || (a->pfd >= 0 && fdatasync(a->pfd))) ? -errno : 0;
        for (int i = 0; i < a->nitems; i++) {
                struct jitem *it = &a->items[i];
                core_ns_order_release(ns, it->slots, it->active);
                if (it->req) {
                        int res = it->res ? it->res : se;
                        if (!res)
                                atomic_fetch_add_explicit(&ns->atomic_stats.writes, 1,
                                                          memory_order_relaxed);
                        complete(it->req, res);
                }
        }
        a->nitems = 0;
}

/*
 * One batch: each atomic write's record is appended; a write without FUA
 * then completes at once (its record is written, not yet durable: like
 * any write in a volatile cache) while its range lock stays until it is
 * applied, so no command sees the blocks before.  Then flush_items.
 * Flushes and FUA writes queued here (checkpoint requests) get a
 * checkpoint after it.
 */
/*
 * The gathered records: written in one pwritev; then the writes without
 * FUA complete (their range locks stay with the items), then flush_items.
 */
static void commit_staged(struct core_atomic *a)
{
        struct core_ns *ns = a->ns;
        int rc = write_staged(a);
        for (int i = 0; i < a->nitems; i++) {
                struct jitem *it = &a->items[i];
                if (rc) {
                        complete(it->req, rc);
                        continue;
                }
                if (it->req->flags & CORE_REQ_FUA)
                        continue;
                core_req_order_detach(it->req, &it->slots, &it->active);
                atomic_fetch_add_explicit(&ns->atomic_stats.writes, 1, memory_order_relaxed);
                complete(it->req, 0);
                it->req = NULL;
        }
        if (rc) {
                LOG_WARN("atomic", "namespace %s: journal write failed: %s", ns->name,
                         strerror(-rc));
                a->nitems = 0;
                return;
        }
        flush_items(a);
}

/*
 * One batch: the atomic writes' records are gathered and written together;
 * a write without FUA then completes at once (its record is written, not
 * yet durable: like any write into a volatile cache) while its range lock
 * stays until it is applied, so no command sees its blocks before.  One
 * journal sync for the batch (flush_items).  Flushes and FUA writes queued
 * here (checkpoint requests) get a checkpoint after it.
 */
static bool native_write(struct core_atomic *a, struct core_req *req);

static void run_batch(struct core_atomic *a, struct core_req **b, int n)
{
        struct core_ns *ns = a->ns;
        struct core_req *ck[BATCH_MAX];
        int nck = 0;
        a->wstart = a->head;
        for (int i = 0; i < n; i++) {
                struct core_req *req = b[i];
                if (!core_atomic_journaled(req)) {
                        ck[nck++] = req; /* flush or FUA write: a checkpoint */
                        continue;
                }
                if (native_write(a, req))
                        continue;
                /* A full journal checkpoints inside append_record: apply what is gathered first. */
                if (a->head + REC_HDR_MAX + ((uint64_t)req->nlb << ns->block_shift) +
                        (req->atomic_md ? req->atomic_md_len : 0) >
                    CORE_ATOMIC_JOURNAL_BYTES)
                        commit_staged(a);
                struct jitem *it = &a->items[a->nitems];
                int rc = append_record(a, req, a->hbuf[i], &it->joff);
                if (rc) {
                        LOG_WARN("atomic", "namespace %s: journal record refused: %s", ns->name,
                                 strerror(-rc));
                        complete(req, rc);
                        continue;
                }
                struct core_lba_range one;
                const struct core_lba_range *rs;
                it->nr = req_ranges(req, &one, &rs);
                it->md_len = req->atomic_md ? req->atomic_md_len : 0;
                memcpy(it->r, rs, it->nr * sizeof(*rs));
                it->req = req;
                it->slots = 0;
                it->active = false;
                it->res = 0;
                a->nitems++;
        }
        commit_staged(a);
        if (nck) {
                checkpoint_now(a, false);
                for (int i = 0; i < nck; i++)
                        complete(ck[i], 0);
        }
}

static void *journal_main(void *arg)
{
        struct core_atomic *a = arg;
        struct core_req *b[BATCH_MAX];
        for (;;) {
                pthread_mutex_lock(&a->mu);
                while (!a->qhead && !a->stop) {
                        a->idle = true;
                        pthread_cond_wait(&a->cv, &a->mu);
                        a->idle = false;
                }
                if (!a->qhead && a->stop) {
                        pthread_mutex_unlock(&a->mu);
                        break;
                }
                int n = 0;
                while (a->qhead && n < BATCH_MAX) {
                        b[n++] = a->qhead;
                        a->qhead = a->qhead->jnext;
                }
                if (!a->qhead)
                        a->qtail = NULL;
                pthread_mutex_unlock(&a->mu);
                run_batch(a, b, n);
        }
        return NULL;
}

static void enqueue(struct core_atomic *a, struct core_req *req)
{
        req->jnext = NULL;
        pthread_mutex_lock(&a->mu);
        if (a->qtail)
                a->qtail->jnext = req;
        else
                a->qhead = req;
        a->qtail = req;
        if (a->idle) /* the thread takes the whole queue when it wakes: one signal */
                pthread_cond_signal(&a->cv);
        pthread_mutex_unlock(&a->mu);
}

bool core_atomic_journaled(const struct core_req *req)
{
        const struct core_atomic *a = req->ns->atomic;
        if (!a || (a->path != CORE_ATOMIC_JOURNAL && a->path != CORE_ATOMIC_NATIVE) ||
            !(req->flags & CORE_REQ_ATOMIC))
                return false;
        /* COMPARE AND WRITE: its write half, after the compare (core/req.c). */
        if (req->op == CORE_OP_WRITE || req->op == CORE_OP_COMPARE_AND_WRITE)
                /* One block's data is atomic by itself; with its metadata it is not. */
                return req->nlb > 1 || req->pix.mdpb;
        return req->op == CORE_OP_WRITE_SCATTERED;
}

void core_atomic_submit(struct core_req *req)
{
        enqueue(req->ns->atomic, req);
}

bool core_atomic_need_checkpoint(const struct core_ns *ns)
{
        const struct core_atomic *a = ns->atomic;
        return a && (a->path == CORE_ATOMIC_JOURNAL || a->path == CORE_ATOMIC_NATIVE) &&
               atomic_load_explicit(&a->written, memory_order_acquire) >
                   atomic_load_explicit(&a->ckpt, memory_order_acquire);
}

void core_atomic_checkpoint(struct core_req *req)
{
        enqueue(req->ns->atomic, req);
}

/* ---- Recovery ---- */

/*
 * NATIVE: req as one pwritev2(RWF_ATOMIC) through the O_DIRECT descriptor
 * when it meets the rules (true: done, completed); false: journal it.
 * Records applied but not retired are retired first, so recovery never
 * replays an older record over what this write put in place.
 */
static bool native_write(struct core_atomic *a, struct core_req *req)
{
        struct core_ns *ns = a->ns;
        if (a->path != CORE_ATOMIC_NATIVE || a->nfd < 0 || req->op != CORE_OP_WRITE ||
            req->atomic_md)
                return false; /* metadata too: the journal carries both */
        uint64_t off = req->lba << ns->block_shift, len = (uint64_t)req->nlb << ns->block_shift;
        if (!core_atomic_native_fits(&a->nat, off, len, req->iov, req->iovcnt))
                return false;
        commit_staged(a);
        if (atomic_load(&a->written) > atomic_load(&a->ckpt))
                checkpoint_now(a, false);
        struct iovec iov[CORE_REQ_MAX_IOV];
        int n = data_iov(req, 0, len, iov);
        int flags = RWF_ATOMIC | ((req->flags & CORE_REQ_FUA) ? RWF_DSYNC : 0);
        ssize_t w = pwritev2(a->nfd, iov, n, (off_t)off, flags);
        if (w == (ssize_t)len) {
                atomic_fetch_add_explicit(&ns->atomic_stats.native_writes, 1, memory_order_relaxed);
                atomic_fetch_add_explicit(&ns->atomic_stats.writes, 1, memory_order_relaxed);
                complete(req, 0);
                return true;
        }
        if (w >= 0) { /* RWF_ATOMIC writes all or nothing; a short one is an error */
                LOG_ERR("atomic", "namespace %s: RWF_ATOMIC write of %llu bytes wrote %zd",
                        ns->name, (unsigned long long)len, w);
                complete(req, -EIO);
                return true;
        }
        if (errno == EINVAL || errno == EOPNOTSUPP) {
                /* Not taken after all (e.g. the device changed): the journal from now on. */
                LOG_WARN("atomic", "namespace %s: RWF_ATOMIC refused (%s); journal from now on",
                         ns->name, strerror(errno));
                a->nat.supported = false;
                return false;
        }
        complete(req, -errno);
        return true;
}

/*
 * Replays the committed records newer than the checkpoint; returns 0 and
 * the counts, or -errno.  Leaves a->seq at the last valid sequence number.
 */
static int recover(struct core_atomic *a, unsigned *replayed, unsigned *discarded)
{
        struct core_ns *ns = a->ns;
        struct core_atomic_jhdr h = {0};
        *replayed = *discarded = 0;
        if (!read_header(a->jfd, &h)) {
                a->gen = 0;
                a->seq = 0;
                atomic_store(&a->ckpt, 0);
                return 0; /* new (or never checkpointed): nothing was acknowledged */
        }
        a->gen = h.gen;
        atomic_store(&a->ckpt, h.ckpt_seq);
        a->seq = h.ckpt_seq;
        uint64_t off = REC_START, prev = 0;
        uint64_t max_data = CORE_ATOMIC_MAX_BYTES; /* no atomic write is longer */
        /* Grown to the largest record met: most journals hold small writes,
         * and a 1 MiB buffer for each recovery costs more than the replay. */
        size_t cap = 0;
        uint8_t *buf = NULL;
        uint64_t nblocks = core_ns_blocks(ns);
        for (;;) {
                struct core_atomic_rec r;
                if (pread(a->jfd, &r, sizeof(r), (off_t)off) != (ssize_t)sizeof(r) ||
                    r.magic != CORE_ATOMIC_REC_MAGIC)
                        break;
                bool sane = r.nr_ranges >= 1 && r.nr_ranges <= CORE_ATOMIC_SCATTER_RANGES &&
                            r.hdr_len == sizeof(r) + r.nr_ranges * 16u && r.data_len <= max_data &&
                            off + r.hdr_len + r.data_len <= CORE_ATOMIC_JOURNAL_BYTES;
                uint64_t total = sane ? r.hdr_len + r.data_len : 0;
                if (sane && total > cap) {
                        uint8_t *nb = realloc(buf, total);
                        if (!nb) {
                                free(buf);
                                return -ENOMEM;
                        }
                        buf = nb;
                        cap = total;
                }
                if (!sane || pread(a->jfd, buf, total, (off_t)off) != (ssize_t)total) {
                        if (r.seq > h.ckpt_seq)
                                (*discarded)++;
                        break;
                }
                struct core_atomic_rec *rp = (struct core_atomic_rec *)buf;
                uint32_t want = rp->crc;
                rp->crc = 0;
                if (rt_crc32c(buf, total) != want) {
                        if (r.seq > h.ckpt_seq && (!prev || r.seq == prev + 1))
                                (*discarded)++;
                        break;
                }
                if (prev && r.seq != prev + 1)
                        break; /* an older record left from before the last restart */
                prev = r.seq;
                if (r.seq > h.ckpt_seq) {
                        /* Check every range before writing any. */
                        uint64_t sum = 0;
                        bool ok = true;
                        for (uint32_t i = 0; i < r.nr_ranges; i++) {
                                uint64_t lba, nlb;
                                memcpy(&lba, buf + sizeof(r) + i * 16, 8);
                                memcpy(&nlb, buf + sizeof(r) + i * 16 + 8, 8);
                                if (lba > nblocks || nlb > nblocks - lba)
                                        ok = false;
                                sum += nlb << ns->block_shift;
                        }
                        /* The rest is the blocks' metadata (one range; core_atomic_pi_*). */
                        uint64_t mlen = r.data_len - (sum <= r.data_len ? sum : r.data_len);
                        if (mlen) {
                                uint64_t nlb0;
                                memcpy(&nlb0, buf + sizeof(r) + 8, 8);
                                if (r.nr_ranges != 1 || a->pfd < 0 || !a->mdpb ||
                                    mlen != nlb0 * a->mdpb)
                                        ok = false;
                        }
                        if (!ok || sum + mlen != r.data_len) {
                                LOG_WARN("atomic",
                                         "namespace %s: journal record %llu outside "
                                         "the namespace: not replayed",
                                         ns->name, (unsigned long long)r.seq);
                                (*discarded)++;
                                break;
                        }
                        uint64_t doff = r.hdr_len;
                        for (uint32_t i = 0; i < r.nr_ranges; i++) {
                                uint64_t lba, nlb;
                                memcpy(&lba, buf + sizeof(r) + i * 16, 8);
                                memcpy(&nlb, buf + sizeof(r) + i * 16 + 8, 8);
                                uint64_t len = nlb << ns->block_shift;
                                int rc =
                                    write_full(a->dfd, buf + doff, len, lba << ns->block_shift);
                                if (rc) {
                                        free(buf);
                                        return rc;
                                }
                                doff += len;
                        }
                        if (mlen) {
                                uint64_t lba0;
                                memcpy(&lba0, buf + sizeof(r), 8);
                                int rc = write_full(a->pfd, buf + doff, mlen, lba0 * a->mdpb);
                                if (rc) {
                                        free(buf);
                                        return rc;
                                }
                        }
                        (*replayed)++;
                        a->seq = r.seq;
                }
                off += total;
        }
        free(buf);
        if (prev > a->seq)
                a->seq = prev;
        if (*replayed && (fdatasync(a->dfd) || (a->pfd >= 0 && fdatasync(a->pfd))))
                return -errno;
        atomic_store(&a->applied, a->seq);
        atomic_store(&a->written, a->seq);
        return 0;
}

int core_atomic_replay_fds(int jfd, int dfd, uint32_t block_shift, uint64_t nblocks,
                           unsigned *replayed, unsigned *discarded)
{
        return core_atomic_replay_fds_md(jfd, dfd, -1, 0, block_shift, nblocks, replayed,
                                         discarded);
}

int core_atomic_replay_fds_md(int jfd, int dfd, int pfd, uint32_t mdpb, uint32_t block_shift,
                              uint64_t nblocks, unsigned *replayed, unsigned *discarded)
{
        struct core_ns *ns = calloc(1, sizeof(*ns));
        struct core_atomic *a = calloc(1, sizeof(*a));
        int rc = -ENOMEM;
        if (ns && a) {
                snprintf(ns->name, sizeof(ns->name), "replay");
                ns->block_shift = block_shift;
                ns->block_size = 1u << block_shift;
                atomic_init(&ns->num_blocks, nblocks);
                a->ns = ns;
                a->jfd = jfd;
                a->dfd = dfd;
                a->pfd = pfd;
                a->mdpb = pfd >= 0 ? mdpb : 0;
                rc = recover(a, replayed, discarded);
        }
        free(a);
        free(ns);
        return rc;
}

/* ---- Open, close, configuration ---- */

/* A file namespace: NATIVE when the backing store takes RWF_ATOMIC, else JOURNAL. */
static enum core_atomic_path native_choose(struct core_atomic *a)
{
        struct core_ns *ns = a->ns;
        uint32_t cap;
        core_atomic_native_probe(ns->path, &a->nat);
        if (core_atomic_choose_file(&a->nat, ns->block_size, &cap) != CORE_ATOMIC_NATIVE)
                return CORE_ATOMIC_JOURNAL;
        a->nfd = open(ns->path, O_RDWR | O_DIRECT | O_CLOEXEC);
        if (a->nfd < 0) {
                LOG_WARN("atomic", "namespace %s: %s with O_DIRECT: %s; journal", ns->name,
                         ns->path, strerror(errno));
                return CORE_ATOMIC_JOURNAL;
        }
        if (atomic_load(&ns->atomic_max_bytes) > cap) {
                LOG_INFO("atomic", "namespace %s: atomic_write_max %u capped at the unit max %u",
                         ns->name, atomic_load(&ns->atomic_max_bytes), cap);
                atomic_store(&ns->atomic_max_bytes, cap);
        }
        return CORE_ATOMIC_NATIVE;
}

/* The metadata store's file, when the namespace has one that persists; 0 or -errno. */
static int pfd_open(struct core_atomic *a)
{
        const struct core_pistore *ps = a->ns->pistore;
        a->mdpb = 0;
        if (!ps || !ps->persistent)
                return 0;
        a->pfd = open(ps->path, O_RDWR | O_CLOEXEC);
        if (a->pfd < 0)
                return -errno;
        a->mdpb = ps->md_per_block;
        return 0;
}

void core_atomic_pi_quiesce(struct core_ns *ns)
{
        struct core_atomic *a = ns->atomic;
        if (!a || !a->thr_started)
                return;
        for (;;) {
                pthread_mutex_lock(&a->mu);
                if (!a->qhead && a->idle)
                        break; /* every record applied; nothing new comes (pi_quiesce) */
                pthread_mutex_unlock(&a->mu);
                struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};
                nanosleep(&ts, NULL);
        }
        if (atomic_load(&a->applied) > atomic_load(&a->ckpt))
                checkpoint_now(a, true);
        if (a->pfd >= 0)
                close(a->pfd);
        a->pfd = -1;
        a->mdpb = 0;
        pthread_mutex_unlock(&a->mu);
}

void core_atomic_pi_resume(struct core_ns *ns)
{
        struct core_atomic *a = ns->atomic;
        if (!a || !a->thr_started)
                return;
        pthread_mutex_lock(&a->mu);
        if (pfd_open(a))
                LOG_ERR("atomic",
                        "namespace %s: metadata store %s: %s; atomic writes with metadata refused",
                        ns->name, ns->pistore->path, strerror(errno));
        pthread_mutex_unlock(&a->mu);
}

int core_atomic_open(struct core_ns *ns, char *err, size_t errlen)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, fault_init);
        struct core_atomic *a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->ns = ns;
        a->jfd = a->dfd = a->nfd = a->pfd = -1;
        pthread_mutex_init(&a->mu, NULL);
        pthread_cond_init(&a->cv, NULL);
        if (!strcmp(ns->backend_name, "mem"))
                a->path = CORE_ATOMIC_ORDER;
        else if (!strcmp(ns->backend_name, "file"))
                a->path = native_choose(a);
        else if (ns->be.atomic_unit >= ns->block_size)
                a->path = CORE_ATOMIC_OBJECT;
        else
                a->path = CORE_ATOMIC_NONE;
        ns->atomic = a;
        uint32_t want = atomic_load(&ns->atomic_max_bytes);
        if (a->path == CORE_ATOMIC_NONE) {
                if (want)
                        LOG_WARN("atomic",
                                 "namespace %s: atomic_write_max %u ignored: the %s backend "
                                 "offers no atomic writes here",
                                 ns->name, want, ns->backend_name);
                atomic_store(&ns->atomic_max_bytes, 0);
        }
        if (a->path == CORE_ATOMIC_OBJECT) {
                a->unit_blocks = ns->be.atomic_unit >> ns->block_shift;
                if (want > ns->be.atomic_unit) {
                        LOG_WARN("atomic",
                                 "namespace %s: atomic_write_max %u above the %s backend's "
                                 "atomic unit: %u",
                                 ns->name, want, ns->backend_name, ns->be.atomic_unit);
                        atomic_store(&ns->atomic_max_bytes, ns->be.atomic_unit);
                }
        }
        if (a->path != CORE_ATOMIC_JOURNAL && a->path != CORE_ATOMIC_NATIVE) {
                LOG_INFO("atomic", "namespace %s: atomic writes: %s, up to %u bytes%s", ns->name,
                         core_atomic_path_name(a->path), atomic_load(&ns->atomic_max_bytes),
                         a->path == CORE_ATOMIC_OBJECT ? ", none across an object boundary" : "");
                return 0;
        }
        snprintf(a->jpath, sizeof(a->jpath), "%s/%s.atomic", core_state_dir(), ns->name);
        a->bounce = malloc(CORE_ATOMIC_MAX_BYTES);
        if (!a->bounce) {
                core_atomic_close(ns);
                return -ENOMEM;
        }
        a->jfd = open(a->jpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        a->dfd = open(ns->path, O_RDWR | O_CLOEXEC);
        int rc = 0;
        if (a->jfd < 0 || a->dfd < 0) {
                rc = -errno;
                snprintf(err, errlen, "atomic-write journal %s: %s", a->jpath, strerror(errno));
                goto fail;
        }
        rc = pfd_open(a);
        if (rc) {
                snprintf(err, errlen, "metadata store %s: %s", ns->pistore->path, strerror(-rc));
                goto fail;
        }
        unsigned rep, dis;
        rc = recover(a, &rep, &dis);
        if (rc) {
                snprintf(err, errlen, "atomic-write journal %s: recovery: %s", a->jpath,
                         strerror(-rc));
                goto fail;
        }
        atomic_store(&ns->atomic_stats.replayed, rep);
        atomic_store(&ns->atomic_stats.discarded, dis);
        a->head = REC_START;
        rc = write_header(a, a->seq);
        if (rc) {
                snprintf(err, errlen, "atomic-write journal %s: %s", a->jpath, strerror(-rc));
                goto fail;
        }
        if (pthread_create(&a->thr, NULL, journal_main, a)) {
                rc = -EAGAIN;
                snprintf(err, errlen, "atomic-write journal thread: cannot start");
                goto fail;
        }
        a->thr_started = true;
        if (a->path == CORE_ATOMIC_NATIVE)
                LOG_INFO("atomic",
                         "namespace %s: atomic writes: native RWF_ATOMIC on %s (unit %u-%u "
                         "bytes, %u segment(s)), the journal for other atomic writes",
                         ns->name, ns->path, a->nat.unit_min, a->nat.unit_max, a->nat.segments_max);
        LOG_INFO("atomic",
                 "namespace %s: atomic writes: journal %s, up to %u bytes; recovery replayed %u "
                 "record(s), discarded %u torn",
                 ns->name, a->jpath, atomic_load(&ns->atomic_max_bytes), rep, dis);
        return 0;
fail:
        core_atomic_close(ns);
        return rc;
}

void core_atomic_close(struct core_ns *ns)
{
        struct core_atomic *a = ns->atomic;
        if (!a)
                return;
        if (a->thr_started) {
                pthread_mutex_lock(&a->mu);
                a->stop = true;
                pthread_cond_signal(&a->cv);
                pthread_mutex_unlock(&a->mu);
                pthread_join(a->thr, NULL);
                /* A clean close retires every record. */
                if (atomic_load(&a->applied) > atomic_load(&a->ckpt))
                        checkpoint_now(a, true);
        }
        if (a->jfd >= 0)
                close(a->jfd);
        if (a->dfd >= 0)
                close(a->dfd);
        if (a->nfd >= 0)
                close(a->nfd);
        if (a->pfd >= 0)
                close(a->pfd);
        pthread_mutex_destroy(&a->mu);
        pthread_cond_destroy(&a->cv);
        free(a->bounce);
        free(a);
        ns->atomic = NULL;
}

int core_ns_set_atomic_max(struct core_ns *ns, uint32_t bytes, char *err, size_t errlen)
{
        struct core_atomic_limits l;
        core_ns_atomic_limits(ns, &l);
        if (bytes % ns->block_size || bytes > CORE_ATOMIC_MAX_BYTES) {
                snprintf(err, errlen,
                         "atomic_write_max must be a multiple of the block size %u, "
                         "at most %u",
                         ns->block_size, CORE_ATOMIC_MAX_BYTES);
                return -EINVAL;
        }
        if (l.path == CORE_ATOMIC_NATIVE && ns->atomic && bytes > ns->atomic->nat.unit_max &&
            ns->atomic->nat.supported) {
                snprintf(err, errlen, "atomic_write_max above the backend's atomic unit max %u",
                         ns->atomic->nat.unit_max);
                return -EINVAL;
        }
        if (l.path == CORE_ATOMIC_OBJECT && bytes > ns->be.atomic_unit) {
                snprintf(err, errlen,
                         "atomic_write_max above the %s backend's atomic unit %u (a write "
                         "inside one object is atomic, across two it is not)",
                         ns->backend_name, ns->be.atomic_unit);
                return -EINVAL;
        }
        if (bytes && l.path == CORE_ATOMIC_NONE) {
                snprintf(err, errlen, "the %s backend has no atomic writes", ns->backend_name);
                return -EOPNOTSUPP;
        }
        pthread_mutex_lock(&ns->lock);
        uint32_t old = atomic_exchange(&ns->atomic_max_bytes, bytes);
        int rc = old != bytes ? core_ns_save_meta(ns) : 0;
        if (rc)
                atomic_store(&ns->atomic_max_bytes, old);
        pthread_mutex_unlock(&ns->lock);
        if (rc) {
                snprintf(err, errlen, "saving metadata: %s", strerror(-rc));
                return rc;
        }
        if (old != bytes) {
                LOG_INFO("atomic", "namespace %s: atomic_write_max %u -> %u bytes", ns->name, old,
                         bytes);
                struct core_ns_event ev = {
                    .type = CORE_NS_EV_IDENTITY, .ns = ns, .old_val = old, .new_val = bytes};
                core_ns_publish(&ev);
        }
        return 0;
}
