/*
 * Unit tests for SCSI streams and GROUP NUMBER (scsi/streams.c): STREAM
 * CONTROL open/close and its errors, GET STREAM STATUS (permanent streams,
 * starting id), WRITE STREAM(16)/(32) field checks with sense and field
 * pointer and the core placement the write carries (core_placement_find,
 * and the core's per-placement byte count after it ran), GROUP NUMBER in
 * WRITE(10)/(16) -> permanent stream placement and access hints, the IO
 * Advice Hints Grouping mode page (sense, changeable mask, MODE SELECT and
 * its checks), the Block Limits Extension and Extended INQUIRY bits, and
 * the Group Statistics and Performance log pages.  A real mem namespace on
 * a reactor (as test_scsi_atomic.c).  And, on a second, thin one (LUN 2),
 * UNMAP's adjacent descriptors joined into one core request (scsi/lbp.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/flash.h"
#include "rt/reactor.h"
#include "slate/byteorder.h"
#include "scsi/internal.h"

#define NBLOCKS 16384u

static char state_dir[256];
static struct core_ns *n0, *u0;
static struct scsi_target tgt;
static struct scsi_nexus nx;
static struct scsi_cmd cmd;
static uint8_t *buf;

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending;

static void on_done(struct scsi_cmd *c)
{
        (void)c;
        pthread_mutex_lock(&m);
        pending--;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&m);
}

static int group_setup(void **state)
{
        (void)state;
        snprintf(state_dir, sizeof(state_dir), "/tmp/slate-test-streams-XXXXXX");
        if (!mkdtemp(state_dir))
                return -1;
        core_set_state_dir(state_dir);
        if (rt_init(1) || rt_start())
                return -1;
        struct core_ns_params p = {.name = "s0",
                                   .backend = "mem",
                                   .size_bytes = (uint64_t)NBLOCKS * 512,
                                   .block_size = 512};
        char err[256];
        if (core_ns_create(&p, &n0, err, sizeof(err)))
                return -1;
        scsi_target_init(&tgt, "iqn.2024-01.org.slate:t", 1);
        if (scsi_target_map_lun(&tgt, 0, n0))
                return -1;
        struct core_ns_params pu = {.name = "u0",
                                    .backend = "mem",
                                    .size_bytes = 1024 * 512,
                                    .block_size = 512,
                                    .thin = true};
        if (core_ns_create(&pu, &u0, err, sizeof(err)) || scsi_target_map_lun(&tgt, 2, u0))
                return -1;
        scsi_nexus_init(&nx, &tgt, "iqn.init,i,0x1", "iqn.2024-01.org.slate:t,t,0x1", NULL, 0);
        buf = aligned_alloc(64, 2 * CORE_MAX_TRANSFER_BYTES);
        return buf ? 0 : -1;
}

static int group_teardown(void **state)
{
        char c[300];
        (void)state;
        scsi_nexus_fini(&nx);
        scsi_target_unmap_lun(&tgt, 0);
        scsi_target_unmap_lun(&tgt, 2);
        scsi_target_fini(&tgt);
        rt_stop();
        rt_join();
        rt_fini();
        core_ns_shutdown_all();
        free(buf);
        snprintf(c, sizeof(c), "rm -rf %s", state_dir);
        return system(c) == 0 ? 0 : -1;
}

static enum scsi_parse_result run_lun(const uint8_t *cdb, uint16_t cdb_len, uint32_t edtl,
                                      uint64_t lun)
{
        memset(&cmd, 0, sizeof(cmd));
        atomic_store(&nx.ua[lun], 0);
        memcpy(cmd.cdb, cdb, cdb_len);
        cmd.cdb_len = cdb_len;
        cmd.lun = lun;
        cmd.nexus = &nx;
        cmd.edtl = edtl;
        cmd.buf = buf;
        cmd.buf_len = 2 * CORE_MAX_TRANSFER_BYTES;
        cmd.reactor = rt_get(0);
        cmd.done = on_done;
        return scsi_cmd_parse(&cmd);
}

static enum scsi_parse_result run(const uint8_t *cdb, uint16_t cdb_len, uint32_t edtl)
{
        return run_lun(cdb, cdb_len, edtl, 0);
}

static void exec_msg(void *arg)
{
        scsi_cmd_exec(arg);
}

static void exec_wait(void)
{
        pending = 1;
        rt_msg_send(rt_get(0), exec_msg, &cmd);
        pthread_mutex_lock(&m);
        while (pending > 0)
                pthread_cond_wait(&cv, &m);
        pthread_mutex_unlock(&m);
}

static void expect_sense(uint8_t asc, uint8_t ascq)
{
        assert_int_equal(cmd.status, SAM_STAT_CHECK_CONDITION);
        assert_int_equal(cmd.sense[0] & 0x7f, 0x70);
        assert_int_equal(cmd.sense[2] & 0x0f, SK_ILLEGAL_REQUEST);
        assert_int_equal(cmd.sense[12], asc);
        assert_int_equal(cmd.sense[13], ascq);
}

static void expect_field(bool in_cdb, uint16_t byte, int bit)
{
        expect_sense(in_cdb ? 0x24 : 0x26, 0x00);
        assert_int_equal(cmd.sense[15] & 0x80, 0x80);
        assert_int_equal(cmd.sense[15] & 0x40, in_cdb ? 0x40 : 0);
        if (bit >= 0)
                assert_int_equal(cmd.sense[15] & 0x0f, 0x08 | bit);
        assert_int_equal(slate_be16(cmd.sense + 16), byte);
}

/* STREAM CONTROL: ctl 1 open, 2 close. */
static void stream_ctl(uint8_t ctl, uint16_t id)
{
        uint8_t c[16] = {0x9e, (uint8_t)(0x14 | (ctl << 5))};
        slate_put_be(c + 4, 2, id);
        slate_put_be(c + 10, 4, 8);
        assert_int_equal(run(c, 16, 8), SCSI_PARSE_DONE);
}

