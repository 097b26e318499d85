/*
 * NVMe reservations (nvme/resv.c) on the core's reservation model, without
 * a transport: every malformed Reservation Register / Acquire / Release /
 * Report gets its NVMe error (bad action, bad RTYPE, IEKEY where it is not
 * allowed, reserved CPTPL, short data, EDS = 0, zero key), the key rules
 * (wrong key -> Reservation Conflict), one registration per host shared by
 * its controllers, writes from a host without the reservation failing in
 * the core with Reservation Conflict, Reservation Report (extended) with
 * NVMe and SCSI registrants, PREEMPT AND ABORT's Registration Preempted
 * notification through log page 80h, and features 82h/83h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ns.h"
#include "nvme/internal.h"
#include "rt/reactor.h"

#define SUBNQN "nqn.2024-01.io.slate:resv"
#define HOSTA  "nqn.2014-08.org.nvmexpress:uuid:aaaaaaaa-0000-0000-0000-000000000001"
#define HOSTB  "nqn.2014-08.org.nvmexpress:uuid:bbbbbbbb-0000-0000-0000-000000000002"
#define BUFLEN (2 * CORE_MAX_TRANSFER_BYTES)

static struct core_ns *ns;
static uint8_t *buf;
/* Host A has two controllers (a1, a2): one host, one registration. */
static struct nvme_queue a1_admin, a1_io, a2_admin, a2_io, b_admin, b_io;

#define ST(sct, sc) ((uint16_t)(((sct) << 8) | (sc)))
static uint16_t st(struct nvme_cmd *c)
{
        return nvme_cqe_status(c) & 0x7ff;
}

static void sqe_init(struct nvme_cmd *c, struct nvme_queue *q, uint8_t opc, uint32_t nsid)
{
        memset(c, 0, sizeof(*c));
        c->queue = q;
        c->buf = buf;
        c->buf_len = BUFLEN;
        c->reactor = rt_get(0);
        c->sqe[0] = opc;
        c->sqe[1] = 0x40;
        slate_put_le(c->sqe + 2, 2, 0x77);
        slate_put_le(c->sqe + 4, 4, nsid);
        c->sqe[39] = 0x5a;
}
static void cdw(struct nvme_cmd *c, int n, uint32_t v)
{
        slate_put_le(c->sqe + 4 * n, 4, v);
}

static void host_connect(struct nvme_queue *q, uint16_t qid, uint16_t cntlid, const char *host,
                         uint8_t idbyte)
{
        struct nvme_cmd c;
        sqe_init(&c, q, NVME_OPC_FABRICS, 0);
        c.sqe[4] = NVMF_FCTYPE_CONNECT;
        c.sqe[39] = 0x01;
        slate_put_le(c.sqe + 32, 4, 1024);
        slate_put_le(c.sqe + 42, 2, qid);
        slate_put_le(c.sqe + 44, 2, 31);
        c.icd_len = 1024;
        struct nvmf_connect_data *d = (struct nvmf_connect_data *)buf;
        memset(d, 0, sizeof(*d));
        memset(d->hostid, idbyte, 16);
        put_le16(&d->cntlid, cntlid);
        snprintf(d->subnqn, sizeof(d->subnqn), "%s", SUBNQN);
        snprintf(d->hostnqn, sizeof(d->hostnqn), "%s", host);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        nvmf_connect_do(&c);
        assert_int_equal(st(&c), 0);
}

/* The transport's part, as NVMe/TCP does it: the SGL must describe exactly what moves. */
static enum nvme_xfer_error check_xfer(const struct nvme_cmd *c, uint32_t len, bool h2c)
{
        (void)h2c;
        return slate_get_le(c->sqe + 32, 4) == len ? NVME_XFER_OK : NVME_XFER_SGL_LENGTH;
}

static void enable(struct nvme_queue *admin)
{
        nvme_ctrl_set_cc(admin->ctrl, 1 | (6u << 16) | (4u << 20));
}

