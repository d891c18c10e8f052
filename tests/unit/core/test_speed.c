/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_speed.c - the minimum-speed judge: fast streams, short dips,
 * long pauses taken out, sustained slowdowns cut, the half-window rule, exact rates,
 * the window's grid, and the bucket ring over streams of minutes.
 * See: core/speed.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/speed.h"

#define T0 1700000000000ULL /* an arbitrary wall-clock start, ms */

#define T_MAX_SECS 1024

/* Verdicts of a stream judged once a second on the first token's grid (a judgement at
 * second k comes after the arrivals at k ms and before later ones), by second. */
struct t_run {
    unsigned not_judged, ok, too_slow;
    uint64_t first_cut_ms; /* offset of the first TOO_SLOW, 0 when none */
    double cut_tps;
    enum gw_speed_verdict v[T_MAX_SECS];
    double tps[T_MAX_SECS];
};

/* Offsets (from T0) of the next arrival and the next judgement. */
struct t_clock {
    uint64_t next_arrival, next_judge;
};

/* Judges every second due before <before_ms> (an offset from T0). */
static void
t_judge_before(struct gw_speed *s, struct t_clock *c, uint64_t before_ms, struct t_run *r)
{
    while (c->next_judge < before_ms) {
        double tps = -1.0;
        enum gw_speed_verdict v = gw_speed_judge(s, T0 + c->next_judge, &tps);

        assert_true(tps >= 0.0);
        assert_true(c->next_judge / 1000 < T_MAX_SECS);
        r->v[c->next_judge / 1000] = v;
        r->tps[c->next_judge / 1000] = tps;
        if (v == GW_SPEED_NOT_JUDGED)
            r->not_judged++;
        else if (v == GW_SPEED_OK)
            r->ok++;
        else {
            if (r->too_slow++ == 0) {
                r->first_cut_ms = c->next_judge;
                r->cut_tps = tps;
            }
        }
        c->next_judge += 1000;
    }
}

/* A stream: <tokens> every <step_ms> over [from_ms, to_ms) (offsets from T0), judged
 * every second due before to_ms. */
static void
t_stream(struct gw_speed *s, struct t_clock *c, uint64_t from_ms, uint64_t to_ms, uint64_t step_ms,
         uint64_t tokens, struct t_run *r)
{
    for (uint64_t t = from_ms; t < to_ms; t += step_ms) {
        t_judge_before(s, c, t, r);
        gw_speed_add(s, T0 + t, tokens);
    }
    t_judge_before(s, c, to_ms, r);
}

static void
test_speed_not_judged_before_first_token(void **state)
{
    struct gw_speed s;
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 10, 10);
    assert_int_equal(gw_speed_judge(&s, T0, &tps), GW_SPEED_NOT_JUDGED);
    assert_true(tps == 0.0);
    gw_speed_add(&s, T0, 0); /* zero tokens: not an arrival, not the first token */
    assert_int_equal(gw_speed_judge(&s, T0 + 60000, &tps), GW_SPEED_NOT_JUDGED);
    assert_true(tps == 0.0);
    assert_true(gw_speed_rate(&s, T0 + 60000) == 0.0);
}

static void
test_speed_fast_stream_stays_ok(void **state)
{
    struct gw_speed s;
    struct t_clock c = {0, 1000};
    struct t_run r = {0};
    double tps;

    (void)state;
    gw_speed_init(&s, 10, 10);
    t_stream(&s, &c, 0, 60000, 100, 5, &r); /* 50 tokens per second for a minute */
    assert_int_equal(r.too_slow, 0);
    assert_int_equal(r.not_judged, 4); /* 1..4 s: less than half a window */
    assert_int_equal(r.ok, 55);        /* 5..59 s */
    /* Window [50 s, 60 s]: arrivals 50.0 .. 59.9 s, 100 of them. */
    assert_int_equal(gw_speed_judge(&s, T0 + 60000, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 50.0, 1e-9);
}

static void
test_speed_exact_rate_below_minimum_is_too_slow(void **state)
{
    struct gw_speed s;
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 10, 10);
    for (uint64_t k = 0; k < 10; k++)
        gw_speed_add(&s, T0 + k * 1000, 5); /* 50 tokens in 10 s */
    assert_int_equal(gw_speed_judge(&s, T0 + 10000, &tps), GW_SPEED_TOO_SLOW);
    assert_float_equal(tps, 5.0, 1e-12);
    assert_float_equal(gw_speed_rate(&s, T0 + 10000), 5.0, 1e-12);
}

