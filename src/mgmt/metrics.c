/*
 * Metrics: the Prometheus text exposition format (version 0.0.4, as
 * documented by prometheus.io "Exposition formats") of the core's I/O
 * statistics per namespace and per host, the namespaces' gauges
 * (capacity, allocated bytes, write protection, sanitize), the reactors'
 * busy time and the transports' session counts; and the same numbers as
 * JSON for the status page (/api/status).  Everything here runs on the
 * HTTP server's thread at scrape time: the data path only bumps its
 * sharded counters (core/stats.h), the sums are made here.
 */
#include "mgmt/metrics.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uuid/uuid.h>

#include "core/atomic.h"
#include "core/ns.h"
#include "core/stats.h"
#include "mgmt/mgmt.h"
#include "rt/reactor.h"

#ifndef SLATE_VERSION
#define SLATE_VERSION "0.1.0"
#endif

static struct timespec metrics_t0;

__attribute__((constructor)) static void metrics_record_start(void)
{
        clock_gettime(CLOCK_MONOTONIC, &metrics_t0);
}

static double uptime_s(void)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (double)(now.tv_sec - metrics_t0.tv_sec) +
               (double)(now.tv_nsec - metrics_t0.tv_nsec) / 1e9;
}

void mgmt_metrics_escape(FILE *f, const char *s)
{
        for (; *s; s++) {
                unsigned char c = (unsigned char)*s;
                if (c == '\\')
                        fputs("\\\\", f);
                else if (c == '"')
                        fputs("\\\"", f);
                else if (c == '\n')
                        fputs("\\n", f);
                else if (c < 0x20 || c >= 0x7f)
                        fputc('?', f); /* keeps the exposition valid UTF-8 whatever a peer sent */
                else
                        fputc(c, f);
        }
}

/* ---- families ---- */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ---- reactor counters (rt/reactor.h struct rt_stats) ---- */

static const struct {
        const char *name, *help;
        size_t off;
} rstat_fields[] = {
#define RSTAT(f, h)                                                                                \
        {                                                                                          \
#f, h, offsetof(struct rt_stats, f)                                                \
        }
    RSTAT(loops, "event loop turns"),
    RSTAT(enter_submit, "io_uring_enter calls that did not wait (submit, or reap only)"),
    RSTAT(enter_wait, "io_uring_enter calls that waited for a completion (sleeps)"),
    RSTAT(wakeups, "waits ended by a completion"),
    RSTAT(msg_wakeups, "wake-ups by another thread (messages, remote defers)"),
    RSTAT(polls, "non-blocking reaps instead of a sleep (reactor_poll)"),
    RSTAT(poll_hits, "non-blocking reaps that found a completion"),
    RSTAT(sqes, "io_uring submission queue entries submitted"),
    RSTAT(cqes, "io_uring completions reaped"),
    RSTAT(recv_calls, "recv system calls on connections"),
    RSTAT(recv_bytes, "bytes received on connections"),
    RSTAT(recv_eagain, "recv calls that found nothing (EAGAIN)"),
    RSTAT(send_calls, "sendmsg system calls on connections"),
    RSTAT(send_bytes, "bytes sent on connections"),
    RSTAT(send_eagain, "sendmsg calls that found the socket full (EAGAIN)"),
    RSTAT(zc_sends, "sendmsg calls with MSG_ZEROCOPY (options.zerocopy_send_min)"),
    RSTAT(zc_bytes, "bytes sent by zero-copy sendmsg calls"),
    RSTAT(zc_reaps, "zero-copy notifications read from sockets' error queues"),
    RSTAT(zc_notifs, "zero-copy sends the kernel notified as done"),
    RSTAT(zc_copied, "zero-copy sends the kernel copied after all (loopback, no NIC support)"),
    RSTAT(zc_nobufs, "zero-copy sends refused for lack of socket option memory, sent copied"),
#undef RSTAT
};

static uint64_t rstat_get(const struct rt_stats *s, size_t i)
{
        uint64_t v;
        memcpy(&v, (const char *)s + rstat_fields[i].off, sizeof(v));
        return v;
}

