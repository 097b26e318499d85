/*
 * The management RPC: JSON-RPC 2.0 (https://www.jsonrpc.org/specification)
 * over a Unix stream socket, and the one method table that drives
 * dispatch, parameter checking, `rpc_list` and docs/config.md.  The config
 * loader (config.c) replays its entries through mgmt_rpc_call(), so the
 * config file, the socket and slatectl can never disagree on a method.
 *
 * Nothing a client sends may crash or wedge the daemon: every parameter is
 * checked against the table before a handler runs (wrong type, missing,
 * unknown, out of range -> -32602 naming the parameter), requests are
 * capped at MGMT_RPC_MAX_REQ bytes, and the server thread multiplexes its
 * clients with poll() and drops one that stays silent mid-request, so a
 * slow or hostile client cannot hold up the others.  Handlers run under one
 * mutex: the control path is serial by design.
 */
#include "mgmt/mgmt.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <uuid/uuid.h>

#include "core/ana.h"
#include "core/atomic.h"
#include "core/fault.h"
#include "core/flash.h"
#include "core/media.h"
#include "core/ns.h"
#include "mgmt/metrics.h"
#include "iscsi/iscsi.h"
#include "nvme/nvme.h"
#include "nvmf/nvmf.h"
#include "rt/bigbuf.h"
#include "rt/limits.h"
#include "rt/log.h"
#include "rt/reactor.h"

#ifndef SLATE_VERSION
#define SLATE_VERSION "0.1.0"
#endif

#define MGMT_RPC_MAX_REQ     (1u << 20) /* bytes; larger requests are rejected */
#define MGMT_RPC_MAX_CLIENTS 32
#define MGMT_RPC_IDLE_MS     10000 /* a request must arrive whole (and an answer be read) in this */
#define MGMT_RPC_MAX_SIZE                                                                          \
        (1ull << 60) /* namespace size cap: keeps block math far from overflow                     \
                      */

/* JSON-RPC 2.0 error codes (spec section 5.1). */
enum {
        RPC_PARSE_ERROR = -32700,
        RPC_INVALID_REQUEST = -32600,
        RPC_METHOD_NOT_FOUND = -32601,
        RPC_INVALID_PARAMS = -32602,
        RPC_SERVER_ERROR = -32000, /* the operation itself failed */
};

/* ------------------------------------------------------------------ */
/* The method table                                                    */
/* ------------------------------------------------------------------ */

enum ptype {
        P_STR,  /* non-empty string, at most max bytes */
        P_NAME, /* namespace name: [A-Za-z0-9._-]{1,63} */
        P_UINT, /* integer in [min, max] */
        P_SIZE, /* bytes: integer, or string with K/M/G/T (binary) suffix */
        P_BOOL,
        P_LUNS, /* LUN list: "0,2,4-7", one integer, or an array of integers */
};

struct param_spec {
        const char *name;
        enum ptype type;
        bool required;
        uint64_t min, max; /* P_UINT range; P_STR max length */
        const char *desc;
};

struct rpc_ctx {
        json_t *params; /* validated against the method's param_spec (never NULL) */
        json_t *result; /* handler sets on success (new reference); NULL -> true */
        int code;       /* JSON-RPC code on failure */
        char *err;
        size_t errlen;
};

#define RPC_PARAMS_MAX 48

struct rpc_method {
        const char *name;
        int (*fn)(struct rpc_ctx *c);
        const char *desc;
        /* Ends at the first name == NULL or after RPC_PARAMS_MAX entries (a full table has no
         * terminator). */
        struct param_spec params[RPC_PARAMS_MAX];
};
#define param_end(m, ps) ((ps) == (m)->params + RPC_PARAMS_MAX || !(ps)->name)

static const struct rpc_method rpc_methods[];
static const size_t rpc_nmethods;

/* Recursive: config_reload replays its steps through mgmt_rpc_call while holding it. */
static pthread_mutex_t rpc_lock = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static struct timespec rpc_t0;

__attribute__((constructor)) static void rpc_record_start(void)
{
        clock_gettime(CLOCK_MONOTONIC, &rpc_t0);
}

/* A -32602 error; returns -EINVAL for the caller to pass up. */
__attribute__((format(printf, 2, 3))) static int inval(struct rpc_ctx *c, const char *fmt, ...)
{
        va_list ap;
        int n = snprintf(c->err, c->errlen, "invalid params: ");
        va_start(ap, fmt);
        if (n > 0 && (size_t)n < c->errlen)
                vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
        va_end(ap);
        c->code = RPC_INVALID_PARAMS;
        return -EINVAL;
}

/*
 * A -32000 error for an operation that failed with rc (-errno).  msg is
 * what the lower layer said (may be empty); the errno text is appended.
 */
static int opfail(struct rpc_ctx *c, int rc, const char *what, const char *msg)
{
        if (rc >= 0)
                rc = -EIO;
        /* The caller already knows the method; "what" only names a bare errno. */
        if (msg && msg[0])
                snprintf(c->err, c->errlen, "%s (%s)", msg, strerror(-rc));
        else
                snprintf(c->err, c->errlen, "%s failed: %s", what, strerror(-rc));
        c->code = RPC_SERVER_ERROR;
        return rc;
}

static bool ns_name_ok(const char *s)
{
        size_t n = strlen(s);
        if (n == 0 || n >= CORE_NS_NAME_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                unsigned char ch = (unsigned char)s[i];
                if (!isalnum(ch) && ch != '.' && ch != '_' && ch != '-')
                        return false;
        }
        return true;
}

