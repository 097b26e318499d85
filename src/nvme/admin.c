/*
 * Admin commands without a file of their own (NVMe Base 2.0 5.1 Abort,
 * 5.2 Asynchronous Event Request, 5.25 Keep Alive) and the asynchronous
 * event machinery (Namespace Attribute Changed, Discovery Log Page Change,
 * Reservation Log Page Available, Sanitize Operation Completed, and the
 * vendor-specific provisioning soft threshold, LBA Status Information
 * Alert): events are raised from any thread, queued per
 * controller, and delivered on the admin queue's reactor into parked AER
 * commands; a delivered event type stays masked until the host reads its
 * log page with RAE cleared (Base 2.0 5.2, 5.16 "Retain Asynchronous Event").
 */
#include <string.h>
#include <time.h>

#include "core/media.h"
#include "nvme/internal.h"
#include "rt/log.h"
#include "rt/reactor.h"

uint64_t nvme_uptime_s(void)
{
        static _Atomic uint64_t start;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t)ts.tv_sec, zero = 0;
        atomic_compare_exchange_strong(&start, &zero, now);
        return now - atomic_load(&start);
}

enum nvme_parse_result nvme_keep_alive_parse(struct nvme_cmd *cmd)
{
        /* The dispatcher already stamped last_cmd_ns; nothing else to do. */
        (void)cmd;
        return NVME_PARSE_DONE;
}

enum nvme_parse_result nvme_abort_parse(struct nvme_cmd *cmd)
{
        /* Commands run to completion quickly; report "not aborted" (dword 0 bit 0). */
        nvme_cqe_dw0(cmd, 1);
        return NVME_PARSE_DONE;
}

enum nvme_parse_result nvme_aer_parse(struct nvme_cmd *cmd)
{
        (void)cmd;
        return NVME_PARSE_EXEC;
}

static const struct {
        uint32_t evt;
        uint8_t type, info, lid;
} events[] = {
    {NVME_EVT_NS_CHANGED, NVME_AER_TYPE_NOTICE, NVME_AER_NOTICE_NS_CHANGED, NVME_LOG_CHANGED_NS},
    {NVME_EVT_DISC_CHANGED, NVME_AER_TYPE_NOTICE, NVME_AER_NOTICE_DISC_CHANGED, NVME_LOG_DISCOVERY},
    {NVME_EVT_RESV, NVME_AER_TYPE_IO_SPECIFIC, NVME_AER_IO_RESV_LOG_AVAILABLE,
     NVME_LOG_RESV_NOTIFY},
    {NVME_EVT_SANITIZED, NVME_AER_TYPE_IO_SPECIFIC, NVME_AER_IO_SANITIZE_DONE, NVME_LOG_SANITIZE},
    {NVME_EVT_PROV, NVME_AER_TYPE_VENDOR, NVME_AER_VS_PROV_THRESHOLD, NVME_LOG_VS_PROVISIONING},
    {NVME_EVT_LBA_STATUS, NVME_AER_TYPE_NOTICE, NVME_AER_NOTICE_LBA_STATUS, NVME_LOG_LBA_STATUS},
    {NVME_EVT_ANA, NVME_AER_TYPE_NOTICE, NVME_AER_NOTICE_ANA, NVME_LOG_ANA},
};

/* On the admin reactor: pair pending, unmasked events with parked AERs. */
static void aen_deliver(struct nvme_ctrl *ctrl)
{
        struct nvme_cmd *out[NVME_AERL];
        uint32_t dw0[NVME_AERL];
        unsigned n = 0;

        pthread_mutex_lock(&ctrl->lock);
        ctrl->aen_defer_pending = false;
        for (unsigned i = 0; i < sizeof(events) / sizeof(events[0]) && ctrl->naer > 0; i++) {
                uint32_t bit = events[i].evt;
                if (!(ctrl->aen_pending & bit) || (ctrl->aen_masked & bit))
                        continue;
                out[n] = ctrl->aer[0];
                memmove(&ctrl->aer[0], &ctrl->aer[1], (ctrl->naer - 1) * sizeof(ctrl->aer[0]));
                ctrl->naer--;
                dw0[n++] = events[i].type | ((uint32_t)events[i].info << 8) |
                           ((uint32_t)events[i].lid << 16);
                ctrl->aen_pending &= ~bit;
                ctrl->aen_masked |= bit;
        }
        pthread_mutex_unlock(&ctrl->lock);
        for (unsigned i = 0; i < n; i++) {
                nvme_set_status(out[i], 0, 0, false);
                nvme_cqe_dw0(out[i], dw0[i]);
                nvme_cmd_complete(out[i]);
        }
}

