/*
 * NVMe/TCP and NVMe-oF wire layouts used by slate-perf's initiator: the PDU
 * headers of the NVMe/TCP transport binding (NVMe/TCP Transport Spec 1.0,
 * section 3.6: common header, ICReq/ICResp, CapsuleCmd/Resp, H2CData, C2HData,
 * R2T, TermReq), the 64-byte submission and 16-byte completion queue entries
 * with the SGL descriptor (NVMe Base 2.0 sections 4.2, 4.6), and the Fabrics
 * Connect / Property Get/Set commands (NVMe-oF 1.1 section 3.3).  Layouts
 * only; kept private to the tool so it does not depend on the target's spec
 * headers while they are written.
 */
#ifndef SLATE_PERF_NVME_TCP_WIRE_H
#define SLATE_PERF_NVME_TCP_WIRE_H

#include <stdint.h>

#include "slate/byteorder.h"

enum {
        NTCP_PDU_ICREQ = 0x00,
        NTCP_PDU_ICRESP = 0x01,
        NTCP_PDU_H2C_TERM = 0x02,
        NTCP_PDU_C2H_TERM = 0x03,
        NTCP_PDU_CMD = 0x04,
        NTCP_PDU_RSP = 0x05,
        NTCP_PDU_H2C_DATA = 0x06,
        NTCP_PDU_C2H_DATA = 0x07,
        NTCP_PDU_R2T = 0x09,
};

enum {
        NTCP_F_HDGST = 1u << 0,
        NTCP_F_DDGST = 1u << 1,
        NTCP_F_LAST = 1u << 2,
        NTCP_F_SUCCESS = 1u << 3,
};

struct ntcp_ch {
        uint8_t type;
        uint8_t flags;
        uint8_t hlen;
        uint8_t pdo;
        le32 plen;
};
_Static_assert(sizeof(struct ntcp_ch) == 8, "common header");

struct ntcp_icreq {
        struct ntcp_ch ch;
        le16 pfv;
        uint8_t hpda;
        uint8_t dgst; /* bit 0 header digest, bit 1 data digest */
        le32 maxr2t;  /* 0's based */
        uint8_t rsvd[112];
};
_Static_assert(sizeof(struct ntcp_icreq) == 128, "ICReq");

struct ntcp_icresp {
        struct ntcp_ch ch;
        le16 pfv;
        uint8_t cpda;
        uint8_t dgst;
        le32 maxh2cdata;
        uint8_t rsvd[112];
};
_Static_assert(sizeof(struct ntcp_icresp) == 128, "ICResp");

struct ntcp_term {
        struct ntcp_ch ch;
        le16 fes;
        le32 fei;
        uint8_t rsvd[10];
};
_Static_assert(sizeof(struct ntcp_term) == 24, "TermReq");

struct nvme_sgl {
        le64 addr;
        le32 length;
        uint8_t rsvd[3];
        uint8_t type; /* descriptor type << 4 | subtype */
};
_Static_assert(sizeof(struct nvme_sgl) == 16, "SGL descriptor");

#define NVME_SGL_DATA_OFFSET    0x01 /* data block, offset into the capsule */
#define NVME_SGL_TRANSPORT_DATA 0x5a /* transport data block, transport specific */
#define NVME_CMD_SGL            0x40 /* CDW0 PSDT = 01b: SGLs */

struct nvme_sqe {
        uint8_t opc;
        uint8_t flags;
        le16 cid;
        le32 nsid;
        le32 cdw2;
        le32 cdw3;
        le64 mptr;
        struct nvme_sgl sgl;
        le32 cdw10, cdw11, cdw12, cdw13, cdw14, cdw15;
};
_Static_assert(sizeof(struct nvme_sqe) == 64, "SQE");

