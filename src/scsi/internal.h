/*
 * Shared inside the SCSI personality only (not for transports).
 */
#ifndef SCSI_INTERNAL_H
#define SCSI_INTERNAL_H

#ifndef SLATE_MODULE_SCSI
#error "scsi/internal.h is private to src/scsi/; use scsi/scsi.h"
#endif

#include <stddef.h>

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
#define SK_ABORTED_COMMAND 0xb
#define SK_MISCOMPARE      0xe

/* sense.c: build CHECK CONDITION sense in the format the LU's D_SENSE selects. */
void scsi_sense_set(struct scsi_cmd *cmd, uint8_t key, uint8_t asc, uint8_t ascq);
/* ILLEGAL REQUEST, INVALID FIELD IN CDB (24h/00h) or IN PARAMETER LIST (26h/00h),
 * with the sense-key-specific field pointer at byte/bit. bit < 0: no bit pointer. */
void scsi_sense_invalid_field(struct scsi_cmd *cmd, bool in_cdb, uint16_t byte, int bit);
/* Map a core status (and req->info) to SAM status + sense. */
void scsi_status_from_core(struct scsi_cmd *cmd, enum core_status st, uint64_t info,
                           bool info_valid);

/* pr.c: persistent reservations and RESERVE/RELEASE(6); synchronous, data already in buf. */
void scsi_pr_in(struct scsi_cmd *cmd);
void scsi_pr_out(struct scsi_cmd *cmd);
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
        uint8_t usage[16]; /* CDB usage data for REPORT SUPPORTED OPERATION CODES */
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
/* op if this LU offers it (SCSI_OPF_LBP needs a thin namespace), else NULL. */
const struct scsi_op *scsi_op_for_lu(const struct scsi_op *op, const struct core_ns *ns);

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
enum scsi_parse_result scsi_spc_start_stop(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_prevent_allow(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_pr_in(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_pr_out(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_reserve6(struct scsi_cmd *cmd);
enum scsi_parse_result scsi_spc_release6(struct scsi_cmd *cmd);
void scsi_spc_exec_sync(struct scsi_cmd *cmd);

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
/* VPD B2h THRESHOLD EXPONENT: log2 of the blocks in a threshold set (CORE_PROV_SET_BYTES). */
static inline uint8_t scsi_lbp_threshold_exponent(const struct core_ns *ns)
{
        return (uint8_t)(__builtin_ctz(CORE_PROV_SET_BYTES) - ns->block_shift);
}

/* log.c: LOG SENSE (SPC-5 6.8) from the table of log pages. */
enum scsi_parse_result scsi_log_sense(struct scsi_cmd *cmd);

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
/* Core completion for commands that submitted cmd->req. */
void scsi_sbc_req_done(struct core_req *req);

/* target.c: libFuzzer entry point; parse only, against a fake LU. */
int scsi_fuzz_one(const uint8_t *cdb, size_t len);

#endif
