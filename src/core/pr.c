/*
 * Persistent reservations, the protocol-neutral model (SPC-5 5.14 "Reservations",
 * 6.17 PERSISTENT RESERVE OUT; NVMe reservations map onto the same rules).
 * It keeps the registrations (one key per I_T nexus, optionally for all
 * target ports), the one reservation (type, scope, holder; for the
 * *_ALL_REGS types every registrant holds it), the PRgeneration counter,
 * APTPL, and the SPC-2 RESERVE/RELEASE state with the SPC-5 5.14.3
 * exceptions.  Everything here runs under core_ns.lock and is synchronous;
 * effects on other nexuses (unit attentions, task aborts) are reported
 * through a callback and carried out by the personality and transport.
 * With APTPL set the state is saved in the namespace metadata as JSON.
 * On a backend that keeps the state with shared storage (rbd: every
 * gateway exporting the image) the operations apply to the stored state
 * instead and ns->pr is this gateway's copy (core_pr_shared_update below).
 */
#include "core/pr.h"

#include <jansson.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/ns.h"
#include "rt/log.h"

void core_pr_init(struct core_pr *pr)
{
        memset(pr, 0, sizeof(*pr));
        pr->holder = -1;
}

/*
 * A target port is its name and its relative target port identifier: the
 * gateways exporting one namespace (core/ana.h) share the target's name
 * and TPGT but not the identifier (the gateway id is in its high byte), so
 * a registration through one gateway's port is not one through another's
 * unless ALL_TG_PT.  NVMe nexuses carry 0 on every controller: NVMe
 * registrants are hosts, whichever controller they use.
 */
static bool same_target_port(const struct core_pr_nexus *a, const struct core_pr_nexus *b)
{
        return a->rel_tgt_port == b->rel_tgt_port && strcasecmp(a->target, b->target) == 0;
}

bool core_pr_nexus_eq(const struct core_pr_nexus *a, const struct core_pr_nexus *b)
{
        return strcasecmp(a->initiator, b->initiator) == 0 && same_target_port(a, b);
}

bool core_pr_reg_names(const struct core_pr_reg *r, const struct core_pr_nexus *nx)
{
        if (strcasecmp(r->nexus.initiator, nx->initiator) != 0)
                return false;
        return r->all_tg_pt || same_target_port(&r->nexus, nx);
}

static bool reg_matches(const struct core_pr_reg *r, const struct core_pr_nexus *nx)
{
        return r->used && core_pr_reg_names(r, nx);
}

static int find_reg(const struct core_pr *pr, const struct core_pr_nexus *nx)
{
        for (int i = 0; i < CORE_PR_MAX_REGS; i++)
                if (reg_matches(&pr->regs[i], nx))
                        return i;
        return -1;
}

static int free_slot(const struct core_pr *pr)
{
        for (int i = 0; i < CORE_PR_MAX_REGS; i++)
                if (!pr->regs[i].used)
                        return i;
        return -1;
}

static unsigned nr_regs(const struct core_pr *pr)
{
        unsigned n = 0;
        for (int i = 0; i < CORE_PR_MAX_REGS; i++)
                n += pr->regs[i].used;
        return n;
}

const struct core_pr_reg *core_pr_find_reg(const struct core_pr *pr,
                                           const struct core_pr_nexus *nexus)
{
        int i = find_reg(pr, nexus);
        return i < 0 ? NULL : &pr->regs[i];
}

bool core_pr_type_valid(unsigned type)
{
        switch (type) {
        case CORE_PR_WRITE_EXCLUSIVE:
        case CORE_PR_EXCLUSIVE_ACCESS:
        case CORE_PR_WE_REGS_ONLY:
        case CORE_PR_EA_REGS_ONLY:
        case CORE_PR_WE_ALL_REGS:
        case CORE_PR_EA_ALL_REGS:
                return true;
        default:
                return false;
        }
}

static bool holder_idx(const struct core_pr *pr, int idx)
{
        if (idx < 0 || pr->type == CORE_PR_NONE)
                return false;
        return core_pr_type_all_regs(pr->type) || pr->holder == idx;
}

bool core_pr_is_holder(const struct core_pr *pr, const struct core_pr_nexus *nexus)
{
        return holder_idx(pr, find_reg(pr, nexus));
}

/* Registrants-only and all-registrants types: registrants share the access. */
static bool type_shared(enum core_pr_type t)
{
        return t == CORE_PR_WE_REGS_ONLY || t == CORE_PR_EA_REGS_ONLY || core_pr_type_all_regs(t);
}

static void set_reservation(struct core_pr *pr, enum core_pr_type t, uint8_t scope, int holder)
{
        pr->scope = scope;
        pr->holder = holder;
        __atomic_store_n(&pr->type, t, __ATOMIC_RELEASE);
}

static void drop_reservation(struct core_pr *pr)
{
        set_reservation(pr, CORE_PR_NONE, 0, -1);
}

static void notify(struct core_pr_cmd *c, const struct core_pr_reg *r, unsigned ev)
{
        if (c && c->notify && ev)
                c->notify(c->notify_arg, r, ev);
}

