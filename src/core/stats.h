/*
 * I/O statistics of the block core: what every executed request costs and
 * how it ended, counted once here for both personalities, per namespace
 * and per host (an iSCSI initiator or an NVMe host NQN).  Read by the
 * management side (namespace_list, the Prometheus endpoint, the status
 * page) and by the NVMe SMART log.
 *
 * Counting takes no lock and allocates nothing: each statistics block is
 * split into shards, one per reactor plus one shared shard for threads
 * that are not reactors.  A reactor is the only writer of its shard and
 * adds with a relaxed load and store (no locked instruction); the shared
 * shard uses relaxed fetch-add.  Readers sum the shards (core_stats_sum)
 * with relaxed loads at any time, from any thread.
 */
#ifndef CORE_STATS_H
#define CORE_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

struct core_ns;
enum core_op;

/* What an operation is counted as. */
enum core_op_class {
        CORE_OPC_READ = 0, /* READ */
        CORE_OPC_WRITE,    /* anything that changes the medium: write, write zeroes/same,
                              compare and write, orwrite, deallocate */
        CORE_OPC_FLUSH,    /* SYNCHRONIZE CACHE, NVMe Flush */
        CORE_OPC_OTHER,    /* compare, verify, pre-fetch */
        CORE_OPC_MAX
};
const char *core_op_class_name(enum core_op_class c);
enum core_op_class core_op_class_of(enum core_op op);

/*
 * Latency buckets: bucket i holds latencies up to 2^(i+2) microseconds
 * (4 us .. 2^23 us ~ 8.4 s); the last one (CORE_LAT_BUCKETS - 1) is the
 * rest (+Inf).  Non-cumulative; a Prometheus exporter cumulates them.
 */
#define CORE_LAT_BUCKETS 23
/* Upper bound of bucket i in nanoseconds (UINT64_MAX for the last). */
uint64_t core_lat_bucket_le_ns(unsigned i);
unsigned core_lat_bucket_index(uint64_t ns);

/* One shard: written by one reactor only (or by atomic add, the shared shard). */
struct core_stats_shard {
        _Atomic uint64_t submitted; /* requests started (outstanding = submitted - sum ops) */
        _Atomic uint64_t ops[CORE_OPC_MAX];   /* completed, successful or not */
        _Atomic uint64_t ok[CORE_OPC_MAX];    /* of which successful */
        _Atomic uint64_t bytes[CORE_OPC_MAX]; /* data transferred by successful ones */
        _Atomic uint64_t lat_sum_ns[CORE_OPC_MAX];
        _Atomic uint64_t lat[CORE_OPC_MAX][CORE_LAT_BUCKETS];
        _Atomic uint64_t errors[CORE_STATUS_MAX]; /* completions with a status other than CORE_OK */
        /* Submitted with an LBA or length not a whole number of physical blocks. */
        _Atomic uint64_t misaligned[CORE_OPC_MAX];
} __attribute__((aligned(64)));

struct core_stats {
        unsigned nshards; /* rt_count() + 1 when created; the last one is shared */
        struct core_stats_shard *shard;
};

/* A sum over the shards. */
struct core_stats_sum {
        uint64_t submitted;
        uint64_t ops[CORE_OPC_MAX];
        uint64_t ok[CORE_OPC_MAX];
        uint64_t bytes[CORE_OPC_MAX];
        uint64_t lat_sum_ns[CORE_OPC_MAX];
        uint64_t lat[CORE_OPC_MAX][CORE_LAT_BUCKETS];
        uint64_t errors[CORE_STATUS_MAX];
        uint64_t misaligned[CORE_OPC_MAX];
};

/* Allocate the shards (control path).  0 or -ENOMEM. */
int core_stats_init(struct core_stats *s);
void core_stats_fini(struct core_stats *s);
void core_stats_sum(const struct core_stats *s, struct core_stats_sum *out);
/* Successful operations of one class (cheaper than a whole sum). */
uint64_t core_stats_ok(const struct core_stats *s, enum core_op_class c);
/*
 * Completed operations of one class, successful or not.  Of CORE_OPC_WRITE,
 * a namespace's write generation: it changes whenever a command that may
 * have changed the medium ends (ROD token invalidation, scsi/xcopy.c).
 */
uint64_t core_stats_ops(const struct core_stats *s, enum core_op_class c);
/* Misaligned submissions of one class (see core_stats_misaligned). */
uint64_t core_stats_misaligned_count(const struct core_stats *s, enum core_op_class c);
/* Outstanding requests of a sum (never negative: shards are read one after another). */
uint64_t core_stats_outstanding(const struct core_stats_sum *sum);

/*
 * Counting (data path; the caller's thread picks the shard).  A request is
 * counted when it starts (core_stats_start) and when it ends
 * (core_stats_end, with its status, the bytes it moved and its latency).
 * A command a personality refuses before it becomes a request is counted
 * as started and ended at once by core_stats_reject; its latency is not
 * observed (the histogram's count is the commands the core executed).
 */
#define CORE_LAT_NONE UINT64_MAX /* core_stats_end: no latency to observe (a refusal) */
void core_stats_start(struct core_stats *s);
void core_stats_end(struct core_stats *s, enum core_op_class c, enum core_status st, uint64_t bytes,
                    uint64_t lat_ns);

/*
 * A request that is not aligned to the namespace's physical block (SBC-4
 * 4.6.2: its first LBA is not the first of a physical block, or its length
 * is not a multiple of the logical blocks per physical block), counted at
 * submission by core_req_submit for its namespace and host, whatever its
 * outcome.  Data path: no lock, no allocation.
 */
void core_stats_misaligned(struct core_stats *s, enum core_op_class c);

/*
 * A host, as the core counts it: the transport ("iscsi", "nvme") and its
 * name (iSCSI initiator name without the ISID, NVMe host NQN).  Hosts live
 * in one registry; a transport takes a reference per session or controller
 * (core_host_get) and drops it when that ends (core_host_put).  A host
 * without references keeps its counters (a scrape after the host logged
 * out still sees what it did) until more than CORE_HOST_IDLE_MAX idle
 * hosts exist; then the one idle longest is forgotten.
 */
#define CORE_HOST_NAME_MAX 224
#define CORE_HOST_IDLE_MAX 256

struct core_host {
        char transport[8];
        char name[CORE_HOST_NAME_MAX];
        unsigned refs;       /* sessions / controllers; under the registry lock */
        uint64_t idle_since; /* rt_now_ns() when refs dropped to 0 */
        struct core_stats stats;
        struct core_host *next;
};

/* A reference to the host (created on first use); NULL on ENOMEM. Control path. */
struct core_host *core_host_get(const char *transport, const char *name);
void core_host_put(struct core_host *h);
/* fn for each host under the registry lock (read only; do not call core_host_*). */
void core_host_foreach(void (*fn)(const struct core_host *h, void *arg), void *arg);

/* Refused before execution: counted for ns and host (either may be NULL). */
void core_stats_reject(struct core_ns *ns, struct core_host *host, enum core_op op,
                       enum core_status st);

#endif
