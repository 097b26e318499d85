/*
 * Runtime: messages reach the right reactor thread, deferred work runs on
 * a later iteration in FIFO order, timers fire in deadline order and can be
 * cancelled, rt_msg_call waits for the function to finish, and the
 * large-buffer pool lends bounded, reused memory, parks what it cannot serve
 * and serves waiters in order from a deferred call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

#include "rt/bigbuf.h"
#include "rt/crc.h"
#include "rt/listener.h"
#include "rt/reactor.h"
#include "rt/rxbuf.h"
#include "rt/sock.h"

static int setup(void **st)
{
        (void)st;
        return rt_init(2) || rt_start() ? -1 : 0;
}

static int teardown(void **st)
{
        (void)st;
        rt_stop();
        rt_join();
        rt_fini();
        return 0;
}

struct where {
        struct rt_reactor *seen;
};

static void record_current(void *arg)
{
        ((struct where *)arg)->seen = rt_current();
}

static void test_msg_lands_on_target(void **st)
{
        (void)st;
        for (unsigned i = 0; i < 2; i++) {
                struct where w = {0};
                assert_int_equal(rt_msg_call(rt_get(i), record_current, &w), 0);
                assert_ptr_equal(w.seen, rt_get(i));
        }
        assert_null(rt_current()); /* the test thread is no reactor */
}

struct defer_test {
        struct rt_defer d[3];
        int order[3];
        int n;
        bool ran_inline;
};

static struct defer_test dt;

static void defer_fn(struct rt_defer *d)
{
        dt.order[dt.n++] = (int)(d - dt.d);
}

static void queue_defers(void *arg)
{
        (void)arg;
        for (int i = 0; i < 3; i++) {
                dt.d[i].fn = defer_fn;
                rt_defer(rt_current(), &dt.d[i]);
        }
        dt.ran_inline = dt.n != 0;
}

static void nothing(void *arg)
{
        (void)arg;
}

static void test_defer_fifo_not_inline(void **st)
{
        (void)st;
        memset(&dt, 0, sizeof(dt));
        rt_msg_call(rt_get(0), queue_defers, NULL);
        assert_false(dt.ran_inline);
        /* A second round trip guarantees the loop iterated at least once more. */
        for (int i = 0; i < 3 && dt.n < 3; i++) {
                rt_msg_call(rt_get(0), nothing, NULL);
                usleep(1000);
        }
        assert_int_equal(dt.n, 3);
        assert_int_equal(dt.order[0], 0);
        assert_int_equal(dt.order[1], 1);
        assert_int_equal(dt.order[2], 2);
}

static struct rt_timer timers[3];
static int fired[3];
static int fire_seq;

static void timer_fn(struct rt_timer *t)
{
        fired[t - timers] = ++fire_seq;
}

static void arm_timers(void *arg)
{
        (void)arg;
        for (int i = 0; i < 3; i++)
                timers[i].fn = timer_fn;
        rt_timer_arm(rt_current(), &timers[0], 60);
        rt_timer_arm(rt_current(), &timers[1], 20);
        rt_timer_arm(rt_current(), &timers[2], 40);
        rt_timer_cancel(rt_current(), &timers[2]);
}

/*
 * rt_defer_remote from a thread that is no reactor (the copy engine's
 * workers): each runs on the target reactor's thread, in the order posted,
 * and wakes a reactor that sleeps in io_uring.
 */
struct remote {
        struct rt_defer d[64];
        struct rt_reactor *seen[64];
        int order[64];
        atomic_int n;
};
static struct remote rm;

static void remote_fn(struct rt_defer *d)
{
        int i = (int)(d - rm.d);
        rm.seen[i] = rt_current();
        rm.order[atomic_fetch_add(&rm.n, 1)] = i;
}

static void *poster(void *arg)
{
        (void)arg;
        for (int i = 0; i < 64; i++) {
                rm.d[i].fn = remote_fn;
                rt_defer_remote(rt_get(1), &rm.d[i]);
                if (i % 16 == 0)
                        usleep(2000); /* let the reactor fall asleep in between */
        }
        return NULL;
}

