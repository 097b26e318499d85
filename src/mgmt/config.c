/*
 * The configuration file: a replayable list of RPC calls (the shape of
 * SPDK's save_config), {"options": {...}, "config": [{"method": ..,
 * "params": {..}}, ..]}.  Loading replays each entry through the same
 * dispatcher as the RPC socket (mgmt_rpc_call), stopping at the first
 * failure with a message naming the entry, the method and the reason;
 * config_save produces the same shape from the running state, so a saved
 * config loads back into the same namespaces, targets, LUN maps and
 * portals.  The format is documented in docs/config.md.
 */
#include "mgmt/mgmt.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ana.h"
#include "core/ns.h"
#include "mgmt/metrics.h"
#include "iscsi/iscsi.h"
#include "nvme/nvme.h"
#include "nvmf/nvmf.h"
#include "rt/limits.h"
#include "rt/reactor.h"
#include "rt/log.h"
#include "rt/sock.h"

#define CONFIG_MAX_BYTES (16u << 20) /* a config larger than this is surely a mistake */

/*
 * The embedded default: one thin 1 GiB file namespace exported as LUN 0 on
 * 127.0.0.1:3260 and as NSID 1 of one NVMe subsystem on 127.0.0.1:4420.
 */
static const char default_config[] =
    "{\"config\": ["
    "{\"method\": \"namespace_create\", \"params\": {\"name\": \"disk0\", \"backend\": "
    "\"file\", \"size\": \"1G\", \"block_size\": 512, \"thin\": true}},"
    "{\"method\": \"iscsi_target_create\", \"params\": {\"name\": "
    "\"iqn.2026-12.io.slate:disk0\"}},"
    "{\"method\": \"iscsi_lun_map\", \"params\": {\"target\": \"iqn.2026-12.io.slate:disk0\", "
    "\"lun\": 0, \"namespace\": \"disk0\"}},"
    "{\"method\": \"iscsi_portal_add\", \"params\": {\"addr\": \"127.0.0.1\", \"port\": 3260}},"
    "{\"method\": \"nvmf_subsystem_create\", \"params\": {\"nqn\": "
    "\"nqn.2026-12.io.slate:disk0\"}},"
    "{\"method\": \"nvmf_ns_attach\", \"params\": {\"nqn\": \"nqn.2026-12.io.slate:disk0\", "
    "\"nsid\": 1, \"namespace\": \"disk0\"}},"
    "{\"method\": \"nvmf_listener_add\", \"params\": {\"addr\": \"127.0.0.1\", \"port\": 4420}}"
    "]}";

static int check_top(json_t *root, char *err, size_t errlen);

static json_t *load_text(const char *path, char *err, size_t errlen)
{
        json_error_t je;
        FILE *f = fopen(path, "r");
        if (!f) {
                snprintf(err, errlen, "%s: %s", path, strerror(errno));
                return NULL;
        }
        json_t *root = NULL;
        if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > (long)CONFIG_MAX_BYTES) {
                snprintf(err, errlen, "%s: larger than %u bytes", path, CONFIG_MAX_BYTES);
                goto out;
        }
        rewind(f);
        root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
        if (!root)
                snprintf(err, errlen, "%s:%d:%d: JSON parse error: %s", path, je.line, je.column,
                         je.text);
        else if (!json_is_object(root)) {
                snprintf(err, errlen, "%s: top level must be an object", path);
                json_decref(root);
                root = NULL;
        }
out:
        fclose(f);
        return root;
}

int mgmt_config_file_is_ours(const char *path, char *err, size_t errlen)
{
        struct stat st;
        if (lstat(path, &st) < 0) {
                if (errno == ENOENT)
                        return 0;
                snprintf(err, errlen, "%s: %s", path, strerror(errno));
                return -errno;
        }
        if (S_ISLNK(st.st_mode)) {
                snprintf(err, errlen, "%s is a symbolic link: refused (name the file itself)",
                         path);
                return -EPERM;
        }
        if (!S_ISREG(st.st_mode)) {
                snprintf(err, errlen, "%s is not a regular file: refused", path);
                return -EPERM;
        }
        if (st.st_uid != geteuid()) {
                snprintf(err, errlen, "%s belongs to uid %u, not to slated (uid %u): refused", path,
                         (unsigned)st.st_uid, (unsigned)geteuid());
                return -EPERM;
        }
        if (st.st_size == 0)
                return 0;
        char msg[256];
        json_t *root = load_text(path, msg, sizeof(msg));
        int rc = root ? check_top(root, msg, sizeof(msg)) : -EINVAL;
        json_decref(root);
        if (rc < 0) {
                snprintf(err, errlen, "%s is not a slated config file: refused to replace it",
                         path);
                return -EPERM;
        }
        return 0;
}