static void aen_defer_fn(struct rt_defer *d)
{
        struct nvme_ctrl *ctrl =
            (struct nvme_ctrl *)((char *)d - offsetof(struct nvme_ctrl, aen_defer));
        aen_deliver(ctrl);
        nvme_ctrl_put(ctrl);
}

static void aen_msg_fn(void *arg)
{
        struct nvme_ctrl *ctrl = arg;
        aen_deliver(ctrl);
        nvme_ctrl_put(ctrl);
}

/* Schedule delivery on the admin reactor (never inline: AER exec must not complete itself). */
static void aen_kick(struct nvme_ctrl *ctrl)
{
        if (!ctrl->admin_reactor || atomic_load(&ctrl->dead))
                return;
        pthread_mutex_lock(&ctrl->lock);
        bool go =
            !ctrl->aen_defer_pending && ctrl->naer > 0 && (ctrl->aen_pending & ~ctrl->aen_masked);
        if (go)
                ctrl->aen_defer_pending = true;
        pthread_mutex_unlock(&ctrl->lock);
        if (!go)
                return;
        if (!nvme_ctrl_tryget(ctrl)) { /* being freed: nobody left to tell */
                pthread_mutex_lock(&ctrl->lock);
                ctrl->aen_defer_pending = false;
                pthread_mutex_unlock(&ctrl->lock);
                return;
        }
        if (rt_current() == ctrl->admin_reactor) {
                ctrl->aen_defer.fn = aen_defer_fn;
                ctrl->aen_defer.next = NULL;
                rt_defer(ctrl->admin_reactor, &ctrl->aen_defer);
        } else if (rt_msg_send(ctrl->admin_reactor, aen_msg_fn, ctrl) != 0) {
                pthread_mutex_lock(&ctrl->lock);
                ctrl->aen_defer_pending = false;
                pthread_mutex_unlock(&ctrl->lock);
                atomic_fetch_sub(&ctrl->refs, 1); /* may run under nvme_lock: never free here */
        }
}

void nvme_aer_exec(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        pthread_mutex_lock(&ctrl->lock);
        if (ctrl->naer >= NVME_AERL) {
                pthread_mutex_unlock(&ctrl->lock);
                nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_AER_LIMIT, NVME_LOC_NONE, -1);
                nvme_cmd_complete_deferred(cmd);
                return;
        }
        ctrl->aer[ctrl->naer++] = cmd;
        pthread_mutex_unlock(&ctrl->lock);
        aen_kick(ctrl);
}

