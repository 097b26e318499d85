/*
 * The SCSI personality's interface to a transport (iSCSI today).  A
 * transport owns a struct scsi_cmd per outstanding command, with a data
 * buffer it allocated at connection setup (no malloc per command).
 *
 * Flow (parse, then execute):
 *   1. transport fills cdb, cdb_len, lun, nexus, target, edtl, dir flags,
 *      buf/buf_len, reactor, done;
 *   2. scsi_cmd_parse(cmd): synchronous; checks every field.  Returns
 *      SCSI_PARSE_DONE when the command already has its final status (check
 *      condition, or a command that needs no data and finished inline,
 *      e.g. TEST UNIT READY), or SCSI_PARSE_EXEC with cmd->data_out_len set
 *      to the number of bytes the transport must receive into buf first;
 *   3. when the data is in, scsi_cmd_exec(cmd): asynchronous; calls
 *      cmd->done(cmd) exactly once, never from inside scsi_cmd_exec.
 *   4. on done: cmd->status (SAM status), sense/sense_len, and
 *      cmd->data_in_len bytes of buf to send to the initiator.  The
 *      transport computes residuals from edtl and the command's transfer
 *      length (cmd->xfer_len).
 */
#ifndef SCSI_SCSI_H
#define SCSI_SCSI_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/ns.h"
#include "core/pr.h"
#include "core/req.h"

#define SCSI_MAX_LUNS  256
#define SCSI_LUN_WORDS (SCSI_MAX_LUNS / 64) /* a LUN bitmap's 64-bit words */
#define SCSI_CDB_MAX   260
#define SCSI_SENSE_MAX 252

/* SAM status codes */
#define SAM_STAT_GOOD                 0x00
#define SAM_STAT_CHECK_CONDITION      0x02
#define SAM_STAT_CONDITION_MET        0x04
#define SAM_STAT_BUSY                 0x08
#define SAM_STAT_RESERVATION_CONFLICT 0x18
#define SAM_STAT_TASK_SET_FULL        0x28
#define SAM_STAT_TASK_ABORTED         0x40

/* Unit attention conditions, one bit each, queued per nexus per LUN. */
enum scsi_ua {
        SCSI_UA_POWER_ON = 0,            /* 29h/00h or 29h/01h */
        SCSI_UA_BUS_RESET,               /* 29h/02h (target reset) */
        SCSI_UA_DEVICE_RESET,            /* 29h/03h (LUN reset) */
        SCSI_UA_MODE_CHANGED,            /* 2Ah/01h */
        SCSI_UA_RESERVATIONS_PREEMPTED,  /* 2Ah/03h */
        SCSI_UA_RESERVATIONS_RELEASED,   /* 2Ah/04h */
        SCSI_UA_REGISTRATIONS_PREEMPTED, /* 2Ah/05h */
        SCSI_UA_CAPACITY_CHANGED,        /* 2Ah/09h */
        SCSI_UA_LUNS_CHANGED,            /* 3Fh/0Eh */
        SCSI_UA_MEDIUM_CHANGED,          /* 28h/00h (removable LU: medium loaded) */
        SCSI_UA_INQUIRY_CHANGED,         /* 3Fh/03h */
        SCSI_UA_THIN_THRESHOLD,          /* 38h/07h THIN PROVISIONING SOFT THRESHOLD REACHED */
        SCSI_UA_ELEMENT_CHANGED,         /* 0Bh/14h WARNING - PHYSICAL ELEMENT STATUS CHANGE */
        SCSI_UA_ALUA_CHANGED,            /* 2Ah/06h ASYMMETRIC ACCESS STATE CHANGED */
        SCSI_UA_MAX
};

/*
 * A SCSI target port as the personality sees it: a name, the LUN map and
 * the nexuses (sessions) logged in through it.  The transport owns it;
 * lock protects luns[] changes and the nexus list (control path).
 */
struct scsi_target {
        char name[224];
        uint16_t tpgt;
        uint16_t rel_port_id;
        pthread_mutex_t lock;
        struct core_ns *_Atomic luns[SCSI_MAX_LUNS];
        struct scsi_nexus *nexus_list;
        struct scsi_target *next; /* every target port, for namespace events (target.c) */
};

/* One I_T nexus (an iSCSI session). */
struct scsi_nexus {
        struct scsi_target *target;
        struct core_pr_nexus id;
        struct core_host *host;             /* the initiator's statistics (core/stats.h), or NULL */
        _Atomic uint32_t ua[SCSI_MAX_LUNS]; /* pending unit attentions, bit per enum scsi_ua */
        /*
         * LUN masking (an iSCSI ACL entry's LUN list): the LUNs this nexus
         * sees, a bit each; all of them unless the transport narrows it with
         * scsi_nexus_set_luns().  A LUN outside it is as if unmapped for this
         * nexus: absent from REPORT LUNS, LOGICAL UNIT NOT SUPPORTED.
         */
        _Atomic uint64_t lun_mask[SCSI_LUN_WORDS];
        struct scsi_nexus *next;
        /* PREVENT ALLOW MEDIUM REMOVAL state per LUN */
        uint8_t prevent[SCSI_MAX_LUNS];
        /*
         * Set by the transport with scsi_nexus_set_abort() (optional): abort
         * every task of this nexus on lun, as ABORT TASK SET does, for a
         * PREEMPT AND ABORT from another nexus (SPC-5 5.14.11.5).  Called
         * from any thread with the target lock held: it must only hand the
         * work to the nexus's own thread, never take a target or ns lock.
         */
        void (*abort_tasks)(struct scsi_nexus *nx, uint64_t lun);
};