static void reactor_counters_text(FILE *f)
{
        unsigned n = rt_count();
        struct rt_stats *st = calloc(n ? n : 1, sizeof(*st));
        if (!st)
                return;
        for (unsigned r = 0; r < n; r++)
                rt_stats_read(r, &st[r]);
        for (size_t i = 0; i < sizeof(rstat_fields) / sizeof(rstat_fields[0]); i++) {
                char name[80];
                snprintf(name, sizeof(name), "slate_reactor_%s_total", rstat_fields[i].name);
                family(f, name, "counter", rstat_fields[i].help);
                for (unsigned r = 0; r < n; r++)
                        fprintf(f, "%s{reactor=\"%u\"} %llu\n", name, r,
                                (unsigned long long)rstat_get(&st[r], i));
        }
        family(f, "slate_reactor_copy_bytes_total", "counter",
               "bytes memcpy'd on the data path, per copy site");
        for (unsigned r = 0; r < n; r++)
                for (unsigned k = 0; k < RT_COPY_NR; k++)
                        fprintf(f,
                                "slate_reactor_copy_bytes_total{reactor=\"%u\",site=\"%s\"} %llu\n",
                                r, rt_copy_site_name((enum rt_copy_site)k),
                                (unsigned long long)st[r].copy_bytes[k]);
        family(f, "slate_reactor_commands_total", "counter",
               "commands completed (response queued), per transport");
        for (unsigned r = 0; r < n; r++)
                for (unsigned k = 0; k < RT_XPORT_NR; k++)
                        fprintf(
                            f,
                            "slate_reactor_commands_total{reactor=\"%u\",transport=\"%s\"} %llu\n",
                            r, rt_xport_name((enum rt_xport)k), (unsigned long long)st[r].cmds[k]);
        free(st);
}

static json_t *rstats_json(const struct rt_stats *s)
{
        json_t *o = json_object(), *cp = json_object(), *cm = json_object();
        for (size_t i = 0; i < sizeof(rstat_fields) / sizeof(rstat_fields[0]); i++)
                json_object_set_new(o, rstat_fields[i].name,
                                    json_integer((json_int_t)rstat_get(s, i)));
        for (unsigned k = 0; k < RT_COPY_NR; k++)
                json_object_set_new(cp, rt_copy_site_name((enum rt_copy_site)k),
                                    json_integer((json_int_t)s->copy_bytes[k]));
        for (unsigned k = 0; k < RT_XPORT_NR; k++)
                json_object_set_new(cm, rt_xport_name((enum rt_xport)k),
                                    json_integer((json_int_t)s->cmds[k]));
        json_object_set_new(o, "copy_bytes", cp);
        json_object_set_new(o, "commands", cm);
        return o;
}

json_t *mgmt_reactor_stats_json(void)
{
        json_t *root = json_object(), *arr = json_array();
        struct rt_stats tot, s;
        memset(&tot, 0, sizeof(tot));
        uint64_t busy = 0;
        for (unsigned r = 0; r < rt_count(); r++) {
                rt_stats_read(r, &s);
                uint64_t *a = (uint64_t *)&tot;
                const uint64_t *b = (const uint64_t *)&s;
                for (size_t k = 0; k < sizeof(s) / sizeof(uint64_t); k++)
                        a[k] += b[k];
                busy += rt_busy_ns(r);
                json_t *o = rstats_json(&s);
                json_object_set_new(o, "id", json_integer(r));
                json_object_set_new(o, "busy_ns", json_integer((json_int_t)rt_busy_ns(r)));
                json_array_append_new(arr, o);
        }
        json_t *t = rstats_json(&tot);
        json_object_set_new(t, "busy_ns", json_integer((json_int_t)busy));
        json_object_set_new(root, "reactors", arr);
        json_object_set_new(root, "total", t);
        return root;
}

/* The label set of one object: namespace="x" or transport="t",host="h". */
struct obj {
        const char *key1, *val1, *key2, *val2;
        struct core_stats_sum sum;
};

static void labels(FILE *f, const struct obj *o)
{
        fprintf(f, "%s=\"", o->key1);
        mgmt_metrics_escape(f, o->val1);
        fputc('"', f);
        if (o->key2) {
                fprintf(f, ",%s=\"", o->key2);
                mgmt_metrics_escape(f, o->val2);
                fputc('"', f);
        }
}

static void print_le(FILE *f, unsigned b)
{
        uint64_t le = core_lat_bucket_le_ns(b);
        if (le == UINT64_MAX)
                fputs("+Inf", f);
        else
                fprintf(f, "%.9g", (double)le / 1e9);
}

