/* SPDX-License-Identifier: MIT
 * net/relay.c - an upstream's answer to the client (DESIGN.md 6, 11): the head checked,
 * the stream held until its first content, events inspected (usage, content, errors,
 * the shape they claim) and relayed through the sink with backpressure, the minimum
 * speed judged, a broken stream ended with the client shape's error frame, a whole
 * answer checked and answered.
 * Owns:    the stream's relayed output until it is written.
 * Threads: the owning worker only; never blocks.
 * See:     net/pipeline-priv.h, net/sink.h, dialects/
 */
#include "net/pipeline-priv.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/cost.h"
#include "core/events.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/retry.h"
#include "core/route.h"
#include "core/row.h"
#include "core/slots.h"
#include "core/speed.h"
#include "core/sse.h"
#include "core/sticky.h"
#include "dialects/anthropic.h"
#include "dialects/json_scan.h"
#include "dialects/openai.h"
#include "net/calendar.h"
#include "net/logger.h"
#include "net/report.h"
#include "net/sink.h"
#include "net/upstream.h"
#include "store/store.h"

static void on_speed_tick(evutil_socket_t fd, short what, void *arg);

/* The frame that ends a stream broken after content (DESIGN.md 11), in the client's
 * shape: from the renderer's state when it wrote the stream and its shape needs that. */
static void
error_frame(struct net_stream *s, enum gw_code code, struct gw_str message)
{
    if (s->convert && s->client_ops->render_abort)
        s->client_ops->render_abort(&s->rst, code, message, &s->out);
    else
        s->client_ops->error_frame(code, message, &s->out);
}
static void count_content(struct net_stream *s, size_t bytes);

/* The head of a streamed answer: it leaves with the first bytes of the body. */
static void
write_stream_head(struct net_stream *s)
{
    /* a Gemini stream asked without ?alt=sse is one JSON array */
    struct net_hdr h[4] = {
        {GW_STR_LIT("content-type"), net_stream_json_array(s) ? GW_STR_LIT("application/json")
                                                              : GW_STR_LIT("text/event-stream")},
        {GW_STR_LIT("cache-control"), GW_STR_LIT("no-cache")},
        {GW_STR_LIT("x-request-id"), {s->id, GW_ROW_ID_LEN}},
    };
    size_t n = 3;

    if (net_stream_dropped_header(s, &h[3]))
        n++;
    net_sink_head(&s->sink, 200, h, n, NET_SINK_STREAMED);
    s->headers_sent = true;
}

static void
flush_out(struct net_stream *s)
{
    if (!s->headers_sent || !s->out.len)
        return;
    net_sink_data(&s->sink, s->out.data, s->out.len);
    gw_buf_reset(&s->out);
    if (s->upx && !s->paused && net_sink_queued(&s->sink) > NET_OUT_HIGH) {
        net_upx_pause(s->upx); /* a slow client slows the upstream read */
        s->paused = true;
    }
}

static void
write_stream_end(struct net_stream *s)
{
    net_sink_end(&s->sink);
}

/* 424: Bedrock's ModelErrorException, the model failed while processing the request. */
static bool
is_failover_status(int status)
{
    return status == 401 || status == 403 || status == 404 || status == 408 || status == 424 ||
           status == 429 || status >= 500;
}

/* Keeps the hop's rate-limit headers for core/quota_learn.h (only when its provider
 * keeps quota state). */
static void
keep_quota_headers(struct net_stream *s, const struct net_hdr *hdrs, size_t n_hdrs)
{
    size_t i;

    s->n_qhdrs = 0;
    for (i = 0; i < n_hdrs && s->n_qhdrs < NET_QUOTA_HDRS; i++) {
        const struct net_hdr *h = &hdrs[i];
        struct net_quota_hdr *q;

        if (h->name.len >= sizeof(q->name) || h->value.len >= sizeof(q->value))
            continue;
        if (!(h->name.len > 12 && gw_str_has_prefix_nocase(h->name, "x-ratelimit-")) &&
            !(h->name.len > 20 && gw_str_has_prefix_nocase(h->name, "anthropic-ratelimit-")) &&
            !gw_str_has_prefix_nocase(h->name, "retry-after"))
            continue;
        if (!s->qhdrs)
            s->qhdrs = gw_malloc(NET_QUOTA_HDRS * sizeof(*s->qhdrs));
        if (!s->qhdrs)
            return; /* out of memory: nothing learned from this head */
        q = &s->qhdrs[s->n_qhdrs];
        memcpy(q->name, h->name.ptr, h->name.len);
        q->name[h->name.len] = '\0';
        memcpy(q->value, h->value.ptr, h->value.len);
        q->value[h->value.len] = '\0';
        s->n_qhdrs++;
    }
}

