/* SPDX-License-Identifier: MIT
 * dialects/json_scan.h - a validating, allocation-free, single-pass JSON scanner for
 * the dialects' hot paths (request parse, chunk and answer inspection).
 * The caller walks the document with a cursor: it enters objects and arrays it cares
 * about, reads the strings and numbers it needs, and skips (still validating) the rest.
 * It accepts exactly what jansson's json_loadb accepts with JSON_ALLOW_NUL: RFC 8259
 * grammar, strict UTF-8, \u escapes with paired surrogates, no U+0000 in object keys,
 * integers that fit int64, reals that do not overflow a double, at most
 * DL_JSON_MAX_DEPTH nested containers. Duplicate keys are the caller's business
 * (jansson keeps the last one; so do the dialects, except that dl_openai_req_parse
 * refuses a request holding twice a top-level field the gateway reads).
 * Owns:    nothing: a struct dl_json borrows the bytes it scans.
 * Threads: any; one scanner on one thread.
 * See:     dialects/json_scan.c, dialects/openai.c, tests/fuzz/fuzz_openai.c
 */
#ifndef GW_DIALECTS_JSON_SCAN_H
#define GW_DIALECTS_JSON_SCAN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/arena.h"
#include "core/codes.h"
#include "core/str.h"

/* jansson's JSON_PARSER_MAX_DEPTH: the same documents are refused for depth. The
 * scanner itself never recurses (dl_json_skip keeps a bit per level), so the limit
 * guards nothing but parity. */
#define DL_JSON_MAX_DEPTH 2048

enum dl_json_err {
    DL_JSON_OK = 0,
    DL_JSON_E_SYNTAX, /* not JSON (grammar, UTF-8, escapes, NUL in a key, trailing bytes) */
    DL_JSON_E_RANGE,  /* an integer beyond int64 or a real beyond a double */
    DL_JSON_E_DEPTH,  /* nested deeper than DL_JSON_MAX_DEPTH */
    DL_JSON_E_NOMEM,  /* a very long real number could not be copied for strtod */
};

/* The cursor. Zero <err> means no error so far; the first error sticks. */
struct dl_json {
    const char *s;
    size_t n;
    size_t i;       /* next byte to read */
    unsigned depth; /* containers entered and not yet closed */
    enum dl_json_err err;
    size_t err_at; /* offset of the byte the first error was found at */
};

/* A string token, validated. Offsets are into the scanned bytes. */
struct dl_json_str {
    size_t start, end; /* the raw bytes between the quotes */
    size_t dlen;       /* bytes once decoded (what jansson's json_string_length says) */
    size_t jlen;       /* bytes jansson's dump writes for it, quotes excluded */
    bool escaped;      /* holds a backslash: decode before using the bytes */
    bool nul;          /* decodes to something holding U+0000 */
};

/* A number token, validated and in range. */
struct dl_json_num {
    size_t start, end;
    bool real; /* has a fraction or an exponent (jansson: a real, not an integer) */
};

static inline void
dl_json_init(struct dl_json *j, const char *s, size_t n)
{
    j->s = s;
    j->n = n;
    j->i = 0;
    j->depth = 0;
    j->err = DL_JSON_OK;
    j->err_at = 0;
}

/* Records error <e> at the cursor (the first error wins). Always false. */
bool dl_json_fail(struct dl_json *j, enum dl_json_err e);

/* Skips whitespace; the next byte (0..255), or -1 at the end of the bytes. */
static inline int
dl_json_peek(struct dl_json *j)
{
    size_t i;

    for (i = j->i; i < j->n; i++) {
        unsigned char c = (unsigned char)j->s[i];

        /* every whitespace byte is <= ' ': the first test decides compact JSON */
        if (c > ' ' || (c != ' ' && c != '\n' && c != '\r' && c != '\t')) {
            j->i = i;
            return c;
        }
    }
    j->i = i;
    return -1;
}

/* At '"': validates the string, fills <out>, moves past the closing quote. */
bool dl_json_string(struct dl_json *j, struct dl_json_str *out);
/* At '-' or a digit: validates the number (grammar and range), moves past it. */
bool dl_json_number(struct dl_json *j, struct dl_json_num *out);
/* At any value: validates it and moves past it. When <compact> is not NULL, adds the
 * bytes jansson's json_dumpb(JSON_COMPACT) writes for it (except that duplicate keys
 * all count, where jansson keeps only the last). */
bool dl_json_skip(struct dl_json *j, size_t *compact);

/* At '{' (or '['): consumes it and counts a level. False (E_DEPTH) past the limit. */
static inline bool
dl_json_obj_enter(struct dl_json *j)
{
    if (j->depth >= DL_JSON_MAX_DEPTH)
        return dl_json_fail(j, DL_JSON_E_DEPTH);
    j->depth++;
    j->i++;
    return true;
}

