/*
 * libFuzzer target for the SCSI CDB parser (SPC-5/SBC-4 parse step): every
 * input is one CDB, parsed against a fake (thin) logical unit by
 * scsi_fuzz_one(); for MODE SELECT the bytes after the CDB are the
 * parameter list, checked and applied (mode pages, the Logical Block
 * Provisioning page 1Ch/02h included).
 */
#include <stddef.h>
#include <stdint.h>

#include "scsi/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        scsi_fuzz_one(data, size);
        return 0;
}
