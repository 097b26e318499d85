/*
 * SCSI streams and I/O advice hints (SBC-4 4.32 streams, 5.27 STREAM
 * CONTROL, 5.8 GET STREAM STATUS, 5.52/5.53 WRITE STREAM(16)/(32); SBC-5
 * "constrained streams with data lifetimes": permanent streams; SBC-4
 * 6.5.7 the IO Advice Hints Grouping mode page 0Ah/05h and the GROUP
 * NUMBER field; SPC-5 7.3.7 the Group Statistics and Performance (n) log
 * pages 19h/01h-1Fh).
 *
 * Streams are placements in the core (core/flash.h): a stream opened by
 * STREAM CONTROL is core placement (CORE_PL_SCSI_STREAM, stream id); the
 * permanent streams 1..SCSI_STREAMS_PERM are (CORE_PL_SCSI_GROUP, n) and a
 * write with GROUP NUMBER n (1..SCSI_STREAMS_PERM) is a write to permanent
 * stream n, as Linux 6.9+ sends it for a file whose write-lifetime hint is
 * n (sd_group_number()).  The core's placement table is the one record of
 * which streams are open, for every I_T nexus and for the statistics; this
 * file only translates.  Access hints come from the logical block markup
 * descriptor of the group's IO advice hints group descriptor (changeable
 * with MODE SELECT) and from a permanent stream's relative lifetime; they
 * travel in core_req.hints.
 *
 * Our choices where the standards leave one:
 * - Stream ids 1..SCSI_STREAMS_PERM are permanent (relative lifetime = id,
 *   in the order of the Linux write-lifetime hints NONE=1 .. EXTREME=5);
 *   STREAM CONTROL OPEN assigns the lowest free id above them.
 * - Descriptor 0 of the grouping page has ST_ENBLE set too: Linux counts
 *   permanent streams from descriptor 0 (sd_read_io_hints) and would see
 *   none otherwise; GROUP NUMBER 0 stays "no group" (the shared default
 *   placement).  RSCS=1 with STREAM CONTROL also supported.
 * - Per-group statistics count a command when it is accepted (parsed),
 *   and its blocks as the CDB asks; the processing-interval fields are 0
 *   (not measured).  IC_ENABLE (changeable, set by default for groups
 *   1..31) decides whether a group is counted.
 * - The grouping page is not saved (SP=1 refused); it starts from the
 *   defaults when slated starts.
 */
#include <errno.h>
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"
#include "core/flash.h"

/* Group descriptor byte 0 */
#define GD_MODE_MASK 0xc0 /* IO ADVICE HINTS MODE: 00b valid, 01b invalid */
#define GD_ST_ENBLE  0x04
#define GD_CS_ENBLE  0x02
#define GD_IC_ENABLE 0x01

unsigned scsi_streams_max(const struct core_ns *ns)
{
        unsigned m = core_placement_max(ns);
        return m < SCSI_STREAMS_MAX ? m : SCSI_STREAMS_MAX;
}

unsigned scsi_streams_perm(const struct core_ns *ns)
{
        unsigned m = scsi_streams_max(ns);
        return m < SCSI_STREAMS_PERM ? m : SCSI_STREAMS_PERM;
}

/* The access hints the logical block markup descriptor (type 0: access patterns) says. */
uint8_t scsi_lbm_hints(const uint8_t *lbm)
{
        uint8_t h = 0;
        if (lbm[0] & 0x0f) /* LBM DESCRIPTOR TYPE other than access patterns */
                return 0;
        uint8_t ov = lbm[1] >> 6, rw = (lbm[1] >> 4) & 3, wseq = (lbm[1] >> 2) & 3,
                rseq = lbm[1] & 3;
        if (ov == 1)
                h |= CORE_HINT_READ_RARE | CORE_HINT_WRITE_RARE;
        if (rw == 1 || (ov == 2 && rw != 2))
                h |= CORE_HINT_READ_FREQ;
        if (rw == 2 || (ov == 2 && rw != 1))
                h |= CORE_HINT_WRITE_FREQ;
        if (wseq == 2 || rseq == 2)
                h |= CORE_HINT_SEQUENTIAL;
        if (wseq == 1 || rseq == 1)
                h |= CORE_HINT_RANDOM;
        return h;
}

