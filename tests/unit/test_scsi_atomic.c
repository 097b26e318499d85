/*
 * Unit tests for WRITE ATOMIC(16)/(32) and WRITE SCATTERED(16)/(32)
 * (scsi/atomic.c): every CDB field check with its sense and field pointer,
 * the 7Fh variable-length CDB handling (service action in bytes 8-9,
 * CONTROL in byte 1, ADDITIONAL CDB LENGTH), the requests built for the
 * core (CORE_REQ_ATOMIC, atomic_boundary, ranges), the Block Limits atomic
 * fields and B7h/C0h, and the WRITE SCATTERED parameter list parser
 * (overlap, beyond capacity, counts, truncated buffers, in-place decode).
 * Limits are read from core_ns_atomic_limits(), not assumed.  The namespace
 * is "mem"; AW_BE=file runs the same on the file backend.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/atomic.h"
#include "rt/reactor.h"
#include "slate/byteorder.h"
#include "scsi/internal.h"

#define NBLOCKS 16384u /* 8 MiB of 512-byte blocks */

static char state_dir[256];
static struct core_ns *n0;
static struct scsi_target tgt;
static struct scsi_nexus nx;
static struct scsi_cmd cmd;
static uint8_t *buf;
static struct core_atomic_limits al;

/* ---- a real mem namespace on a reactor (as test_scsi_xcopy.c) ---- */

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending;

static void done_one(void)
{
        pthread_mutex_lock(&m);
        pending--;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&m);
}

static void wait_all(void)
{
        pthread_mutex_lock(&m);
        while (pending > 0)
                pthread_cond_wait(&cv, &m);
        pthread_mutex_unlock(&m);
}

static void on_done(struct scsi_cmd *c)
{
        (void)c;
        done_one();
}

static int group_setup(void **state)
{
        (void)state;
        snprintf(state_dir, sizeof(state_dir), "/tmp/slate-test-atomic-XXXXXX");
        if (!mkdtemp(state_dir))
                return -1;
        core_set_state_dir(state_dir);
        if (rt_init(1) || rt_start())
                return -1;
        struct core_ns_params p = {.name = "a0",
                                   .backend = getenv("AW_BE") ? getenv("AW_BE") : "mem",
                                   .size_bytes = (uint64_t)NBLOCKS * 512,
                                   .block_size = 512,
                                   .atomic_write_max_set = true,
                                   .atomic_write_max = 128 << 10};
        char err[256];
        if (core_ns_create(&p, &n0, err, sizeof(err)))
                return -1;
        scsi_target_init(&tgt, "iqn.2024-01.org.slate:t", 1);
        if (scsi_target_map_lun(&tgt, 0, n0))
                return -1;
        scsi_nexus_init(&nx, &tgt, "iqn.init,i,0x1", "iqn.2024-01.org.slate:t,t,0x1", NULL, 0);
        buf = aligned_alloc(64, 2 * CORE_MAX_TRANSFER_BYTES);
        core_ns_atomic_limits(n0, &al);
        return buf ? 0 : -1;
}

static int group_teardown(void **state)
{
        char c[300];
        (void)state;
        scsi_nexus_fini(&nx);
        scsi_target_unmap_lun(&tgt, 0);
        scsi_target_fini(&tgt);
        rt_stop();
        rt_join();
        rt_fini();
        core_ns_shutdown_all();
        free(buf);
        snprintf(c, sizeof(c), "rm -rf %s", state_dir);
        return system(c) == 0 ? 0 : -1;
}

static enum scsi_parse_result run(const uint8_t *cdb, uint16_t cdb_len, uint32_t edtl)
{
        memset(&cmd, 0, sizeof(cmd));
        atomic_store(&nx.ua[0], 0);
        memcpy(cmd.cdb, cdb, cdb_len);
        cmd.cdb_len = cdb_len;
        cmd.nexus = &nx;
        cmd.edtl = edtl;
        cmd.buf = buf;
        cmd.buf_len = 2 * CORE_MAX_TRANSFER_BYTES;
        cmd.reactor = rt_get(0);
        cmd.done = on_done;
        return scsi_cmd_parse(&cmd);
}

static void exec_msg(void *arg)
{
        scsi_cmd_exec(arg);
}

