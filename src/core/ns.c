/*
 * Namespaces: the registry, creation/reopen, and persistent metadata.
 *
 * Each namespace keeps its identity (a UUID generated once with libuuid),
 * geometry (resizes included), NVMe permanent write protection (optional
 * "wp_permanent"; "wp_power_cycle_run" keeps Until Power Cycle across a
 * delete and reopen within one run) and reservation state in
 * "<state_dir>/<name>.meta.json" beside its data.  The file holds {"body": {...}, "crc32c": N}: the
 * checksum is over the body serialised compactly with sorted keys, so a torn or edited file is
 * detected.  Writes go to a temporary file, fsync, rename, fsync of the directory, so a crash
 * leaves either the old or the new version.
 */
#include "core/ns.h"
#include "core/ana.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "core/atomic.h"
#include "core/crypt.h"
#include "core/media.h"
#include "core/pool.h"
#include "core/provision.h"
#include "core/sanitize.h"
#include "rt/crc.h"
#include "rt/log.h"

#define META_VERSION 1

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct core_ns *registry;
static char state_dir[2048] = "./state";

void core_set_state_dir(const char *dir)
{
        snprintf(state_dir, sizeof(state_dir), "%s", dir);
}

const char *core_state_dir(void)
{
        return state_dir;
}

static bool name_ok(const char *n)
{
        size_t len = n ? strlen(n) : 0;
        if (len == 0 || len >= CORE_NS_NAME_MAX)
                return false;
        for (size_t i = 0; i < len; i++) {
                char c = n[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return n[0] != '.';
}

static void derive_ids(struct core_ns *ns)
{
        /* EUI-64: CID in the top 24 bits, 40 random bits of the UUID's node field. */
        uint64_t low = 0;
        for (int i = 11; i < 16; i++)
                low = (low << 8) | ns->uuid[i];
        ns->eui64 = ((uint64_t)CORE_COMPANY_ID << 40) | low;
}

/*
 * This daemon run, as NVMe Write Protect Until Power Cycle sees it: the
 * reason is saved with the run's id, so a namespace deleted and reopened
 * within the run keeps it and only a restart of slated (the "power cycle")
 * drops it.
 */
static char run_id[37];
static void make_run_id(void)
{
        uuid_t u;
        uuid_generate_random(u);
        uuid_unparse_lower(u, run_id);
}
static const char *this_run(void)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, make_run_id);
        return run_id;
}

static json_t *meta_body(struct core_ns *ns)
{
        char u[37];
        uuid_unparse_lower(ns->uuid, u);
        json_t *b = json_pack("{s:i, s:s, s:s, s:s, s:s, s:I, s:I, s:b}", "version", META_VERSION,
                              "name", ns->name, "uuid", u, "backend", ns->backend_name, "path",
                              ns->path, "block_size", (json_int_t)ns->block_size, "num_blocks",
                              (json_int_t)core_ns_blocks(ns), "thin", ns->thin);
        if (!b)
                return NULL;
        /* Optional: NVMe Permanent Write Protect; Until Power Cycle for this run only. */
        if (core_ns_wp(ns) & CORE_WP_PERMANENT)
                json_object_set_new(b, "wp_permanent", json_true());
        if (core_ns_wp(ns) & CORE_WP_POWER_CYCLE)
                json_object_set_new(b, "wp_power_cycle_run", json_string(this_run()));
        json_t *pr = core_pr_to_json(&ns->pr);
        if (pr)
                json_object_set_new(b, "pr", pr);
        json_t *san = core_sanitize_to_json(ns); /* optional: absent = never sanitized */
        if (san)
                json_object_set_new(b, "sanitize", san);
        json_t *prov = core_prov_to_json(ns); /* optional: absent = no limit, no threshold */
        if (prov)
                json_object_set_new(b, "provision", prov);
        /* Optional: absent = never stopped. */
        if (core_ns_start_stop_cycles(ns))
                json_object_set_new(b, "start_stop_cycles",
                                    json_integer((json_int_t)core_ns_start_stop_cycles(ns)));
        /* Optional: absent = the backend's default (core/atomic.h). */
        json_object_set_new(b, "atomic_write_max",
                            json_integer((json_int_t)atomic_load(&ns->atomic_max_bytes)));
        /* Kept with the data instead (crypt_with_data): never a copy here that an erase
         * through another gateway would leave behind. */
        if (ns->crypt && !(ns->be.ops && ns->be.ops->meta_store))
                json_object_set_new(b, "crypt", core_crypt_to_json(ns->crypt));
        json_t *media = core_media_to_json(ns); /* optional: absent = never used */
        if (media)
                json_object_set_new(b, "media", media);
        json_t *pi =
            core_ns_pi_to_json(&ns->pi); /* optional: absent = no metadata (core/pi_ns.c) */
        if (pi)
                json_object_set_new(b, "pi", pi);
        return b;
}

static int fsync_dir(const char *path)
{
        char dir[4096];
        snprintf(dir, sizeof(dir), "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash)
                *slash = 0;
        else
                snprintf(dir, sizeof(dir), ".");
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        int rc = fsync(fd) ? -errno : 0;
        close(fd);
        return rc;
}

int core_ns_save_meta(struct core_ns *ns)
{
        if (!ns->meta_path[0])
                return 0; /* mem/null namespaces without a state file */
        json_t *body = meta_body(ns);
        if (!body)
                return -ENOMEM;
        char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
        if (!text) {
                json_decref(body);
                return -ENOMEM;
        }
        json_t *top = json_pack("{s:o, s:I}", "body", body, "crc32c",
                                (json_int_t)rt_crc32c(text, strlen(text)));
        free(text);
        if (!top)
                return -ENOMEM;
        char tmp[4200];
        snprintf(tmp, sizeof(tmp), "%s.tmp", ns->meta_path);
        int rc = 0;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
                rc = -errno;
                goto out;
        }
        char *out = json_dumps(top, JSON_INDENT(2) | JSON_SORT_KEYS);
        size_t len = out ? strlen(out) : 0;
        if (!out || write(fd, out, len) != (ssize_t)len || write(fd, "\n", 1) != 1 || fsync(fd))
                rc = out ? -errno : -ENOMEM;
        free(out);
        close(fd);
        if (rc == 0 && rename(tmp, ns->meta_path))
                rc = -errno;
        if (rc == 0)
                rc = fsync_dir(ns->meta_path);
out:
        json_decref(top);
        if (rc)
                LOG_ERR("core", "namespace %s: saving metadata %s: %s", ns->name, ns->meta_path,
                        strerror(-rc));
        return rc;
}

