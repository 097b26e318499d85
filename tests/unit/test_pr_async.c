/*
 * PR OUT off the reactor (core_ns_pr_out_submit, core/pr.h): on a
 * namespace whose reservation state is shared, a slow store (here a fake
 * pr_store that takes 600 ms, as a rbd notify waiting out a dead gateway
 * does) runs on a core worker thread, so I/O of another namespace on the
 * same reactor keeps completing meanwhile; the job's callback runs on the
 * issuing reactor with the result installed in the namespace's copy.  On
 * a namespace without shared state the job completes at once (deferred,
 * never from inside the submit).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core_fixture.h"
#include "backend/backend.h"
#include "core/ns.h"
#include "core/pr.h"
#include "core/req.h"
#include "rt/reactor.h"

static char state_dir[256];

static int setup(void **st)
{
        (void)st;
        return core_fixture_up(state_dir, sizeof(state_dir), "prasync", 1);
}

static int teardown(void **st)
{
        (void)st;
        return core_fixture_down(state_dir);
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static struct core_ns *mk(const char *name)
{
        struct core_ns *ns = NULL;
        char err[256];
        struct core_ns_params p = {
            .name = name, .backend = "mem", .size_bytes = 1 << 20, .block_size = 512};
        int rc = core_ns_create(&p, &ns, err, sizeof(err));
        if (rc)
                fprintf(stderr, "create %s: %s\n", name, err);
        assert_int_equal(rc, 0);
        return ns;
}

/* The "shared storage": one string and its version, a store that takes STORE_MS. */
#define STORE_MS 600
static pthread_mutex_t st_lock = PTHREAD_MUTEX_INITIALIZER;
static char *st_text;
static uint64_t st_version;

static int load_ms;
static int slow_load(struct backend *be, char **text, uint64_t *version)
{
        (void)be;
        if (load_ms)
                usleep((useconds_t)load_ms * 1000);
        pthread_mutex_lock(&st_lock);
        *text = st_text ? strdup(st_text) : NULL;
        *version = st_version;
        pthread_mutex_unlock(&st_lock);
        return 0;
}

static int store_ms = STORE_MS;
static int slow_store(struct backend *be, const char *text, uint64_t *version)
{
        (void)be;
        usleep((useconds_t)store_ms * 1000);
        pthread_mutex_lock(&st_lock);
        int rc = -ECANCELED;
        if (*version == st_version) {
                free(st_text);
                st_text = strdup(text);
                *version = ++st_version;
                rc = 0;
        }
        pthread_mutex_unlock(&st_lock);
        return rc;
}

/* ---- I/O and the job, from this thread, run on reactor 0 ---- */

static atomic_int io_done;
static void io_cb(struct core_req *req)
{
        (void)req;
        atomic_fetch_add(&io_done, 1);
}
static void submit_req(void *arg)
{
        core_req_submit(arg);
}

static atomic_int job_done, job_off_reactor;
static atomic_ullong job_done_ms;
static void job_cb(struct core_pr_job *j)
{
        if (rt_current() != j->reactor)
                atomic_fetch_add(&job_off_reactor, 1);
        atomic_store(&job_done_ms, now_ms());
        atomic_store(&job_done, 1);
}
static void submit_job(void *arg)
{
        core_ns_pr_out_submit(arg);
        /* Never from inside the submit: still not done here. */
        if (atomic_load(&job_done))
                atomic_fetch_add(&job_off_reactor, 100);
}

static void job_init(struct core_pr_job *j, struct core_ns *ns, uint64_t key)
{
        memset(j, 0, sizeof(*j));
        j->ns = ns;
        snprintf(j->self.initiator, sizeof(j->self.initiator), "iqn.host,i,0x1");
        snprintf(j->self.target, sizeof(j->self.target), "iqn.tgt,t,0x1");
        j->self.rel_tgt_port = 1;
        j->c.action = CORE_PR_REGISTER;
        j->c.sa_key = key;
        j->reactor = rt_get(0);
        j->cb = job_cb;
        atomic_store(&job_done, 0);
        atomic_store(&job_off_reactor, 0);
}

/*
 * Reads of namespace b, one after another, through reactor 0, until ms
 * after t0; how many completed while the slow call (slow_done) was still
 * running.  Had the call held the reactor, none would: the reads queued
 * behind it complete after its callback.  (Counted, not timed, so a loaded
 * machine does not fail it.)
 */
static int reads_meanwhile(struct core_ns *b, uint64_t t0, unsigned ms, atomic_int *slow_done)
{
        static uint8_t buf[512];
        static struct core_req req;
        int n = 0, meanwhile = 0;
        while (now_ms() - t0 < ms) {
                atomic_store(&io_done, 0);
                core_req_init(&req, b, CORE_OP_READ, (uint64_t)n++ % 64, 1, 0, rt_get(0), io_cb,
                              NULL);
                req.iov[0].iov_base = buf;
                req.iov[0].iov_len = sizeof(buf);
                req.iovcnt = 1;
                rt_msg_send(rt_get(0), submit_req, &req);
                while (!atomic_load(&io_done))
                        usleep(100);
                assert_int_equal(req.status, CORE_OK);
                if (!atomic_load(slow_done))
                        meanwhile++;
        }
        return meanwhile;
}

