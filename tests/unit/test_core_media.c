/*
 * Failing media (core/media.c) on a real reactor and a file namespace:
 * the interleaved LBA-to-element mapping and each element's associated
 * capacity; marked ranges merging and splitting, reads/compares/verifies
 * of them failing with CORE_E_UNRECOVERED_READ at the first bad LBA while
 * their neighbours read, a write healing exactly the blocks it wrote; a
 * FAILED element making its stripes unreadable and unwritable
 * (CORE_E_WRITE_ERROR) and reported by core_ns_unrecoverable as untracked
 * until a scan; degraded elements still readable; events for every
 * change; offline depopulation shrinking the capacity by the element's
 * share (CORE_NS_EV_CAPACITY) and restore bringing it back; the counters;
 * every argument check; and all of it surviving a reopen.
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
#include "core/media.h"
#include "core/ns.h"
#include "core/req.h"
#include "rt/reactor.h"

#define BS    512u
#define NBLK  8192u /* 4 MiB */
#define IL    64u   /* interleave used by most tests */
#define NELEM 4u

struct sync_req {
        struct core_req req;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool done;
};

static void on_done(struct core_req *req)
{
        struct sync_req *s = req->cb_arg;
        pthread_mutex_lock(&s->lock);
        s->done = true;
        pthread_cond_signal(&s->cond);
        pthread_mutex_unlock(&s->lock);
}

static void submit_fn(void *arg)
{
        core_req_submit(&((struct sync_req *)arg)->req);
}

static uint8_t scratch[1 << 20];

/* Runs one request on reactor 0; returns its status, *info = req->info when info_valid. */
static enum core_status run_req(struct core_ns *ns, enum core_op op, uint64_t lba, uint32_t nlb,
                                void *buf, size_t len, int64_t *info)
{
        struct sync_req s;
        memset(&s, 0, sizeof(s));
        pthread_mutex_init(&s.lock, NULL);
        pthread_cond_init(&s.cond, NULL);
        core_req_init(&s.req, ns, op, lba, nlb, 0, rt_get(0), on_done, &s);
        s.req.iov[0].iov_base = buf;
        s.req.iov[0].iov_len = len;
        s.req.iovcnt = buf ? 1 : 0;
        s.req.scratch = scratch;
        s.req.scratch_len = sizeof(scratch);
        rt_msg_send(rt_get(0), submit_fn, &s);
        pthread_mutex_lock(&s.lock);
        while (!s.done)
                pthread_cond_wait(&s.cond, &s.lock);
        pthread_mutex_unlock(&s.lock);
        if (info)
                *info = s.req.info_valid ? (int64_t)s.req.info : -1;
        return s.req.status;
}

static uint8_t buf[256 * BS];

static enum core_status rd(struct core_ns *ns, uint64_t lba, uint32_t nlb, int64_t *info)
{
        return run_req(ns, CORE_OP_READ, lba, nlb, buf, (size_t)nlb * BS, info);
}

static enum core_status wr(struct core_ns *ns, uint64_t lba, uint32_t nlb, uint8_t fill)
{
        memset(buf, fill, (size_t)nlb * BS);
        return run_req(ns, CORE_OP_WRITE, lba, nlb, buf, (size_t)nlb * BS, NULL);
}

static char state_dir[256];
static _Atomic int n_media, n_capacity;
static _Atomic uint32_t last_media_bits;
static _Atomic(struct core_ns *) watched;

static void record(const struct core_ns_event *ev, void *arg)
{
        (void)arg;
        if (ev->ns != atomic_load(&watched))
                return;
        if (ev->type == CORE_NS_EV_MEDIA) {
                atomic_fetch_add(&n_media, 1);
                atomic_store(&last_media_bits, ev->new_val);
        }
        if (ev->type == CORE_NS_EV_CAPACITY)
                atomic_fetch_add(&n_capacity, 1);
}

static int setup(void **st)
{
        (void)st;
        if (core_fixture_up(state_dir, sizeof(state_dir), "media", 1))
                return -1;
        return core_ns_listen(record, NULL);
}

static int teardown(void **st)
{
        (void)st;
        return core_fixture_down(state_dir);
}

