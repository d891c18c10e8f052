/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_quota.c - credential units: windows at minute and day boundaries,
 * leases (settle, keep, sweep), the headroom choice and its turns, the cooldown ladders,
 * learned limits, probes, rebuild, fingerprints, and the choice under threads. The clock
 * is injected everywhere.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/quota.h"

#define DAY0 1795996800000ull /* 2026-11-30T00:00:00Z */
#define NOW (DAY0 + 4 * 3600000ull)
#define MIN 60000ull

static const char fps3[3][GW_QUOTA_FP_LEN + 1] = {"aaaaaaaaaaaa", "bbbbbbbbbbbb", "cccccccccccc"};

static struct gw_quota_set *
t_set(size_t n, uint64_t rpm, uint64_t tpm, uint64_t rpd, uint64_t tpd)
{
    struct gw_quota_set_conf c = {.limit = {rpm, tpm, rpd, tpd}};
    struct gw_quota_set *s = gw_quota_set_new(fps3, n, &c);

    assert_non_null(s);
    return s;
}

static int
t_choose(struct gw_quota_set *s, uint64_t now, uint64_t est, struct gw_quota_lease *l)
{
    struct gw_quota_lease tmp;

    return gw_quota_choose(s, now, est, l ? l : &tmp, NULL);
}

/* ---- windows ---- */

static void
test_quota_rpm_full_until_the_oldest_second_leaves(void **state)
{
    struct gw_quota_set *s = t_set(1, 2, 0, 0, 0);
    struct gw_quota_choice why;
    struct gw_quota_lease l;

    (void)state;
    assert_int_equal(t_choose(s, NOW + 500, 10, NULL), 0);
    assert_int_equal(t_choose(s, NOW + 20500, 10, NULL), 0);
    assert_int_equal(gw_quota_choose(s, NOW + 30000, 10, &l, &why), -1);
    assert_false(l.active);
    assert_int_equal(why.v[0].skip, GW_QUOTA_SKIP_WINDOW_FULL);
    assert_int_equal(why.v[0].win, GW_QUOTA_RPM);
    /* counted at second NOW/1000: it leaves the window 60 s after that second began */
    assert_int_equal(why.v[0].frees_at_ms, NOW + MIN);
    assert_int_equal(why.retry_at_ms, NOW + MIN);
    assert_int_equal(t_choose(s, NOW + MIN - 1, 10, NULL), -1);
    assert_int_equal(t_choose(s, NOW + MIN, 10, NULL), 0);
    gw_quota_set_free(s);
}

static void
test_quota_tpm_counts_the_estimate_and_settle_corrects_it(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 1000, 0, 0);
    struct gw_quota_unit_view v;
    struct gw_quota_lease l;

    (void)state;
    assert_int_equal(t_choose(s, NOW, 800, &l), 0);
    assert_int_equal(t_choose(s, NOW + 1000, 300, NULL), -1); /* 800 + 300 > 1000 */
    gw_quota_settle(s, &l, NOW + 2000, 100, true);            /* really 100 */
    assert_false(l.active);
    gw_quota_view(s, 0, NOW + 2000, &v);
    assert_int_equal(v.win[GW_QUOTA_TPM].used, 100);
    assert_int_equal(v.win[GW_QUOTA_RPM].used, 1);
    assert_int_equal(v.win[GW_QUOTA_TPD].used, 100);
    assert_int_equal(t_choose(s, NOW + 3000, 300, NULL), 0);
    gw_quota_settle(s, &l, NOW + 4000, 5000, true); /* a second settle does nothing */
    gw_quota_view(s, 0, NOW + 4000, &v);
    assert_int_equal(v.win[GW_QUOTA_TPM].used, 400);
    gw_quota_set_free(s);
}

static void
test_quota_a_request_larger_than_the_limit_passes_only_an_empty_window(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 1000, 0, 0);

    (void)state;
    assert_int_equal(t_choose(s, NOW, 5000, NULL), 0);
    assert_int_equal(t_choose(s, NOW + 1000, 1, NULL), -1);
    gw_quota_set_free(s);
}

static void
test_quota_rpd_resets_at_utc_midnight(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 0, 1, 0);
    struct gw_quota_choice why;
    struct gw_quota_lease l;
    uint64_t before = DAY0 + 86400000ull - 1;

    (void)state;
    assert_int_equal(t_choose(s, before, 1, NULL), 0);
    assert_int_equal(gw_quota_choose(s, before, 1, &l, &why), -1);
    assert_int_equal(why.v[0].win, GW_QUOTA_RPD);
    assert_int_equal(why.v[0].frees_at_ms, DAY0 + 86400000ull);
    assert_int_equal(t_choose(s, DAY0 + 86400000ull, 1, NULL), 0);
    gw_quota_set_free(s);
}

static void
test_quota_settle_after_the_minute_touches_only_the_day(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_unit_view v;
    struct gw_quota_lease l;

    (void)state;
    assert_int_equal(t_choose(s, NOW, 100, &l), 0);
    gw_quota_settle(s, &l, NOW + 10 * MIN, 700, true); /* a 10-minute stream */
    gw_quota_view(s, 0, NOW + 10 * MIN, &v);
    assert_int_equal(v.win[GW_QUOTA_TPM].used, 0);
    assert_int_equal(v.win[GW_QUOTA_TPD].used, 700);
    assert_int_equal(v.win[GW_QUOTA_RPD].used, 1);
    gw_quota_set_free(s);
}

static void
test_quota_settle_across_midnight_leaves_the_new_day_alone(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_unit_view v;
    struct gw_quota_lease l;

    (void)state;
    assert_int_equal(t_choose(s, DAY0 + 86400000ull - 5000, 100, &l), 0);
    gw_quota_settle(s, &l, DAY0 + 86400000ull + 5000, 900, true);
    gw_quota_view(s, 0, DAY0 + 86400000ull + 5000, &v);
    assert_int_equal(v.win[GW_QUOTA_TPD].used, 0);
    assert_int_equal(v.win[GW_QUOTA_RPD].used, 0);
    assert_int_equal(v.win[GW_QUOTA_TPM].used, 900); /* still inside the minute */
    gw_quota_set_free(s);
}

