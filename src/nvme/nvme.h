/*
 * The NVMe personality's interface to a fabrics transport (NVMe/TCP now;
 * RDMA or vhost later).  The transport owns queue pairs and one struct
 * nvme_cmd per outstanding command with a preallocated data buffer; the
 * personality owns subsystems, controllers, namespaces-as-NSIDs, the admin,
 * fabrics (Connect, Property Get/Set, Disconnect, Auth) and NVM command
 * sets, discovery, keep-alive and asynchronous events.
 *
 * Flow (parse, then execute), as on the SCSI side:
 *   1. transport fills sqe (64 bytes), queue, buf/buf_len, reactor, done,
 *      and for in-capsule data icd_len (bytes already in buf); a data
 *      pointer it cannot use ends here (nvme_cmd_reject_xfer);
 *   2. nvme_cmd_parse(cmd): synchronous checks of every field; the
 *      transfer it finds is checked by queue->check_xfer.  Returns
 *      NVME_PARSE_DONE when cmd->cqe holds the final completion (errors, and
 *      commands that finish inline, e.g. Identify, Get Log Page, Property
 *      Get: their data is in buf, data_len bytes, to send C2H), or
 *      NVME_PARSE_EXEC with cmd->data_len / cmd->h2c saying how much host
 *      data the transport must have in buf before exec (R2T/H2CData if not
 *      in-capsule);
 *   3. nvme_cmd_exec(cmd): asynchronous; calls cmd->done(cmd) exactly once,
 *      never from inside nvme_cmd_exec;
 *   4. on done: send data_len bytes of buf C2H when !h2c and data_len > 0,
 *      then the 16-byte cmd->cqe (the transport fills SQ head if it tracks it).
 *
 * Threading: each queue pair lives on one reactor.  A controller's admin
 * queue reactor owns the controller's keep-alive timer and AEN slots;
 * I/O queues on other reactors hold a reference to the controller.
 */
#ifndef NVME_NVME_H
#define NVME_NVME_H

#include <stdbool.h>
#include <stdint.h>

#include "core/ns.h"
#include "core/req.h"

struct nvme_ctrl;
struct nvme_subsys;
struct nvme_cmd;

/*
 * What a transport finds wrong with a command's data transfer.  Only the
 * transport reads the data pointer (SGL descriptors, in-capsule rules) and
 * digests; only the personality builds NVMe status, so the transport names
 * the error and nvme_cmd_reject_xfer() (or the personality, for errors
 * check_xfer returns) turns it into a status and an Error Information entry.
 */
enum nvme_xfer_error {
        NVME_XFER_OK = 0,
        NVME_XFER_PSDT,        /* PSDT is not 01b (Fabrics: one SGL, no metadata pointer) */
        NVME_XFER_SGL_TYPE,    /* descriptor type the transport does not carry */
        NVME_XFER_SGL_SUBTYPE, /* descriptor subtype the transport does not carry */
        NVME_XFER_ICD_OFFSET,  /* in-capsule data at an offset other than 0 */
        NVME_XFER_ICD_LENGTH,  /* in-capsule SGL longer than the capsule's data */
        NVME_XFER_ICD_C2H,     /* in-capsule SGL for controller-to-host data */
        NVME_XFER_SGL_LENGTH,  /* SGL length differs from what the command moves */
        NVME_XFER_DIGEST,      /* data digest mismatch: Transient Transport Error, retryable */
        NVME_XFER_ERROR_MAX,
};

/* I/O queues per controller (Set Features Number of Queues grants at most this). */
#define NVME_MAX_IO_QUEUES 64

/*
 * Transport limits the personality advertises: CAP.MQES is
 * NVME_TRANSPORT_QUEUE_DEPTH - 1 (the transport's per-queue command pool,
 * so hosts never exceed it) and IOCCSZ is (64 + NVME_TRANSPORT_ICD_BYTES) / 16
 * (in-capsule data the transport accepts on admin and I/O queues).
 */
#define NVME_TRANSPORT_QUEUE_DEPTH 128
#define NVME_TRANSPORT_ICD_BYTES   8192

