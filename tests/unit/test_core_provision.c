/*
 * Provisioned-capacity limits (core/provision.c) on a real reactor and a
 * sparse file: the soft threshold event once per upward crossing and its
 * re-arming after a deallocation, writes up to the hard limit, an
 * allocating write beyond it failing with CORE_E_SPACE_ALLOC_FAILED while
 * an overwrite of mapped blocks still succeeds and nothing written before
 * changes, deallocation bringing the namespace back under, the counters,
 * the setter's checks, and the limits surviving a reopen.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core_fixture.h"
#include "core/ns.h"
#include "core/req.h"
#include "rt/reactor.h"

#define MIB (1u << 20)

struct sync_req {
        struct core_req req;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool done;
};

static void on_done(struct core_req *req)
{
        struct sync_req *s = req->cb_arg;
        pthread_mutex_lock(&s->lock);
        s->done = true;
        pthread_cond_signal(&s->cond);
        pthread_mutex_unlock(&s->lock);
}

static void submit_fn(void *arg)
{
        core_req_submit(&((struct sync_req *)arg)->req);
}

static enum core_status run_req(struct core_ns *ns, enum core_op op, uint64_t lba, uint32_t nlb,
                                void *buf, size_t len)
{
        static uint8_t scratch[4096];
        struct sync_req s;
        memset(&s, 0, sizeof(s));
        pthread_mutex_init(&s.lock, NULL);
        pthread_cond_init(&s.cond, NULL);
        s.req.ns = ns;
        s.req.op = op;
        s.req.lba = lba;
        s.req.nlb = nlb;
        s.req.iov[0].iov_base = buf;
        s.req.iov[0].iov_len = len;
        s.req.iovcnt = buf ? 1 : 0;
        s.req.scratch = scratch;
        s.req.scratch_len = sizeof(scratch);
        s.req.reactor = rt_get(0);
        s.req.cb = on_done;
        s.req.cb_arg = &s;
        rt_msg_send(rt_get(0), submit_fn, &s);
        pthread_mutex_lock(&s.lock);
        while (!s.done)
                pthread_cond_wait(&s.cond, &s.lock);
        pthread_mutex_unlock(&s.lock);
        return s.req.status;
}

static char state_dir[256];
static _Atomic int n_threshold, n_prov;
static _Atomic(struct core_ns *) watched;

static void record(const struct core_ns_event *ev, void *arg)
{
        (void)arg;
        if (ev->ns != atomic_load(&watched))
                return;
        if (ev->type == CORE_NS_EV_SPACE_THRESHOLD) {
                assert_null(ev->origin); /* every host is told */
                atomic_fetch_add(&n_threshold, 1);
        }
        if (ev->type == CORE_NS_EV_PROVISIONING)
                atomic_fetch_add(&n_prov, 1);
}

static int setup(void **st)
{
        (void)st;
        if (core_fixture_up(state_dir, sizeof(state_dir), "prov", 1))
                return -1;
        return core_ns_listen(record, NULL);
}

static int teardown(void **st)
{
        (void)st;
        return core_fixture_down(state_dir);
}

static struct core_ns *mk(const char *name, const char *backend, uint64_t limit, uint64_t thr)
{
        struct core_ns_params p = {.name = name,
                                   .backend = backend,
                                   .size_bytes = 16 * MIB,
                                   .thin = true,
                                   .provision_limit = limit,
                                   .provision_threshold = thr};
        struct core_ns *ns = NULL;
        char err[256];
        int rc = core_ns_create(&p, &ns, err, sizeof(err));
        if (rc)
                fail_msg("create %s: %s", name, err);
        return ns;
}

static uint64_t mapped(struct core_ns *ns)
{
        struct core_prov_info pi;
        core_ns_provision_info(ns, &pi);
        return pi.mapped;
}

/* 512 KiB of a pattern at MiB offset off (512-byte blocks). */
static enum core_status write_half(struct core_ns *ns, double off_mib, uint8_t seed)
{
        static uint8_t b[MIB / 2];
        for (size_t i = 0; i < sizeof(b); i++)
                b[i] = (uint8_t)(i * 13 + seed);
        return run_req(ns, CORE_OP_WRITE, (uint64_t)(off_mib * 2048), 1024, b, sizeof(b));
}

static bool half_is(struct core_ns *ns, double off_mib, uint8_t seed)
{
        static uint8_t r[MIB / 2];
        if (run_req(ns, CORE_OP_READ, (uint64_t)(off_mib * 2048), 1024, r, sizeof(r)) != CORE_OK)
                return false;
        for (size_t i = 0; i < sizeof(r); i++)
                if (r[i] != (uint8_t)(i * 13 + seed))
                        return false;
        return true;
}