/* Loads and verifies the metadata file.  1 = loaded, 0 = absent, <0 = corrupt/unreadable. */
static int load_meta(struct core_ns *ns, json_t **crypt, char *err, size_t errlen)
{
        json_error_t je;
        json_t *top = json_load_file(ns->meta_path, 0, &je);
        if (!top) {
                if (access(ns->meta_path, F_OK) != 0)
                        return 0;
                snprintf(err, errlen, "metadata %s unreadable: %s (line %d)", ns->meta_path,
                         je.text, je.line);
                return -EIO;
        }
        int rc = -EINVAL;
        json_t *body = json_object_get(top, "body");
        json_t *crc = json_object_get(top, "crc32c");
        char *text = body ? json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (!text || !json_is_integer(crc) ||
            (uint32_t)json_integer_value(crc) != rt_crc32c(text, strlen(text))) {
                snprintf(err, errlen, "metadata %s: checksum mismatch or malformed", ns->meta_path);
                goto out;
        }
        const char *u = NULL, *be = NULL, *path = NULL;
        json_int_t ver = 0, bs = 0, nb = 0;
        int thin = 0;
        if (json_unpack(body, "{s:I, s:s, s:s, s:s, s:I, s:I, s:b}", "version", &ver, "uuid", &u,
                        "backend", &be, "path", &path, "block_size", &bs, "num_blocks", &nb, "thin",
                        &thin) ||
            ver != META_VERSION || uuid_parse(u, ns->uuid) || (bs != 512 && bs != 4096) ||
            nb <= 0) {
                snprintf(err, errlen, "metadata %s: unsupported version or bad fields",
                         ns->meta_path);
                goto out;
        }
        ns->block_size = (uint32_t)bs;
        ns->num_blocks = (uint64_t)nb;
        ns->thin = thin;
        json_t *wpp = json_object_get(body, "wp_permanent");
        if (wpp && !json_is_boolean(wpp)) {
                snprintf(err, errlen, "metadata %s: bad wp_permanent", ns->meta_path);
                goto out;
        }
        if (json_is_true(wpp))
                atomic_fetch_or(&ns->wp, CORE_WP_PERMANENT);
        json_t *wpc = json_object_get(body, "wp_power_cycle_run");
        if (json_is_string(wpc) && strcmp(json_string_value(wpc), this_run()) == 0)
                atomic_fetch_or(&ns->wp, CORE_WP_POWER_CYCLE);
        json_t *pr = json_object_get(body, "pr");
        if (pr && core_pr_from_json(&ns->pr, pr)) {
                snprintf(err, errlen, "metadata %s: bad reservation state", ns->meta_path);
                goto out;
        }
        json_t *san = json_object_get(body, "sanitize");
        if (san && core_sanitize_from_json(ns, san)) {
                snprintf(err, errlen, "metadata %s: bad sanitize state", ns->meta_path);
                goto out;
        }
        json_t *prov = json_object_get(body, "provision");
        if (prov && core_prov_from_json(ns, prov)) {
                snprintf(err, errlen, "metadata %s: bad provisioning limits", ns->meta_path);
                goto out;
        }
        json_t *ssc = json_object_get(body, "start_stop_cycles");
        if (ssc && (!json_is_integer(ssc) || json_integer_value(ssc) < 0)) {
                snprintf(err, errlen, "metadata %s: bad start_stop_cycles", ns->meta_path);
                goto out;
        }
        if (ssc)
                atomic_store(&ns->start_stop_cycles, (uint64_t)json_integer_value(ssc));
        json_t *awm = json_object_get(body, "atomic_write_max");
        if (awm && (!json_is_integer(awm) || json_integer_value(awm) < 0 ||
                    json_integer_value(awm) > CORE_ATOMIC_MAX_BYTES ||
                    json_integer_value(awm) % ns->block_size)) {
                snprintf(err, errlen, "metadata %s: bad atomic_write_max", ns->meta_path);
                goto out;
        }
        if (awm)
                atomic_store(&ns->atomic_max_bytes, (uint32_t)json_integer_value(awm));
        json_t *cj = json_object_get(body, "crypt"); /* absent: stored in the clear */
        if (cj) {
                if (!json_is_object(cj)) {
                        snprintf(err, errlen, "metadata %s: bad crypt", ns->meta_path);
                        json_decref(top);
                        return -EINVAL;
                }
                *crypt = json_incref(cj);
        }
        json_t *media = json_object_get(body, "media");
        if (media && core_media_from_json(ns, media)) {
                snprintf(err, errlen, "metadata %s: bad media state", ns->meta_path);
                goto out;
        }
        json_t *pij = json_object_get(body, "pi");
        if (pij && core_ns_pi_from_json(pij, &ns->pi, ns->block_size)) {
                snprintf(err, errlen, "metadata %s: bad protection information format",
                         ns->meta_path);
                goto out;
        }
        rc = 1;
out:
        free(text);
        json_decref(top);
        return rc;
}

