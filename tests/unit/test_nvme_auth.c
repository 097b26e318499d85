/*
 * DH-HMAC-CHAP (nvme/auth.c).  The computations against vectors computed
 * independently with Python's hmac/hashlib from the formulas of the Linux
 * kernel (drivers/nvme/common/auth.c):
 *   tkey = HMAC_keyhash(key, NQN || "NVMe-over-Fabrics")
 *   Ca   = HMAC_H(H(dh), C) with a DH secret, else C
 *   R    = HMAC_H(tkey, Ca || le32 seq || le16 tid || 0 || "HostHost" | "Controller"
 *                 || nqn1 || 0 || nqn2)
 * with key = bytes(range(32)) (DHHC-1:01), the controller key 0x40..0x6f
 * (DHHC-1:02), C = 0xa0.. (48 bytes), C2 = 0x10.. (64), dh[i] = 3i & 0xff
 * (256 bytes), seq 01020304h (S2 0a0b0c0dh), tid 0506h.  Then whole
 * transactions on a bare controller: ATR in the Connect response, commands
 * refused with Authentication Required until the host proved itself,
 * unidirectional with the null group, bidirectional with ffdhe2048 (the
 * host's half computed here with the same primitives), a wrong response
 * answered by AUTH_Failure1, re-authentication, I/O queue authentication.
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

#include "nvme/internal.h"
#include "rt/reactor.h"

#define SUBNQN  "nqn.2026-12.io.slate:auth"
#define HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555"
#define HKEY    "DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"
#define CKEY    "DHHC-1:02:QEFCQ0RFRkdISUpLTE1OT1BRUlNUVVZXWFlaW1xdXl9gYWJjZGVmZ2hpamtsbW5voBXMjQ==:"

static void unhex(const char *h, uint8_t *out)
{
        for (size_t i = 0; h[2 * i]; i++)
                sscanf(h + 2 * i, "%2hhx", &out[i]);
}

static uint8_t key[32], ckey[48], c1[48], c2[64], dh[256];
static void vectors_init(void)
{
        for (int i = 0; i < 32; i++)
                key[i] = (uint8_t)i;
        for (int i = 0; i < 48; i++)
                ckey[i] = (uint8_t)(0x40 + i), c1[i] = (uint8_t)(0xa0 + i);
        for (int i = 0; i < 64; i++)
                c2[i] = (uint8_t)(0x10 + i);
        for (int i = 0; i < 256; i++)
                dh[i] = (uint8_t)(3 * i);
}

static void test_vectors(void **s)
{
        (void)s;
        uint8_t tk[64], tck[64], r[64], want[64];
        size_t tkl = sizeof(tk), tckl = sizeof(tck);
        vectors_init();
        assert_int_equal(nvme_auth_transform(key, 32, 1, HOSTNQN, tk, &tkl), 0);
        assert_int_equal(tkl, 32);
        unhex("6ce1e4ea31e8331a4fe5826bfde17a5cd386b8f0338748919e279ba6c55bf727", want);
        assert_memory_equal(tk, want, 32);
        assert_int_equal(nvme_auth_transform(ckey, 48, 2, SUBNQN, tck, &tckl), 0);
        assert_int_equal(tckl, 48);
        unhex("6d53e3f6ee33eca3958bd962c659db1979012e7b82843614c388e90e1eb1791843e3daee4a4c8af3"
              "ae4bbdb29897acc7",
              want);
        assert_memory_equal(tck, want, 48);
        /* XX = 00: the key as it is */
        size_t nl = sizeof(r);
        assert_int_equal(nvme_auth_transform(key, 32, 0, HOSTNQN, r, &nl), 0);
        assert_int_equal(nl, 32);
        assert_memory_equal(r, key, 32);

        assert_int_equal(nvme_auth_response(2, tk, 32, c1, NULL, 0, 0x01020304, 0x0506, 0, true,
                                            HOSTNQN, SUBNQN, r),
                         0);
        unhex("eecf30e52ae473286eeedb8a9eacf2da262416f8f9cafd38fe56b459ae5d47e6fe61e673e5ccde5e"
              "7e9f192bafe5bdbd",
              want);
        assert_memory_equal(r, want, 48);
        assert_int_equal(nvme_auth_response(2, tk, 32, c1, dh, 256, 0x01020304, 0x0506, 0, true,
                                            HOSTNQN, SUBNQN, r),
                         0);
        unhex("4e31e0e2e78ad7b1529ef8cb1c18c84f1fd86b2298af81604d19a3ca8ad05b63f397e3eb3166d97e"
              "cad96239ad2d63c0",
              want);
        assert_memory_equal(r, want, 48);
        assert_int_equal(nvme_auth_response(3, tck, 48, c2, dh, 256, 0x0a0b0c0d, 0x0506, 0, false,
                                            HOSTNQN, SUBNQN, r),
                         0);
        unhex("414d860dca6d0a78d01021f49a5998410d41f4240fcf60c32e8ad493d1894d488238c1ef85eb26f5"
              "30c581a5a23886a76c912dc27fcfd403391304cc7e9f7e6a",
              want);
        assert_memory_equal(r, want, 64);
        /* one bit of the sequence number changes it */
        assert_int_equal(nvme_auth_response(3, tck, 48, c2, dh, 256, 0x0a0b0c0c, 0x0506, 0, false,
                                            HOSTNQN, SUBNQN, r),
                         0);
        assert_memory_not_equal(r, want, 64);
        assert_int_equal(nvme_auth_hash_id("sha384"), 2);
        assert_int_equal(nvme_auth_dhgroup_id("ffdhe8192"), 5);
        assert_int_equal(nvme_auth_dhgroup_id("ffdhe1024"), -1);
}

