/*
 * The target side of the iSCSI login phase (RFC 7143 6.3 and 11.12-11.13):
 * stage transitions (CSG/NSG with the T bit), request text spanning
 * several PDUs (C bit), security negotiation with AuthMethod=None,
 * operational negotiation (params.c), the login status classes, TSIH
 * assignment and session reinstatement, and the switch to full feature
 * phase.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iscsi/internal.h"
#include "rt/log.h"

static void login_tx_done(struct iscsi_conn *c, struct iscsi_tx *tx)
{
        (void)tx;
        if (c->login.fail_close && c->state != ISCSI_CONN_CLOSING)
                iscsi_conn_close(c, "login failed");
}

static void login_send(struct iscsi_conn *c, uint8_t flags, uint16_t tsih, uint16_t status)
{
        struct iscsi_login_state *L = &c->login;
        const struct iscsi_login_req *req = (const struct iscsi_login_req *)c->bhs;
        struct iscsi_tx *tx = &c->login_tx;
        struct iscsi_login_rsp *r = (struct iscsi_login_rsp *)tx->hdr;

        memset(r, 0, sizeof(*r));
        r->opcode = ISCSI_OP_LOGIN_RSP;
        r->flags = flags;
        r->version_max = 0;
        r->version_active = 0;
        memcpy(r->isid, L->isid, 6);
        put_be16(&r->tsih, tsih);
        put_be32(&r->itt, get_be32(&req->itt));
        put_be32(&r->statsn, c->statsn++);
        uint32_t exp = c->sess ? c->sess->exp_cmdsn : get_be32(&req->cmdsn);
        uint32_t max = c->sess ? c->sess->max_cmdsn : exp;
        put_be32(&r->exp_cmdsn, exp);
        put_be32(&r->max_cmdsn, max);
        r->status_class = (uint8_t)(status >> 8);
        r->status_detail = (uint8_t)status;
        tx->data = status ? NULL : (const uint8_t *)c->text_out.buf;
        tx->data_len = status ? 0 : c->text_out.len;
        tx->done = login_tx_done;
        tx->arg = NULL;
        iscsi_tx_seal(c, tx);
        iscsi_conn_enqueue(c, tx);
}

static void login_fail(struct iscsi_conn *c, uint16_t status)
{
        struct iscsi_login_state *L = &c->login;
        L->fail_close = true;
        c->rx_state = ISCSI_RX_STOP;
        LOG_INFO(ISCSI_MOD, "%s: login rejected, status 0x%04x (initiator %s, target %s)", c->peer,
                 status, L->neg.initiator_name[0] ? L->neg.initiator_name : "?",
                 L->neg.target_name[0] ? L->neg.target_name : "-");
        c->text_out.len = 0;
        login_send(c, 0, 0, status);
}

/* Checks once the first request's keys are known (RFC 7143 6.3.1). */
static uint16_t login_first_checks(struct iscsi_conn *c)
{
        struct iscsi_login_state *L = &c->login;
        struct iscsi_neg *n = &L->neg;
        if (!n->have_initiator)
                return ISCSI_LOGIN_MISSING_PARAMETER;
        if (n->type == ISCSI_SESS_NONE)
                n->type = ISCSI_SESS_NORMAL;
        if (n->type == ISCSI_SESS_NORMAL) {
                if (!n->have_target)
                        return ISCSI_LOGIN_MISSING_PARAMETER;
                L->tgt = iscsi_tgt_get(n->target_name);
                if (!L->tgt)
                        return ISCSI_LOGIN_NOT_FOUND;
                /* RFC 7143 11.13.5: 0202h, the initiator is not allowed access to the target. */
                if (!iscsi_acl_admits(L->tgt, n->initiator_name)) {
                        /* A peer can send these as fast as it likes: rate-limited (rt/log.h). */
                        static struct rt_log_ratelimit rl =
                            RT_LOG_RATELIMIT_INIT("logins refused by an ACL");
                        if (rt_log_ratelimit(&rl, ISCSI_MOD))
                                LOG_WARN(ISCSI_MOD,
                                         "%s: initiator %s is not in the ACL of target %s", c->peer,
                                         n->initiator_name, n->target_name);
                        return ISCSI_LOGIN_AUTHORIZATION_FAILURE;
                }
        }
        return 0;
}

