/* SPDX-License-Identifier: MIT
 * core/str.h - string slices (gw_str) and growable byte buffers (gw_buf).
 * Strings that cross a module boundary are slices, not NUL-terminated.
 * Owns:    a gw_buf owns its data; a gw_str owns nothing.
 * Threads: any; a buffer belongs to one thread at a time.
 * See:     core/str.c, tests/unit/core/test_str.c
 */
#ifndef GW_CORE_STR_H
#define GW_CORE_STR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/codes.h"

struct gw_str {
    const char *ptr;
    size_t len;
};

#define GW_STR_LIT(s) ((struct gw_str){(s), sizeof(s) - 1})

static inline struct gw_str
gw_str_c(const char *s)
{
    return (struct gw_str){s, s ? strlen(s) : 0};
}

static inline bool
gw_str_eq(struct gw_str a, struct gw_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* Case-insensitive ASCII comparison of <n> bytes. */
bool gw_mem_eq_nocase(const char *a, const char *b, size_t n);
/* Case-insensitive ASCII comparison (header names). Inline: names are matched against
 * lists on every request, and most differ in length, which costs less than the call. */
static inline bool
gw_str_eq_nocase(struct gw_str a, struct gw_str b)
{
    return a.len == b.len && gw_mem_eq_nocase(a.ptr, b.ptr, a.len);
}
/* True when <s> starts (ends) with <p>, ASCII case ignored. Inline: <p> is a literal
 * mostly, whose length the compiler knows. */
static inline bool
gw_str_has_prefix_nocase(struct gw_str s, const char *p)
{
    size_t n = strlen(p);

    return s.len >= n && gw_mem_eq_nocase(s.ptr, p, n);
}
static inline bool
gw_str_has_suffix_nocase(struct gw_str s, const char *p)
{
    size_t n = strlen(p);

    return s.len >= n && gw_mem_eq_nocase(s.ptr + s.len - n, p, n);
}

/* Space, tab, CR or LF: JSON's whitespace, and the blanks of header values. */
static inline bool
gw_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* <s> without the blanks (gw_is_blank) around it. */
struct gw_str gw_str_trim(struct gw_str s);

/* A growable buffer; zero-initialised is an empty buffer. data is NUL-terminated
 * whenever len > 0 or after gw_buf_reserve, so it can be handed to C APIs. */
struct gw_buf {
    char *data;
    size_t len;
    size_t cap;
};

/* Makes room for <extra> more bytes. GW_E_NOMEM on failure (buffer unchanged). */
enum gw_code gw_buf_reserve(struct gw_buf *b, size_t extra);
/* gw_buf_append when the buffer must grow first. */
enum gw_code gw_buf_append_grow(struct gw_buf *b, const void *p, size_t n);

/* Appends <n> bytes of <p>. Inline: relays and log lines append in small pieces, and
 * the call into the growing path cost more than the copy when there is room. */
static inline enum gw_code
gw_buf_append(struct gw_buf *b, const void *p, size_t n)
{
    if (b->len + n >= b->cap)
        return gw_buf_append_grow(b, p, n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return GW_OK;
}
enum gw_code gw_buf_append_str(struct gw_buf *b, struct gw_str s);
enum gw_code gw_buf_printf(struct gw_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
enum gw_code gw_buf_vprintf(struct gw_buf *b, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
/* Writes the decimal digits of <v> to <dst> (room for 20), no NUL; returns how many. */
size_t gw_fmt_u64(char *dst, uint64_t v);
/* Writes the lowercase hex digits of <v> to <dst> (room for 16), no NUL, no leading
 * zeros ("0" for 0), as printf's %llx; returns how many. */
size_t gw_fmt_hex_u64(char *dst, uint64_t v);
/* Appends the decimal digits of <v> (no printf on hot paths). */
enum gw_code gw_buf_append_u64(struct gw_buf *b, uint64_t v);
/* The path a request parser's error names, made for every item of a request whether an
 * error comes or not, so without printf. Both write into <dst> (<cap> bytes, at least 1)
 * what snprintf would, cut to fit and NUL-terminated: gw_path_join <prefix> then <suffix>
 * ("messages[2]" ".content"), gw_path_item <prefix>, "[<k>]" then <suffix>. */
void gw_path_join(char *dst, size_t cap, const char *prefix, const char *suffix);
void gw_path_item(char *dst, size_t cap, const char *prefix, size_t k, const char *suffix);
/* Appends the NUL-terminated <s>. */
static inline enum gw_code
gw_buf_append_cstr(struct gw_buf *b, const char *s)
{
    return gw_buf_append(b, s, strlen(s));
}
/* Appends <s> as a JSON string literal, quotes included. */
enum gw_code gw_buf_append_json_str(struct gw_buf *b, struct gw_str s);
/* The same, without the quotes: <s> escaped to go inside a JSON string being written. */
enum gw_code gw_buf_append_json_inner(struct gw_buf *b, struct gw_str s);
/* Appends <v> in decimal. */
enum gw_code gw_buf_append_i64(struct gw_buf *b, int64_t v);
/* Appends <v> in the shortest of %.15g..%.17g that reads back as <v> (NaN and infinities,
 * which JSON has not, as 0). */
enum gw_code gw_buf_append_double(struct gw_buf *b, double v);
/* Appends the bytes of base64 <in> (the standard alphabet; '=' padding, at most two, only
 * at the end) to <out>; false when <in> is not base64, or out of memory. */
bool gw_base64_decode(struct gw_str in, struct gw_buf *out);
/* True when <s> is valid UTF-8, strictly: no overlong forms, surrogates or code points
 * past U+10FFFF. */
bool gw_utf8_valid(struct gw_str s);
/* Removes the first <n> bytes. */
void gw_buf_consume(struct gw_buf *b, size_t n);
static inline void
gw_buf_reset(struct gw_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}
/* Frees the data; the buffer is empty and reusable afterwards. */
void gw_buf_fini(struct gw_buf *b);
/* Empties <b> for its next use: keeps its memory when it holds at most <keep> bytes (a
 * buffer reused per request), frees it when more (no large memory kept while idle). */
void gw_buf_recycle(struct gw_buf *b, size_t keep);

/* Constant-time comparison of <n> bytes; true when equal. */
bool gw_ct_equal(const void *a, const void *b, size_t n);

/* The value of hex digit <c> (either case), or -1 when it is not one. */
static inline int
gw_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes 64 hex characters into 32 bytes; false when <hex> is not exactly that. */
bool gw_hex_decode32(struct gw_str hex, unsigned char out[32]);
/* Writes 2*n lowercase hex characters and a NUL into <out>. */
void gw_hex_encode(const unsigned char *in, size_t n, char *out);
/* RFC 3339 UTC with milliseconds ("2026-12-01T20:41:02.345Z", GW_ISO_MS_LEN - 1
 * characters and a NUL) of <ms> since the epoch; times past 9999 clamp to its last
 * millisecond. Pure arithmetic, no printf: log lines write one per line. */
#define GW_ISO_MS_LEN 25
void gw_fmt_iso_ms(uint64_t ms, char out[GW_ISO_MS_LEN]);
/* <v> as exactly <width> decimal digits (zero-padded, the high ones cut) at <out>; no
 * NUL. The fields of fixed-width dates. */
void gw_put_digits(char *out, unsigned v, int width);
/* Decodes %XX escapes (and nothing else) of <in> into <out> of <cap> bytes; the length,
 * or -1 when an escape is malformed or the result does not fit. */
int gw_pct_decode(struct gw_str in, char *out, size_t cap);

#endif
