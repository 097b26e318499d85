/*
 * The persistent reservation model (core/pr.c, SPC-5 5.14): the conflict
 * matrix of every reservation type, REGISTER / REGISTER AND IGNORE /
 * RESERVE / RELEASE / CLEAR / PREEMPT / PREEMPT AND ABORT / REGISTER AND
 * MOVE, the PRgeneration counter, the events reported for other nexuses,
 * RESERVE(6) interplay, the APTPL JSON round trip, the NVMe Register
 * semantics (register_new, registered_only, aptpl_keep), and a change's
 * journey through the core: core_ns_pr_out publishes one event per
 * registrant after dropping ns->lock, the SCSI listener sets the unit
 * attention and calls the abort callback on every target port that maps the
 * namespace, and core_ns_pr_conflict is the check both personalities use;
 * and the state kept with shared storage (rbd): the versioned
 * read-apply-store that retries when another gateway stored first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/ns.h"
#include "core/pr.h"
#include "scsi/scsi.h"

static struct core_pr pr;
static struct core_pr_nexus A, B, C, A2;

struct ev {
        char ini[CORE_PR_NEXUS_MAX];
        unsigned events;
};
static struct ev evs[16];
static unsigned nev;

static void on_event(void *arg, const struct core_pr_reg *r, unsigned e)
{
        (void)arg;
        if (nev < 16) {
                snprintf(evs[nev].ini, sizeof(evs[nev].ini), "%s", r->nexus.initiator);
                evs[nev].events = e;
                nev++;
        }
}

static unsigned events_for(const struct core_pr_nexus *n)
{
        unsigned e = 0;
        for (unsigned i = 0; i < nev; i++)
                if (!strcmp(evs[i].ini, n->initiator))
                        e |= evs[i].events;
        return e;
}

static void mknexus(struct core_pr_nexus *n, const char *ini, const char *tgt)
{
        memset(n, 0, sizeof(*n));
        snprintf(n->initiator, sizeof(n->initiator), "%s", ini);
        snprintf(n->target, sizeof(n->target), "%s", tgt);
        n->rel_tgt_port = 1;
}

static int setup(void **state)
{
        (void)state;
        core_pr_init(&pr);
        mknexus(&A, "iqn.a,i,0x230000000001", "iqn.t,t,0x1");
        mknexus(&B, "iqn.b,i,0x230000000002", "iqn.t,t,0x1");
        mknexus(&C, "iqn.c,i,0x230000000003", "iqn.t,t,0x1");
        mknexus(&A2, "iqn.a,i,0x230000000001", "iqn.t,t,0x2"); /* same initiator, other port */
        nev = 0;
        return 0;
}

static enum core_status out(const struct core_pr_nexus *self, enum core_pr_action a,
                            enum core_pr_type t, uint64_t key, uint64_t sa_key)
{
        struct core_pr_cmd c = {.action = a,
                                .type = t,
                                .scope = CORE_PR_SCOPE_LU,
                                .key = key,
                                .sa_key = sa_key,
                                .notify = on_event};
        return core_pr_out(&pr, self, &c);
}

static void reg(const struct core_pr_nexus *n, uint64_t key)
{
        assert_int_equal(out(n, CORE_PR_REGISTER_IGNORE, 0, 0, key), CORE_OK);
}

static void test_register(void **state)
{
        (void)state;
        uint32_t g = pr.generation;
        /* Unregistered REGISTER with a non-zero RESERVATION KEY conflicts. */
        assert_int_equal(out(&A, CORE_PR_REGISTER, 0, 5, 0x11), CORE_E_RESERVATION_CONFLICT);
        /* SARK 0 while unregistered: success, nothing happens, no generation bump. */
        assert_int_equal(out(&A, CORE_PR_REGISTER, 0, 0, 0), CORE_OK);
        assert_int_equal(pr.generation, g);
        assert_int_equal(out(&A, CORE_PR_REGISTER, 0, 0, 0x11), CORE_OK);
        assert_int_equal(pr.generation, g + 1);
        assert_non_null(core_pr_find_reg(&pr, &A));
        /* Registered: wrong key conflicts (libiscsi "reregister fails"). */
        assert_int_equal(out(&A, CORE_PR_REGISTER, 0, 0, 0x12), CORE_E_RESERVATION_CONFLICT);
        assert_int_equal(pr.generation, g + 1);
        /* Right key changes it. */
        assert_int_equal(out(&A, CORE_PR_REGISTER, 0, 0x11, 0x12), CORE_OK);
        assert_int_equal(core_pr_find_reg(&pr, &A)->key, 0x12);
        /* REGISTER AND IGNORE ignores the key. */
        assert_int_equal(out(&A, CORE_PR_REGISTER_IGNORE, 0, 0x999, 0x13), CORE_OK);
        assert_int_equal(core_pr_find_reg(&pr, &A)->key, 0x13);
        assert_int_equal(pr.generation, g + 3);
        /* Another port of the same initiator is another nexus... */
        assert_null(core_pr_find_reg(&pr, &A2));
        /* ...unless registered with ALL_TG_PT. */
        struct core_pr_cmd c = {.action = CORE_PR_REGISTER, .sa_key = 0x21, .all_tg_pt = true};
        assert_int_equal(core_pr_out(&pr, &B, &c), CORE_OK);
        struct core_pr_nexus B2 = B;
        snprintf(B2.target, sizeof(B2.target), "iqn.t,t,0x2");
        assert_non_null(core_pr_find_reg(&pr, &B2));
        /* Unregister. */
        assert_int_equal(out(&A, CORE_PR_REGISTER, 0, 0x13, 0), CORE_OK);
        assert_null(core_pr_find_reg(&pr, &A));
        assert_int_equal(pr.generation, g + 5);
}

