/*
 * The core copy engine: copies source ranges to destination ranges inside
 * the target, possibly across namespaces, with no data crossing the
 * network.  One engine that NVMe Copy (opcode 19h) and SCSI EXTENDED COPY
 * / WRITE USING TOKEN both drive (DESIGN.md "The one idea").
 *
 * Every range is checked like the equivalent read of its source and write
 * of its destination (core_ns_check: sanitize, ready, medium, write
 * protection; the range; reservations through the nexus: read group on the
 * source, write group on the destination), all of them before any data
 * moves, and again for each chunk while the copy runs (a namespace may
 * become write protected half way).  A copy stops at the first failure:
 * status says why, failed_range which range, blocks_done how far it got.
 *
 * Semantics (our choice where the standards leave one): ranges are
 * processed in order; each range is copied as if its source were read
 * completely before its destination is written (memmove-like), so a range
 * whose source and destination overlap in one namespace gives the source's
 * old contents at the destination.  A later range sees what earlier ranges
 * wrote.  Host writes to the destination while the copy runs are the
 * host's business (as on real devices), but each block is copied whole.
 * With CORE_REQ_FUA the destinations are durable when cb runs.
 *
 * Protection information (issue 10): a range between namespaces with
 * metadata needs the same format on both (type, metadata size, guard,
 * interval, PI position, storage tag; else CORE_E_COPY_INCOMPATIBLE, as
 * different block sizes are).  Each block's metadata moves with its data
 * (both read and written as extended LBAs through the protection stage):
 * guard and application tag as they are, the reference tag of a type 1
 * block set to the destination LBA's (type 1 ties it to the LBA; type 2
 * and 3 tags are the writer's and move unchanged; escaped blocks stay
 * escaped).  A range's src_chk asks for checks of its source blocks
 * before their chunk is written (guard; application tag against src_app
 * under src_app_mask; reference tag against src_ref, +1 per interval); a
 * failure stops the copy with CORE_E_PI_* and nothing of that chunk
 * written.  c->pi.dst_gen instead gives every destination block a new
 * tuple (guard over its data, pi.dst_app, reference tag from the
 * destination LBA on type 1, else pi.dst_ref + the blocks of the copy
 * before it); c->pi.dst_chk checks what is about to be written (after the
 * type 1 retag) against the same tags, pi.dst_app under pi.dst_app_mask.
 *
 * Execution: between two file-backed namespaces each chunk is a
 * copy_file_range (a reflink where the file system can) on a core worker
 * thread, never on the reactor; elsewhere (mem, null, mixed backends)
 * chunks go through the core's own read and write requests with a fixed
 * set of chunk buffers per reactor (a copy that finds none parks until
 * one is free).  Nothing is allocated per copy.
 *
 * Async contract: core_copy_submit returns nothing and calls c->cb
 * exactly once, on c->reactor, never from inside the submit.  The issuer
 * owns c and the range array until cb.
 */
#ifndef CORE_COPY_H
#define CORE_COPY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/req.h"
#include "core/status.h"
#include "core/worker.h"
#include "rt/reactor.h"

struct core_ns;
struct core_pr_nexus;

/*
 * What one copy may ask for (the engine refuses more with
 * CORE_E_COPY_LIMIT; personalities advertise these: NVMe MSRC, MSSRL,
 * MCL; SCSI RECEIVE COPY OPERATING PARAMETERS / VPD 8Fh).
 */
#define CORE_COPY_MAX_RANGES      128u           /* ranges per copy */
#define CORE_COPY_MAX_RANGE_BYTES (256ull << 20) /* bytes per range */
#define CORE_COPY_MAX_BYTES       (4ull << 30)   /* bytes per copy, all ranges */

struct core_copy_range { /* nlb blocks of src from src_lba to dst at dst_lba */
        struct core_ns *src;
        uint64_t src_lba;
        struct core_ns *dst;
        uint64_t dst_lba;
        uint64_t nlb; /* in blocks; src and dst must have the same block size */
        /* Protection information (above): checks of the source blocks, their expected tags. */
        unsigned src_chk; /* CORE_PI_CHK_* */
        uint64_t src_ref;
        uint16_t src_app, src_app_mask;
};

struct core_copy {
        /* Filled by the issuer; the range array is the issuer's until cb. */
        const struct core_copy_range *ranges;
        unsigned nranges;
        const struct core_pr_nexus *nexus; /* reservation checks: read on src, write on dst */
        uint32_t flags;                    /* CORE_REQ_FUA: destinations durable at cb */
        struct {                           /* protection information (above); zero: move it */
                bool dst_gen;              /* generate the destination's PI */
                unsigned dst_chk;          /* CORE_PI_CHK_* of what is written */
                uint64_t dst_ref;          /* types 2, 3: the first destination block's tag */
                uint16_t dst_app, dst_app_mask;
        } pi;
        struct rt_reactor *reactor;
        void (*cb)(struct core_copy *c);
        void *cb_arg;

        /* Filled by the core. */
        enum core_status status;      /* CORE_OK or why it stopped */
        unsigned failed_range;        /* index of the range that failed (status != CORE_OK) */
        _Atomic uint64_t blocks_done; /* progress, readable while it runs */

        /* Core-private. */
        _Atomic bool cancel;
        int stage;
        unsigned cur;       /* range being copied */
        uint64_t cur_done;  /* blocks of it copied */
        uint64_t chunk_lba; /* offset in the range of the chunk in flight */
        uint32_t chunk_nlb;
        unsigned flush_idx; /* FUA: next range whose destination to flush */
        bool no_offload;    /* the backend refused copy offload: chunks go through buffers */
        bool active;        /* counted in the destinations' copy_stats.active_* */
        void *buf;          /* the chunk buffer held (reactor pool), or NULL */
        struct core_copy *wait_next;
        struct rt_defer defer;
        struct core_req req;
        struct { /* a chunk on a core worker thread (copy_file_range) */
                struct core_work work;
                uint64_t src_off, dst_off, len;
                uint64_t progress; /* bytes of it the worker added to active_done */
                int res;
        } job;
};

/*
 * Clear c and set the common fields (nexus NULL: the core's own copy, not
 * stopped by reservations; set c->nexus afterwards for a host's).
 */
void core_copy_init(struct core_copy *c, const struct core_copy_range *ranges, unsigned nranges,
                    uint32_t flags, struct rt_reactor *reactor, void (*cb)(struct core_copy *c),
                    void *cb_arg);
/* Start it (on c->reactor's thread); cb exactly once, on c->reactor, never inside submit. */
void core_copy_submit(struct core_copy *c);
/*
 * Ask a running copy to stop at the next chunk boundary: cb then reports
 * CORE_E_ABORTED (blocks_done says how far it got).  Callable from any
 * thread while the copy runs (between submit and cb).
 */
void core_copy_cancel(struct core_copy *c);

#endif
