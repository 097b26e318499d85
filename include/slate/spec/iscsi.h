/*
 * iSCSI wire layouts (RFC 7143 section 11): the 48-byte Basic Header
 * Segment of every PDU type the target sends or receives, opcodes, flag
 * bits, login stages and status codes.  Nothing but layouts and constants;
 * each struct is checked against its wire size.
 */
#ifndef SLATE_SPEC_ISCSI_H
#define SLATE_SPEC_ISCSI_H

#include <stdint.h>

#include "slate/byteorder.h"

#define ISCSI_BHS_LEN    48
#define ISCSI_DIGEST_LEN 4

/* Opcodes (RFC 7143 11.2.1.2).  Byte 0: bit 6 = immediate, bits 0-5 = opcode. */
#define ISCSI_OP_NOP_OUT       0x00
#define ISCSI_OP_SCSI_CMD      0x01
#define ISCSI_OP_TASK_MGMT_REQ 0x02
#define ISCSI_OP_LOGIN_REQ     0x03
#define ISCSI_OP_TEXT_REQ      0x04
#define ISCSI_OP_DATA_OUT      0x05
#define ISCSI_OP_LOGOUT_REQ    0x06
#define ISCSI_OP_SNACK_REQ     0x10
#define ISCSI_OP_NOP_IN        0x20
#define ISCSI_OP_SCSI_RSP      0x21
#define ISCSI_OP_TASK_MGMT_RSP 0x22
#define ISCSI_OP_LOGIN_RSP     0x23
#define ISCSI_OP_TEXT_RSP      0x24
#define ISCSI_OP_DATA_IN       0x25
#define ISCSI_OP_LOGOUT_RSP    0x26
#define ISCSI_OP_R2T           0x31
#define ISCSI_OP_ASYNC_MSG     0x32
#define ISCSI_OP_REJECT        0x3f

#define ISCSI_OPCODE_MASK  0x3f
#define ISCSI_OP_IMMEDIATE 0x40

/* Common flag bits (byte 1). */
#define ISCSI_FLAG_FINAL    0x80
#define ISCSI_FLAG_CONTINUE 0x40 /* Login/Text C bit */

/* SCSI Command flags (11.3.1). */
#define ISCSI_CMD_READ      0x40
#define ISCSI_CMD_WRITE     0x20
#define ISCSI_CMD_ATTR_MASK 0x07

/* SCSI Response / Data-In residual and status flags (11.4.1, 11.7.1). */
#define ISCSI_RSP_BIDI_OVERFLOW  0x10
#define ISCSI_RSP_BIDI_UNDERFLOW 0x08
#define ISCSI_RSP_OVERFLOW       0x04
#define ISCSI_RSP_UNDERFLOW      0x02
#define ISCSI_DATAIN_ACK         0x40
#define ISCSI_DATAIN_STATUS      0x01

/* SCSI Response "response" field. */
#define ISCSI_RESPONSE_COMPLETED      0x00
#define ISCSI_RESPONSE_TARGET_FAILURE 0x01

/* Login flags (11.12.1). */
#define ISCSI_LOGIN_TRANSIT   0x80
#define ISCSI_LOGIN_CONTINUE  0x40
#define ISCSI_LOGIN_CSG_SHIFT 2
#define ISCSI_LOGIN_CSG_MASK  0x0c
#define ISCSI_LOGIN_NSG_MASK  0x03

/* Login stages. */
#define ISCSI_STAGE_SECURITY    0
#define ISCSI_STAGE_OPERATIONAL 1
#define ISCSI_STAGE_FULL        3

