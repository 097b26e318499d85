/*
 * Management: the JSON config (a replayable list of RPC calls, like
 * SPDK's save_config), the JSON-RPC 2.0 server on a Unix socket, and the
 * embedded default configuration.
 */
#ifndef MGMT_MGMT_H
#define MGMT_MGMT_H

#include <stddef.h>

/* Apply a config file: {"config":[{"method":..,"params":{..}},..]}.  0 or -errno. */
int mgmt_config_load_file(const char *path, char *err, size_t errlen);
/* Apply the embedded default (one 1 GiB thin file namespace, LUN 0, 127.0.0.1:3260). */
int mgmt_config_load_default(char *err, size_t errlen);

/* Start/stop the RPC server thread on a Unix socket path. */
int mgmt_rpc_start(const char *sock_path);
void mgmt_rpc_stop(void);

/* Dispatch one JSON-RPC request text; returns a malloc'd response text (NULL for notifications). */
char *mgmt_rpc_handle(const char *req, size_t len);

#endif
