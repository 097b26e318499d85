/*
 * struct core_req: the unit of work the block core executes.  A
 * personality fills one from a CDB or SQE, the transport attaches the data
 * iovec, and core_req_submit() runs it through the stages down to the
 * backend.
 *
 * Async contract (core_req_submit, backend submit): returns nothing and
 * always calls req->cb exactly once, never from inside the submit call
 * (synchronous results are deferred to the next reactor loop iteration).
 */
#ifndef CORE_REQ_H
#define CORE_REQ_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "core/pi.h"
#include "core/status.h"
#include "rt/bigbuf.h"
#include "rt/reactor.h"

struct core_ns;
struct core_pr_nexus;
struct backend;
struct core_host;
struct core_lba_range;

enum core_op {
        CORE_OP_READ = 0,
        CORE_OP_WRITE,
        CORE_OP_FLUSH,
        CORE_OP_WRITE_ZEROES,
        CORE_OP_COMPARE,           /* compare media with data (no write) */
        CORE_OP_COMPARE_AND_WRITE, /* iov = compare data then write data, atomic */
        CORE_OP_ORWRITE,           /* media |= data (atomic read-modify-write) */
        CORE_OP_VERIFY,            /* medium check only; nothing to compare */
        CORE_OP_WRITE_SAME,        /* iov holds one block; replicate over the range */
        CORE_OP_PREFETCH,
        /*
         * Thin provisioning: return the blocks' space to the backend; they
         * read back as zeroes afterwards (LBPRZ / DLFEAT 001b).  On a
         * namespace that is not thin, a no-op (the hint is ignored).
         */
        CORE_OP_DEALLOCATE,
        /*
         * SBC-4 WRITE SCATTERED: req->ranges[0..nr_ranges) (lba and nlb
         * unused; nlb = the total), data for the ranges in order in iov.
         * With CORE_REQ_ATOMIC the whole write is atomic (core/atomic.h).
         */
        CORE_OP_WRITE_SCATTERED,
        CORE_OP_MAX
};

#define CORE_REQ_FUA (1u << 0) /* data durable before completion */
#define CORE_REQ_DPO (1u << 1) /* hint: do not retain in cache */
/* Issued by the sanitize operation itself: passes the sanitize-in-progress check. */
#define CORE_REQ_SANITIZE (1u << 2)
/*
 * DEALLOCATE: anchor instead (SBC-4 4.7.3.4): keep the blocks' space, read
 * zeroes.  Only where core_ns_can_anchor(); elsewhere CORE_E_INVALID_FIELD.
 */
#define CORE_REQ_ANCHOR (1u << 3)

/*
 * WRITE (or WRITE_SCATTERED): all or nothing across a crash, never seen in
 * part by another command (core/atomic.h); the issuer checked the limits
 * (core_atomic_check / core_atomic_fits).  atomic_boundary splits it into
 * independently atomic pieces.
 */
#define CORE_REQ_ATOMIC (1u << 4)
/*
 * Issued by the self-test engine (core/selftest.c): the core's own read,
 * not counted in the I/O statistics (hosts' read counts stay theirs).
 */
#define CORE_REQ_SELFTEST (1u << 11)

#define CORE_REQ_MAX_IOV 8

struct core_req {
        /* Filled by the personality. */
        struct core_ns *ns;
        enum core_op op;
        uint32_t flags;
        uint64_t lba;
        uint32_t nlb;
        /*
         * Who issued it, for the reservation check (core_ns_pr_conflict): the
         * SCSI I_T nexus or the NVMe host.  NULL: the core's own I/O
         * (sanitize), which reservations do not stop.  Set after
         * core_req_init(); must stay valid until the request is submitted.
         */
        const struct core_pr_nexus *nexus;
        /*
         * The host whose statistics count this request (core/stats.h), or
         * NULL; set after core_req_init() like nexus.
         */
        struct core_host *host;
        /* CORE_REQ_ATOMIC: blocks per independently atomic piece; 0 = whole. */
        uint32_t atomic_boundary;
        /* CORE_OP_WRITE_SCATTERED: the ranges (issuer's memory, valid until the callback). */
        const struct core_lba_range *ranges;
        uint32_t nr_ranges;
        /*
         * Placement (core/flash.h): a placement id from core_placement_get
         * (a SCSI stream or group, an NVMe stream, an FDP reclaim unit
         * handle), 0 = none; and CORE_HINT_* access hints.  Set after
         * core_req_init() like nexus.
         */
        uint16_t placement;
        uint8_t hints;
        /*
         * Protection information (issue 10), on a namespace whose format has
         * metadata (core_ns_md_per_block() > 0); ignored elsewhere.  Set
         * after core_req_init() like nexus; cleared by it (all zero: data
         * only, the core generates the PI of written blocks with the
         * defaults below and checks nothing).
         *   host_md  iov holds each block's metadata after its data
         *            (extended LBAs; core_ns_xfer_bytes(ns, nlb, true)), on
         *            writes what the host sent, on reads what it gets;
         *            false: data only (SCSI xxPROTECT 0, NVMe PRACT 1 with
         *            PI-only metadata) and the core strips/inserts.
         *   gen      writes: the core generates the PI tuple of every
         *            interval it stores (SCSI WRPROTECT 0, NVMe PRACT 1),
         *            with gen_ref for the first interval (+1 each), gen_app;
         *            with host_md the host's other metadata bytes are kept.
         *            Without host_md the core always generates.
         *   chk      CORE_PI_CHK_* checks: writes with host_md check what
         *            the host sent before anything is stored; reads, verify
         *            and compare check what is stored before anything is
         *            returned.  A failure is CORE_E_PI_GUARD/_APPTAG/_REFTAG
         *            with info = the failing block's LBA (info_valid).
         *   ref, app, app_mask  what chk expects (ref: the first interval's)
         *   use_apptab  CHK_APP compares blocks the namespace's application
         *            tag table covers against it (SCSI ATO with the
         *            Application Tag mode page)
         *   rmw_chk, rmw_ref  ORWRITE: the checks of the stored blocks read
         *            before the OR (rmw_ref the first interval's expected
         *            reference tag; app, app_mask and use_apptab as for chk);
         *            a failure ends it with nothing written.  chk applies to
         *            the host's metadata (host_md) as for a write.  The
         *            result's guard is recomputed; its application and
         *            reference tags are the host's (host_md) or generated
         *            (gen_ref, gen_app)
         */
        struct {
                bool host_md;
                bool gen;
                bool use_apptab;
                unsigned chk;
                unsigned rmw_chk;
                uint64_t rmw_ref;
                uint64_t ref;
                uint16_t app, app_mask;
                uint64_t gen_ref;
                uint16_t gen_app;
        } pi;
        /* Data: the transport's buffers.  Length must be what op needs. */
        struct iovec iov[CORE_REQ_MAX_IOV];
        int iovcnt;
        /* Where to run and whom to tell. */
        struct rt_reactor *reactor;
        void (*cb)(struct core_req *req);
        void *cb_arg;

