/*
 * DH-HMAC-CHAP in-band authentication, controller side (NVMe Base 2.0
 * 8.13.5, TP 8006; the Fabrics Authentication Send/Receive commands 6.2/6.3).
 *
 * A queue whose host has a secret (nvmf_subsystem_add_host dhchap_secret)
 * gets AUTHREQ.ATR in its Connect response and runs nothing but
 * Authentication Send/Receive and Disconnect until the transaction ends in
 * success (anything else: Authentication Required, 191h).  Admin and I/O
 * queues authenticate each on their own, as the Linux host does; an
 * AUTH_Negotiate on an authenticated queue re-authenticates it.
 *
 *   host: Send AUTH_Negotiate        -> we pick hash and DH group, make C1
 *   host: Receive                    <- DH-HMAC-CHAP_Challenge (C1, S1, g^y)
 *   host: Send DH-HMAC-CHAP_Reply    -> R1 checked; C2/S2 if bidirectional
 *   host: Receive                    <- DH-HMAC-CHAP_Success1 (R2) or AUTH_Failure1
 *   host: Send DH-HMAC-CHAP_Success2 (bidirectional only) -> authenticated
 *
 * Protocol errors inside a message do not fail the command: the next
 * Receive returns AUTH_Failure1 with the reason (as Linux nvmet does).
 * The computations are the kernel's (drivers/nvme/common/auth.c), which
 * the e2e part checks against a real host: the key transform
 * HMAC(key, NQN || "NVMe-over-Fabrics"), the augmented challenge
 * HMAC(H(g^xy), C) and the response over C, seq, tid, SC_C, "HostHost" or
 * "Controller" and the two NQNs.
 *
 * Cost: a finite-field DH key pair and its shared secret take ~5 ms each
 * for ffdhe8192 (less for the smaller groups), so they run on a short-lived
 * worker thread and the command completes back on its reactor
 * (rt_defer_remote); the null group runs inline (a few HMACs).
 */
#include "nvme/auth.h"

#include <errno.h>
#include <jansson.h>
#include <stdatomic.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/dh.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/internal.h"
#include "rt/log.h"
#include "rt/reactor.h"

static const struct {
        const char *name;
        size_t len;
} hashes[4] = {{NULL, 0}, {"sha256", 32}, {"sha384", 48}, {"sha512", 64}};
static const struct {
        const char *name;
        size_t bytes;
} groups[6] = {{"null", 0},        {"ffdhe2048", 256}, {"ffdhe3072", 384},
               {"ffdhe4096", 512}, {"ffdhe6144", 768}, {"ffdhe8192", 1024}};

size_t nvme_auth_hash_len(int hash)
{
        return hash >= 1 && hash <= 3 ? hashes[hash].len : 0;
}
const char *nvme_auth_hash_name(int id)
{
        return id >= 1 && id <= 3 ? hashes[id].name : NULL;
}
const char *nvme_auth_dhgroup_name(int id)
{
        return id >= 0 && id <= 5 ? groups[id].name : NULL;
}
int nvme_auth_hash_id(const char *name)
{
        for (int i = 1; i <= 3; i++)
                if (name && strcmp(name, hashes[i].name) == 0)
                        return i;
        return -1;
}
int nvme_auth_dhgroup_id(const char *name)
{
        for (int i = 0; i <= 5; i++)
                if (name && strcmp(name, groups[i].name) == 0)
                        return i;
        return -1;
}

/* HMAC over n pieces. */
struct piece {
        const void *p;
        size_t n;
};
static int hmac(int hash, const uint8_t *key, size_t klen, const struct piece *v, int nv,
                uint8_t *out, size_t *outlen)
{
        EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
        EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
        OSSL_PARAM params[2] = {OSSL_PARAM_construct_utf8_string(
                                    OSSL_MAC_PARAM_DIGEST, (char *)nvme_auth_hash_name(hash), 0),
                                OSSL_PARAM_construct_end()};
        int rc = -1;
        if (!ctx || !nvme_auth_hash_name(hash) || EVP_MAC_init(ctx, key, klen, params) != 1)
                goto out;
        for (int i = 0; i < nv; i++)
                if (v[i].n && EVP_MAC_update(ctx, v[i].p, v[i].n) != 1)
                        goto out;
        if (EVP_MAC_final(ctx, out, outlen, NVME_AUTH_HASH_MAX) != 1)
                goto out;
        rc = 0;
out:
        EVP_MAC_CTX_free(ctx);
        EVP_MAC_free(mac);
        return rc;
}

