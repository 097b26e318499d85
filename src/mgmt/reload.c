/*
 * Live reconfiguration: re-read a config file and apply only the
 * difference to the running daemon (SIGHUP and the config_reload RPC).
 *
 * Both sides are reduced to one model by the same small interpreter: the
 * new file's entries, and the running state as config_save writes it
 * (mgmt_config_dump).  The model holds what a config can say — pools,
 * namespaces (with their settable options), iSCSI targets with LUN maps,
 * portals, NVMe subsystems with allowed hosts and namespace attachments,
 * listeners — keyed by identity (name, target+LUN, nqn+NSID, addr+port).
 * The difference becomes a plan: a list of ordinary RPC calls (removals
 * first, then changes, then additions in the file's order), replayed
 * through mgmt_rpc_call like the config loader does.  Objects that do not
 * change are not touched, so hosts connected to them keep their sessions.
 *
 * Our choices: a reload is refused as a whole (nothing applied, every
 * reason logged) when the file is broken (JSON, shape, parameters, a
 * method a reload cannot diff, a reference to an object the file does not
 * create) or asks for a change that cannot be made live (a namespace's
 * backend, path, block size, thin/removable flag, sanitize rate, shrinking
 * an exported namespace; a subsystem's serial, model or copy_cross_namespace; removing an
 * iSCSI target that has sessions).  A step that
 * fails while applying (e.g. deleting a target that still has sessions)
 * stops the reload there; the steps before it stay applied and the error
 * names the step.  A port 0 portal or listener in the file matches a
 * running one on the same address (slated picked its port).
 */
#include "mgmt/mgmt.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ana.h"
#include "core/ns.h"
#include "iscsi/iscsi.h"
#include "nvme/nvme.h"
#include "rt/log.h"

#define NVME_NSID_LIMIT 1024u /* NSIDs the model searches for a free one (>= NVME_MAX_NSID) */

struct model {
        json_t *pools;   /* realdir -> limit */
        json_t *ns;      /* name -> {"p": create params, "wp", "wc", "pl", "pt", "size"} */
        json_t *targets; /* iqn -> {lun(str) -> ns name} */
        json_t *portals; /* [ {addr, port} ] */
        /* nqn -> {"serial", "model", "any", "hosts": {h: true or its TLS PSK}, "ns": {..}} */
        json_t *subsys;
        json_t *listeners; /* [ {addr, port, tls} ] */
        json_t *auth;      /* iqn, or "" for discovery -> iscsi_target_auth params (no "target") */
        json_t *acl;       /* iqn -> {initiator -> iscsi_acl_add params (luns as "0,2,4-7")} */
        json_t *ana;       /* access group (str) -> state, the groups not optimized */
        json_t *peers;     /* ana_peers_set params, peers normalised; NULL: none */
        const char *log_level;
};

/* A copy of params with CHAP secrets and TLS keys masked, for the log and the result. */
static json_t *redacted(json_t *params)
{
        json_t *c = json_deep_copy(params);
        static const char *const keys[] = {"chap_secret", "mutual_secret", "dhchap_secret",
                                           "dhchap_ctrl_secret", "tls_psk"};
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                if (json_object_get(c, keys[i]))
                        json_object_set_new(c, keys[i], json_string("********"));
        return c;
}

static void model_init(struct model *m)
{
        m->pools = json_object();
        m->ns = json_object();
        m->targets = json_object();
        m->portals = json_array();
        m->subsys = json_object();
        m->listeners = json_array();
        m->auth = json_object();
        m->acl = json_object();
        m->ana = json_object();
        m->peers = NULL;
        m->log_level = NULL;
}

static void model_fini(struct model *m)
{
        json_decref(m->pools);
        json_decref(m->ns);
        json_decref(m->targets);
        json_decref(m->portals);
        json_decref(m->subsys);
        json_decref(m->listeners);
        json_decref(m->auth);
        json_decref(m->acl);
        json_decref(m->ana);
        json_decref(m->peers);
}

static const char *pstr(json_t *p, const char *k)
{
        return json_string_value(json_object_get(p, k));
}

static json_int_t pint(json_t *p, const char *k, json_int_t dflt)
{
        json_t *v = json_object_get(p, k);
        return json_is_integer(v) ? json_integer_value(v) : dflt;
}

static bool pbool(json_t *p, const char *k, bool dflt)
{
        json_t *v = json_object_get(p, k);
        return json_is_boolean(v) ? json_is_true(v) : dflt;
}

/* A size param (bytes or "64M"), already checked by mgmt_rpc_check. */
static json_int_t psize(json_t *p, const char *k, json_int_t dflt)
{
        uint64_t v;
        json_t *x = json_object_get(p, k);
        if (!x || json_is_null(x))
                return dflt;
        return mgmt_parse_size_json(x, &v) == 0 ? (json_int_t)v : dflt;
}

static int addr_find(json_t *list, const char *addr, json_int_t port)
{
        size_t i;
        json_t *x;
        json_array_foreach(list, i, x) if (strcmp(pstr(x, "addr"), addr) == 0 &&
                                           pint(x, "port", -1) == port) return (int)i;
        return -1;
}

#define FAIL(...)                                                                                  \
        do {                                                                                       \
                snprintf(err, errlen, __VA_ARGS__);                                                \
                return -EINVAL;                                                                    \
        } while (0)

