/*
 * Flexible Data Placement (TP4146, NVMe 2.1 8.1.10; NVM Command Set 1.1):
 * the FDP log pages 20h (configurations), 21h (reclaim unit handle
 * usage), 22h (statistics) and 23h (events), features 1Dh (FDP) and 1Eh
 * (FDP events), I/O Management Receive (12h, Reclaim Unit Handle Status)
 * and Send (1Dh, Reclaim Unit Handle Update), and the placement of a Write
 * with DTYPE 02h.  The flash model of the core (core/flash.h) is the
 * media: a reclaim unit is one of its erase blocks, a reclaim unit handle
 * one core placement id (kind FDP_RUH, key = the handle's index), and the
 * statistics and events are its exact counts.
 *
 * Our choices where the standard leaves one:
 *   - one endurance group per namespace, ENDGID = NSID (the model is per
 *     namespace); ENDGIDMAX = NN.  The group has one FDP configuration
 *     (index 0), one reclaim group (RGIF = 0: a Placement Identifier is
 *     the placement handle), NVME_FDP_NRUH initially isolated reclaim unit
 *     handles (fewer when the core cannot keep that many open), RUNS = the
 *     model's erase block, no reclaim unit time limit;
 *   - FDP is enabled on a namespace exactly when it has the flash model
 *     (flash_model = true), and its placement handle list is every
 *     handle in order (handle i is reclaim unit handle i).  Set Features
 *     1Dh that asks for the state the group is in succeeds (with SV, the
 *     state is the configuration's); changing it is Command Sequence Error,
 *     as the standard requires while a namespace exists in the group;
 *   - a Write without DTYPE 02h on an FDP namespace uses placement handle
 *     0, as does one whose Placement Identifier names no handle (FDP is a
 *     hint): that one also logs an Invalid Placement Identifier host event;
 *   - events are enabled per namespace and placement handle, all supported
 *     types (03h invalid PID, 80h media reallocated = the model's garbage
 *     collection moved data, 81h implicitly modified RUH = the model filled
 *     a handle's reclaim unit and opened a new one) enabled by default;
 *     the controller events are read from the model's ring when log 23h
 *     is read, the host events are kept in a ring of NVME_FDP_EVENTS_MAX
 *     per subsystem (the newest win).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "core/flash.h"
#include "nvme/internal.h"

/* Event types we support, and their bit in the per-handle disable masks. */
static const uint8_t fdp_ev_types[] = {NVME_FDP_EVT_RU_NOT_FULLY_WRITTEN, NVME_FDP_EVT_INVALID_PID,
                                       NVME_FDP_EVT_MEDIA_REALLOC, NVME_FDP_EVT_IMPLICIT_RUH};
#define FDP_NEV (sizeof(fdp_ev_types) / sizeof(fdp_ev_types[0]))

static int ev_bit(uint8_t type)
{
        for (unsigned i = 0; i < FDP_NEV; i++)
                if (fdp_ev_types[i] == type)
                        return (int)i;
        return -1;
}

bool nvme_fdp_enabled(const struct core_ns *ns)
{
        /* A model too small to keep even one reclaim unit open per handle has no FDP. */
        return ns && !ns->fdp_off && core_flash_enabled(ns) && core_placement_max(ns) > 0;
}

unsigned nvme_fdp_nruh(const struct core_ns *ns)
{
        unsigned m = core_placement_max(ns);
        return m < NVME_FDP_NRUH ? m : NVME_FDP_NRUH;
}

/*
 * The core placement id of reclaim unit handle ph (allocated on first use,
 * under fdp_lock so that it holds exactly one reference; kept for the
 * namespace's life), or 0 when the core has none left.
 */
