/* SPDX-License-Identifier: MIT
 * core/events.h - operator events (DESIGN.md 8, 14): named JSON documents queued by any
 * thread on a process-wide MPSC ring and broadcast by the control thread on
 * GET /control/v1/events (SSE). Names come from core/events.def. A full ring drops the
 * event and counts it; producers never block.
 * Owns:    the ring and the events on it.
 * Threads: push on any thread; take on the control thread only.
 * See:     core/events.c, net/control.c
 */
#ifndef GW_CORE_EVENTS_H
#define GW_CORE_EVENTS_H

#include <stdint.h>

enum gw_event_name {
#define GW_EVENT(e, s) e,
#include "core/events.def"
#undef GW_EVENT
    GW_EV__COUNT
};

/* "key_limit_alert", ... */
const char *gw_event_str(enum gw_event_name e);

/* Sets the ring up: once, on main, before any thread starts. */
void gw_events_init(void);
/* Queues event <e> with its JSON document <json> (copied). Any thread; never blocks. */
void gw_event_push(enum gw_event_name e, const char *json);
/* Takes the next queued event: its name into <*e> and its JSON (free with gw_free), or
 * NULL when none. An event whose copy finds no memory is dropped (counted) and the next
 * one taken. Control thread only. */
char *gw_event_take(enum gw_event_name *e);
/* Events dropped because the ring was full or memory ran out. */
uint64_t gw_events_dropped(void);

#endif
