/* SPDX-License-Identifier: MIT
 * net/calendar.h - the machine's local calendar periods (DESIGN.md 8): today, this week
 * (from Monday) and this month, as [start, end) in ms, DST-correct (mktime), in the
 * zone of TZ or /etc/localtime (glibc re-reads /etc/localtime when it changes).
 * Threads: any (localtime_r; each thread caches its answer for a second).
 * See:     net/calendar.c, net/rezone.c, core/limits.h
 */
#ifndef GW_NET_CALENDAR_H
#define GW_NET_CALENDAR_H

#include <stdint.h>

#include "core/limits.h"

/* The periods at <now_ms>, from this thread's cache when it was filled within the same
 * second and no net_calendar_moved came since. Any thread. */
void net_calendar(uint64_t now_ms, struct gw_period *out);

/* The periods at <now_ms>, computed now (no cache). Any thread. */
void net_calendar_fresh(uint64_t now_ms, struct gw_period *out);

/* Says that the zone changed: every thread's cache is computed again at its next use.
 * Any thread. */
void net_calendar_moved(void);

#endif
