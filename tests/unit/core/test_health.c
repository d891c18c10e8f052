/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_health.c - per-upstream health: pauses after consecutive
 * failures, doubling up to the cap, reset by a success, Retry-After pauses and their
 * 1 h cap; the success window (50 outcomes, 30 minutes, at least 5); TTFC medians
 * (at least 3, 30 minutes, last 50); the link seed; the registry. Times are passed in.
 * See:     core/health.h, core/health.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "core/health.h"

#define T0 1700000000000ull /* an arbitrary epoch time in ms */
#define MIN_MS (60ull * 1000)

/* Only the failover section is read by gw_upstate_failure. */
static struct gw_conf
conf_failover(unsigned n, unsigned pause, unsigned max_pause)
{
    struct gw_conf f;

    memset(&f, 0, sizeof(f));
    f.failover.failures_to_pause = n;
    f.failover.pause_secs = pause;
    f.failover.max_pause_secs = max_pause;
    return f;
}

/* A registry and one of its upstates. Under `make test-oom` either may be NULL: the
 * test then stops on an assertion rather than a crash. */
static struct gw_upstates *
t_upstates_new(void)
{
    struct gw_upstates *r = gw_upstates_new();

    assert_non_null(r);
    return r;
}

static struct gw_upstate *
t_upstate(struct gw_upstates *r, const char *name)
{
    struct gw_upstate *u = gw_upstates_get(r, name);

    assert_non_null(u);
    return u;
}

static struct gw_upfacts
facts(struct gw_upstate *u, uint64_t now)
{
    struct gw_upfacts f;

    gw_upstate_facts(u, now, &f);
    return f;
}

/* ---- registry ---- */

static void
test_health_registry_returns_one_upstate_per_name(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *a, *b;
    char name[16];
    int i;

    (void)state;
    assert_non_null(r);
    a = gw_upstates_get(r, "a");
    b = gw_upstates_get(r, "b");
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    /* grow past the first allocation; earlier upstates keep their address */
    for (i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "p%d", i);
        assert_non_null(gw_upstates_get(r, name));
    }
    assert_ptr_equal(gw_upstates_get(r, "a"), a);
    assert_ptr_equal(gw_upstates_get(r, "b"), b);
    gw_upstates_free(r);
}

static void
test_health_fresh_upstate_reports_nothing_known(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upfacts f = facts(t_upstate(r, "a"), T0);

    (void)state;
    assert_int_equal(f.paused_until_ms, 0);
    assert_int_equal(f.consecutive_failures, 0);
    assert_int_equal(f.pauses, 0);
    assert_int_equal(f.ttfc_median_ms, -1);
    assert_int_equal(f.n_samples, 0);
    assert_true(f.success_rate < 0);
    assert_int_equal(f.n_outcomes, 0);
    assert_int_equal(f.link_ms, -1);
    gw_upstates_free(r);
}

/* ---- the kept facts ---- */

struct t_event {
    uint64_t at;
    int kind; /* 0 success, 1 failure, 2 sample */
    uint32_t ttfc;
};

/* The facts of a new upstate given <ev>[0, n) (nothing kept yet: computed). */
static struct gw_upfacts
facts_fresh(const struct t_event *ev, size_t n, uint64_t now)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "x");
    struct gw_conf f = conf_failover(0, 60, 600);
    struct gw_upfacts out;
    size_t i;

    for (i = 0; i < n; i++) {
        if (ev[i].kind == 0)
            gw_upstate_success(u, ev[i].at);
        else if (ev[i].kind == 1)
            gw_upstate_failure(u, ev[i].at, &f, 0);
        else
            gw_upstate_sample(u, ev[i].at, ev[i].ttfc);
    }
    out = facts(u, now);
    gw_upstates_free(r);
    return out;
}

/* Facts read again and again (kept between readings) are the facts computed afresh:
 * after each new outcome or sample, as entries age out at the window's edge (reads at
 * the last fresh millisecond and the first stale one), and read at an earlier time
 * than the kept ones (another thread's clock), where an aged entry counts again. */
