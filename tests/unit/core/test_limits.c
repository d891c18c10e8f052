/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_limits.c - key usage limits: every measure and period, calendar
 * refusal to the period end, rolling waits exact to the second, reservations replaced by
 * settlement, give-back, cache reads, micro-dollars, period rollover, rebuild equal to
 * live settlement, alerts once per period, reconfiguration, the registry, and 4 threads
 * admitting and settling on one key (meaningful under `make tsan`).
 * See: core/limits.c
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/alloc.h"
#include "core/limits.h"

#define SEC 1000ULL
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define DAY (24 * HOUR)
#define D0 1700006400000ULL       /* a midnight (UTC) */
#define T0 (D0 + 10 * HOUR + 250) /* 10:00:00.250 on day 0 */

/* The calendar of day <i> (0 = D0): the week and month hold days -2..4 and -14..15. */
static struct gw_period
t_cal(int i)
{
    struct gw_period p;

    p.day.start_ms = D0 + (uint64_t)((int64_t)i * (int64_t)DAY);
    p.day.end_ms = p.day.start_ms + DAY;
    p.week.start_ms = D0 - 2 * DAY;
    p.week.end_ms = D0 + 5 * DAY;
    p.month.start_ms = D0 - 14 * DAY;
    p.month.end_ms = D0 + 16 * DAY;
    if (i >= 5) { /* the next week */
        p.week.start_ms = D0 + 5 * DAY;
        p.week.end_ms = D0 + 12 * DAY;
    }
    return p;
}

static struct gw_conf_limit
t_lim(enum gw_limit_per per, enum gw_limit_measure m, uint64_t max, bool cache_reads)
{
    struct gw_conf_limit l;

    memset(&l, 0, sizeof(l));
    l.per = per;
    l.has_requests = m == GW_LIMIT_REQUESTS;
    l.has_tokens = m == GW_LIMIT_TOKENS;
    l.has_cost = m == GW_LIMIT_COST;
    l.requests = l.has_requests ? max : 0;
    l.tokens = l.has_tokens ? max : 0;
    l.cost_micros = l.has_cost ? max : 0;
    l.cache_reads = cache_reads;
    return l;
}

struct t_fix {
    struct gw_keylimits_reg *reg;
    struct gw_keylimits *k;
};

/* A registry and a key of it. Under `make test-oom` either may be NULL: the test then
 * stops on an assertion rather than a crash. */
static struct gw_keylimits_reg *
t_reg_new(void)
{
    struct gw_keylimits_reg *reg = gw_keylimits_reg_new();

    assert_non_null(reg);
    return reg;
}

static struct gw_keylimits *
t_key(struct gw_keylimits_reg *reg, const char *name)
{
    struct gw_keylimits *k = gw_keylimits_reg_get(reg, name, NULL);

    assert_non_null(k);
    return k;
}

static int
t_setup(void **state)
{
    static struct t_fix f;
    bool created = false;

    f.reg = gw_keylimits_reg_new();
    assert_non_null(f.reg);
    f.k = gw_keylimits_reg_get(f.reg, "alice", &created);
    assert_non_null(f.k);
    assert_true(created);
    *state = &f;
    return 0;
}

static int
t_teardown(void **state)
{
    struct t_fix *f = *state;

    gw_keylimits_reg_free(f->reg);
    return 0;
}

static void
t_config1(struct gw_keylimits *k, enum gw_limit_per per, enum gw_limit_measure m, uint64_t max,
          bool cache_reads)
{
    struct gw_conf_limit l = t_lim(per, m, max, cache_reads);

    assert_int_equal(gw_keylimits_configure(k, &l, 1), GW_OK);
}

static struct gw_usage
t_usage(uint64_t in, uint64_t out, uint64_t cr, uint64_t cw)
{
    struct gw_usage u;

    memset(&u, 0, sizeof(u));
    u.input_tokens = in;
    u.output_tokens = out;
    u.cache_read_tokens = cr;
    u.cache_write_tokens = cw;
    return u;
}

/* Admits (must pass) and settles one request that reached an upstream. */
static void
t_use(struct gw_keylimits *k, uint64_t now, const struct gw_period *cal, struct gw_usage u,
      int64_t cost)
{
    struct gw_limit_reservation r;

    assert_int_equal(gw_keylimits_admit(k, now, cal, u.input_tokens, cost, &r, NULL), GW_LIMIT_OK);
    gw_keylimits_settle(k, &r, now, &u, cost, true);
}

/* The used value of the entry at <i>. */
static uint64_t
t_used(struct gw_keylimits *k, uint64_t now, const struct gw_period *cal, size_t i)
{
    struct gw_limit_view v[GW_KEYLIMITS_MAX_ENTRIES];
    size_t n = gw_keylimits_view(k, now, cal, v, GW_KEYLIMITS_MAX_ENTRIES);

    assert_true(i < n);
    return v[i].used;
}

/* ---- measures and periods ---- */

/* For every period and measure: a limit of 3 units, used by three requests of one unit
 * each; the fourth is stopped with the right decision and code. */
static void
test_limits_every_measure_and_period_stops_the_request_past_the_max(void **state)
{
    static const enum gw_code cal_codes[3] = {GW_E_KEY_LIMIT_REQUESTS_PER_PERIOD,
                                              GW_E_KEY_LIMIT_TOKENS_PER_PERIOD,
                                              GW_E_KEY_LIMIT_COST_PER_PERIOD};
    static const enum gw_code roll_codes[3] = {GW_E_KEY_LIMIT_REQUESTS_ROLLING,
                                               GW_E_KEY_LIMIT_TOKENS_ROLLING,
                                               GW_E_KEY_LIMIT_COST_ROLLING};

    (void)state;
    for (int per = GW_LIMIT_MINUTE; per <= GW_LIMIT_MONTH; per++) {
        for (int m = GW_LIMIT_REQUESTS; m <= GW_LIMIT_COST; m++) {
            struct gw_keylimits_reg *reg = t_reg_new();
            struct gw_keylimits *k = t_key(reg, "bob");
            struct gw_period cal = t_cal(0);
            struct gw_limit_reservation r;
            struct gw_limit_verdict v;
            struct gw_usage u = t_usage(m == GW_LIMIT_TOKENS ? 1 : 0, 0, 0, 0);
            int64_t cost = m == GW_LIMIT_COST ? 1 : 0;
            bool rolling = gw_limit_per_is_rolling((enum gw_limit_per)per);
            enum gw_limit_decision d;

            assert_non_null(k);
            t_config1(k, (enum gw_limit_per)per, (enum gw_limit_measure)m, 3, false);
            for (int i = 0; i < 3; i++)
                t_use(k, T0 + (uint64_t)i * SEC, &cal, u, cost);
            assert_int_equal(t_used(k, T0 + 3 * SEC, &cal, 0), 3);
            d = gw_keylimits_admit(k, T0 + 3 * SEC, &cal, u.input_tokens, cost, &r, &v);
            assert_int_equal(d, rolling ? GW_LIMIT_WAIT_ROLLING : GW_LIMIT_REFUSE_CALENDAR);
            assert_false(r.active);
            assert_int_equal(v.code, rolling ? roll_codes[m] : cal_codes[m]);
            assert_int_equal(v.per, per);
            assert_int_equal(v.measure, m);
            assert_int_equal(v.used, 3);
            assert_int_equal(v.max, 3);
            assert_string_equal(gw_code_str(v.code),
                                rolling ? (m == 0   ? "gw.key_limit.requests_rolling"
                                           : m == 1 ? "gw.key_limit.tokens_rolling"
                                                    : "gw.key_limit.cost_rolling")
                                        : (m == 0   ? "gw.key_limit.requests_per_period"
                                           : m == 1 ? "gw.key_limit.tokens_per_period"
                                                    : "gw.key_limit.cost_per_period"));
            assert_int_equal(gw_code_http_status(v.code), 429);
            /* The first request leaves a rolling window at its second + the window. */
            if (per == GW_LIMIT_MINUTE)
                assert_int_equal(v.retry_at_ms, (T0 / 1000 + 60) * 1000);
            else if (per == GW_LIMIT_HOUR)
                assert_int_equal(v.retry_at_ms, (T0 / 1000 + 3600) * 1000);
            else if (per == GW_LIMIT_DAY)
                assert_int_equal(v.retry_at_ms, cal.day.end_ms);
            else if (per == GW_LIMIT_WEEK)
                assert_int_equal(v.retry_at_ms, cal.week.end_ms);
            else
                assert_int_equal(v.retry_at_ms, cal.month.end_ms);
            assert_int_equal(v.retry_after_ms, v.retry_at_ms - (T0 + 3 * SEC));
            gw_keylimits_reg_free(reg);
        }
    }
}