static void
test_speed_exact_rate_at_minimum_is_ok(void **state)
{
    struct gw_speed s;
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 10, 10);
    for (uint64_t k = 0; k < 10; k++)
        gw_speed_add(&s, T0 + k * 1000, 10); /* 100 tokens in 10 s */
    assert_int_equal(gw_speed_judge(&s, T0 + 10000, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 10.0, 1e-12);
    /* One token fewer in the window is below the minimum. */
    gw_speed_init(&s, 10, 10);
    gw_speed_add(&s, T0, 9);
    for (uint64_t k = 1; k < 10; k++)
        gw_speed_add(&s, T0 + k * 1000, 10);
    assert_int_equal(gw_speed_judge(&s, T0 + 10000, &tps), GW_SPEED_TOO_SLOW);
    assert_float_equal(tps, 9.9, 1e-12);
}

static void
test_speed_not_judged_before_half_window_of_time(void **state)
{
    struct gw_speed s;
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 10, 10);
    gw_speed_add(&s, T0, 1); /* 1 token per second: far too slow */
    for (uint64_t k = 1; k <= 4; k++) {
        gw_speed_add(&s, T0 + k * 1000, 1);
        assert_int_equal(gw_speed_judge(&s, T0 + k * 1000, &tps), GW_SPEED_NOT_JUDGED);
        assert_float_equal(tps, (double)(k + 1) / (double)k, 1e-12); /* measured anyway */
    }
    assert_int_equal(gw_speed_judge(&s, T0 + 4999, &tps), GW_SPEED_NOT_JUDGED);
    gw_speed_add(&s, T0 + 5000, 1);
    assert_int_equal(gw_speed_judge(&s, T0 + 5000, &tps), GW_SPEED_TOO_SLOW);
    assert_float_equal(tps, 6.0 / 5.0, 1e-12);
}

static void
test_speed_short_slowdown_survives(void **state)
{
    struct gw_speed s;
    struct t_clock c = {0, 1000};
    struct t_run r = {0};

    (void)state;
    gw_speed_init(&s, 10, 10);
    t_stream(&s, &c, 0, 20000, 100, 5, &r);      /* 50 tps */
    t_stream(&s, &c, 20000, 23000, 1000, 1, &r); /* a 3 s dip at 1 tps */
    t_stream(&s, &c, 23000, 40000, 100, 5, &r);  /* fast again */
    assert_int_equal(r.too_slow, 0);
    assert_int_equal(r.ok, 35);
}

static void
test_speed_long_pause_is_taken_out(void **state)
{
    struct gw_speed s;
    struct t_clock c = {0, 1000};
    struct t_run r = {0};

    (void)state;
    /* 25 tps minimum: counted with the pause, the window after it would average
     * 20.5 tps at 44 s (and the pause's own windows less), so this fails unless the
     * silence is taken out. */
    gw_speed_init(&s, 10, 25);
    t_stream(&s, &c, 0, 20000, 100, 5, &r);     /* 50 tps; last arrival at 19.9 s */
    t_judge_before(&s, &c, 40000, &r);          /* 20 s of silence */
    t_stream(&s, &c, 40000, 60000, 100, 5, &r); /* fast again */
    assert_int_equal(r.too_slow, 0);
    /* Up to 24 s the trailing gap is under 5 s and counts: [14 s, 24 s] holds 300
     * tokens, 30 tps. From 25 s (a 5.1 s gap) it is taken out. */
    assert_int_equal(r.v[24], GW_SPEED_OK);
    assert_float_equal(r.tps[24], 30.0, 1e-12);
    assert_int_equal(r.v[25], GW_SPEED_NOT_JUDGED);
    /* At 44 s only 4 s of the window are not silence; at 45 s 5 s are (255 tokens). */
    assert_int_equal(r.v[44], GW_SPEED_NOT_JUDGED);
    assert_int_equal(r.v[45], GW_SPEED_OK);
    assert_float_equal(r.tps[45], 255.0 / 5.0, 1e-9);
    /* Judged seconds: 5..24 (20), then 45..59 (15); the rest was not judged. */
    assert_int_equal(r.ok, 35);
    assert_int_equal(r.not_judged, 4 + 20);
}