static void test_register_full(void **state)
{
        (void)state;
        struct core_pr_nexus n;
        for (int i = 0; i < CORE_PR_MAX_REGS; i++) {
                char name[64];
                snprintf(name, sizeof(name), "iqn.n%d,i,0x1", i);
                mknexus(&n, name, "iqn.t,t,0x1");
                reg(&n, 100 + i);
        }
        assert_int_equal(out(&A, CORE_PR_REGISTER, 0, 0, 1), CORE_E_PR_INSUFFICIENT_REG);
}

static void test_reserve_release(void **state)
{
        (void)state;
        /* Unregistered nexus cannot reserve. */
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_WRITE_EXCLUSIVE, 0, 0),
                         CORE_E_RESERVATION_CONFLICT);
        reg(&A, 0xa);
        reg(&B, 0xb);
        uint32_t g = pr.generation;
        /* Wrong key. */
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_WRITE_EXCLUSIVE, 0xb, 0),
                         CORE_E_RESERVATION_CONFLICT);
        /* Bad type and scope are CDB field errors. */
        assert_int_equal(out(&A, CORE_PR_RESERVE, 2, 0xa, 0), CORE_E_INVALID_FIELD);
        struct core_pr_cmd c = {
            .action = CORE_PR_RESERVE, .type = CORE_PR_WRITE_EXCLUSIVE, .scope = 1, .key = 0xa};
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_E_INVALID_FIELD);
        assert_int_equal(c.bad_field, CORE_PR_F_SCOPE);

        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_WRITE_EXCLUSIVE, 0xa, 0), CORE_OK);
        assert_int_equal(pr.type, CORE_PR_WRITE_EXCLUSIVE);
        assert_true(core_pr_is_holder(&pr, &A));
        assert_false(core_pr_is_holder(&pr, &B));
        /* Same again by the holder: fine; other type by the holder or anything by B: conflict. */
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_WRITE_EXCLUSIVE, 0xa, 0), CORE_OK);
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_EXCLUSIVE_ACCESS, 0xa, 0),
                         CORE_E_RESERVATION_CONFLICT);
        assert_int_equal(out(&B, CORE_PR_RESERVE, CORE_PR_WRITE_EXCLUSIVE, 0xb, 0),
                         CORE_E_RESERVATION_CONFLICT);
        /* RESERVE does not bump the generation. */
        assert_int_equal(pr.generation, g);

        /* Release by a non-holder registrant: no-op success. */
        assert_int_equal(out(&B, CORE_PR_RELEASE, CORE_PR_WRITE_EXCLUSIVE, 0xb, 0), CORE_OK);
        assert_int_equal(pr.type, CORE_PR_WRITE_EXCLUSIVE);
        /* Release with the wrong type: INVALID RELEASE. */
        c = (struct core_pr_cmd){
            .action = CORE_PR_RELEASE, .type = CORE_PR_EXCLUSIVE_ACCESS, .key = 0xa};
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_E_INVALID_PARAM);
        assert_int_equal(c.bad_field, CORE_PR_F_RELEASE);
        nev = 0;
        assert_int_equal(out(&A, CORE_PR_RELEASE, CORE_PR_WRITE_EXCLUSIVE, 0xa, 0), CORE_OK);
        assert_int_equal(pr.type, CORE_PR_NONE);
        assert_int_equal(nev, 0); /* WE release: no RESERVATIONS RELEASED */
        assert_int_equal(pr.generation, g);
        /* Release without a reservation: fine. */
        assert_int_equal(out(&A, CORE_PR_RELEASE, CORE_PR_WRITE_EXCLUSIVE, 0xa, 0), CORE_OK);

        /* Registrants-only release tells the other registrants. */
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_WE_REGS_ONLY, 0xa, 0), CORE_OK);
        nev = 0;
        assert_int_equal(out(&A, CORE_PR_RELEASE, CORE_PR_WE_REGS_ONLY, 0xa, 0), CORE_OK);
        assert_int_equal(events_for(&B), CORE_PR_EV_RES_RELEASED);
        assert_int_equal(events_for(&A), 0);
}