static void
test_quota_settle_not_sent_gives_the_request_back(void **state)
{
    struct gw_quota_set *s = t_set(1, 1, 0, 0, 0);
    struct gw_quota_lease l;

    (void)state;
    assert_int_equal(t_choose(s, NOW, 50, &l), 0);
    assert_int_equal(t_choose(s, NOW, 50, NULL), -1);
    gw_quota_settle(s, &l, NOW + 100, 0, false);
    assert_int_equal(t_choose(s, NOW + 200, 50, NULL), 0);
    gw_quota_set_free(s);
}

/* Settlements applied together (a worker's loop turn) leave two sets as settling them
 * one by one leaves a copy of each; each entry is used up, an inactive lease skipped. */
static void
test_quota_settle_all_equals_settling_one_by_one(void **state)
{
    struct gw_quota_set *one[2] = {t_set(2, 100, 100000, 1000, 1000000),
                                   t_set(2, 100, 100000, 1000, 1000000)};
    struct gw_quota_set *all[2] = {t_set(2, 100, 100000, 1000, 1000000),
                                   t_set(2, 100, 100000, 1000, 1000000)};
    const unsigned set_of[6] = {0, 1, 1, 0, 0, 1};
    struct gw_quota_settlement v[6];
    struct gw_quota_lease l1[6];
    struct gw_quota_unit_view va, vb;

    (void)state;
    memset(v, 0, sizeof(v));
    for (size_t i = 0; i < 6; i++) {
        uint64_t now = NOW + i * 1000;

        assert_true(t_choose(one[set_of[i]], now, 500 + i, &l1[i]) >= 0);
        assert_true(t_choose(all[set_of[i]], now, 500 + i, &v[i].lease) >= 0);
        assert_int_equal(v[i].lease.unit, l1[i].unit);
        v[i].set = all[set_of[i]];
        v[i].now_ms = NOW + 10000 + i;
        v[i].real_tokens = 100 * i;
        v[i].sent = i != 2; /* one given back */
    }
    l1[4].active = v[4].lease.active = false; /* settled before: nothing to do */
    for (size_t i = 0; i < 6; i++)
        gw_quota_settle(one[set_of[i]], &l1[i], v[i].now_ms, v[i].real_tokens, v[i].sent);
    gw_quota_settle_all(v, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_null(v[i].set);
        assert_false(v[i].lease.active);
    }
    gw_quota_settle_all(v, 6); /* used up: nothing happens */
    for (size_t k = 0; k < 2; k++) {
        for (size_t u = 0; u < 2; u++) {
            gw_quota_view(one[k], u, NOW + 20000, &va);
            gw_quota_view(all[k], u, NOW + 20000, &vb);
            for (int w = 0; w < GW_QUOTA_WINS; w++)
                assert_int_equal(vb.win[w].used, va.win[w].used);
            assert_int_equal(vb.open_leases, va.open_leases);
        }
        gw_quota_set_free(one[k]);
    }
    /* what was settled: set 1 had leases 1, 2 (given back) and 5 */
    gw_quota_view(all[1], 0, NOW + 20000, &va);
    gw_quota_view(all[1], 1, NOW + 20000, &vb);
    assert_int_equal(va.win[GW_QUOTA_RPM].used + vb.win[GW_QUOTA_RPM].used, 2);
    assert_int_equal(va.win[GW_QUOTA_TPM].used + vb.win[GW_QUOTA_TPM].used, 100 + 500);
    gw_quota_set_free(all[0]);
    gw_quota_set_free(all[1]);
}

static void
test_quota_sweep_drops_unsettled_leases_after_two_minutes(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_unit_view v;
    struct gw_quota_lease gone, kept;

    (void)state;
    assert_int_equal(t_choose(s, NOW, 100, &gone), 0);
    assert_int_equal(t_choose(s, NOW, 100, &kept), 0);
    gw_quota_lease_keep(s, &kept, NOW + 90000);
    assert_int_equal(gw_quota_sweep(s, NOW + GW_QUOTA_LEASE_TTL_MS - 1000), 0);
    assert_int_equal(gw_quota_sweep(s, NOW + GW_QUOTA_LEASE_TTL_MS), 1);
    gw_quota_view(s, 0, NOW + GW_QUOTA_LEASE_TTL_MS, &v);
    assert_int_equal(v.open_leases, 1);
    assert_int_equal(v.leases_dropped, 1);
    assert_int_equal(v.win[GW_QUOTA_TPD].used, 200); /* what it counted stays counted */
    /* a late settle still corrects the usage and does not count the lease twice */
    gw_quota_settle(s, &gone, NOW + GW_QUOTA_LEASE_TTL_MS + 1000, 40, true);
    gw_quota_settle(s, &kept, NOW + GW_QUOTA_LEASE_TTL_MS + 1000, 60, true);
    gw_quota_view(s, 0, NOW + GW_QUOTA_LEASE_TTL_MS + 1000, &v);
    assert_int_equal(v.open_leases, 0);
    assert_int_equal(v.leases_dropped, 1);
    assert_int_equal(v.win[GW_QUOTA_TPD].used, 100);
    gw_quota_set_free(s);
}

/* ---- headroom and turns ---- */

static void
test_quota_choose_takes_the_most_headroom(void **state)
{
    struct gw_quota_set *s = t_set(2, 10, 0, 0, 0);
    struct gw_quota_choice why;
    struct gw_quota_lease l;

    (void)state;
    gw_quota_success(s, 0, NOW);
    gw_quota_success(s, 1, NOW);
    for (int i = 0; i < 5; i++)
        gw_quota_rebuild_add(s, 0, NOW, 0, NOW);
    gw_quota_rebuild_add(s, 1, NOW, 0, NOW);
    assert_int_equal(gw_quota_choose(s, NOW, 1, &l, &why), 1);
    assert_int_equal(why.v[0].skip, GW_QUOTA_SKIP_HEADROOM);
    assert_int_equal(why.v[0].headroom_ppm, 500000);
    assert_int_equal(why.v[1].headroom_ppm, 900000);
    gw_quota_set_free(s);
}

