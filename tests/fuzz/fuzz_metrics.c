/*
 * libFuzzer target for the bytes the metrics side takes from outside: the
 * HTTP listen address (options.http_listen, slated --http) through
 * mgmt_http_parse_listen, and names peers choose (iSCSI initiator names,
 * NVMe host NQNs) through the Prometheus label escaping.  The parser must
 * accept only what it documents (the address it returns is numeric IPv4 or
 * IPv6, the port at most 65535); the escaped label value must hold no raw
 * quote, newline or byte outside printable ASCII, and no backslash that
 * does not start one of the three escapes.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mgmt/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *s = malloc(size + 1);
        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';

        char addr[64];
        unsigned port = 99999;
        if (mgmt_http_parse_listen(s, addr, sizeof(addr), &port) == 0) {
                unsigned char buf[16];
                if (port > 65535 ||
                    (inet_pton(AF_INET, addr, buf) != 1 && inet_pton(AF_INET6, addr, buf) != 1))
                        abort();
        }

        char *out = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&out, &len);
        if (f) {
                mgmt_metrics_escape(f, s);
                fclose(f);
                for (size_t i = 0; i < len; i++) {
                        unsigned char c = (unsigned char)out[i];
                        if (c < 0x20 || c >= 0x7f || c == '"')
                                abort();
                        if (c == '\\') {
                                if (i + 1 >= len || !strchr("\\\"n", out[i + 1]))
                                        abort();
                                i++;
                        }
                }
                free(out);
        }
        free(s);
        return 0;
}
