/*
 * metrics-io: a known iSCSI workload for the metrics test (tests/metrics/
 * run.sh), a libiscsi initiator with a name of our choosing so the test
 * can find its host series.  It logs in, writes COUNT times BYTES with
 * WRITE(16) (SBC-4 5.40) at consecutive LBAs, optionally sends one WRITE(16)
 * that ends past the capacity and checks that it fails with CHECK
 * CONDITION, ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE (21h/00h),
 * then logs out.  With -w every write must instead fail with DATA PROTECT,
 * WRITE PROTECTED (27h/00h).
 *
 *   metrics-io -u URL -i INITIATOR -n COUNT -b BYTES [-e] [-w]
 *
 * Exit status 0 when every write ended as it should, 1 otherwise.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

int main(int argc, char **argv)
{
        const char *url = NULL, *initiator = "iqn.2026-12.io.slate:metrics-io";
        long count = 0, bytes = 0;
        bool beyond = false, protected = false;
        int c;
        while ((c = getopt(argc, argv, "u:i:n:b:ew")) != -1) {
                switch (c) {
                case 'u':
                        url = optarg;
                        break;
                case 'i':
                        initiator = optarg;
                        break;
                case 'n':
                        count = strtol(optarg, NULL, 0);
                        break;
                case 'b':
                        bytes = strtol(optarg, NULL, 0);
                        break;
                case 'e':
                        beyond = true;
                        break;
                case 'w':
                        protected
                        = true;
                        break;
                default:
                        fprintf(stderr,
                                "usage: metrics-io -u URL -i INITIATOR -n COUNT -b BYTES [-e]\n");
                        return 1;
                }
        }
        if (!url || count < 0 || bytes <= 0 || bytes > (1 << 20)) {
                fprintf(stderr, "metrics-io: need -u URL, -n COUNT >= 0, -b BYTES in (0, 1 MiB]\n");
                return 1;
        }
        struct iscsi_context *ctx = iscsi_create_context(initiator);
        struct iscsi_url *u = ctx ? iscsi_parse_full_url(ctx, url) : NULL;
        if (!u) {
                fprintf(stderr, "metrics-io: bad URL %s\n", url);
                return 1;
        }
        iscsi_set_targetname(ctx, u->target);
        iscsi_set_session_type(ctx, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(ctx, ISCSI_HEADER_DIGEST_NONE);
        if (iscsi_full_connect_sync(ctx, u->portal, u->lun) != 0) {
                fprintf(stderr, "metrics-io: login: %s\n", iscsi_get_error(ctx));
                return 1;
        }
        int rc = 1;
        struct scsi_task *t = iscsi_readcapacity16_sync(ctx, u->lun);
        struct scsi_readcapacity16 *rc16 = NULL;
        if (!t || t->status != SCSI_STATUS_GOOD || !(rc16 = scsi_datain_unmarshall(t))) {
                fprintf(stderr, "metrics-io: READ CAPACITY(16) failed\n");
                goto out;
        }
        uint32_t bs = rc16->block_length;
        uint64_t nblocks = rc16->returned_lba + 1;
        scsi_free_scsi_task(t);
        if (bytes % bs) {
                fprintf(stderr, "metrics-io: %ld bytes is not a multiple of the %u-byte block\n",
                        bytes, bs);
                goto out;
        }
        uint32_t nlb = (uint32_t)(bytes / bs);
        unsigned char *buf = malloc((size_t)bytes);
        if (!buf)
                goto out;
        for (long i = 0; i < bytes; i++)
                buf[i] = (unsigned char)(i * 7 + 1);
        for (long i = 0; i < count; i++) {
                uint64_t lba = ((uint64_t)i * nlb) % (nblocks - nlb);
                t = iscsi_write16_sync(ctx, u->lun, lba, buf, (uint32_t)bytes, bs, 0, 0, 0, 0, 0);
                bool refused = t && t->status == SCSI_STATUS_CHECK_CONDITION &&
                               t->sense.key == SCSI_SENSE_DATA_PROTECTION &&
                               t->sense.ascq == SCSI_SENSE_ASCQ_WRITE_PROTECTED;
                if (!t || (protected ? !refused : t->status != SCSI_STATUS_GOOD)) {
                        if (t)
                                scsi_free_scsi_task(t);
                        fprintf(stderr, "metrics-io: write %ld at %" PRIu64 " failed: %s\n", i, lba,
                                iscsi_get_error(ctx));
                        free(buf);
                        goto out;
                }
                scsi_free_scsi_task(t);
        }
        printf("%s %ld x %ld bytes\n", protected ? "refused (write protected)" : "wrote", count,
               bytes);
        if (beyond) {
                t = iscsi_write16_sync(ctx, u->lun, nblocks - 1, buf, (uint32_t)bytes, bs, 0, 0, 0,
                                       0, 0);
                bool ok = t && t->status == SCSI_STATUS_CHECK_CONDITION &&
                          t->sense.key == SCSI_SENSE_ILLEGAL_REQUEST &&
                          t->sense.ascq == SCSI_SENSE_ASCQ_LBA_OUT_OF_RANGE;
                if (t)
                        scsi_free_scsi_task(t);
                if (!ok) {
                        fprintf(stderr, "metrics-io: a write past the end did not fail with LBA "
                                        "OUT OF RANGE\n");
                        free(buf);
                        goto out;
                }
                printf("write past the end: ILLEGAL REQUEST, LBA OUT OF RANGE\n");
        }
        free(buf);
        rc = 0;
out:
        iscsi_logout_sync(ctx);
        iscsi_destroy_url(u);
        iscsi_destroy_context(ctx);
        return rc;
}
