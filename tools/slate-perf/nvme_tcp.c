/*
 * slate-perf's NVMe/TCP initiator: a user-space host for the NVMe/TCP
 * transport binding (NVMe/TCP Transport Spec 1.0: ICReq/ICResp connection
 * setup, CapsuleCmd/CapsuleResp, in-capsule data, R2T/H2CData for larger
 * writes, C2HData with the SUCCESS flag, optional CRC32C header and data
 * digests) and of the Fabrics bring-up (NVMe-oF 1.1 sections 3.3 and 6: admin
 * Connect, Property Get CAP, Property Set CC.EN, poll CSTS.RDY, Identify,
 * Set Features Number of Queues, I/O queue Connect, Keep Alive).
 *
 * The admin queue is driven synchronously on a blocking socket (probe, then a
 * keep-alive thread).  Each worker owns one I/O queue connection, switches it
 * to non-blocking mode and runs a poll() loop: sends leave through a ring of
 * iovecs pointing at per-command header slots and data buffers (nothing is
 * allocated per I/O), and received bytes go through an explicit PDU state
 * machine that copies C2HData straight into the command's buffer.  Every
 * length and identifier the target sends is checked before use; a violation
 * ends the run with a message instead of trusting it.
 */
#include "perf.h"
#include "nvme_tcp_wire.h"
#include "tls.h"

#include <errno.h>
#include <isa-l.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <uuid/uuid.h>

#define NTCP_SLOT      256 /* one PDU header + digest + padding to PDO, + 4 digest bytes */
#define NTCP_DG_OFF    (NTCP_SLOT - 4)
#define NTCP_RB_SIZE   (256 * 1024)
#define NTCP_IOV_MAX   1024
#define NTCP_TIMEOUT_S 10

struct ntcp_conn {
        int fd;
        struct perf_tls *tls; /* --tls-psk: the connection runs over TLS 1.3 */
        bool hdgst, ddgst;
        uint32_t cpda_align; /* bytes: PDO of PDUs we send is a multiple of this */
        uint32_t maxh2cdata;
        uint16_t next_cid; /* synchronous (admin / connect) commands */
};

struct ntcp_ctrl {
        const struct perf_opts *o;
        struct ntcp_conn admin;
        uint16_t cntlid;
        uint8_t hostid[16];
        uint32_t icdsz; /* in-capsule data bytes accepted on I/O queues */
        uint32_t mqes;  /* largest I/O queue size, entries */
        pthread_t ka;
        bool ka_started;
        pthread_mutex_t lock;
        pthread_cond_t cv;
        bool stop;
};

