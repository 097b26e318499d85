/*
 * Fabrics commands (NVMe Base 2.0 6.3 Connect, 6.4 Disconnect, 6.5/6.6
 * Property Get/Set; NVMe-oF 1.1 3.3): Connect for admin queues (dynamic
 * controller model: CNTLID FFFFh makes a new controller) and I/O queues
 * (naming that CNTLID, same host and subsystem), with Connect data checks
 * reported through IATTR/IPO in the completion (Base 2.0 fig. 545); and
 * the controller properties CAP, VS, CC, CSTS that replace PCIe registers.
 */
#include <errno.h>
#include <string.h>

#include "nvme/internal.h"
#include "rt/log.h"

#define CAP_TO_500MS 15 /* CAP.TO: 7.5 s ready timeout */

static uint64_t prop_cap(void)
{
        uint64_t cap = NVME_TRANSPORT_QUEUE_DEPTH - 1; /* MQES */
        cap |= 1ull << 16;                             /* CQR: queues must be contiguous */
        cap |= (uint64_t)CAP_TO_500MS << 24;           /* TO */
        cap |= 1ull << 37;                             /* CSS: NVM command set */
        /* MPSMIN = MPSMAX = 0 (4 KiB), NSSRS = 0, DSTRD = 0 */
        return cap;
}

/* Connect failure with IPO (byte offset) and IATTR (1 = in the Connect data). */
static void connect_fail(struct nvme_cmd *cmd, uint8_t sct, uint8_t sc, bool in_data, uint16_t off)
{
        nvme_set_status(cmd, sct, sc, true);
        nvme_cqe_dw0(cmd, off | (in_data ? NVMF_IATTR_DATA : 0));
}

enum nvme_parse_result nvmf_connect_parse(struct nvme_cmd *cmd)
{
        const struct nvmf_connect_cmd *c = (const struct nvmf_connect_cmd *)cmd->sqe;
        uint16_t sqsize = get_le16(&c->sqsize);

        if (cmd->queue->ctrl) { /* a queue connects once */
                connect_fail(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR, false,
                             offsetof(struct nvmf_connect_cmd, fctype));
                return NVME_PARSE_DONE;
        }
        if (get_le16(&c->recfmt) != 0) {
                connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_FORMAT, false,
                             offsetof(struct nvmf_connect_cmd, recfmt));
                return NVME_PARSE_DONE;
        }
        if (sqsize == 0 || sqsize > NVME_TRANSPORT_QUEUE_DEPTH - 1) {
                connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_PARAM, false,
                             offsetof(struct nvmf_connect_cmd, sqsize));
                return NVME_PARSE_DONE;
        }
        if (get_le16(&c->qid) > NVME_MAX_IO_QUEUES) {
                connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_PARAM, false,
                             offsetof(struct nvmf_connect_cmd, qid));
                return NVME_PARSE_DONE;
        }
        if (!nvme_xfer(cmd, sizeof(struct nvmf_connect_data), true))
                return NVME_PARSE_DONE;
        return NVME_PARSE_EXEC;
}

