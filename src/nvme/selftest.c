/*
 * Device Self-test (NVMe Base 2.0 5.9, device self-test operations 8.11)
 * and the Device Self-test log page (06h, 5.16.1.7).  The test itself is
 * the block core's (core/selftest.c, the engine SCSI SEND DIAGNOSTIC also
 * starts): it really reads the medium of each namespace the operation
 * covers, a sample of it (short) or all of it (extended), and stops at
 * the first block it cannot read.
 *
 * One operation at a time per NVM subsystem (DSTO bit 0): NSID 1..n tests
 * that namespace, FFFFFFFFh every namespace attached, one after another,
 * NSID 0h none (the controller alone: nothing to read, it passes at once).
 * The command completes once the operation started; Self-test Code Fh
 * aborts it.  The log is the subsystem's (every controller sees the same
 * one), the last 20 operations newest first; a failure names the
 * namespace and the first LBA that failed, with the read's status.  Not
 * persisted (a restart of slated clears it).
 *
 * A namespace whose self-test was started over SCSI is busy: Device
 * Self-test In Progress, as for one of our own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/selftest.h"
#include "nvme/internal.h"

#define STC_SHORT    0x1
#define STC_EXTENDED 0x2
#define STC_ABORT    0xf

void nvme_dst_init(struct nvme_dst *d)
{
        memset(d, 0, sizeof(*d));
        pthread_mutex_init(&d->lock, NULL);
        core_selftest_log_init(&d->log);
}

void nvme_dst_fini(struct nvme_dst *d)
{
        core_selftest_log_fini(&d->log);
        pthread_mutex_destroy(&d->lock);
}

static void record(struct nvme_subsys *s, const struct core_selftest_entry *e)
{
        core_selftest_log_add(&s->dst.log, e);
}

static void next(struct nvme_subsys *s);

/* The core's outcome for one namespace, on the reactor the operation runs on. */
static void ns_done(void *arg, const struct core_selftest_outcome *o)
{
        struct nvme_subsys *s = arg;
        struct nvme_dst *d = &s->dst;
        pthread_mutex_lock(&d->lock);
        uint32_t nsid = d->nsids[d->cur];
        d->cur_ns = NULL;
        d->done++;
        pthread_mutex_unlock(&d->lock);
        if (o->result != CORE_STR_OK) {
                /* A failure or an abort ends the whole operation. */
                struct core_selftest_entry e = {.kind = d->kind,
                                                .background = true,
                                                .poh = core_power_on_hours(),
                                                .nsid = o->result == CORE_STR_FAILED ? nsid : 0,
                                                .o = *o};
                record(s, &e);
                pthread_mutex_lock(&d->lock);
                d->running = false;
                pthread_mutex_unlock(&d->lock);
                nvme_subsys_release(s);
                return;
        }
        pthread_mutex_lock(&d->lock);
        d->cur++;
        pthread_mutex_unlock(&d->lock);
        next(s);
}

/* Start the next namespace of the operation, or record its success. */
static void next(struct nvme_subsys *s)
{
        struct nvme_dst *d = &s->dst;
        for (;;) {
                pthread_mutex_lock(&d->lock);
                if (d->cur >= d->n || d->abort) {
                        enum core_selftest_result r =
                            d->abort ? (enum core_selftest_result)d->abort : CORE_STR_OK;
                        d->running = false;
                        pthread_mutex_unlock(&d->lock);
                        struct core_selftest_entry e = {
                            .kind = d->kind, .background = true, .poh = core_power_on_hours()};
                        e.o.result = r;
                        record(s, &e);
                        nvme_subsys_release(s);
                        return;
                }
                uint32_t nsid = d->nsids[d->cur];
                pthread_mutex_unlock(&d->lock);
                struct core_ns *ns = nvme_ns_lookup(s, nsid);
                if (!ns) { /* detached meanwhile: nothing of it to test */
                        pthread_mutex_lock(&d->lock);
                        d->cur++;
                        pthread_mutex_unlock(&d->lock);
                        continue;
                }
                pthread_mutex_lock(&d->lock);
                d->cur_ns = ns;
                pthread_mutex_unlock(&d->lock);
                int rc = core_selftest_start(ns, d->kind, true, false, d->reactor, ns_done, s);
                core_ns_put(ns); /* the engine holds its own reference */
                if (rc == 0)
                        return;
                pthread_mutex_lock(&d->lock);
                d->cur_ns = NULL;
                pthread_mutex_unlock(&d->lock);
                /* Busy (a SCSI self-test started meanwhile) or no memory: the operation ends. */
                struct core_selftest_outcome o = {.result = rc == -EBUSY ? CORE_STR_ABORTED_OTHER
                                                                         : CORE_STR_ERROR};
                struct core_selftest_entry e = {
                    .kind = d->kind, .background = true, .poh = core_power_on_hours(), .o = o};
                record(s, &e);
                pthread_mutex_lock(&d->lock);
                d->running = false;
                pthread_mutex_unlock(&d->lock);
                nvme_subsys_release(s);
                return;
        }
}

enum nvme_parse_result nvme_dst_parse(struct nvme_cmd *cmd)
{
        struct nvme_subsys *s = cmd->queue->ctrl->subsys;
        uint32_t cdw10 = nvme_cdw(cmd, 10), nsid = nvme_nsid(cmd);
        uint8_t stc = cdw10 & 0xf;

        if (cdw10 & ~0xfu)
                return nvme_invalid_field(cmd, NVME_SQE_OFF_CDW(10));
        if (stc != STC_SHORT && stc != STC_EXTENDED && stc != STC_ABORT)
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_FIELD,
                                   NVME_SQE_OFF_CDW(10), 0);
        if (nsid && nsid != 0xffffffffu && !nvme_ns_active(s, nsid))
                return nvme_reject(cmd, NVME_SCT_GENERIC, NVME_SC_INVALID_NS, 4, -1);
        return NVME_PARSE_EXEC;
}

