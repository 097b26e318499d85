/*
 * Placement ids, access-hint counters and the flash model (core/flash.h).
 *
 * The model.  The namespace's capacity is cut into model units (unit
 * bytes, at least 4 KiB and the block size); the modelled media has
 * total_blocks erase blocks of ppb units each: enough for the logical
 * units plus op_percent spare, rounded up to whole erase blocks.  Every
 * logical unit written is appended to the open erase block of its slot (a
 * placement id, or for writes without one the shared slot 0, or the
 * short-/long-lifetime slots when the write carries such a hint) and the
 * unit's previous physical copy becomes invalid.  When fewer than
 * GC_RESERVE erase blocks are free, garbage collection picks a full erase
 * block (greedy: fewest valid units; cost-benefit: highest
 * (1 - u) * age / (1 + u), Rosenblum & Ousterhout's LFS cleaner), appends
 * its valid units to the open erase block of the slot that owns it (so
 * placement stays separated through GC) and erases it.  Writes of part of
 * a unit count as the whole unit (a drive's read-modify-write);
 * deallocation invalidates only units it covers completely.
 *
 * Counting is exact: host units, media units (host + GC moves), GC moves,
 * erases, per slot and in total; write amplification = media / host.
 *
 * Locking: m->lock (a plain mutex) protects the model; it is held for one
 * request's map updates plus whatever GC that request triggers (a victim
 * scan over the erase blocks and at most a few erase blocks of moves).
 * The placement table is read lock-free (core_placement_find) and changed
 * under pt->lock.  Nothing here allocates after the model is set up.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/flash.h"
#include "core/ns.h"
#include "core/req.h"
#include "rt/crc.h"
#include "rt/log.h"

#define INV UINT32_MAX
/* Free erase blocks below which a write triggers garbage collection. */
#define GC_RESERVE 2
/* Slots: 0 = no placement, 1..64 = placement ids, then the two hint slots. */
#define SLOT_HOT  (CORE_PLACEMENT_MAX + 1)
#define SLOT_COLD (CORE_PLACEMENT_MAX + 2)
#define NSLOTS    (CORE_PLACEMENT_MAX + 3)

enum eb_state { EB_FREE = 0, EB_OPEN, EB_FULL };

struct eb {
        uint32_t valid; /* valid units */
        uint32_t wp;    /* units written since erase */
        uint16_t owner; /* slot */
        uint8_t state;  /* enum eb_state */
        uint8_t pad;
        uint64_t stamp; /* model clock when last written (cost-benefit age) */
};

struct slot_stats {
        uint64_t host, media, gc, erases, dealloc, valid, ebs; /* units / counts */
};

struct slot {
        uint32_t open; /* open erase block or INV */
        uint32_t pad;
        struct slot_stats st;
};

struct core_flash {
        pthread_mutex_t lock;
        uint32_t unit;
        uint32_t unit_shift;
        uint64_t erase_block;
        uint32_t ppb; /* units per erase block */
        uint32_t op_percent;
        enum core_flash_gc gc;
        uint64_t nlog;  /* logical units */
        uint64_t neb;   /* erase blocks */
        uint64_t clock; /* units written (host + gc): the model's time */
        uint64_t gc_runs;
        uint64_t unmodelled;     /* units the model could not place (never expected) */
        uint32_t *l2p;           /* nlog */
        uint32_t *p2l;           /* neb * ppb */
        struct eb *eb;           /* neb */
        uint32_t *free;          /* stack of free erase blocks */
        uint32_t *bnext, *bprev; /* neb: greedy's lists of full erase blocks (not saved) */
        uint32_t *bhead;         /* ppb + 1: the list of each valid count */
        uint32_t bmin;
        uint64_t nfree;
        struct slot slot[NSLOTS];
        /* FDP events ring */
        struct core_flash_event ev[CORE_FLASH_EV_RING];
        uint64_t ev_seq; /* last sequence number given */
        unsigned max_placements;
        bool dirty;                /* changed since the last save (under lock) */
        _Atomic bool dirty_hint;   /* the same, read without the lock by a flush */
        _Atomic bool save_queued;  /* queued for the saver thread */
        pthread_mutex_t save_lock; /* one save at a time */
        char path[4200];
};

struct pl_entry {
        _Atomic uint8_t kind; /* enum core_placement_kind; CORE_PL_NONE = free */
        _Atomic uint64_t key;
        unsigned refs; /* under pt->lock */
        _Atomic uint64_t bytes;
        _Atomic uint64_t hint_bytes[CORE_HINT_BITS];
};

struct core_placements {
        pthread_mutex_t lock;
        struct pl_entry e[CORE_PLACEMENT_MAX + 1]; /* [0] unused */
        _Atomic uint64_t hint_bytes[CORE_HINT_BITS];
};

/* ---- names ---- */

const char *core_hint_name(unsigned bit)
{
        static const char *const n[CORE_HINT_BITS] = {
            "sequential",     "random",     "read_frequent", "read_rare",
            "write_frequent", "write_rare", "low_latency",   "incompressible"};
        return bit < CORE_HINT_BITS ? n[bit] : "?";
}

const char *core_placement_kind_name(enum core_placement_kind k)
{
        switch (k) {
        case CORE_PL_SCSI_STREAM:
                return "scsi_stream";
        case CORE_PL_SCSI_GROUP:
                return "scsi_group";
        case CORE_PL_NVME_STREAM:
                return "nvme_stream";
        case CORE_PL_FDP_RUH:
                return "fdp_ruh";
        default:
                return "none";
        }
}

const char *core_flash_gc_name(enum core_flash_gc g)
{
        return g == CORE_FLASH_GC_COST_BENEFIT ? "cost-benefit" : "greedy";
}