void nvmf_connect_do(struct nvme_cmd *cmd)
{
        const struct nvmf_connect_cmd *c = (const struct nvmf_connect_cmd *)cmd->sqe;
        const struct nvmf_connect_data *d = (const struct nvmf_connect_data *)cmd->buf;
        struct nvme_queue *q = cmd->queue;
        uint16_t qid = get_le16(&c->qid), sqsize = get_le16(&c->sqsize);
        uint16_t cntlid = get_le16(&d->cntlid);
        struct nvme_ctrl *ctrl = NULL;

        if (cmd->data_len < sizeof(*d)) {
                connect_fail(cmd, NVME_SCT_GENERIC, NVME_SC_SGL_INVALID_DATA_LEN, false,
                             offsetof(struct nvmf_connect_cmd, dptr));
                return;
        }
        if (!memchr(d->subnqn, 0, sizeof(d->subnqn)) || strlen(d->subnqn) > NVMF_NQN_MAX_LEN) {
                connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_PARAM, true,
                             offsetof(struct nvmf_connect_data, subnqn));
                return;
        }
        /*
         * An empty Host NQN (spdk_nvme_perf sends one unless told a name) is
         * admitted where the subsystem admits any host, as SPDK's target and
         * Linux nvmet do; a subsystem with a host list or DH-HMAC-CHAP
         * secrets refuses it as an unlisted host (Invalid Host,
         * nvme_subsys_host_allowed_locked), a TLS queue because it is not the
         * PSK's Host NQN.
         */
        if (!memchr(d->hostnqn, 0, sizeof(d->hostnqn)) || strlen(d->hostnqn) > NVMF_NQN_MAX_LEN) {
                connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_PARAM, true,
                             offsetof(struct nvmf_connect_data, hostnqn));
                return;
        }

        if (q->tls_hostnqn &&
            (strcmp(d->hostnqn, q->tls_hostnqn) != 0 || strcmp(d->subnqn, q->tls_subnqn) != 0)) {
                LOG_INFO("nvme", "connect to %s as host %s refused: the TLS PSK is %s's for %s",
                         d->subnqn, d->hostnqn, q->tls_hostnqn, q->tls_subnqn);
                connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_HOST, true,
                             offsetof(struct nvmf_connect_data, hostnqn));
                return;
        }
        if (qid == 0) {
                if (cntlid != NVMF_CNTLID_DYNAMIC) { /* only the dynamic controller model */
                        connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_PARAM,
                                     true, offsetof(struct nvmf_connect_data, cntlid));
                        return;
                }
                q->qid = 0;
                int rc = nvme_ctrl_create(d->subnqn, q, d->hostnqn, d->hostid, get_le32(&c->kato),
                                          &ctrl);
                if (rc == -ENOENT) {
                        connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_PARAM,
                                     true, offsetof(struct nvmf_connect_data, subnqn));
                        return;
                }
                if (rc == -EACCES) {
                        LOG_INFO("nvme", "connect to %s refused for host %s", d->subnqn,
                                 d->hostnqn);
                        connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_HOST, true,
                                     offsetof(struct nvmf_connect_data, hostnqn));
                        return;
                }
                if (rc) {
                        connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_CTRL_BUSY, false,
                                     0);
                        return;
                }
                if (d->hostnqn[0] == 0)
                        LOG_INFO("nvme",
                                 "controller %u of %s: host sent an empty Host NQN (admitted: "
                                 "the subsystem allows any host)",
                                 ctrl->cntlid, d->subnqn);
                q->sqsize = sqsize;
                q->is_discovery = ctrl->subsys->discovery;
                bool atr = false;
                if (nvme_auth_queue_init(q, ctrl, &atr) != 0) {
                        /* q->ctrl is set: nvme_queue_fini ends the association on close. */
                        connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_CTRL_BUSY, false,
                                     0);
                        return;
                }
                nvme_ctrl_ka_start(ctrl);
                nvme_set_status(cmd, 0, 0, false);
                /* AUTHREQ.ATR: the host has a DH-HMAC-CHAP secret, so it must authenticate. */
                nvme_cqe_dw0(cmd, ctrl->cntlid | (atr ? NVMF_CONNECT_ATR : 0));
                return;
        }

        ctrl = nvme_ctrl_get_by_id(d->subnqn, cntlid);
        if (!ctrl) {
                connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_PARAM, true,
                             offsetof(struct nvmf_connect_data, cntlid));
                return;
        }
        if (strcmp(ctrl->hostnqn, d->hostnqn) != 0) {
                connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_PARAM, true,
                             offsetof(struct nvmf_connect_data, hostnqn));
                goto put;
        }
        if (!(atomic_load(&ctrl->csts) & NVME_CSTS_RDY)) {
                connect_fail(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR, false,
                             offsetof(struct nvmf_connect_cmd, qid));
                goto put;
        }
        pthread_mutex_lock(&ctrl->lock);
        uint16_t nr = ctrl->nr_io_queues;
        pthread_mutex_unlock(&ctrl->lock);
        if (qid > nr || qid > ctrl->max_qid) {
                connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_PARAM, false,
                             offsetof(struct nvmf_connect_cmd, qid));
                goto put;
        }
        q->qid = qid;
        int rc = nvme_ctrl_add_queue(ctrl, q);
        if (rc == -EEXIST) {
                q->qid = 0;
                connect_fail(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR, false,
                             offsetof(struct nvmf_connect_cmd, qid));
                goto put;
        }
        if (rc) {
                q->qid = 0;
                connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_INVALID_PARAM, true,
                             offsetof(struct nvmf_connect_data, cntlid));
                goto put;
        }
        q->sqsize = sqsize;
        q->is_discovery = false;
        bool atr = false;
        if (nvme_auth_queue_init(q, ctrl, &atr) != 0) {
                /* The queue holds the reference now; its close releases it. */
                connect_fail(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_CTRL_BUSY, false, 0);
                return;
        }
        slate_put_le(cmd->cqe + 10, 2, qid);
        nvme_set_status(cmd, 0, 0, false);
        nvme_cqe_dw0(cmd, ctrl->cntlid | (atr ? NVMF_CONNECT_ATR : 0)); /* per-queue auth */
        return; /* the reference now belongs to the queue */
