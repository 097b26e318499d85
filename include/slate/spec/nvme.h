/*
 * NVMe wire layouts (NVM Express Base Specification 2.0 / 1.4, NVM Command
 * Set Specification 1.0): the submission and completion queue entries, SGL
 * descriptors, Identify Controller/Namespace, the log pages Slate serves
 * (Error Information, SMART/Health, Firmware Slot, Changed Namespace List,
 * Commands Supported and Effects, Reservation Notification), the
 * reservation data structures, the namespace identification descriptor
 * and the opcode, status and feature numbers.  Layouts only: no code, all
 * multi-byte fields little-endian wrapper types, every size checked.
 */
#ifndef SLATE_SPEC_NVME_H
#define SLATE_SPEC_NVME_H

#include <stddef.h>
#include <stdint.h>

#include "slate/byteorder.h"

/* ---- Opcodes (Base 2.0 fig. 28 admin, NVM 1.0 fig. 16 I/O) ---- */
enum {
        NVME_ADM_GET_LOG_PAGE = 0x02,
        NVME_ADM_IDENTIFY = 0x06,
        NVME_ADM_ABORT = 0x08,
        NVME_ADM_SET_FEATURES = 0x09,
        NVME_ADM_GET_FEATURES = 0x0a,
        NVME_ADM_ASYNC_EVENT = 0x0c,
        NVME_ADM_KEEP_ALIVE = 0x18,
        NVME_ADM_DIR_SEND = 0x19, /* Directive Send (Base 2.0 5.9) */
        NVME_ADM_DIR_RECV = 0x1a, /* Directive Receive (Base 2.0 5.8) */
        NVME_ADM_DEVICE_SELF_TEST = 0x14,
        NVME_ADM_FORMAT_NVM = 0x80, /* Format NVM (Base 2.0 5.23) */
        NVME_ADM_SANITIZE = 0x84,
        NVME_ADM_GET_LBA_STATUS = 0x86,
        NVME_OPC_FABRICS = 0x7f,
};

enum {
        NVME_IO_FLUSH = 0x00,
        NVME_IO_WRITE = 0x01,
        NVME_IO_READ = 0x02,
        NVME_IO_WRITE_UNCOR = 0x04, /* Write Uncorrectable (NVM Command Set 1.0 3.3.6) */
        NVME_IO_COMPARE = 0x05,
        NVME_IO_WRITE_ZEROES = 0x08,
        NVME_IO_DSM = 0x09,
        NVME_IO_VERIFY = 0x0c,
        NVME_IO_RESV_REGISTER = 0x0d,
        NVME_IO_RESV_REPORT = 0x0e,
        NVME_IO_RESV_ACQUIRE = 0x11,
        NVME_IO_IO_MGMT_RECV = 0x12, /* I/O Management Receive (NVM 1.1 / TP4146) */
        NVME_IO_RESV_RELEASE = 0x15,
        NVME_IO_COPY = 0x19,
        NVME_IO_IO_MGMT_SEND = 0x1d, /* I/O Management Send (NVM 1.1 / TP4146) */
};

/* ---- Submission queue entry (Base 2.0 4.2) ---- */
struct nvme_sgl_desc {
        le64 addr;
        le32 length;
        uint8_t rsvd[3];
        uint8_t type; /* bits 7:4 descriptor type, 3:0 subtype */
};
_Static_assert(sizeof(struct nvme_sgl_desc) == 16, "SGL descriptor");

enum {
        NVME_SGL_TYPE_DATA_BLOCK = 0x0,
        NVME_SGL_TYPE_BIT_BUCKET = 0x1,
        NVME_SGL_TYPE_SEGMENT = 0x2,
        NVME_SGL_TYPE_LAST_SEGMENT = 0x3,
        NVME_SGL_TYPE_KEYED_DATA_BLOCK = 0x4,
        NVME_SGL_TYPE_TRANSPORT_DATA_BLOCK = 0x5,
};
enum {
        NVME_SGL_SUBTYPE_ADDRESS = 0x0,
        NVME_SGL_SUBTYPE_OFFSET = 0x1,
        NVME_SGL_SUBTYPE_TRANSPORT = 0xa,
};

struct nvme_sqe {
        uint8_t opc;
        uint8_t flags; /* bits 1:0 FUSE, 7:6 PSDT */
        le16 cid;
        le32 nsid;
        le32 cdw2;
        le32 cdw3;
        le64 mptr;
        struct nvme_sgl_desc dptr;
        le32 cdw10;
        le32 cdw11;
        le32 cdw12;
        le32 cdw13;
        le32 cdw14;
        le32 cdw15;
};
_Static_assert(sizeof(struct nvme_sqe) == 64, "SQE");
_Static_assert(offsetof(struct nvme_sqe, dptr) == 24, "SQE dptr");
_Static_assert(offsetof(struct nvme_sqe, cdw10) == 40, "SQE cdw10");

#define NVME_SQE_OFF_CDW(n) (40 + 4 * ((n)-10))
#define NVME_PSDT_PRP       0
#define NVME_PSDT_SGL_MPTR  1
#define NVME_PSDT_SGL_SGL   2

/* ---- Completion queue entry (Base 2.0 4.6) ---- */
struct nvme_cqe {
        le32 dw0;
        le32 dw1;
        le16 sqhd;
        le16 sqid;
        le16 cid;
        le16 status; /* bit 0 phase, 8:1 SC, 11:9 SCT, 13:12 CRD, 14 M, 15 DNR */
};
_Static_assert(sizeof(struct nvme_cqe) == 16, "CQE");