/* A counter family with one sample per object and operation class: ops or bytes. */
static void per_op_counter(FILE *f, const char *name, const char *help, const struct obj *objs,
                           size_t n, bool bytes)
{
        family(f, name, "counter", help);
        for (size_t i = 0; i < n; i++)
                for (unsigned c = 0; c < CORE_OPC_MAX; c++) {
                        fprintf(f, "%s{", name);
                        labels(f, &objs[i]);
                        fprintf(f, ",op=\"%s\"} %llu\n", core_op_class_name(c),
                                (unsigned long long)(bytes ? objs[i].sum.bytes[c]
                                                           : objs[i].sum.ops[c]));
                }
}

/*
 * The I/O families of one kind of object (prefix slate_namespace or
 * slate_host) for every object of that kind: each family's HELP/TYPE once,
 * then one sample per object (the format wants a family's samples together).
 */
static void io_families(FILE *f, const char *prefix, const char *what, const struct obj *objs,
                        size_t n)
{
        char name[96], help[160];

        snprintf(name, sizeof(name), "%s_ops_total", prefix);
        snprintf(help, sizeof(help),
                 "Commands of %s completed, by operation (failed ones included)", what);
        per_op_counter(f, name, help, objs, n, false);

        snprintf(name, sizeof(name), "%s_bytes_total", prefix);
        snprintf(help, sizeof(help), "Data bytes moved by successful commands of %s, by operation",
                 what);
        per_op_counter(f, name, help, objs, n, true);

        snprintf(name, sizeof(name), "%s_errors_total", prefix);
        snprintf(help, sizeof(help), "Commands of %s that failed, by core status", what);
        family(f, name, "counter", help);
        for (size_t i = 0; i < n; i++)
                for (unsigned e = 1; e < CORE_STATUS_MAX; e++) {
                        fprintf(f, "%s{", name);
                        labels(f, &objs[i]);
                        fprintf(f, ",status=\"%s\"} %llu\n", core_status_name(e),
                                (unsigned long long)objs[i].sum.errors[e]);
                }

        snprintf(name, sizeof(name), "%s_outstanding", prefix);
        snprintf(help, sizeof(help), "Commands of %s being executed now", what);
        family(f, name, "gauge", help);
        for (size_t i = 0; i < n; i++) {
                fprintf(f, "%s{", name);
                labels(f, &objs[i]);
                fprintf(f, "} %llu\n", (unsigned long long)core_stats_outstanding(&objs[i].sum));
        }

        snprintf(name, sizeof(name), "%s_latency_seconds", prefix);
        snprintf(help, sizeof(help),
                 "Time from submission to the block core to completion of commands of %s", what);
        family(f, name, "histogram", help);
        for (size_t i = 0; i < n; i++)
                for (unsigned c = 0; c < CORE_OPC_MAX; c++) {
                        uint64_t cum = 0;
                        for (unsigned b = 0; b < CORE_LAT_BUCKETS; b++) {
                                cum += objs[i].sum.lat[c][b];
                                fprintf(f, "%s_bucket{", name);
                                labels(f, &objs[i]);
                                fprintf(f, ",op=\"%s\",le=\"", core_op_class_name(c));
                                print_le(f, b);
                                fprintf(f, "\"} %llu\n", (unsigned long long)cum);
                        }
                        fprintf(f, "%s_sum{", name);
                        labels(f, &objs[i]);
                        fprintf(f, ",op=\"%s\"} %.9f\n", core_op_class_name(c),
                                (double)objs[i].sum.lat_sum_ns[c] / 1e9);
                        fprintf(f, "%s_count{", name);
                        labels(f, &objs[i]);
                        fprintf(f, ",op=\"%s\"} %llu\n", core_op_class_name(c),
                                (unsigned long long)cum);
                }
}

/* ---- collecting (under the registries' locks: copy, then print) ---- */

struct ns_snap {
        struct obj o;
        char name[CORE_NS_NAME_MAX];
        char backend[16];
        char uuid[37];
        uint64_t capacity;
        int64_t allocated; /* < 0: unknown */
        bool thin;
        uint32_t wp;
        enum core_sanitize_state san;
        uint16_t san_progress;
        const char *atomic_path;
        uint64_t atomic[6]; /* struct core_atomic_stats, in order */
};