static void
on_up_head(void *arg, int status, const struct net_hdr *hdrs, size_t n_hdrs)
{
    struct net_stream *s = arg;
    struct gw_attempt *a = net_attempt_cur(s);
    size_t i;

    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    s->up_status = status;
    s->up_ok = status >= 200 && status < 300;
    s->up_sse = s->up_es = s->up_bad = s->chunk_seen = false;
    if (a)
        a->ttfb_ms = (int32_t)net_ms_since(s->t_hop_us, net_mono_us());
    if (s->qset && s->qunit >= 0) {
        keep_quota_headers(s, hdrs, n_hdrs);
        if (s->up_ok && s->n_qhdrs)
            net_hop_quota_learn(s, (struct gw_str){"", 0}, NULL); /* 2xx heads state limits too */
    }
    if (!s->up_ok) {
        s->up_errtype[0] = '\0';
        for (i = 0; i < n_hdrs; i++) {
            const struct net_hdr *h = &hdrs[i];

            if (gw_str_eq_nocase(h->name, GW_STR_LIT("x-amzn-errortype"))) {
                /* "ThrottlingException:http://internal.amazon.com/coral/..." */
                const char *colon = memchr(h->value.ptr, ':', h->value.len);
                size_t len = colon ? (size_t)(colon - h->value.ptr) : h->value.len;

                if (len < sizeof(s->up_errtype)) {
                    memcpy(s->up_errtype, h->value.ptr, len);
                    s->up_errtype[len] = '\0';
                }
            } else if (gw_str_eq_nocase(h->name, GW_STR_LIT("retry-after")) &&
                       h->value.len < sizeof(s->retry_after))
                memcpy(s->retry_after, h->value.ptr, h->value.len);
            else if (gw_str_eq_nocase(h->name, GW_STR_LIT("retry-after-ms")) &&
                     h->value.len < sizeof(s->retry_after_ms))
                memcpy(s->retry_after_ms, h->value.ptr, h->value.len);
        }
        return;
    }
    if (!s->stream)
        return;
    for (i = 0; i < n_hdrs; i++) {
        if (!gw_str_eq_nocase(hdrs[i].name, GW_STR_LIT("content-type")))
            continue;
        if (gw_str_has_prefix_nocase(hdrs[i].value, "text/event-stream"))
            s->up_sse = true;
        /* Bedrock's ConverseStream: binary eventstream messages, read by their decoder
         * into the same event parser (up_sse: a stream of events either way) */
        if (s->up_shape == DL_SHAPE_BEDROCK &&
            gw_str_has_prefix_nocase(hdrs[i].value, "application/vnd.amazon.eventstream"))
            s->up_sse = s->up_es = true;
    }
}

/* The hop produced its first content: the hold ends, the sample is taken, and the
 * minimum-speed judge starts when the upstream has one. */
static void
on_first_content(struct net_stream *s)
{
    const struct gw_conf_provider *p = net_stream_prov(s);
    uint64_t now_us = net_mono_us();

    s->t_first_us = now_us;
    if (s->slow_timer)
        evtimer_del(s->slow_timer);
    gw_upstate_sample(p->state, net_now_ms(), net_ms_since(s->t_hop_us, now_us));
    write_stream_head(s);
    if (p->min_speed_tps) {
        struct timeval second = {1, 0};

        if (!s->speed)
            s->speed = gw_arena_alloc(&s->arena, sizeof(*s->speed)); /* lives as long as s */
        if (!s->speed_timer)
            s->speed_timer = event_new(s->w->base, -1, EV_PERSIST, on_speed_tick, s);
        if (s->speed && s->speed_timer) {
            gw_speed_init(s->speed, p->min_speed_window_secs, p->min_speed_tps);
            s->speed_carry = 0;
            evtimer_add(s->speed_timer, &second);
        }
    }
}