static void
test_speed_sustained_slowdown_is_cut(void **state)
{
    struct gw_speed s;
    struct t_clock c = {0, 1000};
    struct t_run r = {0};

    (void)state;
    gw_speed_init(&s, 10, 10);
    t_stream(&s, &c, 0, 20000, 100, 5, &r);      /* 50 tps, last arrival at 19.9 s */
    t_stream(&s, &c, 20000, 40001, 1000, 2, &r); /* 2 tps: 1 s gaps are no silence */
    /* Judged at 20 + k s: (500 - 50k) fast tokens + (2k + 2) slow ones over 10 s;
     * below 100 from k = 9: 70 tokens, 7 tps. */
    assert_true(r.too_slow > 0);
    assert_int_equal(r.first_cut_ms, 29000);
    assert_float_equal(r.cut_tps, 7.0, 1e-12);
}

static void
test_speed_exactly_five_seconds_is_a_silence(void **state)
{
    struct gw_speed s;
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 10, 10);
    for (uint64_t k = 0; k < 10; k++)
        gw_speed_add(&s, T0 + k * 1000, 10); /* last arrival at 9 s */
    /* Trailing gap of 4 s counts as time: [3 s, 13 s] holds 70 tokens in 10 s. */
    assert_int_equal(gw_speed_judge(&s, T0 + 13000, &tps), GW_SPEED_TOO_SLOW);
    assert_float_equal(tps, 7.0, 1e-12);
    /* A 5 s gap is silence: [4 s, 14 s] holds 60 tokens in 10 - 5 s. */
    assert_int_equal(gw_speed_judge(&s, T0 + 14000, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 12.0, 1e-12);
    /* 7 s of silence leaves 3 s: [6 s, 16 s] holds 40 tokens, not judged. */
    assert_int_equal(gw_speed_judge(&s, T0 + 16000, &tps), GW_SPEED_NOT_JUDGED);
    assert_float_equal(tps, 40.0 / 3.0, 1e-12);
    /* A gap of 5 s between arrivals is taken out too; 4.999 s is not. */
    gw_speed_init(&s, 10, 10);
    gw_speed_add(&s, T0, 50);
    gw_speed_add(&s, T0 + 5000, 50); /* silence [0 s, 5 s] */
    gw_speed_add(&s, T0 + 6000, 50);
    assert_int_equal(gw_speed_judge(&s, T0 + 10000, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 150.0 / 5.0, 1e-12);
    gw_speed_init(&s, 10, 10);
    gw_speed_add(&s, T0, 50);
    gw_speed_add(&s, T0 + 4999, 50);
    gw_speed_add(&s, T0 + 6000, 50);
    assert_int_equal(gw_speed_judge(&s, T0 + 10000, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 15.0, 1e-12);
}

static void
test_speed_silence_straddling_window_start_counts_its_inside_part(void **state)
{
    struct gw_speed s;
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 10, 1);
    for (uint64_t k = 0; k <= 10; k++)
        gw_speed_add(&s, T0 + k * 1000, 10);
    for (uint64_t k = 20; k <= 24; k++)
        gw_speed_add(&s, T0 + k * 1000, 10); /* silence [10 s, 20 s] */
    /* Window [14 s, 24 s]: 6 s silent, 4 s left: not judged. */
    assert_int_equal(gw_speed_judge(&s, T0 + 24000, &tps), GW_SPEED_NOT_JUDGED);
    assert_float_equal(tps, 50.0 / 4.0, 1e-12);
    /* Window [15 s, 25 s]: 5 s of it silent, 6 arrivals (20..25 s). */
    gw_speed_add(&s, T0 + 25000, 10);
    assert_int_equal(gw_speed_judge(&s, T0 + 25000, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 60.0 / 5.0, 1e-12);
}

static void
test_speed_window_start_rounds_up_to_the_grid(void **state)
{
    struct gw_speed s;
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 10, 10);
    for (uint64_t k = 0; k <= 25; k++)
        gw_speed_add(&s, T0 + 250 + k * 1000, 10); /* the grid starts at 250 ms */
    /* Times below are from the first token. On the grid the span is exactly the
     * window: at 25 s it is [15 s, 25 s], 11 arrivals. */
    assert_int_equal(gw_speed_judge(&s, T0 + 250 + 25000, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 110.0 / 10.0, 1e-12);
    /* Off the grid, at 25.5 s, the window's start 15.5 s is rounded up to 16 s: the span
     * [16 s, 25.5 s] is 9.5 s and holds the arrivals at 16 .. 25 s, 10 of them. */
    assert_int_equal(gw_speed_judge(&s, T0 + 250 + 25500, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 100.0 / 9.5, 1e-12);
}

static void
test_speed_ring_wraps_over_minutes(void **state)
{
    struct gw_speed s;
    struct t_clock c = {0, 1000};
    struct t_run r = {0};
    double tps = -1.0;

    (void)state;
    /* Every ring slot gets filled in the first 128 s (10 tokens each second); then
     * only even seconds get arrivals (20 tokens), so odd seconds' slots keep stale
     * counts from 128 s, 256 s ... earlier, which must not be counted. */
    gw_speed_init(&s, 120, 5);
    t_stream(&s, &c, 0, 128000, 1000, 10, &r);
    t_stream(&s, &c, 128000, 600001, 2000, 20, &r);
    assert_int_equal(r.too_slow, 0);
    /* [180 s, 300 s]: even seconds 180..300, 61 arrivals of 20 tokens. */
    assert_int_equal(r.v[300], GW_SPEED_OK);
    assert_float_equal(r.tps[300], 1220.0 / 120.0, 1e-12);
    /* [479 s, 599 s]: 60 arrivals. */
    assert_int_equal(r.v[599], GW_SPEED_OK);
    assert_float_equal(r.tps[599], 1200.0 / 120.0, 1e-12);
    assert_float_equal(gw_speed_rate(&s, T0 + 600000), 1220.0 / 120.0, 1e-12);
    /* A 2 minute pause then a burst: the stale slots of the pause are skipped, and
     * the window is mostly silence. */
    gw_speed_add(&s, T0 + 720000, 100);
    assert_int_equal(gw_speed_judge(&s, T0 + 721000, &tps), GW_SPEED_NOT_JUDGED);
    assert_float_equal(tps, 100.0, 1e-12); /* 1 s not silent: 720..721 s */
}

static void
test_speed_long_fast_stream_stays_ok_for_ten_minutes(void **state)
{
    struct gw_speed s;
    struct t_clock c = {0, 1000};
    struct t_run r = {0};
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 120, 30);
    t_stream(&s, &c, 0, 600000, 50, 2, &r); /* 40 tps */
    assert_int_equal(r.too_slow, 0);
    assert_int_equal(r.not_judged, 59); /* 1..59 s */
    assert_int_equal(r.ok, 600 - 1 - 59);
    /* [480 s, 600 s]: arrivals 480.00 .. 599.95 s, 2400 of them. */
    assert_int_equal(gw_speed_judge(&s, T0 + 600000, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 4800.0 / 120.0, 1e-12);
}

static void
test_speed_rate_matches_judge_before_half_window(void **state)
{
    struct gw_speed s;
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 10, 10);
    gw_speed_add(&s, T0, 10);
    gw_speed_add(&s, T0 + 1000, 10);
    gw_speed_add(&s, T0 + 2000, 10);
    assert_int_equal(gw_speed_judge(&s, T0 + 3000, &tps), GW_SPEED_NOT_JUDGED);
    assert_float_equal(tps, 10.0, 1e-12);
    assert_float_equal(gw_speed_rate(&s, T0 + 3000), 10.0, 1e-12);
    /* At the first token itself there is no time yet. */
    gw_speed_init(&s, 10, 10);
    gw_speed_add(&s, T0, 10);
    assert_true(gw_speed_rate(&s, T0) == 0.0);
    assert_int_equal(gw_speed_judge(&s, T0, NULL), GW_SPEED_NOT_JUDGED);
}

static void
test_speed_min_zero_is_never_too_slow(void **state)
{
    struct gw_speed s;
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 5, 0);
    for (uint64_t k = 0; k <= 10; k++)
        gw_speed_add(&s, T0 + k * 1000, 1);
    assert_int_equal(gw_speed_judge(&s, T0 + 10000, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 6.0 / 5.0, 1e-12);
}

static void
test_speed_window_is_clamped_to_120_secs(void **state)
{
    struct gw_speed s;
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 1000, 1);
    for (uint64_t k = 0; k <= 300; k++)
        gw_speed_add(&s, T0 + k * 1000, 1);
    assert_int_equal(gw_speed_judge(&s, T0 + 300000, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 121.0 / 120.0, 1e-12);
}

static void
test_speed_time_going_backwards_counts_as_the_last_arrival(void **state)
{
    struct gw_speed s;
    double tps = -1.0;

    (void)state;
    gw_speed_init(&s, 10, 1);
    gw_speed_add(&s, T0 + 1000, 10); /* first token */
    gw_speed_add(&s, T0 + 3000, 10);
    gw_speed_add(&s, T0 + 2000, 10); /* earlier than the previous: taken as 3 s */
    /* Span [1 s, 7 s], 30 tokens; the trailing gap from 3 s is 4 s, no silence (from
     * 2 s it would have been 5 s, and the answer not judged). */
    assert_int_equal(gw_speed_judge(&s, T0 + 7000, &tps), GW_SPEED_OK);
    assert_float_equal(tps, 30.0 / 6.0, 1e-12);
    /* A judgement before the last arrival is taken at the last arrival. */
    assert_float_equal(gw_speed_rate(&s, T0 + 2000), 30.0 / 2.0, 1e-12);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_speed_not_judged_before_first_token),
        cmocka_unit_test(test_speed_fast_stream_stays_ok),
        cmocka_unit_test(test_speed_exact_rate_below_minimum_is_too_slow),
        cmocka_unit_test(test_speed_exact_rate_at_minimum_is_ok),
        cmocka_unit_test(test_speed_not_judged_before_half_window_of_time),
        cmocka_unit_test(test_speed_short_slowdown_survives),
        cmocka_unit_test(test_speed_long_pause_is_taken_out),
        cmocka_unit_test(test_speed_sustained_slowdown_is_cut),
        cmocka_unit_test(test_speed_exactly_five_seconds_is_a_silence),
        cmocka_unit_test(test_speed_silence_straddling_window_start_counts_its_inside_part),
        cmocka_unit_test(test_speed_window_start_rounds_up_to_the_grid),
        cmocka_unit_test(test_speed_ring_wraps_over_minutes),
        cmocka_unit_test(test_speed_long_fast_stream_stays_ok_for_ten_minutes),
        cmocka_unit_test(test_speed_rate_matches_judge_before_half_window),
        cmocka_unit_test(test_speed_min_zero_is_never_too_slow),
        cmocka_unit_test(test_speed_window_is_clamped_to_120_secs),
        cmocka_unit_test(test_speed_time_going_backwards_counts_as_the_last_arrival),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
