/*
 * The protection information engine (src/core/pi.c), alone: the guard CRCs
 * against independent vectors, the tuple layouts byte by byte, every type,
 * every escape, each failing check with the right block (and interval),
 * protection intervals, PI first/last in larger metadata, the interleaved
 * and separate layouts, insert/strip, the application tag table, format
 * validation, and the SCSI and NVMe rows of the three new statuses.
 *
 * Vectors: "123456789" check values of the CRC catalogue (CRC-16/T10-DIF
 * D0DBh, CRC-32C E3069283h, CRC-64/NVME AE8B14860A799888h) and the NVMe
 * NVM Command Set's 4 KiB test cases (all 00h, all FFh, incrementing and
 * decrementing bytes) for the 32b and 64b guards; the CRC16 ones of the
 * same buffers were computed with python3-crcmod (poly 18BB7h, init 0, not
 * reflected), which also reproduced every 32b/64b value of the spec.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/pi.h"
#include "nvme/internal.h"
#include "scsi/internal.h"

static void fill(uint8_t *b, size_t n, int pat)
{
        for (size_t i = 0; i < n; i++)
                b[i] = pat == 0 ? 0 : pat == 1 ? 0xff : pat == 2 ? (uint8_t)i : (uint8_t)(255 - i);
}

static void test_crc_vectors(void **st)
{
        (void)st;
        static const uint16_t v16[4] = {0x0000, 0x8b5d, 0x8f6d, 0x0430};
        static const uint32_t v32[4] = {0x98f94189, 0x25c1fe13, 0x9c71fe32, 0x214941a8};
        static const uint64_t v64[4] = {0x6482d367eb22b64eull, 0xc0ddba7302eca3acull,
                                        0x3e729f5f6750449cull, 0x9a2df64b8e9e517eull};
        uint8_t b[4096];
        assert_int_equal(core_pi_crc(CORE_PI_GUARD_CRC16, "123456789", 9), 0xd0db);
        assert_int_equal(core_pi_crc(CORE_PI_GUARD_CRC32C, "123456789", 9), 0xe3069283);
        if (core_pi_have_crc64())
                assert_true(core_pi_crc(CORE_PI_GUARD_CRC64, "123456789", 9) ==
                            0xae8b14860a799888ull);
        for (int p = 0; p < 4; p++) {
                fill(b, sizeof(b), p);
                assert_int_equal(core_pi_crc(CORE_PI_GUARD_CRC16, b, sizeof(b)), v16[p]);
                assert_int_equal(core_pi_crc(CORE_PI_GUARD_CRC32C, b, sizeof(b)), v32[p]);
                if (core_pi_have_crc64())
                        assert_true(core_pi_crc(CORE_PI_GUARD_CRC64, b, sizeof(b)) == v64[p]);
        }
}

static void test_fmt_check(void **st)
{
        (void)st;
        char err[128];
        struct core_pi_fmt f = {.block_size = 512, .md_size = 8, .type = 1};
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)), 0);
        assert_int_equal(core_pi_tuple_size(&f), 8);
        assert_int_equal(core_pi_ref_bits(&f), 32);
        f.md_size = 7;
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)), -EINVAL);
        f.md_size = 8;
        f.type = 4;
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)), -EINVAL);
        f.type = 1;
        f.block_size = 520;
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)), -EINVAL);
        f.block_size = 4096;
        f.pi_exp = 3;
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)), 0);
        f.pi_exp = 4; /* 256-byte intervals */
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)), -EINVAL);
        f.pi_exp = 0;
        f.guard = CORE_PI_GUARD_CRC32C;
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)), -EINVAL); /* md 8 < 16 */
        f.md_size = 16;
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)), -EINVAL); /* 80-bit reftag */
        f.sts = 16;
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)), 0);
        assert_int_equal(core_pi_ref_bits(&f), 64);
        f.sts = 80;
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)), -EINVAL);
        f.guard = CORE_PI_GUARD_CRC64;
        f.sts = 0;
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)),
                         core_pi_have_crc64() ? 0 : -ENOTSUP);
        f.guard = CORE_PI_GUARD_CRC16;
        f.sts = 32;
        assert_int_equal(core_pi_fmt_check(&f, err, sizeof(err)), -EINVAL);
        struct core_pi_fmt z = {.block_size = 512, .md_size = 0, .type = 0};
        assert_int_equal(core_pi_fmt_check(&z, err, sizeof(err)), 0);
        z.pi_exp = 1;
        assert_int_equal(core_pi_fmt_check(&z, err, sizeof(err)), -EINVAL);
}