static void test_defer_remote(void **st)
{
        (void)st;
        pthread_t t;
        memset(&rm, 0, sizeof(rm));
        assert_int_equal(pthread_create(&t, NULL, poster, NULL), 0);
        pthread_join(t, NULL);
        for (int i = 0; i < 500 && atomic_load(&rm.n) < 64; i++)
                usleep(2000);
        assert_int_equal(atomic_load(&rm.n), 64);
        for (int i = 0; i < 64; i++) {
                assert_ptr_equal(rm.seen[i], rt_get(1));
                assert_int_equal(rm.order[i], i);
        }
}

static void test_timers(void **st)
{
        (void)st;
        rt_msg_call(rt_get(1), arm_timers, NULL);
        usleep(300 * 1000);
        assert_int_equal(fired[1], 1);
        assert_int_equal(fired[0], 2);
        assert_int_equal(fired[2], 0); /* cancelled */
}

/* RFC 3720 B.4 check value; a chain over pieces equals the one-shot CRC. */
static void test_crc32c(void **st)
{
        (void)st;
        assert_int_equal(rt_crc32c("123456789", 9), 0xe3069283u);
        uint8_t zeros[32] = {0};
        assert_int_equal(rt_crc32c(zeros, sizeof(zeros)), 0x8a9136aau);
        uint32_t crc = RT_CRC32C_INIT;
        crc = rt_crc32c_update(crc, "1234", 4);
        crc = rt_crc32c_update(crc, "", 0);
        crc = rt_crc32c_update(crc, "56789", 5);
        assert_int_equal(rt_crc32c_final(crc), 0xe3069283u);
}

static void test_sockaddr(void **st)
{
        (void)st;
        struct sockaddr_storage ss;
        socklen_t sl;
        char name[RT_ADDR_NAME_MAX], host[64];
        uint16_t port;
        assert_int_equal(rt_sockaddr_parse("127.0.0.1", 3260, &ss, &sl), 0);
        rt_sockaddr_name(&ss, name, sizeof(name));
        assert_string_equal(name, "127.0.0.1:3260");
        assert_int_equal(rt_sockaddr_parse("[::1]", 4420, &ss, &sl), 0);
        rt_sockaddr_name(&ss, name, sizeof(name));
        assert_string_equal(name, "[::1]:4420");
        rt_sockaddr_host(&ss, host, sizeof(host), &port);
        assert_string_equal(host, "::1");
        assert_int_equal(port, 4420);
        assert_int_equal(rt_sockaddr_parse("::", 0, &ss, &sl), 0);
        assert_int_equal(rt_sockaddr_parse("localhost", 1, &ss, &sl), -EINVAL);
        assert_int_equal(rt_sockaddr_parse("[127.0.0.1]", 1, &ss, &sl), -EINVAL);
        assert_int_equal(rt_sockaddr_parse("[::1", 1, &ss, &sl), -EINVAL);
        assert_int_equal(rt_sockaddr_parse("", 1, &ss, &sl), -EINVAL);
}

/* Send-queue items: three PDUs of a header and a big data part each. */
struct txt {
        struct rt_txitem it[3];
        uint8_t hdr[3][8];
        int order[4];
        int nsent;
        struct rt_txq *q;
        int fd;
        bool nested;
        bool stop_after_first;
};

static bool txt_sent(struct rt_txitem *it, void *arg)
{
        struct txt *t = arg;
        t->order[t->nsent++] = (int)(it - t->it);
        /* A flush from inside the callback is a no-op; the outer one goes on. */
        t->nested = rt_txq_flush(t->q, t->fd, txt_sent, t) == 0;
        return !t->stop_after_first;
}

static void txt_init(struct txt *t, struct rt_txq *q, int fd, uint8_t *data, size_t dlen)
{
        memset(t, 0, sizeof(*t));
        memset(q, 0, sizeof(*q));
        t->q = q;
        t->fd = fd;
        for (int i = 0; i < 3; i++) {
                memset(t->hdr[i], 'a' + i, sizeof(t->hdr[i]));
                t->it[i].iov[0].iov_base = t->hdr[i];
                t->it[i].iov[0].iov_len = sizeof(t->hdr[i]);
                t->it[i].iov[1].iov_base = data;
                t->it[i].iov[1].iov_len = dlen;
                t->it[i].iovcnt = 2;
                rt_txq_push(q, &t->it[i]);
        }
}

