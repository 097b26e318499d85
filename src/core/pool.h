/*
 * Provisioning pools (pool.c): the parts the rest of the core uses.
 * Personalities and management use core/ns.h.
 */
#ifndef CORE_POOL_H
#define CORE_POOL_H

#ifndef SLATE_MODULE_CORE
#error "core/pool.h is private to src/core/; personalities use core/ns.h"
#endif

#include "core/ns.h"

struct core_pool {
        char dir[4096];            /* real path of the directory */
        _Atomic uint64_t limit;    /* bytes; 0 = switched off */
        _Atomic uint64_t est;      /* estimate of the members' allocated bytes (as core_prov) */
        _Atomic uint64_t inflight; /* bytes reserved by members' writes not yet completed */
        struct core_ns *members;   /* linked by core_ns.pool_next, under pools_lock */
        struct core_pool *next;    /* never freed, never unlinked */
};

/* A new or reopened namespace joins the pool of its data file's directory, if any. */
void core_pool_join(struct core_ns *ns);
/* A namespace being freed leaves its pool. */
void core_pool_leave(struct core_ns *ns);
/* The estimate back to the truth (sum of the members' allocation); returns that sum. */
uint64_t core_pool_refresh(struct core_pool *p);

#endif
