/*
 * The NVMe key interchange formats (public: the TLS code and the management
 * layer decode configured secrets through it).
 *
 *   DH-HMAC-CHAP secret (NVMe Base 2.0 8.13.5.8 / TP 8006):
 *     "DHHC-1:XX:<base64(key || CRC-32(key))>:"
 *     XX = 00 (key used as is), 01 SHA-256, 02 SHA-384, 03 SHA-512: the hash
 *     of the host/controller key transform; the key is 32, 48 or 64 bytes
 *     (any of them with any XX, as the Linux kernel accepts).
 *   TLS PSK (NVMe/TCP 3.6.1.5 PSK interchange format):
 *     "NVMeTLSkey-1:XX:<base64(PSK || CRC-32(PSK))>:"
 *     XX = 01 SHA-256 (32-byte PSK), 02 SHA-384 (48-byte PSK).
 *
 * The CRC-32 is the gzip/zlib one (reflected IEEE, as nvme-cli's crc32()
 * and the kernel's ~crc32(~0, ...)), stored little-endian after the key.
 */
#ifndef NVME_KEYFMT_H
#define NVME_KEYFMT_H

#include <stddef.h>
#include <stdint.h>

#define NVME_KEY_MAX 64 /* the longest decoded key */

enum nvme_key_kind {
        NVME_KEY_DHCHAP, /* "DHHC-1:" */
        NVME_KEY_TLS,    /* "NVMeTLSkey-1:" */
};

/* NVMe hash identifiers (the XX field; also the HMAC ids of AUTH_Negotiate). */
enum nvme_key_hash {
        NVME_KEY_HASH_NONE = 0,
        NVME_KEY_HASH_SHA256 = 1,
        NVME_KEY_HASH_SHA384 = 2,
        NVME_KEY_HASH_SHA512 = 3,
};

/*
 * Decodes s (NUL-terminated, no surrounding white space) of the given kind:
 * on success writes the key to out (capacity *len on entry, at least
 * NVME_KEY_MAX is always enough), its length to *len, the XX field to *hash,
 * and returns 0.  On a malformed string returns -EINVAL (-ENOSPC when out is
 * too small) and, when err is not NULL, a one-line reason that never quotes
 * the key material.  out is not
 * written on failure.
 */
int nvme_key_decode(const char *s, enum nvme_key_kind kind, uint8_t *out, size_t *len, int *hash,
                    char *err, size_t errlen);

#endif