static void test_holder_unregisters(void **state)
{
        (void)state;
        reg(&A, 0xa);
        reg(&B, 0xb);
        /* Single holder types: the holder leaving releases the reservation. */
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_EA_REGS_ONLY, 0xa, 0), CORE_OK);
        nev = 0;
        assert_int_equal(out(&A, CORE_PR_REGISTER, 0, 0xa, 0), CORE_OK);
        assert_int_equal(pr.type, CORE_PR_NONE);
        assert_int_equal(events_for(&B), CORE_PR_EV_RES_RELEASED);

        /* All registrants: survives until the last registrant leaves. */
        reg(&A, 0xa);
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_WE_ALL_REGS, 0xa, 0), CORE_OK);
        assert_true(core_pr_is_holder(&pr, &B));
        /* Any registrant may reserve the same type again, and release it. */
        assert_int_equal(out(&B, CORE_PR_RESERVE, CORE_PR_WE_ALL_REGS, 0xb, 0), CORE_OK);
        assert_int_equal(out(&A, CORE_PR_REGISTER, 0, 0xa, 0), CORE_OK);
        assert_int_equal(pr.type, CORE_PR_WE_ALL_REGS);
        assert_int_equal(out(&B, CORE_PR_REGISTER, 0, 0xb, 0), CORE_OK);
        assert_int_equal(pr.type, CORE_PR_NONE);
}

struct matrix_row {
        enum core_pr_type type;
        /* holder, registered, unregistered: read ok, write ok */
        bool reg_r, reg_w, unreg_r, unreg_w;
};

static void test_conflict_matrix(void **state)
{
        (void)state;
        /* SPC-5 table 62 (and libiscsi ProutReserve.Access*). */
        static const struct matrix_row rows[] = {
            {CORE_PR_WRITE_EXCLUSIVE, true, false, true, false},
            {CORE_PR_EXCLUSIVE_ACCESS, false, false, false, false},
            {CORE_PR_WE_REGS_ONLY, true, true, true, false},
            {CORE_PR_EA_REGS_ONLY, true, true, false, false},
            {CORE_PR_WE_ALL_REGS, true, true, true, false},
            {CORE_PR_EA_ALL_REGS, true, true, false, false},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                const struct matrix_row *r = &rows[i];
                core_pr_init(&pr);
                /* No reservation: nothing conflicts. */
                assert_false(core_pr_conflict(&pr, &C, true, true));
                reg(&A, 0xa);
                reg(&B, 0xb);
                assert_int_equal(out(&A, CORE_PR_RESERVE, r->type, 0xa, 0), CORE_OK);
                /* The holder does anything. */
                assert_false(core_pr_conflict(&pr, &A, true, false));
                assert_false(core_pr_conflict(&pr, &A, false, true));
                assert_int_equal(!core_pr_conflict(&pr, &B, true, false), r->reg_r);
                assert_int_equal(!core_pr_conflict(&pr, &B, false, true), r->reg_w);
                assert_int_equal(!core_pr_conflict(&pr, &C, true, false), r->unreg_r);
                assert_int_equal(!core_pr_conflict(&pr, &C, false, true), r->unreg_w);
                /* Neither reading nor writing never conflicts here. */
                assert_false(core_pr_conflict(&pr, &C, false, false));
        }
}

static void test_clear(void **state)
{
        (void)state;
        reg(&A, 0xa);
        reg(&B, 0xb);
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_EXCLUSIVE_ACCESS, 0xa, 0), CORE_OK);
        uint32_t g = pr.generation;
        /* Unregistered nexus cannot clear. */
        assert_int_equal(out(&C, CORE_PR_CLEAR, 0, 0, 0), CORE_E_RESERVATION_CONFLICT);
        nev = 0;
        assert_int_equal(out(&B, CORE_PR_CLEAR, 0, 0xb, 0), CORE_OK);
        assert_int_equal(pr.type, CORE_PR_NONE);
        assert_null(core_pr_find_reg(&pr, &A));
        assert_null(core_pr_find_reg(&pr, &B));
        assert_int_equal(pr.generation, g + 1);
        assert_int_equal(events_for(&A), CORE_PR_EV_RES_PREEMPTED);
        assert_int_equal(events_for(&B), 0);
}

