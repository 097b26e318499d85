/*
 * iSCSI text keys (RFC 7143 6 and 13): splitting key=value data segments,
 * and the target's side of login key negotiation -- list keys (digests,
 * AuthMethod), Boolean AND/OR keys, numerical min/max keys, declarative
 * keys, NotUnderstood for unknown keys and Reject for bad values.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iscsi/internal.h"

void iscsi_params_defaults(struct iscsi_params *p)
{
        /* RFC 7143 13: defaults that hold when a key is not negotiated. */
        *p = (struct iscsi_params){
            .header_digest = false,
            .data_digest = false,
            .mrdsl_initiator = 8192,
            .mrdsl_target = 8192,
            .immediate_data = true,
            .initial_r2t = true,
            .first_burst = 65536,
            .max_burst = 262144,
            .max_outstanding_r2t = 1,
            .max_connections = 1,
            .time2wait = 2,
            .time2retain = 20,
            .erl = 0,
            .data_pdu_in_order = true,
            .data_seq_in_order = true,
        };
}

int iscsi_text_add(struct iscsi_textbuf *tb, const char *key, const char *val)
{
        size_t kl = strlen(key), vl = strlen(val);
        size_t need = kl + 1 + vl + 1;
        if (need > tb->cap - tb->len)
                return -ENOSPC;
        memcpy(tb->buf + tb->len, key, kl);
        tb->buf[tb->len + kl] = '=';
        memcpy(tb->buf + tb->len + kl + 1, val, vl);
        tb->buf[tb->len + kl + 1 + vl] = '\0';
        tb->len += (uint32_t)need;
        return 0;
}

int iscsi_text_parse(const char *buf, size_t len,
                     int (*cb)(void *arg, const char *key, const char *val), void *arg)
{
        char key[ISCSI_KEY_MAX + 1];
        static __thread char val[ISCSI_VALUE_MAX + 1];
        size_t pos = 0;

        while (pos < len) {
                const char *p = buf + pos;
                size_t rem = len - pos;
                const char *end = memchr(p, '\0', rem);
                size_t pl = end ? (size_t)(end - p) : rem;
                pos += pl + 1;
                if (pl == 0)
                        continue; /* padding NULs */
                const char *eq = memchr(p, '=', pl);
                if (!eq)
                        return -EINVAL;
                size_t kl = (size_t)(eq - p), vl = pl - kl - 1;
                if (kl == 0 || kl > ISCSI_KEY_MAX || vl > ISCSI_VALUE_MAX)
                        return -EINVAL;
                memcpy(key, p, kl);
                key[kl] = '\0';
                memcpy(val, eq + 1, vl);
                val[vl] = '\0';
                int rc = cb(arg, key, val);
                if (rc)
                        return rc;
        }
        return 0;
}

/* Decimal or 0x-hex number in [lo, hi]; false if not. */
static bool parse_num(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
        if (!*s || *s == '-' || *s == '+' || *s == ' ')
                return false;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 0);
        if (errno || *end || v < lo || v > hi)
                return false;
        /* Reject octal-looking leading zeros only for long strings; strtoull(0) handles "0". */
        *out = v;
        return true;
}

static int parse_bool(const char *s, bool *out)
{
        if (!strcmp(s, "Yes"))
                *out = true;
        else if (!strcmp(s, "No"))
                *out = false;
        else
                return -1;
        return 0;
}

static int answer(struct iscsi_neg *n, const char *key, const char *val)
{
        return iscsi_text_add(n->out, key, val);
}

static int answer_num(struct iscsi_neg *n, const char *key, uint64_t v)
{
        char b[24];
        snprintf(b, sizeof(b), "%llu", (unsigned long long)v);
        return answer(n, key, b);
}

/* Digest list: the first of the initiator's values we support. */
static int neg_digest(struct iscsi_neg *n, const char *key, const char *val, bool *res)
{
        char tmp[ISCSI_VALUE_MAX + 1];
        snprintf(tmp, sizeof(tmp), "%s", val);
        char *save = NULL;
        for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (!strcmp(t, "None")) {
                        *res = false;
                        return answer(n, key, "None");
                }
                if (!strcmp(t, "CRC32C")) {
                        *res = true;
                        return answer(n, key, "CRC32C");
                }
        }
        return answer(n, key, "Reject");
}