/* "1073741824", "1G", "512k", "4MiB", "2TB" -> bytes; 0 or -EINVAL/-ERANGE. */
static int parse_size(const char *s, uint64_t *out)
{
        const char *p = s;
        uint64_t v = 0;
        if (!isdigit((unsigned char)*p))
                return -EINVAL;
        for (; isdigit((unsigned char)*p); p++) {
                unsigned d = (unsigned)(*p - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        unsigned shift = 0;
        switch (toupper((unsigned char)*p)) {
        case '\0':
                break;
        case 'K':
                shift = 10;
                break;
        case 'M':
                shift = 20;
                break;
        case 'G':
                shift = 30;
                break;
        case 'T':
                shift = 40;
                break;
        case 'P':
                shift = 50;
                break;
        default:
                return -EINVAL;
        }
        if (*p) {
                p++;
                if (strcasecmp(p, "") != 0 && strcasecmp(p, "b") != 0 && strcasecmp(p, "ib") != 0)
                        return -EINVAL;
        }
        if (shift && v > (UINT64_MAX >> shift))
                return -ERANGE;
        *out = v << shift;
        return 0;
}

static const char *ptype_name(enum ptype t)
{
        switch (t) {
        case P_STR:
                return "string";
        case P_NAME:
                return "name";
        case P_UINT:
                return "integer";
        case P_SIZE:
                return "size";
        case P_BOOL:
                return "bool";
        case P_LUNS:
                return "luns";
        }
        return "?";
}

/* Check params against the method's spec; every rejection names the parameter. */
static int check_params(const struct rpc_method *m, struct rpc_ctx *c)
{
        const char *key;
        json_t *v;

        json_object_foreach(c->params, key, v)
        {
                const struct param_spec *ps = m->params;
                while (!param_end(m, ps) && strcmp(ps->name, key) != 0)
                        ps++;
                if (param_end(m, ps))
                        return inval(c, "unknown param '%.64s' for %s", key, m->name);
        }
        for (const struct param_spec *ps = m->params; !param_end(m, ps); ps++) {
                v = json_object_get(c->params, ps->name);
                if (!v || json_is_null(v)) {
                        if (ps->required)
                                return inval(c, "missing required param '%s' (%s)", ps->name,
                                             ptype_name(ps->type));
                        continue;
                }
                switch (ps->type) {
                case P_STR:
                        if (!json_is_string(v))
                                return inval(c, "'%s' must be a string", ps->name);
                        if (json_string_length(v) == 0)
                                return inval(c, "'%s' must not be empty", ps->name);
                        if (json_string_length(v) > ps->max)
                                return inval(c, "'%s' is longer than %" PRIu64 " bytes", ps->name,
                                             ps->max);
                        if (strlen(json_string_value(v)) != json_string_length(v))
                                return inval(c, "'%s' contains a NUL byte", ps->name);
                        break;
                case P_NAME:
                        if (!json_is_string(v))
                                return inval(c, "'%s' must be a string", ps->name);
                        if (strlen(json_string_value(v)) != json_string_length(v) ||
                            !ns_name_ok(json_string_value(v)))
                                return inval(c, "'%s' must match [A-Za-z0-9._-]{1,%d}", ps->name,
                                             CORE_NS_NAME_MAX - 1);
                        break;
                case P_UINT: {
                        if (!json_is_integer(v))
                                return inval(c, "'%s' must be an integer", ps->name);
                        json_int_t i = json_integer_value(v);
                        if (i < 0 || (uint64_t)i < ps->min || (uint64_t)i > ps->max)
                                return inval(c, "'%s' must be in [%" PRIu64 ", %" PRIu64 "]",
                                             ps->name, ps->min, ps->max);
                        break;
                }
                case P_SIZE: {
                        uint64_t sz;
                        if (json_is_integer(v)) {
                                if (json_integer_value(v) < 0)
                                        return inval(c, "'%s' must not be negative", ps->name);
                                sz = (uint64_t)json_integer_value(v);
                        } else if (json_is_string(v)) {
                                if (strlen(json_string_value(v)) != json_string_length(v) ||
                                    parse_size(json_string_value(v), &sz) < 0)
                                        return inval(c,
                                                     "'%s' must be bytes or a number with a "
                                                     "K/M/G/T suffix",
                                                     ps->name);
                        } else {
                                return inval(c, "'%s' must be an integer or a size string",
                                             ps->name);
                        }
                        if (sz > MGMT_RPC_MAX_SIZE)
                                return inval(c, "'%s' is too large (max %llu bytes)", ps->name,
                                             MGMT_RPC_MAX_SIZE);
                        break;
                }
                case P_BOOL:
                        if (!json_is_boolean(v))
                                return inval(c, "'%s' must be true or false", ps->name);
                        break;
                case P_LUNS: {
                        /* The values themselves are checked by the handler's parser. */
                        size_t i;
                        json_t *e;
                        bool ok = json_is_string(v) || json_is_integer(v) ||
                                  (json_is_array(v) && json_array_size(v) > 0);
                        json_array_foreach(v, i, e) ok = ok && json_is_integer(e);
                        if (!ok || (json_is_string(v) &&
                                    (json_string_length(v) > ps->max ||
                                     strlen(json_string_value(v)) != json_string_length(v))))
                                return inval(c, "'%s' must be a LUN list (\"0,2,4-7\" or [0, 2])",
                                             ps->name);
                        break;
                }
                }
        }
        return 0;
}

int mgmt_parse_size_json(json_t *v, uint64_t *out)
{
        if (json_is_integer(v) && json_integer_value(v) >= 0) {
                *out = (uint64_t)json_integer_value(v);
                return 0;
        }
        if (json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v))
                return parse_size(json_string_value(v), out);
        return -EINVAL;
}

/* Getters for already-checked params. */
static const char *pstr(struct rpc_ctx *c, const char *name, const char *dflt)
{
        json_t *v = json_object_get(c->params, name);
        return json_is_string(v) ? json_string_value(v) : dflt;
}

static uint64_t puint(struct rpc_ctx *c, const char *name, uint64_t dflt)
{
        json_t *v = json_object_get(c->params, name);
        return json_is_integer(v) ? (uint64_t)json_integer_value(v) : dflt;
}

static bool pbool(struct rpc_ctx *c, const char *name, bool dflt)
{
        json_t *v = json_object_get(c->params, name);
        return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static uint64_t psize(struct rpc_ctx *c, const char *name, uint64_t dflt)
{
        json_t *v = json_object_get(c->params, name);
        uint64_t sz = dflt;
        if (json_is_integer(v))
                sz = (uint64_t)json_integer_value(v);
        else if (json_is_string(v) && parse_size(json_string_value(v), &sz) < 0)
                sz = dflt; /* cannot happen after check_params */
        return sz;
}

/* ------------------------------------------------------------------ */
/* Protection information format keys (namespace_create, namespace_format; core/pi.h) */
/* ------------------------------------------------------------------ */

static const char *const pi_guard_names[] = {"crc16", "crc32c", "crc64"};

static bool pi_keys_given(struct rpc_ctx *c)
{
        static const char *const keys[] = {"pi_type", "pi_md",    "pi_guard",
                                           "pi_exp",  "pi_first", "pi_sts"};
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                if (json_object_get(c->params, keys[i]))
                        return true;
        return false;
}

/* The format the keys state (pi_md 8 by default when pi_type > 0); NULL or the reason it is bad. */
static const char *pi_from_params(struct rpc_ctx *c, uint32_t block_size, struct core_pi_fmt *f)
{
        memset(f, 0, sizeof(*f));
        f->block_size = block_size;
        f->type = (uint8_t)puint(c, "pi_type", 0);
        f->md_size = (uint16_t)puint(c, "pi_md", f->type ? 8 : 0);
        f->pi_exp = (uint8_t)puint(c, "pi_exp", 0);
        f->pi_first = pbool(c, "pi_first", false);
        const char *g = pstr(c, "pi_guard", "crc16");
        size_t i = 0;
        while (i < 3 && strcmp(g, pi_guard_names[i]) != 0)
                i++;
        if (i == 3)
                return "'pi_guard' must be crc16, crc32c or crc64";
        f->guard = (uint8_t)i;
        /* The 32b guard's 80-bit space: a 16-bit storage tag leaves a 64-bit reference tag. */
        f->sts = (uint8_t)puint(c, "pi_sts", f->guard == CORE_PI_GUARD_CRC32C ? 16 : 0);
        if (f->md_size != 0 && f->md_size != 8 && f->md_size != 16)
                return "'pi_md' must be 8 or 16 (metadata bytes per protection interval)";
        if (!f->md_size && (f->pi_exp || f->guard || f->pi_first))
                return "'pi_exp', 'pi_guard' and 'pi_first' need metadata (pi_type > 0 or pi_md)";
        return NULL;
}

/* The format's keys into o (nothing for a namespace without metadata). */
static void pi_to_params(json_t *o, const struct core_pi_fmt *f)
{
        if (!f->md_size)
                return;
        json_object_set_new(o, "pi_type", json_integer(f->type));
        json_object_set_new(o, "pi_md", json_integer(f->md_size));
        json_object_set_new(o, "pi_guard", json_string(pi_guard_names[f->guard % 3]));
        json_object_set_new(o, "pi_exp", json_integer(f->pi_exp));
        json_object_set_new(o, "pi_first", json_boolean(f->pi_first));
        if (f->sts)
                json_object_set_new(o, "pi_sts", json_integer(f->sts));
}

/* ------------------------------------------------------------------ */
/* Handlers                                                            */
/* ------------------------------------------------------------------ */

static int h_namespace_create(struct rpc_ctx *c)
{
        struct core_ns_params p = {
            .name = pstr(c, "name", NULL),
            .backend = pstr(c, "backend", "file"),
            .path = pstr(c, "path", NULL),
            .size_bytes = psize(c, "size", 0),
            .block_size = (uint32_t)puint(c, "block_size", 512),
            .physical_block_size = (uint32_t)puint(c, "physical_block_size", 0),
            .thin = pbool(c, "thin", true),
            .write_protect = pbool(c, "write_protect", false),
            .removable = pbool(c, "removable", false),
            .adopt = pbool(c, "adopt", false),
            .sanitize_rate_mibps = (uint32_t)puint(c, "sanitize_rate_mibps", 0),
            .selftest_rate_mibps = (uint32_t)puint(c, "selftest_rate_mibps", 0),
            .provision_limit = psize(c, "provision_limit", 0),
            .provision_threshold = psize(c, "provision_threshold", 0),
            .atomic_write_max_set = json_object_get(c->params, "atomic_write_max") != NULL,
            .atomic_write_max = (uint32_t)psize(c, "atomic_write_max", 0),
            .flash =
                {
                    .enable = pbool(c, "flash_model", false),
                    .erase_block = psize(c, "flash_erase_block", 0),
                    .op_set = json_object_get(c->params, "flash_op_percent") != NULL,
                    .op_percent = (uint32_t)puint(c, "flash_op_percent", 0),
                    .gc_set = json_object_get(c->params, "flash_gc") != NULL,
                },
            .fdp_off = !pbool(c, "fdp", true),
            .elements_set = json_object_get(c->params, "elements") != NULL,
            .elements = (uint32_t)puint(c, "elements", 0),
            .ana_group = (uint32_t)puint(c, "ana_group", 1),
            .element_interleave = (uint32_t)puint(c, "element_interleave", 0),
            .encrypt = pbool(c, "encrypt", false),
            .key_file = pstr(c, "key_file", NULL),
            .passphrase_file = pstr(c, "passphrase_file", NULL),
            .pbkdf2_iter = (uint32_t)puint(c, "pbkdf2_iterations", 0),
            .rbd_pool = pstr(c, "pool", NULL),
            .rbd_image = pstr(c, "image", NULL),
            .rbd_namespace = pstr(c, "rbd_namespace", NULL),
            .ceph_conf = pstr(c, "ceph_conf", NULL),
            .client_id = pstr(c, "client_id", NULL),
            .keyring = pstr(c, "keyring", NULL),
            .shared_reservations = pbool(c, "shared_reservations", false),
        };
        if (pi_keys_given(c)) {
                const char *why = pi_from_params(c, p.block_size, &p.pi);
                if (why)
                        return inval(c, "%s", why);
                p.pi_set = true;
        }
        if (core_flash_gc_parse(pstr(c, "flash_gc", "greedy"), &p.flash.gc) < 0)
                return inval(c, "'flash_gc' must be greedy or cost-benefit");
        if (!p.flash.enable && (p.flash.erase_block || p.flash.op_set || p.flash.gc_set))
                return inval(c, "'flash_erase_block', 'flash_op_percent' and 'flash_gc' need "
                                "'flash_model': true");
        bool rbd = strcmp(p.backend, "rbd") == 0;
        if (strcmp(p.backend, "mem") != 0 && strcmp(p.backend, "file") != 0 &&
            strcmp(p.backend, "null") != 0 && !rbd)
                return inval(c, "'backend' must be one of mem, file, null, rbd");
        if (!rbd && (p.rbd_pool || p.rbd_image || p.rbd_namespace || p.ceph_conf || p.client_id ||
                     p.keyring))
                return inval(c, "'pool', 'image', 'rbd_namespace', 'ceph_conf', 'client_id' and "
                                "'keyring' apply only to the rbd backend");
        if (p.shared_reservations && strcmp(p.backend, "file") != 0)
                return inval(c, "'shared_reservations' applies only to the file backend (rbd "
                                "always shares them)");
        if (rbd && (!p.rbd_pool || !p.rbd_image))
                return inval(c, "the rbd backend needs 'pool' and 'image'");
        /* Files slated reads for the cluster: the path rules of data files (README "Security"). */
        const char *rbd_files[] = {p.ceph_conf, p.keyring};
        for (size_t i = 0; i < 2; i++) {
                if (!rbd_files[i])
                        continue;
                char why[PATH_MAX + 256];
                int prc = mgmt_path_allowed(rbd_files[i], MGMT_PATH_DATA, why, sizeof(why));
                if (prc < 0)
                        return opfail(c, prc, "namespace_create", why);
        }
        if (p.block_size != 512 && p.block_size != 4096)
                return inval(c, "'block_size' must be 512 or 4096");
        if (p.physical_block_size && (p.physical_block_size & (p.physical_block_size - 1) ||
                                      p.physical_block_size < p.block_size))
                return inval(c,
                             "'physical_block_size' must be a power of two, at least block_size");
        if (p.path && strcmp(p.backend, "file") != 0)
                return inval(c, "'path' applies only to the file backend");
        if (p.path) { /* inside the state dir or options.allowed_dirs (README "Security") */
                char why[PATH_MAX + 256];
                int prc = mgmt_path_allowed(p.path, MGMT_PATH_DATA, why, sizeof(why));
                if (prc < 0)
                        return opfail(c, prc, "namespace_create", why);
        }
        if (p.size_bytes % p.block_size)
                return inval(c, "'size' (%" PRIu64 ") is not a multiple of block_size %" PRIu32,
                             p.size_bytes, p.block_size);
        if (p.size_bytes == 0 && strcmp(p.backend, "file") != 0 && !rbd)
                return inval(c, "'size' is required for the %s backend", p.backend);
        if (core_ns_find(p.name))
                return opfail(c, -EEXIST, "namespace_create", "namespace already exists");

        char msg[256] = "";
        struct core_ns *ns = NULL;
        int rc = core_ns_create(&p, &ns, msg, sizeof(msg));
        if (rc < 0)
                return opfail(c, rc, "namespace_create", msg);
        LOG_INFO("mgmt", "namespace %s created (%s, %" PRIu64 " x %u)", ns->name, ns->backend_name,
                 ns->num_blocks, ns->block_size);
        c->result = json_string(ns->name);
        return 0;
}

static int h_namespace_delete(struct rpc_ctx *c)
{
        const char *name = pstr(c, "name", NULL);
        struct core_ns *ns = core_ns_find(name);
        if (!ns)
                return opfail(c, -ENOENT, "namespace_delete", "no such namespace");
        if (iscsi_ns_in_use(ns))
                return opfail(c, -EBUSY, "namespace_delete",
                              "namespace is mapped to an iSCSI LUN; unmap it first");
        if (nvme_ns_in_use(ns))
                return opfail(c, -EBUSY, "namespace_delete",
                              "namespace is attached to an NVMe subsystem; detach it first");
        int rc = core_ns_delete(name);
        if (rc < 0)
                return opfail(c, rc, "namespace_delete", "namespace still in use");
        LOG_INFO("mgmt", "namespace %s deleted", name);
        return 0;
}

/*
 * Runtime changes reach the hosts through the core's events: a new size is
 * CAPACITY DATA HAS CHANGED on every I_T nexus and Namespace Attribute
 * Changed on every NVMe controller (the Linux host rescans and sees it
 * without reconnecting).  Shrinking while exported is refused unless
 * force: a host may hold the blocks past the new end (SPDK refuses to
 * shrink an open bdev; LIO and nvmet only revalidate whatever size the
 * device has, so the check is ours to make).
 */
/*
 * A new metadata format (core_ns_format): every block's metadata becomes the
 * escape, the data stays; hosts are told (capacity data changed, namespace
 * attribute changed).  Without any pi_* key: back to no metadata.
 */
static int h_namespace_format(struct rpc_ctx *c)
{
        struct core_ns *ns = core_ns_find(pstr(c, "name", NULL));
        if (!ns)
                return opfail(c, -ENOENT, "namespace_format", "no such namespace");
        struct core_pi_fmt f;
        const char *why = pi_from_params(c, ns->block_size, &f);
        if (why)
                return inval(c, "%s", why);
        char msg[256] = "";
        int rc = core_ns_format(ns, &f, NULL, msg, sizeof(msg));
        if (rc < 0)
                return opfail(c, rc, "namespace_format", msg);
        struct core_pi_fmt now;
        core_ns_pi_fmt(ns, &now);
        c->result = json_pack("{s:s}", "name", ns->name);
        pi_to_params(c->result, &now);
        return 0;
}

static int h_namespace_resize(struct rpc_ctx *c)
{
        struct core_ns *ns = core_ns_find(pstr(c, "name", NULL));
        if (!ns)
                return opfail(c, -ENOENT, "namespace_resize", "no such namespace");
        uint64_t size = psize(c, "size", 0);
        bool force = pbool(c, "force", false);
        if (size == 0 || size % ns->block_size)
                return inval(c, "'size' (%" PRIu64 ") must be a non-zero multiple of block_size %u",
                             size, ns->block_size);
        uint64_t nb = size / ns->block_size;
        if (nb < core_ns_blocks(ns) && !force && (iscsi_ns_in_use(ns) || nvme_ns_in_use(ns)))
                return opfail(c, -EBUSY, "namespace_resize",
                              "shrinking an exported namespace (iSCSI LUN or NVMe namespace): "
                              "unmap/detach it first, or force=true");
        char msg[256] = "";
        int rc = core_ns_resize(ns, nb, force, msg, sizeof(msg));
        if (rc < 0)
                return opfail(c, rc, "namespace_resize", msg);
        c->result = json_pack("{s:s, s:I, s:I}", "name", ns->name, "size",
                              (json_int_t)(core_ns_blocks(ns) * (uint64_t)ns->block_size),
                              "num_blocks", (json_int_t)core_ns_blocks(ns));
        return 0;
}

/* Management write protection (the CONFIG reason) and the volatile write cache. */
static int h_namespace_set(struct rpc_ctx *c)
{
        struct core_ns *ns = core_ns_find(pstr(c, "name", NULL));
        if (!ns)
                return opfail(c, -ENOENT, "namespace_set", "no such namespace");
        json_t *wp = json_object_get(c->params, "write_protect");
        json_t *wc = json_object_get(c->params, "write_cache");
        json_t *pl = json_object_get(c->params, "provision_limit");
        json_t *pt = json_object_get(c->params, "provision_threshold");
        json_t *aw = json_object_get(c->params, "atomic_write_max");
        json_t *el = json_object_get(c->params, "elements");
        json_t *ei = json_object_get(c->params, "element_interleave");
        json_t *ag = json_object_get(c->params, "ana_group");
        if (!wp && !wc && !pl && !pt && !aw && !el && !ei && !ag)
                return inval(c, "give 'write_protect', 'write_cache', 'provision_limit', "
                                "'provision_threshold', 'atomic_write_max', 'elements', "
                                "'element_interleave' and/or 'ana_group'");
        if (ag && core_ns_set_ana_group(ns, (uint32_t)puint(c, "ana_group", 1), NULL) < 0)
                return inval(c, "'ana_group' must be 1..%u", CORE_ANA_GROUPS);
        if (el || ei) {
                char msg[256] = "";
                uint32_t n = el ? (uint32_t)puint(c, "elements", 0) : core_media_elements(ns);
                int rc = core_media_configure(ns, n, (uint32_t)puint(c, "element_interleave", 0),
                                              msg, sizeof(msg));
                if (rc < 0)
                        return opfail(c, rc, "namespace_set", msg);
        }
        if (aw) {
                char msg[256] = "";
                int rc = core_ns_set_atomic_max(ns, (uint32_t)psize(c, "atomic_write_max", 0), msg,
                                                sizeof(msg));
                if (rc < 0)
                        return opfail(c, rc, "namespace_set", msg);
        }
        if (pl || pt) {
                /* One setter for both; the one not given keeps its value, 0 removes. */
                char msg[256] = "";
                uint64_t limit = pl ? psize(c, "provision_limit", 0) : atomic_load(&ns->prov.limit);
                uint64_t thr =
                    pt ? psize(c, "provision_threshold", 0) : atomic_load(&ns->prov.threshold);
                int rc = core_ns_set_provision(ns, limit, thr, NULL, msg, sizeof(msg));
                if (rc < 0)
                        return opfail(c, rc, "namespace_set", msg);
        }
        if (wp) {
                int rc = core_ns_set_wp(ns, CORE_WP_CONFIG, json_is_true(wp), NULL);
                if (rc < 0)
                        return opfail(c, rc, "namespace_set", "write protect");
        }
        if (wc)
                core_ns_set_wce(ns, json_is_true(wc), NULL);
        LOG_INFO("mgmt", "namespace %s: write_protect(config)=%d write_cache=%d", ns->name,
                 (core_ns_wp(ns) & CORE_WP_CONFIG) != 0, atomic_load(&ns->wce));
        c->result = json_pack(
            "{s:s, s:b, s:b, s:I, s:I, s:I, s:i, s:i}", "name", ns->name, "write_protect",
            core_ns_wp(ns) != 0, "write_cache", atomic_load(&ns->wce), "provision_limit",
            (json_int_t)atomic_load(&ns->prov.limit), "provision_threshold",
            (json_int_t)atomic_load(&ns->prov.threshold), "atomic_write_max",
            (json_int_t)atomic_load(&ns->atomic_max_bytes), "elements",
            (int)core_media_elements(ns), "element_interleave", (int)core_media_interleave(ns));
        if (c->result)
                json_object_set_new(c->result, "ana_group", json_integer(core_ns_ana_group(ns)));
        return 0;
}

/* An access group's state on this gateway (core/ana.h); hosts are told (ANA change, 2Ah/06h). */
static int h_ana_group_set(struct rpc_ctx *c)
{
        uint32_t g = (uint32_t)puint(c, "group", 1);
        enum core_ana_state st;
        if (core_ana_state_parse(pstr(c, "state", ""), &st) < 0)
                return inval(c, "'state' must be optimized, non-optimized, standby, inaccessible, "
                                "persistent-loss or transitioning");
        enum core_ana_state old = core_ana_state(g);
        int rc = core_ana_set_state(g, st, NULL);
        if (rc < 0)
                return inval(c, "'group' must be 1..%u", CORE_ANA_GROUPS);
        c->result = json_pack("{s:i, s:s, s:s, s:I}", "group", (int)g, "state",
                              core_ana_state_name(st), "previous", core_ana_state_name(old),
                              "change_count", (json_int_t)core_ana_change_count());
        return 0;
}

/*
 * The other gateways this one watches (core/ana.h, automatic takeover):
 * "HOST:PORT[/G[+G..]]" items; absent: none.  Replaces the list.
 */
static int h_ana_peers_set(struct rpc_ctx *c)
{
        struct core_ana_peer p[CORE_ANA_PEERS_MAX];
        char err[200];
        int n = core_ana_peers_parse(pstr(c, "peers", ""), p, CORE_ANA_PEERS_MAX, err, sizeof(err));
        if (n < 0)
                return inval(c, "%s", err);
        unsigned iv = (unsigned)puint(c, "interval_ms", CORE_ANA_PEER_INTERVAL);
        int rc = core_ana_peers_set(p, (unsigned)n, iv);
        if (rc < 0)
                return opfail(c, rc, "ana_peers_set", NULL);
        c->result = json_pack("{s:i, s:i}", "peers", n, "interval_ms", (int)iv);
        return 0;
}

/* Every access group that is not optimized or holds a namespace, and the gateway's ids. */
static void ana_count_ns(struct core_ns *ns, void *arg)
{
        unsigned *n = arg;
        uint32_t g = core_ns_ana_group(ns);
        if (g && g <= CORE_ANA_GROUPS)
                n[g]++;
}

static int h_ana_group_list(struct rpc_ctx *c)
{
        unsigned n[CORE_ANA_GROUPS + 1] = {0};
        core_ns_foreach(ana_count_ns, n);
        json_t *groups = json_array();
        for (uint32_t g = 1; g <= CORE_ANA_GROUPS; g++) {
                enum core_ana_state st = core_ana_state(g);
                if (!n[g] && st == CORE_ANA_OPTIMIZED &&
                    core_ana_configured_state(g) == CORE_ANA_OPTIMIZED)
                        continue;
                json_array_append_new(groups,
                                      json_pack("{s:i, s:s, s:s, s:i, s:i, s:I}", "group", (int)g,
                                                "state", core_ana_state_name(st), "configured",
                                                core_ana_state_name(core_ana_configured_state(g)),
                                                "namespaces", (int)n[g], "scsi_target_port_group",
                                                (int)core_gateway_tpg(g), "change_count",
                                                (json_int_t)core_ana_group_change_count(g)));
        }
        uint16_t lo, hi;
        core_gateway_cntlid_range(&lo, &hi);
        /* the watched peers, each with its verdict */
        struct core_ana_peer p[CORE_ANA_PEERS_MAX];
        bool up[CORE_ANA_PEERS_MAX];
        unsigned iv;
        unsigned np = core_ana_peers_get(p, up, CORE_ANA_PEERS_MAX, &iv);
        json_t *peers = json_array();
        for (unsigned i = 0; i < np; i++) {
                char txt[CORE_ANA_PEER_ADDR_MAX + 64];
                core_ana_peers_format(&p[i], 1, txt, sizeof(txt));
                json_array_append_new(peers, json_pack("{s:s, s:b}", "peer", txt, "up", up[i]));
        }
        c->result =
            json_pack("{s:i, s:I, s:[i,i], s:o, s:o, s:i}", "gateway_id", (int)core_gateway_id(),
                      "change_count", (json_int_t)core_ana_change_count(), "cntlid_range", (int)lo,
                      (int)hi, "groups", groups, "peers", peers, "peer_interval_ms", (int)iv);
        return c->result ? 0 : opfail(c, -ENOMEM, "ana_group_list", NULL);
}

/* The namespace's shared state (core/ns.h) as namespace_list shows it. */
static json_t *mgmt_ns_state_json(struct core_ns *ns)
{
        static const char *const wp_names[] = {"config", "software", "until-power-cycle",
                                               "permanent", "space"};
        static const char *const ready_names[] = {"ready", "stopped", "no-medium"};
        static const char *const san_names[] = {"never", "done", "running", "failed"};
        json_t *wp = json_array();
        uint32_t r = core_ns_wp(ns);
        for (unsigned i = 0; i < sizeof(wp_names) / sizeof(wp_names[0]); i++)
                if (r & (1u << i))
                        json_array_append_new(wp, json_string(wp_names[i]));
        return json_pack("{s:o, s:s, s:s, s:f, s:s}", "write_protect", wp, "ready",
                         ready_names[core_ns_ready(ns) % 3], "sanitize",
                         san_names[core_ns_sanitize_state(ns) % 4], "sanitize_progress",
                         atomic_load(&ns->san_progress) / 65535.0, "ana_state",
                         core_ana_state_name(core_ana_state(core_ns_ana_group(ns))));
}

/* Shared by namespace_list (full) and config_save (replayable params only). */
json_t *mgmt_ns_params_json(struct core_ns *ns)
{
        json_t *o = json_pack("{s:s, s:s, s:I, s:i, s:b, s:b, s:b}", "name", ns->name, "backend",
                              ns->backend_name, "size",
                              (json_int_t)(ns->num_blocks * (uint64_t)ns->block_size), "block_size",
                              (int)ns->block_size, "thin", ns->thin, "write_protect",
                              (core_ns_wp(ns) & CORE_WP_CONFIG) != 0, "removable", ns->removable);
        if (o && strcmp(ns->backend_name, "file") == 0 && ns->path[0])
                json_object_set_new(o, "path", json_string(ns->path));
        if (o && strcmp(ns->backend_name, "file") == 0 && ns->be.pr_shared)
                json_object_set_new(o, "shared_reservations", json_true());
        if (o && strcmp(ns->backend_name, "rbd") == 0) {
                /* The keyring's path, never its contents. */
                const char *const k[][2] = {
                    {"pool", ns->rbd.pool},           {"image", ns->rbd.image},
                    {"rbd_namespace", ns->rbd.ns},    {"ceph_conf", ns->rbd.conf},
                    {"client_id", ns->rbd.client_id}, {"keyring", ns->rbd.keyring}};
                for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
                        if (k[i][1][0])
                                json_object_set_new(o, k[i][0], json_string(k[i][1]));
        }
        if (o)
                json_object_set_new(o, "physical_block_size",
                                    json_integer((json_int_t)ns->block_size << ns->phys_exp));
        if (o && ns->san_rate_mibps)
                json_object_set_new(o, "sanitize_rate_mibps", json_integer(ns->san_rate_mibps));
        if (o && ns->selftest_rate_mibps)
                json_object_set_new(o, "selftest_rate_mibps",
                                    json_integer(ns->selftest_rate_mibps));
        uint64_t limit = atomic_load(&ns->prov.limit), thr = atomic_load(&ns->prov.threshold);
        if (o && limit)
                json_object_set_new(o, "provision_limit", json_integer((json_int_t)limit));
        if (o && thr)
                json_object_set_new(o, "provision_threshold", json_integer((json_int_t)thr));
        if (o)
                json_object_set_new(o, "atomic_write_max",
                                    json_integer((json_int_t)atomic_load(&ns->atomic_max_bytes)));
        struct core_flash_info fi;
        core_flash_info(ns, &fi);
        if (o && fi.enabled) {
                json_object_set_new(o, "flash_model", json_true());
                json_object_set_new(o, "flash_erase_block",
                                    json_integer((json_int_t)fi.erase_block));
                json_object_set_new(o, "flash_op_percent", json_integer(fi.op_percent));
                json_object_set_new(o, "flash_gc", json_string(core_flash_gc_name(fi.gc)));
        }
        if (o && ns->fdp_off)
                json_object_set_new(o, "fdp", json_false());
        if (o && ns->crypt) {
                /* The KEK's file, never the key (core/crypt.h). */
                json_object_set_new(o, "encrypt", json_true());
                json_object_set_new(o, ns->kek_passphrase ? "passphrase_file" : "key_file",
                                    json_string(ns->kek_path));
        }
        if (o && core_media_elements(ns)) {
                json_object_set_new(o, "elements", json_integer(core_media_elements(ns)));
                json_object_set_new(o, "element_interleave",
                                    json_integer(core_media_interleave(ns)));
        }
        if (o) {
                struct core_pi_fmt f;
                core_ns_pi_fmt(ns, &f);
                pi_to_params(o, &f);
        }
        if (o && core_ns_ana_group(ns) != 1)
                json_object_set_new(o, "ana_group", json_integer(core_ns_ana_group(ns)));
        return o;
}

/* The model's counters as JSON; write_amplification = media / host (0 before any write). */
static json_t *flash_stats_json(const struct core_flash_stats *s)
{
        return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "host_bytes",
                         (json_int_t)s->host_bytes, "media_bytes", (json_int_t)s->media_bytes,
                         "gc_bytes", (json_int_t)s->gc_bytes, "erases", (json_int_t)s->erases,
                         "dealloc_bytes", (json_int_t)s->dealloc_bytes, "valid_bytes",
                         (json_int_t)s->valid_bytes, "erase_blocks", (json_int_t)s->erase_blocks,
                         "write_amplification",
                         s->host_bytes ? (double)s->media_bytes / (double)s->host_bytes : 0.0);
}

/* namespace_list 'flash' and the head of flash_stats: geometry and totals. */
static json_t *flash_json(struct core_ns *ns)
{
        struct core_flash_info fi;
        core_flash_info(ns, &fi);
        json_t *o =
            json_pack("{s:b, s:i, s:i}", "enabled", fi.enabled, "placements_max",
                      (int)core_placement_max(ns), "placements_used", (int)core_placement_used(ns));
        if (!o || !fi.enabled)
                return o;
        struct core_flash_stats st;
        core_flash_stats(ns, CORE_FLASH_ALL, &st);
        json_object_set_new(o, "unit", json_integer(fi.unit));
        json_object_set_new(o, "erase_block", json_integer((json_int_t)fi.erase_block));
        json_object_set_new(o, "op_percent", json_integer(fi.op_percent));
        json_object_set_new(o, "gc", json_string(core_flash_gc_name(fi.gc)));
        json_object_set_new(o, "erase_blocks_total", json_integer((json_int_t)fi.total_blocks));
        json_object_set_new(o, "erase_blocks_free", json_integer((json_int_t)fi.free_blocks));
        json_object_set_new(o, "gc_runs", json_integer((json_int_t)fi.gc_runs));
        json_object_set_new(o, "total", flash_stats_json(&st));
        return o;
}

static const char *const elem_state_names[] = {"ok", "degraded", "failed", "depopulated"};

/* Failing media (core/media.h) as namespace_list shows it. */
static json_t *mgmt_ns_media_json(struct core_ns *ns)
{
        struct core_media_stats st;
        core_media_get_stats(ns, &st);
        json_t *els = json_array();
        for (uint32_t id = 1; id <= core_media_elements(ns); id++) {
                struct core_elem_info ei;
                if (core_media_element_info(ns, id, &ei))
                        continue;
                json_array_append_new(els, json_pack("{s:i, s:s, s:i, s:I, s:b}", "id", (int)ei.id,
                                                     "state", elem_state_names[ei.state % 4],
                                                     "health", (int)ei.health, "capacity_blocks",
                                                     (json_int_t)ei.capacity_blocks, "restorable",
                                                     ei.restorable));
        }
        /* The unrecoverable LBAs (marked and on failed elements), the first 64 runs. */
        json_t *bad = json_array();
        uint64_t lba = 0, n = core_ns_blocks(ns), total = 0;
        struct core_lba_range r;
        unsigned runs = 0;
        /* Walk at most 4096 runs (a failed element of a large namespace has many). */
        while (runs < 4096 && lba < n && core_ns_unrecoverable(ns, lba, n - lba, &r) == 1 &&
               r.nlb) {
                if (runs++ < 64)
                        json_array_append_new(bad, json_pack("{s:I, s:I}", "lba", (json_int_t)r.lba,
                                                             "blocks", (json_int_t)r.nlb));
                total += r.nlb;
                lba = r.lba + r.nlb;
        }
        json_t *o = json_pack("{s:i, s:i, s:o, s:o, s:I, s:i, s:i}", "elements",
                              (int)core_media_elements(ns), "element_interleave",
                              (int)core_media_interleave(ns), "element", els, "unrecoverable", bad,
                              "unrecoverable_blocks", (json_int_t)total, "unrecoverable_runs",
                              (int)runs, "depopulating", (int)core_media_depop_element(ns));
        /* false: more runs than were walked; the two counts above are lower bounds. */
        json_object_set_new(o, "unrecoverable_complete",
                            json_boolean(runs < 4096 || lba >= n ||
                                         core_ns_unrecoverable(ns, lba, n - lba, &r) != 1));
        json_object_set_new(o, "untracked_blocks",
                            json_integer((json_int_t)core_media_untracked_blocks(ns)));
        json_object_set_new(
            o, "stats",
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:i}", "media_errors",
                      (json_int_t)st.media_errors, "unrecovered_reads",
                      (json_int_t)st.unrecovered_reads, "write_errors", (json_int_t)st.write_errors,
                      "marks", (json_int_t)st.marks, "healed_blocks", (json_int_t)st.healed_blocks,
                      "element_changes", (json_int_t)st.element_changes, "depopulations",
                      (json_int_t)st.depopulations, "restorations", (json_int_t)st.restorations,
                      "marked_ranges", (json_int_t)st.marked_ranges, "marked_blocks",
                      (json_int_t)st.marked_blocks, "generation", (int)st.generation));
        return o;
}