static void test_preempt_registrations(void **state)
{
        (void)state;
        reg(&A, 0xa);
        reg(&B, 0xb);
        uint32_t g = pr.generation;
        /* No reservation, SARK 0: invalid parameter. */
        assert_int_equal(out(&B, CORE_PR_PREEMPT, CORE_PR_EXCLUSIVE_ACCESS, 0xb, 0),
                         CORE_E_INVALID_PARAM);
        /* No registration with that key: conflict. */
        assert_int_equal(out(&B, CORE_PR_PREEMPT, CORE_PR_EXCLUSIVE_ACCESS, 0xb, 0x77),
                         CORE_E_RESERVATION_CONFLICT);
        nev = 0;
        /* libiscsi ProutPreempt.RemoveRegistration. */
        assert_int_equal(out(&B, CORE_PR_PREEMPT, CORE_PR_EXCLUSIVE_ACCESS, 0xb, 0xa), CORE_OK);
        assert_null(core_pr_find_reg(&pr, &A));
        assert_non_null(core_pr_find_reg(&pr, &B));
        assert_int_equal(pr.type, CORE_PR_NONE); /* no reservation was created */
        assert_int_equal(pr.generation, g + 1);
        assert_int_equal(events_for(&A), CORE_PR_EV_REGS_PREEMPTED);
        /* Without a reservation to take over, TYPE is not looked at. */
        reg(&A, 0xa);
        assert_int_equal(out(&B, CORE_PR_PREEMPT, 0, 0xb, 0xa), CORE_OK);
        assert_null(core_pr_find_reg(&pr, &A));
}

static void test_preempt_reservation(void **state)
{
        (void)state;
        reg(&A, 0xa);
        reg(&B, 0xb);
        reg(&C, 0xc);
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_WRITE_EXCLUSIVE, 0xa, 0), CORE_OK);
        uint32_t g = pr.generation;
        nev = 0;
        /* B preempts the holder, abort flavour, with a new type. */
        assert_int_equal(out(&B, CORE_PR_PREEMPT_ABORT, CORE_PR_EXCLUSIVE_ACCESS, 0xb, 0xa),
                         CORE_OK);
        assert_true(core_pr_is_holder(&pr, &B));
        assert_int_equal(pr.type, CORE_PR_EXCLUSIVE_ACCESS);
        assert_null(core_pr_find_reg(&pr, &A));
        assert_int_equal(pr.generation, g + 1);
        assert_int_equal(events_for(&A), CORE_PR_EV_REGS_PREEMPTED | CORE_PR_EV_ABORT);
        /* Type changed: the remaining registrants learn the reservation went. */
        assert_int_equal(events_for(&C), CORE_PR_EV_RES_RELEASED);
        assert_int_equal(events_for(&B), 0);

        /* Preempting a non-holder key leaves the reservation alone. */
        nev = 0;
        assert_int_equal(out(&B, CORE_PR_PREEMPT, CORE_PR_EXCLUSIVE_ACCESS, 0xb, 0xc), CORE_OK);
        assert_null(core_pr_find_reg(&pr, &C));
        assert_true(core_pr_is_holder(&pr, &B));
        assert_int_equal(events_for(&C), CORE_PR_EV_REGS_PREEMPTED);
        /* With a reservation and SARK 0 (not all-registrants): invalid parameter. */
        assert_int_equal(out(&B, CORE_PR_PREEMPT, CORE_PR_EXCLUSIVE_ACCESS, 0xb, 0),
                         CORE_E_INVALID_PARAM);
        /* Invalid type: CDB field. */
        assert_int_equal(out(&B, CORE_PR_PREEMPT, 4, 0xb, 0xb), CORE_E_INVALID_FIELD);

        /* All registrants + SARK 0: everyone else is removed, the preemptor holds a new one. */
        core_pr_init(&pr);
        reg(&A, 0xa);
        reg(&B, 0xb);
        reg(&C, 0xc);
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_EA_ALL_REGS, 0xa, 0), CORE_OK);
        nev = 0;
        assert_int_equal(out(&C, CORE_PR_PREEMPT, CORE_PR_WRITE_EXCLUSIVE, 0xc, 0), CORE_OK);
        assert_int_equal(pr.type, CORE_PR_WRITE_EXCLUSIVE);
        assert_true(core_pr_is_holder(&pr, &C));
        assert_null(core_pr_find_reg(&pr, &A));
        assert_null(core_pr_find_reg(&pr, &B));
        assert_true(events_for(&A) & CORE_PR_EV_REGS_PREEMPTED);
}

static void test_register_and_move(void **state)
{
        (void)state;
        reg(&A, 0xa);
        struct core_pr_cmd c = {
            .action = CORE_PR_REGISTER_MOVE, .key = 0xa, .sa_key = 0xb, .dest = &B};
        /* Not a holder: conflict. */
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_E_RESERVATION_CONFLICT);
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_EXCLUSIVE_ACCESS, 0xa, 0), CORE_OK);
        /* Destination = self: invalid. */
        c.dest = &A;
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_E_INVALID_PARAM);
        c.dest = &B;
        c.sa_key = 0;
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_E_INVALID_PARAM);
        c.sa_key = 0xb;
        c.unreg = true;
        uint32_t g = pr.generation;
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_OK);
        assert_true(core_pr_is_holder(&pr, &B));
        assert_int_equal(core_pr_find_reg(&pr, &B)->key, 0xb);
        assert_null(core_pr_find_reg(&pr, &A));
        assert_int_equal(pr.type, CORE_PR_EXCLUSIVE_ACCESS);
        assert_int_equal(pr.generation, g + 1);
}

