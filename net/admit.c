/* SPDX-License-Identifier: MIT
 * net/admit.c - admission (DESIGN.md 7, 8): calendar key limits refuse, the key's
 * max_concurrent permit is waited for (key gate), rolling key limits wait or refuse,
 * and a hop whose upstream slots are all full waits for the first to free, within
 * failover.slot_wait_secs from the key gate on. Grants from other threads arrive on
 * the worker's grant stack (net_stream_on_grant).
 * Owns:    the stream's waits and timers for them.
 * Threads: the owning worker only; never blocks.
 * See:     net/pipeline-priv.h, core/slots.h, core/limits.h
 */
#include "net/pipeline-priv.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/cost.h"
#include "core/events.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/retry.h"
#include "core/route.h"
#include "core/row.h"
#include "core/slots.h"
#include "core/speed.h"
#include "core/sse.h"
#include "core/sticky.h"
#include "dialects/anthropic.h"
#include "dialects/json_scan.h"
#include "dialects/openai.h"
#include "net/calendar.h"
#include "net/logger.h"
#include "net/sink.h"
#include "net/upstream.h"
#include "store/store.h"

static void on_wait_timeout(evutil_socket_t fd, short what, void *arg);
static void after_key_gate(struct net_stream *s);
static void busy_remove(struct net_stream *s, unsigned idx);
static void on_limit_wait(evutil_socket_t fd, short what, void *arg);

/* Arms the wait's timer for what is left of <until_us> (monotonic). */
static bool
wait_arm(struct net_stream *s, uint64_t until_us)
{
    uint64_t now = net_mono_us(), left = until_us > now ? until_us - now : 0;
    struct timeval tv = {(time_t)(left / 1000000), (suseconds_t)(left % 1000000)};

    if (!s->wait_timer)
        s->wait_timer = evtimer_new(s->w->base, on_wait_timeout, s);
    if (!s->wait_timer)
        return false;
    evtimer_add(s->wait_timer, &tv);
    return true;
}

/* Every candidate left is full: wait for the first of them to free, in candidate
 * order, until the request's deadline. When none can be waited for (no deadline left,
 * slot_wait_secs 0), the request ends at once as busy. */
void
net_hop_wait(struct net_stream *s)
{
    unsigned i, idx;

    if (!s->n_busy || net_mono_us() >= s->deadline_us) {
        on_wait_timeout(-1, 0, s);
        return;
    }
    gw_slots_wait_init(&s->wait, s, s->w->id);
    s->waiting = NET_WAIT_HOP;
    s->wait_gave_up = false;
    s->wait_t0_us = net_mono_us();
    for (i = 0; i < s->n_busy; i++) {
        if (gw_slots_wait_add(&s->wait, s->cands[s->busy[i]].prov->slots, s->busy[i])) {
            /* a slot freed meanwhile: taken for us, no grant message will come */
            gw_slots_wait_cancel(&s->wait, &idx);
            s->waiting = NET_WAIT_NONE;
            s->hop_slot = s->cands[idx].prov->slots;
            s->hop_queued_ms += net_ms_since(s->wait_t0_us, net_mono_us());
            s->cur = idx;
            busy_remove(s, idx);
            net_hop_send(s, &s->cands[idx]);
            return;
        }
    }
    if (!wait_arm(s, s->deadline_us)) {
        if (gw_slots_wait_cancel(&s->wait, &idx)) {
            s->wait_gave_up = true; /* its grant message is on its way */
            s->wait_won = idx;
        }
        return;
    }
}

bool
net_prov_has_slot_limit(const struct gw_conf_provider *p)
{
    return p->max_concurrent && p->slots;
}

/* Takes candidate <idx> out of the full ones: it was granted and is tried now. */
static void
busy_remove(struct net_stream *s, unsigned idx)
{
    unsigned i;

    for (i = 0; i < s->n_busy; i++)
        if (s->busy[i] == idx) {
            memmove(&s->busy[i], &s->busy[i + 1], (s->n_busy - i - 1) * sizeof(s->busy[0]));
            s->n_busy--;
            return;
        }
}

