/*
 * Persistent reservations, the SCSI mapping: PERSISTENT RESERVE IN (SPC-5
 * 6.16: READ KEYS, READ RESERVATION, REPORT CAPABILITIES, READ FULL STATUS
 * with iSCSI TransportIDs, 7.6.4.6), PERSISTENT RESERVE OUT (6.17, all
 * service actions, parameter list 6.17.3/6.17.4), RESERVE(6)/RELEASE(6)
 * (SPC-2 7.21/7.17 with the SPC-5 5.14.3 exceptions), and the table of
 * commands allowed in the presence of reservations (SPC-5 5.14.1 table
 * 63, SBC-4 4.17).  The rules themselves live in core/pr.c; this file
 * decodes CDBs and parameter data, encodes responses and sense, and
 * classifies commands for the core's conflict check.  The other nexuses
 * hear of a change through the core's CORE_NS_EV_RESERVATION event
 * (target.c turns it into unit attentions and, for PREEMPT AND ABORT, task
 * aborts on every target port).
 */
#include "scsi/pr.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/pr.h"
#include "scsi/internal.h"
#include "slate/byteorder.h"

#define PR_OUT_BASIC_LEN 24
#define TID_MIN_LEN      24 /* 4-byte header + name, padded (SPC-5 7.6.4.6: at least 20) */

/* Largest PR IN response: header + one full-status descriptor per registration. */
#define PR_IN_MAX (8 + CORE_PR_MAX_REGS * (24 + CORE_PR_NEXUS_MAX + 8))

static void conflict(struct scsi_cmd *cmd)
{
        cmd->status = SAM_STAT_RESERVATION_CONFLICT;
        cmd->sense_len = 0;
}

/* ---- TransportID (SPC-5 7.6.4.6, iSCSI) ---- */

uint16_t scsi_pr_transport_id(const struct core_pr_nexus *nexus, uint8_t *out, uint32_t cap)
{
        if (nexus->transport_id_len >= 4 && nexus->transport_id_len <= CORE_PR_NEXUS_MAX) {
                if (nexus->transport_id_len > cap)
                        return 0;
                memcpy(out, nexus->transport_id, nexus->transport_id_len);
                return nexus->transport_id_len;
        }
        /*
         * Built from the port name: format 01b ("<name>,i,0x<isid>", the
         * initiator port) when the name carries an ISID, else 00b (the
         * device name).  NUL-terminated, padded to a multiple of 4.
         */
        size_t n = strnlen(nexus->initiator, sizeof(nexus->initiator) - 1);
        uint32_t body = (uint32_t)((n + 1 + 3) & ~(size_t)3);
        if (body < TID_MIN_LEN - 4)
                body = TID_MIN_LEN - 4;
        if (4 + body > cap)
                return 0;
        bool with_isid = strstr(nexus->initiator, ",i,0x") || strstr(nexus->initiator, ",I,0X");
        out[0] = (uint8_t)((with_isid ? 0x40 : 0x00) | 0x05);
        out[1] = 0;
        slate_put_be(out + 2, 2, body);
        memset(out + 4, 0, body);
        memcpy(out + 4, nexus->initiator, n);
        return (uint16_t)(4 + body);
}

/*
 * Decode the destination TransportID of REGISTER AND MOVE into a nexus
 * name.  Format 00b names a device, not a port: it is resolved to the one
 * logged-in nexus of that initiator on this target.  Returns false when
 * the TransportID is malformed or names nothing we can find.
 */
static bool parse_tid(struct scsi_cmd *cmd, const uint8_t *tid, uint32_t len,
                      struct core_pr_nexus *dest)
{
        if (len < 4 || (tid[0] & 0x0f) != 0x05)
                return false;
        uint32_t body = slate_get_be(tid + 2, 2);
        unsigned fmt = tid[0] >> 6;
        if (body + 4 > len || body == 0 || fmt > 1)
                return false;
        const char *name = (const char *)tid + 4;
        size_t n = strnlen(name, body);
        if (n == 0 || n == body || n >= sizeof(dest->initiator))
                return false; /* not NUL-terminated within ADDITIONAL LENGTH, or too long */

