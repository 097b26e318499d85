/*
 * The namespace: the core object behind a SCSI logical unit and an NVMe
 * namespace alike.  It has one identity (a UUID Slate generates once and
 * keeps in the namespace's metadata file beside the data), a geometry, a
 * backend, and the state every personality shares (DESIGN.md "Namespace
 * state and events"): why it is write protected, whether it is ready,
 * stopped or without its medium, sanitize progress and failure, the
 * volatile write cache, capacity, persistent reservations.
 *
 * That state is changed only through core_ns_set_*() (and the sanitize
 * and reservation calls), enforced for every command by core_req_submit()
 * through core_ns_check(), and every change is published once as a core
 * event (core_ns_listen) that the SCSI personality turns into unit
 * attentions and the NVMe personality into asynchronous events.
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
#include "core/flash.h"
#include "core/pi.h"
#include "core/selftest.h"
#include "core/stats.h"

#define CORE_NS_NAME_MAX 64
/*
 * The largest data transfer of one command, either protocol: 32 MiB.  It is
 * what a 16-bit NVMe NLB or SCSI READ(10) reaches with 512-byte blocks and
 * what Linux's iSCSI initiator can send (max_sectors 0xFFFF), and a power of
 * two so NVMe MDTS states it exactly.  Hosts see it as Block Limits MAXIMUM
 * TRANSFER LENGTH and MDTS.
 */
#define CORE_MAX_TRANSFER_BYTES (32u << 20)
/*
 * Transfers up to this size fit the buffer a transport keeps for every
 * command slot (plus as much again as scratch for compares); larger ones
 * borrow a buffer from the reactor's bounded pool of large buffers
 * (rt/bigbuf.h), so a connection costs no more than it did with a 1 MiB
 * limit.  Hosts see it as Block Limits OPTIMAL TRANSFER LENGTH.
 */
#define CORE_SMALL_TRANSFER_BYTES (1u << 20)
/*
 * The default physical block: 4 KiB, the granularity of the file backend's
 * page cache, O_DIRECT and hole punching (a 512-byte namespace is "512e",
 * like most drives sold today).
 */
#define CORE_NS_DEFAULT_PHYS_BLOCK 4096u
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
        /*
         * Physical block size reported to hosts (READ CAPACITY(16) LBPPBE,
         * NVMe NPWG): a power of two, block_size to block_size << 15; 0 =
         * CORE_NS_DEFAULT_PHYS_BLOCK or block_size, whichever is larger.
         */
        uint32_t physical_block_size;
        bool thin;          /* sparse file (informational until thin provisioning lands) */
        bool write_protect; /* software write protect at start */
        bool removable;     /* SCSI: removable medium (RMB=1, eject/load, PREVENT) */
        /*
         * file backend: the data file (or block device) exists with data but
         * the namespace has no metadata (a first export, or metadata lost):
         * give it a new identity anyway.  Without it that is refused, so a
         * host never silently sees a different disk with the old data.
         */
        bool adopt;
        uint32_t sanitize_rate_mibps; /* pace sanitize operations (MiB/s); 0 = backend speed */
        uint32_t selftest_rate_mibps; /* pace self-tests (MiB/s); 0 = backend speed */
        /* Provisioning (provision.c), bytes; 0 = not given: a reopen keeps the saved values. */
        uint64_t provision_limit;     /* hard limit of allocated space */
        uint64_t provision_threshold; /* soft threshold of allocated space */
        /*
         * Atomic writes (core/atomic.h), bytes, a multiple of block_size:
         * the largest write made atomic.  Not set: the saved value, else
         * CORE_ATOMIC_DEFAULT_MAX (0: one block).
         */
        bool atomic_write_max_set;
        uint32_t atomic_write_max;
        /* The flash model (core/flash.h): flash_model, flash_erase_block, flash_op_percent,
         * flash_gc. */
        struct core_flash_params flash;
        /* fdp = false (NVMe, src/nvme/fdp.c): no Flexible Data Placement even with the model. */
        bool fdp_off;
        /*
         * Failing media (core/media.h): physical elements (0..64, 0 = no
         * model) and blocks per stripe unit (0 = saved, else the default).
         * Not set: the saved model.
         */
        bool elements_set;
        uint32_t elements;
        uint32_t element_interleave;
        /*
         * Encryption at rest (core/crypt.h): encrypt makes a new namespace
         * encrypted; an encrypted one (its metadata says so, or on rbd the
         * record kept with the image, ns.c crypt_with_data) opens only with
         * the key-encryption key it was made with, from exactly one of
         * key_file and passphrase_file (files of mode 0600 or stricter).
         * pbkdf2_iter: PBKDF2 iterations for a new passphrase-wrapped key
         * (0 = the default).
         */
        bool encrypt;
        const char *key_file;
        const char *passphrase_file;
        uint32_t pbkdf2_iter;
        /*
         * Protection information (core/pi.h, issue 10): the format a new
         * namespace gets (pi.block_size is ignored: block_size above).  Not
         * set: the saved format, else none (type 0, no metadata).  A reopen
         * with a different format is refused (use core_ns_format).
         */
        bool pi_set;
        struct core_pi_fmt pi;
        /*
         * rbd backend (backend/rbd.c, issue 14): the image pool[/rbd_namespace]/image
         * (must exist), and how to reach the cluster: ceph_conf (default
         * librados' search), client_id (default admin), keyring (a path).
         */
        const char *rbd_pool, *rbd_image, *rbd_namespace;
        const char *ceph_conf, *client_id, *keyring;
        /* The asymmetric access group (core/ana.h), 1..CORE_ANA_GROUPS; 0 = 1. */
        uint32_t ana_group;
        /*
         * file backend: the reservation state is kept next to the data file
         * and shared with every gateway exporting it (backend/file_pr.c).
         */
        bool shared_reservations;
};