/* Tell every registrant except skip (an index, or -1) about ev. */
static void notify_others(const struct core_pr *pr, struct core_pr_cmd *c, int skip, unsigned ev)
{
        for (int i = 0; i < CORE_PR_MAX_REGS; i++)
                if (pr->regs[i].used && i != skip)
                        notify(c, &pr->regs[i], ev);
}

/*
 * Remove registration idx.  Losing the holder of a single-holder
 * reservation releases it (and registrants of a registrants-only type get
 * RESERVATIONS RELEASED, SPC-5 5.14.10.2); the last registrant of an
 * all-registrants reservation takes it along.
 */
static void remove_reg(struct core_pr *pr, int idx, struct core_pr_cmd *c, bool release_ua)
{
        enum core_pr_type t = pr->type;
        bool was_holder = t != CORE_PR_NONE && !core_pr_type_all_regs(t) && pr->holder == idx;

        memset(&pr->regs[idx], 0, sizeof(pr->regs[idx]));
        if (was_holder) {
                drop_reservation(pr);
                if (release_ua && (t == CORE_PR_WE_REGS_ONLY || t == CORE_PR_EA_REGS_ONLY))
                        notify_others(pr, c, -1, CORE_PR_EV_RES_RELEASED);
        } else if (core_pr_type_all_regs(t) && nr_regs(pr) == 0) {
                drop_reservation(pr);
        }
}

/*
 * PREEMPT's "remove registrations": every registration with key, except
 * the one at index keep (-1: none).  Returns how many were removed.
 */
static unsigned remove_by_key(struct core_pr *pr, uint64_t key, int keep, unsigned ev,
                              struct core_pr_cmd *c)
{
        unsigned n = 0;
        for (int i = 0; i < CORE_PR_MAX_REGS; i++) {
                if (!pr->regs[i].used || pr->regs[i].key != key || i == keep)
                        continue;
                notify(c, &pr->regs[i], ev);
                remove_reg(pr, i, c, false);
                n++;
        }
        return n;
}

/* TYPE and SCOPE of a reservation about to be created (CDB fields). */
static bool type_scope_ok(struct core_pr_cmd *c)
{
        if (c->scope != CORE_PR_SCOPE_LU) {
                c->bad_field = CORE_PR_F_SCOPE;
                return false;
        }
        if (!core_pr_type_valid(c->type)) {
                c->bad_field = CORE_PR_F_TYPE;
                return false;
        }
        return true;
}

static enum core_status do_register(struct core_pr *pr, const struct core_pr_nexus *self,
                                    struct core_pr_cmd *c, int me)
{
        if (me < 0 && c->registered_only)
                return CORE_E_RESERVATION_CONFLICT;
        if (me >= 0 && c->register_new) {
                /* NVMe: registering the key it already has succeeds (CPTPL still applies). */
                if (c->sa_key != pr->regs[me].key)
                        return CORE_E_RESERVATION_CONFLICT;
                if (!c->aptpl_keep)
                        pr->aptpl = c->aptpl;
                return CORE_OK;
        }
        if (me < 0) {
                /* Unregistered: REGISTER needs RESERVATION KEY 0 (SPC-5 5.14.7). */
                if (c->action == CORE_PR_REGISTER && c->key != 0)
                        return CORE_E_RESERVATION_CONFLICT;
                if (c->sa_key == 0)
                        return CORE_OK; /* nothing to register; generation unchanged */
                int slot = free_slot(pr);
                if (slot < 0)
                        return CORE_E_PR_INSUFFICIENT_REG;
                struct core_pr_reg *r = &pr->regs[slot];
                r->nexus = *self;
                r->key = c->sa_key;
                r->all_tg_pt = c->all_tg_pt;
                r->used = true;
        } else {
                if (c->action == CORE_PR_REGISTER && c->key != pr->regs[me].key)
                        return CORE_E_RESERVATION_CONFLICT;
                if (c->sa_key == 0)
                        remove_reg(pr, me, c, true);
                else
                        pr->regs[me].key = c->sa_key;
        }
        pr->generation++;
        if (!c->aptpl_keep)
                pr->aptpl = c->aptpl;
        return CORE_OK;
}

static enum core_status do_reserve(struct core_pr *pr, struct core_pr_cmd *c, int me)
{
        if (pr->type != CORE_PR_NONE) {
                /* Only a holder may "re-reserve", and only with the same type and scope. */
                if (!holder_idx(pr, me) || pr->type != c->type || pr->scope != c->scope)
                        return CORE_E_RESERVATION_CONFLICT;
                return CORE_OK;
        }
        set_reservation(pr, c->type, c->scope, me);
        return CORE_OK;
}

static enum core_status do_release(struct core_pr *pr, struct core_pr_cmd *c, int me)
{
        if (pr->type == CORE_PR_NONE || !holder_idx(pr, me))
                return CORE_OK; /* SPC-5 5.14.10.2: not an error, nothing happens */
        if (pr->type != c->type || pr->scope != c->scope) {
                c->bad_field = CORE_PR_F_RELEASE;
                return CORE_E_INVALID_PARAM;
        }
        enum core_pr_type t = pr->type;
        drop_reservation(pr);
        if (type_shared(t))
                notify_others(pr, c, me, CORE_PR_EV_RES_RELEASED);
        return CORE_OK;
}

