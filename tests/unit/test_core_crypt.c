/*
 * Encryption at rest (src/core/crypt.c) and its use by the core: the XTS
 * transform (round trip, a different ciphertext per LBA for the same
 * plaintext, deallocated blocks read as zeroes, blocks straddling iovec
 * entries), the key-encryption key (hex and raw key files, passphrases,
 * file modes, a wrong KEK refused), the next key of a cryptographic erase
 * on shared storage and its adoption by generation, and a file namespace on a real reactor:
 * the data file holds no plaintext, a reopen needs the right key, and a
 * cryptographic erase makes the old data unreadable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core_fixture.h"
#include "core/crypt.h"
#include "core/ns.h"
#include "core/req.h"
#include "rt/reactor.h"

#define MIB (1u << 20)

static char dir[256];

static int setup(void **st)
{
        (void)st;
        return core_fixture_up(dir, sizeof(dir), "crypt", 1);
}

static int teardown(void **st)
{
        (void)st;
        return core_fixture_down(dir);
}

/* A file under dir with these bytes and mode; returns its path (static buffer per slot). */
static const char *secret(const char *name, const void *data, size_t len, mode_t mode)
{
        static char paths[8][320];
        static unsigned slot;
        char *p = paths[slot++ % 8];
        snprintf(p, 320, "%s/%s", dir, name);
        unlink(p);
        int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, len), (ssize_t)len);
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
        return p;
}

#define HEXKEY_A "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"
#define HEXKEY_B "ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f\n"

/* ---- the transform ---- */

static void test_xts_round_trip_and_tweak(void **st)
{
        (void)st;
        struct core_crypt_kek_src ks = {.key_file = secret("ka", HEXKEY_A, 65, 0600)};
        struct core_crypt *c = NULL;
        char err[256];
        assert_int_equal(core_crypt_create(&ks, &c, err, sizeof(err)), 0);

        static uint8_t plain[4 * 512], buf[4 * 512];
        memset(plain, 'a', sizeof(plain));
        memcpy(buf, plain, sizeof(buf));
        assert_int_equal(core_crypt_buf(c, true, 1000, 512, buf, sizeof(buf)), 0);
        /* Same plaintext in every block: a different ciphertext per LBA (the tweak). */
        for (int i = 0; i < 4; i++) {
                assert_memory_not_equal(buf + i * 512, plain, 512);
                for (int j = i + 1; j < 4; j++)
                        assert_memory_not_equal(buf + i * 512, buf + j * 512, 512);
        }
        /* The same block at the same LBA again: the same ciphertext (XTS is deterministic). */
        static uint8_t again[512];
        memcpy(again, plain, 512);
        assert_int_equal(core_crypt_buf(c, true, 1000, 512, again, 512), 0);
        assert_memory_equal(again, buf, 512);
        /* Decrypting at the wrong LBA does not give the plaintext back. */
        memcpy(again, buf + 512, 512);
        assert_int_equal(core_crypt_buf(c, false, 1000, 512, again, 512), 0);
        assert_memory_not_equal(again, plain, 512);
        /* Round trip, in pieces that split blocks across iovec entries. */
        struct iovec v[3] = {{buf, 100}, {buf + 100, 1000}, {buf + 1100, sizeof(buf) - 1100}};
        assert_int_equal(core_crypt_iov(c, false, 1000, 512, v, 3, 0, sizeof(buf)), 0);
        assert_memory_equal(buf, plain, sizeof(buf));
        assert_int_equal(core_crypt_iov(c, true, 1000, 512, v, 3, 0, sizeof(buf)), 0);
        static uint8_t flat[4 * 512];
        memcpy(flat, plain, sizeof(flat));
        assert_int_equal(core_crypt_buf(c, true, 1000, 512, flat, sizeof(flat)), 0);
        assert_memory_equal(buf, flat, sizeof(buf));
        /* A deallocated (all-zero) block decrypts to zeroes, not to decrypt(zeroes). */
        static uint8_t z[1024], zero[1024];
        memset(z, 0, sizeof(z));
        assert_int_equal(core_crypt_buf(c, false, 5, 512, z, sizeof(z)), 0);
        assert_memory_equal(z, zero, sizeof(z));
        /* A written block of zeroes is ciphertext, and reads back as zeroes. */
        assert_int_equal(core_crypt_buf(c, true, 5, 512, z, 512), 0);
        assert_memory_not_equal(z, zero, 512);
        assert_int_equal(core_crypt_buf(c, false, 5, 512, z, 512), 0);
        assert_memory_equal(z, zero, 512);
        /* 4 KiB blocks too; a length not a whole number of blocks is refused. */
        static uint8_t big[4096];
        memset(big, 0x5a, sizeof(big));
        assert_int_equal(core_crypt_buf(c, true, 7, 4096, big, 4096), 0);
        assert_int_equal(core_crypt_buf(c, false, 7, 4096, big, 4096), 0);
        for (int i = 0; i < 4096; i++)
                assert_int_equal(big[i], 0x5a);
        assert_int_equal(core_crypt_buf(c, true, 7, 512, big, 700), -EIO);
        core_crypt_free(c);
}

