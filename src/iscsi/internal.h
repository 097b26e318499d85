/*
 * Internals of the iSCSI transport (RFC 7143), shared by pdu.c, params.c,
 * login.c, conn.c, session.c and target.c only: negotiated parameters,
 * target nodes, portals, sessions, connections with their receive state
 * machine, send queue and task pool.
 *
 * Threading: a connection, its session and its tasks live on one reactor
 * and are touched only from that reactor's thread.  The lists of targets,
 * portals and sessions are control-path state behind iscsi_lock.
 */
#ifndef ISCSI_INTERNAL_H
#define ISCSI_INTERNAL_H

#ifndef SLATE_MODULE_ISCSI
#error "iscsi/internal.h is private to src/iscsi/; use iscsi/iscsi.h"
#endif

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "iscsi/iscsi.h"
#include "rt/bigbuf.h"
#include "rt/listener.h"
#include "rt/limits.h"
#include "rt/reactor.h"
#include "rt/rxbuf.h"
#include "rt/sock.h"
#include "scsi/scsi.h"
#include "slate/spec/iscsi.h"

#define ISCSI_MOD "iscsi"

/* Limits we offer or enforce. */
#define ISCSI_QUEUE_DEPTH  128 /* CmdSN window advertised through MaxCmdSN */
#define ISCSI_TASK_RESERVE 16  /* extra tasks for immediate PDUs (NOP, TMF, ...) */
/* Per task: data up to CORE_SMALL_TRANSFER_BYTES plus as much scratch (compares);
 * bigger transfers borrow their data buffer from the reactor's pool (rt/bigbuf.h). */
#define ISCSI_TASK_BUF_LEN    (2u * CORE_SMALL_TRANSFER_BYTES)
#define ISCSI_OUR_MRDSL       262144u    /* MaxRecvDataSegmentLength we declare */
#define ISCSI_OUR_MAX_BURST   (1u << 20) /* <= 2^24-1; a bigger command takes more R2Ts */
#define ISCSI_OUR_FIRST_BURST 262144u
#define ISCSI_LOGIN_MRDSL     8192u  /* RFC default, in force during login */
#define ISCSI_TEXT_MAX        65536u /* accumulated login/text request or response */
#define ISCSI_KEY_MAX         63     /* RFC 7143 6.1: key names up to 63 bytes */
#define ISCSI_VALUE_MAX       8192   /* longest value we accept (binary values) */
#define ISCSI_NAME_MAX        224    /* iSCSI names are at most 223 bytes */
#define ISCSI_AHS_MAX         1020   /* TotalAHSLength is a byte count of words */
#define ISCSI_DEFAULT_TPGT    1

/* Serial number arithmetic (RFC 1982, as RFC 7143 3.2.2.1 uses it). */
static inline bool iscsi_sn_lt(uint32_t a, uint32_t b)
{
        /* Undefined when exactly 2^31 apart: then neither is less. */
        return (a < b && b - a < 0x80000000u) || (a > b && a - b > 0x80000000u);
}
static inline bool iscsi_sn_le(uint32_t a, uint32_t b)
{
        return a == b || iscsi_sn_lt(a, b);
}
static inline bool iscsi_sn_gt(uint32_t a, uint32_t b)
{
        return iscsi_sn_lt(b, a);
}

/* ---- pdu.c ---- */

/* What iscsi_pdu_check_bhs() enforces. */
struct iscsi_conn_limits {
        bool login_phase;  /* only Login Requests are valid */
        uint32_t max_recv; /* our MaxRecvDataSegmentLength for this phase */
};

/*
 * Validate a received BHS before any of its lengths are used.  Fills
 * *ahs_len (bytes) and *dsl.  Returns 0, -EMSGSIZE (a length beyond limits:
 * close the connection), -EPROTO (unusable header: close), or -EOPNOTSUPP
 * (unknown opcode: skip its data and answer with a Reject).
 */
int iscsi_pdu_check_bhs(const uint8_t bhs[ISCSI_BHS_LEN], const struct iscsi_conn_limits *lim,
                        uint32_t *ahs_len, uint32_t *dsl);