static struct core_ns *mk(const char *name, uint32_t elements, uint32_t il)
{
        struct core_ns_params p = {.name = name,
                                   .backend = "file",
                                   .size_bytes = (uint64_t)NBLK * BS,
                                   .block_size = BS,
                                   .thin = true,
                                   .elements_set = elements != UINT32_MAX,
                                   .elements = elements == UINT32_MAX ? 0 : elements,
                                   .element_interleave = il};
        struct core_ns *ns = NULL;
        char err[256];
        int rc = core_ns_create(&p, &ns, err, sizeof(err));
        if (rc)
                fail_msg("create %s: %s", name, err);
        atomic_store(&watched, ns);
        return ns;
}

static void reopen(struct core_ns **ns, const char *name)
{
        /* A heal's background save holds a reference until it is done. */
        int rc = -EBUSY;
        for (int i = 0; i < 10000 && rc == -EBUSY; i++)
                if ((rc = core_ns_delete(name)) == -EBUSY)
                        usleep(1000);
        assert_int_equal(rc, 0);
        *ns = mk(name, UINT32_MAX, 0); /* elements not given: the saved model */
}

/* Waits until the background save/publish of a heal has happened (count of media events). */
static void wait_media_events(int n)
{
        for (int i = 0; i < 5000 && atomic_load(&n_media) < n; i++)
                usleep(1000);
        assert_true(atomic_load(&n_media) >= n);
}

static void test_mapping(void **st)
{
        (void)st;
        struct core_ns *ns = mk("map", NELEM, IL);
        assert_int_equal(core_media_elements(ns), NELEM);
        assert_int_equal(core_media_interleave(ns), IL);
        /* Stripe unit u belongs to element u % 4 + 1. */
        assert_int_equal(core_media_lba_element(ns, 0), 1);
        assert_int_equal(core_media_lba_element(ns, IL - 1), 1);
        assert_int_equal(core_media_lba_element(ns, IL), 2);
        assert_int_equal(core_media_lba_element(ns, 3 * IL + 5), 4);
        assert_int_equal(core_media_lba_element(ns, 4 * IL), 1);
        assert_int_equal(core_media_lba_element(ns, NBLK), 0); /* beyond capacity */
        uint64_t sum = 0;
        for (uint32_t id = 1; id <= NELEM; id++) {
                struct core_elem_info ei;
                assert_int_equal(core_media_element_info(ns, id, &ei), 0);
                assert_int_equal(ei.id, id);
                assert_int_equal(ei.state, CORE_ELEM_OK);
                assert_int_equal(ei.health, CORE_ELEM_HEALTH_OK);
                assert_int_equal(ei.capacity_blocks, NBLK / NELEM);
                sum += ei.capacity_blocks;
        }
        assert_int_equal(sum, NBLK);
        struct core_elem_info ei;
        assert_int_equal(core_media_element_info(ns, 0, &ei), -ENOENT);
        assert_int_equal(core_media_element_info(ns, NELEM + 1, &ei), -ENOENT);
        /* Nothing bad: reads work and nothing is reported. */
        assert_int_equal(atomic_load(&ns->media_flags), 0);
        assert_int_equal(rd(ns, 0, 64, NULL), CORE_OK);
        struct core_lba_range r;
        assert_int_equal(core_ns_unrecoverable(ns, 0, NBLK, &r), 0);
        /* Configuration checks. */
        char err[256];
        assert_int_equal(core_media_configure(ns, 65, 0, err, sizeof(err)), -EINVAL);
        assert_int_equal(core_ns_delete("map"), 0);
}

