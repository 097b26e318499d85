/*
 * slatectl: the command-line client of slated's JSON-RPC 2.0 socket
 * (methods and parameters: docs/config.md).
 *
 *   slatectl [-s SOCK] [--json] METHOD [key=value ...]
 *   slatectl [-s SOCK] METHOD --json '{"name": "disk1", ...}'
 *   slatectl [-s SOCK] top [--once | --iterations N] [--interval SECS]
 *   slatectl [-s SOCK] progress NAME [--once] [--interval SECS]
 *   slatectl [-s SOCK] flash name=NAME [placement=ID]   (flash_stats as a table)
 *   slatectl [-s SOCK] element NAME ID ok|degraded|failed|depopulated [HEALTH]
 *   slatectl [-s SOCK] media NAME [mark|clear LBA [BLOCKS]]
 *
 * key=value values that look like integers or booleans are sent as JSON
 * numbers/booleans (key:=JSON sends raw JSON, key=str forces nothing else).
 * List-style results (namespaces, pools, targets, portals, sessions,
 * subsystems, listeners, controllers, status, reload steps) print as
 * tables for people; --json (before the method, or after it without a
 * '{...}' argument) prints the JSON result for scripts, as every other
 * method does.  An RPC error prints its message and exits 1.  top and
 * progress: see tools/slatectl-view.c.
 */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "slatectl.h"

#define DEFAULT_SOCK "./state/slated.sock"
/* The packaged service's socket (slate.service RuntimeDirectory=slate). */
#define SERVICE_SOCK "/run/slate/slated.sock"
#define MAX_RESPONSE (64u << 20)

/* Used when the daemon is not reachable; the daemon's own rpc_list is authoritative. */
static const char *const builtin_methods[] = {
    "namespace_create",    "namespace_delete",
    "namespace_list",      "iscsi_target_create",
    "iscsi_target_delete", "iscsi_target_list",
    "iscsi_lun_map",       "iscsi_lun_unmap",
    "iscsi_portal_add",    "iscsi_portal_delete",
    "iscsi_portal_list",   "iscsi_session_list",
    "config_save",         "rpc_list",
    "daemon_status",       "log_set_level",
    "flash_stats",
};

/* Short names for the common calls. */
static const struct {
        const char *alias, *method;
} aliases[] = {
    {"status", "daemon_status"},
    {"ns", "namespace_list"},
    {"targets", "iscsi_target_list"},
    {"portals", "iscsi_portal_list"},
    {"sessions", "iscsi_session_list"},
    {"acl", "iscsi_acl_list"},
    {"save", "config_save"},
    {"methods", "rpc_list"},
    {"flash", "flash_stats"},
};

static double timeout_s = 30;

static int rpc_connect(const char *path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (strlen(path) >= sizeof(sa.sun_path)) {
                fprintf(stderr, "slatectl: socket path too long: %s\n", path);
                return -1;
        }
        memcpy(sa.sun_path, path, strlen(path));
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        struct timeval tv = {.tv_sec = (time_t)timeout_s,
                             .tv_usec =
                                 (suseconds_t)((timeout_s - (double)(time_t)timeout_s) * 1e6)};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = errno;
                close(fd);
                errno = e;
                return -1;
        }
        return fd;
}

