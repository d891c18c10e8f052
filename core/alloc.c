/* SPDX-License-Identifier: MIT
 * core/alloc.c - allocation wrappers with two fail-at-N test hooks: gw_alloc_fail_at
 * (a countdown a test sets around one call) and gw_alloc_trace (a count from the start
 * of a test, for `make test-oom`). In production both are off and cost a load each
 * per allocation, of words nobody writes: no cache line bounces.
 * Owns:    nothing.
 * Threads: any; the hook counters are ck_pr atomics.
 * See:     core/alloc.h
 */
#include "core/alloc.h"

#include <ck_pr.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fail_at; /* 0 = off; decremented per allocation while set */

static gw_alloc_trace_fn trace_fn; /* NULL = off; set before the code under test runs */
static uint64_t trace_n;           /* allocations numbered so far */

static int
should_fail(void)
{
    gw_alloc_trace_fn fn;
    int fail = 0;
    uint64_t v;

    /* ACQUIRE: pairs with gw_alloc_trace's RELEASE, so a thread that sees the function
     * sees the count reset before it. */
    fn = __atomic_load_n(&trace_fn, __ATOMIC_ACQUIRE);
    if (fn && fn((unsigned long)(ck_pr_faa_64(&trace_n, 1) + 1)))
        fail = 1;
    /* Relaxed is enough: the hook is set by a test before the code under test runs. */
    v = ck_pr_load_64(&fail_at);
    if (v != 0 && ck_pr_faa_64(&fail_at, (uint64_t)-1) == 1)
        fail = 1;
    return fail;
}

void
gw_alloc_fail_at(unsigned long n)
{
    ck_pr_store_64(&fail_at, (uint64_t)n);
}

void
gw_alloc_trace(gw_alloc_trace_fn fn)
{
    ck_pr_store_64(&trace_n, 0);
    /* RELEASE: the reset count is visible to a thread that loads the function. */
    __atomic_store_n(&trace_fn, fn, __ATOMIC_RELEASE);
}

unsigned long
gw_alloc_traced(void)
{
    return (unsigned long)ck_pr_load_64(&trace_n);
}

void *
gw_malloc(size_t n)
{
    return should_fail() ? NULL : malloc(n ? n : 1);
}

void *
gw_calloc(size_t count, size_t size)
{
    return should_fail() ? NULL : calloc(count ? count : 1, size ? size : 1);
}

void *
gw_realloc(void *p, size_t n)
{
    return should_fail() ? NULL : realloc(p, n ? n : 1);
}

char *
gw_strndup(const char *s, size_t n)
{
    char *d = gw_malloc(n + 1);

    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *
gw_strdup(const char *s)
{
    return gw_strndup(s, strlen(s));
}

void
gw_free(void *p)
{
    free(p);
}