/* A depopulation the RPC waits for (core_media_depopulate's done, on the engine's thread). */
struct depop_wait {
        pthread_mutex_t m;
        pthread_cond_t cv;
        bool done, ok;
};

static void depop_waited(void *arg, bool ok)
{
        struct depop_wait *w = arg;
        pthread_mutex_lock(&w->m);
        w->done = true;
        w->ok = ok;
        pthread_cond_signal(&w->cv);
        pthread_mutex_unlock(&w->m);
}

/*
 * element_set: fail, degrade or heal one physical element; "depopulated"
 * removes it (offline depopulation, the capacity shrinks: hosts are told)
 * and waits for the end; "ok" on a depopulated element restores every
 * depopulated element (RESTORE ELEMENTS AND REBUILD).
 */
static int h_element_set(struct rpc_ctx *c)
{
        struct core_ns *ns = core_ns_find(pstr(c, "name", NULL));
        if (!ns)
                return opfail(c, -ENOENT, "element_set", "no such namespace");
        uint32_t id = (uint32_t)puint(c, "element", 0);
        const char *state = pstr(c, "state", NULL);
        json_t *hv = json_object_get(c->params, "health");
        int health = hv ? (int)puint(c, "health", 0) : -1;
        unsigned st = 0;
        while (st < 4 && strcmp(elem_state_names[st], state))
                st++;
        if (st == 4)
                return inval(c, "'state' must be ok, degraded, failed or depopulated");
        char msg[256] = "";
        int rc;
        struct core_elem_info ei;
        if (core_media_element_info(ns, id, &ei))
                return opfail(c, -ENOENT, "element_set",
                              core_media_elements(ns) ? "no such element"
                                                      : "the namespace has no element model "
                                                        "(namespace_set elements)");
        if (st == CORE_ELEM_DEPOPULATED) {
                struct depop_wait w = {.done = false};
                pthread_mutex_init(&w.m, NULL);
                pthread_cond_init(&w.cv, NULL);
                rc = core_media_depopulate(ns, id, NULL, NULL, depop_waited, &w, msg, sizeof(msg));
                if (rc == 0) {
                        pthread_mutex_lock(&w.m);
                        while (!w.done)
                                pthread_cond_wait(&w.cv, &w.m);
                        pthread_mutex_unlock(&w.m);
                        if (!w.ok) {
                                rc = -EIO;
                                snprintf(msg, sizeof(msg), "depopulation failed (see the log)");
                        }
                }
                pthread_cond_destroy(&w.cv);
                pthread_mutex_destroy(&w.m);
        } else if (ei.state == CORE_ELEM_DEPOPULATED && st == CORE_ELEM_OK) {
                rc = core_media_restore(ns, NULL, msg, sizeof(msg));
        } else {
                rc = core_media_set_element(ns, id, (enum core_elem_state)st, health, NULL, msg,
                                            sizeof(msg));
        }
        if (rc < 0)
                return opfail(c, rc, "element_set", msg);
        core_media_element_info(ns, id, &ei);
        c->result = json_pack("{s:s, s:i, s:s, s:i, s:I, s:I}", "name", ns->name, "element",
                              (int)id, "state", elem_state_names[ei.state % 4], "health",
                              (int)ei.health, "capacity_blocks", (json_int_t)ei.capacity_blocks,
                              "num_blocks", (json_int_t)core_ns_blocks(ns));
        return 0;
}

/* media_mark: mark blocks unrecoverable (reads fail with a medium error) or clear the mark. */
static int h_media_mark(struct rpc_ctx *c)
{
        struct core_ns *ns = core_ns_find(pstr(c, "name", NULL));
        if (!ns)
                return opfail(c, -ENOENT, "media_mark", "no such namespace");
        uint64_t lba = puint(c, "lba", 0), n = puint(c, "blocks", 1);
        bool bad = pbool(c, "bad", true);
        if (n == 0 || !core_ns_range_ok(ns, lba, n))
                return inval(c,
                             "'lba' + 'blocks' (%" PRIu64 " + %" PRIu64 ") beyond the %" PRIu64
                             " blocks of the namespace, or 'blocks' 0",
                             lba, n, core_ns_blocks(ns));
        int rc = core_media_mark(ns, lba, n, bad, NULL);
        if (rc == -ENOSPC)
                return opfail(c, rc, "media_mark",
                              "too many separate unrecoverable ranges (at most 1024)");
        if (rc < 0)
                return opfail(c, rc, "media_mark", NULL);
        struct core_media_stats st;
        core_media_get_stats(ns, &st);
        c->result =
            json_pack("{s:s, s:I, s:I, s:b, s:I, s:I}", "name", ns->name, "lba", (json_int_t)lba,
                      "blocks", (json_int_t)n, "bad", bad, "marked_ranges",
                      (json_int_t)st.marked_ranges, "marked_blocks", (json_int_t)st.marked_blocks);
        return 0;
}

