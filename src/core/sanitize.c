/*
 * The sanitize engine (SBC-4 4.11 sanitize operations; NVMe Base 2.0 8.21
 * sanitize operations): one implementation that SCSI SANITIZE and NVMe
 * Sanitize both start.  An operation belongs to the namespace, not to the
 * command that started it: it runs in the background on one reactor,
 * outlives commands, connections and resets, and is recorded in the
 * namespace's metadata (core_sanitize_to_json) so that a restart resumes
 * it.  Both standards say an interrupted sanitize continues after power
 * on (SBC-4 4.11.1, NVMe Base 2.0 8.21: "resumes after a power cycle"),
 * and neither requires continuing where it stopped, so a resumed operation
 * starts again from the first block with the same parameters; until it
 * ends the namespace stays "sanitize in progress".
 *
 * Actions: OVERWRITE writes the pattern (repeated to fill each block,
 * inverted between passes when asked) over every block, passes times;
 * BLOCK ERASE deallocates every block (WRITE ZEROES, which the file
 * backend turns into a punched hole: the blocks read as zeroes and their
 * space goes back to the file system, as a block erase leaves an SSD), or
 * writes zeroes without deallocating when the host asked for no
 * deallocation (NVMe NDAS).  CRYPTOGRAPHIC ERASE, offered only on
 * namespaces encrypted at rest (core/crypt.h), replaces the data key with a
 * new random one and wipes the old one, in memory and (saved at once) in
 * the metadata -- on storage several gateways share (rbd), in the record
 * kept with the data, which the other gateways take before the erase goes
 * on (core_ns_crypt_erase): every block written before reads as
 * unintelligible data.
 * On a thin namespace it then deallocates every block as a block erase does
 * (NVMe: unless NDAS), so they read as zeroes and their space is returned;
 * otherwise the blocks keep the old ciphertext, which reads as garbage
 * (SCSI WACEREQ 01b: reads after it succeed).  On a namespace with
 * protection information the old PI would fail every checked read of that
 * garbage, so there the erase always goes on with a pass that puts every
 * block's metadata back to the escape: deallocating (WRITE ZEROES) unless
 * NDAS, else writing zeroes -- the blocks read as zeroes, unchecked.
 * Every operation ends with a flush: it is complete only when on stable
 * media.
 *
 * Speed: the backend's by default.  A namespace may be paced
 * (namespace_create sanitize_rate_mibps): a sanitize cannot be stopped once
 * started, and pacing keeps it from monopolising a backend that other
 * namespaces share (and lets tests watch one in progress).
 */
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crypt.h"
#include "core/ns.h"
#include "core/req.h"
#include "core/sanitize.h"
#include "rt/log.h"

#define WRITE_CHUNK_BYTES (4u << 20)   /* one write of the pattern at a time */
#define ERASE_CHUNK_BYTES (256u << 20) /* one deallocation at a time */

struct core_sanitize {
        struct core_ns *ns;
        /* Under ns->lock: the most recent operation's parameters and outcome. */
        struct core_sanitize_params p; /* p.pattern = raw */
        uint8_t *raw;                  /* the pattern as given (pattern_len bytes) */
        bool busy;                     /* the engine runs (between start and done) */
        uint8_t passes_done;
        uint64_t writes_at_end; /* ns write_ops when the last one completed; UINT64_MAX = unknown */
        uint64_t speed[4];      /* bytes per second measured per action; 0 = unknown */

        /* The engine's, on its reactor, while busy. */
        void (*done)(void *arg, bool ok);
        void *done_arg;
        core_origin_t origin;
        struct rt_reactor *reactor;
        uint8_t *buf; /* one chunk of pattern (overwrite) or zeroes (no-dealloc erase) */
        uint32_t buf_len;
        uint64_t chunk_blocks;
        uint64_t rate; /* bytes per second; 0 = unpaced */
        uint64_t next_lba, done_blocks, total_blocks, start_ns;
        struct core_req req;
        struct rt_timer timer;
        struct rt_defer defer;
};

static const char *const action_names[] = {"none", "overwrite", "block-erase", "crypto-erase"};

/* ---- the background operation ---- */

static void step(struct core_sanitize *s);
static bool deallocates(const struct core_sanitize *s);

static void save_locked(struct core_ns *ns)
{
        int rc = core_ns_save_meta(ns);
        if (rc)
                LOG_WARN("core", "namespace %s: sanitize state not saved: %s", ns->name,
                         strerror(-rc));
}