struct host_snap {
        struct obj o;
        char transport[8];
        char name[CORE_HOST_NAME_MAX];
        unsigned sessions;
};

struct snap {
        struct ns_snap *ns;
        size_t nns, ns_cap;
        struct host_snap *hosts;
        size_t nhosts, hosts_cap;
        bool oom;
};

/* Room for one more element of size sz in *arr (n used of *cap): doubles it. */
static bool room(void **arr, size_t *cap, size_t n, size_t sz)
{
        if (n < *cap)
                return true;
        size_t c = *cap ? *cap * 2 : 16;
        void *p = realloc(*arr, c * sz);
        if (!p)
                return false;
        *arr = p;
        *cap = c;
        return true;
}

static void snap_ns(struct core_ns *ns, void *arg)
{
        struct snap *s = arg;
        if (!room((void **)&s->ns, &s->ns_cap, s->nns, sizeof(*s->ns))) {
                s->oom = true;
                return;
        }
        struct ns_snap *n = &s->ns[s->nns++];
        memset(n, 0, sizeof(*n));
        snprintf(n->name, sizeof(n->name), "%s", ns->name);
        snprintf(n->backend, sizeof(n->backend), "%s", ns->backend_name);
        uuid_unparse_lower(ns->uuid, n->uuid);
        n->capacity = core_ns_blocks(ns) << ns->block_shift;
        n->allocated = core_ns_allocated_bytes(ns);
        n->thin = ns->thin;
        n->wp = core_ns_wp(ns);
        n->san = core_ns_sanitize_state(ns);
        n->san_progress = atomic_load(&ns->san_progress);
        struct core_atomic_limits al;
        core_ns_atomic_limits(ns, &al);
        n->atomic_path = core_atomic_path_name(al.path);
        n->atomic[0] = atomic_load(&ns->atomic_stats.writes);
        n->atomic[1] = atomic_load(&ns->atomic_stats.journal_bytes);
        n->atomic[2] = atomic_load(&ns->atomic_stats.journal_syncs);
        n->atomic[3] = atomic_load(&ns->atomic_stats.checkpoints);
        n->atomic[4] = atomic_load(&ns->atomic_stats.replayed);
        n->atomic[5] = atomic_load(&ns->atomic_stats.discarded);
        core_stats_sum(&ns->stats, &n->o.sum);
}

static void snap_host(const struct core_host *h, void *arg)
{
        struct snap *s = arg;
        if (!room((void **)&s->hosts, &s->hosts_cap, s->nhosts, sizeof(*s->hosts))) {
                s->oom = true;
                return;
        }
        struct host_snap *n = &s->hosts[s->nhosts++];
        memset(n, 0, sizeof(*n));
        snprintf(n->transport, sizeof(n->transport), "%s", h->transport);
        snprintf(n->name, sizeof(n->name), "%s", h->name);
        n->sessions = h->refs;
        core_stats_sum(&h->stats, &n->o.sum);
}

static int cmp_ns(const void *a, const void *b)
{
        return strcmp(((const struct ns_snap *)a)->name, ((const struct ns_snap *)b)->name);
}

static int cmp_host(const void *a, const void *b)
{
        const struct host_snap *x = a, *y = b;
        int r = strcmp(x->transport, y->transport);
        return r ? r : strcmp(x->name, y->name);
}

static int take_snap(struct snap *s)
{
        memset(s, 0, sizeof(*s));
        core_ns_foreach(snap_ns, s);
        core_host_foreach(snap_host, s);
        if (s->oom) {
                free(s->ns);
                free(s->hosts);
                return -ENOMEM;
        }
        if (s->nns)
                qsort(s->ns, s->nns, sizeof(*s->ns), cmp_ns);
        if (s->nhosts)
                qsort(s->hosts, s->nhosts, sizeof(*s->hosts), cmp_host);
        /* Labels point into the snapshot (after sorting: the entries moved). */
        for (size_t i = 0; i < s->nns; i++) {
                s->ns[i].o.key1 = "namespace";
                s->ns[i].o.val1 = s->ns[i].name;
        }
        for (size_t i = 0; i < s->nhosts; i++) {
                s->hosts[i].o.key1 = "transport";
                s->hosts[i].o.val1 = s->hosts[i].transport;
                s->hosts[i].o.key2 = "host";
                s->hosts[i].o.val2 = s->hosts[i].name;
        }
        return 0;
}

