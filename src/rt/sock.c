/*
 * Socket plumbing shared by the TCP transports: numeric addresses, peer
 * names, per-connection socket options and the send queue (see rt/sock.h).
 */
#include "rt/sock.h"
#include "rt/reactor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef SO_ZEROCOPY
#define SO_ZEROCOPY 60
#endif
#ifndef MSG_ZEROCOPY
#define MSG_ZEROCOPY 0x4000000
#endif

#define RT_TXQ_IOV 64 /* iovecs per sendmsg */

int rt_sockaddr_parse(const char *addr, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
        char tmp[INET6_ADDRSTRLEN + 2];
        if (!addr || strlen(addr) >= sizeof(tmp))
                return -EINVAL;
        snprintf(tmp, sizeof(tmp), "%s", addr);
        if (tmp[0] == '[') {
                char *e = strchr(tmp, ']');
                if (!e || e[1])
                        return -EINVAL;
                *e = '\0';
                memmove(tmp, tmp + 1, strlen(tmp));
        }
        memset(ss, 0, sizeof(*ss));
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
        if (addr[0] != '[' && inet_pton(AF_INET, tmp, &s4->sin_addr) == 1) {
                s4->sin_family = AF_INET;
                s4->sin_port = htons(port);
                *len = sizeof(*s4);
                return 0;
        }
        if (inet_pton(AF_INET6, tmp, &s6->sin6_addr) == 1) {
                s6->sin6_family = AF_INET6;
                s6->sin6_port = htons(port);
                *len = sizeof(*s6);
                return 0;
        }
        return -EINVAL;
}

void rt_sockaddr_host(const struct sockaddr_storage *ss, char *host, size_t len, uint16_t *port)
{
        *port = 0;
        snprintf(host, len, "?");
        if (ss->ss_family == AF_INET) {
                const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
                if (!inet_ntop(AF_INET, &s4->sin_addr, host, (socklen_t)len))
                        snprintf(host, len, "?");
                *port = ntohs(s4->sin_port);
        } else if (ss->ss_family == AF_INET6) {
                const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
                if (!inet_ntop(AF_INET6, &s6->sin6_addr, host, (socklen_t)len))
                        snprintf(host, len, "?");
                *port = ntohs(s6->sin6_port);
        }
}

void rt_sockaddr_name(const struct sockaddr_storage *ss, char *out, size_t len)
{
        char host[INET6_ADDRSTRLEN];
        uint16_t port;
        rt_sockaddr_host(ss, host, sizeof(host), &port);
        if (ss->ss_family == AF_INET)
                snprintf(out, len, "%s:%u", host, port);
        else if (ss->ss_family == AF_INET6)
                snprintf(out, len, "[%s]:%u", host, port);
        else
                snprintf(out, len, "?");
}

void rt_sock_peer_name(int fd, char *out, size_t len)
{
        struct sockaddr_storage ss;
        socklen_t sl = sizeof(ss);
        if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
                rt_sockaddr_name(&ss, out, len);
        else
                snprintf(out, len, "?");
}

