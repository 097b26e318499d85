/*
 * Robustness client for the NVMe/TCP transport (NVMe/TCP 1.0 section 3.6,
 * fatal errors 3.6.2.4; Fabrics Connect, NVMe-oF 1.1 section 3.3): raw,
 * malformed PDUs against a live slated, one case per run.  Each case opens
 * a healthy admin connection first, then a fresh connection that sends the
 * malformed sequence and checks the answer (C2HTermReq with the expected
 * FES/FEI and a closed socket, or an error status in the CapsuleResp), and
 * finally checks that the healthy connection still answers Identify.
 *
 *   nvme-tcp-pdu -l                                   list cases
 *   nvme-tcp-pdu -p PORT -n SUBNQN -H HOSTNQN CASE    run one case
 *
 * Prints "PASS case" or "FAIL case (why)"; exit status 0 on PASS.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <isa-l.h>

#include "slate/byteorder.h"
#include "slate/spec/nvme_tcp.h"

static int port;
static const char *subnqn, *hostnqn;
static char why[256];

/* Record why a check failed (may quote the previous reason) and return -1. */
#define FAIL(...)                                                                                  \
        do {                                                                                       \
                char fail_tmp_[1024];                                                              \
                snprintf(fail_tmp_, sizeof(fail_tmp_), __VA_ARGS__);                               \
                snprintf(why, sizeof(why), "%.250s", fail_tmp_);                                   \
                return -1;                                                                         \
        } while (0)

static uint32_t crc(const void *p, size_t n)
{
        return crc32_iscsi((unsigned char *)p, (int)n, 0xffffffffu) ^ 0xffffffffu;
}

struct conn {
        int fd;
        bool hd, dd;
        uint16_t cid;
};

