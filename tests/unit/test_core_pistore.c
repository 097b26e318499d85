/*
 * The protection stage of the data path (issue 10) on a real reactor:
 * namespaces formatted with PI types 1, 2 and 3 on the mem and file
 * backends; writes with the core generating the PI and with the host's
 * extended LBAs (single and multi-segment buffers), each check failing
 * with its status and the failing LBA, nothing stored when a write's
 * check fails, reads and VERIFY checking what is stored, WRITE ZEROES
 * and unwritten blocks reading as the escape, corruption behind the
 * target's back caught, the format persisted across close/reopen (another
 * format refused), core_ns_format resetting every block to the escape
 * and publishing its event, resize, sanitize (overwrite, block erase)
 * resetting the metadata, COMPARE, COMPARE AND WRITE and WRITE SAME with
 * PI, ORWRITE with PI (both sides checked, the result's guard recomputed),
 * a null namespace.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core_fixture.h"
#include "core/atomic.h"
#include "core/ns.h"
#include "core/req.h"
#include "slate/byteorder.h"
#include "rt/reactor.h"

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
        struct sync_req *s = arg;
        core_req_submit(&s->req);
}

/* What the next request carries (struct core_req.pi), reset by each run. */
static struct {
        bool host_md, gen, use_apptab;
        unsigned chk, rmw_chk;
        uint64_t ref, gen_ref, rmw_ref;
        uint16_t app, app_mask, gen_app;
        uint32_t flags;
        void *scratch;
        uint32_t scratch_len;
} nx;

static enum core_status run(struct core_ns *ns, enum core_op op, uint64_t lba, uint32_t nlb,
                            struct iovec *iov, int iovcnt, uint64_t *info)
{
        struct sync_req s;
        memset(&s, 0, sizeof(s));
        pthread_mutex_init(&s.lock, NULL);
        pthread_cond_init(&s.cond, NULL);
        core_req_init(&s.req, ns, op, lba, nlb, nx.flags, rt_get(0), on_done, &s);
        s.req.pi.host_md = nx.host_md;
        s.req.pi.gen = nx.gen;
        s.req.pi.use_apptab = nx.use_apptab;
        s.req.pi.chk = nx.chk;
        s.req.pi.rmw_chk = nx.rmw_chk;
        s.req.pi.rmw_ref = nx.rmw_ref;
        s.req.pi.ref = nx.ref;
        s.req.pi.app = nx.app;
        s.req.pi.app_mask = nx.app_mask;
        s.req.pi.gen_ref = nx.gen_ref;
        s.req.pi.gen_app = nx.gen_app;
        s.req.scratch = nx.scratch;
        s.req.scratch_len = nx.scratch_len;
        memset(&nx, 0, sizeof(nx));
        for (int i = 0; i < iovcnt; i++)
                s.req.iov[i] = iov[i];
        s.req.iovcnt = iovcnt;
        rt_msg_send(rt_get(0), submit_fn, &s);
        pthread_mutex_lock(&s.lock);
        while (!s.done)
                pthread_cond_wait(&s.cond, &s.lock);
        pthread_mutex_unlock(&s.lock);
        if (info)
                *info = s.req.info_valid ? s.req.info : UINT64_MAX;
        return s.req.status;
}

static enum core_status run1(struct core_ns *ns, enum core_op op, uint64_t lba, uint32_t nlb,
                             void *buf, size_t len, uint64_t *info)
{
        struct iovec v = {.iov_base = buf, .iov_len = len};
        return run(ns, op, lba, nlb, &v, buf ? 1 : 0, info);
}

static char state_dir[256];

static int setup(void **st)
{
        (void)st;
        if (core_fixture_up(state_dir, sizeof(state_dir), "pistore", 1))
                return -1;
        return 0;
}

static int teardown(void **st)
{
        (void)st;
        return core_fixture_down(state_dir);
}

#define BS   512u
#define MD   8u
#define EXT  (BS + MD)
#define NBLK 64u

static struct core_pi_fmt fmt_of(unsigned type)
{
        return (struct core_pi_fmt){.block_size = BS, .md_size = MD, .type = (uint8_t)type};
}

/* When set, mk makes namespaces encrypted at rest with this key file. */
static const char *mk_key;
static uint64_t mk_blocks = NBLK;
static bool mk_thick;      /* not thin */
static uint32_t mk_atomic; /* atomic_write_max (bytes), 0: unset */

static struct core_ns *mk(const char *name, const char *backend, unsigned type)
{
        struct core_ns_params p = {.name = name,
                                   .backend = backend,
                                   .size_bytes = mk_blocks * BS,
                                   .thin = !mk_thick,
                                   .pi_set = true,
                                   .pi = fmt_of(type),
                                   .encrypt = mk_key != NULL,
                                   .key_file = mk_key,
                                   .atomic_write_max_set = mk_atomic != 0,
                                   .atomic_write_max = mk_atomic};
        struct core_ns *ns = NULL;
        char err[256] = "";
        int rc = core_ns_create(&p, &ns, err, sizeof(err));
        if (rc)
                fprintf(stderr, "create %s: %s\n", name, err);
        assert_int_equal(rc, 0);
        return ns;
}

static void fill(uint8_t *b, size_t n, unsigned seed)
{
        for (size_t i = 0; i < n; i++)
                b[i] = (uint8_t)(i * 31 + seed);
}

/* Extended LBAs for lba.. with good PI (ref: the LBA's low bits; app 0x1234). */
static void mk_ext(unsigned type, uint8_t *ext, uint64_t lba, size_t nblk, unsigned seed)
{
        static uint8_t data[NBLK * BS];
        struct core_pi_fmt f = fmt_of(type);
        fill(data, nblk * BS, seed);
        core_pi_insert(&f, data, (struct core_pi_buf){ext, NULL}, nblk,
                       &(struct core_pi_tags){.ref = (uint32_t)lba, .app = 0x1234});
}

/* What a read with every check expects of blocks from lba. */
static void expect_all(uint64_t lba)
{
        nx.chk = CORE_PI_CHK_GUARD | CORE_PI_CHK_APP | CORE_PI_CHK_REF;
        nx.ref = (uint32_t)lba;
        nx.app = 0x1234;
        nx.app_mask = 0xffff;
}

