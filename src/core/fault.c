/*
 * Fault injection rules (core/fault.h): a small fixed table under a mutex,
 * published through core_fault_active so the data path pays one atomic
 * load while it is empty.  Random fractions come from a per-rule
 * xorshift64* generator (seedable, so a test can repeat a run), not rand().
 */
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/fault.h"
#include "core/ns.h"
#include "core/req.h"
#include "core/stats.h"
#include "rt/log.h"

struct core_fault_table {
        pthread_mutex_t lock;
        struct core_fault_rule rules[CORE_FAULT_MAX_RULES];
        uint64_t rng[CORE_FAULT_MAX_RULES];
        unsigned n; /* rules[0..n) in id order */
        uint32_t next_id;
};

static struct core_fault_table table = {.lock = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};

struct core_fault_table *_Atomic core_fault_active;

void core_fault_rule_init(struct core_fault_rule *r)
{
        memset(r, 0, sizeof(*r));
        r->ops = CORE_FAULT_OPS_ALL;
        r->lba_first = 0;
        r->lba_last = UINT64_MAX;
        r->per_mille = 1000;
        r->status = CORE_OK;
}

int core_fault_parse_ops(const char *s, unsigned *ops, char *err, size_t errlen)
{
        static const struct {
                const char *name;
                unsigned bits;
        } names[] = {
            {"read", 1u << CORE_OPC_READ},   {"write", 1u << CORE_OPC_WRITE},
            {"flush", 1u << CORE_OPC_FLUSH}, {"other", 1u << CORE_OPC_OTHER},
            {"all", CORE_FAULT_OPS_ALL},
        };
        unsigned out = 0;
        const char *p = s;
        for (;;) {
                const char *e = strchr(p, ',');
                size_t len = e ? (size_t)(e - p) : strlen(p);
                bool found = false;
                if (len == 0) {
                        snprintf(err, errlen, "ops: empty item (read, write, flush, other, all)");
                        return -EINVAL;
                }
                for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                        if (strlen(names[i].name) == len &&
                            strncasecmp(p, names[i].name, len) == 0) {
                                out |= names[i].bits;
                                found = true;
                        }
                }
                if (!found) {
                        snprintf(err, errlen,
                                 "ops: unknown operation '%.*s' (read, write, flush, other, all)",
                                 (int)(len > 32 ? 32 : len), p);
                        return -EINVAL;
                }
                if (!e)
                        break;
                p = e + 1;
        }
        *ops = out;
        return 0;
}

/* a == b with '-' and '_' alike, case-insensitive. */
static bool name_eq(const char *a, const char *b)
{
        for (; *a && *b; a++, b++) {
                char x = *a == '_' ? '-' : (char)tolower((unsigned char)*a);
                char y = *b == '_' ? '-' : (char)tolower((unsigned char)*b);
                if (x != y)
                        return false;
        }
        return *a == *b;
}

int core_fault_parse_status(const char *s, enum core_status *st, char *err, size_t errlen)
{
        for (int i = CORE_OK + 1; i < CORE_STATUS_MAX; i++) {
                if (name_eq(s, core_status_name((enum core_status)i))) {
                        *st = (enum core_status)i;
                        return 0;
                }
        }
        snprintf(err, errlen,
                 "status: '%.64s' is not a core status (e.g. medium-error, "
                 "write-error, not-ready, aborted, internal-error)",
                 s);
        return -EINVAL;
}

static void publish(void)
{
        atomic_store_explicit(&core_fault_active, table.n ? &table : NULL, memory_order_release);
}

