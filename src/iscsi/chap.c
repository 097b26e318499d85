/*
 * iSCSI CHAP (RFC 7143 12.1.3, RFC 1994): the target side of one-way and
 * mutual authentication, with the digests Linux open-iscsi offers: MD5 (5),
 * SHA-1 (6), SHA-256 (7) and SHA3-256 (8) — the CHAP_A values IANA lists for
 * iSCSI.  Hashes and randomness come from OpenSSL; nothing here logs a
 * secret.
 */
#include <ctype.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iscsi/internal.h"

static const EVP_MD *chap_md(int alg)
{
        switch (alg) {
        case ISCSI_CHAP_MD5:
                return EVP_md5();
        case ISCSI_CHAP_SHA1:
                return EVP_sha1();
        case ISCSI_CHAP_SHA256:
                return EVP_sha256();
        case ISCSI_CHAP_SHA3_256:
                return EVP_sha3_256();
        }
        return NULL;
}

int iscsi_chap_pick(const char *list)
{
        /* The initiator's order of preference, first one we have. */
        char tmp[256];
        snprintf(tmp, sizeof(tmp), "%s", list);
        char *save = NULL;
        for (char *t = strtok_r(tmp, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                char *end;
                long v = strtol(t, &end, 10);
                if (*end == 0 && end != t && chap_md((int)v))
                        return (int)v;
        }
        return -1;
}

int iscsi_chap_response(int alg, uint8_t id, const char *secret, const uint8_t *chal, size_t clen,
                        uint8_t *out, unsigned *outlen)
{
        const EVP_MD *md = chap_md(alg);
        EVP_MD_CTX *ctx = md ? EVP_MD_CTX_new() : NULL;
        if (!ctx)
                return -EINVAL;
        int ok = EVP_DigestInit_ex(ctx, md, NULL) && EVP_DigestUpdate(ctx, &id, 1) &&
                 EVP_DigestUpdate(ctx, secret, strlen(secret)) &&
                 EVP_DigestUpdate(ctx, chal, clen) && EVP_DigestFinal_ex(ctx, out, outlen);
        EVP_MD_CTX_free(ctx);
        return ok ? 0 : -EIO;
}

int iscsi_chap_random(uint8_t *buf, size_t len)
{
        return RAND_bytes(buf, (int)len) == 1 ? 0 : -EIO;
}

/* RFC 7143 6.1: binary values as 0x<hex> (or 0X); base64 (0b) is accepted too. */
int iscsi_chap_decode(const char *s, uint8_t *out, size_t max)
{
        if (s[0] != '0')
                return -EINVAL;
        if (s[1] == 'x' || s[1] == 'X') {
                s += 2;
                size_t n = strlen(s);
                if (n == 0 || n % 2 || n / 2 > max)
                        return -EINVAL;
                for (size_t i = 0; i < n / 2; i++) {
                        if (!isxdigit((unsigned char)s[2 * i]) ||
                            !isxdigit((unsigned char)s[2 * i + 1]))
                                return -EINVAL;
                        char b[3] = {s[2 * i], s[2 * i + 1], 0};
                        out[i] = (uint8_t)strtoul(b, NULL, 16);
                }
                return (int)(n / 2);
        }
        if (s[1] == 'b' || s[1] == 'B') {
                s += 2;
                size_t n = strlen(s);
                if (n == 0 || n % 4 || n / 4 * 3 > max + 2)
                        return -EINVAL;
                uint8_t tmp[ISCSI_VALUE_MAX];
                int got = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)n);
                if (got < 0)
                        return -EINVAL;
                if (n >= 1 && s[n - 1] == '=')
                        got--;
                if (n >= 2 && s[n - 2] == '=')
                        got--;
                if (got <= 0 || (size_t)got > max)
                        return -EINVAL;
                memcpy(out, tmp, (size_t)got);
                return got;
        }
        return -EINVAL;
}

void iscsi_chap_encode(const uint8_t *in, size_t len, char *out, size_t outlen)
{
        size_t o = (size_t)snprintf(out, outlen, "0x");
        for (size_t i = 0; i < len && o + 3 <= outlen; i++)
                o += (size_t)snprintf(out + o, outlen - o, "%02x", in[i]);
}

bool iscsi_chap_equal(const uint8_t *a, const uint8_t *b, size_t len)
{
        return CRYPTO_memcmp(a, b, len) == 0;
}
