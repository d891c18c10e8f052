/* SPDX-License-Identifier: MIT
 * core/str.c - slices, growable buffers, hex and constant-time compare.
 * Owns:    the data of each gw_buf.
 * Threads: any.
 * See:     core/str.h, tests/unit/core/test_str.c
 */
#include "core/str.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "core/alloc.h"

static bool
bytes_eq_nocase(const char *a, const char *b, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        unsigned char x = (unsigned char)a[i], y = (unsigned char)b[i];

        if (x == y)
            continue;
        if ((x | 32u) != (y | 32u) || (unsigned char)((x | 32u) - 'a') >= 26u)
            return false;
    }
    return true;
}

#define ONES8 0x0101010101010101ULL
#define HIGHS8 0x8080808080808080ULL

/* Eight bytes at <a> and <b> equal after ASCII lowering. Equal words (the common case:
 * header names mostly come in the case they are compared with) take one compare; else,
 * for ASCII bytes, every difference must be the case bit of a letter: with t = x | 0x20
 * per byte, t + 0x1f sets a byte's high bit from 'a' up and t + 0x05 from '{' up (no
 * byte carries: t <= 0x7f), so their difference marks the letters. */
static inline bool
word_eq_nocase(const char *a, const char *b)
{
    uint64_t x, y, t, letters;

    memcpy(&x, a, 8);
    memcpy(&y, b, 8);
    if (x == y)
        return true;
    if ((x | y) & HIGHS8)
        return bytes_eq_nocase(a, b, 8);
    t = x | (ONES8 * 0x20);
    letters = (t + ONES8 * 0x1f) & ~(t + ONES8 * 0x05) & HIGHS8;
    return ((x ^ y) & ~(letters >> 2)) == 0;
}

bool
gw_mem_eq_nocase(const char *a, const char *b, size_t n)
{
    size_t i;

    if (n < 8)
        return bytes_eq_nocase(a, b, n);
    /* Eight bytes a step; the last step overlaps the one before it. */
    for (i = 0; i + 8 < n; i += 8)
        if (!word_eq_nocase(a + i, b + i))
            return false;
    return word_eq_nocase(a + n - 8, b + n - 8);
}

struct gw_str
gw_str_trim(struct gw_str s)
{
    while (s.len && gw_is_blank(s.ptr[0])) {
        s.ptr++;
        s.len--;
    }
    while (s.len && gw_is_blank(s.ptr[s.len - 1]))
        s.len--;
    return s;
}

enum gw_code
gw_buf_reserve(struct gw_buf *b, size_t extra)
{
    size_t need = b->len + extra + 1, cap;
    char *d;

    if (need <= b->cap)
        return GW_OK;
    cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    d = gw_realloc(b->data, cap);
    if (!d)
        return GW_E_NOMEM;
    b->data = d;
    b->cap = cap;
    b->data[b->len] = '\0';
    return GW_OK;
}

enum gw_code
gw_buf_append_grow(struct gw_buf *b, const void *p, size_t n)
{
    if (gw_buf_reserve(b, n) != GW_OK)
        return GW_E_NOMEM;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return GW_OK;
}

enum gw_code
gw_buf_append_str(struct gw_buf *b, struct gw_str s)
{
    return gw_buf_append(b, s.ptr, s.len);
}

enum gw_code
gw_buf_vprintf(struct gw_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    int n;

    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || gw_buf_reserve(b, (size_t)n) != GW_OK)
        return GW_E_NOMEM;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
    return GW_OK;
}