static void
test_quota_never_seen_counts_half_used_on_known_limits_only(void **state)
{
    struct gw_quota_set *s = t_set(2, 10, 0, 0, 0);
    struct gw_quota_set *open = t_set(2, 0, 0, 0, 0);
    struct gw_quota_choice why;
    struct gw_quota_lease l;

    (void)state;
    gw_quota_success(s, 1, NOW);
    gw_quota_rebuild_add(s, 1, NOW, 0, NOW);
    gw_quota_rebuild_add(s, 1, NOW, 0, NOW); /* seen, 2 of 10 used: 0.2 < 0.5 */
    assert_int_equal(gw_quota_choose(s, NOW, 1, &l, &why), 1);
    assert_int_equal(why.v[0].headroom_ppm, 500000);
    /* no known limit: a never-seen credential has full headroom */
    assert_int_equal(gw_quota_peek(open, NOW, 1, &why), 0);
    assert_int_equal(why.v[0].headroom_ppm, 1000000);
    gw_quota_set_free(s);
    gw_quota_set_free(open);
}

static void
test_quota_ties_take_turns(void **state)
{
    struct gw_quota_set *s = t_set(3, 0, 0, 0, 0);
    struct gw_quota_choice why;

    (void)state;
    assert_int_equal(t_choose(s, NOW, 1, NULL), 0);
    assert_int_equal(gw_quota_peek(s, NOW, 1, &why), 1); /* peek does not move the turn */
    assert_int_equal(t_choose(s, NOW, 1, NULL), 1);
    assert_int_equal(t_choose(s, NOW, 1, NULL), 2);
    assert_int_equal(t_choose(s, NOW, 1, NULL), 0);
    gw_quota_fail(s, 1, NOW, &(struct gw_quota_hit){.status = 429}, NULL);
    assert_int_equal(t_choose(s, NOW, 1, NULL), 2); /* 1 is cooling: skipped */
    gw_quota_set_free(s);
}

static void
test_quota_why_names_cooling_and_full_windows_and_the_earliest_retry(void **state)
{
    struct gw_quota_set *s = t_set(2, 1, 0, 0, 0);
    struct gw_quota_choice why;
    struct gw_quota_lease l;

    (void)state;
    gw_quota_fail(s, 0, NOW, &(struct gw_quota_hit){.status = 402}, NULL);
    assert_int_equal(t_choose(s, NOW, 1, NULL), 1);
    assert_int_equal(gw_quota_choose(s, NOW + 1000, 1, &l, &why), -1);
    assert_int_equal(why.chosen, -1);
    assert_int_equal(why.v[0].skip, GW_QUOTA_SKIP_COOLING);
    assert_int_equal(why.v[0].cool.source, GW_QUOTA_SRC_CREDIT);
    assert_int_equal(why.v[0].cool.until_ms, NOW + 2 * MIN);
    assert_int_equal(why.v[1].skip, GW_QUOTA_SKIP_WINDOW_FULL);
    assert_int_equal(why.v[1].win, GW_QUOTA_RPM);
    assert_int_equal(why.v[1].frees_at_ms, NOW + MIN);
    assert_int_equal(why.retry_at_ms, NOW + MIN); /* the window frees before the cooldown ends */
    gw_quota_set_free(s);
}

static void
test_quota_a_cooling_unit_with_a_full_day_admits_when_both_end(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 0, 1, 0);
    struct gw_quota_choice why;
    struct gw_quota_lease l;

    (void)state;
    assert_int_equal(t_choose(s, NOW, 1, NULL), 0);
    gw_quota_fail(s, 0, NOW, &(struct gw_quota_hit){.status = 429}, NULL);
    assert_int_equal(gw_quota_choose(s, NOW + 1000, 1, &l, &why), -1);
    assert_int_equal(why.v[0].skip, GW_QUOTA_SKIP_COOLING);
    assert_int_equal(why.v[0].cool.until_ms, NOW + 2 * MIN); /* day spent: the day ladder */
    assert_int_equal(why.retry_at_ms, DAY0 + 86400000ull);   /* the day resets later */
    gw_quota_set_free(s);
}

static void
test_quota_verdicts_read_as_one_line(void **state)
{
    struct gw_quota_set *s = t_set(3, 1, 0, 0, 0);
    struct gw_quota_choice why;
    struct gw_quota_lease l;
    char line[96];

    (void)state;
    gw_quota_fail(s, 0, NOW, &(struct gw_quota_hit){.status = 402}, NULL);
    assert_int_equal(t_choose(s, NOW, 1, NULL), 1);
    assert_int_equal(gw_quota_choose(s, NOW + 500, 1, &l, &why), 2);
    assert_string_equal(gw_quota_verdict_str(&why.v[0], NOW + 500, line, sizeof(line)),
                        "cooling: credit until +120 s, 1 hit");
    assert_string_equal(gw_quota_verdict_str(&why.v[1], NOW + 500, line, sizeof(line)),
                        "rpm window full, admits in 60 s");
    assert_string_equal(gw_quota_verdict_str(&why.v[2], NOW + 500, line, sizeof(line)),
                        "chosen (headroom 50%)");
    assert_string_equal(gw_quota_verdict_str(&why.v[2], NOW + 500, line, 7), "chosen");
    gw_quota_set_free(s);
}

/* ---- cooldown ladders ---- */

static struct gw_quota_cooldown
t_fail(struct gw_quota_set *s, uint64_t now, unsigned status, const struct gw_quota_facts *f)
{
    struct gw_quota_cooldown c;
    struct gw_quota_hit h = {.status = status, .facts = f};

    gw_quota_fail(s, 0, now, &h, &c);
    return c;
}

static void
test_quota_transient_429_with_healthy_day_is_90s_without_escalation(void **state)
{
    struct gw_quota_set *s = t_set(1, 100, 0, 1000, 0);
    struct gw_quota_cooldown c;

    (void)state;
    c = t_fail(s, NOW, 429, NULL);
    assert_int_equal(c.source, GW_QUOTA_SRC_TRANSIENT);
    assert_int_equal(c.until_ms - c.since_ms, 90000);
    c = t_fail(s, NOW + 2 * MIN, 429, NULL);
    assert_int_equal(c.until_ms - c.since_ms, 90000);
    assert_int_equal(c.hits, 2);
    assert_false(c.authoritative);
    gw_quota_set_free(s);
}