static void test_threshold_and_limit(void **st)
{
        (void)st;
        struct core_ns *ns = mk("lim", "file", 2 * MIB, 1 * MIB);
        atomic_store(&watched, ns);
        atomic_store(&n_threshold, 0);
        assert_int_equal(mapped(ns), 0);

        /* Below the threshold: no event. */
        assert_int_equal(write_half(ns, 0, 1), CORE_OK);
        assert_int_equal(atomic_load(&n_threshold), 0);
        /* Crossing it upward: one event... */
        assert_int_equal(write_half(ns, 0.5, 2), CORE_OK);
        assert_int_equal(atomic_load(&n_threshold), 1);
        /* ... and only one while it stays above. */
        assert_int_equal(write_half(ns, 1, 3), CORE_OK);
        assert_int_equal(write_half(ns, 1.5, 4), CORE_OK);
        assert_int_equal(atomic_load(&n_threshold), 1);
        assert_true(mapped(ns) <= 2 * MIB);

        /* At the hard limit: a write that needs new space fails, on every allocating op. */
        uint8_t blk[4096];
        memset(blk, 0x77, sizeof(blk));
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 8 * 2048, 8, blk, sizeof(blk)),
                         CORE_E_SPACE_ALLOC_FAILED);
        assert_int_equal(run_req(ns, CORE_OP_WRITE_SAME, 9 * 2048, 64, blk, 512),
                         CORE_E_SPACE_ALLOC_FAILED);
        assert_int_equal(run_req(ns, CORE_OP_ORWRITE, 10 * 2048, 1, blk, 512),
                         CORE_E_SPACE_ALLOC_FAILED);
        /* Not even one block past the mapped ones. */
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 2 * 2048, 1, blk, 512),
                         CORE_E_SPACE_ALLOC_FAILED);
        /* An overwrite of mapped blocks allocates nothing: it succeeds, repeatedly. */
        for (int i = 0; i < 8; i++)
                assert_int_equal(write_half(ns, 1.5, 5), CORE_OK);
        /* A write straddling mapped and unmapped blocks needs space: refused as a whole. */
        static uint8_t two[MIB / 2];
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 2 * 2048 - 512, 1024, two, sizeof(two)),
                         CORE_E_SPACE_ALLOC_FAILED);
        /* Zeroes deallocate (a hole): always allowed. */
        memset(blk, 0, sizeof(blk));
        assert_int_equal(run_req(ns, CORE_OP_WRITE_SAME, 11 * 2048, 64, blk, 512), CORE_OK);
        /* Nothing written before was lost or changed. */
        assert_true(half_is(ns, 0, 1));
        assert_true(half_is(ns, 0.5, 2));
        assert_true(half_is(ns, 1, 3));
        assert_true(half_is(ns, 1.5, 5));

        struct core_prov_info pi;
        core_ns_provision_info(ns, &pi);
        assert_true(pi.tracked);
        assert_true(pi.reached);
        assert_int_equal(pi.limit, 2 * MIB);
        assert_int_equal(pi.threshold, 1 * MIB);
        assert_int_equal(pi.capacity, 16 * MIB);
        assert_int_equal(pi.deallocated, pi.capacity - pi.mapped);
        assert_int_equal(pi.available, pi.mapped >= pi.limit ? 0 : pi.limit - pi.mapped);

        /* Deallocating brings it back under the limit and below the threshold: re-armed. */
        assert_int_equal(run_req(ns, CORE_OP_DEALLOCATE, 1024, 3072, NULL, 0), CORE_OK);
        core_ns_provision_info(ns, &pi);
        assert_true(pi.mapped <= MIB / 2 + 4096);
        assert_false(pi.reached);
        assert_true(pi.available >= MIB + MIB / 2 - 4096);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 8 * 2048, 8, blk, sizeof(blk)), CORE_OK);
        assert_true(half_is(ns, 0, 1));
        /* Crossing again is a second event. */
        assert_int_equal(write_half(ns, 3, 6), CORE_OK);
        assert_int_equal(write_half(ns, 3.5, 7), CORE_OK);
        assert_int_equal(atomic_load(&n_threshold), 2);
        atomic_store(&watched, NULL);
}

