/*
 * NVMe/TCP TLS keys (TCP transport 1.0c 3.6.1.3; see nvmf/tls.h): the
 * configured PSK interchange format, the retained PSK and TLS PSK
 * derivations (HKDF-Expand-Label, RFC 8446 7.1) and the version 0 PSK
 * identity, as libnvme (nvme-cli) computes them.  Pure functions over
 * OpenSSL and ISA-L (the key's CRC-32), shared with slate-perf's client.
 */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <stdio.h>
#include <string.h>

#include "nvme/keyfmt.h"
#include "nvmf/tls.h"

#define NQN_MAX 223

static const EVP_MD *hash_md(int hash)
{
        return hash == 1 ? EVP_sha256() : hash == 2 ? EVP_sha384() : NULL;
}

/* The interchange format is nvme/keyfmt's (one decoder for TLS PSKs and DH-HMAC-CHAP secrets). */
int nvmf_tls_key_parse(const char *s, uint8_t *key, size_t *len, int *hash)
{
        *len = NVMF_TLS_KEY_MAX; /* key holds this much (nvmf/tls.h) */
        return nvme_key_decode(s, NVME_KEY_TLS, key, len, hash, NULL, 0) < 0 ? -EINVAL : 0;
}

/* HKDF-Expand-Label(HKDF-Extract(0, in), label, context, len) (RFC 8446 7.1). */
static int expand_label(const EVP_MD *md, const uint8_t *in, size_t len, const char *label,
                        const char *context, uint8_t *out)
{
        uint8_t info[2 + 1 + 255 + 1 + 255];
        size_t ll = strlen("tls13 ") + strlen(label), cl = strlen(context), n = 0;
        if (ll > 255 || cl > 255)
                return -EINVAL;
        info[n++] = (uint8_t)(len >> 8);
        info[n++] = (uint8_t)len;
        info[n++] = (uint8_t)ll;
        memcpy(info + n, "tls13 ", 6);
        memcpy(info + n + 6, label, ll - 6);
        n += ll;
        info[n++] = (uint8_t)cl;
        memcpy(info + n, context, cl);
        n += cl;
        EVP_PKEY_CTX *c = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, NULL);
        size_t olen = len;
        int ok = c && EVP_PKEY_derive_init(c) > 0 && EVP_PKEY_CTX_set_hkdf_md(c, md) > 0 &&
                 EVP_PKEY_CTX_set1_hkdf_key(c, in, (int)len) > 0 &&
                 EVP_PKEY_CTX_add1_hkdf_info(c, info, (int)n) > 0 &&
                 EVP_PKEY_derive(c, out, &olen) > 0 && olen == len;
        EVP_PKEY_CTX_free(c);
        return ok ? 0 : -EIO;
}

int nvmf_tls_derive(const uint8_t *cfg, size_t len, int hash, const char *hostnqn,
                    const char *subnqn, char *identity, size_t idlen, uint8_t *psk)
{
        if ((len != 32 && len != 48) || !hostnqn || !subnqn)
                return -EINVAL;
        /* The cipher's hash: the key's own, or by length for an untransformed key. */
        int cipher = hash ? hash : len == 32 ? 1 : 2;
        uint8_t retained[NVMF_TLS_KEY_MAX];
        int rc = 0;
        if (hash)
                rc = expand_label(hash_md(hash), cfg, len, "HostNQN", hostnqn, retained);
        else
                memcpy(retained, cfg, len);
        int n = snprintf(identity, idlen, "NVMe0R%02d %s %s", cipher, hostnqn, subnqn);
        if (n < 0 || (size_t)n >= idlen)
                rc = -EINVAL;
        if (rc == 0)
                rc = expand_label(hash_md(cipher), retained, len, "nvme-tls-psk", identity, psk);
        OPENSSL_cleanse(retained, sizeof(retained));
        return rc;
}

int nvmf_tls_identity_split(const char *id, size_t idlen, int *cipher, char *hostnqn, size_t hlen,
                            char *subnqn, size_t slen)
{
        /* "NVMe0R0C " + host + ' ' + sub; NQNs hold no spaces. */
        if (idlen < 12 || idlen >= NVMF_TLS_IDENTITY_MAX || memcmp(id, "NVMe0R0", 7) != 0 ||
            (id[7] != '1' && id[7] != '2') || id[8] != ' ')
                return -EINVAL;
        const char *h = id + 9, *e = id + idlen;
        const char *sp = memchr(h, ' ', (size_t)(e - h));
        if (!sp || sp == h || sp + 1 >= e || memchr(sp + 1, ' ', (size_t)(e - sp - 1)) ||
            memchr(id, '\0', idlen))
                return -EINVAL;
        size_t hl = (size_t)(sp - h), sl = (size_t)(e - sp - 1);
        if (hl > NQN_MAX || sl > NQN_MAX || hl >= hlen || sl >= slen)
                return -EINVAL;
        memcpy(hostnqn, h, hl);
        hostnqn[hl] = '\0';
        memcpy(subnqn, sp + 1, sl);
        subnqn[sl] = '\0';
        *cipher = id[7] - '0';
        return 0;
}
