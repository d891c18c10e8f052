/* SPDX-License-Identifier: MIT
 * net/ws.c - the OpenAI Responses API's WebSocket mode (DESIGN.md 12): GET /v1/responses
 * with an Upgrade to WebSocket, authenticated on the upgrade like any request (a bad key
 * is refused with the HTTP error before upgrading). Each response.create message is its
 * own request through the same pipeline as POST /v1/responses with "stream": true: a
 * turn carries a request net_conn of its own (like an HTTP/2 stream), judged by
 * net_pipeline_head (the key again), routed, admitted, sent to any upstream shape and
 * recorded as its own row. The turn's sink re-frames the SSE answer the pipeline writes:
 * each event's data becomes one text message; a refusal (a status, an error body)
 * becomes one response.failed event carrying the gw code, and the connection stays.
 * One turn at a time: a response.create while one runs, a binary or malformed message
 * gets an `error` event. A create's stream_id (OpenAI's lanes) tags every event of its
 * turn and an error answering it. A client that closes (close frame or EOF) cancels the running
 * turn (net_stream_client_gone: slot, permit, row 499). Messages are capped at
 * server.max_body_mb (wslay closes with 1009), a connection with no turn and no frame
 * for server.idle_timeout_secs is closed with 1001, one whose socket takes no byte for
 * that long is closed (its turn cancelled), pings are answered by wslay, and a drain
 * closes with 1001 once the running turn ended. Our close frame is followed by a
 * lingering close, as in net/http1.c.
 * previous_response_id: the connection remembers the last response it served (its
 * items, what made it), so a turn can continue it with store false (net/respstate.c asks
 * net_ws_recall first, then the store).
 * Owns:    struct net_ws (the wslay glue, its timer, the remembered response) and each
 *          struct net_ws_turn (its request conn, the answer's parser); a turn's conn owns
 *          its net_stream while the pipeline answers.
 * Threads: the owning worker only.
 * See:     net/wsproto.h (framing over buffers), net/http1.c (the upgrade), net/sink.h,
 *          tests/e2e/test_ws.py
 */
#include "net/net-priv.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/log.h"
#include "core/sse.h"
#include "net/logger.h"
#include "net/sink.h"
#include "net/tls.h"
#include "net/wsproto.h"

#define NET_WS_MAGIC 0x77736373u
#define NET_WS_TURN_MAGIC 0x77737475u
#define NET_WS_ERR_MAX (64 * 1024) /* a refusal body kept for its message */
#define NET_WS_FEED (16 * 1024)    /* input fed to wslay at a time */
#define NET_WS_LINGER_SECS 2
#define NET_WS_LINGER_BYTES (1024 * 1024) /* a lingering close discards this beyond max_body */

struct net_ws_turn {
    uint32_t magic_;
    struct net_ws *ws;
    struct net_conn rc; /* the request, as the pipeline reads it */
    int status;
    bool sse;        /* a streamed 200: SSE events to re-frame */
    bool final_sent; /* response.completed/failed/incomplete or error went out */
    char gw_code[64];
    char req_id[64];
    struct gw_sse parser;
    struct gw_buf err;  /* a refusal's body (its message goes into response.failed) */
    struct gw_buf lane; /* the create's stream_id (JSON text): every event carries it */
};

struct net_ws {
    uint32_t magic_;
    struct net_conn *c;
    struct net_wsio io;
    struct event *timer; /* idle timeout; the bound on the final flush */
    struct net_ws_turn *turn;
    struct gw_buf pending;      /* the body of a response.create to start after the feed */
    struct gw_buf pending_lane; /* ... and its stream_id */
    bool has_pending;
    bool closing;     /* no more messages; the socket closes once the output is written */
    bool lingering;   /* written and half-closed: discarding input until EOF or the timer */
    bool read_paused; /* the output is over NET_OUT_HIGH: input waits */
    size_t linger_left;
    bool draining;
    uint64_t last_us;  /* the last frame, or the end of the last turn */
    uint64_t moved_us; /* the socket last took bytes, or since when it has had none to take */
    struct evbuffer_cb_entry *out_cb;
    /* the last response this connection served (previous_response_id) */
    char mem_id[160];
    char mem_provider[GW_NAME_MAX + 1];
    int mem_shape;
    struct gw_buf mem_items;
};

