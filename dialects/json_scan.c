/* SPDX-License-Identifier: MIT
 * dialects/json_scan.c - a validating, allocation-free, single-pass JSON scanner.
 * Accepts what jansson's json_loadb(JSON_ALLOW_NUL) accepts (the differential check in
 * tests/fuzz/fuzz_openai.c holds it to that) at a small fraction of the cost: no tree,
 * no hashtable, no copies. Plain string bytes are checked sixteen at a time (eight
 * without SSE2). The common cases (a plain string, a short number, a member with a plain
 * key, a scalar skipped) run without a call that saves registers; the rest is in the
 * *_rest functions, out of line.
 * Allocates only to hand strtod a copy of a real number longer than 128 bytes.
 * Owns:    nothing beyond one call.
 * Threads: any; never blocks.
 * See:     dialects/json_scan.h, dialects/openai.c, tests/fuzz/fuzz_openai.c,
 *          tests/unit/dialects/test_json_scan.c, docs/perf.md
 */
#include "dialects/json_scan.h"

#include <errno.h>
#include <math.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>

#include "core/alloc.h"

bool
dl_json_fail(struct dl_json *j, enum dl_json_err e)
{
    if (j->err == DL_JSON_OK) {
        j->err = e;
        j->err_at = j->i;
    }
    return false;
}

static bool
fail_at(struct dl_json *j, size_t at, enum dl_json_err e)
{
    if (j->err == DL_JSON_OK)
        j->i = at;
    return dl_json_fail(j, e);
}

/* ---- strings ---- */

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Non-zero when one of the 8 bytes of <v> needs a look: '"', '\\', a control byte
 * (< 0x20) or a non-ASCII byte. Exact about presence; which byte is left to the
 * byte-wise loop. */
static inline uint64_t
swar_special(uint64_t v)
{
    uint64_t q = v ^ (ONES * '"'), b = v ^ (ONES * '\\');

    return (v | ((q - ONES) & ~q) | ((b - ONES) & ~b) | ((v - ONES * 0x20) & ~v)) & HIGHS;
}

#ifdef __SSE2__
/* One bit per byte of the 16 at <p> that needs a look: '"', '\\', and, through a signed
 * compare below 0x20, control bytes and (as negative) every byte from 0x80. */
static inline unsigned
sse_special(const unsigned char *p)
{
    __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
    __m128i hit = _mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
        _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)));

    return (unsigned)_mm_movemask_epi8(hit);
}
#endif

static int
hex4(const unsigned char *p)
{
    int v = 0, k;

    for (k = 0; k < 4; k++) {
        int c = p[k], d;

        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return -1;
        v = v << 4 | d;
    }
    return v;
}

/* Length of the valid UTF-8 sequence at <p> (lead byte >= 0x80), or 0. The same rules as
 * jansson's utf8_check_full: no overlong forms, no surrogates, nothing past U+10FFFF. */
static size_t
utf8_seq(const unsigned char *p, size_t avail)
{
    unsigned c = p[0];

#define CONT(x) ((x) >= 0x80 && (x) <= 0xBF)
    if (c >= 0xC2 && c <= 0xDF)
        return avail >= 2 && CONT(p[1]) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        if (avail < 3 || !CONT(p[1]) || !CONT(p[2]))
            return 0;
        if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0))
            return 0;
        return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        if (avail < 4 || !CONT(p[1]) || !CONT(p[2]) || !CONT(p[3]))
            return 0;
        if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90))
            return 0;
        return 4;
    }
#undef CONT
    return 0;
}

/* The rest of the string from <i>, every byte before it plain ASCII: escapes, UTF-8,
 * the last bytes of the document, errors. Kept out of line so that dl_json_string's
 * common case saves no registers. */
