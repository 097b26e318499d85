/*
 * A namespace's protection information state (issue 10): its metadata
 * format, the format change, the application tag table (core/ns.h).  The
 * engine is core/pi.c, the metadata store core/pistore.c; the data path's
 * protection stage is in core/req.c.
 *
 * The format lives in the namespace's metadata file as an optional "pi"
 * object ({"v": 1, "type", "md", "guard", "exp", "first", "sts"}; absent:
 * no metadata, which is what files written before issue 10 hold).
 *
 * core_ns_format quiesces the namespace: it sets pi_quiesce, so requests
 * that reach the data path wait (retry each loop iteration), and waits
 * until every request counted in the pi_users slots is done.  Then it
 * resets the store (a new empty one: every block's metadata the escape),
 * sets the format under the pi_gen seqcount, saves the metadata file, lets
 * requests go and publishes CORE_NS_EV_FORMAT.  A crash between the store
 * reset and the metadata save leaves the old format over an empty store:
 * every block escapes, no check fails.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/ns.h"
#include "core/atomic.h"
#include "core/pistore.h"
#include "rt/log.h"

#define PI_META_VERSION 1
#define FORMAT_DRAIN_MS 30000

void core_ns_pi_fmt(const struct core_ns *ns, struct core_pi_fmt *out)
{
        for (;;) {
                uint32_t g = atomic_load_explicit(&ns->pi_gen, memory_order_acquire);
                if (g & 1)
                        continue;
                *out = ns->pi;
                atomic_thread_fence(memory_order_acquire);
                if (atomic_load_explicit(&ns->pi_gen, memory_order_relaxed) == g)
                        return;
        }
}

uint32_t core_ns_md_per_block(const struct core_ns *ns)
{
        struct core_pi_fmt f;
        core_ns_pi_fmt(ns, &f);
        return f.md_size ? (uint32_t)core_pi_md_per_block(&f) : 0;
}

uint64_t core_ns_xfer_bytes(const struct core_ns *ns, uint64_t nlb, bool host_md)
{
        uint64_t b = nlb << ns->block_shift;
        if (host_md)
                b += nlb * core_ns_md_per_block(ns);
        return b;
}

bool core_ns_pi_idle(struct core_ns *ns)
{
        for (unsigned i = 0; i < CORE_NS_ORDER_SLOTS; i++)
                if (atomic_load(&ns->pi_users[i].n))
                        return false;
        return true;
}

json_t *core_ns_pi_to_json(const struct core_pi_fmt *f)
{
        if (!f->md_size)
                return NULL;
        return json_pack("{s:i, s:i, s:i, s:i, s:i, s:b, s:i}", "v", PI_META_VERSION, "type",
                         (int)f->type, "md", (int)f->md_size, "guard", (int)f->guard, "exp",
                         (int)f->pi_exp, "first", f->pi_first, "sts", (int)f->sts);
}

int core_ns_pi_from_json(json_t *j, struct core_pi_fmt *f, uint32_t block_size)
{
        int v = 0, type = 0, md = 0, guard = 0, exp = 0, first = 0, sts = 0;
        if (!json_is_object(j) ||
            json_unpack(j, "{s:i, s:i, s:i, s:i, s:i, s:b, s:i}", "v", &v, "type", &type, "md", &md,
                        "guard", &guard, "exp", &exp, "first", &first, "sts", &sts) ||
            v != PI_META_VERSION || type < 0 || type > 3 || md <= 0 || md > 0xffff || guard < 0 ||
            guard > 2 || exp < 0 || exp > CORE_PI_MAX_EXP || sts < 0 || sts > 64)
                return -EINVAL;
        memset(f, 0, sizeof(*f));
        f->block_size = block_size;
        f->type = (uint8_t)type;
        f->md_size = (uint16_t)md;
        f->guard = (uint8_t)guard;
        f->pi_exp = (uint8_t)exp;
        f->pi_first = first;
        f->sts = (uint8_t)sts;
        return core_pi_fmt_check(f, NULL, 0) ? -EINVAL : 0;
}

int core_ns_pi_open(struct core_ns *ns, bool fresh, char *err, size_t errlen)
{
        if (!ns->pi.md_size)
                return 0;
        return core_pistore_open(ns, (uint32_t)core_pi_md_per_block(&ns->pi), fresh, &ns->pistore,
                                 err, errlen);
}

struct apptab_node {
        struct core_pi_apptab t; /* first: ns->apptab points here */
        struct apptab_node *next;
};

static void free_retired(struct core_ns *ns)
{
        struct apptab_node *n = ns->apptab_retired;
        ns->apptab_retired = NULL;
        while (n) {
                struct apptab_node *next = n->next;
                free(n);
                n = next;
        }
}

void core_ns_pi_close(struct core_ns *ns)
{
        core_pistore_close(ns->pistore);
        ns->pistore = NULL;
        free_retired(ns);
        free(atomic_load(&ns->apptab));
        atomic_store(&ns->apptab, NULL);
}

/* Normalize and check a format for ns; 0 or -errno with err. */
static int fmt_ok(struct core_ns *ns, struct core_pi_fmt *f, char *err, size_t errlen)
{
        if (f->block_size && f->block_size != ns->block_size) {
                snprintf(err, errlen, "formatting cannot change the block size (%u)",
                         ns->block_size);
                return -EINVAL;
        }
        f->block_size = ns->block_size;
        if (f->type == 0 && f->md_size == 0) {
                memset(f, 0, sizeof(*f));
                f->block_size = ns->block_size;
                return 0;
        }
        return core_pi_fmt_check(f, err, errlen);
}

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

