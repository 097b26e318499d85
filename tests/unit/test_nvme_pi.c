/*
 * Protection information in the NVMe personality (nvme/pi.c, issue 10):
 * the LBA formats in Identify Namespace and the NVM Command Set Identify
 * Namespace (ELBAF), Format NVM's checks and statuses, PRINFO and the
 * reference/application tags of the I/O commands as struct core_req.pi
 * and the transfer length with metadata, and, through the core's data
 * path, writes and reads with PRACT and PRCHK and the end-to-end check
 * errors (2h/82h-84h), and Copy on a namespace with PI (PRINFOR with the
 * entry's tags, PRINFOW with the command's, Invalid Protection
 * Information, the check errors, STCW refused).
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
#include "core/pi.h"
#include "nvme/internal.h"
#include "rt/reactor.h"

#define SUBNQN  "nqn.2024-01.io.slate:pi"
#define HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-666666666666"
#define BUFLEN  (2 * CORE_MAX_TRANSFER_BYTES)
#define BS      4096u

static char state_dir[64];
static struct core_ns *ns;
static uint8_t *buf;
static struct nvme_queue admin_q, io_q;

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
        c->sqe[0] = opc;
        c->sqe[1] = 0x40;
        slate_put_le(c->sqe + 2, 2, 0x1234);
        slate_put_le(c->sqe + 4, 4, nsid);
        c->sqe[39] = 0x5a;
}
static void cdw(struct nvme_cmd *c, int n, uint32_t v)
{
        slate_put_le(c->sqe + 4 * n, 4, v);
}
static void sgl_len(struct nvme_cmd *c, uint32_t len)
{
        slate_put_le(c->sqe + 32, 4, len);
}

static uint16_t do_connect(struct nvme_queue *q, uint16_t qid, uint16_t cntlid, uint32_t *res)
{
        struct nvme_cmd c;
        sqe_init(&c, q, NVME_OPC_FABRICS, 0);
        c.sqe[4] = NVMF_FCTYPE_CONNECT;
        c.sqe[39] = 0x01;
        sgl_len(&c, 1024);
        slate_put_le(c.sqe + 42, 2, qid);
        slate_put_le(c.sqe + 44, 2, 31);
        c.icd_len = 1024;
        struct nvmf_connect_data *d = (struct nvmf_connect_data *)buf;
        memset(d, 0, sizeof(*d));
        d->hostid[0] = 0xcd;
        put_le16(&d->cntlid, cntlid);
        snprintf(d->subnqn, sizeof(d->subnqn), "%s", SUBNQN);
        snprintf(d->hostnqn, sizeof(d->hostnqn), "%s", HOSTNQN);
        if (nvme_cmd_parse(&c) == NVME_PARSE_EXEC)
                nvmf_connect_do(&c);
        if (res)
                *res = (uint32_t)slate_get_le(c.cqe, 4);
        return st(&c);
}

static int setup(void **s)
{
        (void)s;
        char err[256];
        snprintf(state_dir, sizeof(state_dir), "/tmp/slate-test-nvmepi-XXXXXX");
        if (!mkdtemp(state_dir))
                return -1;
        core_set_state_dir(state_dir);
        if (rt_init(1) || rt_start())
                return -1;
        buf = aligned_alloc(4096, BUFLEN);
        struct core_ns_params p = {
            .name = "pit", .backend = "mem", .size_bytes = 64 << 20, .block_size = BS};
        if (core_ns_create(&p, &ns, err, sizeof(err)))
                return -1;
        if (nvme_subsys_add(SUBNQN, "SNPI", "Slate Test", err, sizeof(err)))
                return -1;
        if (nvme_ns_attach(SUBNQN, 1, "pit", err, sizeof(err)) != 1)
                return -1;
        if (nvme_subsys_allow_host(SUBNQN, HOSTNQN, err, sizeof(err)))
                return -1;
        uint32_t cntlid;
        if (do_connect(&admin_q, 0, 0xffff, &cntlid))
                return -1;
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_OPC_FABRICS, 0);
        c.sqe[4] = NVMF_FCTYPE_PROPERTY_SET;
        slate_put_le(c.sqe + 44, 4, NVME_REG_CC);
        slate_put_le(c.sqe + 48, 8, 1 | (6 << 16) | (4 << 20));
        nvme_cmd_parse(&c);
        if (st(&c) || do_connect(&io_q, 1, (uint16_t)cntlid, NULL))
                return -1;
        return 0;
}

/* ---- Running commands on the reactor ---- */

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

