/*
 * The self-test engine (SPC-5 5.16 self-test operations, SEND DIAGNOSTIC;
 * NVMe Base 2.0 8.11 device self-test): one implementation that SCSI SEND
 * DIAGNOSTIC and NVMe Device Self-test both start.  A self-test really
 * reads the medium through the core (core_req_submit, like any host
 * read): the short test a sample of it, the extended test all of it.  It
 * runs in the background on one reactor, one chunk at a time (never
 * blocking the reactor, never allocating per read), optionally paced, and
 * stops at the first block that cannot be read, which it reports.
 *
 * Segments (both standards leave them to the device): a self-test has one
 * segment, "read the medium", numbered 1.
 *
 * Each namespace keeps the results of its last CORE_SELFTEST_LOG_MAX
 * self-tests (SCSI Self-Test Results log page 10h is per logical unit);
 * the NVMe personality keeps its own log per operation (an NVMe operation
 * may span namespaces) with the same entry type.  Not persisted: a restart
 * of slated clears them (our choice; both standards allow a log that
 * starts empty).
 */
#ifndef CORE_SELFTEST_H
#define CORE_SELFTEST_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "rt/reactor.h"

struct core_ns;

enum core_selftest_kind {
        CORE_ST_SHORT = 1,    /* a sample of the medium (CORE_SELFTEST_SHORT_PIECES pieces) */
        CORE_ST_EXTENDED = 2, /* every block */
};

/* The short test reads this many pieces of CORE_SELFTEST_PIECE_BYTES, spread evenly. */
#define CORE_SELFTEST_SHORT_PIECES 64u
#define CORE_SELFTEST_PIECE_BYTES  (1u << 20)

enum core_selftest_result {
        CORE_STR_OK = 0,
        CORE_STR_ABORTED_CMD,      /* aborted by a command (SEND DIAGNOSTIC / Device Self-test) */
        CORE_STR_ABORTED_RESET,    /* aborted by a reset (NVMe controller level reset) */
        CORE_STR_ABORTED_REMOVED,  /* the namespace went away (deleted, shut down) */
        CORE_STR_ABORTED_SANITIZE, /* a sanitize started */
        CORE_STR_ABORTED_OTHER,    /* the namespace was stopped, ejected, shrunk ... */
        CORE_STR_FAILED,           /* a read failed: fail_lba, status */
        CORE_STR_ERROR,            /* the engine could not run (no memory) */
        CORE_STR_RUNNING,          /* only in a log entry of an operation in progress */
};
const char *core_selftest_result_name(enum core_selftest_result r);

/* What one self-test of one namespace found. */
struct core_selftest_outcome {
        enum core_selftest_result result;
        uint64_t fail_lba;       /* CORE_STR_FAILED: the first block that could not be read */
        enum core_status status; /* CORE_STR_FAILED: how that read failed */
        uint8_t segment;         /* CORE_STR_FAILED: the failed segment (1) */
};

/* One entry of a self-test results log. */
struct core_selftest_entry {
        uint64_t seq; /* order of the entries (newest highest) */
        enum core_selftest_kind kind;
        bool background; /* SCSI: background (001b/010b) or foreground (101b/110b) */
        uint64_t poh;    /* power-on hours when it ended (hours slated has run) */
        uint32_t nsid;   /* NVMe: the namespace that failed (0: none), for the log */
        struct core_selftest_outcome o;
};

#define CORE_SELFTEST_LOG_MAX 20 /* SCSI log page 10h and NVMe log 06h both keep 20 */

struct core_selftest_log {
        pthread_mutex_t lock;
        uint64_t next_seq;
        unsigned n;                                          /* entries kept */
        struct core_selftest_entry e[CORE_SELFTEST_LOG_MAX]; /* ring, oldest dropped */
        unsigned head;                                       /* where the next one goes */
};
void core_selftest_log_init(struct core_selftest_log *l);
void core_selftest_log_fini(struct core_selftest_log *l);
/* Append (seq is set here), dropping the oldest when full. */
void core_selftest_log_add(struct core_selftest_log *l, const struct core_selftest_entry *e);
/* Copy the entries newest first into out (CORE_SELFTEST_LOG_MAX); returns how many. */
unsigned core_selftest_log_read(struct core_selftest_log *l, struct core_selftest_entry *out);

/* Hours since slated started, for the log entries (our power-on hours). */
uint64_t core_power_on_hours(void);

/*
 * Start a self-test of ns on reactor r.  0, or -EBUSY (one runs on this
 * namespace), -EINVAL (kind), -ENOMEM.  done(arg, outcome) is called on r
 * exactly once when it ends, never from inside the call; done may be NULL.
 * With log, the outcome is also recorded in the namespace's log (kind,
 * background) before done runs.
 */
int core_selftest_start(struct core_ns *ns, enum core_selftest_kind kind, bool background, bool log,
                        struct rt_reactor *r,
                        void (*done)(void *arg, const struct core_selftest_outcome *o), void *arg);
/*
 * Ask the self-test running on ns to stop (why: one of the ABORTED
 * results); it ends at its next step with that result.  0, or -ENOENT
 * when none runs.  Any thread.
 */
int core_selftest_abort(struct core_ns *ns, enum core_selftest_result why);
/*
 * Whether a self-test runs on ns, and then its kind, whether background,
 * and progress (0..100).  Any thread.
 */
bool core_selftest_running(struct core_ns *ns, enum core_selftest_kind *kind, bool *background,
                           unsigned *percent);
/* The namespace's log, newest first (CORE_SELFTEST_LOG_MAX entries); returns how many. */
unsigned core_selftest_results(struct core_ns *ns, struct core_selftest_entry *out);

/*
 * Informational exceptions (SPC-5 Informational Exceptions log page 2Fh):
 * the most recent exception condition of a namespace, protocol-neutral;
 * SCSI maps it to its ASC/ASCQ.  Recorded by the self-test engine (a
 * failed self-test) and by the media model (a failed element).
 */
enum core_exception {
        CORE_EXC_NONE = 0,
        CORE_EXC_SELFTEST_FAILED, /* a self-test found a block it could not read */
        CORE_EXC_MEDIA_FAILURE,   /* the medium lost part of itself (a failed element) */
};
void core_ns_note_exception(struct core_ns *ns, enum core_exception e);
enum core_exception core_ns_last_exception(const struct core_ns *ns);

#endif