void rt_sock_tune(int fd)
{
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* ---- send queue ---- */

/* Singly linked lists of items (the unsent ones, those waiting for notifications). */
static void list_push(struct rt_txitem **head, struct rt_txitem **tail, struct rt_txitem *it)
{
        it->next = NULL;
        if (*tail)
                (*tail)->next = it;
        else
                *head = it;
        *tail = it;
}

static struct rt_txitem *list_pop(struct rt_txitem **head, struct rt_txitem **tail)
{
        struct rt_txitem *it = *head;
        if (!it)
                return NULL;
        *head = it->next;
        if (!*head)
                *tail = NULL;
        it->next = NULL;
        return it;
}

void rt_txq_push(struct rt_txq *q, struct rt_txitem *it)
{
        it->len = 0;
        for (int i = 0; i < it->iovcnt; i++)
                it->len += it->iov[i].iov_len;
        it->off = 0;
        it->zc_wait = false;
        it->zc_id = 0;
        list_push(&q->head, &q->tail, it);
}

struct rt_txitem *rt_txq_pop(struct rt_txq *q)
{
        if (q->zhead)
                return list_pop(&q->zhead, &q->ztail);
        return list_pop(&q->head, &q->tail);
}

/*
 * The unsent bytes at the head of q as at most RT_TXQ_IOV iovecs.  A
 * zero-copy item goes alone (*zc): the kernel keeps referring to every byte
 * of a MSG_ZEROCOPY call, and other items' buffers (headers the owner reuses
 * as soon as they come back) must not be held with it.
 */
static int txq_gather(const struct rt_txq *q, struct iovec *iov, bool *zc)
{
        int n = 0;
        *zc = q->zc_on && q->head && q->head->zc;
        for (const struct rt_txitem *it = q->head; it && n < RT_TXQ_IOV; it = it->next) {
                if (it != q->head && (*zc || (q->zc_on && it->zc)))
                        break;
                size_t skip = it == q->head ? it->off : 0;
                for (int i = 0; i < it->iovcnt && n < RT_TXQ_IOV; i++) {
                        size_t l = it->iov[i].iov_len;
                        if (skip >= l) {
                                skip -= l;
                                continue;
                        }
                        iov[n].iov_base = (uint8_t *)it->iov[i].iov_base + skip;
                        iov[n].iov_len = l - skip;
                        skip = 0;
                        n++;
                }
        }
        return n;
}

/* sendmsg of n iovecs with flags (0 or MSG_ZEROCOPY); *zc_took: it went zero-copy. */
static ssize_t txq_sendmsg_flags(int fd, const struct iovec *iov, int n, int flags, bool *zc_took)
{
        struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL | flags);
        struct rt_stats *st = rt_stats_cur();
        st->send_calls++;
        if (w >= 0) {
                st->send_bytes += (uint64_t)w;
                if (flags & MSG_ZEROCOPY) {
                        st->zc_sends++;
                        st->zc_bytes += (uint64_t)w;
                        *zc_took = w > 0;
                }
                return w;
        }
        if (errno == ENOBUFS && (flags & MSG_ZEROCOPY)) {
                /* Over the socket's optmem limit for notifications: send this one copied. */
                st->zc_nobufs++;
                return txq_sendmsg_flags(fd, iov, n, 0, zc_took);
        }
        if (errno == EWOULDBLOCK) {
                st->send_eagain++;
                return -EAGAIN;
        }
        return -errno;
}

static ssize_t txq_sendmsg(void *wctx, const struct iovec *iov, int n)
{
        bool zc_took = false;
        return txq_sendmsg_flags(*(int *)wctx, iov, n, 0, &zc_took);
}

/* An item whose bytes all went to the kernel: the owner's again, or after its notification. */
static bool txq_item_out(struct rt_txq *q, struct rt_txitem *it,
                         bool (*sent)(struct rt_txitem *it, void *arg), void *arg)
{
        if (it->zc_wait) {
                list_push(&q->zhead, &q->ztail,
                          it); /* in id order: notifications free them from the head */
                return true;
        }
        return sent(it, arg);
}

/* Inlined into both entry points: the plain path keeps its direct sendmsg. */
static inline int txq_flush(struct rt_txq *q, rt_txq_writer wr, void *wctx, int fd,
                            bool (*sent)(struct rt_txitem *it, void *arg), void *arg)
{
        if (q->flushing)
                return 0;
        q->flushing = true;
        while (q->head) {
                struct iovec iov[RT_TXQ_IOV];
                bool zc;
                int n = txq_gather(q, iov, &zc);
                zc = zc && fd >= 0;
                ssize_t w = 0;
                bool zc_took = false;
                if (n > 0) {
                        w = zc ? txq_sendmsg_flags(fd, iov, n, MSG_ZEROCOPY, &zc_took)
                               : wr(wctx, iov, n);
                        if (w < 0) {
                                if (w == -EINTR)
                                        continue;
                                q->flushing = false;
                                return (int)w;
                        }
                }
                /* Account the bytes to items in order; empty items complete at once.  A
                 * zero-copy call that took bytes used one id of the socket's counter (a
                 * call that failed took none): every item it touched waits for it. */
                uint32_t id = zc_took ? q->zc_next++ : 0;
                size_t left = (size_t)w;
                while (q->head) {
                        struct rt_txitem *it = q->head;
                        size_t rem = it->len - it->off;
                        if (zc_took && left > 0) {
                                it->zc_wait = true;
                                it->zc_id = id;
                        }
                        if (left < rem) {
                                it->off += left;
                                break;
                        }
                        left -= rem;
                        list_pop(&q->head, &q->tail);
                        if (!txq_item_out(q, it, sent, arg)) {
                                q->flushing = false;
                                return 0;
                        }
                }
        }
        q->flushing = false;
        return 0;
}

