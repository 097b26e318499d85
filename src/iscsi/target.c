/*
 * iSCSI control path (RFC 7143 3.2.6 target nodes and portals, 12.2
 * SendTargets): the list of target nodes, each embedding the SCSI target
 * port with its LUN map; portals (rt/listener.c listening sockets, each
 * accepted connection started on the reactor it is handed to); the
 * SendTargets answer; and the JSON views the RPCs return.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "iscsi/internal.h"
#include "rt/listener.h"
#include "rt/log.h"
#include "rt/sock.h"

pthread_mutex_t iscsi_lock = PTHREAD_MUTEX_INITIALIZER;
static struct iscsi_tgt *targets;
static struct iscsi_portal *portals;

#define ERR(...) snprintf(err, errlen, __VA_ARGS__)

int iscsi_init(void)
{
        return 0;
}

void iscsi_fini(void)
{
        pthread_mutex_lock(&iscsi_lock);
        struct iscsi_portal *p = portals;
        portals = NULL;
        pthread_mutex_unlock(&iscsi_lock);
        while (p) {
                struct iscsi_portal *next = p->next;
                /* Closed on reactor 0, which owns the listener (rt/listener.c says why). */
                rt_listener_close(p->lis);
                free(p);
                p = next;
        }
        iscsi_close_all_sessions();
}

/* ---- targets ---- */

static struct iscsi_tgt *tgt_find(const char *name)
{
        for (struct iscsi_tgt *t = targets; t; t = t->next)
                if (!strcmp(t->name, name))
                        return t;
        return NULL;
}

static void acl_free_all(struct iscsi_tgt *t)
{
        while (t->acl) {
                struct iscsi_acl *a = t->acl;
                t->acl = a->next;
                explicit_bzero(a, sizeof(*a));
                free(a);
        }
}

static bool iqn_valid(const char *n)
{
        size_t l = strlen(n);
        if (l < 4 || l >= ISCSI_NAME_MAX)
                return false;
        if (strncmp(n, "iqn.", 4) && strncmp(n, "eui.", 4) && strncmp(n, "naa.", 4))
                return false;
        for (const char *p = n; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' ||
                      *p == '-' || *p == ':' || (*p >= 'A' && *p <= 'F' && strncmp(n, "iqn.", 4))))
                        return false;
        return true;
}

struct iscsi_tgt *iscsi_tgt_get(const char *name)
{
        pthread_mutex_lock(&iscsi_lock);
        struct iscsi_tgt *t = tgt_find(name);
        if (t)
                atomic_fetch_add(&t->nr_sessions, 1);
        pthread_mutex_unlock(&iscsi_lock);
        return t;
}

void iscsi_tgt_put(struct iscsi_tgt *t)
{
        atomic_fetch_sub(&t->nr_sessions, 1);
}

int iscsi_target_add(const char *iqn, char *err, size_t errlen)
{
        if (!iqn || !iqn_valid(iqn)) {
                ERR("invalid iSCSI name '%s'", iqn ? iqn : "");
                return -EINVAL;
        }
        struct iscsi_tgt *t = calloc(1, sizeof(*t));
        if (!t) {
                ERR("out of memory");
                return -ENOMEM;
        }
        snprintf(t->name, sizeof(t->name), "%s", iqn);
        scsi_target_init(&t->scsi, iqn, ISCSI_DEFAULT_TPGT);
        pthread_mutex_lock(&iscsi_lock);
        if (tgt_find(iqn)) {
                pthread_mutex_unlock(&iscsi_lock);
                scsi_target_fini(&t->scsi);
                free(t);
                ERR("target %s exists", iqn);
                return -EEXIST;
        }
        t->next = targets;
        targets = t;
        pthread_mutex_unlock(&iscsi_lock);
        LOG_INFO(ISCSI_MOD, "target %s added", iqn);
        return 0;
}

