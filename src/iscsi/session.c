/*
 * iSCSI sessions (RFC 7143 4.4, 6.3.5): the global session table, TSIH
 * assignment, session reinstatement (a new login with the same
 * InitiatorName, ISID and target closes the old session), and the I_T
 * nexus each normal session is for the SCSI personality, named per
 * RFC 7143 13.4/SPC-5 7.6.4.6 ("<name>,i,0x<isid>" and a TransportID with
 * format code 01b).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iscsi/internal.h"
#include "rt/log.h"

static struct iscsi_session *sessions;
static uint16_t next_tsih = 1;

static void session_put(struct iscsi_session *s)
{
        if (atomic_fetch_sub(&s->refs, 1) == 1)
                free(s);
}

static bool tsih_used(uint16_t tsih)
{
        for (struct iscsi_session *s = sessions; s; s = s->next)
                if (s->tsih == tsih)
                        return true;
        return false;
}

bool iscsi_session_exists(uint16_t tsih)
{
        pthread_mutex_lock(&iscsi_lock);
        bool r = tsih_used(tsih);
        pthread_mutex_unlock(&iscsi_lock);
        return r;
}

static void isid_hex(const uint8_t isid[6], char out[13])
{
        snprintf(out, 13, "%02x%02x%02x%02x%02x%02x", isid[0], isid[1], isid[2], isid[3], isid[4],
                 isid[5]);
}

/* SPC-5 7.6.4.6: iSCSI initiator port TransportID, format 01b. */
static uint16_t transport_id(uint8_t *out, size_t cap, const char *port_name)
{
        size_t nl = strlen(port_name) + 1;
        size_t len = 4 + nl;
        len = (len + 3) & ~(size_t)3;
        if (len < 24)
                len = 24;
        if (len > cap)
                return 0;
        memset(out, 0, len);
        out[0] = 0x40 | 0x05;
        out[2] = (uint8_t)((len - 4) >> 8);
        out[3] = (uint8_t)(len - 4);
        memcpy(out + 4, port_name, nl);
        return (uint16_t)len;
}

static void close_msg(void *arg)
{
        struct iscsi_session *s = arg;
        if (s->conn)
                iscsi_conn_close(s->conn, "session reinstated or shut down");
        session_put(s);
}

struct abort_msg {
        struct iscsi_session *s;
        uint64_t lun;
};

static void abort_msg_fn(void *arg)
{
        struct abort_msg *m = arg;
        if (m->s->conn)
                iscsi_conn_abort_lun(m->s->conn, m->lun);
        session_put(m->s);
        free(m);
}

/*
 * The SCSI personality's task-abort callback for this session's nexus
 * (PREEMPT AND ABORT): called with the target lock held, from any thread,
 * while the nexus is on the target's list (so the session is alive); the
 * abort itself runs on the session's reactor, which owns its tasks.
 */
static void nexus_abort(struct scsi_nexus *nx, uint64_t lun)
{
        struct iscsi_session *s =
            (struct iscsi_session *)((char *)nx - offsetof(struct iscsi_session, nexus));
        if (!s->reactor)
                return;
        struct abort_msg *m = malloc(sizeof(*m));
        if (!m) {
                LOG_ERR(ISCSI_MOD, "session tsih %u: out of memory, tasks not aborted", s->tsih);
                return;
        }
        m->s = s;
        m->lun = lun;
        atomic_fetch_add(&s->refs, 1);
        if (rt_msg_send(s->reactor, abort_msg_fn, m)) {
                LOG_ERR(ISCSI_MOD, "session tsih %u: tasks not aborted (cannot reach its reactor)",
                        s->tsih);
                atomic_fetch_sub(&s->refs, 1); /* the session holds its own reference */
                free(m);
        }
}

void iscsi_session_close_unadmitted(const struct iscsi_tgt *tgt)
{
        for (struct iscsi_session *s = sessions; s; s = s->next) {
                if (s->type != ISCSI_SESS_NORMAL || s->tgt != tgt || !s->reactor ||
                    iscsi_acl_admits_locked(tgt, s->initiator))
                        continue;
                LOG_INFO(ISCSI_MOD, "closing session tsih %u of %s: no longer in the ACL of %s",
                         s->tsih, s->initiator, tgt->name);
                atomic_fetch_add(&s->refs, 1);
                if (rt_msg_send(s->reactor, close_msg, s))
                        session_put(s);
        }
}

void iscsi_session_reinstate(const char *initiator, const uint8_t isid[6], const char *target,
                             const struct iscsi_session *except)
{
        pthread_mutex_lock(&iscsi_lock);
        for (struct iscsi_session *s = sessions; s; s = s->next) {
                if (s == except || s->type != ISCSI_SESS_NORMAL || !s->reactor)
                        continue;
                if (strcmp(s->initiator, initiator) || memcmp(s->isid, isid, 6) ||
                    strcmp(s->target_name, target))
                        continue;
                LOG_INFO(ISCSI_MOD, "reinstating session tsih %u of %s", s->tsih, initiator);
                atomic_fetch_add(&s->refs, 1);
                if (rt_msg_send(s->reactor, close_msg, s))
                        session_put(s);
        }
        pthread_mutex_unlock(&iscsi_lock);
}

