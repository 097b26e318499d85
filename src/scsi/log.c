/*
 * LOG SENSE (SPC-5 6.8) and the log pages, from one table: each row is a
 * (page, subpage), whether the LU has it, and a builder of its parameters.
 * The Supported Log Pages (00h/00h) and Supported Log Pages and Subpages
 * (00h/FFh, and p/FFh for the subpages of page p) lists are made from the
 * table, so a page is added with one row.  Pages:
 *
 * - Logical Block Provisioning (0Ch, SBC-4 6.4.6) on thin LUs, with the
 *   available and used LBA mapping resource counts (parameters 0001h and
 *   0002h) in threshold sets (2^THRESHOLD EXPONENT blocks, VPD B2h) and
 *   SCOPE 01b (dedicated to this LU; 10b for the available count when a
 *   pool's limit bounds it), from the core's counters.
 * - Temperature (0Dh, SPC-5 7.3.21): our choice: Slate has no sensor, so
 *   both the temperature and the reference temperature are FFh, "not
 *   available", rather than an invented figure.
 * - Start-Stop Cycle Counter (0Eh, SPC-5 7.3.20): the date of manufacture
 *   and the accounting date are unknown (ASCII spaces), no lifetime limit
 *   is specified (0), and the accumulated start-stop cycles are the
 *   namespace's real count of START STOP UNIT stops (core, persisted).
 * - Self-Test Results (10h, SPC-5 7.3.19): the namespace's last 20
 *   self-tests from the core's engine (core/selftest.h), newest first, a
 *   running one as "in progress" (Fh).
 * - LPS Misalignment (15h/03h, SBC-4 6.4.6): MAX_LPSM is CORE_LPSM_MAX; the
 *   count and the LBAs are the first misaligned writes the core saw
 *   (core_ns_lpsm; SBC-4 4.6.2: not aligned to the physical block).  Our
 *   choice for the MWR behaviour: ENABLED without the COMPLETED sense, i.e.
 *   writes are logged and complete with GOOD status.
 * - General Statistics and Performance (19h/00h, SPC-5 7.3.11): read and
 *   write commands, logical blocks received and transmitted, and their
 *   processing intervals, from the core's statistics of the namespace
 *   (every command of it, whichever protocol brought it), in a time
 *   interval of 1 us (parameter 0003h).  The weighted counts and the idle
 *   time (0002h) are not measured (0); the FUA statistics are not reported.
 * - Informational Exceptions (2Fh, SPC-5 7.3.14): the ASC/ASCQ of the
 *   namespace's most recent exception (core_ns_last_exception): a failed
 *   self-test is 0Bh/03h WARNING - BACKGROUND SELF-TEST FAILED, a failed
 *   medium element 5Dh/01h MEDIA FAILURE PREDICTION THRESHOLD EXCEEDED;
 *   the temperature reading is FFh (not available).
 * - Group Statistics and Performance (n) (19h/01h-1Fh, SPC-5 7.3.7): read and
 *   write commands and blocks per GROUP NUMBER (streams.c counts them).
 *
 * Every page control (PC) returns the current values: no page here has
 * thresholds or resettable cumulative values of its own.  Log parameters
 * are not saved (SP=1 is refused; the control mode page has GLTSD=1).
 */
#include <string.h>

#include "core/media.h"
#include "core/selftest.h"

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

/* Parameter header (SPC-5 7.3.1): code, control byte, length; returns the parameter's size. */
static uint32_t param(uint8_t *p, uint16_t code, uint8_t control, uint8_t len)
{
        slate_put_be(p, 2, code);
        p[2] = control;
        p[3] = len;
        return 4u + len;
}

#define PC_BINARY  0x03 /* FORMAT AND LINKING 11b: binary format list */
#define PC_ASCII   0x01 /* FORMAT AND LINKING 01b: ASCII format list */
#define PC_COUNTER 0x02 /* FORMAT AND LINKING 10b: bounded or unbounded data counter */

static int temperature_page(struct scsi_cmd *cmd, uint16_t ppc, uint8_t *p)
{
        uint32_t n = 0;
        (void)cmd;
        if (ppc > 0x0001)
                return -1;
        /* 0000h Temperature, 0001h Reference Temperature: FFh, not available (no sensor). */
        for (uint16_t code = ppc; code <= 0x0001; code++) {
                n += param(p + n, code, PC_BINARY, 2);
                p[n - 1] = 0xff;
        }
        return (int)n;
}

