/*
 * Third-party copy on the SCSI side (src/scsi/xcopy.c) against real
 * namespaces on a real reactor: the EXTENDED COPY(LID1) parameter-list
 * checks and their sense codes, copies within a LU and across LUs and
 * target ports (data checked block by block), what an initiator may not
 * reach, COPY ABORTED with the segment number and pointer, a duplicate
 * LIST ID, ABORT TASK, RECEIVE COPY RESULTS (copy status, receive data,
 * operating parameters, failed segment details, nexus loss) and the
 * Third-party Copy VPD page and 3PC bit.
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
#include <unistd.h>

#include "slate/byteorder.h"
#include "core/req.h"
#include "rt/reactor.h"
#include "scsi/internal.h"

#define NBLK 8192u /* 4 MiB of 512-byte blocks */

static char state_dir[256];
static struct core_ns *n0, *n1, *n4k, *nf;
static struct scsi_target ta, tb;
static struct scsi_nexus nxa, nxb, nxc; /* nxa, nxb: one initiator on A and B; nxc: another on B */
static struct scsi_cmd cmd, cmd2;
static uint8_t *buf, *buf2, *list;

/* ---- reactor helpers ---- */

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending;

static void done_one(void)
{
        pthread_mutex_lock(&m);
        pending--;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&m);
}

static void wait_all(void)
{
        pthread_mutex_lock(&m);
        while (pending > 0)
                pthread_cond_wait(&cv, &m);
        pthread_mutex_unlock(&m);
}

static void req_cb(struct core_req *req)
{
        (void)req;
        done_one();
}

static void submit_req(void *arg)
{
        core_req_submit(arg);
}

static enum core_status io(struct core_ns *ns, enum core_op op, uint64_t lba, void *b, uint32_t nlb)
{
        static struct core_req req;
        core_req_init(&req, ns, op, lba, nlb, 0, rt_get(0), req_cb, NULL);
        req.iov[0].iov_base = b;
        req.iov[0].iov_len = (size_t)nlb * ns->block_size;
        req.iovcnt = 1;
        pending = 1;
        rt_msg_send(rt_get(0), submit_req, &req);
        wait_all();
        return req.status;
}

/* Blocks named by (tag, lba): a copy that lands anywhere else shows. */
static void fill(struct core_ns *ns, uint64_t lba, uint32_t nlb, uint8_t tag)
{
        uint8_t *b = malloc((size_t)nlb * ns->block_size);
        for (uint32_t i = 0; i < nlb; i++) {
                memset(b + (size_t)i * ns->block_size, tag, ns->block_size);
                slate_put_be(b + (size_t)i * ns->block_size, 8, lba + i);
        }
        assert_int_equal(io(ns, CORE_OP_WRITE, lba, b, nlb), CORE_OK);
        free(b);
}

static void expect_blocks(struct core_ns *ns, uint64_t lba, uint32_t nlb, uint8_t tag,
                          uint64_t name_lba)
{
        uint8_t *b = malloc((size_t)nlb * ns->block_size);
        assert_int_equal(io(ns, CORE_OP_READ, lba, b, nlb), CORE_OK);
        for (uint32_t i = 0; i < nlb; i++) {
                const uint8_t *p = b + (size_t)i * ns->block_size;
                assert_int_equal(slate_be64(p), name_lba + i);
                assert_int_equal(p[ns->block_size - 1], tag);
        }
        free(b);
}

static void cmd_done(struct scsi_cmd *c)
{
        (void)c;
        done_one();
}

static void prep(struct scsi_cmd *c, uint8_t *b, struct scsi_nexus *nx, uint64_t lun,
                 const uint8_t *cdb, uint32_t edtl)
{
        memset(c, 0, sizeof(*c));
        atomic_store(&nx->ua[lun], 0); /* state changes made here raise unit attentions */
        memcpy(c->cdb, cdb, 16);
        c->cdb_len = 16;
        c->lun = lun;
        c->nexus = nx;
        c->edtl = edtl;
        c->buf = b;
        c->buf_len = 2 * CORE_MAX_TRANSFER_BYTES;
        c->reactor = rt_get(0);
        c->done = cmd_done;
}

static void exec_msg(void *arg)
{
        scsi_cmd_exec(arg);
}

/* EXTENDED COPY(LID1) of a len-byte parameter list through nx to lun; returns cmd's status. */
static uint8_t xcopy(struct scsi_nexus *nx, uint64_t lun, const uint8_t *pl, uint32_t len)
{
        uint8_t cdb[16] = {0x83, 0x00};
        slate_put_be(cdb + 10, 4, len);
        prep(&cmd, buf, nx, lun, cdb, len);
        if (scsi_cmd_parse(&cmd) == SCSI_PARSE_DONE)
                return cmd.status;
        assert_int_equal(cmd.data_out_len, len);
        memcpy(cmd.buf, pl, len);
        pending = 1;
        rt_msg_send(rt_get(0), exec_msg, &cmd);
        wait_all();
        return cmd.status;
}

/* EXTENDED COPY(LID4) of a len-byte parameter list through nx to lun; returns cmd's status. */
static uint8_t xcopy4(struct scsi_nexus *nx, uint64_t lun, const uint8_t *pl, uint32_t len)
{
        uint8_t cdb[16] = {0x83, 0x01};
        slate_put_be(cdb + 10, 4, len);
        prep(&cmd, buf, nx, lun, cdb, len);
        if (scsi_cmd_parse(&cmd) == SCSI_PARSE_DONE)
                return cmd.status;
        assert_int_equal(cmd.data_out_len, len);
        memcpy(cmd.buf, pl, len);
        pending = 1;
        rt_msg_send(rt_get(0), exec_msg, &cmd);
        wait_all();
        return cmd.status;
}

/* A RECEIVE command with a 4-byte LIST IDENTIFIER (05h, 06h, 07h), into buf2. */
static uint8_t rcr4(struct scsi_nexus *nx, uint8_t sa, uint32_t list_id, uint32_t alloc)
{
        uint8_t cdb[16] = {0x84, sa};
        slate_put_be(cdb + 2, 4, list_id);
        slate_put_be(cdb + 10, 4, alloc);
        prep(&cmd2, buf2, nx, 0, cdb, alloc);
        assert_int_equal(scsi_cmd_parse(&cmd2), SCSI_PARSE_DONE);
        return cmd2.status;
}

/* COPY OPERATION ABORT of list_id through nx. */
static uint8_t copy_op_abort(struct scsi_cmd *c, uint8_t *b, struct scsi_nexus *nx,
                             uint32_t list_id)
{
        uint8_t cdb[16] = {0x83, 0x1c};
        slate_put_be(cdb + 2, 4, list_id);
        prep(c, b, nx, 0, cdb, 0);
        assert_int_equal(scsi_cmd_parse(c), SCSI_PARSE_DONE);
        return c->status;
}

/* RECEIVE COPY RESULTS service action sa for list_id, into buf2. */
static uint8_t rcr(struct scsi_nexus *nx, uint8_t sa, uint8_t list_id, uint32_t alloc)
{
        uint8_t cdb[16] = {0x84, sa, list_id};
        slate_put_be(cdb + 10, 4, alloc);
        prep(&cmd2, buf2, nx, 0, cdb, alloc);
        assert_int_equal(scsi_cmd_parse(&cmd2), SCSI_PARSE_DONE);
        return cmd2.status;
}

