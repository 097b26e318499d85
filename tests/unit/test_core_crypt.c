/*
 * Encryption at rest (src/core/crypt.c) and its use by the core: the XTS
 * transform (round trip, a different ciphertext per LBA for the same
 * plaintext, deallocated blocks read as zeroes, blocks straddling iovec
 * entries), the key-encryption key (hex and raw key files, passphrases,
 * file modes, a wrong KEK refused), and a file namespace on a real reactor:
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
            cmocka_unit_test(test_ns_thin),
            cmocka_unit_test(test_ns_thick),
            cmocka_unit_test(test_ns_rules),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