put:
        nvme_ctrl_put(ctrl);
}

void nvmf_connect_exec(struct nvme_cmd *cmd)
{
        nvmf_connect_do(cmd);
        nvme_cmd_complete_deferred(cmd);
}

enum nvme_parse_result nvmf_property_get_parse(struct nvme_cmd *cmd)
{
        const struct nvmf_property_get_cmd *c = (const struct nvmf_property_get_cmd *)cmd->sqe;
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint8_t size = c->attrib & 7;
        uint32_t off = get_le32(&c->offset);
        uint64_t v;

        if (size > 1)
                return nvme_invalid_field(cmd, offsetof(struct nvmf_property_get_cmd, attrib));
        if (size == 1) {
                if (off != NVME_REG_CAP)
                        return nvme_invalid_field(cmd,
                                                  offsetof(struct nvmf_property_get_cmd, offset));
                v = prop_cap();
        } else {
                switch (off) {
                case NVME_REG_VS:
                        v = NVME_VS_1_4;
                        break;
                case NVME_REG_CC:
                        v = atomic_load(&ctrl->cc);
                        break;
                case NVME_REG_CSTS:
                        v = atomic_load(&ctrl->csts);
                        break;
                default:
                        return nvme_invalid_field(cmd,
                                                  offsetof(struct nvmf_property_get_cmd, offset));
                }
        }
        nvme_cqe_dw0(cmd, (uint32_t)v);
        nvme_cqe_dw1(cmd, (uint32_t)(v >> 32));
        return NVME_PARSE_DONE;
}

enum nvme_parse_result nvmf_property_set_parse(struct nvme_cmd *cmd)
{
        const struct nvmf_property_set_cmd *c = (const struct nvmf_property_set_cmd *)cmd->sqe;
        uint8_t size = c->attrib & 7;
        uint32_t off = get_le32(&c->offset);

        if (size > 1)
                return nvme_invalid_field(cmd, offsetof(struct nvmf_property_set_cmd, attrib));
        if (size != 0 || off != NVME_REG_CC) /* CAP/VS/CSTS read-only; NSSR unsupported */
                return nvme_invalid_field(cmd, offsetof(struct nvmf_property_set_cmd, offset));
        nvme_ctrl_set_cc(cmd->queue->ctrl, (uint32_t)get_le64(&c->value));
        return NVME_PARSE_DONE;
}

enum nvme_parse_result nvmf_disconnect_parse(struct nvme_cmd *cmd)
{
        if (nvme_cdw(cmd, 10) & 0xffff) /* RECFMT */
                return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVMF_SC_CONNECT_FORMAT,
                                   NVME_SQE_OFF_CDW(10), -1);
        /* The host closes the transport connection next; nvme_queue_fini does the rest. */
        return NVME_PARSE_DONE;
}