/* Parse c; when it is to be executed, do so on the reactor and wait. */
static uint16_t run(struct nvme_cmd *c)
{
        c->reactor = rt_get(0);
        c->done = on_done;
        if (nvme_cmd_parse(c) == NVME_PARSE_DONE)
                return st(c);
        w.done = false;
        rt_msg_send(rt_get(0), exec_fn, c);
        pthread_mutex_lock(&w.m);
        while (!w.done)
                pthread_cond_wait(&w.cv, &w.m);
        pthread_mutex_unlock(&w.m);
        return st(c);
}

static uint16_t format(unsigned lbaf, unsigned pi, bool pil, bool mset, unsigned ses)
{
        static struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_FORMAT_NVM, 1);
        cdw(&c, 10,
            (lbaf & 0xf) | (mset ? 1u << 4 : 0) | (pi << 5) | (pil ? 1u << 8 : 0) | (ses << 9) |
                ((lbaf >> 4) << 12));
        return run(&c);
}

/* An I/O command: nlb blocks at lba, CDW12 flags (PRINFO...), tags, SGL length len. */
static void io_cmd(struct nvme_cmd *c, uint8_t opc, uint64_t lba, uint32_t nlb, uint32_t flags,
                   uint64_t ref, uint16_t app, uint16_t mask, uint32_t len)
{
        sqe_init(c, &io_q, opc, 1);
        cdw(c, 10, (uint32_t)lba);
        cdw(c, 11, (uint32_t)(lba >> 32));
        cdw(c, 12, (nlb - 1) | flags);
        cdw(c, 14, (uint32_t)ref);
        cdw(c, 3, (uint32_t)(ref >> 32));
        cdw(c, 15, app | ((uint32_t)mask << 16));
        sgl_len(c, len);
}

#define PRACT     (1u << 29)
#define PRCHK_G   (1u << 28)
#define PRCHK_A   (1u << 27)
#define PRCHK_R   (1u << 26)
#define PRCHK_ALL (PRCHK_G | PRCHK_A | PRCHK_R)

/*
 * Set the namespace's format behind the core's back, for the parse-only
 * tests (nothing is executed with it): the seqcount core_ns_pi_fmt reads.
 */
static void force_fmt(uint16_t ms, unsigned type, unsigned guard, unsigned sts, bool first)
{
        atomic_fetch_add(&ns->pi_gen, 1);
        ns->pi = (struct core_pi_fmt){.block_size = BS,
                                      .md_size = ms,
                                      .type = (uint8_t)type,
                                      .guard = (uint8_t)guard,
                                      .sts = (uint8_t)sts,
                                      .pi_first = first};
        atomic_fetch_add(&ns->pi_gen, 1);
}

static const struct nvme_id_ns *identify_ns(void)
{
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 1);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_NS);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        return (const struct nvme_id_ns *)buf;
}

