/*
 * durable: the client half of the crash-durability test (DESIGN.md
 * "Durability and metadata": an acknowledged write with FUA, or one
 * followed by an acknowledged flush, survives kill -9 of slated).  Uses
 * libiscsi's synchronous API; SBC-4 WRITE(10) with FUA=1, plain WRITE(10)
 * followed by SYNCHRONIZE CACHE(10), and READ(10).
 *
 *   durable write  -u URL -j JOURNAL -g GEN -n COUNT [-w WINDOW] [-s]
 *   durable verify -u URL -j JOURNAL
 *
 * write: writes COUNT patterned writes (1-8 blocks each, LBAs in the first
 * WINDOW blocks so blocks are overwritten across generations), half with
 * FUA, half in batches that are acknowledged only once a SYNCHRONIZE CACHE
 * returns GOOD; every acknowledged block is appended to JOURNAL as
 * "lba gen seq".  With -s (stream) losing the connection is expected (the
 * script kills slated meanwhile) and is not an error.
 * verify: reads every journaled LBA and checks that it holds the journaled
 * write or a later one (a later, unacknowledged write may have landed), and
 * that each block is a whole pattern (no torn or foreign data).
 *
 * Each block starts with a header (magic, lba, gen, seq); the rest is a
 * deterministic function of it.  Exit 0 ok, 1 verification failure, 2 error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#define MAGIC 0x534c4154454455ull /* "SLATEDU" */

static struct iscsi_context *g_iscsi;
static int g_lun;
static uint32_t g_bs = 512;
static uint64_t g_nblocks;

static uint64_t mix(uint64_t x)
{
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53ull;
        x ^= x >> 33;
        return x;
}

static void fill(uint8_t *b, uint64_t lba, uint32_t gen, uint64_t seq)
{
        uint64_t w[4] = {MAGIC, lba, gen, seq};

        memcpy(b, w, sizeof(w));
        for (uint32_t i = sizeof(w); i < g_bs; i += 8) {
                uint64_t v = mix(lba * 0x9e3779b97f4a7c15ull ^ ((uint64_t)gen << 40) ^ seq ^ i);
                memcpy(b + i, &v, 8);
        }
}

/* Decode a block; false if it is not one whole pattern for this LBA. */
static bool decode(const uint8_t *b, uint64_t lba, uint32_t *gen, uint64_t *seq)
{
        uint64_t w[4];
        uint8_t *ref;
        bool ok;

        memcpy(w, b, sizeof(w));
        if (w[0] != MAGIC || w[1] != lba)
                return false;
        *gen = (uint32_t)w[2];
        *seq = w[3];
        ref = malloc(g_bs);
        if (!ref)
                return false;
        fill(ref, lba, *gen, *seq);
        ok = !memcmp(ref, b, g_bs);
        free(ref);
        return ok;
}

static bool good(struct scsi_task *t, const char *what)
{
        if (!t) {
                fprintf(stderr, "%s: %s\n", what, iscsi_get_error(g_iscsi));
                return false;
        }
        if (t->status != SCSI_STATUS_GOOD) {
                fprintf(stderr, "%s: status 0x%02x sense %s/%s\n", what, t->status,
                        scsi_sense_key_str(t->sense.key), scsi_sense_ascq_str(t->sense.ascq));
                scsi_free_scsi_task(t);
                return false;
        }
        return true;
}

