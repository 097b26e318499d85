/*
 * I/O statistics (core/stats.h): sharded counters, one shard per reactor
 * and one shared, summed by readers; and the registry of hosts the
 * transports count their sessions' and controllers' I/O under.  No
 * standard section: this is what the metrics endpoint, namespace_list and
 * the NVMe SMART log read.
 */
#include "core/stats.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ns.h"
#include "core/req.h"
#include "rt/reactor.h"

static const char *const class_names[CORE_OPC_MAX] = {
    [CORE_OPC_READ] = "read",
    [CORE_OPC_WRITE] = "write",
    [CORE_OPC_FLUSH] = "flush",
    [CORE_OPC_OTHER] = "other",
};

const char *core_op_class_name(enum core_op_class c)
{
        return (unsigned)c < CORE_OPC_MAX ? class_names[c] : "other";
}

enum core_op_class core_op_class_of(enum core_op op)
{
        switch (op) {
        case CORE_OP_READ:
                return CORE_OPC_READ;
        case CORE_OP_WRITE:
        case CORE_OP_WRITE_ZEROES:
        case CORE_OP_COMPARE_AND_WRITE:
        case CORE_OP_ORWRITE:
        case CORE_OP_WRITE_SAME:
        case CORE_OP_DEALLOCATE:
        case CORE_OP_WRITE_SCATTERED:
                return CORE_OPC_WRITE;
        case CORE_OP_FLUSH:
                return CORE_OPC_FLUSH;
        default:
                return CORE_OPC_OTHER;
        }
}

uint64_t core_lat_bucket_le_ns(unsigned i)
{
        if (i >= CORE_LAT_BUCKETS - 1)
                return UINT64_MAX;
        return 1000ull << (i + 2);
}

unsigned core_lat_bucket_index(uint64_t ns)
{
        uint64_t us = ns / 1000 + (ns % 1000 != 0);
        if (us <= 4)
                return 0;
        unsigned k = 64u - (unsigned)__builtin_clzll(us - 1); /* ceil(log2(us)) */
        unsigned i = k - 2;
        return i < CORE_LAT_BUCKETS - 1 ? i : CORE_LAT_BUCKETS - 1;
}

int core_stats_init(struct core_stats *s)
{
        unsigned n = rt_count() + 1;
        void *p = NULL;
        if (posix_memalign(&p, 64, (size_t)n * sizeof(struct core_stats_shard)) != 0)
                return -ENOMEM;
        memset(p, 0, (size_t)n * sizeof(struct core_stats_shard));
        s->shard = p;
        s->nshards = n;
        return 0;
}

void core_stats_fini(struct core_stats *s)
{
        free(s->shard);
        s->shard = NULL;
        s->nshards = 0;
}

void core_stats_sum(const struct core_stats *s, struct core_stats_sum *out)
{
        memset(out, 0, sizeof(*out));
        for (unsigned i = 0; i < s->nshards; i++) {
                const struct core_stats_shard *sh = &s->shard[i];
#define RD(x) atomic_load_explicit(&(x), memory_order_relaxed)
                out->submitted += RD(sh->submitted);
                for (unsigned c = 0; c < CORE_OPC_MAX; c++) {
                        out->ops[c] += RD(sh->ops[c]);
                        out->ok[c] += RD(sh->ok[c]);
                        out->bytes[c] += RD(sh->bytes[c]);
                        out->lat_sum_ns[c] += RD(sh->lat_sum_ns[c]);
                        for (unsigned b = 0; b < CORE_LAT_BUCKETS; b++)
                                out->lat[c][b] += RD(sh->lat[c][b]);
                }
                for (unsigned e = 0; e < CORE_STATUS_MAX; e++)
                        out->errors[e] += RD(sh->errors[e]);
                for (unsigned c = 0; c < CORE_OPC_MAX; c++)
                        out->misaligned[c] += RD(sh->misaligned[c]);
#undef RD
        }
}

uint64_t core_stats_ok(const struct core_stats *s, enum core_op_class c)
{
        uint64_t n = 0;
        for (unsigned i = 0; i < s->nshards; i++)
                n += atomic_load_explicit(&s->shard[i].ok[c], memory_order_relaxed);
        return n;
}

uint64_t core_stats_ops(const struct core_stats *s, enum core_op_class c)
{
        uint64_t n = 0;
        for (unsigned i = 0; i < s->nshards; i++)
                n += atomic_load_explicit(&s->shard[i].ops[c], memory_order_relaxed);
        return n;
}

uint64_t core_stats_misaligned_count(const struct core_stats *s, enum core_op_class c)
{
        uint64_t n = 0;
        for (unsigned i = 0; i < s->nshards; i++)
                n += atomic_load_explicit(&s->shard[i].misaligned[c], memory_order_relaxed);
        return n;
}

uint64_t core_stats_outstanding(const struct core_stats_sum *sum)
{
        uint64_t done = 0;
        for (unsigned c = 0; c < CORE_OPC_MAX; c++)
                done += sum->ops[c];
        return sum->submitted > done ? sum->submitted - done : 0;
}

