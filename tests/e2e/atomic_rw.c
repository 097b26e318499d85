/*
 * tests/e2e/atomic_rw.c — an RWF_ATOMIC write through O_DIRECT on a block
 * device, then a read back (issue 8, run inside linuxvm by e2e parts).
 *
 *   atomic_rw DEVICE OFFSET LENGTH [SEED]
 *
 * Writes LENGTH bytes of a pattern derived from SEED at byte OFFSET with
 * pwritev2(..., RWF_ATOMIC) on DEVICE opened O_DIRECT, reads them back
 * with O_DIRECT and compares.  Prints the device's atomic limits from
 * statx (STATX_WRITE_ATOMIC) first.  Exit 0: written atomically and read
 * back; 1: the read back differs or I/O failed; 2: the kernel refused
 * the atomic write (errno printed; EINVAL when it breaks the limits).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef RWF_ATOMIC
#define RWF_ATOMIC 0x00000040 /* linux/fs.h, 6.11 */
#endif
#ifndef STATX_WRITE_ATOMIC
#define STATX_WRITE_ATOMIC 0x00010000U /* linux/stat.h, 6.11 */
#endif

/* struct statx's atomic write fields (6.11) are where older headers have spare words. */
struct statx_aw {
        uint32_t unit_min, unit_max, segments_max;
};

static int atomic_limits(const char *path, struct statx_aw *aw)
{
        struct statx stx;
        memset(&stx, 0, sizeof(stx));
        if (statx(AT_FDCWD, path, 0, STATX_WRITE_ATOMIC, &stx) < 0)
                return -1;
        if (!(stx.stx_mask & STATX_WRITE_ATOMIC))
                return -1;
        /* 6.11 uapi: stx_subvol at 0xa0, then unit_min, unit_max, segments_max */
        const uint8_t *p = (const uint8_t *)&stx;
        memcpy(&aw->unit_min, p + 0xa8, 4);
        memcpy(&aw->unit_max, p + 0xac, 4);
        memcpy(&aw->segments_max, p + 0xb0, 4);
        return 0;
}

int main(int argc, char **argv)
{
        if (argc < 4) {
                fprintf(stderr, "usage: %s DEVICE OFFSET LENGTH [SEED]\n", argv[0]);
                return 1;
        }
        const char *dev = argv[1];
        off_t off = (off_t)strtoull(argv[2], NULL, 0);
        size_t len = (size_t)strtoull(argv[3], NULL, 0);
        unsigned seed = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 0) : 1;
        struct statx_aw aw = {0};

        if (atomic_limits(dev, &aw) == 0)
                printf("statx: atomic_write_unit_min %u unit_max %u segments_max %u\n", aw.unit_min,
                       aw.unit_max, aw.segments_max);
        else
                printf("statx: no STATX_WRITE_ATOMIC (%s)\n", strerror(errno));

        int fd = open(dev, O_RDWR | O_DIRECT);
        if (fd < 0) {
                perror("open");
                return 1;
        }
        uint8_t *w, *r;
        if (posix_memalign((void **)&w, 4096, len) || posix_memalign((void **)&r, 4096, len)) {
                perror("posix_memalign");
                return 1;
        }
        srandom(seed);
        for (size_t i = 0; i < len; i++)
                w[i] = (uint8_t)random();
        struct iovec iov = {.iov_base = w, .iov_len = len};
        int rc = 0;
        ssize_t n = pwritev2(fd, &iov, 1, off, RWF_ATOMIC);
        if (n < 0) {
                printf("pwritev2 RWF_ATOMIC %zu bytes at %lld: %s\n", len, (long long)off,
                       strerror(errno));
                rc = 2;
        } else if ((size_t)n != len) {
                printf("pwritev2 RWF_ATOMIC: short write %zd of %zu\n", n, len);
                rc = 1;
        } else if (pread(fd, r, len, off) != (ssize_t)len) {
                perror("pread");
                rc = 1;
        } else if (memcmp(w, r, len)) {
                printf("read back differs from the atomic write\n");
                rc = 1;
        } else {
                printf("pwritev2 RWF_ATOMIC %zu bytes at %lld: written and read back\n", len,
                       (long long)off);
        }
        close(fd);
        free(w);
        free(r);
        return rc;
}
