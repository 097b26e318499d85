/*
 * atomic-crash: the client half of the atomic-write crash test
 * (tests/durability/atomic.sh, bench/crash).  A small synchronous NVMe/TCP
 * initiator of our own (NVMe/TCP 1.0: ICReq, CapsuleCmd, R2T/H2CData,
 * C2HData, CapsuleResp; NVMe-oF Connect and Property Set/Get) that writes
 * and reads a namespace whose NAWUPF makes every Write that fits atomic.
 *
 *   atomic-crash write  -p PORT -n NQN -w ID -j JOURNAL [-r REGION] [-m MAX] [-c COUNT]
 *   atomic-crash verify -p PORT -n NQN -j JOURNAL... [-r REGION]
 *   atomic-crash probe -u URL LBA:NLB:BOUNDARY...
 *   (-u iscsi://HOST:PORT/IQN/LUN instead of -p/-n: iSCSI through libiscsi,
 *   each write a WRITE ATOMIC(16); one in ten is beyond the limits, with too
 *   many blocks or too large an ATOMIC BOUNDARY, and must be refused with
 *   INVALID FIELD IN CDB.  Exit 4: the target has no WRITE ATOMIC(16).)
 *
 * write: writer ID owns blocks [ID*REGION, (ID+1)*REGION) (512-byte
 * blocks) and writes COUNT (default: until the connection drops) writes of
 * 2..MAX blocks at random LBAs in it, one at a time; every block of write
 * SEQ holds (magic, seq, writer, index in the write, lba) and a fill derived
 * from them, so a block tells which write put it there.  Before sending a
 * write it appends "I seq lba nlb big" to JOURNAL, after a good completion
 * "A seq".  MAX is the namespace's atomic limit (NAWUPF + 1): over NVMe a
 * longer Write is simply not atomic, so none is sent (the SCSI half, where
 * WRITE ATOMIC beyond the limit must be rejected, is the atomic-scsi
 * branch's).
 *
 * probe (iSCSI only): one WRITE ATOMIC(16) of zeroes per argument and its
 * status on one line, in hex (sense key << 16 | ASC/ASCQ; 0 = GOOD): how
 * the target takes writes across its atomic boundary (tests/rbd/run.sh).
 *
 * verify: rebuilds each writer's region from its journal (acknowledged
 * writes, and earlier verdicts "R seq 0|1"), reads the region back and
 * checks every block.  The write that was in flight at the crash must read
 * back entirely new or entirely old: the verdict is appended ("R seq 1" or
 * "R seq 0"), a mix is a torn write.  Any other block that differs from the
 * model is a lost write.  Prints "torn N lost M" and exits 1 if either is
 * not 0, 2 on errors.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "slate/byteorder.h"
#include "slate/spec/nvme_tcp.h"

#ifdef HAVE_LIBISCSI
/* libiscsi's headers by their folder: <iscsi/iscsi.h> would be our src/iscsi/iscsi.h. */
#include <iscsi.h>
#include <scsi-lowlevel.h>
#endif

#define BS     512u
#define MAGIC  0x534c41544f4d4943ull /* "SLATOMIC" */
#define MAXBUF (1u << 20)

static int port;
static const char *nqn;
static const char *hostnqn = "nqn.2026-12.io.slate:atomic-crash";

