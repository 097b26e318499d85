/*
 * robust-pdu: a raw iSCSI client (RFC 7143) that sends one malformed PDU
 * sequence to a live target and checks that the target answers it the way
 * RFC 7143 allows (Reject PDU, Login reject, an error status, silently
 * discarding where §7.8 permits it, or closing the connection) within a
 * timeout, never hanging and never accepting it.  Before the case it logs
 * in a second, independent session (the "bystander"); after the case the
 * bystander must still answer a NOP-Out ping and TEST UNIT READY, which
 * shows the daemon neither died nor wedged.  One case (preempt_abort) is a
 * valid exchange across the two sessions instead: the task management a
 * PERSISTENT RESERVE OUT PREEMPT AND ABORT must do.  One case per process:
 *
 *     robust-pdu -p PORT -t TARGET-IQN [-a 127.0.0.1] -c CASE
 *     robust-pdu -l            (list the cases)
 *
 * Exit status 0 = pass, 1 = fail, 2 = could not set up (bystander login).
 * CRC32C digests come from ISA-L (crc32_iscsi).  This is test-client code:
 * it trusts nothing the target sends, but allocates freely.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <isa-l.h>

#include "slate/byteorder.h"

#define BHS_LEN    48
#define TIMEOUT_MS 10000
#define QUIET_MS   1500 /* after a ping reply, how long we wait for a late answer */
#define OUR_MRDSL  262144
#define RSV_ITT    0xffffffffu

/* Initiator opcodes (RFC 7143 §11.1.1) */
#define OP_NOP_OUT   0x00
#define OP_SCSI_CMD  0x01
#define OP_TEXT_REQ  0x04
#define OP_DATA_OUT  0x05
#define OP_LOGIN_REQ 0x03
#define OP_IMMEDIATE 0x40
/* Target opcodes */
#define OP_NOP_IN     0x20
#define OP_SCSI_RESP  0x21
#define OP_TEXT_RESP  0x24
#define OP_LOGIN_RESP 0x23
#define OP_ASYNC      0x32
#define OP_REJECT     0x3f

static const char *g_addr = "127.0.0.1";
static int g_port = 3260;
static const char *g_target;
static const char *g_initiator = "iqn.2024-01.org.slate:robust-pdu";
static int g_verbose;

static void vlog(const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
}

struct conn {
        int fd;
        bool hd, dd; /* header / data digest in effect (after login) */
        uint32_t cmdsn, expstatsn, maxcmdsn;
        uint32_t itt;
        uint32_t tgt_mrdsl; /* what the target declared it can receive */
        uint16_t tsih;
        uint8_t isid[6];
};

struct pdu {
        uint8_t bhs[BHS_LEN];
        uint8_t *ahs;
        uint32_t ahs_len;
        uint8_t *data;
        uint32_t dlen;
};

static uint64_t now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint32_t crc32c(const void *buf, size_t len)
{
        return crc32_iscsi((unsigned char *)buf, (int)len, 0xffffffffu) ^ 0xffffffffu;
}

/* iSCSI puts the CRC32C on the wire least significant byte first. */
static void put_digest(uint8_t *p, uint32_t crc)
{
        slate_put_le(p, 4, crc);
}

static int conn_open(struct conn *c)
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
        int one = 1;
        static unsigned isid_seq;

        memset(c, 0, sizeof(*c));
        c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (c->fd < 0)
                return -errno;
        if (inet_pton(AF_INET, g_addr, &sa.sin_addr) != 1) {
                close(c->fd);
                return -EINVAL;
        }
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                int e = -errno;
                close(c->fd);
                c->fd = -1;
                return e;
        }
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* ISID type 10b (random) + per-process random qualifier. */
        c->isid[0] = 0x80;
        c->isid[1] = (uint8_t)getpid();
        c->isid[2] = (uint8_t)(getpid() >> 8);
        c->isid[3] = (uint8_t)rand();
        c->isid[4] = (uint8_t)(++isid_seq >> 8);
        c->isid[5] = (uint8_t)isid_seq;
        c->itt = 0x1000;
        c->tgt_mrdsl = 8192;
        return 0;
}

static void conn_close(struct conn *c)
{
        if (c->fd >= 0)
                close(c->fd);
        c->fd = -1;
}

/* Send all bytes; -EPIPE etc. when the target has closed. */
static int send_all(int fd, const void *buf, size_t len)
{
        const uint8_t *p = buf;

        while (len) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Read exactly len bytes before deadline: 0, -ETIMEDOUT, -ECONNRESET (closed). */
static int recv_all(int fd, void *buf, size_t len, uint64_t deadline)
{
        uint8_t *p = buf;

        while (len) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                uint64_t t = now_ms();
                int r;
                ssize_t n;

                if (t >= deadline)
                        return -ETIMEDOUT;
                r = poll(&pfd, 1, (int)(deadline - t));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r == 0)
                        return -ETIMEDOUT;
                n = recv(fd, p, len, 0);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return errno == ECONNRESET ? -ECONNRESET : -errno;
                if (n == 0)
                        return -ECONNRESET;
                p += n;
                len -= (size_t)n;
        }
        return 0;
}

static void pdu_free(struct pdu *p)
{
        free(p->ahs);
        free(p->data);
        memset(p, 0, sizeof(*p));
}