/* Interpret one config entry into the model; -EINVAL with a reason if the file is broken. */
static int model_apply(struct model *m, const char *method, json_t *p, char *err, size_t errlen)
{
        size_t ml = strlen(method);
        if ((ml > 5 && strcmp(method + ml - 5, "_list") == 0) ||
            strcmp(method, "daemon_status") == 0) {
                /* read-only: nothing to apply */
        } else if (strcmp(method, "namespace_create") == 0) {
                const char *name = pstr(p, "name");
                if (json_object_get(m->ns, name))
                        FAIL("namespace %s is created twice", name);
                json_t *o = json_pack("{s:O, s:b, s:b, s:I, s:I, s:I}", "p", p, "wp",
                                      pbool(p, "write_protect", false), "wc", true, "pl",
                                      psize(p, "provision_limit", 0), "pt",
                                      psize(p, "provision_threshold", 0), "aw",
                                      psize(p, "atomic_write_max", 0));
                if (json_object_get(p, "size"))
                        json_object_set_new(o, "size", json_integer(psize(p, "size", 0)));
                /* The element model (core/media.h): applied live by namespace_set. */
                json_object_set_new(o, "el", json_integer(pint(p, "elements", 0)));
                /* The access group (core/ana.h): applied live by namespace_set. */
                json_object_set_new(o, "ag", json_integer(pint(p, "ana_group", 1)));
                json_object_set_new(o, "ei", json_integer(pint(p, "element_interleave", 0)));
                json_object_set_new(m->ns, name, o);
        } else if (strcmp(method, "namespace_set") == 0 ||
                   strcmp(method, "namespace_resize") == 0) {
                json_t *o = json_object_get(m->ns, pstr(p, "name"));
                if (!o)
                        FAIL("%s: namespace %s is not created before", method, pstr(p, "name"));
                static const char *const keys[][2] = {
                    {"write_protect", "wp"},    {"write_cache", "wc"},
                    {"provision_limit", "pl"},  {"provision_threshold", "pt"},
                    {"atomic_write_max", "aw"}, {"size", "size"},
                    {"elements", "el"},         {"element_interleave", "ei"},
                    {"ana_group", "ag"}};
                for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
                        json_t *v = json_object_get(p, keys[i][0]);
                        if (!v)
                                continue;
                        json_object_set_new(o, keys[i][1],
                                            json_is_boolean(v)
                                                ? json_boolean(json_is_true(v))
                                                : json_integer(psize(p, keys[i][0], 0)));
                }
        } else if (strcmp(method, "namespace_delete") == 0) {
                json_object_del(m->ns, pstr(p, "name"));
        } else if (strcmp(method, "pool_set") == 0) {
                char real[PATH_MAX];
                const char *dir = realpath(pstr(p, "dir"), real) ? real : pstr(p, "dir");
                json_object_set_new(m->pools, dir, json_integer(psize(p, "limit", 0)));
        } else if (strcmp(method, "iscsi_target_create") == 0) {
                if (json_object_get(m->targets, pstr(p, "name")))
                        FAIL("iSCSI target %s is created twice", pstr(p, "name"));
                json_object_set_new(m->targets, pstr(p, "name"), json_object());
        } else if (strcmp(method, "iscsi_target_delete") == 0) {
                json_object_del(m->targets, pstr(p, "name"));
                json_object_del(m->auth, pstr(p, "name"));
                json_object_del(m->acl, pstr(p, "name"));
        } else if (strcmp(method, "iscsi_acl_add") == 0 ||
                   strcmp(method, "iscsi_acl_remove") == 0) {
                const char *t = pstr(p, "target"), *ini = pstr(p, "initiator");
                if (!t || !ini || !json_object_get(m->targets, t))
                        FAIL("%s: no iSCSI target %s before it", method, t ? t : "?");
                json_t *per = json_object_get(m->acl, t);
                if (!per) {
                        per = json_object();
                        json_object_set_new(m->acl, t, per);
                }
                if (method[10] == 'a') {
                        json_t *a = json_deep_copy(p);
                        json_t *l = json_object_get(a, "luns");
                        if (json_is_integer(l) || json_is_array(l)) {
                                /* one spelling, so an unchanged entry compares equal */
                                char buf[1100] = "";
                                size_t o = 0, i;
                                json_t *e, *arr = json_is_array(l) ? l : NULL;
                                if (!arr)
                                        o = (size_t)snprintf(buf, sizeof(buf), "%lld",
                                                             (long long)json_integer_value(l));
                                json_array_foreach(arr, i, e) if (o < sizeof(buf)) o +=
                                    (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%lld",
                                                     i ? "," : "",
                                                     (long long)json_integer_value(e));
                                json_object_set_new(a, "luns", json_string(buf));
                        }
                        json_object_set_new(per, ini, a);
                } else {
                        json_object_del(per, ini);
                }
        } else if (strcmp(method, "iscsi_target_auth") == 0) {
                const char *t = pstr(p, "target");
                if (t && !json_object_get(m->targets, t))
                        FAIL("iscsi_target_auth: no iSCSI target %s before it", t);
                json_t *a = json_deep_copy(p);
                json_object_del(a, "target");
                const char *u = pstr(a, "chap_user");
                if (u && u[0])
                        json_object_set_new(m->auth, t ? t : "", a);
                else {
                        json_object_del(m->auth, t ? t : "");
                        json_decref(a);
                }
        } else if (strcmp(method, "iscsi_lun_map") == 0 || strcmp(method, "iscsi_lun_unmap") == 0) {
                json_t *t = json_object_get(m->targets, pstr(p, "target"));
                if (!t)
                        FAIL("%s: no iSCSI target %s before it", method, pstr(p, "target"));
                char lun[24];
                snprintf(lun, sizeof(lun), "%" JSON_INTEGER_FORMAT, pint(p, "lun", 0));
                if (method[10] == 'u') {
                        json_object_del(t, lun);
                } else {
                        if (!json_object_get(m->ns, pstr(p, "namespace")))
                                FAIL("iscsi_lun_map: namespace %s is not created before",
                                     pstr(p, "namespace"));
                        json_object_set_new(t, lun, json_string(pstr(p, "namespace")));
                }
        } else if (strcmp(method, "iscsi_portal_add") == 0 ||
                   strcmp(method, "nvmf_listener_add") == 0) {
                json_t *l = method[0] == 'i' ? m->portals : m->listeners;
                json_int_t port = pint(p, "port", method[0] == 'i' ? 3260 : 4420);
                if (port != 0 && addr_find(l, pstr(p, "addr"), port) >= 0)
                        FAIL("%s %s:%" JSON_INTEGER_FORMAT " is added twice", method,
                             pstr(p, "addr"), port);
                json_array_append_new(l, json_pack("{s:s, s:I, s:s}", "addr", pstr(p, "addr"),
                                                   "port", port, "tls",
                                                   pstr(p, "tls") ? pstr(p, "tls") : "none"));
        } else if (strcmp(method, "iscsi_portal_delete") == 0 ||
                   strcmp(method, "nvmf_listener_delete") == 0) {
                json_t *l = method[0] == 'i' ? m->portals : m->listeners;
                int i =
                    addr_find(l, pstr(p, "addr"), pint(p, "port", method[0] == 'i' ? 3260 : 4420));
                if (i >= 0)
                        json_array_remove(l, (size_t)i);
        } else if (strcmp(method, "nvmf_subsystem_create") == 0) {
                const char *nqn = pstr(p, "nqn");
                if (json_object_get(m->subsys, nqn))
                        FAIL("NVMe subsystem %s is created twice", nqn);
                json_t *o = json_pack("{s:b, s:{}, s:{}}", "any", pbool(p, "allow_any_host", true),
                                      "hosts", "ns");
                if (pstr(p, "serial"))
                        json_object_set_new(o, "serial", json_string(pstr(p, "serial")));
                if (pstr(p, "model"))
                        json_object_set_new(o, "model", json_string(pstr(p, "model")));
                json_object_set_new(o, "copy_cross_namespace",
                                    json_boolean(pbool(p, "copy_cross_namespace", false)));
                json_object_set_new(m->subsys, nqn, o);
        } else if (strcmp(method, "nvmf_subsystem_delete") == 0) {
                json_object_del(m->subsys, pstr(p, "nqn"));
        } else if (strncmp(method, "nvmf_subsystem_", 15) == 0 ||
                   strncmp(method, "nvmf_ns_", 8) == 0) {
                json_t *s = json_object_get(m->subsys, pstr(p, "nqn"));
                if (!s)
                        FAIL("%s: no NVMe subsystem %s before it", method, pstr(p, "nqn"));
                json_t *hosts = json_object_get(s, "hosts"), *nss = json_object_get(s, "ns");
                const char *host = pstr(p, "host");
                char nsid[24];
                if (strcmp(method, "nvmf_subsystem_add_host") == 0) {
                        if (strcmp(host, "*") == 0)
                                json_object_set_new(s, "any", json_true());
                        else {
                                /* A host with DH-HMAC-CHAP secrets or a TLS PSK: they are part of
                                 * its entry. */
                                static const char *const hkeys[] = {
                                    "dhchap_secret", "dhchap_ctrl_secret", "tls_psk"};
                                json_t *hv = json_object();
                                for (size_t k = 0; k < sizeof(hkeys) / sizeof(hkeys[0]); k++)
                                        if (pstr(p, hkeys[k]))
                                                json_object_set_new(hv, hkeys[k],
                                                                    json_string(pstr(p, hkeys[k])));
                                if (json_object_size(hv) == 0) {
                                        json_decref(hv);
                                        hv = json_true();
                                }
                                json_object_set_new(hosts, host, hv);
                                if (!pbool(p, "keep_any_host", false))
                                        json_object_set_new(s, "any", json_false());
                        }
                } else if (strcmp(method, "nvmf_subsystem_remove_host") == 0) {
                        if (strcmp(host, "*") == 0)
                                json_object_set_new(s, "any", json_false());
                        else
                                json_object_del(hosts, host);
                } else if (strcmp(method, "nvmf_ns_attach") == 0) {
                        json_int_t id = pint(p, "nsid", 0);
                        if (!json_object_get(m->ns, pstr(p, "namespace")))
                                FAIL("nvmf_ns_attach: namespace %s is not created before",
                                     pstr(p, "namespace"));
                        for (json_int_t i = 1; id == 0 && i <= NVME_NSID_LIMIT; i++) {
                                snprintf(nsid, sizeof(nsid), "%" JSON_INTEGER_FORMAT, i);
                                if (!json_object_get(nss, nsid))
                                        id = i; /* the daemon picks the lowest free one too */
                        }
                        snprintf(nsid, sizeof(nsid), "%" JSON_INTEGER_FORMAT, id);
                        if (json_object_get(nss, nsid))
                                FAIL("nvmf_ns_attach: NSID %s of %s is attached twice", nsid,
                                     pstr(p, "nqn"));
                        json_object_set_new(nss, nsid, json_string(pstr(p, "namespace")));
                } else if (strcmp(method, "nvmf_subsystem_auth") == 0) {
                        json_t *a = json_object();
                        if (pstr(p, "digests") && pstr(p, "digests")[0])
                                json_object_set(a, "digests", json_object_get(p, "digests"));
                        if (pstr(p, "dhgroups") && pstr(p, "dhgroups")[0])
                                json_object_set(a, "dhgroups", json_object_get(p, "dhgroups"));
                        json_object_set_new(s, "auth", a);
                } else if (strcmp(method, "nvmf_ns_detach") == 0) {
                        snprintf(nsid, sizeof(nsid), "%" JSON_INTEGER_FORMAT, pint(p, "nsid", 0));
                        json_object_del(nss, nsid);
                } else {
                        FAIL("method %s cannot be applied by a reload (restart slated)", method);
                }
        } else if (strcmp(method, "log_set_level") == 0) {
                m->log_level = pstr(p, "level");
        } else if (strcmp(method, "ana_group_set") == 0) {
                char g[24];
                snprintf(g, sizeof(g), "%" JSON_INTEGER_FORMAT, pint(p, "group", 0));
                if (strcmp(pstr(p, "state"), "optimized") == 0)
                        json_object_del(m->ana, g); /* the default: not in the model */
                else
                        json_object_set_new(m->ana, g, json_string(pstr(p, "state")));
        } else if (strcmp(method, "ana_peers_set") == 0) {
                /* the peer list in its normal text form, so equal lists compare equal */
                struct core_ana_peer pv[CORE_ANA_PEERS_MAX];
                char perr[200], txt[CORE_ANA_PEERS_MAX * (CORE_ANA_PEER_ADDR_MAX + 64)];
                int np = core_ana_peers_parse(pstr(p, "peers"), pv, CORE_ANA_PEERS_MAX, perr,
                                              sizeof(perr));
                if (np < 0)
                        FAIL("ana_peers_set: %s", perr);
                core_ana_peers_format(pv, (unsigned)np, txt, sizeof(txt));
                json_decref(m->peers);
                m->peers = np ? json_pack("{s:s, s:I}", "peers", txt, "interval_ms",
                                          pint(p, "interval_ms", CORE_ANA_PEER_INTERVAL))
                              : NULL;
        } else if (strncmp(method, "fault_", 6) == 0) {
                /* Our choice: fault rules are runtime state, never part of the configuration. */
                FAIL("method %s: fault injection is not configuration (not saved, not reloaded); "
                     "set it over RPC",
                     method);
        } else {
                FAIL("method %s cannot be applied by a reload (restart slated)", method);
        }
        return 0;
}

