/*
 * NVM subsystems and their controllers (NVMe Base 2.0 chapter 3.1 and
 * NVMe-oF: dynamic controller model, 3.3.1), allowed hosts, the NSID map
 * onto core namespaces, the listener registry for discovery, keep-alive
 * enforcement (Base 2.0 3.9: tear the association down when KATO passes
 * without a command), controller enable/reset/shutdown (CC/CSTS, 3.5), and
 * the control API of nvme.h that RPCs call from the management thread while
 * queues run on reactors.
 */
#include <errno.h>
#include <jansson.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvme/internal.h"
#include "rt/log.h"
#include "rt/reactor.h"

pthread_mutex_t nvme_lock = PTHREAD_MUTEX_INITIALIZER;
struct nvme_subsys *nvme_subsystems;
static uint16_t next_cntlid = 1;
static bool disc_created;

struct nvme_listener {
        char trtype[8];
        char addr[64];
        uint16_t port;
        uint16_t portid;
        uint8_t tls; /* nvme_listener_register */
};
#define MAX_LISTENERS 32
static struct nvme_listener listeners[MAX_LISTENERS];
static unsigned nlisteners;
static uint16_t next_portid = 1;

#define errf(...)                                                                                  \
        do {                                                                                       \
                if (err && errlen)                                                                 \
                        snprintf(err, errlen, __VA_ARGS__);                                        \
        } while (0)

/* ---- Subsystems ---- */

static struct nvme_subsys *subsys_alloc(const char *nqn, const char *serial, const char *model)
{
        struct nvme_subsys *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        snprintf(s->nqn, sizeof(s->nqn), "%s", nqn);
        snprintf(s->serial, sizeof(s->serial), "%s",
                 serial && *serial ? serial : "SLATE0000000001");
        snprintf(s->model, sizeof(s->model), "%s", model && *model ? model : "Slate NVMe");
        snprintf(s->fr, sizeof(s->fr), "%s", "0.1.0");
        pthread_mutex_init(&s->fdp_lock, NULL);
        s->refs = 1;
        nvme_dst_init(&s->dst);
        s->pel = nvme_pel_new(); /* NULL: no Persistent Event log events are kept */
        return s;
}

/* The discovery subsystem always exists; created on first use. */
static void ensure_discovery_locked(void)
{
        if (disc_created)
                return;
        struct nvme_subsys *s = subsys_alloc(NVMF_DISCOVERY_NQN, "SLATEDISC", "Slate Discovery");
        if (!s)
                return;
        s->discovery = true;
        s->allow_any = true;
        s->next = nvme_subsystems;
        nvme_subsystems = s;
        disc_created = true;
}

struct nvme_subsys *nvme_subsys_find_locked(const char *nqn)
{
        ensure_discovery_locked();
        for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next)
                if (strcmp(s->nqn, nqn) == 0)
                        return s;
        return NULL;
}

bool nvme_subsys_host_allowed_locked(const struct nvme_subsys *s, const char *hostnqn)
{
        /*
         * An empty Host NQN (spdk_nvme_perf sends one unless told a name) is
         * never a listed host, and is refused where DH-HMAC-CHAP secrets are
         * configured: a host that must prove who it is has to say who it is.
         * TLS needs no case here: the PSK's Host NQN must match (fabrics.c).
         */
        if (!hostnqn[0])
                return s->allow_any && s->nhkeys == 0;
        if (s->allow_any)
                return true;
        for (unsigned i = 0; i < s->nhosts; i++)
                if (strcmp(s->hosts[i], hostnqn) == 0)
                        return true;
        return false;
}

static void subsys_put_locked(struct nvme_subsys *s)
{
        if (--s->refs > 0)
                return;
        pthread_mutex_destroy(&s->fdp_lock);
        nvme_dst_fini(&s->dst);
        nvme_pel_free(s->pel);
        nvme_auth_subsys_free_locked(s);
        free(s->hosts);
        free(s);
}

void nvme_subsys_hold(struct nvme_subsys *s)
{
        pthread_mutex_lock(&nvme_lock);
        s->refs++;
        pthread_mutex_unlock(&nvme_lock);
}

void nvme_subsys_release(struct nvme_subsys *s)
{
        pthread_mutex_lock(&nvme_lock);
        subsys_put_locked(s);
        pthread_mutex_unlock(&nvme_lock);
}

static bool nqn_ok(const char *nqn)
{
        size_t n = nqn ? strlen(nqn) : 0;
        return n >= 5 && n <= NVMF_NQN_MAX_LEN && strncmp(nqn, "nqn.", 4) == 0;
}

