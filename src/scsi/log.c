/*
 * LOG SENSE (SPC-5 6.8) and the log pages, from one table: each row is a
 * (page, subpage), whether the LU has it, and a builder of its parameters.
 * The Supported Log Pages (00h/00h) and Supported Log Pages and Subpages
 * (00h/FFh, and p/FFh for the subpages of page p) lists are made from the
 * table, so a page is added with one row.  Pages today: the Logical Block
 * Provisioning page (0Ch, SBC-4 6.4.6) on thin LUs, with the available and
 * used LBA mapping resource counts (parameters 0001h and 0002h) in
 * threshold sets (2^THRESHOLD EXPONENT blocks, VPD B2h) and SCOPE 01b
 * (dedicated to this LU; 10b for the available count when a pool's limit
 * bounds it), from the core's counters (core_ns_provision_info), and the
 * Group Statistics and Performance (n) pages 19h/01h-1Fh: read and write
 * commands and blocks per GROUP NUMBER (streams.c counts them).
 *
 * Every page control (PC) returns the current values: no page here has
 * thresholds or resettable cumulative values of its own.  Log parameters
 * are not saved (SP=1 is refused; the control mode page has GLTSD=1).
 */
#include <string.h>

#include "slate/spec/scsi.h"
#include "scsi/internal.h"

#define LOG_HDR 4

/*
 * A page's parameters (from code ppc on) go to p; returns their length, or
 * -1 when ppc is past the page's last parameter code (INVALID FIELD IN CDB).
 */
typedef int (*log_build_fn)(struct scsi_cmd *cmd, uint16_t ppc, uint8_t *p);

struct log_page {
        uint8_t page, subpage;
        bool (*present)(const struct core_ns *ns); /* NULL: every LU */
        log_build_fn build;                        /* NULL: a supported-pages list */
};

static bool thin_lu(const struct core_ns *ns)
{
        return ns->thin;
}

/* One resource count parameter (SBC-4 6.4.6.2): 4-byte count in threshold sets, SCOPE. */
static uint32_t resource_param(uint8_t *p, uint16_t code, uint64_t bytes, bool round_up,
                               uint8_t scope)
{
        uint64_t sets = bytes / CORE_PROV_SET_BYTES;
        if (round_up && bytes % CORE_PROV_SET_BYTES)
                sets++;
        memset(p, 0, 12);
        slate_put_be(p, 2, code);
        p[2] = 0x03; /* FORMAT AND LINKING 11b: binary */
        p[3] = 8;    /* parameter length */
        slate_put_be(p + 4, 4, sets > UINT32_MAX ? UINT32_MAX : sets);
        p[8] = scope;
        return 12;
}

static int lbp_page(struct scsi_cmd *cmd, uint16_t ppc, uint8_t *p)
{
        struct core_prov_info pi;
        uint32_t n = 0;
        if (ppc > 0x0002)
                return -1;
        core_ns_provision_info(cmd->ns, &pi);
        /* Available rounds down and used rounds up: neither promises space that is not there. */
        /* SCOPE 01b: dedicated to this LU; 10b: what is available is shared (a pool's limit). */
        if (ppc <= 0x0001)
                n += resource_param(p + n, 0x0001, pi.available, false, pi.pooled ? 0x02 : 0x01);
        n += resource_param(p + n, 0x0002, pi.mapped, true, 0x01);
        return (int)n;
}

// clang-format off
static const struct log_page log_pages[] = {
    {0x00, 0x00, NULL, NULL},
    {0x00, 0xff, NULL, NULL},
    {0x0c, 0x00, thin_lu, lbp_page},
    /* Group Statistics and Performance (1..31) (SPC-5 7.3.7; streams.c). */
#define GROUP_STATS(n) {0x19, n, NULL, scsi_group_stats_page}
    GROUP_STATS(0x01), GROUP_STATS(0x02), GROUP_STATS(0x03), GROUP_STATS(0x04),
    GROUP_STATS(0x05), GROUP_STATS(0x06), GROUP_STATS(0x07), GROUP_STATS(0x08),
    GROUP_STATS(0x09), GROUP_STATS(0x0a), GROUP_STATS(0x0b), GROUP_STATS(0x0c),
    GROUP_STATS(0x0d), GROUP_STATS(0x0e), GROUP_STATS(0x0f), GROUP_STATS(0x10),
    GROUP_STATS(0x11), GROUP_STATS(0x12), GROUP_STATS(0x13), GROUP_STATS(0x14),
    GROUP_STATS(0x15), GROUP_STATS(0x16), GROUP_STATS(0x17), GROUP_STATS(0x18),
    GROUP_STATS(0x19), GROUP_STATS(0x1a), GROUP_STATS(0x1b), GROUP_STATS(0x1c),
    GROUP_STATS(0x1d), GROUP_STATS(0x1e), GROUP_STATS(0x1f),
#undef GROUP_STATS
};
// clang-format on

