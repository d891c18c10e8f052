/* SPDX-License-Identifier: MIT
 * core/log.h - structured log lines (STYLE.md 8). GW_LOG formats one key=value line
 *   ts=... lvl=info code=<code or event> wrk=<n|-> conn=<n|-> req=<id|-> msg="..."
 * or, with log.format json, one JSON object with the same keys (null for "-"):
 *   {"ts":"...","lvl":"info","code":"...","wrk":0,"conn":3,"req":"<id>","msg":"..."}
 * and queues it on a process-wide MPSC ring that net/logger.c drains. Workers never
 * block on logging: a full ring drops the line and counts it. Before a drain is
 * attached (startup) lines are written to stderr directly by the caller.
 * Never log credentials, gateway keys, Authorization headers, prompts or completions.
 * Owns:    the ring and the lines queued on it.
 * Threads: any; gw_log_attach/gw_log_take on the logger thread.
 * See:     core/log.c, net/logger.c
 */
#ifndef GW_CORE_LOG_H
#define GW_CORE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"

struct gw_buf;

enum gw_log_level {
    GW_LOG_ERROR = 0,
    GW_LOG_WARN,
    GW_LOG_INFO,
    GW_LOG_DEBUG,
};

enum gw_log_format {
    GW_LOG_TEXT = 0, /* key=value: ts=... lvl=info code=x wrk=0 conn=3 req=<id> k=v msg="..." */
    GW_LOG_JSON,     /* one JSON object a line with the same keys, in the same order */
};

struct gw_log_ctx {
    int wrk;         /* worker id, -1 = none */
    uint64_t conn;   /* connection id, 0 = none */
    const char *req; /* x-request-id, NULL = none */
};

/* The clock (wall time in ms since the epoch) that stamps lines; set by net at start,
 * since core reads no clock itself. Unset: ts=0. */
void gw_log_set_clock(uint64_t (*now_ms)(void));
/* Lines at or below <level> are produced, in <f> (default info, text). Both at once (a
 * reload): no line is written at the one and in the other's former value. Any thread. */
void gw_log_set(enum gw_log_format f, enum gw_log_level level);
bool gw_log_enabled(enum gw_log_level level);

/* "error", "warn", "info", "debug"; and back (false for another word). */
const char *gw_log_level_str(enum gw_log_level level);
bool gw_log_level_from_str(const char *s, enum gw_log_level *out);
enum gw_log_format gw_log_get_format(void);

void gw_log_write(enum gw_log_level level, const struct gw_log_ctx *ctx, const char *code,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A named value of a line, written between req and msg: `key=value` in text (a string
 * quoted when it holds anything but [A-Za-z0-9._:/@+-] or is empty), a member in JSON. */
enum gw_log_ftype {
    GW_LF_STR, /* v.s; NULL = null (text: -) */
    GW_LF_U64, /* v.u */
    GW_LF_I64, /* v.i */
    GW_LF_RAW, /* v.s written as is: a JSON number or true/false (never from input) */
};

struct gw_log_field {
    const char *key; /* [a-z_]+ */
    enum gw_log_ftype type;
    union {
        const char *s;
        uint64_t u;
        int64_t i;
    } v;
};

/* A line with fields <f> (<n> of them) besides the message. As gw_log_write; callers
 * check gw_log_enabled first. */
void gw_log_fields(enum gw_log_level level, const struct gw_log_ctx *ctx, const char *code,
                   const struct gw_log_field *f, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/* Formats one line into <b> (appended; ends with '\n'): pure, for the writers above and
 * the tests. Strings are escaped (quotes, backslashes, control characters; bytes that are
 * not UTF-8 become U+FFFD) so that a line stays one line and, in JSON, parses. */
enum gw_code gw_log_format_line(struct gw_buf *b, enum gw_log_format fmt, uint64_t ts_ms,
                                enum gw_log_level level, const struct gw_log_ctx *ctx,
                                const char *code, const struct gw_log_field *f, size_t n,
                                const char *msg, size_t msg_len);

#define GW_LOG(level, ctx, code, ...)                                                              \
    do {                                                                                           \
        if (gw_log_enabled(level))                                                                 \
            gw_log_write((level), (ctx), (code), __VA_ARGS__);                                     \
    } while (0)

/* One kind of line that may repeat fast (accept errors, connections over the limit):
 * at most one such line a second is written, with the count of those held back since
 * the last one. Zero-initialised; one static per call site; any thread. */
struct gw_log_rate {
    uint64_t sec;        /* the second of the last line written (log clock) */
    uint64_t suppressed; /* lines held back since */
};

/* True when a line of <r>'s kind may be written now; then *<suppressed> is how many were
 * held back since the last one. False counts this one as held back. */
bool gw_log_rate_pass(struct gw_log_rate *r, uint64_t *suppressed);

/* Logger side. After gw_log_attach lines are queued, not written by the caller. */
void gw_log_attach(void);
/* Detaches (callers write directly again); the caller drains what is left after. */
void gw_log_detach(void);
/* Takes the next queued line (NUL-terminated, ends in '\n'; free with gw_free) or NULL. */
char *gw_log_take(void);
/* Lines dropped because the ring was full. */
uint64_t gw_log_dropped(void);

#endif