static void test_setter(void **st)
{
        (void)st;
        char err[256];
        struct core_ns *ns = mk("set", "file", 0, 0);
        atomic_store(&watched, ns);
        atomic_store(&n_prov, 0);
        atomic_store(&n_threshold, 0);
        assert_int_equal(core_ns_set_provision(ns, 4 * MIB, 8 * MIB, NULL, err, sizeof(err)),
                         -EINVAL); /* threshold above the limit */
        assert_int_equal(core_ns_set_provision(ns, 4 * MIB, MIB + 512, NULL, err, sizeof(err)),
                         -EINVAL); /* not whole threshold sets */
        assert_int_equal(core_ns_set_provision(ns, 4 * MIB + 100, 0, NULL, err, sizeof(err)),
                         -EINVAL); /* not whole blocks */
        assert_int_equal(atomic_load(&n_prov), 0);
        assert_int_equal(core_ns_set_provision(ns, 4 * MIB, 2 * MIB, NULL, err, sizeof(err)), 0);
        assert_int_equal(atomic_load(&n_prov), 1);
        assert_int_equal(core_ns_set_provision(ns, 4 * MIB, 2 * MIB, NULL, err, sizeof(err)), 0);
        assert_int_equal(atomic_load(&n_prov), 1); /* no change, no event */

        /* A threshold set below what is in use is reached at once (one event). */
        assert_int_equal(write_half(ns, 0, 1), CORE_OK);
        assert_int_equal(write_half(ns, 0.5, 2), CORE_OK);
        assert_int_equal(atomic_load(&n_threshold), 0);
        assert_int_equal(core_ns_set_provision(ns, 4 * MIB, MIB, NULL, err, sizeof(err)), 0);
        assert_int_equal(atomic_load(&n_threshold), 1);
        /* Removing both: no limit, no threshold, writes anywhere. */
        assert_int_equal(core_ns_set_provision(ns, 0, 0, NULL, err, sizeof(err)), 0);
        assert_int_equal(write_half(ns, 10, 3), CORE_OK);
        assert_int_equal(write_half(ns, 12, 3), CORE_OK);
        assert_int_equal(write_half(ns, 14, 3), CORE_OK);
        assert_int_equal(write_half(ns, 15, 3), CORE_OK);
        atomic_store(&watched, NULL);

        /* A backend that cannot tell its allocation cannot have a limit. */
        struct core_ns *m = mk("setm", "null", 0, 0);
        assert_int_equal(core_ns_set_provision(m, 4 * MIB, 0, NULL, err, sizeof(err)), -EOPNOTSUPP);
        struct core_ns_params p = {.name = "setm2",
                                   .backend = "null",
                                   .size_bytes = 16 * MIB,
                                   .thin = true,
                                   .provision_limit = 4 * MIB};
        struct core_ns *m2 = NULL;
        assert_int_equal(core_ns_create(&p, &m2, err, sizeof(err)), -EOPNOTSUPP);
}

static void test_persists(void **st)
{
        (void)st;
        char err[256];
        struct core_ns *ns = mk("keep", "file", 3 * MIB, 2 * MIB);
        assert_int_equal(write_half(ns, 0, 9), CORE_OK);
        assert_int_equal(core_ns_delete("keep"), 0);
        /* Reopened without limits given: the saved ones. */
        ns = mk("keep", "file", 0, 0);
        assert_int_equal(atomic_load(&ns->prov.limit), 3 * MIB);
        assert_int_equal(atomic_load(&ns->prov.threshold), 2 * MIB);
        assert_true(half_is(ns, 0, 9));
        /* Given ones replace them; the one not given is kept. */
        assert_int_equal(core_ns_delete("keep"), 0);
        ns = mk("keep", "file", 5 * MIB, 0);
        assert_int_equal(atomic_load(&ns->prov.limit), 5 * MIB);
        assert_int_equal(atomic_load(&ns->prov.threshold), 2 * MIB);
        /* Removed ones stay removed. */
        assert_int_equal(core_ns_set_provision(ns, 0, 0, NULL, err, sizeof(err)), 0);
        assert_int_equal(core_ns_delete("keep"), 0);
        ns = mk("keep", "file", 0, 0);
        assert_int_equal(atomic_load(&ns->prov.limit), 0);
        assert_int_equal(atomic_load(&ns->prov.threshold), 0);
}

static struct core_ns *mk_in(const char *dir, const char *name)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s.img", dir, name);
        struct core_ns_params p = {
            .name = name, .backend = "file", .path = path, .size_bytes = 16 * MIB, .thin = true};
        struct core_ns *ns = NULL;
        char err[256];
        if (core_ns_create(&p, &ns, err, sizeof(err)))
                fail_msg("create %s: %s", name, err);
        return ns;
}

static void count_pool(const struct core_pool_info *pi, void *arg)
{
        struct core_pool_info *out = arg;
        if (strstr(pi->dir, "/pooldir"))
                *out = *pi;
}

