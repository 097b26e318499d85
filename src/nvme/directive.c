/*
 * Directives (NVMe Base 2.0 5.8 Directive Receive, 5.9 Directive Send,
 * 8.7): the Identify directive (Return Parameters, Enable Directive) and
 * the Streams directive (Return Parameters, Get Status, Allocate
 * Resources, Release Identifier, Release Resources), and the stream side
 * of a Write with DTYPE 01h.  The Data Placement directive (DTYPE 02h) is
 * reported here and used by Writes, but it is Flexible Data Placement's
 * (fdp.c) and has no directive operations of its own.
 *
 * A stream is a core placement id (core/flash.h), kind NVME_STREAM, keyed
 * by (CNTLID, stream id): the core gives it its own open erase block in the
 * flash model and counts its bytes.  Our choices where the standard leaves
 * one:
 *   - stream resources are per controller (SSID = 0, SRNZID = 0): each
 *     controller has a pool of NVME_STREAMS_MSL streams (MSL); Allocate
 *     Resources takes NSA of them for one namespace (NSSA is what is left);
 *     a namespace without NSA opens streams from what is left of the pool;
 *   - the enable state is per controller too (controllers sharing a Host
 *     Identifier do not share it) and a Controller Level Reset disables it
 *     (SDIRCLR = 0);
 *   - up to NVME_STREAMS_NS namespaces per controller may have the Streams
 *     directive enabled at once (more: Stream Resource Allocation Failed);
 *   - a Write to a stream that is not open opens it; when the namespace's
 *     resources are all in use the stream open longest is released for it
 *     (8.7.3); when none are left at all, or the core's placement table is
 *     full, the Write is an ordinary Write;
 *   - Release Identifier of a stream that is not open succeeds and changes
 *     nothing;
 *   - the Streams directive cannot be enabled on a namespace whose
 *     endurance group has FDP enabled (Invalid Field, 8.7.3), nor FDP's
 *     Data Placement directive through Enable Directive (FDP is enabled
 *     per endurance group by feature 1Dh).
 *
 * Locking: ctrl->streams_lock guards ctrl->streams, held for a table scan
 * of at most NVME_STREAMS_NS x NVME_STREAMS_MSL entries (and a core
 * placement get/put when a stream opens or closes): a few microseconds on
 * the data path, only for Writes that name a stream.  Order: ctrl->lock
 * before streams_lock; the core's placement mutex after both.
 */
#include <errno.h>
#include <string.h>

#include "core/flash.h"
#include "nvme/internal.h"

#define DIR_OFF_DOPER (NVME_SQE_OFF_CDW(11))
#define DIR_OFF_DTYPE (NVME_SQE_OFF_CDW(11) + 1)
#define DIR_OFF_DSPEC (NVME_SQE_OFF_CDW(11) + 2)

/* ---- The per-controller stream table (under streams_lock) ---- */

static struct nvme_streams_ns *st_slot(struct nvme_ctrl *ctrl, uint32_t nsid)
{
        for (unsigned i = 0; i < NVME_STREAMS_NS; i++)
                if (ctrl->streams[i].nsid == nsid)
                        return &ctrl->streams[i];
        return NULL;
}

/* Resources of the pool given to namespaces (NSA), and open streams of those without. */
static unsigned st_allocated(const struct nvme_ctrl *ctrl)
{
        unsigned n = 0;
        for (unsigned i = 0; i < NVME_STREAMS_NS; i++)
                if (ctrl->streams[i].nsid)
                        n += ctrl->streams[i].nsa;
        return n;
}
static unsigned st_shared_open(const struct nvme_ctrl *ctrl)
{
        unsigned n = 0;
        for (unsigned i = 0; i < NVME_STREAMS_NS; i++)
                if (ctrl->streams[i].nsid && !ctrl->streams[i].nsa)
                        n += ctrl->streams[i].nopen;
        return n;
}

/* Close stream index k of slot s (its placement id goes back to the core). */
static void st_close(struct nvme_streams_ns *s, unsigned k)
{
        core_placement_put(s->ns, s->pl[k]);
        memmove(&s->sid[k], &s->sid[k + 1], (s->nopen - k - 1) * sizeof(s->sid[0]));
        memmove(&s->pl[k], &s->pl[k + 1], (s->nopen - k - 1) * sizeof(s->pl[0]));
        s->nopen--;
}