/*
 * Storage several gateways share (rbd, core/ns.c crypt_with_data): each
 * gateway loads the member kept with the data; a cryptographic erase
 * through one makes the next key's member (core_crypt_next, not installed
 * until stored) and every gateway adopts it by generation.  And the same
 * key and LBA give the same ciphertext on every gateway, so a compare of
 * ciphertexts is a compare of plaintexts (compare-and-write in the cluster).
 */
static void test_shared_rekey(void **st)
{
        (void)st;
        char err[256];
        struct core_crypt_kek_src a = {.key_file = secret("sa", HEXKEY_A, 65, 0600)};
        struct core_crypt *c = NULL, *d = NULL;
        static uint8_t p[512], q[512], x[512], y[512];
        memset(p, 0x3c, sizeof(p));
        assert_int_equal(core_crypt_create(&a, &c, err, sizeof(err)), 0);
        json_t *j0 = core_crypt_to_json(c);
        assert_int_equal(core_crypt_load(&a, j0, &d, err, sizeof(err)), 0);
        /* Deterministic: two gateways, one key, one LBA -> one ciphertext. */
        memcpy(x, p, 512);
        memcpy(y, p, 512);
        assert_int_equal(core_crypt_buf(c, true, 9, 512, x, 512), 0);
        assert_int_equal(core_crypt_buf(d, true, 9, 512, y, 512), 0);
        assert_memory_equal(x, y, 512);
        /* One plaintext byte changed: the ciphertexts differ (the compare miscompares). */
        memcpy(q, p, 512);
        q[300] ^= 1;
        assert_int_equal(core_crypt_buf(d, true, 9, 512, q, 512), 0);
        assert_memory_not_equal(x, q, 512);

        /* The next key: made, not installed. */
        json_t *j1 = core_crypt_next(c);
        assert_non_null(j1);
        assert_int_equal(json_integer_value(json_object_get(j1, "erasures")), 1);
        assert_string_not_equal(json_string_value(json_object_get(j1, "wrapped_key")),
                                json_string_value(json_object_get(j0, "wrapped_key")));
        assert_string_equal(json_string_value(json_object_get(j1, "salt")),
                            json_string_value(json_object_get(j0, "salt")));
        assert_int_equal(core_crypt_erasures(c), 0);
        memcpy(y, p, 512);
        assert_int_equal(core_crypt_buf(c, true, 9, 512, y, 512), 0);
        assert_memory_equal(x, y, 512);

        /* The other gateway takes it: old ciphertext no longer decrypts to the data. */
        assert_int_equal(core_crypt_adopt(d, j1, false), 0);
        assert_int_equal(core_crypt_erasures(d), 1);
        memcpy(y, x, 512);
        assert_int_equal(core_crypt_buf(d, false, 9, 512, y, 512), 0);
        assert_memory_not_equal(y, p, 512);
        /* The erasing one installs it too: both agree again. */
        assert_int_equal(core_crypt_adopt(c, j1, true), 0);
        memcpy(x, p, 512);
        memcpy(y, p, 512);
        assert_int_equal(core_crypt_buf(c, true, 9, 512, x, 512), 0);
        assert_int_equal(core_crypt_buf(d, true, 9, 512, y, 512), 0);
        assert_memory_equal(x, y, 512);
        /* Not newer: the same one again, an older one (even forced) change nothing. */
        assert_int_equal(core_crypt_adopt(d, j1, false), 1);
        assert_int_equal(core_crypt_adopt(d, j0, false), 1);
        assert_int_equal(core_crypt_adopt(d, j0, true), 1);
        assert_int_equal(core_crypt_erasures(d), 1);
        /* Same generation, another key: only when forced (the one stored with the data). */
        json_t *j1b = core_crypt_next(c); /* generation 2 */
        json_object_set_new(j1b, "erasures", json_integer(1));
        assert_int_equal(core_crypt_adopt(d, j1b, false), 1);
        assert_int_equal(core_crypt_adopt(d, j1b, true), 0);
        memcpy(y, p, 512);
        assert_int_equal(core_crypt_buf(d, true, 9, 512, y, 512), 0);
        assert_memory_not_equal(x, y, 512);

        /* A wrapped key that is not under our KEK (damaged): refused, nothing changes. */
        json_t *j2 = core_crypt_next(c);
        char w[160];
        snprintf(w, sizeof(w), "%s", json_string_value(json_object_get(j2, "wrapped_key")));
        w[10] = w[10] == '0' ? '1' : '0';
        json_object_set_new(j2, "wrapped_key", json_string(w));
        assert_int_equal(core_crypt_adopt(d, j2, false), -EACCES);
        assert_int_equal(core_crypt_erasures(d), 1);
        /* Malformed, or another salt (another KEK derivation): -EINVAL. */
        json_object_set_new(j2, "cipher", json_string("aes-128-cbc"));
        assert_int_equal(core_crypt_adopt(d, j2, false), -EINVAL);
        json_t *j3 = core_crypt_next(c);
        json_object_set_new(j3, "salt", json_string("00112233445566778899aabbccddeeff"));
        assert_int_equal(core_crypt_adopt(d, j3, false), -EINVAL);

        json_decref(j0);
        json_decref(j1);
        json_decref(j1b);
        json_decref(j2);
        json_decref(j3);
        core_crypt_free(c);
        core_crypt_free(d);
}

