/*
 * Unit tests for the iSCSI transport's pure parts (RFC 7143): text key
 * parsing and login key negotiation (6, 13), BHS validation (11.2),
 * CRC32C digests (RFC 3720 B.4 test vectors), serial number arithmetic
 * (RFC 1982 as used by 3.2.2.1) and LUN decoding.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "iscsi/internal.h"
#include "rt/crc.h"

static char outbuf[ISCSI_TEXT_MAX];
static struct iscsi_textbuf tb;
static struct iscsi_neg neg;

static void neg_reset(void)
{
        memset(&neg, 0, sizeof(neg));
        iscsi_params_defaults(&neg.p);
        tb.buf = outbuf;
        tb.len = 0;
        tb.cap = sizeof(outbuf);
        neg.out = &tb;
        neg.type = ISCSI_SESS_NORMAL;
}

/* Value answered for key, or NULL. */
static const char *answer_of(const char *key)
{
        size_t kl = strlen(key);
        for (uint32_t pos = 0; pos < tb.len; pos += (uint32_t)strlen(tb.buf + pos) + 1)
                if (!strncmp(tb.buf + pos, key, kl) && tb.buf[pos + kl] == '=')
                        return tb.buf + pos + kl + 1;
        return NULL;
}

static int neg1(const char *key, const char *val)
{
        return iscsi_neg_key(&neg, key, val);
}

static void test_text_parse(void **state)
{
        (void)state;
        neg_reset();
        const char txt[] = "InitiatorName=iqn.x\0SessionType=Normal\0TargetName=iqn.t\0";
        assert_int_equal(iscsi_neg_text(&neg, txt, sizeof(txt) - 1), 0);
        assert_true(neg.have_initiator);
        assert_string_equal(neg.initiator_name, "iqn.x");
        assert_string_equal(neg.target_name, "iqn.t");
        /* Last pair without its NUL is accepted. */
        neg_reset();
        const char t2[] = "HeaderDigest=None";
        assert_int_equal(iscsi_neg_text(&neg, t2, sizeof(t2) - 1), 0);
        assert_string_equal(answer_of("HeaderDigest"), "None");
        /* No '=' is malformed. */
        neg_reset();
        const char t3[] = "Garbage\0";
        assert_int_equal(iscsi_neg_text(&neg, t3, sizeof(t3) - 1), -EINVAL);
        assert_int_equal(neg.status, ISCSI_LOGIN_INITIATOR_ERROR);
}

static void test_long_keys(void **state)
{
        (void)state;
        neg_reset();
        char *big = malloc(20000);
        memset(big, 'A', 20000);
        memcpy(big + 100, "=x", 2);
        assert_int_equal(iscsi_neg_text(&neg, big, 20000), -EINVAL); /* key of 100 bytes */
        memcpy(big, "K=", 2);
        neg_reset();
        assert_int_equal(iscsi_neg_text(&neg, big, 20000), -EINVAL); /* value > 8192 */
        free(big);
        neg_reset();
        char key64[70];
        memset(key64, 'k', 63);
        strcpy(key64 + 63, "=v");
        assert_int_equal(iscsi_neg_text(&neg, key64, strlen(key64)), 0);
        assert_string_equal(
            answer_of("kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"),
            "NotUnderstood");
}

static void test_digests(void **state)
{
        (void)state;
        neg_reset();
        neg1("HeaderDigest", "CRC32C,None");
        neg1("DataDigest", "None,CRC32C");
        assert_string_equal(answer_of("HeaderDigest"), "CRC32C");
        assert_string_equal(answer_of("DataDigest"), "None");
        assert_true(neg.p.header_digest);
        assert_false(neg.p.data_digest);
        neg_reset();
        neg1("HeaderDigest", "MD5");
        assert_string_equal(answer_of("HeaderDigest"), "Reject");
}

static void test_bool_keys(void **state)
{
        (void)state;
        neg_reset();
        assert_true(neg.p.initial_r2t && neg.p.immediate_data); /* defaults Yes */
        neg1("InitialR2T", "No");                               /* OR with our No */
        neg1("ImmediateData", "No");                            /* AND */
        assert_string_equal(answer_of("InitialR2T"), "No");
        assert_string_equal(answer_of("ImmediateData"), "No");
        assert_false(neg.p.initial_r2t);
        assert_false(neg.p.immediate_data);
        neg_reset();
        neg1("InitialR2T", "Yes");
        neg1("ImmediateData", "Yes");
        assert_string_equal(answer_of("InitialR2T"), "Yes");
        assert_string_equal(answer_of("ImmediateData"), "Yes");
        neg_reset();
        neg1("ImmediateData", "maybe");
        assert_string_equal(answer_of("ImmediateData"), "Reject");
        neg1("DataPDUInOrder", "No");
        assert_string_equal(answer_of("DataPDUInOrder"), "Yes");
        neg1("IFMarker", "Yes");
        assert_string_equal(answer_of("IFMarker"), "No");
}

