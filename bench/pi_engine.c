/*
 * bench/pi's engine: the protection information engine (core/pi.c) against
 * plain memcpy, in one run, on this machine.  For each guard format and
 * I/O size (4 KiB, 128 KiB; 4096-byte blocks, extended LBAs):
 *   memcpy       the data copied once (what a transfer without PI costs here)
 *   insert       write path, PRACT: copy + generate (core_pi_insert)
 *   strip        read path, PRACT: verify + copy (core_pi_strip with all checks)
 *   gen+verify   in place, the data already where it goes
 * as GB/s of user data and the ratio of each to memcpy's time (>1: slower).
 * Each figure is the best of 5 rounds (the methods take turns), as the
 * machine is shared.  Asserts nothing (bench/README.md).
 * Usage: pi-bench [seconds per method and row, default 1]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/pi.h"

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

enum { M_MEMCPY, M_INSERT, M_STRIP, M_GENVER, M_N };
static const char *const mname[M_N] = {"memcpy", "insert", "strip", "gen+verify"};

static volatile unsigned sink;

/* Bytes of user data per second for one method. */
static double run(int m, const struct core_pi_fmt *f, size_t nb, uint8_t *plain, uint8_t *ext,
                  uint8_t *out, size_t nbuf, double secs)
{
        size_t ds = nb * f->block_size, es = nb * core_pi_ext_block_size(f);
        const struct core_pi_tags t = {.ref = 0, .app = 0x1234};
        struct core_pi_check c = {.flags = CORE_PI_CHK_GUARD | CORE_PI_CHK_APP | CORE_PI_CHK_REF,
                                  .app = 0x1234,
                                  .app_mask = 0xffff};
        for (size_t i = 0; i < nbuf; i++)
                core_pi_insert(f, plain + i * ds, (struct core_pi_buf){ext + i * es, NULL}, nb, &t);
        size_t ios = 0;
        double t0 = now(), el;
        do {
                for (int k = 0; k < 64; k++, ios++) {
                        size_t i = ios % nbuf;
                        struct core_pi_buf b = {ext + i * es, NULL};
                        switch (m) {
                        case M_MEMCPY:
                                memcpy(out + i * ds, plain + i * ds, ds);
                                break;
                        case M_INSERT:
                                core_pi_insert(f, plain + i * ds, b, nb, &t);
                                break;
                        case M_STRIP:
                                sink += core_pi_strip(f, b, out + i * ds, nb, &c, NULL);
                                break;
                        default:
                                core_pi_generate(f, b, nb, &t);
                                sink += core_pi_verify(f, b, nb, &c, NULL);
                        }
                }
                el = now() - t0;
        } while (el < secs);
        return (double)ios * (double)ds / el;
}

int main(int argc, char **argv)
{
        double secs = argc > 1 ? atof(argv[1]) : 1.0;
        static const struct {
                const char *name;
                struct core_pi_fmt f;
        } fmts[] = {
            {"crc16 (T10, NVMe 16b)",
             {.block_size = 4096, .md_size = 8, .type = 1, .guard = CORE_PI_GUARD_CRC16}},
            {"crc32c (NVMe 32b)",
             {.block_size = 4096,
              .md_size = 16,
              .type = 1,
              .guard = CORE_PI_GUARD_CRC32C,
              .sts = 16}},
            {"crc64 (NVMe 64b)",
             {.block_size = 4096, .md_size = 16, .type = 1, .guard = CORE_PI_GUARD_CRC64}},
        };
        static const size_t sizes[] = {4096, 128 * 1024};
        printf("%-22s %7s %10s %10s %10s %10s   %s\n", "guard", "io", mname[0], mname[1], mname[2],
               mname[3], "ratio to memcpy (insert strip gen+verify)");
        for (size_t g = 0; g < sizeof(fmts) / sizeof(fmts[0]); g++) {
                const struct core_pi_fmt *f = &fmts[g].f;
                char err[128];
                if (core_pi_fmt_check(f, err, sizeof(err))) {
                        printf("%-22s n/a: %s\n", fmts[g].name, err);
                        continue;
                }
                for (size_t s = 0; s < 2; s++) {
                        size_t nb = sizes[s] / f->block_size;
                        size_t nbuf = (4u << 20) / sizes[s]; /* a 4 MiB working set */
                        uint8_t *plain = malloc(nbuf * sizes[s]), *out = malloc(nbuf * sizes[s]);
                        uint8_t *ext = malloc(nbuf * nb * core_pi_ext_block_size(f));
                        if (!plain || !out || !ext)
                                return 1;
                        for (size_t i = 0; i < nbuf * sizes[s]; i++)
                                plain[i] = (uint8_t)(i * 131 + 7);
                        memset(out, 0, nbuf * sizes[s]);
                        double r[M_N];
                        /* Best of 5 rounds, the methods interleaved: the machine is shared. */
                        for (int m = 0; m < M_N; m++)
                                r[m] = 0;
                        for (int round = 0; round < 5; round++)
                                for (int m = 0; m < M_N; m++) {
                                        double v = run(m, f, nb, plain, ext, out, nbuf, secs / 5);
                                        r[m] = v > r[m] ? v : r[m];
                                }
                        printf("%-22s %6zuK %8.2fGB/s %7.2fGB/s %7.2fGB/s %7.2fGB/s   %.2f %.2f "
                               "%.2f\n",
                               fmts[g].name, sizes[s] / 1024, r[0] / 1e9, r[1] / 1e9, r[2] / 1e9,
                               r[3] / 1e9, r[0] / r[1], r[0] / r[2], r[0] / r[3]);
                        free(plain);
                        free(out);
                        free(ext);
                }
        }
        return 0;
}
