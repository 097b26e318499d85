/*
 * Unit tests for SANITIZE (SBC-4 5.30, src/scsi/sanitize.c): which service
 * actions the opcode table has, CDB checks (reserved bits and bytes,
 * parameter list length per service action, write protection), the
 * OVERWRITE parameter list checks (OVERWRITE COUNT, TEST, INITIALIZATION
 * PATTERN LENGTH), what the dispatcher does while a sanitize is in
 * progress (NOT READY 04h/1Bh with a progress indication, INQUIRY /
 * REQUEST SENSE / REPORT LUNS still served, unit attentions kept) and in
 * sanitize failure mode (MEDIUM ERROR 31h/03h, EXIT FAILURE MODE and AUSE).
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
#define BS      512u

static struct core_ns ns;
static struct scsi_target tgt;
static struct scsi_nexus nx;
static struct scsi_cmd cmd;
static uint8_t *buf;

static int setup(void **state)
{
        (void)state;
        memset(&ns, 0, sizeof(ns));
        strcpy(ns.name, "s0");
        ns.block_size = BS;
        ns.block_shift = 9;
        ns.num_blocks = NBLOCKS;
        pthread_mutex_init(&ns.lock, NULL);
        atomic_init(&ns.refs, 1);
        scsi_target_init(&tgt, "iqn.2024-01.org.slate:s", 1);
        atomic_store(&tgt.luns[0], &ns);
        scsi_nexus_init(&nx, &tgt, "iqn.init,i,0x1", "iqn.2024-01.org.slate:s,t,0x1", NULL, 0);
        atomic_store(&nx.ua[0], 0);
        if (!buf)
                buf = calloc(1, 2 * CORE_MAX_TRANSFER_BYTES);
        assert_non_null(scsi_lu_state(&ns));
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
        cmd.cdb_len = 16;
        cmd.lun = 0;
        cmd.nexus = &nx;
        cmd.edtl = edtl;
        cmd.buf = buf;
        cmd.buf_len = 2 * CORE_MAX_TRANSFER_BYTES;
        return scsi_cmd_parse(&cmd);
}

static enum scsi_parse_result sanitize(uint8_t byte1, uint16_t param_len)
{
        uint8_t cdb[10] = {0x48, byte1};
        slate_put_be(cdb + 7, 2, param_len);
        return run(cdb, sizeof(cdb), param_len);
}

/* Fixed-format sense: key, ASC/ASCQ, and the sense-key-specific bytes. */
static void expect_sense(uint8_t key, uint8_t asc, uint8_t ascq)
{
        assert_int_equal(cmd.status, SAM_STAT_CHECK_CONDITION);
        assert_int_equal(cmd.sense[0] & 0x7f, 0x70);
        assert_int_equal(cmd.sense[2] & 0x0f, key);
        assert_int_equal(cmd.sense[12], asc);
        assert_int_equal(cmd.sense[13], ascq);
}

static void expect_invalid_cdb(uint16_t byte, int bit)
{
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(cmd.sense[15], 0x80 | 0x40 | (bit >= 0 ? 0x08 | bit : 0));
        assert_int_equal(slate_be16(cmd.sense + 16), byte);
}

static void test_table(void **state)
{
        (void)state;
        assert_true(scsi_op_has_sa(0x48));
        assert_non_null(scsi_op_lookup(0x48, 0x01));
        assert_non_null(scsi_op_lookup(0x48, 0x1f));
        /* BLOCK ERASE exists, but only for LUs with logical block provisioning. */
        assert_non_null(scsi_op_lookup(0x48, 0x02));
        assert_null(scsi_op_for_lu(scsi_op_lookup(0x48, 0x02), &ns));
        ns.thin = true;
        assert_non_null(scsi_op_for_lu(scsi_op_lookup(0x48, 0x02), &ns));
        assert_non_null(scsi_op_for_lu(scsi_op_lookup(0x48, 0x01), &ns));
        ns.thin = false;
        assert_non_null(scsi_op_for_lu(scsi_op_lookup(0x48, 0x01), &ns));
        /* CRYPTOGRAPHIC ERASE exists, but only for LUs encrypted at rest (core/crypt.h). */
        assert_non_null(scsi_op_lookup(0x48, 0x03));
        assert_null(scsi_op_for_lu(scsi_op_lookup(0x48, 0x03), &ns));
        ns.crypt = (struct core_crypt *)&ns; /* any non-NULL key: only its presence is looked at */
        assert_non_null(scsi_op_for_lu(scsi_op_lookup(0x48, 0x03), &ns));
        ns.crypt = NULL;
        assert_int_equal(scsi_op_lookup(0x48, 0x01)->cdb_len, 10);
}

static void test_service_actions(void **state)
{
        (void)state;
        for (unsigned sa = 0; sa <= 0x1e; sa++) {
                if (sa == 0x01)
                        continue;
                assert_int_equal(sanitize((uint8_t)sa, 0), SCSI_PARSE_DONE);
                expect_invalid_cdb(1, 4);
        }
}