/* Build a model from a {"config": [...]} document, checking every entry's parameters. */
static int model_build(struct model *m, json_t *root, char *err, size_t errlen)
{
        size_t i;
        json_t *e;
        char msg[512];
        json_array_foreach(json_object_get(root, "config"), i, e)
        {
                const char *method = pstr(e, "method");
                json_t *p = json_object_get(e, "params");
                json_t *empty = NULL;
                if (!method) {
                        snprintf(err, errlen, "config[%zu]: entry must be {method, params}", i);
                        return -EINVAL;
                }
                if (!p || json_is_null(p))
                        p = empty = json_object();
                int rc = mgmt_rpc_check(method, p, msg, sizeof(msg));
                if (rc == 0)
                        rc = model_apply(m, method, p, msg, sizeof(msg));
                json_decref(empty);
                if (rc < 0) {
                        snprintf(err, errlen, "config[%zu] (%.64s): %s", i, method, msg);
                        return -EINVAL; /* a broken file, whatever the reason */
                }
        }
        return 0;
}

/* ------------------------------------------------------------------ */
/* The difference                                                      */
/* ------------------------------------------------------------------ */

struct plan {
        json_t *steps;    /* [ {method, params} ] in order */
        json_t *refusals; /* [ "reason" ] */
};

static void step(struct plan *pl, const char *method, json_t *params)
{
        json_array_append_new(pl->steps,
                              json_pack("{s:s, s:o}", "method", method, "params", params));
}

