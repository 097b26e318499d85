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