static enum core_status do_clear(struct core_pr *pr, struct core_pr_cmd *c, int me)
{
        notify_others(pr, c, me, CORE_PR_EV_RES_PREEMPTED);
        for (int i = 0; i < CORE_PR_MAX_REGS; i++)
                memset(&pr->regs[i], 0, sizeof(pr->regs[i]));
        drop_reservation(pr);
        pr->generation++;
        return CORE_OK;
}

static enum core_status do_preempt(struct core_pr *pr, struct core_pr_cmd *c, int me)
{
        unsigned ev = CORE_PR_EV_REGS_PREEMPTED;
        if (c->action == CORE_PR_PREEMPT_ABORT)
                ev |= CORE_PR_EV_ABORT;

        if (pr->type == CORE_PR_NONE || (core_pr_type_all_regs(pr->type) && c->sa_key != 0) ||
            (!core_pr_type_all_regs(pr->type) && pr->regs[pr->holder].key != c->sa_key)) {
                /* SPC-5 5.14.11.4.3: only remove the registrations with that key. */
                if (c->sa_key == 0) {
                        c->bad_field = CORE_PR_F_SA_KEY;
                        return CORE_E_INVALID_PARAM;
                }
                if (remove_by_key(pr, c->sa_key, -1, ev, c) == 0)
                        return CORE_E_RESERVATION_CONFLICT;
                pr->generation++;
                return CORE_OK;
        }

        /*
         * Preempting the reservation (5.14.11.4.2): all-registrants with key
         * 0 removes every other registrant; otherwise those with the
         * holder's key, except the preempting nexus.  Then the preempting
         * nexus holds a new reservation of the requested type and scope.
         */
        if (!type_scope_ok(c))
                return CORE_E_INVALID_FIELD;
        enum core_pr_type old_type = pr->type;
        uint8_t old_scope = pr->scope;
        drop_reservation(pr);
        if (core_pr_type_all_regs(old_type)) {
                for (int i = 0; i < CORE_PR_MAX_REGS; i++) {
                        if (!pr->regs[i].used || i == me)
                                continue;
                        notify(c, &pr->regs[i], ev);
                        memset(&pr->regs[i], 0, sizeof(pr->regs[i]));
                }
        } else {
                remove_by_key(pr, c->sa_key, me, ev, c);
        }
        set_reservation(pr, c->type, c->scope, me);
        if (old_type != c->type || old_scope != c->scope)
                notify_others(pr, c, me, CORE_PR_EV_RES_RELEASED);
        pr->generation++;
        return CORE_OK;
}

static enum core_status do_move(struct core_pr *pr, const struct core_pr_nexus *self,
                                struct core_pr_cmd *c, int me)
{
        if (!holder_idx(pr, me) || core_pr_type_all_regs(pr->type))
                return CORE_E_RESERVATION_CONFLICT;
        if (c->sa_key == 0) {
                c->bad_field = CORE_PR_F_SA_KEY;
                return CORE_E_INVALID_PARAM;
        }
        if (!c->dest || core_pr_nexus_eq(c->dest, self)) {
                c->bad_field = CORE_PR_F_DEST;
                return CORE_E_INVALID_PARAM;
        }
        int d = find_reg(pr, c->dest);
        if (d == me) {
                c->bad_field = CORE_PR_F_DEST;
                return CORE_E_INVALID_PARAM;
        }
        if (d < 0) {
                d = free_slot(pr);
                if (d < 0)
                        return CORE_E_PR_INSUFFICIENT_REG;
                struct core_pr_reg *r = &pr->regs[d];
                r->nexus = *c->dest;
                r->key = c->sa_key;
                r->all_tg_pt = false;
                r->used = true;
        }
        pr->holder = d; /* same type and scope, new holder (SPC-5 5.14.8) */
        if (c->unreg)
                memset(&pr->regs[me], 0, sizeof(pr->regs[me]));
        pr->generation++;
        pr->aptpl = c->aptpl;
        return CORE_OK;
}

enum core_status core_pr_out(struct core_pr *pr, const struct core_pr_nexus *self,
                             struct core_pr_cmd *c)
{
        c->bad_field = CORE_PR_F_NONE;
        c->save = false;
        bool was_aptpl = pr->aptpl;

        if ((unsigned)c->action > CORE_PR_REGISTER_MOVE) {
                c->bad_field = CORE_PR_F_ACTION;
                return CORE_E_INVALID_FIELD;
        }
        if (c->action == CORE_PR_RESERVE && !type_scope_ok(c))
                return CORE_E_INVALID_FIELD;
        if (c->spec_i_pt) {
                /* SIP_C = 0: we do not register other I_T nexuses on one's behalf. */
                c->bad_field = CORE_PR_F_SPEC_I_PT;
                return CORE_E_INVALID_PARAM;
        }
        /* SPC-2 reservation present: every PERSISTENT RESERVE command conflicts. */
        if (pr->legacy_reserved)
                return CORE_E_RESERVATION_CONFLICT;