/* ---- the key-encryption key ---- */

static void test_kek(void **st)
{
        (void)st;
        char err[256];
        struct core_crypt *c = NULL, *d = NULL;
        struct core_crypt_kek_src a = {.key_file = secret("ka", HEXKEY_A, 65, 0600)};
        struct core_crypt_kek_src b = {.key_file = secret("kb", HEXKEY_B, 65, 0400)};
        assert_int_equal(core_crypt_create(&a, &c, err, sizeof(err)), 0);
        json_t *j = core_crypt_to_json(c);
        assert_non_null(j);
        /* The wrapped key is in the metadata; the key itself is not. */
        char *text = json_dumps(j, 0);
        assert_non_null(strstr(text, "\"wrapped_key\""));
        assert_null(strcasestr(text, "000102030405060708090a0b0c0d0e0f"));
        free(text);

        /* The right KEK opens it: the same data key (same ciphertext). */
        static uint8_t x[512], y[512];
        memset(x, 7, 512);
        memset(y, 7, 512);
        assert_int_equal(core_crypt_load(&a, j, &d, err, sizeof(err)), 0);
        assert_int_equal(core_crypt_buf(c, true, 3, 512, x, 512), 0);
        assert_int_equal(core_crypt_buf(d, true, 3, 512, y, 512), 0);
        assert_memory_equal(x, y, 512);
        core_crypt_free(d);
        /* The same key as 32 raw bytes is the same KEK. */
        uint8_t raw[32];
        for (int i = 0; i < 32; i++)
                raw[i] = (uint8_t)i;
        struct core_crypt_kek_src r = {.key_file = secret("kraw", raw, 32, 0600)};
        assert_int_equal(core_crypt_load(&r, j, &d, err, sizeof(err)), 0);
        core_crypt_free(d);
        /* A wrong KEK is refused, with a clear message. */
        d = NULL;
        assert_int_equal(core_crypt_load(&b, j, &d, err, sizeof(err)), -EACCES);
        assert_null(d);
        assert_non_null(strstr(err, "wrong key"));
        /* A key file others can read is refused; so is one that is not a key. */
        struct core_crypt_kek_src open_ = {.key_file = secret("kopen", HEXKEY_A, 65, 0644)};
        assert_int_equal(core_crypt_load(&open_, j, &d, err, sizeof(err)), -EPERM);
        assert_non_null(strstr(err, "mode"));
        struct core_crypt_kek_src shortk = {.key_file = secret("kshort", "abcd\n", 5, 0600)};
        assert_int_equal(core_crypt_load(&shortk, j, &d, err, sizeof(err)), -EINVAL);
        struct core_crypt_kek_src none = {0};
        assert_int_equal(core_crypt_create(&none, &d, err, sizeof(err)), -EINVAL);
        /* A rekey (crypto erase) changes the data key and the wrapped key. */
        json_t *j2;
        assert_int_equal(core_crypt_rekey(c), 0);
        assert_int_equal(core_crypt_erasures(c), 1);
        j2 = core_crypt_to_json(c);
        assert_false(
            json_equal(json_object_get(j, "wrapped_key"), json_object_get(j2, "wrapped_key")));
        memset(y, 7, 512);
        assert_int_equal(core_crypt_buf(c, true, 3, 512, y, 512), 0);
        assert_memory_not_equal(x, y, 512);
        json_decref(j);
        json_decref(j2);
        core_crypt_free(c);

        /* Passphrases: PBKDF2 with the salt and iterations in the metadata. */
        struct core_crypt_kek_src p1 = {
            .passphrase_file = secret("p1", "correct horse\n", 14, 0600), .pbkdf2_iter = 1000};
        struct core_crypt_kek_src p2 = {.passphrase_file =
                                            secret("p2", "battery staple\n", 15, 0600)};
        assert_int_equal(core_crypt_create(&p1, &c, err, sizeof(err)), 0);
        j = core_crypt_to_json(c);
        assert_int_equal(json_integer_value(json_object_get(j, "iterations")), 1000);
        assert_int_equal(core_crypt_load(&p1, j, &d, err, sizeof(err)), 0);
        core_crypt_free(d);
        assert_int_equal(core_crypt_load(&p2, j, &d, err, sizeof(err)), -EACCES);
        /* A key file where a passphrase wrapped it: refused, saying which is needed. */
        assert_int_equal(core_crypt_load(&a, j, &d, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "passphrase_file"));
        json_decref(j);
        core_crypt_free(c);
}