static unsigned stream_open_ok(void)
{
        stream_ctl(1, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(cmd.data_in_len, 8);
        assert_int_equal(buf[0], 7);
        return slate_be16(buf + 4);
}

static void get_status(uint16_t start, uint32_t alloc)
{
        uint8_t c[16] = {0x9e, 0x16};
        slate_put_be(c + 4, 2, start);
        slate_put_be(c + 10, 4, alloc);
        assert_int_equal(run(c, 16, alloc), SCSI_PARSE_DONE);
}

static void ws16(uint8_t *c, uint64_t lba, uint16_t nlb, uint16_t id)
{
        memset(c, 0, 16);
        c[0] = 0x9a;
        slate_put_be(c + 2, 8, lba);
        slate_put_be(c + 10, 2, id);
        slate_put_be(c + 12, 2, nlb);
}

static void ws32(uint8_t *c, uint64_t lba, uint32_t nlb, uint16_t id)
{
        memset(c, 0, 32);
        c[0] = 0x7f;
        slate_put_be(c + 4, 2, id);
        c[7] = 0x18;
        slate_put_be(c + 8, 2, 0x0010);
        slate_put_be(c + 12, 8, lba);
        memset(c + 20, 0xff, 8); /* sg_write_x's default tags: ignored without PI */
        slate_put_be(c + 28, 4, nlb);
}

static void test_vpd_bits(void **state)
{
        uint8_t inq[6] = {0x12, 0x01, 0xb7, 0x00, 0xff, 0};
        (void)state;
        run(inq, 6, 255);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[5] & 0x01, 0x01); /* RSCS */
        assert_int_equal(slate_be16(buf + 6), scsi_streams_max(n0));
        assert_true(scsi_streams_max(n0) > SCSI_STREAMS_PERM);
        assert_true(slate_be16(buf + 8) > 0);      /* OPTIMAL STREAM WRITE SIZE */
        assert_int_equal(slate_be32(buf + 10), 1); /* STREAM GRANULARITY SIZE */
        inq[2] = 0x86;
        run(inq, 6, 255);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[5] & 0x10, 0x10); /* GROUP_SUP */
}

