/*
 * Unit tests for LUN masking on an I_T nexus (iSCSI initiator ACLs): a
 * nexus sees every LUN until narrowed; a masked LUN is absent from REPORT
 * LUNS, INQUIRY answers peripheral qualifier 3 and other commands LOGICAL
 * UNIT NOT SUPPORTED (25h/00h); a notified change establishes REPORTED LUNS
 * DATA HAS CHANGED (3Fh/0Eh) on the LUNs the nexus sees afterwards only;
 * scsi_target_set_luns reaches the nexuses of the named initiator only.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scsi/internal.h"

static struct core_ns ns[3];
static struct scsi_target tgt;
static struct scsi_nexus nx, nx2;
static struct scsi_cmd cmd;
static uint8_t *buf;

static const uint8_t TUR[6] = {0x00, 0, 0, 0, 0, 0};
static const uint8_t INQUIRY[6] = {0x12, 0, 0, 0, 96, 0};
static const uint8_t REPORT_LUNS[12] = {0xa0, 0, 0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0};

static int setup(void **state)
{
        (void)state;
        scsi_target_init(&tgt, "iqn.2024-01.org.slate:mask", 1);
        for (unsigned i = 0; i < 3; i++) {
                memset(&ns[i], 0, sizeof(ns[i]));
                strcpy(ns[i].name, "m0");
                ns[i].name[1] = (char)('0' + i);
                ns[i].block_size = 512;
                ns[i].block_shift = 9;
                ns[i].num_blocks = 2048;
                pthread_mutex_init(&ns[i].lock, NULL);
                atomic_init(&ns[i].refs, 1);
                atomic_store(&ns[i].ready, CORE_NS_READY);
                atomic_store(&tgt.luns[i], &ns[i]);
        }
        scsi_nexus_init(&nx, &tgt, "iqn.host1,i,0x1", "iqn.2024-01.org.slate:mask,t,0x1", NULL, 0);
        scsi_nexus_init(&nx2, &tgt, "iqn.host2,i,0x1", "iqn.2024-01.org.slate:mask,t,0x1", NULL, 0);
        for (unsigned l = 0; l < SCSI_MAX_LUNS; l++) {
                atomic_store(&nx.ua[l], 0);
                atomic_store(&nx2.ua[l], 0);
        }
        if (!buf)
                buf = calloc(1, 2 * CORE_MAX_TRANSFER_BYTES);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        scsi_nexus_fini(&nx);
        scsi_nexus_fini(&nx2);
        scsi_target_fini(&tgt);
        for (unsigned i = 0; i < 3; i++) {
                free(ns[i].scsi_state);
                ns[i].scsi_state = NULL;
        }
        return 0;
}

static void run(struct scsi_nexus *n, uint64_t lun, const uint8_t *cdb, size_t len, uint32_t edtl)
{
        memset(&cmd, 0, sizeof(cmd));
        memcpy(cmd.cdb, cdb, len);
        cmd.cdb_len = (uint16_t)len;
        cmd.lun = lun;
        cmd.nexus = n;
        cmd.edtl = edtl;
        cmd.buf = buf;
        cmd.buf_len = 2 * CORE_MAX_TRANSFER_BYTES;
        scsi_cmd_parse(&cmd);
}

static void expect_sense(uint8_t key, uint8_t asc, uint8_t ascq)
{
        assert_int_equal(cmd.status, SAM_STAT_CHECK_CONDITION);
        assert_int_equal(cmd.sense[2] & 0x0f, key);
        assert_int_equal(cmd.sense[12], asc);
        assert_int_equal(cmd.sense[13], ascq);
}

/* The LUNs REPORT LUNS lists for n, as a bitmap of LUNs 0..63. */
static uint64_t reported(struct scsi_nexus *n)
{
        run(n, 0, REPORT_LUNS, 12, 16 + 8 * 8);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        uint32_t len = (uint32_t)buf[0] << 24 | buf[1] << 16 | buf[2] << 8 | buf[3];
        uint64_t m = 0;
        for (uint32_t i = 0; i < len / 8; i++)
                m |= 1ull << buf[8 + 8 * i + 1];
        return m;
}