static int connect_url(const char *urlstr)
{
        struct iscsi_url *url;
        struct scsi_task *t;
        int i;

        g_iscsi = iscsi_create_context("iqn.2024-01.org.slate:durable");
        if (!g_iscsi)
                return -ENOMEM;
        url = iscsi_parse_full_url(g_iscsi, urlstr);
        if (!url) {
                fprintf(stderr, "bad URL %s: %s\n", urlstr, iscsi_get_error(g_iscsi));
                return -EINVAL;
        }
        iscsi_set_targetname(g_iscsi, url->target);
        iscsi_set_session_type(g_iscsi, ISCSI_SESSION_NORMAL);
        iscsi_set_header_digest(g_iscsi, ISCSI_HEADER_DIGEST_NONE);
        iscsi_set_noautoreconnect(g_iscsi, 1);
        iscsi_set_timeout(g_iscsi, 30);
        g_lun = url->lun;
        if (iscsi_full_connect_sync(g_iscsi, url->portal, url->lun)) {
                fprintf(stderr, "login to %s failed: %s\n", urlstr, iscsi_get_error(g_iscsi));
                iscsi_destroy_url(url);
                return -ECONNREFUSED;
        }
        iscsi_destroy_url(url);
        for (i = 0; i < 5; i++) { /* swallow the power-on unit attention */
                t = iscsi_testunitready_sync(g_iscsi, g_lun);
                if (t && t->status == SCSI_STATUS_GOOD) {
                        scsi_free_scsi_task(t);
                        break;
                }
                if (t)
                        scsi_free_scsi_task(t);
        }
        t = iscsi_readcapacity16_sync(g_iscsi, g_lun);
        if (!good(t, "READ CAPACITY(16)"))
                return -EIO;
        struct scsi_readcapacity16 *rc = scsi_datain_unmarshall(t);
        if (!rc) {
                scsi_free_scsi_task(t);
                return -EIO;
        }
        g_bs = rc->block_length;
        g_nblocks = rc->returned_lba + 1;
        scsi_free_scsi_task(t);
        if (g_bs < 64 || g_bs > 65536) {
                fprintf(stderr, "odd block size %u\n", g_bs);
                return -EINVAL;
        }
        return 0;
}

struct rec {
        uint64_t lba, seq;
        uint32_t gen;
};

static uint64_t journal_max_seq(const char *path)
{
        FILE *f = fopen(path, "r");
        uint64_t lba, seq, max = 0;
        uint32_t gen;

        if (!f)
                return 0;
        while (fscanf(f, "%" SCNu64 " %" SCNu32 " %" SCNu64, &lba, &gen, &seq) == 3)
                if (seq > max)
                        max = seq;
        fclose(f);
        return max;
}

static int do_write(const char *journal, uint32_t gen, unsigned count, uint64_t window, bool stream)
{
        FILE *j = fopen(journal, "a");
        uint64_t seq = journal_max_seq(journal) + 1000000; /* later than anything before */
        struct rec pending[64 * 8];
        unsigned npend = 0, acked = 0, i;
        uint8_t *buf;

        if (!j)
                return 2;
        setvbuf(j, NULL, _IOLBF, 0);
        if (window > g_nblocks)
                window = g_nblocks;
        buf = malloc((size_t)g_bs * 8);
        if (!buf)
                return 2;
        srand((unsigned)(gen * 7919u + (unsigned)time(NULL)));
        for (i = 0; i < count; i++) {
                uint32_t nb = 1 + (uint32_t)(rand() % 8);
                uint64_t lba = (uint64_t)rand() % (window - nb);
                bool fua = (i / 16) % 2 == 0; /* alternate runs of FUA and write+sync */
                struct scsi_task *t;
                uint32_t b;

                for (b = 0; b < nb; b++)
                        fill(buf + (size_t)b * g_bs, lba + b, gen, seq + b);
                t = iscsi_write10_sync(g_iscsi, g_lun, (uint32_t)lba, buf, nb * g_bs, (int)g_bs, 0,
                                       0, fua, 0, 0);
                if (!good(t, fua ? "WRITE(10) FUA" : "WRITE(10)"))
                        goto lost;
                scsi_free_scsi_task(t);
                if (fua) {
                        for (b = 0; b < nb; b++)
                                fprintf(j, "%" PRIu64 " %u %" PRIu64 "\n", lba + b, gen, seq + b);
                        acked += nb;
                } else {
                        for (b = 0; b < nb; b++)
                                pending[npend++] = (struct rec){lba + b, seq + b, gen};
                }
                seq += nb;
                /* A batch of plain writes counts only once the flush is acknowledged. */
                if (npend && (i % 16 == 15 || i + 1 == count)) {
                        t = iscsi_synchronizecache10_sync(g_iscsi, g_lun, 0, 0, 0, 0);
                        if (!good(t, "SYNCHRONIZE CACHE(10)"))
                                goto lost;
                        scsi_free_scsi_task(t);
                        for (b = 0; b < npend; b++)
                                fprintf(j, "%" PRIu64 " %u %" PRIu64 "\n", pending[b].lba,
                                        pending[b].gen, pending[b].seq);
                        acked += npend;
                        npend = 0;
                }
        }
        fclose(j);
        free(buf);
        printf("wrote %u acknowledged blocks (gen %u)\n", acked, gen);
        iscsi_logout_sync(g_iscsi);
        return 0;
lost:
        fclose(j);
        free(buf);
        printf("stopped after %u acknowledged blocks (gen %u, %u unacknowledged pending)\n", acked,
               gen, npend);
        return stream ? 0 : 2;
}