/* Digests go on the wire least significant byte first (RFC 3720 B.4). */
void iscsi_digest_put(uint8_t out[4], uint32_t crc);
uint32_t iscsi_digest_get(const uint8_t in[4]);
/* SAM LUN (single level, peripheral or flat addressing) to a LUN number; UINT64_MAX if not. */
uint64_t iscsi_lun_decode(const uint8_t lun[8]);
void iscsi_lun_encode(uint8_t lun[8], uint64_t l);

/* ---- params.c ---- */

struct iscsi_params {
        bool header_digest, data_digest;
        uint32_t mrdsl_initiator; /* what the initiator receives: our Data-In limit */
        uint32_t mrdsl_target;    /* what we receive */
        bool immediate_data, initial_r2t;
        uint32_t first_burst, max_burst;
        uint32_t max_outstanding_r2t;
        uint32_t max_connections;
        uint32_t time2wait, time2retain;
        uint32_t erl;
        bool data_pdu_in_order, data_seq_in_order;
};

void iscsi_params_defaults(struct iscsi_params *p);

enum iscsi_session_type { ISCSI_SESS_NONE = 0, ISCSI_SESS_NORMAL, ISCSI_SESS_DISCOVERY };

/* A growing text response: key=value\0 pairs. */
struct iscsi_textbuf {
        char *buf;
        uint32_t len, cap;
};
int iscsi_text_add(struct iscsi_textbuf *tb, const char *key, const char *val);

/*
 * Split key=value\0 pairs; calls cb for each.  The last pair may lack its
 * NUL.  Returns 0, or -EINVAL for a malformed pair (no '=', empty or too
 * long key, too long value), or what cb returned if non-zero.
 */
int iscsi_text_parse(const char *buf, size_t len,
                     int (*cb)(void *arg, const char *key, const char *val), void *arg);

/* Negotiation state for one login (or FFP text negotiation). */
struct iscsi_neg {
        struct iscsi_params p;
        int stage; /* ISCSI_STAGE_SECURITY / OPERATIONAL */
        enum iscsi_session_type type;
        char initiator_name[ISCSI_NAME_MAX];
        char initiator_alias[256];
        char target_name[ISCSI_NAME_MAX];
        bool have_initiator, have_target, have_type;
        bool auth_offered, auth_none_ok;
        bool offer_none, offer_chap; /* AuthMethod values offered (login.c answers) */
        /* CHAP keys of the current request (security stage), "" when absent. */
        char chap_a[256], chap_n[256], chap_i[8];
        char chap_r[160];   /* a digest, 0x-hex or 0b-base64 */
        char chap_c[2100];  /* a challenge of up to 1024 bytes (RFC 7143 12.1.3) */
        bool chap_too_long; /* a value above did not fit: authentication fails */
        bool mrdsl_declared;
        uint16_t status; /* login status on a fatal negotiation error, else 0 */
        struct iscsi_textbuf *out;
};

/*
 * Handle one key from the initiator: record it, append our answer to
 * n->out.  Returns 0 (also for NotUnderstood/Reject answers), -ENOSPC if
 * the response is full, -EPROTO if the login must fail (n->status set).
 */
int iscsi_neg_key(struct iscsi_neg *n, const char *key, const char *val);
/* The keys we declare ourselves (MaxRecvDataSegmentLength...), once. */
int iscsi_neg_declare(struct iscsi_neg *n);
/* Parse a whole login text and answer every key. */
int iscsi_neg_text(struct iscsi_neg *n, const char *buf, size_t len);

/* ---- chap.c: CHAP (RFC 7143 12.1.3) ---- */

#define ISCSI_CHAP_MD5       5
#define ISCSI_CHAP_SHA1      6
#define ISCSI_CHAP_SHA256    7
#define ISCSI_CHAP_SHA3_256  8
#define ISCSI_CHAP_MAX_MD    64 /* longest digest */
#define ISCSI_CHAP_CHALLENGE 32 /* bytes of our challenges */
#define ISCSI_SECRET_MAX     256

/* Credentials of a target or of discovery sessions; user "" = no CHAP. */
struct iscsi_auth {
        char user[ISCSI_SECRET_MAX], secret[ISCSI_SECRET_MAX];
        char mutual_user[ISCSI_SECRET_MAX], mutual_secret[ISCSI_SECRET_MAX];
};

