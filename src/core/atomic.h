/*
 * Atomic writes (issue 8): the contract between the block core's
 * atomic-write engine (core/atomic.c) and the two personalities.
 *
 * A namespace has one set of atomic limits, from its configuration
 * (`atomic_write_max`, bytes) and what its backend can back with a journal
 * or with native atomic writes (RWF_ATOMIC).  SCSI shows them in the Block
 * Limits VPD page and honours them for WRITE ATOMIC(16)/(32) and atomic
 * WRITE SCATTERED; NVMe shows them as NAWUN/NAWUPF/NACWU/NABSN/NABO/NABSPF
 * (and AWUN/AWUPF/ACWU) and honours them for every Write that fits.
 *
 * Guarantee: a write the core runs with CORE_REQ_ATOMIC is all old or all
 * new data after kill -9 of slated or a power cut, and no concurrent
 * command (read or write, either protocol) sees part of it.
 */
#ifndef CORE_ATOMIC_H
#define CORE_ATOMIC_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

struct core_ns;
struct core_req;

/* How a namespace makes writes atomic (logged at open, shown over RPC). */
enum core_atomic_path {
        CORE_ATOMIC_NONE = 0, /* no atomic writes beyond one logical block */
        CORE_ATOMIC_ORDER,    /* mem: nothing survives a crash, so ordering suffices */
        CORE_ATOMIC_JOURNAL,  /* intent journal beside the data, replayed at open */
        CORE_ATOMIC_NATIVE,   /* the backing store's own atomic writes (RWF_ATOMIC, O_DIRECT) */
};

/* All in logical blocks.  0 in a field means what the SBC-4 field says for 0. */
struct core_atomic_limits {
        enum core_atomic_path path;
        uint32_t max_blocks;         /* MAXIMUM ATOMIC TRANSFER LENGTH; NAWUPF + 1; 0 = none */
        uint32_t align_blocks;       /* ATOMIC ALIGNMENT (0 = any) */
        uint32_t gran_blocks;        /* ATOMIC TRANSFER LENGTH GRANULARITY (0 = any) */
        uint32_t max_with_boundary;  /* MAXIMUM ATOMIC TRANSFER LENGTH WITH ATOMIC BOUNDARY */
        uint32_t max_boundary;       /* MAXIMUM ATOMIC BOUNDARY SIZE */
        uint32_t scatter_max_blocks; /* a whole WRITE SCATTERED atomic up to this total; 0 = no */
        uint32_t scatter_max_ranges; /* ... and this many ranges */
};

/* The namespace's current limits (a snapshot; control path or data path). */
void core_ns_atomic_limits(const struct core_ns *ns, struct core_atomic_limits *out);

/* Which field of an atomic write breaks the limits (core_atomic_check). */
enum core_atomic_bad {
        CORE_ATOMIC_OK = 0,
        CORE_ATOMIC_BAD_LENGTH,   /* longer than the maximum (with or without boundary) */
        CORE_ATOMIC_BAD_ALIGN,    /* LBA not a multiple of the alignment */
        CORE_ATOMIC_BAD_GRAN,     /* length not a multiple of the granularity */
        CORE_ATOMIC_BAD_BOUNDARY, /* boundary larger than the maximum boundary size */
        CORE_ATOMIC_UNSUPPORTED,  /* the namespace has no atomic writes */
};

/*
 * The one check of an explicit atomic write (SCSI WRITE ATOMIC): lba, nlb
 * and boundary (blocks; 0 = none) against the namespace's limits.  The
 * personality turns the answer into its error with the field's position.
 */
enum core_atomic_bad core_atomic_check(const struct core_ns *ns, uint64_t lba, uint32_t nlb,
                                       uint32_t boundary);

/*
 * NVMe: whether a plain Write of [lba, lba+nlb) is one the namespace
 * promises to make atomic (fits NAWUPF and crosses no NABSPF boundary); the
 * personality then submits it with CORE_REQ_ATOMIC.
 */
bool core_atomic_fits(const struct core_ns *ns, uint64_t lba, uint32_t nlb);

#endif
