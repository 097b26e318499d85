/*
 * Runtime: messages reach the right reactor thread, deferred work runs on
 * a later iteration in FIFO order, timers fire in deadline order and can be
 * cancelled, and rt_msg_call waits for the function to finish.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "rt/crc.h"
#include "rt/reactor.h"

static int setup(void **st)
{
        (void)st;
        return rt_init(2) || rt_start() ? -1 : 0;
}

static int teardown(void **st)
{
        (void)st;
        rt_stop();
        rt_join();
        rt_fini();
        return 0;
}

struct where {
        struct rt_reactor *seen;
};

static void record_current(void *arg)
{
        ((struct where *)arg)->seen = rt_current();
}

static void test_msg_lands_on_target(void **st)
{
        (void)st;
        for (unsigned i = 0; i < 2; i++) {
                struct where w = {0};
                assert_int_equal(rt_msg_call(rt_get(i), record_current, &w), 0);
                assert_ptr_equal(w.seen, rt_get(i));
        }
        assert_null(rt_current()); /* the test thread is no reactor */
}

struct defer_test {
        struct rt_defer d[3];
        int order[3];
        int n;
        bool ran_inline;
};

static struct defer_test dt;

static void defer_fn(struct rt_defer *d)
{
        dt.order[dt.n++] = (int)(d - dt.d);
}

static void queue_defers(void *arg)
{
        (void)arg;
        for (int i = 0; i < 3; i++) {
                dt.d[i].fn = defer_fn;
                rt_defer(rt_current(), &dt.d[i]);
        }
        dt.ran_inline = dt.n != 0;
}

static void nothing(void *arg)
{
        (void)arg;
}

static void test_defer_fifo_not_inline(void **st)
{
        (void)st;
        memset(&dt, 0, sizeof(dt));
        rt_msg_call(rt_get(0), queue_defers, NULL);
        assert_false(dt.ran_inline);
        /* A second round trip guarantees the loop iterated at least once more. */
        for (int i = 0; i < 3 && dt.n < 3; i++) {
                rt_msg_call(rt_get(0), nothing, NULL);
                usleep(1000);
        }
        assert_int_equal(dt.n, 3);
        assert_int_equal(dt.order[0], 0);
        assert_int_equal(dt.order[1], 1);
        assert_int_equal(dt.order[2], 2);
}

static struct rt_timer timers[3];
static int fired[3];
static int fire_seq;

static void timer_fn(struct rt_timer *t)
{
        fired[t - timers] = ++fire_seq;
}

static void arm_timers(void *arg)
{
        (void)arg;
        for (int i = 0; i < 3; i++)
                timers[i].fn = timer_fn;
        rt_timer_arm(rt_current(), &timers[0], 60);
        rt_timer_arm(rt_current(), &timers[1], 20);
        rt_timer_arm(rt_current(), &timers[2], 40);
        rt_timer_cancel(rt_current(), &timers[2]);
}

static void test_timers(void **st)
{
        (void)st;
        rt_msg_call(rt_get(1), arm_timers, NULL);
        usleep(300 * 1000);
        assert_int_equal(fired[1], 1);
        assert_int_equal(fired[0], 2);
        assert_int_equal(fired[2], 0); /* cancelled */
}

/* RFC 3720 B.4 check value; a chain over pieces equals the one-shot CRC. */
static void test_crc32c(void **st)
{
        (void)st;
        assert_int_equal(rt_crc32c("123456789", 9), 0xe3069283u);
        uint8_t zeros[32] = {0};
        assert_int_equal(rt_crc32c(zeros, sizeof(zeros)), 0x8a9136aau);
        uint32_t crc = RT_CRC32C_INIT;
        crc = rt_crc32c_update(crc, "1234", 4);
        crc = rt_crc32c_update(crc, "", 0);
        crc = rt_crc32c_update(crc, "56789", 5);
        assert_int_equal(rt_crc32c_final(crc), 0xe3069283u);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_msg_lands_on_target),
            cmocka_unit_test(test_defer_fifo_not_inline),
            cmocka_unit_test(test_timers),
            cmocka_unit_test(test_crc32c),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