static __attribute__((noinline)) bool
string_rest(struct dl_json *j, struct dl_json_str *o, size_t i)
{
    const unsigned char *s = (const unsigned char *)j->s;
    size_t n = j->n, adj = 0, ext = 0;

    for (;;) {
        unsigned c;

#ifdef __SSE2__
        /* 16 plain bytes at a time */
        while (i + 16 <= n) {
            unsigned m = sse_special(s + i);

            if (m) {
                i += (size_t)__builtin_ctz(m);
                goto special;
            }
            i += 16;
        }
#endif
        while (i + 8 <= n) {
            uint64_t v, m;

            memcpy(&v, s + i, 8);
            m = swar_special(v);
            if (m) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                /* the lowest flag is exact (false flags only sit above a true one) */
                i += (size_t)__builtin_ctzll(m) / 8;
#endif
                break;
            }
            i += 8;
        }
#ifdef __SSE2__
    special:
#endif
        if (i >= n)
            return fail_at(j, n, DL_JSON_E_SYNTAX);
        c = s[i];
        if (c == '"')
            break;
        if (c < 0x20)
            return fail_at(j, i, DL_JSON_E_SYNTAX);
        if (c < 0x80 && c != '\\') {
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = utf8_seq(s + i, n - i);

            if (!k)
                return fail_at(j, i, DL_JSON_E_SYNTAX);
            i += k;
            continue;
        }
        /* an escape: raw bytes minus decoded bytes go to <adj>; bytes jansson's dump
         * writes beyond the decoded ones go to <ext> */
        o->escaped = true;
        if (i + 1 >= n)
            return fail_at(j, n, DL_JSON_E_SYNTAX);
        switch (s[i + 1]) {
        case '"':
        case '\\':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
            ext++;
            /* fall through */
        case '/':
            adj++;
            i += 2;
            continue;
        case 'u': break;
        default: return fail_at(j, i + 1, DL_JSON_E_SYNTAX);
        }
        {
            int v = i + 6 <= n ? hex4(s + i + 2) : -1, lo;

            if (v < 0)
                return fail_at(j, i, DL_JSON_E_SYNTAX);
            if (v >= 0xD800 && v <= 0xDBFF) {
                if (i + 12 > n || s[i + 6] != '\\' || s[i + 7] != 'u')
                    return fail_at(j, i, DL_JSON_E_SYNTAX);
                lo = hex4(s + i + 8);
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail_at(j, i, DL_JSON_E_SYNTAX);
                adj += 12 - 4;
                i += 12;
                continue;
            }
            if (v >= 0xDC00 && v <= 0xDFFF)
                return fail_at(j, i, DL_JSON_E_SYNTAX);
            if (v == 0)
                o->nul = true;
            if (v < 0x20)
                ext += (v == '\b' || v == '\f' || v == '\n' || v == '\r' || v == '\t') ? 1 : 5;
            else if (v == '"' || v == '\\')
                ext++;
            adj += 6 - (v < 0x80 ? 1 : v < 0x800 ? 2 : 3);
            i += 6;
        }
    }
    o->end = i;
    o->dlen = i - o->start - adj;
    o->jlen = o->dlen + ext;
    j->i = i + 1;
    return true;
}

/* The common string: plain ASCII up to its quote, a block at a time (the same test as
 * string_rest's). True with *<ip> on the closing quote; false with *<ip> on the first
 * byte that needs a look, or where less than a block is left: string_rest's from there. */
static inline bool
plain_string(const unsigned char *s, size_t n, size_t *ip)
{
    size_t i = *ip;

#ifdef __SSE2__
    while (i + 16 <= n) {
        unsigned m = sse_special(s + i);

        if (m) {
            i += (size_t)__builtin_ctz(m);
            *ip = i;
            return s[i] == '"';
        }
        i += 16;
    }
#endif
    *ip = i;
    return false;
}

/* dl_json_string's body, inlined where a string is met most (object keys, skips). */
static inline bool
string_at(struct dl_json *j, struct dl_json_str *o)
{
    size_t start = j->i + 1, i = start;

    o->start = start;
    o->escaped = false;
    o->nul = false;
    if (!plain_string((const unsigned char *)j->s, j->n, &i))
        return string_rest(j, o, i);
    o->end = i;
    o->dlen = o->jlen = i - start;
    j->i = i + 1;
    return true;
}

bool
dl_json_string(struct dl_json *j, struct dl_json_str *o)
{
    return string_at(j, o);
}

