/* SPDX-License-Identifier: MIT
 * core/quota_learn.c - rate-limit headers and error bodies read into quota facts.
 * A text scanner, not a JSON parser: error bodies arrive wrapped and escaped in many
 * ways (a proxy's JSON holding the upstream's JSON as a string), and only a few phrases
 * and keys matter. Bodies are read in their first Q_BODY_MAX bytes.
 * Owns:    nothing beyond one call (a stack buffer for the unescaped body).
 * Threads: any.
 * See:     core/quota_learn.h
 */
#include "core/quota_learn.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/retry.h"

#define Q_BODY_MAX 8192
#define Q_LOOKBACK 80 /* how far before "Limit" its window's words may stand */
#define Q_NUM_MAX 1000000000000000ull

/* ---- small scanners ---- */

static char
q_lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

static bool
q_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool
q_is_alpha(char c)
{
    c = q_lower(c);
    return c >= 'a' && c <= 'z';
}

/* True when <s>[0..] starts with lower-case literal <lit>, ignoring case. */
static bool
q_at(const char *s, size_t n, const char *lit)
{
    size_t k = strlen(lit);

    if (n < k)
        return false;
    for (size_t i = 0; i < k; i++)
        if (q_lower(s[i]) != lit[i])
            return false;
    return true;
}

/* The last position < <end> and >= <from> where <lit> starts; -1 when none. */
static long
q_rfind(const char *s, size_t from, size_t end, const char *lit)
{
    size_t k = strlen(lit);

    for (size_t i = end; i-- > from;)
        if (end - i >= k && q_at(s + i, end - i, lit))
            return (long)i;
    return -1;
}

/* A decimal count at <s>: digits, thousands groups (",000"), an ignored fraction; the
 * bytes used in <*used> (0: none). */
static uint64_t
q_number(const char *s, size_t n, size_t *used)
{
    uint64_t v = 0;
    size_t i = 0;

    while (i < n && q_is_digit(s[i]) && v < Q_NUM_MAX)
        v = v * 10 + (uint64_t)(s[i++] - '0');
    if (i == 0) {
        *used = 0;
        return 0;
    }
    while (i + 3 < n && s[i] == ',' && q_is_digit(s[i + 1]) && q_is_digit(s[i + 2]) &&
           q_is_digit(s[i + 3]) && (i + 4 >= n || !q_is_digit(s[i + 4])) && v < Q_NUM_MAX) {
        v = v * 1000 + (uint64_t)(s[i + 1] - '0') * 100 + (uint64_t)(s[i + 2] - '0') * 10 +
            (uint64_t)(s[i + 3] - '0');
        i += 4;
    }
    if (i + 1 < n && s[i] == '.' && q_is_digit(s[i + 1])) {
        i++;
        while (i < n && q_is_digit(s[i]))
            i++;
    }
    *used = i;
    return v;
}

/* ---- facts ---- */

static struct gw_quota_fact *
q_fact(struct gw_quota_facts *f, enum gw_quota_win w)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->f[i].win == w)
            return &f->f[i];
    if (f->n >= GW_QUOTA_MAX_FACTS)
        return NULL;
    f->f[f->n].win = w;
    f->f[f->n].remaining = -1;
    return &f->f[f->n++];
}

