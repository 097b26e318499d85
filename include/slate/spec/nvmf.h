/*
 * NVMe over Fabrics wire layouts (NVMe-oF 1.1 / Base 2.0 chapter 6):
 * the Fabrics command capsule (Connect, Property Get/Set, Disconnect), the
 * 1024-byte Connect data, controller property offsets, the Fabrics
 * command-specific status codes, and the Discovery Log Page (70h) header
 * and 1024-byte entries.  Layouts only.
 */
#ifndef SLATE_SPEC_NVMF_H
#define SLATE_SPEC_NVMF_H

#include <stddef.h>
#include <stdint.h>

#include "slate/byteorder.h"
#include "slate/spec/nvme.h"

#define NVMF_DISCOVERY_NQN "nqn.2014-08.org.nvmexpress.discovery"
#define NVMF_NQN_SIZE      256 /* field size; an NQN is at most 223 bytes */
#define NVMF_NQN_MAX_LEN   223

enum {
        NVMF_FCTYPE_PROPERTY_SET = 0x00,
        NVMF_FCTYPE_CONNECT = 0x01,
        NVMF_FCTYPE_PROPERTY_GET = 0x04,
        NVMF_FCTYPE_AUTH_SEND = 0x05,
        NVMF_FCTYPE_AUTH_RECV = 0x06,
        NVMF_FCTYPE_DISCONNECT = 0x08,
};

/* Common Fabrics command layout: opcode 7Fh, FCTYPE where NSID would be. */
struct nvmf_cmd {
        uint8_t opc;
        uint8_t flags;
        le16 cid;
        uint8_t fctype;
        uint8_t rsvd5[19];
        struct nvme_sgl_desc dptr;
        uint8_t fabric_specific[24];
};
_Static_assert(sizeof(struct nvmf_cmd) == 64, "fabrics command");

struct nvmf_connect_cmd {
        uint8_t opc;
        uint8_t flags;
        le16 cid;
        uint8_t fctype;
        uint8_t rsvd5[19];
        struct nvme_sgl_desc dptr;
        le16 recfmt;
        le16 qid;
        le16 sqsize; /* 0's based */
        uint8_t cattr;
        uint8_t rsvd47;
        le32 kato; /* milliseconds */
        uint8_t rsvd52[12];
};
_Static_assert(sizeof(struct nvmf_connect_cmd) == 64, "Connect command");
_Static_assert(offsetof(struct nvmf_connect_cmd, recfmt) == 40, "recfmt");
_Static_assert(offsetof(struct nvmf_connect_cmd, kato) == 48, "kato");

struct nvmf_connect_data {
        uint8_t hostid[16];
        le16 cntlid;
        uint8_t rsvd18[238];
        char subnqn[NVMF_NQN_SIZE];
        char hostnqn[NVMF_NQN_SIZE];
        uint8_t rsvd768[256];
};
_Static_assert(sizeof(struct nvmf_connect_data) == 1024, "Connect data");
_Static_assert(offsetof(struct nvmf_connect_data, subnqn) == 256, "subnqn");
_Static_assert(offsetof(struct nvmf_connect_data, hostnqn) == 512, "hostnqn");

#define NVMF_CNTLID_DYNAMIC 0xffff
/* Connect response dword 0 on Invalid Parameters / Invalid Host: IPO + IATTR. */
#define NVMF_IATTR_DATA (1u << 16)

struct nvmf_property_set_cmd {
        uint8_t opc;
        uint8_t flags;
        le16 cid;
        uint8_t fctype;
        uint8_t rsvd5[35];
        uint8_t attrib; /* bits 2:0 size: 0 = 4 bytes, 1 = 8 bytes */
        uint8_t rsvd41[3];
        le32 offset;
        le64 value;
        uint8_t rsvd56[8];
};
_Static_assert(sizeof(struct nvmf_property_set_cmd) == 64, "Property Set");

struct nvmf_property_get_cmd {
        uint8_t opc;
        uint8_t flags;
        le16 cid;
        uint8_t fctype;
        uint8_t rsvd5[35];
        uint8_t attrib;
        uint8_t rsvd41[3];
        le32 offset;
        uint8_t rsvd48[16];
};
_Static_assert(sizeof(struct nvmf_property_get_cmd) == 64, "Property Get");

/* Controller properties (Base 2.0 3.1.4) */
enum {
        NVME_REG_CAP = 0x00,
        NVME_REG_VS = 0x08,
        NVME_REG_CC = 0x14,
        NVME_REG_CSTS = 0x1c,
        NVME_REG_NSSR = 0x20,
};
#define NVME_CC_EN           (1u << 0)
#define NVME_CC_CSS_SHIFT    4
#define NVME_CC_MPS_SHIFT    7
#define NVME_CC_AMS_SHIFT    11
#define NVME_CC_SHN_SHIFT    14
#define NVME_CC_IOSQES_SHIFT 16
#define NVME_CC_IOCQES_SHIFT 20
#define NVME_CSTS_RDY        (1u << 0)
#define NVME_CSTS_CFS        (1u << 1)
#define NVME_CSTS_SHST_SHIFT 2
#define NVME_CSTS_SHST_CMPLT 2u

/* Fabrics command-specific status codes (SCT 1) */
enum {
        NVMF_SC_CONNECT_FORMAT = 0x80,
        NVMF_SC_CONNECT_CTRL_BUSY = 0x81,
        NVMF_SC_CONNECT_INVALID_PARAM = 0x82,
        NVMF_SC_CONNECT_RESTART_DISC = 0x83,
        NVMF_SC_CONNECT_INVALID_HOST = 0x84,
        NVMF_SC_DISC_RESTART = 0x90,
        NVMF_SC_AUTH_REQUIRED = 0x91,
};

/* ---- Discovery Log Page (70h) ---- */
enum { NVMF_TRTYPE_RDMA = 1, NVMF_TRTYPE_FC = 2, NVMF_TRTYPE_TCP = 3, NVMF_TRTYPE_LOOP = 254 };
enum { NVMF_ADRFAM_IPV4 = 1, NVMF_ADRFAM_IPV6 = 2 };
enum { NVMF_SUBTYPE_REFERRAL = 1, NVMF_SUBTYPE_NVME = 2, NVMF_SUBTYPE_CURRENT_DISC = 3 };
#define NVMF_TREQ_NOT_SPECIFIED 0
#define NVMF_TREQ_REQUIRED      1 /* TREQ bits 1:0, secure channel */
#define NVMF_TREQ_NOT_REQUIRED  2
#define NVMF_TCP_SECTYPE_NONE   0
#define NVMF_TCP_SECTYPE_TLS13  2 /* TSAS byte 0 for TCP */

struct nvmf_disc_log_entry {
        uint8_t trtype;
        uint8_t adrfam;
        uint8_t subtype;
        uint8_t treq;
        le16 portid;
        le16 cntlid;
        le16 asqsz;
        le16 eflags;
        uint8_t rsvd12[20];
        char trsvcid[32];
        uint8_t rsvd64[192];
        char subnqn[NVMF_NQN_SIZE];
        char traddr[256];
        uint8_t tsas[256];
};
_Static_assert(sizeof(struct nvmf_disc_log_entry) == 1024, "discovery log entry");
_Static_assert(offsetof(struct nvmf_disc_log_entry, subnqn) == 256, "entry subnqn");

struct nvmf_disc_log_hdr {
        le64 genctr;
        le64 numrec;
        le16 recfmt;
        uint8_t rsvd18[1006];
};
_Static_assert(sizeof(struct nvmf_disc_log_hdr) == 1024, "discovery log header");

#endif