/* Remembers candidate <idx> as full, once: after a granted hop fails, the walk goes on
 * past candidates already found full. */
void
net_busy_add(struct net_stream *s, unsigned idx)
{
    unsigned i;

    for (i = 0; i < s->n_busy; i++)
        if (s->busy[i] == idx)
            return;
    if (s->n_busy < GW_ROUTE_MAX)
        s->busy[s->n_busy++] = idx;
}

/* The wait ran out (or could not start): the key gate answers gw.key_busy; an upstream
 * wait answers gw.busy_all when no hop reached an upstream, else the last failure. */
static void
on_wait_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct net_stream *s = arg;
    struct net_retry_hdrs rh;
    unsigned idx;
    int kind = s->waiting;

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (kind != NET_WAIT_NONE) {
        if (gw_slots_wait_cancel(&s->wait, &idx)) {
            /* a grant won the race: its message is on its way and is handled there */
            s->wait_gave_up = true;
            s->wait_won = idx;
            return;
        }
        s->waiting = NET_WAIT_NONE;
        s->row->queued_ms += net_ms_since(s->wait_t0_us, net_mono_us());
    }
    if (kind == NET_WAIT_KEY) {
        s->row->n_attempts = 0; /* refused before any hop: no attempt chain */
        net_stream_refuse_hdrs(s, GW_E_KEY_BUSY,
                               "this key already runs its max_concurrent requests; retry shortly",
                               rh.h, net_retry_headers(&rh, 1000, true), true);
        return;
    }
    if (!s->reached_upstream) {
        net_stream_refuse_hdrs(s, GW_E_BUSY_ALL,
                               "every upstream for this model is at its concurrency limit", rh.h,
                               net_retry_headers(&rh, 1000, true), true);
        return;
    }
    s->n_busy = 0;
    s->cur = s->n_cands;
    net_hop_next(s); /* answers the last real failure */
}

void
net_stream_on_grant(struct net_stream *s)
{
    unsigned idx = 0;
    int kind;

    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (s->zombie) {
        net_stream_free(s); /* finished while its grant was on the way (the slot went back) */
        return;
    }
    kind = s->waiting;
    if (kind == NET_WAIT_NONE)
        return;
    if (s->wait_gave_up)
        idx = s->wait_won;
    else if (!gw_slots_wait_cancel(&s->wait, &idx))
        return; /* cannot happen: a grant message means a win */
    s->waiting = NET_WAIT_NONE;
    if (s->wait_timer)
        evtimer_del(s->wait_timer);
    if (kind == NET_WAIT_KEY) {
        s->key_slot = s->client->slots;
        s->row->queued_ms += net_ms_since(s->wait_t0_us, net_mono_us());
        after_key_gate(s);
        return;
    }
    s->hop_slot = s->cands[idx].prov->slots;
    s->hop_queued_ms += net_ms_since(s->wait_t0_us, net_mono_us());
    s->row->queued_ms += net_ms_since(s->wait_t0_us, net_mono_us());
    s->cur = idx;
    busy_remove(s, idx);
    net_hop_send(s, &s->cands[idx]);
}

/* A key usage limit said no (DESIGN.md 8): 429 with the exact Retry-After. A calendar
 * limit tells the SDK not to retry (x-should-retry: false; OpenAI shape:
 * insufficient_quota); a rolling one may be retried. */
/* DESIGN.md 8: a running request reserves the cost of its input estimate at the input
 * price of the first candidate it will try (0 when that model has no price). */
int64_t
net_stream_input_cost(const struct net_stream *s)
{
    size_t i;

    for (i = 0; i < s->n_cands; i++) {
        const struct gw_route_cand *c = &s->cands[i];
        double price;

        if (!net_prov_spoken(c->prov) || c->state == GW_CAND_DISABLED)
            continue;
        price = gw_conf_price_input(s->conf, c->prov, c->model);
        return price > 0 ? (int64_t)(price * (double)s->est_tokens + 0.5) : 0;
    }
    return 0;
}