/* Status code types and codes (Base 2.0 fig. 94..97, NVM 1.0 fig. 18/19). */
enum {
        NVME_SCT_GENERIC = 0,
        NVME_SCT_CMD_SPECIFIC = 1,
        NVME_SCT_MEDIA = 2,
        NVME_SCT_PATH = 3,
};
enum {
        NVME_SC_SUCCESS = 0x00,
        NVME_SC_INVALID_OPCODE = 0x01,
        NVME_SC_INVALID_FIELD = 0x02,
        NVME_SC_CID_CONFLICT = 0x03,
        NVME_SC_DATA_XFER_ERROR = 0x04,
        NVME_SC_INTERNAL = 0x06,
        NVME_SC_ABORT_REQ = 0x07,
        NVME_SC_ABORT_SQ_DELETION = 0x08,
        NVME_SC_FUSED_FAIL = 0x09,    /* Command Aborted due to Failed Fused Command */
        NVME_SC_FUSED_MISSING = 0x0a, /* Command Aborted due to Missing Fused Command */
        NVME_SC_INVALID_NS = 0x0b,
        NVME_SC_CMD_SEQ_ERROR = 0x0c,
        NVME_SC_SGL_INVALID_LAST = 0x0d,
        NVME_SC_SGL_INVALID_COUNT = 0x0e,
        NVME_SC_SGL_INVALID_DATA_LEN = 0x0f,
        NVME_SC_SGL_INVALID_METADATA_LEN = 0x10,
        NVME_SC_SGL_INVALID_TYPE = 0x11,
        NVME_SC_SGL_INVALID_OFFSET = 0x16,
        NVME_SC_SGL_INVALID_SUBTYPE = 0x17,
        NVME_SC_HOSTID_INCONSISTENT = 0x18,
        NVME_SC_KA_EXPIRED = 0x19,
        NVME_SC_KA_INVALID = 0x1a,
        NVME_SC_SANITIZE_FAILED = 0x1c,
        NVME_SC_SANITIZE_IN_PROGRESS = 0x1d,
        NVME_SC_NS_WRITE_PROTECTED = 0x20,
        NVME_SC_CMD_INTERRUPTED = 0x21,
        NVME_SC_TRANSIENT_TRANSPORT = 0x22,
        NVME_SC_FDP_DISABLED = 0x29,             /* FDP disabled (TP4146) */
        NVME_SC_INVALID_PLACEMENT_HANDLE = 0x2a, /* Invalid Placement Handle List */
        NVME_SC_LBA_RANGE = 0x80,
        NVME_SC_CAP_EXCEEDED = 0x81,
        NVME_SC_NS_NOT_READY = 0x82,
        NVME_SC_RESERVATION_CONFLICT = 0x83,
};
enum {
        NVME_SC_CQ_INVALID = 0x00,
        NVME_SC_QID_INVALID = 0x01,
        NVME_SC_QUEUE_SIZE = 0x02,
        NVME_SC_ABORT_LIMIT = 0x03,
        NVME_SC_AER_LIMIT = 0x05,
        NVME_SC_INVALID_LOG_PAGE = 0x09,
        NVME_SC_DST_IN_PROGRESS = 0x1d, /* Device Self-test In Progress */
        NVME_SC_FEATURE_NOT_SAVEABLE = 0x0d,
        NVME_SC_FEATURE_NOT_CHANGEABLE = 0x0e,
        NVME_SC_FEATURE_NOT_PER_NS = 0x0f,
        NVME_SC_STREAM_ALLOC_FAILED = 0x7f,  /* Directives: Stream Resource Allocation Failed */
        NVME_SC_INVALID_FORMAT = 0x0a,       /* Format NVM: LBA format or PI not supported */
        NVME_SC_CONFLICTING_ATTRS = 0x80,    /* NVM: DSM / write zeroes attributes */
        NVME_SC_INVALID_PI = 0x81,           /* NVM: Invalid Protection Information */
        NVME_SC_CMD_SIZE_LIMIT = 0x83,       /* NVM: Copy / DSM beyond MSRC, MSSRL, MCL */
        NVME_SC_INCOMPATIBLE_NS = 0x85,      /* NVM: Copy between different formats */
        NVME_SC_FAST_COPY_IMPOSSIBLE = 0x86, /* NVM: Copy with FCO that cannot be fast */
        NVME_SC_OVERLAPPING_RANGE = 0x87, /* NVM: Copy format 2h/3h source overlaps destination */
};
enum {
        NVME_SC_WRITE_FAULT = 0x80,
        NVME_SC_READ_ERROR = 0x81,
        NVME_SC_GUARD_CHECK = 0x82,
        NVME_SC_APPTAG_CHECK = 0x83,
        NVME_SC_REFTAG_CHECK = 0x84,
        NVME_SC_COMPARE_FAILED = 0x85,
        NVME_SC_ACCESS_DENIED = 0x86,
};
/* Path Related Status (SCT 3h, Base 2.0 fig. 97). */
enum {
        NVME_SC_ANA_PERSISTENT_LOSS = 0x01,
        NVME_SC_ANA_INACCESSIBLE = 0x02,
        NVME_SC_ANA_TRANSITION = 0x03,
};

#define NVME_STATUS_DNR (1u << 15)
#define NVME_STATUS_M   (1u << 14)

/* ---- Identify (Base 2.0 5.17) ---- */
enum {
        NVME_CNS_NS = 0x00,
        NVME_CNS_CTRL = 0x01,
        NVME_CNS_ACTIVE_NS_LIST = 0x02,
        NVME_CNS_NS_DESC_LIST = 0x03,
        NVME_CNS_NVMSET_LIST = 0x04,
        NVME_CNS_CSI_NS = 0x05,
        NVME_CNS_CSI_CTRL = 0x06,
        NVME_CNS_CSI_ACTIVE_NS_LIST = 0x07,
        NVME_CNS_NS_INDEPENDENT = 0x08,
};

struct nvme_power_state {
        le16 mp;
        uint8_t rsvd2;
        uint8_t flags;
        le32 enlat;
        le32 exlat;
        uint8_t rrt, rrl, rwt, rwl;
        le16 idlp;
        uint8_t ips;
        uint8_t rsvd19;
        le16 actp;
        uint8_t apws;
        uint8_t rsvd23[9];
};
_Static_assert(sizeof(struct nvme_power_state) == 32, "power state descriptor");

