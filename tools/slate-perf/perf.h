/*
 * slate-perf internals shared by the driver (main.c) and the transports
 * (nvme_tcp.c: our own NVMe/TCP initiator; iscsi.c: libiscsi's async API).
 * The driver parses options, learns the namespace geometry through the
 * transport, starts one worker thread per queue/connection and merges their
 * counters; a transport's worker owns its socket and runs its own event loop,
 * asking perf_next_io() what to submit and calling perf_io_done() on each
 * completion.  No standard section; the wire protocols are in the transport
 * files.
 */
#ifndef SLATE_PERF_H
#define SLATE_PERF_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "core/pi.h"
#include "hist.h"

enum perf_transport_kind {
        PERF_NVME_TCP,
        PERF_ISCSI,
};

/*
 * --place: how writes say where they belong (issue 9).  Each worker of the
 * lifetimes workload tags its writes with its own id (perf_worker.tag):
 * STREAM: SCSI WRITE STREAM(16) to a stream opened by STREAM CONTROL, NVMe
 * Write DTYPE 01h (Streams directive, enabled first) with DSPEC = the id;
 * GROUP: SCSI WRITE(16) with GROUP NUMBER = the id (a permanent stream);
 * FDP: NVMe Write DTYPE 02h with DSPEC = the placement identifier.
 */
enum perf_place {
        PERF_PLACE_NONE = 0,
        PERF_PLACE_STREAM,
        PERF_PLACE_GROUP,
        PERF_PLACE_FDP,
};

/*
 * How a worker waits for its socket (--poll): OFF sleeps in poll() whenever
 * the socket has nothing; ALWAYS never sleeps (non-blocking checks in a
 * loop, a core at 100 %); ADAPTIVE spins for poll_us after the last
 * completion or send, then sleeps (as slated's reactor_poll adaptive).
 */
enum perf_poll {
        PERF_POLL_OFF = 0,
        PERF_POLL_ADAPTIVE,
        PERF_POLL_ALWAYS,
};
#define PERF_POLL_US_DEFAULT 50

struct perf_opts {
        enum perf_transport_kind transport;
        const char *addr;   /* NVMe/TCP target address */
        const char *port;   /* NVMe/TCP service (default 4420) */
        const char *subnqn; /* NVMe subsystem NQN */
        const char *hostnqn;
        uint32_t nsid;
        const char *url; /* iSCSI URL iscsi://host[:port]/iqn/lun */
        unsigned qd;     /* outstanding I/Os per queue */
        uint32_t bs;     /* bytes per I/O */
        unsigned read_pct;
        bool random;
        double duration; /* seconds */
        unsigned nqueues;
        bool hdgst, ddgst;
        int cpus[64]; /* --cpu list; ncpus == 0: not pinned */
        unsigned ncpus;
        bool json;
        bool verbose;
        enum perf_poll poll;
        uint32_t poll_us;    /* ADAPTIVE's spin budget */
        uint64_t span_bytes; /* 0: whole namespace */
        uint32_t kato_ms;
        /*
         * --workload lifetimes: queue 0 writes cold data (large bs writes,
         * sequential over everything past the hot region, overwritten only
         * when it comes round again), the other queues hot data (hot_bs
         * random rewrites of the first hot_bytes); queue 0 never gets ahead
         * of the hot queues in bytes, so half the bytes are each.
         */
        bool lifetimes;
        uint64_t hot_bytes;
        uint32_t hot_bs;
        uint64_t write_total;     /* stop after this many bytes written; 0: --duration */
        const char *tls_psk;      /* NVMe/TCP TLS 1.3: configured PSK "NVMeTLSkey-1:..." */
        const char *tls_identity; /* offer this PSK identity instead of the derived one */
        bool verify;              /* writes carry LBA-tagged blocks, reads check them */
        enum perf_place place;
        /*
         * --pi (issue 10): I/O with the namespace's / LU's protection
         * information.  HOST: the initiator generates the PI of every block
         * it writes and checks the PI of every block it reads, and asks the
         * target to check both ways (NVMe PRACT 0, PRCHK guard/app/ref,
         * extended LBAs; SCSI WRPROTECT/RDPROTECT 001b, 520-byte style
         * blocks).  PRACT (NVMe only): the controller inserts and strips
         * (PRACT 1), checking guard, application and reference tags.
         */
        enum { PERF_PI_NONE = 0, PERF_PI_HOST, PERF_PI_PRACT } pi;
};

/* The application tag slate-perf writes and expects with --pi. */
#define PERF_PI_APPTAG 0x5350u

/* Geometry learnt from the target before the workers start. */
struct perf_geom {
        uint32_t lba_size;     /* data bytes per block */
        uint32_t md_size;      /* metadata bytes per block (extended LBAs), 0: none */
        struct core_pi_fmt pi; /* the protection format (pi.type 0: none) */
        uint64_t nblocks;
        uint32_t max_io; /* largest transfer in bytes the target takes, 0 = no limit */
        char desc[256];  /* one line describing the target, for the report */
};