static void test_spec_i_pt_rejected(void **state)
{
        (void)state;
        struct core_pr_cmd c = {.action = CORE_PR_REGISTER, .sa_key = 1, .spec_i_pt = true};
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_E_INVALID_PARAM);
        assert_int_equal(c.bad_field, CORE_PR_F_SPEC_I_PT);
        assert_null(core_pr_find_reg(&pr, &A));
}

static void test_legacy(void **state)
{
        (void)state;
        assert_int_equal(core_pr_legacy_reserve(&pr, &A), CORE_OK);
        assert_int_equal(core_pr_legacy_reserve(&pr, &A), CORE_OK); /* again by the holder */
        assert_int_equal(core_pr_legacy_reserve(&pr, &B), CORE_E_RESERVATION_CONFLICT);
        assert_true(core_pr_any_reservation(&pr));
        assert_true(core_pr_conflict(&pr, &B, true, false));
        assert_false(core_pr_conflict(&pr, &A, true, true));
        /* Persistent reservation commands conflict while a RESERVE(6) is held. */
        assert_int_equal(out(&A, CORE_PR_REGISTER, 0, 0, 1), CORE_E_RESERVATION_CONFLICT);
        /* Release by another nexus: no-op. */
        assert_int_equal(core_pr_legacy_release(&pr, &B), CORE_OK);
        assert_true(pr.legacy_reserved);
        assert_int_equal(core_pr_legacy_release(&pr, &A), CORE_OK);
        assert_false(pr.legacy_reserved);
        /* Nexus loss drops it. */
        assert_int_equal(core_pr_legacy_reserve(&pr, &B), CORE_OK);
        core_pr_legacy_drop(&pr, &A);
        assert_true(pr.legacy_reserved);
        core_pr_legacy_drop(&pr, &B);
        assert_false(pr.legacy_reserved);

        /* With registrations: RESERVE(6) conflicts, except for the holder (SPC-5 5.14.3). */
        reg(&A, 0xa);
        assert_int_equal(core_pr_legacy_reserve(&pr, &A), CORE_E_RESERVATION_CONFLICT);
        assert_int_equal(out(&A, CORE_PR_RESERVE, CORE_PR_WRITE_EXCLUSIVE, 0xa, 0), CORE_OK);
        assert_int_equal(core_pr_legacy_reserve(&pr, &A), CORE_OK);
        assert_false(pr.legacy_reserved);
        assert_int_equal(core_pr_legacy_reserve(&pr, &B), CORE_E_RESERVATION_CONFLICT);
        assert_int_equal(core_pr_legacy_release(&pr, &B), CORE_E_RESERVATION_CONFLICT);
}

static void test_json_round_trip(void **state)
{
        (void)state;
        /* APTPL clear: nothing but the flag is kept. */
        reg(&A, 0xa);
        json_t *j = core_pr_to_json(&pr);
        assert_non_null(j);
        struct core_pr back;
        assert_int_equal(core_pr_from_json(&back, j), 0);
        json_decref(j);
        assert_null(core_pr_find_reg(&back, &A));
        assert_int_equal(back.holder, -1);

        /* APTPL set: registrations and the reservation survive. */
        struct core_pr_cmd c = {.action = CORE_PR_REGISTER_IGNORE,
                                .sa_key = 0xfedcba9876543210ull,
                                .aptpl = true,
                                .all_tg_pt = true};
        assert_int_equal(core_pr_out(&pr, &B, &c), CORE_OK);
        assert_true(c.save);
        B.transport_id_len = 4;
        memcpy(B.transport_id, "\x45\x00\x00\x00", 4);
        assert_int_equal(out(&B, CORE_PR_RESERVE, CORE_PR_EA_REGS_ONLY, 0xfedcba9876543210ull, 0),
                         CORE_OK);
        j = core_pr_to_json(&pr);
        assert_non_null(j);
        assert_int_equal(core_pr_from_json(&back, j), 0);
        json_decref(j);
        assert_true(back.aptpl);
        assert_int_equal(back.generation, pr.generation);
        assert_int_equal(back.type, CORE_PR_EA_REGS_ONLY);
        assert_true(core_pr_is_holder(&back, &B));
        const struct core_pr_reg *r = core_pr_find_reg(&back, &B);
        assert_non_null(r);
        assert_int_equal(r->key, 0xfedcba9876543210ull);
        assert_true(r->all_tg_pt);
        assert_int_equal(core_pr_find_reg(&back, &A)->key, 0xa);
        assert_false(core_pr_is_holder(&back, &A));

        /* Clearing APTPL asks for one more save. */
        c = (struct core_pr_cmd){.action = CORE_PR_REGISTER, .key = 0xa, .sa_key = 0xa};
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_OK);
        assert_true(c.save);
        assert_false(pr.aptpl);

        /* Malformed input is refused and leaves an empty state. */
        const char *bad[] = {
            "[]",
            "{\"aptpl\": 1}",
            "{\"aptpl\": true}",
            "{\"aptpl\": true, \"generation\": 1, \"type\": 2, \"scope\": 0, \"regs\": []}",
            "{\"aptpl\": true, \"generation\": 1, \"type\": 1, \"scope\": 0, \"regs\": []}",
            "{\"aptpl\": true, \"generation\": 1, \"type\": 0, \"scope\": 0, \"regs\": [{\"key\": "
            "\"zz\", \"initiator\": \"x\", \"target\": \"y\", \"rel_tgt_port\": 1, \"tid\": "
            "\"\"}]}",
            "{\"aptpl\": true, \"generation\": 1, \"type\": 0, \"scope\": 0, \"regs\": [{\"key\": "
            "\"0000000000000001\", \"initiator\": \"x\", \"target\": \"y\", \"rel_tgt_port\": 1, "
            "\"tid\": \"abc\"}]}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                json_error_t err;
                json_t *b = json_loads(bad[i], 0, &err);
                assert_non_null(b);
                assert_int_equal(core_pr_from_json(&back, b), -EINVAL);
                assert_int_equal(back.type, CORE_PR_NONE);
                assert_false(back.aptpl);
                json_decref(b);
        }
}

