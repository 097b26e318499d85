/*
 * The HTTP server of slated (libmicrohttpd, https://www.gnu.org/software/
 * libmicrohttpd/): GET /metrics (Prometheus text format 0.0.4), GET
 * /api/status (the status page's JSON) and GET / (the status page itself,
 * one self-contained HTML file).  Off unless configured (options
 * http_listen, slated --http); read only: no method but GET and HEAD, no
 * path but these three.  libmicrohttpd runs it on its own internal thread,
 * never on a reactor: a scrape only reads the core's sharded counters.
 *
 * We bind the listening socket ourselves and hand it to libmicrohttpd, so
 * that a port in use is reported with its errno and port 0 tells us the
 * port the kernel picked.
 */
#include "mgmt/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rt/log.h"

#define HTTP_MAX_CONNECTIONS 32
#define HTTP_TIMEOUT_S       10

/* The status page (status.html, embedded at build time by tools/embed.py). */
extern const unsigned char mgmt_status_html[];
extern const size_t mgmt_status_html_len;

static struct MHD_Daemon *daemon_;
static char bound_addr[INET6_ADDRSTRLEN];
static unsigned bound_port;

int mgmt_http_parse_listen(const char *s, char *addr, size_t addrlen, unsigned *port)
{
        const char *p;
        size_t alen;
        if (!s || !*s)
                return -EINVAL;
        if (s[0] == '[') {
                const char *end = strchr(s, ']');
                if (!end || end[1] != ':')
                        return -EINVAL;
                alen = (size_t)(end - s - 1);
                if (alen == 0 || alen >= addrlen)
                        return -EINVAL;
                memcpy(addr, s + 1, alen);
                addr[alen] = '\0';
                p = end + 2;
        } else if ((p = strrchr(s, ':')) != NULL) {
                alen = (size_t)(p - s);
                if (alen == 0 || alen >= addrlen || memchr(s, ':', alen))
                        return -EINVAL; /* an IPv6 address needs brackets */
                memcpy(addr, s, alen);
                addr[alen] = '\0';
                p++;
        } else {
                if (addrlen < sizeof("127.0.0.1"))
                        return -EINVAL;
                strcpy(addr, "127.0.0.1");
                p = s;
        }
        if (!*p || strlen(p) > 5)
                return -EINVAL;
        unsigned v = 0;
        for (; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                v = v * 10 + (unsigned)(*p - '0');
        }
        if (v > 65535)
                return -EINVAL;
        unsigned char buf[sizeof(struct in6_addr)];
        if (inet_pton(AF_INET, addr, buf) != 1 && inet_pton(AF_INET6, addr, buf) != 1)
                return -EINVAL;
        *port = v;
        return 0;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type, void *body,
                             size_t len, enum MHD_ResponseMemoryMode mode)
{
        struct MHD_Response *r = MHD_create_response_from_buffer(len, body, mode);
        if (!r) {
                if (mode == MHD_RESPMEM_MUST_FREE)
                        free(body);
                return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
        if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
                MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        if (strncmp(type, "text/html", 9) == 0)
                /*
                 * The page may talk to slated only: no other origin for
                 * anything, so it can make no request elsewhere even if it
                 * tried (the test checks this too).
                 */
                MHD_add_response_header(r, "Content-Security-Policy",
                                        "default-src 'none'; script-src 'unsafe-inline'; "
                                        "style-src 'unsafe-inline'; connect-src 'self'; "
                                        "img-src 'self' data:; base-uri 'none'; "
                                        "form-action 'none'; frame-ancestors 'none'");
        enum MHD_Result rc = MHD_queue_response(c, code, r);
        MHD_destroy_response(r);
        return rc;
}

static enum MHD_Result text(struct MHD_Connection *c, unsigned code, const char *msg)
{
        return reply(c, code, "text/plain; charset=utf-8", (void *)msg, strlen(msg),
                     MHD_RESPMEM_PERSISTENT);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_len, void **req_cls)
{
        (void)cls;
        (void)version;
        (void)upload;
        (void)req_cls;
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
                return text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "read only: GET or HEAD\n");
        if (*upload_len) /* a GET with a body: not ours to read */
                return text(c, MHD_HTTP_BAD_REQUEST, "unexpected request body\n");
        if (strcmp(url, "/metrics") == 0) {
                size_t len = 0;
                char *body = mgmt_metrics_text(&len);
                if (!body)
                        return text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
                return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body, len,
                             MHD_RESPMEM_MUST_FREE);
        }
        if (strcmp(url, "/api/status") == 0) {
                json_t *j = mgmt_status_json();
                char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
                json_decref(j);
                if (!body)
                        return text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
                return reply(c, MHD_HTTP_OK, "application/json", body, strlen(body),
                             MHD_RESPMEM_MUST_FREE);
        }
        if (strcmp(url, "/") == 0 || strcmp(url, "/index.html") == 0)
                return reply(c, MHD_HTTP_OK, "text/html; charset=utf-8", (void *)mgmt_status_html,
                             mgmt_status_html_len, MHD_RESPMEM_PERSISTENT);
        return text(c, MHD_HTTP_NOT_FOUND, "not found: /metrics, /api/status or /\n");
}

