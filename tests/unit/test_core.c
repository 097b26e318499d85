/*
 * Block core and backends on a real reactor: read/write round trips,
 * compare/compare-and-write/orwrite/write-same semantics, range and write
 * protection checks, the persistent identity surviving a reopen, the
 * write-protect reasons' lifetimes (until power cycle: not persisted;
 * permanent: persisted, never cleared) and runtime resize of every backend
 * (grow, the shrink rule, the range check after each, the capacity event).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <jansson.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "core_fixture.h"
#include "rt/crc.h"
#include "core/ns.h"
#include "core/req.h"
#include "rt/reactor.h"

struct sync_req {
        struct core_req req;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool done;
        bool cb_inline;
        bool in_submit;
};

static void on_done(struct core_req *req)
{
        struct sync_req *s = req->cb_arg;
        pthread_mutex_lock(&s->lock);
        s->cb_inline = s->in_submit;
        s->done = true;
        pthread_cond_signal(&s->cond);
        pthread_mutex_unlock(&s->lock);
}

static void submit_fn(void *arg)
{
        struct sync_req *s = arg;
        s->in_submit = true;
        core_req_submit(&s->req);
        s->in_submit = false;
}

/* Runs one request on reactor 0 and waits for its completion. */
static uint32_t next_flags; /* CORE_REQ_* for the next run_req */

static enum core_status run_req(struct core_ns *ns, enum core_op op, uint64_t lba, uint32_t nlb,
                                void *buf, size_t len, void *scratch, size_t scratch_len,
                                uint64_t *info)
{
        struct sync_req s;
        memset(&s, 0, sizeof(s));
        pthread_mutex_init(&s.lock, NULL);
        pthread_cond_init(&s.cond, NULL);
        s.req.ns = ns;
        s.req.op = op;
        s.req.lba = lba;
        s.req.nlb = nlb;
        s.req.flags = next_flags;
        next_flags = 0;
        s.req.iov[0].iov_base = buf;
        s.req.iov[0].iov_len = len;
        s.req.iovcnt = buf ? 1 : 0;
        s.req.scratch = scratch;
        s.req.scratch_len = (uint32_t)scratch_len;
        s.req.reactor = rt_get(0);
        s.req.cb = on_done;
        s.req.cb_arg = &s;
        rt_msg_send(rt_get(0), submit_fn, &s);
        pthread_mutex_lock(&s.lock);
        while (!s.done)
                pthread_cond_wait(&s.cond, &s.lock);
        pthread_mutex_unlock(&s.lock);
        assert_false(s.cb_inline); /* the async contract: never from inside submit */
        if (info)
                *info = s.req.info;
        return s.req.status;
}

/* DEALLOCATE with CORE_REQ_ANCHOR (SCSI: WRITE SAME/UNMAP with ANCHOR). */
static enum core_status run_anchor(struct core_ns *ns, uint64_t lba, uint32_t nlb)
{
        next_flags = CORE_REQ_ANCHOR;
        return run_req(ns, CORE_OP_DEALLOCATE, lba, nlb, NULL, 0, NULL, 0, NULL);
}

static char state_dir[256];

static int setup(void **st)
{
        (void)st;
        if (core_fixture_up(state_dir, sizeof(state_dir), "core", 1))
                return -1;
        return 0;
}

static int teardown(void **st)
{
        (void)st;
        return core_fixture_down(state_dir);
}

static struct core_ns *mk(const char *name, const char *backend)
{
        struct core_ns_params p = {
            .name = name, .backend = backend, .size_bytes = 1 << 20, .thin = true};
        struct core_ns *ns = NULL;
        char err[256];
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        return ns;
}

