/* SPDX-License-Identifier: MIT
 * core/cost.c - prices usage.
 * Owns:    nothing.
 * Threads: any.
 * See:     core/cost.h
 */
#include "core/cost.h"

int64_t
gw_cost_micros(const struct gw_model_spec *spec, const struct gw_usage *u, bool *priced)
{
    double in, cr, cw, total;

    if (!spec->input_known || !spec->output_known) {
        if (priced)
            *priced = false;
        return 0;
    }
    if (priced)
        *priced = true;
    in = spec->input;
    cr = spec->cache_read_known ? spec->cache_read : in;
    cw = spec->cache_write_known ? spec->cache_write : in;
    total = (double)u->input_tokens * in + (double)u->output_tokens * spec->output +
            (double)u->cache_read_tokens * cr + (double)u->cache_write_tokens * cw;
    return (int64_t)(total + 0.5);
}