/* The exec step of a parsed command, on the reactor; waits for done. */
static void exec_wait(void)
{
        pending = 1;
        rt_msg_send(rt_get(0), exec_msg, &cmd);
        wait_all();
}

/* READ(16) of nlb blocks at lba into out, through the personality. */
static void read_back(uint64_t lba, uint32_t nlb, uint8_t *out)
{
        uint8_t c[16] = {0x88};
        slate_put_be(c + 2, 8, lba);
        slate_put_be(c + 10, 4, nlb);
        assert_int_equal(run(c, 16, nlb * 512), SCSI_PARSE_EXEC);
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        memcpy(out, buf, (size_t)nlb * 512);
}

/* CHECK CONDITION, ILLEGAL REQUEST asc/ascq (fixed format, the default). */
static void expect_sense(uint8_t asc, uint8_t ascq)
{
        assert_int_equal(cmd.status, SAM_STAT_CHECK_CONDITION);
        assert_int_equal(cmd.sense[0] & 0x7f, 0x70);
        assert_int_equal(cmd.sense[2] & 0x0f, SK_ILLEGAL_REQUEST);
        assert_int_equal(cmd.sense[12], asc);
        assert_int_equal(cmd.sense[13], ascq);
}

/* INVALID FIELD IN CDB (24h) / PARAMETER LIST (26h) with the field pointer at byte, bit. */
static void expect_field(bool in_cdb, uint16_t byte, int bit)
{
        expect_sense(in_cdb ? 0x24 : 0x26, 0x00);
        assert_int_equal(cmd.sense[15] & 0x80, 0x80);              /* SKSV */
        assert_int_equal(cmd.sense[15] & 0x40, in_cdb ? 0x40 : 0); /* C/D */
        if (bit >= 0)
                assert_int_equal(cmd.sense[15] & 0x0f, 0x08 | bit); /* BPV, bit */
        assert_int_equal(slate_be16(cmd.sense + 16), byte);
}

static void wa16(uint8_t *c, uint64_t lba, uint16_t nlb, uint16_t boundary)
{
        memset(c, 0, 16);
        c[0] = 0x9c;
        slate_put_be(c + 2, 8, lba);
        slate_put_be(c + 10, 2, boundary);
        slate_put_be(c + 12, 2, nlb);
}

static void wa32(uint8_t *c, uint64_t lba, uint32_t nlb, uint16_t boundary)
{
        memset(c, 0, 32);
        c[0] = 0x7f;
        slate_put_be(c + 4, 2, boundary);
        c[7] = 0x18;
        slate_put_be(c + 8, 2, 0x000f);
        slate_put_be(c + 12, 8, lba);
        slate_put_be(c + 28, 4, nlb);
}

static void test_limits_shown(void **state)
{
        uint8_t inq[6] = {0x12, 0x01, 0xb0, 0x00, 0xff, 0};
        (void)state;
        /* The engine gives atomic writes here (else the rest is moot). */
        assert_true(al.max_blocks > 1);
        run(inq, 6, 255);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be16(buf + 2), 0x3c);
        assert_int_equal(slate_be32(buf + 44), al.max_blocks);
        assert_int_equal(slate_be32(buf + 48), al.align_blocks);
        assert_int_equal(slate_be32(buf + 52), al.gran_blocks);
        assert_int_equal(slate_be32(buf + 56), al.max_with_boundary);
        assert_int_equal(slate_be32(buf + 60), al.max_boundary);
        /* at most MAXIMUM TRANSFER LENGTH (libiscsi WriteAtomic16.VPD) */
        assert_true(slate_be32(buf + 44) <= slate_be32(buf + 8));
        /* B7h: the scattered limits the parser enforces; streams 0 */
        struct scsi_scatter_limits sl;
        scsi_scatter_limits(n0, &sl);
        inq[2] = 0xb7;
        run(inq, 6, 255);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[1], 0xb7);
        assert_int_equal(slate_be16(buf + 2), 0x3c);
        assert_int_equal(slate_be16(buf + 6), scsi_streams_max(n0)); /* streams.c */
        assert_int_equal(slate_be32(buf + 16), sl.max_range_blocks);
        assert_int_equal(slate_be16(buf + 22), sl.max_ranges);
        assert_int_equal(slate_be32(buf + 24), sl.max_total_blocks);
        /* C0h: the atomic scattered write limit */
        inq[2] = SCSI_VPD_SLATE_ATOMIC;
        run(inq, 6, 255);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf + 8), al.scatter_max_blocks);
        assert_int_equal(slate_be32(buf + 12), al.scatter_max_ranges);
        /* both listed in VPD 00h, ascending */
        inq[2] = 0x00;
        run(inq, 6, 255);
        assert_non_null(memchr(buf + 4, 0xb7, buf[3]));
        assert_non_null(memchr(buf + 4, SCSI_VPD_SLATE_ATOMIC, buf[3]));
        for (unsigned i = 1; i < buf[3]; i++)
                assert_true(buf[4 + i] > buf[3 + i]);
}

