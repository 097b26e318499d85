/*
 * alua-probe: what a SCSI host reads of implicit ALUA (SPC-5 5.16) through
 * one iSCSI path, with libiscsi (the sg_rtpg / sg_inq -p 0x83 of a test
 * without a kernel initiator).
 *
 * Usage: alua-probe URL [WAIT_S]
 *
 * Prints one JSON object: the standard INQUIRY TPGS field; VPD 83h's
 * relative target port (type 4) and target port group (type 5); REPORT
 * TARGET PORT GROUPS in both formats (length only and extended header):
 * the group, its asymmetric access state and its one port; and the sense of
 * TEST UNIT READY and of a one-block READ(10) (0 = GOOD, else
 * KEY<<16|ASC<<8|ASCQ).  With WAIT_S it prints READY on a line first, then
 * sends TEST UNIT READY every 100 ms for at most WAIT_S seconds until one
 * reports the unit attention ASYMMETRIC ACCESS STATE CHANGED (2Ah/06h),
 * and adds "ua" (its sense, or 0) and the state RTPG reports after it.
 */
#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "probe_login.h"

static struct iscsi_context *iscsi;
static int lun;

/* Run one CDB (data-in of len bytes into out); GOOD -> 0, else the sense as K<<16|ASC<<8|ASCQ. */
static long run(const uint8_t *cdb, int cdb_len, uint8_t *out, int len, int *got)
{
        struct scsi_task *t = scsi_create_task(cdb_len, (unsigned char *)cdb,
                                               len ? SCSI_XFER_READ : SCSI_XFER_NONE, len);
        if (!t)
                return -1;
        if (!iscsi_scsi_command_sync(iscsi, lun, t, NULL)) {
                scsi_free_scsi_task(t);
                return -1;
        }
        long r = 0;
        if (t->status == SCSI_STATUS_CHECK_CONDITION)
                r = ((long)t->sense.key << 16) | t->sense.ascq;
        else if (t->status != SCSI_STATUS_GOOD)
                r = 0x1000000 | t->status;
        if (r == 0 && out && t->datain.size > 0) {
                int n = t->datain.size < len ? t->datain.size : len;
                memcpy(out, t->datain.data, (size_t)n);
                if (got)
                        *got = n;
        }
        scsi_free_scsi_task(t);
        return r;
}

static long tur(void)
{
        uint8_t cdb[6] = {0};
        return run(cdb, 6, NULL, 0, NULL);
}

/* REPORT TARGET PORT GROUPS in format fmt: the first group's id, state and first port. */
static long rtpg(int fmt, int *tpg, int *state, int *port, int *count)
{
        uint8_t cdb[12] = {0xa3, (uint8_t)(0x0a | (fmt << 5)), 0, 0, 0, 0, 0, 0, 4, 0, 0, 0};
        uint8_t b[1024];
        int got = 0;
        long r = run(cdb, 12, b, sizeof(b), &got);
        if (r)
                return r;
        int hdr = fmt ? 8 : 4;
        if (got < hdr + 12 || (fmt && b[4] != 0x10))
                return -2;
        uint8_t *d = b + hdr;
        *state = d[0] & 0x0f;
        *tpg = (d[2] << 8) | d[3];
        *count = d[7];
        *port = (d[10] << 8) | d[11];
        return 0;
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: alua-probe URL [WAIT_S]\n");
                return 2;
        }
        int wait_s = argc > 2 ? atoi(argv[2]) : 0;
        iscsi = probe_login(argv[1], "iqn.2024-01.org.slate:alua-probe", -1, &lun);
        if (!iscsi)
                return 1;
        for (int i = 0; i < 5 && (tur() >> 16) == SCSI_SENSE_UNIT_ATTENTION; i++)
                ; /* the power-on unit attention */

        uint8_t inq[96] = {0}, vpd[1024] = {0};
        int got = 0;
        uint8_t cdb_inq[6] = {0x12, 0, 0, 0, 96, 0};
        long r = run(cdb_inq, 6, inq, sizeof(inq), &got);
        int tpgs = r ? -1 : (inq[5] >> 4) & 3;
        uint8_t cdb_vpd[6] = {0x12, 1, 0x83, 0x04, 0x00, 0};
        int relport = -1, vtpg = -1;
        if (!run(cdb_vpd, 6, vpd, sizeof(vpd), &got)) {
                int len = 4 + ((vpd[2] << 8) | vpd[3]);
                for (int off = 4; off + 4 <= len && off + 4 <= got; off += 4 + vpd[off + 3]) {
                        const uint8_t *d = vpd + off;
                        int type = d[1] & 0x0f, assoc = (d[1] >> 4) & 3;
                        if (assoc == 1 && type == 4)
                                relport = (d[6] << 8) | d[7];
                        if (assoc == 1 && type == 5)
                                vtpg = (d[6] << 8) | d[7];
                }
        }
        int tpg0 = -1, st0 = -1, port0 = -1, n0 = -1, tpg1 = -1, st1 = -1, port1 = -1, n1 = -1;
        long r0 = rtpg(0, &tpg0, &st0, &port0, &n0);
        long r1 = rtpg(1, &tpg1, &st1, &port1, &n1);
        long t = tur();
        uint8_t cdb_rd[10] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
        uint8_t blk[512];
        long rd = run(cdb_rd, 10, blk, sizeof(blk), &got);
        printf("{\"tpgs\": %d, \"vpd_relport\": %d, \"vpd_tpg\": %d, \"rtpg_status\": %ld, "
               "\"rtpg_ext_status\": %ld, \"tpg\": %d, \"state\": %d, \"port\": %d, \"ports\": %d, "
               "\"ext_tpg\": %d, \"ext_state\": %d, \"ext_port\": %d, \"tur\": %ld, \"read\": %ld",
               tpgs, relport, vtpg, r0, r1, tpg0, st0, port0, n0, tpg1, st1, port1, t, rd);
        if (wait_s > 0) {
                printf("}\nREADY\n");
                fflush(stdout);
                long ua = 0;
                for (int i = 0; i < wait_s * 10 && !ua; i++) {
                        long s = tur();
                        if (s >> 16 == SCSI_SENSE_UNIT_ATTENTION)
                                ua = s;
                        else
                                usleep(100000);
                }
                int tpg2 = -1, st2 = -1, port2 = -1, n2 = -1;
                rtpg(1, &tpg2, &st2, &port2, &n2);
                long rd2 = run(cdb_rd, 10, blk, sizeof(blk), &got);
                printf("{\"ua\": %ld, \"state_after\": %d, \"read_after\": %ld", ua, st2, rd2);
        }
        printf("}\n");
        iscsi_logout_sync(iscsi);
        iscsi_destroy_context(iscsi);
        return 0;
}