/* Receive one PDU.  0, -ETIMEDOUT, -ECONNRESET, -EPROTO (bad digest or absurd length). */
static int pdu_recv(struct conn *c, struct pdu *p, uint64_t deadline)
{
        uint8_t dig[4];
        uint32_t padded;
        int r;

        memset(p, 0, sizeof(*p));
        r = recv_all(c->fd, p->bhs, BHS_LEN, deadline);
        if (r)
                return r;
        p->ahs_len = (uint32_t)p->bhs[4] * 4;
        p->dlen = (uint32_t)slate_get_be(p->bhs + 5, 3);
        if (p->ahs_len) {
                p->ahs = malloc(p->ahs_len);
                if (!p->ahs)
                        return -ENOMEM;
                r = recv_all(c->fd, p->ahs, p->ahs_len, deadline);
                if (r)
                        return r;
        }
        if (c->hd) {
                r = recv_all(c->fd, dig, 4, deadline);
                if (r)
                        return r;
        }
        if (p->dlen > OUR_MRDSL) {
                vlog("  target sent a %u-byte data segment, above our MaxRecvDataSegmentLength\n",
                     p->dlen);
                return -EPROTO;
        }
        padded = (p->dlen + 3) & ~3u;
        if (padded) {
                p->data = calloc(1, padded + 1);
                if (!p->data)
                        return -ENOMEM;
                r = recv_all(c->fd, p->data, padded, deadline);
                if (r)
                        return r;
                if (c->dd) {
                        r = recv_all(c->fd, dig, 4, deadline);
                        if (r)
                                return r;
                }
        }
        /* Track StatSN / ExpCmdSN / MaxCmdSN from every PDU that carries them. */
        switch (p->bhs[0] & 0x3f) {
        case OP_NOP_IN:
        case OP_SCSI_RESP:
        case OP_TEXT_RESP:
        case OP_LOGIN_RESP:
        case OP_REJECT:
        case 0x22: /* TMF response */
        case 0x26: /* logout response */
        case OP_ASYNC:
        case 0x25: /* Data-In */
                if ((p->bhs[0] & 0x3f) != 0x25 || (p->bhs[1] & 0x01))
                        c->expstatsn = (uint32_t)slate_get_be(p->bhs + 24, 4) + 1;
                {
                        /* our next CmdSN never lags the target's ExpCmdSN */
                        uint32_t exp = (uint32_t)slate_get_be(p->bhs + 28, 4);
                        if ((p->bhs[0] & 0x3f) == OP_LOGIN_RESP || (int32_t)(exp - c->cmdsn) > 0)
                                c->cmdsn = exp;
                        c->maxcmdsn = (uint32_t)slate_get_be(p->bhs + 32, 4);
                }
                break;
        }
        if (g_verbose)
                vlog("  <- opcode 0x%02x itt 0x%08x dlen %u\n", p->bhs[0] & 0x3f,
                     (unsigned)slate_get_be(p->bhs + 16, 4), p->dlen);
        return 0;
}

/*
 * Send a PDU: BHS (with the AHS length and data segment length fields as
 * the caller set them), AHS, header digest, data + padding, data digest.
 * bad_hd / bad_dd corrupt the respective digest.
 */
static int pdu_send_raw(struct conn *c, const uint8_t *bhs, const uint8_t *ahs, uint32_t ahs_len,
                        const uint8_t *data, uint32_t dlen, bool bad_hd, bool bad_dd)
{
        uint32_t padded = (dlen + 3) & ~3u;
        size_t len = BHS_LEN + ahs_len + (c->hd ? 4 : 0) + padded + (c->dd && dlen ? 4 : 0);
        uint8_t *buf = calloc(1, len);
        size_t off = 0;
        int r;

        if (!buf)
                return -ENOMEM;
        memcpy(buf, bhs, BHS_LEN);
        off = BHS_LEN;
        if (ahs_len) {
                memcpy(buf + off, ahs, ahs_len);
                off += ahs_len;
        }
        if (c->hd) {
                put_digest(buf + off, crc32c(buf, off) ^ (bad_hd ? 0x5a5a5a5au : 0));
                off += 4;
        }
        if (dlen) {
                memcpy(buf + off, data, dlen);
                if (c->dd)
                        put_digest(buf + off + padded,
                                   crc32c(buf + off, padded) ^ (bad_dd ? 0xa5a5a5a5u : 0));
                off += padded + (c->dd ? 4 : 0);
        }
        r = send_all(c->fd, buf, off);
        free(buf);
        return r;
}

static void bhs_init(uint8_t *bhs, uint8_t opcode, uint8_t flags, uint32_t dlen, uint32_t itt)
{
        memset(bhs, 0, BHS_LEN);
        bhs[0] = opcode;
        bhs[1] = flags;
        slate_put_be(bhs + 5, 3, dlen);
        slate_put_be(bhs + 16, 4, itt);
}

/* An immediate NOP-Out ping asking for a NOP-In (RFC 7143 §11.18). */
static int send_ping(struct conn *c, uint32_t itt, const uint8_t *data, uint32_t dlen, bool bad_hd,
                     bool bad_dd)
{
        uint8_t bhs[BHS_LEN];

        bhs_init(bhs, OP_NOP_OUT | OP_IMMEDIATE, 0x80, dlen, itt);
        slate_put_be(bhs + 20, 4, RSV_ITT); /* TTT */
        slate_put_be(bhs + 24, 4, c->cmdsn);
        slate_put_be(bhs + 28, 4, c->expstatsn);
        return pdu_send_raw(c, bhs, NULL, 0, data, dlen, bad_hd, bad_dd);
}

/* Fill a SCSI Command BHS (RFC 7143 §11.3) for LUN 0, SIMPLE attribute. */
static void scsi_bhs(struct conn *c, uint8_t *bhs, const uint8_t *cdb, int read, int write,
                     uint32_t edtl, uint32_t dlen, uint32_t itt)
{
        bhs_init(bhs, OP_SCSI_CMD, (uint8_t)(0x80 | (read ? 0x40 : 0) | (write ? 0x20 : 0) | 1),
                 dlen, itt);
        slate_put_be(bhs + 20, 4, edtl);
        slate_put_be(bhs + 24, 4, c->cmdsn);
        slate_put_be(bhs + 28, 4, c->expstatsn);
        memcpy(bhs + 32, cdb, 16);
}

/* Answer target-initiated NOP-Ins (TTT != ffffffff) so the target keeps us. */
static void answer_target_nop(struct conn *c, const struct pdu *p)
{
        uint8_t bhs[BHS_LEN];
        uint32_t ttt = (uint32_t)slate_get_be(p->bhs + 20, 4);

        if ((p->bhs[0] & 0x3f) != OP_NOP_IN || ttt == RSV_ITT)
                return;
        bhs_init(bhs, OP_NOP_OUT | OP_IMMEDIATE, 0x80, 0, RSV_ITT);
        memcpy(bhs + 8, p->bhs + 8, 8); /* LUN */
        slate_put_be(bhs + 20, 4, ttt);
        slate_put_be(bhs + 24, 4, c->cmdsn);
        slate_put_be(bhs + 28, 4, c->expstatsn);
        pdu_send_raw(c, bhs, NULL, 0, NULL, 0, false, false);
}