static void free_snap(struct snap *s)
{
        free(s->ns);
        free(s->hosts);
}

/* Number of entries of an RPC list method's array result (sessions, controllers...). */
static size_t rpc_count(const char *method)
{
        json_t *res = NULL;
        int code;
        char err[128];
        size_t n = 0;
        if (mgmt_rpc_call(method, NULL, &res, &code, err, sizeof(err)) == 0 && json_is_array(res))
                n = json_array_size(res);
        json_decref(res);
        return n;
}

static const char *const san_names[] = {"never", "done", "running", "failed"};

char *mgmt_metrics_text(size_t *len)
{
        struct snap s;
        if (take_snap(&s) < 0)
                return NULL;
        char *buf = NULL;
        size_t sz = 0;
        FILE *f = open_memstream(&buf, &sz);
        if (!f) {
                free_snap(&s);
                return NULL;
        }

        family(f, "slate_build_info", "gauge", "Always 1; the version of slated");
        fprintf(f, "slate_build_info{version=\"%s\"} 1\n", SLATE_VERSION);
        family(f, "slate_uptime_seconds", "gauge", "Seconds since slated started");
        fprintf(f, "slate_uptime_seconds %.3f\n", uptime_s());

        family(f, "slate_reactor_busy_seconds_total", "counter",
               "Time each reactor thread spent working rather than waiting for events");
        for (unsigned i = 0; i < rt_count(); i++)
                fprintf(f, "slate_reactor_busy_seconds_total{reactor=\"%u\"} %.9f\n", i,
                        (double)rt_busy_ns(i) / 1e9);
        reactor_counters_text(f);

        /* Namespaces: what they are, then their I/O. */
        family(f, "slate_namespace_info", "gauge", "Always 1; a namespace's backend and identity");
        for (size_t i = 0; i < s.nns; i++) {
                fputs("slate_namespace_info{", f);
                labels(f, &s.ns[i].o);
                fprintf(f, ",backend=\"%s\",uuid=\"%s\",thin=\"%s\"} 1\n", s.ns[i].backend,
                        s.ns[i].uuid, s.ns[i].thin ? "true" : "false");
        }
        family(f, "slate_namespace_capacity_bytes", "gauge", "Capacity of the namespace");
        for (size_t i = 0; i < s.nns; i++) {
                fputs("slate_namespace_capacity_bytes{", f);
                labels(f, &s.ns[i].o);
                fprintf(f, "} %llu\n", (unsigned long long)s.ns[i].capacity);
        }
        family(f, "slate_namespace_allocated_bytes", "gauge",
               "Bytes the backend has allocated for the namespace (file: blocks of the sparse "
               "file); absent when the backend cannot tell");
        for (size_t i = 0; i < s.nns; i++) {
                if (s.ns[i].allocated < 0)
                        continue;
                fputs("slate_namespace_allocated_bytes{", f);
                labels(f, &s.ns[i].o);
                fprintf(f, "} %lld\n", (long long)s.ns[i].allocated);
        }
        family(f, "slate_namespace_write_protected", "gauge",
               "1 when the namespace refuses writes, for any reason");
        for (size_t i = 0; i < s.nns; i++) {
                fputs("slate_namespace_write_protected{", f);
                labels(f, &s.ns[i].o);
                fprintf(f, "} %d\n", s.ns[i].wp != 0);
        }
        family(f, "slate_namespace_sanitize_state", "gauge",
               "1 for the state of the namespace's most recent sanitize operation");
        for (size_t i = 0; i < s.nns; i++)
                for (unsigned st = 0; st < 4; st++) {
                        fputs("slate_namespace_sanitize_state{", f);
                        labels(f, &s.ns[i].o);
                        fprintf(f, ",state=\"%s\"} %d\n", san_names[st],
                                (unsigned)s.ns[i].san == st);
                }
        family(f, "slate_namespace_sanitize_progress_ratio", "gauge",
               "Progress of the running sanitize operation, 0 to 1 (0 when none runs)");
        for (size_t i = 0; i < s.nns; i++) {
                fputs("slate_namespace_sanitize_progress_ratio{", f);
                labels(f, &s.ns[i].o);
                fprintf(f, "} %.6f\n",
                        s.ns[i].san == CORE_SAN_RUNNING ? s.ns[i].san_progress / 65536.0 : 0.0);
        }
        /* Atomic writes (core/atomic.c): the path, then the engine's counters. */
        family(f, "slate_namespace_atomic_path", "gauge",
               "Always 1; how the namespace makes writes atomic (journal, native, object, order, "
               "none)");
        for (size_t i = 0; i < s.nns; i++) {
                fputs("slate_namespace_atomic_path{", f);
                labels(f, &s.ns[i].o);
                fprintf(f, ",path=\"%s\"} 1\n", s.ns[i].atomic_path);
        }
        static const char *const atomic_fam[6][2] = {
            {"slate_namespace_atomic_writes_total", "Atomic writes completed by the engine"},
            {"slate_namespace_atomic_journal_bytes_total",
             "Bytes written to the atomic-write intent journal"},
            {"slate_namespace_atomic_journal_syncs_total",
             "Syncs of the atomic-write journal (one per group commit)"},
            {"slate_namespace_atomic_checkpoints_total",
             "Data syncs that retired atomic-write journal records"},
            {"slate_namespace_atomic_replayed_records",
             "Journal records replayed at the last open (crash recovery)"},
            {"slate_namespace_atomic_discarded_records",
             "Torn journal records discarded at the last open"},
        };
        for (unsigned k = 0; k < 6; k++) {
                family(f, atomic_fam[k][0], k < 4 ? "counter" : "gauge", atomic_fam[k][1]);
                for (size_t i = 0; i < s.nns; i++) {
                        fprintf(f, "%s{", atomic_fam[k][0]);
                        labels(f, &s.ns[i].o);
                        fprintf(f, "} %llu\n", (unsigned long long)s.ns[i].atomic[k]);
                }
        }
        struct obj *objs = calloc(s.nns + s.nhosts + 1, sizeof(*objs));
        if (objs) {
                for (size_t i = 0; i < s.nns; i++)
                        objs[i] = s.ns[i].o;
                io_families(f, "slate_namespace", "the namespace", objs, s.nns);

                family(f, "slate_host_sessions", "gauge",
                       "iSCSI sessions or NVMe controllers the host has open now");
                for (size_t i = 0; i < s.nhosts; i++) {
                        fputs("slate_host_sessions{", f);
                        labels(f, &s.hosts[i].o);
                        fprintf(f, "} %u\n", s.hosts[i].sessions);
                }
                for (size_t i = 0; i < s.nhosts; i++)
                        objs[i] = s.hosts[i].o;
                io_families(f, "slate_host", "the host", objs, s.nhosts);
                free(objs);
        }

        family(f, "slate_iscsi_sessions", "gauge", "iSCSI sessions logged in now");
        fprintf(f, "slate_iscsi_sessions %zu\n", rpc_count("iscsi_session_list"));
        family(f, "slate_nvme_controllers", "gauge",
               "NVMe controllers (I/O and discovery) connected now");
        fprintf(f, "slate_nvme_controllers %zu\n", rpc_count("nvmf_ctrl_list"));

        bool bad = ferror(f) || !objs;
        fclose(f);
        free_snap(&s);
        if (bad) {
                free(buf);
                return NULL;
        }
        *len = sz;
        return buf;
}

