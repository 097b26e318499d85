/*
 * Atomic writes (core/atomic.c) on real reactors: the limits per backend
 * and the checks; atomic_write_max persisted and its change published;
 * the journal record on disk (magic, sequence, ranges, checksum);
 * recovery from a crash image (a copy of the data file and the journal
 * taken while the namespace is open, i.e. what kill -9 leaves): committed
 * records replayed over a torn in-place write, torn records discarded; the
 * checkpoint rule (a FUA write or a flush after an atomic write is never
 * overwritten by a replay of the older record); WRITE SCATTERED in the
 * core; and ordering: concurrent reads never see part of an atomic write.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core_fixture.h"
#include "core/atomic.h"
#include "core/ns.h"
#include "core/req.h"
#include "rt/crc.h"
#include "rt/reactor.h"

/* ---- running requests ---- */

struct batch {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        int left;
};

struct areq {
        struct core_req req;
        struct batch *b;
};

static void on_done(struct core_req *req)
{
        struct areq *a = req->cb_arg;
        pthread_mutex_lock(&a->b->lock);
        a->b->left--;
        pthread_cond_signal(&a->b->cond);
        pthread_mutex_unlock(&a->b->lock);
}

static void submit_fn(void *arg)
{
        core_req_submit(&((struct areq *)arg)->req);
}

static void prep(struct areq *a, struct batch *b, struct core_ns *ns, enum core_op op, uint64_t lba,
                 uint32_t nlb, uint32_t flags, void *buf, size_t len, unsigned reactor)
{
        core_req_init(&a->req, ns, op, lba, nlb, flags, rt_get(reactor), on_done, a);
        a->b = b;
        if (buf) {
                a->req.iov[0].iov_base = buf;
                a->req.iov[0].iov_len = len;
                a->req.iovcnt = 1;
        }
}

static void batch_wait(struct batch *b)
{
        pthread_mutex_lock(&b->lock);
        while (b->left > 0)
                pthread_cond_wait(&b->cond, &b->lock);
        pthread_mutex_unlock(&b->lock);
}

static enum core_status run1(struct core_ns *ns, enum core_op op, uint64_t lba, uint32_t nlb,
                             uint32_t flags, void *buf, size_t len)
{
        struct batch b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1};
        struct areq a;
        prep(&a, &b, ns, op, lba, nlb, flags, buf, len, 0);
        rt_msg_send(rt_get(0), submit_fn, &a);
        batch_wait(&b);
        return a.req.status;
}

static void pattern(uint8_t *p, size_t len, uint8_t seed)
{
        for (size_t i = 0; i < len; i++)
                p[i] = (uint8_t)(seed + i * 7 + (i >> 9));
}

/* ---- fixture ---- */

static char state_dir[256];

static int setup(void **st)
{
        (void)st;
        return core_fixture_up(state_dir, sizeof(state_dir), "atomic", 2);
}

static int teardown(void **st)
{
        (void)st;
        return core_fixture_down(state_dir);
}

static struct core_ns *mk(const char *name, const char *backend, const char *path, bool set,
                          uint32_t max)
{
        struct core_ns_params p = {.name = name,
                                   .backend = backend,
                                   .path = path,
                                   .size_bytes = 4 << 20,
                                   .atomic_write_max_set = set,
                                   .atomic_write_max = max,
                                   .adopt = true}; /* crash images are built without metadata */
        struct core_ns *ns = NULL;
        char err[256];
        int rc = core_ns_create(&p, &ns, err, sizeof(err));
        if (rc)
                fail_msg("core_ns_create %s: %s", name, err);
        return ns;
}

static void copy_file(const char *from, const char *to)
{
        char cmd[9000];
        snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s'", from, to);
        assert_int_equal(system(cmd), 0);
}

/* What kill -9 leaves of ns (its files as they are now), as namespace `as`. */
static struct core_ns *crash_image(struct core_ns *ns, const char *as)
{
        char j[600], j2[600], d2[600];
        snprintf(j, sizeof(j), "%s/%s.atomic", state_dir, ns->name);
        snprintf(j2, sizeof(j2), "%s/%s.atomic", state_dir, as);
        snprintf(d2, sizeof(d2), "%s/%s.img", state_dir, as);
        copy_file(j, j2);
        copy_file(ns->path, d2);
        return NULL;
}

