/*
 * Reactors: each is one thread with one io_uring ring (liburing).  Every
 * SQE carries a struct rt_event in user_data and its callback runs on the
 * reactor thread when the CQE arrives.  Deferred work runs on the next loop
 * iteration, so submit functions never call back inline.  Timers are a
 * sorted list (there are few: keep-alives, login timeouts).  Other threads
 * reach a reactor through rt_msg_send(): a mutex-protected queue plus an
 * eventfd the ring keeps a read outstanding on, so an idle reactor sleeps
 * in io_uring_wait and wakes for a message.
 */
#include "rt/reactor.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rt/bigbuf.h"
#include "rt/log.h"

#define RT_RING_ENTRIES 1024

struct rt_msg {
        void (*fn)(void *arg);
        void *arg;
        struct rt_msg *next;
};

struct rt_reactor {
        unsigned idx;
        pthread_t thread;
        bool running;
        struct io_uring ring;

        int efd;
        uint64_t efd_val;
        struct rt_event efd_ev;

        pthread_mutex_t msg_lock;
        struct rt_msg *msg_head, *msg_tail;
        struct rt_defer *rdefer_head, *rdefer_tail; /* rt_defer_remote(), under msg_lock */

        struct rt_defer *defer_head, *defer_tail;
        struct rt_timer *timers; /* sorted by deadline */
        volatile bool stop;
        bool held_submit;      /* the last turn left its SQEs for this one (reactor_main) */
        uint64_t last_work_ns; /* when a turn last ran a callback (adaptive polling) */
        /* Time spent outside io_uring waits (written by the reactor only; rt_busy_ns). */
        _Atomic uint64_t busy_ns;
        struct rt_stats stats; /* written by the reactor only (rt_stats_cur) */
};

static struct rt_reactor *reactors;
static _Atomic unsigned poll_mode = RT_POLL_OFF;
static _Atomic uint32_t poll_us = RT_POLL_US_DEFAULT;

void rt_poll_set(enum rt_poll_mode mode, uint32_t spin_us)
{
        if (spin_us > RT_POLL_US_MAX)
                spin_us = RT_POLL_US_MAX;
        atomic_store(&poll_us, spin_us);
        atomic_store(&poll_mode, (unsigned)mode);
}

enum rt_poll_mode rt_poll_mode(void)
{
        return (enum rt_poll_mode)atomic_load(&poll_mode);
}

uint32_t rt_poll_us(void)
{
        return atomic_load(&poll_us);
}

static const char *const poll_names[] = {"off", "adaptive", "always"};

const char *rt_poll_mode_name(enum rt_poll_mode m)
{
        return (unsigned)m < 3 ? poll_names[m] : "?";
}

int rt_poll_mode_parse(const char *s, enum rt_poll_mode *m)
{
        for (unsigned i = 0; s && i < 3; i++)
                if (strcmp(s, poll_names[i]) == 0) {
                        *m = (enum rt_poll_mode)i;
                        return 0;
                }
        return -EINVAL;
}
static unsigned nr_reactors;
static __thread struct rt_reactor *cur_reactor;
__thread struct rt_stats *rt_stats_tls;
__thread struct rt_stats rt_stats_scratch;

