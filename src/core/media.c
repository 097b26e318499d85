/*
 * Failing media (core/media.h): physical elements with an interleaved
 * LBA mapping, the list of unrecoverable ranges, their check on the data
 * path, offline depopulation and restoration, and their persistence in
 * the namespace metadata.
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/media.h"
#include "rt/log.h"

struct elem {
        uint8_t state; /* enum core_elem_state */
        uint8_t health;
        bool tracked; /* FAILED: its LBAs were found by a scan (core_media_scan) */
};

struct core_media {
        pthread_mutex_t ctl;  /* serialises control-path changes and their saves */
        pthread_mutex_t lock; /* the state below; held only for memory work, never for I/O */
        /* Under lock. */
        uint32_t nelem;      /* 0 = no element model */
        uint32_t interleave; /* blocks per stripe unit */
        struct elem elem[CORE_MEDIA_MAX_ELEMENTS];
        uint32_t live_ids[CORE_MEDIA_MAX_ELEMENTS]; /* ids of elements not depopulated, ascending */
        uint32_t nlive;
        uint32_t nfailed;
        uint32_t depop_id;        /* element being depopulated, 0 = none */
        uint64_t full_blocks;     /* capacity before the first depopulation (restore target) */
        struct core_lba_range *r; /* sorted, disjoint, non-adjacent */
        uint32_t nr;
        uint32_t generation;
        /* Counters (atomics: the data path adds to some without the lock). */
        _Atomic uint64_t unrecovered_reads, write_errors, marks, healed_blocks, element_changes,
            depopulations, restorations;
};

static uint8_t default_health(enum core_elem_state s)
{
        switch (s) {
        case CORE_ELEM_DEGRADED:
                return CORE_ELEM_HEALTH_AT_LIMIT;
        case CORE_ELEM_FAILED:
                return CORE_ELEM_HEALTH_FAILED;
        case CORE_ELEM_DEPOPULATED:
                return CORE_ELEM_HEALTH_DEPOP_OK;
        default:
                return CORE_ELEM_HEALTH_OK;
        }
}

/* Recompute live_ids, nfailed and ns->media_flags (lock held). */
static void refresh(struct core_ns *ns)
{
        struct core_media *m = ns->media;
        m->nlive = 0;
        m->nfailed = 0;
        for (uint32_t i = 0; i < m->nelem; i++) {
                if (m->elem[i].state == CORE_ELEM_DEPOPULATED)
                        continue;
                m->live_ids[m->nlive++] = i + 1;
                if (m->elem[i].state == CORE_ELEM_FAILED)
                        m->nfailed++;
        }
        uint32_t f = 0;
        if (m->nr || m->nfailed)
                f |= CORE_MEDIA_F_BAD;
        if (m->depop_id)
                f |= CORE_MEDIA_F_DEPOP;
        atomic_store_explicit(&ns->media_flags, f, memory_order_release);
}

int core_media_init(struct core_ns *ns)
{
        struct core_media *m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        pthread_mutex_init(&m->lock, NULL);
        pthread_mutex_init(&m->ctl, NULL);
        m->interleave = CORE_MEDIA_DEFAULT_INTERLEAVE;
        ns->media = m;
        atomic_init(&ns->media_flags, 0);
        return 0;
}

void core_media_free(struct core_ns *ns)
{
        struct core_media *m = ns->media;
        if (!m)
                return;
        pthread_mutex_destroy(&m->lock);
        pthread_mutex_destroy(&m->ctl);
        free(m->r);
        free(m);
        ns->media = NULL;
}

/* ---- LBA <-> element (lock held) ---- */

static uint32_t elem_of(const struct core_media *m, uint64_t lba)
{
        if (!m->nlive)
                return 0;
        return m->live_ids[(lba / m->interleave) % m->nlive];
}

static uint32_t live_pos(const struct core_media *m, uint32_t id)
{
        for (uint32_t k = 0; k < m->nlive; k++)
                if (m->live_ids[k] == id)
                        return k;
        return UINT32_MAX;
}

/* Blocks of [0, nsze) on the live element at position k. */
static uint64_t elem_blocks(const struct core_media *m, uint32_t k, uint64_t nsze)
{
        if (k >= m->nlive)
                return 0;
        uint64_t il = m->interleave, units = nsze / il, rem = nsze % il;
        uint64_t n = (units / m->nlive + (k < units % m->nlive ? 1 : 0)) * il;
        if (rem && k == units % m->nlive)
                n += rem;
        return n;
}

/* Whether stripe unit u lies on a failed element (counted by tracked_only's rule). */
static bool unit_bad(const struct core_media *m, uint64_t u, bool tracked_only)
{
        if (!m->nlive)
                return false;
        uint32_t id = m->live_ids[u % m->nlive];
        return m->elem[id - 1].state == CORE_ELEM_FAILED &&
               (!tracked_only || m->elem[id - 1].tracked);
}

/*
 * Whether lba is unrecoverable, and if so the end of the bad piece holding
 * it (a marked range or a run of failed stripe units).
 */