/*
 * Why a namespace refuses writes (core_ns.wp, a set of reasons): any bit
 * makes it write protected.  SCSI reports CONFIG, POWER_CYCLE and
 * PERMANENT as WRITE PROTECTED (27h/00h), SOFTWARE as LOGICAL UNIT
 * SOFTWARE WRITE PROTECTED (27h/02h, the control page's SWP bit); NVMe
 * reports every reason as Namespace Is Write Protected and its feature
 * 84h shows the strongest of SOFTWARE/POWER_CYCLE/PERMANENT.
 */
#define CORE_WP_CONFIG   (1u << 0) /* management: namespace_create/namespace_set write_protect */
#define CORE_WP_SOFTWARE (1u << 1) /* a host: SCSI control page SWP, NVMe 84h Write Protect */
#define CORE_WP_POWER_CYCLE                                                                        \
        (1u << 2)                   /* NVMe 84h Write Protect Until Power Cycle (not persisted)    \
                                     */
#define CORE_WP_PERMANENT (1u << 3) /* NVMe 84h Permanent Write Protect (persisted, final) */
#define CORE_WP_SPACE                                                                              \
        (1u << 4) /* out of space for the whole LU: unused, a provisioning limit fails only        \
                     the writes that need space (provision.c) */

/* Whether the medium can be accessed at all. */
enum core_ns_ready {
        CORE_NS_READY = 0, /* started, medium present */
        CORE_NS_STOPPED,   /* SCSI START STOP UNIT START=0: NOT READY, initializing command required
                            */
        CORE_NS_NO_MEDIUM, /* removable medium ejected: MEDIUM NOT PRESENT */
};

/* The most recent sanitize operation (NVMe Sanitize Status SSTAT, SCSI sanitize state). */
enum core_sanitize_state {
        CORE_SAN_NEVER = 0, /* never sanitized */
        CORE_SAN_DONE,      /* the last sanitize completed */
        CORE_SAN_RUNNING,   /* SANITIZE IN PROGRESS: only a few commands are processed */
        CORE_SAN_FAILED,    /* failure mode: medium access fails until a sanitize succeeds */
};

/*
 * Checks core_ns_check() makes, in this order (the order SCSI reports them).
 * core_req_submit() applies them to every request; personalities call it at
 * parse time to reject before any data moves.
 */
#define CORE_CHK_SANITIZING      (1u << 0) /* CORE_E_SANITIZE_IN_PROGRESS while one runs */
#define CORE_CHK_MEDIUM          (1u << 1) /* CORE_E_NO_MEDIUM when ejected */
#define CORE_CHK_STARTED         (1u << 2) /* CORE_E_NOT_READY when stopped (implies MEDIUM) */
#define CORE_CHK_SANITIZE_FAILED (1u << 3) /* CORE_E_SANITIZE_FAILED in failure mode */
#define CORE_CHK_WRITABLE        (1u << 4) /* CORE_E_WRITE_PROTECT[_SOFTWARE] */
/* CORE_E_ANA_* when this gateway's access group of the namespace cannot be accessed (first). */
#define CORE_CHK_ACCESS (1u << 5)

/*
 * Provisioned-capacity limits (provision.c): a hard limit and a soft
 * threshold of allocated bytes, and the running estimate that lets the
 * data path enforce them without asking the backend on every write.
 */
struct core_prov_limits {
        _Atomic uint64_t limit;     /* hard limit of allocated bytes; 0 = none */
        _Atomic uint64_t threshold; /* soft threshold of allocated bytes; 0 = none */
        _Atomic uint64_t est;       /* estimate of allocated bytes, never below the real figure
                                       by more than writes not yet completed */
        _Atomic uint64_t inflight;  /* bytes reserved by allocating writes not yet completed */
        _Atomic bool reached;       /* the threshold was crossed upward and is not re-armed */
};

