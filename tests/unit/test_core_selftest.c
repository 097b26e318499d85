/*
 * The core's self-test engine (src/core/selftest.c) on a real reactor: the
 * extended test reads every block and the short one a sample (counted at
 * the backend), neither is counted as host I/O; a block the backend cannot
 * read ends the test with that LBA and notes the exception; one test per
 * namespace, abort, the 20-entry log newest first.  And the health
 * counters next to it: misaligned I/O (statistics and the LPS list) and
 * start-stop cycles surviving a reopen.
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
#include <unistd.h>

#include "core_fixture.h"
#include "backend/backend.h"
#include "core/media.h"
#include "core/ns.h"
#include "core/req.h"
#include "core/selftest.h"
#include "rt/reactor.h"

#define MIB (1u << 20)

static char state_dir[256];

static int setup(void **st)
{
        (void)st;
        return core_fixture_up(state_dir, sizeof(state_dir), "st", 1);
}

static int teardown(void **st)
{
        (void)st;
        return core_fixture_down(state_dir);
}

static struct core_ns *mk(const char *name, const char *backend, uint64_t size, uint32_t rate)
{
        struct core_ns_params p = {.name = name,
                                   .backend = backend,
                                   .size_bytes = size,
                                   .block_size = 512,
                                   .selftest_rate_mibps = rate};
        struct core_ns *ns = NULL;
        char err[256];
        int rc = core_ns_create(&p, &ns, err, sizeof(err));
        if (rc)
                fprintf(stderr, "create %s: %s\n", name, err);
        assert_int_equal(rc, 0);
        return ns;
}

/* Delete once the engine has dropped its reference (it does so right after its callback). */
static void del(const char *name)
{
        int rc;
        while ((rc = core_ns_delete(name)) == -EBUSY)
                usleep(1000);
        assert_int_equal(rc, 0);
}

/* ---- a backend that counts reads and fails the ones covering one byte ---- */

static struct backend_ops stub;
static const struct backend_ops *real;
static _Atomic uint64_t read_bytes;
static uint64_t bad_off = UINT64_MAX; /* byte offset that cannot be read */
static struct core_req *bad_req;
static struct rt_defer bad_defer;

static void bad_done(struct rt_defer *d)
{
        (void)d;
        core_backend_done(bad_req, -EIO);
}

static void stub_submit(struct backend *be, struct core_req *req, enum core_op op, uint64_t off,
                        uint64_t len, const struct iovec *iov, int iovcnt, bool fua)
{
        if (op == CORE_OP_READ) {
                read_bytes += len;
                if (bad_off >= off && bad_off < off + len) {
                        bad_req = req;
                        bad_defer.fn = bad_done;
                        bad_defer.next = NULL;
                        rt_defer(req->reactor, &bad_defer);
                        return;
                }
        }
        real->submit(be, req, op, off, len, iov, iovcnt, fua);
}

static void use_stub(struct core_ns *ns)
{
        real = ns->be.ops;
        stub = *real;
        stub.submit = stub_submit;
        ns->be.ops = &stub;
}

static void drop_stub(struct core_ns *ns)
{
        ns->be.ops = real;
}

/* ---- running a self-test and waiting for it ---- */

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool finished;
static struct core_selftest_outcome outcome;
static struct {
        struct core_ns *ns;
        enum core_selftest_kind kind;
        int rc;
} call;

static void st_done(void *arg, const struct core_selftest_outcome *o)
{
        (void)arg;
        pthread_mutex_lock(&m);
        outcome = *o;
        finished = true;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&m);
}

static void start_fn(void *arg)
{
        (void)arg;
        call.rc = core_selftest_start(call.ns, call.kind, true, true, rt_get(0), st_done, NULL);
        pthread_mutex_lock(&m);
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&m);
}

static int start(struct core_ns *ns, enum core_selftest_kind kind)
{
        pthread_mutex_lock(&m);
        finished = false;
        call.ns = ns;
        call.kind = kind;
        call.rc = 1;
        pthread_mutex_unlock(&m);
        rt_msg_send(rt_get(0), start_fn, NULL);
        pthread_mutex_lock(&m);
        while (call.rc == 1)
                pthread_cond_wait(&cv, &m);
        pthread_mutex_unlock(&m);
        return call.rc;
}

