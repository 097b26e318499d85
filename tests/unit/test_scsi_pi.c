/*
 * Unit tests for protection information in the SCSI personality (issue 10,
 * scsi/pi.c): RDPROTECT/WRPROTECT/VRPROTECT mapped to the core request's
 * protection settings and transfer size, type 2 and the 32-byte CDBs,
 * FORMAT UNIT's FMTPINFO / PROTECTION FIELD USAGE / exponent table, READ
 * CAPACITY(16), INQUIRY PROTECT, VPD 86h, the Control page ATO/ATMPE, the
 * Application Tag mode page and REPORT SUPPORTED OPERATION CODES.  The LU's
 * format is set directly (core_ns_format is the core's, tested there).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "slate/byteorder.h"
#include "slate/spec/scsi.h"
#include "scsi/internal.h"

#define NBLOCKS (1ull << 33) /* LBAs above 2^32: the reference tag is the low 32 bits */

static struct core_ns ns;
static struct scsi_target tgt;
static struct scsi_nexus nx;
static struct scsi_cmd cmd;
static uint8_t *buf;

static void set_type(uint8_t type, uint8_t exp)
{
        ns.pi = (struct core_pi_fmt){.block_size = 512,
                                     .md_size = type ? 8 : 0,
                                     .type = type,
                                     .pi_exp = exp,
                                     .pi_first = true};
}