/* ---- JSON for the status page ---- */

static json_t *sum_json(const struct core_stats_sum *sum)
{
        json_t *o = json_object(), *ops = json_object(), *bytes = json_object(),
               *lat = json_object(), *hist = json_object(), *errs = json_object();
        for (unsigned c = 0; c < CORE_OPC_MAX; c++) {
                const char *k = core_op_class_name(c);
                json_object_set_new(ops, k, json_integer((json_int_t)sum->ops[c]));
                json_object_set_new(bytes, k, json_integer((json_int_t)sum->bytes[c]));
                json_object_set_new(lat, k, json_integer((json_int_t)sum->lat_sum_ns[c]));
                json_t *b = json_array();
                for (unsigned i = 0; i < CORE_LAT_BUCKETS; i++)
                        json_array_append_new(b, json_integer((json_int_t)sum->lat[c][i]));
                json_object_set_new(hist, k, b);
        }
        for (unsigned e = 1; e < CORE_STATUS_MAX; e++)
                if (sum->errors[e])
                        json_object_set_new(errs, core_status_name(e),
                                            json_integer((json_int_t)sum->errors[e]));
        json_object_set_new(o, "ops", ops);
        json_object_set_new(o, "bytes", bytes);
        json_object_set_new(o, "latency_sum_ns", lat);
        json_object_set_new(o, "latency_buckets", hist);
        json_object_set_new(o, "errors", errs);
        json_object_set_new(o, "outstanding",
                            json_integer((json_int_t)core_stats_outstanding(sum)));
        return o;
}

