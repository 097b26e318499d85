/*
 * Namespace state and events (DESIGN.md "Namespace state and events"):
 * the only writers of a namespace's shared state — write-protect reasons,
 * ready / stopped / medium absent, sanitize state and progress, the
 * volatile write cache — the one check every command goes through
 * (core_ns_check, applied by core_req_submit to requests of both
 * personalities), and the event bus that tells every personality, and so
 * every host on either transport, what changed.
 *
 * Writers serialise on ns->lock and publish after dropping it, so a
 * listener may take its own locks (a SCSI target's, nvme_lock) without an
 * order against ns->lock.  Readers on the data path use the atomics.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

#include "core/ns.h"
#include "rt/log.h"

#define MAX_LISTENERS 8

static struct {
        core_ns_listener_fn fn;
        void *arg;
} listeners[MAX_LISTENERS];
static _Atomic unsigned nlisteners;
static pthread_mutex_t listen_lock = PTHREAD_MUTEX_INITIALIZER;

int core_ns_listen(core_ns_listener_fn fn, void *arg)
{
        int rc = 0;
        pthread_mutex_lock(&listen_lock);
        unsigned n = atomic_load(&nlisteners);
        if (n >= MAX_LISTENERS) {
                rc = -ENOSPC;
        } else {
                listeners[n].fn = fn;
                listeners[n].arg = arg;
                atomic_store_explicit(&nlisteners, n + 1, memory_order_release);
        }
        pthread_mutex_unlock(&listen_lock);
        return rc;
}

void core_ns_publish(const struct core_ns_event *ev)
{
        unsigned n = atomic_load_explicit(&nlisteners, memory_order_acquire);
        for (unsigned i = 0; i < n; i++)
                listeners[i].fn(ev, listeners[i].arg);
}

static void publish(struct core_ns *ns, enum core_ns_event_type type, core_origin_t origin,
                    uint32_t old_val, uint32_t new_val)
{
        struct core_ns_event ev = {
            .type = type, .ns = ns, .origin = origin, .old_val = old_val, .new_val = new_val};
        core_ns_publish(&ev);
}

void core_ns_set_wp(struct core_ns *ns, uint32_t reasons, bool on, core_origin_t origin)
{
        pthread_mutex_lock(&ns->lock);
        uint32_t old = atomic_load(&ns->wp);
        uint32_t now = on ? old | reasons : old & ~reasons;
        if (old & CORE_WP_PERMANENT)
                now |= CORE_WP_PERMANENT; /* NVMe: permanent means permanent */
        atomic_store_explicit(&ns->wp, now, memory_order_release);
        pthread_mutex_unlock(&ns->lock);
        if (old == now)
                return;
        LOG_INFO("core", "namespace %s: write protect reasons 0x%x -> 0x%x", ns->name, old, now);
        publish(ns, CORE_NS_EV_WRITE_PROTECT, origin, old, now);
}

void core_ns_set_ready(struct core_ns *ns, enum core_ns_ready r, core_origin_t origin)
{
        pthread_mutex_lock(&ns->lock);
        uint8_t old = atomic_exchange_explicit(&ns->ready, (uint8_t)r, memory_order_acq_rel);
        pthread_mutex_unlock(&ns->lock);
        if (old != r)
                publish(ns, CORE_NS_EV_READY, origin, old, r);
}

void core_ns_set_wce(struct core_ns *ns, bool on, core_origin_t origin)
{
        pthread_mutex_lock(&ns->lock);
        bool old = atomic_exchange(&ns->wce, on);
        pthread_mutex_unlock(&ns->lock);
        if (old != on)
                publish(ns, CORE_NS_EV_WRITE_CACHE, origin, old, on);
}