static int setup(void **s)
{
        (void)s;
        char err[256], dir[] = "/tmp/slate-test-resv-XXXXXX";
        if (!mkdtemp(dir))
                return -1;
        core_set_state_dir(dir);
        if (rt_init(1) || rt_start())
                return -1;
        buf = aligned_alloc(4096, BUFLEN);
        struct core_ns_params p = {
            .name = "nvr", .backend = "mem", .size_bytes = 16 << 20, .block_size = 4096};
        if (!buf || core_ns_create(&p, &ns, err, sizeof(err)))
                return -1;
        if (nvme_subsys_add(SUBNQN, "SNR", "Slate Test", err, sizeof(err)) ||
            nvme_ns_attach(SUBNQN, 1, "nvr", err, sizeof(err)) != 1 ||
            nvme_subsys_allow_host(SUBNQN, "*", err, sizeof(err)))
                return -1;
        host_connect(&a1_admin, 0, 0xffff, HOSTA, 0xa1);
        host_connect(&a2_admin, 0, 0xffff, HOSTA, 0xa1);
        host_connect(&b_admin, 0, 0xffff, HOSTB, 0xb2);
        enable(&a1_admin);
        enable(&a2_admin);
        enable(&b_admin);
        host_connect(&a1_io, 1, a1_admin.ctrl->cntlid, HOSTA, 0xa1);
        host_connect(&a2_io, 1, a2_admin.ctrl->cntlid, HOSTA, 0xa1);
        host_connect(&b_io, 1, b_admin.ctrl->cntlid, HOSTB, 0xb2);
        struct nvme_queue *qs[] = {&a1_admin, &a1_io, &a2_admin, &a2_io, &b_admin, &b_io};
        for (unsigned i = 0; i < 6; i++)
                qs[i]->check_xfer = check_xfer;
        return 0;
}

/* One reservation command, parsed and (when parse says so) executed in place. */
static uint16_t resv(struct nvme_queue *q, uint8_t opc, uint32_t cdw10, uint64_t k1, uint64_t k2,
                     uint32_t len)
{
        struct nvme_cmd c;
        sqe_init(&c, q, opc, 1);
        cdw(&c, 10, cdw10);
        slate_put_le(c.sqe + 32, 4, len);
        slate_put_le(buf, 8, k1);
        slate_put_le(buf + 8, 8, k2);
        if (nvme_cmd_parse(&c) == NVME_PARSE_EXEC) {
                nvme_resv_do(&c);
                core_ns_put(c.ns);
        }
        return st(&c);
}
static uint16_t reg(struct nvme_queue *q, uint32_t cdw10, uint64_t crkey, uint64_t nrkey)
{
        return resv(q, NVME_IO_RESV_REGISTER, cdw10, crkey, nrkey, 16);
}
static uint16_t acq(struct nvme_queue *q, uint32_t act, uint32_t rtype, uint64_t crkey,
                    uint64_t prkey)
{
        return resv(q, NVME_IO_RESV_ACQUIRE, act | rtype << 8, crkey, prkey, 16);
}
static uint16_t rel(struct nvme_queue *q, uint32_t act, uint32_t rtype, uint64_t crkey)
{
        return resv(q, NVME_IO_RESV_RELEASE, act | rtype << 8, crkey, 0, 8);
}

