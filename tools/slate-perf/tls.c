/*
 * slate-perf's NVMe/TCP secure channel, host side (TCP transport 1.0c
 * 3.6.1, TP 8011): TLS 1.3 with a pre-shared key over OpenSSL.  The key is
 * a configured PSK in the interchange format (--tls-psk); the identity and
 * the TLS PSK are derived from it, the host NQN and the subsystem NQN as
 * nvme-cli does (src/nvmf/tls_key.c, shared with slated).  --tls-identity
 * offers another identity with the same derived key (to test refusals).
 */
#include "tls.h"

#include <errno.h>
#include <limits.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvmf/tls.h"

#define STAGE 16384

struct perf_tls {
        SSL_CTX *ctx;
        SSL *ssl;
        char identity[NVMF_TLS_IDENTITY_MAX];
        uint8_t psk[NVMF_TLS_KEY_MAX];
        size_t psk_len;
        int cipher;   /* 1: TLS_AES_128_GCM_SHA256, 2: TLS_AES_256_GCM_SHA384 */
        size_t retry; /* SSL_write wants these bytes again */
        uint8_t stage[STAGE];
};

static int use_session(SSL *ssl, const EVP_MD *md, const unsigned char **id, size_t *idlen,
                       SSL_SESSION **sess)
{
        struct perf_tls *t = SSL_get_app_data(ssl);
        static const unsigned char suites[2][2] = {{0x13, 0x01}, {0x13, 0x02}};
        const SSL_CIPHER *c = SSL_CIPHER_find(ssl, suites[t->cipher - 1]);
        (void)md;
        *sess = NULL;
        if (!c)
                return 0;
        SSL_SESSION *s = SSL_SESSION_new();
        if (!s || !SSL_SESSION_set1_master_key(s, t->psk, t->psk_len) ||
            !SSL_SESSION_set_cipher(s, c) || !SSL_SESSION_set_protocol_version(s, TLS1_3_VERSION)) {
                SSL_SESSION_free(s);
                return 0;
        }
        *id = (const unsigned char *)t->identity;
        *idlen = strlen(t->identity);
        *sess = s;
        return 1;
}

int perf_tls_connect(struct perf_tls **out, int fd, const char *key, const char *identity,
                     const char *hostnqn, const char *subnqn)
{
        uint8_t cfg[NVMF_TLS_KEY_MAX];
        size_t len;
        int hash;
        struct perf_tls *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        if (nvmf_tls_key_parse(key, cfg, &len, &hash) < 0) {
                fprintf(stderr, "slate-perf: --tls-psk is not an \"NVMeTLSkey-1:HH:...:\" key\n");
                free(t);
                return -EINVAL;
        }
        /* An identity given names the NQNs its PSK is for. */
        char h[224], sub[224];
        int cipher;
        if (identity && nvmf_tls_identity_split(identity, strlen(identity), &cipher, h, sizeof(h),
                                                sub, sizeof(sub)) == 0) {
                hostnqn = h;
                subnqn = sub;
        }
        int rc = nvmf_tls_derive(cfg, len, hash, hostnqn, subnqn, t->identity, sizeof(t->identity),
                                 t->psk);
        OPENSSL_cleanse(cfg, sizeof(cfg));
        if (rc < 0) {
                free(t);
                return rc;
        }
        t->psk_len = len;
        t->cipher = hash ? hash : len == 32 ? 1 : 2;
        if (identity)
                snprintf(t->identity, sizeof(t->identity), "%s", identity);
        t->ctx = SSL_CTX_new(TLS_client_method());
        if (!t->ctx || !SSL_CTX_set_min_proto_version(t->ctx, TLS1_3_VERSION) ||
            !SSL_CTX_set_ciphersuites(t->ctx, t->cipher == 1 ? "TLS_AES_128_GCM_SHA256"
                                                             : "TLS_AES_256_GCM_SHA384")) {
                rc = -EIO;
                goto fail;
        }
        SSL_CTX_set_mode(t->ctx,
                         SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
        SSL_CTX_set_psk_use_session_callback(t->ctx, use_session);
        t->ssl = SSL_new(t->ctx);
        if (!t->ssl || !SSL_set_fd(t->ssl, fd)) {
                rc = -EIO;
                goto fail;
        }
        SSL_set_app_data(t->ssl, t);
        if (SSL_connect(t->ssl) != 1) {
                unsigned long e = ERR_peek_last_error();
                char buf[160];
                ERR_error_string_n(e, buf, sizeof(buf));
                fprintf(stderr, "slate-perf: TLS handshake failed: %s\n", e ? buf : "closed");
                ERR_clear_error();
                rc = -ECONNREFUSED;
                goto fail;
        }
        *out = t;
        return 0;
fail:
        perf_tls_free(t);
        return rc;
}

const char *perf_tls_cipher(const struct perf_tls *t)
{
        return SSL_CIPHER_get_name(SSL_get_current_cipher(t->ssl));
}

ssize_t perf_tls_writev(struct perf_tls *t, const struct iovec *iov, int n)
{
        size_t want = t->retry ? t->retry : STAGE, len = 0;
        const void *src = t->stage;
        if (iov[0].iov_len >= want) {
                src = iov[0].iov_base;
                len = want;
        } else {
                for (int i = 0; i < n && len < want; i++) {
                        size_t l = iov[i].iov_len < want - len ? iov[i].iov_len : want - len;
                        memcpy(t->stage + len, iov[i].iov_base, l);
                        len += l;
                }
        }
        int w = SSL_write(t->ssl, src, (int)len);
        if (w > 0) {
                t->retry = 0;
                return w;
        }
        int e = SSL_get_error(t->ssl, w);
        if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
                t->retry = len;
                return -EAGAIN;
        }
        ERR_clear_error();
        return e == SSL_ERROR_SYSCALL && errno ? -errno : -EIO;
}

ssize_t perf_tls_read(struct perf_tls *t, void *buf, size_t len)
{
        int n = SSL_read(t->ssl, buf, len > INT_MAX ? INT_MAX : (int)len);
        if (n > 0)
                return n;
        int e = SSL_get_error(t->ssl, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return -EAGAIN;
        if (e == SSL_ERROR_ZERO_RETURN)
                return 0;
        ERR_clear_error();
        if (e == SSL_ERROR_SYSCALL)
                return errno ? -errno : 0;
        return -EIO;
}

bool perf_tls_pending(const struct perf_tls *t)
{
        return SSL_has_pending(t->ssl);
}

void perf_tls_free(struct perf_tls *t)
{
        if (!t)
                return;
        SSL_free(t->ssl);
        SSL_CTX_free(t->ctx);
        OPENSSL_cleanse(t->psk, sizeof(t->psk));
        free(t);
}
