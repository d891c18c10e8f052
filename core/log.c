/* SPDX-License-Identifier: MIT
 * core/log.c - formats log lines and queues them on an MPSC ck_ring.
 * Producers (any thread) enqueue with ck_ring_enqueue_mpsc; the single consumer (the
 * logger thread) dequeues with ck_ring_dequeue_mpsc. A full ring drops the line and
 * counts it: no spinning.
 * Before gw_log_attach, and after gw_log_detach, lines go straight to stderr.
 * Owns:    the ring buffer and the lines on it.
 * Threads: any; take on the logger thread only.
 * See:     core/log.h, net/logger.c
 */
#include "core/log.h"

#include <ck_pr.h>
#include <ck_ring.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/str.h"
#include "core/tsan.h"

#define LOG_RING_SIZE 4096 /* power of two; holds LOG_RING_SIZE - 1 lines */

static ck_ring_t log_ring;
static ck_ring_buffer_t log_slots[LOG_RING_SIZE];
/* The level (low byte) and the format (the byte above) in one word, so that a line is
 * written at the level and in the format of one configuration, never a mix of a reload's
 * before and after (write_line reads it once). */
static unsigned log_conf = GW_LOG_INFO | GW_LOG_TEXT << 8;
static unsigned log_attached;
static uint64_t log_drops;
static uint64_t (*log_clock)(void);

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void
gw_log_set_clock(uint64_t (*now_ms)(void))
{
    log_clock = now_ms;
}

void
gw_log_set(enum gw_log_format f, enum gw_log_level level)
{
    ck_pr_store_uint(&log_conf, (unsigned)level | (unsigned)f << 8);
}

bool
gw_log_enabled(enum gw_log_level level)
{
    return (unsigned)level <= (ck_pr_load_uint(&log_conf) & 0xff);
}

const char *
gw_log_level_str(enum gw_log_level level)
{
    return (unsigned)level <= GW_LOG_DEBUG ? level_names[level] : "info";
}

bool
gw_log_level_from_str(const char *s, enum gw_log_level *out)
{
    unsigned i;

    for (i = 0; i <= GW_LOG_DEBUG; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum gw_log_level)i;
            return true;
        }
    }
    return false;
}

enum gw_log_format
gw_log_get_format(void)
{
    return (enum gw_log_format)(ck_pr_load_uint(&log_conf) >> 8);
}

/* ---- formatting (pure) ---- */

/* The length of the UTF-8 sequence at <p> (at most <n> bytes), 0 when it is not one:
 * overlong forms, surrogates and values past U+10FFFF are not. */
static size_t
utf8_len(const unsigned char *p, size_t n)
{
    size_t len, i;
    uint32_t cp;

    if (p[0] < 0xc2 || p[0] > 0xf4)
        return 0;
    len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : 2;
    if (len > n)
        return 0;
    cp = p[0] & (0x7f >> len);
    for (i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

/* <s> as a JSON string: quotes, backslashes and control characters escaped, bytes that
 * are not UTF-8 written as U+FFFD, so the result is one line any JSON parser reads. */
static enum gw_code
append_quoted(struct gw_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    enum gw_code rc = gw_buf_append(b, "\"", 1);
    size_t i = 0;

    while (rc == GW_OK && i < n) {
        size_t run = i, k;

        while (run < n && p[run] >= 0x20 && p[run] < 0x7f && p[run] != '"' && p[run] != '\\')
            run++;
        if (run > i) {
            rc = gw_buf_append(b, s + i, run - i);
            i = run;
            continue;
        }
        if (p[i] >= 0x80) {
            k = utf8_len(p + i, n - i);
            rc = k ? gw_buf_append(b, s + i, k) : gw_buf_append(b, "\\ufffd", 6);
            i += k ? k : 1;
            continue;
        }
        switch (p[i]) {
        case '"': rc = gw_buf_append(b, "\\\"", 2); break;
        case '\\': rc = gw_buf_append(b, "\\\\", 2); break;
        case '\n': rc = gw_buf_append(b, "\\n", 2); break;
        case '\r': rc = gw_buf_append(b, "\\r", 2); break;
        case '\t': rc = gw_buf_append(b, "\\t", 2); break;
        default: {
            char esc[6] = {'\\', 'u', '0', '0', hex[p[i] >> 4], hex[p[i] & 15]};

            rc = gw_buf_append(b, esc, sizeof(esc));
        }
        }
        i++;
    }
    return rc == GW_OK ? gw_buf_append(b, "\"", 1) : rc;
}

/* A text value is written bare when it is plain: a name, a number, an id, a code. */
static bool
is_bare(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    if (!*p)
        return false;
    for (; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == ':' || *p == '/' || *p == '@' || *p == '+' ||
              *p == '-'))
            return false;
    }
    return true;
}

