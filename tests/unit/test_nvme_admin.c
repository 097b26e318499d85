/*
 * NVMe personality without a transport: Connect validation (IATTR/IPO),
 * Property Get/Set and enable, Identify contents (NN, MDTS, identity
 * descriptors from a mem namespace's uuid), Get Log Page offsets/NUMD and
 * the error log's parameter locations, features, RAE masking, the discovery
 * log, SGL checks, I/O parse checks, the status table, and an I/O round
 * trip (write, read, compare, miscompare) through nvme_cmd_exec on a reactor.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/ana.h"
#include "core/atomic.h"
#include "core/crypt.h"
#include "core/media.h"
#include "core/ns.h"
#include "nvme/internal.h"
#include "rt/reactor.h"

#define SUBNQN  "nqn.2024-01.io.slate:test"
#define HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-555555555555"
#define BUFLEN  (2 * CORE_MAX_TRANSFER_BYTES)

static char state_dir[64];
static struct core_ns *ns;
static uint8_t *buf;

/* Status as 15 bits: SC 7:0, SCT 10:8, DNR 14. */
#define ST(sct, sc) ((uint16_t)(((sct) << 8) | (sc)))
static uint16_t st(struct nvme_cmd *c)
{
        return nvme_cqe_status(c) & 0x7ff;
}
static uint32_t dw0(struct nvme_cmd *c)
{
        return (uint32_t)slate_get_le(c->cqe, 4);
}

static void sqe_init(struct nvme_cmd *c, struct nvme_queue *q, uint8_t opc, uint32_t nsid)
{
        memset(c, 0, sizeof(*c));
        c->queue = q;
        c->buf = buf;
        c->buf_len = BUFLEN;
        c->sqe[0] = opc;
        c->sqe[1] = 0x40; /* PSDT = SGL */
        slate_put_le(c->sqe + 2, 2, 0x1234);
        slate_put_le(c->sqe + 4, 4, nsid);
        c->sqe[39] = 0x5a; /* transport SGL data block */
}
static void cdw(struct nvme_cmd *c, int n, uint32_t v)
{
        slate_put_le(c->sqe + 4 * n, 4, v);
}
static void sgl_len(struct nvme_cmd *c, uint32_t len)
{
        slate_put_le(c->sqe + 32, 4, len);
}

static uint16_t do_connect(struct nvme_queue *q, uint16_t qid, uint16_t sqsize, uint16_t cntlid,
                           const char *subnqn, const char *hostnqn, uint32_t *res)
{
        struct nvme_cmd c;
        sqe_init(&c, q, NVME_OPC_FABRICS, 0);
        c.sqe[4] = NVMF_FCTYPE_CONNECT;
        c.sqe[39] = 0x01; /* in-capsule */
        sgl_len(&c, 1024);
        slate_put_le(c.sqe + 42, 2, qid);
        slate_put_le(c.sqe + 44, 2, sqsize);
        c.icd_len = 1024;
        struct nvmf_connect_data *d = (struct nvmf_connect_data *)buf;
        memset(d, 0, sizeof(*d));
        d->hostid[0] = 0xab;
        put_le16(&d->cntlid, cntlid);
        snprintf(d->subnqn, sizeof(d->subnqn), "%s", subnqn);
        snprintf(d->hostnqn, sizeof(d->hostnqn), "%s", hostnqn);
        if (nvme_cmd_parse(&c) == NVME_PARSE_EXEC)
                nvmf_connect_do(&c);
        if (res)
                *res = dw0(&c);
        return st(&c);
}

static uint16_t prop_set_cc(struct nvme_queue *q, uint32_t cc)
{
        struct nvme_cmd c;
        sqe_init(&c, q, NVME_OPC_FABRICS, 0);
        c.sqe[4] = NVMF_FCTYPE_PROPERTY_SET;
        slate_put_le(c.sqe + 44, 4, NVME_REG_CC);
        slate_put_le(c.sqe + 48, 8, cc);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        return st(&c);
}

static struct nvme_queue admin_q, io_q;

static int setup(void **s)
{
        (void)s;
        char err[256];
        snprintf(state_dir, sizeof(state_dir), "/tmp/slate-test-nvme-XXXXXX");
        if (!mkdtemp(state_dir))
                return -1;
        core_set_state_dir(state_dir);
        if (rt_init(1) || rt_start())
                return -1;
        buf = aligned_alloc(4096, BUFLEN);
        struct core_ns_params p = {.name = "nvt",
                                   .backend = "mem",
                                   .size_bytes = 64 << 20,
                                   .block_size = 4096,
                                   .atomic_write_max_set = true,
                                   .atomic_write_max = 64 << 10};
        if (core_ns_create(&p, &ns, err, sizeof(err)))
                return -1;
        if (nvme_subsys_add(SUBNQN, "SN123", "Slate Test", err, sizeof(err)))
                return -1;
        if (nvme_ns_attach(SUBNQN, 1, "nvt", err, sizeof(err)) != 1)
                return -1;
        if (nvme_subsys_allow_host(SUBNQN, HOSTNQN, err, sizeof(err)))
                return -1;
        nvme_listener_register("tcp", "0.0.0.0", 4420, 0);
        return 0;
}

static void test_connect_validation(void **s)
{
        (void)s;
        struct nvme_queue q;
        uint32_t r;
        memset(&q, 0, sizeof(q));
        /* Unknown subsystem: Invalid Parameters, IATTR = data, IPO = SUBNQN. */
        assert_int_equal(do_connect(&q, 0, 31, 0xffff, "nqn.2024-01.io.slate:nope", HOSTNQN, &r),
                         ST(1, NVMF_SC_CONNECT_INVALID_PARAM));
        assert_int_equal(r, NVMF_IATTR_DATA | 256);
        /* Host not allowed: Invalid Host, IPO = HOSTNQN. */
        assert_int_equal(do_connect(&q, 0, 31, 0xffff, SUBNQN, "nqn.2024-01.io.other:h", &r),
                         ST(1, NVMF_SC_CONNECT_INVALID_HOST));
        assert_int_equal(r, NVMF_IATTR_DATA | 512);
        /* Static controller ID on the admin queue. */
        assert_int_equal(do_connect(&q, 0, 31, 5, SUBNQN, HOSTNQN, &r),
                         ST(1, NVMF_SC_CONNECT_INVALID_PARAM));
        assert_int_equal(r, NVMF_IATTR_DATA | 16);
        /* SQSIZE 0 and too large: IPO in the SQE (IATTR 0). */
        assert_int_equal(do_connect(&q, 0, 0, 0xffff, SUBNQN, HOSTNQN, &r),
                         ST(1, NVMF_SC_CONNECT_INVALID_PARAM));
        assert_int_equal(r, 44);
        assert_int_equal(do_connect(&q, 0, 4096, 0xffff, SUBNQN, HOSTNQN, &r),
                         ST(1, NVMF_SC_CONNECT_INVALID_PARAM));
        assert_null(q.ctrl);
        /* Non-Connect before Connect: Command Sequence Error. */
        struct nvme_cmd c;
        sqe_init(&c, &q, NVME_ADM_KEEP_ALIVE, 0);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        assert_int_equal(st(&c), ST(0, NVME_SC_CMD_SEQ_ERROR));
}

/*
 * An empty Host NQN (spdk_nvme_perf's default): admitted by a subsystem that
 * allows any host; refused as Invalid Host (IPO = HOSTNQN) by one with a host
 * list, and by an allow-any subsystem once a host has a DH-HMAC-CHAP secret.
 */
#define ANYNQN "nqn.2024-01.io.slate:anyhost"
#define DHKEY  "DHHC-1:01:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh+KfiaR:"
static void test_connect_empty_hostnqn(void **s)
{
        (void)s;
        char err[256];
        struct nvme_queue q;
        uint32_t r;
        memset(&q, 0, sizeof(q));
        assert_int_equal(do_connect(&q, 0, 31, 0xffff, SUBNQN, "", &r),
                         ST(1, NVMF_SC_CONNECT_INVALID_HOST));
        assert_int_equal(r, NVMF_IATTR_DATA | 512);
        assert_null(q.ctrl);

        assert_int_equal(nvme_subsys_add(ANYNQN, "SN124", "Slate Any", err, sizeof(err)), 0);
        assert_int_equal(nvme_subsys_allow_host(ANYNQN, "*", err, sizeof(err)), 0);
        assert_int_equal(do_connect(&q, 0, 31, 0xffff, ANYNQN, "", &r), 0);
        assert_non_null(q.ctrl);
        assert_string_equal(q.ctrl->hostnqn, "");
        assert_int_equal(r & 0xffff, q.ctrl->cntlid);
        nvme_queue_fini(&q);

        /* A secret for a named host: the empty name cannot authenticate, so it is refused. */
        assert_int_equal(nvme_subsys_allow_host(ANYNQN, HOSTNQN, err, sizeof(err)), 0);
        assert_int_equal(nvme_subsys_set_host_key(ANYNQN, HOSTNQN, DHKEY, NULL, err, sizeof(err)),
                         0);
        memset(&q, 0, sizeof(q));
        assert_int_equal(do_connect(&q, 0, 31, 0xffff, ANYNQN, "", &r),
                         ST(1, NVMF_SC_CONNECT_INVALID_HOST));
        assert_int_equal(r, NVMF_IATTR_DATA | 512);
        assert_null(q.ctrl);
        /* Without the secret it is admitted again. */
        assert_int_equal(nvme_subsys_set_host_key(ANYNQN, HOSTNQN, NULL, NULL, err, sizeof(err)),
                         0);
        assert_int_equal(do_connect(&q, 0, 31, 0xffff, ANYNQN, "", NULL), 0);
        nvme_queue_fini(&q);
        assert_int_equal(nvme_subsys_del(ANYNQN, err, sizeof(err)), 0);
}

static void test_connect_enable_io(void **s)
{
        (void)s;
        uint32_t cntlid, r;
        memset(&admin_q, 0, sizeof(admin_q));
        memset(&io_q, 0, sizeof(io_q));
        assert_int_equal(do_connect(&admin_q, 0, 31, 0xffff, SUBNQN, HOSTNQN, &cntlid), 0);
        assert_non_null(admin_q.ctrl);
        assert_int_equal(cntlid, admin_q.ctrl->cntlid);
        /* A second Connect on the same queue is a sequence error. */
        assert_int_equal(do_connect(&admin_q, 0, 31, 0xffff, SUBNQN, HOSTNQN, NULL),
                         ST(0, NVME_SC_CMD_SEQ_ERROR));
        /* Admin commands before CC.EN: sequence error. */
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_KEEP_ALIVE, 0);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_CMD_SEQ_ERROR));
        /* I/O Connect before enable is refused. */
        assert_int_not_equal(do_connect(&io_q, 1, 127, (uint16_t)cntlid, SUBNQN, HOSTNQN, NULL), 0);
        /* CAP via Property Get (8 bytes). */
        sqe_init(&c, &admin_q, NVME_OPC_FABRICS, 0);
        c.sqe[4] = NVMF_FCTYPE_PROPERTY_GET;
        c.sqe[40] = 1;
        slate_put_le(c.sqe + 44, 4, NVME_REG_CAP);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        assert_int_equal(st(&c), 0);
        assert_int_equal(dw0(&c) & 0xffff, NVME_TRANSPORT_QUEUE_DEPTH - 1);
        assert_true(slate_get_le(c.cqe + 4, 4) & (1u << 5)); /* CSS NVM (bit 37) */
        /* Enable: CSTS.RDY. */
        assert_int_equal(prop_set_cc(&admin_q, 1 | (6 << 16) | (4 << 20)), 0);
        assert_int_equal(atomic_load(&admin_q.ctrl->csts) & NVME_CSTS_RDY, NVME_CSTS_RDY);
        /* I/O Connect with another host NQN: refused, IPO = HOSTNQN. */
        assert_int_equal(
            do_connect(&io_q, 1, 127, (uint16_t)cntlid, SUBNQN, "nqn.2024-01.io.other:h", &r),
            ST(1, NVMF_SC_CONNECT_INVALID_PARAM));
        assert_int_equal(r, NVMF_IATTR_DATA | 512);
        /* Unknown CNTLID. */
        assert_int_equal(do_connect(&io_q, 1, 127, 0x7777, SUBNQN, HOSTNQN, &r),
                         ST(1, NVMF_SC_CONNECT_INVALID_PARAM));
        assert_int_equal(r, NVMF_IATTR_DATA | 16);
        assert_int_equal(do_connect(&io_q, 1, 127, (uint16_t)cntlid, SUBNQN, HOSTNQN, NULL), 0);
        assert_ptr_equal(io_q.ctrl, admin_q.ctrl);
        assert_int_equal(io_q.qid, 1);
        /* The same QID twice. */
        struct nvme_queue q2;
        memset(&q2, 0, sizeof(q2));
        assert_int_equal(do_connect(&q2, 1, 127, (uint16_t)cntlid, SUBNQN, HOSTNQN, NULL),
                         ST(0, NVME_SC_CMD_SEQ_ERROR));
}

static bool ns_changed(struct nvme_ctrl *ctrl, uint32_t nsid);

static void test_identify(void **s)
{
        (void)s;
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CTRL);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        assert_int_equal(st(&c), 0);
        assert_int_equal(c.data_len, 4096);
        const struct nvme_id_ctrl *id = (const struct nvme_id_ctrl *)buf;
        assert_int_equal(get_le32(&id->nn), NVME_MAX_NSID);
        /* MDTS: 2^n 4 KiB pages (CAP.MPSMIN) is exactly the core's transfer limit. */
        assert_int_equal(4096u << id->mdts, CORE_MAX_TRANSFER_BYTES);
        assert_int_equal(id->mdts, 13); /* 32 MiB */
        assert_int_equal(get_le16(&id->cntlid), admin_q.ctrl->cntlid);
        assert_string_equal(id->subnqn, SUBNQN);
        assert_int_equal(id->cntrltype, NVME_CTRL_TYPE_IO);
        assert_memory_equal(id->sn, "SN123 ", 6);
        assert_true(get_le16(&id->oncs) & NVME_ONCS_WRITE_ZEROES);
        assert_true(get_le32(&id->sgls) & 1);
        assert_int_equal(get_le32(&id->ioccsz), (64 + NVME_TRANSPORT_ICD_BYTES) / 16);
        /* Atomic writes: controller-wide one block; ACWU one block too (fused.c). */
        assert_int_equal(get_le16(&id->awun), 0);
        assert_int_equal(get_le16(&id->awupf), 0);
        assert_int_equal(get_le16(&id->acwu), 0);

        /* Namespace: size and the one LBA format; NGUID/EUI-64 from the core identity. */
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 1);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvme_id_ns *idn = (const struct nvme_id_ns *)buf;
        assert_int_equal(get_le64(&idn->nsze), ns->num_blocks);
        assert_int_equal(idn->lbaf[0].lbads, 12);
        assert_memory_equal(idn->nguid, ns->uuid, 16);
        assert_int_equal(slate_get_be(idn->eui64, 8), ns->eui64);
        /*
         * Atomic writes (core/atomic.h): the mem namespace's default 64 KiB
         * of 4 KiB blocks is NSABP with NAWUN = NAWUPF = 15, no boundary;
         * atomic_write_max 0 clears them and tells the controller
         * (Namespace Attribute Changed).
         */
        assert_int_equal(idn->nsfeat & NVME_NSFEAT_NSABP, NVME_NSFEAT_NSABP);
        assert_int_equal(get_le16(&idn->nawun), 15);
        assert_int_equal(get_le16(&idn->nawupf), 15);
        assert_int_equal(get_le16(&idn->nacwu), 15); /* fused Compare and Write, same unit */
        assert_int_equal(get_le16(&idn->nabsn), 0);
        assert_int_equal(get_le16(&idn->nabo), 0);
        assert_int_equal(get_le16(&idn->nabspf), 0);
        char aerr[256];
        admin_q.ctrl->nchanged = 0;
        assert_int_equal(core_ns_set_atomic_max(ns, 0, aerr, sizeof(aerr)), 0);
        assert_true(ns_changed(admin_q.ctrl, 1));
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 1);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        assert_int_equal(idn->nsfeat & NVME_NSFEAT_NSABP, 0);
        assert_int_equal(get_le16(&idn->nawupf), 0);
        assert_int_equal(core_ns_set_atomic_max(ns, 64 << 10, aerr, sizeof(aerr)), 0);

        /* Descriptor list. */
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 1);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS_DESC_LIST);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(buf[0], NVME_NIDT_EUI64);
        assert_int_equal(buf[1], 8);
        assert_int_equal(slate_get_be(buf + 4, 8), ns->eui64);
        assert_int_equal(buf[12], NVME_NIDT_NGUID);
        assert_memory_equal(buf + 16, ns->uuid, 16);
        assert_int_equal(buf[32], NVME_NIDT_UUID);
        assert_memory_equal(buf + 36, ns->uuid, 16);
        assert_int_equal(buf[52], NVME_NIDT_CSI);

        /* Active list, inactive NSID, bad NSID, bad CNS. */
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_ACTIVE_NS_LIST);
        nvme_cmd_parse(&c);
        assert_int_equal(slate_get_le(buf, 4), 1);
        assert_int_equal(slate_get_le(buf + 4, 4), 0);
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 7);
        sgl_len(&c, 4096);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0); /* inactive: zeroes */
        assert_int_equal(get_le64(&idn->nsze), 0);
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 7);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS_DESC_LIST);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_NS));
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, 0x42);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_FIELD));
}