/* The tuple bytes, written out by hand from the spec's layouts. */
static void test_layouts(void **st)
{
        (void)st;
        uint8_t b[4096 + 16];
        struct core_pi_fmt f = {.block_size = 512, .md_size = 8, .type = 1};
        struct core_pi_tags t = {.ref = 0x01020304, .app = 0x1234};
        memset(b, 0, sizeof(b));
        core_pi_generate(&f, (struct core_pi_buf){b, NULL}, 1, &t);
        static const uint8_t want16[8] = {0x00, 0x00, 0x12, 0x34, 0x01, 0x02, 0x03, 0x04};
        assert_memory_equal(b + 512, want16, 8);

        /* 32b guard, 4 KiB incrementing bytes, 16-bit storage tag. */
        struct core_pi_fmt g = {
            .block_size = 4096, .md_size = 16, .type = 1, .guard = CORE_PI_GUARD_CRC32C, .sts = 16};
        fill(b, 4096, 2);
        t = (struct core_pi_tags){.ref = 0x1122334455667788ull, .app = 0xbeef, .stag = 0xabcd};
        core_pi_generate(&g, (struct core_pi_buf){b, NULL}, 1, &t);
        static const uint8_t want32[16] = {0x9c, 0x71, 0xfe, 0x32, 0xbe, 0xef, 0xab, 0xcd,
                                           0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88};
        assert_memory_equal(b + 4096, want32, 16);

        if (core_pi_have_crc64()) {
                struct core_pi_fmt h = {.block_size = 4096,
                                        .md_size = 16,
                                        .type = 1,
                                        .guard = CORE_PI_GUARD_CRC64,
                                        .sts = 8};
                fill(b, 4096, 0);
                t = (struct core_pi_tags){
                    .ref = 0x0000112233445566ull, .app = 0x0102, .stag = 0x99};
                core_pi_generate(&h, (struct core_pi_buf){b, NULL}, 1, &t);
                /* 48-bit space: storage tag 99h, then the low 40 bits of the reference tag. */
                static const uint8_t want64[16] = {0x64, 0x82, 0xd3, 0x67, 0xeb, 0x22, 0xb6, 0x4e,
                                                   0x01, 0x02, 0x99, 0x22, 0x33, 0x44, 0x55, 0x66};
                assert_memory_equal(b + 4096, want64, 16);
        }
}

/* The formats every type/guard test runs over. */
static const struct core_pi_fmt fmts[] = {
    {.block_size = 512, .md_size = 8, .guard = CORE_PI_GUARD_CRC16},
    {.block_size = 4096, .md_size = 8, .guard = CORE_PI_GUARD_CRC16, .pi_exp = 3},
    {.block_size = 4096, .md_size = 16, .guard = CORE_PI_GUARD_CRC16}, /* PI last */
    {.block_size = 4096, .md_size = 16, .guard = CORE_PI_GUARD_CRC16, .pi_first = true},
    {.block_size = 4096, .md_size = 16, .guard = CORE_PI_GUARD_CRC32C, .sts = 16},
    {.block_size = 512, .md_size = 64, .guard = CORE_PI_GUARD_CRC32C, .sts = 40},
    {.block_size = 4096, .md_size = 16, .guard = CORE_PI_GUARD_CRC64},
    {.block_size = 4096, .md_size = 32, .guard = CORE_PI_GUARD_CRC64, .sts = 16},
};

#define NB 6

struct ctx {
        struct core_pi_fmt f;
        size_t ext;
        uint8_t *buf;
        unsigned ts, po;
};

static bool ctx_init(struct ctx *c, unsigned i, unsigned type)
{
        c->f = fmts[i];
        c->f.type = (uint8_t)type;
        if (core_pi_fmt_check(&c->f, NULL, 0))
                return false; /* the 64b guard without CRC-64/NVME */
        c->ext = core_pi_ext_block_size(&c->f);
        c->buf = malloc(c->ext * NB);
        assert_non_null(c->buf);
        for (size_t j = 0; j < c->ext * NB; j++)
                c->buf[j] = (uint8_t)(j * 7 + 3);
        c->ts = core_pi_tuple_size(&c->f);
        c->po = c->f.pi_first ? 0 : c->f.md_size - c->ts;
        return true;
}