/* Wait for a PDU answering itt (skipping unrelated ones).  0 / -errno. */
static int wait_itt(struct conn *c, uint32_t itt, struct pdu *out, uint64_t deadline)
{
        for (;;) {
                int r = pdu_recv(c, out, deadline);
                if (r)
                        return r;
                if ((out->bhs[0] & 0x3f) == OP_REJECT ||
                    (uint32_t)slate_get_be(out->bhs + 16, 4) == itt)
                        return 0;
                answer_target_nop(c, out);
                pdu_free(out);
        }
}

/* ---- login (RFC 7143 §6, §11.12, §11.13) ---- */

static size_t keys_append(char *buf, size_t off, size_t cap, const char *kv)
{
        size_t n = strlen(kv) + 1;

        if (off + n > cap)
                return off;
        memcpy(buf + off, kv, n);
        return off + n;
}

static const char *key_find(const struct pdu *p, const char *key)
{
        size_t klen = strlen(key);
        uint32_t i = 0;

        while (i < p->dlen) {
                const char *s = (const char *)p->data + i;
                size_t n = strnlen(s, p->dlen - i);
                if (n > klen && !strncmp(s, key, klen) && s[klen] == '=')
                        return s + klen + 1;
                i += (uint32_t)n + 1;
        }
        return NULL;
}

static void login_bhs(struct conn *c, uint8_t *bhs, uint8_t flags, uint32_t dlen)
{
        bhs_init(bhs, OP_LOGIN_REQ | OP_IMMEDIATE, flags, dlen, c->itt);
        bhs[2] = 0; /* Version-max */
        bhs[3] = 0; /* Version-min */
        memcpy(bhs + 8, c->isid, 6);
        slate_put_be(bhs + 14, 2, c->tsih);
        slate_put_be(bhs + 20, 2, 1); /* CID */
        slate_put_be(bhs + 24, 4, c->cmdsn);
        slate_put_be(bhs + 28, 4, c->expstatsn);
}

/*
 * Full login: SecurityNegotiation (AuthMethod=None) then
 * LoginOperationalNegotiation to FullFeaturePhase.  want_hd / want_dd ask
 * for CRC32C digests; the result says what was agreed.
 */
static int conn_login(struct conn *c, bool want_hd, bool want_dd)
{
        char keys[2048];
        size_t n;
        int stage = 0, tries;
        uint8_t bhs[BHS_LEN];
        struct pdu p;
        char kv[512];

        for (tries = 0; tries < 8; tries++) {
                n = 0;
                if (stage == 0) {
                        snprintf(kv, sizeof(kv), "InitiatorName=%s", g_initiator);
                        n = keys_append(keys, n, sizeof(keys), kv);
                        n = keys_append(keys, n, sizeof(keys), "SessionType=Normal");
                        snprintf(kv, sizeof(kv), "TargetName=%s", g_target);
                        n = keys_append(keys, n, sizeof(keys), kv);
                        n = keys_append(keys, n, sizeof(keys), "AuthMethod=None");
                        login_bhs(c, bhs, 0x80 | (0 << 2) | 1, (uint32_t)n);
                } else {
                        n = keys_append(keys, n, sizeof(keys),
                                        want_hd ? "HeaderDigest=CRC32C" : "HeaderDigest=None");
                        n = keys_append(keys, n, sizeof(keys),
                                        want_dd ? "DataDigest=CRC32C" : "DataDigest=None");
                        snprintf(kv, sizeof(kv), "MaxRecvDataSegmentLength=%d", OUR_MRDSL);
                        n = keys_append(keys, n, sizeof(keys), kv);
                        n = keys_append(keys, n, sizeof(keys), "InitialR2T=Yes");
                        n = keys_append(keys, n, sizeof(keys), "ImmediateData=Yes");
                        n = keys_append(keys, n, sizeof(keys), "MaxBurstLength=262144");
                        n = keys_append(keys, n, sizeof(keys), "FirstBurstLength=65536");
                        n = keys_append(keys, n, sizeof(keys), "MaxConnections=1");
                        n = keys_append(keys, n, sizeof(keys), "ErrorRecoveryLevel=0");
                        n = keys_append(keys, n, sizeof(keys), "DataPDUInOrder=Yes");
                        n = keys_append(keys, n, sizeof(keys), "DataSequenceInOrder=Yes");
                        n = keys_append(keys, n, sizeof(keys), "DefaultTime2Wait=2");
                        n = keys_append(keys, n, sizeof(keys), "DefaultTime2Retain=0");
                        n = keys_append(keys, n, sizeof(keys), "MaxOutstandingR2T=1");
                        if (stage == 2) /* the target did not transit yet: no keys again */
                                n = 0;
                        login_bhs(c, bhs, 0x80 | (1 << 2) | 3, (uint32_t)n);
                }
                if (pdu_send_raw(c, bhs, NULL, 0, (uint8_t *)keys, (uint32_t)n, false, false))
                        return -ECONNRESET;
                if (pdu_recv(c, &p, now_ms() + TIMEOUT_MS))
                        return -ECONNRESET;
                if ((p.bhs[0] & 0x3f) != OP_LOGIN_RESP || p.bhs[36] != 0) {
                        vlog("  login failed: opcode 0x%02x status %02x%02x\n", p.bhs[0] & 0x3f,
                             p.bhs[36], p.bhs[37]);
                        pdu_free(&p);
                        return -EACCES;
                }
                c->tsih = (uint16_t)slate_get_be(p.bhs + 14, 2);
                if (stage >= 1) {
                        const char *v = key_find(&p, "MaxRecvDataSegmentLength");
                        if (v)
                                c->tgt_mrdsl = (uint32_t)strtoul(v, NULL, 10);
                        v = key_find(&p, "HeaderDigest");
                        if (v)
                                c->hd = !strcmp(v, "CRC32C");
                        v = key_find(&p, "DataDigest");
                        if (v)
                                c->dd = !strcmp(v, "CRC32C");
                }
                if ((p.bhs[1] & 0x80) && (p.bhs[1] & 3) == 3) {
                        pdu_free(&p);
                        if (want_hd != c->hd || want_dd != c->dd) {
                                vlog("  digests not agreed (hd %d dd %d)\n", c->hd, c->dd);
                                return -EPROTO;
                        }
                        return 0;
                }
                if ((p.bhs[1] & 0x80) && (p.bhs[1] & 3) == 1)
                        stage = 1;
                else if (stage == 1)
                        stage = 2;
                pdu_free(&p);
        }
        return -EPROTO;
}