static void
test_limits_calendar_refusal_retries_at_the_period_end(void **state)
{
    struct t_fix *f = *state;
    struct gw_period cal = t_cal(0);
    struct gw_limit_reservation r;
    struct gw_limit_verdict v;
    uint64_t now = D0 + 23 * HOUR + 59 * MIN + 30 * SEC + 1; /* 23:59:30.001 */

    t_config1(f->k, GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 1, false);
    t_use(f->k, T0, &cal, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(gw_keylimits_admit(f->k, now, &cal, 0, 0, &r, &v), GW_LIMIT_REFUSE_CALENDAR);
    assert_int_equal(v.retry_at_ms, D0 + DAY);
    assert_int_equal(v.retry_after_ms, 29999);
    assert_int_equal(gw_limit_retry_after_secs(v.retry_after_ms), 30);
    /* The next day the request passes. */
    cal = t_cal(1);
    assert_int_equal(gw_keylimits_admit(f->k, D0 + DAY, &cal, 0, 0, &r, &v), GW_LIMIT_OK);
    assert_true(r.active);
    gw_keylimits_settle(f->k, &r, D0 + DAY, NULL, 0, true);
}

/* When calendar and rolling entries both fail, the calendar one decides (refuse). */
static void
test_limits_calendar_entries_are_checked_before_rolling_ones(void **state)
{
    struct t_fix *f = *state;
    struct gw_conf_limit l[2] = {t_lim(GW_LIMIT_MINUTE, GW_LIMIT_REQUESTS, 1, false),
                                 t_lim(GW_LIMIT_MONTH, GW_LIMIT_REQUESTS, 1, false)};
    struct gw_period cal = t_cal(0);
    struct gw_limit_reservation r;
    struct gw_limit_verdict v;

    assert_int_equal(gw_keylimits_configure(f->k, l, 2), GW_OK);
    t_use(f->k, T0, &cal, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + SEC, &cal, 0, 0, &r, &v),
                     GW_LIMIT_REFUSE_CALENDAR);
    assert_int_equal(v.code, GW_E_KEY_LIMIT_REQUESTS_PER_PERIOD);
    assert_int_equal(v.per, GW_LIMIT_MONTH);
    assert_int_equal(v.retry_at_ms, cal.month.end_ms);
}

/* The calendar pre-check refuses like admit, counts nothing, and ignores rolling
 * entries. */
static void
test_limits_check_calendar_counts_nothing(void **state)
{
    struct t_fix *f = *state;
    struct gw_conf_limit l[2] = {t_lim(GW_LIMIT_MINUTE, GW_LIMIT_REQUESTS, 1, false),
                                 t_lim(GW_LIMIT_WEEK, GW_LIMIT_TOKENS, 100, false)};
    struct gw_period cal = t_cal(0);
    struct gw_limit_verdict v;

    assert_int_equal(gw_keylimits_configure(f->k, l, 2), GW_OK);
    t_use(f->k, T0, &cal, t_usage(60, 0, 0, 0), 0);
    /* The minute is used up: the pre-check does not look at it. */
    assert_int_equal(gw_keylimits_check_calendar(f->k, T0, &cal, 40, 0, &v), GW_LIMIT_OK);
    assert_int_equal(gw_keylimits_check_calendar(f->k, T0, &cal, 41, 0, &v),
                     GW_LIMIT_REFUSE_CALENDAR);
    assert_int_equal(v.code, GW_E_KEY_LIMIT_TOKENS_PER_PERIOD);
    assert_int_equal(v.retry_at_ms, cal.week.end_ms);
    assert_int_equal(t_used(f->k, T0, &cal, 0), 1);
    assert_int_equal(t_used(f->k, T0, &cal, 1), 60);
}

/* ---- rolling windows ---- */

/* 60 requests a minute; the 61st, 30 s after the first, waits until the first one's
 * second + 60 s, exactly; one millisecond earlier it still waits. */
static void
test_limits_rolling_minute_waits_until_the_first_second_leaves(void **state)
{
    struct t_fix *f = *state;
    struct gw_limit_reservation r;
    struct gw_limit_verdict v;
    uint64_t first_sec = T0 / 1000, at;

    t_config1(f->k, GW_LIMIT_MINUTE, GW_LIMIT_REQUESTS, 60, false);
    /* 10 at t, then 50 spread over the next 20 s. */
    for (int i = 0; i < 10; i++)
        t_use(f->k, T0 + (uint64_t)i, NULL, t_usage(0, 0, 0, 0), 0);
    for (int i = 0; i < 50; i++)
        t_use(f->k, T0 + 5 * SEC + (uint64_t)i * 300, NULL, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + 30 * SEC, NULL, 0, 0, &r, &v),
                     GW_LIMIT_WAIT_ROLLING);
    at = (first_sec + 60) * 1000;
    assert_int_equal(v.code, GW_E_KEY_LIMIT_REQUESTS_ROLLING);
    assert_int_equal(v.retry_at_ms, at);
    assert_int_equal(v.retry_after_ms, at - (T0 + 30 * SEC));
    assert_int_equal(gw_limit_retry_after_secs(v.retry_after_ms), 30); /* 29.750 s */
    assert_int_equal(gw_keylimits_admit(f->k, at - 1, NULL, 0, 0, &r, &v), GW_LIMIT_WAIT_ROLLING);
    assert_int_equal(v.retry_at_ms, at);
    assert_int_equal(gw_keylimits_admit(f->k, at, NULL, 0, 0, &r, &v), GW_LIMIT_OK);
    gw_keylimits_settle(f->k, &r, at, NULL, 0, true);
    /* The 10 of the first second left together: 9 more pass, then the next wait is for
     * the second of the 50-block's first request. */
    for (int i = 0; i < 9; i++)
        t_use(f->k, at + 1, NULL, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(gw_keylimits_admit(f->k, at + 2, NULL, 0, 0, &r, &v), GW_LIMIT_WAIT_ROLLING);
    assert_int_equal(v.retry_at_ms, ((T0 + 5 * SEC) / 1000 + 60) * 1000);
}

/* A token limit waits until enough tokens left the window for the request's estimate,
 * possibly several seconds' worth; the hour window counts per second too. */
static void
test_limits_rolling_hour_waits_until_enough_tokens_left(void **state)
{
    struct t_fix *f = *state;
    struct gw_limit_reservation r;
    struct gw_limit_verdict v;
    uint64_t now = T0 + 50 * MIN;

    t_config1(f->k, GW_LIMIT_HOUR, GW_LIMIT_TOKENS, 1000, false);
    t_use(f->k, T0, NULL, t_usage(100, 0, 0, 0), 0);              /* leaves at T0s + 1 h */
    t_use(f->k, T0 + 7 * SEC, NULL, t_usage(200, 100, 0, 0), 0);  /* 300, at T0s + 7 + 1 h */
    t_use(f->k, T0 + 20 * MIN, NULL, t_usage(400, 0, 0, 100), 0); /* 500 */
    assert_int_equal(t_used(f->k, now, NULL, 0), 900);
    /* 100 fits. */
    assert_int_equal(gw_keylimits_admit(f->k, now, NULL, 100, 0, &r, &v), GW_LIMIT_OK);
    gw_keylimits_settle(f->k, &r, now, NULL, 0, false); /* given back */
    assert_int_equal(t_used(f->k, now, NULL, 0), 900);
    /* 350 needs the first two seconds gone (100 then 300 leave). */
    assert_int_equal(gw_keylimits_admit(f->k, now, NULL, 350, 0, &r, &v), GW_LIMIT_WAIT_ROLLING);
    assert_int_equal(v.code, GW_E_KEY_LIMIT_TOKENS_ROLLING);
    assert_int_equal(v.retry_at_ms, (T0 / 1000 + 7 + 3600) * 1000);
    /* 150 needs only the first. */
    assert_int_equal(gw_keylimits_admit(f->k, now, NULL, 150, 0, &r, &v), GW_LIMIT_WAIT_ROLLING);
    assert_int_equal(v.retry_at_ms, (T0 / 1000 + 3600) * 1000);
    assert_int_equal(gw_keylimits_admit(f->k, v.retry_at_ms, NULL, 150, 0, &r, &v), GW_LIMIT_OK);
    gw_keylimits_settle(f->k, &r, T0 + HOUR, NULL, 0, false);
}

/* With a minute and an hour entry failing, the wait is until both pass. */
static void
test_limits_rolling_wait_is_the_latest_of_the_failing_entries(void **state)
{
    struct t_fix *f = *state;
    struct gw_conf_limit l[2] = {t_lim(GW_LIMIT_MINUTE, GW_LIMIT_REQUESTS, 2, false),
                                 t_lim(GW_LIMIT_HOUR, GW_LIMIT_REQUESTS, 2, false)};
    struct gw_limit_reservation r;
    struct gw_limit_verdict v;

    assert_int_equal(gw_keylimits_configure(f->k, l, 2), GW_OK);
    t_use(f->k, T0, NULL, t_usage(0, 0, 0, 0), 0);
    t_use(f->k, T0 + 10 * SEC, NULL, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + 20 * SEC, NULL, 0, 0, &r, &v),
                     GW_LIMIT_WAIT_ROLLING);
    assert_int_equal(v.per, GW_LIMIT_HOUR);
    assert_int_equal(v.retry_at_ms, (T0 / 1000 + 3600) * 1000);
}

/* ---- reservations and settlement ---- */