/* True when <v> is one valid JSON object and nothing else (dialects/json_scan.h: the
 * hot path's scanner, no allocation). The shape check of an answer that the dialect's
 * inspection could not vouch for: a chunk that carried nothing, an answer without
 * usage. */
static bool
is_json_object(struct gw_str v)
{
    struct dl_json j;

    dl_json_init(&j, v.ptr, v.len);
    return dl_json_peek(&j) == '{' && dl_json_skip(&j, NULL) && dl_json_end(&j);
}

/* Speed and the 4-bytes-a-token count of <bytes> of content delta (DESIGN.md 18): a
 * token per 4 bytes, the rest carried over. */
static void
count_content(struct net_stream *s, size_t bytes)
{
    s->content_bytes += bytes;
    if (bytes && s->speed) {
        s->speed_carry += bytes;
        gw_speed_add(s->speed, net_now_ms(), s->speed_carry / 4);
        s->speed_carry %= 4;
    }
}

/* One canonical event of a hop, from its upstream shape's event parser: the
 * inspectors read it (usage, first content and the hold, speed, errors, the shape it
 * claims), and a converted hop's event is rendered in the client's shape. */
static int
on_canon_event(void *arg, const struct dl_event *ev)
{
    struct net_stream *s = arg;

    s->chunk_seen = true;
    s->ev_n++;
    s->ev_last = ev->kind;
    switch (ev->kind) {
    case DL_EV_ERROR:
        /* Before content: fail over; after: the stream is broken (DESIGN.md 11: the
         * client gets its shape's unavailable frame, whatever the upstream sent). */
        s->ev_err_status = ev->status;
        if (!s->headers_sent)
            s->stream_error = true;
        else
            s->up_failed = true;
        return 1;
    case DL_EV_USAGE:
        s->usage = ev->usage;
        s->usage_seen = true;
        break;
    case DL_EV_FINISH: s->finish_seen = true; break;
    default: break;
    }
    net_resp_event(s, ev);
    if (s->convert && s->client_ops->event_render(&s->rst, ev, &s->out) != GW_OK) {
        s->up_bad = true; /* out of memory, or an event the client shape cannot follow */
        return 1;
    }
    if (dl_event_is_content(ev) && !s->headers_sent)
        on_first_content(s);
    count_content(s, dl_event_content_bytes(ev));
    return 0;
}

/* One event of a hop read through the hub (<event> and <data> of an SSE event or of an
 * eventstream message): its shape's parser makes the canonical events; the same shape
 * relays the event's bytes (<raw>) as they came. */
static int
hub_event(struct net_stream *s, struct gw_str event, struct gw_str data, struct gw_str raw)
{
    s->ev_n = 0;
    if (s->up_ops->event_parse(&s->pst, event, data, on_canon_event, s) != GW_OK) {
        s->up_bad = true; /* data that is not what its event needs */
        return 1;
    }
    if (s->stream_error || s->up_bad || s->up_failed)
        return 1;
    /* Chat's usage chunk (nothing but USAGE) was asked for by the gateway: it reaches a
     * Chat client only when the client asked for it too (stream_options.include_usage). */
    if (!s->convert && s->client_shape == DL_SHAPE_CHAT && !s->wants_usage && s->ev_n == 1 &&
        s->ev_last == DL_EV_USAGE)
        return 0;
    if (!s->convert && gw_buf_append_str(&s->out, raw) != GW_OK) {
        s->up_bad = true;
        return 1;
    }
    return 0;
}

static int
on_hub_event(void *arg, const struct gw_sse_event *ev)
{
    return hub_event(arg, ev->event, ev->data, ev->raw);
}

/* One eventstream message of a Bedrock hop (always converted: no client speaks
 * Converse, so nothing is relayed raw). */
static int
on_es_message(void *arg, const struct dl_bedrock_es_msg *m)
{
    struct gw_str event, data;

    dl_bedrock_es_event(m, &event, &data);
    return hub_event(arg, event, data, (struct gw_str){"", 0});
}

