/*
 * RBD backend (issue 14): a namespace on a Ceph RBD image, through librbd's
 * asynchronous C API.
 *
 * Every backend op is one rbd_aio_* call whose completion callback runs on
 * one of librbd's threads; it stores the result in the request and hands
 * the request back to its reactor with rt_defer_remote() (the request's own
 * struct rt_defer: nothing of ours is allocated per I/O, and the reactor is
 * woken through its ring, never blocked).  librbd itself allocates its
 * completion object per call (rbd_aio_create_completion); its C API has no
 * way to reuse one.
 *
 * READ / WRITE are rbd_aio_readv / rbd_aio_writev (one call per request,
 * never split or merged here: an atomic write inside one object is one OSD
 * op, rbd_atomic_unit); FLUSH is rbd_aio_flush
 * (what the librbd cache holds reaches the OSDs); a FUA write is the write,
 * then a flush, and completes after both.  WRITE_ZEROES is
 * rbd_aio_write_zeroes, which librbd turns into discards of the whole
 * objects and granules in the range (space returned: thin provisioning)
 * and zero writes at the unaligned edges, so the range always reads
 * zeroes.
 *
 * The identity of the namespace (UUID and block size) is kept in the
 * image's metadata (rbd_metadata_set/get, key "slate.identity"), so every
 * gateway that exports the image reports the same UUID, NAA and EUI-64.
 * The core keeps other records there too (ops->meta_load/meta_store, key
 * "slate.<record>": "slate.crypt", the wrapped data key of an encrypted
 * namespace), and a store tells the other gateways through the reservation
 * state object's watch (below).
 * The image's size is the namespace's: a gateway reopening it takes the
 * image's current size, and resize is rbd_resize.
 *
 * Connection parameters: ceph_conf (default: librados' search: $CEPH_CONF,
 * /etc/ceph/ceph.conf...), client_id (default "admin"), keyring (a path;
 * its contents are never logged), pool, rbd_namespace (optional), image.
 * The image must exist (rbd create); a size larger than the image grows it.
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rados/librados.h>
#include <rbd/librbd.h>
#include <uuid/uuid.h>

#include "backend/backend.h"
#include "rt/log.h"

#define IDENTITY_KEY "slate.identity"

struct rbd_be {
        rados_t cluster;
        rados_ioctx_t io;
        rbd_image_t image;
        bool watching;
        uint64_t watch_handle;
        /*
         * This gateway is resizing the image: librbd's resize waits for every
         * watcher, this one included, to take the header notification, so
         * its callback must not wait for the resize's lock meanwhile.
         */
        atomic_bool resizing;
        /* Reservation state shared by the gateways (rbd_pr_*, below). */
        char pr_oid[128];
        bool pr_watching;
        uint64_t pr_watch;
        uint64_t instance_id;        /* ours, to skip our own notifies */
        atomic_bool pr_watch_broken; /* rbd_pr_rewatch on the next load or store */
        struct backend *be;
        char desc[512]; /* pool[/namespace]/image, for log lines */
};

static void rbd_pr_close(struct rbd_be *r);

static void rbd_be_free(struct rbd_be *r)
{
        rbd_pr_close(r);
        if (r->watching)
                rbd_update_unwatch(r->image, r->watch_handle);
        if (r->image)
                rbd_close(r->image);
        if (r->io)
                rados_ioctx_destroy(r->io);
        if (r->cluster)
                rados_shutdown(r->cluster);
        free(r);
}

/*
 * The image's header changed (a resize by another gateway or by `rbd
 * resize`, a snapshot, metadata): tell the owner when the size moved.
 * Runs on a librbd thread.
 */
static void rbd_header_changed(void *arg)
{
        struct rbd_be *r = arg;
        uint64_t size;
        if (atomic_load(&r->resizing) || rbd_get_size(r->image, &size) < 0 ||
            size == r->be->size_bytes)
                return;
        LOG_INFO("rbd", "%s: image size changed outside this gateway: %llu -> %llu bytes", r->desc,
                 (unsigned long long)r->be->size_bytes, (unsigned long long)size);
        if (r->be->size_changed)
                r->be->size_changed(r->be, size);
}

