/* SPDX-License-Identifier: MIT
 * net/calendar.c - local calendar periods for the key limits.
 * Owns:    nothing.
 * Threads: any (each thread keeps its own one-second cache).
 * See:     net/calendar.h
 */
#include "net/calendar.h"

#include <time.h>

/* Local midnight of the day <tm> is in, <add_days> days on (mktime normalises). */
static uint64_t
midnight(const struct tm *tm, int add_days, int mday)
{
    struct tm t = *tm;

    t.tm_mday = mday + add_days;
    t.tm_hour = t.tm_min = t.tm_sec = 0;
    t.tm_isdst = -1;
    return (uint64_t)mktime(&t) * 1000;
}

static void
compute(uint64_t now_ms, struct gw_period *out)
{
    time_t now = (time_t)(now_ms / 1000);
    struct tm tm, m;
    int since_monday;

    localtime_r(&now, &tm);
    out->day.start_ms = midnight(&tm, 0, tm.tm_mday);
    out->day.end_ms = midnight(&tm, 1, tm.tm_mday);
    since_monday = (tm.tm_wday + 6) % 7;
    out->week.start_ms = midnight(&tm, -since_monday, tm.tm_mday);
    out->week.end_ms = midnight(&tm, 7 - since_monday, tm.tm_mday);
    m = tm;
    out->month.start_ms = midnight(&m, 0, 1);
    m.tm_mon += 1;
    out->month.end_ms = midnight(&m, 0, 1);
}

void
net_calendar(uint64_t now_ms, struct gw_period *out)
{
    /* localtime_r and three mktime calls cost microseconds a request; the periods only
     * change at their ends, so each thread recomputes them once a second. (The zone is
     * the process's: TZ or /etc/localtime as read at startup.) */
    static __thread uint64_t cached_sec = UINT64_MAX;
    static __thread struct gw_period cached;

    if (now_ms / 1000 != cached_sec) {
        compute(now_ms, &cached);
        cached_sec = now_ms / 1000;
    }
    *out = cached;
}