static bool bad_at(const struct core_media *m, uint64_t lba, bool tracked_only, uint64_t *end)
{
        /* Binary search: the last range starting at or before lba. */
        uint32_t lo = 0, hi = m->nr;
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (m->r[mid].lba <= lba)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo && lba < m->r[lo - 1].lba + m->r[lo - 1].nlb) {
                *end = m->r[lo - 1].lba + m->r[lo - 1].nlb;
                return true;
        }
        if (m->nfailed && unit_bad(m, lba / m->interleave, tracked_only)) {
                /*
                 * The run of bad units from here: the units cycle over the
                 * live elements, so nlive in a row bad means every later one
                 * is too.  (One unit at a time, a caller extending over
                 * adjacent bad pieces walked the whole namespace when every
                 * live element had failed: fuzz_rpc timed out in
                 * namespace_list on a 1 TiB namespace.)
                 */
                uint64_t u = lba / m->interleave, k = 1;
                while (k < m->nlive && unit_bad(m, u + k, tracked_only))
                        k++;
                *end = k == m->nlive ? UINT64_MAX : (u + k) * m->interleave;
                return true;
        }
        return false;
}

/* The first failed element's LBA at or after lba (UINT64_MAX: none). */
static uint64_t next_failed(const struct core_media *m, uint64_t lba, bool tracked_only)
{
        if (!m->nfailed || !m->nlive)
                return UINT64_MAX;
        uint64_t u0 = lba / m->interleave, best = UINT64_MAX;
        for (uint32_t k = 0; k < m->nlive; k++) {
                const struct elem *e = &m->elem[m->live_ids[k] - 1];
                if (e->state != CORE_ELEM_FAILED || (tracked_only && !e->tracked))
                        continue;
                uint64_t u = u0 + (k + m->nlive - u0 % m->nlive) % m->nlive;
                uint64_t s = u * m->interleave;
                if (s < lba)
                        s = lba; /* u == u0: lba is inside the unit */
                if (s < best)
                        best = s;
        }
        return best;
}

/* The first unrecoverable LBA in [lba, end): true and *first. */
static bool first_bad(const struct core_media *m, uint64_t lba, uint64_t end, bool tracked_only,
                      uint64_t *first)
{
        uint64_t best = UINT64_MAX, e;
        if (bad_at(m, lba, tracked_only, &e)) {
                *first = lba;
                return true;
        }
        /* The first range starting after lba. */
        uint32_t lo = 0, hi = m->nr;
        while (lo < hi) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (m->r[mid].lba <= lba)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo < m->nr)
                best = m->r[lo].lba;
        uint64_t f = next_failed(m, lba, tracked_only);
        if (f < best)
                best = f;
        if (best >= end)
                return false;
        *first = best;
        return true;
}

static int unrecoverable(struct core_ns *ns, uint64_t lba, uint64_t nlb, bool tracked_only,
                         struct core_lba_range *out)
{
        struct core_media *m = ns->media;
        if (!m ||
            !(atomic_load_explicit(&ns->media_flags, memory_order_acquire) & CORE_MEDIA_F_BAD))
                return 0;
        uint64_t end = nlb > UINT64_MAX - lba ? UINT64_MAX : lba + nlb, first, e;
        int found = 0;
        pthread_mutex_lock(&m->lock);
        if (first_bad(m, lba, end, tracked_only, &first)) {
                uint64_t cur = first;
                /* Extend over adjacent bad pieces (ranges and failed units). */
                while (cur < end && bad_at(m, cur, tracked_only, &e))
                        cur = e;
                out->lba = first;
                out->nlb = (cur < end ? cur : end) - first;
                found = 1;
        }
        pthread_mutex_unlock(&m->lock);
        return found;
}

int core_ns_unrecoverable(struct core_ns *ns, uint64_t lba, uint64_t nlb,
                          struct core_lba_range *out)
{
        return unrecoverable(ns, lba, nlb, false, out);
}

int core_media_unrecoverable_tracked(struct core_ns *ns, uint64_t lba, uint64_t nlb,
                                     struct core_lba_range *out)
{
        return unrecoverable(ns, lba, nlb, true, out);
}

uint64_t core_media_untracked_blocks(struct core_ns *ns)
{
        struct core_media *m = ns->media;
        if (!m)
                return 0;
        uint64_t n = 0, nsze = core_ns_blocks(ns);
        pthread_mutex_lock(&m->lock);
        for (uint32_t k = 0; k < m->nlive; k++) {
                const struct elem *e = &m->elem[m->live_ids[k] - 1];
                if (e->state == CORE_ELEM_FAILED && !e->tracked)
                        n += elem_blocks(m, k, nsze);
        }
        pthread_mutex_unlock(&m->lock);
        return n;
}

/* ---- The range list (lock held) ---- */

/*
 * Set or clear [lba, end) in the sorted list.  Returns the number of
 * blocks whose state changed, or -ENOSPC (nothing changed).
 */
static int64_t ranges_apply(struct core_media *m, uint64_t lba, uint64_t end, bool bad)
{
        /* Build the new list in a temporary array: simple and bounded. */
        uint32_t cap = m->nr + 2;
        struct core_lba_range *n = malloc(sizeof(*n) * cap);
        if (!n)
                return -ENOMEM;
        uint32_t k = 0;
        uint64_t before = 0, after = 0;
        for (uint32_t i = 0; i < m->nr; i++)
                before += m->r[i].nlb;
        if (bad) {
                bool placed = false;
                for (uint32_t i = 0; i <= m->nr; i++) {
                        struct core_lba_range cur;
                        if (i < m->nr && (placed || m->r[i].lba < lba)) {
                                cur = m->r[i];
                        } else if (!placed) {
                                cur = (struct core_lba_range){lba, end - lba};
                                placed = true;
                                i--; /* the same old range again next turn */
                        } else {
                                break;
                        }
                        if (k && n[k - 1].lba + n[k - 1].nlb >= cur.lba) {
                                uint64_t e = cur.lba + cur.nlb;
                                if (e > n[k - 1].lba + n[k - 1].nlb)
                                        n[k - 1].nlb = e - n[k - 1].lba;
                        } else {
                                n[k++] = cur;
                        }
                }
        } else {
                for (uint32_t i = 0; i < m->nr; i++) {
                        uint64_t s = m->r[i].lba, e = s + m->r[i].nlb;
                        if (e <= lba || s >= end) {
                                n[k++] = m->r[i];
                                continue;
                        }
                        if (s < lba)
                                n[k++] = (struct core_lba_range){s, lba - s};
                        if (e > end)
                                n[k++] = (struct core_lba_range){end, e - end};
                }
        }
        if (k > CORE_MEDIA_MAX_RANGES) {
                free(n);
                return -ENOSPC;
        }
        for (uint32_t i = 0; i < k; i++)
                after += n[i].nlb;
        free(m->r);
        m->r = n;
        m->nr = k;
        return (int64_t)(after > before ? after - before : before - after);
}