static void check_rw(struct core_ns *ns)
{
        static uint8_t w[8192], r[8192], scratch[1 << 16];
        for (size_t i = 0; i < sizeof(w); i++)
                w[i] = (uint8_t)(i * 7 + 3);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 10, 16, w, 8192, NULL, 0, NULL), CORE_OK);
        memset(r, 0, sizeof(r));
        assert_int_equal(run_req(ns, CORE_OP_READ, 10, 16, r, 8192, NULL, 0, NULL), CORE_OK);
        assert_memory_equal(w, r, 8192);

        /* COMPARE: equal, then a mismatch at byte 700 reports that offset. */
        assert_int_equal(
            run_req(ns, CORE_OP_COMPARE, 10, 2, w, 1024, scratch, sizeof(scratch), NULL), CORE_OK);
        uint8_t c[1024];
        memcpy(c, w, 1024);
        c[700] ^= 1;
        uint64_t info = 0;
        assert_int_equal(
            run_req(ns, CORE_OP_COMPARE, 10, 2, c, 1024, scratch, sizeof(scratch), &info),
            CORE_E_MISCOMPARE);
        assert_int_equal(info, 700);
        /*
         * COMPARE with a scratch buffer of one block: the medium is read and
         * compared piece by piece; a mismatch in the 12th block reports its
         * offset in the whole transfer; less than a block of scratch is refused.
         */
        static uint8_t c16[8192];
        memcpy(c16, w, sizeof(c16));
        assert_int_equal(run_req(ns, CORE_OP_COMPARE, 10, 16, c16, 8192, scratch, 512, NULL),
                         CORE_OK);
        c16[11 * 512 + 5] ^= 0x80;
        info = 0;
        assert_int_equal(run_req(ns, CORE_OP_COMPARE, 10, 16, c16, 8192, scratch, 512, &info),
                         CORE_E_MISCOMPARE);
        assert_int_equal(info, 11 * 512 + 5);
        assert_int_equal(run_req(ns, CORE_OP_COMPARE, 10, 16, c16, 8192, scratch, 511, NULL),
                         CORE_E_INTERNAL);

        /* COMPARE AND WRITE: writes only when the compare half matches. */
        uint8_t caw[1024];
        memcpy(caw, w, 512);
        memset(caw + 512, 0xAB, 512);
        assert_int_equal(run_req(ns, CORE_OP_COMPARE_AND_WRITE, 10, 1, caw, 1024, scratch,
                                 sizeof(scratch), NULL),
                         CORE_OK);
        assert_int_equal(run_req(ns, CORE_OP_READ, 10, 1, r, 512, NULL, 0, NULL), CORE_OK);
        assert_int_equal(r[0], 0xAB);
        assert_int_equal(run_req(ns, CORE_OP_COMPARE_AND_WRITE, 10, 1, caw, 1024, scratch,
                                 sizeof(scratch), &info),
                         CORE_E_MISCOMPARE);

        /* ORWRITE */
        uint8_t o[512];
        memset(o, 0x04, sizeof(o));
        assert_int_equal(
            run_req(ns, CORE_OP_ORWRITE, 10, 1, o, 512, scratch, sizeof(scratch), NULL), CORE_OK);
        assert_int_equal(run_req(ns, CORE_OP_READ, 10, 1, r, 512, NULL, 0, NULL), CORE_OK);
        assert_int_equal(r[100], 0xAF);

        /* WRITE SAME with a pattern larger than one scratch chunk, and with zeroes. */
        uint8_t blk[512];
        memset(blk, 0x5C, sizeof(blk));
        assert_int_equal(run_req(ns, CORE_OP_WRITE_SAME, 100, 300, blk, 512, scratch, 4096, NULL),
                         CORE_OK);
        static uint8_t big[300 * 512];
        assert_int_equal(run_req(ns, CORE_OP_READ, 100, 300, big, sizeof(big), NULL, 0, NULL),
                         CORE_OK);
        for (size_t i = 0; i < sizeof(big); i++)
                if (big[i] != 0x5C)
                        fail_msg("write same byte %zu = %x", i, big[i]);
        memset(blk, 0, sizeof(blk));
        assert_int_equal(run_req(ns, CORE_OP_WRITE_SAME, 100, 8, blk, 512, scratch, 4096, NULL),
                         CORE_OK);
        assert_int_equal(run_req(ns, CORE_OP_READ, 100, 9, big, 9 * 512, NULL, 0, NULL), CORE_OK);
        assert_int_equal(big[0], 0);
        assert_int_equal(big[8 * 512 - 1], 0);
        assert_int_equal(big[8 * 512], 0x5C);

        assert_int_equal(run_req(ns, CORE_OP_FLUSH, 0, 0, NULL, 0, NULL, 0, NULL), CORE_OK);
}

static void test_mem(void **st)
{
        (void)st;
        check_rw(mk("m0", "mem"));
}

static void test_file(void **st)
{
        (void)st;
        check_rw(mk("f0", "file"));
}

static void test_range_and_wp(void **st)
{
        (void)st;
        struct core_ns *ns = mk("m1", "mem");
        uint8_t b[512];
        uint64_t last = core_ns_blocks(ns) - 1;
        assert_int_equal(run_req(ns, CORE_OP_READ, last, 1, b, 512, NULL, 0, NULL), CORE_OK);
        assert_int_equal(run_req(ns, CORE_OP_READ, last, 2, b, 1024, NULL, 0, NULL),
                         CORE_E_LBA_RANGE);
        /* lba + nlb wrapping around 2^64 must not pass the range check. */
        assert_int_equal(run_req(ns, CORE_OP_READ, UINT64_MAX - 1, 4, b, 2048, NULL, 0, NULL),
                         CORE_E_LBA_RANGE);
        core_ns_set_wp(ns, CORE_WP_CONFIG, true, NULL);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 0, 1, b, 512, NULL, 0, NULL),
                         CORE_E_WRITE_PROTECT);
        assert_int_equal(run_req(ns, CORE_OP_READ, 0, 1, b, 512, NULL, 0, NULL), CORE_OK);
        core_ns_set_wp(ns, CORE_WP_CONFIG, false, NULL);
}

/* Every event the core publishes, recorded by a listener. */
static struct core_ns_event events[32];
static unsigned nevents;

static void record(const struct core_ns_event *ev, void *arg)
{
        (void)arg;
        if (nevents < 32)
                events[nevents] = *ev;
        nevents++;
}

/*
 * The namespace's state (core/state.c): one rule set for every request,
 * one event per change, none for a change that changes nothing.
 */
