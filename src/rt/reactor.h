/*
 * Reactors: one thread, one io_uring ring.  A reactor owns its connections
 * and the backend I/O they cause; nothing on the data path takes a lock.
 *
 * Completion contract: every SQE a module submits carries a pointer to a
 * struct rt_event in user_data; when its CQE arrives the reactor calls
 * ev->fn(ev, cqe->res) on the reactor thread.
 *
 * Cross-reactor work goes through rt_msg_send(), which is the only function
 * here that may be called from another thread.
 */
#ifndef RT_REACTOR_H
#define RT_REACTOR_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>

struct rt_reactor;

struct rt_event {
        void (*fn)(struct rt_event *ev, int res);
};

/* Work run on a later loop iteration of the same reactor (never inline). */
struct rt_defer {
        void (*fn)(struct rt_defer *d);
        struct rt_defer *next;
};

/* A one-shot timer; re-arm from the callback for a periodic one. */
struct rt_timer {
        void (*fn)(struct rt_timer *t);
        uint64_t deadline_ns;
        bool armed;
        struct rt_timer *prev, *next;
};

int rt_init(unsigned nr_reactors);
void rt_fini(void);
unsigned rt_count(void);
struct rt_reactor *rt_get(unsigned idx);
/* The reactor whose thread is running, or NULL outside reactor threads. */
struct rt_reactor *rt_current(void);
unsigned rt_index(const struct rt_reactor *r);
/*
 * Nanoseconds reactor idx has spent working (not waiting in io_uring)
 * since it started; any thread may read it.  Each reactor adds to its own
 * counter once per loop turn, without a lock.
 */
uint64_t rt_busy_ns(unsigned idx);

/*
 * Per-reactor counters of where the time of an I/O goes, counted rather than
 * timed (bench/README.md "The per-I/O budget"): io_uring_enter calls, sleeps
 * and wake-ups, SQEs and CQEs, socket calls and bytes, bytes memcpy'd on the
 * data path per copy site, commands completed per transport.  Plain uint64s
 * written only by the reactor's own thread through rt_stats_cur() (no atomics
 * on the hot path); rt_stats_read() copies them from any thread (a counter
 * read while it moves may be one behind).  Code running outside a reactor
 * (workers, unit tests) counts into a per-thread scratch copy nobody reads.
 */
enum rt_copy_site {
        RT_COPY_RX_READAHEAD, /* socket read-ahead to a PDU header or small data (rt/rxbuf.h) */
        RT_COPY_TLS_STAGE,    /* small PDUs gathered into one TLS record (nvmf/tcp.c) */
        RT_COPY_BACKEND_MEM,  /* the RAM backend's reads and writes (backend/mem.c) */
        RT_COPY_CORE,         /* the core's bounce/gather copies (core/req.c) */
        RT_COPY_ISCSI,        /* iSCSI data moved between buffers (iscsi/conn.c) */
        RT_COPY_NR
};
enum rt_xport { RT_XPORT_NVMF_TCP, RT_XPORT_ISCSI, RT_XPORT_NR };

struct rt_stats {
        uint64_t loops;        /* event loop turns */
        uint64_t enter_submit; /* io_uring_enter calls that did not wait (submit, or reap only) */
        uint64_t enter_wait;   /* io_uring_enter calls that waited (nothing was ready: a sleep) */
        uint64_t wakeups;      /* waits ended by a completion (the rest: a timer or a signal) */
        uint64_t msg_wakeups;  /* wake-ups by the eventfd (messages, remote defers) */
        uint64_t polls;        /* non-blocking reaps instead of a sleep (rt_poll_set) */
        uint64_t poll_hits;    /* those that found a completion */
        uint64_t sqes;         /* SQEs submitted */
        uint64_t cqes;         /* CQEs reaped */
        uint64_t recv_calls, recv_bytes, recv_eagain;
        uint64_t send_calls, send_bytes, send_eagain;
        /* Zero-copy sends (rt/sock.h): sendmsg calls with MSG_ZEROCOPY and their bytes, error
         * queue reads, the sends the kernel notified (of which it had copied after all), and
         * zero-copy calls refused for lack of option memory (sent copied instead). */
        uint64_t zc_sends, zc_bytes, zc_reaps, zc_notifs, zc_copied, zc_nobufs;
        uint64_t copy_bytes[RT_COPY_NR];
        uint64_t cmds[RT_XPORT_NR]; /* commands completed (their response queued) */
};

