/*
 * Fault injection rules (core/fault.c): parsing of ops and statuses, the
 * validation fault_set relies on, matching (namespace, host, transport,
 * ops, LBA range), the patterns (every Nth, count, a seeded fraction that
 * repeats with its seed), the connection drop rules (now, after N
 * commands, once), clearing; and, on a real reactor with a mem namespace,
 * the hook in core_req_submit: an injected status, an injected latency
 * that delays the completion without holding the reactor, and nothing
 * injected once the rules are gone.
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

#include "core/fault.h"
#include "core/ns.h"
#include "core/req.h"
#include "core/stats.h"
#include "rt/reactor.h"

static char state_dir[256];
static struct core_ns *ns_a, *ns_b;
static struct core_host *host_i, *host_n;

static struct core_ns *mk(const char *name)
{
        struct core_ns_params p = {.name = name, .backend = "mem", .size_bytes = 4u << 20};
        struct core_ns *ns = NULL;
        char err[256];
        if (core_ns_create(&p, &ns, err, sizeof(err)))
                fail_msg("create %s: %s", name, err);
        return ns;
}

static int setup(void **st)
{
        (void)st;
        snprintf(state_dir, sizeof(state_dir), "/tmp/slate-test-fault-XXXXXX");
        if (!mkdtemp(state_dir))
                return -1;
        core_set_state_dir(state_dir);
        if (rt_init(1) || rt_start())
                return -1;
        ns_a = mk("fa");
        ns_b = mk("fb");
        host_i = core_host_get("iscsi", "iqn.2026-12.test:host");
        host_n = core_host_get("nvme", "nqn.2026-12.test:host");
        return ns_a && ns_b && host_i && host_n ? 0 : -1;
}

static int teardown(void **st)
{
        (void)st;
        core_fault_clear(0);
        rt_stop();
        rt_join();
        rt_fini();
        core_host_put(host_i);
        core_host_put(host_n);
        core_ns_shutdown_all();
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", state_dir);
        return system(cmd) == 0 ? 0 : -1;
}

static int clear_all(void **st)
{
        (void)st;
        core_fault_clear(0);
        return 0;
}

static uint32_t add(const struct core_fault_rule *r)
{
        uint32_t id = 0;
        char err[256] = "";
        int rc = core_fault_add(r, &id, err, sizeof(err));
        if (rc)
                fail_msg("core_fault_add: %d %s", rc, err);
        return id;
}

static int add_err(const struct core_fault_rule *r)
{
        uint32_t id = 0;
        char err[256] = "";
        int rc = core_fault_add(r, &id, err, sizeof(err));
        if (rc)
                assert_true(err[0] != '\0'); /* every refusal says why */
        return rc;
}

/* A request as the hook sees it (not submitted). */
static struct core_req mkreq(struct core_ns *ns, enum core_op op, uint64_t lba, uint32_t nlb,
                             struct core_host *h)
{
        struct core_req r;
        memset(&r, 0, sizeof(r));
        r.ns = ns;
        r.op = op;
        r.lba = lba;
        r.nlb = nlb;
        r.host = h;
        return r;
}

static bool hit(struct core_ns *ns, enum core_op op, uint64_t lba, uint32_t nlb,
                struct core_host *h, enum core_status *st, uint32_t *lat)
{
        struct core_req r = mkreq(ns, op, lba, nlb, h);
        enum core_status s;
        uint32_t l;
        bool ret = core_fault_io(&r, st ? st : &s, lat ? lat : &l);
        return ret;
}