/* ---- a namespace on a reactor ---- */

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool finished, result;

static void req_cb(struct core_req *req)
{
        (void)req;
        pthread_mutex_lock(&m);
        finished = true;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&m);
}

static void submit_fn(void *arg)
{
        core_req_submit(arg);
}

static void wait_finished(void)
{
        pthread_mutex_lock(&m);
        while (!finished)
                pthread_cond_wait(&cv, &m);
        pthread_mutex_unlock(&m);
}

static enum core_status rw(struct core_ns *ns, enum core_op op, uint64_t lba, void *buf,
                           uint32_t nlb)
{
        static struct core_req req;
        core_req_init(&req, ns, op, lba, nlb, 0, rt_get(0), req_cb, NULL);
        req.iov[0].iov_base = buf;
        req.iov[0].iov_len = (size_t)nlb * ns->block_size;
        req.iovcnt = 1;
        finished = false;
        rt_msg_send(rt_get(0), submit_fn, &req);
        wait_finished();
        return req.status;
}

static void san_done(void *arg, bool ok)
{
        (void)arg;
        pthread_mutex_lock(&m);
        result = ok;
        finished = true;
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&m);
}

static struct core_ns *san_ns;
static int san_rc;
static void start_fn(void *arg)
{
        san_rc = core_sanitize_start(san_ns, arg, NULL, rt_get(0), san_done, NULL);
}

