/*
 * The NVMe/TCP secure channel, target side (NVMe/TCP transport 1.0c 3.6.1,
 * TP 8011): configured PSKs in the NVMe interchange format, the retained
 * PSK and TLS PSK derivations and the PSK identity as libnvme and the Linux
 * kernel compute them, and an OpenSSL TLS 1.3 server context that finds a
 * connection's PSK by the identity the host offers (no certificates).  See
 * nvmf/tls.h.  Nothing here logs a key.
 */
#include "nvmf/tls.h"

#include "nvmf/nvmf.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt/log.h"

#define MOD           "nvmf-tls"
#define DISCOVERY_NQN "nqn.2014-08.org.nvmexpress.discovery"
#define NQN_MAX       223
#define KEY_TEXT_MAX  128

/* ---- configured keys ---- */

struct psk_entry {
        char subnqn[NQN_MAX + 1];
        char hostnqn[NQN_MAX + 1];
        char key[KEY_TEXT_MAX];
        struct psk_entry *next;
};

static pthread_mutex_t psk_lock = PTHREAD_MUTEX_INITIALIZER;
static struct psk_entry *psk_head;

static void entry_free(struct psk_entry *e)
{
        OPENSSL_cleanse(e->key, sizeof(e->key));
        free(e);
}

int nvmf_tls_psk_set(const char *subnqn, const char *hostnqn, const char *key)
{
        if (!subnqn || !hostnqn || strlen(subnqn) > NQN_MAX || strlen(hostnqn) > NQN_MAX ||
            (key && strlen(key) >= KEY_TEXT_MAX))
                return -EINVAL;
        pthread_mutex_lock(&psk_lock);
        struct psk_entry **pp = &psk_head;
        for (; *pp; pp = &(*pp)->next)
                if (strcmp((*pp)->subnqn, subnqn) == 0 && strcmp((*pp)->hostnqn, hostnqn) == 0)
                        break;
        if (!key) {
                if (*pp) {
                        struct psk_entry *e = *pp;
                        *pp = e->next;
                        entry_free(e);
                }
                pthread_mutex_unlock(&psk_lock);
                return 0;
        }
        struct psk_entry *e = *pp;
        if (!e) {
                e = calloc(1, sizeof(*e));
                if (!e) {
                        pthread_mutex_unlock(&psk_lock);
                        return -ENOMEM;
                }
                snprintf(e->subnqn, sizeof(e->subnqn), "%s", subnqn);
                snprintf(e->hostnqn, sizeof(e->hostnqn), "%s", hostnqn);
                *pp = e;
        }
        snprintf(e->key, sizeof(e->key), "%s", key);
        pthread_mutex_unlock(&psk_lock);
        return 0;
}

void nvmf_tls_psk_drop_subsys(const char *subnqn)
{
        pthread_mutex_lock(&psk_lock);
        for (struct psk_entry **pp = &psk_head; *pp;) {
                struct psk_entry *e = *pp;
                if (strcmp(e->subnqn, subnqn) == 0) {
                        *pp = e->next;
                        entry_free(e);
                } else {
                        pp = &e->next;
                }
        }
        pthread_mutex_unlock(&psk_lock);
}

int nvmf_tls_psk_get(const char *subnqn, const char *hostnqn, char *out, size_t len)
{
        bool disc = strcmp(subnqn, DISCOVERY_NQN) == 0;
        int rc = -ENOENT;
        pthread_mutex_lock(&psk_lock);
        for (struct psk_entry *e = psk_head; e; e = e->next) {
                if (strcmp(e->hostnqn, hostnqn) == 0 && (disc || strcmp(e->subnqn, subnqn) == 0)) {
                        snprintf(out, len, "%s", e->key);
                        rc = 0;
                        break;
                }
        }
        pthread_mutex_unlock(&psk_lock);
        return rc;
}

/* ---- OpenSSL server ---- */

/*
 * OpenSSL asks for the PSK of the identity the host offered: derive it from
 * the configured key of (host, subsystem) and hand back a TLS 1.3 session
 * with the cipher suite the identity names.  An unknown identity gets no
 * session, and the handshake fails (no certificate to fall back to).
 */