int rt_txq_flush(struct rt_txq *q, int fd, bool (*sent)(struct rt_txitem *it, void *arg), void *arg)
{
        return txq_flush(q, txq_sendmsg, &fd, fd, sent, arg);
}

int rt_txq_flush_with(struct rt_txq *q, rt_txq_writer wr, void *wctx,
                      bool (*sent)(struct rt_txitem *it, void *arg), void *arg)
{
        return txq_flush(q, wr, wctx, -1, sent, arg);
}

/* ---- zero-copy sends ---- */

static _Atomic uint32_t zc_min;

void rt_zc_set_min(uint32_t bytes)
{
        atomic_store_explicit(&zc_min, bytes, memory_order_relaxed);
}

uint32_t rt_zc_min(void)
{
        return atomic_load_explicit(&zc_min, memory_order_relaxed);
}

bool rt_txq_zc_enable(struct rt_txq *q, int fd)
{
        if (!q->zc_on) {
                int one = 1;
                q->zc_on = setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one)) == 0;
        }
        return q->zc_on;
}

/* Serial number a before b (the kernel's 32-bit counter wraps). */
static bool zc_before(uint32_t a, uint32_t b)
{
        return (int32_t)(a - b) < 0;
}

/* Ids [lo, hi] were notified: advance zc_done over them and any stashed range they reach. */
static void zc_notified(struct rt_txq *q, uint32_t lo, uint32_t hi)
{
        if (zc_before(q->zc_done, lo)) {
                /* Above a gap (notifications may come out of order): keep it for later. */
                if (q->zc_nstash < RT_TXQ_ZC_STASH) {
                        q->zc_stash[q->zc_nstash][0] = lo;
                        q->zc_stash[q->zc_nstash][1] = hi;
                        q->zc_nstash++;
                        return;
                }
                /* Never seen on TCP; rather than stall, take the gap as notified too. */
        }
        if (zc_before(hi, q->zc_done))
                return;
        q->zc_done = hi + 1;
        for (unsigned i = 0; i < q->zc_nstash; i++) {
                if (!zc_before(q->zc_done, q->zc_stash[i][0])) {
                        uint32_t h = q->zc_stash[i][1];
                        q->zc_stash[i][0] = q->zc_stash[--q->zc_nstash][0];
                        q->zc_stash[i][1] = q->zc_stash[q->zc_nstash][1];
                        if (!zc_before(h, q->zc_done))
                                q->zc_done = h + 1;
                        i = (unsigned)-1; /* look again from the start */
                }
        }
}

int rt_txq_zc_reap(struct rt_txq *q, int fd, bool (*sent)(struct rt_txitem *it, void *arg),
                   void *arg)
{
        struct rt_stats *st = rt_stats_cur();
        int rc = 0;
        for (;;) {
                char cbuf[CMSG_SPACE(sizeof(struct sock_extended_err) +
                                     sizeof(struct sockaddr_in6))];
                struct msghdr mh = {.msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
                ssize_t r = recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN && errno != EWOULDBLOCK)
                                rc = -errno;
                        break;
                }
                st->zc_reaps++;
                for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
                        if (!((cm->cmsg_level == SOL_IP && cm->cmsg_type == IP_RECVERR) ||
                              (cm->cmsg_level == SOL_IPV6 && cm->cmsg_type == IPV6_RECVERR)))
                                continue;
                        struct sock_extended_err ee;
                        memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
                        if (ee.ee_errno != 0 || ee.ee_origin != SO_EE_ORIGIN_ZEROCOPY)
                                continue;
                        uint32_t n = ee.ee_data - ee.ee_info + 1;
                        st->zc_notifs += n;
                        if (ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
                                st->zc_copied += n;
                        zc_notified(q, ee.ee_info, ee.ee_data);
                }
        }
        while (q->zhead && zc_before(q->zhead->zc_id, q->zc_done)) {
                struct rt_txitem *it = list_pop(&q->zhead, &q->ztail);
                if (!sent(it, arg))
                        return 0;
        }
        return rc;
}

void rt_txq_zc_abort(struct rt_txq *q, int fd)
{
        (void)q;
        /* connect(AF_UNSPEC) disconnects a TCP socket at once (tcp_disconnect: a reset,
         * the send and retransmit queues purged), even while io_uring polls still hold
         * the file; SO_LINGER 0 makes the final close a reset too, should that fail. */
        struct sockaddr sa = {.sa_family = AF_UNSPEC};
        (void)connect(fd, &sa, sizeof(sa));
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
        close(fd);
}