/* A permanent stream's lifetime as a hint: 2 short (rewritten soon), 4 and 5 long. */
static uint8_t lifetime_hints(unsigned id)
{
        if (id == 2)
                return CORE_HINT_WRITE_FREQ;
        if (id == 4 || id == 5)
                return CORE_HINT_WRITE_RARE;
        return 0;
}

/* Recompute group g's hints from its descriptor (after init or MODE SELECT). */
static void group_refresh(struct scsi_lu_state *st, unsigned g, unsigned perm)
{
        const uint8_t *d = st->group_desc[g];
        uint8_t h = 0;
        if ((d[0] & GD_MODE_MASK) == 0) {
                h = scsi_lbm_hints(d + 4);
                if ((d[0] & GD_ST_ENBLE) && g >= 1 && g <= perm)
                        h |= lifetime_hints(g);
        }
        atomic_store_explicit(&st->group_hints[g], h, memory_order_relaxed);
}

void scsi_streams_lu_init(struct core_ns *ns, struct scsi_lu_state *st, bool placements)
{
        unsigned perm = scsi_streams_perm(ns);
        pthread_mutex_lock(&st->streams_lock);
        if (st->streams_ready) {
                pthread_mutex_unlock(&st->streams_lock);
                return;
        }
        for (unsigned g = 0; g < SCSI_GROUPS; g++) {
                uint8_t *d = st->group_desc[g];
                memset(d, 0, SCSI_GROUP_DESC_LEN);
                if (g <= perm && perm)
                        d[0] |= GD_ST_ENBLE;
                if (g >= 1 && g <= SCSI_GROUP_STATS_MAX)
                        d[0] |= GD_IC_ENABLE;
                group_refresh(st, g, perm);
        }
        /*
         * The permanent streams are always open: take their placement ids
         * now, for good (a GROUP NUMBER write only looks them up).  When
         * the namespace's ids are exhausted a permanent stream writes
         * without one (the shared default), which is still correct.
         */
        for (unsigned id = 1; placements && id <= perm; id++) {
                uint16_t pid;
                if (core_placement_get(ns, CORE_PL_SCSI_GROUP, id, &pid) == 0)
                        st->perm_held |= 1u << id;
        }
        st->streams_ready = true;
        pthread_mutex_unlock(&st->streams_lock);
}

/* The placement id of an open stream (0 and false when it is not open). */
static bool stream_placement(const struct core_ns *ns, unsigned id, uint16_t *pid)
{
        if (id >= 1 && id <= scsi_streams_perm(ns)) {
                *pid = core_placement_find(ns, CORE_PL_SCSI_GROUP, id);
                return true; /* permanent: always open, even without a placement id */
        }
        *pid = core_placement_find(ns, CORE_PL_SCSI_STREAM, id);
        return *pid != 0;
}

void scsi_group_tag(struct scsi_cmd *cmd, uint8_t group, bool write)
{
        struct core_ns *ns = cmd->ns;
        struct scsi_lu_state *st = ns->scsi_state;
        uint16_t pid = 0;

        group &= 0x3f;
        if (!st)
                return;
        cmd->req.hints |= atomic_load_explicit(&st->group_hints[group], memory_order_relaxed);
        uint8_t d0 = __atomic_load_n(&st->group_desc[group][0], __ATOMIC_RELAXED);
        if (write && group && (d0 & GD_ST_ENBLE) && group <= scsi_streams_perm(ns) &&
            !cmd->req.placement) {
                stream_placement(ns, group, &pid);
                cmd->req.placement = pid;
        }
        if (group >= 1 && group <= SCSI_GROUP_STATS_MAX && (d0 & GD_IC_ENABLE)) {
                struct scsi_group_stats *gs = &st->group_stats[group - 1];
                bool fua = cmd->req.flags & CORE_REQ_FUA;
                if (write) {
                        atomic_fetch_add_explicit(&gs->write_cmds, 1, memory_order_relaxed);
                        atomic_fetch_add_explicit(&gs->blocks_received, cmd->req.nlb,
                                                  memory_order_relaxed);
                        if (fua)
                                atomic_fetch_add_explicit(&gs->write_fua, 1, memory_order_relaxed);
                } else {
                        atomic_fetch_add_explicit(&gs->read_cmds, 1, memory_order_relaxed);
                        atomic_fetch_add_explicit(&gs->blocks_transmitted, cmd->req.nlb,
                                                  memory_order_relaxed);
                        if (fua)
                                atomic_fetch_add_explicit(&gs->read_fua, 1, memory_order_relaxed);
                }
        }
}

