/* SPDX-License-Identifier: MIT
 * core/events.h - operator events (DESIGN.md 8, 14): named JSON documents queued by any
 * thread and broadcast by the control thread on GET /control/v1/events (SSE). Names
 * come from core/events.def.
 * Two MPSC rings, so that a burst of the frequent kind cannot crowd out the rare ones:
 * request_finished (one per request) goes on the bulk ring, every other event on the
 * priority ring, which the control thread empties first. A full ring drops the event and
 * counts it, per event name; producers never block and take no lock (a ck_ring CAS; see
 * gw_event_push_about for the one wait ck's MPSC enqueue has).
 * The filter of one subscriber (types, a client, a sample rate for request_finished) is
 * pure and lives here too, with the interest the workers read before they build a
 * request_finished at all.
 * Owns:    the rings and the events on them.
 * Threads: push on any thread; take, interest and filters on the control thread only.
 * See:     core/events.c, net/control.c, net/report.c, tests/unit/core/test_events.c
 */
#ifndef GW_CORE_EVENTS_H
#define GW_CORE_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/row-t.h"

enum gw_event_name {
#define GW_EVENT(e, s) e,
#include "core/events.def"
#undef GW_EVENT
    GW_EV__COUNT
};

/* One queued event. Taken with gw_event_take; freed with gw_free. */
struct gw_event {
    enum gw_event_name name;
    char client[GW_NAME_MAX + 1]; /* the client it is about; "" = none (upstreams, config) */
    char id[GW_ROW_ID_LEN + 1];   /* the request it is about; "" = none */
    char json[];                  /* NUL-terminated, one line */
};

/* "key_limit_alert", ... ("unknown" out of range) */
const char *gw_event_str(enum gw_event_name e);
/* The event named <name> (<len> bytes); false when there is none. */
bool gw_event_from_str(const char *name, size_t len, enum gw_event_name *out);

/* Sets the rings up (and forgets any interest): once, on main, before any thread starts. */
void gw_events_init(void);
/* Queues event <e> about no client and no request, with its JSON document <json>
 * (copied). Any thread; never blocks. */
void gw_event_push(enum gw_event_name e, const char *json);
/* Queues event <e> about client <client> and request <id> (either NULL or "" for none;
 * cut to their row sizes) with <json> (copied, one line). Any thread; takes no lock.
 * ck's MPSC enqueue is a CAS on the producer head; a producer then waits (a few
 * instructions) for one that claimed the slot before it to publish: never for the
 * consumer, and a full ring fails at once (dropped, counted). */
void gw_event_push_about(enum gw_event_name e, const char *client, const char *id,
                         const char *json);
/* Counts one event of <e> lost before it could be queued (out of memory building it). */
void gw_event_count_drop(enum gw_event_name e);
/* Takes the next queued event, the priority ring before the bulk one (free with gw_free),
 * or NULL when both are empty. Control thread only. */
struct gw_event *gw_event_take(void);
/* Events dropped because a ring was full or memory ran out: all of them, and of <e>. */
uint64_t gw_events_dropped(void);
uint64_t gw_events_dropped_of(enum gw_event_name e);

/* ---- sampling and interest ---- */

/* Whether request <id> is in a sample of rate <rate> (0: none, 1 or more: all): a hash of
 * the id compared with the rate, so the same id gives the same answer everywhere (every
 * subscriber with the same rate sees the same requests; a test can predict them). */
bool gw_event_sampled(const char *id, double rate);

/* The union of what subscribers want: a bit per event name and the largest sample rate of
 * those that want request_finished. Set by the control thread whenever a subscriber
 * comes or goes; read by workers (relaxed: a stale value costs one event more or less
 * around the change). */
void gw_events_set_interest(uint32_t mask, double max_sample);
/* True when some subscriber may want event <e> (never computed otherwise). Any thread. */
bool gw_event_wanted(enum gw_event_name e);
/* True when some subscriber may want the request_finished of request <id>: the interest
 * and the largest sample rate. Any thread; cheap (a load and a hash). */
bool gw_event_wanted_request(const char *id);

/* ---- one subscriber's filter ---- */

#define GW_EVENT_MASK(e) (1u << (unsigned)(e))

struct gw_event_filter {
    uint32_t types;               /* GW_EVENT_MASK bits; every event when all are set */
    char client[GW_NAME_MAX + 1]; /* "" = any; else events about another client are left out */
    double sample;                /* request_finished kept at this rate (0..1), default 1 */
};

/* Everything, every client, every request. */
void gw_event_filter_init(struct gw_event_filter *f);
/* <types>: comma-separated event names ("request_finished,upstream_paused").
 * GW_E_BAD_REQUEST (and <bad> pointing at the unknown name, <bad_len> its length) when a
 * name is unknown or the list empty; <f> unchanged then. */
enum gw_code gw_event_filter_set_types(struct gw_event_filter *f, const char *types,
                                       const char **bad, size_t *bad_len);
/* <client>: a client name; GW_E_BAD_REQUEST when empty or longer than a name may be. */
enum gw_code gw_event_filter_set_client(struct gw_event_filter *f, const char *client);
/* <rate>: a decimal number from 0 to 1 ("0.1", "1", "0"); GW_E_BAD_REQUEST otherwise. */
enum gw_code gw_event_filter_set_sample(struct gw_event_filter *f, const char *rate);
/* Whether <f> lets event <ev> through. events_dropped always passes: it is about the
 * stream itself. With a client, request_finished and key_limit_alert pass only when they
 * are that client's; other events pass unless they name another client. */
bool gw_event_filter_pass(const struct gw_event_filter *f, const struct gw_event *ev);

#endif