static void ns_list_one(struct core_ns *ns, void *arg)
{
        json_t *o = mgmt_ns_params_json(ns);
        if (!o)
                return;
        char u[37];
        uuid_unparse_lower(ns->uuid, u);
        char eui[17];
        snprintf(eui, sizeof(eui), "%016" PRIx64, ns->eui64);
        json_object_set_new(o, "num_blocks", json_integer((json_int_t)ns->num_blocks));
        json_object_set_new(o, "uuid", json_string(u));
        json_object_set_new(o, "eui64", json_string(eui));
        json_object_set_new(o, "write_cache", json_boolean(atomic_load(&ns->wce)));
        json_object_set_new(o, "state", mgmt_ns_state_json(ns));
        json_object_set_new(o, "ana_group", json_integer(core_ns_ana_group(ns)));
        json_object_set_new(o, "media", mgmt_ns_media_json(ns));
        struct core_prov_info pi;
        core_ns_provision_info(ns, &pi);
        json_object_set_new(
            o, "provisioning",
            json_pack("{s:b, s:I, s:I, s:I, s:I, s:I, s:b, s:b}", "tracked", pi.tracked, "limit",
                      (json_int_t)pi.limit, "threshold", (json_int_t)pi.threshold, "mapped_bytes",
                      (json_int_t)pi.mapped, "deallocated_bytes", (json_int_t)pi.deallocated,
                      "available_bytes", (json_int_t)pi.available, "threshold_reached", pi.reached,
                      "pool_bound", pi.pooled));
        json_object_set_new(o, "mapped", json_boolean(iscsi_ns_in_use(ns) || nvme_ns_in_use(ns)));
        struct core_atomic_limits al;
        core_ns_atomic_limits(ns, &al);
        const struct core_atomic_stats *as = &ns->atomic_stats;
        json_object_set_new(o, "atomic",
                            json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "path",
                                      core_atomic_path_name(al.path), "max_bytes",
                                      (json_int_t)al.max_blocks << ns->block_shift,
                                      "scatter_max_ranges", (json_int_t)al.scatter_max_ranges,
                                      "writes", (json_int_t)atomic_load(&as->writes),
                                      "journal_bytes", (json_int_t)atomic_load(&as->journal_bytes),
                                      "journal_syncs", (json_int_t)atomic_load(&as->journal_syncs),
                                      "checkpoints", (json_int_t)atomic_load(&as->checkpoints),
                                      "replayed", (json_int_t)atomic_load(&as->replayed),
                                      "discarded", (json_int_t)atomic_load(&as->discarded),
                                      "native_writes",
                                      (json_int_t)atomic_load(&as->native_writes)));
        struct core_stats_sum st;
        core_stats_sum(&ns->stats, &st);
        json_object_set_new(o, "stats",
                            json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "read_ops",
                                      (json_int_t)st.ops[CORE_OPC_READ], "write_ops",
                                      (json_int_t)st.ops[CORE_OPC_WRITE], "read_bytes",
                                      (json_int_t)st.bytes[CORE_OPC_READ], "write_bytes",
                                      (json_int_t)st.bytes[CORE_OPC_WRITE], "flush_ops",
                                      (json_int_t)st.ops[CORE_OPC_FLUSH], "copy_ops",
                                      (json_int_t)atomic_load(&ns->copy_stats.ops), "copy_bytes",
                                      (json_int_t)atomic_load(&ns->copy_stats.bytes)));
        /* Health counters (SCSI log pages 15h/03h, 0Eh; core/stats.h, core/ns.h). */
        json_t *stj = json_object_get(o, "stats");
        if (stj) {
                json_object_set_new(stj, "misaligned_read_ops",
                                    json_integer((json_int_t)st.misaligned[CORE_OPC_READ]));
                json_object_set_new(stj, "misaligned_write_ops",
                                    json_integer((json_int_t)st.misaligned[CORE_OPC_WRITE]));
                json_object_set_new(stj, "start_stop_cycles",
                                    json_integer((json_int_t)core_ns_start_stop_cycles(ns)));
        }
        json_object_set_new(
            o, "copy",
            json_pack("{s:I, s:I, s:I, s:I}", "ops", (json_int_t)atomic_load(&ns->copy_stats.ops),
                      "bytes", (json_int_t)atomic_load(&ns->copy_stats.bytes), "active_bytes",
                      (json_int_t)atomic_load(&ns->copy_stats.active_bytes), "active_done",
                      (json_int_t)atomic_load(&ns->copy_stats.active_done)));
        json_object_set_new(o, "flash", flash_json(ns));
        json_array_append_new((json_t *)arg, o);
}

static int h_namespace_list(struct rpc_ctx *c)
{
        json_t *a = json_array();
        if (!a)
                return opfail(c, -ENOMEM, "namespace_list", NULL);
        core_ns_foreach(ns_list_one, a);
        c->result = a;
        return 0;
}

/*
 * flash_stats: the flash model of a namespace (core/flash.h): geometry,
 * totals, every placement id in use or ever written (kind, key, bytes per
 * hint, the model's counters), the counters of writes without one, and
 * bytes per access hint.  'placement' narrows it to one id (0 = none).
 */
static int h_flash_stats(struct rpc_ctx *c)
{
        struct core_ns *ns = core_ns_find(pstr(c, "name", NULL));
        if (!ns)
                return opfail(c, -ENOENT, "flash_stats", "no such namespace");
        json_t *o = flash_json(ns);
        json_t *pls = json_array();
        if (!o || !pls) {
                json_decref(o);
                json_decref(pls);
                return opfail(c, -ENOMEM, "flash_stats", NULL);
        }
        json_t *only = json_object_get(c->params, "placement");
        bool model = core_flash_enabled(ns);
        for (unsigned id = 0; id <= CORE_PLACEMENT_MAX; id++) {
                if (only && (json_int_t)id != json_integer_value(only))
                        continue;
                struct core_placement_info pi;
                struct core_flash_stats fs;
                if (id)
                        core_placement_info(ns, (uint16_t)id, &pi);
                else
                        memset(&pi, 0, sizeof(pi));
                if (model)
                        core_flash_stats(ns, (uint16_t)id, &fs);
                if (!only && id && !pi.in_use && !pi.bytes_written && !(model && fs.host_bytes))
                        continue;
                json_t *e = json_pack("{s:i, s:b, s:s, s:I, s:I}", "id", (int)id, "in_use",
                                      id ? pi.in_use : true, "kind",
                                      core_placement_kind_name(pi.kind), "key", (json_int_t)pi.key,
                                      "bytes_written", (json_int_t)pi.bytes_written);
                if (!e)
                        continue;
                json_t *hb = json_object();
                for (unsigned b = 0; b < CORE_HINT_BITS; b++)
                        if (pi.hint_bytes[b])
                                json_object_set_new(hb, core_hint_name(b),
                                                    json_integer((json_int_t)pi.hint_bytes[b]));
                json_object_set_new(e, "hint_bytes", hb);
                if (model) {
                        json_object_set_new(e, "flash", flash_stats_json(&fs));
                        json_object_set_new(
                            e, "ru_remaining_bytes",
                            json_integer((json_int_t)core_flash_ru_remaining(ns, (uint16_t)id)));
                }
                json_array_append_new(pls, e);
        }
        json_object_set_new(o, "placements", pls);
        uint64_t hb[CORE_HINT_BITS];
        core_hint_bytes(ns, hb);
        json_t *h = json_object();
        for (unsigned b = 0; b < CORE_HINT_BITS; b++)
                json_object_set_new(h, core_hint_name(b), json_integer((json_int_t)hb[b]));
        json_object_set_new(o, "hint_bytes", h);
        json_object_set_new(o, "name", json_string(ns->name));
        c->result = o;
        return 0;
}

/* Pools: a limit shared by the thin file namespaces in one directory (core/pool.c). */
static int h_pool_set(struct rpc_ctx *c)
{
        char msg[256] = "";
        const char *dir = pstr(c, "dir", NULL);
        uint64_t limit = psize(c, "limit", 0);
        int rc = core_pool_set(dir, limit, msg, sizeof(msg));
        if (rc < 0)
                return opfail(c, rc, "pool_set", msg);
        c->result = json_pack("{s:s, s:I}", "dir", dir, "limit", (json_int_t)limit);
        return 0;
}

static void pool_one(const struct core_pool_info *pi, void *arg)
{
        json_array_append_new((json_t *)arg,
                              json_pack("{s:s, s:I, s:I, s:I, s:i}", "dir", pi->dir, "limit",
                                        (json_int_t)pi->limit, "mapped_bytes",
                                        (json_int_t)pi->mapped, "available_bytes",
                                        (json_int_t)pi->available, "namespaces", (int)pi->members));
}

static int h_pool_list(struct rpc_ctx *c)
{
        json_t *a = json_array();
        if (!a)
                return opfail(c, -ENOMEM, "pool_list", NULL);
        core_pool_foreach(pool_one, a);
        c->result = a;
        return 0;
}

static int h_iscsi_target_create(struct rpc_ctx *c)
{
        char msg[256] = "";
        int rc = iscsi_target_add(pstr(c, "name", NULL), msg, sizeof(msg));
        return rc < 0 ? opfail(c, rc, "iscsi_target_create", msg) : 0;
}

static int h_iscsi_target_auth(struct rpc_ctx *c)
{
        char msg[256] = "";
        const char *target = pstr(c, "target", NULL);
        int rc = iscsi_auth_set(target, pstr(c, "chap_user", ""), pstr(c, "chap_secret", NULL),
                                pstr(c, "mutual_user", NULL), pstr(c, "mutual_secret", NULL), msg,
                                sizeof(msg));
        if (rc == -EINVAL) {
                snprintf(c->err, c->errlen, "invalid params: %s", msg);
                c->code = RPC_INVALID_PARAMS;
                return rc;
        }
        return rc < 0 ? opfail(c, rc, "iscsi_target_auth", msg) : 0;
}

static int h_iscsi_target_delete(struct rpc_ctx *c)
{
        char msg[256] = "";
        int rc = iscsi_target_del(pstr(c, "name", NULL), msg, sizeof(msg));
        return rc < 0 ? opfail(c, rc, "iscsi_target_delete", msg) : 0;
}

/* A P_LUNS param as the "0,2,4-7" form; NULL when absent, "-" when it cannot be one. */
static const char *luns_param(struct rpc_ctx *c, char *buf, size_t len)
{
        json_t *v = json_object_get(c->params, "luns");
        size_t i, o = 0;
        json_t *e;
        if (!v || json_is_null(v))
                return NULL;
        if (json_is_string(v))
                return json_string_value(v);
        if (json_is_integer(v))
                v = json_pack("[O]", v);
        else
                json_incref(v);
        buf[0] = 0;
        json_array_foreach(v, i, e)
        {
                json_int_t l = json_integer_value(e);
                int n = snprintf(buf + o, len - o, "%s%lld", i ? "," : "", (long long)l);
                if (l < 0 || n < 0 || (size_t)n >= len - o) {
                        json_decref(v);
                        return "-";
                }
                o += (size_t)n;
        }
        json_decref(v);
        return buf;
}

static int h_iscsi_acl_add(struct rpc_ctx *c)
{
        char msg[256] = "", lb[1100];
        int rc = iscsi_acl_add(pstr(c, "target", NULL), pstr(c, "initiator", NULL),
                               luns_param(c, lb, sizeof(lb)), pstr(c, "chap_user", NULL),
                               pstr(c, "chap_secret", NULL), pstr(c, "mutual_user", NULL),
                               pstr(c, "mutual_secret", NULL), msg, sizeof(msg));
        if (rc == -EINVAL) {
                snprintf(c->err, c->errlen, "invalid params: %s", msg);
                c->code = RPC_INVALID_PARAMS;
                return rc;
        }
        return rc < 0 ? opfail(c, rc, "iscsi_acl_add", msg) : 0;
}

static int h_iscsi_acl_remove(struct rpc_ctx *c)
{
        char msg[256] = "";
        int rc =
            iscsi_acl_remove(pstr(c, "target", NULL), pstr(c, "initiator", NULL), msg, sizeof(msg));
        return rc < 0 ? opfail(c, rc, "iscsi_acl_remove", msg) : 0;
}

static int h_iscsi_acl_list(struct rpc_ctx *c)
{
        c->result = iscsi_acl_json(pstr(c, "target", NULL), false);
        return c->result ? 0 : opfail(c, -ENOMEM, "iscsi_acl_list", NULL);
}

static int h_iscsi_target_list(struct rpc_ctx *c)
{
        c->result = iscsi_targets_json();
        return c->result ? 0 : opfail(c, -ENOMEM, "iscsi_target_list", NULL);
}

static int h_iscsi_lun_map(struct rpc_ctx *c)
{
        const char *ns = pstr(c, "namespace", NULL);
        if (!core_ns_find(ns))
                return opfail(c, -ENOENT, "iscsi_lun_map", "no such namespace");
        char msg[256] = "";
        int rc = iscsi_lun_map(pstr(c, "target", NULL), (uint32_t)puint(c, "lun", 0), ns, msg,
                               sizeof(msg));
        return rc < 0 ? opfail(c, rc, "iscsi_lun_map", msg) : 0;
}

static int h_iscsi_lun_unmap(struct rpc_ctx *c)
{
        char msg[256] = "";
        int rc = iscsi_lun_unmap(pstr(c, "target", NULL), (uint32_t)puint(c, "lun", 0), msg,
                                 sizeof(msg));
        return rc < 0 ? opfail(c, rc, "iscsi_lun_unmap", msg) : 0;
}

static int h_iscsi_portal_add(struct rpc_ctx *c)
{
        char msg[256] = "";
        int rc = iscsi_portal_add(pstr(c, "addr", NULL), (uint16_t)puint(c, "port", 3260), msg,
                                  sizeof(msg));
        return rc < 0 ? opfail(c, rc, "iscsi_portal_add", msg) : 0;
}

static int h_iscsi_portal_delete(struct rpc_ctx *c)
{
        char msg[256] = "";
        int rc = iscsi_portal_del(pstr(c, "addr", NULL), (uint16_t)puint(c, "port", 3260), msg,
                                  sizeof(msg));
        return rc < 0 ? opfail(c, rc, "iscsi_portal_delete", msg) : 0;
}

static int h_iscsi_portal_list(struct rpc_ctx *c)
{
        c->result = iscsi_portals_json();
        return c->result ? 0 : opfail(c, -ENOMEM, "iscsi_portal_list", NULL);
}

static int h_iscsi_session_list(struct rpc_ctx *c)
{
        c->result = iscsi_sessions_json();
        return c->result ? 0 : opfail(c, -ENOMEM, "iscsi_session_list", NULL);
}

/* ---- NVMe over Fabrics: subsystems, hosts, namespaces, listeners ---- */

static int h_nvmf_subsystem_create(struct rpc_ctx *c)
{
        char msg[256] = "";
        const char *nqn = pstr(c, "nqn", NULL);
        int rc =
            nvme_subsys_add(nqn, pstr(c, "serial", NULL), pstr(c, "model", NULL), msg, sizeof(msg));
        if (rc == 0)
                rc = pbool(c, "allow_any_host", true)
                         ? nvme_subsys_allow_host(nqn, "*", msg, sizeof(msg))
                         : nvme_subsys_disallow_host(nqn, "*", msg, sizeof(msg));
        if (rc == 0 && pbool(c, "copy_cross_namespace", false))
                rc = nvme_subsys_set_copy_xns(nqn, true, msg, sizeof(msg));
        return rc < 0 ? opfail(c, rc, "nvmf_subsystem_create", msg) : 0;
}

static int h_nvmf_subsystem_delete(struct rpc_ctx *c)
{
        char msg[256] = "";
        int rc = nvme_subsys_del(pstr(c, "nqn", NULL), msg, sizeof(msg));
        if (rc == 0)
                nvmf_tls_subsys_forget(pstr(c, "nqn", NULL));
        return rc < 0 ? opfail(c, rc, "nvmf_subsystem_delete", msg) : 0;
}

static int h_nvmf_subsystem_list(struct rpc_ctx *c)
{
        c->result = nvme_subsystems_json();
        return c->result ? 0 : opfail(c, -ENOMEM, "nvmf_subsystem_list", NULL);
}