/* ---- Persistence and events ---- */

static void publish(struct core_ns *ns, core_origin_t origin, uint32_t id, uint32_t what)
{
        struct core_ns_event ev = {
            .type = CORE_NS_EV_MEDIA, .ns = ns, .origin = origin, .old_val = id, .new_val = what};
        core_ns_publish(&ev);
}

/*
 * Persist the model as it is now.  Lock order: ns->lock, then m->lock
 * (core_media_to_json takes it inside core_ns_save_meta): never call with
 * m->lock held.  Changes are applied in memory first, then saved; a save
 * that fails leaves the change in effect for this run and is reported.
 */
static int save(struct core_ns *ns)
{
        pthread_mutex_lock(&ns->lock);
        int rc = core_ns_save_meta(ns);
        pthread_mutex_unlock(&ns->lock);
        return rc;
}

static const char *const state_names[] = {"ok", "degraded", "failed", "depopulated"};

json_t *core_media_to_json(struct core_ns *ns)
{
        /* Called by core_ns_save_meta (ns->lock held): m->lock inside it. */
        struct core_media *m = ns->media;
        if (!m)
                return NULL;
        pthread_mutex_lock(&m->lock);
        if (!m->nelem && !m->nr && !m->generation) {
                pthread_mutex_unlock(&m->lock);
                return NULL; /* never used: nothing to save */
        }
        json_t *j = json_object();
        json_object_set_new(j, "elements", json_integer(m->nelem));
        json_object_set_new(j, "interleave", json_integer(m->interleave));
        json_t *el = json_array();
        for (uint32_t i = 0; i < m->nelem; i++)
                json_array_append_new(
                    el, json_pack("{s:s, s:i, s:b}", "state", state_names[m->elem[i].state],
                                  "health", m->elem[i].health, "tracked", m->elem[i].tracked));
        json_object_set_new(j, "element", el);
        json_t *ra = json_array();
        for (uint32_t i = 0; i < m->nr; i++)
                json_array_append_new(
                    ra, json_pack("[I, I]", (json_int_t)m->r[i].lba, (json_int_t)m->r[i].nlb));
        json_object_set_new(j, "bad", ra);
        json_object_set_new(j, "depop_id", json_integer(m->depop_id));
        json_object_set_new(j, "full_blocks", json_integer((json_int_t)m->full_blocks));
        json_object_set_new(j, "generation", json_integer(m->generation));
        json_t *st = json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "unrecovered_reads",
                               (json_int_t)atomic_load(&m->unrecovered_reads), "write_errors",
                               (json_int_t)atomic_load(&m->write_errors), "marks",
                               (json_int_t)atomic_load(&m->marks), "healed_blocks",
                               (json_int_t)atomic_load(&m->healed_blocks), "element_changes",
                               (json_int_t)atomic_load(&m->element_changes), "depopulations",
                               (json_int_t)atomic_load(&m->depopulations), "restorations",
                               (json_int_t)atomic_load(&m->restorations));
        json_object_set_new(j, "stats", st);
        pthread_mutex_unlock(&m->lock);
        return j;
}

static int get_u64(json_t *o, const char *k, uint64_t *v)
{
        json_t *x = json_object_get(o, k);
        if (!x)
                return 0;
        if (!json_is_integer(x) || json_integer_value(x) < 0)
                return -EINVAL;
        *v = (uint64_t)json_integer_value(x);
        return 0;
}