static void expect_sense(const struct scsi_cmd *c, uint8_t key, uint8_t asc, uint8_t ascq)
{
        assert_int_equal(c->status, SAM_STAT_CHECK_CONDITION);
        assert_int_equal(c->sense[0], 0x70);
        assert_int_equal(c->sense[2] & 0x0f, key);
        assert_int_equal(c->sense[12], asc);
        assert_int_equal(c->sense[13], ascq);
}

/* An identification CSCD (E4h) for the LU at lun of nx's target, from its VPD 83h NAA designator.
 */
static void cscd(uint8_t *d, struct scsi_nexus *nx, uint64_t lun, uint32_t block_size)
{
        uint8_t cdb[16] = {0x12, 0x01, 0x83, 0x00, 0xff};
        prep(&cmd2, buf2, nx, lun, cdb, 255);
        assert_int_equal(scsi_cmd_parse(&cmd2), SCSI_PARSE_DONE);
        assert_int_equal(cmd2.status, SAM_STAT_GOOD);
        const uint8_t *naa = buf2 + 4; /* the NAA designator comes first */
        assert_int_equal(naa[1] & 0x0f, 3);
        memset(d, 0, 32);
        d[0] = 0xe4;
        memcpy(d + 4, naa, 4u + naa[3]);
        d[4] &= 0x0f;
        slate_put_be(d + 29, 3, block_size);
}

static uint32_t seg_b2b(uint8_t *d, uint16_t src, uint16_t dst, uint16_t nlb, uint64_t src_lba,
                        uint64_t dst_lba)
{
        memset(d, 0, 28);
        d[0] = 0x02;
        slate_put_be(d + 2, 2, 0x18);
        slate_put_be(d + 4, 2, src);
        slate_put_be(d + 6, 2, dst);
        slate_put_be(d + 10, 2, nlb);
        slate_put_be(d + 12, 8, src_lba);
        slate_put_be(d + 20, 8, dst_lba);
        return 28;
}

/* A block with offset -> block with offset segment (0Ah, SPC-5 6.4.6.12). */
static uint32_t seg_off(uint8_t *d, uint16_t src, uint16_t dst, uint32_t nbytes, uint64_t src_lba,
                        uint64_t dst_lba, uint16_t src_off, uint16_t dst_off)
{
        memset(d, 0, 32);
        d[0] = 0x0a;
        slate_put_be(d + 2, 2, 0x1c);
        slate_put_be(d + 4, 2, src);
        slate_put_be(d + 6, 2, dst);
        slate_put_be(d + 8, 4, nbytes);
        slate_put_be(d + 12, 8, src_lba);
        slate_put_be(d + 20, 8, dst_lba);
        slate_put_be(d + 28, 2, src_off);
        slate_put_be(d + 30, 2, dst_off);
        return 32;
}

/* The 48-byte EXTENDED COPY(LID4) header (SPC-5 6.4.2). */
static void hdr4(uint8_t *p, uint32_t list_id, uint8_t usage, bool immed, uint32_t tdll,
                 uint32_t sdll)
{
        memset(p, 0, 48);
        p[0] = 0x01;
        p[1] = (uint8_t)(usage << 3);
        slate_put_be(p + 2, 2, 0x20);
        p[15] = immed ? 0x01 : 0x00;
        p[16] = 0xff;
        slate_put_be(p + 20, 4, list_id);
        slate_put_be(p + 42, 2, tdll);
        slate_put_be(p + 44, 2, sdll);
}

static void hdr(uint8_t *p, uint8_t list_id, uint8_t usage, uint32_t tdll, uint32_t sdll)
{
        memset(p, 0, 16);
        p[0] = list_id;
        p[1] = (uint8_t)(usage << 3);
        slate_put_be(p + 2, 2, tdll);
        slate_put_be(p + 8, 4, sdll);
}

/* A list: CSCD 0 = (nx_src, lun_src), CSCD 1 = (nx_dst, lun_dst), one segment. */
static uint32_t list2(uint8_t list_id, uint8_t usage, struct scsi_nexus *ns_nx, uint64_t src_lun,
                      uint32_t src_bs, struct scsi_nexus *nd_nx, uint64_t dst_lun, uint32_t dst_bs,
                      uint16_t nlb, uint64_t src_lba, uint64_t dst_lba)
{
        cscd(list + 16, ns_nx, src_lun, src_bs);
        cscd(list + 48, nd_nx, dst_lun, dst_bs);
        seg_b2b(list + 80, 0, 1, nlb, src_lba, dst_lba);
        hdr(list, list_id, usage, 64, 28);
        return 108;
}

/* ---- fixtures ---- */

static struct core_ns *mk_be(const char *name, const char *be, uint32_t bs)
{
        struct core_ns_params p = {
            .name = name, .backend = be, .size_bytes = (uint64_t)NBLK * 512, .block_size = bs};
        struct core_ns *ns = NULL;
        char err[256];
        assert_int_equal(core_ns_create(&p, &ns, err, sizeof(err)), 0);
        return ns;
}

static struct core_ns *mk(const char *name, uint32_t bs)
{
        return mk_be(name, "mem", bs);
}

static int setup(void **st)
{
        (void)st;
        snprintf(state_dir, sizeof(state_dir), "/tmp/slate-test-xcopy-XXXXXX");
        if (!mkdtemp(state_dir))
                return -1;
        core_set_state_dir(state_dir);
        if (rt_init(1) || rt_start())
                return -1;
        n0 = mk("x0", 512);
        n1 = mk("x1", 512);
        n4k = mk("x4k", 4096);
        nf = mk_be("xf", "file", 512);
        scsi_target_init(&ta, "iqn.2024-01.org.slate:a", 1);
        scsi_target_init(&tb, "iqn.2024-01.org.slate:b", 2);
        assert_int_equal(scsi_target_map_lun(&ta, 0, n0), 0);
        assert_int_equal(scsi_target_map_lun(&ta, 1, n4k), 0);
        assert_int_equal(scsi_target_map_lun(&ta, 2, nf), 0);
        assert_int_equal(scsi_target_map_lun(&tb, 0, n1), 0);
        scsi_nexus_init(&nxa, &ta, "iqn.init:one,i,0x1", "iqn.2024-01.org.slate:a,t,0x1", NULL, 0);
        scsi_nexus_init(&nxb, &tb, "iqn.init:one,i,0x2", "iqn.2024-01.org.slate:b,t,0x2", NULL, 0);
        scsi_nexus_init(&nxc, &tb, "iqn.init:two,i,0x1", "iqn.2024-01.org.slate:b,t,0x2", NULL, 0);
        for (unsigned l = 0; l < SCSI_MAX_LUNS; l++) {
                atomic_store(&nxa.ua[l], 0);
                atomic_store(&nxb.ua[l], 0);
                atomic_store(&nxc.ua[l], 0);
        }
        buf = calloc(1, 2 * CORE_MAX_TRANSFER_BYTES);
        buf2 = calloc(1, 2 * CORE_MAX_TRANSFER_BYTES);
        list = calloc(1, 4096);
        return 0;
}

