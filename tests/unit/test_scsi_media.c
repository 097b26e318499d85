/*
 * Unit tests for the SCSI side of failing media (scsi/media.c, issue 15):
 * WRITE LONG(10)/(16) decoding (WR_UNCOR, COR_DIS, PBLOCK, reserved
 * fields, the LBA range) and its refusals with the field pointer; GET
 * PHYSICAL ELEMENT STATUS (FILTER, REPORT TYPE, STARTING ELEMENT, the
 * allocation length), REMOVE ELEMENT AND TRUNCATE and RESTORE ELEMENTS
 * AND REBUILD CDB checks; the commands of the element model absent from an
 * LU without one; GET LBA STATUS report types with unrecoverable ranges;
 * the REPORT SUPPORTED OPERATION CODES rows; VPD B1h DEPOPULATION TIME.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "slate/byteorder.h"
#include "scsi/internal.h"
#include "core/media.h"

#define NBLOCKS 8192u

static struct core_ns ns;
static struct scsi_target tgt;
static struct scsi_nexus nx;
static struct scsi_cmd cmd;
static uint8_t *buf;

static int setup(void **state)
{
        (void)state;
        memset(&ns, 0, sizeof(ns));
        strcpy(ns.name, "m0");
        ns.block_size = 512;
        ns.block_shift = 9;
        ns.num_blocks = NBLOCKS;
        pthread_mutex_init(&ns.lock, NULL);
        atomic_init(&ns.refs, 1);
        scsi_target_init(&tgt, "iqn.2024-01.org.slate:m", 1);
        atomic_store(&tgt.luns[0], &ns);
        scsi_nexus_init(&nx, &tgt, "iqn.init,i,0x1", "iqn.2024-01.org.slate:m,t,0x1", NULL, 0);
        atomic_store(&nx.ua[0], 0);
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

static enum scsi_parse_result run(const uint8_t *cdb, size_t len, uint32_t edtl)
{
        memset(&cmd, 0, sizeof(cmd));
        memcpy(cmd.cdb, cdb, len);
        cmd.cdb_len = (uint16_t)(len < 16 ? 16 : len);
        cmd.nexus = &nx;
        cmd.edtl = edtl;
        cmd.buf = buf;
        cmd.buf_len = 2 * CORE_MAX_TRANSFER_BYTES;
        return scsi_cmd_parse(&cmd);
}

static void expect_sense(uint8_t key, uint8_t asc, uint8_t ascq)
{
        assert_int_equal(cmd.status, SAM_STAT_CHECK_CONDITION);
        assert_int_equal(cmd.sense[0] & 0x7f, 0x70);
        assert_int_equal(cmd.sense[2] & 0x0f, key);
        assert_int_equal(cmd.sense[12], asc);
        assert_int_equal(cmd.sense[13], ascq);
}

/* INVALID FIELD IN CDB with the field pointer at byte (and bit, < 0: none). */
static void expect_field(uint16_t byte, int bit)
{
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(cmd.sense[15], 0x80 | 0x40 | (bit >= 0 ? 0x08 | bit : 0));
        assert_int_equal(slate_be16(cmd.sense + 16), byte);
}

static void wl10(uint8_t *c, uint8_t flags, uint32_t lba, uint16_t btl)
{
        memset(c, 0, 16);
        c[0] = 0x3f;
        c[1] = flags;
        slate_put_be(c + 2, 4, lba);
        slate_put_be(c + 7, 2, btl);
}

static void wl16(uint8_t *c, uint8_t flags, uint64_t lba, uint16_t btl)
{
        memset(c, 0, 16);
        c[0] = 0x9f;
        c[1] = flags | 0x11;
        slate_put_be(c + 2, 8, lba);
        slate_put_be(c + 12, 2, btl);
}

/* ---- WRITE LONG ---- */