int nvme_subsys_add(const char *nqn, const char *serial, const char *model, char *err,
                    size_t errlen)
{
        nvme_events_init();
        if (!nqn_ok(nqn)) {
                errf("invalid NQN (must start with \"nqn.\", at most %d bytes)", NVMF_NQN_MAX_LEN);
                return -EINVAL;
        }
        if ((serial && strlen(serial) > 20) || (model && strlen(model) > 40)) {
                errf("serial is at most 20 and model at most 40 characters");
                return -EINVAL;
        }
        pthread_mutex_lock(&nvme_lock);
        if (nvme_subsys_find_locked(nqn)) {
                pthread_mutex_unlock(&nvme_lock);
                errf("subsystem %s already exists", nqn);
                return -EEXIST;
        }
        struct nvme_subsys *s = subsys_alloc(nqn, serial, model);
        if (!s) {
                pthread_mutex_unlock(&nvme_lock);
                errf("out of memory");
                return -ENOMEM;
        }
        s->next = nvme_subsystems;
        nvme_subsystems = s;
        nvmf_discovery_changed();
        pthread_mutex_unlock(&nvme_lock);
        LOG_INFO("nvme", "subsystem %s created", nqn);
        return 0;
}

int nvme_subsys_set_copy_xns(const char *nqn, bool on, char *err, size_t errlen)
{
        pthread_mutex_lock(&nvme_lock);
        struct nvme_subsys *s = nqn ? nvme_subsys_find_locked(nqn) : NULL;
        if (!s || s->discovery) {
                pthread_mutex_unlock(&nvme_lock);
                errf("no subsystem %s", nqn ? nqn : "(none)");
                return -ENOENT;
        }
        atomic_store(&s->copy_xns, on);
        pthread_mutex_unlock(&nvme_lock);
        LOG_INFO("nvme", "subsystem %s: copy_cross_namespace %s (new and reset controllers)", nqn,
                 on ? "on" : "off");
        return 0;
}

static void ns_slot_clear(struct nvme_subsys *s, uint32_t nsid)
{
        struct core_ns *ns = atomic_exchange(&s->ns[nsid], NULL);
        if (!ns)
                return;
        /* Wait out readers that loaded the old pointer and are taking their reference. */
        while (atomic_load(&s->ns_lookups) != 0)
                sched_yield();
        core_ns_put(ns);
}

int nvme_subsys_del(const char *nqn, char *err, size_t errlen)
{
        pthread_mutex_lock(&nvme_lock);
        struct nvme_subsys **pp = &nvme_subsystems, *s;
        ensure_discovery_locked();
        while ((s = *pp) && strcmp(s->nqn, nqn) != 0)
                pp = &s->next;
        if (!s || s->discovery) {
                pthread_mutex_unlock(&nvme_lock);
                errf(s ? "the discovery subsystem cannot be deleted" : "no subsystem %s", nqn);
                return s ? -EPERM : -ENOENT;
        }
        *pp = s->next;
        s->deleted = true;
        for (struct nvme_ctrl *c = s->ctrls; c; c = c->next)
                nvme_ctrl_teardown(c, true);
        nvmf_discovery_changed();
        pthread_mutex_unlock(&nvme_lock);
        for (uint32_t i = 1; i <= NVME_MAX_NSID; i++)
                ns_slot_clear(s, i);
        pthread_mutex_lock(&nvme_lock);
        subsys_put_locked(s);
        pthread_mutex_unlock(&nvme_lock);
        LOG_INFO("nvme", "subsystem %s deleted", nqn);
        return 0;
}

int nvme_subsys_allow_host(const char *nqn, const char *hostnqn, char *err, size_t errlen)
{
        if (!hostnqn || (strcmp(hostnqn, "*") != 0 && !nqn_ok(hostnqn))) {
                errf("invalid host NQN");
                return -EINVAL;
        }
        pthread_mutex_lock(&nvme_lock);
        struct nvme_subsys *s = nvme_subsys_find_locked(nqn);
        int rc = 0;
        if (!s || s->discovery) {
                errf("no subsystem %s", nqn);
                rc = -ENOENT;
                goto out;
        }
        if (strcmp(hostnqn, "*") == 0) {
                s->allow_any = true;
        } else if (!nvme_subsys_host_allowed_locked(s, hostnqn) || s->allow_any) {
                for (unsigned i = 0; i < s->nhosts; i++)
                        if (strcmp(s->hosts[i], hostnqn) == 0)
                                goto changed;
                if (s->nhosts == s->hosts_cap) {
                        unsigned cap = s->hosts_cap ? 2 * s->hosts_cap : 8;
                        void *h = realloc(s->hosts, cap * sizeof(*s->hosts));
                        if (!h) {
                                errf("out of memory");
                                rc = -ENOMEM;
                                goto out;
                        }
                        s->hosts = h;
                        s->hosts_cap = cap;
                }
                snprintf(s->hosts[s->nhosts++], NVMF_NQN_SIZE, "%s", hostnqn);
        }
changed:
        nvmf_discovery_changed();
out:
        pthread_mutex_unlock(&nvme_lock);
        return rc;
}

