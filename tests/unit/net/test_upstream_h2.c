/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_upstream_h2.c - the upstream client's HTTP/2 (providers[].http2:
 * on, h2c with prior knowledge) against an in-process scripted nghttp2 server on
 * 127.0.0.1: multiplexing on one connection, requests waiting for the connection and
 * for SETTINGS_MAX_CONCURRENT_STREAMS, a cancelled or failing first request, GOAWAY
 * (later streams refused, earlier ones finish, new requests on a new connection),
 * RST_STREAM before and after the head, a head too large, pause/resume through the
 * stream window, cancel, a read's DATA frames told once (on_body_read), the pool freed
 * under live streams, out of memory everywhere.
 * Owns:    its fixtures.
 * Threads: one (the test's event_base).
 * See:     net/upstream.c ("HTTP/2")
 */
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <nghttp2/nghttp2.h>

#include "core/alloc.h"
#include "core/conf.h"
#include "core/str.h"
#include "net/upstream.h"

/* ---- scripted server ----
 * The path of each request says what to do:
 *   /ok     200, "x-test: y", body "hello"
 *   /hold   nothing until t_srv_release() answers it like /ok
 *   /goaway GOAWAY (NO_ERROR, last_stream_id = this stream - 2)
 *   /rst    RST_STREAM before any head
 *   /rstmid 200, "hel", then RST_STREAM
 *   /big    a head of 300 headers (more than the client keeps)
 *   /long   200 and T_LONG bytes of body
 *   /frames 200, "hello" in five DATA frames of a byte each, written at once; the stream
 *           stays open */

#define T_LONG (600 * 1024) /* beyond the client's 256 KB stream window */

struct t_srv;

struct t_sstream {
    struct t_sconn *sc;
    struct t_sstream *next; /* the connection's open streams */
    int32_t sid;
    char path[32];
    size_t sent, total;
    bool held, answered;
};

struct t_sconn {
    struct t_srv *s;
    struct bufferevent *bev;
    nghttp2_session *ss;
    unsigned open;
    struct t_sstream *streams;
    struct t_sconn *next;
};

struct t_srv {
    struct event_base *base;
    struct evconnlistener *lis;
    uint16_t port;
    unsigned max_streams; /* announced when not 0 */
    unsigned accepts, streams, max_open, held, window_shut, closed_streams;
    struct t_sconn *conns;
    struct t_sstream *held_st[16];
};

static void
t_sconn_free(struct t_sconn *sc)
{
    struct t_sconn **pp;

    for (pp = &sc->s->conns; *pp; pp = &(*pp)->next)
        if (*pp == sc) {
            *pp = sc->next;
            break;
        }
    nghttp2_session_del(sc->ss); /* no on_stream_close: the open streams are ours */
    while (sc->streams) {
        struct t_sstream *st = sc->streams;
        unsigned i;

        sc->streams = st->next;
        for (i = 0; i < sc->s->held; i++)
            if (sc->s->held_st[i] == st)
                sc->s->held_st[i] = NULL;
        free(st);
    }
    bufferevent_free(sc->bev);
    free(sc);
}

static void
t_sflush(struct t_sconn *sc)
{
    const uint8_t *d;
    ssize_t n;

    while ((n = nghttp2_session_mem_send(sc->ss, &d)) > 0)
        bufferevent_write(sc->bev, d, (size_t)n);
}

static ssize_t
t_read_body(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t len, uint32_t *flags,
            nghttp2_data_source *src, void *ud)
{
    struct t_sstream *st = src->ptr;
    size_t n = st->total - st->sent;

    (void)s;
    (void)sid;
    (void)ud;
    if (n == 0 && strcmp(st->path, "/rstmid") == 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST after the content */
    if (strcmp(st->path, "/frames") == 0) {
        if (n == 0)
            return NGHTTP2_ERR_DEFERRED; /* open until the client resets it */
        n = 1;
    }
    if (n > len)
        n = len;
    if (strcmp(st->path, "/long") == 0)
        memset(buf, 'x', n);
    else
        memcpy(buf, "hello" + st->sent, n);
    st->sent += n;
    if (st->sent == st->total && strcmp(st->path, "/rstmid") != 0 &&
        strcmp(st->path, "/frames") != 0)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#define NV(n, v)                                                                                   \
    {                                                                                              \
        (uint8_t *)(uintptr_t)(n), (uint8_t *)(uintptr_t)(v), strlen(n), strlen(v),                \
            NGHTTP2_NV_FLAG_NONE                                                                   \
    }

static void
t_answer(struct t_sstream *st)
{
    nghttp2_nv nv[] = {NV(":status", "200"), NV("x-test", "y")};
    nghttp2_data_provider prd = {.source.ptr = st, .read_callback = t_read_body};

    if (st->answered)
        return;
    st->answered = true;
    st->total = strcmp(st->path, "/long") == 0 ? T_LONG : strcmp(st->path, "/rstmid") == 0 ? 3 : 5;
    assert_int_equal(nghttp2_submit_response(st->sc->ss, st->sid, nv, 2, &prd), 0);
}

static void
t_big_head(struct t_sstream *st)
{
    static char names[300][8];
    nghttp2_nv nv[301];
    size_t i;

    nv[0] = (nghttp2_nv)NV(":status", "200");
    for (i = 0; i < 300; i++) {
        snprintf(names[i], sizeof(names[i]), "h%zu", i);
        nv[i + 1] = (nghttp2_nv)NV(names[i], "v");
    }
    assert_int_equal(nghttp2_submit_response(st->sc->ss, st->sid, nv, 301, NULL), 0);
}

static int
on_s_begin(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct t_sconn *sc = ud;
    struct t_sstream *st = calloc(1, sizeof(*st));

    assert_non_null(st);
    st->sc = sc;
    st->sid = f->hd.stream_id;
    st->next = sc->streams;
    sc->streams = st;
    sc->open++;
    sc->s->streams++;
    if (sc->open > sc->s->max_open)
        sc->s->max_open = sc->open;
    return nghttp2_session_set_stream_user_data(s, st->sid, st);
}

static int
on_s_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
            const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    struct t_sstream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);

    (void)flags;
    (void)ud;
    if (st && nl == 5 && memcmp(name, ":path", 5) == 0)
        snprintf(st->path, sizeof(st->path), "%.*s", (int)vl, (const char *)value);
    return 0;
}

static int
on_s_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct t_sconn *sc = ud;
    struct t_sstream *st = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);

    if (!st || !(f->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    if (strcmp(st->path, "/hold") == 0) {
        st->held = true;
        sc->s->held_st[sc->s->held++] = st;
    } else if (strcmp(st->path, "/goaway") == 0) {
        nghttp2_submit_goaway(s, NGHTTP2_FLAG_NONE, st->sid - 2, NGHTTP2_NO_ERROR, NULL, 0);
    } else if (strcmp(st->path, "/rst") == 0) {
        nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, st->sid, NGHTTP2_INTERNAL_ERROR);
    } else if (strcmp(st->path, "/big") == 0) {
        t_big_head(st);
    } else {
        t_answer(st);
    }
    return 0;
}

