/* The one list of backends, looked up by name from namespace parameters. */
#include <string.h>

#include "backend/backend.h"

static const struct backend_ops *const all_backends[] = {
    &backend_mem_ops,
    &backend_file_ops,
    &backend_null_ops,
#ifdef SLATE_HAVE_RBD
    &backend_rbd_ops,
#endif
};

const char *backend_missing_lib(const char *name)
{
#ifndef SLATE_HAVE_RBD
        if (strcmp(name, "rbd") == 0)
                return "librbd (install librbd-dev and librados-dev, then rebuild)";
#endif
        (void)name;
        return NULL;
}

const struct backend_ops *backend_find(const char *name)
{
        for (size_t i = 0; i < sizeof(all_backends) / sizeof(all_backends[0]); i++)
                if (strcmp(all_backends[i]->name, name) == 0)
                        return all_backends[i];
        return NULL;
}
