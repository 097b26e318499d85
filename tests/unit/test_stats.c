/*
 * Unit tests for the core's I/O statistics (core/stats.c) and the metrics
 * text helpers (mgmt/metrics.c, mgmt/http.c): latency bucket boundaries,
 * operation classes, shard sums from reactor threads and from other
 * threads, refusals (counted, no latency observed), the host registry and
 * its idle cap, Prometheus label escaping and the HTTP listen address
 * parser.  No standard section; the exposition format is Prometheus's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/req.h"
#include "core/stats.h"
#include "mgmt/metrics.h"
#include "rt/reactor.h"

static void test_buckets(void **state)
{
        (void)state;
        assert_int_equal(core_lat_bucket_index(0), 0);
        assert_int_equal(core_lat_bucket_index(4000), 0);
        assert_int_equal(core_lat_bucket_index(4001), 1);
        for (unsigned i = 0; i + 1 < CORE_LAT_BUCKETS; i++) {
                uint64_t le = core_lat_bucket_le_ns(i);
                if (i)
                        assert_true(le > core_lat_bucket_le_ns(i - 1));
                /* A latency equal to a bound is in that bucket ("le"), one more is not. */
                assert_int_equal(core_lat_bucket_index(le), i);
                assert_int_equal(core_lat_bucket_index(le + 1), i + 1);
        }
        assert_true(core_lat_bucket_le_ns(CORE_LAT_BUCKETS - 1) == UINT64_MAX);
        assert_int_equal(core_lat_bucket_index(UINT64_MAX), CORE_LAT_BUCKETS - 1);
        assert_int_equal(core_lat_bucket_index(3600ull * 1000000000ull), CORE_LAT_BUCKETS - 1);
}

static void test_classes(void **state)
{
        (void)state;
        assert_int_equal(core_op_class_of(CORE_OP_READ), CORE_OPC_READ);
        assert_int_equal(core_op_class_of(CORE_OP_WRITE), CORE_OPC_WRITE);
        assert_int_equal(core_op_class_of(CORE_OP_WRITE_ZEROES), CORE_OPC_WRITE);
        assert_int_equal(core_op_class_of(CORE_OP_DEALLOCATE), CORE_OPC_WRITE);
        assert_int_equal(core_op_class_of(CORE_OP_COMPARE_AND_WRITE), CORE_OPC_WRITE);
        assert_int_equal(core_op_class_of(CORE_OP_FLUSH), CORE_OPC_FLUSH);
        assert_int_equal(core_op_class_of(CORE_OP_COMPARE), CORE_OPC_OTHER);
        assert_int_equal(core_op_class_of(CORE_OP_VERIFY), CORE_OPC_OTHER);
        assert_string_equal(core_op_class_name(CORE_OPC_FLUSH), "flush");
}

/* Without reactors there is one (shared) shard; counts add up exactly. */
static void test_sum_shared(void **state)
{
        (void)state;
        struct core_stats s;
        struct core_stats_sum sum;
        assert_int_equal(core_stats_init(&s), 0);
        for (int i = 0; i < 10; i++)
                core_stats_start(&s);
        for (int i = 0; i < 7; i++)
                core_stats_end(&s, CORE_OPC_WRITE, CORE_OK, 4096, 10000);
        core_stats_end(&s, CORE_OPC_READ, CORE_E_MEDIUM_ERROR, 512, 3000);
        core_stats_sum(&s, &sum);
        assert_int_equal(sum.submitted, 10);
        assert_int_equal(sum.ops[CORE_OPC_WRITE], 7);
        assert_int_equal(sum.ok[CORE_OPC_WRITE], 7);
        assert_int_equal(sum.bytes[CORE_OPC_WRITE], 7 * 4096);
        assert_int_equal(sum.ops[CORE_OPC_READ], 1);
        assert_int_equal(sum.ok[CORE_OPC_READ], 0);
        assert_int_equal(sum.bytes[CORE_OPC_READ], 0); /* failed: no data counted */
        assert_int_equal(sum.errors[CORE_E_MEDIUM_ERROR], 1);
        assert_int_equal(sum.lat[CORE_OPC_WRITE][core_lat_bucket_index(10000)], 7);
        assert_int_equal(sum.lat_sum_ns[CORE_OPC_WRITE], 70000);
        assert_int_equal(core_stats_outstanding(&sum), 2);
        assert_int_equal(core_stats_ok(&s, CORE_OPC_WRITE), 7);

        /* A refusal: one op and one error, nothing in the histogram. */
        core_stats_start(&s);
        core_stats_end(&s, CORE_OPC_WRITE, CORE_E_LBA_RANGE, 4096, CORE_LAT_NONE);
        core_stats_sum(&s, &sum);
        assert_int_equal(sum.ops[CORE_OPC_WRITE], 8);
        assert_int_equal(sum.errors[CORE_E_LBA_RANGE], 1);
        uint64_t n = 0;
        for (unsigned b = 0; b < CORE_LAT_BUCKETS; b++)
                n += sum.lat[CORE_OPC_WRITE][b];
        assert_int_equal(n, 7);
        core_stats_fini(&s);
}

