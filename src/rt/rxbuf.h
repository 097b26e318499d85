/*
 * Socket receive with read-ahead, shared by the TCP transports.  Small
 * reads (protocol headers, digests, small data) are served from a buffer
 * filled by one recv, so a burst of PDUs costs one system call instead of
 * two or three each; reads of RT_RX_DIRECT_MIN bytes or more go straight
 * into the caller's buffer once the read-ahead is empty, so bulk data is
 * not copied.  A recv that filled less than it asked for drained the
 * socket: the next read that would need another recv says -EAGAIN without
 * asking the kernel (the caller then polls, which reports data that came
 * in since), saving the recv that would only have found nothing.
 */
#ifndef RT_RXBUF_H
#define RT_RXBUF_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "rt/reactor.h"

#define RT_RX_READAHEAD  (128u << 10) /* the largest window */
#define RT_RX_WIN_MIN    (16u << 10)
#define RT_RX_DIRECT_MIN (8u << 10)

struct rt_rxbuf {
        uint32_t off, len;
        uint32_t win; /* bytes the next refill asks for (0: RT_RX_WIN_MIN) */
        bool drained; /* the last recv came back short: the socket was empty then */
        bool full;    /* the last refill filled its window: the socket held more */
        bool bulk;    /* since that refill, one read copied RT_RX_DIRECT_MIN bytes or more */
        uint8_t data[RT_RX_READAHEAD];
};

/* The window the next refill asks for. */
static inline uint32_t rt_rxbuf_window(const struct rt_rxbuf *rb)
{
        return rb->win ? rb->win : RT_RX_WIN_MIN;
}

/* Bytes read ahead and not yet consumed: no poll will report them again. */
static inline uint32_t rt_rxbuf_pending(const struct rt_rxbuf *rb)
{
        return rb->len - rb->off;
}

/* Up to len bytes into dst: > 0 bytes, 0 end of stream, -EAGAIN, or -errno. */
static inline ssize_t rt_rxbuf_read(struct rt_rxbuf *rb, int fd, uint8_t *dst, size_t len)
{
        for (;;) {
                if (rb->off < rb->len) {
                        size_t n = rb->len - rb->off;
                        if (n > len)
                                n = len;
                        memcpy(dst, rb->data + rb->off, n);
                        rt_count_copy(RT_COPY_RX_READAHEAD, n);
                        rb->off += (uint32_t)n;
                        if (n >= RT_RX_DIRECT_MIN)
                                rb->bulk = true; /* bulk data copied: it should go direct */
                        if (rb->off == rb->len) {
                                /* Consumed: size the next refill by how this one went. */
                                uint32_t w = rt_rxbuf_window(rb);
                                if (rb->bulk)
                                        w = RT_RX_WIN_MIN;
                                else if (rb->full && w < RT_RX_READAHEAD)
                                        w *= 2;
                                rb->win = w;
                        }
                        return (ssize_t)n;
                }
                if (rb->drained) {
                        rb->drained = false; /* the caller polls; the next call asks */
                        return -EAGAIN;
                }
                bool direct = len >= RT_RX_DIRECT_MIN;
                size_t want = direct ? len : rt_rxbuf_window(rb);
                ssize_t n = recv(fd, direct ? dst : rb->data, want, MSG_DONTWAIT);
                struct rt_stats *st = rt_stats_cur();
                st->recv_calls++;
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EWOULDBLOCK) {
                                st->recv_eagain++;
                                return -EAGAIN;
                        }
                        return -errno;
                }
                st->recv_bytes += (uint64_t)n;
                rb->drained = n > 0 && (size_t)n < want;
                if (direct || n == 0)
                        return n;
                rb->len = (uint32_t)n;
                rb->off = 0;
                rb->full = (size_t)n == want;
                rb->bulk = false;
        }
}

#endif