/* Login status class/detail (11.13.5), as (class << 8) | detail. */
#define ISCSI_LOGIN_OK                       0x0000
#define ISCSI_LOGIN_TARGET_MOVED_TEMP        0x0101
#define ISCSI_LOGIN_INITIATOR_ERROR          0x0200
#define ISCSI_LOGIN_AUTH_FAILED              0x0201
#define ISCSI_LOGIN_AUTHORIZATION_FAILURE    0x0202
#define ISCSI_LOGIN_NOT_FOUND                0x0203
#define ISCSI_LOGIN_TARGET_REMOVED           0x0204
#define ISCSI_LOGIN_UNSUPPORTED_VERSION      0x0205
#define ISCSI_LOGIN_TOO_MANY_CONNECTIONS     0x0206
#define ISCSI_LOGIN_MISSING_PARAMETER        0x0207
#define ISCSI_LOGIN_CANT_INCLUDE_IN_SESSION  0x0208
#define ISCSI_LOGIN_SESSION_TYPE_UNSUPPORTED 0x0209
#define ISCSI_LOGIN_SESSION_NOT_EXIST        0x020a
#define ISCSI_LOGIN_INVALID_DURING_LOGIN     0x020b
#define ISCSI_LOGIN_TARGET_ERROR             0x0300
#define ISCSI_LOGIN_SERVICE_UNAVAILABLE      0x0301
#define ISCSI_LOGIN_OUT_OF_RESOURCES         0x0302

/* Task management functions (11.5.1) and responses (11.6.1). */
#define ISCSI_TMF_ABORT_TASK        1
#define ISCSI_TMF_ABORT_TASK_SET    2
#define ISCSI_TMF_CLEAR_ACA         3
#define ISCSI_TMF_CLEAR_TASK_SET    4
#define ISCSI_TMF_LUN_RESET         5
#define ISCSI_TMF_TARGET_WARM_RESET 6
#define ISCSI_TMF_TARGET_COLD_RESET 7
#define ISCSI_TMF_TASK_REASSIGN     8
#define ISCSI_TMF_FUNC_MASK         0x7f

#define ISCSI_TMF_RSP_COMPLETE       0
#define ISCSI_TMF_RSP_NO_TASK        1
#define ISCSI_TMF_RSP_NO_LUN         2
#define ISCSI_TMF_RSP_TASK_ALLEGIANT 3
#define ISCSI_TMF_RSP_NO_REASSIGN    4
#define ISCSI_TMF_RSP_NOT_SUPPORTED  5
#define ISCSI_TMF_RSP_AUTH_FAILED    6
#define ISCSI_TMF_RSP_REJECTED       255

/* Logout reasons (11.14.1) and responses (11.15.1). */
#define ISCSI_LOGOUT_CLOSE_SESSION       0
#define ISCSI_LOGOUT_CLOSE_CONNECTION    1
#define ISCSI_LOGOUT_REMOVE_FOR_RECOVERY 2
#define ISCSI_LOGOUT_REASON_MASK         0x7f

#define ISCSI_LOGOUT_RSP_OK             0
#define ISCSI_LOGOUT_RSP_CID_NOT_FOUND  1
#define ISCSI_LOGOUT_RSP_RECOVERY_UNSUP 2
#define ISCSI_LOGOUT_RSP_CLEANUP_FAILED 3

/* Reject reasons (11.17.1). */
#define ISCSI_REJECT_DIGEST_ERROR      0x02
#define ISCSI_REJECT_SNACK_REJECT      0x03
#define ISCSI_REJECT_PROTOCOL_ERROR    0x04
#define ISCSI_REJECT_CMD_NOT_SUPPORTED 0x05
#define ISCSI_REJECT_IMM_CMD_REJECT    0x06
#define ISCSI_REJECT_TASK_IN_PROGRESS  0x07
#define ISCSI_REJECT_INVALID_DATA_ACK  0x08
#define ISCSI_REJECT_INVALID_PDU_FIELD 0x09
#define ISCSI_REJECT_OUT_OF_RESOURCES  0x0a
#define ISCSI_REJECT_WAITING_LOGOUT    0x0c

/* AHS types (11.2.2). */
#define ISCSI_AHS_EXTENDED_CDB  1
#define ISCSI_AHS_BIDI_READ_LEN 2

#define ISCSI_RESERVED_TAG 0xffffffffu