static void
test_limits_settlement_replaces_the_estimate_with_recorded_usage(void **state)
{
    struct t_fix *f = *state;
    struct gw_conf_limit l[3] = {t_lim(GW_LIMIT_DAY, GW_LIMIT_TOKENS, 100000, false),
                                 t_lim(GW_LIMIT_MINUTE, GW_LIMIT_TOKENS, 100000, false),
                                 t_lim(GW_LIMIT_DAY, GW_LIMIT_COST, 1000000, false)};
    struct gw_period cal = t_cal(0);
    struct gw_limit_reservation r;
    struct gw_usage u = t_usage(30, 20, 0, 10);

    assert_int_equal(gw_keylimits_configure(f->k, l, 3), GW_OK);
    assert_int_equal(gw_keylimits_admit(f->k, T0, &cal, 5000, 7000, &r, NULL), GW_LIMIT_OK);
    assert_true(r.active);
    assert_int_equal(t_used(f->k, T0 + SEC, &cal, 0), 5000);
    assert_int_equal(t_used(f->k, T0 + SEC, &cal, 1), 5000);
    assert_int_equal(t_used(f->k, T0 + SEC, &cal, 2), 7000);
    gw_keylimits_settle(f->k, &r, T0 + 2 * SEC, &u, 1234, true);
    assert_false(r.active);
    assert_int_equal(t_used(f->k, T0 + 2 * SEC, &cal, 0), 60);
    assert_int_equal(t_used(f->k, T0 + 2 * SEC, &cal, 1), 60);
    assert_int_equal(t_used(f->k, T0 + 2 * SEC, &cal, 2), 1234);
    /* A second settle of the same reservation does nothing. */
    gw_keylimits_settle(f->k, &r, T0 + 2 * SEC, &u, 1234, true);
    assert_int_equal(t_used(f->k, T0 + 2 * SEC, &cal, 0), 60);
}

/* A request that never reached an upstream gives everything back, its request in the
 * rolling window included, so the next one passes at once. */
static void
test_limits_give_back_when_no_upstream_was_reached(void **state)
{
    struct t_fix *f = *state;
    struct gw_conf_limit l[3] = {t_lim(GW_LIMIT_MINUTE, GW_LIMIT_REQUESTS, 2, false),
                                 t_lim(GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 2, false),
                                 t_lim(GW_LIMIT_DAY, GW_LIMIT_TOKENS, 1000, false)};
    struct gw_period cal = t_cal(0);
    struct gw_limit_reservation r1, r2, r3;
    struct gw_limit_verdict v;

    assert_int_equal(gw_keylimits_configure(f->k, l, 3), GW_OK);
    assert_int_equal(gw_keylimits_admit(f->k, T0, &cal, 300, 0, &r1, NULL), GW_LIMIT_OK);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + 1, &cal, 300, 0, &r2, NULL), GW_LIMIT_OK);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + 2, &cal, 300, 0, &r3, &v),
                     GW_LIMIT_REFUSE_CALENDAR);
    assert_int_equal(t_used(f->k, T0 + 2, &cal, 0), 2);
    assert_int_equal(t_used(f->k, T0 + 2, &cal, 2), 600);
    /* r2 was refused downstream (busy): all back, even 40 s later. */
    gw_keylimits_settle(f->k, &r2, T0 + 40 * SEC, NULL, 0, false);
    assert_int_equal(t_used(f->k, T0 + 40 * SEC, &cal, 0), 1);
    assert_int_equal(t_used(f->k, T0 + 40 * SEC, &cal, 1), 1);
    assert_int_equal(t_used(f->k, T0 + 40 * SEC, &cal, 2), 300);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + 40 * SEC, &cal, 300, 0, &r3, &v), GW_LIMIT_OK);
    gw_keylimits_settle(f->k, &r3, T0 + 41 * SEC, NULL, 0, false);
    gw_keylimits_settle(f->k, &r1, T0 + 41 * SEC, NULL, 0, false);
    assert_int_equal(t_used(f->k, T0 + 41 * SEC, &cal, 0), 0);
    assert_int_equal(t_used(f->k, T0 + 41 * SEC, &cal, 1), 0);
    assert_int_equal(t_used(f->k, T0 + 41 * SEC, &cal, 2), 0);
}

/* Settlements applied together (a worker's loop turn) leave two keys as settling them
 * one by one leaves a copy of each: the same totals in every entry, the same alerts;
 * each key's settlements in one pass, an inactive one skipped, each entry used up. */
static void
test_limits_settle_all_equals_settling_one_by_one(void **state)
{
    struct gw_keylimits_reg *reg = t_reg_new();
    struct gw_keylimits *one[2] = {t_key(reg, "a1"), t_key(reg, "b1")};
    struct gw_keylimits *all[2] = {t_key(reg, "a2"), t_key(reg, "b2")};
    struct gw_conf_limit l[4] = {t_lim(GW_LIMIT_DAY, GW_LIMIT_TOKENS, 10000, false),
                                 t_lim(GW_LIMIT_MINUTE, GW_LIMIT_TOKENS, 10000, false),
                                 t_lim(GW_LIMIT_HOUR, GW_LIMIT_REQUESTS, 10, false),
                                 t_lim(GW_LIMIT_DAY, GW_LIMIT_COST, 1000000, false)};
    struct gw_period cal = t_cal(0);
    struct gw_limit_settlement v[7];
    struct gw_limit_reservation r1[7];
    struct gw_limit_view va[GW_KEYLIMITS_MAX_ENTRIES], vb[GW_KEYLIMITS_MAX_ENTRIES];
    struct gw_limit_alert aa[8], ab[8];
    const unsigned key_of[7] = {0, 1, 0, 0, 1, 1, 0};
    size_t i, k, na, nb;

    (void)state;
    for (k = 0; k < 2; k++) {
        assert_int_equal(gw_keylimits_configure(one[k], l, 4), GW_OK);
        assert_int_equal(gw_keylimits_configure(all[k], l, 4), GW_OK);
    }
    memset(v, 0, sizeof(v));
    for (i = 0; i < 7; i++) {
        struct gw_keylimits *a = one[key_of[i]], *b = all[key_of[i]];
        uint64_t now = T0 + i * SEC;

        assert_int_equal(gw_keylimits_admit(a, now, &cal, 1000 + i, 5000, &r1[i], NULL),
                         GW_LIMIT_OK);
        assert_int_equal(gw_keylimits_admit(b, now, &cal, 1000 + i, 5000, &v[i].res, NULL),
                         GW_LIMIT_OK);
        v[i].k = b;
        v[i].now_ms = T0 + 20 * SEC + i;
        v[i].usage = t_usage(100 * i, 10, 0, 0);
        v[i].cost_micros = 7000 + (int64_t)i;
        v[i].reached_upstream = i != 3; /* one given back */
    }
    r1[5].active = v[5].res.active = false; /* settled before: nothing to do */
    for (i = 0; i < 7; i++)
        gw_keylimits_settle(one[key_of[i]], &r1[i], v[i].now_ms, &v[i].usage, v[i].cost_micros,
                            v[i].reached_upstream);
    gw_keylimits_settle_all(v, 7);
    for (i = 0; i < 7; i++) {
        assert_null(v[i].k);
        assert_false(v[i].res.active);
    }
    gw_keylimits_settle_all(v, 7); /* used up: nothing happens */
    for (k = 0; k < 2; k++) {
        na = gw_keylimits_view(one[k], T0 + 30 * SEC, &cal, va, GW_KEYLIMITS_MAX_ENTRIES);
        nb = gw_keylimits_view(all[k], T0 + 30 * SEC, &cal, vb, GW_KEYLIMITS_MAX_ENTRIES);
        assert_int_equal(na, 4);
        assert_int_equal(nb, na);
        for (i = 0; i < na; i++) {
            assert_int_equal(vb[i].used, va[i].used);
            assert_int_equal(vb[i].resets_at_ms, va[i].resets_at_ms);
        }
        na = gw_keylimits_take_alerts(one[k], aa, 8);
        nb = gw_keylimits_take_alerts(all[k], ab, 8);
        assert_int_equal(nb, na);
        for (i = 0; i < na; i++) {
            assert_int_equal(ab[i].percent, aa[i].percent);
            assert_int_equal(ab[i].per, aa[i].per);
            assert_int_equal(ab[i].used, aa[i].used);
        }
    }
    /* what was settled: key a's tokens (0 + 200 + 600 used, 3's given back) */
    na = gw_keylimits_view(all[0], T0 + 30 * SEC, &cal, va, GW_KEYLIMITS_MAX_ENTRIES);
    assert_int_equal(va[0].used, 0 + 10 + 200 + 10 + 600 + 10);
    assert_int_equal(va[2].used, 3); /* requests: 0, 2, 6 (3 given back) */
    gw_keylimits_reg_free(reg);
}

/* Settled after its second left the window: the rolling window is not touched (the
 * usage is not counted in a later second), the day is. */
