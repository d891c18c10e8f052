/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_log.c - rate-limited lines (issue 8): one line of a kind a
 * second, the next one carrying the count of those held back, on a clock the test sets.
 * See: core/log.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/log.h"

static uint64_t t_now_ms;

static uint64_t
t_clock(void)
{
    return t_now_ms;
}

static void
test_log_rate_one_line_a_second_with_the_held_back_count(void **state)
{
    struct gw_log_rate r = {0, 0};
    uint64_t held = 99;
    int i;

    (void)state;
    gw_log_set_clock(t_clock);
    t_now_ms = 1000000;
    assert_true(gw_log_rate_pass(&r, &held));
    assert_int_equal(held, 0);
    for (i = 0; i < 1000; i++) /* a burst within the same second */
        assert_false(gw_log_rate_pass(&r, &held));
    t_now_ms += 999;
    assert_false(gw_log_rate_pass(&r, &held));
    t_now_ms += 1;
    assert_true(gw_log_rate_pass(&r, &held));
    assert_int_equal(held, 1001);
    t_now_ms += 5000;
    assert_true(gw_log_rate_pass(&r, &held));
    assert_int_equal(held, 0);
}

static void
test_log_rate_kinds_are_counted_apart(void **state)
{
    struct gw_log_rate a = {0, 0}, b = {0, 0};
    uint64_t held = 0;

    (void)state;
    gw_log_set_clock(t_clock);
    t_now_ms = 7000;
    assert_true(gw_log_rate_pass(&a, &held));
    assert_true(gw_log_rate_pass(&b, &held));
    assert_false(gw_log_rate_pass(&a, &held));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_rate_one_line_a_second_with_the_held_back_count),
        cmocka_unit_test(test_log_rate_kinds_are_counted_apart),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