static int rbd_pr_open(struct rbd_be *r);

/* The image's effective value of librbd option name (config, pool or image level), or "". */
static void rbd_conf_get(const rbd_config_option_t *opt, int n, const char *name, char *out,
                         size_t outlen)
{
        out[0] = 0;
        for (int i = 0; i < n; i++)
                if (opt[i].name && !strcmp(opt[i].name, name) && opt[i].value) {
                        snprintf(out, outlen, "%s", opt[i].value);
                        return;
                }
}

/*
 * Atomic writes without a journal (core/atomic.c CORE_ATOMIC_OBJECT): the
 * bytes inside which one write is all or nothing, or 0 (logged why).
 * librbd maps an image extent to object extents (Striper) and sends one
 * write op per object (io::ObjectWriteRequest; a copy-up from a parent
 * goes in the same op), which the OSD applies as one transaction: so a
 * write that stays inside one stripe unit (inside one object; the object
 * itself when the image is not striped) is atomic, across a crash of this
 * gateway too, and readers through any gateway see all or none of it.
 * What would break that, checked on the image's effective configuration:
 *  - the ObjectCacher (rbd_cache with rbd_cache_policy writeback or
 *    writethrough) keeps writes as buffer heads that later writes split
 *    and merge, and flushes them one by one: half of one write could reach
 *    the OSD.  The default policy, writearound, hands each object write to
 *    the OSD unchanged (it only acknowledges early and holds back overlapping
 *    I/O), so it is kept;
 *  - the persistent write-log cache (rbd_plugins pwl_cache) keeps writes on
 *    this machine's disk: another gateway could not replay them;
 *  - the journaling feature cuts a write into journal events of at most
 *    rbd_journal_max_payload_bytes, replayed one by one after a crash.
 */
static uint32_t rbd_atomic_unit(struct rbd_be *r)
{
        rbd_image_info_t info;
        uint64_t su = 0, feat = 0;
        const char *why = NULL;
        /* Any stripe count: one stripe unit always lies in one object. */
        if (rbd_stat(r->image, &info, sizeof(info)) < 0 || rbd_get_stripe_unit(r->image, &su) < 0 ||
            rbd_get_features(r->image, &feat) < 0)
                why = "cannot read the image's layout";
        else if (!su || su > info.obj_size || info.obj_size % su || (su & (su - 1)) ||
                 su > UINT32_MAX)
                why = "unexpected stripe unit";
        else if (feat & RBD_FEATURE_JOURNALING)
                why = "the journaling feature splits a write into journal events";
        if (!why) {
                int n = 0;
                rbd_config_option_t *opt = NULL;
                int rc = rbd_config_image_list(r->image, NULL, &n);
                if (rc == -ERANGE && n > 0 && (opt = calloc((size_t)n, sizeof(*opt))))
                        rc = rbd_config_image_list(r->image, opt, &n);
                char cache[16], policy[32], plugins[256], pwl[32];
                if (rc < 0 || !opt) {
                        why = "cannot read the image's librbd configuration";
                } else {
                        rbd_conf_get(opt, n, "rbd_cache", cache, sizeof(cache));
                        rbd_conf_get(opt, n, "rbd_cache_policy", policy, sizeof(policy));
                        rbd_conf_get(opt, n, "rbd_plugins", plugins, sizeof(plugins));
                        rbd_conf_get(opt, n, "rbd_persistent_cache_mode", pwl, sizeof(pwl));
                        if (strcmp(cache, "false") && strcmp(policy, "writearound"))
                                why = "rbd_cache_policy writeback/writethrough (the ObjectCacher "
                                      "may flush part of a write); use writearound or "
                                      "rbd_cache=false";
                        else if (strstr(plugins, "pwl_cache") && strcmp(pwl, "disabled"))
                                why = "the persistent write-log cache keeps writes on this "
                                      "machine";
                        rbd_config_image_list_cleanup(opt, n);
                }
                free(opt);
        }
        if (why) {
                LOG_INFO("rbd", "%s: no atomic writes: %s", r->desc, why);
                return 0;
        }
        return (uint32_t)su;
}