struct nvme_id_ctrl {
        le16 vid;
        le16 ssvid;
        char sn[20];
        char mn[40];
        char fr[8];
        uint8_t rab;
        uint8_t ieee[3];
        uint8_t cmic;
        uint8_t mdts;
        le16 cntlid;
        le32 ver;
        le32 rtd3r;
        le32 rtd3e;
        le32 oaes;
        le32 ctratt;
        le16 rrls;
        uint8_t rsvd102[9];
        uint8_t cntrltype;
        uint8_t fguid[16];
        le16 crdt1, crdt2, crdt3;
        uint8_t rsvd134[119];
        uint8_t nvmsr;
        uint8_t vwci;
        uint8_t mec;
        le16 oacs;
        uint8_t acl;
        uint8_t aerl;
        uint8_t frmw;
        uint8_t lpa;
        uint8_t elpe;
        uint8_t npss;
        uint8_t avscc;
        uint8_t apsta;
        le16 wctemp;
        le16 cctemp;
        le16 mtfa;
        le32 hmpre;
        le32 hmmin;
        uint8_t tnvmcap[16];
        uint8_t unvmcap[16];
        le32 rpmbs;
        le16 edstt;
        uint8_t dsto;
        uint8_t fwug;
        le16 kas;
        le16 hctma;
        le16 mntmt;
        le16 mxtmt;
        le32 sanicap;
        le32 hmminds;
        le16 hmmaxd;
        le16 nsetidmax;
        le16 endgidmax;
        uint8_t anatt;
        uint8_t anacap;
        le32 anagrpmax;
        le32 nanagrpid;
        le32 pels;
        le16 domainid;
        uint8_t rsvd358[10];
        uint8_t megcap[16];
        uint8_t rsvd384[128];
        uint8_t sqes;
        uint8_t cqes;
        le16 maxcmd;
        le32 nn;
        le16 oncs;
        le16 fuses;
        uint8_t fna;
        uint8_t vwc;
        le16 awun;
        le16 awupf;
        uint8_t icsvscc;
        uint8_t nwpc;
        le16 acwu;
        le16 ocfs;
        le32 sgls;
        le32 mnan;
        uint8_t maxdna[16];
        le32 maxcna;
        uint8_t rsvd564[204];
        char subnqn[256];
        uint8_t rsvd1024[768];
        /* Fabrics (NVMe-oF 1.1 4.2) */
        le32 ioccsz;
        le32 iorcsz;
        le16 icdoff;
        uint8_t fcatt;
        uint8_t msdbd;
        le16 ofcs;
        uint8_t dctype;
        uint8_t rsvd1807[241];
        struct nvme_power_state psd[32];
        uint8_t vs[1024];
};
_Static_assert(sizeof(struct nvme_id_ctrl) == 4096, "Identify Controller");
_Static_assert(offsetof(struct nvme_id_ctrl, cntrltype) == 111, "cntrltype");
_Static_assert(offsetof(struct nvme_id_ctrl, oacs) == 256, "oacs");
_Static_assert(offsetof(struct nvme_id_ctrl, kas) == 320, "kas");
_Static_assert(offsetof(struct nvme_id_ctrl, sanicap) == 328, "sanicap");
_Static_assert(offsetof(struct nvme_id_ctrl, sqes) == 512, "sqes");
_Static_assert(offsetof(struct nvme_id_ctrl, nwpc) == 531, "nwpc");
_Static_assert(offsetof(struct nvme_id_ctrl, sgls) == 536, "sgls");
_Static_assert(offsetof(struct nvme_id_ctrl, subnqn) == 768, "subnqn");
_Static_assert(offsetof(struct nvme_id_ctrl, ioccsz) == 1792, "ioccsz");
_Static_assert(offsetof(struct nvme_id_ctrl, psd) == 2048, "psd");

#define NVME_CTRL_TYPE_IO   1
#define NVME_CTRL_TYPE_DISC 2

/* OAES / AEC bits */
#define NVME_AEN_CFG_NS_ATTR     (1u << 8)
#define NVME_AEN_CFG_ANA_CHANGE  (1u << 11) /* Asymmetric Namespace Access Change Notices */
#define NVME_AEN_CFG_LBA_STATUS  (1u << 13) /* LBA Status Information Notices (LSIN) */
#define NVME_AEN_CFG_DISC_CHANGE (1u << 31)

/* ONCS bits */
/* OACS (Identify Controller bytes 257:256) */
#define NVME_OACS_FORMAT         (1u << 1)
#define NVME_OACS_DIRECTIVES     (1u << 5)
#define NVME_OACS_GET_LBA_STATUS (1u << 9)
/* CTRATT (Identify Controller bytes 99:96) */
#define NVME_CTRATT_HOSTID128      (1u << 0)
#define NVME_CTRATT_ENDGRPS        (1u << 4)  /* Endurance Groups */
#define NVME_CTRATT_ELBAS          (1u << 15) /* Extended LBA Formats (ELBAF) */
#define NVME_CTRATT_FDPS           (1u << 19) /* Flexible Data Placement */
#define NVME_OACS_DEVICE_SELF_TEST (1u << 4)
/* Device Self-test log page (06h): 4-byte header and 20 results of 28 bytes. */
#define NVME_DST_LOG_SIZE 564

#define NVME_ONCS_COMPARE      (1u << 0)
#define NVME_ONCS_WRITE_UNCOR  (1u << 1)
#define NVME_ONCS_DSM          (1u << 2)
#define NVME_ONCS_WRITE_ZEROES (1u << 3)
#define NVME_ONCS_SAVE_SELECT  (1u << 4)
#define NVME_ONCS_RESERVATIONS (1u << 5)
#define NVME_ONCS_VERIFY       (1u << 7)
#define NVME_ONCS_COPY         (1u << 8)
#define NVME_ONCS_COPY_SA      (1u << 9)  /* NVMCSA: the write portion of a Copy is one write */
#define NVME_ONCS_ALL_FAST     (1u << 10) /* NVMAFC: every copy is a fast copy */

struct nvme_lbaf {
        le16 ms;
        uint8_t lbads;
        uint8_t rp;
};
_Static_assert(sizeof(struct nvme_lbaf) == 4, "LBA format");

struct nvme_id_ns {
        le64 nsze;
        le64 ncap;
        le64 nuse;
        uint8_t nsfeat;
        uint8_t nlbaf;
        uint8_t flbas;
        uint8_t mc;
        uint8_t dpc;
        uint8_t dps;
        uint8_t nmic;
        uint8_t rescap;
        uint8_t fpi;
        uint8_t dlfeat;
        le16 nawun;
        le16 nawupf;
        le16 nacwu;
        le16 nabsn;
        le16 nabo;
        le16 nabspf;
        le16 noiob;
        uint8_t nvmcap[16];
        le16 npwg;
        le16 npwa;
        le16 npdg;
        le16 npda;
        le16 nows;
        le16 mssrl;
        le32 mcl;
        uint8_t msrc;
        uint8_t rsvd81;
        uint8_t nulbaf;
        uint8_t rsvd83[9];
        le32 anagrpid;
        uint8_t rsvd96[3];
        uint8_t nsattr;
        le16 nvmsetid;
        le16 endgid;
        uint8_t nguid[16];
        uint8_t eui64[8];
        struct nvme_lbaf lbaf[64];
        uint8_t vs[3712];
};
_Static_assert(sizeof(struct nvme_id_ns) == 4096, "Identify Namespace");
_Static_assert(offsetof(struct nvme_id_ns, nguid) == 104, "nguid");
_Static_assert(offsetof(struct nvme_id_ns, eui64) == 120, "eui64");
_Static_assert(offsetof(struct nvme_id_ns, lbaf) == 128, "lbaf");

