/*
 * Unit tests for removable-medium logical units (SBC-4 4.10, 5.15, 5.25;
 * SPC-5 6.7 RMB): INQUIRY RMB, START STOP UNIT eject/load, MEDIUM NOT
 * PRESENT for medium access, TEST UNIT READY, READ CAPACITY and REQUEST
 * SENSE without the medium, PREVENT ALLOW MEDIUM REMOVAL per I_T nexus
 * (seen by every nexus, cleared by I_T nexus loss, LUN reset, target warm
 * and cold reset and LUN unmap), the medium-changed unit attention, and
 * that a fixed LU (the default) still rejects LOEJ.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "scsi/internal.h"

static struct core_ns ns;
static struct scsi_target tgt;
static struct scsi_nexus nx, nx2;
static struct scsi_cmd cmd;
static uint8_t *buf;

static const uint8_t TUR[6] = {0x00, 0, 0, 0, 0, 0};
static const uint8_t EJECT[6] = {0x1b, 0, 0, 0, 0x02, 0};
static const uint8_t LOAD[6] = {0x1b, 0, 0, 0, 0x03, 0};
static const uint8_t STOP[6] = {0x1b, 0, 0, 0, 0x00, 0};
static const uint8_t START[6] = {0x1b, 0, 0, 0, 0x01, 0};
static const uint8_t PREVENT[6] = {0x1e, 0, 0, 0, 0x01, 0};
static const uint8_t ALLOW[6] = {0x1e, 0, 0, 0, 0x00, 0};
static const uint8_t INQUIRY[6] = {0x12, 0, 0, 0, 96, 0};
static const uint8_t REQUEST_SENSE[6] = {0x03, 0, 0, 0, 252, 0};
static const uint8_t MODE_SENSE6[6] = {0x1a, 0, 0x3f, 0, 255, 0};
static const uint8_t READ10[10] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
static const uint8_t READ_CAPACITY10[10] = {0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0};
static const uint8_t READ_CAPACITY16[16] = {0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 32, 0, 0};
static const uint8_t SYNC_CACHE10[10] = {0x35, 0, 0, 0, 0, 0, 0, 0, 0, 0};

static void ns_init(bool removable)
{
        memset(&ns, 0, sizeof(ns));
        strcpy(ns.name, "rm0");
        ns.block_size = 512;
        ns.block_shift = 9;
        ns.num_blocks = 2048;
        ns.removable = removable;
        pthread_mutex_init(&ns.lock, NULL);
        atomic_init(&ns.refs, 1);
        scsi_target_init(&tgt, "iqn.2024-01.org.slate:rm", 1);
        atomic_store(&tgt.luns[0], &ns);
        scsi_nexus_init(&nx, &tgt, "iqn.init1,i,0x1", "iqn.2024-01.org.slate:rm,t,0x1", NULL, 0);
        scsi_nexus_init(&nx2, &tgt, "iqn.init2,i,0x1", "iqn.2024-01.org.slate:rm,t,0x1", NULL, 0);
        for (unsigned l = 0; l < SCSI_MAX_LUNS; l++) {
                atomic_store(&nx.ua[l], 0);
                atomic_store(&nx2.ua[l], 0);
        }
        if (!buf)
                buf = calloc(1, 2 * CORE_MAX_TRANSFER_BYTES);
}

static int setup_removable(void **state)
{
        (void)state;
        ns_init(true);
        return 0;
}

static int setup_fixed(void **state)
{
        (void)state;
        ns_init(false);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        scsi_nexus_fini(&nx);
        scsi_nexus_fini(&nx2);
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
        cmd.cdb_len = (uint16_t)len;
        cmd.lun = 0;
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

static void expect_good(void)
{
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
}

#define expect_no_medium() expect_sense(SK_NOT_READY, 0x3a, 0x02)
#define expect_prevented() expect_sense(SK_ILLEGAL_REQUEST, 0x53, 0x02)

static void test_fixed_lu_unchanged(void **state)
{
        (void)state;
        run(INQUIRY, 6, 96);
        expect_good();
        assert_int_equal(buf[1] & 0x80, 0); /* RMB=0 */
        run(EJECT, 6, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        run(LOAD, 6, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        /* PREVENT is accepted (and tracked) on a fixed disk too; STOP/START as before. */
        run(PREVENT, 6, 0);
        expect_good();
        run(STOP, 6, 0);
        expect_good();
        run(TUR, 6, 0);
        expect_sense(SK_NOT_READY, 0x04, 0x02);
        run(START, 6, 0);
        expect_good();
        run(TUR, 6, 0);
        expect_good();
        run(ALLOW, 6, 0);
        expect_good();
}

static void test_inquiry_rmb(void **state)
{
        (void)state;
        run(INQUIRY, 6, 96);
        expect_good();
        assert_int_equal(buf[1] & 0x80, 0x80);
        assert_int_equal(buf[0], 0x00); /* still a direct-access block device */
}

static void test_eject_load(void **state)
{
        (void)state;
        run(TUR, 6, 0);
        expect_good();
        run(EJECT, 6, 0);
        expect_good();
        run(TUR, 6, 0);
        expect_no_medium();
        run(READ10, 10, 512);
        expect_no_medium();
        run(SYNC_CACHE10, 10, 0);
        expect_no_medium();
        run(READ_CAPACITY10, 10, 8);
        expect_no_medium();
        run(READ_CAPACITY16, 16, 32);
        expect_no_medium();
        /* REQUEST SENSE reports it as parameter data (GOOD status). */
        run(REQUEST_SENSE, 6, 252);
        expect_good();
        assert_int_equal(buf[2] & 0x0f, SK_NOT_READY);
        assert_int_equal(buf[12], 0x3a);
        assert_int_equal(buf[13], 0x02);
        /* What needs no medium still works. */
        run(INQUIRY, 6, 96);
        expect_good();
        run(MODE_SENSE6, 6, 255);
        expect_good();
        /* Ejecting an empty drive is fine; START without a medium is not. */
        run(EJECT, 6, 0);
        expect_good();
        run(START, 6, 0);
        expect_no_medium();
        run(LOAD, 6, 0);
        expect_good();
        run(TUR, 6, 0);
        expect_good();
        run(READ_CAPACITY10, 10, 8);
        expect_good();
        assert_int_equal(cmd.data_in_len, 8);
        /* The loading nexus gets no unit attention; the other one does. */
        run(TUR, 6, 0);
        expect_good();
        run_on(&nx2, TUR, 6, 0);
        expect_sense(SK_UNIT_ATTENTION, 0x28, 0x00);
        run_on(&nx2, TUR, 6, 0);
        expect_good();
        /* LOEJ=0 STOP/START keep the medium. */
        run(STOP, 6, 0);
        expect_good();
        run(TUR, 6, 0);
        expect_sense(SK_NOT_READY, 0x04, 0x02);
        run(START, 6, 0);
        expect_good();
        run(TUR, 6, 0);
        expect_good();
}

static void test_prevent_blocks_eject_and_load(void **state)
{
        (void)state;
        run(PREVENT, 6, 0);
        expect_good();
        run(EJECT, 6, 0);
        expect_prevented();
        run(TUR, 6, 0);
        expect_good();
        run(ALLOW, 6, 0);
        expect_good();
        run(EJECT, 6, 0);
        expect_good();
        /* PREVENT needs no medium; while set, loading is refused too. */
        run(PREVENT, 6, 0);
        expect_good();
        run(LOAD, 6, 0);
        expect_prevented();
        run(TUR, 6, 0);
        expect_no_medium();
        run(ALLOW, 6, 0);
        expect_good();
        run(LOAD, 6, 0);
        expect_good();
        run(TUR, 6, 0);
        expect_good();
        /* PREVENT twice, ALLOW once: the nexus allows again. */
        run(PREVENT, 6, 0);
        run(PREVENT, 6, 0);
        run(ALLOW, 6, 0);
        run(EJECT, 6, 0);
        expect_good();
        run(LOAD, 6, 0);
        expect_good();
        /* Reserved PREVENT values are rejected. */
        uint8_t bad[6] = {0x1e, 0, 0, 0, 0x02, 0};
        run(bad, 6, 0);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
}

static void test_prevent_seen_by_other_nexus(void **state)
{
        (void)state;
        run_on(&nx2, PREVENT, 6, 0);
        expect_good();
        run(EJECT, 6, 0);
        expect_prevented();
        /* nx allowing does not lift nx2's prevention. */
        run(ALLOW, 6, 0);
        expect_good();
        run(EJECT, 6, 0);
        expect_prevented();
        run_on(&nx2, ALLOW, 6, 0);
        expect_good();
        run(EJECT, 6, 0);
        expect_good();
        run(LOAD, 6, 0);
        expect_good();
}

static void test_nexus_loss_clears(void **state)
{
        (void)state;
        run_on(&nx2, PREVENT, 6, 0);
        expect_good();
        run(EJECT, 6, 0);
        expect_prevented();
        scsi_nexus_fini(&nx2); /* logout or connection drop */
        run(EJECT, 6, 0);
        expect_good();
        run(LOAD, 6, 0);
        expect_good();
        /* A new nexus starts allowing. */
        scsi_nexus_init(&nx2, &tgt, "iqn.init2,i,0x1", "iqn.2024-01.org.slate:rm,t,0x1", NULL, 0);
        assert_int_equal(nx2.prevent[0], 0);
        run(EJECT, 6, 0);
        expect_good();
        run(LOAD, 6, 0);
        expect_good();
}

static void test_lun_reset_clears(void **state)
{
        (void)state;
        run(PREVENT, 6, 0);
        run_on(&nx2, PREVENT, 6, 0);
        run(EJECT, 6, 0);
        expect_prevented();
        scsi_lun_reset(&nx, 0);
        assert_int_equal(nx.prevent[0], 0);
        assert_int_equal(nx2.prevent[0], 0);
        /* The issuing nexus gets the reset's unit attention too (SAM-5 6.3.3). */
        run(TUR, 6, 0);
        expect_sense(SK_UNIT_ATTENTION, 0x29, 0x03);
        run(EJECT, 6, 0);
        expect_good();
        run(LOAD, 6, 0);
        expect_good();
        run_on(&nx2, TUR, 6, 0);
        expect_sense(SK_UNIT_ATTENTION, 0x29, 0x03);
}

static void test_target_reset_clears(void **state)
{
        (void)state;
        for (int cold = 0; cold <= 1; cold++) {
                run(PREVENT, 6, 0);
                expect_good();
                run(EJECT, 6, 0);
                expect_prevented();
                scsi_target_reset(&nx, cold);
                run(EJECT, 6, 0);
                expect_good();
                /* The reset leaves the medium where it was. */
                run(TUR, 6, 0);
                expect_no_medium();
                run(LOAD, 6, 0);
                expect_good();
                run(TUR, 6, 0);
                expect_good();
        }
}

static void test_unmap_clears(void **state)
{
        (void)state;
        /* setup mapped LUN 0 without taking the reference unmap gives back */
        atomic_fetch_add(&ns.refs, 1);
        assert_int_equal(scsi_target_unmap_lun(&tgt, 0), 0);
        assert_int_equal(scsi_target_map_lun(&tgt, 0, &ns), 0);
        atomic_store(&nx.ua[0], 0);
        atomic_store(&nx2.ua[0], 0);
        run(PREVENT, 6, 0);
        expect_good();
        assert_true(scsi_removal_prevented(&ns));
        assert_int_equal(scsi_target_unmap_lun(&tgt, 0), 0);
        assert_false(scsi_removal_prevented(&ns));
        assert_int_equal(nx.prevent[0], 0);
        assert_int_equal(scsi_target_map_lun(&tgt, 0, &ns), 0);
        atomic_store(&nx.ua[0], 0);
        run(EJECT, 6, 0);
        expect_good();
        run(LOAD, 6, 0);
        expect_good();
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_fixed_lu_unchanged, setup_fixed, teardown),
            cmocka_unit_test_setup_teardown(test_inquiry_rmb, setup_removable, teardown),
            cmocka_unit_test_setup_teardown(test_eject_load, setup_removable, teardown),
            cmocka_unit_test_setup_teardown(test_prevent_blocks_eject_and_load, setup_removable,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_prevent_seen_by_other_nexus, setup_removable,
                                            teardown),
            cmocka_unit_test_setup_teardown(test_nexus_loss_clears, setup_removable, teardown),
            cmocka_unit_test_setup_teardown(test_lun_reset_clears, setup_removable, teardown),
            cmocka_unit_test_setup_teardown(test_target_reset_clears, setup_removable, teardown),
            cmocka_unit_test_setup_teardown(test_unmap_clears, setup_removable, teardown),
        };
        int rc = cmocka_run_group_tests(tests, NULL, NULL);
        free(buf);
        return rc;
}
