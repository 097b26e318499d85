/* CRC32C over ISA-L (see rt/crc.h). */
#include "rt/crc.h"

#include <isa-l.h>

uint32_t rt_crc32c_update(uint32_t crc, const void *buf, size_t len)
{
        /* crc32_iscsi() neither inverts the seed nor the result, so it
         * chains; its length is an int, so feed it at most 1 GiB at a time. */
        const unsigned char *p = buf;
        while (len > 0) {
                int n = len > (1u << 30) ? (1 << 30) : (int)len;
                crc = crc32_iscsi((unsigned char *)p, n, crc);
                p += n;
                len -= (size_t)n;
        }
        return crc;
}
