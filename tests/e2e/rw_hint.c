/*
 * rw_hint DEV OFFSET LEN HINT BYTE: set the write-lifetime hint HINT
 * (fcntl F_SET_RW_HINT: 1 none, 2 short, 3 medium, 4 long, 5 extreme) on
 * the block device DEV, then write LEN bytes of BYTE at OFFSET with
 * O_DIRECT (the block layer takes the inode's hint into every bio; the SCSI
 * disk driver of Linux 6.9+ turns it into the GROUP NUMBER of the WRITE
 * CDB when the device has permanent streams) and fsync.  Used by the e2e
 * part tests/e2e/cross.d/75-streams-scsi.sh in linuxvm.  Exit 0 ok, 1
 * usage or open, 2 fcntl refused, 3 write failed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef F_SET_RW_HINT
#define F_SET_RW_HINT (1024 + 12)
#endif

int main(int argc, char **argv)
{
        if (argc != 6) {
                fprintf(stderr, "usage: rw_hint DEV OFFSET LEN HINT BYTE\n");
                return 1;
        }
        off_t off = strtoll(argv[2], NULL, 0);
        size_t len = strtoull(argv[3], NULL, 0);
        uint64_t hint = strtoull(argv[4], NULL, 0);
        int byte = (int)strtol(argv[5], NULL, 0);
        int fd = open(argv[1], O_WRONLY | O_DIRECT);
        if (fd < 0) {
                perror("open");
                return 1;
        }
        if (fcntl(fd, F_SET_RW_HINT, &hint) < 0) {
                perror("fcntl F_SET_RW_HINT");
                return 2;
        }
        void *buf;
        if (posix_memalign(&buf, 4096, len)) {
                close(fd);
                return 1;
        }
        memset(buf, byte, len);
        ssize_t n = pwrite(fd, buf, len, off);
        if (n != (ssize_t)len || fsync(fd) < 0) {
                perror("pwrite");
                return 3;
        }
        free(buf);
        close(fd);
        return 0;
}
