/*
 * Placement ids, access hints and the flash model (issue 9).
 *
 * Streams (SCSI WRITE STREAM, the permanent streams of group numbers, NVMe
 * Streams directives) and NVMe Flexible Data Placement all say the same
 * thing: "these writes belong together, put them in the same erase
 * blocks".  The core gives every such thing a placement id, one table per
 * namespace shared by both personalities, and a request carries it in
 * core_req.placement.  Access hints (SCSI IO advice hints, NVMe DSM access
 * attributes) travel in core_req.hints as CORE_HINT_* bits.
 *
 * The core counts what was written per placement id and per hint, always.
 * When the namespace has the optional flash model (flash_model = true) it
 * also feeds every write and deallocation to a model of a NAND drive:
 * erase blocks (reclaim units) of flash_erase_block bytes, flash_op_percent
 * over-provisioning, a logical-to-physical map at model-unit granularity,
 * one open erase block per placement id (plus one shared by placement 0,
 * and one each for writes hinted short-lived / long-lived without a
 * placement), greedy or cost-benefit garbage collection.  It counts write
 * amplification exactly: media bytes (host + GC moves) / host bytes, per
 * placement and in total.  The model only models: the backend stores the
 * data as before.
 *
 * Threads: the placement table and the model are per namespace.  The
 * model's bookkeeping runs on the reactor that completes the request,
 * under a per-namespace mutex (flash.c: held for one write's map updates
 * and at most one erase block's worth of GC moves: a few microseconds;
 * documented choice, the model is a measuring instrument).  A namespace
 * without the model and without placements/hints pays one branch.
 */
#ifndef CORE_FLASH_H
#define CORE_FLASH_H

#include <stdbool.h>
#include <stdint.h>

struct core_ns;
struct core_req;

/* ---- Access hints (core_req.hints) ---- */

#define CORE_HINT_SEQUENTIAL     (1u << 0) /* part of a sequential access (NVMe DSM SEQREQ) */
#define CORE_HINT_RANDOM         (1u << 1) /* random access */
#define CORE_HINT_READ_FREQ      (1u << 2) /* will be read often */
#define CORE_HINT_READ_RARE      (1u << 3) /* will be read rarely */
#define CORE_HINT_WRITE_FREQ     (1u << 4) /* rewritten often: short lifetime */
#define CORE_HINT_WRITE_RARE     (1u << 5) /* written once: long lifetime */
#define CORE_HINT_LOW_LATENCY    (1u << 6) /* latency matters (NVMe DSM access latency) */
#define CORE_HINT_INCOMPRESSIBLE (1u << 7) /* data will not compress (NVMe DSM) */
#define CORE_HINT_BITS           8
const char *core_hint_name(unsigned bit); /* "sequential", ...; bit 0..CORE_HINT_BITS-1 */

/* ---- Placement ids (core_req.placement) ---- */

/* Placement ids are 1..CORE_PLACEMENT_MAX; 0 means none. */
#define CORE_PLACEMENT_MAX 64

enum core_placement_kind {
        CORE_PL_NONE = 0,
        CORE_PL_SCSI_STREAM, /* key: stream id opened by STREAM CONTROL */
        CORE_PL_SCSI_GROUP,  /* key: group number 1..63 (permanent streams) */
        CORE_PL_NVME_STREAM, /* key: CORE_PL_NVME_KEY(host/controller key, stream id) */
        CORE_PL_FDP_RUH,     /* key: reclaim unit handle index */
        CORE_PL_KIND_MAX
};
const char *core_placement_kind_name(enum core_placement_kind k); /* "scsi_stream", ... */

/* NVMe streams are per host: a 32-bit host/controller key and the 16-bit stream id. */
#define CORE_PL_NVME_KEY(host, sid) (((uint64_t)(uint32_t)(host) << 16) | (uint16_t)(sid))

