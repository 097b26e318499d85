/*
 * The core copy engine (src/core/copy.c) on a real reactor: mem and file
 * backends, within and across namespaces, mixed backends, overlapping
 * ranges (memmove: as if each range were read whole before written),
 * cancellation before and during a copy, every check the equivalent read
 * and write would get (write protection, range, reservation, format),
 * the engine limits, FUA, counters, many copies sharing the reactor's few
 * chunk buffers, and protection information (each block's metadata moved,
 * type 1 reference tags retagged, source checks failing with nothing
 * written, the destination's PI generated or checked, formats that differ).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core_fixture.h"
#include "core/copy.h"
#include "core/ns.h"
#include "core/req.h"
#include "rt/reactor.h"

#define MIB (1u << 20)

static char state_dir[256];

static int setup(void **st)
{
        (void)st;
        return core_fixture_up(state_dir, sizeof(state_dir), "copy", 1);
}

static int teardown(void **st)
{
        (void)st;
        return core_fixture_down(state_dir);
}

/* The core's counters (core/stats.h): bytes written, flushes done. */
static uint64_t wbytes(struct core_ns *ns)
{
        struct core_stats_sum sum;
        core_stats_sum(&ns->stats, &sum);
        return sum.bytes[CORE_OPC_WRITE];
}

static uint64_t flushes(struct core_ns *ns)
{
        return core_stats_ops(&ns->stats, CORE_OPC_FLUSH);
}

static struct core_ns *mk_params(const struct core_ns_params *p)
{
        struct core_ns *ns = NULL;
        char err[256];
        int rc = core_ns_create(p, &ns, err, sizeof(err));
        if (rc)
                fprintf(stderr, "create %s: %s\n", p->name, err);
        assert_int_equal(rc, 0);
        return ns;
}

static struct core_ns *mk(const char *name, const char *backend, uint64_t size, uint32_t bs)
{
        struct core_ns_params p = {
            .name = name, .backend = backend, .size_bytes = size, .block_size = bs};
        return mk_params(&p);
}

static void rm(struct core_ns *ns)
{
        char name[CORE_NS_NAME_MAX];
        snprintf(name, sizeof(name), "%s", ns->name);
        assert_int_equal(core_ns_delete(name), 0);
}

/* ---- synchronous helpers on reactor 0 ---- */

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending;

static void done_one(void)
{
        pthread_mutex_lock(&m);
        pending--;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&m);
}

static void wait_all(void)
{
        pthread_mutex_lock(&m);
        while (pending > 0)
                pthread_cond_wait(&cv, &m);
        pthread_mutex_unlock(&m);
}

static void req_cb(struct core_req *req)
{
        (void)req;
        done_one();
}

static void submit_req(void *arg)
{
        core_req_submit(arg);
}

static enum core_status io(struct core_ns *ns, enum core_op op, uint64_t lba, void *buf,
                           uint32_t nlb)
{
        static struct core_req req;
        core_req_init(&req, ns, op, lba, nlb, 0, rt_get(0), req_cb, NULL);
        req.iov[0].iov_base = buf;
        req.iov[0].iov_len = (size_t)nlb * ns->block_size;
        req.iovcnt = 1;
        pending = 1;
        rt_msg_send(rt_get(0), submit_req, &req);
        wait_all();
        return req.status;
}

/* Fill blocks [lba, lba+nlb) with a pattern that names (tag, block). */
static void fill(struct core_ns *ns, uint64_t lba, uint32_t nlb, uint8_t tag)
{
        size_t len = (size_t)nlb * ns->block_size;
        uint8_t *b = malloc(len);
        for (uint32_t i = 0; i < nlb; i++)
                for (uint32_t k = 0; k < ns->block_size; k++)
                        b[(size_t)i * ns->block_size + k] = (uint8_t)(tag + i * 7 + k / 64);
        assert_int_equal(io(ns, CORE_OP_WRITE, lba, b, nlb), CORE_OK);
        free(b);
}

/* Block i of what fill(tag) wrote. */
static void expect_block(const uint8_t *blk, uint32_t bs, uint8_t tag, uint32_t i)
{
        for (uint32_t k = 0; k < bs; k++)
                if (blk[k] != (uint8_t)(tag + i * 7 + k / 64))
                        fail_msg("block %u byte %u: %02x, want %02x", i, k, blk[k],
                                 (uint8_t)(tag + i * 7 + k / 64));
}