static void
test_health_kept_facts_are_the_computed_ones(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(0, 60, 600);
    struct t_event ev[400];
    uint64_t t = T0, rng = 88172645463325252ull;
    size_t n = 0, q;

    (void)state;
    for (n = 0; n < sizeof(ev) / sizeof(ev[0]); n++) {
        uint64_t reads[6];

        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        /* mostly close together, sometimes minutes apart: entries age out in between */
        t += rng % 8 == 0 ? (rng >> 8) % (12u * 60 * 1000) : (rng >> 8) % 50;
        ev[n] = (struct t_event){t, (int)((rng >> 20) % 3), (uint32_t)((rng >> 24) % 900)};
        if (ev[n].kind == 0)
            gw_upstate_success(u, t);
        else if (ev[n].kind == 1)
            gw_upstate_failure(u, t, &f, 0);
        else
            gw_upstate_sample(u, t, ev[n].ttfc);
        /* the oldest entry's edge, either side; a time before; now, twice */
        reads[0] = t;
        reads[1] = ev[n > 60 ? n - 60 : 0].at + GW_HEALTH_OUTCOME_MAX_AGE_MS;
        reads[2] = reads[1] + 1;
        reads[3] = t > 5000 ? t - 5000 : t;
        reads[4] = t + (rng >> 30) % (40u * 60 * 1000);
        reads[5] = t;
        for (q = 0; q < 6; q++) {
            struct gw_upfacts a = facts(u, reads[q]), b = facts_fresh(ev, n + 1, reads[q]);

            assert_int_equal(a.n_outcomes, b.n_outcomes);
            assert_true(a.success_rate == b.success_rate);
            assert_int_equal(a.n_samples, b.n_samples);
            assert_int_equal(a.ttfc_median_ms, b.ttfc_median_ms);
        }
    }
    gw_upstates_free(r);
}

/* ---- pauses ---- */

static void
test_health_pauses_after_n_consecutive_failures(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(3, 60, 600);

    (void)state;
    assert_false(gw_upstate_failure(u, T0, &f, 0));
    assert_false(gw_upstate_failure(u, T0 + 1, &f, 0));
    assert_int_equal(facts(u, T0 + 1).consecutive_failures, 2);
    assert_int_equal(facts(u, T0 + 1).paused_until_ms, 0);
    assert_true(gw_upstate_failure(u, T0 + 2, &f, 0));
    assert_int_equal(facts(u, T0 + 2).paused_until_ms, T0 + 2 + 60000);
    assert_int_equal(facts(u, T0 + 2).pauses, 1);
    /* still paused just before the end, over at the end */
    assert_int_equal(facts(u, T0 + 2 + 59999).paused_until_ms, T0 + 2 + 60000);
    assert_int_equal(facts(u, T0 + 2 + 60000).paused_until_ms, 0);
    gw_upstates_free(r);
}

/* Fails <u> <n> times at <now> (the pause triggering on the last one). */
static void
fail_n(struct gw_upstate *u, uint64_t now, const struct gw_conf *f, unsigned n)
{
    unsigned i;

    for (i = 0; i < n; i++)
        gw_upstate_failure(u, now, f, 0);
}

static void
test_health_repeated_pauses_double_up_to_the_cap(void **state)
{
    static const uint64_t want_secs[] = {60, 120, 240, 480, 600, 600};
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(3, 60, 600);
    uint64_t now = T0;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(want_secs) / sizeof(want_secs[0]); i++) {
        struct gw_upfacts x;

        fail_n(u, now, &f, 3);
        x = facts(u, now);
        assert_int_equal(x.paused_until_ms, now + want_secs[i] * 1000);
        assert_int_equal(x.pauses, i + 1);
        now = x.paused_until_ms; /* the pause is over: tried again */
    }
    gw_upstates_free(r);
}