/* ---- WRITE STREAM (16) / (32) ---- */

enum scsi_parse_result scsi_sbc_write_stream(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        bool v32 = c[0] == SCSI_OP_VARIABLE_LENGTH;
        struct core_ns *ns = cmd->ns;
        uint8_t flags = v32 ? c[10] : c[1], flags_off = v32 ? 10 : 1;
        uint8_t grp_off = v32 ? 6 : 14, id_off = v32 ? 4 : 10, len_off = v32 ? 28 : 12;
        uint64_t lba = slate_be64(c + (v32 ? 12 : 2));
        uint32_t nlb = v32 ? slate_be32(c + 28) : slate_be16(c + 12);
        unsigned id = slate_be16(c + id_off);
        uint32_t bs = ns->block_size;
        uint64_t bytes = (uint64_t)nlb * bs;
        uint16_t pid;

        cmd->xfer_len = bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)bytes;
        if (v32 && c[7] != 0x18) { /* ADDITIONAL CDB LENGTH */
                scsi_sense_invalid_field(cmd, true, 7, 7);
                return SCSI_PARSE_DONE;
        }
        if (flags & 0xe0) { /* WRPROTECT: no protection information on this LU */
                scsi_sense_invalid_field(cmd, true, flags_off, 7);
                return SCSI_PARSE_DONE;
        }
        if (flags & 0x07) {
                scsi_sense_invalid_field(cmd, true, flags_off, 31 - __builtin_clz(flags & 0x07));
                return SCSI_PARSE_DONE;
        }
        if (c[grp_off] & 0xc0) {
                scsi_sense_invalid_field(cmd, true, grp_off, 7);
                return SCSI_PARSE_DONE;
        }
        /* STR_ID 0 is reserved; above MAXIMUM NUMBER OF STREAMS no stream can exist. */
        if (id == 0 || id > scsi_streams_max(ns)) {
                scsi_sense_invalid_field(cmd, true, id_off, 7);
                return SCSI_PARSE_DONE;
        }
        if (!core_ns_range_ok(ns, lba, nlb)) {
                scsi_status_from_core(cmd, CORE_E_LBA_RANGE, 0, false);
                core_stats_reject(ns, cmd->nexus ? cmd->nexus->host : NULL, CORE_OP_WRITE,
                                  CORE_E_LBA_RANGE);
                return SCSI_PARSE_DONE;
        }
        if (bytes > CORE_MAX_TRANSFER_BYTES ||
            (bytes < cmd->edtl ? bytes : cmd->edtl) > cmd->buf_len) {
                scsi_sense_invalid_field(cmd, true, len_off, 7);
                return SCSI_PARSE_DONE;
        }
        if (!scsi_check_state(cmd, CORE_CHK_WRITABLE))
                return SCSI_PARSE_DONE;
        /* SBC-4 5.52: a stream that is not open is STREAM NOT OPEN. */
        if (!stream_placement(ns, id, &pid)) {
                scsi_sense_field(cmd, 0x2c, 0x0f, true, id_off, 7);
                return SCSI_PARSE_DONE;
        }
        if ((uint64_t)cmd->edtl < bytes)
                nlb = cmd->edtl / bs;
        if (!nlb) {
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        core_req_init(&cmd->req, ns, CORE_OP_WRITE, lba, nlb,
                      ((flags & 0x08) ? CORE_REQ_FUA : 0) | ((flags & 0x10) ? CORE_REQ_DPO : 0),
                      cmd->reactor, scsi_sbc_req_done, cmd);
        cmd->req.nexus = cmd->nexus ? &cmd->nexus->id : NULL;
        cmd->req.host = cmd->nexus ? cmd->nexus->host : NULL;
        cmd->req.placement = pid;
        cmd->req.hints |= lifetime_hints(id <= scsi_streams_perm(ns) ? id : 0);
        cmd->lba = lba;
        cmd->nlb = nlb;
        scsi_group_tag(cmd, c[grp_off], true);
        cmd->req.iov[0].iov_base = cmd->buf;
        cmd->req.iov[0].iov_len = (size_t)nlb * bs;
        cmd->req.iovcnt = 1;
        cmd->data_out_len = nlb * bs;
        return SCSI_PARSE_EXEC;
}