static void test_default_sees_all(void **state)
{
        (void)state;
        assert_true(scsi_nexus_sees(&nx, 0) && scsi_nexus_sees(&nx, 255));
        assert_false(scsi_nexus_sees(&nx, 256));
        assert_int_equal(reported(&nx), 0x7);
        run(&nx, 1, TUR, 6, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
}

static void test_masked_lun_absent(void **state)
{
        (void)state;
        uint64_t mask[SCSI_LUN_WORDS] = {0x5}; /* LUNs 0 and 2 */
        scsi_nexus_set_luns(&nx, mask, false);
        assert_int_equal(reported(&nx), 0x5);
        assert_int_equal(reported(&nx2), 0x7); /* another nexus keeps its view */
        run(&nx, 1, TUR, 6, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x25, 0x00);
        run(&nx, 1, INQUIRY, 6, 96);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(buf[0], 0x7f); /* PQ 3, device type 1Fh */
        run(&nx, 2, INQUIRY, 6, 96);
        assert_int_equal(buf[0], 0x00);
        run(&nx, 2, TUR, 6, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        run(&nx2, 1, TUR, 6, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        /* No unit attention without notify (a session's first set). */
        assert_int_equal(atomic_load(&nx.ua[0]), 0);
}

static void test_change_notifies(void **state)
{
        (void)state;
        uint64_t a[SCSI_LUN_WORDS] = {0x3}, b[SCSI_LUN_WORDS] = {0x6};
        scsi_nexus_set_luns(&nx, a, false);
        scsi_nexus_set_luns(&nx, a, true); /* unchanged: nothing */
        assert_int_equal(atomic_load(&nx.ua[0]) | atomic_load(&nx.ua[1]), 0);
        scsi_nexus_set_luns(&nx, b, true);
        /* 3Fh/0Eh on the LUNs it sees now (1, 2), not on the one it lost (0). */
        assert_int_equal(atomic_load(&nx.ua[0]), 0);
        run(&nx, 2, TUR, 6, 0);
        expect_sense(SK_UNIT_ATTENTION, 0x3f, 0x0e);
        run(&nx, 2, TUR, 6, 0);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        run(&nx, 1, TUR, 6, 0);
        expect_sense(SK_UNIT_ATTENTION, 0x3f, 0x0e);
        run(&nx, 0, TUR, 6, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x25, 0x00);
        assert_int_equal(atomic_load(&nx2.ua[1]), 0);
}

static void test_target_set_by_initiator(void **state)
{
        (void)state;
        uint64_t m[SCSI_LUN_WORDS] = {0x2};
        scsi_target_set_luns(&tgt, "iqn.host2", m);
        assert_int_equal(reported(&nx2), 0x2);
        assert_int_equal(reported(&nx), 0x7);
        run(&nx2, 1, TUR, 6, 0);
        expect_sense(SK_UNIT_ATTENTION, 0x3f, 0x0e);
        scsi_target_set_luns(&tgt, "iqn.host2", NULL); /* every LUN again */
        assert_int_equal(reported(&nx2), 0x7);
        /* A name that only shares a prefix matches nothing. */
        scsi_target_set_luns(&tgt, "iqn.host", m);
        assert_int_equal(reported(&nx), 0x7);
        assert_int_equal(reported(&nx2), 0x7);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_default_sees_all, setup, teardown),
            cmocka_unit_test_setup_teardown(test_masked_lun_absent, setup, teardown),
            cmocka_unit_test_setup_teardown(test_change_notifies, setup, teardown),
            cmocka_unit_test_setup_teardown(test_target_set_by_initiator, setup, teardown),
        };
        int rc = cmocka_run_group_tests(tests, NULL, NULL);
        free(buf);
        return rc;
}