static void test_state_and_events(void **st)
{
        (void)st;
        static bool listening;
        struct core_ns *ns = mk("m2", "mem");
        uint8_t b[512] = {0}, pat[512];
        int who;
        memset(pat, 0xa5, sizeof(pat));
        if (!listening) {
                assert_int_equal(core_ns_listen(record, NULL), 0);
                listening = true;
        }
        nevents = 0;

        /* Write protection: reasons add up; SOFTWARE alone is the host's. */
        core_ns_set_wp(ns, CORE_WP_SOFTWARE, true, &who);
        assert_int_equal(nevents, 1);
        assert_int_equal(events[0].type, CORE_NS_EV_WRITE_PROTECT);
        assert_ptr_equal(events[0].origin, &who);
        assert_int_equal(events[0].old_val, 0);
        assert_int_equal(events[0].new_val, CORE_WP_SOFTWARE);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 0, 1, b, 512, NULL, 0, NULL),
                         CORE_E_WRITE_PROTECT_SOFTWARE);
        core_ns_set_wp(ns, CORE_WP_SOFTWARE, true, &who); /* no change, no event */
        assert_int_equal(nevents, 1);
        core_ns_set_wp(ns, CORE_WP_CONFIG, true, NULL);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 0, 1, b, 512, NULL, 0, NULL),
                         CORE_E_WRITE_PROTECT);
        core_ns_set_wp(ns, CORE_WP_CONFIG | CORE_WP_SOFTWARE, false, NULL);
        assert_int_equal(nevents, 3);
        assert_int_equal(core_ns_wp(ns), 0);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 0, 1, b, 512, NULL, 0, NULL), CORE_OK);
        /* Permanent write protection is never cleared. */
        core_ns_set_wp(ns, CORE_WP_PERMANENT, true, NULL);
        core_ns_set_wp(ns, CORE_WP_PERMANENT, false, NULL);
        assert_int_equal(core_ns_wp(ns), CORE_WP_PERMANENT);
        assert_int_equal(nevents, 4);
        ns->wp = 0; /* this test's namespace only */

        /* Ready state: stopped refuses every medium command, flush included. */
        core_ns_set_ready(ns, CORE_NS_STOPPED, NULL);
        assert_int_equal(events[4].type, CORE_NS_EV_READY);
        assert_int_equal(run_req(ns, CORE_OP_READ, 0, 1, b, 512, NULL, 0, NULL), CORE_E_NOT_READY);
        assert_int_equal(run_req(ns, CORE_OP_FLUSH, 0, 0, NULL, 0, NULL, 0, NULL),
                         CORE_E_NOT_READY);
        core_ns_set_ready(ns, CORE_NS_NO_MEDIUM, NULL);
        assert_int_equal(run_req(ns, CORE_OP_READ, 0, 1, b, 512, NULL, 0, NULL), CORE_E_NO_MEDIUM);
        core_ns_set_ready(ns, CORE_NS_READY, NULL);
        assert_int_equal(nevents, 7);
        assert_int_equal(events[6].old_val, CORE_NS_NO_MEDIUM);
        assert_int_equal(run_req(ns, CORE_OP_READ, 0, 1, b, 512, NULL, 0, NULL), CORE_OK);

        /* Sanitize: in progress refuses everything but its own requests. */
        assert_int_equal(core_ns_sanitize_begin(ns, NULL), 0);
        assert_int_equal(core_ns_sanitize_begin(ns, NULL), -EBUSY);
        assert_int_equal(run_req(ns, CORE_OP_READ, 0, 1, b, 512, NULL, 0, NULL),
                         CORE_E_SANITIZE_IN_PROGRESS);
        assert_int_equal(run_req(ns, CORE_OP_FLUSH, 0, 0, NULL, 0, NULL, 0, NULL),
                         CORE_E_SANITIZE_IN_PROGRESS);
        assert_int_equal(core_ns_check(ns, CORE_CHK_STARTED), CORE_OK);
        core_ns_sanitize_end(ns, false, false, NULL);
        assert_int_equal(events[nevents - 1].new_val, CORE_SAN_FAILED);
        /* Failure mode: medium access fails, a flush does not. */
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 0, 1, pat, 512, NULL, 0, NULL),
                         CORE_E_SANITIZE_FAILED);
        assert_int_equal(run_req(ns, CORE_OP_FLUSH, 0, 0, NULL, 0, NULL, 0, NULL), CORE_OK);
        assert_int_equal(core_ns_sanitize_exit_failure(ns, NULL), -EPERM);
        core_ns_sanitize_end(ns, false, true, NULL);
        assert_int_equal(core_ns_sanitize_exit_failure(ns, NULL), 0);
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_DONE);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 0, 1, pat, 512, NULL, 0, NULL), CORE_OK);

        /* The write cache: one event per change. */
        unsigned before = nevents;
        core_ns_set_wce(ns, false, NULL);
        core_ns_set_wce(ns, false, NULL);
        assert_int_equal(nevents, before + 1);
        assert_int_equal(events[before].type, CORE_NS_EV_WRITE_CACHE);
        core_ns_set_wce(ns, true, NULL);
        assert_int_equal(core_ns_delete("m2"), 0);
}

/* Data without its metadata is never silently a new disk: refused unless adopted. */
static void test_adopt_required(void **st)
{
        (void)st;
        struct core_ns *ns = mk("orphan", "file");
        uint8_t uuid[16], w[512], r[512];
        memcpy(uuid, ns->uuid, 16);
        memset(w, 0x5a, sizeof(w));
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 3, 1, w, 512, NULL, 0, NULL), CORE_OK);
        assert_int_equal(core_ns_delete("orphan"), 0);
        char meta[512], err[512];
        snprintf(meta, sizeof(meta), "%s/orphan.meta.json", state_dir);
        assert_int_equal(unlink(meta), 0); /* the identity is lost */

        struct core_ns_params p = {
            .name = "orphan", .backend = "file", .size_bytes = 1 << 20, .thin = true};
        ns = NULL;
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), -EEXIST);
        assert_null(ns);
        assert_non_null(strstr(err, "adopt=true"));
        assert_int_equal(access(meta, F_OK), -1); /* nothing was written */

        p.adopt = true;
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        assert_memory_not_equal(uuid, ns->uuid, 16); /* a new disk, said so */
        assert_int_equal(run_req(ns, CORE_OP_READ, 3, 1, r, 512, NULL, 0, NULL), CORE_OK);
        assert_memory_equal(w, r, 512); /* with the old data */
        assert_int_equal(core_ns_delete("orphan"), 0);

        /* An empty or missing data file needs no adoption. */
        p.adopt = false;
        assert_int_equal(unlink(meta), 0);
        char img[512];
        snprintf(img, sizeof(img), "%s/orphan.img", state_dir);
        assert_int_equal(truncate(img, 0), 0);
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        assert_int_equal(core_ns_delete("orphan"), 0);
}

