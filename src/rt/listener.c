/*
 * Listening sockets shared by the TCP transports (see rt/listener.h): bind
 * and listen, one io_uring accept in flight on reactor 0, each accepted
 * socket sent to the next reactor by message, and a close that runs on
 * reactor 0.
 *
 * Closing anywhere else is a use-after-free: shutdown() from another
 * thread wakes the pending accept, whose completion on reactor 0 frees (or
 * re-arms) the listener while the closing thread still reads it (seen as
 * an ASan report at slated exit, commit f7474d6).  So close is a message
 * to reactor 0, which marks the listener closing and cancels the accept;
 * the completion, which always comes, frees it.
 *
 * A failing accept (out of descriptors or memory) is retried after a pause
 * and logged once per streak, so it neither spins nor floods the log.
 */
#include "rt/listener.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rt/log.h"
#include "rt/reactor.h"
#include "rt/sock.h"

#define LIS_BACKLOG  128
#define LIS_RETRY_MS 100

struct rt_listener {
        int fd;
        uint16_t port;
        char name[RT_ADDR_NAME_MAX]; /* bound address, for log lines */
        char mod[16];
        rt_accept_fn fn;
        bool armed;   /* an accept is in flight */
        bool closing; /* closed: the accept's completion frees */
        int last_err; /* accept error already logged (0: none) */
        struct rt_event ev;
        struct rt_timer retry;
};

/* Shared by every listener: connections spread over reactors, whatever the port. */
static atomic_uint next_reactor;

#define LIS_OF(p, m) ((struct rt_listener *)((char *)(p)-offsetof(struct rt_listener, m)))

static void lis_free(struct rt_listener *l)
{
        close(l->fd);
        free(l);
}

static void lis_arm(struct rt_listener *l)
{
        struct io_uring_sqe *sqe = rt_sqe(rt_get(0));
        io_uring_prep_accept(sqe, l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        io_uring_sqe_set_data(sqe, &l->ev);
        l->armed = true;
}

struct handoff {
        rt_accept_fn fn;
        int fd;
};

static void handoff_run(void *arg)
{
        struct handoff h = *(struct handoff *)arg;
        free(arg);
        h.fn(h.fd);
}

static void lis_handoff(struct rt_listener *l, int fd)
{
        struct rt_reactor *r = rt_get(atomic_fetch_add(&next_reactor, 1) % rt_count());
        struct handoff *h = malloc(sizeof(*h));
        if (h) {
                h->fn = l->fn;
                h->fd = fd;
                if (rt_msg_send(r, handoff_run, h) == 0)
                        return;
                free(h);
        }
        LOG_WARN(l->mod, "no memory to hand off a connection on %s; closed", l->name);
        close(fd);
}

static void lis_accepted(struct rt_event *ev, int res)
{
        struct rt_listener *l = LIS_OF(ev, ev);
        l->armed = false;
        if (l->closing) {
                if (res >= 0)
                        close(res);
                lis_free(l);
                return;
        }
        if (res >= 0) {
                l->last_err = 0;
                lis_handoff(l, res);
                lis_arm(l);
                return;
        }
        if (res == -ECONNABORTED || res == -EINTR) {
                lis_arm(l); /* the peer left before we took it: nothing wrong here */
                return;
        }
        if (res != l->last_err)
                LOG_WARN(l->mod, "accept on %s: %s (retrying every %d ms)", l->name, strerror(-res),
                         LIS_RETRY_MS);
        l->last_err = res;
        rt_timer_arm(rt_get(0), &l->retry, LIS_RETRY_MS);
}

static void lis_retry(struct rt_timer *t)
{
        lis_arm(LIS_OF(t, retry));
}

static void lis_start_msg(void *arg)
{
        lis_arm(arg);
}

static void lis_close_msg(void *arg)
{
        struct rt_listener *l = arg;
        struct rt_reactor *r0 = rt_get(0);
        if (rt_current() != r0) {
                /* rt_msg_call ran us inline: reactor 0 has stopped and nothing completes any more.
                 */
                lis_free(l);
                return;
        }
        l->closing = true;
        if (l->retry.armed)
                rt_timer_cancel(r0, &l->retry);
        if (!l->armed) {
                lis_free(l);
                return;
        }
        /* The accept completes with -ECANCELED (or fails after shutdown); lis_accepted frees l. */
        struct io_uring_sqe *sqe = rt_sqe(r0);
        io_uring_prep_cancel(sqe, &l->ev, 0);
        io_uring_sqe_set_data(sqe, NULL);
        shutdown(l->fd, SHUT_RDWR);
}

int rt_listener_open(const char *addr, uint16_t port, const char *mod, rt_accept_fn fn,
                     struct rt_listener **out, char *err, size_t errlen)
{
        struct sockaddr_storage ss;
        socklen_t sl;
        if (rt_sockaddr_parse(addr, port, &ss, &sl) < 0) {
                snprintf(err, errlen, "invalid address '%s' (numeric IPv4 or IPv6)",
                         addr ? addr : "");
                return -EINVAL;
        }
        struct rt_reactor *r0 = rt_get(0);
        if (!r0) {
                snprintf(err, errlen, "reactors not running");
                return -ENODEV;
        }
        struct rt_listener *l = calloc(1, sizeof(*l));
        if (!l) {
                snprintf(err, errlen, "out of memory");
                return -ENOMEM;
        }
        l->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (l->fd < 0) {
                int e = errno;
                free(l);
                snprintf(err, errlen, "socket: %s", strerror(e));
                return -e;
        }
        int one = 1;
        setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(l->fd, (struct sockaddr *)&ss, sl) < 0 || listen(l->fd, LIS_BACKLOG) < 0) {
                int e = errno;
                lis_free(l);
                snprintf(err, errlen, "cannot listen on %s:%u: %s", addr, port, strerror(e));
                return -e;
        }
        /* The port actually bound: the kernel's pick when port is 0. */
        sl = sizeof(ss);
        if (getsockname(l->fd, (struct sockaddr *)&ss, &sl) < 0) {
                int e = errno;
                lis_free(l);
                snprintf(err, errlen, "getsockname: %s", strerror(e));
                return -e;
        }
        rt_sockaddr_name(&ss, l->name, sizeof(l->name));
        char host[64];
        rt_sockaddr_host(&ss, host, sizeof(host), &l->port);
        snprintf(l->mod, sizeof(l->mod), "%s", mod);
        l->fn = fn;
        l->ev.fn = lis_accepted;
        l->retry.fn = lis_retry;
        if (rt_msg_send(r0, lis_start_msg, l) < 0) {
                lis_free(l);
                snprintf(err, errlen, "cannot reach reactor 0");
                return -ENOMEM;
        }
        *out = l;
        return 0;
}

uint16_t rt_listener_port(const struct rt_listener *l)
{
        return l->port;
}

void rt_listener_close(struct rt_listener *l)
{
        if (!l)
                return;
        struct rt_reactor *r0 = rt_get(0);
        if (!r0) {
                lis_free(l);
                return;
        }
        if (rt_msg_call(r0, lis_close_msg, l) < 0)
                /* No memory for the message: leaking beats freeing under reactor 0's feet. */
                LOG_WARN(l->mod, "cannot reach reactor 0 to close %s; left open", l->name);
}