static int cmp_rec(const void *a, const void *b)
{
        const struct rec *x = a, *y = b;

        if (x->lba != y->lba)
                return x->lba < y->lba ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int do_verify(const char *journal)
{
        FILE *f = fopen(journal, "r");
        struct rec *r = NULL;
        size_t n = 0, cap = 0, i, checked = 0, newer = 0, bad = 0;
        uint64_t lba, seq;
        uint32_t gen;

        if (!f) {
                perror(journal);
                return 2;
        }
        while (fscanf(f, "%" SCNu64 " %" SCNu32 " %" SCNu64, &lba, &gen, &seq) == 3) {
                if (n == cap) {
                        cap = cap ? cap * 2 : 4096;
                        r = realloc(r, cap * sizeof(*r));
                        if (!r)
                                return 2;
                }
                r[n++] = (struct rec){lba, seq, gen};
        }
        fclose(f);
        qsort(r, n, sizeof(*r), cmp_rec);
        for (i = 0; i < n; i++) {
                struct scsi_task *t;
                uint32_t g;
                uint64_t s;

                if (i + 1 < n && r[i + 1].lba == r[i].lba)
                        continue; /* only the newest acknowledged write per LBA matters */
                t = iscsi_read10_sync(g_iscsi, g_lun, (uint32_t)r[i].lba, g_bs, (int)g_bs, 0, 0, 0,
                                      0, 0);
                if (!good(t, "READ(10)")) {
                        free(r);
                        return 2;
                }
                checked++;
                if (t->datain.size < (int)g_bs || !decode(t->datain.data, r[i].lba, &g, &s)) {
                        if (bad++ < 10)
                                fprintf(stderr,
                                        "LBA %" PRIu64 ": not a whole pattern (expected gen %u seq "
                                        "%" PRIu64 ")\n",
                                        r[i].lba, r[i].gen, r[i].seq);
                } else if (s < r[i].seq) {
                        if (bad++ < 10)
                                fprintf(stderr,
                                        "LBA %" PRIu64 ": holds gen %u seq %" PRIu64
                                        ", older than acknowledged gen %u seq %" PRIu64 "\n",
                                        r[i].lba, g, s, r[i].gen, r[i].seq);
                } else if (s > r[i].seq) {
                        newer++;
                }
                scsi_free_scsi_task(t);
        }
        free(r);
        printf("verified %zu LBAs from %zu acknowledged block writes: %zu lost or torn, %zu hold a "
               "later unacknowledged write\n",
               checked, n, bad, newer);
        iscsi_logout_sync(g_iscsi);
        return bad ? 1 : (checked ? 0 : 1);
}

int main(int argc, char **argv)
{
        const char *url = NULL, *journal = NULL, *mode;
        unsigned count = 1000, gen = 1;
        uint64_t window = 16384;
        bool stream = false;
        int c;

        if (argc < 2) {
                fprintf(stderr, "usage: durable write|verify -u URL -j JOURNAL [-g GEN] [-n COUNT] "
                                "[-w WINDOW] [-s]\n");
                return 2;
        }
        mode = argv[1];
        optind = 2;
        while ((c = getopt(argc, argv, "u:j:g:n:w:s")) != -1) {
                switch (c) {
                case 'u':
                        url = optarg;
                        break;
                case 'j':
                        journal = optarg;
                        break;
                case 'g':
                        gen = (unsigned)strtoul(optarg, NULL, 0);
                        break;
                case 'n':
                        count = (unsigned)strtoul(optarg, NULL, 0);
                        break;
                case 'w':
                        window = strtoull(optarg, NULL, 0);
                        break;
                case 's':
                        stream = true;
                        break;
                default:
                        return 2;
                }
        }
        if (!url || !journal)
                return 2;
        if (connect_url(url))
                return 2;
        if (window < 16 || g_nblocks < 16) {
                fprintf(stderr, "namespace too small\n");
                return 2;
        }
        if (!strcmp(mode, "write"))
                return do_write(journal, gen, count, window, stream);
        if (!strcmp(mode, "verify"))
                return do_verify(journal);
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
}