static void test_txq(void **st)
{
        (void)st;
        static uint8_t data[256 << 10];
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t)(i * 7);
        struct txt t;
        struct rt_txq q;
        int sv[2];
        uint8_t sink[256];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        fcntl(sv[1], F_SETFL, O_NONBLOCK);

        /* Small PDUs all fit: sent in order in one call, nested flushes are no-ops. */
        txt_init(&t, &q, sv[0], data, 16);
        assert_int_equal(rt_txq_flush(&q, sv[0], txt_sent, &t), 0);
        assert_int_equal(t.nsent, 3);
        assert_int_equal(t.order[0], 0);
        assert_int_equal(t.order[2], 2);
        assert_true(t.nested);
        assert_true(rt_txq_empty(&q));
        assert_int_equal(recv(sv[1], sink, sizeof(sink), 0), 3 * (8 + 16));

        /* sent() returning false stops the flush with the rest still queued. */
        txt_init(&t, &q, sv[0], data, 16);
        t.stop_after_first = true;
        assert_int_equal(rt_txq_flush(&q, sv[0], txt_sent, &t), 0);
        assert_int_equal(t.nsent, 1);
        assert_ptr_equal(rt_txq_pop(&q), &t.it[1]);
        assert_int_equal(recv(sv[1], sink, sizeof(sink), 0), 3 * (8 + 16));

        /* A small socket buffer: partial sends resume byte-exactly. */
        int small = 4096;
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
        txt_init(&t, &q, sv[0], data, sizeof(data));
        size_t want = 3 * (8 + sizeof(data)), got = 0;
        static uint8_t rx[3 * (8 + sizeof(data))];
        int rc, eagain = 0;
        while ((rc = rt_txq_flush(&q, sv[0], txt_sent, &t)) == -EAGAIN || got < want) {
                if (rc == -EAGAIN)
                        eagain++;
                ssize_t n = recv(sv[1], rx + got, want - got, 0);
                if (n > 0)
                        got += (size_t)n;
                assert_true(rc == 0 || rc == -EAGAIN);
        }
        assert_true(eagain > 0);
        assert_int_equal(got, want);
        assert_int_equal(t.nsent, 3);
        for (int i = 0; i < 3; i++) {
                const uint8_t *p = rx + (size_t)i * (8 + sizeof(data));
                assert_int_equal(p[0], 'a' + i);
                assert_memory_equal(p + 8, data, sizeof(data));
        }
        /* A dead peer is an error, not EAGAIN. */
        close(sv[1]);
        txt_init(&t, &q, sv[0], data, 16);
        rc = rt_txq_flush(&q, sv[0], txt_sent, &t);
        assert_int_equal(rc, -EPIPE);
        close(sv[0]);
}

/* Accepted connections: on which reactors they landed. */
static atomic_int accepted_on[2];

static void on_accept(int fd)
{
        atomic_fetch_add(&accepted_on[rt_index(rt_current())], 1);
        close(fd);
}

static int connect_to(uint16_t port)
{
        struct sockaddr_storage ss;
        socklen_t sl;
        assert_int_equal(rt_sockaddr_parse("127.0.0.1", port, &ss, &sl), 0);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        int rc = connect(fd, (struct sockaddr *)&ss, sl);
        close(fd);
        return rc;
}