/* Blocks [lba, lba+nlb) of ns hold fill(tag)'s blocks first..first+nlb-1. */
static void expect(struct core_ns *ns, uint64_t lba, uint32_t nlb, uint8_t tag, uint32_t first)
{
        size_t len = (size_t)nlb * ns->block_size;
        uint8_t *b = malloc(len);
        assert_int_equal(io(ns, CORE_OP_READ, lba, b, nlb), CORE_OK);
        for (uint32_t i = 0; i < nlb; i++)
                expect_block(b + (size_t)i * ns->block_size, ns->block_size, tag, first + i);
        free(b);
}

static _Atomic int off_reactor; /* callbacks that ran anywhere but the issuer's reactor */

static void copy_cb(struct core_copy *c)
{
        if (rt_current() != c->reactor)
                off_reactor++;
        done_one();
}

static bool cancel_at_submit;
/* Protection settings for the next copy (core_copy.pi), applied after core_copy_init. */
static __typeof__(((struct core_copy *)0)->pi) next_pi;

static void submit_copy(void *arg)
{
        struct core_copy *c = arg;
        core_copy_submit(c);
        if (cancel_at_submit)
                core_copy_cancel(c);
}

static void start_copy(struct core_copy *c, const struct core_copy_range *r, unsigned n,
                       uint32_t flags, const struct core_pr_nexus *nexus)
{
        core_copy_init(c, r, n, flags, rt_get(0), copy_cb, NULL);
        c->nexus = nexus;
        c->pi = next_pi;
        memset(&next_pi, 0, sizeof(next_pi));
        rt_msg_send(rt_get(0), submit_copy, c);
}

static enum core_status copy(const struct core_copy_range *r, unsigned n, uint32_t flags,
                             const struct core_pr_nexus *nexus, struct core_copy *out)
{
        static struct core_copy c;
        pending = 1;
        start_copy(&c, r, n, flags, nexus);
        wait_all();
        assert_int_equal(off_reactor, 0);
        if (out)
                *out = c;
        return c.status;
}

/* ---- tests ---- */

/* Within one namespace and across two, several ranges landing back to back. */
static void check_within_and_across(const char *backend)
{
        char n1[32], n2[32];
        snprintf(n1, sizeof(n1), "%s-a", backend);
        snprintf(n2, sizeof(n2), "%s-b", backend);
        struct core_ns *a = mk(n1, backend, 64 * MIB, 512);
        struct core_ns *b = mk(n2, backend, 64 * MIB, 512);
        fill(a, 0, 64, 0x10);
        fill(a, 1000, 16, 0x40);
        fill(b, 0, 64, 0x80);
        uint64_t w0 = wbytes(b);

        /* a: [0,8) and [1000,1016) to a at 5000 (within). */
        struct core_copy_range r1[] = {{a, 0, a, 5000, 8}, {a, 1000, a, 5008, 16}};
        struct core_copy c;
        assert_int_equal(copy(r1, 2, 0, NULL, &c), CORE_OK);
        assert_int_equal(atomic_load(&c.blocks_done), 24);
        expect(a, 5000, 8, 0x10, 0);
        expect(a, 5008, 16, 0x40, 0);
        assert_int_equal(atomic_load(&a->copy_stats.ops), 1);
        assert_int_equal(atomic_load(&a->copy_stats.bytes), 24 * 512);

        /* b's [8,40) to a at 20000, and a's [1000,1004) to b at 100 (across, both ways). */
        struct core_copy_range r2[] = {{b, 8, a, 20000, 32}, {a, 1000, b, 100, 4}};
        assert_int_equal(copy(r2, 2, 0, NULL, &c), CORE_OK);
        assert_int_equal(atomic_load(&c.blocks_done), 36);
        expect(a, 20000, 32, 0x80, 8);
        expect(b, 100, 4, 0x40, 0);
        assert_int_equal(atomic_load(&b->copy_stats.bytes), 4 * 512);
        /* The destination's write counters see the copy too (offloaded or not). */
        assert_true(wbytes(b) >= w0 + 4 * 512);
        /* Ended: nothing left in flight on either destination. */
        assert_int_equal(atomic_load(&a->copy_stats.active_bytes), 0);
        assert_int_equal(atomic_load(&a->copy_stats.active_done), 0);
        assert_int_equal(atomic_load(&b->copy_stats.active_bytes), 0);
        assert_int_equal(atomic_load(&b->copy_stats.active_done), 0);
        rm(a);
        rm(b);
}

static void test_mem(void **st)
{
        (void)st;
        check_within_and_across("mem");
}

static void test_file(void **st)
{
        (void)st;
        check_within_and_across("file");
}

