/*
 * pr-probe: persistent reservations as one SCSI host sees them through one
 * iSCSI path, with libiscsi (the sg_persist of a test without a kernel
 * initiator).  Used by tests/rbd/run.sh to show that a reservation taken
 * through one gateway is honoured by another.
 *
 * Usage: pr-probe URL INITIATOR-NAME STEP...
 *
 * The ISID is fixed (OUI format, qualifier 1), so the same INITIATOR-NAME
 * is the same initiator port in every run and through every gateway.
 * Steps, run in order on one session, each adding one element to the JSON
 * array printed at the end:
 *   reg:KEY / regall:KEY  PERSISTENT RESERVE OUT REGISTER (ALL_TG_PT 0/1)
 *                         with SERVICE ACTION RESERVATION KEY = KEY (hex)
 *   rereg:KEY:N           N REGISTERs replacing KEY with KEY+1, then KEY+1
 *                         with KEY+2...: the first failure's status, or 0
 *   reserve:KEY:TYPE / release:KEY:TYPE / preempt:KEY:SAKEY:TYPE / clear:KEY
 *   keys                  READ KEYS: {"status", "gen", "keys": [hex...]}
 *   resv                  READ RESERVATION: {"status", "gen", "key", "type"}
 *   full                  READ FULL STATUS: {"status", "regs": [{"key",
 *                         "holder", "all_tg_pt", "rtp"}...]}
 *   read / write          READ(10) / WRITE(10) of LBA 0, one block (write: 0x5a bytes)
 *   data                  READ(10) of LBA 0: {"status", "zero": the block is all
 *                         zeroes, "written": all 0x5a (what write wrote)}
 *   crypto-erase          SANITIZE CRYPTOGRAPHIC ERASE, IMMED 0 (ends when done)
 * A command's status is 0 for GOOD, KEY<<16|ASC<<8|ASCQ for CHECK
 * CONDITION, 0x1000000|STATUS otherwise (RESERVATION CONFLICT: 0x1000018),
 * -1 when the command could not be sent.
 */
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe_login.h"

static struct iscsi_context *iscsi;
static int lun;

static uint64_t be64(const uint8_t *p)
{
        uint64_t v = 0;
        for (int i = 0; i < 8; i++)
                v = v << 8 | p[i];
        return v;
}

static uint32_t be32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be64(uint8_t *p, uint64_t v)
{
        for (int i = 7; i >= 0; i--, v >>= 8)
                p[i] = (uint8_t)v;
}

/* One CDB; data-in into in (in_len) or data-out from out (out_len). */
static long run(const uint8_t *cdb, int cdb_len, uint8_t *in, int in_len, const uint8_t *out,
                int out_len, int *got)
{
        enum scsi_xfer_dir dir = in_len    ? SCSI_XFER_READ
                                 : out_len ? SCSI_XFER_WRITE
                                           : SCSI_XFER_NONE;
        struct scsi_task *t =
            scsi_create_task(cdb_len, (unsigned char *)cdb, dir, in_len ? in_len : out_len);
        if (!t)
                return -1;
        struct iscsi_data d = {.size = (size_t)out_len, .data = (unsigned char *)out};
        if (!iscsi_scsi_command_sync(iscsi, lun, t, out_len ? &d : NULL)) {
                scsi_free_scsi_task(t);
                return -1;
        }
        long r = 0;
        if (t->status == SCSI_STATUS_CHECK_CONDITION)
                r = ((long)t->sense.key << 16) | t->sense.ascq;
        else if (t->status != SCSI_STATUS_GOOD)
                r = 0x1000000 | t->status;
        if (got)
                *got = 0;
        if (r == 0 && in && t->datain.size > 0) {
                int n = t->datain.size < in_len ? t->datain.size : in_len;
                memcpy(in, t->datain.data, (size_t)n);
                if (got)
                        *got = n;
        }
        scsi_free_scsi_task(t);
        return r;
}

static long pr_out(int sa, int type, uint64_t key, uint64_t sa_key, int all_tg_pt)
{
        uint8_t p[24] = {0};
        put_be64(p, key);
        put_be64(p + 8, sa_key);
        p[20] = all_tg_pt ? 0x04 : 0;
        uint8_t cdb[10] = {0x5f, (uint8_t)sa, (uint8_t)type, 0, 0, 0, 0, 0, sizeof(p), 0};
        return run(cdb, 10, NULL, 0, p, sizeof(p), NULL);
}

static long pr_in(int sa, uint8_t *b, int len, int *got)
{
        uint8_t cdb[10] = {0x5e, (uint8_t)sa, 0, 0, 0, 0, 0, (uint8_t)(len >> 8), (uint8_t)len, 0};
        return run(cdb, 10, b, len, NULL, 0, got);
}