static int h_nvmf_subsystem_add_host(struct rpc_ctx *c)
{
        char msg[256] = "";
        const char *nqn = pstr(c, "nqn", NULL), *host = pstr(c, "host", NULL);
        const char *sec = pstr(c, "dhchap_secret", NULL),
                   *csec = pstr(c, "dhchap_ctrl_secret", NULL);
        int rc = 0;
        /*
         * DH-HMAC-CHAP: (re)adding a named host sets its secrets (checked first,
         * so a bad one never leaves the host admitted without them), or clears them.
         */
        if (strcmp(host, "*") != 0)
                rc = nvme_subsys_set_host_key(nqn, host, sec, csec, msg, sizeof(msg));
        else if (sec || csec)
                rc = -EINVAL, snprintf(msg, sizeof(msg), "DH-HMAC-CHAP secrets need a named host");
        /* The TLS PSK likewise: set, or cleared by adding the host without one. */
        const char *psk = pstr(c, "tls_psk", NULL);
        if (rc == 0 && (strcmp(host, "*") != 0 || psk))
                rc = nvmf_tls_host_psk_set(nqn, host, psk, msg, sizeof(msg));
        if (rc < 0)
                return opfail(c, rc, "nvmf_subsystem_add_host", msg);
        rc = nvme_subsys_allow_host(nqn, host, msg, sizeof(msg));
        /* Naming one host means "only the listed ones" unless "*" is listed too. */
        if (rc == 0 && strcmp(host, "*") != 0 && !pbool(c, "keep_any_host", false))
                rc = nvme_subsys_disallow_host(nqn, "*", msg, sizeof(msg));
        return rc < 0 ? opfail(c, rc, "nvmf_subsystem_add_host", msg) : 0;
}

/* "a,b,c" -> up to max names (pointers into buf). */
static unsigned split_names(const char *s, char *buf, size_t buflen, const char **out, unsigned max)
{
        unsigned n = 0;
        if (!s || !s[0])
                return 0;
        snprintf(buf, buflen, "%s", s);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (n <= max) /* out has max + 1 slots; more than max: the callee's error */
                        out[n] = t;
                n++;
        }
        return n;
}

static int h_nvmf_subsystem_auth(struct rpc_ctx *c)
{
        char msg[256] = "", db[128], gb[128];
        const char *d[4], *g[7];
        unsigned nd = split_names(pstr(c, "digests", NULL), db, sizeof(db), d, 3);
        unsigned ng = split_names(pstr(c, "dhgroups", NULL), gb, sizeof(gb), g, 6);
        int rc = nvme_subsys_set_auth(pstr(c, "nqn", NULL), d, nd, g, ng, msg, sizeof(msg));
        return rc < 0 ? opfail(c, rc, "nvmf_subsystem_auth", msg) : 0;
}

static int h_nvmf_subsystem_remove_host(struct rpc_ctx *c)
{
        char msg[256] = "";
        int rc = nvme_subsys_disallow_host(pstr(c, "nqn", NULL), pstr(c, "host", NULL), msg,
                                           sizeof(msg));
        if (rc == 0)
                nvmf_tls_host_psk_set(pstr(c, "nqn", NULL), pstr(c, "host", NULL), NULL, msg,
                                      sizeof(msg));
        return rc < 0 ? opfail(c, rc, "nvmf_subsystem_remove_host", msg) : 0;
}

static int h_nvmf_ns_attach(struct rpc_ctx *c)
{
        char msg[256] = "";
        int rc = nvme_ns_attach(pstr(c, "nqn", NULL), (uint32_t)puint(c, "nsid", 0),
                                pstr(c, "namespace", NULL), msg, sizeof(msg));
        if (rc < 0)
                return opfail(c, rc, "nvmf_ns_attach", msg);
        c->result = json_pack("{s:i}", "nsid", rc); /* the NSID chosen when none was given */
        return 0;
}

static int h_nvmf_ns_detach(struct rpc_ctx *c)
{
        char msg[256] = "";
        int rc =
            nvme_ns_detach(pstr(c, "nqn", NULL), (uint32_t)puint(c, "nsid", 0), msg, sizeof(msg));
        return rc < 0 ? opfail(c, rc, "nvmf_ns_detach", msg) : 0;
}

static int h_nvmf_listener_add(struct rpc_ctx *c)
{
        char msg[256] = "";
        enum nvmf_tls_mode tls;
        if (nvmf_tls_mode_parse(pstr(c, "tls", NULL), &tls) < 0)
                return opfail(c, -EINVAL, "nvmf_listener_add",
                              "tls must be none, required or allowed");
        int rc = nvmf_tcp_listener_add(pstr(c, "addr", NULL), (uint16_t)puint(c, "port", 4420), tls,
                                       msg, sizeof(msg));
        return rc < 0 ? opfail(c, rc, "nvmf_listener_add", msg) : 0;
}

static int h_nvmf_listener_delete(struct rpc_ctx *c)
{
        char msg[256] = "";
        int rc = nvmf_tcp_listener_del(pstr(c, "addr", NULL), (uint16_t)puint(c, "port", 4420), msg,
                                       sizeof(msg));
        return rc < 0 ? opfail(c, rc, "nvmf_listener_delete", msg) : 0;
}

static int h_nvmf_listener_list(struct rpc_ctx *c)
{
        c->result = nvmf_tcp_listeners_json();
        return c->result ? 0 : opfail(c, -ENOMEM, "nvmf_listener_list", NULL);
}

static int h_nvmf_ctrl_list(struct rpc_ctx *c)
{
        c->result = nvme_ctrls_json();
        return c->result ? 0 : opfail(c, -ENOMEM, "nvmf_ctrl_list", NULL);
}

/* ---- Fault injection (core/fault.h): rules, not persisted ---- */

static int h_fault_set(struct rpc_ctx *c)
{
        struct core_fault_rule r;
        char msg[256] = "";
        core_fault_rule_init(&r);
        const char *ns = pstr(c, "namespace", NULL);
        if (ns) {
                if (!core_ns_find(ns))
                        return opfail(c, -ENOENT, "fault_set", "no such namespace");
                snprintf(r.ns, sizeof(r.ns), "%s", ns);
        }
        const char *v;
        if ((v = pstr(c, "host", NULL)))
                snprintf(r.host, sizeof(r.host), "%s", v);
        if ((v = pstr(c, "transport", NULL)))
                snprintf(r.transport, sizeof(r.transport), "%s", v);
        if ((v = pstr(c, "peer", NULL)))
                snprintf(r.peer, sizeof(r.peer), "%s", v);
        if ((v = pstr(c, "ops", NULL)) && core_fault_parse_ops(v, &r.ops, msg, sizeof(msg)) < 0)
                return inval(c, "%s", msg);
        if ((v = pstr(c, "status", NULL)) &&
            core_fault_parse_status(v, &r.status, msg, sizeof(msg)) < 0)
                return inval(c, "%s", msg);
        r.lba_first = puint(c, "lba_first", 0);
        r.lba_last = puint(c, "lba_last", UINT64_MAX);
        r.per_mille = (uint32_t)puint(c, "per_mille", 1000);
        r.every = (uint32_t)puint(c, "every", 0);
        r.seed = puint(c, "seed", 0);
        r.latency_us = (uint32_t)puint(c, "latency_us", 0);
        r.drop = pbool(c, "drop", false);
        r.after = puint(c, "after", 0);
        /* A drop rule drops once unless told otherwise: the host must be able to come back. */
        r.count = puint(c, "count", r.drop ? 1 : 0);
        if (json_object_get(c->params, "per_mille") && json_object_get(c->params, "every"))
                return inval(c, "give per_mille or every, not both");
        uint32_t id;
        int rc = core_fault_add(&r, &id, msg, sizeof(msg));
        if (rc == -EINVAL)
                return inval(c, "%s", msg);
        if (rc < 0)
                return opfail(c, rc, "fault_set", msg);
        c->result = json_pack("{s:i}", "id", (json_int_t)id);
        return c->result ? 0 : opfail(c, -ENOMEM, "fault_set", NULL);
}

static int h_fault_clear(struct rpc_ctx *c)
{
        json_t *idv = json_object_get(c->params, "id");
        bool all = pbool(c, "all", false);
        if ((idv != NULL) == all)
                return inval(c, "give 'id' (one rule) or 'all=true'");
        int rc = core_fault_clear(all ? 0 : (uint32_t)puint(c, "id", 0));
        if (rc < 0)
                return opfail(c, rc, "fault_clear", "no such fault rule");
        c->result = json_pack("{s:i}", "cleared", (json_int_t)rc);
        return c->result ? 0 : opfail(c, -ENOMEM, "fault_clear", NULL);
}

static void fault_one(const struct core_fault_rule *r, void *arg)
{
        static const char *const opn[] = {"read", "write", "flush", "other"};
        char ops[40] = "";
        if (r->ops == CORE_FAULT_OPS_ALL)
                snprintf(ops, sizeof(ops), "all");
        else
                for (unsigned i = 0; i < 4; i++)
                        if (r->ops & (1u << i)) {
                                size_t n = strlen(ops);
                                snprintf(ops + n, sizeof(ops) - n, "%s%s", n ? "," : "", opn[i]);
                        }
        json_t *o =
            json_pack("{s:i, s:s, s:b, s:I, s:I, s:I}", "id", (json_int_t)r->id, "kind",
                      r->drop ? "drop" : "io", "armed", r->armed, "seen", (json_int_t)r->seen,
                      "hits", (json_int_t)r->hits, "count", (json_int_t)r->count);
        if (!o)
                return;
        if (r->ns[0])
                json_object_set_new(o, "namespace", json_string(r->ns));
        if (r->host[0])
                json_object_set_new(o, "host", json_string(r->host));
        if (r->transport[0])
                json_object_set_new(o, "transport", json_string(r->transport));
        if (r->drop) {
                if (r->peer[0])
                        json_object_set_new(o, "peer", json_string(r->peer));
                json_object_set_new(o, "after", json_integer((json_int_t)r->after));
        } else {
                json_object_set_new(o, "ops", json_string(ops));
                json_object_set_new(o, "lba_first", json_integer((json_int_t)r->lba_first));
                if (r->lba_last != UINT64_MAX)
                        json_object_set_new(o, "lba_last", json_integer((json_int_t)r->lba_last));
                if (r->every)
                        json_object_set_new(o, "every", json_integer(r->every));
                else
                        json_object_set_new(o, "per_mille", json_integer(r->per_mille));
                if (r->status != CORE_OK)
                        json_object_set_new(o, "status", json_string(core_status_name(r->status)));
                json_object_set_new(o, "latency_us", json_integer(r->latency_us));
        }
        json_array_append_new(arg, o);
}

static int h_fault_list(struct rpc_ctx *c)
{
        json_t *arr = json_array();
        if (!arr)
                return opfail(c, -ENOMEM, "fault_list", NULL);
        core_fault_foreach(fault_one, arr);
        c->result = arr;
        return 0;
}

/* Write text to path atomically (temp file + rename) so a crash never leaves half a config. */
static int write_file_atomic(const char *path, const char *text)
{
        char tmp[4200];
        if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= sizeof(tmp))
                return -ENAMETOOLONG;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        size_t len = strlen(text), off = 0;
        int rc = 0;
        while (off < len) {
                ssize_t n = write(fd, text + off, len - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        rc = -errno;
                        break;
                }
                off += (size_t)n;
        }
        if (rc == 0 && fsync(fd) < 0)
                rc = -errno;
        close(fd);
        if (rc == 0 && rename(tmp, path) < 0)
                rc = -errno;
        if (rc < 0) {
                unlink(tmp);
                return rc;
        }
        /* The rename itself is durable only once the directory is synced. */
        char dir[4200];
        const char *slash = strrchr(path, '/');
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1,
                 slash ? path : ".");
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        if (fsync(dfd) < 0)
                rc = -errno;
        close(dfd);
        return rc;
}

static int h_config_save(struct rpc_ctx *c)
{
        json_t *cfg = mgmt_config_dump(pbool(c, "include_secrets", false));
        if (!cfg)
                return opfail(c, -ENOMEM, "config_save", NULL);
        const char *path = pstr(c, "path", NULL);
        if (!path) {
                c->result = cfg;
                return 0;
        }
        /* Never replace what is not ours: a symlink's target, a disk's metadata, a foreign file;
         * never write outside the state dir and options.allowed_dirs. */
        char why[PATH_MAX + 256];
        int own = mgmt_path_allowed(path, MGMT_PATH_CONFIG, why, sizeof(why));
        if (own == 0)
                own = mgmt_config_file_is_ours(path, why, sizeof(why));
        if (own < 0) {
                json_decref(cfg);
                return opfail(c, own, "config_save", why);
        }
        char *text = json_dumps(cfg, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        size_t n = json_array_size(json_object_get(cfg, "config"));
        json_decref(cfg);
        if (!text)
                return opfail(c, -ENOMEM, "config_save", NULL);
        size_t tl = strlen(text);
        char *text_nl = realloc(text, tl + 2);
        if (!text_nl) {
                free(text);
                return opfail(c, -ENOMEM, "config_save", NULL);
        }
        text_nl[tl] = '\n';
        text_nl[tl + 1] = '\0';
        int rc = write_file_atomic(path, text_nl);
        free(text_nl);
        if (rc < 0)
                return opfail(c, rc, "config_save", path);
        c->result = json_pack("{s:s, s:I}", "path", path, "entries", (json_int_t)n);
        return 0;
}

/* Every namespace's and host's counters (what the status page plots): slatectl top. */
static int h_stats_get(struct rpc_ctx *c)
{
        c->result = mgmt_status_json();
        return c->result ? 0 : opfail(c, -ENOMEM, "stats_get", NULL);
}

/* Live reconfiguration (reload.c); SIGHUP comes here too (server_main). */
static int h_config_reload(struct rpc_ctx *c)
{
        int rc = mgmt_config_reload(pstr(c, "path", NULL), pbool(c, "dry_run", false), &c->result,
                                    c->err, c->errlen);
        if (rc < 0) {
                c->code = rc == -EINVAL ? RPC_INVALID_PARAMS : RPC_SERVER_ERROR;
                return rc;
        }
        return 0;
}

static json_t *method_json(const struct rpc_method *m)
{
        json_t *ps = json_array();
        for (const struct param_spec *p = m->params; !param_end(m, p); p++)
                json_array_append_new(ps, json_pack("{s:s, s:s, s:b, s:s}", "name", p->name, "type",
                                                    ptype_name(p->type), "required", p->required,
                                                    "desc", p->desc));
        return json_pack("{s:s, s:s, s:o}", "name", m->name, "desc", m->desc, "params", ps);
}

static int h_rpc_list(struct rpc_ctx *c)
{
        bool verbose = pbool(c, "verbose", false);
        json_t *a = json_array();
        for (size_t i = 0; i < rpc_nmethods; i++)
                json_array_append_new(a, verbose ? method_json(&rpc_methods[i])
                                                 : json_string(rpc_methods[i].name));
        c->result = a;
        return 0;
}

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static int rpc_client_count(void);
/* RPC clients closed for idling or stalling (daemon_status). */
static atomic_uint_fast64_t rpc_evicted;

static int h_daemon_status(struct rpc_ctx *c)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double up =
            (double)(now.tv_sec - rpc_t0.tv_sec) + (double)(now.tv_nsec - rpc_t0.tv_nsec) / 1e9;
        unsigned lvl = (unsigned)rt_log_threshold;
        struct rt_bigbuf_stats bb;
        rt_bigbuf_stats(&bb);
        c->result = json_pack(
            "{s:s, s:f, s:i, s:s, s:s, s:i, s:{s:I, s:I, s:I, s:I, s:I, s:i}}", "version",
            SLATE_VERSION, "uptime_s", up, "reactors", (int)rt_count(), "state_dir",
            core_state_dir() ? core_state_dir() : "", "log_level", lvl < 4 ? level_names[lvl] : "?",
            "pid", (int)getpid(), "xfer_pool", "pool_mib", (json_int_t)(bb.pool_bytes >> 20),
            "in_use_bytes", (json_int_t)bb.in_use, "peak_bytes", (json_int_t)bb.peak, "grants",
            (json_int_t)bb.grants, "waits", (json_int_t)bb.waits, "waiting", (int)bb.waiting);
        /* Connections per transport (the RPC socket's own clients too) and the NOP-In pings. */
        uint64_t sent, answered, timeouts;
        iscsi_nop_stats(&sent, &answered, &timeouts);
        if (c->result)
                json_object_set_new(
                    c->result, "connections",
                    json_pack("{s:i, s:i, s:i, s:i, s:I}", "iscsi", (int)iscsi_connections(),
                              "nvme_tcp", (int)nvmf_tcp_connections(), "counted",
                              (int)rt_conn_count(), "rpc", rpc_client_count(), "rpc_closed_idle",
                              (json_int_t)atomic_load(&rpc_evicted)));
        if (c->result)
                json_object_set_new(
                    c->result, "iscsi_nop",
                    json_pack("{s:i, s:i, s:I, s:I, s:I}", "interval_ms",
                              (int)atomic_load(&rt_limits.nop_interval_ms), "timeout_ms",
                              (int)atomic_load(&rt_limits.nop_timeout_ms), "sent", (json_int_t)sent,
                              "answered", (json_int_t)answered, "timeouts", (json_int_t)timeouts));
        /* The HTTP server (metrics, status page) when it runs, with the port it got. */
        if (c->result && mgmt_http_port())
                json_object_set_new(c->result, "http",
                                    json_pack("{s:s, s:i}", "addr", mgmt_http_addr(), "port",
                                              (int)mgmt_http_port()));
        return c->result ? 0 : opfail(c, -ENOMEM, "daemon_status", NULL);
}