static void one_ns(const char *backend, unsigned type)
{
        char name[32];
        snprintf(name, sizeof(name), "pi%s-%s-%u", mk_key ? "c" : "", backend, type);
        struct core_ns *ns = mk(name, backend, type);
        assert_int_equal(core_ns_md_per_block(ns), MD);
        assert_int_equal(core_ns_xfer_bytes(ns, 4, true), 4 * EXT);
        static uint8_t ext[NBLK * EXT], back[NBLK * EXT], data[NBLK * BS], rd[NBLK * BS];
        uint64_t info;

        /* Unwritten blocks escape: a read with every check passes. */
        expect_all(0);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 0, 4, back, 4 * EXT, NULL), CORE_OK);
        for (size_t i = 0; i < 4; i++)
                for (size_t k = 0; k < MD; k++)
                        assert_int_equal(back[i * EXT + BS + k], 0xff);

        /* The host's extended LBAs, checked and stored; read back as sent. */
        mk_ext(type, ext, 10, 8, 1);
        expect_all(10);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 10, 8, ext, 8 * EXT, NULL), CORE_OK);
        expect_all(10);
        nx.host_md = true;
        memset(back, 0, sizeof(back));
        assert_int_equal(run1(ns, CORE_OP_READ, 10, 8, back, 8 * EXT, NULL), CORE_OK);
        assert_memory_equal(back, ext, 8 * EXT);
        /* Data only, checked (the core strips). */
        expect_all(10);
        assert_int_equal(run1(ns, CORE_OP_READ, 10, 8, rd, 8 * BS, NULL), CORE_OK);
        fill(data, 8 * BS, 1);
        assert_memory_equal(rd, data, 8 * BS);
        /* VERIFY checks what is stored. */
        expect_all(10);
        assert_int_equal(run1(ns, CORE_OP_VERIFY, 10, 8, NULL, 0, NULL), CORE_OK);

        /* Each check fails with its status and the failing block's LBA. */
        if (type != 3) {
                expect_all(10);
                nx.ref = 11; /* expected one more than stored */
                assert_int_equal(run1(ns, CORE_OP_READ, 10, 8, rd, 8 * BS, &info),
                                 CORE_E_PI_REFTAG);
                assert_int_equal(info, 10);
                expect_all(12);
                nx.ref = 13;
                assert_int_equal(run1(ns, CORE_OP_VERIFY, 12, 2, NULL, 0, &info), CORE_E_PI_REFTAG);
                assert_int_equal(info, 12);
        }
        expect_all(10);
        nx.app = 0x4321;
        assert_int_equal(run1(ns, CORE_OP_READ, 10, 8, rd, 8 * BS, &info), CORE_E_PI_APPTAG);
        assert_int_equal(info, 10);
        expect_all(10);
        nx.app = 0x4321;
        nx.app_mask = 0x00ff; /* only the low byte compared: 21h vs 34h still differs */
        assert_int_equal(run1(ns, CORE_OP_READ, 10, 8, rd, 8 * BS, &info), CORE_E_PI_APPTAG);
        expect_all(10);
        nx.app = 0x1299;
        nx.app_mask = 0xff00; /* high byte only: equal */
        assert_int_equal(run1(ns, CORE_OP_READ, 10, 8, rd, 8 * BS, NULL), CORE_OK);

        /* The application tag table (SCSI ATO): blocks it covers are checked against it. */
        char err[128];
        struct core_pi_apptag_range r = {.lba = 10, .count = 4, .app = 0x1234};
        assert_int_equal(core_ns_set_apptab(ns, &r, 1, NULL, err, sizeof(err)), 0);
        expect_all(10);
        nx.app = 0x7777;
        nx.use_apptab = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 10, 8, rd, 8 * BS, &info), CORE_E_PI_APPTAG);
        assert_int_equal(info, 14); /* the first block the table does not cover */
        r.count = 8;
        assert_int_equal(core_ns_set_apptab(ns, &r, 1, NULL, err, sizeof(err)), 0);
        expect_all(10);
        nx.app = 0x7777;
        nx.use_apptab = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 10, 8, rd, 8 * BS, NULL), CORE_OK);
        assert_int_equal(core_ns_set_apptab(ns, NULL, 0, NULL, err, sizeof(err)), 0);

        /* A write whose guard is wrong in its third block: refused, nothing written. */
        static uint8_t bad[8 * EXT];
        mk_ext(type, bad, 10, 8, 2);
        bad[2 * EXT + 100] ^= 1;
        expect_all(10);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 10, 8, bad, 8 * EXT, &info), CORE_E_PI_GUARD);
        assert_int_equal(info, 12);
        expect_all(10);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 10, 8, back, 8 * EXT, NULL), CORE_OK);
        assert_memory_equal(back, ext, 8 * EXT);
        /* Without the check it is stored as sent, and a checking read finds the guard. */
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 10, 8, bad, 8 * EXT, NULL), CORE_OK);
        expect_all(10);
        assert_int_equal(run1(ns, CORE_OP_READ, 10, 8, rd, 8 * BS, &info), CORE_E_PI_GUARD);
        assert_int_equal(info, 12);
        expect_all(10);
        assert_int_equal(run1(ns, CORE_OP_VERIFY, 10, 8, NULL, 0, &info), CORE_E_PI_GUARD);
        assert_int_equal(info, 12);
        /* gen: the core regenerates the tuple of what the host sent. */
        nx.host_md = true;
        nx.gen = true;
        nx.gen_ref = 10;
        nx.gen_app = 0x1234;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 10, 8, bad, 8 * EXT, NULL), CORE_OK);
        expect_all(10);
        assert_int_equal(run1(ns, CORE_OP_READ, 10, 8, rd, 8 * BS, NULL), CORE_OK);

        /* Data only, the core generates (FUA too); a multi-segment buffer. */
        fill(data, 8 * BS, 3);
        struct iovec v3[3] = {{data, 700}, {data + 700, 1000}, {data + 1700, 8 * BS - 1700}};
        nx.gen_ref = 20;
        nx.gen_app = 0x1234;
        nx.flags = CORE_REQ_FUA;
        assert_int_equal(run(ns, CORE_OP_WRITE, 20, 8, v3, 3, NULL), CORE_OK);
        expect_all(20);
        memset(rd, 0, sizeof(rd));
        struct iovec r3[2] = {{rd, 1234}, {rd + 1234, 8 * BS - 1234}};
        assert_int_equal(run(ns, CORE_OP_READ, 20, 8, r3, 2, NULL), CORE_OK);
        assert_memory_equal(rd, data, 8 * BS);
        /* Extended LBAs across segments both ways (a block split between two). */
        mk_ext(type, ext, 30, 4, 4);
        struct iovec e2[2] = {{ext, EXT + 300}, {ext + EXT + 300, 3 * EXT - 300}};
        expect_all(30);
        nx.host_md = true;
        assert_int_equal(run(ns, CORE_OP_WRITE, 30, 4, e2, 2, NULL), CORE_OK);
        memset(back, 0, sizeof(back));
        struct iovec b2[2] = {{back, 2 * EXT + 5}, {back + 2 * EXT + 5, 2 * EXT - 5}};
        expect_all(30);
        nx.host_md = true;
        assert_int_equal(run(ns, CORE_OP_READ, 30, 4, b2, 2, NULL), CORE_OK);
        assert_memory_equal(back, ext, 4 * EXT);

        /* FLUSH; WRITE ZEROES and DEALLOCATE put the metadata back to the escape. */
        assert_int_equal(run1(ns, CORE_OP_FLUSH, 0, 0, NULL, 0, NULL), CORE_OK);
        assert_int_equal(run1(ns, CORE_OP_WRITE_ZEROES, 20, 4, NULL, 0, NULL), CORE_OK);
        assert_int_equal(run1(ns, CORE_OP_DEALLOCATE, 24, 4, NULL, 0, NULL), CORE_OK);
        expect_all(20);
        nx.ref = 999; /* escapes are not checked at all */
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 20, 8, back, 8 * EXT, NULL), CORE_OK);
        for (size_t i = 0; i < 8; i++) {
                for (size_t k = 0; k < BS; k++)
                        assert_int_equal(back[i * EXT + k], 0);
                for (size_t k = 0; k < MD; k++)
                        assert_int_equal(back[i * EXT + BS + k], 0xff);
        }

        /*
         * ORWRITE: the stored blocks checked (rmw_chk), the data ORed, the
         * result's PI generated (data only) or the host's with its guard
         * recomputed; a failing check on either side writes nothing.
         */
        static uint8_t scratch[BS * 8];
        static uint8_t orb[4 * BS], want[4 * BS], orx[4 * EXT];
        fill(data, 2 * BS, 7);
        nx.gen_ref = 40;
        nx.gen_app = 0x1234;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 40, 2, data, 2 * BS, NULL), CORE_OK);
        fill(orb, 2 * BS, 9);
        for (size_t i = 0; i < 2 * BS; i++)
                want[i] = data[i] | orb[i];
        nx.scratch = scratch;
        nx.scratch_len = sizeof(scratch);
        nx.rmw_chk = CORE_PI_CHK_GUARD | CORE_PI_CHK_REF;
        nx.rmw_ref = 40;
        nx.gen_ref = 40;
        nx.gen_app = 0x1234;
        assert_int_equal(run1(ns, CORE_OP_ORWRITE, 40, 2, orb, 2 * BS, NULL), CORE_OK);
        expect_all(40);
        assert_int_equal(run1(ns, CORE_OP_READ, 40, 2, rd, 2 * BS, NULL), CORE_OK);
        assert_memory_equal(rd, want, 2 * BS);
        /* The host's PI: tags kept (application tag 5678h), guard recomputed over the result. */
        struct core_pi_fmt f = fmt_of(type);
        fill(orb, 2 * BS, 11);
        core_pi_insert(&f, orb, (struct core_pi_buf){orx, NULL}, 2,
                       &(struct core_pi_tags){.ref = 40, .app = 0x5678});
        orx[EXT + BS] ^= 0x40; /* the second block's guard */
        nx.scratch = scratch;
        nx.scratch_len = sizeof(scratch);
        nx.host_md = true;
        nx.chk = CORE_PI_CHK_GUARD | CORE_PI_CHK_REF;
        nx.ref = 40;
        nx.rmw_chk = CORE_PI_CHK_GUARD;
        assert_int_equal(run1(ns, CORE_OP_ORWRITE, 40, 2, orx, 2 * EXT, &info), CORE_E_PI_GUARD);
        assert_int_equal(info, 41);
        expect_all(40); /* nothing written: still the first ORWRITE's result and PI */
        assert_int_equal(run1(ns, CORE_OP_READ, 40, 2, rd, 2 * BS, NULL), CORE_OK);
        assert_memory_equal(rd, want, 2 * BS);
        for (size_t i = 0; i < 2 * BS; i++)
                want[i] |= orb[i];
        orx[EXT + BS] ^= 0x40;
        nx.scratch = scratch;
        nx.scratch_len = sizeof(scratch);
        nx.host_md = true;
        nx.chk = CORE_PI_CHK_GUARD | CORE_PI_CHK_REF;
        nx.ref = 40;
        nx.rmw_chk = CORE_PI_CHK_GUARD | CORE_PI_CHK_REF;
        nx.rmw_ref = 40;
        assert_int_equal(run1(ns, CORE_OP_ORWRITE, 40, 2, orx, 2 * EXT, NULL), CORE_OK);
        expect_all(40);
        nx.app = 0x5678;
        assert_int_equal(run1(ns, CORE_OP_READ, 40, 2, rd, 2 * BS, NULL), CORE_OK);
        assert_memory_equal(rd, want, 2 * BS);
        /* A stored block that fails its guard: the ORWRITE is refused, nothing written. */
        mk_ext(type, ext, 40, 2, 13);
        ext[EXT + BS] ^= 1;
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 40, 2, ext, 2 * EXT, NULL), CORE_OK);
        nx.scratch = scratch;
        nx.scratch_len = sizeof(scratch);
        nx.rmw_chk = CORE_PI_CHK_GUARD;
        nx.gen_ref = 40;
        assert_int_equal(run1(ns, CORE_OP_ORWRITE, 40, 2, orb, 2 * BS, &info), CORE_E_PI_GUARD);
        assert_int_equal(info, 41);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 40, 2, back, 2 * EXT, NULL), CORE_OK);
        assert_memory_equal(back, ext, 2 * EXT);
        /* COMPARE: the stored PI checked, the data compared (offset in the host's transfer). */
        mk_ext(type, ext, 30, 4, 4);
        nx.scratch = scratch;
        nx.scratch_len = BS;
        expect_all(30);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_COMPARE, 30, 4, ext, 4 * EXT, NULL), CORE_OK);
        ext[2 * EXT + 9] ^= 4;
        nx.scratch = scratch;
        nx.scratch_len = BS;
        expect_all(30);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_COMPARE, 30, 4, ext, 4 * EXT, &info), CORE_E_MISCOMPARE);
        assert_int_equal(info, 2 * EXT + 9);
        ext[2 * EXT + 9] ^= 4;
        fill(data, 4 * BS, 4);
        data[BS + 3] ^= 1;
        nx.scratch = scratch;
        nx.scratch_len = BS;
        assert_int_equal(run1(ns, CORE_OP_COMPARE, 30, 4, data, 4 * BS, &info), CORE_E_MISCOMPARE);
        assert_int_equal(info, BS + 3);
        nx.scratch = scratch;
        nx.scratch_len = BS;
        expect_all(30);
        nx.app = 0x4444;
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_COMPARE, 30, 4, ext, 4 * EXT, &info), CORE_E_PI_APPTAG);
        assert_int_equal(info, 30);

        /*
         * COMPARE AND WRITE: the compare half against the stored blocks, the
         * write half's PI checked (a failure writes nothing), then written.
         */
        static uint8_t caw[8 * EXT];
        mk_ext(type, caw, 30, 4, 4);
        mk_ext(type, caw + 4 * EXT, 30, 4, 6);
        caw[4 * EXT + EXT + BS] ^= 0x10; /* the write half's second guard */
        nx.scratch = scratch;
        nx.scratch_len = sizeof(scratch);
        expect_all(30);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_COMPARE_AND_WRITE, 30, 4, caw, 8 * EXT, &info),
                         CORE_E_PI_GUARD);
        assert_int_equal(info, 31);
        caw[4 * EXT + EXT + BS] ^= 0x10;
        caw[EXT + 1] ^= 0x10; /* the compare half differs */
        nx.scratch = scratch;
        nx.scratch_len = sizeof(scratch);
        expect_all(30);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_COMPARE_AND_WRITE, 30, 4, caw, 8 * EXT, &info),
                         CORE_E_MISCOMPARE);
        assert_int_equal(info, EXT + 1);
        caw[EXT + 1] ^= 0x10;
        nx.scratch = scratch;
        nx.scratch_len = sizeof(scratch);
        expect_all(30);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_COMPARE_AND_WRITE, 30, 4, caw, 8 * EXT, NULL), CORE_OK);
        expect_all(30);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 30, 4, back, 4 * EXT, NULL), CORE_OK);
        assert_memory_equal(back, caw + 4 * EXT, 4 * EXT);
        /* Data only: compared, then written with generated PI. */
        fill(data, 8 * BS, 6);
        fill(data + 4 * BS, 4 * BS, 8);
        nx.scratch = scratch;
        nx.scratch_len = sizeof(scratch);
        nx.gen_ref = 30;
        nx.gen_app = 0x1234;
        assert_int_equal(run1(ns, CORE_OP_COMPARE_AND_WRITE, 30, 4, data, 8 * BS, NULL), CORE_OK);
        expect_all(30);
        assert_int_equal(run1(ns, CORE_OP_READ, 30, 4, rd, 4 * BS, NULL), CORE_OK);
        assert_memory_equal(rd, data + 4 * BS, 4 * BS);
        /* Back to what the corruption test below expects. */
        mk_ext(type, ext, 30, 4, 4);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 30, 4, ext, 4 * EXT, NULL), CORE_OK);

        /* WRITE SAME: the block replicated, its PI generated per block (ref incremented). */
        fill(data, BS, 5);
        nx.scratch = scratch;
        nx.scratch_len = BS;
        nx.gen_ref = 40;
        nx.gen_app = 0x1234;
        assert_int_equal(run1(ns, CORE_OP_WRITE_SAME, 40, 6, data, BS, NULL), CORE_OK);
        expect_all(40);
        assert_int_equal(run1(ns, CORE_OP_READ, 40, 6, rd, 6 * BS, NULL), CORE_OK);
        for (size_t i = 0; i < 6; i++)
                assert_memory_equal(rd + i * BS, data, BS);
        if (type != 3) {
                expect_all(40);
                nx.ref = 41;
                assert_int_equal(run1(ns, CORE_OP_VERIFY, 40, 6, NULL, 0, &info), CORE_E_PI_REFTAG);
                assert_int_equal(info, 40);
        }
        /* ... of zeroes: the metadata back to the escape; with the host's PI: not yet. */
        static uint8_t zero[BS];
        nx.scratch = scratch;
        nx.scratch_len = BS;
        assert_int_equal(run1(ns, CORE_OP_WRITE_SAME, 42, 2, zero, BS, NULL), CORE_OK);
        expect_all(42);
        nx.host_md = true;
        nx.ref = 7; /* escapes are not checked */
        assert_int_equal(run1(ns, CORE_OP_READ, 42, 2, back, 2 * EXT, NULL), CORE_OK);
        assert_int_equal(back[BS], 0xff);
        /* ... with the host's PI: checked, replicated with the reference tag incremented. */
        mk_ext(type, ext, 44, 1, 12);
        ext[5] ^= 1;
        nx.scratch = scratch;
        nx.scratch_len = BS;
        expect_all(44);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_WRITE_SAME, 44, 3, ext, EXT, &info), CORE_E_PI_GUARD);
        assert_int_equal(info, 44);
        ext[5] ^= 1;
        nx.scratch = scratch;
        nx.scratch_len = BS;
        expect_all(44);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_WRITE_SAME, 44, 3, ext, EXT, NULL), CORE_OK);
        expect_all(44);
        assert_int_equal(run1(ns, CORE_OP_VERIFY, 44, 3, NULL, 0, NULL), CORE_OK);
        expect_all(44);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 44, 3, back, 3 * EXT, NULL), CORE_OK);
        for (size_t i = 0; i < 3; i++)
                assert_memory_equal(back + i * EXT, ext, BS);
        if (type != 3) {
                expect_all(45); /* the second block's reference tag is 45 */
                assert_int_equal(run1(ns, CORE_OP_VERIFY, 45, 2, NULL, 0, NULL), CORE_OK);
        }
        /* An extended-LBA transfer shorter than its blocks with their metadata: refused. */
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 40, 2, ext, 2 * BS, NULL), CORE_E_INTERNAL);

        if (strcmp(backend, "file") == 0) {
                /* Corruption behind the target's back: a checking read gets the guard error. */
                char path[512];
                snprintf(path, sizeof(path), "%s/%s.img", state_dir, name);
                int fd = open(path, O_RDWR);
                assert_true(fd >= 0);
                uint8_t byte = 0x5a;
                assert_int_equal(pwrite(fd, &byte, 1, 31 * BS + 17), 1);
                close(fd);
                expect_all(30);
                assert_int_equal(run1(ns, CORE_OP_READ, 30, 4, rd, 4 * BS, &info), CORE_E_PI_GUARD);
                assert_int_equal(info, 31);
                nx.chk = CORE_PI_CHK_GUARD;
                assert_int_equal(run1(ns, CORE_OP_VERIFY, 28, 8, NULL, 0, &info), CORE_E_PI_GUARD);
                assert_int_equal(info, 31);
                /* Without checking the data is returned as it is. */
                assert_int_equal(run1(ns, CORE_OP_READ, 30, 4, rd, 4 * BS, NULL), CORE_OK);
        }
        assert_int_equal(core_ns_delete(name), 0);
}