static void test_get_stream_status(void **state)
{
        (void)state;
        get_status(0, 248);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        /* The permanent streams 1..5, always open, PERM set, relative lifetime = id. */
        assert_int_equal(slate_be16(buf + 6), SCSI_STREAMS_PERM);
        assert_int_equal(slate_be32(buf), 8 * SCSI_STREAMS_PERM);
        for (unsigned i = 0; i < SCSI_STREAMS_PERM; i++) {
                const uint8_t *d = buf + 8 + 8 * i;
                assert_int_equal(d[0], 0x80);
                assert_int_equal(slate_be16(d + 2), i + 1);
                assert_int_equal(d[4], i + 1);
                /* ... and each has its core placement id. */
                assert_true(core_placement_find(n0, CORE_PL_SCSI_GROUP, i + 1) != 0);
        }
        /* From stream 3 on: 3 descriptors, the count still of all open streams. */
        get_status(3, 248);
        assert_int_equal(slate_be32(buf), 24);
        assert_int_equal(slate_be16(buf + 6), SCSI_STREAMS_PERM);
        assert_int_equal(slate_be16(buf + 10), 3);
        /* Linux's sd_is_perm_stream(0) asks from id 0: the first descriptor is permanent. */
        get_status(0, 16);
        assert_int_equal(cmd.data_in_len, 16);
        assert_int_equal(buf[8] & 0x80, 0x80);
        /* Beyond MAXIMUM NUMBER OF STREAMS: INVALID FIELD IN CDB at the starting id. */
        get_status((uint16_t)(scsi_streams_max(n0) + 1), 248);
        expect_field(true, 4, 7);
}

static void test_stream_control(void **state)
{
        unsigned max = scsi_streams_max(n0);
        (void)state;
        unsigned a = stream_open_ok();
        assert_int_equal(a, SCSI_STREAMS_PERM + 1);
        uint16_t pa = core_placement_find(n0, CORE_PL_SCSI_STREAM, a);
        assert_true(pa != 0);
        assert_true(pa != core_placement_find(n0, CORE_PL_SCSI_GROUP, 1));
        unsigned b = stream_open_ok();
        assert_int_equal(b, a + 1);
        get_status(0, 248);
        assert_int_equal(slate_be16(buf + 6), SCSI_STREAMS_PERM + 2);
        const uint8_t *d = buf + 8 + 8 * SCSI_STREAMS_PERM;
        assert_int_equal(d[0] & 0x80, 0); /* not permanent */
        assert_int_equal(slate_be16(d + 2), a);
        /* Close a: gone from the core and the status; its id is handed out again. */
        stream_ctl(2, (uint16_t)a);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(core_placement_find(n0, CORE_PL_SCSI_STREAM, a), 0);
        get_status(0, 248);
        assert_int_equal(slate_be16(buf + 6), SCSI_STREAMS_PERM + 1);
        /* Closing it again, or a permanent stream, or id 0: INVALID FIELD IN CDB at STR_ID. */
        stream_ctl(2, (uint16_t)a);
        expect_field(true, 4, 7);
        stream_ctl(2, 1);
        expect_field(true, 4, 7);
        stream_ctl(2, 0);
        expect_field(true, 4, 7);
        stream_ctl(2, (uint16_t)(max + 1));
        expect_field(true, 4, 7);
        /* OPEN with no room for ASSIGNED_STR_ID: refused, nothing opened. */
        uint8_t o[16] = {0x9e, 0x34};
        slate_put_be(o + 10, 4, 4);
        run(o, 16, 4);
        expect_field(true, 10, 7);
        get_status(0, 248);
        assert_int_equal(slate_be16(buf + 6), SCSI_STREAMS_PERM + 1);
        /* STR_CTL 00b and 11b are reserved. */
        stream_ctl(0, 0);
        expect_field(true, 1, 6);
        stream_ctl(3, 0);
        expect_field(true, 1, 6);
        /* Open until every stream id is in use: then MAXIMUM NUMBER OF STREAMS OPEN. */
        unsigned opened = 0;
        for (;;) {
                stream_ctl(1, 0);
                if (cmd.status != SAM_STAT_GOOD)
                        break;
                opened++;
                assert_true(opened <= max);
        }
        expect_sense(0x55, 0x10);
        assert_int_equal(opened + 1 + SCSI_STREAMS_PERM, max); /* b is still open */
        for (unsigned id = SCSI_STREAMS_PERM + 1; id <= max; id++) {
                stream_ctl(2, (uint16_t)id);
                assert_int_equal(cmd.status, SAM_STAT_GOOD);
        }
        get_status(0, 248);
        assert_int_equal(slate_be16(buf + 6), SCSI_STREAMS_PERM);
}

