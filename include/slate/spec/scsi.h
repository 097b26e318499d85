/*
 * SCSI wire layouts (SPC-5, SBC-4): sense data, INQUIRY data, mode
 * parameter headers, READ CAPACITY data and REPORT SUPPORTED OPERATION
 * CODES descriptors.  Layouts only; the code that fills them lives in
 * src/scsi/.  Every struct is checked against its size in the standard.
 */
#ifndef SLATE_SPEC_SCSI_H
#define SLATE_SPEC_SCSI_H

#include <stdint.h>

#include "slate/byteorder.h"

/* Operation codes (SPC-5 / SBC-4) */
enum scsi_opcode {
        SCSI_OP_TEST_UNIT_READY = 0x00,
        SCSI_OP_REQUEST_SENSE = 0x03,
        SCSI_OP_FORMAT_UNIT = 0x04,
        SCSI_OP_READ_6 = 0x08,
        SCSI_OP_WRITE_6 = 0x0a,
        SCSI_OP_INQUIRY = 0x12,
        SCSI_OP_MODE_SELECT_6 = 0x15,
        SCSI_OP_RESERVE_6 = 0x16,
        SCSI_OP_RELEASE_6 = 0x17,
        SCSI_OP_MODE_SENSE_6 = 0x1a,
        SCSI_OP_START_STOP_UNIT = 0x1b,
        SCSI_OP_RECEIVE_DIAGNOSTIC = 0x1c,
        SCSI_OP_SEND_DIAGNOSTIC = 0x1d,
        SCSI_OP_PREVENT_ALLOW = 0x1e,
        SCSI_OP_READ_CAPACITY_10 = 0x25,
        SCSI_OP_READ_10 = 0x28,
        SCSI_OP_WRITE_10 = 0x2a,
        SCSI_OP_WRITE_VERIFY_10 = 0x2e,
        SCSI_OP_VERIFY_10 = 0x2f,
        SCSI_OP_PREFETCH_10 = 0x34,
        SCSI_OP_SYNC_CACHE_10 = 0x35,
        SCSI_OP_READ_DEFECT_DATA_10 = 0x37,
        SCSI_OP_WRITE_LONG_10 = 0x3f,
        SCSI_OP_WRITE_SAME_10 = 0x41,
        SCSI_OP_UNMAP = 0x42,
        SCSI_OP_SANITIZE = 0x48,
        SCSI_OP_LOG_SENSE = 0x4d,
        SCSI_OP_MODE_SELECT_10 = 0x55,
        SCSI_OP_MODE_SENSE_10 = 0x5a,
        SCSI_OP_PR_IN = 0x5e,
        SCSI_OP_PR_OUT = 0x5f,
        SCSI_OP_VARIABLE_LENGTH = 0x7f,
        SCSI_OP_EXTENDED_COPY = 0x83,
        SCSI_OP_RECEIVE_COPY_RESULTS = 0x84,
        SCSI_OP_READ_16 = 0x88,
        SCSI_OP_COMPARE_AND_WRITE = 0x89,
        SCSI_OP_WRITE_16 = 0x8a,
        SCSI_OP_ORWRITE_16 = 0x8b,
        SCSI_OP_WRITE_VERIFY_16 = 0x8e,
        SCSI_OP_VERIFY_16 = 0x8f,
        SCSI_OP_PREFETCH_16 = 0x90,
        SCSI_OP_SYNC_CACHE_16 = 0x91,
        SCSI_OP_WRITE_SAME_16 = 0x93,
        SCSI_OP_WRITE_STREAM_16 = 0x9a,
        SCSI_OP_WRITE_ATOMIC_16 = 0x9c,
        SCSI_OP_SERVICE_ACTION_IN_16 = 0x9e,
        SCSI_OP_SERVICE_ACTION_OUT_16 = 0x9f,
        SCSI_OP_REPORT_LUNS = 0xa0,
        SCSI_OP_MAINTENANCE_IN = 0xa3,
        SCSI_OP_READ_12 = 0xa8,
        SCSI_OP_WRITE_12 = 0xaa,
        SCSI_OP_WRITE_VERIFY_12 = 0xae,
        SCSI_OP_VERIFY_12 = 0xaf,
        SCSI_OP_READ_DEFECT_DATA_12 = 0xb7,
};