/* ---- the bystander checks ---- */

static int check_ping(struct conn *c)
{
        struct pdu p;
        uint32_t itt = ++c->itt;
        uint8_t data[64];
        int r;

        memset(data, 0x6b, sizeof(data));
        if (send_ping(c, itt, data, sizeof(data), false, false))
                return -ECONNRESET;
        r = wait_itt(c, itt, &p, now_ms() + TIMEOUT_MS);
        if (r)
                return r;
        r = ((p.bhs[0] & 0x3f) == OP_NOP_IN && p.dlen == sizeof(data) &&
             !memcmp(p.data, data, sizeof(data)))
                ? 0
                : -EPROTO;
        pdu_free(&p);
        return r;
}

static int check_tur(struct conn *c)
{
        static const uint8_t tur[16];
        int i;

        for (i = 0; i < 3; i++) { /* the first may report a unit attention */
                uint8_t bhs[BHS_LEN];
                struct pdu p;
                uint32_t itt = ++c->itt;
                int r;

                scsi_bhs(c, bhs, tur, 0, 0, 0, 0, itt);
                c->cmdsn++;
                if (pdu_send_raw(c, bhs, NULL, 0, NULL, 0, false, false))
                        return -ECONNRESET;
                r = wait_itt(c, itt, &p, now_ms() + TIMEOUT_MS);
                if (r)
                        return r;
                if ((p.bhs[0] & 0x3f) == OP_SCSI_RESP && p.bhs[2] == 0 && p.bhs[3] == 0) {
                        pdu_free(&p);
                        return 0;
                }
                vlog("  TEST UNIT READY: opcode 0x%02x response %u status 0x%02x\n",
                     p.bhs[0] & 0x3f, p.bhs[2], p.bhs[3]);
                pdu_free(&p);
        }
        return -EIO;
}

/* ---- outcome of a malformed PDU ---- */

enum outcome {
        OUT_CLOSED,     /* target closed the connection */
        OUT_REJECT,     /* Reject PDU */
        OUT_LOGIN_REJ,  /* Login Response with Status-Class != 0 */
        OUT_ERR_STATUS, /* an answer to the bad PDU carrying an error status */
        OUT_ACCEPTED,   /* an answer to the bad PDU saying it worked */
        OUT_TEXT_RESP,  /* a Text Response to the bad text */
        OUT_DISCARDED,  /* no answer to the bad PDU, but the follow-up ping was answered */
        OUT_HANG,       /* nothing at all within the timeout */
};

static const char *outcome_name[] = {
    [OUT_CLOSED] = "connection closed",     [OUT_REJECT] = "Reject PDU",
    [OUT_LOGIN_REJ] = "login rejected",     [OUT_ERR_STATUS] = "error status",
    [OUT_ACCEPTED] = "accepted as valid",   [OUT_TEXT_RESP] = "Text Response",
    [OUT_DISCARDED] = "silently discarded", [OUT_HANG] = "no answer (hang)",
};

/*
 * Read what the target does after the bad PDU (ITT bad_itt).  When ping_itt
 * is not RSV_ITT a valid ping was sent after it: its answer without any
 * answer to the bad PDU means the target discarded the bad one.
 */
static enum outcome observe(struct conn *c, uint32_t bad_itt, uint32_t ping_itt)
{
        uint64_t deadline = now_ms() + TIMEOUT_MS;
        bool pinged = false;

        for (;;) {
                struct pdu p;
                int r = pdu_recv(c, &p, deadline);
                uint8_t op;
                uint32_t itt;

                if (r == -ETIMEDOUT)
                        return pinged ? OUT_DISCARDED : OUT_HANG;
                if (r == -EPROTO)
                        return OUT_ERR_STATUS; /* nonsense from the target is not our pass */
                if (r)
                        return OUT_CLOSED;
                op = p.bhs[0] & 0x3f;
                itt = (uint32_t)slate_get_be(p.bhs + 16, 4);
                if (g_verbose)
                        vlog("  observed opcode 0x%02x itt 0x%08x\n", op, itt);
                if (op == OP_REJECT) {
                        vlog("  Reject reason 0x%02x\n", p.bhs[2]);
                        pdu_free(&p);
                        return OUT_REJECT;
                }
                if (op == OP_LOGIN_RESP) {
                        enum outcome o = p.bhs[36] ? OUT_LOGIN_REJ : OUT_ACCEPTED;
                        vlog("  Login Response status %02x%02x\n", p.bhs[36], p.bhs[37]);
                        pdu_free(&p);
                        return o;
                }
                if (itt == bad_itt && bad_itt != RSV_ITT) {
                        enum outcome o = OUT_ACCEPTED;
                        if (op == OP_SCSI_RESP && (p.bhs[2] || p.bhs[3]))
                                o = OUT_ERR_STATUS;
                        if (op == OP_TEXT_RESP)
                                o = OUT_TEXT_RESP;
                        vlog("  answer to the bad PDU: opcode 0x%02x response %u status 0x%02x\n",
                             op, p.bhs[2], p.bhs[3]);
                        pdu_free(&p);
                        return o;
                }
                if (itt == ping_itt && ping_itt != RSV_ITT && op == OP_NOP_IN) {
                        pinged = true;
                        deadline = now_ms() + QUIET_MS;
                }
                answer_target_nop(c, &p);
                pdu_free(&p);
        }
}