static void test_write_stream(void **state)
{
        uint8_t c[32];
        (void)state;
        unsigned id = stream_open_ok();
        uint16_t pid = core_placement_find(n0, CORE_PL_SCSI_STREAM, id);
        struct core_placement_info before, after;
        assert_int_equal(core_placement_info(n0, pid, &before), 0);

        ws16(c, 100, 8, (uint16_t)id);
        c[1] = 0x08; /* FUA */
        assert_int_equal(run(c, 16, 8 * 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.placement, pid);
        assert_int_equal(cmd.req.op, CORE_OP_WRITE);
        assert_int_equal(cmd.req.lba, 100);
        assert_int_equal(cmd.req.nlb, 8);
        assert_true(cmd.req.flags & CORE_REQ_FUA);
        assert_int_equal(cmd.data_out_len, 8 * 512);
        memset(buf, 0x5a, 8 * 512);
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        /* The core counted the bytes against the stream's placement. */
        assert_int_equal(core_placement_info(n0, pid, &after), 0);
        assert_int_equal(after.bytes_written - before.bytes_written, 8 * 512);
        /* The data is there. */
        uint8_t r[16] = {0x88};
        slate_put_be(r + 2, 8, 100);
        slate_put_be(r + 10, 4, 8);
        assert_int_equal(run(r, 16, 8 * 512), SCSI_PARSE_EXEC);
        exec_wait();
        for (unsigned i = 0; i < 8 * 512; i++)
                assert_int_equal(buf[i], 0x5a);

        /* (32): the same, STR_ID in bytes 4-5; the tag fields are ignored. */
        ws32(c, 200, 4, (uint16_t)id);
        assert_int_equal(run(c, 32, 4 * 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.placement, pid);
        assert_int_equal(cmd.req.lba, 200);
        assert_int_equal(cmd.req.nlb, 4);
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        ws32(c, 200, 4, (uint16_t)id);
        c[7] = 0x10;
        run(c, 32, 4 * 512);
        expect_field(true, 7, 7);

        /* A permanent stream by id: its GROUP placement. */
        ws16(c, 0, 1, 2);
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.placement, core_placement_find(n0, CORE_PL_SCSI_GROUP, 2));
        assert_true(cmd.req.hints & CORE_HINT_WRITE_FREQ); /* stream 2: short lifetime */

        /* STR_ID 0, beyond the maximum: INVALID FIELD IN CDB; not open: STREAM NOT OPEN. */
        ws16(c, 0, 1, 0);
        run(c, 16, 512);
        expect_field(true, 10, 7);
        ws16(c, 0, 1, (uint16_t)(scsi_streams_max(n0) + 1));
        run(c, 16, 512);
        expect_field(true, 10, 7);
        ws16(c, 0, 1, (uint16_t)(id + 1));
        run(c, 16, 512);
        expect_sense(0x2c, 0x0f);
        ws32(c, 0, 1, (uint16_t)(id + 1));
        run(c, 32, 512);
        expect_sense(0x2c, 0x0f);
        /* WRPROTECT (no PI), reserved bits, group byte's reserved bits. */
        ws16(c, 0, 1, (uint16_t)id);
        c[1] = 0x20;
        run(c, 16, 512);
        expect_field(true, 1, 7);
        ws16(c, 0, 1, (uint16_t)id);
        c[1] = 0x02;
        run(c, 16, 512);
        expect_field(true, 1, 1);
        ws16(c, 0, 1, (uint16_t)id);
        c[14] = 0x40;
        run(c, 16, 512);
        expect_field(true, 14, 7);
        /* Beyond capacity: LOGICAL BLOCK ADDRESS OUT OF RANGE. */
        ws16(c, NBLOCKS - 1, 2, (uint16_t)id);
        run(c, 16, 1024);
        expect_sense(0x21, 0x00);
        /* Closed: writes to it are refused again. */
        stream_ctl(2, (uint16_t)id);
        ws16(c, 0, 1, (uint16_t)id);
        run(c, 16, 512);
        expect_sense(0x2c, 0x0f);
}

static void w10(uint8_t *c, uint32_t lba, uint16_t nlb, uint8_t group)
{
        memset(c, 0, 10);
        c[0] = 0x2a;
        slate_put_be(c + 2, 4, lba);
        c[6] = group;
        slate_put_be(c + 7, 2, nlb);
}

static void test_group_number(void **state)
{
        uint8_t c[16];
        (void)state;
        /* GROUP NUMBER n (1..5) is permanent stream n, as Linux sends write-lifetime hints. */
        for (unsigned g = 1; g <= SCSI_STREAMS_PERM; g++) {
                w10(c, 0, 1, (uint8_t)g);
                assert_int_equal(run(c, 10, 512), SCSI_PARSE_EXEC);
                uint16_t want = core_placement_find(n0, CORE_PL_SCSI_GROUP, g);
                assert_true(want != 0);
                assert_int_equal(cmd.req.placement, want);
        }
        w10(c, 0, 1, 2);
        run(c, 10, 512);
        assert_true(cmd.req.hints & CORE_HINT_WRITE_FREQ);
        w10(c, 0, 1, 5);
        run(c, 10, 512);
        assert_true(cmd.req.hints & CORE_HINT_WRITE_RARE);
        /* Group 0 and groups without a permanent stream: no placement. */
        w10(c, 0, 1, 0);
        run(c, 10, 512);
        assert_int_equal(cmd.req.placement, 0);
        assert_int_equal(cmd.req.hints, 0);
        w10(c, 0, 1, 40);
        run(c, 10, 512);
        assert_int_equal(cmd.req.placement, 0);
        /* WRITE(16), byte 14. */
        memset(c, 0, 16);
        c[0] = 0x8a;
        slate_put_be(c + 10, 4, 1);
        c[14] = 3;
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.placement, core_placement_find(n0, CORE_PL_SCSI_GROUP, 3));
        /* Reads carry no placement (only hints and statistics). */
        memset(c, 0, 16);
        c[0] = 0x88;
        slate_put_be(c + 10, 4, 1);
        c[14] = 3;
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.placement, 0);
        /* The group byte's reserved bits. */
        w10(c, 0, 1, 0x80);
        run(c, 10, 512);
        expect_field(true, 6, 7);
}

