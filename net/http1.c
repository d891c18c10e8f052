/* SPDX-License-Identifier: MIT
 * net/http1.c - the server side of HTTP/1.1: accepts client connections (at most
 * server.max_connections at once), reads requests strictly with net/h1req.c, lets the
 * pipeline judge each head (endpoint, gateway key) before any body byte is read, bounds
 * the bodies buffered server-wide (server.max_buffered_body_mb), gives a head and a body
 * one deadline each, and writes what the pipeline frames. A refusal made while reading
 * closes the connection after a lingering close bounded in time and size.
 * One request is answered at a time per connection; pipelined bytes wait in the
 * input buffer until the current answer is done.
 * Owns:    each net_conn, its bufferevent, timer and request buffers, and its share of
 *          the body budget; the conn owns its current stream (net_stream_client_gone
 *          hands it back to the pipeline).
 * Threads: the owning worker only.
 * See:     net/net-priv.h, net/pipeline.c, tests/e2e/
 */
#include "net/net-priv.h"

#include <ck_pr.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/buffer.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/budget.h"
#include "core/log.h"
#include "net/logger.h"
#include "net/sink.h"
#include "net/tls.h"

#define NET_MAX_PENDING_INPUT (1024 * 1024) /* pipelined bytes held while busy */
#define NET_LINGER_SECS 2
#define NET_LINGER_MIN_BYTES (1024 * 1024) /* a lingering close discards at least this */
#define NET_CORK_KEEP 1024 /* a connection's cork keeps this much memory between answers */

/* Server-wide state shared by the workers (net-priv.h): the request bodies buffered at
 * once, and the client connections open at once with their limit. */
struct gw_budget net_body_budget;
static unsigned conns_open;     /* ck_pr: every worker's connections together */
static unsigned conns_auto_max; /* max_connections when the config says 0 */

static void conn_free(struct net_conn *c);
static void conn_parse(struct net_conn *c, const char *p, size_t n);
static void refuse_and_close(struct net_conn *c, enum gw_code code, const char *why);

/* ---- timers ---- */

/* The idle deadline moves with every request on a kept-alive connection, and re-adding
 * the timer each time cost more than the rest of a request's timing: the deadline is
 * lazy (net/deadline.h). */
static void
timer_arm(struct net_conn *c, unsigned secs)
{
    net_deadline_set(&c->dl, (uint64_t)secs * 1000);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct net_conn *c = arg;

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    if (!net_deadline_fired(&c->dl))
        return;
    switch (c->state) {
    case NET_CONN_IDLE:
        conn_free(c); /* keep-alive idle, a lingering close or a bounded flush: close */
        break;
    case NET_CONN_HEAD:
        /* A slow client may not hold a worker: answer 408 and close. */
        refuse_and_close(c, GW_E_CLIENT_TIMEOUT, "the request head was not received in time");
        break;
    case NET_CONN_BODY:
        refuse_and_close(c, GW_E_CLIENT_TIMEOUT,
                         "the request body was not received within server.body_timeout_secs");
        break;
    case NET_CONN_BUSY: break;
    }
}

/* ---- the body budget (server.max_buffered_body_mb) ---- */

void
net_body_release(size_t *held)
{
    if (*held)
        gw_budget_give(&net_body_budget, *held);
    *held = 0;
}

/* Takes from the budget what the body being read holds beyond what was taken before:
 * the whole declared length at the head, a chunked body as it grows. */
static bool
body_reserve(struct net_conn *c, size_t want)
{
    if (want <= c->body_held)
        return true;
    if (!gw_budget_take(&net_body_budget, want - c->body_held))
        return false;
    c->body_held = want;
    return true;
}

/* ---- closing ---- */

static void
unlink_conn(struct net_conn *c)
{
    struct net_worker *w = c->w;

    if (c->prev)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    w->n_conns--;
    ck_pr_dec_uint(&conns_open); /* relaxed: a count compared at accept */
}

