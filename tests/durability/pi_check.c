/*
 * pi-check: the offline half of tests/durability/pi.sh.  Reads a namespace's
 * data file and its metadata store (core/pistore.h: <state_dir>/<name>.pi,
 * md_per_block bytes per block, stored inverted) and, for every LBA in a
 * durable.c journal ("lba gen seq" lines), checks that the stored 8-byte
 * protection information's guard is the T10 CRC of the block's data (the
 * engine's core_pi_crc, ISA-L).  Blocks written but not journaled are counted
 * apart (a write cut by the kill may leave new metadata over old data).
 *
 *   pi-check DATA_FILE PI_FILE JOURNAL [BLOCK_SIZE]
 *
 * Exit 0: every journaled block's guard matches; 1: one does not; 2: error.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/pi.h"

#define MD 8u

int main(int argc, char **argv)
{
        if (argc < 4) {
                fprintf(stderr, "usage: pi-check DATA PI JOURNAL [BLOCK_SIZE]\n");
                return 2;
        }
        uint32_t bs = argc > 4 ? (uint32_t)strtoul(argv[4], NULL, 0) : 512;
        FILE *d = fopen(argv[1], "rb"), *p = fopen(argv[2], "rb"), *j = fopen(argv[3], "r");
        if (!d || !p || !j) {
                perror("open");
                return 2;
        }
        fseek(d, 0, SEEK_END);
        uint64_t nblk = (uint64_t)ftell(d) / bs;
        uint8_t *seen = calloc(nblk ? nblk : 1, 1);
        uint8_t *blk = malloc(bs);
        if (!seen || !blk)
                return 2;
        unsigned long long lba, gen, seq;
        while (fscanf(j, "%llu %llu %llu", &lba, &gen, &seq) == 3)
                if (lba < nblk)
                        seen[lba] = 1;
        uint64_t checked = 0, bad = 0, other = 0, other_bad = 0, escaped = 0;
        for (uint64_t b = 0; b < nblk; b++) {
                uint8_t md[MD];
                memset(md, 0, sizeof(md));
                if (fseek(p, (long)(b * MD), SEEK_SET) == 0 && fread(md, 1, MD, p) != MD)
                        memset(md, 0, sizeof(md)); /* past the end: a hole */
                for (unsigned k = 0; k < MD; k++)
                        md[k] = (uint8_t)~md[k];
                if (fseek(d, (long)(b * bs), SEEK_SET) || fread(blk, 1, bs, d) != bs) {
                        bad++;
                        break;
                }
                bool zero = true;
                for (uint32_t k = 0; k < bs && zero; k++)
                        zero = blk[k] == 0;
                if (md[2] == 0xff && md[3] == 0xff) { /* application tag FFFFh: the escape */
                        escaped++;
                        if (seen[b]) {
                                printf("lba %llu: journaled, but its metadata is the escape\n",
                                       (unsigned long long)b);
                                bad++;
                        }
                        continue;
                }
                uint16_t guard = (uint16_t)(md[0] << 8 | md[1]);
                bool ok = guard == (uint16_t)core_pi_crc(CORE_PI_GUARD_CRC16, blk, bs);
                if (seen[b]) {
                        checked++;
                        if (!ok) {
                                bad++;
                                printf("lba %llu: guard %04x, data's CRC %04x\n",
                                       (unsigned long long)b, guard,
                                       (unsigned)core_pi_crc(CORE_PI_GUARD_CRC16, blk, bs));
                        }
                } else if (!zero) {
                        other++;
                        other_bad += !ok;
                }
        }
        printf("journaled blocks checked: %llu, guard mismatches: %llu; other written blocks: "
               "%llu (mismatches %llu); escaped: %llu\n",
               (unsigned long long)checked, (unsigned long long)bad, (unsigned long long)other,
               (unsigned long long)other_bad, (unsigned long long)escaped);
        free(seen);
        free(blk);
        fclose(d);
        fclose(p);
        fclose(j);
        return bad || !checked ? 1 : 0;
}
