/*
 * Asymmetric access groups and the gateway identity (core/ana.h; NVMe Base
 * 2.0 8.1 Asymmetric Namespace Access, SPC-5 5.16 asymmetric logical unit
 * access).  The states live here once; the NVMe and SCSI personalities
 * only encode them.  A change is published as CORE_NS_EV_ANA for every
 * namespace it concerns, outside every core lock (state.c's rule), with a
 * reference held on each namespace so none goes away meanwhile.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/ana.h"
#include "core/ns.h"
#include "rt/log.h"
#include "rt/reactor.h"

static _Atomic uint8_t ana_states[CORE_ANA_GROUPS + 1]; /* effective; 0 = CORE_ANA_OPTIMIZED */
static _Atomic uint8_t ana_conf[CORE_ANA_GROUPS + 1];   /* configured */
static _Atomic uint64_t ana_changes;
static _Atomic uint64_t ana_group_changes[CORE_ANA_GROUPS + 1];
static _Atomic unsigned gateway_id;
static pthread_mutex_t ana_lock = PTHREAD_MUTEX_INITIALIZER; /* serialises the setters */

static const char *const state_names[CORE_ANA_STATE_MAX] = {
    [CORE_ANA_OPTIMIZED] = "optimized",
    [CORE_ANA_NON_OPTIMIZED] = "non-optimized",
    [CORE_ANA_STANDBY] = "standby",
    [CORE_ANA_INACCESSIBLE] = "inaccessible",
    [CORE_ANA_PERSISTENT_LOSS] = "persistent-loss",
    [CORE_ANA_TRANSITIONING] = "transitioning",
};

const char *core_ana_state_name(enum core_ana_state s)
{
        return (unsigned)s < CORE_ANA_STATE_MAX ? state_names[s] : "?";
}

int core_ana_state_parse(const char *s, enum core_ana_state *out)
{
        for (unsigned i = 0; s && i < CORE_ANA_STATE_MAX; i++)
                if (strcmp(s, state_names[i]) == 0) {
                        *out = (enum core_ana_state)i;
                        return 0;
                }
        return -EINVAL;
}

enum core_ana_state core_ana_state(uint32_t group)
{
        if (group == 0 || group > CORE_ANA_GROUPS)
                return CORE_ANA_OPTIMIZED;
        return (enum core_ana_state)atomic_load_explicit(&ana_states[group], memory_order_acquire);
}

uint64_t core_ana_change_count(void)
{
        return atomic_load(&ana_changes);
}

uint64_t core_ana_group_change_count(uint32_t group)
{
        return group && group <= CORE_ANA_GROUPS ? atomic_load(&ana_group_changes[group]) : 0;
}

/* One more change, of group (and of group2 when not 0); under ana_lock. */
static void count_change(uint32_t group, uint32_t group2)
{
        uint64_t n = atomic_fetch_add(&ana_changes, 1) + 1;
        atomic_store(&ana_group_changes[group], n);
        if (group2)
                atomic_store(&ana_group_changes[group2], n);
}

enum core_status core_ana_access(enum core_ana_state st)
{
        switch (st) {
        case CORE_ANA_OPTIMIZED:
        case CORE_ANA_NON_OPTIMIZED:
                return CORE_OK;
        case CORE_ANA_STANDBY:
                return CORE_E_ANA_STANDBY;
        case CORE_ANA_PERSISTENT_LOSS:
                return CORE_E_ANA_PERSISTENT_LOSS;
        case CORE_ANA_TRANSITIONING:
                return CORE_E_ANA_TRANSITION;
        case CORE_ANA_INACCESSIBLE:
        default:
                return CORE_E_ANA_INACCESSIBLE;
        }
}

uint32_t core_ns_ana_group(const struct core_ns *ns)
{
        return atomic_load_explicit(&ns->ana_group, memory_order_acquire);
}

/* The namespaces of one group, each with a reference (core_ns_foreach holds the registry lock). */
struct members {
        uint32_t group;
        size_t n, cap;
        struct core_ns **v;
};