/* Pointer to the PI tuple of interval u (interleaved). */
static uint8_t *tuple(struct ctx *c, size_t u)
{
        size_t iv = c->f.block_size >> c->f.pi_exp;
        return c->buf + u * (iv + c->f.md_size) + iv + c->po;
}

static uint8_t *iv_data(struct ctx *c, size_t u)
{
        size_t iv = c->f.block_size >> c->f.pi_exp;
        return c->buf + u * (iv + c->f.md_size);
}

static unsigned app_off(const struct ctx *c)
{
        return c->f.guard == CORE_PI_GUARD_CRC16 ? 2 : c->f.guard == CORE_PI_GUARD_CRC32C ? 4 : 8;
}

static struct core_pi_check full(uint64_t ref, uint16_t app, uint64_t lba)
{
        return (struct core_pi_check){.flags =
                                          CORE_PI_CHK_GUARD | CORE_PI_CHK_APP | CORE_PI_CHK_REF,
                                      .ref = ref,
                                      .app = app,
                                      .app_mask = 0xffff,
                                      .lba = lba};
}

/* fn on every format of fmts with types 1..3 (those this build can do). */
static void each_format(void (*fn)(struct ctx c, unsigned type))
{
        for (unsigned i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
                for (unsigned type = 1; type <= 3; type++) {
                        struct ctx c;
                        if (!ctx_init(&c, i, type))
                                continue;
                        fn(c, type);
                        free(c.buf);
                }
        }
}

/* One format and type (c.buf is freed by each_format). */
static void types_and_checks_one(struct ctx c, unsigned type)
{
        struct core_pi_buf b = {c.buf, NULL};
        const struct core_pi_tags t = {.ref = 1000, .app = 0x5a5a};
        struct core_pi_err e;
        size_t per = (size_t)1 << c.f.pi_exp, last = NB * per - 1;
        core_pi_generate(&c.f, b, NB, &t);
        struct core_pi_check k = full(1000, 0x5a5a, 77);
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e), CORE_OK);

        /* A flipped data bit in the last interval of block 4 (or of block 5). */
        size_t u = 4 * per + per - 1;
        iv_data(&c, u)[17] ^= 0x10;
        memset(&e, 0, sizeof(e));
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e), CORE_E_PI_GUARD);
        assert_int_equal(e.status, CORE_E_PI_GUARD);
        assert_int_equal(e.block, 4);
        assert_int_equal(e.interval, per - 1);
        assert_int_equal(e.lba, 81);
        assert_true(e.expected != e.actual);
        k.flags &= ~(unsigned)CORE_PI_CHK_GUARD; /* not checked: passes */
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e), CORE_OK);
        iv_data(&c, u)[17] ^= 0x10;
        k.flags |= CORE_PI_CHK_GUARD;

        /* Metadata outside the tuple: guarded only if before a PI placed last. */
        if (c.f.md_size > c.ts) {
                uint8_t *m = tuple(&c, 2) - c.po + (c.po ? 0 : c.ts);
                m[0] ^= 1;
                assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e),
                                 c.po ? CORE_E_PI_GUARD : CORE_OK);
                if (c.po)
                        assert_int_equal(e.block, 2 / per);
                m[0] ^= 1;
        }

        /* The application tag: wrong in block 3, ignored bits by the mask. */
        uint8_t *pi = tuple(&c, 3 * per);
        pi[app_off(&c) + 1] ^= 0x01; /* 5a5b */
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e), CORE_E_PI_APPTAG);
        assert_int_equal(e.block, 3);
        assert_int_equal(e.interval, 0);
        assert_int_equal(e.expected, 0x5a5a);
        assert_int_equal(e.actual, 0x5a5b);
        k.app_mask = 0xfffe;
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e), CORE_OK);
        k.app_mask = 0xffff;
        k.flags &= ~(unsigned)CORE_PI_CHK_APP;
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e), CORE_OK);
        k.flags |= CORE_PI_CHK_APP;
        pi[app_off(&c) + 1] ^= 0x01;

        /* The reference tag: the expected start off by one fails at block 0
         * for types 1 and 2; type 3 never checks it. */
        k.ref = 1001;
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e),
                         type == 3 ? CORE_OK : CORE_E_PI_REFTAG);
        if (type != 3) {
                assert_int_equal(e.block, 0);
                assert_int_equal(e.expected, 1001);
                assert_int_equal(e.actual, 1000);
        }
        k.ref = 1000;
        /* One tuple's reference tag wrong: the last interval. */
        pi = tuple(&c, last);
        pi[c.ts - 1] ^= 0x40;
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e),
                         type == 3 ? CORE_OK : CORE_E_PI_REFTAG);
        if (type != 3) {
                assert_int_equal(e.block, NB - 1);
                assert_int_equal(e.interval, per - 1);
                assert_int_equal(e.expected, 1000 + last);
        }
        pi[c.ts - 1] ^= 0x40;

        /* Guard first: a block failing all three reports the guard. */
        pi = tuple(&c, 5 * per);
        iv_data(&c, 5 * per)[0] ^= 0xff;
        pi[app_off(&c)] ^= 0x80;
        pi[c.ts - 1] ^= 0x01;
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e), CORE_E_PI_GUARD);
        assert_int_equal(e.block, 5);
        k.flags = CORE_PI_CHK_APP | CORE_PI_CHK_REF;
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e), CORE_E_PI_APPTAG);
        k.flags = CORE_PI_CHK_REF;
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e),
                         type == 3 ? CORE_OK : CORE_E_PI_REFTAG);
}