static void test_write_long_decode(void **state)
{
        uint8_t c[16];
        struct scsi_write_long wl;
        uint16_t byte;
        int bit;
        (void)state;

        /* WR_UNCOR, one block; the BYTE TRANSFER LENGTH is ignored. */
        wl10(c, 0x40, 77, 520);
        assert_int_equal(scsi_media_write_long_decode(c, &ns, &wl, &byte, &bit), 0);
        assert_true(wl.wr_uncor && !wl.cor_dis && !wl.pblock);
        assert_int_equal(wl.lba, 77);
        assert_int_equal(wl.nlb, 1);
        wl16(c, 0xc0, NBLOCKS - 1, 0);
        assert_int_equal(scsi_media_write_long_decode(c, &ns, &wl, &byte, &bit), 0);
        assert_true(wl.wr_uncor && wl.cor_dis);
        assert_int_equal(wl.lba, NBLOCKS - 1);
        /* WR_UNCOR=0: a vendor-specific long block, refused at byte 1 bit 6. */
        wl10(c, 0x80, 77, 512);
        assert_int_equal(scsi_media_write_long_decode(c, &ns, &wl, &byte, &bit), -EINVAL);
        assert_int_equal(byte, 1);
        assert_int_equal(bit, 6);
        /* PBLOCK with one logical block per physical block: byte 1 bit 5. */
        wl10(c, 0x60, 77, 0);
        assert_int_equal(scsi_media_write_long_decode(c, &ns, &wl, &byte, &bit), -EINVAL);
        assert_int_equal(bit, 5);
        /* PBLOCK with 8 logical blocks per physical block: the whole physical block. */
        ns.phys_exp = 3;
        assert_int_equal(scsi_media_write_long_decode(c, &ns, &wl, &byte, &bit), 0);
        assert_int_equal(wl.lba, 72);
        assert_int_equal(wl.nlb, 8);
        ns.phys_exp = 0;
        /* Reserved: (10) byte 1 bits 4:1 and byte 6; (16) bytes 10, 11, 14. */
        wl10(c, 0x40 | 0x04, 1, 0);
        assert_int_equal(scsi_media_write_long_decode(c, &ns, &wl, &byte, &bit), -EINVAL);
        assert_int_equal(byte, 1);
        assert_int_equal(bit, 2);
        wl10(c, 0x40, 1, 0);
        c[6] = 0x21;
        assert_int_equal(scsi_media_write_long_decode(c, &ns, &wl, &byte, &bit), -EINVAL);
        assert_int_equal(byte, 6);
        assert_int_equal(bit, 5);
        for (unsigned i = 0; i < 3; i++) {
                static const uint8_t at[] = {10, 11, 14};
                wl16(c, 0x40, 1, 0);
                c[at[i]] = 0x01;
                assert_int_equal(scsi_media_write_long_decode(c, &ns, &wl, &byte, &bit), -EINVAL);
                assert_int_equal(byte, at[i]);
                assert_int_equal(bit, 0);
        }
        /* The LBA range, 64-bit overflow included. */
        wl10(c, 0x40, NBLOCKS, 0);
        assert_int_equal(scsi_media_write_long_decode(c, &ns, &wl, &byte, &bit), -ERANGE);
        wl16(c, 0x40, UINT64_MAX, 0);
        assert_int_equal(scsi_media_write_long_decode(c, &ns, &wl, &byte, &bit), -ERANGE);
}

static void test_write_long_parse(void **state)
{
        uint8_t c[16];
        (void)state;
        /* Parsed: nothing to transfer, one block to mark. */
        wl16(c, 0x40, 100, 512);
        assert_int_equal(run(c, 16, 0), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.xfer_len, 0);
        assert_int_equal(cmd.lba, 100);
        assert_int_equal(cmd.nlb, 1);
        /* Refusals, with the field pointer. */
        wl10(c, 0x00, 100, 512);
        run(c, 10, 512);
        expect_field(1, 6);
        wl10(c, 0x60, 100, 0);
        run(c, 10, 0);
        expect_field(1, 5);
        wl16(c, 0x40, 0, 0);
        c[14] = 0x80;
        run(c, 16, 0);
        expect_field(14, 7);
        wl10(c, 0x40, NBLOCKS, 0);
        run(c, 10, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x21, 0x00);
        /* A write: DATA PROTECT on a write-protected LU. */
        atomic_store(&ns.wp, CORE_WP_CONFIG);
        wl10(c, 0x40, 1, 0);
        run(c, 10, 0);
        expect_sense(SK_DATA_PROTECT, 0x27, 0x00);
        atomic_store(&ns.wp, 0);
}