static uint16_t ruh_placement(struct nvme_subsys *s, struct core_ns *ns, uint16_t ph)
{
        uint16_t id = core_placement_find(ns, CORE_PL_FDP_RUH, ph);
        if (id)
                return id;
        pthread_mutex_lock(&s->fdp_lock);
        id = core_placement_find(ns, CORE_PL_FDP_RUH, ph);
        if (!id && core_placement_get(ns, CORE_PL_FDP_RUH, ph, &id))
                id = 0;
        pthread_mutex_unlock(&s->fdp_lock);
        return id;
}

static bool ev_enabled(struct nvme_subsys *s, uint32_t nsid, uint16_t ph, uint8_t type)
{
        int b = ev_bit(type);
        if (b < 0 || nsid > NVME_MAX_NSID || ph >= NVME_FDP_NRUH)
                return false;
        return !(atomic_load_explicit(&s->fdp_ev_off[nsid][ph], memory_order_relaxed) & (1u << b));
}

static void put_ts(struct nvme_fdp_event *e, uint64_t t_ns)
{
        /* Timestamp (Base 2.0 5.27.1.10): milliseconds since the epoch, 48 bits. */
        slate_put_le((uint8_t *)&e->timestamp, 6, t_ns / 1000000u);
}

static void host_event(struct nvme_subsys *s, uint32_t nsid, uint8_t type, uint16_t pid,
                       uint8_t ruhid)
{
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        struct nvme_fdp_event e;
        memset(&e, 0, sizeof(e));
        e.type = type;
        e.flags = NVME_FDP_EVF_PIV | NVME_FDP_EVF_NSIDV;
        put_le16(&e.pid, pid);
        put_ts(&e, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
        put_le32(&e.nsid, nsid);
        e.ruhid = ruhid;
        pthread_mutex_lock(&s->fdp_lock);
        s->fdp_hostev[s->fdp_hostev_n++ % NVME_FDP_EVENTS_MAX] = e;
        pthread_mutex_unlock(&s->fdp_lock);
}

int nvme_fdp_placement(struct nvme_cmd *cmd, bool dp, uint16_t pid, uint16_t *pl)
{
        struct nvme_subsys *s = cmd->queue->ctrl->subsys;
        uint32_t nsid = nvme_nsid(cmd);
        uint16_t ph = dp ? pid : 0;
        if (!nvme_fdp_enabled(cmd->ns))
                return -EINVAL;
        if (ph >= nvme_fdp_nruh(cmd->ns)) {
                /* A hint: the default handle, and an event when enabled for the handle named. */
                if (ev_enabled(s, nsid, 0, NVME_FDP_EVT_INVALID_PID))
                        host_event(s, nsid, NVME_FDP_EVT_INVALID_PID, pid, 0);
                ph = 0;
        }
        *pl = ruh_placement(s, cmd->ns, ph);
        return 0;
}

/* ---- Log pages 20h..23h (LSI = endurance group = NSID) ---- */

uint32_t nvme_fdp_log(struct nvme_cmd *cmd, uint8_t lid, uint16_t endgid, bool host_events,
                      uint8_t *p, uint32_t cap)
{
        struct nvme_subsys *s = cmd->queue->ctrl->subsys;
        struct core_ns *ns = cmd->ns;
        unsigned nruh = nvme_fdp_nruh(ns);
        memset(p, 0, cap);

        switch (lid) {
        case NVME_LOG_FDP_CONFIGS: {
                struct core_flash_info fi;
                core_flash_info(ns, &fi);
                uint32_t dsz = (uint32_t)sizeof(struct nvme_fdp_config_desc) + 4 * nruh;
                struct nvme_fdp_config_log *h = (void *)p;
                struct nvme_fdp_config_desc *d = (void *)(p + sizeof(*h));
                put_le16(&h->ncfg, 0);
                put_le32(&h->size, (uint32_t)sizeof(*h) + dsz);
                put_le16(&d->size, (uint16_t)dsz);
                d->fdpa = 0x80; /* valid; RGIF 0; no volatile write cache of its own */
                put_le32(&d->nrg, 1);
                put_le16(&d->nruh, (uint16_t)nruh);
                put_le16(&d->maxpids, (uint16_t)(nruh - 1));
                put_le32(&d->nnss, 1);
                put_le64(&d->runs, fi.erase_block);
                uint8_t *r = p + sizeof(*h) + sizeof(*d);
                for (unsigned i = 0; i < nruh; i++)
                        r[4 * i] = NVME_FDP_RUHT_INITIALLY_ISOLATED;
                return (uint32_t)sizeof(*h) + dsz;
        }
        case NVME_LOG_FDP_RUH_USAGE: {
                struct nvme_fdp_ruhu_log *h = (void *)p;
                put_le16(&h->nruh, (uint16_t)nruh);
                for (unsigned i = 0; i < nruh; i++) /* every handle is in the namespace's list */
                        p[sizeof(*h) + 8 * i] = NVME_FDP_RUHA_HOST;
                return (uint32_t)sizeof(*h) + 8 * nruh;
        }
        case NVME_LOG_FDP_STATS: {
                struct nvme_fdp_stats_log *l = (void *)p;
                struct core_flash_stats st;
                struct core_flash_info fi;
                core_flash_info(ns, &fi);
                if (core_flash_stats(ns, CORE_FLASH_ALL, &st) == 0) {
                        slate_put_le(l->hbmw, 8, st.host_bytes);
                        slate_put_le(l->mbmw, 8, st.media_bytes);
                        slate_put_le(l->mbe, 8, st.erases * fi.erase_block);
                }
                return sizeof(*l);
        }
        default: /* NVME_LOG_FDP_EVENTS */
                break;
        }
        struct nvme_fdp_events_log *l = (void *)p;
        unsigned n = 0;
        if (host_events) {
                pthread_mutex_lock(&s->fdp_lock);
                uint64_t total = s->fdp_hostev_n;
                uint64_t first = total > NVME_FDP_EVENTS_MAX ? total - NVME_FDP_EVENTS_MAX : 0;
                for (uint64_t i = first; i < total; i++) {
                        const struct nvme_fdp_event *e = &s->fdp_hostev[i % NVME_FDP_EVENTS_MAX];
                        if (get_le32(&e->nsid) == endgid)
                                l->ev[n++] = *e;
                }
                pthread_mutex_unlock(&s->fdp_lock);
        } else {
                /* The model's ring, oldest first, for the events of this group's handles. */
                struct core_flash_event ev[CORE_FLASH_EV_RING];
                uint16_t pl[NVME_FDP_NRUH];
                for (unsigned i = 0; i < nruh; i++)
                        pl[i] = core_placement_find(ns, CORE_PL_FDP_RUH, i);
                uint64_t cursor = 0, lost = 0;
                unsigned m = core_flash_events(ns, &cursor, ev, CORE_FLASH_EV_RING, &lost);
                for (unsigned i = 0; i < m; i++) {
                        unsigned ph = 0;
                        while (ph < nruh && (!pl[ph] || pl[ph] != ev[i].placement))
                                ph++;
                        uint8_t type = ev[i].type == CORE_FLASH_EV_GC_MOVE
                                           ? NVME_FDP_EVT_MEDIA_REALLOC
                                           : NVME_FDP_EVT_IMPLICIT_RUH;
                        if (ph == nruh || !ev_enabled(s, endgid, (uint16_t)ph, type))
                                continue;
                        struct nvme_fdp_event *e = &l->ev[n % NVME_FDP_EVENTS_MAX];
                        memset(e, 0, sizeof(*e));
                        e->type = type;
                        e->flags = NVME_FDP_EVF_PIV | NVME_FDP_EVF_NSIDV;
                        put_le16(&e->pid, (uint16_t)ph);
                        put_ts(e, ev[i].t_ns);
                        put_le32(&e->nsid, endgid);
                        e->ruhid = (uint8_t)ph;
                        if (type == NVME_FDP_EVT_MEDIA_REALLOC) {
                                /* Type specific: LBAV, NLBAM (blocks moved), LBA. */
                                uint64_t nlb = ev[i].bytes >> ns->block_shift;
                                e->type_specific[0] = 1;
                                slate_put_le(e->type_specific + 2, 2, nlb > 0xffff ? 0xffff : nlb);
                                slate_put_le(e->type_specific + 4, 8, ev[i].lba);
                                e->flags |= NVME_FDP_EVF_LV;
                        }
                        n++;
                }
                if (n > NVME_FDP_EVENTS_MAX) { /* keep the newest 63, oldest first */
                        struct nvme_fdp_event tmp[NVME_FDP_EVENTS_MAX];
                        for (unsigned i = 0; i < NVME_FDP_EVENTS_MAX; i++)
                                tmp[i] = l->ev[(n + i) % NVME_FDP_EVENTS_MAX];
                        memcpy(l->ev, tmp, sizeof(tmp));
                        n = NVME_FDP_EVENTS_MAX;
                }
        }
        put_le32(&l->nevents, n);
        return sizeof(*l);
}

/*
 * Endurance Group Information (log 09h, Base 2.0 5.16.1.10) of group
 * endgid (cmd->ns): data units (thousands of 512 bytes, rounded up) read
 * and written by hosts, media units written (the flash model's media
 * bytes; without the model, what hosts wrote), host read and write
 * commands.  Percentage used and spare are those of a new drive.
 */
uint32_t nvme_endurance_log(struct nvme_cmd *cmd, uint8_t *p, uint32_t cap)
{
        struct core_stats_sum sum;
        struct core_flash_stats fs;
        memset(p, 0, cap < 512 ? cap : 512);
        core_stats_sum(&cmd->ns->stats, &sum);
        uint64_t media = sum.bytes[CORE_OPC_WRITE];
        if (core_flash_stats(cmd->ns, CORE_FLASH_ALL, &fs) == 0)
                media = fs.media_bytes;
        p[3] = 100; /* available spare */
        p[4] = 10;  /* its threshold */
        slate_put_le(p + 48, 8, (sum.bytes[CORE_OPC_READ] / 512 + 999) / 1000);
        slate_put_le(p + 64, 8, (sum.bytes[CORE_OPC_WRITE] / 512 + 999) / 1000);
        slate_put_le(p + 80, 8, (media / 512 + 999) / 1000);
        slate_put_le(p + 96, 8, sum.ok[CORE_OPC_READ]);
        slate_put_le(p + 112, 8, sum.ok[CORE_OPC_WRITE]);
        return 512;
}

/* ---- Features 1Dh and 1Eh ---- */

/* The namespace of endurance group endgid with FDP, in cmd->ns; false = rejected. */
static bool fdp_group(struct nvme_cmd *cmd, uint32_t endgid, uint16_t loc)
{
        if (endgid == 0 || endgid > NVME_MAX_NSID ||
            !(cmd->ns = nvme_ns_lookup(cmd->queue->ctrl->subsys, endgid))) {
                nvme_invalid_field(cmd, loc);
                return false;
        }
        return true;
}

enum nvme_parse_result nvme_fdp_get_feature(struct nvme_cmd *cmd, uint8_t fid, uint8_t sel)
{
        struct nvme_subsys *s = cmd->queue->ctrl->subsys;
        uint32_t cdw11 = nvme_cdw(cmd, 11);
        if (fid == NVME_FEAT_FDP) {
                if (!nvme_xfer(cmd, 0, false))
                        return NVME_PARSE_DONE;
                if (sel == NVME_SEL_SUPPORTED) {
                        nvme_cqe_dw0(cmd, NVME_FEAT_CAP_SAVEABLE | NVME_FEAT_CAP_CHANGEABLE);
                        return NVME_PARSE_DONE;
                }
                if (!fdp_group(cmd, cdw11 & 0xffff, NVME_SQE_OFF_CDW(11)))
                        return NVME_PARSE_DONE;
                nvme_cqe_dw0(cmd, nvme_fdp_enabled(cmd->ns) ? 1u : 0u); /* FDPE; FDPCIDX 0 */
                return NVME_PARSE_DONE;
        }
        /* 1Eh: NOET event descriptors (type, attribute bit 0 = enabled) of handle PHNDL. */
        uint16_t ph = cdw11 & 0xffff;
        unsigned noet = (cdw11 >> 16) & 0xff;
        uint32_t sgl = (uint32_t)slate_get_le(cmd->sqe + 32, 4);
        uint32_t len = sel == NVME_SEL_SUPPORTED ? 0 : (sgl < 512 ? sgl : 512);
        if (!nvme_xfer(cmd, len, false))
                return NVME_PARSE_DONE;
        if (sel == NVME_SEL_SUPPORTED) {
                nvme_cqe_dw0(cmd, NVME_FEAT_CAP_NS | NVME_FEAT_CAP_CHANGEABLE);
                return NVME_PARSE_DONE;
        }
        uint32_t nsid = nvme_nsid(cmd);
        if (nsid == 0 || nsid > NVME_MAX_NSID || !(cmd->ns = nvme_ns_lookup(s, nsid)))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS,
                                   offsetof(struct nvme_sqe, nsid), -1);
        if (!nvme_fdp_enabled(cmd->ns))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_FDP_DISABLED, NVME_LOC_NONE, -1);
        if (ph >= nvme_fdp_nruh(cmd->ns))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_PLACEMENT_HANDLE,
                                   NVME_SQE_OFF_CDW(11), -1);
        memset(cmd->buf, 0, len);
        unsigned n = 0;
        for (unsigned i = 0; i < FDP_NEV && i < noet && 2 * (i + 1) <= len; i++, n++) {
                cmd->buf[2 * i] = fdp_ev_types[i];
                cmd->buf[2 * i + 1] =
                    sel == NVME_SEL_CURRENT ? ev_enabled(s, nsid, ph, fdp_ev_types[i]) : 1;
        }
        nvme_cqe_dw0(cmd, n);
        return NVME_PARSE_DONE;
}