/* ---- the cases ---- */

struct ctx {
        struct conn c;
        uint32_t bad_itt, ping_itt;
        struct conn *by; /* the bystander session */
};

/* Log in a fresh session on c; false if that failed (a setup failure). */
static bool fresh(struct ctx *x, bool hd, bool dd)
{
        if (conn_open(&x->c))
                return false;
        if (conn_login(&x->c, hd, dd)) {
                vlog("  login of the test connection failed (hd %d dd %d)\n", hd, dd);
                return false;
        }
        return true;
}

/* Send the follow-up ping that tells "discarded" apart from "hung". */
static void follow_ping(struct ctx *x)
{
        x->ping_itt = ++x->c.itt;
        send_ping(&x->c, x->ping_itt, NULL, 0, false, false);
}

/* WRITE(10) whose immediate data exceeds the target's MaxRecvDataSegmentLength. */
static enum outcome case_bad_dsl(struct ctx *x)
{
        uint8_t bhs[BHS_LEN], cdb[16] = {0x2a};
        uint32_t len = (x->c.tgt_mrdsl + 512 + 511) & ~511u;
        uint8_t *data = calloc(1, len);
        enum outcome o;

        slate_put_be(cdb + 7, 2, len / 512);
        x->bad_itt = ++x->c.itt;
        scsi_bhs(&x->c, bhs, cdb, 0, 1, len, len, x->bad_itt);
        x->c.cmdsn++;
        pdu_send_raw(&x->c, bhs, NULL, 0, data, len, false, false);
        free(data);
        follow_ping(x);
        o = observe(&x->c, x->bad_itt, x->ping_itt);
        return o == OUT_DISCARDED ? OUT_ACCEPTED : o; /* the write vanished: not allowed */
}

/* TotalAHSLength = 255 words of garbage AHS on a TEST UNIT READY. */
static enum outcome case_oversize_ahs(struct ctx *x)
{
        uint8_t bhs[BHS_LEN], ahs[255 * 4];
        static const uint8_t tur[16];

        memset(ahs, 0xee, sizeof(ahs));
        x->bad_itt = ++x->c.itt;
        scsi_bhs(&x->c, bhs, tur, 0, 0, 0, 0, x->bad_itt);
        bhs[4] = 255;
        x->c.cmdsn++;
        pdu_send_raw(&x->c, bhs, ahs, sizeof(ahs), NULL, 0, false, false);
        follow_ping(x);
        return observe(&x->c, x->bad_itt, x->ping_itt);
}

/* A reserved initiator opcode (0x0b). */
static enum outcome case_unknown_opcode(struct ctx *x)
{
        uint8_t bhs[BHS_LEN];

        x->bad_itt = ++x->c.itt;
        bhs_init(bhs, 0x0b | OP_IMMEDIATE, 0x80, 0, x->bad_itt);
        slate_put_be(bhs + 24, 4, x->c.cmdsn);
        slate_put_be(bhs + 28, 4, x->c.expstatsn);
        pdu_send_raw(&x->c, bhs, NULL, 0, NULL, 0, false, false);
        follow_ping(x);
        return observe(&x->c, x->bad_itt, x->ping_itt);
}

/* NOP-Out announcing a 16 MiB - 1 data segment, of which only 4 KiB arrive. */
static enum outcome case_huge_data_segment(struct ctx *x)
{
        uint8_t bhs[BHS_LEN], chunk[4096];

        memset(chunk, 0x33, sizeof(chunk));
        x->bad_itt = ++x->c.itt;
        bhs_init(bhs, OP_NOP_OUT | OP_IMMEDIATE, 0x80, 0xffffff, x->bad_itt);
        slate_put_be(bhs + 20, 4, RSV_ITT);
        slate_put_be(bhs + 24, 4, x->c.cmdsn);
        slate_put_be(bhs + 28, 4, x->c.expstatsn);
        send_all(x->c.fd, bhs, BHS_LEN);
        send_all(x->c.fd, chunk, sizeof(chunk));
        /* The target must judge the header alone, not wait for 16 MiB. */
        return observe(&x->c, x->bad_itt, RSV_ITT);
}

static enum outcome case_bad_header_digest(struct ctx *x)
{
        x->bad_itt = ++x->c.itt;
        send_ping(&x->c, x->bad_itt, NULL, 0, true, false);
        follow_ping(x);
        return observe(&x->c, x->bad_itt, x->ping_itt);
}

static enum outcome case_bad_data_digest(struct ctx *x)
{
        uint8_t data[512];

        memset(data, 0x42, sizeof(data));
        x->bad_itt = ++x->c.itt;
        send_ping(&x->c, x->bad_itt, data, sizeof(data), false, true);
        follow_ping(x);
        return observe(&x->c, x->bad_itt, x->ping_itt);
}

/* TEST UNIT READY with CmdSN 2^30 beyond the window: must not execute. */
static enum outcome case_cmdsn_window(struct ctx *x)
{
        uint8_t bhs[BHS_LEN];
        static const uint8_t tur[16];

        x->bad_itt = ++x->c.itt;
        scsi_bhs(&x->c, bhs, tur, 0, 0, 0, 0, x->bad_itt);
        slate_put_be(bhs + 24, 4, x->c.cmdsn + 0x40000000u);
        pdu_send_raw(&x->c, bhs, NULL, 0, NULL, 0, false, false);
        follow_ping(x);
        return observe(&x->c, x->bad_itt, x->ping_itt);
}

/* Text Request whose data is binary garbage: no '=', no NUL, high bytes. */
static enum outcome case_garbage_text(struct ctx *x)
{
        uint8_t bhs[BHS_LEN], junk[700];
        size_t i;