static void test_dh(void **s)
{
        (void)s;
        static uint8_t pa[1024], pb[1024], sa[1024], sb[1024];
        for (int g = 1; g <= 5; g += 4) { /* ffdhe2048 and ffdhe8192 */
                size_t la = 0, lb = 0, na = sizeof(sa), nb = sizeof(sb);
                void *a = nvme_auth_dh_keygen(g, pa, &la), *b = nvme_auth_dh_keygen(g, pb, &lb);
                assert_non_null(a);
                assert_non_null(b);
                assert_int_equal(la, g == 1 ? 256 : 1024);
                assert_int_equal(lb, la);
                assert_int_equal(nvme_auth_dh_derive(a, g, pb, lb, sa, &na), 0);
                assert_int_equal(nvme_auth_dh_derive(b, g, pa, la, sb, &nb), 0);
                assert_int_equal(na, la); /* padded to the prime */
                assert_int_equal(nb, na);
                assert_memory_equal(sa, sb, na);
                /* 1 is no public value */
                uint8_t one[256] = {0};
                one[255] = 1;
                na = sizeof(sa);
                assert_int_not_equal(nvme_auth_dh_derive(a, g, one, 256, sa, &na), 0);
                nvme_auth_dh_free(a);
                nvme_auth_dh_free(b);
        }
}

/* ---- transactions on a bare controller ---- */

static uint8_t *buf;
#define BUFLEN 65536
static struct nvme_queue admin_q, io_q;

static uint16_t st(struct nvme_cmd *c)
{
        return nvme_cqe_status(c) & 0x7ff;
}
static void sqe_init(struct nvme_cmd *c, struct nvme_queue *q, uint8_t opc)
{
        memset(c, 0, sizeof(*c));
        c->queue = q;
        c->buf = buf;
        c->buf_len = BUFLEN;
        c->sqe[0] = opc;
        c->sqe[1] = 0x40;
        c->sqe[39] = 0x01;
}
static uint32_t connect_q(struct nvme_queue *q, uint16_t qid, uint16_t cntlid, uint16_t *status)
{
        struct nvme_cmd c;
        sqe_init(&c, q, NVME_OPC_FABRICS);
        c.sqe[4] = NVMF_FCTYPE_CONNECT;
        slate_put_le(c.sqe + 32, 4, 1024);
        slate_put_le(c.sqe + 42, 2, qid);
        slate_put_le(c.sqe + 44, 2, 31);
        c.icd_len = 1024;
        struct nvmf_connect_data *d = (struct nvmf_connect_data *)buf;
        memset(d, 0, sizeof(*d));
        put_le16(&d->cntlid, cntlid);
        snprintf(d->subnqn, sizeof(d->subnqn), "%s", SUBNQN);
        snprintf(d->hostnqn, sizeof(d->hostnqn), "%s", HOSTNQN);
        if (nvme_cmd_parse(&c) == NVME_PARSE_EXEC)
                nvmf_connect_do(&c);
        *status = st(&c);
        return (uint32_t)slate_get_le(c.cqe, 4);
}
/* Authentication Send of msg[0..len); the command's status. */
static uint16_t auth_send(struct nvme_queue *q, const uint8_t *msg, uint32_t len)
{
        struct nvme_cmd c;
        sqe_init(&c, q, NVME_OPC_FABRICS);
        c.sqe[4] = NVMF_FCTYPE_AUTH_SEND;
        c.sqe[41] = 1;
        c.sqe[42] = 1;
        c.sqe[43] = 0xe9;
        slate_put_le(c.sqe + 44, 4, len);
        slate_put_le(c.sqe + 32, 4, len);
        memmove(buf, msg, len);
        c.icd_len = len;
        if (nvme_cmd_parse(&c) == NVME_PARSE_EXEC)
                nvmf_auth_send_do(&c);
        return st(&c);
}
/* Authentication Receive into out (4 KiB); the command's status. */
static uint16_t auth_recv(struct nvme_queue *q, uint8_t *out)
{
        struct nvme_cmd c;
        sqe_init(&c, q, NVME_OPC_FABRICS);
        c.sqe[4] = NVMF_FCTYPE_AUTH_RECV;
        c.sqe[41] = 1;
        c.sqe[42] = 1;
        c.sqe[43] = 0xe9;
        slate_put_le(c.sqe + 44, 4, 4096);
        slate_put_le(c.sqe + 32, 4, 4096);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        memcpy(out, buf, 4096);
        return st(&c);
}
static uint16_t keep_alive(struct nvme_queue *q)
{
        struct nvme_cmd c;
        sqe_init(&c, q, NVME_ADM_KEEP_ALIVE);
        return nvme_cmd_parse(&c) == NVME_PARSE_DONE ? st(&c) : 0xffff;
}

