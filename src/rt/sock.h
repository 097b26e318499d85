/*
 * Socket plumbing shared by the TCP transports (iSCSI, NVMe/TCP): numeric
 * socket addresses and their names, and the send queue.
 *
 * The send queue holds items of up to RT_TX_PARTS iovecs (a PDU header,
 * its data, a digest) in order and writes them with non-blocking sendmsg,
 * many items per call; a partial send resumes where it stopped.  The queue
 * does not own its items: the owner embeds a struct rt_txitem in its own
 * PDU object and learns from the sent() callback when the item's bytes have
 * all gone to the kernel (and the item may be reused).
 */
#ifndef RT_SOCK_H
#define RT_SOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

/* "[ffff:...]:65535" with room to spare. */
#define RT_ADDR_NAME_MAX 80

/*
 * A numeric IPv4 or IPv6 address ("[::1]" accepted) and a port as a socket
 * address.  0, or -EINVAL for anything else (no name lookup).
 */
int rt_sockaddr_parse(const char *addr, uint16_t port, struct sockaddr_storage *ss, socklen_t *len);

/* The address part as text (IPv6 without brackets) and the port; "?" and 0 if not IP. */
void rt_sockaddr_host(const struct sockaddr_storage *ss, char *host, size_t len, uint16_t *port);

/* "a.b.c.d:port" or "[v6]:port"; "?" if not IP. */
void rt_sockaddr_name(const struct sockaddr_storage *ss, char *out, size_t len);

/* rt_sockaddr_name of a connected socket's peer; "?" if unknown. */
void rt_sock_peer_name(int fd, char *out, size_t len);

/* Options every accepted connection gets (TCP_NODELAY: PDUs are latency bound). */
void rt_sock_tune(int fd);

/* ---- send queue ---- */

#define RT_TX_PARTS 3

struct rt_txitem {
        struct iovec iov[RT_TX_PARTS]; /* set by the owner before rt_txq_push */
        int iovcnt;
        bool zc;         /* set by the owner: may go zero-copy (rt_txq_zc_enable) */
        bool zc_wait;    /* (queue) bytes of it went in a zero-copy sendmsg ... */
        uint32_t zc_id;  /* (queue) ... the last of which had this id */
        size_t len, off; /* total bytes, bytes already sent (set by the queue) */
        struct rt_txitem *next;
};

#define RT_TXQ_ZC_STASH 16

struct rt_txq {
        struct rt_txitem *head, *tail;
        /* Sent, but waiting for the kernel to let go of their bytes (zero-copy), in order. */
        struct rt_txitem *zhead, *ztail;
        uint32_t zc_next; /* the id of the next zero-copy sendmsg (the kernel's counter) */
        uint32_t zc_done; /* every id below it was notified */
        uint32_t zc_stash[RT_TXQ_ZC_STASH][2]; /* notified ranges [lo, hi] above a gap */
        unsigned zc_nstash;
        bool zc_on;    /* SO_ZEROCOPY is set on the socket */
        bool flushing; /* inside rt_txq_flush: nested calls return at once */
};

/*
 * Zero-copy sends (issue 13).  The smallest data item worth sending with
 * MSG_ZEROCOPY, in bytes (options.zerocopy_send_min; 0: never, the default:
 * see README "Zero-copy sends"); any thread, owners read it per item.
 */
#define RT_ZC_MIN_MAX (64u << 20)
void rt_zc_set_min(uint32_t bytes);
uint32_t rt_zc_min(void);

/*
 * Set SO_ZEROCOPY on fd for q (once; plain sockets only, never under TLS).
 * Then an item marked zc goes out alone in a sendmsg with MSG_ZEROCOPY: the
 * kernel keeps referring to its pages after sendmsg returns, until it posts
 * a notification on the socket's error queue.  Such an item reaches sent()
 * only from rt_txq_zc_reap once its notification came (sent() keeps meaning
 * "the buffer is yours again"); other items come back as before, possibly
 * before an older zero-copy one, so an owner whose PDUs share a buffer
 * keeps it until each of them came back (NVMe/TCP's tx_refs, iSCSI's task
 * references).  True when zero-copy is on.
 */
bool rt_txq_zc_enable(struct rt_txq *q, int fd);

/* Items sent but not yet handed back (waiting for zero-copy notifications). */
static inline bool rt_txq_zc_busy(const struct rt_txq *q)
{
        return q->zhead != NULL;
}

/*
 * Read the notifications on fd's error queue (POLLERR says some are there)
 * and pass the items they free to sent(), in order, as rt_txq_flush does.
 * 0, or a negative errno from recvmsg.
 */
int rt_txq_zc_reap(struct rt_txq *q, int fd, bool (*sent)(struct rt_txitem *it, void *arg),
                   void *arg);

/*
 * A connection closing with zero-copy sends outstanding: reset it now
 * (connect AF_UNSPEC, then close with SO_LINGER 0), so the kernel drops the
 * bytes it still held instead of sending them from buffers the owner is
 * about to reuse (packets already handed to a NIC's ring excepted).  The
 * caller then treats fd as closed and may pop and release every item.
 */
void rt_txq_zc_abort(struct rt_txq *q, int fd);

/* Append it (its iov/iovcnt set; it must not be queued already). */
void rt_txq_push(struct rt_txq *q, struct rt_txitem *it);

/*
 * Unlink and return the first item, or NULL (e.g. to release what a closed
 * connection held): items waiting for zero-copy notifications first (only
 * after rt_txq_zc_abort), then the unsent ones.
 */
struct rt_txitem *rt_txq_pop(struct rt_txq *q);

static inline bool rt_txq_empty(const struct rt_txq *q)
{
        return !q->head;
}

/*
 * Write what q holds to fd until it is empty or the socket is full.  Each
 * item whose last byte went out is unlinked, then passed to sent(it, arg),
 * which may queue more items (they go out in the same call) or pop the
 * rest, and returns false to stop (the owner closed the connection); q
 * itself must stay valid until this call returns.
 * A call from inside sent() returns 0 at once: the outer call goes on.
 *
 * Returns 0 (empty, or stopped by sent()), -EAGAIN (the socket is full:
 * poll for POLLOUT and call again) or a negative errno (the send failed;
 * the connection is unusable).
 */
int rt_txq_flush(struct rt_txq *q, int fd, bool (*sent)(struct rt_txitem *it, void *arg),
                 void *arg);

/*
 * rt_txq_flush through a writer other than sendmsg (a TLS session): wr
 * takes up to n iovecs of the queue's unsent bytes, in order, and returns
 * how many bytes it took (> 0), -EAGAIN (nothing taken; try again once the
 * socket can move), or another negative errno.  Same contract otherwise.
 */
typedef ssize_t (*rt_txq_writer)(void *wctx, const struct iovec *iov, int n);
int rt_txq_flush_with(struct rt_txq *q, rt_txq_writer wr, void *wctx,
                      bool (*sent)(struct rt_txitem *it, void *arg), void *arg);

#endif