/* Reservation Report (EDS) into buf; returns status. */
static uint16_t report(struct nvme_queue *q, uint32_t numd, bool eds)
{
        struct nvme_cmd c;
        sqe_init(&c, q, NVME_IO_RESV_REPORT, 1);
        cdw(&c, 10, numd - 1);
        cdw(&c, 11, eds);
        slate_put_le(c.sqe + 32, 4, numd * 4);
        nvme_cmd_parse(&c);
        return st(&c);
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

/* A one-block Read or Write through the core (on the reactor). */
static uint16_t io(struct nvme_queue *q, uint8_t opc)
{
        static struct nvme_cmd c;
        sqe_init(&c, q, opc, 1);
        c.done = on_done;
        cdw(&c, 10, 3);
        slate_put_le(c.sqe + 32, 4, 4096);
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

static void test_malformed(void **s)
{
        (void)s;
        const uint16_t inval = ST(0, NVME_SC_INVALID_FIELD);
        assert_int_equal(reg(&a1_io, 3, 0, 1), inval);                    /* RREGA 3 */
        assert_int_equal(reg(&a1_io, 1u << 30, 0, 1), inval);             /* CPTPL 01b */
        assert_int_equal(reg(&a1_io, 0, 0, 0), inval);                    /* NRKEY 0 */
        assert_int_equal(acq(&a1_io, 0, 0, 1, 0), inval);                 /* RTYPE 0 */
        assert_int_equal(acq(&a1_io, 0, 7, 1, 0), inval);                 /* RTYPE 7 */
        assert_int_equal(acq(&a1_io, 3, 1, 1, 0), inval);                 /* RACQA 3 */
        assert_int_equal(acq(&a1_io, 1u << 3, 1, 1, 0), inval);           /* IEKEY */
        assert_int_equal(rel(&a1_io, 2, 1, 1), inval);                    /* RRELA 2 */
        assert_int_equal(rel(&a1_io, 0, 9, 1), inval);                    /* RTYPE 9 */
        assert_int_equal(rel(&a1_io, 1u << 3, 1, 1), inval);              /* IEKEY */
        assert_int_equal(resv(&a1_io, NVME_IO_RESV_REGISTER, 0, 0, 1, 8), /* short data */
                         ST(0, NVME_SC_SGL_INVALID_DATA_LEN));
        assert_int_equal(resv(&a1_io, NVME_IO_RESV_RELEASE, 1, 0, 0, 16),
                         ST(0, NVME_SC_SGL_INVALID_DATA_LEN));
        assert_int_equal(report(&a1_io, 16, false), ST(0, NVME_SC_HOSTID_INCONSISTENT));
        struct nvme_cmd c;
        sqe_init(&c, &a1_io, NVME_IO_RESV_ACQUIRE, 9); /* no such namespace */
        cdw(&c, 10, 1u << 8);
        slate_put_le(c.sqe + 32, 4, 16);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_NS));
        /* Nothing of that changed the state. */
        assert_int_equal(report(&a1_io, 16, true), 0);
        assert_int_equal(buf[5], 0);
}

static void test_register_acquire_conflict(void **s)
{
        (void)s;
        const uint16_t conflict = ST(0, NVME_SC_RESERVATION_CONFLICT);
        assert_int_equal(reg(&a1_io, 0, 0, 0xa), 0);
        assert_int_equal(reg(&a2_io, 0, 0, 0xa), 0);        /* the same host, the same key */
        assert_int_equal(reg(&a2_io, 0, 0, 0xc), conflict); /* the same host, another key */
        assert_int_equal(reg(&b_io, 1, 0xb, 0), conflict);  /* unregister, not registered */
        assert_int_equal(reg(&b_io, 2, 0, 0xb), conflict);  /* replace, not registered */
        assert_int_equal(acq(&b_io, 0, 1, 0xb, 0), conflict);
        assert_int_equal(acq(&a1_io, 0, 1, 0xbad, 0), conflict); /* wrong key */
        assert_int_equal(acq(&a1_io, 0, 1, 0xa, 0), 0);          /* Write Exclusive */
        assert_int_equal(acq(&a2_io, 0, 2, 0xa, 0), conflict);   /* holder, other type */

        /* Writes from B fail in the core; reads pass; the holder host writes (any controller). */
        assert_int_equal(io(&b_io, NVME_IO_WRITE), conflict);
        assert_int_equal(io(&b_io, NVME_IO_READ), 0);
        assert_int_equal(io(&a2_io, NVME_IO_WRITE), 0);
        struct nvme_cmd c;
        sqe_init(&c, &b_io, NVME_IO_DSM, 1);
        slate_put_le(c.sqe + 32, 4, 16);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_DONE);
        assert_int_equal(st(&c), conflict);

        /* Report: one registrant (host A), holding Write Exclusive. */
        assert_int_equal(report(&b_io, 64, true), 0);
        const struct nvme_resv_status_ext *h = (const void *)buf;
        const struct nvme_resv_ctrl_ext *e = (const void *)(buf + 64);
        assert_int_equal(h->rtype, 1);
        assert_int_equal(slate_get_le(h->regctl, 2), 1);
        assert_int_equal(get_le16(&e[0].cntlid), 0xffff);
        assert_int_equal(e[0].rcsts, 1);
        assert_int_equal(get_le64(&e[0].rkey), 0xa);
        assert_int_equal(e[0].hostid[0], 0xa1);
        assert_int_equal(e[0].hostid[15], 0xa1);

        /* Release with another type: Invalid Field; with the right one it goes. */
        assert_int_equal(rel(&a1_io, 0, 2, 0xa), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(rel(&a1_io, 0, 1, 0xa), 0);
        assert_int_equal(io(&b_io, NVME_IO_WRITE), 0);
        assert_int_equal(rel(&a1_io, 1, 0, 0xa), 0); /* clear */
}

