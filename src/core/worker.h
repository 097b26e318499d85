/*
 * Core worker threads (core/worker.c): where the core runs work that
 * blocks — a copy_file_range chunk, a reservation store that waits on
 * shared storage — off the reactors, which never block.
 *
 * A pool is a few detached threads, started the first time it is used and
 * never stopped, with one FIFO of jobs.  A job is embedded in its owner (no
 * allocation per job): run() executes on a worker thread, then done() on
 * the job's reactor, exactly once.  Pools are separate so that a long job
 * of one kind (a 32 MiB copy chunk) does not hold up another (a PR OUT).
 */
#ifndef CORE_WORKER_H
#define CORE_WORKER_H

#include <pthread.h>
#include <stdbool.h>

#include "rt/reactor.h"

struct core_work {
        void (*run)(struct core_work *w);  /* on a worker thread */
        void (*done)(struct core_work *w); /* then on reactor's thread */
        struct rt_reactor *reactor;
        /* private */
        struct rt_defer defer_;
        struct core_work *next_;
};

struct core_workers {
        const char *name; /* thread name (at most 15 characters) */
        unsigned want;    /* threads to start */
        /* private */
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct core_work *head, *tail;
        unsigned n; /* threads running */
        bool started;
};

#define CORE_WORKERS_INIT(name_, want_)                                                            \
        {                                                                                          \
                .name = (name_), .want = (want_), .lock = PTHREAD_MUTEX_INITIALIZER,               \
                .cond = PTHREAD_COND_INITIALIZER                                                   \
        }

/*
 * The pool for a command's blocking queries of the storage (GET LBA STATUS
 * on rbd: a cluster round trip per object), two threads.
 */
extern struct core_workers core_query_workers;

/* Start p's threads if not yet done; whether at least one runs. */
bool core_workers_ready(struct core_workers *p);

/*
 * Queue w on p (its threads start on first use).  false when p has no
 * thread (none could be created): w is untouched and the caller runs the
 * work itself.
 */
bool core_work_submit(struct core_workers *p, struct core_work *w);

/*
 * Run w on the calling thread (a reactor) instead: run() now, done() from
 * a deferred call on w->reactor, so done() still never runs inside the
 * caller's submit.
 */
void core_work_inline(struct core_work *w);

#endif