/* The first algorithm of a CHAP_A list we support, or -1. */
int iscsi_chap_pick(const char *list);
/* H(id || secret || challenge) with algorithm alg into out (ISCSI_CHAP_MAX_MD). */
int iscsi_chap_response(int alg, uint8_t id, const char *secret, const uint8_t *chal, size_t clen,
                        uint8_t *out, unsigned *outlen);
int iscsi_chap_random(uint8_t *buf, size_t len);
/* A binary value (0x hex or 0b base64) into out: its length, or -EINVAL. */
int iscsi_chap_decode(const char *s, uint8_t *out, size_t max);
void iscsi_chap_encode(const uint8_t *in, size_t len, char *out, size_t outlen);
bool iscsi_chap_equal(const uint8_t *a, const uint8_t *b, size_t len);

/* ---- target.c ---- */

/*
 * One entry of a target's initiator ACL: the initiator it admits, the LUNs
 * that initiator sees (all when !masked) and its own CHAP credentials
 * (auth.user "" = the target's apply).
 */
struct iscsi_acl {
        struct iscsi_acl *next;
        char initiator[ISCSI_NAME_MAX];
        bool masked;
        uint64_t luns[SCSI_LUN_WORDS];
        struct iscsi_auth auth;
};

struct iscsi_tgt {
        struct iscsi_tgt *next;
        char name[ISCSI_NAME_MAX];
        struct scsi_target scsi;
        atomic_uint nr_sessions;
        struct iscsi_auth auth; /* under iscsi_lock */
        struct iscsi_acl *acl;  /* under iscsi_lock; NULL: every initiator may log in */
};

/*
 * The credentials a login of initiator to tgt (NULL: a discovery session)
 * must present (a copy): the initiator's ACL entry's, else the target's.
 */
void iscsi_auth_get(const struct iscsi_tgt *tgt, const char *initiator, struct iscsi_auth *out);
/* May initiator log in to tgt (no ACL, or an entry for it)?  Takes iscsi_lock; _locked: held. */
bool iscsi_acl_admits(const struct iscsi_tgt *tgt, const char *initiator);
bool iscsi_acl_admits_locked(const struct iscsi_tgt *tgt, const char *initiator);
/*
 * Give a new session's nexus the LUNs its initiator may see (under
 * iscsi_lock, so a concurrent ACL change either precedes or follows it).
 */
void iscsi_acl_apply(const struct iscsi_tgt *tgt, const char *initiator, struct scsi_nexus *nx);

struct iscsi_portal {
        struct iscsi_portal *next;
        char addr[64];
        uint16_t port; /* the bound port (the kernel's pick when added with port 0) */
        struct rt_listener *lis;
};

extern pthread_mutex_t iscsi_lock;

/* Find a target by name and count a session on it (iscsi_lock taken inside). */
struct iscsi_tgt *iscsi_tgt_get(const char *name);
void iscsi_tgt_put(struct iscsi_tgt *t);
/*
 * SendTargets answer for name ("All" or a target name); local = this
 * connection's address; only targets initiator may log in to.
 */
int iscsi_send_targets(struct iscsi_textbuf *tb, const char *what, const char *cur_target,
                       const char *initiator, const struct sockaddr_storage *local, bool discovery);

/* ---- session.c ---- */

struct iscsi_conn;

struct iscsi_session {
        struct iscsi_session *next; /* global list (iscsi_lock) */
        atomic_int refs;
        uint16_t tsih;
        uint8_t isid[6];
        enum iscsi_session_type type;
        char initiator[ISCSI_NAME_MAX];
        char target_name[ISCSI_NAME_MAX];
        struct iscsi_tgt *tgt; /* NULL for discovery */
        struct iscsi_params params;
        struct scsi_nexus nexus;
        bool nexus_live;
        struct rt_reactor *reactor;
        struct iscsi_conn *conn; /* the one connection (MaxConnections=1), reactor-owned */
        uint32_t exp_cmdsn, max_cmdsn;
};

struct iscsi_session *iscsi_session_create(struct iscsi_conn *c, const struct iscsi_neg *n,
                                           const uint8_t isid[6], struct iscsi_tgt *tgt);
