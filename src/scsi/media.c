/*
 * Failing media on the SCSI side (SBC-4/SBC-5): the physical element
 * commands of storage element depopulation -- GET PHYSICAL ELEMENT STATUS
 * (9Eh/17h), REMOVE ELEMENT AND TRUNCATE (9Eh/18h), RESTORE ELEMENTS AND
 * REBUILD (9Eh/19h) -- and WRITE LONG (10) (3Fh) / (16) (9Fh/11h) with
 * WR_UNCOR, which marks blocks as pseudo unrecovered.  Everything is the
 * core's (core/media.h): the element model and its health, the marked
 * ranges, the depopulation and the capacity change that follows it (the
 * CAPACITY DATA HAS CHANGED unit attention comes from the core's capacity
 * event, target.c).  GET LBA STATUS report type 10h is in lbp.c, reads of
 * bad blocks finish in the core with CORE_E_UNRECOVERED_READ (sense.c).
 *
 * Our choices where the standard leaves one:
 *  - WRITE LONG with WR_UNCOR=0 would transfer a vendor-specific "long"
 *    block (data plus ECC bytes); Slate has no ECC to expose, so that form
 *    is refused with INVALID FIELD IN CDB (byte 1 bit 6).  COR_DIS=0 and
 *    COR_DIS=1 both mark the blocks (correction enabled or disabled makes
 *    no difference without ECC): reads fail with MEDIUM ERROR, UNRECOVERED
 *    READ ERROR until the blocks are written again.
 *  - REMOVE ELEMENT AND TRUNCATE takes REQUESTED CAPACITY 0 (the device
 *    chooses: the capacity less the element's associated capacity) or that
 *    same value; any other is refused with INVALID FIELD IN CDB.  Naming an
 *    element already depopulated does nothing and completes with GOOD (as
 *    ACS-5 says for the ATA command).
 *  - The commands of the element model are offered only on an LU that has
 *    one (namespace key `elements`); elsewhere they are neither listed nor
 *    executed (SCSI_OPF_ELEMENTS).
 */
#include <errno.h>
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"
#include "core/media.h"

#define GPES_HDR_LEN  32u
#define GPES_DESC_LEN 32u

/* The first reserved bit set in v (under mask), as a bit number; -1 if none. */
static int first_bit(uint8_t v)
{
        return v ? 31 - __builtin_clz(v) : -1;
}

/* INVALID FIELD IN CDB at the first non-zero byte of c[from..to], 0 if all are zero. */
static bool reserved_bytes(struct scsi_cmd *cmd, unsigned from, unsigned to)
{
        for (unsigned i = from; i <= to; i++) {
                if (cmd->cdb[i]) {
                        scsi_sense_invalid_field(cmd, true, (uint16_t)i, first_bit(cmd->cdb[i]));
                        return true;
                }
        }
        return false;
}

/* Byte 1 of a SERVICE ACTION IN(16) CDB: bits 7:5 are reserved. */
static bool reserved_sa_bits(struct scsi_cmd *cmd)
{
        if (cmd->cdb[1] & 0xe0) {
                scsi_sense_invalid_field(cmd, true, 1, first_bit(cmd->cdb[1] & 0xe0));
                return true;
        }
        return false;
}

/* ---- GET PHYSICAL ELEMENT STATUS ---- */

/* FILTER 01b: only elements outside the specification limits or depopulated/in depopulation. */
static bool gpes_selected(const struct core_elem_info *e, uint8_t filter)
{
        return filter == 0 || e->health > CORE_ELEM_HEALTH_AT_LIMIT;
}

