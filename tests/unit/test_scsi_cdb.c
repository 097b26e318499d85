/*
 * Unit tests for the SCSI personality's synchronous parse step (SPC-5,
 * SBC-4): LBA range checks including 64-bit overflow, reserved bits and
 * the sense-key-specific field pointer, fixed and descriptor sense
 * formats, unit attentions, unmapped LUNs, EDTL truncation, and a REPORT
 * SUPPORTED OPERATION CODES round trip against the opcode table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "slate/byteorder.h"
#include "scsi/internal.h"

#define NBLOCKS 1000u

static struct core_ns ns;
static struct scsi_target tgt;
static struct scsi_nexus nx;
static struct scsi_cmd cmd;
static uint8_t *buf;

static int setup(void **state)
{
        (void)state;
        memset(&ns, 0, sizeof(ns));
        strcpy(ns.name, "t0");
        ns.block_size = 512;
        ns.block_shift = 9;
        ns.num_blocks = NBLOCKS;
        ns.be.alloc_unit = 4096; /* a file system's block: OPTIMAL UNMAP GRANULARITY 8 */
        for (int i = 0; i < 16; i++)
                ns.uuid[i] = (uint8_t)(0x10 + i);
        ns.eui64 = 0x0102030405060708ull;
        pthread_mutex_init(&ns.lock, NULL);
        atomic_init(&ns.refs, 1);
        scsi_target_init(&tgt, "iqn.2024-01.org.slate:t", 1);
        atomic_store(&tgt.luns[0], &ns);
        scsi_nexus_init(&nx, &tgt, "iqn.init,i,0x1", "iqn.2024-01.org.slate:t,t,0x1", NULL, 0);
        atomic_store(&nx.ua[0], 0); /* most tests start without the power-on UA */
        if (!buf)
                buf = calloc(1, 2 * CORE_MAX_TRANSFER_BYTES);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        scsi_nexus_fini(&nx);
        scsi_target_fini(&tgt);
        free(ns.scsi_state);
        ns.scsi_state = NULL;
        return 0;
}

static enum scsi_parse_result run(const uint8_t *cdb, size_t len, uint32_t edtl, uint64_t lun)
{
        memset(&cmd, 0, sizeof(cmd));
        memcpy(cmd.cdb, cdb, len);
        cmd.cdb_len = 16;
        cmd.lun = lun;
        cmd.nexus = &nx;
        cmd.edtl = edtl;
        cmd.buf = buf;
        cmd.buf_len = 2 * CORE_MAX_TRANSFER_BYTES;
        return scsi_cmd_parse(&cmd);
}

static void expect_sense(uint8_t key, uint8_t asc, uint8_t ascq)
{
        assert_int_equal(cmd.status, SAM_STAT_CHECK_CONDITION);
        if (cmd.sense[0] == 0x72) {
                assert_int_equal(cmd.sense[1], key);
                assert_int_equal(cmd.sense[2], asc);
                assert_int_equal(cmd.sense[3], ascq);
        } else {
                assert_int_equal(cmd.sense[0] & 0x7f, 0x70);
                assert_int_equal(cmd.sense[2] & 0x0f, key);
                assert_int_equal(cmd.sense[12], asc);
                assert_int_equal(cmd.sense[13], ascq);
        }
}

static void put16(uint8_t *cdb, uint8_t op, uint64_t lba, uint32_t nlb)
{
        memset(cdb, 0, 16);
        cdb[0] = op;
        slate_put_be(cdb + 2, 8, lba);
        slate_put_be(cdb + 10, 4, nlb);
}