/* MODE SENSE(10) of 0Ah/05h with page control pc; returns the page. */
static uint8_t *sense_grouping(int pc)
{
        uint8_t c[10] = {0x5a, 0x08, (uint8_t)((pc << 6) | 0x0a), 0x05, 0, 0, 0, 0x10, 0x00, 0};
        run(c, 10, 4096);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(cmd.data_in_len, 8 + SCSI_GROUPING_LEN);
        return buf + 8;
}

static void test_grouping_page(void **state)
{
        (void)state;
        uint8_t *p = sense_grouping(0);
        assert_int_equal(p[0], 0x4a); /* SPF, page 0Ah */
        assert_int_equal(p[1], 0x05);
        assert_int_equal(slate_be16(p + 2), 0x040c);
        for (unsigned g = 0; g < SCSI_GROUPS; g++) {
                const uint8_t *d = p + 16 + 16 * g;
                /* ST_ENBLE on 0..5 (Linux counts from descriptor 0), IC_ENABLE on 1..31. */
                assert_int_equal(!!(d[0] & 0x04), g <= SCSI_STREAMS_PERM);
                assert_int_equal(!!(d[0] & 0x01), g >= 1 && g <= 31);
                assert_int_equal(d[0] & 0xc0, 0); /* valid */
        }
        p = sense_grouping(1);
        assert_int_equal(p[16], 0xc3); /* mode, CS_ENBLE, IC_ENABLE; ST_ENBLE not changeable */
        assert_int_equal(p[20], 0xbf);
        p = sense_grouping(2); /* default: as the current one before any MODE SELECT */
        assert_int_equal(p[16], 0x04);
        assert_int_equal(p[16 + 16], 0x05);
        /* Saved values: not supported (39h/00h). */
        uint8_t c[10] = {0x5a, 0x08, 0xca, 0x05, 0, 0, 0, 0x10, 0x00, 0};
        run(c, 10, 4096);
        expect_sense(0x39, 0x00);
}