        /* Filled by the core. */
        enum core_status status;
        uint64_t info; /* e.g. miscompare byte offset */
        bool info_valid;

        /* Core-private. */
        struct rt_event ev;
        struct rt_defer defer;
        int stage;
        uint32_t done_bytes;
        uint64_t cur_lba;     /* multi-step ops (write same): next LBA to do */
        int be_res;           /* result a deferred backend completion carries */
        struct iovec one_iov; /* iovec for core-built I/O; must outlive submission to the ring */
        uint64_t lock_slots;  /* entries held in the namespace's range lock (bit per slot) */
        uint8_t order;        /* ordering against atomic writes (core/req.c ORD_*) */
        bool atomic_active;   /* counted in the namespace's atomic_active */
        uint32_t cur_range;   /* WRITE_SCATTERED: next range */
        struct iovec sub_iov[CORE_REQ_MAX_IOV]; /* a piece of iov (scattered ranges) */
        struct core_req *jnext;                 /* the journal's queue (core/atomic.c) */
        /* An atomic write on a namespace with metadata: the blocks' metadata (stored form,
         * nlb * md_per_block bytes) the journal records and applies with the data (req.c). */
        const uint8_t *atomic_md;
        uint32_t atomic_md_len;
        bool prov_frees;     /* deallocates (provisioning accounting on completion) */
        bool prov_pool;      /* prov_bytes are reserved in the namespace's pool too */
        uint64_t prov_bytes; /* space reserved against the provisioning limit (provision.c) */
        bool counted;        /* started in the statistics; ends when the callback runs */
        bool media_heal;     /* clears unrecoverable marks when it succeeds (core/media.c) */
        bool crypt_restore;  /* iov holds ciphertext made in place: decrypt it back at the end */
        uint64_t t_submit;   /* rt_now_ns() at submission, for the latency histogram */
        struct {             /* the backend I/O in flight (for retries and checks) */
                struct backend *be;
                enum core_op op;
                uint64_t off, len;
                const struct iovec *iov;
                int iovcnt;
                bool fua, direct;
        } bio;
        struct rt_timer fault_timer;   /* fault injection's added latency (core/fault.h) */
        enum core_status fault_status; /* what the injected fault finishes with (CORE_OK: run) */
        /*
         * The protection stage (core/req.c, issue 10): the format this
         * request runs with, its metadata per block (0: none), the buffer it
         * borrowed from the reactor's pool (metadata, then a bounce of the
         * data when needed), where the data is, and the step it is at.
         */
        struct {
                bool users;   /* counted in the namespace's pi_users slot */
                bool bounce;  /* the data goes through the buffer (after the metadata) */
                bool ext_vec; /* extended LBAs in place: an iovec per interval's data */
                uint8_t step; /* core/req.c PI_* */
                uint32_t mdpb;
                struct core_pi_fmt fmt;
                uint8_t *buf, *md,
                    *data; /* buf: borrowed or inl; md, data: inside it (data NULL: iov) */
                size_t buf_len;
                uint64_t cur_lba, end_lba; /* VERIFY: the piece now, the end */
                uint32_t piece;            /* VERIFY, WRITE SAME: blocks per piece */
                uint8_t *ws_md;            /* WRITE SAME with the host's PI: its block's metadata */
                bool ws_raw;               /* ...replicated as is (escape, type 3) */
                uint64_t ws_ref;           /* ...else regenerated from its reference tag */
                uint16_t ws_app;           /* ...and application tag */
                struct rt_bigbuf_wait wait;
                /* Small requests' buffer (buf_len 0): no pool for a 4 KiB command. */
                _Alignas(64) uint8_t inl[1024];
        } pix;
        void *scratch; /* per-request bounce buffer owned by the issuer (compare/orwrite) */
        uint32_t scratch_len;
};

/* Start a request from scratch: every field cleared, then the common ones set. */
void core_req_init(struct core_req *req, struct core_ns *ns, enum core_op op, uint64_t lba,
                   uint32_t nlb, uint32_t flags, struct rt_reactor *reactor,
                   void (*cb)(struct core_req *req), void *cb_arg);

void core_req_submit(struct core_req *req);
/* Finish with status: defers the callback to the next loop iteration. */
void core_req_complete(struct core_req *req, enum core_status st);

#endif