static void test_identify_formats(void **s)
{
        (void)s;
        unsigned n = core_pi_have_crc64() ? 5 : 4;
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 0);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CTRL);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        const struct nvme_id_ctrl *id = (const struct nvme_id_ctrl *)buf;
        assert_true(get_le32(&id->ctratt) & NVME_CTRATT_ELBAS);
        assert_true(get_le16(&id->oacs) & NVME_OACS_FORMAT);
        assert_int_equal(id->fna, 0);

        const struct nvme_id_ns *idn = identify_ns();
        assert_int_equal(idn->nlbaf, n - 1);
        assert_int_equal(idn->flbas, 0); /* no metadata now: format 0, not extended */
        assert_int_equal(idn->mc, 0x01); /* extended LBAs only */
        assert_int_equal(idn->dpc, 0x1f);
        assert_int_equal(idn->dps, 0);
        static const uint16_t ms[] = {0, 8, 16, 16, 16};
        for (unsigned i = 0; i < n; i++) {
                assert_int_equal(get_le16(&idn->lbaf[i].ms), ms[i]);
                assert_int_equal(idn->lbaf[i].lbads, 12);
        }
        assert_int_equal(get_le16(&idn->lbaf[n].ms), 0);
        assert_int_equal(idn->lbaf[n].lbads, 0);

        /* CNS 05h: ELBAF STS 6:0, PIF 8:7. */
        sqe_init(&c, &admin_q, NVME_ADM_IDENTIFY, 1);
        sgl_len(&c, 4096);
        cdw(&c, 10, NVME_CNS_CSI_NS);
        cdw(&c, 11, (uint32_t)NVME_CSI_NVM << 24);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(slate_get_le(buf, 8), 0); /* LBSTM */
        assert_int_equal(buf[8], 0);               /* PIC */
        assert_int_equal(slate_get_le(buf + 12 + 4 * 1, 4), 0);
        assert_int_equal(slate_get_le(buf + 12 + 4 * 2, 4), 0);
        assert_int_equal(slate_get_le(buf + 12 + 4 * 3, 4), 16 | (1u << 7));
        if (n == 5)
                assert_int_equal(slate_get_le(buf + 12 + 4 * 4, 4), 2u << 7);

        /* The effects log: Format NVM changes contents and capabilities, per namespace. */
        sqe_init(&c, &admin_q, NVME_ADM_GET_LOG_PAGE, 0);
        cdw(&c, 10, NVME_LOG_CMD_EFFECTS | (255u << 16));
        sgl_len(&c, 1024);
        nvme_cmd_parse(&c);
        assert_int_equal(st(&c), 0);
        assert_int_equal(slate_get_le(buf + 4 * NVME_ADM_FORMAT_NVM, 4),
                         NVME_EFFECTS_CSUPP | NVME_EFFECTS_LBCC | NVME_EFFECTS_NCC |
                             (1u << NVME_EFFECTS_CSE_SHIFT));

        /* The current format as FLBAS/DPS say it: 16b guard PI first in 16 bytes, type 2. */
        force_fmt(16, 2, CORE_PI_GUARD_CRC16, 0, true);
        idn = identify_ns();
        assert_int_equal(idn->flbas, 0x10 | 2);
        assert_int_equal(idn->dps, 2 | 0x08);
        force_fmt(16, 1, CORE_PI_GUARD_CRC32C, 16, false);
        idn = identify_ns();
        assert_int_equal(idn->flbas, 0x10 | 3);
        assert_int_equal(idn->dps, 1);
        force_fmt(0, 0, 0, 0, false);
}

