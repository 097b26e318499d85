/*
 * The namespace: the core object behind a SCSI logical unit and an NVMe
 * namespace alike.  It has one identity (a UUID Slate generates once and
 * keeps in the namespace's metadata file beside the data), a geometry, a
 * backend, and the state every personality shares: write protection, the
 * volatile write cache setting, persistent reservations.
 *
 * Lifetime: namespaces live in one registry (control path, mutex);
 * personalities hold references with core_ns_get()/core_ns_put().
 */
#ifndef CORE_NS_H
#define CORE_NS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "backend/backend.h"
#include "core/pr.h"

#define CORE_NS_NAME_MAX        64
#define CORE_MAX_TRANSFER_BYTES (1u << 20) /* largest single data transfer we accept */
/*
 * The company ID in every designator derived from a namespace identity
 * (SCSI NAA-6, NVMe EUI-64): a locally administered CID (IEEE "X" bit set),
 * since Slate has no IEEE assignment.  One constant, so both match.
 */
#define CORE_COMPANY_ID 0x5A7E57u

struct core_ns_params {
        const char *name;    /* [A-Za-z0-9._-]{1,63} */
        const char *backend; /* "mem", "file", "null" */
        const char *path;    /* file backend: data file; default <state_dir>/<name>.img */
        uint64_t size_bytes; /* capacity; 0 = existing file size */
        uint32_t block_size; /* 512 or 4096; 0 = 512 */
        bool thin;           /* sparse file (informational until thin provisioning lands) */
        bool write_protect;  /* software write protect at start */
        bool removable;      /* SCSI: removable medium (RMB=1, eject/load, PREVENT) */
};

struct core_ns_stats {
        _Atomic uint64_t read_ops, write_ops, read_bytes, write_bytes, flush_ops;
};

struct core_ns {
        char name[CORE_NS_NAME_MAX];
        char backend_name[16];
        char path[4096];      /* data path (file backend) */
        char meta_path[4096]; /* persistent metadata (identity, geometry, reservations) */
        uint32_t block_size;
        uint32_t block_shift;
        uint64_t num_blocks;
        bool thin;
        bool removable;   /* SCSI removable-medium LU (config option, not persisted) */
        uint8_t uuid[16]; /* the identity; every designator derives from it */
        uint64_t eui64;   /* derived from uuid; also the NAA-6 vendor-specific part */

        struct backend be;

        /* Shared mutable state; lock protects everything below it. */
        pthread_mutex_t lock;
        _Atomic bool write_protect; /* software write protect (SCSI SWP, NVMe WP) */
        _Atomic bool wce;           /* volatile write cache enabled */
        struct core_pr pr;          /* persistent reservations */
        void *scsi_state;           /* owned by the SCSI personality (mode pages etc.) */
        void (*scsi_state_free)(void *);

        /*
         * Ranges under a read-modify-write (COMPARE AND WRITE, ORWRITE):
         * another RMW overlapping one waits (retries next loop iteration).
         */
        pthread_mutex_t rmw_lock;
        uint64_t rmw_lba[32];
        uint64_t rmw_nlb[32];
        uint32_t rmw_used; /* bit per slot */

        struct core_ns_stats stats;
        atomic_int refs;
        struct core_ns *next; /* registry */
};

/* Where metadata and default data files live; set once at start-up. */
void core_set_state_dir(const char *dir);
const char *core_state_dir(void);

/* Creates (or reopens: same name, metadata present) a namespace. 0 or -errno; *err gets a message.
 */
int core_ns_create(const struct core_ns_params *p, struct core_ns **out, char *err, size_t errlen);
/* Removes from the registry; -EBUSY while a personality still references it. */
int core_ns_delete(const char *name);
struct core_ns *core_ns_find(const char *name); /* borrowed; control path only */
void core_ns_get(struct core_ns *ns);
void core_ns_put(struct core_ns *ns);
/* Calls fn for each namespace under the registry lock (control path). */
void core_ns_foreach(void (*fn)(struct core_ns *ns, void *arg), void *arg);
void core_ns_shutdown_all(void);

/* Persist identity/geometry/reservations (call with ns->lock held or unshared). */
int core_ns_save_meta(struct core_ns *ns);

/* Overflow-safe range check: lba + nlb <= num_blocks. */
static inline bool core_ns_range_ok(const struct core_ns *ns, uint64_t lba, uint64_t nlb)
{
        return lba <= ns->num_blocks && nlb <= ns->num_blocks - lba;
}

#endif