static void
q_origin(char *dst, const char *pre, const char *s, size_t n)
{
    size_t k = strlen(pre);

    if (k > GW_QUOTA_ORIGIN_MAX)
        k = GW_QUOTA_ORIGIN_MAX;
    memcpy(dst, pre, k);
    for (size_t i = 0; i < n && k < GW_QUOTA_ORIGIN_MAX; i++)
        dst[k++] =
            (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\') ? q_lower(s[i]) : '?';
    dst[k] = '\0';
}

static void
q_add_limit(struct gw_quota_facts *f, enum gw_quota_win w, uint64_t limit, const char *pre,
            const char *s, size_t n)
{
    struct gw_quota_fact *x = q_fact(f, w);

    if (!x || !limit)
        return;
    if (!x->limit || limit < x->limit) {
        x->limit = limit;
        q_origin(x->origin, pre, s, n);
    }
    if (w == GW_QUOTA_RPD || w == GW_QUOTA_TPD)
        f->day_exhausted = true;
}

static void
q_add_remaining(struct gw_quota_facts *f, enum gw_quota_win w, uint64_t rem)
{
    struct gw_quota_fact *x = q_fact(f, w);

    if (x && (x->remaining < 0 || (uint64_t)x->remaining > rem))
        x->remaining = rem > INT64_MAX ? INT64_MAX : (int64_t)rem;
}

static void
q_add_reset(struct gw_quota_facts *f, enum gw_quota_win w, uint64_t ms)
{
    struct gw_quota_fact *x = q_fact(f, w);

    if (x && ms > x->reset_ms)
        x->reset_ms = ms;
}

/* ---- reset values ---- */

/* Days since 1970-01-01 of a civil date (Howard Hinnant's days_from_civil). */
static int64_t
q_days(int64_t y, unsigned m, unsigned d)
{
    int64_t era;
    unsigned yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = (unsigned)(y - era * 400);
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

/* "2026-01-01T00:00:30Z" / "...30.5+01:00" as ms since the epoch; 0 when not one. */
static uint64_t
q_rfc3339(const char *s, size_t n)
{
    unsigned y, mo, d, h, mi, se, frac = 0, scale = 1000;
    char buf[40];
    int used = 0;
    int64_t t, off = 0;
    size_t i;

    if (n < 20 || n >= sizeof(buf))
        return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (sscanf(buf, "%4u-%2u-%2u%*[Tt ]%2u:%2u:%2u%n", &y, &mo, &d, &h, &mi, &se, &used) != 6 ||
        used < 19)
        return 0;
    i = (size_t)used;
    if (i < n && buf[i] == '.')
        for (i++; i < n && q_is_digit(buf[i]); i++)
            if (scale > 1) {
                scale /= 10;
                frac += (unsigned)(buf[i] - '0') * scale;
            }
    if (i < n && (buf[i] == '+' || buf[i] == '-') && n - i >= 6) {
        unsigned oh, om;

        if (sscanf(buf + i + 1, "%2u:%2u", &oh, &om) != 2)
            return 0;
        off = (int64_t)(oh * 60 + om) * 60000 * (buf[i] == '+' ? 1 : -1);
    } else if (!(i < n && (buf[i] == 'Z' || buf[i] == 'z'))) {
        return 0;
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60 || y < 1970)
        return 0;
    t = q_days(y, mo, d) * 86400000 + (int64_t)(h * 3600 + mi * 60 + se) * 1000 + frac - off;
    return t > 0 ? (uint64_t)t : 0;
}

/* "6m0s", "1h2m3.5s", "20ms": ms; 0 when not such a duration. */
static uint64_t
q_duration(const char *s, size_t n)
{
    uint64_t total = 0;
    size_t i = 0;
    bool any = false;

    while (i < n) {
        uint64_t whole = 0, frac = 0, scale = 1000, unit;

        if (!q_is_digit(s[i]))
            return 0;
        while (i < n && q_is_digit(s[i]) && whole < Q_NUM_MAX)
            whole = whole * 10 + (uint64_t)(s[i++] - '0');
        if (i < n && s[i] == '.')
            for (i++; i < n && q_is_digit(s[i]); i++)
                if (scale > 1) {
                    scale /= 10;
                    frac += (uint64_t)(s[i] - '0') * scale;
                }
        if (i + 1 < n && s[i] == 'm' && s[i + 1] == 's') {
            unit = 1;
            i += 2;
        } else if (i < n && (s[i] == 'h' || s[i] == 'm' || s[i] == 's')) {
            unit = s[i] == 'h' ? 3600000 : s[i] == 'm' ? 60000 : 1000;
            i++;
        } else {
            return 0;
        }
        /* whole and frac are in units and thousandths of a unit */
        total += whole * unit + frac * unit / 1000;
        any = true;
        if (total > 7ull * 86400000)
            return 7ull * 86400000;
    }
    return any ? total : 0;
}

uint64_t
gw_quota_reset_ms(struct gw_str v, uint64_t now_ms)
{
    const char *s = v.ptr;
    size_t n = v.len, used = 0, i = 0;
    uint64_t whole = 0, frac = 0, scale = 1000, at;

    while (n && (*s == ' ' || *s == '"')) {
        s++;
        n--;
    }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '"'))
        n--;
    if (!n)
        return 0;
    if ((at = q_rfc3339(s, n)) != 0)
        return at > now_ms ? at - now_ms : 0;
    while (i < n && q_is_digit(s[i]) && whole < Q_NUM_MAX)
        whole = whole * 10 + (uint64_t)(s[i++] - '0');
    used = i;
    if (used && i < n && s[i] == '.') {
        for (i++; i < n && q_is_digit(s[i]); i++)
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(s[i] - '0') * scale;
            }
    }
    if (used && i == n) {
        if (whole >= 1000000000000ull) /* epoch ms */
            return whole > now_ms ? whole - now_ms : 0;
        if (whole >= 1000000000ull) /* epoch seconds */
            return whole * 1000 > now_ms ? whole * 1000 - now_ms : 0;
        return whole * 1000 + frac; /* seconds from now */
    }
    return q_duration(s, n);
}