/* MODE SELECT(10) of the grouping page as the current one with edit applied. */
static void select_grouping(unsigned g, unsigned byte, uint8_t val)
{
        uint8_t page[SCSI_GROUPING_LEN];
        memcpy(page, sense_grouping(0), sizeof(page));
        page[16 + 16 * g + byte] = val;
        uint32_t len = 8 + SCSI_GROUPING_LEN;
        uint8_t c[10] = {0x55, 0x10, 0, 0, 0, 0, 0, (uint8_t)(len >> 8), (uint8_t)len, 0};
        assert_int_equal(run(c, 10, len), SCSI_PARSE_EXEC);
        memset(buf, 0, 8);
        memcpy(buf + 8, page, sizeof(page));
        buf[8] &= 0x7f; /* PS is reserved in MODE SELECT */
        scsi_mode_select_apply(&cmd);
}

static void test_grouping_select(void **state)
{
        uint8_t c[10];
        (void)state;
        /* Group 7: markup "write sequential more, writes more than reads". */
        select_grouping(7, 5, (2 << 4) | (2 << 2));
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        uint8_t *p = sense_grouping(0);
        assert_int_equal(p[16 + 16 * 7 + 5], (2 << 4) | (2 << 2));
        w10(c, 0, 1, 7);
        assert_int_equal(run(c, 10, 512), SCSI_PARSE_EXEC);
        assert_true(cmd.req.hints & CORE_HINT_SEQUENTIAL);
        assert_true(cmd.req.hints & CORE_HINT_WRITE_FREQ);
        assert_int_equal(cmd.req.placement, 0);
        /* Back to "no information". */
        select_grouping(7, 5, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        w10(c, 0, 1, 7);
        run(c, 10, 512);
        assert_int_equal(cmd.req.hints, 0);
        /* ST_ENBLE is not changeable: INVALID FIELD IN PARAMETER LIST at its byte. */
        select_grouping(3, 0, 0x01);
        expect_field(false, 8 + 16 + 16 * 3, 2);
        /* Reserved IO ADVICE HINTS MODE, LBM type other than 0, a reserved 2-bit code. */
        select_grouping(9, 0, 0x81);
        expect_field(false, 8 + 16 + 16 * 9, 7);
        select_grouping(9, 4, 0x01);
        expect_field(false, 8 + 16 + 16 * 9 + 4, 3);
        select_grouping(9, 5, 0xc0);
        expect_field(false, 8 + 16 + 16 * 9 + 5, 7);
        /* Nothing changed by the refused ones. */
        p = sense_grouping(0);
        assert_int_equal(p[16 + 16 * 9], 0x01);
        assert_int_equal(p[16 + 16 * 3], 0x05);
}

static void log19(uint8_t sub)
{
        uint8_t c[10] = {0x4d, 0, 0x40 | 0x19, sub, 0, 0, 0, 0x04, 0x00, 0};
        run(c, 10, 1024);
}

static void test_group_stats(void **state)
{
        uint8_t c[16];
        (void)state;
        log19(5);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        uint64_t w5 = slate_be64(buf + 16);
        log19(4);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        uint64_t w0 = slate_be64(buf + 4 + 4 + 8), r0 = slate_be64(buf + 4 + 4);
        uint64_t rx0 = slate_be64(buf + 4 + 4 + 16), tx0 = slate_be64(buf + 4 + 4 + 24);
        uint64_t wf0 = slate_be64(buf + 4 + 52 + 4 + 8);
        for (int i = 0; i < 3; i++) {
                w10(c, 16, 4, 4);
                assert_int_equal(run(c, 10, 2048), SCSI_PARSE_EXEC);
                exec_wait();
        }
        w10(c, 16, 2, 4);
        c[1] = 0x08; /* FUA */
        run(c, 10, 1024);
        exec_wait();
        memset(c, 0, 16);
        c[0] = 0x88;
        slate_put_be(c + 10, 4, 8);
        c[14] = 4;
        run(c, 16, 4096);
        exec_wait();
        log19(4);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[0], 0x80 | 0x40 | 0x19); /* DS, SPF */
        assert_int_equal(buf[1], 4);
        assert_int_equal(slate_be16(buf + 2), 52 + 68);
        assert_int_equal(slate_be16(buf + 4), 0x0001);
        assert_int_equal(buf[7], 0x30);
        assert_int_equal(slate_be64(buf + 8) - r0, 1);
        assert_int_equal(slate_be64(buf + 16) - w0, 4);
        assert_int_equal(slate_be64(buf + 24) - rx0, 14);
        assert_int_equal(slate_be64(buf + 32) - tx0, 8);
        assert_int_equal(slate_be16(buf + 56), 0x0004);
        assert_int_equal(buf[59], 0x40);
        assert_int_equal(slate_be64(buf + 56 + 4 + 8) - wf0, 1);
        /* Other groups saw nothing of it. */
        log19(5);
        assert_int_equal(slate_be64(buf + 16), w5);
        /* IC_ENABLE cleared: the group is not counted any more. */
        select_grouping(4, 0, 0x04);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        w10(c, 16, 4, 4);
        run(c, 10, 2048);
        exec_wait();
        log19(4);
        assert_int_equal(slate_be64(buf + 16) - w0, 4);
        select_grouping(4, 0, 0x05);
        /* Subpage 20h is not a group page; parameter code past 0004h. */
        log19(0x20);
        expect_field(true, 3, 7);
        uint8_t l[10] = {0x4d, 0, 0x59, 0x01, 0, 0x00, 0x05, 0x04, 0x00, 0};
        run(l, 10, 1024);
        expect_field(true, 5, 7);
}

