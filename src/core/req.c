/*
 * Request execution: checks common to every personality (the namespace's
 * state through core_ns_check: sanitize, ready, write protection; the
 * reservation through core_ns_pr_conflict; range; buffers), then the op as
 * one or more backend I/Os.
 * The backend knows READ, WRITE, FLUSH and WRITE_ZEROES; compare, compare
 * and write, orwrite, write same and verify are built here, once, for SCSI
 * now and NVMe later.
 *
 * Multi-step ops keep their position in req->stage and continue from
 * core_backend_done().  Read-modify-write ops hold a range lock so two of
 * them never interleave on the same blocks (COMPARE AND WRITE is what
 * cluster file systems use as a lock primitive).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "backend/backend.h"
#include "core/atomic.h"
#include "core/crypt.h"
#include "core/fault.h"
#include "core/media.h"
#include "core/ns.h"
#include "core/pistore.h"
#include "core/provision.h"
#include "core/req.h"
#include "core/flash.h"
#include "rt/log.h"
#include "rt/reactor.h"

enum {
        ST_START = 0,
        ST_READ_FOR_RMW, /* compare / caw / orwrite: medium read into scratch */
        ST_WRITE_RMW,    /* caw / orwrite: writing */
        ST_WRITE_SAME,   /* write same: chunks in flight */
        ST_COMPARE,      /* compare: a scratch-sized piece of the medium being read */
        ST_SIMPLE,       /* one backend op, then done */
        ST_SCATTER,      /* write scattered: one range in flight */
        ST_JOURNAL,      /* atomic write on the journal thread (core/atomic.c) */
        ST_CHECKPOINT,   /* flush / FUA write: the journal's checkpoint after it */
        ST_PI,           /* the protection stage: req->pix.step says where */
};

/* How a request is ordered against atomic writes (req->order). */
enum {
        ORD_NONE = 0,
        ORD_PLAIN,  /* counted in its reactor's plain_inflight slot, no lock */
        ORD_LOCKED, /* holds range-lock entries (lock_slots) */
};

static void finish(struct core_req *req, enum core_status st);
static void crypt_restore(struct core_req *req);
static void pi_leave(struct core_req *req);

/*
 * Statistics (core/stats.h): a request counts as started in
 * core_req_submit and as ended just before its callback, with its status,
 * the data it moved and its latency, for its namespace and its host.
 */
static void account_end(struct core_req *req)
{
        if (!req->counted)
                return;
        req->counted = false;
        struct core_ns *ns = req->ns;
        enum core_op_class c = core_op_class_of(req->op);
        uint64_t bytes = 0;
        if (req->op == CORE_OP_READ || req->op == CORE_OP_WRITE ||
            req->op == CORE_OP_WRITE_SCATTERED || req->op == CORE_OP_COMPARE_AND_WRITE ||
            req->op == CORE_OP_ORWRITE)
                bytes = (uint64_t)req->nlb << ns->block_shift;
        uint64_t lat = rt_now_ns() - req->t_submit;
        core_stats_end(&ns->stats, c, req->status, bytes, lat);
        if (req->host)
                core_stats_end(&req->host->stats, c, req->status, bytes, lat);
        /* Placement/hint counters and the flash model (core/flash.c): one branch when unused. */
        if (req->status == CORE_OK && (ns->flash || req->placement | req->hints)) {
                if (req->op == CORE_OP_FLUSH)
                        core_flash_flushed(ns);
                else
                        core_flash_account(req);
        }
}

static void order_leave(struct core_req *req);

static void fire_cb(struct rt_defer *d)
{
        struct core_req *req = (struct core_req *)((char *)d - offsetof(struct core_req, defer));
        crypt_restore(req);
        if (req->media_heal)
                core_media_done(req, req->status);
        order_leave(req);
        pi_leave(req);
        account_end(req);
        req->cb(req);
}

void core_req_complete(struct core_req *req, enum core_status st)
{
        req->status = st;
        req->defer.fn = fire_cb;
        rt_defer(req->reactor, &req->defer);
}

static uint64_t iov_bytes(const struct core_req *req)
{
        uint64_t n = 0;
        for (int i = 0; i < req->iovcnt; i++)
                n += req->iov[i].iov_len;
        return n;
}

/*
 * Encryption at rest (core/crypt.h).  A write's data is encrypted in place
 * in the issuer's buffer just before it goes to the backend or the atomic
 * journal, and decrypted back in place when the request ends (so a buffer
 * the issuer reuses, the sanitize pattern, a retried request, holds
 * plaintext again): no buffer to allocate or borrow per I/O.  Reads are
 * decrypted in place when the backend completes them.  iov_crypt
 * transforms the request's data: [lba, nlb) for READ and WRITE, each range
 * in turn for WRITE_SCATTERED.
 */
static int iov_crypt(struct core_req *req, bool enc)
{
        struct core_ns *ns = req->ns;
        if (req->op != CORE_OP_WRITE_SCATTERED)
                return core_crypt_iov(ns->crypt, enc, req->lba, ns->block_size, req->iov,
                                      req->iovcnt, 0, (uint64_t)req->nlb << ns->block_shift);
        uint64_t skip = 0;
        for (uint32_t i = 0; i < req->nr_ranges; i++) {
                uint64_t len = req->ranges[i].nlb << ns->block_shift;
                if (len && core_crypt_iov(ns->crypt, enc, req->ranges[i].lba, ns->block_size,
                                          req->iov, req->iovcnt, skip, len))
                        return -EIO;
                skip += len;
        }
        return 0;
}

/*
 * Encrypt (enc) or decrypt a flat buffer of blocks from lba in place; on failure the request
 * ends (a decryption failure as a medium error, an encryption failure as internal) and false
 * is returned.  True without a key.
 */
static bool flat_crypt(struct core_req *req, bool enc, uint64_t lba, uint8_t *buf, uint64_t len)
{
        struct core_ns *ns = req->ns;
        if (!ns->crypt || !core_crypt_buf(ns->crypt, enc, lba, ns->block_size, buf, len))
                return true;
        finish(req, enc ? CORE_E_INTERNAL : CORE_E_MEDIUM_ERROR);
        return false;
}

/* The issuer's plaintext back, once the ciphertext made from it is no longer needed. */
static void crypt_restore(struct core_req *req)
{
        if (!req->crypt_restore)
                return;
        req->crypt_restore = false;
        if (iov_crypt(req, false))
                LOG_ERR("core", "namespace %s: decrypting a write buffer back failed",
                        req->ns->name);
}

/* Copy between the request's iovec and a flat buffer; returns bytes handled. */
static void iov_to_flat(const struct core_req *req, uint8_t *dst, uint64_t skip, uint64_t len)
{
        for (int i = 0; i < req->iovcnt && len; i++) {
                uint64_t l = req->iov[i].iov_len;
                if (skip >= l) {
                        skip -= l;
                        continue;
                }
                uint64_t n = l - skip < len ? l - skip : len;
                memcpy(dst, (uint8_t *)req->iov[i].iov_base + skip, n);
                rt_count_copy(RT_COPY_CORE, n);
                dst += n;
                len -= n;
                skip = 0;
        }
}

/*
 * The range lock (core/ns.h): [lba, lba + nlb) for req, or nothing when
 * it overlaps an entry held by another request (then the caller retries
 * next loop iteration).
 */
static bool range_lock(struct core_req *req, uint64_t lba, uint64_t nlb)
{
        struct core_ns *ns = req->ns;
        bool ok = false;
        pthread_mutex_lock(&ns->rmw_lock);
        for (int i = 0; i < 64; i++) {
                if (!(ns->rmw_used & (1ull << i)))
                        continue;
                if (lba < ns->rmw_lba[i] + ns->rmw_nlb[i] && ns->rmw_lba[i] < lba + nlb)
                        goto out;
        }
        for (int i = 0; i < 64; i++) {
                if (!(ns->rmw_used & (1ull << i))) {
                        ns->rmw_used |= 1ull << i;
                        ns->rmw_lba[i] = lba;
                        ns->rmw_nlb[i] = nlb;
                        req->lock_slots |= 1ull << i;
                        ok = true;
                        break;
                }
        }
out:
        pthread_mutex_unlock(&ns->rmw_lock);
        return ok;
}

static _Atomic uint64_t *plain_slot(struct core_req *req)
{
        unsigned i = req->reactor ? rt_index(req->reactor) : 0;
        return &req->ns->plain_inflight[i % CORE_NS_ORDER_SLOTS].n;
}

void core_ns_order_release(struct core_ns *ns, uint64_t slots, bool active)
{
        if (slots) {
                pthread_mutex_lock(&ns->rmw_lock);
                ns->rmw_used &= ~slots;
                pthread_mutex_unlock(&ns->rmw_lock);
        }
        if (active)
                atomic_fetch_sub(&ns->atomic_active, 1);
}

void core_req_order_detach(struct core_req *req, uint64_t *slots, bool *active)
{
        *slots = req->lock_slots;
        *active = req->atomic_active;
        req->lock_slots = 0;
        req->atomic_active = false;
        if (req->order == ORD_LOCKED)
                req->order = ORD_NONE;
}

/* Leaves whatever order_enter took; idempotent. */
static void order_leave(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        if (req->lock_slots) {
                pthread_mutex_lock(&ns->rmw_lock);
                ns->rmw_used &= ~req->lock_slots;
                pthread_mutex_unlock(&ns->rmw_lock);
                req->lock_slots = 0;
        }
        if (req->order == ORD_PLAIN)
                atomic_fetch_sub(plain_slot(req), 1);
        req->order = ORD_NONE;
        if (req->atomic_active) {
                req->atomic_active = false;
                atomic_fetch_sub(&ns->atomic_active, 1);
        }
}

