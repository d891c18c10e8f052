/* SPDX-License-Identifier: MIT
 * net/http1.c - the server side of HTTP/1.1: accepts client connections, reads
 * requests with http-parser (limits on head size, header count and body size, a
 * header-read timeout and an idle timeout), and writes what the pipeline frames.
 * One request is answered at a time per connection; pipelined bytes wait in the
 * input buffer until the current answer is done.
 * Owns:    each net_conn, its bufferevent, timer and request buffers; the conn owns
 *          its current stream (net_stream_client_gone hands it back to the pipeline).
 * Threads: the owning worker only.
 * See:     net/net-priv.h, net/pipeline.c, tests/e2e/
 */
#include "net/net-priv.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/buffer.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/log.h"

#define NET_MAX_PENDING_INPUT (1024 * 1024) /* pipelined bytes held while busy */
#define NET_LINGER_SECS 2

static int on_msg_begin(http_parser *p);
static int on_url(http_parser *p, const char *at, size_t len);
static int on_hdr_field(http_parser *p, const char *at, size_t len);
static int on_hdr_value(http_parser *p, const char *at, size_t len);
static int on_headers_complete(http_parser *p);
static int on_body(http_parser *p, const char *at, size_t len);
static int on_msg_complete(http_parser *p);

static const http_parser_settings parser_settings = {
    .on_message_begin = on_msg_begin,
    .on_url = on_url,
    .on_header_field = on_hdr_field,
    .on_header_value = on_hdr_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_msg_complete,
};

static void conn_free(struct net_conn *c);
static void conn_parse(struct net_conn *c);

/* ---- timers ---- */

static void
timer_arm(struct net_conn *c, unsigned secs)
{
    struct timeval tv = {(time_t)secs, 0};

    evtimer_add(c->timer, &tv);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
    struct net_conn *c = arg;

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    switch (c->state) {
    case NET_CONN_IDLE:
        conn_free(c); /* keep-alive idle: close quietly */
        break;
    case NET_CONN_HEAD:
    case NET_CONN_BODY:
        /* A slow client may not hold a worker: answer 408 and close. */
        c->flags |= NET_CONN_F_CLOSE_AFTER;
        c->state = NET_CONN_BUSY;
        net_respond_error(c, NULL, GW_E_CLIENT_TIMEOUT, "the request was not received in time",
                          NULL);
        net_conn_response_done(c);
        break;
    case NET_CONN_BUSY: break;
    }
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
}

static void
conn_free(struct net_conn *c)
{
    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    if (c->stream) {
        struct net_stream *s = c->stream;

        c->stream = NULL;
        net_stream_client_gone(s); /* clears its pointer to c and finishes its row */
    }
    unlink_conn(c);
    if (c->timer)
        event_free(c->timer);
    if (c->bev)
        bufferevent_free(c->bev);
    gw_buf_fini(&c->url);
    gw_buf_fini(&c->hbuf);
    gw_buf_fini(&c->body);
    gw_free(c->hdrs);
    explicit_bzero(c->key_seen, sizeof(c->key_seen));
    c->magic_ = 0;
    gw_free(c);
}

/* Lingering close: after the last answer is flushed, half-close and discard what the
 * client still sends (say, the rest of a refused body) for a short while, so the
 * kernel does not reset the connection and destroy the answer before it is read. */
static void
conn_linger(struct net_conn *c)
{
    c->flags |= NET_CONN_F_LINGER;
    shutdown(bufferevent_getfd(c->bev), SHUT_WR);
    evbuffer_drain(bufferevent_get_input(c->bev),
                   evbuffer_get_length(bufferevent_get_input(c->bev)));
    bufferevent_enable(c->bev, EV_READ);
    c->state = NET_CONN_IDLE; /* the timer frees it */
    timer_arm(c, NET_LINGER_SECS);
}