/* Port 0 binds a free port; connections go round robin; close frees the port. */
static void test_listener(void **st)
{
        (void)st;
        struct rt_listener *l = NULL;
        char err[128];
        assert_int_equal(rt_listener_open("127.0.0.1", 0, "test", on_accept, &l, err, sizeof(err)),
                         0);
        uint16_t port = rt_listener_port(l);
        assert_true(port != 0);
        for (int i = 0; i < 4; i++)
                assert_int_equal(connect_to(port), 0);
        for (int i = 0; i < 200 && accepted_on[0] + accepted_on[1] < 4; i++)
                usleep(10000);
        assert_int_equal(accepted_on[0], 2);
        assert_int_equal(accepted_on[1], 2);

        /* The same port again is taken; after close it is free. */
        struct rt_listener *l2 = NULL;
        assert_int_equal(
            rt_listener_open("127.0.0.1", port, "test", on_accept, &l2, err, sizeof(err)),
            -EADDRINUSE);
        rt_listener_close(l);
        assert_int_equal(connect_to(port), -1);
        assert_int_equal(
            rt_listener_open("127.0.0.1", port, "test", on_accept, &l2, err, sizeof(err)), 0);
        assert_int_equal(rt_listener_port(l2), port);
        rt_listener_close(l2);

        assert_int_equal(rt_listener_open("localhost", 0, "test", on_accept, &l2, err, sizeof(err)),
                         -EINVAL);
}

/* ---- large-buffer pool (rt/bigbuf.h), on reactor 1 with a 4-chunk pool ---- */

#define MIB (1u << 20)

static struct {
        uint8_t *a, *b;
        size_t alen, blen;
        struct rt_bigbuf_wait w[4];
        int served[4];
        int nserved;
        bool inline_call;
        void *none;
        int einval;
        bool cancel_queued, cancel_served;
} bb;

static void bb_fn(struct rt_bigbuf_wait *w)
{
        bb.served[bb.nserved++] = (int)(w - bb.w);
}

static void bb_step1(void *arg)
{
        (void)arg;
        struct rt_reactor *r = rt_current();
        bb.a = rt_bigbuf_get(r, 2 * MIB, &bb.alen);
        bb.b = rt_bigbuf_get(r, MIB + MIB / 2, &bb.blen); /* rounds up to 2 chunks */
        size_t got;
        bb.none = rt_bigbuf_get(r, 1, &got); /* pool full */
        bb.einval = rt_bigbuf_wait(r, &(struct rt_bigbuf_wait){.fn = bb_fn, .len = 5 * MIB});
        for (int i = 0; i < 4; i++) {
                bb.w[i].fn = bb_fn;
                bb.w[i].len = i == 1 ? 3 * MIB : MIB;
        }
        /* w0: 1 MiB, w1: 3 MiB, w2: 1 MiB (withdrawn), w3: 1 MiB */
        for (int i = 0; i < 4; i++)
                assert_int_equal(rt_bigbuf_wait(r, &bb.w[i]), 0);
        bb.cancel_queued = rt_bigbuf_cancel(r, &bb.w[2]);
        /* Room for 2 chunks: w0 is served, w1 (3 MiB) is not, and w3 stays behind it. */
        rt_bigbuf_put(r, bb.a, bb.alen);
        bb.inline_call = bb.nserved != 0;
}

static void bb_step2(void *arg)
{
        (void)arg;
        struct rt_reactor *r = rt_current();
        size_t got;
        /* A newcomer does not overtake the waiters, though a chunk is free. */
        bb.none = rt_bigbuf_get(r, 1, &got);
        bb.cancel_served = rt_bigbuf_cancel(r, &bb.w[0]);
        rt_bigbuf_put(r, bb.w[0].buf, bb.w[0].len);
        rt_bigbuf_put(r, bb.b, bb.blen); /* now w1 (3 MiB) fits, then w3 */
}

static void bb_step3(void *arg)
{
        (void)arg;
        struct rt_reactor *r = rt_current();
        rt_bigbuf_put(r, bb.w[1].buf, bb.w[1].len);
        rt_bigbuf_put(r, bb.w[3].buf, bb.w[3].len);
}

static void settle(int want)
{
        for (int i = 0; i < 50 && bb.nserved < want; i++) {
                rt_msg_call(rt_get(1), nothing, NULL);
                usleep(1000);
        }
}

/*
 * The per-reactor counters: socket calls, bytes and read-ahead copies land
 * in the counters of the reactor that made them (not another's, not from a
 * non-reactor thread), and a message to an idle reactor costs it a sleep
 * and an eventfd wake-up.
 */