static void test_marks(void **st)
{
        (void)st;
        struct core_ns *ns = mk("marks", 0, 0);
        assert_int_equal(wr(ns, 0, 64, 0xab), CORE_OK);
        int ev0 = atomic_load(&n_media);
        assert_int_equal(core_media_mark(ns, 10, 5, true, NULL), 0);
        assert_int_equal(atomic_load(&n_media), ev0 + 1);
        assert_int_equal(atomic_load(&last_media_bits), CORE_MEDIA_CHG_RANGES);
        /* Adjacent and overlapping marks merge into one range. */
        assert_int_equal(core_media_mark(ns, 15, 5, true, NULL), 0);
        assert_int_equal(core_media_mark(ns, 12, 2, true, NULL), 0);
        struct core_lba_range rs[4];
        assert_int_equal(core_media_ranges(ns, rs, 4), 1);
        assert_int_equal(rs[0].lba, 10);
        assert_int_equal(rs[0].nlb, 10);
        /* A mark inside changes nothing: no event. */
        int ev1 = atomic_load(&n_media);
        assert_int_equal(core_media_mark(ns, 11, 3, true, NULL), 0);
        assert_int_equal(atomic_load(&n_media), ev1);
        /* Clearing the middle splits it. */
        assert_int_equal(core_media_mark(ns, 14, 2, false, NULL), 0);
        assert_int_equal(core_media_ranges(ns, rs, 4), 2);
        assert_int_equal(rs[0].lba, 10);
        assert_int_equal(rs[0].nlb, 4);
        assert_int_equal(rs[1].lba, 16);
        assert_int_equal(rs[1].nlb, 4);
        /* core_ns_unrecoverable: the first run in the window, clipped to it. */
        struct core_lba_range r;
        assert_int_equal(core_ns_unrecoverable(ns, 0, NBLK, &r), 1);
        assert_int_equal(r.lba, 10);
        assert_int_equal(r.nlb, 4);
        assert_int_equal(core_ns_unrecoverable(ns, 12, 100, &r), 1);
        assert_int_equal(r.lba, 12);
        assert_int_equal(r.nlb, 2);
        assert_int_equal(core_ns_unrecoverable(ns, 14, 2, &r), 0);
        assert_int_equal(core_ns_unrecoverable(ns, 17, 1, &r), 1);
        assert_int_equal(r.lba, 17);
        assert_int_equal(r.nlb, 1);
        /* Reads: the bad ones fail at their first bad LBA; the others read the data. */
        int64_t info;
        assert_int_equal(rd(ns, 0, 10, &info), CORE_OK);
        assert_int_equal(buf[0], 0xab);
        assert_int_equal(rd(ns, 0, 11, &info), CORE_E_UNRECOVERED_READ);
        assert_int_equal(info, 10);
        assert_int_equal(rd(ns, 14, 4, &info), CORE_E_UNRECOVERED_READ);
        assert_int_equal(info, 16);
        assert_int_equal(rd(ns, 14, 2, &info), CORE_OK);
        assert_int_equal(run_req(ns, CORE_OP_VERIFY, 8, 8, NULL, 0, &info),
                         CORE_E_UNRECOVERED_READ);
        assert_int_equal(info, 10);
        memset(buf, 0xab, 8 * BS);
        assert_int_equal(run_req(ns, CORE_OP_COMPARE, 17, 2, buf, 2 * BS, &info),
                         CORE_E_UNRECOVERED_READ);
        assert_int_equal(info, 17);
        struct core_media_stats ms;
        core_media_get_stats(ns, &ms);
        assert_int_equal(ms.unrecovered_reads, 4);
        assert_int_equal(ms.media_errors, 4);
        assert_int_equal(ms.marked_ranges, 2);
        assert_int_equal(ms.marked_blocks, 8);
        /* A write over part of a range heals just the blocks it wrote. */
        int ev2 = atomic_load(&n_media);
        assert_int_equal(wr(ns, 16, 2, 0xcd), CORE_OK);
        assert_int_equal(rd(ns, 16, 2, NULL), CORE_OK); /* at once, before the save */
        assert_int_equal(buf[0], 0xcd);
        assert_int_equal(rd(ns, 16, 3, &info), CORE_E_UNRECOVERED_READ);
        assert_int_equal(info, 18);
        wait_media_events(ev2 + 1); /* the heal is published (after it is saved) */
        core_media_get_stats(ns, &ms);
        assert_int_equal(ms.healed_blocks, 2 + 2); /* the clear above and this write */
        assert_int_equal(ms.marked_blocks, 6);
        /* Write zeroes heals too. */
        assert_int_equal(run_req(ns, CORE_OP_WRITE_ZEROES, 10, 4, NULL, 0, NULL), CORE_OK);
        assert_int_equal(rd(ns, 10, 4, NULL), CORE_OK);
        assert_int_equal(buf[0], 0);
        /* Argument checks: beyond the capacity, zero blocks. */
        assert_int_equal(core_media_mark(ns, NBLK - 1, 2, true, NULL), -ERANGE);
        assert_int_equal(core_media_mark(ns, 0, 0, true, NULL), -ERANGE);
        assert_int_equal(core_media_mark(ns, UINT64_MAX, 2, true, NULL), -ERANGE);
        /* It all survives a reopen. */
        reopen(&ns, "marks");
        core_media_get_stats(ns, &ms);
        assert_int_equal(ms.marked_ranges, 1); /* 18..19 */
        assert_int_equal(ms.unrecovered_reads, 5);
        assert_int_equal(rd(ns, 18, 1, &info), CORE_E_UNRECOVERED_READ);
        assert_int_equal(info, 18);
        assert_int_equal(rd(ns, 16, 2, NULL), CORE_OK);
        assert_int_equal(buf[0], 0xcd);
        assert_int_equal(core_ns_delete("marks"), 0);
}

