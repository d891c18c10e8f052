/* SPDX-License-Identifier: MIT
 * core/budget.c - the server-wide byte budget (see core/budget.h).
 * Owns:    nothing.
 * Threads: any; a compare-and-swap loop that retries only when another thread moved
 *          the counter in between.
 * See:     core/budget.h, tests/unit/core/test_budget.c
 */
#include "core/budget.h"

#include <ck_pr.h>

void
gw_budget_set_max(struct gw_budget *b, uint64_t max)
{
    ck_pr_store_64(&b->max, max); /* relaxed: a take reads whichever value is current */
}

bool
gw_budget_take(struct gw_budget *b, uint64_t n)
{
    uint64_t max = ck_pr_load_64(&b->max);
    uint64_t used = ck_pr_load_64(&b->used);

    for (;;) {
        if (max && (n > max || used > max - n))
            return false;
        /* The CAS is the only write: two takers cannot both pass on the same room.
         * On failure <used> is refreshed with the current value. */
        if (ck_pr_cas_64_value(&b->used, used, used + n, &used))
            return true;
    }
}

void
gw_budget_give(struct gw_budget *b, uint64_t n)
{
    ck_pr_sub_64(&b->used, n);
}

uint64_t
gw_budget_used(const struct gw_budget *b)
{
    return ck_pr_load_64((uint64_t *)(uintptr_t)&b->used);
}
