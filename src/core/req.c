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
#include "core/ns.h"
#include "core/provision.h"
#include "core/req.h"
#include "rt/log.h"

enum {
        ST_START = 0,
        ST_READ_FOR_RMW, /* compare / caw / orwrite: medium read into scratch */
        ST_WRITE_RMW,    /* caw / orwrite: writing */
        ST_WRITE_SAME,   /* write same: chunks in flight */
        ST_COMPARE,      /* compare: a scratch-sized piece of the medium being read */
        ST_SCATTER,      /* TEMP stand-in (issue 8): write scattered, range by range */
        ST_SIMPLE,       /* one backend op, then done */
};

static void finish(struct core_req *req, enum core_status st);

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
            req->op == CORE_OP_COMPARE_AND_WRITE || req->op == CORE_OP_ORWRITE)
                bytes = (uint64_t)req->nlb << ns->block_shift;
        uint64_t lat = rt_now_ns() - req->t_submit;
        core_stats_end(&ns->stats, c, req->status, bytes, lat);
        if (req->host)
                core_stats_end(&req->host->stats, c, req->status, bytes, lat);
}

static void fire_cb(struct rt_defer *d)
{
        struct core_req *req = (struct core_req *)((char *)d - offsetof(struct core_req, defer));
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
                dst += n;
                len -= n;
                skip = 0;
        }
}

static bool rmw_lock(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        bool ok = false;
        pthread_mutex_lock(&ns->rmw_lock);
        for (int i = 0; i < 32; i++) {
                if (!(ns->rmw_used & (1u << i)))
                        continue;
                if (req->lba < ns->rmw_lba[i] + ns->rmw_nlb[i] &&
                    ns->rmw_lba[i] < req->lba + req->nlb)
                        goto out;
        }
        for (int i = 0; i < 32; i++) {
                if (!(ns->rmw_used & (1u << i))) {
                        ns->rmw_used |= 1u << i;
                        ns->rmw_lba[i] = req->lba;
                        ns->rmw_nlb[i] = req->nlb;
                        req->range_locked = true;
                        ok = true;
                        break;
                }
        }
out:
        pthread_mutex_unlock(&ns->rmw_lock);
        return ok;
}

static void rmw_unlock(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        pthread_mutex_lock(&ns->rmw_lock);
        for (int i = 0; i < 32; i++) {
                if ((ns->rmw_used & (1u << i)) && ns->rmw_lba[i] == req->lba &&
                    ns->rmw_nlb[i] == req->nlb) {
                        ns->rmw_used &= ~(1u << i);
                        break;
                }
        }
        pthread_mutex_unlock(&ns->rmw_lock);
        req->range_locked = false;
}

static void finish(struct core_req *req, enum core_status st)
{
        if (req->range_locked)
                rmw_unlock(req);
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
        be_io(req, CORE_OP_WRITE, lba, n, &req->one_iov, 1);
}

static void start_rmw(struct rt_defer *d);

/*
 * TEMP stand-in (issue 8, drop at merge: atomic-core owns this): WRITE
 * SCATTERED as one backend write per range, in order; req->cur_lba is the
 * next range's index, req->done_bytes the data already written.  Not atomic.
 */
static void scatter_next(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        while (req->cur_lba < req->nr_ranges && req->ranges[req->cur_lba].nlb == 0)
                req->cur_lba++;
        if (req->cur_lba >= req->nr_ranges) {
                finish(req, CORE_OK);
                return;
        }
        const struct core_lba_range *r = &req->ranges[req->cur_lba++];
        req->stage = ST_SCATTER;
        req->one_iov.iov_base = (uint8_t *)req->iov[0].iov_base + req->done_bytes;
        req->one_iov.iov_len = r->nlb << ns->block_shift;
        req->done_bytes += (uint32_t)req->one_iov.iov_len;
        be_io(req, CORE_OP_WRITE, r->lba, r->nlb, &req->one_iov, 1);
}

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