enum gw_code
gw_buf_printf(struct gw_buf *b, const char *fmt, ...)
{
    va_list ap;
    enum gw_code rc;

    va_start(ap, fmt);
    rc = gw_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

size_t
gw_fmt_u64(char *dst, uint64_t v)
{
    /* two digits a division: the digits of 00 to 99 */
    static const char pairs[201] = "0001020304050607080910111213141516171819"
                                   "2021222324252627282930313233343536373839"
                                   "4041424344454647484950515253545556575859"
                                   "6061626364656667686970717273747576777879"
                                   "8081828384858687888990919293949596979899";
    char tmp[20];
    size_t n = 0;

    while (v >= 100) {
        unsigned r = (unsigned)(v % 100);

        v /= 100;
        n += 2;
        memcpy(tmp + sizeof(tmp) - n, pairs + 2 * r, 2);
    }
    if (v >= 10) {
        n += 2;
        memcpy(tmp + sizeof(tmp) - n, pairs + 2 * v, 2);
    } else {
        tmp[sizeof(tmp) - 1 - n++] = (char)('0' + v);
    }
    memcpy(dst, tmp + sizeof(tmp) - n, n);
    return n;
}

size_t
gw_fmt_hex_u64(char *dst, uint64_t v)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 1, k;

    while (n < 16 && v >> (4 * n))
        n++;
    for (k = n; k > 0; k--, v >>= 4)
        dst[k - 1] = hex[v & 15];
    return n;
}

/* <n> bytes of <s> at <at> of <dst> (<cap> bytes), as many as fit before a last byte
 * kept for the NUL. Returns where the next bytes go. */
static size_t
path_put(char *dst, size_t cap, size_t at, const char *s, size_t n)
{
    if (n > cap - 1 - at)
        n = cap - 1 - at;
    memcpy(dst + at, s, n);
    return at + n;
}

void
gw_path_join(char *dst, size_t cap, const char *prefix, const char *suffix)
{
    size_t at = path_put(dst, cap, 0, prefix, strlen(prefix));

    dst[path_put(dst, cap, at, suffix, strlen(suffix))] = '\0';
}

void
gw_path_item(char *dst, size_t cap, const char *prefix, size_t k, const char *suffix)
{
    char num[24];
    size_t at = path_put(dst, cap, 0, prefix, strlen(prefix));

    num[0] = '[';
    at = path_put(dst, cap, at, num, 1 + gw_fmt_u64(num + 1, k));
    at = path_put(dst, cap, at, "]", 1);
    dst[path_put(dst, cap, at, suffix, strlen(suffix))] = '\0';
}

enum gw_code
gw_buf_append_u64(struct gw_buf *b, uint64_t v)
{
    char tmp[20];

    return gw_buf_append(b, tmp, gw_fmt_u64(tmp, v));
}

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Of the eight bytes in <x> (the first in the low byte), the high bit of each that a JSON
 * string must escape ('"', '\\', below 0x20). A subtraction's borrow can mark a byte
 * above a marked one, never below: the lowest mark is exact, and only it is read. */
static inline uint64_t
escape_marks8(uint64_t x)
{
    const uint64_t ones = 0x0101010101010101u;
    uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');

    return (((x - ones * 0x20) & ~x) | ((q - ones) & ~q) | ((b - ones) & ~b)) & (ones * 0x80);
}
#endif

/* The length of the run at <p> (<n> bytes) that a JSON string holds as it is: no '"',
 * '\\' or control byte (below 0x20). Sixteen bytes at a time where SSE2 is there, the
 * rest eight at a time, the last eight overlapping bytes already read (a string's tail
 * is most of a short one). */
static size_t
unescaped_run(const unsigned char *p, size_t n)
{
    size_t i = 0;

#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
    const __m128i high3 = _mm_set1_epi8((char)0xe0), zero = _mm_setzero_si128();

    for (; i + 16 <= n; i += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
        /* a control byte has none of the three high bits */
        __m128i hit =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, bslash)),
                         _mm_cmpeq_epi8(_mm_and_si128(x, high3), zero));
        unsigned m = (unsigned)_mm_movemask_epi8(hit);

        if (m)
            return i + (size_t)__builtin_ctz(m);
    }
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n >= 8) {
        uint64_t x, m;

        for (; i + 8 <= n; i += 8) {
            memcpy(&x, p + i, 8);
            if ((m = escape_marks8(x)) != 0)
                return i + (size_t)__builtin_ctzll(m) / 8;
        }
        if (i == n)
            return n;
        memcpy(&x, p + n - 8, 8);
        m = escape_marks8(x) >> (8 * (i - (n - 8))); /* the bytes before i are plain */
        return m ? i + (size_t)__builtin_ctzll(m) / 8 : n;
    }
