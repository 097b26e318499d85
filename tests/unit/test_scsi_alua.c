/*
 * Unit tests for implicit ALUA (scsi/alua.c, core/ana.h; SPC-5 5.16):
 * INQUIRY TPGS, the VPD 83h relative target port and target port group
 * designators, REPORT TARGET PORT GROUPS in both formats, SET TARGET PORT
 * GROUPS refused as unsupported, the sense of every state for medium access
 * (NOT READY 04h/0Ah, 0Bh, 0Ch) with INQUIRY and RTPG still served, the
 * unit attention 2Ah/06h on every nexus after a change, and the gateway
 * id's offsets of port and group numbers; plus the core model: state names,
 * group bounds, the change counts, CNTLID ranges; and automatic takeover:
 * the peer list's text form, and the rule (a group configured non-optimized
 * or standby is optimized while every peer listed for it is down, given
 * back when one is up again) seen through RTPG and its unit attention.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>

#include "slate/byteorder.h"
#include "scsi/internal.h"

static char state_dir[64];
static struct core_ns *ns;
static struct scsi_target tgt;
static struct scsi_nexus nx, nx2;
static struct scsi_cmd cmd;
static uint8_t *buf;

static const uint8_t TUR[6] = {0x00, 0, 0, 0, 0, 0};
static const uint8_t INQUIRY[6] = {0x12, 0, 0, 0, 96, 0};
static const uint8_t VPD83[6] = {0x12, 1, 0x83, 0x04, 0x00, 0};
static const uint8_t READ10[10] = {0x28, 0, 0, 0, 0, 0, 0, 0, 1, 0};
static const uint8_t RTPG[12] = {0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0};
static const uint8_t RTPG_EXT[12] = {0xa3, 0x2a, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0};
static const uint8_t RTPG_BAD[12] = {0xa3, 0x4a, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0};
static const uint8_t STPG[12] = {0xa4, 0x0a, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0};

static int setup(void **state)
{
        (void)state;
        char err[256];
        snprintf(state_dir, sizeof(state_dir), "/tmp/slate-test-alua-XXXXXX");
        if (!mkdtemp(state_dir))
                return -1;
        core_set_state_dir(state_dir);
        struct core_ns_params p = {
            .name = "alua0", .backend = "mem", .size_bytes = 1 << 20, .block_size = 512};
        if (core_ns_create(&p, &ns, err, sizeof(err)))
                return -1;
        buf = calloc(1, 2 * CORE_MAX_TRANSFER_BYTES);
        return buf ? 0 : -1;
}

static void target_up(void)
{
        scsi_target_init(&tgt, "iqn.2024-01.org.slate:alua", 1);
        core_ns_get(ns);
        assert_int_equal(scsi_target_map_lun(&tgt, 0, ns), 0);
        scsi_nexus_init(&nx, &tgt, "iqn.init1,i,0x1", "iqn.2024-01.org.slate:alua,t,0x1", NULL, 0);
        scsi_nexus_init(&nx2, &tgt, "iqn.init2,i,0x1", "iqn.2024-01.org.slate:alua,t,0x1", NULL, 0);
        for (unsigned l = 0; l < SCSI_MAX_LUNS; l++) {
                atomic_store(&nx.ua[l], 0);
                atomic_store(&nx2.ua[l], 0);
        }
}

static void target_down(void)
{
        scsi_nexus_fini(&nx);
        scsi_nexus_fini(&nx2);
        scsi_target_unmap_lun(&tgt, 0);
        scsi_target_fini(&tgt);
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
        assert_int_equal(cmd.sense[2] & 0x0f, key);
        assert_int_equal(cmd.sense[12], asc);
        assert_int_equal(cmd.sense[13], ascq);
}

static void expect_good(void)
{
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
}

/* VPD 83h's target-port designator of type (4: relative port, 5: port group), or -1. */
static int vpd83_port(int type)
{
        run(VPD83, 6, 1024);
        expect_good();
        int len = 4 + ((buf[2] << 8) | buf[3]);
        for (int off = 4; off + 4 <= len; off += 4 + buf[off + 3])
                if ((buf[off + 1] & 0x30) == 0x10 && (buf[off + 1] & 0x0f) == type)
                        return (buf[off + 6] << 8) | buf[off + 7];
        return -1;
}