int nvme_auth_transform(const uint8_t *key, size_t klen, int khash, const char *nqn, uint8_t *out,
                        size_t *outlen)
{
        if (khash == NVME_KEY_HASH_NONE) {
                memcpy(out, key, klen);
                *outlen = klen;
                return 0;
        }
        struct piece v[2] = {{nqn, strlen(nqn)}, {"NVMe-over-Fabrics", 17}};
        return hmac(khash, key, klen, v, 2, out, outlen);
}

int nvme_auth_response(int hash, const uint8_t *tkey, size_t tklen, const uint8_t *chal,
                       const uint8_t *dh, size_t dhlen, uint32_t seq, uint16_t tid, uint8_t scc,
                       bool host, const char *hostnqn, const char *subnqn, uint8_t *out)
{
        size_t hl = nvme_auth_hash_len(hash), n = NVME_AUTH_HASH_MAX;
        uint8_t ca[NVME_AUTH_HASH_MAX], hdh[EVP_MAX_MD_SIZE];
        unsigned hdhlen = 0;
        if (!hl)
                return -1;
        if (dh && dhlen) { /* Ca = HMAC(H(g^xy), C) */
                if (EVP_Digest(dh, dhlen, hdh, &hdhlen, EVP_get_digestbyname(hashes[hash].name),
                               NULL) != 1)
                        return -1;
                struct piece v[1] = {{chal, hl}};
                size_t cn = sizeof(ca);
                int rc = hmac(hash, hdh, hdhlen, v, 1, ca, &cn);
                OPENSSL_cleanse(hdh, sizeof(hdh));
                if (rc)
                        return -1;
        } else {
                memcpy(ca, chal, hl);
        }
        uint8_t s[4] = {(uint8_t)seq, (uint8_t)(seq >> 8), (uint8_t)(seq >> 16),
                        (uint8_t)(seq >> 24)};
        uint8_t t[2] = {(uint8_t)tid, (uint8_t)(tid >> 8)};
        uint8_t zero = 0;
        const char *n1 = host ? hostnqn : subnqn, *n2 = host ? subnqn : hostnqn;
        struct piece v[8] = {{ca, hl},
                             {s, 4},
                             {t, 2},
                             {&scc, 1},
                             {host ? "HostHost" : "Controller", host ? 8u : 10u},
                             {n1, strlen(n1)},
                             {&zero, 1},
                             {n2, strlen(n2)}};
        int rc = hmac(hash, tkey, tklen, v, 8, out, &n);
        OPENSSL_cleanse(ca, sizeof(ca));
        return rc || n != hl ? -1 : 0;
}

void *nvme_auth_dh_keygen(int group, uint8_t *pub, size_t *publen)
{
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "DH", NULL);
        EVP_PKEY *key = NULL;
        BIGNUM *bn = NULL;
        OSSL_PARAM params[2] = {OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME,
                                                                 (char *)groups[group].name, 0),
                                OSSL_PARAM_construct_end()};
        if (!ctx || group < 1 || group > 5 || EVP_PKEY_keygen_init(ctx) != 1 ||
            EVP_PKEY_CTX_set_params(ctx, params) != 1 || EVP_PKEY_generate(ctx, &key) != 1 ||
            EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_PUB_KEY, &bn) != 1 ||
            BN_bn2binpad(bn, pub, (int)groups[group].bytes) < 0) {
                EVP_PKEY_free(key);
                key = NULL;
        } else {
                *publen = groups[group].bytes;
        }
        BN_free(bn);
        EVP_PKEY_CTX_free(ctx);
        return key;
}

int nvme_auth_dh_derive(void *key, int group, const uint8_t *peer, size_t peerlen, uint8_t *out,
                        size_t *outlen)
{
        EVP_PKEY_CTX *pctx = EVP_PKEY_CTX_new_from_name(NULL, "DH", NULL), *dctx = NULL;
        OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        OSSL_PARAM *params = NULL;
        EVP_PKEY *pk = NULL;
        BIGNUM *bn = BN_bin2bn(peer, (int)peerlen, NULL);
        int rc = -1;
        if (!pctx || !bld || !bn || group < 1 || group > 5 ||
            !OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, groups[group].name,
                                             0) ||
            !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_PUB_KEY, bn) ||
            !(params = OSSL_PARAM_BLD_to_param(bld)) || EVP_PKEY_fromdata_init(pctx) != 1 ||
            EVP_PKEY_fromdata(pctx, &pk, EVP_PKEY_PUBLIC_KEY, params) != 1)
                goto out;
        dctx = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
        /* The padded secret (the kernel's kpp output is the prime's length). */
        if (!dctx || EVP_PKEY_derive_init(dctx) != 1 || EVP_PKEY_CTX_set_dh_pad(dctx, 1) != 1 ||
            EVP_PKEY_derive_set_peer(dctx, pk) != 1 || EVP_PKEY_derive(dctx, out, outlen) != 1)
                goto out;
        rc = 0;