void nvme_ctrl_raise(struct nvme_ctrl *ctrl, uint32_t evt, uint32_t nsid)
{
        pthread_mutex_lock(&ctrl->lock);
        uint32_t enable = 0;
        if (evt & NVME_EVT_NS_CHANGED) {
                bool dup = false;
                for (unsigned i = 0; i < ctrl->nchanged && i < 1024; i++)
                        dup |= ctrl->changed_ns[i] == nsid;
                if (!dup) {
                        if (ctrl->nchanged < 1024)
                                ctrl->changed_ns[ctrl->nchanged] = nsid;
                        ctrl->nchanged++;
                }
                if (ctrl->aec & NVME_AEN_CFG_NS_ATTR)
                        enable |= NVME_EVT_NS_CHANGED;
        }
        if ((evt & NVME_EVT_DISC_CHANGED) && (ctrl->aec & NVME_AEN_CFG_DISC_CHANGE))
                enable |= NVME_EVT_DISC_CHANGED;
        /* Not in AEC: feature 82h masks reservation notifications before they are queued. */
        if (evt & NVME_EVT_RESV)
                enable |= NVME_EVT_RESV;
        if (evt & NVME_EVT_SANITIZED) /* no AEC bit: I/O command set events always report */
                enable |= NVME_EVT_SANITIZED;
        if (evt & NVME_EVT_PROV) /* vendor specific: no AEC bit either */
                enable |= NVME_EVT_PROV;
        if ((evt & NVME_EVT_LBA_STATUS) && (ctrl->aec & NVME_AEN_CFG_LBA_STATUS))
                enable |= NVME_EVT_LBA_STATUS;
        if ((evt & NVME_EVT_ANA) && (ctrl->aec & NVME_AEN_CFG_ANA_CHANGE))
                enable |= NVME_EVT_ANA;
        ctrl->aen_pending |= enable;
        pthread_mutex_unlock(&ctrl->lock);
        if (enable)
                aen_kick(ctrl);
}

/*
 * fn for every controller of every subsystem the event's namespace is
 * attached to, at each NSID it has there, except the controller whose
 * command made the change.  Under nvme_lock (the order is nvme_lock, then
 * ctrl->lock).
 */
static void each_ctrl_of_ns(const struct core_ns_event *ev,
                            void (*fn)(struct nvme_ctrl *c, uint32_t nsid,
                                       const struct core_ns_event *ev))
{
        pthread_mutex_lock(&nvme_lock);
        for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next) {
                if (s->discovery)
                        continue;
                for (uint32_t nsid = 1; nsid <= NVME_MAX_NSID; nsid++) {
                        if (atomic_load(&s->ns[nsid]) != ev->ns)
                                continue;
                        for (struct nvme_ctrl *c = s->ctrls; c; c = c->next)
                                if ((const void *)c != ev->origin)
                                        fn(c, nsid, ev);
                }
        }
        pthread_mutex_unlock(&nvme_lock);
}

/*
 * A registrant lost its registration or reservation (from either
 * protocol): a Reservation Notification log entry and event for every
 * controller of that host (resv.c, Base 2.0 8.19).
 */
static void resv_notify(struct nvme_ctrl *c, uint32_t nsid, const struct core_ns_event *ev)
{
        if (core_pr_reg_names(ev->pr_reg, nvme_ctrl_pr_id(c)))
                nvme_resv_notify(c, nsid, ev->pr_events);
}

/*
 * A change to what Identify Namespace reports (capacity, write protection,
 * identity) is a Namespace Attribute Changed notice with the NSID in the
 * Changed Namespace List (Base 2.0 5.27.1.2x, 8.12.1).  The Linux host
 * answers it by re-reading Identify (a rescan: new size, read-only).
 */
static void ns_changed(struct nvme_ctrl *c, uint32_t nsid, const struct core_ns_event *ev)
{
        (void)ev;
        nvme_ctrl_raise(c, NVME_EVT_NS_CHANGED, nsid);
}

/*
 * The namespace's allocated space crossed its soft threshold (core
 * provision.c).  NVMe has no thin-provisioning threshold event, so this is
 * a vendor-specific event (type 7h, information 01h) naming the vendor
 * log page C0h (log.c) that has the counts; the Linux host turns it into a
 * uevent NVME_AEN=0xc00107 on the controller.  Like every event it stays
 * masked until the host reads the page with RAE cleared.
 */
static void prov_threshold(struct nvme_ctrl *c, uint32_t nsid, const struct core_ns_event *ev)
{
        (void)ev;
        nvme_ctrl_raise(c, NVME_EVT_PROV, nsid);
}

/*
 * A sanitize started or ended on a namespace (whoever started it: an NVMe
 * host, an iSCSI host): the start withdraws a Sanitize Operation Completed
 * event not yet delivered (Base 2.0 8.21); the end of the last one running
 * in a subsystem raises it on every controller of that subsystem.
 */