static void pwrite_at(const char *path, const void *buf, size_t len, off_t off)
{
        int fd = open(path, O_WRONLY);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, buf, len, off), (ssize_t)len);
        close(fd);
}

/* ---- tests ---- */

static void test_limits(void **st)
{
        (void)st;
        struct core_atomic_limits l;
        struct core_ns *m = mk("lim-mem", "mem", NULL, true, 64 << 10);
        core_ns_atomic_limits(m, &l);
        assert_int_equal(l.path, CORE_ATOMIC_ORDER);
        assert_int_equal(l.max_blocks, (64 << 10) / 512);
        assert_int_equal(l.align_blocks, 0);
        assert_int_equal(l.scatter_max_ranges, CORE_ATOMIC_SCATTER_RANGES);
        assert_int_equal(core_atomic_check(m, 0, 128, 0), CORE_ATOMIC_OK);
        assert_int_equal(core_atomic_check(m, 7, 129, 0), CORE_ATOMIC_BAD_LENGTH);
        assert_int_equal(core_atomic_check(m, 0, 64, 129), CORE_ATOMIC_BAD_BOUNDARY);
        assert_int_equal(core_atomic_check(m, 0, 128, 64), CORE_ATOMIC_OK);
        assert_true(core_atomic_fits(m, 3, 128));
        assert_false(core_atomic_fits(m, 3, 129));

        struct core_ns *n = mk("lim-null", "null", NULL, false, 0);
        core_ns_atomic_limits(n, &l);
        assert_int_equal(l.path, CORE_ATOMIC_NONE);
        assert_int_equal(l.max_blocks, 0);
        assert_int_equal(core_atomic_check(n, 0, 2, 0), CORE_ATOMIC_UNSUPPORTED);
        assert_false(core_atomic_fits(n, 0, 2));
        char err[256];
        assert_int_equal(core_ns_set_atomic_max(n, 4096, err, sizeof(err)), -EOPNOTSUPP);

        struct core_ns *f = mk("lim-file", "file", NULL, true, 8192);
        core_ns_atomic_limits(f, &l);
        assert_int_equal(l.path, CORE_ATOMIC_JOURNAL);
        assert_int_equal(l.max_blocks, 16);
        assert_int_equal(core_ns_set_atomic_max(f, 1000, err, sizeof(err)), -EINVAL);
        assert_int_equal(core_ns_set_atomic_max(f, CORE_ATOMIC_MAX_BYTES + 512, err, sizeof(err)),
                         -EINVAL);
        assert_int_equal(core_ns_delete("lim-mem"), 0);
        assert_int_equal(core_ns_delete("lim-null"), 0);
        assert_int_equal(core_ns_delete("lim-file"), 0);
}

/*
 * The object path (rbd): atomic inside one RADOS object of unit blocks, the
 * object an atomic boundary.  8192 blocks = a 4 MiB object of 512-byte
 * blocks; atomic_write_max 256 blocks (128 KiB).
 */