static size_t
utf8_put(char *d, unsigned v)
{
    if (v < 0x80) {
        d[0] = (char)v;
        return 1;
    }
    if (v < 0x800) {
        d[0] = (char)(0xC0 | v >> 6);
        d[1] = (char)(0x80 | (v & 0x3F));
        return 2;
    }
    if (v < 0x10000) {
        d[0] = (char)(0xE0 | v >> 12);
        d[1] = (char)(0x80 | (v >> 6 & 0x3F));
        d[2] = (char)(0x80 | (v & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | v >> 18);
    d[1] = (char)(0x80 | (v >> 12 & 0x3F));
    d[2] = (char)(0x80 | (v >> 6 & 0x3F));
    d[3] = (char)(0x80 | (v & 0x3F));
    return 4;
}

/* Bytes of the UTF-8 sequence whose first byte is <c> (validated input). */
static size_t
utf8_seq_len(unsigned char c)
{
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

size_t
dl_json_decode_part(const struct dl_json *j, const struct dl_json_str *str, size_t *at, char *dst,
                    size_t cap)
{
    const unsigned char *s = (const unsigned char *)j->s;
    size_t i = *at, d = 0;

    /* every step writes at most 4 bytes: stop while one more surely fits */
    while (i < str->end && d + 4 <= cap) {
        unsigned v;

        if (s[i] != '\\') {
            size_t n = utf8_seq_len(s[i]);

            memcpy(dst + d, s + i, n);
            d += n;
            i += n;
            continue;
        }
        switch (s[i + 1]) {
        case 'b': v = '\b'; break;
        case 'f': v = '\f'; break;
        case 'n': v = '\n'; break;
        case 'r': v = '\r'; break;
        case 't': v = '\t'; break;
        case 'u':
            v = (unsigned)hex4(s + i + 2);
            if (v >= 0xD800 && v <= 0xDBFF) {
                v = 0x10000 + ((v - 0xD800) << 10) + ((unsigned)hex4(s + i + 8) - 0xDC00);
                i += 6;
            }
            d += utf8_put(dst + d, v);
            i += 6;
            continue;
        default: /* '"', '\\', '/' */ v = s[i + 1]; break;
        }
        dst[d++] = (char)v;
        i += 2;
    }
    *at = i;
    return d;
}

void
dl_json_decode(const struct dl_json *j, const struct dl_json_str *str, char *dst)
{
    size_t at = str->start;

    if (!str->escaped)
        memcpy(dst, j->s + at, str->end - at);
    else
        dl_json_decode_part(j, str, &at, dst, SIZE_MAX); /* all of it in one piece */
}

bool
dl_json_text_get(struct dl_json_text *x, const struct dl_json *j, const struct dl_json_str *str)
{
    char *dst = x->stack;

    x->heap = NULL;
    x->s = (struct gw_str){"", 0};
    if (!str)
        return true;
    if (!str->escaped) {
        x->s = (struct gw_str){j->s + str->start, str->dlen};
        return true;
    }
    if (str->dlen > sizeof(x->stack)) {
        dst = x->heap = gw_malloc(str->dlen);
        if (!dst)
            return false;
    }
    dl_json_decode(j, str, dst);
    x->s = (struct gw_str){dst, str->dlen};
    return true;
}

void
dl_json_text_fini(struct dl_json_text *x)
{
    gw_free(x->heap);
    x->heap = NULL;
}

bool
dl_json_str_eq_slow(const struct dl_json *j, const struct dl_json_str *str, const char *lit,
                    size_t len)
{
    char buf[64];

    if (str->dlen != len || len > sizeof(buf))
        return false;
    dl_json_decode(j, str, buf);
    return memcmp(buf, lit, len) == 0;
}

/* ---- numbers ---- */

static inline bool
is_digit(int c)
{
    return c >= '0' && c <= '9';
}

bool
dl_json_num_real(struct dl_json *j, const struct dl_json_num *num, double *out)
{
    char stack[128], *p = stack;
    size_t len = num->end - num->start;

    if (len >= sizeof(stack)) {
        p = gw_malloc(len + 1);
        if (!p)
            return dl_json_fail(j, DL_JSON_E_NOMEM);
    }
    memcpy(p, j->s + num->start, len);
    p[len] = '\0';
    errno = 0;
    *out = strtod(p, NULL);
    if (p != stack) {
        int e = errno; /* for the caller's overflow test */

        gw_free(p);
        errno = e;
    }
    return true;
}

/* dl_json_number's whole grammar and range checks. */
static __attribute__((noinline)) bool
number_rest(struct dl_json *j, struct dl_json_num *o)
{
    const char *s = j->s;
    size_t n = j->n, i = j->i, lead;
    bool neg = false;
    long exp = 0, mag;

    o->start = i;
    o->real = false;
    if (i < n && s[i] == '-') {
        neg = true;
        i++;
    }
    lead = i;
    if (i < n && s[i] == '0') {
        i++;
        if (i < n && is_digit(s[i]))
            return fail_at(j, i, DL_JSON_E_SYNTAX);
    } else if (i < n && is_digit(s[i])) {
        while (i < n && is_digit(s[i]))
            i++;
    } else {
        return fail_at(j, i, DL_JSON_E_SYNTAX);
    }
    mag = s[lead] == '0' ? 0 : (long)(i - lead);
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || !is_digit(s[i]))
            return fail_at(j, i, DL_JSON_E_SYNTAX);
        while (i < n && is_digit(s[i]))
            i++;
        o->real = true;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        bool eneg = false;

        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        if (i >= n || !is_digit(s[i]))
            return fail_at(j, i, DL_JSON_E_SYNTAX);
        while (i < n && is_digit(s[i])) {
            if (exp < 1000000)
                exp = exp * 10 + (s[i] - '0');
            i++;
        }
        if (eneg)
            exp = -exp;
        o->real = true;
    }
    o->end = i;
    j->i = i;
    /* jansson's lexer has read (and UTF-8 checked) the byte after the number before it
     * judges the range: a bad sequence there is the error it reports */
    if (i < n && (unsigned char)s[i] >= 0x80 && !utf8_seq((const unsigned char *)s + i, n - i))
        return dl_json_fail(j, DL_JSON_E_SYNTAX);
    if (!o->real) {
        size_t nd = i - lead;

        /* jansson reads integers with strtoll: beyond int64 is an overflow */
        if (nd > 19 ||
            (nd == 19 &&
             memcmp(s + lead, neg ? "9223372036854775808" : "9223372036854775807", 19) > 0))
            return dl_json_fail(j, DL_JSON_E_RANGE);
        return true;
    }
    /* Below 10^308 a double cannot overflow; only then ask strtod, as jansson does. */
    if (mag > 1000000000L || mag + exp > 308) {
        double v;

        if (!dl_json_num_real(j, o, &v))
            return false;
        if ((v == HUGE_VAL || v == -HUGE_VAL) && errno == ERANGE)
            return dl_json_fail(j, DL_JSON_E_RANGE);
    }
    return true;
}

/* The end of the run of digits at <i>: eight bytes at a time (a byte is a digit when its
 * high nibble is 3, and still is once 6 is added), then one at a time. */
static inline size_t
digits_end(const char *s, size_t n, size_t i)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (i + 8 <= n) {
        uint64_t v, x;

        memcpy(&v, s + i, 8);
        /* non-zero bytes where a byte is not a digit; a carry of v + 6s only runs into
         * bytes above a non-digit, and only the lowest one counts */
        x = ((v & ONES * 0xF0) ^ ONES * 0x30) | (((v + ONES * 6) & ONES * 0xF0) ^ ONES * 0x30);
        x = (x | ((x & ONES * 0x7F) + ONES * 0x7F)) & HIGHS;
        if (x)
            return i + (size_t)__builtin_ctzll(x) / 8;
        i += 8;
    }
#endif
    while (i < n && is_digit(s[i]))
        i++;
    return i;
}