struct iscsi_session *iscsi_session_create(struct iscsi_conn *c, const struct iscsi_neg *n,
                                           const uint8_t isid[6], struct iscsi_tgt *tgt)
{
        struct iscsi_session *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        atomic_init(&s->refs, 1);
        memcpy(s->isid, isid, 6);
        s->type = n->type;
        snprintf(s->initiator, sizeof(s->initiator), "%s", n->initiator_name);
        if (tgt)
                snprintf(s->target_name, sizeof(s->target_name), "%s", tgt->name);
        s->tgt = tgt;
        s->params = n->p;
        s->reactor = c->r;
        s->conn = c;

        if (s->type == ISCSI_SESS_NORMAL)
                iscsi_session_reinstate(s->initiator, isid, s->target_name, NULL);

        pthread_mutex_lock(&iscsi_lock);
        for (int i = 0; i < 65536; i++) {
                uint16_t t = next_tsih++;
                if (next_tsih == 0)
                        next_tsih = 1;
                if (t && !tsih_used(t)) {
                        s->tsih = t;
                        break;
                }
        }
        if (!s->tsih) {
                pthread_mutex_unlock(&iscsi_lock);
                free(s);
                return NULL;
        }
        s->next = sessions;
        sessions = s;
        pthread_mutex_unlock(&iscsi_lock);

        if (s->type == ISCSI_SESS_NORMAL && tgt) {
                char hex[13], iport[CORE_PR_NEXUS_MAX], tport[CORE_PR_NEXUS_MAX];
                uint8_t tid[CORE_PR_NEXUS_MAX];
                isid_hex(isid, hex);
                snprintf(iport, sizeof(iport), "%s,i,0x%s", s->initiator, hex);
                snprintf(tport, sizeof(tport), "%s,t,0x%04x", tgt->name, ISCSI_DEFAULT_TPGT);
                uint16_t tl = transport_id(tid, sizeof(tid), iport);
                scsi_nexus_init(&s->nexus, &tgt->scsi, iport, tport, tid, tl);
                scsi_nexus_set_abort(&s->nexus, nexus_abort);
                iscsi_acl_apply(tgt, s->initiator, &s->nexus); /* LUN masking */
                s->nexus_live = true;
        }
        return s;
}

void iscsi_session_end_nexus(struct iscsi_session *s)
{
        if (s->nexus_live) {
                scsi_nexus_fini(&s->nexus);
                s->nexus_live = false;
        }
}

void iscsi_session_release(struct iscsi_session *s)
{
        iscsi_session_end_nexus(s);
        pthread_mutex_lock(&iscsi_lock);
        for (struct iscsi_session **pp = &sessions; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        break;
                }
        pthread_mutex_unlock(&iscsi_lock);
        if (s->tgt)
                iscsi_tgt_put(s->tgt);
        s->tgt = NULL;
        s->conn = NULL;
        session_put(s);
}

void iscsi_close_all_sessions(void)
{
        pthread_mutex_lock(&iscsi_lock);
        for (struct iscsi_session *s = sessions; s; s = s->next) {
                if (!s->reactor)
                        continue;
                atomic_fetch_add(&s->refs, 1);
                if (rt_msg_send(s->reactor, close_msg, s))
                        session_put(s);
        }
        pthread_mutex_unlock(&iscsi_lock);
}

json_t *iscsi_sessions_json(void)
{
        json_t *arr = json_array();
        pthread_mutex_lock(&iscsi_lock);
        for (struct iscsi_session *s = sessions; s; s = s->next) {
                char hex[13];
                isid_hex(s->isid, hex);
                const struct iscsi_params *p = &s->params;
                json_t *params = json_pack(
                    "{s:s, s:s, s:i, s:i, s:i, s:i, s:b, s:b, s:i, s:i}", "HeaderDigest",
                    p->header_digest ? "CRC32C" : "None", "DataDigest",
                    p->data_digest ? "CRC32C" : "None", "MaxRecvDataSegmentLength",
                    (json_int_t)p->mrdsl_initiator, "FirstBurstLength", (json_int_t)p->first_burst,
                    "MaxBurstLength", (json_int_t)p->max_burst, "MaxOutstandingR2T",
                    (json_int_t)p->max_outstanding_r2t, "ImmediateData", p->immediate_data,
                    "InitialR2T", p->initial_r2t, "ErrorRecoveryLevel", (json_int_t)p->erl,
                    "MaxConnections", (json_int_t)p->max_connections);
                json_t *o = json_pack(
                    "{s:s, s:s, s:i, s:s, s:s, s:i, s:o}", "initiator", s->initiator, "isid", hex,
                    "tsih", (json_int_t)s->tsih, "target", s->target_name, "type",
                    s->type == ISCSI_SESS_DISCOVERY ? "discovery" : "normal", "connections",
                    (json_int_t)(s->conn ? 1 : 0), "params", params ? params : json_object());
                if (o)
                        json_array_append_new(arr, o);
        }
        pthread_mutex_unlock(&iscsi_lock);
        return arr;
}