int iscsi_target_del(const char *iqn, char *err, size_t errlen)
{
        pthread_mutex_lock(&iscsi_lock);
        struct iscsi_tgt **pp = &targets;
        while (*pp && strcmp((*pp)->name, iqn))
                pp = &(*pp)->next;
        struct iscsi_tgt *t = *pp;
        if (!t) {
                pthread_mutex_unlock(&iscsi_lock);
                ERR("no target %s", iqn);
                return -ENOENT;
        }
        if (atomic_load(&t->nr_sessions)) {
                pthread_mutex_unlock(&iscsi_lock);
                ERR("target %s has sessions", iqn);
                return -EBUSY;
        }
        *pp = t->next;
        pthread_mutex_unlock(&iscsi_lock);
        for (uint32_t l = 0; l < SCSI_MAX_LUNS; l++)
                if (atomic_load(&t->scsi.luns[l]))
                        scsi_target_unmap_lun(&t->scsi, l);
        scsi_target_fini(&t->scsi);
        acl_free_all(t);
        free(t);
        LOG_INFO(ISCSI_MOD, "target %s deleted", iqn);
        return 0;
}

int iscsi_lun_map(const char *iqn, uint32_t lun, const char *ns_name, char *err, size_t errlen)
{
        if (lun >= SCSI_MAX_LUNS) {
                ERR("LUN %u out of range (0..%u)", lun, SCSI_MAX_LUNS - 1);
                return -EINVAL;
        }
        struct core_ns *ns = core_ns_find(ns_name);
        if (!ns) {
                ERR("no namespace %s", ns_name);
                return -ENOENT;
        }
        pthread_mutex_lock(&iscsi_lock);
        struct iscsi_tgt *t = tgt_find(iqn);
        int rc;
        if (!t) {
                ERR("no target %s", iqn);
                rc = -ENOENT;
        } else if (atomic_load(&t->scsi.luns[lun])) {
                ERR("LUN %u of %s is mapped", lun, iqn);
                rc = -EEXIST;
        } else {
                rc = scsi_target_map_lun(&t->scsi, lun, ns);
                if (rc)
                        ERR("mapping LUN %u failed: %s", lun, strerror(-rc));
        }
        pthread_mutex_unlock(&iscsi_lock);
        return rc;
}

int iscsi_lun_unmap(const char *iqn, uint32_t lun, char *err, size_t errlen)
{
        if (lun >= SCSI_MAX_LUNS) {
                ERR("LUN %u out of range", lun);
                return -EINVAL;
        }
        pthread_mutex_lock(&iscsi_lock);
        struct iscsi_tgt *t = tgt_find(iqn);
        int rc;
        if (!t) {
                ERR("no target %s", iqn);
                rc = -ENOENT;
        } else if (!atomic_load(&t->scsi.luns[lun])) {
                ERR("LUN %u of %s is not mapped", lun, iqn);
                rc = -ENOENT;
        } else {
                rc = scsi_target_unmap_lun(&t->scsi, lun);
                if (rc)
                        ERR("unmapping LUN %u failed: %s", lun, strerror(-rc));
        }
        pthread_mutex_unlock(&iscsi_lock);
        return rc;
}

int iscsi_ns_in_use(const struct core_ns *ns)
{
        int used = 0;
        pthread_mutex_lock(&iscsi_lock);
        for (struct iscsi_tgt *t = targets; t && !used; t = t->next)
                for (uint32_t l = 0; l < SCSI_MAX_LUNS; l++)
                        if (atomic_load(&t->scsi.luns[l]) == ns) {
                                used = 1;
                                break;
                        }
        pthread_mutex_unlock(&iscsi_lock);
        return used;
}

static struct iscsi_auth discovery_auth; /* under iscsi_lock */

static struct iscsi_acl *acl_find(const struct iscsi_tgt *t, const char *initiator)
{
        for (struct iscsi_acl *a = t->acl; a; a = a->next)
                if (!strcmp(a->initiator, initiator))
                        return a;
        return NULL;
}

void iscsi_auth_get(const struct iscsi_tgt *tgt, const char *initiator, struct iscsi_auth *out)
{
        pthread_mutex_lock(&iscsi_lock);
        const struct iscsi_acl *a = tgt ? acl_find(tgt, initiator) : NULL;
        *out = !tgt ? discovery_auth : a && a->auth.user[0] ? a->auth : tgt->auth;
        pthread_mutex_unlock(&iscsi_lock);
}

