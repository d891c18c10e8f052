/* SPDX-License-Identifier: MIT
 * net/rezone.h - keeps the keys' calendar totals right when the local calendar moves
 * under a running gateway (DESIGN.md 8: "whenever a period's start moves (a time-zone
 * change)"). A timer on main's event_base looks at the local calendar once a second;
 * when a day, week or month start moved other than by the period ending (the zone
 * changed: /etc/localtime replaced), every key's day, week and month totals are read
 * again from the store on the rezone thread, never on a worker, with the rule of live
 * settlement (gw_keylimits_recount_*). A recount whose periods moved on again before it
 * was installed is dropped and read again for the periods of the moment.
 * Owns:    the rezone thread and the timer.
 * Threads: start/stop on main; the timer on main's event_base; reads on the rezone thread.
 * See:     net/rezone.c, net/calendar.h, core/limits.h, tests/e2e/test_key_limits.py
 */
#ifndef GW_NET_REZONE_H
#define GW_NET_REZONE_H

#include "core/codes.h"
#include "core/limits.h"

struct event_base;
struct store;
struct net_rezone;

/* Starts watching the calendar from <base> (main's loop) and the rezone thread, which
 * reads <store> for the keys of <reg>. Both are borrowed and must outlive
 * net_rezone_stop. GW_E_NOMEM or GW_E_INTERNAL (no thread) on failure. Main thread. */
enum gw_code net_rezone_start(struct event_base *base, struct gw_keylimits_reg *reg,
                              struct store *store, struct net_rezone **out);

/* Stops the timer and the thread (a recount under way finishes its current key first).
 * Blocks. NULL is fine. Main thread. */
void net_rezone_stop(struct net_rezone *z);

#endif