static void test_write_atomic16_fields(void **state)
{
        uint8_t c[16];
        (void)state;
        /* Good: one CORE_OP_WRITE with CORE_REQ_ATOMIC, DPO/FUA through */
        wa16(c, 8, 4, 0);
        c[1] = 0x18;
        assert_int_equal(run(c, 16, 4 * 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.op, CORE_OP_WRITE);
        assert_int_equal(cmd.req.lba, 8);
        assert_int_equal(cmd.req.nlb, 4);
        assert_int_equal(cmd.req.flags, CORE_REQ_ATOMIC | CORE_REQ_FUA | CORE_REQ_DPO);
        assert_int_equal(cmd.req.atomic_boundary, 0);
        assert_int_equal(cmd.data_out_len, 4 * 512);
        /* Short EDTL: the whole data or nothing (the transport refuses) */
        wa16(c, 8, 4, 0);
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, 4 * 512);
        /* WRPROTECT without PI */
        for (uint8_t wp = 1; wp < 8; wp++) {
                wa16(c, 0, 1, 0);
                c[1] = (uint8_t)(wp << 5);
                assert_int_equal(run(c, 16, 512), SCSI_PARSE_DONE);
                expect_field(true, 1, 7);
        }
        /* reserved bits 2..0 of byte 1 */
        wa16(c, 0, 1, 0);
        c[1] = 0x04;
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_DONE);
        expect_field(true, 1, 2);
        /* group number byte, reserved bits */
        wa16(c, 0, 1, 0);
        c[14] = 0x80;
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_DONE);
        expect_field(true, 14, 7);
        /* NACA in the control byte (byte 15) */
        wa16(c, 0, 1, 0);
        c[15] = 0x04;
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_DONE);
        expect_field(true, 15, 2);
        /* beyond capacity: LBA OUT OF RANGE, before the atomic limits */
        wa16(c, NBLOCKS - 1, 2, 0);
        assert_int_equal(run(c, 16, 1024), SCSI_PARSE_DONE);
        expect_sense(0x21, 0x00);
        wa16(c, UINT64_MAX, 1, 0);
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_DONE);
        expect_sense(0x21, 0x00);
        /* zero blocks: GOOD, nothing submitted */
        wa16(c, 5, 0, 0);
        assert_int_equal(run(c, 16, 0), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        /* longer than MAXIMUM ATOMIC TRANSFER LENGTH: the TRANSFER LENGTH field */
        wa16(c, 0, (uint16_t)(al.max_blocks + 1), 0);
        assert_int_equal(run(c, 16, (al.max_blocks + 1) * 512), SCSI_PARSE_DONE);
        expect_field(true, 12, 7);
        /* exactly the maximum: fine */
        wa16(c, 0, (uint16_t)al.max_blocks, 0);
        assert_int_equal(run(c, 16, al.max_blocks * 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.flags & CORE_REQ_ATOMIC, CORE_REQ_ATOMIC);
        /* ATOMIC BOUNDARY larger than MAXIMUM ATOMIC BOUNDARY SIZE: the boundary field */
        uint32_t maxb = al.max_boundary ? al.max_boundary : 1;
        wa16(c, 0, 1, (uint16_t)(maxb + 1));
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_DONE);
        expect_field(true, 10, 7);
        /* with a boundary: up to MAXIMUM ATOMIC TRANSFER LENGTH WITH ATOMIC BOUNDARY */
        wa16(c, 0, (uint16_t)al.max_with_boundary, (uint16_t)maxb);
        assert_int_equal(run(c, 16, al.max_with_boundary * 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.atomic_boundary, maxb);
        wa16(c, 0, (uint16_t)(al.max_with_boundary + 1), (uint16_t)maxb);
        assert_int_equal(run(c, 16, (al.max_with_boundary + 1) * 512), SCSI_PARSE_DONE);
        expect_field(true, 12, 7);
        /* alignment and granularity, where the namespace has them */
        if (al.align_blocks > 1) {
                wa16(c, 1, (uint16_t)(al.gran_blocks ? al.gran_blocks : 1), 0);
                assert_int_equal(run(c, 16, 1 << 20), SCSI_PARSE_DONE);
                expect_field(true, 2, 7);
        }
        if (al.gran_blocks > 1) {
                wa16(c, 0, 1, 0);
                assert_int_equal(run(c, 16, 512), SCSI_PARSE_DONE);
                expect_field(true, 12, 7);
        }
        /* write protected: DATA PROTECT */
        atomic_store(&n0->wp, 1);
        wa16(c, 0, 1, 0);
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_DONE);
        assert_int_equal(cmd.sense[2] & 0x0f, SK_DATA_PROTECT);
        atomic_store(&n0->wp, 0);
}