static uint16_t auth_fail(struct iscsi_conn *c, const char *why)
{
        const struct iscsi_neg *n = &c->login.neg;
        LOG_WARN(ISCSI_MOD, "%s: CHAP authentication of initiator %s (CHAP_N '%s') failed: %s",
                 c->peer, n->initiator_name[0] ? n->initiator_name : "?", n->chap_n, why);
        return ISCSI_LOGIN_AUTH_FAILED;
}

/*
 * The security stage (RFC 7143 12.1.3): answer AuthMethod with what the
 * target (or, for discovery, the discovery credentials) requires, then run
 * CHAP: the initiator's CHAP_A picks the digest, we send CHAP_I and CHAP_C,
 * the initiator answers CHAP_N and CHAP_R (and, for mutual CHAP, CHAP_I and
 * CHAP_C of its own, which we answer with CHAP_N and CHAP_R).  Returns 0 or
 * the login status to fail with.
 */
static uint16_t login_auth(struct iscsi_conn *c)
{
        struct iscsi_login_state *L = &c->login;
        struct iscsi_neg *n = &L->neg;
        bool required = L->auth.user[0] != 0;
        if (n->chap_too_long)
                return auth_fail(c, "a CHAP value too long or empty");
        if (n->auth_offered && !L->auth_answered) {
                L->auth_answered = true;
                if (required) {
                        if (!n->offer_chap)
                                return auth_fail(c, "the target requires CHAP, not offered");
                        L->chap = ISCSI_CHAP_WAIT_A;
                        return iscsi_text_add(n->out, "AuthMethod", "CHAP")
                                   ? ISCSI_LOGIN_OUT_OF_RESOURCES
                                   : 0;
                }
                if (!n->offer_none) /* only CHAP offered, and we hold no secret for it */
                        return ISCSI_LOGIN_AUTH_FAILED;
                n->auth_none_ok = true;
                return iscsi_text_add(n->out, "AuthMethod", "None") ? ISCSI_LOGIN_OUT_OF_RESOURCES
                                                                    : 0;
        }
        if (L->chap == ISCSI_CHAP_OFF || L->chap == ISCSI_CHAP_DONE) {
                if (n->chap_a[0] || n->chap_n[0] || n->chap_r[0] || n->chap_c[0] || n->chap_i[0])
                        return auth_fail(c, "CHAP keys outside a CHAP exchange");
                return 0;
        }
        if (L->chap == ISCSI_CHAP_WAIT_A) {
                if (!n->chap_a[0])
                        return n->chap_n[0] || n->chap_r[0] ? auth_fail(c, "CHAP_R before CHAP_A")
                                                            : 0;
                L->chap_alg = iscsi_chap_pick(n->chap_a);
                if (L->chap_alg < 0)
                        return auth_fail(c, "no CHAP_A algorithm we support (5, 6, 7, 8)");
                if (iscsi_chap_random(&L->chap_id, 1) ||
                    iscsi_chap_random(L->chap_c, sizeof(L->chap_c)))
                        return ISCSI_LOGIN_TARGET_ERROR;
                char a[8], i[8], ch[2 * ISCSI_CHAP_CHALLENGE + 4];
                snprintf(a, sizeof(a), "%d", L->chap_alg);
                snprintf(i, sizeof(i), "%u", L->chap_id);
                iscsi_chap_encode(L->chap_c, sizeof(L->chap_c), ch, sizeof(ch));
                if (iscsi_text_add(n->out, "CHAP_A", a) || iscsi_text_add(n->out, "CHAP_I", i) ||
                    iscsi_text_add(n->out, "CHAP_C", ch))
                        return ISCSI_LOGIN_OUT_OF_RESOURCES;
                L->chap = ISCSI_CHAP_WAIT_NR;
                return 0;
        }
        /* ISCSI_CHAP_WAIT_NR */
        if (!n->chap_n[0] || !n->chap_r[0])
                return auth_fail(c, "no CHAP_N and CHAP_R after the challenge");
        if (strcmp(n->chap_n, L->auth.user) != 0)
                return auth_fail(c, "unknown CHAP_N");
        uint8_t got[ISCSI_CHAP_MAX_MD], want[ISCSI_CHAP_MAX_MD];
        unsigned wl = 0;
        int gl = iscsi_chap_decode(n->chap_r, got, sizeof(got));
        if (iscsi_chap_response(L->chap_alg, L->chap_id, L->auth.secret, L->chap_c,
                                sizeof(L->chap_c), want, &wl))
                return ISCSI_LOGIN_TARGET_ERROR;
        if (gl != (int)wl || !iscsi_chap_equal(got, want, wl))
                return auth_fail(c, "wrong CHAP_R");
        bool mutual = L->auth.mutual_user[0] != 0;
        if (n->chap_i[0] || n->chap_c[0]) {
                /* The initiator asks us to prove ourselves. */
                if (!mutual)
                        return auth_fail(c, "mutual CHAP asked, no target secret configured");
                char *end;
                unsigned long id = strtoul(n->chap_i, &end, 0);
                uint8_t chal[1024];
                int cl = iscsi_chap_decode(n->chap_c, chal, sizeof(chal));
                if (!n->chap_i[0] || *end || id > 255 || cl <= 0)
                        return auth_fail(c, "malformed CHAP_I / CHAP_C");
                if ((size_t)cl == sizeof(L->chap_c) &&
                    iscsi_chap_equal(chal, L->chap_c, (size_t)cl))
                        return auth_fail(c, "the initiator sent our own challenge back");
                if (iscsi_chap_response(L->chap_alg, (uint8_t)id, L->auth.mutual_secret, chal,
                                        (size_t)cl, want, &wl))
                        return ISCSI_LOGIN_TARGET_ERROR;
                char r[2 * ISCSI_CHAP_MAX_MD + 4];
                iscsi_chap_encode(want, wl, r, sizeof(r));
                if (iscsi_text_add(n->out, "CHAP_N", L->auth.mutual_user) ||
                    iscsi_text_add(n->out, "CHAP_R", r))
                        return ISCSI_LOGIN_OUT_OF_RESOURCES;
        }
        L->chap = ISCSI_CHAP_DONE;
        LOG_INFO(ISCSI_MOD, "%s: initiator %s authenticated by CHAP (algorithm %d%s)", c->peer,
                 n->initiator_name, L->chap_alg, n->chap_c[0] ? ", mutual" : "");
        return 0;
}

