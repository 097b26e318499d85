/*
 * Shared inside the SCSI personality only (not for transports).
 */
#ifndef SCSI_INTERNAL_H
#define SCSI_INTERNAL_H

#ifndef SLATE_MODULE_SCSI
#error "scsi/internal.h is private to src/scsi/; use scsi/scsi.h"
#endif

#include <stddef.h>

#include "core/ana.h"
#include "scsi/scsi.h"

/* Sense keys */
#define SK_NO_SENSE        0x0
#define SK_RECOVERED_ERROR 0x1
#define SK_NOT_READY       0x2
#define SK_MEDIUM_ERROR    0x3
#define SK_HARDWARE_ERROR  0x4
#define SK_ILLEGAL_REQUEST 0x5
#define SK_UNIT_ATTENTION  0x6
#define SK_DATA_PROTECT    0x7
#define SK_COPY_ABORTED    0xa
#define SK_ABORTED_COMMAND 0xb
#define SK_MISCOMPARE      0xe

/* sense.c: build CHECK CONDITION sense in the format the LU's D_SENSE selects. */
void scsi_sense_set(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq);
/* ILLEGAL REQUEST, INVALID FIELD IN CDB (24h/00h) or IN PARAMETER LIST (26h/00h),
 * with the sense-key-specific field pointer at byte/bit. bit < 0: no bit pointer. */
void scsi_sense_invalid_field(struct scsi_cmd *cmd, bool in_cdb, uint16_t byte, int bit);
/* ILLEGAL REQUEST with any ASC/ASCQ and the field pointer at byte/bit (of the CDB or the
 * parameter list). */
void scsi_sense_field(struct scsi_cmd *cmd, uint8_t asc, uint8_t ascq, bool in_cdb, uint16_t byte,
                      int bit);
/*
 * COPY ABORTED (SPC-5 5.17.7.x, third-party copy errors): the segment number in the
 * COMMAND-SPECIFIC INFORMATION field and, when field >= 0, the segment pointer (sd: relative
 * to the segment descriptor, else to the parameter list).  _build writes it into out
 * (SCSI_SENSE_MAX bytes) and returns its length; the other sets cmd's status and sense.
 */
uint8_t scsi_sense_build_copy(uint8_t *out, bool desc, uint8_t asc, uint8_t ascq, uint32_t segment,
                              int field, bool sd);
void scsi_sense_copy_aborted(struct scsi_cmd *cmd, uint8_t asc, uint8_t ascq, uint32_t segment,
                             int field, bool sd);
/* The ASC/ASCQ a core status maps to, when it maps to CHECK CONDITION (false otherwise). */
bool scsi_core_sense_code(enum core_status st, uint8_t *asc, uint8_t *ascq);
/* The sense key a core status maps to (NO SENSE when it is not a CHECK CONDITION). */
uint8_t scsi_core_sense_key(enum core_status st);
/* Map a core status (and req->info) to SAM status + sense. */
void scsi_status_from_core(struct scsi_cmd *cmd, enum core_status st, uint64_t info,
                           bool info_valid);

/* pr.c: persistent reservations and RESERVE/RELEASE(6); synchronous, data already in buf. */
void scsi_pr_in(struct scsi_cmd *cmd);
/* The same after reloading shared reservation state on a core worker (asynchronous). */
void scsi_pr_in_exec(struct scsi_cmd *cmd);
void scsi_pr_out(struct scsi_cmd *cmd);
/* PR OUT's exec: scsi_pr_out, on a core worker when the namespace's state is shared. */
void scsi_pr_out_exec(struct scsi_cmd *cmd);
void scsi_reserve6(struct scsi_cmd *cmd);
void scsi_release6(struct scsi_cmd *cmd);
/* SPC-5 5.14.1 / table 'commands allowed in the presence of reservations'. */
bool scsi_pr_conflict(struct scsi_cmd *cmd, bool is_read, bool is_write);

/* ---- The opcode table (opcodes.c) ---- */

enum scsi_dir { SCSI_DIR_NONE = 0, SCSI_DIR_IN, SCSI_DIR_OUT };