static struct gw_log_rate rate_ws;

static void ws_flush(struct net_ws *ws);
static void ws_close_soon(struct net_ws *ws);

/* ---- the upgrade ---- */

/* A header's comma-separated tokens include <tok> (case-insensitive). */
static bool
has_token(struct gw_str v, const char *tok)
{
    size_t n = strlen(tok), i = 0;

    while (i < v.len) {
        size_t a, b;

        while (i < v.len && (v.ptr[i] == ' ' || v.ptr[i] == '\t' || v.ptr[i] == ','))
            i++;
        a = i;
        while (i < v.len && v.ptr[i] != ',')
            i++;
        b = i;
        while (b > a && (v.ptr[b - 1] == ' ' || v.ptr[b - 1] == '\t'))
            b--;
        if (b - a == n && gw_str_eq_nocase((struct gw_str){v.ptr + a, n}, gw_str_c(tok)))
            return true;
    }
    return false;
}

bool
net_ws_wanted(const struct net_conn *c)
{
    struct gw_str url = {c->rq.url.data ? c->rq.url.data : "", c->rq.url.len}, v;
    const char *q = memchr(url.ptr, '?', url.len);

    if (q)
        url.len = (size_t)(q - url.ptr);
    return c->rq.method == HTTP_GET && gw_str_eq(url, GW_STR_LIT("/v1/responses")) &&
           net_conn_header(c, GW_STR_LIT("upgrade"), &v) && has_token(v, "websocket");
}

static void
ws_log(struct net_ws *ws, const char *code, const char *msg)
{
    struct gw_log_ctx ctx = {(int)ws->c->w->id, ws->c->id, NULL};
    uint64_t suppressed;

    if (gw_log_rate_pass(&rate_ws, &suppressed))
        GW_LOG(GW_LOG_WARN, &ctx, code, "%s (%llu more since the last line)", msg,
               (unsigned long long)suppressed);
}

/* ---- the turn's sink: SSE events to text messages ---- */

/* One event to the client, tagged with the turn's stream_id when the create had one. */
static void
ws_send_event(struct net_ws *ws, const char *p, size_t n, struct gw_str lane)
{
    struct gw_buf tagged = {0};
    enum gw_code rc;

    if (lane.len) {
        rc = net_ws_tag((struct gw_str){p, n}, lane, &tagged);
        if (rc == GW_OK)
            rc = net_wsio_text(&ws->io, tagged.data, tagged.len);
        gw_buf_fini(&tagged);
    } else {
        rc = net_wsio_text(&ws->io, p, n);
    }
    if (rc != GW_OK)
        ws_log(ws, "ws_send_failed", "a WebSocket event could not be queued");
    ws_flush(ws);
}

static void
turn_send(struct net_ws_turn *t, const char *p, size_t n)
{
    ws_send_event(t->ws, p, n, (struct gw_str){t->lane.data, t->lane.len});
}

static int
on_sse_event(void *arg, const struct gw_sse_event *ev)
{
    struct net_ws_turn *t = arg;

    if (!ev->data.len || gw_str_eq(ev->data, GW_STR_LIT("[DONE]")))
        return 0; /* keep-alives and a Chat-style end: nothing to say on a socket */
    if (net_ws_event_final(ev->event.len ? ev->event : net_ws_event_type(ev->data)))
        t->final_sent = true;
    turn_send(t, ev->data.ptr, ev->data.len);
    return 0;
}

/* response.failed for a turn that ends without its final event: a refusal made before
 * any event (<status> and the gw code of the head), or an answer broken off (<code>). */