extern __thread struct rt_stats *rt_stats_tls;
extern __thread struct rt_stats rt_stats_scratch;
static inline struct rt_stats *rt_stats_cur(void)
{
        struct rt_stats *s = rt_stats_tls;
        return s ? s : &rt_stats_scratch;
}
static inline void rt_count_copy(enum rt_copy_site site, uint64_t bytes)
{
        rt_stats_cur()->copy_bytes[site] += bytes;
}
/* A copy of reactor idx's counters (zeros for a bad index); any thread. */
void rt_stats_read(unsigned idx, struct rt_stats *out);
/* The counters' names, for metrics and RPC: copy sites and transports. */
const char *rt_copy_site_name(enum rt_copy_site s);
const char *rt_xport_name(enum rt_xport x);

/*
 * Polling (options reactor_poll, reactor_poll_us; live): off sleeps in
 * io_uring whenever nothing is ready (the default); adaptive, after a turn
 * that did work, keeps reaping without sleeping (a non-blocking
 * io_uring_enter per spin) for spin_us before it sleeps, so a command that
 * follows within that time costs no wake-up; always never sleeps (a core at
 * 100%, SPDK's way).  Any thread; reactors read it every turn.
 */
enum rt_poll_mode { RT_POLL_OFF, RT_POLL_ADAPTIVE, RT_POLL_ALWAYS };
#define RT_POLL_US_DEFAULT 50
#define RT_POLL_US_MAX     100000
void rt_poll_set(enum rt_poll_mode mode, uint32_t spin_us);
enum rt_poll_mode rt_poll_mode(void);
uint32_t rt_poll_us(void);
const char *rt_poll_mode_name(enum rt_poll_mode m);
/* "off", "adaptive", "always" -> 0 and *m; -EINVAL otherwise. */
int rt_poll_mode_parse(const char *s, enum rt_poll_mode *m);

/* Start every reactor thread; rt_stop() asks them all to leave their loops. */
int rt_start(void);
void rt_stop(void);
void rt_join(void);

/*
 * An SQE on this reactor's ring (reactor thread only).  Never NULL: when
 * the ring is full it is flushed first.  Caller sets user_data with
 * io_uring_sqe_set_data(sqe, ev).
 */
struct io_uring_sqe *rt_sqe(struct rt_reactor *r);

void rt_defer(struct rt_reactor *r, struct rt_defer *d);
/*
 * rt_defer() from any thread (a worker finishing a blocking call): d->fn
 * runs on r's thread on a later loop iteration, waking r if it sleeps.
 * Allocates nothing (d is the caller's until fn runs), so the data path
 * may use it where rt_msg_send() would malloc.
 */
void rt_defer_remote(struct rt_reactor *r, struct rt_defer *d);

uint64_t rt_now_ns(void);
void rt_timer_arm(struct rt_reactor *r, struct rt_timer *t, uint64_t delay_ms);
/* The same with microseconds (fault injection's added latency, core/fault.h). */
void rt_timer_arm_us(struct rt_reactor *r, struct rt_timer *t, uint64_t delay_us);
void rt_timer_cancel(struct rt_reactor *r, struct rt_timer *t);

/*
 * Run fn(arg) on reactor r.  Callable from any thread, including
 * non-reactor threads.  Returns 0 or -ENOMEM.
 */
int rt_msg_send(struct rt_reactor *r, void (*fn)(void *arg), void *arg);

/*
 * Run fn(arg) on reactor r and wait for it to finish (control path only;
 * never from a reactor thread onto itself... which is handled by calling
 * fn inline).
 */
int rt_msg_call(struct rt_reactor *r, void (*fn)(void *arg), void *arg);

#endif