int nvme_subsys_disallow_host(const char *nqn, const char *hostnqn, char *err, size_t errlen)
{
        pthread_mutex_lock(&nvme_lock);
        struct nvme_subsys *s = nvme_subsys_find_locked(nqn);
        int rc = -ENOENT;
        if (!s || s->discovery || !hostnqn) {
                errf("no subsystem %s", nqn);
                goto out;
        }
        if (strcmp(hostnqn, "*") == 0) {
                s->allow_any = false;
                rc = 0;
        } else {
                for (unsigned i = 0; i < s->nhosts; i++) {
                        if (strcmp(s->hosts[i], hostnqn) == 0) {
                                memmove(s->hosts[i], s->hosts[i + 1],
                                        (s->nhosts - i - 1) * sizeof(*s->hosts));
                                s->nhosts--;
                                nvme_auth_host_removed_locked(s, hostnqn); /* its secrets go */
                                rc = 0;
                                break;
                        }
                }
                if (rc)
                        errf("host %s is not on the allowed list of %s", hostnqn, nqn);
        }
        if (rc == 0) {
                /* Existing associations of a host no longer allowed end now. */
                for (struct nvme_ctrl *c = s->ctrls; c; c = c->next)
                        if (!nvme_subsys_host_allowed_locked(s, c->hostnqn))
                                nvme_ctrl_teardown(c, true);
                nvmf_discovery_changed();
        }
out:
        pthread_mutex_unlock(&nvme_lock);
        return rc;
}

/* ---- Namespaces ---- */

struct core_ns *nvme_ns_lookup(struct nvme_subsys *s, uint32_t nsid)
{
        if (nsid == 0 || nsid > NVME_MAX_NSID)
                return NULL;
        atomic_fetch_add(&s->ns_lookups, 1);
        struct core_ns *ns = atomic_load(&s->ns[nsid]);
        if (ns)
                core_ns_get(ns);
        atomic_fetch_sub(&s->ns_lookups, 1);
        return ns;
}

bool nvme_ns_active(struct nvme_subsys *s, uint32_t nsid)
{
        return nsid != 0 && nsid <= NVME_MAX_NSID && atomic_load(&s->ns[nsid]) != NULL;
}

static void ns_changed_locked(struct nvme_subsys *s, uint32_t nsid)
{
        for (struct nvme_ctrl *c = s->ctrls; c; c = c->next)
                nvme_ctrl_raise(c, NVME_EVT_NS_CHANGED, nsid);
}

int nvme_ns_attach(const char *nqn, uint32_t nsid, const char *ns_name, char *err, size_t errlen)
{
        int rc = 0;
        if (nsid > NVME_MAX_NSID) {
                errf("NSID must be 1..%d", NVME_MAX_NSID);
                return -EINVAL;
        }
        pthread_mutex_lock(&nvme_lock);
        struct nvme_subsys *s = nvme_subsys_find_locked(nqn);
        if (!s || s->discovery) {
                errf("no subsystem %s", nqn);
                rc = -ENOENT;
                goto out;
        }
        struct core_ns *ns = ns_name ? core_ns_find(ns_name) : NULL;
        if (!ns) {
                errf("no namespace %s", ns_name ? ns_name : "(null)");
                rc = -ENOENT;
                goto out;
        }
        for (uint32_t i = 1; i <= NVME_MAX_NSID; i++) {
                if (atomic_load(&s->ns[i]) == ns) {
                        errf("namespace %s is already NSID %u of %s", ns_name, i, nqn);
                        rc = -EEXIST;
                        goto out;
                }
        }
        if (nsid == 0) {
                for (nsid = 1; nsid <= NVME_MAX_NSID && atomic_load(&s->ns[nsid]); nsid++)
                        ;
                if (nsid > NVME_MAX_NSID) {
                        errf("subsystem %s has no free NSID", nqn);
                        rc = -ENOSPC;
                        goto out;
                }
        } else if (atomic_load(&s->ns[nsid])) {
                errf("NSID %u of %s is in use", nsid, nqn);
                rc = -EEXIST;
                goto out;
        }
        core_ns_get(ns);
        atomic_store(&s->ns[nsid], ns);
        ns_changed_locked(s, nsid);
        LOG_INFO("nvme", "%s: namespace %s attached as NSID %u", nqn, ns_name, nsid);
        rc = (int)nsid;
out:
        pthread_mutex_unlock(&nvme_lock);
        return rc; /* the NSID attached, or -errno */
}