static void
test_health_failures_during_a_pause_do_not_escalate(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(2, 60, 600);

    (void)state;
    fail_n(u, T0, &f, 2);
    /* requests in flight when it paused fail too: same outage */
    assert_false(gw_upstate_failure(u, T0 + 10, &f, 0));
    assert_false(gw_upstate_failure(u, T0 + 20, &f, 0));
    assert_int_equal(facts(u, T0 + 20).paused_until_ms, T0 + 60000);
    assert_int_equal(facts(u, T0 + 20).pauses, 1);
    assert_int_equal(facts(u, T0 + 20).consecutive_failures, 0);
    /* but they are failures in the success window */
    assert_int_equal(facts(u, T0 + 20).n_outcomes, 4);
    gw_upstates_free(r);
}

static void
test_health_success_resets_count_and_escalation(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(3, 60, 600);
    uint64_t now = T0;

    (void)state;
    fail_n(u, now, &f, 2);
    gw_upstate_success(u, now);
    assert_int_equal(facts(u, now).consecutive_failures, 0);
    fail_n(u, now, &f, 2);
    assert_int_equal(facts(u, now).paused_until_ms, 0); /* 2 + 2 is not 3 in a row */

    fail_n(u, now, &f, 1); /* third in a row: 60 s */
    now = facts(u, now).paused_until_ms;
    fail_n(u, now, &f, 3); /* repeated: 120 s */
    assert_int_equal(facts(u, now).paused_until_ms, now + 120000);
    now += 120000;
    gw_upstate_success(u, now);
    assert_int_equal(facts(u, now).pauses, 0);
    fail_n(u, now, &f, 3); /* after a success: back to 60 s */
    assert_int_equal(facts(u, now).paused_until_ms, now + 60000);
    gw_upstates_free(r);
}

static void
test_health_success_ends_a_running_pause(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(2, 60, 600);

    (void)state;
    fail_n(u, T0, &f, 2);
    assert_int_equal(facts(u, T0 + 1000).paused_until_ms, T0 + 60000);
    /* tried anyway (every candidate paused) and it answered: no longer paused */
    gw_upstate_success(u, T0 + 1000);
    assert_int_equal(facts(u, T0 + 1000).paused_until_ms, 0);
    assert_int_equal(facts(u, T0 + 1000).pauses, 0);
    gw_upstates_free(r);
}

/* Issue 12 point 4: the end of each pause is told once (upstream_resumed), by the
 * success that ends it or by the sweep once its time is over, never by both. */
static void
test_health_end_of_a_pause_is_told_once(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(2, 60, 600);
    uint64_t until = 1;

    (void)state;
    assert_false(gw_upstate_take_resumed(u, T0, &until)); /* never paused */
    assert_false(gw_upstate_success(u, T0));
    fail_n(u, T0, &f, 2);
    assert_false(gw_upstate_take_resumed(u, T0 + 59999, &until)); /* still running */
    assert_true(gw_upstate_take_resumed(u, T0 + 60000, &until));
    assert_int_equal(until, T0 + 60000);
    assert_false(gw_upstate_take_resumed(u, T0 + 70000, &until)); /* told already */
    /* the next pause escalates as before: the sweep changed no decision */
    fail_n(u, T0 + 70000, &f, 2);
    assert_int_equal(facts(u, T0 + 70000).paused_until_ms, T0 + 70000 + 120000);
    /* a success ends it: told by the success, not again by the sweep */
    assert_true(gw_upstate_success(u, T0 + 80000));
    assert_false(gw_upstate_take_resumed(u, T0 + 500000, &until));
    /* a pause that ran out and then met a success first: told by the success */
    fail_n(u, T0 + 600000, &f, 2);
    assert_true(gw_upstate_success(u, T0 + 700000));
    assert_false(gw_upstate_take_resumed(u, T0 + 700000, &until));
    /* swept first: the success after it tells nothing more */
    fail_n(u, T0 + 800000, &f, 2);
    assert_true(gw_upstate_take_resumed(u, T0 + 900000, &until));
    assert_false(gw_upstate_success(u, T0 + 900000));
    gw_upstates_free(r);
}