static void
test_quota_day_exhaustion_climbs_the_ladder_and_a_success_clears_it(void **state)
{
    static const uint64_t steps[] = {2 * MIN, 10 * MIN, 60 * MIN, 1440 * MIN, 1440 * MIN};
    struct gw_quota_facts f = {.day_exhausted = true};
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_cooldown c;
    uint64_t t = NOW;

    (void)state;
    for (size_t i = 0; i < 5; i++) {
        c = t_fail(s, t, 429, &f);
        assert_int_equal(c.source, GW_QUOTA_SRC_DAY);
        assert_int_equal(c.until_ms - c.since_ms, steps[i]);
        t = c.until_ms > t + 1000 && i < 2 ? c.until_ms : t + 1000;
    }
    assert_true(gw_quota_success(s, 0, t));  /* it had cooled: recovered */
    assert_false(gw_quota_success(s, 0, t)); /* hits cleared: nothing to tell again */
    c = t_fail(s, t + 1440 * MIN, 429, &f);  /* past the 24 h cooldown in force */
    assert_int_equal(c.until_ms - c.since_ms, 2 * MIN);
    assert_int_equal(c.hits, 1);
    gw_quota_set_free(s);
}

/* A success after a success has nothing to clear (it takes no lock: the unit is known to
 * be as a success leaves it); a failure in between is cleared by the next success: it
 * tells that the unit had cooled, and the ladder starts again from its first step. */
static void
test_quota_success_after_success_changes_nothing_and_after_a_failure_clears_it(void **state)
{
    struct gw_quota_facts f = {.day_exhausted = true};
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_unit_view v;
    struct gw_quota_cooldown c;

    (void)state;
    gw_quota_view(s, 0, NOW, &v);
    assert_false(v.seen);
    assert_false(gw_quota_success(s, 0, NOW)); /* never cooled */
    gw_quota_view(s, 0, NOW, &v);
    assert_true(v.seen);
    assert_false(gw_quota_success(s, 0, NOW + 1));
    for (int round = 0; round < 2; round++) {
        uint64_t t = NOW + (uint64_t)round * 2000 * MIN;

        c = t_fail(s, t, 429, &f);
        assert_int_equal(c.until_ms - c.since_ms, 2 * MIN);
        c = t_fail(s, t + 1000, 429, &f);
        assert_int_equal(c.hits, 2);
        assert_int_equal(c.until_ms - c.since_ms, 10 * MIN);
        assert_true(gw_quota_success(s, 0, t + 2000));  /* cleared: the ladder again */
        assert_false(gw_quota_success(s, 0, t + 3000)); /* nothing left to clear */
    }
    gw_quota_set_free(s);
}

static void
test_quota_a_day_window_stated_empty_is_day_exhaustion(void **state)
{
    struct gw_quota_facts groq = {
        .n = 1, .f = {{.win = GW_QUOTA_RPD, .limit = 14400, .remaining = 0, .reset_ms = 3 * MIN}}};
    struct gw_quota_facts left = {
        .n = 1, .f = {{.win = GW_QUOTA_RPD, .limit = 14400, .remaining = 9, .reset_ms = 3 * MIN}}};
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_cooldown c;

    (void)state;
    c = t_fail(s, NOW, 429, &left);
    assert_int_equal(c.source, GW_QUOTA_SRC_TRANSIENT); /* a limit is known, day healthy */
    c = t_fail(s, c.until_ms, 429, &groq);
    assert_int_equal(c.source, GW_QUOTA_SRC_DAY);
    gw_quota_set_free(s);
}

static void
test_quota_day_ladder_counts_within_a_rolling_day(void **state)
{
    struct gw_quota_facts f = {.day_exhausted = true};
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_cooldown c;

    (void)state;
    c = t_fail(s, NOW, 429, &f);
    c = t_fail(s, c.until_ms, 429, &f);
    assert_int_equal(c.until_ms - c.since_ms, 10 * MIN);
    c = t_fail(s, NOW + 1441 * MIN, 429, &f); /* more than a day after the first hit */
    assert_int_equal(c.until_ms - c.since_ms, 2 * MIN);
    gw_quota_set_free(s);
}

static void
test_quota_own_day_counters_at_the_limit_mean_day_exhaustion(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 0, 2, 0);
    struct gw_quota_cooldown c;

    (void)state;
    assert_int_equal(t_choose(s, NOW, 1, NULL), 0);
    c = t_fail(s, NOW + 1000, 429, NULL);
    assert_int_equal(c.source, GW_QUOTA_SRC_TRANSIENT); /* 1 of 2: healthy */
    assert_int_equal(t_choose(s, NOW + 91000, 1, NULL), 0);
    c = t_fail(s, NOW + 92000, 429, NULL);
    assert_int_equal(c.source, GW_QUOTA_SRC_DAY);
    gw_quota_set_free(s);
}

static void
test_quota_unknown_limits_escalate_on_two_429s_within_an_hour_capped_at_10_min(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_cooldown c;

    (void)state;
    c = t_fail(s, NOW, 429, NULL);
    assert_int_equal(c.source, GW_QUOTA_SRC_UNKNOWN);
    assert_int_equal(c.until_ms - c.since_ms, 90000);
    c = t_fail(s, c.until_ms, 429, NULL);
    assert_int_equal(c.until_ms - c.since_ms, 2 * MIN);
    c = t_fail(s, c.until_ms, 429, NULL);
    assert_int_equal(c.until_ms - c.since_ms, 10 * MIN);
    c = t_fail(s, c.until_ms, 429, NULL);
    assert_int_equal(c.until_ms - c.since_ms, 10 * MIN);
    c = t_fail(s, c.until_ms + 61 * MIN, 429, NULL); /* over an hour since the last */
    assert_int_equal(c.until_ms - c.since_ms, 90000);
    gw_quota_set_free(s);
}

static void
test_quota_402_is_credit_and_403_is_tier(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_cooldown c;

    (void)state;
    c = t_fail(s, NOW, 402, NULL);
    assert_int_equal(c.source, GW_QUOTA_SRC_CREDIT);
    c = t_fail(s, c.until_ms, 403, NULL);
    assert_int_equal(c.source, GW_QUOTA_SRC_TIER);
    assert_int_equal(c.until_ms - c.since_ms, 10 * MIN);
    assert_string_equal(gw_quota_source_str(c.source), "tier");
    gw_quota_set_free(s);
}

static void
test_quota_longer_retry_after_wins_and_is_authoritative_capped_at_a_day(void **state)
{
    struct gw_quota_set *s = t_set(1, 100, 0, 0, 0);
    struct gw_quota_facts shorter = {.retry_after_ms = 20000};
    struct gw_quota_facts longer = {.retry_after_ms = 300000};
    struct gw_quota_facts huge = {.retry_after_ms = 3 * 86400000ull};
    struct gw_quota_cooldown c;

    (void)state;
    c = t_fail(s, NOW, 429, &shorter);
    assert_int_equal(c.until_ms - c.since_ms, 90000);
    assert_false(c.authoritative);
    c = t_fail(s, c.until_ms, 429, &longer);
    assert_int_equal(c.until_ms - c.since_ms, 300000);
    assert_true(c.authoritative);
    c = t_fail(s, c.until_ms, 429, &huge);
    assert_int_equal(c.until_ms - c.since_ms, 86400000ull);
    gw_quota_set_free(s);
}