static void test_identity_persists(void **st)
{
        (void)st;
        struct core_ns *ns = mk("persist", "file");
        uint8_t uuid[16];
        memcpy(uuid, ns->uuid, 16);
        uint64_t eui = ns->eui64;
        uint8_t w[512];
        memset(w, 0x77, sizeof(w));
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 5, 1, w, 512, NULL, 0, NULL), CORE_OK);
        assert_int_equal(core_ns_delete("persist"), 0);

        ns = mk("persist", "file");
        assert_memory_equal(uuid, ns->uuid, 16);
        assert_true(eui == ns->eui64);
        uint8_t r[512];
        assert_int_equal(run_req(ns, CORE_OP_READ, 5, 1, r, 512, NULL, 0, NULL), CORE_OK);
        assert_memory_equal(w, r, 512);

        /* A different namespace gets a different identity. */
        struct core_ns *other = mk("other", "file");
        assert_memory_not_equal(uuid, other->uuid, 16);
}

static void test_corrupt_meta_refused(void **st)
{
        (void)st;
        struct core_ns *ns = mk("corrupt", "file");
        char path[4096];
        snprintf(path, sizeof(path), "%s", ns->meta_path);
        assert_int_equal(core_ns_delete("corrupt"), 0);
        /* Flip one character of the stored UUID: the checksum must catch it. */
        FILE *f = fopen(path, "r+");
        assert_non_null(f);
        char text[8192];
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        text[n] = 0;
        char *u = strstr(text, "\"uuid\": \"");
        assert_non_null(u);
        u += 9;
        *u = *u == 'a' ? 'b' : 'a';
        rewind(f);
        fwrite(text, 1, n, f);
        fclose(f);
        struct core_ns_params p = {.name = "corrupt", .backend = "file", .size_bytes = 1 << 20};
        char err[256];
        assert_int_not_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        assert_non_null(strstr(err, "checksum"));
}

static void test_bad_params(void **st)
{
        (void)st;
        struct core_ns *ns;
        char err[256];
        struct core_ns_params p = {.name = "bad/name", .backend = "mem", .size_bytes = 1 << 20};
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), -EINVAL);
        p.name = "ok";
        p.backend = "tape";
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), -EINVAL);
        p.backend = "mem";
        p.block_size = 1000;
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), -EINVAL);
        p.block_size = 4096;
        p.size_bytes = 4096 + 512;
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), -EINVAL);
}

/* Core events seen by this test program (a listener like the personalities'). */
static _Atomic unsigned ev_count[CORE_NS_EV_MAX];
static _Atomic(const void *) ev_last_origin;
static void count_event(const struct core_ns_event *ev, void *arg)
{
        (void)arg;
        atomic_fetch_add(&ev_count[ev->type], 1);
        atomic_store(&ev_last_origin, ev->origin);
}
static void listen_once(void)
{
        static bool done;
        if (!done)
                assert_int_equal(core_ns_listen(count_event, NULL), 0);
        done = true;
}

/* Replace one member of a metadata file's body, with a valid checksum (as another run wrote it). */
static void rewrite_meta(const char *path, const char *key, json_t *val)
{
        json_t *top = json_load_file(path, 0, NULL);
        assert_non_null(top);
        json_t *body = json_object_get(top, "body");
        json_object_set_new(body, key, val);
        char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
        json_object_set_new(top, "crc32c", json_integer(rt_crc32c(text, strlen(text))));
        free(text);
        assert_int_equal(json_dump_file(top, path, JSON_SORT_KEYS), 0);
        json_decref(top);
}