static int copy_opt_str(json_t *v, const char *key, char *dst, size_t dstlen, char *err,
                        size_t errlen)
{
        if (!json_is_string(v) || json_string_length(v) == 0) {
                snprintf(err, errlen, "options.%s must be a non-empty string", key);
                return -EINVAL;
        }
        if (json_string_length(v) >= dstlen ||
            strlen(json_string_value(v)) != json_string_length(v)) {
                snprintf(err, errlen, "options.%s is too long (max %zu bytes)", key, dstlen - 1);
                return -EINVAL;
        }
        memcpy(dst, json_string_value(v), json_string_length(v) + 1);
        return 0;
}

/* options.allowed_dirs: a list of absolute directory names (resolved when a path is checked). */
static int parse_allowed_dirs(json_t *v, struct mgmt_options *o, char *err, size_t errlen)
{
        size_t i;
        json_t *d;
        if (!json_is_array(v) || json_array_size(v) > MGMT_ALLOWED_DIRS_MAX) {
                snprintf(err, errlen,
                         "options.allowed_dirs must be a list of at most %u directories",
                         MGMT_ALLOWED_DIRS_MAX);
                return -EINVAL;
        }
        json_array_foreach(v, i, d)
        {
                const char *s = json_string_value(d);
                if (!s || s[0] != '/' || json_string_length(d) >= sizeof(o->allowed_dirs[0]) ||
                    strlen(s) != json_string_length(d)) {
                        snprintf(err, errlen,
                                 "options.allowed_dirs[%zu] must be an absolute directory name "
                                 "(shorter than %zu bytes)",
                                 i, sizeof(o->allowed_dirs[0]));
                        return -EINVAL;
                }
                memcpy(o->allowed_dirs[i], s, json_string_length(d) + 1);
        }
        o->n_allowed_dirs = (unsigned)json_array_size(v);
        return 0;
}