static void test_types_mem(void **st)
{
        (void)st;
        for (unsigned t = 1; t <= 3; t++)
                one_ns("mem", t);
}

static void test_types_file(void **st)
{
        (void)st;
        for (unsigned t = 1; t <= 3; t++)
                one_ns("file", t);
}

/*
 * Encryption at rest with PI: every test above on encrypted namespaces
 * (the data goes through the bounce, encrypted after its PI is made over
 * the plaintext, decrypted before any check), the data file holding no
 * plaintext while the metadata store holds the PI in the clear, and a
 * WRITE SAME of several pieces (each piece's copies made again after the
 * one before was encrypted in place).
 */
static void test_types_crypt(void **st)
{
        (void)st;
        static char key[512];
        snprintf(key, sizeof(key), "%s/pi.key", state_dir);
        FILE *kf = fopen(key, "w");
        assert_non_null(kf);
        fputs("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n", kf);
        fclose(kf);
        assert_int_equal(chmod(key, 0600), 0);
        mk_key = key;
        for (unsigned t = 1; t <= 3; t++) {
                one_ns("mem", t);
                one_ns("file", t);
        }

        /* What lands in the files: ciphertext beside PI in the clear. */
        struct core_ns *ns = mk("pi-crypt", "file", 1);
        static uint8_t data[4 * BS], raw[4 * BS], md[4 * MD];
        fill(data, sizeof(data), 21);
        nx.gen_ref = 8;
        nx.gen_app = 0x1234;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 8, 4, data, 4 * BS, NULL), CORE_OK);
        assert_int_equal(run1(ns, CORE_OP_FLUSH, 0, 0, NULL, 0, NULL), CORE_OK);
        char path[512];
        snprintf(path, sizeof(path), "%s/pi-crypt.img", state_dir);
        int fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        assert_int_equal(pread(fd, raw, sizeof(raw), 8 * BS), (ssize_t)sizeof(raw));
        close(fd);
        assert_memory_not_equal(raw, data, BS);
        snprintf(path, sizeof(path), "%s/pi-crypt.pi", state_dir);
        fd = open(path, O_RDONLY);
        assert_true(fd >= 0);
        assert_int_equal(pread(fd, md, sizeof(md), 8 * MD), (ssize_t)sizeof(md));
        close(fd);
        for (size_t i = 0; i < 4; i++) { /* stored inverted; the guard is the plaintext's CRC */
                assert_int_equal((uint16_t)~slate_get_be(md + i * MD, 2) & 0xffff,
                                 core_pi_crc(CORE_PI_GUARD_CRC16, data + i * BS, BS));
                assert_int_equal((uint32_t)~slate_get_be(md + i * MD + 4, 4), 8 + i);
        }
        assert_int_equal(core_ns_delete("pi-crypt"), 0);

        /* WRITE SAME over more than one piece (a piece: a megabyte of blocks and metadata). */
        mk_blocks = 8192;
        ns = mk("pi-crypt-ws", "mem", 1);
        static uint8_t blk[BS], scratch[BS], rd[BS * 64];
        fill(blk, BS, 33);
        nx.scratch = scratch;
        nx.scratch_len = BS;
        nx.gen_ref = 100;
        nx.gen_app = 0x1234;
        assert_int_equal(run1(ns, CORE_OP_WRITE_SAME, 100, 5000, blk, BS, NULL), CORE_OK);
        for (uint64_t lba = 100; lba < 5100; lba += 1000) {
                uint32_t n = lba + 64 <= 5100 ? 64 : 5100 - lba;
                expect_all(lba);
                assert_int_equal(run1(ns, CORE_OP_READ, lba, n, rd, n * BS, NULL), CORE_OK);
                for (uint32_t i = 0; i < n; i++)
                        assert_memory_equal(rd + i * BS, blk, BS);
        }
        expect_all(4900);
        assert_int_equal(run1(ns, CORE_OP_VERIFY, 100, 5000, NULL, 0, NULL), CORE_E_PI_REFTAG);
        expect_all(100);
        assert_int_equal(run1(ns, CORE_OP_VERIFY, 100, 5000, NULL, 0, NULL), CORE_OK);
        assert_int_equal(core_ns_delete("pi-crypt-ws"), 0);
        mk_blocks = NBLK;
        mk_key = NULL;
}

