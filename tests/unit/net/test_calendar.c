/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_calendar.c - the local calendar periods of the key limits
 * (DESIGN.md 8): day, week from Monday, month, DST-long and DST-short days, the year's
 * end, and a zone change seen at once after net_calendar_moved. The zone is set with
 * TZ (a POSIX rule for the DST cases, so no tzdata is needed).
 * See: net/calendar.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "net/calendar.h"

#define H 3600000ULL

static void
t_zone(const char *tz)
{
    setenv("TZ", tz, 1);
    tzset();
}

/* Wednesday 2026-11-25 12:00 UTC. */
static void
test_calendar_day_week_from_monday_and_month_in_utc(void **state)
{
    struct gw_period p;

    (void)state;
    t_zone("UTC0");
    net_calendar_fresh(1795608000000ULL, &p);
    assert_int_equal(p.day.start_ms, 1795564800000ULL);   /* 11-25 00:00 */
    assert_int_equal(p.day.end_ms, 1795651200000ULL);     /* 11-26 00:00 */
    assert_int_equal(p.week.start_ms, 1795392000000ULL);  /* Monday 11-23 */
    assert_int_equal(p.week.end_ms, 1795996800000ULL);    /* Monday 11-30 */
    assert_int_equal(p.month.start_ms, 1793491200000ULL); /* 11-01 */
    assert_int_equal(p.month.end_ms, 1796083200000ULL);   /* 12-01 */
}

/* A Sunday's last second still belongs to the week that began on Monday; the next
 * second (Monday 00:00) starts a new one. */
static void
test_calendar_week_ends_at_monday_midnight(void **state)
{
    struct gw_period p;

    (void)state;
    t_zone("UTC0");
    net_calendar_fresh(1795996799000ULL, &p); /* Sunday 11-29 23:59:59 */
    assert_int_equal(p.week.start_ms, 1795392000000ULL);
    assert_int_equal(p.week.end_ms, 1795996800000ULL);
    net_calendar_fresh(1795996800000ULL, &p); /* Monday 11-30 00:00 */
    assert_int_equal(p.week.start_ms, 1795996800000ULL);
    assert_int_equal(p.week.end_ms, 1795996800000ULL + 7 * 24 * H);
    assert_int_equal(p.day.start_ms, 1795996800000ULL);
}

static void
test_calendar_december_ends_at_the_new_year(void **state)
{
    struct gw_period p;

    (void)state;
    t_zone("UTC0");
    net_calendar_fresh(1798758000000ULL, &p); /* 2026-12-31 23:00 */
    assert_int_equal(p.month.start_ms, 1796083200000ULL);
    assert_int_equal(p.month.end_ms, 1798761600000ULL); /* 2027-01-01 */
    assert_int_equal(p.day.end_ms, 1798761600000ULL);
}

/* Central European time: the last Sunday of March has 23 hours, of October 25. */
static void
test_calendar_dst_days_are_23_and_25_hours_long(void **state)
{
    struct gw_period p;

    (void)state;
    t_zone("CET-1CEST,M3.5.0,M10.5.0/3");
    net_calendar_fresh(1774785600000ULL, &p); /* 2026-03-29 12:00 UTC */
    assert_int_equal(p.day.start_ms, 1774738800000ULL);
    assert_int_equal(p.day.end_ms, 1774821600000ULL);
    assert_int_equal(p.day.end_ms - p.day.start_ms, 23 * H);
    net_calendar_fresh(1792929600000ULL, &p); /* 2026-10-25 12:00 UTC */
    assert_int_equal(p.day.start_ms, 1792879200000ULL);
    assert_int_equal(p.day.end_ms, 1792969200000ULL);
    assert_int_equal(p.day.end_ms - p.day.start_ms, 25 * H);
}

/* The per-thread cache keeps a second's answer, unless the zone was said to move. */
static void
test_calendar_cache_is_dropped_when_the_zone_moved(void **state)
{
    const uint64_t now = 1795608000000ULL;
    struct gw_period p;

    (void)state;
    t_zone("UTC0");
    net_calendar(now, &p);
    assert_int_equal(p.day.start_ms, 1795564800000ULL);
    t_zone("<+05>-5");
    net_calendar(now + 1, &p); /* same second: the cached answer */
    assert_int_equal(p.day.start_ms, 1795564800000ULL);
    net_calendar_moved();
    net_calendar(now + 2, &p);
    assert_int_equal(p.day.start_ms, 1795564800000ULL - 5 * H);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calendar_day_week_from_monday_and_month_in_utc),
        cmocka_unit_test(test_calendar_week_ends_at_monday_midnight),
        cmocka_unit_test(test_calendar_december_ends_at_the_new_year),
        cmocka_unit_test(test_calendar_dst_days_are_23_and_25_hours_long),
        cmocka_unit_test(test_calendar_cache_is_dropped_when_the_zone_moved),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