static void test_format_rejects(void **s)
{
        (void)s;
        unsigned n = core_pi_have_crc64() ? 5 : 4;
        /* An LBA format not offered, metadata in a separate buffer, PI without metadata,
         * a PI type beyond 3: Invalid Format (Command Specific 0Ah). */
        assert_int_equal(format(n, 0, false, true, 0), ST(1, NVME_SC_INVALID_FORMAT));
        assert_int_equal(format(16, 0, false, true, 0), ST(1, NVME_SC_INVALID_FORMAT));
        assert_int_equal(format(1, 1, false, false, 0), ST(1, NVME_SC_INVALID_FORMAT));
        assert_int_equal(format(0, 1, false, true, 0), ST(1, NVME_SC_INVALID_FORMAT));
        assert_int_equal(format(1, 4, false, true, 0), ST(1, NVME_SC_INVALID_FORMAT));
        /* Secure erase settings: Invalid Field. */
        assert_int_equal(format(1, 1, false, true, 1), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(format(1, 1, false, true, 2), ST(0, NVME_SC_INVALID_FIELD));
        /* No broadcast, no inactive NSID. */
        struct nvme_cmd c;
        sqe_init(&c, &admin_q, NVME_ADM_FORMAT_NVM, 0xffffffffu);
        cdw(&c, 10, 0);
        assert_int_equal(run(&c), ST(0, NVME_SC_INVALID_NS));
        sqe_init(&c, &admin_q, NVME_ADM_FORMAT_NVM, 2);
        assert_int_equal(run(&c), ST(0, NVME_SC_INVALID_NS));
        /* Nothing changed. */
        assert_int_equal(core_ns_md_per_block(ns), 0);
}

static void test_prinfo_parse(void **s)
{
        (void)s;
        struct nvme_cmd c;
        /* No protection information: PRACT/PRCHK are Invalid Field. */
        io_cmd(&c, NVME_IO_READ, 0, 1, PRACT, 0, 0, 0, BS);
        assert_int_equal(run(&c), ST(0, NVME_SC_INVALID_FIELD));
        io_cmd(&c, NVME_IO_WRITE, 0, 1, PRCHK_G, 0, 0, 0, BS);
        assert_int_equal(run(&c), ST(0, NVME_SC_INVALID_FIELD));

        /* Type 1, 8-byte PI.  PRACT: data only, the core strips/inserts. */
        force_fmt(8, 1, CORE_PI_GUARD_CRC16, 0, false);
        io_cmd(&c, NVME_IO_READ, 100, 2, PRACT | PRCHK_G | PRCHK_R, 100, 0, 0, 2 * BS);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.data_len, 2 * BS);
        assert_false(c.req.pi.host_md);
        assert_int_equal(c.req.pi.chk, CORE_PI_CHK_GUARD | CORE_PI_CHK_REF);
        assert_int_equal(c.req.pi.ref, 100);
        assert_int_equal(c.req.iov[0].iov_len, 2 * BS);
        core_ns_put(c.ns);
        /* Without PRACT: extended LBAs, 4104 bytes a block; the data pointer must say so. */
        io_cmd(&c, NVME_IO_READ, 100, 2, PRCHK_A, 7, 0xbeef, 0xff00, 2 * (BS + 8));
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.data_len, 2 * (BS + 8));
        assert_true(c.req.pi.host_md);
        assert_int_equal(c.req.pi.chk, CORE_PI_CHK_APP);
        assert_int_equal(c.req.pi.app, 0xbeef);
        assert_int_equal(c.req.pi.app_mask, 0xff00);
        core_ns_put(c.ns);
        /* Type 1 with a reference tag check: ILBRT must be the LBA's low 32 bits (181h). */
        io_cmd(&c, NVME_IO_READ, 100, 1, PRCHK_R, 101, 0, 0, BS + 8);
        assert_int_equal(run(&c), ST(1, NVME_SC_INVALID_PI));
        io_cmd(&c, NVME_IO_READ, 0x100000064ull, 1, PRCHK_R, 100, 0, 0, BS + 8);
        assert_int_equal(run(&c), ST(0, NVME_SC_LBA_RANGE)); /* beyond the end first */
        /* Write with PRACT: the controller generates (LBA for type 1, LBAT); nothing checked. */
        io_cmd(&c, NVME_IO_WRITE, 5, 3, PRACT | PRCHK_ALL, 5, 0x1234, 0xffff, 3 * BS);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_true(c.h2c);
        assert_int_equal(c.data_len, 3 * BS);
        assert_true(c.req.pi.gen);
        assert_int_equal(c.req.pi.chk, 0);
        assert_int_equal(c.req.pi.gen_ref, 5);
        assert_int_equal(c.req.pi.gen_app, 0x1234);
        core_ns_put(c.ns);
        /* Write without PRACT: checks what the host sent. */
        io_cmd(&c, NVME_IO_WRITE, 5, 1, PRCHK_ALL, 5, 0x1234, 0xffff, BS + 8);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_true(c.req.pi.host_md);
        assert_false(c.req.pi.gen);
        assert_int_equal(c.req.pi.chk, CORE_PI_CHK_GUARD | CORE_PI_CHK_APP | CORE_PI_CHK_REF);
        core_ns_put(c.ns);
        /* A data pointer for the data alone is the wrong length for extended LBAs. */
        io_cmd(&c, NVME_IO_WRITE, 5, 1, 0, 0, 0, 0, BS);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.data_len, BS + 8); /* the transport refuses the SGL (tcp.c) */
        core_ns_put(c.ns);
        /* MDTS counts the metadata: 32 MiB of data plus 8 bytes a block is too much. */
        io_cmd(&c, NVME_IO_WRITE, 0, CORE_MAX_TRANSFER_BYTES / BS, 0, 0, 0, 0,
               CORE_MAX_TRANSFER_BYTES + 8 * (CORE_MAX_TRANSFER_BYTES / BS));
        assert_int_equal(run(&c), ST(0, NVME_SC_INVALID_FIELD));
        /* ...but with PRACT it is data only and fits. */
        io_cmd(&c, NVME_IO_WRITE, 0, CORE_MAX_TRANSFER_BYTES / BS, PRACT, 0, 0, 0,
               CORE_MAX_TRANSFER_BYTES);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        core_ns_put(c.ns);
        /* Storage tag checking is not supported (PIC.STCRS 0). */
        io_cmd(&c, NVME_IO_READ, 0, 1, 1u << 24, 0, 0, 0, BS + 8);
        assert_int_equal(run(&c), ST(0, NVME_SC_INVALID_FIELD));
        /* Verify and Write Zeroes: no data, the checks/generation still go to the core. */
        io_cmd(&c, NVME_IO_VERIFY, 9, 4, PRCHK_G | PRCHK_R, 9, 0, 0, 0);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.data_len, 0);
        assert_false(c.req.pi.host_md);
        assert_int_equal(c.req.pi.chk, CORE_PI_CHK_GUARD | CORE_PI_CHK_REF);
        core_ns_put(c.ns);
        io_cmd(&c, NVME_IO_WRITE_ZEROES, 9, 4, PRACT, 9, 0x55, 0, 0);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_true(c.req.pi.gen);
        assert_int_equal(c.req.pi.gen_ref, 9);
        assert_int_equal(c.req.pi.gen_app, 0x55);
        core_ns_put(c.ns);
        /* Compare with PRACT: data only. */
        static uint8_t scratch[CORE_SMALL_TRANSFER_BYTES];
        io_cmd(&c, NVME_IO_COMPARE, 9, 2, PRACT | PRCHK_G, 0, 0, 0, 2 * BS);
        c.scratch = scratch;
        c.scratch_len = sizeof(scratch);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.data_len, 2 * BS);
        assert_int_equal(c.req.pi.chk, CORE_PI_CHK_GUARD);
        core_ns_put(c.ns);

        /* Type 3: the reference tag is not checked (and ILBRT not compared with the LBA). */
        force_fmt(8, 3, CORE_PI_GUARD_CRC16, 0, false);
        io_cmd(&c, NVME_IO_READ, 100, 1, PRCHK_ALL, 12345, 0, 0, BS + 8);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.req.pi.chk, CORE_PI_CHK_GUARD | CORE_PI_CHK_APP);
        core_ns_put(c.ns);
        /* Type 2: ILBRT is the host's, generated from it. */
        force_fmt(8, 2, CORE_PI_GUARD_CRC16, 0, false);
        io_cmd(&c, NVME_IO_WRITE, 100, 1, PRACT, 0xabcdef01, 0, 0, BS);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.req.pi.gen_ref, 0xabcdef01);
        core_ns_put(c.ns);

        /* 16b guard in 16 bytes of metadata: PRACT still moves the metadata (it is not only PI). */
        force_fmt(16, 1, CORE_PI_GUARD_CRC16, 0, true);
        io_cmd(&c, NVME_IO_READ, 3, 2, PRACT, 3, 0, 0, 2 * (BS + 16));
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_true(c.req.pi.host_md);
        assert_int_equal(c.data_len, 2 * (BS + 16));
        core_ns_put(c.ns);
        /* 16b guard: CDW3 is not part of the reference tag. */
        io_cmd(&c, NVME_IO_READ, 3, 1, PRCHK_R, 3 | (7ull << 32), 0, 0, BS + 16);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.req.pi.ref, 3);
        core_ns_put(c.ns);

        /* 32b guard, STS 16: a 64-bit reference tag from CDW3:CDW14; PRACT moves data only. */
        force_fmt(16, 1, CORE_PI_GUARD_CRC32C, 16, false);
        io_cmd(&c, NVME_IO_READ, 3, 1, PRCHK_R, 3 | (1ull << 32), 0, 0, BS + 16);
        assert_int_equal(run(&c), ST(1, NVME_SC_INVALID_PI));
        io_cmd(&c, NVME_IO_READ, 3, 1, PRACT | PRCHK_R, 3, 0, 0, BS);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_false(c.req.pi.host_md);
        assert_int_equal(c.data_len, BS);
        core_ns_put(c.ns);
        io_cmd(&c, NVME_IO_WRITE, 3, 1, PRACT, 0x1122334455667788ull, 0, 0, BS);
        force_fmt(16, 2, CORE_PI_GUARD_CRC32C, 16, false);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.req.pi.gen_ref, 0x1122334455667788ull);
        core_ns_put(c.ns);
        if (core_pi_have_crc64()) {
                /* 64b guard: 48-bit reference tag. */
                force_fmt(16, 2, CORE_PI_GUARD_CRC64, 0, false);
                io_cmd(&c, NVME_IO_READ, 3, 1, PRCHK_R, 0xffff123456789abcull, 0, 0, BS + 16);
                assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
                assert_int_equal(c.req.pi.ref, 0x123456789abcull);
                core_ns_put(c.ns);
        }
        /* Metadata without protection information: extended LBAs, PRINFO refused. */
        force_fmt(8, 0, CORE_PI_GUARD_CRC16, 0, false);
        io_cmd(&c, NVME_IO_READ, 0, 1, 0, 0, 0, 0, BS + 8);
        assert_int_equal(nvme_cmd_parse(&c), NVME_PARSE_EXEC);
        assert_int_equal(c.data_len, BS + 8);
        core_ns_put(c.ns);
        io_cmd(&c, NVME_IO_READ, 0, 1, PRACT, 0, 0, 0, BS);
        assert_int_equal(run(&c), ST(0, NVME_SC_INVALID_FIELD));
        force_fmt(0, 0, 0, 0, false);
}

