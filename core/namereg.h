/* SPDX-License-Identifier: MIT
 * core/namereg.h - a registry of objects by name for the main thread: each object is
 * created zeroed on first use and lives as long as the registry, so state kept in it
 * (an upstream's health, a semaphore) survives reloads. Used by core/health.c and
 * core/slots.c.
 * Owns:    the objects and their names.
 * Threads: get and fini on main only; the objects and names it hands out may be read by
 *          any thread (their pointers never move).
 * See:     core/namereg.c
 */
#ifndef GW_CORE_NAMEREG_H
#define GW_CORE_NAMEREG_H

#include <stdbool.h>
#include <stddef.h>

struct gw_named {
    char *name;
    void *obj;
};

/* Zero it to start; gw_namereg_fini frees it. */
struct gw_namereg {
    struct gw_named *v;
    size_t n, cap;
};

/* The object named <name>, created with <size> zeroed bytes on first use (then
 * <*created> is set to true; it is false otherwise). <*name_out> gets the registry's
 * copy of the name, valid as long as the registry. NULL when out of memory. */
void *gw_namereg_get(struct gw_namereg *r, const char *name, size_t size, bool *created,
                     const char **name_out);

/* The <i>th object in creation order, NULL when i >= r->n. */
void *gw_namereg_at(const struct gw_namereg *r, size_t i);

/* Frees every object and name (the objects must own nothing else). */
void gw_namereg_fini(struct gw_namereg *r);

#endif