/* Larger than one chunk of either kind, and mem <-> file (buffered between backends). */
static void test_large_and_mixed(void **st)
{
        (void)st;
        struct core_ns *f = mk("big-f", "file", 256 * MIB, 4096);
        struct core_ns *mm = mk("big-m", "mem", 256 * MIB, 4096);
        const uint32_t nlb = (40 * MIB) / 4096; /* > the 32 MiB offload chunk, 40 buffered chunks */
        fill(f, 0, nlb, 0x21);
        struct core_copy_range r[] = {{f, 0, f, 20000, nlb}};
        struct core_copy c;
        assert_int_equal(copy(r, 1, 0, NULL, &c), CORE_OK);
        expect(f, 20000, nlb, 0x21, 0);
        /* Offloaded (worker adds per call, chunk_done the rest): back to 0 at the end. */
        assert_int_equal(atomic_load(&f->copy_stats.active_bytes), 0);
        assert_int_equal(atomic_load(&f->copy_stats.active_done), 0);
        struct core_copy_range r2[] = {{f, 0, mm, 7, nlb}};
        assert_int_equal(copy(r2, 1, 0, NULL, &c), CORE_OK);
        expect(mm, 7, nlb, 0x21, 0);
        struct core_copy_range r3[] = {{mm, 7, f, 40000, nlb}};
        assert_int_equal(copy(r3, 1, 0, NULL, &c), CORE_OK);
        assert_int_equal(atomic_load(&c.blocks_done), nlb);
        expect(f, 40000, nlb, 0x21, 0);
        rm(f);
        rm(mm);
}

/*
 * Source and destination overlapping in one namespace: the destination
 * gets the source's old contents, whichever way they overlap and however
 * many chunks it takes (memmove).
 */
static void check_overlap(const char *backend, uint32_t nlb, uint32_t shift)
{
        char name[32];
        snprintf(name, sizeof(name), "ovl-%s-%u", backend, nlb);
        struct core_ns *ns = mk(name, backend, 64 * MIB, 512);
        fill(ns, 100, nlb, 0x33);
        /* Forward overlap: destination after the source, by shift blocks. */
        struct core_copy_range r[] = {{ns, 100, ns, 100 + shift, nlb}};
        assert_int_equal(copy(r, 1, 0, NULL, NULL), CORE_OK);
        expect(ns, 100 + shift, nlb, 0x33, 0);
        expect(ns, 100, shift, 0x33, 0); /* the head that was not overwritten */
        /* Backward overlap: move it back to 100. */
        struct core_copy_range r2[] = {{ns, 100 + shift, ns, 100, nlb}};
        assert_int_equal(copy(r2, 1, 0, NULL, NULL), CORE_OK);
        expect(ns, 100, nlb, 0x33, 0);
        /* Onto itself: nothing changes, and it succeeds. */
        struct core_copy_range r3[] = {{ns, 100, ns, 100, nlb}};
        assert_int_equal(copy(r3, 1, 0, NULL, NULL), CORE_OK);
        expect(ns, 100, nlb, 0x33, 0);
        rm(ns);
}

static void test_overlap(void **st)
{
        (void)st;
        check_overlap("mem", 8, 3);
        check_overlap("mem", 5000, 1500); /* several 1 MiB chunks */
        check_overlap("file", 8, 3);
        check_overlap("file", 5000, 1500);
}

/* Cancelled before the first chunk: aborted, nothing copied. */
static void test_cancel_before(void **st)
{
        (void)st;
        struct core_ns *ns = mk("cancel0", "mem", 64 * MIB, 512);
        fill(ns, 0, 8, 0x55);
        fill(ns, 1000, 8, 0x66);
        struct core_copy_range r[] = {{ns, 0, ns, 1000, 8}};
        struct core_copy c;
        cancel_at_submit = true;
        assert_int_equal(copy(r, 1, 0, NULL, &c), CORE_E_ABORTED);
        cancel_at_submit = false;
        assert_int_equal(atomic_load(&c.blocks_done), 0);
        expect(ns, 1000, 8, 0x66, 0);
        rm(ns);
}