int core_flash_gc_parse(const char *s, enum core_flash_gc *out)
{
        if (!s || !strcmp(s, "greedy"))
                *out = CORE_FLASH_GC_GREEDY;
        else if (!strcmp(s, "cost-benefit") || !strcmp(s, "cost_benefit"))
                *out = CORE_FLASH_GC_COST_BENEFIT;
        else
                return -EINVAL;
        return 0;
}

/* ---- placement ids ---- */

int core_placement_get(struct core_ns *ns, enum core_placement_kind kind, uint64_t key,
                       uint16_t *id)
{
        struct core_placements *pt = ns->placements;
        if (!pt || kind <= CORE_PL_NONE || kind >= CORE_PL_KIND_MAX)
                return -EINVAL;
        pthread_mutex_lock(&pt->lock);
        unsigned max = core_placement_max(ns), used = 0, freeid = 0;
        for (unsigned i = 1; i <= CORE_PLACEMENT_MAX; i++) {
                uint8_t k = atomic_load(&pt->e[i].kind);
                if (k == CORE_PL_NONE) {
                        if (!freeid)
                                freeid = i;
                        continue;
                }
                used++;
                if (k == kind && atomic_load(&pt->e[i].key) == key) {
                        pt->e[i].refs++;
                        pthread_mutex_unlock(&pt->lock);
                        *id = (uint16_t)i;
                        return 0;
                }
        }
        if (used >= max || !freeid) {
                pthread_mutex_unlock(&pt->lock);
                return -ENOSPC;
        }
        struct pl_entry *e = &pt->e[freeid];
        atomic_store(&e->bytes, 0);
        for (unsigned b = 0; b < CORE_HINT_BITS; b++)
                atomic_store(&e->hint_bytes[b], 0);
        e->refs = 1;
        atomic_store_explicit(&e->key, key, memory_order_relaxed);
        atomic_store_explicit(&e->kind, (uint8_t)kind, memory_order_release);
        pthread_mutex_unlock(&pt->lock);
        *id = (uint16_t)freeid;
        return 0;
}

uint16_t core_placement_find(const struct core_ns *ns, enum core_placement_kind kind, uint64_t key)
{
        struct core_placements *pt = ns->placements;
        if (!pt || kind == CORE_PL_NONE)
                return 0;
        for (unsigned i = 1; i <= CORE_PLACEMENT_MAX; i++) {
                if (atomic_load_explicit(&pt->e[i].kind, memory_order_acquire) == kind &&
                    atomic_load_explicit(&pt->e[i].key, memory_order_relaxed) == key)
                        return (uint16_t)i;
        }
        return 0;
}

static void flash_close_slot(struct core_ns *ns, uint16_t id);

void core_placement_put(struct core_ns *ns, uint16_t id)
{
        struct core_placements *pt = ns->placements;
        if (!pt || id == 0 || id > CORE_PLACEMENT_MAX)
                return;
        pthread_mutex_lock(&pt->lock);
        struct pl_entry *e = &pt->e[id];
        bool freed = false;
        if (atomic_load(&e->kind) != CORE_PL_NONE && e->refs && --e->refs == 0) {
                atomic_store_explicit(&e->kind, CORE_PL_NONE, memory_order_release);
                freed = true;
        }
        pthread_mutex_unlock(&pt->lock);
        if (freed)
                flash_close_slot(ns, id); /* its reclaim unit is not continued by the next user */
}

unsigned core_placement_max(const struct core_ns *ns)
{
        struct core_flash *m = ns->flash;
        return m ? m->max_placements : CORE_PLACEMENT_MAX;
}

unsigned core_placement_used(const struct core_ns *ns)
{
        struct core_placements *pt = ns->placements;
        unsigned n = 0;
        if (pt)
                for (unsigned i = 1; i <= CORE_PLACEMENT_MAX; i++)
                        n += atomic_load(&pt->e[i].kind) != CORE_PL_NONE;
        return n;
}

int core_placement_info(const struct core_ns *ns, uint16_t id, struct core_placement_info *out)
{
        memset(out, 0, sizeof(*out));
        struct core_placements *pt = ns->placements;
        if (!pt || id == 0 || id > CORE_PLACEMENT_MAX)
                return -ENOENT;
        struct pl_entry *e = &pt->e[id];
        pthread_mutex_lock(&pt->lock);
        out->id = id;
        out->kind = (enum core_placement_kind)atomic_load(&e->kind);
        out->in_use = out->kind != CORE_PL_NONE;
        out->key = atomic_load(&e->key);
        out->refs = e->refs;
        pthread_mutex_unlock(&pt->lock);
        out->bytes_written = atomic_load_explicit(&e->bytes, memory_order_relaxed);
        for (unsigned b = 0; b < CORE_HINT_BITS; b++)
                out->hint_bytes[b] = atomic_load_explicit(&e->hint_bytes[b], memory_order_relaxed);
        return 0;
}

void core_hint_bytes(const struct core_ns *ns, uint64_t out[CORE_HINT_BITS])
{
        struct core_placements *pt = ns->placements;
        for (unsigned b = 0; b < CORE_HINT_BITS; b++)
                out[b] = pt ? atomic_load_explicit(&pt->hint_bytes[b], memory_order_relaxed) : 0;
}

/* ---- the model ---- */

static void ev_push(struct core_flash *m, enum core_flash_ev_type t, uint16_t placement,
                    uint32_t ru, uint64_t bytes, uint64_t lba)
{
        struct core_flash_event *e = &m->ev[m->ev_seq % CORE_FLASH_EV_RING];
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        *e = (struct core_flash_event){.seq = ++m->ev_seq,
                                       .type = t,
                                       .placement = placement,
                                       .ru = ru,
                                       .bytes = bytes,
                                       .lba = lba,
                                       .t_ns = (uint64_t)ts.tv_sec * 1000000000u +
                                               (uint64_t)ts.tv_nsec};
}

