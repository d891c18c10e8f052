/* SPDX-License-Identifier: MIT
 * net/deadline.h - a lazy timer: a deadline kept in a field, the libevent timer added
 * only when it must fire sooner, or later by NET_TIMER_SLACK_MS or more. A deadline
 * moved often (the client connection's idle deadline after every answer, the upstream
 * exchange's head deadline every request) then costs a store, not an event_add and an
 * event_del. The timer fires at or before the deadline; its callback asks
 * net_deadline_fired, which re-adds it for the rest when it came early. Nothing times
 * out early.
 * Owns:    nothing (the event is its owner's).
 * Threads: the event's loop only.
 * See:     net/deadline.c, net/http1.c, net/upstream.c
 */
#ifndef GW_NET_DEADLINE_H
#define GW_NET_DEADLINE_H

#include <stdbool.h>
#include <stdint.h>

struct event;

/* A deadline later than the pending timer by less than this keeps the timer. */
#define NET_TIMER_SLACK_MS 1000

struct net_deadline {
    struct event *ev; /* a timer event of the owner's, its callback the owner's */
    uint64_t due_ms;  /* the deadline (net_mono_us / 1000); 0: none */
    uint64_t at_ms;   /* when ev fires; 0: not pending */
};

/* The deadline <ms> from now (0: at once). */
void net_deadline_set(struct net_deadline *d, uint64_t ms);
/* No deadline; a pending timer stays, and net_deadline_fired says false when it fires. */
void net_deadline_lift(struct net_deadline *d);
/* No deadline and no pending timer (before the event is freed or given to another use). */
void net_deadline_stop(struct net_deadline *d);
/* In ev's callback: true when the deadline has come. False when there is none, or when
 * the timer came early (it is added again for the rest). */
bool net_deadline_fired(struct net_deadline *d);

#endif
