/*
 * Shared inside the NVMe personality (src/nvme/, including the subsystem,
 * fabrics and discovery code) only; transports use nvme.h.
 * Holds the subsystem and controller objects, the opcode table entry, and
 * the helpers every command handler uses to reject with a located error
 * (NVMe Base 2.0 5.16.1.2 Error Information: Parameter Error Location).
 *
 * Locking: nvme_lock (subsystem.c) guards the subsystem list, each
 * subsystem's host list and controller list, listeners and CNTLID
 * allocation.  ctrl->lock guards a controller's queues, features, AEN and
 * error-log state.  Order: nvme_lock before ctrl->lock.  The I/O path takes
 * neither: namespaces are looked up through atomics (nvme_ns_lookup).
 */
#ifndef NVME_INTERNAL_H
#define NVME_INTERNAL_H

#ifndef SLATE_MODULE_NVME
#error "nvme/internal.h is private to src/nvme/; use nvme/nvme.h"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/ana.h"
#include "nvme/auth.h"
#include "nvme/nvme.h"
#include "slate/spec/nvme.h"
#include "slate/spec/nvmf.h"

#define NVME_MAX_NSID        1024   /* Identify Controller NN */
#define NVME_AERL            4      /* AER slots (AERL is 0's based) */
#define NVME_ERRLOG_ENTRIES  64     /* ELPE + 1 */
#define NVME_KATO_SLACK_MS   2000   /* grace beyond KATO before tearing down */
#define NVME_DEFAULT_KATO_MS 120000 /* discovery controllers with KATO 0 do not expire */
#define NVME_VS_1_4          0x00010400u
#define NVME_TEMP_KELVIN     308 /* 35 °C, reported as the composite temperature */
#define NVME_WCTEMP          343
#define NVME_CCTEMP          373

/* Event bits for AEN pending/masked state. */
#define NVME_EVT_NS_CHANGED   (1u << 0)
#define NVME_EVT_DISC_CHANGED (1u << 1)
#define NVME_EVT_RESV         (1u << 2) /* Reservation Log Page Available */
#define NVME_EVT_SANITIZED    (1u << 3) /* Sanitize Operation Completed (log 81h) */
#define NVME_EVT_PROV         (1u << 4) /* vendor: provisioning soft threshold (log C0h) */
#define NVME_EVT_LBA_STATUS   (1u << 5) /* LBA Status Information Alert (log 0Eh) */
#define NVME_EVT_ANA          (1u << 6) /* Asymmetric Namespace Access Change (log 0Ch) */

struct nvme_pel;

#define NVME_RESV_LOG_MAX 64 /* queued reservation notifications per controller */

/* Directives (directive.c): the Streams directive's resources of one controller. */
#define NVME_STREAMS_MSL 16 /* streams per controller (MSL), our choice */
#define NVME_STREAMS_NS  8  /* namespaces with Streams enabled at once, per controller */
struct nvme_streams_ns {
        uint32_t nsid;      /* 0: free slot */
        struct core_ns *ns; /* a reference while enabled */
        uint16_t nsa;       /* resources allocated for exclusive use (Allocate Resources) */
        uint16_t nopen;
        uint16_t sid[NVME_STREAMS_MSL]; /* open streams, the one opened first at 0 */
        uint16_t pl[NVME_STREAMS_MSL];  /* their core placement ids */
};
/* Flexible Data Placement (fdp.c): reclaim unit handles per endurance group (= namespace). */
#define NVME_FDP_NRUH 8
/*
 * The subsystem's device self-test operation (selftest.c): one at a time,
 * the namespaces it covers tested one after another by the core's engine,
 * and the log of the last ones (06h).  Under lock.
 */
struct nvme_dst {
        pthread_mutex_t lock;
        bool running;
        enum core_selftest_kind kind;
        uint32_t nsids[NVME_MAX_NSID];
        unsigned n, cur, done;
        int abort;              /* enum core_selftest_result to end with; 0 = go on */
        struct core_ns *cur_ns; /* the namespace being tested (the engine holds it) */
        struct rt_reactor *reactor;
        struct core_selftest_log log;
};