static int teardown(void **st)
{
        (void)st;
        scsi_nexus_fini(&nxa);
        scsi_nexus_fini(&nxb);
        scsi_nexus_fini(&nxc);
        scsi_target_unmap_lun(&ta, 0);
        scsi_target_unmap_lun(&ta, 1);
        scsi_target_unmap_lun(&ta, 2);
        scsi_target_unmap_lun(&tb, 0);
        scsi_target_fini(&ta);
        scsi_target_fini(&tb);
        rt_stop();
        rt_join();
        rt_fini();
        core_ns_shutdown_all();
        free(buf);
        free(buf2);
        free(list);
        char c[300];
        snprintf(c, sizeof(c), "rm -rf %s", state_dir);
        return system(c) == 0 ? 0 : -1;
}

/* ---- the parameter list, without executing ---- */

static void expect_il(const uint8_t *p, uint32_t len, uint8_t asc, uint8_t ascq, int field)
{
        struct scsi_xcopy_list l;
        struct scsi_xcopy_err e;
        assert_int_equal(scsi_xcopy_parse_list(p, len, false, &l, &e), -EINVAL);
        assert_false(e.copy_aborted);
        assert_int_equal(e.asc, asc);
        assert_int_equal(e.ascq, ascq);
        assert_int_equal(e.field, field);
}

static void test_param_list(void **st)
{
        struct scsi_xcopy_list l;
        struct scsi_xcopy_err e;
        uint32_t len;
        (void)st;
        len = list2(1, 0, &nxa, 0, 512, &nxa, 0, 512, 8, 0, 100);
        assert_int_equal(scsi_xcopy_parse_list(list, len, false, &l, &e), 0);
        assert_int_equal(l.ncscd, 2);
        assert_int_equal(l.nseg, 1);
        assert_int_equal(l.seg[0].dst, 1);
        assert_int_equal(l.seg[0].nlb, 8);
        assert_int_equal(l.seg[0].dst_lba, 100);

        expect_il(list, 15, 0x1a, 0x00, -1);      /* shorter than the header */
        expect_il(list, len - 1, 0x1a, 0x00, -1); /* truncated segment */
        list[1] = 1 << 3;                         /* LIST ID USAGE 01b: reserved */
        expect_il(list, len, 0x26, 0x00, 1);
        list[1] = 3 << 3; /* 11b needs LIST IDENTIFIER 0 */
        expect_il(list, len, 0x26, 0x00, 0);
        list[1] = 0;
        slate_put_be(list + 12, 4, 4); /* inline data: none supported */
        expect_il(list, len + 4, 0x26, 0x00, 12);
        slate_put_be(list + 12, 4, 0);
        list[48] = 0xe0; /* FC N_Port_Name CSCD */
        expect_il(list, len, 0x26, 0x07, 48);
        list[48] = 0xe4;
        list[17] = 0x01; /* peripheral device type 1 */
        expect_il(list, len, 0x26, 0x00, 17);
        list[17] = 0xc0 | 0x20; /* LU ID TYPE and NUL: ignored for E4h (SPC-4) */
        assert_int_equal(scsi_xcopy_parse_list(list, len, false, &l, &e), 0);
        list[17] = 0;
        list[80] = 0x03; /* stream -> stream segment */
        expect_il(list, len, 0x26, 0x09, 80);
        list[80] = 0x02;
        list[83] = 0x14; /* wrong descriptor length for 02h */
        expect_il(list, len, 0x26, 0x00, 82);
        list[83] = 0x18;

        /* One CSCD too many, one segment too many, and both: the list-length limit first. */
        memset(list, 0, 4096);
        for (unsigned i = 0; i <= SCSI_XCOPY_MAX_CSCD; i++)
                cscd(list + 16 + 32 * i, &nxa, 0, 512);
        seg_b2b(list + 16 + 32 * (SCSI_XCOPY_MAX_CSCD + 1), 0, 0, 1, 0, 1);
        hdr(list, 1, 0, 32 * (SCSI_XCOPY_MAX_CSCD + 1), 28);
        expect_il(list, 16 + 32 * (SCSI_XCOPY_MAX_CSCD + 1) + 28, 0x26, 0x06, 2);
        memset(list, 0, 4096);
        cscd(list + 16, &nxa, 0, 512);
        for (unsigned i = 0; i <= SCSI_XCOPY_MAX_SEGS; i++)
                seg_b2b(list + 48 + 28 * i, 0, 0, 1, 0, 1);
        hdr(list, 1, 0, 32, 28 * (SCSI_XCOPY_MAX_SEGS + 1));
        expect_il(list, 48 + 28 * (SCSI_XCOPY_MAX_SEGS + 1), 0x26, 0x08, 8);
        hdr(list, 1, 0, 32 * (SCSI_XCOPY_MAX_CSCD + 1), 32 * (SCSI_XCOPY_MAX_SEGS + 1));
        expect_il(list, 4096, 0x1a, 0x00, -1);
}

/* ---- execution ---- */

static void test_copy_within_and_across(void **st)
{
        uint32_t len;
        (void)st;
        /* Within LUN 0 of target A. */
        fill(n0, 0, 64, 0xa1);
        len = list2(1, 0, &nxa, 0, 512, &nxa, 0, 512, 64, 0, 1000);
        assert_int_equal(xcopy(&nxa, 0, list, len), SAM_STAT_GOOD);
        expect_blocks(n0, 1000, 64, 0xa1, 0);

        /* From target A's LU to target B's, sent to A: the same initiator is logged in to B. */
        fill(n1, 0, 300, 0x00);
        len = list2(2, 0, &nxa, 0, 512, &nxb, 0, 512, 64, 0, 200);
        assert_int_equal(xcopy(&nxa, 0, list, len), SAM_STAT_GOOD);
        expect_blocks(n1, 200, 64, 0xa1, 0);

        /* Two segments, one of them empty, sent to B's LU (the destination). */
        memset(list, 0, 4096);
        cscd(list + 16, &nxa, 0, 512);
        cscd(list + 48, &nxb, 0, 512);
        seg_b2b(list + 80, 0, 1, 0, 0, 0);
        seg_b2b(list + 108, 0, 1, 16, 8, 4000);
        hdr(list, 3, 0, 64, 56);
        assert_int_equal(xcopy(&nxb, 0, list, 136), SAM_STAT_GOOD);
        expect_blocks(n1, 4000, 16, 0xa1, 8);
        /* FAILED SEGMENT DETAILS of a copy that did not fail, RECEIVE DATA: nothing. */
        assert_int_equal(rcr(&nxb, 0x04, 3, 64), SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf2), 0);
        assert_int_equal(rcr(&nxb, 0x01, 3, 64), SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf2), 0);
        /* COPY STATUS: completed without errors, both segments, 16 blocks. */
        assert_int_equal(rcr(&nxb, 0x00, 3, 64), SAM_STAT_GOOD);
        assert_int_equal(cmd2.data_in_len, 12);
        assert_int_equal(slate_be32(buf2), 8);
        assert_int_equal(buf2[4], 0x01);
        assert_int_equal(slate_be16(buf2 + 5), 2);
        assert_int_equal(buf2[7], 0);
        assert_int_equal(slate_be32(buf2 + 8), 16 * 512);
        /* Returned once, then discarded (SPC-5 6.25). */
        rcr(&nxb, 0x00, 3, 64);
        expect_sense(&cmd2, SK_ILLEGAL_REQUEST, 0x24, 0x00);
        /* Results are per I_T nexus: not through nxa. */
        rcr(&nxa, 0x00, 3, 64);
        expect_sense(&cmd2, SK_ILLEGAL_REQUEST, 0x24, 0x00);
}