enum nvme_parse_result nvme_fdp_set_feature(struct nvme_cmd *cmd, uint8_t fid)
{
        uint32_t cdw11 = nvme_cdw(cmd, 11), cdw12 = nvme_cdw(cmd, 12);
        if (fid == NVME_FEAT_FDP) {
                if (!nvme_xfer(cmd, 0, true) ||
                    !fdp_group(cmd, cdw11 & 0xffff, NVME_SQE_OFF_CDW(11)))
                        return NVME_PARSE_DONE;
                if (cdw12 & ~0xff01u)
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
                if ((cdw12 >> 8) & 0xff) /* one configuration: index 0 */
                        return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12) + 1);
                if ((cdw12 & 1) != nvme_fdp_enabled(cmd->ns))
                        return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_CMD_SEQ_ERROR,
                                           NVME_SQE_OFF_CDW(12), 0);
                return NVME_PARSE_DONE;
        }
        /* 1Eh: NOET event types in the data, enabled (FDPEE) or disabled for handle PHNDL. */
        unsigned noet = (cdw11 >> 16) & 0xff;
        uint32_t sgl = (uint32_t)slate_get_le(cmd->sqe + 32, 4);
        uint32_t len = sgl >= noet && sgl <= 256 ? sgl : noet;
        if (noet == 0)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11) + 2);
        if (!nvme_xfer(cmd, len, true))
                return NVME_PARSE_DONE;
        uint32_t nsid = nvme_nsid(cmd);
        if (nsid == 0 || nsid > NVME_MAX_NSID ||
            !(cmd->ns = nvme_ns_lookup(cmd->queue->ctrl->subsys, nsid)))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS,
                                   offsetof(struct nvme_sqe, nsid), -1);
        if (!nvme_fdp_enabled(cmd->ns))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_FDP_DISABLED, NVME_LOC_NONE, -1);
        if ((cdw11 & 0xffff) >= nvme_fdp_nruh(cmd->ns))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_PLACEMENT_HANDLE,
                                   NVME_SQE_OFF_CDW(11), -1);
        return NVME_PARSE_EXEC; /* the event types arrive before exec */
}

