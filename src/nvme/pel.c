/*
 * The Persistent Event log (NVMe Base 2.0 5.16.1.14, log 0Dh): what
 * happened to an NVM subsystem's media, as events with timestamps.
 *
 * Each subsystem keeps a bounded ring of events (PEL_MAX_EVENTS; the
 * oldest is dropped and the generation number counts the drops), recorded
 * from the core's namespace events (admin.c) for the namespaces attached
 * to it: an element failing or degrading (NVM Subsystem Hardware Error
 * event, code Media and Data Integrity Status, followed by a SMART / Health
 * Log Snapshot event), a capacity change (Change Namespace event with the
 * new NSZE/NCAP, after a depopulation or a resize), a sanitize starting
 * and completing.  A host reads the log through a reporting context: LSP
 * action 1 establishes it (a snapshot of the events so far) and reads,
 * action 0 reads from it (Command Sequence Error without one), action 2
 * releases it.
 *
 * Choices where the standard leaves one: establishing a context while one
 * exists replaces it (a host that lost track of its context recovers);
 * the ring lives as long as slated runs (a restart begins an empty log:
 * the media state itself persists in the namespace metadata, the events
 * about it do not); event timestamps are milliseconds since the Unix
 * epoch, as Set Features Timestamp would report them.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nvme/internal.h"

#define PEL_MAX_EVENTS 128
#define PEL_MAX_DATA   512 /* the largest event data: a SMART / Health snapshot */

struct pel_rec {
        uint8_t etype;
        uint16_t cntlid;
        uint64_t ts;
        uint16_t len;
        uint8_t data[PEL_MAX_DATA];
};

struct nvme_pel {
        pthread_mutex_t lock;
        struct pel_rec rec[PEL_MAX_EVENTS];
        unsigned head, n; /* oldest at (head + PEL_MAX_EVENTS - n) % PEL_MAX_EVENTS */
        uint16_t gen;     /* events dropped when the ring was full (wraps) */
};

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return ((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000) & 0xffffffffffffull;
}

struct nvme_pel *nvme_pel_new(void)
{
        struct nvme_pel *p = calloc(1, sizeof(*p));
        if (p)
                pthread_mutex_init(&p->lock, NULL);
        return p;
}

void nvme_pel_free(struct nvme_pel *p)
{
        if (!p)
                return;
        pthread_mutex_destroy(&p->lock);
        free(p);
}

void nvme_pel_record(struct nvme_subsys *s, uint8_t etype, uint16_t cntlid, const void *data,
                     uint16_t len)
{
        struct nvme_pel *p = s->pel;
        if (!p)
                return;
        if (len > PEL_MAX_DATA)
                len = PEL_MAX_DATA;
        pthread_mutex_lock(&p->lock);
        struct pel_rec *r = &p->rec[p->head];
        r->etype = etype;
        r->cntlid = cntlid;
        r->ts = now_ms();
        r->len = len;
        memcpy(r->data, data, len);
        p->head = (p->head + 1) % PEL_MAX_EVENTS;
        if (p->n < PEL_MAX_EVENTS)
                p->n++;
        else
                p->gen++;
        pthread_mutex_unlock(&p->lock);
}

static void pad(char *dst, size_t n, const char *src)
{
        size_t l = strnlen(src, n);
        memset(dst, ' ', n);
        memcpy(dst, src, l);
}