/* number_at's end: <i> past the integer part of the number at <start>; the fraction
 * (which tends to be long: a logprob has 16 digits) eight digits at a time. Out of line
 * and a leaf, so that its constants take no register from an integer's path. */
static __attribute__((noinline)) bool
number_end(struct dl_json *j, struct dl_json_num *o, size_t start, size_t i)
{
    const char *s = j->s;
    size_t n = j->n;
    bool real = false;
    unsigned char c;

    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || !is_digit(s[i]))
            return number_rest(j, o);
        i = digits_end(s, n, i + 1);
        real = true;
    }
    if (i < n) {
        c = (unsigned char)s[i];
        if (is_digit(c) || c == '.' || c == 'e' || c == 'E' || c >= 0x80)
            return number_rest(j, o);
    }
    o->start = start;
    o->end = i;
    o->real = real;
    j->i = i;
    return true;
}

/* The common number decided here: an integer part of at most 18 digits (an integer is
 * then in range, and so is a real without an exponent), an optional fraction, no
 * exponent, followed by what cannot continue a number nor be a bad UTF-8 sequence.
 * Anything else is number_rest's from the number's first byte. */
static inline __attribute__((always_inline)) bool
number_at(struct dl_json *j, struct dl_json_num *o)
{
    const char *s = j->s;
    size_t n = j->n, start = j->i, i = start, lead;

    if (i < n && s[i] == '-')
        i++;
    lead = i;
    if (i >= n || !is_digit(s[i]))
        return number_rest(j, o);
    if (s[i++] != '0') /* short, as a rule */
        while (i < n && is_digit(s[i]))
            i++;
    if (i - lead > 18)
        return number_rest(j, o);
    if (i >= n ||
        ((unsigned char)s[i] < 0x80 && !is_digit(s[i]) && s[i] != '.' && (s[i] | 0x20) != 'e')) {
        o->start = start;
        o->end = i;
        o->real = false;
        j->i = i;
        return true;
    }
    return number_end(j, o, start, i);
}