void nvme_fdp_set_events_exec(struct nvme_cmd *cmd)
{
        nvme_fdp_set_events_do(cmd);
        nvme_cmd_complete_deferred(cmd);
}

void nvme_fdp_set_events_do(struct nvme_cmd *cmd)
{
        struct nvme_subsys *s = cmd->queue->ctrl->subsys;
        uint32_t cdw11 = nvme_cdw(cmd, 11), nsid = nvme_nsid(cmd);
        uint16_t ph = cdw11 & 0xffff;
        unsigned noet = (cdw11 >> 16) & 0xff;
        bool on = nvme_cdw(cmd, 12) & 1;
        uint8_t mask = 0;
        for (unsigned i = 0; i < noet; i++) {
                int b = ev_bit(cmd->buf[i]);
                if (b < 0) { /* an event type we do not support: nothing changes */
                        nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD, NVME_LOC_NONE,
                                    -1);
                        return;
                }
                mask |= (uint8_t)(1u << b);
        }
        if (on)
                atomic_fetch_and(&s->fdp_ev_off[nsid][ph], (uint8_t)~mask);
        else
                atomic_fetch_or(&s->fdp_ev_off[nsid][ph], mask);
        nvme_set_status(cmd, 0, 0, false);
}

/* ---- I/O Management Receive (12h) and Send (1Dh) ---- */

