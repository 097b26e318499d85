/*
 * slate-perf: an initiator-side load generator for block storage targets,
 * in the manner of spdk_nvme_perf and iscsi-perf.  It speaks NVMe/TCP with
 * its own user-space initiator (nvme_tcp.c) or iSCSI through libiscsi
 * (iscsi.c), keeps a fixed queue depth of reads and writes per queue, and
 * reports IOPS, throughput and the latency distribution (hist.c) as text or
 * JSON.  This file holds the driver: options, workload generation, threads,
 * the measurement window and the report.  No standard section.
 */
#include "perf.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct perf_run perf_run;

static void usage(FILE *f)
{
        fprintf(f,
                "usage: slate-perf [options]\n"
                "  -t, --transport nvme-tcp|iscsi   (default nvme-tcp)\n"
                "  -a, --addr ADDR          NVMe/TCP target address (default 127.0.0.1)\n"
                "  -p, --port PORT          NVMe/TCP port (default 4420)\n"
                "  -n, --nqn NQN            NVMe subsystem NQN\n"
                "      --hostnqn NQN        host NQN (default a fixed slate-perf NQN)\n"
                "      --nsid N             namespace id (default 1)\n"
                "  -u, --url URL            iSCSI URL iscsi://HOST[:PORT]/IQN/LUN\n"
                "  -q, --qd N               queue depth per queue (default 32)\n"
                "  -b, --bs SIZE            I/O size, e.g. 4k, 128k, 1m (default 4k)\n"
                "  -M, --mix PCT            percentage of reads (default 100)\n"
                "  -r, --pattern rand|seq   access pattern (default rand)\n"
                "  -d, --duration SECS      measured run time (default 10)\n"
                "  -Q, --queues N           I/O queues / connections, one thread each (default 1)\n"
                "  -s, --span SIZE          use only the first SIZE bytes of the namespace\n"
                "      --hdgst, --ddgst     NVMe/TCP header / data digests (iSCSI: --hdgst only)\n"
                "      --cpu LIST           pin worker i to CPU LIST[i %% n], e.g. 0 or 0,1\n"
                "      --kato MS            NVMe keep-alive timeout (default 10000)\n"
                "      --poll[=MODE[:US]]   how a queue waits for its socket: off (default)\n"
                "                           sleeps in poll(); always (--poll alone) never\n"
                "                           sleeps, a core at 100 %%; adaptive[:US] spins for\n"
                "                           US microseconds (default 50) after a completion\n"
                "                           or a send, then sleeps.  Spins and sleeps per\n"
                "                           I/O are reported\n"
                "      --json               machine-readable report on stdout\n"
                "      --workload lifetimes  mixed lifetimes (issue 9): queue 0 writes -b sized\n"
                "                           cold data sequentially past the hot region, the\n"
                "                           other queues (-Q, at least 2) rewrite --hot-bs\n"
                "                           blocks at random in it, equal bytes of each\n"
                "      --hot-span SIZE      the hot region (default 16m)\n"
                "      --hot-bs SIZE        hot write size (default 4k)\n"
                "      --bytes SIZE         stop after writing SIZE bytes (instead of -d)\n"
                "      --place none|stream|group|fdp  tag each lifetime's writes: SCSI\n"
                "                           WRITE STREAM(16) / NVMe DTYPE 1 stream (stream),\n"
                "                           SCSI GROUP NUMBER 2 and 5 (group), NVMe DTYPE 2\n"
                "                           placement handles 1 and 2 (fdp)\n"
                "      --tls-psk KEY        NVMe/TCP over TLS 1.3 with this configured PSK\n"
                "                           (\"NVMeTLSkey-1:HH:<base64>:\"; identity and TLS PSK\n"
                "                           derived for --hostnqn and -n as nvme-cli does)\n"
                "      --tls-identity ID    offer ID as the PSK identity instead\n"
                "      --verify             NVMe/TCP: writes carry LBA-tagged blocks, every\n"
                "                           read is checked (fails on the first bad block)\n"
                "      --pi[=host|pract]    protection information, the type and guard the\n"
                "                           namespace / LU is formatted with.  host (default):\n"
                "                           slate-perf generates the PI of what it writes and\n"
                "                           checks what it reads, the target checks both ways\n"
                "                           (NVMe extended LBAs with PRACT 0 and PRCHK guard,\n"
                "                           application and reference tags; SCSI WRPROTECT and\n"
                "                           RDPROTECT 001b).  pract (NVMe): the controller\n"
                "                           inserts and strips (PRACT 1), checking all three.\n"
                "                           Check failures are counted by kind\n"
                "  -v, --verbose            log connection steps to stderr\n"
                "  -h, --help\n");
}