struct stats_job {
        int fd, peer;
        ssize_t r1, r2, r3, r4, r5;
};
static bool stats_sent(struct rt_txitem *it, void *arg)
{
        (void)it;
        (void)arg;
        return true;
}
static void stats_job_fn(void *arg)
{
        struct stats_job *j = arg;
        static struct rt_rxbuf rb;
        uint8_t buf[128];
        rb.off = rb.len = 0;
        j->r1 = rt_rxbuf_read(&rb, j->fd, buf, 10);  /* one recv of 100, 10 copied */
        j->r2 = rt_rxbuf_read(&rb, j->fd, buf, 128); /* the other 90, no recv */
        /* The recv came back short, so the socket was drained: EAGAIN without a recv. */
        j->r3 = rt_rxbuf_read(&rb, j->fd, buf, 128);
        /* Then the next read asks the kernel again: 7 bytes, then a real EAGAIN. */
        if (write(j->peer, buf, 7) != 7)
                return;
        j->r4 = rt_rxbuf_read(&rb, j->fd, buf, 128);
        rb.drained = false;
        j->r5 = rt_rxbuf_read(&rb, j->fd, buf, 128);
        struct rt_txq q = {0};
        struct rt_txitem it = {.iovcnt = 1};
        it.iov[0].iov_base = buf;
        it.iov[0].iov_len = 50;
        rt_txq_push(&q, &it);
        rt_txq_flush(&q, j->fd, stats_sent, NULL);
}

static void test_reactor_stats(void **st)
{
        (void)st;
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        uint8_t data[100] = {0};
        assert_int_equal(write(sv[1], data, sizeof(data)), 100);
        struct rt_stats a0, a1, b0, b1;
        rt_stats_read(1, &a0);
        rt_stats_read(0, &b0);
        struct stats_job j = {.fd = sv[0], .peer = sv[1]};
        assert_int_equal(rt_msg_call(rt_get(1), stats_job_fn, &j), 0);
        rt_stats_read(1, &a1);
        rt_stats_read(0, &b1);
        assert_int_equal(j.r1, 10);
        assert_int_equal(j.r2, 90);
        assert_int_equal(j.r3, -EAGAIN);
        assert_int_equal(j.r4, 7);
        assert_int_equal(j.r5, -EAGAIN);
        assert_int_equal(a1.recv_calls - a0.recv_calls, 3);
        assert_int_equal(a1.recv_bytes - a0.recv_bytes, 107);
        assert_int_equal(a1.recv_eagain - a0.recv_eagain, 1);
        assert_int_equal(a1.copy_bytes[RT_COPY_RX_READAHEAD] - a0.copy_bytes[RT_COPY_RX_READAHEAD],
                         107);
        assert_int_equal(a1.send_calls - a0.send_calls, 1);
        assert_int_equal(a1.send_bytes - a0.send_bytes, 50);
        /* The message came through the eventfd read: a completion reaped by some enter. */
        assert_true(a1.msg_wakeups - a0.msg_wakeups >= 1);
        assert_true(a1.cqes - a0.cqes >= 1);
        assert_true((a1.enter_wait + a1.enter_submit + a1.polls) -
                        (a0.enter_wait + a0.enter_submit + a0.polls) >=
                    1);
        /* Reactor 0 made no socket calls. */
        assert_int_equal(b1.recv_calls, b0.recv_calls);
        assert_int_equal(b1.send_calls, b0.send_calls);
        /* Outside a reactor the calls count nowhere that rt_stats_read shows. */
        assert_int_equal(write(sv[1], data, 5), 5);
        struct rt_rxbuf rb = {0};
        uint8_t buf[16];
        assert_int_equal(rt_rxbuf_read(&rb, sv[0], buf, 5), 5);
        rt_stats_read(1, &a0);
        assert_int_equal(a0.recv_calls, a1.recv_calls);
        rt_stats_read(99, &a0);
        assert_int_equal(a0.loops, 0);
        assert_string_equal(rt_copy_site_name(RT_COPY_BACKEND_MEM), "backend_mem");
        assert_string_equal(rt_xport_name(RT_XPORT_ISCSI), "iscsi");
        close(sv[0]);
        close(sv[1]);
}

