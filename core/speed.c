/* SPDX-License-Identifier: MIT
 * core/speed.c - the minimum-speed judge of one streamed answer.
 * Arrivals are summed into per-second buckets on a grid that starts at the first token,
 * kept in a ring of GW_SPEED_BUCKETS seconds. Gaps between arrivals inside one second are
 * under a second, so a silence (a gap of 5 s or more) can only end at the first arrival
 * of a bucket: that bucket records the silence's length, and a judgement subtracts the
 * part of each silence (and of the trailing gap) that lies inside the measured span.
 * A judgement reads at most window_secs + 1 buckets. Pure: no I/O, no clock.
 * Owns:    nothing (caller-provided memory).
 * Threads: one stream on one thread.
 * See:     core/speed.h, tests/unit/core/test_speed.c
 */
#include "core/speed.h"

#include <string.h>

_Static_assert(GW_SPEED_BUCKETS > GW_SPEED_MAX_WINDOW_SECS, "a span needs window + 1 buckets");
_Static_assert((GW_SPEED_BUCKETS & (GW_SPEED_BUCKETS - 1)) == 0, "ring size is a power of two");

/* What one judgement measured. */
struct speed_span {
    uint64_t tokens;    /* arrived within the span */
    uint64_t active_ms; /* span time with the silences taken out */
};

void
gw_speed_init(struct gw_speed *s, unsigned window_secs, unsigned min_tps)
{
    memset(s, 0, sizeof(*s));
    if (window_secs < 1)
        window_secs = 1;
    if (window_secs > GW_SPEED_MAX_WINDOW_SECS)
        window_secs = GW_SPEED_MAX_WINDOW_SECS;
    s->window_ms = (uint64_t)window_secs * 1000;
    s->min_tps = min_tps;
}

/* The grid second that <t_ms> (>= first_ms) falls in. */
static uint64_t
speed_sec(const struct gw_speed *s, uint64_t t_ms)
{
    return (t_ms - s->first_ms) / 1000;
}

void
gw_speed_add(struct gw_speed *s, uint64_t now_ms, uint64_t tokens)
{
    struct gw_speed_bucket *b;
    uint64_t sec;

    if (tokens == 0)
        return;
    if (!s->started) {
        s->started = true;
        s->first_ms = now_ms;
        s->last_ms = now_ms;
    }
    if (now_ms < s->last_ms)
        now_ms = s->last_ms;
    sec = speed_sec(s, now_ms);
    b = &s->ring[sec & (GW_SPEED_BUCKETS - 1)];
    if (b->tokens == 0 || speed_sec(s, b->first_ms) != sec) {
        /* A new second (or a slot last used GW_SPEED_BUCKETS or more seconds ago). The
         * gap from the previous arrival is the only one in this second that can be a
         * silence: later gaps within the second are under a second. */
        b->first_ms = now_ms;
        b->tokens = 0;
        b->silence_ms = now_ms - s->last_ms >= GW_SPEED_SILENCE_MS ? now_ms - s->last_ms : 0;
    }
    b->tokens = b->tokens + tokens < b->tokens ? UINT64_MAX : b->tokens + tokens;
    b->last_ms = now_ms;
    s->last_ms = now_ms;
}

/* Length of [a, b] inside [lo, hi]. */
static uint64_t
speed_overlap(uint64_t a, uint64_t b, uint64_t lo, uint64_t hi)
{
    if (a < lo)
        a = lo;
    if (b > hi)
        b = hi;
    return b > a ? b - a : 0;
}

/* Measures the span ending at <now_ms> (see gw_speed_judge). Requires s->started. */
static struct speed_span
speed_measure(const struct gw_speed *s, uint64_t now_ms)
{
    struct speed_span m = {0, 0};
    uint64_t lo_sec, hi_sec, start_ms, silent = 0;

    if (now_ms < s->last_ms)
        now_ms = s->last_ms;
    /* The window's start, not before the first token, rounded up to the grid. */
    if (now_ms - s->first_ms > s->window_ms)
        lo_sec = (now_ms - s->window_ms - s->first_ms + 999) / 1000;
    else
        lo_sec = 0;
    hi_sec = speed_sec(s, now_ms);
    start_ms = s->first_ms + lo_sec * 1000; /* <= now_ms: window_ms is whole seconds */

    for (uint64_t sec = lo_sec; sec <= hi_sec; sec++) {
        const struct gw_speed_bucket *b = &s->ring[sec & (GW_SPEED_BUCKETS - 1)];

        if (b->tokens == 0 || speed_sec(s, b->first_ms) != sec)
            continue; /* empty, or a second that left the window long ago */
        m.tokens = m.tokens + b->tokens < m.tokens ? UINT64_MAX : m.tokens + b->tokens;
        if (b->silence_ms)
            silent += speed_overlap(b->first_ms - b->silence_ms, b->first_ms, start_ms, now_ms);
    }
    if (now_ms - s->last_ms >= GW_SPEED_SILENCE_MS)
        silent += speed_overlap(s->last_ms, now_ms, start_ms, now_ms);
    /* Silences are disjoint gaps inside [start_ms, now_ms], so they never exceed it. */
    m.active_ms = now_ms - start_ms - silent;
    return m;
}

static double
speed_tps(struct speed_span m)
{
    return m.active_ms ? (double)m.tokens * 1000.0 / (double)m.active_ms : 0.0;
}

enum gw_speed_verdict
gw_speed_judge(struct gw_speed *s, uint64_t now_ms, double *tps)
{
    struct speed_span m;
    double rate;

    if (!s->started) {
        if (tps)
            *tps = 0.0;
        return GW_SPEED_NOT_JUDGED;
    }
    m = speed_measure(s, now_ms);
    rate = speed_tps(m);
    if (tps)
        *tps = rate;
    if (m.active_ms * 2 < s->window_ms)
        return GW_SPEED_NOT_JUDGED;
    /* tokens * 1000 / active_ms < min_tps, compared in integers (as tokens <
     * ceil(min_tps * active_ms / 1000), which cannot overflow: active_ms <= 121 s) so
     * that a rate exactly at the minimum is OK whatever the rounding of the double. */
    if (s->min_tps && m.tokens < (s->min_tps * m.active_ms + 999) / 1000)
        return GW_SPEED_TOO_SLOW;
    return GW_SPEED_OK;
}

double
gw_speed_rate(const struct gw_speed *s, uint64_t now_ms)
{
    if (!s->started)
        return 0.0;
    return speed_tps(speed_measure(s, now_ms));
}