/* Cancelled while it runs (from another thread): stops at a chunk boundary. */
static void test_cancel_running(void **st)
{
        (void)st;
        struct core_ns *ns = mk("cancel1", "mem", 256 * MIB, 4096);
        const uint32_t nlb = (128 * MIB) / 4096;
        static struct core_copy c;
        struct core_copy_range r[] = {{ns, 0, ns, nlb, nlb}};
        pending = 1;
        start_copy(&c, r, 1, 0, NULL);
        while (atomic_load(&c.blocks_done) == 0)
                usleep(50);
        /* Running: the whole copy counted in the destination, part of it done. */
        assert_int_equal(atomic_load(&ns->copy_stats.active_bytes), 128 * MIB);
        uint64_t ad = atomic_load(&ns->copy_stats.active_done);
        assert_true(ad > 0 && ad <= 128 * MIB);
        core_copy_cancel(&c);
        wait_all();
        assert_int_equal(c.status, CORE_E_ABORTED);
        /* Ended (cancelled): both taken back. */
        assert_int_equal(atomic_load(&ns->copy_stats.active_bytes), 0);
        assert_int_equal(atomic_load(&ns->copy_stats.active_done), 0);
        uint64_t done = atomic_load(&c.blocks_done);
        assert_true(done > 0 && done < nlb);
        assert_int_equal(done % (MIB / 4096), 0); /* whole chunks */
        assert_int_equal(c.failed_range, 0);
        rm(ns);
}

/* Every check a read of the source and a write of the destination would get. */
static void test_checks(void **st)
{
        (void)st;
        struct core_ns *a = mk("chk-a", "mem", 4 * MIB, 512);
        struct core_ns *b = mk("chk-b", "mem", 4 * MIB, 512);
        struct core_ns *k = mk("chk-4k", "mem", 4 * MIB, 4096);
        fill(b, 0, 8, 0x77);
        uint64_t nb = core_ns_blocks(a);
        struct core_copy c;

        /* Write-protected destination (not source). */
        assert_int_equal(core_ns_set_wp(b, CORE_WP_CONFIG, true, NULL), 0);
        struct core_copy_range r[] = {{a, 0, a, 10, 2}, {a, 0, b, 0, 8}};
        assert_int_equal(copy(r, 2, 0, NULL, &c), CORE_E_WRITE_PROTECT);
        assert_int_equal(c.failed_range, 1);
        assert_int_equal(atomic_load(&c.blocks_done), 0); /* refused before any data moved */
        struct core_copy_range rs[] = {{b, 0, a, 0, 8}};
        assert_int_equal(copy(rs, 1, 0, NULL, NULL), CORE_OK); /* reading it is fine */
        assert_int_equal(core_ns_set_wp(b, CORE_WP_CONFIG, false, NULL), 0);
        expect(b, 0, 8, 0x77, 0);

        /* Out of range, source or destination, and the overflow trap. */
        struct core_copy_range o1[] = {{a, 0, b, 0, 1}, {a, nb - 1, b, 0, 2}};
        assert_int_equal(copy(o1, 2, 0, NULL, &c), CORE_E_LBA_RANGE);
        assert_int_equal(c.failed_range, 1);
        struct core_copy_range o2[] = {{a, 0, b, nb, 1}};
        assert_int_equal(copy(o2, 1, 0, NULL, &c), CORE_E_LBA_RANGE);
        struct core_copy_range o3[] = {{a, UINT64_MAX, b, 0, 2}};
        assert_int_equal(copy(o3, 1, 0, NULL, &c), CORE_E_LBA_RANGE);

        /* Different block sizes. */
        struct core_copy_range f[] = {{a, 0, k, 0, 1}};
        assert_int_equal(copy(f, 1, 0, NULL, &c), CORE_E_COPY_INCOMPATIBLE);

        /* Limits: ranges, one range, the whole copy. */
        static struct core_copy_range many[CORE_COPY_MAX_RANGES + 1];
        for (unsigned i = 0; i <= CORE_COPY_MAX_RANGES; i++)
                many[i] = (struct core_copy_range){a, i, b, i, 1};
        assert_int_equal(copy(many, CORE_COPY_MAX_RANGES, 0, NULL, NULL), CORE_OK);
        assert_int_equal(copy(many, CORE_COPY_MAX_RANGES + 1, 0, NULL, NULL), CORE_E_COPY_LIMIT);
        struct core_ns *big = mk("chk-big", "null", 8ull << 30, 512);
        struct core_copy_range l1[] = {
            {big, 0, big, 1ull << 23, (CORE_COPY_MAX_RANGE_BYTES >> 9) + 1}};
        assert_int_equal(copy(l1, 1, 0, NULL, &c), CORE_E_COPY_LIMIT);
        static struct core_copy_range l2[CORE_COPY_MAX_RANGES];
        unsigned nl2 = (unsigned)(CORE_COPY_MAX_BYTES / CORE_COPY_MAX_RANGE_BYTES) + 1;
        for (unsigned i = 0; i < nl2; i++)
                l2[i] = (struct core_copy_range){big, 0, big, 1ull << 23,
                                                 CORE_COPY_MAX_RANGE_BYTES >> 9};
        assert_int_equal(copy(l2, nl2, 0, NULL, &c), CORE_E_COPY_LIMIT);
        assert_int_equal(c.failed_range, nl2 - 1);

        /* Not ready (stopped) and sanitize failure mode on the source. */
        core_ns_set_ready(a, CORE_NS_STOPPED, NULL);
        struct core_copy_range s1[] = {{a, 0, b, 0, 1}};
        assert_int_equal(copy(s1, 1, 0, NULL, NULL), CORE_E_NOT_READY);
        core_ns_set_ready(a, CORE_NS_READY, NULL);
        assert_int_equal(copy(s1, 1, 0, NULL, NULL), CORE_OK);
        rm(a);
        rm(b);
        rm(k);
        rm(big);
}