static void
test_health_retry_after_pauses_whatever_the_count(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(3, 60, 600);

    (void)state;
    assert_true(gw_upstate_failure(u, T0, &f, 300000));
    assert_int_equal(facts(u, T0).paused_until_ms, T0 + 300000);
    assert_int_equal(facts(u, T0).pauses, 0); /* a Retry-After alone does not escalate */
    /* a shorter Retry-After does not shorten it */
    assert_false(gw_upstate_failure(u, T0 + 1000, &f, 5000));
    assert_int_equal(facts(u, T0 + 1000).paused_until_ms, T0 + 300000);
    /* a longer one lengthens it */
    assert_true(gw_upstate_failure(u, T0 + 1000, &f, 600000));
    assert_int_equal(facts(u, T0 + 1000).paused_until_ms, T0 + 1000 + 600000);
    gw_upstates_free(r);
}

static void
test_health_retry_after_shorter_than_the_pause_keeps_the_pause(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(3, 60, 600);

    (void)state;
    fail_n(u, T0, &f, 2);
    assert_true(gw_upstate_failure(u, T0, &f, 10000)); /* third: 60 s beats 10 s */
    assert_int_equal(facts(u, T0).paused_until_ms, T0 + 60000);
    gw_upstates_free(r);
}

static void
test_health_retry_after_is_capped_at_an_hour(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(3, 60, 600);

    (void)state;
    assert_true(gw_upstate_failure(u, T0, &f, 5ull * 3600 * 1000));
    assert_int_equal(facts(u, T0).paused_until_ms, T0 + GW_HEALTH_RETRY_AFTER_CAP_MS);
    gw_upstates_free(r);
}

/* ---- success window ---- */

static void
test_health_success_rate_needs_five_outcomes(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(100, 60, 600);
    int i;

    (void)state;
    for (i = 0; i < 3; i++)
        gw_upstate_success(u, T0);
    gw_upstate_failure(u, T0, &f, 0);
    assert_int_equal(facts(u, T0).n_outcomes, 4);
    assert_true(facts(u, T0).success_rate < 0);
    gw_upstate_failure(u, T0, &f, 0);
    assert_int_equal(facts(u, T0).n_outcomes, 5);
    assert_float_equal(facts(u, T0).success_rate, 0.6, 1e-12);
    gw_upstates_free(r);
}

static void
test_health_success_window_ages_out_after_30_minutes(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(100, 60, 600);
    int i;

    (void)state;
    for (i = 0; i < 5; i++)
        gw_upstate_failure(u, T0, &f, 0);
    for (i = 0; i < 5; i++)
        gw_upstate_success(u, T0 + 10 * MIN_MS);
    assert_float_equal(facts(u, T0 + 30 * MIN_MS).success_rate, 0.5, 1e-12);
    /* the failures are 30 minutes and 1 ms old: left out */
    assert_int_equal(facts(u, T0 + 30 * MIN_MS + 1).n_outcomes, 5);
    assert_float_equal(facts(u, T0 + 30 * MIN_MS + 1).success_rate, 1.0, 1e-12);
    /* everything aged out: no rate */
    assert_int_equal(facts(u, T0 + 41 * MIN_MS).n_outcomes, 0);
    assert_true(facts(u, T0 + 41 * MIN_MS).success_rate < 0);
    gw_upstates_free(r);
}

static void
test_health_success_window_keeps_the_last_50(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    struct gw_conf f = conf_failover(1000, 60, 600);
    int i;

    (void)state;
    for (i = 0; i < 30; i++)
        gw_upstate_failure(u, T0, &f, 0);
    for (i = 0; i < 45; i++)
        gw_upstate_success(u, T0);
    /* 75 recorded: the last 50 are 5 failures and 45 successes */
    assert_int_equal(facts(u, T0).n_outcomes, 50);
    assert_float_equal(facts(u, T0).success_rate, 0.9, 1e-12);
    gw_upstates_free(r);
}

