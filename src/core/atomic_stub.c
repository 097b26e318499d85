/*
 * TEMP stand-in for the atomic-write engine (issue 8), so the SCSI side can
 * be built and tested before branch atomic-core is merged.  DROP THIS FILE
 * AT MERGE (and its line in meson.build, and the CORE_OP_WRITE_SCATTERED
 * case of core/req.c from the same "TEMP stand-in" commit): core/atomic.c
 * of atomic-core is the real implementation of core/atomic.h.
 *
 * Limits are what the real engine is expected to give: 128 KiB (256
 * blocks of 512 B: libiscsi's WriteAtomic16.Simple writes 1..256 blocks
 * atomically), any alignment and granularity of one logical block,
 * boundaries up to the maximum, and whole scattered writes up to the same
 * total in up to 16 ranges.  Nothing here makes anything atomic.
 */
#include "core/atomic.h"
#include "core/ns.h"

#define STUB_ATOMIC_BYTES   (128u << 10)
#define STUB_SCATTER_RANGES 16u

void core_ns_atomic_limits(const struct core_ns *ns, struct core_atomic_limits *out)
{
        uint32_t max = STUB_ATOMIC_BYTES >> ns->block_shift;
        *out = (struct core_atomic_limits){
            .path = CORE_ATOMIC_ORDER,
            .max_blocks = max,
            .align_blocks = 1,
            .gran_blocks = 1,
            .max_with_boundary = max,
            .max_boundary = max,
            .scatter_max_blocks = max,
            .scatter_max_ranges = STUB_SCATTER_RANGES,
        };
}

enum core_atomic_bad core_atomic_check(const struct core_ns *ns, uint64_t lba, uint32_t nlb,
                                       uint32_t boundary)
{
        struct core_atomic_limits l;
        core_ns_atomic_limits(ns, &l);
        if (!l.max_blocks && !l.max_with_boundary)
                return CORE_ATOMIC_UNSUPPORTED;
        if (l.align_blocks > 1 && lba % l.align_blocks)
                return CORE_ATOMIC_BAD_ALIGN;
        if (l.gran_blocks > 1 && nlb % l.gran_blocks)
                return CORE_ATOMIC_BAD_GRAN;
        if (boundary) {
                if (boundary > (l.max_boundary ? l.max_boundary : 1))
                        return CORE_ATOMIC_BAD_BOUNDARY;
                if (nlb > l.max_with_boundary)
                        return CORE_ATOMIC_BAD_LENGTH;
        } else if (nlb > l.max_blocks) {
                return CORE_ATOMIC_BAD_LENGTH;
        }
        return CORE_ATOMIC_OK;
}

bool core_atomic_fits(const struct core_ns *ns, uint64_t lba, uint32_t nlb)
{
        return core_atomic_check(ns, lba, nlb, 0) == CORE_ATOMIC_OK;
}