        memset(dest, 0, sizeof(*dest));
        struct scsi_target *tgt = cmd->nexus->target;
        if (fmt == 1) {
                memcpy(dest->initiator, name, n);
        } else {
                bool found = false;
                if (!tgt)
                        return false;
                pthread_mutex_lock(&tgt->lock);
                for (struct scsi_nexus *nx = tgt->nexus_list; nx; nx = nx->next) {
                        const char *ini = nx->id.initiator;
                        if (strncasecmp(ini, name, n) == 0 &&
                            strncasecmp(ini + n, ",i,0x", 5) == 0) {
                                memcpy(dest->initiator, ini, strlen(ini) + 1);
                                memcpy(dest->transport_id, nx->id.transport_id,
                                       nx->id.transport_id_len);
                                dest->transport_id_len = nx->id.transport_id_len;
                                found = true;
                                break;
                        }
                }
                pthread_mutex_unlock(&tgt->lock);
                if (!found)
                        return false;
        }
        if (dest->transport_id_len == 0) {
                uint16_t tl = scsi_pr_transport_id(dest, dest->transport_id, CORE_PR_NEXUS_MAX);
                dest->transport_id_len = tl;
        }
        return true;
}

/* ---- Unit attentions for the other nexuses ---- */

/* ---- PERSISTENT RESERVE IN ---- */

static uint32_t read_keys(const struct core_pr *pr, uint8_t *p)
{
        uint32_t n = 0;
        for (int i = 0; i < CORE_PR_MAX_REGS; i++) {
                if (!pr->regs[i].used)
                        continue;
                slate_put_be(p + 8 + 8 * n, 8, pr->regs[i].key);
                n++;
        }
        slate_put_be(p, 4, pr->generation);
        slate_put_be(p + 4, 4, 8 * n);
        return 8 + 8 * n;
}

static uint32_t read_reservation(const struct core_pr *pr, uint8_t *p)
{
        slate_put_be(p, 4, pr->generation);
        if (pr->type == CORE_PR_NONE || (!core_pr_type_all_regs(pr->type) &&
                                         (pr->holder < 0 || pr->holder >= CORE_PR_MAX_REGS))) {
                slate_put_be(p + 4, 4, 0);
                return 8;
        }
        slate_put_be(p + 4, 4, 16);
        memset(p + 8, 0, 16);
        /* All-registrants reservations have no single holder: key 0 (SPC-5 6.16.3.3). */
        uint64_t key = core_pr_type_all_regs(pr->type) ? 0 : pr->regs[pr->holder].key;
        slate_put_be(p + 8, 8, key);
        p[21] = (uint8_t)((pr->scope << 4) | (pr->type & 0x0f));
        return 24;
}

static uint32_t report_capabilities(const struct core_pr *pr, uint8_t *p)
{
        memset(p, 0, 8);
        slate_put_be(p, 2, 8);
        /* CRH (5.14.3 exceptions honoured), ATP_C, PTPL_C; SIP_C = 0: SPEC_I_PT rejected. */
        p[2] = 0x10 | 0x04 | 0x01;
        /* TMV; ALLOW COMMANDS 001b (TEST UNIT READY passes WE/EA); PTPL_A. */
        p[3] = (uint8_t)(0x80 | (1u << 4) | (pr->aptpl ? 1 : 0));
        /* WR_EX_AR, EX_AC_RO, WR_EX_RO, EX_AC, WR_EX; EX_AC_AR. */
        p[4] = 0x80 | 0x40 | 0x20 | 0x08 | 0x02;
        p[5] = 0x01;
        return 8;
}