static unsigned format_events, format_new;

static void on_event(const struct core_ns_event *ev, void *arg)
{
        (void)arg;
        if (ev->type == CORE_NS_EV_FORMAT) {
                format_events++;
                format_new = ev->new_val;
        }
}

/* Persisted across close/reopen; another format refused on reopen; format resets; resize. */
static void test_persist_format_resize(void **st)
{
        (void)st;
        static uint8_t ext[8 * EXT], back[8 * EXT];
        char err[256];
        struct core_ns *ns = mk("pers", "file", 1);
        mk_ext(1, ext, 5, 8, 7);
        expect_all(5);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 5, 8, ext, 8 * EXT, NULL), CORE_OK);
        assert_int_equal(core_ns_delete("pers"), 0);

        /* Another format on reopen: refused. */
        struct core_ns_params p = {
            .name = "pers", .backend = "file", .thin = true, .pi_set = true, .pi = fmt_of(3)};
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), -EINVAL);
        /* Without a format: the saved one, and the metadata as written. */
        p.pi_set = false;
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        assert_int_equal(ns->pi.type, 1);
        expect_all(5);
        nx.host_md = true;
        memset(back, 0, sizeof(back));
        assert_int_equal(run1(ns, CORE_OP_READ, 5, 8, back, 8 * EXT, NULL), CORE_OK);
        assert_memory_equal(back, ext, 8 * EXT);

        /* Format: every block's metadata back to the escape, the data kept, the event. */
        assert_int_equal(core_ns_listen(on_event, NULL), 0);
        unsigned before = format_events;
        struct core_pi_fmt f2 = fmt_of(2);
        assert_int_equal(core_ns_format(ns, &f2, NULL, err, sizeof(err)), 0);
        assert_int_equal(format_events, before + 1);
        assert_int_equal(format_new, 2);
        expect_all(5);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 5, 8, back, 8 * EXT, NULL), CORE_OK);
        for (size_t i = 0; i < 8; i++) {
                assert_memory_equal(back + i * EXT, ext + i * EXT, BS);
                for (size_t k = 0; k < MD; k++)
                        assert_int_equal(back[i * EXT + BS + k], 0xff);
        }
        /* A bad format is refused and changes nothing. */
        struct core_pi_fmt bad = fmt_of(1);
        bad.md_size = 4;
        assert_int_equal(core_ns_format(ns, &bad, NULL, err, sizeof(err)), -EINVAL);
        assert_int_equal(ns->pi.type, 2);
        /* The new format survives a reopen. */
        assert_int_equal(core_ns_delete("pers"), 0);
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        assert_int_equal(ns->pi.type, 2);

        /* Resize: grown blocks escape; written ones keep their metadata. */
        nx.host_md = true;
        mk_ext(2, ext, 60, 4, 8);
        expect_all(60);
        assert_int_equal(run1(ns, CORE_OP_WRITE, 60, 4, ext, 4 * EXT, NULL), CORE_OK);
        assert_int_equal(core_ns_resize(ns, 2 * NBLK, true, err, sizeof(err)), 0);
        expect_all(60);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 60, 8, back, 8 * EXT, NULL), CORE_OK);
        assert_memory_equal(back, ext, 4 * EXT);
        for (size_t k = 0; k < MD; k++)
                assert_int_equal(back[4 * EXT + BS + k], 0xff);

        /* Format to none: data only, no metadata, the store gone. */
        struct core_pi_fmt none = {.block_size = BS};
        assert_int_equal(core_ns_format(ns, &none, NULL, err, sizeof(err)), 0);
        assert_int_equal(core_ns_md_per_block(ns), 0);
        assert_null(ns->pistore);
        assert_int_equal(run1(ns, CORE_OP_READ, 60, 4, back, 4 * BS, NULL), CORE_OK);
        assert_memory_equal(back, ext, BS);
        char path[512];
        snprintf(path, sizeof(path), "%s/pers.pi", state_dir);
        assert_int_not_equal(access(path, F_OK), 0);
        assert_int_equal(core_ns_delete("pers"), 0);
}