static int rbd_be_open(struct backend *be, const struct backend_params *p)
{
        if (!p->pool || !p->pool[0] || !p->image || !p->image[0])
                return -EINVAL;
        struct rbd_be *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->be = be;
        snprintf(r->desc, sizeof(r->desc), "%s/%s%s%s", p->pool,
                 p->rbd_namespace && p->rbd_namespace[0] ? p->rbd_namespace : "",
                 p->rbd_namespace && p->rbd_namespace[0] ? "/" : "", p->image);
        const char *step = "rados_create";
        int rc = rados_create(&r->cluster, p->client_id && p->client_id[0] ? p->client_id : NULL);
        if (rc < 0) {
                r->cluster = NULL;
                goto fail;
        }
        step = "reading the ceph configuration";
        rc =
            rados_conf_read_file(r->cluster, p->ceph_conf && p->ceph_conf[0] ? p->ceph_conf : NULL);
        if (rc < 0)
                goto fail;
        if (!(p->ceph_conf && p->ceph_conf[0]))
                rados_conf_parse_env(r->cluster, NULL); /* $CEPH_ARGS */
        step = "keyring";
        if (p->keyring && p->keyring[0] && (rc = rados_conf_set(r->cluster, "keyring", p->keyring)))
                goto fail;
        /* An unreachable cluster fails namespace_create in 30 s, not librados' 5 min. */
        rados_conf_set(r->cluster, "client_mount_timeout", "30");
        step = "connecting to the cluster";
        rc = rados_connect(r->cluster);
        if (rc < 0)
                goto fail;
        step = "opening the pool";
        rc = rados_ioctx_create(r->cluster, p->pool, &r->io);
        if (rc < 0) {
                r->io = NULL;
                goto fail;
        }
        if (p->rbd_namespace && p->rbd_namespace[0])
                rados_ioctx_set_namespace(r->io, p->rbd_namespace);
        step = "opening the image";
        rc = rbd_open(r->io, p->image, &r->image, NULL);
        if (rc < 0) {
                r->image = NULL;
                goto fail;
        }
        uint64_t size = 0;
        step = "reading the image size";
        if ((rc = rbd_get_size(r->image, &size)) < 0)
                goto fail;
        if (p->size_bytes > size) {
                step = "growing the image";
                if ((rc = rbd_resize(r->image, p->size_bytes)) < 0)
                        goto fail;
                LOG_INFO("rbd", "%s: grown from %llu to %llu bytes", r->desc,
                         (unsigned long long)size, (unsigned long long)p->size_bytes);
                size = p->size_bytes;
        }
        if (rbd_update_watch(r->image, &r->watch_handle, rbd_header_changed, r) == 0)
                r->watching = true;
        step = "the reservation state object";
        if ((rc = rbd_pr_open(r)) < 0)
                goto fail;
        be->priv = r;
        be->size_bytes = size;
        be->size_shared = true;
        be->pr_shared = true;
        be->volatile_cache = true; /* the librbd cache, when enabled, holds writes until a flush */
        /* librbd discards whole objects or discard granules (64 KiB by default). */
        be->alloc_unit = 65536;
        be->can_anchor = false;
        be->atomic_unit = rbd_atomic_unit(r);
        LOG_INFO("rbd", "%s: open, %llu bytes", r->desc, (unsigned long long)size);
        return 0;
fail:
        LOG_ERR("rbd", "%s: %s: %s", r->desc, step, strerror(-rc));
        rbd_be_free(r);
        return rc < 0 ? rc : -EIO;
}

static void rbd_be_close(struct backend *be)
{
        struct rbd_be *r = be->priv;
        if (!r)
                return;
        rbd_be_free(r);
        be->priv = NULL;
}

static int rbd_start(struct rbd_be *r, struct core_req *req);

