/*
 * The NVMe opcode tables (admin: Base 2.0 fig. 28; NVM I/O: NVM Command Set
 * 1.0 fig. 16; Fabrics: Base 2.0 6.1 fig. 542) and the dispatcher built on
 * them.  The tables are the single source of truth: they drive
 * nvme_cmd_parse()/nvme_cmd_exec() and the Commands Supported and Effects
 * log (Base 2.0 5.16.1.6), so what we advertise is what we execute.  The
 * data pointer (SGLs, in-capsule data) is the transport's: a command says
 * how much it moves and the transport checks the SGL against that.
 */
#include <string.h>

#include "nvme/internal.h"
#include "rt/reactor.h"

#define CSE_NONE   0u
#define CSE_NS     (1u << NVME_EFFECTS_CSE_SHIFT) /* exclusive per namespace */
#define CSE_SUBSYS (2u << NVME_EFFECTS_CSE_SHIFT) /* exclusive in the NVM subsystem */
#define SAN_OK     NVME_OPF_SANITIZE_OK

static const struct nvme_op admin_ops[256] = {
    [NVME_ADM_GET_LOG_PAGE] = {"get-log-page", NVME_ADM_GET_LOG_PAGE, NVME_DIR_C2H,
                               NVME_OPF_DISC | SAN_OK, 0, nvme_get_log_parse, NULL},
    [NVME_ADM_IDENTIFY] = {"identify", NVME_ADM_IDENTIFY, NVME_DIR_C2H, NVME_OPF_DISC | SAN_OK, 0,
                           nvme_identify_parse, NULL},
    [NVME_ADM_ABORT] = {"abort", NVME_ADM_ABORT, NVME_DIR_NONE, SAN_OK, 0, nvme_abort_parse, NULL},
    [NVME_ADM_SET_FEATURES] = {"set-features", NVME_ADM_SET_FEATURES, NVME_DIR_H2C,
                               NVME_OPF_DISC | SAN_OK,
                               NVME_EFFECTS_CCC | NVME_EFFECTS_NCC, /* NCC: feature 84h */
                               nvme_set_features_parse, nvme_set_features_exec},
    [NVME_ADM_GET_FEATURES] = {"get-features", NVME_ADM_GET_FEATURES, NVME_DIR_C2H,
                               NVME_OPF_DISC | SAN_OK, 0, nvme_get_features_parse, NULL},
    [NVME_ADM_ASYNC_EVENT] = {"async-event-request", NVME_ADM_ASYNC_EVENT, NVME_DIR_NONE,
                              NVME_OPF_DISC | SAN_OK, 0, nvme_aer_parse, nvme_aer_exec},
    [NVME_ADM_KEEP_ALIVE] = {"keep-alive", NVME_ADM_KEEP_ALIVE, NVME_DIR_NONE,
                             NVME_OPF_DISC | SAN_OK, 0, nvme_keep_alive_parse, NULL},
    /* Reads the namespaces' media in the background (core/selftest.c); one at a time. */
    [NVME_ADM_DEVICE_SELF_TEST] = {"device-self-test", NVME_ADM_DEVICE_SELF_TEST, NVME_DIR_NONE, 0,
                                   CSE_SUBSYS, nvme_dst_parse, nvme_dst_exec},
    /* Changes the namespace's LBA format and protection information (pi.c). */
    [NVME_ADM_FORMAT_NVM] = {"format-nvm", NVME_ADM_FORMAT_NVM, NVME_DIR_NONE, 0,
                             NVME_EFFECTS_LBCC | NVME_EFFECTS_NCC | CSE_NS, nvme_format_parse,
                             nvme_format_exec},
    /* Changes every block of every namespace of the subsystem; one at a time (CSE). */
    [NVME_ADM_SANITIZE] = {"sanitize", NVME_ADM_SANITIZE, NVME_DIR_NONE, 0,
                           NVME_EFFECTS_LBCC | CSE_SUBSYS, nvme_sanitize_parse, nvme_sanitize_exec},
    /* Directives (directive.c): Identify and Streams; stream state only, no data change. */
    [NVME_ADM_DIR_SEND] = {"directive-send", NVME_ADM_DIR_SEND, NVME_DIR_H2C, 0, 0,
                           nvme_dir_send_parse, NULL},
    [NVME_ADM_DIR_RECV] = {"directive-receive", NVME_ADM_DIR_RECV, NVME_DIR_C2H, 0, 0,
                           nvme_dir_recv_parse, NULL},
    /* Reads the core's list of unrecoverable blocks (lbastatus.c); changes nothing. */
    [NVME_ADM_GET_LBA_STATUS] = {"get-lba-status", NVME_ADM_GET_LBA_STATUS, NVME_DIR_C2H, 0, 0,
                                 nvme_get_lba_status_parse, NULL},
};