/* The placement id a slot reports as (the hint slots are placement 0's). */
static uint16_t slot_placement(unsigned s)
{
        return s <= CORE_PLACEMENT_MAX ? (uint16_t)s : 0;
}

static void eb_take(struct core_flash *m, uint32_t b, unsigned s)
{
        struct eb *e = &m->eb[b];
        e->state = EB_OPEN;
        e->owner = (uint16_t)s;
        e->wp = 0;
        e->valid = 0;
        e->stamp = m->clock;
        m->slot[s].open = b;
        m->slot[s].st.ebs++;
}

/*
 * Greedy's index: full erase blocks in doubly linked lists by their valid
 * count (bhead[v]), bmin at or below the lowest non-empty list, so the
 * victim is found without scanning every erase block.
 */
static void bucket_insert(struct core_flash *m, uint32_t b)
{
        uint32_t v = m->eb[b].valid;
        m->bprev[b] = INV;
        m->bnext[b] = m->bhead[v];
        if (m->bhead[v] != INV)
                m->bprev[m->bhead[v]] = b;
        m->bhead[v] = b;
        if (v < m->bmin)
                m->bmin = v;
}

static void bucket_remove(struct core_flash *m, uint32_t b)
{
        uint32_t v = m->eb[b].valid;
        if (m->bprev[b] != INV)
                m->bnext[m->bprev[b]] = m->bnext[b];
        else
                m->bhead[v] = m->bnext[b];
        if (m->bnext[b] != INV)
                m->bprev[m->bnext[b]] = m->bprev[b];
}

/* An erase block is closed (written full, or its placement went away). */
static void eb_close(struct core_flash *m, uint32_t b)
{
        m->eb[b].state = EB_FULL;
        bucket_insert(m, b);
}

static void invalidate(struct core_flash *m, uint32_t p)
{
        uint32_t b = p / m->ppb;
        bool full = m->eb[b].state == EB_FULL;
        m->p2l[p] = INV;
        if (full)
                bucket_remove(m, b);
        m->eb[b].valid--;
        if (full)
                bucket_insert(m, b);
        m->slot[m->eb[b].owner].st.valid--;
}

static bool gc_one(struct core_flash *m);

/*
 * An open erase block with room for slot s.  With gc, collect first
 * while free erase blocks run short; GC itself allocates without (the
 * reserve guarantees it a block).  false: nothing can be had.
 */
static bool slot_room(struct core_flash *m, unsigned s, bool gc)
{
        struct slot *sl = &m->slot[s];
        for (int pass = 0;; pass++) {
                if (sl->open != INV && m->eb[sl->open].wp < m->ppb)
                        return true;
                if (sl->open != INV) {
                        eb_close(m, sl->open);
                        ev_push(m, CORE_FLASH_EV_RU_FULL, slot_placement(s), sl->open,
                                m->erase_block, 0);
                        sl->open = INV;
                }
                if (!gc || pass || m->nfree >= GC_RESERVE)
                        break;
                unsigned guard = 0;
                while (m->nfree < GC_RESERVE && guard++ < 4 * m->neb && gc_one(m))
                        ;
                /* GC may have opened one for s (moving s's own data): look again. */
        }
        if (!m->nfree)
                return false;
        eb_take(m, m->free[--m->nfree], s);
        return true;
}

/* Append logical unit lu to slot s's open erase block.  false: no room at all. */
static bool place(struct core_flash *m, unsigned s, uint32_t lu, bool gc)
{
        if (!slot_room(m, s, gc))
                return false;
        struct slot *sl = &m->slot[s];
        struct eb *e = &m->eb[sl->open];
        uint32_t p = sl->open * m->ppb + e->wp++;
        m->p2l[p] = lu;
        m->l2p[lu] = p;
        e->valid++;
        e->stamp = ++m->clock;
        sl->st.valid++;
        sl->st.media++;
        return true;
}

static uint32_t pick_victim(struct core_flash *m)
{
        if (m->gc == CORE_FLASH_GC_GREEDY) {
                for (; m->bmin < m->ppb; m->bmin++)
                        if (m->bhead[m->bmin] != INV)
                                return m->bhead[m->bmin];
                return INV; /* every full erase block is wholly valid: nothing to gain */
        }
        /* Cost-benefit: the score depends on age, so every full erase block is looked at. */
        uint32_t best = INV;
        double best_score = -1;
        uint32_t best_valid = UINT32_MAX;
        for (uint32_t b = 0; b < m->neb; b++) {
                const struct eb *e = &m->eb[b];
                if (e->state != EB_FULL || e->valid >= m->ppb)
                        continue;
                if (m->gc == CORE_FLASH_GC_GREEDY) {
                        if (e->valid < best_valid) {
                                best_valid = e->valid;
                                best = b;
                                if (!e->valid)
                                        break;
                        }
                } else {
                        double u = (double)e->valid / m->ppb;
                        double age = (double)(m->clock - e->stamp) + 1;
                        double score = (1 - u) * age / (1 + u);
                        if (score > best_score) {
                                best_score = score;
                                best = b;
                        }
                }
        }
        return best;
}