struct conn {
        int fd;
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

static int conn_open(struct conn *c)
{
        memset(c, 0, sizeof(*c));
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
        struct timeval tv = {.tv_sec = 30};
        setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        if (connect(c->fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
                return -1;
        uint8_t ic[128] = {0};
        ic[0] = NVME_TCP_PDU_ICREQ;
        ic[2] = 128;
        ic[4] = 128;
        if (xsend(c, ic, sizeof(ic)) < 0 || xrecv(c, ic, sizeof(ic)) < 0 ||
            ic[0] != NVME_TCP_PDU_ICRESP)
                return -1;
        return 0;
}

static void sqe_init(uint8_t *sqe, uint8_t opc, uint8_t sgl_id, uint32_t len)
{
        memset(sqe, 0, 64);
        sqe[0] = opc;
        sqe[1] = 0x40; /* PSDT: SGL */
        slate_put_le(sqe + 32, 4, len);
        sqe[39] = sgl_id;
}

static int send_capsule(struct conn *c, uint8_t *sqe, const void *icd, uint32_t icd_len)
{
        uint8_t pdu[72];
        memset(pdu, 0, 8);
        pdu[0] = NVME_TCP_PDU_CAPSULE_CMD;
        pdu[2] = 72;
        pdu[3] = (uint8_t)(icd_len ? 72 : 0);
        slate_put_le(pdu + 4, 4, 72 + icd_len);
        c->cid++;
        slate_put_le(sqe + 2, 2, c->cid);
        memcpy(pdu + 8, sqe, 64);
        if (xsend(c, pdu, 72) < 0)
                return -1;
        return icd_len ? xsend(c, icd, icd_len) : 0;
}

static uint32_t last_dw0;

/*
 * PDUs until the command's end: R2Ts are answered from out (H2CData),
 * C2HData lands in in at its offset.  The status (SC | SCT << 8) or -1.
 */
static int await(struct conn *c, const uint8_t *out, uint32_t out_len, uint8_t *in, uint32_t in_len)
{
        for (;;) {
                uint8_t h[128];
                if (xrecv(c, h, 8) < 0)
                        return -1;
                if (h[2] < 8 || h[2] > sizeof(h) || xrecv(c, h + 8, h[2] - 8u) < 0)
                        return -1;
                switch (h[0]) {
                case NVME_TCP_PDU_CAPSULE_RESP:
                        last_dw0 = (uint32_t)slate_get_le(h + 8, 4);
                        return (int)((slate_get_le(h + 8 + 14, 2) >> 1) & 0x7ff);
                case NVME_TCP_PDU_R2T: {
                        uint16_t ttag = (uint16_t)slate_get_le(h + 10, 2);
                        uint32_t off = (uint32_t)slate_get_le(h + 12, 4);
                        uint32_t len = (uint32_t)slate_get_le(h + 16, 4);
                        if (off > out_len || len > out_len - off)
                                return -1;
                        uint8_t d[24] = {0};
                        d[0] = NVME_TCP_PDU_H2C_DATA;
                        d[1] = NVME_TCP_F_DATA_LAST;
                        d[2] = 24;
                        d[3] = 24;
                        slate_put_le(d + 4, 4, 24 + len);
                        slate_put_le(d + 8, 2, c->cid);
                        slate_put_le(d + 10, 2, ttag);
                        slate_put_le(d + 12, 4, off);
                        slate_put_le(d + 16, 4, len);
                        if (xsend(c, d, 24) < 0 || xsend(c, out + off, len) < 0)
                                return -1;
                        break;
                }
                case NVME_TCP_PDU_C2H_DATA: {
                        uint32_t off = (uint32_t)slate_get_le(h + 12, 4);
                        uint32_t len = (uint32_t)slate_get_le(h + 16, 4);
                        uint8_t pad[256];
                        if (h[3] < h[2] || !in || off > in_len || len > in_len - off ||
                            xrecv(c, pad, h[3] - h[2]) < 0 || xrecv(c, in + off, len) < 0)
                                return -1;
                        if (h[1] & NVME_TCP_F_DATA_SUCCESS)
                                return 0;
                        break;
                }
                default:
                        return -1; /* a C2HTermReq or anything else: the test fails */
                }
        }
}

static int fabric_connect(struct conn *c, uint16_t qid, uint16_t cntlid)
{
        uint8_t sqe[64], data[1024] = {0};
        sqe_init(sqe, 0x7f, NVME_TCP_SGL_ICD, sizeof(data));
        sqe[4] = 0x01; /* Connect */
        slate_put_le(sqe + 42, 2, qid);
        slate_put_le(sqe + 44, 2, 31); /* SQSIZE, 0's based */
        for (int i = 0; i < 16; i++)
                data[i] = (uint8_t)(0x60 + i);
        slate_put_le(data + 16, 2, cntlid);
        snprintf((char *)data + 256, 256, "%s", nqn);
        snprintf((char *)data + 512, 256, "%s", hostnqn);
        if (send_capsule(c, sqe, data, sizeof(data)) < 0)
                return -1;
        return await(c, NULL, 0, NULL, 0);
}

static int prop(struct conn *c, bool set, uint32_t off, uint64_t val, uint64_t *out)
{
        uint8_t sqe[64];
        sqe_init(sqe, 0x7f, NVME_TCP_SGL_TRANSPORT, 0);
        sqe[4] = set ? 0x00 : 0x04;
        slate_put_le(sqe + 44, 4, off);
        slate_put_le(sqe + 48, 8, val);
        if (send_capsule(c, sqe, NULL, 0) < 0)
                return -1;
        int rc = await(c, NULL, 0, NULL, 0);
        if (out)
                *out = last_dw0;
        return rc;
}

/* Admin queue (kept open: the controller lives with it) and one I/O queue. */
static int ctrl_up(struct conn *adm, struct conn *io)
{
        if (conn_open(adm) < 0 || fabric_connect(adm, 0, 0xffff) != 0)
                return -1;
        uint16_t cntlid = (uint16_t)last_dw0;
        if (prop(adm, true, 0x14, 1u | (6u << 16) | (4u << 20), NULL) != 0)
                return -1;
        for (int i = 0; i < 100; i++) {
                uint64_t csts = 0;
                if (prop(adm, false, 0x1c, 0, &csts) != 0)
                        return -1;
                if (csts & 1)
                        return conn_open(io) < 0 || fabric_connect(io, 1, cntlid) != 0 ? -1 : 0;
                usleep(50000);
        }
        return -1;
}

static int nvme_io(struct conn *c, bool write, uint64_t lba, uint32_t nlb, uint8_t *buf)
{
        uint8_t sqe[64];
        uint32_t len = nlb * BS;
        sqe_init(sqe, write ? 0x01 : 0x02, NVME_TCP_SGL_TRANSPORT, len);
        slate_put_le(sqe + 4, 4, 1); /* NSID */
        slate_put_le(sqe + 40, 8, lba);
        slate_put_le(sqe + 48, 2, nlb - 1);
        if (send_capsule(c, sqe, NULL, 0) < 0)
                return -1;
        return write ? await(c, buf, len, NULL, 0) : await(c, NULL, 0, buf, len);
}

/* ---- iSCSI (libiscsi) ---- */

static const char *iscsi_url;
#ifdef HAVE_LIBISCSI
static struct iscsi_context *isc;
static int isc_lun;

static int iscsi_up(void)
{
        isc = iscsi_create_context("iqn.2026-12.io.slate:atomic-crash");
        struct iscsi_url *u = isc ? iscsi_parse_full_url(isc, iscsi_url) : NULL;
        if (!u)
                return -1;
        iscsi_set_targetname(isc, u->target);
        iscsi_set_session_type(isc, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(isc, ISCSI_HEADER_DIGEST_NONE);
        iscsi_set_noautoreconnect(isc, 1);
        iscsi_set_timeout(isc, 30);
        isc_lun = u->lun;
        int rc = iscsi_full_connect_sync(isc, u->portal, u->lun);
        iscsi_destroy_url(u);
        if (rc)
                return -1;
        for (int i = 0; i < 5; i++) { /* the power-on unit attention */
                struct scsi_task *t = iscsi_testunitready_sync(isc, isc_lun);
                bool good = t && t->status == SCSI_STATUS_GOOD;
                if (t)
                        scsi_free_scsi_task(t);
                if (good)
                        break;
        }
        return 0;
}

/* WRITE ATOMIC(16): 0 GOOD, -1 transport gone, else (sense key << 16 | ASC << 8 | ASCQ). */
static int write_atomic16(uint64_t lba, uint32_t nlb, uint16_t boundary, uint8_t *buf)
{
        struct scsi_task *t = calloc(1, sizeof(*t));
        if (!t)
                return -1;
        t->cdb[0] = 0x9c;
        slate_put_be(t->cdb + 2, 8, lba);
        slate_put_be(t->cdb + 10, 2, boundary);
        slate_put_be(t->cdb + 12, 2, nlb);
        t->cdb_size = 16;
        t->xfer_dir = SCSI_XFER_WRITE;
        t->expxferlen = nlb * BS;
        struct iscsi_data d = {.size = nlb * BS, .data = buf};
        struct scsi_task *r = iscsi_scsi_command_sync(isc, isc_lun, t, &d);
        int rc;
        if (!r || t->status == SCSI_STATUS_ERROR || t->status == SCSI_STATUS_CANCELLED)
                rc = -1;
        else if (t->status == SCSI_STATUS_GOOD)
                rc = 0;
        else
                rc = (int)(t->sense.key << 16 | t->sense.ascq);
        scsi_free_scsi_task(t);
        return rc;
}

static int do_probe(int n, char **args)
{
        if (!iscsi_url || iscsi_up() < 0)
                return 2;
        uint8_t *buf = calloc(1, MAXBUF);
        int rc = buf ? 0 : 2;
        for (int i = 0; i < n && rc == 0; i++) {
                unsigned long long lba;
                unsigned nlb, bnd;
                if (sscanf(args[i], "%llu:%u:%u", &lba, &nlb, &bnd) != 3 || !nlb ||
                    nlb * BS > MAXBUF || bnd > 0xffff) {
                        rc = 2;
                        break;
                }
                int st = write_atomic16(lba, nlb, (uint16_t)bnd, buf);
                if (st < 0)
                        rc = 2;
                printf("%s0x%x", i ? " " : "", st < 0 ? 0xffffffffu : (unsigned)st);
        }
        printf("\n");
        free(buf);
        iscsi_logout_sync(isc);
        iscsi_destroy_context(isc);
        isc = NULL;
        return rc;
}
#endif

static int io_write(struct conn *c, uint64_t lba, uint32_t nlb, uint8_t *buf)
{
#ifdef HAVE_LIBISCSI
        if (iscsi_url) {
                int rc = write_atomic16(lba, nlb, 0, buf);
                return rc < 0 ? -1 : rc;
        }
#endif
        return nvme_io(c, true, lba, nlb, buf);
}

static int io_read(struct conn *c, uint64_t lba, uint32_t nlb, uint8_t *buf)
{
#ifdef HAVE_LIBISCSI
        if (iscsi_url) {
                struct scsi_task *t =
                    iscsi_read16_sync(isc, isc_lun, lba, nlb * BS, BS, 0, 0, 0, 0, 0);
                int rc = t && t->status == SCSI_STATUS_GOOD && t->datain.size == (int)(nlb * BS)
                             ? 0
                             : -1;
                if (rc == 0)
                        memcpy(buf, t->datain.data, nlb * BS);
                if (t)
                        scsi_free_scsi_task(t);
                return rc;
        }
#endif
        return nvme_io(c, false, lba, nlb, buf);
}

static int up(struct conn *adm, struct conn *io)
{
        if (iscsi_url) {
#ifdef HAVE_LIBISCSI
                adm->fd = io->fd = -1;
                return iscsi_up();
#else
                fprintf(stderr, "built without libiscsi\n");
                return -1;
#endif
        }
        return ctrl_up(adm, io);
}

static void down(struct conn *adm, struct conn *io)
{
#ifdef HAVE_LIBISCSI
        if (iscsi_url && isc) {
                iscsi_logout_sync(isc);
                iscsi_destroy_context(isc);
                isc = NULL;
        }
#endif
        if (adm->fd >= 0)
                close(adm->fd);
        if (io->fd >= 0)
                close(io->fd);
}

/* ---- patterns ---- */

static uint64_t mix(uint64_t x)
{
        x += 0x9e3779b97f4a7c15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        return x ^ (x >> 31);
}

static void fill(uint8_t *b, uint64_t seq, uint32_t writer, uint32_t idx, uint64_t lba)
{
        uint64_t h[4] = {MAGIC, seq, ((uint64_t)writer << 32) | idx, lba};
        memcpy(b, h, sizeof(h));
        for (uint32_t o = sizeof(h); o < BS; o += 8) {
                uint64_t v = mix(seq * 1000003u + idx * 131u + o);
                memcpy(b + o, &v, 8);
        }
}

/* What a block should hold: (seq, idx), seq 0 = never written (zeroes). */
struct cell {
        uint64_t seq;
        uint32_t idx;
};

static bool block_is(const uint8_t *b, const struct cell *c, uint32_t writer, uint64_t lba)
{
        static uint8_t want[BS];
        if (c->seq == 0) {
                for (uint32_t i = 0; i < BS; i++)
                        if (b[i])
                                return false;
                return true;
        }
        fill(want, c->seq, writer, c->idx, lba);
        return memcmp(b, want, BS) == 0;
}

/* ---- write ---- */

static int do_write(uint32_t writer, const char *jpath, uint32_t region, uint32_t max, long count)
{
        FILE *j = fopen(jpath, "a+");
        if (!j)
                return 2;
        uint64_t seq = 0;
        char line[128];
        rewind(j);
        while (fgets(line, sizeof(line), j)) {
                uint64_t s;
                if (line[0] == 'I' && sscanf(line + 1, "%" SCNu64, &s) == 1 && s > seq)
                        seq = s;
        }
        struct conn adm, io;
        if (up(&adm, &io) < 0) {
                /* 3, not 2: the daemon may have been killed before we got in. */
                fprintf(stderr, "writer %u: cannot connect\n", writer);
                fclose(j);
                return 3;
        }
        uint8_t *buf = malloc(MAXBUF);
        long refused = 0;
        uint64_t rng = mix(((uint64_t)getpid() << 20) ^ (uint64_t)time(NULL) ^ writer);
        uint64_t base = (uint64_t)writer * region;
        long done = 0;
        int rc = 0;
        while (count < 0 || done < count) {
                rng = mix(rng);
#ifdef HAVE_LIBISCSI
                if (iscsi_url && rng % 10 == 0) {
                        /* Beyond the limits: too long, or too large an ATOMIC BOUNDARY. */
                        bool len = (rng >> 4) & 1;
                        uint32_t n = len ? max + 1 : 4;
                        int st = write_atomic16((uint64_t)writer * region, n,
                                                len ? 0 : (uint16_t)(max + 1), buf);
                        if (st == -1)
                                break;
                        if (st !=
                            (0x05 << 16 | 0x2400)) { /* ILLEGAL REQUEST, INVALID FIELD IN CDB */
                                fprintf(stderr,
                                        "writer %u: WRITE ATOMIC(16) beyond the limits (%s): "
                                        "0x%06x, expected INVALID FIELD IN CDB\n",
                                        writer, len ? "length" : "boundary", (unsigned)st);
                                rc = st == (0x05 << 16 | 0x2000) ? 4 : 2;
                                break;
                        }
                        refused++;
                        continue;
                }
#endif
                bool big = false;
                uint32_t nlb = 2 + (uint32_t)((rng >> 8) % (max - 1));
                if (nlb > region)
                        nlb = region;
                uint64_t lba = base + (rng >> 24) % (region - nlb + 1);
                seq++;
                for (uint32_t i = 0; i < nlb; i++)
                        fill(buf + (size_t)i * BS, seq, writer, i, lba + i);
                fprintf(j, "I %" PRIu64 " %" PRIu64 " %u %d\n", seq, lba, nlb, big);
                fflush(j);
                int st = io_write(&io, lba, nlb, buf);
                if (st != 0) {
                        if (st > 0)
                                fprintf(stderr, "writer %u: write status 0x%x\n", writer, st);
                        /* a dropped connection is the crash; 4: no WRITE ATOMIC(16) (05/2000) */
                        rc = st > 0 ? (iscsi_url && st == (0x05 << 16 | 0x2000) ? 4 : 2) : 0;
                        break;
                }
                fprintf(j, "A %" PRIu64 "\n", seq);
                fflush(j);
                done++;
        }
        free(buf);
        down(&adm, &io);
        fclose(j);
        printf("writer %u: %ld writes acknowledged", writer, done);
        if (iscsi_url)
                printf(", %ld beyond the limits refused", refused);
        printf("\n");
        return rc;
}

/* ---- verify ---- */

struct wrec {
        uint64_t seq, lba;
        uint32_t nlb;
        int big, state; /* state: 0 pending, 1 acked/new, 2 resolved old */
};

static int verify_one(struct conn *io, const char *jpath, uint32_t region, long *torn, long *lost)
{
        FILE *j = fopen(jpath, "a+");
        if (!j)
                return 2;
        rewind(j);
        struct wrec *w = NULL;
        size_t n = 0, cap = 0;
        int writer = -1;
        char line[128];
        while (fgets(line, sizeof(line), j)) {
                uint64_t s, lba;
                unsigned nlb;
                int big, v;
                if (line[0] == 'I' &&
                    sscanf(line + 1, "%" SCNu64 " %" SCNu64 " %u %d", &s, &lba, &nlb, &big) == 4) {
                        if (n == cap) {
                                cap = cap ? cap * 2 : 1024;
                                w = realloc(w, cap * sizeof(*w));
                        }
                        w[n++] = (struct wrec){s, lba, nlb, big, 0};
                        if (writer < 0)
                                writer = (int)(lba / region);
                        continue;
                }
                bool a = line[0] == 'A' && sscanf(line + 1, "%" SCNu64, &s) == 1;
                bool r = line[0] == 'R' && sscanf(line + 1, "%" SCNu64 " %d", &s, &v) == 2;
                if (!a && !r)
                        continue;
                for (size_t k = n; k-- > 0;)
                        if (w[k].seq == s) {
                                w[k].state = a || v ? 1 : 2;
                                break;
                        }
        }
        if (writer < 0) {
                fclose(j);
                free(w);
                return 0;
        }
        uint64_t base = (uint64_t)writer * region;
        struct cell *model = calloc(region, sizeof(*model));
        struct wrec *pend = NULL;
        for (size_t k = 0; k < n; k++) {
                if (w[k].state == 0) {
                        pend = &w[k]; /* QD1: only the last can be pending */
                        continue;
                }
                if (w[k].state != 1)
                        continue;
                for (uint32_t i = 0; i < w[k].nlb; i++)
                        model[w[k].lba - base + i] = (struct cell){w[k].seq, i};
        }
        uint8_t *buf = malloc(MAXBUF);
        uint32_t chunk = MAXBUF / BS / 8; /* 128 blocks a read */
        uint32_t newc = 0, oldc = 0, plen = pend ? pend->nlb : 0;
        long bad = 0;
        int rc = 0;
        for (uint32_t at = 0; at < region; at += chunk) {
                uint32_t nb = region - at < chunk ? region - at : chunk;
                int st = io_read(io, base + at, nb, buf);
                if (st != 0) {
                        fprintf(stderr, "verify: read status %d\n", st);
                        rc = 2;
                        break;
                }
                for (uint32_t i = 0; i < nb; i++) {
                        uint64_t lba = base + at + i;
                        const uint8_t *b = buf + (size_t)i * BS;
                        bool in_p = pend && lba >= pend->lba && lba < pend->lba + plen;
                        bool is_old = block_is(b, &model[at + i], (uint32_t)writer, lba);
                        if (in_p) {
                                struct cell nc = {pend->seq, (uint32_t)(lba - pend->lba)};
                                if (block_is(b, &nc, (uint32_t)writer, lba))
                                        newc++;
                                else if (is_old)
                                        oldc++;
                                else if (bad++ < 5)
                                        fprintf(stderr,
                                                "%s: lba %" PRIu64 " in the pending write "
                                                "%" PRIu64 " is neither old nor new\n",
                                                jpath, lba, pend->seq);
                        } else if (!is_old) {
                                if (bad++ < 5)
                                        fprintf(stderr,
                                                "%s: lba %" PRIu64 " lost (expected seq %" PRIu64
                                                ")\n",
                                                jpath, lba, model[at + i].seq);
                                (*lost)++;
                        }
                }
        }
        if (rc == 0 && pend) {
                bool all_new = newc == plen, all_old = oldc == plen;
                if (all_new || all_old) {
                        fprintf(j, "R %" PRIu64 " %d\n", pend->seq, all_new ? 1 : 0);
                        printf("%s: write %" PRIu64
                               " (%u blocks%s) in flight at the crash: all %s\n",
                               jpath, pend->seq, plen, pend->big ? ", beyond the atomic limit" : "",
                               all_new ? "new" : "old");
                } else {
                        (*torn)++;
                        printf("%s: TORN write %" PRIu64 " (%u blocks): %u new, %u old\n", jpath,
                               pend->seq, plen, newc, oldc);
                        fprintf(j, "R %" PRIu64 " 1\n", pend->seq);
                }
        }
        free(buf);
        free(model);
        free(w);
        fclose(j);
        return rc;
}

int main(int argc, char **argv)
{
        if (argc < 2)
                goto usage;
        const char *mode = argv[1];
        uint32_t writer = 0, region = 4096, max = 128;
        long count = -1;
        const char *journals[64];
        int nj = 0;
        int o;
        optind = 2;
        while ((o = getopt(argc, argv, "p:n:u:w:j:r:m:c:")) != -1) {
                switch (o) {
                case 'u':
                        iscsi_url = optarg;
                        break;
                case 'p':
                        port = atoi(optarg);
                        break;
                case 'n':
                        nqn = optarg;
                        break;
                case 'w':
                        writer = (uint32_t)atoi(optarg);
                        break;
                case 'j':
                        if (nj < 64)
                                journals[nj++] = optarg;
                        break;
                case 'r':
                        region = (uint32_t)atoi(optarg);
                        break;
                case 'm':
                        max = (uint32_t)atoi(optarg);
                        break;
                case 'c':
                        count = atol(optarg);
                        break;
                default:
                        goto usage;
                }
        }
        if (!strcmp(mode, "probe")) {
#ifdef HAVE_LIBISCSI
                return do_probe(argc - optind, argv + optind);
#else
                fprintf(stderr, "built without libiscsi\n");
                return 2;
#endif
        }
        if ((!iscsi_url && (!port || !nqn)) || !nj || max < 2 || max * 2 * BS > MAXBUF ||
            region < 2 * max)
                goto usage;
        if (!strcmp(mode, "write"))
                return do_write(writer, journals[0], region, max, count);
        if (strcmp(mode, "verify"))
                goto usage;
        struct conn adm, io;
        if (up(&adm, &io) < 0) {
                fprintf(stderr, "verify: cannot connect\n");
                return 2;
        }
        long torn = 0, lost = 0;
        int rc = 0;
        for (int i = 0; i < nj; i++) {
                int r = verify_one(&io, journals[i], region, &torn, &lost);
                if (r > rc)
                        rc = r;
        }
        down(&adm, &io);
        printf("torn %ld lost %ld\n", torn, lost);
        if (rc)
                return rc;
        return torn || lost ? 1 : 0;
usage:
        fprintf(stderr, "usage: atomic-crash write|verify -p PORT -n NQN -j JOURNAL [-w ID] "
                        "[-r REGION] [-m MAX] [-c COUNT]\n       atomic-crash probe -u URL "
                        "LBA:NLB:BOUNDARY...\n");
        return 2;
}
