/*
 * libFuzzer target: arbitrary 64-byte submission queue entries (NVMe Base
 * 2.0 4.2) plus data through nvme_cmd_parse() on a connected, enabled admin
 * queue, an I/O queue and a fresh (unconnected) queue of a subsystem that
 * exports one 8 MiB mem namespace.  Input layout: byte 0 selects the queue
 * (0 admin, 1 I/O, 2 fresh), bytes 1..64 are the SQE, the rest is the
 * in-capsule data.  Connect is carried through (nvmf_connect_do) on the
 * fresh queue, which is finalised afterwards, and so are the reservation
 * commands (nvme_resv_do), Copy's Source Range entries (nvme_copy_decode),
 * the placement identifiers of I/O Management Send and the event types of
 * Set Features FDP Events (NSID 2 has the flash model, so FDP answers;
 * NSID 3 is formatted with 8-byte type 1 protection information, so
 * PRINFO and the tags of I/O commands reach nvme/pi.c, and Format NVM's
 * fields its parse);
 * a fused Compare left waiting pairs with (or is failed by) the next input;
 * other commands are parsed only (execution needs
 * the transport's reactor).  The controller is
 * re-enabled after each input so later inputs keep reaching the handlers.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/ns.h"
#include "nvme/internal.h"
#include "rt/log.h"
#include "rt/reactor.h"

#define FUZZ_NQN "nqn.2026-12.io.slate:fuzz-sqe"
#define HOSTNQN  "nqn.2014-08.org.nvmexpress:uuid:00000000-0000-0000-0000-00000000f022"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct nvme_queue admin_q, io_q;
static uint8_t *buf;
static const uint32_t buf_len = 2 * CORE_MAX_TRANSFER_BYTES;

static void fill_connect(struct nvme_cmd *c, struct nvme_queue *q, uint16_t qid, uint16_t cntlid)
{
        memset(c, 0, sizeof(*c));
        c->queue = q;
        c->buf = buf;
        c->buf_len = buf_len;
        c->sqe[0] = NVME_OPC_FABRICS;
        c->sqe[1] = 0x40;
        c->sqe[4] = NVMF_FCTYPE_CONNECT;
        c->sqe[39] = 0x01;
        slate_put_le(c->sqe + 32, 4, 1024);
        slate_put_le(c->sqe + 42, 2, qid);
        slate_put_le(c->sqe + 44, 2, 31);
        c->icd_len = 1024;
        struct nvmf_connect_data *d = (struct nvmf_connect_data *)buf;
        memset(d, 0, sizeof(*d));
        put_le16(&d->cntlid, cntlid);
        strcpy(d->subnqn, FUZZ_NQN);
        strcpy(d->hostnqn, HOSTNQN);
}

static void enable(void)
{
        if (atomic_load(&admin_q.ctrl->csts) & NVME_CSTS_RDY)
                return;
        nvme_ctrl_set_cc(admin_q.ctrl, 0);
        nvme_ctrl_set_cc(admin_q.ctrl, 1 | (6u << 16) | (4u << 20));
}

static int setup_once(void)
{
        static int done;
        if (done)
                return 0;
        done = 1;
        rt_log_threshold = RT_LOG_ERR;
        char dir[] = "/tmp/slate-fuzz-nvme-XXXXXX";
        if (!mkdtemp(dir))
                return -1;
        core_set_state_dir(dir);
        buf = aligned_alloc(4096, buf_len);
        char err[256];
        struct core_ns *ns;
        struct core_ns_params p = {
            .name = "fzs0", .backend = "mem", .size_bytes = 8u << 20, .block_size = 512};
        if (!buf || core_ns_create(&p, &ns, err, sizeof(err)) < 0)
                return -1;
        /* NSID 2 has the flash model, so FDP (fdp.c) answers there. */
        struct core_ns *fns;
        struct core_ns_params fp = {.name = "fzs1",
                                    .backend = "mem",
                                    .size_bytes = 64u << 20,
                                    .block_size = 4096,
                                    .flash = {.enable = true, .erase_block = 64u << 10}};
        if (core_ns_create(&fp, &fns, err, sizeof(err)) < 0)
                return -1;
        /* NSID 3: protection information (type 1, 8 bytes a block, extended LBAs). */
        struct core_ns *pns;
        struct core_ns_params pp = {.name = "fzs2",
                                    .backend = "mem",
                                    .size_bytes = 8u << 20,
                                    .block_size = 512,
                                    .pi_set = true,
                                    .pi = {.block_size = 512, .md_size = 8, .type = 1}};
        if (core_ns_create(&pp, &pns, err, sizeof(err)) < 0)
                return -1;
        nvme_subsys_add(FUZZ_NQN, "FUZZ0002", "Slate fuzz", err, sizeof(err));
        nvme_subsys_allow_host(FUZZ_NQN, "*", err, sizeof(err));
        nvme_ns_attach(FUZZ_NQN, 1, "fzs0", err, sizeof(err));
        nvme_ns_attach(FUZZ_NQN, 2, "fzs1", err, sizeof(err));
        nvme_ns_attach(FUZZ_NQN, 3, "fzs2", err, sizeof(err));
        nvme_listener_register("tcp", "0.0.0.0", 4420, 0);

        struct nvme_cmd c;
        fill_connect(&c, &admin_q, 0, NVMF_CNTLID_DYNAMIC);
        if (nvme_cmd_parse(&c) != NVME_PARSE_EXEC)
                return -1;
        nvmf_connect_do(&c);
        if (!admin_q.ctrl)
                return -1;
        enable();
        fill_connect(&c, &io_q, 1, admin_q.ctrl->cntlid);
        if (nvme_cmd_parse(&c) != NVME_PARSE_EXEC)
                return -1;
        nvmf_connect_do(&c);
        return io_q.ctrl ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        /*
         * Two commands in turn: a fused first half (Compare, FUSE 01b) an
         * input leaves on the I/O queue is still in flight when the next
         * input's command is parsed, so pairs and broken pairs are reached.
         */
        static struct nvme_cmd cmds[2];
        static unsigned cur;
        struct nvme_cmd *cp = &cmds[cur];
        if (setup_once() < 0)
                abort();
        if (size < 65)
                return 0;
        struct nvme_queue fresh;
        memset(&fresh, 0, sizeof(fresh));
        struct nvme_queue *q = data[0] % 3 == 0 ? &admin_q : data[0] % 3 == 1 ? &io_q : &fresh;
        if (!q->ctrl && q != &fresh)
                return 0; /* torn down by an earlier input (e.g. disallowed host) */

        memset(cp, 0, sizeof(*cp));
        cp->queue = q;
        cp->buf = buf;
        cp->buf_len = buf_len;
        memcpy(cp->sqe, data + 1, 64);
        size_t icd = size - 65;
        if (icd > NVME_TRANSPORT_ICD_BYTES)
                icd = NVME_TRANSPORT_ICD_BYTES;
        memcpy(buf, data + 65, icd);
        cp->icd_len = (uint32_t)icd;

        enum nvme_parse_result r = nvme_cmd_parse(cp);
        if (r == NVME_PARSE_EXEC) {
                const struct nvme_op *op = cp->op;
                if (op && op == nvmf_fabrics_op(NVMF_FCTYPE_CONNECT) && cp->data_len <= icd)
                        nvmf_connect_do(cp);
                else if (op && op->exec == nvme_resv_exec && cp->data_len <= icd)
                        nvme_resv_do(cp); /* Reservation Register/Acquire/Release */
                else if (op && op->exec == nvme_io_mgmt_send_exec && cp->data_len <= icd)
                        nvme_io_mgmt_send_do(cp); /* Reclaim Unit Handle Update: the PIDs */
                else if (op && op->exec == nvme_set_features_exec && cp->data_len <= icd &&
                         (nvme_cdw(cp, 10) & 0xff) == NVME_FEAT_FDP_EVENTS)
                        nvme_fdp_set_events_do(cp); /* FDP Events: the event types */
                else if (op && op->exec == nvme_io_copy_exec && cp->data_len <= icd &&
                         nvme_copy_decode(cp) == NVME_PARSE_EXEC)
                        nvme_copy_release(cp); /* Copy: the Source Range entries */
        }
        /* Nothing executes: drop every command but a first half still waiting. */
        if (io_q.fuse_first == cp)
                cur ^= 1;
        for (unsigned k = 0; k < 2; k++)
                if (io_q.fuse_first != &cmds[k] && cmds[k].queue) {
                        nvme_cmd_abandon(&cmds[k]);
                        cmds[k].queue = NULL; /* maybe `fresh`, gone with this call */
                }
        if (fresh.ctrl)
                nvme_queue_fini(&fresh);
        /* An AER parked by nothing, a Connect on the live queues: nothing else to undo. */
        if (admin_q.ctrl)
                enable();
        return 0;
}