static void test_object_limits(void **st)
{
        (void)st;
        struct core_atomic_limits l;
        core_atomic_limits_make(CORE_ATOMIC_OBJECT, 256, 8192, &l);
        assert_int_equal(l.path, CORE_ATOMIC_OBJECT);
        assert_int_equal(l.max_blocks, 256);
        assert_int_equal(l.max_with_boundary, 256);
        assert_int_equal(l.boundary_blocks, 8192);
        assert_int_equal(l.max_boundary, 256);
        assert_int_equal(l.align_blocks, 1);
        assert_int_equal(l.gran_blocks, 1);
        assert_int_equal(l.scatter_max_blocks, 0); /* ranges may lie in different objects */
        /* Inside one object: atomic, at any LBA. */
        assert_int_equal(core_atomic_check_limits(&l, 0, 256, 0), CORE_ATOMIC_OK);
        assert_int_equal(core_atomic_check_limits(&l, 8192 - 256, 256, 0), CORE_ATOMIC_OK);
        assert_int_equal(core_atomic_check_limits(&l, 8193, 7, 0), CORE_ATOMIC_OK);
        /* Across an object boundary, no ATOMIC BOUNDARY: refused (the LBA's field). */
        assert_int_equal(core_atomic_check_limits(&l, 8192 - 1, 2, 0), CORE_ATOMIC_BAD_CROSSING);
        assert_int_equal(core_atomic_check_limits(&l, 3 * 8192 - 100, 256, 0),
                         CORE_ATOMIC_BAD_CROSSING);
        assert_int_equal(core_atomic_check_limits(&l, 0, 257, 0), CORE_ATOMIC_BAD_LENGTH);
        /* With one that divides the object: split there, every piece inside one object. */
        assert_int_equal(core_atomic_check_limits(&l, 8192 - 1, 2, 1), CORE_ATOMIC_OK);
        assert_int_equal(core_atomic_check_limits(&l, 8192 - 64, 128, 64), CORE_ATOMIC_OK);
        assert_int_equal(core_atomic_check_limits(&l, 8192 - 64, 128, 256), CORE_ATOMIC_OK);
        assert_int_equal(core_atomic_check_limits(&l, 0, 128, 96), CORE_ATOMIC_BAD_BOUNDARY);
        assert_int_equal(core_atomic_check_limits(&l, 0, 128, 512), CORE_ATOMIC_BAD_BOUNDARY);
        assert_int_equal(core_atomic_check_limits(&l, 0, 257, 64), CORE_ATOMIC_BAD_LENGTH);
        /* NVMe: a Write across the boundary (NABSPF) is simply not atomic. */
        assert_true(core_atomic_fits_limits(&l, 8192 - 256, 256));
        assert_false(core_atomic_fits_limits(&l, 8192 - 255, 256));
        assert_false(core_atomic_fits_limits(&l, 0, 257));
        /* atomic_write_max above the object: capped by it. */
        core_atomic_limits_make(CORE_ATOMIC_OBJECT, 2048, 1024, &l);
        assert_int_equal(l.max_blocks, 1024);
        assert_int_equal(l.max_boundary, 1024);
        /* A max that is not a power of two: the largest boundary that divides the object. */
        core_atomic_limits_make(CORE_ATOMIC_OBJECT, 192, 8192, &l);
        assert_int_equal(l.max_boundary, 128);
        /* The other paths keep no boundary of their own. */
        core_atomic_limits_make(CORE_ATOMIC_JOURNAL, 256, 8192, &l);
        assert_int_equal(l.boundary_blocks, 0);
        assert_int_equal(core_atomic_check_limits(&l, 8192 - 1, 2, 0), CORE_ATOMIC_OK);
        assert_true(core_atomic_fits_limits(&l, 8192 - 1, 2));
        assert_string_equal(core_atomic_path_name(CORE_ATOMIC_OBJECT), "object");
}

static int events_seen;
static uint32_t event_new;
static void listener(const struct core_ns_event *ev, void *arg)
{
        (void)arg;
        if (ev->type == CORE_NS_EV_IDENTITY && !strcmp(ev->ns->name, "persist")) {
                events_seen++;
                event_new = ev->new_val;
        }
}

static void test_set_persist_event(void **st)
{
        (void)st;
        static bool listening;
        if (!listening)
                assert_int_equal(core_ns_listen(listener, NULL), 0);
        listening = true;
        struct core_ns *ns = mk("persist", "file", NULL, false, 0);
        struct core_atomic_limits l;
        core_ns_atomic_limits(ns, &l);
        assert_int_equal(l.max_blocks, 0); /* the default: one block, no atomic writes */
        char err[256];
        events_seen = 0;
        assert_int_equal(core_ns_set_atomic_max(ns, 32768, err, sizeof(err)), 0);
        assert_int_equal(events_seen, 1);
        assert_int_equal(event_new, 32768);
        assert_int_equal(core_ns_set_atomic_max(ns, 32768, err, sizeof(err)), 0);
        assert_int_equal(events_seen, 1); /* no change, no event */
        assert_int_equal(core_ns_delete("persist"), 0);
        ns = mk("persist", "file", NULL, false, 0); /* reopen: the saved value */
        core_ns_atomic_limits(ns, &l);
        assert_int_equal(l.max_blocks, 64);
        assert_int_equal(core_ns_delete("persist"), 0);
        ns = mk("persist", "file", NULL, true, 0); /* given: replaces it */
        core_ns_atomic_limits(ns, &l);
        assert_int_equal(l.max_blocks, 0);
        assert_false(core_atomic_fits(ns, 0, 2));
        assert_int_equal(core_ns_delete("persist"), 0);
}