        for (i = 0; i < sizeof(junk); i++)
                junk[i] = (uint8_t)(i * 37 + 11) | 0x80;
        memcpy(junk + 100, "===\0=x\0x=\0\0", 11);
        x->bad_itt = ++x->c.itt;
        bhs_init(bhs, OP_TEXT_REQ | OP_IMMEDIATE, 0x80, sizeof(junk), x->bad_itt);
        slate_put_be(bhs + 20, 4, RSV_ITT);
        slate_put_be(bhs + 24, 4, x->c.cmdsn);
        slate_put_be(bhs + 28, 4, x->c.expstatsn);
        pdu_send_raw(&x->c, bhs, NULL, 0, junk, sizeof(junk), false, false);
        follow_ping(x);
        return observe(&x->c, x->bad_itt, x->ping_itt);
}

/* Login whose text is garbage (and so lacks InitiatorName). */
static enum outcome case_login_garbage(struct ctx *x)
{
        uint8_t bhs[BHS_LEN], junk[600];
        size_t i;

        for (i = 0; i < sizeof(junk); i++)
                junk[i] = (uint8_t)(i * 53 + 7);
        login_bhs(&x->c, bhs, 0x80 | 1, sizeof(junk));
        x->bad_itt = x->c.itt;
        pdu_send_raw(&x->c, bhs, NULL, 0, junk, sizeof(junk), false, false);
        return observe(&x->c, RSV_ITT, RSV_ITT);
}

/*
 * A 1 MiB key name sent in 8 KiB login PDUs with the C (continue) bit: the
 * target must bound what it accumulates and reject, not buffer forever.
 */
static enum outcome case_huge_key(struct ctx *x)
{
        uint8_t bhs[BHS_LEN], chunk[8192];
        size_t sent = 0, total = 1 << 20;

        memset(chunk, 'A', sizeof(chunk));
        while (sent < total) {
                bool last = sent + sizeof(chunk) >= total;
                struct pdu p;
                uint32_t n = sizeof(chunk);
                int r;

                if (last) {
                        memcpy(chunk + n - 3, "=x", 3);
                }
                /* CSG=0 NSG=1; C on all but the last, T only on the last */
                login_bhs(&x->c, bhs, (uint8_t)((last ? 0x80 : 0x40) | 1), n);
                if (pdu_send_raw(&x->c, bhs, NULL, 0, chunk, n, false, false))
                        return OUT_CLOSED;
                sent += n;
                r = pdu_recv(&x->c, &p, now_ms() + TIMEOUT_MS);
                if (r == -ETIMEDOUT)
                        return OUT_HANG;
                if (r)
                        return OUT_CLOSED;
                if ((p.bhs[0] & 0x3f) == OP_REJECT) {
                        pdu_free(&p);
                        return OUT_REJECT;
                }
                if ((p.bhs[0] & 0x3f) != OP_LOGIN_RESP || p.bhs[36]) {
                        vlog("  after %zu bytes: opcode 0x%02x status %02x%02x\n", sent,
                             p.bhs[0] & 0x3f, p.bhs[36], p.bhs[37]);
                        pdu_free(&p);
                        return OUT_LOGIN_REJ;
                }
                pdu_free(&p);
        }
        return OUT_ACCEPTED;
}

/* Login with Version-max = Version-min = 0x10. */
static enum outcome case_bad_version(struct ctx *x)
{
        uint8_t bhs[BHS_LEN];
        char keys[512];
        size_t n = 0;

        n = (size_t)snprintf(keys, sizeof(keys),
                             "InitiatorName=%s%cSessionType=Normal%cTargetName=%s%cAuthMethod=None",
                             g_initiator, 0, 0, g_target, 0) +
            1;
        login_bhs(&x->c, bhs, 0x80 | 1, (uint32_t)n);
        bhs[2] = 0x10;
        bhs[3] = 0x10;
        pdu_send_raw(&x->c, bhs, NULL, 0, (uint8_t *)keys, (uint32_t)n, false, false);
        return observe(&x->c, RSV_ITT, RSV_ITT);
}

/* A SCSI Command as the first PDU of a connection. */
static enum outcome case_nonlogin_first(struct ctx *x)
{
        uint8_t bhs[BHS_LEN];
        static const uint8_t tur[16];

        x->bad_itt = 0x77;
        scsi_bhs(&x->c, bhs, tur, 0, 0, 0, 0, x->bad_itt);
        pdu_send_raw(&x->c, bhs, NULL, 0, NULL, 0, false, false);
        return observe(&x->c, x->bad_itt, RSV_ITT);
}

/* Half a BHS after login, then close. */
static enum outcome case_truncated(struct ctx *x)
{
        uint8_t bhs[BHS_LEN];

        bhs_init(bhs, OP_NOP_OUT | OP_IMMEDIATE, 0x80, 100, ++x->c.itt);
        send_all(x->c.fd, bhs, 20);
        conn_close(&x->c);
        return OUT_CLOSED;
}

/* Half a login PDU, then close. */
static enum outcome case_truncated_login(struct ctx *x)
{
        uint8_t bhs[BHS_LEN];

        login_bhs(&x->c, bhs, 0x80 | 1, 1000);
        send_all(x->c.fd, bhs, BHS_LEN);
        send_all(x->c.fd, "InitiatorName=iqn.x", 19);
        conn_close(&x->c);
        return OUT_CLOSED;
}

/* Data-Out for a transfer tag the target never issued. */
static enum outcome case_dataout_unknown_ttt(struct ctx *x)
{
        uint8_t bhs[BHS_LEN], data[512];

        memset(data, 0x11, sizeof(data));
        x->bad_itt = ++x->c.itt;
        bhs_init(bhs, OP_DATA_OUT, 0x80, sizeof(data), x->bad_itt);
        slate_put_be(bhs + 20, 4, 0x12345678); /* TTT */
        slate_put_be(bhs + 28, 4, x->c.expstatsn);
        pdu_send_raw(&x->c, bhs, NULL, 0, data, sizeof(data), false, false);
        follow_ping(x);
        return observe(&x->c, x->bad_itt, x->ping_itt);
}

/* WRITE(10) of one block carrying 4 KiB of immediate data (more than EDTL). */
static enum outcome case_immediate_over_edtl(struct ctx *x)
{
        uint8_t bhs[BHS_LEN], cdb[16] = {0x2a}, data[4096];

