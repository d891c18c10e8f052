/* SPDX-License-Identifier: MIT
 * net/http2.c - the server side of HTTP/2 (DESIGN.md 1): one nghttp2 server session per
 * client connection, on the connection's worker. Each stream is one request through the
 * same pipeline as HTTP/1.1's: its head is judged (endpoint, gateway key) when its
 * header block ends, its body is collected under server.max_body_mb and the server-wide
 * body budget, and the pipeline answers through the stream's sink (net/sink.h): head ->
 * a response with a data provider, data -> bytes queued on the stream, end -> the last
 * DATA frame, abort -> RST_STREAM INTERNAL_ERROR. The stream's queued bytes are the
 * sink's queued(), so a client that does not open its window pauses the upstream read
 * (relay.c, NET_OUT_HIGH); frames leave only while the socket's output is below
 * NET_OUT_HIGH, so a client that does not read pauses it too.
 * Protections (the HTTP/2 attacks of recent years): at most NET_H2_MAX_STREAMS streams at
 * once (SETTINGS_MAX_CONCURRENT_STREAMS, enforced by nghttp2); client resets, and resets
 * nghttp2 makes for the client's protocol errors, beyond a token bucket (rapid reset),
 * and PING, SETTINGS, PRIORITY, empty DATA and tiny WINDOW_UPDATE frames beyond another
 * (floods, data dribble) end the connection with GOAWAY ENHANCE_YOUR_CALM; at most
 * NET_H2_MAX_CONTINUATIONS CONTINUATION frames a header block; a header list over
 * server.max_header_kb / max_headers gets 431 on its stream, one far over it (an HPACK
 * bomb) ENHANCE_YOUR_CALM; acks queued for a client that does not read are bounded
 * (nghttp2's max_outbound_ack). Timeouts: an answer the client takes no byte of for
 * server.idle_timeout_secs (a zero window) resets its stream, a socket that takes none
 * for that long closes the connection, and so does no stream for that long; a header
 * block past header_timeout_secs closes it, a body past body_timeout_secs gets 408. A
 * drain sends GOAWAY and closes once the running streams ended.
 * Owns:    struct net_h2 (the session, its events) and each struct net_h2s (a stream,
 *          its request conn and the answer bytes not yet framed); the stream's request
 *          conn owns its net_stream while the pipeline answers (net_stream_client_gone
 *          hands it back when the stream closes first).
 * Threads: the owning worker only.
 * See:     net/net-priv.h, net/http1.c, net/sink.h, tests/e2e/test_http2.py
 */
#include "net/net-priv.h"

#include <ctype.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/budget.h"
#include "core/log.h"
#include "net/logger.h"
#include "net/sink.h"

#define NET_H2_MAGIC 0x68327373u
#define NET_H2_MAX_STREAMS 100
#define NET_H2_WINDOW (1u << 20)      /* a stream's receive window (request bodies) */
#define NET_H2_CONN_WINDOW (4u << 20) /* the connection's */
#define NET_H2_MAX_CONTINUATIONS 8
#define NET_H2_MAX_OUTBOUND_ACK 100
/* Client RST_STREAM frames: a burst, then so many a second (rapid reset, CVE-2023-44487) */
#define NET_H2_RESET_BURST 100
#define NET_H2_RESET_RATE 20
/* PING, SETTINGS, PRIORITY and empty DATA frames: a burst, then so many a second */
#define NET_H2_CTRL_BURST 100
#define NET_H2_CTRL_RATE 20
#define NET_H2_TINY_WINDOW 1024 /* a WINDOW_UPDATE below this counts as a control frame */
#define NET_H2_BOMB 4           /* a header list this many times the limit ends the connection */
#define NET_H2_RECV_CHUNK 16384 /* input fed at a time: a closing session stops between */

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* A token bucket: <burst> tokens, refilled at <rate> a second. */
struct h2_bucket {
    uint64_t at_ms;
    uint32_t tokens;
};

struct net_h2s {
    uint32_t magic_;
    struct net_h2 *h;
    struct net_h2s *prev, *next;
    int32_t id;
    struct net_conn rc;  /* the request, as the pipeline reads it */
    size_t hdr_bytes;    /* the header list's size as RFC 9113 counts it */
    enum gw_code refuse; /* set while reading the head: answered when it ends */
    bool answered;       /* refused before the pipeline (the answer is queued) */
    bool started;        /* handed to net_pipeline_start */
    bool req_done;       /* the client ended its side */
    bool head_sent, ended, reset, deferred;
    uint64_t t0_us;    /* the stream's first header: its head and body deadlines */
    uint64_t moved_us; /* answer bytes last taken (the window moved), or first queued */
    struct gw_buf out; /* answer bytes the data provider has not taken yet ... */
    size_t out_off;    /* ... from here */
};