/* ---- STREAM CONTROL / GET STREAM STATUS ---- */

/* Open: the lowest free stream id above the permanent ones; 0 and *id, or -errno. */
static int stream_open(struct core_ns *ns, struct scsi_lu_state *st, unsigned *id)
{
        unsigned max = scsi_streams_max(ns), perm = scsi_streams_perm(ns);
        int rc = -ENOSPC;
        pthread_mutex_lock(&st->streams_lock);
        for (unsigned s = perm + 1; s <= max; s++) {
                uint16_t pid;
                if (core_placement_find(ns, CORE_PL_SCSI_STREAM, s))
                        continue;
                rc = core_placement_get(ns, CORE_PL_SCSI_STREAM, s, &pid);
                if (rc == 0)
                        *id = s;
                break;
        }
        pthread_mutex_unlock(&st->streams_lock);
        return rc;
}

static int stream_close(struct core_ns *ns, struct scsi_lu_state *st, unsigned id)
{
        int rc = -ENOENT;
        pthread_mutex_lock(&st->streams_lock);
        uint16_t pid = core_placement_find(ns, CORE_PL_SCSI_STREAM, id);
        if (pid) {
                core_placement_put(ns, pid);
                rc = 0;
        }
        pthread_mutex_unlock(&st->streams_lock);
        return rc;
}

enum scsi_parse_result scsi_stream_control(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        struct core_ns *ns = cmd->ns;
        struct scsi_lu_state *st = ns->scsi_state;
        uint8_t ctl = (c[1] >> 5) & 3;
        unsigned id = slate_be16(c + 4);
        uint32_t alloc = slate_be32(c + 10);
        uint8_t *b = cmd->buf;

        cmd->xfer_len = alloc;
        if (c[1] & 0x80) {
                scsi_sense_invalid_field(cmd, true, 1, 7);
                return SCSI_PARSE_DONE;
        }
        if (ctl == 1) { /* OPEN: the device server assigns the id */
                unsigned nid = 0;
                if (alloc < 6) {
                        /* No room for ASSIGNED_STR_ID: the stream would be opened unseen. */
                        scsi_sense_invalid_field(cmd, true, 10, 7);
                        return SCSI_PARSE_DONE;
                }
                int rc = stream_open(ns, st, &nid);
                if (rc) {
                        /* No stream id or no placement id left. */
                        scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x55, 0x10);
                        return SCSI_PARSE_DONE;
                }
                memset(b, 0, 8);
                b[0] = 7; /* PARAMETER LENGTH: the bytes that follow */
                slate_put_be(b + 4, 2, nid);
                scsi_cmd_data_in(cmd, 8, alloc);
                return SCSI_PARSE_DONE;
        }
        if (ctl == 2) { /* CLOSE the stream STR_ID names */
                if (id >= 1 && id <= scsi_streams_perm(ns)) {
                        /* A permanent stream cannot be closed (SBC-5). */
                        scsi_sense_invalid_field(cmd, true, 4, 7);
                        return SCSI_PARSE_DONE;
                }
                if (id == 0 || id > scsi_streams_max(ns) || stream_close(ns, st, id)) {
                        scsi_sense_invalid_field(cmd, true, 4, 7);
                        return SCSI_PARSE_DONE;
                }
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        /* 00b and 11b are reserved. */
        scsi_sense_invalid_field(cmd, true, 1, 6);
        return SCSI_PARSE_DONE;
}