static const struct nvme_op io_ops[256] = {
    [NVME_IO_FLUSH] = {"flush", NVME_IO_FLUSH, NVME_DIR_NONE, 0, CSE_NONE, nvme_io_flush_parse,
                       NULL},
    [NVME_IO_WRITE] = {"write", NVME_IO_WRITE, NVME_DIR_H2C, 0, NVME_EFFECTS_LBCC, nvme_io_rw_parse,
                       NULL},
    [NVME_IO_READ] = {"read", NVME_IO_READ, NVME_DIR_C2H, 0, 0, nvme_io_rw_parse, NULL},
    /* Marks blocks unrecoverable in the core (core/media.h); a write heals them. */
    [NVME_IO_WRITE_UNCOR] = {"write-uncorrectable", NVME_IO_WRITE_UNCOR, NVME_DIR_NONE, 0,
                             NVME_EFFECTS_LBCC, nvme_io_write_uncor_parse,
                             nvme_io_write_uncor_exec},
    [NVME_IO_COMPARE] = {"compare", NVME_IO_COMPARE, NVME_DIR_H2C, 0, 0, nvme_io_compare_parse,
                         NULL},
    [NVME_IO_WRITE_ZEROES] = {"write-zeroes", NVME_IO_WRITE_ZEROES, NVME_DIR_NONE, 0,
                              NVME_EFFECTS_LBCC, nvme_io_write_zeroes_parse, NULL},
    [NVME_IO_DSM] = {"dataset-management", NVME_IO_DSM, NVME_DIR_H2C, 0, 0, nvme_io_dsm_parse,
                     nvme_io_dsm_exec},
    [NVME_IO_VERIFY] = {"verify", NVME_IO_VERIFY, NVME_DIR_NONE, 0, 0, nvme_io_verify_parse, NULL},
    [NVME_IO_COPY] = {"copy", NVME_IO_COPY, NVME_DIR_H2C, 0, NVME_EFFECTS_LBCC, nvme_io_copy_parse,
                      nvme_io_copy_exec},
    /* Flexible Data Placement (fdp.c): reclaim unit handle status and update. */
    [NVME_IO_IO_MGMT_RECV] = {"io-management-receive", NVME_IO_IO_MGMT_RECV, NVME_DIR_C2H, 0, 0,
                              nvme_io_mgmt_recv_parse, NULL},
    [NVME_IO_IO_MGMT_SEND] = {"io-management-send", NVME_IO_IO_MGMT_SEND, NVME_DIR_H2C, 0, 0,
                              nvme_io_mgmt_send_parse, nvme_io_mgmt_send_exec},
    /* Reservations (resv.c): no effects bit describes a reservation change. */
    [NVME_IO_RESV_REGISTER] = {"reservation-register", NVME_IO_RESV_REGISTER, NVME_DIR_H2C, 0, 0,
                               nvme_resv_register_parse, nvme_resv_exec},
    [NVME_IO_RESV_REPORT] = {"reservation-report", NVME_IO_RESV_REPORT, NVME_DIR_C2H, 0, 0,
                             nvme_resv_report_parse, nvme_resv_report_exec},
    [NVME_IO_RESV_ACQUIRE] = {"reservation-acquire", NVME_IO_RESV_ACQUIRE, NVME_DIR_H2C, 0, 0,
                              nvme_resv_acquire_parse, nvme_resv_exec},
    [NVME_IO_RESV_RELEASE] = {"reservation-release", NVME_IO_RESV_RELEASE, NVME_DIR_H2C, 0, 0,
                              nvme_resv_release_parse, nvme_resv_exec},
};