        int me = find_reg(pr, self);
        enum core_status st;
        if (c->action == CORE_PR_REGISTER || c->action == CORE_PR_REGISTER_IGNORE) {
                st = do_register(pr, self, c, me);
        } else if (me < 0 || pr->regs[me].key != c->key) {
                st = CORE_E_RESERVATION_CONFLICT;
        } else {
                switch (c->action) {
                case CORE_PR_RESERVE:
                        st = do_reserve(pr, c, me);
                        break;
                case CORE_PR_RELEASE:
                        st = do_release(pr, c, me);
                        break;
                case CORE_PR_CLEAR:
                        st = do_clear(pr, c, me);
                        break;
                case CORE_PR_PREEMPT:
                case CORE_PR_PREEMPT_ABORT:
                        st = do_preempt(pr, c, me);
                        break;
                default: /* CORE_PR_REGISTER_MOVE */
                        st = do_move(pr, self, c, me);
                        break;
                }
        }
        if (st == CORE_OK)
                c->save = pr->aptpl || was_aptpl;
        return st;
}

/* Registrants an operation affected, recorded under ns->lock and told after it is dropped. */
struct pr_told {
        struct core_pr_reg reg;
        unsigned events;
};
struct pr_collect {
        struct pr_told *v; /* allocated on the first event: most operations affect nobody */
        unsigned n;
        void (*notify)(void *arg, const struct core_pr_reg *reg, unsigned events);
        void *notify_arg;
        bool lost;
};

static void collect(void *arg, const struct core_pr_reg *reg, unsigned events)
{
        struct pr_collect *col = arg;
        if (col->notify)
                col->notify(col->notify_arg, reg, events);
        for (unsigned i = 0; i < col->n; i++) {
                struct pr_told *t = &col->v[i];
                if (t->reg.all_tg_pt == reg->all_tg_pt &&
                    core_pr_nexus_eq(&t->reg.nexus, &reg->nexus)) {
                        t->events |= events;
                        return;
                }
        }
        if (!col->v)
                col->v = calloc(CORE_PR_MAX_REGS + 1, sizeof(*col->v));
        if (!col->v || col->n >= CORE_PR_MAX_REGS + 1) {
                col->lost = true;
                return;
        }
        col->v[col->n].reg = *reg;
        col->v[col->n].events = events;
        col->n++;
}

/* ---- Reservation state kept with shared storage (pr_load/pr_store: rbd, shared file) ---- */

static json_t *reg_to_json(const struct core_pr_reg *r, bool holder);
static int reg_from_json(struct core_pr_reg *r, const json_t *o, bool *holder);

/*
 * The other gateways' hosts (issue 14): a store carries, beside the state,
 * the events the operation had for other registrants ("events": [{"reg",
 * "ev"}], what core_ns_pr_out publishes here), and a gateway that reloads
 * exactly the next version publishes them there (origin NULL), so a host
 * registered through it hears of a preemption or release once, from the
 * gateway it is connected to.  A gateway that missed a version (two stores
 * between its reloads) tells nothing for them.
 */
static json_t *col_to_json(const struct pr_collect *col)
{
        if (!col->n)
                return NULL;
        json_t *a = json_array();
        for (unsigned i = 0; a && i < col->n; i++) {
                json_t *o = json_pack("{s:o, s:i}", "reg", reg_to_json(&col->v[i].reg, false), "ev",
                                      (int)col->v[i].events);
                if (!o || json_array_append_new(a, o)) {
                        json_decref(a);
                        return NULL;
                }
        }
        return a;
}

static void pr_tell(struct core_ns *ns, const json_t *events)
{
        size_t i;
        json_t *o;
        json_array_foreach(events, i, o)
        {
                struct core_pr_reg reg;
                bool h;
                json_int_t bits;
                memset(&reg, 0, sizeof(reg));
                if (json_unpack((json_t *)o, "{s:I}", "ev", &bits) || bits <= 0 || bits > 0xffff ||
                    reg_from_json(&reg, json_object_get(o, "reg"), &h))
                        continue;
                struct core_ns_event ev = {.type = CORE_NS_EV_RESERVATION,
                                           .ns = ns,
                                           .origin = NULL,
                                           .pr_reg = &reg,
                                           .pr_events = (unsigned)bits};
                core_ns_publish(&ev);
        }
}

static bool pr_shared(const struct core_ns *ns)
{
        return ns->be.ops && ns->be.pr_shared && ns->be.ops->pr_load && ns->be.ops->pr_store;
}

/* Install src (from the storage, at version) as ns's copy, keeping this gateway's RESERVE(6). */
static void pr_install(struct core_ns *ns, const struct core_pr *src, uint64_t version)
{
        bool lr = ns->pr.legacy_reserved;
        struct core_pr_nexus lh = ns->pr.legacy_holder;
        enum core_pr_type t = src->type;
        memcpy(&ns->pr, src, sizeof(ns->pr));
        ns->pr.legacy_reserved = lr;
        ns->pr.legacy_holder = lh;
        __atomic_store_n(&ns->pr.type, t, __ATOMIC_RELEASE);
        ns->pr_version = version;
}

/*
 * The stored state (NULL text: none yet, an empty one) into *pr, and its
 * events (new reference or NULL) into *events when asked; 0 or -errno.
 */