static void test_slow_shared_pr_out_does_not_stall_io(void **state)
{
        (void)state;
        struct core_ns *a = mk("prshared"), *b = mk("other");
        static struct backend_ops fake;
        fake = *a->be.ops;
        fake.pr_load = slow_load;
        fake.pr_store = slow_store;
        a->be.ops = &fake;
        a->be.pr_shared = true;

        static struct core_pr_job j;
        job_init(&j, a, 0x1234);
        uint64_t t0 = now_ms();
        rt_msg_send(rt_get(0), submit_job, &j);

        /* Reads went on while the PR OUT was on its worker. */
        assert_true(reads_meanwhile(b, t0, STORE_MS / 2, &job_done) >= 3);

        while (!atomic_load(&job_done) && now_ms() - t0 < 10 * STORE_MS)
                usleep(1000);
        assert_true(atomic_load(&job_done));
        assert_true(atomic_load(&job_done_ms) - t0 >= STORE_MS);
        assert_int_equal(atomic_load(&job_off_reactor), 0);
        assert_int_equal(j.st, CORE_OK);
        /* The result is this gateway's copy, and the storage's. */
        pthread_mutex_lock(&a->lock);
        const struct core_pr_reg *r = core_pr_find_reg(&a->pr, &j.self);
        assert_non_null(r);
        assert_int_equal(r->key, 0x1234);
        pthread_mutex_unlock(&a->lock);
        assert_int_equal(st_version, 1);
}

/* Without shared state: done at once on the reactor (deferred, not inside the submit). */
static void test_local_pr_out_completes_on_reactor(void **state)
{
        (void)state;
        struct core_ns *c = mk("local");
        static struct core_pr_job j;
        job_init(&j, c, 0x99);
        uint64_t t0 = now_ms();
        rt_msg_send(rt_get(0), submit_job, &j);
        while (!atomic_load(&job_done) && now_ms() - t0 < 5000)
                usleep(100);
        assert_true(atomic_load(&job_done));
        assert_int_equal(atomic_load(&job_off_reactor), 0);
        assert_int_equal(j.st, CORE_OK);
        pthread_mutex_lock(&c->lock);
        assert_non_null(core_pr_find_reg(&c->pr, &j.self));
        pthread_mutex_unlock(&c->lock);
}

/* ---- the other gateway's hosts hear of a change (pr_tell) ---- */

static struct core_ns *ev_ns;
static atomic_int ev_preempted, ev_other;
static void on_event(const struct core_ns_event *ev, void *arg)
{
        (void)arg;
        if (ev->ns != ev_ns || ev->type != CORE_NS_EV_RESERVATION)
                return;
        if (ev->pr_reg && ev->pr_reg->key == 0x22 && (ev->pr_events & CORE_PR_EV_REGS_PREEMPTED) &&
            !ev->origin)
                atomic_fetch_add(&ev_preempted, 1);
        else
                atomic_fetch_add(&ev_other, 1);
}

static void fake_shared(struct core_ns *ns)
{
        static struct backend_ops fake;
        fake = *ns->be.ops;
        fake.pr_load = slow_load;
        fake.pr_store = slow_store;
        ns->be.ops = &fake;
        ns->be.pr_shared = true;
}

static void nexus(struct core_pr_nexus *n, const char *ini, uint16_t port)
{
        memset(n, 0, sizeof(*n));
        snprintf(n->initiator, sizeof(n->initiator), "%s", ini);
        snprintf(n->target, sizeof(n->target), "iqn.tgt,t,0x1");
        n->rel_tgt_port = port;
}

/*
 * PERSISTENT RESERVE IN / Reservation Report reload the stored state
 * (core_ns_pr_refresh_submit): a load that takes 600 ms runs on a worker,
 * reads of another namespace on the same reactor go on, and the callback
 * runs on the reactor with what was stored installed.
 */
static atomic_int rf_done, rf_off_reactor;
static atomic_ullong rf_done_ms;
static void refresh_cb(struct core_pr_refresh_job *j)
{
        if (rt_current() != j->reactor)
                atomic_fetch_add(&rf_off_reactor, 1);
        atomic_store(&rf_done_ms, now_ms());
        atomic_store(&rf_done, 1);
}
static void submit_refresh(void *arg)
{
        core_ns_pr_refresh_submit(arg);
        if (atomic_load(&rf_done))
                atomic_fetch_add(&rf_off_reactor, 100);
}

