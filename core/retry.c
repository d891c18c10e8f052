/* SPDX-License-Identifier: MIT
 * core/retry.c - Retry-After and the delays stated in error bodies.
 * Owns:    nothing.
 * Threads: any.
 * See:     core/retry.h
 */
#define _DEFAULT_SOURCE /* timegm */
#include "core/retry.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define RETRY_MAX_MS (7ull * 24 * 3600 * 1000) /* anything longer is nonsense */

/* A decimal number (digits, optional fraction) at <s>; its value times 1000 in <milli>
 * and the bytes used. 0 when there is none. */
static size_t
number_milli(const char *s, size_t n, uint64_t *milli)
{
    uint64_t whole = 0, frac = 0, scale = 1000;
    size_t i = 0;

    while (i < n && s[i] >= '0' && s[i] <= '9' && whole < RETRY_MAX_MS) {
        whole = whole * 10 + (uint64_t)(s[i] - '0');
        i++;
    }
    if (i == 0)
        return 0;
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9') {
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(s[i] - '0') * scale;
            }
            i++;
        }
    }
    *milli = whole * 1000 + frac;
    return i;
}

static uint64_t
header_seconds(struct gw_str v, uint64_t now_ms)
{
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    char buf[64], mon[4];
    struct tm tm;
    uint64_t milli;
    int day, year, h, m, sec, i;
    time_t t;

    while (v.len && (*v.ptr == ' ' || *v.ptr == '\t')) {
        v.ptr++;
        v.len--;
    }
    if (!v.len)
        return 0;
    if (number_milli(v.ptr, v.len, &milli) == v.len)
        return milli;
    /* IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT" */
    if (v.len >= sizeof(buf))
        return 0;
    memcpy(buf, v.ptr, v.len);
    buf[v.len] = '\0';
    if (sscanf(buf, "%*3s, %2d %3s %4d %2d:%2d:%2d GMT", &day, mon, &year, &h, &m, &sec) != 6)
        return 0;
    memset(&tm, 0, sizeof(tm));
    for (i = 0; i < 12; i++)
        if (strncmp(mon, months[i], 3) == 0)
            break;
    if (i == 12)
        return 0;
    tm.tm_mday = day;
    tm.tm_mon = i;
    tm.tm_year = year - 1900;
    tm.tm_hour = h;
    tm.tm_min = m;
    tm.tm_sec = sec;
    t = timegm(&tm);
    if (t < 0 || (uint64_t)t * 1000 <= now_ms)
        return 0;
    return (uint64_t)t * 1000 - now_ms;
}

static bool
lower_eq(const char *s, const char *lit, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        char c = s[i];

        if (c >= 'A' && c <= 'Z')
            c = (char)(c + 32);
        if (c != lit[i])
            return false;
    }
    return true;
}

/* After a phrase: optional spaces and quotes, a number, a unit (ms, s, sec(ond)s,
 * m, min(ute)s); 0 when it does not follow. */
static uint64_t
delay_after(const char *s, size_t n)
{
    uint64_t milli;
    size_t i = 0, used;

    while (i < n && (s[i] == ' ' || s[i] == '"' || s[i] == ':'))
        i++;
    used = number_milli(s + i, n - i, &milli);
    if (!used)
        return 0;
    i += used;
    while (i < n && s[i] == ' ')
        i++;
    if (n - i >= 2 && lower_eq(s + i, "ms", 2))
        return milli / 1000;
    if (n - i >= 1 && (s[i] == 'm' || s[i] == 'M') && !(n - i >= 2 && lower_eq(s + i, "ms", 2))) {
        uint64_t sec;

        /* Groq's Go durations: "2m12.5s" is two minutes and 12.5 seconds. */
        i++;
        used = number_milli(s + i, n - i, &sec);
        if (used && n - i > used && (s[i + used] == 's' || s[i + used] == 'S'))
            return milli * 60 + sec;
        return milli * 60;
    }
    if (n - i >= 1 && (s[i] == 's' || s[i] == 'S'))
        return milli;
    return 0;
}

static uint64_t
body_delay(struct gw_str body)
{
    static const char *const phrases[] = {"try again in", "retry after", "retrydelay", "retry in"};
    uint64_t best = 0;
    size_t i, p;

    for (i = 0; i < body.len; i++) {
        for (p = 0; p < sizeof(phrases) / sizeof(phrases[0]); p++) {
            size_t n = strlen(phrases[p]);
            uint64_t d;

            if (body.len - i < n || !lower_eq(body.ptr + i, phrases[p], n))
                continue;
            d = delay_after(body.ptr + i + n, body.len - i - n);
            if (d > best)
                best = d;
        }
    }
    return best;
}

uint64_t
gw_retry_after_ms(struct gw_str retry_after, struct gw_str retry_after_ms, struct gw_str body,
                  uint64_t now_ms)
{
    uint64_t best = header_seconds(retry_after, now_ms), v, milli;

    if (retry_after_ms.len &&
        number_milli(retry_after_ms.ptr, retry_after_ms.len, &milli) == retry_after_ms.len) {
        v = milli / 1000;
        if (v > best)
            best = v;
    }
    v = body_delay(body);
    if (v > best)
        best = v;
    return best > RETRY_MAX_MS ? RETRY_MAX_MS : best;
}