static void st_close_all(struct nvme_streams_ns *s)
{
        while (s->nopen)
                st_close(s, s->nopen - 1);
}

static void st_disable(struct nvme_streams_ns *s)
{
        st_close_all(s);
        core_ns_put(s->ns);
        memset(s, 0, sizeof(*s));
}

void nvme_streams_reset(struct nvme_ctrl *ctrl)
{
        pthread_mutex_lock(&ctrl->streams_lock);
        for (unsigned i = 0; i < NVME_STREAMS_NS; i++)
                if (ctrl->streams[i].nsid)
                        st_disable(&ctrl->streams[i]);
        pthread_mutex_unlock(&ctrl->streams_lock);
}

void nvme_streams_forget(struct nvme_ctrl *ctrl, uint32_t nsid)
{
        pthread_mutex_lock(&ctrl->streams_lock);
        struct nvme_streams_ns *s = st_slot(ctrl, nsid);
        if (s)
                st_disable(s);
        pthread_mutex_unlock(&ctrl->streams_lock);
}

bool nvme_streams_enabled(struct nvme_ctrl *ctrl, uint32_t nsid)
{
        pthread_mutex_lock(&ctrl->streams_lock);
        bool on = st_slot(ctrl, nsid) != NULL;
        pthread_mutex_unlock(&ctrl->streams_lock);
        return on;
}

/*
 * The placement id of stream sid for the Write cmd (namespace cmd->ns,
 * NSID nsid): 0 and *pl (0 = an ordinary Write: no resources left), or
 * -EINVAL when the Streams directive is not enabled for the namespace.
 */
int nvme_stream_placement(struct nvme_cmd *cmd, uint32_t nsid, uint16_t sid, uint16_t *pl)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        int rc = 0;
        *pl = 0;
        pthread_mutex_lock(&ctrl->streams_lock);
        struct nvme_streams_ns *s = st_slot(ctrl, nsid);
        if (!s || s->ns != cmd->ns) {
                rc = -EINVAL;
                goto out;
        }
        for (unsigned k = 0; k < s->nopen; k++) {
                if (s->sid[k] == sid) {
                        *pl = s->pl[k];
                        goto out;
                }
        }
        /* Open it: within NSA, or within what the namespaces with NSA left of the pool. */
        unsigned limit = s->nsa ? s->nsa : NVME_STREAMS_MSL - st_allocated(ctrl);
        if (limit == 0)
                goto out;
        unsigned used = s->nsa ? s->nopen : st_shared_open(ctrl);
        if (used >= limit) {
                if (!s->nopen)
                        goto out; /* the pool is in use by this host's other namespaces */
                st_close(s, 0);   /* the stream of this namespace open longest */
        }
        uint16_t id;
        if (core_placement_get(cmd->ns, CORE_PL_NVME_STREAM, CORE_PL_NVME_KEY(ctrl->cntlid, sid),
                               &id))
                goto out; /* the core's table is full (SCSI streams, FDP): ordinary Write */
        s->sid[s->nopen] = sid;
        s->pl[s->nopen++] = id;
        *pl = id;
out:
        pthread_mutex_unlock(&ctrl->streams_lock);
        return rc;
}

/* ---- Directive Receive ---- */

/* Identify Return Parameters (fig. 601): supported, enabled, persistent across resets. */
static void id_params(struct nvme_ctrl *ctrl, struct core_ns *ns, uint32_t nsid, uint8_t *p)
{
        p[0] = 1u << NVME_DIR_IDENTIFY | 1u << NVME_DIR_STREAMS;
        p[32] = 1u << NVME_DIR_IDENTIFY;
        if (nvme_fdp_enabled(ns)) {
                p[0] |= 1u << NVME_DIR_DATA_PLACEMENT;
                p[32] |= 1u << NVME_DIR_DATA_PLACEMENT;
                p[64] |= 1u << NVME_DIR_DATA_PLACEMENT; /* enabled by 1Dh, not by resets */
        }
        if (nvme_streams_enabled(ctrl, nsid))
                p[32] |= 1u << NVME_DIR_STREAMS;
}