enum key_kind { K_MIN, K_MAX };

struct num_key {
        const char *name;
        uint64_t lo, hi, ours;
        enum key_kind kind;
        size_t off; /* into struct iscsi_params */
};

#define PO(f) offsetof(struct iscsi_params, f)
static const struct num_key num_keys[] = {
    {"MaxBurstLength", 512, 16777215, ISCSI_OUR_MAX_BURST, K_MIN, PO(max_burst)},
    {"FirstBurstLength", 512, 16777215, ISCSI_OUR_FIRST_BURST, K_MIN, PO(first_burst)},
    {"MaxOutstandingR2T", 1, 65535, 1, K_MIN, PO(max_outstanding_r2t)},
    {"MaxConnections", 1, 65535, 1, K_MIN, PO(max_connections)},
    {"DefaultTime2Wait", 0, 3600, 2, K_MAX, PO(time2wait)},
    {"DefaultTime2Retain", 0, 3600, 20, K_MIN, PO(time2retain)},
    {"ErrorRecoveryLevel", 0, 2, 0, K_MIN, PO(erl)},
};

static bool is_session_wide_op_key(const char *key)
{
        /* Keys that are irrelevant in a discovery session (RFC 7143 13). */
        static const char *const k[] = {
            "MaxBurstLength", "FirstBurstLength", "MaxOutstandingR2T",   "InitialR2T",
            "ImmediateData",  "DataPDUInOrder",   "DataSequenceInOrder", "MaxConnections"};
        for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
                if (!strcmp(key, k[i]))
                        return true;
        return false;
}

int iscsi_neg_declare(struct iscsi_neg *n)
{
        if (n->mrdsl_declared)
                return 0;
        n->mrdsl_declared = true;
        n->p.mrdsl_target = ISCSI_OUR_MRDSL;
        return answer_num(n, "MaxRecvDataSegmentLength", ISCSI_OUR_MRDSL);
}

