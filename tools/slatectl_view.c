/*
 * slatectl's live views.
 *
 * top: every interval, the counters of every namespace and host from the
 * stats_get RPC (the same sums the status page plots), shown as rates over
 * the interval — IOPS, MiB/s and mean latency per read and write — with
 * the outstanding commands and the totals since start.  On a terminal it
 * redraws in place (ANSI home + clear) and reads keys raw: q or Ctrl-C
 * leaves and restores the terminal.  --once prints one sample (over one
 * interval) and --iterations N that many, plainly, for scripts and tests.
 *
 * progress: a namespace's sanitize, or the copies running into it (the
 * copy.active_* counters), as a bar with an ETA (from the rate seen since
 * the bar first showed), polling namespace_list until it ends.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "slatectl.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
        (void)sig;
        stop = 1;
}

static double now_s(void)
{
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

struct view_opts {
        bool once;
        long iterations; /* 0: until q / Ctrl-C */
        double interval;
        const char *name; /* progress */
};

static int parse_view_args(const char *what, int argc, char **argv, struct view_opts *o)
{
        o->once = false;
        o->iterations = 0;
        o->interval = 1.0;
        o->name = NULL;
        for (int i = 1; i < argc; i++) {
                const char *a = argv[i];
                if (strcmp(a, "--once") == 0) {
                        o->once = true;
                        o->iterations = 1;
                } else if ((strcmp(a, "--iterations") == 0 || strcmp(a, "-n") == 0) &&
                           i + 1 < argc) {
                        o->iterations = strtol(argv[++i], NULL, 10);
                        if (o->iterations < 1) {
                                fprintf(stderr, "slatectl %s: --iterations wants N >= 1\n", what);
                                return -1;
                        }
                } else if ((strcmp(a, "--interval") == 0 || strcmp(a, "-i") == 0) && i + 1 < argc) {
                        o->interval = atof(argv[++i]);
                        if (o->interval < 0.05 || o->interval > 3600) {
                                fprintf(stderr, "slatectl %s: --interval wants 0.05..3600 s\n",
                                        what);
                                return -1;
                        }
                } else if (a[0] != '-' && !o->name) {
                        o->name = a;
                } else {
                        fprintf(stderr, "slatectl %s: unexpected argument '%s'\n", what, a);
                        return -1;
                }
        }
        return 0;
}

/* Raw keys on a terminal so q works without Enter; restored on every exit path. */
static struct termios saved_tio;
static bool tio_saved;

static void term_raw(void)
{
        struct termios t;
        if (!isatty(0) || tcgetattr(0, &saved_tio) < 0)
                return;
        t = saved_tio;
        t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        if (tcsetattr(0, TCSANOW, &t) == 0)
                tio_saved = true;
}

static void term_restore(void)
{
        if (tio_saved)
                tcsetattr(0, TCSANOW, &saved_tio);
        tio_saved = false;
}

static void catch_signals(void)
{
        struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: poll returns EINTR */
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
}

/* Wait one interval; on a terminal, a 'q' key ends the view.  false = stop. */
static bool wait_interval(double secs, bool keys)
{
        double end = now_s() + secs;
        while (!stop) {
                double left = end - now_s();
                if (left <= 0)
                        return true;
                struct pollfd p = {.fd = 0, .events = POLLIN};
                int n = poll(keys ? &p : NULL, keys ? 1 : 0, (int)(left * 1000) + 1);
                if (n < 0 && errno != EINTR)
                        return false;
                if (n > 0 && keys) {
                        char ch;
                        ssize_t r = read(0, &ch, 1);
                        if (r == 1 && (ch == 'q' || ch == 'Q' || ch == 3))
                                return false;
                        if (r == 0)
                                keys = false; /* stdin closed */
                }
        }
        return false;
}

static uint64_t jget(json_t *o, const char *a, const char *b)
{
        json_t *v = json_object_get(json_object_get(o, a), b);
        return json_is_integer(v) ? (uint64_t)json_integer_value(v) : 0;
}

static uint64_t errors_of(json_t *stats)
{
        uint64_t n = 0;
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(stats, "errors"), k, v) n +=
            (uint64_t)json_integer_value(v);
        return n;
}