/*
 * The caller's shard: its reactor's (single writer), else the shared one.
 * Shards are sized when the block is created; a block made before the
 * reactors existed (unit tests) has only the shared one.
 */
static struct core_stats_shard *shard_of(struct core_stats *s, bool *shared)
{
        struct rt_reactor *r = rt_current();
        unsigned i = r ? rt_index(r) : s->nshards - 1;
        if (i >= s->nshards - 1) {
                *shared = true;
                return &s->shard[s->nshards - 1];
        }
        *shared = false;
        return &s->shard[i];
}

static inline void add(_Atomic uint64_t *p, uint64_t v, bool shared)
{
        if (shared)
                atomic_fetch_add_explicit(p, v, memory_order_relaxed);
        else
                atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + v,
                                      memory_order_relaxed);
}

void core_stats_start(struct core_stats *s)
{
        if (!s || !s->shard)
                return;
        bool shared;
        struct core_stats_shard *sh = shard_of(s, &shared);
        add(&sh->submitted, 1, shared);
}

void core_stats_misaligned(struct core_stats *s, enum core_op_class c)
{
        if (!s || !s->shard)
                return;
        if ((unsigned)c >= CORE_OPC_MAX)
                c = CORE_OPC_OTHER;
        bool shared;
        struct core_stats_shard *sh = shard_of(s, &shared);
        add(&sh->misaligned[c], 1, shared);
}

void core_stats_end(struct core_stats *s, enum core_op_class c, enum core_status st, uint64_t bytes,
                    uint64_t lat_ns)
{
        if (!s || !s->shard)
                return;
        if ((unsigned)c >= CORE_OPC_MAX)
                c = CORE_OPC_OTHER;
        bool shared;
        struct core_stats_shard *sh = shard_of(s, &shared);
        add(&sh->ops[c], 1, shared);
        if (st == CORE_OK) {
                add(&sh->ok[c], 1, shared);
                add(&sh->bytes[c], bytes, shared);
        } else
                add(&sh->errors[(unsigned)st < CORE_STATUS_MAX ? st : CORE_E_INTERNAL], 1, shared);
        if (lat_ns == CORE_LAT_NONE)
                return;
        add(&sh->lat_sum_ns[c], lat_ns, shared);
        add(&sh->lat[c][core_lat_bucket_index(lat_ns)], 1, shared);
}

void core_stats_reject(struct core_ns *ns, struct core_host *host, enum core_op op,
                       enum core_status st)
{
        enum core_op_class c = core_op_class_of(op);
        if (ns) {
                core_stats_start(&ns->stats);
                core_stats_end(&ns->stats, c, st, 0, CORE_LAT_NONE);
        }
        if (host) {
                core_stats_start(&host->stats);
                core_stats_end(&host->stats, c, st, 0, CORE_LAT_NONE);
        }
}

/* ---- Hosts ---- */

static pthread_mutex_t hosts_lock = PTHREAD_MUTEX_INITIALIZER;
static struct core_host *hosts;
static unsigned hosts_idle;

/* Forget the host idle longest (hosts_lock held). */
static void evict_idle_locked(void)
{
        struct core_host **victim = NULL;
        for (struct core_host **pp = &hosts; *pp; pp = &(*pp)->next)
                if ((*pp)->refs == 0 && (!victim || (*pp)->idle_since < (*victim)->idle_since))
                        victim = pp;
        if (!victim)
                return;
        struct core_host *h = *victim;
        *victim = h->next;
        hosts_idle--;
        core_stats_fini(&h->stats);
        free(h);
}

struct core_host *core_host_get(const char *transport, const char *name)
{
        pthread_mutex_lock(&hosts_lock);
        struct core_host *h;
        for (h = hosts; h; h = h->next)
                if (strcmp(h->transport, transport) == 0 && strcmp(h->name, name) == 0)
                        break;
        if (h) {
                if (h->refs++ == 0)
                        hosts_idle--;
                goto out;
        }
        h = calloc(1, sizeof(*h));
        if (!h)
                goto out;
        if (core_stats_init(&h->stats) < 0) {
                free(h);
                h = NULL;
                goto out;
        }
        snprintf(h->transport, sizeof(h->transport), "%s", transport);
        snprintf(h->name, sizeof(h->name), "%s", name);
        h->refs = 1;
        h->next = hosts;
        hosts = h;
out:
        pthread_mutex_unlock(&hosts_lock);
        return h;
}

void core_host_put(struct core_host *h)
{
        if (!h)
                return;
        pthread_mutex_lock(&hosts_lock);
        if (h->refs && --h->refs == 0) {
                h->idle_since = rt_now_ns();
                if (++hosts_idle > CORE_HOST_IDLE_MAX)
                        evict_idle_locked();
        }
        pthread_mutex_unlock(&hosts_lock);
}

void core_host_foreach(void (*fn)(const struct core_host *h, void *arg), void *arg)
{
        pthread_mutex_lock(&hosts_lock);
        for (struct core_host *h = hosts; h; h = h->next)
                fn(h, arg);
        pthread_mutex_unlock(&hosts_lock);
}