static void
conn_free(struct net_conn *c)
{
    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    if (c->corked && c->bev)
        net_conn_uncork(c); /* what waited for the settlements, as it would have gone */
    if (c->h2)
        net_h2_free(c->h2); /* cancels its streams */
    c->h2 = NULL;
    if (c->ws)
        net_ws_free(c->ws); /* cancels its turn */
    c->ws = NULL;
    if (c->stream) {
        struct net_stream *s = c->stream;

        c->stream = NULL;
        net_stream_client_gone(s); /* clears its pointer to c and finishes its row */
    }
    unlink_conn(c);
    if (c->dl.ev)
        event_free(c->dl.ev);
    if (c->bev && (c->flags & NET_CONN_F_TLS))
        net_tls_close_notify(c->bev);
    net_sockread_fini(&c->rd); /* before the socket closes with the bufferevent */
    if (c->bev)
        bufferevent_free(c->bev);
    net_body_release(&c->body_held);
    gw_conf_release(c->conf);
    net_h1req_fini(&c->rq);
    gw_buf_fini(&c->out_head);
    gw_buf_fini(&c->cork);
    explicit_bzero(c->key_seen, sizeof(c->key_seen));
    c->magic_ = 0;
    gw_free(c);
}

/* Discards what the client sends while lingering, up to linger_left bytes. */
static void
linger_discard(struct net_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    size_t n = evbuffer_get_length(in);

    evbuffer_drain(in, n);
    if (n >= c->linger_left) {
        /* More than a fair client sends after its answer: close on the next loop turn
         * (the timer frees it; callers up the stack may still hold c). */
        c->linger_left = 0;
        net_sockread_disable(&c->rd);
        timer_arm(c, 0);
        return;
    }
    c->linger_left -= n;
}

/* Lingering close: after the last answer is flushed, half-close and discard what the
 * client still sends (say, the rest of a refused body) for a short while and a bounded
 * size, so the kernel does not reset the connection and destroy the answer before it is
 * read. The size bound is the body limit: a fair client finishes its body and reads. */
static void
conn_linger(struct net_conn *c)
{
    net_conn_uncork(c); /* before the half-close */
    c->flags |= NET_CONN_F_LINGER;
    c->linger_left =
        c->rq.lim.max_body > NET_LINGER_MIN_BYTES ? c->rq.lim.max_body : NET_LINGER_MIN_BYTES;
    if (c->flags & NET_CONN_F_TLS)
        net_tls_close_notify(c->bev); /* the TLS end of the answer, before the TCP one */
    shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    c->state = NET_CONN_IDLE; /* the timer frees it */
    timer_arm(c, NET_LINGER_SECS);
    net_sockread_enable(&c->rd);
    linger_discard(c);
}

/* Flush what is queued, then linger and free: after the last answer on a connection. */
static void
conn_close_after_flush(struct net_conn *c)
{
    net_conn_uncork(c); /* the last answer's bytes, with the rest queued */
    c->flags |= NET_CONN_F_CLOSING;
    net_deadline_stop(&c->dl);
    net_sockread_disable(&c->rd);
    net_body_release(&c->body_held); /* nothing more is read into it */
    gw_conf_release(c->conf);
    c->conf = NULL;
    if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0) {
        conn_linger(c);
        return;
    }
    bufferevent_setwatermark(c->bev, EV_WRITE, 0, 0);
    /* Bound the flush: a client that never reads does not keep the connection. */
    timer_arm(c, c->idle_timeout_secs ? c->idle_timeout_secs : 60);
    c->state = NET_CONN_IDLE; /* the timer then frees it */
}

/* ---- bufferevent callbacks ---- */

static void
on_read(struct bufferevent *bev, void *arg)
{
    struct net_conn *c = arg;

    (void)bev;
    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    if (c->flags & NET_CONN_F_LINGER) {
        linger_discard(c);
        return;
    }
    if (c->flags & NET_CONN_F_CLOSING)
        return;
    if (c->state == NET_CONN_BUSY) {
        /* Pipelined bytes wait; hold a bounded amount, then stop reading. */
        if (evbuffer_get_length(bufferevent_get_input(c->bev)) > NET_MAX_PENDING_INPUT)
            net_sockread_disable(&c->rd);
        return;
    }
    conn_parse(c, NULL, 0);
}