/* Flush what is queued, then linger and free: after the last answer on a connection. */
static void
conn_close_after_flush(struct net_conn *c)
{
    c->flags |= NET_CONN_F_CLOSING;
    evtimer_del(c->timer);
    bufferevent_disable(c->bev, EV_READ);
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

    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    if (c->flags & NET_CONN_F_LINGER) {
        evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
        return;
    }
    if (c->flags & NET_CONN_F_CLOSING)
        return;
    if (c->state == NET_CONN_BUSY) {
        /* Pipelined bytes wait; hold a bounded amount, then stop reading. */
        if (evbuffer_get_length(bufferevent_get_input(c->bev)) > NET_MAX_PENDING_INPUT)
            bufferevent_disable(c->bev, EV_READ);
        return;
    }
    conn_parse(c);
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
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        conn_free(c); /* the client is gone: its stream is cancelled in there */
}

/* ---- accepting ---- */

void
net_conn_accept(struct net_worker *w, int fd)
{
    struct net_conn *c;
    struct gw_conf *conf;
    int one = 1;

    c = gw_calloc(1, sizeof(*c));
    if (!c) {
        evutil_closesocket(fd);
        return;
    }
    c->magic_ = NET_CONN_MAGIC;
    c->w = w;
    c->id = ++w->next_conn_id;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->bev = bufferevent_socket_new(w->base, fd, BEV_OPT_CLOSE_ON_FREE);
    c->timer = evtimer_new(w->base, on_timer, c);
    if (!c->bev || !c->timer) {
        if (c->bev)
            bufferevent_free(c->bev);
        else
            evutil_closesocket(fd);
        if (c->timer)
            event_free(c->timer);
        gw_free(c);
        return;
    }
    /* Limits are read once per connection from the live snapshot. */
    conf = gw_conf_acquire(&w->gt);
    c->max_header_bytes = conf ? conf->server.max_header_kb * 1024u : 65536u;
    c->max_headers = conf ? conf->server.max_headers : 100u;
    if (c->max_headers > NET_MAX_HEADERS_HARD)
        c->max_headers = NET_MAX_HEADERS_HARD;
    c->header_timeout_secs = conf ? conf->server.header_timeout_secs : 10u;
    c->idle_timeout_secs = conf ? conf->server.idle_timeout_secs : 60u;
    c->max_body = conf ? (size_t)conf->server.max_body_mb * 1024 * 1024 : 32u << 20;
    gw_conf_release(conf);

    c->next = w->conns;
    if (w->conns)
        w->conns->prev = c;
    w->conns = c;
    w->n_conns++;

    http_parser_init(&c->parser, HTTP_REQUEST);
    c->parser.data = c;
    c->state = NET_CONN_IDLE;
    bufferevent_setcb(c->bev, on_read, on_write, on_event, c);
    bufferevent_setwatermark(c->bev, EV_WRITE, NET_OUT_LOW, 0);
    bufferevent_enable(c->bev, EV_READ | EV_WRITE);
    timer_arm(c, c->header_timeout_secs);
}

/* ---- parsing ---- */

static void
request_reset(struct net_conn *c)
{
    gw_buf_reset(&c->url);
    gw_buf_reset(&c->hbuf);
    gw_buf_reset(&c->body);
    c->n_hdrs = 0;
    c->last_was_value = false;
    c->head_bytes = 0;
    c->refuse = GW_OK;
}

static int
on_msg_begin(http_parser *p)
{
    struct net_conn *c = p->data;

    request_reset(c);
    c->state = NET_CONN_HEAD;
    timer_arm(c, c->header_timeout_secs);
    return 0;
}

static int
count_head(struct net_conn *c, size_t len)
{
    c->head_bytes += len;
    if (c->head_bytes > c->max_header_bytes) {
        c->refuse = GW_E_HEADERS_TOO_LARGE;
        return -1;
    }
    return 0;
}

static int
on_url(http_parser *p, const char *at, size_t len)
{
    struct net_conn *c = p->data;

    if (count_head(c, len) || gw_buf_append(&c->url, at, len) != GW_OK)
        return -1;
    return 0;
}

