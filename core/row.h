/* SPDX-License-Identifier: MIT
 * core/row.h - API over the request row of core/row-t.h.
 * See: core/row.c
 */
#ifndef GW_CORE_ROW_H
#define GW_CORE_ROW_H

#include "core/row-t.h"

/* "ok", "failed", "skipped:paused", ...; "refused" / "none" for the request-level ones. */
const char *gw_outcome_str(enum gw_outcome o);

#endif