/* Collect one erase block.  false: no victim frees anything. */
static bool gc_one(struct core_flash *m)
{
        uint32_t b = pick_victim(m);
        if (b == INV)
                return false;
        struct eb *e = &m->eb[b];
        unsigned owner = e->owner;
        uint64_t moved = 0, first_lu = UINT64_MAX;
        bucket_remove(m, b);
        e->state = EB_OPEN; /* being collected: out of the index, not a victim */
        for (uint32_t i = 0; i < m->ppb && e->valid; i++) {
                uint32_t p = b * m->ppb + i;
                uint32_t lu = m->p2l[p];
                if (lu == INV)
                        continue;
                invalidate(m, p);
                if (!place(m, owner, lu, false)) {
                        m->l2p[lu] = INV; /* cannot happen with the reserve; forget it */
                        m->unmodelled++;
                        continue;
                }
                m->slot[owner].st.gc++;
                moved++;
                if (first_lu == UINT64_MAX)
                        first_lu = lu;
        }
        e->state = EB_FREE;
        e->wp = 0;
        e->valid = 0;
        m->slot[owner].st.erases++;
        m->slot[owner].st.ebs--;
        m->free[m->nfree++] = b;
        m->gc_runs++;
        if (moved)
                ev_push(m, CORE_FLASH_EV_GC_MOVE, slot_placement(owner), b, moved * m->unit,
                        first_lu);
        return true;
}

static void model_write(struct core_flash *m, unsigned s, uint64_t lu0, uint64_t n)
{
        for (uint64_t lu = lu0; lu < lu0 + n && lu < m->nlog; lu++) {
                if (m->l2p[lu] != INV)
                        invalidate(m, m->l2p[lu]);
                m->l2p[lu] = INV;
                m->slot[s].st.host++;
                if (!place(m, s, (uint32_t)lu, true)) {
                        m->slot[s].st.media++; /* counted as written, not mapped */
                        m->unmodelled++;
                }
        }
}

static void model_dealloc(struct core_flash *m, unsigned s_unused, uint64_t lu0, uint64_t n)
{
        (void)s_unused;
        for (uint64_t lu = lu0; lu < lu0 + n && lu < m->nlog; lu++) {
                uint32_t p = m->l2p[lu];
                if (p == INV)
                        continue;
                struct eb *e = &m->eb[p / m->ppb];
                m->slot[e->owner].st.dealloc++;
                invalidate(m, p);
                m->l2p[lu] = INV;
        }
}

/* Byte range [off, off+len) -> units touched (write) or covered (dealloc). */
static void units_touched(const struct core_flash *m, uint64_t off, uint64_t len, uint64_t *u0,
                          uint64_t *n)
{
        uint64_t a = off >> m->unit_shift, z = (off + len + m->unit - 1) >> m->unit_shift;
        *u0 = a;
        *n = z - a;
}

static void units_covered(const struct core_flash *m, uint64_t off, uint64_t len, uint64_t *u0,
                          uint64_t *n)
{
        uint64_t a = (off + m->unit - 1) >> m->unit_shift, z = (off + len) >> m->unit_shift;
        *u0 = a;
        *n = z > a ? z - a : 0;
}

static unsigned slot_of(uint16_t placement, uint8_t hints)
{
        if (placement >= 1 && placement <= CORE_PLACEMENT_MAX)
                return placement;
        if (hints & CORE_HINT_WRITE_FREQ)
                return SLOT_HOT;
        if (hints & CORE_HINT_WRITE_RARE)
                return SLOT_COLD;
        return 0;
}

static void flash_close_slot(struct core_ns *ns, uint16_t id)
{
        struct core_flash *m = ns->flash;
        if (!m)
                return;
        pthread_mutex_lock(&m->lock);
        struct slot *sl = &m->slot[id];
        if (sl->open != INV) {
                eb_close(m, sl->open); /* partly written: the rest is reclaimed by GC */
                sl->open = INV;
        }
        pthread_mutex_unlock(&m->lock);
}

static bool is_write_op(enum core_op op)
{
        switch (op) {
        case CORE_OP_WRITE:
        case CORE_OP_WRITE_ZEROES:
        case CORE_OP_COMPARE_AND_WRITE:
        case CORE_OP_ORWRITE:
        case CORE_OP_WRITE_SAME:
        case CORE_OP_WRITE_SCATTERED:
                return true;
        default:
                return false;
        }
}

void core_flash_account(struct core_req *req)
{
        struct core_ns *ns = req->ns;
        bool write = is_write_op(req->op);
        if (!write && req->op != CORE_OP_DEALLOCATE)
                return;
        uint64_t bytes = (uint64_t)req->nlb << ns->block_shift;
        struct core_placements *pt = ns->placements;
        if (write && pt) {
                if (req->placement >= 1 && req->placement <= CORE_PLACEMENT_MAX) {
                        struct pl_entry *e = &pt->e[req->placement];
                        atomic_fetch_add_explicit(&e->bytes, bytes, memory_order_relaxed);
                        for (unsigned b = 0; b < CORE_HINT_BITS; b++)
                                if (req->hints & (1u << b))
                                        atomic_fetch_add_explicit(&e->hint_bytes[b], bytes,
                                                                  memory_order_relaxed);
                }
                for (unsigned b = 0; b < CORE_HINT_BITS; b++)
                        if (req->hints & (1u << b))
                                atomic_fetch_add_explicit(&pt->hint_bytes[b], bytes,
                                                          memory_order_relaxed);
        }
        struct core_flash *m = ns->flash;
        if (!m)
                return;
        unsigned s = slot_of(req->placement, req->hints);
        uint32_t sh = ns->block_shift;
        pthread_mutex_lock(&m->lock);
        if (req->op == CORE_OP_WRITE_SCATTERED && req->ranges) {
                for (uint32_t i = 0; i < req->nr_ranges; i++) {
                        uint64_t u0, n;
                        units_touched(m, req->ranges[i].lba << sh, req->ranges[i].nlb << sh, &u0,
                                      &n);
                        model_write(m, s, u0, n);
                }
        } else if (write) {
                uint64_t u0, n;
                units_touched(m, req->lba << sh, bytes, &u0, &n);
                model_write(m, s, u0, n);
        } else {
                uint64_t u0, n;
                units_covered(m, req->lba << sh, bytes, &u0, &n);
                model_dealloc(m, s, u0, n);
        }
        m->dirty = true;
        if (!atomic_load_explicit(&m->dirty_hint, memory_order_relaxed))
                atomic_store_explicit(&m->dirty_hint, true, memory_order_relaxed);
        pthread_mutex_unlock(&m->lock);
}