static void test_rsoc_lists_them(void **state)
{
        (void)state;
        /* One-command form for each: supported (3), with the usage data. */
        struct {
                uint8_t op;
                uint16_t sa;
                bool has_sa;
                uint16_t len;
        } rows[] = {{0x9a, 0, false, 16},
                    {0x9e, 0x14, true, 16},
                    {0x9e, 0x16, true, 16},
                    {0x7f, 0x10, true, 32}};
        for (unsigned i = 0; i < 4; i++) {
                uint8_t c[12] = {0xa3, 0x0c, rows[i].has_sa ? 0x02 : 0x01, rows[i].op};
                slate_put_be(c + 4, 2, rows[i].sa);
                slate_put_be(c + 6, 4, 512);
                run(c, 12, 512);
                assert_int_equal(cmd.status, SAM_STAT_GOOD);
                assert_int_equal(buf[1] & 0x07, 3);
                assert_int_equal(slate_be16(buf + 2), rows[i].len);
                assert_int_equal(buf[4], rows[i].op);
        }
}

/*
 * A flash-model namespace whose geometry leaves no spare erase block to keep one open per
 * placement (64 MiB, 1 MiB erase blocks, 7%): core_placement_max is 0, so no streams at all.
 */
static void test_no_placements(void **state)
{
        struct core_ns *n1;
        char err[256];
        (void)state;
        struct core_ns_params p = {
            .name = "s1",
            .backend = "mem",
            .size_bytes = 64u << 20,
            .block_size = 512,
            .flash = {.enable = true, .erase_block = 1u << 20, .op_percent = 7, .op_set = true}};
        assert_int_equal(core_ns_create(&p, &n1, err, sizeof(err)), 0);
        assert_int_equal(core_placement_max(n1), 0);
        assert_int_equal(scsi_target_map_lun(&tgt, 1, n1), 0);
        uint8_t inq[6] = {0x12, 0x01, 0xb7, 0x00, 0xff, 0};
        memset(&cmd, 0, sizeof(cmd));
        memcpy(cmd.cdb, inq, 6);
        cmd.cdb_len = 6;
        cmd.lun = 1;
        cmd.nexus = &nx;
        cmd.edtl = 255;
        cmd.buf = buf;
        cmd.buf_len = 2 * CORE_MAX_TRANSFER_BYTES;
        atomic_store(&nx.ua[1], 0);
        scsi_cmd_parse(&cmd);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[5] & 0x01, 0);       /* RSCS 0: no permanent streams */
        assert_int_equal(slate_be16(buf + 6), 0); /* MAXIMUM NUMBER OF STREAMS */
        /* A write with GROUP NUMBER 2 carries no placement. */
        uint8_t c[10];
        w10(c, 0, 1, 2);
        memset(&cmd, 0, sizeof(cmd));
        memcpy(cmd.cdb, c, 10);
        cmd.cdb_len = 10;
        cmd.lun = 1;
        cmd.nexus = &nx;
        cmd.edtl = 512;
        cmd.buf = buf;
        cmd.buf_len = 2 * CORE_MAX_TRANSFER_BYTES;
        assert_int_equal(scsi_cmd_parse(&cmd), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.placement, 0);
        assert_int_equal(scsi_target_unmap_lun(&tgt, 1), 0);
        assert_int_equal(core_ns_delete("s1"), 0);
}

