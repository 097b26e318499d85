/*
 * libFuzzer target for the SCSI CDB parser (SPC-5/SBC-4 parse step): every
 * input is one CDB, parsed against a fake (thin) logical unit by
 * scsi_fuzz_one(); for MODE SELECT the bytes after the CDB are the
 * parameter list, checked and applied (mode pages, the Logical Block
 * Provisioning page 1Ch/02h and the Application Tag page 0Ah/02h
 * included), and for FORMAT UNIT they are its parameter list, decoded;
 * the last byte's two high bits give the LU a protection type.
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
