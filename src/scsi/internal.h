/*
 * Shared inside the SCSI personality only (not for transports).
 */
#ifndef SCSI_INTERNAL_H
#define SCSI_INTERNAL_H

#include "scsi/scsi.h"

/* Sense keys */
#define SK_NO_SENSE        0x0
#define SK_RECOVERED_ERROR 0x1
#define SK_NOT_READY       0x2
#define SK_MEDIUM_ERROR    0x3
#define SK_HARDWARE_ERROR  0x4
#define SK_ILLEGAL_REQUEST 0x5
#define SK_UNIT_ATTENTION  0x6
#define SK_DATA_PROTECT    0x7
#define SK_ABORTED_COMMAND 0xb
#define SK_MISCOMPARE      0xe

/* sense.c: build CHECK CONDITION sense in the format the LU's D_SENSE selects. */
void scsi_sense_set(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq);
/* ILLEGAL REQUEST, INVALID FIELD IN CDB (24h/00h) or IN PARAMETER LIST (26h/00h),
 * with the sense-key-specific field pointer at byte/bit. bit < 0: no bit pointer. */
void scsi_sense_invalid_field(struct scsi_cmd *cmd, bool in_cdb, uint16_t byte, int bit);
/* Map a core status (and req->info) to SAM status + sense. */
void scsi_status_from_core(struct scsi_cmd *cmd, enum core_status st, uint64_t info,
			   bool info_valid);

/* pr.c: persistent reservations and RESERVE/RELEASE(6); synchronous, data already in buf. */
void scsi_pr_in(struct scsi_cmd *cmd);
void scsi_pr_out(struct scsi_cmd *cmd);
void scsi_reserve6(struct scsi_cmd *cmd);
void scsi_release6(struct scsi_cmd *cmd);
/* SPC-5 5.14.1 / table 'commands allowed in the presence of reservations'. */
bool scsi_pr_conflict(struct scsi_cmd *cmd, bool is_read, bool is_write);

#endif
