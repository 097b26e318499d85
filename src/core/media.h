/*
 * Failing media (issue 15): the one model of a namespace's medium that
 * both personalities report from.
 *
 * Physical elements.  A namespace may be given N physical elements (1..64,
 * "heads" or "dies"; 0 = no element model) and an interleave (blocks per
 * stripe unit).  Stripe unit u = lba / interleave belongs to the live
 * (not depopulated) element at position u % live_elements in ascending
 * id order.  Element ids are 1-based, as SCSI GET PHYSICAL ELEMENT STATUS
 * reports them.  Each element has a state and a health byte in the SBC-4
 * PHYSICAL ELEMENT HEALTH encoding (CORE_ELEM_HEALTH_*).
 *
 * Unrecoverable blocks.  A sorted, merged, bounded list of LBA ranges
 * (core_media_mark: RPC media_mark, SCSI WRITE LONG WR_UNCOR, NVMe Write
 * Uncorrectable) plus every LBA of a FAILED element.  core_ns_unrecoverable()
 * (core/ns.h) answers from both.
 *
 * Data path (core_req_submit, core/req.c): a read, compare, verify,
 * compare-and-write or orwrite touching an unrecoverable LBA finishes with
 * CORE_E_UNRECOVERED_READ, req->info = the first such LBA (info_valid);
 * no data moves.  A write (WRITE, WRITE SCATTERED, WRITE ZEROES, WRITE
 * SAME, a thin DEALLOCATE) that completes over marked blocks clears the
 * marks of the blocks it wrote ("heals" them, as a reassignment on write
 * does on a disk).  A write touching a FAILED element's LBA finishes with
 * CORE_E_WRITE_ERROR, info = the first such LBA: the element is gone, no
 * reassignment can save the write (our choice; the standards leave it to
 * the device); a deallocation there is not an error (a hint).  While a depopulation runs, every
 * medium command finishes with CORE_E_DEPOP_IN_PROGRESS.  With no bad block, failed element or
 * depopulation the cost is one atomic load (ns->media_flags).
 *
 * Every change (a mark, a heal, an element's state, a depopulation or
 * restoration) is persisted in the namespace metadata ("media") before it
 * is published as CORE_NS_EV_MEDIA (old_val: element id or 0; new_val:
 * CORE_MEDIA_CHG_* bits).  NVMe turns it into the LBA Status Information
 * Alert; SCSI turns element changes into the 0Bh/14h unit attention and
 * may ignore range changes.  A capacity change (depopulation, restore) is
 * published as CORE_NS_EV_CAPACITY through core_ns_resize.
 *
 * Locking: the model has its own mutex (never held while publishing);
 * data-path lookups take it only when ns->media_flags says there is
 * something to find.
 */
#ifndef CORE_MEDIA_H
#define CORE_MEDIA_H

#include <stdbool.h>
#include <stdint.h>

#include "core/ns.h"
#include "core/req.h"

#define CORE_MEDIA_MAX_ELEMENTS       64
#define CORE_MEDIA_DEFAULT_INTERLEAVE 2048u
/* Marked ranges kept per namespace (merged); a mark that would need more fails with -ENOSPC. */
#define CORE_MEDIA_MAX_RANGES 1024

enum core_elem_state {
        CORE_ELEM_OK = 0,
        CORE_ELEM_DEGRADED,    /* readable, health at or beyond its limit */
        CORE_ELEM_FAILED,      /* every LBA on it is unrecoverable; writes to it fail */
        CORE_ELEM_DEPOPULATED, /* removed (core_media_depopulate); owns no LBA */
};

/* SBC-4 PHYSICAL ELEMENT HEALTH values the model uses by default (any 00h..CFh may be set). */
#define CORE_ELEM_HEALTH_NOT_REPORTED 0x00
#define CORE_ELEM_HEALTH_OK           0x01 /* 01h..63h: within the manufacturer's limits */
#define CORE_ELEM_HEALTH_AT_LIMIT     0x64 /* default of DEGRADED */
#define CORE_ELEM_HEALTH_FAILED       0xcf /* 65h..CFh beyond limits: default of FAILED */
#define CORE_ELEM_HEALTH_DEPOP_ERR    0xfd /* depopulation completed with errors */
#define CORE_ELEM_HEALTH_DEPOP_RUN    0xfe /* depopulation in progress */
#define CORE_ELEM_HEALTH_DEPOP_OK     0xff /* depopulation completed successfully */