__attribute__((format(printf, 2, 3))) static void refuse(struct plan *pl, const char *fmt, ...)
{
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        json_array_append_new(pl->refusals, json_string(buf));
}

/* Compare an immutable namespace_create field the new file states explicitly. */
static void ns_fixed(struct plan *pl, const char *name, json_t *np, json_t *op, const char *key)
{
        json_t *nv = json_object_get(np, key), *ov = json_object_get(op, key);
        if (!nv || json_is_null(nv) || json_equal(nv, ov))
                return;
        if (strcmp(key, "physical_block_size") == 0 && json_integer_value(nv) == 0)
                return;
        /* The flash model (core/flash.h): off is the same as absent; sizes as sizes. */
        if (strcmp(key, "flash_model") == 0 && !ov && json_is_false(nv))
                return;
        /* Encryption at rest (core/crypt.h): off is the same as absent. */
        if (strcmp(key, "encrypt") == 0 && !ov && json_is_false(nv))
                return;
        /* Shared reservations (backend/file_pr.c): off is the same as absent. */
        if (strcmp(key, "shared_reservations") == 0 && !ov && json_is_false(nv))
                return;
        /* Protection information (core/pi.h): none, the defaults, is the same as absent. */
        if (strncmp(key, "pi_", 3) == 0 && !ov &&
            (json_is_false(nv) || (json_is_integer(nv) && json_integer_value(nv) == 0) ||
             (json_is_string(nv) && strcmp(json_string_value(nv), "crc16") == 0)))
                return;
        /* FDP (src/nvme/fdp.c): on is the same as absent. */
        if (strcmp(key, "fdp") == 0 && !ov && json_is_true(nv))
                return;
        if (strcmp(key, "flash_erase_block") == 0 && ov && psize(np, key, -1) == psize(op, key, -2))
                return;
        if (strcmp(key, "path") == 0 && json_is_string(ov)) {
                char a[PATH_MAX], b[PATH_MAX];
                if (realpath(json_string_value(nv), a) && realpath(json_string_value(ov), b) &&
                    strcmp(a, b) == 0)
                        return;
        }
        char *n = json_dumps(nv, JSON_ENCODE_ANY), *o = json_dumps(ov, JSON_ENCODE_ANY);
        refuse(pl, "namespace %s: %s cannot change live (running %s, file %s)", name, key,
               o ? o : "none", n ? n : "?");
        free(n);
        free(o);
}