int core_ns_sanitize_begin(struct core_ns *ns, core_origin_t origin)
{
        pthread_mutex_lock(&ns->lock);
        uint8_t old = atomic_load(&ns->san_state);
        if (old == CORE_SAN_RUNNING) {
                pthread_mutex_unlock(&ns->lock);
                return -EBUSY;
        }
        atomic_store(&ns->san_progress, 0);
        atomic_store_explicit(&ns->san_state, CORE_SAN_RUNNING, memory_order_release);
        pthread_mutex_unlock(&ns->lock);
        LOG_INFO("core", "namespace %s: sanitize started", ns->name);
        publish(ns, CORE_NS_EV_SANITIZE, origin, old, CORE_SAN_RUNNING);
        return 0;
}

void core_ns_sanitize_progress(struct core_ns *ns, uint16_t progress)
{
        atomic_store_explicit(&ns->san_progress, progress, memory_order_relaxed);
}

void core_ns_sanitize_end(struct core_ns *ns, bool ok, bool exit_allowed, core_origin_t origin)
{
        uint8_t now = ok ? CORE_SAN_DONE : CORE_SAN_FAILED;
        pthread_mutex_lock(&ns->lock);
        uint8_t old = atomic_load(&ns->san_state);
        ns->san_exit_allowed = !ok && exit_allowed;
        atomic_store(&ns->san_progress, 0);
        atomic_store_explicit(&ns->san_state, now, memory_order_release);
        core_ns_save_meta(ns); /* the result is durable before anyone hears of it */
        pthread_mutex_unlock(&ns->lock);
        if (ok)
                LOG_INFO("core", "namespace %s: sanitize completed", ns->name);
        else
                LOG_WARN("core",
                         "namespace %s: sanitize failed; medium access fails until a "
                         "sanitize succeeds%s",
                         ns->name, exit_allowed ? " or EXIT FAILURE MODE" : "");
        publish(ns, CORE_NS_EV_SANITIZE, origin, old, now);
}

int core_ns_sanitize_exit_failure(struct core_ns *ns, core_origin_t origin)
{
        pthread_mutex_lock(&ns->lock);
        uint8_t old = atomic_load(&ns->san_state);
        if (old == CORE_SAN_FAILED && !ns->san_exit_allowed) {
                pthread_mutex_unlock(&ns->lock);
                return -EPERM;
        }
        if (old == CORE_SAN_FAILED) {
                atomic_store_explicit(&ns->san_state, CORE_SAN_DONE, memory_order_release);
                core_ns_save_meta(ns); /* failure mode must not come back after a restart */
        }
        pthread_mutex_unlock(&ns->lock);
        if (old == CORE_SAN_FAILED)
                publish(ns, CORE_NS_EV_SANITIZE, origin, old, CORE_SAN_DONE);
        return 0;
}

enum core_status core_ns_check(const struct core_ns *ns, unsigned chk)
{
        if ((chk & CORE_CHK_SANITIZING) && core_ns_sanitize_state(ns) == CORE_SAN_RUNNING)
                return CORE_E_SANITIZE_IN_PROGRESS;
        if (chk & (CORE_CHK_MEDIUM | CORE_CHK_STARTED)) {
                enum core_ns_ready r = core_ns_ready(ns);
                if (r == CORE_NS_NO_MEDIUM)
                        return CORE_E_NO_MEDIUM;
                if (r == CORE_NS_STOPPED && (chk & CORE_CHK_STARTED))
                        return CORE_E_NOT_READY;
        }
        if ((chk & CORE_CHK_SANITIZE_FAILED) && core_ns_sanitize_state(ns) == CORE_SAN_FAILED)
                return CORE_E_SANITIZE_FAILED;
        if (chk & CORE_CHK_WRITABLE) {
                uint32_t wp = core_ns_wp(ns);
                if (wp & ~CORE_WP_SOFTWARE)
                        return CORE_E_WRITE_PROTECT;
                if (wp)
                        return CORE_E_WRITE_PROTECT_SOFTWARE;
        }
        return CORE_OK;
}
