/*
 * Protection information engine (issue 10): T10 DIF / NVMe end-to-end data
 * protection over buffers of logical blocks, shared by both personalities.
 * Self-contained: no namespace state, no I/O, no protocol codes; failures
 * are the core's protocol-neutral CORE_E_PI_* statuses (core/status.h).
 *
 * A format (struct core_pi_fmt) is a block size, a protection interval
 * (2^pi_exp intervals per block: SCSI P_I_EXPONENT; NVMe has none, 0), the
 * metadata bytes per interval (SCSI: 8; NVMe: the LBA format's MS) and where
 * the protection information (PI) tuple sits in them (NVMe DPS PIP: first
 * or last bytes), the PI type (0: none, 1, 2, 3) and the guard format:
 *
 *   CORE_PI_GUARD_CRC16  8 bytes: guard 16 (T10 CRC, poly 8BB7h), apptag 16,
 *                        storage+reference space 32  (SBC-4, NVMe 16b Guard)
 *   CORE_PI_GUARD_CRC32C 16 bytes: guard 32 (CRC32C), apptag 16, space 80
 *                        (NVMe 32b Guard)
 *   CORE_PI_GUARD_CRC64  16 bytes: guard 64 (CRC-64/NVME, poly
 *                        AD93D23594C93659h), apptag 16, space 48 (NVMe 64b)
 *
 * all big-endian.  The storage+reference space holds a storage tag of `sts`
 * bits (most significant) and the reference tag in the rest; reference tags
 * wider than 64 bits (32b guard with sts < 16) are refused.  The guard
 * covers the interval's data and, when the PI is in the last bytes of the
 * metadata, the metadata bytes before it (NVM Command Set 5.3.1.4).
 * Every CRC comes from ISA-L; CRC-64/NVME needs ISA-L >= 2.31
 * (crc64_rocksoft_refl): without it, 64b guard formats are refused by
 * core_pi_fmt_check (Debian 12 ships 2.30, and no other Debian library
 * has that CRC).
 *
 * Buffers hold whole blocks either interleaved (extended LBAs: each
 * interval's data followed by its metadata; buf.md == NULL) or separate
 * (buf.data the data, buf.md the metadata of every interval in order).
 *
 * Reference tags: the caller gives the first interval's expected/generated
 * value (a command's first one: the LBA's low bits for type 1, the 32-byte
 * CDB's expected initial reference tag or NVMe's ILBRT for type 2); it
 * increments by one per protection interval, modulo the tag's width
 * (SBC-4 4.22: each subsequent protection information interval's is the
 * previous one plus one).  Type 3 reference tags are never checked.
 *
 * Escapes (checked before anything else; a tuple that escapes is not
 * checked at all): apptag FFFFh for types 1 and 2; apptag FFFFh and the
 * whole storage+reference space all ones for type 3.
 */
#ifndef CORE_PI_H
#define CORE_PI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

enum core_pi_type { CORE_PI_TYPE0 = 0, CORE_PI_TYPE1 = 1, CORE_PI_TYPE2 = 2, CORE_PI_TYPE3 = 3 };

enum core_pi_guard {
        CORE_PI_GUARD_CRC16 = 0,  /* T10 DIF, NVMe 16b Guard (PIF 0) */
        CORE_PI_GUARD_CRC32C = 1, /* NVMe 32b Guard (PIF 1) */
        CORE_PI_GUARD_CRC64 = 2,  /* NVMe 64b Guard (PIF 2) */
};

#define CORE_PI_MAX_EXP      6 /* SBC-4: P_I_EXPONENT is 4 bits; more than 64 intervals is useless */
#define CORE_PI_MIN_INTERVAL 512u

struct core_pi_fmt {
        uint32_t block_size; /* data bytes per logical block */
        uint16_t md_size; /* metadata bytes per protection interval (>= the PI size if type != 0) */
        uint8_t type;     /* enum core_pi_type */
        uint8_t guard;    /* enum core_pi_guard */
        uint8_t pi_exp;   /* 2^pi_exp protection intervals per logical block */
        uint8_t sts;      /* storage tag bits in the storage+reference space */
        bool pi_first;    /* PI in the first bytes of the metadata (else the last) */
};

/* 0 if the format is usable; else -EINVAL (inconsistent) or -ENOTSUP (64b
 * guard without CRC-64/NVME), with a reason in err when given. */
int core_pi_fmt_check(const struct core_pi_fmt *f, char *err, size_t errlen);
/* Bytes of one PI tuple (8 or 16); 0 for type 0. */
unsigned core_pi_tuple_size(const struct core_pi_fmt *f);
/* Interleaved bytes per logical block (data plus all intervals' metadata). */
size_t core_pi_ext_block_size(const struct core_pi_fmt *f);
/* Metadata bytes per logical block. */
size_t core_pi_md_per_block(const struct core_pi_fmt *f);
/* Width of the reference tag in bits (1..64). */
unsigned core_pi_ref_bits(const struct core_pi_fmt *f);
bool core_pi_have_crc64(void);