static void
test_quota_local_upstream_is_capped_and_does_not_escalate_while_capped(void **state)
{
    struct gw_quota_set_conf local = {.local = true, .local_cap_ms = 5000};
    struct gw_quota_set_conf uncapped = {.local = true, .local_cap_ms = 0};
    struct gw_quota_set *s = gw_quota_set_new(fps3, 1, &local);
    struct gw_quota_facts ra = {.retry_after_ms = 60000};
    struct gw_quota_cooldown c;

    (void)state;
    c = t_fail(s, NOW, 429, NULL);
    assert_int_equal(c.until_ms - c.since_ms, 5000);
    assert_true(c.capped);
    c = t_fail(s, c.until_ms, 429, NULL);
    assert_int_equal(c.until_ms - c.since_ms, 5000);
    c = t_fail(s, c.until_ms, 429, &ra); /* the cap wins over Retry-After too */
    assert_int_equal(c.until_ms - c.since_ms, 5000);
    gw_quota_set_configure(s, &uncapped);
    c = t_fail(s, c.until_ms, 429, NULL);
    assert_int_equal(c.until_ms - c.since_ms, 90000); /* never escalated while capped */
    assert_false(c.capped);
    gw_quota_set_free(s);
}

static void
test_quota_an_active_cooldown_is_never_shortened(void **state)
{
    struct gw_quota_set *s = t_set(1, 100, 0, 0, 0);
    struct gw_quota_facts longer = {.retry_after_ms = 600000};
    struct gw_quota_cooldown c;

    (void)state;
    c = t_fail(s, NOW, 429, &longer);
    c = t_fail(s, NOW + 1000, 429, NULL);
    assert_int_equal(c.until_ms, NOW + 600000);
    assert_true(c.authoritative);
    gw_quota_set_free(s);
}

/* ---- learned limits ---- */

static void
test_quota_learned_limit_only_tightens_and_keeps_its_origin(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 100000, 0, 0);
    struct gw_quota_facts tight = {.n = 1,
                                   .f = {{.win = GW_QUOTA_TPM,
                                          .limit = 30000,
                                          .remaining = -1,
                                          .origin = "body: tokens per min"}}};
    struct gw_quota_facts loose = {.n = 1,
                                   .f = {{.win = GW_QUOTA_TPM,
                                          .limit = 500000,
                                          .remaining = -1,
                                          .origin = "x-ratelimit-limit-tokens"}}};
    struct gw_quota_unit_view v;

    (void)state;
    gw_quota_learn_apply(s, 0, NOW, &tight);
    gw_quota_view(s, 0, NOW, &v);
    assert_int_equal(v.win[GW_QUOTA_TPM].limit, 30000);
    assert_string_equal(v.learned[GW_QUOTA_TPM].origin, "body: tokens per min");
    gw_quota_learn_apply(s, 0, NOW, &loose);
    gw_quota_view(s, 0, NOW, &v);
    assert_int_equal(v.win[GW_QUOTA_TPM].limit, 100000); /* the configured one holds */
    assert_int_equal(v.learned[GW_QUOTA_TPM].limit, 500000);
    gw_quota_set_free(s);
}

static void
test_quota_remaining_zero_holds_the_window_until_its_reset(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_facts f = {.n = 1,
                               .f = {{.win = GW_QUOTA_TPM, .remaining = 0, .reset_ms = 7660}}};
    struct gw_quota_choice why;
    struct gw_quota_lease l;

    (void)state;
    gw_quota_learn_apply(s, 0, NOW, &f);
    assert_int_equal(gw_quota_choose(s, NOW + 1000, 1, &l, &why), -1);
    assert_int_equal(why.v[0].win, GW_QUOTA_TPM);
    assert_int_equal(why.retry_at_ms, NOW + 7660);
    assert_int_equal(t_choose(s, NOW + 7660, 1, NULL), 0);
    gw_quota_set_free(s);
}

/* ---- probes ---- */

static void
test_quota_probe_picks_heuristic_cooldowns_half_served_with_a_minute_left(void **state)
{
    struct gw_quota_facts day = {.day_exhausted = true};
    struct gw_quota_facts ra = {.retry_after_ms = 3600000};
    struct gw_quota_set *s = t_set(3, 0, 0, 0, 0);
    struct gw_quota_probe p[3];
    struct gw_quota_cooldown c;

    (void)state;
    /* unit 0: 10 min day step (2 min, then 10 min) */
    gw_quota_fail(s, 0, NOW - 2 * MIN, &(struct gw_quota_hit){.status = 429, .facts = &day}, &c);
    gw_quota_fail(s, 0, NOW, &(struct gw_quota_hit){.status = 429, .facts = &day}, &c);
    assert_int_equal(c.until_ms, NOW + 10 * MIN);
    /* unit 1: authoritative, never probed */
    gw_quota_fail(s, 1, NOW, &(struct gw_quota_hit){.status = 429, .facts = &ra}, NULL);
    struct gw_quota_set *sets[] = {s};
    assert_int_equal(gw_quota_probe_pick(sets, 1, NOW + 5 * MIN - 1, p, 3), 0);
    assert_int_equal(gw_quota_probe_pick(sets, 1, NOW + 5 * MIN, p, 3), 1);
    assert_ptr_equal(p[0].set, s);
    assert_int_equal(p[0].unit, 0);
    assert_int_equal(gw_quota_probe_pick(sets, 1, NOW + 9 * MIN + 1, p, 3), 0); /* < 60 s left */
    /* a failed probe backs off 2 min and leaves the cooldown as it was */
    gw_quota_probe_done(s, 0, NOW + 5 * MIN, false);
    assert_int_equal(gw_quota_probe_pick(sets, 1, NOW + 7 * MIN - 1, p, 3), 0);
    assert_int_equal(gw_quota_probe_pick(sets, 1, NOW + 7 * MIN, p, 3), 1);
    gw_quota_probe_done(s, 0, NOW + 7 * MIN, true);
    assert_int_equal(t_choose(s, NOW + 7 * MIN, 1, NULL), 0); /* cleared early */
    gw_quota_set_free(s);
}

