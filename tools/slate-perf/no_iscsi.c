/*
 * Stand-in for slate-perf's iSCSI transport when the build finds no libiscsi
 * (pkg-config libiscsi): -t iscsi then says so instead of the tool failing to
 * build.  No standard section.
 */
#include "perf.h"

#include <errno.h>
#include <stdio.h>

static int no_iscsi_probe(const struct perf_opts *o, struct perf_geom *g, void **tctx)
{
        (void)o;
        (void)g;
        (void)tctx;
        fprintf(stderr, "slate-perf: built without libiscsi (install libiscsi-dev)\n");
        return -ENOTSUP;
}

static void no_iscsi_worker(struct perf_worker *w)
{
        (void)w;
}

static void no_iscsi_close(void *tctx)
{
        (void)tctx;
}

const struct perf_transport perf_iscsi = {
    .name = "iscsi",
    .probe = no_iscsi_probe,
    .worker = no_iscsi_worker,
    .close = no_iscsi_close,
};