/* Feeds a streamed hop's body to its framing: SSE, or Bedrock's eventstream. */
static enum gw_code
feed_events(struct net_stream *s, const char *data, size_t len)
{
    if (s->up_es)
        return dl_bedrock_es_feed(&s->es, data, len, on_es_message, s);
    return gw_sse_feed(&s->sse, data, len, on_hub_event, s);
}

/* The hop broke after content reached the client: the stream ends with an error chunk
 * carrying <code> and gw's own <message> (no [DONE]); the attempt and the row say
 * failed with <code>, and the upstream counts a failure. <log_code> names the log
 * line (the transport's own code when it differs from the client's). */
static void
stream_broke(struct net_stream *s, enum gw_code code, enum gw_code log_code, const char *message)
{
    const struct gw_conf_provider *p = net_stream_prov(s);
    struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

    GW_LOG(GW_LOG_WARN, &ctx, gw_code_str(log_code), "upstream %s: %s", p->name, message);
    if (s->conn && s->conn->wst)
        code = GW_E_WS_UPSTREAM_CLOSED; /* a WebSocket turn's code for it (DESIGN.md 12) */
    net_hop_timers_stop(s);
    /* The frames already made stay (they are whole); the client shape's frame ends it. */
    error_frame(s, code, gw_str_c(message));
    memcpy(s->row->upstream, p->name, strnlen(p->name, GW_NAME_MAX));
    net_attempt_end(s, GW_OUT_FAILED, s->up_status, code);
    net_hop_count_failure(s, s->up_status, code);
    gw_code_count(code);
    net_stream_settle(s, 200, code, GW_OUT_FAILED);
    flush_out(s);
    write_stream_end(s);
    net_stream_finish(s, 200, code, GW_OUT_FAILED);
}

static void
on_up_body(void *arg, const char *data, size_t len)
{
    struct net_stream *s = arg;

    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (!s->up_ok) {
        size_t room = NET_MAX_ERRBODY - s->errbody.len;

        gw_buf_append(&s->errbody, data, len < room ? len : room);
        return;
    }
    if (s->qlease.active) {
        /* A long answer: its credential's lease is kept alive (the sweep drops one
         * neither settled nor kept for 2 min). */
        uint64_t now = net_now_ms();

        if (now - s->qkeep_ms >= 60000) {
            gw_quota_lease_keep(s->qset, &s->qlease, now);
            s->qkeep_ms = now;
        }
    }
    if (!s->up_sse) {
        if (s->out.len + len > NET_MAX_ANSWER || gw_buf_append(&s->out, data, len) != GW_OK) {
            net_upx_cancel(s->upx);
            s->upx = NULL;
            gw_buf_reset(&s->out);
            net_hop_failed(s, s->up_status, GW_E_UPSTREAM_PROTOCOL);
        }
        return;
    }
    /* Not OK from the parser: an event over its cap (8 MiB, core/sse.c) or out of
     * memory; up_bad: an event that is not the shape it claims. */
    if (feed_events(s, data, len) != GW_OK || s->stream_error || s->up_bad || s->up_failed) {
        net_upx_cancel(s->upx);
        s->upx = NULL;
        if (s->headers_sent && s->up_failed && !s->up_bad) {
            stream_broke(s, GW_E_UPSTREAM_STATUS, GW_E_UPSTREAM_STATUS,
                         "the upstream failed mid-stream");
            return;
        }
        if (s->headers_sent) {
            stream_broke(s, GW_E_UPSTREAM_PROTOCOL, GW_E_UPSTREAM_PROTOCOL,
                         "the upstream sent an invalid stream");
            return;
        }
        gw_buf_reset(&s->out);
        if (s->stream_error && !s->up_bad && s->ev_err_status == 429 && s->qset && s->qunit >= 0) {
            /* A throttling event before content (Bedrock's throttlingException, a
             * Messages rate_limit_error): for the credential's quota, a 429 answer. */
            s->up_status = 429;
            net_hop_quota_failed(s);
            return;
        }
        net_hop_failed(s, s->up_status,
                       s->stream_error && !s->up_bad ? GW_E_UPSTREAM_STATUS
                                                     : GW_E_UPSTREAM_PROTOCOL);
        return;
    }
}