int iscsi_neg_key(struct iscsi_neg *n, const char *key, const char *val)
{
        uint64_t v;
        bool b;

        /* Declarative keys from the initiator; no answer. */
        if (!strcmp(key, "InitiatorName")) {
                if (!*val || strlen(val) >= ISCSI_NAME_MAX)
                        return answer(n, key, "Reject");
                snprintf(n->initiator_name, sizeof(n->initiator_name), "%s", val);
                n->have_initiator = true;
                return 0;
        }
        if (!strcmp(key, "InitiatorAlias")) {
                snprintf(n->initiator_alias, sizeof(n->initiator_alias), "%s", val);
                return 0;
        }
        if (!strcmp(key, "TargetName")) {
                if (!*val || strlen(val) >= ISCSI_NAME_MAX)
                        return answer(n, key, "Reject");
                snprintf(n->target_name, sizeof(n->target_name), "%s", val);
                n->have_target = true;
                return 0;
        }
        if (!strcmp(key, "SessionType")) {
                if (!strcmp(val, "Normal"))
                        n->type = ISCSI_SESS_NORMAL;
                else if (!strcmp(val, "Discovery"))
                        n->type = ISCSI_SESS_DISCOVERY;
                else
                        return answer(n, key, "Reject");
                n->have_type = true;
                return 0;
        }
        if (!strcmp(key, "AuthMethod")) {
                /* Recorded; login.c answers once it knows what the target requires. */
                if (n->stage != ISCSI_STAGE_SECURITY)
                        return answer(n, key, "Irrelevant");
                char tmp[ISCSI_VALUE_MAX + 1];
                snprintf(tmp, sizeof(tmp), "%s", val);
                char *save = NULL;
                n->auth_offered = true;
                for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                        n->offer_none |= !strcmp(t, "None");
                        n->offer_chap |= !strcmp(t, "CHAP");
                }
                return 0;
        }
        if (!strncmp(key, "CHAP_", 5)) {
                /* Only in the security stage of a login; login.c checks the exchange. */
                if (n->stage != ISCSI_STAGE_SECURITY) {
                        n->status = ISCSI_LOGIN_AUTH_FAILED;
                        return -EPROTO;
                }
                char *dst = NULL;
                size_t cap = 0;
                if (!strcmp(key, "CHAP_A"))
                        dst = n->chap_a, cap = sizeof(n->chap_a);
                else if (!strcmp(key, "CHAP_N"))
                        dst = n->chap_n, cap = sizeof(n->chap_n);
                else if (!strcmp(key, "CHAP_I"))
                        dst = n->chap_i, cap = sizeof(n->chap_i);
                else if (!strcmp(key, "CHAP_R"))
                        dst = n->chap_r, cap = sizeof(n->chap_r);
                else if (!strcmp(key, "CHAP_C"))
                        dst = n->chap_c, cap = sizeof(n->chap_c);
                else
                        return answer(n, key, "NotUnderstood");
                if (strlen(val) >= cap || !*val)
                        n->chap_too_long = true;
                else
                        snprintf(dst, cap, "%s", val);
                return 0;
        }
        /* Keys only a target may send. */
        if (!strcmp(key, "TargetAlias") || !strcmp(key, "TargetAddress") ||
            !strcmp(key, "TargetPortalGroupTag"))
                return answer(n, key, "Reject");

        /* Operational keys belong to the operational stage (or later). */
        if (!strcmp(key, "HeaderDigest"))
                return neg_digest(n, key, val, &n->p.header_digest);
        if (!strcmp(key, "DataDigest"))
                return neg_digest(n, key, val, &n->p.data_digest);

        if (!strcmp(key, "MaxRecvDataSegmentLength")) {
                if (!parse_num(val, 512, 16777215, &v))
                        return answer(n, key, "Reject");
                n->p.mrdsl_initiator = (uint32_t)v;
                return iscsi_neg_declare(n);
        }

        if (n->type == ISCSI_SESS_DISCOVERY && is_session_wide_op_key(key))
                return answer(n, key, "Irrelevant");

        if (!strcmp(key, "ImmediateData")) {
                if (parse_bool(val, &b))
                        return answer(n, key, "Reject");
                n->p.immediate_data = b && true; /* AND with our Yes */
                return answer(n, key, n->p.immediate_data ? "Yes" : "No");
        }
        if (!strcmp(key, "InitialR2T")) {
                if (parse_bool(val, &b))
                        return answer(n, key, "Reject");
                n->p.initial_r2t = b || false; /* OR with our No */
                return answer(n, key, n->p.initial_r2t ? "Yes" : "No");
        }
        if (!strcmp(key, "DataPDUInOrder") || !strcmp(key, "DataSequenceInOrder")) {
                if (parse_bool(val, &b))
                        return answer(n, key, "Reject");
                /* OR with our Yes: always Yes. */
                return answer(n, key, "Yes");
        }
        if (!strcmp(key, "IFMarker") || !strcmp(key, "OFMarker")) {
                if (parse_bool(val, &b))
                        return answer(n, key, "Reject");
                return answer(n, key, "No"); /* AND with our No */
        }
        if (!strcmp(key, "IFMarkInt") || !strcmp(key, "OFMarkInt"))
                return answer(n, key, "Irrelevant");

        for (size_t i = 0; i < sizeof(num_keys) / sizeof(num_keys[0]); i++) {
                const struct num_key *k = &num_keys[i];
                if (strcmp(key, k->name))
                        continue;
                if (!parse_num(val, k->lo, k->hi, &v))
                        return answer(n, key, "Reject");
                uint64_t res =
                    k->kind == K_MIN ? (v < k->ours ? v : k->ours) : (v > k->ours ? v : k->ours);
                *(uint32_t *)((char *)&n->p + k->off) = (uint32_t)res;
                if (n->p.first_burst > n->p.max_burst)
                        n->p.first_burst = n->p.max_burst;
                return answer_num(n, key, res);
        }

        /* Everything else, including X- extensions and RFC 7144 keys. */
        return answer(n, key, "NotUnderstood");
}

static int neg_cb(void *arg, const char *key, const char *val)
{
        return iscsi_neg_key(arg, key, val);
}

int iscsi_neg_text(struct iscsi_neg *n, const char *buf, size_t len)
{
        int rc = iscsi_text_parse(buf, len, neg_cb, n);
        if (rc == -EINVAL && !n->status)
                n->status = ISCSI_LOGIN_INITIATOR_ERROR;
        if (!rc && n->p.first_burst > n->p.max_burst)
                n->p.first_burst = n->p.max_burst;
        return rc;
}