bool
dl_json_number(struct dl_json *j, struct dl_json_num *o)
{
    return number_at(j, o);
}

bool
dl_json_num_count(struct dl_json *j, const struct dl_json_num *num, uint64_t *out)
{
    const char *s = j->s;
    double v;

    *out = 0;
    if (!num->real) {
        size_t i = num->start;
        uint64_t x = 0;

        if (s[i] == '-')
            return true;
        for (; i < num->end; i++)
            x = x * 10 + (uint64_t)(s[i] - '0'); /* in range: at most INT64_MAX */
        *out = x;
        return true;
    }
    if (!dl_json_num_real(j, num, &v))
        return false;
    if (v > 0 && v < 1.8e19)
        *out = (uint64_t)v;
    return true;
}

/* Bytes jansson's dump writes for a number: integers as written except -0; reals
 * through "%.17g", a ".0" when that reads as an integer, exponent without '+' or
 * leading zeros (jansson's jsonp_dtostr). */
static bool
number_dump_len(struct dl_json *j, const struct dl_json_num *num, size_t *out)
{
    char buf[64], *e;
    double v;
    int len;

    if (!num->real) {
        *out =
            (num->end - num->start == 2 && j->s[num->start] == '-' && j->s[num->start + 1] == '0')
                ? 1
                : num->end - num->start;
        return true;
    }
    if (!dl_json_num_real(j, num, &v))
        return false;
    len = snprintf(buf, sizeof(buf), "%.17g", v);
    if (len < 0 || (size_t)len >= sizeof(buf) - 3) {
        *out = 0;
        return true;
    }
    if (!strchr(buf, '.') && !strchr(buf, 'e'))
        len += 2;
    e = strchr(buf, 'e');
    if (e) {
        char *start = e + 1, *end = e + 2;

        if (*start == '-')
            start++;
        while (*end == '0')
            end++;
        len -= (int)(end - start);
    }
    *out = (size_t)len;
    return true;
}

/* ---- containers ---- */

/* A structural byte (',', ':', a closing bracket, a key, the end) was expected at the
 * cursor. jansson lexes a whole token there before it judges the grammar, so a number
 * that overflows is the error it reports: so does this. */
static bool
fail_token(struct dl_json *j)
{
    int c = dl_json_peek(j);

    if (c == '-' || is_digit(c)) {
        struct dl_json_num num;
        size_t at = j->i;

        if (!dl_json_number(j, &num))
            return false;
        j->i = at;
    }
    return dl_json_fail(j, DL_JSON_E_SYNTAX);
}

/* dl_json_skip's stack: one bit per open level, 1 for an object. */
static inline bool
level_is_obj(const unsigned char *stack, unsigned level)
{
    return (stack[level / 8] >> (level % 8)) & 1;
}

/* Past the whitespace at *<ip>: the next other byte (0..255) with *<ip> on it, or -1 with
 * *<ip> at <n>. Compact JSON has none: every whitespace byte is <= ' ', so one test
 * decides the common case. */
