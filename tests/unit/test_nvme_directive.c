/*
 * NVMe directives and Flexible Data Placement on a bare controller
 * (directive.c, fdp.c, the DTYPE/DSPEC and DSM paths of io.c): Identify
 * and Streams directive operations and their errors, stream Writes landing
 * in their own core placement id, FDP logs 20h..23h from the flash model,
 * features 1Dh/1Eh, I/O Management Receive/Send, placement handles and
 * invalid placement identifiers, and the access hints of Read/Write CDW13
 * reaching the core's hint counters.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/flash.h"
#include "core/ns.h"
#include "nvme/internal.h"
#include "rt/reactor.h"

#define SUBNQN  "nqn.2024-01.io.slate:dir"
#define HOSTNQN "nqn.2014-08.org.nvmexpress:uuid:11111111-2222-3333-4444-666666666666"
#define BUFLEN  (1u << 20)
#define EB      (64u << 10) /* the FDP namespace's erase block (reclaim unit) */

/* NSID 1, 3: plain namespaces; NSID 2: with the flash model (FDP). */
static struct core_ns *ns1, *ns2, *ns3;
static uint8_t *buf;
static struct nvme_queue admin_q, io_q;

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

/* One command through parse and (when it gets there) exec on the reactor; its status. */
static struct nvme_cmd cmd;
static uint16_t run(struct nvme_queue *q, uint8_t opc, uint32_t nsid, const uint32_t d[6],
                    uint32_t len)
{
        sqe_init(&cmd, q, opc, nsid);
        for (int i = 0; i < 6; i++)
                cdw(&cmd, 10 + i, d[i]);
        sgl_len(&cmd, len);
        cmd.reactor = rt_get(0);
        cmd.done = on_done;
        if (nvme_cmd_parse(&cmd) == NVME_PARSE_DONE)
                return st(&cmd);
        w.done = false;
        rt_msg_send(rt_get(0), exec_fn, &cmd);
        pthread_mutex_lock(&w.m);
        while (!w.done)
                pthread_cond_wait(&w.cv, &w.m);
        pthread_mutex_unlock(&w.m);
        return st(&cmd);
}

static uint16_t dir_recv(uint32_t nsid, uint8_t dtype, uint8_t doper, uint32_t cdw12, uint32_t len)
{
        uint32_t d[6] = {len ? len / 4 - 1 : 0, doper | (uint32_t)dtype << 8, cdw12};
        return run(&admin_q, NVME_ADM_DIR_RECV, nsid, d, len);
}
static uint16_t dir_send(uint32_t nsid, uint8_t dtype, uint8_t doper, uint16_t dspec,
                         uint32_t cdw12)
{
        uint32_t d[6] = {0, doper | (uint32_t)dtype << 8 | (uint32_t)dspec << 16, cdw12};
        return run(&admin_q, NVME_ADM_DIR_SEND, nsid, d, 0);
}
/* A 4 KiB Write at lba with DTYPE/DSPEC and the CDW13 DSM byte. */
static uint16_t write_dir(uint32_t nsid, uint64_t lba, unsigned dtype, uint16_t dspec, uint8_t dsm)
{
        uint32_t d[6] = {(uint32_t)lba, (uint32_t)(lba >> 32), dtype << 20,
                         (uint32_t)dspec << 16 | dsm};
        memset(buf, 0x11, 4096);
        return run(&io_q, NVME_IO_WRITE, nsid, d, 4096);
}
static uint16_t get_log(uint8_t lid, uint16_t lsi, uint8_t lsp, uint32_t len)
{
        uint32_t numd = len / 4 - 1;
        uint32_t d[6] = {lid | (uint32_t)lsp << 8 | 1u << 15 | (numd & 0xffff) << 16,
                         numd >> 16 | (uint32_t)lsi << 16};
        return run(&admin_q, NVME_ADM_GET_LOG_PAGE, 0, d, len);
}

static int connect_q(struct nvme_queue *q, uint16_t qid, uint16_t cntlid)
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
        return st(&c);
}

