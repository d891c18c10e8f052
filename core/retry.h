/* SPDX-License-Identifier: MIT
 * core/retry.h - how long an upstream asks to be left alone (DESIGN.md 6, 10): from the
 * Retry-After header (delay-seconds or an HTTP-date), retry-after-ms, or a delay stated
 * in an error body ("Please try again in 20s", "retryDelay": "20s", "retry after 3
 * seconds"). Pure: the caller passes the time.
 * Threads: any.
 * See:     core/retry.c, tests/unit/core/test_retry.c
 */
#ifndef GW_CORE_RETRY_H
#define GW_CORE_RETRY_H

#include <stdint.h>

#include "core/str.h"

/* The delay in ms asked for, the longest of what the three sources state; 0 when none
 * states one (or all are malformed). <retry_after>, <retry_after_ms> and <body> may be
 * empty slices. An HTTP-date in the past gives 0. */
uint64_t gw_retry_after_ms(struct gw_str retry_after, struct gw_str retry_after_ms,
                           struct gw_str body, uint64_t now_ms);

#endif