static void test_slow_shared_refresh_does_not_stall_io(void **state)
{
        (void)state;
        /* a and a2: one image through two gateways; b: another namespace. */
        struct core_ns *a = mk("prshared"), *a2 = mk("gw2"), *b = mk("other");
        fake_shared(a);
        fake_shared(a2);
        pthread_mutex_lock(&st_lock);
        free(st_text);
        st_text = NULL;
        st_version = 0;
        pthread_mutex_unlock(&st_lock);
        /* The other gateway registers key 0x77 (a quick store); a's copy knows nothing of it. */
        static struct core_pr_job j;
        job_init(&j, a2, 0x77);
        store_ms = 0;
        rt_msg_send(rt_get(0), submit_job, &j);
        while (!atomic_load(&job_done))
                usleep(100);
        store_ms = STORE_MS;
        assert_int_equal(j.st, CORE_OK);
        pthread_mutex_lock(&a->lock);
        assert_null(core_pr_find_reg(&a->pr, &j.self));
        pthread_mutex_unlock(&a->lock);

        static struct core_pr_refresh_job rj;
        rj = (struct core_pr_refresh_job){.ns = a, .reactor = rt_get(0), .cb = refresh_cb};
        load_ms = STORE_MS;
        uint64_t t0 = now_ms();
        rt_msg_send(rt_get(0), submit_refresh, &rj);
        assert_true(reads_meanwhile(b, t0, STORE_MS / 2, &rf_done) >= 3);
        while (!atomic_load(&rf_done) && now_ms() - t0 < 10 * STORE_MS)
                usleep(1000);
        load_ms = 0;
        assert_true(atomic_load(&rf_done));
        assert_true(atomic_load(&rf_done_ms) - t0 >= STORE_MS);
        assert_int_equal(atomic_load(&rf_off_reactor), 0);
        assert_int_equal(rj.rc, 0);
        pthread_mutex_lock(&a->lock);
        const struct core_pr_reg *r = core_pr_find_reg(&a->pr, &j.self);
        assert_non_null(r);
        assert_int_equal(r->key, 0x77);
        pthread_mutex_unlock(&a->lock);
}

/*
 * Gateway 1 (namespace a) preempts a registration made through gateway 2
 * (namespace b, the same stored state): b, reloading, publishes the
 * preemption for its host once, with no origin; a reload of the same
 * version publishes nothing more.
 */
static void test_other_gateway_told_once(void **state)
{
        (void)state;
        store_ms = 0;
        pthread_mutex_lock(&st_lock);
        free(st_text);
        st_text = NULL;
        st_version = 0;
        pthread_mutex_unlock(&st_lock);
        struct core_ns *a = mk("gw1"), *b = mk("gw2");
        fake_shared(a);
        fake_shared(b);
        ev_ns = b;
        static bool listening;
        if (!listening)
                assert_int_equal(core_ns_listen(on_event, NULL), 0);
        listening = true;
        atomic_store(&ev_preempted, 0);
        atomic_store(&ev_other, 0);

        struct core_pr_nexus x, y;
        nexus(&x, "iqn.host1,i,0x1", 0x0101);
        nexus(&y, "iqn.host2,i,0x1", 0x0201);
        struct core_pr_cmd c = {.action = CORE_PR_REGISTER, .sa_key = 0x11};
        assert_int_equal(core_ns_pr_out(a, &x, &c, NULL), CORE_OK);
        struct core_pr_cmd d = {.action = CORE_PR_REGISTER, .sa_key = 0x22};
        assert_int_equal(core_ns_pr_out(b, &y, &d, NULL), CORE_OK);
        assert_int_equal(core_ns_pr_refresh(b), 0);
        assert_int_equal(atomic_load(&ev_preempted), 0);

        struct core_pr_cmd p = {.action = CORE_PR_PREEMPT,
                                .key = 0x11,
                                .sa_key = 0x22,
                                .type = CORE_PR_WRITE_EXCLUSIVE};
        assert_int_equal(core_ns_pr_out(a, &x, &p, a), CORE_OK);
        assert_int_equal(atomic_load(&ev_preempted), 0); /* a told its own hosts, not b's */
        assert_int_equal(core_ns_pr_refresh(b), 0);
        assert_int_equal(atomic_load(&ev_preempted), 1);
        assert_int_equal(core_ns_pr_refresh(b), 0);
        assert_int_equal(atomic_load(&ev_preempted), 1);
        assert_int_equal(atomic_load(&ev_other), 0);
        pthread_mutex_lock(&b->lock);
        assert_null(core_pr_find_reg(&b->pr, &y));
        pthread_mutex_unlock(&b->lock);
        store_ms = STORE_MS;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_slow_shared_pr_out_does_not_stall_io, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_local_pr_out_completes_on_reactor, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_other_gateway_told_once, setup, teardown),
            cmocka_unit_test_setup_teardown(test_slow_shared_refresh_does_not_stall_io, setup,
                                            teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