static inline bool
dl_json_arr_enter(struct dl_json *j)
{
    return dl_json_obj_enter(j);
}
/* Inside an entered object: 1 with the next key in <key> and the cursor on its value
 * (whitespace skipped); 0 when the object closed (the '}' consumed; its offset is
 * j->i - 1); -1 on an error. <*first> starts true and is kept by the call. */
int dl_json_obj_next(struct dl_json *j, bool *first, struct dl_json_str *key);
/* Inside an entered array: 1 with the cursor on the next element, 0 when it closed,
 * -1 on an error. */
int dl_json_arr_next(struct dl_json *j, bool *first);
/* The text of validated string token <t>: a slice of the bytes, or a copy in <a> when
 * it had escapes; {NULL, 0} when out of memory. */
struct gw_str dl_json_text(const struct dl_json *j, const struct dl_json_str *t,
                           struct gw_arena *a);
/* The validated number <num> as an integer (it fits int64); false when it is a real. */
bool dl_json_int(const struct dl_json *j, const struct dl_json_num *num, int64_t *out);

/* A refusal of a request: <why> (may be NULL) gets the reason, ours, never the body's
 * bytes. <code> (GW_E_BAD_REQUEST for a parse, GW_E_UNCONVERTIBLE for a render), or
 * GW_E_NOMEM when the reason could not be written. */
enum gw_code dl_vrefuse(struct gw_buf *why, enum gw_code code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* The refusal of bytes <j> refused: their position only ("body: not valid JSON at line L
 * column C"); GW_E_BAD_REQUEST, or GW_E_NOMEM. */
enum gw_code dl_refuse_json(struct gw_buf *why, const struct dl_json *j);

/* True when <s> is one JSON object and nothing else but whitespace around it; <trimmed>
 * (when not NULL) gets <s> without that whitespace. */
bool dl_json_is_object(struct gw_str s, struct gw_str *trimmed);
/* After the top-level value: true when only whitespace follows. */
bool dl_json_end(struct dl_json *j);

/* Writes the decoded bytes of the validated string <str> (str->dlen of them) to <dst>. */
void dl_json_decode(const struct dl_json *j, const struct dl_json_str *str, char *dst);
/* Decodes the validated string <str> piecewise: from raw offset *<at> (str->start at
 * first) into <dst>, at most <cap> bytes (cap >= 4) and whole characters only, so each
 * piece is valid UTF-8 when the string is. Returns the bytes written and moves *<at>
 * past what it decoded (str->end once done). No allocation: a long string with escapes
 * can be handed on in pieces from a stack buffer. */
size_t dl_json_decode_part(const struct dl_json *j, const struct dl_json_str *str, size_t *at,
                           char *dst, size_t cap);
/* A string's decoded bytes for the length of one use: a slice of the document when it has
 * no escape, else decoded into the stack buffer, or onto the heap past its size. */
struct dl_json_text {
    struct gw_str s;
    char *heap;
    char stack[512];
};
/* <x> = the decoded <str> of <j> ("" when <str> is NULL). False when out of memory (<x>
 * then holds nothing to free). Every call is paired with dl_json_text_fini. */
bool dl_json_text_get(struct dl_json_text *x, const struct dl_json *j,
                      const struct dl_json_str *str);
void dl_json_text_fini(struct dl_json_text *x);
bool dl_json_str_eq_slow(const struct dl_json *j, const struct dl_json_str *str, const char *lit,
                         size_t len);

/* True when the decoded string <str> is <lit> (<len> bytes, at most 64). */
static inline bool
dl_json_key_is(const struct dl_json *j, const struct dl_json_str *str, const char *lit, size_t len)
{
    if (str->dlen != len)
        return false;
    if (!str->escaped)
        return memcmp(j->s + str->start, lit, len) == 0;
    return dl_json_str_eq_slow(j, str, lit, len);
}

/* The value of the validated number <num> as a double, as strtod reads it. False only
 * when a very long token cannot be copied (E_NOMEM recorded). */
bool dl_json_num_real(struct dl_json *j, const struct dl_json_num *num, double *out);
/* A count of tokens read from <num>: a positive integer as is, a positive real below
 * 1.8e19 truncated, anything else 0. False only on E_NOMEM (see dl_json_num_real). */
bool dl_json_num_count(struct dl_json *j, const struct dl_json_num *num, uint64_t *out);

/* The position of the first error as jansson counts it: line from 1, column in
 * characters (UTF-8 sequences) from 1, up to and including the offending byte. */
void dl_json_err_pos(const struct dl_json *j, int *line, int *column);

#endif