int core_media_from_json(struct core_ns *ns, json_t *j)
{
        struct core_media *m = ns->media;
        uint64_t ne = 0, il = CORE_MEDIA_DEFAULT_INTERLEAVE, dep = 0, full = 0, gen = 0;
        if (!m || !json_is_object(j) || get_u64(j, "elements", &ne) ||
            get_u64(j, "interleave", &il) || get_u64(j, "depop_id", &dep) ||
            get_u64(j, "full_blocks", &full) || get_u64(j, "generation", &gen) ||
            ne > CORE_MEDIA_MAX_ELEMENTS || il == 0 || il > UINT32_MAX || dep > ne)
                return -EINVAL;
        json_t *el = json_object_get(j, "element");
        if (ne && (!json_is_array(el) || json_array_size(el) != ne))
                return -EINVAL;
        for (uint32_t i = 0; i < ne; i++) {
                const char *s = NULL;
                int h = 0;
                if (json_unpack(json_array_get(el, i), "{s:s, s:i}", "state", &s, "health", &h) ||
                    h < 0 || h > 255)
                        return -EINVAL;
                unsigned st = 0;
                while (st < 4 && strcmp(state_names[st], s))
                        st++;
                if (st == 4)
                        return -EINVAL;
                m->elem[i].state = (uint8_t)st;
                m->elem[i].health = (uint8_t)h;
                m->elem[i].tracked =
                    json_is_true(json_object_get(json_array_get(el, i), "tracked"));
        }
        json_t *ra = json_object_get(j, "bad");
        size_t nr = json_is_array(ra) ? json_array_size(ra) : 0;
        if ((ra && !json_is_array(ra)) || nr > CORE_MEDIA_MAX_RANGES)
                return -EINVAL;
        struct core_lba_range *r = nr ? calloc(nr, sizeof(*r)) : NULL;
        if (nr && !r)
                return -ENOMEM;
        for (size_t i = 0; i < nr; i++) {
                json_int_t a = -1, b = -1;
                if (json_unpack(json_array_get(ra, i), "[I, I]", &a, &b) || a < 0 || b <= 0 ||
                    (uint64_t)a > UINT64_MAX - (uint64_t)b ||
                    (i && (uint64_t)a <= r[i - 1].lba + r[i - 1].nlb)) {
                        free(r);
                        return -EINVAL;
                }
                r[i].lba = (uint64_t)a;
                r[i].nlb = (uint64_t)b;
        }
        json_t *st = json_object_get(j, "stats");
        if (st) {
                uint64_t v[7] = {0};
                const char *keys[7] = {"unrecovered_reads", "write_errors",    "marks",
                                       "healed_blocks",     "element_changes", "depopulations",
                                       "restorations"};
                _Atomic uint64_t *dst[7] = {
                    &m->unrecovered_reads, &m->write_errors,  &m->marks,       &m->healed_blocks,
                    &m->element_changes,   &m->depopulations, &m->restorations};
                for (int i = 0; i < 7; i++) {
                        if (get_u64(st, keys[i], &v[i])) {
                                free(r);
                                return -EINVAL;
                        }
                        atomic_store(dst[i], v[i]);
                }
        }
        free(m->r);
        m->r = r;
        m->nr = (uint32_t)nr;
        m->nelem = (uint32_t)ne;
        m->interleave = (uint32_t)il;
        m->depop_id = (uint32_t)dep;
        m->full_blocks = full;
        m->generation = (uint32_t)gen;
        refresh(ns);
        return 0;
}

/* ---- Configuration and elements ---- */

uint32_t core_media_elements(const struct core_ns *ns)
{
        return ns->media ? ns->media->nelem : 0;
}

uint32_t core_media_interleave(const struct core_ns *ns)
{
        return ns->media ? ns->media->interleave : CORE_MEDIA_DEFAULT_INTERLEAVE;
}

int core_media_configure(struct core_ns *ns, uint32_t elements, uint32_t interleave, char *err,
                         size_t errlen)
{
        struct core_media *m = ns->media;
        err[0] = 0;
        if (!m)
                return -ENOMEM;
        if (elements > CORE_MEDIA_MAX_ELEMENTS) {
                snprintf(err, errlen, "elements must be 0..%d", CORE_MEDIA_MAX_ELEMENTS);
                return -EINVAL;
        }
        pthread_mutex_lock(&m->ctl);
        pthread_mutex_lock(&m->lock);
        uint32_t il = interleave ? interleave : m->interleave;
        if (elements == m->nelem && il == m->interleave) {
                pthread_mutex_unlock(&m->lock);
                pthread_mutex_unlock(&m->ctl);
                return 0;
        }
        bool busy = m->depop_id != 0;
        for (uint32_t i = 0; i < m->nelem; i++)
                if (m->elem[i].state == CORE_ELEM_FAILED ||
                    m->elem[i].state == CORE_ELEM_DEPOPULATED)
                        busy = true;
        if (busy) {
                pthread_mutex_unlock(&m->lock);
                pthread_mutex_unlock(&m->ctl);
                snprintf(err, errlen,
                         "an element is failed or depopulated: heal or restore it before "
                         "changing elements/element_interleave");
                return -EBUSY;
        }
        m->nelem = elements;
        m->interleave = il;
        for (uint32_t i = 0; i < CORE_MEDIA_MAX_ELEMENTS; i++)
                m->elem[i] = (struct elem){CORE_ELEM_OK, CORE_ELEM_HEALTH_OK, false};
        m->generation++;
        refresh(ns);
        pthread_mutex_unlock(&m->lock);
        int rc = save(ns);
        pthread_mutex_unlock(&m->ctl);
        if (rc)
                snprintf(err, errlen, "saving metadata: %s", strerror(-rc));
        LOG_INFO("core", "namespace %s: %u physical elements, interleave %u blocks", ns->name,
                 elements, il);
        publish(ns, NULL, 0, CORE_MEDIA_CHG_ELEMENT);
        return rc;
}

int core_media_element_info(struct core_ns *ns, uint32_t id, struct core_elem_info *out)
{
        struct core_media *m = ns->media;
        if (!m)
                return -ENOENT;
        pthread_mutex_lock(&m->lock);
        if (id == 0 || id > m->nelem) {
                pthread_mutex_unlock(&m->lock);
                return -ENOENT;
        }
        const struct elem *e = &m->elem[id - 1];
        out->id = id;
        out->state = (enum core_elem_state)e->state;
        out->health = e->health;
        out->capacity_blocks = elem_blocks(m, live_pos(m, id), core_ns_blocks(ns));
        out->restorable = e->state == CORE_ELEM_DEPOPULATED;
        if (id == m->depop_id)
                out->health = CORE_ELEM_HEALTH_DEPOP_RUN;
        pthread_mutex_unlock(&m->lock);
        return 0;
}