static void login_complete(struct iscsi_conn *c, uint8_t flags)
{
        struct iscsi_login_state *L = &c->login;
        struct iscsi_neg *n = &L->neg;
        if (iscsi_conn_tasks_init(c) < 0) {
                login_fail(c, ISCSI_LOGIN_OUT_OF_RESOURCES);
                return;
        }
        struct iscsi_session *s = iscsi_session_create(c, n, L->isid, L->tgt);
        if (!s) {
                login_fail(c, ISCSI_LOGIN_OUT_OF_RESOURCES);
                return;
        }
        L->tgt = NULL; /* the session owns the target reference now */
        c->sess = s;
        s->exp_cmdsn = get_be32(&((const struct iscsi_login_req *)c->bhs)->cmdsn);
        s->max_cmdsn = s->exp_cmdsn - 1;
        iscsi_conn_update_window(c);
        login_send(c, flags, s->tsih, 0);

        /* Digests and the declared lengths apply from the next PDU on. */
        c->hdigest = n->p.header_digest;
        c->ddigest = n->p.data_digest;
        c->mrdsl_out = n->p.mrdsl_initiator;
        c->mrdsl_in = n->mrdsl_declared ? ISCSI_OUR_MRDSL : ISCSI_LOGIN_MRDSL;
        if (c->mrdsl_in < ISCSI_LOGIN_MRDSL)
                c->mrdsl_in = ISCSI_LOGIN_MRDSL;
        c->state = ISCSI_CONN_FULL;
        L->final_sent = true;
        iscsi_conn_guard_full(c);
        LOG_INFO(ISCSI_MOD,
                 "%s: login ok: initiator %s, target %s, %s session, tsih %u, "
                 "digests hdr=%s data=%s, MRDSL %u/%u, burst %u/%u, immediate %s, initialR2T %s",
                 c->peer, s->initiator, s->type == ISCSI_SESS_DISCOVERY ? "-" : s->target_name,
                 s->type == ISCSI_SESS_DISCOVERY ? "discovery" : "normal", s->tsih,
                 c->hdigest ? "CRC32C" : "None", c->ddigest ? "CRC32C" : "None", c->mrdsl_out,
                 c->mrdsl_in, s->params.first_burst, s->params.max_burst,
                 s->params.immediate_data ? "Yes" : "No", s->params.initial_r2t ? "Yes" : "No");
}