static inline int
peek_at(const char *s, size_t n, size_t *ip)
{
    size_t i;

    for (i = *ip; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c > ' ' || (c != ' ' && c != '\n' && c != '\r' && c != '\t')) {
            *ip = i;
            return c;
        }
    }
    *ip = i;
    return -1;
}

/* dl_json_obj_next's error return, the cursor where a structural byte was expected. */
static __attribute__((noinline)) int
member_fail(struct dl_json *j, size_t i)
{
    j->i = i;
    fail_token(j);
    return -1;
}

/* dl_json_obj_next from a key that is not plain ASCII (or ends the document's last
 * block) to the member's value: the key's rest from <i>, then ':'. */
static __attribute__((noinline)) int
member_rest(struct dl_json *j, struct dl_json_str *key, size_t i)
{
    if (!string_rest(j, key, i))
        return -1;
    if (key->nul) /* jansson: "NUL byte in object key not supported" */
        return fail_at(j, key->start, DL_JSON_E_SYNTAX), -1;
    i = j->i;
    if (peek_at(j->s, j->n, &i) != ':')
        return member_fail(j, i);
    i++;
    (void)peek_at(j->s, j->n, &i);
    j->i = i;
    return 1;
}

/* Every call but those of errors and unusual keys is a tail call: the common member
 * (plain key, compact or not) saves no registers. */
int
dl_json_obj_next(struct dl_json *j, bool *first, struct dl_json_str *key)
{
    const char *s = j->s;
    size_t n = j->n, i = j->i, start;
    int c = peek_at(s, n, &i);

    if (c == '}') {
        j->i = i + 1;
        j->depth--;
        return 0;
    }
    if (!*first) {
        if (c != ',')
            return member_fail(j, i);
        i++;
        c = peek_at(s, n, &i);
    }
    *first = false;
    if (c != '"')
        return member_fail(j, i);
    start = i + 1;
    key->start = start;
    key->escaped = false;
    key->nul = false;
    i = start;
    if (!plain_string((const unsigned char *)s, n, &i))
        return member_rest(j, key, i);
    key->end = i;
    key->dlen = key->jlen = i - start;
    i++;
    if (peek_at(s, n, &i) != ':')
        return member_fail(j, i);
    i++;
    (void)peek_at(s, n, &i);
    j->i = i;
    return 1;
}

int
dl_json_arr_next(struct dl_json *j, bool *first)
{
    const char *s = j->s;
    size_t n = j->n, i = j->i;
    int c = peek_at(s, n, &i);

    if (c == ']') {
        j->i = i + 1;
        j->depth--;
        return 0;
    }
    if (!*first) {
        if (c != ',')
            return member_fail(j, i);
        i++;
        (void)peek_at(s, n, &i);
    }
    *first = false;
    j->i = i;
    return 1;
}

bool
dl_json_end(struct dl_json *j)
{
    if (j->err)
        return false;
    if (dl_json_peek(j) != -1)
        return fail_token(j);
    return true;
}

static bool
literal(struct dl_json *j, const char *word, size_t len)
{
    if (j->n - j->i < len || memcmp(j->s + j->i, word, len) != 0)
        return dl_json_fail(j, DL_JSON_E_SYNTAX);
    j->i += len;
    return true;
}

/* One scalar value (string, number, literal) at the cursor; <*add> its dump bytes when
 * <want_len>. */
static bool
scalar(struct dl_json *j, int c, bool want_len, size_t *add)
{
    struct dl_json_str str;
    struct dl_json_num num;

    switch (c) {
    case '"':
        if (!dl_json_string(j, &str))
            return false;
        *add = str.jlen + 2;
        return true;
    case 't': *add = 4; return literal(j, "true", 4);
    case 'f': *add = 5; return literal(j, "false", 5);
    case 'n': *add = 4; return literal(j, "null", 4);
    default:
        if (c != '-' && !is_digit(c))
            return dl_json_fail(j, DL_JSON_E_SYNTAX);
        if (!dl_json_number(j, &num))
            return false;
        if (want_len)
            return number_dump_len(j, &num, add);
        *add = 0;
        return true;
    }
}

static inline bool
is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* True when the bytes at <p> start a sequence that is not UTF-8 (jansson's reader
 * refuses it whatever the lexer wanted there). */
