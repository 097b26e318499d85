/*
 * NVMe/TCP TLS keys (src/nvmf/tls_key.c, TCP transport 1.0c 3.6.1.3).
 *
 * Where the vectors come from:
 *  - KEY256 and KEY384 were made by nvme-cli 2.3 / libnvme 1.3 (Debian 12,
 *    the same as in linuxvm): `nvme gen-tls-key --hmac=1` and `--hmac=2`;
 *    `nvme check-tls-key --key=...` accepts them ("Key is valid").
 *  - The identities and TLS PSKs were computed by tests/limits/tls_psk.py,
 *    which implements HKDF-Extract/-Expand-Label (RFC 5869, RFC 8446 7.1)
 *    with Python's hmac and hashlib, after libnvme's derive_retained_key()
 *    and derive_tls_key() (current libnvme; its "compat" variant, what
 *    older releases such as Debian 12's 1.3 did, builds non-RFC labels:
 *    see README "NVMe/TCP TLS").  tests/limits/tls.sh
 *    also has openssl s_client complete a handshake with slated using a PSK
 *    from that script.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "nvmf/nvmf.h"
#include "nvmf/tls.h"

#define HOST "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555"
#define SUB  "nqn.2026-12.io.slate:tls"

static const char KEY256[] = "NVMeTLSkey-1:01:VlKQBA9LJAbRTPvxqvEOMBHyuNAkt4w47dJqkq5rXdxXFc2V:";
static const char KEY384[] = "NVMeTLSkey-1:02:S+krdRK3KFwWv/PRZXy7BaBhsccWCCCitK4/"
                             "XGXANZDxTKdJBTArQTD9LqNhC1DZpHg1dw==:";
/* 00..1f, no transformation (hash 00), made by tls_psk.py key ... 0 */
static const char KEY00[] = "NVMeTLSkey-1:00:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:";

static void hex(const uint8_t *b, size_t n, char *out)
{
        for (size_t i = 0; i < n; i++)
                sprintf(out + 2 * i, "%02x", b[i]);
}

static void test_parse_nvme_cli_keys(void **st)
{
        (void)st;
        uint8_t k[NVMF_TLS_KEY_MAX];
        size_t len;
        int hash;
        assert_int_equal(nvmf_tls_key_parse(KEY256, k, &len, &hash), 0);
        assert_int_equal(len, 32);
        assert_int_equal(hash, 1);
        assert_int_equal(k[0], 0x56); /* "VlKQ" */
        assert_int_equal(k[1], 0x52);
        assert_int_equal(nvmf_tls_key_parse(KEY384, k, &len, &hash), 0);
        assert_int_equal(len, 48);
        assert_int_equal(hash, 2);
        assert_int_equal(nvmf_tls_key_parse(KEY00, k, &len, &hash), 0);
        assert_int_equal(len, 32);
        assert_int_equal(hash, 0);
        for (int i = 0; i < 32; i++)
                assert_int_equal(k[i], i);
}

static void test_parse_rejects(void **st)
{
        (void)st;
        uint8_t k[NVMF_TLS_KEY_MAX];
        size_t len;
        int hash;
        char bad[128];
        /* one base64 character changed: the CRC-32 no longer matches */
        snprintf(bad, sizeof(bad), "%s", KEY256);
        bad[20] = bad[20] == 'A' ? 'B' : 'A';
        assert_int_equal(nvmf_tls_key_parse(bad, k, &len, &hash), -EINVAL);
        /* a 48-byte key announced as SHA-256, a 32-byte one as SHA-384 */
        snprintf(bad, sizeof(bad), "%s", KEY384);
        bad[14] = '1';
        assert_int_equal(nvmf_tls_key_parse(bad, k, &len, &hash), -EINVAL);
        snprintf(bad, sizeof(bad), "%s", KEY256);
        bad[14] = '2';
        assert_int_equal(nvmf_tls_key_parse(bad, k, &len, &hash), -EINVAL);
        /* hash 03, other prefixes, missing or extra trailer */
        snprintf(bad, sizeof(bad), "%s", KEY256);
        bad[14] = '3';
        assert_int_equal(nvmf_tls_key_parse(bad, k, &len, &hash), -EINVAL);
        assert_int_equal(nvmf_tls_key_parse(KEY256 + 1, k, &len, &hash), -EINVAL);
        assert_int_equal(
            nvmf_tls_key_parse("DHHC-1:01:VlKQBA9LJAbRTPvxqvEOMBHyuNAkt4w47dJqkq5rXdxXFc2V:", k,
                               &len, &hash),
            -EINVAL);
        snprintf(bad, sizeof(bad), "%s", KEY256);
        bad[strlen(bad) - 1] = '\0';
        assert_int_equal(nvmf_tls_key_parse(bad, k, &len, &hash), -EINVAL);
        snprintf(bad, sizeof(bad), "%sx", KEY256);
        assert_int_equal(nvmf_tls_key_parse(bad, k, &len, &hash), -EINVAL);
        assert_int_equal(nvmf_tls_key_parse("NVMeTLSkey-1:01::", k, &len, &hash), -EINVAL);
        assert_int_equal(nvmf_tls_key_parse(NULL, k, &len, &hash), -EINVAL);
        /* a bad key is refused by the RPC entry point with a message that does not echo it */
        char err[256] = "";
        assert_int_equal(
            nvmf_tls_host_psk_set(SUB, HOST, "NVMeTLSkey-1:01:secretsecret:", err, sizeof(err)),
            -EINVAL);
        assert_null(strstr(err, "secretsecret"));
        assert_int_equal(nvmf_tls_host_psk_set(SUB, "*", KEY256, err, sizeof(err)), -EINVAL);
}