void rt_stats_read(unsigned idx, struct rt_stats *out)
{
        memset(out, 0, sizeof(*out));
        if (idx >= nr_reactors)
                return;
        /* Word by word, relaxed: the reactor writes them without atomics. */
        _Static_assert(sizeof(*out) % sizeof(uint64_t) == 0, "rt_stats is all uint64_t");
        const uint64_t *src = (const uint64_t *)&reactors[idx].stats;
        uint64_t *dst = (uint64_t *)out;
        for (size_t i = 0; i < sizeof(*out) / sizeof(uint64_t); i++)
                dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

const char *rt_copy_site_name(enum rt_copy_site s)
{
        static const char *const names[RT_COPY_NR] = {[RT_COPY_RX_READAHEAD] = "rx_readahead",
                                                      [RT_COPY_TLS_STAGE] = "tls_stage",
                                                      [RT_COPY_BACKEND_MEM] = "backend_mem",
                                                      [RT_COPY_CORE] = "core",
                                                      [RT_COPY_ISCSI] = "iscsi"};
        return (unsigned)s < RT_COPY_NR ? names[s] : "?";
}

const char *rt_xport_name(enum rt_xport x)
{
        static const char *const names[RT_XPORT_NR] = {
            [RT_XPORT_NVMF_TCP] = "nvme_tcp", [RT_XPORT_ISCSI] = "iscsi"};
        return (unsigned)x < RT_XPORT_NR ? names[x] : "?";
}

static bool ring_defer_taskrun(const struct rt_reactor *r)
{
        return (r->ring.flags & IORING_SETUP_DEFER_TASKRUN) != 0;
}

/*
 * io_uring_submit, counted: a system call only when there is something to
 * submit.  With deferred task running the same call also reaps (GETEVENTS):
 * completions are posted only when this thread asks.
 */
static int ring_submit(struct rt_reactor *r)
{
        unsigned n = io_uring_sq_ready(&r->ring);
        if (n == 0)
                return 0;
        int rc = ring_defer_taskrun(r) ? io_uring_submit_and_get_events(&r->ring)
                                       : io_uring_submit(&r->ring);
        r->stats.enter_submit++;
        if (rc > 0)
                r->stats.sqes += (unsigned)rc;
        return rc;
}

uint64_t rt_now_ns(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

unsigned rt_count(void)
{
        return nr_reactors;
}

struct rt_reactor *rt_get(unsigned idx)
{
        return idx < nr_reactors ? &reactors[idx] : NULL;
}

struct rt_reactor *rt_current(void)
{
        return cur_reactor;
}

unsigned rt_index(const struct rt_reactor *r)
{
        return r->idx;
}

uint64_t rt_busy_ns(unsigned idx)
{
        if (idx >= nr_reactors)
                return 0;
        return atomic_load_explicit(&reactors[idx].busy_ns, memory_order_relaxed);
}

struct io_uring_sqe *rt_sqe(struct rt_reactor *r)
{
        struct io_uring_sqe *sqe;
        while ((sqe = io_uring_get_sqe(&r->ring)) == NULL)
                ring_submit(r);
        return sqe;
}

void rt_defer(struct rt_reactor *r, struct rt_defer *d)
{
        d->next = NULL;
        if (r->defer_tail)
                r->defer_tail->next = d;
        else
                r->defer_head = d;
        r->defer_tail = d;
}

void rt_timer_arm(struct rt_reactor *r, struct rt_timer *t, uint64_t delay_ms)
{
        rt_timer_arm_us(r, t, delay_ms * 1000ull);
}

void rt_timer_arm_us(struct rt_reactor *r, struct rt_timer *t, uint64_t delay_us)
{
        if (t->armed)
                rt_timer_cancel(r, t);
        t->deadline_ns = rt_now_ns() + delay_us * 1000ull;
        t->armed = true;
        struct rt_timer **pp = &r->timers, *prev = NULL;
        while (*pp && (*pp)->deadline_ns <= t->deadline_ns) {
                prev = *pp;
                pp = &(*pp)->next;
        }
        t->next = *pp;
        t->prev = prev;
        if (*pp)
                (*pp)->prev = t;
        *pp = t;
}

void rt_timer_cancel(struct rt_reactor *r, struct rt_timer *t)
{
        if (!t->armed)
                return;
        if (t->prev)
                t->prev->next = t->next;
        else
                r->timers = t->next;
        if (t->next)
                t->next->prev = t->prev;
        t->prev = t->next = NULL;
        t->armed = false;
}

static void arm_eventfd(struct rt_reactor *r)
{
        struct io_uring_sqe *sqe = rt_sqe(r);
        io_uring_prep_read(sqe, r->efd, &r->efd_val, sizeof(r->efd_val), 0);
        io_uring_sqe_set_data(sqe, &r->efd_ev);
}

static void drain_msgs(struct rt_reactor *r)
{
        pthread_mutex_lock(&r->msg_lock);
        struct rt_msg *m = r->msg_head;
        r->msg_head = r->msg_tail = NULL;
        struct rt_defer *d = r->rdefer_head;
        r->rdefer_head = r->rdefer_tail = NULL;
        pthread_mutex_unlock(&r->msg_lock);
        while (d) {
                struct rt_defer *next = d->next;
                rt_defer(r, d);
                d = next;
        }
        while (m) {
                struct rt_msg *next = m->next;
                m->fn(m->arg);
                free(m);
                m = next;
        }
}

static void efd_done(struct rt_event *ev, int res)
{
        struct rt_reactor *r =
            (struct rt_reactor *)((char *)ev - offsetof(struct rt_reactor, efd_ev));
        (void)res;
        r->stats.msg_wakeups++;
        drain_msgs(r);
        if (!r->stop)
                arm_eventfd(r);
}

/* Wake r's loop from another thread (its eventfd read completes). */
static void wake(struct rt_reactor *r)
{
        uint64_t one = 1;
        ssize_t n = write(r->efd, &one, sizeof(one));
        (void)n;
}

int rt_msg_send(struct rt_reactor *r, void (*fn)(void *arg), void *arg)
{
        /* Control-path only: the data path never crosses reactors. */
        struct rt_msg *m = malloc(sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->fn = fn;
        m->arg = arg;
        m->next = NULL;
        pthread_mutex_lock(&r->msg_lock);
        if (r->msg_tail)
                r->msg_tail->next = m;
        else
                r->msg_head = m;
        r->msg_tail = m;
        pthread_mutex_unlock(&r->msg_lock);
        wake(r);
        return 0;
}

void rt_defer_remote(struct rt_reactor *r, struct rt_defer *d)
{
        d->next = NULL;
        pthread_mutex_lock(&r->msg_lock);
        if (r->rdefer_tail)
                r->rdefer_tail->next = d;
        else
                r->rdefer_head = d;
        r->rdefer_tail = d;
        pthread_mutex_unlock(&r->msg_lock);
        wake(r);
}

struct msg_call {
        void (*fn)(void *);
        void *arg;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool done;
};

static void msg_call_run(void *arg)
{
        struct msg_call *c = arg;
        c->fn(c->arg);
        pthread_mutex_lock(&c->lock);
        c->done = true;
        pthread_cond_signal(&c->cond);
        pthread_mutex_unlock(&c->lock);
}

int rt_msg_call(struct rt_reactor *r, void (*fn)(void *arg), void *arg)
{
        if (cur_reactor == r || !r->running) {
                fn(arg);
                return 0;
        }
        struct msg_call c = {.fn = fn, .arg = arg, .done = false};
        pthread_mutex_init(&c.lock, NULL);
        pthread_cond_init(&c.cond, NULL);
        int rc = rt_msg_send(r, msg_call_run, &c);
        if (rc == 0) {
                pthread_mutex_lock(&c.lock);
                while (!c.done)
                        pthread_cond_wait(&c.cond, &c.lock);
                pthread_mutex_unlock(&c.lock);
        }
        pthread_cond_destroy(&c.cond);
        pthread_mutex_destroy(&c.lock);
        return rc;
}

static bool run_defers(struct rt_reactor *r)
{
        /* Only what is queued now: work deferred by these callbacks waits a turn. */
        struct rt_defer *d = r->defer_head;
        bool ran = d != NULL;
        r->defer_head = r->defer_tail = NULL;
        while (d) {
                struct rt_defer *next = d->next;
                d->fn(d);
                d = next;
        }
        return ran;
}

static void run_timers(struct rt_reactor *r)
{
        uint64_t now = rt_now_ns();
        while (r->timers && r->timers->deadline_ns <= now) {
                struct rt_timer *t = r->timers;
                rt_timer_cancel(r, t);
                t->fn(t);
        }
}

static void *reactor_main(void *arg)
{
        struct rt_reactor *r = arg;
        cur_reactor = r;
        rt_stats_tls = &r->stats;
        if (r->ring.flags & IORING_SETUP_R_DISABLED) {
                /* Single issuer: this thread is the one (made disabled by rt_init). */
                /* (Raw: Debian's liburing 2.3 declares io_uring_enable_rings but lacks it.) */
                if (syscall(__NR_io_uring_register, r->ring.ring_fd, IORING_REGISTER_ENABLE_RINGS,
                            NULL, 0) < 0)
                        LOG_ERR("rt", "reactor %u: enabling its io_uring: %s", r->idx,
                                strerror(errno));
        }
        arm_eventfd(r);
        uint64_t t_active = rt_now_ns();
        bool reaped = false; /* the last turn ran completions */
        while (!r->stop) {
                r->stats.loops++;
                bool worked = run_defers(r) || reaped;
                run_timers(r);

                struct io_uring_cqe *cqe = NULL;
                struct __kernel_timespec ts, *tsp = NULL;
                unsigned wait_nr = 1;
                if (r->defer_head) {
                        wait_nr = 0;
                } else if (r->timers) {
                        uint64_t now = rt_now_ns();
                        uint64_t dl = r->timers->deadline_ns;
                        uint64_t d = dl > now ? dl - now : 0;
                        ts.tv_sec = (long long)(d / 1000000000ull);
                        ts.tv_nsec = (long long)(d % 1000000000ull);
                        tsp = &ts;
                }
                /* Busy time: everything but the wait (one single-writer add per turn). */
                uint64_t t_now = rt_now_ns();
                atomic_store_explicit(&r->busy_ns,
                                      atomic_load_explicit(&r->busy_ns, memory_order_relaxed) +
                                          (t_now - t_active),
                                      memory_order_relaxed);
                t_active = t_now;
                if (worked)
                        r->last_work_ns = t_now;
                enum rt_poll_mode pm =
                    (enum rt_poll_mode)atomic_load_explicit(&poll_mode, memory_order_relaxed);
                bool spin =
                    pm == RT_POLL_ALWAYS ||
                    (pm == RT_POLL_ADAPTIVE &&
                     t_now - r->last_work_ns <
                         (uint64_t)atomic_load_explicit(&poll_us, memory_order_relaxed) * 1000ull);
                if (wait_nr == 0 || io_uring_cq_ready(&r->ring) > 0) {
                        /*
                         * Work is ready: no wait.  New SQEs (typically a socket's
                         * poll re-armed after a command) wait one turn to go in
                         * with the next turn's wait, which saves an io_uring_enter
                         * per command at low queue depth; a reactor that stays busy
                         * still submits every other turn.
                         */
                        bool have_sqes = io_uring_sq_ready(&r->ring) > 0;
                        /* Deferred task running: completions need an enter to be posted. */
                        bool reap = ring_defer_taskrun(r) && io_uring_cq_ready(&r->ring) == 0;
                        if (!r->held_submit && (have_sqes || reap)) {
                                r->held_submit = true;
                        } else if (have_sqes) {
                                ring_submit(r);
                                r->held_submit = false;
                        } else if (reap) {
                                io_uring_get_events(&r->ring);
                                r->stats.enter_submit++;
                                r->held_submit = false;
                        }
                } else if (spin) {
                        /* Polling: submit and reap without sleeping (one enter, no wait). */
                        r->held_submit = false;
                        unsigned nsub = io_uring_sq_ready(&r->ring);
                        io_uring_submit_and_get_events(&r->ring);
                        r->stats.polls++;
                        r->stats.sqes += nsub - io_uring_sq_ready(&r->ring);
                        if (io_uring_cq_ready(&r->ring) > 0)
                                r->stats.poll_hits++;
                } else {
                        r->held_submit = false;
                        unsigned nsub = io_uring_sq_ready(&r->ring);
                        int rc =
                            io_uring_submit_and_wait_timeout(&r->ring, &cqe, wait_nr, tsp, NULL);
                        if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY)
                                LOG_ERR("rt", "reactor %u: io_uring wait: %s", r->idx,
                                        strerror(-rc));
                        r->stats.enter_wait++;
                        r->stats.sqes += nsub - io_uring_sq_ready(&r->ring);
                        if (io_uring_cq_ready(&r->ring) > 0)
                                r->stats.wakeups++;
                        t_active = rt_now_ns();
                }
                unsigned head;
                reaped = io_uring_cq_ready(&r->ring) > 0;
                io_uring_for_each_cqe(&r->ring, head, cqe)
                {
                        struct rt_event *ev = io_uring_cqe_get_data(cqe);
                        int res = cqe->res;
                        /* Consume before the callback, which may queue new SQEs. */
                        io_uring_cq_advance(&r->ring, 1);
                        r->stats.cqes++;
                        if (ev)
                                ev->fn(ev, res);
                }
        }
        /* Leftover messages (e.g. teardown requests) still run once. */
        drain_msgs(r);
        run_defers(r);
        cur_reactor = NULL;
        rt_stats_tls = NULL;
        return NULL;
}

int rt_init(unsigned n)
{
        if (n == 0)
                n = 1;
        reactors = calloc(n, sizeof(*reactors));
        if (!reactors)
                return -ENOMEM;
        for (unsigned i = 0; i < n; i++) {
                struct rt_reactor *r = &reactors[i];
                r->idx = i;
                pthread_mutex_init(&r->msg_lock, NULL);
                r->efd = eventfd(0, EFD_CLOEXEC);
                if (r->efd < 0)
                        return -errno;
                r->efd_ev.fn = efd_done;
                struct io_uring_params p;
                memset(&p, 0, sizeof(p));
                /*
                 * Single issuer (kernel 6.0) and deferred task running (6.1):
                 * only the reactor thread submits, and completions are posted
                 * when it asks rather than by interrupting it.  The ring starts
                 * disabled and the reactor thread enables it, becoming its
                 * issuer.  Older kernels refuse the flags (EINVAL): then
                 * cooperative task running (5.19), then none.
                 */
                p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN |
                          IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
                          IORING_SETUP_R_DISABLED;
                if (getenv("SLATE_URING_BASIC")) /* for comparison (bench/budget) */
                        p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
                int rc = io_uring_queue_init_params(RT_RING_ENTRIES, &r->ring, &p);
                if (rc == -EINVAL) {
                        memset(&p, 0, sizeof(p));
                        p.flags = IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
                        rc = io_uring_queue_init_params(RT_RING_ENTRIES, &r->ring, &p);
                }
                if (rc == -EINVAL) {
                        memset(&p, 0, sizeof(p));
                        rc = io_uring_queue_init_params(RT_RING_ENTRIES, &r->ring, &p);
                }
                if (rc < 0) {
                        LOG_ERR("rt", "io_uring_queue_init: %s", strerror(-rc));
                        return rc;
                }
                if (i == 0)
                        LOG_INFO("rt", "io_uring rings: %s",
                                 (r->ring.flags & IORING_SETUP_DEFER_TASKRUN)
                                     ? "single issuer, deferred task running"
                                 : (r->ring.flags & IORING_SETUP_COOP_TASKRUN)
                                     ? "cooperative task running"
                                     : "basic (the kernel refused the newer setup flags)");
                nr_reactors = i + 1;
        }
        return 0;
}

int rt_start(void)
{
        for (unsigned i = 0; i < nr_reactors; i++) {
                struct rt_reactor *r = &reactors[i];
                int rc = pthread_create(&r->thread, NULL, reactor_main, r);
                if (rc)
                        return -rc;
                char name[32];
                snprintf(name, sizeof(name), "reactor_%u", i);
                name[15] = 0; /* kernel thread names are 15 chars */
                pthread_setname_np(r->thread, name);
                r->running = true;
        }
        return 0;
}

static void stop_fn(void *arg)
{
        struct rt_reactor *r = arg;
        r->stop = true;
}

void rt_stop(void)
{
        for (unsigned i = 0; i < nr_reactors; i++)
                if (reactors[i].running)
                        rt_msg_send(&reactors[i], stop_fn, &reactors[i]);
}

void rt_join(void)
{
        for (unsigned i = 0; i < nr_reactors; i++) {
                if (reactors[i].running) {
                        pthread_join(reactors[i].thread, NULL);
                        reactors[i].running = false;
                }
        }
}

void rt_fini(void)
{
        for (unsigned i = 0; i < nr_reactors; i++) {
                io_uring_queue_exit(&reactors[i].ring);
                close(reactors[i].efd);
                pthread_mutex_destroy(&reactors[i].msg_lock);
        }
        free(reactors);
        reactors = NULL;
        nr_reactors = 0;
        rt_bigbuf_fini();
}