#define SCSI_OPF_NO_LUN      (1u << 0) /* runs without a mapped LU */
#define SCSI_OPF_UA_OK       (1u << 1) /* runs with a pending unit attention (not consumed) */
#define SCSI_OPF_READS       (1u << 2) /* reads the medium (reservation conflicts) */
#define SCSI_OPF_WRITES      (1u << 3) /* modifies the medium or LU state */
#define SCSI_OPF_MEDIUM      (1u << 4) /* needs the LU started (NOT READY when stopped) */
#define SCSI_OPF_PR_EXEMPT   (1u << 5) /* never a reservation conflict (INQUIRY, PR IN/OUT ...) */
#define SCSI_OPF_WP_CHECK    (1u << 6) /* DATA PROTECT when write protected */
#define SCSI_OPF_SANITIZE_OK (1u << 7) /* runs while a sanitize is in progress (SBC-4 4.11) */
/* Needs a medium in the drive even when stopped (READ CAPACITY, SANITIZE ...);
 * SCSI_OPF_MEDIUM implies it.  Only a removable LU can lack its medium. */
#define SCSI_OPF_NEEDS_MEDIUM (1u << 8)
/* Offered only on an LU with logical block provisioning (a thin namespace):
 * elsewhere neither listed nor executed (SANITIZE BLOCK ERASE). */
#define SCSI_OPF_LBP (1u << 9)
/* Offered only on an LU with atomic writes (core_ns_atomic_limits): WRITE ATOMIC. */
#define SCSI_OPF_ATOMIC (1u << 10)
/* Offered only on an LU with a physical element model (core_media_elements > 0):
 * GET PHYSICAL ELEMENT STATUS, REMOVE ELEMENT AND TRUNCATE, RESTORE ELEMENTS AND REBUILD. */
#define SCSI_OPF_ELEMENTS (1u << 11)
/* Offered only on an LU encrypted at rest (core/crypt.h): SANITIZE CRYPTOGRAPHIC ERASE. */
#define SCSI_OPF_CRYPT (1u << 12)
/* Offered only on an LU formatted with protection information type 2: READ/WRITE/VERIFY(32). */
#define SCSI_OPF_PI2 (1u << 13)
/* The CDB has an RD/WR/VR/ORPROTECT field (bits 7:5 of byte 1, of byte 10 in a 32-byte CDB):
 * REPORT SUPPORTED OPERATION CODES lists it in the usage data of an LU with PI. */
#define SCSI_OPF_PROTECT (1u << 14)

struct scsi_op {
        const char *name;
        uint8_t opcode;
        uint16_t sa;
        bool has_sa; /* listed with SERVACTV=1 */
        uint8_t cdb_len;
        uint8_t dir; /* enum scsi_dir */
        uint32_t flags;
        uint32_t timeout; /* nominal command timeout, seconds */
        /* Synchronous checks; may finish the command inline (SCSI_PARSE_DONE). */
        enum scsi_parse_result (*parse)(struct scsi_cmd *cmd);
        /* Asynchronous part after the data-out arrived; NULL = submit cmd->req. */
        void (*exec)(struct scsi_cmd *cmd);
        uint8_t usage[32]; /* CDB usage data for REPORT SUPPORTED OPERATION CODES */
        /* Task management aborted the command during exec; NULL = it runs to its end. */
        void (*abort)(struct scsi_cmd *cmd);
};

/* Looks an opcode (and service action) up.  *sa_unknown: the opcode exists
 * with service actions but this one is not supported. */
const struct scsi_op *scsi_op_find(const uint8_t *cdb, bool *sa_unknown);
/* Iterate over every supported (opcode, service action), in opcode order. */
const struct scsi_op *scsi_op_next(const struct scsi_op *prev);
/* Does this opcode have a service-action sub-table? */
bool scsi_op_has_sa(uint8_t opcode);
/* Find by opcode + service action for REPORT SUPPORTED OPERATION CODES. */
const struct scsi_op *scsi_op_lookup(uint8_t opcode, uint16_t sa);
/* Where op's CONTROL byte sits (byte 1 of a variable-length CDB, else the last). */
uint8_t scsi_op_control_off(const struct scsi_op *op);
/* Where an opcode's service action field starts (for the field pointer). */
uint8_t scsi_op_sa_off(uint8_t opcode);
/* op if this LU offers it (SCSI_OPF_LBP needs a thin namespace), else NULL. */
const struct scsi_op *scsi_op_for_lu(const struct scsi_op *op, const struct core_ns *ns);