static int pr_load_shared(struct core_ns *ns, struct core_pr *pr, uint64_t *version,
                          json_t **events)
{
        char *text = NULL;
        int rc = ns->be.ops->pr_load(&ns->be, &text, version);
        if (rc < 0)
                return rc;
        core_pr_init(pr);
        if (text) {
                json_t *j = json_loads(text, 0, NULL);
                rc = j ? core_pr_from_json(pr, j) : -EINVAL;
                json_t *e = j ? json_object_get(j, "events") : NULL;
                if (rc == 0 && events && json_is_array(e))
                        *events = json_incref(e);
                json_decref(j);
                free(text);
        }
        return rc;
}

int core_ns_pr_refresh(struct core_ns *ns)
{
        if (!pr_shared(ns))
                return 0;
        struct core_pr *pr = malloc(sizeof(*pr));
        if (!pr)
                return -ENOMEM;
        uint64_t version = 0;
        json_t *events = NULL;
        int rc = pr_load_shared(ns, pr, &version, &events);
        if (rc == 0) {
                bool tell = false;
                pthread_mutex_lock(&ns->lock);
                /* Versions only grow: an older read (racing a newer one) changes nothing. */
                if (version > ns->pr_version || version == 0) {
                        /* Another gateway's next change (ours were installed as we stored). */
                        tell = ns->pr_version > 0 && version == ns->pr_version + 1;
                        pr_install(ns, pr, version);
                }
                pthread_mutex_unlock(&ns->lock);
                if (tell && events)
                        pr_tell(ns, events);
                json_decref(events);
        } else {
                LOG_ERR("pr", "%s: reading the shared reservation state: %s", ns->name,
                        strerror(-rc));
        }
        free(pr);
        return rc;
}

/* How many times a store lost to another gateway is tried again before giving up. */
#define PR_SHARED_TRIES 32

/*
 * Read the state kept with the storage, apply the operation to it, store
 * it if the operation succeeded, guarded by the version read: when another
 * gateway stored meanwhile (-ECANCELED) read and apply again.  Then (or on
 * an error of the operation: the state it was judged against) the result
 * is this gateway's copy.  Blocking (see backend.h pr_load/pr_store); the
 * copy's lock is held only to install the result, so I/O keeps flowing.
 */
static enum core_status shared_update(struct core_ns *ns,
                                      enum core_status (*apply)(struct core_pr *, void *),
                                      void *arg, void (*retry)(void *arg),
                                      json_t *(*events_of)(void *arg));

enum core_status core_pr_shared_update(struct core_ns *ns,
                                       enum core_status (*apply)(struct core_pr *, void *),
                                       void *arg, void (*retry)(void *arg))
{
        return shared_update(ns, apply, arg, retry, NULL);
}

/* events_of(arg): the events to store with the new state (core_ns_pr_out's), or NULL. */
static enum core_status shared_update(struct core_ns *ns,
                                      enum core_status (*apply)(struct core_pr *, void *),
                                      void *arg, void (*retry)(void *arg),
                                      json_t *(*events_of)(void *arg))
{
        struct core_pr *pr = malloc(sizeof(*pr));
        if (!pr)
                return CORE_E_NO_RESOURCES;
        enum core_status st = CORE_E_INTERNAL;
        for (int attempt = 0; attempt < PR_SHARED_TRIES; attempt++) {
                uint64_t version = 0;
                int rc = pr_load_shared(ns, pr, &version, NULL);
                if (rc < 0) {
                        LOG_ERR("pr", "%s: reading the shared reservation state: %s", ns->name,
                                strerror(-rc));
                        st = CORE_E_INTERNAL;
                        break;
                }
                pthread_mutex_lock(&ns->lock);
                pr->legacy_reserved = ns->pr.legacy_reserved;
                pr->legacy_holder = ns->pr.legacy_holder;
                pthread_mutex_unlock(&ns->lock);
                if (retry && attempt)
                        retry(arg);
                st = apply(pr, arg);
                if (st == CORE_OK) {
                        json_t *j = core_pr_to_json_all(pr);
                        json_t *ev = j && events_of ? events_of(arg) : NULL;
                        if (ev)
                                json_object_set_new(j, "events", ev);
                        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
                        json_decref(j);
                        rc = text ? ns->be.ops->pr_store(&ns->be, text, &version) : -ENOMEM;
                        free(text);
                        if (rc == -ECANCELED) {
                                LOG_INFO("pr",
                                         "%s: another gateway changed the reservation "
                                         "state first; applying again",
                                         ns->name);
                                continue;
                        }
                        if (rc < 0) {
                                LOG_ERR("pr", "%s: storing the shared reservation state: %s",
                                        ns->name, strerror(-rc));
                                st = CORE_E_INTERNAL;
                                break;
                        }
                }
                pthread_mutex_lock(&ns->lock);
                if (version >= ns->pr_version)
                        pr_install(ns, pr, version);
                pthread_mutex_unlock(&ns->lock);
                free(pr);
                return st;
        }
        if (st == CORE_OK) {
                LOG_ERR("pr", "%s: the shared reservation state kept changing: giving up",
                        ns->name);
                st = CORE_E_NO_RESOURCES;
        }
        free(pr);
        return st;
}

