/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_prices.c - feeds arbitrary bytes to the price table loader.
 * Every input must end in a table or a list of problems, never a crash or a leak; an
 * accepted table must hold what validation promises (unique, non-blank ids, prices
 * 0..1e6, token counts 1..1e8 or unknown) and find each of its rows again.
 * Owns:    one parse at a time.
 * Threads: single-threaded.
 * See:     core/conf.h, core/conf_prices.c, tests/fuzz/corpus/prices/
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool
price_ok(double v)
{
    return v == -1 || (v >= 0 && v <= 1000000);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_conf_problems p = {0};
    struct gw_prices *t = NULL;
    char line[512];
    size_t i;

    if (gw_prices_parse((const char *)data, size, &t, &p) == GW_OK) {
        if (p.n != 0)
            __builtin_trap();
        for (i = 0; i < t->n; i++) {
            const struct gw_price *r = &t->v[i];

            if (!r->model || !r->model[0] || gw_prices_find(t, r->model) != r)
                __builtin_trap();
            if (i > 0 && strcmp(t->v[i - 1].model, r->model) >= 0)
                __builtin_trap(); /* sorted, unique */
            if (!price_ok(r->input) || !price_ok(r->output) || !price_ok(r->cache_read) ||
                !price_ok(r->cache_write))
                __builtin_trap();
            if (r->context_window > 100000000 || r->max_output_tokens > 100000000)
                __builtin_trap();
        }
        (void)gw_prices_find(t, "gpt-4.1-2025-04-14");
        (void)gw_prices_find(t, "claude-sonnet-4-20250514");
    } else if (t) {
        __builtin_trap();
    }
    for (i = 0; i < p.n; i++)
        gw_conf_problem_format(&p.v[i], line, sizeof(line));
    gw_prices_free(t);
    gw_conf_problems_fini(&p);
    return 0;
}
