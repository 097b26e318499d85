/*
 * The file backend's shared reservation state (backend/file_pr.c,
 * namespace option shared_reservations): two backends opened on one data
 * file as two gateways would, the versioned compare-and-store
 * (-ECANCELED for the one that stored second), the other gateway told
 * through inotify and the store waiting for its acknowledgement, a dead
 * gateway not waited for and its file removed, the state surviving a
 * reopen, and processes racing read-increment-store loops with no update
 * lost (what the lock makes atomic).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/file_pr.h"

static char dir[64], data[128];

static int setup(void **state)
{
        (void)state;
        snprintf(dir, sizeof(dir), "/tmp/slate-filepr-XXXXXX");
        assert_non_null(mkdtemp(dir));
        snprintf(data, sizeof(data), "%s/ns.img", dir);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        char cmd[160];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        return system(cmd) == 0 ? 0 : -1;
}

static void be_open(struct backend *be, void (*changed)(struct backend *))
{
        memset(be, 0, sizeof(*be));
        be->ops = &backend_file_ops;
        be->pr_changed = changed;
        struct backend_params p = {
            .path = data, .size_bytes = 1 << 20, .create = true, .shared_reservations = true};
        assert_int_equal(be->ops->open(be, &p), 0);
        assert_true(be->pr_shared);
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static unsigned ack_files(void)
{
        DIR *d = opendir(dir);
        unsigned n = 0;
        struct dirent *e;
        while (d && (e = readdir(d)))
                n += strstr(e->d_name, ".slate-pr.gw.") != NULL;
        if (d)
                closedir(d);
        return n;
}

/* Off by default: no sidecar, pr_load refuses, pr_shared stays clear. */
static void test_off_by_default(void **state)
{
        (void)state;
        struct backend be = {.ops = &backend_file_ops};
        struct backend_params p = {.path = data, .size_bytes = 1 << 20, .create = true};
        assert_int_equal(be.ops->open(&be, &p), 0);
        assert_false(be.pr_shared);
        char *t;
        uint64_t v;
        assert_int_equal(be.ops->pr_load(&be, &t, &v), -EOPNOTSUPP);
        be.ops->close(&be);
        assert_int_equal(ack_files(), 0);
}

static void test_compare_and_store(void **state)
{
        (void)state;
        struct backend a, b;
        be_open(&a, NULL);
        be_open(&b, NULL);
        char *t = (char *)1;
        uint64_t va = 7, vb = 7;
        assert_int_equal(a.ops->pr_load(&a, &t, &va), 0);
        assert_null(t);
        assert_int_equal(va, 0);
        assert_int_equal(b.ops->pr_load(&b, &t, &vb), 0);
        assert_int_equal(vb, 0);

        assert_int_equal(a.ops->pr_store(&a, "{\"from\":\"a\"}", &va), 0);
        assert_int_equal(va, 1);
        /* b read version 0: a stored in between, so b must read and apply again. */
        assert_int_equal(b.ops->pr_store(&b, "{\"from\":\"b\"}", &vb), -ECANCELED);
        assert_int_equal(vb, 0);
        assert_int_equal(b.ops->pr_load(&b, &t, &vb), 0);
        assert_int_equal(vb, 1);
        assert_string_equal(t, "{\"from\":\"a\"}");
        free(t);
        assert_int_equal(b.ops->pr_store(&b, "{\"from\":\"b\"}", &vb), 0);
        assert_int_equal(vb, 2);
        assert_int_equal(a.ops->pr_store(&a, "{}", &va), -ECANCELED);
        a.ops->close(&a);
        b.ops->close(&b);

        /* What was stored outlives both (a restart, a kill -9: it is a renamed, fsynced file). */
        be_open(&a, NULL);
        assert_int_equal(a.ops->pr_load(&a, &t, &va), 0);
        assert_int_equal(va, 2);
        assert_string_equal(t, "{\"from\":\"b\"}");
        free(t);
        a.ops->close(&a);
        assert_int_equal(ack_files(), 0);
}

static struct backend *slow_be;
static atomic_int changed_calls;
static atomic_ullong changed_version;