static bool pi_fmt_eq(const struct core_pi_fmt *a, const struct core_pi_fmt *b)
{
        return a->md_size == b->md_size && a->type == b->type && a->guard == b->guard &&
               a->pi_exp == b->pi_exp && a->sts == b->sts && a->pi_first == b->pi_first;
}

static void ns_free(struct core_ns *ns)
{
        core_pool_leave(ns);
        core_atomic_close(ns);
        core_flash_close(ns); /* saves the model's state */
        core_ns_pi_close(ns);
        if (ns->be.ops)
                ns->be.ops->close(&ns->be);
        if (ns->scsi_state && ns->scsi_state_free)
                ns->scsi_state_free(ns->scsi_state);
        core_sanitize_free(ns);
        core_selftest_log_fini(&ns->selftest_log);
        core_media_free(ns);
        core_crypt_free(ns->crypt);
        core_stats_fini(&ns->stats);
        pthread_mutex_destroy(&ns->lock);
        pthread_mutex_destroy(&ns->rmw_lock);
        free(ns);
}

unsigned core_ns_lpsm(const struct core_ns *ns, uint64_t *lba)
{
        uint64_t n = atomic_load_explicit(&ns->lpsm_n, memory_order_acquire);
        unsigned k = 0;
        for (unsigned i = 0; i < n && i < CORE_LPSM_MAX; i++) {
                /* 0: counted, its LBA not stored yet (a write being submitted right now). */
                uint64_t v = atomic_load_explicit(&ns->lpsm_lba[i], memory_order_acquire);
                if (!v)
                        break;
                lba[k++] = v - 1;
        }
        return k;
}

/*
 * The identity kept with the data (rbd: image metadata) is the namespace's:
 * every gateway exporting the storage reports it.  None stored yet: this
 * namespace's (new or from its metadata file) is stored there.
 */
static int identity_with_data(struct core_ns *ns, int loaded, char *err, size_t errlen)
{
        struct backend_identity id;
        int rc = ns->be.ops->identity_load(&ns->be, &id);
        if (rc == -ENOENT) {
                memcpy(id.uuid, ns->uuid, sizeof(id.uuid));
                id.block_size = ns->block_size;
                rc = ns->be.ops->identity_store(&ns->be, &id);
                if (rc)
                        snprintf(err, errlen, "storing the identity with %s: %s", ns->path,
                                 strerror(-rc));
                return rc;
        }
        if (rc) {
                snprintf(err, errlen, "reading the identity stored with %s: %s", ns->path,
                         strerror(-rc));
                return rc;
        }
        if (id.block_size != ns->block_size) {
                snprintf(err, errlen, "%s holds a namespace with block_size %u", ns->path,
                         id.block_size);
                return -EINVAL;
        }
        if (loaded && memcmp(id.uuid, ns->uuid, sizeof(id.uuid)))
                LOG_WARN("core", "namespace %s: the identity stored with %s replaces the one in %s",
                         ns->name, ns->path, ns->meta_path);
        memcpy(ns->uuid, id.uuid, sizeof(ns->uuid));
        return 0;
}

/*
 * The end of the encryption rules, wherever the key is kept: a KEK given
 * for a namespace that is not encrypted is refused, cerr (core/crypt.c's
 * reason) named, and where the KEK came from kept for config_save.
 */
static int crypt_done(struct core_ns *ns, const struct core_ns_params *p, int rc, const char *cerr,
                      char *err, size_t errlen)
{
        bool has_kek =
            (p->key_file && p->key_file[0]) || (p->passphrase_file && p->passphrase_file[0]);
        if (!rc && !ns->crypt && has_kek) {
                snprintf(err, errlen,
                         "key_file/passphrase_file given for namespace %s, which is not "
                         "encrypted (encrypt=true makes a new one encrypted)",
                         p->name);
                return -EINVAL;
        }
        if (cerr[0])
                snprintf(err, errlen, "namespace %s: %s", p->name, cerr);
        if (!rc && ns->crypt) {
                ns->kek_passphrase = !(p->key_file && p->key_file[0]);
                snprintf(ns->kek_path, sizeof(ns->kek_path), "%s",
                         ns->kek_passphrase ? p->passphrase_file : p->key_file);
        }
        return rc;
}

#define CRYPT_RECORD "crypt" /* the record kept with the data (rbd: "slate.crypt") */

/* The crypt record stored with ns's storage: *j (NULL when none), 0 or -errno. */
static int crypt_record_load(struct core_ns *ns, json_t **j)
{
        char *val = NULL;
        *j = NULL;
        int rc = ns->be.ops->meta_load(&ns->be, CRYPT_RECORD, &val);
        if (rc == -ENOENT)
                return 0;
        if (rc)
                return rc;
        *j = json_loads(val, 0, NULL);
        free(val);
        if (!json_is_object(*j)) {
                json_decref(*j);
                *j = NULL;
                return -EINVAL;
        }
        return 0;
}

static int crypt_record_store(struct core_ns *ns, json_t *j)
{
        char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        int rc = text ? ns->be.ops->meta_store(&ns->be, CRYPT_RECORD, text) : -ENOMEM;
        free(text);
        return rc;
}

/*
 * What the storage holds is the key every gateway uses: after storing ours,
 * read it back and take the one stored there (another gateway that stored
 * at the same moment may have won).  0 or -errno.
 */
static int crypt_record_settle(struct core_ns *ns)
{
        json_t *j = NULL;
        int rc = crypt_record_load(ns, &j);
        if (!rc && !j)
                rc = -ENOENT;
        if (!rc) {
                rc = core_crypt_adopt(ns->crypt, j, true);
                if (rc == 0)
                        LOG_WARN("core",
                                 "namespace %s: another gateway stored its data key at the same "
                                 "moment; using the one stored with %s",
                                 ns->name, ns->path);
                rc = rc == 1 ? 0 : rc;
        }
        json_decref(j);
        return rc;
}