/* Pair a new list of {addr, port} with the running one: exact first, then port 0 = any. */
static json_t *pair_addrs(json_t *run, json_t *want)
{
        size_t n = json_array_size(run), i, j;
        json_t *used = json_array(); /* per running entry: true when matched */
        json_t *x;
        for (i = 0; i < n; i++)
                json_array_append_new(used, json_false());
        json_array_foreach(want, i, x)
        {
                int k = addr_find(run, pstr(x, "addr"), pint(x, "port", 0));
                if (k >= 0 && !json_is_true(json_array_get(used, (size_t)k))) {
                        json_array_set_new(used, (size_t)k, json_true());
                        json_object_set_new(x, "matched", json_integer(k));
                }
        }
        json_array_foreach(want, i, x)
        {
                if (json_object_get(x, "matched") || pint(x, "port", 0) != 0)
                        continue;
                for (j = 0; j < n; j++) {
                        json_t *r = json_array_get(run, j);
                        if (!json_is_true(json_array_get(used, j)) &&
                            strcmp(pstr(r, "addr"), pstr(x, "addr")) == 0) {
                                json_array_set_new(used, j, json_true());
                                json_object_set_new(x, "matched", json_integer((json_int_t)j));
                                break;
                        }
                }
        }
        return used;
}

static void diff_addrs(struct plan *pl, json_t *run, json_t *want, const char *add, const char *del,
                       json_t *adds)
{
        json_t *used = pair_addrs(run, want);
        size_t i;
        json_t *x;
        json_array_foreach(run, i, x) if (!json_is_true(json_array_get(used, i))) step(
            pl, del,
            json_pack("{s:s, s:O}", "addr", pstr(x, "addr"), "port", json_object_get(x, "port")));
        json_array_foreach(want, i, x)
        {
                json_t *m = json_object_get(x, "matched"), *port = json_object_get(x, "port");
                if (m) {
                        /* A listener whose TLS mode changes is closed and opened again. */
                        json_t *r = json_array_get(run, (size_t)json_integer_value(m));
                        const char *rt = pstr(r, "tls"), *wt = pstr(x, "tls");
                        if (strcmp(rt ? rt : "none", wt ? wt : "none") == 0)
                                continue;
                        step(pl, del,
                             json_pack("{s:s, s:O}", "addr", pstr(r, "addr"), "port",
                                       json_object_get(r, "port")));
                        port = json_object_get(r, "port"); /* a port 0 one keeps its port */
                }
                json_t *p = json_pack("{s:s, s:O}", "addr", pstr(x, "addr"), "port", port);
                if (pstr(x, "tls") && strcmp(pstr(x, "tls"), "none") != 0)
                        json_object_set_new(p, "tls", json_string(pstr(x, "tls")));
                json_array_append_new(adds, json_pack("{s:s, s:o}", "method", add, "params", p));
        }
        json_decref(used);
}

