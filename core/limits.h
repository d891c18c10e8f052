/* SPDX-License-Identifier: MIT
 * core/limits.h - per-key usage limits (DESIGN.md 8, 18): counting, admission with
 * reservations, settlement, rebuild from stored rows, alerts and views.
 * Pure: no clock and no time-zone lookup. The caller passes <now_ms> (ms since the
 * epoch) and, for the calendar periods, the current day / week / month as start and end
 * instants it computed from the machine's local calendar (struct gw_period).
 *
 * What is counted. Every key counts every period and every measure, whether a limit
 * names it or not, so a reload that adds or changes limits needs no rebuild:
 *   - requests: 1 per request that may have reached an upstream;
 *   - tokens: uncached input + cache writes + output, plus cache reads for an entry
 *     written with `cache_reads: true` (both sums are kept);
 *   - cost: micro-dollars (USD * 1e6); negative amounts count as 0.
 * Periods: `minute` and `hour` are rolling windows with one bucket per second: usage
 * counted at second s (floor(ms / 1000)) stops counting at (s + 60) * 1000 ms (minute)
 * or (s + 3600) * 1000 ms (hour). `day`, `week` (from Monday) and `month` are the
 * calendar periods the caller passes; a period that starts where the last one ended
 * starts from zero.
 * Where a request counts. A request counts in the second and the calendar periods of
 * its admission; its settlement adjusts those same buckets even when time has moved
 * on. Usage settled after its bucket left a rolling window, or after its calendar period
 * ended, is dropped (it never counts in a later period). Rebuild counts a stored row at
 * its ts_ms with the same rule, so live counting and rebuild agree. A window's time only
 * moves forward: a request admitted with a clock more than a window behind the latest
 * second seen (a clock stepped back) counts at that latest second.
 *
 * Admission (gw_keylimits_admit). Every entry must pass. An entry with max M, used U
 * and the request's need x (1 request, its input token estimate, or its estimated cost)
 * passes when U + x <= M, or when U is 0 (a request larger than the whole limit passes
 * only into an empty period or window). Calendar entries are checked first: one that
 * fails refuses the request until its period ends (GW_LIMIT_REFUSE_CALENDAR,
 * gw.key_limit.<measure>_per_period). Then rolling entries: one that fails makes the
 * request wait (GW_LIMIT_WAIT_ROLLING, gw.key_limit.<measure>_rolling) until the exact
 * instant enough usage has left the window for every rolling entry to pass, assuming
 * nothing else is counted meanwhile; the caller waits within its deadline and admits
 * again, or answers 429 with that Retry-After. A request that passes is counted at once
 * (1 request + its token estimate + its cost estimate) in every period: its reservation.
 * Nothing is counted for a refused or waiting request.
 *
 * Alerts: each entry raises a key_limit_alert at 80% and at 100% once per period: per
 * calendar period, or for a rolling entry at most once per window length (60 s, 1 h).
 * 80%: used >= M - floor(M / 5). 100%: used >= M, or the entry stopped a request.
 * Crossings are noticed on admit and settle. Rebuild marks thresholds it crosses as
 * already announced (they were announced before the restart), silently.
 *
 * Owns:    the registry owns every struct gw_keylimits, for the life of the process;
 *          reservations, verdicts, alerts and views are caller-owned plain data.
 * Threads: every gw_keylimits_* call on any thread: one test-and-test-and-set spinlock
 *          per key, held for a few hundred instructions at most (a scan of at most 3600
 *          buckets when a rolling limit is reached), never across an allocation.
 *          gw_keylimits_reg_get/find on any thread (lock-free lookup).
 * See:     core/limits.c, tests/unit/core/test_limits.c, core/conf.h (struct gw_conf_limit)
 */
#ifndef GW_CORE_LIMITS_H
#define GW_CORE_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/conf.h"
#include "core/row-t.h"

#define GW_KEYLIMITS_MAX_ENTRIES 16 /* 5 periods x 3 measures fit; more are not kept */
#define GW_KEYLIMITS_MAX_ALERTS 32  /* pending alerts per key; more are dropped, counted */

enum gw_limit_measure {
    GW_LIMIT_REQUESTS = 0,
    GW_LIMIT_TOKENS,
    GW_LIMIT_COST, /* micro-dollars */
};

enum gw_limit_decision {
    GW_LIMIT_OK = 0,          /* admitted; the reservation is counted */
    GW_LIMIT_REFUSE_CALENDAR, /* 429 until the period ends, x-should-retry: false */
    GW_LIMIT_WAIT_ROLLING,    /* wait until retry_at_ms (within the deadline) or 429 */
};