struct core_pool;
struct core_pistore;
struct core_crypt;
struct core_atomic;
struct core_media;

/*
 * The misaligned writes a namespace remembers (SCSI LPS Misalignment log
 * page 15h/03h MAX_LPSM): the first ones since slated started; later ones
 * are still counted in the statistics (core_stats_misaligned_count).
 */
#define CORE_LPSM_MAX 64u

/* Plain-command counters of the atomic-write ordering (one per reactor, modulo). */
#define CORE_NS_ORDER_SLOTS 16

/* Atomic writes done by the engine (core/atomic.c); metrics and namespace_get. */
struct core_atomic_stats {
        _Atomic uint64_t writes;        /* atomic writes completed */
        _Atomic uint64_t journal_bytes; /* bytes written to the intent journal */
        _Atomic uint64_t journal_syncs; /* journal syncs (one per group commit) */
        _Atomic uint64_t checkpoints;   /* data syncs that retired journal records */
        _Atomic uint64_t replayed;      /* records replayed at open */
        _Atomic uint64_t discarded;     /* torn records discarded at open */
        _Atomic uint64_t native_writes; /* atomic writes done by the backend (RWF_ATOMIC) */
};

/*
 * Copies into this namespace made inside the target (core/copy.h); rare, so
 * plain atomics.  active_bytes/active_done: the bytes of the copies running
 * now (their ranges into this namespace) and how many of them are done; a
 * copy adds its bytes when it starts and takes both back when it ends.
 */
struct core_copy_stats {
        _Atomic uint64_t ops, bytes;
        _Atomic uint64_t active_bytes, active_done;
};

struct core_ns {
        char name[CORE_NS_NAME_MAX];
        char backend_name[16];
        char path[4096];      /* data path (file backend); rbd: "rbd:pool[/namespace]/image" */
        char meta_path[4096]; /* persistent metadata (identity, geometry, reservations) */
        uint32_t block_size;
        uint32_t block_shift;
        uint8_t phys_exp; /* log2(physical block / logical block): SCSI LBPPBE */
        /*
         * Capacity in blocks: read on every reactor (use core_ns_blocks(),
         * one load per decision), changed only by core_ns_resize().
         */
        _Atomic uint64_t num_blocks;
        bool thin;
        bool removable;   /* SCSI removable-medium LU (config option, not persisted) */
        uint8_t uuid[16]; /* the identity; every designator derives from it */
        uint64_t eui64;   /* derived from uuid; also the NAA-6 vendor-specific part */

        struct backend be;

        /*
         * Shared state (see the top of this file).  Read lock-free on the
         * data path; written only by core_ns_set_*() and the sanitize and
         * reservation calls, under lock, which protects everything below it.
         */
        pthread_mutex_t lock;
        _Atomic uint32_t wp;           /* CORE_WP_* reasons; 0 = writable */
        _Atomic uint32_t ana_group;    /* asymmetric access group (core/ana.h), 1.. */
        _Atomic uint8_t ready;         /* enum core_ns_ready */
        _Atomic uint8_t san_state;     /* enum core_sanitize_state */
        _Atomic uint16_t san_progress; /* of a running sanitize, 0..65535 */
        bool san_exit_allowed;         /* the failed sanitize allowed EXIT FAILURE MODE (AUSE) */
        uint32_t san_rate_mibps;       /* sanitize pacing (config, not persisted); 0 = unpaced */
        struct core_sanitize *san;     /* the last or running sanitize (core/sanitize.c) */
        _Atomic bool wce;              /* volatile write cache enabled */
        struct core_pr pr;             /* persistent reservations */
        uint64_t pr_version;           /* of the shared state pr copies (core_pr_shared_update) */
        void *scsi_state;              /* owned by the SCSI personality (D_SENSE, PREVENT ...) */
        void (*scsi_state_free)(void *);

        /*
         * The range lock (core/req.c): ranges held by a read-modify-write
         * (COMPARE AND WRITE, ORWRITE), by an atomic write, and, while any
         * atomic write is in flight, by every other medium command; an
         * overlapping command waits (retries next loop iteration).  With
         * no atomic write in flight a plain command takes no lock: it
         * counts itself in its reactor's plain_inflight slot and checks
         * atomic_active (seq_cst both ways, Dekker): an atomic write raises
         * atomic_active and waits until every slot is 0 before it runs.
         */
        pthread_mutex_t rmw_lock;
        uint64_t rmw_lba[64];
        uint64_t rmw_nlb[64];
        uint64_t rmw_used; /* bit per slot */
        _Atomic uint32_t atomic_active;
        struct {
                _Atomic uint64_t n;
                char pad[56];
        } plain_inflight[CORE_NS_ORDER_SLOTS];