/* Read-modify helpers for the data path tests: an I/O with its data in buf. */
static uint16_t io(uint8_t opc, uint64_t lba, uint32_t nlb, uint32_t flags, uint64_t ref,
                   uint16_t app, uint16_t mask, uint32_t len)
{
        static struct nvme_cmd c;
        io_cmd(&c, opc, lba, nlb, flags, ref, app, mask, len);
        return run(&c);
}

static struct nvme_cmd cio;

/*
 * Copy (19h) format 0h of one range: nlb blocks from slba to sdlba; PRINFOR with the
 * entry's ELBT, ELBAT, ELBATM; PRINFOW (CDW12 bits 29:26, given as the Read/Write
 * PRINFO bits) with ILBRT, LBAT, LBATM.
 */
static void copy_sqe(struct nvme_cmd *c, uint64_t sdlba, uint64_t slba, uint32_t nlb,
                     uint32_t prinfor, uint32_t elbt, uint16_t elbat, uint16_t elbatm,
                     uint32_t prinfow, uint32_t ilbrt, uint16_t lbat, uint16_t lbatm)
{
        io_cmd(c, NVME_IO_COPY, sdlba, 1, prinfow, ilbrt, lbat, lbatm, 32);
        cdw(c, 12, nvme_cdw(c, 12) | ((prinfor >> 26) << 12));
        memset(buf, 0, 32);
        slate_put_le(buf + 8, 8, slba);
        slate_put_le(buf + 16, 2, nlb - 1);
        slate_put_le(buf + 24, 4, elbt);
        slate_put_le(buf + 28, 2, elbat);
        slate_put_le(buf + 30, 2, elbatm);
}

