/* SPDX-License-Identifier: MIT
 * net/deadline.c - the lazy timer of net/deadline.h.
 * Owns:    nothing.
 * Threads: the event's loop only.
 * See:     net/deadline.h
 */
#include "net/deadline.h"

#include <sys/time.h>

#include <event2/event.h>

#include "net/logger.h"

static void
add_for_rest(struct net_deadline *d, uint64_t now_ms)
{
    uint64_t ms = d->due_ms > now_ms ? d->due_ms - now_ms : 0;
    struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

    event_add(d->ev, &tv);
    d->at_ms = d->due_ms;
}

void
net_deadline_set(struct net_deadline *d, uint64_t ms)
{
    uint64_t now = net_mono_us() / 1000;

    d->due_ms = now + ms;
    if (d->at_ms && d->at_ms <= d->due_ms && d->due_ms - d->at_ms < NET_TIMER_SLACK_MS)
        return;
    add_for_rest(d, now);
}

void
net_deadline_lift(struct net_deadline *d)
{
    d->due_ms = 0;
}

void
net_deadline_stop(struct net_deadline *d)
{
    event_del(d->ev);
    d->due_ms = 0;
    d->at_ms = 0;
}

bool
net_deadline_fired(struct net_deadline *d)
{
    uint64_t now = net_mono_us() / 1000;

    d->at_ms = 0;
    if (d->due_ms == 0)
        return false;
    if (now < d->due_ms) { /* the deadline moved after the timer was added: the rest */
        add_for_rest(d, now);
        return false;
    }
    return true;
}