/* On the reactor: the librbd result, and the flush after a FUA write. */
static void rbd_fire(struct rt_defer *d)
{
        struct core_req *req = (struct core_req *)((char *)d - offsetof(struct core_req, defer));
        struct rbd_be *r = req->bio.be->priv;
        int res = req->be_res;
        if (res >= 0 && req->bio.op == CORE_OP_WRITE && req->bio.fua) {
                /* The write is done; its flush makes it durable, then it completes. */
                req->bio.op = CORE_OP_FLUSH;
                int rc = rbd_start(r, req);
                if (rc == 0)
                        return;
                res = rc;
        } else if (res >= 0 && (req->bio.op == CORE_OP_WRITE ||
                                (req->bio.op == CORE_OP_FLUSH && req->bio.fua))) {
                res = (int)req->bio.len; /* librbd reports 0 for a whole write */
        } else if (res >= 0 && req->bio.op == CORE_OP_READ && (uint64_t)res != req->bio.len) {
                LOG_WARN("rbd", "%s: short read at %llu: %d of %llu bytes", r->desc,
                         (unsigned long long)req->bio.off, res, (unsigned long long)req->bio.len);
                res = -EIO;
        }
        if (res < 0)
                LOG_DEBUG("rbd", "%s: op %d at %llu: %s", r->desc, (int)req->bio.op,
                          (unsigned long long)req->bio.off, strerror(-res));
        core_backend_done(req, res);
}

/* On a librbd thread: park the result and send the request home. */
static void rbd_complete(rbd_completion_t c, void *arg)
{
        struct core_req *req = arg;
        ssize_t rv = rbd_aio_get_return_value(c);
        rbd_aio_release(c);
        req->be_res = rv < 0 ? (rv < INT_MIN ? -EIO : (int)rv) : (rv > INT_MAX ? INT_MAX : (int)rv);
        req->defer.fn = rbd_fire;
        rt_defer_remote(req->reactor, &req->defer);
}

/* Issue req->bio's op; 0, or -errno when librbd refused it (no callback will come). */
static int rbd_start(struct rbd_be *r, struct core_req *req)
{
        rbd_completion_t c;
        int rc = rbd_aio_create_completion(req, rbd_complete, &c);
        if (rc < 0)
                return rc;
        switch (req->bio.op) {
        case CORE_OP_READ:
                rc = rbd_aio_readv(r->image, req->bio.iov, req->bio.iovcnt, req->bio.off, c);
                break;
        case CORE_OP_WRITE:
                rc = rbd_aio_writev(r->image, req->bio.iov, req->bio.iovcnt, req->bio.off, c);
                break;
        case CORE_OP_FLUSH:
                rc = rbd_aio_flush(r->image, c);
                break;
        case CORE_OP_WRITE_ZEROES:
                rc = rbd_aio_write_zeroes(r->image, req->bio.off, req->bio.len, c, 0, 0);
                break;
        default:
                rc = -EOPNOTSUPP;
                break;
        }
        if (rc < 0)
                rbd_aio_release(c);
        return rc;
}

static void rbd_fail_deferred(struct rt_defer *d)
{
        struct core_req *req = (struct core_req *)((char *)d - offsetof(struct core_req, defer));
        core_backend_done(req, req->be_res);
}

static void rbd_be_submit(struct backend *be, struct core_req *req, enum core_op op, uint64_t off,
                          uint64_t len, const struct iovec *iov, int iovcnt, bool fua)
{
        struct rbd_be *r = be->priv;
        backend_bio_set(req, be, op, off, len, iov, iovcnt, fua && op == CORE_OP_WRITE);
        int rc = rbd_start(r, req);
        if (rc < 0) {
                /* Never complete from inside submit: through the reactor's defer queue. */
                LOG_DEBUG("rbd", "%s: op %d refused by librbd: %s", r->desc, (int)op,
                          strerror(-rc));
                req->be_res = rc;
                req->defer.fn = rbd_fail_deferred;
                rt_defer(req->reactor, &req->defer);
        }
}

static int rbd_be_resize(struct backend *be, uint64_t size_bytes)
{
        struct rbd_be *r = be->priv;
        if (size_bytes == 0)
                return -EINVAL;
        uint64_t cur = 0;
        int rc = rbd_get_size(r->image, &cur);
        if (rc < 0)
                return rc;
        /* Already there: another gateway (or `rbd resize`) did it, we only follow. */
        if (cur != size_bytes) {
                atomic_store(&r->resizing, true);
                rc = rbd_resize(r->image, size_bytes);
                atomic_store(&r->resizing, false);
        }
        if (rc < 0) {
                LOG_ERR("rbd", "%s: resize to %llu bytes: %s", r->desc,
                        (unsigned long long)size_bytes, strerror(-rc));
                return rc;
        }
        be->size_bytes = size_bytes;
        LOG_INFO("rbd", "%s: resized to %llu bytes", r->desc, (unsigned long long)size_bytes);
        return 0;
}