static void test_copy_aborted(void **st)
{
        uint32_t len;
        (void)st;
        /* Another initiator (nxc, on B only) names A's LU: not reachable for it. */
        len = list2(4, 0, &nxa, 0, 512, &nxb, 0, 512, 8, 0, 0);
        assert_int_equal(xcopy(&nxc, 0, list, len), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_COPY_ABORTED, 0x0d, 0x02);
        assert_int_equal(slate_be32(cmd.sense + 8), 0); /* segment 0 */

        /* Beyond the destination's end: COPY ABORTED, segment pointer at DESTINATION LBA. */
        len = list2(5, 0, &nxa, 0, 512, &nxa, 0, 512, 8, 0, NBLK - 4);
        assert_int_equal(xcopy(&nxa, 0, list, len), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_COPY_ABORTED, 0x00, 0x00);
        assert_int_equal(cmd.sense[15], 0x80 | 0x20); /* SKSV, SD */
        assert_int_equal(slate_be16(cmd.sense + 16), 20);
        /* FAILED SEGMENT DETAILS: the status and sense, once. */
        assert_int_equal(rcr(&nxa, 0x04, 5, 1024), SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf2), 56u + 18);
        assert_int_equal(buf2[56], SAM_STAT_CHECK_CONDITION);
        assert_int_equal(slate_be16(buf2 + 58), 18);
        assert_int_equal(buf2[60 + 2] & 0x0f, SK_COPY_ABORTED);
        assert_int_equal(rcr(&nxa, 0x04, 5, 1024), SAM_STAT_GOOD);
        assert_int_equal(slate_be32(buf2), 0);
        assert_int_equal(rcr(&nxa, 0x00, 5, 64), SAM_STAT_GOOD);
        assert_int_equal(buf2[4], 0x02); /* completed with errors */

        /* A segment naming a CSCD that is not in the list. */
        len = list2(6, 0, &nxa, 0, 512, &nxa, 0, 512, 8, 0, 0);
        list[87] = 2;
        assert_int_equal(xcopy(&nxa, 0, list, len), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_COPY_ABORTED, 0x08, 0x04);
        assert_int_equal(slate_be16(cmd.sense + 16), 6);

        /* Different block sizes (512 -> 4096). */
        len = list2(7, 0, &nxa, 0, 512, &nxa, 1, 4096, 8, 0, 0);
        assert_int_equal(xcopy(&nxa, 0, list, len), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_COPY_ABORTED, 0x26, 0x0c);
        /* A DISK BLOCK LENGTH that is not the LU's. */
        len = list2(7, 0, &nxa, 0, 4096, &nxa, 0, 512, 8, 0, 0);
        assert_int_equal(xcopy(&nxa, 0, list, len), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_COPY_ABORTED, 0x26, 0x0c);

        /* The destination write protected: the core's status, as COPY ABORTED. */
        assert_int_equal(core_ns_set_wp(n1, CORE_WP_CONFIG, true, NULL), 0);
        len = list2(8, 0, &nxa, 0, 512, &nxb, 0, 512, 8, 0, 0);
        assert_int_equal(xcopy(&nxa, 0, list, len), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_COPY_ABORTED, 0x27, 0x00);
        assert_int_equal(core_ns_set_wp(n1, CORE_WP_CONFIG, false, NULL), 0);
}

/* Two EXTENDED COPY commands of one nexus with one LIST ID, the second while the first runs. */
static void exec_two(void *arg)
{
        (void)arg;
        scsi_cmd_exec(&cmd);
        scsi_cmd_exec(&cmd2);
}

static void exec_and_abort(void *arg)
{
        (void)arg;
        scsi_cmd_exec(&cmd);
        scsi_cmd_abort(&cmd);
}

static void test_duplicate_and_abort(void **st)
{
        uint32_t len;
        uint8_t cdb[16] = {0x83, 0x00};
        (void)st;
        len = list2(9, 0, &nxa, 0, 512, &nxb, 0, 512, 4096, 0, 0);
        slate_put_be(cdb + 10, 4, len);
        prep(&cmd, buf, &nxa, 0, cdb, len);
        assert_int_equal(scsi_cmd_parse(&cmd), SCSI_PARSE_EXEC);
        memcpy(buf, list, len);
        prep(&cmd2, buf2, &nxa, 0, cdb, len);
        assert_int_equal(scsi_cmd_parse(&cmd2), SCSI_PARSE_EXEC);
        memcpy(buf2, list, len);
        pending = 2;
        rt_msg_send(rt_get(0), exec_two, NULL);
        wait_all();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        expect_sense(&cmd2, SK_ILLEGAL_REQUEST, 0x00, 0x16); /* OPERATION IN PROGRESS */
        /* Once it has ended, the LIST ID may be used again. */
        assert_int_equal(xcopy(&nxa, 0, list, len), SAM_STAT_GOOD);

        /* ABORT TASK while it runs: TASK ABORTED, and its status says so. */
        prep(&cmd, buf, &nxa, 0, cdb, len);
        assert_int_equal(scsi_cmd_parse(&cmd), SCSI_PARSE_EXEC);
        memcpy(buf, list, len);
        pending = 1;
        rt_msg_send(rt_get(0), exec_and_abort, NULL);
        wait_all();
        assert_int_equal(cmd.status, SAM_STAT_TASK_ABORTED);
        assert_int_equal(rcr(&nxa, 0x00, 9, 64), SAM_STAT_GOOD);
        assert_int_equal(buf2[4], 0x02);
}