/* Streams and GROUP NUMBER (streams.c). */
#define SCSI_GROUPS          64 /* GROUP NUMBER 0..63: IO advice hints group descriptors */
#define SCSI_GROUP_DESC_LEN  16
#define SCSI_GROUP_STATS_MAX 31 /* Group Statistics and Performance (1..31) */
#define SCSI_STREAMS_MAX     16 /* MAXIMUM NUMBER OF STREAMS (at most core_placement_max) */
#define SCSI_STREAMS_PERM    5  /* permanent streams 1..5 = GROUP NUMBER 1..5 */
#define SCSI_GROUPING_LEN    (16 + SCSI_GROUPS * SCSI_GROUP_DESC_LEN) /* page 0Ah/05h */

/*
 * ---- Per-LU SCSI state, hung off core_ns.scsi_state (target.c) ----
 * Only what is the SCSI protocol's own: write protection, ready/stopped/
 * medium and sanitize state are the namespace's (core/ns.h).
 */
struct scsi_lu_state {
        bool d_sense; /* control page: descriptor format sense */
        /* I_T nexuses (of any target port) whose PREVENT ALLOW MEDIUM
         * REMOVAL prevents removal; changed only under the target lock by
         * scsi_prevent_set() and the reset/nexus-loss paths in target.c. */
        atomic_int prevent_count;
        /* SANITIZE with IMMED=0 waiting for the core's operation to end
         * (sanitize.c; on the reactor that started it). */
        struct scsi_cmd *san_waiter;
        /*
         * Streams and IO advice hints (streams.c).  streams_lock serializes
         * STREAM CONTROL and MODE SELECT of the grouping page; the data path
         * reads group_desc[g][0] and group_hints without it (a change lands
         * between two commands) and counts group_stats with relaxed atomics.
         */
        pthread_mutex_t streams_lock;
        _Atomic bool streams_ready;
        uint32_t perm_held; /* permanent stream ids whose placement id we hold (bit per id) */
        uint8_t group_desc[SCSI_GROUPS][SCSI_GROUP_DESC_LEN]; /* mode page 0Ah/05h, current */
        _Atomic uint8_t group_hints[SCSI_GROUPS];             /* CORE_HINT_* per GROUP NUMBER */
        struct scsi_group_stats {
                _Atomic uint64_t read_cmds, write_cmds, blocks_received, blocks_transmitted;
                _Atomic uint64_t read_fua, write_fua;
        } group_stats[SCSI_GROUP_STATS_MAX]; /* log pages 19h/01h-1Fh, groups 1..31 */
        /* A foreground SEND DIAGNOSTIC self-test waiting for the core's (diag.c). */
        struct scsi_cmd *diag_waiter;
        /* Control mode page ATMPE: the Application Tag mode page is used (pi.c). */
        _Atomic bool atmpe;
};

/* Returns the LU's state, allocating it on first use; NULL only on ENOMEM. */
struct scsi_lu_state *scsi_lu_state(struct core_ns *ns);
/* Apply the namespace's state checks (CORE_CHK_*); false with the sense set when one fails. */
bool scsi_check_state(struct scsi_cmd *cmd, unsigned chk);

/* target.c, removable media (SBC-4 4.10, 5.15, 5.25): record cmd's nexus
 * preventing (on) or allowing medium removal from cmd's LU. */
void scsi_prevent_set(struct scsi_cmd *cmd, bool on);
/* Does any I_T nexus prevent removal of ns's medium? */
bool scsi_removal_prevented(struct core_ns *ns);

/* ---- sense.c ---- */
/* Build sense data into out (SCSI_SENSE_MAX bytes) in the given format; returns its length. */
uint8_t scsi_sense_build(uint8_t *out, bool desc, uint8_t key, uint8_t asc, uint8_t ascq,
                         bool info_valid, uint64_t info, const uint8_t *sks);
/* target.c: take one pending unit attention into cmd's sense (REQUEST SENSE). */
bool scsi_ua_take(struct scsi_cmd *cmd);
void scsi_sense_full(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq, bool info_valid,
                     uint64_t info, const uint8_t *sks);