/* Provisioning: the extents rbd_diff_iterate2 reports as holding data, from off. */
struct rbd_map_walk {
        uint64_t off;      /* asked from here */
        uint64_t data_end; /* data at off: end of the contiguous data so far */
        uint64_t hole_end; /* no data at off: where the first data starts */
        bool data, seen;
};

static int rbd_map_cb(uint64_t o, size_t l, int exists, void *arg)
{
        struct rbd_map_walk *w = arg;
        if (!exists)
                return 0;
        if (!w->seen) {
                w->seen = true;
                if (o <= w->off) {
                        w->data = true;
                        w->data_end = o + l;
                        return 0;
                }
                w->hole_end = o;
                return -ECANCELED; /* the run of holes ends here: enough */
        }
        if (w->data && o <= w->data_end) {
                if (o + l > w->data_end)
                        w->data_end = o + l;
                return 0;
        }
        return -ECANCELED;
}

/*
 * Blocks librbd has no data for (never written, discarded) read zeroes and
 * hold no space: deallocated.  One rbd_diff_iterate2 per call, over at most
 * 64 MiB (a cluster round trip per object it covers; the caller asks again
 * for the rest): GET LBA STATUS and sanitize pay it, not reads and writes.
 */
static int rbd_be_map_status(struct backend *be, uint64_t off, uint64_t len, enum core_prov *st,
                             uint64_t *run)
{
        struct rbd_be *r = be->priv;
        if (len > 64ull << 20)
                len = 64ull << 20;
        struct rbd_map_walk w = {.off = off};
        int rc = rbd_diff_iterate2(r->image, NULL, off, len, 1, 0, rbd_map_cb, &w);
        if (rc < 0 && rc != -ECANCELED) {
                *st = CORE_PROV_MAPPED; /* cannot tell: mapped */
                *run = len;
                return 0;
        }
        if (w.data) {
                *st = CORE_PROV_MAPPED;
                *run = (w.data_end < off + len ? w.data_end : off + len) - off;
        } else {
                *st = CORE_PROV_DEALLOCATED;
                *run = w.seen ? w.hole_end - off : len;
        }
        return 0;
}

/* "uuid block_size", e.g. "6f1c...-... 512". */
static int rbd_be_identity_load(struct backend *be, struct backend_identity *id)
{
        struct rbd_be *r = be->priv;
        char val[128];
        size_t len = sizeof(val);
        int rc = rbd_metadata_get(r->image, IDENTITY_KEY, val, &len);
        if (rc < 0)
                return rc; /* -ENOENT: none stored yet */
        val[sizeof(val) - 1] = 0;
        char u[37];
        unsigned bs = 0;
        if (sscanf(val, "%36s %u", u, &bs) != 2 || uuid_parse(u, id->uuid) ||
            (bs != 512 && bs != 4096)) {
                LOG_ERR("rbd", "%s: image metadata %s is malformed", r->desc, IDENTITY_KEY);
                return -EINVAL;
        }
        id->block_size = bs;
        return 0;
}

static int rbd_be_identity_store(struct backend *be, const struct backend_identity *id)
{
        struct rbd_be *r = be->priv;
        char u[37], val[64];
        uuid_unparse_lower(id->uuid, u);
        snprintf(val, sizeof(val), "%s %u", u, id->block_size);
        int rc = rbd_metadata_set(r->image, IDENTITY_KEY, val);
        if (rc < 0)
                LOG_ERR("rbd", "%s: storing the identity in the image metadata: %s", r->desc,
                        strerror(-rc));
        return rc;
}