/*
 * Find the placement id of (kind, key), allocating one if there is none,
 * and take a reference on it.  0 and *id (1..CORE_PLACEMENT_MAX), or
 * -ENOSPC when core_placement_max(ns) ids are in use, -EINVAL for a bad
 * kind.  Control path or data path (short mutex).
 */
int core_placement_get(struct core_ns *ns, enum core_placement_kind kind, uint64_t key,
                       uint16_t *id);
/*
 * Look (kind, key) up without allocating or referencing: its id, or 0 when
 * it has none.  Lock-free: the data path may call it for every write.
 */
uint16_t core_placement_find(const struct core_ns *ns, enum core_placement_kind kind, uint64_t key);
/*
 * Drop a reference; the id is freed when the last one goes (its counters
 * are kept for the statistics until the id is reused).  Ids not in use
 * are ignored.
 */
void core_placement_put(struct core_ns *ns, uint16_t id);
/*
 * How many placement ids this namespace can have open at once: what SCSI
 * (MAXIMUM NUMBER OF STREAMS) and NVMe (MSL/NSSA, number of RUHs)
 * advertise.  CORE_PLACEMENT_MAX, or less with the flash model when the
 * geometry has too few spare erase blocks to keep one open per id.
 */
unsigned core_placement_max(const struct core_ns *ns);
/* Placement ids in use. */
unsigned core_placement_used(const struct core_ns *ns);

/* What is known about one placement id (control path; statistics). */
struct core_placement_info {
        uint16_t id;
        bool in_use;
        enum core_placement_kind kind;
        uint64_t key;
        unsigned refs;
        uint64_t bytes_written;              /* host bytes written with this id */
        uint64_t hint_bytes[CORE_HINT_BITS]; /* of which with each hint bit */
};
/* 0, or -ENOENT when id is out of range (an id never used reads all zero). */
int core_placement_info(const struct core_ns *ns, uint16_t id, struct core_placement_info *out);
/* Bytes written per hint bit on the whole namespace (any placement). */
void core_hint_bytes(const struct core_ns *ns, uint64_t out[CORE_HINT_BITS]);

/* ---- The flash model ---- */

enum core_flash_gc {
        CORE_FLASH_GC_GREEDY = 0,   /* victim: fewest valid units */
        CORE_FLASH_GC_COST_BENEFIT, /* victim: max (1-u)/(2u) * age (Rosenblum & Ousterhout) */
};
const char *core_flash_gc_name(enum core_flash_gc g);
int core_flash_gc_parse(const char *s, enum core_flash_gc *out); /* 0 or -EINVAL */

/* Namespace parameters (core_ns_params.flash); 0 fields take the defaults. */
struct core_flash_params {
        bool enable;          /* flash_model */
        uint64_t erase_block; /* flash_erase_block: bytes, a multiple of the model unit */
        uint32_t op_percent;  /* flash_op_percent: spare capacity in % of the logical (0..400) */
        bool op_set;          /* op_percent was given (0 is a valid value) */
        enum core_flash_gc gc;
        bool gc_set;
};
#define CORE_FLASH_DEFAULT_ERASE_BLOCK (1u << 20)
#define CORE_FLASH_DEFAULT_OP_PERCENT  7
/* The model unit: max(4 KiB, block size), doubled until the map has at most this many units. */
#define CORE_FLASH_MAX_UNITS (1u << 24)

/* Counters: exact, since the model was created (or its state last reset). */
struct core_flash_stats {
        uint64_t host_bytes;    /* written by hosts (model units touched x unit) */
        uint64_t media_bytes;   /* written to the modelled media: host + gc moves */
        uint64_t gc_bytes;      /* moved by garbage collection */
        uint64_t erases;        /* erase blocks erased (per placement: erased while owned by it) */
        uint64_t dealloc_bytes; /* valid data invalidated by deallocation */
        uint64_t valid_bytes;   /* valid data now (per placement: in its erase blocks) */
        uint64_t erase_blocks;  /* erase blocks it holds now (open and full) */
};