/* Fabrics command (opcode 7Fh) view of the SQE. */
struct nvmf_sqe {
        uint8_t opc;
        uint8_t rsvd1;
        le16 cid;
        uint8_t fctype;
        uint8_t rsvd2[19];
        struct nvme_sgl sgl;
        /* bytes 40..63: command specific */
        union {
                struct {
                        le16 recfmt;
                        le16 qid;
                        le16 sqsize; /* 0's based */
                        uint8_t cattr;
                        uint8_t rsvd;
                        le32 kato; /* ms */
                        uint8_t rsvd2[12];
                } connect;
                struct {
                        uint8_t attrib; /* 0: 4 bytes, 1: 8 bytes */
                        uint8_t rsvd[3];
                        le32 ofst;
                        le64 value;
                        uint8_t rsvd2[8];
                } prop;
        };
};
_Static_assert(sizeof(struct nvmf_sqe) == 64, "Fabrics SQE");

struct nvmf_connect_data {
        uint8_t hostid[16];
        le16 cntlid;
        uint8_t rsvd[238];
        char subnqn[256];
        char hostnqn[256];
        uint8_t rsvd2[256];
};
_Static_assert(sizeof(struct nvmf_connect_data) == 1024, "Connect data");

struct nvme_cqe {
        le32 dw0;
        le32 dw1;
        le16 sqhd;
        le16 sqid;
        le16 cid;
        le16 status; /* bit 0 phase, 15:1 status field */
};
_Static_assert(sizeof(struct nvme_cqe) == 16, "CQE");

struct ntcp_cmd_pdu {
        struct ntcp_ch ch;
        struct nvme_sqe sqe;
};
_Static_assert(sizeof(struct ntcp_cmd_pdu) == 72, "CapsuleCmd");

struct ntcp_rsp_pdu {
        struct ntcp_ch ch;
        struct nvme_cqe cqe;
};
_Static_assert(sizeof(struct ntcp_rsp_pdu) == 24, "CapsuleResp");

/* H2CData, C2HData and R2T share one layout (cccid, ttag, offset, length). */
struct ntcp_data_pdu {
        struct ntcp_ch ch;
        le16 cccid;
        le16 ttag; /* reserved in C2HData */
        le32 offset;
        le32 length;
        uint8_t rsvd[4];
};
_Static_assert(sizeof(struct ntcp_data_pdu) == 24, "data PDU");

enum {
        NVME_ADM_IDENTIFY = 0x06,
        NVME_ADM_SET_FEATURES = 0x09,
        NVME_ADM_DIRECTIVE_SEND = 0x19, /* NVMe Base 5.8: Identify directive, Enable Directive */
        NVME_ADM_KEEP_ALIVE = 0x18,
        NVME_FABRICS = 0x7f,
        NVME_IO_WRITE = 0x01,
        NVME_IO_READ = 0x02,
        NVMF_FCTYPE_PROP_SET = 0x00,
        NVMF_FCTYPE_CONNECT = 0x01,
        NVMF_FCTYPE_PROP_GET = 0x04,
        NVME_REG_CAP = 0x00,
        NVME_REG_VS = 0x08,
        NVME_REG_CC = 0x14,
        NVME_REG_CSTS = 0x1c,
        NVME_FEAT_NUM_QUEUES = 0x07,
};

/* Offsets into Identify Controller / Namespace data (NVMe Base 2.0 5.17.2). */
#define NVME_IDC_MN      24
#define NVME_IDC_MDTS    77
#define NVME_IDC_CTRATT  96 /* bit 15: Extended LBA Formats (ELBAF in CNS 05h) */
#define NVME_IDC_IOCCSZ  1792
#define NVME_IDN_NSZE    0
#define NVME_IDN_FLBAS   26
#define NVME_IDN_DPS     29 /* bits 2:0 PI type, bit 3 PI first */
#define NVME_IDNVM_ELBAF 12 /* CNS 05h: ELBAF[i] at 12 + 4i (STS 6:0, PIF 8:7) */
#define NVME_IDN_LBAF    128

#endif