/* RESCAP (Identify Namespace byte 31): PTPL, the six reservation types, IEKEY as in 1.3+ */
#define NVME_RESCAP_PTPL    (1u << 0)
#define NVME_RESCAP_WE      (1u << 1)
#define NVME_RESCAP_EA      (1u << 2)
#define NVME_RESCAP_WE_RO   (1u << 3)
#define NVME_RESCAP_EA_RO   (1u << 4)
#define NVME_RESCAP_WE_AR   (1u << 5)
#define NVME_RESCAP_EA_AR   (1u << 6)
#define NVME_RESCAP_IEKEY13 (1u << 7)

/* NSFEAT (Identify Namespace byte 24) */
#define NVME_NSFEAT_THINP   (1u << 0)
#define NVME_NSFEAT_NSABP   (1u << 1) /* NAWUN, NAWUPF, NACWU, NABSN, NABO, NABSPF are valid */
#define NVME_NSFEAT_OPTPERF (1u << 4) /* NPWG, NPWA, NPDG, NPDA and NOWS are valid */

/* I/O Command Set Independent Identify Namespace (CNS 08h) */
struct nvme_id_ns_indep {
        uint8_t nsfeat;
        uint8_t nmic;
        uint8_t rescap;
        uint8_t fpi;
        le32 anagrpid;
        uint8_t nsattr;
        uint8_t rsvd9;
        le16 nvmsetid;
        le16 endgid;
        uint8_t nstat;
        uint8_t rsvd15[4081];
};
_Static_assert(sizeof(struct nvme_id_ns_indep) == 4096, "Identify NS independent");

/* Namespace Identification Descriptor (CNS 03h) header; NIDL bytes follow. */
struct nvme_ns_id_desc {
        uint8_t nidt;
        uint8_t nidl;
        uint8_t rsvd[2];
};
_Static_assert(sizeof(struct nvme_ns_id_desc) == 4, "NS id descriptor");
enum { NVME_NIDT_EUI64 = 1, NVME_NIDT_NGUID = 2, NVME_NIDT_UUID = 3, NVME_NIDT_CSI = 4 };
#define NVME_CSI_NVM 0

/* ---- Log pages (Base 2.0 5.16) ---- */
enum {
        NVME_LOG_ERROR = 0x01,
        NVME_LOG_SMART = 0x02,
        NVME_LOG_FW_SLOT = 0x03,
        NVME_LOG_CHANGED_NS = 0x04,
        NVME_LOG_CMD_EFFECTS = 0x05,
        NVME_LOG_ENDURANCE = 0x09, /* Endurance Group Information (LSI: endurance group) */
        NVME_LOG_DEVICE_SELF_TEST = 0x06,
        NVME_LOG_ANA = 0x0c, /* Asymmetric Namespace Access (LSP bit 0: RGO) */
        NVME_LOG_PERSISTENT_EVENT = 0x0d,
        NVME_LOG_LBA_STATUS = 0x0e,
        NVME_LOG_FDP_CONFIGS = 0x20, /* FDP Configurations (LSI: endurance group) */
        NVME_LOG_FDP_RUH_USAGE = 0x21,
        NVME_LOG_FDP_STATS = 0x22,
        NVME_LOG_FDP_EVENTS = 0x23, /* LSP bit 0: host events */
        NVME_LOG_DISCOVERY = 0x70,
        NVME_LOG_RESV_NOTIFY = 0x80,
        NVME_LOG_SANITIZE = 0x81,
        NVME_LOG_VS_PROVISIONING = 0xc0, /* vendor specific: Slate provisioning status */
};

/* Asymmetric Namespace Access log (Base 2.0 5.16.1.12): a header, then per group ... */
struct nvme_ana_log_hdr {
        le64 chgcnt; /* Change Count */
        le16 ngrps;  /* Number of ANA Group Descriptors */
        uint8_t rsvd10[6];
};
_Static_assert(sizeof(struct nvme_ana_log_hdr) == 16, "ANA log header");
/* ... a descriptor followed by nnsids NSIDs (none with RGO). */
struct nvme_ana_group_desc {
        le32 grpid;
        le32 nnsids;
        le64 chgcnt;
        uint8_t state; /* bits 3:0: enum nvme_ana_state */
        uint8_t rsvd17[15];
};
_Static_assert(sizeof(struct nvme_ana_group_desc) == 32, "ANA group descriptor");
enum nvme_ana_state {
        NVME_ANA_OPTIMIZED = 0x01,
        NVME_ANA_NON_OPTIMIZED = 0x02,
        NVME_ANA_INACCESSIBLE = 0x03,
        NVME_ANA_PERSISTENT_LOSS = 0x04,
        NVME_ANA_CHANGE = 0x0f,
};
#define NVME_CMIC_MULTI_CTRL (1u << 1) /* the subsystem may have several controllers */
#define NVME_CMIC_ANA        (1u << 3) /* Asymmetric Namespace Access Reporting */
/* ANACAP (Identify Controller byte 343). */
#define NVME_ANACAP_OPTIMIZED       (1u << 0)
#define NVME_ANACAP_NON_OPTIMIZED   (1u << 1)
#define NVME_ANACAP_INACCESSIBLE    (1u << 2)
#define NVME_ANACAP_PERSISTENT_LOSS (1u << 3)
#define NVME_ANACAP_CHANGE          (1u << 4)

/*
 * Vendor-specific log page C0h (Slate): the provisioning status of the
 * subsystem's namespaces that have a limit or threshold, the page behind
 * the vendor-specific asynchronous event "provisioning soft threshold
 * reached" (type 7h, information 01h).  A header, then one entry per NSID.
 */
struct nvme_vs_prov_hdr {
        le32 entries;
        le32 rsvd;
};
_Static_assert(sizeof(struct nvme_vs_prov_hdr) == 8, "provisioning log header");
struct nvme_vs_prov_entry {
        le32 nsid;
        le32 flags;     /* bit 0 threshold reached, 1 limit set, 2 threshold set, 3 pool bound */
        le64 capacity;  /* bytes */
        le64 limit;     /* hard limit of allocated bytes; 0 = none */
        le64 threshold; /* soft threshold of allocated bytes; 0 = none */
        le64 mapped;    /* allocated bytes */
        le64 available; /* limit (or capacity) - mapped */
};
_Static_assert(sizeof(struct nvme_vs_prov_entry) == 48, "provisioning log entry");