static void finish(struct core_sanitize *s, bool ok)
{
        struct core_ns *ns = s->ns;
        void (*done)(void *, bool) = s->done;
        void *arg = s->done_arg;
        uint64_t el = rt_now_ns() - s->start_ns;

        free(s->buf);
        s->buf = NULL;
        s->done = NULL;
        /* What the end reports (GDE, estimates) is in place before anyone sees the end. */
        pthread_mutex_lock(&ns->lock);
        if (ok && el > 0 && s->total_blocks > 1) {
                unsigned __int128 b = (unsigned __int128)s->total_blocks << ns->block_shift;
                s->speed[s->p.action] = (uint64_t)(b * 1000000000u / el);
        }
        s->writes_at_end = ok ? core_stats_ok(&ns->stats, CORE_OPC_WRITE) : UINT64_MAX;
        /* Still RUNNING until the end below, so no new start can slip in before it. */
        s->busy = false;
        enum core_sanitize_action a = s->p.action;
        bool ause = s->p.ause;
        core_origin_t origin = s->origin;
        pthread_mutex_unlock(&ns->lock);
        core_ns_sanitize_end(ns, ok, ause, origin);
        LOG_INFO("core", "namespace %s: %s %s in %.1f s", ns->name, action_names[a],
                 ok ? "completed" : "failed", el / 1e9);
        if (done)
                done(arg, ok);
        core_ns_put(ns);
}

static void req_done(struct core_req *req)
{
        struct core_sanitize *s = req->cb_arg;
        uint64_t due, now;

        if (req->status != CORE_OK) {
                LOG_WARN("core", "namespace %s: sanitize I/O at lba %llu failed: %s", s->ns->name,
                         (unsigned long long)req->lba, core_status_name(req->status));
                finish(s, false);
                return;
        }
        if (req->op == CORE_OP_FLUSH) {
                finish(s, true);
                return;
        }
        s->next_lba += req->nlb;
        s->done_blocks += req->nlb;
        core_ns_sanitize_progress(s->ns, (uint16_t)(s->done_blocks * 65535u / s->total_blocks));
        now = rt_now_ns();
        due = now;
        if (s->rate) {
                /* Keep the average at the rate since the start (bytes * 1e9 / rate). */
                unsigned __int128 b = (unsigned __int128)s->done_blocks << s->ns->block_shift;
                due = s->start_ns + (uint64_t)(b * 1000000000u / s->rate);
        }
        if (due > now + 1000000u) {
                rt_timer_arm(s->reactor, &s->timer, (due - now) / 1000000u);
                return;
        }
        /* Continue on the next loop iteration, not inside the core's callback. */
        rt_defer(s->reactor, &s->defer);
}

static void on_timer(struct rt_timer *t)
{
        step((struct core_sanitize *)((char *)t - offsetof(struct core_sanitize, timer)));
}

static void on_defer(struct rt_defer *d)
{
        step((struct core_sanitize *)((char *)d - offsetof(struct core_sanitize, defer)));
}

static void submit(struct core_sanitize *s, enum core_op op, uint64_t lba, uint32_t nlb)
{
        struct core_req *r = &s->req;
        core_req_init(r, s->ns, op, lba, nlb, CORE_REQ_SANITIZE, s->reactor, req_done, s);
        if (op == CORE_OP_WRITE) {
                r->iov[0].iov_base = s->buf;
                r->iov[0].iov_len = (size_t)nlb << s->ns->block_shift;
                r->iovcnt = 1;
        }
        core_req_submit(r);
}

static void step(struct core_sanitize *s)
{
        struct core_ns *ns = s->ns;
        unsigned passes = s->p.action == CORE_SANACT_OVERWRITE ? s->p.passes : 1;

        if (s->next_lba >= ns->num_blocks) {
                pthread_mutex_lock(&ns->lock);
                s->passes_done++;
                pthread_mutex_unlock(&ns->lock);
                if (s->passes_done >= passes) {
                        /* Done when it is on stable media. */
                        submit(s, CORE_OP_FLUSH, 0, 0);
                        return;
                }
                if (s->p.invert)
                        for (uint32_t i = 0; i < s->buf_len; i++)
                                s->buf[i] = (uint8_t)~s->buf[i];
                s->next_lba = 0;
        }
        uint64_t left = ns->num_blocks - s->next_lba;
        uint32_t n = (uint32_t)(left < s->chunk_blocks ? left : s->chunk_blocks);
        if (deallocates(s))
                submit(s, CORE_OP_WRITE_ZEROES, s->next_lba, n);
        else
                submit(s, CORE_OP_WRITE, s->next_lba, n);
}

/* A cryptographic erase of a namespace with metadata: a pass resets it (file comment). */
static bool erase_md(const struct core_sanitize *s)
{
        return s->p.action == CORE_SANACT_CRYPTO_ERASE && core_ns_md_per_block(s->ns);
}