static void test_numeric_keys(void **state)
{
        (void)state;
        neg_reset();
        neg1("MaxBurstLength", "16776192");
        assert_int_equal(neg.p.max_burst, ISCSI_OUR_MAX_BURST);
        neg1("FirstBurstLength", "4096");
        assert_string_equal(answer_of("FirstBurstLength"), "4096");
        neg1("MaxConnections", "8");
        assert_string_equal(answer_of("MaxConnections"), "1");
        neg1("ErrorRecoveryLevel", "2");
        assert_string_equal(answer_of("ErrorRecoveryLevel"), "0");
        neg1("DefaultTime2Wait", "0");
        assert_string_equal(answer_of("DefaultTime2Wait"), "2"); /* max */
        neg1("DefaultTime2Retain", "3600");
        assert_string_equal(answer_of("DefaultTime2Retain"), "20"); /* min */
        neg1("MaxOutstandingR2T", "0");
        assert_string_equal(answer_of("MaxOutstandingR2T"), "Reject");
        neg_reset();
        neg1("MaxBurstLength", "abc");
        assert_string_equal(answer_of("MaxBurstLength"), "Reject");
        neg_reset();
        neg1("MaxBurstLength", "99999999999999999999999");
        assert_string_equal(answer_of("MaxBurstLength"), "Reject");
        /* FirstBurstLength never exceeds MaxBurstLength. */
        neg_reset();
        const char t[] = "FirstBurstLength=262144\0MaxBurstLength=8192\0";
        assert_int_equal(iscsi_neg_text(&neg, t, sizeof(t) - 1), 0);
        assert_int_equal(neg.p.first_burst, 8192);
}

static void test_mrdsl_declarative(void **state)
{
        (void)state;
        neg_reset();
        neg1("MaxRecvDataSegmentLength", "65536");
        assert_int_equal(neg.p.mrdsl_initiator, 65536);
        /* We answer with our own limit, not theirs. */
        char ours[16];
        snprintf(ours, sizeof(ours), "%u", ISCSI_OUR_MRDSL);
        assert_string_equal(answer_of("MaxRecvDataSegmentLength"), ours);
        /* Declared once only. */
        uint32_t len = tb.len;
        assert_int_equal(iscsi_neg_declare(&neg), 0);
        assert_int_equal(tb.len, len);
        neg_reset();
        neg1("MaxRecvDataSegmentLength", "100");
        assert_string_equal(answer_of("MaxRecvDataSegmentLength"), "Reject");
        assert_int_equal(neg.p.mrdsl_initiator, 8192);
}

static void test_unknown_and_auth(void **state)
{
        (void)state;
        neg_reset();
        neg1("X-com.example.Foo", "1");
        neg1("Bogus", "1");
        assert_string_equal(answer_of("X-com.example.Foo"), "NotUnderstood");
        assert_string_equal(answer_of("Bogus"), "NotUnderstood");
        neg1("TargetAlias", "x");
        assert_string_equal(answer_of("TargetAlias"), "Reject");
        /* AuthMethod and CHAP keys are recorded; login.c answers them (tests/limits chap). */
        neg_reset();
        neg.stage = ISCSI_STAGE_SECURITY;
        assert_int_equal(neg1("AuthMethod", "CHAP,None"), 0);
        assert_true(neg.auth_offered && neg.offer_chap && neg.offer_none);
        assert_null(answer_of("AuthMethod"));
        assert_int_equal(neg1("CHAP_A", "7,6,5"), 0);
        assert_string_equal(neg.chap_a, "7,6,5");
        assert_int_equal(neg1("CHAP_R", "0x00112233"), 0);
        assert_string_equal(neg.chap_r, "0x00112233");
        assert_false(neg.chap_too_long);
        char big[300];
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        assert_int_equal(neg1("CHAP_N", big), 0); /* too long: authentication will fail */
        assert_true(neg.chap_too_long);
        neg_reset();
        neg.stage = ISCSI_STAGE_SECURITY;
        assert_int_equal(neg1("AuthMethod", "CHAP"), 0);
        assert_true(neg.offer_chap && !neg.offer_none);
        /* CHAP keys outside the security stage fail the login. */
        neg_reset();
        neg.stage = ISCSI_STAGE_OPERATIONAL;
        assert_int_equal(neg1("CHAP_A", "5"), -EPROTO);
        assert_int_equal(neg.status, ISCSI_LOGIN_AUTH_FAILED);
        neg_reset();
        neg1("SessionType", "Bad");
        assert_string_equal(answer_of("SessionType"), "Reject");
        neg_reset();
        neg.type = ISCSI_SESS_DISCOVERY;
        neg1("MaxBurstLength", "4096");
        assert_string_equal(answer_of("MaxBurstLength"), "Irrelevant");
}

static void test_response_full(void **state)
{
        (void)state;
        neg_reset();
        tb.cap = 10;
        assert_int_equal(neg1("Bogus", "1"), -ENOSPC);
}