static int create(const char *name, bool encrypt, const char *key_file, bool thin,
                  struct core_ns **ns, char *err, size_t errlen)
{
        struct core_ns_params p = {.name = name,
                                   .backend = "file",
                                   .size_bytes = 4 * MIB,
                                   .block_size = 512,
                                   .thin = thin,
                                   .encrypt = encrypt,
                                   .key_file = key_file};
        return core_ns_create(&p, ns, err, errlen);
}

/* Whether the file holds the 16-byte marker anywhere. */
static bool file_has(const char *path, const char *marker)
{
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        static char buf[4 * MIB];
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        return memmem(buf, n, marker, strlen(marker)) != NULL;
}

static void run_ns(bool thin)
{
        const char *name = thin ? "enc-thin" : "enc-thick";
        const char *ka = secret("nka", HEXKEY_A, 65, 0600), *kb = secret("nkb", HEXKEY_B, 65, 0600);
        char err[512], path[4096];
        struct core_ns *ns = NULL;
        static uint8_t w[8 * 512], r[8 * 512], zero[8 * 512];
        const char *marker = "SLATE-PLAINTEXT!";

        assert_int_equal(create(name, true, ka, thin, &ns, err, sizeof(err)), 0);
        assert_non_null(ns->crypt);
        snprintf(path, sizeof(path), "%s", ns->path);
        for (unsigned i = 0; i < sizeof(w); i += 16)
                memcpy(w + i, marker, 16);
        assert_int_equal(rw(ns, CORE_OP_WRITE, 64, w, 8), CORE_OK);
        /* The issuer's buffer holds its plaintext again after the write. */
        assert_memory_equal(w, marker, 16);
        assert_int_equal(rw(ns, CORE_OP_READ, 64, r, 8), CORE_OK);
        assert_memory_equal(r, w, sizeof(w));
        /* Never written: zeroes. */
        assert_int_equal(rw(ns, CORE_OP_READ, 2000, r, 8), CORE_OK);
        assert_memory_equal(r, zero, sizeof(r));
        /* WRITE ZEROES: zeroes, whatever was there. */
        assert_int_equal(rw(ns, CORE_OP_WRITE, 200, w, 8), CORE_OK);
        assert_int_equal(rw(ns, CORE_OP_WRITE_ZEROES, 200, NULL, 8), CORE_OK);
        assert_int_equal(rw(ns, CORE_OP_READ, 200, r, 8), CORE_OK);
        assert_memory_equal(r, zero, sizeof(r));
        /* On disk: ciphertext only. */
        assert_int_equal(rw(ns, CORE_OP_FLUSH, 0, NULL, 0), CORE_OK);
        assert_false(file_has(path, marker));

        /* Reopen: no key refused, the wrong key refused, the right one reads the data. */
        assert_int_equal(core_ns_delete(name), 0);
        ns = NULL;
        assert_int_equal(create(name, false, NULL, thin, &ns, err, sizeof(err)), -EACCES);
        assert_non_null(strstr(err, "encrypted"));
        assert_int_equal(create(name, false, kb, thin, &ns, err, sizeof(err)), -EACCES);
        assert_non_null(strstr(err, "wrong key"));
        assert_int_equal(create(name, false, ka, thin, &ns, err, sizeof(err)), 0);
        assert_int_equal(rw(ns, CORE_OP_READ, 64, r, 8), CORE_OK);
        assert_memory_equal(r, w, sizeof(w));

        /* Cryptographic erase: the old data is gone for good (zeroes when thin). */
        struct core_sanitize_params sp = {.action = CORE_SANACT_CRYPTO_ERASE};
        san_ns = ns;
        finished = false;
        rt_msg_call(rt_get(0), start_fn, &sp);
        assert_int_equal(san_rc, 0);
        wait_finished();
        assert_true(result);
        assert_int_equal(rw(ns, CORE_OP_READ, 64, r, 8), CORE_OK);
        assert_memory_not_equal(r, w, sizeof(w));
        if (thin)
                assert_memory_equal(r, zero, sizeof(r));
        /* New writes work under the new key, and survive a reopen. */
        assert_int_equal(rw(ns, CORE_OP_WRITE, 64, w, 8), CORE_OK);
        assert_int_equal(core_ns_delete(name), 0);
        assert_int_equal(create(name, false, ka, thin, &ns, err, sizeof(err)), 0);
        assert_int_equal(rw(ns, CORE_OP_READ, 64, r, 8), CORE_OK);
        assert_memory_equal(r, w, sizeof(w));
        assert_int_equal(core_ns_delete(name), 0);
}