static void test_types_and_checks(void **st)
{
        (void)st;
        each_format(types_and_checks_one);
}

/* One format and type (c.buf is freed by each_format). */
static void escapes_one(struct ctx c, unsigned type)
{
        struct core_pi_buf b = {c.buf, NULL};
        const struct core_pi_tags t = {.ref = 0, .app = 0x0001};
        struct core_pi_err e;
        core_pi_generate(&c.f, b, NB, &t);
        struct core_pi_check k = full(0, 0x0001, 0);
        /* Block 1's first tuple: apptag FFFFh, guard and reference tag wrong. */
        uint8_t *pi = tuple(&c, (size_t)1 << c.f.pi_exp);
        memset(pi, 0x00, app_off(&c));
        pi[0] = 0x42;
        pi[app_off(&c)] = pi[app_off(&c) + 1] = 0xff;
        pi[c.ts - 1] ^= 0x01;
        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e),
                         type == 3 ? CORE_E_PI_GUARD : CORE_OK);
        if (type == 3) {
                assert_int_equal(e.block, 1);
                /* All ones in the storage+reference space too: escaped. */
                memset(pi + app_off(&c) + 2, 0xff, c.ts - app_off(&c) - 2);
                assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e), CORE_OK);
                /* The reference tag all ones but not the storage tag: checked. */
                if (c.f.sts) {
                        pi[app_off(&c) + 2] = 0x7f;
                        assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e), CORE_E_PI_GUARD);
                }
                /* Reference tag all ones, apptag not FFFFh: checked. */
                memset(pi + app_off(&c) + 2, 0xff, c.ts - app_off(&c) - 2);
                pi[app_off(&c) + 1] = 0xfe;
                assert_int_equal(core_pi_verify(&c.f, b, NB, &k, &e), CORE_E_PI_GUARD);
        }
}

static void test_escapes(void **st)
{
        (void)st;
        each_format(escapes_one);
}

static void test_type0(void **st)
{
        (void)st;
        struct core_pi_fmt f = {.block_size = 512, .md_size = 8, .type = 0};
        uint8_t src[1024], ext[1040], back[1024];
        fill(src, sizeof(src), 2);
        memset(ext, 0xee, sizeof(ext));
        const struct core_pi_tags t = {.ref = 5};
        core_pi_insert(&f, src, (struct core_pi_buf){ext, NULL}, 2, &t);
        assert_memory_equal(ext, src, 512);
        assert_memory_equal(ext + 520, src + 512, 512);
        static const uint8_t zero[8];
        assert_memory_equal(ext + 512, zero, 8);
        struct core_pi_check k = full(9, 9, 0);
        assert_int_equal(core_pi_verify(&f, (struct core_pi_buf){ext, NULL}, 2, &k, NULL), CORE_OK);
        assert_int_equal(core_pi_strip(&f, (struct core_pi_buf){ext, NULL}, back, 2, &k, NULL),
                         CORE_OK);
        assert_memory_equal(back, src, sizeof(src));
}

