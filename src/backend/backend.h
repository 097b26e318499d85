/*
 * Backends are ops tables: mem (RAM), file (io_uring on a sparse file,
 * O_DIRECT where the file system allows), null (discards writes, reads
 * zeroes; for measuring protocol cost) and rbd (a Ceph RBD image through
 * librbd; only in builds with librbd, SLATE_HAVE_RBD).  Registered from one
 * list in backend.c.
 *
 * Async contract for submit: the backend finishes every submit by calling
 * core_backend_done(req, res) exactly once, with res = bytes transferred or
 * a negative errno, never from inside submit (a synchronous backend defers
 * through rt_defer()).  Backend ops are READ, WRITE, FLUSH and
 * WRITE_ZEROES only; the core builds everything else (compare, orwrite,
 * write same, verify...) from those.  WRITE_ZEROES returns the space
 * (hole punch, dropped pages) unless the request carries CORE_REQ_ANCHOR,
 * which keeps it allocated (only on backends with can_anchor).
 */
#ifndef BACKEND_H
#define BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include <sys/uio.h>

#include "core/req.h"

/* Provisioning status of blocks (SBC-4 4.7.1; NVMe: deallocated or not). */
enum core_prov {
        CORE_PROV_MAPPED = 0,  /* backed by space, holds what was written */
        CORE_PROV_DEALLOCATED, /* no space; reads zeroes */
        CORE_PROV_ANCHORED,    /* space kept, reads zeroes (SCSI anchored) */
};

struct backend_params {
        const char *path;    /* file backend: data file path */
        uint64_t size_bytes; /* requested size; 0 = existing file size */
        bool create;         /* create if missing */
        /*
         * file backend: keep the reservation state in files next to the data
         * file, shared with the other gateways exporting it (file_pr.c).
         */
        bool shared_reservations;
        /* rbd backend (NULL or "" = not given; see rbd.c) */
        const char *pool, *image, *rbd_namespace, *ceph_conf, *client_id, *keyring;
};

/* The identity a backend keeps with its data (backend_ops.identity_load). */
struct backend_identity {
        uint8_t uuid[16];
        uint32_t block_size;
};

struct backend {
        const struct backend_ops *ops;
        uint64_t size_bytes;
        bool volatile_cache; /* data may sit in a volatile cache until flush */
        /*
         * Bytes the backend allocates and frees space in (a power of two:
         * the file system's block, the page); 0 = it does not say.  A
         * deallocation smaller than this, or not aligned to it, frees
         * nothing (the blocks still read zeroes).  Set by open.
         */
        uint32_t alloc_unit;
        /*
         * WRITE_ZEROES of a request with CORE_REQ_ANCHOR keeps the space
         * allocated (the blocks read zeroes) and map_status tells such
         * blocks from mapped and deallocated ones (CORE_PROV_ANCHORED).
         * Set by open; the core sends anchoring only to such backends.
         */
        bool can_anchor;
        /*
         * Bytes (a power of two, at least a block; 0 = none): the store
         * applies one WRITE that stays inside an aligned unit of this size
         * all or nothing, across a crash of this process too, and no reader
         * sees part of it (rbd: the stripe unit, inside one RADOS object:
         * one OSD write op).  The core then offers atomic writes without a
         * journal (core/atomic.c CORE_ATOMIC_OBJECT).  Set by open.
         */
        uint32_t atomic_unit;
        /*
         * The storage is shared (rbd: other gateways, `rbd resize`): its
         * size at open is the namespace's, whatever a local record says.
         * Set by open.
         */
        bool size_shared;
        /*
         * The reservation state lives with the storage (ops->pr_load and
         * pr_store work: rbd always, file with shared_reservations).  Set by
         * open; the core shares the state only where it is set.
         */
        bool pr_shared;
        /*
         * Set by the owner before open (may stay NULL): the backend saw its
         * size change outside this process.  Called on a backend thread,
         * never a reactor; the owner follows with ops->resize.
         */
        void (*size_changed)(struct backend *be, uint64_t size_bytes);
        /*
         * Set by the owner before open (may stay NULL): another process
         * changed the reservation state kept with the storage (ops->pr_store
         * there).  Called on a backend thread, never a reactor; the owner
         * follows with ops->pr_load.
         */
        void (*pr_changed)(struct backend *be);
        /*
         * Set by the owner before open (may stay NULL): another process
         * stored the record key (ops->meta_store there), whose value is now
         * val; or key and val NULL: notices may have been lost (a broken
         * watch), every record the owner keeps a copy of may have changed
         * (it reads them again with ops->meta_load).  Called on a backend
         * thread, never a reactor; the storing process waits (up to the
         * backend's notify timeout) until this returns.
         */
        void (*meta_changed)(struct backend *be, const char *key, const char *val);
        void *priv;
};