void nvme_dst_exec(struct nvme_cmd *cmd)
{
        struct nvme_ctrl *ctrl = cmd->queue ? cmd->queue->ctrl : NULL;
        uint32_t nsid = nvme_nsid(cmd);
        uint8_t stc = nvme_cdw(cmd, 10) & 0xf;

        if (!ctrl) {
                nvme_status_from_core(cmd, CORE_E_ABORTED);
                nvme_cmd_complete_deferred(cmd);
                return;
        }
        struct nvme_subsys *s = ctrl->subsys;
        struct nvme_dst *d = &s->dst;

        if (stc == STC_ABORT) {
                /* 5.9: aborting when none is in progress is not an error. */
                pthread_mutex_lock(&d->lock);
                if (d->running) {
                        d->abort = CORE_STR_ABORTED_CMD;
                        if (d->cur_ns)
                                core_selftest_abort(d->cur_ns, CORE_STR_ABORTED_CMD);
                }
                pthread_mutex_unlock(&d->lock);
                nvme_cmd_complete_deferred(cmd);
                return;
        }
        pthread_mutex_lock(&d->lock);
        if (d->running) {
                pthread_mutex_unlock(&d->lock);
                nvme_set_status(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_DST_IN_PROGRESS, true);
                nvme_cmd_complete_deferred(cmd);
                return;
        }
        d->n = 0;
        for (uint32_t i = 1; i <= NVME_MAX_NSID; i++)
                if ((nsid == 0xffffffffu && nvme_ns_active(s, i)) || i == nsid)
                        d->nsids[d->n++] = i;
        /* A namespace busy with a SCSI self-test: in progress already. */
        for (unsigned i = 0; i < d->n; i++) {
                struct core_ns *ns = nvme_ns_lookup(s, d->nsids[i]);
                bool busy = ns && core_selftest_running(ns, NULL, NULL, NULL);
                if (ns)
                        core_ns_put(ns);
                if (busy) {
                        pthread_mutex_unlock(&d->lock);
                        nvme_set_status(cmd, NVME_SCT_CMD_SPECIFIC, NVME_SC_DST_IN_PROGRESS, true);
                        nvme_cmd_complete_deferred(cmd);
                        return;
                }
        }
        d->running = true;
        d->kind = stc == STC_SHORT ? CORE_ST_SHORT : CORE_ST_EXTENDED;
        d->cur = 0;
        d->done = 0;
        d->abort = 0;
        d->cur_ns = NULL;
        d->reactor = cmd->reactor;
        pthread_mutex_unlock(&d->lock);
        nvme_subsys_hold(s);
        nvme_cmd_complete_deferred(cmd);
        next(s);
}

/* NVMe Base 2.0 fig. 210: Self-test Result from the core's outcome. */
static uint8_t result_code(const struct core_selftest_outcome *o)
{
        switch (o->result) {
        case CORE_STR_OK:
                return 0x0;
        case CORE_STR_ABORTED_CMD:
                return 0x1;
        case CORE_STR_ABORTED_RESET:
                return 0x2;
        case CORE_STR_ABORTED_REMOVED:
                return 0x3;
        case CORE_STR_ERROR:
                return 0x5;
        case CORE_STR_FAILED:
                return 0x7; /* failed segment: SEGMENT NUMBER says which */
        case CORE_STR_ABORTED_SANITIZE:
                return 0x9;
        default:
                return 0x8; /* aborted for an unknown reason */
        }
}

void nvme_dst_log(struct nvme_ctrl *ctrl, uint8_t *p)
{
        struct nvme_subsys *s = ctrl->subsys;
        struct nvme_dst *d = &s->dst;
        struct core_selftest_entry e[CORE_SELFTEST_LOG_MAX];

        memset(p, 0, NVME_DST_LOG_SIZE);
        pthread_mutex_lock(&d->lock);
        if (d->running) {
                unsigned pct = 0;
                if (d->cur_ns)
                        core_selftest_running(d->cur_ns, NULL, NULL, &pct);
                p[0] = d->kind == CORE_ST_SHORT ? STC_SHORT : STC_EXTENDED;
                /* Whole namespaces done plus the share of the current one. */
                p[1] = (uint8_t)(d->n ? (d->done * 100u + pct) / d->n : 0);
                if (p[1] > 99)
                        p[1] = 99;
        }
        pthread_mutex_unlock(&d->lock);
        unsigned n = core_selftest_log_read(&d->log, e);
        for (unsigned i = n; i < CORE_SELFTEST_LOG_MAX; i++)
                p[4 + 28 * i] = 0x0f; /* Self-test Result Fh: entry not used */
        for (unsigned i = 0; i < n; i++) {
                uint8_t *q = p + 4 + 28 * i;
                q[0] = (uint8_t)((e[i].kind == CORE_ST_SHORT ? STC_SHORT : STC_EXTENDED) << 4 |
                                 result_code(&e[i].o));
                if (e[i].o.result == CORE_STR_FAILED) {
                        const struct nvme_status_map *m = nvme_status_map(e[i].o.status);
                        q[1] = e[i].o.segment;
                        q[2] = 0x0f; /* NSID, FLBA, SCT and SC valid */
                        slate_put_le(q + 12, 4, e[i].nsid);
                        slate_put_le(q + 16, 8, e[i].o.fail_lba);
                        q[24] = m->sct & 0x7;
                        q[25] = m->sc;
                }
                slate_put_le(q + 4, 8, e[i].poh);
        }
}