void scsi_cmd_good(struct scsi_cmd *cmd);
/* Copy len bytes of a response, truncated to the allocation length and buffer. */
void scsi_cmd_data_in(struct scsi_cmd *cmd, uint32_t len, uint32_t alloc_len);
/* Finish a command that has nothing asynchronous to do: defers cmd->done. */
void scsi_cmd_finish_deferred(struct scsi_cmd *cmd);

/* ---- Handlers (spc.c, sbc.c, vpd.c, mode.c) ---- */
enum scsi_parse_result scsi_spc_inquiry(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_report_luns(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_request_sense(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_tur(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_rsoc(struct scsi_cmd *cmd);
/*
 * ALUA (alua.c): REPORT TARGET PORT GROUPS; the SCSI asymmetric access
 * state of a core one; the RTPG parameter data of ns seen through the port
 * rel_port (extended: format 001b), into b (at least 20 bytes), its length.
 */
enum scsi_parse_result scsi_spc_rtpg(struct scsi_cmd *cmd);
uint8_t scsi_alua_state(enum core_ana_state st);
uint32_t scsi_alua_rtpg_build(const struct core_ns *ns, uint16_t rel_port, bool extended,
                              uint8_t *b);
enum scsi_parse_result scsi_spc_start_stop(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_prevent_allow(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_pr_in(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_pr_out(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_reserve6(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_release6(struct scsi_cmd *cmd);

int scsi_vpd_build(struct scsi_cmd *cmd, uint8_t page, uint8_t *out, uint32_t cap);
uint32_t scsi_inquiry_std_build(struct scsi_cmd *cmd, uint8_t *out);

enum scsi_parse_result scsi_mode_sense(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_mode_select(struct scsi_cmd *cmd);
void scsi_mode_select_exec(struct scsi_cmd *cmd);
/* The parameter list in buf (data_out_len bytes) checked and applied, status set; no callback. */
void scsi_mode_select_apply(struct scsi_cmd *cmd);

enum scsi_parse_result scsi_sbc_rw(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_sbc_verify(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_sbc_write_verify(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_sbc_caw(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_sbc_orwrite(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_sbc_write_same(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_sbc_prefetch(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_sbc_sync_cache(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_sbc_read_capacity10(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_sbc_read_capacity16(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_sbc_read_defect(struct scsi_cmd *cmd);
void scsi_sbc_verify_exec(struct scsi_cmd *cmd);

/* lbp.c: logical block provisioning on thin LUs (UNMAP, GET LBA STATUS). */
#define SCSI_LBP_MAX_UNMAP_DESC 256u        /* Block Limits: MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT */
#define SCSI_LBP_MAX_UNMAP_LBAS 0xffffffffu /* MAXIMUM UNMAP LBA COUNT (one core request) */
#define SCSI_MAX_WRITE_SAME_LEN 0xffffu     /* Block Limits MAXIMUM WRITE SAME LENGTH */
enum scsi_parse_result scsi_lbp_unmap(struct scsi_cmd *cmd);
void scsi_lbp_unmap_exec(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_lbp_get_lba_status(struct scsi_cmd *cmd);
/* GET LBA STATUS whose walk waits on remote storage: on a core worker (asynchronous). */
void scsi_lbp_get_lba_status_exec(struct scsi_cmd *cmd);
/* VPD B2h THRESHOLD EXPONENT: log2 of the blocks in a threshold set (CORE_PROV_SET_BYTES). */
static inline uint8_t scsi_lbp_threshold_exponent(const struct core_ns *ns)
{
        return (uint8_t)(__builtin_ctz(CORE_PROV_SET_BYTES) - ns->block_shift);
}

/*
 * atomic.c: WRITE ATOMIC(16)/(32) and WRITE SCATTERED(16)/(32) (SBC-4 5.48,
 * 5.51/5.52) on the core's atomic-write engine (core/atomic.h).
 */
#define SCSI_VPD_SLATE_ATOMIC   0xc0 /* vendor VPD page: the atomic scattered write limits */
#define SCSI_SCATTER_DESC_LEN   32u  /* the header and each LBA range descriptor */
#define SCSI_SCATTER_MAX_RANGES 128u /* VPD B7h MAXIMUM SCATTERED LBA RANGE DESCRIPTOR COUNT */
/* The WRITE SCATTERED limits VPD B7h shows and the parser enforces (blocks). */
struct scsi_scatter_limits {
        uint32_t max_ranges;       /* MAXIMUM SCATTERED LBA RANGE DESCRIPTOR COUNT */
        uint32_t max_range_blocks; /* MAXIMUM SCATTERED LBA RANGE TRANSFER LENGTH */
        uint32_t max_total_blocks; /* MAXIMUM SCATTERED TRANSFER LENGTH */
};
void scsi_scatter_limits(const struct core_ns *ns, struct scsi_scatter_limits *out);
/* What is wrong with a WRITE SCATTERED parameter list. */
struct scsi_scatter_err {
        bool lba_range; /* a range beyond capacity: LBA OUT OF RANGE */
        bool in_cdb;    /* the CDB's lengths and the list disagree: INVALID FIELD IN CDB */
        int field;      /* else INVALID FIELD IN PARAMETER LIST at this byte */
};
/*
 * Check and decode the LBA range descriptors of a WRITE SCATTERED data-out
 * buffer (len bytes; nr descriptors; data at lbdof blocks): each range
 * within capacity and the per-range limit, no two overlapping, their sum
 * within the data the buffer brings.  Decodes in place (buf must be 8-byte
 * aligned): 0 with *ranges pointing into buf and *total the blocks to
 * write, or -1 with *e saying what is wrong.  Pure: no state.
 */
int scsi_scatter_parse(const struct core_ns *ns, uint8_t *buf, uint32_t len, uint32_t nr,
                       uint32_t lbdof, struct core_lba_range **ranges, uint64_t *total,
                       struct scsi_scatter_err *e);
enum scsi_parse_result scsi_sbc_write_atomic(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_sbc_write_scattered(struct scsi_cmd *cmd);
void scsi_sbc_write_scattered_exec(struct scsi_cmd *cmd);
/* Does the LU offer atomic writes (non-zero atomic limits)? */
bool scsi_lu_has_atomic(const struct core_ns *ns);
/* The fuzzer: run the WRITE SCATTERED parameter-list check of cmd (parsed) on len bytes of buf. */
void scsi_scatter_fuzz_params(struct scsi_cmd *cmd, uint32_t len);

/*
 * streams.c: streams (STREAM CONTROL, GET STREAM STATUS, WRITE STREAM),
 * permanent streams and access hints by GROUP NUMBER, and their pages.
 */
/* MAXIMUM NUMBER OF STREAMS; the permanent ones among them (ids 1..perm). */
unsigned scsi_streams_max(const struct core_ns *ns);
unsigned scsi_streams_perm(const struct core_ns *ns);
/* Set the LU's grouping descriptors to their defaults and, with placements, take the
 * permanent streams' placement ids.  Once per LU state; later calls do nothing. */
void scsi_streams_lu_init(struct core_ns *ns, struct scsi_lu_state *st, bool placements);
/* A read or write command's GROUP NUMBER (cmd->req built): the group's hints, its permanent
 * stream's placement (writes) and the per-group statistics. */
void scsi_group_tag(struct scsi_cmd *cmd, uint8_t group, bool write);
/* CORE_HINT_* of a logical block markup descriptor (12 bytes). */
uint8_t scsi_lbm_hints(const uint8_t *lbm);
enum scsi_parse_result scsi_sbc_write_stream(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_stream_control(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_get_stream_status(struct scsi_cmd *cmd);
/* VPD B7h bytes 5-13 (page: the whole page, header included). */
void scsi_streams_vpd_b7(const struct core_ns *ns, uint8_t *page);
/* Mode page 0Ah/05h descriptors (after the 16-byte head) for a page control. */
void scsi_grouping_page_build(struct core_ns *ns, int pc, uint8_t *p);
/* Check and apply a MODE SELECT of the page (p: its first byte at parameter list offset off);
 * 0, or -EINVAL with the sense set.  *changed when anything changed. */
int scsi_grouping_page_select(struct scsi_cmd *cmd, const uint8_t *p, uint32_t off, bool *changed);
/* Log page 19h/(cdb[3]) parameters from ppc on; -1 past the last. */
int scsi_group_stats_page(struct scsi_cmd *cmd, uint16_t ppc, uint8_t *p);

/*
 * media.c: failing media (SBC-4/5): GET PHYSICAL ELEMENT STATUS, REMOVE
 * ELEMENT AND TRUNCATE, RESTORE ELEMENTS AND REBUILD, WRITE LONG(10)/(16)
 * with WR_UNCOR, on the core's media model (core/media.h).
 */
#define SCSI_DEPOP_TIME_S 60u /* VPD B1h DEPOPULATION TIME (nominal seconds) */
/* Build the GET PHYSICAL ELEMENT STATUS parameter data (header and the
 * descriptors of elements >= start that FILTER selects) into out (cap
 * bytes); returns the full length (header + descriptors that fit). */
size_t scsi_media_gpes_build(struct core_ns *ns, uint32_t start, uint8_t filter, uint8_t *out,
                             size_t cap);
enum scsi_parse_result scsi_media_gpes(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_media_remove_parse(struct scsi_cmd *cmd);
void scsi_media_remove_exec(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_media_restore_parse(struct scsi_cmd *cmd);
void scsi_media_restore_exec(struct scsi_cmd *cmd);
/* A WRITE LONG(10)/(16) CDB, decoded. */
struct scsi_write_long {
        bool cor_dis, wr_uncor, pblock;
        uint16_t xfer_len; /* BYTE TRANSFER LENGTH (ignored with WR_UNCOR) */
        uint64_t lba;      /* first block to mark (the physical block's first with PBLOCK) */
        uint32_t nlb;      /* 1, or the logical blocks per physical block with PBLOCK */
};
/* Decode and check a WRITE LONG CDB against ns: 0; -EINVAL with the field
 * (*byte, *bit; bit < 0: none) for INVALID FIELD IN CDB; -ERANGE for LBA
 * OUT OF RANGE.  Pure: no state. */
int scsi_media_write_long_decode(const uint8_t *c, const struct core_ns *ns,
                                 struct scsi_write_long *wl, uint16_t *byte, int *bit);
enum scsi_parse_result scsi_media_write_long(struct scsi_cmd *cmd);
void scsi_media_write_long_exec(struct scsi_cmd *cmd);

/* log.c: LOG SENSE (SPC-5 6.8) from the table of log pages. */
enum scsi_parse_result scsi_log_sense(struct scsi_cmd *cmd);

/* diag.c: SEND DIAGNOSTIC self-tests (core/selftest.h) and RECEIVE DIAGNOSTIC RESULTS. */
enum scsi_parse_result scsi_diag_send_parse(struct scsi_cmd *cmd);
void scsi_diag_send_exec(struct scsi_cmd *cmd);
/* The diagnostic pages of a SEND DIAGNOSTIC parameter list (in buf): checked, status set. */
void scsi_diag_pages(struct scsi_cmd *cmd);
void scsi_diag_send_abort(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_diag_receive(struct scsi_cmd *cmd);

/* sanitize.c: SANITIZE (SBC-4 5.30) and the LU's sanitize state. */
enum scsi_parse_result scsi_sanitize_parse(struct scsi_cmd *cmd);
void scsi_sanitize_exec(struct scsi_cmd *cmd);
void scsi_sanitize_abort(struct scsi_cmd *cmd);
/* REQUEST SENSE: progress of a sanitize in progress, else scsi_spc_request_sense(). */
enum scsi_parse_result scsi_sanitize_request_sense(struct scsi_cmd *cmd);
/* OVERWRITE parameter list check (SBC-4 5.30.3): 0, or -EINVAL with the
 * offending byte and bit of the parameter list in *byte and *bit. */
int scsi_sanitize_check_overwrite(const uint8_t *p, uint32_t len, uint32_t block_size,
                                  uint16_t *byte, int *bit);
/*
 * pi.c: protection information (SBC-4 4.22): the LU's format, the
 * xxPROTECT fields mapped to cmd->req.pi, FORMAT UNIT, the Application Tag
 * mode page (0Ah/02h).
 */
#define SCSI_APPTAG_HDR      16u /* the page's header (4) and reserved bytes */
#define SCSI_APPTAG_DESC     24u /* one Application Tag descriptor */
#define SCSI_APPTAG_MAX_DESC 64u /* descriptors a MODE SELECT may set */
/* The LU's protection type (0: none) and P_I_EXPONENT. */
uint8_t scsi_lu_pi_type(const struct core_ns *ns);
uint8_t scsi_lu_pi_exp(const struct core_ns *ns);
/* Parse time: an xxPROTECT value (the CDB's byte off, bits 7:5) this LU can do; false with the
 * sense set (INVALID FIELD IN CDB; INVALID COMMAND OPERATION CODE for type 2 and a short CDB). */
bool scsi_pi_protect_ok(struct scsi_cmd *cmd, uint8_t protect, uint8_t off);
/* Does the data transfer carry each block's protection information (xxPROTECT != 0 on a PI LU)? */
bool scsi_pi_host_md(const struct scsi_cmd *cmd, uint8_t protect);
/* After req_init: cmd->req.pi for a checked xxPROTECT; write: the medium is written from the
 * transfer; xfer: the transfer carries blocks (VERIFY BYTCHK 0 has none). */
void scsi_pi_setup(struct scsi_cmd *cmd, bool write, uint8_t protect, bool xfer);
/* After scsi_pi_setup, ORWRITE: the checks of the stored blocks before the OR (cmd->req.pi.rmw_*).
 */
void scsi_pi_setup_rmw(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_pi_format_parse(struct scsi_cmd *cmd);
void scsi_pi_format_exec(struct scsi_cmd *cmd);
/* FORMAT UNIT's CDB and parameter list (len bytes at p) as a format; 0, or -1 with the sense
 * set.  Pure but for cmd's sense (the fuzzer's entry). */
int scsi_pi_format_decode(struct scsi_cmd *cmd, const uint8_t *p, uint32_t len,
                          struct core_pi_fmt *out);
bool scsi_apptag_page_present(const struct core_ns *ns);
/* The page for a page control (0 current, 1 changeable, 2 default); returns its length. */
uint32_t scsi_apptag_page_build(struct core_ns *ns, int pc, uint8_t *p);
/* Check and apply a MODE SELECT of the page (at parameter list offset off); 0, or -EINVAL with
 * the sense set. */
int scsi_apptag_page_select(struct scsi_cmd *cmd, const uint8_t *p, uint32_t off, bool *changed);

/* Core completion for commands that submitted cmd->req. */
void scsi_sbc_req_done(struct core_req *req);

/*
 * xcopy.c: third-party copy (SPC-5 6.3 COPY OPERATION ABORT, 6.4 EXTENDED
 * COPY(LID4), 6.5 EXTENDED COPY(LID1), 6.20-6.26 the RECEIVE commands),
 * executed by the core copy engine (core/copy.h).  The limits below are
 * what the parameter-list parser enforces and what RECEIVE COPY OPERATING
 * PARAMETERS and VPD 8Fh advertise.
 */
#define SCSI_XCOPY_MAX_CSCD        16u /* CSCD descriptors per list */
#define SCSI_XCOPY_MAX_SEGS        16u /* segment descriptors per list */
#define SCSI_XCOPY_CSCD_LEN        32u
#define SCSI_XCOPY_SEG_B2B_LEN     28u /* block -> block (02h) */
#define SCSI_XCOPY_SEG_B2B_OFF_LEN 32u /* block with offset -> block with offset (0Ah) */
#define SCSI_XCOPY_LID1_HDR        16u
#define SCSI_XCOPY_LID4_HDR        48u
#define SCSI_XCOPY_MAX_DESC_LIST                                                                   \
        (SCSI_XCOPY_MAX_CSCD * SCSI_XCOPY_CSCD_LEN +                                               \
         SCSI_XCOPY_MAX_SEGS * SCSI_XCOPY_SEG_B2B_OFF_LEN)
#define SCSI_XCOPY_MAX_SEG_BLOCKS 0xffffu /* NUMBER OF BLOCKS of 02h is 16 bits; 0Ah the same */
#define SCSI_XCOPY_MAX_CONCURRENT 32u     /* copy operations at once, all nexuses */
#define SCSI_XCOPY_MAX_PARAM_LEN  65536u  /* parameter list bytes we accept at all */

/* A parameter-list error: ILLEGAL REQUEST (field pointer into the list) or COPY ABORTED
 * (segment number, and a segment pointer relative to its descriptor). */
struct scsi_xcopy_err {
        bool copy_aborted;
        uint8_t asc, ascq;
        uint16_t segment;
        int field; /* byte offset, < 0: none */
        int bit;   /* < 0: no bit pointer (ILLEGAL REQUEST only) */
};

/* One EXTENDED COPY(LID1) or (LID4) parameter list, as parsed (pointers into the list). */
struct scsi_xcopy_list {
        bool lid4;
        uint32_t list_id; /* one byte for LID1 */
        uint8_t usage, priority;
        bool immed; /* LID4: status before the first segment is processed */
        unsigned ncscd, nseg;
        const uint8_t *cscd[SCSI_XCOPY_MAX_CSCD];
        struct scsi_xcopy_seg {
                uint8_t type;      /* 02h or 0Ah */
                uint16_t src, dst; /* CSCD indexes */
                uint16_t nlb;      /* 02h: NUMBER OF BLOCKS */
                bool dc;
                uint32_t nbytes;           /* 0Ah: NUMBER OF BYTES */
                uint16_t src_off, dst_off; /* 0Ah: BLOCK DEVICE BYTE OFFSETs */
                uint64_t src_lba, dst_lba;
        } seg[SCSI_XCOPY_MAX_SEGS];
};

/*
 * Check an EXTENDED COPY parameter list of len bytes (LID1 or, with lid4,
 * LID4: the header, the CSCD and segment descriptor lists, their counts,
 * types and lengths); 0 with *l filled, or -EINVAL with *e saying which
 * error.  Pure: CSCDs are resolved and segments range-checked (and 0Ah
 * byte counts and offsets checked against the block size) at execution.
 */
int scsi_xcopy_parse_list(const uint8_t *p, uint32_t len, bool lid4, struct scsi_xcopy_list *l,
                          struct scsi_xcopy_err *e);
enum scsi_parse_result scsi_xcopy_parse(struct scsi_cmd *cmd);
void scsi_xcopy_exec(struct scsi_cmd *cmd);
/* Token copy (ODX): POPULATE TOKEN, WRITE USING TOKEN; RECEIVE ROD TOKEN INFORMATION is an
 * RCR service action. */
#define SCSI_ODX_MAX_TOKENS           256u /* live ROD tokens, all nexuses */
#define SCSI_ODX_MAX_RANGES           8u   /* block device range descriptors */
#define SCSI_ODX_DEFAULT_INACTIVITY_S 60u  /* token inactivity timeout */
#define SCSI_ODX_MAX_INACTIVITY_S     3600u
#define SCSI_ODX_MAX_TOKEN_BYTES      (4ull << 30) /* per token and per WRITE USING TOKEN */
enum scsi_parse_result scsi_odx_parse(struct scsi_cmd *cmd);
void scsi_odx_exec(struct scsi_cmd *cmd);
void scsi_xcopy_abort(struct scsi_cmd *cmd);
/* COPY OPERATION ABORT (83h/1Ch): cancels a running copy operation of the nexus by LIST ID. */
enum scsi_parse_result scsi_copy_op_abort_parse(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_rcr_parse(struct scsi_cmd *cmd);
/* target.c: I_T nexus loss discards the nexus's copy results (SPC-5 5.17.4.3). */
void scsi_xcopy_nexus_lost(const struct scsi_nexus *nx);
/* The fuzzer: run the parameter-list check of cmd (parsed, SCSI_PARSE_EXEC) on len bytes of buf. */
void scsi_xcopy_fuzz_params(struct scsi_cmd *cmd, uint32_t len);

/* vpd.c: does desc (a designation descriptor: code set, association/type, length,
 * designator) name ns itself (one of its VPD 83h logical unit designators)? */
bool scsi_vpd_lu_designator_match(const struct core_ns *ns, const uint8_t *desc);
/* target.c: the LU named by a designation descriptor, among the LUs nx's initiator reaches
 * (the LUs of any target port it has an I_T nexus with); referenced (core_ns_put), or NULL. */
struct core_ns *scsi_lu_by_designator(const struct scsi_nexus *nx, const uint8_t *desc);

/* target.c: libFuzzer entry point; parse only, against a fake LU. */
int scsi_fuzz_one(const uint8_t *cdb, size_t len);

#endif