/* A read's bytes while the input is empty (net/sockread.h): parsed where they lie when a
 * request is being read, else kept and read as on_read would. */
static void
on_bytes(void *arg, const char *p, size_t n)
{
    struct net_conn *c = arg;

    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    if ((c->flags & (NET_CONN_F_LINGER | NET_CONN_F_CLOSING | NET_CONN_F_FRESH)) ||
        c->state == NET_CONN_BUSY) {
        net_sockread_deliver(&c->rd, p, n);
        return;
    }
    conn_parse(c, p, n);
}

static void
on_write(struct bufferevent *bev, void *arg)
{
    struct net_conn *c = arg;

    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    if (c->flags & NET_CONN_F_CLOSING) {
        if (!(c->flags & NET_CONN_F_LINGER) &&
            evbuffer_get_length(bufferevent_get_output(bev)) == 0)
            conn_linger(c);
        return;
    }
    if (c->stream)
        net_stream_on_drain(c->stream);
}

static void
on_event(struct bufferevent *bev, short what, void *arg)
{
    struct net_conn *c = arg;

    (void)bev;
    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    if ((what & BEV_EVENT_ERROR) && (c->flags & NET_CONN_F_TLS))
        net_tls_on_error(c);
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_free(c); /* the client is gone: its stream is cancelled in there */
    else if (what & BEV_EVENT_CONNECTED)
        net_tls_on_handshake(c); /* TLS only: ALPN h2 hands the connection over */
}

/* ---- accepting ---- */

void
net_conns_set_auto_max(unsigned max)
{
    ck_pr_store_uint(&conns_auto_max, max);
}

unsigned
net_conns_max(const struct gw_conf *conf)
{
    return conf && conf->server.max_connections ? conf->server.max_connections
                                                : ck_pr_load_uint(&conns_auto_max);
}

unsigned
net_conns_open(void)
{
    return ck_pr_load_uint(&conns_open);
}

