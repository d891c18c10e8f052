/* SPDX-License-Identifier: MIT
 * core/arena.c - the request arena (see core/arena.h): a chain of blocks, each at
 * least GW_ARENA_BLOCK bytes (a larger allocation gets a block of its own), aligned
 * to max_align_t.
 * Owns:    the blocks and cleanups of each arena.
 * Threads: the arena's one thread.
 * See:     core/arena.h, tests/unit/core/test_arena.c
 */
#include "core/arena.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"

#define GW_ARENA_BLOCK 4096u
#define GW_ARENA_ALIGN (alignof(max_align_t))

struct gw_arena_block {
    struct gw_arena_block *next;
    size_t size, used;
    alignas(max_align_t) unsigned char data[];
};

struct gw_arena_cleanup {
    struct gw_arena_cleanup *next;
    gw_arena_free_fn fn;
    void *arg;
};

void
gw_arena_init(struct gw_arena *a)
{
    memset(a, 0, sizeof(*a));
}

/* The cleanups, newest first. */
static void
run_cleanups(struct gw_arena *a)
{
    while (a->cleanups) {
        struct gw_arena_cleanup *c = a->cleanups;

        a->cleanups = c->next;
        c->fn(c->arg);
    }
}

void
gw_arena_fini(struct gw_arena *a)
{
    struct gw_arena_block *b, *next;

    run_cleanups(a); /* first: they may read memory in the blocks */
    for (b = a->head; b; b = next) {
        next = b->next;
        gw_free(b);
    }
    for (b = a->spare; b; b = next) {
        next = b->next;
        gw_free(b);
    }
    memset(a, 0, sizeof(*a));
}

void
gw_arena_reset(struct gw_arena *a, unsigned keep)
{
    struct gw_arena_block *b, *next, *spare = a->spare;
    unsigned n = 0;

    for (b = spare; b; b = b->next)
        n++;
    run_cleanups(a);
    for (b = a->head; b; b = next) {
        next = b->next;
        if (b->size == GW_ARENA_BLOCK && n < keep) {
            b->next = spare;
            spare = b;
            n++;
        } else {
            gw_free(b);
        }
    }
    a->head = NULL;
    a->used = 0;
    a->spare = spare;
}

void *
gw_arena_alloc(struct gw_arena *a, size_t n)
{
    struct gw_arena_block *b = a->head;
    size_t off;

    if (n == 0)
        n = 1;
    if (n > SIZE_MAX - GW_ARENA_ALIGN - sizeof(*b))
        return NULL;
    off = b ? (b->used + GW_ARENA_ALIGN - 1) & ~(GW_ARENA_ALIGN - 1) : 0;
    if (!b || off > b->size || n > b->size - off) {
        size_t size = n > GW_ARENA_BLOCK ? n : GW_ARENA_BLOCK;
        struct gw_arena_block *nb = a->spare;

        if (nb && size == GW_ARENA_BLOCK) /* a block kept by gw_arena_reset */
            a->spare = nb->next;
        else if (!(nb = gw_malloc(sizeof(*nb) + size)))
            return NULL;
        nb->size = size;
        nb->used = 0;
        if (b && n > GW_ARENA_BLOCK) {
            /* A large allocation gets its own block behind the current one, which
             * keeps its free room. */
            nb->next = b->next;
            b->next = nb;
            nb->used = n;
            a->used += n;
            return nb->data;
        }
        nb->next = b;
        a->head = b = nb;
        off = 0;
    }
    b->used = off + n;
    a->used += n;
    return b->data + off;
}

void *
gw_arena_calloc(struct gw_arena *a, size_t count, size_t size)
{
    void *p;

    if (size && count > SIZE_MAX / size)
        return NULL;
    p = gw_arena_alloc(a, count * size);
    if (p)
        memset(p, 0, count * size);
    return p;
}

struct gw_str
gw_arena_str(struct gw_arena *a, struct gw_str s)
{
    char *p;

    if (s.len == 0)
        return (struct gw_str){"", 0};
    p = gw_arena_alloc(a, s.len + 1);
    if (!p)
        return (struct gw_str){NULL, 0};
    memcpy(p, s.ptr, s.len);
    p[s.len] = '\0';
    return (struct gw_str){p, s.len};
}

void *
gw_arena_push(struct gw_arena *a, void **v, size_t *n, size_t *cap, size_t size)
{
    unsigned char *p;

    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;
        void *nv;

        if (ncap > SIZE_MAX / size)
            return NULL;
        nv = gw_arena_alloc(a, ncap * size);
        if (!nv)
            return NULL;
        if (*n)
            memcpy(nv, *v, *n * size);
        *v = nv;
        *cap = ncap;
    }
    p = (unsigned char *)*v + *n * size;
    memset(p, 0, size);
    (*n)++;
    return p;
}

int
gw_arena_on_free(struct gw_arena *a, gw_arena_free_fn fn, void *arg)
{
    struct gw_arena_cleanup *c = gw_arena_alloc(a, sizeof(*c));

    if (!c)
        return 0;
    c->fn = fn;
    c->arg = arg;
    c->next = a->cleanups;
    a->cleanups = c;
    return 1;
}