/* The blocks req touches, as one span (scattered: from the lowest to the highest). */
static void req_span(const struct core_req *req, uint64_t *lba, uint64_t *nlb)
{
        if (req->op != CORE_OP_WRITE_SCATTERED) {
                *lba = req->lba;
                *nlb = req->nlb;
                return;
        }
        uint64_t lo = UINT64_MAX, hi = 0;
        for (uint32_t i = 0; i < req->nr_ranges; i++) {
                const struct core_lba_range *r = &req->ranges[i];
                if (!r->nlb)
                        continue;
                if (r->lba < lo)
                        lo = r->lba;
                if (r->lba + r->nlb > hi)
                        hi = r->lba + r->nlb;
        }
        *lba = lo == UINT64_MAX ? 0 : lo;
        *nlb = hi > lo ? hi - lo : 0;
}

/*
 * Order req against atomic writes (and read-modify-writes against each
 * other): true when it may run now, false when it must retry.  An atomic
 * write or a read-modify-write always takes the range lock; an atomic
 * write first raises atomic_active and waits until no plain command runs
 * unlocked.  A plain command runs unlocked, only counted, while no atomic
 * write is active, and takes the range lock otherwise.
 */
static bool order_enter(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        bool atomic = (req->flags & CORE_REQ_ATOMIC) != 0;
        bool rmw = req->op == CORE_OP_COMPARE_AND_WRITE || req->op == CORE_OP_ORWRITE;
        if (atomic && !req->atomic_active) {
                req->atomic_active = true;
                atomic_fetch_add(&ns->atomic_active, 1); /* seq_cst: Dekker with the plain path */
        }
        if (atomic) {
                for (unsigned i = 0; i < CORE_NS_ORDER_SLOTS; i++)
                        if (atomic_load(&ns->plain_inflight[i].n))
                                return false;
        } else if (!rmw) {
                if (ns->atomic == NULL)
                        return true; /* no atomic-write engine (not opened) */
                _Atomic uint64_t *slot = plain_slot(req);
                atomic_fetch_add(slot, 1); /* seq_cst */
                if (!atomic_load(&ns->atomic_active)) {
                        req->order = ORD_PLAIN;
                        return true;
                }
                atomic_fetch_sub(slot, 1);
        }
        uint64_t lba, nlb;
        req_span(req, &lba, &nlb);
        if (!range_lock(req, lba, nlb ? nlb : 1))
                return false;
        req->order = ORD_LOCKED;
        return true;
}

static void finish(struct core_req *req, enum core_status st)
{
        crypt_restore(req);
        if (req->media_heal)
                core_media_done(req, st); /* before the host hears: its next read sees the heal */
        order_leave(req);
        pi_leave(req);
        if (req->prov_bytes || req->prov_frees)
                core_prov_done(req, st);
        req->status = st;
        account_end(req);
        req->cb(req);
}

static void be_io(struct core_req *req, enum core_op op, uint64_t lba, uint64_t nlb,
                  const struct iovec *iov, int iovcnt)
{
        struct core_ns *ns = req->ns;
        ns->be.ops->submit(&ns->be, req, op, lba << ns->block_shift, nlb << ns->block_shift, iov,
                           iovcnt, (req->flags & CORE_REQ_FUA) != 0);
}

/*
 * DEALLOCATE that ends before any I/O: anchoring where the namespace cannot
 * (INVALID FIELD), or a namespace that is not thin (the hint is ignored).
 */
static bool dealloc_done(struct core_req *req)
{
        if ((req->flags & CORE_REQ_ANCHOR) && !core_ns_can_anchor(req->ns)) {
                core_req_complete(req, CORE_E_INVALID_FIELD);
                return true;
        }
        if (!req->ns->thin) {
                core_req_complete(req, CORE_OK);
                return true;
        }
        return false;
}

static void write_same_next(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        uint64_t end = req->lba + req->nlb;
        uint64_t per = req->scratch_len >> ns->block_shift;
        uint64_t n = end - req->cur_lba < per ? end - req->cur_lba : per;
        req->one_iov.iov_base = req->scratch;
        req->one_iov.iov_len = n << ns->block_shift;
        uint64_t lba = req->cur_lba;
        req->cur_lba += n;
        if (ns->crypt) {
                /* The chunk before it was encrypted in place: copies of the block again. */
                for (uint64_t i = 0; i < n; i++)
                        memcpy((uint8_t *)req->scratch + (i << ns->block_shift),
                               req->iov[0].iov_base, ns->block_size);
                if (!flat_crypt(req, true, lba, req->scratch, n << ns->block_shift))
                        return;
        }
        be_io(req, CORE_OP_WRITE, lba, n, &req->one_iov, 1);
}

static void start_rmw(struct rt_defer *d);

/*
 * COMPARE reads the medium a scratch buffer at a time and compares each
 * piece, so its scratch need not be as long as its data: a 32 MiB VERIFY
 * with BYTCHK needs no 32 MiB second buffer.  Nothing is written, so
 * pieces need no lock (as before, a write racing a compare may be seen
 * or not).
 */
static void compare_next(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        uint64_t end = req->lba + req->nlb;
        uint64_t per = req->scratch_len >> ns->block_shift;
        uint64_t n = end - req->cur_lba < per ? end - req->cur_lba : per;
        req->stage = ST_COMPARE;
        req->one_iov.iov_base = req->scratch;
        req->one_iov.iov_len = n << ns->block_shift;
        be_io(req, CORE_OP_READ, req->cur_lba, n, &req->one_iov, 1);
}

static bool block_is_zero(const uint8_t *blk, uint32_t len)
{
        for (uint32_t i = 0; i < len; i++)
                if (blk[i])
                        return false;
        return true;
}

/* Whether op touches the medium's blocks (and so is ordered against atomic writes). */
static bool ordered_op(enum core_op op)
{
        switch (op) {
        case CORE_OP_READ:
        case CORE_OP_WRITE:
        case CORE_OP_WRITE_ZEROES:
        case CORE_OP_WRITE_SAME:
        case CORE_OP_COMPARE:
        case CORE_OP_COMPARE_AND_WRITE:
        case CORE_OP_ORWRITE:
        case CORE_OP_DEALLOCATE:
        case CORE_OP_WRITE_SCATTERED:
                return true;
        default:
                return false;
        }
}

/* WRITE SCATTERED, not through the journal: one backend write per range, in order. */
static void scatter_next(struct core_req *req)
{
        while (req->cur_range < req->nr_ranges && req->ranges[req->cur_range].nlb == 0)
                req->cur_range++;
        if (req->cur_range == req->nr_ranges) {
                finish(req, CORE_OK);
                return;
        }
        struct core_ns *ns = req->ns;
        const struct core_lba_range *r = &req->ranges[req->cur_range++];
        uint64_t skip = req->done_bytes, len = r->nlb << ns->block_shift;
        int n = 0;
        for (int i = 0; i < req->iovcnt && len; i++) {
                uint64_t l = req->iov[i].iov_len;
                if (skip >= l) {
                        skip -= l;
                        continue;
                }
                uint64_t take = l - skip < len ? l - skip : len;
                req->sub_iov[n].iov_base = (uint8_t *)req->iov[i].iov_base + skip;
                req->sub_iov[n].iov_len = take;
                n++;
                len -= take;
                skip = 0;
        }
        req->done_bytes += (uint32_t)(r->nlb << ns->block_shift);
        req->stage = ST_SCATTER;
        be_io(req, CORE_OP_WRITE, r->lba, r->nlb, req->sub_iov, n);
}

/* ---- The protection stage (issue 10) ---- */

/*
 * On a namespace whose format has metadata every medium op goes through
 * here (core/req.h struct core_req.pi is the contract).  The metadata
 * lives in the namespace's store (core/pistore.h), stored inverted so a
 * hole is the escape.  One buffer per request, borrowed from the
 * reactor's pool of large buffers (rt/bigbuf.h; a request parks when the
 * pool is empty): the metadata of its blocks, then, when the data cannot
 * be used where it is (extended LBAs from or to the host, a multi-segment
 * buffer to check or generate from), a bounce of the data.
 *
 * Order: a write stores the metadata first, then the data (on a store
 * that survives a restart: the metadata to the escape, the data, the new
 * metadata; pi_store_md); a read reads
 * the metadata, then the data, then checks; WRITE ZEROES and DEALLOCATE
 * reset the metadata to the escape first, then the data; FLUSH flushes the
 * data, then the store.  Both halves of a FUA write are FUA, so an
 * acknowledged FUA write (and every write before an acknowledged flush)
 * has its data and metadata durable together, and a write interrupted
 * anywhere leaves each block's metadata agreeing with its data or the
 * escape (pi_store_md).
 */
enum {
        PI_W_MD = 1,     /* write: the metadata is being stored */
        PI_W_DATA,       /* write: the data is being written */
        PI_R_MD,         /* read/verify: metadata */
        PI_R_DATA,       /* read/verify: data */
        PI_F_DATA,       /* flush: data */
        PI_F_MD,         /* flush: store */
        PI_Z_MD,         /* write zeroes / deallocate: metadata to the escape */
        PI_Z_DATA,       /* ...then the data */
        PI_WS_MD,        /* write same: a piece's metadata */
        PI_WS_DATA,      /* ...then its data */
        PI_W_ESC,        /* write, persistent store: the metadata to the escape first */
        PI_W_DATA_FIRST, /* ...then the data */
        PI_W_MD_LAST,    /* ...then the new metadata */
};

static _Atomic uint64_t *pi_slot(struct core_req *req)
{
        unsigned i = req->reactor ? rt_index(req->reactor) : 0;
        return &req->ns->pi_users[i % CORE_NS_ORDER_SLOTS].n;
}