/* A plain or TLS (<tls>) client connection on <fd>, owned by <w>. */
static void
conn_accept(struct net_worker *w, int fd, bool tls)
{
    static struct gw_log_rate over_rate;
    struct net_h1req_limits lim;
    struct net_conn *c;
    struct gw_conf *conf;
    unsigned max;
    int one = 1;

    conf = gw_conf_acquire(&w->gt);
    max = net_conns_max(conf);
    /* Counted first, so that workers accepting at once cannot pass the limit together. */
    if (ck_pr_faa_uint(&conns_open, 1) >= max && max) {
        struct gw_log_ctx ctx = {(int)w->id, 0, NULL};
        uint64_t suppressed;

        ck_pr_dec_uint(&conns_open);
        gw_conf_release(conf);
        evutil_closesocket(fd);
        gw_code_count(GW_E_TOO_MANY_CONNECTIONS);
        if (gw_log_rate_pass(&over_rate, &suppressed))
            GW_LOG(GW_LOG_WARN, &ctx, gw_code_str(GW_E_TOO_MANY_CONNECTIONS),
                   "server.max_connections (%u) reached: a new connection was closed "
                   "(%llu more since the last line)",
                   max, (unsigned long long)suppressed);
        return;
    }
    c = gw_calloc(1, sizeof(*c));
    if (!c) {
        ck_pr_dec_uint(&conns_open);
        gw_conf_release(conf);
        evutil_closesocket(fd);
        return;
    }
    c->magic_ = NET_CONN_MAGIC;
    c->w = w;
    c->id = ++w->next_conn_id;
    c->flags = NET_CONN_F_FRESH;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (tls) {
        /* The handshake is bounded like a request head: by the header_timeout_secs
         * timer armed below, which closes a connection idle before its first request. */
        c->flags |= NET_CONN_F_TLS;
        c->bev = net_tls_bev_new(w->base, fd,
                                 conf && conf->server.tls_ctx ? conf->server.tls_ctx : w->tls_ctx0);
    } else {
        c->bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
    }
    c->dl.ev = evtimer_new(w->base, on_timer, c);
    if (!c->bev || !c->dl.ev || !net_sockread_init(&c->rd, w->base, c->bev, !tls)) {
        if (c->bev)
            bufferevent_free(c->bev);
        else
            evutil_closesocket(fd);
        if (c->dl.ev)
            event_free(c->dl.ev);
        gw_free(c);
        ck_pr_dec_uint(&conns_open);
        gw_conf_release(conf);
        return;
    }
    /* Limits are read once per connection from the live snapshot. */
    lim.max_header_bytes = conf ? conf->server.max_header_kb * 1024u : 65536u;
    lim.max_headers = conf ? conf->server.max_headers : 100u;
    if (lim.max_headers > NET_MAX_HEADERS_HARD)
        lim.max_headers = NET_MAX_HEADERS_HARD;
    lim.max_body = conf ? (size_t)conf->server.max_body_mb * 1024 * 1024 : 32u << 20;
    c->header_timeout_secs = conf ? conf->server.header_timeout_secs : 10u;
    c->body_timeout_secs = conf ? conf->server.body_timeout_secs : 60u;
    c->idle_timeout_secs = conf ? conf->server.idle_timeout_secs : 60u;
    if (conf)
        gw_budget_set_max(&net_body_budget, (uint64_t)conf->server.max_buffered_body_mb << 20);
    gw_conf_release(conf);

    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    w->n_conns++;

    net_h1req_init(&c->rq, &lim);
    c->state = NET_CONN_IDLE;
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    net_sockread_set_bytes(&c->rd, on_read, on_bytes);
    bufferevent_setwatermark(c->bev, EV_WRITE, NET_OUT_LOW, 0);
    bufferevent_enable(c->bev, EV_WRITE);
    net_sockread_enable(&c->rd);
    timer_arm(c, c->header_timeout_secs);
}

void
net_conn_accept(struct net_worker *w, int fd)
{
    conn_accept(w, fd, false);
}

void
net_conn_accept_tls(struct net_worker *w, int fd)
{
    conn_accept(w, fd, true);
}

/* ---- parsing ---- */

/* Answers a refusal made while reading and closes: the rest of the request is not read
 * (a lingering close discards what the client still sends). */
static void
refuse_and_close(struct net_conn *c, enum gw_code code, const char *why)
{
    if (!why)
        why = "malformed HTTP request";
    c->flags |= NET_CONN_F_CLOSE_AFTER;
    c->state = NET_CONN_BUSY;
    if (code == GW_E_BUSY) {
        static const struct net_hdr retry[] = {
            {GW_STR_LIT("retry-after"), GW_STR_LIT("1")},
            {GW_STR_LIT("x-should-retry"), GW_STR_LIT("true")},
        };

        net_respond_error(c, NULL, code, why, retry, 2);
    } else {
        net_respond_error(c, NULL, code, why, NULL, 0);
    }
    net_conn_response_done(c);
}

/* The head is read, no body byte taken yet: the pipeline decides on it (endpoint and
 * gateway key), then a declared body is reserved in the server-wide budget; *<arm> is
 * the body's deadline to arm (conn_parse). False when the request was refused (and the
 * connection is closing). */
static bool
head_read(struct net_conn *c, unsigned *arm)
{
    const char *why = NULL;
    enum gw_code code;
    struct gw_str v;

    if (net_ws_wanted(c)) {
        /* the Responses WebSocket mode: on success the connection is net/ws.c's */
        code = net_ws_upgrade(c, &why);
        if (code != GW_OK)
            refuse_and_close(c, code, why);
        return false;
    }
    code = net_pipeline_head(c, &why);
    if (code != GW_OK) {
        refuse_and_close(c, code, why);
        return false;
    }
    if (c->rq.content_length > c->rq.lim.max_body) {
        refuse_and_close(c, GW_E_BODY_TOO_LARGE, "request body larger than server.max_body_mb");
        return false;
    }
    if (c->rq.content_length && !body_reserve(c, c->rq.content_length)) {
        refuse_and_close(c, GW_E_BUSY,
                         "the gateway holds too many request bodies (server.max_buffered_body_mb); "
                         "retry shortly");
        return false;
    }
    c->state = NET_CONN_BODY;
    if (c->rq.has_body) {
        /* One deadline for the whole body: a trickling client does not re-arm it. */
        *arm = c->body_timeout_secs;
        if (net_conn_header(c, GW_STR_LIT("expect"), &v) &&
            gw_str_eq_nocase(v, GW_STR_LIT("100-continue")))
            net_conn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    }
    return true;
}