/* The events of one upstream read are made: written to the client in one write (a read
 * holding several chunks is one write, not one per chunk). A whole answer (no SSE) is
 * kept for the end. */
static void
on_up_body_read(void *arg)
{
    struct net_stream *s = arg;

    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (s->up_ok && s->up_sse)
        flush_out(s);
}

/* min_speed (DESIGN.md 6): judged once a second from the first token. Too slow: the
 * answer ends with a 503 error chunk, the upstream connection is dropped, the upstream
 * gets one failure and the conversation does not stick to it this turn. */
static void
on_speed_tick(evutil_socket_t fd, short what, void *arg)
{
    struct net_stream *s = arg;
    const struct gw_conf_provider *p;
    struct gw_buf msg = {0};
    double tps = 0;

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (!s->upx || !s->speed || gw_speed_judge(s->speed, net_now_ms(), &tps) != GW_SPEED_TOO_SLOW)
        return;
    p = net_stream_prov(s);
    net_hop_timers_stop(s);
    net_upx_cancel(s->upx);
    s->upx = NULL;
    gw_buf_printf(&msg, "upstream %s streamed %.1f tokens/s, below its minimum of %u over %u s",
                  p->name, tps, p->min_speed_tps, p->min_speed_window_secs);
    {
        struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

        GW_LOG(GW_LOG_WARN, &ctx, gw_code_str(GW_E_UPSTREAM_TOO_SLOW), "%s",
               msg.data ? msg.data : "too slow");
    }
    gw_buf_reset(&s->out);
    error_frame(s, GW_E_UPSTREAM_TOO_SLOW,
                (struct gw_str){msg.data ? msg.data : "too slow", msg.len});
    gw_buf_fini(&msg);
    memcpy(s->row->upstream, p->name, strnlen(p->name, GW_NAME_MAX));
    net_attempt_end(s, GW_OUT_TOO_SLOW, s->up_status, GW_E_UPSTREAM_TOO_SLOW);
    {
        uint64_t now = net_now_ms();
        struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

        if (gw_upstate_failure(p->state, now, s->conf, 0))
            net_report_paused(p, now, s->up_status, GW_E_UPSTREAM_TOO_SLOW, 0, &ctx);
    }
    if (s->conv && s->w->sticky)
        gw_sticky_forget(s->w->sticky, s->conv);
    gw_code_count(GW_E_UPSTREAM_TOO_SLOW);
    net_stream_settle(s, 200, GW_E_UPSTREAM_TOO_SLOW, GW_OUT_TOO_SLOW);
    flush_out(s);
    write_stream_end(s);
    net_stream_finish(s, 200, GW_E_UPSTREAM_TOO_SLOW, GW_OUT_TOO_SLOW);
}

/* The hop answered (client errors included): health, and the conversation's upstream. */
static void
count_answer(struct net_stream *s)
{
    const struct gw_conf_provider *p = net_stream_prov(s);
    uint64_t now = net_now_ms();

    net_hop_timers_stop(s);
    net_hop_quota_success(s);
    if (gw_upstate_success(p->state, now)) {
        struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

        net_report_resumed(p, "answered", 0, &ctx);
    }
    memcpy(s->row->upstream, p->name, strnlen(p->name, GW_NAME_MAX));
    if (s->conv && s->w->sticky)
        gw_sticky_record(s->w->sticky, s->conv, p->name, now,
                         s->usage.cache_read_tokens + s->usage.cache_write_tokens);
}

/* A converted hop's whole answer (DESIGN.md 11): the upstream shape's answer parse
 * makes the events it would have streamed, folded (canon.c), rendered in the client's
 * shape in place of s->out. <folded>: the answer is already folded, whole, for the kept
 * conversation (net_resp_answer), so that fold is rendered instead of a second parse.
 * False when the answer is not what its shape claims (the hop failed over). */