static void
test_quota_probe_backoff_is_2_4_8_15_minutes(void **state)
{
    static const uint64_t back[] = {2, 4, 8, 15, 15};
    struct gw_quota_facts ra_day = {.day_exhausted = true};
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_set *sets[] = {s};
    struct gw_quota_probe p[3];
    uint64_t t;

    (void)state;
    for (int i = 0; i < 4; i++) /* climb to the 24 h step */
        gw_quota_fail(s, 0, NOW, &(struct gw_quota_hit){.status = 429, .facts = &ra_day}, NULL);
    t = NOW + 720 * MIN;
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(gw_quota_probe_pick(sets, 1, t, p, 3), 1);
        gw_quota_probe_done(s, 0, t, false);
        assert_int_equal(gw_quota_probe_pick(sets, 1, t + back[i] * MIN - 1, p, 3), 0);
        t += back[i] * MIN;
    }
    gw_quota_set_free(s);
}

static void
test_quota_probe_pass_takes_at_most_three_longest_cooling_first(void **state)
{
    struct gw_quota_set *a = t_set(3, 0, 0, 0, 0), *b = t_set(2, 0, 0, 0, 0);
    struct gw_quota_set *sets[] = {a, b};
    struct gw_quota_facts day = {.day_exhausted = true};
    struct gw_quota_probe p[3];

    (void)state;
    for (int i = 0; i < 4; i++) {
        gw_quota_fail(a, 0, NOW + 3000, &(struct gw_quota_hit){.status = 429, .facts = &day}, NULL);
        gw_quota_fail(a, 1, NOW + 4000, &(struct gw_quota_hit){.status = 429, .facts = &day}, NULL);
        gw_quota_fail(a, 2, NOW + 5000, &(struct gw_quota_hit){.status = 429, .facts = &day}, NULL);
        gw_quota_fail(b, 0, NOW + 1000, &(struct gw_quota_hit){.status = 429, .facts = &day}, NULL);
        gw_quota_fail(b, 1, NOW + 2000, &(struct gw_quota_hit){.status = 429, .facts = &day}, NULL);
    }
    assert_int_equal(gw_quota_probe_pick(sets, 2, NOW + 730 * MIN, p, 5), 3);
    assert_ptr_equal(p[0].set, b);
    assert_int_equal(p[0].unit, 0);
    assert_ptr_equal(p[1].set, b);
    assert_int_equal(p[1].unit, 1);
    assert_ptr_equal(p[2].set, a);
    assert_int_equal(p[2].unit, 0);
    gw_quota_set_free(a);
    gw_quota_set_free(b);
}

static void
test_quota_prober_jitters_the_first_pass_then_runs_every_minute(void **state)
{
    struct gw_quota_prober p1, p2;

    (void)state;
    gw_quota_prober_init(&p1, NOW, 1);
    gw_quota_prober_init(&p2, NOW, 2);
    assert_true(p1.next_pass_ms >= NOW && p1.next_pass_ms < NOW + MIN);
    assert_true(p2.next_pass_ms >= NOW && p2.next_pass_ms < NOW + MIN);
    assert_true(p1.next_pass_ms != p2.next_pass_ms);
    assert_false(gw_quota_prober_due(&p1, p1.next_pass_ms - 1));
    assert_true(gw_quota_prober_due(&p1, p1.next_pass_ms));
    assert_false(gw_quota_prober_due(&p1, p1.next_pass_ms - 1));
    assert_true(gw_quota_prober_due(&p1, p1.next_pass_ms));
}

static void
test_quota_prober_scaled_divides_the_interval_and_the_minimum_left(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_set *sets[1] = {s};
    struct gw_quota_prober p;
    struct gw_quota_probe out[3];
    struct gw_quota_hit h = {429, NULL};
    struct gw_quota_cooldown cool;

    (void)state;
    gw_quota_prober_init_scaled(&p, NOW, 7, 60);
    assert_int_equal(p.every_ms, 1000);
    assert_int_equal(p.min_left_ms, 1000);
    assert_true(p.next_pass_ms >= NOW && p.next_pass_ms < NOW + 1000);
    assert_true(gw_quota_prober_due(&p, p.next_pass_ms));
    assert_false(gw_quota_prober_due(&p, p.next_pass_ms - 1));
    /* a 90 s heuristic cooldown: half served at 45 s; scaled, 44 s left is enough, as
     * 1 s is and 999 ms is not; the real schedule wants 60 s left: never */
    gw_quota_fail(s, 0, NOW, &h, &cool);
    assert_int_equal(cool.until_ms, NOW + 90000);
    assert_int_equal(gw_quota_probe_pick_by(&p, sets, 1, NOW + 45000 - 1, out, 3), 0);
    assert_int_equal(gw_quota_probe_pick_by(&p, sets, 1, NOW + 45000, out, 3), 1);
    assert_int_equal(gw_quota_probe_pick_by(&p, sets, 1, NOW + 89000, out, 3), 1);
    assert_int_equal(gw_quota_probe_pick_by(&p, sets, 1, NOW + 89001, out, 3), 0);
    assert_int_equal(gw_quota_probe_pick(sets, 1, NOW + 45000, out, 3), 0);
    gw_quota_prober_init_scaled(&p, NOW, 7, 0); /* 0 is 1: the real schedule */
    assert_int_equal(p.every_ms, GW_QUOTA_PROBE_EVERY_MS);
    assert_int_equal(p.min_left_ms, GW_QUOTA_PROBE_MIN_LEFT_MS);
    gw_quota_set_free(s);
}

/* ---- rebuild, registry, fingerprints, config ---- */