out:
        EVP_PKEY_CTX_free(dctx);
        EVP_PKEY_free(pk);
        OSSL_PARAM_free(params);
        OSSL_PARAM_BLD_free(bld);
        BN_free(bn);
        EVP_PKEY_CTX_free(pctx);
        return rc;
}

void nvme_auth_dh_free(void *key)
{
        EVP_PKEY_free(key);
}

/* ---- per-queue state ---- */

enum auth_state {
        ST_IDLE,      /* waiting for AUTH_Negotiate */
        ST_CHALLENGE, /* Receive returns the Challenge */
        ST_REPLY,     /* waiting for the Reply */
        ST_SUCCESS1,  /* Receive returns Success1 */
        ST_SUCCESS2,  /* waiting for Success2 (bidirectional) */
        ST_FAILURE1,  /* Receive returns Failure1 */
};

struct nvme_auth {
        enum auth_state st;
        uint16_t qid;
        atomic_bool authenticated; /* read by the gate in nvme_cmd_parse */
        bool busy;                 /* a worker computes for this queue's Authentication Send */
        char hostnqn[NVMF_NQN_SIZE], subnqn[NVMF_NQN_SIZE];
        uint8_t hkey[NVME_AUTH_HASH_MAX], ckey[NVME_AUTH_HASH_MAX]; /* transformed */
        size_t hklen, cklen;                                        /* cklen 0: no ctrl key */
        uint8_t pref_hash[3], npref_hash, pref_dh[6], npref_dh;
        /* The transaction. */
        uint16_t tid;
        int hash, group;
        uint8_t c1[NVME_AUTH_HASH_MAX], c2[NVME_AUTH_HASH_MAX], r2[NVME_AUTH_HASH_MAX];
        uint32_t s1, s2;
        bool bidi;
        uint8_t reason;
        void *dhkey;
        uint8_t pub[NVME_AUTH_DH_MAX];
        size_t publen;
};

static void auth_reset_txn(struct nvme_auth *a)
{
        nvme_auth_dh_free(a->dhkey);
        a->dhkey = NULL;
        OPENSSL_cleanse(a->c1, sizeof(a->c1));
        OPENSSL_cleanse(a->c2, sizeof(a->c2));
        OPENSSL_cleanse(a->r2, sizeof(a->r2));
        a->bidi = false;
}

static const uint8_t default_hash[3] = {1, 2, 3};
static const uint8_t default_dh[6] = {1, 2, 3, 4, 5, 0};

int nvme_auth_queue_init(struct nvme_queue *q, struct nvme_ctrl *ctrl, bool *atr)
{
        struct nvme_subsys *s = ctrl->subsys;
        uint8_t key[NVME_KEY_MAX], ckey[NVME_KEY_MAX];
        size_t klen = sizeof(key), cklen = sizeof(ckey);
        int kh = 0, ckh = 0, rc = 0;
        bool have = false, have_c = false;
        struct nvme_auth *a = NULL;

        *atr = false;
        nvme_auth_queue_free(q);
        pthread_mutex_lock(&nvme_lock);
        for (unsigned i = 0; i < s->nhkeys; i++) {
                struct nvme_host_key *h = &s->hkeys[i];
                if (strcmp(h->hostnqn, ctrl->hostnqn) != 0)
                        continue;
                have = nvme_key_decode(h->secret, NVME_KEY_DHCHAP, key, &klen, &kh, NULL, 0) == 0;
                have_c = have && h->ctrl_secret &&
                         nvme_key_decode(h->ctrl_secret, NVME_KEY_DHCHAP, ckey, &cklen, &ckh, NULL,
                                         0) == 0;
                break;
        }
        if (have && (a = calloc(1, sizeof(*a))) != NULL) {
                a->npref_hash = s->auth_nhash;
                memcpy(a->pref_hash, s->auth_nhash ? s->auth_hash : default_hash, 3);
                if (!a->npref_hash)
                        a->npref_hash = 3;
                a->npref_dh = s->auth_ndh;
                memcpy(a->pref_dh, s->auth_ndh ? s->auth_dh : default_dh, 6);
                if (!a->npref_dh)
                        a->npref_dh = 6;
        }
        pthread_mutex_unlock(&nvme_lock);
        if (!have)
                goto out;
        if (!a) {
                rc = -ENOMEM;
                goto out;
        }
        snprintf(a->hostnqn, sizeof(a->hostnqn), "%s", ctrl->hostnqn);
        snprintf(a->subnqn, sizeof(a->subnqn), "%s", s->nqn);
        a->hklen = sizeof(a->hkey);
        if (nvme_auth_transform(key, klen, kh, a->hostnqn, a->hkey, &a->hklen) != 0) {
                free(a);
                rc = -EIO;
                goto out;
        }
        a->cklen = 0;
        if (have_c) {
                a->cklen = sizeof(a->ckey);
                if (nvme_auth_transform(ckey, cklen, ckh, a->subnqn, a->ckey, &a->cklen) != 0) {
                        OPENSSL_cleanse(a, sizeof(*a));
                        free(a);
                        rc = -EIO;
                        goto out;
                }
        }
        a->qid = q->qid;
        q->auth = a;
        *atr = true;
out:
        OPENSSL_cleanse(key, sizeof(key));
        OPENSSL_cleanse(ckey, sizeof(ckey));
        return rc;
}

