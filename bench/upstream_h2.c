/* SPDX-License-Identifier: MIT
 * bench/upstream_h2.c - HTTP/2 with prior knowledge (h2c) for `gwbench upstream`: a
 * connection that starts with the HTTP/2 preface gets an nghttp2 server session here.
 * Each stream is answered by an ordinary bench connection (the same routes, shapes,
 * knobs, pacing and faults as HTTP/1.1): the stream's request is written to it as
 * HTTP/1.1 over a socketpair, its answer is parsed back and sent as HEADERS and DATA as
 * it comes (so pacing survives). A drop of that connection resets the stream
 * (RST_STREAM INTERNAL_ERROR): drop-before resets it before the head, drop-mid after
 * content. --fault goaway (or x-bench-fault: goaway) answers a stream with GOAWAY
 * (last_stream_id below it, so the client knows it was not processed) and closes the
 * connection once its other streams ended. --h2-max-streams N sends
 * SETTINGS_MAX_CONCURRENT_STREAMS.
 * Owns:    h2 connections and their streams (freed when the connection closes).
 * Threads: the worker that accepted the connection; the counters are atomics.
 * See:     bench/upstream.c (bench_up_h2_take), docs/gwbench.md
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <http_parser.h>
#include <nghttp2/nghttp2.h>

#include "bench/upstream-priv.h"
#include "core/alloc.h"

#define H2_PREFACE "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

/* /_bench/stats: h2_connections, h2_streams (total), h2_max_concurrent_streams (the
 * most streams open at once on one connection), h2_goaways (sent by the fault). */
static atomic_uint_fast64_t h2_conns, h2_streams, h2_max_streams, h2_goaways;

unsigned bench_up_h2_max_streams; /* --h2-max-streams; 0: not announced (unlimited) */

struct h2conn;

/* One stream: the request as it arrives, the answering bench connection's socket (our
 * end), and the answer on its way back. */
struct h2stream {
    struct h2conn *hc;
    struct h2stream *prev, *next;
    int32_t sid;
    int fd;                  /* our end of the socketpair; -1 before the request is whole */
    struct bufferevent *bev; /* on fd */
    char method[16];
    struct gw_buf path;
    struct gw_buf req; /* the request's header lines, as HTTP/1.1 */
    struct gw_buf body;
    struct gw_buf hv; /* answer header names and values, NUL-separated */
    size_t n_hv;
    bool in_value;
    http_parser rp;        /* the answer */
    struct evbuffer *data; /* answer body not yet taken by nghttp2 */
    bool goaway;           /* x-bench-fault: goaway */
    bool bench_path;       /* /_bench/...: never faulted here */
    bool head_sent, done, cut, deferred;
};

struct h2conn {
    struct bench_up_thread *t;
    struct bufferevent *bev;
    nghttp2_session *s;
    struct h2stream *streams;
    unsigned n_open;
    bool goaway_sent;
};

static void
max_update(unsigned n)
{
    uint_fast64_t cur = atomic_load_explicit(&h2_max_streams, memory_order_relaxed);

    while (n > cur && !atomic_compare_exchange_weak_explicit(
                          &h2_max_streams, &cur, n, memory_order_relaxed, memory_order_relaxed))
        ;
}

bool
bench_up_h2_is_preface(const char *p, size_t n)
{
    return n >= 4 && memcmp(p, H2_PREFACE, 4) == 0;
}

bool
bench_up_h2_may_be_preface(const char *p, size_t n)
{
    return n < 4 && memcmp(p, H2_PREFACE, n) == 0;
}

void
bench_up_h2_stats(struct gw_buf *b)
{
    (void)gw_buf_printf(b,
                        ",\"h2_connections\":%llu,\"h2_streams\":%llu,"
                        "\"h2_max_concurrent_streams\":%llu,\"h2_goaways\":%llu",
                        (unsigned long long)atomic_load(&h2_conns),
                        (unsigned long long)atomic_load(&h2_streams),
                        (unsigned long long)atomic_load(&h2_max_streams),
                        (unsigned long long)atomic_load(&h2_goaways));
}