static int psk_find(SSL *ssl, const unsigned char *id, size_t idlen, SSL_SESSION **sess)
{
        struct nvmf_tls_peer *peer = SSL_get_app_data(ssl);
        char host[NQN_MAX + 1], sub[NQN_MAX + 1], text[KEY_TEXT_MAX];
        char want[NVMF_TLS_IDENTITY_MAX];
        uint8_t cfg[NVMF_TLS_KEY_MAX], psk[NVMF_TLS_KEY_MAX];
        size_t klen;
        int cipher, hash;
        *sess = NULL;
        if (nvmf_tls_identity_split((const char *)id, idlen, &cipher, host, sizeof(host), sub,
                                    sizeof(sub)) < 0)
                return 1;
        if (nvmf_tls_psk_get(sub, host, text, sizeof(text)) < 0)
                return 1;
        int rc = nvmf_tls_key_parse(text, cfg, &klen, &hash);
        OPENSSL_cleanse(text, sizeof(text));
        if (rc == 0)
                rc = nvmf_tls_derive(cfg, klen, hash, host, sub, want, sizeof(want), psk);
        OPENSSL_cleanse(cfg, sizeof(cfg));
        if (rc < 0 || strlen(want) != idlen || memcmp(want, id, idlen) != 0) {
                OPENSSL_cleanse(psk, sizeof(psk));
                return 1; /* another hash than the key's: not this key */
        }
        static const unsigned char suites[2][2] = {{0x13, 0x01}, {0x13, 0x02}};
        const SSL_CIPHER *c = SSL_CIPHER_find(ssl, suites[cipher - 1]);
        SSL_SESSION *s = c ? SSL_SESSION_new() : NULL;
        if (!s || !SSL_SESSION_set1_master_key(s, psk, klen) || !SSL_SESSION_set_cipher(s, c) ||
            !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
                SSL_SESSION_free(s);
                OPENSSL_cleanse(psk, sizeof(psk));
                return 0;
        }
        OPENSSL_cleanse(psk, sizeof(psk));
        if (peer) {
                snprintf(peer->hostnqn, sizeof(peer->hostnqn), "%s", host);
                snprintf(peer->subnqn, sizeof(peer->subnqn), "%s", sub);
                peer->found = true;
        }
        *sess = s;
        return 1;
}

static pthread_once_t ctx_once = PTHREAD_ONCE_INIT;
static SSL_CTX *server_ctx;

static void ctx_make(void)
{
        SSL_CTX *c = SSL_CTX_new(TLS_server_method());
        if (!c)
                return;
        if (!SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION) ||
            !SSL_CTX_set_ciphersuites(c, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384")) {
                SSL_CTX_free(c);
                return;
        }
        /* The reactor writes from its send queue: a partial write is progress. */
        SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                SSL_MODE_RELEASE_BUFFERS);
        /* PSK only: no tickets to resume with, no session cache (3.6.1.3). */
        SSL_CTX_set_num_tickets(c, 0);
        SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
        SSL_CTX_set_options(c, SSL_OP_NO_TICKET);
        SSL_CTX_set_psk_find_session_callback(c, psk_find);
        server_ctx = c;
}

SSL *nvmf_tls_new(int fd, struct nvmf_tls_peer *peer)
{
        pthread_once(&ctx_once, ctx_make);
        if (!server_ctx) {
                LOG_ERR(MOD, "cannot make the TLS context");
                return NULL;
        }
        SSL *s = SSL_new(server_ctx);
        if (!s)
                return NULL;
        memset(peer, 0, sizeof(*peer));
        SSL_set_app_data(s, peer);
        if (!SSL_set_fd(s, fd)) {
                SSL_free(s);
                return NULL;
        }
        SSL_set_accept_state(s);
        return s;
}

/* ---- nvmf/nvmf.h ---- */

int nvmf_tls_host_psk_set(const char *subnqn, const char *hostnqn, const char *key, char *err,
                          size_t errlen)
{
        if (key) {
                uint8_t k[NVMF_TLS_KEY_MAX];
                size_t len;
                int hash;
                int rc = nvmf_tls_key_parse(key, k, &len, &hash);
                OPENSSL_cleanse(k, sizeof(k));
                if (rc < 0 || strlen(key) >= KEY_TEXT_MAX) {
                        /* Never echo the key. */
                        snprintf(err, errlen,
                                 "tls_psk is not a valid \"NVMeTLSkey-1:HH:<base64>:\" key "
                                 "(hash 00/01/02, 32 or 48 bytes, CRC-32)");
                        return -EINVAL;
                }
                if (strcmp(hostnqn, "*") == 0) {
                        snprintf(err, errlen, "tls_psk needs a host NQN, not \"*\"");
                        return -EINVAL;
                }
        }
        int rc = nvmf_tls_psk_set(subnqn, hostnqn, key);
        if (rc < 0)
                snprintf(err, errlen, "cannot store the key: %s", strerror(-rc));
        return rc;
}

void nvmf_tls_subsys_forget(const char *subnqn)
{
        nvmf_tls_psk_drop_subsys(subnqn);
}

int nvmf_tls_host_psk_get(const char *subnqn, const char *hostnqn, char *out, size_t len)
{
        if (strcmp(subnqn, DISCOVERY_NQN) == 0)
                return -ENOENT;
        return nvmf_tls_psk_get(subnqn, hostnqn, out, len);
}