/* Service actions */
#define SCSI_SAI_READ_CAPACITY_16    0x10
#define SCSI_SAI_GET_LBA_STATUS      0x12
#define SCSI_SAI_STREAM_CONTROL      0x14
#define SCSI_SAI_GET_STREAM_STATUS   0x16
#define SCSI_SAI_GET_ELEM_STATUS     0x17   /* 9Eh: depopulation (GET PHYSICAL ELEMENT STATUS) */
#define SCSI_SAI_REMOVE_ELEM_TRUNC   0x18   /* REMOVE ELEMENT AND TRUNCATE */
#define SCSI_SAI_RESTORE_ELEMENTS    0x19   /* RESTORE ELEMENTS AND REBUILD */
#define SCSI_SAO_WRITE_LONG_16       0x11   /* 9Fh service action */
#define SCSI_SAO_WRITE_SCATTERED_16  0x12   /* 9Fh service action */
#define SCSI_VL_READ_32              0x0009 /* 7Fh service actions (bytes 8-9) */
#define SCSI_VL_VERIFY_32            0x000a
#define SCSI_VL_WRITE_32             0x000b
#define SCSI_VL_WRITE_ATOMIC_32      0x000f
#define SCSI_VL_WRITE_STREAM_32      0x0010
#define SCSI_VL_WRITE_SCATTERED_32   0x0011
#define SCSI_MI_REPORT_TPG           0x0a
#define SCSI_MI_REPORT_SUPPORTED_OPS 0x0c
#define SCSI_SANITIZE_OVERWRITE      0x01
#define SCSI_SANITIZE_BLOCK_ERASE    0x02
#define SCSI_SANITIZE_CRYPTO_ERASE   0x03
#define SCSI_SANITIZE_EXIT_FAILURE   0x1f

/* Fixed format sense data (SPC-5 4.4.3), response code 70h. */
struct scsi_sense_fixed {
        uint8_t response_code; /* bit 7: VALID (information field valid) */
        uint8_t obsolete;
        uint8_t key; /* bits 3:0 sense key */
        be32 information;
        uint8_t additional_len;
        be32 cmd_specific;
        uint8_t asc;
        uint8_t ascq;
        uint8_t fru;
        uint8_t sks[3]; /* byte 15 bit 7: SKSV */
};
_Static_assert(sizeof(struct scsi_sense_fixed) == 18, "fixed sense is 18 bytes");

/* Descriptor format sense data header (SPC-5 4.4.2), response code 72h. */
struct scsi_sense_desc_hdr {
        uint8_t response_code;
        uint8_t key;
        uint8_t asc;
        uint8_t ascq;
        uint8_t flags;
        uint8_t reserved[2];
        uint8_t additional_len;
};
_Static_assert(sizeof(struct scsi_sense_desc_hdr) == 8, "descriptor sense header is 8 bytes");

/* Information sense data descriptor (type 00h). */
struct scsi_sense_desc_info {
        uint8_t type;  /* 00h */
        uint8_t len;   /* 0Ah */
        uint8_t valid; /* bit 7 */
        uint8_t reserved;
        be64 information;
};
_Static_assert(sizeof(struct scsi_sense_desc_info) == 12, "information descriptor");

/* Sense key specific sense data descriptor (type 02h). */
struct scsi_sense_desc_sks {
        uint8_t type; /* 02h */
        uint8_t len;  /* 06h */
        uint8_t reserved[2];
        uint8_t sks[3];
        uint8_t reserved2;
};
_Static_assert(sizeof(struct scsi_sense_desc_sks) == 8, "sense key specific descriptor");

/* Standard INQUIRY data (SPC-5 6.7.2), the part we return (96 bytes). */
struct scsi_inquiry_std {
        uint8_t peripheral; /* qualifier 7:5, device type 4:0 */
        uint8_t rmb;        /* bit 7 */
        uint8_t version;
        uint8_t flags3; /* NORMACA, HISUP, response data format */
        uint8_t additional_len;
        uint8_t flags5; /* SCCS ACC TPGS 3PC PROTECT */
        uint8_t flags6; /* ENCSERV MULTIP ... */
        uint8_t flags7; /* CMDQUE */
        char vendor[8];
        char product[16];
        char revision[4];
        uint8_t vendor_specific[20];
        uint8_t flags56;
        uint8_t reserved57;
        be16 version_desc[8];
        uint8_t reserved74[22];
};
_Static_assert(sizeof(struct scsi_inquiry_std) == 96, "standard inquiry is 96 bytes");