static void
test_limits_settlement_after_the_window_touches_only_live_periods(void **state)
{
    struct t_fix *f = *state;
    struct gw_conf_limit l[2] = {t_lim(GW_LIMIT_MINUTE, GW_LIMIT_TOKENS, 100000, false),
                                 t_lim(GW_LIMIT_DAY, GW_LIMIT_TOKENS, 100000, false)};
    struct gw_period cal = t_cal(0);
    struct gw_limit_reservation r, r2;
    struct gw_usage u = t_usage(100, 900, 0, 0);

    assert_int_equal(gw_keylimits_configure(f->k, l, 2), GW_OK);
    assert_int_equal(gw_keylimits_admit(f->k, T0, &cal, 100, 0, &r, NULL), GW_LIMIT_OK);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + 61 * SEC, &cal, 5, 0, &r2, NULL), GW_LIMIT_OK);
    gw_keylimits_settle(f->k, &r, T0 + 90 * SEC, &u, 0, true);
    assert_int_equal(t_used(f->k, T0 + 90 * SEC, &cal, 0), 5);
    assert_int_equal(t_used(f->k, T0 + 90 * SEC, &cal, 1), 1005);
    gw_keylimits_settle(f->k, &r2, T0 + 90 * SEC, NULL, 0, false);
}

static void
test_limits_tokens_count_cache_reads_only_when_asked(void **state)
{
    struct t_fix *f = *state;
    struct gw_conf_limit l[2] = {t_lim(GW_LIMIT_DAY, GW_LIMIT_TOKENS, 1000000, false),
                                 t_lim(GW_LIMIT_MONTH, GW_LIMIT_TOKENS, 1000000, true)};
    struct gw_period cal = t_cal(0);
    struct gw_limit_view v[2];

    assert_int_equal(gw_keylimits_configure(f->k, l, 2), GW_OK);
    /* uncached 10 + cache writes 20 + output 30; cache reads 4000 */
    t_use(f->k, T0, &cal, t_usage(10, 30, 4000, 20), 0);
    assert_int_equal(gw_keylimits_view(f->k, T0, &cal, v, 2), 2);
    assert_int_equal(v[0].used, 60);
    assert_false(v[0].cache_reads);
    assert_int_equal(v[1].used, 4060);
    assert_true(v[1].cache_reads);
    assert_int_equal(v[1].measure, GW_LIMIT_TOKENS);
    assert_int_equal(v[1].per, GW_LIMIT_MONTH);
}

/* Cost is counted in micro-dollars; 0.01 USD = 10000. An estimate that would pass the
 * max is refused; a smaller one passes. */
static void
test_limits_cost_is_counted_in_micro_dollars(void **state)
{
    struct t_fix *f = *state;
    struct gw_period cal = t_cal(0);
    struct gw_limit_reservation r;
    struct gw_limit_verdict v;
    struct gw_usage u = t_usage(1, 1, 0, 0);
    struct gw_limit_view view;

    t_config1(f->k, GW_LIMIT_DAY, GW_LIMIT_COST, 10000, false);
    assert_int_equal(gw_keylimits_admit(f->k, T0, &cal, 10, 2500, &r, NULL), GW_LIMIT_OK);
    gw_keylimits_settle(f->k, &r, T0, &u, 6000, true);
    assert_int_equal(gw_keylimits_admit(f->k, T0, &cal, 10, 4001, &r, &v),
                     GW_LIMIT_REFUSE_CALENDAR);
    assert_int_equal(v.code, GW_E_KEY_LIMIT_COST_PER_PERIOD);
    assert_int_equal(v.used, 6000);
    assert_int_equal(v.max, 10000);
    assert_int_equal(gw_keylimits_admit(f->k, T0, &cal, 10, 4000, &r, &v), GW_LIMIT_OK);
    gw_keylimits_settle(f->k, &r, T0, &u, 4100, true);
    assert_int_equal(gw_keylimits_view(f->k, T0, &cal, &view, 1), 1);
    assert_int_equal(view.used, 10100);
    assert_true(view.reached);
    assert_int_equal(view.resets_at_ms, cal.day.end_ms);
    /* A negative cost (a refund line) counts as 0. */
    assert_int_equal(gw_keylimits_admit(f->k, T0, &cal, 0, -5, &r, &v), GW_LIMIT_REFUSE_CALENDAR);
}

/* ---- periods ---- */

static void
test_limits_new_day_starts_from_zero(void **state)
{
    struct t_fix *f = *state;
    struct gw_period c0 = t_cal(0), c1 = t_cal(1);
    struct gw_conf_limit l[2] = {t_lim(GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 5, false),
                                 t_lim(GW_LIMIT_WEEK, GW_LIMIT_REQUESTS, 50, false)};

    assert_int_equal(gw_keylimits_configure(f->k, l, 2), GW_OK);
    for (int i = 0; i < 5; i++)
        t_use(f->k, T0 + (uint64_t)i, &c0, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(t_used(f->k, T0, &c0, 0), 5);
    assert_int_equal(t_used(f->k, D0 + DAY, &c1, 0), 0);
    assert_int_equal(t_used(f->k, D0 + DAY, &c1, 1), 5); /* same week */
    t_use(f->k, D0 + DAY + 1, &c1, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(t_used(f->k, D0 + DAY + 1, &c1, 0), 1);
    /* A stale view of yesterday from a racing thread changes nothing. */
    assert_int_equal(t_used(f->k, D0 + DAY + 2, &c0, 0), 1);
    assert_int_equal(t_used(f->k, D0 + DAY + 2, &c1, 0), 1);
}

/* A request admitted yesterday and settled today counts in neither today's total nor
 * twice: whether or not today was already seen before the settlement. */
static void
test_limits_reservation_from_yesterday_settled_today_does_not_count_today(void **state)
{
    struct t_fix *f = *state;
    struct gw_period c0 = t_cal(0), c1 = t_cal(1);
    struct gw_limit_reservation a, b;
    struct gw_usage u = t_usage(1000, 1000, 0, 0);

    t_config1(f->k, GW_LIMIT_DAY, GW_LIMIT_TOKENS, 100000, false);
    assert_int_equal(gw_keylimits_admit(f->k, D0 + DAY - 2, &c0, 500, 0, &a, NULL), GW_LIMIT_OK);
    assert_int_equal(gw_keylimits_admit(f->k, D0 + DAY - 1, &c0, 500, 0, &b, NULL), GW_LIMIT_OK);
    /* a settles after midnight before anything else saw the new day. */
    gw_keylimits_settle(f->k, &a, D0 + DAY + 5 * SEC, &u, 0, true);
    assert_int_equal(t_used(f->k, D0 + DAY + 6 * SEC, &c1, 0), 0);
    /* b settles after today's first request. */
    t_use(f->k, D0 + DAY + 7 * SEC, &c1, t_usage(10, 0, 0, 0), 0);
    gw_keylimits_settle(f->k, &b, D0 + DAY + 8 * SEC, &u, 0, true);
    assert_int_equal(t_used(f->k, D0 + DAY + 9 * SEC, &c1, 0), 10);
    /* Given back after midnight: nothing is taken from today either. */
    assert_int_equal(gw_keylimits_admit(f->k, D0 + 2 * DAY - 1, &c1, 5, 0, &a, NULL), GW_LIMIT_OK);
    gw_keylimits_settle(f->k, &a, D0 + 2 * DAY + 1, NULL, 0, false);
    {
        struct gw_period c2 = t_cal(2);

        assert_int_equal(t_used(f->k, D0 + 2 * DAY + 2, &c2, 0), 0);
    }
}

/* ---- recount after a moved period start ---- */

/* A moved day start (time-zone change): the day's total becomes the stored rows inside
 * the new day, plus what a running request still holds reserved; that request then
 * settles into it as usual. */
static void
test_limits_recount_counts_the_rows_of_the_moved_day_and_keeps_running_requests(void **state)
{
    struct t_fix *f = *state;
    struct gw_period c0 = t_cal(0), moved = t_cal(0);
    struct gw_keylimits_recount rc;
    struct gw_limit_reservation running;
    struct gw_usage u = t_usage(0, 0, 0, 0);
    struct gw_row row;

    t_config1(f->k, GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 100, false);
    memset(&row, 0, sizeof(row));
    row.n_attempts = 1;
    row.attempts[0].outcome = GW_OUT_OK;
    for (int i = 0; i < 4; i++) /* at 10:00 .. 13:00 */
        t_use(f->k, T0 + (uint64_t)i * HOUR, &c0, u, 0);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + 4 * HOUR, &c0, 0, 0, &running, NULL),
                     GW_LIMIT_OK);
    assert_int_equal(t_used(f->k, T0 + 4 * HOUR, &c0, 0), 5);
    /* The day now starts at 11:30 (the old zone said midnight). */
    moved.day.start_ms = D0 + 11 * HOUR + 30 * MIN;
    moved.day.end_ms = moved.day.start_ms + DAY;
    gw_keylimits_recount_init(&rc, &moved);
    for (int i = 0; i < 4; i++) {
        row.ts_ms = T0 + (uint64_t)i * HOUR;
        gw_keylimits_recount_add(&rc, &row);
    }
    assert_int_equal(rc.t[0].requests, 2); /* 12:00 and 13:00 */
    assert_true(gw_keylimits_recount_apply(f->k, &rc, T0 + 4 * HOUR + SEC));
    assert_int_equal(t_used(f->k, T0 + 4 * HOUR + SEC, &moved, 0), 3); /* + the running one */
    gw_keylimits_settle(f->k, &running, T0 + 4 * HOUR + 2 * SEC, &u, 0, true);
    assert_int_equal(t_used(f->k, T0 + 4 * HOUR + 2 * SEC, &moved, 0), 3);
}