/* The guard of len bytes in the format's guard CRC (no PI involved). */
uint64_t core_pi_crc(enum core_pi_guard g, const void *buf, size_t len);

struct core_pi_buf {
        uint8_t *data; /* interleaved blocks, or data only when md != NULL */
        uint8_t *md;   /* separate metadata, NULL for interleaved */
};

/* What generate writes into each tuple. */
struct core_pi_tags {
        uint64_t ref;  /* first interval's reference tag; +1 per interval */
        uint16_t app;  /* application tag of every interval */
        uint64_t stag; /* storage tag (low sts bits used) */
};

/* One range of the SCSI Application Tag mode page (SBC-4 6.5.3). */
struct core_pi_apptag_range {
        uint64_t lba;
        uint64_t count;
        uint16_t app;
};

#define CORE_PI_APPTAB_MAX 256

/* The application tag table: sorted, non-overlapping ranges. */
struct core_pi_apptab {
        uint32_t n;
        struct core_pi_apptag_range r[CORE_PI_APPTAB_MAX];
};

/* Build a table from ranges in any order (count 0 ranges are dropped).
 * -EINVAL if two ranges overlap, one wraps past 2^64 or there are too many. */
int core_pi_apptab_set(struct core_pi_apptab *t, const struct core_pi_apptag_range *r, size_t n);
/* The table's application tag for lba, or false if no range covers it. */
bool core_pi_apptab_lookup(const struct core_pi_apptab *t, uint64_t lba, uint16_t *app);

enum {
        CORE_PI_CHK_GUARD = 1u << 0,
        CORE_PI_CHK_APP = 1u << 1,
        CORE_PI_CHK_REF = 1u << 2, /* ignored for type 3 */
};

struct core_pi_check {
        unsigned flags;                   /* CORE_PI_CHK_* */
        uint64_t ref;                     /* expected reference tag of the first interval */
        uint16_t app, app_mask;           /* expected application tag, bits compared */
        uint64_t lba;                     /* the first block's LBA (apptag table, err->lba) */
        const struct core_pi_apptab *tab; /* when set and CHK_APP: blocks it covers are
                                            checked against it, all 16 bits, instead of app */
};

/* Where verify failed. */
struct core_pi_err {
        enum core_status status; /* CORE_E_PI_GUARD / _APPTAG / _REFTAG */
        uint64_t block;          /* index of the failing block in the buffer */
        uint32_t interval;       /* the interval within it */
        uint64_t lba;            /* chk->lba + block: the INFORMATION field / error log LBA */
        uint64_t expected, actual;
};

/* Fill every interval's PI tuple (metadata bytes outside it untouched). */
void core_pi_generate(const struct core_pi_fmt *f, struct core_pi_buf b, size_t nblocks,
                      const struct core_pi_tags *t);

/*
 * Recompute every interval's guard over its (changed) data, keeping its
 * application tag, reference tag and other metadata bytes (ORWRITE: the
 * result of the OR gets a guard of its own).  Escaped tuples stay escaped
 * (their guard is not looked at).
 */
void core_pi_reguard(const struct core_pi_fmt *f, struct core_pi_buf b, size_t nblocks);

/*
 * Set the reference tag of every interval that does not escape to ref (+1
 * per interval), keeping its guard, application tag and storage tag (a
 * copy moving type 1 blocks to another LBA).
 */
void core_pi_retag(const struct core_pi_fmt *f, struct core_pi_buf b, size_t nblocks, uint64_t ref);

/* Check nblocks; the first failing interval (guard, then application tag,
 * then reference tag) ends it: its status is returned and described in *e
 * (may be NULL).  CORE_OK if all pass (type 0: always). */
enum core_status core_pi_verify(const struct core_pi_fmt *f, struct core_pi_buf b, size_t nblocks,
                                const struct core_pi_check *c, struct core_pi_err *e);

/* PRACT on write: copy plain data (nblocks * block_size bytes) into dst
 * and generate its PI; metadata bytes outside the tuple are zeroed. */
void core_pi_insert(const struct core_pi_fmt *f, const void *src, struct core_pi_buf dst,
                    size_t nblocks, const struct core_pi_tags *t);

/* PRACT on read: copy the data of src into dst (nblocks * block_size
 * bytes), dropping the metadata; when c is given, src is verified first
 * and nothing is copied if it fails. */
enum core_status core_pi_strip(const struct core_pi_fmt *f, struct core_pi_buf src, void *dst,
                               size_t nblocks, const struct core_pi_check *c,
                               struct core_pi_err *e);

/* Interleaved <-> separate layouts (the buffers must not overlap). */
void core_pi_split(const struct core_pi_fmt *f, const void *ext, void *data, void *md,
                   size_t nblocks);
void core_pi_join(const struct core_pi_fmt *f, const void *data, const void *md, void *ext,
                  size_t nblocks);

#endif