static void wait_end(void)
{
        pthread_mutex_lock(&m);
        while (!finished)
                pthread_cond_wait(&cv, &m);
        pthread_mutex_unlock(&m);
}

static struct core_selftest_outcome run(struct core_ns *ns, enum core_selftest_kind kind)
{
        assert_int_equal(start(ns, kind), 0);
        wait_end();
        return outcome;
}

/* ---- tests ---- */

static void test_extended_reads_everything(void **st)
{
        (void)st;
        struct core_ns *ns = mk("ext", "mem", 8 * MIB, 0);
        use_stub(ns);
        read_bytes = 0;
        struct core_selftest_outcome o = run(ns, CORE_ST_EXTENDED);
        assert_int_equal(o.result, CORE_STR_OK);
        assert_int_equal(read_bytes, 8 * MIB);
        /* The engine's reads are not host I/O. */
        assert_int_equal(core_stats_ops(&ns->stats, CORE_OPC_READ), 0);
        struct core_selftest_entry e[CORE_SELFTEST_LOG_MAX];
        assert_int_equal(core_selftest_results(ns, e), 1);
        assert_int_equal(e[0].kind, CORE_ST_EXTENDED);
        assert_true(e[0].background);
        assert_int_equal(e[0].o.result, CORE_STR_OK);
        assert_int_equal(core_ns_last_exception(ns), CORE_EXC_NONE);
        assert_false(core_selftest_running(ns, NULL, NULL, NULL));
        drop_stub(ns);
        del("ext");
}

static void test_short_reads_a_sample(void **st)
{
        (void)st;
        struct core_ns *ns = mk("short", "mem", 128 * MIB, 0);
        use_stub(ns);
        read_bytes = 0;
        struct core_selftest_outcome o = run(ns, CORE_ST_SHORT);
        assert_int_equal(o.result, CORE_STR_OK);
        assert_int_equal(read_bytes,
                         (uint64_t)CORE_SELFTEST_SHORT_PIECES * CORE_SELFTEST_PIECE_BYTES);
        /* The last piece ends at the last block: a failure there is found by a short test. */
        bad_off = 128 * MIB - 512;
        o = run(ns, CORE_ST_SHORT);
        assert_int_equal(o.result, CORE_STR_FAILED);
        assert_int_equal(o.fail_lba, 128 * MIB / 512 - 1);
        bad_off = UINT64_MAX;
        drop_stub(ns);
        del("short");
}

static void test_failure_reports_first_bad_lba(void **st)
{
        (void)st;
        struct core_ns *ns = mk("bad", "mem", 8 * MIB, 0);
        use_stub(ns);
        bad_off = 5000ull * 512 + 100; /* inside block 5000 */
        struct core_selftest_outcome o = run(ns, CORE_ST_EXTENDED);
        assert_int_equal(o.result, CORE_STR_FAILED);
        assert_int_equal(o.fail_lba, 5000);
        assert_int_equal(o.status, CORE_E_MEDIUM_ERROR);
        assert_int_equal(o.segment, 1);
        assert_int_equal(core_ns_last_exception(ns), CORE_EXC_SELFTEST_FAILED);
        struct core_selftest_entry e[CORE_SELFTEST_LOG_MAX];
        assert_int_equal(core_selftest_results(ns, e), 1);
        assert_int_equal(e[0].o.result, CORE_STR_FAILED);
        assert_int_equal(e[0].o.fail_lba, 5000);
        /* Block 0 too: the first block of the first piece. */
        bad_off = 0;
        o = run(ns, CORE_ST_EXTENDED);
        assert_int_equal(o.result, CORE_STR_FAILED);
        assert_int_equal(o.fail_lba, 0);
        bad_off = UINT64_MAX;
        drop_stub(ns);
        del("bad");
}