/* A stand-in transport judging the data pointer (nvme_queue.check_xfer). */
static enum nvme_xfer_error xfer_verdict;
static uint32_t xfer_len;
static bool xfer_h2c;
static enum nvme_xfer_error stub_check_xfer(const struct nvme_cmd *c, uint32_t len, bool h2c)
{
        (void)c;
        xfer_len = len;
        xfer_h2c = h2c;
        return xfer_verdict;
}

static const struct nvme_error_log *last_error(struct nvme_ctrl *ctrl)
{
        return &ctrl->errlog[(ctrl->err_head + NVME_ERRLOG_ENTRIES - 1) % NVME_ERRLOG_ENTRIES];
}

/*
 * The SGL is the transport's: parse asks it (check_xfer) once the command's
 * transfer is known and turns its verdict into the status, with the error
 * log locating the field.  PSDT and opcodes stay the personality's checks.
 */
static void test_sgl_checks(void **s)
{
        (void)s;
        struct nvme_cmd c;
        admin_q.check_xfer = stub_check_xfer;
        xfer_verdict = NVME_XFER_OK;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(xfer_len, 4096);
        assert_false(xfer_h2c);
        xfer_verdict = NVME_XFER_SGL_LENGTH;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        cdw(&c, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_SGL_INVALID_DATA_LEN));
        assert_int_equal(get_le16(&last_error(admin_q.ctrl)->param_loc), 32);
        xfer_verdict = NVME_XFER_SGL_TYPE;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_SGL_INVALID_TYPE));
        assert_int_equal(get_le16(&last_error(admin_q.ctrl)->param_loc), 39 | (4 << 8));
        xfer_verdict = NVME_XFER_ICD_C2H;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_FIELD));
        admin_q.check_xfer = NULL;

        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        c.sqe[1] = 0; /* PRP */
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_FIELD));
        sqe_init(&c, &admin_q, 0xee, 0); /* unknown opcode */
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_OPCODE));

        /* A parsed command the transport then fails (bad data digest): no DNR, ns released. */
        sqe_init(&c, &io_q, NVME_IO_WRITE, 1);
        sgl_len(&c, 4096);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_non_null(c.ns);
        nvme_cmd_reject_xfer(&c, NVME_XFER_DIGEST);
        assert_null(c.ns);
        assert_int_equal(c.data_len, 0);
        assert_int_equal(nvme_cqe_status(&c) & 0x47ff, ST(0, NVME_SC_TRANSIENT_TRANSPORT));
        assert_int_equal(slate_get_le(c.cqe + 12, 2), 0x1234);
}

/*
 * A failing command whose error went into the Error Information log says so
 * with the More bit (status bit 13); the logged status itself carries no M.
 * Without a controller (before Connect) there is no log and no M.
 */
static void test_more_bit(void **s)
{
        (void)s;
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, 0x42); /* unknown CNS */
        uint64_t before = admin_q.ctrl->err_count;
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(admin_q.ctrl->err_count, before + 1);
        assert_int_equal(slate_get_le(c.cqe + 14, 2) & NVME_STATUS_M, NVME_STATUS_M);
        assert_int_equal(get_le16(&last_error(admin_q.ctrl)->status) & NVME_STATUS_M, 0);
        assert_int_equal(get_le16(&last_error(admin_q.ctrl)->status) >> 1,
                         ST(0, NVME_SC_INVALID_FIELD) | 0x4000);

        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0); /* success: no M */
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&c);
        assert_int_equal(slate_get_le(c.cqe + 14, 2), 0);

        struct nvme_queue fresh;
        memset(&fresh, 0, sizeof(fresh));
        sqe_init(&c, &fresh, NVME_ADM_IDENTIFY, 0); /* no controller yet */
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_CMD_SEQ_ERROR));
        assert_int_equal(slate_get_le(c.cqe + 14, 2) & NVME_STATUS_M, 0);
}

static void test_log_pages(void **s)
{
        (void)s;
        struct nvme_cmd c;
        /* Effects log read from offset 1024: the I/O command part. */
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_CMD_EFFECTS | ((1024 / 4 - 1) << 16));
        cdw(&c, 12, 1024);
        sgl_len(&c, 1024);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(c.data_len, 1024);
        assert_int_equal(slate_get_le(buf + 4 * NVME_IO_WRITE, 4) & 3, 3); /* CSUPP | LBCC */
        assert_int_equal(slate_get_le(buf + 4 * NVME_IO_READ, 4), 1);
        assert_int_equal(slate_get_le(buf + 4 * NVME_IO_RESV_REGISTER, 4), 1);
        assert_int_equal(slate_get_le(buf + 4 * 0x10, 4), 0);
        /* Unaligned offset: Invalid Field; the error log says where (CDW12 = byte 48). */
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_SMART | (127u << 16));
        cdw(&c, 12, 2);
        sgl_len(&c, 512);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_FIELD));
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_ERROR | (15u << 16)); /* one 64-byte entry */
        sgl_len(&c, 64);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvme_error_log *e = (const struct nvme_error_log *)buf;
        assert_int_equal(get_le16(&e->param_loc), 48);
        assert_int_equal(get_le16(&e->cmdid), 0x1234);
        assert_int_equal(get_le16(&e->status) >> 1, ST(0, NVME_SC_INVALID_FIELD) | 0x4000);
        assert_true(get_le64(&e->error_count) > 0);
        /* SMART: temperature and the error count; NUMD larger than the log reads zeroes. */
        memset(buf, 0xff, 8192);
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0xffffffff);
        cdw(&c, 10, NVME_LOG_SMART | (1023u << 16));
        sgl_len(&c, 4096);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvme_smart_log *sm = (const struct nvme_smart_log *)buf;
        assert_int_equal(get_le16(&sm->temperature), 308);
        assert_true(slate_get_le(sm->num_err_log_entries, 8) >= 1);
        assert_int_equal(buf[4000], 0);
        /* Offset beyond the log. */
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_SMART | (3u << 16));
        cdw(&c, 12, 4096);
        sgl_len(&c, 16);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_FIELD));
        /* Unsupported log page (0Ch is ANA's now: ana.c). */
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, 0x0a | (3u << 16));
        sgl_len(&c, 16);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(1, NVME_SC_INVALID_LOG_PAGE));
}

static uint32_t getfeat(uint8_t fid, uint8_t sel, uint16_t *status)
{
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_GET_FEATURES, 0);
        cdw(&c, 10, fid | ((uint32_t)sel << 8));
        nvme_cmd_parse(&c);
        *status = st(&c);
        return dw0(&c);
}

static uint16_t setfeat(uint8_t fid, uint32_t v, bool save, uint32_t *res)
{
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_SET_FEATURES, 0);
        cdw(&c, 10, fid | (save ? 1u << 31 : 0));
        cdw(&c, 11, v);
        nvme_cmd_parse(&c);
        if (res)
                *res = dw0(&c);
        return st(&c);
}

static void test_features(void **s)
{
        (void)s;
        uint16_t status;
        uint32_t r;
        assert_int_equal(setfeat(NVME_FEAT_NUM_QUEUES, 3 | (3 << 16), false, &r),
                         ST(0, NVME_SC_CMD_SEQ_ERROR)); /* I/O queue 1 exists */
        assert_int_equal(setfeat(NVME_FEAT_ARBITRATION, 0x03020107, false, NULL), 0);
        assert_int_equal(getfeat(NVME_FEAT_ARBITRATION, NVME_SEL_CURRENT, &status), 0x03020107);
        assert_int_equal(getfeat(NVME_FEAT_ARBITRATION, NVME_SEL_DEFAULT, &status), 0);
        assert_int_equal(getfeat(NVME_FEAT_ARBITRATION, NVME_SEL_SAVED, &status), 0);
        assert_int_equal(getfeat(NVME_FEAT_ARBITRATION, NVME_SEL_SUPPORTED, &status),
                         NVME_FEAT_CAP_CHANGEABLE);
        assert_int_equal(setfeat(NVME_FEAT_ARBITRATION, 0, true, NULL),
                         ST(1, NVME_SC_FEATURE_NOT_SAVEABLE));
        /* Volatile write cache is the namespace's shared wce. */
        assert_int_equal(setfeat(NVME_FEAT_VOLATILE_WC, 0, false, NULL), 0);
        assert_false(atomic_load(&ns->wce));
        assert_int_equal(getfeat(NVME_FEAT_VOLATILE_WC, 0, &status), 0);
        assert_int_equal(setfeat(NVME_FEAT_VOLATILE_WC, 1, false, NULL), 0);
        assert_true(atomic_load(&ns->wce));
        assert_int_equal(getfeat(NVME_FEAT_VOLATILE_WC, 0, &status), 1);
        /* Power state other than 0, DULBE, bad threshold selector. */
        assert_int_equal(setfeat(NVME_FEAT_POWER_MGMT, 1, false, NULL),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(setfeat(NVME_FEAT_ERR_RECOVERY, 1u << 16, false, NULL),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(setfeat(NVME_FEAT_TEMP_THRESH, 300, false, NULL), 0);
        assert_int_equal(getfeat(NVME_FEAT_TEMP_THRESH, 0, &status) & 0xffff, 300);
        assert_int_equal(setfeat(NVME_FEAT_TEMP_THRESH, NVME_WCTEMP, false, NULL), 0);
        /* Write Atomicity Normal: DN kept and reported (AWUN = AWUPF: nothing changes). */
        assert_int_equal(getfeat(NVME_FEAT_WRITE_ATOMIC, NVME_SEL_CURRENT, &status), 0);
        assert_int_equal(status, 0);
        assert_int_equal(setfeat(NVME_FEAT_WRITE_ATOMIC, 1, false, NULL), 0);
        assert_int_equal(getfeat(NVME_FEAT_WRITE_ATOMIC, NVME_SEL_CURRENT, &status), 1);
        assert_int_equal(getfeat(NVME_FEAT_WRITE_ATOMIC, NVME_SEL_DEFAULT, &status), 0);
        assert_int_equal(setfeat(NVME_FEAT_WRITE_ATOMIC, 0, false, NULL), 0);
        assert_int_equal(setfeat(NVME_FEAT_KATO, 5000, false, NULL), 0);
        assert_int_equal(getfeat(NVME_FEAT_KATO, 0, &status), 5000);
        assert_int_equal(getfeat(NVME_FEAT_NUM_QUEUES, 0, &status),
                         (NVME_MAX_IO_QUEUES - 1) | ((NVME_MAX_IO_QUEUES - 1) << 16));
        getfeat(0x7d, 0, &status);
        assert_int_equal(status, ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(setfeat(NVME_FEAT_ASYNC_EVENT, 0xffffffff, false, NULL), 0);
        assert_int_equal(getfeat(NVME_FEAT_ASYNC_EVENT, 0, &status),
                         NVME_AEN_CFG_NS_ATTR | NVME_AEN_CFG_ANA_CHANGE | NVME_AEN_CFG_LBA_STATUS);
}

static uint32_t getfeat_ns(uint8_t fid, uint8_t sel, uint32_t nsid, uint16_t *status)
{
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_GET_FEATURES, nsid);
        cdw(&c, 10, fid | ((uint32_t)sel << 8));
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        assert_null(c.ns); /* the reference is dropped */
        *status = st(&c);
        return dw0(&c);
}

static uint16_t setfeat_ns(uint8_t fid, uint32_t nsid, uint32_t v, bool save)
{
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_SET_FEATURES, nsid);
        cdw(&c, 10, fid | (save ? 1u << 31 : 0));
        cdw(&c, 11, v);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        assert_null(c.ns);
        return st(&c);
}

/* The newest error log entry's parameter location (byte | bit << 8). */
static uint16_t last_err_loc(void)
{
        struct nvme_ctrl *ctrl = admin_q.ctrl;
        const struct nvme_error_log *e =
            &ctrl->errlog[(ctrl->err_head + NVME_ERRLOG_ENTRIES - 1) % NVME_ERRLOG_ENTRIES];
        return get_le16(&e->param_loc);
}

/* Did ctrl get Namespace Attribute Changed for nsid since its list was last cleared? */
static bool ns_changed(struct nvme_ctrl *ctrl, uint32_t nsid)
{
        for (unsigned i = 0; i < ctrl->nchanged && i < 1024; i++)
                if (ctrl->changed_ns[i] == nsid)
                        return true;
        return false;
}

/*
 * Feature 84h, Namespace Write Protection Config (Base 2.0 5.27.1.28, 8.12),
 * on a second namespace (NSID 2) so permanent protection stays there: every
 * transition, every malformed command, the core state the SCSI side shares,
 * and the other controller told while the one that made the change is not.
 */
static void test_write_protect_feature(void **s)
{
        (void)s;
        char err[256];
        uint16_t status;
        struct core_ns *wns = NULL;
        struct core_ns_params p = {
            .name = "nvt-wp", .backend = "mem", .size_bytes = 1 << 20, .block_size = 4096};
        assert_int_equal(core_ns_create(&p, &wns, err, sizeof(err)), 0);
        assert_int_equal(nvme_ns_attach(SUBNQN, 2, "nvt-wp", err, sizeof(err)), 2);
        struct nvme_queue q2;
        memset(&q2, 0, sizeof(q2));
        assert_int_equal(do_connect(&q2, 0, 31, 0xffff, SUBNQN, HOSTNQN, NULL), 0);
        struct nvme_ctrl *me = admin_q.ctrl, *other = q2.ctrl;

        /* Identify Controller NWPC: all three optional states. */
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&c);
        assert_int_equal(((const struct nvme_id_ctrl *)buf)->nwpc,
                         NVME_NWPC_WP | NVME_NWPC_UNTIL_PWR_CY | NVME_NWPC_PERMANENT);

        /* Get: changeable and namespace specific; not saveable; starts unprotected. */
        assert_int_equal(getfeat_ns(NVME_FEAT_WRITE_PROTECT, NVME_SEL_SUPPORTED, 2, &status),
                         NVME_FEAT_CAP_CHANGEABLE | NVME_FEAT_CAP_NS);
        assert_int_equal(getfeat_ns(NVME_FEAT_WRITE_PROTECT, NVME_SEL_CURRENT, 2, &status),
                         NVME_WPS_NONE);
        assert_int_equal(status, 0);

        /* Malformed: no / broadcast / inactive / out-of-range NSID, reserved bits, WPS 4-7, SV. */
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 0, 1, false),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(last_err_loc(), 4);
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 0xffffffff, 1, false),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 3, 1, false),
                         ST(0, NVME_SC_INVALID_NS));
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, NVME_MAX_NSID + 1, 1, false),
                         ST(0, NVME_SC_INVALID_NS));
        for (uint32_t wps = 4; wps <= 7; wps++) {
                assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, wps, false),
                                 ST(0, NVME_SC_INVALID_FIELD));
                assert_int_equal(last_err_loc(), NVME_SQE_OFF_CDW(11));
        }
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, 1u << 3, false),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(last_err_loc(), NVME_SQE_OFF_CDW(11) | (3 << 8));
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, 0x80000001u, false),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, 1, true),
                         ST(1, NVME_SC_FEATURE_NOT_SAVEABLE));
        getfeat_ns(NVME_FEAT_WRITE_PROTECT, NVME_SEL_CURRENT, 0, &status);
        assert_int_equal(status, ST(0, NVME_SC_INVALID_FIELD));
        getfeat_ns(NVME_FEAT_WRITE_PROTECT, NVME_SEL_CURRENT, 9, &status);
        assert_int_equal(status, ST(0, NVME_SC_INVALID_NS));
        assert_int_equal(core_ns_wp(wns), 0); /* none of that changed anything */

        /* No Write Protect <-> Write Protect: the software reason SCSI's SWP shows. */
        me->nchanged = other->nchanged = 0;
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, NVME_WPS_WRITE_PROTECT, false), 0);
        assert_int_equal(core_ns_wp(wns), CORE_WP_SOFTWARE);
        assert_int_equal(core_ns_check(wns, CORE_CHK_WRITABLE), CORE_E_WRITE_PROTECT_SOFTWARE);
        assert_int_equal(getfeat_ns(NVME_FEAT_WRITE_PROTECT, NVME_SEL_CURRENT, 2, &status),
                         NVME_WPS_WRITE_PROTECT);
        assert_int_equal(getfeat_ns(NVME_FEAT_WRITE_PROTECT, NVME_SEL_DEFAULT, 2, &status),
                         NVME_WPS_NONE);
        assert_true(ns_changed(other, 2));
        assert_false(ns_changed(me, 2)); /* the originator knows */
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 2);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        assert_int_equal(((const struct nvme_id_ns *)buf)->nsattr, 1);
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, NVME_WPS_WRITE_PROTECT, false), 0);
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, NVME_WPS_NONE, false), 0);
        assert_int_equal(core_ns_wp(wns), 0);
        /* A management reason is not the host's to clear, nor shown as WPS. */
        core_ns_set_wp(wns, CORE_WP_CONFIG, true, NULL);
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, NVME_WPS_NONE, false), 0);
        assert_int_equal(core_ns_wp(wns), CORE_WP_CONFIG);
        assert_int_equal(getfeat_ns(NVME_FEAT_WRITE_PROTECT, NVME_SEL_CURRENT, 2, &status),
                         NVME_WPS_NONE);
        core_ns_set_wp(wns, CORE_WP_CONFIG, false, NULL);

        /* Write Protect -> Until Power Cycle; nothing leaves it but a restart. */
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, NVME_WPS_WRITE_PROTECT, false), 0);
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, NVME_WPS_UNTIL_POWER_CYC, false),
                         0);
        assert_true(core_ns_wp(wns) & CORE_WP_POWER_CYCLE);
        assert_int_equal(getfeat_ns(NVME_FEAT_WRITE_PROTECT, NVME_SEL_CURRENT, 2, &status),
                         NVME_WPS_UNTIL_POWER_CYC);
        for (uint32_t wps = NVME_WPS_NONE; wps <= NVME_WPS_PERMANENT; wps++) {
                if (wps == NVME_WPS_UNTIL_POWER_CYC)
                        continue;
                assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, wps, false),
                                 ST(1, NVME_SC_FEATURE_NOT_CHANGEABLE));
        }
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 2, NVME_WPS_UNTIL_POWER_CYC, false),
                         0);                                /* the state it is in */
        core_ns_set_wp(wns, CORE_WP_SOFTWARE, false, NULL); /* SCSI clears SWP: still protected */
        assert_int_equal(getfeat_ns(NVME_FEAT_WRITE_PROTECT, NVME_SEL_CURRENT, 2, &status),
                         NVME_WPS_UNTIL_POWER_CYC);
        assert_int_equal(core_ns_check(wns, CORE_CHK_WRITABLE), CORE_E_WRITE_PROTECT);

        /* Permanent, on a third namespace straight from No Write Protect: final. */
        struct core_ns *pns = NULL;
        p.name = "nvt-perm";
        assert_int_equal(core_ns_create(&p, &pns, err, sizeof(err)), 0);
        assert_int_equal(nvme_ns_attach(SUBNQN, 3, "nvt-perm", err, sizeof(err)), 3);
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 3, NVME_WPS_PERMANENT, false), 0);
        assert_int_equal(core_ns_wp(pns), CORE_WP_PERMANENT);
        assert_int_equal(getfeat_ns(NVME_FEAT_WRITE_PROTECT, NVME_SEL_CURRENT, 3, &status),
                         NVME_WPS_PERMANENT);
        for (uint32_t wps = NVME_WPS_NONE; wps < NVME_WPS_PERMANENT; wps++)
                assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 3, wps, false),
                                 ST(1, NVME_SC_FEATURE_NOT_CHANGEABLE));
        assert_int_equal(setfeat_ns(NVME_FEAT_WRITE_PROTECT, 3, NVME_WPS_PERMANENT, false), 0);
        assert_int_equal(core_ns_wp(pns), CORE_WP_PERMANENT);

        /* 84h does not exist on a discovery controller. */
        struct nvme_queue dq;
        memset(&dq, 0, sizeof(dq));
        assert_int_equal(do_connect(&dq, 0, 31, 0xffff, NVMF_DISCOVERY_NQN, HOSTNQN, NULL), 0);
        assert_int_equal(prop_set_cc(&dq, 1), 0);
        sqe_init(&c, &dq, NVME_ADM_SET_FEATURES, 1);
        cdw(&c, 10, NVME_FEAT_WRITE_PROTECT);
        cdw(&c, 11, 1);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_FIELD));

        /* A resize reaches every controller (management: no originator) and Identify. */
        me->nchanged = other->nchanged = 0;
        assert_int_equal(core_ns_resize(wns, 512, false, err, sizeof(err)), 0);
        assert_true(ns_changed(me, 2) && ns_changed(other, 2));
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 2);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        assert_int_equal(get_le64(&((const struct nvme_id_ns *)buf)->nsze), 512);
        /* The I/O range check follows the new end. */
        sqe_init(&c, &io_q, NVME_IO_READ, 2);
        cdw(&c, 10, 511);
        sgl_len(&c, 4096);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        core_ns_put(c.ns);
        sqe_init(&c, &io_q, NVME_IO_READ, 2);
        cdw(&c, 10, 512);
        sgl_len(&c, 4096);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        assert_int_equal(st(&c), ST(0, NVME_SC_LBA_RANGE));

        nvme_queue_fini(&dq);
        nvme_queue_fini(&q2);
        assert_int_equal(nvme_ns_detach(SUBNQN, 2, err, sizeof(err)), 0);
        assert_int_equal(nvme_ns_detach(SUBNQN, 3, err, sizeof(err)), 0);
}