/* The list is bounded (on a mem namespace: no metadata to save per mark). */
static void test_marks_bound(void **st)
{
        (void)st;
        struct core_ns_params p = {
            .name = "bound", .backend = "mem", .size_bytes = (uint64_t)NBLK * BS, .block_size = BS};
        struct core_ns *ns = NULL;
        char err[256];
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        struct core_media_stats ms;
        for (uint32_t i = 0; i < CORE_MEDIA_MAX_RANGES; i++)
                assert_int_equal(core_media_mark(ns, 2 * (uint64_t)i, 1, true, NULL), 0);
        core_media_get_stats(ns, &ms);
        assert_int_equal(ms.marked_ranges, CORE_MEDIA_MAX_RANGES);
        /* One more separate range fails and changes nothing. */
        assert_int_equal(core_media_mark(ns, 4000, 1, true, NULL), -ENOSPC);
        core_media_get_stats(ns, &ms);
        assert_int_equal(ms.marked_ranges, CORE_MEDIA_MAX_RANGES);
        struct core_lba_range r;
        assert_int_equal(core_ns_unrecoverable(ns, 3000, 2000, &r), 0);
        /* Joining two ranges needs no new entry; clearing one inside splits nothing. */
        assert_int_equal(core_media_mark(ns, 1, 1, true, NULL), 0);
        core_media_get_stats(ns, &ms);
        assert_int_equal(ms.marked_ranges, CORE_MEDIA_MAX_RANGES - 1);
        assert_int_equal(core_media_mark(ns, 4000, 1, true, NULL), 0);
        assert_int_equal(core_ns_delete("bound"), 0);
}