enum scsi_parse_result scsi_get_stream_status(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        struct core_ns *ns = cmd->ns;
        unsigned start = slate_be16(c + 4), max = scsi_streams_max(ns),
                 perm = scsi_streams_perm(ns);
        uint32_t alloc = slate_be32(c + 10), n = 8;
        uint16_t open = 0;
        uint8_t *b = cmd->buf;

        cmd->xfer_len = alloc;
        if (start > max) {
                scsi_sense_invalid_field(cmd, true, 4, 7);
                return SCSI_PARSE_DONE;
        }
        memset(b, 0, 8 + 8 * SCSI_STREAMS_MAX);
        for (unsigned id = 1; id <= max; id++) {
                uint16_t pid;
                if (!stream_placement(ns, id, &pid))
                        continue;
                open++;
                if (id < start)
                        continue;
                uint8_t *d = b + n;
                if (id <= perm) {
                        d[0] = 0x80;        /* PERM */
                        d[4] = (uint8_t)id; /* RELATIVE LIFETIME */
                }
                slate_put_be(d + 2, 2, id);
                n += 8;
        }
        slate_put_be(b, 4, n - 8); /* PARAMETER DATA LENGTH: the descriptors */
        slate_put_be(b + 6, 2, open);
        scsi_cmd_data_in(cmd, n, alloc);
        return SCSI_PARSE_DONE;
}

/* ---- VPD B7h: the stream fields ---- */

void scsi_streams_vpd_b7(const struct core_ns *ns, uint8_t *page)
{
        uint32_t opt = CORE_SMALL_TRANSFER_BYTES >> ns->block_shift;
        /* RSCS: permanent streams (GROUP NUMBER) are supported -- when there are any: a
         * flash model with too few spare erase blocks leaves no placement id for them. */
        page[5] = scsi_streams_perm(ns) ? 0x01 : 0;
        slate_put_be(page + 6, 2, scsi_streams_max(ns));
        /* OPTIMAL STREAM WRITE SIZE (blocks) and STREAM GRANULARITY SIZE (in those): the
         * flash model's erase block when there is one, else 1 MiB. */
        if (core_flash_enabled(ns)) {
                struct core_flash_info fi;
                core_flash_info(ns, &fi);
                if (fi.erase_block >> ns->block_shift)
                        opt = (uint32_t)(fi.erase_block >> ns->block_shift);
        }
        slate_put_be(page + 8, 2, opt > 0xffff ? 0xffff : opt);
        slate_put_be(page + 10, 4, 1);
}

/* ---- Mode page 0Ah/05h ---- */

void scsi_grouping_page_build(struct core_ns *ns, int pc, uint8_t *p)
{
        struct scsi_lu_state *st = ns->scsi_state;
        uint8_t *d = p + 16; /* 4-byte header, 12 reserved bytes */
        unsigned perm = scsi_streams_perm(ns);

        for (unsigned g = 0; g < SCSI_GROUPS; g++, d += SCSI_GROUP_DESC_LEN) {
                if (pc == 1) { /* changeable: the mode, CS_ENBLE, IC_ENABLE and the markup */
                        d[0] = GD_MODE_MASK | GD_CS_ENBLE | GD_IC_ENABLE;
                        d[4] = 0xbf;
                        d[5] = 0xff;
                        d[6] = 0xff;
                } else if (pc == 2 || !st || !st->streams_ready) { /* default */
                        d[0] = (g <= perm && perm ? GD_ST_ENBLE : 0) |
                               (g >= 1 && g <= SCSI_GROUP_STATS_MAX ? GD_IC_ENABLE : 0);
                } else {
                        memcpy(d, st->group_desc[g], SCSI_GROUP_DESC_LEN);
                }
        }
}