int nvme_ns_detach(const char *nqn, uint32_t nsid, char *err, size_t errlen)
{
        pthread_mutex_lock(&nvme_lock);
        struct nvme_subsys *s = nvme_subsys_find_locked(nqn);
        if (!s || s->discovery || !nvme_ns_active(s, nsid)) {
                pthread_mutex_unlock(&nvme_lock);
                errf("no NSID %u in subsystem %s", nsid, nqn);
                return -ENOENT;
        }
        s->refs++;
        ns_changed_locked(s, nsid);
        /* Streams of the namespace are released (directive.c); FDP event enables start over. */
        for (struct nvme_ctrl *c = s->ctrls; c; c = c->next)
                nvme_streams_forget(c, nsid);
        for (unsigned ph = 0; ph < NVME_FDP_NRUH; ph++)
                atomic_store(&s->fdp_ev_off[nsid][ph], 0);
        pthread_mutex_unlock(&nvme_lock);
        ns_slot_clear(s, nsid);
        pthread_mutex_lock(&nvme_lock);
        subsys_put_locked(s);
        pthread_mutex_unlock(&nvme_lock);
        LOG_INFO("nvme", "%s: NSID %u detached", nqn, nsid);
        return 0;
}

/*
 * At shutdown, after the reactors have stopped: every subsystem lets go of its
 * namespaces, so the last reference runs the namespace's close (metadata,
 * atomic journal) as it does for a namespace only iSCSI exported.
 */
void nvme_subsys_shutdown(void)
{
        pthread_mutex_lock(&nvme_lock);
        for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next)
                for (uint32_t nsid = 1; nsid <= NVME_MAX_NSID; nsid++)
                        ns_slot_clear(s, nsid);
        pthread_mutex_unlock(&nvme_lock);
}

int nvme_ns_in_use(const struct core_ns *ns)
{
        int n = 0;
        pthread_mutex_lock(&nvme_lock);
        for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next)
                for (uint32_t i = 1; i <= NVME_MAX_NSID; i++)
                        if (atomic_load(&s->ns[i]) == ns)
                                n++;
        pthread_mutex_unlock(&nvme_lock);
        return n;
}

/* ---- Listeners ---- */

int nvme_listener_register(const char *trtype, const char *addr, uint16_t port, uint8_t tls)
{
        if (!trtype || !addr || strlen(trtype) >= 8 || strlen(addr) >= 64)
                return -EINVAL;
        pthread_mutex_lock(&nvme_lock);
        for (unsigned i = 0; i < nlisteners; i++) {
                if (strcmp(listeners[i].trtype, trtype) == 0 &&
                    strcmp(listeners[i].addr, addr) == 0 && listeners[i].port == port) {
                        pthread_mutex_unlock(&nvme_lock);
                        return -EEXIST;
                }
        }
        if (nlisteners == MAX_LISTENERS) {
                pthread_mutex_unlock(&nvme_lock);
                return -ENOSPC;
        }
        struct nvme_listener *l = &listeners[nlisteners++];
        snprintf(l->trtype, sizeof(l->trtype), "%s", trtype);
        snprintf(l->addr, sizeof(l->addr), "%s", addr);
        l->port = port;
        l->portid = next_portid++;
        l->tls = tls;
        ensure_discovery_locked();
        nvmf_discovery_changed();
        pthread_mutex_unlock(&nvme_lock);
        return 0;
}

void nvme_listener_unregister(const char *trtype, const char *addr, uint16_t port)
{
        pthread_mutex_lock(&nvme_lock);
        for (unsigned i = 0; i < nlisteners; i++) {
                if (strcmp(listeners[i].trtype, trtype) == 0 &&
                    strcmp(listeners[i].addr, addr) == 0 && listeners[i].port == port) {
                        memmove(&listeners[i], &listeners[i + 1],
                                (nlisteners - i - 1) * sizeof(listeners[0]));
                        nlisteners--;
                        nvmf_discovery_changed();
                        break;
                }
        }
        pthread_mutex_unlock(&nvme_lock);
}

/* For discovery.c: listener i (under nvme_lock). */
bool nvmf_listener_get_locked(unsigned i, const char **trtype, const char **addr, uint16_t *port,
                              uint16_t *portid, uint8_t *tls)
{
        if (i >= nlisteners)
                return false;
        *trtype = listeners[i].trtype;
        *addr = listeners[i].addr;
        *port = listeners[i].port;
        *portid = listeners[i].portid;
        *tls = listeners[i].tls;
        return true;
}