/* Geometry and state of a namespace's model (control path). */
struct core_flash_info {
        bool enabled;
        uint32_t unit;        /* model unit, bytes */
        uint64_t erase_block; /* bytes (the FDP reclaim unit size) */
        uint32_t op_percent;
        enum core_flash_gc gc;
        uint64_t logical_units; /* capacity / unit */
        uint64_t total_blocks;  /* erase blocks, spare included */
        uint64_t free_blocks;
        uint64_t gc_runs; /* victims collected */
};

/* Whether ns has the flash model. */
bool core_flash_enabled(const struct core_ns *ns);
void core_flash_info(const struct core_ns *ns, struct core_flash_info *out);
/*
 * Counters of one placement id (1..CORE_PLACEMENT_MAX; 0 = the writes
 * without one, hinted ones included) or of all (CORE_FLASH_ALL): 0, or
 * -ENOENT without the model, -EINVAL for a bad id.
 */
#define CORE_FLASH_ALL 0xFFFFu
int core_flash_stats(const struct core_ns *ns, uint16_t placement, struct core_flash_stats *out);
/* Bytes left to write in the open erase block (reclaim unit) of a placement id (FDP RUAMW). */
uint64_t core_flash_ru_remaining(const struct core_ns *ns, uint16_t placement);

/*
 * Reclaim-unit events, for FDP (NVMe log 23h): a ring of the most recent
 * CORE_FLASH_EV_RING per namespace.  Each reader keeps its own cursor (start
 * at 0); events older than the ring are lost (*lost says how many).
 */
enum core_flash_ev_type {
        CORE_FLASH_EV_RU_FULL = 0, /* the open RU of a placement was filled; a new one opens
                                      (FDP "implicitly modified RUH") */
        CORE_FLASH_EV_GC_MOVE,     /* GC moved valid data of a placement ("media reallocated") */
};
struct core_flash_event {
        uint64_t seq; /* 1, 2, ... */
        enum core_flash_ev_type type;
        uint16_t placement;
        uint32_t ru;    /* the reclaim unit (erase block index) */
        uint64_t bytes; /* GC_MOVE: bytes moved; RU_FULL: RU size */
        uint64_t lba;   /* GC_MOVE: first LBA moved */
        uint64_t t_ns;  /* CLOCK_REALTIME */
};
#define CORE_FLASH_EV_RING 64
/* Up to max events after *cursor into out; advances *cursor.  Returns how many. */
unsigned core_flash_events(const struct core_ns *ns, uint64_t *cursor, struct core_flash_event *out,
                           unsigned max, uint64_t *lost);

/* ---- Core-internal (ns.c, req.c) ---- */

/* At create/reopen (ns unshared): set the model up, load <state_dir>/<name>.flash if it matches. */
int core_flash_open(struct core_ns *ns, const struct core_flash_params *p, char *err,
                    size_t errlen);
/*
 * Save the model (if any) to <state_dir>/<name>.flash and free it.  Saved
 * also after a flush (core_flash_flushed), so a kill -9 loses at most what
 * was written since the last flush.
 */
void core_flash_close(struct core_ns *ns);
/* Save now (control path, or a flush): 0, or -errno; nothing to do without the model. */
int core_flash_save(struct core_ns *ns);
/*
 * A flush completed: if the model changed since its last save, queue a
 * save on the saver thread (never blocks the caller).
 */
void core_flash_flushed(struct core_ns *ns);
/* A request ended successfully: count it per placement and hint, feed the model. */
void core_flash_account(struct core_req *req);
/*
 * Replace the model's state by a saved one (the bytes of <name>.flash, as
 * the namespace's open reads them; the fuzz target drives it): 0, or
 * -EINVAL / -EBADMSG and the model starts afresh; -ENOENT without a model.
 */
int core_flash_load_state(struct core_ns *ns, const void *buf, size_t len);
/* The capacity changed (core_ns_resize): the model follows. */
void core_flash_resize(struct core_ns *ns);

#endif