static void test_write_atomic32_fields(void **state)
{
        uint8_t c[32];
        (void)state;
        wa32(c, 16, 8, 0);
        c[10] = 0x08; /* FUA */
        /* the tag fields are ignored without PI */
        slate_put_be(c + 20, 8, 0x0102030405060708ull);
        assert_int_equal(run(c, 32, 8 * 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.op, CORE_OP_WRITE);
        assert_int_equal(cmd.req.lba, 16);
        assert_int_equal(cmd.req.nlb, 8);
        assert_int_equal(cmd.req.flags, CORE_REQ_ATOMIC | CORE_REQ_FUA);
        /* a 32-byte command in a 16-byte CDB */
        wa32(c, 0, 1, 0);
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_DONE);
        expect_sense(0x20, 0x00);
        /* ADDITIONAL CDB LENGTH must be 18h */
        wa32(c, 0, 1, 0);
        c[7] = 0x10;
        assert_int_equal(run(c, 32, 512), SCSI_PARSE_DONE);
        expect_field(true, 7, 7);
        /* WRPROTECT in byte 10 */
        wa32(c, 0, 1, 0);
        c[10] = 0x20;
        assert_int_equal(run(c, 32, 512), SCSI_PARSE_DONE);
        expect_field(true, 10, 7);
        /* CONTROL is byte 1 of a variable-length CDB */
        wa32(c, 0, 1, 0);
        c[1] = 0x04;
        assert_int_equal(run(c, 32, 512), SCSI_PARSE_DONE);
        expect_field(true, 1, 2);
        /* an unknown 7Fh service action points at bytes 8-9 */
        wa32(c, 0, 1, 0);
        slate_put_be(c + 8, 2, 0x0009);
        assert_int_equal(run(c, 32, 512), SCSI_PARSE_DONE);
        expect_field(true, 8, 7);
        /* length (32 bits at 28) over the maximum, boundary at 4 */
        wa32(c, 0, al.max_blocks + 1, 0);
        assert_int_equal(run(c, 32, (al.max_blocks + 1) * 512), SCSI_PARSE_DONE);
        expect_field(true, 28, 7);
        wa32(c, 0, 1, (uint16_t)((al.max_boundary ? al.max_boundary : 1) + 1));
        assert_int_equal(run(c, 32, 512), SCSI_PARSE_DONE);
        expect_field(true, 4, 7);
        wa32(c, NBLOCKS, 1, 0);
        assert_int_equal(run(c, 32, 512), SCSI_PARSE_DONE);
        expect_sense(0x21, 0x00);
}

static void ws16(uint8_t *c, uint16_t lbdof, uint16_t nr, uint32_t bt_len)
{
        memset(c, 0, 16);
        c[0] = 0x9f;
        c[1] = 0x12;
        slate_put_be(c + 4, 2, lbdof);
        slate_put_be(c + 8, 2, nr);
        slate_put_be(c + 10, 4, bt_len);
}

static void ws32(uint8_t *c, uint16_t lbdof, uint16_t nr, uint32_t bt_len)
{
        memset(c, 0, 32);
        c[0] = 0x7f;
        c[7] = 0x18;
        slate_put_be(c + 8, 2, 0x0011);
        slate_put_be(c + 12, 2, lbdof);
        slate_put_be(c + 16, 2, nr);
        slate_put_be(c + 28, 4, bt_len);
}