static void test_record_on_disk(void **st)
{
        (void)st;
        struct core_ns *ns = mk("rec", "file", NULL, true, 64 << 10);
        static uint8_t w[16 * 512], r[16 * 512];
        pattern(w, sizeof(w), 1);
        assert_int_equal(run1(ns, CORE_OP_WRITE, 40, 16, CORE_REQ_ATOMIC, w, sizeof(w)), CORE_OK);
        assert_int_equal(run1(ns, CORE_OP_READ, 40, 16, 0, r, sizeof(r)), CORE_OK);
        assert_memory_equal(w, r, sizeof(w));
        assert_int_equal(atomic_load(&ns->atomic_stats.writes), 1);
        assert_int_equal(atomic_load(&ns->atomic_stats.journal_syncs), 1);
        /* The record: header, one range, the data; the checksum covers them. */
        char j[600];
        snprintf(j, sizeof(j), "%s/rec.atomic", state_dir);
        int fd = open(j, O_RDONLY);
        assert_true(fd >= 0);
        static uint8_t rec[sizeof(struct core_atomic_rec) + 16 + sizeof(w)];
        assert_int_equal(pread(fd, rec, sizeof(rec), CORE_ATOMIC_REC_START), (ssize_t)sizeof(rec));
        close(fd);
        struct core_atomic_rec h;
        memcpy(&h, rec, sizeof(h));
        assert_int_equal(h.magic, CORE_ATOMIC_REC_MAGIC);
        assert_int_equal(h.nr_ranges, 1);
        assert_int_equal(h.hdr_len, sizeof(h) + 16);
        assert_int_equal(h.data_len, sizeof(w));
        assert_int_equal(h.seq, 1);
        uint64_t lba, nlb;
        memcpy(&lba, rec + sizeof(h), 8);
        memcpy(&nlb, rec + sizeof(h) + 8, 8);
        assert_int_equal(lba, 40);
        assert_int_equal(nlb, 16);
        assert_memory_equal(rec + sizeof(h) + 16, w, sizeof(w));
        uint32_t want = h.crc;
        memset(rec + offsetof(struct core_atomic_rec, crc), 0, 4);
        assert_int_equal(rt_crc32c(rec, sizeof(rec)), want);
        /* One block needs no journal. */
        assert_int_equal(run1(ns, CORE_OP_WRITE, 2, 1, CORE_REQ_ATOMIC, w, 512), CORE_OK);
        assert_int_equal(atomic_load(&ns->atomic_stats.writes), 1);
        assert_int_equal(core_ns_delete("rec"), 0);
}

static void test_recovery(void **st)
{
        (void)st;
        struct core_ns *ns = mk("rcv", "file", NULL, true, 64 << 10);
        static uint8_t a[8 * 512], c[8 * 512], junk[8 * 512], r[8 * 512], z[8 * 512];
        pattern(a, sizeof(a), 3);
        pattern(c, sizeof(c), 9);
        memset(junk, 0xEE, sizeof(junk));
        assert_int_equal(run1(ns, CORE_OP_WRITE, 10, 8, CORE_REQ_ATOMIC, a, sizeof(a)), CORE_OK);
        assert_int_equal(run1(ns, CORE_OP_WRITE, 40, 8, CORE_REQ_ATOMIC, c, sizeof(c)), CORE_OK);
        crash_image(ns, "rcv2");
        /*
         * In the image: A's in-place write torn (half junk), C's record torn
         * (a byte of its data flipped) and its in-place write never started.
         */
        char d2[600], j2[600];
        snprintf(d2, sizeof(d2), "%s/rcv2.img", state_dir);
        snprintf(j2, sizeof(j2), "%s/rcv2.atomic", state_dir);
        pwrite_at(d2, junk, sizeof(junk) / 2, 10 * 512 + 1024);
        pwrite_at(d2, z, sizeof(z), 40 * 512);
        uint64_t rec2 = CORE_ATOMIC_REC_START + sizeof(struct core_atomic_rec) + 16 + sizeof(a);
        uint8_t flip = 0x5A;
        pwrite_at(j2, &flip, 1, (off_t)(rec2 + sizeof(struct core_atomic_rec) + 16 + 100));
        struct core_ns *n2 = mk("rcv2", "file", d2, true, 64 << 10);
        assert_int_equal(atomic_load(&n2->atomic_stats.replayed), 1);
        assert_int_equal(atomic_load(&n2->atomic_stats.discarded), 1);
        assert_int_equal(run1(n2, CORE_OP_READ, 10, 8, 0, r, sizeof(r)), CORE_OK);
        assert_memory_equal(r, a, sizeof(a)); /* replayed: whole again */
        assert_int_equal(run1(n2, CORE_OP_READ, 40, 8, 0, r, sizeof(r)), CORE_OK);
        assert_memory_equal(r, z, sizeof(z)); /* discarded: all old */
        /* Recovery retired what it replayed: a second open replays nothing. */
        assert_int_equal(core_ns_delete("rcv2"), 0);
        n2 = mk("rcv2", "file", d2, true, 64 << 10);
        assert_int_equal(atomic_load(&n2->atomic_stats.replayed), 0);
        assert_int_equal(core_ns_delete("rcv2"), 0);
        assert_int_equal(core_ns_delete("rcv"), 0);
}