static int
on_s_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct t_sconn *sc = ud;

    if (f->hd.type == NGHTTP2_DATA &&
        nghttp2_session_get_stream_remote_window_size(s, f->hd.stream_id) == 0)
        sc->s->window_shut++;
    return 0;
}

static int
on_s_close(nghttp2_session *s, int32_t sid, uint32_t err, void *ud)
{
    struct t_sconn *sc = ud;
    struct t_sstream *st = nghttp2_session_get_stream_user_data(s, sid), **pp;
    unsigned i;

    (void)err;
    if (!st)
        return 0;
    for (pp = &sc->streams; *pp; pp = &(*pp)->next)
        if (*pp == st) {
            *pp = st->next;
            break;
        }
    for (i = 0; i < sc->s->held; i++)
        if (sc->s->held_st[i] == st)
            sc->s->held_st[i] = NULL;
    sc->open--;
    sc->s->closed_streams++;
    free(st);
    return 0;
}

static nghttp2_session_callbacks *t_scbs;

static void
on_srv_read(struct bufferevent *bev, void *arg)
{
    struct t_sconn *sc = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t len;

    while ((len = evbuffer_get_length(in)) > 0) {
        ssize_t n = nghttp2_session_mem_recv(sc->ss, evbuffer_pullup(in, (ssize_t)len), len);

        if (n < 0) {
            t_sconn_free(sc);
            return;
        }
        evbuffer_drain(in, (size_t)n);
    }
    t_sflush(sc);
}

static void
on_srv_event(struct bufferevent *bev, short what, void *arg)
{
    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR))
        t_sconn_free(arg);
}

