/*
 * core/worker.h: jobs run off the reactor, in order, each finishing exactly
 * once on its own reactor; one pool's long job does not hold up another
 * pool; core_work_inline runs the job on the caller but never calls done()
 * inside the call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "core/worker.h"
#include "rt/reactor.h"

#define NJOBS 64

struct job {
        struct core_work w;
        unsigned idx;
        bool ran_on_reactor; /* run() found itself on a reactor thread */
        bool done_elsewhere; /* done() ran on another thread than w.reactor */
        unsigned done_calls;
        unsigned sleep_ms;
};

static atomic_uint ndone;
static atomic_uint last_run;

static struct job *job_of(struct core_work *w)
{
        return (struct job *)((char *)w - offsetof(struct job, w));
}

static void job_run(struct core_work *w)
{
        struct job *j = job_of(w);
        j->ran_on_reactor = rt_current() != NULL;
        if (j->sleep_ms)
                usleep(j->sleep_ms * 1000u);
        atomic_store(&last_run, j->idx);
}

static void job_done(struct core_work *w)
{
        struct job *j = job_of(w);
        j->done_elsewhere = rt_current() != w->reactor;
        j->done_calls++;
        atomic_fetch_add(&ndone, 1);
}

static void wait_done(unsigned n)
{
        for (int i = 0; i < 5000 && atomic_load(&ndone) < n; i++)
                usleep(1000);
}

static struct core_workers one = CORE_WORKERS_INIT("test_one", 1);

struct submit_arg {
        struct core_workers *p;
        struct job *jobs;
        unsigned n;
        bool ok;
};

static void submit_all(void *arg)
{
        struct submit_arg *a = arg;
        a->ok = true;
        for (unsigned i = 0; i < a->n; i++)
                a->ok &= core_work_submit(a->p, &a->jobs[i].w);
}

static void test_jobs_run_off_reactor_in_order(void **state)
{
        (void)state;
        static struct job jobs[NJOBS];
        atomic_store(&ndone, 0);
        for (unsigned i = 0; i < NJOBS; i++)
                jobs[i] = (struct job){
                    .w = {.run = job_run, .done = job_done, .reactor = rt_get(i % 2)}, .idx = i};
        struct submit_arg a = {.p = &one, .jobs = jobs, .n = NJOBS};
        assert_int_equal(rt_msg_call(rt_get(0), submit_all, &a), 0);
        assert_true(a.ok);
        wait_done(NJOBS);
        assert_int_equal(atomic_load(&ndone), NJOBS);
        usleep(20000); /* a second done() would show now */
        for (unsigned i = 0; i < NJOBS; i++) {
                assert_false(jobs[i].ran_on_reactor);
                assert_false(jobs[i].done_elsewhere);
                assert_int_equal(jobs[i].done_calls, 1);
        }
        /* One thread, one FIFO: the last job submitted ran last. */
        assert_int_equal(atomic_load(&last_run), NJOBS - 1);
}

static struct core_workers slow = CORE_WORKERS_INIT("test_slow", 1);
static struct core_workers fast = CORE_WORKERS_INIT("test_fast", 1);

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void test_pools_do_not_wait_on_each_other(void **state)
{
        (void)state;
        atomic_store(&ndone, 0);
        static struct job long_job, short_job;
        long_job = (struct job){.w = {.run = job_run, .done = job_done, .reactor = rt_get(0)},
                                .idx = 1,
                                .sleep_ms = 800};
        short_job =
            (struct job){.w = {.run = job_run, .done = job_done, .reactor = rt_get(0)}, .idx = 2};
        struct submit_arg a1 = {.p = &slow, .jobs = &long_job, .n = 1};
        struct submit_arg a2 = {.p = &fast, .jobs = &short_job, .n = 1};
        uint64_t t0 = now_ms();
        assert_int_equal(rt_msg_call(rt_get(0), submit_all, &a1), 0);
        assert_int_equal(rt_msg_call(rt_get(0), submit_all, &a2), 0);
        wait_done(1);
        /* The short job finished first, well before the long one could have. */
        assert_int_equal(atomic_load(&ndone), 1);
        assert_int_equal(short_job.done_calls, 1);
        assert_int_equal(long_job.done_calls, 0);
        assert_true(now_ms() - t0 < 800);
        wait_done(2);
        assert_int_equal(long_job.done_calls, 1);
}

struct inline_arg {
        struct job *j;
        unsigned done_inside; /* done() calls seen before core_work_inline returned */
};

static void run_inline(void *arg)
{
        struct inline_arg *a = arg;
        core_work_inline(&a->j->w);
        a->done_inside = a->j->done_calls;
}

static void test_inline_defers_done(void **state)
{
        (void)state;
        atomic_store(&ndone, 0);
        static struct job j;
        j = (struct job){.w = {.run = job_run, .done = job_done, .reactor = rt_get(1)}, .idx = 7};
        struct inline_arg a = {.j = &j};
        assert_int_equal(rt_msg_call(rt_get(1), run_inline, &a), 0);
        assert_int_equal(a.done_inside, 0);
        assert_true(j.ran_on_reactor); /* inline: on the caller's reactor */
        wait_done(1);
        assert_int_equal(j.done_calls, 1);
        assert_false(j.done_elsewhere);
}

static int setup(void **state)
{
        (void)state;
        return rt_init(2) || rt_start() ? -1 : 0;
}

static int teardown(void **state)
{
        (void)state;
        rt_stop();
        rt_join();
        rt_fini();
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_jobs_run_off_reactor_in_order),
            cmocka_unit_test(test_pools_do_not_wait_on_each_other),
            cmocka_unit_test(test_inline_defers_done),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