/*
 * The checkpoint rule: atomic write A, then plain write B over the same
 * blocks, made durable (how), then a crash.  B must survive: the old
 * record of A may not be replayed over it.  Without durability (none) a
 * replay of A is allowed (B was never promised to survive) and is what
 * the journal does.
 */
static void checkpoint_case(const char *name, int how)
{
        struct core_ns *ns = mk(name, "file", NULL, true, 64 << 10);
        static uint8_t a[8 * 512], b[8 * 512], r[8 * 512];
        pattern(a, sizeof(a), 21);
        pattern(b, sizeof(b), 77);
        assert_int_equal(run1(ns, CORE_OP_WRITE, 100, 8, CORE_REQ_ATOMIC, a, sizeof(a)), CORE_OK);
        assert_true(core_atomic_need_checkpoint(ns));
        assert_int_equal(run1(ns, CORE_OP_WRITE, 100, 8, how == 1 ? CORE_REQ_FUA : 0, b, sizeof(b)),
                         CORE_OK);
        if (how == 2)
                assert_int_equal(run1(ns, CORE_OP_FLUSH, 0, 0, 0, NULL, 0), CORE_OK);
        assert_int_equal(core_atomic_need_checkpoint(ns), how == 0);
        char as[64], d2[600];
        snprintf(as, sizeof(as), "%s-img", name);
        crash_image(ns, as);
        snprintf(d2, sizeof(d2), "%s/%s.img", state_dir, as);
        struct core_ns *n2 = mk(as, "file", d2, true, 64 << 10);
        assert_int_equal(run1(n2, CORE_OP_READ, 100, 8, 0, r, sizeof(r)), CORE_OK);
        if (how)
                assert_memory_equal(r, b, sizeof(b));
        else
                assert_memory_equal(r, a, sizeof(a));
        assert_int_equal(core_ns_delete(as), 0);
        assert_int_equal(core_ns_delete(name), 0);
}

static void test_checkpoint_fua(void **st)
{
        (void)st;
        checkpoint_case("ckfua", 1);
}

static void test_checkpoint_flush(void **st)
{
        (void)st;
        checkpoint_case("ckflush", 2);
}

static void test_no_checkpoint_volatile(void **st)
{
        (void)st;
        checkpoint_case("ckvol", 0);
}