static void test_rae(void **s)
{
        (void)s;
        struct nvme_ctrl *ctrl = admin_q.ctrl;
        struct nvme_cmd c;
        nvme_ctrl_raise(ctrl, NVME_EVT_NS_CHANGED, 1);
        assert_true(ctrl->aen_pending & NVME_EVT_NS_CHANGED);
        /* Pretend it was delivered: masked until the log is read with RAE = 0. */
        ctrl->aen_pending = 0;
        ctrl->aen_masked = NVME_EVT_NS_CHANGED;
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0xffffffff);
        cdw(&c, 10, NVME_LOG_CHANGED_NS | (1u << 15) | (1023u << 16));
        sgl_len(&c, 4096);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(slate_get_le(buf, 4), 1);
        assert_true(ctrl->aen_masked & NVME_EVT_NS_CHANGED);
        assert_int_equal(ctrl->nchanged, 1); /* retained */
        cdw(&c, 10, NVME_LOG_CHANGED_NS | (1023u << 16));
        nvme_cmd_parse(&c);
        assert_int_equal(slate_get_le(buf, 4), 1);
        assert_false(ctrl->aen_masked & NVME_EVT_NS_CHANGED);
        assert_int_equal(ctrl->nchanged, 0);
        nvme_cmd_parse(&c);
        assert_int_equal(slate_get_le(buf, 4), 0);
}

static void test_io_parse(void **s)
{
        (void)s;
        struct nvme_cmd c;
        sqe_init(&c, &io_q, NVME_IO_READ, 1);
        cdw(&c, 10, (uint32_t)ns->num_blocks - 1);
        cdw(&c, 12, 1); /* 2 blocks: one past the end */
        sgl_len(&c, 8192);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_LBA_RANGE));
        sqe_init(&c, &io_q, NVME_IO_READ, 1);
        cdw(&c, 10, 0xffffffff);
        cdw(&c, 11, 0xffffffff); /* SLBA + NLB wraps */
        cdw(&c, 12, 1);
        sgl_len(&c, 8192);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_LBA_RANGE));
        sqe_init(&c, &io_q, NVME_IO_READ, 2);
        sgl_len(&c, 4096);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_NS));
        sqe_init(&c, &io_q, NVME_IO_WRITE, 1);
        cdw(&c, 12, CORE_MAX_TRANSFER_BYTES / 4096); /* one block more than MDTS */
        sgl_len(&c, CORE_MAX_TRANSFER_BYTES + 4096);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_FIELD));
        sqe_init(&c, &io_q, NVME_IO_WRITE, 1);
        cdw(&c, 12, CORE_MAX_TRANSFER_BYTES / 4096 - 1); /* exactly MDTS */
        sgl_len(&c, CORE_MAX_TRANSFER_BYTES);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.data_len, CORE_MAX_TRANSFER_BYTES);
        /* Compare of 8 MiB beside the transport's 1 MiB scratch: compared piece by piece. */
        static uint8_t scratch[CORE_SMALL_TRANSFER_BYTES];
        sqe_init(&c, &io_q, NVME_IO_COMPARE, 1);
        cdw(&c, 12, (8u << 20) / 4096 - 1);
        sgl_len(&c, 8u << 20);
        c.buf_len = 8u << 20;
        c.scratch = scratch;
        c.scratch_len = sizeof(scratch);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.req.op, CORE_OP_COMPARE);
        assert_ptr_equal(c.req.scratch, scratch);
        assert_int_equal(c.data_len, 8u << 20);
        sqe_init(&c, &io_q, NVME_ADM_IDENTIFY, 1); /* 06h is not an I/O opcode */
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_OPCODE));
        sqe_init(&c, &io_q, NVME_IO_READ, 1);
        cdw(&c, 12, 7);
        sgl_len(&c, 32768);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.data_len, 32768);
        assert_false(c.h2c);
        core_ns_put(c.ns); /* not executed */
}

struct waiter {
        pthread_mutex_t m;
        pthread_cond_t cv;
        bool done;
};
static struct waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false};

static void on_done(struct nvme_cmd *c)
{
        (void)c;
        pthread_mutex_lock(&w.m);
        w.done = true;
        pthread_cond_signal(&w.cv);
        pthread_mutex_unlock(&w.m);
}
static void exec_fn(void *arg)
{
        nvme_cmd_exec(arg);
}

static uint32_t io_nsid = 1; /* the namespace run_io addresses */

static uint16_t run_io(uint8_t opc, uint64_t lba, uint32_t nlb, uint32_t cdw12_flags)
{
        static struct nvme_cmd c;
        uint32_t len = (opc == NVME_IO_READ || opc == NVME_IO_WRITE || opc == NVME_IO_COMPARE)
                           ? nlb * 4096
                           : 0;
        uint8_t save[4096];
        memcpy(save, buf, sizeof(save)); /* sqe_init keeps buf */
        sqe_init(&c, &io_q, opc, io_nsid);
        memcpy(buf, save, sizeof(save));
        c.reactor = rt_get(0);
        c.done = on_done;
        cdw(&c, 10, (uint32_t)lba);
        cdw(&c, 11, (uint32_t)(lba >> 32));
        cdw(&c, 12, (nlb - 1) | cdw12_flags);
        sgl_len(&c, len);
        if (nvme_cmd_parse(&c) == NVME_PARSE_DONE)
                return st(&c);
        w.done = false;
        rt_msg_send(rt_get(0), exec_fn, &c);
        pthread_mutex_lock(&w.m);
        while (!w.done)
                pthread_cond_wait(&w.cv, &w.m);
        pthread_mutex_unlock(&w.m);
        return st(&c);
}

static void test_io_roundtrip(void **s)
{
        (void)s;
        uint64_t reads = atomic_load(&admin_q.ctrl->host_reads);
        memset(buf, 0x5a, 4096);
        assert_int_equal(run_io(NVME_IO_WRITE, 10, 1, 1u << 30), 0);
        memset(buf, 0, 4096);
        assert_int_equal(run_io(NVME_IO_READ, 10, 1, 0), 0);
        assert_int_equal(buf[0], 0x5a);
        assert_int_equal(buf[4095], 0x5a);
        assert_int_equal(atomic_load(&admin_q.ctrl->host_reads), reads + 1);
        memset(buf, 0x5a, 4096);
        assert_int_equal(run_io(NVME_IO_COMPARE, 10, 1, 0), 0);
        buf[100] = 0;
        assert_int_equal(run_io(NVME_IO_COMPARE, 10, 1, 0), ST(2, NVME_SC_COMPARE_FAILED));
        assert_int_equal(run_io(NVME_IO_WRITE_ZEROES, 10, 1, 0), 0);
        assert_int_equal(run_io(NVME_IO_READ, 10, 1, 0), 0);
        assert_int_equal(buf[0], 0);
        assert_int_equal(run_io(NVME_IO_FLUSH, 0, 1, 0), 0);
        assert_int_equal(run_io(NVME_IO_VERIFY, 0, 8, 0), 0);
}

/* ---- Fused Compare and Write (fused.c) ---- */
static atomic_int fused_dones;
static void fused_on_done(struct nvme_cmd *c)
{
        (void)c;
        pthread_mutex_lock(&w.m);
        atomic_fetch_add(&fused_dones, 1);
        pthread_cond_signal(&w.cv);
        pthread_mutex_unlock(&w.m);
}
static void wait_dones(int n)
{
        pthread_mutex_lock(&w.m);
        while (atomic_load(&fused_dones) < n)
                pthread_cond_wait(&w.cv, &w.m);
        pthread_mutex_unlock(&w.m);
}

/* An I/O command of nlb 4 KiB blocks at lba with its own data buffer and FUSE bits. */
static void fused_cmd(struct nvme_cmd *c, uint8_t *data, uint8_t opc, uint8_t fuse, uint64_t lba,
                      uint32_t nlb)
{
        sqe_init(c, &io_q, opc, 1);
        c->sqe[1] |= fuse;
        c->buf = data;
        c->buf_len = 2 * CORE_SMALL_TRANSFER_BYTES; /* data, then the compare's scratch */
        c->reactor = rt_get(0);
        c->done = fused_on_done;
        cdw(c, 10, (uint32_t)lba);
        cdw(c, 11, (uint32_t)(lba >> 32));
        cdw(c, 12, nlb - 1);
        sgl_len(c, nlb * 4096);
}

/* Execute cmds (already parsed) on the reactor in the given order; wait for n completions. */
static void exec_all(struct nvme_cmd **cmds, int ncmds, int n)
{
        atomic_store(&fused_dones, 0);
        for (int i = 0; i < ncmds; i++)
                rt_msg_send(rt_get(0), exec_fn, cmds[i]);
        wait_dones(n);
}

/* On the reactor, after what was sent before (messages are FIFO), as a transport would. */
static void fused_parse_exec_fn(void *arg)
{
        struct nvme_cmd *c = arg;
        if (nvme_cmd_parse(c) == NVME_PARSE_EXEC)
                nvme_cmd_exec(c);
        else
                fused_on_done(c);
}
static void abandon_fn(void *arg)
{
        nvme_cmd_abandon(arg);
}
static void queue_abort_fn(void *arg)
{
        nvme_queue_fused_abort(arg);
}

static uint8_t fused_byte(uint64_t lba)
{
        memset(buf, 0, 4096);
        assert_int_equal(run_io(NVME_IO_READ, lba, 1, 0), 0);
        return buf[0];
}