/* One calendar period, [start_ms, end_ms) in ms since the epoch. */
struct gw_period_span {
    uint64_t start_ms, end_ms;
};

/* The current calendar periods, computed by the caller from the local calendar. */
struct gw_period {
    struct gw_period_span day;
    struct gw_period_span week; /* from Monday 00:00 */
    struct gw_period_span month;
};

/* What gw_keylimits_admit counted for one request, and where. Caller-owned plain data;
 * zero it or leave it to admit; settle it exactly once (a second settle is a no-op). */
struct gw_limit_reservation {
    bool active;          /* counted and not yet settled */
    uint64_t tokens;      /* the input estimate counted */
    uint64_t cost_micros; /* the cost estimate counted */
    bool in_roll[2];      /* counted in the minute / hour window ... */
    uint64_t roll_sec[2]; /* ... in this second's bucket */
    uint32_t cal_gen[3];  /* day / week / month generation it was counted in */
};

/* Why a request was not admitted (code GW_OK and zeros when it was). */
struct gw_limit_verdict {
    enum gw_code code;     /* GW_E_KEY_LIMIT_* of the deciding entry */
    enum gw_limit_per per; /* the deciding entry */
    enum gw_limit_measure measure;
    uint64_t used, max;      /* its usage and limit at the decision */
    uint64_t retry_at_ms;    /* when it may pass: the period end, or the exact instant */
    uint64_t retry_after_ms; /* retry_at_ms - now_ms (>= 1 when not admitted) */
};

/* A key_limit_alert event. */
struct gw_limit_alert {
    char client[GW_NAME_MAX + 1];
    enum gw_limit_per per;
    enum gw_limit_measure measure;
    unsigned percent;      /* 80 or 100 */
    uint64_t used, max;    /* cost in micro-dollars */
    uint64_t resets_at_ms; /* as in struct gw_limit_view */
    uint64_t at_ms;        /* when it was noticed */
};

/* One entry as the control plane shows it. */
struct gw_limit_view {
    enum gw_limit_per per;
    enum gw_limit_measure measure;
    bool cache_reads;
    uint64_t max, used;    /* cost in micro-dollars */
    uint64_t resets_at_ms; /* calendar: the period end (0 before any period was given);
                            * rolling: when the oldest usage still counted leaves the
                            * window, or now when none is */
    bool reached;          /* used >= max */
};

struct gw_keylimits;
struct gw_keylimits_reg;

/* ---- registry ---- */

/* A new, empty registry; NULL when out of memory. Usually one per process, created at
 * startup before the workers. */
struct gw_keylimits_reg *gw_keylimits_reg_new(void);

/* Frees <reg> and every key in it (NULL is fine). At exit, when no thread uses them. */
void gw_keylimits_reg_free(struct gw_keylimits_reg *reg);

/* The key of client <name> (NUL-terminated, at most GW_NAME_MAX bytes), created empty
 * on first use; it lives as long as <reg>, so its totals survive reloads. When <created>
 * is not NULL it is set to true when this call created the key: the caller then rebuilds
 * its totals from the store (gw_keylimits_rebuild_add with both flags) before admitting
 * through it. NULL when out of memory or <name> is empty or too long. Any thread; a
 * lookup of an existing key takes no lock; creation allocates and takes the registry
 * lock briefly. */
struct gw_keylimits *gw_keylimits_reg_get(struct gw_keylimits_reg *reg, const char *name,
                                          bool *created);

/* The key of client <name> or NULL when it was never created. Any thread, lock-free. */
struct gw_keylimits *gw_keylimits_reg_find(const struct gw_keylimits_reg *reg, const char *name);

/* The client name of <k> (NUL-terminated, immutable). */
const char *gw_keylimits_name(const struct gw_keylimits *k);

/* ---- configuration ---- */

/* Installs the <n> entries of <limits> (a client's clients[].limits) on <k>. A
 * gw_conf_limit with several measures becomes one entry per measure; one with none, or
 * with a max of 0, is skipped (validation refuses both). Counted usage is kept whatever
 * changes; an entry whose (per, measure, max) stays also keeps its alert state. Returns
 * GW_OK, or GW_E_CFG_RANGE when more than GW_KEYLIMITS_MAX_ENTRIES entries result (the
 * first ones are kept). <limits> is copied. Any thread (main at reload); no allocation. */