static uint32_t read_full_status(const struct core_pr *pr, uint8_t *p, uint32_t cap)
{
        uint32_t off = 8;
        for (int i = 0; i < CORE_PR_MAX_REGS; i++) {
                const struct core_pr_reg *r = &pr->regs[i];
                if (!r->used)
                        continue;
                if (off + 24 > cap)
                        break;
                uint8_t *d = p + off;
                memset(d, 0, 24);
                uint16_t tl = scsi_pr_transport_id(&r->nexus, d + 24, cap - off - 24);
                if (tl == 0)
                        break;
                bool holder = pr->type != CORE_PR_NONE &&
                              (core_pr_type_all_regs(pr->type) || pr->holder == i);
                slate_put_be(d, 8, r->key);
                d[12] = (uint8_t)((r->all_tg_pt ? 0x02 : 0) | (holder ? 0x01 : 0));
                if (holder)
                        d[13] = (uint8_t)((pr->scope << 4) | (pr->type & 0x0f));
                if (!r->all_tg_pt)
                        slate_put_be(d + 18, 2, r->nexus.rel_tgt_port);
                slate_put_be(d + 20, 4, tl);
                off += 24 + tl;
        }
        slate_put_be(p, 4, pr->generation);
        slate_put_be(p + 4, 4, off - 8);
        return off;
}

/* The reply from ns->pr as it stands (refreshed by the caller when shared). */
static void pr_in_reply(struct scsi_cmd *cmd)
{
        static _Thread_local uint8_t resp[PR_IN_MAX];
        struct core_ns *ns = cmd->ns;
        uint8_t sa = cmd->cdb[1] & 0x1f;
        uint32_t alloc = slate_be16(cmd->cdb + 7);
        uint32_t len;

        cmd->data_in_len = 0;
        if (!ns) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x25, 0x00);
                return;
        }
        if (sa > 3) {
                scsi_sense_invalid_field(cmd, true, 1, 4);
                return;
        }
        pthread_mutex_lock(&ns->lock);
        if (ns->pr.legacy_reserved) {
                /* SPC-2 5.5.1: with a RESERVE(6) in place every PR command conflicts. */
                pthread_mutex_unlock(&ns->lock);
                conflict(cmd);
                return;
        }
        switch (sa) {
        case 0:
                len = read_keys(&ns->pr, resp);
                break;
        case 1:
                len = read_reservation(&ns->pr, resp);
                break;
        case 2:
                len = report_capabilities(&ns->pr, resp);
                break;
        default:
                len = read_full_status(&ns->pr, resp, sizeof(resp));
                break;
        }
        pthread_mutex_unlock(&ns->lock);

        /* Truncate to the allocation length; ADDITIONAL LENGTH keeps the full size. */
        if (len > alloc)
                len = alloc;
        if (len > cmd->buf_len)
                len = cmd->buf_len;
        if (len)
                memcpy(cmd->buf, resp, len);
        cmd->data_in_len = len;
}

void scsi_pr_in(struct scsi_cmd *cmd)
{
        pr_in_reply(cmd);
}

/*
 * Reservations kept with shared storage (rbd, a shared file): report the
 * stored state, not our copy's, reloaded on a core worker
 * (core_ns_pr_refresh_submit) so the reactor never waits on the storage.
 */
struct pr_in_job {
        struct core_pr_refresh_job j;
        struct scsi_cmd *cmd;
};

static void pr_in_job_done(struct core_pr_refresh_job *j)
{
        struct pr_in_job *pj = (struct pr_in_job *)j;
        struct scsi_cmd *cmd = pj->cmd;
        free(pj);
        pr_in_reply(cmd);
        cmd->done(cmd);
}