static void test_fused(void **s)
{
        (void)s;
        static struct nvme_cmd cmp, wr, other;
        uint8_t *a = aligned_alloc(4096, 2 * CORE_SMALL_TRANSFER_BYTES);
        uint8_t *b = aligned_alloc(4096, 2 * CORE_SMALL_TRANSFER_BYTES);
        const uint64_t lba = 200;

        /* Identify Controller: FUSES bit 0 (Compare and Write). */
        sqe_init(&cmp, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&cmp, 4096);
        cdw(&cmp, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&cmp);
        assert_int_equal(st(&cmp), 0);
        assert_int_equal(get_le16(&((const struct nvme_id_ctrl *)buf)->fuses), 1);

        memset(buf, 0x11, 4 * 4096);
        assert_int_equal(run_io(NVME_IO_WRITE, lba, 4, 0), 0);

        /* A matching pair: both succeed, the new data is in place. */
        uint64_t writes = atomic_load(&io_q.ctrl->host_writes);
        fused_cmd(&cmp, a, NVME_IO_COMPARE, 1, lba, 4);
        memset(a, 0x11, 4 * 4096);
        assert_int_equal(nvme_cmd_parse(&cmp), NVME_PARSE_EXEC);
        assert_ptr_equal(io_q.fuse_first, &cmp);
        fused_cmd(&wr, b, NVME_IO_WRITE, 2, lba, 4);
        memset(b, 0x22, 4 * 4096);
        assert_int_equal(nvme_cmd_parse(&wr), NVME_PARSE_EXEC);
        assert_null(io_q.fuse_first);
        struct nvme_cmd *order1[] = {&cmp, &wr};
        exec_all(order1, 2, 2);
        assert_int_equal(st(&cmp), 0);
        assert_int_equal(st(&wr), 0);
        assert_int_equal(fused_byte(lba), 0x22);
        assert_int_equal(fused_byte(lba + 3), 0x22);
        assert_int_equal(atomic_load(&io_q.ctrl->host_writes), writes + 1);

        /* A miscompare (one byte of the last block), the Write's data arriving first:
         * Compare Failure on the Compare, Failed Fused on the Write, data unchanged. */
        fused_cmd(&cmp, a, NVME_IO_COMPARE, 1, lba, 4);
        memset(a, 0x22, 4 * 4096);
        a[3 * 4096 + 17] = 0x23;
        assert_int_equal(nvme_cmd_parse(&cmp), NVME_PARSE_EXEC);
        fused_cmd(&wr, b, NVME_IO_WRITE, 2, lba, 4);
        memset(b, 0x33, 4 * 4096);
        assert_int_equal(nvme_cmd_parse(&wr), NVME_PARSE_EXEC);
        struct nvme_cmd *order2[] = {&wr, &cmp};
        exec_all(order2, 2, 2);
        assert_int_equal(st(&cmp), ST(2, NVME_SC_COMPARE_FAILED));
        assert_int_equal(st(&wr), ST(0, NVME_SC_FUSED_FAIL));
        assert_int_equal(fused_byte(lba), 0x22);
        assert_int_equal(fused_byte(lba + 3), 0x22);

        /* A lone second half: Missing Fused Command, with DNR. */
        fused_cmd(&wr, b, NVME_IO_WRITE, 2, lba, 4);
        assert_int_equal(nvme_cmd_parse(&wr), NVME_PARSE_DONE);
        assert_int_equal(st(&wr), ST(0, NVME_SC_FUSED_MISSING));
        assert_true(nvme_cqe_status(&wr) & (1u << 14));

        /* A first half followed by a plain Read (parsed before and after the Compare's
         * data is in): the Compare gets Missing Fused, the Read runs. */
        for (int before = 0; before < 2; before++) {
                fused_cmd(&cmp, a, NVME_IO_COMPARE, 1, lba, 4);
                memset(a, 0x22, 4 * 4096);
                assert_int_equal(nvme_cmd_parse(&cmp), NVME_PARSE_EXEC);
                atomic_store(&fused_dones, 0);
                fused_cmd(&other, b, NVME_IO_READ, 0, lba, 1);
                if (before) { /* the Compare executed and waits, then the Read is parsed */
                        rt_msg_send(rt_get(0), exec_fn, &cmp);
                        rt_msg_send(rt_get(0), fused_parse_exec_fn, &other);
                } else {
                        assert_int_equal(nvme_cmd_parse(&other), NVME_PARSE_EXEC);
                        rt_msg_send(rt_get(0), exec_fn, &cmp);
                        rt_msg_send(rt_get(0), exec_fn, &other);
                }
                wait_dones(2);
                assert_null(io_q.fuse_first);
                assert_int_equal(st(&cmp), ST(0, NVME_SC_FUSED_MISSING));
                assert_int_equal(st(&other), 0);
                assert_int_equal(b[0], 0x22);
        }

        /* A mismatched second half (another SLBA): Invalid Field on it, Failed Fused on
         * the Compare; nothing written. */
        fused_cmd(&cmp, a, NVME_IO_COMPARE, 1, lba, 4);
        memset(a, 0x22, 4 * 4096);
        assert_int_equal(nvme_cmd_parse(&cmp), NVME_PARSE_EXEC);
        fused_cmd(&wr, b, NVME_IO_WRITE, 2, lba + 1, 4);
        memset(b, 0x44, 4 * 4096);
        assert_int_equal(nvme_cmd_parse(&wr), NVME_PARSE_DONE);
        assert_int_equal(st(&wr), ST(0, NVME_SC_INVALID_FIELD));
        struct nvme_cmd *order3[] = {&cmp};
        exec_all(order3, 1, 1);
        assert_int_equal(st(&cmp), ST(0, NVME_SC_FUSED_FAIL));
        assert_int_equal(fused_byte(lba + 1), 0x22);
        /* Another NLB, and another namespace: refused the same way. */
        fused_cmd(&cmp, a, NVME_IO_COMPARE, 1, lba, 4);
        assert_int_equal(nvme_cmd_parse(&cmp), NVME_PARSE_EXEC);
        fused_cmd(&wr, b, NVME_IO_WRITE, 2, lba, 3);
        assert_int_equal(nvme_cmd_parse(&wr), NVME_PARSE_DONE);
        assert_int_equal(st(&wr), ST(0, NVME_SC_INVALID_FIELD));
        exec_all(order3, 1, 1);
        assert_int_equal(st(&cmp), ST(0, NVME_SC_FUSED_FAIL));

        /* FUSE on other opcodes, FUSE 11b, and on the admin queue: Invalid Field. */
        fused_cmd(&other, b, NVME_IO_READ, 1, lba, 1);
        assert_int_equal(nvme_cmd_parse(&other), NVME_PARSE_DONE);
        assert_int_equal(st(&other), ST(0, NVME_SC_INVALID_FIELD));
        fused_cmd(&other, b, NVME_IO_COMPARE, 2, lba, 1);
        assert_int_equal(nvme_cmd_parse(&other), NVME_PARSE_DONE);
        assert_int_equal(st(&other), ST(0, NVME_SC_INVALID_FIELD));
        fused_cmd(&other, b, NVME_IO_COMPARE, 3, lba, 1);
        assert_int_equal(nvme_cmd_parse(&other), NVME_PARSE_DONE);
        assert_int_equal(st(&other), ST(0, NVME_SC_INVALID_FIELD));
        sqe_init(&other, &admin_q, NVME_ADM_IDENTIFY, 0);
        other.sqe[1] |= 1;
        sgl_len(&other, 4096);
        cdw(&other, 10, NVME_CNS_CTRL);
        assert_int_equal(nvme_cmd_parse(&other), NVME_PARSE_DONE);
        assert_int_equal(st(&other), ST(0, NVME_SC_INVALID_FIELD));

        /* The transport drops a second half whose data never came (queue closing):
         * the waiting Compare completes with Failed Fused. */
        fused_cmd(&cmp, a, NVME_IO_COMPARE, 1, lba, 4);
        assert_int_equal(nvme_cmd_parse(&cmp), NVME_PARSE_EXEC);
        fused_cmd(&wr, b, NVME_IO_WRITE, 2, lba, 4);
        assert_int_equal(nvme_cmd_parse(&wr), NVME_PARSE_EXEC);
        exec_all(order3, 1, 0);
        rt_msg_send(rt_get(0), abandon_fn, &wr);
        wait_dones(1);
        assert_null(wr.ns);
        assert_int_equal(st(&cmp), ST(0, NVME_SC_FUSED_FAIL));
        /* ... and a first half left alone when the queue closes: Missing Fused. */
        fused_cmd(&cmp, a, NVME_IO_COMPARE, 1, lba, 4);
        assert_int_equal(nvme_cmd_parse(&cmp), NVME_PARSE_EXEC);
        exec_all(order3, 1, 0);
        rt_msg_send(rt_get(0), queue_abort_fn, &io_q);
        wait_dones(1);
        assert_null(io_q.fuse_first);
        assert_int_equal(st(&cmp), ST(0, NVME_SC_FUSED_MISSING));
        /* ... and a first half whose data fails (digest) before the Write is parsed: the
         * Write then has no first half. */
        fused_cmd(&cmp, a, NVME_IO_COMPARE, 1, lba, 4);
        assert_int_equal(nvme_cmd_parse(&cmp), NVME_PARSE_EXEC);
        nvme_cmd_reject_xfer(&cmp, NVME_XFER_DIGEST);
        assert_null(io_q.fuse_first);
        fused_cmd(&wr, b, NVME_IO_WRITE, 2, lba, 4);
        assert_int_equal(nvme_cmd_parse(&wr), NVME_PARSE_DONE);
        assert_int_equal(st(&wr), ST(0, NVME_SC_FUSED_MISSING));
        assert_int_equal(fused_byte(lba), 0x22);
        free(a);
        free(b);
}

/* Dataset Management with the given ranges (in-capsule), parsed and executed. */
static uint16_t run_dsm(uint32_t attr, const uint64_t *slba, const uint32_t *nlb, uint32_t nr,
                        uint32_t sgl)
{
        if (!sgl)
                sgl = nr * 16;
        static struct nvme_cmd c;
        sqe_init(&c, &io_q, NVME_IO_DSM, 1);
        c.reactor = rt_get(0);
        c.done = on_done;
        c.sqe[39] = 0x01; /* in-capsule */
        cdw(&c, 10, nr - 1);
        cdw(&c, 11, attr);
        sgl_len(&c, sgl);
        c.icd_len = sgl;
        struct nvme_dsm_range *r = (struct nvme_dsm_range *)buf;
        memset(r, 0, sgl);
        for (uint32_t i = 0; i < nr; i++) {
                put_le64(&r[i].slba, slba[i]);
                put_le32(&r[i].nlb, nlb[i]);
        }
        if (nvme_cmd_parse(&c) == NVME_PARSE_DONE)
                return st(&c);
        w.done = false;
        rt_msg_send(rt_get(0), exec_fn, &c);
        pthread_mutex_lock(&w.m);
        while (!w.done)
                pthread_cond_wait(&w.cv, &w.m);
        pthread_mutex_unlock(&w.m);
        return st(&c);
}

/* Thin namespace: THINP/DLFEAT, DSM with AD and Write Zeroes with DEAC deallocate (read zeroes). */
static uint64_t nuse_now(void)
{
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 1);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        return get_le64(&((const struct nvme_id_ns *)buf)->nuse);
}

static void test_thin(void **s)
{
        (void)s;
        struct nvme_cmd c;
        ns->thin = true;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 1);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvme_id_ns *idn = (const struct nvme_id_ns *)buf;
        assert_int_equal(idn->nsfeat & 0x01, 1);
        assert_int_equal(idn->dlfeat, 0x09);
        /* NUSE: the pages the mem backend really holds, in blocks. */
        assert_int_equal(get_le64(&idn->nuse), core_ns_allocated_bytes(ns) / 4096);
        assert_true(get_le64(&idn->nuse) < get_le64(&idn->nsze));

        memset(buf, 0x5a, 4 * 4096);
        assert_int_equal(run_io(NVME_IO_WRITE, 20, 4, 0), 0);
        /* One range out of bounds: an error, and nothing is deallocated. */
        uint64_t slba[3] = {20, 21, ns->num_blocks - 1};
        uint32_t nlb[3] = {1, 0, 2};
        assert_int_equal(run_dsm(NVME_DSM_AD, slba, nlb, 3, 0), ST(0, NVME_SC_LBA_RANGE));
        assert_int_equal(run_io(NVME_IO_READ, 20, 4, 0), 0);
        assert_int_equal(buf[0], 0x5a);
        /* AD over blocks 20 and 21 (two ranges, an empty one between). */
        slba[2] = 21;
        nlb[2] = 1;
        assert_int_equal(run_dsm(NVME_DSM_AD, slba, nlb, 3, 0), 0);
        assert_int_equal(run_io(NVME_IO_READ, 20, 4, 0), 0);
        for (int i = 0; i < 2 * 4096; i++)
                if (buf[i])
                        fail_msg("deallocated byte %d = %x", i, buf[i]);
        assert_int_equal(buf[2 * 4096], 0x5a);
        /* Write Zeroes with DEAC deallocates block 22. */
        assert_int_equal(run_io(NVME_IO_WRITE_ZEROES, 22, 1, 1u << 25), 0);
        assert_int_equal(run_io(NVME_IO_READ, 20, 4, 0), 0);
        assert_int_equal(buf[2 * 4096], 0);
        assert_int_equal(buf[3 * 4096], 0x5a);
        /* Linux describes a whole 4 KiB range buffer for one range: block 23. */
        slba[0] = 23;
        nlb[0] = 1;
        uint64_t nuse = nuse_now();
        assert_int_equal(run_dsm(NVME_DSM_AD, slba, nlb, 1, 4096), 0);
        assert_int_equal(run_io(NVME_IO_READ, 20, 4, 0), 0);
        assert_int_equal(buf[3 * 4096], 0);
        /* The deallocated block is no longer in use. */
        assert_int_equal(nuse_now(), nuse - 1);
        ns->thin = false;
}

/* ---- Get LBA Status (Base 2.0 5.20), log 0Eh, OACS, OPTPERF ---- */

static uint16_t get_lba_status(uint32_t nsid, uint64_t slba, uint32_t mndw, uint8_t atype,
                               uint16_t rl)
{
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_GET_LBA_STATUS, nsid);
        cdw(&c, 10, (uint32_t)slba);
        cdw(&c, 11, (uint32_t)(slba >> 32));
        cdw(&c, 12, mndw);
        cdw(&c, 13, ((uint32_t)atype << 24) | rl);
        sgl_len(&c, (mndw + 1) * 4);
        memset(buf, 0xee, 8192);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        if (st(&c) == 0)
                assert_int_equal(c.data_len, (mndw + 1) * 4);
        return st(&c);
}

/* The parameter location of the newest Error Information entry. */
static uint16_t last_error_loc(void)
{
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_ERROR | (15u << 16));
        sgl_len(&c, 64);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        return get_le16(&((const struct nvme_error_log *)buf)->param_loc);
}