/* Checked credentials into *out (zeroed first); user "" or NULL: none.  0 or -EINVAL with err. */
static int auth_build(const char *user, const char *secret, const char *mutual_user,
                      const char *mutual_secret, struct iscsi_auth *out, char *err, size_t errlen)
{
        struct iscsi_auth a = {0};
        user = user ? user : "";
        if (user[0]) {
                if (strlen(user) >= ISCSI_SECRET_MAX) {
                        ERR("chap_user longer than %d bytes", ISCSI_SECRET_MAX - 1);
                        return -EINVAL;
                }
                if (!secret || strlen(secret) < 12 || strlen(secret) >= ISCSI_SECRET_MAX) {
                        ERR("chap_secret must be 12 to %d bytes (RFC 7143: at least 96 bits)",
                            ISCSI_SECRET_MAX - 1);
                        return -EINVAL;
                }
                snprintf(a.user, sizeof(a.user), "%s", user);
                snprintf(a.secret, sizeof(a.secret), "%s", secret);
                if (mutual_user && mutual_user[0]) {
                        if (strlen(mutual_user) >= ISCSI_SECRET_MAX || !mutual_secret ||
                            strlen(mutual_secret) < 12 ||
                            strlen(mutual_secret) >= ISCSI_SECRET_MAX) {
                                ERR("mutual_user needs a mutual_secret of 12 to %d bytes",
                                    ISCSI_SECRET_MAX - 1);
                                return -EINVAL;
                        }
                        if (strcmp(mutual_secret, secret) == 0) {
                                ERR("mutual_secret must differ from chap_secret (RFC 7143 "
                                    "12.1.3)");
                                return -EINVAL;
                        }
                        snprintf(a.mutual_user, sizeof(a.mutual_user), "%s", mutual_user);
                        snprintf(a.mutual_secret, sizeof(a.mutual_secret), "%s", mutual_secret);
                } else if (mutual_secret && mutual_secret[0]) {
                        ERR("mutual_secret without mutual_user");
                        return -EINVAL;
                }
        } else if ((secret && secret[0]) || (mutual_user && mutual_user[0])) {
                ERR("chap_secret / mutual_user without chap_user");
                return -EINVAL;
        }
        *out = a;
        return 0;
}

int iscsi_auth_set(const char *target, const char *user, const char *secret,
                   const char *mutual_user, const char *mutual_secret, char *err, size_t errlen)
{
        struct iscsi_auth a;
        int rc = auth_build(user, secret, mutual_user, mutual_secret, &a, err, errlen);
        if (rc)
                return rc;
        pthread_mutex_lock(&iscsi_lock);
        struct iscsi_auth *dst = &discovery_auth;
        if (target) {
                struct iscsi_tgt *t = tgt_find(target);
                if (!t) {
                        pthread_mutex_unlock(&iscsi_lock);
                        ERR("no target %s", target);
                        return -ENOENT;
                }
                dst = &t->auth;
        }
        *dst = a;
        pthread_mutex_unlock(&iscsi_lock);
        LOG_INFO(ISCSI_MOD, "%s%s: CHAP %s", target ? "target " : "discovery sessions",
                 target ? target : "",
                 !a.user[0]         ? "off"
                 : a.mutual_user[0] ? "required, mutual offered"
                                    : "required");
        return 0;
}

static json_t *auth_entry(const char *target, const struct iscsi_auth *a, bool with_secrets)
{
        json_t *o = json_object();
        if (target)
                json_object_set_new(o, "target", json_string(target));
        json_object_set_new(o, "chap_user", json_string(a->user));
        if (with_secrets)
                json_object_set_new(o, "chap_secret", json_string(a->secret));
        if (a->mutual_user[0]) {
                json_object_set_new(o, "mutual_user", json_string(a->mutual_user));
                if (with_secrets)
                        json_object_set_new(o, "mutual_secret", json_string(a->mutual_secret));
        }
        return o;
}

