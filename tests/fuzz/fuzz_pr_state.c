/*
 * libFuzzer target for the reservation state kept with shared storage
 * (core/pr.c "Reservation state kept with shared storage"): the text a
 * backend's pr_load returns is written by other gateways (a RADOS object
 * on rbd, <file>.slate-pr next to a shared file), so a damaged or hostile
 * one must be refused whole or taken whole, never crash, and a state that
 * is taken must be safe to go on with.
 *
 * The harness keeps one mem namespace whose backend is made to share its
 * reservation state through two stubs: pr_load returns the input (at a
 * version one newer than the last, so every input is installed when it
 * parses) until a store replaces it, pr_store keeps what the core stores.
 * Each input is:
 *   - reloaded (core_ns_pr_refresh: JSON, registrations, the reservation,
 *     and the "events" told to this gateway's hosts);
 *   - checked: the copy's holder is a used registration of a valid type;
 *     its JSON round-trips to the same text;
 *   - then a registration, a reservation and a preemption by two nexuses
 *     go through core_ns_pr_out (read, apply, store), the conflict check
 *     runs, and what the core stored must load again (a gateway must be
 *     able to read what another stored).
 */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ns.h"
#include "core/pr.h"
#include "rt/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct core_ns *ns;
static struct backend_ops ops; /* the mem backend's, with the two stubs */
static char *stored;           /* the state as pr_load returns it */
static uint64_t stored_version;

static int stub_load(struct backend *be, char **text, uint64_t *version)
{
        (void)be;
        *text = stored ? strdup(stored) : NULL;
        *version = stored_version;
        return stored && !*text ? -ENOMEM : 0;
}

static int stub_store(struct backend *be, const char *text, uint64_t *version)
{
        (void)be;
        if (*version != stored_version)
                return -ECANCELED;
        char *t = strdup(text);
        if (!t)
                return -ENOMEM;
        free(stored);
        stored = t;
        *version = ++stored_version;
        return 0;
}

static int setup(void)
{
        rt_log_threshold = RT_LOG_OFF;
        static char dir[] = "/tmp/slate-fuzz-pr-XXXXXX";
        if (!mkdtemp(dir))
                return -1;
        core_set_state_dir(dir);
        struct core_ns_params p = {
            .name = "fzpr", .backend = "mem", .size_bytes = 1u << 20, .block_size = 512};
        char err[256];
        if (core_ns_create(&p, &ns, err, sizeof(err)))
                return -1;
        ops = *ns->be.ops;
        ops.pr_load = stub_load;
        ops.pr_store = stub_store;
        ns->be.ops = &ops;
        ns->be.pr_shared = true;
        return core_ns_pr_shared(ns) ? 0 : -1;
}

static void nexus(struct core_pr_nexus *n, const char *ini, uint16_t port)
{
        memset(n, 0, sizeof(*n));
        snprintf(n->initiator, sizeof(n->initiator), "%s", ini);
        snprintf(n->target, sizeof(n->target), "iqn.2026-12.io.slate:fz");
        n->rel_tgt_port = port;
}

/* The copy's JSON, as text (malloc'd). */
static char *dump(const struct core_pr *pr)
{
        json_t *j = core_pr_to_json_all(pr);
        if (!j)
                abort();
        char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
        json_decref(j);
        if (!s)
                abort();
        return s;
}

static void check(const struct core_pr *pr)
{
        if (pr->type != CORE_PR_NONE) {
                if (!core_pr_type_valid(pr->type))
                        abort();
                if (!core_pr_type_all_regs(pr->type) &&
                    (pr->holder < 0 || pr->holder >= CORE_PR_MAX_REGS ||
                     !pr->regs[pr->holder].used))
                        abort();
        }
        for (int i = 0; i < CORE_PR_MAX_REGS; i++)
                if (pr->regs[i].used && pr->regs[i].key == 0)
                        abort();
        /* What the copy says, read back, says the same. */
        char *a = dump(pr);
        json_t *j = json_loads(a, 0, NULL);
        struct core_pr *back = malloc(sizeof(*back));
        if (!j || !back || core_pr_from_json(back, j))
                abort();
        char *b = dump(back);
        if (strcmp(a, b))
                abort();
        json_decref(j);
        free(a);
        free(b);
        free(back);
}

static enum core_status pr_out(const struct core_pr_nexus *self, enum core_pr_action action,
                               uint64_t key, uint64_t sa_key, enum core_pr_type type)
{
        struct core_pr_cmd c;
        memset(&c, 0, sizeof(c));
        c.action = action;
        c.key = key;
        c.sa_key = sa_key;
        c.type = type;
        c.scope = CORE_PR_SCOPE_LU;
        return core_ns_pr_out(ns, self, &c, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        if (!ns && setup())
                abort();
        free(stored);
        stored = malloc(size + 1);
        if (!stored)
                return 0;
        memcpy(stored, data, size);
        stored[size] = 0;
        stored_version++;

        if (core_ns_pr_refresh(ns) == 0) {
                pthread_mutex_lock(&ns->lock);
                check(&ns->pr);
                pthread_mutex_unlock(&ns->lock);
        }

        /* Operations on whatever was taken (or on the state they read, refused or not). */
        struct core_pr_nexus a, b;
        nexus(&a, "iqn.2026-12.io.slate:host-a,i,0x23d000000001", 1);
        nexus(&b, "iqn.2026-12.io.slate:host-b,i,0x23d000000002", 2);
        pr_out(&a, CORE_PR_REGISTER_IGNORE, 0, 0xa, CORE_PR_NONE);
        pr_out(&b, CORE_PR_REGISTER_IGNORE, 0, 0xb, CORE_PR_NONE);
        pr_out(&a, CORE_PR_RESERVE, 0xa, 0,
               size && (data[0] & 1) ? CORE_PR_WE_ALL_REGS : CORE_PR_WRITE_EXCLUSIVE);
        pr_out(&b, CORE_PR_PREEMPT, 0xb, 0xa, CORE_PR_EXCLUSIVE_ACCESS);
        (void)core_ns_pr_conflict(ns, &a, true, false);
        (void)core_ns_pr_conflict(ns, &b, false, true);

        /* What a store left (if the input parsed, every operation stored) must load. */
        uint64_t before = stored_version;
        int rc = core_ns_pr_refresh(ns);
        if (ns->pr_version == before && rc)
                abort();
        if (rc == 0) {
                pthread_mutex_lock(&ns->lock);
                check(&ns->pr);
                pthread_mutex_unlock(&ns->lock);
        }
        return 0;
}
