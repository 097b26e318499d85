/*
 * libFuzzer target for the atomic-write journal's recovery (core/atomic.c):
 * the bytes a crash, a torn write or a damaged disk can leave in
 * <name>.atomic.  The input after a 9-byte preamble is the record area
 * (from CORE_ATOMIC_REC_START); the harness writes a valid checkpoint
 * header before it (checkpoint sequence from the preamble) and, when the
 * preamble's flag byte says so, fixes up each record's checksum so the
 * fuzzer reaches the checks behind it (ranges, lengths, sequence).
 * When the flag byte's bit 1 is set the namespace has a metadata store
 * (8 bytes per block: protection information), so records carrying
 * metadata after their data are replayed into it too.  Recovery must
 * never write outside the namespace (the data file and the store keep
 * their sizes) and never replay more records than the input holds.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic.h"
#include "rt/crc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NBLOCKS 64u
#define MDPB    8u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (size < 9 || size > (1u << 20))
                return 0;
        struct core_atomic_jhdr h;
        memset(&h, 0, sizeof(h));
        memcpy(h.magic, CORE_ATOMIC_JHDR_MAGIC, 8);
        h.version = 1;
        h.block_size = 512;
        h.gen = 1;
        h.ckpt_seq = data[0] & 0x0f;
        h.crc = rt_crc32c(&h, offsetof(struct core_atomic_jhdr, crc));
        bool fix = data[8] & 1, md = data[8] & 2;
        size_t n = size - 9;
        uint8_t *recs = malloc(n ? n : 1);
        if (!recs)
                return 0;
        memcpy(recs, data + 9, n);
        unsigned records = 0;
        for (size_t off = 0; off + sizeof(struct core_atomic_rec) <= n;) {
                struct core_atomic_rec r;
                memcpy(&r, recs + off, sizeof(r));
                if (r.hdr_len < sizeof(r) || r.data_len > n || r.hdr_len > n - off ||
                    r.data_len > n - off - r.hdr_len)
                        break;
                size_t total = r.hdr_len + r.data_len;
                if (fix) {
                        uint32_t zero = 0;
                        memcpy(recs + off + offsetof(struct core_atomic_rec, crc), &zero, 4);
                        uint32_t c = rt_crc32c(recs + off, total);
                        memcpy(recs + off + offsetof(struct core_atomic_rec, crc), &c, 4);
                }
                records++;
                off += total;
        }
        int jfd = memfd_create("journal", 0), dfd = memfd_create("data", 0),
            pfd = md ? memfd_create("pi", 0) : -1;
        if (jfd < 0 || dfd < 0 || ftruncate(dfd, NBLOCKS * 512) ||
            (md && (pfd < 0 || ftruncate(pfd, NBLOCKS * MDPB))) ||
            pwrite(jfd, &h, sizeof(h), 512) != (ssize_t)sizeof(h) ||
            (n && pwrite(jfd, recs, n, CORE_ATOMIC_REC_START) != (ssize_t)n))
                abort();
        unsigned rep = 0, dis = 0;
        core_atomic_replay_fds_md(jfd, dfd, pfd, MDPB, 9, NBLOCKS, &rep, &dis);
        struct stat st, pst;
        if (fstat(dfd, &st) || st.st_size != NBLOCKS * 512 || rep > records)
                abort();
        if (md && (fstat(pfd, &pst) || pst.st_size != NBLOCKS * MDPB))
                abort();
        if (md)
                close(pfd);
        close(jfd);
        close(dfd);
        free(recs);
        return 0;
}
