/*
 * NVMe key interchange formats (nvme/keyfmt.c): DHHC-1 secrets and
 * NVMeTLSkey-1 PSKs decoded to bytes and hash id; every malformation
 * refused with a reason.  Vectors: keys printed by `nvme gen-dhchap-key`
 * (nvme-cli) and the PSK example of the NVMe/TCP specification, whose
 * CRC-32 was checked independently with Python's zlib.crc32; the rest built
 * by: base64(key || zlib.crc32(key).to_bytes(4, "little")), key[i] =
 * (i * 7 + XX) & 0xff (DHHC-1) or (i * 5 + XX) & 0xff (TLS).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <string.h>

#include "nvme/keyfmt.h"

static int dec(const char *s, enum nvme_key_kind k, uint8_t *out, size_t *len, int *hash, char *err)
{
        *len = NVME_KEY_MAX;
        *hash = -1;
        err[0] = '\0';
        return nvme_key_decode(s, k, out, len, hash, err, 128);
}

static void test_gen_dhchap_key(void **state)
{
        (void)state;
        uint8_t k[NVME_KEY_MAX];
        size_t len;
        int h;
        char err[128];
        /* nvme gen-dhchap-key --hmac=1 */
        assert_int_equal(dec("DHHC-1:01:C7XNT6VDFTFfbGtrSimOlLFg7BAdH+UwUgkLTuSA5gcd+7/H:",
                             NVME_KEY_DHCHAP, k, &len, &h, err),
                         0);
        assert_int_equal(len, 32);
        assert_int_equal(h, NVME_KEY_HASH_SHA256);
        assert_memory_equal(k, "\x0b\xb5\xcd\x4f", 4);
        assert_int_equal(dec("DHHC-1:00:ia6zGodOr4SEG0Zzaw398rpY0wqipUWj4jWjUh4HWUz6aQ2n:",
                             NVME_KEY_DHCHAP, k, &len, &h, err),
                         0);
        assert_int_equal(len, 32);
        assert_int_equal(h, NVME_KEY_HASH_NONE);
        assert_memory_equal(k, "\x89\xae\xb3\x1a", 4);
}

static void test_dhchap_lengths(void **state)
{
        (void)state;
        static const struct {
                const char *s;
                size_t len;
                int hash;
        } v[] = {
            {"DHHC-1:00:AAcOFRwjKjE4P0ZNVFtiaXB3foWMk5qhqK+2vcTL0tk/PUPo:", 32, 0},
            {"DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OOC:", 32, 1},
            {"DHHC-1:02:AgkQFx4lLDM6QUhPVl1ka3J5gIeOlZyjqrG4v8bN1Nvi6fD3/gUMExohKC82PURLIrqU+w==:",
             48, 2},
            {"DHHC-1:03:AwoRGB8mLTQ7QklQV15lbHN6gYiPlp2kq7K5wMfO1dzj6vH4/"
             "wYNFBsiKTA3PkVMU1phaG92fYSLkpmgp661vPDs2cs=:",
             64, 3},
            /* a 64-byte key with the SHA-256 transform: the kernel takes it too */
            {"DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09rh6O/2/"
             "QQLEhkgJy41PENKUVhfZm10e4KJkJeepayzuiyBBng=:",
             64, 1},
        };
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
                uint8_t k[NVME_KEY_MAX];
                size_t len;
                int h;
                char err[128];
                assert_int_equal(dec(v[i].s, NVME_KEY_DHCHAP, k, &len, &h, err), 0);
                assert_int_equal(len, v[i].len);
                assert_int_equal(h, v[i].hash);
                for (size_t j = 0; j < len; j++)
                        assert_int_equal(k[j], (uint8_t)(j * 7 + (size_t)v[i].hash));
        }
}