static int xsend(struct conn *c, const void *p, size_t n)
{
        return send(c->fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

static int xrecv(struct conn *c, void *p, size_t n)
{
        size_t got = 0;
        while (got < n) {
                ssize_t r = recv(c->fd, (uint8_t *)p + got, n - got, 0);
                if (r <= 0)
                        return -1;
                got += (size_t)r;
        }
        return 0;
}

static int conn_open(struct conn *c, bool hd, bool dd)
{
        memset(c, 0, sizeof(*c));
        c->hd = hd;
        c->dd = dd;
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
        struct timeval tv = {.tv_sec = 5};
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (connect(c->fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
                FAIL("connect: %s", strerror(errno));
        uint8_t ic[128] = {0};
        ic[0] = NVME_TCP_PDU_ICREQ;
        ic[2] = 128;
        ic[4] = 128;
        ic[11] = (uint8_t)((hd ? 1 : 0) | (dd ? 2 : 0));
        if (xsend(c, ic, sizeof(ic)) < 0 || xrecv(c, ic, sizeof(ic)) < 0)
                FAIL("ICReq/ICResp exchange failed");
        if (ic[0] != NVME_TCP_PDU_ICRESP)
                FAIL("expected ICResp, got type %u", ic[0]);
        return 0;
}

/* Send one CapsuleCmd; flags to corrupt digests or override the SGL. */
static int send_capsule(struct conn *c, uint8_t *sqe, const void *icd, uint32_t icd_len,
                        bool bad_hd, bool bad_dd)
{
        static uint8_t pdu[72 + 4 + 8192 + 4];
        uint32_t hd = c->hd ? 4 : 0, dd = (c->dd && icd_len) ? 4 : 0;
        uint32_t plen = 72 + hd + icd_len + dd;
        memset(pdu, 0, 8);
        pdu[0] = NVME_TCP_PDU_CAPSULE_CMD;
        pdu[1] = (uint8_t)((hd ? 1 : 0) | (dd ? 2 : 0));
        pdu[2] = 72;
        pdu[3] = (uint8_t)(icd_len ? 72 + hd : 0);
        slate_put_le(pdu + 4, 4, plen);
        sqe[2] = (uint8_t)c->cid;
        sqe[3] = (uint8_t)(c->cid >> 8);
        memcpy(pdu + 8, sqe, 64);
        if (hd)
                slate_put_le(pdu + 72, 4, crc(pdu, 72) ^ (bad_hd ? 0x10u : 0));
        if (icd_len)
                memcpy(pdu + 72 + hd, icd, icd_len);
        if (dd)
                slate_put_le(pdu + 72 + hd + icd_len, 4, crc(icd, icd_len) ^ (bad_dd ? 0x10u : 0));
        return xsend(c, pdu, plen);
}

static void sqe_init(uint8_t *sqe, uint8_t opc, uint8_t sgl_id, uint32_t len)
{
        memset(sqe, 0, 64);
        sqe[0] = opc;
        sqe[1] = 0x40; /* PSDT 01b */
        slate_put_le(sqe + 32, 4, len);
        sqe[39] = sgl_id;
}

/*
 * Receive PDUs until the CapsuleResp (or C2HData with SUCCESS); data goes
 * to buf.  Returns the status field (SC | SCT << 8), -1 on error, -2 on a
 * C2HTermReq (fes/fei stored).
 */
static uint16_t term_fes;
static uint32_t term_fei;
static uint32_t last_dw0;
static uint16_t last_cid;

static int recv_resp(struct conn *c, uint8_t *buf, uint32_t buflen)
{
        for (;;) {
                uint8_t h[128 + 4];
                if (xrecv(c, h, 8) < 0)
                        FAIL("connection closed or timed out waiting for a response");
                uint32_t plen = (uint32_t)slate_get_le(h + 4, 4);
                if (h[0] == NVME_TCP_PDU_C2H_TERM_REQ) {
                        if (plen < 24 || plen > 152 || xrecv(c, h + 8, 16) < 0)
                                FAIL("bad C2HTermReq");
                        term_fes = (uint16_t)slate_get_le(h + 8, 2);
                        term_fei = (uint32_t)slate_get_le(h + 10, 4);
                        uint8_t junk[152];
                        xrecv(c, junk, plen - 24);
                        return -2;
                }
                uint32_t hl = h[2] + (c->hd ? 4u : 0u);
                if (h[2] < 8 || hl > sizeof(h) || xrecv(c, h + 8, hl - 8) < 0)
                        FAIL("bad header from target (type %u hlen %u)", h[0], h[2]);
                if (c->hd && slate_get_le(h + h[2], 4) != crc(h, h[2]))
                        FAIL("bad header digest from target");
                if (h[0] == NVME_TCP_PDU_CAPSULE_RESP) {
                        last_dw0 = (uint32_t)slate_get_le(h + 8, 4);
                        last_cid = (uint16_t)slate_get_le(h + 8 + 12, 2);
                        return (int)((slate_get_le(h + 8 + 14, 2) >> 1) & 0x7ff);
                }
                if (h[0] != NVME_TCP_PDU_C2H_DATA)
                        FAIL("unexpected PDU type %u", h[0]);
                uint32_t datal = (uint32_t)slate_get_le(h + 16, 4);
                uint32_t pad = h[3] - hl;
                uint8_t padb[256];
                if (datal > buflen || h[3] < hl || xrecv(c, padb, pad) < 0 ||
                    xrecv(c, buf, datal) < 0)
                        FAIL("bad C2HData");
                if (h[1] & NVME_TCP_F_DDGSTF) {
                        uint8_t d[4];
                        if (xrecv(c, d, 4) < 0 || slate_get_le(d, 4) != crc(buf, datal))
                                FAIL("bad data digest from target");
                }
                if (h[1] & NVME_TCP_F_DATA_SUCCESS)
                        return 0;
        }
}

static int expect_term(struct conn *c, uint16_t fes, int fei)
{
        uint8_t b[4096];
        int rc = recv_resp(c, b, sizeof(b));
        if (rc != -2)
                FAIL("expected C2HTermReq, got %s %d", rc == -1 ? why : "status", rc);
        if (term_fes != fes || (fei >= 0 && term_fei != (uint32_t)fei))
                FAIL("C2HTermReq FES %u FEI %u, expected FES %u FEI %d", term_fes, term_fei, fes,
                     fei);
        char x;
        if (recv(c->fd, &x, 1, 0) > 0)
                FAIL("connection not closed after C2HTermReq");
        return 0;
}

static int do_connect(struct conn *c, uint16_t qid, uint16_t cntlid, const char *sub,
                      const char *host, uint32_t sgl_len, bool bad_dd)
{
        uint8_t sqe[64], data[1024] = {0};
        sqe_init(sqe, 0x7f, NVME_TCP_SGL_ICD, sgl_len);
        sqe[4] = 0x01;
        slate_put_le(sqe + 42, 2, qid);
        slate_put_le(sqe + 44, 2, 31);
        for (int i = 0; i < 16; i++)
                data[i] = (uint8_t)(0x40 + i);
        slate_put_le(data + 16, 2, cntlid);
        snprintf((char *)data + 256, 256, "%s", sub);
        snprintf((char *)data + 512, 256, "%s", host);
        if (send_capsule(c, sqe, data, sizeof(data), false, bad_dd) < 0)
                FAIL("send Connect");
        c->cid++;
        return recv_resp(c, data, sizeof(data));
}

static int prop(struct conn *c, bool set, uint32_t off, uint64_t val, uint64_t *out)
{
        uint8_t sqe[64];
        sqe_init(sqe, 0x7f, NVME_TCP_SGL_TRANSPORT, 0);
        sqe[4] = set ? 0x00 : 0x04;
        sqe[40] = off >= 0x1c || off == 0x14 ? 0 : 1; /* ATTRIB size: 8 bytes for CAP */
        slate_put_le(sqe + 44, 4, off);
        slate_put_le(sqe + 48, 8, val);
        if (send_capsule(c, sqe, NULL, 0, false, false) < 0)
                FAIL("send Property");
        c->cid++;
        int rc = recv_resp(c, NULL, 0);
        if (out)
                *out = last_dw0;
        return rc;
}

static int identify(struct conn *c, uint8_t sgl_id, uint32_t len)
{
        static uint8_t buf[4096];
        uint8_t sqe[64];
        sqe_init(sqe, 0x06, sgl_id, len);
        sqe[40] = 0x01; /* CNS controller */
        if (send_capsule(c, sqe, NULL, 0, false, false) < 0)
                FAIL("send Identify");
        c->cid++;
        return recv_resp(c, buf, sizeof(buf));
}

/* Admin queue up and controller enabled; returns cntlid or -1. */
static int admin_up(struct conn *c, bool hd, bool dd)
{
        if (conn_open(c, hd, dd) < 0)
                return -1;
        int st = do_connect(c, 0, 0xffff, subnqn, hostnqn, 1024, false);
        if (st != 0)
                FAIL("admin Connect status 0x%x %s", st, st < 0 ? why : "");
        int cntlid = (int)(last_dw0 & 0xffff);
        uint64_t csts = 0;
        if (prop(c, true, 0x14, 1u | (6u << 16) | (4u << 20), NULL) != 0)
                FAIL("Property Set CC failed");
        for (int i = 0; i < 50; i++) {
                if (prop(c, false, 0x1c, 0, &csts) != 0)
                        FAIL("Property Get CSTS failed");
                if (csts & 1)
                        return cntlid;
                usleep(100000);
        }
        FAIL("controller never ready");
}

static int io_up(struct conn *c, int cntlid)
{
        if (conn_open(c, false, false) < 0)
                return -1;
        int st = do_connect(c, 1, (uint16_t)cntlid, subnqn, hostnqn, 1024, false);
        if (st != 0)
                FAIL("I/O Connect status 0x%x", st);
        return 0;
}

static int expect_status(int st, int want_sc, const char *what)
{
        if (st < 0)
                FAIL("%s: %s", what, st == -2 ? "got C2HTermReq" : why);
        if (want_sc >= 0 ? (st & 0xff) != want_sc : st == 0)
                FAIL("%s: status 0x%x, expected SC 0x%x", what, st, want_sc);
        return 0;
}

/* ---- Cases ---- */
static int raw_header(struct conn *c, uint8_t type, uint8_t flags, uint8_t hlen, uint8_t pdo,
                      uint32_t plen, size_t total)
{
        uint8_t b[512] = {0};
        b[0] = type;
        b[1] = flags;
        b[2] = hlen;
        b[3] = pdo;
        slate_put_le(b + 4, 4, plen);
        return xsend(c, b, total);
}

static int case_bad_hlen(struct conn *c, int cntlid)
{
        (void)cntlid;
        raw_header(c, NVME_TCP_PDU_CAPSULE_CMD, 0, 64, 0, 72, 72);
        return expect_term(c, NVME_TCP_FES_INVALID_HEADER, NVME_TCP_OFF_HLEN);
}

static int case_bad_plen(struct conn *c, int cntlid)
{
        (void)cntlid;
        raw_header(c, NVME_TCP_PDU_CAPSULE_CMD, 0, 72, 0, 40, 72);
        return expect_term(c, NVME_TCP_FES_INVALID_HEADER, NVME_TCP_OFF_PLEN);
}

static int case_bad_pdo(struct conn *c, int cntlid)
{
        (void)cntlid;
        raw_header(c, NVME_TCP_PDU_CAPSULE_CMD, 0, 72, 16, 72 + 64, 72 + 64);
        return expect_term(c, NVME_TCP_FES_INVALID_HEADER, NVME_TCP_OFF_PDO);
}

static int case_huge_icd(struct conn *c, int cntlid)
{
        (void)cntlid;
        raw_header(c, NVME_TCP_PDU_CAPSULE_CMD, 0, 72, 72, 72 + (64u << 20), 72);
        return expect_term(c, NVME_TCP_FES_DATA_LIMIT, NVME_TCP_OFF_PLEN);
}

static int case_unknown_type(struct conn *c, int cntlid)
{
        (void)cntlid;
        raw_header(c, 0x0c, 0, 24, 0, 24, 24);
        return expect_term(c, NVME_TCP_FES_INVALID_HEADER, NVME_TCP_OFF_TYPE);
}

static int case_bad_hdgst(struct conn *c, int cntlid)
{
        (void)cntlid;
        close(c->fd);
        if (conn_open(c, true, false) < 0)
                return -1;
        uint8_t sqe[64];
        sqe_init(sqe, 0x06, NVME_TCP_SGL_TRANSPORT, 4096);
        send_capsule(c, sqe, NULL, 0, true, false);
        return expect_term(c, NVME_TCP_FES_HDR_DIGEST, -1);
}

static int case_bad_ddgst(struct conn *c, int cntlid)
{
        (void)cntlid;
        close(c->fd);
        if (conn_open(c, false, true) < 0)
                return -1;
        int st = do_connect(c, 0, 0xffff, subnqn, hostnqn, 1024, true);
        return expect_status(st, 0x22, "Connect with bad data digest");
}

static int case_h2c_unknown_ttag(struct conn *c, int cntlid)
{
        (void)cntlid;
        uint8_t b[24 + 16] = {0};
        b[0] = NVME_TCP_PDU_H2C_DATA;
        b[2] = 24;
        b[3] = 24;
        slate_put_le(b + 4, 4, sizeof(b));
        slate_put_le(b + 10, 2, 0x4242);
        slate_put_le(b + 16, 4, 16);
        xsend(c, b, sizeof(b));
        return expect_term(c, NVME_TCP_FES_INVALID_HEADER, NVME_TCP_OFF_TTAG);
}

static int case_h2c_beyond_r2t(struct conn *c, int cntlid)
{
        close(c->fd);
        if (io_up(c, cntlid) < 0)
                return -1;
        uint8_t sqe[64];
        sqe_init(sqe, 0x01, NVME_TCP_SGL_TRANSPORT, 8 * 512);
        slate_put_le(sqe + 4, 4, 1);      /* NSID 1 */
        slate_put_le(sqe + 48, 4, 8 - 1); /* NLB 8 */
        send_capsule(c, sqe, NULL, 0, false, false);
        uint8_t r[24];
        if (xrecv(c, r, 24) < 0 || r[0] != NVME_TCP_PDU_R2T)
                FAIL("no R2T for a write (type %u)", r[0]);
        uint32_t r2tl = (uint32_t)slate_get_le(r + 16, 4);
        static uint8_t b[24 + 8192] = {0};
        uint32_t datal = r2tl + 512;
        b[0] = NVME_TCP_PDU_H2C_DATA;
        b[1] = NVME_TCP_F_DATA_LAST;
        b[2] = 24;
        b[3] = 24;
        slate_put_le(b + 4, 4, 24 + datal);
        memcpy(b + 8, r + 8, 4); /* CCCID, TTAG */
        slate_put_le(b + 16, 4, datal);
        xsend(c, b, 24 + datal);
        return expect_term(c, NVME_TCP_FES_DATA_OUT_OF_RANGE, NVME_TCP_OFF_DATAL);
}

static int case_sgl_keyed(struct conn *c, int cntlid)
{
        (void)cntlid;
        if (do_connect(c, 0, 0xffff, subnqn, hostnqn, 1024, false) != 0)
                FAIL("Connect failed");
        return expect_status(identify(c, 0x40, 4096), 0x11, "Identify with keyed SGL");
}

static int case_sgl_subtype(struct conn *c, int cntlid)
{
        (void)cntlid;
        if (do_connect(c, 0, 0xffff, subnqn, hostnqn, 1024, false) != 0)
                FAIL("Connect failed");
        return expect_status(identify(c, 0x5b, 4096), 0x17, "Identify with bad SGL subtype");
}

static int case_sgl_length(struct conn *c, int cntlid)
{
        (void)cntlid;
        return expect_status(do_connect(c, 0, 0xffff, subnqn, hostnqn, 2048, false), 0x0f,
                             "Connect with SGL length != in-capsule data");
}

static int case_connect_bad_subnqn(struct conn *c, int cntlid)
{
        (void)cntlid;
        return expect_status(do_connect(c, 0, 0xffff, "nqn.2026-12.io.slate:no-such-subsystem",
                                        hostnqn, 1024, false),
                             -1, "Connect to an unknown subsystem");
}

static int case_connect_bad_host(struct conn *c, int cntlid)
{
        (void)cntlid;
        return expect_status(do_connect(c, 0, 0xffff, subnqn,
                                        "nqn.2014-08.org.nvmexpress:uuid:not-allowed", 1024, false),
                             -1, "Connect from a host not allowed");
}

/*
 * An empty Host NQN (what spdk_nvme_perf sends unless told one): refused as
 * an unlisted host (Connect Invalid Host, SC 84h) by a subsystem with a host
 * list, admitted by one that admits any host (<subnqn>-any in nvme-tcp.sh).
 */
static int case_connect_empty_host_listed(struct conn *c, int cntlid)
{
        (void)cntlid;
        return expect_status(do_connect(c, 0, 0xffff, subnqn, "", 1024, false), 0x84,
                             "Connect with an empty Host NQN to a subsystem with a host list");
}

static int case_connect_empty_host_any(struct conn *c, int cntlid)
{
        (void)cntlid;
        char any[256];
        snprintf(any, sizeof(any), "%s-any", subnqn);
        return expect_status(do_connect(c, 0, 0xffff, any, "", 1024, false), 0,
                             "Connect with an empty Host NQN to a subsystem admitting any host");
}

/*
 * Four Asynchronous Event Requests parked (the fifth is over AERL: AER Limit
 * Exceeded), then the admin queue closes under them: the personality
 * completes them from nvme_queue_fini and the transport frees the queue.
 */
static int case_aer_teardown(struct conn *c, int cntlid)
{
        (void)cntlid;
        uint64_t csts = 0;
        if (do_connect(c, 0, 0xffff, subnqn, hostnqn, 1024, false) != 0)
                FAIL("Connect failed");
        if (prop(c, true, 0x14, 1u | (6u << 16) | (4u << 20), NULL) != 0)
                FAIL("Property Set CC failed");
        for (int i = 0; i < 50 && !(csts & 1); i++) {
                if (prop(c, false, 0x1c, 0, &csts) != 0)
                        FAIL("Property Get CSTS failed");
                if (!(csts & 1))
                        usleep(100000);
        }
        if (!(csts & 1))
                FAIL("controller never ready");
        for (int i = 0; i < 5; i++) {
                uint8_t sqe[64];
                sqe_init(sqe, 0x0c, NVME_TCP_SGL_TRANSPORT, 0);
                if (send_capsule(c, sqe, NULL, 0, false, false) < 0)
                        FAIL("send Asynchronous Event Request");
                c->cid++;
        }
        return expect_status(recv_resp(c, NULL, 0), 0x05, "fifth Asynchronous Event Request");
}

/*
 * Fused Compare and Write (src/nvme/fused.c) from a real NVMe/TCP exchange:
 * the pair on the I/O queue of the 512-byte-block namespace, data
 * in-capsule or moved by R2T.  Status values are SC | SCT << 8.
 */
#define FUSED_LBA 64
#define FUSED_NLB 8
#define FUSED_LEN (FUSED_NLB * 512)

/* Send an I/O command on blocks [FUSED_LBA, +FUSED_NLB) with in-capsule data (or none). */
static int io_send(struct conn *c, uint8_t opc, uint8_t fuse, const uint8_t *data, uint16_t *cid,
                   uint32_t slba)
{
        uint8_t sqe[64];
        sqe_init(sqe, opc, data ? NVME_TCP_SGL_ICD : NVME_TCP_SGL_TRANSPORT, FUSED_LEN);
        sqe[1] |= fuse;
        slate_put_le(sqe + 4, 4, 1);
        slate_put_le(sqe + 40, 4, slba);
        slate_put_le(sqe + 48, 4, FUSED_NLB - 1);
        *cid = c->cid;
        if (send_capsule(c, sqe, data, data ? FUSED_LEN : 0, false, false) < 0)
                FAIL("send opcode %02x", opc);
        c->cid++;
        return 0;
}

/* Both CQEs of a pair, whatever their order: statuses by CID. */
static int recv_two(struct conn *c, uint16_t cid_a, int *st_a, uint16_t cid_b, int *st_b)
{
        *st_a = *st_b = -1;
        for (int i = 0; i < 2; i++) {
                int st = recv_resp(c, NULL, 0);
                if (st < 0)
                        FAIL("pair response %d: %s", i, st == -2 ? "C2HTermReq" : why);
                if (last_cid == cid_a)
                        *st_a = st;
                else if (last_cid == cid_b)
                        *st_b = st;
                else
                        FAIL("response for unknown CID %u", last_cid);
        }
        if (*st_a < 0 || *st_b < 0)
                FAIL("two responses for one command");
        return 0;
}

/* Read the blocks back: every byte must be want. */
static int read_expect(struct conn *c, uint8_t want)
{
        static uint8_t data[FUSED_LEN];
        uint16_t cid;
        memset(data, 0, sizeof(data));
        if (io_send(c, 0x02, 0, NULL, &cid, FUSED_LBA) < 0)
                return -1;
        int st = recv_resp(c, data, sizeof(data));
        if (st != 0)
                FAIL("Read status 0x%x %s", st, st < 0 ? why : "");
        for (uint32_t i = 0; i < FUSED_LEN; i++)
                if (data[i] != want)
                        FAIL("byte %u reads 0x%02x, expected 0x%02x", i, data[i], want);
        return 0;
}

static int write_fill(struct conn *c, uint8_t v)
{
        static uint8_t data[FUSED_LEN];
        uint16_t cid;
        memset(data, v, sizeof(data));
        if (io_send(c, 0x01, 0, data, &cid, FUSED_LBA) < 0)
                return -1;
        int st = recv_resp(c, NULL, 0);
        if (st != 0)
                FAIL("Write status 0x%x", st);
        return 0;
}

/* Matching pair: both succeed, the new data is read back. Then a miscompare. */
static int case_fused_cw(struct conn *c, int cntlid)
{
        static uint8_t cmp[FUSED_LEN], wr[FUSED_LEN];
        uint16_t c1, c2;
        int s1, s2;
        close(c->fd);
        if (io_up(c, cntlid) < 0 || write_fill(c, 0xa1) < 0)
                return -1;
        memset(cmp, 0xa1, sizeof(cmp));
        memset(wr, 0xb2, sizeof(wr));
        if (io_send(c, 0x05, 1, cmp, &c1, FUSED_LBA) < 0 ||
            io_send(c, 0x01, 2, wr, &c2, FUSED_LBA) < 0 || recv_two(c, c1, &s1, c2, &s2) < 0)
                return -1;
        if (s1 != 0 || s2 != 0)
                FAIL("matching pair: Compare 0x%x Write 0x%x, expected 0 0", s1, s2);
        if (read_expect(c, 0xb2) < 0)
                return -1;
        /* Compare data differing in the last byte: Compare Failure, Failed Fused, unchanged. */
        memset(cmp, 0xb2, sizeof(cmp));
        cmp[FUSED_LEN - 1] = 0xb3;
        memset(wr, 0xc3, sizeof(wr));
        if (io_send(c, 0x05, 1, cmp, &c1, FUSED_LBA) < 0 ||
            io_send(c, 0x01, 2, wr, &c2, FUSED_LBA) < 0 || recv_two(c, c1, &s1, c2, &s2) < 0)
                return -1;
        if (s1 != 0x285 || s2 != 0x009)
                FAIL("miscompare: Compare 0x%x Write 0x%x, expected 0x285 0x009", s1, s2);
        return read_expect(c, 0xb2);
}

/* Lone halves and a mismatched pair: Missing Fused, Invalid Field + Failed Fused. */
static int case_fused_bad(struct conn *c, int cntlid)
{
        static uint8_t cmp[FUSED_LEN], wr[FUSED_LEN];
        uint16_t c1, c2;
        int s1, s2;
        close(c->fd);
        if (io_up(c, cntlid) < 0 || write_fill(c, 0xa1) < 0)
                return -1;
        memset(cmp, 0xa1, sizeof(cmp));
        memset(wr, 0xd4, sizeof(wr));
        if (io_send(c, 0x01, 2, wr, &c2, FUSED_LBA) < 0)
                return -1;
        if ((s2 = recv_resp(c, NULL, 0)) != 0x00a)
                FAIL("lone Write FUSE 10b: status 0x%x, expected 0x00a", s2);
        /* A Compare FUSE 01b followed by a Read: the Compare is missing its Write. */
        if (io_send(c, 0x05, 1, cmp, &c1, FUSED_LBA) < 0 ||
            io_send(c, 0x02, 0, NULL, &c2, FUSED_LBA) < 0)
                return -1;
        static uint8_t data[FUSED_LEN];
        for (int i = 0; i < 2; i++) {
                int st = recv_resp(c, data, sizeof(data));
                if (last_cid == c1 && st != 0x00a)
                        FAIL("Compare then Read: Compare status 0x%x, expected 0x00a", st);
                if (last_cid == c2 && st != 0)
                        FAIL("Compare then Read: Read status 0x%x", st);
        }
        /* The Write on another SLBA: Invalid Field on it, Failed Fused on the Compare. */
        if (io_send(c, 0x05, 1, cmp, &c1, FUSED_LBA) < 0 ||
            io_send(c, 0x01, 2, wr, &c2, FUSED_LBA + 1) < 0 || recv_two(c, c1, &s1, c2, &s2) < 0)
                return -1;
        if (s1 != 0x009 || s2 != 0x002)
                FAIL("mismatched pair: Compare 0x%x Write 0x%x, expected 0x009 0x002", s1, s2);
        return read_expect(c, 0xa1);
}

/* Send H2CData for an R2T just received (the whole of it, with pattern v). */
static int answer_r2t(struct conn *c, uint8_t v)
{
        uint8_t r[24];
        if (xrecv(c, r, 24) < 0 || r[0] != NVME_TCP_PDU_R2T)
                FAIL("no R2T (type %u)", r[0]);
        uint32_t r2to = (uint32_t)slate_get_le(r + 12, 4), r2tl = (uint32_t)slate_get_le(r + 16, 4);
        static uint8_t b[24 + FUSED_LEN];
        if (r2tl > FUSED_LEN || r2to)
                FAIL("R2T offset %u length %u", r2to, r2tl);
        memset(b, 0, 24);
        b[0] = NVME_TCP_PDU_H2C_DATA;
        b[1] = NVME_TCP_F_DATA_LAST;
        b[2] = 24;
        b[3] = 24;
        slate_put_le(b + 4, 4, 24 + r2tl);
        memcpy(b + 8, r + 8, 4); /* CCCID, TTAG */
        slate_put_le(b + 12, 4, 0);
        slate_put_le(b + 16, 4, r2tl);
        memset(b + 24, v, r2tl);
        return xsend(c, b, 24 + r2tl);
}

/* The Compare's data by R2T after the Write's arrived in-capsule: the pair still runs. */
static int case_fused_r2t(struct conn *c, int cntlid)
{
        static uint8_t wr[FUSED_LEN];
        uint16_t c1, c2;
        int s1, s2;
        close(c->fd);
        if (io_up(c, cntlid) < 0 || write_fill(c, 0x5e) < 0)
                return -1;
        memset(wr, 0x6f, sizeof(wr));
        if (io_send(c, 0x05, 1, NULL, &c1, FUSED_LBA) < 0 ||
            io_send(c, 0x01, 2, wr, &c2, FUSED_LBA) < 0 || answer_r2t(c, 0x5e) < 0 ||
            recv_two(c, c1, &s1, c2, &s2) < 0)
                return -1;
        if (s1 != 0 || s2 != 0)
                FAIL("pair with R2T: Compare 0x%x Write 0x%x, expected 0 0", s1, s2);
        return read_expect(c, 0x6f);
}

/*
 * A Compare FUSE 01b alone (its data in), then the connection closes: the
 * waiting half must not hold the queue, so I/O queue 1 of the controller
 * can be connected again (the old one is gone only once freed).
 */
static int case_fused_teardown(struct conn *c, int cntlid)
{
        static uint8_t cmp[FUSED_LEN];
        uint16_t c1;
        close(c->fd);
        if (io_up(c, cntlid) < 0)
                return -1;
        memset(cmp, 0, sizeof(cmp));
        if (io_send(c, 0x05, 1, cmp, &c1, FUSED_LBA) < 0)
                return -1;
        /* TCP delivers the capsule before the FIN: the Compare is in, waiting. */
        close(c->fd);
        for (int i = 0; i < 100; i++) {
                if (conn_open(c, false, false) < 0)
                        return -1;
                int st = do_connect(c, 1, (uint16_t)cntlid, subnqn, hostnqn, 1024, false);
                if (st == 0)
                        return 0;
                close(c->fd);
                usleep(50000);
        }
        FAIL("I/O queue 1 never freed after closing with a fused half waiting");
}

struct tcase {
        const char *name;
        int (*fn)(struct conn *c, int cntlid);
};

static const struct tcase cases[] = {
    {"bad_hlen", case_bad_hlen},
    {"bad_plen", case_bad_plen},
    {"bad_pdo", case_bad_pdo},
    {"huge_icd", case_huge_icd},
    {"unknown_type", case_unknown_type},
    {"bad_hdgst", case_bad_hdgst},
    {"bad_ddgst", case_bad_ddgst},
    {"h2c_unknown_ttag", case_h2c_unknown_ttag},
    {"h2c_beyond_r2t", case_h2c_beyond_r2t},
    {"sgl_keyed", case_sgl_keyed},
    {"sgl_subtype", case_sgl_subtype},
    {"sgl_length", case_sgl_length},
    {"connect_bad_subnqn", case_connect_bad_subnqn},
    {"connect_bad_host", case_connect_bad_host},
    {"connect_empty_host_listed", case_connect_empty_host_listed},
    {"connect_empty_host_any", case_connect_empty_host_any},
    {"aer_teardown", case_aer_teardown},
    {"fused_cw", case_fused_cw},
    {"fused_bad", case_fused_bad},
    {"fused_r2t", case_fused_r2t},
    {"fused_teardown", case_fused_teardown},
};

int main(int argc, char **argv)
{
        int opt;
        const char *name = NULL;
        while ((opt = getopt(argc, argv, "lp:n:H:")) != -1) {
                switch (opt) {
                case 'l':
                        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                                printf("%s\n", cases[i].name);
                        return 0;
                case 'p':
                        port = atoi(optarg);
                        break;
                case 'n':
                        subnqn = optarg;
                        break;
                case 'H':
                        hostnqn = optarg;
                        break;
                default:
                        return 2;
                }
        }
        if (optind < argc)
                name = argv[optind];
        if (!port || !subnqn || !hostnqn || !name) {
                fprintf(stderr, "usage: %s -p PORT -n SUBNQN -H HOSTNQN CASE | -l\n", argv[0]);
                return 2;
        }
        const struct tcase *tc = NULL;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                if (strcmp(cases[i].name, name) == 0)
                        tc = &cases[i];
        if (!tc) {
                fprintf(stderr, "unknown case %s\n", name);
                return 2;
        }
        struct conn healthy, bad;
        int cntlid = admin_up(&healthy, false, false);
        if (cntlid < 0) {
                printf("FAIL %s (healthy admin queue: %s)\n", name, why);
                return 1;
        }
        if (conn_open(&bad, false, false) < 0 || tc->fn(&bad, cntlid) < 0) {
                printf("FAIL %s (%s)\n", name, why);
                return 1;
        }
        close(bad.fd);
        int st = identify(&healthy, NVME_TCP_SGL_TRANSPORT, 4096);
        if (st != 0) {
                printf("FAIL %s (healthy connection: Identify status %d %s)\n", name, st,
                       st == -1 ? why : "");
                return 1;
        }
        printf("PASS %s\n", name);
        return 0;
}
