/*
 * atomic_rw: an RWF_ATOMIC write through O_DIRECT on a block device, read
 * back (Linux 6.11+: pwritev2 with RWF_ATOMIC; the block layer takes the
 * limits from /sys/block/DEV/queue/atomic_write_*, which the NVMe driver
 * fills from NAWUPF and the SCSI disk driver from the Block Limits VPD).
 *
 *   atomic_rw DEVICE UNIT_BYTES OFFSET
 *
 * Writes UNIT_BYTES (a pattern naming this run) at OFFSET with RWF_ATOMIC,
 * reads it back with O_DIRECT and compares; then checks that an atomic
 * write of twice UNIT_BYTES is refused by the kernel (EINVAL: above
 * atomic_write_unit_max).  Prints what it did; exit 0 when both hold.
 * Shared by the NVMe and iSCSI e2e tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef RWF_ATOMIC
#define RWF_ATOMIC 0x00000040
#endif

int main(int argc, char **argv)
{
        if (argc != 4) {
                fprintf(stderr, "usage: atomic_rw DEVICE UNIT_BYTES OFFSET\n");
                return 2;
        }
        size_t unit = strtoull(argv[2], NULL, 0);
        off_t off = (off_t)strtoull(argv[3], NULL, 0);
        if (!unit || unit > (8u << 20)) {
                fprintf(stderr, "bad unit %zu\n", unit);
                return 2;
        }
        int fd = open(argv[1], O_RDWR | O_DIRECT);
        if (fd < 0) {
                perror(argv[1]);
                return 2;
        }
        void *w, *r;
        if (posix_memalign(&w, 4096, 2 * unit) || posix_memalign(&r, 4096, 2 * unit))
                return 2;
        uint32_t seed = (uint32_t)time(NULL) ^ (uint32_t)getpid();
        for (size_t i = 0; i < 2 * unit; i += 4) {
                uint32_t v = seed * 2654435761u + (uint32_t)i;
                memcpy((char *)w + i, &v, 4);
        }
        struct iovec iov = {w, unit};
        ssize_t n = pwritev2(fd, &iov, 1, off, RWF_ATOMIC);
        if (n != (ssize_t)unit) {
                printf("RWF_ATOMIC write of %zu bytes at %lld: %s\n", unit, (long long)off,
                       n < 0 ? strerror(errno) : "short");
                free(w);
                free(r);
                return 1;
        }
        if (pread(fd, r, unit, off) != (ssize_t)unit || memcmp(w, r, unit)) {
                printf("read back of the atomic write differs\n");
                free(w);
                free(r);
                return 1;
        }
        printf("RWF_ATOMIC write of %zu bytes at %lld read back equal\n", unit, (long long)off);
        iov.iov_len = 2 * unit;
        n = pwritev2(fd, &iov, 1, off, RWF_ATOMIC);
        if (n >= 0 || errno != EINVAL) {
                printf("RWF_ATOMIC write of %zu bytes (above the unit): %s, expected EINVAL\n",
                       2 * unit, n >= 0 ? "accepted" : strerror(errno));
                free(w);
                free(r);
                return 1;
        }
        printf("RWF_ATOMIC write of %zu bytes refused: %s\n", 2 * unit, strerror(errno));
        close(fd);
        free(w);
        free(r);
        return 0;
}