static bool
convert_answer(struct net_stream *s, bool folded)
{
    struct dl_render_ctx ctx = {.model = s->model,
                                .id = {s->id, GW_ROW_ID_LEN},
                                .created = net_now_ms() / 1000,
                                .upstream = s->up_shape,
                                .arena = &s->arena,
                                .req = s->creq_ready ? &s->creq : NULL};
    struct gw_buf kept;
    struct dl_answer own, *a = folded ? &s->resp_fold : &own;
    enum gw_code rc = GW_OK;
    size_t i;

    if (!folded) {
        dl_answer_init(&own, &s->arena);
        rc = s->up_ops->answer_parse(s->out.data, s->out.len, dl_answer_fold, &own);
    }
    if (rc == GW_OK && !a->failed)
        rc = s->client_ops->answer_render(a, &ctx, &s->rendered);
    else if (rc == GW_OK)
        rc = GW_E_UPSTREAM_PROTOCOL;
    if (rc == GW_OK) {
        s->usage = a->usage;
        s->usage_seen = a->usage_seen;
        s->content_bytes = 0;
        for (i = 0; i < a->n_blocks; i++)
            s->content_bytes += a->blocks[i].text.len;
    }
    if (!folded)
        dl_answer_fini(&own);
    if (rc != GW_OK) {
        gw_buf_reset(&s->rendered);
        gw_buf_reset(&s->out);
        net_hop_failed(s, s->up_status, rc == GW_E_NOMEM ? rc : GW_E_UPSTREAM_PROTOCOL);
        return false;
    }
    /* the rendered answer becomes out; the upstream's, emptied, keeps its memory */
    kept = s->out;
    s->out = s->rendered;
    s->rendered = kept;
    gw_buf_reset(&s->rendered);
    return true;
}

static void
finish_ok(struct net_stream *s)
{
    if (s->stream && s->up_sse) {
        if (s->up_es && dl_bedrock_es_partial(&s->es)) {
            /* the stream ended inside an eventstream message: a cut frame */
            if (s->headers_sent) {
                stream_broke(s, GW_E_UPSTREAM_PROTOCOL, GW_E_UPSTREAM_PROTOCOL,
                             "the upstream's eventstream ended inside a message");
                return;
            }
            gw_buf_reset(&s->out);
            net_hop_failed(s, s->up_status, GW_E_UPSTREAM_PROTOCOL);
            return;
        }
        if (!s->chunk_seen) {
            /* Not one event parsed as a chunk (garbage lines, only [DONE], nothing):
             * not an answer. Content cannot have been relayed without a chunk. */
            gw_buf_reset(&s->out);
            net_hop_failed(s, s->up_status, GW_E_UPSTREAM_PROTOCOL);
            return;
        }
        if (s->convert) {
            /* A converted stream must have ended with its FINISH: without one it is
             * broken, whatever the transport said. Then the client renderer writes
             * what it held back (a finish waiting for the usage after it). */
            if (!s->finish_seen) {
                if (s->headers_sent) {
                    stream_broke(s, GW_E_UPSTREAM_DROPPED, GW_E_UPSTREAM_DROPPED,
                                 "the upstream stream ended before its finish");
                    return;
                }
                gw_buf_reset(&s->out);
                net_hop_failed(s, s->up_status, GW_E_UPSTREAM_PROTOCOL);
                return;
            }
            if (s->client_ops->render_end && s->client_ops->render_end(&s->rst, &s->out) != GW_OK) {
                gw_buf_reset(&s->out);
                net_hop_failed(s, s->up_status, GW_E_NOMEM);
                return;
            }
        }
        net_attempt_end(s, GW_OUT_OK, s->up_status, GW_OK);
        count_answer(s);
        net_resp_keep(s);
        if (!s->headers_sent)
            write_stream_head(s); /* an answer without content: relay it as it is */
        net_stream_settle(s, 200, GW_OK, GW_OUT_OK);
        flush_out(s);
        write_stream_end(s);
        net_stream_finish(s, 200, GW_OK, GW_OUT_OK);
        return;
    }
    /* the upstream's, before any render */
    bool folded = net_resp_answer(s, s->out.data, s->out.len);

    if (s->convert) {
        if (!convert_answer(s, folded))
            return;
    } else if (s->client_shape != DL_SHAPE_CHAT) {
        /* The same shape, not Chat: relayed as it came, its usage read (from the fold
         * for the kept conversation when there was one: it read the same members of the
         * whole answer, so a second scan would find the same). */
        struct gw_str body = {s->out.data, s->out.len};

        if (folded && s->resp_fold.usage_seen) {
            s->usage = s->resp_fold.usage;
            s->usage_seen = true;
        } else if (s->up_ops->answer_usage(body.ptr, body.len, &s->usage)) {
            s->usage_seen = true;
        } else if (!is_json_object(body)) {
            gw_buf_reset(&s->out);
            net_hop_failed(s, s->up_status, GW_E_UPSTREAM_PROTOCOL);
            return;
        }
    } else {
        struct gw_str body = {s->out.data, s->out.len};
        size_t content = 0;

        /* The minimal shape of an answer (a streamed request answered without SSE
         * too): one JSON object. With usage read, the scan has vouched for it. */
        if (dl_openai_answer_usage(body, &s->usage, &content)) {
            s->usage_seen = true;
        } else if (!is_json_object(body)) {
            gw_buf_reset(&s->out);
            net_hop_failed(s, s->up_status, GW_E_UPSTREAM_PROTOCOL);
            return;
        }
        s->content_bytes = content;
    }
    net_attempt_end(s, GW_OUT_OK, s->up_status, GW_OK);
    count_answer(s);
    net_resp_keep(s);
    s->t_first_us = net_mono_us();
    net_stream_settle(s, s->up_status, GW_OK, GW_OUT_OK);
    net_stream_answer(s, s->up_status, "application/json", s->out.data, s->out.len);
    net_stream_finish(s, s->up_status, GW_OK, GW_OUT_OK);
}