struct perf_stats {
        uint64_t reads, writes, errors;
        /* --pi: the target's end-to-end check errors, and the initiator's own. */
        uint64_t pi_guard, pi_app, pi_ref, pi_host;
        uint64_t read_bytes, write_bytes;
        /* --poll: non-blocking checks that found nothing, and poll() sleeps. */
        uint64_t spins, sleeps;
        struct perf_hist lat; /* all I/Os */
        struct perf_hist rlat;
        struct perf_hist wlat;
};

struct perf_worker {
        unsigned id;
        const struct perf_opts *o;
        const struct perf_geom *g;
        void *tctx; /* transport context shared by all workers (e.g. NVMe controller) */
        uint64_t rng;
        uint64_t seq_next;                 /* next LBA for sequential access */
        uint64_t region_lo, region_blocks; /* LBA range this worker uses */
        uint32_t io_blocks;
        uint32_t bs;  /* bytes per I/O of this worker (o->bs, or o->hot_bs for hot queues) */
        bool cold;    /* lifetimes: the cold-data queue */
        uint16_t tag; /* lifetimes with --place: stream id / group number / DSPEC; 0 = none */
        struct perf_stats st;
        uint64_t last_work_ns; /* --poll adaptive: when the last completion or send was seen */
        int rc;                /* worker's exit status, 0 or -errno */
        char err[256];
};

/*
 * --poll (poll.c).  perf_poll_spin(w, worked, now): a worker's socket had
 * nothing to do.  WORKED: a completion or a send happened since the last
 * call.  True: look again without sleeping (counted as a spin); false:
 * sleep in poll() (counted as a sleep).  perf_poll_parse: "always" (or
 * NULL, plain --poll), "adaptive[:US]", "off"; 0 or -EINVAL.
 */
bool perf_poll_spin(struct perf_worker *w, bool worked, uint64_t now_ns);
int perf_poll_parse(const char *s, struct perf_opts *o);
const char *perf_poll_name(enum perf_poll p);

/* Run-wide clock and phases (written by main, read by workers). */
struct perf_run {
        atomic_int ready;  /* workers connected */
        atomic_int failed; /* workers that could not connect */
        atomic_bool go;    /* start submitting */
        atomic_uint_fast64_t start_ns, end_ns;
        atomic_uint_fast64_t hot_issued, cold_issued; /* lifetimes: bytes submitted per class */
        atomic_uint_fast64_t written;                 /* bytes written (--bytes) */
        atomic_uint_fast64_t verified, unwritten;     /* --verify: blocks checked, never written */
};
extern struct perf_run perf_run;

static inline uint64_t perf_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct perf_io {
        uint64_t lba;
        bool write;
};

/* Pick the next I/O of the workload for worker w. */
void perf_next_io(struct perf_worker *w, struct perf_io *io);
/*
 * Account one completed I/O submitted at start_ns.  Completions after the
 * measurement window are not counted.  Returns true while the worker should
 * keep submitting.
 */
bool perf_io_done(struct perf_worker *w, bool write, uint64_t start_ns, uint64_t now_ns, bool ok);
/* True while the measurement window is open (now before end). */
static inline bool perf_running(uint64_t now_ns)
{
        return now_ns < atomic_load_explicit(&perf_run.end_ns, memory_order_relaxed);
}
/* Called by a worker once connected; then blocks until the run starts. 0 or -errno. */
int perf_worker_ready(struct perf_worker *w);
void perf_worker_fail(struct perf_worker *w, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Fill an I/O buffer with a recognisable pattern. */
void perf_fill_pattern(void *buf, uint32_t len, uint64_t seed);
/*
 * --verify: fill len bytes for the blocks from lba with a header (magic,
 * LBA, seq) and data derived from them; check read data the same way.
 * Returns 0, or 1 + the index of the first block that is neither a valid
 * block for its LBA nor all zero (never written).
 */
void perf_verify_fill(void *buf, uint32_t len, uint32_t lba_size, uint64_t lba, uint64_t seq);
uint32_t perf_verify_check(const void *buf, uint32_t len, uint32_t lba_size, uint64_t lba);
/*
 * --pi host mode over nblocks blocks of extended LBAs (lba_size + md_size
 * bytes each) from lba: fill the data (pattern or --verify) and generate
 * each block's PI (reference tag: the LBA's low bits; PERF_PI_APPTAG); on
 * reads check the PI, then (--verify) the data.  perf_pi_check returns 0,
 * PERF_PI_BAD for a PI check failure (counted in w->st.pi_host), or 1 +
 * the index of the first block whose data is wrong.
 */
#define PERF_PI_BAD UINT32_MAX
void perf_pi_fill(struct perf_worker *w, uint8_t *buf, uint32_t nblocks, uint64_t lba,
                  uint64_t seq);
uint32_t perf_pi_check(struct perf_worker *w, const uint8_t *buf, uint32_t nblocks, uint64_t lba);

struct perf_transport {
        const char *name;
        /* Connect once from the main thread, learn the geometry; *tctx for workers. */
        int (*probe)(const struct perf_opts *o, struct perf_geom *g, void **tctx);
        /* Worker thread body: connect queue w->id, run the workload, drain. */
        void (*worker)(struct perf_worker *w);
        /* Tear down what probe() made. */
        void (*close)(void *tctx);
};

extern const struct perf_transport perf_nvme_tcp;
extern const struct perf_transport perf_iscsi;

#endif
