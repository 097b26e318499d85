/*
 * What a peer that never finishes, or never says anything, may hold
 * (README "Security and limits").  Set once at start-up from the config's
 * "options" (before any reactor runs), read by the transports.
 */
#ifndef RT_LIMITS_H
#define RT_LIMITS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Defaults: what Linux's nvmet and LIO allow a login (15 s), and a minute for discovery. */
#define RT_LOGIN_TIMEOUT_DEFAULT_MS 15000u
#define RT_IDLE_TIMEOUT_DEFAULT_MS  60000u
#define RT_TIMEOUT_MAX_MS           3600000u
/* iSCSI NOP-In pings of quiet normal sessions (RFC 7143 11.19); idle RPC clients. */
#define RT_NOP_INTERVAL_DEFAULT_MS 15000u
#define RT_NOP_TIMEOUT_DEFAULT_MS  30000u
#define RT_RPC_IDLE_DEFAULT_MS     60000u
/* Connection caps (both transports together), defaults: generous for hosts, bounded for floods. */
#define RT_MAX_CONNECTIONS_DEFAULT          16384u
#define RT_MAX_CONNECTIONS_PER_HOST_DEFAULT 4096u
#define RT_MAX_CONNECTIONS_LIMIT            1048576u

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
        /*
         * Open iSCSI and NVMe/TCP connections at once, in all and from one
         * source address; a connection beyond either is closed at accept
         * (rate-limited log line).  0 = no cap.
         */
        _Atomic uint32_t max_connections;
        _Atomic uint32_t max_connections_per_host;
        /*
         * A logged-in normal iSCSI session with nothing outstanding and no
         * PDU for nop_interval_ms gets a NOP-In asking for an answer; with no
         * NOP-Out answer within nop_timeout_ms the connection is closed.
         * 0 = no pings / wait forever.
         */
        _Atomic uint32_t nop_interval_ms;
        _Atomic uint32_t nop_timeout_ms;
        /* An RPC client with no request for this long is disconnected.  0 = never. */
        _Atomic uint32_t rpc_idle_timeout_ms;
};
extern struct rt_limits rt_limits;

/* A connection's place in the caps, held from admission to release. */
struct rt_conn_slot {
        int bucket; /* -1: not counted */
};
/*
 * Count the connection on fd (accepted, peer known) against the caps: 0 and
 * the slot to release when it closes, or -EUSERS (the global cap) /
 * -EMFILE (its host's cap) and a reason in why; the caller closes fd.
 */
int rt_conn_admit(int fd, struct rt_conn_slot *slot, char *why, size_t whylen);
void rt_conn_release(struct rt_conn_slot *slot);
/* Connections counted now (tests, status). */
unsigned rt_conn_count(void);

/*
 * Raise the soft RLIMIT_NOFILE to the hard limit (every connection is a
 * descriptor; the soft limit is often 1024).  Returns the limit now in
 * effect, and logs what it did.
 */
unsigned long rt_limits_raise_nofile(void);

#endif