/* A pool: one limit shared by the thin file namespaces of one directory. */
static void test_pool(void **st)
{
        (void)st;
        char dir[300], err[256];
        snprintf(dir, sizeof(dir), "%s/pooldir", state_dir);
        assert_int_equal(mkdir(dir, 0755), 0);
        struct core_ns *a = mk_in(dir, "pa"), *b = mk_in(dir, "pb");
        assert_int_equal(core_pool_set("/nonexistent/dir", MIB, err, sizeof(err)), -ENOENT);
        assert_int_equal(core_pool_set(dir, 2 * MIB, err, sizeof(err)), 0);
        /* 1 MiB each: the pool is full, though neither namespace has a limit of its own. */
        assert_int_equal(write_half(a, 0, 1), CORE_OK);
        assert_int_equal(write_half(a, 0.5, 2), CORE_OK);
        assert_int_equal(write_half(b, 0, 3), CORE_OK);
        assert_int_equal(write_half(b, 0.5, 4), CORE_OK);
        uint8_t blk[4096];
        memset(blk, 0x11, sizeof(blk));
        assert_int_equal(run_req(b, CORE_OP_WRITE, 8 * 2048, 8, blk, sizeof(blk)),
                         CORE_E_SPACE_ALLOC_FAILED);
        assert_int_equal(run_req(a, CORE_OP_WRITE, 8 * 2048, 8, blk, sizeof(blk)),
                         CORE_E_SPACE_ALLOC_FAILED);
        assert_int_equal(write_half(a, 0.5, 5), CORE_OK); /* an overwrite needs nothing */
        struct core_prov_info pi;
        core_ns_provision_info(a, &pi);
        assert_true(pi.pooled);
        assert_true(pi.available < 4096);
        struct core_pool_info pool = {0};
        core_pool_foreach(count_pool, &pool);
        assert_int_equal(pool.members, 2);
        assert_int_equal(pool.limit, 2 * MIB);
        assert_true(pool.mapped >= 2 * MIB);
        /* Freeing space in one namespace makes room for the other. */
        assert_int_equal(run_req(b, CORE_OP_DEALLOCATE, 0, 2048, NULL, 0), CORE_OK);
        assert_int_equal(run_req(a, CORE_OP_WRITE, 8 * 2048, 8, blk, sizeof(blk)), CORE_OK);
        assert_true(half_is(a, 0, 1));
        assert_true(half_is(a, 0.5, 5));
        /* A namespace created later in the directory joins; one freed leaves. */
        struct core_ns *c = mk_in(dir, "pc");
        core_pool_foreach(count_pool, &pool);
        assert_int_equal(pool.members, 3);
        assert_int_equal(core_ns_delete("pc"), 0);
        (void)c;
        core_pool_foreach(count_pool, &pool);
        assert_int_equal(pool.members, 2);
        /* Limit 0 switches the pool off. */
        assert_int_equal(core_pool_set(dir, 0, err, sizeof(err)), 0);
        assert_int_equal(write_half(b, 4, 6), CORE_OK);
        assert_int_equal(write_half(b, 5, 6), CORE_OK);
        core_ns_provision_info(a, &pi);
        assert_false(pi.pooled);
}

/* The file backend, counting how often the core asks for its allocation. */
static struct backend_ops counting_ops;
static _Atomic int n_allocated;

static int64_t counting_allocated(struct backend *be)
{
        atomic_fetch_add(&n_allocated, 1);
        return backend_file_ops.allocated(be);
}

static void test_no_stat_per_write(void **st)
{
        (void)st;
        struct core_ns *ns = mk("fast", "file", 4 * MIB, 3 * MIB);
        counting_ops = backend_file_ops;
        counting_ops.allocated = counting_allocated;
        ns->be.ops = &counting_ops;
        atomic_store(&n_allocated, 0);
        /* 256 writes of 4 KiB (1 MiB), far from the limit and the threshold: no stat at all. */
        uint8_t blk[4096];
        memset(blk, 0x42, sizeof(blk));
        for (int i = 0; i < 256; i++)
                assert_int_equal(run_req(ns, CORE_OP_WRITE, (uint64_t)i * 8, 8, blk, sizeof(blk)),
                                 CORE_OK);
        assert_int_equal(atomic_load(&n_allocated), 0);
        /* Overwrites inflate the estimate; it is brought back to the truth only when it would
         * cross the threshold or the limit, not on every write. */
        for (int j = 0; j < 16; j++)
                for (int i = 0; i < 256; i++)
                        assert_int_equal(
                            run_req(ns, CORE_OP_WRITE, (uint64_t)i * 8, 8, blk, sizeof(blk)),
                            CORE_OK);
        int n = atomic_load(&n_allocated);
        print_message("allocated() asked %d times for %d writes\n", n, 256 + 16 * 256);
        assert_true(n > 0);
        assert_true(n < 16 * 256 / 64);
        assert_true(mapped(ns) <= MIB + 4096);
        ns->be.ops = &backend_file_ops;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_threshold_and_limit),
            cmocka_unit_test(test_setter),
            cmocka_unit_test(test_persists),
            cmocka_unit_test(test_no_stat_per_write),
            cmocka_unit_test(test_pool),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