/* " key=" in text, ",\"key\":" in JSON. Keys are the code's own names (no escaping);
 * appended without printf, since a request line has some twenty of them. */
static enum gw_code
append_key(struct gw_buf *b, enum gw_log_format fmt, const char *key)
{
    bool json = fmt == GW_LOG_JSON;
    enum gw_code rc = gw_buf_append(b, json ? ",\"" : " ", json ? 2 : 1);

    if (rc == GW_OK)
        rc = gw_buf_append_cstr(b, key);
    return rc == GW_OK ? gw_buf_append(b, json ? "\":" : "=", json ? 2 : 1) : rc;
}

/* A string value, NULL as null / "-". */
static enum gw_code
append_str(struct gw_buf *b, enum gw_log_format fmt, const char *s)
{
    if (!s)
        return gw_buf_append_cstr(b, fmt == GW_LOG_JSON ? "null" : "-");
    if (fmt == GW_LOG_TEXT && is_bare(s))
        return gw_buf_append_cstr(b, s);
    return append_quoted(b, s, strlen(s));
}

static enum gw_code
append_field(struct gw_buf *b, enum gw_log_format fmt, const struct gw_log_field *f)
{
    enum gw_code rc = append_key(b, fmt, f->key);

    if (rc != GW_OK)
        return rc;
    switch (f->type) {
    case GW_LF_STR: return append_str(b, fmt, f->v.s);
    case GW_LF_U64: return gw_buf_append_u64(b, f->v.u);
    case GW_LF_I64: return gw_buf_append_i64(b, f->v.i);
    case GW_LF_RAW: return gw_buf_append_cstr(b, f->v.s ? f->v.s : "null");
    }
    return GW_OK;
}

enum gw_code
gw_log_format_line(struct gw_buf *b, enum gw_log_format fmt, uint64_t ts_ms,
                   enum gw_log_level level, const struct gw_log_ctx *ctx, const char *code,
                   const struct gw_log_field *f, size_t n, const char *msg, size_t msg_len)
{
    bool json = fmt == GW_LOG_JSON;
    char ts[GW_ISO_MS_LEN];
    bool ok;
    size_t i;

    gw_fmt_iso_ms(ts_ms, ts);             /* pure arithmetic on the value: no clock read here */
    ok = gw_buf_reserve(b, 512) == GW_OK; /* a request line: one allocation, not five */
    ok &= gw_buf_append_cstr(b, json ? "{\"ts\":\"" : "ts=") == GW_OK;
    ok &= gw_buf_append(b, ts, GW_ISO_MS_LEN - 1) == GW_OK;
    if (json)
        ok &= gw_buf_append(b, "\"", 1) == GW_OK;
    ok &= append_key(b, fmt, "lvl") == GW_OK;
    ok &= append_str(b, fmt, gw_log_level_str(level)) == GW_OK;
    ok &= append_key(b, fmt, "code") == GW_OK;
    ok &= append_str(b, fmt, code) == GW_OK;
    ok &= append_key(b, fmt, "wrk") == GW_OK;
    if (ctx && ctx->wrk >= 0)
        ok &= gw_buf_append_u64(b, (uint64_t)ctx->wrk) == GW_OK;
    else
        ok &= append_str(b, fmt, NULL) == GW_OK;
    ok &= append_key(b, fmt, "conn") == GW_OK;
    if (ctx && ctx->conn)
        ok &= gw_buf_append_u64(b, ctx->conn) == GW_OK;
    else
        ok &= append_str(b, fmt, NULL) == GW_OK;
    ok &= append_key(b, fmt, "req") == GW_OK;
    ok &= append_str(b, fmt, ctx ? ctx->req : NULL) == GW_OK;
    for (i = 0; i < n; i++)
        ok &= append_field(b, fmt, &f[i]) == GW_OK;
    ok &= append_key(b, fmt, "msg") == GW_OK;
    ok &= append_quoted(b, msg ? msg : "", msg ? msg_len : 0) == GW_OK;
    ok &= gw_buf_append(b, json ? "}\n" : "\n", json ? 2 : 1) == GW_OK;
    return ok ? GW_OK : GW_E_NOMEM;
}