static void test_results_and_vpd(void **st)
{
        uint32_t len;
        uint8_t cdb[16] = {0x12, 0x01, 0x8f, 0x04, 0x00};
        (void)st;
        /* OPERATING PARAMETERS: the limits the parser enforces. */
        assert_int_equal(rcr(&nxa, 0x03, 0, 1024), SAM_STAT_GOOD);
        assert_int_equal(cmd2.data_in_len, 47);
        assert_int_equal(slate_be32(buf2), 43);
        assert_int_equal(buf2[4] & 1, 1);
        assert_int_equal(slate_be16(buf2 + 8), SCSI_XCOPY_MAX_CSCD);
        assert_int_equal(slate_be16(buf2 + 10), SCSI_XCOPY_MAX_SEGS);
        assert_int_equal(slate_be32(buf2 + 12), SCSI_XCOPY_MAX_DESC_LIST);
        assert_int_equal(slate_be32(buf2 + 16), 0xffffu * 512);
        assert_int_equal(buf2[43], 3); /* 02h, 0Ah, E4h */
        assert_int_equal(buf2[44], 0x02);
        assert_int_equal(buf2[45], 0x0a);
        assert_int_equal(buf2[46], 0xe4);
        /* An unknown LIST ID; LIST ID USAGE 11b keeps nothing. */
        rcr(&nxa, 0x00, 0x77, 64);
        expect_sense(&cmd2, SK_ILLEGAL_REQUEST, 0x24, 0x00);
        len = list2(0, 3, &nxa, 0, 512, &nxa, 0, 512, 1, 0, 1);
        assert_int_equal(xcopy(&nxa, 0, list, len), SAM_STAT_GOOD);
        rcr(&nxa, 0x00, 0, 64);
        expect_sense(&cmd2, SK_ILLEGAL_REQUEST, 0x24, 0x00);
        /* I_T nexus loss discards the nexus's results. */
        len = list2(10, 0, &nxc, 0, 512, &nxc, 0, 512, 1, 0, 1);
        assert_int_equal(xcopy(&nxc, 0, list, len), SAM_STAT_GOOD);
        assert_int_equal(rcr(&nxc, 0x00, 10, 64), SAM_STAT_GOOD);
        scsi_nexus_fini(&nxc);
        scsi_nexus_init(&nxc, &tb, "iqn.init:two,i,0x1", "iqn.2024-01.org.slate:b,t,0x2", NULL, 0);
        atomic_store(&nxc.ua[0], 0);
        rcr(&nxc, 0x00, 10, 64);
        expect_sense(&cmd2, SK_ILLEGAL_REQUEST, 0x24, 0x00);

        /* 3PC, VPD 00h lists 8Fh, and 8Fh's descriptors. */
        uint8_t std[16] = {0x12, 0, 0, 0, 96};
        prep(&cmd2, buf2, &nxa, 0, std, 96);
        scsi_cmd_parse(&cmd2);
        assert_int_equal(buf2[5] & 0x08, 0x08);
        uint8_t sup[16] = {0x12, 1, 0, 0, 64};
        prep(&cmd2, buf2, &nxa, 0, sup, 64);
        scsi_cmd_parse(&cmd2);
        assert_non_null(memchr(buf2 + 4, 0x8f, slate_be16(buf2 + 2)));
        prep(&cmd2, buf2, &nxa, 0, cdb, 1024);
        scsi_cmd_parse(&cmd2);
        assert_int_equal(cmd2.status, SAM_STAT_GOOD);
        assert_int_equal(buf2[1], 0x8f);
        uint32_t plen = slate_be16(buf2 + 2);
        bool cmds = false, params = false, gco = false, rod = false, descs = false;
        for (uint32_t off = 4; off + 4 <= 4 + plen; off += 4u + slate_be16(buf2 + off + 2)) {
                const uint8_t *d = buf2 + off;
                uint16_t type = slate_be16(d);
                assert_int_equal(slate_be16(d + 2) % 4, 0);
                if (type == 0x0001) {
                        /* 83h {00h 01h 10h 11h 1Ch}, 84h {00h 01h 03h 04h 05h 06h 07h} */
                        static const uint8_t want[] = {0x83, 5, 0x00, 0x01, 0x10, 0x11, 0x1c, 0x84,
                                                       7,    0, 1,    3,    4,    5,    6,    7};
                        assert_int_equal(d[4], sizeof(want));
                        assert_memory_equal(d + 5, want, sizeof(want));
                        cmds = true;
                } else if (type == 0x0004) {
                        assert_int_equal(slate_be16(d + 8), SCSI_XCOPY_MAX_CSCD);
                        assert_int_equal(slate_be16(d + 10), SCSI_XCOPY_MAX_SEGS);
                        assert_int_equal(slate_be32(d + 12), SCSI_XCOPY_MAX_DESC_LIST);
                        params = true;
                } else if (type == 0x0008) {
                        static const uint8_t want[] = {3, 0x02, 0x0a, 0xe4};
                        assert_memory_equal(d + 4, want, sizeof(want));
                        descs = true;
                } else if (type == 0x0000) {
                        assert_int_equal(slate_be16(d + 10), SCSI_ODX_MAX_RANGES);
                        assert_int_equal(slate_be32(d + 16), SCSI_ODX_DEFAULT_INACTIVITY_S);
                        rod = true;
                } else if (type == 0x8001) {
                        assert_int_equal(slate_be32(d + 12), 0xffffu * 512);
                        gco = true;
                }
        }
        assert_true(cmds && params && gco && rod && descs);
}

/* ---- 0Ah segments and EXTENDED COPY(LID4) ---- */

static void expect_il4(const uint8_t *p, uint32_t len, uint8_t asc, uint8_t ascq, int field,
                       int bit)
{
        struct scsi_xcopy_list l;
        struct scsi_xcopy_err e;
        assert_int_equal(scsi_xcopy_parse_list(p, len, true, &l, &e), -EINVAL);
        assert_false(e.copy_aborted);
        assert_int_equal(e.asc, asc);
        assert_int_equal(e.ascq, ascq);
        assert_int_equal(e.field, field);
        if (bit >= 0)
                assert_int_equal(e.bit, bit);
}

/* A LID4 list: CSCD 0 = LUN 0 of A, CSCD 1 = LUN 0 of B, then the segments at 112. */
static uint32_t list4(uint32_t list_id, uint8_t usage, bool immed, uint32_t sdll)
{
        cscd(list + 48, &nxa, 0, 512);
        cscd(list + 80, &nxb, 0, 512);
        hdr4(list, list_id, usage, immed, 64, sdll);
        return 112 + sdll;
}