static void test_wp_lifetimes(void **st)
{
        (void)st;
        listen_once();
        struct core_ns *ns = mk("wpl", "file");
        uint8_t b[512] = {0};
        unsigned wp_ev = atomic_load(&ev_count[CORE_NS_EV_WRITE_PROTECT]);
        int me;
        /* Until power cycle: nothing but a restart clears it, and a restart does. */
        assert_int_equal(core_ns_set_wp(ns, CORE_WP_POWER_CYCLE, true, &me), 0);
        assert_int_equal(atomic_load(&ev_count[CORE_NS_EV_WRITE_PROTECT]), wp_ev + 1);
        assert_ptr_equal(atomic_load(&ev_last_origin), &me);
        assert_int_equal(core_ns_set_wp(ns, CORE_WP_POWER_CYCLE, false, NULL), 0);
        assert_int_equal(core_ns_wp(ns), CORE_WP_POWER_CYCLE);
        assert_int_equal(atomic_load(&ev_count[CORE_NS_EV_WRITE_PROTECT]), wp_ev + 1);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 0, 1, b, 512, NULL, 0, NULL),
                         CORE_E_WRITE_PROTECT);
        /* Deleted and reopened within this run of the daemon: still protected. */
        assert_int_equal(core_ns_delete("wpl"), 0);
        ns = mk("wpl", "file");
        assert_int_equal(core_ns_wp(ns), CORE_WP_POWER_CYCLE);
        /* Metadata written by an earlier run (the "power cycle" happened): writable. */
        char meta[4096];
        snprintf(meta, sizeof(meta), "%s", ns->meta_path);
        assert_int_equal(core_ns_delete("wpl"), 0);
        rewrite_meta(meta, "wp_power_cycle_run", json_string("an-earlier-run"));
        ns = mk("wpl", "file");
        assert_int_equal(core_ns_wp(ns), 0);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 0, 1, b, 512, NULL, 0, NULL), CORE_OK);

        /* Permanent: persisted before it takes effect, never cleared, survives a restart. */
        assert_int_equal(core_ns_set_wp(ns, CORE_WP_SOFTWARE | CORE_WP_PERMANENT, true, NULL), 0);
        assert_int_equal(core_ns_set_wp(ns, ~0u, false, NULL), 0);
        assert_int_equal(core_ns_wp(ns), CORE_WP_PERMANENT);
        assert_int_equal(core_ns_delete("wpl"), 0);
        ns = mk("wpl", "file");
        assert_int_equal(core_ns_wp(ns), CORE_WP_PERMANENT);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 0, 1, b, 512, NULL, 0, NULL),
                         CORE_E_WRITE_PROTECT);
        assert_int_equal(run_req(ns, CORE_OP_READ, 0, 1, b, 512, NULL, 0, NULL), CORE_OK);
        /* A metadata file without the optional field (older) reopens writable. */
        struct core_ns *n2 = mk("wpl2", "file");
        assert_int_equal(core_ns_wp(n2), 0);
}

/* Grow, shrink rules and the range check after each, on one backend. */
static void check_resize(const char *name, const char *backend, bool data)
{
        listen_once();
        struct core_ns *ns = mk(name, backend); /* 1 MiB = 2048 blocks */
        static uint8_t w[512], r[512];
        char err[256];
        memset(w, 0x3c, sizeof(w));
        unsigned cap_ev = atomic_load(&ev_count[CORE_NS_EV_CAPACITY]);
        assert_int_equal(core_ns_blocks(ns), 2048);

        /* Grow: the new blocks are there, read zeroes, and the new end is checked. */
        assert_int_equal(core_ns_resize(ns, 6144, false, err, sizeof(err)), 0);
        assert_int_equal(core_ns_blocks(ns), 6144);
        assert_int_equal(ns->be.size_bytes, 6144 * 512);
        assert_int_equal(atomic_load(&ev_count[CORE_NS_EV_CAPACITY]), cap_ev + 1);
        assert_null(atomic_load(&ev_last_origin)); /* management: every host is told */
        memset(r, 0xff, sizeof(r));
        assert_int_equal(run_req(ns, CORE_OP_READ, 6143, 1, r, 512, NULL, 0, NULL), CORE_OK);
        if (data)
                assert_int_equal(r[0] | r[511], 0);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 6143, 1, w, 512, NULL, 0, NULL), CORE_OK);
        assert_int_equal(run_req(ns, CORE_OP_READ, 6143, 2, r, 512, NULL, 0, NULL),
                         CORE_E_LBA_RANGE);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 2048, 1, w, 512, NULL, 0, NULL), CORE_OK);
        /* Same size: nothing happens, nobody is told. */
        assert_int_equal(core_ns_resize(ns, 6144, false, err, sizeof(err)), 0);
        assert_int_equal(atomic_load(&ev_count[CORE_NS_EV_CAPACITY]), cap_ev + 1);

        /* Shrink: refused while a personality holds it, unless forced. */
        core_ns_get(ns); /* as an iSCSI LUN map or NVMe attachment does */
        assert_int_equal(core_ns_resize(ns, 2048, false, err, sizeof(err)), -EBUSY);
        assert_int_equal(core_ns_blocks(ns), 6144);
        assert_int_equal(core_ns_resize(ns, 4096, true, err, sizeof(err)), 0);
        core_ns_put(ns);
        assert_int_equal(core_ns_resize(ns, 2048, false, err, sizeof(err)), 0);
        assert_int_equal(core_ns_blocks(ns), 2048);
        assert_int_equal(atomic_load(&ev_count[CORE_NS_EV_CAPACITY]), cap_ev + 3);
        assert_int_equal(run_req(ns, CORE_OP_READ, 2048, 1, r, 512, NULL, 0, NULL),
                         CORE_E_LBA_RANGE);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 2047, 2, w, 1024, NULL, 0, NULL),
                         CORE_E_LBA_RANGE);
        /* Grown again, the blocks dropped by the shrink read as zeroes. */
        assert_int_equal(core_ns_resize(ns, 4096, false, err, sizeof(err)), 0);
        memset(r, 0xff, sizeof(r));
        assert_int_equal(run_req(ns, CORE_OP_READ, 2048, 1, r, 512, NULL, 0, NULL), CORE_OK);
        if (data)
                assert_int_equal(r[0] | r[511], 0);

        /* Nonsense sizes change nothing. */
        assert_int_equal(core_ns_resize(ns, 0, true, err, sizeof(err)), -EINVAL);
        assert_int_equal(core_ns_resize(ns, UINT64_MAX, true, err, sizeof(err)), -EINVAL);
        assert_int_equal(core_ns_blocks(ns), 4096);
}

