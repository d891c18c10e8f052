/* SPDX-License-Identifier: MIT
 * core/events.c - the operator event ring (MPSC ck_ring of heap entries).
 * Owns:    the ring and the entries on it.
 * Threads: push on any thread, take on the control thread.
 * See:     core/events.h
 */
#include "core/events.h"

#include <ck_pr.h>
#include <ck_ring.h>
#include <string.h>

#include "core/alloc.h"
#include "core/tsan.h"

#define EVENTS_RING_SIZE 1024 /* power of two; holds EVENTS_RING_SIZE - 1 events */

struct event_entry {
    enum gw_event_name name;
    char json[]; /* NUL-terminated */
};

static ck_ring_t ev_ring;
static ck_ring_buffer_t ev_slots[EVENTS_RING_SIZE];
static uint64_t ev_drops;

static const char *const ev_names[GW_EV__COUNT] = {
#define GW_EVENT(e, s) [e] = s,
#include "core/events.def"
#undef GW_EVENT
};

void
gw_events_init(void)
{
    ck_ring_init(&ev_ring, EVENTS_RING_SIZE);
}

const char *
gw_event_str(enum gw_event_name e)
{
    return (unsigned)e < GW_EV__COUNT ? ev_names[e] : "unknown";
}

void
gw_event_push(enum gw_event_name e, const char *json)
{
    size_t n = strlen(json);
    struct event_entry *x;

    x = gw_malloc(sizeof(*x) + n + 1);
    if (!x) {
        ck_pr_inc_64(&ev_drops);
        return;
    }
    x->name = e;
    memcpy(x->json, json, n + 1);
    GW_TSAN_RELEASE(&ev_ring); /* the entry is handed to the control thread */
    if (!ck_ring_enqueue_mpsc(&ev_ring, ev_slots, x)) {
        ck_pr_inc_64(&ev_drops); /* relaxed: a statistic */
        gw_free(x);
    }
}

char *
gw_event_take(enum gw_event_name *e)
{
    struct event_entry *x;
    char *json = NULL;
    size_t n;

    /* Out of memory for the copy drops that event, counted like a full ring's, and goes
     * on to the next: NULL must keep meaning "none left" to the caller's loop. */
    while (!json) {
        if (!ck_ring_dequeue_mpsc(&ev_ring, ev_slots, &x))
            return NULL;
        GW_TSAN_ACQUIRE(&ev_ring);
        *e = x->name;
        n = strlen(x->json);
        json = gw_malloc(n + 1);
        if (json)
            memcpy(json, x->json, n + 1);
        else
            ck_pr_inc_64(&ev_drops); /* relaxed: a statistic */
        gw_free(x);
    }
    return json;
}

uint64_t
gw_events_dropped(void)
{
    return ck_pr_load_64(&ev_drops);
}