static int
on_hdr_field(http_parser *p, const char *at, size_t len)
{
    struct net_conn *c = p->data;
    struct net_req_hdr *h;

    if (count_head(c, len + 4))
        return -1;
    if (c->n_hdrs == 0 || c->last_was_value) {
        if (c->n_hdrs >= c->max_headers) {
            c->refuse = GW_E_HEADERS_TOO_LARGE;
            return -1;
        }
        if (c->n_hdrs == c->cap_hdrs) {
            unsigned cap = c->cap_hdrs ? c->cap_hdrs * 2 : 16;
            struct net_req_hdr *v = gw_realloc(c->hdrs, cap * sizeof(*v));

            if (!v)
                return -1;
            c->hdrs = v;
            c->cap_hdrs = cap;
        }
        h = &c->hdrs[c->n_hdrs++];
        h->name_off = (uint32_t)c->hbuf.len;
        h->name_len = 0;
        h->val_off = 0;
        h->val_len = 0;
        c->last_was_value = false;
    }
    h = &c->hdrs[c->n_hdrs - 1];
    if (gw_buf_append(&c->hbuf, at, len) != GW_OK)
        return -1;
    h->name_len += (uint32_t)len;
    return 0;
}

static int
on_hdr_value(http_parser *p, const char *at, size_t len)
{
    struct net_conn *c = p->data;
    struct net_req_hdr *h;

    if (count_head(c, len) || c->n_hdrs == 0)
        return -1;
    h = &c->hdrs[c->n_hdrs - 1];
    if (!c->last_was_value) {
        h->val_off = (uint32_t)c->hbuf.len;
        h->val_len = 0;
        c->last_was_value = true;
    }
    if (gw_buf_append(&c->hbuf, at, len) != GW_OK)
        return -1;
    h->val_len += (uint32_t)len;
    return 0;
}

static int
on_headers_complete(http_parser *p)
{
    struct net_conn *c = p->data;
    struct gw_str v;

    c->state = NET_CONN_BODY;
    c->method = (enum http_method)p->method;
    c->keep_alive = http_should_keep_alive(p) != 0;
    timer_arm(c, c->idle_timeout_secs);
    if ((p->flags & F_CONTENTLENGTH) && p->content_length > c->max_body) {
        /* The body is not read: answer once the parser stops, then close. */
        c->refuse = GW_E_BODY_TOO_LARGE;
        return -1;
    }
    if (net_conn_header(c, GW_STR_LIT("expect"), &v) &&
        gw_str_eq_nocase(v, GW_STR_LIT("100-continue")))
        net_conn_write(c, "HTTP/1.1 100 Continue\r\n\r\n", 25);
    return 0;
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
    struct net_conn *c = p->data;

    if (c->body.len + len > c->max_body) {
        c->refuse = GW_E_BODY_TOO_LARGE;
        return -1;
    }
    if (gw_buf_append(&c->body, at, len) != GW_OK) {
        c->refuse = GW_E_NOMEM;
        return -1;
    }
    timer_arm(c, c->idle_timeout_secs);
    return 0;
}

static int
on_msg_complete(http_parser *p)
{
    struct net_conn *c = p->data;

    c->state = NET_CONN_BUSY;
    evtimer_del(c->timer);
    /* Stop here: the answer is produced after http_parser_execute returns. */
    http_parser_pause(p, 1);
    return 0;
}

static void
refuse_and_close(struct net_conn *c, enum gw_code code)
{
    const char *msg = "malformed HTTP request";

    if (code == GW_E_HEADERS_TOO_LARGE)
        msg = "request head too large or too many headers";
    else if (code == GW_E_BODY_TOO_LARGE)
        msg = "request body larger than server.max_body_mb";
    else if (code == GW_E_NOMEM)
        msg = "out of memory";
    c->flags |= NET_CONN_F_CLOSE_AFTER;
    c->state = NET_CONN_BUSY;
    net_respond_error(c, NULL, code, msg, NULL);
    net_conn_response_done(c);
}