static void
turn_failed(struct net_ws_turn *t, int status, const char *gw_code)
{
    struct gw_buf ev = {0};

    if (t->final_sent)
        return;
    t->final_sent = true;
    if (net_ws_failed_event(status, gw_str_c(gw_code), gw_str_c(t->req_id),
                            (struct gw_str){t->err.data ? t->err.data : "", t->err.len},
                            net_now_ms() / 1000, &ev) == GW_OK)
        turn_send(t, ev.data, ev.len);
    gw_buf_fini(&ev);
}

static struct net_ws_turn *
turn_of(struct net_sink *k)
{
    struct net_ws_turn *t = ((struct net_conn *)k->ctx)->wst;

    GW_CHECK_OBJ(t, NET_WS_TURN_MAGIC);
    return t;
}

static void
copy_hdr(char *dst, size_t cap, struct gw_str v)
{
    size_t n = v.len < cap - 1 ? v.len : cap - 1;

    memcpy(dst, v.ptr, n);
    dst[n] = '\0';
}

static void
ws_head(struct net_sink *k, int status, const struct net_hdr *hdrs, size_t n_hdrs, size_t length)
{
    struct net_ws_turn *t = turn_of(k);
    size_t i;

    t->status = status;
    for (i = 0; i < n_hdrs; i++) {
        if (gw_str_eq_nocase(hdrs[i].name, GW_STR_LIT("x-gw-code")))
            copy_hdr(t->gw_code, sizeof(t->gw_code), hdrs[i].value);
        else if (gw_str_eq_nocase(hdrs[i].name, GW_STR_LIT("x-request-id")))
            copy_hdr(t->req_id, sizeof(t->req_id), hdrs[i].value);
    }
    /* nothing on the wire: a socket has no status line */
    t->sse = status == 200 && length == NET_SINK_STREAMED;
}

static void
ws_data(struct net_sink *k, const char *p, size_t n)
{
    struct net_ws_turn *t = turn_of(k);

    if (t->sse) {
        if (gw_sse_feed(&t->parser, p, n, on_sse_event, t) != GW_OK)
            turn_failed(t, 502, gw_code_str(GW_E_WS_UPSTREAM_CLOSED));
        return;
    }
    if (t->err.len + n <= NET_WS_ERR_MAX)
        gw_buf_append(&t->err, p, n); /* out of memory: the event says the code alone */
}

static void
ws_end(struct net_sink *k)
{
    struct net_ws_turn *t = turn_of(k);

    if (t->sse)
        return;
    if (t->status == 200) {
        /* a whole answer (not streamed): one message, as it is */
        t->final_sent = true;
        turn_send(t, t->err.data ? t->err.data : "", t->err.len);
        return;
    }
    /* no x-gw-code: an upstream's own error passed back (its code is in the body) */
    turn_failed(t, t->status, t->gw_code);
}

static void
ws_abort(struct net_sink *k, enum gw_code code)
{
    struct net_ws_turn *t = turn_of(k);

    (void)code;
    turn_failed(t, 502, gw_code_str(GW_E_WS_UPSTREAM_CLOSED));
}

static size_t
ws_queued(const struct net_sink *k)
{
    const struct net_conn *rc = k->ctx;

    return net_conn_output_len(rc->wst->ws->c);
}

static const struct net_sink_ops ws_sink_ops = {
    .head = ws_head,
    .data = ws_data,
    .end = ws_end,
    .abort = ws_abort,
    .queued = ws_queued,
};

void
net_ws_sink(struct net_conn *rc, struct net_sink *out)
{
    out->ops = &ws_sink_ops;
    out->ctx = rc;
}

/* ---- turns ---- */

static void
turn_free(struct net_ws_turn *t)
{
    struct net_ws *ws = t->ws;

    if (ws->turn == t)
        ws->turn = NULL;
    net_body_release(&t->rc.body_held);
    gw_conf_release(t->rc.conf);
    net_h1req_fini(&t->rc.rq);
    gw_sse_fini(&t->parser);
    gw_buf_fini(&t->err);
    gw_buf_fini(&t->lane);
    explicit_bzero(t->rc.key_seen, sizeof(t->rc.key_seen));
    t->magic_ = 0;
    t->rc.magic_ = 0;
    gw_free(t);
}