/* Validate (and optionally extract) the "options" object. */
static int parse_options(json_t *opts, struct mgmt_options *o, char *err, size_t errlen)
{
        struct mgmt_options tmp;
        const char *key;
        json_t *v;
        int rc;

        if (!o)
                o = &tmp;
        memset(o, 0, sizeof(*o));
        if (!opts)
                return 0;
        if (!json_is_object(opts)) {
                snprintf(err, errlen, "\"options\" must be an object");
                return -EINVAL;
        }
        json_object_foreach(opts, key, v)
        {
                if (strcmp(key, "state_dir") == 0) {
                        rc = copy_opt_str(v, key, o->state_dir, sizeof(o->state_dir), err, errlen);
                } else if (strcmp(key, "rpc_socket") == 0) {
                        rc =
                            copy_opt_str(v, key, o->rpc_socket, sizeof(o->rpc_socket), err, errlen);
                } else if (strcmp(key, "log_level") == 0) {
                        enum rt_log_level l;
                        rc = copy_opt_str(v, key, o->log_level, sizeof(o->log_level), err, errlen);
                        if (rc == 0 && rt_log_parse_level(o->log_level, &l) < 0) {
                                snprintf(err, errlen,
                                         "options.log_level must be error, warn, info or debug");
                                rc = -EINVAL;
                        }
                } else if (strcmp(key, "http_listen") == 0) {
                        char addr[64];
                        unsigned port;
                        rc = copy_opt_str(v, key, o->http_listen, sizeof(o->http_listen), err,
                                          errlen);
                        if (rc == 0 &&
                            mgmt_http_parse_listen(o->http_listen, addr, sizeof(addr), &port) < 0) {
                                snprintf(err, errlen,
                                         "options.http_listen must be PORT, ADDR:PORT or "
                                         "[IPv6]:PORT with a numeric address and a port 0-65535");
                                rc = -EINVAL;
                        }
                } else if (strcmp(key, "reactors") == 0) {
                        if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                            json_integer_value(v) > 1024) {
                                snprintf(err, errlen,
                                         "options.reactors must be an integer in [1, 1024]");
                                rc = -EINVAL;
                        } else {
                                o->reactors = (unsigned)json_integer_value(v);
                                rc = 0;
                        }
                } else if (strcmp(key, "xfer_pool_mib") == 0) {
                        if (!json_is_integer(v) || json_integer_value(v) < MGMT_XFER_POOL_MIN_MIB ||
                            json_integer_value(v) > MGMT_XFER_POOL_MAX_MIB) {
                                snprintf(err, errlen,
                                         "options.xfer_pool_mib must be an integer in [%u, %u]",
                                         MGMT_XFER_POOL_MIN_MIB, MGMT_XFER_POOL_MAX_MIB);
                                rc = -EINVAL;
                        } else {
                                o->xfer_pool_mib = (unsigned)json_integer_value(v);
                                rc = 0;
                        }
                } else if (strcmp(key, "login_timeout_ms") == 0 ||
                           strcmp(key, "idle_timeout_ms") == 0) {
                        bool login = key[0] == 'l';
                        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                            json_integer_value(v) > RT_TIMEOUT_MAX_MS) {
                                snprintf(err, errlen,
                                         "options.%s must be an integer in [0, %u] (0: no limit)",
                                         key, RT_TIMEOUT_MAX_MS);
                                rc = -EINVAL;
                        } else {
                                *(login ? &o->login_timeout_ms : &o->idle_timeout_ms) =
                                    (uint32_t)json_integer_value(v);
                                *(login ? &o->login_timeout_set : &o->idle_timeout_set) = true;
                                rc = 0;
                        }
                } else if (strcmp(key, "max_connections") == 0 ||
                           strcmp(key, "max_connections_per_host") == 0) {
                        bool host = strcmp(key, "max_connections_per_host") == 0;
                        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                            json_integer_value(v) > RT_MAX_CONNECTIONS_LIMIT) {
                                snprintf(err, errlen,
                                         "options.%s must be an integer in [0, %u] (0: no cap)",
                                         key, RT_MAX_CONNECTIONS_LIMIT);
                                rc = -EINVAL;
                        } else {
                                *(host ? &o->max_connections_per_host : &o->max_connections) =
                                    (uint32_t)json_integer_value(v);
                                *(host ? &o->max_conn_host_set : &o->max_conn_set) = true;
                                rc = 0;
                        }
                } else if (strcmp(key, "nop_interval_ms") == 0 ||
                           strcmp(key, "nop_timeout_ms") == 0 ||
                           strcmp(key, "rpc_idle_timeout_ms") == 0) {
                        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                            json_integer_value(v) > RT_TIMEOUT_MAX_MS) {
                                snprintf(err, errlen,
                                         "options.%s must be an integer in [0, %u] (0: off)", key,
                                         RT_TIMEOUT_MAX_MS);
                                rc = -EINVAL;
                        } else {
                                uint32_t ms = (uint32_t)json_integer_value(v);
                                if (key[0] == 'r') {
                                        o->rpc_idle_timeout_ms = ms;
                                        o->rpc_idle_set = true;
                                } else if (key[4] == 'i') {
                                        o->nop_interval_ms = ms;
                                        o->nop_interval_set = true;
                                } else {
                                        o->nop_timeout_ms = ms;
                                        o->nop_timeout_set = true;
                                }
                                rc = 0;
                        }
                } else if (strcmp(key, "reactor_poll") == 0) {
                        enum rt_poll_mode m;
                        if (!json_is_string(v) || rt_poll_mode_parse(json_string_value(v), &m)) {
                                snprintf(err, errlen,
                                         "options.reactor_poll must be \"off\", \"adaptive\" or "
                                         "\"always\"");
                                rc = -EINVAL;
                        } else {
                                o->reactor_poll = (unsigned)m;
                                o->reactor_poll_set = true;
                                rc = 0;
                        }
                } else if (strcmp(key, "reactor_poll_us") == 0) {
                        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                            json_integer_value(v) > RT_POLL_US_MAX) {
                                snprintf(err, errlen,
                                         "options.reactor_poll_us must be an integer in [0, %u]",
                                         RT_POLL_US_MAX);
                                rc = -EINVAL;
                        } else {
                                o->reactor_poll_us = (uint32_t)json_integer_value(v);
                                o->reactor_poll_us_set = true;
                                rc = 0;
                        }
                } else if (strcmp(key, "zerocopy_send_min") == 0) {
                        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                            json_integer_value(v) > RT_ZC_MIN_MAX) {
                                snprintf(err, errlen,
                                         "options.zerocopy_send_min must be an integer in [0, %u] "
                                         "(bytes; 0: off)",
                                         RT_ZC_MIN_MAX);
                                rc = -EINVAL;
                        } else {
                                o->zerocopy_send_min = (uint32_t)json_integer_value(v);
                                rc = 0;
                        }
                } else if (strcmp(key, "allow_block_devices") == 0) {
                        if (!json_is_boolean(v)) {
                                snprintf(err, errlen, "options.%s must be true or false", key);
                                rc = -EINVAL;
                        } else {
                                o->allow_block_devices = json_is_true(v);
                                rc = 0;
                        }
                } else if (strcmp(key, "allowed_dirs") == 0) {
                        rc = parse_allowed_dirs(v, o, err, errlen);
                } else if (strcmp(key, "gateway_id") == 0) {
                        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                            json_integer_value(v) > CORE_GATEWAY_ID_MAX) {
                                snprintf(err, errlen,
                                         "options.gateway_id must be an integer in [0, %u] (0: "
                                         "a lone gateway)",
                                         CORE_GATEWAY_ID_MAX);
                                rc = -EINVAL;
                        } else {
                                o->gateway_id = (unsigned)json_integer_value(v);
                                rc = 0;
                        }
                } else {
                        snprintf(err, errlen, "unknown option \"%.64s\"", key);
                        rc = -EINVAL;
                }
                if (rc < 0)
                        return rc;
        }
        return 0;
}

/* Check the top-level shape: only "options" and "config" are allowed. */
static int check_top(json_t *root, char *err, size_t errlen)
{
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v)
        {
                if (strcmp(key, "options") != 0 && strcmp(key, "config") != 0) {
                        snprintf(err, errlen,
                                 "unknown top-level key \"%.64s\" (expected options, config)", key);
                        return -EINVAL;
                }
        }
        json_t *cfg = json_object_get(root, "config");
        if (cfg && !json_is_array(cfg)) {
                snprintf(err, errlen, "\"config\" must be an array of {method, params}");
                return -EINVAL;
        }
        return parse_options(json_object_get(root, "options"), NULL, err, errlen);
}