static bool fdp_io_ns(struct nvme_cmd *cmd)
{
        cmd->ns = nvme_ns_lookup(cmd->queue->ctrl->subsys, nvme_nsid(cmd));
        if (!cmd->ns) {
                nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
                return false;
        }
        if (!nvme_fdp_enabled(cmd->ns)) {
                nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_FDP_DISABLED, NVME_LOC_NONE, -1);
                return false;
        }
        return true;
}

enum nvme_parse_result nvme_io_mgmt_recv_parse(struct nvme_cmd *cmd)
{
        uint32_t cdw10 = nvme_cdw(cmd, 10);
        uint8_t mo = cdw10 & 0xff;
        uint64_t len = ((uint64_t)nvme_cdw(cmd, 11) + 1) * 4;
        if (mo != NVME_IOMR_MO_RUH_STATUS && mo != 0)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10));
        if (len > CORE_MAX_TRANSFER_BYTES)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(11));
        if (!fdp_io_ns(cmd) || !nvme_xfer(cmd, (uint32_t)len, false))
                return NVME_PARSE_DONE;
        memset(cmd->buf, 0, len);
        if (mo == 0) /* No Action */
                return NVME_PARSE_DONE;
        unsigned nruh = nvme_fdp_nruh(cmd->ns);
        struct core_flash_info fi;
        core_flash_info(cmd->ns, &fi);
        uint8_t page[sizeof(struct nvme_fdp_ruh_status) +
                     NVME_FDP_NRUH * sizeof(struct nvme_fdp_ruh_status_desc)];
        memset(page, 0, sizeof(page));
        put_le16(&((struct nvme_fdp_ruh_status *)page)->nruhsd, (uint16_t)nruh);
        for (unsigned i = 0; i < nruh; i++) {
                struct nvme_fdp_ruh_status_desc *d =
                    (void *)(page + sizeof(struct nvme_fdp_ruh_status) + i * sizeof(*d));
                uint16_t pl = core_placement_find(cmd->ns, CORE_PL_FDP_RUH, i);
                /* A handle never written has a whole, empty reclaim unit waiting. */
                uint64_t rem = pl ? core_flash_ru_remaining(cmd->ns, pl) : fi.erase_block;
                put_le16(&d->pid, (uint16_t)i);
                put_le16(&d->ruhid, (uint16_t)i);
                put_le64(&d->ruamw, rem >> cmd->ns->block_shift);
        }
        nvme_copy_window(cmd->buf, (uint32_t)len, 0, page, 0,
                         (uint32_t)(sizeof(struct nvme_fdp_ruh_status) +
                                    nruh * sizeof(struct nvme_fdp_ruh_status_desc)));
        return NVME_PARSE_DONE;
}

