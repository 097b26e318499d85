/* slate-perf: the NVMe/TCP TLS 1.3 PSK client (tls.c). */
#ifndef PERF_TLS_H
#define PERF_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct perf_tls;

/*
 * TLS 1.3 handshake on the connected (blocking) socket fd with the PSK
 * derived from key (interchange format) for hostnqn/subnqn; identity, if
 * not NULL, is offered instead of the derived one (with the PSK derived for
 * the NQNs it names, if it is a "NVMe0R0x <host> <sub>" one).  0 and *out,
 * or -errno.
 */
int perf_tls_connect(struct perf_tls **out, int fd, const char *key, const char *identity,
                     const char *hostnqn, const char *subnqn);
const char *perf_tls_cipher(const struct perf_tls *t);
/* Bytes taken from the head of iov (> 0), -EAGAIN (retry later with the same head), -errno. */
ssize_t perf_tls_writev(struct perf_tls *t, const struct iovec *iov, int n);
/* Bytes read, 0 at the end of the stream, -EAGAIN, -errno. */
ssize_t perf_tls_read(struct perf_tls *t, void *buf, size_t len);
/* Decrypted bytes wait in OpenSSL (no poll would report them). */
bool perf_tls_pending(const struct perf_tls *t);
void perf_tls_free(struct perf_tls *t);

#endif