/* A new namespace never inherits an old <name>.pi left in the state dir. */
static void test_stale_store(void **st)
{
        (void)st;
        static uint8_t ext[2 * EXT], back[2 * EXT];
        char path[512];
        struct core_ns *ns = mk("stale", "file", 1);
        mk_ext(1, ext, 3, 2, 13);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 3, 2, ext, 2 * EXT, NULL), CORE_OK);
        assert_int_equal(core_ns_delete("stale"), 0);
        snprintf(path, sizeof(path), "%s/stale.meta.json", state_dir);
        assert_int_equal(unlink(path), 0);
        snprintf(path, sizeof(path), "%s/stale.img", state_dir);
        assert_int_equal(unlink(path), 0);
        ns = mk("stale", "file", 1);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 3, 2, back, 2 * EXT, NULL), CORE_OK);
        for (size_t k = 0; k < MD; k++)
                assert_int_equal(back[BS + k], 0xff);
        assert_int_equal(core_ns_delete("stale"), 0);
}

/* A null namespace: nothing stored, every read escapes, writes are checked all the same. */
static void test_null(void **st)
{
        (void)st;
        struct core_ns *ns = mk("pinull", "null", 1);
        static uint8_t ext[4 * EXT];
        mk_ext(1, ext, 0, 4, 9);
        ext[EXT + BS] ^= 0xff; /* the second block's guard */
        uint64_t info;
        expect_all(0);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 0, 4, ext, 4 * EXT, &info), CORE_E_PI_GUARD);
        assert_int_equal(info, 1);
        expect_all(0);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 0, 4, ext, 4 * EXT, NULL), CORE_OK);
        assert_int_equal(ext[BS], 0xff);
        assert_int_equal(core_ns_delete("pinull"), 0);
}