static void
test_quota_rebuild_counts_rows_still_inside_their_windows(void **state)
{
    struct gw_quota_set_conf c = {.limit = {0}};
    struct gw_quota_reg *reg = gw_quota_reg_new();
    struct gw_quota_set *s;
    struct gw_quota_unit_view v;
    bool created;

    (void)state;
    s = gw_quota_reg_get(reg, "groq", "llama", fps3, 2, &c, &created);
    assert_non_null(s);
    assert_true(created);
    assert_ptr_equal(gw_quota_reg_get(reg, "groq", "llama", fps3, 2, &c, &created), s);
    assert_false(created);
    assert_true(
        gw_quota_reg_rebuild_add(reg, NOW - 30000, "groq", "llama", "bbbbbbbbbbbb", 500, NOW));
    assert_true(
        gw_quota_reg_rebuild_add(reg, NOW - 3 * MIN, "groq", "llama", "bbbbbbbbbbbb", 70, NOW));
    assert_true(
        gw_quota_reg_rebuild_add(reg, DAY0 - 1000, "groq", "llama", "bbbbbbbbbbbb", 9, NOW));
    assert_false(gw_quota_reg_rebuild_add(reg, NOW, "groq", "llama", "dddddddddddd", 1, NOW));
    assert_false(gw_quota_reg_rebuild_add(reg, NOW, "other", "llama", "bbbbbbbbbbbb", 1, NOW));
    gw_quota_view(s, 1, NOW, &v);
    assert_int_equal(v.win[GW_QUOTA_RPM].used, 1);
    assert_int_equal(v.win[GW_QUOTA_TPM].used, 500);
    assert_int_equal(v.win[GW_QUOTA_RPD].used, 2);
    assert_int_equal(v.win[GW_QUOTA_TPD].used, 570);
    assert_true(v.seen);
    gw_quota_view(s, 0, NOW, &v);
    assert_false(v.seen);
    /* pool account: the set of (provider, "") answers for every model */
    assert_non_null(gw_quota_reg_get(reg, "acct", "", fps3, 1, &c, NULL));
    assert_true(gw_quota_reg_rebuild_add(reg, NOW, "acct", "any-model", "aaaaaaaaaaaa", 1, NOW));
    gw_quota_reg_free(reg);
}

static void
test_quota_registry_stops_creating_at_its_limit(void **state)
{
    struct gw_quota_set_conf c = {.limit = {0}};
    struct gw_quota_reg *reg = gw_quota_reg_new();
    char model[16];

    (void)state;
    for (int i = 0; i < GW_QUOTA_MAX_SETS; i++) {
        snprintf(model, sizeof(model), "m%d", i);
        assert_non_null(gw_quota_reg_get(reg, "p", model, fps3, 1, &c, NULL));
    }
    assert_null(gw_quota_reg_get(reg, "p", "one-more", fps3, 1, &c, NULL));
    assert_non_null(gw_quota_reg_get(reg, "p", "m7", fps3, 1, &c, NULL)); /* existing: found */
    gw_quota_reg_free(reg);
}

static void
test_quota_fingerprint_is_the_head_of_sha256(void **state)
{
    char fp[GW_QUOTA_FP_LEN + 1];

    (void)state;
    gw_quota_fingerprint("abc", 3, fp); /* SHA-256("abc") = ba7816bf8f01cfea... */
    assert_string_equal(fp, "ba7816bf8f01");
}

static void
test_quota_local_hosts(void **state)
{
    (void)state;
    assert_true(gw_quota_host_is_local("127.0.0.1"));
    assert_true(gw_quota_host_is_local("localhost"));
    assert_true(gw_quota_host_is_local("10.1.2.3"));
    assert_true(gw_quota_host_is_local("172.20.0.1"));
    assert_false(gw_quota_host_is_local("172.32.0.1"));
    assert_true(gw_quota_host_is_local("192.168.1.1"));
    assert_true(gw_quota_host_is_local("::1"));
    assert_true(gw_quota_host_is_local("fd00::1"));
    assert_true(gw_quota_host_is_local("fe80::1"));
    assert_true(gw_quota_host_is_local("::ffff:192.168.0.9"));
    assert_false(gw_quota_host_is_local("2001:db8::1"));
    assert_false(gw_quota_host_is_local("::ffff:8.8.8.8"));
    assert_false(gw_quota_host_is_local("127.0.0"));
    assert_false(gw_quota_host_is_local("127.0.0.256"));
    assert_false(gw_quota_host_is_local("8.8.8.8"));
    assert_false(gw_quota_host_is_local("api.openai.com"));
}

static void
test_quota_conf_of_overrides_the_default_axis_by_axis(void **state)
{
    char model[] = "gpt-4.1", host[] = "127.0.0.1";
    struct gw_conf_quota_model m = {.model = model, .win = {.rpm = 60}};
    struct gw_conf_provider p = {.host = host,
                                 .quota_local_cap_secs = 5,
                                 .quota_default = {500, 200000, 10000, 5000000},
                                 .quota_models = &m,
                                 .n_quota_models = 1};
    struct gw_quota_set_conf c;

    (void)state;
    gw_quota_set_conf_of(&p, "gpt-4.1", &c);
    assert_int_equal(c.limit[GW_QUOTA_RPM], 60);
    assert_int_equal(c.limit[GW_QUOTA_TPM], 200000);
    assert_true(c.local);
    assert_int_equal(c.local_cap_ms, 5000);
    gw_quota_set_conf_of(&p, "gpt-4.1-mini", &c);
    assert_int_equal(c.limit[GW_QUOTA_RPM], 500);
}

static void
test_quota_usage_tokens_and_quota_statuses(void **state)
{
    struct gw_usage u = {.input_tokens = 10,
                         .output_tokens = 5,
                         .cache_read_tokens = 100,
                         .cache_write_tokens = 7,
                         .reasoning_tokens = 3};

    (void)state;
    assert_int_equal(gw_quota_usage_tokens(&u), 122); /* reasoning is part of output */
    assert_int_equal(gw_quota_usage_tokens(NULL), 0);
    assert_true(gw_quota_status_is_quota(429));
    assert_true(gw_quota_status_is_quota(402));
    assert_true(gw_quota_status_is_quota(403));
    assert_false(gw_quota_status_is_quota(401));
    assert_false(gw_quota_status_is_quota(503));
}

static void
test_quota_a_lease_kept_after_its_drop_is_open_again(void **state)
{
    struct gw_quota_set *s = t_set(1, 0, 0, 0, 0);
    struct gw_quota_unit_view v;
    struct gw_quota_lease l;

    (void)state;
    assert_int_equal(t_choose(s, NOW, 1, &l), 0);
    assert_int_equal(gw_quota_sweep(s, NOW + 3 * MIN), 1);
    gw_quota_lease_keep(s, &l, NOW + 3 * MIN);
    gw_quota_view(s, 0, NOW + 3 * MIN, &v);
    assert_int_equal(v.open_leases, 1);
    assert_int_equal(v.leases_dropped, 1);
    gw_quota_settle(s, &l, NOW + 4 * MIN, 1, true);
    gw_quota_view(s, 0, NOW + 4 * MIN, &v);
    assert_int_equal(v.open_leases, 0);
    gw_quota_set_free(s);
}