struct nvme_error_log {
        le64 error_count;
        le16 sqid;
        le16 cmdid;
        le16 status;    /* bit 0 phase, 15:1 status field */
        le16 param_loc; /* 7:0 byte, 10:8 bit */
        le64 lba;
        le32 nsid;
        uint8_t vs;
        uint8_t trtype;
        uint8_t rsvd30[2];
        le64 cs;
        le16 trtype_info;
        uint8_t rsvd42[22];
};
_Static_assert(sizeof(struct nvme_error_log) == 64, "error information entry");

struct nvme_smart_log {
        uint8_t critical_warning;
        le16 temperature;
        uint8_t avail_spare;
        uint8_t spare_thresh;
        uint8_t percent_used;
        uint8_t endu_grp_crit_warn;
        uint8_t rsvd7[25];
        uint8_t data_units_read[16];
        uint8_t data_units_written[16];
        uint8_t host_reads[16];
        uint8_t host_writes[16];
        uint8_t ctrl_busy_time[16];
        uint8_t power_cycles[16];
        uint8_t power_on_hours[16];
        uint8_t unsafe_shutdowns[16];
        uint8_t media_errors[16];
        uint8_t num_err_log_entries[16];
        le32 warning_temp_time;
        le32 critical_comp_time;
        le16 temp_sensor[8];
        le32 thm_temp1_trans_count;
        le32 thm_temp2_trans_count;
        le32 thm_temp1_total_time;
        le32 thm_temp2_total_time;
        uint8_t rsvd232[280];
};
_Static_assert(sizeof(struct nvme_smart_log) == 512, "SMART / health log");
_Static_assert(offsetof(struct nvme_smart_log, data_units_read) == 32, "smart dur");
_Static_assert(offsetof(struct nvme_smart_log, warning_temp_time) == 192, "smart wtt");

struct nvme_fw_slot_log {
        uint8_t afi;
        uint8_t rsvd1[7];
        char frs[7][8];
        uint8_t rsvd64[448];
};
_Static_assert(sizeof(struct nvme_fw_slot_log) == 512, "firmware slot log");

struct nvme_effects_log {
        le32 acs[256];
        le32 iocs[256];
        uint8_t rsvd2048[2048];
};
_Static_assert(sizeof(struct nvme_effects_log) == 4096, "commands supported and effects log");

#define NVME_EFFECTS_CSUPP     (1u << 0)
#define NVME_EFFECTS_LBCC      (1u << 1)
#define NVME_EFFECTS_NCC       (1u << 2)
#define NVME_EFFECTS_NIC       (1u << 3)
#define NVME_EFFECTS_CCC       (1u << 4)
#define NVME_EFFECTS_CSE_SHIFT 16

/*
 * Get LBA Status (Base 2.0 5.20): CDW10-11 SLBA, CDW12 MNDW (dwords to
 * return, 0's based), CDW13 bits 15:0 RL (blocks from SLBA; 0h: to the
 * end of the namespace) and 31:24 ATYPE.  The data is a header and LBA
 * Status Descriptors.
 */
enum {
        NVME_LBAS_ATYPE_SCAN = 0x10,    /* scan, then report tracked and untracked blocks */
        NVME_LBAS_ATYPE_TRACKED = 0x11, /* report the tracked blocks */
};
struct nvme_lba_status_hdr {
        le32 nlsd;    /* LBA Status Descriptors returned */
        uint8_t cmpc; /* completion condition */
        uint8_t rsvd5[3];
};
_Static_assert(sizeof(struct nvme_lba_status_hdr) == 8, "LBA status header");
enum {
        NVME_LBAS_CMPC_MNDW = 1, /* stopped: MNDW dwords are full, more may follow */
        NVME_LBAS_CMPC_RL = 2,   /* the whole range (RL) was examined */
};
struct nvme_lba_status_desc {
        le64 dslba;
        le32 nlb;
        uint8_t rsvd12;
        uint8_t status; /* 0 for ATYPE 10h/11h: may return unrecovered errors */
        uint8_t rsvd14[2];
};
_Static_assert(sizeof(struct nvme_lba_status_desc) == 16, "LBA status descriptor");

/* LBA Status Information log (0Eh, Base 2.0 5.16.1.15): header, then one element per namespace */
struct nvme_lba_status_log_hdr {
        le32 lslplen; /* bytes of the whole log page */
        le32 nlslne;  /* namespace elements */
        le32 estulb;  /* estimate of unrecoverable blocks */
        uint8_t rsvd12[2];
        le16 lsgc; /* generation counter: changes when the content does */
};
_Static_assert(sizeof(struct nvme_lba_status_log_hdr) == 16, "LBA status log header");
struct nvme_lba_status_ns_element {
        le32 neid;      /* the NSID */
        le32 nrld;      /* LBA range descriptors that follow */
        uint8_t ratype; /* recommended ATYPE to ask Get LBA Status with */
        uint8_t rsvd9[7];
};
_Static_assert(sizeof(struct nvme_lba_status_ns_element) == 16, "LBA status namespace element");
struct nvme_lba_range_desc {
        le64 rslba;
        le32 rnlb;
        uint8_t rsvd12[4];
};
_Static_assert(sizeof(struct nvme_lba_range_desc) == 16, "LBA range descriptor");

/* Sanitize Status log (Base 2.0 5.16.1.25) */
struct nvme_sanitize_log {
        le16 sprog;  /* progress of the one in progress, /65536; FFFFh when none */
        le16 sstat;  /* 2:0 status, 7:3 overwrite passes completed, 8 global data erased */
        le32 scdw10; /* CDW10 of the Sanitize that started the most recent one */
        le32 eto;    /* estimated seconds: overwrite */
        le32 etbe;   /* block erase */
        le32 etce;   /* crypto erase */
        le32 etond;  /* overwrite, no-deallocate */
        le32 etbend; /* block erase, no-deallocate */
        le32 etcend; /* crypto erase, no-deallocate */
        uint8_t rsvd32[480];
};
_Static_assert(sizeof(struct nvme_sanitize_log) == 512, "sanitize status log");
enum {
        NVME_SSTAT_NEVER = 0,
        NVME_SSTAT_DONE = 1,
        NVME_SSTAT_IN_PROGRESS = 2,
        NVME_SSTAT_FAILED = 3,
};
#define NVME_SSTAT_OPC_SHIFT  3
#define NVME_SSTAT_GDE        (1u << 8)
#define NVME_SANITIZE_NO_TIME 0xffffffffu