static void test_core_model(void **state)
{
        (void)state;
        enum core_ana_state st;
        for (unsigned i = 0; i < CORE_ANA_STATE_MAX; i++) {
                assert_int_equal(core_ana_state_parse(core_ana_state_name(i), &st), 0);
                assert_int_equal(st, i);
        }
        assert_int_equal(core_ana_state_parse("active", &st), -EINVAL);
        assert_int_equal(core_ana_set_state(0, CORE_ANA_OPTIMIZED, NULL), -EINVAL);
        assert_int_equal(core_ana_set_state(CORE_ANA_GROUPS + 1, CORE_ANA_OPTIMIZED, NULL),
                         -EINVAL);
        assert_int_equal(core_ana_set_state(1, CORE_ANA_STATE_MAX, NULL), -EINVAL);
        assert_int_equal(core_ns_set_ana_group(ns, 0, NULL), -EINVAL);
        assert_int_equal(core_ns_ana_group(ns), 1); /* the default */
        /* A change counts once; setting the same state again does not. */
        uint64_t c0 = core_ana_change_count();
        assert_int_equal(core_ana_set_state(7, CORE_ANA_STANDBY, NULL), 0);
        assert_int_equal(core_ana_set_state(7, CORE_ANA_STANDBY, NULL), 0);
        assert_int_equal(core_ana_change_count(), c0 + 1);
        assert_int_equal(core_ana_group_change_count(7), c0 + 1);
        assert_int_equal(core_ana_state(7), CORE_ANA_STANDBY);
        assert_int_equal(core_ana_state(0), CORE_ANA_OPTIMIZED);
        /* Moving a namespace changes both groups. */
        assert_int_equal(core_ns_set_ana_group(ns, 7, NULL), 0);
        assert_int_equal(core_ana_group_change_count(7), c0 + 2);
        assert_int_equal(core_ana_group_change_count(1), c0 + 2);
        assert_int_equal(core_ns_check(ns, CORE_CHK_ACCESS), CORE_E_ANA_STANDBY);
        assert_int_equal(core_ns_check(ns, CORE_CHK_STARTED), CORE_OK); /* only when asked */
        assert_int_equal(core_ns_set_ana_group(ns, 1, NULL), 0);
        assert_int_equal(core_ana_set_state(7, CORE_ANA_OPTIMIZED, NULL), 0);
        /* The gateway id: CNTLID ranges never overlap, FFF0h and up stay reserved. */
        uint16_t lo, hi;
        assert_int_equal(core_gateway_set_id(CORE_GATEWAY_ID_MAX + 1), -EINVAL);
        core_gateway_cntlid_range(&lo, &hi);
        assert_int_equal(lo, 1);
        assert_int_equal(hi, 0xffef);
        for (unsigned g = 1; g <= CORE_GATEWAY_ID_MAX; g++) {
                assert_int_equal(core_gateway_set_id(g), 0);
                core_gateway_cntlid_range(&lo, &hi);
                assert_int_equal(lo, g << 12);
                assert_int_equal(hi, g == 15 ? 0xffef : (g << 12) + 0xfff);
                assert_int_equal(core_gateway_rel_port(1), (g << 8) | 1);
                assert_int_equal(core_gateway_tpg(3), (g << 8) | 3);
                assert_int_equal(core_gateway_tpg_group((uint16_t)((g << 8) | 3)), 3);
                assert_int_equal(core_gateway_tpg_group((uint16_t)(((g + 1) << 8) | 3)), 0);
        }
        assert_int_equal(core_gateway_set_id(0), 0);
}

static void test_inquiry_vpd_rtpg(void **state)
{
        (void)state;
        target_up();
        run(INQUIRY, 6, 96);
        expect_good();
        assert_int_equal(buf[5] & 0x30, 0x10); /* TPGS 01b: implicit only */
        /* A lone gateway keeps what hosts saw before: port 1, group 1. */
        assert_int_equal(vpd83_port(4), 1);
        assert_int_equal(vpd83_port(5), 1);
        run(RTPG, 12, 1024);
        expect_good();
        assert_int_equal(cmd.data_in_len, 16);
        assert_int_equal(slate_be32(buf), 12); /* RETURN DATA LENGTH */
        assert_int_equal(buf[4] & 0x0f, 0x0);  /* active/optimized */
        assert_int_equal(buf[5], 0xcf);        /* T, O, U, S, AN, AO supported */
        assert_int_equal(slate_be16(buf + 6), 1);
        assert_int_equal(buf[11], 1); /* one port */
        assert_int_equal(slate_be16(buf + 14), 1);
        run(RTPG_EXT, 12, 1024);
        expect_good();
        assert_int_equal(cmd.data_in_len, 20);
        assert_int_equal(slate_be32(buf), 16);
        assert_int_equal(buf[4], 0x10); /* FORMAT TYPE 001b */
        assert_true(buf[5] > 0);        /* IMPLICIT TRANSITION TIME */
        assert_int_equal(slate_be16(buf + 10), 1);
        /* The allocation length truncates. */
        static const uint8_t RTPG_4[12] = {0xa3, 0x0a, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0};
        run(RTPG_4, 12, 1024);
        expect_good();
        assert_int_equal(cmd.data_in_len, 4);
        run(RTPG_BAD, 12, 1024);
        expect_sense(SK_ILLEGAL_REQUEST, 0x24, 0x00);
        /* Implicit only: SET TARGET PORT GROUPS is not a command here. */
        run(STPG, 12, 4);
        expect_sense(SK_ILLEGAL_REQUEST, 0x20, 0x00);
        target_down();

        /* Gateway 2: its port and group numbers carry its id. */
        assert_int_equal(core_gateway_set_id(2), 0);
        target_up();
        assert_int_equal(vpd83_port(4), 0x201);
        assert_int_equal(vpd83_port(5), 0x201);
        run(RTPG, 12, 1024);
        assert_int_equal(slate_be16(buf + 6), 0x201);
        assert_int_equal(slate_be16(buf + 14), 0x201);
        assert_int_equal(core_ns_set_ana_group(ns, 4, NULL), 0);
        assert_int_equal(vpd83_port(5), 0x204);
        assert_int_equal(core_ns_set_ana_group(ns, 1, NULL), 0);
        target_down();
        assert_int_equal(core_gateway_set_id(0), 0);
}