/* ---- writing ---- */

/* Hands a formatted line to the logger's ring (or stderr before it is attached). */
static void
emit(struct gw_buf *b)
{
    /* Acquire load pairs with the release in gw_log_attach: once attached, the ring
     * is initialised. */
    if (!ck_pr_load_uint(&log_attached)) {
        fputs(b->data, stderr);
        gw_buf_fini(b);
        return;
    }
    GW_TSAN_RELEASE(&log_ring); /* the line's bytes are handed to the logger */
    if (!ck_ring_enqueue_mpsc(&log_ring, log_slots, b->data)) {
        ck_pr_inc_64(&log_drops); /* relaxed: a statistic */
        gw_buf_fini(b);
    }
}

static void write_line(enum gw_log_level level, const struct gw_log_ctx *ctx, const char *code,
                       const struct gw_log_field *f, size_t n, const char *fmt, va_list ap)
    __attribute__((format(printf, 6, 0)));

static void
write_line(enum gw_log_level level, const struct gw_log_ctx *ctx, const char *code,
           const struct gw_log_field *f, size_t n, const char *fmt, va_list ap)
{
    struct gw_buf b = {0}, msg = {0};
    unsigned conf = ck_pr_load_uint(&log_conf); /* relaxed: one read decides the line */
    enum gw_log_format lf = (enum gw_log_format)(conf >> 8);

    if ((unsigned)level > (conf & 0xff))
        return; /* the caller checked an older level: this line is out now */
    gw_buf_vprintf(&msg, fmt, ap);
    if (gw_log_format_line(&b, lf, log_clock ? log_clock() : 0, level, ctx, code, f, n,
                           msg.data ? msg.data : "", msg.len) != GW_OK) {
        gw_buf_fini(&b);
        b.data = NULL;
    }
    gw_buf_fini(&msg);
    if (!b.data) {
        ck_pr_inc_64(&log_drops); /* out of memory: the line is lost, counted */
        return;
    }
    emit(&b);
}

void
gw_log_write(enum gw_log_level level, const struct gw_log_ctx *ctx, const char *code,
             const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    write_line(level, ctx, code, NULL, 0, fmt, ap);
    va_end(ap);
}

void
gw_log_fields(enum gw_log_level level, const struct gw_log_ctx *ctx, const char *code,
              const struct gw_log_field *f, size_t n, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    write_line(level, ctx, code, f, n, fmt, ap);
    va_end(ap);
}

bool
gw_log_rate_pass(struct gw_log_rate *r, uint64_t *suppressed)
{
    uint64_t now = (log_clock ? log_clock() : 0) / 1000 + 1; /* + 1: 0 means never */
    uint64_t last = ck_pr_load_64(&r->sec);

    /* One thread wins the second with the CAS; the others count themselves held back.
     * Relaxed is enough: the counters order nothing else. */
    if (last == now || !ck_pr_cas_64(&r->sec, last, now)) {
        ck_pr_inc_64(&r->suppressed);
        return false;
    }
    *suppressed = ck_pr_fas_64(&r->suppressed, 0);
    return true;
}

void
gw_log_attach(void)
{
    ck_ring_init(&log_ring, LOG_RING_SIZE);
    ck_pr_fence_store(); /* the ring is initialised before producers see attached */
    ck_pr_store_uint(&log_attached, 1);
}

void
gw_log_detach(void)
{
    ck_pr_store_uint(&log_attached, 0);
    ck_pr_fence_memory();
}

char *
gw_log_take(void)
{
    char *line;

    if (!ck_ring_dequeue_mpsc(&log_ring, log_slots, &line))
        return NULL;
    GW_TSAN_ACQUIRE(&log_ring);
    return line;
}

uint64_t
gw_log_dropped(void)
{
    return ck_pr_load_64(&log_drops);
}