/*
 * Zero-copy sends (rt/sock.h): an item that went out with MSG_ZEROCOPY is
 * not handed back (sent()) when sendmsg returns, only once the kernel's
 * notification for it was read; an item queued after it went in a sendmsg
 * of its own, copied, and came back at once; and a connection reset with
 * notifications outstanding gives every item back through rt_txq_pop.
 */
static int tcp_pair(int *a, int *b)
{
        int l = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t sl = sizeof(sa);
        if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1) ||
            getsockname(l, (struct sockaddr *)&sa, &sl))
                return -1;
        *a = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(*a, (struct sockaddr *)&sa, sizeof(sa)))
                return -1;
        *b = accept(l, NULL, NULL);
        close(l);
        return *b < 0 ? -1 : 0;
}

static bool zc_sent(struct rt_txitem *it, void *arg)
{
        int *order = arg;
        order[order[0]++ + 1] = it->iovcnt; /* iovcnt tells the items apart */
        return true;
}

static void test_txq_zerocopy(void **st)
{
        (void)st;
        int a = -1, b = -1;
        assert_int_equal(tcp_pair(&a, &b), 0);
        struct rt_txq q = {0};
        if (!rt_txq_zc_enable(&q, a)) {
                close(a);
                close(b);
                skip(); /* a kernel without MSG_ZEROCOPY */
        }
        static uint8_t data[256u << 10], hdr[16], got[300u << 10];
        memset(data, 0x5a, sizeof(data));
        struct rt_txitem big = {.iovcnt = 2, .zc = true}, small = {.iovcnt = 1};
        big.iov[0] = (struct iovec){hdr, sizeof(hdr)};
        big.iov[1] = (struct iovec){data, sizeof(data)};
        small.iov[0] = (struct iovec){hdr, sizeof(hdr)};
        int order[4] = {0};
        rt_txq_push(&q, &big);
        rt_txq_push(&q, &small);
        size_t want = sizeof(hdr) * 2 + sizeof(data), have = 0;
        /* Flush while the peer drains, until every byte went to the kernel. */
        for (int i = 0; i < 10000 && !rt_txq_empty(&q); i++) {
                int rc = rt_txq_flush(&q, a, zc_sent, order);
                assert_true(rc == 0 || rc == -EAGAIN);
                ssize_t n = recv(b, got, sizeof(got), MSG_DONTWAIT);
                if (n > 0)
                        have += (size_t)n;
        }
        assert_true(rt_txq_empty(&q));
        /* All out; small is back, big is not: the kernel may still read its pages. */
        assert_int_equal(order[0], 1);
        assert_int_equal(order[1], 1); /* small */
        assert_false(small.zc_wait);
        assert_true(rt_txq_zc_busy(&q));
        assert_true(big.zc_wait);
        while (have < want) {
                ssize_t n = recv(b, got, sizeof(got), 0);
                assert_true(n > 0);
                have += (size_t)n;
        }
        /* The notification comes on the error queue (POLLERR); read it, in order both return. */
        for (int i = 0; i < 1000 && rt_txq_zc_busy(&q); i++) {
                assert_int_equal(rt_txq_zc_reap(&q, a, zc_sent, order), 0);
                if (rt_txq_zc_busy(&q))
                        usleep(1000);
        }
        assert_false(rt_txq_zc_busy(&q));
        assert_int_equal(order[0], 2);
        assert_int_equal(order[2], 2); /* big */
        /* Reset with one outstanding: the items come back through rt_txq_pop. */
        order[0] = 0;
        rt_txq_push(&q, &big);
        assert_true(rt_txq_flush(&q, a, zc_sent, order) == 0 || !rt_txq_empty(&q));
        assert_int_equal(order[0], 0);
        if (rt_txq_zc_busy(&q)) {
                rt_txq_zc_abort(&q, a);
                a = -1;
        }
        assert_ptr_equal(rt_txq_pop(&q), &big);
        assert_null(rt_txq_pop(&q));
        assert_false(rt_txq_zc_busy(&q));
        if (a >= 0)
                close(a);
        close(b);
}

