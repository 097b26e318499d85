/*
 * Completion for backends that finish I/O synchronously (mem, null): the
 * result is parked in the request and delivered from the reactor's defer
 * queue, honouring the "never call back from inside submit" contract.
 */
#ifndef BACKEND_SYNC_H
#define BACKEND_SYNC_H

#ifndef SLATE_MODULE_BACKEND
#error "backend/sync.h is private to src/backend/; use backend/backend.h"
#endif

#include <stddef.h>

#include "backend/backend.h"

static inline void backend_sync_fire(struct rt_defer *d)
{
        struct core_req *req = (struct core_req *)((char *)d - offsetof(struct core_req, defer));
        core_backend_done(req, req->be_res);
}

static inline void backend_sync_done(struct core_req *req, int res)
{
        req->be_res = res;
        req->defer.fn = backend_sync_fire;
        rt_defer(req->reactor, &req->defer);
}

#endif