static void test_elements(void **st)
{
        (void)st;
        struct core_ns *ns = mk("elem", NELEM, IL);
        char err[256];
        assert_int_equal(wr(ns, 0, 128, 0x11), CORE_OK);
        /* Degraded: readable, health reported. */
        assert_int_equal(
            core_media_set_element(ns, 1, CORE_ELEM_DEGRADED, -1, NULL, err, sizeof(err)), 0);
        struct core_elem_info ei;
        core_media_element_info(ns, 1, &ei);
        assert_int_equal(ei.state, CORE_ELEM_DEGRADED);
        assert_int_equal(ei.health, CORE_ELEM_HEALTH_AT_LIMIT);
        assert_int_equal(rd(ns, 0, 64, NULL), CORE_OK);
        assert_int_equal(atomic_load(&last_media_bits), CORE_MEDIA_CHG_ELEMENT);
        /* Failed element 2: LBAs [64,128), [320,384), ... */
        assert_int_equal(
            core_media_set_element(ns, 2, CORE_ELEM_FAILED, 0x90, NULL, err, sizeof(err)), 0);
        core_media_element_info(ns, 2, &ei);
        assert_int_equal(ei.health, 0x90);
        int64_t info;
        assert_int_equal(rd(ns, 0, 64, NULL), CORE_OK);
        assert_int_equal(rd(ns, 60, 8, &info), CORE_E_UNRECOVERED_READ);
        assert_int_equal(info, IL);
        assert_int_equal(rd(ns, 4 * IL + IL + 3, 1, &info), CORE_E_UNRECOVERED_READ);
        assert_int_equal(info, 5 * IL + 3);
        assert_int_equal(rd(ns, 2 * IL, 2 * IL, NULL), CORE_OK);
        /* Writes to it fail with a write error at the first such LBA; nothing heals. */
        assert_int_equal(wr(ns, IL - 2, 4, 0x22), CORE_E_WRITE_ERROR);
        assert_int_equal(rd(ns, IL - 2, 2, NULL), CORE_OK);
        assert_int_equal(buf[0], 0x11); /* the write did not happen */
        struct core_media_stats ms;
        core_media_get_stats(ns, &ms);
        assert_int_equal(ms.write_errors, 1);
        assert_int_equal(ms.unrecovered_reads, 2);
        /* Untracked until a scan; core_ns_unrecoverable reports both. */
        struct core_lba_range r;
        assert_int_equal(core_ns_unrecoverable(ns, 0, NBLK, &r), 1);
        assert_int_equal(r.lba, IL);
        assert_int_equal(r.nlb, IL);
        assert_int_equal(core_ns_unrecoverable(ns, 2 * IL, NBLK, &r), 1);
        assert_int_equal(r.lba, 5 * IL);
        assert_int_equal(core_media_unrecoverable_tracked(ns, 0, NBLK, &r), 0);
        assert_int_equal(core_media_untracked_blocks(ns), NBLK / NELEM);
        /* A marked range next to a failed stripe: one run. */
        assert_int_equal(core_media_mark(ns, 2 * IL, 3, true, NULL), 0);
        assert_int_equal(core_ns_unrecoverable(ns, 0, NBLK, &r), 1);
        assert_int_equal(r.lba, IL);
        assert_int_equal(r.nlb, IL + 3);
        assert_int_equal(core_media_unrecoverable_tracked(ns, 0, NBLK, &r), 1);
        assert_int_equal(r.lba, 2 * IL);
        assert_int_equal(r.nlb, 3);
        int ev = atomic_load(&n_media);
        assert_int_equal(core_media_scan(ns, NULL), 1);
        assert_int_equal(atomic_load(&n_media), ev + 1);
        assert_int_equal(core_media_scan(ns, NULL), 0);
        assert_int_equal(core_media_untracked_blocks(ns), 0);
        assert_int_equal(core_media_unrecoverable_tracked(ns, 0, NBLK, &r), 1);
        assert_int_equal(r.lba, IL);
        /* The element model cannot change while an element is failed. */
        assert_int_equal(core_media_configure(ns, 8, 0, err, sizeof(err)), -EBUSY);
        /* Argument checks. */
        assert_int_equal(
            core_media_set_element(ns, 9, CORE_ELEM_FAILED, -1, NULL, err, sizeof(err)), -ENOENT);
        assert_int_equal(
            core_media_set_element(ns, 1, CORE_ELEM_DEPOPULATED, -1, NULL, err, sizeof(err)),
            -EINVAL);
        assert_int_equal(
            core_media_set_element(ns, 1, CORE_ELEM_FAILED, 0xd0, NULL, err, sizeof(err)), -EINVAL);
        /* Survives a reopen, tracked state included. */
        reopen(&ns, "elem");
        assert_int_equal(core_media_elements(ns), NELEM);
        core_media_element_info(ns, 2, &ei);
        assert_int_equal(ei.state, CORE_ELEM_FAILED);
        assert_int_equal(ei.health, 0x90);
        assert_int_equal(rd(ns, IL, 1, &info), CORE_E_UNRECOVERED_READ);
        assert_int_equal(core_media_untracked_blocks(ns), 0);
        /* Healing the element makes its LBAs readable again (the data the backend kept). */
        assert_int_equal(core_media_set_element(ns, 2, CORE_ELEM_OK, -1, NULL, err, sizeof(err)),
                         0);
        assert_int_equal(rd(ns, IL - 2, 4, NULL), CORE_OK);
        assert_int_equal(buf[3 * BS], 0x11);
        assert_int_equal(rd(ns, 2 * IL, 1, &info), CORE_E_UNRECOVERED_READ); /* the mark */
        assert_int_equal(core_ns_delete("elem"), 0);
}