uint32_t core_media_lba_element(struct core_ns *ns, uint64_t lba)
{
        struct core_media *m = ns->media;
        if (!m || lba >= core_ns_blocks(ns))
                return 0;
        pthread_mutex_lock(&m->lock);
        uint32_t id = elem_of(m, lba);
        pthread_mutex_unlock(&m->lock);
        return id;
}

int core_media_set_element(struct core_ns *ns, uint32_t id, enum core_elem_state state, int health,
                           core_origin_t origin, char *err, size_t errlen)
{
        struct core_media *m = ns->media;
        err[0] = 0;
        if (state > CORE_ELEM_FAILED) {
                snprintf(err, errlen, "state must be ok, degraded or failed");
                return -EINVAL;
        }
        if (health < -1 || health > 0xcf) {
                snprintf(err, errlen, "health must be 0..207 (SBC-4 00h..CFh)");
                return -EINVAL;
        }
        if (!m) {
                snprintf(err, errlen, "no element model");
                return -ENOENT;
        }
        pthread_mutex_lock(&m->ctl);
        pthread_mutex_lock(&m->lock);
        int rc = 0;
        if (id == 0 || id > m->nelem) {
                snprintf(err, errlen, "no element %u (the namespace has %u)", id, m->nelem);
                rc = -ENOENT;
        } else if (m->elem[id - 1].state == CORE_ELEM_DEPOPULATED || id == m->depop_id) {
                snprintf(err, errlen, "element %u is depopulated (restore it first)", id);
                rc = -EBUSY;
        }
        if (rc) {
                pthread_mutex_unlock(&m->lock);
                pthread_mutex_unlock(&m->ctl);
                return rc;
        }
        struct elem *e = &m->elem[id - 1], old = *e;
        e->state = (uint8_t)state;
        e->health = health < 0 ? default_health(state) : (uint8_t)health;
        if (state != CORE_ELEM_FAILED || old.state != CORE_ELEM_FAILED)
                e->tracked = false; /* a new failure: its LBAs are untracked until a scan */
        uint8_t h = e->health;
        bool changed = e->state != old.state || e->health != old.health;
        if (changed) {
                m->generation++;
                refresh(ns);
                atomic_fetch_add(&m->element_changes, 1);
        }
        pthread_mutex_unlock(&m->lock);
        if (changed && (rc = save(ns)))
                snprintf(err, errlen, "saving metadata: %s", strerror(-rc));
        pthread_mutex_unlock(&m->ctl);
        if (!changed)
                return 0;
        LOG_INFO("core", "namespace %s: element %u %s, health 0x%02x", ns->name, id,
                 state_names[state], h);
        publish(ns, origin, id, CORE_MEDIA_CHG_ELEMENT);
        return rc;
}

/* ---- Marks ---- */

int core_media_mark(struct core_ns *ns, uint64_t lba, uint64_t nlb, bool bad, core_origin_t origin)
{
        struct core_media *m = ns->media;
        if (!m)
                return -ENOMEM;
        if (nlb == 0 || !core_ns_range_ok(ns, lba, nlb))
                return -ERANGE;
        pthread_mutex_lock(&m->ctl);
        pthread_mutex_lock(&m->lock);
        int64_t changed = ranges_apply(m, lba, lba + nlb, bad);
        if (changed > 0) {
                m->generation++;
                refresh(ns);
                if (bad)
                        atomic_fetch_add(&m->marks, 1);
                else
                        atomic_fetch_add(&m->healed_blocks, (uint64_t)changed);
        }
        pthread_mutex_unlock(&m->lock);
        int rc = changed < 0 ? (int)changed : 0;
        if (changed > 0)
                rc = save(ns);
        pthread_mutex_unlock(&m->ctl);
        if (changed > 0) {
                LOG_INFO("core", "namespace %s: %llu blocks at %llu %s", ns->name,
                         (unsigned long long)nlb, (unsigned long long)lba,
                         bad ? "marked unrecoverable" : "no longer unrecoverable");
                publish(ns, origin, 0, CORE_MEDIA_CHG_RANGES);
        }
        return rc;
}

struct mark_job {
        struct core_ns *ns;
        uint64_t lba, nlb;
        bool bad;
        core_origin_t origin;
        struct rt_reactor *r;
        void (*done)(void *arg, int rc);
        void *arg;
        int rc;
};

static void mark_done_on_reactor(void *arg)
{
        struct mark_job *j = arg;
        j->done(j->arg, j->rc);
        core_ns_put(j->ns);
        free(j);
}

static void *mark_thread(void *arg)
{
        struct mark_job *j = arg;
        j->rc = core_media_mark(j->ns, j->lba, j->nlb, j->bad, j->origin);
        if (rt_msg_send(j->r, mark_done_on_reactor, j) != 0)
                mark_done_on_reactor(j); /* the reactor is gone (shutdown) */
        return NULL;
}

int core_media_mark_async(struct core_ns *ns, uint64_t lba, uint64_t nlb, bool bad,
                          core_origin_t origin, struct rt_reactor *r,
                          void (*done)(void *arg, int rc), void *arg)
{
        struct mark_job *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (struct mark_job){ns, lba, nlb, bad, origin, r, done, arg, 0};
        core_ns_get(ns);
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &a, mark_thread, j);
        pthread_attr_destroy(&a);
        if (rc) {
                core_ns_put(ns);
                free(j);
                return -rc;
        }
        return 0;
}

