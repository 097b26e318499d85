/*
 * The SCSI side of provisioned-capacity limits: LOG SENSE (the supported
 * pages lists and the Logical Block Provisioning page 0Ch with its
 * resource counts in threshold sets), the Logical Block Provisioning mode
 * page 1Ch/02h (every page control; MODE SELECT sets the core's soft
 * threshold and tells the other nexuses), VPD B2h's THRESHOLD EXPONENT,
 * the THIN PROVISIONING SOFT THRESHOLD REACHED unit attention on every
 * nexus, SPACE ALLOCATION FAILED WRITE PROTECT, and the fuzz entry with a
 * MODE SELECT parameter list.  The LU is thin on a stub backend whose
 * allocation the test sets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "slate/byteorder.h"
#include "core/selftest.h"
#include "scsi/internal.h"
#include "rt/reactor.h"

#include <stdatomic.h>
#include <unistd.h>

#define MIB (1u << 20)

static struct core_ns ns;
static struct scsi_target tgt;
static struct scsi_nexus nx, other;
static struct scsi_cmd cmd;
static uint8_t *buf;
static int64_t allocated = 5 * MIB + 1;

static int stub_map(struct backend *be, uint64_t off, uint64_t len, enum core_prov *st,
                    uint64_t *run)
{
        (void)be;
        (void)off;
        *st = CORE_PROV_MAPPED;
        *run = len;
        return 0;
}

static int64_t stub_allocated(struct backend *be)
{
        (void)be;
        return allocated;
}

static const struct backend_ops stub_ops = {
    .name = "stub", .map_status = stub_map, .allocated = stub_allocated};

static int setup(void **state)
{
        (void)state;
        memset(&ns, 0, sizeof(ns));
        strcpy(ns.name, "lbp");
        ns.block_size = 512;
        ns.block_shift = 9;
        ns.num_blocks = 64 * 2048; /* 64 MiB */
        ns.thin = true;
        ns.be.ops = &stub_ops;
        pthread_mutex_init(&ns.lock, NULL);
        atomic_init(&ns.refs, 1);
        atomic_store(&ns.prov.limit, 16 * MIB);
        atomic_store(&ns.prov.threshold, 8 * MIB);
        allocated = 5 * MIB + 1;
        scsi_target_init(&tgt, "iqn.2024-01.org.slate:lbp", 1);
        atomic_store(&tgt.luns[0], &ns);
        scsi_nexus_init(&nx, &tgt, "iqn.init,i,0x1", "iqn.2024-01.org.slate:lbp,t,0x1", NULL, 0);
        scsi_nexus_init(&other, &tgt, "iqn.other,i,0x2", "iqn.2024-01.org.slate:lbp,t,0x1", NULL,
                        0);
        atomic_store(&nx.ua[0], 0);
        atomic_store(&other.ua[0], 0);
        if (!buf)
                buf = calloc(1, 2 * CORE_MAX_TRANSFER_BYTES);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        scsi_nexus_fini(&nx);
        scsi_nexus_fini(&other);
        scsi_target_fini(&tgt);
        free(ns.scsi_state);
        ns.scsi_state = NULL;
        return 0;
}

static enum scsi_parse_result run_on(struct scsi_nexus *n, const uint8_t *cdb, size_t len,
                                     uint32_t edtl)
{
        memset(&cmd, 0, sizeof(cmd));
        memcpy(cmd.cdb, cdb, len);
        cmd.cdb_len = 16;
        cmd.nexus = n;
        cmd.edtl = edtl;
        cmd.buf = buf;
        cmd.buf_len = 2 * CORE_MAX_TRANSFER_BYTES;
        return scsi_cmd_parse(&cmd);
}

static enum scsi_parse_result run(const uint8_t *cdb, size_t len, uint32_t edtl)
{
        return run_on(&nx, cdb, len, edtl);
}