static _Atomic bool depop_ok;
static void depop_done(void *arg, bool ok)
{
        struct sync_req *w = arg;
        atomic_store(&depop_ok, ok);
        pthread_mutex_lock(&w->lock);
        w->done = true;
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

static void test_depopulate(void **st)
{
        (void)st;
        struct core_ns *ns = mk("depop", NELEM, IL);
        char err[256];
        assert_int_equal(wr(ns, 0, 64, 0x5a), CORE_OK);
        assert_int_equal(core_media_mark(ns, NBLK - 10, 5, true, NULL), 0); /* in the tail */
        int cap0 = atomic_load(&n_capacity);
        struct core_elem_info ei;
        core_media_element_info(ns, 3, &ei);
        uint64_t share = ei.capacity_blocks;
        assert_int_equal(share, NBLK / NELEM);
        struct sync_req w; /* its lock, cond and done flag */
        memset(&w, 0, sizeof(w));
        pthread_mutex_init(&w.lock, NULL);
        pthread_cond_init(&w.cond, NULL);
        assert_int_equal(core_media_depopulate(ns, 3, NULL, NULL, depop_done, &w, err, sizeof(err)),
                         0);
        pthread_mutex_lock(&w.lock);
        while (!w.done)
                pthread_cond_wait(&w.cond, &w.lock);
        pthread_mutex_unlock(&w.lock);
        assert_true(atomic_load(&depop_ok));
        assert_int_equal(core_media_depop_element(ns), 0);
        assert_int_equal(core_ns_blocks(ns), NBLK - share);
        assert_int_equal(atomic_load(&n_capacity), cap0 + 1);
        core_media_element_info(ns, 3, &ei);
        assert_int_equal(ei.state, CORE_ELEM_DEPOPULATED);
        assert_int_equal(ei.health, CORE_ELEM_HEALTH_DEPOP_OK);
        assert_true(ei.restorable);
        assert_int_equal(ei.capacity_blocks, 0);
        /* Three live elements now share the stripes. */
        assert_int_equal(core_media_lba_element(ns, 2 * IL), 4);
        assert_int_equal(core_media_lba_element(ns, 3 * IL), 1);
        /* The data below the new capacity is kept; the tail's marks went with it. */
        assert_int_equal(rd(ns, 0, 64, NULL), CORE_OK);
        assert_int_equal(buf[0], 0x5a);
        struct core_media_stats ms;
        core_media_get_stats(ns, &ms);
        assert_int_equal(ms.marked_ranges, 0);
        assert_int_equal(ms.depopulations, 1);
        /* Again, and the checks. */
        assert_int_equal(core_media_depopulate(ns, 3, NULL, NULL, NULL, NULL, err, sizeof(err)),
                         -EBUSY);
        assert_int_equal(core_media_depopulate(ns, 7, NULL, NULL, NULL, NULL, err, sizeof(err)),
                         -ENOENT);
        assert_int_equal(core_media_set_element(ns, 3, CORE_ELEM_OK, -1, NULL, err, sizeof(err)),
                         -EBUSY);
        /* Survives a reopen. */
        reopen(&ns, "depop");
        assert_int_equal(core_ns_blocks(ns), NBLK - share);
        core_media_element_info(ns, 3, &ei);
        assert_int_equal(ei.state, CORE_ELEM_DEPOPULATED);
        /* Restore: capacity back, element OK, new blocks read zeroes. */
        assert_int_equal(core_media_restore(ns, NULL, err, sizeof(err)), 0);
        assert_int_equal(core_ns_blocks(ns), NBLK);
        core_media_element_info(ns, 3, &ei);
        assert_int_equal(ei.state, CORE_ELEM_OK);
        assert_int_equal(rd(ns, NBLK - 8, 8, NULL), CORE_OK);
        assert_int_equal(buf[0], 0);
        assert_int_equal(core_media_restore(ns, NULL, err, sizeof(err)), -ENOENT);
        /* A model without elements cannot depopulate. */
        struct core_ns *plain = mk("plain", 0, 0);
        assert_int_equal(core_media_depopulate(plain, 1, NULL, NULL, NULL, NULL, err, sizeof(err)),
                         -EOPNOTSUPP);
        assert_int_equal(core_ns_delete("plain"), 0);
        assert_int_equal(core_ns_delete("depop"), 0);
}

/* While a depopulation runs, medium commands get CORE_E_DEPOP_IN_PROGRESS. */
static void test_depop_in_progress(void **st)
{
        (void)st;
        struct core_ns *ns = mk("inprog", 2, IL);
        /* Set the flag the data path reads as core_media_depopulate does, without the engine. */
        atomic_store(&ns->media_flags, CORE_MEDIA_F_DEPOP);
        int64_t info;
        assert_int_equal(rd(ns, 0, 1, &info), CORE_E_DEPOP_IN_PROGRESS);
        assert_int_equal(wr(ns, 0, 1, 0), CORE_E_DEPOP_IN_PROGRESS);
        assert_int_equal(run_req(ns, CORE_OP_FLUSH, 0, 0, NULL, 0, NULL), CORE_OK);
        atomic_store(&ns->media_flags, 0);
        assert_int_equal(rd(ns, 0, 1, NULL), CORE_OK);
        assert_int_equal(core_ns_delete("inprog"), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_mapping),     cmocka_unit_test(test_marks),
            cmocka_unit_test(test_marks_bound), cmocka_unit_test(test_elements),
            cmocka_unit_test(test_depopulate),  cmocka_unit_test(test_depop_in_progress),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