static void collect(struct core_ns *ns, void *arg)
{
        struct members *m = arg;
        if (core_ns_ana_group(ns) != m->group)
                return;
        if (m->n == m->cap) {
                size_t cap = m->cap ? 2 * m->cap : 16;
                struct core_ns **v = realloc(m->v, cap * sizeof(*v));
                if (!v)
                        return; /* out of memory: that host is not told (logged below) */
                m->v = v;
                m->cap = cap;
        }
        core_ns_get(ns);
        m->v[m->n++] = ns;
}

static void publish(struct core_ns *ns, const void *origin, enum core_ana_state old,
                    enum core_ana_state now)
{
        struct core_ns_event ev = {.type = CORE_NS_EV_ANA,
                                   .ns = ns,
                                   .origin = origin,
                                   .old_val = (uint32_t)old,
                                   .new_val = (uint32_t)now};
        core_ns_publish(&ev);
}

/* Under peer_lock. */
static struct peer_slot {
        struct core_ana_peer p;
        bool up;
        unsigned streak; /* results in a row that contradict the verdict */
        int fd;          /* the probe in flight, -1 */
        int ready;       /* a result known when the probe started: -1 none, 0 failed, 1 ok */
} peers[CORE_ANA_PEERS_MAX];
static unsigned npeers, peer_interval = CORE_ANA_PEER_INTERVAL;
static uint64_t peer_gen; /* bumped by each core_ana_peers_set */
static bool prober_armed;
static struct rt_timer probe_timer;
static pthread_mutex_t peer_lock = PTHREAD_MUTEX_INITIALIZER; /* after ana_lock */

/* The takeover rule (core/ana.h); under ana_lock and peer_lock. */
static enum core_ana_state effective(uint32_t g)
{
        enum core_ana_state conf = (enum core_ana_state)atomic_load(&ana_conf[g]);
        bool listed = false;
        if (conf != CORE_ANA_NON_OPTIMIZED && conf != CORE_ANA_STANDBY)
                return conf;
        for (unsigned i = 0; i < npeers; i++) {
                if (!(peers[i].p.groups & (1u << g)))
                        continue;
                if (peers[i].up)
                        return conf;
                listed = true;
        }
        return listed ? CORE_ANA_OPTIMIZED : conf;
}

/* Bring every group's effective state in line with the rule; hosts are told of each change. */
static void reconcile(const void *origin)
{
        struct {
                uint32_t g;
                enum core_ana_state old, now;
        } ch[CORE_ANA_GROUPS];
        unsigned n = 0;

        pthread_mutex_lock(&ana_lock);
        pthread_mutex_lock(&peer_lock);
        for (uint32_t g = 1; g <= CORE_ANA_GROUPS; g++) {
                enum core_ana_state now = effective(g);
                enum core_ana_state old = (enum core_ana_state)atomic_exchange_explicit(
                    &ana_states[g], (uint8_t)now, memory_order_acq_rel);
                if (old == now)
                        continue;
                count_change(g, 0);
                ch[n].g = g;
                ch[n].old = old;
                ch[n++].now = now;
        }
        pthread_mutex_unlock(&peer_lock);
        pthread_mutex_unlock(&ana_lock);
        for (unsigned k = 0; k < n; k++) {
                enum core_ana_state conf = core_ana_configured_state(ch[k].g);
                LOG_INFO("core", "access group %u: %s -> %s%s", ch[k].g,
                         core_ana_state_name(ch[k].old), core_ana_state_name(ch[k].now),
                         ch[k].now != conf ? " (takeover: its peers are down)" : "");
                struct members m = {.group = ch[k].g};
                core_ns_foreach(collect, &m);
                for (size_t i = 0; i < m.n; i++) {
                        publish(m.v[i], origin, ch[k].old, ch[k].now);
                        core_ns_put(m.v[i]);
                }
                free(m.v);
        }
}

enum core_ana_state core_ana_configured_state(uint32_t group)
{
        if (group == 0 || group > CORE_ANA_GROUPS)
                return CORE_ANA_OPTIMIZED;
        return (enum core_ana_state)atomic_load(&ana_conf[group]);
}