/* Ends what the protection stage holds: the pool buffer, the pi_users count.  Idempotent. */
static void pi_leave(struct core_req *req)
{
        if (req->pix.buf) {
                if (req->pix.buf_len) /* else inl */
                        rt_bigbuf_put(req->reactor, req->pix.buf, req->pix.buf_len);
                req->pix.buf = NULL;
        }
        if (req->pix.users) {
                req->pix.users = false;
                atomic_fetch_sub(pi_slot(req), 1);
        }
}

static void md_invert(uint8_t *md, size_t len)
{
        size_t i = 0;
        for (; i + 8 <= len; i += 8) {
                uint64_t v;
                memcpy(&v, md + i, 8);
                v = ~v;
                memcpy(md + i, &v, 8);
        }
        for (; i < len; i++)
                md[i] = (uint8_t)~md[i];
}

/* A cursor over the request's iovec. */
struct iov_cur {
        const struct iovec *iov;
        int cnt, i;
        size_t off;
};

static void cur_copy(struct iov_cur *c, uint8_t *buf, size_t len, bool to_iov)
{
        while (len && c->i < c->cnt) {
                size_t avail = c->iov[c->i].iov_len - c->off;
                if (!avail) {
                        c->i++;
                        c->off = 0;
                        continue;
                }
                size_t n = avail < len ? avail : len;
                uint8_t *p = (uint8_t *)c->iov[c->i].iov_base + c->off;
                if (to_iov)
                        memcpy(p, buf, n);
                else
                        memcpy(buf, p, n);
                rt_count_copy(RT_COPY_CORE, n);
                buf += n;
                len -= n;
                c->off += n;
        }
}

static size_t pi_units(const struct core_pi_fmt *f, uint64_t nlb)
{
        return f->type == CORE_PI_TYPE0 ? nlb : nlb << f->pi_exp;
}

/*
 * COMPARE: the host's data (its extended LBAs' data when host_md: the
 * metadata is not compared, the stored PI is checked instead) against the
 * blocks read; false with *where the offset in the host's transfer of the
 * first byte that differs.
 */
static bool pi_compare(struct core_req *req, const uint8_t *data, uint64_t nlb, uint64_t *where)
{
        const struct core_pi_fmt *f = &req->pix.fmt;
        size_t iv = req->pi.host_md
                        ? (f->type == CORE_PI_TYPE0 ? f->block_size : f->block_size >> f->pi_exp)
                        : (size_t)nlb * f->block_size;
        size_t gap = req->pi.host_md ? f->md_size : 0;
        size_t units = req->pi.host_md ? pi_units(f, nlb) : 1;
        struct iov_cur c = {.iov = req->iov, .cnt = req->iovcnt};
        uint64_t off = 0;
        for (size_t u = 0; u < units; u++) {
                for (size_t k = 0; k < iv;) {
                        if (c.i >= c.cnt)
                                return true;
                        size_t avail = c.iov[c.i].iov_len - c.off;
                        if (!avail) {
                                c.i++;
                                c.off = 0;
                                continue;
                        }
                        size_t n = avail < iv - k ? avail : iv - k;
                        const uint8_t *p = (const uint8_t *)c.iov[c.i].iov_base + c.off;
                        const uint8_t *q = data + u * iv + k;
                        if (memcmp(p, q, n)) {
                                size_t b = 0;
                                while (p[b] == q[b])
                                        b++;
                                *where = off + k + b;
                                return false;
                        }
                        c.off += n;
                        k += n;
                }
                off += iv + gap;
                uint8_t skip[64];
                cur_copy(&c, skip, gap, false);
        }
        return true;
}

/* Extended LBAs in the request's iov <-> separate data and metadata (to_iov: join). */
static void pi_ext_xfer(struct core_req *req, uint8_t *data, uint8_t *md, uint64_t nlb, bool to_iov)
{
        const struct core_pi_fmt *f = &req->pix.fmt;
        if (req->iovcnt == 1) {
                if (to_iov)
                        core_pi_join(f, data, md, req->iov[0].iov_base, nlb);
                else
                        core_pi_split(f, req->iov[0].iov_base, data, md, nlb);
                return;
        }
        size_t iv = f->type == CORE_PI_TYPE0 ? f->block_size : f->block_size >> f->pi_exp;
        size_t units = f->type == CORE_PI_TYPE0 ? nlb : nlb << f->pi_exp;
        struct iov_cur c = {.iov = req->iov, .cnt = req->iovcnt};
        for (size_t u = 0; u < units; u++) {
                cur_copy(&c, data + u * iv, iv, to_iov);
                cur_copy(&c, md + u * f->md_size, f->md_size, to_iov);
        }
}

/* The protection-neutral failure of a check: status, and the failing LBA as info. */
static void pi_fail(struct core_req *req, enum core_status st, const struct core_pi_err *e)
{
        req->info = e->lba;
        req->info_valid = true;
        finish(req, st);
}

/* Reference tag of block lba's first interval, from the request's first (ref). */
static uint64_t pi_ref_at(const struct core_req *req, uint64_t ref, uint64_t lba)
{
        const struct core_pi_fmt *f = &req->pix.fmt;
        unsigned bits = core_pi_ref_bits(f);
        ref += (lba - req->lba) << f->pi_exp;
        return bits < 64 ? ref & ((1ull << bits) - 1) : ref;
}

/* The check a request asks for, of blocks from lba. */
static void pi_check_of(struct core_req *req, uint64_t lba, struct core_pi_check *c)
{
        *c = (struct core_pi_check){
            .flags = req->pi.chk,
            .ref = pi_ref_at(req, req->pi.ref, lba),
            .app = req->pi.app,
            .app_mask = req->pi.app_mask,
            .lba = lba,
            .tab = req->pi.use_apptab ? atomic_load_explicit(&req->ns->apptab, memory_order_acquire)
                                      : NULL,
        };
}

/*
 * Extended LBAs in one host buffer are used in place: the backend reads and
 * writes each interval's data through an iovec of its own (at most
 * PI_EXT_VEC_MAX: io_uring's IOV_MAX), the metadata is copied out or in and
 * the checks run on the interleaved buffer.  Cheaper than a bounce of the
 * data (bench/pi).
 */
#define PI_EXT_VEC_MAX 1024u

/* The iovecs of the intervals' data in the host's buffer, after the metadata in pix.buf. */
static struct iovec *pi_ext_vec(struct core_req *req, size_t *n)
{
        const struct core_pi_fmt *f = &req->pix.fmt;
        size_t iv = f->type == CORE_PI_TYPE0 ? f->block_size : f->block_size >> f->pi_exp;
        size_t stride = iv + f->md_size, units = pi_units(f, req->nlb);
        struct iovec *v = (struct iovec *)(req->pix.buf +
                                           (((size_t)req->nlb * req->pix.mdpb + 63) & ~(size_t)63));
        uint8_t *ext = req->iov[0].iov_base;
        for (size_t u = 0; u < units; u++) {
                v[u].iov_base = ext + u * stride;
                v[u].iov_len = iv;
        }
        *n = units;
        return v;
}

/* The metadata of every interval between the host's buffer and pix.md (to_ext: into it). */
static void pi_ext_md(struct core_req *req, bool to_ext)
{
        const struct core_pi_fmt *f = &req->pix.fmt;
        size_t iv = f->type == CORE_PI_TYPE0 ? f->block_size : f->block_size >> f->pi_exp;
        size_t stride = iv + f->md_size, units = pi_units(f, req->nlb);
        uint8_t *ext = (uint8_t *)req->iov[0].iov_base + iv, *md = req->pix.md;
        for (size_t u = 0; u < units; u++) {
                if (to_ext)
                        memcpy(ext + u * stride, md + u * f->md_size, f->md_size);
                else
                        memcpy(md + u * f->md_size, ext + u * stride, f->md_size);
        }
}

static void pi_go(struct core_req *req);
static void pi_next(struct core_req *req);

static void pi_buf_ready(struct rt_bigbuf_wait *w)
{
        struct core_req *req = (struct core_req *)((char *)w - offsetof(struct core_req, pix.wait));
        req->pix.buf = w->buf;
        req->pix.buf_len = w->len;
        pi_go(req);
}

/* Where the data is: the bounce, or the request's single buffer. */
static uint8_t *pi_data(struct core_req *req)
{
        return req->pix.data ? req->pix.data : (uint8_t *)req->iov[0].iov_base;
}

/* Read/verify: the next piece's metadata (verify pieces from pix.cur_lba). */
static void pi_read_piece(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        uint64_t n = req->pix.end_lba - req->pix.cur_lba;
        if (n > req->pix.piece)
                n = req->pix.piece;
        memset(req->pix.md, 0, n * req->pix.mdpb); /* null store: reads leave it: the escape */
        req->one_iov.iov_base = req->pix.md;
        req->one_iov.iov_len = n * req->pix.mdpb;
        req->pix.step = PI_R_MD;
        if (core_pistore_rw_now(ns->pistore, CORE_OP_READ, req->pix.cur_lba, n, req->pix.md)) {
                pi_next(req); /* a memory store: no event-loop turn for the metadata */
                return;
        }
        core_pistore_submit(ns->pistore, req, CORE_OP_READ, req->pix.cur_lba, n, &req->one_iov, 1,
                            false);
}

/*
 * A value of the host's PI tuple of one block (data, md): the engine's
 * check of flag against 0 fails with the actual value unless it is 0.
 */
static uint64_t pi_probe(struct core_req *req, struct core_pi_buf b, unsigned flag, uint16_t app)
{
        struct core_pi_check c = {.flags = flag, .app = app, .app_mask = 0xffff, .lba = req->lba};
        struct core_pi_err e;
        if (core_pi_verify(&req->pix.fmt, b, 1, &c, &e) == CORE_OK)
                return app;
        return e.actual;
}

