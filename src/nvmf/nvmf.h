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
int nvmf_tcp_listener_add(const char *addr, uint16_t port, char *err, size_t errlen);
int nvmf_tcp_listener_del(const char *addr, uint16_t port, char *err, size_t errlen);

struct json_t;
struct json_t *nvmf_tcp_listeners_json(void);
/* NVMe/TCP connections (queues, each its own connection) open now (daemon_status). */
unsigned nvmf_tcp_connections(void);

#endif