/* The top level and every entry's shape ({method, params}); 0 or -EINVAL with a reason. */
static int check_shape(json_t *root, const char *src, char *err, size_t errlen)
{
        char msg[512];
        int rc = check_top(root, msg, sizeof(msg));
        if (rc < 0) {
                snprintf(err, errlen, "%s: %s", src, msg);
                return rc;
        }
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(root, "config"), i, e)
        {
                json_t *m = json_is_object(e) ? json_object_get(e, "method") : NULL;
                if (!json_is_string(m)) {
                        snprintf(err, errlen,
                                 "%s: config[%zu]: entry must be {\"method\": string, "
                                 "\"params\": object}",
                                 src, i);
                        return -EINVAL;
                }
                const char *key;
                json_t *v;
                json_object_foreach(e, key, v)
                {
                        if (strcmp(key, "method") != 0 && strcmp(key, "params") != 0) {
                                snprintf(err, errlen,
                                         "%s: config[%zu] (%.64s): unknown key \"%.64s\"", src, i,
                                         json_string_value(m), key);
                                return -EINVAL;
                        }
                }
        }
        return 0;
}

/* Replay every entry of root["config"]; stop at the first failure. */
static int apply(json_t *root, const char *src, char *err, size_t errlen)
{
        char msg[512];
        int rc = check_shape(root, src, err, errlen);
        if (rc < 0)
                return rc;
        json_t *cfg = json_object_get(root, "config");
        size_t i;
        json_t *e;
        json_array_foreach(cfg, i, e)
        {
                json_t *m = json_object_get(e, "method");
                json_t *result = NULL;
                int code = 0;
                rc = mgmt_rpc_call(json_string_value(m), json_object_get(e, "params"), &result,
                                   &code, msg, sizeof(msg));
                json_decref(result);
                if (rc < 0) {
                        snprintf(err, errlen, "%s: config[%zu] (%.64s): %s", src, i,
                                 json_string_value(m), msg);
                        return rc;
                }
        }
        LOG_INFO("mgmt", "%s: applied %zu config entries", src, json_array_size(cfg));
        return 0;
}

/* The file slated was started with (absolute) and the options it had: what a reload compares. */
static char cfg_path[PATH_MAX];
static struct mgmt_options cfg_opts;
/* Its "options" object as written (RPC thread, or before it starts): config_save writes it back,
 * so a saved config restarts or reloads with the same limits and allowed_dirs. */
static json_t *cfg_opts_json;

static void keep_options(json_t *root)
{
        json_t *o = json_object_get(root, "options");
        json_decref(cfg_opts_json);
        cfg_opts_json = json_is_object(o) && json_object_size(o) ? json_deep_copy(o) : NULL;
}

const char *mgmt_config_path(void)
{
        return cfg_path[0] ? cfg_path : NULL;
}

json_t *mgmt_config_read_checked(const char *path, char *err, size_t errlen)
{
        json_t *root = load_text(path, err, errlen);
        if (root && check_shape(root, path, err, errlen) < 0) {
                json_decref(root);
                root = NULL;
        }
        return root;
}

/*
 * Options of a reloaded file against the ones slated started with: only the
 * log level changes live (returned when it changed, pointing into root);
 * the others are logged as needing a restart.
 */
const char *mgmt_config_options_diff(json_t *root, const char *path)
{
        struct mgmt_options o;
        char msg[256];
        if (parse_options(json_object_get(root, "options"), &o, msg, sizeof(msg)) < 0)
                return NULL; /* cannot happen: check_shape parsed them */
        if (strcmp(o.state_dir, cfg_opts.state_dir) || strcmp(o.rpc_socket, cfg_opts.rpc_socket) ||
            strcmp(o.http_listen, cfg_opts.http_listen) || o.reactors != cfg_opts.reactors ||
            o.xfer_pool_mib != cfg_opts.xfer_pool_mib || o.gateway_id != cfg_opts.gateway_id)
                LOG_WARN("mgmt",
                         "reload %s: options state_dir, rpc_socket, http_listen, reactors, "
                         "xfer_pool_mib and gateway_id take effect only when slated restarts",
                         path);
        if (o.log_level[0] && strcmp(o.log_level, cfg_opts.log_level) != 0)
                return json_string_value(
                    json_object_get(json_object_get(root, "options"), "log_level"));
        return NULL;
}

void mgmt_config_options_commit(json_t *root)
{
        struct mgmt_options o;
        char msg[256];
        if (parse_options(json_object_get(root, "options"), &o, msg, sizeof(msg)) == 0) {
                cfg_opts = o;
                keep_options(root);
                mgmt_options_apply_limits(&o);
        }
}

void mgmt_config_paths_commit(json_t *root)
{
        struct mgmt_options o;
        char msg[256];
        if (parse_options(json_object_get(root, "options"), &o, msg, sizeof(msg)) == 0)
                mgmt_options_apply_paths(&o);
}

