/*
 * The core's sanitize engine (src/core/sanitize.c) on a real reactor and
 * file backend: overwrite passes with INVERT, block erase with and without
 * deallocation, parameter checks, one operation at a time, pacing, the
 * state and last result surviving a reopen, and an operation interrupted
 * by a crash resuming from the start when the namespace is reopened.
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
#include <unistd.h>

#include "core_fixture.h"
#include "core/ns.h"
#include "core/req.h"
#include "rt/reactor.h"

#define MIB (1u << 20)

static char state_dir[256];

static int setup(void **st)
{
        (void)st;
        return core_fixture_up(state_dir, sizeof(state_dir), "san", 1);
}

static int teardown(void **st)
{
        (void)st;
        return core_fixture_down(state_dir);
}

static struct core_ns *mk(const char *name, uint64_t size, uint32_t rate)
{
        struct core_ns_params p = {.name = name,
                                   .backend = "file",
                                   .size_bytes = size,
                                   .block_size = 512,
                                   .sanitize_rate_mibps = rate};
        struct core_ns *ns = NULL;
        char err[256];
        int rc = core_ns_create(&p, &ns, err, sizeof(err));
        if (rc)
                fprintf(stderr, "create %s: %s\n", name, err);
        assert_int_equal(rc, 0);
        return ns;
}

/* ---- one synchronous request or sanitize on reactor 0 ---- */

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool finished, result;

static void req_cb(struct core_req *req)
{
        (void)req;
        pthread_mutex_lock(&m);
        finished = true;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&m);
}

static void submit_fn(void *arg)
{
        core_req_submit(arg);
}

static void wait_finished(void)
{
        pthread_mutex_lock(&m);
        while (!finished)
                pthread_cond_wait(&cv, &m);
        pthread_mutex_unlock(&m);
}

static enum core_status rw(struct core_ns *ns, enum core_op op, uint64_t lba, void *buf,
                           uint32_t nlb)
{
        static struct core_req req;
        core_req_init(&req, ns, op, lba, nlb, 0, rt_get(0), req_cb, NULL);
        req.iov[0].iov_base = buf;
        req.iov[0].iov_len = (size_t)nlb * ns->block_size;
        req.iovcnt = 1;
        finished = false;
        rt_msg_send(rt_get(0), submit_fn, &req);
        wait_finished();
        return req.status;
}

static struct {
        struct core_ns *ns;
        const struct core_sanitize_params *p;
        int rc;
} call;

static void san_done(void *arg, bool ok)
{
        if (arg != call.ns)
                return; /* an earlier test's operation ending late */
        pthread_mutex_lock(&m);
        result = ok;
        finished = true;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&m);
}

static void start_fn(void *arg)
{
        (void)arg;
        call.rc = core_sanitize_start(call.ns, call.p, NULL, rt_get(0), san_done, call.ns);
}

static int start(struct core_ns *ns, const struct core_sanitize_params *p)
{
        call.ns = ns;
        call.p = p;
        finished = false;
        rt_msg_call(rt_get(0), start_fn, NULL);
        return call.rc;
}

static void wait_state(struct core_ns *ns)
{
        for (int i = 0; i < 2000 && core_ns_sanitize_state(ns) == CORE_SAN_RUNNING; i++)
                usleep(5000);
        assert_int_not_equal(core_ns_sanitize_state(ns), CORE_SAN_RUNNING);
        /* State changes are made, and saved, under ns->lock: this waits for the save. */
        pthread_mutex_lock(&ns->lock);
        pthread_mutex_unlock(&ns->lock);
}

static bool meta_says(const char *name, const char *what)
{
        char path[512], text[8192];
        snprintf(path, sizeof(path), "%s/%s.meta.json", state_dir, name);
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = 0;
        return strstr(text, what) != NULL;
}

static void copy_file(const char *from, const char *to)
{
        char cmd[1200];
        snprintf(cmd, sizeof(cmd), "cp --sparse=always %s/%s %s/%s", state_dir, from, state_dir,
                 to);
        assert_int_equal(system(cmd), 0);
}

/* ---- tests ---- */