static void test_states(void **state)
{
        (void)state;
        target_up();
        static const struct {
                enum core_ana_state st;
                uint8_t alua, ascq; /* RTPG state; NOT READY 04h/ascq, 0 = medium access works */
        } rows[] = {
            {CORE_ANA_STANDBY, 0x2, 0x0b},       {CORE_ANA_INACCESSIBLE, 0x3, 0x0c},
            {CORE_ANA_TRANSITIONING, 0xf, 0x0a}, {CORE_ANA_PERSISTENT_LOSS, 0xe, 0x0c},
            {CORE_ANA_NON_OPTIMIZED, 0x1, 0},    {CORE_ANA_OPTIMIZED, 0x0, 0},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                assert_int_equal(core_ana_set_state(1, rows[i].st, NULL), 0);
                /* Every nexus: ASYMMETRIC ACCESS STATE CHANGED first, once. */
                run_on(&nx2, TUR, 6, 0);
                expect_sense(SK_UNIT_ATTENTION, 0x2a, 0x06);
                run(RTPG, 12, 1024);
                expect_sense(SK_UNIT_ATTENTION, 0x2a, 0x06);
                run(RTPG, 12, 1024);
                expect_good();
                assert_int_equal(buf[4] & 0x0f, rows[i].alua);
                assert_int_equal(buf[9], 0x02); /* altered by implicit behaviour */
                run(TUR, 6, 0);
                if (rows[i].ascq) {
                        expect_sense(SK_NOT_READY, 0x04, rows[i].ascq);
                        run(READ10, 10, 512);
                        expect_sense(SK_NOT_READY, 0x04, rows[i].ascq);
                        run(INQUIRY, 6, 96); /* what needs no medium still runs */
                        expect_good();
                } else {
                        expect_good();
                }
        }
        target_down();
}

/* What RTPG reports on nx now, after the unit attention the change left. */
static uint8_t rtpg_state(bool expect_ua)
{
        run(RTPG, 12, 1024);
        if (expect_ua) {
                expect_sense(SK_UNIT_ATTENTION, 0x2a, 0x06);
                run(RTPG, 12, 1024);
        }
        expect_good();
        return buf[4] & 0x0f;
}

