/* SPDX-License-Identifier: MIT
 * core/health.c - per-upstream shared state: consecutive failures and escalating
 * pauses, the success window (last 50 outcomes within 30 minutes), the TTFC sample ring
 * (last 50 within 30 minutes, median from 3) and the startup link-test seed.
 * Pure: every time is an argument; no clock, no I/O.
 * Locking: one gw_spin (core/spin.h) per upstate guards every field but the name. It
 * is held for a few instructions (a counter update, a ring slot, or copying the two
 * rings out for gw_upstate_facts); sorting for the median happens after it is released.
 * Pause rules (DESIGN.md 6), as decided here:
 *  - failures_to_pause consecutive failures start a pause of pause_secs * 2^pauses
 *    (pauses = pauses in a row so far), capped at max_pause_secs; starting a pause
 *    resets the consecutive count, so the next pause needs failures_to_pause more.
 *  - failures recorded while a pause is running (requests in flight when it started)
 *    are the same outage: they enter the success window but neither count towards the
 *    next pause nor escalate; a Retry-After may still lengthen the pause.
 *  - a Retry-After (capped at 1 h) longer than the pause this call computed pauses
 *    until now + Retry-After, whatever the count; on its own it does not escalate.
 *  - a success resets the count and the escalation and ends a running pause: the upstream
 *    has just answered (it was tried because every candidate was paused, or a stream that
 *    started before the pause ended well).
 *  - the end of each pause is told once (upstream_resumed): by the success that ended it,
 *    or by gw_upstate_take_resumed once its time is over, whichever comes first.
 * Owns:    the registry owns every upstate and its name.
 * Threads: record/facts on any thread; registry calls on main only.
 * See:     core/health.h, core/route.c, tests/unit/core/test_health.c
 */
#include "core/health.h"

#include <string.h>

#include "core/alloc.h"
#include "core/namereg.h"
#include "core/spin.h"

struct gw_outcome {
    uint64_t at_ms;
    bool ok;
};

struct gw_sample {
    uint64_t at_ms;
    uint32_t ttfc_ms;
};

/* Owned by the registry (gw_upstates.names); never moves or dies before gw_upstates_free. */
struct gw_upstate {
    const char *name;    /* the registry's copy, set by main before any snapshot points here */
    struct gw_spin lock; /* only through up_lock/up_unlock */
    /* ---- guarded by lock ---- */
    unsigned consecutive_failures;
    unsigned pauses;
    uint64_t paused_until_ms;
    struct gw_outcome outcomes[GW_HEALTH_OUTCOMES]; /* ring */
    unsigned out_next, out_n;
    struct gw_sample samples[GW_HEALTH_SAMPLES]; /* ring */
    unsigned smp_next, smp_n;
    int32_t link_ms;
    /* The rings' facts as last computed (gw_upstate_facts): they hold while neither ring
     * changed (gen, bumped by every push) and no entry they counted aged out or a
     * stale one could count again (fresh_from <= now <= fresh_to). Routing reads them
     * for every candidate of every request; the rings change once or twice a request. */
    unsigned gen;
    bool have_facts;
    unsigned facts_gen;
    uint64_t fresh_from, fresh_to;
    struct gw_upfacts facts; /* its ring fields only */
};

/* Registry: touched by main only (attach), so a plain growing array. */
struct gw_upstates {
    struct gw_namereg names;
};

/* ---- lock ---- */

/* The previous holder's writes happen before ours: gw_spin_lock's acquire pairs with
 * gw_spin_unlock's release in up_unlock. */
static void
up_lock(struct gw_upstate *u)
{
    gw_spin_lock(&u->lock);
}

static void
up_unlock(struct gw_upstate *u)
{
    gw_spin_unlock(&u->lock);
}

/* ---- registry (main thread) ---- */

struct gw_upstates *
gw_upstates_new(void)
{
    return gw_calloc(1, sizeof(struct gw_upstates));
}

void
gw_upstates_free(struct gw_upstates *r)
{
    if (!r)
        return;
    gw_namereg_fini(&r->names);
    gw_free(r);
}