static void vlog(const struct perf_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void vlog(const struct perf_opts *o, const char *fmt, ...)
{
        if (!o->verbose)
                return;
        va_list ap;
        va_start(ap, fmt);
        fputs("slate-perf: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
}

static uint32_t crc32c(const void *b, size_t n)
{
        return crc32_iscsi((unsigned char *)b, (int)n, 0xffffffffu) ^ 0xffffffffu;
}

static uint32_t align_up(uint32_t v, uint32_t a)
{
        return (v + a - 1) / a * a;
}

/* ------------------------------------------------------------------ sockets */

static int sock_connect(const struct perf_opts *o, int *fdp)
{
        struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res, *ai;
        int rc = getaddrinfo(o->addr, o->port, &hints, &res);
        if (rc) {
                fprintf(stderr, "slate-perf: %s:%s: %s\n", o->addr, o->port, gai_strerror(rc));
                return -EHOSTUNREACH;
        }
        int fd = -1, err = -ECONNREFUSED;
        for (ai = res; ai; ai = ai->ai_next) {
                fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
                if (fd < 0) {
                        err = -errno;
                        continue;
                }
                if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
                        break;
                err = -errno;
                close(fd);
                fd = -1;
        }
        freeaddrinfo(res);
        if (fd < 0)
                return err;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct timeval tv = {.tv_sec = NTCP_TIMEOUT_S};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        *fdp = fd;
        return 0;
}

/* sendmsg, or through TLS; bytes taken, or -errno (-EAGAIN: non-blocking and full). */
static ssize_t conn_sendv(struct ntcp_conn *c, struct iovec *iov, int n, int flags)
{
        if (c->tls)
                return perf_tls_writev(c->tls, iov, n);
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t r = sendmsg(c->fd, &m, MSG_NOSIGNAL | flags);
        return r < 0 ? (errno == EWOULDBLOCK ? -EAGAIN : -errno) : r;
}

static ssize_t conn_recv(struct ntcp_conn *c, void *buf, size_t len, int flags)
{
        if (c->tls)
                return perf_tls_read(c->tls, buf, len);
        ssize_t r = recv(c->fd, buf, len, flags);
        return r < 0 ? (errno == EWOULDBLOCK ? -EAGAIN : -errno) : r;
}

static void conn_close(struct ntcp_conn *c)
{
        perf_tls_free(c->tls);
        c->tls = NULL;
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
}

static int send_full(struct ntcp_conn *c, struct iovec *iov, int n)
{
        while (n > 0) {
                ssize_t r = conn_sendv(c, iov, n, 0);
                if (r < 0) {
                        if (r == -EINTR)
                                continue;
                        return (int)r;
                }
                while (n > 0 && (size_t)r >= iov->iov_len) {
                        r -= (ssize_t)iov->iov_len;
                        iov++;
                        n--;
                }
                if (n > 0) {
                        iov->iov_base = (char *)iov->iov_base + r;
                        iov->iov_len -= (size_t)r;
                }
        }
        return 0;
}

static int recv_full(struct ntcp_conn *c, void *buf, size_t len)
{
        size_t got = 0;
        while (got < len) {
                ssize_t r = conn_recv(c, (char *)buf + got, len - got, 0);
                if (r == 0)
                        return -ECONNRESET;
                if (r < 0) {
                        if (r == -EINTR)
                                continue;
                        return r == -EAGAIN ? -ETIMEDOUT : (int)r;
                }
                got += (size_t)r;
        }
        return 0;
}

/* --------------------------------------------------------- connection setup */

static int ntcp_icreq(struct ntcp_conn *c, const struct perf_opts *o)
{
        struct ntcp_icreq req = {0};
        struct ntcp_icresp rsp;
        req.ch.type = NTCP_PDU_ICREQ;
        req.ch.hlen = sizeof(req);
        put_le32(&req.ch.plen, sizeof(req));
        put_le16(&req.pfv, 0);
        req.hpda = 0;
        req.dgst = (o->hdgst ? 1 : 0) | (o->ddgst ? 2 : 0);
        put_le32(&req.maxr2t, 0); /* one R2T per command at a time */
        struct iovec iov = {&req, sizeof(req)};
        int rc = send_full(c, &iov, 1);
        if (rc)
                return rc;
        if ((rc = recv_full(c, &rsp, sizeof(rsp))))
                return rc;
        if (rsp.ch.type == NTCP_PDU_C2H_TERM) {
                fprintf(stderr, "slate-perf: target refused ICReq (C2HTermReq)\n");
                return -EPROTO;
        }
        if (rsp.ch.type != NTCP_PDU_ICRESP || rsp.ch.hlen != sizeof(rsp) ||
            get_le32(&rsp.ch.plen) != sizeof(rsp)) {
                fprintf(stderr, "slate-perf: bad ICResp header (type %u hlen %u)\n", rsp.ch.type,
                        rsp.ch.hlen);
                return -EPROTO;
        }
        uint32_t maxh2c = get_le32(&rsp.maxh2cdata);
        if (get_le16(&rsp.pfv) != 0 || rsp.cpda > 31 || maxh2c < 4096 || maxh2c % 4) {
                fprintf(stderr, "slate-perf: bad ICResp (pfv %u cpda %u maxh2cdata %u)\n",
                        get_le16(&rsp.pfv), rsp.cpda, maxh2c);
                return -EPROTO;
        }
        c->hdgst = rsp.dgst & 1;
        c->ddgst = (rsp.dgst >> 1) & 1;
        if (c->hdgst != o->hdgst || c->ddgst != o->ddgst) {
                fprintf(stderr, "slate-perf: target did not accept the digests asked for\n");
                return -EPROTO;
        }
        c->cpda_align = (rsp.cpda + 1u) * 4u;
        c->maxh2cdata = maxh2c;
        return 0;
}

/*
 * Build the CapsuleCmd header for sqe carrying data_len bytes of in-capsule
 * data into buf (NTCP_SLOT bytes).  Returns the bytes to send before the data
 * (header, header digest, padding up to PDO).
 */
static uint32_t build_cmd_hdr(const struct ntcp_conn *c, uint8_t *buf, const void *sqe,
                              uint32_t data_len)
{
        struct ntcp_cmd_pdu *p = (struct ntcp_cmd_pdu *)buf;
        uint32_t hd = c->hdgst ? 4 : 0, dd = (c->ddgst && data_len) ? 4 : 0;
        uint32_t off = sizeof(*p) + hd, pdo = data_len ? align_up(off, c->cpda_align) : 0;
        memset(buf, 0, data_len ? pdo : off);
        p->ch.type = NTCP_PDU_CMD;
        p->ch.flags = (hd ? NTCP_F_HDGST : 0) | (dd ? NTCP_F_DDGST : 0);
        p->ch.hlen = sizeof(*p);
        p->ch.pdo = (uint8_t)pdo;
        put_le32(&p->ch.plen, data_len ? pdo + data_len + dd : off);
        memcpy(&p->sqe, sqe, sizeof(p->sqe));
        if (hd)
                put_le32((le32 *)(buf + sizeof(*p)), crc32c(buf, sizeof(*p)));
        return data_len ? pdo : off;
}

/* Build an H2CData header into buf; returns the bytes before the data. */
static uint32_t build_h2c_hdr(const struct ntcp_conn *c, uint8_t *buf, uint16_t cid, uint16_t ttag,
                              uint32_t off, uint32_t len, bool last)
{
        struct ntcp_data_pdu *p = (struct ntcp_data_pdu *)buf;
        uint32_t hd = c->hdgst ? 4 : 0, dd = c->ddgst ? 4 : 0;
        uint32_t pdo = align_up(sizeof(*p) + hd, c->cpda_align);
        memset(buf, 0, pdo);
        p->ch.type = NTCP_PDU_H2C_DATA;
        p->ch.flags = (hd ? NTCP_F_HDGST : 0) | (dd ? NTCP_F_DDGST : 0) | (last ? NTCP_F_LAST : 0);
        p->ch.hlen = sizeof(*p);
        p->ch.pdo = (uint8_t)pdo;
        put_le32(&p->ch.plen, pdo + len + dd);
        put_le16(&p->cccid, cid);
        put_le16(&p->ttag, ttag);
        put_le32(&p->offset, off);
        put_le32(&p->length, len);
        if (hd)
                put_le32((le32 *)(buf + sizeof(*p)), crc32c(buf, sizeof(*p)));
        return pdo;
}

/* Receive one PDU header (with digest) on a blocking socket into hdr. */
static int recv_hdr(struct ntcp_conn *c, uint8_t *hdr, uint32_t *hlen_out)
{
        int rc = recv_full(c, hdr, sizeof(struct ntcp_ch));
        if (rc)
                return rc;
        const struct ntcp_ch *ch = (const struct ntcp_ch *)hdr;
        uint32_t hd = (ch->flags & NTCP_F_HDGST) ? 4 : 0;
        if (ch->hlen < sizeof(struct ntcp_ch) || ch->hlen > 128 || (hd != 0) != c->hdgst)
                return -EPROTO;
        if ((rc = recv_full(c, hdr + sizeof(*ch), ch->hlen + hd - sizeof(*ch))))
                return rc;
        if (hd && get_le32((const le32 *)(hdr + ch->hlen)) != crc32c(hdr, ch->hlen)) {
                fprintf(stderr, "slate-perf: header digest error from target\n");
                return -EBADMSG;
        }
        *hlen_out = ch->hlen + hd;
        return 0;
}

/*
 * Run one command synchronously on a blocking connection: send sqe with
 * in_len bytes of in-capsule data, gather up to out_len bytes of C2HData into
 * out, return the completion in *cqe.  0 or -errno (the NVMe status is in cqe).
 */
static int ntcp_sync_cmd(struct ntcp_conn *c, void *sqe_v, const void *in, uint32_t in_len,
                         void *out, uint32_t out_len, struct nvme_cqe *cqe)
{
        struct nvme_sqe *sqe = sqe_v;
        uint8_t hdr[NTCP_SLOT];
        uint16_t cid = c->next_cid++;
        put_le16(&sqe->cid, cid);
        sqe->flags = NVME_CMD_SGL;
        put_le64(&sqe->sgl.addr, 0);
        put_le32(&sqe->sgl.length, in_len ? in_len : out_len);
        sqe->sgl.type = in_len ? NVME_SGL_DATA_OFFSET : NVME_SGL_TRANSPORT_DATA;
        uint8_t dg[4];
        struct iovec iov[3];
        int n = 0;
        iov[n++] = (struct iovec){hdr, build_cmd_hdr(c, hdr, sqe, in_len)};
        if (in_len) {
                iov[n++] = (struct iovec){(void *)in, in_len};
                if (c->ddgst) {
                        put_le32((le32 *)dg, crc32c(in, in_len));
                        iov[n++] = (struct iovec){dg, 4};
                }
        }
        int rc = send_full(c, iov, n);
        if (rc)
                return rc;
        for (;;) {
                uint32_t hl;
                if ((rc = recv_hdr(c, hdr, &hl)))
                        return rc;
                const struct ntcp_ch *ch = (const struct ntcp_ch *)hdr;
                uint32_t plen = get_le32(&ch->plen);
                if (ch->type == NTCP_PDU_RSP && ch->hlen == sizeof(struct ntcp_rsp_pdu) &&
                    plen == hl) {
                        const struct ntcp_rsp_pdu *r = (const struct ntcp_rsp_pdu *)hdr;
                        if (get_le16(&r->cqe.cid) != cid)
                                return -EPROTO;
                        *cqe = r->cqe;
                        return 0;
                }
                if (ch->type == NTCP_PDU_C2H_DATA && ch->hlen == sizeof(struct ntcp_data_pdu)) {
                        const struct ntcp_data_pdu *d = (const struct ntcp_data_pdu *)hdr;
                        uint32_t off = get_le32(&d->offset), len = get_le32(&d->length);
                        uint32_t dd = (ch->flags & NTCP_F_DDGST) ? 4 : 0;
                        if (get_le16(&d->cccid) != cid || ch->pdo < hl || len == 0 ||
                            (uint64_t)off + len > out_len || plen != (uint64_t)ch->pdo + len + dd ||
                            (dd != 0) != c->ddgst)
                                return -EPROTO;
                        uint8_t pad[128];
                        if ((rc = recv_full(c, pad, ch->pdo - hl)) ||
                            (rc = recv_full(c, (uint8_t *)out + off, len)))
                                return rc;
                        if (dd) {
                                if ((rc = recv_full(c, dg, 4)))
                                        return rc;
                                if (get_le32((le32 *)dg) != crc32c((uint8_t *)out + off, len))
                                        return -EBADMSG;
                        }
                        if ((ch->flags & (NTCP_F_SUCCESS | NTCP_F_LAST)) ==
                            (NTCP_F_SUCCESS | NTCP_F_LAST)) {
                                memset(cqe, 0, sizeof(*cqe));
                                put_le16(&cqe->cid, cid);
                                return 0;
                        }
                        continue;
                }
                if (ch->type == NTCP_PDU_C2H_TERM) {
                        const struct ntcp_term *t = (const struct ntcp_term *)hdr;
                        fprintf(stderr, "slate-perf: target terminated the connection (FES %u)\n",
                                get_le16(&t->fes));
                        return -ECONNABORTED;
                }
                fprintf(stderr, "slate-perf: unexpected PDU type %u during setup\n", ch->type);
                return -EPROTO;
        }
}

static int nvme_status(const struct nvme_cqe *cqe)
{
        return get_le16(&cqe->status) >> 1;
}

static int ntcp_fabric_connect(struct ntcp_conn *c, struct ntcp_ctrl *ctrl, uint16_t qid,
                               uint16_t sqsize, uint16_t *cntlid)
{
        const struct perf_opts *o = ctrl->o;
        struct nvmf_sqe sqe = {0};
        struct nvmf_connect_data data = {0};
        struct nvme_cqe cqe;
        sqe.opc = NVME_FABRICS;
        sqe.fctype = NVMF_FCTYPE_CONNECT;
        put_le16(&sqe.connect.recfmt, 0);
        put_le16(&sqe.connect.qid, qid);
        put_le16(&sqe.connect.sqsize, sqsize);
        put_le32(&sqe.connect.kato, qid ? 0 : o->kato_ms);
        memcpy(data.hostid, ctrl->hostid, sizeof(data.hostid));
        put_le16(&data.cntlid, qid ? ctrl->cntlid : 0xffff);
        snprintf(data.subnqn, sizeof(data.subnqn), "%s", o->subnqn);
        snprintf(data.hostnqn, sizeof(data.hostnqn), "%s", o->hostnqn);
        c->next_cid = 0;
        int rc = ntcp_sync_cmd(c, &sqe, &data, sizeof(data), NULL, 0, &cqe);
        if (rc)
                return rc;
        if (nvme_status(&cqe)) {
                fprintf(stderr, "slate-perf: Connect qid %u refused: status 0x%x (dw0 0x%x)\n", qid,
                        nvme_status(&cqe), get_le32(&cqe.dw0));
                return -ECONNREFUSED;
        }
        if (cntlid)
                *cntlid = (uint16_t)get_le32(&cqe.dw0);
        return 0;
}

/* Open a queue connection: TCP, ICReq, Fabrics Connect. */
static int ntcp_open_queue(struct ntcp_ctrl *ctrl, struct ntcp_conn *c, uint16_t qid,
                           uint16_t sqsize)
{
        const struct perf_opts *o = ctrl->o;
        c->fd = -1;
        c->tls = NULL;
        int rc = sock_connect(o, &c->fd);
        if (rc)
                return rc;
        if (o->tls_psk) {
                rc = perf_tls_connect(&c->tls, c->fd, o->tls_psk, o->tls_identity, o->hostnqn,
                                      o->subnqn);
                if (rc) {
                        conn_close(c);
                        return rc;
                }
                vlog(o, "queue %u: TLS 1.3, %s", qid, perf_tls_cipher(c->tls));
        }
        if ((rc = ntcp_icreq(c, o)) ||
            (rc = ntcp_fabric_connect(c, ctrl, qid, sqsize, qid ? NULL : &ctrl->cntlid))) {
                conn_close(c);
                return rc;
        }
        vlog(ctrl->o, "queue %u connected (maxh2cdata %u, cpda align %u)", qid, c->maxh2cdata,
             c->cpda_align);
        return 0;
}

static int prop_get(struct ntcp_ctrl *ctrl, uint32_t ofst, bool eight, uint64_t *val)
{
        struct nvmf_sqe sqe = {0};
        struct nvme_cqe cqe;
        sqe.opc = NVME_FABRICS;
        sqe.fctype = NVMF_FCTYPE_PROP_GET;
        sqe.prop.attrib = eight ? 1 : 0;
        put_le32(&sqe.prop.ofst, ofst);
        int rc = ntcp_sync_cmd(&ctrl->admin, &sqe, NULL, 0, NULL, 0, &cqe);
        if (rc)
                return rc;
        if (nvme_status(&cqe))
                return -EIO;
        *val = get_le32(&cqe.dw0) | ((uint64_t)get_le32(&cqe.dw1) << 32);
        return 0;
}

static int prop_set(struct ntcp_ctrl *ctrl, uint32_t ofst, uint32_t val)
{
        struct nvmf_sqe sqe = {0};
        struct nvme_cqe cqe;
        sqe.opc = NVME_FABRICS;
        sqe.fctype = NVMF_FCTYPE_PROP_SET;
        put_le32(&sqe.prop.ofst, ofst);
        put_le64(&sqe.prop.value, val);
        int rc = ntcp_sync_cmd(&ctrl->admin, &sqe, NULL, 0, NULL, 0, &cqe);
        if (rc)
                return rc;
        return nvme_status(&cqe) ? -EIO : 0;
}

static int admin_cmd(struct ntcp_ctrl *ctrl, struct nvme_sqe *sqe, void *out, uint32_t out_len,
                     uint32_t *dw0)
{
        struct nvme_cqe cqe;
        int rc = ntcp_sync_cmd(&ctrl->admin, sqe, NULL, 0, out, out_len, &cqe);
        if (rc)
                return rc;
        if (nvme_status(&cqe)) {
                fprintf(stderr, "slate-perf: admin opcode 0x%02x failed: status 0x%x\n", sqe->opc,
                        nvme_status(&cqe));
                return -EIO;
        }
        if (dw0)
                *dw0 = get_le32(&cqe.dw0);
        return 0;
}

static void *keepalive_main(void *arg)
{
        struct ntcp_ctrl *ctrl = arg;
        uint32_t period_ms = ctrl->o->kato_ms / 3;
        pthread_mutex_lock(&ctrl->lock);
        while (!ctrl->stop) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)period_ms * 1000000u;
                ts.tv_sec += (time_t)(ns / 1000000000u);
                ts.tv_nsec = (long)(ns % 1000000000u);
                pthread_cond_timedwait(&ctrl->cv, &ctrl->lock, &ts);
                if (ctrl->stop)
                        break;
                struct nvme_sqe sqe = {.opc = NVME_ADM_KEEP_ALIVE};
                if (admin_cmd(ctrl, &sqe, NULL, 0, NULL)) {
                        fprintf(stderr, "slate-perf: keep alive failed\n");
                        break;
                }
        }
        pthread_mutex_unlock(&ctrl->lock);
        return NULL;
}