static int setup(void **state)
{
        (void)state;
        memset(&ns, 0, sizeof(ns));
        strcpy(ns.name, "t0");
        ns.block_size = 512;
        ns.block_shift = 9;
        ns.num_blocks = NBLOCKS;
        pthread_mutex_init(&ns.lock, NULL);
        atomic_init(&ns.refs, 1);
        scsi_target_init(&tgt, "iqn.2024-01.org.slate:t", 1);
        atomic_store(&tgt.luns[0], &ns);
        scsi_nexus_init(&nx, &tgt, "iqn.init,i,0x1", "iqn.2024-01.org.slate:t,t,0x1", NULL, 0);
        atomic_store(&nx.ua[0], 0);
        if (!buf)
                buf = calloc(1, 2 * CORE_MAX_TRANSFER_BYTES);
        set_type(1, 0);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        scsi_nexus_fini(&nx);
        scsi_target_fini(&tgt);
        free(ns.scsi_state);
        ns.scsi_state = NULL;
        core_ns_pi_close(&ns); /* the application tag tables */
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

/* INVALID FIELD IN CDB/PARAMETER LIST pointing at byte/bit. */
static void expect_field(uint8_t asc, uint16_t byte, uint8_t bit)
{
        expect_sense(SK_ILLEGAL_REQUEST, asc, 0x00);
        assert_int_equal(cmd.sense[15] & 0x8f, 0x80 | 0x08 | bit);
        assert_int_equal(slate_be16(cmd.sense + 16), byte);
}

static void rw16(uint8_t *c, uint8_t op, uint8_t protect, uint64_t lba, uint32_t nlb)
{
        memset(c, 0, 16);
        c[0] = op;
        c[1] = (uint8_t)(protect << 5);
        slate_put_be(c + 2, 8, lba);
        slate_put_be(c + 10, 4, nlb);
}

static void rw32(uint8_t *c, uint16_t sa, uint8_t protect, uint64_t lba, uint32_t nlb, uint32_t ref,
                 uint16_t app, uint16_t mask)
{
        memset(c, 0, 32);
        c[0] = 0x7f;
        c[7] = 0x18;
        slate_put_be(c + 8, 2, sa);
        c[10] = (uint8_t)(protect << 5);
        slate_put_be(c + 12, 8, lba);
        slate_put_be(c + 20, 4, ref);
        slate_put_be(c + 24, 2, app);
        slate_put_be(c + 26, 2, mask);
        slate_put_be(c + 28, 4, nlb);
}

#define G CORE_PI_CHK_GUARD
#define A CORE_PI_CHK_APP
#define R CORE_PI_CHK_REF

static void test_no_pi_refuses_protect(void **state)
{
        uint8_t c[32];
        (void)state;
        set_type(0, 0);
        for (uint8_t p = 1; p < 8; p++) {
                rw16(c, 0x88, p, 0, 1);
                assert_int_equal(run(c, 16, 512), SCSI_PARSE_DONE);
                expect_field(0x24, 1, 7);
        }
        rw16(c, 0x88, 0, 0, 1);
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_EXEC);
        assert_false(cmd.req.pi.host_md);
        assert_int_equal(cmd.req.pi.chk, 0);
        assert_false(cmd.req.pi.gen);
        /* The 32-byte CDBs exist on type 2 LUs only. */
        rw32(c, SCSI_VL_READ_32, 0, 0, 1, 0, 0, 0);
        assert_int_equal(run(c, 32, 512), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00); /* service action */
        set_type(1, 0);
        assert_int_equal(run(c, 32, 512), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
}

static void test_type1_read(void **state)
{
        static const unsigned want[5] = {G | R, G | R, R, 0, G};
        uint64_t lba = (1ull << 32) + 7;
        uint8_t c[16];
        (void)state;
        for (uint8_t p = 0; p < 5; p++) {
                rw16(c, 0x88, p, lba, 4);
                assert_int_equal(run(c, 16, 4 * 520), SCSI_PARSE_EXEC);
                assert_int_equal(cmd.req.op, CORE_OP_READ);
                assert_int_equal(cmd.req.pi.host_md, p != 0);
                assert_int_equal(cmd.req.pi.chk, want[p]);
                assert_int_equal(cmd.req.pi.ref, 7); /* the LBA's low 32 bits */
                assert_int_equal(cmd.xfer_len, p ? 4 * 520 : 4 * 512);
                assert_int_equal(cmd.req.iov[0].iov_len, p ? 4 * 520 : 4 * 512);
                assert_int_equal(cmd.aux & 0x7fffffff, p ? 4 * 520 : 4 * 512);
        }
        for (uint8_t p = 5; p < 8; p++) { /* reserved */
                rw16(c, 0x88, p, 0, 1);
                assert_int_equal(run(c, 16, 520), SCSI_PARSE_DONE);
                expect_field(0x24, 1, 7);
        }
        /* READ(10): the same field. */
        uint8_t r10[10] = {0x28, 0x20, 0, 0, 0, 9, 0, 0, 2, 0};
        assert_int_equal(run(r10, 10, 1040), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.pi.chk, G | R);
        assert_int_equal(cmd.req.nlb, 2);
        assert_int_equal(cmd.req.pi.ref, 9);
        /* An EDTL short of the blocks with their PI reads the blocks it covers. */
        assert_int_equal(run(r10, 10, 520), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.nlb, 1);
}

static void test_type1_write(void **state)
{
        uint8_t c[16];
        (void)state;
        rw16(c, 0x8a, 0, 33, 2);
        assert_int_equal(run(c, 16, 1024), SCSI_PARSE_EXEC);
        assert_true(cmd.req.pi.gen);
        assert_false(cmd.req.pi.host_md);
        assert_int_equal(cmd.req.pi.gen_ref, 33);
        assert_int_equal(cmd.req.pi.chk, 0);
        assert_int_equal(cmd.data_out_len, 1024);
        rw16(c, 0x8a, 1, 33, 2);
        assert_int_equal(run(c, 16, 1040), SCSI_PARSE_EXEC);
        assert_false(cmd.req.pi.gen);
        assert_true(cmd.req.pi.host_md);
        assert_int_equal(cmd.req.pi.chk, G | R);
        assert_int_equal(cmd.req.pi.ref, 33);
        assert_int_equal(cmd.data_out_len, 1040);
        rw16(c, 0x8a, 3, 33, 2);
        assert_int_equal(run(c, 16, 1040), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.pi.chk, 0);
        assert_true(cmd.req.pi.host_md);
        /* WRITE SAME(16): one block with its PI; COMPARE AND WRITE: both halves. */
        rw16(c, 0x93, 1, 0, 8);
        assert_int_equal(run(c, 16, 520), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, 520);
        assert_true(cmd.req.pi.host_md);
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_DONE);
        expect_field(0x24, 10, 7);
        uint8_t caw[16] = {0x89, 0x20, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 1, 0, 0};
        assert_int_equal(run(caw, 16, 1040), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, 1040);
        assert_int_equal(cmd.req.pi.ref, 5);
        /*
         * ORWRITE(16): ORPROTECT for the transferred PI as WRPROTECT would be;
         * the stored blocks checked as a READ with RDPROTECT 000b (guard, type
         * 1 reference tag from the LBA) before the OR.
         */
        rw16(c, 0x8b, 0, 12, 2);
        assert_int_equal(run(c, 16, 1024), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.op, CORE_OP_ORWRITE);
        assert_true(cmd.req.pi.gen);
        assert_false(cmd.req.pi.host_md);
        assert_int_equal(cmd.req.pi.gen_ref, 12);
        assert_int_equal(cmd.req.pi.rmw_chk, G | R);
        assert_int_equal(cmd.req.pi.rmw_ref, 12);
        rw16(c, 0x8b, 4, 12, 2);
        assert_int_equal(run(c, 16, 1040), SCSI_PARSE_EXEC);
        assert_true(cmd.req.pi.host_md);
        assert_false(cmd.req.pi.gen);
        assert_int_equal(cmd.req.pi.chk, G);
        assert_int_equal(cmd.req.pi.rmw_chk, G | R);
        assert_int_equal(cmd.data_out_len, 1040);
        /* VERIFY(16) BYTCHK 0: checks the medium, transfers nothing. */
        rw16(c, 0x8f, 2, 3, 4);
        assert_int_equal(run(c, 16, 0), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.op, CORE_OP_VERIFY);
        assert_false(cmd.req.pi.host_md);
        assert_int_equal(cmd.req.pi.chk, R);
}