struct pr_out_apply {
        const struct core_pr_nexus *self;
        struct core_pr_cmd *c;
        struct pr_collect *col;
};

static enum core_status pr_out_apply(struct core_pr *pr, void *arg)
{
        struct pr_out_apply *a = arg;
        return core_pr_out(pr, a->self, a->c);
}

static json_t *pr_out_events(void *arg)
{
        struct pr_out_apply *a = arg;
        return col_to_json(a->col);
}

/* Applying again after a lost race: forget whom the lost attempt affected. */
static void pr_out_retry(void *arg)
{
        struct pr_out_apply *a = arg;
        a->col->n = 0;
        a->col->lost = false;
}

enum core_status core_ns_pr_out(struct core_ns *ns, const struct core_pr_nexus *self,
                                struct core_pr_cmd *c, const void *origin)
{
        struct pr_collect col = {.notify = c->notify, .notify_arg = c->notify_arg};
        c->notify = collect;
        c->notify_arg = &col;

        enum core_status st;
        if (pr_shared(ns)) {
                struct pr_out_apply a = {.self = self, .c = c, .col = &col};
                st = shared_update(ns, pr_out_apply, &a, pr_out_retry, pr_out_events);
                if (st == CORE_OK && c->save) {
                        pthread_mutex_lock(&ns->lock);
                        int rc = core_ns_save_meta(ns);
                        pthread_mutex_unlock(&ns->lock);
                        if (rc < 0)
                                LOG_ERR("pr", "%s: saving reservation state failed: %s", ns->name,
                                        strerror(-rc));
                }
        } else {
                pthread_mutex_lock(&ns->lock);
                st = core_pr_out(&ns->pr, self, c);
                if (st == CORE_OK && c->save) {
                        /*
                         * APTPL: the state must survive a power loss before we report
                         * success.  This is a rare control operation, so the fsync
                         * inside core_ns_save_meta() is accepted here.
                         */
                        int rc = core_ns_save_meta(ns);
                        if (rc < 0)
                                LOG_ERR("pr", "%s: saving reservation state failed: %s", ns->name,
                                        strerror(-rc));
                }
                pthread_mutex_unlock(&ns->lock);
        }
        c->notify = col.notify;
        c->notify_arg = col.notify_arg;

        if (col.lost)
                LOG_ERR("pr", "%s: out of memory: some hosts are not told of a reservation change",
                        ns->name);
        for (unsigned i = 0; i < col.n; i++) {
                struct core_ns_event ev = {.type = CORE_NS_EV_RESERVATION,
                                           .ns = ns,
                                           .origin = origin,
                                           .pr_reg = &col.v[i].reg,
                                           .pr_events = col.v[i].events};
                core_ns_publish(&ev);
        }
        free(col.v);
        return st;
}

/* ---- PR OUT off the reactor (core_ns_pr_out_submit) ---- */

bool core_ns_pr_shared(const struct core_ns *ns)
{
        return pr_shared(ns);
}

/*
 * Two threads: one PR OUT waiting out a dead gateway's 3 s does not hold
 * up another namespace's; commands of one namespace serialize anyway in
 * the shared store's version check.
 */
#define PR_WORKERS 2

static struct core_workers pr_workers = CORE_WORKERS_INIT("core_pr", PR_WORKERS);

static void pr_job_run(struct core_work *w)
{
        struct core_pr_job *j =
            (struct core_pr_job *)((char *)w - offsetof(struct core_pr_job, work_));
        j->st = core_ns_pr_out(j->ns, &j->self, &j->c, j->origin);
}

static void pr_job_done(struct core_work *w)
{
        struct core_pr_job *j =
            (struct core_pr_job *)((char *)w - offsetof(struct core_pr_job, work_));
        j->cb(j);
}

/*
 * The one rule for reservation work: on shared state, a core_pr worker;
 * in memory (or with no worker), a few microseconds under ns->lock, here.
 */
static void pr_work_start(struct core_ns *ns, struct core_work *w, void (*run)(struct core_work *),
                          void (*done)(struct core_work *), struct rt_reactor *reactor)
{
        *w = (struct core_work){.run = run, .done = done, .reactor = reactor};
        if (pr_shared(ns) && core_work_submit(&pr_workers, w))
                return;
        core_work_inline(w);
}

void core_ns_pr_out_submit(struct core_pr_job *j)
{
        pr_work_start(j->ns, &j->work_, pr_job_run, pr_job_done, j->reactor);
}

static void pr_refresh_run(struct core_work *w)
{
        struct core_pr_refresh_job *j =
            (struct core_pr_refresh_job *)((char *)w - offsetof(struct core_pr_refresh_job, work_));
        j->rc = core_ns_pr_refresh(j->ns);
}

static void pr_refresh_done(struct core_work *w)
{
        struct core_pr_refresh_job *j =
            (struct core_pr_refresh_job *)((char *)w - offsetof(struct core_pr_refresh_job, work_));
        j->cb(j);
}

void core_ns_pr_refresh_submit(struct core_pr_refresh_job *j)
{
        pr_work_start(j->ns, &j->work_, pr_refresh_run, pr_refresh_done, j->reactor);
}