static void diff(struct plan *pl, struct model *run, struct model *want, json_t *new_entries)
{
        const char *k, *k2;
        json_t *o, *n, *v;
        json_t *late = json_array(); /* additions, in the new file's order */

        /* 1. detach / unmap what goes away or changes, and hosts no longer allowed */
        json_object_foreach(run->subsys, k, o)
        {
                json_t *ws = json_object_get(want->subsys, k);
                if (!ws)
                        continue; /* the whole subsystem goes (step 3) */
                json_object_foreach(json_object_get(o, "ns"), k2, v)
                {
                        if (!json_equal(v, json_object_get(json_object_get(ws, "ns"), k2)))
                                step(pl, "nvmf_ns_detach",
                                     json_pack("{s:s, s:I}", "nqn", k, "nsid",
                                               (json_int_t)strtoll(k2, NULL, 10)));
                }
                json_object_foreach(json_object_get(o, "hosts"), k2, v)
                {
                        if (!json_object_get(json_object_get(ws, "hosts"), k2))
                                step(pl, "nvmf_subsystem_remove_host",
                                     json_pack("{s:s, s:s}", "nqn", k, "host", k2));
                }
                if (json_is_true(json_object_get(o, "any")) &&
                    !json_is_true(json_object_get(ws, "any")))
                        step(pl, "nvmf_subsystem_remove_host",
                             json_pack("{s:s, s:s}", "nqn", k, "host", "*"));
                const char *fixed[] = {"serial", "model", "copy_cross_namespace"};
                for (int i = 0; i < 3; i++) {
                        json_t *nv = json_object_get(ws, fixed[i]);
                        if (nv && !json_equal(nv, json_object_get(o, fixed[i])))
                                refuse(pl, "NVMe subsystem %s: %s cannot change live", k, fixed[i]);
                }
        }
        json_object_foreach(run->targets, k, o)
        {
                json_t *wt = json_object_get(want->targets, k);
                json_object_foreach(o, k2, v)
                {
                        if (!wt || !json_equal(v, json_object_get(wt, k2)))
                                step(pl, "iscsi_lun_unmap",
                                     json_pack("{s:s, s:I}", "target", k, "lun",
                                               (json_int_t)strtoll(k2, NULL, 10)));
                }
        }
        /* 2. listeners and portals that go away */
        diff_addrs(pl, run->listeners, want->listeners, "nvmf_listener_add", "nvmf_listener_delete",
                   late);
        diff_addrs(pl, run->portals, want->portals, "iscsi_portal_add", "iscsi_portal_delete",
                   late);
        /* 3. subsystems and targets that go away, then namespaces */
        json_object_foreach(run->subsys, k, o) if (!json_object_get(want->subsys, k))
            step(pl, "nvmf_subsystem_delete", json_pack("{s:s}", "nqn", k));
        json_t *tl = iscsi_targets_json(); /* sessions per target */
        json_object_foreach(run->targets, k, o)
        {
                if (json_object_get(want->targets, k))
                        continue;
                size_t i;
                json_t *t;
                json_int_t sessions = 0;
                json_array_foreach(tl, i, t) if (json_is_string(json_object_get(t, "name")) &&
                                                 strcmp(pstr(t, "name"), k) == 0) sessions =
                    pint(t, "sessions", 0);
                if (sessions)
                        refuse(pl,
                               "iSCSI target %s has %" JSON_INTEGER_FORMAT
                               " session(s): log them out before removing it",
                               k, sessions);
                else
                        step(pl, "iscsi_target_delete", json_pack("{s:s}", "name", k));
        }
        json_decref(tl);
        json_object_foreach(run->ns, k, o) if (!json_object_get(want->ns, k))
            step(pl, "namespace_delete", json_pack("{s:s}", "name", k));

        /* 4. pools, then namespaces that stay but change */
        json_object_foreach(want->pools, k, n) if (!json_equal(n, json_object_get(run->pools, k)))
            step(pl, "pool_set", json_pack("{s:s, s:O}", "dir", k, "limit", n));
        json_object_foreach(run->pools, k, o) if (!json_object_get(want->pools, k))
            step(pl, "pool_set", json_pack("{s:s, s:i}", "dir", k, "limit", 0));
        json_object_foreach(want->ns, k, n)
        {
                o = json_object_get(run->ns, k);
                if (!o)
                        continue;
                json_t *np = json_object_get(n, "p"), *op = json_object_get(o, "p");
                static const char *const fixed[] = {"backend",
                                                    "path",
                                                    "block_size",
                                                    "physical_block_size",
                                                    "thin",
                                                    "removable",
                                                    "sanitize_rate_mibps",
                                                    "selftest_rate_mibps",
                                                    "flash_model",
                                                    "flash_gc",
                                                    "flash_op_percent",
                                                    "flash_erase_block",
                                                    "fdp",
                                                    "encrypt",
                                                    "key_file",
                                                    "passphrase_file",
                                                    "pool",
                                                    "image",
                                                    "rbd_namespace",
                                                    "ceph_conf",
                                                    "client_id",
                                                    "keyring",
                                                    "shared_reservations",
                                                    "pi_type",
                                                    "pi_md",
                                                    "pi_guard",
                                                    "pi_exp",
                                                    "pi_first",
                                                    "pi_sts"};
                for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
                        ns_fixed(pl, k, np, op, fixed[i]);
                json_t *set = json_pack("{s:s}", "name", k);
                static const char *const mut[][2] = {
                    {"wp", "write_protect"},      {"wc", "write_cache"},
                    {"pl", "provision_limit"},    {"pt", "provision_threshold"},
                    {"aw", "atomic_write_max"},   {"el", "elements"},
                    {"ei", "element_interleave"}, {"ag", "ana_group"}};
                for (size_t i = 0; i < sizeof(mut) / sizeof(mut[0]); i++)
                        if (!json_equal(json_object_get(n, mut[i][0]),
                                        json_object_get(o, mut[i][0])))
                                json_object_set(set, mut[i][1], json_object_get(n, mut[i][0]));
                if (json_object_size(set) > 1)
                        step(pl, "namespace_set", set);
                else
                        json_decref(set);
                json_t *ns_ = json_object_get(n, "size"), *os = json_object_get(o, "size");
                if (ns_ && os && !json_equal(ns_, os)) {
                        struct core_ns *cns = core_ns_find(k);
                        if (json_integer_value(ns_) < json_integer_value(os) && cns &&
                            (iscsi_ns_in_use(cns) || nvme_ns_in_use(cns)))
                                refuse(pl,
                                       "namespace %s: shrinking an exported namespace is not "
                                       "done by a reload (namespace_resize force=true)",
                                       k);
                        else
                                step(pl, "namespace_resize",
                                     json_pack("{s:s, s:O}", "name", k, "size", ns_));
                }
        }

        /* 5. additions, in the order the new file makes them */
        size_t i;
        json_t *e;
        json_array_foreach(new_entries, i, e)
        {
                const char *m = pstr(e, "method");
                json_t *p = json_object_get(e, "params");
                if (!m || !p)
                        continue;
                if (strcmp(m, "namespace_create") == 0 &&
                    !json_object_get(run->ns, pstr(p, "name"))) {
                        json_t *w = json_object_get(want->ns, pstr(p, "name"));
                        json_t *cp = json_deep_copy(p);
                        /* the settable options as they end up after the whole file */
                        json_object_del(cp, "write_protect");
                        json_object_del(cp, "provision_limit");
                        json_object_del(cp, "provision_threshold");
                        json_object_del(cp, "atomic_write_max");
                        json_object_del(cp, "elements");
                        json_object_del(cp, "element_interleave");
                        json_object_del(cp, "ana_group");
                        if (json_integer_value(json_object_get(w, "ag")) > 1)
                                json_object_set(cp, "ana_group", json_object_get(w, "ag"));
                        if (json_integer_value(json_object_get(w, "el")))
                                json_object_set(cp, "elements", json_object_get(w, "el"));
                        if (json_integer_value(json_object_get(w, "ei")))
                                json_object_set(cp, "element_interleave", json_object_get(w, "ei"));
                        if (json_is_true(json_object_get(w, "wp")))
                                json_object_set_new(cp, "write_protect", json_true());
                        if (json_integer_value(json_object_get(w, "pl")))
                                json_object_set(cp, "provision_limit", json_object_get(w, "pl"));
                        if (json_integer_value(json_object_get(w, "pt")))
                                json_object_set(cp, "provision_threshold",
                                                json_object_get(w, "pt"));
                        if (json_integer_value(json_object_get(w, "aw")))
                                json_object_set(cp, "atomic_write_max", json_object_get(w, "aw"));
                        step(pl, m, cp);
                        if (!json_is_true(json_object_get(w, "wc")))
                                step(pl, "namespace_set",
                                     json_pack("{s:s, s:b}", "name", pstr(p, "name"), "write_cache",
                                               false));
                } else if (strcmp(m, "iscsi_target_create") == 0 &&
                           !json_object_get(run->targets, pstr(p, "name"))) {
                        step(pl, m, json_deep_copy(p));
                } else if (strcmp(m, "nvmf_subsystem_create") == 0 &&
                           !json_object_get(run->subsys, pstr(p, "nqn"))) {
                        json_t *cp = json_deep_copy(p);
                        json_object_set(
                            cp, "allow_any_host",
                            json_object_get(json_object_get(want->subsys, pstr(p, "nqn")), "any"));
                        step(pl, m, cp);
                }
        }
        /* maps, hosts and attachments of objects that stay or are new */
        json_object_foreach(want->targets, k, n)
        {
                json_t *ot = json_object_get(run->targets, k);
                json_object_foreach(n, k2, v) if (!ot || !json_equal(v, json_object_get(ot, k2)))
                    step(pl, "iscsi_lun_map",
                         json_pack("{s:s, s:I, s:O}", "target", k, "lun",
                                   (json_int_t)strtoll(k2, NULL, 10), "namespace", v));
        }
        /* CHAP: set where it changed, switched off where the file no longer has it (live) */
        json_object_foreach(want->auth, k, n) if (!json_equal(n, json_object_get(run->auth, k)))
        {
                json_t *a = json_deep_copy(n);
                if (k[0])
                        json_object_set_new(a, "target", json_string(k));
                step(pl, "iscsi_target_auth", a);
        }
        json_object_foreach(run->auth, k, o) if (!json_object_get(want->auth, k) &&
                                                 (!k[0] || json_object_get(want->targets, k)))
            step(pl, "iscsi_target_auth", k[0] ? json_pack("{s:s}", "target", k) : json_object());
        /* initiator ACLs: entries added or changed, then the ones the file no longer has (live) */
        json_object_foreach(want->acl, k, n)
        {
                json_t *oa = json_object_get(run->acl, k);
                const char *k2;
                json_t *v;
                json_object_foreach(n, k2, v) if (!json_equal(v, json_object_get(oa, k2)))
                    step(pl, "iscsi_acl_add", json_deep_copy(v));
        }
        json_object_foreach(run->acl, k, o)
        {
                if (!json_object_get(want->targets, k))
                        continue; /* the target goes, and its ACL with it */
                json_t *wa = json_object_get(want->acl, k);
                const char *k2;
                json_t *v;
                json_object_foreach(o, k2, v) if (!json_object_get(wa, k2)) step(
                    pl, "iscsi_acl_remove", json_pack("{s:s, s:s}", "target", k, "initiator", k2));
        }
        json_object_foreach(want->subsys, k, n)
        {
                json_t *os = json_object_get(run->subsys, k);
                json_object_foreach(json_object_get(n, "hosts"), k2, v)
                {
                        if (!os ||
                            !json_equal(v, json_object_get(json_object_get(os, "hosts"), k2))) {
                                json_t *a = json_pack("{s:s, s:s, s:b}", "nqn", k, "host", k2,
                                                      "keep_any_host", true);
                                if (json_is_object(v)) /* its DH-HMAC-CHAP secrets, TLS PSK */
                                        json_object_update(a, v);
                                step(pl, "nvmf_subsystem_add_host", a);
                        }
                }
                if (os && json_is_true(json_object_get(n, "any")) &&
                    !json_is_true(json_object_get(os, "any")))
                        step(pl, "nvmf_subsystem_add_host",
                             json_pack("{s:s, s:s}", "nqn", k, "host", "*"));
                /* DH-HMAC-CHAP preferences: absent = the defaults (an empty call restores them). */
                json_t *wa = json_object_get(n, "auth"),
                       *ra = os ? json_object_get(os, "auth") : NULL;
                json_t *e = json_object();
                if (!json_equal(wa ? wa : e, ra ? ra : e)) {
                        json_t *a = json_pack("{s:s}", "nqn", k);
                        if (wa)
                                json_object_update(a, wa);
                        step(pl, "nvmf_subsystem_auth", a);
                }
                json_decref(e);
                json_object_foreach(json_object_get(n, "ns"), k2, v)
                {
                        if (!os || !json_equal(v, json_object_get(json_object_get(os, "ns"), k2)))
                                step(pl, "nvmf_ns_attach",
                                     json_pack("{s:s, s:I, s:O}", "nqn", k, "nsid",
                                               (json_int_t)strtoll(k2, NULL, 10), "namespace", v));
                }
        }
        /* access group states: the file's, optimized where it no longer says otherwise */
        json_object_foreach(want->ana, k, n) if (!json_equal(n, json_object_get(run->ana, k)))
            step(pl, "ana_group_set",
                 json_pack("{s:I, s:O}", "group", (json_int_t)strtoll(k, NULL, 10), "state", n));
        json_object_foreach(run->ana, k, o) if (!json_object_get(want->ana, k))
            step(pl, "ana_group_set",
                 json_pack("{s:I, s:s}", "group", (json_int_t)strtoll(k, NULL, 10), "state",
                           "optimized"));
        /* the watched peers: the file's list, or none */
        if (want->peers ? !json_equal(want->peers, run->peers) : run->peers != NULL)
                step(pl, "ana_peers_set", want->peers ? json_incref(want->peers) : json_object());
        /* 6. portals and listeners last: hosts can connect once everything exists */
        json_array_foreach(late, i, e)
            step(pl, pstr(e, "method"), json_incref(json_object_get(e, "params")));
        json_decref(late);
        if (want->log_level && (!run->log_level || strcmp(want->log_level, run->log_level) != 0))
                step(pl, "log_set_level", json_pack("{s:s}", "level", want->log_level));
}