/* The client is gone (close frame, EOF, the connection freed): a running request is
 * cancelled like an HTTP/1.1 client's (slot, permit, row). */
static void
turn_cancel(struct net_ws *ws)
{
    struct net_ws_turn *t = ws->turn;
    struct net_stream *s;

    if (!t)
        return;
    s = t->rc.stream;
    if (s) {
        t->rc.stream = NULL;
        net_stream_client_gone(s);
    }
    turn_free(t);
}

/* Headers of the upgrade that belong to the socket, not to the requests on it. */
static bool
hop_header(struct gw_str n)
{
    static const char *const hop[] = {"connection",
                                      "upgrade",
                                      "sec-websocket-key",
                                      "sec-websocket-version",
                                      "sec-websocket-extensions",
                                      "sec-websocket-protocol",
                                      "content-length",
                                      "transfer-encoding",
                                      "content-encoding",
                                      "content-type"};
    size_t i;

    for (i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        if (gw_str_eq_nocase(n, gw_str_c(hop[i])))
            return true;
    return false;
}

static enum gw_code
turn_request(struct net_ws_turn *t, const struct net_conn *c)
{
    struct net_h1req *r = &t->rc.rq;
    enum gw_code rc = GW_OK;
    unsigned i;

    const char *q = c->rq.url.len ? memchr(c->rq.url.data, '?', c->rq.url.len) : NULL;

    r->method = HTTP_POST;
    rc = gw_buf_append_cstr(&r->url, "/v1/responses");
    if (rc == GW_OK && q) /* the upgrade's query (?key= among others) goes with every turn */
        rc = gw_buf_append(&r->url, q, c->rq.url.len - (size_t)(q - c->rq.url.data));
    for (i = 0; rc == GW_OK && i < c->rq.n_hdrs; i++) {
        struct gw_str n, v;

        net_conn_header_at(c, i, &n, &v);
        if (!hop_header(n))
            rc = net_h1req_add_header(r, n, v);
    }
    if (rc == GW_OK)
        rc = net_h1req_add_header(r, GW_STR_LIT("content-type"), GW_STR_LIT("application/json"));
    return rc;
}

static struct net_ws_turn *
turn_new(struct net_ws *ws)
{
    struct net_conn *c = ws->c;
    struct net_ws_turn *t = gw_calloc(1, sizeof(*t));

    if (!t)
        return NULL;
    t->magic_ = NET_WS_TURN_MAGIC;
    t->ws = ws;
    t->rc.magic_ = NET_CONN_MAGIC;
    t->rc.w = c->w;
    t->rc.id = c->id;
    t->rc.wst = t;
    t->rc.state = NET_CONN_BUSY;
    t->rc.idle_timeout_secs = c->idle_timeout_secs;
    net_h1req_init(&t->rc.rq, &c->rq.lim);
    gw_sse_init(&t->parser, 0);
    /* the connection's gateway key: every turn sends the same one */
    memcpy(t->rc.key_seen, c->key_seen, sizeof(c->key_seen));
    t->rc.key_seen_len = c->key_seen_len;
    memcpy(t->rc.key_seen_digest, c->key_seen_digest, sizeof(c->key_seen_digest));
    ws->turn = t;
    return t;
}

/* A refusal before the pipeline: through the turn's sink, so it is response.failed. */
static void
turn_refuse(struct net_ws_turn *t, enum gw_code code, const char *why)
{
    net_respond_error(&t->rc, NULL, code, why, NULL, 0);
    turn_free(t);
}

/* Starts the response.create waiting in ws->pending. */
static void
turn_start(struct net_ws *ws)
{
    struct net_ws_turn *t;
    const char *why = NULL;
    enum gw_code code;

    ws->has_pending = false;
    t = turn_new(ws);
    if (!t || turn_request(t, ws->c) != GW_OK) {
        struct gw_buf ev = {0};

        if (t)
            turn_free(t);
        gw_buf_reset(&ws->pending);
        if (net_ws_error_event(GW_E_NOMEM, "out of memory", &ev) == GW_OK)
            ws_send_event(ws, ev.data, ev.len,
                          (struct gw_str){ws->pending_lane.data, ws->pending_lane.len});
        gw_buf_reset(&ws->pending_lane);
        gw_buf_fini(&ev);
        return;
    }
    t->lane = ws->pending_lane;
    memset(&ws->pending_lane, 0, sizeof(ws->pending_lane));
    t->rc.rq.body = ws->pending;
    t->rc.rq.has_body = true;
    t->rc.rq.content_length = ws->pending.len;
    memset(&ws->pending, 0, sizeof(ws->pending));
    code = net_pipeline_head(&t->rc, &why);
    if (code != GW_OK) {
        turn_refuse(t, code, why);
        return;
    }
    if (!gw_budget_take(&net_body_budget, t->rc.rq.body.len)) {
        turn_refuse(t, GW_E_BUSY,
                    "the gateway holds too many request bodies (server.max_buffered_body_mb); "
                    "retry shortly");
        return;
    }
    t->rc.body_held = t->rc.rq.body.len;
    net_pipeline_start(&t->rc); /* t may be gone when this returns */
}

void
net_ws_response_done(struct net_conn *rc)
{
    struct net_ws_turn *t = rc->wst;
    struct net_ws *ws = t->ws;
    struct net_conn *c = ws->c;

    GW_CHECK_OBJ(t, NET_WS_TURN_MAGIC);
    if (!t->final_sent)
        turn_failed(t, 502, gw_code_str(GW_E_WS_UPSTREAM_CLOSED)); /* no end: say so */
    /* the key the turn used is the connection's last one */
    memcpy(c->key_seen, rc->key_seen, sizeof(c->key_seen));
    c->key_seen_len = rc->key_seen_len;
    memcpy(c->key_seen_digest, rc->key_seen_digest, sizeof(c->key_seen_digest));
    turn_free(t);
    ws->last_us = net_mono_us();
    if (ws->draining && !ws->closing) {
        net_wsio_close(&ws->io, NET_WS_CLOSE_GOING_AWAY, "server shutting down");
        ws_flush(ws);
        ws_close_soon(ws);
    }
}

/* ---- messages ---- */

static void
send_error(struct net_ws *ws, enum gw_code code, const char *why, const struct gw_buf *lane)
{
    struct gw_buf ev = {0};

    if (net_ws_error_event(code, why, &ev) == GW_OK)
        ws_send_event(ws, ev.data, ev.len, (struct gw_str){lane->data, lane->len});
    gw_buf_fini(&ev);
}

/* A complete message, from inside net_wsio_feed: checked here, started after the feed
 * (the pipeline may answer at once and queue frames). */
static void
on_msg(void *arg, const char *p, size_t n, bool binary)
{
    static const struct gw_buf none = {0};
    struct net_ws *ws = arg;
    struct gw_buf body = {0}, lane = {0};
    const char *why = NULL;
    enum gw_code code;

    if (ws->closing)
        return;
    if (binary) {
        send_error(ws, GW_E_WS_BAD_MESSAGE, "messages are JSON text, not binary", &none);
        return;
    }
    code = net_ws_create_body(p, n, &body, &lane, &why);
    if (code != GW_OK)
        send_error(ws, code, code == GW_E_NOMEM ? "out of memory" : why, &lane);
    else if (ws->turn || ws->has_pending)
        send_error(ws, GW_E_WS_TURN_RUNNING,
                   "a response is in progress on this connection: send the next "
                   "response.create after its final event",
                   &lane);
    else if (ws->draining)
        send_error(ws, GW_E_SHUTTING_DOWN, "the gateway is shutting down", &lane);
    if (code != GW_OK || ws->turn || ws->has_pending || ws->draining) {
        gw_buf_fini(&body);
        gw_buf_fini(&lane);
        return;
    }
    gw_buf_fini(&ws->pending);
    gw_buf_fini(&ws->pending_lane);
    ws->pending = body;
    ws->pending_lane = lane;
    ws->has_pending = true;
}

/* ---- the connection ---- */

/* Moves the frames wslay made to the socket. */
static void
ws_flush(struct net_ws *ws)
{
    if (ws->io.out.len) {
        net_conn_write(ws->c, ws->io.out.data, ws->io.out.len);
        gw_buf_reset(&ws->io.out);
    }
}

static void
ws_timer_arm(struct net_ws *ws, unsigned secs)
{
    struct timeval tv = {(time_t)secs, 0};

    evtimer_add(ws->timer, &tv);
}

/* Lingering close, once the last frame is written: half-close and discard what the
 * client still sends (the rest of an oversized message, its close frame) for a short
 * while and a bounded size, so the kernel does not reset the connection and destroy our
 * close frame before the client reads it. EOF or the timer closes. */
static void
ws_linger(struct net_ws *ws)
{
    struct net_conn *c = ws->c;

    if (ws->lingering)
        return;
    ws->lingering = true;
    net_conn_uncork(c);          /* before the half-close */
    net_sockread_enable(&c->rd); /* paused input (read_paused) is discarded now */
    if (c->flags & NET_CONN_F_TLS)
        net_tls_close_notify(c->bev);
    shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    ws_timer_arm(ws, NET_WS_LINGER_SECS);
}

/* No more messages; the socket closes once what is queued is written (bounded by the
 * idle timeout) and a lingering close. */
static void
ws_close_soon(struct net_ws *ws)
{
    struct bufferevent *bev = ws->c->bev;

    if (ws->closing)
        return;
    ws->closing = true;
    ws->linger_left = ws->c->rq.lim.max_body + NET_WS_LINGER_BYTES;
    turn_cancel(ws);
    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    net_conn_uncork(ws->c); /* what waits in the cork, queued or sent */
    if (net_conn_output_len(ws->c))
        ws_timer_arm(ws, ws->c->idle_timeout_secs);
    else
        ws_linger(ws);
}

/* While closing: what comes is dropped, up to linger_left bytes. */
static void
ws_discard(struct net_ws *ws)
{
    struct evbuffer *in = bufferevent_get_input(ws->c->bev);
    size_t n = evbuffer_get_length(in);

    evbuffer_drain(in, n);
    if (n >= ws->linger_left) {
        ws->linger_left = 0;
        net_sockread_disable(&ws->c->rd);
        ws_timer_arm(ws, 0); /* more than a fair client sends: close now */
        return;
    }
    ws->linger_left -= n;
}

static void
ws_read(struct net_ws *ws)
{
    struct evbuffer *in = bufferevent_get_input(ws->c->bev);

    while (!ws->closing && evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v;
        size_t n;

        if (net_conn_output_len(ws->c) > NET_OUT_HIGH) {
            /* a client that sends (pings) and does not read: no more input until the
             * output drains (ws_on_write), so the answers to it stay bounded */
            ws->read_paused = true;
            net_sockread_disable(&ws->c->rd);
            return;
        }
        if (evbuffer_peek(in, NET_WS_FEED, NULL, &v, 1) < 1)
            break;
        n = v.iov_len < NET_WS_FEED ? v.iov_len : NET_WS_FEED;
        ws->io.frame_seen = false;
        net_wsio_feed(&ws->io, v.iov_base, n);
        evbuffer_drain(in, n);
        if (ws->io.frame_seen)
            ws->last_us = net_mono_us();
        ws_flush(ws);
        if (net_wsio_close_received(&ws->io) || net_wsio_done(&ws->io)) {
            ws_close_soon(ws); /* the client closed: its running turn is cancelled */
            return;
        }
        if (ws->has_pending)
            turn_start(ws);
    }
}

static void
ws_on_read(struct bufferevent *bev, void *arg)
{
    struct net_ws *ws = arg;

    (void)bev;
    GW_CHECK_OBJ(ws, NET_WS_MAGIC);
    if (ws->closing)
        ws_discard(ws);
    else
        ws_read(ws);
}

static void
ws_on_write(struct bufferevent *bev, void *arg)
{
    struct net_ws *ws = arg;

    GW_CHECK_OBJ(ws, NET_WS_MAGIC);
    if (ws->closing) {
        if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
            ws_linger(ws);
        return;
    }
    if (ws->read_paused) {
        ws->read_paused = false;
        net_sockread_enable(&ws->c->rd);
        ws_read(ws);
        if (ws->closing)
            return;
    }
    if (ws->turn && ws->turn->rc.stream)
        net_stream_on_drain(ws->turn->rc.stream);
}

static void
ws_on_event(struct bufferevent *bev, short what, void *arg)
{
    struct net_ws *ws = arg;

    (void)bev;
    GW_CHECK_OBJ(ws, NET_WS_MAGIC);
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        net_conn_close(ws->c); /* the client is gone: its turn is cancelled in there */
}

/* The socket's output buffer changed: bytes taken by the socket move the stall clock. */
static void
ws_on_output(struct evbuffer *out, const struct evbuffer_cb_info *info, void *arg)
{
    struct net_ws *ws = arg;

    if (info->n_deleted || evbuffer_get_length(out) == info->n_added)
        ws->moved_us = net_mono_us(); /* taken, or the first bytes to wait */
}

static void
ws_on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct net_ws *ws = arg;
    uint64_t idle_us, now = net_mono_us();

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(ws, NET_WS_MAGIC);
    if (ws->closing) {
        net_conn_close(ws->c);
        return;
    }
    idle_us = (uint64_t)ws->c->idle_timeout_secs * 1000000u;
    if (idle_us && net_conn_output_len(ws->c) && now - ws->moved_us >= idle_us) {
        /* a client that takes no byte for that long does not hold its turn's slot */
        ws_log(ws, "ws_stalled", "a WebSocket client read nothing for idle_timeout_secs: closed");
        net_conn_close(ws->c);
        return;
    }
    if (!ws->turn && idle_us && now - ws->last_us >= idle_us) {
        net_wsio_close(&ws->io, NET_WS_CLOSE_GOING_AWAY, "idle timeout");
        ws_flush(ws);
        ws_close_soon(ws);
        return;
    }
    ws_timer_arm(ws, 1);
}