static void test_param_list_0a_lid4(void **st)
{
        struct scsi_xcopy_list l;
        struct scsi_xcopy_err e;
        uint32_t len;
        (void)st;
        /* 0Ah in a LID1 list, after a 02h: both parsed, each at its own length. */
        memset(list, 0, 4096);
        cscd(list + 16, &nxa, 0, 512);
        seg_b2b(list + 48, 0, 0, 4, 1, 2);
        seg_off(list + 76, 0, 0, 8192, 10, 20, 512, 0);
        hdr(list, 1, 0, 32, 60);
        assert_int_equal(scsi_xcopy_parse_list(list, 108, false, &l, &e), 0);
        assert_int_equal(l.nseg, 2);
        assert_int_equal(l.seg[1].type, 0x0a);
        assert_int_equal(l.seg[1].nbytes, 8192);
        assert_int_equal(l.seg[1].src_lba, 10);
        assert_int_equal(l.seg[1].dst_lba, 20);
        assert_int_equal(l.seg[1].src_off, 512);
        assert_int_equal(l.seg[1].dst_off, 0);
        expect_il(list, 107, 0x1a, 0x00, -1); /* the 0Ah segment cut short */
        list[79] = 0x18;                      /* 02h's length on a 0Ah descriptor */
        expect_il(list, 108, 0x26, 0x00, 78);
        list[79] = 0x1c;
        list[77] = 0x02; /* no DC bit in 0Ah */
        expect_il(list, 108, 0x26, 0x00, 77);
        list[77] = 0x01; /* CAT is */
        assert_int_equal(scsi_xcopy_parse_list(list, 108, false, &l, &e), 0);

        /* LID4: the 48-byte header, a 4-byte LIST IDENTIFIER, IMMED. */
        memset(list, 0, 4096);
        len = list4(0x12345678, 0, true, 32);
        seg_off(list + 112, 0, 1, 4096, 0, 0, 0, 0);
        assert_int_equal(scsi_xcopy_parse_list(list, len, true, &l, &e), 0);
        assert_true(l.lid4);
        assert_int_equal(l.list_id, 0x12345678);
        assert_true(l.immed);
        assert_int_equal(l.ncscd, 2);
        assert_int_equal(l.nseg, 1);
        /* The same bytes are no LID1 list (LIST ID 01h, CSCD list length 0020h, ...). */
        assert_int_equal(scsi_xcopy_parse_list(list, len, false, &l, &e), -EINVAL);

        expect_il4(list, 47, 0x1a, 0x00, -1, -1); /* shorter than the header */
        expect_il4(list, len - 1, 0x1a, 0x00, -1, -1);
        list[0] = 0x02; /* PARAMETER LIST FORMAT */
        expect_il4(list, len, 0x26, 0x00, 0, 7);
        list[0] = 0x01;
        list[3] = 0x1c; /* HEADER CSCD DESCRIPTOR LIST LENGTH */
        expect_il4(list, len, 0x26, 0x00, 2, 7);
        list[3] = 0x20;
        list[9] = 1; /* reserved */
        expect_il4(list, len, 0x26, 0x00, 9, 7);
        list[9] = 0;
        list[15] = 0x03; /* IMMED with G_SENSE: INVALID FIELD IN CDB */
        expect_il4(list, len, 0x24, 0x00, -1, -1);
        list[15] = 0x02; /* G_SENSE alone: our choice, refused */
        expect_il4(list, len, 0x26, 0x00, 15, 1);
        list[15] = 0x01;
        list[1] = 3 << 3; /* IMMED with no list identifier: INVALID FIELD IN CDB */
        expect_il4(list, len, 0x24, 0x00, -1, -1);
        list[15] = 0x00; /* without IMMED, 11b needs LIST IDENTIFIER 0 */
        expect_il4(list, len, 0x26, 0x00, 20, 7);
        list[1] = 0;
        list[16] = 0xe4; /* HEADER CSCD DESCRIPTOR TYPE CODE must be FFh */
        expect_il4(list, len, 0x26, 0x00, 16, 7);
        list[16] = 0xff;
        list[30] = 1; /* reserved */
        expect_il4(list, len, 0x26, 0x00, 30, 7);
        list[30] = 0;
        slate_put_be(list + 46, 2, 4); /* inline data */
        expect_il4(list, len + 4, 0x26, 0x00, 46, 7);
        slate_put_be(list + 46, 2, 0);
        list[80] = 0xe9; /* a CSCD type we do not take */
        expect_il4(list, len, 0x26, 0x07, 80, 7);
        list[80] = 0xe4;
        list[112] = 0x01; /* stream -> block segment */
        expect_il4(list, len, 0x26, 0x09, 112, 7);
        list[112] = 0x0a;
        assert_int_equal(scsi_xcopy_parse_list(list, len, true, &l, &e), 0);

        /* Too many CSCDs, too many segments: the LID4 length fields are pointed at. */
        memset(list, 0, 4096);
        for (unsigned i = 0; i <= SCSI_XCOPY_MAX_CSCD; i++)
                cscd(list + 48 + 32 * i, &nxa, 0, 512);
        hdr4(list, 1, 0, false, 32 * (SCSI_XCOPY_MAX_CSCD + 1), 32);
        seg_off(list + 48 + 32 * (SCSI_XCOPY_MAX_CSCD + 1), 0, 0, 512, 0, 1, 0, 0);
        expect_il4(list, 48 + 32 * (SCSI_XCOPY_MAX_CSCD + 2), 0x26, 0x06, 42, 7);
        memset(list, 0, 4096);
        cscd(list + 48, &nxa, 0, 512);
        for (unsigned i = 0; i <= SCSI_XCOPY_MAX_SEGS; i++)
                seg_b2b(list + 80 + 28 * i, 0, 0, 1, 0, 1);
        hdr4(list, 1, 0, false, 32, 28 * (SCSI_XCOPY_MAX_SEGS + 1));
        expect_il4(list, 80 + 28 * (SCSI_XCOPY_MAX_SEGS + 1), 0x26, 0x08, 44, 7);
}

static void test_copy_0a(void **st)
{
        (void)st;
        fill(n0, 0, 256, 0x0a);
        memset(list, 0, 4096);
        cscd(list + 16, &nxa, 0, 512);
        cscd(list + 48, &nxb, 0, 512);
        /* Offsets 0: 64 blocks 0 -> 1000; a source offset of one block: 10 blocks 21 -> 2000. */
        seg_off(list + 80, 0, 1, 64 * 512, 0, 1000, 0, 0);
        seg_off(list + 112, 0, 1, 10 * 512, 20, 2000, 512, 0);
        hdr(list, 20, 0, 64, 64);
        assert_int_equal(xcopy(&nxa, 0, list, 144), SAM_STAT_GOOD);
        expect_blocks(n1, 1000, 64, 0x0a, 0);
        expect_blocks(n1, 2000, 10, 0x0a, 21);
        assert_int_equal(rcr(&nxa, 0x00, 20, 64), SAM_STAT_GOOD);
        assert_int_equal(buf2[4], 0x01);
        assert_int_equal(slate_be16(buf2 + 5), 2);
        assert_int_equal(slate_be32(buf2 + 8), 74 * 512);

        /* What the engine cannot do: part of a block.  COPY ABORTED, INVALID FIELD IN PARAMETER
         * LIST, the segment number and a pointer at the field; nothing copied. */
        static const struct {
                uint32_t nbytes;
                uint16_t src_off, dst_off;
                int field;
        } bad[] = {
            {100, 0, 0, 8},                 /* NUMBER OF BYTES */
            {512, 10, 0, 28},               /* SOURCE BLOCK DEVICE BYTE OFFSET */
            {512, 0, 511, 30},              /* DESTINATION BLOCK DEVICE BYTE OFFSET */
            {(0xffffu + 1) * 512, 0, 0, 8}, /* beyond MAXIMUM SEGMENT LENGTH */
        };
        fill(n1, 3000, 4, 0x3c);
        for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                seg_b2b(list + 80, 0, 1, 4, 0, 3000); /* segment 0 is fine */
                seg_off(list + 108, 0, 1, bad[i].nbytes, 0, 3000, bad[i].src_off, bad[i].dst_off);
                hdr(list, 21, 0, 64, 60);
                assert_int_equal(xcopy(&nxa, 0, list, 140), SAM_STAT_CHECK_CONDITION);
                expect_sense(&cmd, SK_COPY_ABORTED, 0x26, 0x00);
                assert_int_equal(slate_be32(cmd.sense + 8), 1); /* segment 1 */
                assert_int_equal(cmd.sense[15], 0x80 | 0x20);   /* SKSV, SD */
                assert_int_equal(slate_be16(cmd.sense + 16), bad[i].field);
                expect_blocks(n1, 3000, 4, 0x3c, 3000);
        }
        /* Beyond the end, counting the offset: the segment pointer names the LBA. */
        seg_off(list + 80, 0, 1, 512, 0, NBLK - 1, 0, 512);
        hdr(list, 22, 0, 64, 32);
        assert_int_equal(xcopy(&nxa, 0, list, 112), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_COPY_ABORTED, 0x00, 0x00);
        assert_int_equal(slate_be16(cmd.sense + 16), 20);
}

/* Poll RECEIVE COPY STATUS(LID4) until the operation is no longer in progress; its status. */
static uint8_t wait_lid4(struct scsi_nexus *nx, uint32_t list_id)
{
        for (unsigned i = 0; i < 1000000; i++) {
                assert_int_equal(rcr4(nx, 0x05, list_id, 1024), SAM_STAT_GOOD);
                if (buf2[5] < 0x10 || buf2[5] > 0x12)
                        return buf2[5];
                usleep(1000);
        }
        fail();
        return 0;
}

static void exec_msg_and_abort_op(void *arg)
{
        static uint8_t ab[64];
        (void)arg;
        scsi_cmd_exec(&cmd);
        /* The copy runs in the background; COPY OPERATION ABORT by its LIST ID. */
        assert_int_equal(copy_op_abort(&cmd2, ab, &nxa, 0x4404), SAM_STAT_GOOD);
}