static int setup(void **s)
{
        (void)s;
        char err[256], dir[64];
        snprintf(dir, sizeof(dir), "/tmp/slate-test-nvdir-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        core_set_state_dir(dir);
        if (rt_init(1) || rt_start())
                return -1;
        buf = aligned_alloc(4096, BUFLEN);
        struct core_ns_params p = {
            .name = "d1", .backend = "mem", .size_bytes = 16 << 20, .block_size = 4096};
        if (core_ns_create(&p, &ns1, err, sizeof(err)))
                return -1;
        p.name = "d3";
        if (core_ns_create(&p, &ns3, err, sizeof(err)))
                return -1;
        p.name = "d2";
        p.size_bytes = 64 << 20; /* room for NVME_FDP_NRUH open reclaim units beside the OP */
        p.flash.enable = true;
        p.flash.erase_block = EB;
        if (core_ns_create(&p, &ns2, err, sizeof(err))) {
                fprintf(stderr, "%s\n", err);
                return -1;
        }
        if (nvme_subsys_add(SUBNQN, "SN1", "Slate Dir", err, sizeof(err)) ||
            nvme_ns_attach(SUBNQN, 1, "d1", err, sizeof(err)) != 1 ||
            nvme_ns_attach(SUBNQN, 2, "d2", err, sizeof(err)) != 2 ||
            nvme_ns_attach(SUBNQN, 3, "d3", err, sizeof(err)) != 3 ||
            nvme_subsys_allow_host(SUBNQN, HOSTNQN, err, sizeof(err)))
                return -1;
        memset(&admin_q, 0, sizeof(admin_q));
        memset(&io_q, 0, sizeof(io_q));
        if (connect_q(&admin_q, 0, 0xffff))
                return -1;
        nvme_ctrl_set_cc(admin_q.ctrl, 1 | (6 << 16) | (4 << 20));
        if (connect_q(&io_q, 1, admin_q.ctrl->cntlid))
                return -1;
        return 0;
}

static void test_identify(void **s)
{
        (void)s;
        uint32_t d[6] = {NVME_CNS_CTRL};
        assert_int_equal(run(&admin_q, NVME_ADM_IDENTIFY, 0, d, 4096), 0);
        const struct nvme_id_ctrl *id = (const void *)buf;
        assert_true(get_le16(&id->oacs) & NVME_OACS_DIRECTIVES);
        assert_int_equal(get_le32(&id->ctratt) & (NVME_CTRATT_ENDGRPS | NVME_CTRATT_FDPS),
                         NVME_CTRATT_ENDGRPS | NVME_CTRATT_FDPS);
        assert_int_equal(get_le16(&id->endgidmax), NVME_MAX_NSID);
        d[0] = NVME_CNS_NS;
        assert_int_equal(run(&admin_q, NVME_ADM_IDENTIFY, 2, d, 4096), 0);
        assert_int_equal(get_le16(&((const struct nvme_id_ns *)buf)->endgid), 2);
}

static void test_identify_directive(void **s)
{
        (void)s;
        assert_int_equal(dir_recv(1, NVME_DIR_IDENTIFY, 1, 0, 4096), 0);
        assert_int_equal(buf[0], 0x03); /* Identify + Streams supported */
        assert_int_equal(buf[32], 0x01);
        assert_int_equal(dir_recv(2, NVME_DIR_IDENTIFY, 1, 0, 4096), 0);
        assert_int_equal(buf[0], 0x07); /* + Data Placement on the FDP namespace */
        assert_int_equal(buf[32], 0x05);
        assert_int_equal(buf[64], 0x04);
        /* A shorter buffer gets the start of the structure. */
        assert_int_equal(dir_recv(2, NVME_DIR_IDENTIFY, 1, 0, 64), 0);
        assert_int_equal(buf[32], 0x05);
        /* FFFFFFFFh, an inactive NSID, an unknown DOPER or DTYPE. */
        assert_int_equal(dir_recv(0xffffffffu, NVME_DIR_IDENTIFY, 1, 0, 4096),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dir_recv(77, NVME_DIR_IDENTIFY, 1, 0, 4096), ST(0, NVME_SC_INVALID_NS));
        assert_int_equal(dir_recv(1, NVME_DIR_IDENTIFY, 2, 0, 4096), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dir_recv(1, 0x0f, 1, 0, 4096), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dir_recv(2, NVME_DIR_DATA_PLACEMENT, 1, 0, 4096),
                         ST(0, NVME_SC_INVALID_FIELD));
        /* Enable: Identify itself, Data Placement (that is feature 1Dh), reserved bits. */
        assert_int_equal(dir_send(1, NVME_DIR_IDENTIFY, 1, 0, 1), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dir_send(2, NVME_DIR_IDENTIFY, 1, 0, 1 | 2u << 8),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dir_send(1, NVME_DIR_IDENTIFY, 1, 0, 1 | 1u << 8 | 1u << 4),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dir_send(1, NVME_DIR_IDENTIFY, 2, 0, 1 | 1u << 8),
                         ST(0, NVME_SC_INVALID_FIELD));
        /* Streams cannot be enabled where FDP is (8.7.3). */
        assert_int_equal(dir_send(2, NVME_DIR_IDENTIFY, 1, 0, 1 | 1u << 8),
                         ST(0, NVME_SC_INVALID_FIELD));
}

static uint16_t params(uint32_t nsid, struct nvme_streams_params *sp)
{
        uint16_t r = dir_recv(nsid, NVME_DIR_STREAMS, NVME_DIR_RCV_ST_PARAMS, 0, 32);
        memcpy(sp, buf, sizeof(*sp));
        return r;
}

static unsigned open_ids(uint32_t nsid, uint16_t *ids)
{
        assert_int_equal(dir_recv(nsid, NVME_DIR_STREAMS, NVME_DIR_RCV_ST_STATUS, 0, 256), 0);
        unsigned n = (unsigned)slate_get_le(buf, 2);
        for (unsigned i = 0; i < n; i++)
                ids[i] = (uint16_t)slate_get_le(buf + 2 + 2 * i, 2);
        return n;
}

static void test_streams(void **s)
{
        (void)s;
        struct nvme_streams_params sp;
        uint16_t ids[64];
        /* Not enabled: stream Writes and operations are refused. */
        assert_int_equal(write_dir(1, 0, NVME_DIR_STREAMS, 7, 0), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dir_recv(1, NVME_DIR_STREAMS, NVME_DIR_RCV_ST_RESOURCE, 4, 0),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dir_send(1, NVME_DIR_STREAMS, NVME_DIR_SND_ST_REL_RSC, 0, 0),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dir_send(1, NVME_DIR_IDENTIFY, 1, 0, 1 | 1u << 8), 0);
        assert_int_equal(dir_recv(1, NVME_DIR_IDENTIFY, 1, 0, 4096), 0);
        assert_int_equal(buf[32], 0x03);
        assert_int_equal(params(1, &sp), 0);
        assert_int_equal(get_le16(&sp.msl), NVME_STREAMS_MSL);
        assert_int_equal(get_le16(&sp.nssa), NVME_STREAMS_MSL);
        assert_int_equal(get_le16(&sp.nsa), 0);
        assert_true(get_le32(&sp.sws) >= 1);
        /* Allocate 4 for NSID 1: DW0 = NSA; NSSA is what is left. */
        assert_int_equal(dir_recv(1, NVME_DIR_STREAMS, NVME_DIR_RCV_ST_RESOURCE, 4, 0), 0);
        assert_int_equal(dw0(&cmd), 4);
        assert_int_equal(params(1, &sp), 0);
        assert_int_equal(get_le16(&sp.nsa), 4);
        assert_int_equal(get_le16(&sp.nssa), NVME_STREAMS_MSL - 4);
        /* Writes open streams 9 and 7; each has its own core placement id. */
        assert_int_equal(write_dir(1, 0, NVME_DIR_STREAMS, 9, 0), 0);
        uint16_t pl9 = core_placement_find(ns1, CORE_PL_NVME_STREAM,
                                           CORE_PL_NVME_KEY(admin_q.ctrl->cntlid, 9));
        assert_int_not_equal(pl9, 0);
        assert_int_equal(write_dir(1, 8, NVME_DIR_STREAMS, 7, 0), 0);
        assert_int_equal(write_dir(1, 16, NVME_DIR_STREAMS, 7, 0), 0);
        uint16_t pl7 = core_placement_find(ns1, CORE_PL_NVME_STREAM,
                                           CORE_PL_NVME_KEY(admin_q.ctrl->cntlid, 7));
        assert_int_not_equal(pl7, 0);
        assert_int_not_equal(pl7, pl9);
        struct core_placement_info pi;
        assert_int_equal(core_placement_info(ns1, pl7, &pi), 0);
        assert_int_equal(pi.kind, CORE_PL_NVME_STREAM);
        assert_int_equal(pi.bytes_written, 8192);
        assert_int_equal(open_ids(1, ids), 2);
        assert_int_equal(ids[0], 7); /* increasing order */
        assert_int_equal(ids[1], 9);
        assert_int_equal(params(1, &sp), 0);
        assert_int_equal(get_le16(&sp.nso), 2);
        /* Six streams on NSA 4: the ones open longest make room. */
        for (uint16_t sid = 20; sid < 24; sid++)
                assert_int_equal(write_dir(1, 0, NVME_DIR_STREAMS, sid, 0), 0);
        assert_int_equal(open_ids(1, ids), 4);
        assert_int_equal(ids[0], 20);
        assert_int_equal(core_placement_find(ns1, CORE_PL_NVME_STREAM,
                                             CORE_PL_NVME_KEY(admin_q.ctrl->cntlid, 9)),
                         0);
        /* Release Identifier: 21 closes; an id not open changes nothing; 0 is invalid. */
        assert_int_equal(dir_send(1, NVME_DIR_STREAMS, NVME_DIR_SND_ST_REL_ID, 21, 0), 0);
        assert_int_equal(dir_send(1, NVME_DIR_STREAMS, NVME_DIR_SND_ST_REL_ID, 500, 0), 0);
        assert_int_equal(dir_send(1, NVME_DIR_STREAMS, NVME_DIR_SND_ST_REL_ID, 0, 0),
                         ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(open_ids(1, ids), 3);
        assert_int_not_equal(ids[1], 21);
        /* NSID 3: the rest of the pool; after Release Resources, all of it. */
        assert_int_equal(dir_send(3, NVME_DIR_IDENTIFY, 1, 0, 1 | 1u << 8), 0);
        assert_int_equal(dir_recv(3, NVME_DIR_STREAMS, NVME_DIR_RCV_ST_RESOURCE, 100, 0), 0);
        assert_int_equal(dw0(&cmd), NVME_STREAMS_MSL - 4);
        assert_int_equal(dir_send(1, NVME_DIR_STREAMS, NVME_DIR_SND_ST_REL_RSC, 0, 0), 0);
        assert_int_equal(open_ids(1, ids), 0);
        assert_int_equal(dir_send(3, NVME_DIR_STREAMS, NVME_DIR_SND_ST_REL_RSC, 0, 0), 0);
        assert_int_equal(dir_recv(3, NVME_DIR_STREAMS, NVME_DIR_RCV_ST_RESOURCE, 100, 0), 0);
        assert_int_equal(dw0(&cmd), NVME_STREAMS_MSL);
        /* Nothing left for NSID 1: Stream Resource Allocation Failed. */
        assert_int_equal(dir_recv(1, NVME_DIR_STREAMS, NVME_DIR_RCV_ST_RESOURCE, 1, 0),
                         ST(1, NVME_SC_STREAM_ALLOC_FAILED));
        /* NSID 1 without NSA and no pool left: a stream Write is an ordinary Write. */
        assert_int_equal(write_dir(1, 0, NVME_DIR_STREAMS, 5, 0), 0);
        assert_int_equal(open_ids(1, ids), 0);
        /* FFFFFFFFh enables every namespace it can (not the FDP one). */
        assert_int_equal(dir_send(0xffffffffu, NVME_DIR_IDENTIFY, 1, 0, 1 | 1u << 8), 0);
        assert_false(nvme_streams_enabled(admin_q.ctrl, 2));
        /* Unknown operations. */
        assert_int_equal(dir_recv(1, NVME_DIR_STREAMS, 9, 0, 32), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dir_send(1, NVME_DIR_STREAMS, 9, 0, 0), ST(0, NVME_SC_INVALID_FIELD));
        /* Disable: every stream and resource goes; stream Writes are refused again. */
        assert_int_equal(dir_send(3, NVME_DIR_IDENTIFY, 1, 0, 1u << 8), 0);
        assert_int_equal(dir_send(1, NVME_DIR_IDENTIFY, 1, 0, 1u << 8), 0);
        assert_int_equal(params(0xffffffffu, &sp), 0);
        assert_int_equal(get_le16(&sp.nssa), NVME_STREAMS_MSL);
        assert_int_equal(write_dir(1, 0, NVME_DIR_STREAMS, 7, 0), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(core_placement_find(ns1, CORE_PL_NVME_STREAM,
                                             CORE_PL_NVME_KEY(admin_q.ctrl->cntlid, 7)),
                         0);
        /* A Read never takes a directive. */
        uint32_t d[6] = {0, 0, NVME_DIR_STREAMS << 20, 7u << 16};
        assert_int_equal(run(&io_q, NVME_IO_READ, 1, d, 4096), ST(0, NVME_SC_INVALID_FIELD));
}

static uint64_t ruamw(uint16_t ph)
{
        uint32_t d[6] = {NVME_IOMR_MO_RUH_STATUS, 4096 / 4 - 1};
        assert_int_equal(run(&io_q, NVME_IO_IO_MGMT_RECV, 2, d, 4096), 0);
        assert_int_equal(get_le16(&((struct nvme_fdp_ruh_status *)buf)->nruhsd), NVME_FDP_NRUH);
        const struct nvme_fdp_ruh_status_desc *r =
            (const void *)(buf + sizeof(struct nvme_fdp_ruh_status));
        assert_int_equal(get_le16(&r[ph].pid), ph);
        return get_le64(&r[ph].ruamw);
}

static unsigned events(bool host, uint8_t type)
{
        assert_int_equal(get_log(NVME_LOG_FDP_EVENTS, 2, host, 4096), 0);
        const struct nvme_fdp_events_log *l = (const void *)buf;
        unsigned n = 0;
        for (unsigned i = 0; i < get_le32(&l->nevents); i++)
                n += l->ev[i].type == type;
        return n;
}

static void test_fdp(void **s)
{
        (void)s;
        /* 20h: one configuration, 8 handles, RUNS = the erase block. */
        assert_int_equal(get_log(NVME_LOG_FDP_CONFIGS, 2, 0, 16), 0);
        uint32_t size = get_le32(&((struct nvme_fdp_config_log *)buf)->size);
        assert_int_equal(size, 16 + 64 + 4 * NVME_FDP_NRUH);
        assert_int_equal(get_log(NVME_LOG_FDP_CONFIGS, 2, 0, size), 0);
        const struct nvme_fdp_config_desc *cd = (const void *)(buf + 16);
        assert_int_equal(cd->fdpa & 0x8f, 0x80);
        assert_int_equal(get_le16(&cd->nruh), NVME_FDP_NRUH);
        assert_int_equal(get_le64(&cd->runs), EB);
        assert_int_equal(buf[16 + 64], NVME_FDP_RUHT_INITIALLY_ISOLATED);
        /* 21h. */
        assert_int_equal(get_log(NVME_LOG_FDP_RUH_USAGE, 2, 0, 8 + 8 * NVME_FDP_NRUH), 0);
        assert_int_equal(get_le16(&((struct nvme_fdp_ruhu_log *)buf)->nruh), NVME_FDP_NRUH);
        assert_int_equal(buf[8], NVME_FDP_RUHA_HOST);
        /* Not an FDP group, no group, LSP on 20h. */
        assert_int_equal(get_log(NVME_LOG_FDP_CONFIGS, 1, 0, 16), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(get_log(NVME_LOG_FDP_STATS, 0, 0, 64), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(get_log(NVME_LOG_FDP_STATS, 200, 0, 64), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(get_log(NVME_LOG_FDP_CONFIGS, 2, 1, 16), ST(0, NVME_SC_INVALID_FIELD));

        /* Placement handle 3: its own placement id, the bytes and the RU's room follow. */
        uint64_t full = EB / 4096;
        assert_int_equal(ruamw(3), full);
        assert_int_equal(get_log(NVME_LOG_FDP_STATS, 2, 0, 64), 0);
        uint64_t hbmw0 = slate_get_le(buf, 8);
        for (unsigned i = 0; i < 5; i++)
                assert_int_equal(write_dir(2, 100 + i, NVME_DIR_DATA_PLACEMENT, 3, 0), 0);
        uint16_t pl3 = core_placement_find(ns2, CORE_PL_FDP_RUH, 3);
        assert_int_not_equal(pl3, 0);
        struct core_placement_info pi;
        assert_int_equal(core_placement_info(ns2, pl3, &pi), 0);
        assert_int_equal(pi.bytes_written, 5 * 4096);
        assert_int_equal(ruamw(3), full - 5);
        assert_int_equal(get_log(NVME_LOG_FDP_STATS, 2, 0, 64), 0);
        assert_int_equal(slate_get_le(buf, 8) - hbmw0, 5 * 4096);       /* HBMW */
        assert_true(slate_get_le(buf + 16, 8) >= slate_get_le(buf, 8)); /* MBMW >= HBMW */
        /* A Write without DTYPE goes to handle 0. */
        assert_int_equal(write_dir(2, 200, 0, 0, 0), 0);
        assert_int_equal(ruamw(0), full - 1);
        /* An invalid placement identifier: handle 0 (a hint), and a host event 03h. */
        unsigned inv0 = events(true, NVME_FDP_EVT_INVALID_PID);
        assert_int_equal(write_dir(2, 201, NVME_DIR_DATA_PLACEMENT, 99, 0), 0);
        assert_int_equal(ruamw(0), full - 2);
        assert_int_equal(events(true, NVME_FDP_EVT_INVALID_PID), inv0 + 1);
        /* DTYPE 02h where FDP is not enabled. */
        assert_int_equal(write_dir(1, 0, NVME_DIR_DATA_PLACEMENT, 1, 0),
                         ST(0, NVME_SC_INVALID_FIELD));

        /* I/O Management Send: update handle 3 -> a fresh RU, and event 00h (not full). */
        unsigned nf0 = events(true, NVME_FDP_EVT_RU_NOT_FULLY_WRITTEN);

        put_le16((le16 *)buf, 3);
        uint32_t d[6] = {NVME_IOMS_MO_RUH_UPDATE};
        assert_int_equal(run(&io_q, NVME_IO_IO_MGMT_SEND, 2, d, 2), 0);
        assert_int_equal(ruamw(3), full);
        assert_int_equal(events(true, NVME_FDP_EVT_RU_NOT_FULLY_WRITTEN), nf0 + 1);
        /* A PID with no handle: Invalid Placement Handle, nothing updated. */
        assert_int_equal(write_dir(2, 300, NVME_DIR_DATA_PLACEMENT, 3, 0), 0);
        put_le16((le16 *)buf, 3);
        put_le16((le16 *)buf + 1, 42);
        d[0] = NVME_IOMS_MO_RUH_UPDATE | 1u << 16;
        assert_int_equal(run(&io_q, NVME_IO_IO_MGMT_SEND, 2, d, 4),
                         ST(0, NVME_SC_INVALID_PLACEMENT_HANDLE));
        assert_int_equal(ruamw(3), full - 1);
        /* Unknown management operations; FDP disabled on NSID 1. */
        d[0] = 7;
        assert_int_equal(run(&io_q, NVME_IO_IO_MGMT_SEND, 2, d, 0), ST(0, NVME_SC_INVALID_FIELD));
        uint32_t r[6] = {7, 0};
        assert_int_equal(run(&io_q, NVME_IO_IO_MGMT_RECV, 2, r, 4), ST(0, NVME_SC_INVALID_FIELD));
        r[0] = NVME_IOMR_MO_RUH_STATUS;
        assert_int_equal(run(&io_q, NVME_IO_IO_MGMT_RECV, 1, r, 4), ST(0, NVME_SC_FDP_DISABLED));

        /* Feature 1Dh: enabled in group 2, not in 1; no change allowed; save is fine. */
        uint32_t f[6] = {NVME_FEAT_FDP, 2};
        assert_int_equal(run(&admin_q, NVME_ADM_GET_FEATURES, 0xffffffffu, f, 0), 0);
        assert_int_equal(dw0(&cmd), 1);
        f[1] = 1;
        assert_int_equal(run(&admin_q, NVME_ADM_GET_FEATURES, 0xffffffffu, f, 0), 0);
        assert_int_equal(dw0(&cmd), 0);
        f[0] = NVME_FEAT_FDP | 1u << 31;
        f[1] = 2;
        f[2] = 1;
        assert_int_equal(run(&admin_q, NVME_ADM_SET_FEATURES, 0xffffffffu, f, 0), 0);
        f[2] = 0;
        assert_int_equal(run(&admin_q, NVME_ADM_SET_FEATURES, 0xffffffffu, f, 0),
                         ST(0, NVME_SC_CMD_SEQ_ERROR));
        f[2] = 1 | 1u << 8;
        assert_int_equal(run(&admin_q, NVME_ADM_SET_FEATURES, 0xffffffffu, f, 0),
                         ST(0, NVME_SC_INVALID_FIELD));
        f[1] = 0;
        assert_int_equal(run(&admin_q, NVME_ADM_SET_FEATURES, 0xffffffffu, f, 0),
                         ST(0, NVME_SC_INVALID_FIELD));

        /* Feature 1Eh: disable event 03h on handle 0; then an invalid PID logs nothing. */
        f[0] = NVME_FEAT_FDP_EVENTS;
        f[1] = 0 | 8u << 16;
        assert_int_equal(run(&admin_q, NVME_ADM_GET_FEATURES, 2, f, 16), 0);
        assert_int_equal(dw0(&cmd), 4);
        assert_int_equal(buf[2], NVME_FDP_EVT_INVALID_PID);
        assert_int_equal(buf[3], 1);
        buf[0] = NVME_FDP_EVT_INVALID_PID;
        f[1] = 0 | 1u << 16;
        f[2] = 0;
        assert_int_equal(run(&admin_q, NVME_ADM_SET_FEATURES, 2, f, 1), 0);
        f[1] = 0 | 8u << 16;
        assert_int_equal(run(&admin_q, NVME_ADM_GET_FEATURES, 2, f, 16), 0);
        assert_int_equal(buf[3], 0);
        unsigned inv1 = events(true, NVME_FDP_EVT_INVALID_PID);
        assert_int_equal(write_dir(2, 202, NVME_DIR_DATA_PLACEMENT, 77, 0), 0);
        assert_int_equal(events(true, NVME_FDP_EVT_INVALID_PID), inv1);
        /* An unsupported type, a handle that does not exist, FDP off. */
        buf[0] = 0x55;
        f[1] = 0 | 1u << 16;
        assert_int_equal(run(&admin_q, NVME_ADM_SET_FEATURES, 2, f, 1),
                         ST(0, NVME_SC_INVALID_FIELD));
        buf[0] = NVME_FDP_EVT_INVALID_PID;
        f[1] = 40 | 1u << 16;
        assert_int_equal(run(&admin_q, NVME_ADM_SET_FEATURES, 2, f, 1),
                         ST(0, NVME_SC_INVALID_PLACEMENT_HANDLE));
        f[1] = 0 | 1u << 16;
        assert_int_equal(run(&admin_q, NVME_ADM_SET_FEATURES, 1, f, 1),
                         ST(0, NVME_SC_FDP_DISABLED));
        f[2] = 1; /* enable again */
        assert_int_equal(run(&admin_q, NVME_ADM_SET_FEATURES, 2, f, 1), 0);

        /* Fill handle 5's reclaim unit: the model opens another (controller event 81h). */
        unsigned im0 = events(false, NVME_FDP_EVT_IMPLICIT_RUH);
        for (uint64_t i = 0; i <= full; i++)
                assert_int_equal(write_dir(2, 1000 + i, NVME_DIR_DATA_PLACEMENT, 5, 0), 0);
        assert_true(events(false, NVME_FDP_EVT_IMPLICIT_RUH) > im0);
}

static void test_endurance_log(void **s)
{
        (void)s;
        /* Group 2 (the FDP namespace) has written; media units >= data units written. */
        assert_int_equal(get_log(NVME_LOG_ENDURANCE, 2, 0, 512), 0);
        uint64_t duw = slate_get_le(buf + 64, 8), muw = slate_get_le(buf + 80, 8);
        uint64_t hwc = slate_get_le(buf + 112, 8);
        assert_true(duw > 0);
        assert_true(muw >= duw);
        assert_true(hwc >= 20);
        assert_int_equal(buf[3], 100);
        assert_int_equal(get_log(NVME_LOG_ENDURANCE, 0, 0, 512), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(get_log(NVME_LOG_ENDURANCE, 99, 0, 512), ST(0, NVME_SC_INVALID_FIELD));
}

static void test_hints(void **s)
{
        (void)s;
        uint64_t h0[CORE_HINT_BITS], h1[CORE_HINT_BITS];
        core_hint_bytes(ns1, h0);
        /* AF 4: frequent writes, infrequent reads; AL 3; SEQREQ; INCOMPRESSIBLE. */
        assert_int_equal(write_dir(1, 40, 0, 0, 4 | 3u << 4 | 1u << 6 | 1u << 7), 0);
        core_hint_bytes(ns1, h1);
        assert_int_equal(h1[4] - h0[4], 4096); /* CORE_HINT_WRITE_FREQ */
        assert_int_equal(h1[3] - h0[3], 4096); /* CORE_HINT_READ_RARE */
        assert_int_equal(h1[6] - h0[6], 4096); /* CORE_HINT_LOW_LATENCY */
        assert_int_equal(h1[0] - h0[0], 4096); /* CORE_HINT_SEQUENTIAL */
        assert_int_equal(h1[7] - h0[7], 4096); /* CORE_HINT_INCOMPRESSIBLE */
        assert_int_equal(h1[5] - h0[5], 0);
        /* AF 3: written once, read often. */
        assert_int_equal(write_dir(1, 41, 0, 0, 3), 0);
        core_hint_bytes(ns1, h0);
        assert_int_equal(h0[5] - h1[5], 4096); /* CORE_HINT_WRITE_RARE */
        assert_int_equal(h0[2] - h1[2], 4096); /* CORE_HINT_READ_FREQ */
        assert_int_equal(nvme_access_hints(1, 0, false), 0);
        assert_int_equal(nvme_access_hints(8, 0, false), CORE_HINT_WRITE_FREQ);
}

/* fdp = false: a flash-model namespace without FDP, where Streams write their own erase blocks. */
static void test_streams_on_model(void **s)
{
        (void)s;
        char err[256];
        struct core_ns *ns4;
        struct core_ns_params p = {.name = "d4",
                                   .backend = "mem",
                                   .size_bytes = 64 << 20,
                                   .block_size = 4096,
                                   .flash = {.enable = true, .erase_block = EB},
                                   .fdp_off = true};
        assert_int_equal(core_ns_create(&p, &ns4, err, sizeof(err)), 0);
        assert_int_equal(nvme_ns_attach(SUBNQN, 4, "d4", err, sizeof(err)), 4);
        assert_false(nvme_fdp_enabled(ns4));
        assert_int_equal(dir_recv(4, NVME_DIR_IDENTIFY, 1, 0, 4096), 0);
        assert_int_equal(buf[0], 0x03); /* no Data Placement */
        assert_int_equal(get_log(NVME_LOG_FDP_CONFIGS, 4, 0, 16), ST(0, NVME_SC_INVALID_FIELD));
        assert_int_equal(dir_send(4, NVME_DIR_IDENTIFY, 1, 0, 1 | 1u << 8), 0);
        for (unsigned i = 0; i < 3; i++)
                assert_int_equal(write_dir(4, 10 + i, NVME_DIR_STREAMS, 6, 0), 0);
        uint16_t pl = core_placement_find(ns4, CORE_PL_NVME_STREAM,
                                          CORE_PL_NVME_KEY(admin_q.ctrl->cntlid, 6));
        assert_int_not_equal(pl, 0);
        struct core_flash_stats fs;
        assert_int_equal(core_flash_stats(ns4, pl, &fs), 0);
        assert_int_equal(fs.host_bytes, 3 * 4096);
        /* Its reclaim unit is its own: a plain write does not touch it. */
        assert_int_equal(core_flash_ru_remaining(ns4, pl), EB - 3 * 4096);
        assert_int_equal(write_dir(4, 20, 0, 0, 0), 0);
        assert_int_equal(core_flash_ru_remaining(ns4, pl), EB - 3 * 4096);
        assert_int_equal(nvme_ns_detach(SUBNQN, 4, err, sizeof(err)), 0);
        assert_int_equal(core_ns_delete("d4"), 0);
}

/* Detaching a namespace releases its streams: the namespace can then be deleted. */
static void test_detach_releases_streams(void **s)
{
        (void)s;
        char err[256];
        assert_int_equal(dir_send(3, NVME_DIR_IDENTIFY, 1, 0, 1 | 1u << 8), 0);
        assert_int_equal(write_dir(3, 0, NVME_DIR_STREAMS, 4, 0), 0);
        uint64_t key = CORE_PL_NVME_KEY(admin_q.ctrl->cntlid, 4);
        assert_int_not_equal(core_placement_find(ns3, CORE_PL_NVME_STREAM, key), 0);
        assert_int_equal(nvme_ns_detach(SUBNQN, 3, err, sizeof(err)), 0);
        assert_false(nvme_streams_enabled(admin_q.ctrl, 3));
        assert_int_equal(core_placement_find(ns3, CORE_PL_NVME_STREAM, key), 0);
        assert_int_equal(core_ns_delete("d3"), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_identify),         cmocka_unit_test(test_identify_directive),
            cmocka_unit_test(test_streams),          cmocka_unit_test(test_fdp),
            cmocka_unit_test(test_endurance_log),    cmocka_unit_test(test_hints),
            cmocka_unit_test(test_streams_on_model), cmocka_unit_test(test_detach_releases_streams),
        };
        return cmocka_run_group_tests(tests, setup, NULL);
}