static void test_crc32c(void **state)
{
        (void)state;
        uint8_t buf[48];
        memset(buf, 0, 32);
        assert_int_equal(rt_crc32c(buf, 32), 0x8a9136aa); /* RFC 3720 B.4 */
        memset(buf, 0xff, 32);
        assert_int_equal(rt_crc32c(buf, 32), 0x62a8ab43);
        for (int i = 0; i < 32; i++)
                buf[i] = (uint8_t)i;
        assert_int_equal(rt_crc32c(buf, 32), 0x46dd794e);
        assert_int_equal(rt_crc32c("123456789", 9), 0xe3069283);
        /* Chaining equals one pass. */
        uint32_t c = rt_crc32c_update(RT_CRC32C_INIT, buf, 10);
        c = rt_crc32c_update(c, buf + 10, 22);
        assert_int_equal(rt_crc32c_final(c), 0x46dd794e);
        uint8_t d[4];
        iscsi_digest_put(d, 0x8a9136aa);
        assert_int_equal(d[0], 0xaa); /* wire order per RFC 3720 B.4 */
        assert_int_equal(iscsi_digest_get(d), 0x8a9136aa);
}

static void test_serial(void **state)
{
        (void)state;
        assert_true(iscsi_sn_lt(1, 2));
        assert_false(iscsi_sn_lt(2, 2));
        assert_true(iscsi_sn_lt(0xffffffff, 0));
        assert_true(iscsi_sn_gt(5, 0xfffffff0));
        assert_true(iscsi_sn_le(7, 7));
        assert_false(iscsi_sn_lt(0x80000000u + 5, 5) && iscsi_sn_lt(5, 0x80000000u + 5));
}

static void test_bhs(void **state)
{
        (void)state;
        uint8_t b[48];
        uint32_t ahs, dsl;
        struct iscsi_conn_limits full = {.login_phase = false, .max_recv = 8192};
        struct iscsi_conn_limits login = {.login_phase = true, .max_recv = 8192};

        memset(b, 0, sizeof(b));
        b[0] = ISCSI_OP_SCSI_CMD;
        b[4] = 1;
        b[7] = 0x10;
        assert_int_equal(iscsi_pdu_check_bhs(b, &full, &ahs, &dsl), 0);
        assert_int_equal(ahs, 4);
        assert_int_equal(dsl, 16);
        /* Too long a data segment. */
        b[5] = 0x01;
        assert_int_equal(iscsi_pdu_check_bhs(b, &full, &ahs, &dsl), -EMSGSIZE);
        b[5] = 0;
        /* Only Login during login. */
        assert_int_equal(iscsi_pdu_check_bhs(b, &login, &ahs, &dsl), -EPROTO);
        b[0] = ISCSI_OP_LOGIN_REQ | ISCSI_OP_IMMEDIATE;
        b[4] = 0;
        assert_int_equal(iscsi_pdu_check_bhs(b, &login, &ahs, &dsl), 0);
        /* Unknown opcode. */
        b[0] = 0x1c;
        assert_int_equal(iscsi_pdu_check_bhs(b, &full, &ahs, &dsl), -EOPNOTSUPP);
        /* AHS on a NOP-Out, data on a TMF. */
        b[0] = ISCSI_OP_NOP_OUT;
        b[4] = 2;
        assert_int_equal(iscsi_pdu_check_bhs(b, &full, &ahs, &dsl), -EPROTO);
        b[4] = 0;
        b[0] = ISCSI_OP_TASK_MGMT_REQ;
        assert_int_equal(iscsi_pdu_check_bhs(b, &full, &ahs, &dsl), -EPROTO);
        b[7] = 0;
        assert_int_equal(iscsi_pdu_check_bhs(b, &full, &ahs, &dsl), 0);
        /* Reserved bit 7 of the opcode byte. */
        b[0] = 0x80;
        assert_int_equal(iscsi_pdu_check_bhs(b, &full, &ahs, &dsl), -EPROTO);
}

static void test_lun(void **state)
{
        (void)state;
        uint8_t l[8] = {0};
        l[1] = 5;
        assert_int_equal(iscsi_lun_decode(l), 5);
        l[0] = 0x40;
        l[1] = 0x01;
        assert_int_equal(iscsi_lun_decode(l), 1);
        l[0] = 0x41;
        assert_int_equal(iscsi_lun_decode(l), 0x101);
        l[0] = 0;
        l[3] = 1;
        assert_true(iscsi_lun_decode(l) == UINT64_MAX);
        iscsi_lun_encode(l, 7);
        assert_int_equal(iscsi_lun_decode(l), 7);
        iscsi_lun_encode(l, 300);
        assert_int_equal(iscsi_lun_decode(l), 300);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_text_parse),
            cmocka_unit_test(test_long_keys),
            cmocka_unit_test(test_digests),
            cmocka_unit_test(test_bool_keys),
            cmocka_unit_test(test_numeric_keys),
            cmocka_unit_test(test_mrdsl_declarative),
            cmocka_unit_test(test_unknown_and_auth),
            cmocka_unit_test(test_response_full),
            cmocka_unit_test(test_crc32c),
            cmocka_unit_test(test_serial),
            cmocka_unit_test(test_bhs),
            cmocka_unit_test(test_lun),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