static void
hc_flush(struct h2conn *hc)
{
    struct evbuffer *out = bufferevent_get_output(hc->bev);

    for (;;) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(hc->s, &d);

        if (n <= 0)
            return;
        evbuffer_add(out, d, (size_t)n);
    }
}

static void
st_free(struct h2stream *st)
{
    struct h2conn *hc = st->hc;

    if (st->prev)
        st->prev->next = st->next;
    else
        hc->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    if (st->bev)
        bufferevent_free(st->bev); /* closes fd: the bench connection sees the peer go */
    else if (st->fd >= 0)
        close(st->fd);
    if (st->data)
        evbuffer_free(st->data);
    gw_buf_fini(&st->req);
    gw_buf_fini(&st->path);
    gw_buf_fini(&st->body);
    gw_buf_fini(&st->hv);
    gw_free(st);
}

static void
hc_free(struct h2conn *hc)
{
    while (hc->streams) {
        nghttp2_session_set_stream_user_data(hc->s, hc->streams->sid, NULL);
        st_free(hc->streams);
    }
    nghttp2_session_del(hc->s);
    bufferevent_free(hc->bev);
    gw_free(hc);
}

/* After reading or a stream event: sends, and closes when the session is done. */
static void
hc_after(struct h2conn *hc)
{
    hc_flush(hc);
    if (!nghttp2_session_want_read(hc->s) && !nghttp2_session_want_write(hc->s) &&
        evbuffer_get_length(bufferevent_get_output(hc->bev)) == 0)
        hc_free(hc);
}

/* ---- the answer coming back from the bench connection ---- */

static ssize_t
st_read_data(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t len, uint32_t *flags,
             nghttp2_data_source *src, void *ud)
{
    struct h2stream *st = nghttp2_session_get_stream_user_data(s, sid);
    size_t have;

    (void)src;
    (void)ud;
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    have = evbuffer_get_length(st->data);
    if (have == 0) {
        if (st->cut) /* the answer was cut: reset after what was sent */
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        if (st->done) {
            *flags |= NGHTTP2_DATA_FLAG_EOF;
            return 0;
        }
        st->deferred = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    if (have > len)
        have = len;
    evbuffer_remove(st->data, buf, have);
    if (evbuffer_get_length(st->data) == 0 && st->done)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)have;
}

static void
st_resume(struct h2stream *st)
{
    if (st->deferred) {
        st->deferred = false;
        nghttp2_session_resume_data(st->hc->s, st->sid);
    }
}

static int
rp_header_field(http_parser *p, const char *at, size_t n)
{
    struct h2stream *st = p->data;

    if (st->in_value || st->n_hv == 0) {
        if (st->n_hv)
            (void)gw_buf_append(&st->hv, "", 1);
        st->n_hv++;
        st->in_value = false;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = (char)((at[i] >= 'A' && at[i] <= 'Z') ? at[i] + 32 : at[i]);

        (void)gw_buf_append(&st->hv, &ch, 1);
    }
    return 0;
}

static int
rp_header_value(http_parser *p, const char *at, size_t n)
{
    struct h2stream *st = p->data;

    if (!st->in_value) {
        (void)gw_buf_append(&st->hv, "", 1);
        st->in_value = true;
    }
    (void)gw_buf_append(&st->hv, at, n);
    return 0;
}

static bool
h1_only(const char *n)
{
    return strcmp(n, "connection") == 0 || strcmp(n, "transfer-encoding") == 0 ||
           strcmp(n, "keep-alive") == 0 || strcmp(n, "content-length") == 0;
}