/* Send one request and return the parsed response (new reference), or NULL with a message. */
json_t *slatectl_rpc(const char *sock, json_t *req, bool quiet)
{
        int fd = rpc_connect(sock);
        if (fd < 0) {
                if (!quiet)
                        fprintf(stderr,
                                "slatectl: cannot connect to %s: %s (is slated running? -s SOCK)\n",
                                sock, strerror(errno));
                return NULL;
        }
        char *text = json_dumps(req, JSON_COMPACT);
        json_t *resp = NULL;
        char *buf = NULL;
        if (!text)
                goto out;
        size_t len = strlen(text), off = 0;
        while (off < len) {
                ssize_t n = send(fd, text + off, len - off, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        if (!quiet)
                                fprintf(stderr, "slatectl: send: %s\n", strerror(errno));
                        goto out;
                }
                off += (size_t)n;
        }
        (void)!send(fd, "\n", 1, MSG_NOSIGNAL);

        size_t cap = 65536, have = 0;
        buf = malloc(cap);
        for (;;) {
                if (!buf)
                        goto out;
                if (have == cap) {
                        if (cap >= MAX_RESPONSE) {
                                fprintf(stderr, "slatectl: response too large\n");
                                goto out;
                        }
                        char *nb = realloc(buf, cap * 2);
                        if (!nb)
                                goto out;
                        buf = nb;
                        cap *= 2;
                }
                ssize_t n = recv(fd, buf + have, cap - have, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        if (!quiet)
                                fprintf(stderr, "slatectl: no answer from %s: %s\n", sock,
                                        errno == EAGAIN ? "timed out" : strerror(errno));
                        goto out;
                }
                have += (size_t)n;
                json_error_t je;
                resp = json_loadb(buf, have, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &je);
                if (resp)
                        break;
                if (n == 0 || json_error_code(&je) != json_error_premature_end_of_input) {
                        if (!quiet)
                                fprintf(stderr, "slatectl: bad response from daemon: %s\n",
                                        je.text);
                        goto out;
                }
        }
out:
        free(buf);
        free(text);
        close(fd);
        return resp;
}

json_t *slatectl_call(const char *sock, const char *method, json_t *params)
{
        json_t *req = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id", 1, "method", method,
                                "params", params ? params : json_object());
        json_t *resp = req ? slatectl_rpc(sock, req, false) : NULL;
        json_decref(req);
        json_t *r = json_incref(json_object_get(resp, "result"));
        json_t *e = json_object_get(resp, "error");
        if (e)
                fprintf(stderr, "slatectl: %s: %s\n", method,
                        json_string_value(json_object_get(e, "message")));
        json_decref(resp);
        return r;
}

/* "42" -> 42, "true" -> true, "null" -> null, else a string.  Leading zeros stay strings. */
static json_t *guess_value(const char *s)
{
        if (strcmp(s, "true") == 0)
                return json_true();
        if (strcmp(s, "false") == 0)
                return json_false();
        if (strcmp(s, "null") == 0)
                return json_null();
        const char *d = s[0] == '-' ? s + 1 : s;
        if (d[0] && strspn(d, "0123456789") == strlen(d) && !(d[0] == '0' && d[1])) {
                char *end;
                errno = 0;
                long long v = strtoll(s, &end, 10);
                if (!errno && !*end)
                        return json_integer(v);
        }
        return json_string(s);
}

static void usage(FILE *f)
{
        fprintf(f,
                "usage: slatectl [-s SOCK] [-t SECONDS] [--json] METHOD [key=value ...]\n"
                "       slatectl [-s SOCK] METHOD --json '{...}'\n"
                "       slatectl [-s SOCK] top [--once | --iterations N] [--interval SECS]\n"
                "       slatectl [-s SOCK] progress NAME [--once] [--interval SECS]\n"
                "       slatectl [-s SOCK] element NAME ID ok|degraded|failed|depopulated "
                "[HEALTH]\n"
                "       slatectl [-s SOCK] media NAME [mark|clear LBA [BLOCKS]]\n"
                "  -s SOCK     slated RPC socket (default $SLATE_RPC_SOCK, else " DEFAULT_SOCK
                " if it\n"
                "              exists, else the service's " SERVICE_SOCK ")\n"
                "  -t SECONDS  answer timeout (default 30)\n"
                "  -j, --json  print the JSON result (default: tables for list methods)\n"
                "  top         live per-namespace and per-host IOPS, bandwidth, latency (q quits)\n"
                "  progress    a namespace's sanitize progress bar with an ETA, until it ends\n"
                "  element     element_set with positional arguments (fail/heal/depopulate)\n"
                "  media       a namespace's media state (elements, unrecoverable blocks,\n"
                "              counters); mark/clear: media_mark\n"
                "  key=value   integers/true/false/null become JSON values, the rest strings\n"
                "  key:=JSON   a raw JSON value, e.g. luns:='[0,1]'\n"
                "  aliases: ");
        for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
                fprintf(f, "%s%s=%s", i ? ", " : "", aliases[i].alias, aliases[i].method);
        fprintf(f, "\n");
}