/* ---- Controllers ---- */

void nvme_ctrl_get(struct nvme_ctrl *ctrl)
{
        atomic_fetch_add(&ctrl->refs, 1);
}

bool nvme_ctrl_tryget(struct nvme_ctrl *ctrl)
{
        int r = atomic_load(&ctrl->refs);
        while (r > 0 && !atomic_compare_exchange_weak(&ctrl->refs, &r, r + 1))
                ;
        return r > 0;
}

void nvme_ctrl_put(struct nvme_ctrl *ctrl)
{
        if (atomic_fetch_sub(&ctrl->refs, 1) != 1)
                return;
        pthread_mutex_lock(&nvme_lock);
        struct nvme_subsys *s = ctrl->subsys;
        for (struct nvme_ctrl **pp = &s->ctrls; *pp; pp = &(*pp)->next) {
                if (*pp == ctrl) {
                        *pp = ctrl->next;
                        break;
                }
        }
        LOG_INFO("nvme", "%s: controller %u freed", s->nqn, ctrl->cntlid);
        subsys_put_locked(s);
        pthread_mutex_unlock(&nvme_lock);
        core_host_put(ctrl->host);
        nvme_streams_reset(ctrl); /* streams go back to the namespaces' placement tables */
        pthread_mutex_destroy(&ctrl->streams_lock);
        pthread_mutex_destroy(&ctrl->lock);
        free(ctrl->pel_ctx);
        free(ctrl->queues);
        free(ctrl);
}

void nvme_ctrl_reset_features(struct nvme_ctrl *ctrl)
{
        ctrl->feat_arb = 0;
        ctrl->feat_pm = 0;
        ctrl->feat_err_rec = 0;
        ctrl->feat_wan = 0;
        ctrl->aec = 0;
        ctrl->temp_over = NVME_WCTEMP;
        ctrl->temp_under = 0;
        memset(&ctrl->hb, 0, sizeof(ctrl->hb));
        /* CDFE: formats 2h and 3h (bits 2, 3) when the subsystem says so (copy_cross_namespace). */
        put_le16(&ctrl->hb.cdfe, ctrl->copy_xns ? 0x0c : 0);
        atomic_store_explicit(&ctrl->copy_fmts, ctrl->copy_xns ? 0x0c : 0, memory_order_relaxed);
        ctrl->nr_io_queues = NVME_MAX_IO_QUEUES;
}

static int ctrl_create(struct nvme_subsys *s, struct nvme_queue *q, const char *hostnqn,
                       const uint8_t hostid[16], uint32_t kato_ms, struct nvme_ctrl **out);

static bool cntlid_used_locked(uint16_t id)
{
        for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next)
                for (struct nvme_ctrl *c = s->ctrls; c; c = c->next)
                        if (c->cntlid == id)
                                return true;
        return false;
}

int nvme_ctrl_create(const char *subnqn, struct nvme_queue *q, const char *hostnqn,
                     const uint8_t hostid[16], uint32_t kato_ms, struct nvme_ctrl **out)
{
        pthread_mutex_lock(&nvme_lock);
        struct nvme_subsys *s = nvme_subsys_find_locked(subnqn);
        if (!s || !nvme_subsys_host_allowed_locked(s, hostnqn)) {
                pthread_mutex_unlock(&nvme_lock);
                return s ? -EACCES : -ENOENT;
        }
        s->refs++; /* pinned while the controller is built */
        pthread_mutex_unlock(&nvme_lock);
        int rc = ctrl_create(s, q, hostnqn, hostid, kato_ms, out);
        pthread_mutex_lock(&nvme_lock);
        subsys_put_locked(s);
        pthread_mutex_unlock(&nvme_lock);
        return rc;
}