/* ---- The element model ---- */

static void gpes_cdb(uint8_t *c, uint32_t start, uint32_t alloc, uint8_t b14)
{
        memset(c, 0, 16);
        c[0] = 0x9e;
        c[1] = 0x17;
        slate_put_be(c + 6, 4, start);
        slate_put_be(c + 10, 4, alloc);
        c[14] = b14;
}

static void test_no_elements_not_offered(void **state)
{
        uint8_t c[16];
        (void)state;
        assert_int_equal(core_media_elements(&ns), 0);
        for (uint8_t sa = 0x17; sa <= 0x19; sa++) {
                gpes_cdb(c, 0, 1024, 0);
                c[1] = sa;
                run(c, 16, 1024);
                expect_field(1, 4); /* an unsupported service action */
                /* REPORT SUPPORTED OPERATION CODES: not supported (SUPPORT 001b). */
                uint8_t q[12] = {0xa3, 0x0c, 0x02, 0x9e, 0, sa, 0, 0, 0, 64, 0, 0};
                run(q, 12, 64);
                assert_int_equal(cmd.status, SAM_STAT_GOOD);
                assert_int_equal(buf[1] & 0x07, 0x01);
        }
        /* WRITE LONG needs no element model: listed everywhere. */
        uint8_t q[12] = {0xa3, 0x0c, 0x01, 0x3f, 0, 0, 0, 0, 0, 64, 0, 0};
        run(q, 12, 64);
        assert_int_equal(buf[1] & 0x07, 0x03);
        assert_int_equal(slate_be16(buf + 2), 10);
        static const uint8_t u10[] = {0x3f, 0xe0, 0xff, 0xff, 0xff, 0xff, 0, 0xff, 0xff, 0x07};
        assert_memory_equal(buf + 4, u10, sizeof(u10));
        uint8_t q16[12] = {0xa3, 0x0c, 0x02, 0x9f, 0, 0x11, 0, 0, 0, 64, 0, 0};
        run(q16, 12, 64);
        assert_int_equal(buf[1] & 0x07, 0x03);
        static const uint8_t u16[] = {0x9f, 0xf1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0xff, 0,    0,    0xff, 0xff, 0,    0x07};
        assert_memory_equal(buf + 4, u16, sizeof(u16));
        /* VPD B1h: no DEPOPULATION TIME without elements. */
        uint8_t inq[6] = {0x12, 0x01, 0xb1, 0, 64, 0};
        run(inq, 6, 64);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf + 12), 0);
}

/* An LU with 4 elements of 2048-block stripes: 2048 blocks each. */
static int setup_elements(void **state)
{
        char err[128];
        setup(state);
        assert_int_equal(core_media_init(&ns), 0);
        assert_int_equal(core_media_configure(&ns, 4, 2048, err, sizeof(err)), 0);
        atomic_store(&nx.ua[0], 0);
        return 0;
}

static int teardown_elements(void **state)
{
        core_media_free(&ns);
        return teardown(state);
}

static void gpes(uint32_t start, uint32_t alloc, uint8_t b14)
{
        uint8_t c[16];
        gpes_cdb(c, start, alloc, b14);
        run(c, 16, alloc);
}

/* Descriptor i of a GET PHYSICAL ELEMENT STATUS answer in buf. */
static void expect_desc(unsigned i, uint32_t id, uint8_t health, uint64_t cap, bool ralwd)
{
        const uint8_t *d = buf + 32 + 32 * i;
        assert_int_equal(slate_be32(d + 4), id);
        assert_int_equal(d[13] & 1, ralwd);
        assert_int_equal(d[14], 0x01); /* storage element */
        assert_int_equal(d[15], health);
        assert_int_equal(slate_be64(d + 16), cap);
}