/* VPD page header (SPC-5 7.7.1). */
struct scsi_vpd_hdr {
        uint8_t peripheral;
        uint8_t page_code;
        be16 page_len;
};
_Static_assert(sizeof(struct scsi_vpd_hdr) == 4, "VPD header");

/* Designation descriptor header (SPC-5 7.7.6.1). */
struct scsi_designator_hdr {
        uint8_t proto_codeset;
        uint8_t piv_assoc_type;
        uint8_t reserved;
        uint8_t len;
};
_Static_assert(sizeof(struct scsi_designator_hdr) == 4, "designator header");

/* Block Limits VPD page (SBC-4 6.6.4), page B0h. */
struct scsi_vpd_block_limits {
        struct scsi_vpd_hdr hdr;
        uint8_t wsnz; /* bit 0 */
        uint8_t max_caw_len;
        be16 opt_xfer_len_gran;
        be32 max_xfer_len;
        be32 opt_xfer_len;
        be32 max_prefetch_len;
        be32 max_unmap_lba_count;
        be32 max_unmap_desc_count;
        be32 opt_unmap_gran;
        be32 unmap_gran_align; /* bit 31: UGAVALID */
        be64 max_write_same_len;
        be32 max_atomic_xfer_len;
        be32 atomic_align;
        be32 atomic_xfer_len_gran;
        be32 max_atomic_xfer_len_boundary;
        be32 max_atomic_boundary_size;
};
_Static_assert(sizeof(struct scsi_vpd_block_limits) == 64, "block limits page is 64 bytes");

/* READ CAPACITY (16) parameter data (SBC-4 5.20.2). */
struct scsi_read_capacity16 {
        be64 last_lba;
        be32 block_len;
        uint8_t prot;        /* P_TYPE, PROT_EN */
        uint8_t lbppbe;      /* P_I_EXPONENT 7:4, LBPPBE 3:0 */
        be16 lowest_aligned; /* LBPME bit 15, LBPRZ bit 14 */
        uint8_t reserved[16];
};
_Static_assert(sizeof(struct scsi_read_capacity16) == 32, "READ CAPACITY 16 data");

/* Mode parameter headers (SPC-5 7.5.5). */
struct scsi_mode_hdr6 {
        uint8_t data_len;
        uint8_t medium_type;
        uint8_t dev_specific; /* bit 7: WP; bit 4: DPOFUA */
        uint8_t bd_len;
};
_Static_assert(sizeof(struct scsi_mode_hdr6) == 4, "mode parameter header (6)");

struct scsi_mode_hdr10 {
        be16 data_len;
        uint8_t medium_type;
        uint8_t dev_specific;
        uint8_t longlba; /* bit 0 */
        uint8_t reserved;
        be16 bd_len;
};
_Static_assert(sizeof(struct scsi_mode_hdr10) == 8, "mode parameter header (10)");

/* Short LBA mode parameter block descriptor (SBC-4 6.5.2). */
struct scsi_mode_bd_short {
        be32 num_blocks;
        uint8_t reserved;
        be24 block_len;
};
_Static_assert(sizeof(struct scsi_mode_bd_short) == 8, "short block descriptor");

/* Long LBA mode parameter block descriptor. */
struct scsi_mode_bd_long {
        be64 num_blocks;
        be32 reserved;
        be32 block_len;
};
_Static_assert(sizeof(struct scsi_mode_bd_long) == 16, "long block descriptor");

/* REPORT SUPPORTED OPERATION CODES: all-commands descriptor (SPC-5 6.35.2). */
struct scsi_rsoc_cmd_desc {
        uint8_t opcode;
        uint8_t reserved;
        be16 sa;
        uint8_t reserved2;
        uint8_t flags; /* bit 1 CTDP, bit 0 SERVACTV */
        be16 cdb_len;
};
_Static_assert(sizeof(struct scsi_rsoc_cmd_desc) == 8, "command descriptor");

/* Command timeouts descriptor (SPC-5 6.35.4). */
struct scsi_rsoc_timeouts {
        be16 desc_len; /* 0Ah */
        uint8_t reserved;
        uint8_t cmd_specific;
        be32 nominal;
        be32 recommended;
};
_Static_assert(sizeof(struct scsi_rsoc_timeouts) == 12, "command timeouts descriptor");

#endif
