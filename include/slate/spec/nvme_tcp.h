/*
 * NVMe/TCP wire layouts (NVM Express TCP Transport Specification 1.0,
 * section 3.6 "PDU" and 3.6.2 "PDU types"): the 8-byte common header, the
 * PDU-specific headers of ICReq/ICResp, H2CTermReq/C2HTermReq, CapsuleCmd,
 * CapsuleResp, H2CData, C2HData and R2T, flag bits, fatal error status
 * codes, and the SGL descriptor identifiers a TCP capsule may carry.
 * Nothing but layouts and constants; each struct is checked against its
 * wire size.  All multi-byte fields are little endian.
 */
#ifndef SLATE_SPEC_NVME_TCP_H
#define SLATE_SPEC_NVME_TCP_H

#include <stdint.h>

#include "slate/byteorder.h"

#define NVME_TCP_DIGEST_LEN 4
#define NVME_TCP_PFV_1_0    0x0000

/* PDU types (3.6.2).  Bit 0 is the direction: 0 = host to controller. */
#define NVME_TCP_PDU_ICREQ        0x00
#define NVME_TCP_PDU_ICRESP       0x01
#define NVME_TCP_PDU_H2C_TERM_REQ 0x02
#define NVME_TCP_PDU_C2H_TERM_REQ 0x03
#define NVME_TCP_PDU_CAPSULE_CMD  0x04
#define NVME_TCP_PDU_CAPSULE_RESP 0x05
#define NVME_TCP_PDU_H2C_DATA     0x06
#define NVME_TCP_PDU_C2H_DATA     0x07
#define NVME_TCP_PDU_R2T          0x09

/* Common header flags (3.6.1). */
#define NVME_TCP_F_HDGSTF       0x01 /* header digest present */
#define NVME_TCP_F_DDGSTF       0x02 /* data digest present */
#define NVME_TCP_F_DATA_LAST    0x04 /* H2CData/C2HData: last PDU of the transfer */
#define NVME_TCP_F_DATA_SUCCESS 0x08 /* C2HData: command done, no CapsuleResp follows */

/* ICReq/ICResp DGST field bits. */
#define NVME_TCP_DGST_HDR  0x01
#define NVME_TCP_DGST_DATA 0x02

/* Fatal Error Status of a TermReq (3.6.2.4, figure "FES"). */
#define NVME_TCP_FES_INVALID_HEADER    0x01 /* FEI = byte offset of the bad field */
#define NVME_TCP_FES_PDU_SEQUENCE      0x02
#define NVME_TCP_FES_HDR_DIGEST        0x03 /* FEI = the digest value received */
#define NVME_TCP_FES_DATA_OUT_OF_RANGE 0x04
#define NVME_TCP_FES_DATA_LIMIT        0x05 /* R2T or data limit exceeded */
#define NVME_TCP_FES_UNSUPPORTED_PARAM 0x06 /* FEI = byte offset of the parameter */

/* A TermReq carries the offending PDU header as data: at most 152 - 24 bytes. */
#define NVME_TCP_TERM_MAX_PLEN 152

/* SGL descriptor identifiers (byte 15 of the descriptor) used over TCP. */
#define NVME_TCP_SGL_ICD       0x01 /* Data Block, subtype Offset: in-capsule data */
#define NVME_TCP_SGL_TRANSPORT 0x5a /* Transport Data Block, transport specific: R2T/C2H */

/* Common header (3.6.1), first 8 bytes of every PDU. */
struct nvme_tcp_ch {
        uint8_t pdu_type;
        uint8_t flags;
        uint8_t hlen; /* header length, without digest */
        uint8_t pdo;  /* PDU data offset from the start of the PDU */
        le32 plen;    /* total PDU length incl. header, digests, padding, data */
};
_Static_assert(sizeof(struct nvme_tcp_ch) == 8, "nvme_tcp_ch");

/* ICReq (3.6.2.2). */
struct nvme_tcp_icreq {
        struct nvme_tcp_ch ch;
        le16 pfv;
        uint8_t hpda; /* host PDU data alignment, 0's based dwords (0..31) */
        uint8_t dgst; /* NVME_TCP_DGST_* requested */
        le32 maxr2t;  /* 0's based outstanding R2Ts per command */
        uint8_t rsvd[112];
};
_Static_assert(sizeof(struct nvme_tcp_icreq) == 128, "nvme_tcp_icreq");

/* ICResp (3.6.2.3). */
struct nvme_tcp_icresp {
        struct nvme_tcp_ch ch;
        le16 pfv;
        uint8_t cpda;    /* controller PDU data alignment the host must use */
        uint8_t dgst;    /* NVME_TCP_DGST_* enabled */
        le32 maxh2cdata; /* largest DATAL of one H2CData PDU, bytes */
        uint8_t rsvd[112];
};
_Static_assert(sizeof(struct nvme_tcp_icresp) == 128, "nvme_tcp_icresp");

/* H2CTermReq / C2HTermReq (3.6.2.4, 3.6.2.5). */
struct nvme_tcp_term_req {
        struct nvme_tcp_ch ch;
        le16 fes;
        le32 fei; /* field error information */
        uint8_t rsvd[10];
};
_Static_assert(sizeof(struct nvme_tcp_term_req) == 24, "nvme_tcp_term_req");

/* CapsuleCmd (3.6.2.6): the 64-byte SQE, then optional in-capsule data at PDO. */
struct nvme_tcp_cmd {
        struct nvme_tcp_ch ch;
        uint8_t sqe[64];
};
_Static_assert(sizeof(struct nvme_tcp_cmd) == 72, "nvme_tcp_cmd");

/* CapsuleResp (3.6.2.7): the 16-byte CQE. */
struct nvme_tcp_rsp {
        struct nvme_tcp_ch ch;
        uint8_t cqe[16];
};
_Static_assert(sizeof(struct nvme_tcp_rsp) == 24, "nvme_tcp_rsp");

/* H2CData (3.6.2.8) and C2HData (3.6.2.9) share one layout. */
struct nvme_tcp_data {
        struct nvme_tcp_ch ch;
        le16 cccid; /* command capsule CID */
        le16 ttag;  /* H2CData: transfer tag from the R2T; C2HData: reserved */
        le32 datao; /* offset of this data in the command's buffer */
        le32 datal; /* bytes of data in this PDU */
        uint8_t rsvd[4];
};
_Static_assert(sizeof(struct nvme_tcp_data) == 24, "nvme_tcp_data");

/* R2T (3.6.2.10). */
struct nvme_tcp_r2t {
        struct nvme_tcp_ch ch;
        le16 cccid;
        le16 ttag;
        le32 r2to;
        le32 r2tl;
        uint8_t rsvd[4];
};
_Static_assert(sizeof(struct nvme_tcp_r2t) == 24, "nvme_tcp_r2t");

/* Byte offsets used as FEI values. */
#define NVME_TCP_OFF_TYPE  0
#define NVME_TCP_OFF_FLAGS 1
#define NVME_TCP_OFF_HLEN  2
#define NVME_TCP_OFF_PDO   3
#define NVME_TCP_OFF_PLEN  4
#define NVME_TCP_OFF_CCCID 8
#define NVME_TCP_OFF_TTAG  10
#define NVME_TCP_OFF_DATAO 12
#define NVME_TCP_OFF_DATAL 16
#define NVME_TCP_OFF_PFV   8
#define NVME_TCP_OFF_HPDA  10
#define NVME_TCP_OFF_DGST  11

#endif