static int start_stop_page(struct scsi_cmd *cmd, uint16_t ppc, uint8_t *p)
{
        uint64_t cycles = core_ns_start_stop_cycles(cmd->ns);
        uint32_t n = 0;
        if (ppc == 0)
                ppc = 0x0001;
        if (ppc > 0x0004)
                return -1;
        for (uint16_t code = ppc; code <= 0x0004; code++) {
                if (code <= 0x0002) {
                        /* Date of manufacture, accounting date: YEAR (4) WEEK (2), unknown. */
                        n += param(p + n, code, PC_ASCII, 6);
                        memset(p + n - 6, ' ', 6);
                } else {
                        /* 0003h specified cycles over the lifetime: none (0); 0004h accumulated. */
                        n += param(p + n, code, PC_BINARY, 4);
                        if (code == 0x0004)
                                slate_put_be(p + n - 4, 4,
                                             cycles > UINT32_MAX ? UINT32_MAX : (uint32_t)cycles);
                }
        }
        return (int)n;
}

/* SPC-5 table 'SELF-TEST RESULTS field' from the core's outcome. */
static uint8_t selftest_result_code(const struct core_selftest_outcome *o)
{
        switch (o->result) {
        case CORE_STR_OK:
                return 0x0;
        case CORE_STR_ABORTED_CMD:
                return 0x1; /* aborted by a SEND DIAGNOSTIC (SELF-TEST CODE 100b) */
        case CORE_STR_FAILED:
                return o->segment == 1 ? 0x5 : 0x4; /* the first segment failed */
        case CORE_STR_ERROR:
                return 0x3;
        case CORE_STR_RUNNING:
                return 0xf;
        default:
                return 0x2; /* aborted by other means (reset, sanitize, stop, removal) */
        }
}

static void selftest_param(uint8_t *p, uint16_t code, const struct core_selftest_entry *e)
{
        uint8_t stc = (uint8_t)(e->kind == CORE_ST_SHORT ? 0x1 : 0x2) | (e->background ? 0 : 0x4);
        param(p, code, PC_BINARY, 0x10);
        p[4] = (uint8_t)(stc << 5 | selftest_result_code(&e->o));
        p[5] = e->o.result == CORE_STR_FAILED ? e->o.segment : 0; /* SELF-TEST NUMBER */
        slate_put_be(p + 6, 2, e->poh > 0xfffe ? 0xffff : e->poh);
        if (e->o.result == CORE_STR_FAILED) {
                uint8_t asc = 0, ascq = 0;
                slate_put_be(p + 8, 8, e->o.fail_lba); /* ADDRESS OF FIRST FAILURE */
                p[16] = scsi_core_sense_key(e->o.status) & 0x0f;
                if (scsi_core_sense_code(e->o.status, &asc, &ascq)) {
                        p[17] = asc;
                        p[18] = ascq;
                }
        } else {
                memset(p + 8, 0xff, 8); /* no failure: all ones */
        }
}

static int selftest_page(struct scsi_cmd *cmd, uint16_t ppc, uint8_t *p)
{
        struct core_selftest_entry e[CORE_SELFTEST_LOG_MAX + 1];
        unsigned k = 0, n = 0;
        struct core_selftest_entry run = {0};
        bool bg = false;
        if (ppc == 0)
                ppc = 0x0001;
        if (ppc > CORE_SELFTEST_LOG_MAX)
                return -1;
        if (core_selftest_running(cmd->ns, &run.kind, &bg, NULL)) {
                run.background = bg;
                run.poh = core_power_on_hours();
                run.o.result = CORE_STR_RUNNING;
                e[k++] = run;
        }
        k += core_selftest_results(cmd->ns, e + k);
        if (k > CORE_SELFTEST_LOG_MAX)
                k = CORE_SELFTEST_LOG_MAX;
        /* Twenty parameters, newest first; unused ones are zero (SPC-5 7.3.19.2). */
        for (uint16_t code = ppc; code <= CORE_SELFTEST_LOG_MAX; code++) {
                if (code - 1u < k)
                        selftest_param(p + n, code, &e[code - 1]);
                else
                        param(p + n, code, PC_BINARY, 0x10);
                n += 20;
        }
        return (int)n;
}