struct nvme_subsys {
        char nqn[NVMF_NQN_SIZE];
        char serial[21];
        char model[41];
        char fr[9];
        bool discovery;
        /*
         * copy_cross_namespace: Copy formats 2h/3h (across this subsystem's
         * namespaces) start enabled in every new or reset controller, as if
         * the host had set Host Behavior Support CDFE to 0Ch (a host may
         * still change it).  Our choice, for hosts that cannot send that
         * Set Features (Linux refuses FID 16h from user space).
         */
        atomic_bool copy_xns;
        /* Under nvme_lock. */
        bool allow_any;
        /* DH-HMAC-CHAP (auth.c): host secrets; hashes and groups to pick from (0 = default). */
        struct nvme_host_key *hkeys;
        unsigned nhkeys;
        uint8_t auth_hash[3], auth_nhash, auth_dh[6], auth_ndh;
        char (*hosts)[NVMF_NQN_SIZE];
        unsigned nhosts, hosts_cap;
        struct nvme_ctrl *ctrls;
        int refs; /* list membership + controllers */
        bool deleted;
        struct nvme_subsys *next;
        /* Namespaces: readers (any reactor) use nvme_ns_lookup(). */
        _Atomic(struct core_ns *) ns[NVME_MAX_NSID + 1];
        atomic_uint ns_lookups;
        /*
         * FDP (fdp.c): disabled event types per endurance group (NSID) and
         * placement handle (bit i: fdp.c's i-th supported type; 0 = all
         * enabled), and the ring of host events under fdp_lock.
         */
        _Atomic uint8_t fdp_ev_off[NVME_MAX_NSID + 1][NVME_FDP_NRUH];
        pthread_mutex_t fdp_lock;
        struct nvme_fdp_event fdp_hostev[NVME_FDP_EVENTS_MAX];
        uint64_t fdp_hostev_n;
        struct nvme_dst dst;  /* device self-test (selftest.c) */
        struct nvme_pel *pel; /* the Persistent Event log (pel.c) */
};

struct nvme_ctrl {
        struct nvme_subsys *subsys; /* holds a reference */
        uint16_t cntlid;
        char hostnqn[NVMF_NQN_SIZE];
        uint8_t hostid[16];
        struct core_host *host; /* the host's statistics (core/stats.h); NULL on discovery */
        atomic_int refs;        /* one per connected queue, per queued message/defer */
        struct rt_reactor *admin_reactor;
        _Atomic uint64_t last_cmd_ns;
        _Atomic uint32_t cc, csts;
        atomic_bool dead;

        pthread_mutex_t lock;
        struct nvme_queue **queues; /* [0..max_qid] */
        uint16_t max_qid;           /* NVME_MAX_IO_QUEUES */
        uint16_t nr_io_queues;      /* granted by Set Features Number of Queues */
        uint32_t kato_ms;
        bool copy_xns; /* the subsystem's copy_cross_namespace when the controller was made */
        struct rt_timer ka_timer;
        bool ka_armed;
        /* Features (current values). */
        uint32_t feat_arb, feat_pm, feat_err_rec, aec;
        uint32_t feat_wan; /* 0Ah Write Atomicity Normal: DN */
        uint16_t temp_over, temp_under;
        struct nvme_host_behavior hb;
        _Atomic uint16_t copy_fmts; /* hb.cdfe, for the I/O path: Copy formats 2h/3h enabled */
        /* Asynchronous events. */
        struct nvme_cmd *aer[NVME_AERL];
        unsigned naer;
        uint32_t aen_pending, aen_masked;
        struct rt_defer aen_defer;
        bool aen_defer_pending;
        uint32_t changed_ns[1024];
        unsigned nchanged; /* > 1024: overflow, report FFFFFFFFh */
        /* Error information log ring (newest at err_head - 1). */
        struct nvme_error_log errlog[NVME_ERRLOG_ENTRIES];
        unsigned err_head;
        uint64_t err_count;
        /* SMART counters (atomics: I/O queues update them). */
        _Atomic uint64_t host_reads, host_writes, media_errors;
        _Atomic uint64_t dsm_cmds, dsm_ranges, dsm_ad, dsm_idr, dsm_idw, dsm_access_hints;
        uint64_t created_ns;
        /*
         * Reservations (resv.c): the host as a registrant (built on first
         * use from hostnqn, hostid and the subsystem NQN), and under lock the
         * notification log queue and the per-namespace notification mask.
         */
        struct core_pr_nexus pr_id;
        atomic_bool pr_id_ready;
        struct nvme_resv_notify_log resv_log[NVME_RESV_LOG_MAX];
        unsigned resv_head, resv_n;
        uint64_t resv_count, resv_lost;
        uint8_t resv_mask[NVME_MAX_NSID + 1];
        /* Persistent Event log reporting context (pel.c), under lock. */
        uint8_t *pel_ctx;
        uint32_t pel_ctx_len;