static int ctrl_create(struct nvme_subsys *s, struct nvme_queue *q, const char *hostnqn,
                       const uint8_t hostid[16], uint32_t kato_ms, struct nvme_ctrl **out)
{
        struct nvme_ctrl *ctrl = calloc(1, sizeof(*ctrl));
        if (!ctrl)
                return -ENOMEM;
        ctrl->max_qid = s->discovery ? 0 : NVME_MAX_IO_QUEUES;
        ctrl->queues = calloc((size_t)ctrl->max_qid + 1, sizeof(*ctrl->queues));
        if (!ctrl->queues) {
                free(ctrl);
                return -ENOMEM;
        }
        pthread_mutex_init(&ctrl->lock, NULL);
        pthread_mutex_init(&ctrl->streams_lock, NULL);
        atomic_init(&ctrl->refs, 1); /* the admin queue's */
        snprintf(ctrl->hostnqn, sizeof(ctrl->hostnqn), "%s", hostnqn);
        memcpy(ctrl->hostid, hostid, 16);
        ctrl->kato_ms = kato_ms ? kato_ms : (s->discovery ? NVME_DEFAULT_KATO_MS : 0);
        ctrl->admin_reactor = q->reactor;
        atomic_store(&ctrl->last_cmd_ns, rt_now_ns());
        ctrl->copy_xns = atomic_load(&s->copy_xns);
        nvme_ctrl_reset_features(ctrl);
        ctrl->queues[0] = q;

        pthread_mutex_lock(&nvme_lock);
        if (s->deleted) {
                pthread_mutex_unlock(&nvme_lock);
                free(ctrl->queues);
                free(ctrl);
                return -ENODEV;
        }
        /*
         * Controller IDs unique across the target, in this gateway's range
         * (core/ana.h: 1..FFEFh alone), so that gateways exporting one
         * subsystem never hand a host one CNTLID twice (Linux refuses it).
         */
        uint16_t lo, hi;
        core_gateway_cntlid_range(&lo, &hi);
        for (unsigned tries = 0; tries <= (unsigned)(hi - lo); tries++) {
                if (next_cntlid < lo || next_cntlid > hi)
                        next_cntlid = lo;
                uint16_t id = next_cntlid;
                next_cntlid = next_cntlid >= hi ? lo : next_cntlid + 1;
                if (!cntlid_used_locked(id)) {
                        ctrl->cntlid = id;
                        break;
                }
        }
        if (!ctrl->cntlid) {
                pthread_mutex_unlock(&nvme_lock);
                free(ctrl->queues);
                free(ctrl);
                return -ENOSPC;
        }
        ctrl->subsys = s;
        s->refs++;
        ctrl->next = s->ctrls;
        s->ctrls = ctrl;
        pthread_mutex_unlock(&nvme_lock);
        if (!s->discovery)
                ctrl->host = core_host_get("nvme", hostnqn);
        q->ctrl = ctrl;
        LOG_INFO("nvme", "%s: controller %u for %s (KATO %u ms)", s->nqn, ctrl->cntlid, hostnqn,
                 ctrl->kato_ms);
        *out = ctrl;
        return 0;
}

struct nvme_ctrl *nvme_ctrl_get_by_id(const char *subnqn, uint16_t cntlid)
{
        struct nvme_ctrl *found = NULL;
        pthread_mutex_lock(&nvme_lock);
        struct nvme_subsys *s = nvme_subsys_find_locked(subnqn);
        for (struct nvme_ctrl *c = s ? s->ctrls : NULL; c; c = c->next) {
                if (c->cntlid != cntlid || atomic_load(&c->dead))
                        continue;
                if (nvme_ctrl_tryget(c))
                        found = c;
                break;
        }
        pthread_mutex_unlock(&nvme_lock);
        return found;
}

int nvme_ctrl_add_queue(struct nvme_ctrl *ctrl, struct nvme_queue *q)
{
        int rc = 0;
        pthread_mutex_lock(&ctrl->lock);
        if (atomic_load(&ctrl->dead))
                rc = -ENODEV;
        else if (q->qid == 0 || q->qid > ctrl->max_qid)
                rc = -EINVAL;
        else if (ctrl->queues[q->qid])
                rc = -EEXIST;
        else
                ctrl->queues[q->qid] = q;
        pthread_mutex_unlock(&ctrl->lock);
        if (rc == 0)
                q->ctrl = ctrl;
        return rc;
}

struct teardown_msg {
        struct nvme_ctrl *ctrl;
        struct nvme_queue *q;
        uint16_t qid;
};

static void teardown_fn(void *arg)
{
        struct teardown_msg *m = arg;
        struct nvme_queue *q = NULL;
        pthread_mutex_lock(&m->ctrl->lock);
        if (m->ctrl->queues[m->qid] == m->q)
                q = m->q;
        pthread_mutex_unlock(&m->ctrl->lock);
        /* q is finalised only on this reactor, so it cannot vanish here. */
        if (q && q->teardown)
                q->teardown(q);
        nvme_ctrl_put(m->ctrl);
        free(m);
}