static void print_methods(const char *sock)
{
        json_t *req = json_pack("{s:s, s:i, s:s, s:{s:b}}", "jsonrpc", "2.0", "id", 1, "method",
                                "rpc_list", "params", "verbose", 1);
        json_t *resp = req ? slatectl_rpc(sock, req, true) : NULL;
        json_decref(req);
        json_t *list = json_object_get(resp, "result");
        if (json_is_array(list)) {
                printf("\nmethods (from slated):\n");
                size_t i;
                json_t *m;
                json_array_foreach(list, i, m)
                {
                        printf("  %-22s %s\n", json_string_value(json_object_get(m, "name")),
                               json_string_value(json_object_get(m, "desc")));
                        size_t j;
                        json_t *p;
                        json_array_foreach(json_object_get(m, "params"), j, p)
                        {
                                bool req = json_is_true(json_object_get(p, "required"));
                                printf("      %s%s=<%s>%s  %s\n", req ? "" : "[",
                                       json_string_value(json_object_get(p, "name")),
                                       json_string_value(json_object_get(p, "type")),
                                       req ? "" : "]",
                                       json_string_value(json_object_get(p, "desc")));
                        }
                }
        } else {
                printf("\nmethods (built-in list; slated not reachable at %s):\n", sock);
                for (size_t i = 0; i < sizeof(builtin_methods) / sizeof(builtin_methods[0]); i++)
                        printf("  %s\n", builtin_methods[i]);
        }
        json_decref(resp);
}