static void test_parse(void **st)
{
        (void)st;
        char err[256];
        unsigned ops = 0;
        assert_int_equal(core_fault_parse_ops("read", &ops, err, sizeof(err)), 0);
        assert_int_equal(ops, 1u << CORE_OPC_READ);
        assert_int_equal(core_fault_parse_ops("write,flush", &ops, err, sizeof(err)), 0);
        assert_int_equal(ops, (1u << CORE_OPC_WRITE) | (1u << CORE_OPC_FLUSH));
        assert_int_equal(core_fault_parse_ops("ALL", &ops, err, sizeof(err)), 0);
        assert_int_equal(ops, CORE_FAULT_OPS_ALL);
        assert_int_equal(core_fault_parse_ops("read,", &ops, err, sizeof(err)), -EINVAL);
        assert_int_equal(core_fault_parse_ops("", &ops, err, sizeof(err)), -EINVAL);
        assert_int_equal(core_fault_parse_ops("reads", &ops, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "reads"));

        enum core_status s = CORE_OK;
        assert_int_equal(core_fault_parse_status("medium-error", &s, err, sizeof(err)), 0);
        assert_int_equal(s, CORE_E_MEDIUM_ERROR);
        assert_int_equal(core_fault_parse_status("Not_Ready", &s, err, sizeof(err)), 0);
        assert_int_equal(s, CORE_E_NOT_READY);
        assert_int_equal(core_fault_parse_status("internal-error", &s, err, sizeof(err)), 0);
        assert_int_equal(s, CORE_E_INTERNAL);
        assert_int_equal(core_fault_parse_status("ok", &s, err, sizeof(err)), -EINVAL);
        assert_int_equal(core_fault_parse_status("medium", &s, err, sizeof(err)), -EINVAL);
        assert_int_equal(core_fault_parse_status("", &s, err, sizeof(err)), -EINVAL);
}

static void test_validation(void **st)
{
        (void)st;
        struct core_fault_rule r;
        core_fault_rule_init(&r);
        assert_int_equal(add_err(&r), -EINVAL); /* does nothing */
        r.status = CORE_E_ABORTED;
        r.lba_first = 10;
        r.lba_last = 9;
        assert_int_equal(add_err(&r), -EINVAL);
        core_fault_rule_init(&r);
        r.status = CORE_E_ABORTED;
        r.per_mille = 1001;
        assert_int_equal(add_err(&r), -EINVAL);
        r.per_mille = 500;
        r.every = 3;
        assert_int_equal(add_err(&r), -EINVAL);
        core_fault_rule_init(&r);
        r.latency_us = CORE_FAULT_MAX_LATENCY_US + 1;
        assert_int_equal(add_err(&r), -EINVAL);
        core_fault_rule_init(&r);
        r.status = CORE_E_ABORTED;
        r.after = 2; /* connection field on an I/O rule */
        assert_int_equal(add_err(&r), -EINVAL);
        core_fault_rule_init(&r);
        r.status = CORE_E_ABORTED;
        snprintf(r.transport, sizeof(r.transport), "fc");
        assert_int_equal(add_err(&r), -EINVAL);
        core_fault_rule_init(&r);
        r.drop = true;
        r.status = CORE_E_ABORTED;
        assert_int_equal(add_err(&r), -EINVAL);
        core_fault_rule_init(&r);
        r.drop = true;
        snprintf(r.ns, sizeof(r.ns), "fa");
        assert_int_equal(add_err(&r), -EINVAL);
        assert_false(core_fault_on()); /* nothing was added */

        /* The table is bounded. */
        core_fault_rule_init(&r);
        r.latency_us = 1;
        snprintf(r.ns, sizeof(r.ns), "none");
        for (int i = 0; i < CORE_FAULT_MAX_RULES; i++)
                add(&r);
        assert_int_equal(add_err(&r), -ENOSPC);
        assert_true(core_fault_on());
        assert_int_equal(core_fault_clear(0), CORE_FAULT_MAX_RULES);
        assert_false(core_fault_on());
        assert_int_equal(core_fault_clear(12345), -ENOENT);
}