        /* Streams directive (directive.c), under streams_lock. */
        pthread_mutex_t streams_lock;
        struct nvme_streams_ns streams[NVME_STREAMS_NS];

        struct nvme_ctrl *next; /* subsys->ctrls, under nvme_lock */
};

/* ---- Opcode tables (opcodes.c) ---- */
enum nvme_dir { NVME_DIR_NONE = 0, NVME_DIR_H2C, NVME_DIR_C2H };

#define NVME_OPF_DISC        (1u << 0) /* allowed on a discovery controller */
#define NVME_OPF_NO_EN       (1u << 1) /* allowed while CC.EN = 0 / CSTS.RDY = 0 */
#define NVME_OPF_NO_CTRL     (1u << 2) /* allowed before Connect (Connect itself) */
#define NVME_OPF_ADMIN_Q     (1u << 3) /* fabrics command allowed on the admin queue only */
#define NVME_OPF_SANITIZE_OK (1u << 4) /* admin: processed while a sanitize runs (8.21.1) */

struct nvme_op {
        const char *name;
        uint8_t opc; /* opcode, or FCTYPE for fabrics commands */
        uint8_t dir; /* enum nvme_dir (what the command may transfer) */
        uint32_t flags;
        uint32_t effects; /* Commands Supported and Effects bits (CSUPP implied) */
        /* Synchronous checks; may finish inline (NVME_PARSE_DONE). */
        enum nvme_parse_result (*parse)(struct nvme_cmd *cmd);
        /* After the host data arrived; NULL = submit cmd->req to the core. */
        void (*exec)(struct nvme_cmd *cmd);
};

const struct nvme_op *nvme_admin_op(uint8_t opc);
const struct nvme_op *nvme_io_op(uint8_t opc);
const struct nvme_op *nvmf_fabrics_op(uint8_t fctype);

/* ---- SQE field access ---- */
static inline const struct nvme_sqe *nvme_sqe(const struct nvme_cmd *cmd)
{
        return (const struct nvme_sqe *)cmd->sqe;
}
static inline uint32_t nvme_cdw(const struct nvme_cmd *cmd, int n)
{
        return (uint32_t)slate_get_le(cmd->sqe + 4 * n, 4);
}
static inline uint32_t nvme_nsid(const struct nvme_cmd *cmd)
{
        return nvme_cdw(cmd, 1);
}

/* ---- Status and errors (status.c) ---- */
#define NVME_LOC_NONE 0xffff
/* Set the CQE status (DNR when dnr). */
void nvme_set_status(struct nvme_cmd *cmd, uint8_t sct, uint8_t sc, bool dnr);
/*
 * Reject: status with DNR, plus an Error Information entry whose parameter
 * location is SQE byte `byte` (bit `bit`, or -1).  Returns NVME_PARSE_DONE.
 */
enum nvme_parse_result nvme_reject(struct nvme_cmd *cmd, uint8_t sct, uint8_t sc, uint16_t byte,
                                   int bit);
static inline enum nvme_parse_result nvme_invalid_field(struct nvme_cmd *cmd, uint16_t byte)
{
        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, byte, -1);
}
/* A transport's transfer error -> CQE status (+ error log entry locating the field). */
void nvme_xfer_status(struct nvme_cmd *cmd, enum nvme_xfer_error e);
/* A fresh CQE for cmd: zero, CID and SQID filled. */
void nvme_cqe_init(struct nvme_cmd *cmd);
/* Core status -> CQE status (+ error log entry for failures). */
void nvme_status_from_core(struct nvme_cmd *cmd, enum core_status st);
struct nvme_status_map {
        uint8_t sct, sc;
        bool dnr;
};
const struct nvme_status_map *nvme_status_map(enum core_status st);
uint16_t nvme_cqe_status(const struct nvme_cmd *cmd); /* 15-bit status, without phase */
/*
 * Record cmd's failure (status already in its CQE) in ctrl's Error Information
 * log and set the CQE's More bit to say so.  No-op without a controller.
 */