static pthread_mutex_t san_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t san_cv = PTHREAD_COND_INITIALIZER;
static bool san_finished;
static struct {
        struct core_ns *ns;
        const struct core_sanitize_params *p;
        int rc;
} san_call;

static void san_done(void *arg, bool ok)
{
        (void)arg;
        (void)ok;
        pthread_mutex_lock(&san_m);
        san_finished = true;
        pthread_cond_signal(&san_cv);
        pthread_mutex_unlock(&san_m);
}

static void san_start_fn(void *arg)
{
        (void)arg;
        san_call.rc = core_sanitize_start(san_call.ns, san_call.p, NULL, rt_get(0), san_done, NULL);
}

/*
 * Sanitize overwrite, block erase and cryptographic erase put every block's
 * metadata back to the escape.
 */
static void test_sanitize(void **st)
{
        (void)st;
        static uint8_t ext[8 * EXT], back[8 * EXT];
        static const uint8_t pat[4] = {1, 2, 3, 4};
        const struct core_sanitize_params ps[] = {
            {.action = CORE_SANACT_OVERWRITE, .passes = 1, .pattern_len = 4, .pattern = pat},
            {.action = CORE_SANACT_BLOCK_ERASE},
        };
        struct core_ns *ns = mk("pisan", "file", 1);
        for (size_t k = 0; k < 4; k++) {
                if (k == 2) {
                        /*
                         * CRYPTOGRAPHIC ERASE of an encrypted namespace that is not thin
                         * (its blocks would otherwise keep their old ciphertext): the old
                         * PI would fail every checked read of the garbage, so the metadata
                         * goes back to the escape too -- deallocating, or (NDAS) writing
                         * zeroes.
                         */
                        assert_int_equal(core_ns_delete("pisan"), 0);
                        static char key[512];
                        snprintf(key, sizeof(key), "%s/san.key", state_dir);
                        FILE *kf = fopen(key, "w");
                        assert_non_null(kf);
                        fputs("ffeeddccbbaa99887766554433221100ffeeddccbbaa99887766554433221100\n",
                              kf);
                        fclose(kf);
                        assert_int_equal(chmod(key, 0600), 0);
                        mk_key = key;
                        mk_thick = true;
                        ns = mk("pisan-c", "file", 1);
                        mk_key = NULL;
                        mk_thick = false;
                }
                const struct core_sanitize_params pc = {.action = CORE_SANACT_CRYPTO_ERASE,
                                                        .no_dealloc = k == 3};
                mk_ext(1, ext, 8, 8, 11);
                nx.host_md = true;
                assert_int_equal(run1(ns, CORE_OP_WRITE, 8, 8, ext, 8 * EXT, NULL), CORE_OK);
                san_call.ns = ns;
                san_call.p = k < 2 ? &ps[k] : &pc;
                san_finished = false;
                rt_msg_call(rt_get(0), san_start_fn, NULL);
                assert_int_equal(san_call.rc, 0);
                pthread_mutex_lock(&san_m);
                while (!san_finished)
                        pthread_cond_wait(&san_cv, &san_m);
                pthread_mutex_unlock(&san_m);
                for (int i = 0; i < 200 && core_ns_sanitize_state(ns) == CORE_SAN_RUNNING; i++)
                        usleep(5000);
                assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_DONE);
                expect_all(8);
                nx.host_md = true;
                nx.ref = 12345; /* escapes are not checked */
                assert_int_equal(run1(ns, CORE_OP_READ, 8, 8, back, 8 * EXT, NULL), CORE_OK);
                for (size_t i = 0; i < 8; i++) {
                        assert_int_equal(back[i * EXT], k == 0 ? 1 : 0); /* the pattern, zeroes */
                        for (size_t b = 0; b < MD; b++)
                                assert_int_equal(back[i * EXT + BS + b], 0xff);
                }
        }
        assert_int_equal(core_ns_delete("pisan-c"), 0);
}