static void test_gpes(void **state)
{
        char err[128];
        (void)state;
        gpes(0, 1024, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(cmd.data_in_len, 32 + 4 * 32);
        assert_int_equal(slate_be32(buf), 4);      /* NUMBER OF DESCRIPTORS */
        assert_int_equal(slate_be32(buf + 4), 4);  /* ... RETURNED */
        assert_int_equal(slate_be32(buf + 8), 0);  /* none being depopulated */
        assert_int_equal(slate_be16(buf + 12), 3); /* at most 3 may go */
        assert_int_equal(slate_be16(buf + 14), 0);
        for (unsigned i = 0; i < 4; i++)
                expect_desc(i, i + 1, 0x01, 2048, false);
        /* STARTING ELEMENT: from element 3 on. */
        gpes(3, 1024, 0);
        assert_int_equal(slate_be32(buf), 2);
        assert_int_equal(slate_be32(buf + 4), 2);
        expect_desc(0, 3, 0x01, 2048, false);
        gpes(5, 1024, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf), 0);
        assert_int_equal(cmd.data_in_len, 32);
        /* The allocation length: one whole descriptor fits; a short one cuts the header. */
        gpes(0, 64, 0);
        assert_int_equal(cmd.data_in_len, 64);
        assert_int_equal(slate_be32(buf), 4);
        assert_int_equal(slate_be32(buf + 4), 1);
        memset(buf, 0xee, 64);
        gpes(0, 6, 0);
        assert_int_equal(cmd.data_in_len, 6);
        assert_int_equal(slate_be32(buf), 4);
        assert_int_equal(buf[6], 0xee);
        gpes(0, 0, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(cmd.data_in_len, 0);

        /* Element 2 fails (management): every nexus gets WARNING - PHYSICAL ELEMENT STATUS
         * CHANGE; FILTER 01b then lists it alone, beyond the limits. */
        assert_int_equal(
            core_media_set_element(&ns, 2, CORE_ELEM_FAILED, -1, NULL, err, sizeof(err)), 0);
        gpes(0, 1024, 0x40);
        expect_sense(SK_UNIT_ATTENTION, 0x0b, 0x14);
        gpes(0, 1024, 0x40);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf), 1);
        expect_desc(0, 2, CORE_ELEM_HEALTH_FAILED, 2048, false);
        /* REPORT TYPE 1h (storage elements): the same elements. */
        gpes(0, 1024, 0x01);
        assert_int_equal(slate_be32(buf), 4);
        expect_desc(1, 2, CORE_ELEM_HEALTH_FAILED, 2048, false);
        /* A degraded element at its limit is not "outside" it. */
        assert_int_equal(
            core_media_set_element(&ns, 3, CORE_ELEM_DEGRADED, -1, NULL, err, sizeof(err)), 0);
        atomic_store(&nx.ua[0], 0);
        gpes(0, 1024, 0x40);
        assert_int_equal(slate_be32(buf), 1);

        /* Malformed: FILTER 10b/11b, REPORT TYPE 2h+, reserved bits and bytes. */
        gpes(0, 1024, 0x80);
        expect_field(14, 7);
        gpes(0, 1024, 0xc0);
        expect_field(14, 7);
        gpes(0, 1024, 0x02);
        expect_field(14, 3);
        gpes(0, 1024, 0x0f);
        expect_field(14, 3);
        gpes(0, 1024, 0x20);
        expect_field(14, 5);
        uint8_t c[16];
        gpes_cdb(c, 0, 1024, 0);
        c[3] = 0x10;
        run(c, 16, 1024);
        expect_field(3, 4);
        gpes_cdb(c, 0, 1024, 0);
        c[1] |= 0x80;
        run(c, 16, 1024);
        expect_field(1, 7);
}

static void rmeat_cdb(uint8_t *c, uint64_t cap, uint32_t id)
{
        memset(c, 0, 16);
        c[0] = 0x9e;
        c[1] = 0x18;
        slate_put_be(c + 2, 8, cap);
        slate_put_be(c + 10, 4, id);
}