/* Stream Write Size in blocks and Stream Granularity Size in SWS units (fig. 608). */
static void st_geometry(struct core_ns *ns, uint32_t *sws, uint16_t *sgs)
{
        struct core_flash_info fi;
        core_flash_info(ns, &fi);
        uint32_t gran = core_ns_dealloc_granularity(ns);
        *sws = gran ? gran : 1;
        *sgs = 1;
        if (fi.enabled) {
                /* The model's unit is the write granule, its erase block the stream granule. */
                *sws = fi.unit >> ns->block_shift ? fi.unit >> ns->block_shift : 1;
                uint64_t g = fi.erase_block / ((uint64_t)*sws << ns->block_shift);
                *sgs = g > 0xffff ? 0xffff : (g ? (uint16_t)g : 1);
        }
}

static void st_params(struct nvme_ctrl *ctrl, struct core_ns *ns, uint32_t nsid,
                      struct nvme_streams_params *sp)
{
        memset(sp, 0, sizeof(*sp));
        pthread_mutex_lock(&ctrl->streams_lock);
        put_le16(&sp->msl, NVME_STREAMS_MSL);
        put_le16(&sp->nssa, (uint16_t)(NVME_STREAMS_MSL - st_allocated(ctrl)));
        put_le16(&sp->nsso, (uint16_t)st_shared_open(ctrl));
        const struct nvme_streams_ns *s = ns ? st_slot(ctrl, nsid) : NULL;
        if (s) {
                put_le16(&sp->nsa, s->nsa);
                put_le16(&sp->nso, s->nopen);
        }
        pthread_mutex_unlock(&ctrl->streams_lock);
        if (ns) {
                uint32_t sws;
                uint16_t sgs;
                st_geometry(ns, &sws, &sgs);
                put_le32(&sp->sws, sws);
                put_le16(&sp->sgs, sgs);
        }
}

/* Get Status (fig. 609): OSC, then the open stream ids in increasing order. */
static void st_status(struct nvme_ctrl *ctrl, uint32_t nsid, uint8_t *p, uint32_t len)
{
        uint16_t ids[NVME_STREAMS_NS * NVME_STREAMS_MSL];
        unsigned n = 0;
        pthread_mutex_lock(&ctrl->streams_lock);
        for (unsigned i = 0; i < NVME_STREAMS_NS; i++) {
                const struct nvme_streams_ns *s = &ctrl->streams[i];
                /* FFFFFFFFh: the streams on the pool (namespaces without NSA). */
                if (!s->nsid || (nsid == 0xffffffffu ? s->nsa != 0 : s->nsid != nsid))
                        continue;
                for (unsigned k = 0; k < s->nopen; k++) {
                        bool dup = false;
                        for (unsigned j = 0; j < n; j++)
                                dup |= ids[j] == s->sid[k];
                        if (!dup)
                                ids[n++] = s->sid[k];
                }
        }
        pthread_mutex_unlock(&ctrl->streams_lock);
        for (unsigned i = 1; i < n; i++) /* insertion sort: at most a few dozen */
                for (unsigned j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
                        uint16_t t = ids[j];
                        ids[j] = ids[j - 1];
                        ids[j - 1] = t;
                }
        uint8_t tmp[2 + sizeof(ids)];
        slate_put_le(tmp, 2, n);
        for (unsigned i = 0; i < n; i++)
                slate_put_le(tmp + 2 + 2 * i, 2, ids[i]);
        memcpy(p, tmp, len < 2 + 2 * n ? len : 2 + 2 * n);
}