/* REPORT SUPPORTED OPERATION CODES, one command: SUPPORT field of 48h/02h. */
static uint8_t rsoc_support(uint8_t sa)
{
        uint8_t cdb[12] = {0xa3, 0x0c, 0x02, 0x48, 0x00, sa};
        slate_put_be(cdb + 6, 4, 64);
        assert_int_equal(run(cdb, sizeof(cdb), 64), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        return buf[1] & 0x07;
}

static void test_block_erase_thin_only(void **state)
{
        (void)state;
        /* A fully provisioned LU: not listed, not executed. */
        assert_int_equal(rsoc_support(0x02), 0x01);
        assert_int_equal(sanitize(0x02, 0), SCSI_PARSE_DONE);
        expect_invalid_cdb(1, 4);
        /* A thin LU: listed; no parameter list allowed; otherwise it runs. */
        ns.thin = true;
        assert_int_equal(rsoc_support(0x02), 0x03);
        assert_int_equal(rsoc_support(0x01), 0x03);
        assert_int_equal(sanitize(0x02, 8), SCSI_PARSE_DONE);
        expect_invalid_cdb(7, 7);
        assert_int_equal(sanitize(0x02, 0), SCSI_PARSE_EXEC);
        ns.thin = false;
}

static void test_reserved(void **state)
{
        (void)state;
        assert_int_equal(sanitize(0x40 | 0x01, BS + 4), SCSI_PARSE_DONE);
        expect_invalid_cdb(1, 6);
        for (unsigned i = 2; i <= 6; i++) {
                uint8_t cdb[10] = {0x48, 0x01};
                slate_put_be(cdb + 7, 2, BS + 4);
                cdb[i] = (uint8_t)i;
                assert_int_equal(run(cdb, sizeof(cdb), BS + 4), SCSI_PARSE_DONE);
                expect_invalid_cdb((uint16_t)i, 7);
        }
}

static void test_param_list_length(void **state)
{
        (void)state;
        for (uint16_t len = 0; len < 5; len++) {
                assert_int_equal(sanitize(0x01, len), SCSI_PARSE_DONE);
                expect_invalid_cdb(7, 7);
        }
        assert_int_equal(sanitize(0x01, BS + 5), SCSI_PARSE_DONE);
        expect_invalid_cdb(7, 7);
        assert_int_equal(sanitize(0x01, 5), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, 5);
        assert_int_equal(sanitize(0x80 | 0x20 | 0x01, BS + 4), SCSI_PARSE_EXEC);
        assert_int_equal(cmd.data_out_len, BS + 4);
        assert_int_equal(cmd.xfer_len, BS + 4);
        /* EXIT FAILURE MODE takes no parameter list. */
        assert_int_equal(sanitize(0x1f, 8), SCSI_PARSE_DONE);
        expect_invalid_cdb(7, 7);
        assert_int_equal(sanitize(0x1f, 0), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
}

static void test_write_protect(void **state)
{
        (void)state;
        core_ns_set_wp(&ns, CORE_WP_CONFIG, true, NULL);
        assert_int_equal(atomic_exchange(&nx.ua[0], 0), 1u << SCSI_UA_MODE_CHANGED);
        assert_int_equal(sanitize(0x01, BS + 4), SCSI_PARSE_DONE);
        expect_sense(SK_DATA_PROTECT, 0x27, 0x00);
        core_ns_set_wp(&ns, CORE_WP_CONFIG, false, &nx);  /* as by this nexus: no UA */
        core_ns_set_wp(&ns, CORE_WP_SOFTWARE, true, &nx); /* as by this nexus: no UA */
        assert_int_equal(sanitize(0x01, BS + 4), SCSI_PARSE_DONE);
        expect_sense(SK_DATA_PROTECT, 0x27, 0x02);
}

static int check(const uint8_t *p, uint32_t len, uint16_t *byte, int *bit)
{
        return scsi_sanitize_check_overwrite(p, len, BS, byte, bit);
}

static void test_overwrite_params(void **state)
{
        uint8_t p[BS + 8];
        uint16_t byte = 0xffff;
        int bit = -2;
        (void)state;
        memset(p, 0xaa, sizeof(p));
        p[0] = 0x01, p[1] = 0, p[2] = BS >> 8, p[3] = BS & 0xff;
        assert_int_equal(check(p, BS + 4, &byte, &bit), 0);
        p[0] = 0x80 | 0x1f; /* INVERT, 31 passes */
        assert_int_equal(check(p, BS + 4, &byte, &bit), 0);
        p[0] = 0x00; /* OVERWRITE COUNT 0 */
        assert_int_equal(check(p, BS + 4, &byte, &bit), -EINVAL);
        assert_int_equal(byte, 0);
        assert_int_equal(bit, 4);
        p[0] = 0x21; /* TEST 01b */
        assert_int_equal(check(p, BS + 4, &byte, &bit), -EINVAL);
        assert_int_equal(bit, 6);
        p[0] = 0x01, p[1] = 0x01; /* reserved */
        assert_int_equal(check(p, BS + 4, &byte, &bit), -EINVAL);
        assert_int_equal(byte, 1);
        p[1] = 0, p[2] = 0, p[3] = 0; /* INITIALIZATION PATTERN LENGTH 0 */
        assert_int_equal(check(p, BS + 4, &byte, &bit), -EINVAL);
        assert_int_equal(byte, 2);
        slate_put_be(p + 2, 2, BS + 4); /* longer than a block */
        assert_int_equal(check(p, BS + 8, &byte, &bit), -EINVAL);
        assert_int_equal(byte, 2);
        slate_put_be(p + 2, 2, 4); /* pattern length and list length disagree */
        assert_int_equal(check(p, 9, &byte, &bit), -EINVAL);
        assert_int_equal(check(p, 8, &byte, &bit), 0);
        slate_put_be(p + 2, 2, BS / 2);
        assert_int_equal(check(p, BS / 2 + 4, &byte, &bit), 0);
        assert_int_equal(check(p, 4, &byte, &bit), -EINVAL);
}

static void test_in_progress(void **state)
{
        uint8_t tur[6] = {0x00};
        uint8_t inq[6] = {0x12, 0, 0, 0, 96, 0};
        uint8_t rs[6] = {0x03, 0, 0, 0, 252, 0};
        uint8_t rl[12] = {0xa0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
        uint8_t rd[10] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
        (void)state;
        assert_int_equal(core_ns_sanitize_begin(&ns, NULL), 0);
        core_ns_sanitize_progress(&ns, 0x4000);
        atomic_store(&nx.ua[0], 1u << SCSI_UA_BUS_RESET);

        assert_int_equal(run(tur, 6, 0), SCSI_PARSE_DONE);
        expect_sense(SK_NOT_READY, 0x04, 0x1b);
        assert_int_equal(cmd.sense[15], 0x80); /* SKSV, progress indication */
        assert_int_equal(slate_be16(cmd.sense + 16), 0x4000);
        assert_int_equal(run(rd, 10, BS), SCSI_PARSE_DONE);
        expect_sense(SK_NOT_READY, 0x04, 0x1b);
        assert_int_equal(sanitize(0x01, BS + 4), SCSI_PARSE_DONE);
        expect_sense(SK_NOT_READY, 0x04, 0x1b);
        /* The unit attention waits for the sanitize to end. */
        assert_int_equal(atomic_load(&nx.ua[0]), 1u << SCSI_UA_BUS_RESET);

        assert_int_equal(run(inq, 6, 96), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(run(rl, 12, 256), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(run(rs, 6, 252), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_true(cmd.data_in_len >= 18);
        assert_int_equal(buf[2] & 0x0f, SK_NOT_READY);
        assert_int_equal(buf[12], 0x04);
        assert_int_equal(buf[13], 0x1b);
        assert_int_equal(buf[15], 0x80);
        assert_int_equal(slate_be16(buf + 16), 0x4000);

        core_ns_sanitize_end(&ns, true, false, NULL);
        assert_int_equal(run(tur, 6, 0), SCSI_PARSE_DONE);
        expect_sense(SK_UNIT_ATTENTION, 0x29, 0x02);
        assert_int_equal(run(tur, 6, 0), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
}

static void test_failure_mode(void **state)
{
        uint8_t rd[10] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
        uint8_t inq[6] = {0x12, 0, 0, 0, 96, 0};
        (void)state;
        core_ns_sanitize_end(&ns, false, false, NULL);
        assert_int_equal(run(rd, 10, BS), SCSI_PARSE_DONE);
        expect_sense(SK_MEDIUM_ERROR, 0x31, 0x03);
        assert_int_equal(run(inq, 6, 96), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        /* AUSE was 0: only a successful sanitize ends failure mode. */
        assert_int_equal(sanitize(0x1f, 0), SCSI_PARSE_DONE);
        expect_sense(SK_MEDIUM_ERROR, 0x31, 0x03);
        /* A new OVERWRITE is accepted in failure mode. */
        assert_int_equal(sanitize(0x01, BS + 4), SCSI_PARSE_EXEC);
        core_ns_sanitize_end(&ns, false, true, NULL);
        assert_int_equal(sanitize(0x1f, 0), SCSI_PARSE_DONE);
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(run(rd, 10, BS), SCSI_PARSE_EXEC);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup_teardown(test_table, setup, teardown),
            cmocka_unit_test_setup_teardown(test_service_actions, setup, teardown),
            cmocka_unit_test_setup_teardown(test_block_erase_thin_only, setup, teardown),
            cmocka_unit_test_setup_teardown(test_reserved, setup, teardown),
            cmocka_unit_test_setup_teardown(test_param_list_length, setup, teardown),
            cmocka_unit_test_setup_teardown(test_write_protect, setup, teardown),
            cmocka_unit_test_setup_teardown(test_overwrite_params, setup, teardown),
            cmocka_unit_test_setup_teardown(test_in_progress, setup, teardown),
            cmocka_unit_test_setup_teardown(test_failure_mode, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