/*
 * Reclaim Unit Handle Update: handle ph goes on in a new, empty reclaim
 * unit.  The core closes a placement's open erase block when its last
 * reference goes, so the handle's placement id is released and taken again
 * (its per-placement byte count starts over; the model's totals do not).
 * A reclaim unit left partly written is a host event 00h.
 */
static void ruh_update(struct nvme_cmd *cmd, uint16_t ph)
{
        struct nvme_subsys *s = cmd->queue->ctrl->subsys;
        uint32_t nsid = nvme_nsid(cmd);
        struct core_flash_info fi;
        core_flash_info(cmd->ns, &fi);
        pthread_mutex_lock(&s->fdp_lock);
        uint16_t id = core_placement_find(cmd->ns, CORE_PL_FDP_RUH, ph);
        uint64_t rem = id ? core_flash_ru_remaining(cmd->ns, id) : 0;
        if (id) {
                core_placement_put(cmd->ns, id);
                if (core_placement_get(cmd->ns, CORE_PL_FDP_RUH, ph, &id))
                        id = 0;
        }
        pthread_mutex_unlock(&s->fdp_lock);
        if (rem && rem < fi.erase_block &&
            ev_enabled(s, nsid, ph, NVME_FDP_EVT_RU_NOT_FULLY_WRITTEN))
                host_event(s, nsid, NVME_FDP_EVT_RU_NOT_FULLY_WRITTEN, ph, (uint8_t)ph);
}