/*
 * The read-ahead's window (rt/rxbuf.h): a refill that filled its window and
 * was consumed by small reads doubles the next one (4 KiB writes then come
 * in dozens per recv); a read that copies bulk data out of it drops the
 * window back to the minimum, so bulk data goes straight to its buffer.
 */
static void test_rxbuf_window(void **st)
{
        (void)st;
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        int big = 1 << 20;
        setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
        static uint8_t data[512u << 10], buf[64u << 10];
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (uint8_t)(i * 7);
        static struct rt_rxbuf rb;
        memset(&rb, 0, sizeof(rb));
        size_t got = 0;
        /* Small reads (a header's worth) over four refills: 16, 32, 64, 128 KiB. */
        const uint32_t wins[] = {16u << 10, 32u << 10, 64u << 10, 128u << 10};
        size_t sent = 0;
        for (unsigned r = 0; r < 4; r++) {
                assert_int_equal(rt_rxbuf_window(&rb), wins[r]);
                /* Exactly the window and one byte more: the refill fills its window. */
                size_t w = wins[r] + 1 - (sent - got);
                assert_int_equal(write(sv[1], data + sent, w), (ssize_t)w);
                sent += w;
                ssize_t n = rt_rxbuf_read(&rb, sv[0], buf, 72);
                assert_int_equal(n, 72);
                assert_int_equal(rb.len, wins[r]); /* one recv brought the whole window */
                assert_memory_equal(buf, data + got, 72);
                got += 72;
                while (rt_rxbuf_pending(&rb)) {
                        n = rt_rxbuf_read(&rb, sv[0], buf, 100);
                        assert_true(n > 0 && n <= 100);
                        assert_memory_equal(buf, data + got, (size_t)n);
                        got += (size_t)n;
                }
        }
        assert_int_equal(rt_rxbuf_window(&rb), RT_RX_READAHEAD); /* and no further */
        /* A header, then bulk data found in the read-ahead: back to the minimum. */
        assert_int_equal(write(sv[1], data + sent, 40000), 40000);
        sent += 40000;
        assert_int_equal(rt_rxbuf_read(&rb, sv[0], buf, 72), 72);
        got += 72;
        ssize_t n = rt_rxbuf_read(&rb, sv[0], buf, 32u << 10);
        assert_int_equal(n, 32u << 10);
        assert_memory_equal(buf, data + got, (size_t)n);
        got += (size_t)n;
        while (rt_rxbuf_pending(&rb)) {
                n = rt_rxbuf_read(&rb, sv[0], buf, 100);
                assert_true(n > 0);
                got += (size_t)n;
        }
        assert_int_equal(got, sent);
        assert_int_equal(rt_rxbuf_window(&rb), RT_RX_WIN_MIN);
        /* A refill that came back short (the socket drained) does not grow it. */
        assert_int_equal(rt_rxbuf_read(&rb, sv[0], buf, 100), -EAGAIN); /* it said drained */
        assert_int_equal(write(sv[1], data, 500), 500);
        for (int i = 0; i < 5; i++)
                assert_int_equal(rt_rxbuf_read(&rb, sv[0], buf, 100), 100);
        assert_int_equal(rt_rxbuf_window(&rb), RT_RX_WIN_MIN);
        close(sv[0]);
        close(sv[1]);
}

/* Polling always: a reactor reaps without ever sleeping; off: it sleeps again. */
static void nop_fn(void *arg)
{
        (void)arg;
}
static void test_poll_always(void **st)
{
        (void)st;
        struct rt_stats a0, a1;
        rt_poll_set(RT_POLL_ALWAYS, 0);
        assert_int_equal(rt_msg_call(rt_get(1), nop_fn, NULL), 0); /* wakes it: it spins now */
        rt_stats_read(1, &a0);
        assert_int_equal(rt_msg_call(rt_get(1), nop_fn, NULL), 0);
        usleep(2000);
        rt_stats_read(1, &a1);
        assert_int_equal(a1.enter_wait, a0.enter_wait);
        assert_true(a1.polls > a0.polls);
        assert_true(a1.poll_hits > a0.poll_hits); /* the message's eventfd read */
        rt_poll_set(RT_POLL_OFF, RT_POLL_US_DEFAULT);
        assert_int_equal(rt_msg_call(rt_get(1), nop_fn, NULL), 0); /* it sleeps from here */
        rt_stats_read(1, &a0);
        assert_int_equal(rt_msg_call(rt_get(1), nop_fn, NULL), 0);
        rt_stats_read(1, &a1);
        assert_true(a1.enter_wait > a0.enter_wait);
        assert_int_equal(a1.polls, a0.polls);
        enum rt_poll_mode m;
        assert_int_equal(rt_poll_mode_parse("adaptive", &m), 0);
        assert_int_equal(m, RT_POLL_ADAPTIVE);
        assert_int_equal(rt_poll_mode_parse("sometimes", &m), -EINVAL);
        assert_string_equal(rt_poll_mode_name(RT_POLL_ALWAYS), "always");
}