static int lpsm_page(struct scsi_cmd *cmd, uint16_t ppc, uint8_t *p)
{
        uint64_t lba[CORE_LPSM_MAX];
        unsigned k = core_ns_lpsm(cmd->ns, lba);
        uint32_t n = 0;
        if (ppc > k && ppc > 0)
                return ppc <= 0xf000 ? 0 : -1; /* past the last: no parameters */
        if (ppc == 0) {
                n += param(p, 0x0000, PC_BINARY, 4);
                slate_put_be(p + 4, 2, CORE_LPSM_MAX); /* MAX_LPSM */
                slate_put_be(p + 6, 2, k);             /* LPS MISALIGNMENT COUNT */
                ppc = 1;
        }
        for (unsigned i = ppc - 1u; i < k; i++) {
                n += param(p + n, (uint16_t)(i + 1), PC_BINARY, 8);
                slate_put_be(p + n - 8, 8, lba[i]);
        }
        return (int)n;
}

/* 1 us: the time interval the processing intervals count (SPC-5 7.3.11.4). */
#define GSP_INTERVAL_NS 1000u

static int gsp_page(struct scsi_cmd *cmd, uint16_t ppc, uint8_t *p)
{
        struct core_stats_sum st, *sum = &st;
        uint32_t shift = cmd->ns->block_shift, n = 0;
        if (ppc > 0x0003)
                return -1;
        core_stats_sum(&cmd->ns->stats, sum);
        if (ppc <= 0x0001) {
                /* 0001h General Access Statistics and Performance. */
                n += param(p + n, 0x0001, PC_COUNTER, 0x40);
                uint8_t *q = p + n - 0x40;
                slate_put_be(q + 0, 8, sum->ops[CORE_OPC_READ]);
                slate_put_be(q + 8, 8, sum->ops[CORE_OPC_WRITE]);
                slate_put_be(q + 16, 8, sum->bytes[CORE_OPC_WRITE] >> shift); /* received */
                slate_put_be(q + 24, 8, sum->bytes[CORE_OPC_READ] >> shift);  /* transmitted */
                slate_put_be(q + 32, 8, sum->lat_sum_ns[CORE_OPC_READ] / GSP_INTERVAL_NS);
                slate_put_be(q + 40, 8, sum->lat_sum_ns[CORE_OPC_WRITE] / GSP_INTERVAL_NS);
                /* Weighted counts (q + 48, q + 56): not kept, 0. */
        }
        if (ppc <= 0x0002) {
                /* 0002h Idle Time: not measured (0); present, as SPC-5 requires the parameter. */
                n += param(p + n, 0x0002, PC_COUNTER, 8);
        }
        /* 0003h Time Interval: EXPONENT 6, INTEGER 1: 1 x 10^-6 s. */
        n += param(p + n, 0x0003, PC_BINARY, 8);
        slate_put_be(p + n - 8, 4, 6);
        slate_put_be(p + n - 4, 4, 1);
        return (int)n;
}

static int ie_page(struct scsi_cmd *cmd, uint16_t ppc, uint8_t *p)
{
        static const uint8_t codes[][2] = {
            [CORE_EXC_NONE] = {0x00, 0x00},
            [CORE_EXC_SELFTEST_FAILED] = {0x0b, 0x03},
            [CORE_EXC_MEDIA_FAILURE] = {0x5d, 0x01},
        };
        enum core_exception e = core_ns_last_exception(cmd->ns);
        if (ppc > 0x0000)
                return -1;
        /* None recorded, but an element of the medium has failed (core/media.h): say so. */
        for (uint32_t id = 1; e == CORE_EXC_NONE && id <= core_media_elements(cmd->ns); id++) {
                struct core_elem_info ei;
                if (!core_media_element_info(cmd->ns, id, &ei) && ei.state == CORE_ELEM_FAILED)
                        e = CORE_EXC_MEDIA_FAILURE;
        }
        if ((unsigned)e >= sizeof(codes) / sizeof(codes[0]))
                e = CORE_EXC_NONE;
        uint32_t n = param(p, 0x0000, PC_BINARY, 3);
        p[4] = codes[e][0]; /* INFORMATIONAL EXCEPTION ADDITIONAL SENSE CODE */
        p[5] = codes[e][1]; /* ... QUALIFIER */
        p[6] = 0xff;        /* MOST RECENT TEMPERATURE READING: not available */
        return (int)n;
}

/* In ascending (page, subpage) order: the supported lists are made in table order. */
// clang-format off
static const struct log_page log_pages[] = {
    {0x00, 0x00, NULL, NULL},
    {0x00, 0xff, NULL, NULL},
    {0x0c, 0x00, thin_lu, lbp_page},
    {0x0d, 0x00, NULL, temperature_page},
    {0x0e, 0x00, NULL, start_stop_page},
    {0x10, 0x00, NULL, selftest_page},
    {0x15, 0x03, NULL, lpsm_page},
    {0x19, 0x00, NULL, gsp_page},
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
    {0x2f, 0x00, NULL, ie_page},
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