/*
 * WRITE SAME with the host's PI: its block checked as asked; its tuple
 * replicated as is when it escapes or for type 3 (a constant reference
 * tag), else regenerated per block from its reference tag (incremented)
 * and application tag (SBC-4 WRITE SAME with WRPROTECT).
 */
static bool pi_ws_host(struct core_req *req)
{
        const struct core_pi_fmt *f = &req->pix.fmt;
        struct core_pi_buf b = {req->pix.data, req->pix.ws_md};
        if (req->pi.chk) {
                struct core_pi_check c;
                struct core_pi_err e;
                pi_check_of(req, req->lba, &c);
                enum core_status st = core_pi_verify(f, b, 1, &c, &e);
                if (st != CORE_OK) {
                        pi_fail(req, st, &e);
                        return false;
                }
        }
        /* An escape passes any application tag check: 0 and 1 both. */
        bool escape =
            pi_probe(req, b, CORE_PI_CHK_APP, 0) == 0 && pi_probe(req, b, CORE_PI_CHK_APP, 1) == 1;
        req->pix.ws_raw = escape || f->type == CORE_PI_TYPE3 || f->type == CORE_PI_TYPE0;
        req->pix.ws_app = (uint16_t)pi_probe(req, b, CORE_PI_CHK_APP, 0);
        req->pix.ws_ref = pi_probe(req, b, CORE_PI_CHK_REF, 0);
        return true;
}

/*
 * WRITE SAME, a piece at a time: the block replicated in the bounce, the
 * PI of each block generated (reference tag incremented per interval from
 * gen_ref, gen_app), the piece's metadata stored, then its data.
 */
static void pi_ws_piece(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        uint64_t n = req->pix.end_lba - req->pix.cur_lba;
        if (n > req->pix.piece)
                n = req->pix.piece;
        size_t md_len = n * req->pix.mdpb;
        struct core_pi_tags tags = {.ref = pi_ref_at(req, req->pi.gen_ref, req->pix.cur_lba),
                                    .app = req->pi.gen_app};
        if (ns->crypt && req->pix.cur_lba != req->lba) {
                /* The piece before was encrypted in place: the host's block again. */
                iov_to_flat(req, req->pix.data, 0, ns->block_size);
                for (uint64_t i = 1; i < n; i++)
                        memcpy(req->pix.data + (i << ns->block_shift), req->pix.data,
                               ns->block_size);
        }
        if (req->pi.host_md) {
                /* The host's metadata in every block; its PI tuple regenerated unless raw. */
                for (uint64_t i = 0; i < n; i++)
                        memcpy(req->pix.md + i * req->pix.mdpb, req->pix.ws_md, req->pix.mdpb);
                tags.ref = pi_ref_at(req, req->pix.ws_ref, req->pix.cur_lba);
                tags.app = req->pix.ws_app;
        } else {
                memset(req->pix.md, 0, md_len);
        }
        if (!req->pi.host_md || !req->pix.ws_raw)
                core_pi_generate(&req->pix.fmt, (struct core_pi_buf){req->pix.data, req->pix.md}, n,
                                 &tags);
        md_invert(req->pix.md, md_len);
        req->one_iov.iov_base = req->pix.md;
        req->one_iov.iov_len = md_len;
        req->pix.step = PI_WS_MD;
        core_pistore_submit(ns->pistore, req, CORE_OP_WRITE, req->pix.cur_lba, n, &req->one_iov, 1,
                            (req->flags & CORE_REQ_FUA) != 0);
}

static void pi_start(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        uint64_t nlb = req->nlb, mdpb = req->pix.mdpb;
        req->stage = ST_PI;
        switch (req->op) {
        case CORE_OP_FLUSH:
                req->pix.step = PI_F_DATA;
                ns->be.ops->submit(&ns->be, req, CORE_OP_FLUSH, 0, 0, NULL, 0, false);
                return;
        case CORE_OP_DEALLOCATE:
                if (dealloc_done(req))
                        return;
                /* fall through */
        case CORE_OP_WRITE_ZEROES:
                req->pix.step = PI_Z_MD;
                core_pistore_submit(ns->pistore, req, CORE_OP_WRITE_ZEROES, req->lba, nlb, NULL, 0,
                                    (req->flags & CORE_REQ_FUA) != 0);
                return;
        case CORE_OP_VERIFY:
        case CORE_OP_PREFETCH:
                if (req->op == CORE_OP_PREFETCH || !req->pi.chk) {
                        core_req_complete(req, CORE_OK);
                        return;
                }
                break;
        case CORE_OP_WRITE_SAME:
                if (!req->pi.host_md && block_is_zero(req->iov[0].iov_base, ns->block_size)) {
                        /* Zeroes: as WRITE ZEROES, the metadata back to the escape. */
                        req->pix.step = PI_Z_MD;
                        core_pistore_submit(ns->pistore, req, CORE_OP_WRITE_ZEROES, req->lba, nlb,
                                            NULL, 0, (req->flags & CORE_REQ_FUA) != 0);
                        return;
                }
                break;
        case CORE_OP_READ:
        case CORE_OP_WRITE:
        case CORE_OP_COMPARE:
        case CORE_OP_COMPARE_AND_WRITE:
        case CORE_OP_ORWRITE:
                break;
        default:
                /* Not yet with metadata (README "Protection information"). */
                core_req_complete(req, CORE_E_INVALID_FIELD);
                return;
        }
        /* READ, WRITE, VERIFY: the buffer. */
        size_t md_len = nlb * mdpb, data_len = nlb << ns->block_shift;
        bool bounce = req->pi.host_md || req->iovcnt > 1 || req->op == CORE_OP_VERIFY ||
                      req->op == CORE_OP_WRITE_SAME || req->op == CORE_OP_COMPARE ||
                      req->op == CORE_OP_COMPARE_AND_WRITE || req->op == CORE_OP_ORWRITE;
        if (req->op == CORE_OP_READ && !req->pi.host_md && !req->pi.chk)
                bounce = false; /* data straight into the host's buffers */
        if (ns->crypt)
                bounce = true; /* encrypted and decrypted there (pi_write_data, PI_R_DATA) */
        if (core_atomic_journaled(req))
                bounce = true; /* the journal records the data flat, then the metadata */
        req->pix.cur_lba = req->lba;
        req->pix.end_lba = req->lba + nlb;
        req->pix.piece = req->nlb;
        if (req->op == CORE_OP_VERIFY || req->op == CORE_OP_WRITE_SAME) {
                /* A piece at a time: a long VERIFY needs no buffer as long as its blocks. */
                uint64_t per = RT_BIGBUF_CHUNK / (ns->block_size + mdpb);
                if (per > nlb)
                        per = nlb;
                req->pix.piece = (uint32_t)per;
                md_len = per * mdpb;
                data_len = per << ns->block_shift;
        }
        size_t md_room = (md_len + 63) & ~(size_t)63;
        req->pix.ext_vec = !ns->crypt && !core_atomic_journaled(req) && req->pi.host_md &&
                           req->iovcnt == 1 &&
                           (req->op == CORE_OP_READ || req->op == CORE_OP_WRITE) &&
                           pi_units(&req->pix.fmt, nlb) <= PI_EXT_VEC_MAX;
        if (req->pix.ext_vec) {
                bounce = false;
                data_len = pi_units(&req->pix.fmt, nlb) * sizeof(struct iovec);
        }
        /* ORWRITE: the host's metadata after the bounce (pi_or_hmd). */
        size_t len = md_room + (bounce || req->pix.ext_vec ? data_len : 0) +
                     (req->op == CORE_OP_WRITE_SAME ? mdpb : 0) +
                     (req->op == CORE_OP_ORWRITE ? md_room : 0);
        req->pix.bounce = bounce;
        if (len <= sizeof(req->pix.inl)) {
                req->pix.buf = req->pix.inl;
                req->pix.buf_len = 0;
                pi_go(req);
                return;
        }
        size_t got = 0;
        void *b = rt_bigbuf_get(req->reactor, len, &got);
        if (!b) {
                req->pix.wait.fn = pi_buf_ready;
                req->pix.wait.len = len;
                if (rt_bigbuf_wait(req->reactor, &req->pix.wait)) {
                        core_req_complete(req, CORE_E_NO_RESOURCES);
                        return;
                }
                return;
        }
        req->pix.buf = b;
        req->pix.buf_len = got;
        pi_go(req);
}

/*
 * A write's blocks separated (pix.data or the request's single buffer, and
 * pix.md: what the host sent when host_md): the host's PI checked as asked
 * (nothing is stored when it fails; false), regenerated (gen), or
 * generated when the host sent data only.
 */
static bool pi_protect(struct core_req *req)
{
        const struct core_pi_fmt *f = &req->pix.fmt;
        uint64_t nlb = req->nlb;
        struct core_pi_buf b = {pi_data(req), req->pix.md};
        struct core_pi_tags tags = {.ref = req->pi.gen_ref, .app = req->pi.gen_app};
        if (!req->pi.host_md) {
                memset(req->pix.md, 0, nlb * req->pix.mdpb);
                core_pi_generate(f, b, nlb, &tags);
                return true;
        }
        if (req->pi.chk) {
                struct core_pi_check c;
                struct core_pi_err e;
                pi_check_of(req, req->lba, &c);
                enum core_status st = core_pi_verify(f, b, nlb, &c, &e);
                if (st != CORE_OK) {
                        pi_fail(req, st, &e);
                        return false;
                }
        }
        if (req->pi.gen)
                core_pi_generate(f, b, nlb, &tags);
        return true;
}