/* The first bytes of a connection: the HTTP/2 preface (h2c with prior knowledge) hands
 * it to net/http2.c. True when the connection is no longer HTTP/1.1's to parse (or not
 * yet: a prefix of the preface waits for more). */
static bool
h2c_taken(struct net_conn *c, struct evbuffer *in)
{
    char p[24];
    ev_ssize_t n = evbuffer_copyout(in, p, sizeof(p));
    int r = net_h2_preface(p, n > 0 ? (size_t)n : 0);

    if (r == 0)
        return true;
    c->flags &= ~NET_CONN_F_FRESH;
    if (r < 0)
        return false;
    net_h2_start(c);
    return true;
}

/* Parses the request bytes: first the <n> at <p> (a read's, where they lie: net/sockread.h),
 * then what the input holds, until a request is whole; what is left of <p> is kept in
 * the input (a pipelined request waits there). */
static void
conn_parse(struct net_conn *c, const char *p, size_t n)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);
    unsigned arm = 0; /* the head's or body's deadline, armed once the bytes here are read */

    if ((c->flags & NET_CONN_F_FRESH) && h2c_taken(c, in))
        return;
    while (c->state != NET_CONN_BUSY && (n > 0 || evbuffer_get_length(in) > 0)) {
        struct evbuffer_iovec v = {(void *)(uintptr_t)p, n};
        size_t used = 0;
        enum net_h1_ev ev;

        if (n == 0 && evbuffer_peek(in, -1, NULL, &v, 1) < 1)
            break;
        ev = net_h1req_feed(&c->rq, v.iov_base, v.iov_len, &used);
        if (n > 0) {
            p += used;
            n -= used;
        } else {
            evbuffer_drain(in, used);
        }
        if (c->state == NET_CONN_IDLE && net_h1req_in_head(&c->rq)) {
            c->state = NET_CONN_HEAD; /* the first byte of a request: the head's deadline */
            arm = c->header_timeout_secs;
        }
        switch (ev) {
        case NET_H1_MORE:
            if (c->rq.chunked && !body_reserve(c, c->rq.body.len)) {
                refuse_and_close(c, GW_E_BUSY,
                                 "the gateway holds too many request bodies "
                                 "(server.max_buffered_body_mb); retry shortly");
                return;
            }
            break;
        case NET_H1_HEAD:
            if (!head_read(c, &arm))
                return;
            break;
        case NET_H1_DONE:
            if (c->rq.chunked && !body_reserve(c, c->rq.body.len)) {
                refuse_and_close(c, GW_E_BUSY,
                                 "the gateway holds too many request bodies "
                                 "(server.max_buffered_body_mb); retry shortly");
                return;
            }
            /* A timer still pending (the idle one, or this request's head or body
             * deadline) finds the connection busy and does nothing; the answer's end
             * arms the idle one again (net_conn_response_done). */
            c->state = NET_CONN_BUSY;
            arm = 0;
            break;
        case NET_H1_ERROR: refuse_and_close(c, c->rq.refuse, c->rq.why); return;
        }
    }
    if (n > 0 && !net_sockread_keep(&c->rd, p, n))
        return; /* out of memory, reported: c may be gone */
    if (arm)
        timer_arm(c, arm);
    if (c->state == NET_CONN_BUSY) {
        if (c->rq.http_minor == 0)
            c->flags |= NET_CONN_F_CLOSE_AFTER; /* no chunked answers for HTTP/1.0 */
        if (!c->rq.keep_alive)
            c->flags |= NET_CONN_F_CLOSE_AFTER;
        net_pipeline_start(c);
    }
}