static void derive_case(const char *key, const char *want_id, const char *want_psk)
{
        uint8_t cfg[NVMF_TLS_KEY_MAX], psk[NVMF_TLS_KEY_MAX];
        char id[NVMF_TLS_IDENTITY_MAX], got[2 * NVMF_TLS_KEY_MAX + 1];
        size_t len;
        int hash;
        assert_int_equal(nvmf_tls_key_parse(key, cfg, &len, &hash), 0);
        assert_int_equal(nvmf_tls_derive(cfg, len, hash, HOST, SUB, id, sizeof(id), psk), 0);
        assert_string_equal(id, want_id);
        hex(psk, len, got);
        assert_string_equal(got, want_psk);
}

static void test_derive_vectors(void **st)
{
        (void)st;
        derive_case(KEY256, "NVMe0R01 " HOST " " SUB,
                    "622e2e33f7708a7fc04fb2932064a266c23d63c418b12042eadba645fb7750a0");
        derive_case(KEY384, "NVMe0R02 " HOST " " SUB,
                    "736e70640ebb22f13c57066737cc6d8a10c4fc17c7ed93310d1155c4ee17b4a8"
                    "df31d8c1e2d469269e54f1df9407166f");
        /* hash 00: the configured key is the retained one; the cipher by its length */
        derive_case(KEY00, "NVMe0R01 " HOST " " SUB,
                    "d1827ee37861b9421985104b06c914001415cf3c5d33432c26028d652d24d0e6");
}

static void test_identity_split(void **st)
{
        (void)st;
        char h[224], s[224];
        int c;
        const char *ok = "NVMe0R02 " HOST " " SUB;
        assert_int_equal(nvmf_tls_identity_split(ok, strlen(ok), &c, h, sizeof(h), s, sizeof(s)),
                         0);
        assert_int_equal(c, 2);
        assert_string_equal(h, HOST);
        assert_string_equal(s, SUB);
        static const char *const bad[] = {
            "NVMe0R03 a b",   /* hash 03 */
            "NVMe1R01 a b",   /* version 1 (with a PSK digest): not configured PSKs */
            "NVMe0G01 a b",   /* generated PSK (DH-HMAC-CHAP secure concatenation) */
            "NVMe0R01 a",     /* no subsystem */
            "NVMe0R01 a b c", /* three NQNs */
            "NVMe0R01  b",    /* empty host */
            "NVMe0R01 a ",    /* empty subsystem */
            "NVMe0R01a b",    /* no space after the header */
            "",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(
                    nvmf_tls_identity_split(bad[i], strlen(bad[i]), &c, h, sizeof(h), s, sizeof(s)),
                    -EINVAL);
        /* an embedded NUL, and an NQN longer than 223 bytes */
        static const char nul[] = "NVMe0R01 a\0x b";
        assert_int_equal(
            nvmf_tls_identity_split(nul, sizeof(nul) - 1, &c, h, sizeof(h), s, sizeof(s)), -EINVAL);
        char longid[600];
        memset(longid, 'a', sizeof(longid));
        memcpy(longid, "NVMe0R01 ", 9);
        longid[9 + 224] = ' ';
        assert_int_equal(
            nvmf_tls_identity_split(longid, 9 + 224 + 2, &c, h, sizeof(h), s, sizeof(s)), -EINVAL);
}

static void test_psk_store(void **st)
{
        (void)st;
        char out[160], err[256];
        assert_int_equal(nvmf_tls_host_psk_set(SUB, HOST, KEY256, err, sizeof(err)), 0);
        assert_int_equal(nvmf_tls_host_psk_get(SUB, HOST, out, sizeof(out)), 0);
        assert_string_equal(out, KEY256);
        /* the discovery subsystem finds the host's key of any subsystem */
        assert_int_equal(
            nvmf_tls_psk_get("nqn.2014-08.org.nvmexpress.discovery", HOST, out, sizeof(out)), 0);
        assert_int_equal(nvmf_tls_host_psk_set(SUB, HOST, KEY384, err, sizeof(err)), 0);
        assert_int_equal(nvmf_tls_host_psk_get(SUB, HOST, out, sizeof(out)), 0);
        assert_string_equal(out, KEY384);
        nvmf_tls_subsys_forget(SUB);
        assert_int_equal(nvmf_tls_host_psk_get(SUB, HOST, out, sizeof(out)), -ENOENT);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_parse_nvme_cli_keys), cmocka_unit_test(test_parse_rejects),
            cmocka_unit_test(test_derive_vectors),      cmocka_unit_test(test_identity_split),
            cmocka_unit_test(test_psk_store),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