int scsi_grouping_page_select(struct scsi_cmd *cmd, const uint8_t *p, uint32_t off, bool *changed)
{
        struct core_ns *ns = cmd->ns;
        struct scsi_lu_state *st = ns->scsi_state;
        unsigned perm = scsi_streams_perm(ns);
        const uint8_t *d = p + 16;

        /* Check every descriptor before changing any. */
        for (unsigned g = 0; g < SCSI_GROUPS; g++) {
                const uint8_t *x = d + g * SCSI_GROUP_DESC_LEN;
                uint32_t at = off + 16 + g * SCSI_GROUP_DESC_LEN;
                if ((x[0] & GD_MODE_MASK) > 0x40) { /* 10b and 11b reserved */
                        scsi_sense_invalid_field(cmd, false, (uint16_t)at, 7);
                        return -EINVAL;
                }
                if (x[4] & 0x0f) { /* only LBM descriptor type 0 (access patterns) */
                        scsi_sense_invalid_field(cmd, false, (uint16_t)(at + 4), 3);
                        return -EINVAL;
                }
                for (int sh = 0; sh < 8; sh += 2)
                        if (((x[5] >> sh) & 3) == 3) { /* reserved code in a 2-bit field */
                                scsi_sense_invalid_field(cmd, false, (uint16_t)(at + 5), sh + 1);
                                return -EINVAL;
                        }
        }
        pthread_mutex_lock(&st->streams_lock);
        for (unsigned g = 0; g < SCSI_GROUPS; g++) {
                const uint8_t *x = d + g * SCSI_GROUP_DESC_LEN;
                uint8_t *cur = st->group_desc[g];
                uint8_t nd[SCSI_GROUP_DESC_LEN];
                memcpy(nd, cur, sizeof(nd));
                nd[0] = (uint8_t)((cur[0] & GD_ST_ENBLE) |
                                  (x[0] & (GD_MODE_MASK | GD_CS_ENBLE | GD_IC_ENABLE)));
                nd[4] = x[4] & 0xbf;
                nd[5] = x[5];
                nd[6] = x[6];
                if (memcmp(nd, cur, sizeof(nd))) {
                        /* Byte 0 is read by the data path without the lock. */
                        __atomic_store_n(&cur[0], nd[0], __ATOMIC_RELAXED);
                        memcpy(cur + 1, nd + 1, sizeof(nd) - 1);
                        group_refresh(st, g, perm);
                        *changed = true;
                }
        }
        pthread_mutex_unlock(&st->streams_lock);
        return 0;
}

/* ---- Log pages 19h/01h-1Fh ---- */

static uint32_t counter_param(uint8_t *p, uint16_t code, const uint64_t *v, unsigned n)
{
        slate_put_be(p, 2, code);
        p[2] = 0x00; /* unbounded data counter: DU 0, TSD 0, ETC 0, FORMAT AND LINKING 00b */
        p[3] = (uint8_t)(8 * n);
        for (unsigned i = 0; i < n; i++)
                slate_put_be(p + 4 + 8 * i, 8, v[i]);
        return 4 + 8 * n;
}

int scsi_group_stats_page(struct scsi_cmd *cmd, uint16_t ppc, uint8_t *p)
{
        struct scsi_lu_state *st = cmd->ns->scsi_state;
        unsigned g = cmd->cdb[3];
        uint32_t n = 0;

        if (g < 1 || g > SCSI_GROUP_STATS_MAX || ppc > 0x0004)
                return -1;
        const struct scsi_group_stats *gs = &st->group_stats[g - 1];
        if (ppc <= 0x0001) {
                /* Read and write commands, blocks received and transmitted; the two processing
                 * interval counters are not measured (0). */
                uint64_t v[6] = {atomic_load(&gs->read_cmds),
                                 atomic_load(&gs->write_cmds),
                                 atomic_load(&gs->blocks_received),
                                 atomic_load(&gs->blocks_transmitted),
                                 0,
                                 0};
                n += counter_param(p + n, 0x0001, v, 6);
        }
        /* FUA: read and write FUA commands; FUA_NV (obsolete, never seen) and intervals 0. */
        uint64_t f[8] = {atomic_load(&gs->read_fua), atomic_load(&gs->write_fua), 0, 0, 0, 0, 0, 0};
        n += counter_param(p + n, 0x0004, f, 8);
        return (int)n;
}