/*
 * Encryption at rest on storage several gateways share (ops->meta_load:
 * rbd).  The member core_crypt_to_json makes (cipher, KEK kind, salt and
 * iterations, the wrapped key and its generation; never the plain key) is
 * kept with the data, record "crypt", and not in this gateway's metadata
 * file: every gateway given the same KEK opens the same data key, and a
 * cryptographic erase through one reaches the others (be_meta_changed).
 * The rules are the file backend's: an encrypted namespace needs its KEK
 * and refuses a wrong one; encrypt=true makes a new one only on storage
 * that holds no namespace yet (no identity stored, no local metadata) and
 * no data at its start (the first 64 MiB all deallocated: a file system,
 * a partition table or an `rbd import` would read as garbage).
 */
static int crypt_with_data(struct core_ns *ns, const struct core_ns_params *p, int loaded,
                           char *err, size_t errlen)
{
        struct backend *be = &ns->be;
        struct core_crypt_kek_src ks = {.key_file = p->key_file,
                                        .passphrase_file = p->passphrase_file,
                                        .pbkdf2_iter = p->pbkdf2_iter};
        bool has_kek =
            (p->key_file && p->key_file[0]) || (p->passphrase_file && p->passphrase_file[0]);
        char cerr[512];
        cerr[0] = 0;
        json_t *j = NULL;
        int rc = crypt_record_load(ns, &j);
        if (rc) {
                snprintf(err, errlen, "reading the encryption record stored with %s: %s", ns->path,
                         rc == -EINVAL ? "malformed" : strerror(-rc));
                return rc;
        }
        if (j) {
                if (!has_kek) {
                        snprintf(err, errlen,
                                 "namespace %s is encrypted (%s keeps its wrapped key): give "
                                 "key_file or passphrase_file",
                                 p->name, ns->path);
                        rc = -EACCES;
                } else {
                        rc = core_crypt_load(&ks, j, &ns->crypt, cerr, sizeof(cerr));
                }
                json_decref(j);
        } else if (p->encrypt) {
                struct backend_identity id;
                uint64_t head = be->size_bytes < (64ull << 20) ? be->size_bytes : 64ull << 20;
                enum core_prov st = CORE_PROV_MAPPED;
                uint64_t run = 0;
                if (loaded || (be->ops->identity_load && be->ops->identity_load(be, &id) == 0)) {
                        snprintf(err, errlen,
                                 "namespace %s exists unencrypted (%s holds it): encryption "
                                 "cannot be added to existing data",
                                 p->name, ns->path);
                        rc = -EINVAL;
                } else if (head && be->ops->map_status &&
                           (be->ops->map_status(be, 0, head, &st, &run) ||
                            st != CORE_PROV_DEALLOCATED || run < head)) {
                        snprintf(err, errlen,
                                 "encrypt=true: %s holds data that would read as garbage; an "
                                 "encrypted namespace starts empty",
                                 ns->path);
                        rc = -EINVAL;
                } else {
                        rc = core_crypt_create(&ks, &ns->crypt, cerr, sizeof(cerr));
                        if (!rc) {
                                json_t *mine = core_crypt_to_json(ns->crypt);
                                rc = crypt_record_store(ns, mine);
                                json_decref(mine);
                                if (!rc)
                                        rc = crypt_record_settle(ns);
                                if (rc)
                                        snprintf(cerr, sizeof(cerr),
                                                 "storing the wrapped data key with the "
                                                 "storage: %s",
                                                 strerror(-rc));
                        }
                }
        }
        return crypt_done(ns, p, rc, cerr, err, errlen);
}

/*
 * A record kept with the storage changed through another gateway (key
 * NULL: notices may have been lost, read it again): a cryptographic erase
 * there replaced the data key, which this gateway takes before the other's
 * erase completes (it waits for our acknowledgement), so no I/O that
 * starts after that erase ends uses the old key here.  A backend thread.
 */
static void be_meta_changed(struct backend *be, const char *key, const char *val)
{
        struct core_ns *ns = (struct core_ns *)((char *)be - offsetof(struct core_ns, be));
        if (!ns->crypt || (key && strcmp(key, CRYPT_RECORD) != 0))
                return; /* still opening (crypt_with_data reads it), or not ours */
        json_t *j = NULL;
        int rc = 0;
        if (key)
                j = json_loads(val, 0, NULL);
        else
                rc = crypt_record_load(ns, &j);
        if (!rc && !j)
                rc = -EINVAL;
        if (!rc)
                rc = core_crypt_adopt(ns->crypt, j, key == NULL);
        json_decref(j);
        if (rc == 0)
                LOG_INFO("core",
                         "namespace %s: data key replaced through another gateway (cryptographic "
                         "erase %llu)",
                         ns->name, (unsigned long long)core_crypt_erasures(ns->crypt));
        else if (rc < 0)
                LOG_ERR("core",
                        "namespace %s: the data key stored with %s changed and cannot be taken "
                        "(%s): this gateway keeps the old one",
                        ns->name, ns->path, rc == -EACCES ? "not under our KEK" : strerror(-rc));
}

