/* SPDX-License-Identifier: MIT
 * core/alloc.h - the one allocation path of gw.
 * Every allocation goes through these so that tests can make the Nth one fail
 * (gw_alloc_fail_at) and check that every failure path ends cleanly.
 * Owns:    nothing.
 * Threads: any; the failure counter is a test hook, atomic.
 * See:     core/alloc.c
 */
#ifndef GW_CORE_ALLOC_H
#define GW_CORE_ALLOC_H

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

#define GW_FREE(p)                                                                                 \
    do {                                                                                           \
        gw_free(p);                                                                                \
        (p) = NULL;                                                                                \
    } while (0)

#endif
