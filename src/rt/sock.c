/*
 * Socket plumbing shared by the TCP transports: numeric addresses, peer
 * names, per-connection socket options and the send queue (see rt/sock.h).
 */
#include "rt/sock.h"
#include "rt/reactor.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>

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

void rt_txq_push(struct rt_txq *q, struct rt_txitem *it)
{
        it->len = 0;
        for (int i = 0; i < it->iovcnt; i++)
                it->len += it->iov[i].iov_len;
        it->off = 0;
        it->next = NULL;
        if (q->tail)
                q->tail->next = it;
        else
                q->head = it;
        q->tail = it;
}

struct rt_txitem *rt_txq_pop(struct rt_txq *q)
{
        struct rt_txitem *it = q->head;
        if (!it)
                return NULL;
        q->head = it->next;
        if (!q->head)
                q->tail = NULL;
        it->next = NULL;
        return it;
}

/* The unsent bytes at the head of q as at most RT_TXQ_IOV iovecs. */
static int txq_gather(const struct rt_txq *q, struct iovec *iov)
{
        int n = 0;
        for (const struct rt_txitem *it = q->head; it && n < RT_TXQ_IOV; it = it->next) {
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

static ssize_t txq_sendmsg(void *wctx, const struct iovec *iov, int n)
{
        struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(*(int *)wctx, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        struct rt_stats *st = rt_stats_cur();
        st->send_calls++;
        if (w >= 0) {
                st->send_bytes += (uint64_t)w;
                return w;
        }
        if (errno == EWOULDBLOCK) {
                st->send_eagain++;
                return -EAGAIN;
        }
        return -errno;
}

/* Inlined into both entry points: the plain path keeps its direct sendmsg. */
static inline int txq_flush(struct rt_txq *q, rt_txq_writer wr, void *wctx,
                            bool (*sent)(struct rt_txitem *it, void *arg), void *arg)
{
        if (q->flushing)
                return 0;
        q->flushing = true;
        while (q->head) {
                struct iovec iov[RT_TXQ_IOV];
                int n = txq_gather(q, iov);
                ssize_t w = 0;
                if (n > 0) {
                        w = wr(wctx, iov, n);
                        if (w < 0) {
                                if (w == -EINTR)
                                        continue;
                                q->flushing = false;
                                return (int)w;
                        }
                }
                /* Account the bytes to items in order; empty items complete at once. */
                size_t left = (size_t)w;
                while (q->head) {
                        struct rt_txitem *it = q->head;
                        size_t rem = it->len - it->off;
                        if (left < rem) {
                                it->off += left;
                                break;
                        }
                        left -= rem;
                        rt_txq_pop(q);
                        if (!sent(it, arg)) {
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
        return txq_flush(q, txq_sendmsg, &fd, sent, arg);
}

int rt_txq_flush_with(struct rt_txq *q, rt_txq_writer wr, void *wctx,
                      bool (*sent)(struct rt_txitem *it, void *arg), void *arg)
{
        return txq_flush(q, wr, wctx, sent, arg);
}
