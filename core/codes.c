/* SPDX-License-Identifier: MIT
 * core/codes.c - tables generated from core/codes.def.
 * Owns:    one counter per code.
 * Threads: any; counters are ck_pr atomics.
 * See:     core/codes.h
 */
#include "core/codes.h"

#include <ck_pr.h>
#include <string.h>

static const char *const names[GW_CODE__COUNT] = {
    [GW_OK] = "ok",
#define GW_CODE(e, s, h) [e] = s,
#include "core/codes.def"
#undef GW_CODE
};

static const int statuses[GW_CODE__COUNT] = {
    [GW_OK] = 200,
#define GW_CODE(e, s, h) [e] = h,
#include "core/codes.def"
#undef GW_CODE
};

static uint64_t counters[GW_CODE__COUNT];

const char *
gw_code_str(enum gw_code c)
{
    return (unsigned)c < GW_CODE__COUNT ? names[c] : "unknown";
}

int
gw_code_http_status(enum gw_code c)
{
    return (unsigned)c < GW_CODE__COUNT ? statuses[c] : 500;
}

enum gw_code
gw_code_from_str(const char *s, unsigned long len)
{
    unsigned i;

    for (i = 0; i < GW_CODE__COUNT; i++)
        if (strlen(names[i]) == len && memcmp(names[i], s, len) == 0)
            return (enum gw_code)i;
    return GW_CODE__COUNT;
}

enum gw_code
gw_code_count(enum gw_code c)
{
    /* Relaxed increment: /metrics reads a monotonic counter, no ordering needed. */
    if ((unsigned)c < GW_CODE__COUNT)
        ck_pr_inc_64(&counters[c]);
    return c;
}

uint64_t
gw_code_counter(enum gw_code c)
{
    return (unsigned)c < GW_CODE__COUNT ? ck_pr_load_64(&counters[c]) : 0;
}
