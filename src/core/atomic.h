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
        CORE_ATOMIC_NATIVE,   /* the backing store's RWF_ATOMIC (O_DIRECT), the journal for the rest
                               */
        CORE_ATOMIC_OBJECT,   /* the store applies a write inside one of its units all or nothing
                                 (rbd: one RADOS object); no journal, nothing crosses a unit */
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
        /*
         * The namespace's own atomic boundary (NABSN/NABSPF; OBJECT: the
         * store's unit): an atomic write must not cross a multiple of it.
         * 0 = none.
         */
        uint32_t boundary_blocks;
};

/*
 * The limits of a path, atomic_write_max of max_blocks and (OBJECT) a
 * store unit of unit_blocks: what core_ns_atomic_limits reports (pure;
 * for the unit tests too).
 */
void core_atomic_limits_make(enum core_atomic_path path, uint32_t max_blocks, uint32_t unit_blocks,
                             struct core_atomic_limits *out);

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
        CORE_ATOMIC_BAD_CROSSING, /* no ATOMIC BOUNDARY, and the LBA puts it across the
                                     namespace's own boundary (OBJECT: two RADOS objects) */
};

/*
 * The one check of an explicit atomic write (SCSI WRITE ATOMIC): lba, nlb
 * and boundary (blocks; 0 = none) against the namespace's limits.  The
 * personality turns the answer into its error with the field's position.
 */
enum core_atomic_bad core_atomic_check(const struct core_ns *ns, uint64_t lba, uint32_t nlb,
                                       uint32_t boundary);
/* The same against given limits (pure). */
enum core_atomic_bad core_atomic_check_limits(const struct core_atomic_limits *l, uint64_t lba,
                                              uint32_t nlb, uint32_t boundary);

/*
 * NVMe: whether a plain Write of [lba, lba+nlb) is one the namespace
 * promises to make atomic (fits NAWUPF and crosses no NABSPF boundary); the
 * personality then submits it with CORE_REQ_ATOMIC.
 */
bool core_atomic_fits(const struct core_ns *ns, uint64_t lba, uint32_t nlb);
/* The same against given limits (pure). */
bool core_atomic_fits_limits(const struct core_atomic_limits *l, uint64_t lba, uint32_t nlb);

/* ---- Inside the core (configuration, the engine behind core/req.c) ---- */

/*
 * Default atomic_write_max: 0, one logical block, what most drives offer
 * (AWUPF 0).  Our choice: over NVMe every Write that fits the limit pays
 * for atomicity (the journal on `file`, the range lock on `mem`), so a
 * namespace opts in with atomic_write_max; SCSI WRITE ATOMIC needs it too.
 */
#define CORE_ATOMIC_DEFAULT_MAX 0u
/* The largest atomic_write_max accepted (a record must fit the journal many times). */
#define CORE_ATOMIC_MAX_BYTES (1u << 20)
/* The journal file's size (records are appended, then it restarts after a checkpoint). */
#define CORE_ATOMIC_JOURNAL_BYTES (16u << 20)
/* WRITE SCATTERED made atomic as a whole: at most this many ranges. */
#define CORE_ATOMIC_SCATTER_RANGES 16

const char *core_atomic_path_name(enum core_atomic_path p);

/*
 * What the backing file or block device offers for RWF_ATOMIC with
 * O_DIRECT (statx STATX_WRITE_ATOMIC; bytes), as probed at open.
 */
struct core_atomic_native {
        bool supported;        /* STATX_ATTR_WRITE_ATOMIC */
        uint32_t unit_min;     /* stx_atomic_write_unit_min */
        uint32_t unit_max;     /* stx_atomic_write_unit_max */
        uint32_t segments_max; /* stx_atomic_write_segments_max */
        uint32_t mem_align;    /* stx_dio_mem_align (O_DIRECT buffer alignment) */
        uint32_t offset_align; /* stx_dio_offset_align */
};
/* statx of path; false (and *out cleared) when the kernel or file says nothing. */
bool core_atomic_native_probe(const char *path, struct core_atomic_native *out);
/*
 * The path of a `file` namespace of block_size-byte blocks given the probe:
 * NATIVE when one block is within the unit and at least two blocks fit
 * (*cap_bytes = the unit max, what atomic_write_max may be at most), else
 * JOURNAL (*cap_bytes = CORE_ATOMIC_MAX_BYTES).
 */
enum core_atomic_path core_atomic_choose_file(const struct core_atomic_native *nat,
                                              uint32_t block_size, uint32_t *cap_bytes);