/* One row: rates of cur over prev (NULL: no earlier sample, rates 0). */
static void top_row(const char *label, int width, const char *extra, json_t *cur, json_t *prev,
                    double dt)
{
        json_t *s = json_object_get(cur, "stats"), *p = json_object_get(prev, "stats");
        double iops[2], mibs[2], lat[2];
        static const char *const cls[2] = {"read", "write"};
        for (int i = 0; i < 2; i++) {
                uint64_t ops = jget(s, "ops", cls[i]), pops = p ? jget(p, "ops", cls[i]) : ops;
                uint64_t by = jget(s, "bytes", cls[i]), pby = p ? jget(p, "bytes", cls[i]) : by;
                uint64_t la = jget(s, "latency_sum_ns", cls[i]);
                uint64_t pla = p ? jget(p, "latency_sum_ns", cls[i]) : la;
                uint64_t dops = ops >= pops ? ops - pops : 0;
                iops[i] = dt > 0 ? (double)dops / dt : 0;
                mibs[i] = dt > 0 ? (double)(by >= pby ? by - pby : 0) / dt / (1 << 20) : 0;
                lat[i] = dops ? (double)(la >= pla ? la - pla : 0) / (double)dops / 1000 : 0;
        }
        json_t *out = json_object_get(s, "outstanding");
        printf("%-*s %s%9.0f %9.0f %8.1f %8.1f %9.1f %9.1f %5" JSON_INTEGER_FORMAT " %10" PRIu64
               " %10" PRIu64 " %6" PRIu64 "\n",
               width, label, extra, iops[0], iops[1], mibs[0], mibs[1], lat[0], lat[1],
               json_integer_value(out), jget(s, "ops", "read"), jget(s, "ops", "write"),
               errors_of(s));
}

static json_t *find_by(json_t *arr, const char *k1, const char *v1, const char *k2, const char *v2)
{
        size_t i;
        json_t *x;
        json_array_foreach(arr, i, x)
        {
                const char *a = json_string_value(json_object_get(x, k1));
                const char *b = k2 ? json_string_value(json_object_get(x, k2)) : NULL;
                if (a && strcmp(a, v1) == 0 && (!k2 || (b && strcmp(b, v2) == 0)))
                        return x;
        }
        return NULL;
}

static void top_draw(json_t *cur, json_t *prev, double dt, bool screen)
{
        json_t *nss = json_object_get(cur, "namespaces"), *hosts = json_object_get(cur, "hosts");
        size_t i;
        json_t *x;
        int w = 9;
        json_array_foreach(nss, i, x)
        {
                int l = (int)strlen(json_string_value(json_object_get(x, "name")));
                w = l > w ? l : w;
        }
        json_array_foreach(hosts, i, x)
        {
                int l = (int)strlen(json_string_value(json_object_get(x, "name"))) + 6;
                w = l > w ? l : w;
        }
        if (w > 60)
                w = 60;
        if (screen)
                printf("\033[H\033[2J");
        printf("slated %s, up %.0f s; rates over %.1f s%s\n\n",
               json_string_value(json_object_get(cur, "version")),
               json_number_value(json_object_get(cur, "uptime_s")), dt, screen ? "; q quits" : "");
        static const char *const cols = "%9s %9s %8s %8s %9s %9s %5s %10s %10s %6s\n";
        printf("%-*s ", w, "NAMESPACE");
        printf(cols, "R-IOPS", "W-IOPS", "R-MiB/s", "W-MiB/s", "R-LAT-us", "W-LAT-us", "QD",
               "READS", "WRITES", "ERRORS");
        json_array_foreach(nss, i, x)
        {
                const char *n = json_string_value(json_object_get(x, "name"));
                top_row(n, w, "", x,
                        prev ? find_by(json_object_get(prev, "namespaces"), "name", n, NULL, NULL)
                             : NULL,
                        dt);
        }
        printf("\n%-*s ", w, "HOST");
        printf(cols, "R-IOPS", "W-IOPS", "R-MiB/s", "W-MiB/s", "R-LAT-us", "W-LAT-us", "QD",
               "READS", "WRITES", "ERRORS");
        json_array_foreach(hosts, i, x)
        {
                const char *n = json_string_value(json_object_get(x, "name"));
                const char *t = json_string_value(json_object_get(x, "transport"));
                char label[300];
                snprintf(label, sizeof(label), "%s %s", t, n);
                top_row(label, w, "", x,
                        prev ? find_by(json_object_get(prev, "hosts"), "name", n, "transport", t)
                             : NULL,
                        dt);
        }
        fflush(stdout);
}