/* Generic BHS (11.2.1). */
struct iscsi_bhs {
        uint8_t opcode;
        uint8_t flags;
        uint8_t rsvd2[2];
        uint8_t total_ahs_len; /* in 4-byte words */
        be24 data_segment_len;
        uint8_t lun[8];
        be32 itt;
        uint8_t opspec[28];
};
_Static_assert(sizeof(struct iscsi_bhs) == 48, "iscsi_bhs");

/* AHS header (11.2.2); the extended CDB AHS carries CDB bytes 16.. */
struct iscsi_ahs_hdr {
        be16 ahs_len;
        uint8_t ahs_type;
        uint8_t rsvd;
};
_Static_assert(sizeof(struct iscsi_ahs_hdr) == 4, "iscsi_ahs_hdr");

struct iscsi_scsi_cmd {
        uint8_t opcode;
        uint8_t flags;
        uint8_t rsvd2[2];
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t lun[8];
        be32 itt;
        be32 edtl;
        be32 cmdsn;
        be32 exp_statsn;
        uint8_t cdb[16];
};
_Static_assert(sizeof(struct iscsi_scsi_cmd) == 48, "iscsi_scsi_cmd");

struct iscsi_scsi_rsp {
        uint8_t opcode;
        uint8_t flags;
        uint8_t response;
        uint8_t status;
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t rsvd8[8];
        be32 itt;
        be32 snack_tag;
        be32 statsn;
        be32 exp_cmdsn;
        be32 max_cmdsn;
        be32 exp_datasn;
        be32 bidi_residual;
        be32 residual;
};
_Static_assert(sizeof(struct iscsi_scsi_rsp) == 48, "iscsi_scsi_rsp");

struct iscsi_data_out {
        uint8_t opcode;
        uint8_t flags;
        uint8_t rsvd2[2];
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t lun[8];
        be32 itt;
        be32 ttt;
        be32 rsvd24;
        be32 exp_statsn;
        be32 rsvd32;
        be32 datasn;
        be32 buffer_offset;
        be32 rsvd44;
};
_Static_assert(sizeof(struct iscsi_data_out) == 48, "iscsi_data_out");

struct iscsi_data_in {
        uint8_t opcode;
        uint8_t flags;
        uint8_t rsvd2;
        uint8_t status;
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t lun[8];
        be32 itt;
        be32 ttt;
        be32 statsn;
        be32 exp_cmdsn;
        be32 max_cmdsn;
        be32 datasn;
        be32 buffer_offset;
        be32 residual;
};
_Static_assert(sizeof(struct iscsi_data_in) == 48, "iscsi_data_in");

struct iscsi_r2t {
        uint8_t opcode;
        uint8_t flags;
        uint8_t rsvd2[2];
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t lun[8];
        be32 itt;
        be32 ttt;
        be32 statsn;
        be32 exp_cmdsn;
        be32 max_cmdsn;
        be32 r2tsn;
        be32 buffer_offset;
        be32 desired_len;
};
_Static_assert(sizeof(struct iscsi_r2t) == 48, "iscsi_r2t");

/* NOP-Out / NOP-In (11.18, 11.19) share a layout. */
struct iscsi_nop {
        uint8_t opcode;
        uint8_t flags;
        uint8_t rsvd2[2];
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t lun[8];
        be32 itt;
        be32 ttt;
        be32 sn;     /* NOP-Out: CmdSN; NOP-In: StatSN */
        be32 exp_sn; /* NOP-Out: ExpStatSN; NOP-In: ExpCmdSN */
        be32 max_cmdsn;
        uint8_t rsvd36[12];
};
_Static_assert(sizeof(struct iscsi_nop) == 48, "iscsi_nop");

struct iscsi_tmf_req {
        uint8_t opcode;
        uint8_t function; /* bit 7 set */
        uint8_t rsvd2[2];
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t lun[8];
        be32 itt;
        be32 rtt;
        be32 cmdsn;
        be32 exp_statsn;
        be32 ref_cmdsn;
        be32 exp_datasn;
        uint8_t rsvd40[8];
};
_Static_assert(sizeof(struct iscsi_tmf_req) == 48, "iscsi_tmf_req");

