/* SPDX-License-Identifier: MIT
 * core/budget.h - a server-wide byte budget (server.max_buffered_body_mb): the request
 * bodies being read or held at once. Every worker takes from it before it buffers a
 * body's bytes and gives them back when the body is freed; a take that would pass the
 * maximum fails and takes nothing, so the total never passes it.
 * Owns:    nothing but its two counters.
 * Threads: any; lock-free (ck_pr compare-and-swap), never blocks.
 * See:     core/budget.c, net/http1.c, tests/unit/core/test_budget.c
 */
#ifndef GW_CORE_BUDGET_H
#define GW_CORE_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

struct gw_budget {
    uint64_t used; /* bytes taken and not given back */
    uint64_t max;  /* 0: no limit */
};

/* Sets the maximum (a reload may change it; bytes already taken stay taken). */
void gw_budget_set_max(struct gw_budget *b, uint64_t max);
/* Takes <n> bytes when used + n stays within the maximum: true; else false and nothing
 * is taken. */
bool gw_budget_take(struct gw_budget *b, uint64_t n);
/* Gives back <n> bytes taken before. */
void gw_budget_give(struct gw_budget *b, uint64_t n);
/* Bytes taken now (a snapshot, for metrics and tests). */
uint64_t gw_budget_used(const struct gw_budget *b);

#endif