        memset(data, 0x22, sizeof(data));
        cdb[8] = 1;
        x->bad_itt = ++x->c.itt;
        scsi_bhs(&x->c, bhs, cdb, 0, 1, 512, sizeof(data), x->bad_itt);
        x->c.cmdsn++;
        pdu_send_raw(&x->c, bhs, NULL, 0, data, sizeof(data), false, false);
        follow_ping(x);
        return observe(&x->c, x->bad_itt, x->ping_itt);
}

/*
 * Not a malformed PDU but task management across sessions: PREEMPT AND
 * ABORT (SPC-5 5.14.11.5) from the bystander's I_T nexus must abort the
 * victim's task.  The victim (the test session) registers, starts a WRITE
 * and stops at the R2T; the bystander registers and preempts-and-aborts
 * the victim's key.  Then the victim's Data-Out goes nowhere and the WRITE
 * is never answered (TAS = 0), a ping still is ("silently discarded"), and
 * the victim's next command reports REGISTRATIONS PREEMPTED (2Ah/05h).
 */
#define OP_R2T 0x31

/* Send one SCSI command with its data immediate; the SCSI status, or -1. */
static int scsi_do(struct conn *c, const uint8_t *cdb, int write, const uint8_t *data,
                   uint32_t dlen, uint8_t *asc, uint8_t *ascq)
{
        uint8_t bhs[BHS_LEN];
        struct pdu p;
        uint32_t itt = ++c->itt;
        int st;

        scsi_bhs(c, bhs, cdb, 0, write, dlen, dlen, itt);
        c->cmdsn++;
        if (pdu_send_raw(c, bhs, NULL, 0, data, dlen, false, false) ||
            wait_itt(c, itt, &p, now_ms() + TIMEOUT_MS))
                return -1;
        if ((p.bhs[0] & 0x3f) != OP_SCSI_RESP) {
                pdu_free(&p);
                return -1;
        }
        st = p.bhs[3];
        *asc = *ascq = 0;
        if (p.dlen >= 2 + 14) {
                const uint8_t *sn = p.data + 2;
                bool desc = (sn[0] & 0x7f) >= 0x72;
                *asc = desc ? sn[2] : sn[12];
                *ascq = desc ? sn[3] : sn[13];
        } else if (p.dlen >= 2 + 4 && (p.data[2] & 0x7f) >= 0x72) {
                *asc = p.data[4];
                *ascq = p.data[5];
        }
        pdu_free(&p);
        return st;
}

static int prout(struct conn *c, uint8_t sa, uint8_t type, uint64_t key, uint64_t sark)
{
        uint8_t cdb[16] = {0x5f, sa, type}, param[24] = {0}, asc, ascq;
        cdb[8] = sizeof(param);
        slate_put_be(param, 8, key);
        slate_put_be(param + 8, 8, sark);
        return scsi_do(c, cdb, 1, param, sizeof(param), &asc, &ascq);
}

static enum outcome case_preempt_abort(struct ctx *x)
{
        uint8_t bhs[BHS_LEN], cdb[16] = {0x2a}, data[512], asc, ascq;
        struct pdu p;
        struct conn *by = x->by;
        enum outcome o;
        int st;

        memset(data, 0x33, sizeof(data));
        if (check_tur(&x->c)) /* consumes the session's power-on unit attention */
                return OUT_HANG;
        if (prout(&x->c, 0 /* REGISTER */, 0, 0, 0x7) != 0) {
                vlog("  victim REGISTER failed\n");
                return OUT_ERR_STATUS;
        }
        /* WRITE(10) of one block, no immediate data: the target answers with an R2T. */
        cdb[8] = 1;
        x->bad_itt = ++x->c.itt;
        scsi_bhs(&x->c, bhs, cdb, 0, 1, sizeof(data), 0, x->bad_itt);
        x->c.cmdsn++;
        if (pdu_send_raw(&x->c, bhs, NULL, 0, NULL, 0, false, false) ||
            wait_itt(&x->c, x->bad_itt, &p, now_ms() + TIMEOUT_MS))
                return OUT_HANG;
        if ((p.bhs[0] & 0x3f) != OP_R2T) {
                vlog("  expected an R2T, got opcode 0x%02x\n", p.bhs[0] & 0x3f);
                pdu_free(&p);
                return OUT_ERR_STATUS;
        }
        uint32_t ttt = (uint32_t)slate_get_be(p.bhs + 20, 4);
        pdu_free(&p);

        st = prout(by, 0 /* REGISTER */, 0, 0, 0x9);
        if (st == 0)
                st = prout(by, 5 /* PREEMPT AND ABORT */, 0x01 /* WE */, 0x9, 0x7);
        if (st != 0) {
                vlog("  bystander PREEMPT AND ABORT failed (status %d)\n", st);
                return OUT_ERR_STATUS;
        }
        usleep(200 * 1000); /* the abort runs on the victim's reactor */

        bhs_init(bhs, OP_DATA_OUT, 0x80, sizeof(data), x->bad_itt);
        slate_put_be(bhs + 20, 4, ttt);
        slate_put_be(bhs + 28, 4, x->c.expstatsn);
        pdu_send_raw(&x->c, bhs, NULL, 0, data, sizeof(data), false, false);
        follow_ping(x);
        o = observe(&x->c, x->bad_itt, x->ping_itt);
        if (o != OUT_DISCARDED) {
                vlog("  the preempted WRITE was not aborted\n");
                return o;
        }
        uint8_t tur[16] = {0};
        st = scsi_do(&x->c, tur, 0, NULL, 0, &asc, &ascq);
        vlog("  victim TEST UNIT READY: status 0x%02x sense %02xh/%02xh\n", st, asc, ascq);
        if (st != 2 || asc != 0x2a || ascq != 0x05) {
                vlog("  expected CHECK CONDITION, REGISTRATIONS PREEMPTED\n");
                o = OUT_ACCEPTED;
        }
        if (prout(by, 3 /* CLEAR */, 0, 0x9, 0) != 0) {
                vlog("  bystander CLEAR failed\n");
                o = OUT_ERR_STATUS;
        }
        return o;
}

enum phase { PH_NONE, PH_PLAIN, PH_HD, PH_DD };