/* Allocate Resources: DW0 = NSA granted (0's not allowed: Stream Resource Allocation Failed). */
static enum nvme_parse_result st_allocate(struct nvme_cmd *cmd, uint32_t nsid, uint16_t nsr)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        pthread_mutex_lock(&ctrl->streams_lock);
        struct nvme_streams_ns *s = st_slot(ctrl, nsid);
        if (!s) {
                pthread_mutex_unlock(&ctrl->streams_lock);
                return nvme_invalid_field(cmd, DIR_OFF_DTYPE); /* Streams not enabled */
        }
        if (!s->nsa) { /* a different number needs Release Resources first: keep NSA */
                unsigned avail = NVME_STREAMS_MSL - st_allocated(ctrl);
                unsigned grant = nsr < avail ? nsr : avail;
                if (grant == 0) {
                        pthread_mutex_unlock(&ctrl->streams_lock);
                        return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_STREAM_ALLOC_FAILED,
                                           NVME_SQE_OFF_CDW(12), -1);
                }
                s->nsa = (uint16_t)grant;
                while (s->nopen > s->nsa)
                        st_close(s, 0);
        }
        nvme_cqe_dw0(cmd, s->nsa);
        pthread_mutex_unlock(&ctrl->streams_lock);
        return NVME_PARSE_DONE;
}

/* The namespace a directive names: cmd->ns (active NSID), or NULL with FFFFFFFFh when allowed. */
static bool dir_ns(struct nvme_cmd *cmd, bool all_ok)
{
        uint32_t nsid = nvme_nsid(cmd);
        if (nsid == 0xffffffffu) {
                if (!all_ok)
                        nvme_invalid_field(cmd, offsetof(struct nvme_sqe, nsid));
                return all_ok;
        }
        if (nsid == 0 || nsid > NVME_MAX_NSID ||
            !(cmd->ns = nvme_ns_lookup(cmd->queue->ctrl->subsys, nsid))) {
                nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS,
                            offsetof(struct nvme_sqe, nsid), -1);
                return false;
        }
        return true;
}

enum nvme_parse_result nvme_dir_recv_parse(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw11 = nvme_cdw(cmd, 11);
        uint8_t doper = cdw11 & 0xff, dtype = (cdw11 >> 8) & 0xff;
        uint64_t len = ((uint64_t)nvme_cdw(cmd, 10) + 1) * 4;
        uint32_t nsid = nvme_nsid(cmd);

        if (dtype == NVME_DIR_STREAMS && doper == NVME_DIR_RCV_ST_RESOURCE) {
                /* No data structure: DW0 carries NSA (NUMD is not used). */
                if (!nvme_xfer(cmd, 0, false) || !dir_ns(cmd, false))
                        return NVME_PARSE_DONE;
                return st_allocate(cmd, nsid, nvme_cdw(cmd, 12) & 0xffff);
        }
        if (len > CORE_MAX_TRANSFER_BYTES)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10));
        if (dtype == NVME_DIR_IDENTIFY) {
                if (doper != NVME_DIR_RCV_ID_PARAMS)
                        return nvme_invalid_field(cmd, DIR_OFF_DOPER);
                if (!dir_ns(cmd, false) || !nvme_xfer(cmd, (uint32_t)len, false))
                        return NVME_PARSE_DONE;
                uint8_t page[4096] = {0};
                id_params(ctrl, cmd->ns, nsid, page);
                memset(cmd->buf, 0, len);
                nvme_copy_window(cmd->buf, (uint32_t)len, 0, page, 0, sizeof(page));
                return NVME_PARSE_DONE;
        }
        if (dtype != NVME_DIR_STREAMS) /* Data Placement has no operations; others unsupported */
                return nvme_invalid_field(cmd, DIR_OFF_DTYPE);
        if (doper != NVME_DIR_RCV_ST_PARAMS && doper != NVME_DIR_RCV_ST_STATUS)
                return nvme_invalid_field(cmd, DIR_OFF_DOPER);
        if (!dir_ns(cmd, true) || !nvme_xfer(cmd, (uint32_t)len, false))
                return NVME_PARSE_DONE;
        memset(cmd->buf, 0, len);
        if (doper == NVME_DIR_RCV_ST_PARAMS) {
                struct nvme_streams_params sp;
                st_params(ctrl, cmd->ns, nsid, &sp);
                nvme_copy_window(cmd->buf, (uint32_t)len, 0, &sp, 0, sizeof(sp));
        } else {
                st_status(ctrl, nsid, cmd->buf, (uint32_t)len);
        }
        return NVME_PARSE_DONE;
}

/* ---- Directive Send ---- */