static int h_log_set_level(struct rpc_ctx *c)
{
        enum rt_log_level l;
        if (rt_log_parse_level(pstr(c, "level", ""), &l) < 0)
                return inval(c, "'level' must be one of error, warn, info, debug");
        rt_log_threshold = l;
        LOG_INFO("mgmt", "log level set to %s", level_names[l]);
        return 0;
}

static int h_reactor_stats(struct rpc_ctx *c)
{
        c->result = mgmt_reactor_stats_json();
        return c->result ? 0 : opfail(c, -ENOMEM, "reactor_stats", NULL);
}

#define STR(n, req, mx, d)                                                                         \
        {                                                                                          \
                .name = n, .type = P_STR, .required = req, .max = mx, .desc = d                    \
        }
#define UINT(n, req, lo, hi, d)                                                                    \
        {                                                                                          \
                .name = n, .type = P_UINT, .required = req, .min = lo, .max = hi, .desc = d        \
        }
#define BOOL(n, d)                                                                                 \
        {                                                                                          \
                .name = n, .type = P_BOOL, .desc = d                                               \
        }
#define IQN(n, d) STR(n, true, 223, d) /* RFC 7143 13.2: names up to 223 bytes */
#define NQN(n, d) STR(n, true, 223, d) /* NVMe Base 4.5: NQNs up to 223 bytes */

/* The protection information format keys (namespace_create, namespace_format). */
#define PI_PARAMS                                                                                  \
        UINT("pi_type", false, 0, 3,                                                               \
             "protection information type 0-3 (default 0: none; SCSI PROT_EN/P_TYPE, NVMe DPS)"),  \
            UINT("pi_md", false, 0, 16,                                                            \
                 "metadata bytes per protection interval: 8 or 16 (default 8 when pi_type > 0)"),  \
            STR("pi_guard", false, 7,                                                              \
                "guard: crc16 (T10, default) | crc32c | crc64 (NVMe, 16-byte)"),                   \
            UINT("pi_exp", false, 0, CORE_PI_MAX_EXP,                                              \
                 "protection intervals per block as a power of two (SCSI P_I_EXPONENT; default "   \
                 "0)"),                                                                            \
            BOOL("pi_first",                                                                       \
                 "the PI in the first bytes of the metadata (NVMe DPS PIP; default last)"),        \
            UINT("pi_sts", false, 0, 64,                                                           \
                 "storage tag bits of the 32b/64b guard formats (NVMe STS; default 16 with "       \
                 "crc32c, "                                                                        \
                 "else 0)")

static const struct rpc_method rpc_methods[] = {
    {"namespace_create",
     h_namespace_create,
     "Create a namespace (block device), or reopen an existing file-backed one",
     {{.name = "name", .type = P_NAME, .required = true, .desc = "[A-Za-z0-9._-]{1,63}"},
      STR("backend", false, 15,
          "mem | file | null | rbd (default file; rbd: a Ceph RBD image, builds with librbd)"),
      {.name = "size",
       .type = P_SIZE,
       .desc = "capacity in bytes, or \"1G\"-style string (K/M/G/T, binary); "
               "file backend: 0/absent = existing file size"},
      UINT("block_size", false, 512, 4096, "512 or 4096 (default 512)"),
      UINT("physical_block_size", false, 512, 1u << 27,
           "physical block reported to hosts (LBPPBE, NPWG): a power of two, block_size to "
           "block_size x 32768 (default 4096, or block_size if larger)"),
      STR("path", false, 4095,
          "file backend: data file (default <state_dir>/<name>.img; in the state dir or "
          "options.allowed_dirs)"),
      STR("pool", false, 127, "rbd backend: the RADOS pool holding the image"),
      STR("image", false, 127, "rbd backend: the RBD image (must exist: rbd create)"),
      STR("rbd_namespace", false, 127, "rbd backend: the RBD namespace in the pool (optional)"),
      STR("ceph_conf", false, 4095,
          "rbd backend: ceph.conf path (default $CEPH_CONF, /etc/ceph/ceph.conf; path rules of "
          "data files)"),
      STR("client_id", false, 127, "rbd backend: the Ceph client id (default admin)"),
      STR("keyring", false, 4095,
          "rbd backend: the client's keyring path (default from ceph.conf; path rules of data "
          "files; its contents are never logged)"),
      BOOL("shared_reservations",
           "file backend: keep the reservation state next to the data file (<path>.slate-pr) and "
           "share it with every gateway exporting that file (default false)"),
      BOOL("thin", "sparse file (default true)"),
      BOOL("adopt", "file backend: export an existing data file or block device that has no "
                    "metadata yet, with a new identity (default false: refused)"),
      BOOL("write_protect", "software write protect at start (default false)"),
      BOOL("removable", "SCSI removable medium: RMB=1, START STOP UNIT eject/load, "
                        "PREVENT ALLOW MEDIUM REMOVAL (default false)"),
      UINT("sanitize_rate_mibps", false, 0, 1u << 20,
           "pace SANITIZE / NVMe Sanitize to this many MiB/s (default 0: backend speed)"),
      UINT("selftest_rate_mibps", false, 0, 1u << 20,
           "pace SEND DIAGNOSTIC / NVMe Device Self-test reads to this many MiB/s (default 0: "
           "backend speed)"),
      {.name = "provision_limit",
       .type = P_SIZE,
       .desc = "thin: hard limit of allocated space (bytes or \"1G\"); writes needing more "
               "fail (SCSI 27h/07h, NVMe Capacity Exceeded); absent = keep the saved one"},
      {.name = "provision_threshold",
       .type = P_SIZE,
       .desc = "thin: soft threshold of allocated space, a multiple of 1 MiB, <= the limit: "
               "crossing it is a unit attention 38h/07h and an NVMe vendor event"},
      {.name = "atomic_write_max",
       .type = P_SIZE,
       .desc = "largest atomic write in bytes (a multiple of block_size, at most 1 MiB; "
               "default 64K on file and mem, 0 on null); absent = keep the saved one"},
      BOOL("flash_model", "model a NAND drive's erase blocks and garbage collection to count "
                          "write amplification per stream/placement (default false)"),
      {.name = "flash_erase_block",
       .type = P_SIZE,
       .desc = "flash model: erase block (FDP reclaim unit) in bytes, a multiple of the model "
               "unit (default 1M)"},
      UINT("flash_op_percent", false, 0, 400,
           "flash model: over-provisioning in % of the capacity (default 7)"),
      STR("flash_gc", false, 15, "flash model: greedy | cost-benefit (default greedy)"),
      BOOL("fdp", "NVMe Flexible Data Placement on a flash-model namespace (default true); "
                  "false: the NVMe Streams directive may be enabled there instead"),
      UINT("elements", false, 0, CORE_MEDIA_MAX_ELEMENTS,
           "physical elements of the failing-media model (0 = none; absent = keep the saved)"),
      UINT("element_interleave", false, 0, UINT32_MAX,
           "blocks per stripe unit of the element model (default 2048)"),
      BOOL("encrypt", "a new namespace encrypted at rest: AES-256-XTS, a random data key "
                      "wrapped under key_file or passphrase_file (default false)"),
      STR("key_file", false, 4095,
          "encrypted namespace: key-encryption key, 32 raw bytes or 64 hex digits, mode 0600"),
      STR("passphrase_file", false, 4095,
          "encrypted namespace: passphrase (first line, mode 0600) for PBKDF2-HMAC-SHA256"),
      UINT("pbkdf2_iterations", false, 1000, 100000000,
           "PBKDF2 iterations for a new passphrase-wrapped key (default 200000)"),
      UINT("ana_group", false, 1, CORE_ANA_GROUPS,
           "asymmetric access group (NVMe ANAGRPID, SCSI target port group; default 1)"),
      PI_PARAMS}},
    {"namespace_delete",
     h_namespace_delete,
     "Delete a namespace (refused while mapped to a LUN); the data file is kept",
     {{.name = "name", .type = P_NAME, .required = true, .desc = "namespace name"}}},
    {"namespace_list", h_namespace_list, "List namespaces with geometry, identity and stats", {}},
    {"namespace_format",
     h_namespace_format,
     "Format a namespace to a protection information format (data kept, every block's "
     "metadata reset); hosts are told",
     {{.name = "name", .type = P_NAME, .required = true, .desc = "namespace name"}, PI_PARAMS}},
    {"namespace_resize",
     h_namespace_resize,
     "Grow (or, unexported or forced, shrink) a namespace; hosts are told (capacity changed)",
     {{.name = "name", .type = P_NAME, .required = true, .desc = "namespace name"},
      {.name = "size",
       .type = P_SIZE,
       .required = true,
       .desc = "new capacity in bytes, or \"1G\"-style string; a multiple of block_size"},
      BOOL("force", "shrink even while mapped/attached: hosts lose the blocks past the end "
                    "(default false)")}},
    {"namespace_set",
     h_namespace_set,
     "Change a namespace's state at runtime; hosts are told (mode/attribute changed)",
     {{.name = "name", .type = P_NAME, .required = true, .desc = "namespace name"},
      BOOL("write_protect", "management write protect: SCSI DATA PROTECT, NVMe NSATTR"),
      BOOL("write_cache", "volatile write cache enabled (SCSI WCE, NVMe feature 06h)"),
      {.name = "provision_limit",
       .type = P_SIZE,
       .desc = "hard limit of allocated space (bytes or \"1G\"); 0 removes it"},
      {.name = "provision_threshold",
       .type = P_SIZE,
       .desc = "soft threshold of allocated space (multiple of 1 MiB); 0 removes it"},
      {.name = "atomic_write_max",
       .type = P_SIZE,
       .desc = "largest atomic write in bytes (multiple of block_size, <= 1 MiB); 0 = none; "
               "hosts are told (inquiry data / namespace attributes changed)"},
      UINT("elements", false, 0, CORE_MEDIA_MAX_ELEMENTS,
           "physical elements (0 = no model); refused while an element is failed or "
           "depopulated"),
      UINT("element_interleave", false, 0, UINT32_MAX, "blocks per stripe unit"),
      UINT("ana_group", false, 1, CORE_ANA_GROUPS,
           "move to another asymmetric access group (hosts are told: ANA change, 2Ah/06h)")}},
    {"ana_group_set",
     h_ana_group_set,
     "Set an asymmetric access group's state on this gateway (NVMe ANA, SCSI ALUA); hosts "
     "are told",
     {UINT("group", true, 1, CORE_ANA_GROUPS, "access group"),
      STR("state", true, 15,
          "optimized | non-optimized | standby (SCSI; NVMe: inaccessible) | inaccessible | "
          "persistent-loss | transitioning")}},
    {"ana_group_list",
     h_ana_group_list,
     "This gateway's id, controller ID range, the access groups in use or not optimized "
     "(effective and configured state), and the watched peers",
     {}},
    {"ana_peers_set",
     h_ana_peers_set,
     "Watch the other gateways: while every peer listed for a group configured non-optimized "
     "or standby is down, this gateway serves that group optimized (takeover), and gives it back "
     "when one answers again (failback)",
     {STR("peers", false, 1024,
          "HOST:PORT[/G[+G..]] items separated by commas: a TCP port each peer listens on (its "
          "NVMe/TCP listener or iSCSI portal), and the groups it is optimized for (default every "
          "group); absent = none (takeover off)"),
      UINT("interval_ms", false, 10, 600000,
           "probe interval (default 1000); a peer changes verdict after 2 probes in a row")}},
    {"element_set",
     h_element_set,
     "Fail, degrade or heal a physical element, or depopulate it (capacity shrinks)",
     {{.name = "name", .type = P_NAME, .required = true, .desc = "namespace name"},
      UINT("element", true, 1, CORE_MEDIA_MAX_ELEMENTS, "element id (1-based)"),
      STR("state", true, 15,
          "ok | degraded | failed | depopulated (ok on a depopulated element restores all)"),
      UINT("health", false, 0, 0xcf,
           "SBC-4 physical element health 0..207 (default: 1 ok, 100 degraded, 207 failed)")}},
    {"media_mark",
     h_media_mark,
     "Mark blocks unrecoverable (reads fail with a medium error) or clear the mark",
     {{.name = "name", .type = P_NAME, .required = true, .desc = "namespace name"},
      UINT("lba", true, 0, INT64_MAX, "first block"),
      UINT("blocks", false, 1, INT64_MAX, "number of blocks (default 1)"),
      BOOL("bad", "true marks (default), false clears")}},
    {"pool_set",
     h_pool_set,
     "Set the provisioning limit shared by the thin file namespaces in one directory",
     {STR("dir", true, 4095, "the directory of the namespaces' data files (must exist)"),
      {.name = "limit",
       .type = P_SIZE,
       .required = true,
       .desc = "hard limit of the space they allocate together (bytes or \"1G\"); 0 removes it"}}},
    {"flash_stats",
     h_flash_stats,
     "Flash model of a namespace: write amplification, GC, erases, per placement id and hint",
     {{.name = "name", .type = P_NAME, .required = true, .desc = "namespace name"},
      UINT("placement", false, 0, CORE_PLACEMENT_MAX,
           "only this placement id (0 = writes without one)")}},
    {"pool_list", h_pool_list, "List provisioning pools with their limit and usage", {}},
    {"iscsi_target_create",
     h_iscsi_target_create,
     "Create an iSCSI target node",
     {IQN("name", "target name (iqn.YYYY-MM.reverse.domain:id or eui./naa.)")}},
    {"iscsi_target_auth",
     h_iscsi_target_auth,
     "CHAP a login must pass: of a target, or without target of discovery sessions; without "
     "chap_user it is switched off",
     {STR("target", false, 223, "target name; absent: discovery sessions"),
      STR("chap_user", false, 255, "the name the initiator presents (CHAP_N); absent: no CHAP"),
      STR("chap_secret", false, 255, "the initiator's secret, 12-255 bytes; never logged"),
      STR("mutual_user", false, 255, "mutual CHAP: the name the target answers with"),
      STR("mutual_secret", false, 255,
          "mutual CHAP: the target's secret, 12-255 bytes, not the initiator's")}},
    {"iscsi_target_delete",
     h_iscsi_target_delete,
     "Delete an iSCSI target node",
     {IQN("name", "target name")}},
    {"iscsi_target_list", h_iscsi_target_list, "List iSCSI targets and their LUN maps", {}},
    {"iscsi_acl_add",
     h_iscsi_acl_add,
     "Admit an initiator to a target (or replace its entry): a target with entries admits only "
     "them, SendTargets shows it only to them; optionally the LUNs it sees and its own CHAP",
     {IQN("target", "target name"),
      IQN("initiator", "the initiator's iSCSI name (InitiatorName)"),
      {.name = "luns",
       .type = P_LUNS,
       .max = 1024,
       .desc = "the LUNs it sees: \"0,2,4-7\" or [0, 2]; absent: every LUN"},
      STR("chap_user", false, 255, "its own CHAP name (CHAP_N), overriding the target's"),
      STR("chap_secret", false, 255, "its CHAP secret, 12-255 bytes; never logged"),
      STR("mutual_user", false, 255, "mutual CHAP: the name the target answers with"),
      STR("mutual_secret", false, 255,
          "mutual CHAP: the target's secret, 12-255 bytes, not the initiator's")}},
    {"iscsi_acl_remove",
     h_iscsi_acl_remove,
     "Remove an initiator's ACL entry: its sessions close; with the last entry gone the target "
     "is open again",
     {IQN("target", "target name"), IQN("initiator", "the initiator's iSCSI name")}},
    {"iscsi_acl_list",
     h_iscsi_acl_list,
     "List the initiator ACL entries (without secrets)",
     {STR("target", false, 223, "only this target's")}},
    {"iscsi_lun_map",
     h_iscsi_lun_map,
     "Export a namespace as a LUN of a target",
     {IQN("target", "target name"),
      UINT("lun", true, 0, SCSI_MAX_LUNS - 1, "LUN number (0-255)"),
      {.name = "namespace", .type = P_NAME, .required = true, .desc = "namespace name"}}},
    {"iscsi_lun_unmap",
     h_iscsi_lun_unmap,
     "Remove a LUN from a target",
     {IQN("target", "target name"), UINT("lun", true, 0, SCSI_MAX_LUNS - 1, "LUN number")}},
    {"iscsi_portal_add",
     h_iscsi_portal_add,
     "Listen for iSCSI connections on an address and port",
     {STR("addr", true, 63, "IPv4/IPv6 address to bind (0.0.0.0 = all)"),
      UINT("port", false, 0, 65535,
           "TCP port (default 3260; 0: any free port, see iscsi_portal_list)")}},
    {"iscsi_portal_delete",
     h_iscsi_portal_delete,
     "Stop listening on a portal",
     {STR("addr", true, 63, "address"), UINT("port", false, 1, 65535, "TCP port (default 3260)")}},
    {"iscsi_portal_list", h_iscsi_portal_list, "List iSCSI portals", {}},
    {"iscsi_session_list", h_iscsi_session_list, "List iSCSI sessions and connections", {}},
    {"nvmf_subsystem_create",
     h_nvmf_subsystem_create,
     "Create an NVMe subsystem",
     {NQN("nqn", "subsystem NQN (nqn.YYYY-MM.reverse.domain:id)"),
      STR("serial", false, 20, "serial number (default SLATE0000000001)"),
      STR("model", false, 40, "model number"),
      BOOL("allow_any_host", "any host NQN may connect (default true)"),
      BOOL("copy_cross_namespace",
           "Copy formats 2h/3h enabled in new controllers (default false)")}},
    {"nvmf_subsystem_delete",
     h_nvmf_subsystem_delete,
     "Delete an NVMe subsystem (its controllers are torn down)",
     {NQN("nqn", "subsystem NQN")}},
    {"nvmf_subsystem_list",
     h_nvmf_subsystem_list,
     "List NVMe subsystems with hosts and namespaces",
     {}},
    {"nvmf_subsystem_add_host",
     h_nvmf_subsystem_add_host,
     "Allow a host NQN (\"*\" = any); naming a host restricts the subsystem to its list",
     {NQN("nqn", "subsystem NQN"), NQN("host", "host NQN or \"*\""),
      BOOL("keep_any_host", "keep allowing any host as well (default false)"),
      STR("dhchap_secret", false, 255,
          "DH-HMAC-CHAP: the host's secret, DHHC-1:XX:<base64>: (nvme gen-dhchap-key); the host "
          "must authenticate every queue; never logged"),
      STR("dhchap_ctrl_secret", false, 255,
          "DH-HMAC-CHAP bidirectional: the controller's secret, proven to the host"),
      STR("tls_psk", false, 127,
          "NVMe/TCP TLS configured PSK \"NVMeTLSkey-1:HH:<base64>:\" (secret; TLS listeners)")}},
    {"nvmf_subsystem_auth",
     h_nvmf_subsystem_auth,
     "DH-HMAC-CHAP: the hashes and DH groups the controller picks from, in its order of "
     "preference",
     {NQN("nqn", "subsystem NQN"),
      STR("digests", false, 127, "e.g. \"sha384,sha256\" (default sha256,sha384,sha512)"),
      STR("dhgroups", false, 127,
          "e.g. \"ffdhe4096,null\" (default ffdhe2048,ffdhe3072,ffdhe4096,ffdhe6144,ffdhe8192,"
          "null)")}},
    {"nvmf_subsystem_remove_host",
     h_nvmf_subsystem_remove_host,
     "Remove a host NQN from the allowed list (\"*\" = stop allowing any host)",
     {NQN("nqn", "subsystem NQN"), NQN("host", "host NQN or \"*\"")}},
    {"nvmf_ns_attach",
     h_nvmf_ns_attach,
     "Export a namespace under an NSID of a subsystem",
     {NQN("nqn", "subsystem NQN"),
      {.name = "namespace", .type = P_NAME, .required = true, .desc = "namespace name"},
      UINT("nsid", false, 0, 1024, "NSID (1-1024; 0 or absent = next free)")}},
    {"nvmf_ns_detach",
     h_nvmf_ns_detach,
     "Remove an NSID from a subsystem",
     {NQN("nqn", "subsystem NQN"), UINT("nsid", true, 1, 1024, "NSID")}},
    {"nvmf_listener_add",
     h_nvmf_listener_add,
     "Listen for NVMe/TCP connections on an address and port",
     {STR("addr", true, 63, "IPv4/IPv6 address to bind"),
      UINT("port", false, 0, 65535,
           "TCP port (default 4420; 0: any free port, see nvmf_listener_list)"),
      STR("tls", false, 8, "secure channel: none (default), required or allowed (TLS 1.3 PSK)")}},
    {"nvmf_listener_delete",
     h_nvmf_listener_delete,
     "Stop an NVMe/TCP listener",
     {STR("addr", true, 63, "address"), UINT("port", false, 1, 65535, "TCP port (default 4420)")}},
    {"nvmf_listener_list", h_nvmf_listener_list, "List NVMe/TCP listeners", {}},
    {"nvmf_ctrl_list", h_nvmf_ctrl_list, "List NVMe controllers (host, queues, keep-alive)", {}},
    {"config_save",
     h_config_save,
     "Return the running config as a replayable list of calls, or write it to a file",
     {STR("path", false, 4095,
          "write here (atomically; in the state dir or options.allowed_dirs) instead of "
          "returning the config"),
      BOOL("include_secrets", "with the CHAP and DH-HMAC-CHAP secrets (default false: "
                              "iscsi_target_auth, iscsi_acl_add and nvmf_subsystem_add_host "
                              "entries without them, which a replay refuses)")}},
    {"stats_get",
     h_stats_get,
     "Counters of every namespace and host (ops, bytes, latency sums and histograms, errors, "
     "outstanding) and the topology, as the status page shows them",
     {}},
    {"config_reload",
     h_config_reload,
     "Re-read the config file (default: the one slated was started with) and apply the "
     "difference; also done on SIGHUP",
     {STR("path", false, 4095, "config file to read instead"),
      BOOL("dry_run", "only compute and return the steps")}},
    {"fault_set",
     h_fault_set,
     "Inject faults for host testing: fail or delay a namespace's/host's I/O, or drop a "
     "host's connection (not persisted)",
     {{.name = "namespace", .type = P_NAME, .desc = "only I/O to this namespace (default any)"},
      STR("host", false, CORE_FAULT_NAME_MAX - 1,
          "only this host: iSCSI initiator name or NVMe host NQN (default any)"),
      STR("transport", false, 7, "only this transport: iscsi | nvme (default both)"),
      STR("ops", false, 64, "comma list of read, write, flush, other, all (default all)"),
      UINT("lba_first", false, 0, INT64_MAX, "first LBA of the range hit (default 0)"),
      UINT("lba_last", false, 0, INT64_MAX, "last LBA of the range hit (default the end)"),
      UINT("per_mille", false, 0, 1000, "fraction of selected I/Os hit, per mille (default 1000)"),
      UINT("every", false, 1, UINT32_MAX, "hit every Nth selected I/O instead of a fraction"),
      UINT("seed", false, 0, INT64_MAX, "seed of the fraction's PRNG (default: from the clock)"),
      STR("status", false, 63,
          "core status a hit finishes with: medium-error, write-error, not-ready, aborted, "
          "internal-error, ... (default none: latency only)"),
      UINT("latency_us", false, 0, CORE_FAULT_MAX_LATENCY_US,
           "microseconds a hit waits before it runs/fails (on a reactor timer)"),
      BOOL("drop", "drop the connection of a matching host instead (connection rule)"),
      STR("peer", false, CORE_FAULT_PEER_MAX - 1,
          "drop: only connections from this address (addr or addr:port)"),
      UINT("after", false, 0, INT64_MAX,
           "drop: after this many commands on matching connections (default 0: at the next PDU)"),
      UINT("count", false, 0, INT64_MAX,
           "disarm after this many hits; 0 = never (default 0, drop rules 1)")}},
    {"fault_clear",
     h_fault_clear,
     "Remove one fault rule, or all",
     {UINT("id", false, 1, UINT32_MAX, "the rule's id (fault_set / fault_list)"),
      BOOL("all", "remove every rule")}},
    {"fault_list", h_fault_list, "List fault rules with what they selected (seen) and hit", {}},
    {"rpc_list",
     h_rpc_list,
     "List RPC methods",
     {BOOL("verbose", "include descriptions and parameters")}},
    {"daemon_status",
     h_daemon_status,
     "Version, uptime, reactors, state dir, log level, large-transfer buffer pool, HTTP server, "
     "connections per transport, iSCSI NOP-In pings",
     {}},
    {"reactor_stats",
     h_reactor_stats,
     "Per-reactor counters: io_uring_enter calls (submit-only / wait), wake-ups, SQEs, CQEs, "
     "recv/send calls and bytes, bytes copied per site, commands completed per transport",
     {}},
    {"log_set_level",
     h_log_set_level,
     "Set the log level",
     {STR("level", true, 15, "error | warn | info | debug")}},
};
static const size_t rpc_nmethods = sizeof(rpc_methods) / sizeof(rpc_methods[0]);

