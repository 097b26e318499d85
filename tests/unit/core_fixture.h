/*
 * The fixture most of the core's unit tests share: a fresh state directory
 * under /tmp for the namespaces' files, and running reactors; torn down
 * with every namespace shut and the directory removed.
 */
#ifndef TESTS_UNIT_CORE_FIXTURE_H
#define TESTS_UNIT_CORE_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>

#include "core/ns.h"
#include "rt/reactor.h"

/* dir (len bytes) becomes /tmp/slate-test-<name>-XXXXXX, made; 0 or -1. */
static inline int core_fixture_up(char *dir, size_t len, const char *name, unsigned reactors)
{
        snprintf(dir, len, "/tmp/slate-test-%s-XXXXXX", name);
        if (!mkdtemp(dir))
                return -1;
        core_set_state_dir(dir);
        return rt_init(reactors) || rt_start() ? -1 : 0;
}

static inline int core_fixture_down(const char *dir)
{
        rt_stop();
        rt_join();
        rt_fini();
        core_ns_shutdown_all();
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        return system(cmd) == 0 ? 0 : -1;
}

#endif