static void
on_srv_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len, void *arg)
{
    struct t_srv *s = arg;
    struct t_sconn *sc = calloc(1, sizeof(*sc));
    nghttp2_settings_entry iv = {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, s->max_streams};

    (void)l;
    (void)sa;
    (void)len;
    assert_non_null(sc);
    sc->s = s;
    sc->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
    assert_non_null(sc->bev);
    assert_int_equal(nghttp2_session_server_new(&sc->ss, t_scbs, sc), 0);
    nghttp2_submit_settings(sc->ss, NGHTTP2_FLAG_NONE, &iv, s->max_streams ? 1 : 0);
    bufferevent_setcb(sc->bev, on_srv_read, NULL, on_srv_event, sc);
    bufferevent_enable(sc->bev, EV_READ | EV_WRITE);
    sc->next = s->conns;
    s->conns = sc;
    s->accepts++;
    t_sflush(sc);
}

/* Answers every held request (like /ok). */
static void
t_srv_release(struct t_srv *s)
{
    unsigned i;

    for (i = 0; i < s->held; i++)
        if (s->held_st[i]) {
            t_answer(s->held_st[i]);
            t_sflush(s->held_st[i]->sc);
        }
}

/* ---- client side ---- */

struct t_cli {
    struct net_upx *x;
    int status;
    unsigned n_head, n_body, n_end;
    unsigned n_body_read; /* on_body_read calls */
    size_t body_at_read;  /* body_len at the first */
    enum gw_code rc;
    size_t body_len;
    char body[16];
    bool x_test, pause_in_head, pause_in_body, cancel_in_body;
};

static void
on_t_head(void *arg, int status, const struct net_hdr *hdrs, size_t n)
{
    struct t_cli *c = arg;
    size_t i;

    c->n_head++;
    c->status = status;
    if (c->pause_in_head)
        net_upx_pause(c->x);
    for (i = 0; i < n; i++)
        if (gw_str_eq(hdrs[i].name, GW_STR_LIT("x-test")) &&
            gw_str_eq(hdrs[i].value, GW_STR_LIT("y")))
            c->x_test = true;
}

static void
on_t_body(void *arg, const char *data, size_t len)
{
    struct t_cli *c = arg;

    c->n_body++;
    if (c->body_len + len < sizeof(c->body))
        memcpy(c->body + c->body_len, data, len);
    c->body_len += len;
    if (c->cancel_in_body)
        net_upx_cancel(c->x);
    if (c->pause_in_body) {
        c->pause_in_body = false;
        net_upx_pause(c->x);
    }
}

static void
on_t_end(void *arg, enum gw_code rc)
{
    struct t_cli *c = arg;

    c->n_end++;
    c->rc = rc;
}

static void
on_t_body_read(void *arg)
{
    struct t_cli *c = arg;

    if (c->n_body_read++ == 0)
        c->body_at_read = c->body_len;
}

static const struct net_up_cbs t_cbs = {
    .on_head = on_t_head,
    .on_body = on_t_body,
    .on_end = on_t_end,
    .on_body_read = on_t_body_read,
};

/* ---- fixture ---- */

struct t_fx {
    struct event_base *base;
    struct t_srv srv;
    struct net_uppool *pool;
    struct gw_conf_provider prov;
    char host[16];
    struct net_up_req req;
    struct net_hdr hdrs[2];
    bool wd_fired;
};

static int
t_setup(void **state)
{
    struct t_fx *fx = calloc(1, sizeof(*fx));
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);

    assert_non_null(fx);
    if (!t_scbs) {
        assert_int_equal(nghttp2_session_callbacks_new(&t_scbs), 0);
        nghttp2_session_callbacks_set_on_begin_headers_callback(t_scbs, on_s_begin);
        nghttp2_session_callbacks_set_on_header_callback(t_scbs, on_s_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(t_scbs, on_s_frame_recv);
        nghttp2_session_callbacks_set_on_frame_send_callback(t_scbs, on_s_frame_send);
        nghttp2_session_callbacks_set_on_stream_close_callback(t_scbs, on_s_close);
    }
    fx->base = event_base_new();
    assert_non_null(fx->base);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    fx->srv.base = fx->base;
    fx->srv.lis = evconnlistener_new_bind(fx->base, on_srv_accept, &fx->srv,
                                          LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16,
                                          (struct sockaddr *)&sin, sizeof(sin));
    assert_non_null(fx->srv.lis);
    assert_int_equal(getsockname(evconnlistener_get_fd(fx->srv.lis), (struct sockaddr *)&sin, &sl),
                     0);
    fx->srv.port = ntohs(sin.sin_port);
    fx->pool = net_uppool_new(fx->base, NULL, NULL);
    assert_non_null(fx->pool);
    snprintf(fx->host, sizeof(fx->host), "127.0.0.1");
    fx->prov.host = fx->host;
    fx->prov.port = fx->srv.port;
    fx->prov.http2 = GW_HTTP2_ON;
    /* connection-specific headers are not sent over h2; the others lower-cased */
    fx->hdrs[0] = (struct net_hdr){GW_STR_LIT("Connection"), GW_STR_LIT("keep-alive")};
    fx->hdrs[1] = (struct net_hdr){GW_STR_LIT("X-Req"), GW_STR_LIT("1")};
    fx->req.prov = &fx->prov;
    fx->req.method = "POST";
    fx->req.path = GW_STR_LIT("/ok");
    fx->req.hdrs = fx->hdrs;
    fx->req.n_hdrs = 2;
    fx->req.body = GW_STR_LIT("{}\n");
    fx->req.connect_timeout_ms = 5000;
    fx->req.head_timeout_ms = 5000;
    fx->req.idle_timeout_ms = 5000;
    *state = fx;
    return 0;
}