void nvme_ctrl_teardown(struct nvme_ctrl *ctrl, bool all)
{
        if (all)
                atomic_store(&ctrl->dead, true);
        pthread_mutex_lock(&ctrl->lock);
        for (uint16_t qid = all ? 0 : 1; qid <= ctrl->max_qid; qid++) {
                struct nvme_queue *q = ctrl->queues[qid];
                if (!q || !q->reactor)
                        continue;
                struct teardown_msg *m = malloc(sizeof(*m));
                if (!m)
                        continue;
                m->ctrl = ctrl;
                m->q = q;
                m->qid = qid;
                if (!nvme_ctrl_tryget(ctrl)) {
                        free(m);
                        break;
                }
                if (rt_msg_send(q->reactor, teardown_fn, m) != 0) {
                        atomic_fetch_sub(&ctrl->refs, 1); /* queue still holds one */
                        free(m);
                }
        }
        pthread_mutex_unlock(&ctrl->lock);
}

void nvme_queue_fini(struct nvme_queue *q)
{
        struct nvme_ctrl *ctrl = q->ctrl;
        struct nvme_cmd *aer[NVME_AERL];
        unsigned naer = 0;
        bool admin = false;
        nvme_auth_queue_free(q);
        if (!ctrl)
                return;
        pthread_mutex_lock(&ctrl->lock);
        if (q->qid <= ctrl->max_qid && ctrl->queues[q->qid] == q) {
                ctrl->queues[q->qid] = NULL;
                admin = q->qid == 0;
        }
        if (admin) {
                naer = ctrl->naer;
                memcpy(aer, ctrl->aer, naer * sizeof(aer[0]));
                ctrl->naer = 0;
                if (ctrl->ka_armed && q->reactor)
                        rt_timer_cancel(q->reactor, &ctrl->ka_timer);
                ctrl->ka_armed = false;
        }
        pthread_mutex_unlock(&ctrl->lock);
        q->ctrl = NULL;
        for (unsigned i = 0; i < naer; i++) {
                nvme_set_status(aer[i], NVME_SCT_GENERIC, NVME_SC_ABORT_SQ_DELETION, false);
                nvme_cmd_complete(aer[i]);
        }
        if (admin)
                nvme_ctrl_teardown(ctrl, true); /* the association ends with its admin queue */
        nvme_ctrl_put(ctrl);
}

/* ---- Keep alive (Base 2.0 3.9.5) ---- */

static void ka_timer_fn(struct rt_timer *t)
{
        struct nvme_ctrl *ctrl =
            (struct nvme_ctrl *)((char *)t - offsetof(struct nvme_ctrl, ka_timer));
        uint64_t now = rt_now_ns();
        uint64_t last = atomic_load_explicit(&ctrl->last_cmd_ns, memory_order_relaxed);
        pthread_mutex_lock(&ctrl->lock);
        uint32_t kato = ctrl->kato_ms;
        bool armed = ctrl->ka_armed;
        pthread_mutex_unlock(&ctrl->lock);
        if (!armed || atomic_load(&ctrl->dead))
                return;
        if (kato && now > last && now - last > ((uint64_t)kato + NVME_KATO_SLACK_MS) * 1000000ull) {
                LOG_WARN("nvme", "%s: controller %u keep-alive timeout (%u ms), tearing down",
                         ctrl->subsys->nqn, ctrl->cntlid, kato);
                pthread_mutex_lock(&ctrl->lock);
                ctrl->ka_armed = false;
                pthread_mutex_unlock(&ctrl->lock);
                nvme_ctrl_teardown(ctrl, true);
                return;
        }
        rt_timer_arm(ctrl->admin_reactor, t, kato && kato < 2000 ? kato / 2 + 1 : 1000);
}

void nvme_ctrl_ka_start(struct nvme_ctrl *ctrl)
{
        if (!ctrl->admin_reactor)
                return;
        pthread_mutex_lock(&ctrl->lock);
        bool arm = !ctrl->ka_armed && ctrl->kato_ms != 0;
        if (arm)
                ctrl->ka_armed = true;
        pthread_mutex_unlock(&ctrl->lock);
        if (arm) {
                ctrl->ka_timer.fn = ka_timer_fn;
                rt_timer_arm(ctrl->admin_reactor, &ctrl->ka_timer, 1000);
        }
}

/* ---- CC / CSTS (Base 2.0 3.1.4.5, 3.6) ---- */