static void test_scattered(void **st)
{
        (void)st;
        const char *backends[] = {"mem", "file"};
        for (int k = 0; k < 2; k++) {
                char name[32];
                snprintf(name, sizeof(name), "sc-%s", backends[k]);
                struct core_ns *ns = mk(name, backends[k], NULL, true, 64 << 10);
                static uint8_t w[12 * 512], r[12 * 512];
                pattern(w, sizeof(w), (uint8_t)(5 + k));
                struct core_lba_range rs[3] = {{200, 4}, {50, 2}, {900, 6}};
                for (int atomic = 0; atomic < 2; atomic++) {
                        struct batch b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1};
                        struct areq a;
                        prep(&a, &b, ns, CORE_OP_WRITE_SCATTERED, 0, 12,
                             atomic ? CORE_REQ_ATOMIC : 0, w, sizeof(w), 0);
                        a.req.ranges = rs;
                        a.req.nr_ranges = 3;
                        rt_msg_send(rt_get(0), submit_fn, &a);
                        batch_wait(&b);
                        assert_int_equal(a.req.status, CORE_OK);
                        uint64_t off = 0;
                        for (int i = 0; i < 3; i++) {
                                size_t len = rs[i].nlb * 512;
                                assert_int_equal(run1(ns, CORE_OP_READ, rs[i].lba,
                                                      (uint32_t)rs[i].nlb, 0, r, len),
                                                 CORE_OK);
                                assert_memory_equal(r, w + off, len);
                                off += len;
                        }
                        pattern(w, sizeof(w), (uint8_t)(40 + k));
                }
                /* A total that does not add up, a range past the end. */
                struct batch b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1};
                struct areq a;
                prep(&a, &b, ns, CORE_OP_WRITE_SCATTERED, 0, 11, 0, w, sizeof(w), 0);
                a.req.ranges = rs;
                a.req.nr_ranges = 3;
                rt_msg_send(rt_get(0), submit_fn, &a);
                batch_wait(&b);
                assert_int_equal(a.req.status, CORE_E_INVALID_FIELD);
                struct core_lba_range past[1] = {{(4 << 20) / 512 - 2, 12}};
                b.left = 1;
                prep(&a, &b, ns, CORE_OP_WRITE_SCATTERED, 0, 12, 0, w, sizeof(w), 0);
                a.req.ranges = past;
                a.req.nr_ranges = 1;
                rt_msg_send(rt_get(0), submit_fn, &a);
                batch_wait(&b);
                assert_int_equal(a.req.status, CORE_E_LBA_RANGE);
                assert_int_equal(core_ns_delete(name), 0);
        }
}

/*
 * Ordering: atomic 64 KiB writes of two whole-buffer patterns over the
 * same blocks on reactor 0, plain reads of them on reactor 1, all in
 * flight together; every read must see one pattern whole.
 */
static void ordering_case(const char *backend)
{
        char name[32];
        snprintf(name, sizeof(name), "ord-%s", backend);
        struct core_ns *ns = mk(name, backend, NULL, true, 64 << 10);
        enum { NB = 128, ROUNDS = 40, NW = 8, NR = 8 };
        static uint8_t pat[2][NB * 512];
        memset(pat[0], 0xA5, sizeof(pat[0]));
        memset(pat[1], 0x3C, sizeof(pat[1]));
        static uint8_t rbuf[NR][NB * 512];
        static struct areq reqs[NW + NR];
        assert_int_equal(run1(ns, CORE_OP_WRITE, 64, NB, CORE_REQ_ATOMIC, pat[0], NB * 512),
                         CORE_OK);
        unsigned mixed = 0;
        for (int round = 0; round < ROUNDS; round++) {
                struct batch b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NW + NR};
                for (int i = 0; i < NW; i++)
                        prep(&reqs[i], &b, ns, CORE_OP_WRITE, 64, NB, CORE_REQ_ATOMIC, pat[i & 1],
                             NB * 512, 0);
                for (int i = 0; i < NR; i++)
                        prep(&reqs[NW + i], &b, ns, CORE_OP_READ, 64, NB, 0, rbuf[i], NB * 512, 1);
                for (int i = 0; i < NW + NR; i++) {
                        int k = (i & 1) ? NW + i / 2 : i / 2; /* interleave writes and reads */
                        rt_msg_send(reqs[k].req.reactor, submit_fn, &reqs[k]);
                }
                batch_wait(&b);
                for (int i = 0; i < NW + NR; i++)
                        assert_int_equal(reqs[i].req.status, CORE_OK);
                for (int i = 0; i < NR; i++)
                        if (memcmp(rbuf[i], pat[0], NB * 512) && memcmp(rbuf[i], pat[1], NB * 512))
                                mixed++;
        }
        assert_int_equal(mixed, 0);
        /*
         * Everything left the range lock and the counters (the journal
         * releases a write's lock after its completion, once applied: a
         * flush queues behind that).
         */
        assert_int_equal(run1(ns, CORE_OP_FLUSH, 0, 0, 0, NULL, 0), CORE_OK);
        assert_int_equal(ns->rmw_used, 0);
        assert_int_equal(atomic_load(&ns->atomic_active), 0);
        for (int i = 0; i < CORE_NS_ORDER_SLOTS; i++)
                assert_int_equal(atomic_load(&ns->plain_inflight[i].n), 0);
        assert_int_equal(core_ns_delete(name), 0);
}

