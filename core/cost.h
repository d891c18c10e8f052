/* SPDX-License-Identifier: MIT
 * core/cost.h - the cost of a request's usage (DESIGN.md 8, 9), in micro-dollars.
 * Pure: prices come from the one resolve function (gw_conf_model_spec).
 * Threads: any.
 * See:     core/cost.c, tests/unit/core/test_cost.c
 */
#ifndef GW_CORE_COST_H
#define GW_CORE_COST_H

#include <stdbool.h>
#include <stdint.h>

#include "core/conf.h"
#include "core/row-t.h"

/* USD * 1e6 for <u> at <spec>'s prices (USD per 1M tokens, so a token costs <price>
 * micro-dollars). A model without a known input or output price is unpriced: 0, and
 * <*priced> (when not NULL) false. Cache reads and writes without a price of their own
 * cost the input price. Rounded to the nearest micro-dollar. */
int64_t gw_cost_micros(const struct gw_model_spec *spec, const struct gw_usage *u, bool *priced);

#endif
