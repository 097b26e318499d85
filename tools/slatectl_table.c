/*
 * slatectl's tables: the list-style RPC results as aligned columns for
 * people (--json keeps the JSON for scripts).  A column is a header and a
 * function that renders one cell of one row; widths fit the widest cell.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slatectl.h"

#define CELL 256

typedef void (*cell_fn)(char *out, json_t *row, const char *key);

struct col {
        const char *head;
        const char *key; /* dotted path into the row */
        cell_fn fn;
};

static json_t *path_get(json_t *o, const char *path)
{
        char buf[128];
        snprintf(buf, sizeof(buf), "%s", path);
        for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && o;
             k = strtok_r(NULL, ".", &save))
                o = json_object_get(o, k);
        return o;
}

void slatectl_bytes(char *buf, size_t len, uint64_t v)
{
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
        unsigned u = 0;
        double d = (double)v;
        while (d >= 1024 && u < 5) {
                d /= 1024;
                u++;
        }
        if (u == 0)
                snprintf(buf, len, "%" PRIu64 " B", v);
        else
                snprintf(buf, len, d == (double)(uint64_t)d ? "%.0f %s" : "%.1f %s", d, units[u]);
}

static void c_any(char *out, json_t *row, const char *key)
{
        json_t *v = path_get(row, key);
        if (json_is_string(v))
                snprintf(out, CELL, "%s", json_string_value(v));
        else if (json_is_integer(v))
                snprintf(out, CELL, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        else if (json_is_real(v))
                snprintf(out, CELL, "%.1f", json_real_value(v));
        else if (json_is_boolean(v))
                snprintf(out, CELL, "%s", json_is_true(v) ? "yes" : "no");
        else
                snprintf(out, CELL, "-");
}

static void c_bytes(char *out, json_t *row, const char *key)
{
        json_t *v = path_get(row, key);
        if (json_is_integer(v))
                slatectl_bytes(out, CELL, (uint64_t)json_integer_value(v));
        else
                snprintf(out, CELL, "-");
}

/* An array of strings joined by ",", or "-". */
static void c_list(char *out, json_t *row, const char *key)
{
        size_t i, n = 0;
        json_t *x;
        out[0] = '\0';
        json_array_foreach(path_get(row, key), i, x)
        {
                const char *s = json_is_string(x) ? json_string_value(x) : "?";
                n += (size_t)snprintf(out + n, CELL > n ? CELL - n : 0, "%s%s", i ? "," : "", s);
                if (n >= CELL)
                        break;
        }
        if (!out[0])
                snprintf(out, CELL, "-");
}

/* [{"lun"|"nsid": N, "namespace"|"name": "x"}] -> "0=x,1=y" */
static void c_map(char *out, json_t *row, const char *key)
{
        size_t i, n = 0;
        json_t *x;
        out[0] = '\0';
        json_array_foreach(path_get(row, key), i, x)
        {
                json_t *id = json_object_get(x, "lun");
                if (!id)
                        id = json_object_get(x, "nsid");
                json_t *nm = json_object_get(x, "namespace");
                if (!nm)
                        nm = json_object_get(x, "name");
                n += (size_t)snprintf(
                    out + n, CELL > n ? CELL - n : 0, "%s%" JSON_INTEGER_FORMAT "=%s", i ? "," : "",
                    json_integer_value(id), json_is_string(nm) ? json_string_value(nm) : "?");
                if (n >= CELL)
                        break;
        }
        if (!out[0])
                snprintf(out, CELL, "-");
}

/* A namespace's state: ready/stopped, write protection, a running sanitize. */
static void c_nsstate(char *out, json_t *row, const char *key)
{
        json_t *st = path_get(row, key);
        char wp[CELL];
        c_list(wp, st, "write_protect");
        wp[64] = '\0'; /* a handful of reason names */
        const char *san = json_string_value(json_object_get(st, "sanitize"));
        const char *ready = json_string_value(json_object_get(st, "ready"));
        if (san && strcmp(san, "running") == 0)
                snprintf(out, CELL, "sanitizing %.0f%%",
                         100 * json_number_value(json_object_get(st, "sanitize_progress")));
        else if (strcmp(wp, "-") != 0)
                snprintf(out, CELL, "%.32s wp:%.64s", ready ? ready : "?", wp);
        else
                snprintf(out, CELL, "%s", ready ? ready : "?");
}

static void c_ops(char *out, json_t *row, const char *key)
{
        json_t *v = path_get(row, key);
        snprintf(out, CELL, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
}

static const struct col ns_cols[] = {
    {"NAME", "name", c_any},
    {"BACKEND", "backend", c_any},
    {"SIZE", "size", c_bytes},
    {"BS", "block_size", c_any},
    {"THIN", "thin", c_any},
    {"USED", "provisioning.mapped_bytes", c_bytes},
    {"WCE", "write_cache", c_any},
    {"STATE", "state", c_nsstate},
    {"MAPPED", "mapped", c_any},
    {"READS", "stats.read_ops", c_ops},
    {"WRITES", "stats.write_ops", c_ops},
    {"READ", "stats.read_bytes", c_bytes},
    {"WRITTEN", "stats.write_bytes", c_bytes},
    {NULL, NULL, NULL},
};
static const struct col pool_cols[] = {
    {"DIR", "dir", c_any},
    {"LIMIT", "limit", c_bytes},
    {"MAPPED", "mapped_bytes", c_bytes},
    {"AVAILABLE", "available_bytes", c_bytes},
    {"NAMESPACES", "namespaces", c_any},
    {NULL, NULL, NULL},
};
static const struct col target_cols[] = {
    {"TARGET", "name", c_any},
    {"LUNS", "luns", c_map},
    {"SESSIONS", "sessions", c_any},
    {NULL, NULL, NULL},
};
static const struct col addr_cols[] = {
    {"ADDR", "addr", c_any},
    {"PORT", "port", c_any},
    {NULL, NULL, NULL},
};
static const struct col session_cols[] = {
    {"INITIATOR", "initiator", c_any},
    {"ISID", "isid", c_any},
    {"TSIH", "tsih", c_any},
    {"TARGET", "target", c_any},
    {"TYPE", "type", c_any},
    {"CONNS", "connections", c_any},
    {"DIGEST", "params.HeaderDigest", c_any},
    {NULL, NULL, NULL},
};
static const struct col subsys_cols[] = {
    {"NQN", "nqn", c_any},
    {"TYPE", "subtype", c_any},
    {"SERIAL", "serial_number", c_any},
    {"ANY HOST", "allow_any_host", c_any},
    {"HOSTS", "hosts", c_list},
    {"NAMESPACES", "namespaces", c_map},
    {"CTRLS", "controllers", c_any},
    {NULL, NULL, NULL},
};
static const struct col listener_cols[] = {
    {"TRTYPE", "trtype", c_any},
    {"ADDR", "addr", c_any},
    {"PORT", "port", c_any},
    {NULL, NULL, NULL},
};
static const struct col ctrl_cols[] = {
    {"SUBSYSTEM", "subnqn", c_any},   {"CNTLID", "cntlid", c_any},
    {"HOST", "hostnqn", c_any},       {"QUEUES", "queues", c_any},
    {"KATO MS", "kato_ms", c_any},    {"READS", "host_reads", c_any},
    {"WRITES", "host_writes", c_any}, {NULL, NULL, NULL},
};
static const struct col fault_cols[] = {
    {"ID", "id", c_any},
    {"KIND", "kind", c_any},
    {"NAMESPACE", "namespace", c_any},
    {"HOST", "host", c_any},
    {"TRANSPORT", "transport", c_any},
    {"OPS", "ops", c_any},
    {"STATUS", "status", c_any},
    {"LATENCY US", "latency_us", c_any},
    {"PER MILLE", "per_mille", c_any},
    {"EVERY", "every", c_any},
    {"AFTER", "after", c_any},
    {"ARMED", "armed", c_any},
    {"SEEN", "seen", c_any},
    {"HITS", "hits", c_any},
    {NULL, NULL, NULL},
};
static const struct col step_cols[] = {
    {"METHOD", "method", c_any},
    {"PARAMS", "params_text", c_any},
    {NULL, NULL, NULL},
};

static void print_table(const struct col *cols, json_t *rows)
{
        size_t ncol = 0, nrow = json_array_size(rows);
        while (cols[ncol].head)
                ncol++;
        char(*cells)[CELL] = calloc((nrow + 1) * ncol, CELL);
        size_t *w = calloc(ncol, sizeof(*w));
        if (!cells || !w) {
                free(cells);
                free(w);
                return;
        }
        for (size_t c = 0; c < ncol; c++) {
                snprintf(cells[c], CELL, "%s", cols[c].head);
                w[c] = strlen(cols[c].head);
        }
        for (size_t r = 0; r < nrow; r++)
                for (size_t c = 0; c < ncol; c++) {
                        char *cell = cells[(r + 1) * ncol + c];
                        cols[c].fn(cell, json_array_get(rows, r), cols[c].key);
                        if (strlen(cell) > w[c])
                                w[c] = strlen(cell);
                }
        for (size_t r = 0; r <= nrow; r++) {
                for (size_t c = 0; c < ncol; c++)
                        printf("%-*s%s", c + 1 < ncol ? (int)w[c] : 0, cells[r * ncol + c],
                               c + 1 < ncol ? "  " : "");
                printf("\n");
        }
        free(cells);
        free(w);
}

/* daemon_status and other objects: "key: value", nested objects indented. */
static void print_kv(json_t *o, int indent)
{
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v)
        {
                if (json_is_object(v)) {
                        printf("%*s%s:\n", indent, "", k);
                        print_kv(v, indent + 2);
                        continue;
                }
                char cell[CELL];
                json_t *wrap = json_pack("{s:O}", "v", v);
                if (strstr(k, "bytes"))
                        c_bytes(cell, wrap, "v");
                else
                        c_any(cell, wrap, "v");
                json_decref(wrap);
                printf("%*s%-*s %s\n", indent, "", 16 - indent, k, cell);
        }
}

int slatectl_table(const char *method, json_t *r)
{
        static const struct {
                const char *method;
                const struct col *cols;
        } tables[] = {
            {"namespace_list", ns_cols},
            {"pool_list", pool_cols},
            {"iscsi_target_list", target_cols},
            {"iscsi_portal_list", addr_cols},
            {"iscsi_session_list", session_cols},
            {"nvmf_subsystem_list", subsys_cols},
            {"nvmf_listener_list", listener_cols},
            {"nvmf_ctrl_list", ctrl_cols},
            {"fault_list", fault_cols},
        };
        for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
                if (strcmp(method, tables[i].method) == 0 && json_is_array(r)) {
                        print_table(tables[i].cols, r);
                        return 0;
                }
        }
        if (strcmp(method, "daemon_status") == 0 && json_is_object(r)) {
                print_kv(r, 0);
                return 0;
        }
        if (strcmp(method, "rpc_list") == 0 && json_is_array(r) &&
            json_is_string(json_array_get(r, 0))) {
                size_t i;
                json_t *x;
                json_array_foreach(r, i, x) printf("%s\n", json_string_value(x));
                return 0;
        }
        if (strcmp(method, "config_reload") == 0 && json_is_object(r)) {
                json_t *steps = json_object_get(r, "steps");
                size_t i;
                json_t *x;
                json_array_foreach(steps, i, x)
                {
                        char *t = json_dumps(json_object_get(x, "params"), JSON_COMPACT);
                        json_object_set_new(x, "params_text", json_string(t ? t : "?"));
                        free(t);
                }
                printf("%s: %" JSON_INTEGER_FORMAT " change%s%s\n",
                       json_string_value(json_object_get(r, "path")),
                       json_integer_value(json_object_get(r, "changes")),
                       json_integer_value(json_object_get(r, "changes")) == 1 ? "" : "s",
                       json_is_true(json_object_get(r, "dry_run")) ? " (dry run: not applied)"
                                                                   : " applied");
                if (json_array_size(steps))
                        print_table(step_cols, steps);
                return 0;
        }
        return -1;
}