int slatectl_top(const char *sock, int argc, char **argv)
{
        struct view_opts o;
        if (parse_view_args("top", argc, argv, &o) < 0)
                return 2;
        bool screen = isatty(1) && !o.once && o.iterations == 0;
        catch_signals();
        json_t *prev = slatectl_call(sock, "stats_get", NULL);
        if (!prev)
                return 1;
        double tprev = now_s();
        if (screen)
                term_raw();
        int rc = 0;
        for (long i = 0; !o.iterations || i < o.iterations; i++) {
                if (!wait_interval(o.interval, screen))
                        break;
                json_t *cur = slatectl_call(sock, "stats_get", NULL);
                if (!cur) {
                        rc = 1;
                        break;
                }
                double t = now_s();
                if (i && !screen)
                        printf("\n");
                top_draw(cur, prev, t - tprev, screen);
                json_decref(prev);
                prev = cur;
                tprev = t;
        }
        term_restore();
        json_decref(prev);
        return rc;
}

static void fmt_eta(char *buf, size_t len, double s)
{
        if (s < 0 || s > 360000)
                snprintf(buf, len, "--:--");
        else
                snprintf(buf, len, "%d:%02d:%02d", (int)s / 3600, (int)s / 60 % 60, (int)s % 60);
}

/* One bar line: what, fraction p, ETA from the rate since this kind of bar first showed. */
static void progress_bar(const char *name, const char *what, double p, double *p0, double *t0,
                         bool tty)
{
        double t = now_s();
        if (p < 0)
                p = 0;
        if (p > 1)
                p = 1;
        if (*p0 < 0) {
                *p0 = p;
                *t0 = t;
        }
        double eta = p > *p0 && t > *t0 ? (1 - p) * (t - *t0) / (p - *p0) : -1;
        char etas[32], bar[41];
        fmt_eta(etas, sizeof(etas), eta);
        int fill = (int)(p * 40 + 0.5);
        for (int k = 0; k < 40; k++)
                bar[k] = k < fill ? '#' : '.';
        bar[40] = '\0';
        printf("%s%s: %s [%s] %5.1f%%  ETA %s%s", tty ? "\r" : "", name, what, bar, p * 100, etas,
               tty ? "" : "\n");
        fflush(stdout);
}

int slatectl_progress(const char *sock, int argc, char **argv)
{
        struct view_opts o;
        if (parse_view_args("progress", argc, argv, &o) < 0)
                return 2;
        if (!o.name) {
                fprintf(stderr, "usage: slatectl progress NAME [--once] [--interval SECS]\n");
                return 2;
        }
        catch_signals();
        bool tty = isatty(1);
        double st0 = now_s(), sp0 = -1, ct0 = st0, cp0 = -1;
        bool copy_seen = false;
        int rc = 0;
        for (long i = 0;; i++) {
                json_t *list = slatectl_call(sock, "namespace_list", NULL);
                if (!list)
                        return 1;
                json_t *ns = find_by(list, "name", o.name, NULL, NULL);
                if (!ns) {
                        fprintf(stderr, "slatectl progress: no namespace %s\n", o.name);
                        json_decref(list);
                        return 1;
                }
                json_t *st = json_object_get(ns, "state");
                const char *san = json_string_value(json_object_get(st, "sanitize"));
                json_t *cp = json_object_get(ns, "copy");
                double cbytes = (double)json_integer_value(json_object_get(cp, "active_bytes"));
                double cdone = (double)json_integer_value(json_object_get(cp, "active_done"));
                if (san && strcmp(san, "running") == 0) {
                        double p = json_number_value(json_object_get(st, "sanitize_progress"));
                        progress_bar(o.name, "sanitize", p, &sp0, &st0, tty);
                } else if (cbytes > 0) {
                        /* Copies into NAME running now (all of them, as one bar). */
                        copy_seen = true;
                        progress_bar(o.name, "copy", cdone / cbytes, &cp0, &ct0, tty);
                } else {
                        if (copy_seen)
                                printf("%s%s: copy done\n", tty ? "\n" : "", o.name);
                        else
                                printf("%s%s: sanitize %s\n", tty && i ? "\n" : "", o.name,
                                       san ? san : "?");
                        rc = san && strcmp(san, "failed") == 0 ? 1 : 0;
                        json_decref(list);
                        break;
                }
                json_decref(list);
                if (o.once) {
                        if (tty)
                                printf("\n");
                        break;
                }
                if (!wait_interval(o.interval, false)) {
                        if (tty)
                                printf("\n");
                        break;
                }
        }
        return rc;
}
