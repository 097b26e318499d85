/* CRC32C through ISA-L: crc32_iscsi() takes the running (pre-inverted) value. */
#include "core/crc.h"

#include <isa-l.h>

uint32_t core_crc32c(const void *buf, size_t len)
{
        return crc32_iscsi((unsigned char *)buf, (int)len, 0xffffffffu) ^ 0xffffffffu;
}