int core_ns_crypt_erase(struct core_ns *ns)
{
        int rc;
        if (!ns->crypt)
                return -EINVAL;
        if (!ns->be.ops || !ns->be.ops->meta_store) {
                if (core_crypt_rekey(ns->crypt))
                        return -EIO;
        } else {
                /* Stored (and taken by the other gateways) before it is ours. */
                json_t *j = core_crypt_next(ns->crypt);
                rc = j ? crypt_record_store(ns, j) : -ENOMEM;
                if (!rc)
                        rc = core_crypt_adopt(ns->crypt, j, true);
                json_decref(j);
                if (rc == 0 || rc == 1)
                        rc = crypt_record_settle(ns);
                if (rc) {
                        LOG_ERR("core",
                                "namespace %s: cryptographic erase: storing the new key with "
                                "%s: %s",
                                ns->name, ns->path, strerror(-rc));
                        return rc;
                }
                LOG_INFO("core", "namespace %s: data key generation %llu stored with %s", ns->name,
                         (unsigned long long)core_crypt_erasures(ns->crypt), ns->path);
        }
        pthread_mutex_lock(&ns->lock);
        rc = core_ns_save_meta(ns);
        pthread_mutex_unlock(&ns->lock);
        return rc;
}

/* Another gateway changed the reservation state kept with the storage: reload our copy. */
static void be_pr_changed(struct backend *be)
{
        struct core_ns *ns = (struct core_ns *)((char *)be - offsetof(struct core_ns, be));
        core_ns_pr_refresh(ns);
}

/* A backend saw its shared storage change size (rbd: another gateway): follow it. */
static void be_size_changed(struct backend *be, uint64_t size_bytes)
{
        struct core_ns *ns = (struct core_ns *)((char *)be - offsetof(struct core_ns, be));
        char err[256];
        if (!ns->block_shift || size_bytes >> ns->block_shift == core_ns_blocks(ns))
                return; /* still opening, or nothing to follow */
        if (core_ns_resize(ns, size_bytes >> ns->block_shift, true, err, sizeof(err)))
                LOG_WARN("core", "namespace %s: following the storage's new size: %s", ns->name,
                         err);
}