/* An RPC list method's result, or an empty array. */
static json_t *rpc_list(const char *method)
{
        json_t *res = NULL;
        int code;
        char err[128];
        if (mgmt_rpc_call(method, NULL, &res, &code, err, sizeof(err)) == 0 && res)
                return res;
        json_decref(res);
        return json_array();
}

json_t *mgmt_status_json(void)
{
        struct snap s;
        if (take_snap(&s) < 0)
                return NULL;
        json_t *root = json_object();
        json_t *nss = json_array(), *hosts = json_array(), *reactors = json_array();
        json_t *le = json_array();
        for (unsigned b = 0; b + 1 < CORE_LAT_BUCKETS; b++)
                json_array_append_new(le, json_real((double)core_lat_bucket_le_ns(b) / 1e9));
        for (unsigned i = 0; i < rt_count(); i++)
                json_array_append_new(reactors, json_pack("{s:i, s:I}", "id", (int)i, "busy_ns",
                                                          (json_int_t)rt_busy_ns(i)));
        for (size_t i = 0; i < s.nns; i++) {
                struct ns_snap *n = &s.ns[i];
                json_t *o =
                    json_pack("{s:s, s:s, s:s, s:I, s:b, s:b, s:s, s:f, s:o}", "name", n->name,
                              "backend", n->backend, "uuid", n->uuid, "capacity_bytes",
                              (json_int_t)n->capacity, "thin", n->thin, "write_protected",
                              n->wp != 0, "sanitize", san_names[n->san & 3], "sanitize_progress",
                              n->san == CORE_SAN_RUNNING ? n->san_progress / 65536.0 : 0.0, "stats",
                              sum_json(&n->o.sum));
                if (o && n->allocated >= 0)
                        json_object_set_new(o, "allocated_bytes", json_integer(n->allocated));
                json_array_append_new(nss, o);
        }
        for (size_t i = 0; i < s.nhosts; i++) {
                struct host_snap *h = &s.hosts[i];
                /* Peer-supplied names: json_string refuses invalid UTF-8, so escape as for metrics.
                 */
                char *name = NULL;
                size_t nlen = 0;
                FILE *f = open_memstream(&name, &nlen);
                if (f) {
                        for (const char *p = h->name; *p; p++)
                                fputc((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f ? '?'
                                                                                            : *p,
                                      f);
                        fclose(f);
                }
                json_array_append_new(hosts,
                                      json_pack("{s:s, s:s, s:i, s:o}", "transport", h->transport,
                                                "name", name ? name : "?", "sessions",
                                                (int)h->sessions, "stats", sum_json(&h->o.sum)));
                free(name);
        }
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        json_object_set_new(root, "version", json_string(SLATE_VERSION));
        json_object_set_new(root, "uptime_s", json_real(uptime_s()));
        json_object_set_new(root, "time_ns",
                            json_integer((json_int_t)now.tv_sec * 1000000000 + now.tv_nsec));
        json_object_set_new(root, "latency_bucket_le_s", le);
        json_object_set_new(root, "reactors", reactors);
        json_object_set_new(root, "namespaces", nss);
        json_object_set_new(root, "hosts", hosts);
        json_object_set_new(root, "iscsi",
                            json_pack("{s:o, s:o, s:o}", "targets", rpc_list("iscsi_target_list"),
                                      "portals", rpc_list("iscsi_portal_list"), "sessions",
                                      rpc_list("iscsi_session_list")));
        json_object_set_new(
            root, "nvmf",
            json_pack("{s:o, s:o, s:o}", "subsystems", rpc_list("nvmf_subsystem_list"), "listeners",
                      rpc_list("nvmf_listener_list"), "controllers", rpc_list("nvmf_ctrl_list")));
        free_snap(&s);
        return root;
}