/* Sanitize command CDW10 (Base 2.0 5.24) */
enum {
        NVME_SANACT_EXIT_FAILURE = 1,
        NVME_SANACT_BLOCK_ERASE = 2,
        NVME_SANACT_OVERWRITE = 3,
        NVME_SANACT_CRYPTO_ERASE = 4,
};
#define NVME_SAN_AUSE         (1u << 3)
#define NVME_SAN_OWPASS_SHIFT 4
#define NVME_SAN_OIPBP        (1u << 8)
#define NVME_SAN_NDAS         (1u << 9)
/* Identify Controller SANICAP */
#define NVME_SANICAP_CES         (1u << 0)
#define NVME_SANICAP_BES         (1u << 1)
#define NVME_SANICAP_OWS         (1u << 2)
#define NVME_SANICAP_NDI         (1u << 29)
#define NVME_SANICAP_NODMMAS_NOT (1u << 30) /* 01b: media not additionally modified after */

/* Asynchronous event types (Base 2.0 fig. 146) */
enum {
        NVME_AER_TYPE_ERROR = 0,
        NVME_AER_TYPE_SMART = 1,
        NVME_AER_TYPE_NOTICE = 2,
        NVME_AER_TYPE_IO_SPECIFIC = 6,
        NVME_AER_TYPE_VENDOR = 7,
};
/* Vendor specific (Slate): 01h provisioning soft threshold reached, LID C0h */
enum { NVME_AER_VS_PROV_THRESHOLD = 0x01 };
enum { NVME_AER_IO_RESV_LOG_AVAILABLE = 0x00 };
/* I/O command set specific information (NVM): 01h Sanitize Operation Completed, LID 81h */
enum { NVME_AER_IO_SANITIZE_DONE = 0x01 };
enum {
        NVME_AER_NOTICE_NS_CHANGED = 0x00,
        NVME_AER_NOTICE_ANA = 0x03,        /* Asymmetric Namespace Access Change (log 0Ch) */
        NVME_AER_NOTICE_LBA_STATUS = 0x05, /* LBA Status Information Alert (log 0Eh) */
        NVME_AER_NOTICE_DISC_CHANGED = 0xf0
};

/*
 * Persistent Event log (0Dh, Base 2.0 5.16.1.14): a 512-byte header, then
 * events, each a 24-byte event header and EL bytes of event data.  LSP
 * (CDW10 bits 11:8) is the action: read, establish a reporting context
 * and read, release the context.
 */
enum {
        NVME_PEL_ACT_READ = 0,
        NVME_PEL_ACT_ESTABLISH = 1,
        NVME_PEL_ACT_RELEASE = 2,
};
enum {
        NVME_PEL_SMART_SNAPSHOT = 0x01,
        NVME_PEL_TIMESTAMP_CHANGE = 0x03,
        NVME_PEL_POWER_ON_RESET = 0x04,
        NVME_PEL_NSS_HW_ERROR = 0x05,
        NVME_PEL_CHANGE_NS = 0x06,
        NVME_PEL_SANITIZE_START = 0x09,
        NVME_PEL_SANITIZE_DONE = 0x0a,
};
/* NVM Subsystem Hardware Error Event codes (Base 2.0 fig. 224) used here. */
enum { NVME_PEL_HWERR_MEDIA_INTEGRITY = 0x0a }; /* Media and Data Integrity Status */
struct nvme_pel_hdr {
        uint8_t lid;
        uint8_t rsvd1[3];
        le32 tnev;  /* events in the log */
        le64 tll;   /* bytes of the log, this header included */
        uint8_t rv; /* log revision */
        uint8_t rsvd17;
        le16 lhl; /* header length after byte 19 */
        le64 ts;  /* timestamp (Set Features Timestamp format) */
        uint8_t poh[16];
        le64 pcc; /* power cycle count */
        le16 vid, ssvid;
        char sn[20];
        char mn[40];
        char subnqn[256];
        le16 gen; /* generation number */
        le32 rci; /* reporting context information */
        uint8_t rsvd378[102];
        uint8_t seb[32]; /* supported events bitmap */
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_pel_hdr) == 512, "persistent event log header");
struct nvme_pel_event {
        uint8_t etype;
        uint8_t etype_rev;
        uint8_t ehl; /* bytes of this header after byte 2 (21) */
        uint8_t ehai;
        le16 cntlid;
        le64 ets; /* event timestamp */
        le16 pelpid;
        uint8_t rsvd14[4];
        le16 vsil; /* vendor specific information length */
        le16 el;   /* bytes after this header (vendor info and event data) */
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_pel_event) == 24, "persistent event header");
/* Change Namespace event data (fig. 227). */
struct nvme_pel_change_ns {
        le32 nsmgt_cdw10;
        uint8_t rsvd4[4];
        le64 nsze;
        uint8_t rsvd16[8];
        le64 nscap;
        uint8_t flbas, dps, nmic, rsvd35;
        le32 anagrpid;
        le16 nvmsetid;
        le16 rsvd42;
        le32 nsid;
} __attribute__((packed));
_Static_assert(sizeof(struct nvme_pel_change_ns) == 48, "change namespace event");