void mgmt_options_apply_limits(const struct mgmt_options *o)
{
        uint32_t login = o->login_timeout_set ? o->login_timeout_ms : RT_LOGIN_TIMEOUT_DEFAULT_MS;
        uint32_t idle = o->idle_timeout_set ? o->idle_timeout_ms : RT_IDLE_TIMEOUT_DEFAULT_MS;
        uint32_t maxc = o->max_conn_set ? o->max_connections : RT_MAX_CONNECTIONS_DEFAULT;
        uint32_t maxh = o->max_conn_host_set ? o->max_connections_per_host
                                             : RT_MAX_CONNECTIONS_PER_HOST_DEFAULT;
        uint32_t nopi = o->nop_interval_set ? o->nop_interval_ms : RT_NOP_INTERVAL_DEFAULT_MS;
        uint32_t nopt = o->nop_timeout_set ? o->nop_timeout_ms : RT_NOP_TIMEOUT_DEFAULT_MS;
        uint32_t rpci = o->rpc_idle_set ? o->rpc_idle_timeout_ms : RT_RPC_IDLE_DEFAULT_MS;
        mgmt_options_apply_paths(o);
        bool changed = atomic_exchange(&rt_limits.login_timeout_ms, login) != login;
        changed |= atomic_exchange(&rt_limits.nop_interval_ms, nopi) != nopi;
        changed |= atomic_exchange(&rt_limits.nop_timeout_ms, nopt) != nopt;
        changed |= atomic_exchange(&rt_limits.rpc_idle_timeout_ms, rpci) != rpci;
        changed |= atomic_exchange(&rt_limits.idle_timeout_ms, idle) != idle;
        changed |= atomic_exchange(&rt_limits.max_connections, maxc) != maxc;
        changed |= atomic_exchange(&rt_limits.max_connections_per_host, maxh) != maxh;
        if (changed)
                LOG_INFO("mgmt",
                         "limits: login timeout %u ms, discovery idle timeout %u ms, at most %u "
                         "connections, %u from one host (0: none)",
                         login, idle, maxc, maxh);
        if (changed)
                LOG_INFO("mgmt",
                         "limits: iSCSI NOP-In every %u ms of silence, answer within %u ms; RPC "
                         "clients idle %u ms are closed (0: off)",
                         nopi, nopt, rpci);
        enum rt_poll_mode pm =
            o->reactor_poll_set ? (enum rt_poll_mode)o->reactor_poll : RT_POLL_OFF;
        uint32_t pus = o->reactor_poll_us_set ? o->reactor_poll_us : RT_POLL_US_DEFAULT;
        if (o->zerocopy_send_min != rt_zc_min()) {
                rt_zc_set_min(o->zerocopy_send_min);
                if (o->zerocopy_send_min)
                        LOG_INFO("mgmt", "zero-copy sends for data of %u bytes or more",
                                 o->zerocopy_send_min);
                else
                        LOG_INFO("mgmt", "zero-copy sends off");
        }
        if (pm != rt_poll_mode() || pus != rt_poll_us()) {
                rt_poll_set(pm, pus);
                if (pm == RT_POLL_ADAPTIVE)
                        LOG_INFO("mgmt",
                                 "reactors: polling adaptive (spin %u us after work before "
                                 "sleeping)",
                                 pus);
                else
                        LOG_INFO("mgmt", "reactors: polling %s", rt_poll_mode_name(pm));
        }
}

/* ------------------------------------------------------------------ */
/* Path rules                                                          */
/* ------------------------------------------------------------------ */

static struct {
        unsigned n;
        char dirs[MGMT_ALLOWED_DIRS_MAX][1024];
        bool block;
} path_rules;

void mgmt_options_apply_paths(const struct mgmt_options *o)
{
        path_rules.n = o->n_allowed_dirs;
        memcpy(path_rules.dirs, o->allowed_dirs, sizeof(path_rules.dirs));
        path_rules.block = o->allow_block_devices;
}

/* Whether the resolved name real lies in (or is) the directory dir (resolved here). */
static bool path_under(const char *real, const char *dir)
{
        char rd[PATH_MAX];
        if (!dir || !realpath(dir, rd))
                return false;
        size_t n = strlen(rd);
        if (n == 1) /* "/" */
                return true;
        return strncmp(real, rd, n) == 0 && (real[n] == '\0' || real[n] == '/');
}