static uint64_t log80(struct nvme_queue *admin, uint8_t *type, uint8_t *nalp, uint32_t *nsid)
{
        struct nvme_cmd c;
        sqe_init(&c, admin, NVME_ADM_GET_LOG_PAGE, 0xffffffffu);
        cdw(&c, 10, NVME_LOG_RESV_NOTIFY | (15u << 16));
        slate_put_le(c.sqe + 32, 4, 64);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvme_resv_notify_log *l = (const void *)buf;
        *type = l->type;
        *nalp = l->nalp;
        *nsid = get_le32(&l->nsid);
        return get_le64(&l->count);
}

static void test_preempt_notification(void **s)
{
        (void)s;
        uint8_t type, nalp;
        uint32_t nsid;
        assert_int_equal(reg(&a1_io, 0, 0, 0xa), 0);
        assert_int_equal(acq(&a1_io, 0, 1, 0xa, 0), 0);
        assert_int_equal(reg(&b_io, 0, 0, 0xb), 0);
        /* Preempt with the wrong own key: conflict; with PRKEY 0 on WE: Invalid Field. */
        assert_int_equal(acq(&b_io, 2, 2, 0xbad, 0xa), ST(0, NVME_SC_RESERVATION_CONFLICT));
        assert_int_equal(acq(&b_io, 2, 2, 0xb, 0), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(acq(&b_io, 2, 2, 0xb, 0xa), 0); /* preempt and abort, EA */
        /* Both controllers of host A hear "registration preempted" for NSID 1, B does not. */
        assert_int_not_equal(log80(&a1_admin, &type, &nalp, &nsid), 0);
        assert_int_equal(type, NVME_RESV_LOG_REG_PREEMPTED);
        assert_int_equal(nsid, 1);
        assert_int_equal(nalp, 0);
        assert_int_equal(log80(&a1_admin, &type, &nalp, &nsid), 0); /* consumed */
        assert_int_not_equal(log80(&a2_admin, &type, &nalp, &nsid), 0);
        assert_int_equal(log80(&b_admin, &type, &nalp, &nsid), 0);
        /* A lost its registration: its reads now conflict with Exclusive Access. */
        assert_int_equal(io(&a1_io, NVME_IO_READ), ST(0, NVME_SC_RESERVATION_CONFLICT));
        assert_int_equal(reg(&a1_io, 1, 0xa, 0), ST(0, NVME_SC_RESERVATION_CONFLICT));

        /* Feature 82h masks it: A registers again, B preempts, nothing is queued. */
        struct nvme_cmd c;
        sqe_init(&c, &a1_admin, NVME_ADM_SET_FEATURES, 1);
        cdw(&c, 10, NVME_FEAT_RESV_MASK);
        cdw(&c, 11, NVME_RESV_MASK_REGPRE);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        sqe_init(&c, &a1_admin, NVME_ADM_GET_FEATURES, 1);
        cdw(&c, 10, NVME_FEAT_RESV_MASK);
        nvme_cmd_parse(&c);
        assert_int_equal(slate_get_le(c.cqe, 4), NVME_RESV_MASK_REGPRE);
        sqe_init(&c, &a1_admin, NVME_ADM_SET_FEATURES, 1);
        cdw(&c, 10, NVME_FEAT_RESV_MASK);
        cdw(&c, 11, 1); /* reserved bit */
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(reg(&a1_io, 0, 0, 0xa), 0);
        assert_int_equal(acq(&b_io, 1, 2, 0xb, 0xa), 0);
        assert_int_equal(log80(&a1_admin, &type, &nalp, &nsid), 0);
        (void)log80(&a2_admin, &type, &nalp, &nsid); /* a2 has no mask */
        assert_int_equal(type, NVME_RESV_LOG_REG_PREEMPTED);
        assert_int_equal(rel(&b_io, 1, 0, 0xb), 0);
}

static void test_scsi_registrant_and_ptpl(void **s)
{
        (void)s;
        /* An iSCSI initiator registers and reserves Write Exclusive through the core. */
        struct core_pr_nexus scsi = {.initiator = "iqn.1994-05.com.example:h,i,0x230000000001",
                                     .target = "iqn.2026-12.io.slate:t,t,0x0001"};
        struct core_pr_cmd c = {.action = CORE_PR_REGISTER, .sa_key = 0x5c5};
        assert_int_equal(core_ns_pr_out(ns, &scsi, &c, NULL), CORE_OK);
        c = (struct core_pr_cmd){
            .action = CORE_PR_RESERVE, .key = 0x5c5, .type = CORE_PR_WRITE_EXCLUSIVE};
        assert_int_equal(core_ns_pr_out(ns, &scsi, &c, NULL), CORE_OK);
        /* The NVMe host sees it in the report, with a stable stand-in host identifier. */
        assert_int_equal(report(&a1_io, 32, true), 0);
        const struct nvme_resv_status_ext *h = (const void *)buf;
        const struct nvme_resv_ctrl_ext *e = (const void *)(buf + 64);
        assert_int_equal(h->rtype, 1);
        assert_int_equal(slate_get_le(h->regctl, 2), 1);
        assert_int_equal(get_le64(&e[0].rkey), 0x5c5);
        assert_int_equal(e[0].rcsts, 1);
        uint8_t id[16], zero[16] = {0};
        memcpy(id, e[0].hostid, 16);
        assert_memory_not_equal(id, zero, 16);
        assert_int_equal(report(&a1_io, 32, true), 0);
        assert_memory_equal(id, e[0].hostid, 16);
        /* ... and its writes fail. */
        assert_int_equal(io(&a1_io, NVME_IO_WRITE), ST(0, NVME_SC_RESERVATION_CONFLICT));
        /* A short report is truncated, not refused. */
        assert_int_equal(report(&a1_io, 4, true), 0);

        /* Feature 83h: PTPL is the namespace's APTPL, and Register's CPTPL sets it too. */
        struct nvme_cmd f;
        sqe_init(&f, &b_admin, NVME_ADM_SET_FEATURES, 1);
        cdw(&f, 10, NVME_FEAT_RESV_PERSIST);
        cdw(&f, 11, 1);
        nvme_cmd_parse(&f);
        assert_int_equal(st(&f), 0);
        assert_true(ns->pr.aptpl);
        sqe_init(&f, &a1_admin, NVME_ADM_GET_FEATURES, 1);
        cdw(&f, 10, NVME_FEAT_RESV_PERSIST);
        nvme_cmd_parse(&f);
        assert_int_equal(slate_get_le(f.cqe, 4), 1);
        assert_int_equal(reg(&b_io, 2u << 30, 0, 0xb), 0); /* CPTPL 10b: clear PTPL */
        assert_false(ns->pr.aptpl);
        sqe_init(&f, &a1_admin, NVME_ADM_GET_FEATURES, 7); /* no such namespace */
        cdw(&f, 10, NVME_FEAT_RESV_PERSIST);
        nvme_cmd_parse(&f);
        assert_int_equal(st(&f), ST(0, NVME_SC_INVALID_NS));

        c = (struct core_pr_cmd){.action = CORE_PR_CLEAR, .key = 0x5c5};
        assert_int_equal(core_ns_pr_out(ns, &scsi, &c, NULL), CORE_OK);
        assert_int_equal(io(&a1_io, NVME_IO_WRITE), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_malformed),
            cmocka_unit_test(test_register_acquire_conflict),
            cmocka_unit_test(test_preempt_notification),
            cmocka_unit_test(test_scsi_registrant_and_ptpl),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