static void test_lba_status(void **s)
{
        (void)s;
        struct nvme_cmd c;
        char err[256];
        /* Advertised: OACS bit 9 and the effects log (CSUPP, no LBCC: it changes nothing). */
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(get_le16(&((struct nvme_id_ctrl *)buf)->oacs),
                         NVME_OACS_GET_LBA_STATUS | NVME_OACS_DIRECTIVES |
                             NVME_OACS_DEVICE_SELF_TEST | NVME_OACS_FORMAT);
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_CMD_EFFECTS | (255u << 16));
        sgl_len(&c, 1024);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(slate_get_le(buf + 4 * 0x86, 4), NVME_EFFECTS_CSUPP);

        /* Both action types: nothing is unrecoverable, the whole range was examined. */
        uint8_t atypes[2] = {0x10, 0x11};
        for (int i = 0; i < 2; i++) {
                assert_int_equal(get_lba_status(1, 0, 255, atypes[i], 0), 0);
                assert_int_equal(slate_get_le(buf, 4), 0);   /* NLSD */
                assert_int_equal(buf[4], NVME_LBAS_CMPC_RL); /* CMPC */
                assert_int_equal(buf[8], 0);                 /* no descriptor */
                assert_int_equal(buf[1023], 0);              /* the rest zeroed */
                assert_int_equal(buf[1024], 0xee);           /* nothing past MNDW */
        }
        /* The last block, a range past the end (clipped), MNDW 0: only NLSD fits. */
        assert_int_equal(get_lba_status(1, ns->num_blocks - 1, 3, 0x11, 0xffff), 0);
        assert_int_equal(buf[4], NVME_LBAS_CMPC_RL);
        assert_int_equal(get_lba_status(1, 0, 0, 0x10, 8), 0);
        assert_int_equal(slate_get_le(buf, 4), 0);
        assert_int_equal(buf[4], 0xee);
        /* Bad fields, each with its status and the error log's location. */
        assert_int_equal(get_lba_status(1, 0, 255, 0x02, 0), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(last_error_loc(), NVME_SQE_OFF_CDW(13) + 3);
        assert_int_equal(get_lba_status(1, 0, 255, 0, 0), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(get_lba_status(1, ns->num_blocks, 255, 0x10, 0), ST(0, NVME_SC_LBA_RANGE));
        assert_int_equal(last_error_loc(), NVME_SQE_OFF_CDW(10));
        assert_int_equal(get_lba_status(1, UINT64_MAX, 255, 0x10, 0), ST(0, NVME_SC_LBA_RANGE));
        assert_int_equal(get_lba_status(1, 0, CORE_MAX_TRANSFER_BYTES / 4, 0x10, 0),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(last_error_loc(), NVME_SQE_OFF_CDW(12));
        assert_int_equal(get_lba_status(1, 0, 0xffffffffu, 0x10, 0), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(get_lba_status(0, 0, 255, 0x10, 0), ST(0, NVME_SC_INVALID_NS));
        assert_int_equal(get_lba_status(99, 0, 255, 0x10, 0), ST(0, NVME_SC_INVALID_NS));
        assert_int_equal(get_lba_status(0xffffffffu, 0, 255, 0x10, 0), ST(0, NVME_SC_INVALID_NS));

        /* Log 0Eh: the 4-byte length first (as nvme-cli reads it), then the page. */
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_LBA_STATUS);
        sgl_len(&c, 4);
        memset(buf, 0xee, 64);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(slate_get_le(buf, 4), 16);
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_LBA_STATUS | (7u << 16));
        sgl_len(&c, 32);
        memset(buf, 0xee, 64);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvme_lba_status_log_hdr *lh = (const struct nvme_lba_status_log_hdr *)buf;
        assert_int_equal(get_le32(&lh->lslplen), 16);
        assert_int_equal(get_le32(&lh->nlslne), 0);
        assert_int_equal(get_le32(&lh->estulb), 0);
        assert_int_equal(buf[16], 0); /* past the log: zeroes */

        /*
         * OPTPERF: granularities are the backend's allocation unit (mem: a
         * page) in blocks, 0's based; 4 KiB blocks make them 0, 512-byte
         * blocks a page's worth.
         */
        uint32_t pg = (uint32_t)sysconf(_SC_PAGESIZE);
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 1);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        const struct nvme_id_ns *idn = (const struct nvme_id_ns *)buf;
        assert_int_equal(idn->nsfeat & NVME_NSFEAT_OPTPERF, NVME_NSFEAT_OPTPERF);
        assert_int_equal(get_le16(&idn->npdg), pg / 4096 - 1);
        struct core_ns *small;
        struct core_ns_params p = {
            .name = "nvt512", .backend = "mem", .size_bytes = 1 << 20, .block_size = 512};
        assert_int_equal(core_ns_create(&p, &small, err, sizeof(err)), 0);
        assert_int_equal(nvme_ns_attach(SUBNQN, 9, "nvt512", err, sizeof(err)), 9);
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 9);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(idn->nsfeat & NVME_NSFEAT_OPTPERF, NVME_NSFEAT_OPTPERF);
        assert_int_equal(get_le16(&idn->npwg), pg / 512 - 1);
        assert_int_equal(get_le16(&idn->npwa), pg / 512 - 1);
        assert_int_equal(get_le16(&idn->npdg), pg / 512 - 1);
        assert_int_equal(get_le16(&idn->npda), pg / 512 - 1);
        assert_int_equal(get_le16(&idn->nows), pg / 512 - 1);
        assert_int_equal(core_ns_dealloc_granularity(small), pg / 512);
        /* The null backend does not say: no OPTPERF. */
        assert_int_equal(nvme_ns_detach(SUBNQN, 9, err, sizeof(err)), 0);
        assert_int_equal(core_ns_delete("nvt512"), 0);
        struct core_ns_params np = {.name = "nvtnull",
                                    .backend = "null",
                                    .size_bytes = 1 << 20,
                                    .block_size = 512,
                                    .physical_block_size =
                                        512}; /* no unit from the backend nor the geometry */
        assert_int_equal(core_ns_create(&np, &small, err, sizeof(err)), 0);
        assert_int_equal(nvme_ns_attach(SUBNQN, 9, "nvtnull", err, sizeof(err)), 9);
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 9);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(idn->nsfeat & NVME_NSFEAT_OPTPERF, 0);
        assert_int_equal(get_le16(&idn->npdg), 0);
        assert_int_equal(nvme_ns_detach(SUBNQN, 9, err, sizeof(err)), 0);
        assert_int_equal(core_ns_delete("nvtnull"), 0);
}

/*
 * Provisioning limits (core/provision.c) as NVMe shows them: NCAP is the
 * limit, the soft threshold is the vendor-specific event with log page
 * C0h, a write needing space beyond the limit gets Capacity Exceeded, an
 * overwrite still succeeds, and a new limit is Namespace Attribute Changed.
 */
static void read_prov_log(bool rae)
{
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_VS_PROVISIONING | (rae ? 1u << 15 : 0) | ((512 / 4 - 1) << 16));
        sgl_len(&c, 512);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
}

static void test_provisioning(void **s)
{
        (void)s;
        char err[256];
        struct core_ns *pns = NULL;
        struct nvme_ctrl *ctrl = admin_q.ctrl;
        struct core_ns_params p = {.name = "nvt-prov",
                                   .backend = "file",
                                   .size_bytes = 16 << 20,
                                   .block_size = 4096,
                                   .thin = true,
                                   .provision_limit = 2 << 20,
                                   .provision_threshold = 1 << 20};
        assert_int_equal(core_ns_create(&p, &pns, err, sizeof(err)), 0);
        assert_int_equal(nvme_ns_attach(SUBNQN, 5, "nvt-prov", err, sizeof(err)), 5);

        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 5);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvme_id_ns *idn = (const struct nvme_id_ns *)buf;
        assert_int_equal(get_le64(&idn->nsze), 4096);
        assert_int_equal(get_le64(&idn->ncap), 512); /* the 2 MiB limit */
        assert_int_equal(get_le64(&idn->nuse), 0);

        io_nsid = 5;
        ctrl->aen_pending = 0;
        ctrl->aen_masked = 0;
        memset(buf, 0x3c, 1 << 20);
        assert_int_equal(run_io(NVME_IO_WRITE, 0, 128, 0), 0); /* 512 KiB */
        assert_false(ctrl->aen_pending & NVME_EVT_PROV);
        assert_int_equal(run_io(NVME_IO_WRITE, 128, 128, 0), 0); /* 1 MiB: the threshold */
        assert_true(ctrl->aen_pending & NVME_EVT_PROV);
        read_prov_log(true);
        const struct nvme_vs_prov_hdr *h = (const struct nvme_vs_prov_hdr *)buf;
        const struct nvme_vs_prov_entry *e = (const struct nvme_vs_prov_entry *)(buf + sizeof(*h));
        assert_int_equal(get_le32(&h->entries), 1);
        assert_int_equal(get_le32(&e->nsid), 5);
        assert_int_equal(get_le32(&e->flags), 1 | 2 | 4);
        assert_int_equal(get_le64(&e->capacity), 16 << 20);
        assert_int_equal(get_le64(&e->limit), 2 << 20);
        assert_int_equal(get_le64(&e->threshold), 1 << 20);
        assert_true(get_le64(&e->mapped) >= (1 << 20));
        assert_int_equal(get_le64(&e->available), (2 << 20) - get_le64(&e->mapped));
        /* Delivered events stay masked until the log is read with RAE = 0. */
        ctrl->aen_pending = 0;
        ctrl->aen_masked = NVME_EVT_PROV;
        read_prov_log(true);
        assert_true(ctrl->aen_masked & NVME_EVT_PROV);
        read_prov_log(false);
        assert_false(ctrl->aen_masked & NVME_EVT_PROV);

        /* Up to the limit, then Capacity Exceeded for new space; overwrites still work. */
        memset(buf, 0x3d, 1 << 20);
        assert_int_equal(run_io(NVME_IO_WRITE, 256, 256, 0), 0);
        assert_int_equal(run_io(NVME_IO_WRITE, 1024, 1, 0), ST(0, NVME_SC_CAP_EXCEEDED));
        memset(buf, 0x3e, 1 << 20);
        assert_int_equal(run_io(NVME_IO_WRITE, 0, 256, 0), 0);
        assert_int_equal(run_io(NVME_IO_READ, 256, 1, 0), 0);
        assert_int_equal(buf[0], 0x3d);
        /* Deallocating makes room again. */
        assert_int_equal(run_io(NVME_IO_WRITE_ZEROES, 256, 256, 1u << 25), 0);
        memset(buf, 0x3f, 4096);
        assert_int_equal(run_io(NVME_IO_WRITE, 1024, 1, 0), 0);
        io_nsid = 1;

        /* A new limit changes NCAP: Namespace Attribute Changed. */
        ctrl->nchanged = 0;
        assert_int_equal(core_ns_set_provision(pns, 4 << 20, 1 << 20, NULL, err, sizeof(err)), 0);
        assert_true(ns_changed(ctrl, 5));
        assert_int_equal(nvme_ns_detach(SUBNQN, 5, err, sizeof(err)), 0);
        ctrl->aen_pending = 0;
        ctrl->nchanged = 0;
}

/* ---- Copy (NVM Command Set 1.2 3.3.2) ---- */

struct copy_entry {
        uint32_t snsid;
        uint64_t slba;
        uint32_t nlb; /* 1's based here; the entry holds nlb - 1 */
};

/* Copy on the I/O queue: descriptors in capsule, format fmt, then exec on reactor 0. */
static uint16_t run_copy(uint32_t nsid, uint64_t sdlba, unsigned fmt, const struct copy_entry *e,
                         unsigned n, uint32_t cdw12_flags, uint32_t *dw0_out)
{
        static struct nvme_cmd c;
        unsigned esz = (fmt == 1 || fmt == 3) ? 40 : 32;
        sqe_init(&c, &io_q, NVME_IO_COPY, nsid);
        c.reactor = rt_get(0);
        c.done = on_done;
        c.sqe[39] = 0x01; /* in-capsule */
        cdw(&c, 10, (uint32_t)sdlba);
        cdw(&c, 11, (uint32_t)(sdlba >> 32));
        cdw(&c, 12, ((n - 1) & 0xff) | (fmt << 8) | cdw12_flags);
        uint32_t len = (n > 128 ? 128 : n) * esz;
        sgl_len(&c, len);
        c.icd_len = len;
        memset(buf, 0, len);
        for (unsigned i = 0; i < n && i < 128; i++) {
                struct nvme_copy_range *r = (struct nvme_copy_range *)(buf + i * esz);
                put_le32(&r->snsid, e[i].snsid);
                put_le64(&r->slba, e[i].slba);
                put_le16(&r->nlb, (uint16_t)(e[i].nlb - 1));
                memset(r->tags, 0xee, sizeof(r->tags)); /* PI tags: ignored without PI */
        }
        if (nvme_cmd_parse(&c) == NVME_PARSE_EXEC) {
                w.done = false;
                rt_msg_send(rt_get(0), exec_fn, &c);
                pthread_mutex_lock(&w.m);
                while (!w.done)
                        pthread_cond_wait(&w.cv, &w.m);
                pthread_mutex_unlock(&w.m);
        }
        if (dw0_out)
                *dw0_out = dw0(&c);
        return st(&c);
}

/* Host Behavior Support with CDFE (Set Features 16h, 512 bytes in capsule) on q. */
static uint16_t set_cdfe_on(struct nvme_queue *q, uint16_t cdfe)
{
        static struct nvme_cmd c;
        sqe_init(&c, q, NVME_ADM_SET_FEATURES, 0);
        c.reactor = rt_get(0);
        c.done = on_done;
        c.sqe[39] = 0x01;
        cdw(&c, 10, NVME_FEAT_HOST_BEHAVIOR);
        sgl_len(&c, 512);
        c.icd_len = 512;
        memset(buf, 0, 512);
        put_le16(&((struct nvme_host_behavior *)buf)->cdfe, cdfe);
        if (nvme_cmd_parse(&c) == NVME_PARSE_EXEC) {
                w.done = false;
                rt_msg_send(rt_get(0), exec_fn, &c);
                pthread_mutex_lock(&w.m);
                while (!w.done)
                        pthread_cond_wait(&w.cv, &w.m);
                pthread_mutex_unlock(&w.m);
        }
        return st(&c);
}

static uint16_t set_cdfe(uint16_t cdfe)
{
        return set_cdfe_on(&admin_q, cdfe);
}

/* Blocks [lba, lba + n) of nsid 1 hold pattern tag (one byte per block, at its start). */
static void copy_fill(uint64_t lba, uint32_t n, uint8_t tag)
{
        memset(buf, 0, (size_t)n * 4096);
        for (uint32_t i = 0; i < n; i++)
                memset(buf + (size_t)i * 4096, tag + i, 4096);
        assert_int_equal(run_io(NVME_IO_WRITE, lba, n, 0), 0);
}

static void copy_expect(uint64_t lba, uint32_t n, uint8_t tag)
{
        for (uint32_t i = 0; i < n; i++) {
                assert_int_equal(run_io(NVME_IO_READ, lba + i, 1, 0), 0);
                for (int k = 0; k < 4096; k++)
                        if (buf[k] != (uint8_t)(tag + i))
                                fail_msg("lba %llu byte %d: %02x, want %02x",
                                         (unsigned long long)(lba + i), k, buf[k],
                                         (uint8_t)(tag + i));
        }
}

