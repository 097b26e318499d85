/*
 * Service-manager notifications through libsystemd's sd_notify (see
 * rt/service.h).  The protocol itself (a datagram of NAME=VALUE lines to
 * $NOTIFY_SOCKET) is libsystemd's; this file only words the messages.
 */
#include "rt/service.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef SLATE_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

int rt_service_managed(void)
{
#ifdef SLATE_HAVE_SYSTEMD
        const char *s = getenv("NOTIFY_SOCKET");
        return s && s[0];
#else
        return 0;
#endif
}

#ifdef SLATE_HAVE_SYSTEMD
/* prefix + STATUS=<formatted text>, one datagram. */
static void notify_status(const char *prefix, const char *fmt, va_list ap)
{
        char status[512];
        vsnprintf(status, sizeof(status), fmt, ap);
        /* unset_environment=0: the reactors never fork, and a reload notifies again. */
        sd_notifyf(0, "%sSTATUS=%s", prefix, status);
}
#endif

void rt_service_ready(const char *fmt, ...)
{
#ifdef SLATE_HAVE_SYSTEMD
        va_list ap;
        va_start(ap, fmt);
        notify_status("READY=1\n", fmt, ap);
        va_end(ap);
#else
        (void)fmt;
#endif
}

void rt_service_status(const char *fmt, ...)
{
#ifdef SLATE_HAVE_SYSTEMD
        va_list ap;
        va_start(ap, fmt);
        notify_status("", fmt, ap);
        va_end(ap);
#else
        (void)fmt;
#endif
}

void rt_service_reloading(void)
{
#ifdef SLATE_HAVE_SYSTEMD
        sd_notify(0, "RELOADING=1\nSTATUS=reloading the configuration");
#endif
}

void rt_service_stopping(void)
{
#ifdef SLATE_HAVE_SYSTEMD
        sd_notify(0, "STOPPING=1\nSTATUS=shutting down");
#endif
}