static void test_resize_mem(void **st)
{
        (void)st;
        check_resize("rmem", "mem", true);
        /*
         * Beyond the machine's memory (16 PiB): refused before the backend
         * is asked (its own limit, the address space reserved at open, is
         * 64 GiB or more, beyond most test machines' memory), nothing moves.
         */
        struct core_ns *ns = core_ns_find("rmem");
        char err[256];
        assert_int_equal(core_ns_resize(ns, 1ull << 45, false, err, sizeof(err)), -ENOMEM);
        assert_non_null(strstr(err, "larger than this machine's memory"));
        assert_int_equal(core_ns_blocks(ns), 4096);
}

static void test_resize_null(void **st)
{
        (void)st;
        check_resize("rnull", "null", false);
        /* Not while a sanitize walks the blocks. */
        struct core_ns *ns = core_ns_find("rnull");
        char err[256];
        assert_int_equal(core_ns_sanitize_begin(ns, NULL), 0);
        assert_int_equal(core_ns_resize(ns, 8192, false, err, sizeof(err)), -EBUSY);
        core_ns_sanitize_end(ns, true, false, NULL);
        assert_int_equal(core_ns_resize(ns, 8192, false, err, sizeof(err)), 0);
}

static void test_resize_file(void **st)
{
        (void)st;
        check_resize("rfile", "file", true);
        struct core_ns *ns = core_ns_find("rfile");
        char err[256], path[4096];
        struct stat sb;
        assert_int_equal(core_ns_resize(ns, 10000, false, err, sizeof(err)), 0);
        snprintf(path, sizeof(path), "%s", ns->path);
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal(sb.st_size, 10000 * 512);
        /* The size is in the metadata: a reopen keeps it. */
        assert_int_equal(core_ns_delete("rfile"), 0);
        ns = mk("rfile", "file");
        assert_int_equal(core_ns_blocks(ns), 10000);
}

/* Thin provisioning: DEALLOCATE reads back zeroes, frees the file's blocks, and the map says so. */
static void check_dealloc(struct core_ns *ns, bool file)
{
        static uint8_t w[64 << 10], r[64 << 10];
        memset(w, 0x3C, sizeof(w));
        enum core_prov mapped;
        uint64_t n;
        if (file) { /* never written: one hole */
                assert_int_equal(core_ns_lba_status(ns, 0, 0, &mapped, &n), 0);
                assert_int_equal(mapped, CORE_PROV_DEALLOCATED);
                assert_int_equal(n, core_ns_blocks(ns));
        }
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 256, 128, w, sizeof(w), NULL, 0, NULL),
                         CORE_OK);
        assert_int_equal(run_req(ns, CORE_OP_FLUSH, 0, 0, NULL, 0, NULL, 0, NULL), CORE_OK);
        int64_t before = core_ns_allocated_bytes(ns);
        assert_int_equal(core_ns_lba_status(ns, 256, 128, &mapped, &n), 0);
        assert_int_equal(mapped, CORE_PROV_MAPPED);
        assert_int_equal(n, 128);
        /* Deallocate the middle 64 blocks (32 KiB, page and fs-block aligned). */
        assert_int_equal(run_req(ns, CORE_OP_DEALLOCATE, 288, 64, NULL, 0, NULL, 0, NULL), CORE_OK);
        assert_int_equal(run_req(ns, CORE_OP_READ, 256, 128, r, sizeof(r), NULL, 0, NULL), CORE_OK);
        for (size_t i = 0; i < sizeof(r); i++) {
                uint8_t want = i >= 32 * 512 && i < 96 * 512 ? 0 : 0x3C;
                if (r[i] != want)
                        fail_msg("byte %zu = %x, want %x", i, r[i], want);
        }
        assert_int_equal(core_ns_lba_status(ns, 256, 0, &mapped, &n), 0);
        assert_int_equal(mapped, CORE_PROV_MAPPED);
        if (file) {
                assert_int_equal(n, 32);
                assert_int_equal(core_ns_lba_status(ns, 288, 0, &mapped, &n), 0);
                assert_int_equal(mapped, CORE_PROV_DEALLOCATED);
                assert_int_equal(n, 64);
                assert_int_equal(core_ns_lba_status(ns, 352, 0, &mapped, &n), 0);
                assert_int_equal(mapped, CORE_PROV_MAPPED);
                assert_int_equal(n, 32);
                assert_true(core_ns_allocated_bytes(ns) <= before - (32 << 10));
        }
        assert_int_equal(core_ns_lba_status(ns, core_ns_blocks(ns), 1, &mapped, &n), -ERANGE);
        /* Out of range and write protection apply as to any write. */
        assert_int_equal(
            run_req(ns, CORE_OP_DEALLOCATE, core_ns_blocks(ns) - 1, 2, NULL, 0, NULL, 0, NULL),
            CORE_E_LBA_RANGE);
}

static void test_dealloc_file(void **st)
{
        (void)st;
        check_dealloc(mk("thinf", "file"), true);
}

static void test_dealloc_mem(void **st)
{
        (void)st;
        check_dealloc(mk("thinm", "mem"), true); /* mem keeps a real map too */
}