static enum core_status pr_aptpl_apply(struct core_pr *pr, void *arg)
{
        pr->aptpl = *(bool *)arg;
        return CORE_OK;
}

int core_ns_pr_set_aptpl(struct core_ns *ns, bool on)
{
        if (pr_shared(ns)) {
                if (core_pr_shared_update(ns, pr_aptpl_apply, &on, NULL) != CORE_OK)
                        return -EIO;
                pthread_mutex_lock(&ns->lock);
                int rc = core_ns_save_meta(ns);
                pthread_mutex_unlock(&ns->lock);
                return rc;
        }
        pthread_mutex_lock(&ns->lock);
        int rc = 0;
        if (ns->pr.aptpl != on) {
                ns->pr.aptpl = on;
                rc = core_ns_save_meta(ns);
        }
        pthread_mutex_unlock(&ns->lock);
        return rc;
}

bool core_ns_pr_conflict(struct core_ns *ns, const struct core_pr_nexus *nexus, bool is_read,
                         bool is_write)
{
        if (!nexus || (!is_read && !is_write) || !core_pr_any_reservation(&ns->pr))
                return false;
        pthread_mutex_lock(&ns->lock);
        bool c = core_pr_conflict(&ns->pr, nexus, is_read, is_write);
        pthread_mutex_unlock(&ns->lock);
        return c;
}

bool core_pr_conflict(const struct core_pr *pr, const struct core_pr_nexus *nexus, bool is_read,
                      bool is_write)
{
        if (!is_read && !is_write)
                return false;
        if (pr->legacy_reserved && !core_pr_nexus_eq(&pr->legacy_holder, nexus))
                return true;

        switch (pr->type) {
        case CORE_PR_NONE:
                return false;
        case CORE_PR_WRITE_EXCLUSIVE:
                return is_write && !core_pr_is_holder(pr, nexus);
        case CORE_PR_EXCLUSIVE_ACCESS:
                return !core_pr_is_holder(pr, nexus);
        case CORE_PR_WE_REGS_ONLY:
        case CORE_PR_WE_ALL_REGS:
                return is_write && find_reg(pr, nexus) < 0;
        case CORE_PR_EA_REGS_ONLY:
        case CORE_PR_EA_ALL_REGS:
                return find_reg(pr, nexus) < 0;
        }
        return true;
}

/*
 * SPC-5 5.14.3: with registrations present, RESERVE/RELEASE from a holder,
 * or from a registrant of a registrants-only/all-registrants reservation,
 * succeed without effect; from anyone else they conflict.
 */
static enum core_status legacy_vs_persistent(const struct core_pr *pr,
                                             const struct core_pr_nexus *self)
{
        int me = find_reg(pr, self);
        if (holder_idx(pr, me) || (me >= 0 && type_shared(pr->type)))
                return CORE_OK;
        return CORE_E_RESERVATION_CONFLICT;
}

enum core_status core_pr_legacy_reserve(struct core_pr *pr, const struct core_pr_nexus *self)
{
        if (nr_regs(pr))
                return legacy_vs_persistent(pr, self);
        if (pr->legacy_reserved && !core_pr_nexus_eq(&pr->legacy_holder, self))
                return CORE_E_RESERVATION_CONFLICT;
        pr->legacy_holder = *self;
        __atomic_store_n(&pr->legacy_reserved, true, __ATOMIC_RELEASE);
        return CORE_OK;
}

enum core_status core_pr_legacy_release(struct core_pr *pr, const struct core_pr_nexus *self)
{
        if (nr_regs(pr))
                return legacy_vs_persistent(pr, self);
        if (pr->legacy_reserved && core_pr_nexus_eq(&pr->legacy_holder, self))
                __atomic_store_n(&pr->legacy_reserved, false, __ATOMIC_RELEASE);
        return CORE_OK;
}

void core_pr_legacy_drop(struct core_pr *pr, const struct core_pr_nexus *nexus)
{
        if (pr->legacy_reserved && (!nexus || core_pr_nexus_eq(&pr->legacy_holder, nexus)))
                __atomic_store_n(&pr->legacy_reserved, false, __ATOMIC_RELEASE);
}

/* ---- Persistence ---- */

static void hex_encode(char *out, const uint8_t *p, size_t n)
{
        static const char digits[] = "0123456789abcdef";
        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[p[i] >> 4];
                out[2 * i + 1] = digits[p[i] & 15];
        }
        out[2 * n] = 0;
}