bool core_flash_enabled(const struct core_ns *ns)
{
        return ns->flash != NULL;
}

void core_flash_info(const struct core_ns *ns, struct core_flash_info *out)
{
        memset(out, 0, sizeof(*out));
        struct core_flash *m = ns->flash;
        if (!m)
                return;
        pthread_mutex_lock(&m->lock);
        out->enabled = true;
        out->unit = m->unit;
        out->erase_block = m->erase_block;
        out->op_percent = m->op_percent;
        out->gc = m->gc;
        out->logical_units = m->nlog;
        out->total_blocks = m->neb;
        out->free_blocks = m->nfree;
        out->gc_runs = m->gc_runs;
        pthread_mutex_unlock(&m->lock);
}

static void add_stats(struct core_flash_stats *o, const struct slot_stats *s, uint32_t unit)
{
        o->host_bytes += s->host * unit;
        o->media_bytes += s->media * unit;
        o->gc_bytes += s->gc * unit;
        o->erases += s->erases;
        o->dealloc_bytes += s->dealloc * unit;
        o->valid_bytes += s->valid * unit;
        o->erase_blocks += s->ebs;
}

int core_flash_stats(const struct core_ns *ns, uint16_t placement, struct core_flash_stats *out)
{
        memset(out, 0, sizeof(*out));
        struct core_flash *m = ns->flash;
        if (!m)
                return -ENOENT;
        if (placement > CORE_PLACEMENT_MAX && placement != CORE_FLASH_ALL)
                return -EINVAL;
        pthread_mutex_lock(&m->lock);
        for (unsigned s = 0; s < NSLOTS; s++)
                if (placement == CORE_FLASH_ALL || slot_placement(s) == placement)
                        add_stats(out, &m->slot[s].st, m->unit);
        pthread_mutex_unlock(&m->lock);
        return 0;
}

uint64_t core_flash_ru_remaining(const struct core_ns *ns, uint16_t placement)
{
        struct core_flash *m = ns->flash;
        if (!m || placement > CORE_PLACEMENT_MAX)
                return 0;
        pthread_mutex_lock(&m->lock);
        uint32_t b = m->slot[placement].open;
        /* No open RU yet: the next write opens a fresh one. */
        uint64_t r = b == INV ? m->erase_block : (uint64_t)(m->ppb - m->eb[b].wp) * m->unit;
        pthread_mutex_unlock(&m->lock);
        return r;
}

unsigned core_flash_events(const struct core_ns *ns, uint64_t *cursor, struct core_flash_event *out,
                           unsigned max, uint64_t *lost)
{
        struct core_flash *m = ns->flash;
        if (lost)
                *lost = 0;
        if (!m)
                return 0;
        pthread_mutex_lock(&m->lock);
        uint64_t oldest = m->ev_seq > CORE_FLASH_EV_RING ? m->ev_seq - CORE_FLASH_EV_RING + 1 : 1;
        uint64_t next = *cursor + 1;
        if (next < oldest) {
                if (lost)
                        *lost = oldest - next;
                next = oldest;
        }
        unsigned n = 0;
        for (; next <= m->ev_seq && n < max; next++)
                out[n++] = m->ev[(next - 1) % CORE_FLASH_EV_RING];
        *cursor = next - 1;
        pthread_mutex_unlock(&m->lock);
        return n;
}

/* ---- set-up, persistence ---- */

#define FLASH_MAGIC   "SLFLASH1"
#define FLASH_VERSION 1u

struct flash_hdr {
        char magic[8];
        uint32_t version;
        uint32_t unit;
        uint64_t erase_block;
        uint32_t op_percent;
        uint32_t gc;
        uint64_t nlog;
        uint64_t neb;
        uint64_t clock;
        uint64_t gc_runs;
        uint64_t unmodelled;
        uint64_t ev_seq;
        uint32_t nslots;
        uint32_t ppb;
};

static void model_free(struct core_flash *m)
{
        if (!m)
                return;
        free(m->l2p);
        free(m->p2l);
        free(m->eb);
        free(m->free);
        free(m->bnext);
        free(m->bprev);
        free(m->bhead);
        pthread_mutex_destroy(&m->lock);
        pthread_mutex_destroy(&m->save_lock);
        free(m);
}

static void model_reset(struct core_flash *m)
{
        for (uint64_t i = 0; i < m->nlog; i++)
                m->l2p[i] = INV;
        for (uint64_t i = 0; i < m->neb * m->ppb; i++)
                m->p2l[i] = INV;
        memset(m->eb, 0, m->neb * sizeof(*m->eb));
        m->nfree = 0;
        for (uint64_t b = m->neb; b-- > 0;)
                m->free[m->nfree++] = (uint32_t)b;
        memset(m->slot, 0, sizeof(m->slot));
        for (unsigned s = 0; s < NSLOTS; s++)
                m->slot[s].open = INV;
        for (uint32_t v = 0; v <= m->ppb; v++)
                m->bhead[v] = INV;
        m->bmin = m->ppb;
        m->clock = m->gc_runs = m->unmodelled = m->ev_seq = 0;
}

