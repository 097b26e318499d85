/*
 * reload-hold-io: an iSCSI host that stays logged in across a config
 * reload (tests/reload/run.sh).  It logs in once with libiscsi's automatic
 * reconnect turned off (a dropped connection then fails the next command
 * instead of being hidden by a new login), and loops over a small region:
 * WRITE(16) a block stamped with the round and LBA, READ(16) it back and
 * compare.  After the first full round it creates READY; it keeps going
 * until STOP exists, then does one last full round reading back every
 * block of the previous round before overwriting, logs out and prints
 * "rounds N blocks M".  Exit status 0 only if every command succeeded and
 * every read matched.
 *
 *   reload-hold-io -u URL -r READY -s STOP [-n BLOCKS]
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

static void stamp(unsigned char *b, uint32_t bs, uint64_t round, uint64_t lba)
{
        for (uint32_t i = 0; i < bs; i += 16) {
                memcpy(b + i, &round, 8);
                memcpy(b + i + 8, &lba, 8);
        }
}

static bool io(struct iscsi_context *ctx, int lun, bool write, uint64_t lba, unsigned char *b,
               uint32_t bs)
{
        struct scsi_task *t = write ? iscsi_write16_sync(ctx, lun, lba, b, bs, bs, 0, 0, 0, 0, 0)
                                    : iscsi_read16_sync(ctx, lun, lba, bs, bs, 0, 0, 0, 0, 0);
        bool ok = t && t->status == SCSI_STATUS_GOOD;
        if (ok && !write) {
                if (t->datain.size != (int)bs)
                        ok = false;
                else
                        memcpy(b, t->datain.data, bs);
        }
        if (!ok)
                fprintf(stderr, "reload-hold-io: %s at LBA %" PRIu64 " failed: %s\n",
                        write ? "WRITE(16)" : "READ(16)", lba, iscsi_get_error(ctx));
        if (t)
                scsi_free_scsi_task(t);
        return ok;
}

int main(int argc, char **argv)
{
        const char *url = NULL, *ready = NULL, *stop = NULL;
        long blocks = 64;
        int c;
        while ((c = getopt(argc, argv, "u:r:s:n:")) != -1) {
                switch (c) {
                case 'u':
                        url = optarg;
                        break;
                case 'r':
                        ready = optarg;
                        break;
                case 's':
                        stop = optarg;
                        break;
                case 'n':
                        blocks = strtol(optarg, NULL, 0);
                        break;
                default:
                        fprintf(stderr, "usage: reload-hold-io -u URL -r READY -s STOP [-n N]\n");
                        return 1;
                }
        }
        if (!url || !ready || !stop || blocks < 1) {
                fprintf(stderr, "reload-hold-io: need -u URL -r READY -s STOP\n");
                return 1;
        }
        struct iscsi_context *ctx = iscsi_create_context("iqn.2026-12.io.slate:reload-hold");
        struct iscsi_url *u = ctx ? iscsi_parse_full_url(ctx, url) : NULL;
        if (!u) {
                fprintf(stderr, "reload-hold-io: bad URL %s\n", url);
                return 1;
        }
        iscsi_set_noautoreconnect(ctx, 1);
        iscsi_set_targetname(ctx, u->target);
        iscsi_set_session_type(ctx, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(ctx, ISCSI_HEADER_DIGEST_NONE);
        if (iscsi_full_connect_sync(ctx, u->portal, u->lun) != 0) {
                fprintf(stderr, "reload-hold-io: login: %s\n", iscsi_get_error(ctx));
                return 1;
        }
        int rc = 1;
        const uint32_t bs = 512;
        unsigned char want[512], got[512];
        uint64_t round = 0;
        bool last = false;
        for (;; round++) {
                for (long i = 0; i < blocks; i++) {
                        uint64_t lba = (uint64_t)i;
                        if (round > 0) { /* the previous round's block is still there */
                                stamp(want, bs, round - 1, lba);
                                if (!io(ctx, u->lun, false, lba, got, bs))
                                        goto out;
                                if (memcmp(want, got, bs) != 0) {
                                        fprintf(stderr,
                                                "reload-hold-io: LBA %" PRIu64 " round %" PRIu64
                                                ": data mismatch\n",
                                                lba, round - 1);
                                        goto out;
                                }
                        }
                        stamp(want, bs, round, lba);
                        if (!io(ctx, u->lun, true, lba, want, bs) ||
                            !io(ctx, u->lun, false, lba, got, bs))
                                goto out;
                        if (memcmp(want, got, bs) != 0) {
                                fprintf(stderr,
                                        "reload-hold-io: LBA %" PRIu64 " round %" PRIu64
                                        ": read back differs\n",
                                        lba, round);
                                goto out;
                        }
                }
                if (round == 0) {
                        FILE *f = fopen(ready, "w");
                        if (f)
                                fclose(f);
                }
                if (last)
                        break;
                if (access(stop, F_OK) == 0)
                        last = true;
        }
        printf("rounds %" PRIu64 " blocks %ld\n", round + 1, blocks);
        rc = 0;
out:
        iscsi_logout_sync(ctx);
        iscsi_destroy_url(u);
        iscsi_destroy_context(ctx);
        return rc;
}