size_t scsi_media_gpes_build(struct core_ns *ns, uint32_t start, uint8_t filter, uint8_t *out,
                             size_t cap)
{
        uint32_t n = core_media_elements(ns);
        uint32_t avail = 0, ret = 0, depop = 0;

        memset(out, 0, cap < GPES_HDR_LEN ? cap : GPES_HDR_LEN);
        for (uint32_t id = 1; id <= n; id++) {
                struct core_elem_info e;
                if (core_media_element_info(ns, id, &e))
                        continue;
                if (e.state == CORE_ELEM_DEPOPULATED)
                        depop++;
                if (id < start || !gpes_selected(&e, filter))
                        continue;
                avail++;
                size_t off = GPES_HDR_LEN + (size_t)ret * GPES_DESC_LEN;
                if (off + GPES_DESC_LEN > cap)
                        continue;
                uint8_t *d = out + off;
                memset(d, 0, GPES_DESC_LEN);
                slate_put_be(d + 4, 4, id);
                d[13] = e.restorable ? 0x01 : 0x00; /* RALWD */
                d[14] = 0x01;                       /* PHYSICAL ELEMENT TYPE: storage element */
                d[15] = e.health;
                slate_put_be(d + 16, 8, e.capacity_blocks);
                ret++;
        }
        if (cap >= GPES_HDR_LEN) {
                slate_put_be(out, 4, avail);
                slate_put_be(out + 4, 4, ret);
                slate_put_be(out + 8, 4, core_media_depop_element(ns));
                /* At least one element stays: all others may be depopulated. */
                slate_put_be(out + 12, 2, n > 1 ? (n - 1 > 0xffff ? 0xffff : n - 1) : 0);
                slate_put_be(out + 14, 2, depop);
        }
        return GPES_HDR_LEN + (size_t)ret * GPES_DESC_LEN;
}