static void test_bigbuf(void **st)
{
        (void)st;
        struct rt_bigbuf_stats s0, s;
        memset(&bb, 0, sizeof(bb));
        rt_bigbuf_stats(&s0);
        assert_int_equal(rt_bigbuf_configure(3 * MIB + 1), -EINVAL);
        assert_int_equal(rt_bigbuf_configure(4 * MIB),
                         0); /* reactor 1's pool is made on first use */

        rt_msg_call(rt_get(1), bb_step1, NULL);
        assert_non_null(bb.a);
        assert_non_null(bb.b);
        assert_int_equal(bb.alen, 2 * MIB);
        assert_int_equal(bb.blen, 2 * MIB);
        assert_ptr_equal(bb.b, bb.a + 2 * MIB); /* contiguous chunks, first fit */
        assert_null(bb.none);
        assert_int_equal(bb.einval, -EINVAL); /* more than the whole pool: never */
        assert_true(bb.cancel_queued);
        assert_false(bb.inline_call); /* never called back from inside put */
        settle(1);
        assert_int_equal(bb.nserved, 1);
        assert_int_equal(bb.served[0], 0);
        assert_ptr_equal(bb.w[0].buf, bb.a); /* the lowest chunk again: touched pages reused */
        assert_int_equal(bb.w[0].len, MIB);
        rt_bigbuf_stats(&s);
        assert_int_equal(s.in_use - s0.in_use, 3 * MIB);
        assert_int_equal(s.waiting, 2); /* w1 and w3 */

        rt_msg_call(rt_get(1), bb_step2, NULL);
        assert_null(bb.none);
        assert_false(bb.cancel_served); /* w0 was served: its owner has the buffer */
        settle(3);
        assert_int_equal(bb.nserved, 3);
        assert_int_equal(bb.served[1], 1); /* in arrival order, the big one first */
        assert_int_equal(bb.served[2], 3);
        assert_ptr_equal(bb.w[1].buf, bb.a);
        assert_int_equal(bb.w[1].len, 3 * MIB);
        assert_ptr_equal(bb.w[3].buf, bb.a + 3 * MIB);

        rt_msg_call(rt_get(1), bb_step3, NULL);
        rt_bigbuf_stats(&s);
        assert_int_equal(s.in_use, s0.in_use); /* everything back */
        assert_int_equal(s.waiting, 0);
        assert_true(s.peak >= 4 * MIB);
        assert_int_equal(s.waits - s0.waits, 4);
        assert_int_equal(s.grants - s0.grants, 5); /* a, b, w0, w1, w3 */
        rt_bigbuf_configure((uint64_t)RT_BIGBUF_DEFAULT_MIB << 20);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_msg_lands_on_target),
            cmocka_unit_test(test_defer_fifo_not_inline),
            cmocka_unit_test(test_defer_remote),
            cmocka_unit_test(test_timers),
            cmocka_unit_test(test_crc32c),
            cmocka_unit_test(test_sockaddr),
            cmocka_unit_test(test_txq),
            cmocka_unit_test(test_txq_zerocopy),
            cmocka_unit_test(test_listener),
            cmocka_unit_test(test_bigbuf),
            cmocka_unit_test(test_reactor_stats),
            cmocka_unit_test(test_rxbuf_window),
            cmocka_unit_test(test_poll_always),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