int core_ana_set_state(uint32_t group, enum core_ana_state st, const void *origin)
{
        if (group == 0 || group > CORE_ANA_GROUPS || (unsigned)st >= CORE_ANA_STATE_MAX)
                return -EINVAL;
        atomic_store(&ana_conf[group], (uint8_t)st);
        reconcile(origin);
        return 0;
}

int core_ns_set_ana_group(struct core_ns *ns, uint32_t group, const void *origin)
{
        if (group == 0 || group > CORE_ANA_GROUPS)
                return -EINVAL;
        pthread_mutex_lock(&ana_lock);
        uint32_t old = atomic_exchange_explicit(&ns->ana_group, group, memory_order_acq_rel);
        if (old != group)
                count_change(group, old <= CORE_ANA_GROUPS ? old : 0);
        pthread_mutex_unlock(&ana_lock);
        if (old == group)
                return 0;
        LOG_INFO("core", "namespace %s: access group %u -> %u", ns->name, old, group);
        publish(ns, origin, core_ana_state(old), core_ana_state(group));
        return 0;
}

int core_gateway_set_id(unsigned id)
{
        if (id > CORE_GATEWAY_ID_MAX)
                return -EINVAL;
        atomic_store(&gateway_id, id);
        return 0;
}

unsigned core_gateway_id(void)
{
        return atomic_load_explicit(&gateway_id, memory_order_relaxed);
}

void core_gateway_cntlid_range(uint16_t *lo, uint16_t *hi)
{
        unsigned id = core_gateway_id();
        if (!id) {
                *lo = 1;
                *hi = 0xffef;
                return;
        }
        *lo = (uint16_t)(id << 12);
        *hi = (uint16_t)((id << 12) + 0xfffu > 0xffefu ? 0xffefu : (id << 12) + 0xfffu);
}

uint16_t core_gateway_rel_port(uint16_t n)
{
        /* Alone: n, as before gateways existed; else gateway id in the high byte. */
        return (uint16_t)((core_gateway_id() << 8) | (n & 0xffu));
}

uint16_t core_gateway_tpg(uint32_t group)
{
        return (uint16_t)((core_gateway_id() << 8) | (group & 0xffu));
}

uint32_t core_gateway_tpg_group(uint16_t tpg)
{
        uint32_t g = tpg & 0xffu;
        if ((unsigned)(tpg >> 8) != core_gateway_id() || g == 0 || g > CORE_ANA_GROUPS)
                return 0;
        return g;
}

/* ---- peers: the list, its text form, the prober on reactor 0 ---- */

static int parse_one(const char *it, size_t len, struct core_ana_peer *p, char *err, size_t errlen)
{
        char buf[CORE_ANA_PEER_ADDR_MAX + 96];
        if (len >= sizeof(buf))
                goto bad;
        memcpy(buf, it, len);
        buf[len] = '\0';
        memset(p, 0, sizeof(*p));
        char *groups = strchr(buf, '/');
        if (groups)
                *groups++ = '\0';
        char *host = buf, *port;
        if (buf[0] == '[') {
                char *e = strchr(buf, ']');
                if (!e || e[1] != ':')
                        goto bad;
                *e = '\0';
                host = buf + 1;
                port = e + 2;
        } else {
                port = strchr(buf, ':');
                if (!port)
                        goto bad;
                *port++ = '\0';
        }
        struct in6_addr a6; /* IPv6 only in brackets: "::1:4420" would be ambiguous */
        if (strlen(host) >= sizeof(p->host) ||
            (inet_pton(AF_INET, host, &a6) != 1 &&
             (host == buf || inet_pton(AF_INET6, host, &a6) != 1)))
                goto bad;
        char *end;
        unsigned long v = strtoul(port, &end, 10);
        if (!*port || *end || v == 0 || v > 65535)
                goto bad;
        memcpy(p->host, host, strlen(host) + 1); /* shorter than p->host: checked above */
        p->port = (uint16_t)v;
        if (!groups) {
                for (uint32_t g = 1; g <= CORE_ANA_GROUPS; g++)
                        p->groups |= 1u << g;
                return 0;
        }
        for (char *g = groups;;) {
                v = strtoul(g, &end, 10);
                if (end == g || v == 0 || v > CORE_ANA_GROUPS || (*end && *end != '+'))
                        goto bad;
                p->groups |= 1u << v;
                if (!*end)
                        return 0;
                g = end + 1;
        }
bad:
        snprintf(err, errlen,
                 "peer '%.*s' is not HOST:PORT[/G[+G..]] (a numeric address, "
                 "port 1..65535, groups 1..%u)",
                 (int)(len > 80 ? 80 : len), it, CORE_ANA_GROUPS);
        return -EINVAL;
}