/*
 * A namespace whose backend keeps records with the storage (rbd's
 * meta_load/meta_store, stubbed here over a mem namespace): the erase is
 * stored there before it is used, a store that fails changes nothing, and
 * another gateway's erase (its record in a notify, or read again after a
 * lost notice) is taken; an older one is not.
 */
static char *rec;
static int rec_store_rc;

static int rec_load(struct backend *be, const char *key, char **val)
{
        (void)be;
        assert_string_equal(key, "crypt");
        if (!rec)
                return -ENOENT;
        *val = strdup(rec);
        return 0;
}

static int rec_store(struct backend *be, const char *key, const char *val)
{
        (void)be;
        assert_string_equal(key, "crypt");
        if (rec_store_rc)
                return rec_store_rc;
        free(rec);
        rec = strdup(val);
        return 0;
}

/* Block 5 of 0x21 bytes under c's key. */
static void cipher_of(struct core_crypt *c, uint8_t *b)
{
        memset(b, 0x21, 512);
        assert_int_equal(core_crypt_buf(c, true, 5, 512, b, 512), 0);
}

static void test_ns_shared_records(void **st)
{
        (void)st;
        const char *ka = secret("rka", HEXKEY_A, 65, 0600);
        struct core_ns_params p = {.name = "enc-shared",
                                   .backend = "mem",
                                   .size_bytes = MIB,
                                   .block_size = 512,
                                   .encrypt = true,
                                   .key_file = ka};
        char err[256];
        struct core_ns *ns = NULL;
        static uint8_t x[512], y[512], z[512];
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        static struct backend_ops ops;
        const struct backend_ops *mem_ops = ns->be.ops;
        ops = *mem_ops;
        ops.meta_load = rec_load;
        ops.meta_store = rec_store;
        ns->be.ops = &ops;

        /* This gateway's erase: stored (generation 1), then used. */
        cipher_of(ns->crypt, z);
        assert_int_equal(core_ns_crypt_erase(ns), 0);
        assert_non_null(rec);
        assert_int_equal(core_crypt_erasures(ns->crypt), 1);
        cipher_of(ns->crypt, x);
        assert_memory_not_equal(x, z, 512);
        /* Another gateway opens the record with the same KEK: the same key. */
        json_t *j = json_loads(rec, 0, NULL);
        struct core_crypt *d = NULL;
        struct core_crypt_kek_src ks = {.key_file = ka};
        assert_int_equal(core_crypt_load(&ks, j, &d, err, sizeof(err)), 0);
        json_decref(j);
        cipher_of(d, y);
        assert_memory_equal(x, y, 512);
        /* A store that fails: the erase fails, the old key stays everywhere. */
        rec_store_rc = -EIO;
        assert_int_equal(core_ns_crypt_erase(ns), -EIO);
        rec_store_rc = 0;
        cipher_of(ns->crypt, y);
        assert_memory_equal(x, y, 512);
        assert_int_equal(core_crypt_erasures(ns->crypt), 1);

        /* The other gateway erases (generation 2): its notify replaces our key. */
        char *old = strdup(rec);
        json_t *n2 = core_crypt_next(d);
        assert_int_equal(core_crypt_adopt(d, n2, true), 0);
        char *t2 = json_dumps(n2, JSON_COMPACT);
        ns->be.meta_changed(&ns->be, "crypt", t2);
        assert_int_equal(core_crypt_erasures(ns->crypt), 2);
        cipher_of(ns->crypt, x);
        cipher_of(d, y);
        assert_memory_equal(x, y, 512);
        /* A late notice of generation 1, or another record's: nothing changes. */
        ns->be.meta_changed(&ns->be, "crypt", old);
        ns->be.meta_changed(&ns->be, "identity", "garbage");
        ns->be.meta_changed(&ns->be, "crypt", "{not json");
        cipher_of(ns->crypt, x);
        assert_memory_equal(x, y, 512);
        /* Generation 3, its notice lost: read again from the storage. */
        json_t *n3 = core_crypt_next(d);
        assert_int_equal(core_crypt_adopt(d, n3, true), 0);
        free(rec);
        rec = json_dumps(n3, JSON_COMPACT);
        ns->be.meta_changed(&ns->be, NULL, NULL);
        assert_int_equal(core_crypt_erasures(ns->crypt), 3);
        cipher_of(ns->crypt, x);
        cipher_of(d, y);
        assert_memory_equal(x, y, 512);

        json_decref(n2);
        json_decref(n3);
        free(t2);
        free(old);
        free(rec);
        rec = NULL;
        core_crypt_free(d);
        ns->be.ops = mem_ops;
        assert_int_equal(core_ns_delete("enc-shared"), 0);
}

