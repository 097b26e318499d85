/*
 * Encryption at rest: the data key, its wrapping, and the per-block
 * AES-256-XTS transform (core/crypt.h).  Everything cryptographic is
 * OpenSSL's: RAND_bytes, PKCS5_PBKDF2_HMAC, EVP_aes_256_wrap,
 * EVP_aes_256_xts.  Keys are wiped with OPENSSL_cleanse when replaced or
 * freed and never logged.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "core/crypt.h"

#define WRAPPED_BYTES (CORE_CRYPT_DKEY_BYTES + 8u) /* RFC 3394 adds one 64-bit block */
#define SALT_BYTES    16u
#define MAX_BLOCK     4096u
#define CACHE_SLOTS   8u

struct core_crypt {
        pthread_mutex_t mu;        /* dkey and wrapped while a rekey writes them */
        _Atomic uint64_t key_id;   /* identity of dkey, unique over the process */
        _Atomic uint64_t erasures; /* rekeys */
        uint8_t dkey[CORE_CRYPT_DKEY_BYTES];
        uint8_t kek[CORE_CRYPT_KEK_BYTES];
        bool passphrase;
        uint8_t salt[SALT_BYTES];
        uint32_t iter;
        uint8_t wrapped[WRAPPED_BYTES];
};

static _Atomic uint64_t next_key_id = 1;

/* ---- the key-encryption key ---- */

/* n bytes from the 2n hex digits at s (not necessarily NUL-terminated): 0 or -1. */
static int unhex(const char *s, size_t n, uint8_t *out)
{
        char t[2 * WRAPPED_BYTES + 1];
        size_t got = 0;
        if (2 * n >= sizeof(t))
                return -1;
        memcpy(t, s, 2 * n);
        t[2 * n] = 0;
        int ok = OPENSSL_hexstr2buf_ex(out, n, &got, t, '\0') == 1 && got == n;
        OPENSSL_cleanse(t, sizeof(t));
        return ok ? 0 : -1;
}

static void tohex(const uint8_t *in, size_t n, char *out)
{
        if (OPENSSL_buf2hexstr_ex(out, 2 * n + 1, NULL, in, n, '\0') != 1)
                out[0] = 0;
}

/* A secret file's contents (at most cap bytes), refused unless only its owner can read it. */
static int read_secret(const char *path, uint8_t *buf, size_t cap, size_t *len, char *err,
                       size_t errlen)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) {
                int e = errno;
                snprintf(err, errlen, "key file %s: %s", path, strerror(e));
                return -e;
        }
        struct stat st;
        if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
                close(fd);
                snprintf(err, errlen, "key file %s: not a regular file", path);
                return -EINVAL;
        }
        if (st.st_mode & 077) {
                close(fd);
                snprintf(err, errlen,
                         "key file %s: mode %03o lets others read it; chmod 600 (or 400) it", path,
                         (unsigned)(st.st_mode & 0777));
                return -EPERM;
        }
        size_t n = 0;
        for (;;) {
                ssize_t r = read(fd, buf + n, cap - n);
                if (r < 0) {
                        int e = errno;
                        close(fd);
                        OPENSSL_cleanse(buf, cap);
                        snprintf(err, errlen, "key file %s: %s", path, strerror(e));
                        return -e;
                }
                if (r == 0)
                        break;
                n += (size_t)r;
                if (n == cap) {
                        close(fd);
                        OPENSSL_cleanse(buf, cap);
                        snprintf(err, errlen, "key file %s: too long", path);
                        return -EINVAL;
                }
        }
        close(fd);
        *len = n;
        return 0;
}