/* Separate metadata, split/join, insert/strip against generate. */
static void test_layout_ops(void **st)
{
        (void)st;
        for (unsigned i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
                struct ctx c;
                if (!ctx_init(&c, i, 1))
                        continue;
                size_t ds = (size_t)c.f.block_size * NB, ms = core_pi_md_per_block(&c.f) * NB;
                uint8_t *src = malloc(ds), *data = malloc(ds), *md = malloc(ms),
                        *ext2 = malloc(c.ext * NB);
                assert_true(src && data && md && ext2);
                fill(src, ds, 2);
                src[5] = (uint8_t)i;
                const struct core_pi_tags t = {.ref = 0xfffffffe, .app = 7, .stag = 3}; /* wraps */
                struct core_pi_check k = full(0xfffffffe, 7, 40);
                struct core_pi_err e;

                /* insert interleaved == join(src, zero md) + generate. */
                core_pi_insert(&c.f, src, (struct core_pi_buf){c.buf, NULL}, NB, &t);
                core_pi_join(&c.f, src, NULL, ext2, NB);
                core_pi_generate(&c.f, (struct core_pi_buf){ext2, NULL}, NB, &t);
                assert_memory_equal(c.buf, ext2, c.ext * NB);
                assert_int_equal(
                    core_pi_verify(&c.f, (struct core_pi_buf){c.buf, NULL}, NB, &k, &e), CORE_OK);

                /* split -> separate verifies the same, join restores the bytes. */
                core_pi_split(&c.f, c.buf, data, md, NB);
                assert_memory_equal(data, src, ds);
                struct core_pi_buf sep = {data, md};
                assert_int_equal(core_pi_verify(&c.f, sep, NB, &k, &e), CORE_OK);
                memset(ext2, 0, c.ext * NB);
                core_pi_join(&c.f, data, md, ext2, NB);
                assert_memory_equal(c.buf, ext2, c.ext * NB);

                /* insert separate == split of insert interleaved. */
                uint8_t *data2 = malloc(ds), *md2 = malloc(ms);
                assert_true(data2 && md2);
                memset(md2, 0xcc, ms);
                core_pi_insert(&c.f, src, (struct core_pi_buf){data2, md2}, NB, &t);
                assert_memory_equal(data2, data, ds);
                assert_memory_equal(md2, md, ms);

                /* Separate: a wrong guard in block 2 names block 2 and LBA 42. */
                data[2 * c.f.block_size + 100] ^= 4;
                assert_int_equal(core_pi_verify(&c.f, sep, NB, &k, &e), CORE_E_PI_GUARD);
                assert_int_equal(e.block, 2);
                assert_int_equal(e.lba, 42);
                data[2 * c.f.block_size + 100] ^= 4;

                /* strip: checked and copied, or refused with dst untouched. */
                uint8_t *out = malloc(ds);
                assert_non_null(out);
                assert_int_equal(
                    core_pi_strip(&c.f, (struct core_pi_buf){c.buf, NULL}, out, NB, &k, &e),
                    CORE_OK);
                assert_memory_equal(out, src, ds);
                memset(out, 0, ds);
                assert_int_equal(core_pi_strip(&c.f, sep, out, NB, NULL, NULL), CORE_OK);
                assert_memory_equal(out, src, ds);
                memset(out, 0x11, ds);
                tuple(&c, 0)[0] ^= 1;
                assert_int_equal(
                    core_pi_strip(&c.f, (struct core_pi_buf){c.buf, NULL}, out, NB, &k, &e),
                    CORE_E_PI_GUARD);
                assert_int_equal(e.block, 0);
                for (size_t j = 0; j < ds; j++)
                        assert_int_equal(out[j], 0x11);
                free(out);
                free(data2);
                free(md2);
                free(src);
                free(data);
                free(md);
                free(ext2);
                free(c.buf);
        }
}