void scsi_pr_in_exec(struct scsi_cmd *cmd)
{
        struct pr_in_job *pj = calloc(1, sizeof(*pj));
        if (!pj) {
                scsi_status_from_core(cmd, CORE_E_NO_RESOURCES, 0, false);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        pj->cmd = cmd;
        pj->j.ns = cmd->ns;
        pj->j.reactor = cmd->reactor;
        pj->j.cb = pr_in_job_done;
        core_ns_pr_refresh_submit(&pj->j);
}

/* ---- PERSISTENT RESERVE OUT ---- */

/* Turn a rejected core status into SAM status and sense at the right field. */
static void pr_out_error(struct scsi_cmd *cmd, enum core_status st, enum core_pr_field f, bool move)
{
        switch (st) {
        case CORE_E_RESERVATION_CONFLICT:
                conflict(cmd);
                return;
        case CORE_E_PR_INSUFFICIENT_REG:
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x55, 0x04);
                return;
        case CORE_E_INVALID_FIELD:
                switch (f) {
                case CORE_PR_F_TYPE:
                        scsi_sense_invalid_field(cmd, true, 2, 3);
                        return;
                case CORE_PR_F_SCOPE:
                        scsi_sense_invalid_field(cmd, true, 2, 7);
                        return;
                default:
                        scsi_sense_invalid_field(cmd, true, 1, 4);
                        return;
                }
        case CORE_E_INVALID_PARAM:
                switch (f) {
                case CORE_PR_F_RELEASE:
                        /* INVALID RELEASE OF PERSISTENT RESERVATION */
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x26, 0x04);
                        return;
                case CORE_PR_F_SA_KEY:
                        scsi_sense_invalid_field(cmd, false, 8, 7);
                        return;
                case CORE_PR_F_SPEC_I_PT:
                        scsi_sense_invalid_field(cmd, false, 20, 3);
                        return;
                case CORE_PR_F_DEST:
                        scsi_sense_invalid_field(cmd, false, move ? 24 : 20, -1);
                        return;
                default:
                        scsi_sense_invalid_field(cmd, false, 0, -1);
                        return;
                }
        default:
                scsi_status_from_core(cmd, st, 0, false);
                return;
        }
}

/* The command's parameters into *c (dest: REGISTER AND MOVE's); false: cmd has the error. */
static bool pr_out_prepare(struct scsi_cmd *cmd, struct core_pr_cmd *cp, struct core_pr_nexus *dp)
{
        struct core_ns *ns = cmd->ns;
        const uint8_t *cdb = cmd->cdb;
        const uint8_t *p = cmd->buf;
        uint8_t sa = cdb[1] & 0x1f;
        uint32_t plen = slate_be32(cdb + 5);

        cmd->data_in_len = 0;
        if (!ns || !cmd->nexus) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x25, 0x00);
                return false;
        }
        if (sa > CORE_PR_REGISTER_MOVE) {
                scsi_sense_invalid_field(cmd, true, 1, 4);
                return false;
        }
        /* Only the bytes that actually arrived count. */
        if (plen > cmd->data_out_len)
                plen = cmd->data_out_len;
        if (plen < PR_OUT_BASIC_LEN) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                return false;
        }

        memset(cp, 0, sizeof(*cp));
        cp->action = (enum core_pr_action)sa;
        cp->scope = cdb[2] >> 4;
        cp->type = (enum core_pr_type)(cdb[2] & 0x0f);
        cp->key = slate_be64(p);
        cp->sa_key = slate_be64(p + 8);

        if (sa == CORE_PR_REGISTER_MOVE) {
                /* 6.17.4: keys, reserved, UNREG/APTPL, RELATIVE TARGET PORT, TransportID. */
                cp->unreg = p[17] & 0x02;
                cp->aptpl = p[17] & 0x01;
                uint16_t rtp = slate_be16(p + 18);
                uint32_t tl = slate_be32(p + 20);
                if (tl > plen - PR_OUT_BASIC_LEN) {
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                        return false;
                }
                if (cmd->nexus && rtp != cmd->nexus->id.rel_tgt_port) {
                        scsi_sense_invalid_field(cmd, false, 18, -1);
                        return false;
                }
                if (!parse_tid(cmd, p + PR_OUT_BASIC_LEN, tl, dp)) {
                        scsi_sense_invalid_field(cmd, false, PR_OUT_BASIC_LEN, -1);
                        return false;
                }
                snprintf(dp->target, sizeof(dp->target), "%s", cmd->nexus->id.target);
                dp->rel_tgt_port = rtp;
                cp->dest = dp;
        } else {
                /* 6.17.3: SPEC_I_PT, ALL_TG_PT, APTPL in byte 20. */
                cp->spec_i_pt = p[20] & 0x08;
                cp->all_tg_pt = p[20] & 0x04;
                cp->aptpl = p[20] & 0x01;
                if (cp->spec_i_pt) {
                        /* SIP_C = 0; and never valid outside the register actions. */
                        scsi_sense_invalid_field(cmd, false, 20, 3);
                        return false;
                }
                if (plen != PR_OUT_BASIC_LEN) {
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x1a, 0x00);
                        return false;
                }
                /* ALL_TG_PT and APTPL are ignored by the other service actions (6.17.3). */
                if (sa != CORE_PR_REGISTER && sa != CORE_PR_REGISTER_IGNORE) {
                        cp->all_tg_pt = false;
                        cp->aptpl = false;
                }
        }

        return true;
}