/* The kernel host's AUTH_Negotiate: every hash and group. */
static uint32_t negotiate(uint8_t *m, uint16_t tid)
{
        memset(m, 0, 72);
        m[0] = 0x00;
        m[1] = 0x00;
        slate_put_le(m + 4, 2, tid);
        m[7] = 1; /* NAPD */
        m[8] = 1; /* AUTHID DH-HMAC-CHAP */
        m[10] = 3;
        m[11] = 6;
        m[12] = 1, m[13] = 2, m[14] = 3;
        for (int i = 0; i < 6; i++)
                m[8 + 4 + 30 + i] = (uint8_t)i;
        return 72;
}

static uint8_t msg[4096], rsp[4096];

/* One transaction as a host: returns the Receive status after the Reply; *r1 the reply message. */
static void host_txn(struct nvme_queue *q, uint16_t tid, bool corrupt, bool bidi, int want_hash,
                     int want_group)
{
        uint8_t tk[64], tck[64], r[64], hpub[1024], sec[1024];
        size_t tkl = sizeof(tk), tckl = sizeof(tck), hpl = 0, secl = sizeof(sec);
        assert_int_equal(auth_send(q, msg, negotiate(msg, tid)), 0);
        assert_int_equal(auth_recv(q, rsp), 0);
        assert_int_equal(rsp[0], 0x01);
        assert_int_equal(rsp[1], 0x01); /* Challenge */
        assert_int_equal(slate_get_le(rsp + 4, 2), tid);
        int hash = rsp[8], group = rsp[9];
        size_t hl = nvme_auth_hash_len(hash);
        assert_int_equal(hash, want_hash);
        assert_int_equal(group, want_group);
        assert_int_equal(rsp[6], hl);
        uint32_t s1 = (uint32_t)slate_get_le(rsp + 12, 4);
        uint16_t dhv = (uint16_t)slate_get_le(rsp + 10, 2);
        void *hk = NULL;
        if (group) {
                assert_int_equal(dhv, group == 1 ? 256 : group == 3 ? 512 : 1024);
                hk = nvme_auth_dh_keygen(group, hpub, &hpl);
                assert_non_null(hk);
                assert_int_equal(nvme_auth_dh_derive(hk, group, rsp + 16 + hl, dhv, sec, &secl), 0);
        } else {
                assert_int_equal(dhv, 0);
                secl = 0;
        }
        assert_int_equal(nvme_auth_transform(key, 32, 1, HOSTNQN, tk, &tkl), 0);
        assert_int_equal(nvme_auth_response(hash, tk, tkl, rsp + 16, secl ? sec : NULL, secl, s1,
                                            tid, 0, true, HOSTNQN, SUBNQN, r),
                         0);
        if (corrupt)
                r[0] ^= 1;
        memset(msg, 0, sizeof(msg));
        msg[0] = 0x01;
        msg[1] = 0x02; /* Reply */
        slate_put_le(msg + 4, 2, tid);
        msg[6] = (uint8_t)hl;
        msg[8] = bidi;
        slate_put_le(msg + 10, 2, hpl);
        slate_put_le(msg + 12, 4, bidi ? 0x0a0b0c0d : 0);
        memcpy(msg + 16, r, hl);
        if (bidi)
                memcpy(msg + 16 + hl, c2, hl);
        memcpy(msg + 16 + 2 * hl, hpub, hpl);
        assert_int_equal(auth_send(q, msg, (uint32_t)(16 + 2 * hl + hpl)), 0);
        assert_int_equal(auth_recv(q, rsp), 0);
        if (corrupt) {
                assert_int_equal(rsp[0], 0x00);
                assert_int_equal(rsp[1], 0xf1); /* Failure1 */
                assert_int_equal(rsp[6], 0x01);
                assert_int_equal(rsp[7], 0x01);
        } else {
                assert_int_equal(rsp[0], 0x01);
                assert_int_equal(rsp[1], 0x03); /* Success1 */
                assert_int_equal(rsp[6], hl);
                assert_int_equal(rsp[8], bidi);
                if (bidi) {
                        assert_int_equal(nvme_auth_transform(ckey, 48, 2, SUBNQN, tck, &tckl), 0);
                        assert_int_equal(nvme_auth_response(hash, tck, tckl, c2, secl ? sec : NULL,
                                                            secl, 0x0a0b0c0d, tid, 0, false,
                                                            HOSTNQN, SUBNQN, r),
                                         0);
                        assert_memory_equal(rsp + 16, r, hl);
                        memset(msg, 0, 16);
                        msg[0] = 0x01;
                        msg[1] = 0x04; /* Success2 */
                        slate_put_le(msg + 4, 2, tid);
                        assert_int_equal(auth_send(q, msg, 16), 0);
                }
        }
        nvme_auth_dh_free(hk);
}