int mgmt_path_allowed(const char *path, enum mgmt_path_use what, char *err, size_t errlen)
{
        char real[PATH_MAX];
        struct stat st;
        if (!path || !path[0]) {
                snprintf(err, errlen, "empty path");
                return -EINVAL;
        }
        if (realpath(path, real)) {
                if (stat(real, &st) < 0) {
                        int e = errno;
                        snprintf(err, errlen, "%s: %s", path, strerror(e));
                        return -e;
                }
                if (S_ISBLK(st.st_mode)) {
                        if (what == MGMT_PATH_DATA && path_rules.block)
                                return 0;
                        snprintf(err, errlen,
                                 what == MGMT_PATH_DATA
                                     ? "%s is a block device: refused (options.allow_block_devices "
                                       "is false)"
                                     : "%s is a block device: refused",
                                 path);
                        return -EPERM;
                }
                if (!S_ISREG(st.st_mode)) {
                        snprintf(err, errlen, "%s is not a regular file: refused", path);
                        return -EPERM;
                }
        } else if (errno == ENOENT) {
                /* A new file: its directory must exist; the last component is a plain name. */
                char dir[PATH_MAX];
                const char *slash = strrchr(path, '/');
                const char *base = slash ? slash + 1 : path;
                if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
                        snprintf(err, errlen, "%s does not name a file", path);
                        return -EINVAL;
                }
                if (slash == path)
                        snprintf(dir, sizeof(dir), "/");
                else if (slash)
                        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
                else
                        snprintf(dir, sizeof(dir), ".");
                char rd[PATH_MAX];
                if (!realpath(dir, rd)) {
                        int e = errno;
                        snprintf(err, errlen, "%s: directory %s: %s", path, dir, strerror(e));
                        return -e;
                }
                /* A dangling symbolic link as the last component would be followed by open. */
                if (lstat(path, &st) == 0) {
                        snprintf(err, errlen, "%s is a dangling symbolic link: refused", path);
                        return -EPERM;
                }
                if ((size_t)snprintf(real, sizeof(real), "%s/%s", strcmp(rd, "/") ? rd : "",
                                     base) >= sizeof(real)) {
                        snprintf(err, errlen, "%s: name too long", path);
                        return -ENAMETOOLONG;
                }
        } else {
                int e = errno;
                snprintf(err, errlen, "%s: %s", path, strerror(e));
                return -e;
        }
        if (path_under(real, core_state_dir()))
                return 0;
        for (unsigned i = 0; i < path_rules.n; i++)
                if (path_under(real, path_rules.dirs[i]))
                        return 0;
        snprintf(err, errlen,
                 "%s (%s) is outside the state directory and options.allowed_dirs: refused", path,
                 real);
        return -EPERM;
}

int mgmt_config_read_options(const char *path, struct mgmt_options *o, char *err, size_t errlen)
{
        json_t *root = load_text(path, err, errlen);
        if (!root)
                return -EINVAL;
        char msg[512];
        int rc = check_top(root, msg, sizeof(msg));
        if (rc == 0)
                rc = parse_options(json_object_get(root, "options"), o, msg, sizeof(msg));
        if (rc < 0)
                snprintf(err, errlen, "%s: %s", path, msg);
        else {
                cfg_opts = *o;
                keep_options(root);
        }
        json_decref(root);
        return rc;
}

int mgmt_config_load_file(const char *path, char *err, size_t errlen)
{
        json_t *root = load_text(path, err, errlen);
        if (!root)
                return -EINVAL;
        int rc = apply(root, path, err, errlen);
        json_decref(root);
        if (rc == 0 && !realpath(path, cfg_path))
                snprintf(cfg_path, sizeof(cfg_path), "%s", path);
        return rc;
}

int mgmt_config_load_default(char *err, size_t errlen)
{
        json_error_t je;
        json_t *root = json_loads(default_config, 0, &je);
        if (!root) {
                snprintf(err, errlen, "embedded default config: %s", je.text);
                return -EINVAL;
        }
        int rc = apply(root, "default config", err, errlen);
        json_decref(root);
        return rc;
}

/* ------------------------------------------------------------------ */
/* config_save                                                         */
/* ------------------------------------------------------------------ */

static json_t *entry(const char *method, json_t *params)
{
        return json_pack("{s:s, s:o}", "method", method, "params", params ? params : json_object());
}

static void collect_ns(struct core_ns *ns, void *arg)
{
        json_t *p = mgmt_ns_params_json(ns);
        if (p)
                json_array_append_new((json_t *)arg, p);
}

static int cmp_name(const void *a, const void *b)
{
        json_t *const *x = a, *const *y = b;
        const char *nx = json_string_value(json_object_get(*x, "name"));
        const char *ny = json_string_value(json_object_get(*y, "name"));
        return strcmp(nx ? nx : "", ny ? ny : "");
}

/* The first string member of o among the given keys (the iSCSI JSON may name things either way). */
static const char *str_member(json_t *o, const char *k1, const char *k2)
{
        json_t *v = json_object_get(o, k1);
        if (!json_is_string(v) && k2)
                v = json_object_get(o, k2);
        return json_string_value(v);
}

static json_t *int_member(json_t *o, const char *k1, const char *k2)
{
        json_t *v = json_object_get(o, k1);
        if (!json_is_integer(v) && k2)
                v = json_object_get(o, k2);
        return json_is_integer(v) ? v : NULL;
}

/*
 * The LUN maps of one target as listed by iscsi_targets_json():
 * "luns": [{"lun": N, "namespace": "..."}] (array) or {"N": "ns"} (object).
 */