/* Whether the operation's pass deallocates (WRITE ZEROES) rather than writes. */
static bool deallocates(const struct core_sanitize *s)
{
        if (s->p.action == CORE_SANACT_CRYPTO_ERASE)
                return (s->ns->thin || erase_md(s)) && !s->p.no_dealloc;
        return s->p.action == CORE_SANACT_BLOCK_ERASE && !s->p.no_dealloc;
}

/* Set up the engine for s->p and start it on r (ns->lock not held; s->busy already set). */
static int run(struct core_sanitize *s, struct rt_reactor *r)
{
        struct core_ns *ns = s->ns;
        uint32_t bs = ns->block_size;
        uint64_t size = ns->num_blocks << ns->block_shift;
        uint64_t chunk = deallocates(s) ? ERASE_CHUNK_BYTES : WRITE_CHUNK_BYTES;
        bool key_only = s->p.action == CORE_SANACT_CRYPTO_ERASE && !deallocates(s) && !erase_md(s);

        if (s->p.action == CORE_SANACT_CRYPTO_ERASE) {
                /* The erase itself: a new key, the old one gone from memory and metadata. */
                int rc = core_ns_crypt_erase(ns);
                if (rc)
                        return rc;
        }
        unsigned passes = s->p.action == CORE_SANACT_OVERWRITE ? s->p.passes : 1;

        s->rate = (uint64_t)ns->san_rate_mibps << 20;
        if (s->rate && chunk > s->rate / 16)
                chunk = s->rate / 16; /* about 16 steps a second: smooth progress */
        if (chunk > size)
                chunk = size;
        chunk &= ~(uint64_t)(bs - 1);
        if (chunk < bs)
                chunk = bs;
        s->chunk_blocks = chunk >> ns->block_shift;
        s->buf = NULL;
        s->buf_len = 0;
        if (!deallocates(s) && !key_only) {
                s->buf_len = (uint32_t)chunk;
                s->buf = calloc(1, s->buf_len);
                if (!s->buf)
                        return -ENOMEM;
                if (s->p.action == CORE_SANACT_OVERWRITE)
                        for (uint32_t i = 0; i < s->buf_len; i++)
                                s->buf[i] = s->raw[(i % bs) % s->p.pattern_len];
        }
        s->reactor = r;
        s->passes_done = 0;
        s->next_lba = key_only ? ns->num_blocks : 0; /* nothing to write: the flush */
        s->done_blocks = 0;
        s->total_blocks = ns->num_blocks * passes;
        if (!s->total_blocks)
                s->total_blocks = 1;
        s->start_ns = rt_now_ns();
        memset(&s->timer, 0, sizeof(s->timer));
        s->timer.fn = on_timer;
        s->defer.fn = on_defer;
        s->defer.next = NULL;
        core_ns_get(ns);
        LOG_INFO("core", "namespace %s: %s started (%u pass%s%s)", ns->name,
                 action_names[s->p.action], passes, passes == 1 ? "" : "es",
                 s->rate ? ", paced" : "");
        rt_defer(r, &s->defer);
        return 0;
}

/* crypt_known: whether ns->crypt is set yet (not while the metadata loads). */
static int check_params(const struct core_ns *ns, const struct core_sanitize_params *p,
                        bool crypt_known)
{
        switch (p->action) {
        case CORE_SANACT_OVERWRITE:
                if (p->passes == 0 || p->passes > CORE_SANITIZE_MAX_PASSES || p->pattern_len == 0 ||
                    p->pattern_len > ns->block_size || !p->pattern)
                        return -EINVAL;
                return 0;
        case CORE_SANACT_BLOCK_ERASE:
                return 0;
        case CORE_SANACT_CRYPTO_ERASE:
                return ns->crypt || !crypt_known ? 0 : -EINVAL; /* a key to change */
        default:
                return -EINVAL;
        }
}

static struct core_sanitize *get_locked(struct core_ns *ns)
{
        if (!ns->san) {
                ns->san = calloc(1, sizeof(*ns->san));
                if (ns->san) {
                        ns->san->ns = ns;
                        ns->san->writes_at_end = UINT64_MAX;
                }
        }
        return ns->san;
}

/* Copy p into s (under ns->lock). */
static int set_params_locked(struct core_sanitize *s, const struct core_sanitize_params *p)
{
        uint8_t *raw = NULL;
        if (p->pattern_len) {
                raw = malloc(p->pattern_len);
                if (!raw)
                        return -ENOMEM;
                memcpy(raw, p->pattern, p->pattern_len);
        }
        free(s->raw);
        s->raw = raw;
        s->p = *p;
        s->p.pattern = raw;
        if (p->action != CORE_SANACT_OVERWRITE) {
                s->p.passes = 0;
                s->p.invert = false;
        }
        s->passes_done = 0;
        return 0;
}