static void
on_up_end(void *arg, enum gw_code rc)
{
    struct net_stream *s = arg;

    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    s->upx = NULL; /* freed by the pool after this returns */
    if (rc != GW_OK) {
        if (s->headers_sent) {
            /* Content was relayed: end the answer with an error chunk, no [DONE]. */
            enum gw_code code =
                rc == GW_E_UPSTREAM_TIMEOUT ? GW_E_UPSTREAM_TIMEOUT : GW_E_UPSTREAM_DROPPED;

            stream_broke(s, code, rc, "the upstream connection broke mid-stream");
            return;
        }
        gw_buf_reset(&s->out);
        net_hop_failed(s, s->up_status, rc);
        return;
    }
    if (!s->up_ok) {
        if (s->qset && s->qunit >= 0 && gw_quota_status_is_quota((unsigned)s->up_status)) {
            /* about this credential's quota: another credential, then the next candidate */
            net_hop_quota_failed(s);
            return;
        }
        if (is_failover_status(s->up_status)) {
            net_hop_failed(s, s->up_status, GW_E_UPSTREAM_STATUS);
            return;
        }
        /* A request error (400, 413, 422, ...): the upstream's answer goes back as is;
         * the upstream answered, so it counts as a success for its health. */
        count_answer(s);
        net_attempt_end(s, GW_OUT_OK, s->up_status, GW_OK);
        if (s->convert) {
            /* In the client's shape, with the upstream's type and message. */
            struct gw_buf mine = {0};
            struct gw_str type, message;

            s->up_ops->upstream_error_read(s->errbody.data, s->errbody.len, s->up_status, &type,
                                           &message);
            if (s->up_errtype[0]) /* Bedrock names its error in a header */
                type = gw_str_c(s->up_errtype);
            s->client_ops->upstream_error_render(s->up_status, type, message, &mine);
            gw_buf_fini(&s->errbody);
            s->errbody = mine;
        }
        net_stream_settle(s, s->up_status, GW_OK, GW_OUT_OK);
        net_stream_answer(s, s->up_status, "application/json", s->errbody.data, s->errbody.len);
        net_stream_finish(s, s->up_status, GW_OK, GW_OUT_OK);
        return;
    }
    finish_ok(s);
}

const struct net_up_cbs net_relay_cbs = {
    .on_head = on_up_head,
    .on_body = on_up_body,
    .on_body_read = on_up_body_read,
    .on_end = on_up_end,
};