static void test_match(void **st)
{
        (void)st;
        struct core_fault_rule r;
        core_fault_rule_init(&r);
        snprintf(r.ns, sizeof(r.ns), "fa");
        r.ops = 1u << CORE_OPC_READ;
        r.lba_first = 100;
        r.lba_last = 199;
        r.status = CORE_E_MEDIUM_ERROR;
        snprintf(r.transport, sizeof(r.transport), "iscsi");
        add(&r);
        enum core_status s;
        uint32_t lat;
        assert_true(hit(ns_a, CORE_OP_READ, 100, 1, host_i, &s, &lat));
        assert_int_equal(s, CORE_E_MEDIUM_ERROR);
        assert_int_equal(lat, 0);
        assert_true(hit(ns_a, CORE_OP_READ, 90, 11, host_i, NULL, NULL));   /* overlaps 100 */
        assert_true(hit(ns_a, CORE_OP_READ, 199, 8, host_i, NULL, NULL));   /* overlaps 199 */
        assert_false(hit(ns_a, CORE_OP_READ, 90, 10, host_i, NULL, NULL));  /* ends at 99 */
        assert_false(hit(ns_a, CORE_OP_READ, 200, 1, host_i, NULL, NULL));  /* past the range */
        assert_false(hit(ns_a, CORE_OP_WRITE, 150, 1, host_i, NULL, NULL)); /* not a read */
        assert_false(hit(ns_a, CORE_OP_FLUSH, 0, 0, host_i, NULL, NULL));   /* ranged rule */
        assert_false(hit(ns_b, CORE_OP_READ, 150, 1, host_i, NULL, NULL));  /* other namespace */
        assert_false(hit(ns_a, CORE_OP_READ, 150, 1, host_n, NULL, NULL));  /* other transport */
        assert_false(hit(ns_a, CORE_OP_READ, 150, 1, NULL, NULL, NULL));    /* the core's own */
        core_fault_clear(0);

        /* By host name; latency and status from two rules combine. */
        core_fault_rule_init(&r);
        snprintf(r.host, sizeof(r.host), "nqn.2026-12.test:host");
        r.latency_us = 700;
        add(&r);
        core_fault_rule_init(&r);
        r.ops = 1u << CORE_OPC_FLUSH;
        r.status = CORE_E_WRITE_ERROR;
        r.latency_us = 300;
        add(&r);
        assert_true(hit(ns_b, CORE_OP_FLUSH, 0, 0, host_n, &s, &lat));
        assert_int_equal(s, CORE_E_WRITE_ERROR);
        assert_int_equal(lat, 700);
        assert_true(hit(ns_b, CORE_OP_READ, 5, 1, host_n, &s, &lat));
        assert_int_equal(s, CORE_OK);
        assert_int_equal(lat, 700);
        assert_false(hit(ns_b, CORE_OP_READ, 5, 1, host_i, NULL, NULL));
        assert_true(hit(ns_b, CORE_OP_FLUSH, 0, 0, host_i, &s, &lat));
        assert_int_equal(lat, 300);
}

struct seen {
        uint64_t seen, hits;
        bool armed;
        unsigned n;
};

static void grab(const struct core_fault_rule *r, void *arg)
{
        struct seen *s = arg;
        s->seen = r->seen;
        s->hits = r->hits;
        s->armed = r->armed;
        s->n++;
}

static struct seen one_rule(void)
{
        struct seen s = {0};
        core_fault_foreach(grab, &s);
        assert_int_equal(s.n, 1);
        return s;
}