/* A queue pair as the personality sees it; embedded in the transport's own queue object. */
struct nvme_queue {
        struct nvme_ctrl *ctrl; /* NULL until a Connect succeeds on it */
        uint16_t qid;           /* 0 = admin */
        uint16_t sqsize;        /* from Connect (0-based) */
        struct rt_reactor *reactor;
        bool is_discovery;
        char local_addr[64]; /* for discovery log entries of wildcard listeners */
        uint16_t local_port;
        /*
         * The NVMe/TCP secure channel's PSK identity (NULL: none): a Connect
         * on this queue must name the same host and subsystem, so a key
         * speaks for its own host only (TCP transport 1.0c 3.6.1.3).
         */
        const char *tls_hostnqn, *tls_subnqn;
        /* Transport callbacks. */
        /* The controller is gone (KATO expiry, delete, shutdown): tear this queue down. */
        void (*teardown)(struct nvme_queue *q);
        /*
         * Check cmd's data pointer for a transfer of len bytes (h2c: host to
         * controller) against the transport's rules.  nvme_cmd_parse calls it
         * when the command has said what it moves, before it takes effect.
         * NULL accepts any data pointer (unit tests of the personality alone).
         */
        enum nvme_xfer_error (*check_xfer)(const struct nvme_cmd *cmd, uint32_t len, bool h2c);
        /* The personality's: a parsed fused first half (Compare) awaiting the next command. */
        struct nvme_cmd *fuse_first;
        /* DH-HMAC-CHAP state (auth.c): NULL when the host need not authenticate. */
        struct nvme_auth *auth;
};

struct nvme_cmd {
        /* Set by the transport. */
        uint8_t sqe[64];
        struct nvme_queue *queue;
        /* >= CORE_SMALL_TRANSFER_BYTES, or as long as the data pointer (at most MDTS) */
        uint8_t *buf;
        uint32_t buf_len;
        /* Optional second buffer for the core (compares); NULL: the second half of buf. */
        uint8_t *scratch;
        uint32_t scratch_len;
        uint32_t icd_len; /* in-capsule data already in buf */
        struct rt_reactor *reactor;
        void (*done)(struct nvme_cmd *cmd);
        void *priv;

        /* Set by parse/exec. */
        uint32_t data_len; /* bytes of data for this command */
        bool h2c;          /* data flows host to controller */
        uint8_t cqe[16];   /* completion queue entry (cid, status, dw0/dw1) */
        struct core_ns *ns;
        const void *op; /* opcode table entry */
        uint32_t aux;   /* Dataset Management: the next range to deallocate */
        struct core_req req;
        struct rt_defer defer;
        /* Fused Compare and Write (fused.c): the pair's other half, once both are parsed. */
        struct nvme_cmd *fuse_peer;
        uint8_t fuse;      /* 1: first half (Compare), 2: second half (Write), while paired */
        uint8_t fuse_fail; /* generic status to complete with instead of executing; 0 none */
        bool fuse_ready;   /* executed (its data is in), waiting for its peer */
};

enum nvme_parse_result { NVME_PARSE_DONE = 0, NVME_PARSE_EXEC = 1 };

enum nvme_parse_result nvme_cmd_parse(struct nvme_cmd *cmd);
void nvme_cmd_exec(struct nvme_cmd *cmd);
/*
 * Complete cmd with the status for transfer error e instead of executing it
 * (e != NVME_XFER_OK): before nvme_cmd_parse (the data pointer is unusable),
 * or after it returned NVME_PARSE_EXEC and before nvme_cmd_exec (e.g. a bad
 * data digest).  Fills cmd->cqe, releases what parse took, sets data_len 0;
 * the transport then sends the CQE as for NVME_PARSE_DONE.
 */
void nvme_cmd_reject_xfer(struct nvme_cmd *cmd, enum nvme_xfer_error e);
/*
 * The transport drops a command nvme_cmd_parse accepted (NVME_PARSE_EXEC)
 * that will never reach nvme_cmd_exec (its queue is closing): releases what
 * parse took; the other half of a fused pair then completes on its own
 * (Command Aborted due to Failed Fused Command) instead of waiting.
 */