/* A recount whose day ended before it was applied is dropped: the key keeps counting in
 * the period it is in. */
static void
test_limits_recount_of_a_period_that_moved_on_again_is_dropped(void **state)
{
    struct t_fix *f = *state;
    struct gw_period c0 = t_cal(0), c1 = t_cal(1);
    struct gw_keylimits_recount rc;

    t_config1(f->k, GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 100, false);
    t_use(f->k, D0 + DAY + HOUR, &c1, t_usage(0, 0, 0, 0), 0);
    gw_keylimits_recount_init(&rc, &c0); /* read for day 0, applied on day 1 */
    rc.t[0].requests = 40;
    assert_false(gw_keylimits_recount_apply(f->k, &rc, D0 + DAY + HOUR));
    assert_int_equal(t_used(f->k, D0 + DAY + HOUR, &c1, 0), 1);
}

/* The moved day is another period than the one the 80% alert was announced in: it is
 * announced again when the recounted day crosses it. */
static void
test_limits_recount_of_a_moved_day_arms_its_alerts_again(void **state)
{
    struct t_fix *f = *state;
    struct gw_period c0 = t_cal(0), moved = t_cal(0);
    struct gw_keylimits_recount rc;
    struct gw_limit_alert a[4];
    struct gw_usage u = t_usage(0, 0, 0, 0);

    t_config1(f->k, GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 5, false);
    for (int i = 0; i < 4; i++)
        t_use(f->k, T0 + (uint64_t)i * MIN, &c0, u, 0);
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 4), 1); /* 80% */
    moved.day.start_ms = T0 + HOUR;
    moved.day.end_ms = moved.day.start_ms + DAY;
    gw_keylimits_recount_init(&rc, &moved); /* no row inside the new day */
    assert_true(gw_keylimits_recount_apply(f->k, &rc, T0 + 2 * HOUR));
    assert_int_equal(t_used(f->k, T0 + 2 * HOUR, &moved, 0), 0);
    for (int i = 0; i < 3; i++)
        t_use(f->k, T0 + 2 * HOUR + (uint64_t)i * MIN, &moved, u, 0);
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 4), 0);
    t_use(f->k, T0 + 2 * HOUR + 3 * MIN, &moved, u, 0);
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 4), 1);
    assert_int_equal(a[0].percent, 80);
    assert_int_equal(a[0].used, 4);
}

/* Every key of the registry is visited once. */
static void
t_count_key(void *arg, struct gw_keylimits *k)
{
    (void)k;
    (*(int *)arg)++;
}

static void
test_limits_registry_each_visits_every_key(void **state)
{
    struct t_fix *f = *state;
    char name[16];
    int n = 0;

    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof(name), "k%d", i);
        assert_non_null(gw_keylimits_reg_get(f->reg, name, NULL));
    }
    gw_keylimits_reg_each(f->reg, t_count_key, &n);
    assert_int_equal(n, 101); /* with alice */
}

/* ---- rebuild ---- */

static void
t_row(struct gw_row *row, uint64_t ts, unsigned n_att, enum gw_outcome out, struct gw_usage u,
      int64_t cost)
{
    memset(row, 0, sizeof(*row));
    strcpy(row->client, "alice");
    row->ts_ms = ts;
    row->usage = u;
    row->cost_micros = cost;
    row->n_attempts = (uint16_t)n_att;
    for (unsigned i = 0; i < n_att; i++)
        row->attempts[i].outcome = (uint8_t)(i + 1 < n_att ? GW_OUT_SKIPPED_BUSY : out);
}

static void
test_limits_row_counts_only_when_a_hop_was_sent(void **state)
{
    struct gw_row row;

    (void)state;
    t_row(&row, T0, 0, GW_OUT_NONE, t_usage(0, 0, 0, 0), 0);
    assert_false(gw_keylimits_row_counts(&row)); /* refused before any hop */
    t_row(&row, T0, 2, GW_OUT_SKIPPED_BUSY, t_usage(0, 0, 0, 0), 0);
    assert_false(gw_keylimits_row_counts(&row)); /* busy 429 */
    t_row(&row, T0, 1, GW_OUT_SKIPPED_PAUSED, t_usage(0, 0, 0, 0), 0);
    assert_false(gw_keylimits_row_counts(&row));
    t_row(&row, T0, 2, GW_OUT_FAILED, t_usage(0, 0, 0, 0), 0);
    assert_true(gw_keylimits_row_counts(&row));
    t_row(&row, T0, 1, GW_OUT_OK, t_usage(0, 0, 0, 0), 0);
    assert_true(gw_keylimits_row_counts(&row));
    t_row(&row, T0, 3, GW_OUT_SLOW_START, t_usage(0, 0, 0, 0), 0);
    assert_true(gw_keylimits_row_counts(&row));
}

/* The same rows counted live (admit at ts, settle) and by rebuild give equal totals in
 * every period and measure, rows that never reached an upstream included. */
static void
test_limits_rebuild_equals_live_settlement(void **state)
{
    struct gw_keylimits_reg *reg = t_reg_new();
    struct gw_keylimits *live = t_key(reg, "live");
    struct gw_keylimits *built = t_key(reg, "built");
    struct gw_conf_limit l[16];
    struct gw_limit_view va[16], vb[16];
    size_t nl = 0, na, nb;
    const uint64_t now = D0 + DAY + 10 * HOUR; /* day 1, 10:00 */
    struct gw_period cal = t_cal(1);
    struct gw_row rows[12];
    static const uint64_t ts[12] = {
        D0 - 3 * DAY,                  /* last week: month only */
        D0 - DAY,                      /* this week, not today */
        D0 + 5 * HOUR,                 /* day 0 */
        D0 + DAY + 1 * HOUR,           /* today */
        D0 + DAY + 9 * HOUR + 5 * SEC, /* inside the hour */
        D0 + DAY + 9 * HOUR + 5 * SEC + 300,
        D0 + DAY + 9 * HOUR + 30 * MIN,
        D0 + DAY + 9 * HOUR + 59 * MIN + 10 * SEC, /* inside the minute */
        D0 + DAY + 9 * HOUR + 59 * MIN + 10 * SEC,
        D0 + DAY + 9 * HOUR + 59 * MIN + 30 * SEC,
        D0 + DAY + 9 * HOUR + 59 * MIN + 59 * SEC,
        D0 + DAY + 9 * HOUR + 59 * MIN + 59 * SEC + 999,
    };
    (void)state;

    assert_non_null(live);
    assert_non_null(built);
    for (int per = GW_LIMIT_MINUTE; per <= GW_LIMIT_MONTH; per++) {
        l[nl++] = t_lim((enum gw_limit_per)per, GW_LIMIT_REQUESTS, 1000000, false);
        l[nl++] = t_lim((enum gw_limit_per)per, GW_LIMIT_TOKENS, 100000000, per % 2 == 0);
        l[nl++] = t_lim((enum gw_limit_per)per, GW_LIMIT_COST, 100000000, false);
    }
    assert_int_equal(gw_keylimits_configure(live, l, nl), GW_OK);
    assert_int_equal(gw_keylimits_configure(built, l, nl), GW_OK);
    for (size_t i = 0; i < 12; i++) {
        unsigned n_att = i % 4 == 3 ? 0 : (unsigned)(i % 3 + 1);
        enum gw_outcome out = i % 5 == 4 ? GW_OUT_SKIPPED_BUSY : GW_OUT_OK;

        t_row(&rows[i], ts[i], n_att, out, t_usage(100 + i, 10 * i, 1000 * i, 7),
              (int64_t)(1000 + 17 * i));
    }
    /* Live: each request admitted at its ts with an estimate, settled at once. */
    for (size_t i = 0; i < 12; i++) {
        struct gw_period c = t_cal((int)((rows[i].ts_ms - D0 + 100 * DAY) / DAY) - 100);
        struct gw_limit_reservation r;

        if (rows[i].ts_ms < D0)
            c.week.start_ms = D0 - 9 * DAY, c.week.end_ms = D0 - 2 * DAY;
        if (rows[i].ts_ms >= D0 - 2 * DAY && rows[i].ts_ms < D0)
            c = t_cal(-1);
        assert_int_equal(gw_keylimits_admit(live, rows[i].ts_ms, &c, 50, 50, &r, NULL),
                         GW_LIMIT_OK);
        gw_keylimits_settle(live, &r, rows[i].ts_ms + 100, &rows[i].usage, rows[i].cost_micros,
                            gw_keylimits_row_counts(&rows[i]));
    }
    /* Rebuild: a new key at now, every row with both flags. */
    for (size_t i = 0; i < 12; i++)
        gw_keylimits_rebuild_add(built, &rows[i], now, &cal,
                                 GW_KEYLIMITS_F_CALENDAR | GW_KEYLIMITS_F_ROLLING);
    na = gw_keylimits_view(live, now, &cal, va, 16);
    nb = gw_keylimits_view(built, now, &cal, vb, 16);
    assert_int_equal(na, 15);
    assert_int_equal(nb, 15);
    for (size_t i = 0; i < na; i++) {
        assert_int_equal(va[i].used, vb[i].used);
        assert_int_equal(va[i].resets_at_ms, vb[i].resets_at_ms);
    }
    /* And the figures are the expected ones: requests per period. */
    /* Rows 3, 7, 11 (no attempt) and 4, 9 (skipped only) do not count. */
    assert_int_equal(va[0].used, 2);  /* minute: rows 8, 10 */
    assert_int_equal(va[3].used, 4);  /* hour: + 5, 6 */
    assert_int_equal(va[6].used, 4);  /* day 1: nothing more */
    assert_int_equal(va[9].used, 6);  /* week: + 1, 2 */
    assert_int_equal(va[12].used, 7); /* month: + 0 */
    assert_int_equal(va[0].resets_at_ms, (ts[8] / 1000 + 60) * 1000);
    assert_int_equal(va[13].used, vb[13].used);
    /* Month tokens with cache reads: (100 + i) + 7 + 10 i, plus 1000 i, over those rows. */
    assert_int_equal(va[13].used, 7 * 107 + 11 * 32 + 1000 * 32);
    gw_keylimits_reg_free(reg);
}