static void on_sanitize_event(const struct core_ns_event *ev)
{
        bool started = ev->new_val == CORE_SAN_RUNNING;
        if (!started && ev->old_val != CORE_SAN_RUNNING)
                return; /* EXIT FAILURE MODE: nothing to report */
        pthread_mutex_lock(&nvme_lock);
        for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next) {
                uint32_t nsid = 0;
                bool others = false;
                if (s->discovery)
                        continue;
                for (uint32_t i = 1; i <= NVME_MAX_NSID; i++) {
                        struct core_ns *ns = atomic_load(&s->ns[i]);
                        if (ns == ev->ns)
                                nsid = i;
                        else if (ns && core_ns_sanitize_state(ns) == CORE_SAN_RUNNING)
                                others = true;
                }
                if (!nsid)
                        continue;
                for (struct nvme_ctrl *c = s->ctrls; c; c = c->next) {
                        if (started) {
                                pthread_mutex_lock(&c->lock);
                                c->aen_pending &= ~NVME_EVT_SANITIZED;
                                pthread_mutex_unlock(&c->lock);
                        } else if (!others) {
                                nvme_ctrl_raise(c, NVME_EVT_SANITIZED, nsid);
                        }
                }
        }
        pthread_mutex_unlock(&nvme_lock);
}

/*
 * The unrecoverable blocks or an element changed (core/media.h): the LBA
 * Status Information Alert (Base 2.0 5.27.1.x, AEC bit 13 LSIN), masked
 * until the host reads log 0Eh with RAE cleared.
 */
static void lba_status_alert(struct nvme_ctrl *c, uint32_t nsid, const struct core_ns_event *ev)
{
        (void)ev;
        nvme_ctrl_raise(c, NVME_EVT_LBA_STATUS, nsid);
}

/*
 * This gateway's state of the namespace's access group changed, or the
 * namespace moved to another group (core/ana.h): the Asymmetric Namespace
 * Access Change notice (Base 2.0 8.1.4, AEC bit 11), masked until the host
 * reads log 0Ch with RAE cleared.  Linux answers it by re-reading the log
 * and moving I/O to the paths it finds optimized.
 */
static void ana_changed(struct nvme_ctrl *c, uint32_t nsid, const struct core_ns_event *ev)
{
        (void)ev;
        nvme_ctrl_raise(c, NVME_EVT_ANA, nsid);
}

/*
 * Persistent Event log entries (pel.c) for a namespace event, in every
 * subsystem the namespace is attached to (under nvme_lock).
 */