struct net_h2 {
    struct net_conn *c;
    nghttp2_session *sess;
    struct net_h2s *streams;
    unsigned n_streams;
    struct event *send_ev; /* made active by the sink: frame and write on this loop turn */
    struct event *timer;   /* idle and stall checks; the close after a flush */
    struct h2_bucket resets, ctrl;
    unsigned cont;      /* CONTINUATION frames of the header block being read */
    bool closing;       /* no more input; flushing, then closed */
    bool abuse;         /* a callback failed the session for a bound the client broke */
    bool draining;      /* GOAWAY sent: close once the streams ended */
    uint64_t quiet_us;  /* since when no stream lives (0: one does) */
    uint64_t wrote_us;  /* the socket last took bytes, or the first byte waited */
    unsigned tick_secs; /* the timer's period: the shortest of the client timeouts */
};

/* One per kind of warning line (gw_log_rate); any worker. */
static struct gw_log_rate rate_calm, rate_proto, rate_head, rate_stream_stall, rate_conn_stall;

/* ---- small parts ---- */

int
net_h2_preface(const char *p, size_t n)
{
    size_t want = sizeof(preface) - 1;

    if (memcmp(p, preface, n < want ? n : want) != 0)
        return -1;
    return n >= want ? 1 : 0;
}

static void
bucket_init(struct h2_bucket *b, uint32_t burst)
{
    b->at_ms = net_mono_us() / 1000;
    b->tokens = burst;
}

static bool
bucket_take(struct h2_bucket *b, uint32_t burst, uint32_t rate)
{
    uint64_t now = net_mono_us() / 1000;
    uint64_t add = (now - b->at_ms) * rate / 1000;

    if (add) {
        b->tokens = b->tokens + add > burst ? burst : (uint32_t)(b->tokens + add);
        b->at_ms = now;
    }
    if (!b->tokens)
        return false;
    b->tokens--;
    return true;
}

/* Microseconds from <t> to <now>; 0 when <t> is later (set after <now> was read). */
static uint64_t
since(uint64_t now, uint64_t t)
{
    return now > t ? now - t : 0;
}

static void
want_send(struct net_h2 *h)
{
    event_active(h->send_ev, 0, 0);
}

static void
timer_arm(struct net_h2 *h, unsigned secs)
{
    struct timeval tv = {(time_t)secs, 0};

    evtimer_add(h->timer, &tv);
}

static void
log_conn(struct net_h2 *h, struct gw_log_rate *rate, const char *code, const char *msg)
{
    struct gw_log_ctx ctx = {(int)h->c->w->id, h->c->id, NULL};
    uint64_t suppressed;

    /* what a hostile client causes is logged at most once a second a kind */
    if (gw_log_rate_pass(rate, &suppressed))
        GW_LOG(GW_LOG_WARN, &ctx, code, "%s (%llu more such lines since the last one)", msg,
               (unsigned long long)suppressed);
}

/* Stop reading; close once what is queued left (bounded by the idle timeout). */
static void
close_soon(struct net_h2 *h)
{
    struct bufferevent *bev = h->c->bev;

    h->closing = true;
    net_sockread_disable(&h->c->rd);
    bufferevent_setwatermark(bev, EV_WRITE, 0, 0);
    if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        timer_arm(h, 0);
    else
        timer_arm(h, h->c->idle_timeout_secs);
}

/* GOAWAY ENHANCE_YOUR_CALM: the client broke a bound (<what>); nghttp2 refuses its
 * further streams, and the connection closes once the GOAWAY is written. */
static void
calm_down(struct net_h2 *h, const char *what)
{
    if (h->closing)
        return;
    log_conn(h, &rate_calm, "h2_enhance_your_calm", what);
    nghttp2_session_terminate_session(h->sess, NGHTTP2_ENHANCE_YOUR_CALM);
    h->closing = true; /* input stops between chunks (on_read) */
    want_send(h);
}

/* ---- streams ---- */

static struct net_h2s *
stream_of(struct net_h2 *h, int32_t id)
{
    struct net_h2s *hs = nghttp2_session_get_stream_user_data(h->sess, id);

    if (hs)
        GW_CHECK_OBJ(hs, NET_H2_MAGIC);
    return hs;
}

static struct net_h2s *
stream_new(struct net_h2 *h, int32_t id)
{
    struct net_conn *c = h->c;
    struct net_h2s *hs = gw_calloc(1, sizeof(*hs));

    if (!hs)
        return NULL;
    hs->magic_ = NET_H2_MAGIC;
    hs->h = h;
    hs->id = id;
    hs->rc.magic_ = NET_CONN_MAGIC;
    hs->rc.w = c->w;
    hs->rc.id = c->id;
    hs->rc.h2s = hs;
    hs->rc.state = NET_CONN_HEAD;
    hs->rc.idle_timeout_secs = c->idle_timeout_secs;
    net_h1req_init(&hs->rc.rq, &c->rq.lim);
    /* the connection's last gateway key: its requests send the same one */
    memcpy(hs->rc.key_seen, c->key_seen, sizeof(c->key_seen));
    hs->rc.key_seen_len = c->key_seen_len;
    memcpy(hs->rc.key_seen_digest, c->key_seen_digest, sizeof(c->key_seen_digest));
    hs->next = h->streams;
    if (h->streams)
        h->streams->prev = hs;
    h->streams = hs;
    h->n_streams++;
    h->quiet_us = 0;
    hs->t0_us = net_mono_us();
    return hs;
}