enum gw_code gw_keylimits_configure(struct gw_keylimits *k, const struct gw_conf_limit *limits,
                                    size_t n);

/* ---- admission and settlement ---- */

/* Decides whether a request of key <k> may start at <now_ms>, with the current calendar
 * periods <cal> (NULL keeps the periods last given), <est_tokens> its input token
 * estimate and <est_cost_micros> its estimated input cost on its first candidate.
 * GW_LIMIT_OK: the request is counted as described in the file comment and <*res> says
 * where; the caller must settle it. Otherwise nothing is counted, <res->active> is false
 * and <*v> names the deciding entry with its retry time. <res> is required; <v> may be
 * NULL. Any thread; never blocks; may allocate (a window growing, outside the lock). */
enum gw_limit_decision gw_keylimits_admit(struct gw_keylimits *k, uint64_t now_ms,
                                          const struct gw_period *cal, uint64_t est_tokens,
                                          int64_t est_cost_micros, struct gw_limit_reservation *res,
                                          struct gw_limit_verdict *v);

/* The calendar half of gw_keylimits_admit, counting nothing: GW_LIMIT_REFUSE_CALENDAR
 * (with <*v> as admit fills it) when a day / week / month entry would refuse the
 * request, else GW_LIMIT_OK. For the order of DESIGN.md 7: check the calendar limits,
 * then take the key's max_concurrent permit, then admit (which checks everything
 * again and reserves). A refusal raises the entry's 100% alert like admit. <v> may be
 * NULL. Any thread; never blocks. */
enum gw_limit_decision gw_keylimits_check_calendar(struct gw_keylimits *k, uint64_t now_ms,
                                                   const struct gw_period *cal, uint64_t est_tokens,
                                                   int64_t est_cost_micros,
                                                   struct gw_limit_verdict *v);

/* Settles reservation <res> of key <k> at <now_ms>. <reached_upstream> (some hop was
 * sent; gw_keylimits_row_counts on the request's row says the same): the estimates are
 * replaced by the usage <u> (NULL: none) and <cost_micros>. Otherwise (refused, busy,
 * unconvertible) everything reserved is given back, the request included. Buckets and
 * periods are those recorded in <res>; a bucket that has left its window, or a calendar
 * period that has ended, is not touched. <res> becomes inactive; settling an inactive
 * reservation does nothing. Any thread; never blocks. */
void gw_keylimits_settle(struct gw_keylimits *k, struct gw_limit_reservation *res, uint64_t now_ms,
                         const struct gw_usage *u, int64_t cost_micros, bool reached_upstream);

/* A settlement kept to be applied later with others (gw_keylimits_settle_all):
 * gw_keylimits_settle's arguments, copied. */
struct gw_limit_settlement {
    struct gw_keylimits *k;
    struct gw_limit_reservation res;
    uint64_t now_ms;
    struct gw_usage usage;
    int64_t cost_micros;
    bool reached_upstream;
};

/* Applies <v>[0..n) as gw_keylimits_settle would one after the other, each key locked
 * once for all of its settlements (a worker's loop turn ends several requests of one
 * key: one lock and one trip of the key's lines between CPUs, not one per request).
 * Each entry's k becomes NULL. Any thread. */
void gw_keylimits_settle_all(struct gw_limit_settlement *v, size_t n);

/* ---- rebuild from stored rows ---- */

#define GW_KEYLIMITS_F_CALENDAR 1u /* add rows to the day / week / month totals */
#define GW_KEYLIMITS_F_ROLLING 2u  /* add rows of the last hour to the rolling windows */

/* True when <row> counts against its client's limits: some attempt was sent to an
 * upstream (an outcome other than none, refused and skipped:*). The rule of live
 * settlement's <reached_upstream>. Any thread. */
bool gw_keylimits_row_counts(const struct gw_row *row);

/* Adds stored row <row> to <k> as its live settlement would have counted it: only when
 * gw_keylimits_row_counts; 1 request, its usage, its cost_micros, at its ts_ms. With
 * GW_KEYLIMITS_F_CALENDAR it counts in each calendar period of <cal> that contains
 * ts_ms; with GW_KEYLIMITS_F_ROLLING in the minute and hour windows at <now_ms> when it
 * is still inside them. Thresholds crossed are marked as announced without an alert.
 * At startup, for a key just created: the caller reads its rows since the earliest of
 * cal's starts and now - 1 h and adds each with both flags. Any thread; never blocks;
 * may allocate (outside the lock). */