struct tcase {
        const char *name;
        enum phase login; /* state of the connection before the case */
        enum outcome (*fn)(struct ctx *);
        unsigned ok; /* bitmask of acceptable outcomes */
        const char *what;
};

#define B(o)   (1u << (o))
#define STRICT (B(OUT_CLOSED) | B(OUT_REJECT))
/* RFC 7143 §7.8: a PDU with a digest error may also be discarded. */
#define DISCARD_OK (STRICT | B(OUT_DISCARDED))
#define LOGIN_OK   (B(OUT_CLOSED) | B(OUT_REJECT) | B(OUT_LOGIN_REJ))

static const struct tcase cases[] = {
    {"bad_dsl", PH_PLAIN, case_bad_dsl, STRICT | B(OUT_ERR_STATUS),
     "immediate data beyond the target's MaxRecvDataSegmentLength"},
    {"oversize_ahs", PH_PLAIN, case_oversize_ahs, STRICT | B(OUT_ERR_STATUS),
     "TotalAHSLength 255 words of garbage AHS"},
    {"unknown_opcode", PH_PLAIN, case_unknown_opcode, STRICT, "reserved opcode 0x0b"},
    {"huge_data_segment", PH_PLAIN, case_huge_data_segment, STRICT,
     "NOP-Out announcing a 16 MiB data segment"},
    {"bad_header_digest", PH_HD, case_bad_header_digest, DISCARD_OK,
     "HeaderDigest=CRC32C, corrupt header digest"},
    {"bad_data_digest", PH_DD, case_bad_data_digest, DISCARD_OK,
     "DataDigest=CRC32C, corrupt data digest"},
    {"cmdsn_window", PH_PLAIN, case_cmdsn_window, DISCARD_OK,
     "CmdSN 2^30 outside the command window"},
    {"garbage_text", PH_PLAIN, case_garbage_text, STRICT | B(OUT_TEXT_RESP),
     "Text Request with binary garbage keys"},
    {"login_garbage", PH_NONE, case_login_garbage, LOGIN_OK, "Login with garbage text"},
    {"huge_key", PH_NONE, case_huge_key, LOGIN_OK, "1 MiB key name over continued logins"},
    {"bad_version", PH_NONE, case_bad_version, LOGIN_OK, "Login with Version 0x10"},
    {"nonlogin_first", PH_NONE, case_nonlogin_first, LOGIN_OK | B(OUT_ERR_STATUS),
     "SCSI Command before login"},
    {"truncated", PH_PLAIN, case_truncated, B(OUT_CLOSED), "half a BHS, then close"},
    {"truncated_login", PH_NONE, case_truncated_login, B(OUT_CLOSED),
     "half a login PDU, then close"},
    {"dataout_unknown_ttt", PH_PLAIN, case_dataout_unknown_ttt, DISCARD_OK,
     "Data-Out for a transfer tag never issued"},
    {"immediate_over_edtl", PH_PLAIN, case_immediate_over_edtl,
     STRICT | B(OUT_ERR_STATUS) | B(OUT_ACCEPTED),
     "WRITE(10) of 512 bytes with 4 KiB immediate data (residual overflow allowed)"},
    {"preempt_abort", PH_PLAIN, case_preempt_abort, B(OUT_DISCARDED),
     "PERSISTENT RESERVE OUT PREEMPT AND ABORT from another session aborts a WRITE at its R2T"},
};

static void usage(void)
{
        fprintf(stderr, "usage: robust-pdu -p PORT -t TARGET-IQN [-a ADDR] [-v] -c CASE | -l\n");
        exit(2);
}

int main(int argc, char **argv)
{
        const char *cname = NULL;
        const struct tcase *tc = NULL;
        struct conn by;
        struct ctx x;
        enum outcome o;
        int opt, r;
        size_t i;

        while ((opt = getopt(argc, argv, "a:p:t:c:lv")) != -1) {
                switch (opt) {
                case 'a':
                        g_addr = optarg;
                        break;
                case 'p':
                        g_port = atoi(optarg);
                        break;
                case 't':
                        g_target = optarg;
                        break;
                case 'c':
                        cname = optarg;
                        break;
                case 'v':
                        g_verbose = 1;
                        break;
                case 'l':
                        for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                                printf("%s\n", cases[i].name);
                        return 0;
                default:
                        usage();
                }
        }
        if (!cname || !g_target)
                usage();
        for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
                if (!strcmp(cases[i].name, cname))
                        tc = &cases[i];
        if (!tc) {
                fprintf(stderr, "unknown case %s\n", cname);
                return 2;
        }
        srand((unsigned)(getpid() ^ now_ms()));

        /* The bystander: logged in before the case, checked after it. */
        if (conn_open(&by) || conn_login(&by, false, false) || check_ping(&by) || check_tur(&by)) {
                vlog("setup: bystander session could not log in and answer\n");
                return 2;
        }

        vlog("case %s: %s\n", tc->name, tc->what);
        x.by = &by;
        if (tc->login == PH_NONE) {
                if (conn_open(&x.c)) {
                        vlog("  cannot connect\n");
                        return 1;
                }
        } else if (!fresh(&x, tc->login == PH_HD, tc->login == PH_DD)) {
                return 1;
        } else if (check_ping(&x.c)) { /* digests really work before we break them */
                vlog("  a valid ping on the test connection was not answered\n");
                return 1;
        }
        o = tc->fn(&x);
        vlog("  outcome: %s\n", outcome_name[o]);
        conn_close(&x.c);
        r = (tc->ok & B(o)) ? 0 : 1;
        if (r)
                vlog("  FAIL: %s is not an acceptable answer\n", outcome_name[o]);

        if (check_ping(&by)) {
                vlog("  FAIL: the bystander session no longer answers NOP-Out\n");
                r = 1;
        } else if (check_tur(&by)) {
                vlog("  FAIL: the bystander session no longer answers TEST UNIT READY\n");
                r = 1;
        } else {
                vlog("  bystander session still answers NOP-Out and TEST UNIT READY\n");
        }
        conn_close(&by);
        return r;
}