static uint16_t copy_cmd(uint64_t sdlba, uint64_t slba, uint32_t nlb, uint32_t prinfor,
                         uint32_t elbt, uint16_t elbat, uint16_t elbatm, uint32_t prinfow,
                         uint32_t ilbrt, uint16_t lbat, uint16_t lbatm)
{
        copy_sqe(&cio, sdlba, slba, nlb, prinfor, elbt, elbat, elbatm, prinfow, ilbrt, lbat, lbatm);
        return run(&cio);
}

static void test_format_and_io(void **s)
{
        (void)s;
        const uint32_t ext = BS + 8;
        struct core_pi_fmt f = {.block_size = BS, .md_size = 8, .type = 1};
        /* A second controller (another host's view of the namespace). */
        static struct nvme_queue q2;
        memset(&q2, 0, sizeof(q2));
        assert_int_equal(do_connect(&q2, 0, 0xffff, NULL), 0);
        /* Format NVM: LBAF 1 (8 bytes), extended, type 1, PI last. */
        assert_int_equal(format(1, 1, false, true, 0), 0);
        assert_int_equal(core_ns_md_per_block(ns), 8);
        /* The other controller is told: NSID 1 in its Changed Namespace List; the
         * formatting one is not (its host knows). */
        pthread_mutex_lock(&q2.ctrl->lock);
        bool told = q2.ctrl->nchanged >= 1 && q2.ctrl->changed_ns[0] == 1;
        pthread_mutex_unlock(&q2.ctrl->lock);
        assert_true(told);
        assert_int_equal(admin_q.ctrl->nchanged, 0);
        nvme_queue_fini(&q2);
        const struct nvme_id_ns *idn = identify_ns();
        assert_int_equal(idn->flbas, 0x10 | 1);
        assert_int_equal(idn->dps, 1);

        /* PRACT write of data only: the controller generates guard, LBAT and the LBA. */
        for (uint32_t i = 0; i < 4 * BS; i++)
                buf[i] = (uint8_t)(i * 7 + 1);
        assert_int_equal(io(NVME_IO_WRITE, 40, 4, PRACT, 40, 0xa5a5, 0, 4 * BS), 0);
        /* Read it back as extended LBAs: the PI is what the engine computes. */
        memset(buf, 0, 4 * ext);
        assert_int_equal(io(NVME_IO_READ, 40, 4, PRCHK_ALL, 40, 0xa5a5, 0xffff, 4 * ext), 0);
        for (uint32_t b = 0; b < 4; b++) {
                const uint8_t *pi = buf + b * ext + BS;
                assert_int_equal(slate_get_be(pi, 2),
                                 core_pi_crc(CORE_PI_GUARD_CRC16, buf + b * ext, BS));
                assert_int_equal(slate_get_be(pi + 2, 2), 0xa5a5);
                assert_int_equal(slate_get_be(pi + 4, 4), 40 + b);
                assert_int_equal(buf[b * ext + 5], (uint8_t)((b * BS + 5) * 7 + 1));
        }
        /* PRACT read with every check: data only. */
        memset(buf, 0, 4 * BS);
        assert_int_equal(io(NVME_IO_READ, 40, 4, PRACT | PRCHK_ALL, 40, 0xa5a5, 0xffff, 4 * BS), 0);
        assert_int_equal(buf[3 * BS + 9], (uint8_t)((3 * BS + 9) * 7 + 1));
        /* Wrong expectations on read: application tag (83h), reference tag via a type 1
         * ILBRT mismatch (181h), and a masked application tag that passes. */
        assert_int_equal(io(NVME_IO_READ, 40, 4, PRACT | PRCHK_A, 40, 0xa5a4, 0xffff, 4 * BS),
                         ST(2, NVME_SC_APPTAG_CHECK));
        assert_int_equal(io(NVME_IO_READ, 40, 4, PRACT | PRCHK_A, 40, 0xa500, 0xff00, 4 * BS), 0);
        assert_int_equal(io(NVME_IO_READ, 40, 4, PRACT | PRCHK_R, 41, 0, 0, 4 * BS),
                         ST(1, NVME_SC_INVALID_PI));
        assert_int_equal(io(NVME_IO_VERIFY, 40, 4, PRCHK_ALL, 40, 0xa5a5, 0xffff, 0), 0);

        /* Host-generated PI (PRACT 0) with a wrong guard, tag or reference: refused,
         * nothing stored. */
        struct core_pi_tags t = {.ref = 60, .app = 0x1111};
        for (uint32_t i = 0; i < 2 * ext; i++)
                buf[i] = (uint8_t)(i ^ 0x3c);
        core_pi_generate(&f, (struct core_pi_buf){buf, NULL}, 2, &t);
        buf[ext + BS] ^= 0x01; /* block 1's guard */
        assert_int_equal(io(NVME_IO_WRITE, 60, 2, PRCHK_G, 60, 0, 0, 2 * ext),
                         ST(2, NVME_SC_GUARD_CHECK));
        core_pi_generate(&f, (struct core_pi_buf){buf, NULL}, 2, &t);
        assert_int_equal(io(NVME_IO_WRITE, 60, 2, PRCHK_A, 60, 0x2222, 0xffff, 2 * ext),
                         ST(2, NVME_SC_APPTAG_CHECK));
        t.ref = 61; /* off by one: the reference tags do not follow the LBAs */
        core_pi_generate(&f, (struct core_pi_buf){buf, NULL}, 2, &t);
        assert_int_equal(io(NVME_IO_WRITE, 60, 2, PRCHK_R, 60, 0, 0, 2 * ext),
                         ST(2, NVME_SC_REFTAG_CHECK));
        /* Unwritten blocks are the escape: any check passes, data zero. */
        memset(buf, 0xee, 2 * BS);
        assert_int_equal(io(NVME_IO_READ, 60, 2, PRACT | PRCHK_ALL, 60, 0x1111, 0xffff, 2 * BS), 0);
        assert_int_equal(buf[0], 0);
        /* And a good one is stored, with the host's tags. */
        t.ref = 60;
        core_pi_generate(&f, (struct core_pi_buf){buf, NULL}, 2, &t);
        for (uint32_t i = 0; i < 2 * ext; i++)
                if ((i % ext) < BS)
                        buf[i] = (uint8_t)(i ^ 0x3c);
        core_pi_generate(&f, (struct core_pi_buf){buf, NULL}, 2, &t);
        assert_int_equal(io(NVME_IO_WRITE, 60, 2, PRCHK_ALL, 60, 0x1111, 0xffff, 2 * ext), 0);
        assert_int_equal(io(NVME_IO_READ, 60, 2, PRACT | PRCHK_ALL, 60, 0x1111, 0xffff, 2 * BS), 0);
        assert_int_equal(buf[BS + 3], (uint8_t)((ext + 3) ^ 0x3c));
        /* Write Zeroes with PRACT: zero data that reads back with every check passing. */
        assert_int_equal(io(NVME_IO_WRITE_ZEROES, 60, 2, PRACT, 60, 0x7777, 0, 0), 0);
        assert_int_equal(io(NVME_IO_READ, 60, 2, PRACT | PRCHK_G, 60, 0, 0, 2 * BS), 0);
        assert_int_equal(buf[BS + 3], 0);

        /*
         * Copy (format 0h): LBAs 40-43 (PI generated above: ref 40.., app A5A5h) to 100.
         * The metadata moves, the type 1 reference tags become 100..; PRINFOR checks
         * against the entry's ELBT/ELBAT/ELBATM, PRINFOW against ILBRT/LBAT/LBATM.
         */
        assert_int_equal(
            copy_cmd(100, 40, 4, PRCHK_ALL, 40, 0xa5a5, 0xffff, PRCHK_ALL, 100, 0xa5a5, 0xffff), 0);
        assert_int_equal(io(NVME_IO_READ, 100, 4, PRACT | PRCHK_ALL, 100, 0xa5a5, 0xffff, 4 * BS),
                         0);
        assert_int_equal(buf[3 * BS + 9], (uint8_t)((3 * BS + 9) * 7 + 1));
        /* A type 1 ELBT or ILBRT that is not the LBA: Invalid Protection Information. */
        assert_int_equal(copy_cmd(100, 40, 4, PRCHK_R, 41, 0, 0, 0, 0, 0, 0),
                         ST(1, NVME_SC_INVALID_PI));
        assert_int_equal(copy_cmd(100, 40, 4, 0, 0, 0, 0, PRCHK_R, 101, 0, 0),
                         ST(1, NVME_SC_INVALID_PI));
        /* The source's application tag is not ELBAT: 83h, nothing copied (DW0 0). */
        assert_int_equal(copy_cmd(200, 40, 4, PRCHK_A, 40, 0x1234, 0xffff, 0, 0, 0, 0),
                         ST(2, NVME_SC_APPTAG_CHECK));
        assert_int_equal(io(NVME_IO_READ, 200, 4, PRACT | PRCHK_A, 200, 0x1234, 0xffff, 4 * BS), 0);
        /* PRINFOW PRACT: the destination's PI generated with LBAT 4242h. */
        assert_int_equal(copy_cmd(200, 40, 4, 0, 0, 0, 0, PRACT, 200, 0x4242, 0), 0);
        assert_int_equal(io(NVME_IO_READ, 200, 4, PRACT | PRCHK_ALL, 200, 0x4242, 0xffff, 4 * BS),
                         0);
        /* A corrupt source block: the guard error with PRINFOR's guard check. */
        io_cmd(&cio, NVME_IO_READ, 40, 1, 0, 0, 0, 0, ext);
        assert_int_equal(run(&cio), 0);
        buf[17] ^= 0x08;
        io_cmd(&cio, NVME_IO_WRITE, 40, 1, 0, 0, 0, 0, ext);
        assert_int_equal(run(&cio), 0);
        assert_int_equal(copy_cmd(300, 40, 4, PRCHK_G, 40, 0, 0, 0, 0, 0, 0),
                         ST(2, NVME_SC_GUARD_CHECK));
        assert_int_equal(copy_cmd(300, 40, 4, 0, 0, 0, 0, 0, 0, 0, 0), 0); /* unchecked: moved */
        /* STCR/STCW (storage tag checks): Invalid Field. */
        copy_sqe(&cio, 300, 40, 4, 0, 0, 0, 0, 0, 0, 0, 0);
        cdw(&cio, 12, nvme_cdw(&cio, 12) | (1u << 24));
        assert_int_equal(run(&cio), ST(0, NVME_SC_INVALID_FIELD));

        /* Back to no metadata. */
        assert_int_equal(format(0, 0, false, false, 0), 0);
        assert_int_equal(core_ns_md_per_block(ns), 0);
        idn = identify_ns();
        assert_int_equal(idn->flbas, 0);
        assert_int_equal(idn->dps, 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_identify_formats),
            cmocka_unit_test(test_format_rejects),
            cmocka_unit_test(test_prinfo_parse),
            cmocka_unit_test(test_format_and_io),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
