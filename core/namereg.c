/* SPDX-License-Identifier: MIT
 * core/namereg.c - see core/namereg.h. A plain growing array searched linearly: a
 * config names tens of providers and clients, and lookups happen on main at reload.
 * Owns:    the array, every object and name in it.
 * Threads: main only.
 * See:     core/namereg.h
 */
#include "core/namereg.h"

#include <string.h>

#include "core/alloc.h"

void *
gw_namereg_get(struct gw_namereg *r, const char *name, size_t size, bool *created,
               const char **name_out)
{
    struct gw_named e;
    size_t i;

    *created = false;
    for (i = 0; i < r->n; i++)
        if (strcmp(r->v[i].name, name) == 0) {
            *name_out = r->v[i].name;
            return r->v[i].obj;
        }
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        struct gw_named *v = gw_realloc(r->v, cap * sizeof(*v));

        if (!v)
            return NULL;
        r->v = v;
        r->cap = cap;
    }
    e.obj = gw_calloc(1, size);
    e.name = e.obj ? gw_strdup(name) : NULL;
    if (!e.name) {
        gw_free(e.obj);
        return NULL;
    }
    r->v[r->n++] = e;
    *created = true;
    *name_out = e.name;
    return e.obj;
}

void *
gw_namereg_at(const struct gw_namereg *r, size_t i)
{
    return i < r->n ? r->v[i].obj : NULL;
}

void
gw_namereg_fini(struct gw_namereg *r)
{
    size_t i;

    for (i = 0; i < r->n; i++) {
        gw_free(r->v[i].name);
        gw_free(r->v[i].obj);
    }
    gw_free(r->v);
    *r = (struct gw_namereg){0};
}