/*
 * ORWRITE (SBC-4 5.11; the range lock held since run()): the host's data
 * goes flat into the issuer's scratch and its metadata (host_md) after the
 * bounce, where its protection information is checked as a write's would
 * be (chk) before anything is read or written.  Then the stored blocks are
 * read (metadata into pix.md, data into the bounce) and pi_orwrite ORs.
 */
static uint8_t *pi_or_hmd(struct core_req *req)
{
        return req->pix.data + ((((size_t)req->nlb << req->ns->block_shift) + 63) & ~(size_t)63);
}

static bool pi_or_host(struct core_req *req)
{
        uint64_t nlb = req->nlb;
        uint8_t *hmd = pi_or_hmd(req);
        if (!req->pi.host_md) {
                iov_to_flat(req, req->scratch, 0, nlb << req->ns->block_shift);
                return true;
        }
        pi_ext_xfer(req, req->scratch, hmd, nlb, false);
        if (req->pi.chk) {
                struct core_pi_check c;
                struct core_pi_err e;
                pi_check_of(req, req->lba, &c);
                enum core_status st = core_pi_verify(
                    &req->pix.fmt, (struct core_pi_buf){req->scratch, hmd}, nlb, &c, &e);
                if (st != CORE_OK) {
                        pi_fail(req, st, &e);
                        return false;
                }
        }
        return true;
}

static void pi_store_md(struct core_req *req);

/*
 * ORWRITE with the stored blocks in hand: their protection information
 * checked (rmw_chk: what a read of them would check; a failure writes
 * nothing), the data ORed, and the result's metadata: the host's with the
 * guard recomputed over the new data (host_md; gen: regenerated whole), or
 * the stored blocks' other metadata bytes with a tuple generated from
 * gen_ref and gen_app.  Then stored as a write is (pi_store_md).
 */
static void pi_orwrite(struct core_req *req)
{
        const struct core_pi_fmt *f = &req->pix.fmt;
        uint64_t nlb = req->nlb;
        size_t len = (size_t)nlb << req->ns->block_shift;
        struct core_pi_buf b = {req->pix.data, req->pix.md};
        if (req->pi.rmw_chk) {
                struct core_pi_check c;
                struct core_pi_err e;
                pi_check_of(req, req->lba, &c);
                c.flags = req->pi.rmw_chk;
                c.ref = pi_ref_at(req, req->pi.rmw_ref, req->lba);
                enum core_status st = core_pi_verify(f, b, nlb, &c, &e);
                if (st != CORE_OK) {
                        pi_fail(req, st, &e);
                        return;
                }
        }
        uint8_t *d = req->pix.data;
        const uint8_t *h = req->scratch;
        size_t i = 0;
        for (; i + 8 <= len; i += 8) {
                uint64_t x, y;
                memcpy(&x, d + i, 8);
                memcpy(&y, h + i, 8);
                x |= y;
                memcpy(d + i, &x, 8);
        }
        for (; i < len; i++)
                d[i] |= h[i];
        struct core_pi_tags tags = {.ref = req->pi.gen_ref, .app = req->pi.gen_app};
        if (req->pi.host_md) {
                memcpy(req->pix.md, pi_or_hmd(req), nlb * req->pix.mdpb);
                if (req->pi.gen)
                        core_pi_generate(f, b, nlb, &tags);
                else
                        core_pi_reguard(f, b, nlb);
        } else {
                core_pi_generate(f, b, nlb, &tags);
        }
        pi_store_md(req);
}

/*
 * An atomic write (core_atomic_journaled) with its blocks in the bounce and
 * their metadata in pix.md, checked or generated: both go to the journal
 * as one record, applied in place together and replayed together after a
 * crash (core/atomic.c), so each block ends with its old data and metadata
 * or its new ones -- no escape step.
 */
static void pi_journal(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        uint64_t len = (uint64_t)req->nlb << ns->block_shift;
        size_t md_len = (size_t)req->nlb * req->pix.mdpb;
        if (!flat_crypt(req, true, req->lba, req->pix.data, len))
                return;
        md_invert(req->pix.md, md_len);
        req->iov[0].iov_base = req->pix.data;
        req->iov[0].iov_len = len;
        req->iovcnt = 1;
        req->atomic_md = req->pix.md;
        req->atomic_md_len = (uint32_t)md_len;
        req->stage = ST_JOURNAL;
        core_atomic_submit(req);
}

/* The write's metadata to the store (step: PI_W_MD, data next; PI_W_MD_LAST, done next). */
static void pi_store_md_step(struct core_req *req, int step)
{
        struct core_ns *ns = req->ns;
        size_t md_len = (size_t)req->nlb * req->pix.mdpb;
        bool fua = (req->flags & CORE_REQ_FUA) != 0;
        req->pix.step = step;
        if (req->flags & CORE_REQ_SANITIZE) {
                /* A sanitize overwrite: the metadata goes back to the escape with the data. */
                core_pistore_submit(ns->pistore, req, CORE_OP_WRITE_ZEROES, req->lba, req->nlb,
                                    NULL, 0, fua);
                return;
        }
        md_invert(req->pix.md, md_len);
        req->one_iov.iov_base = req->pix.md;
        req->one_iov.iov_len = md_len;
        if (core_pistore_rw_now(ns->pistore, CORE_OP_WRITE, req->lba, req->nlb, req->pix.md)) {
                pi_next(req); /* a memory store: no event-loop turn for the metadata */
                return;
        }
        core_pistore_submit(ns->pistore, req, CORE_OP_WRITE, req->lba, req->nlb, &req->one_iov, 1,
                            fua);
}

/*
 * A write's two halves.  On a store that survives a restart (file): the
 * blocks' metadata goes to the escape first, then the data is written,
 * then the new metadata: whatever step a kill -9 (or power loss) cuts, a
 * block holds its old data with its old metadata or the escape, or its new
 * data with the escape or its new metadata -- never metadata that
 * disagrees with the data, so a block acknowledged earlier stays readable
 * with checking while a later write to it was in flight.  (Metadata first,
 * then data, left new metadata over old data: the durability test's
 * mid-stream kill found an acknowledged block failing its guard check.)
 * On mem nothing outlives the process: metadata, then data.
 */
static void pi_store_md(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        if (ns->pistore->persistent && !(req->flags & CORE_REQ_SANITIZE)) {
                req->pix.step = PI_W_ESC;
                core_pistore_submit(ns->pistore, req, CORE_OP_WRITE_ZEROES, req->lba, req->nlb,
                                    NULL, 0, (req->flags & CORE_REQ_FUA) != 0);
                return;
        }
        pi_store_md_step(req, PI_W_MD);
}

static void pi_write_data(struct core_req *req, int step)
{
        struct core_ns *ns = req->ns;
        req->pix.step = step;
        if (req->pix.ext_vec) {
                size_t n;
                struct iovec *v = pi_ext_vec(req, &n);
                be_io(req, CORE_OP_WRITE, req->lba, req->nlb, v, (int)n);
        } else if (req->pix.data) {
                /* Encryption at rest: the bounce's plaintext is no longer needed. */
                if (!flat_crypt(req, true, req->lba, req->pix.data,
                                (uint64_t)req->nlb << ns->block_shift))
                        return;
                req->one_iov.iov_base = req->pix.data;
                req->one_iov.iov_len = (uint64_t)req->nlb << ns->block_shift;
                be_io(req, CORE_OP_WRITE, req->lba, req->nlb, &req->one_iov, 1);
        } else {
                be_io(req, CORE_OP_WRITE, req->lba, req->nlb, req->iov, req->iovcnt);
        }
}

/* READ, WRITE, VERIFY with the buffer in hand. */
static void pi_go(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        const struct core_pi_fmt *f = &req->pix.fmt;
        uint64_t nlb = req->nlb;
        req->pix.md = req->pix.buf;
        req->pix.data =
            req->pix.bounce
                ? req->pix.buf + (((size_t)req->pix.piece * req->pix.mdpb + 63) & ~(size_t)63)
                : NULL;
        if (req->op == CORE_OP_WRITE_SAME) {
                struct iov_cur c = {.iov = req->iov, .cnt = req->iovcnt};
                cur_copy(&c, req->pix.data, ns->block_size, false);
                if (req->pi.host_md) {
                        req->pix.ws_md =
                            req->pix.data + ((size_t)req->pix.piece << ns->block_shift);
                        cur_copy(&c, req->pix.ws_md, req->pix.mdpb, false);
                        if (!pi_ws_host(req))
                                return;
                }
                for (uint32_t i = 1; i < req->pix.piece; i++)
                        memcpy(req->pix.data + ((size_t)i << ns->block_shift), req->pix.data,
                               ns->block_size);
                pi_ws_piece(req);
                return;
        }
        if (req->op == CORE_OP_ORWRITE && !pi_or_host(req))
                return;
        if (req->op != CORE_OP_WRITE) {
                pi_read_piece(req);
                return;
        }
        uint8_t *md = req->pix.md;
        struct core_pi_tags tags = {.ref = req->pi.gen_ref, .app = req->pi.gen_app};
        if (req->pix.ext_vec) {
                /* Checked and (gen) regenerated in the host's buffer; the metadata copied out. */
                struct core_pi_buf ext = {req->iov[0].iov_base, NULL};
                if (req->pi.chk) {
                        struct core_pi_check c;
                        struct core_pi_err e;
                        pi_check_of(req, req->lba, &c);
                        enum core_status st = core_pi_verify(f, ext, nlb, &c, &e);
                        if (st != CORE_OK) {
                                pi_fail(req, st, &e);
                                return;
                        }
                }
                if (req->pi.gen)
                        core_pi_generate(f, ext, nlb, &tags);
                pi_ext_md(req, false);
        } else {
                if (req->pi.host_md)
                        pi_ext_xfer(req, req->pix.data, md, nlb, false);
                else if (req->pix.data)
                        iov_to_flat(req, req->pix.data, 0, nlb << ns->block_shift);
                if (!pi_protect(req))
                        return;
        }
        if (core_atomic_journaled(req))
                pi_journal(req);
        else
                pi_store_md(req);
}