/* "4k", "128K", "1m", "1G", "512" -> bytes.  0 or -EINVAL. */
static int parse_size(const char *s, uint64_t *out)
{
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 0);
        if (errno || end == s)
                return -EINVAL;
        unsigned shift = 0;
        switch (*end) {
        case 'k':
        case 'K':
                shift = 10;
                end++;
                break;
        case 'm':
        case 'M':
                shift = 20;
                end++;
                break;
        case 'g':
        case 'G':
                shift = 30;
                end++;
                break;
        case 't':
        case 'T':
                shift = 40;
                end++;
                break;
        case '\0':
                break;
        default:
                return -EINVAL;
        }
        if (*end == 'i' || *end == 'I')
                end++;
        if (*end == 'b' || *end == 'B')
                end++;
        if (*end || (shift && v > (UINT64_MAX >> shift)))
                return -EINVAL;
        *out = (uint64_t)v << shift;
        return 0;
}

static int parse_uint(const char *s, unsigned min, unsigned max, unsigned *out)
{
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 0);
        if (errno || end == s || *end || v < min || v > max)
                return -EINVAL;
        *out = (unsigned)v;
        return 0;
}

static int parse_cpus(const char *s, struct perf_opts *o)
{
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", s);
        o->ncpus = 0;
        for (char *save, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                unsigned c;
                if (o->ncpus == 64 || parse_uint(tok, 0, CPU_SETSIZE - 1, &c))
                        return -EINVAL;
                o->cpus[o->ncpus++] = (int)c;
        }
        return o->ncpus ? 0 : -EINVAL;
}

static uint64_t rng_next(uint64_t *s)
{
        /* xorshift64*: cheap, good enough to scatter LBAs. */
        uint64_t x = *s;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *s = x;
        return x * 0x2545F4914F6CDD1DULL;
}

void perf_next_io(struct perf_worker *w, struct perf_io *io)
{
        const struct perf_opts *o = w->o;
        uint64_t slots = w->region_blocks / w->io_blocks;
        uint64_t slot;
        if (o->lifetimes && w->cold) {
                /* Never ahead of the hot queues: equal bytes of each lifetime. */
                while (atomic_load(&perf_run.cold_issued) > atomic_load(&perf_run.hot_issued) &&
                       perf_running(perf_now_ns()))
                        usleep(20);
                atomic_fetch_add(&perf_run.cold_issued, w->bs);
        } else if (o->lifetimes) {
                atomic_fetch_add(&perf_run.hot_issued, w->bs);
        }
        if (o->lifetimes ? !w->cold : o->random) {
                slot = rng_next(&w->rng) % slots;
        } else {
                slot = w->seq_next++;
                if (w->seq_next >= slots)
                        w->seq_next = 0;
        }
        io->lba = w->region_lo + slot * w->io_blocks;
        if (o->read_pct >= 100)
                io->write = false;
        else if (o->read_pct == 0)
                io->write = true;
        else
                io->write = (rng_next(&w->rng) % 100) >= o->read_pct;
}

bool perf_io_done(struct perf_worker *w, bool write, uint64_t start_ns, uint64_t now_ns, bool ok)
{
        bool running = perf_running(now_ns);
        if (!running)
                return false;
        if (!ok) {
                w->st.errors++;
                if (!w->o->write_total)
                        return true;
                /* --bytes would never be reached: stop every queue (exit status 1). */
                atomic_store(&perf_run.end_ns, 0);
                return false;
        }
        uint64_t lat = now_ns - start_ns;
        perf_hist_record(&w->st.lat, lat);
        if (write && w->o->write_total &&
            atomic_fetch_add(&perf_run.written, w->bs) + w->bs >= w->o->write_total)
                atomic_store(&perf_run.end_ns, 0); /* --bytes reached: everyone stops */
        if (write) {
                w->st.writes++;
                w->st.write_bytes += w->bs;
                perf_hist_record(&w->st.wlat, lat);
        } else {
                w->st.reads++;
                w->st.read_bytes += w->bs;
                perf_hist_record(&w->st.rlat, lat);
        }
        return true;
}

int perf_worker_ready(struct perf_worker *w)
{
        (void)w;
        atomic_fetch_add(&perf_run.ready, 1);
        while (!atomic_load(&perf_run.go))
                usleep(200);
        return atomic_load(&perf_run.failed) ? -ECANCELED : 0;
}

void perf_worker_fail(struct perf_worker *w, int rc, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->err, sizeof(w->err), fmt, ap);
        va_end(ap);
        w->rc = rc ? rc : -EIO;
        atomic_fetch_add(&perf_run.failed, 1);
}