static uint64_t rss_bytes(void)
{
        unsigned long size = 0, resident = 0;
        FILE *f = fopen("/proc/self/statm", "r");
        assert_non_null(f);
        assert_int_equal(fscanf(f, "%lu %lu", &size, &resident), 2);
        fclose(f);
        return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/*
 * The mem backend's map and memory: reads of never-written blocks cost
 * nothing, writes allocate pages, deallocation returns them to the system
 * (the process's RSS drops) and the blocks read zeroes; a partial page
 * is zeroed but stays allocated.
 */
static void test_mem_map(void **st)
{
        (void)st;
        enum { MIB16 = 16 << 20 };
        static uint8_t buf[MIB16];
        struct core_ns_params p = {
            .name = "thinmm", .backend = "mem", .size_bytes = 32 << 20, .thin = true};
        struct core_ns *ns = NULL;
        char err[256];
        enum core_prov mapped;
        uint64_t n, pg = (uint64_t)sysconf(_SC_PAGESIZE);
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        assert_int_equal(core_ns_allocated_bytes(ns), 0);
        memset(buf, 0xee, sizeof(buf)); /* touch the buffer before measuring */
        uint64_t rss0 = rss_bytes();
        assert_int_equal(run_req(ns, CORE_OP_READ, 0, MIB16 / 512, buf, MIB16, NULL, 0, NULL),
                         CORE_OK);
        assert_int_equal(buf[0], 0);
        assert_int_equal(buf[MIB16 - 1], 0);
        assert_int_equal(core_ns_allocated_bytes(ns), 0);
        assert_true(rss_bytes() < rss0 + (4 << 20)); /* the zero page, not 16 MiB */
        assert_int_equal(core_ns_lba_status(ns, 0, 0, &mapped, &n), 0);
        assert_int_equal(mapped, CORE_PROV_DEALLOCATED);
        assert_int_equal(n, core_ns_blocks(ns));

        memset(buf, 0x77, sizeof(buf));
        uint64_t rss1 = rss_bytes();
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 0, MIB16 / 512, buf, MIB16, NULL, 0, NULL),
                         CORE_OK);
        uint64_t rss2 = rss_bytes();
        assert_int_equal(core_ns_allocated_bytes(ns), MIB16);
        assert_true(rss2 >= rss1 + (15 << 20));
        assert_int_equal(core_ns_lba_status(ns, 0, 0, &mapped, &n), 0);
        assert_int_equal(mapped, CORE_PROV_MAPPED);
        assert_int_equal(n, MIB16 / 512);
        assert_int_equal(core_ns_lba_status(ns, MIB16 / 512, 0, &mapped, &n), 0);
        assert_int_equal(mapped, CORE_PROV_DEALLOCATED);
        assert_int_equal(n, MIB16 / 512);
        /* A window shorter than the run is clipped to it. */
        assert_int_equal(core_ns_lba_status(ns, 100, 1000, &mapped, &n), 0);
        assert_int_equal(mapped, CORE_PROV_MAPPED);
        assert_int_equal(n, 1000);

        assert_int_equal(run_req(ns, CORE_OP_DEALLOCATE, 0, MIB16 / 512, NULL, 0, NULL, 0, NULL),
                         CORE_OK);
        uint64_t rss3 = rss_bytes();
        printf("mem backend RSS: %llu KiB, %llu KiB after writing 16 MiB, %llu KiB after "
               "deallocating it\n",
               (unsigned long long)(rss1 >> 10), (unsigned long long)(rss2 >> 10),
               (unsigned long long)(rss3 >> 10));
        assert_true(rss3 + (15 << 20) <= rss2);
        assert_int_equal(core_ns_allocated_bytes(ns), 0);
        assert_int_equal(run_req(ns, CORE_OP_READ, 0, MIB16 / 512, buf, MIB16, NULL, 0, NULL),
                         CORE_OK);
        for (size_t i = 0; i < sizeof(buf); i += 512)
                if (buf[i] || buf[i + 511])
                        fail_msg("deallocated byte %zu = %x", i, buf[i]);
        assert_int_equal(core_ns_lba_status(ns, 0, 0, &mapped, &n), 0);
        assert_int_equal(mapped, CORE_PROV_DEALLOCATED);
        assert_int_equal(n, core_ns_blocks(ns));

        /* One block in a page: the page is allocated; deallocating part of it zeroes in place. */
        memset(buf, 0x42, 1024);
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 1, 2, buf, 1024, NULL, 0, NULL), CORE_OK);
        assert_int_equal(core_ns_allocated_bytes(ns), (int64_t)pg);
        assert_int_equal(core_ns_lba_status(ns, 0, 0, &mapped, &n), 0);
        assert_int_equal(mapped, CORE_PROV_MAPPED);
        assert_int_equal(n, pg / 512);
        assert_int_equal(run_req(ns, CORE_OP_DEALLOCATE, 1, 1, NULL, 0, NULL, 0, NULL), CORE_OK);
        assert_int_equal(core_ns_allocated_bytes(ns), (int64_t)pg);
        assert_int_equal(run_req(ns, CORE_OP_READ, 0, 4, buf, 2048, NULL, 0, NULL), CORE_OK);
        assert_int_equal(buf[512], 0);
        assert_int_equal(buf[1024], 0x42);
        /* Shrinking drops the map past the end; growing back reads zeroes, unmapped. */
        assert_int_equal(core_ns_resize(ns, 4096, false, err, sizeof(err)), 0);
        assert_int_equal(core_ns_resize(ns, (32 << 20) / 512, false, err, sizeof(err)), 0);
        assert_int_equal(core_ns_allocated_bytes(ns), (int64_t)pg);
        assert_int_equal(core_ns_lba_status(ns, 4096, 0, &mapped, &n), 0);
        assert_int_equal(mapped, CORE_PROV_DEALLOCATED);
        assert_int_equal(core_ns_dealloc_granularity(ns), pg / 512);
}