/* ------------------------------------------------------------------ */
/* Dispatch                                                            */
/* ------------------------------------------------------------------ */

int mgmt_rpc_check(const char *method, json_t *params, char *err, size_t errlen)
{
        const struct rpc_method *m = NULL;
        for (size_t i = 0; i < rpc_nmethods; i++)
                if (strcmp(rpc_methods[i].name, method) == 0)
                        m = &rpc_methods[i];
        if (!m) {
                snprintf(err, errlen, "method not found: '%.64s'", method);
                return -ENOENT;
        }
        struct rpc_ctx c = {.params = params, .err = err, .errlen = errlen};
        if (!json_is_object(params))
                return inval(&c, "params must be an object (named parameters)");
        return check_params(m, &c);
}

int mgmt_rpc_call(const char *method, json_t *params, json_t **result, int *rpc_code, char *err,
                  size_t errlen)
{
        const struct rpc_method *m = NULL;
        *result = NULL;
        *rpc_code = 0;
        if (errlen)
                err[0] = '\0';
        for (size_t i = 0; i < rpc_nmethods; i++) {
                if (strcmp(rpc_methods[i].name, method) == 0) {
                        m = &rpc_methods[i];
                        break;
                }
        }
        if (!m) {
                snprintf(err, errlen, "method not found: '%.64s'", method);
                *rpc_code = RPC_METHOD_NOT_FOUND;
                return -ENOENT;
        }

        json_t *empty = NULL;
        if (!params || json_is_null(params)) {
                params = empty = json_object();
                if (!params) {
                        snprintf(err, errlen, "out of memory");
                        *rpc_code = RPC_SERVER_ERROR;
                        return -ENOMEM;
                }
        }
        struct rpc_ctx c = {.params = params, .err = err, .errlen = errlen};
        int rc;
        if (!json_is_object(params)) {
                /* We only take named parameters (JSON-RPC 2.0 section 4.2 allows either). */
                rc = inval(&c, "params must be an object (named parameters)");
                goto out;
        }
        rc = check_params(m, &c);
        if (rc < 0)
                goto out;
        pthread_mutex_lock(&rpc_lock);
        rc = m->fn(&c);
        pthread_mutex_unlock(&rpc_lock);
        if (rc < 0) {
                json_decref(c.result);
                if (!c.code)
                        opfail(&c, rc, m->name, NULL);
                goto out;
        }
        *result = c.result ? c.result : json_true();
out:
        json_decref(empty);
        *rpc_code = rc < 0 ? c.code : 0;
        return rc;
}

static json_t *make_error(json_t *id, int code, const char *msg)
{
        return json_pack("{s:s, s:{s:i, s:s}, s:O}", "jsonrpc", "2.0", "error", "code", code,
                         "message", msg, "id", id ? id : json_null());
}

/* One request object -> one response object (new reference), or NULL for a notification. */
static json_t *handle_one(json_t *req)
{
        if (!json_is_object(req))
                return make_error(NULL, RPC_INVALID_REQUEST, "invalid request: not an object");
        json_t *id = json_object_get(req, "id");
        bool notification = (id == NULL);
        if (id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id) &&
            !json_is_real(id))
                return make_error(NULL, RPC_INVALID_REQUEST,
                                  "invalid request: 'id' must be a string, number or null");
        json_t *ver = json_object_get(req, "jsonrpc");
        if (!json_is_string(ver) || strcmp(json_string_value(ver), "2.0") != 0)
                return make_error(id, RPC_INVALID_REQUEST,
                                  "invalid request: 'jsonrpc' must be \"2.0\"");
        json_t *jm = json_object_get(req, "method");
        if (!json_is_string(jm))
                return make_error(id, RPC_INVALID_REQUEST,
                                  "invalid request: 'method' must be a string");
        const char *key;
        json_t *v;
        json_object_foreach(req, key, v)
        {
                if (strcmp(key, "jsonrpc") && strcmp(key, "id") && strcmp(key, "method") &&
                    strcmp(key, "params"))
                        return make_error(id, RPC_INVALID_REQUEST,
                                          "invalid request: unknown member");
        }
        json_t *params = json_object_get(req, "params");
        if (params && !json_is_object(params) && !json_is_array(params))
                return make_error(id, RPC_INVALID_REQUEST,
                                  "invalid request: 'params' must be an object");

        char err[512];
        json_t *result = NULL;
        int code = 0;
        const char *method = json_string_value(jm);
        if (strlen(method) != json_string_length(jm)) {
                code = RPC_METHOD_NOT_FOUND;
                snprintf(err, sizeof(err), "method not found");
        } else if (mgmt_rpc_call(method, params, &result, &code, err, sizeof(err)) == 0) {
                if (notification) {
                        json_decref(result);
                        return NULL;
                }
                return json_pack("{s:s, s:o, s:O}", "jsonrpc", "2.0", "result", result, "id", id);
        }
        LOG_DEBUG("mgmt", "rpc %.64s failed: %s", method, err);
        return notification ? NULL : make_error(id, code, err);
}

static json_t *handle_value(json_t *req)
{
        if (!json_is_array(req))
                return handle_one(req);
        /* Batch (JSON-RPC 2.0 section 6). */
        if (json_array_size(req) == 0)
                return make_error(NULL, RPC_INVALID_REQUEST, "invalid request: empty batch");
        json_t *out = json_array();
        size_t i;
        json_t *r;
        json_array_foreach(req, i, r)
        {
                json_t *resp = handle_one(r);
                if (resp)
                        json_array_append_new(out, resp);
        }
        if (json_array_size(out) == 0) {
                json_decref(out);
                return NULL;
        }
        return out;
}