void perf_fill_pattern(void *buf, uint32_t len, uint64_t seed)
{
        uint64_t *p = buf;
        for (uint32_t i = 0; i < len / 8; i++)
                p[i] = seed ^ (0x736c617465ULL + i);
}

#define VERIFY_MAGIC 0x594649564554414cULL /* "LATEVIFY" */

static uint64_t verify_word(uint64_t lba, uint64_t seq, uint32_t i)
{
        uint64_t x = (lba * 0x9e3779b97f4a7c15ULL) ^ (seq + i) * 0xbf58476d1ce4e5b9ULL;
        return x ^ (x >> 31);
}

void perf_verify_fill(void *buf, uint32_t len, uint32_t lba_size, uint64_t lba, uint64_t seq)
{
        for (uint32_t off = 0; off + lba_size <= len; off += lba_size, lba++) {
                uint64_t *p = (uint64_t *)((uint8_t *)buf + off);
                p[0] = VERIFY_MAGIC;
                p[1] = lba;
                p[2] = seq;
                for (uint32_t i = 3; i < lba_size / 8; i++)
                        p[i] = verify_word(lba, seq, i);
        }
}

uint32_t perf_verify_check(const void *buf, uint32_t len, uint32_t lba_size, uint64_t lba)
{
        uint32_t blk = 0;
        for (uint32_t off = 0; off + lba_size <= len; off += lba_size, lba++, blk++) {
                const uint64_t *p = (const uint64_t *)((const uint8_t *)buf + off);
                bool ok = p[0] == VERIFY_MAGIC && p[1] == lba;
                for (uint32_t i = 3; ok && i < lba_size / 8; i++)
                        ok = p[i] == verify_word(lba, p[2], i);
                if (!ok) {
                        bool zero = true;
                        for (uint32_t i = 0; zero && i < lba_size / 8; i++)
                                zero = p[i] == 0;
                        if (!zero)
                                return blk + 1;
                        atomic_fetch_add(&perf_run.unwritten, 1);
                }
                atomic_fetch_add(&perf_run.verified, 1);
        }
        return 0;
}

static uint8_t *pi_block(uint8_t *buf, const struct perf_geom *g, uint32_t i)
{
        return buf + (size_t)i * (g->lba_size + g->md_size);
}

void perf_pi_fill(struct perf_worker *w, uint8_t *buf, uint32_t nblocks, uint64_t lba, uint64_t seq)
{
        const struct perf_geom *g = w->g;
        if (w->o->verify)
                for (uint32_t i = 0; i < nblocks; i++)
                        perf_verify_fill(pi_block(buf, g, i), g->lba_size, g->lba_size, lba + i,
                                         seq);
        struct core_pi_tags t = {.ref = lba, .app = PERF_PI_APPTAG};
        core_pi_generate(&g->pi, (struct core_pi_buf){buf, NULL}, nblocks, &t);
}

uint32_t perf_pi_check(struct perf_worker *w, const uint8_t *buf, uint32_t nblocks, uint64_t lba)
{
        const struct perf_geom *g = w->g;
        struct core_pi_check c = {.flags = CORE_PI_CHK_GUARD | CORE_PI_CHK_APP | CORE_PI_CHK_REF,
                                  .ref = lba,
                                  .app = PERF_PI_APPTAG,
                                  .app_mask = 0xffff,
                                  .lba = lba};
        struct core_pi_err e;
        if (core_pi_verify(&g->pi, (struct core_pi_buf){(uint8_t *)buf, NULL}, nblocks, &c, &e) !=
            CORE_OK) {
                if (!w->st.pi_host)
                        fprintf(stderr,
                                "slate-perf: queue %u: LBA %llu: %s check failed (expected "
                                "0x%llx, read 0x%llx)\n",
                                w->id, (unsigned long long)e.lba,
                                e.status == CORE_E_PI_GUARD    ? "guard"
                                : e.status == CORE_E_PI_APPTAG ? "application tag"
                                                               : "reference tag",
                                (unsigned long long)e.expected, (unsigned long long)e.actual);
                w->st.pi_host++;
                return PERF_PI_BAD;
        }
        if (w->o->verify)
                for (uint32_t i = 0; i < nblocks; i++)
                        if (perf_verify_check(pi_block((uint8_t *)buf, g, i), g->lba_size,
                                              g->lba_size, lba + i))
                                return i + 1;
        return 0;
}

static void *worker_main(void *arg)
{
        struct perf_worker *w = arg;
        extern const struct perf_transport *perf_tr;
        if (w->o->ncpus) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(w->o->cpus[w->id % w->o->ncpus], &set);
                pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
        }
        perf_tr->worker(w);
        return NULL;
}