int core_sanitize_start(struct core_ns *ns, const struct core_sanitize_params *p,
                        core_origin_t origin, struct rt_reactor *r,
                        void (*done)(void *arg, bool ok), void *arg)
{
        struct core_sanitize *s;
        int rc = check_params(ns, p, true);
        if (rc)
                return rc;
        pthread_mutex_lock(&ns->lock);
        if (core_ns_sanitize_state(ns) == CORE_SAN_RUNNING || (ns->san && ns->san->busy)) {
                pthread_mutex_unlock(&ns->lock);
                return -EBUSY;
        }
        s = get_locked(ns);
        rc = s ? set_params_locked(s, p) : -ENOMEM;
        if (rc) {
                pthread_mutex_unlock(&ns->lock);
                return rc;
        }
        s->busy = true;
        pthread_mutex_unlock(&ns->lock);

        if (core_ns_sanitize_begin(ns, origin) < 0) {
                pthread_mutex_lock(&ns->lock);
                s->busy = false;
                pthread_mutex_unlock(&ns->lock);
                return -EBUSY;
        }
        /* Recorded before the first block changes: a crash from here on resumes it. */
        pthread_mutex_lock(&ns->lock);
        save_locked(ns);
        pthread_mutex_unlock(&ns->lock);
        s->done = done;
        s->done_arg = arg;
        s->origin = origin;
        rc = run(s, r);
        if (rc) {
                core_ns_sanitize_end(ns, false, true, origin);
                pthread_mutex_lock(&ns->lock);
                s->busy = false;
                save_locked(ns);
                pthread_mutex_unlock(&ns->lock);
        }
        return rc;
}

/* ---- resume after a restart ---- */

static void resume_fn(void *arg)
{
        struct core_ns *ns = arg;
        struct core_sanitize *s = ns->san;
        LOG_WARN("core",
                 "namespace %s: %s interrupted by a restart; starting it again from the "
                 "first block",
                 ns->name, action_names[s->p.action]);
        s->done = NULL;
        s->origin = NULL;
        if (run(s, rt_current()) < 0) {
                core_ns_sanitize_end(ns, false, true, NULL);
                pthread_mutex_lock(&ns->lock);
                s->busy = false;
                save_locked(ns);
                pthread_mutex_unlock(&ns->lock);
        }
        core_ns_put(ns);
}

void core_sanitize_resume(struct core_ns *ns)
{
        struct core_sanitize *s = ns->san;
        if (!s || core_ns_sanitize_state(ns) != CORE_SAN_RUNNING || s->busy)
                return;
        if (rt_count() == 0) {
                LOG_WARN("core", "namespace %s: sanitize in progress, no reactor to resume it on",
                         ns->name);
                return;
        }
        s->busy = true;
        core_ns_get(ns);
        if (rt_msg_send(rt_get(0), resume_fn, ns) != 0) {
                s->busy = false;
                core_ns_put(ns);
                LOG_ERR("core", "namespace %s: cannot resume the sanitize", ns->name);
        }
}

/* ---- what hosts and management see ---- */

void core_sanitize_info(struct core_ns *ns, struct core_sanitize_info *out)
{
        memset(out, 0, sizeof(*out));
        pthread_mutex_lock(&ns->lock);
        out->state = core_ns_sanitize_state(ns);
        out->progress = atomic_load(&ns->san_progress);
        if (ns->san) {
                out->p = ns->san->p;
                out->p.pattern = NULL;
                out->passes_done = ns->san->passes_done;
                out->untouched =
                    out->state == CORE_SAN_DONE &&
                    ns->san->writes_at_end == core_stats_ok(&ns->stats, CORE_OPC_WRITE);
        }
        pthread_mutex_unlock(&ns->lock);
}