void nvme_ctrl_log_error(struct nvme_ctrl *ctrl, struct nvme_cmd *cmd, uint16_t loc, uint64_t lba);

/* ---- Command plumbing (opcodes.c; completion in status.c) ---- */
/* The command moves len bytes: checked by the transport (queue->check_xfer); false = rejected. */
bool nvme_xfer(struct nvme_cmd *cmd, uint32_t len, bool h2c);
/* Finish an executed command on a later loop iteration (drops cmd->ns). */
void nvme_cmd_complete_deferred(struct nvme_cmd *cmd);
/* Finish now (from an async callback, never from inside exec). */
void nvme_cmd_complete(struct nvme_cmd *cmd);
static inline void nvme_cqe_dw0(struct nvme_cmd *cmd, uint32_t v)
{
        slate_put_le(cmd->cqe, 4, v);
}
static inline void nvme_cqe_dw1(struct nvme_cmd *cmd, uint32_t v)
{
        slate_put_le(cmd->cqe + 4, 4, v);
}
/* Copy src[0..len) into the command's c2h buffer at the log offset window. */
void nvme_copy_window(uint8_t *dst, uint32_t dst_len, uint64_t win_off, const void *src,
                      uint64_t src_off, uint32_t src_len);

/* ---- Protection information (pi.c, issue 10) ---- */
/* How many LBA formats a namespace offers (NLBAF + 1). */
unsigned nvme_pi_nlbaf(void);
/* The LBA format index of a core format; the namespace's FLBAS now. */
unsigned nvme_pi_cur_lbaf(const struct core_pi_fmt *f);
uint8_t nvme_pi_flbas(const struct core_ns *ns);
/* Identify Namespace NLBAF, FLBAS, MC, DPC, DPS, LBAF[]. */
void nvme_pi_id_ns(struct core_ns *ns, struct nvme_id_ns *id);
/* NVM Command Set Identify Namespace (CNS 05h): ELBAF[] into the 4096 bytes at p. */
void nvme_pi_id_ns_nvm(struct core_ns *ns, uint8_t *p);
enum nvme_parse_result nvme_format_parse(struct nvme_cmd *cmd);
void nvme_format_exec(struct nvme_cmd *cmd);
enum nvme_pi_io_kind { NVME_PI_IO_READ, NVME_PI_IO_WRITE, NVME_PI_IO_COMPARE, NVME_PI_IO_NODATA };
/* What an I/O command's PRINFO and tags ask of the core (struct core_req.pi). */
struct nvme_pi_io {
        struct core_pi_fmt fmt; /* the namespace's format when parsed */
        bool host_md;           /* the transfer holds extended LBAs */
        bool gen;
        unsigned chk;
        uint64_t ref, gen_ref;
        uint16_t app, app_mask, gen_app;
};
/* Parse CDW12 PRINFO and the tags for cmd->ns; false: rejected (status set). */
bool nvme_pi_io_parse(struct nvme_cmd *cmd, uint64_t lba, enum nvme_pi_io_kind kind,
                      struct nvme_pi_io *out);
/* Into a request, after core_req_init. */
void nvme_pi_io_apply(struct core_req *req, const struct nvme_pi_io *p);