void nvme_cmd_abandon(struct nvme_cmd *cmd);
/*
 * The queue is closing: a fused first half that already executed and waits
 * for a second half that will never be parsed completes (Command Aborted
 * due to Missing Fused Command, through done on a later loop iteration), so
 * the transport's count of executing commands drains.  Call after
 * abandoning the commands the transport drops.
 */
void nvme_queue_fused_abort(struct nvme_queue *q);

/*
 * A queue is going away (connection closed): drop its controller reference.
 * Call on the queue's reactor.  Parked Asynchronous Event Requests of an
 * admin queue complete (done, Command Aborted due to SQ Deletion) from
 * inside this call; commands still in the core complete later as usual
 * (with queue->ctrl already NULL).  Closing the admin queue ends the
 * association (the I/O queues get teardown).  teardown callbacks are always
 * invoked on the queue's own reactor.
 */
void nvme_queue_fini(struct nvme_queue *q);

/*
 * Asynchronous Event Requests: nvme_cmd_exec parks the command in its
 * controller (up to NVME_AERL; one more completes with Asynchronous Event
 * Request Limit Exceeded) and calls cmd->done later, on the admin queue's
 * reactor: when an unmasked event is pending (success, DW0 = the event), or
 * from inside nvme_queue_fini of the admin queue (Command Aborted due to SQ
 * Deletion).  done is called exactly once either way, so a transport keeps
 * the cmd until then and calls nvme_queue_fini only once nothing but parked
 * AERs is outstanding.
 */

/* Control API (RPC, config): 0 or -errno with a message in err. */
int nvme_subsys_add(const char *nqn, const char *serial, const char *model, char *err,
                    size_t errlen);
int nvme_subsys_del(const char *nqn, char *err, size_t errlen);
void nvme_subsys_shutdown(void); /* after the reactors stopped: release every namespace */
/* copy_cross_namespace: Copy formats 2h/3h enabled from controller creation (and reset) on. */
int nvme_subsys_set_copy_xns(const char *nqn, bool on, char *err, size_t errlen);
int nvme_subsys_allow_host(const char *nqn, const char *hostnqn /* "*" = any */, char *err,
                           size_t errlen);
/*
 * DH-HMAC-CHAP secrets of a listed host (interchange format "DHHC-1:..",
 * nvme/keyfmt.h): secret NULL or "" removes them; ctrl_secret (optional)
 * makes the controller prove itself too.  A host with a secret must
 * authenticate every queue (from its next Connect on).
 */
int nvme_subsys_set_host_key(const char *nqn, const char *hostnqn, const char *secret,
                             const char *ctrl_secret, char *err, size_t errlen);
/* The hashes and DH groups the controller picks from, in its order of preference (0 = all). */
int nvme_subsys_set_auth(const char *nqn, const char *const *digests, unsigned nd,
                         const char *const *dhgroups, unsigned ng, char *err, size_t errlen);
int nvme_subsys_disallow_host(const char *nqn, const char *hostnqn, char *err, size_t errlen);
/* Returns the NSID it attached (the next free one when nsid is 0), or -errno. */
int nvme_ns_attach(const char *nqn, uint32_t nsid /* 0 = next free */, const char *ns_name,
                   char *err, size_t errlen);
int nvme_ns_detach(const char *nqn, uint32_t nsid, char *err, size_t errlen);
int nvme_ns_in_use(const struct core_ns *ns);
/* Listener bookkeeping for discovery log pages (the transport adds/removes them). */
/*
 * tls: the listener's secure channel for the discovery log's TREQ/TSAS
 * (0 none, 1 required, 2 allowed; nvmf/nvmf.h enum nvmf_tls_mode).
 */
int nvme_listener_register(const char *trtype, const char *addr, uint16_t port, uint8_t tls);
void nvme_listener_unregister(const char *trtype, const char *addr, uint16_t port);

struct json_t;
struct json_t *nvme_subsystems_json(void);
struct json_t *nvme_ctrls_json(void);
/* {subnqn: {hosts: {hostnqn: {bidirectional, [dhchap_secret, dhchap_ctrl_secret]}}, digests?,
 * dhgroups?}} */
struct json_t *nvme_auth_json(bool with_secrets);

#endif