static void test_ordering_mem(void **st)
{
        (void)st;
        ordering_case("mem");
}

static void test_ordering_file(void **st)
{
        (void)st;
        ordering_case("file");
}

/*
 * COMPARE AND WRITE with CORE_REQ_ATOMIC (an NVMe fused pair within NACWU):
 * the write half goes through the journal (a record, a journal sync); a
 * miscompare writes nothing and journals nothing; without the flag the
 * write goes straight in place as before.
 */
static void test_caw_journal(void **st)
{
        (void)st;
        struct core_ns *ns = mk("caw", "file", NULL, false, 0);
        static uint8_t old[8 * 512], cw[2 * 8 * 512], r[8 * 512];
        static uint8_t scratch[8 * 512];
        pattern(old, sizeof(old), 5);
        assert_int_equal(run1(ns, CORE_OP_WRITE, 80, 8, 0, old, sizeof(old)), CORE_OK);
        memcpy(cw, old, sizeof(old));
        pattern(cw + sizeof(old), sizeof(old), 11);
        struct batch b = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1};
        struct areq a;
        prep(&a, &b, ns, CORE_OP_COMPARE_AND_WRITE, 80, 8, CORE_REQ_ATOMIC, cw, sizeof(cw), 0);
        a.req.scratch = scratch;
        a.req.scratch_len = sizeof(scratch);
        rt_msg_send(rt_get(0), submit_fn, &a);
        batch_wait(&b);
        assert_int_equal(a.req.status, CORE_OK);
        assert_int_equal(atomic_load(&ns->atomic_stats.writes), 1);
        /* The read waits for the blocks' lock, held until the record is synced and applied. */
        assert_int_equal(run1(ns, CORE_OP_READ, 80, 8, 0, r, sizeof(r)), CORE_OK);
        assert_int_equal(atomic_load(&ns->atomic_stats.journal_syncs), 1);
        assert_memory_equal(r, cw + sizeof(old), sizeof(r));
        /* Miscompare: the old (now the first write's) data stays, nothing journaled. */
        pattern(cw + sizeof(old), sizeof(old), 23);
        b.left = 1;
        prep(&a, &b, ns, CORE_OP_COMPARE_AND_WRITE, 80, 8, CORE_REQ_ATOMIC, cw, sizeof(cw), 0);
        a.req.scratch = scratch;
        a.req.scratch_len = sizeof(scratch);
        rt_msg_send(rt_get(0), submit_fn, &a);
        batch_wait(&b);
        assert_int_equal(a.req.status, CORE_E_MISCOMPARE);
        assert_int_equal(atomic_load(&ns->atomic_stats.writes), 1);
        assert_int_equal(run1(ns, CORE_OP_READ, 80, 8, 0, r, sizeof(r)), CORE_OK);
        pattern(cw, sizeof(old), 11);
        assert_memory_equal(r, cw, sizeof(r));
        assert_int_equal(core_ns_delete("caw"), 0);
}

/*
 * The native path's selection and per-write rules (core/atomic.h), from
 * stubbed statx results: what a scsi_debug atomic_wr=1 disk or an XFS file
 * would report, and what keeps a namespace on the journal.
 */