/* ---- TTFC samples ---- */

static void
test_health_median_needs_three_samples(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");

    (void)state;
    gw_upstate_sample(u, T0, 300);
    gw_upstate_sample(u, T0, 100);
    assert_int_equal(facts(u, T0).n_samples, 2);
    assert_int_equal(facts(u, T0).ttfc_median_ms, -1);
    gw_upstate_sample(u, T0, 200);
    assert_int_equal(facts(u, T0).ttfc_median_ms, 200);
    gw_upstate_sample(u, T0, 1000); /* even count: mean of the middle two */
    assert_int_equal(facts(u, T0).ttfc_median_ms, 250);
    gw_upstates_free(r);
}

static void
test_health_median_ages_out_old_samples(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    int i;

    (void)state;
    for (i = 0; i < 3; i++)
        gw_upstate_sample(u, T0, 5000);
    for (i = 0; i < 3; i++)
        gw_upstate_sample(u, T0 + 20 * MIN_MS, 100);
    assert_int_equal(facts(u, T0 + 20 * MIN_MS).n_samples, 6);
    assert_int_equal(facts(u, T0 + 20 * MIN_MS).ttfc_median_ms, 2550);
    assert_int_equal(facts(u, T0 + 31 * MIN_MS).n_samples, 3);
    assert_int_equal(facts(u, T0 + 31 * MIN_MS).ttfc_median_ms, 100);
    assert_int_equal(facts(u, T0 + 51 * MIN_MS).ttfc_median_ms, -1);
    gw_upstates_free(r);
}

static void
test_health_samples_keep_the_last_50(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");
    int i;

    (void)state;
    for (i = 0; i < 40; i++)
        gw_upstate_sample(u, T0, 9000);
    for (i = 0; i < 50; i++)
        gw_upstate_sample(u, T0, (uint32_t)(100 + i));
    assert_int_equal(facts(u, T0).n_samples, 50);
    assert_int_equal(facts(u, T0).ttfc_median_ms, (124 + 125) / 2);
    gw_upstates_free(r);
}

static void
test_health_link_seed_is_not_a_sample(void **state)
{
    struct gw_upstates *r = t_upstates_new();
    struct gw_upstate *u = t_upstate(r, "a");

    (void)state;
    gw_upstate_link_seed(u, 42);
    assert_int_equal(facts(u, T0).link_ms, 42);
    assert_int_equal(facts(u, T0).n_samples, 0);
    assert_int_equal(facts(u, T0).ttfc_median_ms, -1);
    gw_upstates_free(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_registry_returns_one_upstate_per_name),
        cmocka_unit_test(test_health_fresh_upstate_reports_nothing_known),
        cmocka_unit_test(test_health_kept_facts_are_the_computed_ones),
        cmocka_unit_test(test_health_pauses_after_n_consecutive_failures),
        cmocka_unit_test(test_health_repeated_pauses_double_up_to_the_cap),
        cmocka_unit_test(test_health_failures_during_a_pause_do_not_escalate),
        cmocka_unit_test(test_health_success_resets_count_and_escalation),
        cmocka_unit_test(test_health_success_ends_a_running_pause),
        cmocka_unit_test(test_health_retry_after_pauses_whatever_the_count),
        cmocka_unit_test(test_health_retry_after_shorter_than_the_pause_keeps_the_pause),
        cmocka_unit_test(test_health_retry_after_is_capped_at_an_hour),
        cmocka_unit_test(test_health_success_rate_needs_five_outcomes),
        cmocka_unit_test(test_health_success_window_ages_out_after_30_minutes),
        cmocka_unit_test(test_health_success_window_keeps_the_last_50),
        cmocka_unit_test(test_health_median_needs_three_samples),
        cmocka_unit_test(test_health_median_ages_out_old_samples),
        cmocka_unit_test(test_health_samples_keep_the_last_50),
        cmocka_unit_test(test_health_link_seed_is_not_a_sample),
        cmocka_unit_test(test_health_end_of_a_pause_is_told_once),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