static void expect_sense(uint8_t key, uint8_t asc, uint8_t ascq)
{
        assert_int_equal(cmd.status, SAM_STAT_CHECK_CONDITION);
        assert_int_equal(cmd.sense[0] & 0x7f, 0x70);
        assert_int_equal(cmd.sense[2] & 0x0f, key);
        assert_int_equal(cmd.sense[12], asc);
        assert_int_equal(cmd.sense[13], ascq);
}

static void log_sense(uint8_t page, uint8_t subpage, uint16_t ppc, uint16_t alloc)
{
        uint8_t cdb[10] = {0x4d, 0, (uint8_t)(0x40 | page), subpage, 0};
        slate_put_be(cdb + 5, 2, ppc);
        slate_put_be(cdb + 7, 2, alloc);
        run(cdb, 10, alloc);
}

static void test_log_sense(void **state)
{
        (void)state;
        /* Supported log pages (subpage 00h only): 00h, 0Ch and the health pages (scsi/log.c). */
        log_sense(0x00, 0x00, 0, 512);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[0] & 0x3f, 0x00);
        uint8_t pages[] = {0x00, 0x0c, 0x0d, 0x0e, 0x10, 0x19, 0x2f};
        assert_int_equal(slate_be16(buf + 2), sizeof(pages));
        assert_memory_equal(buf + 4, pages, sizeof(pages));
        /* Pages and subpages, in subpage format and ascending order: 15h/03h and the group
         * statistics 19h/01h..1Fh (streams.c) appear here only. */
        log_sense(0x00, 0xff, 0, 512);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[0] & 0x40, 0x40);
        assert_int_equal(buf[1], 0xff);
        uint8_t want[] = {0x00, 0x00, 0x00, 0xff, 0x0c, 0x00, 0x0d, 0x00,
                          0x0e, 0x00, 0x10, 0x00, 0x15, 0x03, 0x19, 0x00};
        assert_int_equal(slate_be16(buf + 2), sizeof(want) + 2 * 31 + 2);
        assert_memory_equal(buf + 4, want, sizeof(want));
        for (unsigned g = 1; g <= 31; g++) {
                assert_int_equal(buf[4 + sizeof(want) + 2 * (g - 1)], 0x19);
                assert_int_equal(buf[5 + sizeof(want) + 2 * (g - 1)], g);
        }
        assert_int_equal(buf[4 + sizeof(want) + 62], 0x2f);
        assert_int_equal(buf[5 + sizeof(want) + 62], 0x00);
        /* 0Ch/FFh: the subpages of page 0Ch. */
        log_sense(0x0c, 0xff, 0, 512);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be16(buf + 2), 2);
        assert_int_equal(buf[4], 0x0c);
        assert_int_equal(buf[5], 0x00);

        /* LBP page: available (16 MiB - 5 MiB - 1 byte: 10 whole sets), used (6 sets, rounded up).
         */
        log_sense(0x0c, 0x00, 0, 512);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[0] & 0x7f, 0x0c);
        assert_int_equal(slate_be16(buf + 2), 24);
        assert_int_equal(slate_be16(buf + 4), 0x0001);
        assert_int_equal(buf[7], 8);
        assert_int_equal(slate_be32(buf + 8), 10);
        assert_int_equal(buf[12] & 0x03, 0x01); /* SCOPE: dedicated to the LU */
        assert_int_equal(slate_be16(buf + 16), 0x0002);
        assert_int_equal(slate_be32(buf + 20), 6);
        assert_int_equal(buf[24] & 0x03, 0x01);
        /* Beyond the limit: nothing available. */
        allocated = 20 * MIB;
        log_sense(0x0c, 0x00, 0, 512);
        assert_int_equal(slate_be32(buf + 8), 0);
        assert_int_equal(slate_be32(buf + 20), 20);
        /* Without a limit, the capacity bounds what is available. */
        atomic_store(&ns.prov.limit, 0);
        log_sense(0x0c, 0x00, 0, 512);
        assert_int_equal(slate_be32(buf + 8), 64 - 20);
        /* The parameter pointer: from 0002h on; past the last code is refused. */
        log_sense(0x0c, 0x00, 2, 512);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be16(buf + 2), 12);
        assert_int_equal(slate_be16(buf + 4), 0x0002);
        log_sense(0x0c, 0x00, 3, 512);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(slate_be16(cmd.sense + 16), 5);
        /* A short allocation length truncates. */
        log_sense(0x0c, 0x00, 0, 10);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(cmd.data_in_len, 10);

        /* Pages we do not have, SP, reserved bits. */
        log_sense(0x0f, 0x00, 0, 512);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(slate_be16(cmd.sense + 16), 2);
        log_sense(0x0c, 0x01, 0, 512);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(slate_be16(cmd.sense + 16), 3);
        uint8_t sp[10] = {0x4d, 0x01, 0x4c, 0, 0, 0, 0, 0x02, 0, 0};
        run(sp, 10, 512);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        sp[1] = 0x04;
        run(sp, 10, 512);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);

        /* A fully provisioned LU has no page 0Ch. */
        ns.thin = false;
        log_sense(0x00, 0x00, 0, 512);
        assert_int_equal(slate_be16(buf + 2), sizeof(pages) - 1);
        assert_int_equal(buf[5], 0x0d);
        log_sense(0x0c, 0x00, 0, 512);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        ns.thin = true;
}