static void test_type2(void **state)
{
        uint8_t c[32];
        (void)state;
        set_type(2, 0);
        /* Non-zero xxPROTECT needs a 32-byte CDB on type 2 (SBC-4 4.22.2.4). */
        rw16(c, 0x88, 1, 0, 1);
        assert_int_equal(run(c, 16, 520), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x20, 0x00);
        rw16(c, 0x88, 0, 4, 1); /* reference tags unknown: not checked */
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.pi.chk, G);
        rw16(c, 0x8b, 0, 4, 1); /* ORWRITE: the stored reference tags not checked either */
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.pi.rmw_chk, G);
        rw32(c, SCSI_VL_READ_32, 1, 4, 2, 0x1000, 0xbeef, 0xff00);
        assert_int_equal(run(c, 32, 1040), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.op, CORE_OP_READ);
        assert_int_equal(cmd.req.lba, 4);
        assert_int_equal(cmd.req.nlb, 2);
        assert_int_equal(cmd.req.pi.chk, G | A | R);
        assert_int_equal(cmd.req.pi.ref, 0x1000);
        assert_int_equal(cmd.req.pi.app, 0xbeef);
        assert_int_equal(cmd.req.pi.app_mask, 0xff00);
        rw32(c, SCSI_VL_WRITE_32, 0, 4, 2, 0x2000, 0, 0);
        assert_int_equal(run(c, 32, 1024), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.op, CORE_OP_WRITE);
        assert_true(cmd.req.pi.gen);
        assert_int_equal(cmd.req.pi.gen_ref, 0x2000);
        rw32(c, SCSI_VL_VERIFY_32, 4, 4, 2, 0, 0, 0);
        assert_int_equal(run(c, 32, 0), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.op, CORE_OP_VERIFY);
        assert_int_equal(cmd.req.pi.chk, G);
        rw32(c, SCSI_VL_READ_32, 1, 4, 2, 0, 0, 0);
        c[7] = 0x10; /* ADDITIONAL CDB LENGTH */
        assert_int_equal(run(c, 32, 1040), SCSI_PARSE_DONE);
        expect_field(0x24, 7, 7);
}

static void test_read_capacity_inquiry_vpd(void **state)
{
        uint8_t rc16[16] = {0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0};
        uint8_t inq[6] = {0x12, 0, 0, 0, 0xff, 0};
        uint8_t ei[6] = {0x12, 0x01, 0x86, 0, 0xff, 0};
        (void)state;
        static const uint8_t prot[4] = {0x00, 0x01, 0x03, 0x05};
        for (uint8_t t = 0; t < 4; t++) {
                set_type(t, t == 2 ? 3 : 0);
                run(rc16, 16, 32);
                assert_int_equal(cmd.status, SAM_STAT_GOOD);
                assert_int_equal(buf[12], prot[t]);
                assert_int_equal(buf[13] >> 4, t == 2 ? 3 : 0);
        }
        run(inq, 6, 255);
        assert_int_equal(buf[5] & 0x01, 0x01); /* PROTECT */
        run(ei, 6, 255);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[4], 0x3f);        /* SPT 111b, GRD_CHK, APP_CHK, REF_CHK */
        assert_int_equal(buf[7] & 0x10, 0x10); /* P_I_I_SUP */
}

static void format(uint8_t b1, const uint8_t *list, uint32_t len, int want)
{
        uint8_t c[6] = {0x04, b1, 0, 0, 0, 0};
        struct core_pi_fmt f;
        memset(&cmd, 0, sizeof(cmd));
        memcpy(cmd.cdb, c, 6);
        cmd.ns = &ns;
        assert_int_equal(scsi_pi_format_decode(&cmd, list, len, &f), want < 0 ? -1 : 0);
        if (want >= 0) {
                assert_int_equal(f.type, want & 0x0f);
                assert_int_equal(f.pi_exp, want >> 4);
                assert_int_equal(f.md_size, (want & 0x0f) ? 8 : 0);
                assert_int_equal(f.block_size, ns.block_size);
                assert_int_equal(f.guard, CORE_PI_GUARD_CRC16);
        }
}