void nvme_auth_queue_free(struct nvme_queue *q)
{
        struct nvme_auth *a = q->auth;
        if (!a)
                return;
        auth_reset_txn(a);
        OPENSSL_cleanse(a, sizeof(*a));
        free(a);
        q->auth = NULL;
}

bool nvme_auth_queue_ok(const struct nvme_queue *q)
{
        return !q->auth || q->auth->authenticated;
}

/* ---- Authentication Send ---- */

static bool check_secp(struct nvme_cmd *cmd)
{
        if (cmd->sqe[43] != NVME_AUTH_SECP) {
                nvme_invalid_field(cmd, 43);
                return false;
        }
        if (cmd->sqe[41] != 0x01 || cmd->sqe[42] != 0x01) {
                nvme_invalid_field(cmd, cmd->sqe[41] != 0x01 ? 41 : 42);
                return false;
        }
        return true;
}

enum nvme_parse_result nvmf_auth_send_parse(struct nvme_cmd *cmd)
{
        uint32_t tl = nvme_cdw(cmd, 11);
        if (!check_secp(cmd))
                return NVME_PARSE_DONE;
        if (!cmd->queue->auth)
                /* Authentication not required here: the host must not start it (8.13.5). */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR, 4, -1);
        if (cmd->queue->auth->busy)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR, 4, -1);
        if (tl == 0 || tl > NVME_AUTH_MSG_MAX)
                return nvme_invalid_field(cmd, 44);
        if (!nvme_xfer(cmd, tl, true))
                return NVME_PARSE_DONE;
        return NVME_PARSE_EXEC;
}

/* Success: the admin queue's is logged (the I/O queues' would repeat it), never a secret. */
static void auth_done(struct nvme_auth *a)
{
        if (a->qid == 0)
                LOG_INFO("nvme", "%s: host %s authenticated (DH-HMAC-CHAP, hmac(%s), %s%s)",
                         a->subnqn, a->hostnqn, nvme_auth_hash_name(a->hash),
                         nvme_auth_dhgroup_name(a->group), a->bidi ? ", bidirectional" : "");
        auth_reset_txn(a);
        a->st = ST_IDLE;
        a->authenticated = true;
}

static void fail1(struct nvme_auth *a, uint8_t why)
{
        if (why != NVME_AUTH_FAIL_FAILED) /* a wrong response is logged by on_reply */
                LOG_INFO("nvme", "%s: DH-HMAC-CHAP with host %s (queue %u) ends: failure reason %u",
                         a->subnqn, a->hostnqn, a->qid, why);
        auth_reset_txn(a);
        a->st = ST_FAILURE1;
        a->reason = why;
        a->authenticated = false;
}

static bool offered(const uint8_t *list, unsigned n, uint8_t id)
{
        for (unsigned i = 0; i < n; i++)
                if (list[i] == id)
                        return true;
        return false;
}