static void test_overwrite(void **st)
{
        (void)st;
        struct core_ns *ns = mk("ow", 8 * MIB, 0);
        uint8_t b[1024];
        const uint8_t pat[3] = {0x12, 0x34, 0x56};
        struct core_sanitize_params p = {.action = CORE_SANACT_OVERWRITE,
                                         .passes = 3,
                                         .invert = true,
                                         .pattern = pat,
                                         .pattern_len = 3};
        memset(b, 0xee, sizeof(b));
        assert_int_equal(rw(ns, CORE_OP_WRITE, 100, b, 2), CORE_OK);
        assert_int_equal(start(ns, &p), 0);
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_RUNNING);
        wait_finished();
        assert_true(result);
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_DONE);
        /* Pass 3 of 3 with INVERT: the pattern again (inverted twice), from each block's start. */
        assert_int_equal(rw(ns, CORE_OP_READ, 100, b, 2), CORE_OK);
        for (unsigned i = 0; i < 1024; i++)
                assert_int_equal(b[i], pat[(i % 512) % 3]);
        struct core_sanitize_info in;
        core_sanitize_info(ns, &in);
        assert_int_equal(in.passes_done, 3);
        assert_int_equal(in.p.action, CORE_SANACT_OVERWRITE);
        assert_true(in.untouched);
        assert_int_not_equal(core_sanitize_estimate_s(ns, CORE_SANACT_OVERWRITE, 1), UINT32_MAX);
        assert_int_equal(rw(ns, CORE_OP_WRITE, 1, b, 1), CORE_OK);
        core_sanitize_info(ns, &in);
        assert_false(in.untouched);
        /* Two passes with INVERT end on the inverted pattern. */
        p.passes = 2;
        assert_int_equal(start(ns, &p), 0);
        wait_finished();
        assert_int_equal(rw(ns, CORE_OP_READ, 0, b, 1), CORE_OK);
        assert_int_equal(b[0], (uint8_t)~0x12);
        assert_int_equal(b[511], (uint8_t)~pat[511 % 3]);
}

static void test_block_erase(void **st)
{
        (void)st;
        struct core_ns *ns = mk("be", 4 * MIB, 0);
        uint8_t b[512];
        struct stat sb;
        char path[512];
        struct core_sanitize_params p = {.action = CORE_SANACT_BLOCK_ERASE};
        memset(b, 0xab, sizeof(b));
        for (uint64_t lba = 0; lba < 8192; lba += 64)
                assert_int_equal(rw(ns, CORE_OP_WRITE, lba, b, 1), CORE_OK);
        assert_int_equal(start(ns, &p), 0);
        wait_finished();
        assert_true(result);
        assert_int_equal(rw(ns, CORE_OP_READ, 64, b, 1), CORE_OK);
        assert_int_equal(b[0], 0);
        assert_int_equal(b[511], 0);
        /* Deallocated: the sparse file gave its blocks back. */
        snprintf(path, sizeof(path), "%s/be.img", state_dir);
        assert_int_equal(stat(path, &sb), 0);
        assert_true(sb.st_blocks * 512 < 64 * 1024);
        /* Without deallocation: zeroes written, blocks allocated. */
        p.no_dealloc = true;
        assert_int_equal(start(ns, &p), 0);
        wait_finished();
        assert_true(result);
        assert_int_equal(stat(path, &sb), 0);
        assert_true(sb.st_blocks * 512 >= 4 * MIB);
        assert_int_equal(rw(ns, CORE_OP_READ, 100, b, 1), CORE_OK);
        assert_int_equal(b[7], 0);
}

static void test_params(void **st)
{
        (void)st;
        struct core_ns *ns = mk("pa", 1 * MIB, 0);
        uint8_t pat[600] = {1};
        struct core_sanitize_params p = {.action = CORE_SANACT_CRYPTO_ERASE};
        assert_int_equal(start(ns, &p), -EINVAL); /* nothing encrypted */
        p = (struct core_sanitize_params){.action = CORE_SANACT_NONE};
        assert_int_equal(start(ns, &p), -EINVAL);
        p = (struct core_sanitize_params){
            .action = CORE_SANACT_OVERWRITE, .passes = 0, .pattern = pat, .pattern_len = 1};
        assert_int_equal(start(ns, &p), -EINVAL);
        p.passes = CORE_SANITIZE_MAX_PASSES + 1;
        assert_int_equal(start(ns, &p), -EINVAL);
        p.passes = 1;
        p.pattern_len = 513; /* longer than a block */
        assert_int_equal(start(ns, &p), -EINVAL);
        p.pattern_len = 0;
        assert_int_equal(start(ns, &p), -EINVAL);
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_NEVER);
        assert_int_equal(core_sanitize_estimate_s(ns, CORE_SANACT_OVERWRITE, 1), UINT32_MAX);
}