static void mknexus(struct core_pr_nexus *n, const char *ini)
{
        memset(n, 0, sizeof(*n));
        snprintf(n->initiator, sizeof(n->initiator), "%s", ini);
        snprintf(n->target, sizeof(n->target), "iqn.t,t,0x1");
        n->rel_tgt_port = 1;
}

/* Reservations: read group on the source, write group on the destination. */
static void test_reservation(void **st)
{
        (void)st;
        struct core_ns *a = mk("pr-a", "mem", 4 * MIB, 512);
        struct core_ns *b = mk("pr-b", "mem", 4 * MIB, 512);
        struct core_pr_nexus A, B;
        mknexus(&A, "iqn.a,i,0x230000000001");
        mknexus(&B, "iqn.b,i,0x230000000002");
        struct core_pr_cmd reg = {.action = CORE_PR_REGISTER, .sa_key = 0xa1};
        assert_int_equal(core_ns_pr_out(b, &A, &reg, NULL), CORE_OK);
        struct core_pr_cmd res = {.action = CORE_PR_RESERVE,
                                  .type = CORE_PR_WRITE_EXCLUSIVE,
                                  .scope = CORE_PR_SCOPE_LU,
                                  .key = 0xa1};
        assert_int_equal(core_ns_pr_out(b, &A, &res, NULL), CORE_OK);
        fill(a, 0, 4, 0x12);
        fill(b, 0, 4, 0x34);
        /* b write-exclusive to A: B may copy from it but not into it. */
        struct core_copy_range into_b[] = {{a, 0, b, 0, 4}};
        struct core_copy_range from_b[] = {{b, 0, a, 10, 4}};
        assert_int_equal(copy(into_b, 1, 0, &B, NULL), CORE_E_RESERVATION_CONFLICT);
        expect(b, 0, 4, 0x34, 0);
        assert_int_equal(copy(from_b, 1, 0, &B, NULL), CORE_OK);
        expect(a, 10, 4, 0x34, 0);
        assert_int_equal(copy(into_b, 1, 0, &A, NULL), CORE_OK);
        expect(b, 0, 4, 0x12, 0);
        /* Exclusive access: B may not even read it. */
        struct core_pr_cmd rel = {.action = CORE_PR_RELEASE,
                                  .type = CORE_PR_WRITE_EXCLUSIVE,
                                  .scope = CORE_PR_SCOPE_LU,
                                  .key = 0xa1};
        assert_int_equal(core_ns_pr_out(b, &A, &rel, NULL), CORE_OK);
        res.type = CORE_PR_EXCLUSIVE_ACCESS;
        assert_int_equal(core_ns_pr_out(b, &A, &res, NULL), CORE_OK);
        assert_int_equal(copy(from_b, 1, 0, &B, NULL), CORE_E_RESERVATION_CONFLICT);
        rm(a);
        rm(b);
}

/* FUA: the destination (each distinct one once) is flushed before completion. */
static void test_fua(void **st)
{
        (void)st;
        struct core_ns *a = mk("fua-a", "file", 4 * MIB, 512);
        struct core_ns *b = mk("fua-b", "file", 4 * MIB, 512);
        fill(a, 0, 8, 0x5a);
        uint64_t fa = flushes(a), fb = flushes(b);
        struct core_copy_range r[] = {{a, 0, b, 0, 4}, {a, 4, b, 4, 4}, {a, 0, a, 100, 2}};
        assert_int_equal(copy(r, 3, CORE_REQ_FUA, NULL, NULL), CORE_OK);
        assert_int_equal(flushes(b), fb + 1);
        assert_int_equal(flushes(a), fa + 1);
        assert_int_equal(copy(r, 3, 0, NULL, NULL), CORE_OK);
        assert_int_equal(flushes(b), fb + 1); /* no FUA, no flush */
        expect(b, 0, 8, 0x5a, 0);
        rm(a);
        rm(b);
}

