/*
 * libFuzzer target for the protection information engine (core/pi.c):
 * whatever the format parameters and the bytes of the blocks (they come
 * from hosts once the engine is wired in), checking, stripping, splitting
 * and joining must never crash or read past the buffer, and an application
 * tag table built from arbitrary ranges must be refused or usable.
 *
 * Input: 24 bytes of parameters (format, block count, checks, tags, layout),
 * then the blocks' bytes (repeated to fill the exact buffer size, so
 * ASan catches any access past it), then nothing else is read.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/pi.h"
#include "slate/byteorder.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 24)
                return 0;
        const uint8_t *p = data;
        struct core_pi_fmt f = {
            .block_size = 512u << (p[0] & 3),
            .md_size = (uint16_t)(p[1] & 0x3f),
            .type = (uint8_t)(p[2] & 7), /* 4..7 must be refused */
            .guard = (uint8_t)(p[3] & 3),
            .pi_exp = (uint8_t)((p[0] >> 2) & 7),
            .sts = p[4],
            .pi_first = p[5] & 1,
        };
        size_t nblocks = 1 + ((p[5] >> 1) & 3);
        bool separate = p[5] & 0x80;
        struct core_pi_check c = {
            .flags = p[6],
            .ref = slate_get_be(p + 7, 8),
            .app = (uint16_t)slate_get_be(p + 15, 2),
            .app_mask = (uint16_t)slate_get_be(p + 17, 2),
            .lba = slate_get_be(p + 19, 4),
        };
        /* A table of up to 4 ranges around the buffer's LBAs. */
        struct core_pi_apptag_range r[4];
        static struct core_pi_apptab tab;
        unsigned nr = p[23] & 3;
        for (unsigned i = 0; i < nr; i++)
                r[i] = (struct core_pi_apptag_range){c.lba + (p[23] >> (2 + i)) % 5, 1 + i,
                                                     (uint16_t)(i * 0x1111)};
        if (core_pi_apptab_set(&tab, r, nr) == 0) {
                c.tab = &tab;
                uint16_t app;
                (void)core_pi_apptab_lookup(&tab, c.lba + 2, &app);
        }
        data += 24;
        size -= 24;
        if (core_pi_fmt_check(&f, NULL, 0))
                return 0;
        size_t ext = core_pi_ext_block_size(&f) * nblocks, ds = (size_t)f.block_size * nblocks;
        size_t ms = core_pi_md_per_block(&f) * nblocks;
        uint8_t *buf = malloc(ext), *plain = malloc(ds), *md = malloc(ms ? ms : 1),
                *back = malloc(ext);
        if (!buf || !plain || !md || !back)
                abort();
        for (size_t i = 0; i < ext; i++)
                buf[i] = size ? data[i % size] : 0;
        struct core_pi_err e;
        struct core_pi_buf b = {buf, NULL};
        if (separate) {
                core_pi_split(&f, buf, plain, md, nblocks);
                b = (struct core_pi_buf){plain, md};
        }
        enum core_status st = core_pi_verify(&f, b, nblocks, &c, &e);
        if (st != CORE_OK && (e.status != st || e.block >= nblocks))
                abort();
        uint8_t *out = malloc(ds);
        if (!out)
                abort();
        if (core_pi_strip(&f, b, out, nblocks, &c, &e) != st)
                abort();
        /* What insert generates always verifies with the same tags. */
        struct core_pi_tags t = {.ref = c.ref, .app = c.app, .stag = c.lba};
        core_pi_insert(&f, out, (struct core_pi_buf){back, NULL}, nblocks, &t);
        struct core_pi_check all = {.flags = CORE_PI_CHK_GUARD | CORE_PI_CHK_APP | CORE_PI_CHK_REF,
                                    .ref = c.ref,
                                    .app = c.app,
                                    .app_mask = 0xffff};
        if (core_pi_verify(&f, (struct core_pi_buf){back, NULL}, nblocks, &all, NULL) != CORE_OK)
                abort();
        if (!separate) {
                core_pi_split(&f, buf, plain, md, nblocks);
                core_pi_join(&f, plain, md, back, nblocks);
                if (memcmp(back, buf, ext))
                        abort();
        }
        free(out);
        free(buf);
        free(plain);
        free(md);
        free(back);
        return 0;
}