/* CORE_NS_EV_MEDIA new_val bits: what changed. */
#define CORE_MEDIA_CHG_RANGES  (1u << 0) /* the marked ranges (mark or heal) */
#define CORE_MEDIA_CHG_ELEMENT (1u << 1) /* an element's state or health (old_val = its id) */
#define CORE_MEDIA_CHG_DEPOP   (1u << 2) /* a depopulation started, ended, or a restore */

/* ns->media_flags bits (what the data path must look at). */
#define CORE_MEDIA_F_BAD   (1u << 0) /* marked ranges or a FAILED element exist */
#define CORE_MEDIA_F_DEPOP (1u << 1) /* a depopulation runs */

struct core_elem_info {
        uint32_t id; /* 1-based */
        enum core_elem_state state;
        uint8_t health;           /* SBC-4 PHYSICAL ELEMENT HEALTH */
        uint64_t capacity_blocks; /* blocks it holds now (what REMOVE ELEMENT would take) */
        bool restorable;          /* DEPOPULATED and core_media_restore can bring it back */
};

/*
 * Counters (a snapshot: core_media_get_stats), lifetime of the namespace:
 * persisted with every media change, so at most the counts since the last
 * change are lost in a crash.
 */
struct core_media_stats {
        uint64_t media_errors;      /* commands finished with a media error (both kinds below) */
        uint64_t unrecovered_reads; /* CORE_E_UNRECOVERED_READ completions */
        uint64_t write_errors;      /* CORE_E_WRITE_ERROR completions on failed elements */
        uint64_t marks;             /* core_media_mark(bad) calls that marked blocks */
        uint64_t healed_blocks;     /* marked blocks cleared by a write or a mark(false) */
        uint64_t element_changes;   /* element state/health changes */
        uint64_t depopulations;     /* completed depopulations */
        uint64_t restorations;      /* completed restorations */
        uint64_t marked_ranges;     /* ranges in the list now */
        uint64_t marked_blocks;     /* blocks in the list now */
        uint32_t generation;        /* +1 on every change of the unrecoverable set or elements */
};

/* The model's configuration (namespace_create / namespace_set / config keys). */
uint32_t core_media_elements(const struct core_ns *ns); /* 0 = no element model */
uint32_t core_media_interleave(const struct core_ns *ns);
/*
 * Set the element count (0..64) and interleave (blocks, >= 1; 0 = keep or
 * the default).  Refused (-EBUSY) while an element is FAILED, DEPOPULATED
 * or a depopulation runs, unless nothing changes.  Persisted, then
 * CORE_NS_EV_MEDIA.  0 or -errno with a message in err.
 */
int core_media_configure(struct core_ns *ns, uint32_t elements, uint32_t interleave, char *err,
                         size_t errlen);
/* Element id's state: 0, or -ENOENT (no such element). */
int core_media_element_info(struct core_ns *ns, uint32_t id, struct core_elem_info *out);
/* The element holding lba (1-based), or 0 without an element model or beyond capacity. */
uint32_t core_media_lba_element(struct core_ns *ns, uint64_t lba);
/*
 * Fail, degrade or heal one element (state OK, DEGRADED or FAILED; health
 * -1 = the state's default, else 0..0xCF).  Healing (OK) a FAILED element
 * makes its LBAs readable again (their data is what the backend kept).
 * Not for DEPOPULATED elements (-EBUSY; use core_media_restore).  0 or
 * -errno (-ENOENT, -EINVAL, -EBUSY, saving the metadata) with err.
 */
int core_media_set_element(struct core_ns *ns, uint32_t id, enum core_elem_state state, int health,
                           core_origin_t origin, char *err, size_t errlen);

/*
 * Mark [lba, lba + nlb) unrecoverable (bad) or clear it.  0, -ERANGE
 * (beyond capacity, or nlb 0), -ENOSPC (the list would exceed
 * CORE_MEDIA_MAX_RANGES; nothing changes), or the error saving the
 * metadata.  Publishes CORE_NS_EV_MEDIA when the set changed.
 */
int core_media_mark(struct core_ns *ns, uint64_t lba, uint64_t nlb, bool bad, core_origin_t origin);
/*
 * core_media_mark off the reactor (it saves the metadata, which fsyncs):
 * 0, and done(arg, rc) later on reactor r with core_media_mark's result;
 * or -errno now (no thread), and done is never called.  For Write
 * Uncorrectable (NVMe) and WRITE LONG WR_UNCOR (SCSI).
 */