/*
 * UNMAP on the thin LUN 2: adjacent descriptors (and empty ones between
 * them) are one DEALLOCATE, a descriptor that does not continue the range
 * starts another: 9 descriptors, 3 core requests (each one backend round
 * trip, which an RBD image pays in full).
 */
static void test_unmap_joins_adjacent(void **state)
{
        (void)state;
        static const struct {
                uint64_t lba;
                uint32_t n;
        } d[] = {{10, 1}, {11, 1}, {12, 0}, {12, 2}, {14, 6}, {30, 1}, {31, 1}, {5, 1}, {6, 0}};
        const unsigned nd = sizeof(d) / sizeof(d[0]);
        uint8_t c[10] = {0x42};
        uint32_t len = 8 + 16 * nd;
        slate_put_be(c + 7, 2, len);
        assert_int_equal(run_lun(c, sizeof(c), len, 2), SCSI_PARSE_EXEC);
        memset(buf, 0, len);
        slate_put_be(buf, 2, len - 2);
        slate_put_be(buf + 2, 2, 16 * nd);
        for (unsigned i = 0; i < nd; i++) {
                slate_put_be(buf + 8 + 16 * i, 8, d[i].lba);
                slate_put_be(buf + 16 + 16 * i, 4, d[i].n);
        }
        uint64_t before = core_stats_ops(&u0->stats, CORE_OPC_WRITE);
        exec_wait();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(core_stats_ops(&u0->stats, CORE_OPC_WRITE) - before, 3);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_vpd_bits),
            cmocka_unit_test(test_get_stream_status),
            cmocka_unit_test(test_stream_control),
            cmocka_unit_test(test_write_stream),
            cmocka_unit_test(test_group_number),
            cmocka_unit_test(test_grouping_page),
            cmocka_unit_test(test_grouping_select),
            cmocka_unit_test(test_group_stats),
            cmocka_unit_test(test_rsoc_lists_them),
            cmocka_unit_test(test_no_placements),
            cmocka_unit_test(test_unmap_joins_adjacent),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