static int bind_listen(const char *addr, unsigned port, char *err, size_t errlen)
{
        struct sockaddr_storage ss;
        socklen_t sl;
        memset(&ss, 0, sizeof(ss));
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET, addr, &sin->sin_addr) == 1) {
                sin->sin_family = AF_INET;
                sin->sin_port = htons((uint16_t)port);
                sl = sizeof(*sin);
        } else if (inet_pton(AF_INET6, addr, &sin6->sin6_addr) == 1) {
                sin6->sin6_family = AF_INET6;
                sin6->sin6_port = htons((uint16_t)port);
                sl = sizeof(*sin6);
        } else {
                snprintf(err, errlen, "HTTP listen address '%s' is not a numeric IP address", addr);
                return -EINVAL;
        }
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                goto fail;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ss.ss_family == AF_INET6)
                setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 64) < 0 ||
            getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
                goto fail;
        bound_port = ntohs(ss.ss_family == AF_INET ? sin->sin_port : sin6->sin6_port);
        snprintf(bound_addr, sizeof(bound_addr), "%s", addr);
        return fd;
fail:;
        int e = errno;
        if (fd >= 0)
                close(fd);
        snprintf(err, errlen, "HTTP listen on %s:%u: %s", addr, port, strerror(e));
        return -e;
}

int mgmt_http_start(const char *listen_on, char *err, size_t errlen)
{
        char addr[INET6_ADDRSTRLEN];
        unsigned port;
        if (daemon_) {
                snprintf(err, errlen, "the HTTP server already runs");
                return -EBUSY;
        }
        if (mgmt_http_parse_listen(listen_on, addr, sizeof(addr), &port) < 0) {
                snprintf(err, errlen,
                         "HTTP listen '%.80s': want PORT, ADDR:PORT or [IPv6]:PORT (numeric "
                         "address, port 0-65535)",
                         listen_on ? listen_on : "");
                return -EINVAL;
        }
        int fd = bind_listen(addr, port, err, errlen);
        if (fd < 0)
                return fd;
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
        if (strchr(addr, ':'))
                flags |= MHD_USE_IPv6;
        daemon_ = MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL, MHD_OPTION_LISTEN_SOCKET, fd,
                                   MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_MAX_CONNECTIONS,
                                   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT_S,
                                   MHD_OPTION_END);
        if (!daemon_) {
                close(fd);
                bound_port = 0;
                snprintf(err, errlen, "HTTP server on %s:%u: libmicrohttpd did not start", addr,
                         port);
                return -EIO;
        }
        LOG_INFO("mgmt", "HTTP metrics and status page listening on %s%s%s:%u",
                 strchr(addr, ':') ? "[" : "", addr, strchr(addr, ':') ? "]" : "", bound_port);
        return 0;
}

void mgmt_http_stop(void)
{
        if (!daemon_)
                return;
        MHD_stop_daemon(daemon_); /* closes the listening socket it was given */
        daemon_ = NULL;
        bound_port = 0;
        bound_addr[0] = '\0';
}

unsigned mgmt_http_port(void)
{
        return bound_port;
}

const char *mgmt_http_addr(void)
{
        return bound_addr;
}