enum nvme_parse_result nvme_io_mgmt_send_parse(struct nvme_cmd *cmd)
{
        uint32_t cdw10 = nvme_cdw(cmd, 10);
        uint8_t mo = cdw10 & 0xff;
        uint32_t npid = (cdw10 >> 16) + 1;
        if (mo != NVME_IOMS_MO_RUH_UPDATE && mo != 0)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10));
        if (!fdp_io_ns(cmd))
                return NVME_PARSE_DONE;
        if (mo == 0)
                return nvme_xfer(cmd, 0, true) ? NVME_PARSE_DONE : NVME_PARSE_DONE;
        if (npid > nvme_fdp_nruh(cmd->ns)) /* MAXPIDS + 1 */
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10) + 2);
        if (!nvme_xfer(cmd, npid * 2, true))
                return NVME_PARSE_DONE;
        return NVME_PARSE_EXEC; /* the PIDs arrive before exec */
}

void nvme_io_mgmt_send_exec(struct nvme_cmd *cmd)
{
        nvme_io_mgmt_send_do(cmd);
        nvme_cmd_complete_deferred(cmd);
}

void nvme_io_mgmt_send_do(struct nvme_cmd *cmd)
{
        uint32_t npid = (nvme_cdw(cmd, 10) >> 16) + 1;
        unsigned nruh = nvme_fdp_nruh(cmd->ns);
        for (uint32_t i = 0; i < npid; i++) {
                uint16_t pid = (uint16_t)slate_get_le(cmd->buf + 2 * i, 2);
                if (pid >= nruh) { /* nothing is updated */
                        nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_PLACEMENT_HANDLE,
                                    NVME_LOC_NONE, -1);
                        return;
                }
        }
        for (uint32_t i = 0; i < npid; i++)
                ruh_update(cmd, (uint16_t)slate_get_le(cmd->buf + 2 * i, 2));
        nvme_set_status(cmd, 0, 0, false);
}
