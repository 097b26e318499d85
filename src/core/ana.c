/*
 * Asymmetric access groups and the gateway identity (core/ana.h; NVMe Base
 * 2.0 8.1 Asymmetric Namespace Access, SPC-5 5.16 asymmetric logical unit
 * access).  The states live here once; the NVMe and SCSI personalities
 * only encode them.  A change is published as CORE_NS_EV_ANA for every
 * namespace it concerns, outside every core lock (state.c's rule), with a
 * reference held on each namespace so none goes away meanwhile.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/ana.h"
#include "core/ns.h"
#include "rt/log.h"

static _Atomic uint8_t ana_states[CORE_ANA_GROUPS + 1]; /* 0 = CORE_ANA_OPTIMIZED */
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

int core_ana_set_state(uint32_t group, enum core_ana_state st, const void *origin)
{
        if (group == 0 || group > CORE_ANA_GROUPS || (unsigned)st >= CORE_ANA_STATE_MAX)
                return -EINVAL;
        pthread_mutex_lock(&ana_lock);
        enum core_ana_state old = (enum core_ana_state)atomic_exchange_explicit(
            &ana_states[group], (uint8_t)st, memory_order_acq_rel);
        if (old != st)
                count_change(group, 0);
        pthread_mutex_unlock(&ana_lock);
        if (old == st)
                return 0;
        LOG_INFO("core", "access group %u: %s -> %s", group, core_ana_state_name(old),
                 core_ana_state_name(st));
        struct members m = {.group = group};
        core_ns_foreach(collect, &m);
        for (size_t i = 0; i < m.n; i++) {
                publish(m.v[i], origin, old, st);
                core_ns_put(m.v[i]);
        }
        free(m.v);
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
