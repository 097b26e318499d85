/*
 * The NVMe/TCP transport as the rest of the daemon sees it: listeners.
 * Queue pairs and the PDU state machine live in tcp.c on reactors.
 */
#ifndef NVMF_NVMF_H
#define NVMF_NVMF_H

#include <stddef.h>
#include <stdint.h>

int nvmf_tcp_init(void);
void nvmf_tcp_fini(void); /* closes listeners and every queue pair */
/*
 * The NVMe/TCP secure channel a listener offers (TLS 1.3 with PSKs, see
 * README "NVMe/TCP TLS"): none, required (every connection), or allowed
 * (TLS or plain, told apart by the first byte).
 */
enum nvmf_tls_mode { NVMF_TLS_NONE = 0, NVMF_TLS_REQUIRED = 1, NVMF_TLS_ALLOWED = 2 };
const char *nvmf_tls_mode_name(enum nvmf_tls_mode m);
/* "none" (or NULL), "required", "allowed": 0, else -EINVAL. */
int nvmf_tls_mode_parse(const char *s, enum nvmf_tls_mode *m);

int nvmf_tcp_listener_add(const char *addr, uint16_t port, enum nvmf_tls_mode tls, char *err,
                          size_t errlen);
int nvmf_tcp_listener_del(const char *addr, uint16_t port, char *err, size_t errlen);

struct json_t;
struct json_t *nvmf_tcp_listeners_json(void);
/* NVMe/TCP connections (queues, each its own connection) open now (daemon_status). */
unsigned nvmf_tcp_connections(void);

/*
 * A host's configured TLS PSK for a subsystem ("NVMeTLSkey-1:HH:...:"), or
 * NULL to drop it.  0, or -EINVAL (bad key, message in err) / -ENOMEM.
 * The key is never logged.
 */
int nvmf_tls_host_psk_set(const char *subnqn, const char *hostnqn, const char *key, char *err,
                          size_t errlen);
/* Forget every key of a subsystem (deleted). */
void nvmf_tls_subsys_forget(const char *subnqn);
/* The key text of (subnqn, hostnqn) into out for config_save: 0 or -ENOENT. */
int nvmf_tls_host_psk_get(const char *subnqn, const char *hostnqn, char *out, size_t len);

#endif