void iscsi_login_rx(struct iscsi_conn *c)
{
        struct iscsi_login_state *L = &c->login;
        const struct iscsi_login_req *req = (const struct iscsi_login_req *)c->bhs;
        uint8_t flags = req->flags;
        bool transit = flags & ISCSI_LOGIN_TRANSIT;
        bool cont = flags & ISCSI_LOGIN_CONTINUE;
        int csg = (flags & ISCSI_LOGIN_CSG_MASK) >> ISCSI_LOGIN_CSG_SHIFT;
        int nsg = flags & ISCSI_LOGIN_NSG_MASK;

        if (c->login_tx.queued) {
                /* A new request before our previous answer left: not a valid exchange. */
                iscsi_conn_warn(c, "login request while a login response is pending");
                iscsi_conn_close(c, "protocol error");
                return;
        }
        if (!L->started) {
                L->started = true;
                memcpy(L->isid, req->isid, 6);
                L->tsih = get_be16(&req->tsih);
                L->cid = get_be16(&req->cid);
                L->cur_stage = csg;
                c->cid = L->cid;
                c->statsn = get_be32(&req->exp_statsn);
                iscsi_params_defaults(&L->neg.p);
                L->neg.out = &c->text_out;
                if (req->version_min > 0) {
                        login_fail(c, ISCSI_LOGIN_UNSUPPORTED_VERSION);
                        return;
                }
                if (L->tsih) {
                        /* We run one connection per session: no connection joins an existing one.
                         */
                        login_fail(c, iscsi_session_exists(L->tsih)
                                          ? ISCSI_LOGIN_TOO_MANY_CONNECTIONS
                                          : ISCSI_LOGIN_SESSION_NOT_EXIST);
                        return;
                }
        } else if (memcmp(L->isid, req->isid, 6) || L->tsih != get_be16(&req->tsih) ||
                   L->cid != get_be16(&req->cid)) {
                login_fail(c, ISCSI_LOGIN_INITIATOR_ERROR);
                return;
        }

        c->text_out.len = 0;
        if (cont) {
                /* Request text continues in the next PDU: acknowledge with an empty response. */
                if (transit) {
                        login_fail(c, ISCSI_LOGIN_INITIATOR_ERROR);
                        return;
                }
                login_send(c, (uint8_t)(csg << ISCSI_LOGIN_CSG_SHIFT), 0, 0);
                return;
        }

        if (csg == 2 || csg == 3 || csg < L->cur_stage || (transit && (nsg == 2 || nsg <= csg))) {
                login_fail(c, ISCSI_LOGIN_INITIATOR_ERROR);
                return;
        }
        L->cur_stage = csg;
        L->neg.stage = csg;
        L->neg.chap_a[0] = L->neg.chap_n[0] = L->neg.chap_i[0] = 0;
        L->neg.chap_r[0] = L->neg.chap_c[0] = 0;
        L->neg.chap_too_long = false;

        bool first = !L->neg.have_initiator && !L->neg.have_type;
        int rc = iscsi_neg_text(&L->neg, c->text_in, c->text_in_len);
        c->text_in_len = 0;
        if (rc == -ENOSPC) {
                login_fail(c, ISCSI_LOGIN_OUT_OF_RESOURCES);
                return;
        }
        if (rc) {
                login_fail(c, L->neg.status ? L->neg.status : ISCSI_LOGIN_INITIATOR_ERROR);
                return;
        }
        if (first) {
                uint16_t st = login_first_checks(c);
                if (st) {
                        login_fail(c, st);
                        return;
                }
                /* The first response carries the portal group tag (RFC 7143 13.9). */
                if (L->neg.type == ISCSI_SESS_NORMAL) {
                        char tag[8];
                        snprintf(tag, sizeof(tag), "%u", ISCSI_DEFAULT_TPGT);
                        if (iscsi_text_add(&c->text_out, "TargetPortalGroupTag", tag)) {
                                login_fail(c, ISCSI_LOGIN_OUT_OF_RESOURCES);
                                return;
                        }
                }
        }
        if (first)
                iscsi_auth_get(L->tgt, L->neg.initiator_name,
                               &L->auth); /* NULL target: the discovery credentials */
        if (csg == ISCSI_STAGE_SECURITY) {
                uint16_t st = login_auth(c);
                if (st) {
                        login_fail(c, st);
                        return;
                }
        }
        /* Leaving the security stage needs the authentication done; skipping it, no CHAP required.
         */
        bool authed = L->chap == ISCSI_CHAP_DONE ||
                      (!L->auth.user[0] && (!L->neg.auth_offered || L->neg.auth_none_ok));
        if (csg == ISCSI_STAGE_SECURITY && transit && !authed) {
                if (L->chap == ISCSI_CHAP_WAIT_A || L->chap == ISCSI_CHAP_WAIT_NR) {
                        transit = false; /* CHAP goes on: we answer T=0 (RFC 7143 6.3) */
                } else {
                        login_fail(c, L->auth.user[0]
                                          ? auth_fail(c, "left the security stage unauthenticated")
                                          : ISCSI_LOGIN_AUTH_FAILED);
                        return;
                }
        }
        if (csg == ISCSI_STAGE_OPERATIONAL && L->auth.user[0] && L->chap != ISCSI_CHAP_DONE) {
                /* Straight to the operational stage: no security stage, no CHAP. */
                login_fail(c, auth_fail(c, "the target requires CHAP, the login skipped it"));
                return;
        }
        if (csg == ISCSI_STAGE_OPERATIONAL || (transit && nsg == ISCSI_STAGE_FULL)) {
                if (iscsi_neg_declare(&L->neg)) {
                        login_fail(c, ISCSI_LOGIN_OUT_OF_RESOURCES);
                        return;
                }
        }
        if (c->text_out.len > ISCSI_LOGIN_MRDSL) {
                login_fail(c, ISCSI_LOGIN_OUT_OF_RESOURCES);
                return;
        }

        uint8_t rflags = (uint8_t)(csg << ISCSI_LOGIN_CSG_SHIFT);
        if (!transit) {
                login_send(c, rflags, 0, 0);
                return;
        }
        rflags |= ISCSI_LOGIN_TRANSIT | (uint8_t)nsg;
        if (nsg == ISCSI_STAGE_FULL) {
                login_complete(c, rflags);
                return;
        }
        L->cur_stage = nsg;
        login_send(c, rflags, 0, 0);
}