/* Read what save wrote; checks geometry, checksum and the map's consistency.  0 or -errno. */
/*
 * Take a saved state (the bytes of <name>.flash) into m: geometry,
 * checksum and the map's consistency are checked; 0, or -EINVAL (another
 * geometry, a bad checksum or size) / -EBADMSG (inconsistent) and m is
 * left for model_reset.
 */
static int model_load_buf(struct core_flash *m, const uint8_t *buf, size_t len)
{
        struct flash_hdr h;
        int rc = -EINVAL;
        size_t l2p_len = m->nlog * sizeof(uint32_t), eb_len = m->neb * sizeof(struct eb);
        size_t body = sizeof(h) + sizeof(m->slot) + l2p_len + eb_len;
        uint32_t want;
        if (len != body + 4)
                return rc;
        memcpy(&h, buf, sizeof(h));
        if (memcmp(h.magic, FLASH_MAGIC, 8) || h.version != FLASH_VERSION || h.unit != m->unit ||
            h.erase_block != m->erase_block || h.nlog != m->nlog || h.neb != m->neb ||
            h.nslots != NSLOTS || h.ppb != m->ppb)
                return rc; /* another geometry: start afresh */
        memcpy(&want, buf + body, 4);
        if (rt_crc32c(buf, body) != want)
                return rc;
        const uint8_t *at = buf + sizeof(h);
        memcpy(m->slot, at, sizeof(m->slot));
        at += sizeof(m->slot);
        memcpy(m->l2p, at, l2p_len);
        at += l2p_len;
        memcpy(m->eb, at, eb_len);
        /* Rebuild p2l, the free list and the valid counts; refuse anything inconsistent. */
        uint64_t nphys = m->neb * m->ppb;
        for (uint64_t i = 0; i < nphys; i++)
                m->p2l[i] = INV;
        uint64_t valid_slot[NSLOTS] = {0};
        uint32_t *cnt = calloc(m->neb, sizeof(uint32_t));
        if (!cnt) {
                rc = -ENOMEM;
                goto out;
        }
        for (uint64_t lu = 0; lu < m->nlog; lu++) {
                uint32_t p = m->l2p[lu];
                if (p == INV)
                        continue;
                if (p >= nphys || m->p2l[p] != INV || (p % m->ppb) >= m->eb[p / m->ppb].wp ||
                    m->eb[p / m->ppb].state == EB_FREE)
                        goto bad;
                m->p2l[p] = (uint32_t)lu;
                cnt[p / m->ppb]++;
        }
        m->nfree = 0;
        uint64_t ebs_slot[NSLOTS] = {0};
        for (uint64_t b = 0; b < m->neb; b++) {
                struct eb *e = &m->eb[b];
                if (e->valid != cnt[b] || e->wp > m->ppb || e->owner >= NSLOTS ||
                    e->state > EB_FULL)
                        goto bad;
                if (e->state == EB_FREE) {
                        if (e->wp || e->valid)
                                goto bad;
                        continue;
                }
                valid_slot[e->owner] += e->valid;
                ebs_slot[e->owner]++;
        }
        for (uint64_t b = m->neb; b-- > 0;)
                if (m->eb[b].state == EB_FREE)
                        m->free[m->nfree++] = (uint32_t)b;
        for (unsigned s = 0; s < NSLOTS; s++) {
                uint32_t o = m->slot[s].open;
                if (valid_slot[s] != m->slot[s].st.valid || ebs_slot[s] != m->slot[s].st.ebs ||
                    (o != INV && (o >= m->neb || m->eb[o].state != EB_OPEN || m->eb[o].owner != s)))
                        goto bad;
        }
        for (uint64_t b = 0; b < m->neb; b++) {
                const struct eb *e = &m->eb[b];
                if (e->state == EB_OPEN && m->slot[e->owner].open != b)
                        goto bad;
        }
        free(cnt);
        for (uint32_t v = 0; v <= m->ppb; v++)
                m->bhead[v] = INV;
        m->bmin = m->ppb;
        for (uint32_t b = 0; b < m->neb; b++)
                if (m->eb[b].state == EB_FULL)
                        bucket_insert(m, b);
        m->clock = h.clock;
        m->gc_runs = h.gc_runs;
        m->unmodelled = h.unmodelled;
        m->ev_seq = 0; /* the events themselves are not kept */
        return 0;
bad:
        free(cnt);
        return -EBADMSG;
out:
        return rc;
}

static int model_load(struct core_flash *m, const char *path)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        struct stat st;
        int rc = fstat(fd, &st) ? -errno : 0;
        size_t want = sizeof(struct flash_hdr) + sizeof(m->slot) + m->nlog * sizeof(uint32_t) +
                      m->neb * sizeof(struct eb) + 4;
        uint8_t *buf = NULL;
        if (!rc && (uint64_t)st.st_size != want)
                rc = -EINVAL;
        if (!rc && !(buf = malloc(want)))
                rc = -ENOMEM;
        size_t got = 0;
        while (!rc && got < want) {
                ssize_t n = read(fd, buf + got, want - got);
                if (n <= 0)
                        rc = n < 0 ? -errno : -EINVAL;
                else
                        got += (size_t)n;
        }
        close(fd);
        if (!rc)
                rc = model_load_buf(m, buf, want);
        free(buf);
        return rc;
}

int core_flash_load_state(struct core_ns *ns, const void *buf, size_t len)
{
        struct core_flash *m = ns->flash;
        if (!m)
                return -ENOENT;
        pthread_mutex_lock(&m->lock);
        int rc = model_load_buf(m, buf, len);
        if (rc)
                model_reset(m);
        pthread_mutex_unlock(&m->lock);
        return rc;
}