struct scsi_cmd {
        /* Set by the transport. */
        uint8_t cdb[SCSI_CDB_MAX];
        uint16_t cdb_len;
        uint64_t lun;      /* SAM LUN as decoded by the transport (0..255) */
        uint8_t task_attr; /* 0 untagged,1 simple,2 ordered,3 HoQ,4 ACA */
        struct scsi_nexus *nexus;
        uint32_t edtl;            /* expected data transfer length */
        bool dir_read, dir_write; /* R and W bits of the transport */
        uint8_t *buf; /* data buffer: at least CORE_SMALL_TRANSFER_BYTES, or EDTL (<= max) */
        uint32_t buf_len;
        /*
         * Optional second buffer the core may use while executing (the medium
         * read for a compare, a block replicated for WRITE SAME), at least
         * CORE_SMALL_TRANSFER_BYTES; NULL: the second half of buf serves.
         */
        uint8_t *scratch;
        uint32_t scratch_len;
        struct rt_reactor *reactor;
        void (*done)(struct scsi_cmd *cmd);
        void *priv; /* the transport's task */

        /* Set by parse/exec. */
        struct core_ns *ns;    /* the LU, or NULL */
        uint32_t xfer_len;     /* bytes the CDB says are transferred (for residuals) */
        uint32_t data_out_len; /* bytes the transport must deliver into buf before exec */
        uint32_t data_in_len;  /* bytes of buf to send back */
        uint8_t status;
        uint8_t sense[SCSI_SENSE_MAX];
        uint8_t sense_len;
        const void *op; /* the opcode table entry */
        uint64_t lba;
        uint32_t nlb;
        uint32_t aux;
        struct core_req req;
};

enum scsi_parse_result { SCSI_PARSE_DONE = 0, SCSI_PARSE_EXEC = 1 };

enum scsi_parse_result scsi_cmd_parse(struct scsi_cmd *cmd);
void scsi_cmd_exec(struct scsi_cmd *cmd);

/*
 * What a transport finds wrong with a command's data transfer.  The
 * transport names it; the personality builds the status and sense (in the
 * format the LU's D_SENSE selects), so no transport writes sense bytes.
 */
enum scsi_xfer_error {
        SCSI_XFER_TOO_LONG,   /* more data than the transport can buffer: INVALID FIELD IN CDB */
        SCSI_XFER_SHORT_OUT,  /* the initiator would send less than the command needs
                                 (FCP-4 9.4.2 b): INVALID FIELD IN COMMAND INFORMATION UNIT */
        SCSI_XFER_DATA_PHASE, /* host data out of sequence: ABORTED COMMAND, DATA PHASE ERROR */
};
/* Give cmd (parsed, not executed) the CHECK CONDITION for e; no data goes back. */
void scsi_cmd_reject_xfer(struct scsi_cmd *cmd, enum scsi_xfer_error e);
/*
 * Task management aborted cmd while it was executing (after scsi_cmd_exec,
 * before done).  Optional for the transport; lets a long-running command
 * (SANITIZE with IMMED=0) call done soon with SAM_STAT_TASK_ABORTED while
 * its operation continues.  Other commands still call done when they end.
 * Call on the reactor the command runs on.
 */
void scsi_cmd_abort(struct scsi_cmd *cmd);

/* Nexus lifetime: called by the transport at login and at session end. */
void scsi_nexus_init(struct scsi_nexus *nx, struct scsi_target *tgt, const char *initiator_port,
                     const char *target_port, const uint8_t *transport_id, uint16_t tid_len);
void scsi_nexus_fini(struct scsi_nexus *nx); /* I_T nexus loss: releases RESERVE(6) etc. */
/* Install the transport's task-abort callback (see scsi_nexus.abort_tasks). */
void scsi_nexus_set_abort(struct scsi_nexus *nx,
                          void (*abort_tasks)(struct scsi_nexus *nx, uint64_t lun));

/*
 * LUN masking: nx sees only the LUNs set in mask (NULL: every LUN).  With
 * notify, a change establishes REPORTED LUNS DATA HAS CHANGED (3Fh/0Eh) on
 * every mapped LUN nx sees afterwards (SPC-5 5.14: the inventory changed).
 * Control path; takes the target lock.
 */
void scsi_nexus_set_luns(struct scsi_nexus *nx, const uint64_t *mask, bool notify);
/* The same, with notify, for every nexus of tgt whose initiator port is initiator's
 * ("<name>,i,..."). */
void scsi_target_set_luns(struct scsi_target *tgt, const char *initiator, const uint64_t *mask);
static inline bool scsi_nexus_sees(const struct scsi_nexus *nx, uint64_t lun)
{
        return lun < SCSI_MAX_LUNS &&
               (atomic_load_explicit(&nx->lun_mask[lun / 64], memory_order_relaxed) >> (lun % 64)) &
                   1;
}

/* Task management effects on the personality's state. */
void scsi_lun_reset(struct scsi_nexus *nx, uint64_t lun);
void scsi_target_reset(struct scsi_nexus *nx, bool cold);
/* Establish a unit attention on every nexus of tgt for lun (all LUNs if lun == UINT64_MAX), except
 * skip. */
void scsi_target_ua(struct scsi_target *tgt, uint64_t lun, enum scsi_ua ua,
                    struct scsi_nexus *skip);

/*
 * A target port's lifetime: init registers it for namespace events (unit
 * attentions on every nexus of every target that maps a namespace), fini
 * unregisters it; call it, after unmapping the LUNs, before freeing tgt.
 */
void scsi_target_init(struct scsi_target *tgt, const char *name, uint16_t tpgt);
void scsi_target_fini(struct scsi_target *tgt);
int scsi_target_map_lun(struct scsi_target *tgt, uint32_t lun, struct core_ns *ns);
int scsi_target_unmap_lun(struct scsi_target *tgt, uint32_t lun);

#endif