/* Enable or disable the Streams directive for one namespace (under streams_lock). */
static int st_enable_one(struct nvme_ctrl *ctrl, uint32_t nsid, struct core_ns *ns, bool on)
{
        struct nvme_streams_ns *s = st_slot(ctrl, nsid);
        if (!on) {
                if (s)
                        st_disable(s);
                return 0;
        }
        if (s)
                return 0;
        if (nvme_fdp_enabled(ns))
                return -EINVAL;
        s = st_slot(ctrl, 0);
        if (!s)
                return -ENOSPC;
        core_ns_get(ns);
        s->nsid = nsid;
        s->ns = ns;
        return 0;
}

static enum nvme_parse_result id_enable(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw12 = nvme_cdw(cmd, 12), nsid = nvme_nsid(cmd);
        uint8_t tdtype = (cdw12 >> 8) & 0xff;
        bool on = cdw12 & 1;

        if (tdtype != NVME_DIR_STREAMS) /* Identify: never; Data Placement: feature 1Dh */
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(12) + 1, -1);
        if (cdw12 & ~0xff01u)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(12));
        if (!dir_ns(cmd, true))
                return NVME_PARSE_DONE;
        int rc = 0;
        pthread_mutex_lock(&ctrl->streams_lock);
        if (cmd->ns) {
                rc = st_enable_one(ctrl, nsid, cmd->ns, on);
        } else { /* FFFFFFFFh: every active namespace */
                for (uint32_t i = 1; i <= NVME_MAX_NSID && !rc; i++) {
                        struct core_ns *ns = nvme_ns_lookup(ctrl->subsys, i);
                        if (!ns)
                                continue;
                        rc = st_enable_one(ctrl, i, ns, on);
                        if (rc == -EINVAL) /* FDP on that one: skipped */
                                rc = 0;
                        core_ns_put(ns);
                }
        }
        pthread_mutex_unlock(&ctrl->streams_lock);
        if (rc == -EINVAL) /* the endurance group has FDP enabled */
                return nvme_invalid_field(cmd, DIR_OFF_DOPER);
        if (rc)
                return nvme_reject(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_STREAM_ALLOC_FAILED,
                                   NVME_SQE_OFF_CDW(12), 0);
        return NVME_PARSE_DONE;
}

enum nvme_parse_result nvme_dir_send_parse(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue->ctrl;
        uint32_t cdw11 = nvme_cdw(cmd, 11), nsid = nvme_nsid(cmd);
        uint8_t doper = cdw11 & 0xff, dtype = (cdw11 >> 8) & 0xff;
        uint16_t dspec = cdw11 >> 16;

        /* None of our operations takes data (NUMD). */
        if (!nvme_xfer(cmd, 0, true))
                return NVME_PARSE_DONE;
        if (dtype == NVME_DIR_IDENTIFY) {
                if (doper != NVME_DIR_SND_ID_ENABLE)
                        return nvme_invalid_field(cmd, DIR_OFF_DOPER);
                return id_enable(cmd);
        }
        if (dtype != NVME_DIR_STREAMS)
                return nvme_invalid_field(cmd, DIR_OFF_DTYPE);
        if (doper != NVME_DIR_SND_ST_REL_ID && doper != NVME_DIR_SND_ST_REL_RSC)
                return nvme_invalid_field(cmd, DIR_OFF_DOPER);
        if (doper == NVME_DIR_SND_ST_REL_ID && dspec == 0)
                return nvme_invalid_field(cmd, DIR_OFF_DSPEC);
        if (!dir_ns(cmd, false))
                return NVME_PARSE_DONE;
        pthread_mutex_lock(&ctrl->streams_lock);
        struct nvme_streams_ns *s = st_slot(ctrl, nsid);
        if (!s) {
                pthread_mutex_unlock(&ctrl->streams_lock);
                return nvme_invalid_field(cmd, DIR_OFF_DTYPE); /* Streams not enabled */
        }
        if (doper == NVME_DIR_SND_ST_REL_ID) {
                for (unsigned k = 0; k < s->nopen; k++)
                        if (s->sid[k] == dspec) {
                                st_close(s, k);
                                break;
                        }
        } else {
                st_close_all(s);
                s->nsa = 0;
        }
        pthread_mutex_unlock(&ctrl->streams_lock);
        return NVME_PARSE_DONE;
}