static void test_copy(void **s)
{
        (void)s;
        char err[256];
        struct core_ns *ns2 = NULL, *ns3 = NULL;
        struct core_ns_params p2 = {
            .name = "nvt-c2", .backend = "mem", .size_bytes = 16 << 20, .block_size = 4096};
        struct core_ns_params p3 = {
            .name = "nvt-c3", .backend = "mem", .size_bytes = 16 << 20, .block_size = 512};
        assert_int_equal(core_ns_create(&p2, &ns2, err, sizeof(err)), 0);
        assert_int_equal(core_ns_create(&p3, &ns3, err, sizeof(err)), 0);
        assert_int_equal(nvme_ns_attach(SUBNQN, 2, "nvt-c2", err, sizeof(err)), 2);
        assert_int_equal(nvme_ns_attach(SUBNQN, 3, "nvt-c3", err, sizeof(err)), 3);

        /* Advertised: ONCS Copy (+ single atomicity, all fast), OCFS 0h-3h, the limits. */
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&c);
        const struct nvme_id_ctrl *id = (const struct nvme_id_ctrl *)buf;
        assert_int_equal(get_le16(&id->oncs) & 0x700, 0x700);
        assert_int_equal(get_le16(&id->ocfs), 0xf);
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 1);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        const struct nvme_id_ns *idn = (const struct nvme_id_ns *)buf;
        assert_int_equal(get_le16(&idn->mssrl), 65535); /* 256 MiB of 4 KiB blocks, capped */
        assert_int_equal(get_le32(&idn->mcl), (uint32_t)((4ull << 30) / 4096));
        assert_int_equal(idn->msrc, 127);
        /* The effects log lists it as changing logical block content. */
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_LOG_CMD_EFFECTS | ((4096 / 4 - 1) << 16));
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvme_effects_log *eff = (const struct nvme_effects_log *)buf;
        assert_int_equal(get_le32(&eff->iocs[NVME_IO_COPY]),
                         NVME_EFFECTS_CSUPP | NVME_EFFECTS_LBCC);

        /* Format 0h: two ranges land back to back at SDLBA; DW0 0 on success. */
        copy_fill(30, 4, 0x10);
        struct copy_entry e[3] = {{0, 32, 2}, {0, 30, 2}};
        uint32_t d0 = 99;
        assert_int_equal(run_copy(1, 100, 0, e, 2, 0, &d0), 0);
        copy_expect(100, 2, 0x12);
        copy_expect(102, 2, 0x10);
        /* Format 1h (40-byte entries; PI tags ignored), with FUA. */
        assert_int_equal(run_copy(1, 200, 1, e, 2, 1u << 30, NULL), 0);
        copy_expect(200, 2, 0x12);
        copy_expect(202, 2, 0x10);
        /* Format 0h overlap is the host's to avoid: done as if read first. */
        struct copy_entry ov = {0, 100, 4};
        assert_int_equal(run_copy(1, 101, 0, &ov, 1, 0, NULL), 0);
        copy_expect(101, 1, 0x12);
        copy_expect(103, 2, 0x10);

        /* Limits: NR beyond MSRC, NLB beyond MSSRL (the entry's 0's based FFFFh). */
        static struct copy_entry many[129];
        for (int i = 0; i < 129; i++)
                many[i] = (struct copy_entry){0, (uint64_t)i, 1};
        assert_int_equal(run_copy(1, 1000, 0, many, 129, 0, NULL), ST(1, NVME_SC_CMD_SIZE_LIMIT));
        assert_int_equal(run_copy(1, 1000, 0, many, 128, 0, NULL), 0);
        struct copy_entry big = {0, 0, 65536};
        assert_int_equal(run_copy(1, 0, 0, &big, 1, 0, &d0), ST(1, NVME_SC_CMD_SIZE_LIMIT));
        assert_int_equal(d0, 0);
        /* Out of range: destination past the end, source past the end. */
        uint64_t nsze = core_ns_blocks(ns);
        assert_int_equal(run_copy(1, nsze - 3, 0, e, 2, 0, NULL), ST(0, NVME_SC_LBA_RANGE));
        struct copy_entry oor = {0, nsze - 1, 2};
        assert_int_equal(run_copy(1, 0, 0, &oor, 1, 0, NULL), ST(0, NVME_SC_LBA_RANGE));
        assert_int_equal(run_copy(1, UINT64_MAX, 0, e, 1, 0, NULL), ST(0, NVME_SC_LBA_RANGE));

        /* Formats: 4h and above unsupported; 2h/3h need Host Behavior Support CDFE. */
        struct copy_entry x2 = {2, 5, 3};
        assert_int_equal(run_copy(1, 300, 4, &x2, 1, 0, NULL), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(run_copy(1, 300, 2, &x2, 1, 0, NULL), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(set_cdfe(0x1), ST(0, NVME_SC_INVALID_FIELD)); /* 0h needs no enabling */
        assert_int_equal(set_cdfe(0xc), 0);
        /* Formats 2h/3h across namespaces: 1 -> 2 and back. */
        assert_int_equal(run_copy(1, 300, 0, e, 1, 0, NULL), 0); /* 1:32..33 -> 1:300 */
        struct copy_entry back = {1, 300, 2};
        assert_int_equal(run_copy(2, 5, 2, &back, 1, 0, NULL), 0); /* 1:300 -> 2:5 */
        struct copy_entry there = {2, 5, 2};
        assert_int_equal(run_copy(1, 400, 3, &there, 1, 0, NULL), 0); /* 2:5 -> 1:400, 3h */
        copy_expect(400, 2, 0x12);
        /* SNSID 0 / FFFFFFFFh: Invalid Namespace or Format; inactive: Invalid Field. */
        struct copy_entry bad = {0, 0, 1};
        assert_int_equal(run_copy(1, 500, 2, &bad, 1, 0, NULL), ST(0, NVME_SC_INVALID_NS));
        bad.snsid = 0xffffffffu;
        assert_int_equal(run_copy(1, 500, 2, &bad, 1, 0, NULL), ST(0, NVME_SC_INVALID_NS));
        bad.snsid = 9;
        assert_int_equal(run_copy(1, 500, 2, &bad, 1, 0, NULL), ST(0, NVME_SC_INVALID_FIELD));
        /* Different LBA data size: Incompatible Namespace or Format. */
        bad.snsid = 3;
        assert_int_equal(run_copy(1, 500, 2, &bad, 1, 0, NULL), ST(1, NVME_SC_INCOMPATIBLE_NS));
        /* 2h/3h: a source in the destination namespace overlapping it is refused. */
        struct copy_entry self = {1, 400, 2};
        assert_int_equal(run_copy(1, 401, 2, &self, 1, 0, NULL), ST(1, NVME_SC_OVERLAPPING_RANGE));
        assert_int_equal(run_copy(1, 402, 2, &self, 1, 0, NULL), 0);
        copy_expect(402, 2, 0x12);

        /* Write-protected destination: Namespace Is Write Protected; a source is fine. */
        assert_int_equal(core_ns_set_wp(ns2, CORE_WP_CONFIG, true, NULL), 0);
        assert_int_equal(run_copy(2, 50, 2, &self, 1, 0, &d0), ST(0, NVME_SC_NS_WRITE_PROTECTED));
        assert_int_equal(d0, 0);
        assert_int_equal(run_copy(1, 600, 2, &there, 1, 0, NULL), 0);
        assert_int_equal(core_ns_set_wp(ns2, CORE_WP_CONFIG, false, NULL), 0);
        /* DTYPE (no directives) is an invalid field. */
        assert_int_equal(run_copy(1, 700, 0, e, 1, 2u << 20, NULL), ST(0, NVME_SC_INVALID_FIELD));

        assert_int_equal(set_cdfe(0), 0);
        assert_int_equal(run_copy(1, 300, 2, &x2, 1, 0, NULL), ST(0, NVME_SC_INVALID_FIELD));
        char e2[256];
        assert_int_equal(nvme_ns_detach(SUBNQN, 2, e2, sizeof(e2)), 0);
        assert_int_equal(nvme_ns_detach(SUBNQN, 3, e2, sizeof(e2)), 0);
}

/* copy_cross_namespace: a new controller starts with CDFE 0Ch (formats 2h and 3h enabled). */
static uint16_t get_hbs_cdfe(struct nvme_queue *q, uint32_t sel)
{
        struct nvme_cmd c;
        sqe_init(&c, q, NVME_ADM_GET_FEATURES, 0);
        cdw(&c, 10, NVME_FEAT_HOST_BEHAVIOR | (sel << 8));
        sgl_len(&c, 512);
        memset(buf, 0xee, 512);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        assert_int_equal(st(&c), 0);
        return get_le16(&((struct nvme_host_behavior *)buf)->cdfe);
}

static void test_copy_cross_namespace_option(void **s)
{
        (void)s;
        struct nvme_queue q1, q2;
        char err[256];
        json_t *subs;
        memset(&q1, 0, sizeof(q1));
        memset(&q2, 0, sizeof(q2));
        assert_int_equal(
            nvme_subsys_set_copy_xns("nqn.2024-01.io.slate:nosuch", true, err, sizeof(err)),
            -ENOENT);
        /* Off (the default): a new controller has nothing enabled. */
        assert_int_equal(do_connect(&q1, 0, 31, 0xffff, SUBNQN, HOSTNQN, NULL), 0);
        assert_int_equal(prop_set_cc(&q1, 1 | (6 << 16) | (4 << 20)), 0);
        assert_int_equal(get_hbs_cdfe(&q1, 0), 0);
        /* On: controllers made from now on start with 2h and 3h enabled; older ones keep theirs. */
        assert_int_equal(nvme_subsys_set_copy_xns(SUBNQN, true, err, sizeof(err)), 0);
        assert_int_equal(do_connect(&q2, 0, 31, 0xffff, SUBNQN, HOSTNQN, NULL), 0);
        assert_int_equal(prop_set_cc(&q2, 1 | (6 << 16) | (4 << 20)), 0);
        assert_int_equal(get_hbs_cdfe(&q2, 0), 0x0c); /* current */
        assert_int_equal(get_hbs_cdfe(&q2, 1), 0x0c); /* default */
        assert_int_equal(atomic_load(&q2.ctrl->copy_fmts), 0x0c);
        assert_int_equal(get_hbs_cdfe(&q1, 0), 0);
        /* What Linux 6.9+ sends at connect (LBAFEE, CDFE 0) leaves them on; elsewhere it is
         * the host's to change. */
        assert_int_equal(set_cdfe_on(&q2, 0), 0);
        assert_int_equal(get_hbs_cdfe(&q2, 0), 0x0c);
        assert_int_equal(atomic_load(&q2.ctrl->copy_fmts), 0x0c);
        assert_int_equal(set_cdfe_on(&q1, 0x0c), 0);
        assert_int_equal(get_hbs_cdfe(&q1, 0), 0x0c);
        assert_int_equal(set_cdfe_on(&q1, 0), 0);
        assert_int_equal(get_hbs_cdfe(&q1, 0), 0);
        /* A controller reset (CC.EN 1 -> 0) returns to the subsystem's default. */
        atomic_store(&q2.ctrl->copy_fmts, 0);
        assert_int_equal(prop_set_cc(&q2, 0), 0);
        assert_int_equal(atomic_load(&q2.ctrl->copy_fmts), 0x0c);
        /* Listed (and so saved with the configuration). */
        subs = nvme_subsystems_json();
        bool found = false;
        size_t i;
        json_t *o;
        json_array_foreach(subs, i, o)
        {
                if (strcmp(json_string_value(json_object_get(o, "nqn")), SUBNQN) == 0) {
                        assert_true(json_is_true(json_object_get(o, "copy_cross_namespace")));
                        found = true;
                }
        }
        assert_true(found);
        json_decref(subs);
        assert_int_equal(nvme_subsys_set_copy_xns(SUBNQN, false, err, sizeof(err)), 0);
        nvme_queue_fini(&q1);
        nvme_queue_fini(&q2);
}

/* ---- Sanitize (Base 2.0 5.24, 8.21) and the Sanitize Status log (81h) ---- */

static void parse_exec_fn(void *arg)
{
        struct nvme_cmd *c = arg;
        if (nvme_cmd_parse(c) == NVME_PARSE_EXEC)
                nvme_cmd_exec(c); /* completes later, on this reactor: on_done */
        else
                on_done(c);
}

/* Sanitize on the admin queue, parsed and executed on reactor 0 (as the transport would). */
static uint16_t sanitize(uint32_t cdw10, uint32_t cdw11, uint32_t sgl)
{
        static struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_SANITIZE, 0);
        c.reactor = rt_get(0);
        c.done = on_done;
        cdw(&c, 10, cdw10);
        cdw(&c, 11, cdw11);
        sgl_len(&c, sgl);
        w.done = false;
        rt_msg_send(rt_get(0), parse_exec_fn, &c);
        pthread_mutex_lock(&w.m);
        while (!w.done)
                pthread_cond_wait(&w.cv, &w.m);
        pthread_mutex_unlock(&w.m);
        return st(&c);
}

static struct nvme_sanitize_log *sanitize_log(bool rae)
{
        static struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0xffffffff);
        cdw(&c, 10, NVME_LOG_SANITIZE | (rae ? 1u << 15 : 0) | (127u << 16));
        sgl_len(&c, 512);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        return (struct nvme_sanitize_log *)buf;
}

/* A block erase started through the core's API (as SCSI would), on reactor 0. */
static void block_erase_fn(void *arg)
{
        struct core_sanitize_params p = {.action = CORE_SANACT_BLOCK_ERASE};
        (void)arg;
        assert_int_equal(core_sanitize_start(ns, &p, NULL, rt_get(0), NULL, NULL), 0);
}

static void wait_sanitized(void)
{
        for (int i = 0; i < 1000 && core_ns_sanitize_state(ns) == CORE_SAN_RUNNING; i++)
                usleep(10000);
        assert_int_not_equal(core_ns_sanitize_state(ns), CORE_SAN_RUNNING);
}

/*
 * The state changes before the event is published (on the sanitize's
 * thread): wait for the controller to have it, under its lock.
 */
static bool aen_pending_within(struct nvme_ctrl *ctrl, uint32_t evt)
{
        for (int i = 0; i < 500; i++) {
                pthread_mutex_lock(&ctrl->lock);
                bool got = (ctrl->aen_pending & evt) != 0;
                pthread_mutex_unlock(&ctrl->lock);
                if (got)
                        return true;
                usleep(2000);
        }
        return false;
}

/* ---- Device Self-test (selftest.c) and its log 06h ---- */

static uint16_t dst(uint32_t nsid, uint32_t cdw10)
{
        static struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_DEVICE_SELF_TEST, nsid);
        c.reactor = rt_get(0);
        c.done = on_done;
        cdw(&c, 10, cdw10);
        w.done = false;
        rt_msg_send(rt_get(0), parse_exec_fn, &c);
        pthread_mutex_lock(&w.m);
        while (!w.done)
                pthread_cond_wait(&w.cv, &w.m);
        pthread_mutex_unlock(&w.m);
        return st(&c);
}

static const uint8_t *dst_log(void)
{
        static struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0xffffffff);
        cdw(&c, 10, NVME_LOG_DEVICE_SELF_TEST | (140u << 16)); /* 564 bytes */
        sgl_len(&c, NVME_DST_LOG_SIZE);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        return buf;
}

static void wait_dst_idle(void)
{
        while (dst_log()[0] != 0)
                usleep(1000);
}

static void test_device_self_test(void **s)
{
        (void)s;
        /* Advertised: OACS bit 4, one operation per subsystem, an estimate. */
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&c);
        assert_int_equal(get_le16(&((struct nvme_id_ctrl *)buf)->oacs) & (1u << 4), 1u << 4);
        assert_int_equal(((struct nvme_id_ctrl *)buf)->dsto, 1);
        assert_true(get_le16(&((struct nvme_id_ctrl *)buf)->edstt) >= 1);
        assert_int_equal(((struct nvme_id_ctrl *)buf)->lpa & 1, 1);

        /* Malformed: reserved code, reserved bits, an inactive NSID. */
        assert_int_equal(dst(1, 3), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dst(1, 0x101), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dst(77, 1), ST(0, NVME_SC_INVALID_NS));
        /* Abort with nothing running: success, nothing logged. */
        assert_int_equal(dst(1, 0xf), 0);
        assert_int_equal(dst_log()[4], 0x0f); /* Fh: entry not used */
        assert_int_equal(dst_log()[4 + 19 * 28], 0x0f);

        /* Short on NSID 1, then extended on every namespace: both pass. */
        assert_int_equal(dst(1, 1), 0);
        wait_dst_idle();
        const uint8_t *l = dst_log();
        assert_int_equal(l[4], 0x10); /* short, completed without error */
        assert_int_equal(l[6], 0);    /* nothing failed: no NSID, LBA, status */
        assert_int_equal(dst(0xffffffff, 2), 0);
        wait_dst_idle();
        l = dst_log();
        assert_int_equal(l[4], 0x20);
        assert_int_equal(l[4 + 28], 0x10); /* the short one, second newest */

        /* Paced, so it runs: a second one is refused, an abort ends it. */
        ns->selftest_rate_mibps = 1;
        assert_int_equal(dst(1, 2), 0);
        assert_int_equal(dst_log()[0], 2); /* an extended one in progress */
        assert_int_equal(dst(1, 1), ST(1, NVME_SC_DST_IN_PROGRESS));
        assert_int_equal(dst(1, 0xf), 0);
        wait_dst_idle();
        l = dst_log();
        assert_int_equal(l[4], 0x21); /* extended, aborted by a Device Self-test command */
        ns->selftest_rate_mibps = 0;
}