enum scsi_parse_result scsi_media_gpes(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint32_t start = slate_be32(c + 6);
        uint32_t alloc = slate_be32(c + 10);
        uint8_t filter = c[14] >> 6, rt = c[14] & 0x0f;

        cmd->xfer_len = alloc;
        if (reserved_sa_bits(cmd) || reserved_bytes(cmd, 2, 5))
                return SCSI_PARSE_DONE;
        if (filter > 1) { /* 10b and 11b are reserved */
                scsi_sense_invalid_field(cmd, true, 14, 7);
                return SCSI_PARSE_DONE;
        }
        if (c[14] & 0x30) {
                scsi_sense_invalid_field(cmd, true, 14, first_bit(c[14] & 0x30));
                return SCSI_PARSE_DONE;
        }
        /* REPORT TYPE 0h physical elements, 1h storage elements: every element is one. */
        if (rt > 1) {
                scsi_sense_invalid_field(cmd, true, 14, 3);
                return SCSI_PARSE_DONE;
        }
        if (alloc == 0) {
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        size_t cap = alloc < cmd->buf_len ? alloc : cmd->buf_len;
        if (cap < GPES_HDR_LEN) { /* build the header whole, return what fits */
                uint8_t hdr[GPES_HDR_LEN];
                scsi_media_gpes_build(cmd->ns, start, filter, hdr, sizeof(hdr));
                memcpy(cmd->buf, hdr, cap);
                scsi_cmd_data_in(cmd, (uint32_t)cap, alloc);
                return SCSI_PARSE_DONE;
        }
        size_t len = scsi_media_gpes_build(cmd->ns, start, filter, cmd->buf, cap);
        scsi_cmd_data_in(cmd, (uint32_t)len, alloc);
        return SCSI_PARSE_DONE;
}

/* ---- REMOVE ELEMENT AND TRUNCATE / RESTORE ELEMENTS AND REBUILD ---- */

/* A core error of a depopulation or restoration as sense data. */
static void depop_error(struct scsi_cmd *cmd, int rc, bool remove)
{
        if (rc == -EBUSY && core_media_depop_element(cmd->ns)) {
                /* Another depopulation runs. */
                scsi_status_from_core(cmd, CORE_E_DEPOP_IN_PROGRESS, 0, false);
        } else if (rc == -ENOENT || rc == -EBUSY || rc == -EINVAL) {
                /* The element cannot be removed (gone, or the last live one). */
                scsi_sense_invalid_field(cmd, true, remove ? 10 : 1, remove ? 7 : 4);
        } else {
                scsi_status_from_core(cmd, CORE_E_INTERNAL, 0, false);
        }
}

/* The number of elements not depopulated. */
static uint32_t live_elements(struct core_ns *ns)
{
        uint32_t n = core_media_elements(ns), live = 0;
        for (uint32_t id = 1; id <= n; id++) {
                struct core_elem_info e;
                if (!core_media_element_info(ns, id, &e) && e.state != CORE_ELEM_DEPOPULATED)
                        live++;
        }
        return live;
}

enum scsi_parse_result scsi_media_remove_parse(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        uint64_t req_cap = slate_be64(c + 2);
        uint32_t id = slate_be32(c + 10);
        struct core_elem_info e;

        cmd->xfer_len = 0;
        if (reserved_sa_bits(cmd) || reserved_bytes(cmd, 14, 14))
                return SCSI_PARSE_DONE;
        if (id == 0 || id > core_media_elements(cmd->ns) ||
            core_media_element_info(cmd->ns, id, &e)) {
                scsi_sense_invalid_field(cmd, true, 10, 7);
                return SCSI_PARSE_DONE;
        }
        if (!scsi_check_state(cmd, CORE_CHK_WRITABLE)) /* it changes the medium */
                return SCSI_PARSE_DONE;
        if (e.state == CORE_ELEM_DEPOPULATED) { /* already removed: nothing to do */
                scsi_cmd_good(cmd);
                return SCSI_PARSE_DONE;
        }
        if (core_media_depop_element(cmd->ns)) { /* one runs (this element or another) */
                scsi_status_from_core(cmd, CORE_E_DEPOP_IN_PROGRESS, 0, false);
                return SCSI_PARSE_DONE;
        }
        if (live_elements(cmd->ns) < 2) { /* the last live element holds every block */
                scsi_sense_invalid_field(cmd, true, 10, 7);
                return SCSI_PARSE_DONE;
        }
        uint64_t blocks = core_ns_blocks(cmd->ns);
        if (req_cap && (e.capacity_blocks >= blocks || req_cap != blocks - e.capacity_blocks)) {
                scsi_sense_invalid_field(cmd, true, 2, 7);
                return SCSI_PARSE_DONE;
        }
        cmd->aux = id;
        return SCSI_PARSE_EXEC;
}

/* The depopulation ended (on cmd's reactor): GOOD, or DEPOPULATION FAILED. */
static void remove_done(void *arg, bool ok)
{
        struct scsi_cmd *cmd = arg;
        if (ok)
                scsi_cmd_good(cmd);
        else
                scsi_sense_set(cmd, SK_MEDIUM_ERROR, 0x31, 0x04); /* DEPOPULATION FAILED */
        cmd->done(cmd);
}

/*
 * The command completes when the depopulation has ended (our choice: SBC
 * does not say; VPD B1h DEPOPULATION TIME tells the host how long that may
 * be).  Meanwhile every medium command, from any host, is NOT READY,
 * DEPOPULATION IN PROGRESS (the core's CORE_E_DEPOP_IN_PROGRESS).
 */
void scsi_media_remove_exec(struct scsi_cmd *cmd)
{
        char err[128];
        int rc = core_media_depopulate(cmd->ns, cmd->aux, cmd->nexus, cmd->reactor, remove_done,
                                       cmd, err, sizeof(err));
        if (rc) {
                depop_error(cmd, rc, true);
                scsi_cmd_finish_deferred(cmd);
        }
}

enum scsi_parse_result scsi_media_restore_parse(struct scsi_cmd *cmd)
{
        cmd->xfer_len = 0;
        if (reserved_sa_bits(cmd) || reserved_bytes(cmd, 2, 14) ||
            !scsi_check_state(cmd, CORE_CHK_WRITABLE))
                return SCSI_PARSE_DONE;
        return SCSI_PARSE_EXEC;
}

void scsi_media_restore_exec(struct scsi_cmd *cmd)
{
        char err[128];
        int rc = core_media_restore(cmd->ns, cmd->nexus, err, sizeof(err));
        if (rc == -ENOENT) /* nothing depopulated: nothing to do (our choice: GOOD) */
                rc = 0;
        if (rc)
                depop_error(cmd, rc, false);
        else
                scsi_cmd_good(cmd);
        scsi_cmd_finish_deferred(cmd);
}

/* ---- WRITE LONG (10) / (16) ---- */

int scsi_media_write_long_decode(const uint8_t *c, const struct core_ns *ns,
                                 struct scsi_write_long *wl, uint16_t *byte, int *bit)
{
        bool sixteen = c[0] == SCSI_OP_SERVICE_ACTION_OUT_16;
        uint64_t lba = sixteen ? slate_be64(c + 2) : slate_be32(c + 2);

        memset(wl, 0, sizeof(*wl));
        wl->cor_dis = c[1] & 0x80;
        wl->wr_uncor = c[1] & 0x40;
        wl->pblock = c[1] & 0x20;
        wl->xfer_len = sixteen ? slate_be16(c + 12) : slate_be16(c + 7);
        *bit = -1;
        /* Reserved: (10) byte 1 bits 4:1 (bit 0 is the obsolete RELADR), byte 6;
         * (16) bytes 10-11 and 14. */
        if (!sixteen && (c[1] & 0x1f)) {
                *byte = 1;
                *bit = first_bit(c[1] & 0x1f);
                return -EINVAL;
        }
        static const uint8_t res10[] = {6}, res16[] = {10, 11, 14};
        const uint8_t *res = sixteen ? res16 : res10;
        unsigned nres = sixteen ? 3 : 1;
        for (unsigned i = 0; i < nres; i++) {
                if (c[res[i]]) {
                        *byte = res[i];
                        *bit = first_bit(c[res[i]]);
                        return -EINVAL;
                }
        }
        if (!wl->wr_uncor) { /* a vendor-specific long block: none here (our choice) */
                *byte = 1;
                *bit = 6;
                return -EINVAL;
        }
        if (wl->pblock && ns->phys_exp == 0) { /* one logical block per physical block */
                *byte = 1;
                *bit = 5;
                return -EINVAL;
        }
        wl->lba = lba;
        wl->nlb = 1;
        if (wl->pblock) { /* the whole physical block holding lba (lowest aligned LBA 0) */
                wl->nlb = 1u << ns->phys_exp;
                wl->lba = lba & ~((uint64_t)wl->nlb - 1);
        }
        if (!core_ns_range_ok(ns, lba, 1) || !core_ns_range_ok(ns, wl->lba, wl->nlb))
                return -ERANGE;
        return 0;
}

enum scsi_parse_result scsi_media_write_long(struct scsi_cmd *cmd)
{
        struct scsi_write_long wl;
        uint16_t byte = 0;
        int bit = -1;

        cmd->xfer_len = 0; /* WR_UNCOR: no data (the BYTE TRANSFER LENGTH is ignored) */
        int rc = scsi_media_write_long_decode(cmd->cdb, cmd->ns, &wl, &byte, &bit);
        if (rc == -ERANGE) {
                scsi_status_from_core(cmd, CORE_E_LBA_RANGE, 0, false);
                return SCSI_PARSE_DONE;
        }
        if (rc) {
                scsi_sense_invalid_field(cmd, true, byte, bit);
                return SCSI_PARSE_DONE;
        }
        if (!scsi_check_state(cmd, CORE_CHK_WRITABLE))
                return SCSI_PARSE_DONE;
        cmd->lba = wl.lba;
        cmd->nlb = wl.nlb;
        return SCSI_PARSE_EXEC;
}

/* core_media_mark's result as the command's status. */
static void write_long_status(struct scsi_cmd *cmd, int rc)
{
        if (rc == -ERANGE) /* the capacity shrank since parse */
                scsi_status_from_core(cmd, CORE_E_LBA_RANGE, 0, false);
        else if (rc == -ENOSPC) /* the list of marked ranges is full: INSUFFICIENT RESOURCES */
                scsi_sense_set(cmd, SK_ILLEGAL_REQUEST, 0x55, 0x03);
        else if (rc)
                scsi_status_from_core(cmd, CORE_E_INTERNAL, 0, false);
        else
                scsi_cmd_good(cmd);
}

static void write_long_done(void *arg, int rc)
{
        struct scsi_cmd *cmd = arg;
        write_long_status(cmd, rc);
        cmd->done(cmd);
}

/* The mark is persisted (an fsync) off the reactor; the command ends when it is. */
void scsi_media_write_long_exec(struct scsi_cmd *cmd)
{
        int rc = core_media_mark_async(cmd->ns, cmd->lba, cmd->nlb, true, cmd->nexus, cmd->reactor,
                                       write_long_done, cmd);
        if (rc) {
                write_long_status(cmd, rc);
                scsi_cmd_finish_deferred(cmd);
        }
}
