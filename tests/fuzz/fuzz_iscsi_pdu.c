/*
 * libFuzzer target: arbitrary bytes as the TCP stream of one iSCSI
 * connection (RFC 7143), through the real receive state machine, login,
 * full-feature PDU handling and the SCSI personality on a running reactor.
 * The bytes go in through one end of a socketpair whose other end the
 * transport serves like any accepted connection (stream.h); what the
 * target sends is dropped.  Target iqn.2024-01.org.slate:test (the name
 * the seeds log in to) maps one 8 MiB mem namespace at LUN 0 (two more
 * targets: one with CHAP, one with an initiator ACL).  Seed with a
 * valid login followed by commands.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/ns.h"
#include "iscsi/iscsi.h"
#include "iscsi/internal.h"
#include "rt/log.h"
#include "rt/reactor.h"
#include "stream.h"

#define FUZZ_IQN      "iqn.2024-01.org.slate:test"
#define FUZZ_IQN_CHAP "iqn.2024-01.org.slate:chap"
#define FUZZ_IQN_ACL  "iqn.2024-01.org.slate:acl"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int setup_once(void)
{
        static int done;
        if (done)
                return 0;
        done = 1;
        rt_log_threshold = RT_LOG_ERR;
        if (rt_init(1) < 0 || rt_start() < 0)
                return -1;
        char dir[] = "/tmp/slate-fuzz-iscsi-XXXXXX";
        if (!mkdtemp(dir))
                return -1;
        core_set_state_dir(dir);
        char err[256];
        struct core_ns *ns;
        struct core_ns_params p = {
            .name = "fz0", .backend = "mem", .size_bytes = 8u << 20, .block_size = 512};
        if (core_ns_create(&p, &ns, err, sizeof(err)) < 0)
                return -1;
        if (iscsi_init() < 0 || iscsi_target_add(FUZZ_IQN, err, sizeof(err)) < 0 ||
            iscsi_lun_map(FUZZ_IQN, 0, "fz0", err, sizeof(err)) < 0)
                return -1;
        /* A second target that requires mutual CHAP (seed chap_login): the CHAP exchange. */
        if (iscsi_target_add(FUZZ_IQN_CHAP, err, sizeof(err)) < 0 ||
            iscsi_lun_map(FUZZ_IQN_CHAP, 0, "fz0", err, sizeof(err)) < 0 ||
            iscsi_auth_set(FUZZ_IQN_CHAP, "fuzz", "fuzz-secret-123", "tgt", "target-secret-456",
                           err, sizeof(err)) < 0)
                return -1;
        /*
         * A third with an initiator ACL (seed acl_masked): iqn.2024-01.org.slate:i sees
         * LUN 1 of LUNs 0 and 1, others are refused (the ACL check, the masked lookup).
         */
        if (iscsi_target_add(FUZZ_IQN_ACL, err, sizeof(err)) < 0 ||
            iscsi_lun_map(FUZZ_IQN_ACL, 0, "fz0", err, sizeof(err)) < 0 ||
            iscsi_lun_map(FUZZ_IQN_ACL, 1, "fz0", err, sizeof(err)) < 0 ||
            iscsi_acl_add(FUZZ_IQN_ACL, "iqn.2024-01.org.slate:i", "1", NULL, NULL, NULL, NULL, err,
                          sizeof(err)) < 0)
                return -1;
        return 0;
}

static int attach(int fd)
{
        return iscsi_conn_attach(fd, rt_get(0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (setup_once() < 0)
                abort();
        fuzz_stream_feed(data, size, attach, iscsi_conn_live, 2000);
        return 0;
}
