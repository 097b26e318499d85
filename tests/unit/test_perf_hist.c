/*
 * Unit tests for slate-perf's log-linear latency histogram
 * (tools/slate-perf/hist.c): bucket boundaries are contiguous and monotonic,
 * every value lands in a bucket that contains it, percentiles are within the
 * bucket precision of the exact answer, merging equals recording everything
 * in one histogram, and an empty histogram answers 0.  No standard section.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "hist.h"

static void test_buckets_contiguous(void **state)
{
        (void)state;
        assert_int_equal(perf_hist_bucket_lo(0), 0);
        for (unsigned i = 1; i < PERF_HIST_BUCKETS; i++) {
                assert_true(perf_hist_bucket_lo(i) <= perf_hist_bucket_hi(i));
                assert_int_equal(perf_hist_bucket_lo(i), perf_hist_bucket_hi(i - 1) + 1);
        }
        assert_true(perf_hist_bucket_hi(PERF_HIST_BUCKETS - 1) == UINT64_MAX);
}

static void test_index_contains_value(void **state)
{
        (void)state;
        uint64_t vals[] = {0,
                           1,
                           31,
                           32,
                           33,
                           63,
                           64,
                           65,
                           100,
                           1000,
                           4095,
                           4096,
                           123456789,
                           UINT64_C(1) << 40,
                           (UINT64_C(1) << 40) - 1,
                           UINT64_MAX};
        for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
                unsigned i = perf_hist_index(vals[k]);
                assert_true(i < PERF_HIST_BUCKETS);
                assert_true(perf_hist_bucket_lo(i) <= vals[k]);
                assert_true(vals[k] <= perf_hist_bucket_hi(i));
        }
        /* Relative bucket width stays within 1/SUB. */
        for (uint64_t v = 64; v < (UINT64_C(1) << 50); v = v * 3 + 7) {
                unsigned i = perf_hist_index(v);
                uint64_t w = perf_hist_bucket_hi(i) - perf_hist_bucket_lo(i) + 1;
                assert_true(w * PERF_HIST_SUB <= perf_hist_bucket_lo(i) * 2 + PERF_HIST_SUB);
        }
}

static void test_empty(void **state)
{
        (void)state;
        struct perf_hist *h = malloc(sizeof(*h));
        perf_hist_init(h);
        assert_int_equal(perf_hist_percentile(h, 50), 0);
        assert_int_equal(perf_hist_percentile(h, 99.9), 0);
        assert_true(perf_hist_mean(h) == 0.0);
        free(h);
}

static int near(uint64_t got, uint64_t want)
{
        uint64_t d = got > want ? got - want : want - got;
        return d * PERF_HIST_SUB <= want + PERF_HIST_SUB; /* within ~3% */
}

static void test_percentiles_uniform(void **state)
{
        (void)state;
        struct perf_hist *h = malloc(sizeof(*h));
        perf_hist_init(h);
        /* 1..100000 ns once each: p50 = 50000, p99 = 99000, p99.9 = 99900. */
        for (uint64_t v = 1; v <= 100000; v++)
                perf_hist_record(h, v);
        assert_int_equal(h->count, 100000);
        assert_int_equal(h->min, 1);
        assert_int_equal(h->max, 100000);
        assert_true(perf_hist_mean(h) == 50000.5);
        assert_true(near(perf_hist_percentile(h, 50), 50000));
        assert_true(near(perf_hist_percentile(h, 99), 99000));
        assert_true(near(perf_hist_percentile(h, 99.9), 99900));
        assert_int_equal(perf_hist_percentile(h, 100), 100000);
        assert_int_equal(perf_hist_percentile(h, 0), 1);
        free(h);
}

static void test_percentiles_exact_small(void **state)
{
        (void)state;
        struct perf_hist *h = malloc(sizeof(*h));
        perf_hist_init(h);
        /* Values below SUB are exact: 99 samples of 5 and one of 20. */
        for (int i = 0; i < 99; i++)
                perf_hist_record(h, 5);
        perf_hist_record(h, 20);
        assert_int_equal(perf_hist_percentile(h, 50), 5);
        assert_int_equal(perf_hist_percentile(h, 99), 5);
        assert_int_equal(perf_hist_percentile(h, 99.9), 20);
        free(h);
}

static void test_tail_clamped(void **state)
{
        (void)state;
        struct perf_hist *h = malloc(sizeof(*h));
        perf_hist_init(h);
        /* A single sample: every percentile is that sample, not its bucket middle. */
        perf_hist_record(h, 1000003);
        assert_int_equal(perf_hist_percentile(h, 50), 1000003);
        assert_int_equal(perf_hist_percentile(h, 99.9), 1000003);
        free(h);
}

static void test_merge(void **state)
{
        (void)state;
        struct perf_hist *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b)),
                         *all = malloc(sizeof(*all));
        perf_hist_init(a);
        perf_hist_init(b);
        perf_hist_init(all);
        uint64_t x = 88172645463325252ULL;
        for (int i = 0; i < 50000; i++) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                uint64_t v = x % 5000000;
                perf_hist_record(i & 1 ? a : b, v);
                perf_hist_record(all, v);
        }
        perf_hist_merge(a, b);
        assert_int_equal(a->count, all->count);
        assert_int_equal(a->sum, all->sum);
        assert_int_equal(a->min, all->min);
        assert_int_equal(a->max, all->max);
        assert_memory_equal(a->bucket, all->bucket, sizeof(a->bucket));
        assert_int_equal(perf_hist_percentile(a, 99), perf_hist_percentile(all, 99));
        /* Merging an empty histogram changes nothing. */
        perf_hist_init(b);
        perf_hist_merge(a, b);
        assert_int_equal(a->min, all->min);
        assert_int_equal(a->count, all->count);
        free(a);
        free(b);
        free(all);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_buckets_contiguous),
            cmocka_unit_test(test_index_contains_value),
            cmocka_unit_test(test_empty),
            cmocka_unit_test(test_percentiles_uniform),
            cmocka_unit_test(test_percentiles_exact_small),
            cmocka_unit_test(test_tail_clamped),
            cmocka_unit_test(test_merge),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
