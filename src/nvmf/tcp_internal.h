/*
 * NVMe/TCP transport internals shared with its unit tests and fuzz target:
 * the common-header and SGL checks (pure, synchronous) and entry points
 * that attach a queue pair to an existing socket (the tests and the fuzzer
 * use one end of a socketpair) and count live queue pairs.
 */
#ifndef NVMF_TCP_INTERNAL_H
#define NVMF_TCP_INTERNAL_H

#ifndef SLATE_MODULE_NVMF
#error "nvmf/tcp_internal.h is private to src/nvmf/; use nvmf/nvmf.h"
#endif

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nvme/nvme.h"
#include "nvmf/nvmf.h"
#include "slate/spec/nvme_tcp.h"

/*
 * Announced in ICResp: the most PDU data of one H2CData PDU, and the most
 * one R2T asks for.  1 MiB, a command slot's own buffer and iSCSI's
 * MaxBurstLength: a write up to 1 MiB takes one R2T.  (128 KiB made a
 * 128 KiB write with extended-LBA metadata, 131,328 bytes, take a second
 * R2T round trip for its last 256 bytes; Linux nvmet announces 4 MiB.)
 */
#define NVMF_TCP_MAXH2CDATA (1024u * 1024)
#define NVMF_TCP_CPDA       0 /* we ask no data alignment of the host */

/*
 * Check a received common header against the PDU type rules (3.6.1, 3.6.2)
 * and the negotiated state.  ic_done: ICReq/ICResp already exchanged;
 * hdgst/ddgst: digests enabled.  Returns 0 and *dlen (data bytes, without
 * digest) when valid; -EPROTO with *fes and *fei for a C2HTermReq; -ECONNRESET
 * when the connection must drop without a TermReq (bad TermReq length).
 */
int nvmf_tcp_check_ch(const struct nvme_tcp_ch *ch, bool ic_done, bool hdgst, bool ddgst,
                      uint32_t *dlen, uint16_t *fes, uint32_t *fei);

/*
 * The data pointer of a received capsule before parsing (PSDT, descriptor
 * kinds TCP carries, in-capsule offset and length; Transport Data Block
 * lengths up to buf_max), and after parsing against the transfer the
 * command declared (nvme_queue.check_xfer).  NVME_XFER_OK or the error the
 * personality reports (nvme_cmd_reject_xfer).
 */
enum nvme_xfer_error nvmf_tcp_check_sgl(const struct nvme_cmd *cmd, uint32_t buf_max);
enum nvme_xfer_error nvmf_tcp_check_xfer(const struct nvme_cmd *cmd, uint32_t len, bool h2c);

/* Make a queue pair of a connected socket on reactor r_idx (takes the fd). 0 or -errno. */
int nvmf_tcp_attach_fd(int fd, unsigned r_idx);
/* The same as if accepted on a listener with that TLS mode. */
int nvmf_tcp_attach_fd_tls(int fd, unsigned r_idx, enum nvmf_tls_mode tls);

/* Number of queue pairs alive (not yet freed). */
unsigned nvmf_tcp_live_queues(void);

#endif