static void test_sanitize(void **s)
{
        (void)s;
        struct nvme_ctrl *ctrl = admin_q.ctrl;
        struct nvme_cmd c;

        /* Identify Controller SANICAP: block erase and overwrite, no crypto erase. */
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        cdw(&c, 10, NVME_CNS_CTRL);
        sgl_len(&c, 4096);
        nvme_cmd_parse(&c);
        uint32_t sanicap = get_le32(&((struct nvme_id_ctrl *)buf)->sanicap);
        assert_int_equal(sanicap & 7, NVME_SANICAP_BES | NVME_SANICAP_OWS);
        assert_int_equal(sanicap & NVME_SANICAP_NDI, 0);
        /* The effects log lists it: changes data, exclusive in the subsystem. */
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_CMD_EFFECTS | (1023u << 16));
        sgl_len(&c, 4096);
        nvme_cmd_parse(&c);
        assert_int_equal(slate_get_le(buf + 4 * NVME_ADM_SANITIZE, 4),
                         NVME_EFFECTS_CSUPP | NVME_EFFECTS_LBCC | (2u << 16));
        /* Never sanitized: SSTAT 0, SPROG FFFFh, no estimate yet. */
        struct nvme_sanitize_log *l = sanitize_log(true);
        assert_int_equal(get_le16(&l->sstat) & 7, NVME_SSTAT_NEVER);
        assert_int_equal(get_le16(&l->sprog), 0xffff);
        assert_int_equal(get_le32(&l->etce), NVME_SANITIZE_NO_TIME);

        /* Malformed: every one is Invalid Field, with nothing started. */
        const uint32_t bad[] = {
            0, NVME_SANACT_CRYPTO_ERASE,           5,
            7, NVME_SANACT_BLOCK_ERASE | 1u << 10, NVME_SANACT_OVERWRITE | 1u << 31};
        for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(sanitize(bad[i], 0, 0), ST(0, NVME_SC_INVALID_FIELD));
        /* An admin command: not on an I/O queue. */
        sqe_init(&c, &io_q, NVME_ADM_SANITIZE, 1);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_OPCODE));
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_NEVER);
        /* A write-protected namespace refuses it. */
        core_ns_set_wp(ns, CORE_WP_CONFIG, true, NULL);
        assert_int_equal(sanitize(NVME_SANACT_BLOCK_ERASE, 0, 0) & 0x7ff,
                         ST(0, NVME_SC_NS_WRITE_PROTECTED));
        core_ns_set_wp(ns, CORE_WP_CONFIG, false, NULL);

        /* Overwrite, 2 passes of DEADBEEFh inverted between them, paced so we see it run. */
        memset(buf, 0x11, 4096);
        assert_int_equal(run_io(NVME_IO_WRITE, 5, 1, 0), 0);
        ns->san_rate_mibps = 128; /* 64 MiB x 2 passes: about a second */
        ctrl->aen_pending = ctrl->aen_masked = 0;
        assert_int_equal(sanitize(NVME_SANACT_OVERWRITE | 2u << 4 | NVME_SAN_OIPBP, 0xdeadbeef, 0),
                         0);
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_RUNNING);
        /* Meanwhile: I/O and other sanitizes get Sanitize In Progress; Identify and logs work. */
        assert_int_equal(run_io(NVME_IO_READ, 5, 1, 0) & 0xff, NVME_SC_SANITIZE_IN_PROGRESS);
        assert_int_equal(run_io(NVME_IO_WRITE, 5, 1, 0) & 0xff, NVME_SC_SANITIZE_IN_PROGRESS);
        assert_int_equal(sanitize(NVME_SANACT_BLOCK_ERASE, 0, 0) & 0x7ff,
                         ST(0, NVME_SC_SANITIZE_IN_PROGRESS));
        assert_int_equal(sanitize(NVME_SANACT_EXIT_FAILURE, 0, 0) & 0x7ff,
                         ST(0, NVME_SC_SANITIZE_IN_PROGRESS));
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 1);
        cdw(&c, 10, NVME_CNS_NS);
        sgl_len(&c, 4096);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        l = sanitize_log(true);
        assert_int_equal(get_le16(&l->sstat) & 7, NVME_SSTAT_IN_PROGRESS);
        assert_int_not_equal(get_le16(&l->sprog), 0xffff);
        assert_int_equal(get_le32(&l->scdw10), NVME_SANACT_OVERWRITE | 2u << 4 | NVME_SAN_OIPBP);
        assert_int_not_equal(get_le32(&l->eto), NVME_SANITIZE_NO_TIME); /* paced: known */
        assert_false(ctrl->aen_pending & NVME_EVT_SANITIZED);
        wait_sanitized();

        /* Done: SSTAT 1, 2 passes, nothing written since (GDE), the event pending. */
        assert_true(aen_pending_within(ctrl, NVME_EVT_SANITIZED));
        l = sanitize_log(true);
        assert_int_equal(get_le16(&l->sstat), NVME_SSTAT_DONE | 2u << 3 | NVME_SSTAT_GDE);
        assert_int_equal(get_le16(&l->sprog), 0xffff);
        /* The last pass wrote the inverted pattern, little-endian dwords. */
        assert_int_equal(run_io(NVME_IO_READ, 5, 1, 0), 0);
        assert_int_equal(slate_get_le(buf, 4), (uint32_t)~0xdeadbeefu);
        assert_int_equal(slate_get_le(buf + 4092, 4), (uint32_t)~0xdeadbeefu);
        assert_int_equal(run_io(NVME_IO_WRITE, 5, 1, 0), 0);
        l = sanitize_log(true);
        assert_int_equal(get_le16(&l->sstat) & NVME_SSTAT_GDE, 0); /* written since */
        /* The event, once delivered, stays masked until the log is read with RAE = 0. */
        ctrl->aen_pending = 0;
        ctrl->aen_masked = NVME_EVT_SANITIZED;
        sanitize_log(false);
        assert_false(ctrl->aen_masked & NVME_EVT_SANITIZED);

        /* Exit Failure Mode outside failure mode: nothing to do, success. */
        assert_int_equal(sanitize(NVME_SANACT_EXIT_FAILURE, 0, 0), 0);
        /* A failed sanitize with AUSE = 0 (restricted): I/O gets Sanitize Failed, Exit
         * Failure Mode too; only a new sanitize (block erase here) leaves it. */
        rt_msg_call(rt_get(0), block_erase_fn, NULL);
        wait_sanitized();
        core_ns_sanitize_end(ns, false, false, NULL);
        assert_int_equal(run_io(NVME_IO_READ, 5, 1, 0) & 0xff, NVME_SC_SANITIZE_FAILED);
        assert_int_equal(get_le16(&sanitize_log(true)->sstat) & 7, NVME_SSTAT_FAILED);
        assert_int_equal(sanitize(NVME_SANACT_EXIT_FAILURE, 0, 0) & 0x7ff,
                         ST(0, NVME_SC_SANITIZE_FAILED));
        ns->san_rate_mibps = 0;
        assert_int_equal(sanitize(NVME_SANACT_BLOCK_ERASE | NVME_SAN_AUSE, 0, 0), 0);
        wait_sanitized();
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_DONE);
        assert_int_equal(run_io(NVME_IO_READ, 5, 1, 0), 0);
        assert_int_equal(buf[0], 0);
        assert_int_equal(get_le32(&sanitize_log(true)->scdw10),
                         NVME_SANACT_BLOCK_ERASE | NVME_SAN_AUSE);
        /* With AUSE, Exit Failure Mode leaves failure mode. */
        core_ns_sanitize_end(ns, false, true, NULL);
        assert_int_equal(sanitize(NVME_SANACT_EXIT_FAILURE, 0, 0), 0);
        assert_int_equal(run_io(NVME_IO_READ, 5, 1, 0), 0);

        /*
         * Encrypted at rest (core/crypt.h; a namespace gets its key at create,
         * given here to the test's one): SANICAP.CES, a crypto erase runs, the
         * data written before is unreadable after it (this mem namespace is
         * not thin: what the old ciphertext decrypts to under the new key).
         */
        char kf[] = "/tmp/slate-nvt-key-XXXXXX";
        int fd = mkstemp(kf);
        assert_true(fd >= 0);
        assert_int_equal(
            write(fd, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff", 64), 64);
        close(fd);
        struct core_crypt_kek_src ks = {.key_file = kf};
        char err[256];
        assert_int_equal(core_crypt_create(&ks, &ns->crypt, err, sizeof(err)), 0);
        unlink(kf);
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        cdw(&c, 10, NVME_CNS_CTRL);
        sgl_len(&c, 4096);
        nvme_cmd_parse(&c);
        sanicap = get_le32(&((struct nvme_id_ctrl *)buf)->sanicap);
        assert_int_equal(sanicap & 7, NVME_SANICAP_CES | NVME_SANICAP_BES | NVME_SANICAP_OWS);
        assert_int_not_equal(get_le32(&sanitize_log(true)->etce), NVME_SANITIZE_NO_TIME);
        memset(buf, 0x11, 4096);
        assert_int_equal(run_io(NVME_IO_WRITE, 5, 1, 0), 0);
        memset(buf, 0, 4096);
        assert_int_equal(run_io(NVME_IO_READ, 5, 1, 0), 0);
        assert_int_equal(buf[0], 0x11);
        assert_int_equal(sanitize(NVME_SANACT_CRYPTO_ERASE, 0, 0), 0);
        wait_sanitized();
        assert_int_equal(core_ns_sanitize_state(ns), CORE_SAN_DONE);
        assert_int_equal(get_le32(&sanitize_log(true)->scdw10), NVME_SANACT_CRYPTO_ERASE);
        assert_int_equal(run_io(NVME_IO_READ, 5, 1, 0), 0);
        uint8_t old[4096];
        memset(old, 0x11, sizeof(old));
        assert_memory_not_equal(buf, old, 4096);
        core_crypt_free(ns->crypt);
        ns->crypt = NULL;
        /* Unencrypted again: no CES, Crypto Erase refused. */
        assert_int_equal(sanitize(NVME_SANACT_CRYPTO_ERASE, 0, 0), ST(0, NVME_SC_INVALID_FIELD));
}

static void test_discovery(void **s)
{
        (void)s;
        struct nvme_queue dq;
        struct nvme_cmd c;
        memset(&dq, 0, sizeof(dq));
        snprintf(dq.local_addr, sizeof(dq.local_addr), "10.0.0.5");
        assert_int_equal(do_connect(&dq, 0, 31, 0xffff, NVMF_DISCOVERY_NQN, HOSTNQN, NULL), 0);
        assert_true(dq.is_discovery);
        assert_int_equal(prop_set_cc(&dq, 1), 0);
        /* Identify: discovery controller type; other CNS refused. */
        sqe_init(&c, &dq, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(((struct nvme_id_ctrl *)buf)->cntrltype, NVME_CTRL_TYPE_DISC);
        /* Header, then the entries at an offset. */
        sqe_init(&c, &dq, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_DISCOVERY | (255u << 16));
        sgl_len(&c, 1024);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvmf_disc_log_hdr *h = (const struct nvmf_disc_log_hdr *)buf;
        uint64_t gen = get_le64(&h->genctr);
        assert_int_equal(get_le64(&h->numrec), 2); /* discovery itself + the test subsystem */
        sqe_init(&c, &dq, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_DISCOVERY | (511u << 16));
        cdw(&c, 12, 1024);
        sgl_len(&c, 2048);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvmf_disc_log_entry *e = (const struct nvmf_disc_log_entry *)buf;
        bool found = false;
        for (int i = 0; i < 2; i++) {
                if (strcmp(e[i].subnqn, SUBNQN) == 0) {
                        found = true;
                        assert_int_equal(e[i].subtype, NVMF_SUBTYPE_NVME);
                        assert_int_equal(e[i].trtype, NVMF_TRTYPE_TCP);
                        assert_memory_equal(e[i].traddr, "10.0.0.5 ", 9);
                        assert_memory_equal(e[i].trsvcid, "4420 ", 5);
                }
        }
        assert_true(found);
        /* A change bumps GENCTR and raises the F0h notice when enabled. */
        struct nvme_ctrl *dc = dq.ctrl;
        dc->aec = NVME_AEN_CFG_DISC_CHANGE;
        char err[128];
        assert_int_equal(nvme_subsys_add("nqn.2024-01.io.slate:two", NULL, NULL, err, sizeof(err)),
                         0);
        assert_true(nvmf_discovery_genctr() > gen);
        assert_true(dc->aen_pending & NVME_EVT_DISC_CHANGED);
        /* The new subsystem has no allowed hosts: still two records for this host. */
        sqe_init(&c, &dq, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_DISCOVERY | (255u << 16));
        sgl_len(&c, 1024);
        nvme_cmd_parse(&c);
        assert_int_equal(get_le64(&h->numrec), 2);
        /* Non-discovery commands are refused. */
        sqe_init(&c, &dq, NVME_ADM_ABORT, 0);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_OPCODE));
        assert_int_equal(nvme_subsys_del("nqn.2024-01.io.slate:two", err, sizeof(err)), 0);
        nvme_queue_fini(&dq);
}

static void test_status_table(void **s)
{
        (void)s;
        for (int i = 0; i < CORE_STATUS_MAX; i++) {
                const struct nvme_status_map *m = nvme_status_map((enum core_status)i);
                if (i == CORE_OK)
                        assert_true(m->sct == 0 && m->sc == 0);
                else
                        assert_true(m->sct != 0 || m->sc != 0);
        }
        assert_int_equal(nvme_status_map(CORE_E_MISCOMPARE)->sct, NVME_SCT_MEDIA);
        assert_int_equal(nvme_status_map(CORE_E_MISCOMPARE)->sc, NVME_SC_COMPARE_FAILED);
        assert_int_equal(nvme_status_map(CORE_E_LBA_RANGE)->sc, NVME_SC_LBA_RANGE);
        assert_int_equal(nvme_status_map(CORE_E_WRITE_PROTECT)->sc, NVME_SC_NS_WRITE_PROTECTED);
        assert_int_equal(nvme_status_map(CORE_E_SPACE_ALLOC_FAILED)->sct, NVME_SCT_GENERIC);
        assert_int_equal(nvme_status_map(CORE_E_SPACE_ALLOC_FAILED)->sc, NVME_SC_CAP_EXCEEDED);
        assert_true(nvme_status_map(CORE_E_SPACE_ALLOC_FAILED)->dnr);
        assert_int_equal(nvme_status_map(CORE_STATUS_MAX)->sc, NVME_SC_INTERNAL);
}

static int aer_done_calls;
static uint16_t aer_done_status;
static void aer_done(struct nvme_cmd *c)
{
        aer_done_calls++;
        aer_done_status = nvme_cqe_status(c) & 0x7ff;
}

static void test_reset_and_fini(void **s)
{
        (void)s;
        /* nvme.h's AER contract: a parked AER completes once, from inside nvme_queue_fini. */
        struct nvme_cmd aer;
        sqe_init(&aer, &admin_q, NVME_ADM_ASYNC_EVENT, 0);
        aer.done = aer_done;
        assert_int_equal(nvme_cmd_parse(&aer), NVME_PARSE_EXEC);
        nvme_cmd_exec(&aer);
        assert_int_equal(aer_done_calls, 0);
        /* CC.EN 1 -> 0: CSTS.RDY clears; shutdown reports SHST complete. */
        assert_int_equal(prop_set_cc(&admin_q, (1u << 14) | 1 | (6 << 16) | (4 << 20)), 0);
        assert_int_equal((atomic_load(&admin_q.ctrl->csts) >> 2) & 3, NVME_CSTS_SHST_CMPLT);
        assert_int_equal(prop_set_cc(&admin_q, 0), 0);
        assert_int_equal(atomic_load(&admin_q.ctrl->csts) & NVME_CSTS_RDY, 0);
        nvme_queue_fini(&io_q);
        assert_null(io_q.ctrl);
        assert_int_equal(aer_done_calls, 0);
        nvme_queue_fini(&admin_q);
        assert_null(admin_q.ctrl);
        assert_int_equal(aer_done_calls, 1);
        assert_int_equal(aer_done_status, ST(0, NVME_SC_ABORT_SQ_DELETION));
        char err[128];
        assert_int_equal(nvme_ns_detach(SUBNQN, 1, err, sizeof(err)), 0);
        assert_int_equal(nvme_ns_in_use(ns), 0);
}

/* ---- Failing media (core/media.h): Write Uncorrectable, logs 0Eh and 0Dh, SMART ---- */

static uint16_t get_log(uint8_t lid, uint8_t lsp, uint32_t len, uint32_t lpo)
{
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, lid | ((uint32_t)lsp << 8) | ((len / 4 - 1) << 16));
        cdw(&c, 12, lpo);
        sgl_len(&c, len);
        memset(buf, 0xee, len);
        nvme_cmd_parse(&c);
        return st(&c);
}