static void
stream_free(struct net_h2s *hs)
{
    struct net_h2 *h = hs->h;

    if (hs->prev)
        hs->prev->next = hs->next;
    else
        h->streams = hs->next;
    if (hs->next)
        hs->next->prev = hs->prev;
    if (!--h->n_streams)
        h->quiet_us = net_mono_us();
    net_body_release(&hs->rc.body_held);
    gw_conf_release(hs->rc.conf);
    net_h1req_fini(&hs->rc.rq);
    gw_buf_fini(&hs->out);
    explicit_bzero(hs->rc.key_seen, sizeof(hs->rc.key_seen));
    hs->magic_ = 0;
    hs->rc.magic_ = 0;
    gw_free(hs);
}

/* The client is gone from the stream (reset, or the connection ended): a running
 * request is cancelled like an HTTP/1.1 client's (slot, permit, row). */
static void
stream_gone(struct net_h2s *hs)
{
    struct net_stream *s = hs->rc.stream;

    if (s) {
        hs->rc.stream = NULL;
        net_stream_client_gone(s);
    }
    stream_free(hs);
}

/* A refusal before the pipeline runs, on this stream only. */
static void
stream_refuse(struct net_h2s *hs, enum gw_code code, const char *why)
{
    hs->answered = true;
    if (code == GW_E_BUSY) {
        static const struct net_hdr retry[] = {
            {GW_STR_LIT("retry-after"), GW_STR_LIT("1")},
            {GW_STR_LIT("x-should-retry"), GW_STR_LIT("true")},
        };

        net_respond_error(&hs->rc, NULL, code, why, retry, 2);
    } else {
        net_respond_error(&hs->rc, NULL, code, why, NULL, 0);
    }
    gw_buf_fini(&hs->rc.rq.body); /* what came of it is not kept */
    net_body_release(&hs->rc.body_held);
    gw_conf_release(hs->rc.conf);
    hs->rc.conf = NULL;
}

static bool
body_reserve(struct net_h2s *hs, size_t want)
{
    if (want <= hs->rc.body_held)
        return true;
    if (!gw_budget_take(&net_body_budget, want - hs->rc.body_held))
        return false;
    hs->rc.body_held = want;
    return true;
}

static const char busy_why[] = "the gateway holds too many request bodies "
                               "(server.max_buffered_body_mb); retry shortly";

/* The header block ended: the pipeline judges the head, a declared body is reserved. */
static void
stream_head(struct net_h2s *hs)
{
    struct net_conn *rc = &hs->rc;
    const char *why = NULL;
    enum gw_code code;
    struct gw_str v;

    if (hs->refuse != GW_OK) {
        stream_refuse(hs, hs->refuse,
                      hs->refuse == GW_E_HEADERS_TOO_LARGE
                          ? "request head too large or too many headers"
                          : "out of memory");
        return;
    }
    code = net_pipeline_head(rc, &why);
    if (code != GW_OK) {
        stream_refuse(hs, code, why);
        return;
    }
    if (net_conn_header(rc, GW_STR_LIT("content-length"), &v)) {
        uint64_t n = 0;
        size_t i;

        for (i = 0; i < v.len && n <= rc->rq.lim.max_body; i++)
            n = n * 10 + (uint64_t)(v.ptr[i] - '0'); /* digits: nghttp2 checked them */
        if (n > rc->rq.lim.max_body) {
            stream_refuse(hs, GW_E_BODY_TOO_LARGE, "request body larger than server.max_body_mb");
            return;
        }
        if (n && !body_reserve(hs, (size_t)n)) {
            stream_refuse(hs, GW_E_BUSY, busy_why);
            return;
        }
    }
    rc->state = NET_CONN_BODY;
}

/* The client ended its side: the request goes to the pipeline. */
static void
stream_complete(struct net_h2s *hs)
{
    hs->req_done = true;
    if (hs->answered || hs->started)
        return;
    hs->started = true;
    hs->rc.state = NET_CONN_BUSY;
    net_pipeline_start(&hs->rc); /* may answer at once (net_h2_response_done) */
}

/* ---- nghttp2 callbacks (never free the session or close in here) ---- */

static int
on_begin_headers(nghttp2_session *sess, const nghttp2_frame *f, void *ud)
{
    struct net_h2 *h = ud;
    struct net_h2s *hs;

    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    hs = stream_new(h, f->hd.stream_id);
    if (!hs)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* out of memory: reset the stream */
    nghttp2_session_set_stream_user_data(sess, f->hd.stream_id, hs);
    return 0;
}

static void
take_method(struct net_h2s *hs, const uint8_t *v, size_t n)
{
    static const struct {
        const char *name;
        enum http_method m;
    } methods[] = {
#define XX(num, name, string) {#string, HTTP_##name},
        HTTP_METHOD_MAP(XX)
#undef XX
    };
    size_t i;

    for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        if (strlen(methods[i].name) == n && memcmp(methods[i].name, v, n) == 0) {
            hs->rc.rq.method = methods[i].m;
            return;
        }
    hs->rc.rq.method = HTTP_PURGE; /* a method the gateway serves nowhere */
}

