/*
 * Protection information engine (core/pi.h): generate, verify, insert,
 * strip, split and join PI tuples over buffers of blocks.  The CRCs are
 * ISA-L's (crc16_t10dif, crc32_iscsi through rt/crc.h, and
 * crc64_rocksoft_refl where the library has it); nothing here computes a
 * CRC by hand.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/crc.h>
#include <isa-l/crc64.h>

#include "core/pi.h"
#include "rt/crc.h"
#include "slate/byteorder.h"

typedef unsigned __int128 u128;

/* Bits of the storage+reference space of each guard format. */
static unsigned space_bits(const struct core_pi_fmt *f)
{
        switch (f->guard) {
        case CORE_PI_GUARD_CRC32C:
                return 80;
        case CORE_PI_GUARD_CRC64:
                return 48;
        default:
                return 32;
        }
}

/* Byte offsets of the application tag and the space within a tuple. */
static unsigned app_off(const struct core_pi_fmt *f)
{
        return f->guard == CORE_PI_GUARD_CRC16 ? 2 : f->guard == CORE_PI_GUARD_CRC32C ? 4 : 8;
}

unsigned core_pi_tuple_size(const struct core_pi_fmt *f)
{
        if (f->type == CORE_PI_TYPE0)
                return 0;
        return f->guard == CORE_PI_GUARD_CRC16 ? 8 : 16;
}

unsigned core_pi_ref_bits(const struct core_pi_fmt *f)
{
        unsigned b = space_bits(f) - f->sts;
        return b > 64 ? 64 : b;
}

bool core_pi_have_crc64(void)
{
#ifdef SLATE_HAVE_CRC64_NVME
        return true;
#else
        return false;
#endif
}

static uint32_t interval_size(const struct core_pi_fmt *f)
{
        return f->block_size >> f->pi_exp;
}

size_t core_pi_md_per_block(const struct core_pi_fmt *f)
{
        return (size_t)f->md_size << f->pi_exp;
}

size_t core_pi_ext_block_size(const struct core_pi_fmt *f)
{
        return (size_t)f->block_size + core_pi_md_per_block(f);
}

static int fail(char *err, size_t errlen, int rc, const char *why)
{
        if (err && errlen)
                snprintf(err, errlen, "%s", why);
        return rc;
}

int core_pi_fmt_check(const struct core_pi_fmt *f, char *err, size_t errlen)
{
        if (f->type > CORE_PI_TYPE3)
                return fail(err, errlen, -EINVAL, "protection type must be 0..3");
        if (f->guard > CORE_PI_GUARD_CRC64)
                return fail(err, errlen, -EINVAL, "unknown guard format");
        if (f->block_size < CORE_PI_MIN_INTERVAL || f->block_size > (1u << 20) ||
            (f->block_size & (f->block_size - 1)))
                return fail(err, errlen, -EINVAL,
                            "block size must be a power of two, 512 B..1 MiB");
        if (f->type == CORE_PI_TYPE0) {
                if (f->pi_exp)
                        return fail(err, errlen, -EINVAL, "protection interval without protection");
                return 0;
        }
        if (f->pi_exp > CORE_PI_MAX_EXP || interval_size(f) < CORE_PI_MIN_INTERVAL)
                return fail(err, errlen, -EINVAL, "protection interval below 512 bytes");
        if (f->md_size < core_pi_tuple_size(f))
                return fail(err, errlen, -EINVAL,
                            "metadata smaller than the protection information");
        if (f->sts >= space_bits(f) || space_bits(f) - f->sts > 64)
                return fail(err, errlen, -EINVAL,
                            "storage tag size leaves no 1..64-bit reference tag");
        if (f->guard == CORE_PI_GUARD_CRC64 && !core_pi_have_crc64())
                return fail(err, errlen, -ENOTSUP, "64b guard needs CRC-64/NVME (ISA-L >= 2.31)");
        return 0;
}

/* Running guard CRC: start with crc_init, extend with crc_more, end with crc_final. */
static uint64_t crc_init(unsigned g)
{
        return g == CORE_PI_GUARD_CRC32C ? RT_CRC32C_INIT : 0;
}