static int write_all(int fd, const void *p, size_t len, uint32_t *crc)
{
        if (crc)
                *crc = rt_crc32c_update(*crc, p, len);
        const char *c = p;
        while (len) {
                ssize_t n = write(fd, c, len);
                if (n < 0)
                        return -errno;
                c += n;
                len -= (size_t)n;
        }
        return 0;
}

/*
 * Save: a snapshot of the header, slots, map and erase blocks is taken
 * under m->lock (memcpy: the map is 4 bytes per unit, ~1 ms per 256 MiB
 * of map), then written and renamed into place without it, so a save
 * holds the data path up only for the copy.  m->save_lock orders savers.
 */
static int model_save(struct core_flash *m)
{
        if (!m->path[0])
                return 0;
        size_t l2p_len = m->nlog * sizeof(uint32_t), eb_len = m->neb * sizeof(struct eb);
        size_t len = sizeof(struct flash_hdr) + sizeof(m->slot) + l2p_len + eb_len;
        uint8_t *buf = malloc(len + 4);
        if (!buf)
                return -ENOMEM;
        pthread_mutex_lock(&m->save_lock);
        pthread_mutex_lock(&m->lock);
        struct flash_hdr h;
        memset(&h, 0, sizeof(h));
        memcpy(h.magic, FLASH_MAGIC, 8);
        h.version = FLASH_VERSION;
        h.unit = m->unit;
        h.erase_block = m->erase_block;
        h.op_percent = m->op_percent;
        h.gc = m->gc;
        h.nlog = m->nlog;
        h.neb = m->neb;
        h.clock = m->clock;
        h.gc_runs = m->gc_runs;
        h.unmodelled = m->unmodelled;
        h.ev_seq = m->ev_seq;
        h.nslots = NSLOTS;
        h.ppb = m->ppb;
        uint8_t *p = buf;
        memcpy(p, &h, sizeof(h));
        p += sizeof(h);
        memcpy(p, m->slot, sizeof(m->slot));
        p += sizeof(m->slot);
        memcpy(p, m->l2p, l2p_len);
        p += l2p_len;
        memcpy(p, m->eb, eb_len);
        m->dirty = false;
        pthread_mutex_unlock(&m->lock);
        uint32_t crc = rt_crc32c(buf, len);
        memcpy(buf + len, &crc, 4);

        char tmp[4300];
        snprintf(tmp, sizeof(tmp), "%s.tmp", m->path);
        int rc = 0, fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                rc = -errno;
        if (!rc)
                rc = write_all(fd, buf, len + 4, NULL);
        if (!rc && fsync(fd))
                rc = -errno;
        if (fd >= 0)
                close(fd);
        if (!rc && rename(tmp, m->path))
                rc = -errno;
        if (rc && fd >= 0)
                unlink(tmp);
        pthread_mutex_unlock(&m->save_lock);
        free(buf);
        return rc;
}

int core_flash_save(struct core_ns *ns)
{
        struct core_flash *m = ns->flash;
        if (!m)
                return 0;
        int rc = model_save(m);
        if (rc)
                LOG_ERR("core", "namespace %s: saving flash model %s: %s", ns->name, m->path,
                        strerror(-rc));
        return rc;
}

/*
 * Saving after a flush: the reactor only queues the namespace (a list
 * under a mutex held for a push) for one saver thread,
 * started on first use; the file is written there.  One pending save per
 * namespace at a time (m->save_queued); a flush while one is pending adds
 * nothing (the pending save takes the state as it is when it runs).
 */
static pthread_mutex_t saver_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t saver_cv = PTHREAD_COND_INITIALIZER;
static pthread_cond_t saver_done_cv = PTHREAD_COND_INITIALIZER;
static struct core_ns *saver_q[256];
static unsigned saver_n;
static struct core_ns *saver_current; /* being saved (no reference: close waits for it) */
static bool saver_started;

static void *saver_main(void *arg)
{
        (void)arg;
        pthread_mutex_lock(&saver_lock);
        for (;;) {
                while (!saver_n)
                        pthread_cond_wait(&saver_cv, &saver_lock);
                struct core_ns *ns = saver_q[--saver_n];
                saver_current = ns;
                pthread_mutex_unlock(&saver_lock);
                atomic_store(&ns->flash->save_queued, false);
                core_flash_save(ns);
                pthread_mutex_lock(&saver_lock);
                saver_current = NULL;
                pthread_cond_broadcast(&saver_done_cv);
        }
        return NULL;
}

static void save_soon(struct core_ns *ns)
{
        struct core_flash *m = ns->flash;
        if (!m->path[0] || atomic_exchange(&m->save_queued, true))
                return;
        pthread_mutex_lock(&saver_lock);
        if (!saver_started) {
                pthread_t t;
                pthread_attr_t a;
                pthread_attr_init(&a);
                pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
                saver_started = pthread_create(&t, &a, saver_main, NULL) == 0;
                pthread_attr_destroy(&a);
        }
        if (!saver_started || saver_n == sizeof(saver_q) / sizeof(saver_q[0])) {
                atomic_store(&m->save_queued, false); /* saved at close instead */
        } else {
                saver_q[saver_n++] = ns;
                pthread_cond_signal(&saver_cv);
        }
        pthread_mutex_unlock(&saver_lock);
}

void core_flash_flushed(struct core_ns *ns)
{
        struct core_flash *m = ns->flash;
        if (m && atomic_load_explicit(&m->dirty_hint, memory_order_relaxed)) {
                atomic_store_explicit(&m->dirty_hint, false, memory_order_relaxed);
                save_soon(ns);
        }
}