static int
on_header(nghttp2_session *sess, const nghttp2_frame *f, const uint8_t *name, size_t namelen,
          const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    struct net_h2s *hs;
    struct net_h1req *r;
    enum gw_code rc;

    (void)sess;
    (void)flags;
    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* trailers: not read */
    hs = stream_of(ud, f->hd.stream_id);
    if (!hs)
        return 0;
    r = &hs->rc.rq;
    hs->hdr_bytes += namelen + valuelen + 32;
    if (hs->hdr_bytes > NET_H2_BOMB * (size_t)r->lim.max_header_bytes) {
        /* far past the limit: HPACK references make a small block decode into a huge
         * list (an HPACK bomb), and every byte of it costs time */
        ((struct net_h2 *)ud)->abuse = true;
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    if (hs->refuse != GW_OK)
        return 0;
    if (hs->hdr_bytes > r->lim.max_header_bytes) {
        hs->refuse = GW_E_HEADERS_TOO_LARGE;
        return 0;
    }
    if (namelen && name[0] == ':') {
        if (namelen == 7 && memcmp(name, ":method", 7) == 0) {
            take_method(hs, value, valuelen);
        } else if (namelen == 5 && memcmp(name, ":path", 5) == 0) {
            gw_buf_reset(&r->url);
            r->head_bytes += valuelen;
            if (gw_buf_append(&r->url, (const char *)value, valuelen) != GW_OK)
                hs->refuse = GW_E_NOMEM;
        }
        return 0; /* :scheme and :authority: nothing the pipeline reads */
    }
    rc = net_h1req_add_header(r, (struct gw_str){(const char *)name, namelen},
                              (struct gw_str){(const char *)value, valuelen});
    if (rc != GW_OK)
        hs->refuse = rc;
    return 0;
}

static int
on_data_chunk(nghttp2_session *sess, uint8_t flags, int32_t id, const uint8_t *data, size_t len,
              void *ud)
{
    struct net_h2s *hs = stream_of(ud, id);
    struct net_h1req *r;

    (void)sess;
    (void)flags;
    if (!hs || hs->answered || hs->started)
        return 0; /* a refused request's body is dropped */
    r = &hs->rc.rq;
    if (r->body.len + len > r->lim.max_body) {
        stream_refuse(hs, GW_E_BODY_TOO_LARGE, "request body larger than server.max_body_mb");
        return 0;
    }
    if (!body_reserve(hs, r->body.len + len)) {
        stream_refuse(hs, GW_E_BUSY, busy_why);
        return 0;
    }
    if (gw_buf_append(&r->body, (const char *)data, len) != GW_OK)
        stream_refuse(hs, GW_E_NOMEM, "out of memory");
    return 0;
}

static int
on_frame_recv(nghttp2_session *sess, const nghttp2_frame *f, void *ud)
{
    struct net_h2 *h = ud;
    struct net_h2s *hs;

    (void)sess;
    switch (f->hd.type) {
    case NGHTTP2_HEADERS:
        hs = stream_of(h, f->hd.stream_id);
        if (!hs)
            return 0;
        if (f->headers.cat == NGHTTP2_HCAT_REQUEST)
            stream_head(hs);
        if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
            stream_complete(hs);
        return 0;
    case NGHTTP2_DATA:
        if (f->hd.length == 0 && !(f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
            !bucket_take(&h->ctrl, NET_H2_CTRL_BURST, NET_H2_CTRL_RATE))
            calm_down(h, "too many empty DATA frames");
        hs = stream_of(h, f->hd.stream_id);
        if (hs && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
            stream_complete(hs);
        return 0;
    case NGHTTP2_WINDOW_UPDATE:
        /* tiny window increments make the answer leave in tiny frames (data dribble,
         * CVE-2019-9511): counted like control frames; clients open windows by KiBs */
        if (f->window_update.window_size_increment < NET_H2_TINY_WINDOW &&
            !bucket_take(&h->ctrl, NET_H2_CTRL_BURST, NET_H2_CTRL_RATE))
            calm_down(h, "too many tiny WINDOW_UPDATE frames");
        return 0;
    case NGHTTP2_RST_STREAM:
        if (!bucket_take(&h->resets, NET_H2_RESET_BURST, NET_H2_RESET_RATE))
            calm_down(h, "streams reset faster than the bound (rapid reset)");
        return 0;
    case NGHTTP2_PING:
    case NGHTTP2_SETTINGS:
        if (f->hd.flags & NGHTTP2_FLAG_ACK)
            return 0;
        /* fall through */
    case NGHTTP2_PRIORITY:
        if (!bucket_take(&h->ctrl, NET_H2_CTRL_BURST, NET_H2_CTRL_RATE))
            calm_down(h, "too many PING, SETTINGS or PRIORITY frames");
        return 0;
    default: return 0;
    }
}

static int
on_begin_frame(nghttp2_session *sess, const nghttp2_frame_hd *hd, void *ud)
{
    struct net_h2 *h = ud;

    (void)sess;
    /* nghttp2 bounds CONTINUATION frames itself (max_continuations); counted here too,
     * so a build without that bound is not open to the flood. */
    if (hd->type != NGHTTP2_CONTINUATION)
        h->cont = 0;
    else if (++h->cont > NET_H2_MAX_CONTINUATIONS)
        calm_down(h, "too many CONTINUATION frames in a header block");
    return 0;
}

static int
on_stream_close(nghttp2_session *sess, int32_t id, uint32_t error_code, void *ud)
{
    struct net_h2s *hs = stream_of(ud, id);

    (void)error_code;
    if (!hs)
        return 0;
    nghttp2_session_set_stream_user_data(sess, id, NULL);
    stream_gone(hs);
    return 0;
}

static int
on_frame_send(nghttp2_session *sess, const nghttp2_frame *f, void *ud)
{
    struct net_h2 *h = ud;
    struct net_h2s *hs;

    if (f->hd.type == NGHTTP2_RST_STREAM && f->rst_stream.error_code != NGHTTP2_NO_ERROR &&
        f->rst_stream.error_code != NGHTTP2_CANCEL &&
        f->rst_stream.error_code != NGHTTP2_INTERNAL_ERROR &&
        !bucket_take(&h->resets, NET_H2_RESET_BURST, NET_H2_RESET_RATE)) {
        /* streams the client made nghttp2 reset (a zero WINDOW_UPDATE, DATA on a closed
         * stream, streams over the cap): the same bound as its own resets */
        calm_down(h, "streams reset for protocol errors faster than the bound");
        return 0;
    }
    if ((f->hd.type != NGHTTP2_DATA && f->hd.type != NGHTTP2_HEADERS) ||
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    /* The answer is complete while the client still sends (a refused body): the rest
     * is not wanted (RFC 9113 8.1). */
    hs = stream_of(ud, f->hd.stream_id);
    if (hs && !hs->req_done && !hs->reset) {
        hs->reset = true;
        nghttp2_submit_rst_stream(sess, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_NO_ERROR);
    }
    return 0;
}

/* The data provider: the stream's queued answer bytes, as far as the windows allow. */
static ssize_t
read_answer(nghttp2_session *sess, int32_t id, uint8_t *buf, size_t length, uint32_t *data_flags,
            nghttp2_data_source *src, void *ud)
{
    struct net_h2s *hs = src->ptr;
    size_t avail = hs->out.len - hs->out_off, n = avail < length ? avail : length;

    (void)sess;
    (void)id;
    (void)ud;
    if (!n && !hs->ended) {
        hs->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    if (n) {
        memcpy(buf, hs->out.data + hs->out_off, n);
        hs->out_off += n;
        hs->moved_us = net_mono_us();
    }
    if (hs->out_off == hs->out.len) {
        gw_buf_reset(&hs->out);
        hs->out_off = 0;
        if (hs->ended)
            *data_flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return (ssize_t)n;
}

/* ---- the sink (net/sink.h) ---- */

static bool
hdr_skipped(struct gw_str n)
{
    static const char *const conn_specific[] = {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "te",
        "host",
    };
    size_t i;

    if (!net_h1_is_token(n))
        return true;
    for (i = 0; i < sizeof(conn_specific) / sizeof(conn_specific[0]); i++)
        if (gw_str_eq_nocase(n, gw_str_c(conn_specific[i])))
            return true;
    return false;
}

static bool
value_ok(struct gw_str v)
{
    return !memchr(v.ptr, '\r', v.len) && !memchr(v.ptr, '\n', v.len) && !memchr(v.ptr, 0, v.len);
}

static void
h2_head(struct net_sink *k, int status, const struct net_hdr *hdrs, size_t n_hdrs, size_t length)
{
    struct net_h2s *hs = ((struct net_conn *)k->ctx)->h2s;
    nghttp2_data_provider prd = {.source = {.ptr = hs}, .read_callback = read_answer};
    nghttp2_nv *nv = gw_calloc(n_hdrs + 2, sizeof(*nv));
    struct gw_buf names = {0};
    char st[16], len[24];
    size_t n = 0, i, off;
    bool ok = true;

    GW_CHECK_OBJ(hs, NET_H2_MAGIC);
    hs->head_sent = true;
    if (!nv || hs->reset) {
        gw_free(nv);
        if (!hs->reset)
            nghttp2_submit_rst_stream(hs->h->sess, NGHTTP2_FLAG_NONE, hs->id,
                                      NGHTTP2_INTERNAL_ERROR);
        hs->reset = true;
        want_send(hs->h);
        return;
    }
    /* HTTP/2 header names are lower case: copied lowered, back to back */
    for (i = 0; i < n_hdrs; i++)
        if (!hdr_skipped(hdrs[i].name) && value_ok(hdrs[i].value))
            ok &= gw_buf_append_str(&names, hdrs[i].name) == GW_OK;
    if (!ok)
        names.len = 0; /* out of memory: the headers go, the status stays */
    for (i = 0; i < names.len; i++)
        names.data[i] = (char)tolower((unsigned char)names.data[i]);
    snprintf(st, sizeof(st), "%d", status);
    nv[n++] = (nghttp2_nv){(uint8_t *)(uintptr_t) ":status", (uint8_t *)st, 7, strlen(st),
                           NGHTTP2_NV_FLAG_NONE};
    for (i = 0, off = 0; i < n_hdrs; i++) {
        if (hdr_skipped(hdrs[i].name) || !value_ok(hdrs[i].value))
            continue;
        if (off + hdrs[i].name.len > names.len)
            break; /* out of memory for the names */
        nv[n++] = (nghttp2_nv){(uint8_t *)names.data + off, (uint8_t *)(uintptr_t)hdrs[i].value.ptr,
                               hdrs[i].name.len, hdrs[i].value.len, NGHTTP2_NV_FLAG_NONE};
        off += hdrs[i].name.len;
    }
    if (length != NET_SINK_STREAMED) {
        snprintf(len, sizeof(len), "%zu", length);
        nv[n++] = (nghttp2_nv){(uint8_t *)(uintptr_t) "content-length", (uint8_t *)len, 14,
                               strlen(len), NGHTTP2_NV_FLAG_NONE};
    }
    if (nghttp2_submit_response(hs->h->sess, hs->id, nv, n, &prd) != 0)
        hs->reset = true; /* the stream is gone: what follows is dropped */
    gw_buf_fini(&names);
    gw_free(nv);
    want_send(hs->h);
}

static void
resume(struct net_h2s *hs)
{
    if (hs->deferred) {
        hs->deferred = false;
        nghttp2_session_resume_data(hs->h->sess, hs->id);
    }
    want_send(hs->h);
}

static void
h2_data(struct net_sink *k, const char *p, size_t n)
{
    struct net_h2s *hs = ((struct net_conn *)k->ctx)->h2s;

    if (hs->reset)
        return;
    if (hs->out.len == hs->out_off)
        hs->moved_us = net_mono_us(); /* a stall is counted from the first byte waiting */
    if (hs->out_off && hs->out_off >= hs->out.len / 2) {
        /* the taken half goes: the buffer does not grow with a long answer */
        memmove(hs->out.data, hs->out.data + hs->out_off, hs->out.len - hs->out_off);
        hs->out.len -= hs->out_off;
        hs->out_off = 0;
    }
    if (gw_buf_append(&hs->out, p, n) != GW_OK) {
        hs->reset = true;
        nghttp2_submit_rst_stream(hs->h->sess, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_INTERNAL_ERROR);
    }
    resume(hs);
}

static void
h2_end(struct net_sink *k)
{
    struct net_h2s *hs = ((struct net_conn *)k->ctx)->h2s;

    hs->ended = true;
    resume(hs);
}

static void
h2_abort(struct net_sink *k, enum gw_code code)
{
    struct net_h2s *hs = ((struct net_conn *)k->ctx)->h2s;

    (void)code;
    /* The answer breaks off: the stream is reset, the connection's others go on. */
    if (!hs->reset)
        nghttp2_submit_rst_stream(hs->h->sess, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_INTERNAL_ERROR);
    hs->reset = true;
    want_send(hs->h);
}

static size_t
h2_queued(const struct net_sink *k)
{
    const struct net_h2s *hs = ((const struct net_conn *)k->ctx)->h2s;

    return hs->out.len - hs->out_off;
}

static const struct net_sink_ops h2_sink_ops = {
    .head = h2_head,
    .data = h2_data,
    .end = h2_end,
    .abort = h2_abort,
    .queued = h2_queued,
};

void
net_h2_sink(struct net_conn *rc, struct net_sink *out)
{
    out->ops = &h2_sink_ops;
    out->ctx = rc;
}

void
net_h2_response_done(struct net_conn *rc)
{
    struct net_h2s *hs = rc->h2s;
    struct net_conn *c = hs->h->c;

    GW_CHECK_OBJ(hs, NET_H2_MAGIC);
    net_body_release(&rc->body_held);
    gw_conf_release(rc->conf);
    rc->conf = NULL;
    /* the key the request used is the connection's last one */
    memcpy(c->key_seen, rc->key_seen, sizeof(c->key_seen));
    c->key_seen_len = rc->key_seen_len;
    memcpy(c->key_seen_digest, rc->key_seen_digest, sizeof(c->key_seen_digest));
    if (!hs->head_sent && !hs->reset) {
        hs->reset = true; /* no answer at all: the client must not wait for one */
        nghttp2_submit_rst_stream(hs->h->sess, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_INTERNAL_ERROR);
    }
    want_send(hs->h);
}

/* ---- the connection ---- */

/* Frames what nghttp2 has to send while the socket's output is below NET_OUT_HIGH
 * (the write callback comes back below NET_OUT_LOW); then tells paused streams whose
 * queue shrank, and closes a session that has nothing left to do. */
static void
flush(struct net_h2 *h)
{
    struct evbuffer *out = bufferevent_get_output(h->c->bev);
    struct net_h2s *hs, *next;

    /* A TLS connection's frames reach SSL_write as they are added: the requests this
     * turn ended are settled first (net/settle.c). */
    net_settle_apply(h->c->w);
    while (evbuffer_get_length(out) < NET_OUT_HIGH) {
        const uint8_t *p;
        ssize_t n = nghttp2_session_mem_send(h->sess, &p);

        if (n < 0) {
            close_soon(h);
            return;
        }
        if (n == 0)
            break;
        if (evbuffer_get_length(out) == 0)
            h->wrote_us = net_mono_us(); /* a stall is counted from the first byte waiting */
        evbuffer_add(out, p, (size_t)n);
    }
    for (hs = h->streams; hs; hs = next) {
        next = hs->next;
        if (hs->rc.stream && hs->out.len - hs->out_off < NET_OUT_LOW)
            net_stream_on_drain(hs->rc.stream);
    }
    if (h->closing && !nghttp2_session_want_write(h->sess)) {
        close_soon(h);
        return;
    }
    if (!nghttp2_session_want_read(h->sess) && !nghttp2_session_want_write(h->sess))
        close_soon(h); /* GOAWAY both ways, or a terminated session */
    else if (h->draining && !h->n_streams && !nghttp2_session_want_write(h->sess))
        close_soon(h);
}

static void
on_send_ev(evutil_socket_t fd, short what, void *arg)
{
    struct net_h2 *h = arg;

    (void)fd;
    (void)what;
    if (!(h->closing && !(nghttp2_session_want_write(h->sess))))
        flush(h);
}

static void
on_read(struct bufferevent *bev, void *arg)
{
    struct net_h2 *h = arg;
    struct evbuffer *in = bufferevent_get_input(bev);

    while (!h->closing && evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v;
        size_t len;
        ssize_t n;

        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
            break;
        len = v.iov_len < NET_H2_RECV_CHUNK ? v.iov_len : NET_H2_RECV_CHUNK;
        n = nghttp2_session_mem_recv(h->sess, v.iov_base, len);
        if (n < 0) {
            /* a connection error (a flood nghttp2 caught, a protocol error, a bad
             * preface): GOAWAY when nghttp2 did not queue one, then close */
            log_conn(h, &rate_proto, "h2_protocol_error", nghttp2_strerror((int)n));
            nghttp2_session_terminate_session(
                h->sess,
                n == NGHTTP2_ERR_FLOODED || n == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS || h->abuse
                    ? NGHTTP2_ENHANCE_YOUR_CALM
                    : NGHTTP2_PROTOCOL_ERROR);
            h->closing = true;
            break;
        }
        evbuffer_drain(in, (size_t)n);
    }
    if (h->closing)
        evbuffer_drain(in, evbuffer_get_length(in));
    flush(h);
}

static void
on_write(struct bufferevent *bev, void *arg)
{
    struct net_h2 *h = arg;

    h->wrote_us = net_mono_us();
    if (h->closing && evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
        timer_arm(h, 0);
        return;
    }
    flush(h);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
    struct net_h2 *h = arg;

    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        net_conn_close(h->c); /* the client is gone: its streams are cancelled */
}

/* A stream whose request did not arrive in time: a head past header_timeout_secs
 * keeps the connection in its header block (nothing else may come), so the connection
 * closes; a body past body_timeout_secs is answered 408 on its stream. */
static bool
deadlines(struct net_h2 *h, uint64_t now)
{
    const struct net_conn *c = h->c;
    struct net_h2s *hs;

    for (hs = h->streams; hs; hs = hs->next) {
        if (hs->answered || hs->started)
            continue;
        if (hs->rc.state == NET_CONN_HEAD &&
            since(now, hs->t0_us) >= c->header_timeout_secs * 1000000ull) {
            log_conn(h, &rate_head, "h2_head_timeout",
                     "a header block was not received in time: closed");
            return false;
        }
        if (hs->rc.state == NET_CONN_BODY &&
            since(now, hs->t0_us) >= c->body_timeout_secs * 1000000ull)
            stream_refuse(hs, GW_E_CLIENT_TIMEOUT,
                          "the request body was not received within server.body_timeout_secs");
    }
    return true;
}

/* Streams whose answer waits with no byte taken for idle_timeout_secs (the client
 * keeps the window shut) are reset: their requests are cancelled. */
static void
stalls(struct net_h2 *h, uint64_t now)
{
    uint64_t idle = h->c->idle_timeout_secs * 1000000ull;
    struct net_h2s *hs;

    for (hs = h->streams; hs; hs = hs->next) {
        if (!hs->head_sent || hs->reset || hs->out.len == hs->out_off ||
            since(now, hs->moved_us) < idle)
            continue;
        log_conn(h, &rate_stream_stall, "h2_stalled",
                 "an answer waited server.idle_timeout_secs with no byte taken: stream reset");
        hs->reset = true;
        nghttp2_submit_rst_stream(h->sess, NGHTTP2_FLAG_NONE, hs->id, NGHTTP2_CANCEL);
    }
}

/* Every tick_secs: a connection with no stream for idle_timeout_secs closes (GOAWAY),
 * and so does one whose socket took no byte for that long while some wait (a client
 * that does not read); stalled streams and requests past their deadlines (above). Also
 * the end of a close after a flush. */
static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct net_h2 *h = arg;
    uint64_t now = net_mono_us(), idle = h->c->idle_timeout_secs * 1000000ull;

    (void)fd;
    (void)what;
    if (h->closing) {
        net_conn_close(h->c);
        return;
    }
    if (!h->n_streams && since(now, h->quiet_us) >= idle) {
        nghttp2_submit_goaway(h->sess, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(h->sess), NGHTTP2_NO_ERROR,
                              NULL, 0);
        h->closing = true;
        flush(h);
        return;
    }
    if (evbuffer_get_length(bufferevent_get_output(h->c->bev)) > 0 &&
        since(now, h->wrote_us) >= idle) {
        log_conn(h, &rate_conn_stall, "h2_stalled",
                 "the client took no byte for server.idle_timeout_secs: connection closed");
        net_conn_close(h->c); /* its streams are cancelled */
        return;
    }
    if (!deadlines(h, now)) {
        net_conn_close(h->c);
        return;
    }
    stalls(h, now);
    want_send(h); /* the 408s and resets */
    timer_arm(h, h->tick_secs);
}

/* The server session of <h>, its callbacks, bounds and first SETTINGS; NULL when out
 * of memory. */
static nghttp2_session *
session_new(struct net_h2 *h, const struct net_conn *c)
{
    nghttp2_session_callbacks *cbs = NULL;
    nghttp2_option *opt = NULL;
    nghttp2_session *sess = NULL;
    nghttp2_settings_entry set[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, NET_H2_MAX_STREAMS},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, NET_H2_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, c->rq.lim.max_header_bytes},
    };

    if (nghttp2_session_callbacks_new(&cbs) == 0 && nghttp2_option_new(&opt) == 0) {
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_begin_frame_callback(cbs, on_begin_frame);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
        nghttp2_session_callbacks_set_on_frame_send_callback(cbs, on_frame_send);
        nghttp2_option_set_max_continuations(opt, NET_H2_MAX_CONTINUATIONS + 1); /* ours first */
        nghttp2_option_set_max_outbound_ack(opt, NET_H2_MAX_OUTBOUND_ACK);
        nghttp2_option_set_max_settings(opt, 32);
        nghttp2_option_set_no_closed_streams(opt, 1);
        if (nghttp2_session_server_new2(&sess, cbs, h, opt) != 0)
            sess = NULL;
    }
    if (cbs)
        nghttp2_session_callbacks_del(cbs);
    if (opt)
        nghttp2_option_del(opt);
    if (sess && (nghttp2_submit_settings(sess, NGHTTP2_FLAG_NONE, set, 3) != 0 ||
                 nghttp2_session_set_local_window_size(sess, NGHTTP2_FLAG_NONE, 0,
                                                       NET_H2_CONN_WINDOW) != 0)) {
        nghttp2_session_del(sess);
        sess = NULL;
    }
    return sess;
}

/* The timer's period: the shortest of the client timeouts, so each is kept within it. */
static unsigned
tick_of(const struct net_conn *c)
{
    unsigned t = c->idle_timeout_secs;

    if (c->header_timeout_secs && c->header_timeout_secs < t)
        t = c->header_timeout_secs;
    if (c->body_timeout_secs && c->body_timeout_secs < t)
        t = c->body_timeout_secs;
    return t ? t : 1;
}

void
net_h2_start(struct net_conn *c)
{
    struct net_h2 *h = gw_calloc(1, sizeof(*h));

    if (h) {
        h->sess = session_new(h, c);
        h->send_ev = event_new(c->w->base, -1, 0, on_send_ev, h);
        h->timer = evtimer_new(c->w->base, on_timer, h);
    }
    if (!h || !h->sess || !h->send_ev || !h->timer) {
        if (h)
            net_h2_free(h);
        net_conn_close(c); /* out of memory: the client may retry */
        return;
    }
    h->c = c;
    c->h2 = h;
    c->state = NET_CONN_BUSY; /* http1.c's reading and timer are done with it */
    net_deadline_stop(&c->dl);
    bucket_init(&h->resets, NET_H2_RESET_BURST);
    bucket_init(&h->ctrl, NET_H2_CTRL_BURST);
    h->quiet_us = h->wrote_us = net_mono_us();
    h->tick_secs = tick_of(c);
    bufferevent_setcb(c->bev, on_read, on_write, on_event, h);
    bufferevent_setwatermark(c->bev, EV_WRITE, NET_OUT_LOW, 0);
    bufferevent_enable(c->bev, EV_WRITE);
    net_sockread_enable(&c->rd); /* reads for the new callbacks */
    timer_arm(h, h->tick_secs);
    on_read(c->bev, h); /* the bytes read so far: the preface, maybe more */
}

void
net_h2_free(struct net_h2 *h)
{
    while (h->streams) {
        struct net_h2s *hs = h->streams;

        if (h->sess)
            nghttp2_session_set_stream_user_data(h->sess, hs->id, NULL);
        stream_gone(hs);
    }
    if (h->sess)
        nghttp2_session_del(h->sess);
    if (h->send_ev)
        event_free(h->send_ev);
    if (h->timer)
        event_free(h->timer);
    gw_free(h);
}

void
net_h2_drain(struct net_conn *c)
{
    struct net_h2 *h = c->h2;

    if (h->draining || h->closing)
        return;
    h->draining = true;
    nghttp2_submit_goaway(h->sess, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(h->sess), NGHTTP2_NO_ERROR, NULL,
                          0);
    want_send(h);
}