/* More copies at once than the reactor has chunk buffers: they park and all finish. */
static void test_many_at_once(void **st)
{
        (void)st;
        enum { N = 12 };
        struct core_ns *ns = mk("many", "mem", 128 * MIB, 512);
        const uint32_t nlb = 3 * MIB / 512; /* three buffered chunks each */
        fill(ns, 0, nlb, 0x99);
        static struct core_copy c[N];
        static struct core_copy_range r[N];
        pending = N;
        for (int i = 0; i < N; i++) {
                r[i] = (struct core_copy_range){ns, 0, ns, (uint64_t)(i + 1) * nlb, nlb};
                start_copy(&c[i], &r[i], 1, 0, NULL);
        }
        wait_all();
        for (int i = 0; i < N; i++) {
                assert_int_equal(c[i].status, CORE_OK);
                assert_int_equal(atomic_load(&c[i].blocks_done), nlb);
                expect(ns, (uint64_t)(i + 1) * nlb, nlb, 0x99, 0);
        }
        rm(ns);
}

/*
 * A destination with a provisioning limit: the copy reserves space like a
 * host write (no copy_file_range around the limit), stops with the
 * space-allocation status at the hard limit, and copies what fits.
 */
/* ---- protection information ---- */

#define PBS  512u
#define PMD  8u
#define PEXT (PBS + PMD)

static struct core_ns *mk_pi(const char *name, const char *backend, unsigned type)
{
        struct core_ns_params p = {
            .name = name,
            .backend = backend,
            .size_bytes = 4 * MIB,
            .block_size = PBS,
            .pi_set = true,
            .pi = {.block_size = PBS, .md_size = PMD, .type = (uint8_t)type}};
        return mk_params(&p);
}

/* An I/O with protection settings: host_md (extended LBAs), checks, generated tags. */
static enum core_status pio(struct core_ns *ns, enum core_op op, uint64_t lba, void *buf,
                            uint32_t nlb, bool host_md, unsigned chk, uint64_t ref, uint16_t app,
                            uint64_t *info)
{
        static struct core_req req;
        core_req_init(&req, ns, op, lba, nlb, 0, rt_get(0), req_cb, NULL);
        req.iov[0].iov_base = buf;
        req.iov[0].iov_len = core_ns_xfer_bytes(ns, nlb, host_md);
        req.iovcnt = 1;
        req.pi.host_md = host_md;
        req.pi.chk = chk;
        req.pi.ref = ref;
        req.pi.app = app;
        req.pi.app_mask = 0xffff;
        req.pi.gen_ref = ref;
        req.pi.gen_app = app;
        pending = 1;
        rt_msg_send(rt_get(0), submit_req, &req);
        wait_all();
        if (info)
                *info = req.info_valid ? req.info : UINT64_MAX;
        return req.status;
}

#define ALLCHK (CORE_PI_CHK_GUARD | CORE_PI_CHK_APP | CORE_PI_CHK_REF)