static void test_format_table(void **state)
{
        uint8_t s[4] = {0}, l[8] = {0};
        (void)state;
        format(0x00, NULL, 0, 0); /* FMTPINFO 00b: no PI */
        format(0x80, NULL, 0, 1); /* 10b: type 1 */
        format(0xc0, NULL, 0, 2); /* 11b: type 2 */
        format(0xd0, s, 4, 2);    /* 11b, PFU 000b */
        s[0] = 1;
        format(0xd0, s, 4, 3);  /* PFU 001b: type 3 */
        format(0x90, s, 4, -1); /* FMTPINFO 10b with PFU 001b */
        expect_field(0x26, 0, 2);
        l[0] = 2, l[3] = 0;
        format(0xf0, l, 8, 2); /* PFU 010b: type 2 with the exponent */
        ns.block_size = 4096;
        l[0] = 3, l[3] = 3;
        format(0xf0, l, 8, 0x33); /* PFU 011b: type 3, 8 intervals of 512 */
        l[3] = 4;
        format(0xf0, l, 8, -1); /* intervals under 512 bytes */
        expect_field(0x26, 3, 3);
        ns.block_size = 512;
        l[0] = 0, l[3] = 1;
        format(0xf0, l, 8, -1); /* an exponent with PFU 000b */
        expect_field(0x26, 3, 3);
        l[0] = 4, l[3] = 0;
        format(0xf0, l, 8, -1); /* PFU 100b: reserved */
        expect_field(0x26, 0, 2);
        memset(s, 0, 4);
        s[3] = 8; /* a defect list */
        format(0x90, s, 4, -1);
        expect_field(0x26, 2, 7);
        memset(s, 0, 4);
        s[1] = 0x80 | 0x08; /* FOV, IP: no initialization pattern */
        format(0x90, s, 4, -1);
        expect_field(0x26, 1, 3);
        s[1] = 0x40; /* DPRY without FOV */
        format(0x90, s, 4, -1);
        expect_field(0x26, 1, 6);
        s[1] = 0x02; /* IMMED */
        format(0x90, s, 4, 1);
        format(0x90, s, 3, -1); /* short list */
        expect_sense(SK_ILLEGAL_REQUEST, 0x1a, 0x00);
        /* FMTPINFO 01b is reserved (parse). */
        uint8_t c[6] = {0x04, 0x40, 0, 0, 0, 0};
        assert_int_equal(run(c, 6, 0), SCSI_PARSE_DONE);
        expect_field(0x24, 1, 6);
        c[1] = 0x90;
        assert_int_equal(run(c, 6, 4), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, 4);
}

/* MODE SENSE(10) of page/subpage into buf; returns the page. */
static uint8_t *sense_page(uint8_t page, uint8_t sub, int pc)
{
        uint8_t c[10] = {0x5a, 0x08, (uint8_t)((pc << 6) | page), sub, 0, 0, 0, 0x10, 0, 0};
        run(c, 10, 4096);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        return buf + 8;
}

static void select_page(const uint8_t *page, uint32_t plen)
{
        uint32_t len = 8 + plen;
        uint8_t c[10] = {0x55, 0x10, 0, 0, 0, 0, 0, (uint8_t)(len >> 8), (uint8_t)len, 0};
        uint8_t tmp[1024];
        memcpy(tmp, page, plen);
        assert_int_equal(run(c, 10, len), SCSI_PARSE_EXEC);
        memset(buf, 0, 8);
        memcpy(buf + 8, tmp, plen);
        buf[8] &= 0x7f;
        scsi_mode_select_apply(&cmd);
}