static bool
bad_utf8_at(const unsigned char *s, size_t n, size_t p)
{
    return p < n && s[p] >= 0x80 && !utf8_seq(s + p, n - p);
}

/* A value where DL_JSON_MAX_DEPTH containers are open, its first byte <c> at the cursor;
 * always false. jansson counts a scalar as a level of its own, and lexes a token before
 * it judges the depth: only an error of its lexer comes first (a byte it read that is
 * not UTF-8, a bad string, a number out of range: a libFuzzer find); any other token
 * there, even an invalid one, is too deep, and so is the end of the bytes, except in an
 * array (<in_array>), whose parser wants its ']' first (another libFuzzer find). */
static bool
too_deep(struct dl_json *j, int c, bool in_array)
{
    const unsigned char *s = (const unsigned char *)j->s;
    size_t n = j->n, i = j->i;

    if (c == '"') {
        struct dl_json_str str;

        if (!string_at(j, &str))
            return false;
    } else if (c == '-' || is_digit(c)) {
        struct dl_json_num num;

        if (!dl_json_number(j, &num)) {
            /* a number's grammar fails at the byte jansson's lexer stopped at, without an
             * error of its own unless that byte is not UTF-8 */
            if (j->err != DL_JSON_E_SYNTAX || bad_utf8_at(s, n, j->err_at))
                return false;
            j->err = DL_JSON_OK;
        }
    } else if (is_alpha(c)) { /* jansson reads a whole identifier and the byte after it */
        while (i < n && is_alpha(s[i]))
            i++;
        j->i = i;
        if (bad_utf8_at(s, n, i))
            return dl_json_fail(j, DL_JSON_E_SYNTAX);
    } else if ((c == -1 && in_array) || (c >= 0x80 && bad_utf8_at(s, n, i))) {
        return dl_json_fail(j, DL_JSON_E_SYNTAX);
    }
    return dl_json_fail(j, DL_JSON_E_DEPTH);
}

/* dl_json_skip of any value, the cursor on its first byte <c>. */
static __attribute__((noinline)) bool
skip_value(struct dl_json *j, int c, size_t *compact)
{
    /* one bit per open level below the cursor's depth: 1 for an object */
    unsigned char stack[DL_JSON_MAX_DEPTH / 8];
    const char *s = j->s;
    size_t n = j->n, i = j->i, len = 0, add;
    unsigned base = j->depth, sp = 0;
    struct dl_json_str str;
    bool obj = false; /* the innermost open level is an object (when sp > 0) */

    /* The cursor is <i> here; j->i is set from it before any call that reads it or may
     * fail, so errors are recorded where they were. */
value:
    if (c == '{' || c == '[') {
        if (base + sp >= DL_JSON_MAX_DEPTH) {
            j->i = i;
            return dl_json_fail(j, DL_JSON_E_DEPTH);
        }
        obj = c == '{';
        if (obj)
            stack[sp / 8] |= (unsigned char)(1u << (sp % 8));
        else
            stack[sp / 8] &= (unsigned char)~(1u << (sp % 8));
        sp++;
        i++;
        len += 2;
        c = peek_at(s, n, &i);
        if (c == (obj ? '}' : ']'))
            goto close;
        if (obj)
            goto member;
        goto value;
    }
    j->i = i;
    if (base + sp >= DL_JSON_MAX_DEPTH)
        return too_deep(j, c, sp > 0 && !obj);
    if (c == '"') {
        if (!string_at(j, &str))
            return false;
        len += str.jlen + 2;
    } else if (!compact && (c == '-' || is_digit(c))) {
        struct dl_json_num num;

        if (!number_at(j, &num))
            return false;
    } else {
        if (!scalar(j, c, compact != NULL, &add))
            return false;
        len += add;
    }
    i = j->i;
after:
    if (sp == 0) {
        j->i = i;
        if (compact)
            *compact += len;
        return true;
    }
    c = peek_at(s, n, &i);
    if (c == ',') {
        i++;
        len++;
        c = peek_at(s, n, &i);
        if (obj)
            goto member;
        goto value;
    }
    if (c != (obj ? '}' : ']')) {
        j->i = i;
        return fail_token(j);
    }
close:
    i++;
    if (--sp)
        obj = level_is_obj(stack, sp - 1);
    goto after;
member:
    j->i = i;
    if (c != '"')
        return fail_token(j);
    if (!string_at(j, &str))
        return false;
    if (str.nul)
        return fail_at(j, str.start, DL_JSON_E_SYNTAX);
    i = j->i;
    if (peek_at(s, n, &i) != ':') {
        j->i = i;
        return fail_token(j);
    }
    i++;
    len += str.jlen + 3;
    c = peek_at(s, n, &i);
    goto value;
}