static void test_ns_thin(void **st)
{
        (void)st;
        run_ns(true);
}

static void test_ns_thick(void **st)
{
        (void)st;
        run_ns(false);
}

static void test_ns_rules(void **st)
{
        (void)st;
        const char *ka = secret("rka", HEXKEY_A, 65, 0600);
        char err[512];
        struct core_ns *ns = NULL;
        /* A key without encrypt=true on a new namespace: refused. */
        assert_int_equal(create("plain", false, ka, true, &ns, err, sizeof(err)), -EINVAL);
        /* A plain namespace cannot become encrypted on reopen. */
        assert_int_equal(create("plain", false, NULL, true, &ns, err, sizeof(err)), 0);
        struct core_sanitize_params sp = {.action = CORE_SANACT_CRYPTO_ERASE};
        san_ns = ns;
        rt_msg_call(rt_get(0), start_fn, &sp);
        assert_int_equal(san_rc, -EINVAL); /* no key to change */
        assert_int_equal(core_ns_delete("plain"), 0);
        assert_int_equal(create("plain", true, ka, true, &ns, err, sizeof(err)), -EINVAL);
        assert_non_null(strstr(err, "unencrypted"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_xts_round_trip_and_tweak),
            cmocka_unit_test(test_kek),
            cmocka_unit_test(test_shared_rekey),
            cmocka_unit_test(test_ns_shared_records),
            cmocka_unit_test(test_ns_thin),
            cmocka_unit_test(test_ns_thick),
            cmocka_unit_test(test_ns_rules),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
