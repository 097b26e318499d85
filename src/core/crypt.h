/*
 * Encryption at rest (core/crypt.c), shared by both personalities: a
 * namespace created with encrypt=true stores every logical block
 * AES-256-XTS encrypted, the data unit one logical block and the tweak its
 * LBA (16 bytes, little-endian).  The 512-bit data key is random, made by
 * Slate, and kept only wrapped (AES-256 key wrap, RFC 3394) in the
 * namespace's metadata under a key-encryption key (KEK) that never touches
 * the disk: either a key file (32 raw bytes or 64 hex digits, mode 0600 or
 * stricter) or a passphrase file, stretched with PBKDF2-HMAC-SHA256 (salt
 * and iteration count in the metadata).  A wrong KEK fails the unwrap's
 * integrity check: the namespace refuses to open.
 *
 * Deallocated blocks: a block whose stored bytes are all zero (a hole of
 * the file backend, a page the mem backend never had, WRITE ZEROES, a
 * deallocation) reads as zeroes and is never decrypted, so thin
 * provisioning and the zero guarantees of WRITE ZEROES and DEALLOCATE hold
 * unchanged.  A written block is ciphertext and is all zero with
 * probability 2^-4096.  (What leaks: which blocks are deallocated, as with
 * any thin encrypted volume.)
 *
 * Cryptographic erase (core_crypt_rekey): a new random data key replaces
 * the old one, which is overwritten in memory and in the metadata; the
 * blocks written under it can no longer be decrypted.
 *
 * Cipher contexts are per thread (a small cache keyed by the key's
 * identity), never shared between reactors.
 */
#ifndef CORE_CRYPT_H
#define CORE_CRYPT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define CORE_CRYPT_KEK_BYTES      32u
#define CORE_CRYPT_DKEY_BYTES     64u /* AES-256-XTS: two 256-bit keys */
#define CORE_CRYPT_PBKDF2_DEFAULT 200000u

struct core_crypt;

/* Where the key-encryption key comes from: exactly one of the two files. */
struct core_crypt_kek_src {
        const char *key_file;        /* 32 raw bytes or 64 hex digits (whitespace around ok) */
        const char *passphrase_file; /* first line; PBKDF2-HMAC-SHA256 */
        uint32_t pbkdf2_iter;        /* new keys only; 0 = CORE_CRYPT_PBKDF2_DEFAULT */
};

/* A new random data key under the KEK src names.  0 or -errno with err. */
int core_crypt_create(const struct core_crypt_kek_src *src, struct core_crypt **out, char *err,
                      size_t errlen);
/*
 * The data key j (core_crypt_to_json) holds, unwrapped with the KEK src
 * names: -EACCES when the KEK is wrong, -EINVAL when j is malformed.
 */
int core_crypt_load(const struct core_crypt_kek_src *src, json_t *j, struct core_crypt **out,
                    char *err, size_t errlen);
/* The metadata member: cipher, KEK kind, KDF salt and iterations, the wrapped key. */
json_t *core_crypt_to_json(const struct core_crypt *c);
/* Cryptographic erase: a new data key (the old one is wiped).  0 or -errno. */
int core_crypt_rekey(struct core_crypt *c);
/*
 * Cryptographic erase of storage shared by several processes (rbd: the
 * wrapped key kept with the data, ns.c): core_crypt_next makes the metadata
 * member of the next data key -- new random key, wrapped under c's KEK,
 * generation ("erasures") one more -- without installing it (c keeps its
 * key until the caller has stored the member where the others read it).
 * core_crypt_adopt installs the data key of a member another process (or
 * core_crypt_next) made: unwrapped with c's KEK (same kind, same salt),
 * installed when its generation is newer than c's, or equal and its
 * wrapped key differs when force (the member stored with the data wins).
 * 0 installed, 1 not newer (c unchanged), -EACCES the KEK does not unwrap
 * it, -EINVAL malformed or another KEK kind or salt.  Any thread: I/O
 * that starts after it returns uses the new key.
 */
json_t *core_crypt_next(struct core_crypt *c);
int core_crypt_adopt(struct core_crypt *c, json_t *j, bool force);
/* How many times the key was replaced (namespace_list). */
uint64_t core_crypt_erasures(const struct core_crypt *c);
void core_crypt_free(struct core_crypt *c);

/*
 * Encrypt (enc) or decrypt in place len bytes of iov from byte skip, which
 * hold whole blocks of bs bytes from lba on.  Decryption leaves all-zero
 * blocks as they are (deallocated).  Blocks may straddle iovec entries.
 * Any thread; 0 or -EIO (an OpenSSL failure).
 */
int core_crypt_iov(struct core_crypt *c, bool enc, uint64_t lba, uint32_t bs,
                   const struct iovec *iov, int iovcnt, uint64_t skip, uint64_t len);
static inline int core_crypt_buf(struct core_crypt *c, bool enc, uint64_t lba, uint32_t bs,
                                 void *buf, uint64_t len)
{
        struct iovec v = {.iov_base = buf, .iov_len = (size_t)len};
        return core_crypt_iov(c, enc, lba, bs, &v, 1, 0, len);
}

#endif