static void desc(unsigned i, uint64_t lba, uint32_t nlb)
{
        uint8_t *d = buf + 32 * (i + 1);
        memset(d, 0, 32);
        slate_put_be(d, 8, lba);
        slate_put_be(d + 8, 4, nlb);
}

static void test_write_scattered_cdb(void **state)
{
        uint8_t c[32];
        struct scsi_scatter_limits sl;
        (void)state;
        scsi_scatter_limits(n0, &sl);
        /* Good: the whole buffer is received, the list is parsed at exec */
        ws16(c, 1, 2, 5); /* LBDOF 1 block of descriptors, then 5 blocks of data */
        c[2] = 0x10;      /* DPO */
        assert_int_equal(run(c, 16, 6 * 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, 6 * 512);
        assert_int_equal(cmd.xfer_len, 6 * 512);
        ws32(c, 1, 2, 5);
        assert_int_equal(run(c, 32, 6 * 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, 6 * 512);
        /* nothing to do is not an error */
        ws16(c, 1, 0, 5);
        assert_int_equal(run(c, 16, 6 * 512), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        ws16(c, 1, 2, 0);
        assert_int_equal(run(c, 16, 0), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        /* WRPROTECT (byte 2 / byte 10), reserved flag bits */
        ws16(c, 1, 2, 6);
        c[2] = 0x40;
        assert_int_equal(run(c, 16, 6 * 512), SCSI_PARSE_DONE);
        expect_field(true, 2, 7);
        ws16(c, 1, 2, 6);
        c[2] = 0x01;
        assert_int_equal(run(c, 16, 6 * 512), SCSI_PARSE_DONE);
        expect_field(true, 2, 0);
        ws32(c, 1, 2, 6);
        c[10] = 0x80;
        assert_int_equal(run(c, 32, 6 * 512), SCSI_PARSE_DONE);
        expect_field(true, 10, 7);
        /* LBDOF 0: no room for the descriptors: the LBDOF field */
        ws16(c, 0, 2, 6);
        assert_int_equal(run(c, 16, 6 * 512), SCSI_PARSE_DONE);
        expect_field(true, 4, 7);
        ws32(c, 0, 2, 6);
        assert_int_equal(run(c, 32, 6 * 512), SCSI_PARSE_DONE);
        expect_field(true, 12, 7);
        /* the descriptors do not fit before LBDOF: 16 descriptors + header = 544 > 512 */
        ws16(c, 1, 16, 6);
        assert_int_equal(run(c, 16, 6 * 512), SCSI_PARSE_DONE);
        expect_field(true, 8, 7);
        ws32(c, 1, 16, 6);
        assert_int_equal(run(c, 32, 6 * 512), SCSI_PARSE_DONE);
        expect_field(true, 16, 7);
        /* more descriptors than MAXIMUM SCATTERED LBA RANGE DESCRIPTOR COUNT */
        ws16(c, 16, (uint16_t)(sl.max_ranges + 1), 100);
        assert_int_equal(run(c, 16, 100 * 512), SCSI_PARSE_DONE);
        expect_field(true, 8, 7);
        /* a buffer longer than MAXIMUM TRANSFER LENGTH */
        ws16(c, 1, 1, CORE_MAX_TRANSFER_BYTES / 512);
        assert_int_equal(run(c, 16, CORE_MAX_TRANSFER_BYTES + 512), SCSI_PARSE_DONE);
        expect_field(true, 10, 7);
        /* over MAXIMUM SCATTERED TRANSFER LENGTH with a larger LBDOF */
        ws16(c, 2, 1, sl.max_total_blocks);
        assert_int_equal(run(c, 16, CORE_MAX_TRANSFER_BYTES + 512), SCSI_PARSE_DONE);
        expect_field(true, 10, 7);
        /* the largest: LBDOF 1 and MAXIMUM SCATTERED TRANSFER LENGTH blocks */
        ws16(c, 1, 1, sl.max_total_blocks);
        assert_int_equal(run(c, 16, CORE_MAX_TRANSFER_BYTES), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, CORE_MAX_TRANSFER_BYTES);
}

static void test_write_scattered_list(void **state)
{
        uint8_t c[16];
        struct core_lba_range *r;
        struct scsi_scatter_err e;
        struct scsi_scatter_limits sl;
        uint64_t total;
        (void)state;
        scsi_scatter_limits(n0, &sl);

        /* Good: three ranges, one empty, decoded in place in order */
        desc(0, 100, 2);
        desc(1, 50, 0);
        desc(2, 10, 3);
        assert_int_equal(scsi_scatter_parse(n0, buf, 6 * 512, 3, 1, &r, &total, &e), 0);
        assert_ptr_equal(r, (void *)(buf + 32));
        assert_int_equal(total, 5);
        assert_int_equal(r[0].lba, 100);
        assert_int_equal(r[0].nlb, 2);
        assert_int_equal(r[1].nlb, 0);
        assert_int_equal(r[2].lba, 10);
        assert_int_equal(r[2].nlb, 3);

        /* Overlap with an earlier range: INVALID FIELD IN PARAMETER LIST at the later one */
        desc(0, 100, 2);
        desc(1, 10, 3);
        desc(2, 101, 1);
        assert_int_equal(scsi_scatter_parse(n0, buf, 7 * 512, 3, 1, &r, &total, &e), -1);
        assert_false(e.lba_range);
        assert_false(e.in_cdb);
        assert_int_equal(e.field, 32 * 3);
        /* adjacent is not overlapping (the list again: decoding is in place) */
        desc(0, 100, 2);
        desc(1, 10, 3);
        desc(2, 102, 1);
        assert_int_equal(scsi_scatter_parse(n0, buf, 7 * 512, 3, 1, &r, &total, &e), 0);

        /* Beyond capacity (and 64-bit wrap): LBA OUT OF RANGE */
        desc(0, NBLOCKS - 1, 2);
        assert_int_equal(scsi_scatter_parse(n0, buf, 3 * 512, 1, 1, &r, &total, &e), -1);
        assert_true(e.lba_range);
        desc(0, UINT64_MAX, 1);
        assert_int_equal(scsi_scatter_parse(n0, buf, 3 * 512, 1, 1, &r, &total, &e), -1);
        assert_true(e.lba_range);

        /* A range longer than MAXIMUM SCATTERED LBA RANGE TRANSFER LENGTH */
        desc(0, 0, sl.max_range_blocks + 1);
        assert_int_equal(scsi_scatter_parse(n0, buf, 3 * 512, 1, 1, &r, &total, &e), -1);
        assert_false(e.lba_range);
        assert_int_equal(e.field, 32 + 8);

        /* More blocks described than the buffer brings: the CDB's lengths */
        desc(0, 0, 2);
        desc(1, 10, 2);
        assert_int_equal(scsi_scatter_parse(n0, buf, 4 * 512, 2, 1, &r, &total, &e), -1);
        assert_true(e.in_cdb);

        /* Truncated buffers: shorter than LBDOF, descriptors past LBDOF */
        assert_int_equal(scsi_scatter_parse(n0, buf, 100, 1, 1, &r, &total, &e), -1);
        assert_true(e.in_cdb);
        assert_int_equal(scsi_scatter_parse(n0, buf, 4 * 512, 16, 1, &r, &total, &e), -1);
        assert_true(e.in_cdb);

        /* Through the command: the exec step turns each error into its sense */
        ws16(c, 1, 3, 6);
        assert_int_equal(run(c, 16, 7 * 512), SCSI_PARSE_EXEC);
        desc(0, 100, 2);
        desc(1, 10, 3);
        desc(2, 101, 1);
        exec_wait();
        expect_field(false, 96, 7);
        ws16(c, 1, 1, 2);
        assert_int_equal(run(c, 16, 3 * 512), SCSI_PARSE_EXEC);
        desc(0, NBLOCKS, 1);
        exec_wait();
        expect_sense(0x21, 0x00);
        ws16(c, 1, 2, 3);
        assert_int_equal(run(c, 16, 4 * 512), SCSI_PARSE_EXEC);
        desc(0, 0, 2);
        desc(1, 10, 2);
        exec_wait();
        expect_field(true, 10, 7);
}

/* WRITE ATOMIC and WRITE SCATTERED through the core: the data lands where the command says. */
static void test_data_lands(void **state)
{
        uint8_t c[32], *rd = malloc(64 * 512);
        (void)state;
        /* WRITE ATOMIC(16) of 8 blocks at 40, (32) of 4 blocks at 60 */
        wa16(c, 40, 8, 0);
        assert_int_equal(run(c, 16, 8 * 512), SCSI_PARSE_EXEC);
        memset(buf, 0xa1, 8 * 512);
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        wa32(c, 60, 4, 0);
        assert_int_equal(run(c, 32, 4 * 512), SCSI_PARSE_EXEC);
        memset(buf, 0xa2, 4 * 512);
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        read_back(40, 24, rd);
        for (unsigned i = 0; i < 24 * 512; i++)
                assert_int_equal(rd[i], i < 8 * 512 ? 0xa1 : (i >= 20 * 512 ? 0xa2 : 0));

        /* WRITE SCATTERED(16): ranges 3 @ 200, 0 @ 7, 2 @ 100; data in descriptor order */
        ws16(c, 1, 3, 5);
        assert_int_equal(run(c, 16, 6 * 512), SCSI_PARSE_EXEC);
        memset(buf, 0, 512);
        desc(0, 200, 3);
        desc(1, 7, 0);
        desc(2, 100, 2);
        for (unsigned b = 0; b < 5; b++)
                memset(buf + 512 + b * 512, 0xb0 + b, 512);
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        read_back(200, 3, rd);
        for (unsigned b = 0; b < 3; b++)
                assert_int_equal(rd[b * 512 + 17], 0xb0 + b);
        read_back(100, 2, rd);
        assert_int_equal(rd[0], 0xb3);
        assert_int_equal(rd[512 + 511], 0xb4);
        read_back(99, 1, rd);
        assert_int_equal(rd[0], 0);
        read_back(102, 1, rd);
        assert_int_equal(rd[0], 0);

        /* WRITE SCATTERED(32) with LBDOF 2 (two blocks of descriptors) */
        ws32(c, 2, 1, 1);
        assert_int_equal(run(c, 32, 3 * 512), SCSI_PARSE_EXEC);
        memset(buf, 0, 1024);
        desc(0, 300, 1);
        memset(buf + 1024, 0xc3, 512);
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        read_back(300, 1, rd);
        assert_int_equal(rd[100], 0xc3);
        free(rd);
}

static void test_rsoc_lists_them(void **state)
{
        uint8_t q[12] = {0xa3, 0x0c, 0x02, 0x7f, 0x00, 0x0f, 0, 0, 0x01, 0x00, 0, 0};
        (void)state;
        /* WRITE ATOMIC(32): 32 bytes of usage data, CONTROL at byte 1, SA 000Fh at 8-9 */
        run(q, 12, 256);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[1] & 0x07, 0x03);
        assert_int_equal(slate_be16(buf + 2), 32);
        assert_int_equal(buf[4], 0x7f);
        assert_int_equal(buf[4 + 7], 0x18);
        assert_int_equal(slate_be16(buf + 4 + 8), 0x000f);
        /* WRITE SCATTERED(16) under 9Fh */
        q[3] = 0x9f;
        q[5] = 0x12;
        run(q, 12, 256);
        assert_int_equal(buf[1] & 0x07, 0x03);
        assert_int_equal(slate_be16(buf + 2), 16);
        assert_int_equal(buf[5], 0x12);
        /* WRITE ATOMIC(16): DPO/FUA in the usage data (libiscsi DpoFua) */
        q[2] = 0x01;
        q[3] = 0x9c;
        q[5] = 0;
        run(q, 12, 256);
        assert_int_equal(buf[1] & 0x07, 0x03);
        assert_int_equal(buf[5] & 0x18, 0x18);
}

/*
 * WRITE ATOMIC on an LU with protection information (type 1, a file
 * namespace: the journal path, which records the PI with the data):
 * offered (VPD B0h atomic fields), WRPROTECT 001b with the host's PI
 * checked (a wrong guard: ABORTED COMMAND 10h/01h, nothing written),
 * WRPROTECT 000b generated, both read back with their PI; (32) with its
 * expected initial reference tag.
 */
static void test_pi_lu(void **state)
{
        (void)state;
        struct core_ns_params p = {.name = "api",
                                   .backend = "file",
                                   .size_bytes = 1 << 20,
                                   .block_size = 512,
                                   .pi_set = true,
                                   .pi = {.block_size = 512, .md_size = 8, .type = 1},
                                   .atomic_write_max_set = true,
                                   .atomic_write_max = 64 << 10};
        struct core_ns *pi = NULL;
        char err[256];
        assert_int_equal(core_ns_create(&p, &pi, err, sizeof(err)), 0);
        scsi_target_unmap_lun(&tgt, 0);
        assert_int_equal(scsi_target_map_lun(&tgt, 0, pi), 0);
        static uint8_t ext[8 * 520], data[8 * 512];
        struct core_pi_fmt f = p.pi;
        for (unsigned i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t)(i * 13 + 5);
        core_pi_insert(&f, data, (struct core_pi_buf){ext, NULL}, 8,
                       &(struct core_pi_tags){.ref = 16, .app = 0x55});
        uint8_t c[32], vpd[6] = {0x12, 0x01, 0xb0, 0, 0xff, 0};
        if (run(vpd, 6, 255) == SCSI_PARSE_EXEC)
                exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf + 44), 128); /* MAXIMUM ATOMIC TRANSFER LENGTH */

        /* WRPROTECT 001b, a wrong guard in block 3: refused, nothing stored. */
        wa16(c, 16, 8, 0);
        c[1] = 1 << 5;
        assert_int_equal(run(c, 16, sizeof(ext)), SCSI_PARSE_EXEC);
        memcpy(buf, ext, sizeof(ext));
        buf[3 * 520 + 512] ^= 0x01;
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_CHECK_CONDITION);
        assert_int_equal(cmd.sense[2] & 0x0f, SK_ABORTED_COMMAND);
        assert_int_equal(cmd.sense[12], 0x10);
        assert_int_equal(cmd.sense[13], 0x01);
        assert_int_equal(slate_be32(cmd.sense + 3), 19);
        uint8_t r16[16] = {0x88, 1 << 5};
        slate_put_be(r16 + 2, 8, 16);
        slate_put_be(r16 + 10, 4, 8);
        assert_int_equal(run(r16, 16, sizeof(ext)), SCSI_PARSE_EXEC);
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        for (unsigned b = 0; b < 8; b++) /* never written: the escape */
                assert_int_equal(buf[b * 520 + 514], 0xff);
        /* The good one: stored with its PI, read back as sent. */
        wa16(c, 16, 8, 0);
        c[1] = 1 << 5;
        assert_int_equal(run(c, 16, sizeof(ext)), SCSI_PARSE_EXEC);
        memcpy(buf, ext, sizeof(ext));
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(run(r16, 16, sizeof(ext)), SCSI_PARSE_EXEC);
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_memory_equal(buf, ext, sizeof(ext));
        assert_true(atomic_load(&pi->atomic_stats.writes) >= 1);

        /* WRPROTECT 000b: the device server generates (reference tag = LBA). */
        wa16(c, 40, 8, 0);
        assert_int_equal(run(c, 16, sizeof(data)), SCSI_PARSE_EXEC);
        memcpy(buf, data, sizeof(data));
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        slate_put_be(r16 + 2, 8, 40);
        assert_int_equal(run(r16, 16, sizeof(ext)), SCSI_PARSE_EXEC);
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf + 7 * 520 + 516), 47);

        /* WRITE ATOMIC(32) WRPROTECT 001b: a wrong expected initial reference tag. */
        wa32(c, 16, 8, 0);
        c[10] = 1 << 5;
        slate_put_be(c + 20, 4, 17);
        assert_int_equal(run(c, 32, sizeof(ext)), SCSI_PARSE_EXEC);
        memcpy(buf, ext, sizeof(ext));
        exec_wait();
        assert_int_equal(cmd.sense[12], 0x10);
        assert_int_equal(cmd.sense[13], 0x03);

        scsi_target_unmap_lun(&tgt, 0);
        assert_int_equal(scsi_target_map_lun(&tgt, 0, n0), 0);
        assert_int_equal(core_ns_delete("api"), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_limits_shown),
            cmocka_unit_test(test_write_atomic16_fields),
            cmocka_unit_test(test_write_atomic32_fields),
            cmocka_unit_test(test_write_scattered_cdb),
            cmocka_unit_test(test_write_scattered_list),
            cmocka_unit_test(test_data_lands),
            cmocka_unit_test(test_rsoc_lists_them),
            cmocka_unit_test(test_pi_lu),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