static int
t_teardown(void **state)
{
    struct t_fx *fx = *state;

    net_uppool_free(fx->pool);
    while (fx->srv.conns)
        t_sconn_free(fx->srv.conns);
    if (fx->srv.lis)
        evconnlistener_free(fx->srv.lis);
    event_base_free(fx->base);
    free(fx);
    return 0;
}

static void
on_t_watchdog(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    *(bool *)arg = true;
}

/* Runs the loop until *<counter> reaches <target> (the watchdog only turns a hang into
 * a failure). */
static void
t_run_until(struct t_fx *fx, const unsigned *counter, unsigned target)
{
    struct timeval tv = {10, 0};
    struct event *wd = evtimer_new(fx->base, on_t_watchdog, &fx->wd_fired);

    fx->wd_fired = false;
    evtimer_add(wd, &tv);
    while (*counter < target && !fx->wd_fired)
        event_base_loop(fx->base, EVLOOP_ONCE);
    event_free(wd);
    assert_false(fx->wd_fired);
}

static void
t_send(struct t_fx *fx, struct t_cli *c, const char *path)
{
    fx->req.path = gw_str_c(path);
    c->x = net_up_send(fx->pool, &fx->req, &t_cbs, c);
    assert_non_null(c->x);
    assert_int_equal(c->n_head + c->n_body + c->n_end, 0);
}

static void
t_assert_ok(const struct t_cli *c)
{
    assert_int_equal(c->n_end, 1);
    assert_int_equal(c->rc, GW_OK);
    assert_int_equal(c->status, 200);
    assert_true(c->x_test);
    assert_int_equal(c->body_len, 5);
    assert_memory_equal(c->body, "hello", 5);
}

/* ---- tests ---- */

static void
test_h2_requests_share_one_connection(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c[5] = {{0}};
    struct net_uppool_stats st;
    unsigned i, ends = 0;

    for (i = 0; i < 5; i++)
        t_send(fx, &c[i], "/ok");
    while (ends < 5) {
        t_run_until(fx, &c[ends].n_end, 1);
        ends++;
    }
    for (i = 0; i < 5; i++)
        t_assert_ok(&c[i]);
    assert_int_equal(fx->srv.accepts, 1);
    assert_int_equal(fx->srv.streams, 5);
    net_uppool_stats_get(fx->pool, &st);
    assert_int_equal(st.connects, 1);
    assert_int_equal(st.h2_conns, 1);
    assert_int_equal(st.h2_streams, 5);
    /* later requests go on the same connection */
    memset(&c[0], 0, sizeof(c[0]));
    t_send(fx, &c[0], "/ok");
    t_run_until(fx, &c[0].n_end, 1);
    t_assert_ok(&c[0]);
    assert_int_equal(fx->srv.accepts, 1);
}

static void
test_h2_max_concurrent_streams_is_respected(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c[6] = {{0}};
    unsigned i;

    fx->srv.max_streams = 2;
    for (i = 0; i < 6; i++)
        t_send(fx, &c[i], "/hold");
    t_run_until(fx, &fx->srv.held, 2);
    /* the others wait on the client's side, not in a second connection */
    for (i = 0; i < 4; i++) {
        t_srv_release(&fx->srv);
        t_run_until(fx, &fx->srv.held, 3 + i);
    }
    t_srv_release(&fx->srv);
    for (i = 0; i < 6; i++) {
        t_run_until(fx, &c[i].n_end, 1);
        t_assert_ok(&c[i]);
    }
    assert_int_equal(fx->srv.accepts, 1);
    assert_int_equal(fx->srv.max_open, 2);
}