static void on_negotiate(struct nvme_auth *a, const uint8_t *m, uint32_t len)
{
        auth_reset_txn(a);
        a->tid = (uint16_t)slate_get_le(m + 4, 2);
        if (len < 8 + 64u || m[7] == 0 || len < 8 + 64u * m[7])
                return fail1(a, NVME_AUTH_FAIL_PAYLOAD);
        if (m[6] != 0) /* SC_C: secure channel concatenation is not offered */
                return fail1(a, NVME_AUTH_FAIL_CONCAT);
        const uint8_t *d = NULL;
        for (unsigned i = 0; i < m[7]; i++)
                if (m[8 + 64 * i] == NVME_AUTH_ID_DHCHAP)
                        d = m + 8 + 64 * i;
        if (!d)
                return fail1(a, NVME_AUTH_FAIL_PROTOCOL);
        unsigned halen = d[2], dhlen = d[3];
        if (halen > 30 || dhlen > 30)
                return fail1(a, NVME_AUTH_FAIL_PAYLOAD);
        a->hash = -1;
        for (unsigned i = 0; i < a->npref_hash && a->hash < 0; i++)
                if (offered(d + 4, halen, a->pref_hash[i]))
                        a->hash = a->pref_hash[i];
        if (a->hash < 0)
                return fail1(a, NVME_AUTH_FAIL_HASH);
        a->group = -1;
        for (unsigned i = 0; i < a->npref_dh && a->group < 0; i++)
                if (offered(d + 34, dhlen, a->pref_dh[i]))
                        a->group = a->pref_dh[i];
        if (a->group < 0)
                return fail1(a, NVME_AUTH_FAIL_DHGROUP);
        size_t hl = nvme_auth_hash_len(a->hash);
        do {
                if (RAND_bytes((uint8_t *)&a->s1, sizeof(a->s1)) != 1 ||
                    RAND_bytes(a->c1, (int)hl) != 1)
                        return fail1(a, NVME_AUTH_FAIL_FAILED);
        } while (a->s1 == 0);
        if (a->group) {
                a->dhkey = nvme_auth_dh_keygen(a->group, a->pub, &a->publen);
                if (!a->dhkey)
                        return fail1(a, NVME_AUTH_FAIL_FAILED);
        } else {
                a->publen = 0;
        }
        a->st = ST_CHALLENGE;
}

static void on_reply(struct nvme_auth *a, const uint8_t *m, uint32_t len)
{
        size_t hl = nvme_auth_hash_len(a->hash);
        uint16_t dhvlen = (uint16_t)slate_get_le(m + 10, 2);
        if ((uint16_t)slate_get_le(m + 4, 2) != a->tid)
                return fail1(a, NVME_AUTH_FAIL_PAYLOAD);
        if (m[6] != hl || len < 16 + 2 * hl + dhvlen)
                return fail1(a, NVME_AUTH_FAIL_PAYLOAD);
        if ((a->group == 0) != (dhvlen == 0) || dhvlen > groups[a->group].bytes)
                return fail1(a, NVME_AUTH_FAIL_PAYLOAD);
        uint8_t secret[NVME_AUTH_DH_MAX], want[NVME_AUTH_HASH_MAX];
        size_t slen = 0;
        if (a->group) {
                slen = sizeof(secret);
                if (nvme_auth_dh_derive(a->dhkey, a->group, m + 16 + 2 * hl, dhvlen, secret,
                                        &slen) != 0)
                        return fail1(a, NVME_AUTH_FAIL_PAYLOAD);
        }
        int rc = nvme_auth_response(a->hash, a->hkey, a->hklen, a->c1, slen ? secret : NULL, slen,
                                    a->s1, a->tid, 0, true, a->hostnqn, a->subnqn, want);
        bool ok = rc == 0 && CRYPTO_memcmp(want, m + 16, hl) == 0;
        a->bidi = m[8] != 0; /* CVALID */
        if (ok && a->bidi) {
                if (!a->cklen) { /* the host wants us to prove a key we do not have */
                        ok = false;
                } else {
                        memcpy(a->c2, m + 16 + hl, hl);
                        a->s2 = (uint32_t)slate_get_le(m + 12, 4);
                        rc = nvme_auth_response(a->hash, a->ckey, a->cklen, a->c2,
                                                slen ? secret : NULL, slen, a->s2, a->tid, 0, false,
                                                a->hostnqn, a->subnqn, a->r2);
                        ok = rc == 0;
                }
        }
        OPENSSL_cleanse(secret, sizeof(secret));
        OPENSSL_cleanse(want, sizeof(want));
        if (!ok) {
                LOG_INFO("nvme", "%s: DH-HMAC-CHAP authentication of host %s failed", a->subnqn,
                         a->hostnqn);
                return fail1(a, NVME_AUTH_FAIL_FAILED);
        }
        nvme_auth_dh_free(a->dhkey);
        a->dhkey = NULL;
        a->st = ST_SUCCESS1;
}