static void dump_luns(json_t *out, const char *iqn, json_t *luns)
{
        if (json_is_array(luns)) {
                size_t i;
                json_t *l;
                json_array_foreach(luns, i, l)
                {
                        json_t *lun = int_member(l, "lun", "id");
                        const char *ns = str_member(l, "namespace", "ns");
                        if (lun && ns)
                                json_array_append_new(
                                    out, entry("iscsi_lun_map",
                                               json_pack("{s:s, s:O, s:s}", "target", iqn, "lun",
                                                         lun, "namespace", ns)));
                }
        } else if (json_is_object(luns)) {
                const char *k;
                json_t *v;
                json_object_foreach(luns, k, v)
                {
                        char *end;
                        long lun = strtol(k, &end, 10);
                        const char *ns = json_is_string(v) ? json_string_value(v)
                                                           : str_member(v, "namespace", "ns");
                        if (*end == '\0' && lun >= 0 && ns)
                                json_array_append_new(
                                    out, entry("iscsi_lun_map",
                                               json_pack("{s:s, s:I, s:s}", "target", iqn, "lun",
                                                         (json_int_t)lun, "namespace", ns)));
                }
        }
}

/*
 * NVMe: subsystems (with their allowed hosts and NSIDs), then listeners,
 * in the order that lets a replay succeed.
 */
static void dump_nvmf(json_t *out, bool with_secrets)
{
        json_t *subs = nvme_subsystems_json();
        json_t *auth = nvme_auth_json(with_secrets); /* DH-HMAC-CHAP secrets and preferences */
        json_t *lis = nvmf_tcp_listeners_json();
        size_t i, j;
        json_t *s, *x;
        json_array_foreach(subs, i, s)
        {
                const char *nqn = json_string_value(json_object_get(s, "nqn"));
                const char *type = json_string_value(json_object_get(s, "subtype"));
                if (!nqn || (type && strcmp(type, "discovery") == 0))
                        continue;
                json_array_append_new(
                    out,
                    entry("nvmf_subsystem_create",
                          json_pack("{s:s, s:O, s:O, s:O, s:O}", "nqn", nqn, "serial",
                                    json_object_get(s, "serial_number"), "model",
                                    json_object_get(s, "model_number"), "allow_any_host",
                                    json_object_get(s, "allow_any_host"), "copy_cross_namespace",
                                    json_object_get(s, "copy_cross_namespace"))));
                json_t *sa = json_object_get(auth, nqn);
                json_array_foreach(json_object_get(s, "hosts"), j, x)
                {
                        json_t *a =
                            json_pack("{s:s, s:O, s:O}", "nqn", nqn, "host", x, "keep_any_host",
                                      json_object_get(s, "allow_any_host"));
                        json_t *hk =
                            json_object_get(json_object_get(sa, "hosts"), json_string_value(x));
                        const char *ks[] = {"dhchap_secret", "dhchap_ctrl_secret"};
                        for (int k = 0; k < 2; k++) /* present only with include_secrets */
                                if (json_object_get(hk, ks[k]))
                                        json_object_set(a, ks[k], json_object_get(hk, ks[k]));
                        /* A host's TLS PSK only when asked (include_secrets), like CHAP. */
                        char psk[160];
                        if (with_secrets && json_is_string(x) &&
                            nvmf_tls_host_psk_get(nqn, json_string_value(x), psk, sizeof(psk)) == 0)
                                json_object_set_new(a, "tls_psk", json_string(psk));
                        json_array_append_new(out, entry("nvmf_subsystem_add_host", a));
                }
                if (json_object_get(sa, "digests") || json_object_get(sa, "dhgroups")) {
                        json_t *a = json_pack("{s:s}", "nqn", nqn);
                        json_t *d = json_object_get(sa, "digests"),
                               *g = json_object_get(sa, "dhgroups");
                        char buf[128];
                        size_t k;
                        json_t *v;
                        json_t *lists[2] = {d, g};
                        const char *names[2] = {"digests", "dhgroups"};
                        for (int li = 0; li < 2; li++) {
                                if (!lists[li])
                                        continue;
                                buf[0] = '\0';
                                json_array_foreach(lists[li], k, v)
                                {
                                        size_t l = strlen(buf);
                                        snprintf(buf + l, sizeof(buf) - l, "%s%s", l ? "," : "",
                                                 json_string_value(v));
                                }
                                json_object_set_new(a, names[li], json_string(buf));
                        }
                        json_array_append_new(out, entry("nvmf_subsystem_auth", a));
                }
                json_array_foreach(json_object_get(s, "namespaces"), j, x) json_array_append_new(
                    out, entry("nvmf_ns_attach", json_pack("{s:s, s:O, s:O}", "nqn", nqn, "nsid",
                                                           json_object_get(x, "nsid"), "namespace",
                                                           json_object_get(x, "name"))));
        }
        json_array_foreach(lis, i, x) json_array_append_new(
            out,
            entry("nvmf_listener_add",
                  strcmp(json_string_value(json_object_get(x, "tls")), "none") == 0
                      ? json_pack("{s:O, s:O}", "addr", json_object_get(x, "addr"), "port",
                                  json_object_get(x, "port"))
                      : json_pack("{s:O, s:O, s:O}", "addr", json_object_get(x, "addr"), "port",
                                  json_object_get(x, "port"), "tls", json_object_get(x, "tls"))));
        json_decref(subs);
        json_decref(lis);
        json_decref(auth);
}