static void test_vpd_threshold_exponent(void **state)
{
        (void)state;
        uint8_t inq[6] = {0x12, 0x01, 0xb2, 0x00, 0xff, 0};
        run(inq, 6, 255);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[4], 11); /* 2^11 blocks of 512 bytes = 1 MiB threshold sets */
        ns.block_size = 4096;
        ns.block_shift = 12;
        run(inq, 6, 255);
        assert_int_equal(buf[4], 8);
        ns.block_size = 512;
        ns.block_shift = 9;
}

/* MODE SENSE(10) of 1Ch/02h with page control pc; the page starts at buf + 8 (DBD). */
static void sense_lbp(int pc)
{
        uint8_t cdb[10] = {0x5a, 0x08, (uint8_t)((pc << 6) | 0x1c), 0x02, 0, 0, 0, 0x01, 0x00, 0};
        run(cdb, 10, 256);
}

static void test_mode_page(void **state)
{
        (void)state;
        const uint8_t *p = buf + 8;
        sense_lbp(0); /* current */
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be16(buf), 8 + 24 - 2);
        assert_int_equal(p[0], 0x40 | 0x1c);
        assert_int_equal(p[1], 0x02);
        assert_int_equal(slate_be16(p + 2), 20);
        assert_int_equal(p[4] & 0x01, 0); /* SITUA 0 */
        assert_int_equal(p[16], 0x80);    /* ENABLED, soft, armed increasing */
        assert_int_equal(p[17], 0x02);    /* used LBA mapping resource */
        assert_int_equal(slate_be32(p + 20), 8);
        sense_lbp(3); /* saved: the core keeps it persisted */
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be32(p + 20), 8);
        sense_lbp(1); /* changeable: ENABLED and the count */
        assert_int_equal(p[4], 0);
        assert_int_equal(p[16], 0x80);
        assert_int_equal(p[17], 0);
        assert_int_equal(slate_be32(p + 20), 0xffffffffu);
        sense_lbp(2); /* default: no threshold */
        assert_int_equal(p[16], 0);
        assert_int_equal(slate_be32(p + 20), 0);
        /* Saved values of the other pages still are not supported. */
        uint8_t cdb[10] = {0x5a, 0x08, 0xc8, 0x00, 0, 0, 0, 0x01, 0x00, 0};
        run(cdb, 10, 256);
        expect_sense(SK_ILLEGAL_REQUEST, 0x39, 0x00);
        /* All pages and subpages: the six of them (the IO advice hints grouping page 0Ah/05h
         * needs MODE SENSE(10)); all pages, subpage 00h: four. */
        uint8_t all10[10] = {0x5a, 0x08, 0x3f, 0xff, 0, 0, 0, 0x10, 0x00, 0};
        run(all10, 10, 4096);
        assert_int_equal(cmd.data_in_len, 8 + 12 + 20 + 12 + SCSI_GROUPING_LEN + 12 + 24);
        uint8_t all[6] = {0x1a, 0x08, 0x3f, 0xff, 0xff, 0};
        run(all, 6, 255);
        assert_int_equal(cmd.data_in_len, 255); /* MODE DATA LENGTH is one byte: capped */
        assert_int_equal(buf[0], 0xff);
        all[3] = 0;
        run(all, 6, 255);
        assert_int_equal(cmd.data_in_len, 4 + 12 + 20 + 12 + 12);
        all[2] = 0x08;
        all[3] = 0x02;
        run(all, 6, 255);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        /* A backend that cannot report its allocation has no such page. */
        ns.be.ops = NULL;
        sense_lbp(0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        ns.be.ops = &stub_ops;
}