/* ---- threads: the choice and the lease are one operation ---- */

struct t_getter {
    struct gw_quota_reg *reg;
    struct gw_quota_set *got;
};

static void *
t_get(void *arg)
{
    struct t_getter *g = arg;
    struct gw_quota_set_conf c = {.limit = {0}};

    g->got = gw_quota_reg_get(g->reg, "p", "m", fps3, 3, &c, NULL);
    return NULL;
}

static void
test_quota_registry_creates_a_set_once_under_threads(void **state)
{
    struct gw_quota_reg *reg = gw_quota_reg_new();
    struct t_getter g[4];
    pthread_t th[4];

    (void)state;
    for (int i = 0; i < 4; i++) {
        g[i] = (struct t_getter){.reg = reg};
        assert_int_equal(pthread_create(&th[i], NULL, t_get, &g[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_non_null(g[i].got);
        assert_ptr_equal(g[i].got, g[0].got);
    }
    assert_ptr_equal(gw_quota_reg_find(reg, "p", "m"), g[0].got);
    assert_null(gw_quota_reg_find(reg, "p", "other"));
    gw_quota_reg_free(reg);
}

#define T_THREADS 4
#define T_TRIES 2000

struct t_race {
    struct gw_quota_set *s;
    int won;
};

static void *
t_racer(void *arg)
{
    struct t_race *r = arg;

    for (int i = 0; i < T_TRIES; i++)
        if (t_choose(r->s, NOW, 1, NULL) >= 0)
            r->won++;
    return NULL;
}

static void
test_quota_parallel_choices_admit_exactly_the_limit(void **state)
{
    struct gw_quota_set *s = t_set(3, 100, 0, 0, 0);
    struct t_race r[T_THREADS];
    pthread_t th[T_THREADS];
    int total = 0;

    (void)state;
    for (int i = 0; i < T_THREADS; i++) {
        r[i] = (struct t_race){.s = s};
        assert_int_equal(pthread_create(&th[i], NULL, t_racer, &r[i]), 0);
    }
    for (int i = 0; i < T_THREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        total += r[i].won;
    }
    assert_int_equal(total, 300); /* 3 credentials x RPM 100, no more */
    gw_quota_set_free(s);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quota_rpm_full_until_the_oldest_second_leaves),
        cmocka_unit_test(test_quota_tpm_counts_the_estimate_and_settle_corrects_it),
        cmocka_unit_test(test_quota_a_request_larger_than_the_limit_passes_only_an_empty_window),
        cmocka_unit_test(test_quota_rpd_resets_at_utc_midnight),
        cmocka_unit_test(test_quota_settle_after_the_minute_touches_only_the_day),
        cmocka_unit_test(test_quota_settle_across_midnight_leaves_the_new_day_alone),
        cmocka_unit_test(test_quota_settle_not_sent_gives_the_request_back),
        cmocka_unit_test(test_quota_settle_all_equals_settling_one_by_one),
        cmocka_unit_test(test_quota_sweep_drops_unsettled_leases_after_two_minutes),
        cmocka_unit_test(test_quota_choose_takes_the_most_headroom),
        cmocka_unit_test(test_quota_never_seen_counts_half_used_on_known_limits_only),
        cmocka_unit_test(test_quota_ties_take_turns),
        cmocka_unit_test(test_quota_why_names_cooling_and_full_windows_and_the_earliest_retry),
        cmocka_unit_test(test_quota_a_cooling_unit_with_a_full_day_admits_when_both_end),
        cmocka_unit_test(test_quota_verdicts_read_as_one_line),
        cmocka_unit_test(test_quota_transient_429_with_healthy_day_is_90s_without_escalation),
        cmocka_unit_test(test_quota_day_exhaustion_climbs_the_ladder_and_a_success_clears_it),
        cmocka_unit_test(
            test_quota_success_after_success_changes_nothing_and_after_a_failure_clears_it),
        cmocka_unit_test(test_quota_a_day_window_stated_empty_is_day_exhaustion),
        cmocka_unit_test(test_quota_day_ladder_counts_within_a_rolling_day),
        cmocka_unit_test(test_quota_own_day_counters_at_the_limit_mean_day_exhaustion),
        cmocka_unit_test(
            test_quota_unknown_limits_escalate_on_two_429s_within_an_hour_capped_at_10_min),
        cmocka_unit_test(test_quota_402_is_credit_and_403_is_tier),
        cmocka_unit_test(test_quota_longer_retry_after_wins_and_is_authoritative_capped_at_a_day),
        cmocka_unit_test(test_quota_local_upstream_is_capped_and_does_not_escalate_while_capped),
        cmocka_unit_test(test_quota_an_active_cooldown_is_never_shortened),
        cmocka_unit_test(test_quota_learned_limit_only_tightens_and_keeps_its_origin),
        cmocka_unit_test(test_quota_remaining_zero_holds_the_window_until_its_reset),
        cmocka_unit_test(test_quota_probe_picks_heuristic_cooldowns_half_served_with_a_minute_left),
        cmocka_unit_test(test_quota_probe_backoff_is_2_4_8_15_minutes),
        cmocka_unit_test(test_quota_probe_pass_takes_at_most_three_longest_cooling_first),
        cmocka_unit_test(test_quota_prober_jitters_the_first_pass_then_runs_every_minute),
        cmocka_unit_test(test_quota_prober_scaled_divides_the_interval_and_the_minimum_left),
        cmocka_unit_test(test_quota_rebuild_counts_rows_still_inside_their_windows),
        cmocka_unit_test(test_quota_registry_stops_creating_at_its_limit),
        cmocka_unit_test(test_quota_fingerprint_is_the_head_of_sha256),
        cmocka_unit_test(test_quota_local_hosts),
        cmocka_unit_test(test_quota_conf_of_overrides_the_default_axis_by_axis),
        cmocka_unit_test(test_quota_usage_tokens_and_quota_statuses),
        cmocka_unit_test(test_quota_a_lease_kept_after_its_drop_is_open_again),
        cmocka_unit_test(test_quota_registry_creates_a_set_once_under_threads),
        cmocka_unit_test(test_quota_parallel_choices_admit_exactly_the_limit),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