static void cp_file(const char *from, const char *to)
{
        char cmd[8400];
        snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s'", from, to);
        assert_int_equal(system(cmd), 0);
}

static void file_at(const char *path, void *buf, size_t len, off_t off, bool wr)
{
        int fd = open(path, wr ? O_WRONLY : O_RDONLY);
        assert_true(fd >= 0);
        if (wr)
                assert_int_equal(pwrite(fd, buf, len, off), (ssize_t)len);
        else
                assert_int_equal(pread(fd, buf, len, off), (ssize_t)len);
        close(fd);
}

/*
 * Atomic writes with PI (core/atomic.c): on a file namespace the journal
 * record carries the blocks' metadata after their data (data_len =
 * nlb * (block + metadata)), a one-block atomic write is journaled too,
 * the host's PI is checked first (a bad guard journals and stores
 * nothing), a FUA write and a flush retire the applied records; recovery
 * of a crash image whose in-place data AND metadata were torn replays
 * both; a format drains and checkpoints the journal and atomic writes go
 * on with the new store.  On mem (no journal) the same writes under the
 * range lock.
 */
static void atomic_pi_ns(const char *backend, unsigned type)
{
        char name[40];
        snprintf(name, sizeof(name), "apia-%s-%u", backend, type);
        mk_atomic = 64 << 10;
        struct core_ns *ns = mk(name, backend, type);
        mk_atomic = 0;
        bool file = !strcmp(backend, "file");
        struct core_atomic_limits l;
        core_ns_atomic_limits(ns, &l);
        assert_int_equal(l.max_blocks, (64 << 10) / BS);
        static uint8_t ext[16 * EXT], bad[16 * EXT], back[16 * EXT];
        uint64_t info;

        /* The host's extended LBAs, checked, atomic: one record, data then metadata. */
        mk_ext(type, ext, 20, 16, 3);
        expect_all(20);
        nx.host_md = true;
        nx.flags = CORE_REQ_ATOMIC;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 20, 16, ext, 16 * EXT, NULL), CORE_OK);
        assert_int_equal(atomic_load(&ns->atomic_stats.writes), file ? 1 : 0);
        if (file)
                assert_int_equal(atomic_load(&ns->atomic_stats.journal_bytes),
                                 sizeof(struct core_atomic_rec) + 16 + 16 * (BS + MD));
        expect_all(20);
        nx.host_md = true;
        memset(back, 0, sizeof(back));
        assert_int_equal(run1(ns, CORE_OP_READ, 20, 16, back, 16 * EXT, NULL), CORE_OK);
        assert_memory_equal(back, ext, 16 * EXT);

        /* A wrong guard in block 5: refused with its LBA, nothing journaled or stored. */
        mk_ext(type, bad, 20, 16, 9);
        bad[5 * EXT + 7] ^= 0x40;
        expect_all(20);
        nx.host_md = true;
        nx.flags = CORE_REQ_ATOMIC;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 20, 16, bad, 16 * EXT, &info), CORE_E_PI_GUARD);
        assert_int_equal(info, 25);
        assert_int_equal(atomic_load(&ns->atomic_stats.writes), file ? 1 : 0);
        expect_all(20);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 20, 16, back, 16 * EXT, NULL), CORE_OK);
        assert_memory_equal(back, ext, 16 * EXT);

        /* One block with PI the core generates: journaled (data and metadata together). */
        static uint8_t one[BS], rd[BS];
        fill(one, BS, 44);
        nx.gen = true;
        nx.gen_ref = 3;
        nx.gen_app = 0x1234;
        nx.flags = CORE_REQ_ATOMIC;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 3, 1, one, BS, NULL), CORE_OK);
        assert_int_equal(atomic_load(&ns->atomic_stats.writes), file ? 2 : 0);
        expect_all(3);
        assert_int_equal(run1(ns, CORE_OP_READ, 3, 1, rd, BS, NULL), CORE_OK);
        assert_memory_equal(rd, one, BS);
        if (!file) {
                assert_int_equal(core_ns_delete(name), 0);
                return;
        }

        /*
         * Crash image (what kill -9 leaves: the files as they are now), with
         * the first record's in-place data torn (half junk) and its blocks'
         * metadata junk: recovery replays both from the record.
         */
        assert_true(core_atomic_need_checkpoint(ns));
        char j[600], p[600], j2[600], d2[600], p2[600];
        snprintf(j, sizeof(j), "%s/%s.atomic", state_dir, name);
        snprintf(p, sizeof(p), "%s/%s.pi", state_dir, name);
        snprintf(j2, sizeof(j2), "%s/img.atomic", state_dir);
        snprintf(d2, sizeof(d2), "%s/img.img", state_dir);
        snprintf(p2, sizeof(p2), "%s/img.pi", state_dir);
        cp_file(j, j2);
        cp_file(ns->path, d2);
        cp_file(p, p2);
        static uint8_t junk[16 * BS], want_d[16 * BS], got_d[16 * BS], want_m[17 * MD],
            got_m[17 * MD];
        memset(junk, 0xEE, sizeof(junk));
        file_at(ns->path, want_d, sizeof(want_d), 20 * BS, false);
        file_at(p, want_m, 16 * MD, 20 * MD, false);
        file_at(d2, junk, 8 * BS, 24 * BS, true);
        file_at(p2, junk, 16 * MD, 20 * MD, true);
        file_at(p2, junk, MD, 3 * MD, true);
        int jfd = open(j2, O_RDWR), dfd = open(d2, O_RDWR), pfd = open(p2, O_RDWR);
        assert_true(jfd >= 0 && dfd >= 0 && pfd >= 0);
        unsigned rep = 0, dis = 0;
        assert_int_equal(core_atomic_replay_fds_md(jfd, dfd, pfd, MD, 9, NBLK, &rep, &dis), 0);
        assert_int_equal(rep, 2);
        assert_int_equal(dis, 0);
        file_at(d2, got_d, sizeof(got_d), 20 * BS, false);
        file_at(p2, got_m, 16 * MD, 20 * MD, false);
        assert_memory_equal(got_d, want_d, sizeof(want_d));
        assert_memory_equal(got_m, want_m, 16 * MD);
        file_at(p, want_m + 16 * MD, MD, 3 * MD, false);
        file_at(p2, got_m + 16 * MD, MD, 3 * MD, false);
        assert_memory_equal(got_m + 16 * MD, want_m + 16 * MD, MD);
        /* Without a store to apply it to, a record with metadata is not replayed. */
        cp_file(j, j2);
        assert_int_equal(core_atomic_replay_fds(jfd, dfd, 9, NBLK, &rep, &dis), 0);
        assert_int_equal(rep, 0);
        assert_int_equal(dis, 1);
        close(jfd);
        close(dfd);
        close(pfd);

        /* A FUA write (plain, with PI) retires the applied records; so does a flush. */
        mk_ext(type, ext, 40, 2, 5);
        expect_all(40);
        nx.host_md = true;
        nx.flags = CORE_REQ_FUA;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 40, 2, ext, 2 * EXT, NULL), CORE_OK);
        assert_false(core_atomic_need_checkpoint(ns));
        nx.gen = true;
        nx.gen_ref = 3;
        nx.flags = CORE_REQ_ATOMIC;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 3, 1, one, BS, NULL), CORE_OK);
        assert_true(core_atomic_need_checkpoint(ns));
        assert_int_equal(run1(ns, CORE_OP_FLUSH, 0, 0, NULL, 0, NULL), CORE_OK);
        assert_false(core_atomic_need_checkpoint(ns));

        /* A format drains the journal; atomic writes go on into the new store. */
        nx.gen = true;
        nx.gen_ref = 3;
        nx.flags = CORE_REQ_ATOMIC;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 3, 1, one, BS, NULL), CORE_OK);
        char err[256];
        struct core_pi_fmt f2 = fmt_of(type == 1 ? 3 : 1);
        assert_int_equal(core_ns_format(ns, &f2, NULL, err, sizeof(err)), 0);
        assert_false(core_atomic_need_checkpoint(ns));
        mk_ext(f2.type, ext, 20, 16, 6);
        expect_all(20);
        nx.host_md = true;
        nx.flags = CORE_REQ_ATOMIC;
        assert_int_equal(run1(ns, CORE_OP_WRITE, 20, 16, ext, 16 * EXT, NULL), CORE_OK);
        expect_all(20);
        nx.host_md = true;
        assert_int_equal(run1(ns, CORE_OP_READ, 20, 16, back, 16 * EXT, NULL), CORE_OK);
        assert_memory_equal(back, ext, 16 * EXT);
        assert_int_equal(core_ns_delete(name), 0);
}

static void test_atomic(void **st)
{
        (void)st;
        for (unsigned t = 1; t <= 3; t++) {
                atomic_pi_ns("file", t);
                atomic_pi_ns("mem", t);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_types_mem),   cmocka_unit_test(test_types_file),
            cmocka_unit_test(test_types_crypt), cmocka_unit_test(test_persist_format_resize),
            cmocka_unit_test(test_null),        cmocka_unit_test(test_stale_store),
            cmocka_unit_test(test_sanitize),    cmocka_unit_test(test_atomic),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