static int
rp_headers_complete(http_parser *p)
{
    struct h2stream *st = p->data;
    nghttp2_nv nv[64];
    char status[8];
    size_t n = 0;
    const char *q;
    nghttp2_data_provider prd = {.read_callback = st_read_data};

    (void)gw_buf_append(&st->hv, "", 1);
    snprintf(status, sizeof(status), "%u", p->status_code);
    nv[n++] = (nghttp2_nv){(uint8_t *)(uintptr_t) ":status", (uint8_t *)status, 7, strlen(status),
                           NGHTTP2_NV_FLAG_NONE};
    q = st->hv.data;
    for (size_t i = 0; i < st->n_hv && n < 64; i++) {
        const char *name = q, *val = q + strlen(q) + 1;

        q = val + strlen(val) + 1;
        if (h1_only(name))
            continue;
        nv[n++] = (nghttp2_nv){(uint8_t *)(uintptr_t)name, (uint8_t *)(uintptr_t)val, strlen(name),
                               strlen(val), NGHTTP2_NV_FLAG_NONE};
    }
    nghttp2_submit_response(st->hc->s, st->sid, nv, n, &prd);
    st->head_sent = true;
    return 0;
}

static int
rp_body(http_parser *p, const char *at, size_t n)
{
    struct h2stream *st = p->data;

    evbuffer_add(st->data, at, n);
    st_resume(st);
    return 0;
}