/* Close the sessions of tgt whose initiator its ACL no longer admits (iscsi_lock held). */
void iscsi_session_close_unadmitted(const struct iscsi_tgt *tgt);
/* Close any session with the same initiator, ISID and target (reinstatement). */
void iscsi_session_reinstate(const char *initiator, const uint8_t isid[6], const char *target,
                             const struct iscsi_session *except);
bool iscsi_session_exists(uint16_t tsih);
/* Ends the session's I_T nexus now (logout), before the connection is freed; idempotent. */
void iscsi_session_end_nexus(struct iscsi_session *s);
void iscsi_session_release(struct iscsi_session *s); /* conn teardown: nexus fini, unlink, put */
void iscsi_close_all_sessions(void);

/* ---- conn.c ---- */

/* One item on a connection's send queue: one PDU. */
struct iscsi_tx {
        struct rt_txitem it; /* in the connection's send queue (iscsi_conn_enqueue) */
        uint8_t hdr[ISCSI_BHS_LEN + ISCSI_DIGEST_LEN];
        uint32_t hdr_len;
        const uint8_t *data;
        uint32_t data_len;
        uint8_t trailer[8]; /* padding + data digest */
        uint32_t trailer_len;
        bool queued;
        void (*done)(struct iscsi_conn *c, struct iscsi_tx *tx);
        void *arg;
};

enum iscsi_task_state {
        ISCSI_TASK_FREE = 0, /* on the free list */
        ISCSI_TASK_RX_DATA,  /* SCSI command waiting for its Data-Out (or data to discard) */
        ISCSI_TASK_EXEC,     /* in scsi_cmd_exec(): backend I/O may be in flight */
        ISCSI_TASK_TX,       /* response (Data-In/status) being sent */
        ISCSI_TASK_CTL,      /* carrying a NOP/Text/TMF/Logout/Reject exchange */
};

struct iscsi_task {
        struct iscsi_conn *conn;
        struct iscsi_task *next_free;
        enum iscsi_task_state state;
        uint32_t idx;
        int refs; /* owner + queued tx + exec */
        uint32_t itt;
        uint32_t cmdsn;
        uint8_t lun_raw[8];
        bool immediate;  /* outside the CmdSN window */
        bool aborted;    /* suppress the response */
        bool parse_done; /* final status known before data (check condition, discard data) */
        bool exec_pending;
        bool finished;   /* owner reference dropped */
        bool rsp_preset; /* residual flags decided at parse time */
        bool is_scsi;
        /*
         * A transfer above CORE_SMALL_TRANSFER_BYTES takes its buffer
         * (cmd.buf, released when the task is freed) from the reactor's pool.
         * Until the pool lends one, the task waits in its connection's FIFO
         * (linked through next_free, holding a reference) with its command
         * not yet parsed; unsolicited data lands in the task's own buffer
         * and is copied over when the buffer comes.
         */
        bool buf_wait;
        uint8_t opcode;

        /* Data-Out bookkeeping. */
        uint32_t edtl;
        uint32_t want;      /* bytes we keep: min(data_out_len, edtl) or 0 */
        uint32_t next_off;  /* next expected buffer offset */
        uint32_t unsol_len; /* unsolicited bytes the initiator will send (incl. immediate) */
        bool unsol_done;
        uint32_t datasn; /* next expected Data-Out DataSN in the current sequence */
        uint32_t ttt;    /* current R2T's tag, ISCSI_RESERVED_TAG if none */
        uint32_t r2t_off, r2t_len;
        uint32_t r2tsn;
        uint32_t r2t_gen;
        bool r2t_wanted; /* an R2T must be sent once tx_r2t is free */

        /* Data-In / response. */
        uint32_t datain_sn;
        uint32_t datain_off, datain_total;
        bool rsp_sent;
        uint8_t rsp_flags; /* O/U bits */
        uint32_t residual;
        uint8_t rsp_data[2 + SCSI_SENSE_MAX];

        /* TMF waiting for aborted tasks to leave the backend. */
        struct iscsi_task *tmf;
        uint32_t tmf_wait;
        uint8_t tmf_response;
        bool tmf_close;