void nvmf_auth_send_do(struct nvme_cmd *cmd)
{
        struct nvme_auth *a = cmd->queue->auth;
        const uint8_t *m = cmd->buf;
        uint32_t len = cmd->data_len;

        nvme_set_status(cmd, 0, 0, false);
        if (!a)
                return;
        if (len < 8) {
                fail1(a, NVME_AUTH_FAIL_PAYLOAD);
                return;
        }
        uint8_t type = m[0], id = m[1];
        if (type == NVME_AUTH_TYPE_COMMON && id == NVME_AUTH_MSG_NEGOTIATE) {
                /* Any time: a new transaction (re-authentication on a live queue too). */
                bool was = a->authenticated;
                on_negotiate(a, m, len);
                if (was && a->st != ST_FAILURE1)
                        a->authenticated = true; /* stays usable while it re-authenticates */
                return;
        }
        if (type == NVME_AUTH_TYPE_COMMON && id == NVME_AUTH_MSG_FAILURE2) {
                /* The host refused our Success1 response. */
                LOG_INFO("nvme", "%s: host %s refused the controller's DH-HMAC-CHAP response",
                         a->subnqn, a->hostnqn);
                auth_reset_txn(a);
                a->st = ST_IDLE;
                a->authenticated = false;
                return;
        }
        if (len < 16 || type != NVME_AUTH_TYPE_DHCHAP) {
                fail1(a, NVME_AUTH_FAIL_PAYLOAD);
                return;
        }
        if (id == NVME_AUTH_MSG_REPLY && a->st == ST_REPLY) {
                on_reply(a, m, len);
                return;
        }
        if (id == NVME_AUTH_MSG_SUCCESS2 && a->st == ST_SUCCESS2) {
                if ((uint16_t)slate_get_le(m + 4, 2) != a->tid) {
                        fail1(a, NVME_AUTH_FAIL_PAYLOAD);
                        return;
                }
                auth_done(a);
                return;
        }
        fail1(a, NVME_AUTH_FAIL_PROTOCOL);
}

/* The expensive steps on a worker thread. */
static void *auth_worker(void *arg)
{
        struct nvme_cmd *cmd = arg;
        nvmf_auth_send_do(cmd);
        rt_defer_remote(cmd->reactor, &cmd->defer);
        return NULL;
}

static void auth_worker_done(struct rt_defer *d)
{
        struct nvme_cmd *cmd = (struct nvme_cmd *)((char *)d - offsetof(struct nvme_cmd, defer));
        if (cmd->queue->auth)
                cmd->queue->auth->busy = false;
        nvme_cmd_complete(cmd);
}

void nvmf_auth_send_exec(struct nvme_cmd *cmd)
{
        struct nvme_auth *a = cmd->queue->auth;
        const uint8_t *m = cmd->buf;
        /* DH work: a Negotiate that may pick a group, or a Reply in a DH transaction. */
        bool dh = a && cmd->data_len >= 2 &&
                  ((m[0] == NVME_AUTH_TYPE_COMMON && m[1] == NVME_AUTH_MSG_NEGOTIATE) ||
                   (m[0] == NVME_AUTH_TYPE_DHCHAP && m[1] == NVME_AUTH_MSG_REPLY && a->group > 0));
        if (dh && cmd->reactor) {
                pthread_t t;
                pthread_attr_t at;
                pthread_attr_init(&at);
                pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
                a->busy = true;
                cmd->defer.fn = auth_worker_done;
                cmd->defer.next = NULL;
                int rc = pthread_create(&t, &at, auth_worker, cmd);
                pthread_attr_destroy(&at);
                if (rc == 0)
                        return;
                a->busy = false; /* no thread: compute here, once */
        }
        nvmf_auth_send_do(cmd);
        nvme_cmd_complete_deferred(cmd);
}

/* ---- Authentication Receive ---- */