int core_ns_format(struct core_ns *ns, const struct core_pi_fmt *pi, core_origin_t origin,
                   char *err, size_t errlen)
{
        struct core_pi_fmt f = *pi;
        err[0] = 0;
        int rc = fmt_ok(ns, &f, err, errlen);
        if (rc)
                return rc;
        if (core_ns_sanitize_state(ns) == CORE_SAN_RUNNING) {
                snprintf(err, errlen, "a sanitize is in progress");
                return -EBUSY;
        }
        /* One format at a time; pi_quiesce also holds new requests. */
        uint32_t exp = 0;
        if (!atomic_compare_exchange_strong(&ns->pi_quiesce, &exp, 1)) {
                snprintf(err, errlen, "a format is in progress");
                return -EBUSY;
        }
        for (unsigned waited = 0; !core_ns_pi_idle(ns); waited++) {
                if (waited >= FORMAT_DRAIN_MS) {
                        atomic_store(&ns->pi_quiesce, 0);
                        snprintf(err, errlen, "commands in flight did not finish");
                        return -EBUSY;
                }
                sleep_ms(1);
        }
        /* The atomic-write journal applied and retired: none of its records (whose metadata
         * is the old format's) is replayed into the new store. */
        core_atomic_pi_quiesce(ns);
        /* The store first: a crash before the metadata file is saved leaves all escapes. */
        struct core_pistore *ns_store = NULL;
        if (f.md_size) {
                rc = core_pistore_open(ns, (uint32_t)core_pi_md_per_block(&f), true, &ns_store, err,
                                       errlen);
                if (rc) {
                        core_atomic_pi_resume(ns);
                        atomic_store(&ns->pi_quiesce, 0);
                        return rc;
                }
        }
        struct core_pistore *old_store = ns->pistore;
        struct core_pi_fmt old_fmt = ns->pi;
        pthread_mutex_lock(&ns->lock);
        atomic_fetch_add_explicit(&ns->pi_gen, 1, memory_order_acq_rel); /* odd */
        ns->pi = f;
        ns->pistore = ns_store;
        atomic_fetch_add_explicit(&ns->pi_gen, 1, memory_order_release); /* even */
        rc = core_ns_save_meta(ns);
        if (rc) {
                /* Not durable: back to the old format (its store file is gone: all escapes). */
                snprintf(err, errlen, "saving metadata: %s", strerror(-rc));
                atomic_fetch_add_explicit(&ns->pi_gen, 1, memory_order_acq_rel);
                ns->pi = old_fmt;
                ns->pistore = old_store;
                atomic_fetch_add_explicit(&ns->pi_gen, 1, memory_order_release);
        }
        pthread_mutex_unlock(&ns->lock);
        if (rc) {
                core_pistore_close(ns_store);
        } else if (old_store) {
                /* Same path as the new one (already replaced), or no metadata any more. */
                if (!ns_store && old_store->persistent)
                        unlink(old_store->path);
                core_pistore_close(old_store);
        }
        core_atomic_pi_resume(ns);
        atomic_store(&ns->pi_quiesce, 0);
        if (rc)
                return rc;
        LOG_INFO("core",
                 "namespace %s formatted: protection type %u, %u metadata bytes per "
                 "interval, guard %u, %u intervals per block",
                 ns->name, f.type, f.md_size, f.guard, 1u << f.pi_exp);
        struct core_ns_event ev = {.type = CORE_NS_EV_FORMAT,
                                   .ns = ns,
                                   .origin = origin,
                                   .old_val = old_fmt.type,
                                   .new_val = f.type};
        core_ns_publish(&ev);
        return 0;
}

int core_ns_set_apptab(struct core_ns *ns, const struct core_pi_apptag_range *r, size_t n,
                       core_origin_t origin, char *err, size_t errlen)
{
        (void)origin;
        struct apptab_node *node = calloc(1, sizeof(*node));
        if (!node)
                return -ENOMEM;
        int rc = core_pi_apptab_set(&node->t, r, n);
        if (rc < 0) {
                snprintf(err, errlen, "application tag ranges overlap, wrap or are too many");
                free(node);
                return rc;
        }
        pthread_mutex_lock(&ns->lock);
        /*
         * Readers (requests on reactors, counted in pi_users) load the
         * pointer once and use it until they end.  The old table waits in
         * the retired list; the list is freed once no request runs (every
         * slot seen 0 after the swap), or with the namespace.
         */
        struct apptab_node *old = (struct apptab_node *)atomic_exchange(&ns->apptab, &node->t);
        if (old) {
                old->next = ns->apptab_retired;
                ns->apptab_retired = old;
        }
        if (core_ns_pi_idle(ns))
                free_retired(ns);
        pthread_mutex_unlock(&ns->lock);
        return 0;
}

size_t core_ns_apptab(struct core_ns *ns, struct core_pi_apptag_range *out, size_t max)
{
        size_t n = 0;
        pthread_mutex_lock(&ns->lock);
        struct core_pi_apptab *t = atomic_load(&ns->apptab);
        if (t)
                for (; n < t->n && n < max; n++)
                        out[n] = t->r[n];
        pthread_mutex_unlock(&ns->lock);
        return n;
}
