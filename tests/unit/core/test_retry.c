/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_retry.c - Retry-After headers and delays stated in error bodies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/retry.h"

#define NONE ((struct gw_str){"", 0})
/* 2026-11-30T04:00:00Z */
#define NOW 1796011200000ull

static void
test_retry_header_seconds_and_fraction(void **state)
{
    (void)state;
    assert_int_equal(gw_retry_after_ms(GW_STR_LIT("20"), NONE, NONE, NOW), 20000);
    assert_int_equal(gw_retry_after_ms(GW_STR_LIT(" 1.5"), NONE, NONE, NOW), 1500);
    assert_int_equal(gw_retry_after_ms(GW_STR_LIT("abc"), NONE, NONE, NOW), 0);
    assert_int_equal(gw_retry_after_ms(NONE, NONE, NONE, NOW), 0);
}

static void
test_retry_header_http_date_future_and_past(void **state)
{
    (void)state;
    assert_int_equal(
        gw_retry_after_ms(GW_STR_LIT("Mon, 30 Nov 2026 04:01:00 GMT"), NONE, NONE, NOW), 60000);
    assert_int_equal(
        gw_retry_after_ms(GW_STR_LIT("Mon, 30 Nov 2026 03:59:00 GMT"), NONE, NONE, NOW), 0);
}

static void
test_retry_ms_header_and_longest_wins(void **state)
{
    (void)state;
    assert_int_equal(gw_retry_after_ms(NONE, GW_STR_LIT("250"), NONE, NOW), 250);
    assert_int_equal(gw_retry_after_ms(GW_STR_LIT("1"), GW_STR_LIT("2500"), NONE, NOW), 2500);
    assert_int_equal(gw_retry_after_ms(GW_STR_LIT("3"), GW_STR_LIT("2500"), NONE, NOW), 3000);
}

static void
test_retry_delays_stated_in_bodies(void **state)
{
    (void)state;
    assert_int_equal(
        gw_retry_after_ms(NONE, NONE,
                          GW_STR_LIT("{\"error\":{\"message\":\"Rate limit reached. Please try "
                                     "again in 20s. Visit ...\"}}"),
                          NOW),
        20000);
    assert_int_equal(gw_retry_after_ms(NONE, NONE, GW_STR_LIT("Please try again in 1.25s"), NOW),
                     1250);
    assert_int_equal(gw_retry_after_ms(NONE, NONE, GW_STR_LIT("try again in 750ms"), NOW), 750);
    /* Groq states Go durations */
    assert_int_equal(gw_retry_after_ms(NONE, NONE, GW_STR_LIT("Please try again in 2m12.5s."), NOW),
                     132500);
    assert_int_equal(gw_retry_after_ms(NONE, NONE, GW_STR_LIT("{\"retryDelay\": \"37s\"}"), NOW),
                     37000);
    assert_int_equal(gw_retry_after_ms(NONE, NONE, GW_STR_LIT("retry after 2 minutes"), NOW),
                     120000);
    assert_int_equal(gw_retry_after_ms(NONE, NONE, GW_STR_LIT("no delay stated here"), NOW), 0);
    assert_int_equal(gw_retry_after_ms(NONE, NONE, GW_STR_LIT("try again in a while"), NOW), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_header_seconds_and_fraction),
        cmocka_unit_test(test_retry_header_http_date_future_and_past),
        cmocka_unit_test(test_retry_ms_header_and_longest_wins),
        cmocka_unit_test(test_retry_delays_stated_in_bodies),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
