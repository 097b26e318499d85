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

#define RT_RX_READAHEAD  (16u << 10)
#define RT_RX_DIRECT_MIN (8u << 10)

struct rt_rxbuf {
        uint32_t off, len;
        bool drained; /* the last recv came back short: the socket was empty then */
        uint8_t data[RT_RX_READAHEAD];
};

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
                        return (ssize_t)n;
                }
                if (rb->drained) {
                        rb->drained = false; /* the caller polls; the next call asks */
                        return -EAGAIN;
                }
                bool direct = len >= RT_RX_DIRECT_MIN;
                ssize_t n = direct ? recv(fd, dst, len, MSG_DONTWAIT)
                                   : recv(fd, rb->data, sizeof(rb->data), MSG_DONTWAIT);
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
                rb->drained = n > 0 && (size_t)n < (direct ? len : sizeof(rb->data));
                if (direct || n == 0)
                        return n;
                rb->len = (uint32_t)n;
                rb->off = 0;
        }
}

#endif