static void test_lid4(void **st)
{
        uint32_t len;
        (void)st;
        fill(n0, 0, 4096, 0x44);
        /* Two segments (02h and 0Ah), A's LU to B's, sent to A. */
        memset(list, 0, 4096);
        len = list4(0xc4, 0, false, 60);
        seg_b2b(list + 112, 0, 1, 16, 0, 5000);
        seg_off(list + 140, 0, 1, 32 * 512, 100, 5100, 0, 0);
        assert_int_equal(xcopy4(&nxa, 0, list, len), SAM_STAT_GOOD);
        expect_blocks(n1, 5000, 16, 0x44, 0);
        expect_blocks(n1, 5100, 32, 0x44, 100);
        /* RECEIVE COPY STATUS(LID4): completed, in bytes, both segments. */
        assert_int_equal(rcr4(&nxa, 0x05, 0xc4, 1024), SAM_STAT_GOOD);
        assert_int_equal(cmd2.data_in_len, 32);
        assert_int_equal(slate_be32(buf2), 28);
        assert_int_equal(buf2[4], 0x01); /* EXTENDED COPY(LID4) */
        assert_int_equal(buf2[5], 0x01); /* completed without errors */
        assert_int_equal(slate_be32(buf2 + 8), 0xfffffffeu);
        assert_int_equal(buf2[12], SAM_STAT_GOOD);
        assert_int_equal(buf2[13], 0);
        assert_int_equal(buf2[15], 0x00);
        assert_int_equal(slate_be64(buf2 + 16), 48 * 512);
        assert_int_equal(slate_be16(buf2 + 24), 2);
        /* RECEIVE COPY DATA(LID4): the same, then HELD DATA LENGTH 0. */
        assert_int_equal(rcr4(&nxa, 0x06, 0xc4, 1024), SAM_STAT_GOOD);
        assert_int_equal(cmd2.data_in_len, 36);
        assert_int_equal(buf2[5], 0x01);
        assert_int_equal(slate_be32(buf2 + 32), 0);
        /* The LID1 commands do not see it; another nexus does not either. */
        rcr(&nxa, 0x00, 0xc4, 64);
        expect_sense(&cmd2, SK_ILLEGAL_REQUEST, 0x24, 0x00);
        rcr4(&nxb, 0x05, 0xc4, 1024);
        expect_sense(&cmd2, SK_ILLEGAL_REQUEST, 0x24, 0x00);
        /* RECEIVE ROD TOKEN INFORMATION: no token made by this operation. */
        assert_int_equal(rcr4(&nxa, 0x07, 0xc4, 1024), SAM_STAT_GOOD);
        assert_int_equal(cmd2.data_in_len, 36);
        assert_int_equal(slate_be32(buf2 + 32), 0);

        /* A failing segment: COPY ABORTED, and RECEIVE COPY STATUS(LID4) keeps the sense. */
        memset(list, 0, 4096);
        len = list4(0x4402, 0, false, 28);
        seg_b2b(list + 112, 0, 1, 8, 0, NBLK - 4);
        assert_int_equal(xcopy4(&nxa, 0, list, len), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_COPY_ABORTED, 0x00, 0x00);
        assert_int_equal(rcr4(&nxa, 0x05, 0x4402, 1024), SAM_STAT_GOOD);
        assert_int_equal(buf2[5], 0x02); /* completed with errors */
        assert_int_equal(buf2[12], SAM_STAT_CHECK_CONDITION);
        assert_int_equal(buf2[14], 18);
        assert_int_equal(buf2[13], 20); /* a multiple of 4 */
        assert_int_equal(slate_be32(buf2), 28 + 20);
        assert_int_equal(buf2[32 + 2] & 0x0f, SK_COPY_ABORTED);

        /* IMMED: GOOD at once, the copy in the background, its end seen by polling. */
        fill(n1, 0, 4096, 0x00);
        memset(list, 0, 4096);
        len = list4(0x4403, 0, true, 28);
        seg_b2b(list + 112, 0, 1, 4096, 0, 0);
        assert_int_equal(xcopy4(&nxa, 0, list, len), SAM_STAT_GOOD);
        assert_int_equal(wait_lid4(&nxa, 0x4403), 0x01);
        assert_int_equal(slate_be64(buf2 + 16), 4096 * 512);
        expect_blocks(n1, 0, 4096, 0x44, 0);

        /* COPY OPERATION ABORT of a background copy: terminated (60h), TASK ABORTED. */
        len = list4(0x4404, 0, true, 28);
        seg_b2b(list + 112, 0, 1, 4096, 0, 0);
        uint8_t cdb[16] = {0x83, 0x01};
        slate_put_be(cdb + 10, 4, len);
        prep(&cmd, buf, &nxa, 0, cdb, len);
        assert_int_equal(scsi_cmd_parse(&cmd), SCSI_PARSE_EXEC);
        memcpy(buf, list, len);
        pending = 1;
        rt_msg_send(rt_get(0), exec_msg_and_abort_op, NULL);
        wait_all();
        assert_int_equal(cmd.status, SAM_STAT_GOOD);
        assert_int_equal(wait_lid4(&nxa, 0x4404), 0x60);
        assert_int_equal(buf2[12], SAM_STAT_TASK_ABORTED);
        assert_true(slate_be64(buf2 + 16) < 4096 * 512);
        /* No copy operation with that LIST ID runs any more; none ever had this one. */
        static uint8_t ab[64];
        copy_op_abort(&cmd2, ab, &nxa, 0x4404);
        expect_sense(&cmd2, SK_ILLEGAL_REQUEST, 0x24, 0x00);
        copy_op_abort(&cmd2, ab, &nxa, 0x9999);
        expect_sense(&cmd2, SK_ILLEGAL_REQUEST, 0x24, 0x00);
        assert_int_equal(slate_be16(cmd2.sense + 16), 2);
}

/* ---- token copy ---- */

static uint8_t token[512];

/* POPULATE TOKEN through nx on lun with list_id over n ranges {lba, nlb}, then its token. */
static uint8_t populate(struct scsi_nexus *nx, uint64_t lun, uint32_t list_id, unsigned n,
                        const uint64_t *lba, const uint32_t *nlb)
{
        uint8_t cdb[16] = {0x83, 0x10};
        uint32_t len = 16 + 16 * n;
        memset(list, 0, len);
        slate_put_be(list, 2, len - 2);
        slate_put_be(list + 14, 2, 16 * n);
        for (unsigned i = 0; i < n; i++) {
                slate_put_be(list + 16 + 16 * i, 8, lba[i]);
                slate_put_be(list + 24 + 16 * i, 4, nlb[i]);
        }
        slate_put_be(cdb + 6, 4, list_id);
        slate_put_be(cdb + 10, 4, len);
        prep(&cmd, buf, nx, lun, cdb, len);
        if (scsi_cmd_parse(&cmd) == SCSI_PARSE_DONE)
                return cmd.status;
        memcpy(buf, list, len);
        pending = 1;
        rt_msg_send(rt_get(0), exec_msg, &cmd);
        wait_all();
        if (cmd.status != SAM_STAT_GOOD)
                return cmd.status;
        /* RECEIVE ROD TOKEN INFORMATION: completed, 512-byte token. */
        uint8_t rcdb[16] = {0x84, 0x07};
        slate_put_be(rcdb + 2, 4, list_id);
        slate_put_be(rcdb + 10, 4, 1024);
        prep(&cmd2, buf2, nx, lun, rcdb, 1024);
        assert_int_equal(scsi_cmd_parse(&cmd2), SCSI_PARSE_DONE);
        assert_int_equal(cmd2.status, SAM_STAT_GOOD);
        assert_int_equal(buf2[4], 0x10);
        assert_int_equal(buf2[5], 0x01);
        assert_int_equal(slate_be32(buf2 + 32), 514);
        memcpy(token, buf2 + 38, 512);
        return SAM_STAT_GOOD;
}