static const struct nvme_op fabrics_ops[256] = {
    [NVMF_FCTYPE_PROPERTY_SET] = {"property-set", NVMF_FCTYPE_PROPERTY_SET, NVME_DIR_NONE,
                                  NVME_OPF_DISC | NVME_OPF_NO_EN | NVME_OPF_ADMIN_Q, 0,
                                  nvmf_property_set_parse, NULL},
    [NVMF_FCTYPE_CONNECT] = {"connect", NVMF_FCTYPE_CONNECT, NVME_DIR_H2C,
                             NVME_OPF_DISC | NVME_OPF_NO_EN | NVME_OPF_NO_CTRL, 0,
                             nvmf_connect_parse, nvmf_connect_exec},
    [NVMF_FCTYPE_PROPERTY_GET] = {"property-get", NVMF_FCTYPE_PROPERTY_GET, NVME_DIR_NONE,
                                  NVME_OPF_DISC | NVME_OPF_NO_EN | NVME_OPF_ADMIN_Q, 0,
                                  nvmf_property_get_parse, NULL},
    /* DH-HMAC-CHAP (auth.c): on any queue, before CC.EN, before the queue is authenticated. */
    [NVMF_FCTYPE_AUTH_SEND] = {"authentication-send", NVMF_FCTYPE_AUTH_SEND, NVME_DIR_H2C,
                               NVME_OPF_DISC | NVME_OPF_NO_EN, 0, nvmf_auth_send_parse,
                               nvmf_auth_send_exec},
    [NVMF_FCTYPE_AUTH_RECV] = {"authentication-receive", NVMF_FCTYPE_AUTH_RECV, NVME_DIR_C2H,
                               NVME_OPF_DISC | NVME_OPF_NO_EN, 0, nvmf_auth_recv_parse, NULL},
    [NVMF_FCTYPE_DISCONNECT] = {"disconnect", NVMF_FCTYPE_DISCONNECT, NVME_DIR_NONE,
                                NVME_OPF_DISC | NVME_OPF_NO_EN, 0, nvmf_disconnect_parse, NULL},
};

const struct nvme_op *nvme_admin_op(uint8_t opc)
{
        return admin_ops[opc].parse ? &admin_ops[opc] : NULL;
}

const struct nvme_op *nvme_io_op(uint8_t opc)
{
        return io_ops[opc].parse ? &io_ops[opc] : NULL;
}

const struct nvme_op *nvmf_fabrics_op(uint8_t fctype)
{
        return fabrics_ops[fctype].parse ? &fabrics_ops[fctype] : NULL;
}

void nvme_effects_log_build(struct nvme_effects_log *log)
{
        memset(log, 0, sizeof(*log));
        for (unsigned i = 0; i < 256; i++) {
                if (admin_ops[i].parse)
                        put_le32(&log->acs[i], NVME_EFFECTS_CSUPP | admin_ops[i].effects);
                if (io_ops[i].parse)
                        put_le32(&log->iocs[i], NVME_EFFECTS_CSUPP | io_ops[i].effects);
        }
        /* Fabrics commands share opcode 7Fh; Connect/Property commands are supported. */
        put_le32(&log->acs[NVME_OPC_FABRICS], NVME_EFFECTS_CSUPP);
}

/*
 * The command moves len bytes (h2c: host to controller).  Whether the
 * SQE's data pointer describes that transfer is the transport's to say
 * (queue->check_xfer reads the SGL); the status is ours.
 */
bool nvme_xfer(struct nvme_cmd *cmd, uint32_t len, bool h2c)
{
        /* The data pointer first: the transport sized buf from it. */
        struct nvme_queue *q = cmd->queue;
        enum nvme_xfer_error e = q && q->check_xfer ? q->check_xfer(cmd, len, h2c) : NVME_XFER_OK;
        if (e != NVME_XFER_OK) {
                nvme_xfer_status(cmd, e);
                return false;
        }
        if (len > cmd->buf_len) {
                nvme_invalid_field(cmd, 24);
                return false;
        }
        cmd->data_len = len;
        cmd->h2c = h2c && len > 0;
        return true;
}

void nvme_copy_window(uint8_t *dst, uint32_t dst_len, uint64_t win_off, const void *src,
                      uint64_t src_off, uint32_t src_len)
{
        /* dst holds log bytes [win_off, win_off + dst_len); src is log bytes [src_off, +src_len).
         */
        uint64_t lo = win_off > src_off ? win_off : src_off;
        uint64_t hi_w = win_off + dst_len, hi_s = src_off + src_len;
        uint64_t hi = hi_w < hi_s ? hi_w : hi_s;
        if (lo >= hi)
                return;
        memcpy(dst + (lo - win_off), (const uint8_t *)src + (lo - src_off), hi - lo);
}

