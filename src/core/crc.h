/* Checksums for the core's own metadata, from ISA-L (never hand-written). */
#ifndef CORE_CRC_H
#define CORE_CRC_H

#ifndef SLATE_MODULE_CORE
#error "core/crc.h is private to src/core/ (the core's metadata checksums)"
#endif

#include <stddef.h>
#include <stdint.h>

/* CRC32C (Castagnoli) as RFC 3720 defines it: standard init and final xor. */
uint32_t core_crc32c(const void *buf, size_t len);

#endif