/*
 * ---- Reservation state shared by the gateways (issue 14) ----
 *
 * One RADOS object per image, "slate.pr.<image id>" in the image's pool
 * and namespace, holds the core's reservation state: its data is
 * "<version>\n<state>" and its xattr "slate.pr.version" the version again.
 * A store is one atomic write op: cmpxattr version == the one the state was
 * read at (else -ECANCELED: another gateway stored first; the core reads,
 * applies again and retries), setxattr version + 1, write_full.  After it,
 * rados_notify2 on the object tells every gateway watching it
 * (rados_watch2), which reloads its cached copy (the one the per-I/O
 * reservation check reads) and then acks: the store returns when every
 * live gateway has the new state, or after PR_NOTIFY_TIMEOUT_MS.  SUSE's
 * LIO target_core_rbd kept PR state the same way (an xattr of the image
 * header object, the OSD's compare-and-set); Ceph's iSCSI gateway
 * (tcmu-runner) does not share reservations between gateways.
 *
 * load and store are synchronous cluster round trips (a few ms; a store
 * waits for the other gateways' acks too): the core calls them for
 * PERSISTENT RESERVE OUT/IN and the NVMe reservation commands only, which
 * hosts send rarely; stores run on a core worker thread
 * (core_ns_pr_out_submit), loads for PR IN on the reactor that received
 * the command; a watch callback runs on a librados thread.
 */
#define PR_VERSION_XATTR     "slate.pr.version"
#define PR_MAX_BYTES         (256u << 10) /* 64 registrations of the longest names fit */
#define PR_NOTIFY_TIMEOUT_MS 3000

/*
 * What another gateway's notify on the state object says: a record of the
 * image metadata changed ("meta\n<key>\n<value>", rbd_be_meta_store), or
 * else the reservation state (its new version).
 */
static void rbd_notified(struct rbd_be *r, const char *data, size_t len)
{
        const char *nl =
            len > 5 && memcmp(data, "meta\n", 5) == 0 ? memchr(data + 5, '\n', len - 5) : NULL;
        if (!nl) {
                if (r->be->pr_changed)
                        r->be->pr_changed(r->be);
                return;
        }
        char *copy = malloc(len + 1);
        if (!copy)
                return;
        memcpy(copy, data, len);
        copy[len] = 0;
        size_t voff = (size_t)(nl - data) + 1; /* the key is copy[5, voff - 1) */
        copy[voff - 1] = 0;
        /* No NUL inside: the record is text (what rbd_be_meta_store sends). */
        if (r->be->meta_changed && voff - 1 > 5 && strlen(copy + 5) == voff - 6 &&
            strlen(copy + voff) == len - voff)
                r->be->meta_changed(r->be, copy + 5, copy + voff);
        free(copy);
}

/* On a librados thread: another gateway stored the state or a metadata record. */
static void rbd_pr_notified(void *arg, uint64_t notify_id, uint64_t handle, uint64_t notifier_id,
                            void *data, size_t len)
{
        struct rbd_be *r = arg;
        if (notifier_id != r->instance_id)
                rbd_notified(r, data, len);
        /* After the reload: a notifier that waits knows we have the new state. */
        rados_notify_ack(r->io, r->pr_oid, notify_id, handle, NULL, 0);
}

/*
 * The watch broke (OSD change, connection reset): notifies may have been
 * lost, so reload now; the watch is made again by the next load or store
 * (a control path), not from this librados callback.
 */
static void rbd_pr_watch_error(void *arg, uint64_t cookie, int err)
{
        struct rbd_be *r = arg;
        (void)cookie;
        LOG_WARN("rbd",
                 "%s: reservation watch lost (%s): changes through other gateways are "
                 "seen at the next reservation command",
                 r->desc, strerror(-err));
        atomic_store(&r->pr_watch_broken, true);
        if (r->be->pr_changed)
                r->be->pr_changed(r->be);
        if (r->be->meta_changed)
                r->be->meta_changed(r->be, NULL, NULL);
}

/* Make a broken watch again (on the control path); 0 or -errno. */
static int rbd_pr_rewatch(struct rbd_be *r)
{
        if (!atomic_exchange(&r->pr_watch_broken, false))
                return 0;
        if (r->pr_watching)
                rados_unwatch2(r->io, r->pr_watch);
        int rc =
            rados_watch2(r->io, r->pr_oid, &r->pr_watch, rbd_pr_notified, rbd_pr_watch_error, r);
        r->pr_watching = rc == 0;
        if (rc < 0) {
                atomic_store(&r->pr_watch_broken, true); /* try again next time */
                LOG_ERR("rbd", "%s: watching the reservation state again: %s", r->desc,
                        strerror(-rc));
        } else {
                LOG_INFO("rbd", "%s: reservation state watched again", r->desc);
        }
        return rc;
}