static enum nvme_parse_result parse_one(struct nvme_cmd *cmd, const struct nvme_cmd *first)
{
        struct nvme_queue *q = cmd->queue;
        struct nvme_ctrl *ctrl = q ? q->ctrl : NULL;
        const struct nvme_op *op;
        uint8_t opc = cmd->sqe[0], flags = cmd->sqe[1];

        if (!q)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INTERNAL, NVME_LOC_NONE, -1);

        if (opc == NVME_OPC_FABRICS) {
                op = nvmf_fabrics_op(cmd->sqe[4]);
                if (!op)
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE, 4, -1);
                if ((op->flags & NVME_OPF_ADMIN_Q) && q->qid != 0)
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE, 4, -1);
        } else if (!ctrl) {
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR, 0, -1);
        } else {
                op = q->qid == 0 ? nvme_admin_op(opc) : nvme_io_op(opc);
                if (!op || (ctrl->subsys->discovery && !(op->flags & NVME_OPF_DISC)))
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_OPCODE, 0, -1);
        }
        if (!ctrl && !(op->flags & NVME_OPF_NO_CTRL))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR, 0, -1);
        /* An unauthenticated queue runs authentication and Disconnect only (8.13.5). */
        if (!nvme_auth_queue_ok(q) &&
            !(opc == NVME_OPC_FABRICS &&
              (cmd->sqe[4] == NVMF_FCTYPE_AUTH_SEND || cmd->sqe[4] == NVMF_FCTYPE_AUTH_RECV ||
               cmd->sqe[4] == NVMF_FCTYPE_DISCONNECT)))
                return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_AUTH_REQUIRED, 0, -1);
        if (ctrl) {
                atomic_store_explicit(&ctrl->last_cmd_ns, rt_now_ns(), memory_order_relaxed);
                if (!(op->flags & NVME_OPF_NO_EN) &&
                    !(atomic_load_explicit(&ctrl->csts, memory_order_relaxed) & NVME_CSTS_RDY))
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR, 0, -1);
        }
        if ((flags & 0x03) && nvme_fused_check(cmd, first) == NVME_PARSE_DONE)
                return NVME_PARSE_DONE; /* fused.c: Compare + Write only, a matching pair */
        if ((flags >> 6) != NVME_PSDT_SGL_MPTR && (flags >> 6) != NVME_PSDT_SGL_SGL)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, 1, 6);
        cmd->op = op;
        /* Base 2.0 8.21.1: while a sanitize runs, only the admin commands it allows. */
        if (ctrl && q->qid == 0 && opc != NVME_OPC_FABRICS && !(op->flags & NVME_OPF_SANITIZE_OK) &&
            nvme_subsys_sanitizing(ctrl->subsys))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_SANITIZE_IN_PROGRESS,
                                   NVME_LOC_NONE, -1);
        if (op->dir == NVME_DIR_NONE && !nvme_xfer(cmd, 0, false))
                return NVME_PARSE_DONE;

        return op->parse(cmd);
}

enum nvme_parse_result nvme_cmd_parse(struct nvme_cmd *cmd)
{
        struct nvme_queue *q = cmd->queue;
        /* A fused first half waiting on this queue: cmd is the command after it. */
        struct nvme_cmd *first = q ? q->fuse_first : NULL;
        if (first)
                q->fuse_first = NULL;

        nvme_cqe_init(cmd);
        cmd->data_len = 0;
        cmd->h2c = false;
        cmd->ns = NULL;
        cmd->op = NULL;
        cmd->fuse_peer = NULL;
        cmd->fuse = 0;
        cmd->fuse_fail = 0;
        cmd->fuse_ready = false;
        enum nvme_parse_result r = parse_one(cmd, first);
        if (r == NVME_PARSE_DONE && cmd->ns) {
                core_ns_put(cmd->ns);
                cmd->ns = NULL;
        }
        if (q)
                nvme_fused_parsed(cmd, first, r);
        return r;
}

void nvme_cmd_exec(struct nvme_cmd *cmd)
{
        const struct nvme_op *op = cmd->op;
        if (!op) { /* exec without a successful parse: finish with what parse left */
                if (nvme_cqe_status(cmd) == 0)
                        nvme_set_status(cmd, NVME_SCT_GENERIC, NVME_SC_INTERNAL, false);
                nvme_cmd_complete_deferred(cmd);
                return;
        }
        if (nvme_fused_exec(cmd))
                return; /* a fused half: waits for its peer, or runs the pair */
        if (op->exec)
                op->exec(cmd);
        else
                nvme_io_submit(cmd);
}
