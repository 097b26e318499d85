/*
 * A namespace's protection information state (issue 10): its metadata
 * format, the format change, the application tag table (core/ns.h).  The
 * engine is core/pi.c; the data path's protection stage is in core/req.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ns.h"

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

int core_ns_format(struct core_ns *ns, const struct core_pi_fmt *pi, core_origin_t origin,
                   char *err, size_t errlen)
{
        (void)ns;
        (void)pi;
        (void)origin;
        snprintf(err, errlen, "formatting with protection information is not implemented yet");
        return -ENOTSUP;
}

int core_ns_set_apptab(struct core_ns *ns, const struct core_pi_apptag_range *r, size_t n,
                       core_origin_t origin, char *err, size_t errlen)
{
        (void)origin;
        struct core_pi_apptab *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        int rc = core_pi_apptab_set(t, r, n);
        if (rc < 0) {
                snprintf(err, errlen, "application tag ranges overlap, wrap or are too many");
                free(t);
                return rc;
        }
        pthread_mutex_lock(&ns->lock);
        struct core_pi_apptab *old = ns->apptab;
        ns->apptab = t;
        pthread_mutex_unlock(&ns->lock);
        /* TODO(issue 10, core): readers on reactors hold no lock; free the old table
         * only after they are done (the data path helper replaces this). */
        (void)old;
        return 0;
}

size_t core_ns_apptab(struct core_ns *ns, struct core_pi_apptag_range *out, size_t max)
{
        size_t n = 0;
        pthread_mutex_lock(&ns->lock);
        if (ns->apptab)
                for (; n < ns->apptab->n && n < max; n++)
                        out[n] = ns->apptab->r[n];
        pthread_mutex_unlock(&ns->lock);
        return n;
}