/* Counting from reactor threads uses their own shards; the sum sees all. */
static struct core_stats rs;

static void count_on_reactor(void *arg)
{
        (void)arg;
        for (int i = 0; i < 1000; i++) {
                core_stats_start(&rs);
                core_stats_end(&rs, CORE_OPC_READ, CORE_OK, 512, 5000);
        }
}

static void test_sum_reactors(void **state)
{
        (void)state;
        assert_int_equal(rt_init(2), 0);
        assert_int_equal(rt_start(), 0);
        assert_int_equal(core_stats_init(&rs), 0);
        assert_int_equal(rs.nshards, 3);
        assert_int_equal(rt_msg_call(rt_get(0), count_on_reactor, NULL), 0);
        assert_int_equal(rt_msg_call(rt_get(1), count_on_reactor, NULL), 0);
        count_on_reactor(NULL); /* this thread: the shared shard */
        for (unsigned i = 0; i < 3; i++)
                assert_int_equal(atomic_load(&rs.shard[i].ops[CORE_OPC_READ]), 1000);
        struct core_stats_sum sum;
        core_stats_sum(&rs, &sum);
        assert_int_equal(sum.ops[CORE_OPC_READ], 3000);
        assert_int_equal(sum.bytes[CORE_OPC_READ], 3000 * 512);
        assert_int_equal(core_stats_outstanding(&sum), 0);
        core_stats_fini(&rs);
        rt_stop();
        rt_join();
        rt_fini();
}

static void count_hosts(const struct core_host *h, void *arg)
{
        (void)h;
        (*(unsigned *)arg)++;
}

static void test_hosts(void **state)
{
        (void)state;
        struct core_host *a = core_host_get("iscsi", "iqn.2026-12.test:a");
        struct core_host *a2 = core_host_get("iscsi", "iqn.2026-12.test:a");
        struct core_host *n = core_host_get("nvme", "iqn.2026-12.test:a");
        assert_non_null(a);
        assert_ptr_equal(a, a2);
        assert_ptr_not_equal(a, n); /* the transport is part of the identity */
        assert_int_equal(a->refs, 2);
        core_host_put(a2);
        core_host_put(a);
        assert_int_equal(a->refs, 0);
        /* Idle hosts are kept (with their counters), up to CORE_HOST_IDLE_MAX of them. */
        unsigned count = 0;
        core_host_foreach(count_hosts, &count);
        assert_int_equal(count, 2);
        char name[64];
        for (unsigned i = 0; i < CORE_HOST_IDLE_MAX + 10; i++) {
                snprintf(name, sizeof(name), "nqn.2026-12.test:h%u", i);
                core_host_put(core_host_get("nvme", name));
        }
        count = 0;
        core_host_foreach(count_hosts, &count);
        /* n is still referenced; at most CORE_HOST_IDLE_MAX idle ones are kept. */
        assert_int_equal(count, CORE_HOST_IDLE_MAX + 1);
        core_host_put(n);
}

static char *escaped(const char *s)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        mgmt_metrics_escape(f, s);
        fclose(f);
        return buf;
}

static void test_escape(void **state)
{
        (void)state;
        char *e = escaped("a\"b\\c\nd\x01\xc3\xa9");
        assert_string_equal(e, "a\\\"b\\\\c\\nd???");
        free(e);
        e = escaped("iqn.2026-12.io.slate:plain");
        assert_string_equal(e, "iqn.2026-12.io.slate:plain");
        free(e);
}

static void test_parse_listen(void **state)
{
        (void)state;
        char a[64];
        unsigned p;
        assert_int_equal(mgmt_http_parse_listen("0", a, sizeof(a), &p), 0);
        assert_string_equal(a, "127.0.0.1");
        assert_int_equal(p, 0);
        assert_int_equal(mgmt_http_parse_listen("0.0.0.0:9100", a, sizeof(a), &p), 0);
        assert_string_equal(a, "0.0.0.0");
        assert_int_equal(p, 9100);
        assert_int_equal(mgmt_http_parse_listen("[::1]:65535", a, sizeof(a), &p), 0);
        assert_string_equal(a, "::1");
        assert_int_equal(p, 65535);
        const char *bad[] = {"",
                             ":80",
                             "1.2.3.4:",
                             "1.2.3.4:65536",
                             "::1:80",
                             "[::1]80",
                             "[]:80",
                             "host:80",
                             "1.2.3.4:-1",
                             "1.2.3.4:8x",
                             "[1.2.3]:1",
                             "99999999",
                             "1.2.3.4.5:1",
                             NULL};
        for (int i = 0; bad[i]; i++)
                assert_int_equal(mgmt_http_parse_listen(bad[i], a, sizeof(a), &p), -22);
        assert_int_equal(mgmt_http_parse_listen(NULL, a, sizeof(a), &p), -22);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_buckets),      cmocka_unit_test(test_classes),
            cmocka_unit_test(test_sum_shared),   cmocka_unit_test(test_sum_reactors),
            cmocka_unit_test(test_hosts),        cmocka_unit_test(test_escape),
            cmocka_unit_test(test_parse_listen),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