static struct core_flash *model_new(uint64_t capacity, uint32_t block_size,
                                    const struct core_flash_params *p, char *err, size_t errlen)
{
        uint32_t unit = block_size > 4096 ? block_size : 4096;
        while (capacity / unit > CORE_FLASH_MAX_UNITS)
                unit <<= 1;
        uint64_t ebsz = p->erase_block ? p->erase_block : CORE_FLASH_DEFAULT_ERASE_BLOCK;
        uint32_t op = p->op_set ? p->op_percent : CORE_FLASH_DEFAULT_OP_PERCENT;
        if (ebsz < unit || ebsz % unit || ebsz / unit > (1u << 20)) {
                snprintf(err, errlen,
                         "flash_erase_block %llu must be a multiple of the model unit %u "
                         "(at most 2^20 units)",
                         (unsigned long long)ebsz, unit);
                return NULL;
        }
        if (op > 400) {
                snprintf(err, errlen, "flash_op_percent must be 0..400");
                return NULL;
        }
        uint64_t nlog = capacity / unit;
        uint32_t ppb = (uint32_t)(ebsz / unit);
        uint64_t logical_ebs = (nlog + ppb - 1) / ppb;
        uint64_t neb = (nlog * (100 + op) + (uint64_t)ppb * 100 - 1) / ((uint64_t)ppb * 100);
        /* At least the open erase block of slot 0, the GC reserve and one to collect. */
        if (neb < logical_ebs + GC_RESERVE + 2)
                neb = logical_ebs + GC_RESERVE + 2;
        if (nlog == 0 || neb * ppb >= INV) {
                snprintf(err, errlen, "flash model: namespace too small or too large");
                return NULL;
        }
        struct core_flash *m = calloc(1, sizeof(*m));
        if (!m)
                return NULL;
        pthread_mutex_init(&m->lock, NULL);
        pthread_mutex_init(&m->save_lock, NULL);
        m->unit = unit;
        m->unit_shift = (uint32_t)__builtin_ctz(unit);
        m->erase_block = ebsz;
        m->ppb = ppb;
        m->op_percent = op;
        m->gc = p->gc;
        m->nlog = nlog;
        m->neb = neb;
        /* Open erase blocks of placement ids must leave the reserve and one victim's worth. */
        uint64_t spare = neb - logical_ebs;
        uint64_t avail = spare > GC_RESERVE + 4 ? spare - GC_RESERVE - 4 : 0;
        m->max_placements = avail < CORE_PLACEMENT_MAX ? (unsigned)avail : CORE_PLACEMENT_MAX;
        m->l2p = malloc(nlog * sizeof(uint32_t));
        m->p2l = malloc(neb * ppb * sizeof(uint32_t));
        m->eb = calloc(neb, sizeof(struct eb));
        m->free = malloc(neb * sizeof(uint32_t));
        m->bnext = malloc(neb * sizeof(uint32_t));
        m->bprev = malloc(neb * sizeof(uint32_t));
        m->bhead = malloc((ppb + 1) * sizeof(uint32_t));
        if (!m->l2p || !m->p2l || !m->eb || !m->free || !m->bnext || !m->bprev || !m->bhead) {
                model_free(m);
                snprintf(err, errlen, "flash model: out of memory");
                return NULL;
        }
        model_reset(m);
        return m;
}

/* For unit tests and tools: a model without a namespace file (path NULL) or with one. */
int core_flash_open(struct core_ns *ns, const struct core_flash_params *p, char *err, size_t errlen)
{
        if (!ns->placements) {
                ns->placements = calloc(1, sizeof(*ns->placements));
                if (!ns->placements)
                        return -ENOMEM;
                pthread_mutex_init(&ns->placements->lock, NULL);
        }
        if (!p || !p->enable)
                return 0;
        struct core_flash *m = model_new(core_ns_blocks(ns) * (uint64_t)ns->block_size,
                                         ns->block_size, p, err, errlen);
        if (!m)
                return err[0] ? -EINVAL : -ENOMEM;
        if (ns->meta_path[0]) {
                snprintf(m->path, sizeof(m->path), "%s/%s.flash", core_state_dir(), ns->name);
                int rc = model_load(m, m->path);
                if (rc == 0)
                        LOG_INFO("core", "namespace %s: flash model state loaded from %s", ns->name,
                                 m->path);
                else if (rc != -ENOENT) {
                        LOG_WARN("core",
                                 "namespace %s: flash model state %s not used (%s): "
                                 "starting afresh",
                                 ns->name, m->path, strerror(-rc));
                        model_reset(m);
                }
        }
        ns->flash = m;
        return 0;
}

/*
 * The saver holds no reference (a namespace_delete right after a flush
 * must not find the namespace busy): a closing namespace leaves the queue
 * and waits for a save of it that is running.
 */
static void saver_forget(struct core_ns *ns)
{
        pthread_mutex_lock(&saver_lock);
        for (unsigned i = 0; i < saver_n;)
                if (saver_q[i] == ns)
                        saver_q[i] = saver_q[--saver_n];
                else
                        i++;
        while (saver_current == ns)
                pthread_cond_wait(&saver_done_cv, &saver_lock);
        pthread_mutex_unlock(&saver_lock);
}

void core_flash_close(struct core_ns *ns)
{
        if (ns->flash) {
                saver_forget(ns);
                core_flash_save(ns);
                model_free(ns->flash);
                ns->flash = NULL;
        }
        if (ns->placements) {
                pthread_mutex_destroy(&ns->placements->lock);
                free(ns->placements);
                ns->placements = NULL;
        }
}

void core_flash_resize(struct core_ns *ns)
{
        /* The model keeps its geometry; units beyond a shrunk capacity simply stop being
         * written.  A grown namespace's new units are not modelled until the model is
         * recreated (namespace_delete/create). */
        (void)ns;
}