static uint64_t crc_more(unsigned g, uint64_t crc, const void *buf, size_t len)
{
        switch (g) {
        case CORE_PI_GUARD_CRC32C:
                return rt_crc32c_update((uint32_t)crc, buf, len);
        case CORE_PI_GUARD_CRC64:
#ifdef SLATE_HAVE_CRC64_NVME
                /* Inverts the seed and the result itself: chains as is. */
                return crc64_rocksoft_refl(crc, buf, len);
#else
                return 0; /* refused by core_pi_fmt_check */
#endif
        default:
                return crc16_t10dif((uint16_t)crc, buf, len);
        }
}

static uint64_t crc_final(unsigned g, uint64_t crc)
{
        return g == CORE_PI_GUARD_CRC32C ? rt_crc32c_final((uint32_t)crc) : crc;
}

uint64_t core_pi_crc(enum core_pi_guard g, const void *buf, size_t len)
{
        return crc_final(g, crc_more(g, crc_init(g), buf, len));
}

/* The guard of one interval: its data, then the metadata before the tuple. */
static uint64_t interval_guard(const struct core_pi_fmt *f, const uint8_t *d, const uint8_t *md,
                               unsigned po)
{
        uint64_t crc = crc_more(f->guard, crc_init(f->guard), d, interval_size(f));
        if (po)
                crc = crc_more(f->guard, crc, md, po);
        return crc_final(f->guard, crc);
}

static unsigned guard_bytes(const struct core_pi_fmt *f)
{
        return app_off(f);
}

static u128 get_space(const struct core_pi_fmt *f, const uint8_t *pi)
{
        unsigned off = app_off(f) + 2, n = space_bits(f) / 8;
        u128 v = 0;
        for (unsigned i = 0; i < n; i++)
                v = (v << 8) | pi[off + i];
        return v;
}

static void put_space(const struct core_pi_fmt *f, uint8_t *pi, u128 v)
{
        unsigned off = app_off(f) + 2, n = space_bits(f) / 8;
        for (unsigned i = n; i-- > 0;) {
                pi[off + i] = (uint8_t)v;
                v >>= 8;
        }
}

static uint64_t ref_mask(const struct core_pi_fmt *f)
{
        unsigned b = core_pi_ref_bits(f);
        return b >= 64 ? UINT64_MAX : ((uint64_t)1 << b) - 1;
}

/* Walks the intervals of a buffer. */
struct walk {
        uint8_t *data, *md;
        size_t dstride, mstride;
        unsigned po; /* tuple offset in the metadata */
};

static void walk_init(const struct core_pi_fmt *f, struct core_pi_buf b, struct walk *w)
{
        uint32_t iv = interval_size(f);
        w->data = b.data;
        if (b.md) {
                w->md = b.md;
                w->dstride = iv;
        } else {
                w->md = b.data + iv;
                w->dstride = (size_t)iv + f->md_size;
        }
        w->mstride = b.md ? f->md_size : w->dstride;
        w->po = f->pi_first ? 0 : f->md_size - core_pi_tuple_size(f);
}

static void put_tuple(const struct core_pi_fmt *f, uint8_t *pi, uint64_t guard, uint16_t app,
                      uint64_t ref, uint64_t stag)
{
        unsigned rb = core_pi_ref_bits(f);
        u128 space = ((u128)stag << rb) | (ref & ref_mask(f));
        if (space_bits(f) < 128)
                space &= ((u128)1 << space_bits(f)) - 1;
        slate_put_be(pi, guard_bytes(f), guard);
        slate_put_be(pi + app_off(f), 2, app);
        put_space(f, pi, space);
}

/* The intervals of nblocks to walk (0 without PI), w set up for them. */
static size_t walk_units(const struct core_pi_fmt *f, struct core_pi_buf b, size_t nblocks,
                         struct walk *w)
{
        if (f->type == CORE_PI_TYPE0)
                return 0;
        walk_init(f, b, w);
        return nblocks << f->pi_exp;
}

void core_pi_generate(const struct core_pi_fmt *f, struct core_pi_buf b, size_t nblocks,
                      const struct core_pi_tags *t)
{
        struct walk w;
        size_t units = walk_units(f, b, nblocks, &w);
        for (size_t u = 0; u < units; u++) {
                uint8_t *d = w.data + u * w.dstride, *md = w.md + u * w.mstride;
                put_tuple(f, md + w.po, interval_guard(f, d, md, w.po), t->app, t->ref + u,
                          t->stag);
        }
}

static bool escaped(const struct core_pi_fmt *f, const uint8_t *pi)
{
        if (slate_get_be(pi + app_off(f), 2) != 0xffff)
                return false;
        if (f->type != CORE_PI_TYPE3)
                return true;
        u128 ones = ((u128)1 << space_bits(f)) - 1;
        return get_space(f, pi) == ones;
}