/* ---- alerts ---- */

static void
test_limits_alerts_once_at_80_and_once_at_100_per_period(void **state)
{
    struct t_fix *f = *state;
    struct gw_period c0 = t_cal(0), c1 = t_cal(1);
    struct gw_limit_alert a[8];
    struct gw_limit_reservation r;

    t_config1(f->k, GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 10, false);
    for (int i = 0; i < 7; i++)
        t_use(f->k, T0 + (uint64_t)i, &c0, t_usage(0, 0, 0, 0), 0);
    assert_false(gw_keylimits_has_alerts(f->k));
    t_use(f->k, T0 + 7, &c0, t_usage(0, 0, 0, 0), 0); /* 8 of 10 */
    assert_true(gw_keylimits_has_alerts(f->k));
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 8), 1);
    assert_false(gw_keylimits_has_alerts(f->k));
    assert_string_equal(a[0].client, "alice");
    assert_int_equal(a[0].percent, 80);
    assert_int_equal(a[0].per, GW_LIMIT_DAY);
    assert_int_equal(a[0].measure, GW_LIMIT_REQUESTS);
    assert_int_equal(a[0].used, 8);
    assert_int_equal(a[0].max, 10);
    assert_int_equal(a[0].resets_at_ms, c0.day.end_ms);
    t_use(f->k, T0 + 8, &c0, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 8), 0);
    t_use(f->k, T0 + 9, &c0, t_usage(0, 0, 0, 0), 0); /* 10 of 10 */
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 8), 1);
    assert_int_equal(a[0].percent, 100);
    assert_int_equal(a[0].used, 10);
    /* Refused requests and give-backs below and above again announce nothing more. */
    assert_int_equal(gw_keylimits_admit(f->k, T0 + 10, &c0, 0, 0, &r, NULL),
                     GW_LIMIT_REFUSE_CALENDAR);
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 8), 0);
    /* The next day announces again. */
    for (int i = 0; i < 8; i++)
        t_use(f->k, D0 + DAY + (uint64_t)i, &c1, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 8), 1);
    assert_int_equal(a[0].percent, 80);
    assert_int_equal(a[0].resets_at_ms, c1.day.end_ms);
}

/* A request the limit stops announces 100% (once) even below the max; a jump over both
 * thresholds announces both, 80 first. */
static void
test_limits_alert_at_100_when_the_limit_stops_a_request(void **state)
{
    struct t_fix *f = *state;
    struct gw_conf_limit l[2] = {t_lim(GW_LIMIT_MINUTE, GW_LIMIT_TOKENS, 1000, false),
                                 t_lim(GW_LIMIT_HOUR, GW_LIMIT_TOKENS, 1000, false)};
    struct gw_limit_alert a[8];
    struct gw_limit_reservation r;

    assert_int_equal(gw_keylimits_configure(f->k, l, 2), GW_OK);
    t_use(f->k, T0, NULL, t_usage(500, 0, 0, 0), 0);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + SEC, NULL, 600, 0, &r, NULL),
                     GW_LIMIT_WAIT_ROLLING);
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 8), 2);
    assert_int_equal(a[0].percent, 100);
    assert_int_equal(a[0].per, GW_LIMIT_MINUTE);
    assert_int_equal(a[0].used, 500);
    assert_int_equal(a[0].resets_at_ms, (T0 / 1000 + 60) * 1000);
    assert_int_equal(a[1].per, GW_LIMIT_HOUR);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + 2 * SEC, NULL, 600, 0, &r, NULL),
                     GW_LIMIT_WAIT_ROLLING);
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 8), 0);
    /* Two minutes later the minute entry may announce again; the hour one not yet. */
    t_use(f->k, T0 + 2 * MIN, NULL, t_usage(400, 0, 0, 0), 0); /* hour: 900 */
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 8), 0);
    t_use(f->k, T0 + 2 * MIN + 1, NULL, t_usage(0, 450, 0, 0), 0); /* minute 850 */
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 8), 1);
    assert_int_equal(a[0].per, GW_LIMIT_MINUTE);
    assert_int_equal(a[0].percent, 80);
}

/* Rebuilt usage marks the thresholds it crosses as announced, silently. */
static void
test_limits_rebuild_does_not_announce_again(void **state)
{
    struct t_fix *f = *state;
    struct gw_period c0 = t_cal(0);
    struct gw_row row;
    struct gw_limit_alert a[4];

    t_config1(f->k, GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 10, false);
    t_row(&row, T0, 1, GW_OUT_OK, t_usage(1, 1, 0, 0), 0);
    for (int i = 0; i < 9; i++)
        gw_keylimits_rebuild_add(f->k, &row, T0 + HOUR, &c0,
                                 GW_KEYLIMITS_F_CALENDAR | GW_KEYLIMITS_F_ROLLING);
    assert_false(gw_keylimits_has_alerts(f->k));
    t_use(f->k, T0 + HOUR, &c0, t_usage(0, 0, 0, 0), 0); /* 10 of 10 */
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 4), 1);
    assert_int_equal(a[0].percent, 100);
}

/* ---- configuration, registry, views ---- */