static void test_takeover(void **state)
{
        (void)state;
        struct core_ana_peer p[CORE_ANA_PEERS_MAX];
        char err[200], txt[512];
        /* The text form: parse, normalise, refuse what is not one. */
        assert_int_equal(core_ana_peers_parse("", p, CORE_ANA_PEERS_MAX, err, sizeof(err)), 0);
        assert_int_equal(core_ana_peers_parse("127.0.0.1:4420, [::1]:3260/2+5", p,
                                              CORE_ANA_PEERS_MAX, err, sizeof(err)),
                         2);
        assert_string_equal(p[1].host, "::1");
        assert_int_equal(p[1].port, 3260);
        assert_int_equal(p[1].groups, (1u << 2) | (1u << 5));
        core_ana_peers_format(p, 2, txt, sizeof(txt));
        assert_string_equal(txt, "127.0.0.1:4420,[::1]:3260/2+5");
        static const char *const bad[] = {"host:4420",
                                          "127.0.0.1",
                                          "127.0.0.1:0",
                                          "127.0.0.1:70000",
                                          "127.0.0.1:1/0",
                                          "127.0.0.1:1/17",
                                          "127.0.0.1:1/1+",
                                          "[::1:1",
                                          "::1:4420",
                                          ("1.2.3.4:5,1.2.3.4:5,1.2.3.4:5,1.2.3.4:5,1.2.3.4:5,"
                                           "1.2.3.4:5,1.2.3.4:5,1.2.3.4:5,1.2.3.4:5")};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(
                    core_ana_peers_parse(bad[i], p, CORE_ANA_PEERS_MAX, err, sizeof(err)), -EINVAL);

        /* Gateway B: group 1 non-optimized, watching A (optimized for 1) and C (for 3 only). */
        target_up();
        assert_int_equal(core_ana_set_state(1, CORE_ANA_NON_OPTIMIZED, NULL), 0);
        assert_int_equal(rtpg_state(true), 0x1);
        assert_int_equal(core_ana_peers_parse("127.0.0.1:4420/1,127.0.0.1:4421/3", p,
                                              CORE_ANA_PEERS_MAX, err, sizeof(err)),
                         2);
        assert_int_equal(core_ana_peers_set(p, 2, 5), -EINVAL); /* interval below 10 ms */
        assert_int_equal(core_ana_peers_set(p, 2, 1000), 0);
        bool up[CORE_ANA_PEERS_MAX];
        assert_int_equal(core_ana_peers_get(NULL, up, CORE_ANA_PEERS_MAX, NULL), 2);
        assert_true(up[0] && up[1]); /* peers start up: no takeover at start */
        /* One failed probe of A is not enough; two in a row are. */
        core_ana_peer_report(0, false);
        assert_int_equal(core_ana_state(1), CORE_ANA_NON_OPTIMIZED);
        core_ana_peer_report(0, true); /* the streak restarts */
        core_ana_peer_report(0, false);
        assert_int_equal(core_ana_state(1), CORE_ANA_NON_OPTIMIZED);
        /* C's death concerns group 3 only. */
        core_ana_peer_report(1, false);
        core_ana_peer_report(1, false);
        assert_int_equal(core_ana_state(1), CORE_ANA_NON_OPTIMIZED);
        assert_int_equal(rtpg_state(false), 0x1);
        core_ana_peer_report(0, false);
        assert_int_equal(core_ana_state(1), CORE_ANA_OPTIMIZED); /* takeover */
        assert_int_equal(core_ana_configured_state(1), CORE_ANA_NON_OPTIMIZED);
        assert_int_equal(core_ana_peers_get(NULL, up, CORE_ANA_PEERS_MAX, NULL), 2);
        assert_false(up[0]);
        assert_int_equal(rtpg_state(true), 0x0); /* hosts are told */
        assert_int_equal(core_ns_check(ns, CORE_CHK_ACCESS), CORE_OK);
        /* A configured inaccessible group is management's word: no takeover of it. */
        assert_int_equal(core_ana_set_state(1, CORE_ANA_INACCESSIBLE, NULL), 0);
        assert_int_equal(core_ana_state(1), CORE_ANA_INACCESSIBLE);
        assert_int_equal(core_ana_set_state(1, CORE_ANA_STANDBY, NULL), 0);
        assert_int_equal(core_ana_state(1), CORE_ANA_OPTIMIZED); /* standby is taken over too */
        assert_int_equal(rtpg_state(true), 0x0);
        /* A answers again: two good probes give the group back (failback). */
        core_ana_peer_report(0, true);
        assert_int_equal(core_ana_state(1), CORE_ANA_OPTIMIZED);
        core_ana_peer_report(0, true);
        assert_int_equal(core_ana_state(1), CORE_ANA_STANDBY);
        assert_int_equal(rtpg_state(true), 0x2);
        /* A dead peer dropped from the list holds no takeover; an empty list stops it all. */
        core_ana_peer_report(0, false);
        core_ana_peer_report(0, false);
        assert_int_equal(core_ana_state(1), CORE_ANA_OPTIMIZED);
        assert_int_equal(core_ana_peers_set(p + 1, 1, 1000), 0);
        assert_int_equal(core_ana_state(1), CORE_ANA_STANDBY);
        assert_int_equal(core_ana_peers_set(NULL, 0, 1000), 0);
        assert_int_equal(core_ana_peers_get(NULL, NULL, CORE_ANA_PEERS_MAX, NULL), 0);
        assert_int_equal(core_ana_set_state(1, CORE_ANA_OPTIMIZED, NULL), 0);
        target_down();
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_core_model),
            cmocka_unit_test(test_inquiry_vpd_rtpg),
            cmocka_unit_test(test_states),
            cmocka_unit_test(test_takeover),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