const struct perf_transport *perf_tr;

static void stats_add(struct perf_stats *d, const struct perf_stats *s)
{
        d->reads += s->reads;
        d->writes += s->writes;
        d->errors += s->errors;
        d->pi_guard += s->pi_guard;
        d->pi_app += s->pi_app;
        d->pi_ref += s->pi_ref;
        d->pi_host += s->pi_host;
        d->read_bytes += s->read_bytes;
        d->write_bytes += s->write_bytes;
        d->spins += s->spins;
        d->sleeps += s->sleeps;
        perf_hist_merge(&d->lat, &s->lat);
        perf_hist_merge(&d->rlat, &s->rlat);
        perf_hist_merge(&d->wlat, &s->wlat);
}

static json_t *lat_json(const struct perf_hist *h)
{
        return json_pack(
            "{s:I,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "count", (json_int_t)h->count, "mean_us",
            perf_hist_mean(h) / 1e3, "min_us", h->count ? (double)h->min / 1e3 : 0.0, "p50_us",
            (double)perf_hist_percentile(h, 50) / 1e3, "p99_us",
            (double)perf_hist_percentile(h, 99) / 1e3, "p99_9_us",
            (double)perf_hist_percentile(h, 99.9) / 1e3, "max_us", (double)h->max / 1e3,
            "p99_99_us", (double)perf_hist_percentile(h, 99.99) / 1e3);
}

static void print_lat(const char *what, const struct perf_hist *h)
{
        if (!h->count)
                return;
        printf("  %-6s lat (us): mean %.1f  min %.1f  p50 %.1f  p99 %.1f  p99.9 %.1f  max %.1f\n",
               what, perf_hist_mean(h) / 1e3, (double)h->min / 1e3,
               (double)perf_hist_percentile(h, 50) / 1e3, (double)perf_hist_percentile(h, 99) / 1e3,
               (double)perf_hist_percentile(h, 99.9) / 1e3, (double)h->max / 1e3);
}

