/*
 * Namespace state and events (DESIGN.md "Namespace state and events"):
 * the only writers of a namespace's shared state — write-protect reasons,
 * ready / stopped / medium absent, sanitize state and progress, the
 * volatile write cache — the one check every command goes through
 * (core_ns_check, applied by core_req_submit to requests of both
 * personalities), and the event bus that tells every personality, and so
 * every host on either transport, what changed.
 *
 * Capacity changes (core_ns_resize) live here too: the backend grows
 * before the new size is published and a shrink publishes before the
 * backend shrinks, so a reactor that read either size only touches blocks
 * the backend has.
 *
 * Writers serialise on ns->lock and publish after dropping it, so a
 * listener may take its own locks (a SCSI target's, nvme_lock) without an
 * order against ns->lock.  Readers on the data path use the atomics.
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/ana.h"
#include "core/ns.h"
#include "core/pistore.h"
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

int core_ns_set_wp(struct core_ns *ns, uint32_t reasons, bool on, core_origin_t origin)
{
        pthread_mutex_lock(&ns->lock);
        uint32_t old = atomic_load(&ns->wp);
        uint32_t now = on ? old | reasons : old & ~reasons;
        /* NVMe: permanent means permanent, and until power cycle means until a restart. */
        now |= old & (CORE_WP_PERMANENT | CORE_WP_POWER_CYCLE);
        atomic_store_explicit(&ns->wp, now, memory_order_release);
        if ((now & ~old) & (CORE_WP_PERMANENT | CORE_WP_POWER_CYCLE)) {
                /* Persist before anyone is told; undo if it cannot be. */
                int rc = core_ns_save_meta(ns);
                if (rc) {
                        atomic_store_explicit(&ns->wp, old, memory_order_release);
                        pthread_mutex_unlock(&ns->lock);
                        return rc;
                }
        }
        pthread_mutex_unlock(&ns->lock);
        if (old == now)
                return 0;
        LOG_INFO("core", "namespace %s: write protect reasons 0x%x -> 0x%x", ns->name, old, now);
        publish(ns, CORE_NS_EV_WRITE_PROTECT, origin, old, now);
        return 0;
}

void core_ns_set_ready(struct core_ns *ns, enum core_ns_ready r, core_origin_t origin)
{
        pthread_mutex_lock(&ns->lock);
        uint8_t old = atomic_exchange_explicit(&ns->ready, (uint8_t)r, memory_order_acq_rel);
        if (old == CORE_NS_READY && r == CORE_NS_STOPPED) {
                /* One start-stop cycle (SCSI log page 0Eh): counted when a started unit stops. */
                atomic_fetch_add(&ns->start_stop_cycles, 1);
                int rc = core_ns_save_meta(ns);
                if (rc)
                        LOG_WARN("core", "namespace %s: start-stop count not saved: %s", ns->name,
                                 strerror(-rc));
        }
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

int core_ns_resize(struct core_ns *ns, uint64_t num_blocks, bool force, char *err, size_t errlen)
{
        int rc = 0;
        err[0] = 0;
        if (core_ns_sanitize_state(ns) == CORE_SAN_RUNNING) {
                /* The sanitize walks the blocks up to the capacity it started with. */
                snprintf(err, errlen, "a sanitize is in progress");
                return -EBUSY;
        }
        if (num_blocks == 0 || num_blocks > (UINT64_MAX >> ns->block_shift)) {
                snprintf(err, errlen, "size must be at least one block and fit 64 bits");
                return -EINVAL;
        }
        if (!ns->be.ops->resize) {
                snprintf(err, errlen, "the %s backend cannot resize", ns->backend_name);
                return -EOPNOTSUPP;
        }
        pthread_mutex_lock(&ns->lock);
        uint64_t old = core_ns_blocks(ns);
        uint64_t bytes = num_blocks << ns->block_shift;
        if (num_blocks == old)
                goto out;
        if (num_blocks > old) {
                /* The backend first: no request may see blocks it cannot reach. */
                if (strcmp(ns->backend_name, "mem") == 0 &&
                    (rc = core_ns_mem_fits(bytes, err, errlen)))
                        goto out;
                rc = ns->be.ops->resize(&ns->be, bytes);
                if (rc) {
                        snprintf(err, errlen, "backend %s cannot grow to %llu bytes: %s",
                                 ns->backend_name, (unsigned long long)bytes, strerror(-rc));
                        goto out;
                }
                /* The metadata store with it (core/pistore.h): new blocks' metadata escapes. */
                if (ns->pistore && (rc = core_pistore_resize(ns->pistore, num_blocks))) {
                        snprintf(err, errlen, "the metadata store cannot grow: %s", strerror(-rc));
                        goto out;
                }
                atomic_store_explicit(&ns->num_blocks, num_blocks, memory_order_release);
        } else {
                /*
                 * A personality's reference means a host may hold blocks past
                 * the new end (SPDK refuses to shrink an open bdev the same way).
                 */
                if (!force && atomic_load(&ns->refs) > 1) {
                        snprintf(err, errlen,
                                 "namespace is exported (iSCSI LUN or NVMe namespace); unmap or "
                                 "detach it first, or force");
                        rc = -EBUSY;
                        goto out;
                }
                /* New requests are refused past the end before the blocks go. */
                atomic_store_explicit(&ns->num_blocks, num_blocks, memory_order_release);
                int brc = ns->be.ops->resize(&ns->be, bytes);
                if (brc)
                        LOG_WARN("core", "namespace %s: backend kept its size after shrink: %s",
                                 ns->name, strerror(-brc));
                if (ns->pistore && (brc = core_pistore_resize(ns->pistore, num_blocks)))
                        LOG_WARN("core", "namespace %s: metadata store kept its size: %s", ns->name,
                                 strerror(-brc));
        }
        rc = core_ns_save_meta(ns);
        if (rc) {
                snprintf(err, errlen, "saving metadata: %s", strerror(-rc));
                if (num_blocks > old) /* not durable: back to the old size */
                        atomic_store_explicit(&ns->num_blocks, old, memory_order_release);
                else
                        rc = 0; /* smaller already; the next save records it */
        }
out:
        pthread_mutex_unlock(&ns->lock);
        if (rc || num_blocks == old)
                return rc;
        LOG_INFO("core", "namespace %s: capacity %llu -> %llu blocks", ns->name,
                 (unsigned long long)old, (unsigned long long)num_blocks);
        publish(ns, CORE_NS_EV_CAPACITY, NULL, (uint32_t)old, (uint32_t)num_blocks);
        return 0;
}

enum core_status core_ns_check(const struct core_ns *ns, unsigned chk)
{
        /* The path first: a gateway that cannot reach the namespace knows nothing else. */
        if (chk & CORE_CHK_ACCESS) {
                enum core_status st = core_ana_access(core_ana_state(core_ns_ana_group(ns)));
                if (st != CORE_OK)
                        return st;
        }
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