enum nvme_parse_result nvmf_auth_recv_parse(struct nvme_cmd *cmd)
{
        struct nvme_auth *a = cmd->queue->auth;
        uint32_t al = nvme_cdw(cmd, 11);
        if (!check_secp(cmd))
                return NVME_PARSE_DONE;
        if (!a || a->busy)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR, 4, -1);
        if (al == 0 || al > NVME_AUTH_MSG_MAX)
                return nvme_invalid_field(cmd, 44);
        size_t hl = nvme_auth_hash_len(a->hash);
        uint32_t need;
        switch (a->st) {
        case ST_CHALLENGE:
                need = (uint32_t)(16 + hl + a->publen);
                break;
        case ST_SUCCESS1:
                need = (uint32_t)(16 + hl);
                break;
        case ST_FAILURE1:
                need = 8;
                break;
        default:
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR, 4, -1);
        }
        if (al < need)
                return nvme_invalid_field(cmd, 44);
        if (!nvme_xfer(cmd, al, false))
                return NVME_PARSE_DONE;
        uint8_t *m = cmd->buf;
        memset(m, 0, al);
        slate_put_le(m + 4, 2, a->tid);
        switch (a->st) {
        case ST_CHALLENGE:
                m[0] = NVME_AUTH_TYPE_DHCHAP;
                m[1] = NVME_AUTH_MSG_CHALLENGE;
                m[6] = (uint8_t)hl;
                m[8] = (uint8_t)a->hash;
                m[9] = (uint8_t)a->group;
                slate_put_le(m + 10, 2, a->publen);
                slate_put_le(m + 12, 4, a->s1);
                memcpy(m + 16, a->c1, hl);
                memcpy(m + 16 + hl, a->pub, a->publen);
                a->st = ST_REPLY;
                break;
        case ST_SUCCESS1:
                m[0] = NVME_AUTH_TYPE_DHCHAP;
                m[1] = NVME_AUTH_MSG_SUCCESS1;
                m[6] = (uint8_t)hl;
                if (a->bidi) {
                        m[8] = 1; /* RVALID */
                        memcpy(m + 16, a->r2, hl);
                        a->st = ST_SUCCESS2;
                } else {
                        auth_done(a);
                }
                break;
        default: /* ST_FAILURE1 */
                m[0] = NVME_AUTH_TYPE_COMMON;
                m[1] = NVME_AUTH_MSG_FAILURE1;
                m[6] = 0x01; /* reason: authentication failure */
                m[7] = a->reason;
                a->st = ST_IDLE;
                break;
        }
        return NVME_PARSE_DONE;
}

/* ---- configuration ---- */

static void hkey_clear(struct nvme_host_key *h)
{
        if (h->secret)
                OPENSSL_clear_free(h->secret, strlen(h->secret));
        if (h->ctrl_secret)
                OPENSSL_clear_free(h->ctrl_secret, strlen(h->ctrl_secret));
        h->secret = h->ctrl_secret = NULL;
}

void nvme_auth_host_removed_locked(struct nvme_subsys *s, const char *hostnqn)
{
        for (unsigned i = 0; i < s->nhkeys; i++) {
                if (strcmp(s->hkeys[i].hostnqn, hostnqn) != 0)
                        continue;
                hkey_clear(&s->hkeys[i]);
                memmove(&s->hkeys[i], &s->hkeys[i + 1], (s->nhkeys - i - 1) * sizeof(*s->hkeys));
                s->nhkeys--;
                return;
        }
}

void nvme_auth_subsys_free_locked(struct nvme_subsys *s)
{
        for (unsigned i = 0; i < s->nhkeys; i++)
                hkey_clear(&s->hkeys[i]);
        free(s->hkeys);
        s->hkeys = NULL;
        s->nhkeys = 0;
}

#define errf(...) snprintf(err, errlen, __VA_ARGS__)

int nvme_subsys_set_host_key(const char *nqn, const char *hostnqn, const char *secret,
                             const char *ctrl_secret, char *err, size_t errlen)
{
        uint8_t k[NVME_KEY_MAX];
        size_t kl = sizeof(k);
        int h, rc = 0;
        char why[128];
        if (secret && !secret[0])
                secret = NULL;
        if (ctrl_secret && !ctrl_secret[0])
                ctrl_secret = NULL;
        if (!hostnqn || strcmp(hostnqn, "*") == 0) {
                errf("DH-HMAC-CHAP secrets belong to a named host, not \"*\"");
                return -EINVAL;
        }
        if (ctrl_secret && !secret) {
                errf("dhchap_ctrl_secret needs dhchap_secret (bidirectional is on top of the "
                     "host's proof)");
                return -EINVAL;
        }
        if (secret && nvme_key_decode(secret, NVME_KEY_DHCHAP, k, &kl, &h, why, sizeof(why))) {
                errf("dhchap_secret: %s", why);
                return -EINVAL;
        }
        kl = sizeof(k);
        if (ctrl_secret &&
            nvme_key_decode(ctrl_secret, NVME_KEY_DHCHAP, k, &kl, &h, why, sizeof(why))) {
                errf("dhchap_ctrl_secret: %s", why);
                OPENSSL_cleanse(k, sizeof(k));
                return -EINVAL;
        }
        OPENSSL_cleanse(k, sizeof(k));
        pthread_mutex_lock(&nvme_lock);
        struct nvme_subsys *s = nvme_subsys_find_locked(nqn ? nqn : "");
        if (!s || s->discovery) {
                errf("no NVMe subsystem %s", nqn ? nqn : "");
                rc = -ENOENT;
                goto out;
        }
        nvme_auth_host_removed_locked(s, hostnqn);
        if (!secret)
                goto out;
        struct nvme_host_key *n = realloc(s->hkeys, (s->nhkeys + 1) * sizeof(*s->hkeys));
        if (!n) {
                rc = -ENOMEM;
                goto out;
        }
        s->hkeys = n;
        struct nvme_host_key *e = &s->hkeys[s->nhkeys];
        memset(e, 0, sizeof(*e));
        snprintf(e->hostnqn, sizeof(e->hostnqn), "%s", hostnqn);
        e->secret = strdup(secret);
        e->ctrl_secret = ctrl_secret ? strdup(ctrl_secret) : NULL;
        if (!e->secret || (ctrl_secret && !e->ctrl_secret)) {
                hkey_clear(e);
                rc = -ENOMEM;
                goto out;
        }
        s->nhkeys++;
out:
        pthread_mutex_unlock(&nvme_lock);
        return rc;
}