static void
test_h2_waiters_follow_a_cancelled_first_request(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli lead = {0}, w[2] = {{0}};

    t_send(fx, &lead, "/ok");
    t_send(fx, &w[0], "/ok");
    t_send(fx, &w[1], "/ok");
    net_upx_cancel(lead.x); /* its connection goes; a waiter opens another */
    t_run_until(fx, &w[0].n_end, 1);
    t_run_until(fx, &w[1].n_end, 1);
    t_assert_ok(&w[0]);
    t_assert_ok(&w[1]);
    assert_int_equal(lead.n_head + lead.n_body + lead.n_end, 0);
    assert_int_equal(fx->srv.streams, 2);
}

static void
test_h2_failing_connection_fails_its_waiters(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c[3] = {{0}};
    unsigned i;

    evconnlistener_free(fx->srv.lis); /* nobody listens on the port any more */
    fx->srv.lis = NULL;
    for (i = 0; i < 3; i++)
        t_send(fx, &c[i], "/ok");
    for (i = 0; i < 3; i++) {
        t_run_until(fx, &c[i].n_end, 1);
        assert_int_equal(c[i].rc, GW_E_UPSTREAM_CONNECT);
        assert_int_equal(c[i].n_head, 0);
    }
}

static void
test_h2_goaway_refuses_later_streams_and_lets_earlier_ones_end(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0}, c = {0};

    t_send(fx, &a, "/hold"); /* stream 1 */
    t_run_until(fx, &fx->srv.held, 1);
    t_send(fx, &b, "/goaway"); /* stream 3: GOAWAY with last_stream_id 1 */
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(b.rc, GW_E_UPSTREAM_DROPPED);
    assert_int_equal(b.n_head, 0);
    /* a new request goes on a new connection while stream 1 still runs */
    t_send(fx, &c, "/ok");
    t_run_until(fx, &c.n_end, 1);
    t_assert_ok(&c);
    assert_int_equal(fx->srv.accepts, 2);
    assert_int_equal(a.n_end, 0);
    t_srv_release(&fx->srv);
    t_run_until(fx, &a.n_end, 1);
    t_assert_ok(&a);
}

static void
test_h2_reset_before_and_after_the_head(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};

    t_send(fx, &a, "/rst");
    t_send(fx, &b, "/rstmid");
    t_run_until(fx, &a.n_end, 1);
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(a.rc, GW_E_UPSTREAM_DROPPED);
    assert_int_equal(a.n_head, 0);
    assert_int_equal(b.rc, GW_E_UPSTREAM_DROPPED);
    assert_int_equal(b.n_head, 1);
    assert_int_equal(b.body_len, 3);
    assert_memory_equal(b.body, "hel", 3);
}

static void
test_h2_head_too_large_is_protocol(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};

    t_send(fx, &a, "/big");
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_E_UPSTREAM_PROTOCOL);
    assert_int_equal(a.n_head, 0);
    /* the connection serves on */
    t_send(fx, &b, "/ok");
    t_run_until(fx, &b.n_end, 1);
    t_assert_ok(&b);
    assert_int_equal(fx->srv.accepts, 1);
}

/* A later stream's end proves the client read every frame sent before it. */
static void
test_h2_pause_shuts_the_stream_window_and_resume_delivers_all(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};

    a.pause_in_body = true;
    t_send(fx, &a, "/long");
    t_run_until(fx, &a.n_body, 1);
    t_run_until(fx, &fx->srv.window_shut, 1); /* the server may send no more */
    /* another stream on the same connection is not held back */
    t_send(fx, &b, "/ok");
    t_run_until(fx, &b.n_end, 1);
    t_assert_ok(&b);
    assert_int_equal(a.n_body, 1); /* nothing more delivered while paused */
    assert_true(a.body_len < T_LONG);
    assert_int_equal(a.n_end, 0);
    net_upx_resume(a.x);
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_OK);
    assert_int_equal(a.body_len, T_LONG);
    assert_int_equal(fx->srv.accepts, 1);
}

