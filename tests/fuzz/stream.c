/* See stream.h: feed a fuzz input to a transport through a socketpair. */
#include "stream.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int fuzz_stream_feed(const uint8_t *data, size_t len, int (*attach)(int fd), unsigned (*live)(void),
                     int timeout_ms)
{
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
                return -errno;
        unsigned before = live();
        int rc = attach(sv[1]);
        if (rc < 0) {
                close(sv[0]);
                close(sv[1]);
                return rc;
        }
        size_t off = 0;
        bool wr_open = true;
        long deadline = now_ms() + timeout_ms;
        for (;;) {
                if (wr_open && off == len) {
                        shutdown(sv[0], SHUT_WR);
                        wr_open = false;
                }
                long left = deadline - now_ms();
                if (left <= 0)
                        break;
                struct pollfd p = {.fd = sv[0], .events = POLLIN | (wr_open ? POLLOUT : 0)};
                if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
                        break;
                if (p.revents & POLLOUT) {
                        ssize_t n = send(sv[0], data + off, len - off, MSG_NOSIGNAL);
                        if (n > 0)
                                off += (size_t)n;
                        else if (n < 0 && errno != EAGAIN && errno != EINTR)
                                wr_open = false; /* the target closed: stop writing */
                }
                if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
                        uint8_t sink[65536];
                        ssize_t n = read(sv[0], sink, sizeof(sink));
                        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                                break; /* the target closed the connection */
                }
        }
        close(sv[0]);
        /* The reactor frees the connection after the close: wait for it (up to 10 s, since a
         * starved reactor — a nice'd campaign on a loaded machine — once took over 1 s, and
         * LeakSanitizer then reported the queue's command table as leaked). */
        for (int i = 0; i < 200000 && live() > before; i++)
                usleep(50);
        return 0;
}