/*
 * Whether one write of len bytes at byte offset off from iov can go to the
 * backend as one RWF_ATOMIC write: len a power of two within the unit,
 * off a multiple of len, at most segments_max buffers, each aligned for
 * O_DIRECT.  Writes that do not go through the journal on a NATIVE path.
 */
struct iovec;
bool core_atomic_native_fits(const struct core_atomic_native *nat, uint64_t off, uint64_t len,
                             const struct iovec *iov, int iovcnt);
/*
 * At namespace open (after the backend): choose the path for the backend,
 * recover the journal (replay committed records, discard torn ones) and
 * start the journal thread.  0 or -errno with err.
 */
int core_atomic_open(struct core_ns *ns, char *err, size_t errlen);
void core_atomic_close(struct core_ns *ns);
/*
 * Change atomic_write_max (bytes; a multiple of the block size, at most
 * CORE_ATOMIC_MAX_BYTES; not 0 on a namespace whose path is NONE):
 * persisted, then CORE_NS_EV_IDENTITY is published.  0 or -errno with err.
 */
int core_ns_set_atomic_max(struct core_ns *ns, uint32_t bytes, char *err, size_t errlen);

/* core/req.c: whether an atomic request goes through the journal thread. */
bool core_atomic_journaled(const struct core_req *req);
/* Queue an atomic WRITE / WRITE_SCATTERED to the journal; core_backend_done follows. */
void core_atomic_submit(struct core_req *req);
/*
 * Whether records were applied since the last checkpoint: a flush or a
 * FUA write must then persist a checkpoint before it completes, or an old
 * record would be replayed over data acknowledged durable after it.
 */
bool core_atomic_need_checkpoint(const struct core_ns *ns);
/* Data sync + checkpoint on the journal thread; core_backend_done follows. */
void core_atomic_checkpoint(struct core_req *req);
/*
 * core/req.c for the journal: hand a request's place in the ordering (its
 * range-lock entries, its atomic_active count) over, so the request can
 * complete before its blocks are written in place; release it later.
 */
void core_req_order_detach(struct core_req *req, uint64_t *slots, bool *active);
void core_ns_order_release(struct core_ns *ns, uint64_t slots, bool active);

/*
 * Recovery alone (the fuzz target, tests): replay journal jfd onto data
 * file dfd of a namespace of nblocks blocks of 1 << block_shift bytes, as
 * core_atomic_open does.  0 or -errno, and the counts.
 */
int core_atomic_replay_fds(int jfd, int dfd, uint32_t block_shift, uint64_t nblocks,
                           unsigned *replayed, unsigned *discarded);

/*
 * As core_atomic_replay_fds for a namespace with metadata: records that
 * carry the blocks' metadata after their data (mdpb bytes per block) have
 * it written to pfd at lba * mdpb too.
 */
int core_atomic_replay_fds_md(int jfd, int dfd, int pfd, uint32_t mdpb, uint32_t block_shift,
                              uint64_t nblocks, unsigned *replayed, unsigned *discarded);

/*
 * core_ns_format around replacing the metadata store: quiesce waits until
 * the journal has applied every record, checkpoints (no record of the old
 * format is replayed into the new store) and lets the store's file go;
 * resume opens the namespace's (new) store.  New requests are held by
 * pi_quiesce meanwhile.
 */
void core_atomic_pi_quiesce(struct core_ns *ns);
void core_atomic_pi_resume(struct core_ns *ns);

/*
 * The journal's on-disk format (core/atomic.c; exposed for the unit
 * tests): two checkpoint headers at 0 and 512, records from
 * CORE_ATOMIC_REC_START.
 */
struct core_atomic_jhdr {
        char magic[8]; /* CORE_ATOMIC_JHDR_MAGIC */
        uint32_t version;
        uint32_t block_size;
        uint64_t gen;      /* the valid header with the larger gen counts */
        uint64_t ckpt_seq; /* records up to this sequence number are retired */
        uint32_t crc;      /* crc32c of the bytes before it */
        uint32_t pad;
};
#define CORE_ATOMIC_JHDR_MAGIC "SLATEJ01"
#define CORE_ATOMIC_REC_START  4096u
struct core_atomic_rec {
        uint32_t magic;
        uint32_t hdr_len; /* this header + the ranges */
        uint64_t seq;
        uint32_t nr_ranges;
        uint32_t crc; /* crc32c of the header (crc 0), the ranges and the data */
        uint64_t data_len;
};
#define CORE_ATOMIC_REC_MAGIC 0x534c4152u /* "SLAR" */

#endif