static void test_patterns(void **st)
{
        (void)st;
        struct core_fault_rule r;
        /* Every 3rd. */
        core_fault_rule_init(&r);
        r.status = CORE_E_ABORTED;
        r.every = 3;
        add(&r);
        for (int i = 1; i <= 9; i++)
                assert_int_equal(hit(ns_a, CORE_OP_WRITE, 0, 1, host_i, NULL, NULL), i % 3 == 0);
        struct seen s = one_rule();
        assert_int_equal(s.seen, 9);
        assert_int_equal(s.hits, 3);
        core_fault_clear(0);

        /* The next 2, then disarmed. */
        core_fault_rule_init(&r);
        r.status = CORE_E_NOT_READY;
        r.count = 2;
        add(&r);
        assert_true(hit(ns_a, CORE_OP_READ, 0, 1, host_i, NULL, NULL));
        assert_true(hit(ns_a, CORE_OP_READ, 0, 1, host_i, NULL, NULL));
        assert_false(hit(ns_a, CORE_OP_READ, 0, 1, host_i, NULL, NULL));
        s = one_rule();
        assert_false(s.armed);
        assert_int_equal(s.hits, 2);
        assert_true(core_fault_on()); /* listed until cleared */
        core_fault_clear(0);

        /* A fraction: some and not all of 1000, the same ones again with the same seed. */
        bool first[1000];
        unsigned n1 = 0, n2 = 0, differ = 0;
        core_fault_rule_init(&r);
        r.status = CORE_E_MEDIUM_ERROR;
        r.per_mille = 250;
        r.seed = 42;
        add(&r);
        for (int i = 0; i < 1000; i++)
                n1 += first[i] = hit(ns_a, CORE_OP_READ, (uint64_t)i, 1, host_i, NULL, NULL);
        assert_int_equal(one_rule().hits, n1);
        core_fault_clear(0);
        add(&r);
        for (int i = 0; i < 1000; i++) {
                bool h = hit(ns_a, CORE_OP_READ, (uint64_t)i, 1, host_i, NULL, NULL);
                n2 += h;
                differ += h != first[i];
        }
        assert_true(n1 > 0 && n1 < 1000);
        assert_int_equal(n1, n2);
        assert_int_equal(differ, 0);
        core_fault_clear(0);
        /* per mille 0 never fires; a different seed gives a different sequence. */
        r.per_mille = 0;
        add(&r);
        for (int i = 0; i < 100; i++)
                assert_false(hit(ns_a, CORE_OP_READ, 0, 1, host_i, NULL, NULL));
        assert_int_equal(one_rule().seen, 100);
        core_fault_clear(0);
        r.per_mille = 250;
        r.seed = 43;
        add(&r);
        differ = 0;
        for (int i = 0; i < 1000; i++)
                differ += hit(ns_a, CORE_OP_READ, (uint64_t)i, 1, host_i, NULL, NULL) != first[i];
        assert_true(differ > 0);
}

static void test_conn(void **st)
{
        (void)st;
        struct core_fault_rule r;
        const char *ih = "iqn.2026-12.test:host";
        /* Now: the next PDU of a matching connection, once. */
        core_fault_rule_init(&r);
        r.drop = true;
        r.count = 1;
        snprintf(r.transport, sizeof(r.transport), "iscsi");
        add(&r);
        assert_false(core_fault_conn_pdu("nvme", "nqn.x", "127.0.0.1:1", false));
        assert_true(core_fault_conn_pdu("iscsi", ih, "127.0.0.1:1", false));
        assert_false(core_fault_conn_pdu("iscsi", ih, "127.0.0.1:1", true)); /* disarmed */
        /* I/O rules never drop; drop rules never fail I/O. */
        assert_false(hit(ns_a, CORE_OP_READ, 0, 1, host_i, NULL, NULL));
        core_fault_clear(0);

        /* After 2 commands (other PDUs do not count), by host and peer address. */
        core_fault_rule_init(&r);
        r.drop = true;
        r.after = 2;
        r.count = 2;
        snprintf(r.host, sizeof(r.host), "%s", ih);
        snprintf(r.peer, sizeof(r.peer), "10.0.0.1");
        add(&r);
        assert_false(core_fault_conn_pdu("iscsi", ih, "10.0.0.1:5000", true));
        assert_false(core_fault_conn_pdu("iscsi", ih, "10.0.0.1:5000", false));
        assert_false(core_fault_conn_pdu("iscsi", ih, "10.0.0.10:5000", true)); /* other peer */
        assert_false(core_fault_conn_pdu("iscsi", "iqn.other", "10.0.0.1:5000", true));
        assert_false(core_fault_conn_pdu("iscsi", ih, "10.0.0.1:5000", true));
        assert_true(core_fault_conn_pdu("iscsi", ih, "10.0.0.1:5000", true));
        /* The reconnected host gets 2 commands again, then the rule is spent. */
        assert_false(core_fault_conn_pdu("iscsi", ih, "10.0.0.1:5001", true));
        assert_false(core_fault_conn_pdu("iscsi", ih, "10.0.0.1:5001", true));
        assert_true(core_fault_conn_pdu("iscsi", ih, "10.0.0.1:5001", true));
        for (int i = 0; i < 10; i++)
                assert_false(core_fault_conn_pdu("iscsi", ih, "10.0.0.1:5002", true));
        struct seen s = one_rule();
        assert_int_equal(s.hits, 2);
        assert_false(s.armed);
}