int core_ana_peers_parse(const char *s, struct core_ana_peer *out, unsigned max, char *err,
                         size_t errlen)
{
        unsigned n = 0;
        while (s && *s) {
                while (*s == ' ' || *s == ',')
                        s++;
                if (!*s)
                        break;
                size_t len = strcspn(s, ", ");
                if (n == max) {
                        snprintf(err, errlen, "more than %u peers", max);
                        return -EINVAL;
                }
                if (parse_one(s, len, &out[n], err, errlen) < 0)
                        return -EINVAL;
                n++;
                s += len;
        }
        return (int)n;
}

void core_ana_peers_format(const struct core_ana_peer *p, unsigned n, char *out, size_t len)
{
        size_t o = 0;
        uint32_t all = 0;
        for (uint32_t g = 1; g <= CORE_ANA_GROUPS; g++)
                all |= 1u << g;
        if (len)
                out[0] = '\0';
        for (unsigned i = 0; i < n && o < len; i++) {
                bool v6 = strchr(p[i].host, ':') != NULL;
                o += (size_t)snprintf(out + o, len - o, "%s%s%s%s:%u", i ? "," : "", v6 ? "[" : "",
                                      p[i].host, v6 ? "]" : "", p[i].port);
                if (p[i].groups == all)
                        continue;
                char sep = '/';
                for (uint32_t g = 1; g <= CORE_ANA_GROUPS && o < len; g++)
                        if (p[i].groups & (1u << g)) {
                                o += (size_t)snprintf(out + o, len - o, "%c%u", sep, g);
                                sep = '+';
                        }
        }
}

/* A non-blocking connect to the peer: 1 connected, 0 in flight (slot->fd), -1 refused. */
static int probe_start(struct peer_slot *sl)
{
        struct sockaddr_storage ss;
        socklen_t sl_len;
        memset(&ss, 0, sizeof(ss));
        struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
        if (inet_pton(AF_INET, sl->p.host, &a4->sin_addr) == 1) {
                a4->sin_family = AF_INET;
                a4->sin_port = htons(sl->p.port);
                sl_len = sizeof(*a4);
        } else if (inet_pton(AF_INET6, sl->p.host, &a6->sin6_addr) == 1) {
                a6->sin6_family = AF_INET6;
                a6->sin6_port = htons(sl->p.port);
                sl_len = sizeof(*a6);
        } else {
                return -1;
        }
        int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -1;
        if (connect(fd, (struct sockaddr *)&ss, sl_len) == 0) {
                close(fd);
                return 1;
        }
        if (errno != EINPROGRESS) {
                close(fd);
                return -1;
        }
        sl->fd = fd;
        return 0;
}

/* The probe started one interval ago: connected (true), or refused or still hanging (false). */
static bool probe_finish(struct peer_slot *sl)
{
        struct pollfd pf = {.fd = sl->fd, .events = POLLOUT};
        int soerr = -1;
        socklen_t l = sizeof(soerr);
        bool ok = poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT) &&
                  getsockopt(sl->fd, SOL_SOCKET, SO_ERROR, &soerr, &l) == 0 && soerr == 0;
        close(sl->fd);
        sl->fd = -1;
        return ok;
}