/* Paced, one at a time, and its state in the metadata; then a reopen keeps the result. */
static void test_paced_busy_and_result_persists(void **st)
{
        (void)st;
        struct core_ns *ns = mk("pc", 2 * MIB, 4); /* 2 MiB at 4 MiB/s: half a second */
        const uint8_t pat = 0x5a;
        struct core_sanitize_params p = {
            .action = CORE_SANACT_OVERWRITE, .passes = 1, .pattern = &pat, .pattern_len = 1};
        assert_int_equal(core_sanitize_estimate_s(ns, CORE_SANACT_OVERWRITE, 1), 1);
        uint64_t t0 = rt_now_ns();
        assert_int_equal(start(ns, &p), 0);
        assert_true(meta_says("pc", "\"running\""));
        struct core_sanitize_params q = {.action = CORE_SANACT_BLOCK_ERASE};
        call.ns = ns;
        call.p = &q;
        rt_msg_call(rt_get(0), start_fn, NULL);
        assert_int_equal(call.rc, -EBUSY);
        usleep(150000);
        uint16_t prog = atomic_load(&ns->san_progress);
        assert_true(prog > 0 && prog < 65535);
        wait_state(ns);
        assert_true(rt_now_ns() - t0 >= 400000000ull); /* paced */
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_DONE);
        assert_true(meta_says("pc", "\"done\""));
        usleep(20000); /* the engine drops its reference after the state change */
        assert_int_equal(core_ns_delete("pc"), 0);
        ns = mk("pc", 0, 0);
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_DONE);
        struct core_sanitize_info in;
        core_sanitize_info(ns, &in);
        assert_int_equal(in.p.action, CORE_SANACT_OVERWRITE);
        assert_int_equal(in.p.passes, 1);
}

/*
 * A crash in the middle: the metadata (and data) as a crash leaves them,
 * copied while the operation runs, reopen as another namespace: it comes
 * back "in progress", host I/O is refused, and the overwrite restarts from
 * the first block and completes.
 */
static void test_interrupted_resumes(void **st)
{
        (void)st;
        struct core_ns *ns = mk("cr", 4 * MIB, 8); /* 1 s */
        uint8_t b[512];
        const uint8_t pat[2] = {0xc3, 0x3c};
        struct core_sanitize_params p = {.action = CORE_SANACT_OVERWRITE,
                                         .passes = 2,
                                         .invert = true,
                                         .ause = true,
                                         .pattern = pat,
                                         .pattern_len = 2};
        memset(b, 0x99, sizeof(b));
        assert_int_equal(rw(ns, CORE_OP_WRITE, 8191, b, 1), CORE_OK);
        assert_int_equal(start(ns, &p), 0);
        usleep(100000);
        copy_file("cr.meta.json", "cr2.meta.json");
        copy_file("cr.img", "cr2.img");

        struct core_ns *ns2 = mk("cr2", 0, 0);
        assert_int_equal(core_ns_sanitize_state(ns2), CORE_SAN_RUNNING);
        assert_int_equal(rw(ns2, CORE_OP_READ, 0, b, 1), CORE_E_SANITIZE_IN_PROGRESS);
        wait_state(ns2);
        assert_int_equal(core_ns_sanitize_state(ns2), CORE_SAN_DONE);
        assert_true(meta_says("cr2", "\"done\""));
        struct core_sanitize_info in;
        core_sanitize_info(ns2, &in);
        assert_int_equal(in.passes_done, 2);
        assert_true(in.p.ause && in.p.invert);
        /* Both passes over every block, the last one inverted. */
        assert_int_equal(rw(ns2, CORE_OP_READ, 8191, b, 1), CORE_OK);
        for (unsigned i = 0; i < 512; i++)
                assert_int_equal(b[i], (uint8_t)~pat[i % 2]);
        wait_state(ns); /* the original finishes too */
}

/* Failure mode survives a restart; EXIT FAILURE MODE (allowed by AUSE) is recorded too. */
static void test_failure_persists(void **st)
{
        (void)st;
        struct core_ns *ns = mk("fl", 1 * MIB, 0);
        struct core_sanitize_params p = {.action = CORE_SANACT_BLOCK_ERASE, .ause = true};
        assert_int_equal(start(ns, &p), 0);
        wait_finished();
        /* As the engine would record a failure (a failed backend write). */
        core_ns_sanitize_end(ns, false, true, NULL);
        usleep(20000);
        assert_int_equal(core_ns_delete("fl"), 0);
        ns = mk("fl", 0, 0);
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_FAILED);
        uint8_t b[512];
        assert_int_equal(rw(ns, CORE_OP_READ, 0, b, 1), CORE_E_SANITIZE_FAILED);
        assert_int_equal(core_ns_sanitize_exit_failure(ns, NULL), 0);
        assert_int_equal(core_ns_delete("fl"), 0);
        ns = mk("fl", 0, 0);
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_DONE);
        assert_int_equal(rw(ns, CORE_OP_READ, 0, b, 1), CORE_OK);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_overwrite),
            cmocka_unit_test(test_block_erase),
            cmocka_unit_test(test_params),
            cmocka_unit_test(test_paced_busy_and_result_persists),
            cmocka_unit_test(test_interrupted_resumes),
            cmocka_unit_test(test_failure_persists),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