static void test_tls(void **state)
{
        (void)state;
        uint8_t k[NVME_KEY_MAX];
        size_t len;
        int h;
        char err[128];
        /* NVMe/TCP specification PSK interchange example */
        assert_int_equal(dec("NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:",
                             NVME_KEY_TLS, k, &len, &h, err),
                         0);
        assert_int_equal(len, 32);
        assert_int_equal(h, 1);
        /* hash field 00 (no hash: the key is used as is), as libnvme accepts it */
        assert_int_equal(dec("NVMeTLSkey-1:00:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:",
                             NVME_KEY_TLS, k, &len, &h, err),
                         0);
        assert_int_equal(len, 32);
        assert_int_equal(h, 0);
        assert_int_equal(dec("NVMeTLSkey-1:02:AgcMERYbICUqLzQ5PkNITVJXXGFma3B1en+"
                             "EiY6TmJ2ip6yxtrvAxcrP1Nne4+jt/YOD6g==:",
                             NVME_KEY_TLS, k, &len, &h, err),
                         0);
        assert_int_equal(len, 48);
        assert_int_equal(h, 2);
        for (size_t j = 0; j < len; j++)
                assert_int_equal(k[j], (uint8_t)(j * 5 + 2));
        assert_int_equal(dec("NVMeTLSkey-1:01:AQYLEBUaHyQpLjM4PUJHTFFWW2Blam90eX6DiI2Sl5w5mbdT:",
                             NVME_KEY_TLS, k, &len, &h, err),
                         0);
        assert_int_equal(len, 32);
}

static void expect_bad(const char *s, enum nvme_key_kind kind, const char *why)
{
        uint8_t k[NVME_KEY_MAX];
        memset(k, 0xee, sizeof(k));
        size_t len;
        int h;
        char err[128];
        int rc = dec(s, kind, k, &len, &h, err);
        if (rc != -EINVAL || !strstr(err, why))
                fail_msg("\"%s\": rc %d, err \"%s\", wanted \"%s\"", s, rc, err, why);
        for (size_t i = 0; i < sizeof(k); i++)
                assert_int_equal(k[i], 0xee); /* not written */
        assert_int_equal(h, -1);
}

static void test_bad(void **state)
{
        (void)state;
        const enum nvme_key_kind D = NVME_KEY_DHCHAP, T = NVME_KEY_TLS;
        expect_bad("", D, "does not start");
        expect_bad("DHHC-2:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OOC:", D,
                   "does not start");
        /* a TLS key where a DH-HMAC-CHAP secret is due, and the reverse */
        expect_bad("NVMeTLSkey-1:01:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", D,
                   "does not start");
        expect_bad("DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OOC:", T,
                   "does not start");
        expect_bad("DHHC-1:1:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OOC:", D, "two-digit");
        expect_bad("DHHC-1:04:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OOC:", D,
                   "unknown hash");
        expect_bad("NVMeTLSkey-1:03:VRLbtnN9AQb2WXW3c9+wEf/DRLz0QuLdbYvEhwtdWwNf9LrZ:", T,
                   "unknown hash");
        expect_bad("DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OOC", D, "closing");
        expect_bad("DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OOC: ", D, "after");
        expect_bad("DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OOC::", D, "after");
        expect_bad("DHHC-1:01::", D, "bad length");
        expect_bad("DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OO:", D, "bad length");
        expect_bad("DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1O C:", D,
                   "invalid base64");
        expect_bad("DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09p=1OOC:", D,
                   "invalid base64");
        expect_bad("DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OO=:", D, "key bytes");
        /* one bit flipped in the key: the CRC catches it */
        expect_bad("DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OOD:", D, "CRC");
        expect_bad("DHHC-1:01:BQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OOC:", D, "CRC");
        /* 16-byte key + CRC: too short */
        expect_bad("DHHC-1:01:AAECAwQFBgcICQoLDA0ODw==:", D, "key bytes");
        /* a 48-byte PSK claiming SHA-256 */
        expect_bad("NVMeTLSkey-1:01:AgcMERYbICUqLzQ5PkNITVJXXGFma3B1en+EiY6TmJ2ip6yxtrvAxcrP1Nne4+"
                   "jt/YOD6g==:",
                   T, "hash 01 needs 32");
        /* far too long */
        char big[300] = "DHHC-1:01:";
        memset(big + 10, 'A', 200);
        strcpy(big + 210, ":");
        expect_bad(big, D, "bad length");
}

static void test_small_out(void **state)
{
        (void)state;
        uint8_t k[16];
        size_t len = sizeof(k);
        int h = -1;
        char err[64];
        assert_int_equal(
            nvme_key_decode("DHHC-1:01:AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09pl1OOC:",
                            NVME_KEY_DHCHAP, k, &len, &h, err, sizeof(err)),
            -ENOSPC);
        assert_int_equal(h, -1);
        /* errors need no buffer */
        len = sizeof(k);
        assert_int_equal(nvme_key_decode("x", NVME_KEY_DHCHAP, k, &len, &h, NULL, 0), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_gen_dhchap_key),
            cmocka_unit_test(test_dhchap_lengths),
            cmocka_unit_test(test_tls),
            cmocka_unit_test(test_bad),
            cmocka_unit_test(test_small_out),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