static void
test_limits_reconfigure_keeps_usage(void **state)
{
    struct t_fix *f = *state;
    struct gw_period c0 = t_cal(0);
    struct gw_conf_limit l1[1] = {t_lim(GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 10, false)};
    struct gw_conf_limit l2[3] = {t_lim(GW_LIMIT_MONTH, GW_LIMIT_TOKENS, 1000, false),
                                  t_lim(GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 10, false),
                                  t_lim(GW_LIMIT_MINUTE, GW_LIMIT_REQUESTS, 100, false)};
    struct gw_limit_view v[4];
    struct gw_limit_alert a[4];

    assert_int_equal(gw_keylimits_configure(f->k, l1, 1), GW_OK);
    for (int i = 0; i < 8; i++)
        t_use(f->k, T0 + (uint64_t)i, &c0, t_usage(5, 5, 0, 0), 0);
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 4), 1); /* 80% */
    assert_int_equal(gw_keylimits_configure(f->k, l2, 3), GW_OK);
    assert_int_equal(gw_keylimits_view(f->k, T0 + SEC, &c0, v, 4), 3);
    assert_int_equal(v[0].per, GW_LIMIT_MONTH);
    assert_int_equal(v[0].used, 80); /* counted before the entry existed */
    assert_int_equal(v[1].used, 8);
    assert_int_equal(v[2].used, 8);
    /* The kept entry does not announce its 80% again. */
    t_use(f->k, T0 + 2 * SEC, &c0, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(gw_keylimits_take_alerts(f->k, a, 4), 0);
    /* No limits: still counted. */
    assert_int_equal(gw_keylimits_configure(f->k, NULL, 0), GW_OK);
    t_use(f->k, T0 + 3 * SEC, &c0, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(gw_keylimits_view(f->k, T0 + 3 * SEC, &c0, v, 4), 0);
    assert_int_equal(gw_keylimits_configure(f->k, l1, 1), GW_OK);
    assert_int_equal(t_used(f->k, T0 + 3 * SEC, &c0, 0), 10);
}

/* An entry written with two measures becomes two entries; empty and zero ones are
 * skipped; more than the maximum is reported. */
static void
test_limits_configure_splits_and_caps_entries(void **state)
{
    struct t_fix *f = *state;
    struct gw_conf_limit l[20];
    struct gw_limit_view v[GW_KEYLIMITS_MAX_ENTRIES];

    memset(l, 0, sizeof(l));
    l[0] = t_lim(GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 10, false);
    l[0].has_tokens = true;
    l[0].tokens = 99;
    l[1].per = GW_LIMIT_HOUR; /* no measure */
    l[2] = t_lim(GW_LIMIT_HOUR, GW_LIMIT_COST, 0, false);
    assert_int_equal(gw_keylimits_configure(f->k, l, 3), GW_OK);
    assert_int_equal(gw_keylimits_view(f->k, T0, NULL, v, GW_KEYLIMITS_MAX_ENTRIES), 2);
    assert_int_equal(v[0].measure, GW_LIMIT_REQUESTS);
    assert_int_equal(v[1].measure, GW_LIMIT_TOKENS);
    assert_int_equal(v[1].max, 99);
    for (int i = 0; i < 20; i++)
        l[i] = t_lim(GW_LIMIT_DAY, GW_LIMIT_REQUESTS, (uint64_t)i + 1, false);
    assert_int_equal(gw_keylimits_configure(f->k, l, 20), GW_E_CFG_RANGE);
    assert_int_equal(gw_keylimits_view(f->k, T0, NULL, v, GW_KEYLIMITS_MAX_ENTRIES),
                     GW_KEYLIMITS_MAX_ENTRIES);
}

static void
test_limits_registry_keeps_one_key_per_name(void **state)
{
    struct t_fix *f = *state;
    bool created = true;
    char long_name[GW_NAME_MAX + 2];

    assert_ptr_equal(gw_keylimits_reg_get(f->reg, "alice", &created), f->k);
    assert_false(created);
    assert_ptr_equal(gw_keylimits_reg_find(f->reg, "alice"), f->k);
    assert_null(gw_keylimits_reg_find(f->reg, "carol"));
    assert_non_null(gw_keylimits_reg_get(f->reg, "carol", &created));
    assert_true(created);
    assert_string_equal(gw_keylimits_name(gw_keylimits_reg_find(f->reg, "carol")), "carol");
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    assert_null(gw_keylimits_reg_get(f->reg, long_name, NULL));
    long_name[GW_NAME_MAX] = '\0';
    assert_non_null(gw_keylimits_reg_get(f->reg, long_name, NULL));
    assert_null(gw_keylimits_reg_get(f->reg, "", NULL));
    assert_string_equal(gw_limit_measure_str(GW_LIMIT_COST), "cost");
}

/* Rolling resets_at: when the oldest usage still counted leaves; now when none is. */
static void
test_limits_view_rolling_resets_at(void **state)
{
    struct t_fix *f = *state;
    struct gw_limit_view v[2];
    struct gw_limit_reservation r;
    struct gw_conf_limit l[2] = {t_lim(GW_LIMIT_MINUTE, GW_LIMIT_REQUESTS, 10, false),
                                 t_lim(GW_LIMIT_HOUR, GW_LIMIT_COST, 10, false)};

    assert_int_equal(gw_keylimits_configure(f->k, l, 2), GW_OK);
    assert_int_equal(gw_keylimits_view(f->k, T0, NULL, v, 2), 2);
    assert_int_equal(v[0].resets_at_ms, T0);
    assert_false(v[0].reached);
    assert_int_equal(gw_keylimits_admit(f->k, T0, NULL, 0, 0, &r, NULL), GW_LIMIT_OK);
    gw_keylimits_settle(f->k, &r, T0, NULL, 0, true);
    t_use(f->k, T0 + 5 * SEC, NULL, t_usage(0, 0, 0, 0), 3);
    assert_int_equal(gw_keylimits_view(f->k, T0 + 6 * SEC, NULL, v, 2), 2);
    assert_int_equal(v[0].resets_at_ms, (T0 / 1000 + 60) * 1000);
    assert_int_equal(v[1].resets_at_ms, ((T0 + 5 * SEC) / 1000 + 3600) * 1000); /* first cost */
    assert_int_equal(gw_keylimits_view(f->k, T0 + 2 * MIN, NULL, v, 2), 2);
    assert_int_equal(v[0].used, 0);
    assert_int_equal(v[0].resets_at_ms, T0 + 2 * MIN);
    assert_int_equal(v[1].used, 3);
}

/* A full hour of one request per second grows the hour ring to its end, and every
 * second leaves on time. */
static void
test_limits_hour_ring_holds_every_second(void **state)
{
    struct t_fix *f = *state;
    struct gw_limit_reservation r;
    struct gw_limit_verdict v;

    t_config1(f->k, GW_LIMIT_HOUR, GW_LIMIT_REQUESTS, 3600, false);
    for (uint64_t s = 0; s < 3600; s++)
        t_use(f->k, T0 + s * SEC, NULL, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(t_used(f->k, T0 + 3599 * SEC, NULL, 0), 3600);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + 3599 * SEC + 500, NULL, 0, 0, &r, &v),
                     GW_LIMIT_WAIT_ROLLING);
    assert_int_equal(v.retry_at_ms, (T0 / 1000 + 3600) * 1000);
    assert_int_equal(gw_keylimits_admit(f->k, v.retry_at_ms, NULL, 0, 0, &r, &v), GW_LIMIT_OK);
    gw_keylimits_settle(f->k, &r, T0 + HOUR, NULL, 0, true);
    assert_int_equal(t_used(f->k, T0 + HOUR + 10 * SEC, NULL, 0), 3600 - 10);
}

/* A request every 8 s for five minutes keeps the minute ring at its first size (8) while
 * its oldest buckets leave and new ones go in behind them, round the array's end: the
 * window's total, and each settlement (recorded usage above the estimate, found in its
 * bucket), stay exact at every step. */
static void
test_limits_rolling_ring_wraps_round_and_stays_exact(void **state)
{
    struct t_fix *f = *state;
    uint64_t used_at[40];

    t_config1(f->k, GW_LIMIT_MINUTE, GW_LIMIT_TOKENS, 1000000, false);
    for (int i = 0; i < 40; i++) {
        uint64_t now = T0 + (uint64_t)i * 8 * SEC + 3, want = 0;

        used_at[i] = 10 + (uint64_t)i; /* in 10 + i, estimated; out i more, recorded */
        t_use(f->k, now, NULL, t_usage(10 + (uint64_t)i, (uint64_t)i, 0, 0), 0);
        used_at[i] += (uint64_t)i;
        for (int j = 0; j <= i; j++)
            if ((T0 + (uint64_t)j * 8 * SEC + 3) / 1000 + 60 > now / 1000)
                want += used_at[j];
        assert_int_equal(t_used(f->k, now, NULL, 0), want);
    }
}

/* Out of memory while a ring grows: the request is still admitted and counted. */
static void
test_limits_out_of_memory_still_counts(void **state)
{
    struct t_fix *f = *state;
    struct gw_period c0 = t_cal(0);
    struct gw_conf_limit l[2] = {t_lim(GW_LIMIT_MINUTE, GW_LIMIT_REQUESTS, 100, false),
                                 t_lim(GW_LIMIT_DAY, GW_LIMIT_REQUESTS, 100, false)};
    struct gw_limit_reservation r;

    assert_int_equal(gw_keylimits_configure(f->k, l, 2), GW_OK);
    for (int i = 0; i < 8; i++) /* fills the first 8 buckets */
        t_use(f->k, T0 + (uint64_t)i * SEC, &c0, t_usage(0, 0, 0, 0), 0);
    gw_alloc_fail_at(1);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + 8 * SEC, &c0, 0, 0, &r, NULL), GW_LIMIT_OK);
    gw_alloc_fail_at(0);
    assert_true(r.in_roll[0]);
    assert_int_equal(r.roll_sec[0], (T0 + 7 * SEC) / 1000); /* merged into the latest */
    gw_keylimits_settle(f->k, &r, T0 + 8 * SEC, NULL, 0, true);
    assert_int_equal(t_used(f->k, T0 + 8 * SEC, &c0, 0), 9);
    assert_int_equal(t_used(f->k, T0 + 8 * SEC, &c0, 1), 9);
    /* With memory the ring grows again. */
    t_use(f->k, T0 + 9 * SEC, &c0, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(t_used(f->k, T0 + 9 * SEC, &c0, 0), 10);
}

/* A clock stepped back by more than a window still counts the request, at the latest
 * second the window saw. */
static void
test_limits_clock_stepped_back_still_counts(void **state)
{
    struct t_fix *f = *state;
    struct gw_limit_reservation r;
    struct gw_limit_verdict v;

    t_config1(f->k, GW_LIMIT_MINUTE, GW_LIMIT_REQUESTS, 2, false);
    t_use(f->k, T0 + 5 * MIN, NULL, t_usage(0, 0, 0, 0), 0);
    assert_int_equal(gw_keylimits_admit(f->k, T0, NULL, 0, 0, &r, NULL), GW_LIMIT_OK);
    assert_int_equal(r.roll_sec[0], (T0 + 5 * MIN) / 1000);
    gw_keylimits_settle(f->k, &r, T0, NULL, 0, true);
    assert_int_equal(gw_keylimits_admit(f->k, T0 + SEC, NULL, 0, 0, &r, &v), GW_LIMIT_WAIT_ROLLING);
    assert_int_equal(v.retry_at_ms, ((T0 + 5 * MIN) / 1000 + 60) * 1000);
}

/* ---- threads ---- */

#define T_THREADS 4
#define T_ITERS 3000

struct t_worker {
    struct gw_keylimits *k;
    int id;
    uint64_t tokens, requests, cost, cache_reads; /* what this thread settled */
    unsigned long refused;
};

