/*
 * The sanitize engine's hooks for the rest of the core (ns.c): its part of
 * the namespace metadata, resuming an interrupted operation after a
 * reopen, and freeing its state.  Personalities use core/ns.h.
 */
#ifndef CORE_SANITIZE_H
#define CORE_SANITIZE_H

#ifndef SLATE_MODULE_CORE
#error "core/sanitize.h is private to src/core/; personalities use core/ns.h"
#endif

#include <jansson.h>

#include "core/ns.h"

/* The "sanitize" member of the metadata body; NULL when never sanitized. */
json_t *core_sanitize_to_json(struct core_ns *ns);
/* Restore it (at load, ns unshared): 0 or -EINVAL / -ENOMEM. */
int core_sanitize_from_json(struct core_ns *ns, json_t *j);
/* A reopened namespace whose metadata says a sanitize was running: restart it on reactor 0. */
void core_sanitize_resume(struct core_ns *ns);
void core_sanitize_free(struct core_ns *ns);

#endif