static void
test_h2_stream_ending_while_paused_ends_after_resume(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};

    a.pause_in_head = true;
    t_send(fx, &a, "/ok");
    t_run_until(fx, &a.n_head, 1);
    t_send(fx, &b, "/ok");
    t_run_until(fx, &b.n_end, 1); /* a's body and END_STREAM were read before */
    assert_int_equal(a.n_body, 0);
    assert_int_equal(a.n_end, 0);
    net_upx_resume(a.x);
    t_run_until(fx, &a.n_end, 1);
    t_assert_ok(&a);
    assert_int_equal(a.n_body, 1);
}

static void
test_h2_cancel_in_body_resets_only_that_stream(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};

    a.cancel_in_body = true;
    t_send(fx, &a, "/long");
    t_send(fx, &b, "/hold");
    t_run_until(fx, &fx->srv.closed_streams, 1); /* the reset reached the server */
    assert_int_equal(a.n_end, 0);
    assert_int_equal(a.n_body, 1);
    t_srv_release(&fx->srv);
    t_run_until(fx, &b.n_end, 1);
    t_assert_ok(&b);
    assert_int_equal(fx->srv.accepts, 1);
}

/* The DATA frames of one read are delivered one by one, then on_body_read once for the
 * stream, so that the caller writes them to its client in one write. */
static void
test_h2_frames_of_one_read_then_one_body_read(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0};

    t_send(fx, &a, "/frames");
    t_run_until(fx, &a.n_body_read, 1);
    assert_int_equal(a.n_body, 5);
    assert_int_equal(a.body_at_read, 5);
    assert_memory_equal(a.body, "hello", 5);
    assert_int_equal(a.n_end, 0);
    net_upx_cancel(a.x);
    t_run_until(fx, &fx->srv.closed_streams, 1);
    assert_int_equal(a.n_body_read, 1);
}

static void
test_h2_pool_free_with_live_streams(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0}, c = {0};

    t_send(fx, &a, "/hold");
    t_send(fx, &b, "/hold");
    t_run_until(fx, &fx->srv.held, 2);
    t_send(fx, &c, "/goaway"); /* a session after GOAWAY is freed too */
    t_run_until(fx, &c.n_end, 1);
    net_uppool_free(fx->pool); /* no callback follows; nothing leaks (ASan) */
    fx->pool = NULL;
    assert_int_equal(a.n_end + b.n_end, 0);
}

/* Every allocation, one at a time, fails: each exchange ends exactly once, nothing
 * leaks (ASan); the last runs fail nothing and succeed. */
static void
test_h2_out_of_memory_at_each_allocation_ends_cleanly(void **state)
{
    struct t_fx *fx = *state;
    unsigned long n;
    int i;

    net_uppool_free(fx->pool);
    fx->pool = NULL;
    for (n = 1; n <= 40; n++) {
        struct t_cli c[2] = {{0}, {0}};
        struct net_uppool *p;

        gw_alloc_fail_at(n);
        p = net_uppool_new(fx->base, NULL, NULL);
        fx->req.path = GW_STR_LIT("/ok");
        for (i = 0; p && i < 2; i++)
            c[i].x = net_up_send(p, &fx->req, &t_cbs, &c[i]);
        for (i = 0; p && i < 2; i++)
            if (c[i].x) {
                t_run_until(fx, &c[i].n_end, 1);
                assert_int_equal(c[i].n_end, 1);
            }
        gw_alloc_fail_at(0);
        if (n == 40) {
            assert_non_null(p);
            t_assert_ok(&c[0]);
            t_assert_ok(&c[1]);
        }
        net_uppool_free(p);
        while (fx->srv.conns)
            t_sconn_free(fx->srv.conns);
    }
}

#define T(f) cmocka_unit_test_setup_teardown(f, t_setup, t_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_h2_requests_share_one_connection),
        T(test_h2_max_concurrent_streams_is_respected),
        T(test_h2_waiters_follow_a_cancelled_first_request),
        T(test_h2_failing_connection_fails_its_waiters),
        T(test_h2_goaway_refuses_later_streams_and_lets_earlier_ones_end),
        T(test_h2_reset_before_and_after_the_head),
        T(test_h2_head_too_large_is_protocol),
        T(test_h2_pause_shuts_the_stream_window_and_resume_delivers_all),
        T(test_h2_stream_ending_while_paused_ends_after_resume),
        T(test_h2_cancel_in_body_resets_only_that_stream),
        T(test_h2_frames_of_one_read_then_one_body_read),
        T(test_h2_pool_free_with_live_streams),
        T(test_h2_out_of_memory_at_each_allocation_ends_cleanly),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);

    nghttp2_session_callbacks_del(t_scbs);
    return rc;
}