static void test_remove_restore_parse(void **state)
{
        uint8_t c[16];
        (void)state;
        /* Good: the device chooses, or exactly the capacity less the element's share. */
        rmeat_cdb(c, 0, 4);
        assert_int_equal(run(c, 16, 0), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.aux, 4);
        assert_int_equal(cmd.xfer_len, 0);
        rmeat_cdb(c, NBLOCKS - 2048, 1);
        assert_int_equal(run(c, 16, 0), SCSI_PARSE_EXEC);
        /* No such element. */
        rmeat_cdb(c, 0, 0);
        run(c, 16, 0);
        expect_field(10, 7);
        rmeat_cdb(c, 0, 5);
        run(c, 16, 0);
        expect_field(10, 7);
        rmeat_cdb(c, 0, 0xffffffffu);
        run(c, 16, 0);
        expect_field(10, 7);
        /* A REQUESTED CAPACITY the device cannot give. */
        rmeat_cdb(c, NBLOCKS - 2047, 1);
        run(c, 16, 0);
        expect_field(2, 7);
        rmeat_cdb(c, NBLOCKS, 1);
        run(c, 16, 0);
        expect_field(2, 7);
        rmeat_cdb(c, 1, 1);
        run(c, 16, 0);
        expect_field(2, 7);
        /* Reserved: byte 1 bits 7:5, byte 14. */
        rmeat_cdb(c, 0, 1);
        c[14] = 0x01;
        run(c, 16, 0);
        expect_field(14, 0);
        rmeat_cdb(c, 0, 1);
        c[1] |= 0x20;
        run(c, 16, 0);
        expect_field(1, 5);
        /* Write protected: DATA PROTECT. */
        atomic_store(&ns.wp, CORE_WP_CONFIG);
        rmeat_cdb(c, 0, 1);
        run(c, 16, 0);
        expect_sense(SK_DATA_PROTECT, 0x27, 0x00);
        uint8_t r[16] = {0x9e, 0x19};
        run(r, 16, 0);
        expect_sense(SK_DATA_PROTECT, 0x27, 0x00);
        atomic_store(&ns.wp, 0);
        /* RESTORE ELEMENTS AND REBUILD: every byte but the CDB's frame is reserved. */
        assert_int_equal(run(r, 16, 0), SCSI_PARSE_EXEC);
        for (unsigned i = 2; i <= 14; i++) {
                r[i] = 0x02;
                run(r, 16, 0);
                expect_field((uint16_t)i, 1);
                r[i] = 0;
        }
        /* RSOC lists the three with their CDB usage data. */
        static const uint8_t use[3][16] = {
            {0x9e, 0x17, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xcf, 0x07},
            {0x9e, 0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0,
             0x07},
            {0x9e, 0x19, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x07}};
        for (uint8_t sa = 0x17; sa <= 0x19; sa++) {
                uint8_t q[12] = {0xa3, 0x0c, 0x02, 0x9e, 0, sa, 0, 0, 0, 64, 0, 0};
                run(q, 12, 64);
                assert_int_equal(cmd.status, SAM_STAT_GOOD);
                assert_int_equal(buf[1] & 0x07, 0x03);
                assert_int_equal(slate_be16(buf + 2), 16);
                assert_memory_equal(buf + 4, use[sa - 0x17], 16);
        }
        /* VPD B1h: DEPOPULATION TIME. */
        uint8_t inq[6] = {0x12, 0x01, 0xb1, 0, 64, 0};
        run(inq, 6, 64);
        assert_int_equal(slate_be32(buf + 12), SCSI_DEPOP_TIME_S);
}

static void lba_status(uint64_t lba, uint8_t rt)
{
        uint8_t c[16] = {0x9e, 0x12};
        slate_put_be(c + 2, 8, lba);
        slate_put_be(c + 10, 4, 1024);
        c[14] = rt;
        run(c, 16, 1024);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
}

