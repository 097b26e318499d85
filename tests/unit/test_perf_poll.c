/*
 * Unit tests for slate-perf's --poll modes (tools/slate-perf/poll.c): the
 * option's parser (always, off, adaptive with and without a budget, and the
 * values it must refuse) and the spin-or-sleep decision: off always sleeps,
 * always never does, adaptive spins only within its budget after the last
 * completion or send and sleeps once it has passed; spins and sleeps are
 * counted.  No standard section.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "perf.h"

static void test_parse(void **state)
{
        (void)state;
        struct perf_opts o = {0};
        assert_int_equal(perf_poll_parse(NULL, &o), 0); /* plain --poll, as before */
        assert_int_equal(o.poll, PERF_POLL_ALWAYS);
        assert_int_equal(perf_poll_parse("off", &o), 0);
        assert_int_equal(o.poll, PERF_POLL_OFF);
        assert_int_equal(perf_poll_parse("adaptive", &o), 0);
        assert_int_equal(o.poll, PERF_POLL_ADAPTIVE);
        assert_int_equal(o.poll_us, PERF_POLL_US_DEFAULT);
        assert_int_equal(perf_poll_parse("adaptive:20", &o), 0);
        assert_int_equal(o.poll_us, 20);
        assert_int_equal(perf_poll_parse("always", &o), 0);
        assert_int_equal(o.poll, PERF_POLL_ALWAYS);
        assert_string_equal(perf_poll_name(PERF_POLL_ADAPTIVE), "adaptive");
        o.poll = PERF_POLL_OFF;
        const char *bad[] = {"",           "sometimes",        "adaptive:",
                             "adaptive:0", "adaptive:x",       "adaptive:20us",
                             "adaptivex",  "adaptive:1000001", "adaptive:-5"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                assert_int_equal(perf_poll_parse(bad[i], &o), -EINVAL);
                assert_int_equal(o.poll, PERF_POLL_OFF); /* unchanged */
        }
}

static void test_spin_decision(void **state)
{
        (void)state;
        struct perf_opts o = {.poll = PERF_POLL_ADAPTIVE, .poll_us = 50};
        struct perf_worker w = {.o = &o};
        uint64_t t0 = 1000000000ull;
        /* a completion at t0: spin within 50 us of it, sleep after */
        assert_true(perf_poll_spin(&w, true, t0));
        assert_true(perf_poll_spin(&w, false, t0 + 10000));
        assert_true(perf_poll_spin(&w, false, t0 + 49999));
        assert_false(perf_poll_spin(&w, false, t0 + 50000));
        assert_false(perf_poll_spin(&w, false, t0 + 900000));
        /* new work restarts the budget from its own time */
        assert_true(perf_poll_spin(&w, true, t0 + 1000000));
        assert_true(perf_poll_spin(&w, false, t0 + 1040000));
        assert_false(perf_poll_spin(&w, false, t0 + 1060000));
        assert_int_equal(w.st.spins, 5);
        assert_int_equal(w.st.sleeps, 3);

        o.poll = PERF_POLL_ALWAYS;
        w.st.spins = w.st.sleeps = 0;
        assert_true(perf_poll_spin(&w, false, t0 + 5000000000ull));
        assert_int_equal(w.st.spins, 1);

        o.poll = PERF_POLL_OFF;
        assert_false(perf_poll_spin(&w, true, t0));
        assert_false(perf_poll_spin(&w, false, t0));
        assert_int_equal(w.st.sleeps, 2);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse),
            cmocka_unit_test(test_spin_decision),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