/* ---- headers ---- */

enum q_kind { Q_LIMIT, Q_REMAINING, Q_RESET };

static bool
q_name_eq(struct gw_str a, const char *lit)
{
    return a.len == strlen(lit) && q_at(a.ptr, a.len, lit);
}

static void
q_apply(struct gw_quota_facts *f, enum gw_quota_win w, enum q_kind k, struct gw_str name,
        struct gw_str value, uint64_t now_ms)
{
    size_t used = 0;
    uint64_t v;

    if (k == Q_RESET) {
        v = gw_quota_reset_ms(value, now_ms);
        if (v)
            q_add_reset(f, w, v);
        return;
    }
    while (value.len && *value.ptr == ' ') {
        value.ptr++;
        value.len--;
    }
    v = q_number(value.ptr, value.len, &used);
    if (!used)
        return;
    if (k == Q_LIMIT) {
        /* the learned-limit record is named after its header */
        struct gw_quota_fact *x = q_fact(f, w);

        if (x && v && (!x->limit || v < x->limit)) {
            x->limit = v;
            q_origin(x->origin, "", name.ptr, name.len);
        }
    } else {
        q_add_remaining(f, w, v);
    }
}

/* "x-ratelimit-<kind>-<measure>[-<period>]" and "anthropic-ratelimit-<measure>-<kind>". */
static bool
q_header(enum gw_quota_vendor vend, struct gw_str name, struct gw_str value, uint64_t now_ms,
         struct gw_quota_facts *f, struct gw_quota_header *plain)
{
    static const char *const kinds[] = {"limit", "remaining", "reset"};
    const char *s = name.ptr;
    size_t n = name.len;