json_t *iscsi_auth_json(bool with_secrets)
{
        json_t *arr = json_array();
        pthread_mutex_lock(&iscsi_lock);
        if (discovery_auth.user[0])
                json_array_append_new(arr, auth_entry(NULL, &discovery_auth, with_secrets));
        for (struct iscsi_tgt *t = targets; t; t = t->next)
                if (t->auth.user[0])
                        json_array_append_new(arr, auth_entry(t->name, &t->auth, with_secrets));
        pthread_mutex_unlock(&iscsi_lock);
        return arr;
}

/* ---- initiator ACLs and LUN masking ---- */

bool iscsi_acl_admits_locked(const struct iscsi_tgt *tgt, const char *initiator)
{
        return !tgt->acl || acl_find(tgt, initiator);
}

bool iscsi_acl_admits(const struct iscsi_tgt *tgt, const char *initiator)
{
        pthread_mutex_lock(&iscsi_lock);
        bool ok = iscsi_acl_admits_locked(tgt, initiator);
        pthread_mutex_unlock(&iscsi_lock);
        return ok;
}

void iscsi_acl_apply(const struct iscsi_tgt *tgt, const char *initiator, struct scsi_nexus *nx)
{
        static const uint64_t none[SCSI_LUN_WORDS];
        pthread_mutex_lock(&iscsi_lock);
        const struct iscsi_acl *a = acl_find(tgt, initiator);
        /* Admitted at login, but an ACL change since may have removed it: then no LUN at all. */
        const uint64_t *mask = !iscsi_acl_admits_locked(tgt, initiator) ? none
                               : a && a->masked                         ? a->luns
                                                                        : NULL;
        scsi_nexus_set_luns(nx, mask, false);
        pthread_mutex_unlock(&iscsi_lock);
}

/* "0,2,4-7" into a LUN bitmap.  0 or -EINVAL with err. */
static int luns_parse(const char *s, uint64_t mask[SCSI_LUN_WORDS], char *err, size_t errlen)
{
        memset(mask, 0, SCSI_LUN_WORDS * sizeof(mask[0]));
        const char *p = s;
        for (;;) {
                char *end;
                if (*p < '0' || *p > '9')
                        goto bad;
                unsigned long lo = strtoul(p, &end, 10), hi = lo;
                if (*end == '-') {
                        p = end + 1;
                        if (*p < '0' || *p > '9')
                                goto bad;
                        hi = strtoul(p, &end, 10);
                }
                if (lo > hi || hi >= SCSI_MAX_LUNS)
                        goto bad;
                for (unsigned long l = lo; l <= hi; l++)
                        mask[l / 64] |= 1ull << (l % 64);
                if (*end == 0)
                        return 0;
                if (*end != ',')
                        goto bad;
                p = end + 1;
        }
bad:
        ERR("luns must be LUNs 0..%u and ranges, comma-separated (\"0,2,4-7\")", SCSI_MAX_LUNS - 1);
        return -EINVAL;
}

/* The list form of a bitmap ("0,2,4-7"). */
static void luns_format(const uint64_t mask[SCSI_LUN_WORDS], char *out, size_t len)
{
        size_t o = 0;
        out[0] = 0;
        for (unsigned l = 0; l < SCSI_MAX_LUNS; l++) {
                if (!((mask[l / 64] >> (l % 64)) & 1))
                        continue;
                unsigned h = l;
                while (h + 1 < SCSI_MAX_LUNS && ((mask[(h + 1) / 64] >> ((h + 1) % 64)) & 1))
                        h++;
                int n = h == l ? snprintf(out + o, len - o, "%s%u", o ? "," : "", l)
                               : snprintf(out + o, len - o, "%s%u-%u", o ? "," : "", l, h);
                if (n < 0 || (size_t)n >= len - o)
                        break;
                o += (size_t)n;
                l = h;
        }
}

/*
 * The initiator's sessions on t see what its entry allows now; when t no
 * longer admits it, nothing from here on (the close below is a message to
 * the session's reactor: no command in between reaches a LUN).
 */