static void test_native_choose(void **st)
{
        (void)st;
        uint32_t cap;
        struct core_atomic_native none = {0};
        assert_int_equal(core_atomic_choose_file(&none, 4096, &cap), CORE_ATOMIC_JOURNAL);
        assert_int_equal(cap, CORE_ATOMIC_MAX_BYTES);
        struct core_atomic_native n = {.supported = true,
                                       .unit_min = 512,
                                       .unit_max = 64 << 10,
                                       .segments_max = 1,
                                       .mem_align = 512,
                                       .offset_align = 512};
        assert_int_equal(core_atomic_choose_file(&n, 4096, &cap), CORE_ATOMIC_NATIVE);
        assert_int_equal(cap, 64 << 10);
        n.unit_max = 4 << 20; /* larger than we ever allow: our own maximum stays */
        assert_int_equal(core_atomic_choose_file(&n, 4096, &cap), CORE_ATOMIC_NATIVE);
        assert_int_equal(cap, CORE_ATOMIC_MAX_BYTES);
        n.unit_max = 4096; /* one block only (ext4 without bigalloc): nothing gained */
        assert_int_equal(core_atomic_choose_file(&n, 4096, &cap), CORE_ATOMIC_JOURNAL);
        n.unit_max = 64 << 10;
        n.unit_min = 8192; /* a block write would be refused */
        assert_int_equal(core_atomic_choose_file(&n, 4096, &cap), CORE_ATOMIC_JOURNAL);
        n.unit_min = 512;
        n.offset_align = 4096; /* 512-byte blocks cannot be written O_DIRECT */
        assert_int_equal(core_atomic_choose_file(&n, 512, &cap), CORE_ATOMIC_JOURNAL);
        n.offset_align = 512;
        n.unit_max = 48 << 10; /* not a power of two */
        assert_int_equal(core_atomic_choose_file(&n, 4096, &cap), CORE_ATOMIC_JOURNAL);
        n.unit_max = 64 << 10;

        /* Which writes go native: power of two, naturally aligned, aligned buffers. */
        uint8_t *b = aligned_alloc(4096, 128 << 10);
        struct iovec iov[2] = {{b, 16384}, {b + 65536, 16384}};
        assert_true(core_atomic_native_fits(&n, 16384, 16384, iov, 1));
        assert_true(core_atomic_native_fits(&n, 0, 65536, &(struct iovec){b, 65536}, 1));
        assert_false(core_atomic_native_fits(&n, 0, 12288, iov, 1));    /* 3 blocks */
        assert_false(core_atomic_native_fits(&n, 8192, 16384, iov, 1)); /* not aligned */
        assert_false(core_atomic_native_fits(&n, 0, 128 << 10, &(struct iovec){b, 128 << 10},
                                             1)); /* beyond the unit */
        iov[0].iov_len = 8192;
        iov[1].iov_len = 8192;
        assert_false(core_atomic_native_fits(&n, 0, 16384, iov, 2)); /* segments_max 1 */
        n.segments_max = 2;
        assert_true(core_atomic_native_fits(&n, 0, 16384, iov, 2));
        iov[0].iov_base = b + 1; /* O_DIRECT would refuse the buffer */
        assert_false(core_atomic_native_fits(&n, 0, 16384, iov, 2));
        n.supported = false;
        assert_false(core_atomic_native_fits(&n, 16384, 16384, &(struct iovec){b, 16384}, 1));
        free(b);

        /* The real probe on a file here; a file namespace takes the path it implies. */
        char path[300];
        snprintf(path, sizeof(path), "%s/native.img", state_dir);
        int fd = open(path, O_RDWR | O_CREAT, 0644);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 4 << 20), 0);
        close(fd);
        struct core_atomic_native probe;
        bool got = core_atomic_native_probe(path, &probe);
        uint32_t want_cap;
        enum core_atomic_path want = core_atomic_choose_file(&probe, 4096, &want_cap);
        print_message("statx here: %s, unit %u-%u, segments %u -> %s\n",
                      got ? "atomic" : "no atomic", probe.unit_min, probe.unit_max,
                      probe.segments_max, core_atomic_path_name(want));
        struct core_ns *ns = mk("nat0", "file", path, false, 0);
        struct core_atomic_limits l;
        core_ns_atomic_limits(ns, &l);
        assert_int_equal(l.path, want);
        (void)ns;
        assert_int_equal(core_ns_delete("nat0"), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_limits),
            cmocka_unit_test(test_object_limits),
            cmocka_unit_test(test_set_persist_event),
            cmocka_unit_test(test_record_on_disk),
            cmocka_unit_test(test_recovery),
            cmocka_unit_test(test_checkpoint_fua),
            cmocka_unit_test(test_checkpoint_flush),
            cmocka_unit_test(test_no_checkpoint_volatile),
            cmocka_unit_test(test_scattered),
            cmocka_unit_test(test_ordering_mem),
            cmocka_unit_test(test_ordering_file),
            cmocka_unit_test(test_native_choose),
            cmocka_unit_test(test_caw_journal),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