static void test_nvme_register_flags(void **state)
{
        (void)state;
        struct core_pr_cmd c = {.action = CORE_PR_REGISTER, .sa_key = 5, .registered_only = true};
        /* Unregister/Replace of an unregistered host: conflict, even with IEKEY. */
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_E_RESERVATION_CONFLICT);
        c.action = CORE_PR_REGISTER_IGNORE;
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_E_RESERVATION_CONFLICT);
        /* Register: new, then again with the same key (no change), then another key. */
        c = (struct core_pr_cmd){.action = CORE_PR_REGISTER, .sa_key = 5, .register_new = true};
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_OK);
        uint32_t gen = pr.generation;
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_OK);
        assert_int_equal(pr.generation, gen);
        c.sa_key = 6;
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_E_RESERVATION_CONFLICT);
        /* Replace keeps APTPL when asked to (CPTPL 00b). */
        pr.aptpl = true;
        c = (struct core_pr_cmd){.action = CORE_PR_REGISTER,
                                 .key = 5,
                                 .sa_key = 7,
                                 .registered_only = true,
                                 .aptpl_keep = true};
        assert_int_equal(core_pr_out(&pr, &A, &c), CORE_OK);
        assert_true(pr.aptpl);
        assert_int_equal(core_pr_find_reg(&pr, &A)->key, 7);
}

static struct ev bus[16];
static unsigned nbus;
static void on_bus(const struct core_ns_event *ev, void *arg)
{
        (void)arg;
        if (ev->type != CORE_NS_EV_RESERVATION || nbus >= 16)
                return;
        snprintf(bus[nbus].ini, sizeof(bus[nbus].ini), "%s", ev->pr_reg->nexus.initiator);
        bus[nbus].events = ev->pr_events;
        nbus++;
}

static unsigned aborts[2];
static void on_abort(struct scsi_nexus *nx, uint64_t lun)
{
        (void)nx;
        if (lun < 2)
                aborts[lun]++;
}