uint32_t core_media_ranges(struct core_ns *ns, struct core_lba_range *out, uint32_t max)
{
        struct core_media *m = ns->media;
        if (!m)
                return 0;
        pthread_mutex_lock(&m->lock);
        uint32_t n = m->nr < max ? m->nr : max;
        memcpy(out, m->r, sizeof(*out) * n);
        pthread_mutex_unlock(&m->lock);
        return n;
}

void core_media_get_stats(struct core_ns *ns, struct core_media_stats *out)
{
        struct core_media *m = ns->media;
        memset(out, 0, sizeof(*out));
        if (!m)
                return;
        pthread_mutex_lock(&m->lock);
        out->unrecovered_reads = atomic_load(&m->unrecovered_reads);
        out->write_errors = atomic_load(&m->write_errors);
        out->media_errors = out->unrecovered_reads + out->write_errors;
        out->marks = atomic_load(&m->marks);
        out->healed_blocks = atomic_load(&m->healed_blocks);
        out->element_changes = atomic_load(&m->element_changes);
        out->depopulations = atomic_load(&m->depopulations);
        out->restorations = atomic_load(&m->restorations);
        out->marked_ranges = m->nr;
        for (uint32_t i = 0; i < m->nr; i++)
                out->marked_blocks += m->r[i].nlb;
        out->generation = m->generation;
        pthread_mutex_unlock(&m->lock);
}

/* ---- Data path ---- */

static bool reads_medium(enum core_op op)
{
        return op == CORE_OP_READ || op == CORE_OP_COMPARE || op == CORE_OP_VERIFY ||
               op == CORE_OP_COMPARE_AND_WRITE || op == CORE_OP_ORWRITE;
}

static bool overwrites(const struct core_req *req)
{
        switch (req->op) {
        case CORE_OP_WRITE:
        case CORE_OP_WRITE_ZEROES:
        case CORE_OP_WRITE_SAME:
        case CORE_OP_WRITE_SCATTERED:
                return true;
        case CORE_OP_DEALLOCATE:
                return req->ns->thin && !(req->flags & CORE_REQ_ANCHOR);
        default:
                return false;
        }
}

/* The first unrecoverable (or, failed_only, failed-element) LBA of [lba, lba+nlb). */
static bool req_first_bad(struct core_media *m, uint64_t lba, uint64_t nlb, bool failed_only,
                          uint64_t *first)
{
        if (!nlb)
                return false;
        if (failed_only) {
                uint64_t f = next_failed(m, lba, false);
                if (f < lba + nlb) {
                        *first = f;
                        return true;
                }
                return false;
        }
        return first_bad(m, lba, lba + nlb, false, first);
}

enum core_status core_media_check(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        struct core_media *m = ns->media;
        uint32_t f = atomic_load_explicit(&ns->media_flags, memory_order_acquire);
        if (!m || !f || req->op == CORE_OP_FLUSH)
                return CORE_OK;
        if (f & CORE_MEDIA_F_DEPOP)
                return CORE_E_DEPOP_IN_PROGRESS;
        bool rd = reads_medium(req->op), wr = overwrites(req);
        if (!rd && !wr)
                return CORE_OK;
        enum core_status st = CORE_OK;
        uint64_t first = 0;
        bool any = false;
        pthread_mutex_lock(&m->lock);
        if (req->op == CORE_OP_WRITE_SCATTERED) {
                for (uint32_t i = 0; i < req->nr_ranges && st == CORE_OK; i++) {
                        const struct core_lba_range *r = &req->ranges[i];
                        if (req_first_bad(m, r->lba, r->nlb, true, &first))
                                st = CORE_E_WRITE_ERROR;
                        else if (!any && req_first_bad(m, r->lba, r->nlb, false, &first))
                                any = true;
                }
        } else if (rd) {
                if (req_first_bad(m, req->lba, req->nlb, false, &first))
                        st = CORE_E_UNRECOVERED_READ;
        } else if (req->op == CORE_OP_DEALLOCATE) {
                /* A hint: never an error, even on a failed element; it heals marks. */
                any = req_first_bad(m, req->lba, req->nlb, false, &first);
        } else {
                if (req_first_bad(m, req->lba, req->nlb, true, &first))
                        st = CORE_E_WRITE_ERROR;
                else
                        any = req_first_bad(m, req->lba, req->nlb, false, &first);
        }
        pthread_mutex_unlock(&m->lock);
        if (st != CORE_OK) {
                req->info = first;
                req->info_valid = true;
                atomic_fetch_add(
                    st == CORE_E_UNRECOVERED_READ ? &m->unrecovered_reads : &m->write_errors, 1);
                return st;
        }
        req->media_heal = any;
        return CORE_OK;
}

/* Persist and announce a heal the data path made (off the reactor: the save fsyncs). */
static void *heal_thread(void *arg)
{
        struct core_ns *ns = arg;
        struct core_media *m = ns->media;
        pthread_mutex_lock(&m->ctl);
        int rc = save(ns);
        pthread_mutex_unlock(&m->ctl);
        if (rc)
                LOG_WARN("core", "namespace %s: healed blocks not saved: %s", ns->name,
                         strerror(-rc));
        publish(ns, NULL, 0, CORE_MEDIA_CHG_RANGES);
        core_ns_put(ns);
        return NULL;
}