static void test_lba_range(void **state)
{
        uint8_t cdb[16];
        (void)state;
        put16(cdb, 0x88, UINT64_MAX, 1); /* lba + nlb wraps to 0 */
        assert_int_equal(run(cdb, 16, 512, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x21, 0x00);
        put16(cdb, 0x88, NBLOCKS - 1, 2);
        assert_int_equal(run(cdb, 16, 1024, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x21, 0x00);
        put16(cdb, 0x88, NBLOCKS - 1, 1);
        assert_int_equal(run(cdb, 16, 512, 0), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.op, CORE_OP_READ);
        assert_int_equal(cmd.req.lba, NBLOCKS - 1);
        assert_int_equal(cmd.req.nlb, 1);
        assert_int_equal(cmd.xfer_len, 512);
        put16(cdb, 0x8a, NBLOCKS, 0); /* zero blocks at the end: fine */
        assert_int_equal(run(cdb, 16, 0, 0), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        put16(cdb, 0x8a, NBLOCKS + 1, 0);
        assert_int_equal(run(cdb, 16, 0, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x21, 0x00);
        /* WRITE SAME: range checked first, then MAXIMUM WRITE SAME LENGTH (65535). */
        put16(cdb, 0x93, 1, UINT32_MAX);
        assert_int_equal(run(cdb, 16, 512, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x21, 0x00);
        ns.num_blocks = 1u << 20;
        put16(cdb, 0x93, 0, SCSI_MAX_WRITE_SAME_LEN + 1);
        assert_int_equal(run(cdb, 16, 512, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        put16(cdb, 0x93, 0, 0); /* to the end: more than the maximum */
        assert_int_equal(run(cdb, 16, 512, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        put16(cdb, 0x93, (1u << 20) - SCSI_MAX_WRITE_SAME_LEN, 0);
        assert_int_equal(run(cdb, 16, 512, 0), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.nlb, SCSI_MAX_WRITE_SAME_LEN);
        ns.num_blocks = NBLOCKS;
}

static void test_reserved_bits_field_pointer(void **state)
{
        uint8_t cdb[16] = {0x28, 0x20, 0, 0, 0, 0, 0, 0, 1, 0};
        (void)state;
        /* RDPROTECT without protection information */
        assert_int_equal(run(cdb, 10, 512, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(cmd.sense[15], 0x80 | 0x40 | 0x08 | 7);
        assert_int_equal(cmd.sense[16], 0);
        assert_int_equal(cmd.sense[17], 1);
        /* NACA in the control byte */
        memset(cdb, 0, sizeof(cdb));
        cdb[0] = 0x28;
        cdb[8] = 1;
        cdb[9] = 0x04;
        assert_int_equal(run(cdb, 10, 512, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(cmd.sense[17], 9);
        /* WRITE SAME with UNMAP: thin provisioning is not advertised */
        put16(cdb, 0x93, 0, 1);
        cdb[1] = 0x08;
        assert_int_equal(run(cdb, 16, 512, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        /* Transfer longer than the advertised maximum (range is checked first) */
        ns.num_blocks = 1u << 30;
        put16(cdb, 0x88, 0, CORE_MAX_TRANSFER_BYTES / 512 + 1);
        assert_int_equal(run(cdb, 16, CORE_MAX_TRANSFER_BYTES + 512, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(cmd.sense[17], 10);
        ns.num_blocks = NBLOCKS;
        /* INQUIRY EVPD=0 with a page code */
        memset(cdb, 0, sizeof(cdb));
        cdb[0] = 0x12;
        cdb[2] = 0x80;
        cdb[4] = 0xff;
        assert_int_equal(run(cdb, 6, 255, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(cmd.sense[17], 2);
}

static void test_unsupported(void **state)
{
        uint8_t cdb[16] = {0xa2}; /* SECURITY PROTOCOL IN: not offered */
        (void)state;
        assert_int_equal(run(cdb, 16, 0, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x20, 0x00);
        memset(cdb, 0, sizeof(cdb));
        cdb[0] = 0x42; /* UNMAP on a fully provisioned LU */
        slate_put_be(cdb + 7, 2, 24);
        assert_int_equal(run(cdb, 10, 24, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x20, 0x00);
}

/* Logical block provisioning: what a thin LU advertises and what UNMAP/GET LBA STATUS check. */
static void test_thin(void **state)
{
        uint8_t cdb[16];
        (void)state;
        /* Fully provisioned: LBPME=0, no B2h, WRITE SAME with UNMAP refused, all mapped. */
        put16(cdb, 0x9e, 0, 0);
        cdb[1] = 0x10;
        cdb[13] = 32;
        run(cdb, 16, 32, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[14] & 0xc0, 0);
        memset(cdb, 0, 16);
        cdb[0] = 0x41;
        cdb[1] = 0x08;
        cdb[8] = 1;
        assert_int_equal(run(cdb, 10, 512, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        put16(cdb, 0x9e, 10, 0);
        cdb[1] = 0x12;
        cdb[13] = 64;
        run(cdb, 16, 64, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf), 20);
        assert_int_equal(slate_be64(buf + 8), 10);
        assert_int_equal(slate_be32(buf + 16), NBLOCKS - 10);
        assert_int_equal(buf[20], 0); /* mapped */

        ns.thin = true;
        put16(cdb, 0x9e, 0, 0);
        cdb[1] = 0x10;
        cdb[13] = 32;
        run(cdb, 16, 32, 0);
        assert_int_equal(buf[14] & 0xc0, 0xc0); /* LBPME, LBPRZ */
        /* VPD 00h lists B2h; B2h: LBPU LBPWS LBPWS10 LBPRZ=001b, thin; B0h unmap limits. */
        uint8_t inq[6] = {0x12, 0x01, 0x00, 0x00, 0xff, 0};
        run(inq, 6, 255, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_non_null(memchr(buf + 4, 0xb2, buf[3]));
        inq[2] = 0xb2;
        run(inq, 6, 255, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[5], 0xe4);
        assert_int_equal(buf[6] & 0x07, 0x02);
        inq[2] = 0xb0;
        run(inq, 6, 255, 0);
        assert_int_equal(slate_be32(buf + 24), SCSI_LBP_MAX_UNMAP_DESC);
        assert_int_equal(slate_be32(buf + 28), 8);
        /* WRITE SAME with UNMAP runs; ANCHOR is refused (ANC_SUP=0). */
        assert_int_equal(run((uint8_t[16]){0x41, 0x08, 0, 0, 0, 0, 0, 0, 1, 0}, 10, 512, 0),
                         SCSI_PARSE_EXEC);
        assert_int_equal(run((uint8_t[16]){0x41, 0x18, 0, 0, 0, 0, 0, 0, 1, 0}, 10, 512, 0),
                         SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        /* UNMAP: ANCHOR refused, short parameter list, empty list is GOOD, else data-out. */
        memset(cdb, 0, 16);
        cdb[0] = 0x42;
        cdb[1] = 0x01;
        slate_put_be(cdb + 7, 2, 24);
        run(cdb, 10, 24, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        cdb[1] = 0;
        slate_put_be(cdb + 7, 2, 4);
        run(cdb, 10, 4, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x1a, 0x00);
        slate_put_be(cdb + 7, 2, 0);
        assert_int_equal(run(cdb, 10, 0, 0), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        slate_put_be(cdb + 7, 2, 24);
        assert_int_equal(run(cdb, 10, 24, 0), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, 24);

        /*
         * Where the namespace can anchor (ANC_SUP=1 in B2h): WRITE SAME
         * 10/16 with ANCHOR and UNMAP becomes an anchoring DEALLOCATE;
         * ANCHOR without UNMAP stays INVALID FIELD IN CDB (bit 4); UNMAP
         * with ANCHOR is accepted.
         */
        ns.be.can_anchor = true;
        inq[2] = 0xb2;
        run(inq, 6, 255, 0);
        assert_int_equal(buf[5], 0xe6);
        assert_int_equal(run((uint8_t[16]){0x41, 0x18, 0, 0, 0, 0, 0, 0, 1, 0}, 10, 512, 0),
                         SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.op, CORE_OP_DEALLOCATE);
        assert_int_equal(cmd.req.flags & CORE_REQ_ANCHOR, CORE_REQ_ANCHOR);
        assert_int_equal(
            run((uint8_t[16]){0x93, 0x19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0}, 16, 0, 0),
            SCSI_PARSE_EXEC); /* WRITE SAME(16) NDOB UNMAP ANCHOR */
        assert_int_equal(cmd.req.op, CORE_OP_DEALLOCATE);
        assert_int_equal(cmd.req.flags & CORE_REQ_ANCHOR, CORE_REQ_ANCHOR);
        assert_int_equal(run((uint8_t[16]){0x41, 0x08, 0, 0, 0, 0, 0, 0, 1, 0}, 10, 512, 0),
                         SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.flags & CORE_REQ_ANCHOR, 0);
        assert_int_equal(run((uint8_t[16]){0x41, 0x10, 0, 0, 0, 0, 0, 0, 1, 0}, 10, 512, 0),
                         SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(cmd.sense[15], 0x80 | 0x40 | 0x08 | 4); /* byte 1 bit 4: ANCHOR */
        cdb[1] = 0x01;
        assert_int_equal(run(cdb, 10, 24, 0), SCSI_PARSE_EXEC);
        cdb[1] = 0;
        ns.be.can_anchor = false;
        /* Write protected: DATA PROTECT before anything is read. */
        atomic_store(&ns.wp, CORE_WP_CONFIG);
        run(cdb, 10, 24, 0);
        expect_sense(SK_DATA_PROTECT, 0x27, 0x00);
        atomic_store(&ns.wp, 0);
        /* GET LBA STATUS: past the end, a nonzero report type. */
        put16(cdb, 0x9e, NBLOCKS, 0);
        cdb[1] = 0x12;
        cdb[13] = 64;
        run(cdb, 16, 64, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x21, 0x00);
        put16(cdb, 0x9e, 0, 0);
        cdb[1] = 0x12;
        cdb[13] = 64;
        cdb[14] = 5; /* reserved (0-4 and 10h are defined) */
        run(cdb, 16, 64, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        ns.thin = false;
}

static void test_sense_formats(void **state)
{
        uint8_t cdb[16];
        struct scsi_lu_state *st;
        (void)state;
        put16(cdb, 0x88, NBLOCKS, 1);
        run(cdb, 16, 512, 0);
        assert_int_equal(cmd.sense[0], 0x70);
        assert_int_equal(cmd.sense_len, 18);
        assert_int_equal(cmd.sense[7], 10);
        st = scsi_lu_state(&ns);
        assert_non_null(st);
        st->d_sense = true;
        run(cdb, 16, 512, 0);
        assert_int_equal(cmd.sense[0], 0x72);
        expect_sense(SK_ILLEGAL_REQUEST, 0x21, 0x00);
        assert_int_equal(cmd.sense_len, 8);
        /* descriptor field pointer */
        cdb[1] = 0x20;
        run(cdb, 16, 512, 0);
        assert_int_equal(cmd.sense_len, 16);
        assert_int_equal(cmd.sense[7], 8);
        assert_int_equal(cmd.sense[8], 0x02);
        assert_int_equal(cmd.sense[12], 0xcf);
        /* miscompare information descriptor */
        scsi_status_from_core(&cmd, CORE_E_MISCOMPARE, 0x1234, true);
        expect_sense(SK_MISCOMPARE, 0x1d, 0x00);
        assert_int_equal(cmd.sense[8], 0x00);
        assert_int_equal(cmd.sense[10], 0x80);
        assert_int_equal(slate_get_be(cmd.sense + 12, 8), 0x1234);
        st->d_sense = false;
        scsi_status_from_core(&cmd, CORE_E_MISCOMPARE, 0x1234, true);
        assert_int_equal(cmd.sense[0], 0xf0);
        assert_int_equal(slate_be32(cmd.sense + 3), 0x1234);
        scsi_status_from_core(&cmd, CORE_E_RESERVATION_CONFLICT, 0, false);
        assert_int_equal(cmd.status, SAM_STAT_RESERVATION_CONFLICT);
        assert_int_equal(cmd.sense_len, 0);
}

/* Transport-detected data transfer errors get their sense from the personality. */
static void test_transport_xfer_errors(void **state)
{
        uint8_t cdb[16];
        (void)state;
        put16(cdb, 0x8a, 0, 8); /* WRITE(16) */
        assert_int_equal(run(cdb, 16, 4096, 0), SCSI_PARSE_EXEC);
        scsi_cmd_reject_xfer(&cmd, SCSI_XFER_TOO_LONG);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(cmd.sense_len, 18);
        assert_int_equal(cmd.data_in_len, 0);
        scsi_cmd_reject_xfer(&cmd, SCSI_XFER_SHORT_OUT);
        expect_sense(SK_ILLEGAL_REQUEST, 0x0e, 0x03);
        scsi_lu_state(&ns)->d_sense = true; /* the LU's sense format holds for them too */
        scsi_cmd_reject_xfer(&cmd, SCSI_XFER_DATA_PHASE);
        assert_int_equal(cmd.sense[0], 0x72);
        expect_sense(SK_ABORTED_COMMAND, 0x4b, 0x00);
}

static void test_unit_attention(void **state)
{
        uint8_t tur[16] = {0}, inq[16] = {0x12, 0, 0, 0, 36, 0};
        (void)state;
        atomic_store(&nx.ua[0], (1u << SCSI_UA_POWER_ON) | (1u << SCSI_UA_MODE_CHANGED));
        run(inq, 6, 36, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(cmd.data_in_len, 36);
        run(tur, 6, 0, 0);
        expect_sense(SK_UNIT_ATTENTION, 0x29, 0x00);
        run(tur, 6, 0, 0);
        expect_sense(SK_UNIT_ATTENTION, 0x2a, 0x01);
        run(tur, 6, 0, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        /* LUN reset from another nexus establishes 29h/03h here */
        {
                struct scsi_nexus other;
                scsi_nexus_init(&other, &tgt, "iqn.other,i,0x2", "iqn.2024-01.org.slate:t,t,0x1",
                                NULL, 0);
                scsi_lun_reset(&other, 0);
                run(tur, 6, 0, 0);
                expect_sense(SK_UNIT_ATTENTION, 0x29, 0x03);
                scsi_nexus_fini(&other);
        }
}

static void test_unmapped_lun(void **state)
{
        uint8_t inq[16] = {0x12, 0, 0, 0, 96, 0}, tur[16] = {0};
        uint8_t rl[16] = {0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
        (void)state;
        run(inq, 6, 96, 5);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[0], 0x7f);
        run(tur, 6, 0, 5);
        expect_sense(SK_ILLEGAL_REQUEST, 0x25, 0x00);
        run(rl, 12, 256, 5);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf), 8);
        assert_int_equal(cmd.data_in_len, 16);
}

static void test_edtl_truncation(void **state)
{
        uint8_t cdb[16] = {0x2a, 0, 0, 0, 0, 0, 0, 0, 2, 0};
        (void)state;
        /* WRITE(10) of two blocks with EDTL of one: write one block */
        assert_int_equal(run(cdb, 10, 512, 0), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.nlb, 1);
        assert_int_equal(cmd.data_out_len, 512);
        assert_int_equal(cmd.xfer_len, 1024);
        /* EDTL shorter than a block: nothing to write */
        assert_int_equal(run(cdb, 10, 200, 0), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        /* READ(10) one block with EDTL 200: read the block, return 200 bytes */
        cdb[0] = 0x28;
        cdb[8] = 1;
        assert_int_equal(run(cdb, 10, 200, 0), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.nlb, 1);
        assert_int_equal(cmd.aux, 200);
}

/* 8 MiB and 32 MiB transfers parse; Block Limits says what the parser enforces. */
static void test_big_transfer(void **state)
{
        uint8_t cdb[16], inq[16] = {0x12, 0x01, 0xb0, 0, 255};
        (void)state;
        ns.num_blocks = 1u << 20;
        put16(cdb, 0x8a, 0, (8u << 20) / 512); /* WRITE(16), 8 MiB */
        assert_int_equal(run(cdb, 16, 8u << 20, 0), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.op, CORE_OP_WRITE);
        assert_int_equal(cmd.data_out_len, 8u << 20);
        assert_int_equal(cmd.req.iov[0].iov_len, 8u << 20);
        put16(cdb, 0x88, 0, CORE_MAX_TRANSFER_BYTES / 512); /* READ(16) at the limit */
        assert_int_equal(run(cdb, 16, CORE_MAX_TRANSFER_BYTES, 0), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.nlb, CORE_MAX_TRANSFER_BYTES / 512);
        put16(cdb, 0x8a, 0, CORE_MAX_TRANSFER_BYTES / 512 + 1); /* one block more */
        assert_int_equal(run(cdb, 16, CORE_MAX_TRANSFER_BYTES + 512, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(cmd.data_out_len, 0);
        /* VPD B0h: MAXIMUM TRANSFER LENGTH 32 MiB, OPTIMAL 1 MiB, in blocks. */
        run(inq, 6, 255, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[1], 0xb0);
        assert_int_equal(slate_be32(buf + 8), CORE_MAX_TRANSFER_BYTES / 512);
        assert_int_equal(slate_be32(buf + 12), CORE_SMALL_TRANSFER_BYTES / 512);
        assert_int_equal(buf[5], 255); /* MAXIMUM COMPARE AND WRITE LENGTH */

        /*
         * With the transport's own 1 MiB scratch beside an 8 MiB data buffer
         * (iSCSI, NVMe/TCP with a pool buffer): VERIFY(16) BYTCHK=1 of 8 MiB
         * runs (the core compares piece by piece in the scratch), ORWRITE(16),
         * whose result is built in scratch, is refused above 1 MiB.
         */
        static uint8_t scratch[CORE_SMALL_TRANSFER_BYTES];
        put16(cdb, 0x8f, 0, (8u << 20) / 512);
        cdb[1] = 0x02; /* BYTCHK 01b */
        memset(&cmd, 0, sizeof(cmd));
        memcpy(cmd.cdb, cdb, 16);
        cmd.cdb_len = 16;
        cmd.nexus = &nx;
        cmd.edtl = 8u << 20;
        cmd.buf = buf;
        cmd.buf_len = 8u << 20;
        cmd.scratch = scratch;
        cmd.scratch_len = sizeof(scratch);
        assert_int_equal(scsi_cmd_parse(&cmd), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.op, CORE_OP_COMPARE);
        assert_int_equal(cmd.data_out_len, 8u << 20);
        assert_ptr_equal(cmd.req.scratch, scratch);
        assert_int_equal(cmd.req.scratch_len, sizeof(scratch));
        put16(cdb, 0x8b, 0, (2u << 20) / 512); /* ORWRITE(16), 2 MiB */
        memcpy(cmd.cdb, cdb, 16);
        cmd.edtl = 2u << 20;
        cmd.status = 0;
        assert_int_equal(scsi_cmd_parse(&cmd), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        ns.num_blocks = NBLOCKS;
}

static void test_rsoc_round_trip(void **state)
{
        uint8_t cdb[16] = {0xa3, 0x0c, 0x00, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0};
        uint8_t *all;
        uint32_t len, n = 0;
        (void)state;
        run(cdb, 12, 65535, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        len = slate_be32(buf);
        assert_int_equal(len % 8, 0);
        assert_true(len >= 8 * 20);
        all = malloc(len + 4);
        memcpy(all, buf, len + 4);
        for (uint32_t off = 4; off < len + 4; off += 8, n++) {
                uint8_t op = all[off], servactv = all[off + 5] & 1;
                uint16_t sa = slate_be16(all + off + 2), cdb_len = slate_be16(all + off + 6);
                uint8_t q[16] = {0xa3,
                                 0x0c,
                                 servactv ? 0x02 : 0x01,
                                 op,
                                 (uint8_t)(sa >> 8),
                                 (uint8_t)sa,
                                 0,
                                 0,
                                 0xff,
                                 0xff,
                                 0,
                                 0};
                uint8_t probe[32] = {op, (uint8_t)sa};
                if (op == 0x7f) /* variable-length CDB: the service action is bytes 8-9 */
                        slate_put_be(probe + 1, 1, 0), slate_put_be(probe + 8, 2, sa);
                bool unk;
                assert_false(!servactv && sa);
                run(q, 12, 65535, 0);
                assert_int_equal(cmd.status, SAM_STAT_GOOD);
                assert_int_equal(buf[1] & 0x07, 0x03);
                assert_int_equal(slate_be16(buf + 2), cdb_len);
                assert_int_equal(buf[4], op);
                /* the wrong reporting option for this opcode is an invalid field */
                q[2] = servactv ? 0x01 : 0x02;
                run(q, 12, 65535, 0);
                expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
                /* and what we advertise is what the dispatcher finds */
                assert_non_null(scsi_op_find(probe, &unk));
        }
        assert_int_equal(n, len / 8);
        /* RCTD: every descriptor carries a 12-byte timeouts descriptor */
        cdb[2] = 0x80;
        run(cdb, 12, 65535, 0);
        assert_int_equal(slate_be32(buf), n * 20);
        assert_int_equal(buf[9] & 0x02, 0x02);
        assert_int_equal(slate_be16(buf + 12), 0x0a);
        free(all);
}

static void test_mode_sense(void **state)
{
        uint8_t cdb[16] = {0x1a, 0x00, 0x3f, 0x00, 0xff, 0};
        (void)state;
        run(cdb, 6, 255, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[0], cmd.data_in_len - 1);
        assert_int_equal(buf[3], 8);
        assert_int_equal(cmd.data_in_len, 4 + 8 + 12 + 20 + 12 + 12); /* 01h 08h 0Ah 1Ch */
        /* Write protection set by management: every host hears of it first. */
        core_ns_set_wp(&ns, CORE_WP_CONFIG, true, NULL);
        cdb[1] = 0x08; /* DBD */
        cdb[2] = 0x0a;
        run(cdb, 6, 255, 0);
        expect_sense(SK_UNIT_ATTENTION, 0x2a, 0x01); /* MODE PARAMETERS CHANGED */
        run(cdb, 6, 255, 0);
        assert_int_equal(buf[2] & 0x80, 0x80);
        assert_int_equal(buf[3], 0);
        assert_int_equal(buf[4], 0x0a);
        core_ns_set_wp(&ns, CORE_WP_CONFIG, false, &nx); /* as by this nexus: no UA */
        cdb[2] = 0xca;                                   /* saved values */
        run(cdb, 6, 255, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x39, 0x00);
}

static void test_fuzz_entry(void **state)
{
        uint8_t cdb[32];
        (void)state;
        for (unsigned i = 0; i < 20000; i++) {
                for (unsigned j = 0; j < sizeof(cdb); j++)
                        cdb[j] = (uint8_t)rand();
                if (i & 1)
                        cdb[0] = (uint8_t)(i >> 1);
                assert_int_equal(scsi_fuzz_one(cdb, 1 + i % sizeof(cdb)), 0);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_lba_range, setup, teardown),
            cmocka_unit_test_setup_teardown(test_reserved_bits_field_pointer, setup, teardown),
            cmocka_unit_test_setup_teardown(test_unsupported, setup, teardown),
            cmocka_unit_test_setup_teardown(test_thin, setup, teardown),
            cmocka_unit_test_setup_teardown(test_sense_formats, setup, teardown),
            cmocka_unit_test_setup_teardown(test_transport_xfer_errors, setup, teardown),
            cmocka_unit_test_setup_teardown(test_unit_attention, setup, teardown),
            cmocka_unit_test_setup_teardown(test_unmapped_lun, setup, teardown),
            cmocka_unit_test_setup_teardown(test_edtl_truncation, setup, teardown),
            cmocka_unit_test_setup_teardown(test_big_transfer, setup, teardown),
            cmocka_unit_test_setup_teardown(test_rsoc_round_trip, setup, teardown),
            cmocka_unit_test_setup_teardown(test_mode_sense, setup, teardown),
            cmocka_unit_test_setup_teardown(test_fuzz_entry, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