static void acl_push(struct iscsi_tgt *t, const char *initiator)
{
        static const uint64_t none[SCSI_LUN_WORDS];
        const struct iscsi_acl *a = acl_find(t, initiator);
        const uint64_t *mask = !iscsi_acl_admits_locked(t, initiator) ? none
                               : a && a->masked                       ? a->luns
                                                                      : NULL;
        scsi_target_set_luns(&t->scsi, initiator, mask);
        iscsi_session_close_unadmitted(t);
}

int iscsi_acl_add(const char *target, const char *initiator, const char *luns,
                  const char *chap_user, const char *chap_secret, const char *mutual_user,
                  const char *mutual_secret, char *err, size_t errlen)
{
        if (!target || !initiator || !iqn_valid(initiator)) {
                ERR("invalid initiator name '%s'", initiator ? initiator : "");
                return -EINVAL;
        }
        struct iscsi_acl n = {0};
        snprintf(n.initiator, sizeof(n.initiator), "%s", initiator);
        if (luns) {
                if (luns_parse(luns, n.luns, err, errlen))
                        return -EINVAL;
                n.masked = true;
        }
        if (auth_build(chap_user, chap_secret, mutual_user, mutual_secret, &n.auth, err, errlen))
                return -EINVAL;
        struct iscsi_acl *fresh = malloc(sizeof(*fresh));
        if (!fresh) {
                ERR("out of memory");
                return -ENOMEM;
        }
        pthread_mutex_lock(&iscsi_lock);
        struct iscsi_tgt *t = tgt_find(target);
        if (!t) {
                pthread_mutex_unlock(&iscsi_lock);
                free(fresh);
                ERR("no target %s", target);
                return -ENOENT;
        }
        struct iscsi_acl *a = acl_find(t, initiator);
        if (a) {
                n.next = a->next;
                *a = n;
                free(fresh);
        } else {
                /* Appended, so iscsi_acl_json (config_save) keeps the order they were added in. */
                struct iscsi_acl **pp = &t->acl;
                while (*pp)
                        pp = &(*pp)->next;
                *fresh = n;
                *pp = fresh;
        }
        /* The first entry closes the target to everyone else. */
        for (struct iscsi_acl *e = t->acl; e; e = e->next)
                acl_push(t, e->initiator);
        pthread_mutex_unlock(&iscsi_lock);
        bool own_chap = n.auth.user[0] != 0;
        explicit_bzero(&n, sizeof(n));
        LOG_INFO(ISCSI_MOD, "target %s: initiator %s admitted, LUNs %s, CHAP %s", target, initiator,
                 luns ? luns : "all", own_chap ? "its own" : "the target's");
        return 0;
}

int iscsi_acl_remove(const char *target, const char *initiator, char *err, size_t errlen)
{
        pthread_mutex_lock(&iscsi_lock);
        struct iscsi_tgt *t = tgt_find(target);
        if (!t) {
                pthread_mutex_unlock(&iscsi_lock);
                ERR("no target %s", target);
                return -ENOENT;
        }
        struct iscsi_acl **pp = &t->acl;
        while (*pp && strcmp((*pp)->initiator, initiator))
                pp = &(*pp)->next;
        struct iscsi_acl *a = *pp;
        if (!a) {
                pthread_mutex_unlock(&iscsi_lock);
                ERR("target %s has no ACL entry for %s", target, initiator);
                return -ENOENT;
        }
        *pp = a->next;
        /* Its sessions close (or, with the last entry gone, see every LUN again). */
        acl_push(t, initiator);
        pthread_mutex_unlock(&iscsi_lock);
        explicit_bzero(a, sizeof(*a));
        free(a);
        LOG_INFO(ISCSI_MOD, "target %s: ACL entry of %s removed%s", target, initiator,
                 t->acl ? "" : " (the target is open to every initiator again)");
        return 0;
}