struct iscsi_tmf_rsp {
        uint8_t opcode;
        uint8_t flags;
        uint8_t response;
        uint8_t rsvd3;
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t rsvd8[8];
        be32 itt;
        be32 rsvd20;
        be32 statsn;
        be32 exp_cmdsn;
        be32 max_cmdsn;
        uint8_t rsvd36[12];
};
_Static_assert(sizeof(struct iscsi_tmf_rsp) == 48, "iscsi_tmf_rsp");

struct iscsi_login_req {
        uint8_t opcode;
        uint8_t flags;
        uint8_t version_max;
        uint8_t version_min;
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t isid[6];
        be16 tsih;
        be32 itt;
        be16 cid;
        be16 rsvd22;
        be32 cmdsn;
        be32 exp_statsn;
        uint8_t rsvd32[16];
};
_Static_assert(sizeof(struct iscsi_login_req) == 48, "iscsi_login_req");

struct iscsi_login_rsp {
        uint8_t opcode;
        uint8_t flags;
        uint8_t version_max;
        uint8_t version_active;
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t isid[6];
        be16 tsih;
        be32 itt;
        be32 rsvd20;
        be32 statsn;
        be32 exp_cmdsn;
        be32 max_cmdsn;
        uint8_t status_class;
        uint8_t status_detail;
        uint8_t rsvd38[10];
};
_Static_assert(sizeof(struct iscsi_login_rsp) == 48, "iscsi_login_rsp");

/* Text Request / Response (11.10, 11.11) share a layout. */
struct iscsi_text {
        uint8_t opcode;
        uint8_t flags;
        uint8_t rsvd2[2];
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t lun[8];
        be32 itt;
        be32 ttt;
        be32 sn;     /* request: CmdSN; response: StatSN */
        be32 exp_sn; /* request: ExpStatSN; response: ExpCmdSN */
        be32 max_cmdsn;
        uint8_t rsvd36[12];
};
_Static_assert(sizeof(struct iscsi_text) == 48, "iscsi_text");

struct iscsi_logout_req {
        uint8_t opcode;
        uint8_t reason; /* bit 7 set */
        uint8_t rsvd2[2];
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t rsvd8[8];
        be32 itt;
        be16 cid;
        be16 rsvd22;
        be32 cmdsn;
        be32 exp_statsn;
        uint8_t rsvd32[16];
};
_Static_assert(sizeof(struct iscsi_logout_req) == 48, "iscsi_logout_req");

struct iscsi_logout_rsp {
        uint8_t opcode;
        uint8_t flags;
        uint8_t response;
        uint8_t rsvd3;
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t rsvd8[8];
        be32 itt;
        be32 rsvd20;
        be32 statsn;
        be32 exp_cmdsn;
        be32 max_cmdsn;
        be32 rsvd36;
        be16 time2wait;
        be16 time2retain;
        be32 rsvd44;
};
_Static_assert(sizeof(struct iscsi_logout_rsp) == 48, "iscsi_logout_rsp");

struct iscsi_reject {
        uint8_t opcode;
        uint8_t flags;
        uint8_t reason;
        uint8_t rsvd3;
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t rsvd8[8];
        be32 itt; /* 0xffffffff */
        be32 rsvd20;
        be32 statsn;
        be32 exp_cmdsn;
        be32 max_cmdsn;
        be32 datasn_r2tsn;
        uint8_t rsvd40[8];
};
_Static_assert(sizeof(struct iscsi_reject) == 48, "iscsi_reject");

struct iscsi_async_msg {
        uint8_t opcode;
        uint8_t flags;
        uint8_t rsvd2[2];
        uint8_t total_ahs_len;
        be24 data_segment_len;
        uint8_t lun[8];
        be32 itt; /* 0xffffffff */
        be32 rsvd20;
        be32 statsn;
        be32 exp_cmdsn;
        be32 max_cmdsn;
        uint8_t async_event;
        uint8_t async_vcode;
        be16 param1;
        be16 param2;
        be16 param3;
        uint8_t rsvd44[4];
};
_Static_assert(sizeof(struct iscsi_async_msg) == 48, "iscsi_async_msg");

#endif
