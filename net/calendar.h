/* SPDX-License-Identifier: MIT
 * net/calendar.h - the machine's local calendar periods (DESIGN.md 8): today, this week
 * (from Monday) and this month, as [start, end) in ms, DST-correct (mktime).
 * Threads: any (localtime_r).
 * See:     net/calendar.c, core/limits.h
 */
#ifndef GW_NET_CALENDAR_H
#define GW_NET_CALENDAR_H

#include <stdint.h>

#include "core/limits.h"

void net_calendar(uint64_t now_ms, struct gw_period *out);

#endif