        /* Atomic writes (core/atomic.c): the configured maximum, the engine. */
        _Atomic uint32_t atomic_max_bytes;
        struct core_atomic *atomic;
        struct core_atomic_stats atomic_stats;

        struct core_prov_limits prov;   /* provisioning limits (provision.c) */
        struct core_pool *_Atomic pool; /* the directory's pool (pool.c); NULL = none */
        struct core_ns *pool_next;      /* the pool's member list (pool.c) */
        struct core_stats stats;        /* I/O counted by the core (core/stats.h) */
        /*
         * Health (log pages): the running self-test and the results of the
         * last ones (core/selftest.h; selftest under lock), the pacing of
         * self-tests (config, not persisted; 0 = unpaced), the most recent
         * informational exception (enum core_exception), the START STOP
         * UNIT cycles (persisted), and the first CORE_LPSM_MAX misaligned
         * writes (core_ns_lpsm).
         */
        struct core_selftest *selftest;
        struct core_selftest_log selftest_log;
        uint32_t selftest_rate_mibps;
        _Atomic uint8_t exception;
        _Atomic uint64_t start_stop_cycles;
        _Atomic uint64_t lpsm_n;                  /* misaligned writes since start */
        _Atomic uint64_t lpsm_lba[CORE_LPSM_MAX]; /* their LBAs + 1 (0: not yet stored) */
        struct core_copy_stats copy_stats;
        /*
         * Placement ids and hint counters (always), the flash model (NULL =
         * off): core/flash.h.  Set at create, before the namespace is shared.
         */
        struct core_placements *placements;
        struct core_flash *flash;
        bool fdp_off; /* core_ns_params.fdp_off; set at create */
        /*
         * Failing media (core/media.h): CORE_MEDIA_F_* flags the data path
         * loads once per request, and the model (its own lock).
         */
        _Atomic uint32_t media_flags;
        struct core_media *media;
        /*
         * Encryption at rest (core/crypt.h); NULL = stored in the clear.  Set
         * at create, with the path of the KEK's file (a key file, or a
         * passphrase file when kek_passphrase): config_save writes it back.
         * Its key may change under I/O (core_crypt_adopt: another gateway's
         * cryptographic erase); the pointer does not.
         */
        struct core_crypt *crypt;
        char kek_path[4096];
        /* rbd backend: what namespace_create was given (core_ns_params), for config_save. */
        struct {
                char pool[128], image[128], ns[128], client_id[128];
                char conf[4096], keyring[4096];
        } rbd;
        bool kek_passphrase;
        /*
         * Protection information (issue 10): the metadata format of every
         * block (type 0 and md_size 0: none), read on the data path through
         * core_ns_pi_fmt() (one consistent copy per request), changed only
         * by core_ns_format() (persisted in the metadata; CORE_NS_EV_FORMAT),
         * and the store that keeps each block's metadata beside its data
         * (core/pistore.c; NULL while the format has none).  apptab: the
         * SCSI Application Tag mode page's ranges (core_ns_set_apptab), used
         * by requests with pi.use_apptab.
         */
        struct core_pi_fmt pi;
        _Atomic uint32_t pi_gen; /* seqcount: odd while core_ns_format changes pi */
        struct core_pistore *pistore;
        struct core_pi_apptab *_Atomic apptab;
        /*
         * Quiescing for core_ns_format (core/pi_ns.c): every request that
         * reaches the data path counts itself in its reactor's pi_users
         * slot (seq_cst, Dekker with pi_quiesce); while pi_quiesce is set
         * new ones wait (retry next loop iteration), and the format waits
         * for every slot to drain.  Replaced application tag tables wait
         * in apptab_retired until no request that could read them runs.
         */
        _Atomic uint32_t pi_quiesce;
        struct {
                _Atomic uint64_t n;
                char pad[56];
        } pi_users[CORE_NS_ORDER_SLOTS];
        void *apptab_retired;
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

/* ---- Thin provisioning ---- */

/*
 * Provisioning of the blocks from lba (at most max_nlb; 0 = to the end):
 * *st for the block at lba and *nlb >= 1 blocks in a row with that
 * status.  The file backend asks the file system (SEEK_DATA/SEEK_HOLE, and
 * FIEMAP's unwritten extents for anchored blocks: the map is the file's
 * own allocation, crash-safe by construction); mem keeps a bit per page it
 * holds; null tracks nothing and reports mapped, as does a namespace that
 * is not thin.  0, or -ERANGE when lba is past the end.
 */
/*
 * Whether core_ns_lba_status() waits on remote storage (backend
 * map_status_remote): a command walking many runs then belongs on a core
 * worker (core_query_workers), not on the reactor.
 */
bool core_ns_lba_status_remote(const struct core_ns *ns);
int core_ns_lba_status(struct core_ns *ns, uint64_t lba, uint64_t max_nlb, enum core_prov *st,
                       uint64_t *nlb);
/*
 * Whether blocks can be anchored (DEALLOCATE with CORE_REQ_ANCHOR; SCSI
 * ANC_SUP): a thin namespace whose backend can keep space allocated and
 * tell it apart (the file backend on ext4 or xfs), decided at open.
 */
static inline bool core_ns_can_anchor(const struct core_ns *ns)
{
        return ns->thin && ns->be.can_anchor;
}
/* Bytes the backend really has allocated (file: st_blocks); -errno when unknown. */
int64_t core_ns_allocated_bytes(struct core_ns *ns);
/*
 * The granularity and alignment, in blocks, in which deallocation really
 * frees space: the backend's allocation unit (file: the file system's
 * block; mem: the page), and never less than the physical block (hosts
 * are told that is the unit); 0 when neither says more than one block.
 * SCSI reports it as OPTIMAL UNMAP GRANULARITY, NVMe as NPWG/NPDG/NPDA.
 */
uint32_t core_ns_dealloc_granularity(const struct core_ns *ns);

/*
 * Whether a mem namespace of bytes fits this machine's memory (RAM and
 * swap): 0, or -ENOMEM with the sizes in err.  Creating and growing one
 * beyond it is refused (untouched blocks cost nothing, but a host may
 * write them all).
 */
int core_ns_mem_fits(uint64_t bytes, char *err, size_t errlen);

/* ---- Unrecoverable blocks ---- */

struct core_lba_range {
        uint64_t lba;
        uint64_t nlb;
};
/*
 * The first run of blocks in [lba, lba + nlb) that may return an
 * unrecovered read error (NVMe Get LBA Status and log 0Eh, SCSI GET LBA
 * STATUS report type 10h), clipped to that window: 1 and *out, or 0 when
 * there is none.  Answers from the failing-media model (core/media.h): the
 * marked ranges and every LBA of a FAILED element.
 */
int core_ns_unrecoverable(struct core_ns *ns, uint64_t lba, uint64_t nlb,
                          struct core_lba_range *out);

/*
 * The misaligned writes remembered (at most CORE_LPSM_MAX, oldest first) into
 * lba; returns how many.  Any thread.
 */
unsigned core_ns_lpsm(const struct core_ns *ns, uint64_t *lba);
/* START STOP UNIT cycles: stops of a started namespace (persisted, any thread). */
static inline uint64_t core_ns_start_stop_cycles(const struct core_ns *ns)
{
        return atomic_load_explicit(&ns->start_stop_cycles, memory_order_relaxed);
}

/* Persist identity/geometry/reservations (call with ns->lock held or unshared). */
int core_ns_save_meta(struct core_ns *ns);
/*
 * Cryptographic erase of an encrypted namespace (ns->crypt): a new data
 * key replaces the old one, in memory and where the wrapped key is kept --
 * the metadata file, or the storage itself when the backend keeps records
 * with it (ops->meta_store: rbd), where the other gateways are told and
 * take the new key before this returns (as far as they acknowledge).
 * Blocking (control path or the sanitize's start); ns->lock not held.
 * 0 or -errno (the old key still in use everywhere).
 */
int core_ns_crypt_erase(struct core_ns *ns);

/* ---- State (the only writers of the shared state above) ---- */

/*
 * Who made a change: the personality object whose command did it (an
 * SCSI I_T nexus, an NVMe controller), passed back in the event so that,
 * where the standard says so, the originator is not told of its own
 * change.  NULL: management (RPC, config), every host is told.
 */
typedef const void *core_origin_t;

/*
 * Set or clear write-protect reasons (CORE_WP_*).  PERMANENT is never
 * cleared and is persisted in the metadata before it takes effect (0 or
 * the -errno of saving it; nothing changes then); POWER_CYCLE is never
 * cleared either: only a restart of slated (the "power cycle") drops it
 * (persisted for the current run only).
 */
int core_ns_set_wp(struct core_ns *ns, uint32_t reasons, bool on, core_origin_t origin);
static inline uint32_t core_ns_wp(const struct core_ns *ns)
{
        return atomic_load_explicit(&ns->wp, memory_order_acquire);
}
void core_ns_set_ready(struct core_ns *ns, enum core_ns_ready r, core_origin_t origin);
static inline enum core_ns_ready core_ns_ready(const struct core_ns *ns)
{
        return (enum core_ns_ready)atomic_load_explicit(&ns->ready, memory_order_acquire);
}
void core_ns_set_wce(struct core_ns *ns, bool on, core_origin_t origin);
/*
 * Sanitize state transitions (the engine calls these): begin fails with
 * -EBUSY when one already runs; end leaves DONE or FAILED (exit_allowed:
 * the failure may be left by an EXIT FAILURE MODE).  Progress is
 * 0..65535.  exit_failure leaves FAILED for DONE (-EPERM if not allowed).
 */
int core_ns_sanitize_begin(struct core_ns *ns, core_origin_t origin);
void core_ns_sanitize_progress(struct core_ns *ns, uint16_t progress);
void core_ns_sanitize_end(struct core_ns *ns, bool ok, bool exit_allowed, core_origin_t origin);
int core_ns_sanitize_exit_failure(struct core_ns *ns, core_origin_t origin);
static inline enum core_sanitize_state core_ns_sanitize_state(const struct core_ns *ns)
{
        return (enum core_sanitize_state)atomic_load_explicit(&ns->san_state, memory_order_acquire);
}

/*
 * Change the capacity to num_blocks (control path).  Growing asks the
 * backend to grow first, then publishes the new size; shrinking is refused
 * with -EBUSY while a personality holds the namespace (an iSCSI LUN map,
 * an NVMe attachment: a host may hold the blocks) unless force, then
 * publishes the smaller size before the backend shrinks.  The size is
 * persisted, and CORE_NS_EV_CAPACITY is published (origin NULL).  0 or
 * -errno (-EBUSY also while a sanitize runs; -EOPNOTSUPP: the backend
 * cannot resize; -ENOSPC: cannot grow so far), with a message in err.
 */
int core_ns_resize(struct core_ns *ns, uint64_t num_blocks, bool force, char *err, size_t errlen);

/* ---- Provisioned-capacity limits (provision.c) ---- */

/*
 * Thresholds and the log
 * counts a host reads are in threshold sets of CORE_PROV_SET_BYTES (SCSI
 * THRESHOLD EXPONENT = log2 of that in blocks).
 */
#define CORE_PROV_SET_BYTES (1u << 20)
/* CORE_NS_EV_PROVISIONING new_val bits: what changed. */
#define CORE_PROV_CHG_LIMIT     (1u << 0)
#define CORE_PROV_CHG_THRESHOLD (1u << 1)

/* Whether ns can have a limit: thin, on a backend that reports its allocation. */
bool core_ns_provision_supported(const struct core_ns *ns);
/*
 * Set the hard limit and the soft threshold (bytes, 0 = none) together:
 * the only writer of both (RPC, config, SCSI MODE SELECT of the Logical
 * Block Provisioning mode page).  The limit is a multiple of the block
 * size, the threshold of CORE_PROV_SET_BYTES and not above a limit.
 * Persisted before it takes effect; CORE_NS_EV_PROVISIONING is published
 * when anything changed, and CORE_NS_EV_SPACE_THRESHOLD when the usage is
 * at or above a new threshold.  0 or -errno (-EINVAL, -EOPNOTSUPP, or the
 * error saving the metadata), with a message in err.
 */
int core_ns_set_provision(struct core_ns *ns, uint64_t limit, uint64_t threshold,
                          core_origin_t origin, char *err, size_t errlen);
/* The counters namespace_list, SCSI LOG SENSE 0Ch and NVMe NUSE/NCAP report (control path). */
struct core_prov_info {
        uint64_t capacity;    /* bytes */
        uint64_t limit;       /* hard limit, bytes; 0 = none */
        uint64_t threshold;   /* soft threshold, bytes; 0 = none */
        uint64_t mapped;      /* allocated bytes (the whole capacity when not tracked) */
        uint64_t deallocated; /* capacity - mapped */
        uint64_t available;   /* (limit, or capacity) - mapped, 0 when beyond */
        bool tracked;         /* the backend reports its allocation */
        bool reached;         /* usage crossed the threshold (not re-armed) */
        bool pooled;          /* available is bounded by the directory's pool limit */
};
void core_ns_provision_info(struct core_ns *ns, struct core_prov_info *out);

/*
 * Pools (pool.c): a hard limit shared by the thin file namespaces whose
 * data files are in one directory.  core_pool_set creates or changes the
 * pool of dir (which must exist; limit 0 switches it off); namespaces join
 * it at once and when they are created later.  0 or -errno with err.
 */
int core_pool_set(const char *dir, uint64_t limit, char *err, size_t errlen);
struct core_pool_info {
        char dir[4096];
        uint64_t limit, mapped, available; /* bytes */
        unsigned members;
};
/* A pool's counters; -ENOENT when pool is NULL or switched off. */
int core_pool_info(const struct core_pool *pool, struct core_pool_info *out);
/* fn for every pool with a limit (control path). */
void core_pool_foreach(void (*fn)(const struct core_pool_info *pi, void *arg), void *arg);

/* ---- The sanitize engine (sanitize.c) ---- */

enum core_sanitize_action {
        CORE_SANACT_NONE = 0,
        CORE_SANACT_OVERWRITE,    /* write a pattern over every block, passes times */
        CORE_SANACT_BLOCK_ERASE,  /* deallocate every block (reads return zeroes) */
        CORE_SANACT_CRYPTO_ERASE, /* replace the data key (encrypted namespaces only) */
};

#define CORE_SANITIZE_MAX_PASSES 31 /* SCSI OVERWRITE COUNT is 5 bits; NVMe allows 16 */

struct core_sanitize_params {
        enum core_sanitize_action action;
        uint8_t passes;         /* overwrite: 1..CORE_SANITIZE_MAX_PASSES */
        bool invert;            /* overwrite: invert the pattern between passes */
        bool ause;              /* a failure may be left by EXIT FAILURE MODE */
        bool no_dealloc;        /* block erase: write zeroes, keep blocks allocated (NVMe NDAS) */
        uint32_t pattern_len;   /* overwrite: 1..block_size bytes, repeated over each block */
        const uint8_t *pattern; /* borrowed for the call; the engine keeps a copy */
};

/*
 * Start a sanitize operation of the whole namespace in the background, on
 * reactor r.  Returns -EBUSY when one already runs (the caller reports
 * SANITIZE IN PROGRESS), -EINVAL for parameters the engine cannot honour
 * (crypto erase of a namespace not encrypted, a pattern longer than a block, 0
 * passes), -ENOMEM; or 0,
 * and then calls done(arg, ok) exactly once on r when the operation ends
 * (ok: completed and flushed), never from inside the call.  done may be
 * NULL (NVMe: the command completes at once; the Sanitize Status log and
 * the event tell the rest).  The operation is the namespace's, not the
 * caller's: it outlives commands, connections and resets, and the
 * namespace's metadata records it, so a restart resumes it from the start.
 */
int core_sanitize_start(struct core_ns *ns, const struct core_sanitize_params *p,
                        core_origin_t origin, struct rt_reactor *r,
                        void (*done)(void *arg, bool ok), void *arg);

/* What the NVMe Sanitize Status log and namespace_list report. */
struct core_sanitize_info {
        enum core_sanitize_state state;
        uint16_t progress;             /* 0..65535 of a running one */
        struct core_sanitize_params p; /* the most recent one's (pattern NULL) */
        uint8_t passes_done;           /* overwrite passes completed (most recent) */
        bool untouched;                /* completed, and nothing written since (NVMe GDE) */
};
void core_sanitize_info(struct core_ns *ns, struct core_sanitize_info *out);
/* Seconds an operation would take (pacing, or the last measured speed); UINT32_MAX = unknown. */
uint32_t core_sanitize_estimate_s(struct core_ns *ns, enum core_sanitize_action a, unsigned passes);

/* The first failing check of chk (CORE_CHK_*), or CORE_OK. */
enum core_status core_ns_check(const struct core_ns *ns, unsigned chk);

/* ---- Protection information (issue 10; core/pi.h is the engine) ---- */

/* The namespace's metadata format now (a consistent copy; any thread). */
void core_ns_pi_fmt(const struct core_ns *ns, struct core_pi_fmt *out);
/* Metadata bytes per logical block (0: the format has none); any thread. */
uint32_t core_ns_md_per_block(const struct core_ns *ns);
/*
 * Bytes a transfer of nlb blocks takes on the wire: nlb * block_size, plus
 * the metadata of each block when host_md (SCSI RDPROTECT/WRPROTECT/
 * VRPROTECT non-zero; NVMe extended LBAs unless PRACT strips an 8- or
 * 16-byte PI-only metadata).  The personality sizes the data transfer with
 * it.
 */
uint64_t core_ns_xfer_bytes(const struct core_ns *ns, uint64_t nlb, bool host_md);
/*
 * Format the namespace to a new metadata format (SCSI FORMAT UNIT, NVMe
 * Format NVM, RPC namespace_format).  pi->block_size must be the
 * namespace's block size (no block-size change); md_size 0 with type 0 is
 * no metadata.  Waits for the namespace's commands in flight, keeps the
 * data, and sets every block's metadata to all FFh (the PI escape: no
 * check fails until a block is written).  Persisted before it returns;
 * publishes CORE_NS_EV_FORMAT (old/new: the PI types).  0 or -errno:
 * -EINVAL (inconsistent format), -ENOTSUP (a guard this build lacks, or a
 * backend without a metadata store), -EBUSY (sanitize running, or the
 * commands in flight did not drain within 30 s), with err.  Blocking:
 * call it from the control path or a worker thread, never on a reactor
 * (it waits for the reactors' commands).
 */
int core_ns_format(struct core_ns *ns, const struct core_pi_fmt *pi, core_origin_t origin,
                   char *err, size_t errlen);
/* Whether every pi_users slot is 0 now (core/pi_ns.c). */
bool core_ns_pi_idle(struct core_ns *ns);
/*
 * Open (at create; fresh: a new namespace, whose store starts empty even if
 * an old <name>.pi is left) or close (at free) the metadata store; 0 or -errno.
 */
int core_ns_pi_open(struct core_ns *ns, bool fresh, char *err, size_t errlen);
void core_ns_pi_close(struct core_ns *ns);
/* The format as the metadata file keeps it (NULL: none), and back (0, or -EINVAL). */
struct json_t;
struct json_t *core_ns_pi_to_json(const struct core_pi_fmt *f);
int core_ns_pi_from_json(struct json_t *j, struct core_pi_fmt *f, uint32_t block_size);
/*
 * The application tag table (SCSI Application Tag mode page, SBC-4
 * 6.5.3): replaces the ranges (n 0: none).  -EINVAL as core_pi_apptab_set.
 * Not persisted (the page is not savable).  Control path.
 */
int core_ns_set_apptab(struct core_ns *ns, const struct core_pi_apptag_range *r, size_t n,
                       core_origin_t origin, char *err, size_t errlen);
/* A copy of the table's ranges (at most max); returns how many. */
size_t core_ns_apptab(struct core_ns *ns, struct core_pi_apptag_range *out, size_t max);

/* ---- Events (event.c) ---- */

enum core_ns_event_type {
        CORE_NS_EV_CAPACITY = 0,    /* num_blocks changed */
        CORE_NS_EV_WRITE_PROTECT,   /* wp reasons changed (old/new: the reason sets) */
        CORE_NS_EV_WRITE_CACHE,     /* wce changed */
        CORE_NS_EV_READY,           /* ready state changed (old/new: enum core_ns_ready) */
        CORE_NS_EV_SANITIZE,        /* sanitize state changed (old/new: enum core_sanitize_state) */
        CORE_NS_EV_RESERVATION,     /* a registrant lost its reservation/registration (pr_*) */
        CORE_NS_EV_IDENTITY,        /* identification data (INQUIRY, Identify) changed */
        CORE_NS_EV_PROVISIONING,    /* limit/threshold changed (new_val: CORE_PROV_CHG_*) */
        CORE_NS_EV_SPACE_THRESHOLD, /* allocated space crossed the soft threshold upward */
        CORE_NS_EV_MEDIA, /* unrecoverable set or an element changed (core/media.h CORE_MEDIA_CHG_*)
                           */
        CORE_NS_EV_FORMAT, /* metadata / protection format changed (old/new: PI type) */
        CORE_NS_EV_ANA,    /* its access group's state, or its group, changed (old/new: states) */
        CORE_NS_EV_MAX
};

struct core_ns_event {
        enum core_ns_event_type type;
        struct core_ns *ns;
        core_origin_t origin;
        uint32_t old_val, new_val;
        /*
         * CORE_NS_EV_RESERVATION (published by core_ns_pr_out, one per
         * registrant affected): the registrant told (a copy, valid for the
         * call only; SCSI nexus or NVMe host, see nvme/resv.c) and its
         * CORE_PR_EV_* bits, CORE_PR_EV_ABORT included for PREEMPT AND ABORT.
         */
        const struct core_pr_reg *pr_reg;
        unsigned pr_events;
};

typedef void (*core_ns_listener_fn)(const struct core_ns_event *ev, void *arg);
/*
 * Register a listener (a personality, at start-up; at most 8).  Listeners
 * run synchronously on the thread that made the change, with no core lock
 * held: they must only record (set unit attentions, queue events) and
 * never call back into a core_ns_set_*().
 */
int core_ns_listen(core_ns_listener_fn fn, void *arg);
void core_ns_publish(const struct core_ns_event *ev);

static inline uint64_t core_ns_blocks(const struct core_ns *ns)
{
        return atomic_load_explicit(&ns->num_blocks, memory_order_acquire);
}

/* Overflow-safe range check: lba + nlb <= num_blocks (one load: a resize may run). */
static inline bool core_ns_range_ok(const struct core_ns *ns, uint64_t lba, uint64_t nlb)
{
        uint64_t n = core_ns_blocks(ns);
        return lba <= n && nlb <= n - lba;
}

#endif