static void test_apptab(void **st)
{
        (void)st;
        struct core_pi_apptab *tab = malloc(sizeof(*tab));
        assert_non_null(tab);
        const struct core_pi_apptag_range bad[] = {{100, 10, 1}, {105, 1, 2}};
        assert_int_equal(core_pi_apptab_set(tab, bad, 2), -EINVAL);
        const struct core_pi_apptag_range wrap[] = {{UINT64_MAX, 2, 1}};
        assert_int_equal(core_pi_apptab_set(tab, wrap, 1), -EINVAL);
        const struct core_pi_apptag_range r[] = {{110, 5, 0xb0b0}, {100, 10, 0xa0a0}, {200, 0, 9}};
        assert_int_equal(core_pi_apptab_set(tab, r, 3), 0);
        assert_int_equal(tab->n, 2);
        uint16_t app = 0;
        assert_false(core_pi_apptab_lookup(tab, 99, &app));
        assert_true(core_pi_apptab_lookup(tab, 100, &app));
        assert_int_equal(app, 0xa0a0);
        assert_true(core_pi_apptab_lookup(tab, 109, &app));
        assert_int_equal(app, 0xa0a0);
        assert_true(core_pi_apptab_lookup(tab, 114, &app));
        assert_int_equal(app, 0xb0b0);
        assert_false(core_pi_apptab_lookup(tab, 115, &app));
        assert_false(core_pi_apptab_lookup(tab, 200, &app));

        /* Blocks 106..111: 106-109 need A0A0h, 110-111 B0B0h; the host's expected
         * application tag and mask apply to none of them. */
        struct core_pi_fmt f = {.block_size = 512, .md_size = 8, .type = 1};
        uint8_t buf[6 * 520];
        fill(buf, sizeof(buf), 3);
        core_pi_generate(&f, (struct core_pi_buf){buf, NULL}, 4,
                         &(struct core_pi_tags){.ref = 106, .app = 0xa0a0});
        core_pi_generate(&f, (struct core_pi_buf){buf + 4 * 520, NULL}, 2,
                         &(struct core_pi_tags){.ref = 110, .app = 0xb0b0});
        struct core_pi_check k = full(106, 0, 106);
        k.app_mask = 0;
        k.tab = tab;
        struct core_pi_err e;
        assert_int_equal(core_pi_verify(&f, (struct core_pi_buf){buf, NULL}, 6, &k, &e), CORE_OK);
        buf[5 * 520 + 512 + 3] ^= 1; /* block 5 (LBA 111): B0B1h */
        assert_int_equal(core_pi_verify(&f, (struct core_pi_buf){buf, NULL}, 6, &k, &e),
                         CORE_E_PI_APPTAG);
        assert_int_equal(e.lba, 111);
        assert_int_equal(e.expected, 0xb0b0);
        k.tab = NULL; /* without the table the mask 0 lets it pass */
        assert_int_equal(core_pi_verify(&f, (struct core_pi_buf){buf, NULL}, 6, &k, &e), CORE_OK);
        /* Outside the table: the host's tag and mask. */
        k.tab = tab;
        k.lba = 96;
        k.app = 0xa0a0;
        k.app_mask = 0xffff;
        buf[5 * 520 + 512 + 3] ^= 1;
        assert_int_equal(core_pi_verify(&f, (struct core_pi_buf){buf, NULL}, 6, &k, &e),
                         CORE_E_PI_APPTAG);
        assert_int_equal(e.lba, 100); /* block 4 is LBA 100 now: in the table, A0A0h, has B0B0h */
        free(tab);
}

/*
 * core_pi_reguard (ORWRITE: a new guard over changed data, tags kept) and
 * core_pi_retag (copy: type 1 reference tags moved to the destination LBA,
 * guard, application and storage tags kept), on 8-byte PI and on 16-byte
 * metadata with the 32b guard, a storage tag and the PI last (the guard
 * covering the metadata bytes before it); escapes left alone.
 */
