/* SPDX-License-Identifier: MIT
 * net/calendar.c - local calendar periods for the key limits.
 * Owns:    nothing.
 * Threads: any (each thread keeps its own one-second cache, dropped when the generation
 *          bumped by net_calendar_moved changes).
 * See:     net/calendar.h
 */
#include "net/calendar.h"

#include <pthread.h>
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

/* Bumped by net_calendar_moved; each thread's cache remembers the one it was filled in. */
static unsigned calendar_gen;

/* tzset, localtime_r and mktime share glibc's zone state under glibc's own lock, which
 * ThreadSanitizer cannot see (tzset frees and copies the zone name on every call when TZ
 * is unset). One lock of ours around them makes the order visible; it is taken about
 * once a second per thread. */
static pthread_mutex_t calendar_mu = PTHREAD_MUTEX_INITIALIZER;

void
net_calendar_fresh(uint64_t now_ms, struct gw_period *out)
{
    time_t now = (time_t)(now_ms / 1000);
    struct tm tm, m;
    int since_monday;

    pthread_mutex_lock(&calendar_mu);
    tzset(); /* the zone as of now (glibc re-reads /etc/localtime when it changed), so
              * localtime_r and the mktime calls below agree */
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
    pthread_mutex_unlock(&calendar_mu);
}

void
net_calendar(uint64_t now_ms, struct gw_period *out)
{
    /* localtime_r and three mktime calls cost microseconds a request; the periods only
     * change at their ends, so each thread recomputes them once a second, or at once
     * after net_calendar_moved. */
    static __thread uint64_t cached_sec = UINT64_MAX;
    static __thread unsigned cached_gen;
    static __thread struct gw_period cached;
    /* RELAXED: a hint to recompute; the zone itself is glibc's, under its own lock. */
    unsigned gen = __atomic_load_n(&calendar_gen, __ATOMIC_RELAXED);

    if (now_ms / 1000 != cached_sec || gen != cached_gen) {
        net_calendar_fresh(now_ms, &cached);
        cached_sec = now_ms / 1000;
        cached_gen = gen;
    }
    *out = cached;
}

void
net_calendar_moved(void)
{
    __atomic_fetch_add(&calendar_gen, 1, __ATOMIC_RELAXED);
}