static void test_events_through_core(void **state)
{
        (void)state;
        char dir[] = "/tmp/slate-test-pr-XXXXXX", err[128];
        assert_non_null(mkdtemp(dir));
        core_set_state_dir(dir);
        struct core_ns *ns;
        struct core_ns_params p = {
            .name = "prev", .backend = "mem", .size_bytes = 1 << 20, .block_size = 512};
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        assert_int_equal(core_ns_listen(on_bus, NULL), 0);

        /* Two target ports map the namespace (LUN 0 and LUN 1); B is logged in to both. */
        static struct scsi_target t1, t2;
        static struct scsi_nexus b1, b2, a1;
        scsi_target_init(&t1, "iqn.t", 1);
        scsi_target_init(&t2, "iqn.t2", 2);
        assert_int_equal(scsi_target_map_lun(&t1, 0, ns), 0);
        assert_int_equal(scsi_target_map_lun(&t2, 1, ns), 0);
        scsi_nexus_init(&a1, &t1, A.initiator, A.target, NULL, 0);
        scsi_nexus_init(&b1, &t1, B.initiator, B.target, NULL, 0);
        scsi_nexus_init(&b2, &t2, B.initiator, "iqn.t2,t,0x2", NULL, 0);
        scsi_nexus_set_abort(&b1, on_abort);
        scsi_nexus_set_abort(&b2, on_abort);
        atomic_store(&b1.ua[0], 0);
        atomic_store(&b2.ua[1], 0);

        /* B registers for all target ports and reserves WE; A registers. */
        struct core_pr_cmd c = {.action = CORE_PR_REGISTER, .sa_key = 0xb, .all_tg_pt = true};
        assert_int_equal(core_ns_pr_out(ns, &B, &c, &b1), CORE_OK);
        c = (struct core_pr_cmd){
            .action = CORE_PR_RESERVE, .key = 0xb, .type = CORE_PR_WRITE_EXCLUSIVE};
        assert_int_equal(core_ns_pr_out(ns, &B, &c, &b1), CORE_OK);
        assert_true(core_ns_pr_conflict(ns, &A, false, true));
        assert_false(core_ns_pr_conflict(ns, &A, true, false));
        assert_false(core_ns_pr_conflict(ns, &B, false, true));
        assert_false(core_ns_pr_conflict(ns, NULL, false, true)); /* the core's own I/O */
        c = (struct core_pr_cmd){.action = CORE_PR_REGISTER, .sa_key = 0xa};
        assert_int_equal(core_ns_pr_out(ns, &A, &c, &a1), CORE_OK);
        assert_int_equal(nbus, 0);

        /* A preempts and aborts B: one event for B, told on both ports, tasks aborted on both. */
        c = (struct core_pr_cmd){.action = CORE_PR_PREEMPT_ABORT,
                                 .key = 0xa,
                                 .sa_key = 0xb,
                                 .type = CORE_PR_EXCLUSIVE_ACCESS};
        assert_int_equal(core_ns_pr_out(ns, &A, &c, &a1), CORE_OK);
        assert_int_equal(nbus, 1);
        assert_string_equal(bus[0].ini, B.initiator);
        assert_true(bus[0].events & CORE_PR_EV_REGS_PREEMPTED);
        assert_true(bus[0].events & CORE_PR_EV_ABORT);
        assert_true(atomic_load(&b1.ua[0]) & (1u << SCSI_UA_REGISTRATIONS_PREEMPTED));
        assert_true(atomic_load(&b2.ua[1]) & (1u << SCSI_UA_REGISTRATIONS_PREEMPTED));
        assert_int_equal(aborts[0], 1);
        assert_int_equal(aborts[1], 1);
        assert_true(core_ns_pr_conflict(ns, &B, true, false));

        scsi_nexus_fini(&a1);
        scsi_nexus_fini(&b1);
        scsi_nexus_fini(&b2);
        scsi_target_unmap_lun(&t1, 0);
        scsi_target_unmap_lun(&t2, 1);
        scsi_target_fini(&t1);
        scsi_target_fini(&t2);
        assert_int_equal(core_ns_delete("prev"), 0);
}

/*
 * Reservation state kept with shared storage (core_pr_shared_update): a fake
 * backend keeps the text and its version the way rbd.c's RADOS object does,
 * and can make "another gateway" store first, so the store guarded by the
 * version read loses and the core must read, apply again and retry.
 */
static char *shared_text;
static uint64_t shared_version;
static int interfere;     /* stores to lose: another gateway registers first */
static unsigned n_stores; /* stores tried */

static int fake_pr_load(struct backend *be, char **text, uint64_t *version)
{
        (void)be;
        *text = shared_text ? strdup(shared_text) : NULL;
        *version = shared_version;
        return 0;
}

/* Another gateway: registers nexus C with a new key (read, apply, store). */
static void other_gateway_registers(uint64_t key)
{
        struct core_pr o;
        core_pr_init(&o);
        if (shared_text) {
                json_t *j = json_loads(shared_text, 0, NULL);
                assert_int_equal(core_pr_from_json(&o, j), 0);
                json_decref(j);
        }
        struct core_pr_cmd c = {.action = CORE_PR_REGISTER_IGNORE, .sa_key = key};
        assert_int_equal(core_pr_out(&o, &C, &c), CORE_OK);
        json_t *j = core_pr_to_json_all(&o);
        free(shared_text);
        shared_text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        shared_version++;
}

static int fake_pr_store(struct backend *be, const char *text, uint64_t *version)
{
        (void)be;
        n_stores++;
        if (interfere) {
                interfere--;
                other_gateway_registers(0xc0 + (uint64_t)n_stores);
        }
        if (*version != shared_version)
                return -ECANCELED;
        free(shared_text);
        shared_text = strdup(text);
        *version = ++shared_version;
        return 0;
}