static void test_media(void **s)
{
        (void)s;
        struct nvme_ctrl *ctrl = admin_q.ctrl;
        struct nvme_cmd c;
        char err[256];
        /* Advertised: ONCS Write Uncorrectable, OAES LBA Status Information, LPA PEL. */
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvme_id_ctrl *id = (const struct nvme_id_ctrl *)buf;
        assert_true(get_le16(&id->oncs) & NVME_ONCS_WRITE_UNCOR);
        assert_true(get_le32(&id->oaes) & NVME_AEN_CFG_LBA_STATUS);
        assert_true(id->lpa & (1u << 4));
        /* Enable the LBA Status Information notices; clear what is pending. */
        assert_int_equal(setfeat(NVME_FEAT_ASYNC_EVENT,
                                 NVME_AEN_CFG_NS_ATTR | NVME_AEN_CFG_LBA_STATUS, false, NULL),
                         0);
        assert_int_equal(get_log(NVME_LOG_LBA_STATUS, 0, 4096, 0), 0);
        uint16_t lsgc0 = (uint16_t)slate_get_le(buf + 14, 2);
        pthread_mutex_lock(&ctrl->lock);
        ctrl->aen_pending &= ~NVME_EVT_LBA_STATUS;
        pthread_mutex_unlock(&ctrl->lock);
        uint64_t media0 = 0;
        assert_int_equal(get_log(NVME_LOG_SMART, 0, 512, 0), 0);
        media0 = slate_get_le(((struct nvme_smart_log *)buf)->media_errors, 8);

        /* Write Uncorrectable, then a read fails with Unrecovered Read Error at that LBA. */
        assert_int_equal(run_io(NVME_IO_WRITE_UNCOR, 100, 2, 0), 0);
        /* The host that made the change is not told; a management change tells everyone. */
        pthread_mutex_lock(&ctrl->lock);
        assert_false(ctrl->aen_pending & NVME_EVT_LBA_STATUS);
        pthread_mutex_unlock(&ctrl->lock);
        assert_int_equal(core_media_mark(ns, 4000, 1, true, NULL), 0);
        assert_true(aen_pending_within(ctrl, NVME_EVT_LBA_STATUS));
        assert_int_equal(core_media_mark(ns, 4000, 1, false, NULL), 0);
        assert_int_equal(run_io(NVME_IO_READ, 99, 3, 0), ST(2, NVME_SC_READ_ERROR));
        const struct nvme_error_log *e = last_error(ctrl);
        assert_int_equal(get_le64(&e->lba), 100);
        assert_int_equal(get_le32(&e->nsid), 1);
        assert_int_equal((get_le16(&e->status) >> 1) & 0x7ff, ST(2, NVME_SC_READ_ERROR));
        assert_int_equal(run_io(NVME_IO_READ, 98, 2, 0), 0); /* the neighbours read */
        /* Get LBA Status 11h lists it (tracked); the log has it and LSGC moved. */
        assert_int_equal(get_lba_status(1, 0, 15, 0x11, 0), 0);
        assert_int_equal(slate_get_le(buf, 4), 1);
        assert_int_equal(slate_get_le(buf + 8, 8), 100);
        assert_int_equal(slate_get_le(buf + 16, 4), 2);
        assert_int_equal(get_log(NVME_LOG_LBA_STATUS, 0, 4096, 0), 0);
        assert_int_not_equal(slate_get_le(buf + 14, 2), lsgc0);
        assert_int_equal(slate_get_le(buf + 4, 4), 1);    /* one namespace element */
        assert_int_equal(slate_get_le(buf + 8, 4), 0);    /* nothing untracked */
        assert_int_equal(buf[24], 0x11);                  /* RATYPE */
        assert_int_equal(slate_get_le(buf + 32, 8), 100); /* the range */
        /* A write heals; reads work again. */
        memset(buf, 0x3c, 8192);
        assert_int_equal(run_io(NVME_IO_WRITE, 100, 2, 0), 0);
        assert_int_equal(run_io(NVME_IO_READ, 100, 2, 0), 0);
        assert_int_equal(buf[4096], 0x3c);
        /* Malformed: past the end, bad NSID. */
        assert_int_equal(run_io(NVME_IO_WRITE_UNCOR, ns->num_blocks - 1, 2, 0),
                         ST(0, NVME_SC_LBA_RANGE));
        io_nsid = 9;
        assert_int_equal(run_io(NVME_IO_WRITE_UNCOR, 0, 1, 0), ST(0, NVME_SC_INVALID_NS));
        io_nsid = 1;

        /* A failed element: untracked until a scan (ATYPE 10h). */
        assert_int_equal(core_media_configure(ns, 4, 256, err, sizeof(err)), 0);
        assert_int_equal(
            core_media_set_element(ns, 2, CORE_ELEM_FAILED, -1, NULL, err, sizeof(err)), 0);
        assert_int_equal(run_io(NVME_IO_READ, 256, 1, 0), ST(2, NVME_SC_READ_ERROR));
        assert_int_equal(run_io(NVME_IO_WRITE, 257, 1, 0), ST(2, NVME_SC_WRITE_FAULT));
        assert_int_equal(get_log(NVME_LOG_LBA_STATUS, 0, 4096, 0), 0);
        assert_int_equal(slate_get_le(buf + 8, 4), ns->num_blocks / 4); /* ESTULB */
        assert_int_equal(buf[24], 0x10);
        assert_int_equal(get_lba_status(1, 0, 15, 0x11, 0), 0);
        assert_int_equal(slate_get_le(buf, 4), 0);
        assert_int_equal(get_lba_status(1, 0, 255, 0x10, 0), 0);
        assert_int_equal(slate_get_le(buf, 4), 16); /* every 4th of 64 stripe units */
        assert_int_equal(buf[4], NVME_LBAS_CMPC_RL);
        assert_int_equal(slate_get_le(buf + 8, 8), 256);
        assert_int_equal(slate_get_le(buf + 16, 4), 256);
        assert_int_equal(slate_get_le(buf + 24, 8), 256 + 4 * 256);
        assert_int_equal(get_log(NVME_LOG_LBA_STATUS, 0, 4096, 0), 0);
        assert_int_equal(slate_get_le(buf + 8, 4), 0);
        assert_int_equal(buf[24], 0x11);
        /* SMART: the failed commands counted, reliability degraded while an element is failed. */
        assert_int_equal(get_log(NVME_LOG_SMART, 0, 512, 0), 0);
        const struct nvme_smart_log *sl = (const struct nvme_smart_log *)buf;
        assert_int_equal(slate_get_le(sl->media_errors, 8), media0 + 3);
        assert_true(sl->critical_warning & (1u << 2));

        /* Persistent Event log: no context, bad action, then establish / read / release. */
        assert_int_equal(get_log(NVME_LOG_PERSISTENT_EVENT, 0, 512, 0),
                         ST(0, NVME_SC_CMD_SEQ_ERROR));
        assert_int_equal(get_log(NVME_LOG_PERSISTENT_EVENT, 3, 512, 0),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(get_log(NVME_LOG_PERSISTENT_EVENT, 1, 4096, 0), 0);
        const struct nvme_pel_hdr *h = (const struct nvme_pel_hdr *)buf;
        assert_int_equal(h->lid, NVME_LOG_PERSISTENT_EVENT);
        uint32_t tnev = get_le32(&h->tnev);
        uint64_t tll = get_le64(&h->tll);
        assert_true(tnev >= 2);
        assert_true(tll <= 4096);
        assert_true(h->seb[0] & (1u << NVME_PEL_NSS_HW_ERROR));
        assert_memory_equal(h->subnqn, SUBNQN, strlen(SUBNQN));
        uint32_t off = 512, hw = 0, snap_after_hw = 0;
        uint8_t prev = 0;
        for (uint32_t i = 0; i < tnev; i++) {
                const struct nvme_pel_event *ev = (const struct nvme_pel_event *)(buf + off);
                assert_int_equal(ev->ehl, 21);
                if (ev->etype == NVME_PEL_NSS_HW_ERROR &&
                    slate_get_le(buf + off + 24, 2) == NVME_PEL_HWERR_MEDIA_INTEGRITY)
                        hw++;
                if (ev->etype == NVME_PEL_SMART_SNAPSHOT && prev == NVME_PEL_NSS_HW_ERROR) {
                        assert_int_equal(get_le16(&ev->el), 512);
                        snap_after_hw++;
                }
                prev = ev->etype;
                off += 24 + get_le16(&ev->el);
        }
        assert_int_equal(off, tll);
        assert_int_equal(hw, 1);
        assert_int_equal(snap_after_hw, 1);
        /* The context is a snapshot: new events wait for the next one. */
        assert_int_equal(
            core_media_set_element(ns, 3, CORE_ELEM_DEGRADED, -1, NULL, err, sizeof(err)), 0);
        assert_int_equal(get_log(NVME_LOG_PERSISTENT_EVENT, 0, 512, 0), 0);
        assert_int_equal(get_le32(&h->tnev), tnev);
        assert_int_equal(get_log(NVME_LOG_PERSISTENT_EVENT, 0, 512, 512), 0); /* by offset */
        assert_int_equal(buf[0], NVME_PEL_NSS_HW_ERROR);
        assert_int_equal(get_log(NVME_LOG_PERSISTENT_EVENT, 0, 512, 8192),
                         ST(0, NVME_SC_INVALID_FIELD)); /* past the end */
        assert_int_equal(get_log(NVME_LOG_PERSISTENT_EVENT, 1, 512, 0), 0);
        assert_int_equal(get_le32(&h->tnev), tnev + 2);
        assert_int_equal(get_log(NVME_LOG_PERSISTENT_EVENT, 2, 512, 0), 0);
        assert_int_equal(get_log(NVME_LOG_PERSISTENT_EVENT, 0, 512, 0),
                         ST(0, NVME_SC_CMD_SEQ_ERROR));

        /* Back as it was. */
        assert_int_equal(core_media_set_element(ns, 2, CORE_ELEM_OK, -1, NULL, err, sizeof(err)),
                         0);
        assert_int_equal(core_media_set_element(ns, 3, CORE_ELEM_OK, -1, NULL, err, sizeof(err)),
                         0);
        assert_int_equal(core_media_configure(ns, 0, 0, err, sizeof(err)), 0);
        assert_int_equal(run_io(NVME_IO_READ, 256, 1, 0), 0);
        setfeat(NVME_FEAT_ASYNC_EVENT, NVME_AEN_CFG_NS_ATTR, false, NULL);
}

/*
 * Asymmetric Namespace Access (ana.c, core/ana.h): Identify's fields, log
 * 0Ch with and without RGO, the change notice when a group's state
 * changes, the path status of each state, and CNTLIDs in the gateway's
 * range.
 */
static void test_ana(void **s)
{
        (void)s;
        struct nvme_cmd c;
        struct nvme_ctrl *ctrl = admin_q.ctrl;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvme_id_ctrl *id = (const struct nvme_id_ctrl *)buf;
        assert_true(id->cmic & NVME_CMIC_ANA);
        assert_true(id->cmic & NVME_CMIC_MULTI_CTRL);
        assert_int_equal(id->anacap, 0x1f);
        assert_true(id->anatt > 0);
        assert_int_equal(get_le32(&id->anagrpmax), CORE_ANA_GROUPS);
        assert_int_equal(get_le32(&id->nanagrpid), CORE_ANA_GROUPS);
        assert_int_equal(get_le32(&id->mnan), NVME_MAX_NSID);
        assert_true(get_le32(&id->oaes) & NVME_AEN_CFG_ANA_CHANGE);
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 1);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        assert_int_equal(get_le32(&((const struct nvme_id_ns *)buf)->anagrpid), 1);

        /* The log: group 1 optimized with NSID 1; RGO leaves the NSIDs out. */
        uint64_t chg0 = core_ana_change_count();
        assert_int_equal(get_log(NVME_LOG_ANA, 0, 4096, 0), 0);
        const struct nvme_ana_log_hdr *h = (const void *)buf;
        const struct nvme_ana_group_desc *d = (const void *)(buf + 16);
        assert_int_equal(get_le64(&h->chgcnt), chg0);
        assert_int_equal(get_le16(&h->ngrps), 1);
        assert_int_equal(get_le32(&d->grpid), 1);
        assert_int_equal(get_le32(&d->nnsids), 1);
        assert_int_equal(d->state, NVME_ANA_OPTIMIZED);
        assert_int_equal(slate_get_le(buf + 48, 4), 1);
        assert_int_equal(slate_get_le(buf + 52, 4), 0); /* past the end: zeroes */
        assert_int_equal(get_log(NVME_LOG_ANA, 1, 4096, 0), 0);
        assert_int_equal(get_le32(&d->nnsids), 0);
        assert_int_equal(slate_get_le(buf + 48, 4), 0);
        assert_int_equal(get_log(NVME_LOG_ANA, 2, 4096, 0), ST(0, NVME_SC_INVALID_FIELD));
        /* nvme-cli reads what NANAGRPID and MNAN allow in 4 KiB pieces: the rest is zeroes. */
        assert_int_equal(get_log(NVME_LOG_ANA, 0, 528, 4096), 0);
        assert_int_equal(buf[0], 0);
        assert_int_equal(get_log(NVME_LOG_ANA, 0, 4, NVME_ANA_LOG_MAX + 4),
                         ST(0, NVME_SC_INVALID_FIELD));

        /* A state change: the notice is pending (AEC bit 11), the log and the status follow. */
        ctrl->aec |= NVME_AEN_CFG_ANA_CHANGE;
        ctrl->aen_pending = 0;
        ctrl->aen_masked = 0;
        static const struct {
                enum core_ana_state st;
                uint8_t nvme;
                uint16_t status; /* of medium access, 0 = allowed */
        } rows[] = {
            {CORE_ANA_NON_OPTIMIZED, NVME_ANA_NON_OPTIMIZED, 0},
            {CORE_ANA_INACCESSIBLE, NVME_ANA_INACCESSIBLE, ST(3, NVME_SC_ANA_INACCESSIBLE)},
            {CORE_ANA_STANDBY, NVME_ANA_INACCESSIBLE, ST(3, NVME_SC_ANA_INACCESSIBLE)},
            {CORE_ANA_PERSISTENT_LOSS, NVME_ANA_PERSISTENT_LOSS,
             ST(3, NVME_SC_ANA_PERSISTENT_LOSS)},
            {CORE_ANA_TRANSITIONING, NVME_ANA_CHANGE, ST(3, NVME_SC_ANA_TRANSITION)},
            {CORE_ANA_OPTIMIZED, NVME_ANA_OPTIMIZED, 0},
        };
        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
                assert_int_equal(core_ana_set_state(1, rows[i].st, NULL), 0);
                assert_true(ctrl->aen_pending & NVME_EVT_ANA);
                ctrl->aen_pending = 0;
                assert_int_equal(get_log(NVME_LOG_ANA, 0, 4096, 0), 0);
                assert_int_equal(d->state, rows[i].nvme);
                assert_int_equal(get_le64(&h->chgcnt), chg0 + i + 1);
                assert_int_equal(get_le64(&d->chgcnt), chg0 + i + 1);
                enum core_status cst = core_ns_check(ns, CORE_CHK_ACCESS);
                const struct nvme_status_map *m = nvme_status_map(cst);
                assert_int_equal(ST(m->sct, m->sc), rows[i].status);
                if (rows[i].status)
                        assert_false(m->dnr); /* another path may serve it */
        }
        /* Moving the namespace to another group: reported there, notice again. */
        assert_int_equal(core_ana_set_state(5, CORE_ANA_NON_OPTIMIZED, NULL), 0);
        assert_false(ctrl->aen_pending & NVME_EVT_ANA); /* no namespace of ours in group 5 */
        assert_int_equal(core_ns_set_ana_group(ns, 5, NULL), 0);
        assert_true(ctrl->aen_pending & NVME_EVT_ANA);
        ctrl->aen_pending = 0;
        assert_int_equal(get_log(NVME_LOG_ANA, 0, 4096, 0), 0);
        assert_int_equal(get_le16(&h->ngrps), 1);
        assert_int_equal(get_le32(&d->grpid), 5);
        assert_int_equal(d->state, NVME_ANA_NON_OPTIMIZED);
        assert_int_equal(core_ns_set_ana_group(ns, 1, NULL), 0);
        assert_int_equal(core_ana_set_state(5, CORE_ANA_OPTIMIZED, NULL), 0);
        ctrl->aen_pending = 0;
        ctrl->aec &= ~NVME_AEN_CFG_ANA_CHANGE;

        /* Gateway 3 hands out CNTLIDs 3000h..3FFFh. */
        assert_int_equal(core_gateway_set_id(3), 0);
        struct nvme_queue q3;
        uint32_t cntlid = 0;
        memset(&q3, 0, sizeof(q3));
        assert_int_equal(do_connect(&q3, 0, 31, 0xffff, SUBNQN, HOSTNQN, &cntlid), 0);
        assert_int_equal(cntlid >> 12, 3);
        nvme_queue_fini(&q3);
        assert_int_equal(core_gateway_set_id(0), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_status_table),
            cmocka_unit_test(test_connect_validation),
            cmocka_unit_test(test_connect_empty_hostnqn),
            cmocka_unit_test(test_connect_enable_io),
            cmocka_unit_test(test_identify),
            cmocka_unit_test(test_sgl_checks),
            cmocka_unit_test(test_more_bit),
            cmocka_unit_test(test_log_pages),
            cmocka_unit_test(test_features),
            cmocka_unit_test(test_rae),
            cmocka_unit_test(test_io_parse),
            cmocka_unit_test(test_io_roundtrip),
            cmocka_unit_test(test_fused),
            cmocka_unit_test(test_thin),
            cmocka_unit_test(test_lba_status),
            cmocka_unit_test(test_media),
            cmocka_unit_test(test_provisioning),
            cmocka_unit_test(test_copy),
            cmocka_unit_test(test_copy_cross_namespace_option),
            cmocka_unit_test(test_device_self_test),
            cmocka_unit_test(test_sanitize),
            cmocka_unit_test(test_discovery),
            cmocka_unit_test(test_write_protect_feature),
            cmocka_unit_test(test_ana),
            cmocka_unit_test(test_reset_and_fini),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