static char *dump_response(json_t *resp)
{
        if (!resp)
                return NULL;
        char *s = json_dumps(resp, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(resp);
        return s;
}

char *mgmt_rpc_handle(const char *req, size_t len)
{
        if (len > MGMT_RPC_MAX_REQ)
                return dump_response(
                    make_error(NULL, RPC_INVALID_REQUEST, "invalid request: larger than 1 MiB"));
        json_error_t je;
        json_t *v = json_loadb(req, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
        if (!v) {
                char msg[256];
                snprintf(msg, sizeof(msg), "parse error: %s at byte %d", je.text, je.position);
                return dump_response(make_error(NULL, RPC_PARSE_ERROR, msg));
        }
        char *s = dump_response(handle_value(v));
        json_decref(v);
        return s;
}

/* ------------------------------------------------------------------ */
/* Server                                                              */
/* ------------------------------------------------------------------ */

struct rpc_client {
        int fd;
        char *in;
        size_t in_len, in_cap;
        char *out;
        size_t out_len, out_off;
        bool closing;              /* close once out is drained */
        struct timespec last;      /* last progress, for the idle timeout */
        struct timespec req_start; /* first byte of the request being received */
        struct timespec last_req;  /* connected, or the last request answered: idleness */
        /* Framing scanner over in[0..in_len): bytes before scan_pos are scanned. */
        size_t scan_pos;
        int depth; /* open { and [ outside strings */
        char mode; /* 0 = before the value, 'S' = object/array, 'L' = anything else */
        bool in_str, esc;
};

static struct {
        int listen_fd;
        int wake[2];
        int reload_fd; /* eventfd: SIGHUP asks for a reload (mgmt_rpc_request_reload) */
        pthread_t thread;
        bool running;
        char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
        struct rpc_client clients[MGMT_RPC_MAX_CLIENTS];
} srv = {.listen_fd = -1, .wake = {-1, -1}, .reload_fd = -1};

/* Clients connected to the RPC socket now (read on the server thread, or racily: a count). */
static int rpc_client_count(void)
{
        int n = 0;
        for (int i = 0; i < MGMT_RPC_MAX_CLIENTS; i++)
                if (srv.running && srv.clients[i].fd >= 0)
                        n++;
        return n;
}

void mgmt_rpc_request_reload(void)
{
        uint64_t one = 1;
        if (srv.reload_fd >= 0)
                (void)!write(srv.reload_fd, &one, sizeof(one));
}

/* The SIGHUP reload, on this (the control-path) thread like any RPC. */
static void server_reload(void)
{
        uint64_t n;
        if (read(srv.reload_fd, &n, sizeof(n)) != sizeof(n))
                return;
        json_t *res = NULL;
        int code;
        char err[1024];
        LOG_INFO("mgmt", "SIGHUP: reloading the config");
        if (mgmt_rpc_call("config_reload", NULL, &res, &code, err, sizeof(err)) < 0)
                LOG_ERR("mgmt", "SIGHUP reload failed: %s", err);
        json_decref(res);
}

static int64_t ms_since(const struct timespec *t)
{
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (int64_t)(now.tv_sec - t->tv_sec) * 1000 + (now.tv_nsec - t->tv_nsec) / 1000000;
}

static void client_close(struct rpc_client *cl)
{
        if (cl->fd >= 0)
                close(cl->fd);
        free(cl->in);
        free(cl->out);
        memset(cl, 0, sizeof(*cl));
        cl->fd = -1;
}

static void client_queue(struct rpc_client *cl, char *resp)
{
        if (!resp)
                return;
        size_t n = strlen(resp);
        size_t pending = cl->out_len - cl->out_off;
        char *nb = malloc(pending + n + 1);
        if (!nb) {
                free(resp);
                cl->closing = true;
                return;
        }
        if (pending)
                memcpy(nb, cl->out + cl->out_off, pending);
        memcpy(nb + pending, resp, n);
        nb[pending + n] = '\n';
        free(resp);
        free(cl->out);
        cl->out = nb;
        cl->out_off = 0;
        cl->out_len = pending + n + 1;
}

static void client_consume(struct rpc_client *cl, size_t n)
{
        memmove(cl->in, cl->in + n, cl->in_len - n);
        cl->in_len -= n;
        clock_gettime(CLOCK_MONOTONIC, &cl->req_start); /* what is left starts the next request */
        cl->scan_pos = 0;
        cl->depth = 0;
        cl->mode = 0;
        cl->in_str = cl->esc = false;
}

static void client_reject_oversize(struct rpc_client *cl)
{
        client_queue(cl, dump_response(make_error(NULL, RPC_INVALID_REQUEST,
                                                  "invalid request: larger than 1 MiB")));
        cl->closing = true;
        cl->in_len = 0;
}

/*
 * Find and answer every complete request in the input buffer.  A request
 * is an object or array (ends when its brackets balance, outside strings:
 * so requests may be concatenated, newline-separated or not) or, for
 * anything else, one line.  Each byte is scanned once, so a client
 * dribbling a large request byte by byte costs linear time, and the
 * framed text then goes through mgmt_rpc_handle() like any other.
 */
static void client_process(struct rpc_client *cl)
{
        while (!cl->closing && cl->scan_pos < cl->in_len) {
                size_t i = cl->scan_pos, end = 0;
                if (cl->mode == 0) {
                        while (i < cl->in_len && isspace((unsigned char)cl->in[i]))
                                i++;
                        if (i) {
                                client_consume(cl, i);
                                continue;
                        }
                        cl->mode = (cl->in[0] == '{' || cl->in[0] == '[') ? 'S' : 'L';
                }
                for (; i < cl->in_len && !end; i++) {
                        char ch = cl->in[i];
                        if (cl->mode == 'L') {
                                if (ch == '\n')
                                        end = i + 1;
                        } else if (cl->in_str) {
                                if (cl->esc)
                                        cl->esc = false;
                                else if (ch == '\\')
                                        cl->esc = true;
                                else if (ch == '"')
                                        cl->in_str = false;
                        } else if (ch == '"') {
                                cl->in_str = true;
                        } else if (ch == '{' || ch == '[') {
                                cl->depth++;
                        } else if ((ch == '}' || ch == ']') && --cl->depth <= 0) {
                                end = i + 1;
                        }
                }
                cl->scan_pos = i;
                if (!end) {
                        if (cl->in_len > MGMT_RPC_MAX_REQ)
                                client_reject_oversize(cl);
                        return; /* wait for more bytes */
                }
                if (end > MGMT_RPC_MAX_REQ) {
                        client_reject_oversize(cl);
                        return;
                }
                client_queue(cl, mgmt_rpc_handle(cl->in, end));
                clock_gettime(CLOCK_MONOTONIC, &cl->last_req);
                client_consume(cl, end);
        }
}

static void client_read(struct rpc_client *cl)
{
        if (cl->in_cap - cl->in_len < 4096) {
                size_t ncap = cl->in_cap ? cl->in_cap * 2 : 8192;
                if (ncap > MGMT_RPC_MAX_REQ + 8192)
                        ncap = MGMT_RPC_MAX_REQ + 8192;
                char *nb = ncap > cl->in_len ? realloc(cl->in, ncap) : NULL;
                if (!nb) {
                        client_reject_oversize(cl);
                        return;
                }
                cl->in = nb;
                cl->in_cap = ncap;
        }
        ssize_t n = recv(cl->fd, cl->in + cl->in_len, cl->in_cap - cl->in_len, MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        if (n <= 0) {
                /* Peer closed its side: answer what is buffered (a last unterminated line too). */
                client_process(cl);
                if (cl->in_len && !cl->closing)
                        client_queue(cl, mgmt_rpc_handle(cl->in, cl->in_len));
                cl->in_len = 0;
                cl->closing = true;
                return;
        }
        if (cl->in_len == 0)
                clock_gettime(CLOCK_MONOTONIC, &cl->req_start);
        cl->in_len += (size_t)n;
        clock_gettime(CLOCK_MONOTONIC, &cl->last);
        client_process(cl);
}

static void client_write(struct rpc_client *cl)
{
        while (cl->out_off < cl->out_len) {
                ssize_t n = send(cl->fd, cl->out + cl->out_off, cl->out_len - cl->out_off,
                                 MSG_DONTWAIT | MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        client_close(cl);
                        return;
                }
                cl->out_off += (size_t)n;
                clock_gettime(CLOCK_MONOTONIC, &cl->last);
        }
        free(cl->out);
        cl->out = NULL;
        cl->out_len = cl->out_off = 0;
}

static void server_accept(void)
{
        int fd = accept4(srv.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
                return;
        for (int i = 0; i < MGMT_RPC_MAX_CLIENTS; i++) {
                struct rpc_client *cl = &srv.clients[i];
                if (cl->fd < 0) {
                        cl->fd = fd;
                        clock_gettime(CLOCK_MONOTONIC, &cl->last);
                        cl->last_req = cl->last;
                        return;
                }
        }
        /* Every slot taken: the longest-idle client (no request, no answer pending) makes room. */
        struct rpc_client *victim = NULL;
        int64_t quiet = -1;
        for (int i = 0; i < MGMT_RPC_MAX_CLIENTS; i++) {
                struct rpc_client *cl = &srv.clients[i];
                if (cl->in_len || cl->out_len || cl->closing)
                        continue;
                int64_t q = ms_since(&cl->last_req);
                if (q > quiet) {
                        quiet = q;
                        victim = cl;
                }
        }
        if (victim) {
                LOG_INFO("mgmt", "rpc: %d clients connected, the one idle for %lld ms is closed",
                         MGMT_RPC_MAX_CLIENTS, (long long)quiet);
                atomic_fetch_add(&rpc_evicted, 1);
                client_close(victim);
                victim->fd = fd;
                clock_gettime(CLOCK_MONOTONIC, &victim->last);
                victim->last_req = victim->last;
                return;
        }
        static const char busy[] =
            "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32000,\"message\":\"too many RPC "
            "clients\"},\"id\":null}\n";
        (void)!send(fd, busy, sizeof(busy) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
        close(fd);
}

static void *server_main(void *arg)
{
        (void)arg;
        struct pollfd pfd[MGMT_RPC_MAX_CLIENTS + 3];
        int map[MGMT_RPC_MAX_CLIENTS + 3];

        for (;;) {
                int n = 0;
                pfd[n++] = (struct pollfd){.fd = srv.wake[0], .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = srv.listen_fd, .events = POLLIN};
                pfd[n++] = (struct pollfd){.fd = srv.reload_fd, .events = POLLIN};
                for (int i = 0; i < MGMT_RPC_MAX_CLIENTS; i++) {
                        struct rpc_client *cl = &srv.clients[i];
                        if (cl->fd < 0)
                                continue;
                        if (cl->closing && cl->out_off >= cl->out_len) {
                                client_close(cl);
                                continue;
                        }
                        /*
                         * A request not complete MGMT_RPC_IDLE_MS after its first
                         * byte, or an answer not read for as long, drops the client;
                         * an idle one goes after options.rpc_idle_timeout_ms (and
                         * to make room when every slot is taken, server_accept), so
                         * stalled clients cannot hold every slot.
                         */
                        const char *why = NULL;
                        uint32_t idle = atomic_load(&rt_limits.rpc_idle_timeout_ms);
                        if (cl->in_len && ms_since(&cl->req_start) > MGMT_RPC_IDLE_MS)
                                why = "request not complete in 10 s";
                        else if ((cl->out_len || cl->closing) &&
                                 ms_since(&cl->last) > MGMT_RPC_IDLE_MS)
                                why = "answer not read in 10 s";
                        else if (!cl->in_len && !cl->out_len && idle &&
                                 ms_since(&cl->last_req) > idle)
                                why = "idle (options.rpc_idle_timeout_ms)";
                        if (why) {
                                LOG_INFO("mgmt", "rpc client closed: %s", why);
                                atomic_fetch_add(&rpc_evicted, 1);
                                client_close(cl);
                                continue;
                        }
                        short ev = cl->closing ? 0 : POLLIN;
                        if (cl->out_off < cl->out_len)
                                ev |= POLLOUT;
                        map[n] = i;
                        pfd[n++] = (struct pollfd){.fd = cl->fd, .events = ev};
                }
                int rc = poll(pfd, (nfds_t)n, 1000);
                if (rc < 0 && errno != EINTR) {
                        LOG_ERR("mgmt", "rpc poll: %s", strerror(errno));
                        break;
                }
                if (rc <= 0)
                        continue;
                if (pfd[0].revents)
                        break; /* mgmt_rpc_stop() */
                if (pfd[2].revents & POLLIN)
                        server_reload();
                for (int k = 3; k < n; k++) {
                        struct rpc_client *cl = &srv.clients[map[k]];
                        if (cl->fd < 0 || !pfd[k].revents)
                                continue;
                        if (pfd[k].revents & POLLIN)
                                client_read(cl);
                        if (cl->fd >= 0 && (pfd[k].revents & (POLLERR | POLLNVAL)) &&
                            !(pfd[k].revents & POLLIN)) {
                                client_close(cl);
                                continue;
                        }
                        if (cl->fd >= 0 && cl->out_off < cl->out_len)
                                client_write(cl);
                        if (cl->fd >= 0 && (pfd[k].revents & POLLHUP) && !(pfd[k].revents & POLLIN))
                                client_close(cl);
                }
                /* Last: an eviction must not hand the old client's revents to the new one. */
                if (pfd[1].revents & POLLIN)
                        server_accept();
        }
        for (int i = 0; i < MGMT_RPC_MAX_CLIENTS; i++)
                if (srv.clients[i].fd >= 0)
                        client_close(&srv.clients[i]);
        return NULL;
}

/* Is someone already serving on path?  (A stale socket file is removed.) */
static int claim_socket_path(const char *path)
{
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISSOCK(st.st_mode))
                return -EEXIST;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        memcpy(sa.sun_path, path, strlen(path));
        int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        close(fd);
        if (rc == 0)
                return -EADDRINUSE;
        unlink(path);
        return 0;
}

int mgmt_rpc_start(const char *sock_path)
{
        int rc;
        if (srv.running)
                return -EALREADY;
        if (!sock_path || !sock_path[0] || strlen(sock_path) >= sizeof(srv.path))
                return -ENAMETOOLONG;
        for (int i = 0; i < MGMT_RPC_MAX_CLIENTS; i++)
                srv.clients[i].fd = -1;
        rc = claim_socket_path(sock_path);
        if (rc < 0) {
                LOG_ERR("mgmt", "rpc socket %s: %s", sock_path,
                        rc == -EADDRINUSE ? "another slated is already listening there"
                                          : strerror(-rc));
                return rc;
        }
        srv.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (srv.listen_fd < 0)
                return -errno;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        memcpy(sa.sun_path, sock_path, strlen(sock_path));
        /* Only the owner may manage the daemon. */
        mode_t old = umask(0077);
        rc = bind(srv.listen_fd, (struct sockaddr *)&sa, sizeof(sa));
        umask(old);
        if (rc < 0 || listen(srv.listen_fd, 16) < 0) {
                rc = -errno;
                LOG_ERR("mgmt", "rpc socket %s: %s", sock_path, strerror(-rc));
                goto err_sock;
        }
        snprintf(srv.path, sizeof(srv.path), "%s", sock_path);
        if (pipe2(srv.wake, O_CLOEXEC) < 0) {
                rc = -errno;
                goto err_bound;
        }
        srv.reload_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (srv.reload_fd < 0) {
                rc = -errno;
                close(srv.wake[0]);
                close(srv.wake[1]);
                srv.wake[0] = srv.wake[1] = -1;
                goto err_bound;
        }
        rc = -pthread_create(&srv.thread, NULL, server_main, NULL);
        if (rc < 0)
                goto err_pipe;
        pthread_setname_np(srv.thread, "slate-rpc");
        srv.running = true;
        LOG_INFO("mgmt", "JSON-RPC listening on %s", sock_path);
        return 0;

err_pipe:
        close(srv.reload_fd);
        srv.reload_fd = -1;
        close(srv.wake[0]);
        close(srv.wake[1]);
        srv.wake[0] = srv.wake[1] = -1;
err_bound:
        unlink(sock_path);
err_sock:
        close(srv.listen_fd);
        srv.listen_fd = -1;
        return rc;
}

void mgmt_rpc_stop(void)
{
        if (!srv.running)
                return;
        (void)!write(srv.wake[1], "x", 1);
        pthread_join(srv.thread, NULL);
        close(srv.wake[0]);
        close(srv.wake[1]);
        srv.wake[0] = srv.wake[1] = -1;
        close(srv.reload_fd);
        srv.reload_fd = -1;
        close(srv.listen_fd);
        srv.listen_fd = -1;
        unlink(srv.path);
        srv.running = false;
}