int main(int argc, char **argv)
{
        static const struct option longopts[] = {
            {"socket", required_argument, NULL, 's'},
            {"timeout", required_argument, NULL, 't'},
            {"json", no_argument, NULL, 'j'},
            {"help", no_argument, NULL, 'h'},
            {NULL, 0, NULL, 0},
        };
        const char *sock = getenv("SLATE_RPC_SOCK");
        if (!sock || !sock[0])
                sock = access(DEFAULT_SOCK, F_OK) != 0 && access(SERVICE_SOCK, F_OK) == 0
                           ? SERVICE_SOCK
                           : DEFAULT_SOCK;
        int c;
        bool json_out = false;
        /* '+': stop at the method so its key=value arguments are not taken as options. */
        while ((c = getopt_long(argc, argv, "+s:t:jh", longopts, NULL)) != -1) {
                switch (c) {
                case 'j':
                        json_out = true;
                        break;
                case 's':
                        sock = optarg;
                        break;
                case 't':
                        timeout_s = atof(optarg);
                        if (timeout_s <= 0)
                                timeout_s = 30;
                        break;
                case 'h':
                        usage(stdout);
                        print_methods(sock);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind >= argc) {
                usage(stderr);
                return 2;
        }

        /* Method: aliases, and '-' accepted for '_' (namespace-create). */
        char method[128];
        snprintf(method, sizeof(method), "%s", argv[optind++]);
        for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
                if (strcmp(method, aliases[i].alias) == 0)
                        snprintf(method, sizeof(method), "%s", aliases[i].method);
        for (char *p = method; *p; p++)
                if (*p == '-')
                        *p = '_';
        /* "slatectl fault set|clear|list ..." is fault_set|fault_clear|fault_list. */
        if (strcmp(method, "fault") == 0 && optind < argc && strchr(argv[optind], '=') == NULL &&
            argv[optind][0] != '-')
                snprintf(method, sizeof(method), "fault_%.100s", argv[optind++]);
        if (strcmp(method, "top") == 0)
                return slatectl_top(sock, argc - optind + 1, argv + optind - 1);
        if (strcmp(method, "progress") == 0)
                return slatectl_progress(sock, argc - optind + 1, argv + optind - 1);

        json_t *params = json_object();
        /* The failing-media conveniences: positional arguments to element_set / media_mark. */
        const char *show_media = NULL;
        if (strcmp(method, "element") == 0 || strcmp(method, "media") == 0) {
                bool el = method[0] == 'e';
                int n = argc - optind;
                if ((el && (n < 3 || n > 4)) || (!el && n != 1 && n != 3 && n != 4) ||
                    (!el && n > 1 && strcmp(argv[optind + 1], "mark") &&
                     strcmp(argv[optind + 1], "clear"))) {
                        usage(stderr);
                        return 2;
                }
                json_object_set_new(params, "name", json_string(argv[optind]));
                if (el) {
                        json_object_set_new(params, "element", guess_value(argv[optind + 1]));
                        json_object_set_new(params, "state", json_string(argv[optind + 2]));
                        if (n == 4)
                                json_object_set_new(params, "health",
                                                    guess_value(argv[optind + 3]));
                        snprintf(method, sizeof(method), "element_set");
                } else if (n == 1) {
                        show_media = argv[optind];
                        json_object_clear(params);
                        snprintf(method, sizeof(method), "namespace_list");
                        json_out = true;
                } else {
                        json_object_set_new(params, "bad",
                                            json_boolean(strcmp(argv[optind + 1], "mark") == 0));
                        json_object_set_new(params, "lba", guess_value(argv[optind + 2]));
                        if (n == 4)
                                json_object_set_new(params, "blocks",
                                                    guess_value(argv[optind + 3]));
                        snprintf(method, sizeof(method), "media_mark");
                }
                optind = argc;
        }
        for (int i = optind; i < argc; i++) {
                const char *a = argv[i];
                if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
                        usage(stdout);
                        print_methods(sock);
                        return 0;
                }
                if (strcmp(a, "--json") == 0 || strcmp(a, "-j") == 0) {
                        /* "--json '{...}'" gives the params; a bare --json asks for JSON out. */
                        if (i + 1 >= argc || argv[i + 1][0] != '{' || a[1] == 'j') {
                                json_out = true;
                                continue;
                        }
                        json_error_t je;
                        json_t *o = json_loads(argv[++i], 0, &je);
                        if (!json_is_object(o)) {
                                fprintf(stderr, "slatectl: --json: %s\n",
                                        o ? "params must be a JSON object" : je.text);
                                return 2;
                        }
                        json_object_update(params, o);
                        json_decref(o);
                        continue;
                }
                const char *eq = strchr(a, '=');
                if (!eq || eq == a) {
                        fprintf(stderr, "slatectl: expected key=value, got '%s'\n", a);
                        return 2;
                }
                bool raw = eq[-1] == ':';
                char key[128];
                size_t klen = (size_t)(eq - a) - (raw ? 1 : 0);
                if (klen == 0 || klen >= sizeof(key)) {
                        fprintf(stderr, "slatectl: bad key in '%s'\n", a);
                        return 2;
                }
                memcpy(key, a, klen);
                key[klen] = '\0';
                json_t *v;
                if (raw) {
                        json_error_t je;
                        v = json_loads(eq + 1, JSON_DECODE_ANY, &je);
                        if (!v) {
                                fprintf(stderr, "slatectl: %s: bad JSON: %s\n", key, je.text);
                                return 2;
                        }
                } else {
                        v = guess_value(eq + 1);
                }
                json_object_set_new(params, key, v);
        }

        json_t *req = json_pack("{s:s, s:i, s:s, s:o}", "jsonrpc", "2.0", "id", 1, "method", method,
                                "params", params);
        if (!req)
                return 1;
        json_t *resp = slatectl_rpc(sock, req, false);
        json_decref(req);
        if (!resp)
                return 1;
        int rc = 0;
        json_t *e = json_object_get(resp, "error");
        json_t *r = json_object_get(resp, "result");
        if (e) {
                fprintf(stderr, "slatectl: %s: %s (code %lld)\n", method,
                        json_string_value(json_object_get(e, "message")),
                        (long long)json_integer_value(json_object_get(e, "code")));
                rc = 1;
        } else if (r && show_media) {
                /* media NAME: that namespace's "media" member of namespace_list. */
                json_t *m = NULL, *x;
                size_t i;
                json_array_foreach(
                    r, i, x) if (strcmp(json_string_value(json_object_get(x, "name")) ?: "",
                                        show_media) == 0) m = json_object_get(x, "media");
                char *s = m ? json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
                if (s)
                        printf("%s\n", s);
                else
                        fprintf(stderr, "slatectl: media: no namespace %s\n", show_media);
                rc = s ? 0 : 1;
                free(s);
        } else if (r) {
                if (json_out || slatectl_table(method, r) < 0) {
                        char *s =
                            json_dumps(r, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
                        if (s)
                                printf("%s\n", s);
                        free(s);
                }
        } else {
                fprintf(stderr, "slatectl: malformed response\n");
                rc = 1;
        }
        json_decref(resp);
        return rc;
}