/* MODE SELECT(10) of the LBP page with this descriptor; returns after the apply. */
static void select_lbp(uint8_t situa, uint8_t d0, uint8_t resource, uint32_t count)
{
        uint8_t cdb[10] = {0x55, 0x10, 0, 0, 0, 0, 0, 0, 32, 0};
        assert_int_equal(run(cdb, 10, 32), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, 32);
        memset(buf, 0, 32);
        uint8_t *p = buf + 8;
        p[0] = 0x5c;
        p[1] = 0x02;
        slate_put_be(p + 2, 2, 20);
        p[4] = situa;
        p[16] = d0;
        p[17] = resource;
        slate_put_be(p + 20, 4, count);
        scsi_mode_select_apply(&cmd);
}

static void test_mode_select(void **state)
{
        (void)state;
        /* Sets the core's threshold; the other nexus hears MODE PARAMETERS CHANGED, we do not. */
        select_lbp(0, 0x80, 0x02, 12);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(atomic_load(&ns.prov.threshold), 12 * MIB);
        assert_int_equal(atomic_load(&nx.ua[0]), 0);
        assert_int_equal(atomic_load(&other.ua[0]), 1u << SCSI_UA_MODE_CHANGED);
        sense_lbp(0);
        assert_int_equal(slate_be32(buf + 8 + 20), 12);
        /* Not changeable: SITUA, the type/arming, the resource. */
        select_lbp(1, 0x80, 0x02, 4);
        expect_sense(SK_ILLEGAL_REQUEST, 0x26, 0x00);
        assert_int_equal(slate_be16(cmd.sense + 16), 8 + 4);
        select_lbp(0, 0x81, 0x02, 4);
        expect_sense(SK_ILLEGAL_REQUEST, 0x26, 0x00);
        select_lbp(0, 0x80, 0x01, 4);
        expect_sense(SK_ILLEGAL_REQUEST, 0x26, 0x00);
        /* Enabled with a count of 0, or above the hard limit (16 MiB). */
        select_lbp(0, 0x80, 0x02, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x26, 0x00);
        select_lbp(0, 0x80, 0x02, 17);
        expect_sense(SK_ILLEGAL_REQUEST, 0x26, 0x00);
        assert_int_equal(cmd.sense[15] & 0x80, 0x80);
        assert_int_equal(slate_be16(cmd.sense + 16), 8 + 20);
        assert_int_equal(atomic_load(&ns.prov.threshold), 12 * MIB);
        /* A wrong page length. */
        uint8_t cdb[10] = {0x55, 0x10, 0, 0, 0, 0, 0, 0, 32, 0};
        run(cdb, 10, 32);
        memset(buf, 0, 32);
        buf[8] = 0x5c;
        buf[9] = 0x02;
        slate_put_be(buf + 10, 2, 16);
        scsi_mode_select_apply(&cmd);
        assert_int_equal(cmd.status, SAM_STAT_CHECK_CONDITION);
        /* Disabling removes the threshold. */
        select_lbp(0, 0x00, 0x02, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(atomic_load(&ns.prov.threshold), 0);
}

static void test_threshold_ua_and_space_sense(void **state)
{
        (void)state;
        uint8_t tur[6] = {0};
        atomic_store(&nx.ua[0], 0);
        struct core_ns_event ev = {.type = CORE_NS_EV_SPACE_THRESHOLD, .ns = &ns};
        core_ns_publish(&ev);
        /* Every nexus, as no host caused it. */
        run(tur, 6, 0);
        expect_sense(SK_UNIT_ATTENTION, 0x38, 0x07);
        run(tur, 6, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        run_on(&other, tur, 6, 0);
        expect_sense(SK_UNIT_ATTENTION, 0x38, 0x07);
        /* A write that needs space beyond the limit. */
        memset(&cmd, 0, sizeof(cmd));
        cmd.ns = &ns;
        scsi_status_from_core(&cmd, CORE_E_SPACE_ALLOC_FAILED, 0, false);
        expect_sense(SK_DATA_PROTECT, 0x27, 0x07);
}

static void test_fuzz_mode_select(void **state)
{
        (void)state;
        uint8_t in[10 + 40];
        uint8_t cdb[10] = {0x55, 0x10, 0, 0, 0, 0, 0, 0, 32, 0};
        memcpy(in, cdb, 10);
        memset(in + 10, 0, 40);
        in[18] = 0x5c;
        in[19] = 0x02;
        in[21] = 20;
        in[34] = 0x80;
        in[35] = 0x02;
        in[41] = 3;
        assert_int_equal(scsi_fuzz_one(in, 10 + 32), 0);
        for (unsigned i = 0; i < 20000; i++) {
                for (unsigned j = 10; j < sizeof(in); j++)
                        in[j] = (uint8_t)rand();
                if (i & 1) {
                        in[18] = 0x5c;
                        in[19] = 0x02;
                }
                in[8] = (uint8_t)(i % 48);
                assert_int_equal(scsi_fuzz_one(in, 10 + i % 41), 0);
        }
}

/* The health pages (scsi/log.c): each parameter as SPC-5/SBC-4 lay it out, from the core's state.
 */
static void test_health_pages(void **state)
{
        (void)state;
        ns.phys_exp = 3;
        /* 0Dh Temperature: 0000h and 0001h, 2-byte parameters, FFh = not available. */
        log_sense(0x0d, 0x00, 0, 512);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[0], 0x80 | 0x0d); /* DS, SPF=0 */
        assert_int_equal(slate_be16(buf + 2), 12);
        uint8_t temp[12] = {0, 0, 3, 2, 0, 0xff, 0, 1, 3, 2, 0, 0xff};
        assert_memory_equal(buf + 4, temp, 12);
        log_sense(0x0d, 0x00, 2, 512);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);

        /* 0Eh Start-Stop Cycle Counter: the core's count in parameter 0004h. */
        atomic_store(&ns.start_stop_cycles, 3);
        log_sense(0x0e, 0x00, 0, 512);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be16(buf + 2), 10 + 10 + 8 + 8);
        assert_int_equal(slate_be16(buf + 4), 0x0001);
        assert_int_equal(buf[6], 0x01); /* ASCII format list */
        assert_int_equal(buf[7], 6);
        assert_memory_equal(buf + 8, "      ", 6);
        assert_int_equal(slate_be16(buf + 32), 0x0004);
        assert_int_equal(slate_be32(buf + 36), 3);
        log_sense(0x0e, 0x00, 4, 512); /* from 0004h */
        assert_int_equal(slate_be16(buf + 2), 8);
        assert_int_equal(slate_be32(buf + 8), 3);
        atomic_store(&ns.start_stop_cycles, 0);

        /* 15h/03h LPS Misalignment: MAX_LPSM, count, then the LBAs. */
        log_sense(0x15, 0x03, 0, 512);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[0], 0x80 | 0x40 | 0x15);
        assert_int_equal(buf[1], 0x03);
        assert_int_equal(slate_be16(buf + 2), 8);
        assert_int_equal(slate_be16(buf + 8), CORE_LPSM_MAX);
        assert_int_equal(slate_be16(buf + 10), 0);
        atomic_store(&ns.lpsm_lba[0], 1001 + 1);
        atomic_store(&ns.lpsm_lba[1], 8000 + 1);
        atomic_store(&ns.lpsm_n, 2);
        log_sense(0x15, 0x03, 0, 512);
        assert_int_equal(slate_be16(buf + 2), 8 + 2 * 12);
        assert_int_equal(slate_be16(buf + 10), 2);
        assert_int_equal(slate_be16(buf + 12), 0x0001);
        assert_int_equal(buf[15], 8);
        assert_int_equal(slate_be64(buf + 16), 1001);
        assert_int_equal(slate_be16(buf + 24), 0x0002);
        assert_int_equal(slate_be64(buf + 28), 8000);
        log_sense(0x15, 0x03, 2, 512); /* from the second LBA */
        assert_int_equal(slate_be16(buf + 2), 12);
        assert_int_equal(slate_be64(buf + 8), 8000);
        log_sense(0x15, 0x00, 0, 512); /* 15h/00h is not there */
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        atomic_store(&ns.lpsm_n, 0);
        atomic_store(&ns.lpsm_lba[0], 0);
        atomic_store(&ns.lpsm_lba[1], 0);

        /* 19h/00h: 0001h (64 bytes), 0002h (8), 0003h (8: 10^-6 s). */
        log_sense(0x19, 0x00, 0, 512);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be16(buf + 2), 0x44 + 12 + 12);
        assert_int_equal(slate_be16(buf + 4), 0x0001);
        assert_int_equal(buf[7], 0x40);
        assert_int_equal(slate_be16(buf + 72), 0x0002);
        assert_int_equal(slate_be16(buf + 84), 0x0003);
        assert_int_equal(slate_be32(buf + 88), 6);
        assert_int_equal(slate_be32(buf + 92), 1);
        log_sense(0x19, 0x00, 4, 512);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);

        /* 2Fh: no exception, then a failed self-test (0Bh/03h); temperature FFh. */
        log_sense(0x2f, 0x00, 0, 512);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be16(buf + 2), 7);
        assert_int_equal(buf[8], 0);
        assert_int_equal(buf[9], 0);
        assert_int_equal(buf[10], 0xff);
        core_ns_note_exception(&ns, CORE_EXC_SELFTEST_FAILED);
        log_sense(0x2f, 0x00, 0, 512);
        assert_int_equal(buf[8], 0x0b);
        assert_int_equal(buf[9], 0x03);
        core_ns_note_exception(&ns, CORE_EXC_NONE);

        /* 10h: twenty 20-byte parameters, newest first, unused ones zero. */
        core_selftest_log_init(&ns.selftest_log);
        struct core_selftest_entry ok = {.kind = CORE_ST_SHORT, .background = true, .poh = 2};
        struct core_selftest_entry bad = {.kind = CORE_ST_EXTENDED,
                                          .background = false,
                                          .poh = 3,
                                          .o = {.result = CORE_STR_FAILED,
                                                .fail_lba = 4242,
                                                .status = CORE_E_MEDIUM_ERROR,
                                                .segment = 1}};
        core_selftest_log_add(&ns.selftest_log, &ok);
        core_selftest_log_add(&ns.selftest_log, &bad);
        log_sense(0x10, 0x00, 0, 512);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(slate_be16(buf + 2), 400);
        const uint8_t *p = buf + 4; /* 0001h: the failed foreground extended one */
        assert_int_equal(slate_be16(p), 1);
        assert_int_equal(p[3], 0x10);
        assert_int_equal(p[4], 0x6 << 5 | 0x5); /* foreground extended, first segment failed */
        assert_int_equal(p[5], 1);
        assert_int_equal(slate_be16(p + 6), 3);
        assert_int_equal(slate_be64(p + 8), 4242);
        assert_int_equal(p[16], SK_MEDIUM_ERROR);
        assert_int_equal(p[17], 0x11);
        p += 20; /* 0002h: background short, passed, no address */
        assert_int_equal(p[4], 0x1 << 5 | 0x0);
        assert_int_equal(slate_be64(p + 8), UINT64_MAX);
        p += 20; /* 0003h: unused */
        assert_int_equal(slate_be16(p), 3);
        assert_int_equal(p[4], 0);
        log_sense(0x10, 0x00, 20, 512);
        assert_int_equal(slate_be16(buf + 2), 20);
        log_sense(0x10, 0x00, 21, 512);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        core_selftest_log_fini(&ns.selftest_log);
        memset(&ns.selftest_log, 0, sizeof(ns.selftest_log));
        ns.phys_exp = 0;
}

