/*
 * Management: the JSON config (a replayable list of RPC calls, like
 * SPDK's save_config), the JSON-RPC 2.0 server on a Unix socket, and the
 * embedded default configuration.
 */
#ifndef MGMT_MGMT_H
#define MGMT_MGMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_t;

/* Apply a config file: {"config":[{"method":..,"params":{..}},..]}.  0 or -errno. */
int mgmt_config_load_file(const char *path, char *err, size_t errlen);
/* Apply the embedded default (one 1 GiB thin file namespace, LUN 0, 127.0.0.1:3260). */
int mgmt_config_load_default(char *err, size_t errlen);

/* Start/stop the RPC server thread on a Unix socket path. */
int mgmt_rpc_start(const char *sock_path);
void mgmt_rpc_stop(void);

/* Dispatch one JSON-RPC request text; returns a malloc'd response text (NULL for notifications). */
char *mgmt_rpc_handle(const char *req, size_t len);

/*
 * Top-level "options" of a config file, read before the runtime starts
 * (command-line flags override them).  Empty string / 0 = not set.
 */
#define MGMT_ALLOWED_DIRS_MAX 16
struct mgmt_options {
        char state_dir[4096];
        char rpc_socket[108];
        char log_level[16];
        char http_listen[80]; /* metrics and status page: PORT, ADDR:PORT, [IPv6]:PORT */
        unsigned reactors;
        unsigned xfer_pool_mib; /* large-transfer buffer pool per reactor (rt/bigbuf.h) */
        /* rt/limits.h; live on reload.  *_set: given (0 is "no limit"). */
        bool login_timeout_set, idle_timeout_set, max_conn_set, max_conn_host_set;
        uint32_t login_timeout_ms, idle_timeout_ms, max_connections, max_connections_per_host;
        bool nop_interval_set, nop_timeout_set, rpc_idle_set;
        uint32_t nop_interval_ms, nop_timeout_ms, rpc_idle_timeout_ms;
        /* rt/reactor.h polling; live on reload.  Unset: off, RT_POLL_US_DEFAULT. */
        bool reactor_poll_set, reactor_poll_us_set;
        unsigned reactor_poll; /* enum rt_poll_mode */
        uint32_t reactor_poll_us;
        uint32_t zerocopy_send_min; /* bytes; 0: zero-copy sends off (rt/sock.h) */
        /* Where namespace files and config_save may go besides the state dir (live on reload). */
        unsigned n_allowed_dirs;
        char allowed_dirs[MGMT_ALLOWED_DIRS_MAX][1024];
        bool allow_block_devices;
        /* Several gateways, one namespace (core/ana.h): 0 alone, else 1..15; at start only. */
        unsigned gateway_id;
};
/* xfer_pool_mib: room for one largest transfer (32 MiB) at least; default 64. */
#define MGMT_XFER_POOL_MIN_MIB 32u
#define MGMT_XFER_POOL_MAX_MIB 65536u
int mgmt_config_read_options(const char *path, struct mgmt_options *o, char *err, size_t errlen);
/*
 * Whether config_save may write path: it does not exist, or it is a regular
 * file (not a symbolic link) of slated's own uid that is empty or a slated
 * config file; otherwise -EPERM (or -errno) with the reason in err.
 */
int mgmt_config_file_is_ours(const char *path, char *err, size_t errlen);

/* Put the options' connection limits and path rules in force (start-up; reload does it itself). */
void mgmt_options_apply_limits(const struct mgmt_options *o);

/*
 * The path rules (README "Security"): whether path may be a namespace's
 * data file (what = MGMT_PATH_DATA) or a config_save target
 * (MGMT_PATH_CONFIG).  It is resolved (realpath of the path, or of its
 * directory when it does not exist yet: symbolic links and ".." followed)
 * and must lie in the state directory or one of options.allowed_dirs; a
 * block device is a data file only with options.allow_block_devices, and
 * anywhere then.  0, or -EPERM / -errno with the reason in err.
 */
/* Only the path rules of o (a reload puts them in force before its steps run). */
void mgmt_options_apply_paths(const struct mgmt_options *o);
/* The path rules of a config file being reloaded (before its steps run). */
void mgmt_config_paths_commit(struct json_t *root);
enum mgmt_path_use { MGMT_PATH_DATA, MGMT_PATH_CONFIG };
int mgmt_path_allowed(const char *path, enum mgmt_path_use what, char *err, size_t errlen);

/*
 * Run one method of the RPC table (the one dispatcher shared by the socket
 * and the config loader).  params is borrowed (NULL = none); *result gets
 * a new reference on success.  Returns 0 or -errno; *rpc_code gets the
 * JSON-RPC error code (-32601, -32602, -32000) and err the message.
 */
int mgmt_rpc_call(const char *method, struct json_t *params, struct json_t **result, int *rpc_code,
                  char *err, size_t errlen);

/* A namespace as namespace_create params (new reference): namespace_list and config_save. */
struct core_ns;
struct json_t *mgmt_ns_params_json(struct core_ns *ns);

/* The running state as a replayable config {"config":[...]} (new reference, NULL on ENOMEM). */
struct json_t *mgmt_config_dump(bool with_secrets);

/*
 * Live reconfiguration (reload.c): re-read path (NULL = the file slated was
 * started with) and apply the difference to the running state; dry_run only
 * computes it.  *result gets {"path", "dry_run", "changes", "steps": [...]}.
 * Runs on the control path (under the RPC lock).  0 or -errno with err set.
 */
int mgmt_config_reload(const char *path, bool dry_run, struct json_t **result, char *err,
                       size_t errlen);
/*
 * Called around every (non-dry-run) reload on the control-path thread:
 * before() when it starts, after(rc) when it ends (rc 0 = applied) — the
 * place for sd_notify("RELOADING=1") / sd_notify("READY=1").
 */
void mgmt_reload_set_hooks(void (*before)(void), void (*after)(int rc));
/* Ask the RPC thread to reload (async-signal-safe: writes an eventfd). */
void mgmt_rpc_request_reload(void);

/* config.c, for reload.c */
const char *mgmt_config_path(void);
struct json_t *mgmt_config_read_checked(const char *path, char *err, size_t errlen);
const char *mgmt_config_options_diff(struct json_t *root, const char *path);
void mgmt_config_options_commit(struct json_t *root);
/* rpc.c, for reload.c: parameter checks without running the method; a size param. */
int mgmt_rpc_check(const char *method, struct json_t *params, char *err, size_t errlen);
int mgmt_parse_size_json(struct json_t *v, uint64_t *out);

#endif