json_t *iscsi_acl_json(const char *target, bool with_secrets)
{
        json_t *arr = json_array();
        pthread_mutex_lock(&iscsi_lock);
        for (struct iscsi_tgt *t = targets; t; t = t->next) {
                if (target && strcmp(t->name, target))
                        continue;
                for (struct iscsi_acl *a = t->acl; a; a = a->next) {
                        json_t *o =
                            json_pack("{s:s, s:s}", "target", t->name, "initiator", a->initiator);
                        if (!o)
                                continue;
                        if (a->masked) {
                                char l[4 * SCSI_MAX_LUNS];
                                luns_format(a->luns, l, sizeof(l));
                                json_object_set_new(o, "luns", json_string(l));
                        }
                        if (a->auth.user[0]) {
                                json_t *c = auth_entry(NULL, &a->auth, with_secrets);
                                json_object_update(o, c);
                                json_decref(c);
                        }
                        json_array_append_new(arr, o);
                }
        }
        pthread_mutex_unlock(&iscsi_lock);
        return arr;
}

json_t *iscsi_targets_json(void)
{
        json_t *arr = json_array();
        pthread_mutex_lock(&iscsi_lock);
        for (struct iscsi_tgt *t = targets; t; t = t->next) {
                json_t *luns = json_array();
                for (uint32_t l = 0; l < SCSI_MAX_LUNS; l++) {
                        struct core_ns *ns = atomic_load(&t->scsi.luns[l]);
                        if (ns)
                                json_array_append_new(luns,
                                                      json_pack("{s:i, s:s}", "lun", (json_int_t)l,
                                                                "namespace", ns->name));
                }
                json_array_append_new(
                    arr, json_pack("{s:s, s:o, s:i, s:s}", "name", t->name, "luns", luns,
                                   "sessions", (json_int_t)atomic_load(&t->nr_sessions), "chap",
                                   !t->auth.user[0]         ? "none"
                                   : t->auth.mutual_user[0] ? "mutual"
                                                            : "one-way"));
        }
        pthread_mutex_unlock(&iscsi_lock);
        return arr;
}

/* ---- SendTargets ---- */

/* This connection's local address, as a TargetAddress host (IPv6 in brackets). */
static void addr_str(const struct sockaddr_storage *ss, char *out, size_t len)
{
        char a[64];
        uint16_t port;
        rt_sockaddr_host(ss, a, sizeof(a), &port);
        if (ss->ss_family == AF_INET6)
                snprintf(out, len, "[%s]", a);
        else
                snprintf(out, len, "%s", a);
}

static bool wildcard(const char *addr)
{
        return !strcmp(addr, "0.0.0.0") || !strcmp(addr, "::") || !strcmp(addr, "[::]");
}

static int add_target_records(struct iscsi_textbuf *tb, const struct iscsi_tgt *t,
                              const struct sockaddr_storage *local)
{
        int rc = iscsi_text_add(tb, "TargetName", t->name);
        for (struct iscsi_portal *p = portals; p && !rc; p = p->next) {
                char host[80], val[128];
                if (wildcard(p->addr))
                        addr_str(local, host, sizeof(host));
                else if (strchr(p->addr, ':'))
                        snprintf(host, sizeof(host), "[%s]", p->addr);
                else
                        snprintf(host, sizeof(host), "%s", p->addr);
                snprintf(val, sizeof(val), "%s:%u,%u", host, p->port, ISCSI_DEFAULT_TPGT);
                rc = iscsi_text_add(tb, "TargetAddress", val);
        }
        return rc;
}

int iscsi_send_targets(struct iscsi_textbuf *tb, const char *what, const char *cur_target,
                       const char *initiator, const struct sockaddr_storage *local, bool discovery)
{
        int rc = 0;
        pthread_mutex_lock(&iscsi_lock);
        if (!strcmp(what, "All")) {
                if (discovery) {
                        /* Only the targets this initiator may log in to (their ACLs). */
                        for (struct iscsi_tgt *t = targets; t && !rc; t = t->next)
                                if (iscsi_acl_admits_locked(t, initiator))
                                        rc = add_target_records(tb, t, local);
                } else {
                        /* A normal session reports only its own target (RFC 7143 12.2 allows this).
                         */
                        struct iscsi_tgt *t = tgt_find(cur_target);
                        if (t && iscsi_acl_admits_locked(t, initiator))
                                rc = add_target_records(tb, t, local);
                }
        } else {
                /* A named target: answered only to an initiator it admits (no probing by name). */
                const char *name = *what ? what : cur_target;
                struct iscsi_tgt *t = tgt_find(name);
                if (t && iscsi_acl_admits_locked(t, initiator))
                        rc = add_target_records(tb, t, local);
        }
        pthread_mutex_unlock(&iscsi_lock);
        return rc;
}