#define N_PAGES (sizeof(log_pages) / sizeof(log_pages[0]))

static bool has(const struct core_ns *ns, const struct log_page *lp)
{
        return !lp->present || lp->present(ns);
}

/* Supported pages (00h/00h: one byte per page) or pages and subpages (p/FFh: pairs). */
static uint32_t list_pages(const struct core_ns *ns, uint8_t page, bool subpages, uint8_t *p)
{
        uint32_t n = 0;
        for (unsigned i = 0; i < N_PAGES; i++) {
                const struct log_page *lp = &log_pages[i];
                if (!has(ns, lp))
                        continue;
                if (!subpages) {
                        if (lp->subpage == 0)
                                p[n++] = lp->page;
                } else if (page == 0 || lp->page == page) {
                        p[n++] = lp->page;
                        p[n++] = lp->subpage;
                }
        }
        return n;
}

enum scsi_parse_result scsi_log_sense(struct scsi_cmd *cmd)
{
        const uint8_t *c = cmd->cdb;
        struct core_ns *ns = cmd->ns;
        uint8_t page = c[2] & 0x3f, subpage = c[3];
        uint16_t ppc = (uint16_t)slate_be16(c + 5);
        uint32_t alloc = slate_be16(c + 7);
        uint8_t *b = cmd->buf;
        const struct log_page *lp = NULL;
        uint32_t len;

        cmd->xfer_len = alloc;
        if (c[1] & 0x01) { /* SP: log parameters are not saved */
                scsi_sense_invalid_field(cmd, true, 1, 0);
                return SCSI_PARSE_DONE;
        }
        if (c[1] & 0xfe) {
                scsi_sense_invalid_field(cmd, true, 1, 31 - __builtin_clz(c[1] & 0xfe));
                return SCSI_PARSE_DONE;
        }
        if (c[4]) {
                scsi_sense_invalid_field(cmd, true, 4, 31 - __builtin_clz(c[4]));
                return SCSI_PARSE_DONE;
        }
        for (unsigned i = 0; i < N_PAGES && !lp; i++)
                if (log_pages[i].page == page && log_pages[i].subpage == subpage &&
                    has(ns, &log_pages[i]))
                        lp = &log_pages[i];
        /* p/FFh: the supported subpages of page p, for any page we have. */
        bool sub_list = subpage == 0xff;
        if (sub_list && !lp)
                for (unsigned i = 0; i < N_PAGES && !lp; i++)
                        if (log_pages[i].page == page && has(ns, &log_pages[i]))
                                lp = &log_pages[i];
        if (!lp) {
                scsi_sense_invalid_field(cmd, true, subpage ? 3 : 2, subpage ? 7 : 5);
                return SCSI_PARSE_DONE;
        }
        memset(b, 0, 1024);
        if (sub_list || !lp->build) {
                if (ppc) { /* lists have no parameter codes */
                        scsi_sense_invalid_field(cmd, true, 5, 7);
                        return SCSI_PARSE_DONE;
                }
                len = list_pages(ns, page, sub_list, b + LOG_HDR);
        } else {
                int n = lp->build(cmd, ppc, b + LOG_HDR);
                if (n < 0) {
                        scsi_sense_invalid_field(cmd, true, 5, 7);
                        return SCSI_PARSE_DONE;
                }
                len = (uint32_t)n;
        }
        /* DS=1: parameters are not saved; SPF when a subpage format is returned. */
        b[0] = (uint8_t)(0x80 | (sub_list || subpage ? 0x40 : 0) | page);
        b[1] = sub_list ? 0xff : subpage;
        slate_put_be(b + 2, 2, len);
        scsi_cmd_data_in(cmd, LOG_HDR + len, alloc);
        return SCSI_PARSE_DONE;
}