/* ---- Features (Base 2.0 5.27.1) ---- */
enum {
        NVME_FEAT_ARBITRATION = 0x01,
        NVME_FEAT_POWER_MGMT = 0x02,
        NVME_FEAT_TEMP_THRESH = 0x04,
        NVME_FEAT_ERR_RECOVERY = 0x05,
        NVME_FEAT_VOLATILE_WC = 0x06,
        NVME_FEAT_NUM_QUEUES = 0x07,
        NVME_FEAT_IRQ_COALESCE = 0x08,
        NVME_FEAT_IRQ_CONFIG = 0x09,
        NVME_FEAT_WRITE_ATOMIC = 0x0a,
        NVME_FEAT_ASYNC_EVENT = 0x0b,
        NVME_FEAT_TIMESTAMP = 0x0e,
        NVME_FEAT_KATO = 0x0f,
        NVME_FEAT_HOST_BEHAVIOR = 0x16,
        NVME_FEAT_FDP = 0x1d,        /* Flexible Data Placement (per endurance group) */
        NVME_FEAT_FDP_EVENTS = 0x1e, /* FDP Events (per namespace placement handle) */
        NVME_FEAT_HOST_ID = 0x81,
        NVME_FEAT_RESV_MASK = 0x82,
        NVME_FEAT_RESV_PERSIST = 0x83,
        NVME_FEAT_WRITE_PROTECT = 0x84, /* Namespace Write Protection Config (5.27.1.28) */
};
/* Feature 84h CDW11 bits 2:0 WPS, the namespace write protection state (Base 2.0 8.12). */
enum {
        NVME_WPS_NONE = 0,        /* No Write Protect */
        NVME_WPS_WRITE_PROTECT,   /* Write Protect */
        NVME_WPS_UNTIL_POWER_CYC, /* Write Protect Until Power Cycle */
        NVME_WPS_PERMANENT,       /* Permanent Write Protect */
};
#define NVME_WPS_MASK 0x7u
/* Identify Controller NWPC (byte 531). */
#define NVME_NWPC_WP           (1u << 0) /* No Write Protect and Write Protect */
#define NVME_NWPC_UNTIL_PWR_CY (1u << 1) /* Write Protect Until Power Cycle */
#define NVME_NWPC_PERMANENT    (1u << 2) /* Permanent Write Protect */
enum { NVME_SEL_CURRENT = 0, NVME_SEL_DEFAULT = 1, NVME_SEL_SAVED = 2, NVME_SEL_SUPPORTED = 3 };
#define NVME_FEAT_CAP_SAVEABLE   (1u << 0)
#define NVME_FEAT_CAP_NS         (1u << 1)
#define NVME_FEAT_CAP_CHANGEABLE (1u << 2)

struct nvme_host_behavior {
        uint8_t acre;
        uint8_t etdas;
        uint8_t lbafee;
        uint8_t hdisns;
        le16 cdfe; /* Copy Descriptor Formats Enable: bit n enables format n (2h, 3h) */
        uint8_t rsvd6[506];
};
_Static_assert(sizeof(struct nvme_host_behavior) == 512, "host behavior support");

/*
 * Copy Source Range entries (NVM Command Set 1.2 figs. 39, 40): formats
 * 0h/2h are 32 bytes, 1h/3h 40 (the 16-byte PI formats' longer tags).  The
 * first 24 bytes are common; SNSID is reserved in formats 0h and 1h.
 */
struct nvme_copy_range {
        le32 snsid; /* formats 2h, 3h: source namespace */
        uint8_t rsvd4[4];
        le64 slba;
        le16 nlb;       /* 0's based */
        uint8_t cetype; /* bits 3:0 */
        uint8_t rsvd19;
        le16 cev;
        le16 sopt;       /* formats 2h, 3h: bit 15 FCO */
        uint8_t tags[8]; /* ELBT, ELBAT, ELBATM (PI only) */
};
_Static_assert(sizeof(struct nvme_copy_range) == 32, "copy range format 0h/2h");
struct nvme_copy_range_ext {
        struct nvme_copy_range r; /* tags are rsvd24[2] + the first 6 ELBT bytes here */
        uint8_t tags2[8];
};
_Static_assert(sizeof(struct nvme_copy_range_ext) == 40, "copy range format 1h/3h");
#define NVME_COPY_SOPT_FCO (1u << 15)
#define NVME_COPY_FMT_MAX  3u

/* Dataset Management range (NVM 1.0 fig. 39) */
struct nvme_dsm_range {
        le32 cattr;
        le32 nlb;
        le64 slba;
};
_Static_assert(sizeof(struct nvme_dsm_range) == 16, "DSM range");
/* Context attributes (cattr): AF 3:0, AL 5:4, SR 8, SW 9, WP 10, command access size 31:24. */
#define NVME_DSM_CA_AF(x) ((x)&0xfu)
#define NVME_DSM_CA_AL(x) (((x) >> 4) & 0x3u)
#define NVME_DSM_CA_SR    (1u << 8)
#define NVME_DSM_CA_SW    (1u << 9)
#define NVME_DSM_CA_WP    (1u << 10)
/* Read/Write CDW13 DSM field bits 7:0: AF 3:0, AL 5:4, SEQREQ 6, INCOMPRESSIBLE 7. */
#define NVME_RW_DSM_SEQREQ (1u << 6)
#define NVME_DSM_IDR       (1u << 0)
#define NVME_DSM_IDW       (1u << 1)
#define NVME_DSM_AD        (1u << 2)

/* ---- Directives (Base 2.0 8.7) ---- */
enum { NVME_DIR_IDENTIFY = 0x00, NVME_DIR_STREAMS = 0x01, NVME_DIR_DATA_PLACEMENT = 0x02 };
/* Directive Receive / Send DOPER values */
enum {
        NVME_DIR_RCV_ID_PARAMS = 0x01,   /* Identify: Return Parameters */
        NVME_DIR_SND_ID_ENABLE = 0x01,   /* Identify: Enable Directive */
        NVME_DIR_RCV_ST_PARAMS = 0x01,   /* Streams: Return Parameters */
        NVME_DIR_RCV_ST_STATUS = 0x02,   /* Streams: Get Status */
        NVME_DIR_RCV_ST_RESOURCE = 0x03, /* Streams: Allocate Resources */
        NVME_DIR_SND_ST_REL_ID = 0x01,   /* Streams: Release Identifier */
        NVME_DIR_SND_ST_REL_RSC = 0x02,  /* Streams: Release Resources */
};
/* Streams Return Parameters (Base 2.0 fig. 608). */
struct nvme_streams_params {
        le16 msl;
        le16 nssa;
        le16 nsso;
        uint8_t nssc;
        uint8_t rsvd7[9];
        le32 sws;
        le16 sgs;
        le16 nsa;
        le16 nso;
        uint8_t rsvd26[6];
};
_Static_assert(sizeof(struct nvme_streams_params) == 32, "streams params");