uint32_t core_sanitize_estimate_s(struct core_ns *ns, enum core_sanitize_action a, unsigned passes)
{
        uint64_t rate = (uint64_t)ns->san_rate_mibps << 20;
        if (a == CORE_SANACT_CRYPTO_ERASE) {
                if (!ns->crypt)
                        return UINT32_MAX;
                if (!ns->thin && !core_ns_md_per_block(ns))
                        return 1;            /* a key change and a flush */
                a = CORE_SANACT_BLOCK_ERASE; /* then a deallocation of every block */
        }
        if (a != CORE_SANACT_OVERWRITE && a != CORE_SANACT_BLOCK_ERASE)
                return UINT32_MAX;
        pthread_mutex_lock(&ns->lock);
        uint64_t measured = ns->san ? ns->san->speed[a] : 0;
        pthread_mutex_unlock(&ns->lock);
        if (!rate || (measured && measured < rate))
                rate = measured;
        if (!rate)
                return UINT32_MAX;
        uint64_t bytes = (ns->num_blocks << ns->block_shift) * (passes ? passes : 1);
        uint64_t s = (bytes + rate - 1) / rate;
        return s >= UINT32_MAX ? UINT32_MAX - 1 : (uint32_t)s;
}

/* ---- persistence (ns.c's metadata; ns->lock held or unshared) ---- */

json_t *core_sanitize_to_json(struct core_ns *ns)
{
        static const char *const states[] = {"never", "done", "running", "failed"};
        struct core_sanitize *s = ns->san;
        enum core_sanitize_state st = core_ns_sanitize_state(ns);
        if (st == CORE_SAN_NEVER || !s)
                return NULL;
        char *hex = malloc(2 * (size_t)s->p.pattern_len + 1);
        if (!hex)
                return NULL;
        for (uint32_t i = 0; i < s->p.pattern_len; i++)
                snprintf(hex + 2 * i, 3, "%02x", s->raw[i]);
        hex[2 * s->p.pattern_len] = 0;
        json_t *j =
            json_pack("{s:s, s:b, s:s, s:i, s:b, s:b, s:b, s:s}", "state", states[st],
                      "exit_allowed", ns->san_exit_allowed, "action", action_names[s->p.action],
                      "passes", s->p.passes, "invert", s->p.invert, "ause", s->p.ause, "no_dealloc",
                      s->p.no_dealloc, "pattern", hex);
        free(hex);
        return j;
}

int core_sanitize_from_json(struct core_ns *ns, json_t *j)
{
        const char *state = NULL, *action = NULL, *hex = NULL;
        int exit_allowed = 0, invert = 0, ause = 0, no_dealloc = 0;
        json_int_t passes = 0;
        struct core_sanitize_params p = {0};
        uint8_t *raw = NULL;
        int rc = -EINVAL;

        if (json_unpack(j, "{s:s, s:b, s:s, s:I, s:b, s:b, s:b, s:s}", "state", &state,
                        "exit_allowed", &exit_allowed, "action", &action, "passes", &passes,
                        "invert", &invert, "ause", &ause, "no_dealloc", &no_dealloc, "pattern",
                        &hex))
                return -EINVAL;
        for (unsigned a = CORE_SANACT_OVERWRITE; a <= CORE_SANACT_CRYPTO_ERASE; a++)
                if (strcmp(action, action_names[a]) == 0)
                        p.action = (enum core_sanitize_action)a;
        size_t hl = strlen(hex);
        if (p.action == CORE_SANACT_NONE || passes < 0 || passes > CORE_SANITIZE_MAX_PASSES ||
            hl % 2 || hl / 2 > ns->block_size)
                return -EINVAL;
        p.passes = (uint8_t)passes;
        p.invert = invert;
        p.ause = ause;
        p.no_dealloc = no_dealloc;
        p.pattern_len = (uint32_t)(hl / 2);
        if (p.pattern_len) {
                raw = malloc(p.pattern_len);
                if (!raw)
                        return -ENOMEM;
                for (uint32_t i = 0; i < p.pattern_len; i++) {
                        unsigned v;
                        if (sscanf(hex + 2 * i, "%2x", &v) != 1)
                                goto out;
                        raw[i] = (uint8_t)v;
                }
        }
        p.pattern = raw;
        if (check_params(ns, &p, false) && strcmp(state, "running") == 0)
                goto out; /* a running one must be resumable */
        struct core_sanitize *s = get_locked(ns);
        if (!s || set_params_locked(s, &p)) {
                rc = -ENOMEM;
                goto out;
        }
        if (strcmp(state, "running") == 0)
                atomic_store(&ns->san_state, CORE_SAN_RUNNING);
        else if (strcmp(state, "failed") == 0)
                atomic_store(&ns->san_state, CORE_SAN_FAILED);
        else if (strcmp(state, "done") == 0)
                atomic_store(&ns->san_state, CORE_SAN_DONE);
        else
                goto out;
        ns->san_exit_allowed = exit_allowed;
        rc = 0;
out:
        free(raw);
        return rc;
}

void core_sanitize_free(struct core_ns *ns)
{
        if (!ns->san)
                return;
        free(ns->san->raw);
        free(ns->san->buf);
        free(ns->san);
        ns->san = NULL;
}
