/* SPDX-License-Identifier: MIT
 * core/row.c - names of row outcomes.
 * Owns:    nothing.
 * Threads: any.
 * See:     core/row-t.h
 */
#include "core/row.h"

static const char *const outcome_names[GW_OUT__COUNT] = {
    [GW_OUT_NONE] = "none",
    [GW_OUT_OK] = "ok",
    [GW_OUT_FAILED] = "failed",
    [GW_OUT_SLOW_START] = "slow_start",
    [GW_OUT_CANCELLED] = "cancelled",
    [GW_OUT_TOO_SLOW] = "too_slow",
    [GW_OUT_SKIPPED_PAUSED] = "skipped:paused",
    [GW_OUT_SKIPPED_BUSY] = "skipped:busy",
    [GW_OUT_SKIPPED_NO_MODEL] = "skipped:no_model",
    [GW_OUT_SKIPPED_CONTEXT] = "skipped:context",
    [GW_OUT_REFUSED] = "refused",
    [GW_OUT_SKIPPED_UNCONVERTIBLE] = "skipped:unconvertible",
    [GW_OUT_SKIPPED_QUOTA] = "skipped:quota",
};

const char *
gw_outcome_str(enum gw_outcome o)
{
    return (unsigned)o < GW_OUT__COUNT ? outcome_names[o] : "unknown";
}