static void pel_record_event(const struct core_ns_event *ev)
{
        struct core_ns *ns = ev->ns;
        pthread_mutex_lock(&nvme_lock);
        for (struct nvme_subsys *s = nvme_subsystems; s; s = s->next) {
                if (s->discovery || !s->pel)
                        continue;
                for (uint32_t nsid = 1; nsid <= NVME_MAX_NSID; nsid++) {
                        if (atomic_load(&s->ns[nsid]) != ns)
                                continue;
                        if (ev->type == CORE_NS_EV_CAPACITY) {
                                struct nvme_pel_change_ns d = {0};
                                put_le64(&d.nsze, core_ns_blocks(ns));
                                put_le64(&d.nscap, core_ns_blocks(ns));
                                d.flbas = nvme_pi_flbas(ns); /* the LBA format in use */
                                d.nmic = 1;
                                put_le32(&d.nsid, nsid);
                                nvme_pel_record(s, NVME_PEL_CHANGE_NS, 0, &d, sizeof(d));
                        } else if (ev->type == CORE_NS_EV_SANITIZE) {
                                uint8_t d[12] = {0};
                                bool start = ev->new_val == CORE_SAN_RUNNING;
                                if (!start) { /* SANPROG FFFFh, SANSTAT 1h ok / 3h failed */
                                        slate_put_le(d, 2, 0xffff);
                                        slate_put_le(d + 2, 2,
                                                     ev->new_val == CORE_SAN_DONE ? 1 : 3);
                                }
                                nvme_pel_record(
                                    s, start ? NVME_PEL_SANITIZE_START : NVME_PEL_SANITIZE_DONE, 0,
                                    d, start ? 12 : 8);
                        } else if (ev->type == CORE_NS_EV_MEDIA &&
                                   (ev->new_val & CORE_MEDIA_CHG_ELEMENT) && ev->old_val) {
                                /* An element failed or degraded: hardware error, then SMART. */
                                struct core_elem_info ei;
                                if (core_media_element_info(ns, ev->old_val, &ei) ||
                                    (ei.state != CORE_ELEM_FAILED &&
                                     ei.state != CORE_ELEM_DEGRADED))
                                        continue;
                                uint8_t d[8] = {0};
                                slate_put_le(d, 2, NVME_PEL_HWERR_MEDIA_INTEGRITY);
                                /* Additional information: the NSID and element id. */
                                slate_put_le(d + 4, 2, nsid);
                                d[6] = (uint8_t)ev->old_val;
                                d[7] = (uint8_t)ei.state;
                                nvme_pel_record(s, NVME_PEL_NSS_HW_ERROR, 0, d, sizeof(d));
                                struct nvme_smart_log sl;
                                memset(&sl, 0, sizeof(sl));
                                nvme_smart_build(s, NULL, &sl);
                                nvme_pel_record(s, NVME_PEL_SMART_SNAPSHOT, 0, &sl, sizeof(sl));
                        }
                }
        }
        pthread_mutex_unlock(&nvme_lock);
}

/* Namespace events from the core, whoever caused them: an NVMe host, an iSCSI host, management. */
static void on_ns_event(const struct core_ns_event *ev, void *arg)
{
        (void)arg;
        switch (ev->type) {
        case CORE_NS_EV_RESERVATION:
                each_ctrl_of_ns(ev, resv_notify);
                break;
        case CORE_NS_EV_SANITIZE:
                on_sanitize_event(ev);
                pel_record_event(ev);
                break;
        case CORE_NS_EV_MEDIA:
                each_ctrl_of_ns(ev, lba_status_alert);
                pel_record_event(ev);
                break;
        case CORE_NS_EV_CAPACITY:
                each_ctrl_of_ns(ev, ns_changed);
                pel_record_event(ev);
                break;
        case CORE_NS_EV_WRITE_PROTECT:
        case CORE_NS_EV_IDENTITY:
        case CORE_NS_EV_FORMAT: /* FLBAS/DPS changed: Namespace Attribute Changed */
                each_ctrl_of_ns(ev, ns_changed);
                break;
        case CORE_NS_EV_PROVISIONING: /* NCAP is the limit */
                if (ev->new_val & CORE_PROV_CHG_LIMIT)
                        each_ctrl_of_ns(ev, ns_changed);
                break;
        case CORE_NS_EV_SPACE_THRESHOLD:
                each_ctrl_of_ns(ev, prov_threshold);
                break;
        case CORE_NS_EV_ANA:
                each_ctrl_of_ns(ev, ana_changed);
                break;
        default:
                break;
        }
}

static void listen_once(void)
{
        if (core_ns_listen(on_ns_event, NULL))
                LOG_ERR("nvme", "cannot listen to namespace events");
}

void nvme_events_init(void)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, listen_once);
}

void nvme_ctrl_log_read(struct nvme_ctrl *ctrl, uint8_t lid)
{
        uint32_t bit = 0;
        for (unsigned i = 0; i < sizeof(events) / sizeof(events[0]); i++)
                if (events[i].lid == lid)
                        bit = events[i].evt;
        if (!bit)
                return;
        pthread_mutex_lock(&ctrl->lock);
        ctrl->aen_masked &= ~bit;
        pthread_mutex_unlock(&ctrl->lock);
        aen_kick(ctrl);
}