/* ---- The hook in core_req_submit, on the reactor ---- */

struct sync_req {
        struct core_req req;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool done;
        uint64_t t_done;
};

static void on_done(struct core_req *req)
{
        struct sync_req *s = req->cb_arg;
        pthread_mutex_lock(&s->lock);
        s->t_done = rt_now_ns();
        s->done = true;
        pthread_cond_signal(&s->cond);
        pthread_mutex_unlock(&s->lock);
}

static void submit_fn(void *arg)
{
        core_req_submit(&((struct sync_req *)arg)->req);
}

static uint8_t buf_slow[512], buf_fast[512];

static void prep(struct sync_req *s, struct core_ns *ns, struct core_host *h, void *buf)
{
        memset(s, 0, sizeof(*s));
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->cond, NULL);
        core_req_init(&s->req, ns, CORE_OP_READ, 0, 1, 0, rt_get(0), on_done, s);
        s->req.host = h;
        s->req.iov[0].iov_base = buf;
        s->req.iov[0].iov_len = 512;
        s->req.iovcnt = 1;
}

static void start(struct sync_req *s, struct core_ns *ns, struct core_host *h, void *buf)
{
        prep(s, ns, h, buf);
        rt_msg_send(rt_get(0), submit_fn, s);
}

static struct sync_req *pair[2];

/* Both submitted in one reactor turn, pair[0] first. */
static void submit_pair(void *arg)
{
        (void)arg;
        core_req_submit(&pair[0]->req);
        core_req_submit(&pair[1]->req);
}

static void wait_done(struct sync_req *s)
{
        pthread_mutex_lock(&s->lock);
        while (!s->done)
                pthread_cond_wait(&s->cond, &s->lock);
        pthread_mutex_unlock(&s->lock);
}

static void test_submit(void **st)
{
        (void)st;
        struct core_fault_rule r;
        struct sync_req a, b;
        /* A status, through the whole request path. */
        core_fault_rule_init(&r);
        snprintf(r.ns, sizeof(r.ns), "fa");
        r.status = CORE_E_MEDIUM_ERROR;
        r.count = 1;
        add(&r);
        start(&a, ns_a, host_i, buf_slow);
        wait_done(&a);
        assert_int_equal(a.req.status, CORE_E_MEDIUM_ERROR);
        start(&a, ns_a, host_i, buf_slow);
        wait_done(&a);
        assert_int_equal(a.req.status, CORE_OK);
        core_fault_clear(0);

        /*
         * 200 ms for one host on the only reactor: another host's read,
         * submitted after it, completes first (the reactor is not held),
         * and the delayed one completes no earlier than 200 ms after submission.
         */
        core_fault_rule_init(&r);
        snprintf(r.host, sizeof(r.host), "iqn.2026-12.test:host");
        r.latency_us = 200000;
        r.status = CORE_E_ABORTED;
        add(&r);
        prep(&a, ns_a, host_i, buf_slow);
        prep(&b, ns_a, host_n, buf_fast);
        pair[0] = &a;
        pair[1] = &b;
        uint64_t t0 = rt_now_ns();
        rt_msg_send(rt_get(0), submit_pair, NULL);
        wait_done(&b);
        assert_int_equal(b.req.status, CORE_OK);
        wait_done(&a);
        assert_int_equal(a.req.status, CORE_E_ABORTED);
        assert_true(a.t_done - t0 >= 200000000ull);
        assert_true(a.t_done > b.t_done);
        core_fault_clear(0);
        start(&a, ns_a, host_i, buf_slow);
        wait_done(&a);
        assert_int_equal(a.req.status, CORE_OK);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup(test_parse, clear_all),
            cmocka_unit_test_setup(test_validation, clear_all),
            cmocka_unit_test_setup(test_match, clear_all),
            cmocka_unit_test_setup(test_patterns, clear_all),
            cmocka_unit_test_setup(test_conn, clear_all),
            cmocka_unit_test_setup(test_submit, clear_all),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