enum gw_code
net_ws_upgrade(struct net_conn *c, const char **why)
{
    struct gw_str key = {0}, ver = {0}, conn = {0};
    struct net_ws *ws;
    enum gw_code code;
    char accept[29];
    struct gw_buf h = {0};

    /* judged as the POST /v1/responses its turns stand for: the key, the endpoint */
    c->rq.method = HTTP_POST;
    code = net_pipeline_head(c, why);
    c->rq.method = HTTP_GET;
    gw_conf_release(c->conf); /* each turn takes its own snapshot */
    c->conf = NULL;
    if (code != GW_OK)
        return code;
    if (c->w->draining) {
        *why = "the gateway is shutting down";
        return GW_E_SHUTTING_DOWN;
    }
    if (!net_conn_header(c, GW_STR_LIT("connection"), &conn) || !has_token(conn, "upgrade") ||
        !net_conn_header(c, GW_STR_LIT("sec-websocket-version"), &ver) ||
        !gw_str_eq(ver, GW_STR_LIT("13")) ||
        !net_conn_header(c, GW_STR_LIT("sec-websocket-key"), &key) ||
        !net_ws_accept_key(key, accept) || c->rq.has_body) {
        *why = "a WebSocket upgrade needs Connection: Upgrade, Sec-WebSocket-Version 13, a "
               "Sec-WebSocket-Key and no body";
        return GW_E_HTTP_PARSE;
    }
    ws = gw_calloc(1, sizeof(*ws));
    if (!ws || !(ws->timer = evtimer_new(c->w->base, ws_on_timer, ws)) ||
        net_wsio_init(&ws->io, c->rq.lim.max_body, on_msg, ws) != GW_OK) {
        if (ws && ws->timer)
            event_free(ws->timer);
        gw_free(ws);
        *why = "out of memory";
        return GW_E_NOMEM;
    }
    ws->magic_ = NET_WS_MAGIC;
    ws->c = c;
    ws->last_us = net_mono_us();
    if (gw_buf_append_cstr(&h, "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n"
                               "connection: Upgrade\r\nsec-websocket-accept: ") != GW_OK ||
        gw_buf_append(&h, accept, 28) != GW_OK || gw_buf_append_cstr(&h, "\r\n\r\n") != GW_OK) {
        gw_buf_fini(&h);
        net_ws_free(ws);
        *why = "out of memory";
        return GW_E_NOMEM;
    }
    c->ws = ws;
    c->flags &= ~NET_CONN_F_FRESH;
    c->state = NET_CONN_BUSY; /* the socket is ours: http1.c reads no more requests on it */
    net_deadline_stop(&c->dl);
    net_conn_write(c, h.data, h.len);
    gw_buf_fini(&h);
    ws->moved_us = ws->last_us;
    ws->out_cb = evbuffer_add_cb(bufferevent_get_output(c->bev), ws_on_output, ws);
    bufferevent_setcb(c->bev, ws_on_read, ws_on_write, ws_on_event, ws);
    bufferevent_enable(c->bev, EV_WRITE);
    net_sockread_enable(&c->rd); /* reads for the new callbacks */
    ws_timer_arm(ws, 1);
    {
        /* http-parser stops at the head's last CR: its LF is the head's, not a frame's */
        struct evbuffer *in = bufferevent_get_input(c->bev);
        char lf;

        if (evbuffer_copyout(in, &lf, 1) == 1 && lf == '\n')
            evbuffer_drain(in, 1);
    }
    ws_read(ws); /* frames sent right behind the handshake */
    return GW_OK;
}