    if (q_at(s, n, "x-ratelimit-")) {
        bool tokens, day = false;
        size_t k;

        s += 12;
        n -= 12;
        for (k = 0; k < 3; k++)
            if (q_at(s, n, kinds[k]))
                break;
        if (k == 3)
            return false;
        s += strlen(kinds[k]);
        n -= strlen(kinds[k]);
        if (n == 0) { /* OpenRouter's plain form: the body names its window */
            plain[k].name = name;
            plain[k].value = value;
            return true;
        }
        if (*s != '-')
            return false;
        s++;
        n--;
        if (q_at(s, n, "requests")) {
            tokens = false;
            s += 8;
            n -= 8;
        } else if (q_at(s, n, "req")) {
            tokens = false;
            s += 3;
            n -= 3;
        } else if (q_at(s, n, "tokens")) {
            tokens = true;
            s += 6;
            n -= 6;
        } else {
            return false;
        }
        if (n == 0)
            day = !tokens && vend == GW_QUOTA_VENDOR_GROQ; /* Groq: requests are per day */
        else if (n == 4 && q_at(s, n, "-day"))
            day = true;
        else if (!(n == 7 && q_at(s, n, "-minute")))
            return false; /* -hour, -month: windows gw does not keep */
        q_apply(f,
                tokens ? (day ? GW_QUOTA_TPD : GW_QUOTA_TPM) : (day ? GW_QUOTA_RPD : GW_QUOTA_RPM),
                (enum q_kind)k, name, value, now_ms);
        return true;
    }
    if (q_at(s, n, "anthropic-ratelimit-")) {
        enum gw_quota_win w;
        size_t k;

        s += 20;
        n -= 20;
        if (q_at(s, n, "requests-")) {
            w = GW_QUOTA_RPM;
            s += 9;
            n -= 9;
        } else if (q_at(s, n, "tokens-")) {
            w = GW_QUOTA_TPM;
            s += 7;
            n -= 7;
        } else if (q_at(s, n, "input-tokens-")) {
            /* input only: tighter than gw's tokens (input + output) per minute, so safe */
            w = GW_QUOTA_TPM;
            s += 13;
            n -= 13;
        } else {
            return false;
        }
        for (k = 0; k < 3; k++)
            if (n == strlen(kinds[k]) && q_at(s, n, kinds[k]))
                break;
        if (k == 3)
            return false;
        q_apply(f, w, (enum q_kind)k, name, value, now_ms);
        return true;
    }
    return false;
}

/* ---- bodies ---- */

/* Copies <b> into <buf> with one level of JSON string escaping undone (\" -> ", \\ -> \,
 * \n -> space) as many times as it still holds \" (at most 3 levels). */
static struct gw_str
q_unescape(struct gw_str b, char *buf, size_t cap)
{
    size_t n = b.len < cap ? b.len : cap;

    memcpy(buf, b.ptr, n);
    for (int level = 0; level < 3; level++) {
        size_t o = 0;
        bool any = false;

        for (size_t i = 0; i < n; i++) {
            if (buf[i] == '\\' && i + 1 < n) {
                char c = buf[i + 1];

                if (c == '"' || c == '\\' || c == '/') {
                    buf[o++] = c;
                    i++;
                    any = true;
                    continue;
                }
                if (c == 'n' || c == 't' || c == 'r') {
                    buf[o++] = ' ';
                    i++;
                    any = true;
                    continue;
                }
            }
            buf[o++] = buf[i];
        }
        n = o;
        if (!any)
            break;
    }
    return (struct gw_str){buf, n};
}

/* "... tokens per min (TPM): Limit 30000, Used ..." and "... on requests per min. Limit:
 * 200 / min.": a number after "Limit", its window from the words before (or "/ min"
 * after it). */
static void
q_body_limit_words(struct gw_str b, struct gw_quota_facts *f)
{
    const char *s = b.ptr;

    for (size_t i = 0; i + 5 < b.len; i++) {
        size_t j, used, from;
        uint64_t v;
        long tok, req, mn, dy, ab;
        enum gw_quota_win w;
        bool tokens, day;
        char phrase[32];

        if (!q_at(s + i, b.len - i, "limit") || (i && q_is_alpha(s[i - 1])))
            continue;
        j = i + 5;
        while (j < b.len && (s[j] == ' ' || s[j] == ':'))
            j++;
        v = q_number(s + j, b.len - j, &used);
        if (!used)
            continue;
        from = i > Q_LOOKBACK ? i - Q_LOOKBACK : 0;
        /* the abbreviation names both the measure and the period */
        if ((ab = q_rfind(s, from, i, "(tpm)")) >= 0 || (ab = q_rfind(s, from, i, "(rpm)")) >= 0 ||
            (ab = q_rfind(s, from, i, "(tpd)")) >= 0 || (ab = q_rfind(s, from, i, "(rpd)")) >= 0) {
            tokens = q_lower(s[ab + 1]) == 't';
            day = q_lower(s[ab + 3]) == 'd';
        } else {
            size_t k = j + used;

            tok = q_rfind(s, from, i, "token");
            req = q_rfind(s, from, i, "request");
            mn = q_rfind(s, from, i, "per min");
            dy = q_rfind(s, from, i, "per day");
            while (k < b.len && s[k] == ' ')
                k++;
            if (k < b.len && s[k] == '/') {
                for (k++; k < b.len && s[k] == ' '; k++)
                    ;
                if (q_at(s + k, b.len - k, "min"))
                    mn = (long)k;
                else if (q_at(s + k, b.len - k, "day"))
                    dy = (long)k;
            }
            if ((tok < 0 && req < 0) || (mn < 0 && dy < 0))
                continue; /* no clear window */
            tokens = tok > req;
            day = dy > mn;
        }
        w = tokens ? (day ? GW_QUOTA_TPD : GW_QUOTA_TPM) : (day ? GW_QUOTA_RPD : GW_QUOTA_RPM);
        snprintf(phrase, sizeof(phrase), "%s per %s", tokens ? "tokens" : "requests",
                 day ? "day" : "min");
        q_add_limit(f, w, v, "body: ", phrase, strlen(phrase));
    }
}