static void test_control_and_apptag_pages(void **state)
{
        uint8_t page[16 + 3 * 24];
        struct core_pi_apptag_range r[4];
        (void)state;
        uint8_t *p = sense_page(0x0a, 0, 0);
        assert_int_equal(p[5], 0x80); /* ATO 1, ATMPE 0 */
        p = sense_page(0x0a, 0, 1);
        assert_int_equal(p[5], 0x20); /* ATMPE changeable, ATO not */
        /* ATMPE on. */
        p = sense_page(0x0a, 0, 0);
        memcpy(page, p, 12);
        page[5] |= 0x20;
        select_page(page, 12);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_true(((struct scsi_lu_state *)ns.scsi_state)->atmpe);
        page[5] = 0x20; /* ATO 0: not changeable */
        select_page(page, 12);
        expect_field(0x26, 8 + 5, 7);
        /* Two ranges. */
        memset(page, 0, sizeof(page));
        page[0] = 0x4a, page[1] = 0x02, page[3] = 12 + 48;
        slate_put_be(page + 16 + 6, 2, 0x1111);
        slate_put_be(page + 16 + 16, 8, 100);
        page[40] = 0x80;
        slate_put_be(page + 40 + 6, 2, 0x2222);
        slate_put_be(page + 40 + 8, 8, 100);
        slate_put_be(page + 40 + 16, 8, 50);
        select_page(page, 64);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(core_ns_apptab(&ns, r, 4), 2);
        assert_int_equal(r[1].lba, 100);
        assert_int_equal(r[1].app, 0x2222);
        p = sense_page(0x0a, 0x02, 0);
        assert_int_equal(slate_be16(p + 2), 12 + 48);
        assert_int_equal(p[16], 0);
        assert_int_equal(p[40], 0x80);
        assert_int_equal(slate_be16(p + 40 + 6), 0x2222);
        /* Reads check application tags against it; WRPROTECT 000b writes store its tag. */
        uint8_t c[16];
        rw16(c, 0x88, 0, 120, 1);
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.pi.chk, G | A | R);
        assert_true(cmd.req.pi.use_apptab);
        rw16(c, 0x8a, 0, 120, 1);
        assert_int_equal(run(c, 16, 512), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.req.pi.gen_app, 0x2222);
        /* Overlapping, past the capacity, a descriptor after LAST, reserved bytes. */
        slate_put_be(page + 40 + 8, 8, 99);
        select_page(page, 64);
        expect_field(0x26, 8 + 16 + 8, 7);
        slate_put_be(page + 40 + 8, 8, NBLOCKS - 10);
        select_page(page, 64);
        expect_field(0x26, 8 + 40 + 8, 7);
        slate_put_be(page + 40 + 8, 8, 100);
        page[16] = 0x80;
        select_page(page, 64);
        expect_field(0x26, 8 + 40, 7);
        page[16] = 0x01;
        select_page(page, 64);
        expect_field(0x26, 8 + 16, 0);
        /* No page on an LU without PI. */
        set_type(0, 0);
        uint8_t ms[10] = {0x5a, 0x08, 0x0a, 0x02, 0, 0, 0, 0x10, 0, 0};
        run(ms, 10, 4096);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
}

static void test_rsoc(void **state)
{
        uint8_t c[12] = {0xa3, 0x0c, 0x01, 0x28, 0, 0, 0, 0, 0x10, 0, 0, 0};
        (void)state;
        run(c, 12, 4096);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[5], 0xf8); /* RDPROTECT, DPO, FUA */
        set_type(0, 0);
        run(c, 12, 4096);
        assert_int_equal(buf[5], 0x18);
        /* READ(32) on type 2 only. */
        uint8_t c32[12] = {0xa3, 0x0c, 0x02, 0x7f, 0x00, 0x09, 0, 0, 0x10, 0, 0, 0};
        run(c32, 12, 4096);
        assert_int_equal(buf[1] & 0x07, 0x01); /* not supported */
        set_type(2, 0);
        run(c32, 12, 4096);
        assert_int_equal(buf[1] & 0x07, 0x03);
        assert_int_equal(slate_be16(buf + 2), 32);
        assert_int_equal(buf[4 + 10], 0xf8);
        assert_int_equal(buf[4 + 20], 0xff);
        /* FORMAT UNIT everywhere. */
        uint8_t fu[12] = {0xa3, 0x0c, 0x01, 0x04, 0, 0, 0, 0, 0x10, 0, 0, 0};
        run(fu, 12, 4096);
        assert_int_equal(buf[1] & 0x07, 0x03);
        assert_int_equal(buf[5], 0xff);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_no_pi_refuses_protect, setup, teardown),
            cmocka_unit_test_setup_teardown(test_type1_read, setup, teardown),
            cmocka_unit_test_setup_teardown(test_type1_write, setup, teardown),
            cmocka_unit_test_setup_teardown(test_type2, setup, teardown),
            cmocka_unit_test_setup_teardown(test_read_capacity_inquiry_vpd, setup, teardown),
            cmocka_unit_test_setup_teardown(test_format_table, setup, teardown),
            cmocka_unit_test_setup_teardown(test_control_and_apptag_pages, setup, teardown),
            cmocka_unit_test_setup_teardown(test_rsoc, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