static void check_pi(const char *backend)
{
        char na[32], nb[32], nc[32], nd[32];
        snprintf(na, sizeof(na), "pi-%s-a", backend);
        snprintf(nb, sizeof(nb), "pi-%s-b", backend);
        snprintf(nc, sizeof(nc), "pi-%s-c", backend);
        snprintf(nd, sizeof(nd), "pi-%s-d", backend);
        struct core_ns *a = mk_pi(na, backend, 1), *b = mk_pi(nb, backend, 1);
        struct core_ns *c3 = mk_pi(nc, backend, 3), *d = mk(nd, backend, 4 * MIB, PBS);
        static uint8_t data[64 * PBS], rd[64 * PBS], ext[64 * PEXT];
        struct core_copy c;
        uint64_t info;
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t)(i * 13 + 5);

        /* Written with generated PI (reference tags from LBA 0, app 1234h), copied to b at 100. */
        assert_int_equal(pio(a, CORE_OP_WRITE, 0, data, 16, false, 0, 0, 0x1234, NULL), CORE_OK);
        struct core_copy_range r1[] = {
            {a, 0, b, 100, 16, .src_chk = CORE_PI_CHK_GUARD | CORE_PI_CHK_REF, .src_ref = 0}};
        assert_int_equal(copy(r1, 1, 0, NULL, &c), CORE_OK);
        assert_int_equal(atomic_load(&c.blocks_done), 16);
        /* Every check passes at the destination: guard and app tag moved, ref now 100.. */
        assert_int_equal(pio(b, CORE_OP_READ, 100, rd, 16, false, ALLCHK, 100, 0x1234, NULL),
                         CORE_OK);
        assert_memory_equal(rd, data, 16 * PBS);
        assert_int_equal(pio(b, CORE_OP_READ, 100, rd, 16, false, ALLCHK, 0, 0x1234, &info),
                         CORE_E_PI_REFTAG);
        assert_int_equal(info, 100);
        /* Overlapping, within a (memmove): still every tag right at the destination. */
        struct core_copy_range r2[] = {{a, 0, a, 4, 8}};
        assert_int_equal(copy(r2, 1, 0, NULL, NULL), CORE_OK);
        assert_int_equal(pio(a, CORE_OP_READ, 4, rd, 8, false, ALLCHK, 4, 0x1234, NULL), CORE_OK);
        assert_memory_equal(rd, data, 8 * PBS);

        /* Formats that differ (PI and none, type 1 and 3): incompatible, both ways. */
        struct core_copy_range f1[] = {{a, 0, d, 0, 1}}, f2[] = {{d, 0, a, 0, 1}},
                               f3[] = {{a, 0, c3, 0, 1}};
        assert_int_equal(copy(f1, 1, 0, NULL, NULL), CORE_E_COPY_INCOMPATIBLE);
        assert_int_equal(copy(f2, 1, 0, NULL, NULL), CORE_E_COPY_INCOMPATIBLE);
        assert_int_equal(copy(f3, 1, 0, NULL, NULL), CORE_E_COPY_INCOMPATIBLE);

        /* A source block with a bad guard (stored unchecked): the checked copy writes nothing. */
        struct core_pi_fmt f = {.block_size = PBS, .md_size = PMD, .type = 1};
        core_pi_insert(&f, data, (struct core_pi_buf){ext, NULL}, 4,
                       &(struct core_pi_tags){.ref = 20, .app = 0x1234});
        ext[2 * PEXT + 7] ^= 0x20;
        assert_int_equal(pio(a, CORE_OP_WRITE, 20, ext, 4, true, 0, 20, 0, NULL), CORE_OK);
        struct core_copy_range r3[] = {{a, 20, b, 200, 4, .src_chk = CORE_PI_CHK_GUARD}};
        assert_int_equal(copy(r3, 1, 0, NULL, &c), CORE_E_PI_GUARD);
        assert_int_equal(atomic_load(&c.blocks_done), 0);
        static uint8_t back[4 * PEXT];
        assert_int_equal(pio(b, CORE_OP_READ, 200, back, 4, true, 0, 0, 0, NULL), CORE_OK);
        for (size_t i = 0; i < 4; i++) /* still unwritten: the escape */
                for (size_t k = 0; k < PMD; k++)
                        assert_int_equal(back[i * PEXT + PBS + k], 0xff);
        /* Unchecked it is copied as it is: the destination's checking read finds the guard. */
        struct core_copy_range r4[] = {{a, 20, b, 200, 4}};
        assert_int_equal(copy(r4, 1, 0, NULL, NULL), CORE_OK);
        assert_int_equal(pio(b, CORE_OP_READ, 200, rd, 4, false, ALLCHK, 200, 0x1234, &info),
                         CORE_E_PI_GUARD);
        assert_int_equal(info, 202);
        /* The expected source reference tag wrong (NVMe ELBT): the reference tag error. */
        struct core_copy_range r5[] = {{a, 0, b, 300, 2, .src_chk = CORE_PI_CHK_REF, .src_ref = 1}};
        assert_int_equal(copy(r5, 1, 0, NULL, NULL), CORE_E_PI_REFTAG);
        /* The application tag against the range's expected one, under its mask. */
        struct core_copy_range r6[] = {{a, 0, b, 300, 2, .src_chk = CORE_PI_CHK_APP,
                                        .src_app = 0x4321, .src_app_mask = 0xff00}};
        assert_int_equal(copy(r6, 1, 0, NULL, NULL), CORE_E_PI_APPTAG);
        r6[0].src_app_mask = 0x0ff0; /* 32h vs 23h ... */
        assert_int_equal(copy(r6, 1, 0, NULL, NULL), CORE_E_PI_APPTAG);
        r6[0].src_app = 0x1299;
        r6[0].src_app_mask = 0xff00; /* ... the high byte alone agrees */
        assert_int_equal(copy(r6, 1, 0, NULL, NULL), CORE_OK);

        /* dst_gen: new PI at the destination (app 5555h), even over the bad guard. */
        next_pi.dst_gen = true;
        next_pi.dst_app = 0x5555;
        assert_int_equal(copy(r4, 1, 0, NULL, NULL), CORE_OK);
        assert_int_equal(pio(b, CORE_OP_READ, 200, rd, 4, false, ALLCHK, 200, 0x5555, NULL),
                         CORE_OK);
        /* dst_chk: what is about to be written checked (app tag 1234h expected: 5555h is not). */
        struct core_copy_range r7[] = {{b, 200, b, 400, 4}};
        next_pi.dst_chk = CORE_PI_CHK_APP;
        next_pi.dst_app = 0x1234;
        next_pi.dst_app_mask = 0xffff;
        assert_int_equal(copy(r7, 1, 0, NULL, &c), CORE_E_PI_APPTAG);
        assert_int_equal(atomic_load(&c.blocks_done), 0);
        next_pi.dst_chk = CORE_PI_CHK_APP | CORE_PI_CHK_REF | CORE_PI_CHK_GUARD;
        next_pi.dst_app = 0x5555;
        next_pi.dst_app_mask = 0xffff;
        assert_int_equal(copy(r7, 1, 0, NULL, NULL), CORE_OK);

        /* Type 3: tags move unchanged (its reference tag is not the LBA's). */
        assert_int_equal(pio(c3, CORE_OP_WRITE, 0, data, 4, false, 0, 0xabcd, 0x1234, NULL),
                         CORE_OK);
        struct core_copy_range r8[] = {{c3, 0, c3, 50, 4}};
        assert_int_equal(copy(r8, 1, 0, NULL, NULL), CORE_OK);
        assert_int_equal(pio(c3, CORE_OP_READ, 50, back, 4, true, ALLCHK, 0, 0x1234, NULL),
                         CORE_OK);
        static const uint8_t ref3[4] = {0, 0, 0xab, 0xcd};
        assert_memory_equal(back + PBS + 4, ref3, 4);
        /* A chunk is at most a megabyte of extended LBAs: 3000 blocks take two. */
        assert_int_equal(pio(a, CORE_OP_WRITE, 1000, data, 64, false, 0, 1000, 0x1234, NULL),
                         CORE_OK);
        struct core_copy_range r9[] = {{a, 1000, b, 4000, 3000, .src_chk = CORE_PI_CHK_GUARD}};
        assert_int_equal(copy(r9, 1, 0, NULL, NULL), CORE_OK);
        assert_int_equal(pio(b, CORE_OP_READ, 4000, rd, 64, false, ALLCHK, 4000, 0x1234, NULL),
                         CORE_OK);
        assert_memory_equal(rd, data, 64 * PBS);
        assert_int_equal(pio(b, CORE_OP_READ, 6010, rd, 8, false, ALLCHK, 6010, 0, NULL), CORE_OK);
        rm(a);
        rm(b);
        rm(c3);
        rm(d);
}