/*
 * Anchoring (SBC-4 4.7.3.4): the space stays allocated and the blocks read
 * zeroes.  The file backend offers it on ext4 and xfs (unwritten extents,
 * told apart by FIEMAP), decided at open; mem cannot tell, so it refuses.
 */
static void test_anchor(void **st)
{
        (void)st;
        struct core_ns *ns = mk("anch", "file");
        struct statfs sfs;
        assert_int_equal(statfs(ns->path, &sfs), 0);
        bool expect = sfs.f_type == EXT4_SUPER_MAGIC || sfs.f_type == XFS_SUPER_MAGIC;
        assert_int_equal(core_ns_can_anchor(ns), expect);
        struct core_ns *m = mk("anchm", "mem");
        assert_false(core_ns_can_anchor(m));
        assert_int_equal(run_anchor(m, 0, 8), CORE_E_INVALID_FIELD);
        if (!expect) {
                print_message("state dir is not on ext4/xfs: anchoring not offered there\n");
                return;
        }
        uint8_t *w = aligned_alloc(4096, 32 << 10), *r = aligned_alloc(4096, 32 << 10);
        memset(w, 0x6B, 32 << 10);
        enum core_prov ps;
        uint64_t n;
        /* 64 blocks at LBA 512 (4 KiB aligned), on disk. */
        assert_int_equal(run_req(ns, CORE_OP_WRITE, 512, 64, w, 32 << 10, NULL, 0, NULL), CORE_OK);
        assert_int_equal(run_req(ns, CORE_OP_FLUSH, 0, 0, NULL, 0, NULL, 0, NULL), CORE_OK);
        int64_t before = core_ns_allocated_bytes(ns);
        /* Anchor blocks 528..543 (8 KiB). */
        assert_int_equal(run_anchor(ns, 528, 16), CORE_OK);
        assert_int_equal(core_ns_lba_status(ns, 512, 0, &ps, &n), 0);
        assert_int_equal(ps, CORE_PROV_MAPPED);
        assert_int_equal(n, 16);
        assert_int_equal(core_ns_lba_status(ns, 528, 0, &ps, &n), 0);
        assert_int_equal(ps, CORE_PROV_ANCHORED);
        assert_int_equal(n, 16);
        assert_int_equal(core_ns_lba_status(ns, 544, 0, &ps, &n), 0);
        assert_int_equal(ps, CORE_PROV_MAPPED);
        assert_int_equal(n, 32);
        assert_true(core_ns_allocated_bytes(ns) >= before); /* the space is kept */
        assert_int_equal(run_req(ns, CORE_OP_READ, 512, 64, r, 32 << 10, NULL, 0, NULL), CORE_OK);
        for (size_t i = 0; i < (32 << 10); i++) {
                uint8_t want = i >= 16 * 512 && i < 32 * 512 ? 0 : 0x6B;
                if (r[i] != want)
                        fail_msg("byte %zu = %x, want %x", i, r[i], want);
        }
        /* Deallocating anchored blocks gives the space back. */
        assert_int_equal(run_req(ns, CORE_OP_DEALLOCATE, 528, 16, NULL, 0, NULL, 0, NULL), CORE_OK);
        assert_int_equal(core_ns_lba_status(ns, 528, 0, &ps, &n), 0);
        assert_int_equal(ps, CORE_PROV_DEALLOCATED);
        assert_int_equal(n, 16);
        assert_true(core_ns_allocated_bytes(ns) <= before - (8 << 10));
        /* Anchoring deallocated blocks takes space for them. */
        int64_t a0 = core_ns_allocated_bytes(ns);
        assert_int_equal(run_anchor(ns, 1024, 16), CORE_OK);
        assert_int_equal(core_ns_lba_status(ns, 1024, 0, &ps, &n), 0);
        assert_int_equal(ps, CORE_PROV_ANCHORED);
        assert_int_equal(n, 16);
        assert_int_equal(core_ns_lba_status(ns, 1040, 0, &ps, &n), 0);
        assert_int_equal(ps, CORE_PROV_DEALLOCATED);
        assert_true(core_ns_allocated_bytes(ns) >= a0 + (8 << 10));
        /* Anchoring is a write: write protection applies. */
        assert_int_equal(core_ns_set_wp(ns, CORE_WP_CONFIG, true, NULL), 0);
        assert_int_equal(run_anchor(ns, 1024, 16), CORE_E_WRITE_PROTECT);
        assert_int_equal(core_ns_set_wp(ns, CORE_WP_CONFIG, false, NULL), 0);
        free(w);
        free(r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_mem),
            cmocka_unit_test(test_file),
            cmocka_unit_test(test_range_and_wp),
            cmocka_unit_test(test_state_and_events),
            cmocka_unit_test(test_identity_persists),
            cmocka_unit_test(test_adopt_required),
            cmocka_unit_test(test_corrupt_meta_refused),
            cmocka_unit_test(test_bad_params),
            cmocka_unit_test(test_wp_lifetimes),
            cmocka_unit_test(test_resize_mem),
            cmocka_unit_test(test_resize_null),
            cmocka_unit_test(test_resize_file),
            cmocka_unit_test(test_dealloc_file),
            cmocka_unit_test(test_dealloc_mem),
            cmocka_unit_test(test_mem_map),
            cmocka_unit_test(test_anchor),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