/* Apply one result to slot i of generation gen; true when the verdict changed. */
static bool peer_result(unsigned i, bool ok, uint64_t gen)
{
        bool changed = false;
        pthread_mutex_lock(&peer_lock);
        if (gen == peer_gen && i < npeers) {
                struct peer_slot *sl = &peers[i];
                if (ok == sl->up) {
                        sl->streak = 0;
                } else if (++sl->streak >= CORE_ANA_PEER_PROBES) {
                        sl->up = ok;
                        sl->streak = 0;
                        changed = true;
                        LOG_WARN("core", "ANA peer %s:%u is %s", sl->p.host, sl->p.port,
                                 ok ? "up again" : "down (not answering)");
                }
        }
        pthread_mutex_unlock(&peer_lock);
        return changed;
}

void core_ana_peer_report(unsigned i, bool ok)
{
        pthread_mutex_lock(&peer_lock);
        uint64_t gen = peer_gen;
        pthread_mutex_unlock(&peer_lock);
        if (peer_result(i, ok, gen))
                reconcile(NULL);
}

/* Reactor 0, every interval: finish each peer's last probe, start the next. */
static void probe_tick(struct rt_timer *t)
{
        int res[CORE_ANA_PEERS_MAX];
        unsigned n;
        pthread_mutex_lock(&peer_lock);
        n = npeers;
        uint64_t gen = peer_gen;
        if (!n) {
                prober_armed = false;
                pthread_mutex_unlock(&peer_lock);
                return;
        }
        for (unsigned i = 0; i < n; i++) {
                struct peer_slot *sl = &peers[i];
                res[i] = sl->fd >= 0 ? probe_finish(sl) : sl->ready;
                int r = probe_start(sl);
                sl->ready = r > 0 ? 1 : r < 0 ? 0 : -1;
        }
        rt_timer_arm(rt_get(0), t, peer_interval);
        pthread_mutex_unlock(&peer_lock);
        bool changed = false;
        for (unsigned i = 0; i < n; i++)
                if (res[i] >= 0)
                        changed |= peer_result(i, res[i] == 1, gen);
        if (changed)
                reconcile(NULL);
}

static void prober_start_msg(void *arg)
{
        (void)arg;
        pthread_mutex_lock(&peer_lock);
        if (!prober_armed && npeers) {
                prober_armed = true;
                probe_timer.fn = probe_tick;
                rt_timer_arm(rt_get(0), &probe_timer, 0);
        }
        pthread_mutex_unlock(&peer_lock);
}

int core_ana_peers_set(const struct core_ana_peer *p, unsigned n, unsigned interval_ms)
{
        if (n > CORE_ANA_PEERS_MAX || interval_ms < 10 || interval_ms > 600000)
                return -EINVAL;
        pthread_mutex_lock(&peer_lock);
        for (unsigned i = 0; i < npeers; i++)
                if (peers[i].fd >= 0)
                        close(peers[i].fd);
        for (unsigned i = 0; i < n; i++)
                peers[i] = (struct peer_slot){.p = p[i], .up = true, .fd = -1, .ready = -1};
        npeers = n;
        peer_interval = interval_ms;
        peer_gen++;
        bool start = n && !prober_armed && rt_count() > 0;
        pthread_mutex_unlock(&peer_lock);
        if (n)
                LOG_INFO("core", "ANA peers: %u, probed every %u ms", n, interval_ms);
        reconcile(NULL); /* peers that were down and are gone no longer hold a takeover */
        if (start && rt_msg_send(rt_get(0), prober_start_msg, NULL) < 0)
                return -ENOMEM;
        return 0;
}

unsigned core_ana_peers_get(struct core_ana_peer *p, bool *up, unsigned max, unsigned *interval_ms)
{
        pthread_mutex_lock(&peer_lock);
        unsigned n = npeers < max ? npeers : max;
        for (unsigned i = 0; i < n; i++) {
                if (p)
                        p[i] = peers[i].p;
                if (up)
                        up[i] = peers[i].up;
        }
        if (interval_ms)
                *interval_ms = peer_interval;
        pthread_mutex_unlock(&peer_lock);
        return n;
}