static void
conn_parse(struct net_conn *c)
{
    struct evbuffer *in = bufferevent_get_input(c->bev);

    while (c->state != NET_CONN_BUSY && evbuffer_get_length(in) > 0) {
        struct evbuffer_iovec v;
        size_t used;
        enum http_errno err;

        if (evbuffer_peek(in, -1, NULL, &v, 1) < 1)
            break;
        used = http_parser_execute(&c->parser, &parser_settings, v.iov_base, v.iov_len);
        evbuffer_drain(in, used);
        err = HTTP_PARSER_ERRNO(&c->parser);
        if (err == HPE_PAUSED)
            break;
        if (err != HPE_OK || c->parser.upgrade) {
            refuse_and_close(c, c->refuse != GW_OK ? c->refuse : GW_E_HTTP_PARSE);
            return;
        }
    }
    if (c->state == NET_CONN_BUSY) {
        if (c->parser.http_major == 1 && c->parser.http_minor == 0)
            c->flags |= NET_CONN_F_CLOSE_AFTER; /* no chunked answers for HTTP/1.0 */
        if (!c->keep_alive)
            c->flags |= NET_CONN_F_CLOSE_AFTER;
        net_pipeline_start(c);
    }
}

/* ---- the pipeline's side ---- */

void
net_conn_writev(struct net_conn *c, const struct iovec *iov, int n)
{
    struct evbuffer *out = bufferevent_get_output(c->bev);
    ssize_t sent = 0;
    int i;

    GW_CHECK_OBJ(c, NET_CONN_MAGIC);
    /* Fast path: with nothing queued, write straight to the socket. The bufferevent
     * would instead arm EV_WRITE and write on the next loop turn, which costs two
     * epoll_ctl calls and a wake-up per answer. What the socket does not take is
     * queued and flushed by the bufferevent as usual. */
    if (evbuffer_get_length(out) == 0 && !(c->flags & NET_CONN_F_CLOSING)) {
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
    if ((c->flags & NET_CONN_F_CLOSE_AFTER) || c->w->draining) {
        conn_close_after_flush(c);
        return;
    }
    request_reset(c);
    gw_buf_fini(&c->body); /* do not keep a large body's memory on an idle conn */
    c->state = NET_CONN_IDLE;
    http_parser_pause(&c->parser, 0);
    timer_arm(c, c->idle_timeout_secs);
    bufferevent_enable(c->bev, EV_READ);
    if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0)
        conn_parse(c);
}

bool
net_conn_header(const struct net_conn *c, struct gw_str name, struct gw_str *value)
{
    unsigned i;

    for (i = 0; i < c->n_hdrs; i++) {
        const struct net_req_hdr *h = &c->hdrs[i];

        if (gw_str_eq_nocase((struct gw_str){c->hbuf.data + h->name_off, h->name_len}, name)) {
            *value = (struct gw_str){c->hbuf.data + h->val_off, h->val_len};
            return true;
        }
    }
    return false;
}

void
net_conn_header_at(const struct net_conn *c, unsigned i, struct gw_str *name, struct gw_str *value)
{
    const struct net_req_hdr *h = &c->hdrs[i];

    *name = (struct gw_str){c->hbuf.data + h->name_off, h->name_len};
    *value = (struct gw_str){c->hbuf.data + h->val_off, h->val_len};
}

void
net_conns_drain(struct net_worker *w)
{
    struct net_conn *c = w->conns, *next;

    for (; c; c = next) {
        next = c->next;
        if (c->flags & NET_CONN_F_CLOSING)
            continue;
        if (c->state == NET_CONN_IDLE)
            conn_free(c);
        else
            c->flags |= NET_CONN_F_CLOSE_AFTER;
    }
}

void
net_conns_free_all(struct net_worker *w)
{
    while (w->conns)
        conn_free(w->conns);
}