int core_media_mark_async(struct core_ns *ns, uint64_t lba, uint64_t nlb, bool bad,
                          core_origin_t origin, struct rt_reactor *r,
                          void (*done)(void *arg, int rc), void *arg);
/*
 * Tracked and untracked (NVMe Get LBA Status 5.20, log 0Eh): marked ranges
 * and the LBAs of FAILED elements a scan has found are "tracked"; a FAILED
 * element's LBAs are "untracked" until core_media_scan (NVMe Get LBA
 * Status ATYPE 10h) tracks them.  core_ns_unrecoverable reports both.
 */
/* Like core_ns_unrecoverable, tracked blocks only. */
int core_media_unrecoverable_tracked(struct core_ns *ns, uint64_t lba, uint64_t nlb,
                                     struct core_lba_range *out);
/* Blocks of FAILED elements not yet tracked (NVMe ESTULB). */
uint64_t core_media_untracked_blocks(struct core_ns *ns);
/* Track every failed element's LBAs: the number of elements newly tracked (event if > 0). */
int core_media_scan(struct core_ns *ns, core_origin_t origin);
/* The marked ranges (not the failed elements' LBAs), up to max: the number copied. */
uint32_t core_media_ranges(struct core_ns *ns, struct core_lba_range *out, uint32_t max);

/*
 * Offline depopulation of element id (SCSI REMOVE ELEMENT AND TRUNCATE):
 * starts it in the background and returns 0, or -errno at once (-ENOENT,
 * -EBUSY: one runs, or the element is depopulated already, or it is the
 * last live element; -EOPNOTSUPP: no element model or the backend cannot
 * resize).  While it runs, medium commands finish with
 * CORE_E_DEPOP_IN_PROGRESS and the element's health is DEPOP_RUN; then
 * the capacity shrinks by the element's share (core_ns_resize(force):
 * CORE_NS_EV_CAPACITY), marked ranges beyond it are dropped, and the
 * element becomes DEPOPULATED (health DEPOP_OK, restorable).  Data below
 * the new capacity is kept.  done(arg, ok) is called once when it ends,
 * on reactor r (or on the engine's thread when r is NULL); done may be
 * NULL.  A restart during a depopulation finishes it at reopen.
 */
int core_media_depopulate(struct core_ns *ns, uint32_t id, core_origin_t origin,
                          struct rt_reactor *r, void (*done)(void *arg, bool ok), void *arg,
                          char *err, size_t errlen);
/*
 * SCSI RESTORE ELEMENTS AND REBUILD: every DEPOPULATED element back to OK
 * and the capacity back to what it was before the first depopulation
 * (synchronous; the grown blocks read as zeroes).  0 or -errno (-EBUSY
 * while a depopulation runs; -ENOENT: nothing to restore) with err.
 */
int core_media_restore(struct core_ns *ns, core_origin_t origin, char *err, size_t errlen);
/*
 * Whether an element is depopulated (the capacity is reduced): a reopen
 * with a larger configured size keeps the reduced one.
 */
bool core_media_depopulated(struct core_ns *ns);
/* Element id being depopulated, or 0. */
uint32_t core_media_depop_element(struct core_ns *ns);

void core_media_get_stats(struct core_ns *ns, struct core_media_stats *out);

/* ---- For the rest of the core (req.c, ns.c) ---- */

/*
 * Data-path check of a request (called by core_req_submit after the range
 * check; only when ns->media_flags is set): CORE_OK, or the status to
 * finish with (req->info set).  Sets req->media_heal when the request,
 * once successful, must clear marks.
 */
enum core_status core_media_check(struct core_req *req);
/* A request finished (status st): heals marks, counts media errors. */
void core_media_done(struct core_req *req, enum core_status st);
/* Allocate the model at create (ns unshared): 0 or -ENOMEM. */
int core_media_init(struct core_ns *ns);
void core_media_free(struct core_ns *ns);
#ifdef JANSSON_H
/* The "media" member of the metadata body (NULL: nothing to save); restore it: 0 or -EINVAL. */
json_t *core_media_to_json(struct core_ns *ns);
int core_media_from_json(struct core_ns *ns, json_t *j);
#endif
/* At reopen: finish a depopulation the previous run did not. */
void core_media_resume(struct core_ns *ns);

#endif