void
net_limit_refuse(struct net_stream *s, const struct gw_limit_verdict *v, bool calendar)
{
    struct net_retry_hdrs rh;
    size_t n = net_retry_headers(&rh, v->retry_after_ms, !calendar);

    s->row->n_attempts = 0; /* refused before any hop: no attempt chain (DESIGN.md 8) */
    net_stream_refuse_hdrs(s, v->code,
                           calendar
                               ? "this key's usage limit for the period is used up"
                               : "this key's rolling usage limit is reached; retry after the delay",
                           rh.h, n, true);
}

/* The rolling key limits (minute, hour): admitted now, waited for within the request's
 * deadline, or refused. The admission counts the request's reservation. */
static void
limit_admit(struct net_stream *s)
{
    struct gw_keylimits *k = s->client->usage;
    struct gw_limit_verdict v;
    struct gw_period cal;
    uint64_t now = net_now_ms();

    if (!k || !s->client->n_limits) {
        net_hop_next(s);
        return;
    }
    net_calendar(now, &cal);
    switch (gw_keylimits_admit(k, now, &cal, s->est_tokens, s->est_cost_micros, &s->quota, &v)) {
    case GW_LIMIT_OK:
        if (gw_keylimits_has_alerts(k))
            net_stream_emit_alerts(
                s); /* a threshold crossed by the reservation: now, not at the end */
        net_hop_next(s);
        return;
    case GW_LIMIT_REFUSE_CALENDAR: net_limit_refuse(s, &v, true); return;
    case GW_LIMIT_WAIT_ROLLING:
        if (net_mono_us() + v.retry_after_ms * 1000 <= s->deadline_us) {
            struct timeval tv = {(time_t)(v.retry_after_ms / 1000),
                                 (suseconds_t)(v.retry_after_ms % 1000) * 1000};

            if (!s->limit_timer)
                s->limit_timer = evtimer_new(s->w->base, on_limit_wait, s);
            if (s->limit_timer && evtimer_add(s->limit_timer, &tv) == 0) {
                s->row->queued_ms += (uint32_t)v.retry_after_ms;
                return;
            }
        }
        net_limit_refuse(s, &v, false);
        return;
    }
}

static void
on_limit_wait(evutil_socket_t fd, short what, void *arg)
{
    struct net_stream *s = arg;

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    limit_admit(s);
}

static void
after_key_gate(struct net_stream *s)
{
    s->deadline_us = net_mono_us() + (uint64_t)s->conf->failover.slot_wait_secs * 1000000u;
    limit_admit(s);
}

/* The key's max_concurrent permit (held until the answer ends, streams included):
 * taken now, or waited for at most slot_wait_secs, then 429 gw.key_busy. */
void
net_key_gate(struct net_stream *s)
{
    struct gw_slots *ks = s->client->slots;
    unsigned idx;

    /* Held without a limit too (max 0 always has room): the key view's in_flight. */
    if (!ks || gw_slots_try(ks)) {
        s->key_slot = ks;
        after_key_gate(s);
        return;
    }
    gw_slots_wait_init(&s->wait, s, s->w->id);
    s->waiting = NET_WAIT_KEY;
    s->wait_gave_up = false;
    s->wait_t0_us = net_mono_us();
    if (gw_slots_wait_add(&s->wait, ks, 0)) {
        gw_slots_wait_cancel(&s->wait, &idx); /* taken at once: no message will come */
        s->waiting = NET_WAIT_NONE;
        s->key_slot = ks;
        after_key_gate(s);
        return;
    }
    if (!s->conf->failover.slot_wait_secs ||
        !wait_arm(s, s->wait_t0_us + (uint64_t)s->conf->failover.slot_wait_secs * 1000000u))
        on_wait_timeout(-1, 0, s);
}