int core_ns_create(const struct core_ns_params *p, struct core_ns **out, char *err, size_t errlen)
{
        int rc;
        err[0] = 0;
        if (!name_ok(p->name)) {
                snprintf(err, errlen, "invalid namespace name (use 1-63 of [A-Za-z0-9._-])");
                return -EINVAL;
        }
        const char *bename = p->backend ? p->backend : "file";
        const struct backend_ops *ops = backend_find(bename);
        if (!ops) {
                const char *lib = backend_missing_lib(bename);
                if (lib)
                        snprintf(err, errlen,
                                 "backend '%s' is not in this build of slated: it needs %s", bename,
                                 lib);
                else
                        snprintf(err, errlen, "unknown backend '%s' (mem, file, null, rbd)",
                                 bename);
                return lib ? -EOPNOTSUPP : -EINVAL;
        }
        bool is_rbd = strcmp(ops->name, "rbd") == 0;
        if (is_rbd && (!p->rbd_pool || !p->rbd_pool[0] || !p->rbd_image || !p->rbd_image[0])) {
                snprintf(err, errlen, "the rbd backend needs 'pool' and 'image'");
                return -EINVAL;
        }
        if (p->ana_group > CORE_ANA_GROUPS) {
                snprintf(err, errlen, "ana_group must be 1..%u", CORE_ANA_GROUPS);
                return -EINVAL;
        }
        uint32_t bs = p->block_size ? p->block_size : 512;
        if (bs != 512 && bs != 4096) {
                snprintf(err, errlen, "block_size must be 512 or 4096");
                return -EINVAL;
        }
        if (p->size_bytes % bs) {
                snprintf(err, errlen, "size must be a multiple of block_size %u", bs);
                return -EINVAL;
        }

        pthread_mutex_lock(&reg_lock);
        for (struct core_ns *n = registry; n; n = n->next) {
                if (strcmp(n->name, p->name) == 0) {
                        pthread_mutex_unlock(&reg_lock);
                        snprintf(err, errlen, "namespace '%s' exists", p->name);
                        return -EEXIST;
                }
        }
        pthread_mutex_unlock(&reg_lock);

        struct core_ns *ns = calloc(1, sizeof(*ns));
        if (!ns)
                return -ENOMEM;
        if (core_stats_init(&ns->stats) < 0) {
                free(ns);
                return -ENOMEM;
        }
        if (core_media_init(ns) < 0) {
                core_stats_fini(&ns->stats);
                free(ns);
                return -ENOMEM;
        }
        pthread_mutex_init(&ns->lock, NULL);
        pthread_mutex_init(&ns->rmw_lock, NULL);
        core_selftest_log_init(&ns->selftest_log);
        (void)core_power_on_hours(); /* starts the power-on clock */
        atomic_init(&ns->refs, 1);
        snprintf(ns->name, sizeof(ns->name), "%s", p->name);
        snprintf(ns->backend_name, sizeof(ns->backend_name), "%s", ops->name);
        ns->block_size = bs;
        ns->thin = p->thin;
        ns->removable = p->removable;
        ns->san_rate_mibps = p->sanitize_rate_mibps;
        ns->selftest_rate_mibps = p->selftest_rate_mibps;
        ns->pr.holder = -1;
        atomic_init(&ns->wp, p->write_protect ? CORE_WP_CONFIG : 0);
        atomic_init(&ns->ready, CORE_NS_READY);
        atomic_init(&ns->san_state, CORE_SAN_NEVER);
        atomic_init(&ns->wce, true);
        atomic_init(&ns->ana_group, p->ana_group ? p->ana_group : 1);
        atomic_init(&ns->atomic_max_bytes, UINT32_MAX); /* not loaded yet */

        bool is_file = strcmp(ops->name, "file") == 0;
        bool persistent = is_file || is_rbd;
        if (is_rbd) {
                const char *rns = p->rbd_namespace ? p->rbd_namespace : "";
#define KEEP(f, v) snprintf(ns->rbd.f, sizeof(ns->rbd.f), "%s", (v) ? (v) : "")
                KEEP(pool, p->rbd_pool);
                KEEP(image, p->rbd_image);
                KEEP(ns, p->rbd_namespace);
                KEEP(client_id, p->client_id);
                KEEP(conf, p->ceph_conf);
                KEEP(keyring, p->keyring);
#undef KEEP
                snprintf(ns->path, sizeof(ns->path), "rbd:%s/%s%s%s", p->rbd_pool, rns,
                         rns[0] ? "/" : "", p->rbd_image);
        }
        if (persistent) {
                if (is_rbd)
                        ; /* the image, named above */
                else if (p->path && p->path[0])
                        snprintf(ns->path, sizeof(ns->path), "%s", p->path);
                else
                        snprintf(ns->path, sizeof(ns->path), "%s/%s.img", state_dir, p->name);
                snprintf(ns->meta_path, sizeof(ns->meta_path), "%s/%s.meta.json", state_dir,
                         p->name);
                if (mkdir(state_dir, 0700) && errno != EEXIST) {
                        rc = -errno;
                        snprintf(err, errlen, "state dir %s: %s", state_dir, strerror(errno));
                        goto fail;
                }
        }

        json_t *crypt_j = NULL;
        int loaded = persistent ? load_meta(ns, &crypt_j, err, errlen) : 0;
        if (loaded < 0) {
                rc = loaded;
                goto fail;
        }
        if (loaded && p->block_size && p->block_size != ns->block_size) {
                snprintf(err, errlen, "namespace %s exists with block_size %u", p->name,
                         ns->block_size);
                rc = -EINVAL;
                goto fail;
        }
        if (is_file && !loaded) {
                /* Data without its identity: never a silent new disk over old data. */
                struct stat st;
                if (stat(ns->path, &st) == 0 && (S_ISBLK(st.st_mode) || st.st_size > 0)) {
                        if (!p->adopt) {
                                snprintf(err, errlen,
                                         "%s holds data but namespace %s has no metadata (%s): "
                                         "refusing to give it a new identity; create it with "
                                         "adopt=true to export that data as a new disk",
                                         ns->path, p->name, ns->meta_path);
                                rc = -EEXIST;
                                goto fail;
                        }
                        LOG_WARN("core",
                                 "namespace %s: adopting %s, which holds data, with a new identity",
                                 p->name, ns->path);
                }
        }
        /* Encryption at rest (core/crypt.h): the key before any data moves.  Storage that
         * keeps records with it (rbd) keeps the key there: crypt_with_data, after open. */
        if (ops->meta_load) {
                json_decref(crypt_j);
                crypt_j = NULL;
        } else {
                struct core_crypt_kek_src ks = {.key_file = p->key_file,
                                                .passphrase_file = p->passphrase_file,
                                                .pbkdf2_iter = p->pbkdf2_iter};
                bool has_kek = (p->key_file && p->key_file[0]) ||
                               (p->passphrase_file && p->passphrase_file[0]);
                char cerr[512];
                cerr[0] = 0;
                rc = 0;
                if (crypt_j) {
                        if (!has_kek) {
                                snprintf(err, errlen,
                                         "namespace %s is encrypted: give key_file or "
                                         "passphrase_file",
                                         p->name);
                                rc = -EACCES;
                        } else {
                                rc = core_crypt_load(&ks, crypt_j, &ns->crypt, cerr, sizeof(cerr));
                        }
                } else if (loaded && p->encrypt) {
                        snprintf(err, errlen,
                                 "namespace %s exists unencrypted: encryption cannot be added "
                                 "to existing data",
                                 p->name);
                        rc = -EINVAL;
                } else if (p->encrypt) {
                        struct stat st;
                        if (is_file && stat(ns->path, &st) == 0 &&
                            (S_ISBLK(st.st_mode) || st.st_size > 0)) {
                                snprintf(err, errlen,
                                         "encrypt=true: %s holds data that would read as garbage; "
                                         "an encrypted namespace starts empty",
                                         ns->path);
                                rc = -EINVAL;
                        } else {
                                rc = core_crypt_create(&ks, &ns->crypt, cerr, sizeof(cerr));
                        }
                }
                rc = crypt_done(ns, p, rc, cerr, err, errlen);
                json_decref(crypt_j);
                crypt_j = NULL;
                if (rc)
                        goto fail;
        }
        if (!loaded) {
                uuid_generate_random(ns->uuid);
                ns->num_blocks = p->size_bytes / bs;
        } else if (p->size_bytes && p->size_bytes / ns->block_size > ns->num_blocks &&
                   !core_media_depopulated(ns)) {
                /* Grow on request; not after a depopulation (core_media_restore undoes it). */
                ns->num_blocks = p->size_bytes / ns->block_size;
        }
        if (ns->num_blocks == 0 && !(persistent && !loaded && p->size_bytes == 0)) {
                snprintf(err, errlen, "size must be at least one block");
                rc = -EINVAL;
                goto fail;
        }

        if (strcmp(ops->name, "mem") == 0 &&
            (rc = core_ns_mem_fits(ns->num_blocks * (uint64_t)bs, err, errlen)))
                goto fail;
        struct backend_params bp = {
            .path = ns->path,
            .size_bytes = ns->num_blocks * (uint64_t)ns->block_size,
            .create = true,
            .pool = p->rbd_pool,
            .image = p->rbd_image,
            .rbd_namespace = p->rbd_namespace,
            .ceph_conf = p->ceph_conf,
            .client_id = p->client_id,
            .keyring = p->keyring,
            .shared_reservations = p->shared_reservations,
        };
        ns->be.ops = ops;
        ns->be.size_changed = be_size_changed;
        ns->be.pr_changed = be_pr_changed;
        ns->be.meta_changed = be_meta_changed;
        rc = ops->open(&ns->be, &bp);
        if (rc) {
                ns->be.ops = NULL;
                snprintf(err, errlen, "backend %s open %s: %s", ops->name, ns->path, strerror(-rc));
                goto fail;
        }
        if (ns->num_blocks == 0 || ns->be.size_shared)
                ns->num_blocks = ns->be.size_bytes / ns->block_size; /* the storage's own size */
        /* Before the identity is stored: a namespace the storage did not hold yet is new. */
        if (ops->meta_load && (rc = crypt_with_data(ns, p, loaded, err, errlen)))
                goto fail;
        if (ops->identity_load && (rc = identity_with_data(ns, loaded, err, errlen)))
                goto fail;
        /* Reservations kept with the storage (rbd, shared file) are the namespace's, not the
         * metadata file's. */
        if (ns->be.pr_shared && (rc = core_ns_pr_refresh(ns))) {
                snprintf(err, errlen, "reading the reservation state stored with %s: %s", ns->path,
                         strerror(-rc));
                goto fail;
        }
        if (ns->num_blocks == 0) {
                snprintf(err, errlen, "size must be at least one block");
                rc = -EINVAL;
                goto fail;
        }
        ns->block_shift = (uint32_t)__builtin_ctz(ns->block_size);
        {
                uint32_t pbs = p->physical_block_size;
                if (!pbs)
                        pbs = ns->block_size > CORE_NS_DEFAULT_PHYS_BLOCK
                                  ? ns->block_size
                                  : CORE_NS_DEFAULT_PHYS_BLOCK;
                if (pbs & (pbs - 1) || pbs < ns->block_size || pbs > ns->block_size << 15) {
                        snprintf(err, errlen,
                                 "physical_block_size %u must be a power of two from block_size "
                                 "%u to %u",
                                 pbs, ns->block_size, ns->block_size << 15);
                        rc = -EINVAL;
                        goto fail;
                }
                ns->phys_exp = (uint8_t)(__builtin_ctz(pbs) - ns->block_shift);
        }
        derive_ids(ns);
        /* Protection information (core/pi_ns.c): given at create, saved on reopen; never both
         * different. */
        ns->pi.block_size = ns->block_size;
        if (p->pi_set) {
                struct core_pi_fmt f = p->pi;
                f.block_size = ns->block_size;
                if (f.type == 0 && f.md_size == 0)
                        memset(&f, 0, sizeof(f)), f.block_size = ns->block_size;
                else if (core_pi_fmt_check(&f, err, errlen)) {
                        rc = -EINVAL;
                        goto fail;
                }
                if (loaded && !pi_fmt_eq(&f, &ns->pi)) {
                        snprintf(err, errlen,
                                 "namespace %s exists with another protection information format "
                                 "(type %u, %u metadata bytes); change it with namespace_format",
                                 p->name, ns->pi.type, ns->pi.md_size);
                        rc = -EINVAL;
                        goto fail;
                }
                ns->pi = f;
        }
        rc = core_ns_pi_open(ns, !loaded, err, errlen);
        if (rc)
                goto fail;
        /* Atomic writes (core/atomic.c): given > saved > the backend's default. */
        if (p->atomic_write_max_set) {
                if (p->atomic_write_max % ns->block_size ||
                    p->atomic_write_max > CORE_ATOMIC_MAX_BYTES ||
                    (p->atomic_write_max && !strcmp(ops->name, "null"))) {
                        snprintf(err, errlen,
                                 "atomic_write_max must be a multiple of block_size %u, at most "
                                 "%u (0 on null)",
                                 ns->block_size, CORE_ATOMIC_MAX_BYTES);
                        rc = -EINVAL;
                        goto fail;
                }
                atomic_store(&ns->atomic_max_bytes, p->atomic_write_max);
        } else if (atomic_load(&ns->atomic_max_bytes) == UINT32_MAX) {
                atomic_store(&ns->atomic_max_bytes,
                             strcmp(ops->name, "null") ? CORE_ATOMIC_DEFAULT_MAX : 0);
        }
        if (persistent && (rc = core_ns_save_meta(ns))) {
                snprintf(err, errlen, "saving metadata %s: %s", ns->meta_path, strerror(-rc));
                goto fail;
        }
        /* Before any I/O: replay what the atomic-write journal holds. */
        rc = core_atomic_open(ns, err, errlen);
        if (rc)
                goto fail;
        /* Limits given now replace the saved ones; those not given are kept. */
        if (p->provision_limit || p->provision_threshold) {
                uint64_t limit = p->provision_limit ? p->provision_limit : ns->prov.limit;
                uint64_t thr = p->provision_threshold ? p->provision_threshold : ns->prov.threshold;
                rc = core_ns_set_provision(ns, limit, thr, NULL, err, errlen);
                if (rc)
                        goto fail;
        }
        core_pool_join(ns);
        core_prov_init(ns);
        rc = core_flash_open(ns, &p->flash, err, errlen);
        if (rc)
                goto fail;
        ns->fdp_off = p->fdp_off;
        /* The element model: given replaces saved (refused while elements are failed). */
        if (p->elements_set || p->element_interleave) {
                uint32_t ne = p->elements_set ? p->elements : core_media_elements(ns);
                rc = core_media_configure(ns, ne, p->element_interleave, err, errlen);
                if (rc)
                        goto fail;
        }
        core_media_resume(ns);

        pthread_mutex_lock(&reg_lock);
        ns->next = registry;
        registry = ns;
        pthread_mutex_unlock(&reg_lock);
        char u[37];
        uuid_unparse_lower(ns->uuid, u);
        LOG_INFO("core", "namespace %s: %s backend, %llu x %u-byte blocks, uuid %s%s%s%s", ns->name,
                 ops->name, (unsigned long long)ns->num_blocks, ns->block_size, u,
                 core_ns_can_anchor(ns) ? ", can anchor" : "",
                 ns->crypt ? ", encrypted (aes-256-xts)" : "", loaded ? " (reopened)" : "");
        /* SBC-4 4.11, NVMe 8.21: an interrupted sanitize continues after power on. */
        core_sanitize_resume(ns);
        *out = ns;
        return 0;
fail:
        ns_free(ns);
        return rc;
}