void gw_keylimits_rebuild_add(struct gw_keylimits *k, const struct gw_row *row, uint64_t now_ms,
                              const struct gw_period *cal, unsigned flags);

/* ---- recount after a moved period start (a time-zone change) ---- */

/* Usage of one period, every measure (cost in micro-dollars). */
struct gw_limit_totals {
    uint64_t requests, tokens, cache_reads, cost_micros;
};

/* The day, week and month totals of one key counted again from its stored rows, for
 * the periods <cal>. Caller-owned plain data. */
struct gw_keylimits_recount {
    struct gw_period cal;
    struct gw_limit_totals t[3]; /* day, week, month */
};

/* Starts an empty recount for the periods <cal>. Pure. */
void gw_keylimits_recount_init(struct gw_keylimits_recount *rc, const struct gw_period *cal);

/* Adds stored row <row> to <rc> by the rule of gw_keylimits_rebuild_add: only when
 * gw_keylimits_row_counts, in each period of rc->cal that contains its ts_ms. Pure. */
void gw_keylimits_recount_add(struct gw_keylimits_recount *rc, const struct gw_row *row);

/* Installs <rc> on <k> at <now_ms>: each calendar period of <k> becomes rc's, its total
 * the recounted rows plus what running requests still hold reserved there (they settle
 * into it as usual); a period whose start moved has its alerts armed again, and
 * thresholds the new total already crossed are marked without an alert. Returns false
 * and changes nothing when the recount is stale: one of rc's periods is not current at
 * <now_ms> (it moved on again while the rows were read). Rows settled after the caller
 * read the store and before this call are missed; the caller waits for the store writer
 * first (store_sync) so that only requests settling during the read itself can be.
 * Any thread; never blocks. */
bool gw_keylimits_recount_apply(struct gw_keylimits *k, const struct gw_keylimits_recount *rc,
                                uint64_t now_ms);

/* Calls <fn> for every key of <reg>, in no particular order; keys created meanwhile may
 * be missed. Any thread; lock-free. */
void gw_keylimits_reg_each(const struct gw_keylimits_reg *reg,
                           void (*fn)(void *arg, struct gw_keylimits *k), void *arg);

/* ---- alerts and views ---- */

/* True when <k> has alerts waiting. Any thread; lock-free (a hint: take_alerts decides). */
bool gw_keylimits_has_alerts(const struct gw_keylimits *k);

/* Moves up to <max> pending alerts of <k>, oldest first, into <out>; returns how many.
 * Alerts that found the queue full (GW_KEYLIMITS_MAX_ALERTS) were dropped and are
 * counted in gw_keylimits_alerts_dropped. Any thread; never blocks. */
size_t gw_keylimits_take_alerts(struct gw_keylimits *k, struct gw_limit_alert *out, size_t max);

/* How many alerts of <k> were dropped because its queue was full. Any thread, lock-free. */
uint64_t gw_keylimits_alerts_dropped(const struct gw_keylimits *k);

/* Fills <out> with up to <max> of <k>'s entries, in configuration order, as seen at
 * <now_ms> with the calendar periods <cal> (NULL: the periods last given); returns how
 * many it wrote. Any thread; never blocks. */
size_t gw_keylimits_view(struct gw_keylimits *k, uint64_t now_ms, const struct gw_period *cal,
                         struct gw_limit_view *out, size_t max);

/* "requests", "tokens", "cost"; "unknown" out of range. */
const char *gw_limit_measure_str(enum gw_limit_measure m);

/* True for minute and hour (rolling windows), false for the calendar periods. */
static inline bool
gw_limit_per_is_rolling(enum gw_limit_per p)
{
    return p == GW_LIMIT_MINUTE || p == GW_LIMIT_HOUR;
}

/* Retry-After in whole seconds, rounded up (DESIGN.md 18), from <retry_after_ms>. */
static inline uint64_t
gw_limit_retry_after_secs(uint64_t retry_after_ms)
{
    return retry_after_ms / 1000 + (retry_after_ms % 1000 != 0);
}

/* Models this key used that had no price (costed at $0): a cost limit cannot see
 * them, so the key view lists them (DESIGN.md 8). At most GW_KEYLIMITS_MAX_UNPRICED
 * distinct models are kept. Any thread. */
#define GW_KEYLIMITS_MAX_UNPRICED 8
void gw_keylimits_note_unpriced(struct gw_keylimits *k, const char *model);
size_t gw_keylimits_unpriced(struct gw_keylimits *k, char out[][GW_MODEL_MAX + 1], size_t max);

#endif
