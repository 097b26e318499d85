/* NVMe key interchange formats (see nvme/keyfmt.h). */
#include "nvme/keyfmt.h"

#include <errno.h>
#include <isa-l.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "slate/byteorder.h"

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
        if (err && errlen) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(err, errlen, fmt, ap);
                va_end(ap);
        }
        return rc;
}

static int is_b64(char c)
{
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '+' || c == '/';
}

int nvme_key_decode(const char *s, enum nvme_key_kind kind, uint8_t *out, size_t *len, int *hash,
                    char *err, size_t errlen)
{
        const char *prefix = kind == NVME_KEY_TLS ? "NVMeTLSkey-1:" : "DHHC-1:";
        const char *what = kind == NVME_KEY_TLS ? "TLS PSK" : "DH-HMAC-CHAP secret";
        size_t plen = strlen(prefix);
        /* 64-byte key + 4-byte CRC: 92 base64 characters; one more to see excess. */
        unsigned char raw[96];
        char b64[128];

        if (!s || !out || !len || !hash)
                return fail(err, errlen, -EINVAL, "%s: missing argument", what);
        if (strncmp(s, prefix, plen) != 0)
                return fail(err, errlen, -EINVAL, "%s: does not start with \"%s\"", what, prefix);
        s += plen;
        if (!(s[0] >= '0' && s[0] <= '9' && s[1] >= '0' && s[1] <= '9' && s[2] == ':'))
                return fail(err, errlen, -EINVAL, "%s: expected a two-digit hash field and ':'",
                            what);
        int h = (s[0] - '0') * 10 + (s[1] - '0');
        int maxh = kind == NVME_KEY_TLS ? 2 : 3;
        int minh = 0; /* TLS 00: no hash given, used as is (libnvme accepts it too) */
        if (h < minh || h > maxh)
                return fail(err, errlen, -EINVAL, "%s: unknown hash field %02d (%02d..%02d)", what,
                            h, minh, maxh);
        s += 3;
        const char *end = strchr(s, ':');
        if (!end)
                return fail(err, errlen, -EINVAL, "%s: missing the closing ':'", what);
        if (end[1] != '\0')
                return fail(err, errlen, -EINVAL, "%s: characters after the closing ':'", what);
        size_t n = (size_t)(end - s);
        if (n == 0 || n % 4 != 0 || n >= sizeof(b64))
                return fail(err, errlen, -EINVAL, "%s: base64 part of bad length %zu", what, n);
        size_t pad = 0;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '=' && i >= n - 2) {
                        pad++;
                        continue;
                }
                if (!is_b64(s[i]) || pad)
                        return fail(err, errlen, -EINVAL,
                                    "%s: invalid base64 character at offset %zu", what, i);
        }
        memcpy(b64, s, n);
        b64[n] = '\0';
        int dn = EVP_DecodeBlock(raw, (const unsigned char *)b64, (int)n);
        OPENSSL_cleanse(b64, sizeof(b64));
        if (dn < 0 || (size_t)dn < pad) {
                OPENSSL_cleanse(raw, sizeof(raw));
                return fail(err, errlen, -EINVAL, "%s: invalid base64", what);
        }
        size_t klen = (size_t)dn - pad; /* EVP_DecodeBlock counts the padding as zero bytes */
        int okl;
        if (kind == NVME_KEY_TLS)
                okl = h == 0 ? klen == 36 || klen == 52 : klen == (h == 1 ? 36u : 52u);
        else
                okl = klen == 36 || klen == 52 || klen == 68;
        if (!okl) {
                OPENSSL_cleanse(raw, sizeof(raw));
                if (kind == NVME_KEY_TLS)
                        return fail(err, errlen, -EINVAL,
                                    "%s: %zu key bytes, hash %02d needs %s (plus 4 CRC bytes)",
                                    what, klen >= 4 ? klen - 4 : 0, h,
                                    h == 0   ? "32 or 48"
                                    : h == 1 ? "32"
                                             : "48");
                return fail(err, errlen, -EINVAL,
                            "%s: %zu key bytes, need 32, 48 or 64 (plus 4 CRC bytes)", what,
                            klen >= 4 ? klen - 4 : 0);
        }
        klen -= 4;
        uint32_t crc = crc32_gzip_refl(0, raw, klen);
        if ((uint32_t)slate_get_le(raw + klen, 4) != crc) {
                OPENSSL_cleanse(raw, sizeof(raw));
                return fail(err, errlen, -EINVAL, "%s: CRC-32 mismatch (mistyped key?)", what);
        }
        if (*len < klen) {
                OPENSSL_cleanse(raw, sizeof(raw));
                return fail(err, errlen, -ENOSPC, "%s: output buffer too small", what);
        }
        memcpy(out, raw, klen);
        OPENSSL_cleanse(raw, sizeof(raw));
        *len = klen;
        *hash = h;
        return 0;
}
