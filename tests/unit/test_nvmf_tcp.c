/*
 * NVMe/TCP transport (src/nvmf/tcp.c, NVMe/TCP 1.0 section 3): the CRC32C
 * digest vector, the common-header checks with their FES/FEI, and live
 * queue pairs over a socketpair on a running reactor: ICReq/ICResp
 * negotiation, a write solicited with several R2Ts and read back with
 * C2HData (digests on), C2HTermReq for an unknown TTAG and a bad header
 * digest, Transient Transport Error for a bad data digest, and SGL checks.
 * The NVMe personality is stubbed here (a tiny RAM disk), so the test
 * exercises only the transport's side of the nvme.h contract.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "nvme/nvme.h"
#include "nvmf/nvmf.h"
#include "nvmf/tcp_internal.h"
#include "rt/crc.h"
#include "rt/reactor.h"
#include "slate/spec/nvme.h"
#include "slate/spec/nvme_tcp.h"

/* ---- Stub personality: Connect succeeds, opcode 01h writes, 02h reads a RAM disk. ---- */
static uint8_t disk[4 << 20];

static void stub_done(struct rt_defer *d)
{
        struct nvme_cmd *c = (struct nvme_cmd *)((char *)d - offsetof(struct nvme_cmd, defer));
        c->done(c);
}

static void set_cqe(struct nvme_cmd *c, uint16_t sc)
{
        memset(c->cqe, 0, sizeof(c->cqe));
        struct nvme_cqe *q = (struct nvme_cqe *)c->cqe;
        memcpy(&q->cid, c->sqe + 2, 2);
        put_le16(&q->status, (uint16_t)(sc << 1));
}

enum nvme_parse_result nvme_cmd_parse(struct nvme_cmd *c)
{
        const struct nvme_sqe *s = (const struct nvme_sqe *)c->sqe;
        uint32_t len = get_le32(&s->dptr.length);
        set_cqe(c, 0);
        switch (s->opc) {
        case NVME_OPC_FABRICS:
                c->h2c = true;
                c->data_len = c->icd_len;
                return NVME_PARSE_DONE;
        case NVME_IO_WRITE:
                c->h2c = true;
                c->data_len = len;
                return NVME_PARSE_EXEC;
        case NVME_IO_READ:
                c->h2c = false;
                c->data_len = len;
                return NVME_PARSE_EXEC;
        default:
                set_cqe(c, NVME_SC_INVALID_OPCODE);
                return NVME_PARSE_DONE;
        }
}

void nvme_cmd_exec(struct nvme_cmd *c)
{
        const struct nvme_sqe *s = (const struct nvme_sqe *)c->sqe;
        uint32_t off = get_le32(&s->cdw10);
        if (off + c->data_len <= sizeof(disk)) {
                if (s->opc == NVME_IO_WRITE)
                        memcpy(disk + off, c->buf, c->data_len);
                else
                        memcpy(c->buf, disk + off, c->data_len);
        }
        c->defer.fn = stub_done;
        rt_defer(c->reactor, &c->defer);
}

void nvme_queue_fini(struct nvme_queue *q)
{
        (void)q;
}

int nvme_listener_register(const char *trtype, const char *addr, uint16_t port, uint8_t tls)
{
        (void)trtype, (void)addr, (void)port, (void)tls;
        return 0;
}

void nvme_listener_unregister(const char *trtype, const char *addr, uint16_t port)
{
        (void)trtype, (void)addr, (void)port;
}

/* ---- Host side helpers ---- */
struct host {
        int fd;
        bool hd, dd;
};