int main(int argc, char **argv)
{
        static struct perf_opts o = {
            .transport = PERF_NVME_TCP,
            .addr = "127.0.0.1",
            .port = "4420",
            .hostnqn = "nqn.2026-12.io.slate:slate-perf",
            .nsid = 1,
            .qd = 32,
            .bs = 4096,
            .read_pct = 100,
            .random = true,
            .duration = 10,
            .nqueues = 1,
            .kato_ms = 10000,
        };
        enum {
                O_HDGST = 256,
                O_DDGST,
                O_CPU,
                O_JSON,
                O_HOSTNQN,
                O_NSID,
                O_KATO,
                O_POLL,
                O_WORKLOAD,
                O_HOT_SPAN,
                O_HOT_BS,
                O_BYTES,
                O_PLACE,
                O_TLS_PSK,
                O_TLS_ID,
                O_VERIFY,
                O_PI
        };
        static const struct option lopts[] = {
            {"transport", required_argument, 0, 't'},
            {"addr", required_argument, 0, 'a'},
            {"port", required_argument, 0, 'p'},
            {"nqn", required_argument, 0, 'n'},
            {"url", required_argument, 0, 'u'},
            {"qd", required_argument, 0, 'q'},
            {"bs", required_argument, 0, 'b'},
            {"mix", required_argument, 0, 'M'},
            {"pattern", required_argument, 0, 'r'},
            {"duration", required_argument, 0, 'd'},
            {"queues", required_argument, 0, 'Q'},
            {"span", required_argument, 0, 's'},
            {"hdgst", no_argument, 0, O_HDGST},
            {"ddgst", no_argument, 0, O_DDGST},
            {"cpu", required_argument, 0, O_CPU},
            {"json", no_argument, 0, O_JSON},
            {"hostnqn", required_argument, 0, O_HOSTNQN},
            {"nsid", required_argument, 0, O_NSID},
            {"kato", required_argument, 0, O_KATO},
            {"poll", optional_argument, 0, O_POLL},
            {"workload", required_argument, 0, O_WORKLOAD},
            {"hot-span", required_argument, 0, O_HOT_SPAN},
            {"hot-bs", required_argument, 0, O_HOT_BS},
            {"bytes", required_argument, 0, O_BYTES},
            {"place", required_argument, 0, O_PLACE},
            {"tls-psk", required_argument, 0, O_TLS_PSK},
            {"tls-identity", required_argument, 0, O_TLS_ID},
            {"verify", no_argument, 0, O_VERIFY},
            {"pi", optional_argument, 0, O_PI},
            {"verbose", no_argument, 0, 'v'},
            {"help", no_argument, 0, 'h'},
            {0, 0, 0, 0},
        };
        int c;
        uint64_t v;
        unsigned u;
        bool dur_set = false;
        while ((c = getopt_long(argc, argv, "t:a:p:n:u:q:b:M:r:d:Q:s:vh", lopts, NULL)) != -1) {
                switch (c) {
                case 't':
                        if (!strcmp(optarg, "nvme-tcp") || !strcmp(optarg, "nvmf") ||
                            !strcmp(optarg, "tcp"))
                                o.transport = PERF_NVME_TCP;
                        else if (!strcmp(optarg, "iscsi"))
                                o.transport = PERF_ISCSI;
                        else
                                goto bad;
                        break;
                case 'a':
                        o.addr = optarg;
                        break;
                case 'p':
                        o.port = optarg;
                        break;
                case 'n':
                        o.subnqn = optarg;
                        break;
                case 'u':
                        o.url = optarg;
                        break;
                case 'q':
                        if (parse_uint(optarg, 1, 4096, &o.qd))
                                goto bad;
                        break;
                case 'b':
                        if (parse_size(optarg, &v) || v < 512 || v > (64u << 20))
                                goto bad;
                        o.bs = (uint32_t)v;
                        break;
                case 'M':
                        if (parse_uint(optarg, 0, 100, &o.read_pct))
                                goto bad;
                        break;
                case 'r':
                        if (!strcmp(optarg, "rand") || !strcmp(optarg, "random"))
                                o.random = true;
                        else if (!strcmp(optarg, "seq") || !strcmp(optarg, "sequential"))
                                o.random = false;
                        else
                                goto bad;
                        break;
                case 'd': {
                        dur_set = true;
                        char *end;
                        o.duration = strtod(optarg, &end);
                        if (*end || !(o.duration > 0) || o.duration > 1e6)
                                goto bad;
                        break;
                }
                case 'Q':
                        if (parse_uint(optarg, 1, 64, &o.nqueues))
                                goto bad;
                        break;
                case 's':
                        if (parse_size(optarg, &o.span_bytes))
                                goto bad;
                        break;
                case O_HDGST:
                        o.hdgst = true;
                        break;
                case O_DDGST:
                        o.ddgst = true;
                        break;
                case O_CPU:
                        if (parse_cpus(optarg, &o))
                                goto bad;
                        break;
                case O_JSON:
                        o.json = true;
                        break;
                case O_HOSTNQN:
                        o.hostnqn = optarg;
                        break;
                case O_NSID:
                        if (parse_uint(optarg, 1, 0xfffffffeu, &u))
                                goto bad;
                        o.nsid = u;
                        break;
                case O_KATO:
                        if (parse_uint(optarg, 0, 3600000, &o.kato_ms))
                                goto bad;
                        break;
                case O_POLL:
                        if (perf_poll_parse(optarg, &o))
                                goto bad;
                        break;
                case O_WORKLOAD:
                        if (!strcmp(optarg, "lifetimes"))
                                o.lifetimes = true;
                        else if (strcmp(optarg, "plain"))
                                goto bad;
                        break;
                case O_HOT_SPAN:
                        if (parse_size(optarg, &o.hot_bytes) || o.hot_bytes == 0)
                                goto bad;
                        break;
                case O_HOT_BS:
                        if (parse_size(optarg, &v) || v < 512 || v > (64u << 20))
                                goto bad;
                        o.hot_bs = (uint32_t)v;
                        break;
                case O_BYTES:
                        if (parse_size(optarg, &o.write_total) || o.write_total == 0)
                                goto bad;
                        break;
                case O_PLACE:
                        if (!strcmp(optarg, "none"))
                                o.place = PERF_PLACE_NONE;
                        else if (!strcmp(optarg, "stream"))
                                o.place = PERF_PLACE_STREAM;
                        else if (!strcmp(optarg, "group"))
                                o.place = PERF_PLACE_GROUP;
                        else if (!strcmp(optarg, "fdp"))
                                o.place = PERF_PLACE_FDP;
                        else
                                goto bad;
                        break;
                case O_TLS_PSK:
                        o.tls_psk = optarg;
                        break;
                case O_TLS_ID:
                        o.tls_identity = optarg;
                        break;
                case O_VERIFY:
                        o.verify = true;
                        break;
                case O_PI:
                        if (!optarg || !strcmp(optarg, "host"))
                                o.pi = PERF_PI_HOST;
                        else if (!strcmp(optarg, "pract"))
                                o.pi = PERF_PI_PRACT;
                        else
                                goto bad;
                        break;
                case 'v':
                        o.verbose = true;
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
                continue;
        bad:
                fprintf(stderr, "slate-perf: bad value for -%c: %s\n", c < 256 ? c : '-', optarg);
                return 2;
        }
        if (optind != argc) {
                usage(stderr);
                return 2;
        }
        if (o.transport == PERF_NVME_TCP && !o.subnqn) {
                fprintf(stderr, "slate-perf: NVMe/TCP needs -n SUBSYSTEM-NQN\n");
                return 2;
        }
        if (o.transport == PERF_ISCSI && !o.url) {
                fprintf(stderr, "slate-perf: iSCSI needs -u iscsi://HOST[:PORT]/IQN/LUN\n");
                return 2;
        }
        if (o.ddgst && o.transport == PERF_ISCSI) {
                fprintf(stderr, "slate-perf: libiscsi has no data digest; use --hdgst only\n");
                return 2;
        }
        if (o.write_total && !dur_set)
                o.duration = 86400; /* --bytes decides when to stop */
        if (o.lifetimes) {
                if (o.nqueues < 2)
                        o.nqueues = 2; /* one cold queue, at least one hot */
                o.read_pct = 0;
                if (!o.hot_bs)
                        o.hot_bs = 4096;
                if (!o.hot_bytes)
                        o.hot_bytes = 16u << 20;
        } else if (o.place != PERF_PLACE_NONE || o.hot_bs || o.hot_bytes) {
                fprintf(stderr, "slate-perf: --place, --hot-bs and --hot-span need "
                                "--workload lifetimes\n");
                return 2;
        }
        if ((o.tls_psk || o.tls_identity || o.verify) && o.transport != PERF_NVME_TCP) {
                fprintf(stderr,
                        "slate-perf: --tls-psk, --tls-identity and --verify are NVMe/TCP's\n");
                return 2;
        }
        if (o.pi && o.place != PERF_PLACE_NONE) {
                fprintf(stderr, "slate-perf: --pi does not go with --place\n");
                return 2;
        }
        if (o.pi == PERF_PI_PRACT && o.transport != PERF_NVME_TCP) {
                fprintf(stderr, "slate-perf: --pi=pract is NVMe's (PRACT)\n");
                return 2;
        }
        if (o.tls_identity && !o.tls_psk) {
                fprintf(stderr, "slate-perf: --tls-identity needs --tls-psk\n");
                return 2;
        }
        if ((o.place == PERF_PLACE_GROUP && o.transport != PERF_ISCSI) ||
            (o.place == PERF_PLACE_FDP && o.transport != PERF_NVME_TCP)) {
                fprintf(stderr, "slate-perf: --place group is SCSI's, --place fdp NVMe's\n");
                return 2;
        }
        perf_tr = o.transport == PERF_NVME_TCP ? &perf_nvme_tcp : &perf_iscsi;

        struct perf_geom g = {0};
        void *tctx = NULL;
        int rc = perf_tr->probe(&o, &g, &tctx);
        if (rc) {
                fprintf(stderr, "slate-perf: cannot reach the target: %s\n", strerror(-rc));
                return 1;
        }
        if (o.bs % g.lba_size) {
                fprintf(stderr, "slate-perf: I/O size %u is not a multiple of the %u-byte block\n",
                        o.bs, g.lba_size);
                perf_tr->close(tctx);
                return 1;
        }
        if (g.max_io && o.bs > g.max_io) {
                fprintf(stderr, "slate-perf: I/O size %u exceeds the target's limit %u\n", o.bs,
                        g.max_io);
                perf_tr->close(tctx);
                return 1;
        }
        uint64_t span_blocks = g.nblocks;
        if (o.span_bytes && o.span_bytes / g.lba_size < span_blocks)
                span_blocks = o.span_bytes / g.lba_size;
        uint32_t io_blocks = o.bs / g.lba_size;
        uint64_t per_worker = o.random ? span_blocks : span_blocks / o.nqueues;
        uint64_t hot_blocks = o.hot_bytes / g.lba_size;
        if (o.lifetimes && (o.hot_bs % g.lba_size || hot_blocks < o.hot_bs / g.lba_size ||
                            span_blocks < hot_blocks + io_blocks)) {
                fprintf(stderr,
                        "slate-perf: the hot region (%llu bytes, I/O %u) and one cold "
                        "I/O must fit the namespace in whole blocks\n",
                        (unsigned long long)o.hot_bytes, o.hot_bs);
                perf_tr->close(tctx);
                return 1;
        }
        if (per_worker < io_blocks) {
                fprintf(stderr, "slate-perf: namespace too small for %u queues of %u-byte I/O\n",
                        o.nqueues, o.bs);
                perf_tr->close(tctx);
                return 1;
        }

        struct perf_worker *ws = calloc(o.nqueues, sizeof(*ws));
        pthread_t *th = calloc(o.nqueues, sizeof(*th));
        if (!ws || !th) {
                perf_tr->close(tctx);
                return 1;
        }
        atomic_store(&perf_run.end_ns, UINT64_MAX);
        uint64_t seed = perf_now_ns() ^ ((uint64_t)getpid() << 32);
        for (unsigned i = 0; i < o.nqueues; i++) {
                struct perf_worker *w = &ws[i];
                w->id = i;
                w->o = &o;
                w->g = &g;
                w->tctx = tctx;
                w->rng = (seed + 0x9E3779B97F4A7C15ULL * (i + 1)) | 1;
                w->io_blocks = io_blocks;
                w->bs = o.bs;
                w->region_lo = o.random ? 0 : (uint64_t)i * per_worker;
                w->region_blocks = per_worker;
                if (o.lifetimes) {
                        /*
                         * Queue 0: cold, sequential past the hot region; the
                         * others: hot, random in it.  Tags: hot 1, cold 2
                         * (SCSI: the streams opened for them; GROUP NUMBER
                         * 2 = short and 5 = extreme lifetime, as Linux maps
                         * its write-lifetime hints).
                         */
                        w->cold = i == 0;
                        w->bs = w->cold ? o.bs : o.hot_bs;
                        w->io_blocks = w->bs / g.lba_size;
                        w->region_lo = w->cold ? hot_blocks : 0;
                        w->region_blocks = w->cold ? span_blocks - hot_blocks : hot_blocks;
                        w->seq_next = 0;
                        if (o.place == PERF_PLACE_GROUP)
                                w->tag = w->cold ? 5 : 2;
                        else if (o.place != PERF_PLACE_NONE)
                                w->tag = w->cold ? 2 : 1;
                }
                perf_hist_init(&w->st.lat);
                perf_hist_init(&w->st.rlat);
                perf_hist_init(&w->st.wlat);
        }
        unsigned started = 0;
        for (; started < o.nqueues; started++)
                if (pthread_create(&th[started], NULL, worker_main, &ws[started])) {
                        atomic_fetch_add(&perf_run.failed, 1);
                        break;
                }
        while (atomic_load(&perf_run.ready) + atomic_load(&perf_run.failed) < (int)started)
                usleep(1000);
        uint64_t start = perf_now_ns();
        atomic_store(&perf_run.start_ns, start);
        atomic_store(&perf_run.end_ns, start + (uint64_t)(o.duration * 1e9));
        if (atomic_load(&perf_run.failed))
                atomic_store(&perf_run.end_ns, 0);
        atomic_store(&perf_run.go, true);
        for (unsigned i = 0; i < started; i++)
                pthread_join(th[i], NULL);
        uint64_t stop = perf_now_ns();
        perf_tr->close(tctx);

        int status = 0;
        struct perf_stats tot = {0};
        perf_hist_init(&tot.lat);
        perf_hist_init(&tot.rlat);
        perf_hist_init(&tot.wlat);
        for (unsigned i = 0; i < o.nqueues; i++) {
                if (ws[i].rc) {
                        fprintf(stderr, "slate-perf: queue %u: %s\n", i,
                                ws[i].err[0] ? ws[i].err : strerror(-ws[i].rc));
                        status = 1;
                }
                stats_add(&tot, &ws[i].st);
        }
        if (started < o.nqueues)
                status = 1;
        double secs = o.duration;
        if (o.write_total) /* stopped by --bytes (or the duration, whichever came first) */
                secs = (double)(stop - start) / 1e9;
        uint64_t ios = tot.reads + tot.writes;
        double iops = (double)ios / secs;
        double mibs = (double)(tot.read_bytes + tot.write_bytes) / secs / (1024.0 * 1024.0);
        if (tot.errors)
                status = 1;
        /* Our own CPU per I/O, to show whether the load generator is the bottleneck. */
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        double cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
        double cpu_us_io = ios ? cpu_s * 1e6 / (double)ios : 0.0;

        if (o.json) {
                json_t *j = json_pack(
                    "{s:s,s:s,s:{s:i,s:i,s:i,s:s,s:i,s:f,s:b,s:b},s:{s:i,s:I},s:f,s:I,s:I,s:I,"
                    "s:f,s:f,s:f,s:o,s:o,s:o,s:i,s:f}",
                    "transport", perf_tr->name, "target", g.desc, "params", "qd", (int)o.qd, "bs",
                    (int)o.bs, "read_pct", (int)o.read_pct, "pattern", o.random ? "rand" : "seq",
                    "queues", (int)o.nqueues, "duration_s", o.duration, "hdgst", o.hdgst, "ddgst",
                    o.ddgst, "geometry", "lba_size", (int)g.lba_size, "nblocks",
                    (json_int_t)g.nblocks, "seconds", secs, "ios", (json_int_t)ios, "reads",
                    (json_int_t)tot.reads, "writes", (json_int_t)tot.writes, "iops", iops, "mib_s",
                    mibs, "read_iops", (double)tot.reads / secs, "latency", lat_json(&tot.lat),
                    "read_latency", lat_json(&tot.rlat), "write_latency", lat_json(&tot.wlat),
                    "errors", (int)tot.errors, "initiator_cpu_us_per_io", cpu_us_io);
                if (j && o.pi)
                        json_object_set_new(
                            j, "pi",
                            json_pack("{s:s,s:i,s:i,s:s,s:I,s:I,s:I,s:I}", "mode",
                                      o.pi == PERF_PI_PRACT ? "pract" : "host", "type",
                                      (int)g.pi.type, "md_size", (int)g.md_size, "guard",
                                      g.pi.guard == CORE_PI_GUARD_CRC16    ? "16b"
                                      : g.pi.guard == CORE_PI_GUARD_CRC32C ? "32b"
                                                                           : "64b",
                                      "guard_errors", (json_int_t)tot.pi_guard, "apptag_errors",
                                      (json_int_t)tot.pi_app, "reftag_errors",
                                      (json_int_t)tot.pi_ref, "initiator_check_errors",
                                      (json_int_t)tot.pi_host));
                if (j)
                        json_object_set_new(
                            j, "poll",
                            json_pack(
                                "{s:s,s:i,s:I,s:I,s:f,s:f}", "mode", perf_poll_name(o.poll),
                                "budget_us", o.poll == PERF_POLL_ADAPTIVE ? (int)o.poll_us : 0,
                                "spins", (json_int_t)tot.spins, "sleeps", (json_int_t)tot.sleeps,
                                "spins_per_io", ios ? (double)tot.spins / (double)ios : 0.0,
                                "sleeps_per_io", ios ? (double)tot.sleeps / (double)ios : 0.0));
                if (j) {
                        json_dumpf(j, stdout,
                                   JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
                        putchar('\n');
                        json_decref(j);
                }
        } else {
                printf("slate-perf %s %s: %s %u%% read, bs %u, qd %u x %u queues, %.1fs%s%s\n",
                       perf_tr->name, g.desc, o.random ? "random" : "sequential", o.read_pct, o.bs,
                       o.qd, o.nqueues, secs, o.hdgst ? ", hdgst" : "", o.ddgst ? ", ddgst" : "");
                printf("  IOPS %.0f  MiB/s %.1f  (reads %llu, writes %llu, errors %llu)\n", iops,
                       mibs, (unsigned long long)tot.reads, (unsigned long long)tot.writes,
                       (unsigned long long)tot.errors);
                print_lat("all", &tot.lat);
                printf("  slate-perf CPU: %.2f us per I/O (%.2f s)\n", cpu_us_io, cpu_s);
                if (o.poll == PERF_POLL_ADAPTIVE)
                        printf("  slate-perf polling: adaptive, %u us", o.poll_us);
                else
                        printf("  slate-perf polling: %s", perf_poll_name(o.poll));
                printf(" (%.2f spins and %.2f sleeps per I/O)\n",
                       ios ? (double)tot.spins / (double)ios : 0.0,
                       ios ? (double)tot.sleeps / (double)ios : 0.0);
                if (tot.reads && tot.writes) {
                        print_lat("read", &tot.rlat);
                        print_lat("write", &tot.wlat);
                }
                if (o.pi)
                        printf("  pi: type %u, %u-byte metadata, %s guard, %s; check failures: "
                               "guard %llu, application tag %llu, reference tag %llu, "
                               "initiator %llu\n",
                               g.pi.type, g.md_size,
                               g.pi.guard == CORE_PI_GUARD_CRC16    ? "16b"
                               : g.pi.guard == CORE_PI_GUARD_CRC32C ? "32b"
                                                                    : "64b",
                               o.pi == PERF_PI_PRACT ? "target inserts/strips"
                                                     : "initiator generates/checks",
                               (unsigned long long)tot.pi_guard, (unsigned long long)tot.pi_app,
                               (unsigned long long)tot.pi_ref, (unsigned long long)tot.pi_host);
                if (o.verify)
                        printf("  verify: %llu blocks read back and checked (%llu never written)\n",
                               (unsigned long long)atomic_load(&perf_run.verified),
                               (unsigned long long)atomic_load(&perf_run.unwritten));
        }
        free(ws);
        free(th);
        return status;
}