static void dump_pool(const struct core_pool_info *pi, void *arg)
{
        json_array_append_new((json_t *)arg,
                              entry("pool_set", json_pack("{s:s, s:I}", "dir", pi->dir, "limit",
                                                          (json_int_t)pi->limit)));
}

json_t *mgmt_config_dump(bool with_secrets)
{
        json_t *out = json_array();
        json_t *nss = json_array();
        json_t *targets = iscsi_targets_json();
        json_t *portals = iscsi_portals_json();
        json_t *maps = json_array();
        json_t *root = NULL;
        if (!out || !nss || !maps)
                goto out;

        /* 0. provisioning pools (namespaces join them whichever comes first) */
        core_pool_foreach(dump_pool, out);

        /* 1. namespaces, sorted by name so saved files diff cleanly */
        core_ns_foreach(collect_ns, nss);
        size_t n = json_array_size(nss);
        json_t **v = calloc(n ? n : 1, sizeof(*v));
        if (!v)
                goto out;
        for (size_t i = 0; i < n; i++)
                v[i] = json_array_get(nss, i);
        qsort(v, n, sizeof(*v), cmp_name);
        for (size_t i = 0; i < n; i++) {
                json_array_append_new(out, entry("namespace_create", json_incref(v[i])));
                /* namespace_create starts with the cache on: replay it being off. */
                const char *nm = json_string_value(json_object_get(v[i], "name"));
                struct core_ns *ns = nm ? core_ns_find(nm) : NULL;
                if (ns && !atomic_load(&ns->wce))
                        json_array_append_new(
                            out, entry("namespace_set",
                                       json_pack("{s:s, s:b}", "name", nm, "write_cache", false)));
        }
        free(v);
        /* access groups that are not optimized (core/ana.h), before any host can connect */
        /* (the configured state: a takeover is not configuration) */
        for (uint32_t g = 1; g <= CORE_ANA_GROUPS; g++)
                if (core_ana_configured_state(g) != CORE_ANA_OPTIMIZED)
                        json_array_append_new(
                            out,
                            entry("ana_group_set",
                                  json_pack("{s:i, s:s}", "group", (int)g, "state",
                                            core_ana_state_name(core_ana_configured_state(g)))));
        /* the watched peers (automatic takeover) */
        {
                struct core_ana_peer p[CORE_ANA_PEERS_MAX];
                unsigned iv;
                unsigned np = core_ana_peers_get(p, NULL, CORE_ANA_PEERS_MAX, &iv);
                char txt[CORE_ANA_PEERS_MAX * (CORE_ANA_PEER_ADDR_MAX + 64)];
                core_ana_peers_format(p, np, txt, sizeof(txt));
                if (np)
                        json_array_append_new(
                            out, entry("ana_peers_set", json_pack("{s:s, s:i}", "peers", txt,
                                                                  "interval_ms", (int)iv)));
        }

        /* 2. targets, 3. their LUN maps */
        size_t i;
        json_t *t;
        json_array_foreach(targets, i, t)
        {
                const char *iqn =
                    json_is_string(t) ? json_string_value(t) : str_member(t, "name", "iqn");
                if (!iqn)
                        continue;
                json_array_append_new(
                    out, entry("iscsi_target_create", json_pack("{s:s}", "name", iqn)));
                dump_luns(maps, iqn, json_object_get(t, "luns"));
        }
        json_array_extend(out, maps);
        /* CHAP settings (secrets only when asked: config_save include_secrets) */
        json_t *auth = iscsi_auth_json(with_secrets);
        json_array_foreach(auth, i, t)
            json_array_append_new(out, entry("iscsi_target_auth", json_incref(t)));
        json_decref(auth);
        /* initiator ACLs (their CHAP secrets as the target's) */
        json_t *acl = iscsi_acl_json(NULL, with_secrets);
        json_array_foreach(acl, i, t)
            json_array_append_new(out, entry("iscsi_acl_add", json_incref(t)));
        json_decref(acl);

        /* 4. portals last: hosts can connect only once everything behind them exists */
        json_array_foreach(portals, i, t)
        {
                const char *addr = str_member(t, "addr", "address");
                json_t *port = int_member(t, "port", NULL);
                if (addr)
                        json_array_append_new(
                            out, entry("iscsi_portal_add",
                                       port ? json_pack("{s:s, s:O}", "addr", addr, "port", port)
                                            : json_pack("{s:s}", "addr", addr)));
        }
        dump_nvmf(out, with_secrets);
        root = cfg_opts_json ? json_pack("{s:O, s:O}", "options", cfg_opts_json, "config", out)
                             : json_pack("{s:O}", "config", out);
out:
        json_decref(out);
        json_decref(nss);
        json_decref(maps);
        json_decref(targets);
        json_decref(portals);
        return root;
}