struct core_ns *core_ns_find(const char *name)
{
        pthread_mutex_lock(&reg_lock);
        struct core_ns *n = registry;
        while (n && strcmp(n->name, name) != 0)
                n = n->next;
        pthread_mutex_unlock(&reg_lock);
        return n;
}

void core_ns_get(struct core_ns *ns)
{
        atomic_fetch_add(&ns->refs, 1);
}

void core_ns_put(struct core_ns *ns)
{
        if (atomic_fetch_sub(&ns->refs, 1) == 1)
                ns_free(ns);
}

int core_ns_delete(const char *name)
{
        pthread_mutex_lock(&reg_lock);
        struct core_ns **pp = &registry;
        while (*pp && strcmp((*pp)->name, name) != 0)
                pp = &(*pp)->next;
        struct core_ns *ns = *pp;
        if (!ns) {
                pthread_mutex_unlock(&reg_lock);
                return -ENOENT;
        }
        if (atomic_load(&ns->refs) > 1) {
                pthread_mutex_unlock(&reg_lock);
                return -EBUSY;
        }
        *pp = ns->next;
        pthread_mutex_unlock(&reg_lock);
        LOG_INFO("core", "namespace %s deleted (data and metadata files are kept)", ns->name);
        core_ns_put(ns);
        return 0;
}

