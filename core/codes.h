/* SPDX-License-Identifier: MIT
 * core/codes.h - message codes: enum gw_code from core/codes.def, its stable string,
 * its HTTP status, and one counter per code for /metrics.
 * Owns:    the counters (process-wide, atomic).
 * Threads: any.
 * See:     core/codes.def, core/codes.c
 */
#ifndef GW_CORE_CODES_H
#define GW_CORE_CODES_H

#include <stdint.h>

enum gw_code {
    GW_OK = 0,
#define GW_CODE(e, s, h) e,
#include "core/codes.def"
#undef GW_CODE
    GW_CODE__COUNT
};

/* The stable dotted code ("gw.busy_all"); "ok" for GW_OK, "unknown" out of range. */
const char *gw_code_str(enum gw_code c);
/* The HTTP status a client sees for <c>; 0 for config codes; 200 for GW_OK. */
int gw_code_http_status(enum gw_code c);
/* Looks a code up by its stable string; GW_CODE__COUNT when unknown. */
enum gw_code gw_code_from_str(const char *s, unsigned long len);
/* Counts one occurrence (for /metrics) and returns <c>. Any thread, lock-free. */
enum gw_code gw_code_count(enum gw_code c);
uint64_t gw_code_counter(enum gw_code c);

#endif