/* ---- the sink: answers in HTTP/1.1 (net/sink.h) ---- */

static const char *
reason(int status)
{
    const char *r = http_status_str((enum http_status)status);

    return r && *r ? r : "Status";
}

static bool
conn_closes(const struct net_conn *c)
{
    return (c->flags & NET_CONN_F_CLOSE_AFTER) || c->w->draining;
}

/* A header pair the pipeline built is written only when it cannot break the framing: a
 * token for its name, no control byte but HTAB in its value (no CR nor LF above all). */
static bool
hdr_safe(const struct net_hdr *h)
{
    const char *end = h->value.ptr + h->value.len;

    return net_h1_is_token(h->name) && net_h1_value_ctl(h->value.ptr, h->value.ptr, end) == end;
}

static void
h1_head(struct net_sink *k, int status, const struct net_hdr *hdrs, size_t n_hdrs, size_t length)
{
    struct net_conn *c = k->ctx;
    struct gw_buf *h = &c->out_head;
    bool ok = true;
    size_t i;

    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    gw_buf_reset(h);
    c->out_chunked = false;
    if (length == NET_SINK_STREAMED) {
        if (c->rq.http_minor == 0)
            c->flags |= NET_CONN_F_CLOSE_AFTER; /* no chunks for HTTP/1.0: the close ends it */
        else
            c->out_chunked = true;
    }
    if (status >= 100 && status <= 999) { /* what every status is: three digits */
        char line[13] = "HTTP/1.1 ";

        line[9] = (char)('0' + status / 100);
        line[10] = (char)('0' + status / 10 % 10);
        line[11] = (char)('0' + status % 10);
        line[12] = ' ';
        ok &= gw_buf_append(h, line, sizeof(line)) == GW_OK;
    } else {
        ok &= gw_buf_append(h, "HTTP/1.1 ", 9) == GW_OK;
        ok &= gw_buf_append_u64(h, (uint64_t)status) == GW_OK;
        ok &= gw_buf_append(h, " ", 1) == GW_OK;
    }
    ok &= gw_buf_append_cstr(h, reason(status)) == GW_OK;
    ok &= gw_buf_append(h, "\r\n", 2) == GW_OK;
    for (i = 0; i < n_hdrs; i++) {
        if (!hdr_safe(&hdrs[i]))
            continue;
        ok &= gw_buf_append_str(h, hdrs[i].name) == GW_OK;
        ok &= gw_buf_append(h, ": ", 2) == GW_OK;
        ok &= gw_buf_append_str(h, hdrs[i].value) == GW_OK;
        ok &= gw_buf_append(h, "\r\n", 2) == GW_OK;
    }
    if (length != NET_SINK_STREAMED) {
        ok &= gw_buf_append(h, "content-length: ", 16) == GW_OK;
        ok &= gw_buf_append_u64(h, length) == GW_OK;
        ok &= gw_buf_append(h, "\r\n", 2) == GW_OK;
    } else if (c->out_chunked) {
        ok &= gw_buf_append(h, "transfer-encoding: chunked\r\n", 28) == GW_OK;
    }
    if (conn_closes(c))
        ok &= gw_buf_append(h, "connection: close\r\n", 19) == GW_OK;
    ok &= gw_buf_append(h, "\r\n", 2) == GW_OK;
    if (!ok) {
        /* Out of memory for a head: the client gets a bare 500 and the connection ends. */
        static const char fail[] = "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n"
                                   "connection: close\r\n\r\n";

        c->flags |= NET_CONN_F_CLOSE_AFTER;
        gw_buf_fini(h);
        net_conn_write(c, fail, sizeof(fail) - 1);
        c->out_head_pending = false;
        return;
    }
    c->out_head_pending = true;
}