static enum core_status failed(struct core_pi_err *e, enum core_status st,
                               const struct core_pi_fmt *f, const struct core_pi_check *c, size_t u,
                               uint64_t exp, uint64_t act)
{
        if (e) {
                e->status = st;
                e->block = u >> f->pi_exp;
                e->interval = (uint32_t)(u & ((1u << f->pi_exp) - 1));
                e->lba = c->lba + e->block;
                e->expected = exp;
                e->actual = act;
        }
        return st;
}

enum core_status core_pi_verify(const struct core_pi_fmt *f, struct core_pi_buf b, size_t nblocks,
                                const struct core_pi_check *c, struct core_pi_err *e)
{
        if (f->type == CORE_PI_TYPE0)
                return CORE_OK;
        unsigned flags = c->flags;
        if (f->type == CORE_PI_TYPE3)
                flags &= ~(unsigned)CORE_PI_CHK_REF;
        if (!flags)
                return CORE_OK;
        struct walk w;
        walk_init(f, b, &w);
        size_t units = nblocks << f->pi_exp;
        uint64_t rmask = ref_mask(f);
        for (size_t u = 0; u < units; u++) {
                const uint8_t *d = w.data + u * w.dstride, *md = w.md + u * w.mstride;
                const uint8_t *pi = md + w.po;
                if (escaped(f, pi))
                        continue;
                if (flags & CORE_PI_CHK_GUARD) {
                        uint64_t want = interval_guard(f, d, md, w.po);
                        uint64_t got = slate_get_be(pi, guard_bytes(f));
                        if (want != got)
                                return failed(e, CORE_E_PI_GUARD, f, c, u, want, got);
                }
                if (flags & CORE_PI_CHK_APP) {
                        uint16_t got = (uint16_t)slate_get_be(pi + app_off(f), 2);
                        uint16_t want = c->app, mask = c->app_mask;
                        if (c->tab &&
                            core_pi_apptab_lookup(c->tab, c->lba + (u >> f->pi_exp), &want))
                                mask = 0xffff;
                        if ((got & mask) != (want & mask))
                                return failed(e, CORE_E_PI_APPTAG, f, c, u, want & mask,
                                              got & mask);
                }
                if (flags & CORE_PI_CHK_REF) {
                        uint64_t got = (uint64_t)get_space(f, pi) & rmask;
                        uint64_t want = (c->ref + u) & rmask;
                        if (got != want)
                                return failed(e, CORE_E_PI_REFTAG, f, c, u, want, got);
                }
        }
        return CORE_OK;
}

void core_pi_insert(const struct core_pi_fmt *f, const void *src, struct core_pi_buf dst,
                    size_t nblocks, const struct core_pi_tags *t)
{
        uint32_t iv = interval_size(f);
        if (f->type == CORE_PI_TYPE0) {
                /* No PI: the data, and zeroed metadata if there is any. */
                if (!dst.md) {
                        core_pi_join(f, src, NULL, dst.data, nblocks);
                        return;
                }
                memcpy(dst.data, src, nblocks * f->block_size);
                memset(dst.md, 0, nblocks * core_pi_md_per_block(f));
                return;
        }
        struct walk w;
        walk_init(f, dst, &w);
        size_t units = nblocks << f->pi_exp;
        unsigned ts = core_pi_tuple_size(f);
        for (size_t u = 0; u < units; u++) {
                const uint8_t *s = (const uint8_t *)src + u * iv;
                uint8_t *d = w.data + u * w.dstride, *md = w.md + u * w.mstride;
                /* memcpy then the CRC: ISA-L's crc16_t10dif_copy measured about half as
                 * fast here (bench/pi). */
                memcpy(d, s, iv);
                uint64_t crc = crc_more(f->guard, crc_init(f->guard), d, iv);
                memset(md, 0, w.po);
                memset(md + w.po + ts, 0, f->md_size - w.po - ts);
                if (w.po)
                        crc = crc_more(f->guard, crc, md, w.po);
                put_tuple(f, md + w.po, crc_final(f->guard, crc), t->app, t->ref + u, t->stag);
        }
}

