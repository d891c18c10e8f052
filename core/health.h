/* SPDX-License-Identifier: MIT
 * core/health.h - per-upstream shared state (DESIGN.md 5, 6): consecutive failures and
 * pauses with escalation, the success window, time-to-first-content samples, the
 * startup link-test seed. One gw_upstate per provider name for the life of the process,
 * so health survives reloads; the registry hands the same object to every snapshot.
 * Pure: times are arguments (ms since the epoch); no clock, no I/O.
 * Owns:    the registry owns every gw_upstate; a snapshot only points at them.
 * Threads: record/facts on any worker or the control thread (a spinlock per upstate,
 *          held for a few instructions, never across an allocation or a call out);
 *          registry calls on main only.
 * See:     core/health.c, core/route.h, tests/unit/core/test_health.c
 */
#ifndef GW_CORE_HEALTH_H
#define GW_CORE_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/conf.h"

#define GW_HEALTH_OUTCOMES 50                          /* success window: last 50 outcomes ... */
#define GW_HEALTH_OUTCOME_MAX_AGE_MS (30u * 60 * 1000) /* ... within 30 minutes */
#define GW_HEALTH_MIN_OUTCOMES 5                       /* fewer: no success rate reported */
#define GW_HEALTH_SAMPLES 50    /* TTFC samples kept (same 30-minute age limit) */
#define GW_HEALTH_MIN_SAMPLES 3 /* fewer: no median for balance_by / url-test */
#define GW_HEALTH_RETRY_AFTER_CAP_MS (3600u * 1000) /* a 429's Retry-After pauses at most 1 h */

struct gw_upstate;
struct gw_upstates;

/* What the routing engine and the views read about one upstream at <now_ms>. */
struct gw_upfacts {
    uint64_t paused_until_ms; /* 0 = not paused (or the pause is over at now) */
    unsigned consecutive_failures;
    unsigned pauses;        /* pauses in a row without a success (escalation level) */
    int32_t ttfc_median_ms; /* -1: fewer than GW_HEALTH_MIN_SAMPLES real samples */
    unsigned n_samples;     /* real samples in the window */
    double success_rate;    /* -1: fewer than GW_HEALTH_MIN_OUTCOMES outcomes */
    unsigned n_outcomes;
    int32_t link_ms; /* startup link-test (connect + TLS) time, -1 none */
};

/* ---- registry (main thread) ---- */

struct gw_upstates *gw_upstates_new(void);
/* Frees every upstate. At exit, when no thread uses them any more. */
void gw_upstates_free(struct gw_upstates *r);
/* The upstate of provider <name>, created on first use; NULL when out of memory. */
struct gw_upstate *gw_upstates_get(struct gw_upstates *r, const char *name);

/* ---- recording (any thread) ---- */

/* An answer (client errors such as 400 count as answered): success window +1;
 * consecutive failures, the pause escalation and a running pause reset. Returns true when
 * it ended a pause whose end was not told yet (running, or over but not yet taken by
 * gw_upstate_take_resumed): the caller tells that the upstream resumed. */
bool gw_upstate_success(struct gw_upstate *u, uint64_t now_ms);

/* A failure (connect error, timeout, 408/429/5xx, 401/403, a drop before content, a
 * too-slow cut). After <f>->failures_to_pause consecutive failures the upstream pauses
 * for pause_secs * 2^(pauses so far), at most max_pause_secs. A <retry_after_ms> longer
 * than that pause (a 429's Retry-After; 0 = none) pauses until then, capped at an hour,
 * whatever the count. Returns true when this call started (or lengthened) a pause. */
bool gw_upstate_failure(struct gw_upstate *u, uint64_t now_ms, const struct gw_conf *f,
                        uint64_t retry_after_ms);

/* True, once per pause, when <u>'s pause is over at <now_ms> (its time ran out) and its
 * end was not told yet; then *<until_ms> is when it ended. The control thread sweeps the
 * upstreams with it to tell upstream_resumed. */
bool gw_upstate_take_resumed(struct gw_upstate *u, uint64_t now_ms, uint64_t *until_ms);

/* A time-to-first-content sample of <ttfc_ms> (a hop's send -> its first content). */
void gw_upstate_sample(struct gw_upstate *u, uint64_t now_ms, uint32_t ttfc_ms);

/* The startup link-test time; stands in for url-test ordering until 3 real samples. */
void gw_upstate_link_seed(struct gw_upstate *u, uint32_t link_ms);

/* A snapshot of the state at <now_ms> (samples and outcomes older than 30 min left out). */
void gw_upstate_facts(struct gw_upstate *u, uint64_t now_ms, struct gw_upfacts *out);

#endif