static void xsend(int fd, const void *p, size_t n)
{
        assert_int_equal(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static int xrecv(int fd, void *p, size_t n)
{
        size_t got = 0;
        while (got < n) {
                ssize_t r = recv(fd, (uint8_t *)p + got, n - got, 0);
                if (r <= 0)
                        return -1;
                got += (size_t)r;
        }
        return 0;
}

static struct host host_open(bool hd, bool dd)
{
        int sv[2];
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        struct timeval tv = {.tv_sec = 3};
        setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        assert_int_equal(nvmf_tcp_attach_fd(sv[1], 0), 0);
        struct host h = {.fd = sv[0], .hd = hd, .dd = dd};
        struct nvme_tcp_icreq ic;
        memset(&ic, 0, sizeof(ic));
        ic.ch.pdu_type = NVME_TCP_PDU_ICREQ;
        ic.ch.hlen = sizeof(ic);
        put_le32(&ic.ch.plen, sizeof(ic));
        ic.dgst = (uint8_t)((hd ? NVME_TCP_DGST_HDR : 0) | (dd ? NVME_TCP_DGST_DATA : 0));
        xsend(h.fd, &ic, sizeof(ic));
        struct nvme_tcp_icresp r;
        assert_int_equal(xrecv(h.fd, &r, sizeof(r)), 0);
        assert_int_equal(r.ch.pdu_type, NVME_TCP_PDU_ICRESP);
        assert_int_equal(get_le32(&r.ch.plen), 128);
        assert_int_equal(r.cpda, 0);
        assert_int_equal(r.dgst, ic.dgst);
        assert_int_equal(get_le32(&r.maxh2cdata), NVMF_TCP_MAXH2CDATA);
        return h;
}

/* Send a CapsuleCmd, with optional in-capsule data. */
static void send_cmd(struct host *h, const struct nvme_sqe *sqe, const void *icd, uint32_t icd_len,
                     bool corrupt_hdgst, bool corrupt_ddgst)
{
        uint8_t pdu[72 + 4 + 8192 + 4];
        uint32_t hd = h->hd ? 4 : 0, dd = (h->dd && icd_len) ? 4 : 0;
        uint32_t pdo = icd_len ? 72 + hd : 0;
        uint32_t plen = 72 + hd + icd_len + dd;
        struct nvme_tcp_cmd *c = (struct nvme_tcp_cmd *)pdu;
        c->ch.pdu_type = NVME_TCP_PDU_CAPSULE_CMD;
        c->ch.flags = (uint8_t)((hd ? NVME_TCP_F_HDGSTF : 0) | (dd ? NVME_TCP_F_DDGSTF : 0));
        c->ch.hlen = 72;
        c->ch.pdo = (uint8_t)pdo;
        put_le32(&c->ch.plen, plen);
        memcpy(c->sqe, sqe, 64);
        if (hd) {
                le32 d;
                put_le32(&d, rt_crc32c(pdu, 72) ^ (corrupt_hdgst ? 1u : 0u));
                memcpy(pdu + 72, &d, 4);
        }
        if (icd_len)
                memcpy(pdu + 72 + hd, icd, icd_len);
        if (dd) {
                le32 d;
                put_le32(&d, rt_crc32c(icd, icd_len) ^ (corrupt_ddgst ? 1u : 0u));
                memcpy(pdu + 72 + hd + icd_len, &d, 4);
        }
        xsend(h->fd, pdu, plen);
}

static void make_sqe(struct nvme_sqe *s, uint8_t opc, uint16_t cid, uint8_t sgl_id, uint32_t len,
                     uint32_t off)
{
        memset(s, 0, sizeof(*s));
        s->opc = opc;
        s->flags = NVME_PSDT_SGL_MPTR << 6;
        put_le16(&s->cid, cid);
        s->dptr.type = sgl_id;
        put_le32(&s->dptr.length, len);
        put_le32(&s->cdw10, off);
}

/* Receive one PDU header (+ header digest), checking the digest. */
static int recv_hdr(struct host *h, uint8_t *buf, size_t hlen)
{
        if (xrecv(h->fd, buf, 8) < 0)
                return -1;
        if (buf[2] != hlen && buf[0] != NVME_TCP_PDU_C2H_TERM_REQ)
                return -2;
        hlen = buf[2];
        if (xrecv(h->fd, buf + 8, hlen - 8) < 0)
                return -1;
        if (h->hd && buf[0] != NVME_TCP_PDU_C2H_TERM_REQ) {
                le32 d;
                if (xrecv(h->fd, &d, 4) < 0)
                        return -1;
                assert_int_equal(get_le32(&d), rt_crc32c(buf, hlen));
        }
        return 0;
}

static uint16_t recv_resp(struct host *h, uint16_t cid)
{
        uint8_t b[24];
        assert_int_equal(recv_hdr(h, b, 24), 0);
        assert_int_equal(b[0], NVME_TCP_PDU_CAPSULE_RESP);
        struct nvme_tcp_rsp *r = (struct nvme_tcp_rsp *)b;
        struct nvme_cqe *cqe = (struct nvme_cqe *)r->cqe;
        assert_int_equal(get_le16(&cqe->cid), cid);
        return (uint16_t)(get_le16(&cqe->status) >> 1);
}

static void expect_term(struct host *h, uint16_t fes, uint32_t fei)
{
        uint8_t b[152];
        assert_int_equal(xrecv(h->fd, b, 8), 0);
        assert_int_equal(b[0], NVME_TCP_PDU_C2H_TERM_REQ);
        uint32_t plen = get_le32(&((struct nvme_tcp_ch *)b)->plen);
        assert_true(plen >= 24 && plen <= 152);
        assert_int_equal(xrecv(h->fd, b + 8, plen - 8), 0);
        struct nvme_tcp_term_req *t = (struct nvme_tcp_term_req *)b;
        assert_int_equal(get_le16(&t->fes), fes);
        assert_int_equal(get_le32(&t->fei), fei);
        /* Then the connection closes. */
        char c;
        assert_true(recv(h->fd, &c, 1, 0) <= 0);
}

static void host_close(struct host *h)
{
        close(h->fd);
        for (int i = 0; i < 200 && nvmf_tcp_live_queues(); i++)
                usleep(5000);
        assert_int_equal(nvmf_tcp_live_queues(), 0);
}

/* ---- Tests ---- */
static void test_crc32c_vector(void **st)
{
        (void)st;
        assert_int_equal(rt_crc32c("123456789", 9), 0xE3069283u);
}

static void test_check_ch(void **st)
{
        (void)st;
        struct nvme_tcp_ch ch = {.pdu_type = NVME_TCP_PDU_CAPSULE_CMD, .hlen = 72};
        uint32_t dlen, fei;
        uint16_t fes;
        put_le32(&ch.plen, 72);
        assert_int_equal(nvmf_tcp_check_ch(&ch, true, false, false, &dlen, &fes, &fei), 0);
        assert_int_equal(dlen, 0);
        /* Before ICReq: sequence error. */
        assert_int_equal(nvmf_tcp_check_ch(&ch, false, false, false, &dlen, &fes, &fei), -EPROTO);
        assert_int_equal(fes, NVME_TCP_FES_PDU_SEQUENCE);
        /* In-capsule data. */
        ch.pdo = 72;
        put_le32(&ch.plen, 72 + 512);
        assert_int_equal(nvmf_tcp_check_ch(&ch, true, false, false, &dlen, &fes, &fei), 0);
        assert_int_equal(dlen, 512);
        /* Bad HLEN. */
        ch.hlen = 70;
        assert_int_equal(nvmf_tcp_check_ch(&ch, true, false, false, &dlen, &fes, &fei), -EPROTO);
        assert_int_equal(fes, NVME_TCP_FES_INVALID_HEADER);
        assert_int_equal(fei, NVME_TCP_OFF_HLEN);
        ch.hlen = 72;
        /* PDO inside the header. */
        ch.pdo = 16;
        assert_int_equal(nvmf_tcp_check_ch(&ch, true, false, false, &dlen, &fes, &fei), -EPROTO);
        assert_int_equal(fei, NVME_TCP_OFF_PDO);
        ch.pdo = 72;
        /* Header digest flag without negotiation. */
        ch.flags = NVME_TCP_F_HDGSTF;
        assert_int_equal(nvmf_tcp_check_ch(&ch, true, false, false, &dlen, &fes, &fei), -EPROTO);
        assert_int_equal(fei, NVME_TCP_OFF_FLAGS);
        ch.flags = 0;
        /* More in-capsule data than we accept. */
        put_le32(&ch.plen, 72 + 65536);
        assert_int_equal(nvmf_tcp_check_ch(&ch, true, false, false, &dlen, &fes, &fei), -EPROTO);
        assert_int_equal(fes, NVME_TCP_FES_DATA_LIMIT);
        /* Unknown and controller-to-host types. */
        ch.pdu_type = 0x0b;
        assert_int_equal(nvmf_tcp_check_ch(&ch, true, false, false, &dlen, &fes, &fei), -EPROTO);
        assert_int_equal(fei, NVME_TCP_OFF_TYPE);
        ch.pdu_type = NVME_TCP_PDU_C2H_DATA;
        assert_int_equal(nvmf_tcp_check_ch(&ch, true, false, false, &dlen, &fes, &fei), -EPROTO);
        /* TermReq with a bad length: drop silently. */
        ch.pdu_type = NVME_TCP_PDU_H2C_TERM_REQ;
        ch.hlen = 24;
        ch.pdo = 0;
        put_le32(&ch.plen, 4000);
        assert_int_equal(nvmf_tcp_check_ch(&ch, true, false, false, &dlen, &fes, &fei),
                         -ECONNRESET);
}

static void test_write_r2t_read_c2h_digests(void **st)
{
        (void)st;
        struct host h = host_open(true, true);
        /* Over two MAXH2CDATA: three R2Ts, and a buffer from the reactor's pool. */
        const uint32_t len = 2 * NVMF_TCP_MAXH2CDATA + 300 * 1024, off = 4096;
        uint8_t *data = malloc(len), *back = malloc(len);
        for (uint32_t i = 0; i < len; i++)
                data[i] = (uint8_t)(i * 7 + 3);
        struct nvme_sqe s;
        make_sqe(&s, NVME_IO_WRITE, 7, NVME_TCP_SGL_TRANSPORT, len, off);
        send_cmd(&h, &s, NULL, 0, false, false);
        uint32_t done = 0;
        int r2ts = 0;
        while (done < len) {
                uint8_t b[24];
                assert_int_equal(recv_hdr(&h, b, 24), 0);
                assert_int_equal(b[0], NVME_TCP_PDU_R2T);
                struct nvme_tcp_r2t *r = (struct nvme_tcp_r2t *)b;
                assert_int_equal(get_le16(&r->cccid), 7);
                assert_int_equal(get_le32(&r->r2to), done);
                uint32_t r2tl = get_le32(&r->r2tl);
                assert_true(r2tl > 0 && r2tl <= NVMF_TCP_MAXH2CDATA);
                r2ts++;
                /* Answer with two H2CData PDUs per R2T when it is big enough. */
                uint32_t sent = 0;
                while (sent < r2tl) {
                        uint32_t n = r2tl - sent > 65536 ? 65536 : r2tl - sent;
                        uint8_t hdr[28];
                        struct nvme_tcp_data *d = (struct nvme_tcp_data *)hdr;
                        memset(hdr, 0, sizeof(hdr));
                        d->ch.pdu_type = NVME_TCP_PDU_H2C_DATA;
                        d->ch.flags = NVME_TCP_F_HDGSTF | NVME_TCP_F_DDGSTF |
                                      (sent + n == r2tl ? NVME_TCP_F_DATA_LAST : 0);
                        d->ch.hlen = 24;
                        d->ch.pdo = 28;
                        put_le32(&d->ch.plen, 28 + n + 4);
                        d->cccid = r->cccid;
                        d->ttag = r->ttag;
                        put_le32(&d->datao, done + sent);
                        put_le32(&d->datal, n);
                        le32 hdg, ddg;
                        put_le32(&hdg, rt_crc32c(hdr, 24));
                        memcpy(hdr + 24, &hdg, 4);
                        put_le32(&ddg, rt_crc32c(data + done + sent, n));
                        xsend(h.fd, hdr, 28);
                        xsend(h.fd, data + done + sent, n);
                        xsend(h.fd, &ddg, 4);
                        sent += n;
                }
                done += r2tl;
        }
        assert_true(r2ts >= 3);
        assert_int_equal(recv_resp(&h, 7), 0);
        assert_memory_equal(disk + off, data, len);

        make_sqe(&s, NVME_IO_READ, 8, NVME_TCP_SGL_TRANSPORT, len, off);
        send_cmd(&h, &s, NULL, 0, false, false);
        uint8_t b[24];
        assert_int_equal(recv_hdr(&h, b, 24), 0);
        assert_int_equal(b[0], NVME_TCP_PDU_C2H_DATA);
        struct nvme_tcp_data *d = (struct nvme_tcp_data *)b;
        assert_true(b[1] & NVME_TCP_F_DATA_LAST);
        assert_false(b[1] & NVME_TCP_F_DATA_SUCCESS); /* SQ flow control is on */
        assert_int_equal(get_le32(&d->datal), len);
        assert_int_equal(d->ch.pdo, 28);
        assert_int_equal(xrecv(h.fd, back, len), 0);
        le32 ddg;
        assert_int_equal(xrecv(h.fd, &ddg, 4), 0);
        assert_int_equal(get_le32(&ddg), rt_crc32c(back, len));
        assert_memory_equal(back, data, len);
        assert_int_equal(recv_resp(&h, 8), 0);
        free(data);
        free(back);
        host_close(&h);
}

static void test_in_capsule_write_and_bad_ddgst(void **st)
{
        (void)st;
        struct host h = host_open(false, true);
        uint8_t icd[4096];
        memset(icd, 0xa5, sizeof(icd));
        struct nvme_sqe s;
        make_sqe(&s, NVME_IO_WRITE, 1, NVME_TCP_SGL_ICD, sizeof(icd), 0);
        send_cmd(&h, &s, icd, sizeof(icd), false, false);
        assert_int_equal(recv_resp(&h, 1), 0);
        assert_memory_equal(disk, icd, sizeof(icd));
        /* Bad data digest: the command fails with Transient Transport Error, the queue lives. */
        make_sqe(&s, NVME_IO_WRITE, 2, NVME_TCP_SGL_ICD, sizeof(icd), 0);
        send_cmd(&h, &s, icd, sizeof(icd), false, true);
        assert_int_equal(recv_resp(&h, 2), NVME_SC_TRANSIENT_TRANSPORT);
        /* SGL checks. */
        make_sqe(&s, NVME_IO_WRITE, 3, 0x40 /* keyed data block */, 4096, 0);
        send_cmd(&h, &s, NULL, 0, false, false);
        assert_int_equal(recv_resp(&h, 3) & 0xff, NVME_SC_SGL_INVALID_TYPE);
        make_sqe(&s, NVME_IO_WRITE, 4, 0x5b /* transport block, bad subtype */, 4096, 0);
        send_cmd(&h, &s, NULL, 0, false, false);
        assert_int_equal(recv_resp(&h, 4) & 0xff, NVME_SC_SGL_INVALID_SUBTYPE);
        make_sqe(&s, NVME_IO_WRITE, 5, NVME_TCP_SGL_ICD, 8192 /* more than sent */, 0);
        send_cmd(&h, &s, icd, sizeof(icd), false, false);
        assert_int_equal(recv_resp(&h, 5) & 0xff, NVME_SC_SGL_INVALID_DATA_LEN);
        host_close(&h);
}

/* The data pointer rules alone (pure): before parse, and against the parsed transfer. */
static void test_sgl_rules(void **st)
{
        (void)st;
        struct nvme_cmd c;
        struct nvme_sqe *s = (struct nvme_sqe *)c.sqe;
        memset(&c, 0, sizeof(c));
        make_sqe(s, NVME_IO_READ, 1, NVME_TCP_SGL_TRANSPORT, 4096, 0);
        assert_int_equal(nvmf_tcp_check_sgl(&c, 8192), NVME_XFER_OK);
        assert_int_equal(nvmf_tcp_check_xfer(&c, 4096, false), NVME_XFER_OK);
        assert_int_equal(nvmf_tcp_check_xfer(&c, 4000, false), NVME_XFER_SGL_LENGTH);
        assert_int_equal(nvmf_tcp_check_sgl(&c, 2048), NVME_XFER_SGL_LENGTH);
        c.icd_len = 16; /* in-capsule data with a Transport Data Block */
        assert_int_equal(nvmf_tcp_check_sgl(&c, 8192), NVME_XFER_SGL_LENGTH);
        c.icd_len = 0;
        s->flags = 0; /* PRP */
        assert_int_equal(nvmf_tcp_check_sgl(&c, 8192), NVME_XFER_PSDT);
        make_sqe(s, NVME_IO_READ, 1, 0x40 /* keyed data block */, 4096, 0);
        assert_int_equal(nvmf_tcp_check_sgl(&c, 8192), NVME_XFER_SGL_TYPE);
        assert_int_equal(nvmf_tcp_check_xfer(&c, 4096, false), NVME_XFER_SGL_TYPE);
        make_sqe(s, NVME_IO_READ, 1, 0x5b /* transport block, bad subtype */, 4096, 0);
        assert_int_equal(nvmf_tcp_check_sgl(&c, 8192), NVME_XFER_SGL_SUBTYPE);
        /* In-capsule: host-to-controller only, at offset 0, exactly the capsule's data. */
        make_sqe(s, NVME_IO_WRITE, 1, NVME_TCP_SGL_ICD, 512, 0);
        c.icd_len = 512;
        assert_int_equal(nvmf_tcp_check_sgl(&c, 8192), NVME_XFER_OK);
        assert_int_equal(nvmf_tcp_check_xfer(&c, 512, true), NVME_XFER_OK);
        assert_int_equal(nvmf_tcp_check_xfer(&c, 512, false), NVME_XFER_ICD_C2H);
        assert_int_equal(nvmf_tcp_check_xfer(&c, 1024, true), NVME_XFER_SGL_LENGTH);
        c.icd_len = 256;
        assert_int_equal(nvmf_tcp_check_sgl(&c, 8192), NVME_XFER_SGL_LENGTH);
        assert_int_equal(nvmf_tcp_check_xfer(&c, 512, true), NVME_XFER_ICD_LENGTH);
        c.icd_len = 512;
        put_le64(&s->dptr.addr, 8);
        assert_int_equal(nvmf_tcp_check_sgl(&c, 8192), NVME_XFER_ICD_OFFSET);
        assert_int_equal(nvmf_tcp_check_xfer(&c, 512, true), NVME_XFER_ICD_OFFSET);
        /* No data and a zero-length SGL of any kind: nothing to check. */
        make_sqe(s, NVME_IO_FLUSH, 1, 0x40, 0, 0);
        assert_int_equal(nvmf_tcp_check_xfer(&c, 0, false), NVME_XFER_OK);
}

static void test_unknown_ttag_terminates(void **st)
{
        (void)st;
        struct host h = host_open(false, false);
        uint8_t hdr[24 + 16];
        memset(hdr, 0, sizeof(hdr));
        struct nvme_tcp_data *d = (struct nvme_tcp_data *)hdr;
        d->ch.pdu_type = NVME_TCP_PDU_H2C_DATA;
        d->ch.hlen = 24;
        d->ch.pdo = 24;
        put_le32(&d->ch.plen, 24 + 16);
        put_le16(&d->ttag, 99);
        put_le32(&d->datal, 16);
        xsend(h.fd, hdr, sizeof(hdr));
        expect_term(&h, NVME_TCP_FES_INVALID_HEADER, NVME_TCP_OFF_TTAG);
        host_close(&h);
}

static void test_bad_hdgst_terminates(void **st)
{
        (void)st;
        struct host h = host_open(true, false);
        struct nvme_sqe s;
        make_sqe(&s, NVME_IO_READ, 1, NVME_TCP_SGL_TRANSPORT, 512, 0);
        send_cmd(&h, &s, NULL, 0, true, false);
        uint8_t b[152];
        assert_int_equal(xrecv(h.fd, b, 24), 0);
        assert_int_equal(b[0], NVME_TCP_PDU_C2H_TERM_REQ);
        assert_int_equal(get_le16(&((struct nvme_tcp_term_req *)b)->fes), NVME_TCP_FES_HDR_DIGEST);
        host_close(&h);
}

static void test_bad_hlen_and_garbage(void **st)
{
        (void)st;
        struct host h = host_open(false, false);
        uint8_t ch[8] = {NVME_TCP_PDU_CAPSULE_CMD, 0, 64, 0, 72, 0, 0, 0};
        xsend(h.fd, ch, sizeof(ch));
        expect_term(&h, NVME_TCP_FES_INVALID_HEADER, NVME_TCP_OFF_HLEN);
        host_close(&h);
        /* A second ICReq is a sequence error. */
        h = host_open(false, false);
        struct nvme_tcp_icreq ic;
        memset(&ic, 0, sizeof(ic));
        ic.ch.hlen = 128;
        put_le32(&ic.ch.plen, 128);
        xsend(h.fd, &ic, sizeof(ic));
        expect_term(&h, NVME_TCP_FES_PDU_SEQUENCE, NVME_TCP_OFF_TYPE);
        host_close(&h);
}

static int setup(void **st)
{
        (void)st;
        return rt_init(1) || rt_start() ? -1 : 0;
}

static int teardown(void **st)
{
        (void)st;
        nvmf_tcp_fini();
        rt_stop();
        rt_join();
        rt_fini();
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_crc32c_vector),
            cmocka_unit_test(test_check_ch),
            cmocka_unit_test(test_write_r2t_read_c2h_digests),
            cmocka_unit_test(test_in_capsule_write_and_bad_ddgst),
            cmocka_unit_test(test_sgl_rules),
            cmocka_unit_test(test_unknown_ttag_terminates),
            cmocka_unit_test(test_bad_hdgst_terminates),
            cmocka_unit_test(test_bad_hlen_and_garbage),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