static void
h1_data(struct net_sink *k, const char *p, size_t n)
{
    struct net_conn *c = k->ctx;
    struct iovec v[4];
    char size[24];
    int i = 0;

    if (c->out_head_pending) {
        v[i++] = (struct iovec){c->out_head.data, c->out_head.len};
        c->out_head_pending = false;
    }
    if (c->out_chunked) { /* the chunk's size line (RFC 9112 7.1) */
        size_t len = gw_fmt_hex_u64(size, n);

        memcpy(size + len, "\r\n", 2);
        v[i++] = (struct iovec){size, len + 2};
    }
    v[i++] = (struct iovec){(void *)(uintptr_t)p, n};
    if (c->out_chunked)
        v[i++] = (struct iovec){(void *)(uintptr_t) "\r\n", 2};
    net_conn_writev(c, v, i);
}

static void
h1_end(struct net_sink *k)
{
    struct net_conn *c = k->ctx;
    struct iovec v[2];
    int i = 0;

    if (c->out_head_pending) {
        v[i++] = (struct iovec){c->out_head.data, c->out_head.len};
        c->out_head_pending = false;
    }
    if (c->out_chunked)
        v[i++] = (struct iovec){(void *)(uintptr_t) "0\r\n\r\n", 5};
    if (i)
        net_conn_writev(c, v, i);
    c->out_chunked = false;
}

static void
h1_abort(struct net_sink *k, enum gw_code code)
{
    struct net_conn *c = k->ctx;

    (void)code;
    /* A chunked answer without its last chunk, then the close: the client knows it is
     * incomplete. An unsent head is not sent. */
    c->out_head_pending = false;
    c->out_chunked = false;
    c->flags |= NET_CONN_F_CLOSE_AFTER;
}

static size_t
h1_queued(const struct net_sink *k)
{
    return net_conn_output_len(k->ctx);
}

static const struct net_sink_ops h1_sink_ops = {
    .head = h1_head,
    .data = h1_data,
    .end = h1_end,
    .abort = h1_abort,
    .queued = h1_queued,
};

void
net_conn_sink(struct net_conn *c, struct net_sink *out)
{
    if (c->h2s) {
        net_h2_sink(c, out);
        return;
    }
    if (c->wst) {
        net_ws_sink(c, out);
        return;
    }
    out->ops = &h1_sink_ops;
    out->ctx = c;
}

/* ---- the pipeline's side ---- */

/* Writes <iov> now: straight to the socket when nothing is queued, the rest through the
 * bufferevent. */
static void
write_now(struct net_conn *c, const struct iovec *iov, int n)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    ssize_t sent = 0;
    int i;

    /* Fast path: with nothing queued, write straight to the socket. The bufferevent
     * would instead arm EV_WRITE and write on the next loop turn, which costs two
     * epoll_ctl calls and a wake-up per answer. What the socket does not take is
     * queued and flushed by the bufferevent as usual. A TLS connection's bytes must
     * go through its SSL: the same flag test sends them to the bufferevent. */
    GW_ASSERT(!net_settle_pending(c->w)); /* no byte leaves before the settlements */
    if (evbuffer_get_length(out) == 0 && !(c->flags & (NET_CONN_F_CLOSING | NET_CONN_F_TLS))) {
        struct msghdr mh;

        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = (struct iovec *)(uintptr_t)iov;
        mh.msg_iovlen = (size_t)n;
        sent = sendmsg(bufferevent_getfd(c->bev), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0)
            sent = 0; /* EAGAIN or an error: the bufferevent sees the error itself */
    }
    for (i = 0; i < n; i++) {
        size_t skip = (size_t)sent < iov[i].iov_len ? (size_t)sent : iov[i].iov_len;

        sent -= (ssize_t)skip;
        if (iov[i].iov_len > skip)
            bufferevent_write(c->bev, (const char *)iov[i].iov_base + skip, iov[i].iov_len - skip);
    }
}

/* Keeps <iov> in <c>'s cork until the worker's settlements are applied (net/settle.c);
 * false when out of memory. */