struct gw_upstate *
gw_upstates_get(struct gw_upstates *r, const char *name)
{
    const char *copy;
    bool created;
    struct gw_upstate *u = gw_namereg_get(&r->names, name, sizeof(*u), &created, &copy);

    if (u && created) {
        /* u->lock: the registry's zeroed object is an unlocked gw_spin. */
        u->name = copy;
        u->link_ms = -1;
    }
    return u;
}

/* ---- recording (any thread) ---- */

/* Caller holds the lock. */
static void
push_outcome(struct gw_upstate *u, uint64_t now_ms, bool ok)
{
    u->outcomes[u->out_next].at_ms = now_ms;
    u->outcomes[u->out_next].ok = ok;
    u->out_next = (u->out_next + 1) % GW_HEALTH_OUTCOMES;
    if (u->out_n < GW_HEALTH_OUTCOMES)
        u->out_n++;
    u->gen++;
}

bool
gw_upstate_success(struct gw_upstate *u, uint64_t now_ms)
{
    bool ended;

    up_lock(u);
    push_outcome(u, now_ms, true);
    u->consecutive_failures = 0;
    u->pauses = 0;
    ended = u->paused_until_ms != 0; /* running, or over but not yet taken as resumed */
    u->paused_until_ms = 0;
    up_unlock(u);
    return ended;
}

/* pause_secs * 2^pauses in ms, at most max_pause_secs (no overflow for any input). */
static uint64_t
pause_len_ms(const struct gw_conf *f, unsigned pauses)
{
    uint64_t secs = f->failover.pause_secs;
    uint64_t cap = f->failover.max_pause_secs;
    unsigned i;

    for (i = 0; i < pauses && secs < cap; i++)
        secs *= 2;
    if (secs > cap)
        secs = cap;
    return secs * 1000;
}

bool
gw_upstate_failure(struct gw_upstate *u, uint64_t now_ms, const struct gw_conf *f,
                   uint64_t retry_after_ms)
{
    uint64_t pause_ms = 0, until;
    bool paused_now, started;

    if (retry_after_ms > GW_HEALTH_RETRY_AFTER_CAP_MS)
        retry_after_ms = GW_HEALTH_RETRY_AFTER_CAP_MS;
    up_lock(u);
    push_outcome(u, now_ms, false);
    until = u->paused_until_ms;
    paused_now = until > now_ms;
    if (!paused_now) {
        u->consecutive_failures++;
        if (f->failover.failures_to_pause > 0 &&
            u->consecutive_failures >= f->failover.failures_to_pause) {
            pause_ms = pause_len_ms(f, u->pauses);
            u->pauses++;
            u->consecutive_failures = 0;
        }
    }
    if (retry_after_ms > pause_ms)
        pause_ms = retry_after_ms;
    started = pause_ms > 0 && now_ms + pause_ms > until;
    if (started)
        u->paused_until_ms = now_ms + pause_ms;
    up_unlock(u);
    return started;
}

void
gw_upstate_sample(struct gw_upstate *u, uint64_t now_ms, uint32_t ttfc_ms)
{
    up_lock(u);
    u->samples[u->smp_next].at_ms = now_ms;
    u->samples[u->smp_next].ttfc_ms = ttfc_ms;
    u->smp_next = (u->smp_next + 1) % GW_HEALTH_SAMPLES;
    if (u->smp_n < GW_HEALTH_SAMPLES)
        u->smp_n++;
    u->gen++;
    up_unlock(u);
}

void
gw_upstate_link_seed(struct gw_upstate *u, uint32_t link_ms)
{
    up_lock(u);
    u->link_ms = link_ms > INT32_MAX ? INT32_MAX : (int32_t)link_ms;
    up_unlock(u);
}

bool
gw_upstate_take_resumed(struct gw_upstate *u, uint64_t now_ms, uint64_t *until_ms)
{
    bool over;

    /* Clearing an expired paused_until_ms changes no decision: gw_upstate_failure and
     * gw_upstate_facts treat a time at or before now like 0. */
    up_lock(u);
    *until_ms = u->paused_until_ms;
    over = *until_ms != 0 && *until_ms <= now_ms;
    if (over)
        u->paused_until_ms = 0;
    up_unlock(u);
    return over;
}

/* ---- facts ---- */

/* Recorded within the last 30 minutes of <now_ms>. A time slightly after now (another
 * thread's clock read a moment later) counts as fresh. */