void core_media_done(struct core_req *req, enum core_status st)
{
        if (!req->media_heal)
                return;
        req->media_heal = false;
        if (st != CORE_OK)
                return;
        struct core_ns *ns = req->ns;
        struct core_media *m = ns->media;
        /*
         * The blocks hold the new data: clear their marks in memory now,
         * before the host hears of the completion, so its next read
         * succeeds; persisting and publishing happen off the reactor.
         */
        int64_t healed = 0;
        pthread_mutex_lock(&m->lock);
        if (req->op == CORE_OP_WRITE_SCATTERED) {
                for (uint32_t i = 0; i < req->nr_ranges; i++) {
                        const struct core_lba_range *r = &req->ranges[i];
                        int64_t n = r->nlb ? ranges_apply(m, r->lba, r->lba + r->nlb, false) : 0;
                        if (n > 0)
                                healed += n;
                }
        } else {
                healed = ranges_apply(m, req->lba, req->lba + req->nlb, false);
        }
        if (healed > 0) {
                m->generation++;
                atomic_fetch_add(&m->healed_blocks, (uint64_t)healed);
                refresh(ns);
        }
        pthread_mutex_unlock(&m->lock);
        if (healed <= 0)
                return;
        core_ns_get(ns);
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, heal_thread, ns)) {
                LOG_WARN("core", "namespace %s: healed blocks not saved (no thread)", ns->name);
                core_ns_put(ns);
        }
        pthread_attr_destroy(&a);
}

int core_media_scan(struct core_ns *ns, core_origin_t origin)
{
        struct core_media *m = ns->media;
        if (!m)
                return 0;
        pthread_mutex_lock(&m->ctl);
        pthread_mutex_lock(&m->lock);
        int n = 0;
        for (uint32_t i = 0; i < m->nelem; i++) {
                if (m->elem[i].state == CORE_ELEM_FAILED && !m->elem[i].tracked) {
                        m->elem[i].tracked = true;
                        n++;
                }
        }
        if (n)
                m->generation++;
        pthread_mutex_unlock(&m->lock);
        int rc = n ? save(ns) : 0;
        pthread_mutex_unlock(&m->ctl);
        if (rc)
                LOG_WARN("core", "namespace %s: scan result not saved: %s", ns->name,
                         strerror(-rc));
        if (n)
                publish(ns, origin, 0, CORE_MEDIA_CHG_RANGES);
        return n;
}

/* ---- Depopulation ---- */

bool core_media_depopulated(struct core_ns *ns)
{
        struct core_media *m = ns->media;
        if (!m)
                return false;
        pthread_mutex_lock(&m->lock);
        bool d = m->full_blocks != 0 || m->depop_id != 0;
        pthread_mutex_unlock(&m->lock);
        return d;
}

uint32_t core_media_depop_element(struct core_ns *ns)
{
        struct core_media *m = ns->media;
        if (!m)
                return 0;
        pthread_mutex_lock(&m->lock);
        uint32_t id = m->depop_id;
        pthread_mutex_unlock(&m->lock);
        return id;
}

struct depop_job {
        struct core_ns *ns;
        core_origin_t origin;
        struct rt_reactor *r;
        void (*done)(void *arg, bool ok);
        void *arg;
        bool ok;
};

/* Finish the depopulation of m->depop_id: resize, state, save, events. */
static bool depop_finish(struct core_ns *ns, core_origin_t origin)
{
        struct core_media *m = ns->media;
        char err[256];
        pthread_mutex_lock(&m->ctl);
        pthread_mutex_lock(&m->lock);
        uint32_t id = m->depop_id;
        if (!id) {
                pthread_mutex_unlock(&m->lock);
                pthread_mutex_unlock(&m->ctl);
                return false;
        }
        uint64_t nsze = core_ns_blocks(ns);
        uint64_t newsz = nsze - elem_blocks(m, live_pos(m, id), nsze);
        if (!m->full_blocks)
                m->full_blocks = nsze;
        pthread_mutex_unlock(&m->lock);
        /* The capacity first: CORE_NS_EV_CAPACITY reaches every host. */
        int rc = newsz ? core_ns_resize(ns, newsz, true, err, sizeof(err)) : -EINVAL;
        pthread_mutex_lock(&m->lock);
        m->depop_id = 0;
        struct elem *e = &m->elem[id - 1];
        if (rc == 0) {
                e->state = CORE_ELEM_DEPOPULATED;
                e->health = CORE_ELEM_HEALTH_DEPOP_OK;
                ranges_apply(m, newsz, UINT64_MAX, false); /* gone with the capacity */
                atomic_fetch_add(&m->depopulations, 1);
        } else {
                e->health = CORE_ELEM_HEALTH_DEPOP_ERR;
                bool any = false;
                for (uint32_t i = 0; i < m->nelem; i++)
                        any |= m->elem[i].state == CORE_ELEM_DEPOPULATED;
                if (!any)
                        m->full_blocks = 0; /* nothing to restore */
        }
        m->generation++;
        refresh(ns);
        pthread_mutex_unlock(&m->lock);
        int src = save(ns);
        pthread_mutex_unlock(&m->ctl);
        if (rc)
                LOG_WARN("core", "namespace %s: depopulation of element %u failed: %s", ns->name,
                         id, rc == -EINVAL ? "no capacity would be left" : err);
        else
                LOG_INFO("core", "namespace %s: element %u depopulated, capacity %llu -> %llu",
                         ns->name, id, (unsigned long long)nsze, (unsigned long long)newsz);
        if (src)
                LOG_WARN("core", "namespace %s: depopulation state not saved: %s", ns->name,
                         strerror(-src));
        publish(ns, origin, id, CORE_MEDIA_CHG_DEPOP | CORE_MEDIA_CHG_ELEMENT);
        return rc == 0;
}

static void depop_done_on_reactor(void *arg)
{
        struct depop_job *j = arg;
        j->done(j->arg, j->ok);
        free(j);
}