static int rbd_pr_open(struct rbd_be *r)
{
        char id[96];
        int rc = rbd_get_id(r->image, id, sizeof(id));
        if (rc < 0)
                return rc;
        snprintf(r->pr_oid, sizeof(r->pr_oid), "slate.pr.%s", id);
        r->instance_id = rados_get_instance_id(r->cluster);
        /* The object must exist to be watched: version 0, no state, unless a gateway made it. */
        rados_write_op_t op = rados_create_write_op();
        if (!op)
                return -ENOMEM;
        rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
        rados_write_op_setxattr(op, PR_VERSION_XATTR, "0", 1);
        rc = rados_write_op_operate(op, r->io, r->pr_oid, NULL, 0);
        rados_release_write_op(op);
        if (rc < 0 && rc != -EEXIST)
                return rc;
        rc = rados_watch2(r->io, r->pr_oid, &r->pr_watch, rbd_pr_notified, rbd_pr_watch_error, r);
        if (rc < 0)
                return rc;
        r->pr_watching = true;
        return 0;
}

static void rbd_pr_close(struct rbd_be *r)
{
        if (!r->pr_watching)
                return;
        rados_unwatch2(r->io, r->pr_watch);
        rados_watch_flush(r->cluster); /* no callback runs after this */
        r->pr_watching = false;
}

static int rbd_be_pr_load(struct backend *be, char **text, uint64_t *version)
{
        struct rbd_be *r = be->priv;
        *text = NULL;
        *version = 0;
        rbd_pr_rewatch(r);
        char *buf = malloc(PR_MAX_BYTES + 1);
        if (!buf)
                return -ENOMEM;
        int n = rados_read(r->io, r->pr_oid, buf, PR_MAX_BYTES, 0);
        if (n == -ENOENT || n == 0) {
                free(buf);
                return 0;
        }
        if (n < 0 || n >= (int)PR_MAX_BYTES) {
                free(buf);
                return n < 0 ? n : -EFBIG;
        }
        buf[n] = 0;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno || end == buf || *end != '\n') {
                LOG_ERR("rbd", "%s: reservation state object %s is malformed", r->desc, r->pr_oid);
                free(buf);
                return -EINVAL;
        }
        memmove(buf, end + 1, strlen(end + 1) + 1);
        *text = buf;
        *version = v;
        return 0;
}

static int rbd_be_pr_store(struct backend *be, const char *text, uint64_t *version)
{
        struct rbd_be *r = be->priv;
        char old[24], new[24];
        snprintf(old, sizeof(old), "%llu", (unsigned long long)*version);
        snprintf(new, sizeof(new), "%llu", (unsigned long long)(*version + 1));
        size_t tl = strlen(text), nl = strlen(new);
        if (nl + 1 + tl >= PR_MAX_BYTES)
                return -EFBIG;
        char *buf = malloc(nl + 1 + tl);
        if (!buf)
                return -ENOMEM;
        memcpy(buf, new, nl);
        buf[nl] = '\n';
        memcpy(buf + nl + 1, text, tl);
        rados_write_op_t op = rados_create_write_op();
        if (!op) {
                free(buf);
                return -ENOMEM;
        }
        rados_write_op_cmpxattr(op, PR_VERSION_XATTR, LIBRADOS_CMPXATTR_OP_EQ, old, strlen(old));
        rados_write_op_setxattr(op, PR_VERSION_XATTR, new, nl);
        rados_write_op_write_full(op, buf, nl + 1 + tl);
        int rc = rados_write_op_operate(op, r->io, r->pr_oid, NULL, 0);
        rados_release_write_op(op);
        free(buf);
        if (rc == -ENODATA || rc == -ENOENT)
                rc = -ECANCELED; /* the object was removed and made again meanwhile: read again */
        if (rc < 0)
                return rc;
        *version += 1;
        /*
         * Tell the other gateways and wait for their acks: each acks after
         * reloading its copy, so when the command completes every live
         * gateway enforces the new state.  A gateway that died keeps its
         * watch until the cluster drops it (about 30 s): the notify then
         * times out, the state is stored all the same.
         */
        char *reply = NULL;
        size_t reply_len = 0;
        rc =
            rados_notify2(r->io, r->pr_oid, new, (int)nl, PR_NOTIFY_TIMEOUT_MS, &reply, &reply_len);
        if (reply)
                rados_buffer_free(reply);
        if (rc < 0)
                LOG_WARN("rbd", "%s: not every gateway acknowledged the reservation change (%s)",
                         r->desc, strerror(-rc));
        return 0;
}

