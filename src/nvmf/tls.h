/*
 * The NVMe/TCP secure channel (NVMe/TCP transport 1.0c 3.6, TP 8011):
 * TLS 1.3 with pre-shared keys, target side, over OpenSSL.  Private to
 * src/nvmf/ (tcp.c drives the connection; the unit tests and the fuzzer use
 * the key functions).
 *
 * Keys: a host entry of a subsystem carries a configured PSK in the NVMe
 * interchange format "NVMeTLSkey-1:HH:<base64 of key + CRC-32>:" where HH
 * is 00 (use the key as the retained PSK), 01 (derive the retained PSK
 * with SHA-256) or 02 (with SHA-384).  The TLS PSK a host offers under
 * identity "NVMe0RCC <hostnqn> <subnqn>" (CC: 01 = SHA-256 /
 * TLS_AES_128_GCM_SHA256, 02 = SHA-384 / TLS_AES_256_GCM_SHA384) is
 * derived exactly as libnvme (nvme-cli) and the Linux kernel do:
 *   retained = HKDF-Expand-Label(HKDF-Extract(0, configured), "HostNQN", hostnqn, L)
 *   TLS PSK  = HKDF-Expand-Label(HKDF-Extract(0, retained), "nvme-tls-psk", identity, L)
 * (RFC 8446 7.1 HkdfLabel, L = the key length).
 */
#ifndef NVMF_TLS_H
#define NVMF_TLS_H

#ifndef SLATE_MODULE_NVMF
#error "nvmf/tls.h is private to src/nvmf/; use nvmf/nvmf.h"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NVMF_TLS_KEY_MAX      48  /* SHA-384 keys */
#define NVMF_TLS_IDENTITY_MAX 600 /* "NVMe0R01 " + two NQNs (223 each) */

/*
 * Parse an interchange-format configured PSK: 0, the key bytes (32 or 48),
 * *len and *hash (0, 1 = SHA-256, 2 = SHA-384); -EINVAL for anything else
 * (bad prefix, base64, length for its hash, CRC-32).
 */
int nvmf_tls_key_parse(const char *s, uint8_t *key, size_t *len, int *hash);

/*
 * The TLS PSK and the identity (version 0) for a configured key between
 * hostnqn and subnqn, as nvme-cli derives them.  0 or -EINVAL / -EIO.
 */
int nvmf_tls_derive(const uint8_t *cfg, size_t len, int hash, const char *hostnqn,
                    const char *subnqn, char *identity, size_t idlen, uint8_t *psk);

/* Split an identity "NVMe0RCC <hostnqn> <subnqn>": 0 and cipher 1/2, or -EINVAL. */
int nvmf_tls_identity_split(const char *id, size_t idlen, int *cipher, char *hostnqn, size_t hlen,
                            char *subnqn, size_t slen);

/* What a connection's handshake found (SSL app data points to it). */
struct nvmf_tls_peer {
        char hostnqn[224];
        char subnqn[224];
        bool found; /* the PSK callback matched a configured key */
};

/*
 * A server-side TLS 1.3 PSK session object on the connected socket fd, its
 * handshake results written into *peer; NULL if OpenSSL fails.
 */
struct ssl_st *nvmf_tls_new(int fd, struct nvmf_tls_peer *peer);

/* ---- the configured PSKs (subsystem, host) -> key text; under their own lock ---- */

/* Set (key non-NULL, already validated) or drop (NULL) a host's key. 0 or -ENOMEM. */
int nvmf_tls_psk_set(const char *subnqn, const char *hostnqn, const char *key);
/* Drop every key of a subsystem (it was deleted). */
void nvmf_tls_psk_drop_subsys(const char *subnqn);
/*
 * Copy the key text of (subnqn, hostnqn) into out: 0, or -ENOENT.  For the
 * discovery NQN, the host's key of any subsystem is taken.
 */
int nvmf_tls_psk_get(const char *subnqn, const char *hostnqn, char *out, size_t len);

#endif