void scsi_pr_out(struct scsi_cmd *cmd)
{
        struct core_pr_cmd c;
        struct core_pr_nexus dest;
        if (!pr_out_prepare(cmd, &c, &dest))
                return;
        /* The other nexuses hear of it through the core's event (target.c on_ns_event). */
        enum core_status st = core_ns_pr_out(cmd->ns, &cmd->nexus->id, &c, cmd->nexus);
        if (st != CORE_OK)
                pr_out_error(cmd, st, c.bad_field, c.action == CORE_PR_REGISTER_MOVE);
}

/* A PR OUT on a namespace with shared state: on a core worker (core_ns_pr_out_submit). */
struct pr_out_job {
        struct core_pr_job j;
        struct core_pr_nexus dest;
};

static void pr_out_job_done(struct core_pr_job *j)
{
        struct scsi_cmd *cmd = j->arg;
        if (j->st != CORE_OK)
                pr_out_error(cmd, j->st, j->c.bad_field, j->c.action == CORE_PR_REGISTER_MOVE);
        free(j);
        cmd->done(cmd);
}

void scsi_pr_out_exec(struct scsi_cmd *cmd)
{
        scsi_cmd_good(cmd);
        if (!cmd->ns || !core_ns_pr_shared(cmd->ns)) {
                scsi_pr_out(cmd);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        struct pr_out_job *pj = calloc(1, sizeof(*pj));
        if (!pj) {
                scsi_status_from_core(cmd, CORE_E_NO_RESOURCES, 0, false);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        if (!pr_out_prepare(cmd, &pj->j.c, &pj->dest)) {
                free(pj);
                scsi_cmd_finish_deferred(cmd);
                return;
        }
        if (pj->j.c.dest)
                pj->j.c.dest = &pj->dest;
        pj->j.ns = cmd->ns;
        pj->j.self = cmd->nexus->id;
        pj->j.origin = cmd->nexus;
        pj->j.reactor = cmd->reactor;
        pj->j.cb = pr_out_job_done;
        pj->j.arg = cmd;
        core_ns_pr_out_submit(&pj->j);
}

/* ---- RESERVE(6)/(10), RELEASE(6)/(10) ---- */

/* RESERVE and RELEASE share their checks; only the core operation differs. */
static void legacy_op(struct scsi_cmd *cmd,
                      enum core_status (*op)(struct core_pr *pr, const struct core_pr_nexus *nx))
{
        struct core_ns *ns = cmd->ns;
        cmd->data_in_len = 0;
        if (!ns || !cmd->nexus) {
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x25, 0x00);
                return;
        }
        /* Third-party reservations (3RDPTY) and extents (obsolete) are not supported. */
        if (cmd->cdb[1] & 0x10) {
                scsi_sense_invalid_field(cmd, true, 1, 4);
                return;
        }
        if (cmd->cdb[1] & 0x01) {
                scsi_sense_invalid_field(cmd, true, 1, 0);
                return;
        }
        pthread_mutex_lock(&ns->lock);
        enum core_status st = op(&ns->pr, &cmd->nexus->id);
        pthread_mutex_unlock(&ns->lock);
        if (st != CORE_OK)
                conflict(cmd);
}

void scsi_reserve6(struct scsi_cmd *cmd)
{
        legacy_op(cmd, core_pr_legacy_reserve);
}

void scsi_release6(struct scsi_cmd *cmd)
{
        legacy_op(cmd, core_pr_legacy_release);
}

void scsi_pr_nexus_lost(struct scsi_nexus *nx)
{
        struct scsi_target *tgt = nx->target;
        if (!tgt)
                return;
        for (unsigned l = 0; l < SCSI_MAX_LUNS; l++) {
                struct core_ns *ns = atomic_load(&tgt->luns[l]);
                if (!ns)
                        continue;
                pthread_mutex_lock(&ns->lock);
                core_pr_legacy_drop(&ns->pr, &nx->id);
                pthread_mutex_unlock(&ns->lock);
        }
}

void scsi_pr_reset(struct core_ns *ns)
{
        if (!ns)
                return;
        pthread_mutex_lock(&ns->lock);
        core_pr_legacy_drop(&ns->pr, NULL);
        pthread_mutex_unlock(&ns->lock);
}

/* ---- Commands allowed in the presence of reservations ---- */

enum pr_class {
        PR_ALLOWED, /* never conflicts (INQUIRY, REPORT LUNS, ...) */
        PR_READ,    /* conflicts like a medium read */
        PR_WRITE,   /* conflicts like a medium write (also most non-medium commands) */
};

/*
 * SPC-5 table 63 and SBC-4 table 13: a few commands are allowed through
 * every reservation; medium reads conflict only with the exclusive-access
 * types; everything else (writes, MODE SENSE/SELECT, SYNCHRONIZE CACHE,
 * SANITIZE, ...) conflicts unless the nexus holds the reservation or is a
 * registrant of a registrants-only or all-registrants reservation.
 */
static enum pr_class classify(const uint8_t *cdb, bool is_read, bool is_write)
{
        switch (cdb[0]) {
        case 0x00: /* TEST UNIT READY */
        case 0x03: /* REQUEST SENSE */
        case 0x12: /* INQUIRY */
        case 0x25: /* READ CAPACITY(10) */
        case 0x4d: /* LOG SENSE */
        case 0x5e: /* PERSISTENT RESERVE IN */
        case 0x5f: /* PERSISTENT RESERVE OUT: decided by the keys */
        case 0xa0: /* REPORT LUNS */
        case 0xa3: /* MAINTENANCE IN: report opcodes, TMFs, target port groups... */
        case 0x16: /* RESERVE(6): decided by scsi_reserve6 */
        case 0x17: /* RELEASE(6) */
        case 0x56: /* RESERVE(10) */
        case 0x57: /* RELEASE(10) */
                return PR_ALLOWED;
        case 0x9e:                           /* SERVICE ACTION IN(16) */
                if ((cdb[1] & 0x1f) == 0x10) /* READ CAPACITY(16) */
                        return PR_ALLOWED;
                return (cdb[1] & 0x1f) == 0x12 ? PR_READ : PR_WRITE; /* GET LBA STATUS reads */
        case 0x1e: /* PREVENT ALLOW MEDIUM REMOVAL: allowing is always allowed */
                return (cdb[4] & 0x03) ? PR_WRITE : PR_ALLOWED;
        case 0x1b: /* START STOP UNIT: START=1 (without LOEJ) is allowed */
                return (cdb[4] & 0x03) == 0x01 ? PR_ALLOWED : PR_WRITE;
        case 0x1a: /* MODE SENSE(6) */
        case 0x5a: /* MODE SENSE(10) */
                return PR_WRITE;
        default:
                break;
        }
        if (is_write)
                return PR_WRITE;
        if (is_read)
                return PR_READ;
        return PR_WRITE;
}

bool scsi_pr_conflict(struct scsi_cmd *cmd, bool is_read, bool is_write)
{
        struct core_ns *ns = cmd->ns;
        if (!ns || !cmd->nexus || !core_pr_any_reservation(&ns->pr))
                return false;
        enum pr_class cls = classify(cmd->cdb, is_read, is_write);
        if (cls == PR_ALLOWED)
                return false;
        /* The core's rule (the one core_req_submit applies again at execution). */
        bool c = core_ns_pr_conflict(ns, &cmd->nexus->id, cls == PR_READ, cls == PR_WRITE);
        if (c)
                conflict(cmd);
        return c;
}