static int
rp_complete(http_parser *p)
{
    struct h2stream *st = p->data;

    st->done = true;
    st_resume(st);
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings rp_settings = {
    .on_header_field = rp_header_field,
    .on_header_value = rp_header_value,
    .on_headers_complete = rp_headers_complete,
    .on_body = rp_body,
    .on_message_complete = rp_complete,
};

/* The bench connection hung up before its answer was whole: reset the stream, after
 * the content already read when there is some (drop-mid), at once otherwise. */
static void
st_cut(struct h2stream *st)
{
    st->cut = true;
    if (!st->head_sent)
        nghttp2_submit_rst_stream(st->hc->s, NGHTTP2_FLAG_NONE, st->sid, NGHTTP2_INTERNAL_ERROR);
    else
        st_resume(st);
}

static void
st_on_read(struct bufferevent *bev, void *arg)
{
    struct h2stream *st = arg;
    struct h2conn *hc = st->hc;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t len;

    while (!st->done && !st->cut && (len = evbuffer_get_length(in)) > 0) {
        char *d = (char *)evbuffer_pullup(in, (ssize_t)len);
        size_t used = http_parser_execute(&st->rp, &rp_settings, d, len);

        evbuffer_drain(in, used);
        if (HTTP_PARSER_ERRNO(&st->rp) != HPE_OK && HTTP_PARSER_ERRNO(&st->rp) != HPE_PAUSED)
            st_cut(st);
        else if (used < len && !st->done)
            st_cut(st);
    }
    hc_after(hc);
}

static void
st_on_event(struct bufferevent *bev, short what, void *arg)
{
    struct h2stream *st = arg;
    struct h2conn *hc = st->hc;

    (void)bev;
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    if (!st->done && !st->cut) {
        /* a close-delimited answer ends here; anything else is cut */
        http_parser_execute(&st->rp, &rp_settings, NULL, 0);
        if (!st->done)
            st_cut(st);
    }
    hc_after(hc);
}

/* ---- the request coming in ---- */

/* The request is whole: GOAWAY for the goaway fault, else hand it to a bench
 * connection over a socketpair. */
static int
st_start(struct h2stream *st)
{
    struct h2conn *hc = st->hc;
    int sv[2];
    char cl[64];

    if (st->goaway && !st->bench_path) {
        atomic_fetch_add(&h2_goaways, 1);
        nghttp2_submit_goaway(hc->s, NGHTTP2_FLAG_NONE, st->sid > 2 ? st->sid - 2 : 0,
                              NGHTTP2_NO_ERROR, NULL, 0);
        nghttp2_submit_rst_stream(hc->s, NGHTTP2_FLAG_NONE, st->sid, NGHTTP2_REFUSED_STREAM);
        hc->goaway_sent = true;
        return 0;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return nghttp2_submit_rst_stream(hc->s, NGHTTP2_FLAG_NONE, st->sid, NGHTTP2_INTERNAL_ERROR);
    if (!bench_up_conn_open(hc->t, sv[0], false)) {
        close(sv[1]);
        return nghttp2_submit_rst_stream(hc->s, NGHTTP2_FLAG_NONE, st->sid, NGHTTP2_INTERNAL_ERROR);
    }
    st->fd = sv[1];
    st->bev = bufferevent_socket_new(hc->t->base, st->fd, BEV_OPT_CLOSE_ON_FREE);
    st->data = evbuffer_new();
    if (!st->bev || !st->data) {
        if (!st->bev)
            close(st->fd);
        st->fd = -1;
        return nghttp2_submit_rst_stream(hc->s, NGHTTP2_FLAG_NONE, st->sid, NGHTTP2_INTERNAL_ERROR);
    }
    http_parser_init(&st->rp, HTTP_RESPONSE);
    st->rp.data = st;
    bufferevent_setcb(st->bev, st_on_read, NULL, st_on_event, st);
    snprintf(cl, sizeof(cl), "Content-Length: %zu\r\nConnection: close\r\n\r\n", st->body.len);
    bufferevent_write(st->bev, st->method[0] ? st->method : "GET",
                      strlen(st->method[0] ? st->method : "GET"));
    bufferevent_write(st->bev, " ", 1);
    bufferevent_write(st->bev, st->path.len ? st->path.data : "/", st->path.len ? st->path.len : 1);
    bufferevent_write(st->bev, " HTTP/1.1\r\n", 11);
    if (st->req.len)
        bufferevent_write(st->bev, st->req.data, st->req.len);
    bufferevent_write(st->bev, cl, strlen(cl));
    if (st->body.len)
        bufferevent_write(st->bev, st->body.data, st->body.len);
    bufferevent_enable(st->bev, EV_READ | EV_WRITE);
    return 0;
}

static int
on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct h2conn *hc = ud;
    struct h2stream *st;

    if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    st = gw_calloc(1, sizeof(*st));
    if (!st)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    st->hc = hc;
    st->sid = f->hd.stream_id;
    st->fd = -1;
    st->next = hc->streams;
    if (hc->streams)
        hc->streams->prev = st;
    hc->streams = st;
    hc->n_open++;
    max_update(hc->n_open);
    atomic_fetch_add(&h2_streams, 1);
    return nghttp2_session_set_stream_user_data(s, st->sid, st) == 0
               ? 0
               : NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
}

static int
on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
          const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    struct h2stream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    struct gw_buf *b;

    (void)flags;
    (void)ud;
    if (!st || f->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (nl == 7 && memcmp(name, ":method", 7) == 0) {
        snprintf(st->method, sizeof(st->method), "%.*s", (int)vl, (const char *)value);
        return 0;
    }
    if (nl == 5 && memcmp(name, ":path", 5) == 0) {
        gw_buf_reset(&st->path);
        (void)gw_buf_append(&st->path, (const char *)value, vl);
        st->bench_path = vl >= 8 && memcmp(value, "/_bench/", 8) == 0;
        return 0;
    }
    b = &st->req;
    if (nl == 10 && memcmp(name, ":authority", 10) == 0) {
        (void)gw_buf_append(b, "Host: ", 6);
    } else if (nl > 0 && name[0] == ':') {
        return 0;
    } else if (nl == 14 && memcmp(name, "content-length", 14) == 0) {
        return 0; /* written from the body we got */
    } else {
        if (nl == 13 && memcmp(name, "x-bench-fault", 13) == 0)
            st->goaway = vl == 6 && memcmp(value, "goaway", 6) == 0;
        (void)gw_buf_append(b, (const char *)name, nl);
        (void)gw_buf_append(b, ": ", 2);
    }
    (void)gw_buf_append(b, (const char *)value, vl);
    (void)gw_buf_append(b, "\r\n", 2);
    return 0;
}

static int
on_data(nghttp2_session *s, uint8_t flags, int32_t sid, const uint8_t *data, size_t len, void *ud)
{
    struct h2stream *st = nghttp2_session_get_stream_user_data(s, sid);

    (void)flags;
    (void)ud;
    if (st)
        (void)gw_buf_append(&st->body, (const char *)data, len);
    return 0;
}

static int
on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct h2stream *st;

    (void)ud;
    if ((f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA) ||
        !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!st || st->fd >= 0)
        return 0;
    if (bench_up_g.def.fault == BENCH_UP_FAULT_GOAWAY)
        st->goaway = true;
    return st_start(st);
}

