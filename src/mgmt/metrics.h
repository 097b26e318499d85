/*
 * The metrics endpoint's text and the status page's JSON (mgmt/metrics.c),
 * and the HTTP server that serves them (mgmt/http.c).
 */
#ifndef MGMT_METRICS_H
#define MGMT_METRICS_H

#include <stddef.h>
#include <stdio.h>

struct json_t;

/* The Prometheus text exposition of every metric (malloc'd, *len bytes), NULL on ENOMEM. */
char *mgmt_metrics_text(size_t *len);
/* Write s as a Prometheus label value (without the quotes): \ " and newline escaped. */
void mgmt_metrics_escape(FILE *f, const char *s);
/*
 * The reactors' counters (rt/reactor.h struct rt_stats) as JSON (new
 * reference): {"reactors": [{"id", "busy_ns", counters...}], "total": {...}}.
 */
struct json_t *mgmt_reactor_stats_json(void);
/* The status page's data (new reference), NULL on ENOMEM. */
struct json_t *mgmt_status_json(void);

/*
 * Parse an HTTP listen address: "PORT" (on 127.0.0.1), "ADDR:PORT" or
 * "[IPv6]:PORT"; port 0 lets the kernel pick.  0 or -EINVAL.
 */
int mgmt_http_parse_listen(const char *s, char *addr, size_t addrlen, unsigned *port);

/*
 * Start the HTTP server (libmicrohttpd, its own thread) on listen (as
 * above): GET /metrics, /api/status and / (the status page); nothing else,
 * nothing that changes state.  0 or -errno with a message in err.
 */
int mgmt_http_start(const char *listen, char *err, size_t errlen);
void mgmt_http_stop(void);
/* The address and port bound (port 0: not running). */
unsigned mgmt_http_port(void);
const char *mgmt_http_addr(void);

#endif