void
net_ws_free(struct net_ws *ws)
{
    GW_CHECK_OBJ(ws, NET_WS_MAGIC);
    turn_cancel(ws);
    if (ws->out_cb)
        evbuffer_remove_cb_entry(bufferevent_get_output(ws->c->bev), ws->out_cb);
    if (ws->c && ws->c->ws == ws)
        ws->c->ws = NULL;
    if (ws->timer)
        event_free(ws->timer);
    net_wsio_fini(&ws->io);
    gw_buf_fini(&ws->pending);
    gw_buf_fini(&ws->pending_lane);
    gw_buf_fini(&ws->mem_items);
    ws->magic_ = 0;
    gw_free(ws);
}

void
net_ws_drain(struct net_conn *c)
{
    struct net_ws *ws = c->ws;

    if (ws->closing || ws->draining)
        return;
    ws->draining = true;
    if (ws->turn)
        return; /* closed when it ends (net_ws_response_done) */
    net_wsio_close(&ws->io, NET_WS_CLOSE_GOING_AWAY, "server shutting down");
    ws_flush(ws);
    ws_close_soon(ws);
}

/* ---- the remembered response (previous_response_id) ---- */

bool
net_ws_recall(const struct net_conn *rc, struct gw_str id, char provider[GW_NAME_MAX + 1],
              int *shape, struct gw_buf *items)
{
    const struct net_ws *ws = rc->wst ? rc->wst->ws : NULL;

    if (!ws || !ws->mem_id[0] || !gw_str_eq(id, gw_str_c(ws->mem_id)))
        return false;
    gw_buf_reset(items);
    if (gw_buf_append(items, ws->mem_items.data, ws->mem_items.len) != GW_OK)
        return false;
    memcpy(provider, ws->mem_provider, GW_NAME_MAX + 1);
    *shape = ws->mem_shape;
    return true;
}

void
net_ws_remember(struct net_conn *rc, const char *id, const char *provider, int shape,
                const char *items, size_t n)
{
    struct net_ws *ws = rc->wst ? rc->wst->ws : NULL;

    if (!ws)
        return;
    ws->mem_id[0] = '\0';
    gw_buf_reset(&ws->mem_items);
    if (strlen(id) >= sizeof(ws->mem_id) || gw_buf_append(&ws->mem_items, items, n) != GW_OK)
        return;
    snprintf(ws->mem_id, sizeof(ws->mem_id), "%s", id);
    snprintf(ws->mem_provider, sizeof(ws->mem_provider), "%s", provider);
    ws->mem_shape = shape;
}