#endif
    while (i < n && p[i] >= 0x20 && p[i] != '"' && p[i] != '\\')
        i++;
    return i;
}

enum gw_code
gw_buf_append_json_inner(struct gw_buf *b, struct gw_str s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s.ptr;
    size_t i = 0;

    if (s.len == 0) /* an empty slice may be {NULL, 0}: no pointer arithmetic on it */
        return GW_OK;
    for (;;) {
        size_t run = unescaped_run(p + i, s.len - i);
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        size_t n = 2;
        unsigned char c;

        if (run && gw_buf_append(b, s.ptr + i, run) != GW_OK)
            return GW_E_NOMEM;
        i += run;
        if (i == s.len)
            return GW_OK;
        c = p[i++];
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        if (gw_buf_append(b, esc, n) != GW_OK)
            return GW_E_NOMEM;
    }
}

enum gw_code
gw_buf_append_json_str(struct gw_buf *b, struct gw_str s)
{
    if (gw_buf_append(b, "\"", 1) != GW_OK || gw_buf_append_json_inner(b, s) != GW_OK)
        return GW_E_NOMEM;
    return gw_buf_append(b, "\"", 1);
}

void
gw_buf_consume(struct gw_buf *b, size_t n)
{
    if (n >= b->len) {
        gw_buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

void
gw_buf_fini(struct gw_buf *b)
{
    gw_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void
gw_buf_recycle(struct gw_buf *b, size_t keep)
{
    if (b->cap > keep)
        gw_buf_fini(b);
    else
        gw_buf_reset(b);
}

/* Eight bytes a step (a key digest is four): the differences are OR-ed into <d>, which
 * an empty asm makes opaque to the compiler at every step, so no step can be skipped or
 * the loop left early, whatever the bytes. The byte-wise volatile loop this replaces
 * was 16 instructions a byte, on every request, for every client of the config. */
bool
gw_ct_equal(const void *a, const void *b, size_t n)
{
    const unsigned char *x = a, *y = b;
    uint64_t d = 0, u, v;
    size_t i = 0;

    for (; i + 8 <= n; i += 8) {
        memcpy(&u, x + i, 8);
        memcpy(&v, y + i, 8);
        d |= u ^ v;
        __asm__("" : "+r"(d));
    }
    for (; i < n; i++) {
        d |= (uint64_t)(x[i] ^ y[i]);
        __asm__("" : "+r"(d));
    }
    return d == 0;
}

bool
gw_hex_decode32(struct gw_str hex, unsigned char out[32])
{
    size_t i;

    if (hex.len != 64)
        return false;
    for (i = 0; i < 32; i++) {
        int hi = gw_hex_digit(hex.ptr[2 * i]), lo = gw_hex_digit(hex.ptr[2 * i + 1]);

        if (hi < 0 || lo < 0)
            return false;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return true;
}

void
gw_put_digits(char *out, unsigned v, int width)
{
    while (width-- > 0) {
        out[width] = (char)('0' + v % 10);
        v /= 10;
    }
}

void
gw_fmt_iso_ms(uint64_t ms, char out[GW_ISO_MS_LEN])
{
    static const char last[] = "9999-12-31T23:59:59.999Z";
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;

    if (ms / 1000 > 253402300799ull || !gmtime_r(&secs, &tm)) {
        memcpy(out, last, sizeof(last));
        return;
    }
    memcpy(out, "0000-00-00T00:00:00.000Z", GW_ISO_MS_LEN);
    gw_put_digits(out, (unsigned)(tm.tm_year + 1900), 4);
    gw_put_digits(out + 5, (unsigned)tm.tm_mon + 1, 2);
    gw_put_digits(out + 8, (unsigned)tm.tm_mday, 2);
    gw_put_digits(out + 11, (unsigned)tm.tm_hour, 2);
    gw_put_digits(out + 14, (unsigned)tm.tm_min, 2);
    gw_put_digits(out + 17, (unsigned)tm.tm_sec, 2);
    gw_put_digits(out + 20, (unsigned)(ms % 1000), 3);
}

int
gw_pct_decode(struct gw_str in, char *out, size_t cap)
{
    size_t i, n = 0;

    for (i = 0; i < in.len; i++) {
        char c = in.ptr[i];

        if (c == '%') {
            int hi, lo;

            if (i + 2 >= in.len)
                return -1;
            hi = gw_hex_digit(in.ptr[i + 1]);
            lo = gw_hex_digit(in.ptr[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = (char)(hi << 4 | lo);
            i += 2;
        }
        if (n == cap)
            return -1;
        out[n++] = c;
    }
    return (int)n;
}

void
gw_hex_encode(const unsigned char *in, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    size_t i = 0;

#ifdef __SSE2__
    /* Sixteen bytes a step: each nibble to '0' + v, plus 'a' - '0' - 10 from 10 up; the
     * high and low nibbles interleaved into thirty-two characters. */
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(in + i));
        __m128i lo = _mm_and_si128(v, _mm_set1_epi8(15));
        __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(15));
        __m128i nine = _mm_set1_epi8(9), zero = _mm_set1_epi8('0');
        __m128i past = _mm_set1_epi8('a' - '0' - 10);

        hi = _mm_add_epi8(_mm_add_epi8(hi, zero), _mm_and_si128(_mm_cmpgt_epi8(hi, nine), past));
        lo = _mm_add_epi8(_mm_add_epi8(lo, zero), _mm_and_si128(_mm_cmpgt_epi8(lo, nine), past));
        _mm_storeu_si128((__m128i *)(void *)(out + 2 * i), _mm_unpacklo_epi8(hi, lo));
        _mm_storeu_si128((__m128i *)(void *)(out + 2 * i + 16), _mm_unpackhi_epi8(hi, lo));
    }
#endif
    for (; i < n; i++) {
        out[2 * i] = hex[in[i] >> 4];
        out[2 * i + 1] = hex[in[i] & 15];
    }
    out[2 * n] = '\0';
}

bool
gw_base64_decode(struct gw_str in, struct gw_buf *out)
{
    uint32_t acc = 0;
    size_t i, bits = 0, pad = 0;

    for (i = 0; i < in.len; i++) {
        unsigned char c = (unsigned char)in.ptr[i];
        int v = c >= 'A' && c <= 'Z'   ? c - 'A'
                : c >= 'a' && c <= 'z' ? c - 'a' + 26
                : c >= '0' && c <= '9' ? c - '0' + 52
                : c == '+'             ? 62
                : c == '/'             ? 63
                                       : -1;

        if (c == '=') {
            pad++;
            continue;
        }
        if (v < 0 || pad)
            return false;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            char b = (char)((acc >> (bits - 8)) & 0xFF);

            bits -= 8;
            if (gw_buf_append(out, &b, 1) != GW_OK)
                return false;
        }
    }
    return pad <= 2 && bits < 6;
}

bool
gw_utf8_valid(struct gw_str s)
{
    const unsigned char *p = (const unsigned char *)s.ptr;
    size_t i = 0;

    while (i < s.len) {
        unsigned c = p[i];
        size_t n;
        uint32_t cp;

        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            n = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            n = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (s.len - i <= n)
            return false;
        for (size_t k = 1; k <= n; k++) {
            if ((p[i + k] & 0xC0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
            return false;
        i += n + 1;
    }
    return true;
}

enum gw_code
gw_buf_append_i64(struct gw_buf *b, int64_t v)
{
    if (v < 0 && gw_buf_append(b, "-", 1) != GW_OK)
        return GW_E_NOMEM;
    return gw_buf_append_u64(b, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

enum gw_code
gw_buf_append_double(struct gw_buf *b, double v)
{
    char buf[40];
    int prec, n = 0;

    if (v != v || v > 1.7976931348623157e308 || v < -1.7976931348623157e308)
        v = 0;
    for (prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, sizeof(buf), "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (n <= 0 || (size_t)n >= sizeof(buf))
        return GW_E_NOMEM;
    return gw_buf_append(b, buf, (size_t)n);
}