int core_fault_add(const struct core_fault_rule *r, uint32_t *id, char *err, size_t errlen)
{
        if (r->drop) {
                if (r->status != CORE_OK || r->latency_us) {
                        snprintf(err, errlen,
                                 "a drop rule drops a connection: no status or "
                                 "latency_us with drop");
                        return -EINVAL;
                }
                if (r->ns[0] || r->ops != CORE_FAULT_OPS_ALL || r->lba_first != 0 ||
                    r->lba_last != UINT64_MAX || r->every || r->per_mille != 1000) {
                        snprintf(err, errlen,
                                 "a drop rule selects connections (host, transport, "
                                 "peer, after): no namespace, ops, LBA range or "
                                 "fraction");
                        return -EINVAL;
                }
        } else {
                if (r->status == CORE_OK && r->latency_us == 0) {
                        snprintf(err, errlen,
                                 "the rule does nothing: give status, latency_us or drop");
                        return -EINVAL;
                }
                if (r->peer[0] || r->after) {
                        snprintf(err, errlen,
                                 "peer and after select connections to drop: "
                                 "only with drop");
                        return -EINVAL;
                }
        }
        if (r->lba_first > r->lba_last) {
                snprintf(err, errlen, "lba_first is beyond lba_last");
                return -EINVAL;
        }
        if (r->per_mille > 1000) {
                snprintf(err, errlen, "per_mille must be in [0, 1000]");
                return -EINVAL;
        }
        if (r->every && r->per_mille != 1000) {
                snprintf(err, errlen, "give per_mille or every, not both");
                return -EINVAL;
        }
        if (r->latency_us > CORE_FAULT_MAX_LATENCY_US) {
                snprintf(err, errlen, "latency_us is above %u", CORE_FAULT_MAX_LATENCY_US);
                return -EINVAL;
        }
        if (r->transport[0] && strcmp(r->transport, "iscsi") != 0 &&
            strcmp(r->transport, "nvme") != 0) {
                snprintf(err, errlen, "transport must be iscsi or nvme");
                return -EINVAL;
        }
        if (!r->ops || (r->ops & ~CORE_FAULT_OPS_ALL)) {
                snprintf(err, errlen, "ops selects nothing");
                return -EINVAL;
        }
        pthread_mutex_lock(&table.lock);
        if (table.n == CORE_FAULT_MAX_RULES) {
                pthread_mutex_unlock(&table.lock);
                snprintf(err, errlen, "%d fault rules already set: clear some first",
                         CORE_FAULT_MAX_RULES);
                return -ENOSPC;
        }
        struct core_fault_rule *n = &table.rules[table.n];
        *n = *r;
        n->ns[sizeof(n->ns) - 1] = '\0';
        n->host[sizeof(n->host) - 1] = '\0';
        n->peer[sizeof(n->peer) - 1] = '\0';
        n->transport[sizeof(n->transport) - 1] = '\0';
        n->id = table.next_id++;
        n->seen = n->hits = 0;
        n->armed = true;
        if (!n->seed) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                n->seed = ((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^
                          ((uint64_t)n->id << 32);
        }
        /* xorshift64* must not start at 0. */
        table.rng[table.n] = n->seed ? n->seed : 0x9e3779b97f4a7c15ull;
        *id = n->id;
        table.n++;
        publish();
        pthread_mutex_unlock(&table.lock);
        LOG_INFO("core", "fault rule %u set", *id);
        return 0;
}

int core_fault_clear(uint32_t id)
{
        int removed = 0;
        pthread_mutex_lock(&table.lock);
        for (unsigned i = 0; i < table.n;) {
                if (id && table.rules[i].id != id) {
                        i++;
                        continue;
                }
                memmove(&table.rules[i], &table.rules[i + 1],
                        (table.n - i - 1) * sizeof(table.rules[0]));
                memmove(&table.rng[i], &table.rng[i + 1], (table.n - i - 1) * sizeof(table.rng[0]));
                table.n--;
                removed++;
        }
        publish();
        pthread_mutex_unlock(&table.lock);
        if (id && !removed)
                return -ENOENT;
        return removed;
}

void core_fault_foreach(void (*fn)(const struct core_fault_rule *r, void *arg), void *arg)
{
        pthread_mutex_lock(&table.lock);
        for (unsigned i = 0; i < table.n; i++)
                fn(&table.rules[i], arg);
        pthread_mutex_unlock(&table.lock);
}

static uint64_t rng_next(uint64_t *s)
{
        uint64_t x = *s;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        *s = x;
        return x * 0x2545f4914f6cdd1dull;
}

/* Counts a selected request/command on rule i; true when it is hit. Under the lock. */
static bool rule_fires(unsigned i)
{
        struct core_fault_rule *r = &table.rules[i];
        r->seen++;
        bool hit;
        if (r->every)
                hit = r->seen % r->every == 0;
        else if (r->per_mille >= 1000)
                hit = true;
        else
                hit = (rng_next(&table.rng[i]) >> 11) % 1000 < r->per_mille;
        if (!hit)
                return false;
        r->hits++;
        if (r->count && r->hits >= r->count)
                r->armed = false;
        return true;
}

static bool host_matches(const struct core_fault_rule *r, const char *transport, const char *host)
{
        if (r->transport[0] && (!transport || strcmp(r->transport, transport) != 0))
                return false;
        if (r->host[0] && (!host || strcmp(r->host, host) != 0))
                return false;
        return true;
}

bool core_fault_io(const struct core_req *req, enum core_status *st, uint32_t *latency_us)
{
        *st = CORE_OK;
        *latency_us = 0;
        const struct core_ns *ns = req->ns;
        if (!ns)
                return false;
        unsigned bit = 1u << core_op_class_of(req->op);
        bool ranged = req->op != CORE_OP_FLUSH;
        uint64_t first = req->lba, last = req->lba + (req->nlb ? req->nlb - 1 : 0);
        const char *transport = req->host ? req->host->transport : NULL;
        const char *host = req->host ? req->host->name : NULL;
        bool any = false;
        pthread_mutex_lock(&table.lock);
        for (unsigned i = 0; i < table.n; i++) {
                struct core_fault_rule *r = &table.rules[i];
                if (!r->armed || r->drop || !(r->ops & bit))
                        continue;
                if (r->ns[0] && strcmp(r->ns, ns->name) != 0)
                        continue;
                if (!host_matches(r, transport, host))
                        continue;
                if (ranged ? (last < r->lba_first || first > r->lba_last)
                           : (r->lba_first != 0 || r->lba_last != UINT64_MAX))
                        continue;
                if (!rule_fires(i))
                        continue;
                any = true;
                if (*st == CORE_OK)
                        *st = r->status;
                if (r->latency_us > *latency_us)
                        *latency_us = r->latency_us;
        }
        pthread_mutex_unlock(&table.lock);
        if (any)
                LOG_DEBUG("core", "fault: namespace %s op %d lba %llu: %s after %u us", ns->name,
                          req->op, (unsigned long long)req->lba, core_status_name(*st),
                          *latency_us);
        return any;
}

/* "addr" matches "addr:port" and itself; "addr:port" only itself. */
static bool peer_matches(const char *want, const char *peer)
{
        if (!want[0])
                return true;
        if (!peer)
                return false;
        size_t n = strlen(want);
        return strncmp(want, peer, n) == 0 && (peer[n] == '\0' || peer[n] == ':');
}

bool core_fault_conn_pdu(const char *transport, const char *host, const char *peer, bool is_cmd)
{
        bool drop = false;
        uint32_t id = 0;
        pthread_mutex_lock(&table.lock);
        for (unsigned i = 0; i < table.n && !drop; i++) {
                struct core_fault_rule *r = &table.rules[i];
                if (!r->armed || !r->drop || !host_matches(r, transport, host) ||
                    !peer_matches(r->peer, peer))
                        continue;
                if (r->after) {
                        if (!is_cmd)
                                continue;
                        if (++r->seen <= r->after)
                                continue;
                        r->seen = 0; /* a re-armed rule lets the next connection run N again */
                } else {
                        r->seen++;
                }
                r->hits++;
                if (r->count && r->hits >= r->count)
                        r->armed = false;
                drop = true;
                id = r->id;
        }
        pthread_mutex_unlock(&table.lock);
        if (drop)
                LOG_INFO("core", "fault rule %u: dropping %s connection of %s from %s", id,
                         transport ? transport : "?", host ? host : "?", peer ? peer : "?");
        return drop;
}