static bool is_space(uint8_t c)
{
        return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/* c->kek from a key file: 32 raw bytes, or 64 hex digits with surrounding whitespace. */
static int kek_from_key_file(struct core_crypt *c, const char *path, char *err, size_t errlen)
{
        uint8_t buf[256];
        size_t n = 0;
        int rc = read_secret(path, buf, sizeof(buf), &n, err, errlen);
        if (rc)
                return rc;
        rc = 0;
        if (n == CORE_CRYPT_KEK_BYTES) {
                memcpy(c->kek, buf, CORE_CRYPT_KEK_BYTES);
        } else {
                size_t b = 0, e = n;
                while (b < e && is_space(buf[b]))
                        b++;
                while (e > b && is_space(buf[e - 1]))
                        e--;
                if (e - b != 2 * CORE_CRYPT_KEK_BYTES ||
                    unhex((const char *)buf + b, CORE_CRYPT_KEK_BYTES, c->kek)) {
                        snprintf(err, errlen,
                                 "key file %s: not a 256-bit key (32 raw bytes or 64 hex digits)",
                                 path);
                        rc = -EINVAL;
                }
        }
        OPENSSL_cleanse(buf, sizeof(buf));
        return rc;
}

/* c->kek from a passphrase file (its first line) with c->salt and c->iter. */
static int kek_from_passphrase(struct core_crypt *c, const char *path, char *err, size_t errlen)
{
        uint8_t buf[1024];
        size_t n = 0;
        int rc = read_secret(path, buf, sizeof(buf), &n, err, errlen);
        if (rc)
                return rc;
        size_t l = 0;
        while (l < n && buf[l] != '\n' && buf[l] != '\r')
                l++;
        if (l == 0) {
                OPENSSL_cleanse(buf, sizeof(buf));
                snprintf(err, errlen, "passphrase file %s: empty passphrase", path);
                return -EINVAL;
        }
        rc = PKCS5_PBKDF2_HMAC((const char *)buf, (int)l, c->salt, SALT_BYTES, (int)c->iter,
                               EVP_sha256(), CORE_CRYPT_KEK_BYTES, c->kek) == 1
                 ? 0
                 : -EIO;
        OPENSSL_cleanse(buf, sizeof(buf));
        if (rc)
                snprintf(err, errlen, "passphrase file %s: PBKDF2 failed", path);
        return rc;
}

static int kek_load(struct core_crypt *c, const struct core_crypt_kek_src *src, char *err,
                    size_t errlen)
{
        bool kf = src->key_file && src->key_file[0];
        bool pf = src->passphrase_file && src->passphrase_file[0];
        if (kf == pf) {
                snprintf(err, errlen,
                         "an encrypted namespace needs exactly one of key_file and "
                         "passphrase_file");
                return -EINVAL;
        }
        c->passphrase = pf;
        return kf ? kek_from_key_file(c, src->key_file, err, errlen)
                  : kek_from_passphrase(c, src->passphrase_file, err, errlen);
}

/* ---- wrapping (RFC 3394 AES key wrap under the KEK) ---- */

static int wrap(struct core_crypt *c, bool enc, const uint8_t *in, size_t inl, uint8_t *out)
{
        EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
        int ol = 0, fl = 0, ok = 0;
        if (!x)
                return -ENOMEM;
        EVP_CIPHER_CTX_set_flags(x, EVP_CIPHER_CTX_FLAG_WRAP_ALLOW);
        if (EVP_CipherInit_ex(x, EVP_aes_256_wrap(), NULL, c->kek, NULL, enc) == 1 &&
            EVP_CipherUpdate(x, out, &ol, in, (int)inl) == 1 &&
            EVP_CipherFinal_ex(x, out + ol, &fl) == 1)
                ok = (size_t)(ol + fl) == (enc ? inl + 8 : inl - 8);
        EVP_CIPHER_CTX_free(x);
        return ok ? 0 : -EACCES;
}

static struct core_crypt *crypt_new(void)
{
        struct core_crypt *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        pthread_mutex_init(&c->mu, NULL);
        return c;
}

/* A new data key into c (c->mu held or c unshared), wrapped. */
static int new_dkey(struct core_crypt *c)
{
        uint8_t k[CORE_CRYPT_DKEY_BYTES], w[WRAPPED_BYTES];
        int rc = -EIO;
        /* XTS refuses a key whose halves are equal (OpenSSL checks it). */
        do {
                if (RAND_bytes(k, sizeof(k)) != 1)
                        goto out;
        } while (CRYPTO_memcmp(k, k + 32, 32) == 0);
        rc = wrap(c, true, k, sizeof(k), w);
        if (rc)
                goto out;
        memcpy(c->dkey, k, sizeof(k));
        memcpy(c->wrapped, w, sizeof(w));
        atomic_store(&c->key_id, atomic_fetch_add(&next_key_id, 1));
out:
        OPENSSL_cleanse(k, sizeof(k));
        return rc;
}

int core_crypt_create(const struct core_crypt_kek_src *src, struct core_crypt **out, char *err,
                      size_t errlen)
{
        struct core_crypt *c = crypt_new();
        int rc;
        if (!c)
                return -ENOMEM;
        c->iter = src->pbkdf2_iter ? src->pbkdf2_iter : CORE_CRYPT_PBKDF2_DEFAULT;
        if (RAND_bytes(c->salt, SALT_BYTES) != 1) {
                snprintf(err, errlen, "no randomness for the key");
                rc = -EIO;
                goto fail;
        }
        rc = kek_load(c, src, err, errlen);
        if (rc)
                goto fail;
        rc = new_dkey(c);
        if (rc) {
                snprintf(err, errlen, "making the data key failed");
                goto fail;
        }
        *out = c;
        return 0;
fail:
        core_crypt_free(c);
        return rc;
}

/* The fields of a metadata member (core_crypt_to_json), checked: 0 or -EINVAL. */
struct crypt_member {
        bool passphrase;
        uint32_t iter;
        uint64_t erasures;
        uint8_t salt[SALT_BYTES];
        uint8_t wrapped[WRAPPED_BYTES];
};

static int parse_member(json_t *j, struct crypt_member *m)
{
        const char *cipher = NULL, *kek = NULL, *salt = NULL, *wrapped = NULL;
        json_int_t iter = 0, erasures = 0;
        if (json_unpack(j, "{s:s, s:s, s:s, s:I, s:s, s?I}", "cipher", &cipher, "kek", &kek, "salt",
                        &salt, "iterations", &iter, "wrapped_key", &wrapped, "erasures",
                        &erasures) ||
            strcmp(cipher, "aes-256-xts") != 0 ||
            (strcmp(kek, "key_file") != 0 && strcmp(kek, "passphrase") != 0) ||
            strlen(salt) != 2 * SALT_BYTES || strlen(wrapped) != 2 * WRAPPED_BYTES || iter < 1 ||
            iter > INT32_MAX || erasures < 0 || unhex(salt, SALT_BYTES, m->salt) ||
            unhex(wrapped, WRAPPED_BYTES, m->wrapped))
                return -EINVAL;
        m->passphrase = strcmp(kek, "passphrase") == 0;
        m->iter = (uint32_t)iter;
        m->erasures = (uint64_t)erasures;
        return 0;
}

int core_crypt_load(const struct core_crypt_kek_src *src, json_t *j, struct core_crypt **out,
                    char *err, size_t errlen)
{
        uint8_t k[CORE_CRYPT_DKEY_BYTES];
        struct crypt_member m;
        if (parse_member(j, &m)) {
                snprintf(err, errlen, "bad encryption metadata");
                return -EINVAL;
        }
        struct core_crypt *c = crypt_new();
        int rc = -EINVAL;
        if (!c)
                return -ENOMEM;
        c->iter = m.iter;
        atomic_store(&c->erasures, m.erasures);
        memcpy(c->salt, m.salt, SALT_BYTES);
        memcpy(c->wrapped, m.wrapped, WRAPPED_BYTES);
        bool want_pass = m.passphrase;
        rc = kek_load(c, src, err, errlen);
        if (rc)
                goto fail;
        if (want_pass != c->passphrase) {
                snprintf(err, errlen, "the data key is wrapped under a %s; give %s",
                         want_pass ? "passphrase" : "key file",
                         want_pass ? "passphrase_file" : "key_file");
                rc = -EINVAL;
                goto fail;
        }
        rc = wrap(c, false, c->wrapped, WRAPPED_BYTES, k);
        if (rc) {
                snprintf(err, errlen, "wrong key: the %s does not unwrap this namespace's data key",
                         want_pass ? "passphrase" : "key file");
                goto fail;
        }
        memcpy(c->dkey, k, sizeof(k));
        OPENSSL_cleanse(k, sizeof(k));
        atomic_store(&c->key_id, atomic_fetch_add(&next_key_id, 1));
        *out = c;
        return 0;
fail:
        OPENSSL_cleanse(k, sizeof(k));
        core_crypt_free(c);
        return rc;
}

json_t *core_crypt_to_json(const struct core_crypt *c)
{
        char salt[2 * SALT_BYTES + 1], w[2 * WRAPPED_BYTES + 1];
        struct core_crypt *m = (struct core_crypt *)c;
        pthread_mutex_lock(&m->mu);
        tohex(c->salt, SALT_BYTES, salt);
        tohex(c->wrapped, WRAPPED_BYTES, w);
        pthread_mutex_unlock(&m->mu);
        return json_pack("{s:s, s:s, s:s, s:I, s:s, s:I}", "cipher", "aes-256-xts", "kek",
                         c->passphrase ? "passphrase" : "key_file", "salt", salt, "iterations",
                         (json_int_t)c->iter, "wrapped_key", w, "erasures",
                         (json_int_t)atomic_load(&c->erasures));
}

int core_crypt_rekey(struct core_crypt *c)
{
        pthread_mutex_lock(&c->mu);
        int rc = new_dkey(c);
        if (!rc)
                atomic_fetch_add(&c->erasures, 1);
        pthread_mutex_unlock(&c->mu);
        return rc;
}

json_t *core_crypt_next(struct core_crypt *c)
{
        struct core_crypt *n = crypt_new();
        if (!n)
                return NULL;
        pthread_mutex_lock(&c->mu);
        memcpy(n->kek, c->kek, sizeof(n->kek));
        memcpy(n->salt, c->salt, sizeof(n->salt));
        n->passphrase = c->passphrase;
        n->iter = c->iter;
        pthread_mutex_unlock(&c->mu);
        atomic_store(&n->erasures, atomic_load(&c->erasures) + 1);
        json_t *j = new_dkey(n) ? NULL : core_crypt_to_json(n);
        core_crypt_free(n); /* wipes the plain key: the caller has it wrapped only */
        return j;
}

int core_crypt_adopt(struct core_crypt *c, json_t *j, bool force)
{
        struct crypt_member m;
        uint8_t k[CORE_CRYPT_DKEY_BYTES];
        if (parse_member(j, &m) || m.passphrase != c->passphrase || m.iter != c->iter ||
            CRYPTO_memcmp(m.salt, c->salt, SALT_BYTES))
                return -EINVAL;
        pthread_mutex_lock(&c->mu);
        uint64_t have = atomic_load(&c->erasures);
        bool same = CRYPTO_memcmp(m.wrapped, c->wrapped, WRAPPED_BYTES) == 0;
        int rc = 1;
        if (same || m.erasures < have || (m.erasures == have && !force))
                goto out;
        rc = wrap(c, false, m.wrapped, WRAPPED_BYTES, k);
        if (rc)
                goto out; /* -EACCES: not under our KEK */
        memcpy(c->dkey, k, sizeof(k));
        memcpy(c->wrapped, m.wrapped, WRAPPED_BYTES);
        atomic_store(&c->erasures, m.erasures);
        atomic_store_explicit(&c->key_id, atomic_fetch_add(&next_key_id, 1), memory_order_release);
out:
        pthread_mutex_unlock(&c->mu);
        OPENSSL_cleanse(k, sizeof(k));
        OPENSSL_cleanse(&m, sizeof(m));
        return rc;
}

uint64_t core_crypt_erasures(const struct core_crypt *c)
{
        return atomic_load(&c->erasures);
}

void core_crypt_free(struct core_crypt *c)
{
        if (!c)
                return;
        OPENSSL_cleanse(c, sizeof(*c));
        free(c);
}

/* ---- the per-thread cipher contexts ---- */

struct ctx_slot {
        uint64_t key_id;
        EVP_CIPHER_CTX *ctx[2]; /* [0] decrypt, [1] encrypt */
};
struct ctx_cache {
        struct ctx_slot s[CACHE_SLOTS];
        unsigned next;
};

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_free(void *p)
{
        struct ctx_cache *cc = p;
        for (unsigned i = 0; i < CACHE_SLOTS; i++) {
                EVP_CIPHER_CTX_free(cc->s[i].ctx[0]);
                EVP_CIPHER_CTX_free(cc->s[i].ctx[1]);
        }
        free(cc);
}

static void cache_init(void)
{
        (void)pthread_key_create(&cache_key, cache_free);
}

/* This thread's context for c's current key, keyed (schedule done) for enc; NULL on failure. */
static EVP_CIPHER_CTX *get_ctx(struct core_crypt *c, bool enc)
{
        pthread_once(&cache_once, cache_init);
        struct ctx_cache *cc = pthread_getspecific(cache_key);
        if (!cc) {
                cc = calloc(1, sizeof(*cc));
                if (!cc || pthread_setspecific(cache_key, cc)) {
                        free(cc);
                        return NULL;
                }
        }
        uint64_t id = atomic_load_explicit(&c->key_id, memory_order_acquire);
        struct ctx_slot *s = NULL;
        for (unsigned i = 0; i < CACHE_SLOTS; i++)
                if (cc->s[i].key_id == id && id) {
                        s = &cc->s[i];
                        break;
                }
        if (!s) {
                s = &cc->s[cc->next++ % CACHE_SLOTS];
                s->key_id = 0;
                for (int e = 0; e < 2; e++) {
                        if (!s->ctx[e])
                                s->ctx[e] = EVP_CIPHER_CTX_new();
                        else
                                EVP_CIPHER_CTX_reset(s->ctx[e]);
                        if (!s->ctx[e])
                                return NULL;
                }
                uint8_t k[CORE_CRYPT_DKEY_BYTES];
                pthread_mutex_lock(&c->mu);
                memcpy(k, c->dkey, sizeof(k));
                id = atomic_load(&c->key_id);
                pthread_mutex_unlock(&c->mu);
                bool ok = EVP_CipherInit_ex(s->ctx[0], EVP_aes_256_xts(), NULL, k, NULL, 0) == 1 &&
                          EVP_CipherInit_ex(s->ctx[1], EVP_aes_256_xts(), NULL, k, NULL, 1) == 1;
                OPENSSL_cleanse(k, sizeof(k));
                if (!ok)
                        return NULL;
                s->key_id = id;
        }
        return s->ctx[enc];
}

static bool all_zero(const uint8_t *p, uint32_t n)
{
        for (uint32_t i = 0; i < n; i++)
                if (p[i])
                        return false;
        return true;
}

static int one_block(EVP_CIPHER_CTX *x, bool enc, uint64_t lba, uint8_t *blk, uint32_t bs)
{
        uint8_t tweak[16] = {0};
        int ol = 0;
        if (!enc && all_zero(blk, bs))
                return 0; /* deallocated: reads as zeroes */
        for (int i = 0; i < 8; i++)
                tweak[i] = (uint8_t)(lba >> (8 * i));
        if (EVP_CipherInit_ex(x, NULL, NULL, NULL, tweak, -1) != 1 ||
            EVP_CipherUpdate(x, blk, &ol, blk, (int)bs) != 1 || (uint32_t)ol != bs)
                return -EIO;
        return 0;
}

int core_crypt_iov(struct core_crypt *c, bool enc, uint64_t lba, uint32_t bs,
                   const struct iovec *iov, int iovcnt, uint64_t skip, uint64_t len)
{
        EVP_CIPHER_CTX *x = get_ctx(c, enc);
        if (!x || bs > MAX_BLOCK || len % bs)
                return -EIO;
        uint8_t bounce[MAX_BLOCK];
        uint32_t have = 0; /* bytes of a straddling block gathered in bounce */
        int i = 0;
        while (i < iovcnt && skip >= iov[i].iov_len)
                skip -= iov[i++].iov_len;
        for (; i < iovcnt && len; i++, skip = 0) {
                uint8_t *p = (uint8_t *)iov[i].iov_base + skip;
                uint64_t n = iov[i].iov_len - skip < len ? iov[i].iov_len - skip : len;
                len -= n;
                while (n) {
                        if (have || n < bs) {
                                /* A block straddling iovec entries: gather, transform, scatter. */
                                uint32_t take = bs - have < n ? bs - have : (uint32_t)n;
                                memcpy(bounce + have, p, take);
                                have += take;
                                p += take;
                                n -= take;
                                if (have < bs)
                                        break;
                                if (one_block(x, enc, lba, bounce, bs))
                                        return -EIO;
                                /* scatter back over the pieces it came from */
                                uint32_t back = bs;
                                const uint8_t *src = bounce + bs;
                                uint8_t *dst = p;
                                int k = i;
                                uint64_t avail = (uint64_t)(p - (uint8_t *)iov[k].iov_base);
                                while (back) {
                                        uint32_t m = avail < back ? (uint32_t)avail : back;
                                        src -= m;
                                        dst -= m;
                                        memcpy(dst, src, m);
                                        back -= m;
                                        if (back) {
                                                k--;
                                                dst = (uint8_t *)iov[k].iov_base + iov[k].iov_len;
                                                avail = iov[k].iov_len;
                                        }
                                }
                                have = 0;
                                lba++;
                                continue;
                        }
                        if (one_block(x, enc, lba, p, bs))
                                return -EIO;
                        p += bs;
                        n -= bs;
                        lba++;
                }
        }
        OPENSSL_cleanse(bounce, sizeof(bounce));
        return have || len ? -EIO : 0;
}