/*
 * A write or flush of the protection stage is done: a flush or a FUA write
 * first retires the atomic-write journal's applied records, or one could
 * be replayed over these blocks after a crash (core/atomic.c).
 */
static void pi_done(struct core_req *req)
{
        if ((req->op == CORE_OP_FLUSH || (req->flags & CORE_REQ_FUA)) &&
            core_atomic_need_checkpoint(req->ns)) {
                req->stage = ST_CHECKPOINT;
                core_atomic_checkpoint(req);
                return;
        }
        finish(req, CORE_OK);
}

/* A store or data I/O of the protection stage completed (res >= 0). */
static void pi_next(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        const struct core_pi_fmt *f = &req->pix.fmt;
        switch (req->pix.step) {
        case PI_W_MD:
                pi_write_data(req, PI_W_DATA);
                return;
        case PI_W_ESC:
                pi_write_data(req, PI_W_DATA_FIRST);
                return;
        case PI_W_DATA_FIRST:
                pi_store_md_step(req, PI_W_MD_LAST);
                return;
        case PI_W_DATA:
        case PI_W_MD_LAST:
        case PI_F_MD:
        case PI_Z_DATA:
                pi_done(req);
                return;
        case PI_F_DATA:
                req->pix.step = PI_F_MD;
                core_pistore_submit(ns->pistore, req, CORE_OP_FLUSH, 0, 0, NULL, 0, false);
                return;
        case PI_WS_MD: {
                uint64_t n = req->one_iov.iov_len / req->pix.mdpb;
                if (!flat_crypt(req, true, req->pix.cur_lba, req->pix.data, n << ns->block_shift))
                        return;
                req->pix.step = PI_WS_DATA;
                req->one_iov.iov_base = req->pix.data;
                req->one_iov.iov_len = n << ns->block_shift;
                be_io(req, CORE_OP_WRITE, req->pix.cur_lba, n, &req->one_iov, 1);
                return;
        }
        case PI_WS_DATA:
                req->pix.cur_lba += req->one_iov.iov_len >> ns->block_shift;
                if (req->pix.cur_lba < req->pix.end_lba)
                        pi_ws_piece(req);
                else
                        pi_done(req);
                return;
        case PI_Z_MD:
                req->pix.step = PI_Z_DATA;
                be_io(req, CORE_OP_WRITE_ZEROES, req->lba, req->nlb, NULL, 0);
                return;
        case PI_R_MD: {
                uint64_t n = req->one_iov.iov_len / req->pix.mdpb;
                md_invert(req->pix.md, req->one_iov.iov_len);
                req->pix.step = PI_R_DATA;
                if (req->pix.ext_vec) {
                        size_t nv;
                        struct iovec *v = pi_ext_vec(req, &nv);
                        be_io(req, CORE_OP_READ, req->lba, req->nlb, v, (int)nv);
                } else if (req->pix.data) {
                        req->one_iov.iov_base = req->pix.data;
                        req->one_iov.iov_len = n << ns->block_shift;
                        be_io(req, CORE_OP_READ, req->pix.cur_lba, n, &req->one_iov, 1);
                } else {
                        be_io(req, CORE_OP_READ, req->lba, req->nlb, req->iov, req->iovcnt);
                }
                return;
        }
        case PI_R_DATA: {
                uint64_t n = req->pix.data ? req->one_iov.iov_len >> ns->block_shift : req->nlb;
                /* Encryption at rest: the bounce decrypted before anything looks at it. */
                if (req->pix.data &&
                    !flat_crypt(req, false, req->pix.cur_lba, req->pix.data, n << ns->block_shift))
                        return;
                if (req->pix.ext_vec) {
                        /* The metadata into the host's buffer, then the checks there. */
                        pi_ext_md(req, true);
                        if (req->pi.chk) {
                                struct core_pi_check c;
                                struct core_pi_err e;
                                pi_check_of(req, req->lba, &c);
                                enum core_status st = core_pi_verify(
                                    f, (struct core_pi_buf){req->iov[0].iov_base, NULL}, n, &c, &e);
                                if (st != CORE_OK) {
                                        pi_fail(req, st, &e);
                                        return;
                                }
                        }
                        finish(req, CORE_OK);
                        return;
                }
                if (req->op == CORE_OP_ORWRITE) {
                        pi_orwrite(req);
                        return;
                }
                if (req->pi.chk) {
                        struct core_pi_check c;
                        struct core_pi_err e;
                        pi_check_of(req, req->pix.cur_lba, &c);
                        enum core_status st = core_pi_verify(
                            f, (struct core_pi_buf){pi_data(req), req->pix.md}, n, &c, &e);
                        if (st != CORE_OK) {
                                pi_fail(req, st, &e);
                                return;
                        }
                }
                if (req->op == CORE_OP_COMPARE || req->op == CORE_OP_COMPARE_AND_WRITE) {
                        uint64_t where;
                        if (!pi_compare(req, req->pix.data, n, &where)) {
                                req->info = where;
                                req->info_valid = true;
                                finish(req, CORE_E_MISCOMPARE);
                                return;
                        }
                        if (req->op == CORE_OP_COMPARE) {
                                finish(req, CORE_OK);
                                return;
                        }
                        /*
                         * COMPARE AND WRITE (the range lock held since run()): the
                         * write half of the host's buffer into the bounce, then as a
                         * write.
                         */
                        struct iov_cur c = {.iov = req->iov, .cnt = req->iovcnt};
                        uint64_t half = core_ns_xfer_bytes(ns, n, req->pi.host_md);
                        while (half && c.i < c.cnt) {
                                size_t avail = c.iov[c.i].iov_len - c.off;
                                size_t k = avail < half ? avail : half;
                                c.off += k;
                                half -= k;
                                if (c.off == c.iov[c.i].iov_len) {
                                        c.i++;
                                        c.off = 0;
                                }
                        }
                        if (req->pi.host_md) {
                                size_t iv = f->type == CORE_PI_TYPE0 ? f->block_size
                                                                     : f->block_size >> f->pi_exp;
                                for (size_t u = 0; u < pi_units(f, n); u++) {
                                        cur_copy(&c, req->pix.data + u * iv, iv, false);
                                        cur_copy(&c, req->pix.md + u * f->md_size, f->md_size,
                                                 false);
                                }
                        } else {
                                cur_copy(&c, req->pix.data, n << ns->block_shift, false);
                        }
                        if (!pi_protect(req))
                                return;
                        if (core_atomic_journaled(req))
                                pi_journal(req);
                        else
                                pi_store_md(req);
                        return;
                }
                if (req->op == CORE_OP_VERIFY) {
                        req->pix.cur_lba += n;
                        if (req->pix.cur_lba < req->pix.end_lba)
                                pi_read_piece(req);
                        else
                                finish(req, CORE_OK);
                        return;
                }
                if (req->pi.host_md) {
                        pi_ext_xfer(req, req->pix.data, req->pix.md, n, true);
                } else if (req->pix.data) {
                        struct iov_cur c = {.iov = req->iov, .cnt = req->iovcnt};
                        cur_copy(&c, req->pix.data, n << ns->block_shift, true);
                }
                finish(req, CORE_OK);
                return;
        }
        default:
                finish(req, CORE_E_INTERNAL);
                return;
        }
}

static void run(struct core_req *req);

static void run_retry(struct rt_defer *d)
{
        run((struct core_req *)((char *)d - offsetof(struct core_req, defer)));
}

