/*
 * CRC32C (Castagnoli, RFC 3720 B.4): the one implementation behind the
 * iSCSI and NVMe/TCP digests and the core's metadata checksums.  ISA-L
 * computes it (crc32_iscsi); nothing here is hand-written.
 *
 * One shot: rt_crc32c(buf, len).  Chained over several buffers:
 *   crc = RT_CRC32C_INIT;
 *   crc = rt_crc32c_update(crc, a, alen);
 *   crc = rt_crc32c_update(crc, b, blen);
 *   digest = rt_crc32c_final(crc);
 */
#ifndef RT_CRC_H
#define RT_CRC_H

#include <stddef.h>
#include <stdint.h>

#define RT_CRC32C_INIT 0xffffffffu

/* Running (not yet inverted) value over len more bytes; any length. */
uint32_t rt_crc32c_update(uint32_t crc, const void *buf, size_t len);

static inline uint32_t rt_crc32c_final(uint32_t crc)
{
        return crc ^ 0xffffffffu;
}

static inline uint32_t rt_crc32c(const void *buf, size_t len)
{
        return rt_crc32c_final(rt_crc32c_update(RT_CRC32C_INIT, buf, len));
}

#endif