static void test_shared_state_retry(void **state)
{
        (void)state;
        char dir[] = "/tmp/slate-test-pr-XXXXXX", err[128];
        assert_non_null(mkdtemp(dir));
        core_set_state_dir(dir);
        struct core_ns *ns;
        struct core_ns_params p = {
            .name = "prshared", .backend = "mem", .size_bytes = 1 << 20, .block_size = 512};
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        static struct backend_ops fake;
        const struct backend_ops *real = ns->be.ops;
        fake = *real;
        fake.pr_load = fake_pr_load;
        fake.pr_store = fake_pr_store;
        ns->be.ops = &fake;
        ns->be.pr_shared = true; /* what open sets on a backend that shares the state */
        shared_text = NULL;
        shared_version = 0;

        /* A registers; another gateway registers C twice meanwhile: two lost stores, then A's. */
        interfere = 2;
        n_stores = 0;
        struct core_pr_cmd c = {.action = CORE_PR_REGISTER, .sa_key = 0xa};
        assert_int_equal(core_ns_pr_out(ns, &A, &c, NULL), CORE_OK);
        assert_int_equal(n_stores, 3);
        assert_int_equal(shared_version, 3);
        /* Both kept: C's last key (0xc2) and A's; three registrations, PRgeneration 3. */
        assert_non_null(core_pr_find_reg(&ns->pr, &A));
        assert_int_equal(core_pr_find_reg(&ns->pr, &A)->key, 0xa);
        assert_non_null(core_pr_find_reg(&ns->pr, &C));
        assert_int_equal(core_pr_find_reg(&ns->pr, &C)->key, 0xc2);
        assert_int_equal(ns->pr.generation, 3);
        assert_int_equal(ns->pr_version, 3);

        /* A reserves WE: the copy the I/O check reads has it, B's write conflicts. */
        c = (struct core_pr_cmd){
            .action = CORE_PR_RESERVE, .key = 0xa, .type = CORE_PR_WRITE_EXCLUSIVE};
        assert_int_equal(core_ns_pr_out(ns, &A, &c, NULL), CORE_OK);
        assert_true(core_ns_pr_conflict(ns, &B, false, true));

        /* Another gateway's change reaches the copy on refresh (its notify); not an older one. */
        other_gateway_registers(0xc9);
        assert_int_equal(core_ns_pr_refresh(ns), 0);
        assert_int_equal(core_pr_find_reg(&ns->pr, &C)->key, 0xc9);
        uint64_t v = shared_version;
        shared_version = 1; /* a stale read (racing a newer one) changes nothing */
        assert_int_equal(core_ns_pr_refresh(ns), 0);
        assert_int_equal(ns->pr_version, v);
        assert_int_equal(core_pr_find_reg(&ns->pr, &C)->key, 0xc9);
        shared_version = v;

        /* A RESERVE judged against the stored state: B (unregistered) conflicts, no store. */
        n_stores = 0;
        c = (struct core_pr_cmd){.action = CORE_PR_REGISTER, .sa_key = 0xb};
        assert_int_equal(core_ns_pr_out(ns, &B, &c, NULL), CORE_OK);
        c = (struct core_pr_cmd){
            .action = CORE_PR_RESERVE, .key = 0xb, .type = CORE_PR_WRITE_EXCLUSIVE};
        assert_int_equal(core_ns_pr_out(ns, &B, &c, NULL), CORE_E_RESERVATION_CONFLICT);
        assert_int_equal(n_stores, 1);

        /* Losing every time: give up (a transient error), the copy keeps the stored state. */
        interfere = 1000;
        n_stores = 0;
        uint32_t gen = ns->pr.generation;
        c = (struct core_pr_cmd){.action = CORE_PR_REGISTER, .key = 0xb, .sa_key = 0xbb};
        assert_int_equal(core_ns_pr_out(ns, &B, &c, NULL), CORE_E_NO_RESOURCES);
        assert_true(n_stores >= 2);
        assert_int_equal(ns->pr.generation, gen);
        assert_int_equal(core_pr_find_reg(&ns->pr, &B)->key, 0xb);
        interfere = 0;

        /* APTPL goes through the stored state too. */
        assert_int_equal(core_ns_pr_set_aptpl(ns, true), 0);
        assert_non_null(strstr(shared_text, "\"aptpl\":true"));

        ns->be.ops = real;
        ns->be.pr_shared = false;
        free(shared_text);
        shared_text = NULL;
        assert_int_equal(core_ns_delete("prshared"), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test_setup(test_register, setup),
            cmocka_unit_test_setup(test_register_full, setup),
            cmocka_unit_test_setup(test_reserve_release, setup),
            cmocka_unit_test_setup(test_holder_unregisters, setup),
            cmocka_unit_test_setup(test_conflict_matrix, setup),
            cmocka_unit_test_setup(test_clear, setup),
            cmocka_unit_test_setup(test_preempt_registrations, setup),
            cmocka_unit_test_setup(test_preempt_reservation, setup),
            cmocka_unit_test_setup(test_register_and_move, setup),
            cmocka_unit_test_setup(test_spec_i_pt_rejected, setup),
            cmocka_unit_test_setup(test_legacy, setup),
            cmocka_unit_test_setup(test_json_round_trip, setup),
            cmocka_unit_test_setup(test_nvme_register_flags, setup),
            cmocka_unit_test_setup(test_events_through_core, setup),
            cmocka_unit_test_setup(test_shared_state_retry, setup),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