static int
on_stream_close(nghttp2_session *s, int32_t sid, uint32_t err, void *ud)
{
    struct h2conn *hc = ud;
    struct h2stream *st = nghttp2_session_get_stream_user_data(s, sid);

    (void)err;
    if (!st)
        return 0;
    nghttp2_session_set_stream_user_data(s, sid, NULL);
    hc->n_open--;
    st_free(st);
    if (hc->goaway_sent && hc->n_open == 0)
        nghttp2_session_terminate_session(s, NGHTTP2_NO_ERROR);
    return 0;
}

static nghttp2_session_callbacks *cbs;
static pthread_once_t cbs_once = PTHREAD_ONCE_INIT;

static void
cbs_init(void)
{
    if (nghttp2_session_callbacks_new(&cbs) != 0)
        return;
    nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
}

static void
hc_on_read(struct bufferevent *bev, void *arg)
{
    struct h2conn *hc = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t len;

    while ((len = evbuffer_get_length(in)) > 0) {
        unsigned char *d = evbuffer_pullup(in, (ssize_t)len);
        ssize_t n = nghttp2_session_mem_recv(hc->s, d, len);

        if (n < 0) {
            hc_free(hc);
            return;
        }
        evbuffer_drain(in, (size_t)n);
    }
    hc_after(hc);
}

static void
hc_on_write(struct bufferevent *bev, void *arg)
{
    struct h2conn *hc = arg;

    (void)bev;
    hc_after(hc);
}

static void
hc_on_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        hc_free(arg);
}

bool
bench_up_h2_take(struct bench_up_thread *t, int fd, const char *first, size_t n)
{
    struct h2conn *hc;
    nghttp2_settings_entry iv[1];
    size_t niv = 0;

    pthread_once(&cbs_once, cbs_init);
    hc = cbs ? gw_calloc(1, sizeof(*hc)) : NULL;
    if (!hc)
        return false;
    hc->t = t;
    hc->bev = bufferevent_socket_new(t->base, fd, BEV_OPT_CLOSE_ON_FREE);
    if (!hc->bev) {
        gw_free(hc);
        return false; /* the fd is still the caller's */
    }
    if (nghttp2_session_server_new(&hc->s, cbs, hc) != 0) {
        bufferevent_free(hc->bev); /* closes the fd (BEV_OPT_CLOSE_ON_FREE) */
        gw_free(hc);
        return true; /* fd taken (and closed) */
    }
    if (bench_up_h2_max_streams) {
        iv[0] = (nghttp2_settings_entry){NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS,
                                         bench_up_h2_max_streams};
        niv = 1;
    }
    nghttp2_submit_settings(hc->s, NGHTTP2_FLAG_NONE, iv, niv);
    atomic_fetch_add(&h2_conns, 1);

    bufferevent_setcb(hc->bev, hc_on_read, hc_on_write, hc_on_event, hc);
    bufferevent_enable(hc->bev, EV_READ | EV_WRITE);
    /* (a bufferevent's input takes no bytes from us: the first ones go in directly) */
    if (nghttp2_session_mem_recv(hc->s, (const uint8_t *)first, n) != (ssize_t)n) {
        hc_free(hc);
        return true; /* fd taken (and closed) */
    }
    hc_after(hc);
    return true;
}