/* The common skips, scalars, without skip_value's frame. (A scalar at the depth limit is
 * skip_value's: jansson counts it as a level of its own.) */
bool
dl_json_skip(struct dl_json *j, size_t *compact)
{
    int c = dl_json_peek(j);

    if (j->depth < DL_JSON_MAX_DEPTH && !compact) {
        if (c == '"') {
            struct dl_json_str str;

            return string_at(j, &str);
        }
        if (c == '-' || is_digit(c)) {
            struct dl_json_num num;

            return dl_json_number(j, &num);
        }
        if (c == 't' || c == 'n')
            return literal(j, c == 't' ? "true" : "null", 4);
        if (c == 'f')
            return literal(j, "false", 5);
    }
    return skip_value(j, c, compact);
}

/* ---- errors ---- */

void
dl_json_err_pos(const struct dl_json *j, int *line, int *column)
{
    size_t i, end = j->err_at < j->n ? j->err_at + 1 : j->n;
    int l = 1, col = 0;

    for (i = 0; i < end; i++) {
        unsigned char c = (unsigned char)j->s[i];

        if (c == '\n') {
            l++;
            col = 0;
        } else if (c < 0x80 || c >= 0xC0) {
            col++;
        }
    }
    *line = l;
    *column = col;
}

static bool
is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool
dl_json_is_object(struct gw_str s, struct gw_str *trimmed)
{
    struct dl_json j;

    while (s.len && is_ws(s.ptr[0])) {
        s.ptr++;
        s.len--;
    }
    while (s.len && is_ws(s.ptr[s.len - 1]))
        s.len--;
    if (trimmed)
        *trimmed = s;
    dl_json_init(&j, s.ptr, s.len);
    return dl_json_peek(&j) == '{' && dl_json_skip(&j, NULL) && dl_json_end(&j);
}

enum gw_code
dl_vrefuse(struct gw_buf *why, enum gw_code code, const char *fmt, va_list ap)
{
    if (why && gw_buf_vprintf(why, fmt, ap) != GW_OK)
        return GW_E_NOMEM;
    return code;
}

enum gw_code
dl_refuse_json(struct gw_buf *why, const struct dl_json *j)
{
    int line, column;

    if (j->err == DL_JSON_E_NOMEM)
        return GW_E_NOMEM;
    dl_json_err_pos(j, &line, &column);
    if (why && gw_buf_printf(why, "body: %s at line %d column %d",
                             j->err == DL_JSON_E_RANGE   ? "number out of range"
                             : j->err == DL_JSON_E_DEPTH ? "nested too deep"
                                                         : "not valid JSON",
                             line, column) != GW_OK)
        return GW_E_NOMEM;
    return GW_E_BAD_REQUEST;
}

struct gw_str
dl_json_text(const struct dl_json *j, const struct dl_json_str *t, struct gw_arena *a)
{
    char *p;

    if (!t->escaped)
        return (struct gw_str){j->s + t->start, t->dlen};
    p = gw_arena_alloc(a, t->dlen + 1);
    if (!p)
        return (struct gw_str){NULL, 0};
    dl_json_decode(j, t, p);
    p[t->dlen] = '\0';
    return (struct gw_str){p, t->dlen};
}

bool
dl_json_int(const struct dl_json *j, const struct dl_json_num *num, int64_t *out)
{
    size_t i = num->start;
    bool neg = false;
    uint64_t v = 0;

    if (num->real)
        return false;
    if (j->s[i] == '-') {
        neg = true;
        i++;
    }
    for (; i < num->end; i++)
        v = v * 10 + (uint64_t)(j->s[i] - '0'); /* validated: fits int64 */
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}