/* "of 30,000 input tokens per minute" (Anthropic): a number right before the phrase. */
static void
q_body_n_per(struct gw_str b, struct gw_quota_facts *f)
{
    static const struct {
        const char *lit;
        enum gw_quota_win w;
    } ph[] = {
        {" input tokens per minute", GW_QUOTA_TPM}, {" tokens per minute", GW_QUOTA_TPM},
        {" requests per minute", GW_QUOTA_RPM},     {" input tokens per day", GW_QUOTA_TPD},
        {" tokens per day", GW_QUOTA_TPD},          {" requests per day", GW_QUOTA_RPD},
    };
    const char *s = b.ptr;

    for (size_t i = 1; i < b.len; i++) {
        if (!q_is_digit(s[i - 1]))
            continue;
        for (size_t p = 0; p < sizeof(ph) / sizeof(ph[0]); p++) {
            size_t st = i, used;
            uint64_t v;

            if (!q_at(s + i, b.len - i, ph[p].lit))
                continue;
            /* back to the start of the number (digits and thousands commas) */
            while (st > 0 && (q_is_digit(s[st - 1]) || s[st - 1] == ','))
                st--;
            if (st > 0 && q_is_alpha(s[st - 1]))
                break;
            v = q_number(s + st, i - st, &used);
            if (used == i - st)
                q_add_limit(f, ph[p].w, v, "body:", ph[p].lit, strlen(ph[p].lit));
            break;
        }
    }
}

/* Gemini's QuotaFailure: "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
 * then maybe "quotaValue": "250" before the next violation. */
static void
q_body_gemini(struct gw_str b, struct gw_quota_facts *f)
{
    const char *s = b.ptr;

    for (size_t i = 0; i + 7 < b.len; i++) {
        size_t j, st, end;
        bool day, minute, tokens, requests;
        uint64_t v = 0;

        if (!q_at(s + i, b.len - i, "quotaid"))
            continue;
        for (j = i + 7; j < b.len && (s[j] == '"' || s[j] == ':' || s[j] == ' ' || s[j] == '\'');
             j++)
            ;
        for (st = j; j < b.len && (q_is_alpha(s[j]) || q_is_digit(s[j]) || s[j] == '-'); j++)
            ;
        end = j;
        day = q_rfind(s, st, end, "perday") >= 0;
        minute = q_rfind(s, st, end, "perminute") >= 0;
        tokens = q_rfind(s, st, end, "token") >= 0;
        requests = q_rfind(s, st, end, "request") >= 0;
        if (day)
            f->day_exhausted = true;
        if (day == minute || tokens == requests)
            continue;
        /* the quotaValue of this violation: before the next quotaId */
        for (size_t k = end; k + 10 < b.len; k++) {
            size_t used;

            if (q_at(s + k, b.len - k, "quotaid"))
                break;
            if (!q_at(s + k, b.len - k, "quotavalue"))
                continue;
            for (k += 10; k < b.len && (s[k] == '"' || s[k] == ':' || s[k] == ' ' || s[k] == '\'');
                 k++)
                ;
            v = q_number(s + k, b.len - k, &used);
            break;
        }
        if (v)
            q_add_limit(f,
                        tokens ? (day ? GW_QUOTA_TPD : GW_QUOTA_TPM)
                               : (day ? GW_QUOTA_RPD : GW_QUOTA_RPM),
                        v, "body: quotaId ", s + st, end - st);
    }
}

