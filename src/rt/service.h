/*
 * The service manager's view of slated: readiness, reload and stop
 * notifications and a one-line status, sent with libsystemd's sd_notify
 * when slated runs as a Type=notify unit.  Without $NOTIFY_SOCKET (run by
 * hand, in tests) and in builds without libsystemd every call does nothing,
 * so callers never check whether a service manager is there.
 */
#ifndef RT_SERVICE_H
#define RT_SERVICE_H

/* READY=1 with a STATUS= line: every listener is up and the config applied. */
void rt_service_ready(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* RELOADING=1 before re-reading the config; follow with rt_service_ready(). */
void rt_service_reloading(void);
/* STOPPING=1: shutdown has begun. */
void rt_service_stopping(void);
/* STATUS=...: what the daemon is doing, shown by `systemctl status`. */
void rt_service_status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Whether the notifications go anywhere (a notify socket and libsystemd). */
int rt_service_managed(void);

#endif