/* ------------------------------------------------------------------ */
/* Entry point                                                         */
/* ------------------------------------------------------------------ */

static void (*hook_before)(void);
static void (*hook_after)(int rc);

void mgmt_reload_set_hooks(void (*before)(void), void (*after)(int rc))
{
        hook_before = before;
        hook_after = after;
}

static int reload(const char *path, bool dry_run, json_t **result, char *err, size_t errlen)
{
        struct model run, want;
        struct plan pl = {json_array(), json_array()};
        char msg[768];
        int rc;
        json_t *root = mgmt_config_read_checked(path, msg, sizeof(msg));
        json_t *cur = NULL;
        model_init(&run);
        model_init(&want);
        if (!root) {
                snprintf(err, errlen, "%s", msg);
                rc = -EINVAL;
                goto out;
        }
        rc = model_build(&want, root, msg, sizeof(msg));
        if (rc < 0) {
                snprintf(err, errlen, "%s: %s", path, msg);
                goto out;
        }
        cur = mgmt_config_dump(true); /* the secrets too, to compare; never shown */
        if (!cur) {
                snprintf(err, errlen, "out of memory");
                rc = -ENOMEM;
                goto out;
        }
        rc = model_build(&run, cur, msg, sizeof(msg));
        if (rc < 0) {
                snprintf(err, errlen, "running state: %s", msg);
                goto out;
        }
        static const char *const levels[] = {"error", "warn", "info", "debug"};
        run.log_level = (unsigned)rt_log_threshold < 4 ? levels[rt_log_threshold] : NULL;
        if (!want.log_level)
                want.log_level = mgmt_config_options_diff(root, path);
        diff(&pl, &run, &want, json_object_get(root, "config"));

        size_t i;
        json_t *x;
        json_array_foreach(pl.refusals, i, x)
            LOG_ERR("mgmt", "reload %s: %s", path, json_string_value(x));
        if (json_array_size(pl.refusals)) {
                snprintf(err, errlen, "%s: nothing changed: %s%s", path,
                         json_string_value(json_array_get(pl.refusals, 0)),
                         json_array_size(pl.refusals) > 1 ? " (and more, see the log)" : "");
                rc = -EPERM;
                goto out;
        }
        size_t done = 0;
        if (!dry_run) {
                mgmt_config_paths_commit(root); /* the steps' paths meet the new rules */
                json_array_foreach(pl.steps, i, x)
                {
                        json_t *res = NULL;
                        int code;
                        json_t *shown = redacted(json_object_get(x, "params"));
                        char *txt = json_dumps(shown, JSON_COMPACT);
                        json_decref(shown);
                        LOG_INFO("mgmt", "reload: %s %s", pstr(x, "method"), txt ? txt : "");
                        free(txt);
                        rc = mgmt_rpc_call(pstr(x, "method"), json_object_get(x, "params"), &res,
                                           &code, msg, sizeof(msg));
                        json_decref(res);
                        if (rc < 0) {
                                snprintf(err, errlen,
                                         "%s: step %zu of %zu (%s) failed: %s; the %zu steps "
                                         "before it are applied",
                                         path, i + 1, json_array_size(pl.steps), pstr(x, "method"),
                                         msg, i);
                                goto out;
                        }
                        done++;
                }
                LOG_INFO("mgmt", "reload %s: %zu change%s applied", path, done,
                         done == 1 ? "" : "s");
                mgmt_config_options_commit(root);
        }
        json_t *shown = json_array();
        json_array_foreach(pl.steps, i, x) json_array_append_new(
            shown, json_pack("{s:s, s:o}", "method", pstr(x, "method"), "params",
                             redacted(json_object_get(x, "params"))));
        *result = json_pack("{s:s, s:b, s:I, s:o}", "path", path, "dry_run", dry_run, "changes",
                            (json_int_t)json_array_size(pl.steps), "steps", shown);
out:
        if (rc < 0)
                LOG_ERR("mgmt", "reload refused or stopped: %s", err);
        json_decref(root);
        json_decref(cur);
        json_decref(pl.steps);
        json_decref(pl.refusals);
        model_fini(&run);
        model_fini(&want);
        return rc;
}

int mgmt_config_reload(const char *path, bool dry_run, json_t **result, char *err, size_t errlen)
{
        *result = NULL;
        if (!path)
                path = mgmt_config_path();
        if (!path) {
                snprintf(err, errlen,
                         "slated was started without --config: no file to reload (give 'path')");
                LOG_ERR("mgmt", "reload: %s", err);
                return -ENOENT;
        }
        if (!dry_run && hook_before)
                hook_before();
        int rc = reload(path, dry_run, result, err, errlen);
        if (!dry_run && hook_after)
                hook_after(rc);
        return rc;
}