static uint8_t write_using(struct scsi_nexus *nx, uint64_t lun, uint32_t list_id,
                           const uint8_t *tok, uint64_t offset, uint64_t lba, uint32_t nlb)
{
        uint8_t cdb[16] = {0x83, 0x11};
        uint32_t len = 536 + 16;
        memset(list, 0, len);
        slate_put_be(list, 2, len - 2);
        slate_put_be(list + 8, 8, offset);
        memcpy(list + 16, tok, 512);
        slate_put_be(list + 534, 2, 16);
        slate_put_be(list + 536, 8, lba);
        slate_put_be(list + 544, 4, nlb);
        slate_put_be(cdb + 6, 4, list_id);
        slate_put_be(cdb + 10, 4, len);
        prep(&cmd, buf, nx, lun, cdb, len);
        if (scsi_cmd_parse(&cmd) == SCSI_PARSE_DONE)
                return cmd.status;
        memcpy(buf, list, len);
        pending = 1;
        rt_msg_send(rt_get(0), exec_msg, &cmd);
        wait_all();
        return cmd.status;
}

static void test_token_copy(void **st)
{
        static const uint64_t lba[] = {0, 500};
        static const uint32_t nlb[] = {32, 16};
        (void)st;
        fill(n0, 0, 32, 0xb1);
        fill(n0, 500, 16, 0xb2);
        assert_int_equal(populate(&nxa, 0, 0x1000, 2, lba, nlb), SAM_STAT_GOOD);
        assert_int_equal(slate_be32(token), 0x00800000u);
        assert_int_equal(slate_be16(token + 6), 0x1f8);
        assert_int_equal(token[16], 0xe4); /* creator LU: identification CSCD */
        assert_int_equal(slate_be64(token + 56), 48 * 512);
        /* Into target B's LU, through the same initiator's other nexus: the ROD's data in order. */
        assert_int_equal(write_using(&nxb, 0, 0x2000, token, 0, 6000, 48), SAM_STAT_GOOD);
        expect_blocks(n1, 6000, 32, 0xb1, 0);
        expect_blocks(n1, 6032, 16, 0xb2, 500);
        /* With an offset into the ROD, and more asked for than it holds: partial usage. */
        assert_int_equal(write_using(&nxb, 0, 0x2001, token, 30, 7000, 100), SAM_STAT_GOOD);
        expect_blocks(n1, 7000, 2, 0xb1, 30);
        expect_blocks(n1, 7002, 16, 0xb2, 500);
        uint8_t rcdb[16] = {0x84, 0x07, 0, 0, 0x20, 0x01};
        slate_put_be(rcdb + 10, 4, 1024);
        prep(&cmd2, buf2, &nxb, 0, rcdb, 1024);
        scsi_cmd_parse(&cmd2);
        assert_int_equal(buf2[4], 0x11);
        assert_int_equal(buf2[5], 0x03); /* completed, partial ROD token usage */
        assert_int_equal(slate_be64(buf2 + 16), 18);
        /* From a file-backed LU to a memory one and back, 16 MiB each way. */
        static const uint64_t l0[] = {0};
        static const uint32_t big[] = {NBLK / 2};
        fill(nf, 0, NBLK / 2, 0xf1);
        assert_int_equal(populate(&nxa, 2, 0x1002, 1, l0, big), SAM_STAT_GOOD);
        assert_int_equal(write_using(&nxb, 0, 0x2002, token, 0, 0, NBLK / 2), SAM_STAT_GOOD);
        expect_blocks(n1, 0, NBLK / 2, 0xf1, 0);
        assert_int_equal(populate(&nxb, 0, 0x1003, 1, l0, big), SAM_STAT_GOOD);
        assert_int_equal(write_using(&nxa, 2, 0x2003, token, 0, NBLK / 2, NBLK / 2), SAM_STAT_GOOD);
        expect_blocks(nf, NBLK / 2, NBLK / 2, 0xf1, 0);
        assert_int_equal(populate(&nxa, 0, 0x1000, 2, lba, nlb), SAM_STAT_GOOD);
        /* An initiator that does not reach the source LU cannot use the token. */
        assert_int_equal(write_using(&nxc, 0, 1, token, 0, 0, 8), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_ILLEGAL_REQUEST, 0x23, 0x04);
        /* A forged token. */
        token[200] ^= 1;
        assert_int_equal(write_using(&nxb, 0, 2, token, 0, 0, 8), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_ILLEGAL_REQUEST, 0x23, 0x04);
        token[200] ^= 1;
        /* Beyond the end of the destination. */
        assert_int_equal(write_using(&nxb, 0, 3, token, 0, NBLK - 4, 8), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_ILLEGAL_REQUEST, 0x21, 0x00);
        /* Any write to the source LU revokes it. */
        fill(n0, 4000, 1, 0xcc);
        assert_int_equal(write_using(&nxb, 0, 4, token, 0, 0, 8), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_ILLEGAL_REQUEST, 0x23, 0x06);
        /* A range beyond the LU in POPULATE TOKEN. */
        static const uint64_t far[] = {NBLK - 1};
        static const uint32_t two[] = {2};
        assert_int_equal(populate(&nxa, 0, 0x1001, 1, far, two), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_ILLEGAL_REQUEST, 0x21, 0x00);

        /* The block device zero ROD token writes zeroes. */
        uint8_t zero[512] = {0};
        slate_put_be(zero, 4, 0xffff0001u);
        slate_put_be(zero + 6, 2, 0x1f8);
        fill(n1, 100, 8, 0xdd);
        assert_int_equal(write_using(&nxb, 0, 5, zero, 0, 100, 8), SAM_STAT_GOOD);
        uint8_t *b = calloc(8, 512);
        assert_int_equal(io(n1, CORE_OP_READ, 100, b, 8), CORE_OK);
        for (unsigned i = 0; i < 8 * 512; i++)
                assert_int_equal(b[i], 0);
        free(b);
        /* An unknown ROD type. */
        slate_put_be(zero, 4, 0x00800002u);
        assert_int_equal(write_using(&nxb, 0, 6, zero, 0, 100, 8), SAM_STAT_CHECK_CONDITION);
        expect_sense(&cmd, SK_ILLEGAL_REQUEST, 0x23, 0x01);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_param_list),
            cmocka_unit_test(test_copy_within_and_across),
            cmocka_unit_test(test_copy_aborted),
            cmocka_unit_test(test_duplicate_and_abort),
            cmocka_unit_test(test_results_and_vpd),
            cmocka_unit_test(test_token_copy),
            cmocka_unit_test(test_param_list_0a_lid4),
            cmocka_unit_test(test_copy_0a),
            cmocka_unit_test(test_lid4),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
