/*
 * libFuzzer target: login key negotiation (RFC 7143 6, 13) on arbitrary
 * key=value text, in both session types, checking the answer stays within
 * its buffer and negotiated values stay within their legal ranges.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "iscsi/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static char out[ISCSI_TEXT_MAX];
        struct iscsi_textbuf tb = {.buf = out, .len = 0, .cap = sizeof(out)};
        struct iscsi_neg n;
        memset(&n, 0, sizeof(n));
        iscsi_params_defaults(&n.p);
        n.out = &tb;
        n.type = size && (data[0] & 1) ? ISCSI_SESS_DISCOVERY : ISCSI_SESS_NORMAL;
        iscsi_neg_text(&n, (const char *)data, size);
        if (tb.len > tb.cap || n.p.first_burst > n.p.max_burst || n.p.max_burst > 16777215 ||
            n.p.mrdsl_initiator < 512 || n.p.max_connections != 1 || n.p.erl != 0)
                abort();
        return 0;
}