/* SEND DIAGNOSTIC / RECEIVE DIAGNOSTIC RESULTS: the CDB checks (scsi/diag.c). */
static void test_diag_cdb(void **state)
{
        (void)state;
        uint8_t sd[6] = {0x1d, 0x04, 0, 0, 0, 0};
        assert_int_equal(run(sd, 6, 0), SCSI_PARSE_EXEC); /* default self-test */
        sd[1] = 0x24;                                     /* SELFTEST with a code */
        assert_int_equal(run(sd, 6, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        sd[1] = 0x60; /* reserved code 011b */
        assert_int_equal(run(sd, 6, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        sd[1] = 0x40; /* background extended with a parameter list */
        sd[4] = 4;
        assert_int_equal(run(sd, 6, 4), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(slate_be16(cmd.sense + 16), 3);
        sd[4] = 0;
        assert_int_equal(run(sd, 6, 0), SCSI_PARSE_EXEC);
        sd[1] = 0x08; /* reserved bit */
        assert_int_equal(run(sd, 6, 0), SCSI_PARSE_DONE);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        sd[1] = 0x00; /* a parameter list without PF */
        sd[4] = 4;
        assert_int_equal(run(sd, 6, 4), SCSI_PARSE_DONE);
        sd[1] = 0x10; /* PF: the pages, checked once they arrive */
        assert_int_equal(run(sd, 6, 4), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, 4);
        memset(buf, 0, 8);
        scsi_diag_pages(&cmd);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        buf[0] = 0x80; /* a page we do not have */
        scsi_diag_pages(&cmd);
        expect_sense(SK_ILLEGAL_REQUEST, 0x26, 0x00);
        buf[0] = 0;
        buf[3] = 9; /* longer than the list */
        scsi_diag_pages(&cmd);
        expect_sense(SK_ILLEGAL_REQUEST, 0x26, 0x00);
        uint8_t rd[6] = {0x1c, 0x01, 0x00, 0, 0x40, 0};
        assert_int_equal(run(rd, 6, 0x40), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(cmd.data_in_len, 5);
        assert_int_equal(buf[0], 0x00);
        assert_int_equal(slate_be16(buf + 2), 1);
        rd[2] = 0x80;
        run(rd, 6, 0x40);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
}

/*
 * GET LBA STATUS on storage whose map_status waits on a remote store (rbd):
 * parse hands it to exec, which walks the map on a core worker (not a
 * reactor thread) and completes on the command's reactor, with the same
 * descriptors an inline walk gives.
 */
static atomic_int remote_calls, remote_on_reactor;
static int remote_map(struct backend *be, uint64_t off, uint64_t len, enum core_prov *st,
                      uint64_t *run)
{
        (void)be;
        atomic_fetch_add(&remote_calls, 1);
        if (rt_current())
                atomic_fetch_add(&remote_on_reactor, 1);
        /* The first MiB holds data, the rest is a hole. */
        *st = off < MIB ? CORE_PROV_MAPPED : CORE_PROV_DEALLOCATED;
        *run = off < MIB ? MIB - off : len;
        if (*run > len)
                *run = len;
        return 0;
}
static const struct backend_ops remote_ops = {.name = "remote",
                                              .map_status = remote_map,
                                              .map_status_remote = true,
                                              .allocated = stub_allocated};
static const struct backend_ops local_ops = {
    .name = "local", .map_status = remote_map, .allocated = stub_allocated};

static atomic_int lbas_done, lbas_done_elsewhere;
static struct rt_reactor *lbas_reactor;
static void lbas_cmd_done(struct scsi_cmd *c)
{
        (void)c;
        if (rt_current() != lbas_reactor)
                atomic_fetch_add(&lbas_done_elsewhere, 1);
        atomic_store(&lbas_done, 1);
}
static void lbas_exec(void *arg)
{
        scsi_cmd_exec(arg);
        if (atomic_load(&lbas_done)) /* never from inside exec */
                atomic_fetch_add(&lbas_done_elsewhere, 100);
}

static void test_get_lba_status_remote_off_reactor(void **state)
{
        (void)state;
        uint8_t cdb[16] = {0x9e, 0x12};
        slate_put_be(cdb + 10, 4, 8 + 4 * 16);
        uint8_t want[8 + 4 * 16];

        /* Inline on local storage: two descriptors, mapped then deallocated. */
        ns.be.ops = &local_ops;
        atomic_store(&remote_calls, 0);
        assert_int_equal(run(cdb, 16, sizeof(want)), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_true(atomic_load(&remote_calls) > 0);
        assert_int_equal(slate_be32(buf), 4 + 2 * 16);
        memcpy(want, buf, sizeof(want));

        /* Remote: parse leaves the walk to exec. */
        ns.be.ops = &remote_ops;
        atomic_store(&remote_calls, 0);
        assert_int_equal(rt_init(1), 0);
        assert_int_equal(rt_start(), 0);
        lbas_reactor = rt_get(0);
        assert_int_equal(run(cdb, 16, sizeof(want)), SCSI_PARSE_EXEC);
        assert_int_equal(atomic_load(&remote_calls), 0);
        memset(buf, 0xee, sizeof(want));
        cmd.reactor = lbas_reactor;
        cmd.done = lbas_cmd_done;
        atomic_store(&lbas_done, 0);
        assert_int_equal(rt_msg_call(lbas_reactor, lbas_exec, &cmd), 0);
        for (int i = 0; i < 5000 && !atomic_load(&lbas_done); i++)
                usleep(1000);
        rt_stop();
        rt_join();
        rt_fini();
        assert_true(atomic_load(&lbas_done));
        assert_int_equal(atomic_load(&lbas_done_elsewhere), 0);
        assert_true(atomic_load(&remote_calls) > 0);
        assert_int_equal(atomic_load(&remote_on_reactor), 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_memory_equal(buf, want, sizeof(want));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_log_sense, setup, teardown),
            cmocka_unit_test_setup_teardown(test_health_pages, setup, teardown),
            cmocka_unit_test_setup_teardown(test_diag_cdb, setup, teardown),
            cmocka_unit_test_setup_teardown(test_get_lba_status_remote_off_reactor, setup,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_vpd_threshold_exponent, setup, teardown),
            cmocka_unit_test_setup_teardown(test_mode_page, setup, teardown),
            cmocka_unit_test_setup_teardown(test_mode_select, setup, teardown),
            cmocka_unit_test_setup_teardown(test_threshold_ua_and_space_sense, setup, teardown),
            cmocka_unit_test_setup_teardown(test_fuzz_mode_select, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