static void expect_lbas(unsigned i, uint64_t lba, uint32_t n, uint8_t add)
{
        const uint8_t *d = buf + 8 + 16 * i;
        assert_int_equal(slate_be64(d), lba);
        assert_int_equal(slate_be32(d + 8), n);
        assert_int_equal(d[12] & 0x0f, 0); /* mapped (not thin) */
        assert_int_equal(d[13], add);
}

static void test_get_lba_status_unrecovered(void **state)
{
        char err[128];
        (void)state;
        /* Nothing bad: report type 10h returns no descriptor; the whole medium was
         * scanned (COMPLETION CONDITION 3h) and the report type processed (RTP). */
        lba_status(0, 0x10);
        assert_int_equal(slate_be32(buf), 4);
        assert_int_equal(buf[7], (3 << 1) | 1);
        /* Element 2 of 4 fails (stripe 1: 2048-4095), LBA 100 is marked. */
        assert_int_equal(
            core_media_set_element(&ns, 2, CORE_ELEM_FAILED, -1, NULL, err, sizeof(err)), 0);
        assert_int_equal(core_media_mark(&ns, 100, 1, true, NULL), 0);
        atomic_store(&nx.ua[0], 0);
        lba_status(0, 0x10);
        assert_int_equal(slate_be32(buf), 4 + 2 * 16);
        expect_lbas(0, 100, 1, 1);
        expect_lbas(1, 2048, 2048, 1);
        /* From inside a bad run: clipped to it. */
        lba_status(3000, 0x10);
        assert_int_equal(slate_be32(buf), 4 + 16);
        expect_lbas(0, 3000, 1096, 1);
        /* Report type 0: every run, the bad ones with ADDITIONAL STATUS 01h. */
        lba_status(0, 0x00);
        assert_int_equal(slate_be32(buf), 4 + 5 * 16);
        expect_lbas(0, 0, 100, 0);
        expect_lbas(1, 100, 1, 1);
        expect_lbas(2, 101, 2048 - 101, 0);
        expect_lbas(3, 2048, 2048, 1);
        expect_lbas(4, 4096, NBLOCKS - 4096, 0);
        assert_int_equal(buf[7], (3 << 1) | 1);
        /* Two descriptors' room: the allocation length ends it (1h). */
        uint8_t c2[16] = {0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0};
        run(c2, 16, 40);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf), 4 + 2 * 16);
        assert_int_equal(buf[7], (1 << 1) | 1);
        /* Report type 2 (mapped): the same on a fully provisioned LU; 1, 3, 4: none. */
        lba_status(0, 0x02);
        assert_int_equal(slate_be32(buf), 4 + 5 * 16);
        for (uint8_t rt = 1; rt <= 4; rt++) {
                if (rt == 2)
                        continue;
                lba_status(0, rt);
                assert_int_equal(slate_be32(buf), 4);
        }
        /* Reserved report types. */
        uint8_t c[16] = {0x9e, 0x12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0x05, 0};
        run(c, 16, 1024);
        expect_field(14, 7);
        c[14] = 0x11;
        run(c, 16, 1024);
        expect_field(14, 7);
        /* Healed: nothing left. */
        assert_int_equal(core_media_set_element(&ns, 2, CORE_ELEM_OK, -1, NULL, err, sizeof(err)),
                         0);
        assert_int_equal(core_media_mark(&ns, 100, 1, false, NULL), 0);
        atomic_store(&nx.ua[0], 0);
        lba_status(0, 0x10);
        assert_int_equal(slate_be32(buf), 4);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_write_long_decode, setup, teardown),
            cmocka_unit_test_setup_teardown(test_write_long_parse, setup, teardown),
            cmocka_unit_test_setup_teardown(test_no_elements_not_offered, setup, teardown),
            cmocka_unit_test_setup_teardown(test_gpes, setup_elements, teardown_elements),
            cmocka_unit_test_setup_teardown(test_remove_restore_parse, setup_elements,
                                            teardown_elements),
            cmocka_unit_test_setup_teardown(test_get_lba_status_unrecovered, setup_elements,
                                            teardown_elements),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
