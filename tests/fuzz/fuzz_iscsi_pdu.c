/*
 * libFuzzer target: arbitrary bytes as the TCP stream of one iSCSI
 * connection (RFC 7143), through the real receive state machine, login
 * and full-feature PDU handling, with sockets and the backend faked
 * (iscsi_conn_fuzz_feed).  Seed with a valid login followed by commands.
 */
#include <stddef.h>
#include <stdint.h>

#include "iscsi/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        iscsi_conn_fuzz_feed(data, size);
        return 0;
}
