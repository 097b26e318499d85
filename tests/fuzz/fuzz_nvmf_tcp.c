/*
 * libFuzzer target: arbitrary bytes as the TCP stream of one NVMe/TCP
 * queue pair (NVMe/TCP 1.0 section 3.6), through the real PDU receive
 * state machine, SGL checks, R2T/H2CData bookkeeping and the NVMe
 * personality.  The bytes go in through one end of a socketpair whose
 * other end the transport serves like any connection (stream.h); what the
 * target sends is dropped.  One 8 MiB mem namespace is exported by a
 * subsystem that admits any host.  When the first input byte is odd a
 * valid ICReq (no digests) is prepended, so the fuzzer reaches capsules
 * quickly; when it is even, its bits 2:1 pick the listener's secure channel
 * (tls=none, required, allowed: the first-byte detection, the OpenSSL
 * server's ClientHello parsing and the PSK lookup of a configured host).
 * Every input is also offered as a TLS PSK identity to the identity parser.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/ns.h"
#include "nvme/nvme.h"
#include "nvmf/tcp_internal.h"
#include "nvmf/tls.h"
#include "rt/log.h"
#include "rt/reactor.h"
#include "stream.h"

#define FUZZ_NQN "nqn.2026-12.io.slate:fuzz"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static enum nvmf_tls_mode tls_mode;

static int attach(int fd)
{
        return nvmf_tcp_attach_fd_tls(fd, 0, tls_mode);
}

static void feed(const uint8_t *data, size_t len)
{
        fuzz_stream_feed(data, len, attach, nvmf_tcp_live_queues, 2000);
}

static int setup_once(void)
{
        static int done;
        if (done)
                return 0;
        done = 1;
        rt_log_threshold = RT_LOG_ERR;
        if (rt_init(1) < 0 || rt_start() < 0)
                return -1;
        char dir[] = "/tmp/slate-fuzz-nvmf-XXXXXX";
        if (!mkdtemp(dir))
                return -1;
        core_set_state_dir(dir);
        char err[256];
        struct core_ns *ns;
        struct core_ns_params p = {
            .name = "fz0", .backend = "mem", .size_bytes = 8u << 20, .block_size = 512};
        if (core_ns_create(&p, &ns, err, sizeof(err)) < 0)
                return -1;
        nvme_subsys_add(FUZZ_NQN, "FUZZ0001", "Slate fuzz", err, sizeof(err));
        nvme_subsys_allow_host(FUZZ_NQN, "*", err, sizeof(err));
        /* A configured PSK, so a ClientHello naming its identity reaches the derivation. */
        nvmf_tls_host_psk_set(
            FUZZ_NQN, "nqn.2014-08.org.nvmexpress:uuid:fuzz",
            "NVMeTLSkey-1:01:VlKQBA9LJAbRTPvxqvEOMBHyuNAkt4w47dJqkq5rXdxXFc2V:", err, sizeof(err));
        nvme_ns_attach(FUZZ_NQN, 1, "fz0", err, sizeof(err));
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (setup_once() < 0)
                abort();
        int cipher;
        char host[224], sub[224];
        nvmf_tls_identity_split((const char *)data, size, &cipher, host, sizeof(host), sub,
                                sizeof(sub));
        tls_mode = NVMF_TLS_NONE;
        if (size && (data[0] & 1)) {
                uint8_t *buf = malloc(128 + size);
                if (!buf)
                        return 0;
                struct nvme_tcp_icreq *ic = (struct nvme_tcp_icreq *)buf;
                memset(ic, 0, sizeof(*ic));
                ic->ch.pdu_type = NVME_TCP_PDU_ICREQ;
                ic->ch.hlen = sizeof(*ic);
                put_le32(&ic->ch.plen, sizeof(*ic));
                memcpy(buf + 128, data + 1, size - 1);
                feed(buf, 128 + size - 1);
                free(buf);
                return 0;
        }
        if (size)
                tls_mode = (enum nvmf_tls_mode)((data[0] >> 1) % 3);
        feed(data, size);
        return 0;
}