static void *depop_thread(void *arg)
{
        struct depop_job *j = arg;
        j->ok = depop_finish(j->ns, j->origin);
        /* The engine's reference goes before done: the caller holds its own. */
        core_ns_put(j->ns);
        if (j->done && j->r && rt_msg_send(j->r, depop_done_on_reactor, j) == 0)
                return NULL;
        if (j->done)
                j->done(j->arg, j->ok);
        free(j);
        return NULL;
}

int core_media_depopulate(struct core_ns *ns, uint32_t id, core_origin_t origin,
                          struct rt_reactor *r, void (*done)(void *arg, bool ok), void *arg,
                          char *err, size_t errlen)
{
        struct core_media *m = ns->media;
        err[0] = 0;
        if (!m || !m->nelem) {
                snprintf(err, errlen, "the namespace has no element model (elements = 0)");
                return -EOPNOTSUPP;
        }
        if (!ns->be.ops->resize) {
                snprintf(err, errlen, "the %s backend cannot resize", ns->backend_name);
                return -EOPNOTSUPP;
        }
        if (core_ns_sanitize_state(ns) == CORE_SAN_RUNNING) {
                snprintf(err, errlen, "a sanitize is in progress");
                return -EBUSY;
        }
        struct depop_job *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        pthread_mutex_lock(&m->ctl);
        pthread_mutex_lock(&m->lock);
        int rc = 0;
        if (id == 0 || id > m->nelem) {
                snprintf(err, errlen, "no element %u (the namespace has %u)", id, m->nelem);
                rc = -ENOENT;
        } else if (m->depop_id) {
                snprintf(err, errlen, "element %u is being depopulated", m->depop_id);
                rc = -EBUSY;
        } else if (m->elem[id - 1].state == CORE_ELEM_DEPOPULATED) {
                snprintf(err, errlen, "element %u is depopulated already", id);
                rc = -EBUSY;
        } else if (m->nlive <= 1) {
                snprintf(err, errlen, "element %u is the last one", id);
                rc = -EBUSY;
        }
        if (rc) {
                pthread_mutex_unlock(&m->lock);
                pthread_mutex_unlock(&m->ctl);
                free(j);
                return rc;
        }
        m->depop_id = id;
        m->generation++;
        refresh(ns);
        pthread_mutex_unlock(&m->lock);
        /* Saved with depop_id: a restart finishes it (core_media_resume). */
        rc = save(ns);
        pthread_mutex_unlock(&m->ctl);
        if (rc)
                LOG_WARN("core", "namespace %s: depopulation start not saved: %s", ns->name,
                         strerror(-rc));
        LOG_INFO("core", "namespace %s: depopulating element %u", ns->name, id);
        publish(ns, origin, id, CORE_MEDIA_CHG_DEPOP);
        core_ns_get(ns);
        *j = (struct depop_job){.ns = ns, .origin = origin, .r = r, .done = done, .arg = arg};
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, depop_thread, j)) {
                pthread_attr_destroy(&a);
                /* No thread: finish here (control path callers only block briefly). */
                depop_thread(j);
                return 0;
        }
        pthread_attr_destroy(&a);
        return 0;
}

void core_media_resume(struct core_ns *ns)
{
        if (ns->media && ns->media->depop_id) {
                LOG_INFO("core", "namespace %s: finishing the interrupted depopulation", ns->name);
                depop_finish(ns, NULL);
        }
}

int core_media_restore(struct core_ns *ns, core_origin_t origin, char *err, size_t errlen)
{
        struct core_media *m = ns->media;
        err[0] = 0;
        if (!m || !m->nelem) {
                snprintf(err, errlen, "the namespace has no element model (elements = 0)");
                return -EOPNOTSUPP;
        }
        pthread_mutex_lock(&m->ctl);
        pthread_mutex_lock(&m->lock);
        uint32_t n = 0;
        for (uint32_t i = 0; i < m->nelem; i++)
                if (m->elem[i].state == CORE_ELEM_DEPOPULATED)
                        n++;
        uint64_t full = m->full_blocks;
        bool running = m->depop_id != 0;
        pthread_mutex_unlock(&m->lock);
        int rc = 0;
        if (running) {
                snprintf(err, errlen, "a depopulation is in progress");
                rc = -EBUSY;
        } else if (!n) {
                snprintf(err, errlen, "no depopulated element to restore");
                rc = -ENOENT;
        } else if (full && full > core_ns_blocks(ns)) {
                rc = core_ns_resize(ns, full, true, err, errlen);
        }
        if (rc) {
                pthread_mutex_unlock(&m->ctl);
                return rc;
        }
        pthread_mutex_lock(&m->lock);
        for (uint32_t i = 0; i < m->nelem; i++)
                if (m->elem[i].state == CORE_ELEM_DEPOPULATED)
                        m->elem[i] = (struct elem){CORE_ELEM_OK, CORE_ELEM_HEALTH_OK, false};
        m->full_blocks = 0;
        m->generation++;
        atomic_fetch_add(&m->restorations, 1);
        refresh(ns);
        pthread_mutex_unlock(&m->lock);
        rc = save(ns);
        pthread_mutex_unlock(&m->ctl);
        if (rc)
                snprintf(err, errlen, "saving metadata: %s", strerror(-rc));
        LOG_INFO("core", "namespace %s: %u depopulated elements restored", ns->name, n);
        publish(ns, origin, 0, CORE_MEDIA_CHG_DEPOP | CORE_MEDIA_CHG_ELEMENT);
        return rc;
}