static void *
t_worker_main(void *arg)
{
    struct t_worker *w = arg;
    struct gw_period cal = t_cal(0);
    uint32_t x = 2463534242u + (uint32_t)w->id; /* xorshift: a fixed sequence per thread */

    for (int i = 0; i < T_ITERS; i++) {
        struct gw_limit_reservation r;
        struct gw_usage u;
        uint64_t now;
        bool reached;
        int64_t cost;

        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        /* Seconds 0..58 of one minute in a shuffled order: rings grow and insert out of
         * order concurrently; settled before second 60, so nothing leaves the minute. */
        now = T0 - 250 + (uint64_t)(x % 59) * SEC + (x >> 8) % 1000;
        u = t_usage(x % 100, (x >> 7) % 50, (x >> 11) % 30, (x >> 13) % 10);
        cost = (int64_t)((x >> 3) % 1000);
        reached = (x >> 20) % 4 != 0;
        if (gw_keylimits_admit(w->k, now, &cal, (x >> 5) % 200, (x >> 9) % 500, &r, NULL) !=
            GW_LIMIT_OK) {
            w->refused++;
            continue;
        }
        gw_keylimits_settle(w->k, &r, now + (x >> 2) % 50, &u, cost, reached);
        if (reached) {
            w->requests++;
            w->tokens += u.input_tokens + u.output_tokens + u.cache_write_tokens;
            w->cache_reads += u.cache_read_tokens;
            w->cost += (uint64_t)cost;
        }
        if (i % 500 == 0) {
            struct gw_limit_alert a[4];
            struct gw_limit_view v[8];

            (void)gw_keylimits_take_alerts(w->k, a, 4);
            (void)gw_keylimits_view(w->k, now, &cal, v, 8);
        }
    }
    return NULL;
}

/* 4 threads admit and settle on one key; the totals equal the sum of what they settled
 * in every period. Under `make tsan` this also checks the locking. */
static void
test_limits_threads_totals_equal_settled_usage(void **state)
{
    struct t_fix *f = *state;
    struct t_worker w[T_THREADS];
    pthread_t th[T_THREADS];
    struct gw_conf_limit l[6] = {t_lim(GW_LIMIT_MINUTE, GW_LIMIT_REQUESTS, 1000000, false),
                                 t_lim(GW_LIMIT_MINUTE, GW_LIMIT_TOKENS, 1000000000, true),
                                 t_lim(GW_LIMIT_HOUR, GW_LIMIT_COST, 1000000000, false),
                                 t_lim(GW_LIMIT_DAY, GW_LIMIT_TOKENS, 1000000000, false),
                                 t_lim(GW_LIMIT_WEEK, GW_LIMIT_REQUESTS, 1000000, false),
                                 t_lim(GW_LIMIT_MONTH, GW_LIMIT_COST, 1000000000, false)};
    struct gw_period cal = t_cal(0);
    struct gw_limit_view v[6];
    uint64_t req = 0, tok = 0, cr = 0, cost = 0;
    unsigned long refused = 0;

    assert_int_equal(gw_keylimits_configure(f->k, l, 6), GW_OK);
    for (int i = 0; i < T_THREADS; i++) {
        memset(&w[i], 0, sizeof(w[i]));
        w[i].k = f->k;
        w[i].id = i;
        assert_int_equal(pthread_create(&th[i], NULL, t_worker_main, &w[i]), 0);
    }
    for (int i = 0; i < T_THREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        req += w[i].requests;
        tok += w[i].tokens;
        cr += w[i].cache_reads;
        cost += w[i].cost;
        refused += w[i].refused;
    }
    assert_int_equal(refused, 0);
    assert_true(req > 0);
    assert_int_equal(gw_keylimits_view(f->k, T0 + 59 * SEC, &cal, v, 6), 6);
    assert_int_equal(v[0].used, req);
    assert_int_equal(v[1].used, tok + cr);
    assert_int_equal(v[2].used, cost);
    assert_int_equal(v[3].used, tok);
    assert_int_equal(v[4].used, req);
    assert_int_equal(v[5].used, cost);
}

/* 4 threads look up and create the same names at once: one key per name. */
static void *
t_reg_main(void *arg)
{
    struct gw_keylimits_reg *reg = arg;
    char name[16];

    for (int i = 0; i < 200; i++) {
        snprintf(name, sizeof(name), "k%d", i);
        if (!gw_keylimits_reg_get(reg, name, NULL))
            return (void *)1;
    }
    return NULL;
}

static void
test_limits_registry_threads_create_one_key_per_name(void **state)
{
    struct gw_keylimits_reg *reg = gw_keylimits_reg_new();
    pthread_t th[T_THREADS];
    void *ret[T_THREADS];
    bool created = true;

    (void)state;
    assert_non_null(reg);
    for (int i = 0; i < T_THREADS; i++)
        assert_int_equal(pthread_create(&th[i], NULL, t_reg_main, reg), 0);
    /* every thread joined before any assertion can leave the test */
    for (int i = 0; i < T_THREADS; i++)
        assert_int_equal(pthread_join(th[i], &ret[i]), 0);
    for (int i = 0; i < T_THREADS; i++)
        assert_null(ret[i]);
    for (int i = 0; i < 200; i++) {
        char name[16];
        struct gw_keylimits *k;

        snprintf(name, sizeof(name), "k%d", i);
        k = gw_keylimits_reg_find(reg, name);
        assert_non_null(k);
        assert_ptr_equal(gw_keylimits_reg_get(reg, name, &created), k);
        assert_false(created);
    }
    gw_keylimits_reg_free(reg);
}

static void
test_limits_unpriced_models_are_kept_once_and_bounded(void **state)
{
    struct gw_keylimits_reg *reg = t_reg_new();
    struct gw_keylimits *k = t_key(reg, "cap");
    char out[GW_KEYLIMITS_MAX_UNPRICED][GW_MODEL_MAX + 1];
    char name[32];
    int i;

    (void)state;
    assert_int_equal(gw_keylimits_unpriced(k, out, GW_KEYLIMITS_MAX_UNPRICED), 0);
    gw_keylimits_note_unpriced(k, "a");
    gw_keylimits_note_unpriced(k, "a");
    gw_keylimits_note_unpriced(k, "b");
    assert_int_equal(gw_keylimits_unpriced(k, out, GW_KEYLIMITS_MAX_UNPRICED), 2);
    assert_string_equal(out[0], "a");
    assert_string_equal(out[1], "b");
    for (i = 0; i < 20; i++) {
        snprintf(name, sizeof(name), "m%d", i);
        gw_keylimits_note_unpriced(k, name);
    }
    assert_int_equal(gw_keylimits_unpriced(k, out, GW_KEYLIMITS_MAX_UNPRICED),
                     GW_KEYLIMITS_MAX_UNPRICED);
    gw_keylimits_reg_free(reg);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_limits_every_measure_and_period_stops_the_request_past_the_max),
        cmocka_unit_test_setup_teardown(test_limits_calendar_refusal_retries_at_the_period_end,
                                        t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(
            test_limits_calendar_entries_are_checked_before_rolling_ones, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_check_calendar_counts_nothing, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(
            test_limits_rolling_minute_waits_until_the_first_second_leaves, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_rolling_hour_waits_until_enough_tokens_left,
                                        t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(
            test_limits_rolling_wait_is_the_latest_of_the_failing_entries, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(
            test_limits_settlement_replaces_the_estimate_with_recorded_usage, t_setup, t_teardown),
        cmocka_unit_test(test_limits_settle_all_equals_settling_one_by_one),
        cmocka_unit_test_setup_teardown(test_limits_give_back_when_no_upstream_was_reached, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(
            test_limits_settlement_after_the_window_touches_only_live_periods, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_tokens_count_cache_reads_only_when_asked,
                                        t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_cost_is_counted_in_micro_dollars, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_new_day_starts_from_zero, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(
            test_limits_reservation_from_yesterday_settled_today_does_not_count_today, t_setup,
            t_teardown),
        cmocka_unit_test_setup_teardown(
            test_limits_recount_counts_the_rows_of_the_moved_day_and_keeps_running_requests,
            t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(
            test_limits_recount_of_a_period_that_moved_on_again_is_dropped, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_recount_of_a_moved_day_arms_its_alerts_again,
                                        t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_registry_each_visits_every_key, t_setup,
                                        t_teardown),
        cmocka_unit_test(test_limits_row_counts_only_when_a_hop_was_sent),
        cmocka_unit_test(test_limits_rebuild_equals_live_settlement),
        cmocka_unit_test_setup_teardown(test_limits_alerts_once_at_80_and_once_at_100_per_period,
                                        t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_alert_at_100_when_the_limit_stops_a_request,
                                        t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_rebuild_does_not_announce_again, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_reconfigure_keeps_usage, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_configure_splits_and_caps_entries, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_registry_keeps_one_key_per_name, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_view_rolling_resets_at, t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_hour_ring_holds_every_second, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_rolling_ring_wraps_round_and_stays_exact,
                                        t_setup, t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_out_of_memory_still_counts, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_clock_stepped_back_still_counts, t_setup,
                                        t_teardown),
        cmocka_unit_test_setup_teardown(test_limits_threads_totals_equal_settled_usage, t_setup,
                                        t_teardown),
        cmocka_unit_test(test_limits_registry_threads_create_one_key_per_name),
        cmocka_unit_test(test_limits_unpriced_models_are_kept_once_and_bounded),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