static bool
is_fresh(uint64_t at_ms, uint64_t now_ms)
{
    return at_ms + GW_HEALTH_OUTCOME_MAX_AGE_MS >= now_ms;
}

/* The facts the rings give at <now_ms> into <out> (its ring fields), from copies of
 * the rings; *<to> is the last time they hold until an entry ages out. */
static void
ring_facts(const struct gw_outcome *outs, unsigned n_out, const struct gw_sample *smps,
           unsigned n_smp, uint64_t now_ms, struct gw_upfacts *out, uint64_t *to)
{
    uint32_t v[GW_HEALTH_SAMPLES];
    unsigned i, j, n, ok;

    /* Ring slots beyond n are zeroed or stale only before the ring first fills; the
     * first n slots are the filled ones until then, and all of them afterwards. */
    *to = UINT64_MAX;
    n = 0;
    ok = 0;
    for (i = 0; i < n_out; i++) {
        if (!is_fresh(outs[i].at_ms, now_ms))
            continue;
        n++;
        ok += outs[i].ok;
        if (outs[i].at_ms + GW_HEALTH_OUTCOME_MAX_AGE_MS < *to)
            *to = outs[i].at_ms + GW_HEALTH_OUTCOME_MAX_AGE_MS;
    }
    out->n_outcomes = n;
    out->success_rate = n >= GW_HEALTH_MIN_OUTCOMES ? (double)ok / n : -1.0;

    n = 0;
    for (i = 0; i < n_smp; i++) {
        uint32_t x;

        if (!is_fresh(smps[i].at_ms, now_ms))
            continue;
        if (smps[i].at_ms + GW_HEALTH_OUTCOME_MAX_AGE_MS < *to)
            *to = smps[i].at_ms + GW_HEALTH_OUTCOME_MAX_AGE_MS;
        /* insertion sort: at most 50 values */
        x = smps[i].ttfc_ms;
        for (j = n; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
        n++;
    }
    out->n_samples = n;
    if (n < GW_HEALTH_MIN_SAMPLES) {
        out->ttfc_median_ms = -1;
    } else {
        uint64_t m = n % 2 ? v[n / 2] : ((uint64_t)v[n / 2 - 1] + v[n / 2]) / 2;

        out->ttfc_median_ms = m > INT32_MAX ? INT32_MAX : (int32_t)m;
    }
}

void
gw_upstate_facts(struct gw_upstate *u, uint64_t now_ms, struct gw_upfacts *out)
{
    struct gw_outcome outs[GW_HEALTH_OUTCOMES];
    struct gw_sample smps[GW_HEALTH_SAMPLES];
    unsigned n_out, n_smp, gen;
    uint64_t until, to;

    up_lock(u);
    until = u->paused_until_ms;
    out->consecutive_failures = u->consecutive_failures;
    out->pauses = u->pauses;
    out->link_ms = u->link_ms;
    out->paused_until_ms = until > now_ms ? until : 0;
    if (u->have_facts && u->facts_gen == u->gen && u->fresh_from <= now_ms &&
        now_ms <= u->fresh_to) {
        out->n_outcomes = u->facts.n_outcomes;
        out->success_rate = u->facts.success_rate;
        out->n_samples = u->facts.n_samples;
        out->ttfc_median_ms = u->facts.ttfc_median_ms;
        up_unlock(u);
        return;
    }
    /* Copy out under the lock; filter and sort after releasing it. */
    gen = u->gen;
    n_out = u->out_n;
    n_smp = u->smp_n;
    memcpy(outs, u->outcomes, sizeof(outs));
    memcpy(smps, u->samples, sizeof(smps));
    up_unlock(u);

    ring_facts(outs, n_out, smps, n_smp, now_ms, out, &to);

    /* Kept for the next readers unless the rings changed meanwhile. An entry stale at
     * now_ms could be fresh at an earlier time (another thread's clock): the facts hold
     * from now_ms on. */
    up_lock(u);
    if (u->gen == gen) {
        u->have_facts = true;
        u->facts_gen = gen;
        u->fresh_from = now_ms;
        u->fresh_to = to;
        u->facts = *out;
    }
    up_unlock(u);
}