/* ---- Flexible Data Placement (TP4146; NVMe 2.1 8.1.10) ---- */
struct nvme_fdp_config_log { /* log 20h header */
        le16 ncfg;           /* number of configurations, 0's based */
        uint8_t version;
        uint8_t rsvd3;
        le32 size; /* whole log, bytes */
        uint8_t rsvd8[8];
};
_Static_assert(sizeof(struct nvme_fdp_config_log) == 16, "FDP config log header");
struct nvme_fdp_config_desc { /* followed by NRUH 4-byte RUH descriptors (RUHT, 3 reserved) */
        le16 size;
        uint8_t fdpa; /* RGIF 3:0, FDPVWC 4, valid 7 */
        uint8_t vss;
        le32 nrg;
        le16 nruh;
        le16 maxpids;
        le32 nnss;
        le64 runs; /* reclaim unit nominal size, bytes */
        le32 erutl;
        uint8_t rsvd28[36];
};
_Static_assert(sizeof(struct nvme_fdp_config_desc) == 64, "FDP config descriptor");
enum { NVME_FDP_RUHT_INITIALLY_ISOLATED = 1, NVME_FDP_RUHT_PERSISTENTLY_ISOLATED = 2 };
struct nvme_fdp_ruhu_log { /* log 21h header, then NRUH 8-byte descriptors (RUHA, 7 reserved) */
        le16 nruh;
        uint8_t rsvd2[6];
};
_Static_assert(sizeof(struct nvme_fdp_ruhu_log) == 8, "RUH usage header");
enum { NVME_FDP_RUHA_UNUSED = 0, NVME_FDP_RUHA_HOST = 1, NVME_FDP_RUHA_CTRL = 2 };
struct nvme_fdp_stats_log { /* log 22h, 128-bit little-endian counters */
        uint8_t hbmw[16];
        uint8_t mbmw[16];
        uint8_t mbe[16];
        uint8_t rsvd48[16];
};
_Static_assert(sizeof(struct nvme_fdp_stats_log) == 64, "FDP statistics");
struct nvme_fdp_event { /* log 23h entry */
        uint8_t type;
        uint8_t flags; /* PIV 0, NSIDV 1, LV 2 */
        le16 pid;
        le64 timestamp;
        le32 nsid;
        uint8_t type_specific[16];
        le16 rgid;
        uint8_t ruhid;
        uint8_t rsvd35[5];
        uint8_t vs[24];
};
_Static_assert(sizeof(struct nvme_fdp_event) == 64, "FDP event");
#define NVME_FDP_EVENTS_MAX 63
struct nvme_fdp_events_log {
        le32 nevents;
        uint8_t rsvd4[60];
        struct nvme_fdp_event ev[NVME_FDP_EVENTS_MAX];
};
_Static_assert(sizeof(struct nvme_fdp_events_log) == 4096, "FDP events log");
enum {
        NVME_FDP_EVT_RU_NOT_FULLY_WRITTEN = 0x00, /* host events */
        NVME_FDP_EVT_RU_TIME_LIMIT = 0x01,
        NVME_FDP_EVT_CTRL_RESET_RUH = 0x02,
        NVME_FDP_EVT_INVALID_PID = 0x03,
        NVME_FDP_EVT_MEDIA_REALLOC = 0x80, /* controller events */
        NVME_FDP_EVT_IMPLICIT_RUH = 0x81,
};
#define NVME_FDP_EVF_PIV   (1u << 0)
#define NVME_FDP_EVF_NSIDV (1u << 1)
#define NVME_FDP_EVF_LV    (1u << 2)
/* I/O Management Receive MO 01h: Reclaim Unit Handle Status. */
struct nvme_fdp_ruh_status {
        uint8_t rsvd0[14];
        le16 nruhsd;
};
_Static_assert(sizeof(struct nvme_fdp_ruh_status) == 16, "RUH status header");
struct nvme_fdp_ruh_status_desc {
        le16 pid;
        le16 ruhid;
        le32 earutr;
        le64 ruamw; /* logical blocks still writable in the current reclaim unit */
        uint8_t rsvd16[16];
};
_Static_assert(sizeof(struct nvme_fdp_ruh_status_desc) == 32, "RUH status descriptor");
enum { NVME_IOMR_MO_RUH_STATUS = 0x01 };
enum { NVME_IOMS_MO_RUH_UPDATE = 0x01 };

/* ---- Reservations (Base 2.0 7.2-7.5 commands, 8.19; NVM 1.0 3.2) ---- */
/* Reservation Register/Acquire data: current key, then the new (Register) or preempt key. */
struct nvme_resv_keys {
        le64 crkey;
        le64 nkey; /* NRKEY (Register) or PRKEY (Acquire) */
};
_Static_assert(sizeof(struct nvme_resv_keys) == 16, "reservation register/acquire data");

/* Reservation Status data structure, extended (EDS = 1) header: 64 bytes. */
struct nvme_resv_status_ext {
        le32 gen;
        uint8_t rtype;
        uint8_t regctl[2]; /* little endian, unaligned */
        uint8_t rsvd7[2];
        uint8_t ptpls;
        uint8_t rsvd10[54];
};
_Static_assert(sizeof(struct nvme_resv_status_ext) == 64, "reservation status header (EDS)");

/* Registered Controller extended data structure: 64 bytes each. */
struct nvme_resv_ctrl_ext {
        le16 cntlid;
        uint8_t rcsts; /* bit 0: holds the reservation */
        uint8_t rsvd3[5];
        le64 rkey;
        uint8_t hostid[16];
        uint8_t rsvd32[32];
};
_Static_assert(sizeof(struct nvme_resv_ctrl_ext) == 64, "registered controller (EDS)");
_Static_assert(offsetof(struct nvme_resv_ctrl_ext, hostid) == 16, "registered controller hostid");

/* Reservation Notification log page (80h). */
struct nvme_resv_notify_log {
        le64 count; /* log page count; 0: empty */
        uint8_t type;
        uint8_t nalp; /* number of available log pages after this one */
        uint8_t rsvd10[2];
        le32 nsid;
        uint8_t rsvd16[48];
};
_Static_assert(sizeof(struct nvme_resv_notify_log) == 64, "reservation notification log");
enum {
        NVME_RESV_LOG_EMPTY = 0,
        NVME_RESV_LOG_REG_PREEMPTED = 1,
        NVME_RESV_LOG_RESV_RELEASED = 2,
        NVME_RESV_LOG_RESV_PREEMPTED = 3,
};
/* Reservation Notification Mask (feature 82h, CDW11) */
#define NVME_RESV_MASK_REGPRE (1u << 1)
#define NVME_RESV_MASK_RESREL (1u << 2)
#define NVME_RESV_MASK_RESPRE (1u << 3)

#endif
