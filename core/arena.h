/* SPDX-License-Identifier: MIT
 * core/arena.h - one arena per request (DESIGN.md 1, STYLE.md 6): everything that lives
 * as long as the request (the canonical request, converted bodies, header copies) is
 * allocated from it and freed at once with it. Blocks are chained; an allocation never
 * moves, so slices into it stay valid until gw_arena_fini. What is not memory (a json_t,
 * a descriptor) is attached with gw_arena_on_free and released at fini, last attached
 * first.
 * Owns:    its blocks and the cleanups attached to it.
 * Threads: one thread at a time (the request's worker); not thread-safe.
 * See:     core/arena.c, tests/unit/core/test_arena.c
 */
#ifndef GW_CORE_ARENA_H
#define GW_CORE_ARENA_H

#include <stddef.h>

#include "core/str.h"

struct gw_arena_block;
struct gw_arena_cleanup;

/* Caller-provided: zero it or call gw_arena_init; the first block is allocated lazily. */
struct gw_arena {
    struct gw_arena_block *head;       /* the block allocations come from */
    struct gw_arena_cleanup *cleanups; /* run at fini, newest first */
    size_t used;                       /* bytes handed out, for tests and metrics */
    struct gw_arena_block *spare;      /* empty blocks kept by gw_arena_reset */
};

typedef void (*gw_arena_free_fn)(void *arg);

void gw_arena_init(struct gw_arena *a);
/* Runs the cleanups and frees every block; <a> is empty (reusable) after. */
void gw_arena_fini(struct gw_arena *a);
/* Runs the cleanups and empties <a> for its next use, keeping up to <keep> of its
 * blocks of the default size (4 KB) for the allocations to come; frees the others. A
 * request's arena reused by the next request allocates no block after warm-up. */
void gw_arena_reset(struct gw_arena *a, unsigned keep);
/* <n> bytes aligned for any type, or NULL when out of memory. Never freed alone. */
void *gw_arena_alloc(struct gw_arena *a, size_t n);
/* Zeroed <count> x <size> bytes (overflow checked), or NULL. */
void *gw_arena_calloc(struct gw_arena *a, size_t count, size_t size);
/* A copy of <s> in the arena, NUL-terminated after its len; an empty <s> gives {"", 0}.
 * Out of memory: {NULL, 0}. */
struct gw_str gw_arena_str(struct gw_arena *a, struct gw_str s);
/* Grows the array <*v> of <*n> elements of <size> bytes by one zeroed element placed at
 * the end: returns it, or NULL (the array is unchanged). Arrays of up to <cap> elements
 * move when they grow (old copies stay in the arena until fini): callers keep indexes,
 * not pointers, across pushes. */
void *gw_arena_push(struct gw_arena *a, void **v, size_t *n, size_t *cap, size_t size);
/* Attaches <fn>(<arg>) to run at fini: 1; 0 when out of memory (fn is NOT called). */
int gw_arena_on_free(struct gw_arena *a, gw_arena_free_fn fn, void *arg);

#endif