static void test_pi(void **st)
{
        (void)st;
        check_pi("mem");
        check_pi("file"); /* never offloaded: the metadata is not in the data file */
}

static void test_provision_limit(void **st)
{
        (void)st;
        char err[256];
        struct core_ns *a = mk("pl-a", "file", 8 * MIB, 4096);
        struct core_ns_params p = {.name = "pl-b",
                                   .backend = "file",
                                   .size_bytes = 8 * MIB,
                                   .block_size = 4096,
                                   .thin = true,
                                   .provision_limit = 1 * MIB};
        struct core_ns *b = NULL;
        assert_int_equal(core_ns_create(&p, &b, err, sizeof(err)), 0);
        fill(a, 0, 1024, 0x21);                               /* 4 MiB */
        struct core_copy_range small[] = {{a, 0, b, 0, 128}}; /* 512 KiB: fits */
        assert_int_equal(copy(small, 1, 0, NULL, NULL), CORE_OK);
        expect(b, 0, 128, 0x21, 0);
        struct core_copy_range big[] = {{a, 0, b, 512, 1024}}; /* 4 MiB more: does not */
        struct core_copy c;
        assert_int_equal(copy(big, 1, 0, NULL, &c), CORE_E_SPACE_ALLOC_FAILED);
        assert_true(atomic_load(&c.blocks_done) < 1024);
        expect(b, 0, 128, 0x21, 0); /* what was there is unchanged */
        rm(b);
        rm(a);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_mem),
            cmocka_unit_test(test_file),
            cmocka_unit_test(test_large_and_mixed),
            cmocka_unit_test(test_overlap),
            cmocka_unit_test(test_cancel_before),
            cmocka_unit_test(test_cancel_running),
            cmocka_unit_test(test_checks),
            cmocka_unit_test(test_reservation),
            cmocka_unit_test(test_fua),
            cmocka_unit_test(test_many_at_once),
            cmocka_unit_test(test_provision_limit),
            cmocka_unit_test(test_pi),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