#define AUTH_REQUIRED 0x191

static void test_transactions(void **s)
{
        (void)s;
        char err[256];
        uint16_t status;
        vectors_init();
        assert_int_equal(nvme_subsys_set_host_key(SUBNQN, HOSTNQN, HKEY, NULL, err, sizeof(err)),
                         0);
        assert_int_equal(nvme_subsys_set_auth(SUBNQN, (const char *[]){"sha384"}, 1,
                                              (const char *[]){"null"}, 1, err, sizeof(err)),
                         0);
        memset(&admin_q, 0, sizeof(admin_q));
        uint32_t dw0 = connect_q(&admin_q, 0, 0xffff, &status);
        assert_int_equal(status, 0);
        assert_true(dw0 & NVMF_CONNECT_ATR);
        nvme_ctrl_set_cc(admin_q.ctrl, 1 | (6 << 16) | (4 << 20));
        assert_int_equal(keep_alive(&admin_q), AUTH_REQUIRED);
        /* a wrong response: Failure1, still refused */
        host_txn(&admin_q, 7, true, false, 2, 0);
        assert_int_equal(keep_alive(&admin_q), AUTH_REQUIRED);
        /* Receive out of turn */
        assert_int_not_equal(auth_recv(&admin_q, rsp), 0);
        /* the right one, null group, SHA-384 */
        host_txn(&admin_q, 8, false, false, 2, 0);
        assert_int_equal(keep_alive(&admin_q), 0);

        /* bidirectional with ffdhe2048 (re-authentication of the same queue) */
        assert_int_equal(nvme_subsys_set_host_key(SUBNQN, HOSTNQN, HKEY, CKEY, err, sizeof(err)),
                         0);
        assert_int_equal(nvme_subsys_set_auth(SUBNQN, NULL, 0, (const char *[]){"ffdhe4096"}, 1,
                                              err, sizeof(err)),
                         0);
        /* the queue's keys were read at Connect: a new I/O queue sees the new ones */
        memset(&io_q, 0, sizeof(io_q));
        dw0 = connect_q(&io_q, 1, admin_q.ctrl->cntlid, &status);
        assert_int_equal(status, 0);
        assert_true(dw0 & NVMF_CONNECT_ATR);
        host_txn(&io_q, 9, false, true, 1, 3);
        /* re-authentication that fails leaves the queue refused */
        host_txn(&admin_q, 10, true, false, 2, 0); /* its Connect-time choices: sha384, null */
        assert_int_equal(keep_alive(&admin_q), AUTH_REQUIRED);
        nvme_queue_fini(&io_q);

        /* a bad message: Failure1 (incorrect payload) */
        memset(msg, 0, 16);
        msg[0] = 0x01;
        msg[1] = 0x02;
        assert_int_equal(auth_send(&admin_q, msg, 16), 0);
        assert_int_equal(auth_recv(&admin_q, rsp), 0);
        assert_int_equal(rsp[1], 0xf1);
        /* SECP other than E9h: Invalid Field */
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_OPC_FABRICS);
        c.sqe[4] = NVMF_FCTYPE_AUTH_SEND;
        c.sqe[41] = c.sqe[42] = 1;
        c.sqe[43] = 0xea;
        slate_put_le(c.sqe + 44, 4, 16);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        assert_int_equal(st(&c), NVME_SC_INVALID_FIELD);
        nvme_queue_fini(&admin_q);

        /* a host without a secret: no ATR, no authentication */
        assert_int_equal(nvme_subsys_set_host_key(SUBNQN, HOSTNQN, NULL, NULL, err, sizeof(err)),
                         0);
        memset(&admin_q, 0, sizeof(admin_q));
        dw0 = connect_q(&admin_q, 0, 0xffff, &status);
        assert_int_equal(status, 0);
        assert_false(dw0 & NVMF_CONNECT_ATR);
        nvme_ctrl_set_cc(admin_q.ctrl, 1 | (6 << 16) | (4 << 20));
        assert_int_equal(keep_alive(&admin_q), 0);
        assert_int_not_equal(auth_send(&admin_q, msg, negotiate(msg, 1)), 0);
        nvme_queue_fini(&admin_q);
}