        struct iscsi_tx tx;     /* Data-In, SCSI Response, or the CTL answer */
        struct iscsi_tx tx_r2t; /* R2T */
        uint8_t *buf;
        struct scsi_cmd cmd;
};

/* Receive states: one PDU after the other (RFC 7143 11.2). */
enum iscsi_rx_state {
        ISCSI_RX_BHS = 0,      /* reading the 48-byte BHS */
        ISCSI_RX_AHS = 1,      /* reading TotalAHSLength*4 bytes of AHS */
        ISCSI_RX_HDIGEST = 2,  /* reading and checking the header digest */
        ISCSI_RX_HDR = 3,      /* header complete: pick a data destination (may park) */
        ISCSI_RX_DATA = 4,     /* data segment into the task buffer or discarded */
        ISCSI_RX_PAD = 5,      /* 0-3 padding bytes */
        ISCSI_RX_DDIGEST = 6,  /* data digest */
        ISCSI_RX_DISPATCH = 7, /* whole PDU in: act on it */
        ISCSI_RX_STOP = 8,     /* no more input (logout, closing) */
};

enum iscsi_conn_state {
        ISCSI_CONN_LOGIN = 0,   /* login phase */
        ISCSI_CONN_FULL = 1,    /* full feature phase */
        ISCSI_CONN_LOGOUT = 2,  /* logout received: draining, then respond and close */
        ISCSI_CONN_CLOSING = 3, /* tearing down: waiting for polls and tasks */
};

enum iscsi_chap_state {
        ISCSI_CHAP_OFF = 0, /* no CHAP in this login */
        ISCSI_CHAP_WAIT_A,  /* AuthMethod=CHAP answered: the initiator's CHAP_A next */
        ISCSI_CHAP_WAIT_NR, /* challenge sent: CHAP_N and CHAP_R next */
        ISCSI_CHAP_DONE,    /* the initiator proved it (and we did, when asked) */
};

struct iscsi_login_state {
        bool started;
        bool auth_answered;
        enum iscsi_chap_state chap;
        int chap_alg;
        uint8_t chap_id;
        uint8_t chap_c[ISCSI_CHAP_CHALLENGE];
        struct iscsi_auth auth; /* what this login must present */
        uint8_t isid[6];
        uint16_t tsih;
        uint32_t itt;
        uint16_t cid;
        int cur_stage;
        bool final_sent;
        bool fail_close;
        struct iscsi_neg neg;
        struct iscsi_tgt *tgt;
};

struct iscsi_conn {
        int fd;
        struct rt_reactor *r;
        enum iscsi_conn_state state;
        struct iscsi_session *sess;
        bool hdigest, ddigest;
        uint32_t mrdsl_out; /* longest data segment we may send */
        uint32_t mrdsl_in;  /* longest data segment we accept */
        uint32_t statsn;
        uint16_t cid;
        char peer[RT_ADDR_NAME_MAX];
        struct sockaddr_storage local;
        char close_reason[64];
        bool warned;
        bool rx_fault_asked; /* this header was shown to the fault hook (a parked one comes back) */

        /* Receive state machine. */
        enum iscsi_rx_state rx_state;
        uint8_t bhs[ISCSI_BHS_LEN];
        uint8_t ahs[ISCSI_AHS_MAX];
        uint8_t dig[ISCSI_DIGEST_LEN];
        uint32_t rx_off;
        uint32_t ahs_len, dsl;
        uint8_t *rx_dst; /* NULL: discard */
        uint32_t rx_crc;
        bool rx_unknown_op;
        struct iscsi_task *rx_task;

        /* Send queue. */
        struct rt_txq txq;
        struct iscsi_tx login_tx;

        /* Tasks: tasks[0, task_hw) were handed out at least once (freed ones are on
         * free_tasks); the rest are untouched zero pages of region, handed out in order
         * when the free list is empty (iscsi_conn_tasks_init, task_get). */
        struct iscsi_task *tasks;
        uint32_t nr_tasks;
        uint32_t task_hw;
        struct iscsi_task *free_tasks;
        uint32_t nr_free;
        uint32_t outstanding; /* non-immediate tasks in the CmdSN window */
        uint8_t *region;
        size_t region_len;
        uint32_t exec_count; /* tasks inside scsi_cmd_exec */