static bool
cork_add(struct net_conn *c, const struct iovec *iov, int n)
{
    struct net_settles *st = &c->w->settles;
    int i;

    for (i = 0; i < n; i++)
        if (gw_buf_append(&c->cork, iov[i].iov_base, iov[i].iov_len) != GW_OK)
            return false;
    if (!c->corked) {
        c->corked = true;
        c->cork_prev = NULL;
        c->cork_next = st->corked;
        if (st->corked)
            st->corked->cork_prev = c;
        st->corked = c;
    }
    return true;
}

void
net_conn_writev(struct net_conn *c, const struct iovec *iov, int n)
{
    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    /* While the worker holds settlements, the bytes wait for them (libevent 2.1 hands a
     * TLS connection's bytes to SSL_write at once, as the fast path below sends a plain
     * one's); once corked, everything waits, in order. A closing connection gets the
     * settlements applied first instead. */
    if (c->corked || net_settle_pending(c->w)) {
        size_t len = c->cork.len;

        if (!(c->flags & NET_CONN_F_CLOSING) && cork_add(c, iov, n))
            return;
        c->cork.len = len; /* out of memory: what was kept, then this, now */
        net_conn_uncork(c);
    }
    write_now(c, iov, n);
}

void
net_conn_uncork(struct net_conn *c)
{
    struct net_settles *st = &c->w->settles;

    net_settle_apply(c->w);
    if (!c->corked)
        return;
    if (c->cork_prev)
        c->cork_prev->cork_next = c->cork_next;
    else
        st->corked = c->cork_next;
    if (c->cork_next)
        c->cork_next->cork_prev = c->cork_prev;
    c->cork_prev = c->cork_next = NULL;
    c->corked = false;
    if (c->cork.len) {
        struct iovec v = {c->cork.data, c->cork.len};

        write_now(c, &v, 1);
        gw_buf_recycle(&c->cork, NET_CORK_KEEP);
    }
}

void
net_conn_write(struct net_conn *c, const void *data, size_t len)
{
    struct iovec v = {(void *)(uintptr_t)data, len};

    net_conn_writev(c, &v, 1);
}

size_t
net_conn_output_len(const struct net_conn *c)
{
    return evbuffer_get_length(bufferevent_get_output(c->bev));
}

void
net_conn_response_done(struct net_conn *c)
{
    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    c->stream = NULL;
    if (c->h2s) {
        net_h2_response_done(c);
        return;
    }
    if (c->wst) {
        net_ws_response_done(c);
        return;
    }
    if ((c->flags & NET_CONN_F_CLOSE_AFTER) || c->w->draining) {
        conn_close_after_flush(c);
        return;
    }
    net_body_release(&c->body_held);
    c->out_head_pending = false;
    c->out_chunked = false;
    net_h1req_next(&c->rq);
    c->state = NET_CONN_IDLE;
    timer_arm(c, c->idle_timeout_secs);
    net_sockread_enable(&c->rd);
    if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
        conn_parse(c, NULL, 0);
}

bool
net_conn_header(const struct net_conn *c, struct gw_str name, struct gw_str *value)
{
    return net_h1req_header(&c->rq, name, value);
}

void
net_conn_header_at(const struct net_conn *c, unsigned i, struct gw_str *name, struct gw_str *value)
{
    net_h1req_header_at(&c->rq, i, name, value);
}

void
net_conns_drain(struct net_worker *w)
{
    struct net_conn *c = w->conns, *next;

    for (; c; c = next) {
        next = c->next;
        if (c->flags & NET_CONN_F_CLOSING)
            continue;
        if (c->h2)
            net_h2_drain(c);
        else if (c->ws)
            net_ws_drain(c);
        else if (c->state == NET_CONN_IDLE)
            conn_free(c);
        else
            c->flags |= NET_CONN_F_CLOSE_AFTER;
    }
}

void
net_conn_close(struct net_conn *c)
{
    conn_free(c);
}

void
net_conns_free_all(struct net_worker *w)
{
    while (w->conns)
        conn_free(w->conns);
}