/* ---- portals ---- */

/* A connection accepted on a portal, on the reactor it was handed to. */
static void portal_accept(int fd)
{
        struct rt_conn_slot slot;
        char why[128];
        if (rt_conn_admit(fd, &slot, why, sizeof(why)) < 0) {
                static struct rt_log_ratelimit rl =
                    RT_LOG_RATELIMIT_INIT("iSCSI connections refused");
                if (rt_log_ratelimit(&rl, ISCSI_MOD)) {
                        char peer[RT_ADDR_NAME_MAX];
                        rt_sock_peer_name(fd, peer, sizeof(peer));
                        LOG_WARN(ISCSI_MOD, "%s: connection refused: %s", peer, why);
                }
                close(fd);
                return;
        }
        struct iscsi_conn *c = iscsi_conn_new(fd);
        if (!c) {
                LOG_WARN(ISCSI_MOD, "out of memory for a new connection");
                rt_conn_release(&slot);
                close(fd);
                return;
        }
        c->admit = slot;
        iscsi_conn_start(c);
}

/*
 * Port 0 asks the kernel for a free port: the portal is then listed, logged,
 * advertised in SendTargets and deleted under the port it got.
 */
int iscsi_portal_add(const char *addr, uint16_t port, char *err, size_t errlen)
{
        if (!addr || strlen(addr) >= sizeof(((struct iscsi_portal *)0)->addr)) {
                ERR("invalid address '%s'", addr ? addr : "");
                return -EINVAL;
        }
        pthread_mutex_lock(&iscsi_lock);
        for (struct iscsi_portal *p = portals; p && port; p = p->next)
                if (!strcmp(p->addr, addr) && p->port == port) {
                        pthread_mutex_unlock(&iscsi_lock);
                        ERR("portal %s:%u exists", addr, port);
                        return -EEXIST;
                }
        pthread_mutex_unlock(&iscsi_lock);

        struct iscsi_portal *p = calloc(1, sizeof(*p));
        if (!p) {
                ERR("out of memory");
                return -ENOMEM;
        }
        int rc = rt_listener_open(addr, port, ISCSI_MOD, portal_accept, &p->lis, err, errlen);
        if (rc < 0) {
                free(p);
                return rc;
        }
        snprintf(p->addr, sizeof(p->addr), "%s", addr);
        p->port = rt_listener_port(p->lis);
        pthread_mutex_lock(&iscsi_lock);
        p->next = portals;
        portals = p;
        pthread_mutex_unlock(&iscsi_lock);
        LOG_INFO(ISCSI_MOD, "portal listening on %s:%u", addr, p->port);
        return 0;
}

int iscsi_portal_del(const char *addr, uint16_t port, char *err, size_t errlen)
{
        pthread_mutex_lock(&iscsi_lock);
        struct iscsi_portal **pp = &portals;
        while (*pp && !(addr && !strcmp((*pp)->addr, addr) && (*pp)->port == port))
                pp = &(*pp)->next;
        struct iscsi_portal *p = *pp;
        if (p)
                *pp = p->next;
        pthread_mutex_unlock(&iscsi_lock);
        if (!p) {
                ERR("no portal %s:%u", addr ? addr : "", port);
                return -ENOENT;
        }
        rt_listener_close(p->lis);
        LOG_INFO(ISCSI_MOD, "portal %s:%u removed", p->addr, p->port);
        free(p);
        return 0;
}

json_t *iscsi_portals_json(void)
{
        json_t *arr = json_array();
        pthread_mutex_lock(&iscsi_lock);
        for (struct iscsi_portal *p = portals; p; p = p->next)
                json_array_append_new(
                    arr, json_pack("{s:s, s:i}", "addr", p->addr, "port", (json_int_t)p->port));
        pthread_mutex_unlock(&iscsi_lock);
        return arr;
}