void nvme_ctrl_set_cc(struct nvme_ctrl *ctrl, uint32_t cc)
{
        bool reset = false;
        pthread_mutex_lock(&ctrl->lock);
        uint32_t old = atomic_load(&ctrl->cc), csts = atomic_load(&ctrl->csts);
        if (!(old & NVME_CC_EN) && (cc & NVME_CC_EN)) {
                uint32_t css = (cc >> NVME_CC_CSS_SHIFT) & 7, mps = (cc >> NVME_CC_MPS_SHIFT) & 0xf;
                uint32_t ams = (cc >> NVME_CC_AMS_SHIFT) & 7;
                uint32_t sqes = (cc >> NVME_CC_IOSQES_SHIFT) & 0xf;
                uint32_t cqes = (cc >> NVME_CC_IOCQES_SHIFT) & 0xf;
                bool io = !ctrl->subsys->discovery;
                if ((css != 0 && css != 7) || mps != 0 || ams != 0 ||
                    (io && (sqes != 6 || cqes != 4)))
                        csts |= NVME_CSTS_CFS;
                else
                        csts = NVME_CSTS_RDY;
        } else if ((old & NVME_CC_EN) && !(cc & NVME_CC_EN)) {
                csts = 0;
                reset = true;
                nvme_ctrl_reset_features(ctrl);
                nvme_streams_reset(ctrl); /* SDIRCLR = 0: Streams off after a reset */
        }
        uint32_t shn = (cc >> NVME_CC_SHN_SHIFT) & 3;
        if (shn && !((old >> NVME_CC_SHN_SHIFT) & 3)) {
                /* Writes are acknowledged only once the backend accepted them; nothing to drain. */
                csts |= NVME_CSTS_SHST_CMPLT << NVME_CSTS_SHST_SHIFT;
        }
        atomic_store(&ctrl->cc, cc);
        atomic_store(&ctrl->csts, csts);
        pthread_mutex_unlock(&ctrl->lock);
        if (reset)
                nvme_ctrl_teardown(ctrl, false); /* a reset deletes the I/O queues */
}

/* ---- JSON ---- */

struct json_t *nvme_subsystems_json(void)
{
        json_t *arr = json_array();
        if (!arr)
                return NULL;
        pthread_mutex_lock(&nvme_lock);
        ensure_discovery_locked();
        for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next) {
                json_t *o = json_object(), *hosts = json_array(), *nss = json_array();
                unsigned nctrl = 0;
                for (struct nvme_ctrl *c = s->ctrls; c; c = c->next)
                        nctrl++;
                for (unsigned i = 0; i < s->nhosts; i++)
                        json_array_append_new(hosts, json_string(s->hosts[i]));
                for (uint32_t i = 1; i <= NVME_MAX_NSID; i++) {
                        struct core_ns *ns = atomic_load(&s->ns[i]);
                        if (ns)
                                json_array_append_new(nss,
                                                      json_pack("{s:I,s:s}", "nsid", (json_int_t)i,
                                                                "name", ns->name));
                }
                json_object_set_new(o, "nqn", json_string(s->nqn));
                json_object_set_new(o, "subtype", json_string(s->discovery ? "discovery" : "nvme"));
                json_object_set_new(o, "serial_number", json_string(s->serial));
                json_object_set_new(o, "model_number", json_string(s->model));
                json_object_set_new(o, "allow_any_host", json_boolean(s->allow_any));
                json_object_set_new(o, "copy_cross_namespace",
                                    json_boolean(atomic_load(&s->copy_xns)));
                json_object_set_new(o, "hosts", hosts);
                json_object_set_new(o, "namespaces", nss);
                json_object_set_new(o, "controllers", json_integer(nctrl));
                json_array_append_new(arr, o);
        }
        pthread_mutex_unlock(&nvme_lock);
        return arr;
}

struct json_t *nvme_ctrls_json(void)
{
        json_t *arr = json_array();
        if (!arr)
                return NULL;
        pthread_mutex_lock(&nvme_lock);
        for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next) {
                for (struct nvme_ctrl *c = s->ctrls; c; c = c->next) {
                        char hostid[40];
                        unsigned nq = 0;
                        pthread_mutex_lock(&c->lock);
                        for (uint16_t i = 0; i <= c->max_qid; i++)
                                nq += c->queues[i] != NULL;
                        uint32_t kato = c->kato_ms;
                        pthread_mutex_unlock(&c->lock);
                        for (int i = 0; i < 16; i++)
                                snprintf(hostid + 2 * i, 3, "%02x", c->hostid[i]);
                        json_array_append_new(
                            arr,
                            json_pack("{s:s,s:i,s:s,s:s,s:I,s:i,s:I,s:I,s:I,s:I,s:b}", "subnqn",
                                      s->nqn, "cntlid", c->cntlid, "hostnqn", c->hostnqn, "hostid",
                                      hostid, "kato_ms", (json_int_t)kato, "queues", nq, "cc",
                                      (json_int_t)atomic_load(&c->cc), "csts",
                                      (json_int_t)atomic_load(&c->csts), "host_reads",
                                      (json_int_t)atomic_load(&c->host_reads), "host_writes",
                                      (json_int_t)atomic_load(&c->host_writes), "dead",
                                      (int)atomic_load(&c->dead)));
                }
        }
        pthread_mutex_unlock(&nvme_lock);
        return arr;
}