static void run(struct core_req *req)
{
        struct core_ns *ns = req->ns;

        switch (req->op) {
        case CORE_OP_READ:
                req->stage = ST_SIMPLE;
                be_io(req, CORE_OP_READ, req->lba, req->nlb, req->iov, req->iovcnt);
                return;
        case CORE_OP_WRITE:
                req->stage = ST_SIMPLE;
                be_io(req, CORE_OP_WRITE, req->lba, req->nlb, req->iov, req->iovcnt);
                return;
        case CORE_OP_FLUSH:
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
                if ((req->flags & CORE_REQ_ANCHOR) && !core_ns_can_anchor(ns)) {
                        core_req_complete(req, CORE_E_INVALID_FIELD);
                        return;
                }
                if (!ns->thin) {
                        core_req_complete(req, CORE_OK);
                        return;
                }
                /*
                 * Every backend's WRITE_ZEROES frees the range (hole punch,
                 * dropped pages); with CORE_REQ_ANCHOR it keeps the space.
                 */
                req->stage = ST_SIMPLE;
                be_io(req, CORE_OP_WRITE_ZEROES, req->lba, req->nlb, NULL, 0);
                return;
        case CORE_OP_WRITE_SCATTERED: /* TEMP stand-in (issue 8) */
                req->cur_lba = 0;
                req->done_bytes = 0;
                scatter_next(req);
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
        if (req->op != CORE_OP_COMPARE && !rmw_lock(req)) {
                /* Another read-modify-write holds overlapping blocks: try again next turn. */
                req->defer.fn = start_rmw;
                rt_defer(req->reactor, &req->defer);
                return;
        }
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

void core_req_submit(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        req->status = CORE_OK;
        req->info_valid = false;
        req->range_locked = false;
        req->prov_frees = false;
        req->prov_bytes = 0;
        req->stage = ST_START;
        req->counted = false;
        if (!ns) {
                core_req_complete(req, CORE_E_INTERNAL);
                return;
        }
        req->counted = true;
        req->t_submit = rt_now_ns();
        core_stats_start(&ns->stats);
        if (req->host)
                core_stats_start(&req->host->stats);
        bool medium = req->op != CORE_OP_FLUSH;
        bool writes = req->op == CORE_OP_WRITE || req->op == CORE_OP_WRITE_ZEROES ||
                      req->op == CORE_OP_COMPARE_AND_WRITE || req->op == CORE_OP_ORWRITE ||
                      req->op == CORE_OP_WRITE_SAME || req->op == CORE_OP_DEALLOCATE ||
                      req->op == CORE_OP_WRITE_SCATTERED; /* TEMP stand-in (issue 8) */
        /* The namespace's state, the same rules for every personality (core/state.c). */
        unsigned chk = CORE_CHK_STARTED;
        if (!(req->flags & CORE_REQ_SANITIZE))
                chk |= CORE_CHK_SANITIZING | (medium ? CORE_CHK_SANITIZE_FAILED : 0);
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
        if (medium && !core_ns_range_ok(ns, req->lba, req->nlb)) {
                core_req_complete(req, CORE_E_LBA_RANGE);
                return;
        }
        uint64_t len = (uint64_t)req->nlb << ns->block_shift;
        uint64_t need = 0, scratch = 0;
        switch (req->op) {
        case CORE_OP_READ:
        case CORE_OP_WRITE:
        case CORE_OP_ORWRITE:
        case CORE_OP_WRITE_SCATTERED: /* TEMP stand-in (issue 8) */
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
                break;
        default:
                break;
        }
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
        else if (req->op == CORE_OP_WRITE || req->op == CORE_OP_COMPARE_AND_WRITE ||
                 req->op == CORE_OP_ORWRITE || req->op == CORE_OP_WRITE_SAME) {
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
        bool is_read =
            req->stage == ST_READ_FOR_RMW || req->stage == ST_COMPARE || req->op == CORE_OP_READ;
        if (res < 0) {
                LOG_DEBUG("core", "namespace %s: backend error %d at lba %llu", ns->name, res,
                          (unsigned long long)req->lba);
                finish(req, is_read ? CORE_E_MEDIUM_ERROR : CORE_E_WRITE_ERROR);
                return;
        }
        switch (req->stage) {
        case ST_SIMPLE:
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
        case ST_SCATTER: /* TEMP stand-in (issue 8) */
                scatter_next(req);
                return;
        default:
                finish(req, CORE_E_INTERNAL);
                return;
        }
}