int main(int argc, char **argv)
{
        if (argc < 3) {
                fprintf(stderr, "usage: pr-probe URL INITIATOR-NAME STEP...\n");
                return 2;
        }
        iscsi = probe_login(argv[1], argv[2], 1, &lun);
        if (!iscsi)
                return 1;
        uint8_t tur[6] = {0};
        for (int i = 0; i < 5 && (run(tur, 6, NULL, 0, NULL, 0, NULL) >> 16) == 6; i++)
                ; /* the power-on and reservation unit attentions */
        int got0 = 0;

        static uint8_t b[8192], blk[4096];
        uint8_t rc10[10] = {0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0};
        int bs = 512;
        if (run(rc10, 10, b, 8, NULL, 0, &got0) == 0 && got0 == 8 && be32(b + 4) <= sizeof(blk))
                bs = (int)be32(b + 4);
        printf("[");
        for (int s = 3; s < argc; s++) {
                const char *st = argv[s];
                unsigned long long k = 0, k2 = 0;
                int type = 0, got = 0;
                if (s > 3)
                        printf(", ");
                if (sscanf(st, "reg:%llx", &k) == 1) {
                        printf("%ld", pr_out(0, 0, 0, k, 0));
                } else if (sscanf(st, "regall:%llx", &k) == 1) {
                        printf("%ld", pr_out(0, 0, 0, k, 1));
                } else if (sscanf(st, "reserve:%llx:%d", &k, &type) == 2) {
                        printf("%ld", pr_out(1, type, k, 0, 0));
                } else if (sscanf(st, "release:%llx:%d", &k, &type) == 2) {
                        printf("%ld", pr_out(2, type, k, 0, 0));
                } else if (sscanf(st, "rereg:%llx:%d", &k, &type) == 2) {
                        long r = 0; /* the first failure, or 0 */
                        for (int i = 0; i < type && !r; i++)
                                r = pr_out(0, 0, k + (unsigned)i, k + (unsigned)i + 1, 0);
                        printf("%ld", r);
                } else if (sscanf(st, "clear:%llx", &k) == 1) {
                        printf("%ld", pr_out(3, 0, k, 0, 0));
                } else if (sscanf(st, "preempt:%llx:%llx:%d", &k, &k2, &type) == 3) {
                        printf("%ld", pr_out(4, type, k, k2, 0));
                } else if (strcmp(st, "keys") == 0) {
                        long r = pr_in(0, b, sizeof(b), &got);
                        printf("{\"status\": %ld, \"gen\": %u, \"keys\": [", r,
                               got >= 8 ? be32(b) : 0);
                        uint32_t n = got >= 8 ? be32(b + 4) / 8 : 0;
                        for (uint32_t i = 0; i < n && 8 + 8 * (int)i + 8 <= got; i++)
                                printf("%s\"%llx\"", i ? ", " : "",
                                       (unsigned long long)be64(b + 8 + 8 * i));
                        printf("]}");
                } else if (strcmp(st, "resv") == 0) {
                        long r = pr_in(1, b, sizeof(b), &got);
                        int have = got >= 24 && be32(b + 4) >= 16;
                        printf("{\"status\": %ld, \"gen\": %u, \"key\": \"%llx\", \"type\": %d}", r,
                               got >= 8 ? be32(b) : 0,
                               have ? (unsigned long long)be64(b + 8) : 0ull,
                               have ? b[21] & 0x0f : 0);
                } else if (strcmp(st, "full") == 0) {
                        long r = pr_in(3, b, sizeof(b), &got);
                        printf("{\"status\": %ld, \"regs\": [", r);
                        uint32_t end = got >= 8 ? 8 + be32(b + 4) : 0;
                        if (end > (uint32_t)got)
                                end = (uint32_t)got;
                        for (uint32_t off = 8, i = 0; off + 24 <= end; i++) {
                                const uint8_t *d = b + off;
                                printf("%s{\"key\": \"%llx\", \"holder\": %d, \"all_tg_pt\": %d, "
                                       "\"rtp\": %u}",
                                       i ? ", " : "", (unsigned long long)be64(d), d[12] & 1,
                                       (d[12] >> 1) & 1, (unsigned)(d[18] << 8 | d[19]));
                                off += 24 + be32(d + 20);
                        }
                        printf("]}");
                } else if (strcmp(st, "read") == 0) {
                        uint8_t cdb[10] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
                        printf("%ld", run(cdb, 10, blk, bs, NULL, 0, NULL));
                } else if (strcmp(st, "write") == 0) {
                        uint8_t cdb[10] = {0x2a, 0, 0, 0, 0, 0, 0, 0, 1, 0};
                        memset(blk, 0x5a, (size_t)bs);
                        printf("%ld", run(cdb, 10, NULL, 0, blk, bs, NULL));
                } else if (strcmp(st, "data") == 0) {
                        uint8_t cdb[10] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
                        memset(blk, 0xee, (size_t)bs);
                        long r = run(cdb, 10, blk, bs, NULL, 0, NULL);
                        int zero = 1, written = 1;
                        for (int i = 0; i < bs; i++) {
                                zero &= blk[i] == 0;
                                written &= blk[i] == 0x5a;
                        }
                        printf("{\"status\": %ld, \"zero\": %d, \"written\": %d}", r, zero,
                               written);
                } else if (strcmp(st, "crypto-erase") == 0) {
                        uint8_t cdb[10] = {0x48, 0x03, 0, 0, 0, 0, 0, 0, 0, 0};
                        printf("%ld", run(cdb, 10, NULL, 0, NULL, 0, NULL));
                } else {
                        fprintf(stderr, "unknown step %s\n", st);
                        return 2;
                }
        }
        printf("]\n");
        iscsi_logout_sync(iscsi);
        iscsi_destroy_context(iscsi);
        return 0;
}