/* ---- Handlers ---- */
enum nvme_parse_result nvme_identify_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_get_log_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_get_features_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_set_features_parse(struct nvme_cmd *cmd);
void nvme_set_features_exec(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_abort_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_keep_alive_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_aer_parse(struct nvme_cmd *cmd);
void nvme_aer_exec(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_io_rw_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_io_flush_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_io_write_zeroes_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_io_verify_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_io_write_uncor_parse(struct nvme_cmd *cmd);
void nvme_io_write_uncor_exec(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_io_compare_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_io_dsm_parse(struct nvme_cmd *cmd);
void nvme_io_dsm_exec(struct nvme_cmd *cmd);
void nvme_io_submit(struct nvme_cmd *cmd);
/* CORE_HINT_* bits of an NVMe access frequency, access latency and sequential flag (io.c). */
uint8_t nvme_access_hints(unsigned af, unsigned al, bool seq);
/* Fused Compare and Write (fused.c). */
/* FUSE bits of cmd (parse, before the opcode's own): DONE = refused. */
enum nvme_parse_result nvme_fused_check(struct nvme_cmd *cmd, const struct nvme_cmd *first);
/* After cmd's parse (r): pair it with first, fail first, or wait as a first half. */
void nvme_fused_parsed(struct nvme_cmd *cmd, struct nvme_cmd *first, enum nvme_parse_result r);
/* From nvme_cmd_exec: true when cmd is (or was) a fused half and has been handled. */
bool nvme_fused_exec(struct nvme_cmd *cmd);
/* cmd will never execute: unlink it from its queue and release its peer. */
void nvme_fused_forget(struct nvme_cmd *cmd);
/* Copy (copy.c) and its limits in ns's blocks: Identify Namespace MSSRL, MCL, MSRC. */
enum nvme_parse_result nvme_io_copy_parse(struct nvme_cmd *cmd);
void nvme_io_copy_exec(struct nvme_cmd *cmd);
/*
 * The synchronous half of exec (entries in buf): check the Source Range
 * entries and build the core copy (EXEC), or set the status (DONE).  After
 * EXEC, nvme_copy_release() drops the source namespaces it holds unless
 * the copy is submitted.  For the fuzzer and tests.
 */
enum nvme_parse_result nvme_copy_decode(struct nvme_cmd *cmd);
void nvme_copy_release(struct nvme_cmd *cmd);
void nvme_copy_limits(const struct core_ns *ns, uint16_t *mssrl, uint32_t *mcl, uint8_t *msrc);
/* Reservations (resv.c). */
enum nvme_parse_result nvme_resv_register_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_resv_acquire_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_resv_release_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_resv_report_parse(struct nvme_cmd *cmd);
void nvme_resv_report_exec(struct nvme_cmd *cmd);
void nvme_resv_exec(struct nvme_cmd *cmd);
/* The synchronous body of Register/Acquire/Release (data in buf): fills the CQE.  For tests. */
void nvme_resv_do(struct nvme_cmd *cmd);
/* The controller's host as a reservation registrant (one per host and subsystem). */
const struct core_pr_nexus *nvme_ctrl_pr_id(struct nvme_ctrl *ctrl);
/* Get/Set Features 82h (Reservation Notification Mask) and 83h (Reservation Persistence). */
enum nvme_parse_result nvme_resv_get_feature(struct nvme_cmd *cmd, uint8_t fid, uint8_t sel);
enum nvme_parse_result nvme_resv_set_feature(struct nvme_cmd *cmd, uint8_t fid);
/* Queue reservation notifications (CORE_PR_EV_* bits) for nsid; caller holds nvme_lock. */
void nvme_resv_notify(struct nvme_ctrl *ctrl, uint32_t nsid, unsigned pr_events);
/* Fill the Reservation Notification log page: the oldest entry, consumed. */
void nvme_resv_log(struct nvme_ctrl *ctrl, struct nvme_resv_notify_log *out);
enum nvme_parse_result nvmf_connect_parse(struct nvme_cmd *cmd);
void nvmf_connect_exec(struct nvme_cmd *cmd);
/* The synchronous body of Connect (data in buf): fills the CQE.  For tests. */
void nvmf_connect_do(struct nvme_cmd *cmd);
enum nvme_parse_result nvmf_property_get_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvmf_property_set_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvmf_disconnect_parse(struct nvme_cmd *cmd);

/* sanitize.c: Sanitize (Base 2.0 5.24) and the Sanitize Status log (81h). */
enum nvme_parse_result nvme_sanitize_parse(struct nvme_cmd *cmd);
void nvme_sanitize_exec(struct nvme_cmd *cmd);
void nvme_sanitize_log(struct nvme_ctrl *ctrl, struct nvme_sanitize_log *log);
/* Does a namespace attached to s have a sanitize in progress? */
bool nvme_subsys_sanitizing(struct nvme_subsys *s);
/* Whether Crypto Erase can run: every attached namespace is encrypted at rest (and one is). */
bool nvme_subsys_crypto_erasable(struct nvme_subsys *s);
/* Keep s alive beyond its list and controllers (a background operation); release drops it. */
void nvme_subsys_hold(struct nvme_subsys *s);
void nvme_subsys_release(struct nvme_subsys *s);
/* Device Self-test (selftest.c) and its log page 06h (NVME_DST_LOG_SIZE bytes into p). */
void nvme_dst_init(struct nvme_dst *d);
void nvme_dst_fini(struct nvme_dst *d);
enum nvme_parse_result nvme_dst_parse(struct nvme_cmd *cmd);
void nvme_dst_exec(struct nvme_cmd *cmd);
void nvme_dst_log(struct nvme_ctrl *ctrl, uint8_t *p);

/* lbastatus.c: Get LBA Status (Base 2.0 5.20) and the LBA Status Information log (0Eh). */
enum nvme_parse_result nvme_get_lba_status_parse(struct nvme_cmd *cmd);
/* Fill p[0..cap) with the LBA Status Information log; returns its length (LSLPLEN). */
uint32_t nvme_lba_status_log(struct nvme_ctrl *ctrl, uint8_t *p, uint32_t cap);

/* ANA (ana.c): the NVMe state of a core access state; log 0Ch of s into p (at most cap
 * bytes; rgo: groups only), returns its length.  NVME_ANA_LOG_MAX holds the largest. */
uint8_t nvme_ana_state(enum core_ana_state st);
/* ANATT: seconds a group stays in change (transitioning) before a host may give up on it. */
#define NVME_ANATT_S     10
#define NVME_ANA_LOG_MAX (16u + 32u * CORE_ANA_GROUPS + 4u * NVME_MAX_NSID)
uint32_t nvme_ana_log(struct nvme_subsys *s, bool rgo, uint8_t *p, uint32_t cap);

/* directive.c: Directive Send/Receive (Identify and Streams) and stream Writes. */
enum nvme_parse_result nvme_dir_recv_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_dir_send_parse(struct nvme_cmd *cmd);
/* Is the Streams directive enabled for nsid on ctrl? */
bool nvme_streams_enabled(struct nvme_ctrl *ctrl, uint32_t nsid);
/*
 * The core placement id for a Write (cmd->ns, nsid) to stream sid, opening
 * the stream if needed: 0 and *pl (0: no resources, an ordinary Write), or
 * -EINVAL when Streams is not enabled for the namespace.
 */
int nvme_stream_placement(struct nvme_cmd *cmd, uint32_t nsid, uint16_t sid, uint16_t *pl);
/* Disable Streams everywhere on ctrl, releasing every stream (reset, free). */
void nvme_streams_reset(struct nvme_ctrl *ctrl);
/* NSID nsid left the subsystem: its streams and resources on ctrl go (8.7.3). */
void nvme_streams_forget(struct nvme_ctrl *ctrl, uint32_t nsid);

/* fdp.c: Flexible Data Placement. */
bool nvme_fdp_enabled(const struct core_ns *ns);
unsigned nvme_fdp_nruh(const struct core_ns *ns);
/*
 * The core placement id of a Write on an FDP namespace: dp = DTYPE 02h with
 * Placement Identifier pid, else the default handle.  0 and *pl, or -EINVAL
 * when FDP is not enabled on cmd->ns.
 */
int nvme_fdp_placement(struct nvme_cmd *cmd, bool dp, uint16_t pid, uint16_t *pl);
/* Fill p[0..cap) with FDP log lid (20h..23h) of endurance group endgid (cmd->ns); its size. */
uint32_t nvme_fdp_log(struct nvme_cmd *cmd, uint8_t lid, uint16_t endgid, bool host_events,
                      uint8_t *p, uint32_t cap);
/* Fill p[0..cap) with the Endurance Group Information log of cmd->ns's group; its size. */
uint32_t nvme_endurance_log(struct nvme_cmd *cmd, uint8_t *p, uint32_t cap);
enum nvme_parse_result nvme_fdp_get_feature(struct nvme_cmd *cmd, uint8_t fid, uint8_t sel);
enum nvme_parse_result nvme_fdp_set_feature(struct nvme_cmd *cmd, uint8_t fid);
void nvme_fdp_set_events_exec(struct nvme_cmd *cmd);
/* The synchronous bodies of the execs above (data in buf): set the CQE.  For the fuzzer. */
void nvme_fdp_set_events_do(struct nvme_cmd *cmd);
void nvme_io_mgmt_send_do(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_io_mgmt_recv_parse(struct nvme_cmd *cmd);
enum nvme_parse_result nvme_io_mgmt_send_parse(struct nvme_cmd *cmd);
void nvme_io_mgmt_send_exec(struct nvme_cmd *cmd);
/* pel.c: the Persistent Event log (0Dh). */
struct nvme_pel *nvme_pel_new(void);
void nvme_pel_free(struct nvme_pel *p);
/* Record an event of type etype with len bytes of event data (any thread). */
void nvme_pel_record(struct nvme_subsys *s, uint8_t etype, uint16_t cntlid, const void *data,
                     uint16_t len);
/* Get Log Page 0Dh with LSP action lsp into cmd->buf (len bytes from offset lpo). */
enum nvme_parse_result nvme_pel_log_page(struct nvme_cmd *cmd, uint8_t lsp, uint32_t len,
                                         uint64_t lpo);
/* The SMART / Health log of subsystem s (ctrl: its host counters, or NULL). */
void nvme_smart_build(struct nvme_subsys *s, struct nvme_ctrl *ctrl, struct nvme_smart_log *l);

/* ---- Logs and events (log.c, admin.c) ---- */
void nvme_effects_log_build(struct nvme_effects_log *log);
/* Raise events on a controller (any thread). */
void nvme_ctrl_raise(struct nvme_ctrl *ctrl, uint32_t evt, uint32_t nsid);
/* Subscribe to the core's namespace events (once; subsystem creation calls it). */
void nvme_events_init(void);
/* A log page was read with RAE = 0: unmask its event. */
void nvme_ctrl_log_read(struct nvme_ctrl *ctrl, uint8_t lid);
uint64_t nvme_uptime_s(void);

/* ---- Discovery (discovery.c) ---- */
/* Fill buf[0..len) with the discovery log from byte offset off for this controller. */
int nvmf_discovery_log(struct nvme_ctrl *ctrl, const struct nvme_queue *q, uint8_t *buf,
                       uint32_t len, uint64_t off);
uint64_t nvmf_discovery_genctr(void);
/* Bump genctr and tell discovery controllers; call with nvme_lock held. */
void nvmf_discovery_changed(void);

/* ---- Subsystems and controllers (subsystem.c) ---- */
extern pthread_mutex_t nvme_lock;
extern struct nvme_subsys *nvme_subsystems; /* under nvme_lock */
struct nvme_subsys *nvme_subsys_find_locked(const char *nqn);
bool nvme_subsys_host_allowed_locked(const struct nvme_subsys *s, const char *hostnqn);
/* Listener i of the registry (under nvme_lock); false past the end. */
/* tls: as given to nvme_listener_register. */
bool nvmf_listener_get_locked(unsigned i, const char **trtype, const char **addr, uint16_t *port,
                              uint16_t *portid, uint8_t *tls);
/* Active namespace by NSID with a reference (core_ns_put when done), or NULL. */
struct core_ns *nvme_ns_lookup(struct nvme_subsys *s, uint32_t nsid);
/* Borrowed peek for control-path readers that only test activity. */
bool nvme_ns_active(struct nvme_subsys *s, uint32_t nsid);
/*
 * Create a controller for the admin queue q (Connect) in subsystem subnqn:
 * 0, -ENOENT (no such subsystem), -EACCES (host not allowed), -ENOMEM, -ENOSPC.
 * Sets q->ctrl and takes the admin queue's controller reference.
 */
int nvme_ctrl_create(const char *subnqn, struct nvme_queue *q, const char *hostnqn,
                     const uint8_t hostid[16], uint32_t kato_ms, struct nvme_ctrl **out);
/* Find by subsystem NQN + CNTLID with a reference (I/O Connect), or NULL. */
struct nvme_ctrl *nvme_ctrl_get_by_id(const char *subnqn, uint16_t cntlid);
/* Attach q as I/O queue qid; 0, -EEXIST (qid in use) or -ENODEV (controller dying). */
int nvme_ctrl_add_queue(struct nvme_ctrl *ctrl, struct nvme_queue *q);
void nvme_ctrl_get(struct nvme_ctrl *ctrl);
/* A reference unless the controller is already on its way out (refs 0). */
bool nvme_ctrl_tryget(struct nvme_ctrl *ctrl);
void nvme_ctrl_put(struct nvme_ctrl *ctrl);
/* Ask the transport to tear down I/O queues (and the admin queue when all). */
void nvme_ctrl_teardown(struct nvme_ctrl *ctrl, bool all);
void nvme_ctrl_set_cc(struct nvme_ctrl *ctrl, uint32_t cc);
void nvme_ctrl_reset_features(struct nvme_ctrl *ctrl);
/* Arm the keep-alive timer (on the admin reactor). */
void nvme_ctrl_ka_start(struct nvme_ctrl *ctrl);

#endif