static void test_config_errors(void **s)
{
        (void)s;
        char err[256];
        assert_int_equal(
            nvme_subsys_set_host_key(SUBNQN, HOSTNQN, "DHHC-1:01:AAAA:", NULL, err, sizeof(err)),
            -EINVAL);
        assert_non_null(strstr(err, "dhchap_secret"));
        assert_int_equal(nvme_subsys_set_host_key(SUBNQN, HOSTNQN, NULL, CKEY, err, sizeof(err)),
                         -EINVAL);
        assert_int_equal(nvme_subsys_set_host_key(SUBNQN, "*", HKEY, NULL, err, sizeof(err)),
                         -EINVAL);
        assert_int_equal(
            nvme_subsys_set_host_key("nqn.none", HOSTNQN, HKEY, NULL, err, sizeof(err)), -ENOENT);
        assert_int_equal(
            nvme_subsys_set_auth(SUBNQN, (const char *[]){"md5"}, 1, NULL, 0, err, sizeof(err)),
            -EINVAL);
        assert_int_equal(nvme_subsys_set_auth(SUBNQN, NULL, 0, (const char *[]){"null", "null"}, 2,
                                              err, sizeof(err)),
                         -EINVAL);
        /* secrets only with include_secrets */
        assert_int_equal(nvme_subsys_set_host_key(SUBNQN, HOSTNQN, HKEY, CKEY, err, sizeof(err)),
                         0);
        json_t *j = nvme_auth_json(false);
        char *txt = json_dumps(j, 0);
        assert_null(strstr(txt, "DHHC-1"));
        assert_non_null(strstr(txt, "\"bidirectional\": true"));
        assert_non_null(strstr(txt, "omitted")); /* a marker the replay refuses: fails closed */
        assert_int_equal(nvme_subsys_set_host_key(SUBNQN, HOSTNQN,
                                                  "omitted (config_save include_secrets=true)",
                                                  NULL, err, sizeof(err)),
                         -EINVAL);
        free(txt);
        json_decref(j);
        j = nvme_auth_json(true);
        txt = json_dumps(j, 0);
        assert_non_null(strstr(txt, HKEY));
        assert_non_null(strstr(txt, CKEY));
        free(txt);
        json_decref(j);
        /* removing the host removes its secrets */
        assert_int_equal(nvme_subsys_disallow_host(SUBNQN, HOSTNQN, err, sizeof(err)), 0);
        j = nvme_auth_json(true);
        txt = json_dumps(j, 0);
        assert_null(strstr(txt, "DHHC-1"));
        free(txt);
        json_decref(j);
}

static int setup(void **s)
{
        (void)s;
        char err[256], dir[64];
        snprintf(dir, sizeof(dir), "/tmp/slate-test-nvauth-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        core_set_state_dir(dir);
        if (rt_init(1) || rt_start())
                return -1;
        buf = aligned_alloc(4096, BUFLEN);
        if (nvme_subsys_add(SUBNQN, "SN1", "Slate Auth", err, sizeof(err)) ||
            nvme_subsys_allow_host(SUBNQN, HOSTNQN, err, sizeof(err)))
                return -1;
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_vectors),
            cmocka_unit_test(test_dh),
            cmocka_unit_test(test_transactions),
            cmocka_unit_test(test_config_errors),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
