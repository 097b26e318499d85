/*
 * Listening TCP sockets for the transports (iSCSI portals, NVMe/TCP
 * listeners).  A listener accepts on reactor 0 with io_uring and hands
 * each accepted connection to a reactor, round robin over all reactors
 * and all listeners; its accept callback then runs on that reactor and
 * owns the socket.  Reactor 0 owns a listener from open to close: it is
 * closed there, so no accept completion can race with its teardown.
 */
#ifndef RT_LISTENER_H
#define RT_LISTENER_H

#include <stddef.h>
#include <stdint.h>

struct rt_listener;

/*
 * A new connection (non-blocking, close-on-exec) on the reactor it was
 * given to (rt_current()); the callee owns fd and closes it on failure.
 */
typedef void (*rt_accept_fn)(int fd);

/*
 * Listen on addr:port (numeric IPv4 or IPv6; port 0 lets the kernel pick a
 * free port, which rt_listener_port reports) and start accepting.  mod is
 * the log tag for accept errors.  Reactors must be running.  Returns 0 and
 * *out, or a negative errno with a message in err.
 */
int rt_listener_open(const char *addr, uint16_t port, const char *mod, rt_accept_fn fn,
                     struct rt_listener **out, char *err, size_t errlen);

/* The port the listener is bound to (the kernel's choice when opened with 0). */
uint16_t rt_listener_port(const struct rt_listener *l);

/*
 * Stop accepting and close, on reactor 0; waits until reactor 0 has taken
 * it (the port is free again on return).  From any thread; l is gone
 * afterwards.  Connections already handed to a reactor are not affected.
 */
void rt_listener_close(struct rt_listener *l);

#endif