/* The whole log as it is now (header and events): a malloc'd buffer and its length. */
static uint8_t *pel_build(struct nvme_ctrl *ctrl, uint32_t *len_out)
{
        struct nvme_subsys *s = ctrl->subsys;
        struct nvme_pel *p = s->pel;
        size_t cap = sizeof(struct nvme_pel_hdr) +
                     (size_t)PEL_MAX_EVENTS * (sizeof(struct nvme_pel_event) + PEL_MAX_DATA);
        uint8_t *buf = calloc(1, cap);
        if (!buf)
                return NULL;
        struct nvme_pel_hdr *h = (struct nvme_pel_hdr *)buf;
        uint32_t off = sizeof(*h), n = 0;
        uint16_t gen = 0;
        if (p) {
                pthread_mutex_lock(&p->lock);
                for (unsigned i = 0; i < p->n; i++) {
                        const struct pel_rec *r =
                            &p->rec[(p->head + PEL_MAX_EVENTS - p->n + i) % PEL_MAX_EVENTS];
                        struct nvme_pel_event *e = (struct nvme_pel_event *)(buf + off);
                        e->etype = r->etype;
                        e->ehl = sizeof(*e) - 3;
                        put_le16(&e->cntlid, r->cntlid);
                        put_le64(&e->ets, r->ts);
                        put_le16(&e->el, r->len);
                        memcpy(buf + off + sizeof(*e), r->data, r->len);
                        off += (uint32_t)sizeof(*e) + r->len;
                        n++;
                }
                gen = p->gen;
                pthread_mutex_unlock(&p->lock);
        }
        h->lid = NVME_LOG_PERSISTENT_EVENT;
        put_le32(&h->tnev, n);
        put_le64(&h->tll, off);
        h->rv = 1;
        put_le16(&h->lhl, sizeof(*h) - 20);
        put_le64(&h->ts, now_ms());
        slate_put_le(h->poh, 8, nvme_uptime_s() / 3600);
        put_le64(&h->pcc, 1);
        pad(h->sn, sizeof(h->sn), s->serial);
        pad(h->mn, sizeof(h->mn), s->model);
        memcpy(h->subnqn, s->nqn, strnlen(s->nqn, sizeof(h->subnqn) - 1));
        put_le16(&h->gen, gen);
        /* Supported events: bit n of the bitmap = event type n. */
        static const uint8_t types[] = {NVME_PEL_SMART_SNAPSHOT, NVME_PEL_NSS_HW_ERROR,
                                        NVME_PEL_CHANGE_NS, NVME_PEL_SANITIZE_START,
                                        NVME_PEL_SANITIZE_DONE};
        for (unsigned i = 0; i < sizeof(types); i++)
                h->seb[types[i] / 8] |= (uint8_t)(1u << (types[i] % 8));
        *len_out = off;
        return buf;
}

enum nvme_parse_result nvme_pel_log_page(struct nvme_cmd *cmd, uint8_t lsp, uint32_t len,
                                         uint64_t lpo)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        if (lsp > NVME_PEL_ACT_RELEASE)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10) + 1);
        if (lsp == NVME_PEL_ACT_RELEASE) {
                pthread_mutex_lock(&ctrl->lock);
                free(ctrl->pel_ctx);
                ctrl->pel_ctx = NULL;
                ctrl->pel_ctx_len = 0;
                pthread_mutex_unlock(&ctrl->lock);
                memset(cmd->buf, 0, len);
                return NVME_PARSE_DONE;
        }
        if (lsp == NVME_PEL_ACT_ESTABLISH) {
                uint32_t l = 0;
                uint8_t *b = pel_build(ctrl, &l);
                if (!b)
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INTERNAL, NVME_LOC_NONE,
                                           -1);
                pthread_mutex_lock(&ctrl->lock);
                free(ctrl->pel_ctx); /* our choice: a new context replaces the old */
                ctrl->pel_ctx = b;
                ctrl->pel_ctx_len = l;
                pthread_mutex_unlock(&ctrl->lock);
        }
        pthread_mutex_lock(&ctrl->lock);
        if (!ctrl->pel_ctx) {
                pthread_mutex_unlock(&ctrl->lock);
                /* Read without a reporting context (Base 2.0 5.16.1.14). */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR,
                                   NVME_SQE_OFF_CDW(10) + 1, -1);
        }
        if (lpo > ctrl->pel_ctx_len) {
                pthread_mutex_unlock(&ctrl->lock);
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
        }
        memset(cmd->buf, 0, len);
        nvme_copy_window(cmd->buf, len, lpo, ctrl->pel_ctx, 0, ctrl->pel_ctx_len);
        pthread_mutex_unlock(&ctrl->lock);
        return NVME_PARSE_DONE;
}