/*
 * ---- Records kept in the image metadata (ops->meta_load/meta_store) ----
 *
 * Key "slate.<key>" beside "slate.identity".  A store is rbd_metadata_set,
 * then a notify on the reservation state object (the watch every gateway
 * of the image already keeps, above) carrying the record, so the others
 * take the new value without a cluster read on the librados thread; it
 * returns when every live gateway acknowledged (after taking it) or after
 * PR_NOTIFY_TIMEOUT_MS.
 */
#define META_MAX_BYTES 4096u

static int rbd_be_meta_load(struct backend *be, const char *key, char **val)
{
        struct rbd_be *r = be->priv;
        char k[96];
        *val = NULL;
        snprintf(k, sizeof(k), "slate.%s", key);
        size_t len = META_MAX_BYTES;
        char *buf = malloc(len + 1);
        if (!buf)
                return -ENOMEM;
        int rc = rbd_metadata_get(r->image, k, buf, &len);
        if (rc < 0) {
                free(buf);
                return rc == -ERANGE ? -EFBIG : rc; /* -ENOENT: none stored */
        }
        buf[len < META_MAX_BYTES ? len : META_MAX_BYTES] = 0;
        *val = buf;
        return 0;
}

static int rbd_be_meta_store(struct backend *be, const char *key, const char *val)
{
        struct rbd_be *r = be->priv;
        char k[96];
        snprintf(k, sizeof(k), "slate.%s", key);
        size_t kl = strlen(key), vl = strlen(val);
        if (vl >= META_MAX_BYTES || kl + 1 >= sizeof(k) - 6)
                return -EFBIG;
        int rc = rbd_metadata_set(r->image, k, val);
        if (rc < 0) {
                LOG_ERR("rbd", "%s: storing %s in the image metadata: %s", r->desc, k,
                        strerror(-rc));
                return rc;
        }
        size_t ml = 5 + kl + 1 + vl;
        char *msg = malloc(ml);
        if (!msg) {
                LOG_ERR("rbd", "%s: %s stored, the other gateways not told (no memory)", r->desc,
                        k);
                return 0; /* stored: they read it when they next open the image */
        }
        memcpy(msg, "meta\n", 5);
        memcpy(msg + 5, key, kl);
        msg[5 + kl] = '\n';
        memcpy(msg + 6 + kl, val, vl);
        rbd_pr_rewatch(r);
        char *reply = NULL;
        size_t reply_len = 0;
        rc =
            rados_notify2(r->io, r->pr_oid, msg, (int)ml, PR_NOTIFY_TIMEOUT_MS, &reply, &reply_len);
        free(msg);
        if (reply)
                rados_buffer_free(reply);
        if (rc < 0)
                LOG_WARN("rbd", "%s: not every gateway acknowledged the new %s (%s)", r->desc, k,
                         strerror(-rc));
        return 0;
}

const struct backend_ops backend_rbd_ops = {
    .name = "rbd",
    .open = rbd_be_open,
    .close = rbd_be_close,
    .submit = rbd_be_submit,
    .resize = rbd_be_resize,
    .map_status = rbd_be_map_status,
    .map_status_remote = true,
    .identity_load = rbd_be_identity_load,
    .identity_store = rbd_be_identity_store,
    .pr_load = rbd_be_pr_load,
    .pr_store = rbd_be_pr_store,
    .meta_load = rbd_be_meta_load,
    .meta_store = rbd_be_meta_store,
};
