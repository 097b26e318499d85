/*
 * bench/pi's data-path half: what the core's protection stage (core/req.c,
 * issue 10) costs a request, without any transport.  Two mem namespaces of
 * 4096-byte blocks on one reactor, one without metadata and one with PI
 * type 1 (8 bytes, CRC16 guard); QD requests in flight; for 4 KiB and
 * 128 KiB writes and reads: IOPS and GB/s of data without PI, then with PI
 * the way the wire carries it (extended LBAs, every check on writes and
 * reads), then with PI inserted/stripped by the core (data only, generate
 * on write, check on read), and each one's cost ratio to no PI (time per
 * I/O; >1: slower).  Best of 3 rounds.  Asserts nothing (bench/README.md).
 * Usage: pi-datapath-bench [seconds per row and mode, default 1]
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/ns.h"
#include "core/req.h"
#include "rt/reactor.h"

#define QD 16

static double now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct job {
        struct core_ns *ns;
        enum core_op op;
        size_t io;    /* data bytes per I/O */
        int mode;     /* 0: no PI, 1: extended LBAs checked, 2: data only, core inserts/strips */
        double until; /* stop submitting after */
        uint64_t done;
        int inflight;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        struct slot {
                struct core_req req;
                uint8_t *buf;
                uint32_t lba;
        } s[QD];
};

static void issue(struct job *j, struct slot *s);

static void on_done(struct core_req *req)
{
        struct slot *s = (struct slot *)req;
        struct job *j = req->cb_arg;
        if (req->status != CORE_OK) {
                fprintf(stderr, "I/O failed: status %d\n", req->status);
                exit(1);
        }
        j->done++;
        if (now() < j->until) {
                issue(j, s);
                return;
        }
        pthread_mutex_lock(&j->lock);
        if (--j->inflight == 0)
                pthread_cond_signal(&j->cond);
        pthread_mutex_unlock(&j->lock);
}

static void issue(struct job *j, struct slot *s)
{
        uint32_t nlb = (uint32_t)(j->io / 4096);
        core_req_init(&s->req, j->ns, j->op, s->lba, nlb, 0, rt_get(0), on_done, j);
        size_t len = j->io;
        if (j->mode == 1) {
                s->req.pi.host_md = true;
                len += nlb * 8;
        }
        if (j->mode) {
                s->req.pi.chk = CORE_PI_CHK_GUARD | CORE_PI_CHK_APP | CORE_PI_CHK_REF;
                s->req.pi.ref = s->lba;
                s->req.pi.app_mask = 0xffff;
                s->req.pi.gen_ref = s->lba;
        }
        s->req.iov[0].iov_base = s->buf;
        s->req.iov[0].iov_len = len;
        s->req.iovcnt = 1;
        core_req_submit(&s->req);
}

static void start(void *arg)
{
        struct job *j = arg;
        for (int i = 0; i < QD; i++)
                issue(j, &j->s[i]);
}

static double run(struct job *j, double secs)
{
        j->done = 0;
        j->inflight = QD;
        double t0 = now();
        j->until = t0 + secs;
        rt_msg_send(rt_get(0), start, j);
        pthread_mutex_lock(&j->lock);
        while (j->inflight)
                pthread_cond_wait(&j->cond, &j->lock);
        pthread_mutex_unlock(&j->lock);
        return (double)j->done / (now() - t0);
}

static struct core_ns *mk(const char *name, bool pi)
{
        struct core_ns_params p = {.name = name,
                                   .backend = "mem",
                                   .size_bytes = 64u << 20,
                                   .block_size = 4096,
                                   .pi_set = pi,
                                   .pi = {.block_size = 4096, .md_size = 8, .type = 1}};
        struct core_ns *ns = NULL;
        char err[256];
        if (core_ns_create(&p, &ns, err, sizeof(err))) {
                fprintf(stderr, "%s: %s\n", name, err);
                exit(1);
        }
        return ns;
}

int main(int argc, char **argv)
{
        double secs = argc > 1 ? atof(argv[1]) : 1;
        char dir[] = "/tmp/pi-datapath-XXXXXX";
        if (!mkdtemp(dir))
                return 1;
        core_set_state_dir(dir);
        if (rt_init(1) || rt_start())
                return 1;
        struct core_ns *plain = mk("plain", false), *pi = mk("pi", true);
        static const size_t sizes[] = {4096, 128 * 1024};
        static const char *const mnames[] = {"none", "ext+chk", "insert/strip"};
        printf("%-6s %5s %14s %14s %14s   %s\n", "op", "io", mnames[0], mnames[1], mnames[2],
               "ratio to none (ext+chk insert/strip)");
        for (int o = 0; o < 2; o++) {
                enum core_op op = o ? CORE_OP_READ : CORE_OP_WRITE;
                for (size_t z = 0; z < 2; z++) {
                        struct job *j = calloc(1, sizeof(*j));
                        pthread_mutex_init(&j->lock, NULL);
                        pthread_cond_init(&j->cond, NULL);
                        j->op = op;
                        j->io = sizes[z];
                        for (int i = 0; i < QD; i++) {
                                j->s[i].buf = calloc(1, sizes[z] + sizes[z] / 4096 * 8);
                                j->s[i].lba = (uint32_t)(i * (sizes[z] / 4096));
                                /* Extended LBAs with good PI for the ext+chk writes. */
                                struct core_pi_fmt f = {
                                    .block_size = 4096, .md_size = 8, .type = 1};
                                uint8_t *d = malloc(sizes[z]);
                                memset(d, 0x5a, sizes[z]);
                                core_pi_insert(&f, d, (struct core_pi_buf){j->s[i].buf, NULL},
                                               sizes[z] / 4096,
                                               &(struct core_pi_tags){.ref = j->s[i].lba});
                                free(d);
                        }
                        double r[3] = {0, 0, 0};
                        for (int round = 0; round < 3; round++)
                                for (int m = 0; m < 3; m++) {
                                        j->ns = m ? pi : plain;
                                        j->mode = m;
                                        if (op == CORE_OP_READ && round == 0 && m == 0) {
                                                /* Blocks with good PI to read back. */
                                                j->op = CORE_OP_WRITE;
                                                j->ns = pi;
                                                j->mode = 2;
                                                run(j, 0.05);
                                                j->op = op;
                                                j->ns = plain;
                                                j->mode = 0;
                                        }
                                        double v = run(j, secs / 3);
                                        r[m] = v > r[m] ? v : r[m];
                                }
                        printf("%-6s %4zuK %7.0f IOPS %7.0f IOPS %7.0f IOPS   %.2f %.2f\n",
                               o ? "read" : "write", sizes[z] / 1024, r[0], r[1], r[2], r[0] / r[1],
                               r[0] / r[2]);
                        for (int i = 0; i < QD; i++)
                                free(j->s[i].buf);
                        free(j);
                }
        }
        rt_stop();
        rt_join();
        rt_fini();
        core_ns_shutdown_all();
        char cmd[64];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd) ? 1 : 0;
}