void core_pi_reguard(const struct core_pi_fmt *f, struct core_pi_buf b, size_t nblocks)
{
        struct walk w;
        size_t units = walk_units(f, b, nblocks, &w);
        for (size_t u = 0; u < units; u++) {
                uint8_t *d = w.data + u * w.dstride, *md = w.md + u * w.mstride;
                if (escaped(f, md + w.po))
                        continue;
                slate_put_be(md + w.po, guard_bytes(f), interval_guard(f, d, md, w.po));
        }
}

void core_pi_retag(const struct core_pi_fmt *f, struct core_pi_buf b, size_t nblocks, uint64_t ref)
{
        struct walk w;
        size_t units = walk_units(f, b, nblocks, &w);
        uint64_t rmask = ref_mask(f);
        for (size_t u = 0; u < units; u++) {
                uint8_t *pi = w.md + u * w.mstride + w.po;
                if (escaped(f, pi))
                        continue;
                u128 space = get_space(f, pi);
                space = (space & ~(u128)rmask) | ((ref + u) & rmask);
                put_space(f, pi, space);
        }
}

enum core_status core_pi_strip(const struct core_pi_fmt *f, struct core_pi_buf src, void *dst,
                               size_t nblocks, const struct core_pi_check *c, struct core_pi_err *e)
{
        if (c) {
                enum core_status st = core_pi_verify(f, src, nblocks, c, e);
                if (st != CORE_OK)
                        return st;
        }
        if (src.md)
                memcpy(dst, src.data, nblocks * f->block_size);
        else
                core_pi_split(f, src.data, dst, NULL, nblocks);
        return CORE_OK;
}

void core_pi_split(const struct core_pi_fmt *f, const void *ext, void *data, void *md,
                   size_t nblocks)
{
        uint32_t iv = f->type == CORE_PI_TYPE0 ? f->block_size : interval_size(f);
        size_t units = f->type == CORE_PI_TYPE0 ? nblocks : nblocks << f->pi_exp;
        size_t stride = (size_t)iv + f->md_size;
        const uint8_t *s = ext;
        for (size_t u = 0; u < units; u++) {
                memcpy((uint8_t *)data + u * iv, s + u * stride, iv);
                if (md)
                        memcpy((uint8_t *)md + u * f->md_size, s + u * stride + iv, f->md_size);
        }
}

void core_pi_join(const struct core_pi_fmt *f, const void *data, const void *md, void *ext,
                  size_t nblocks)
{
        uint32_t iv = f->type == CORE_PI_TYPE0 ? f->block_size : interval_size(f);
        size_t units = f->type == CORE_PI_TYPE0 ? nblocks : nblocks << f->pi_exp;
        size_t stride = (size_t)iv + f->md_size;
        uint8_t *d = ext;
        for (size_t u = 0; u < units; u++) {
                memcpy(d + u * stride, (const uint8_t *)data + u * iv, iv);
                if (md)
                        memcpy(d + u * stride + iv, (const uint8_t *)md + u * f->md_size,
                               f->md_size);
                else
                        memset(d + u * stride + iv, 0, f->md_size);
        }
}

static int range_cmp(const void *a, const void *b)
{
        const struct core_pi_apptag_range *x = a, *y = b;
        return x->lba < y->lba ? -1 : x->lba > y->lba;
}

int core_pi_apptab_set(struct core_pi_apptab *t, const struct core_pi_apptag_range *r, size_t n)
{
        struct core_pi_apptab tmp;
        tmp.n = 0;
        for (size_t i = 0; i < n; i++) {
                if (!r[i].count)
                        continue;
                if (r[i].count - 1 > UINT64_MAX - r[i].lba || tmp.n == CORE_PI_APPTAB_MAX)
                        return -EINVAL;
                tmp.r[tmp.n++] = r[i];
        }
        qsort(tmp.r, tmp.n, sizeof(tmp.r[0]), range_cmp);
        for (uint32_t i = 1; i < tmp.n; i++)
                if (tmp.r[i].lba <= tmp.r[i - 1].lba + (tmp.r[i - 1].count - 1))
                        return -EINVAL;
        *t = tmp;
        return 0;
}

bool core_pi_apptab_lookup(const struct core_pi_apptab *t, uint64_t lba, uint16_t *app)
{
        uint32_t lo = 0, hi = t->n; /* first range starting after lba */
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (t->r[mid].lba <= lba)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (!lo)
                return false;
        const struct core_pi_apptag_range *r = &t->r[lo - 1];
        if (lba - r->lba >= r->count)
                return false;
        *app = r->app;
        return true;
}