static void run(struct core_req *req)
{
        struct core_ns *ns = req->ns;

        if (req->order == ORD_NONE && ordered_op(req->op) && !order_enter(req)) {
                /* An overlapping atomic write or read-modify-write runs: next turn. */
                req->defer.fn = run_retry;
                rt_defer(req->reactor, &req->defer);
                return;
        }
        if (!req->pix.users) {
                /* Counted for core_ns_format, which holds new requests while it runs. */
                _Atomic uint64_t *slot = pi_slot(req);
                atomic_fetch_add(slot, 1); /* seq_cst: Dekker with pi_quiesce */
                if (atomic_load(&ns->pi_quiesce)) {
                        atomic_fetch_sub(slot, 1);
                        req->defer.fn = run_retry;
                        rt_defer(req->reactor, &req->defer);
                        return;
                }
                req->pix.users = true;
                core_ns_pi_fmt(ns, &req->pix.fmt);
                req->pix.mdpb =
                    req->pix.fmt.md_size ? (uint32_t)core_pi_md_per_block(&req->pix.fmt) : 0;
                if (req->pix.mdpb && ns->pistore) {
                        pi_start(req);
                        return;
                }
        }
        if (ns->crypt && !req->crypt_restore &&
            (req->op == CORE_OP_WRITE || req->op == CORE_OP_WRITE_SCATTERED)) {
                if (iov_crypt(req, true)) {
                        finish(req, CORE_E_INTERNAL);
                        return;
                }
                req->crypt_restore = true;
        }
        switch (req->op) {
        case CORE_OP_READ:
                req->stage = ST_SIMPLE;
                be_io(req, CORE_OP_READ, req->lba, req->nlb, req->iov, req->iovcnt);
                return;
        case CORE_OP_WRITE:
                if (core_atomic_journaled(req)) {
                        req->stage = ST_JOURNAL;
                        core_atomic_submit(req);
                        return;
                }
                req->stage = ST_SIMPLE;
                be_io(req, CORE_OP_WRITE, req->lba, req->nlb, req->iov, req->iovcnt);
                return;
        case CORE_OP_WRITE_SCATTERED:
                if (core_atomic_journaled(req)) {
                        req->stage = ST_JOURNAL;
                        core_atomic_submit(req);
                        return;
                }
                req->cur_range = 0;
                req->done_bytes = 0;
                scatter_next(req);
                return;
        case CORE_OP_FLUSH:
                if (core_atomic_need_checkpoint(ns)) {
                        /* The checkpoint's data sync is the flush (core/atomic.c). */
                        req->stage = ST_CHECKPOINT;
                        core_atomic_checkpoint(req);
                        return;
                }
                req->stage = ST_SIMPLE;
                ns->be.ops->submit(&ns->be, req, CORE_OP_FLUSH, 0, 0, NULL, 0, false);
                return;
        case CORE_OP_WRITE_ZEROES:
                req->stage = ST_SIMPLE;
                be_io(req, CORE_OP_WRITE_ZEROES, req->lba, req->nlb, NULL, 0);
                return;
        case CORE_OP_WRITE_SAME: {
                const uint8_t *blk = req->iov[0].iov_base;
                if (block_is_zero(blk, ns->block_size)) {
                        req->stage = ST_SIMPLE;
                        be_io(req, CORE_OP_WRITE_ZEROES, req->lba, req->nlb, NULL, 0);
                        return;
                }
                /* Fill the scratch buffer with copies of the block, then write it out in chunks. */
                uint64_t per = req->scratch_len >> ns->block_shift;
                if (per > req->nlb)
                        per = req->nlb;
                for (uint64_t i = 0; i < per; i++)
                        memcpy((uint8_t *)req->scratch + (i << ns->block_shift), blk,
                               ns->block_size);
                req->scratch_len = (uint32_t)(per << ns->block_shift);
                req->cur_lba = req->lba;
                req->stage = ST_WRITE_SAME;
                write_same_next(req);
                return;
        }
        case CORE_OP_COMPARE:
                req->cur_lba = req->lba;
                compare_next(req);
                return;
        case CORE_OP_COMPARE_AND_WRITE:
        case CORE_OP_ORWRITE:
                req->defer.fn = start_rmw;
                start_rmw(&req->defer);
                return;
        case CORE_OP_DEALLOCATE:
                if (dealloc_done(req))
                        return;
                /*
                 * Every backend's WRITE_ZEROES frees the range (hole punch,
                 * dropped pages); with CORE_REQ_ANCHOR it keeps the space.
                 */
                req->stage = ST_SIMPLE;
                be_io(req, CORE_OP_WRITE_ZEROES, req->lba, req->nlb, NULL, 0);
                return;
        case CORE_OP_VERIFY:
        case CORE_OP_PREFETCH:
                /*
                 * Our media have no latent errors to find and no cache to
                 * fill ahead, so both complete at once (range already checked).
                 */
                core_req_complete(req, CORE_OK);
                return;
        default:
                core_req_complete(req, CORE_E_INVALID_OPCODE);
                return;
        }
}

static void start_rmw(struct rt_defer *d)
{
        struct core_req *req = (struct core_req *)((char *)d - offsetof(struct core_req, defer));
        struct core_ns *ns = req->ns;
        /* run() took the range lock: no other read-modify-write overlaps. */
        req->stage = ST_READ_FOR_RMW;
        req->one_iov.iov_base = req->scratch;
        req->one_iov.iov_len = (uint64_t)req->nlb << ns->block_shift;
        be_io(req, CORE_OP_READ, req->lba, req->nlb, &req->one_iov, 1);
}

void core_req_init(struct core_req *req, struct core_ns *ns, enum core_op op, uint64_t lba,
                   uint32_t nlb, uint32_t flags, struct rt_reactor *reactor,
                   void (*cb)(struct core_req *req), void *cb_arg)
{
        memset(req, 0, sizeof(*req));
        req->ns = ns;
        req->op = op;
        req->flags = flags;
        req->lba = lba;
        req->nlb = nlb;
        req->reactor = reactor;
        req->cb = cb;
        req->cb_arg = cb_arg;
}

static void submit_run(struct core_req *req);

/* The injected latency is over: finish with the injected status, or run. */
static void fault_timer_fn(struct rt_timer *t)
{
        struct core_req *req =
            (struct core_req *)((char *)t - offsetof(struct core_req, fault_timer));
        if (req->fault_status != CORE_OK)
                core_req_complete(req, req->fault_status);
        else
                submit_run(req);
}

/*
 * SBC-4 4.6.2: a request whose first LBA is not the first of a physical
 * block, or whose length is not a whole number of physical blocks, is
 * misaligned.  Counted once at submission (whatever its outcome), for its
 * namespace and host; a misaligned write that transfers data (not a
 * deallocation, whose granularity VPD B0h states apart) is also
 * remembered for the SCSI LPS Misalignment log page (core_ns_lpsm).
 */
static void count_misaligned(struct core_req *req, bool writes)
{
        struct core_ns *ns = req->ns;
        uint64_t mask = ((uint64_t)1 << ns->phys_exp) - 1;
        uint64_t lba = req->lba;
        bool mis = false;
        if (!mask || req->op == CORE_OP_FLUSH)
                return;
        if (req->op == CORE_OP_WRITE_SCATTERED) {
                for (uint32_t i = 0; i < req->nr_ranges && req->ranges && !mis; i++)
                        if ((req->ranges[i].lba | req->ranges[i].nlb) & mask) {
                                mis = true;
                                lba = req->ranges[i].lba;
                        }
        } else {
                mis = ((req->lba | req->nlb) & mask) != 0;
        }
        if (!mis)
                return;
        enum core_op_class c = core_op_class_of(req->op);
        core_stats_misaligned(&ns->stats, c);
        if (req->host)
                core_stats_misaligned(&req->host->stats, c);
        if (!writes || req->op == CORE_OP_DEALLOCATE)
                return;
        uint64_t i = atomic_fetch_add_explicit(&ns->lpsm_n, 1, memory_order_relaxed);
        if (i < CORE_LPSM_MAX)
                atomic_store_explicit(&ns->lpsm_lba[i], lba + 1, memory_order_release);
}

void core_req_submit(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        req->status = CORE_OK;
        req->info_valid = false;
        req->lock_slots = 0;
        req->order = ORD_NONE;
        req->atomic_active = false;
        req->prov_frees = false;
        req->prov_bytes = 0;
        req->stage = ST_START;
        req->counted = false;
        req->media_heal = false;
        req->crypt_restore = false;
        req->pix.users = false;
        req->pix.buf = NULL;
        req->pix.mdpb = 0;
        req->atomic_md = NULL;
        req->atomic_md_len = 0;
        if (!ns) {
                core_req_complete(req, CORE_E_INTERNAL);
                return;
        }
        bool medium = req->op != CORE_OP_FLUSH;
        bool writes = req->op == CORE_OP_WRITE || req->op == CORE_OP_WRITE_ZEROES ||
                      req->op == CORE_OP_WRITE_SCATTERED || req->op == CORE_OP_COMPARE_AND_WRITE ||
                      req->op == CORE_OP_ORWRITE || req->op == CORE_OP_WRITE_SAME ||
                      req->op == CORE_OP_DEALLOCATE;
        if (!(req->flags & CORE_REQ_SELFTEST)) {
                req->counted = true;
                req->t_submit = rt_now_ns();
                core_stats_start(&ns->stats);
                if (req->host)
                        core_stats_start(&req->host->stats);
                count_misaligned(req, writes);
        }
        /* The namespace's state, the same rules for every personality (core/state.c). */
        unsigned chk = CORE_CHK_STARTED;
        if (!(req->flags & CORE_REQ_SANITIZE))
                chk |= CORE_CHK_SANITIZING | (medium ? CORE_CHK_SANITIZE_FAILED : 0);
        /* A host's command through this gateway's path (core/ana.h); the engines' own are not. */
        if (!(req->flags & (CORE_REQ_SANITIZE | CORE_REQ_SELFTEST)))
                chk |= CORE_CHK_ACCESS;
        if (writes)
                chk |= CORE_CHK_WRITABLE;
        enum core_status st = core_ns_check(ns, chk);
        if (st != CORE_OK) {
                core_req_complete(req, st);
                return;
        }
        /*
         * Reservations, the same rule for both personalities (core/pr.c):
         * SBC-4 table 13 and NVMe Base 2.0 8.19 put reads, compares,
         * verifies and pre-fetches in the read group, every modification
         * and flush (SYNCHRONIZE CACHE, NVMe Flush) in the write group.
         */
        bool reads = req->op == CORE_OP_READ || req->op == CORE_OP_COMPARE ||
                     req->op == CORE_OP_VERIFY || req->op == CORE_OP_PREFETCH;
        if (core_ns_pr_conflict(ns, req->nexus, reads, writes || !medium)) {
                core_req_complete(req, CORE_E_RESERVATION_CONFLICT);
                return;
        }
        if (req->op == CORE_OP_WRITE_SCATTERED) {
                /* Each range inside the namespace, the total what nlb says. */
                uint64_t sum = 0;
                if (!req->ranges || req->nr_ranges == 0) {
                        core_req_complete(req, CORE_E_INVALID_FIELD);
                        return;
                }
                for (uint32_t i = 0; i < req->nr_ranges; i++) {
                        if (!core_ns_range_ok(ns, req->ranges[i].lba, req->ranges[i].nlb)) {
                                core_req_complete(req, CORE_E_LBA_RANGE);
                                return;
                        }
                        sum += req->ranges[i].nlb;
                }
                if (sum != req->nlb) {
                        core_req_complete(req, CORE_E_INVALID_FIELD);
                        return;
                }
                if (req->flags & CORE_REQ_ATOMIC) {
                        struct core_atomic_limits l;
                        core_ns_atomic_limits(ns, &l);
                        if (req->nlb > l.scatter_max_blocks ||
                            req->nr_ranges > l.scatter_max_ranges) {
                                core_req_complete(req, CORE_E_INVALID_FIELD);
                                return;
                        }
                }
        } else if (medium && !core_ns_range_ok(ns, req->lba, req->nlb)) {
                core_req_complete(req, CORE_E_LBA_RANGE);
                return;
        }
        uint64_t len = (uint64_t)req->nlb << ns->block_shift;
        uint64_t need = 0, scratch = 0;
        switch (req->op) {
        case CORE_OP_READ:
        case CORE_OP_WRITE:
        case CORE_OP_WRITE_SCATTERED:
        case CORE_OP_ORWRITE:
                need = len;
                scratch = req->op == CORE_OP_ORWRITE ? len : 0;
                break;
        case CORE_OP_COMPARE: /* piece by piece (compare_next) */
                need = len;
                scratch = ns->block_size;
                break;
        case CORE_OP_COMPARE_AND_WRITE:
                need = 2 * len;
                scratch = len;
                break;
        case CORE_OP_WRITE_SAME:
                need = ns->block_size;
                scratch = ns->block_size;
                if (req->pi.host_md)
                        need += core_ns_md_per_block(ns);
                break;
        default:
                break;
        }
        if (req->pi.host_md &&
            (req->op == CORE_OP_READ || req->op == CORE_OP_WRITE || req->op == CORE_OP_ORWRITE))
                need += (uint64_t)req->nlb * core_ns_md_per_block(ns); /* extended LBAs */
        if (iov_bytes(req) < need || req->scratch_len < scratch ||
            (scratch && req->scratch == NULL)) {
                LOG_WARN("core", "namespace %s: request op %d without enough buffer", ns->name,
                         req->op);
                core_req_complete(req, CORE_E_INTERNAL);
                return;
        }
        if (req->nlb == 0 && medium) {
                core_req_complete(req, CORE_OK); /* nothing to transfer */
                return;
        }
        /* Failing media (core/media.c): one load when nothing is bad. */
        if (atomic_load_explicit(&ns->media_flags, memory_order_acquire)) {
                st = core_media_check(req);
                if (st != CORE_OK) {
                        core_req_complete(req, st);
                        return;
                }
        }
        /*
         * Fault injection (core/fault.h): a host's request may be made to
         * fail, or to wait on a reactor timer first.  The core's own I/O
         * (sanitize) is never hit.  One atomic load when no rule is set.
         */
        if (core_fault_on() && !(req->flags & CORE_REQ_SANITIZE)) {
                uint32_t lat_us;
                if (core_fault_io(req, &req->fault_status, &lat_us)) {
                        if (lat_us) {
                                req->fault_timer.fn = fault_timer_fn;
                                rt_timer_arm_us(req->reactor, &req->fault_timer, lat_us);
                                return;
                        }
                        if (req->fault_status != CORE_OK) {
                                core_req_complete(req, req->fault_status);
                                return;
                        }
                }
        }
        submit_run(req);
}