void core_ns_foreach(void (*fn)(struct core_ns *ns, void *arg), void *arg)
{
        pthread_mutex_lock(&reg_lock);
        /* Registry is LIFO; visit in creation order so saved configs replay naturally. */
        struct core_ns *stack[1024];
        unsigned n = 0;
        for (struct core_ns *ns = registry; ns && n < 1024; ns = ns->next)
                stack[n++] = ns;
        while (n)
                fn(stack[--n], arg);
        pthread_mutex_unlock(&reg_lock);
}

void core_ns_shutdown_all(void)
{
        pthread_mutex_lock(&reg_lock);
        struct core_ns *ns = registry;
        registry = NULL;
        pthread_mutex_unlock(&reg_lock);
        while (ns) {
                struct core_ns *next = ns->next;
                /* A personality may still hold it (an NVMe attachment): save the model now. */
                core_flash_save(ns);
                /*
                 * And close its backend now (the reactors are stopped: no I/O
                 * is in flight): an rbd image left open keeps librbd's cache
                 * unflushed and the image's watch registered on the cluster.
                 */
                if (atomic_load(&ns->refs) > 1 && ns->be.ops) {
                        ns->be.ops->close(&ns->be);
                        ns->be.ops = NULL;
                }
                core_ns_put(ns);
                ns = next;
        }
}

bool core_ns_lba_status_remote(const struct core_ns *ns)
{
        return ns->thin && ns->be.ops && ns->be.ops->map_status && ns->be.ops->map_status_remote;
}

int core_ns_lba_status(struct core_ns *ns, uint64_t lba, uint64_t max_nlb, enum core_prov *st,
                       uint64_t *nlb)
{
        uint64_t n = core_ns_blocks(ns);
        if (lba >= n)
                return -ERANGE;
        if (max_nlb == 0 || max_nlb > n - lba)
                max_nlb = n - lba;
        *st = CORE_PROV_MAPPED;
        *nlb = max_nlb;
        if (!ns->thin || !ns->be.ops || !ns->be.ops->map_status)
                return 0;
        uint64_t run = 0;
        int rc = ns->be.ops->map_status(&ns->be, lba << ns->block_shift, max_nlb << ns->block_shift,
                                        st, &run);
        if (rc)
                return rc;
        /* Whole blocks: a block only partly in a hole (or anchored range) is mapped. */
        if (*st == CORE_PROV_MAPPED)
                *nlb = (run + ns->block_size - 1) >> ns->block_shift;
        else
                *nlb = run >> ns->block_shift;
        if (*nlb == 0) {
                *st = CORE_PROV_MAPPED;
                *nlb = 1;
        }
        if (*nlb > max_nlb)
                *nlb = max_nlb;
        return 0;
}

int64_t core_ns_allocated_bytes(struct core_ns *ns)
{
        if (!ns->be.ops->allocated)
                return -ENOTSUP;
        return ns->be.ops->allocated(&ns->be);
}

uint32_t core_ns_dealloc_granularity(const struct core_ns *ns)
{
        uint32_t unit = ns->be.alloc_unit;
        uint32_t gran = unit > ns->block_size ? unit >> ns->block_shift : 1;
        uint32_t phys = 1u << ns->phys_exp;
        if (!unit && !ns->phys_exp)
                return 0;
        return gran > phys ? gran : phys; /* never less than a physical block */
}

int core_ns_mem_fits(uint64_t bytes, char *err, size_t errlen)
{
        /* RAM it is: never more than the machine has (RAM and swap), or the OOM killer decides. */
        struct sysinfo si;
        if (sysinfo(&si) != 0)
                return 0;
        uint64_t have = ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
        if (bytes <= have)
                return 0;
        snprintf(err, errlen,
                 "a mem namespace of %llu MiB is larger than this machine's memory (%llu MiB of "
                 "RAM and swap)",
                 (unsigned long long)(bytes >> 20), (unsigned long long)(have >> 20));
        return -ENOMEM;
}