static int hex_nibble(char c)
{
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

static int hex_decode(uint8_t *out, size_t cap, const char *s, size_t *len)
{
        size_t n = strlen(s);
        if (n % 2 || n / 2 > cap)
                return -EINVAL;
        for (size_t i = 0; i < n / 2; i++) {
                int hi = hex_nibble(s[2 * i]), lo = hex_nibble(s[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                out[i] = (uint8_t)(hi << 4 | lo);
        }
        *len = n / 2;
        return 0;
}

static json_t *reg_to_json(const struct core_pr_reg *r, bool holder)
{
        char key[17], tid[2 * CORE_PR_NEXUS_MAX + 1];
        snprintf(key, sizeof(key), "%016" PRIx64, r->key);
        size_t tl = r->nexus.transport_id_len;
        if (tl > CORE_PR_NEXUS_MAX)
                tl = CORE_PR_NEXUS_MAX;
        hex_encode(tid, r->nexus.transport_id, tl);
        return json_pack("{s:s, s:s, s:s, s:i, s:s, s:b, s:b}", "key", key, "initiator",
                         r->nexus.initiator, "target", r->nexus.target, "rel_tgt_port",
                         (int)r->nexus.rel_tgt_port, "tid", tid, "all_tg_pt", r->all_tg_pt,
                         "holder", holder);
}

static json_t *pr_to_json(const struct core_pr *pr, bool all)
{
        if (!pr->aptpl && !all)
                return json_pack("{s:b}", "aptpl", 0);

        json_t *regs = json_array();
        if (!regs)
                return NULL;
        for (int i = 0; i < CORE_PR_MAX_REGS; i++) {
                const struct core_pr_reg *r = &pr->regs[i];
                if (!r->used)
                        continue;
                json_t *o = reg_to_json(r, pr->type != CORE_PR_NONE && pr->holder == i);
                if (!o || json_array_append_new(regs, o)) {
                        json_decref(regs);
                        return NULL;
                }
        }
        return json_pack("{s:b, s:I, s:i, s:i, s:o}", "aptpl", pr->aptpl, "generation",
                         (json_int_t)pr->generation, "type", (int)pr->type, "scope", (int)pr->scope,
                         "regs", regs);
}

json_t *core_pr_to_json(const struct core_pr *pr)
{
        return pr_to_json(pr, false);
}

json_t *core_pr_to_json_all(const struct core_pr *pr)
{
        return pr_to_json(pr, true);
}

static int reg_from_json(struct core_pr_reg *r, const json_t *o, bool *holder)
{
        const char *key, *ini, *tgt, *tid;
        json_int_t port;
        int all_tg_pt = 0, h = 0;
        if (!json_is_object(o) ||
            json_unpack((json_t *)o, "{s:s, s:s, s:s, s:I, s:s, s?b, s?b}", "key", &key,
                        "initiator", &ini, "target", &tgt, "rel_tgt_port", &port, "tid", &tid,
                        "all_tg_pt", &all_tg_pt, "holder", &h))
                return -EINVAL;
        if (strlen(ini) >= CORE_PR_NEXUS_MAX || strlen(tgt) >= CORE_PR_NEXUS_MAX || !ini[0] ||
            port < 0 || port > 0xffff || strlen(key) != 16)
                return -EINVAL;
        uint8_t kb[8];
        size_t kl;
        if (hex_decode(kb, sizeof(kb), key, &kl) || kl != 8)
                return -EINVAL;
        size_t tl;
        if (hex_decode(r->nexus.transport_id, CORE_PR_NEXUS_MAX, tid, &tl))
                return -EINVAL;
        r->key = 0;
        for (int i = 0; i < 8; i++)
                r->key = r->key << 8 | kb[i];
        if (r->key == 0)
                return -EINVAL;
        r->nexus.transport_id_len = (uint16_t)tl;
        snprintf(r->nexus.initiator, sizeof(r->nexus.initiator), "%s", ini);
        snprintf(r->nexus.target, sizeof(r->nexus.target), "%s", tgt);
        r->nexus.rel_tgt_port = (uint16_t)port;
        r->all_tg_pt = all_tg_pt;
        r->used = true;
        *holder = h;
        return 0;
}

int core_pr_from_json(struct core_pr *pr, const json_t *j)
{
        core_pr_init(pr);
        int aptpl = 0;
        if (!json_is_object(j) || json_unpack((json_t *)j, "{s:b}", "aptpl", &aptpl))
                goto bad;
        if (!aptpl && !json_object_get(j, "regs"))
                return 0;

        json_int_t gen, type, scope;
        json_t *regs;
        if (json_unpack((json_t *)j, "{s:I, s:I, s:I, s:o}", "generation", &gen, "type", &type,
                        "scope", &scope, "regs", &regs))
                goto bad;
        if (gen < 0 || gen > UINT32_MAX || scope != CORE_PR_SCOPE_LU || !json_is_array(regs) ||
            json_array_size(regs) > CORE_PR_MAX_REGS ||
            (type != CORE_PR_NONE && !core_pr_type_valid((unsigned)type)))
                goto bad;
        int holder = -1;
        size_t i;
        json_t *o;
        json_array_foreach(regs, i, o)
        {
                bool h = false;
                if (reg_from_json(&pr->regs[i], o, &h))
                        goto bad;
                if (h) {
                        if (holder >= 0)
                                goto bad;
                        holder = (int)i;
                }
        }
        pr->aptpl = aptpl;
        pr->generation = (uint32_t)gen;
        if (type != CORE_PR_NONE) {
                if (core_pr_type_all_regs((enum core_pr_type)type) ? json_array_size(regs) == 0
                                                                   : holder < 0)
                        goto bad;
                set_reservation(pr, (enum core_pr_type)type, (uint8_t)scope, holder);
        }
        return 0;
bad:
        core_pr_init(pr);
        return -EINVAL;
}