struct backend_ops {
        const char *name;
        int (*open)(struct backend *be, const struct backend_params *p);
        void (*close)(struct backend *be);
        /*
         * One backend I/O for req: op in {READ, WRITE, FLUSH, WRITE_ZEROES},
         * byte offset and length, data in iov (READ/WRITE only).  fua: the
         * write must be durable before completion.  Runs on req->reactor.
         */
        void (*submit)(struct backend *be, struct core_req *req, enum core_op op, uint64_t offset,
                       uint64_t len, const struct iovec *iov, int iovcnt, bool fua);
        /*
         * A READ or WRITE of len bytes at offset done now, on the calling
         * reactor, with no completion: for a backend whose I/O is a memcpy
         * (mem), so a core stage that needs a few bytes beside the data
         * (the protection stage's metadata) does not spend an event-loop
         * turn on them.  0 or -errno.  NULL: submit only.
         */
        int (*rw_now)(struct backend *be, enum core_op op, uint64_t offset, uint64_t len,
                      void *buf);
        /*
         * Change the size to size_bytes (control path, while reactors keep
         * submitting I/O below the smaller of the old and new sizes): 0 or
         * -errno, be->size_bytes updated on success.  Growing must make the
         * new range readable (as zeroes) and writable before it returns;
         * nothing a reactor may still use is ever freed or moved.  NULL:
         * the backend cannot resize.
         */
        int (*resize)(struct backend *be, uint64_t size_bytes);
        /*
         * Provisioning (control or data path, synchronous): the status of
         * the byte at offset (*st: mapped, deallocated, or anchored: space
         * kept but reading zeroes) and the length of the run with that
         * status starting there, at most len.  0 or -errno.  NULL:
         * everything is reported mapped.
         */
        int (*map_status)(struct backend *be, uint64_t offset, uint64_t len, enum core_prov *st,
                          uint64_t *run);
        /*
         * map_status waits on something remote (rbd: a cluster round trip
         * per object): the commands that walk it (GET LBA STATUS) run on a
         * core worker, not on the reactor.
         */
        bool map_status_remote;
        /* Bytes of storage actually allocated; -errno when unknown.  NULL: unknown. */
        int64_t (*allocated)(struct backend *be);
        /*
         * Copy len bytes of src (a backend with the same ops) at src_off to
         * dst at dst_off inside the backend, with no user-space buffer
         * (file: copy_file_range, which the kernel makes a reflink where the
         * file system can).  Blocking: called only on a core worker thread,
         * never on a reactor.  Bytes copied (> 0; may be short) or -errno;
         * -EOPNOTSUPP / -EXDEV / -EINVAL: the core copies through reads and
         * writes instead.  NULL: not offered.
         */
        int64_t (*copy)(struct backend *dst, uint64_t dst_off, struct backend *src,
                        uint64_t src_off, uint64_t len);
        /*
         * The namespace's identity kept with the data itself (rbd: image
         * metadata), so every process that opens the same storage reports
         * the same one (control path, blocking).  load: 0, -ENOENT when none
         * is stored yet, other -errno; store: 0 or -errno.  NULL: the
         * identity lives in the namespace's metadata file only.
         */
        int (*identity_load)(struct backend *be, struct backend_identity *id);
        int (*identity_store)(struct backend *be, const struct backend_identity *id);
        /*
         * Reservation state kept with the shared storage (rbd: a RADOS
         * object next to the image; file: files next to the data file,
         * when be->pr_shared), so every gateway exporting it honours
         * one state (core/pr.c).  The state is an opaque string with a
         * version that grows by one with every store.  Control path,
         * blocking (a cluster round trip).  load: *text (malloc'd, or NULL
         * when none is stored yet) and its *version (0 when none); 0 or
         * -errno.  store: replaces the state if its version is still
         * *version, then *version is the new one and the other processes
         * are told (be->pr_changed there); 0, -ECANCELED when another
         * process stored in between (load, apply again, retry), or -errno.
         * NULL: the reservation state lives in this process only.
         */
        int (*pr_load)(struct backend *be, char **text, uint64_t *version);
        int (*pr_store)(struct backend *be, const char *text, uint64_t *version);
        /*
         * Small named records kept with the shared storage (rbd: image
         * metadata "slate.<key>"), which every process that opens the
         * storage reads the same (the core: "crypt", the wrapped data key
         * of core/crypt.h).  Control path, blocking (a cluster round trip).
         * load: *val malloc'd; 0, -ENOENT when none is stored, or -errno.
         * store: 0 or -errno; once stored, the other processes exporting
         * the storage are told (be->meta_changed there, with the value) and
         * it returns when they have taken it, or after the backend's notify
         * timeout.  NULL: the records live in the namespace's metadata file.
         */
        int (*meta_load)(struct backend *be, const char *key, char **val);
        int (*meta_store)(struct backend *be, const char *key, const char *val);
};

const struct backend_ops *backend_find(const char *name);

extern const struct backend_ops backend_mem_ops;
extern const struct backend_ops backend_file_ops;
extern const struct backend_ops backend_null_ops;
#ifdef SLATE_HAVE_RBD
extern const struct backend_ops backend_rbd_ops;
#endif
/* Backends this build can have, and the library each needs ("rbd": "librbd"): for errors. */
const char *backend_missing_lib(const char *name);

/* Backend completion entry into the core; see the contract above. */
void core_backend_done(struct core_req *req, int res);
/* Record the backend I/O a submit starts in req->bio (for retries and checks); not direct. */
static inline void backend_bio_set(struct core_req *req, struct backend *be, enum core_op op,
                                   uint64_t off, uint64_t len, const struct iovec *iov, int iovcnt,
                                   bool fua)
{
        req->bio.be = be;
        req->bio.op = op;
        req->bio.off = off;
        req->bio.len = len;
        req->bio.iov = iov;
        req->bio.iovcnt = iovcnt;
        req->bio.fua = fua;
        req->bio.direct = false;
}

#endif