/* A "key": "123" pair inside the body (OpenRouter's metadata.headers); 0 used = none. */
static struct gw_str
q_body_value(struct gw_str b, const char *key)
{
    const char *s = b.ptr;
    size_t k = strlen(key);

    for (size_t i = 0; i + k < b.len; i++) {
        size_t j, st;

        if (!q_at(s + i, b.len - i, key) || s[i + k] != '"')
            continue;
        for (j = i + k + 1; j < b.len && (s[j] == '"' || s[j] == ':' || s[j] == ' '); j++)
            ;
        for (st = j; j < b.len && q_is_digit(s[j]); j++)
            ;
        return (struct gw_str){s + st, j - st};
    }
    return (struct gw_str){"", 0};
}

/* The window the body names for OpenRouter's plain X-RateLimit-* and the phrases that say
 * a day quota is spent; -1 when none. */
static int
q_body_named_window(struct gw_str b, struct gw_quota_facts *f)
{
    int w = -1;

    for (size_t i = 0; i < b.len; i++) {
        const char *s = b.ptr + i;
        size_t n = b.len - i;

        if (q_at(s, n, "free-models-per-day")) {
            w = GW_QUOTA_RPD;
            f->day_exhausted = true;
        } else if (q_at(s, n, "free-models-per-min")) {
            if (w < 0)
                w = GW_QUOTA_RPM;
        } else if (q_at(s, n, "per day limit exceeded") || q_at(s, n, "requests per day per") ||
                   q_at(s, n, "daily limit") || q_at(s, n, "per day per user")) {
            f->day_exhausted = true;
        }
    }
    return w;
}

/* ---- entry ---- */

enum gw_quota_vendor
gw_quota_vendor_of_host(const char *host)
{
    size_t n = host ? strlen(host) : 0;

    if (n >= 8 && q_at(host + n - 8, 8, "groq.com") && (n == 8 || host[n - 9] == '.'))
        return GW_QUOTA_VENDOR_GROQ;
    return GW_QUOTA_VENDOR_GENERIC;
}

void
gw_quota_learn(enum gw_quota_vendor v, const struct gw_quota_header *h, size_t n,
               struct gw_str body, uint64_t now_ms, struct gw_quota_facts *out)
{
    struct gw_quota_header plain[3];
    struct gw_str ra = {"", 0}, ra_ms = {"", 0}, b;
    char buf[Q_BODY_MAX];
    int named;

    memset(out, 0, sizeof(*out));
    memset(plain, 0, sizeof(plain));
    b = body.len ? q_unescape(body, buf, sizeof(buf)) : body;
    for (size_t i = 0; i < n; i++) {
        if (q_name_eq(h[i].name, "retry-after"))
            ra = h[i].value;
        else if (q_name_eq(h[i].name, "retry-after-ms"))
            ra_ms = h[i].value;
        else
            q_header(v, h[i].name, h[i].value, now_ms, out, plain);
    }
    if (b.len) {
        q_body_limit_words(b, out);
        q_body_n_per(b, out);
        q_body_gemini(b, out);
    }
    named = b.len ? q_body_named_window(b, out) : -1;
    if (named >= 0) {
        static const char *const keys[] = {"x-ratelimit-limit", "x-ratelimit-remaining",
                                           "x-ratelimit-reset"};

        for (int k = 0; k < 3; k++) {
            struct gw_str val = plain[k].name.len ? plain[k].value : q_body_value(b, keys[k]);
            struct gw_str nm = plain[k].name.len ? plain[k].name : gw_str_c(keys[k]);

            if (val.len)
                q_apply(out, (enum gw_quota_win)named, (enum q_kind)k, nm, val, now_ms);
        }
    }
    out->retry_after_ms = gw_retry_after_ms(ra, ra_ms, b, now_ms);
}