static void ntcp_close(void *tctx)
{
        struct ntcp_ctrl *ctrl = tctx;
        if (!ctrl)
                return;
        if (ctrl->ka_started) {
                pthread_mutex_lock(&ctrl->lock);
                ctrl->stop = true;
                pthread_cond_signal(&ctrl->cv);
                pthread_mutex_unlock(&ctrl->lock);
                pthread_join(ctrl->ka, NULL);
        }
        if (ctrl->admin.fd >= 0) {
                /* Orderly shutdown: CC.SHN = normal; the target may also just see the close. */
                struct timeval tv = {.tv_sec = 1};
                setsockopt(ctrl->admin.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
                prop_set(ctrl, NVME_REG_CC, 0x460001u | (1u << 14));
                conn_close(&ctrl->admin);
        }
        pthread_mutex_destroy(&ctrl->lock);
        pthread_cond_destroy(&ctrl->cv);
        free(ctrl);
}

static int ntcp_probe(const struct perf_opts *o, struct perf_geom *g, void **tctx)
{
        struct ntcp_ctrl *ctrl = calloc(1, sizeof(*ctrl));
        uint8_t *id = aligned_alloc(4096, 4096);
        int rc = -ENOMEM;
        if (!ctrl || !id) {
                free(ctrl);
                free(id);
                return -ENOMEM;
        }
        ctrl->o = o;
        ctrl->admin.fd = -1;
        pthread_mutex_init(&ctrl->lock, NULL);
        pthread_cond_init(&ctrl->cv, NULL);
        uuid_generate(ctrl->hostid);

        if ((rc = ntcp_open_queue(ctrl, &ctrl->admin, 0, 31)))
                goto fail;
        uint64_t cap, csts = 0;
        if ((rc = prop_get(ctrl, NVME_REG_CAP, true, &cap)))
                goto fail;
        ctrl->mqes = (uint32_t)(cap & 0xffff) + 1;
        unsigned mpsmin = (unsigned)(cap >> 48) & 0xf;
        uint64_t to_ms = ((cap >> 24) & 0xff) * 500;
        if (to_ms < 1000)
                to_ms = 1000;
        vlog(o, "controller %u: CAP 0x%llx (MQES %u)", ctrl->cntlid, (unsigned long long)cap,
             ctrl->mqes);
        /* CC: EN, IOSQES 6 (64 B), IOCQES 4 (16 B), NVM command set, 4 KiB pages. */
        if ((rc = prop_set(ctrl, NVME_REG_CC, 0x460001u)))
                goto fail;
        uint64_t t0 = perf_now_ns();
        for (;;) {
                if ((rc = prop_get(ctrl, NVME_REG_CSTS, false, &csts)))
                        goto fail;
                if (csts & 2) {
                        fprintf(stderr, "slate-perf: controller fatal status (CSTS 0x%llx)\n",
                                (unsigned long long)csts);
                        rc = -EIO;
                        goto fail;
                }
                if (csts & 1)
                        break;
                if (perf_now_ns() - t0 > to_ms * 1000000u) {
                        fprintf(stderr, "slate-perf: controller not ready after %llu ms\n",
                                (unsigned long long)to_ms);
                        rc = -ETIMEDOUT;
                        goto fail;
                }
                usleep(10000);
        }

        struct nvme_sqe sqe = {.opc = NVME_ADM_IDENTIFY};
        put_le32(&sqe.cdw10, 1); /* CNS 01h: controller */
        if ((rc = admin_cmd(ctrl, &sqe, id, 4096, NULL)))
                goto fail;
        uint8_t mdts = id[NVME_IDC_MDTS];
        bool elbas = get_le32((le32 *)(id + NVME_IDC_CTRATT)) & (1u << 15);
        uint32_t ioccsz = get_le32((le32 *)(id + NVME_IDC_IOCCSZ));
        ctrl->icdsz = ioccsz > 4 ? (ioccsz - 4) * 16 : 0;
        g->max_io = 0;
        if (mdts && mdts + 12 + mpsmin < 32)
                g->max_io = 1u << (mdts + 12 + mpsmin);
        char mn[41];
        memcpy(mn, id + NVME_IDC_MN, 40);
        mn[40] = 0;
        for (int i = 39; i >= 0 && mn[i] == ' '; i--)
                mn[i] = 0;

        memset(&sqe, 0, sizeof(sqe));
        sqe.opc = NVME_ADM_IDENTIFY;
        put_le32(&sqe.nsid, o->nsid);
        put_le32(&sqe.cdw10, 0); /* CNS 00h: namespace */
        if ((rc = admin_cmd(ctrl, &sqe, id, 4096, NULL)))
                goto fail;
        uint64_t nsze = get_le64((le64 *)(id + NVME_IDN_NSZE));
        uint8_t flbas = id[NVME_IDN_FLBAS];
        unsigned fmt = (flbas & 0xf) | (((flbas >> 5) & 3u) << 4);
        const uint8_t *lbaf = id + NVME_IDN_LBAF + 4 * fmt;
        unsigned lbads = lbaf[2], ms = lbaf[0] | (lbaf[1] << 8);
        if (!nsze || lbads < 9 || lbads > 16) {
                fprintf(stderr, "slate-perf: namespace %u is not usable (NSZE %llu, LBADS %u)\n",
                        o->nsid, (unsigned long long)nsze, lbads);
                rc = -ENODEV;
                goto fail;
        }
        g->lba_size = 1u << lbads;
        g->nblocks = nsze;
        /*
         * Metadata: only as extended LBAs (what fabrics carry), and only
         * with --pi, which needs protection information: its type (DPS),
         * where it sits, and the guard (the ELBAF of the format, CNS 05h).
         */
        uint8_t dps = id[NVME_IDN_DPS];
        if (ms && !(flbas & 0x10)) {
                fprintf(stderr, "slate-perf: metadata in a separate buffer is not supported\n");
                rc = -ENOTSUP;
                goto fail;
        }
        if (ms && !o->pi) {
                fprintf(stderr,
                        "slate-perf: namespace %u has %u bytes of metadata a block: "
                        "use --pi\n",
                        o->nsid, ms);
                rc = -ENOTSUP;
                goto fail;
        }
        if (o->pi && (!ms || !(dps & 7))) {
                fprintf(stderr, "slate-perf: --pi: namespace %u has no protection information\n",
                        o->nsid);
                rc = -ENOTSUP;
                goto fail;
        }
        if (o->pi) {
                uint32_t elbaf = 0;
                if (elbas) {
                        memset(&sqe, 0, sizeof(sqe));
                        sqe.opc = NVME_ADM_IDENTIFY;
                        put_le32(&sqe.nsid, o->nsid);
                        put_le32(&sqe.cdw10, 5); /* CNS 05h, CSI 00h: NVM command set */
                        uint8_t *nvm = aligned_alloc(4096, 4096);
                        if (!nvm || (rc = admin_cmd(ctrl, &sqe, nvm, 4096, NULL))) {
                                free(nvm);
                                rc = rc ? rc : -ENOMEM;
                                goto fail;
                        }
                        elbaf = get_le32((le32 *)(nvm + NVME_IDNVM_ELBAF + 4 * fmt));
                        free(nvm);
                }
                g->md_size = ms;
                g->pi = (struct core_pi_fmt){.block_size = g->lba_size,
                                             .md_size = (uint16_t)ms,
                                             .type = dps & 7,
                                             .guard = (elbaf >> 7) & 3,
                                             .sts = elbaf & 0x7f,
                                             .pi_first = (dps & 8) != 0};
                char why[128];
                if (core_pi_fmt_check(&g->pi, why, sizeof(why))) {
                        fprintf(stderr, "slate-perf: --pi: format not usable here: %s\n", why);
                        rc = -ENOTSUP;
                        goto fail;
                }
                /* MDTS counts the metadata: the largest I/O in data bytes. */
                if (g->max_io && (o->pi == PERF_PI_HOST || ms != core_pi_tuple_size(&g->pi)))
                        g->max_io = g->max_io / (g->lba_size + ms) * g->lba_size;
        }

        memset(&sqe, 0, sizeof(sqe));
        sqe.opc = NVME_ADM_SET_FEATURES;
        put_le32(&sqe.cdw10, NVME_FEAT_NUM_QUEUES);
        put_le32(&sqe.cdw11, (o->nqueues - 1) | ((o->nqueues - 1) << 16));
        uint32_t dw0 = 0;
        if ((rc = admin_cmd(ctrl, &sqe, NULL, 0, &dw0)))
                goto fail;
        unsigned nsq = (dw0 & 0xffff) + 1, ncq = (dw0 >> 16) + 1;
        if (nsq < o->nqueues || ncq < o->nqueues) {
                fprintf(stderr, "slate-perf: target grants only %u I/O queues\n",
                        nsq < ncq ? nsq : ncq);
                rc = -ENOSPC;
                goto fail;
        }
        snprintf(g->desc, sizeof(g->desc), "%s:%s %s ns %u (%s, %llu x %u B)", o->addr, o->port,
                 o->subnqn, o->nsid, mn[0] ? mn : "?", (unsigned long long)nsze, g->lba_size);
        vlog(o, "%s; in-capsule %u B, max I/O %u B", g->desc, ctrl->icdsz, g->max_io);

        if (o->place == PERF_PLACE_STREAM) {
                /*
                 * Streams are off until the host enables them: Directive
                 * Send, Identify directive (DTYPE 00h), Enable Directive
                 * (DOPER 01h); CDW12 TDTYPE = Streams (01h), ENDIR = 1.
                 */
                memset(&sqe, 0, sizeof(sqe));
                sqe.opc = NVME_ADM_DIRECTIVE_SEND;
                put_le32(&sqe.nsid, o->nsid);
                put_le32(&sqe.cdw11, 0x01);
                put_le32(&sqe.cdw12, (1u << 8) | 1u);
                if ((rc = admin_cmd(ctrl, &sqe, NULL, 0, NULL))) {
                        fprintf(stderr, "slate-perf: cannot enable the Streams directive\n");
                        goto fail;
                }
                vlog(o, "Streams directive enabled on namespace %u", o->nsid);
        }
        if (o->kato_ms) {
                if (pthread_create(&ctrl->ka, NULL, keepalive_main, ctrl) == 0)
                        ctrl->ka_started = true;
        }
        free(id);
        *tctx = ctrl;
        return 0;
fail:
        free(id);
        ntcp_close(ctrl);
        return rc;
}

/* ------------------------------------------------------------ I/O queues */

struct ntcp_cmd {
        uint8_t *buf;
        uint8_t *slots; /* capsule slot, then nh2c H2CData slots, NTCP_SLOT each */
        uint64_t start_ns;
        uint64_t lba;       /* first LBA (--verify, --pi) */
        uint32_t xfer_next; /* write: next offset the target may ask for; read: next C2H offset */
        unsigned h2c_next;
        bool busy, write;
};

enum ntcp_rx_state {
        RX_HDR,   /* collecting a PDU header (+ header digest) */
        RX_PAD,   /* skipping padding between header and PDO */
        RX_DATA,  /* C2HData payload into the command's buffer */
        RX_DDGST, /* data digest after the payload */
};

struct ntcp_q {
        struct perf_worker *w;
        struct ntcp_ctrl *ctrl;
        struct ntcp_conn c;
        struct ntcp_cmd *cmds;
        unsigned qd, nh2c, outstanding;
        uint32_t bs;   /* data bytes per I/O */
        uint32_t xfer; /* bytes on the wire per I/O: bs, or extended LBAs with metadata */
        uint32_t nlb;
        bool host_md; /* the transfer holds each block's metadata */
        struct iovec *iov;
        unsigned iov_cap, iov_head, iov_cnt;
        uint8_t *rb;
        /* receive state machine */
        enum ntcp_rx_state rx;
        uint8_t hdr[128 + 4];
        uint32_t have, want;
        uint32_t pad_left, data_left, data_off;
        struct ntcp_cmd *rcmd;
        uint8_t rflags;
        uint32_t crc;
        uint8_t dg[4];
        uint32_t dg_have;
        bool running;
        uint64_t vseq; /* --verify: sequence number of the next write */
};

static int q_fail(struct ntcp_q *q, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int q_fail(struct ntcp_q *q, int rc, const char *fmt, ...)
{
        if (!q->w->rc) {
                va_list ap;
                va_start(ap, fmt);
                vsnprintf(q->w->err, sizeof(q->w->err), fmt, ap);
                va_end(ap);
                q->w->rc = rc;
        }
        return rc;
}

static void q_push(struct ntcp_q *q, void *base, size_t len)
{
        if (!len)
                return;
        unsigned i = (q->iov_head + q->iov_cnt) % q->iov_cap;
        q->iov[i] = (struct iovec){base, len};
        q->iov_cnt++;
}

static int q_flush(struct ntcp_q *q)
{
        while (q->iov_cnt) {
                unsigned n = q->iov_cnt;
                if (n > q->iov_cap - q->iov_head)
                        n = q->iov_cap - q->iov_head;
                if (n > NTCP_IOV_MAX)
                        n = NTCP_IOV_MAX;
                ssize_t r = conn_sendv(&q->c, &q->iov[q->iov_head], (int)n, MSG_DONTWAIT);
                if (r < 0) {
                        if (r == -EINTR)
                                continue;
                        if (r == -EAGAIN)
                                return 0;
                        return q_fail(q, (int)r, "send: %s", strerror((int)-r));
                }
                while (r > 0) {
                        struct iovec *v = &q->iov[q->iov_head];
                        if ((size_t)r >= v->iov_len) {
                                r -= (ssize_t)v->iov_len;
                                q->iov_head = (q->iov_head + 1) % q->iov_cap;
                                q->iov_cnt--;
                        } else {
                                v->iov_base = (char *)v->iov_base + r;
                                v->iov_len -= (size_t)r;
                                r = 0;
                        }
                }
        }
        return 0;
}

static void q_submit(struct ntcp_q *q, unsigned idx)
{
        struct ntcp_cmd *cmd = &q->cmds[idx];
        struct perf_io io;
        perf_next_io(q->w, &io);
        struct nvme_sqe sqe = {0};
        uint32_t nlb = q->nlb;
        bool inline_data = io.write && q->xfer <= q->ctrl->icdsz;
        sqe.opc = io.write ? NVME_IO_WRITE : NVME_IO_READ;
        sqe.flags = NVME_CMD_SGL;
        put_le16(&sqe.cid, (uint16_t)idx);
        put_le32(&sqe.nsid, q->w->o->nsid);
        put_le32(&sqe.sgl.length, q->xfer);
        sqe.sgl.type = inline_data ? NVME_SGL_DATA_OFFSET : NVME_SGL_TRANSPORT_DATA;
        put_le32(&sqe.cdw10, (uint32_t)io.lba);
        put_le32(&sqe.cdw11, (uint32_t)(io.lba >> 32));
        put_le32(&sqe.cdw12, nlb - 1);
        if (io.write && q->w->tag) {
                /* DTYPE (CDW12 bits 23:20): 01h Streams, 02h Data Placement; DSPEC: CDW13 31:16 */
                uint32_t dtype = q->w->o->place == PERF_PLACE_FDP ? 2u : 1u;
                put_le32(&sqe.cdw12, (nlb - 1) | dtype << 20);
                put_le32(&sqe.cdw13, (uint32_t)q->w->tag << 16);
        }
        const struct perf_opts *o = q->w->o;
        if (o->pi) {
                /*
                 * PRINFO (CDW12 29:26): PRACT for --pi=pract, every check
                 * (guard, application tag, reference tag); the reference
                 * tag is the LBA's low bits (CDW14, CDW3 for 32b/64b
                 * guards), the application tag PERF_PI_APPTAG, all 16
                 * bits compared (CDW15 LBAT, LBATM).
                 */
                uint32_t prinfo = (o->pi == PERF_PI_PRACT ? 8u : 0u) | 7u;
                put_le32(&sqe.cdw12, get_le32(&sqe.cdw12) | prinfo << 26);
                put_le32(&sqe.cdw14, (uint32_t)io.lba);
                put_le32(&sqe.cdw3, (uint32_t)(io.lba >> 32));
                put_le32(&sqe.cdw15, PERF_PI_APPTAG | 0xffffu << 16);
        }
        if (io.write && o->pi == PERF_PI_HOST)
                perf_pi_fill(q->w, cmd->buf, nlb, io.lba, q->vseq++);
        else if (io.write && o->verify && q->host_md)
                for (uint32_t i = 0; i < nlb; i++)
                        perf_verify_fill(cmd->buf + (size_t)i * (q->xfer / nlb), q->w->g->lba_size,
                                         q->w->g->lba_size, io.lba + i, q->vseq);
        else if (io.write && o->verify)
                perf_verify_fill(cmd->buf, q->bs, q->w->g->lba_size, io.lba, q->vseq);
        if (io.write && o->verify && o->pi != PERF_PI_HOST)
                q->vseq++;
        cmd->lba = io.lba;
        cmd->busy = true;
        cmd->write = io.write;
        cmd->xfer_next = 0;
        cmd->h2c_next = 0;
        uint32_t hl = build_cmd_hdr(&q->c, cmd->slots, &sqe, inline_data ? q->xfer : 0);
        q_push(q, cmd->slots, hl);
        if (inline_data) {
                q_push(q, cmd->buf, q->xfer);
                if (q->c.ddgst) {
                        put_le32((le32 *)(cmd->slots + NTCP_DG_OFF), crc32c(cmd->buf, q->xfer));
                        q_push(q, cmd->slots + NTCP_DG_OFF, 4);
                }
                cmd->xfer_next = q->xfer;
        }
        q->outstanding++;
        cmd->start_ns = perf_now_ns();
}

static void q_complete(struct ntcp_q *q, struct ntcp_cmd *cmd, bool ok)
{
        uint64_t now = perf_now_ns();
        if (ok && !cmd->write && q->w->o->pi == PERF_PI_HOST) {
                /* The target checked; check again here, the data too with --verify. */
                uint32_t bad = perf_pi_check(q->w, cmd->buf, q->nlb, cmd->lba);
                if (bad == PERF_PI_BAD) {
                        ok = false;
                } else if (bad) {
                        q_fail(q, -EILSEQ, "verify: LBA %llu read back wrong data",
                               (unsigned long long)(cmd->lba + bad - 1));
                        ok = false;
                }
        } else if (ok && !cmd->write && q->w->o->verify && q->host_md) {
                uint32_t ext = q->xfer / q->nlb;
                for (uint32_t i = 0; ok && i < q->nlb; i++)
                        if (perf_verify_check(cmd->buf + (size_t)i * ext, q->w->g->lba_size,
                                              q->w->g->lba_size, cmd->lba + i)) {
                                q_fail(q, -EILSEQ, "verify: LBA %llu read back wrong data",
                                       (unsigned long long)(cmd->lba + i));
                                ok = false;
                        }
        } else if (ok && !cmd->write && q->w->o->verify) {
                uint32_t bad = perf_verify_check(cmd->buf, q->bs, q->w->g->lba_size, cmd->lba);
                if (bad) {
                        q_fail(q, -EILSEQ, "verify: LBA %llu read back wrong data",
                               (unsigned long long)(cmd->lba + bad - 1));
                        ok = false;
                }
        }
        cmd->busy = false;
        q->outstanding--;
        if (perf_io_done(q->w, cmd->write, cmd->start_ns, now, ok))
                q_submit(q, (unsigned)(cmd - q->cmds));
        else
                q->running = false;
}

static struct ntcp_cmd *q_cmd(struct ntcp_q *q, const le16 *cid)
{
        uint16_t i = get_le16(cid);
        if (i >= q->qd || !q->cmds[i].busy)
                return NULL;
        return &q->cmds[i];
}

static int q_r2t(struct ntcp_q *q, const struct ntcp_data_pdu *r)
{
        struct ntcp_cmd *cmd = q_cmd(q, &r->cccid);
        uint32_t off = get_le32(&r->offset), len = get_le32(&r->length);
        uint16_t ttag = get_le16(&r->ttag);
        if (!cmd || !cmd->write)
                return q_fail(q, -EPROTO, "R2T for unknown or read command %u",
                              get_le16(&r->cccid));
        if (len == 0 || off != cmd->xfer_next || (uint64_t)off + len > q->xfer)
                return q_fail(q, -EPROTO, "R2T out of range (offset %u length %u of %u)", off, len,
                              q->xfer);
        cmd->xfer_next = off + len;
        while (len) {
                uint32_t n = len < q->c.maxh2cdata ? len : q->c.maxh2cdata;
                uint8_t *slot = cmd->slots + NTCP_SLOT * (1 + cmd->h2c_next++ % q->nh2c);
                uint32_t hl =
                    build_h2c_hdr(&q->c, slot, (uint16_t)(cmd - q->cmds), ttag, off, n, n == len);
                q_push(q, slot, hl);
                q_push(q, cmd->buf + off, n);
                if (q->c.ddgst) {
                        put_le32((le32 *)(slot + NTCP_DG_OFF), crc32c(cmd->buf + off, n));
                        q_push(q, slot + NTCP_DG_OFF, 4);
                }
                off += n;
                len -= n;
        }
        return 0;
}

/* A whole PDU header is in q->hdr: check it and decide what follows. */
static int q_header(struct ntcp_q *q)
{
        const struct ntcp_ch *ch = (const struct ntcp_ch *)q->hdr;
        uint32_t hd = (ch->flags & NTCP_F_HDGST) ? 4 : 0;
        uint32_t plen = get_le32(&ch->plen);
        if (hd && get_le32((const le32 *)(q->hdr + ch->hlen)) != crc32c(q->hdr, ch->hlen))
                return q_fail(q, -EBADMSG, "header digest error (PDU type %u)", ch->type);
        q->rx = RX_HDR;
        q->have = 0;
        switch (ch->type) {
        case NTCP_PDU_RSP: {
                const struct ntcp_rsp_pdu *r = (const struct ntcp_rsp_pdu *)q->hdr;
                struct ntcp_cmd *cmd = q_cmd(q, &r->cqe.cid);
                if (plen != ch->hlen + hd || !cmd)
                        return q_fail(q, -EPROTO, "bad CapsuleResp (cid %u, plen %u)",
                                      get_le16(&r->cqe.cid), plen);
                int st = nvme_status(&r->cqe);
                /* End-to-end Guard / Application Tag / Reference Tag Check Error (2h/82h-84h). */
                if ((st & 0x7ff) == 0x282)
                        q->w->st.pi_guard++;
                else if ((st & 0x7ff) == 0x283)
                        q->w->st.pi_app++;
                else if ((st & 0x7ff) == 0x284)
                        q->w->st.pi_ref++;
                if (st && !q->w->st.errors)
                        fprintf(stderr, "slate-perf: queue %u: %s failed, status 0x%x\n", q->w->id,
                                cmd->write ? "write" : "read", st);
                q_complete(q, cmd, st == 0);
                return 0;
        }
        case NTCP_PDU_R2T:
                if (plen != ch->hlen + hd)
                        return q_fail(q, -EPROTO, "bad R2T length %u", plen);
                return q_r2t(q, (const struct ntcp_data_pdu *)q->hdr);
        case NTCP_PDU_C2H_DATA: {
                const struct ntcp_data_pdu *d = (const struct ntcp_data_pdu *)q->hdr;
                struct ntcp_cmd *cmd = q_cmd(q, &d->cccid);
                uint32_t off = get_le32(&d->offset), len = get_le32(&d->length);
                uint32_t dd = (ch->flags & NTCP_F_DDGST) ? 4 : 0;
                if (!cmd || cmd->write)
                        return q_fail(q, -EPROTO, "C2HData for unknown or write command %u",
                                      get_le16(&d->cccid));
                if (len == 0 || off != cmd->xfer_next || (uint64_t)off + len > q->xfer ||
                    ch->pdo < ch->hlen + hd || plen != (uint64_t)ch->pdo + len + dd ||
                    (dd != 0) != q->c.ddgst)
                        return q_fail(q, -EPROTO,
                                      "bad C2HData (offset %u length %u pdo %u plen %u of %u)", off,
                                      len, ch->pdo, plen, q->xfer);
                if ((ch->flags & NTCP_F_SUCCESS) && !(ch->flags & NTCP_F_LAST))
                        return q_fail(q, -EPROTO, "C2HData SUCCESS without LAST_PDU");
                cmd->xfer_next = off + len;
                q->rcmd = cmd;
                q->rflags = ch->flags;
                q->pad_left = ch->pdo - ch->hlen - hd;
                q->data_off = off;
                q->data_left = len;
                q->crc = 0xffffffffu;
                q->dg_have = 0;
                q->rx = q->pad_left ? RX_PAD : RX_DATA;
                return 0;
        }
        case NTCP_PDU_C2H_TERM: {
                const struct ntcp_term *t = (const struct ntcp_term *)q->hdr;
                return q_fail(q, -ECONNABORTED, "target sent C2HTermReq (FES %u, FEI %u)",
                              get_le16(&t->fes), get_le32(&t->fei));
        }
        default:
                return q_fail(q, -EPROTO, "unexpected PDU type %u", ch->type);
        }
}

static int q_data_done(struct ntcp_q *q)
{
        struct ntcp_cmd *cmd = q->rcmd;
        q->rx = RX_HDR;
        q->have = 0;
        if (q->c.ddgst && get_le32((le32 *)q->dg) != (q->crc ^ 0xffffffffu))
                return q_fail(q, -EBADMSG, "data digest error in C2HData");
        if (q->rflags & NTCP_F_SUCCESS) {
                if (cmd->xfer_next != q->xfer)
                        return q_fail(q, -EPROTO, "C2HData SUCCESS before all data");
                q_complete(q, cmd, true);
        }
        return 0;
}

/* Feed n received bytes through the PDU state machine. */
static int q_rx(struct ntcp_q *q, const uint8_t *p, size_t n)
{
        while (n) {
                size_t take;
                switch (q->rx) {
                case RX_HDR: {
                        uint32_t want =
                            q->have < sizeof(struct ntcp_ch) ? sizeof(struct ntcp_ch) : q->want;
                        take = want - q->have;
                        if (take > n)
                                take = n;
                        memcpy(q->hdr + q->have, p, take);
                        q->have += (uint32_t)take;
                        p += take;
                        n -= take;
                        if (q->have == sizeof(struct ntcp_ch) && want == sizeof(struct ntcp_ch)) {
                                const struct ntcp_ch *ch = (const struct ntcp_ch *)q->hdr;
                                bool hd = ch->flags & NTCP_F_HDGST;
                                if (ch->hlen != 24 || hd != q->c.hdgst)
                                        return q_fail(q, -EPROTO,
                                                      "bad PDU header (type %u hlen %u flags 0x%x)",
                                                      ch->type, ch->hlen, ch->flags);
                                q->want = ch->hlen + (hd ? 4 : 0);
                        } else if (q->have == q->want && q->have > sizeof(struct ntcp_ch)) {
                                int rc = q_header(q);
                                if (rc)
                                        return rc;
                        }
                        break;
                }
                case RX_PAD:
                        take = q->pad_left < n ? q->pad_left : n;
                        q->pad_left -= (uint32_t)take;
                        p += take;
                        n -= take;
                        if (!q->pad_left)
                                q->rx = RX_DATA;
                        break;
                case RX_DATA:
                        take = q->data_left < n ? q->data_left : n;
                        memcpy(q->rcmd->buf + q->data_off, p, take);
                        if (q->c.ddgst)
                                q->crc = crc32_iscsi((unsigned char *)p, (int)take, q->crc);
                        q->data_off += (uint32_t)take;
                        q->data_left -= (uint32_t)take;
                        p += take;
                        n -= take;
                        if (!q->data_left) {
                                if (q->c.ddgst) {
                                        q->rx = RX_DDGST;
                                } else {
                                        int rc = q_data_done(q);
                                        if (rc)
                                                return rc;
                                }
                        }
                        break;
                case RX_DDGST:
                        take = 4 - q->dg_have < n ? 4 - q->dg_have : n;
                        memcpy(q->dg + q->dg_have, p, take);
                        q->dg_have += (uint32_t)take;
                        p += take;
                        n -= take;
                        if (q->dg_have == 4) {
                                int rc = q_data_done(q);
                                if (rc)
                                        return rc;
                        }
                        break;
                }
        }
        return 0;
}

static void q_free(struct ntcp_q *q)
{
        conn_close(&q->c);
        if (q->cmds)
                for (unsigned i = 0; i < q->qd; i++) {
                        free(q->cmds[i].buf);
                        free(q->cmds[i].slots);
                }
        free(q->cmds);
        free(q->iov);
        free(q->rb);
}

static void ntcp_worker(struct perf_worker *w)
{
        struct ntcp_ctrl *ctrl = w->tctx;
        const struct perf_opts *o = w->o;
        struct ntcp_q q = {.w = w, .ctrl = ctrl, .bs = w->bs};
        q.c.fd = -1;
        q.nlb = q.bs / w->g->lba_size;
        /* PRACT with metadata that is only the PI: data only; else extended LBAs. */
        q.host_md = w->g->md_size &&
                    (o->pi == PERF_PI_HOST || w->g->md_size != core_pi_tuple_size(&w->g->pi));
        q.xfer = q.bs + (q.host_md ? q.nlb * w->g->md_size : 0);
        q.qd = o->qd;
        if (q.qd > ctrl->mqes - 1) {
                perf_worker_fail(w, -EINVAL, "queue depth %u exceeds the target's %u entries", q.qd,
                                 ctrl->mqes);
                goto out;
        }
        int rc = ntcp_open_queue(ctrl, &q.c, (uint16_t)(w->id + 1), (uint16_t)q.qd);
        if (rc) {
                perf_worker_fail(w, rc, "I/O queue %u: connect failed: %s", w->id + 1,
                                 strerror(-rc));
                goto out;
        }
        q.nh2c = (q.xfer + q.c.maxh2cdata - 1) / q.c.maxh2cdata;
        q.iov_cap = q.qd * (3 + 3 * q.nh2c) + 16;
        q.cmds = calloc(q.qd, sizeof(*q.cmds));
        q.iov = calloc(q.iov_cap, sizeof(*q.iov));
        q.rb = malloc(NTCP_RB_SIZE);
        if (!q.cmds || !q.iov || !q.rb)
                goto nomem;
        for (unsigned i = 0; i < q.qd; i++) {
                struct ntcp_cmd *cmd = &q.cmds[i];
                if (posix_memalign((void **)&cmd->buf, 4096, q.xfer) ||
                    posix_memalign((void **)&cmd->slots, 64, (size_t)NTCP_SLOT * (1 + q.nh2c)))
                        goto nomem;
                perf_fill_pattern(cmd->buf, q.xfer, ((uint64_t)w->id << 32) | i);
        }
        int fl = fcntl(q.c.fd, F_GETFL);
        fcntl(q.c.fd, F_SETFL, fl | O_NONBLOCK);

        if (perf_worker_ready(w))
                goto out;
        q.running = true;
        for (unsigned i = 0; i < q.qd; i++)
                q_submit(&q, i);
        uint64_t drain_deadline = 0;
        bool worked = true; /* a completion or a send since the socket was last idle */
        while (!w->rc) {
                if (q.iov_cnt) {
                        /* a send that went out counts as work; a full socket does not */
                        unsigned cnt = q.iov_cnt;
                        size_t len0 = q.iov[q.iov_head].iov_len;
                        if (q_flush(&q))
                                break;
                        if (q.iov_cnt != cnt || q.iov[q.iov_head].iov_len != len0)
                                worked = true;
                }
                ssize_t r = conn_recv(&q.c, q.rb, NTCP_RB_SIZE, MSG_DONTWAIT);
                if (r > 0) {
                        if (q_rx(&q, q.rb, (size_t)r))
                                break;
                        worked = true;
                        continue;
                }
                if (r == 0) {
                        q_fail(&q, -ECONNRESET, "target closed the connection");
                        break;
                }
                if (r == -EINTR)
                        continue;
                if (r != -EAGAIN) {
                        q_fail(&q, (int)r, "recv: %s", strerror((int)-r));
                        break;
                }
                uint64_t now = perf_now_ns();
                if (!perf_running(now)) {
                        q.running = false;
                        if (!q.outstanding)
                                break;
                        if (!drain_deadline)
                                drain_deadline = now + (uint64_t)NTCP_TIMEOUT_S * 1000000000u;
                        else if (now > drain_deadline) {
                                q_fail(&q, -ETIMEDOUT,
                                       "%u I/Os still outstanding %d s after the run",
                                       q.outstanding, NTCP_TIMEOUT_S);
                                break;
                        }
                }
                bool spin = perf_poll_spin(w, worked, now);
                worked = false;
                if (spin)
                        continue;
                struct pollfd pfd = {.fd = q.c.fd, .events = POLLIN | (q.iov_cnt ? POLLOUT : 0)};
                int ms = 100;
                if (q.running) {
                        uint64_t end = atomic_load(&perf_run.end_ns);
                        uint64_t left = end > now ? (end - now) / 1000000u + 1 : 0;
                        if (left < (uint64_t)ms)
                                ms = (int)left;
                }
                if (poll(&pfd, 1, ms) < 0 && errno != EINTR) {
                        q_fail(&q, -errno, "poll: %s", strerror(errno));
                        break;
                }
        }
        if (w->rc)
                atomic_fetch_add(&perf_run.failed, 1);
        goto out;
nomem:
        perf_worker_fail(w, -ENOMEM, "out of memory for queue %u", w->id + 1);
out:
        q_free(&q);
}

const struct perf_transport perf_nvme_tcp = {
    .name = "nvme-tcp",
    .probe = ntcp_probe,
    .worker = ntcp_worker,
    .close = ntcp_close,
};