static void test_reguard_retag(void **st)
{
        (void)st;
        const struct core_pi_fmt fmts[] = {
            {.block_size = 512, .md_size = 8, .type = 1, .pi_first = true},
            {.block_size = 4096, .md_size = 8, .type = 1, .pi_exp = 2, .pi_first = true},
            {.block_size = 512,
             .md_size = 16,
             .type = 1,
             .guard = CORE_PI_GUARD_CRC32C,
             .sts = 16,
             .pi_first = true},
            {.block_size = 512, .md_size = 16, .type = 1, .pi_first = false},
        };
        static uint8_t ext[4 * (4096 + 64)];
        for (size_t k = 0; k < sizeof(fmts) / sizeof(fmts[0]); k++) {
                const struct core_pi_fmt *f = &fmts[k];
                size_t eb = core_pi_ext_block_size(f);
                struct core_pi_buf b = {ext, NULL};
                for (size_t i = 0; i < 4 * eb; i++)
                        ext[i] = (uint8_t)(i * 11 + k);
                core_pi_generate(f, b, 4,
                                 &(struct core_pi_tags){.ref = 10, .app = 0x77, .stag = 5});
                struct core_pi_check all = {.flags = CORE_PI_CHK_GUARD | CORE_PI_CHK_APP |
                                                     CORE_PI_CHK_REF,
                                            .ref = 10,
                                            .app = 0x77,
                                            .app_mask = 0xffff};
                assert_int_equal(core_pi_verify(f, b, 4, &all, NULL), CORE_OK);
                /* Data changed in the second interval: its guard fails, until reguarded. */
                ext[eb + 3] ^= 0x5a;
                struct core_pi_err e;
                assert_int_equal(core_pi_verify(f, b, 4, &all, &e), CORE_E_PI_GUARD);
                assert_int_equal(e.block, 1);
                core_pi_reguard(f, b, 4);
                assert_int_equal(core_pi_verify(f, b, 4, &all, NULL), CORE_OK);
                /* Retag to 500: the old expectation fails on the reference tag only. */
                core_pi_retag(f, b, 4, 500);
                assert_int_equal(core_pi_verify(f, b, 4, &all, &e), CORE_E_PI_REFTAG);
                all.ref = 500;
                assert_int_equal(core_pi_verify(f, b, 4, &all, NULL), CORE_OK);
                /* An escaped tuple stays escaped through both (its bytes untouched). */
                size_t po = f->pi_first ? 0 : f->md_size - core_pi_tuple_size(f);
                uint8_t *md3 = ext + 3 * eb - f->md_size + po; /* block 2's last tuple */
                memset(md3, 0xff, core_pi_tuple_size(f));
                uint8_t keep[16];
                memcpy(keep, md3, core_pi_tuple_size(f));
                core_pi_reguard(f, b, 4);
                core_pi_retag(f, b, 4, 900);
                assert_memory_equal(md3, keep, core_pi_tuple_size(f));
                all.ref = 900;
                assert_int_equal(core_pi_verify(f, b, 4, &all, NULL), CORE_OK);
        }
}

static void test_status_rows(void **st)
{
        (void)st;
        static const struct {
                enum core_status s;
                uint8_t ascq, sc;
        } rows[] = {{CORE_E_PI_GUARD, 0x01, 0x82},
                    {CORE_E_PI_APPTAG, 0x02, 0x83},
                    {CORE_E_PI_REFTAG, 0x03, 0x84}};
        for (unsigned i = 0; i < 3; i++) {
                uint8_t asc = 0, ascq = 0;
                assert_true(scsi_core_sense_code(rows[i].s, &asc, &ascq));
                assert_int_equal(scsi_core_sense_key(rows[i].s), SK_ABORTED_COMMAND);
                assert_int_equal(asc, 0x10);
                assert_int_equal(ascq, rows[i].ascq);
                const struct nvme_status_map *m = nvme_status_map(rows[i].s);
                assert_int_equal(m->sct, NVME_SCT_MEDIA);
                assert_int_equal(m->sc, rows[i].sc);
                assert_true(m->dnr);
                assert_string_not_equal(core_status_name(rows[i].s), "unknown");
                /* Fixed-format sense: VALID, the failing LBA in the INFORMATION field. */
                struct scsi_cmd *cmd = calloc(1, sizeof(*cmd));
                assert_non_null(cmd);
                scsi_status_from_core(cmd, rows[i].s, 0x01020304, true);
                assert_int_equal(cmd->status, SAM_STAT_CHECK_CONDITION);
                assert_true(cmd->sense_len >= 18);
                assert_int_equal(cmd->sense[0], 0xf0);
                assert_int_equal(cmd->sense[2] & 0x0f, SK_ABORTED_COMMAND);
                static const uint8_t info[4] = {1, 2, 3, 4};
                assert_memory_equal(cmd->sense + 3, info, 4);
                assert_int_equal(cmd->sense[12], 0x10);
                assert_int_equal(cmd->sense[13], rows[i].ascq);
                free(cmd);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_crc_vectors), cmocka_unit_test(test_fmt_check),
            cmocka_unit_test(test_layouts),     cmocka_unit_test(test_types_and_checks),
            cmocka_unit_test(test_escapes),     cmocka_unit_test(test_type0),
            cmocka_unit_test(test_layout_ops),  cmocka_unit_test(test_apptab),
            cmocka_unit_test(test_status_rows), cmocka_unit_test(test_reguard_retag),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
