/* SPDX-License-Identifier: MIT
 * core/alloc.h - the one allocation path of gw.
 * Every allocation goes through these so that tests can make the Nth one fail
 * (gw_alloc_fail_at inside a test; gw_alloc_trace for `make test-oom`, which fails
 * each allocation of a test in turn) and check that every failure path ends cleanly.
 * Owns:    nothing.
 * Threads: any; the failure counters are test hooks, atomic.
 * See:     core/alloc.c, tests/unit/oom.c, tools/test-oom.py
 */
#ifndef GW_CORE_ALLOC_H
#define GW_CORE_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

/* malloc/calloc/realloc/strdup that return NULL on failure (or when the test hook says so). */
void *gw_malloc(size_t n);
void *gw_calloc(size_t count, size_t size);
void *gw_realloc(void *p, size_t n);
char *gw_strdup(const char *s);
char *gw_strndup(const char *s, size_t n);
void gw_free(void *p);

/* Test hook: the <n>th allocation from now fails (0 switches it off). Any thread. */
void gw_alloc_fail_at(unsigned long n);

/* Called for every allocation while tracing, on the allocating thread, with the
 * allocation's number (1, 2, ...); returns true to make that allocation fail. It must
 * not allocate through gw_. */
typedef bool (*gw_alloc_trace_fn)(unsigned long n);

/* Test hook of `make test-oom` (tests/unit/oom.c): from now on number every
 * allocation and ask <fn> whether it fails (NULL stops). Independent of
 * gw_alloc_fail_at: an allocation fails if either hook says so. Call before the code
 * under test starts threads. */
void gw_alloc_trace(gw_alloc_trace_fn fn);

/* Allocations counted since gw_alloc_trace (0 if it was never called). Any thread. */
unsigned long gw_alloc_traced(void);

#define GW_FREE(p)                                                                                 \
    do {                                                                                           \
        gw_free(p);                                                                                \
        (p) = NULL;                                                                                \
    } while (0)

#endif
