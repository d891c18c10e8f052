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
#include <time.h>

#include "core/alloc.h"
#include "core/str.h"
#include "core/tsan.h"

#define LOG_RING_SIZE 4096 /* power of two; holds LOG_RING_SIZE - 1 lines */

static ck_ring_t log_ring;
static ck_ring_buffer_t log_slots[LOG_RING_SIZE];
static unsigned log_level = GW_LOG_INFO;
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
gw_log_set_level(enum gw_log_level level)
{
    ck_pr_store_uint(&log_level, (unsigned)level);
}

bool
gw_log_enabled(enum gw_log_level level)
{
    return (unsigned)level <= ck_pr_load_uint(&log_level);
}

static void
append_ts(struct gw_buf *b)
{
    uint64_t ms = log_clock ? log_clock() : 0;
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;

    /* gmtime_r is pure arithmetic on the value: no clock read here. */
    gmtime_r(&secs, &tm);
    gw_buf_printf(b, "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03uZ", tm.tm_year + 1900, tm.tm_mon + 1,
                  tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (unsigned)(ms % 1000));
}

void
gw_log_write(enum gw_log_level level, const struct gw_log_ctx *ctx, const char *code,
             const char *fmt, ...)
{
    struct gw_buf b = {0}, msg = {0};
    va_list ap;

    va_start(ap, fmt);
    gw_buf_vprintf(&msg, fmt, ap);
    va_end(ap);
    append_ts(&b);
    gw_buf_printf(&b, " lvl=%s code=%s", level_names[level], code ? code : "-");
    if (ctx && ctx->wrk >= 0)
        gw_buf_printf(&b, " wrk=%d", ctx->wrk);
    else
        gw_buf_printf(&b, " wrk=-");
    if (ctx && ctx->conn)
        gw_buf_printf(&b, " conn=%llu", (unsigned long long)ctx->conn);
    else
        gw_buf_printf(&b, " conn=-");
    gw_buf_printf(&b, " req=%s msg=", ctx && ctx->req ? ctx->req : "-");
    gw_buf_append_json_str(&b, (struct gw_str){msg.data ? msg.data : "", msg.len});
    gw_buf_append(&b, "\n", 1);
    gw_buf_fini(&msg);
    if (!b.data)
        return; /* out of memory: the line is lost */
    /* Acquire load pairs with the release in gw_log_attach: once attached, the ring
     * is initialised. */
    if (!ck_pr_load_uint(&log_attached)) {
        fputs(b.data, stderr);
        gw_buf_fini(&b);
        return;
    }
    GW_TSAN_RELEASE(&log_ring); /* the line's bytes are handed to the logger */
    if (!ck_ring_enqueue_mpsc(&log_ring, log_slots, b.data)) {
        ck_pr_inc_64(&log_drops); /* relaxed: a statistic */
        gw_buf_fini(&b);
    }
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
