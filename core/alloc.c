/* SPDX-License-Identifier: MIT
 * core/alloc.c - allocation wrappers with a fail-at-N test hook.
 * Owns:    nothing.
 * Threads: any; the hook counter is a ck_pr atomic.
 * See:     core/alloc.h
 */
#include "core/alloc.h"

#include <ck_pr.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t fail_at; /* 0 = off; decremented per allocation while set */

static int
should_fail(void)
{
    uint64_t v;

    /* Relaxed is enough: the hook is set by a test before the code under test runs. */
    v = ck_pr_load_64(&fail_at);
    if (v == 0)
        return 0;
    return ck_pr_faa_64(&fail_at, (uint64_t)-1) == 1;
}

void
gw_alloc_fail_at(unsigned long n)
{
    ck_pr_store_64(&fail_at, (uint64_t)n);
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
