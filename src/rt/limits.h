/*
 * What a peer that never finishes, or never says anything, may hold
 * (README "Security and limits").  Set once at start-up from the config's
 * "options" (before any reactor runs), read by the transports.
 */
#ifndef RT_LIMITS_H
#define RT_LIMITS_H

#include <stdatomic.h>
#include <stdint.h>

/* Defaults: what Linux's nvmet and LIO allow a login (15 s), and a minute for discovery. */
#define RT_LOGIN_TIMEOUT_DEFAULT_MS 15000u
#define RT_IDLE_TIMEOUT_DEFAULT_MS  60000u
#define RT_TIMEOUT_MAX_MS           3600000u

struct rt_limits {
        /*
         * From accept to a finished login: the iSCSI login phase (the Final
         * Login Response into full feature phase), the NVMe/TCP ICReq and the
         * Connect of that queue.  A connection not there by then is closed.
         * 0 = no limit.
         */
        _Atomic uint32_t login_timeout_ms;
        /*
         * A discovery session (iSCSI SessionType=Discovery, an NVMe discovery
         * controller without keep-alive) with no command for this long is
         * closed.  0 = no limit.
         */
        _Atomic uint32_t idle_timeout_ms;
};
extern struct rt_limits rt_limits;

/*
 * Raise the soft RLIMIT_NOFILE to the hard limit (every connection is a
 * descriptor; the soft limit is often 1024).  Returns the limit now in
 * effect, and logs what it did.
 */
unsigned long rt_limits_raise_nofile(void);

#endif