/* The rest of core_req_submit: space reservation, then the op. */
static void submit_run(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        enum core_status st;
        /*
         * Provisioning (core/provision.c): a write that may allocate
         * reserves its space against the limit; a deallocation (hole
         * punch: WRITE ZEROES, DEALLOCATE, a zero WRITE SAME) is accounted
         * when it ends.
         */
        bool zero_ws =
            req->op == CORE_OP_WRITE_SAME && block_is_zero(req->iov[0].iov_base, ns->block_size);
        if (ns->thin &&
            (req->op == CORE_OP_DEALLOCATE || req->op == CORE_OP_WRITE_ZEROES || zero_ws))
                req->prov_frees = true;
        else if (req->op == CORE_OP_WRITE || req->op == CORE_OP_WRITE_SCATTERED ||
                 req->op == CORE_OP_COMPARE_AND_WRITE || req->op == CORE_OP_ORWRITE ||
                 req->op == CORE_OP_WRITE_SAME) {
                st = core_prov_reserve(req);
                if (st != CORE_OK) {
                        core_req_complete(req, st);
                        return;
                }
        }
        run(req);
}

/* First byte where the request's data (from skip) differs from buf. */
static bool compare_iov(struct core_req *req, const uint8_t *buf, uint64_t skip, uint64_t len,
                        uint64_t *where)
{
        uint64_t off = 0;
        for (int i = 0; i < req->iovcnt && off < len; i++) {
                uint64_t l = req->iov[i].iov_len;
                if (skip >= l) {
                        skip -= l;
                        continue;
                }
                const uint8_t *p = (const uint8_t *)req->iov[i].iov_base + skip;
                uint64_t n = l - skip < len - off ? l - skip : len - off;
                if (memcmp(p, buf + off, n) != 0) {
                        for (uint64_t k = 0; k < n; k++) {
                                if (p[k] != buf[off + k]) {
                                        *where = off + k;
                                        return false;
                                }
                        }
                }
                off += n;
                skip = 0;
        }
        return true;
}

void core_backend_done(struct core_req *req, int res)
{
        struct core_ns *ns = req->ns;
        uint64_t len = (uint64_t)req->nlb << ns->block_shift;
        bool is_read = req->stage == ST_READ_FOR_RMW || req->stage == ST_COMPARE ||
                       req->op == CORE_OP_READ || req->op == CORE_OP_VERIFY;
        if (res < 0) {
                LOG_DEBUG("core", "namespace %s: backend error %d at lba %llu", ns->name, res,
                          (unsigned long long)req->lba);
                finish(req, is_read ? CORE_E_MEDIUM_ERROR : CORE_E_WRITE_ERROR);
                return;
        }
        switch (req->stage) {
        case ST_SIMPLE:
                if (req->op == CORE_OP_READ && ns->crypt && iov_crypt(req, false)) {
                        finish(req, CORE_E_MEDIUM_ERROR);
                        return;
                }
                if (req->op == CORE_OP_WRITE && (req->flags & CORE_REQ_FUA) &&
                    core_atomic_need_checkpoint(ns)) {
                        /*
                         * Durable now: no journal record older than it may be
                         * replayed over it after a crash (core/atomic.c).
                         */
                        req->stage = ST_CHECKPOINT;
                        core_atomic_checkpoint(req);
                        return;
                }
                finish(req, CORE_OK);
                return;
        case ST_SCATTER:
                scatter_next(req);
                return;
        case ST_PI:
                pi_next(req);
                return;
        case ST_JOURNAL:
        case ST_CHECKPOINT:
                finish(req, CORE_OK);
                return;
        case ST_WRITE_SAME:
                if (req->cur_lba < req->lba + req->nlb)
                        write_same_next(req);
                else
                        finish(req, CORE_OK);
                return;
        case ST_COMPARE: {
                uint64_t done = (req->cur_lba - req->lba) << ns->block_shift, where;
                uint64_t n = req->one_iov.iov_len;
                if (!flat_crypt(req, false, req->cur_lba, req->scratch, n))
                        return;
                if (!compare_iov(req, req->scratch, done, n, &where)) {
                        req->info = done + where;
                        req->info_valid = true;
                        finish(req, CORE_E_MISCOMPARE);
                        return;
                }
                req->cur_lba += n >> ns->block_shift;
                if (req->cur_lba < req->lba + req->nlb)
                        compare_next(req);
                else
                        finish(req, CORE_OK);
                return;
        }
        case ST_READ_FOR_RMW: {
                uint8_t *media = req->scratch;
                if (!flat_crypt(req, false, req->lba, media, len))
                        return;
                if (req->op == CORE_OP_COMPARE || req->op == CORE_OP_COMPARE_AND_WRITE) {
                        uint64_t where;
                        if (!compare_iov(req, media, 0, len, &where)) {
                                req->info = where;
                                req->info_valid = true;
                                finish(req, CORE_E_MISCOMPARE);
                                return;
                        }
                        if (req->op == CORE_OP_COMPARE) {
                                finish(req, CORE_OK);
                                return;
                        }
                        /* Write half of the data-out buffer: copy it flat into scratch. */
                        iov_to_flat(req, media, len, len);
                        if (!flat_crypt(req, true, req->lba, media, len))
                                return;
                        if (core_atomic_journaled(req)) {
                                /*
                                 * CORE_REQ_ATOMIC (NVMe fused Compare and Write that
                                 * fits NACWU): the write half through the journal, so
                                 * it is all-or-nothing across a crash too.  The compare
                                 * is done; iov becomes the data to write.
                                 */
                                req->iov[0].iov_base = media;
                                req->iov[0].iov_len = len;
                                req->iovcnt = 1;
                                req->stage = ST_JOURNAL;
                                core_atomic_submit(req);
                                return;
                        }
                } else {
                        /* ORWRITE: media |= data. */
                        uint64_t off = 0;
                        for (int i = 0; i < req->iovcnt && off < len; i++) {
                                const uint8_t *p = req->iov[i].iov_base;
                                uint64_t n = req->iov[i].iov_len < len - off ? req->iov[i].iov_len
                                                                             : len - off;
                                for (uint64_t k = 0; k < n; k++)
                                        media[off + k] |= p[k];
                                off += n;
                        }
                        if (!flat_crypt(req, true, req->lba, media, len))
                                return;
                }
                req->stage = ST_WRITE_RMW;
                req->one_iov.iov_base = media;
                req->one_iov.iov_len = len;
                be_io(req, CORE_OP_WRITE, req->lba, req->nlb, &req->one_iov, 1);
                return;
        }
        case ST_WRITE_RMW:
                finish(req, CORE_OK);
                return;
        default:
                finish(req, CORE_E_INTERNAL);
                return;
        }
}