/* The other gateway's reload: slow on purpose, so the store's wait for it shows. */
static void slow_changed(struct backend *be)
{
        char *t;
        uint64_t v;
        usleep(300 * 1000);
        if (be->ops->pr_load(be, &t, &v) == 0) {
                atomic_store(&changed_version, v);
                free(t);
        }
        atomic_fetch_add(&changed_calls, 1);
}

static void test_told_and_acknowledged(void **state)
{
        (void)state;
        struct backend a, b;
        be_open(&a, NULL);
        be_open(&b, slow_changed);
        slow_be = &b;
        atomic_store(&changed_calls, 0);
        uint64_t v = 0;
        uint64_t t0 = now_ms();
        assert_int_equal(a.ops->pr_store(&a, "{\"x\":1}", &v), 0);
        uint64_t took = now_ms() - t0;
        /* The store returned only once b had reloaded the new version. */
        assert_int_equal(atomic_load(&changed_calls), 1);
        assert_int_equal(atomic_load(&changed_version), 1);
        assert_true(took >= 290);
        assert_true(took < FILE_PR_ACK_TIMEOUT_MS);
        b.ops->close(&b);
        a.ops->close(&a);
}

/* A gateway that died (its process gone, files left behind) is not waited for. */
static void test_dead_gateway(void **state)
{
        (void)state;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct backend c;
                be_open(&c, NULL);
                _exit(0); /* as kill -9: no close, the lock goes with the process */
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_int_equal(ack_files(), 1);
        struct backend a;
        be_open(&a, NULL); /* removes the dead one's file */
        assert_int_equal(ack_files(), 1);
        uint64_t v = 0, t0 = now_ms();
        char *t;
        assert_int_equal(a.ops->pr_load(&a, &t, &v), 0);
        free(t);
        assert_int_equal(a.ops->pr_store(&a, "{}", &v), 0);
        assert_true(now_ms() - t0 < 1000);
        a.ops->close(&a);
}

#define RACERS 4
#define ROUNDS 25

/* Processes each add one ROUNDS times through read, increment, store: no update may be lost. */
static void test_race(void **state)
{
        (void)state;
        pid_t pids[RACERS];
        for (int i = 0; i < RACERS; i++) {
                pids[i] = fork();
                assert_true(pids[i] >= 0);
                if (pids[i])
                        continue;
                struct backend be;
                be_open(&be, NULL);
                int bad = 0;
                for (int r = 0; r < ROUNDS && !bad; r++) {
                        for (;;) {
                                char *t, buf[32];
                                uint64_t v;
                                if (be.ops->pr_load(&be, &t, &v)) {
                                        bad = 1;
                                        break;
                                }
                                long n = t ? strtol(t, NULL, 10) : 0;
                                free(t);
                                snprintf(buf, sizeof(buf), "%ld", n + 1);
                                int rc = be.ops->pr_store(&be, buf, &v);
                                if (rc == 0)
                                        break;
                                if (rc != -ECANCELED) {
                                        bad = 1;
                                        break;
                                }
                        }
                }
                be.ops->close(&be);
                _exit(bad);
        }
        for (int i = 0; i < RACERS; i++) {
                int status;
                assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
                assert_true(WIFEXITED(status));
                assert_int_equal(WEXITSTATUS(status), 0);
        }
        struct backend a;
        be_open(&a, NULL);
        char *t;
        uint64_t v;
        assert_int_equal(a.ops->pr_load(&a, &t, &v), 0);
        assert_int_equal(v, RACERS * ROUNDS);
        assert_non_null(t);
        assert_int_equal(strtol(t, NULL, 10), RACERS * ROUNDS);
        free(t);
        a.ops->close(&a);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_off_by_default, setup, teardown),
            cmocka_unit_test_setup_teardown(test_compare_and_store, setup, teardown),
            cmocka_unit_test_setup_teardown(test_told_and_acknowledged, setup, teardown),
            cmocka_unit_test_setup_teardown(test_dead_gateway, setup, teardown),
            cmocka_unit_test_setup_teardown(test_race, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
