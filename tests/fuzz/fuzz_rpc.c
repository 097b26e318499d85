/*
 * libFuzzer target for the JSON-RPC dispatcher (src/mgmt/rpc.c): arbitrary
 * bytes go through mgmt_rpc_handle(), which must answer every input with a
 * JSON-RPC response (or nothing, for notifications) and never crash, leak
 * or hang.  Inputs that would touch the host outside the sandbox (a
 * "path" anywhere, the file backend, portals that bind real ports, ANA
 * "peers" that would be probed over the network) are parsed but not
 * dispatched; everything created (namespaces, targets, fault rules) is
 * torn down after each input so runs stay independent.  Every input is
 * also a peer list for core_ana_peers_parse (ana_peers_set, reload):
 * what parses must format back to text that parses to the same peers.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ana.h"
#include "core/fault.h"
#include "core/ns.h"
#include "iscsi/iscsi.h"
#include "mgmt/mgmt.h"
#include "rt/log.h"
#include "rt/reactor.h"

static char state_dir[] = "/tmp/slate-fuzz-rpc-XXXXXX";

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        rt_log_threshold = RT_LOG_ERR;
        if (!mkdtemp(state_dir))
                abort();
        core_set_state_dir(state_dir);
        if (rt_init(1) < 0 || rt_start() < 0 || iscsi_init() < 0)
                abort();
        return 0;
}

/* Does any key or string in v name something with side effects outside the sandbox? */
static int unsafe(json_t *v)
{
        const char *k;
        json_t *x;
        size_t i;
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                json_object_foreach(v, k, x)
                {
                        if (strstr(k, "path") || strcmp(k, "peers") == 0 || unsafe(x))
                                return 1;
                }
                return 0;
        case JSON_ARRAY:
                json_array_foreach(v, i, x) if (unsafe(x)) return 1;
                return 0;
        case JSON_STRING: {
                const char *s = json_string_value(v);
                return strcmp(s, "file") == 0 || strstr(s, "portal") != NULL;
        }
        default:
                return 0;
        }
}

static void collect_ns(struct core_ns *ns, void *arg)
{
        json_array_append_new((json_t *)arg, json_string(ns->name));
}

/* Remove every target and namespace the input created. */
static void reset_state(void)
{
        char err[256];
        json_t *t = iscsi_targets_json();
        size_t i;
        json_t *x;
        json_array_foreach(t, i, x)
        {
                json_t *n = json_object_get(x, "name");
                if (!json_is_string(n))
                        n = json_object_get(x, "iqn");
                if (json_is_string(n))
                        iscsi_target_del(json_string_value(n), err, sizeof(err));
        }
        json_decref(t);
        json_t *names = json_array();
        core_ns_foreach(collect_ns, names);
        json_array_foreach(names, i, x) core_ns_delete(json_string_value(x));
        json_decref(names);
        core_fault_clear(0);
        rt_log_threshold = RT_LOG_ERR;
}

/* The peer list parser (core/ana.c): no crash, and format(parse(s)) parses to the same. */
static void fuzz_peers(const uint8_t *data, size_t size)
{
        char *s = malloc(size + 1), err[200];
        if (!s)
                return;
        memcpy(s, data, size);
        s[size] = '\0';
        struct core_ana_peer a[CORE_ANA_PEERS_MAX], b[CORE_ANA_PEERS_MAX];
        int n = core_ana_peers_parse(s, a, CORE_ANA_PEERS_MAX, err, sizeof(err));
        if (n > 0) {
                char txt[CORE_ANA_PEERS_MAX * (CORE_ANA_PEER_ADDR_MAX + 64)];
                core_ana_peers_format(a, (unsigned)n, txt, sizeof(txt));
                if (core_ana_peers_parse(txt, b, CORE_ANA_PEERS_MAX, err, sizeof(err)) != n)
                        abort();
                for (int i = 0; i < n; i++)
                        if (a[i].port != b[i].port || a[i].groups != b[i].groups ||
                            strcmp(a[i].host, b[i].host) != 0)
                                abort();
        }
        free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        fuzz_peers(data, size);
        json_t *v = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
        int skip = v && unsafe(v);
        json_decref(v);
        if (skip)
                return 0;
        char *out = mgmt_rpc_handle((const char *)data, size);
        if (out) {
                /* Every answer is itself valid JSON. */
                json_t *r = json_loads(out, JSON_DECODE_ANY, NULL);
                if (!r)
                        abort();
                json_decref(r);
                free(out);
        }
        reset_state();
        return 0;
}