        /* Login and text exchanges. */
        struct iscsi_login_state login;
        char *text_in;
        uint32_t text_in_len;
        struct iscsi_textbuf text_out;
        uint32_t text_out_off;
        uint32_t text_ttt;
        struct iscsi_task *logout_task;

        /* Reactor plumbing. */
        struct rt_event ev_in, ev_out;
        bool poll_in, poll_out;
        struct rt_event ev_zc; /* POLLERR: zero-copy notifications to read (rt/sock.h) */
        bool poll_zc;
        struct rt_defer close_defer;
        bool close_deferred;
        struct rt_defer rx_defer; /* resume a parked receive once a task frees */
        struct rt_defer tx_defer; /* one flush for the responses of a loop turn (scsi_done) */
        bool tx_defer_armed;
        /* Tasks waiting for a large buffer, oldest first; one request in the pool for the head. */
        struct iscsi_task *bw_head, *bw_tail;
        struct rt_bigbuf_wait bw;
        bool bw_armed;
        bool rx_defer_armed;
        bool logout_rsp_sent;
        uint32_t text_gen;
        /* rt/limits.h: the login deadline, then a discovery session's idle check. */
        struct rt_timer guard;
        uint64_t last_rx_ns; /* when the last PDU arrived */
        /* NOP-In ping (rt_limits.nop_*): the TTT it carries, when it went out; pending until
         * answered. */
        bool nop_pending;
        uint32_t nop_ttt;
        uint64_t nop_sent_ns;
        struct rt_conn_slot admit; /* counted against the connection caps */

        /*
         * Buffers last: the connection is its own mapping (conn.c conn_alloc),
         * so pages an idle connection never touches cost nothing.
         */
        struct rt_rxbuf ra; /* read-ahead for headers and small data (rx_fill) */
        uint8_t scratch[4096];
        char text_in_buf[ISCSI_TEXT_MAX];  /* behind text_in */
        char text_out_buf[ISCSI_TEXT_MAX]; /* behind text_out.buf */
};

struct iscsi_conn *iscsi_conn_new(int fd);
/*
 * The task table and its (lazily backed) buffers, made when a login
 * completes: full feature phase needs them, a connection still logging in
 * does not (an idle connection costs its login buffers only).  0 or -ENOMEM.
 */
int iscsi_conn_tasks_init(struct iscsi_conn *c);
void iscsi_conn_start(void *arg); /* rt_msg_send target: runs on the conn's reactor */
/* Serve connected socket fd on reactor r (takes the fd on success).  0 or -errno. */
int iscsi_conn_attach(int fd, struct rt_reactor *r);
/* Connections started on a reactor and not yet freed. */
unsigned iscsi_conn_live(void);
/* Login finished into full feature phase: a normal session's guard now pings it when quiet. */
void iscsi_conn_guard_full(struct iscsi_conn *c);
void iscsi_conn_close(struct iscsi_conn *c, const char *reason);
void iscsi_conn_warn(struct iscsi_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void iscsi_conn_enqueue(struct iscsi_conn *c, struct iscsi_tx *tx);
void iscsi_conn_flush(struct iscsi_conn *c);
/* Abort the SCSI tasks of c on lun (PREEMPT AND ABORT by another nexus); on c's reactor. */
void iscsi_conn_abort_lun(struct iscsi_conn *c, uint64_t lun);
/* Fill the digest/padding of a prepared tx (hdr[0..47], data, data_len set). */
void iscsi_tx_seal(struct iscsi_conn *c, struct iscsi_tx *tx);
/* StatSN/ExpCmdSN/MaxCmdSN for a response (advances StatSN when with_status). */
void iscsi_conn_fill_sn(struct iscsi_conn *c, be32 *statsn, be32 *exp_cmdsn, be32 *max_cmdsn,
                        bool with_status);
void iscsi_conn_update_window(struct iscsi_conn *c);

/* ---- login.c ---- */

/* A complete Login Request (text in c->text_in) arrived. */
void iscsi_login_rx(struct iscsi_conn *c);

#endif