/* A failed element of the media model (core/media.h): the test stops at its first LBA. */
static void test_failed_element(void **st)
{
        (void)st;
        char err[256];
        struct core_ns *ns = mk("elem", "mem", 16 * MIB, 0);
        assert_int_equal(core_media_configure(ns, 4, 2048, err, sizeof(err)), 0);
        assert_int_equal(run(ns, CORE_ST_EXTENDED).result, CORE_STR_OK);
        assert_int_equal(
            core_media_set_element(ns, 2, CORE_ELEM_FAILED, -1, NULL, err, sizeof(err)), 0);
        /* Element 2 holds stripe unit 1: LBAs 2048..4095 first. */
        struct core_selftest_outcome o = run(ns, CORE_ST_EXTENDED);
        assert_int_equal(o.result, CORE_STR_FAILED);
        assert_int_equal(o.fail_lba, 2048);
        assert_int_equal(o.status, CORE_E_UNRECOVERED_READ);
        o = run(ns, CORE_ST_SHORT);
        assert_int_equal(o.result, CORE_STR_FAILED);
        assert_int_equal(core_media_lba_element(ns, o.fail_lba), 2);
        assert_int_equal(core_media_set_element(ns, 2, CORE_ELEM_OK, -1, NULL, err, sizeof(err)),
                         0);
        assert_int_equal(run(ns, CORE_ST_EXTENDED).result, CORE_STR_OK);
        del("elem");
}

static void test_busy_and_abort(void **st)
{
        (void)st;
        /* 1 MiB/s over 16 MiB: running for seconds after its first piece. */
        struct core_ns *ns = mk("slow", "mem", 16 * MIB, 1);
        assert_int_equal(core_selftest_abort(ns, CORE_STR_ABORTED_CMD), -ENOENT);
        assert_int_equal(start(ns, CORE_ST_EXTENDED), 0);
        enum core_selftest_kind kind = 0;
        bool bg = false;
        assert_true(core_selftest_running(ns, &kind, &bg, NULL));
        assert_int_equal(kind, CORE_ST_EXTENDED);
        assert_true(bg);
        /* One at a time per namespace. */
        assert_int_equal(core_selftest_start(ns, CORE_ST_SHORT, true, true, rt_get(0), NULL, NULL),
                         -EBUSY);
        assert_int_equal(core_selftest_abort(ns, CORE_STR_ABORTED_CMD), 0);
        wait_end();
        assert_int_equal(outcome.result, CORE_STR_ABORTED_CMD);
        struct core_selftest_entry e[CORE_SELFTEST_LOG_MAX];
        assert_int_equal(core_selftest_results(ns, e), 1);
        assert_int_equal(e[0].o.result, CORE_STR_ABORTED_CMD);
        assert_false(core_selftest_running(ns, NULL, NULL, NULL));
        assert_int_equal(core_selftest_start(ns, 7, true, true, rt_get(0), NULL, NULL), -EINVAL);
        del("slow");
}

static void test_log_keeps_twenty_newest_first(void **st)
{
        (void)st;
        struct core_ns *ns = mk("many", "mem", 1 * MIB, 0);
        for (int i = 0; i < 22; i++)
                assert_int_equal(run(ns, i % 2 ? CORE_ST_SHORT : CORE_ST_EXTENDED).result,
                                 CORE_STR_OK);
        struct core_selftest_entry e[CORE_SELFTEST_LOG_MAX];
        assert_int_equal(core_selftest_results(ns, e), CORE_SELFTEST_LOG_MAX);
        assert_int_equal(e[0].kind, CORE_ST_SHORT); /* the 22nd (i = 21) */
        assert_int_equal(e[1].kind, CORE_ST_EXTENDED);
        for (int i = 1; i < CORE_SELFTEST_LOG_MAX; i++)
                assert_true(e[i - 1].seq == e[i].seq + 1);
        assert_int_equal(e[0].seq, 22);
        del("many");
}

/* ---- misaligned I/O and start-stop cycles ---- */

static pthread_mutex_t rm = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rcv = PTHREAD_COND_INITIALIZER;
static bool rdone;

static void req_cb(struct core_req *req)
{
        (void)req;
        pthread_mutex_lock(&rm);
        rdone = true;
        pthread_cond_signal(&rcv);
        pthread_mutex_unlock(&rm);
}

static void submit_fn(void *arg)
{
        core_req_submit(arg);
}