int nvme_subsys_set_auth(const char *nqn, const char *const *digests, unsigned nd,
                         const char *const *dhgroups, unsigned ng, char *err, size_t errlen)
{
        uint8_t hs[3], gs[6];
        if (nd > 3 || ng > 6) {
                errf("at most 3 digests and 6 DH groups");
                return -EINVAL;
        }
        for (unsigned i = 0; i < nd; i++) {
                int id = nvme_auth_hash_id(digests[i]);
                if (id < 0 || memchr(hs, id, i)) {
                        errf("digest %s: unknown or repeated (sha256, sha384, sha512)",
                             digests[i] ? digests[i] : "?");
                        return -EINVAL;
                }
                hs[i] = (uint8_t)id;
        }
        for (unsigned i = 0; i < ng; i++) {
                int id = nvme_auth_dhgroup_id(dhgroups[i]);
                if (id < 0 || memchr(gs, id, i)) {
                        errf("DH group %s: unknown or repeated (null, ffdhe2048, ffdhe3072, "
                             "ffdhe4096, ffdhe6144, ffdhe8192)",
                             dhgroups[i] ? dhgroups[i] : "?");
                        return -EINVAL;
                }
                gs[i] = (uint8_t)id;
        }
        pthread_mutex_lock(&nvme_lock);
        struct nvme_subsys *s = nvme_subsys_find_locked(nqn ? nqn : "");
        int rc = 0;
        if (!s || s->discovery) {
                errf("no NVMe subsystem %s", nqn ? nqn : "");
                rc = -ENOENT;
        } else {
                memcpy(s->auth_hash, hs, nd);
                s->auth_nhash = (uint8_t)nd;
                memcpy(s->auth_dh, gs, ng);
                s->auth_ndh = (uint8_t)ng;
        }
        pthread_mutex_unlock(&nvme_lock);
        return rc;
}

json_t *nvme_auth_json(bool with_secrets)
{
        json_t *out = json_object();
        pthread_mutex_lock(&nvme_lock);
        for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next) {
                if (s->discovery || (!s->nhkeys && !s->auth_nhash && !s->auth_ndh))
                        continue;
                json_t *o = json_object(), *hosts = json_object();
                for (unsigned i = 0; i < s->nhkeys; i++) {
                        json_t *h = json_object();
                        json_object_set_new(h, "bidirectional",
                                            json_boolean(s->hkeys[i].ctrl_secret != NULL));
                        if (!with_secrets) {
                                /* Not a secret, and refused on replay: a config saved without
                                 * secrets fails closed instead of admitting the host without. */
                                json_object_set_new(
                                    h, "dhchap_secret",
                                    json_string("omitted (config_save include_secrets=true)"));
                        } else {
                                json_object_set_new(h, "dhchap_secret",
                                                    json_string(s->hkeys[i].secret));
                                if (s->hkeys[i].ctrl_secret)
                                        json_object_set_new(h, "dhchap_ctrl_secret",
                                                            json_string(s->hkeys[i].ctrl_secret));
                        }
                        json_object_set_new(hosts, s->hkeys[i].hostnqn, h);
                }
                json_object_set_new(o, "hosts", hosts);
                if (s->auth_nhash) {
                        json_t *d = json_array();
                        for (unsigned i = 0; i < s->auth_nhash; i++)
                                json_array_append_new(
                                    d, json_string(nvme_auth_hash_name(s->auth_hash[i])));
                        json_object_set_new(o, "digests", d);
                }
                if (s->auth_ndh) {
                        json_t *d = json_array();
                        for (unsigned i = 0; i < s->auth_ndh; i++)
                                json_array_append_new(
                                    d, json_string(nvme_auth_dhgroup_name(s->auth_dh[i])));
                        json_object_set_new(o, "dhgroups", d);
                }
                json_object_set_new(out, s->nqn, o);
        }
        pthread_mutex_unlock(&nvme_lock);
        return out;
}