static enum core_status rw(struct core_ns *ns, enum core_op op, uint64_t lba, uint32_t nlb)
{
        static struct core_req req;
        static uint8_t buf[64 * 512];
        core_req_init(&req, ns, op, lba, nlb, 0, rt_get(0), req_cb, NULL);
        req.iov[0].iov_base = buf;
        req.iov[0].iov_len = (size_t)nlb * ns->block_size;
        req.iovcnt = 1;
        rdone = false;
        rt_msg_send(rt_get(0), submit_fn, &req);
        pthread_mutex_lock(&rm);
        while (!rdone)
                pthread_cond_wait(&rcv, &rm);
        pthread_mutex_unlock(&rm);
        return req.status;
}

static void test_misaligned_counted(void **st)
{
        (void)st;
        struct core_ns *ns = mk("mis", "mem", 4 * MIB, 0); /* 512 logical, 4 KiB physical */
        assert_int_equal(ns->phys_exp, 3);
        assert_int_equal(rw(ns, CORE_OP_WRITE, 1, 1), CORE_OK);  /* odd LBA */
        assert_int_equal(rw(ns, CORE_OP_WRITE, 8, 8), CORE_OK);  /* aligned */
        assert_int_equal(rw(ns, CORE_OP_WRITE, 16, 3), CORE_OK); /* odd length */
        assert_int_equal(rw(ns, CORE_OP_READ, 3, 8), CORE_OK);   /* a read, misaligned */
        assert_int_equal(rw(ns, CORE_OP_READ, 64, 16), CORE_OK); /* a read, aligned */
        assert_int_equal(core_stats_misaligned_count(&ns->stats, CORE_OPC_WRITE), 2);
        assert_int_equal(core_stats_misaligned_count(&ns->stats, CORE_OPC_READ), 1);
        uint64_t lba[CORE_LPSM_MAX];
        assert_int_equal(core_ns_lpsm(ns, lba), 2); /* writes only */
        assert_int_equal(lba[0], 1);
        assert_int_equal(lba[1], 16);
        /* Only the first CORE_LPSM_MAX are remembered; all are counted. */
        for (unsigned i = 0; i < CORE_LPSM_MAX; i++)
                assert_int_equal(rw(ns, CORE_OP_WRITE, 101 + 8 * i, 1), CORE_OK);
        assert_int_equal(core_ns_lpsm(ns, lba), CORE_LPSM_MAX);
        assert_int_equal(lba[CORE_LPSM_MAX - 1], 101 + 8 * (CORE_LPSM_MAX - 3));
        assert_int_equal(core_stats_misaligned_count(&ns->stats, CORE_OPC_WRITE),
                         2 + CORE_LPSM_MAX);
        del("mis");
}

static void test_start_stop_cycles_persist(void **st)
{
        (void)st;
        struct core_ns *ns = mk("ssc", "file", 1 * MIB, 0);
        assert_int_equal(core_ns_start_stop_cycles(ns), 0);
        core_ns_set_ready(ns, CORE_NS_STOPPED, NULL);
        core_ns_set_ready(ns, CORE_NS_STOPPED, NULL); /* already stopped: no new cycle */
        core_ns_set_ready(ns, CORE_NS_READY, NULL);
        core_ns_set_ready(ns, CORE_NS_STOPPED, NULL);
        core_ns_set_ready(ns, CORE_NS_READY, NULL);
        assert_int_equal(core_ns_start_stop_cycles(ns), 2);
        del("ssc");
        ns = mk("ssc", "file", 0, 0); /* reopen: the metadata keeps the count */
        assert_int_equal(core_ns_start_stop_cycles(ns), 2);
        del("ssc");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_extended_reads_everything),
            cmocka_unit_test(test_short_reads_a_sample),
            cmocka_unit_test(test_failure_reports_first_bad_lba),
            cmocka_unit_test(test_failed_element),
            cmocka_unit_test(test_busy_and_abort),
            cmocka_unit_test(test_log_keeps_twenty_newest_first),
            cmocka_unit_test(test_misaligned_counted),
            cmocka_unit_test(test_start_stop_cycles_persist),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
