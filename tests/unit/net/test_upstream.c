/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_upstream.c - the upstream HTTP client against an in-process
 * scripted server on 127.0.0.1 (evconnlistener + bufferevents on the same event_base):
 * bodies by length, chunked and close, a read's chunks told once (on_body_read),
 * keep-alive reuse and its race, every failure code, pause/resume, cancel, TLS with a
 * certificate made at test time.
 * Owns:    its fixtures.
 * Threads: one (the test's event_base).
 * See:     net/upstream.c
 */
#include <errno.h>
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
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "core/alloc.h"
#include "core/conf.h"
#include "core/str.h"
#include "net/upstream-priv.h"
#include "net/upstream.h"

/* ---- test buffers ----
 * Plain malloc, not gw_malloc: the out-of-memory test makes the Nth gw_ allocation
 * fail and only the code under test may take it. */

struct t_buf {
    char *data; /* NUL-terminated when len > 0 */
    size_t len, cap;
};

static void
t_buf_append(struct t_buf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->data = realloc(b->data, b->cap);
        assert_non_null(b->data);
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void
t_buf_consume(struct t_buf *b, size_t n)
{
    memmove(b->data, b->data + n, b->len - n + 1);
    b->len -= n;
}

static void
t_buf_fini(struct t_buf *b)
{
    free(b->data);
    *b = (struct t_buf){0};
}

/* ---- scripted server ---- */

enum t_mode {
    T_RESP,        /* after each whole request: write resp (then close if close_after) */
    T_SILENT,      /* read requests, never answer */
    T_RAW_ON_READ, /* on any bytes (not HTTP): write resp and close */
};

struct t_sconn {
    struct t_srv *s;
    struct bufferevent *bev;
    struct t_buf in;
    bool closing;   /* close once the output is flushed */
    unsigned n_req; /* requests read on this connection */
    struct t_sconn *next;
};

struct t_srv {
    struct event_base *base;
    struct evconnlistener *lis;
    SSL_CTX *ssl; /* TLS server when set */
    uint16_t port;
    enum t_mode mode;
    const char *resp;
    const char *first_resp; /* when set: the answer to each connection's first request
                               (a CONNECT proxy's), the last such request kept in
                               first_req */
    struct t_buf first_req;
    bool close_after;
    unsigned accepts, requests, eofs, drained;
    unsigned resumed; /* requests on a TLS connection that resumed a session */
    struct t_buf last_req;
    struct t_sconn *conns; /* most recent first */
};

static void
t_sconn_free(struct t_sconn *sc)
{
    struct t_srv *s = sc->s;
    struct t_sconn **pp;

    for (pp = &s->conns; *pp; pp = &(*pp)->next)
        if (*pp == sc) {
            *pp = sc->next;
            break;
        }
    bufferevent_free(sc->bev);
    t_buf_fini(&sc->in);
    free(sc);
}

static void
t_srv_write(struct t_sconn *sc, const char *data)
{
    assert_non_null(sc); /* none when the accept's allocation failed (make test-oom) */
    bufferevent_write(sc->bev, data, strlen(data));
}

/* Answers each whole request (head + Content-Length body) in sc->in. */
static void
t_srv_serve(struct t_sconn *sc)
{
    struct t_srv *s = sc->s;

    for (;;) {
        char *end, *cl;
        size_t head_len, body_len = 0;

        if (sc->in.len == 0)
            return;
        end = strstr(sc->in.data, "\r\n\r\n");
        if (!end)
            return;
        head_len = (size_t)(end - sc->in.data) + 4;
        cl = strstr(sc->in.data, "Content-Length: ");
        if (cl && cl < end)
            body_len = strtoul(cl + 16, NULL, 10);
        if (sc->in.len < head_len + body_len)
            return;
        s->last_req.len = 0;
        t_buf_append(&s->last_req, sc->in.data, head_len + body_len);
        t_buf_consume(&sc->in, head_len + body_len);
        s->requests++;
        if (s->ssl && SSL_session_reused(bufferevent_openssl_get_ssl(sc->bev)))
            s->resumed++;
        if (s->first_resp && sc->n_req++ == 0) {
            s->first_req.len = 0;
            t_buf_append(&s->first_req, s->last_req.data, s->last_req.len);
            t_srv_write(sc, s->first_resp);
            continue;
        }
        if (s->mode == T_RESP && s->resp) {
            t_srv_write(sc, s->resp);
            if (s->close_after) {
                /* Flush, then close: freeing now could drop the unsent bytes. */
                bufferevent_disable(sc->bev, EV_READ);
                sc->closing = true;
                return;
            }
        }
    }
}

static void
on_srv_read(struct bufferevent *bev, void *arg)
{
    struct t_sconn *sc = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    char chunk[4096];
    int n;

    while ((n = evbuffer_remove(in, chunk, sizeof(chunk))) > 0)
        t_buf_append(&sc->in, chunk, (size_t)n);
    if (sc->s->mode == T_RAW_ON_READ) {
        t_srv_write(sc, sc->s->resp);
        sc->closing = true;
        bufferevent_disable(bev, EV_READ);
        return;
    }
    t_srv_serve(sc);
}

static void
on_srv_write(struct bufferevent *bev, void *arg)
{
    struct t_sconn *sc = arg;

    (void)bev;
    sc->s->drained++;
    if (sc->closing)
        t_sconn_free(sc);
}

static void
on_srv_event(struct bufferevent *bev, short what, void *arg)
{
    struct t_sconn *sc = arg;

    (void)bev;
    if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
        sc->s->eofs++;
        t_sconn_free(sc);
    }
}

static void
on_srv_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len, void *arg)
{
    struct t_srv *s = arg;
    struct t_sconn *sc = calloc(1, sizeof(*sc));

    (void)l;
    (void)sa;
    (void)len;
    assert_non_null(sc);
    sc->s = s;
    if (s->ssl)
        sc->bev = bufferevent_openssl_socket_new(s->base, fd, SSL_new(s->ssl),
                                                 BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
    else
        sc->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
    assert_non_null(sc->bev);
    bufferevent_setcb(sc->bev, on_srv_read, on_srv_write, on_srv_event, sc);
    bufferevent_enable(sc->bev, EV_READ | EV_WRITE);
    sc->next = s->conns;
    s->conns = sc;
    s->accepts++;
}

static void
t_srv_start(struct t_srv *s, struct event_base *base)
{
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    s->base = base;
    s->lis =
        evconnlistener_new_bind(base, on_srv_accept, s, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE,
                                16, (struct sockaddr *)&sin, sizeof(sin));
    assert_non_null(s->lis);
    assert_int_equal(getsockname(evconnlistener_get_fd(s->lis), (struct sockaddr *)&sin, &sl), 0);
    s->port = ntohs(sin.sin_port);
}

static void
t_srv_close_all(struct t_srv *s)
{
    while (s->conns)
        t_sconn_free(s->conns);
}

static void
t_srv_stop(struct t_srv *s)
{
    t_srv_close_all(s);
    if (s->lis)
        evconnlistener_free(s->lis);
    t_buf_fini(&s->last_req);
    t_buf_fini(&s->first_req);
}

/* ---- client side ---- */

struct t_cli {
    struct net_upx *x;
    int status;
    unsigned n_head, n_body, n_end;
    unsigned n_body_read;   /* on_body_read calls */
    size_t body_at_read[4]; /* body.len at each of the first four */
    enum gw_code rc;
    struct t_buf body;
    char hdr_x[64]; /* the value of header X-Test */
    bool cancel_in_body, pause_in_body, send_in_end, cancel_in_body_read;
    /* send_in_end: the next exchange, sent from inside on_end */
    struct net_uppool *pool;
    const struct net_up_req *next_req;
    struct t_cli *next_cli;
};

static void
on_t_head(void *arg, int status, const struct net_hdr *hdrs, size_t n)
{
    struct t_cli *c = arg;
    size_t i;

    c->n_head++;
    c->status = status;
    for (i = 0; i < n; i++)
        if (gw_str_eq_nocase(hdrs[i].name, GW_STR_LIT("X-Test")))
            snprintf(c->hdr_x, sizeof(c->hdr_x), "%.*s", (int)hdrs[i].value.len, hdrs[i].value.ptr);
}

static void
on_t_body(void *arg, const char *data, size_t len)
{
    struct t_cli *c = arg;

    c->n_body++;
    t_buf_append(&c->body, data, len);
    if (c->cancel_in_body)
        net_upx_cancel(c->x);
    if (c->pause_in_body) {
        c->pause_in_body = false;
        net_upx_pause(c->x);
    }
}

static void
on_t_body_read(void *arg)
{
    struct t_cli *c = arg;

    if (c->n_body_read < 4)
        c->body_at_read[c->n_body_read] = c->body.len;
    c->n_body_read++;
    if (c->cancel_in_body_read)
        net_upx_cancel(c->x);
}

static const struct net_up_cbs t_cbs;

static void
on_t_end(void *arg, enum gw_code rc)
{
    struct t_cli *c = arg;

    c->n_end++;
    c->rc = rc;
    if (c->send_in_end) {
        c->next_cli->x = net_up_send(c->pool, c->next_req, &t_cbs, c->next_cli);
        assert_non_null(c->next_cli->x);
    }
}

static const struct net_up_cbs t_cbs = {
    .on_head = on_t_head,
    .on_body = on_t_body,
    .on_end = on_t_end,
    .on_body_read = on_t_body_read,
};

static void
t_cli_fini(struct t_cli *c)
{
    t_buf_fini(&c->body);
}

/* ---- fixture ---- */

struct t_fx {
    struct event_base *base;
    struct t_srv srv;
    struct net_uppool *pool;
    SSL_CTX *cli_ssl;
    struct gw_conf_provider prov;
    char host[64]; /* prov.host */
    struct net_up_req req;
    struct net_hdr hdrs[1];
    bool wd_fired;
};

static int
t_setup(void **state)
{
    struct t_fx *fx = calloc(1, sizeof(*fx));

    assert_non_null(fx);
    fx->base = event_base_new();
    assert_non_null(fx->base);
    t_srv_start(&fx->srv, fx->base);
    fx->cli_ssl = net_upstream_ssl_ctx_new();
    assert_non_null(fx->cli_ssl);
    fx->pool = net_uppool_new(fx->base, NULL, fx->cli_ssl);
    assert_non_null(fx->pool);
    snprintf(fx->host, sizeof(fx->host), "127.0.0.1");
    fx->prov.host = fx->host;
    fx->prov.port = fx->srv.port;
    fx->prov.tls = false;
    fx->hdrs[0].name = GW_STR_LIT("X-Req");
    fx->hdrs[0].value = GW_STR_LIT("1");
    fx->req.prov = &fx->prov;
    fx->req.method = "POST";
    fx->req.path = GW_STR_LIT("/v1/chat/completions");
    fx->req.hdrs = fx->hdrs;
    fx->req.n_hdrs = 1;
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
    t_srv_stop(&fx->srv);
    if (fx->srv.ssl)
        SSL_CTX_free(fx->srv.ssl);
    SSL_CTX_free(fx->cli_ssl);
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

/* Runs the loop until *<counter> reaches <target>. The watchdog only turns a hang into
 * a failure; nothing here depends on timing. */
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

/* Lets the loop handle everything that is ready now, without waiting. */
static void
t_run_ready(struct t_fx *fx)
{
    int i;

    for (i = 0; i < 20; i++)
        event_base_loop(fx->base, EVLOOP_NONBLOCK);
}

static void
t_send(struct t_fx *fx, struct t_cli *c)
{
    c->pool = fx->pool;
    c->x = net_up_send(fx->pool, &fx->req, &t_cbs, c);
    assert_non_null(c->x);
    /* Callbacks never run inside net_up_send. */
    assert_int_equal(c->n_head + c->n_body + c->n_end, 0);
}

static void
t_stats(struct t_fx *fx, unsigned long connects, unsigned long reuses, unsigned long idle)
{
    struct net_uppool_stats st;

    net_uppool_stats_get(fx->pool, &st);
    assert_int_equal(st.connects, connects);
    assert_int_equal(st.reuses, reuses);
    assert_int_equal(st.idle, idle);
}

/* ---- tests ---- */

static void
test_upstream_content_length_answer(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};
    char host[64];

    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-Test: yes\r\n\r\nhello";
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_OK);
    assert_int_equal(c.n_head, 1);
    assert_int_equal(c.status, 200);
    assert_string_equal(c.hdr_x, "yes");
    assert_int_equal(c.body.len, 5);
    assert_memory_equal(c.body.data, "hello", 5);
    /* The request as written. */
    snprintf(host, sizeof(host), "Host: 127.0.0.1:%u\r\n", (unsigned)fx->srv.port);
    assert_non_null(strstr(fx->srv.last_req.data, "POST /v1/chat/completions HTTP/1.1\r\n"));
    assert_ptr_equal(strstr(fx->srv.last_req.data, "POST"), fx->srv.last_req.data);
    assert_non_null(strstr(fx->srv.last_req.data, host));
    assert_non_null(strstr(fx->srv.last_req.data, "Content-Length: 3\r\n"));
    assert_non_null(strstr(fx->srv.last_req.data, "X-Req: 1\r\n\r\n{}\n"));
    t_stats(fx, 1, 0, 1);
    t_cli_fini(&c);
}

static void
test_upstream_chunked_answer_delivered_incrementally(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n";
    t_send(fx, &c);
    t_run_until(fx, &c.n_body, 1);
    assert_int_equal(c.n_end, 0);
    assert_int_equal(c.body.len, 5);
    assert_memory_equal(c.body.data, "hello", 5);
    t_srv_write(fx->srv.conns, "6\r\n world\r\n0\r\n\r\n");
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_OK);
    assert_int_equal(c.body.len, 11);
    assert_memory_equal(c.body.data, "hello world", 11);
    t_stats(fx, 1, 0, 1);
    t_cli_fini(&c);
}

/* The chunks of one read are delivered one by one, then on_body_read once, so that the
 * caller writes them to its client in one write; the next read gets its own. The
 * answer's end brings no on_body_read (on_end is the caller's last word). */
static void
test_upstream_chunks_of_one_read_then_one_body_read(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "5\r\nhello\r\n6\r\n world\r\n1\r\n!\r\n";
    t_send(fx, &c);
    t_run_until(fx, &c.n_body_read, 1);
    assert_int_equal(c.n_body, 3);
    assert_int_equal(c.body_at_read[0], 12);
    t_srv_write(fx->srv.conns, "2\r\n:)\r\n");
    t_run_until(fx, &c.n_body_read, 2);
    assert_int_equal(c.n_body, 4);
    assert_int_equal(c.body_at_read[1], 14);
    t_srv_write(fx->srv.conns, "1\r\n.\r\n0\r\n\r\n");
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_OK);
    assert_int_equal(c.n_body, 5);
    assert_int_equal(c.n_body_read, 2);
    assert_int_equal(c.body.len, 15);
    assert_memory_equal(c.body.data, "hello world!:).", 15);
    t_stats(fx, 1, 0, 1);
    t_cli_fini(&c);
}

/* Cancelled from on_body_read: no more callbacks, the connection is closed. */
static void
test_upstream_cancel_in_on_body_read_stops_and_closes(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n";
    c.cancel_in_body_read = true;
    t_send(fx, &c);
    t_run_until(fx, &fx->srv.eofs, 1);
    assert_int_equal(c.n_body, 1);
    assert_int_equal(c.n_body_read, 1);
    assert_int_equal(c.n_end, 0);
    t_stats(fx, 1, 0, 0);
    t_cli_fini(&c);
}

static void
test_upstream_keepalive_reuses_connection(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_OK);
    t_stats(fx, 1, 0, 1);
    t_send(fx, &b);
    t_stats(fx, 1, 1, 0);
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(b.rc, GW_OK);
    assert_memory_equal(b.body.data, "ok", 2);
    assert_int_equal(fx->srv.accepts, 1);
    assert_int_equal(fx->srv.requests, 2);
    t_stats(fx, 1, 1, 1);
    t_cli_fini(&a);
    t_cli_fini(&b);
}

static void
test_upstream_send_from_on_end_reuses_connection(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    a.send_in_end = true;
    a.next_req = &fx->req;
    a.next_cli = &b;
    t_send(fx, &a);
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(a.rc, GW_OK);
    assert_int_equal(b.rc, GW_OK);
    assert_int_equal(fx->srv.accepts, 1);
    t_stats(fx, 1, 1, 1);
    t_cli_fini(&a);
    t_cli_fini(&b);
}

static void
test_upstream_refused_gives_connect(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    evconnlistener_free(fx->srv.lis); /* nobody listens on the port any more */
    fx->srv.lis = NULL;
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_E_UPSTREAM_CONNECT);
    assert_int_equal(c.n_head, 0);
    t_stats(fx, 1, 0, 0);
}

static void
test_upstream_unresolvable_name_without_dns_gives_connect(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    snprintf(fx->host, sizeof(fx->host), "upstream.invalid");
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_E_UPSTREAM_CONNECT);
}

static void
test_upstream_close_mid_body_gives_dropped(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello";
    fx->srv.close_after = true;
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_E_UPSTREAM_DROPPED);
    assert_int_equal(c.status, 200);
    assert_memory_equal(c.body.data, "hello", 5);
    t_stats(fx, 1, 0, 0);
    t_cli_fini(&c);
}

static void
test_upstream_close_delimited_body_ends_ok(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nabc";
    fx->srv.close_after = true;
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_OK);
    assert_int_equal(c.body.len, 3);
    assert_memory_equal(c.body.data, "abc", 3);
    t_stats(fx, 1, 0, 0); /* never pooled */
    t_cli_fini(&c);
}

static void
test_upstream_interim_100_is_ignored(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.resp = "HTTP/1.1 100 Continue\r\n\r\n"
                   "HTTP/1.1 201 Created\r\nContent-Length: 2\r\nX-Test: final\r\n\r\nok";
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_OK);
    assert_int_equal(c.n_head, 1);
    assert_int_equal(c.status, 201);
    assert_string_equal(c.hdr_x, "final");
    assert_memory_equal(c.body.data, "ok", 2);
    t_cli_fini(&c);
}

static void
test_upstream_headers_split_across_reads(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nX-Te";
    t_send(fx, &c);
    t_run_until(fx, &fx->srv.drained, 1);
    t_run_ready(fx);
    assert_int_equal(c.n_head, 0);
    t_srv_write(fx->srv.conns, "st: spl");
    t_run_until(fx, &fx->srv.drained, 2);
    t_run_ready(fx);
    t_srv_write(fx->srv.conns, "it\r\nContent-Length: 1\r\n\r\nz");
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_OK);
    assert_string_equal(c.hdr_x, "split");
    assert_memory_equal(c.body.data, "z", 1);
    t_cli_fini(&c);
}

static void
test_upstream_garbage_gives_protocol(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.resp = "HTTP/1.1 2x0 Nope\r\n\r\n";
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_E_UPSTREAM_PROTOCOL);
    t_stats(fx, 1, 0, 0);
}

static void
test_upstream_head_timeout(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.mode = T_SILENT;
    fx->req.head_timeout_ms = 50;
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_E_UPSTREAM_TIMEOUT);
    assert_int_equal(c.n_head, 0);
    assert_int_equal(fx->srv.requests, 1);
    t_stats(fx, 1, 0, 0);
}

static void
test_upstream_idle_timeout_mid_body(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello";
    fx->req.idle_timeout_ms = 50;
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_E_UPSTREAM_TIMEOUT);
    assert_int_equal(c.status, 200);
    assert_memory_equal(c.body.data, "hello", 5);
    t_cli_fini(&c);
}

static void
test_upstream_cancel_in_on_body_stops_and_closes(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello";
    c.cancel_in_body = true;
    t_send(fx, &c);
    t_run_until(fx, &fx->srv.eofs, 1); /* the server sees the connection end */
    assert_int_equal(c.n_head, 1);
    assert_int_equal(c.n_body, 1);
    assert_int_equal(c.n_end, 0);
    t_stats(fx, 1, 0, 0);
    t_cli_fini(&c);
}

static void
test_upstream_cancel_outside_callbacks(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.mode = T_SILENT;
    t_send(fx, &c);
    t_run_until(fx, &fx->srv.requests, 1);
    net_upx_cancel(c.x);
    t_run_until(fx, &fx->srv.eofs, 1);
    assert_int_equal(c.n_head + c.n_body + c.n_end, 0);
}

static void
test_upstream_stale_keepalive_is_retried_once(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    t_stats(fx, 1, 0, 1);
    /* The server closes the idle connection and the client sends before its loop
     * could notice: the request goes out on a dead connection. */
    t_srv_close_all(&fx->srv);
    t_send(fx, &b);
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(b.rc, GW_OK);
    assert_memory_equal(b.body.data, "ok", 2);
    assert_int_equal(fx->srv.accepts, 2);
    t_stats(fx, 2, 1, 1);
    t_cli_fini(&a);
    t_cli_fini(&b);
}

static bool
t_idle_is(struct t_fx *fx, unsigned long n)
{
    struct net_uppool_stats st;

    net_uppool_stats_get(fx->pool, &st);
    return st.idle == n;
}

static void
test_upstream_idle_connection_closed_by_upstream_is_dropped(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};
    struct timeval tv = {10, 0};
    struct event *wd = evtimer_new(fx->base, on_t_watchdog, &fx->wd_fired);

    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    t_srv_close_all(&fx->srv);
    evtimer_add(wd, &tv);
    while (!t_idle_is(fx, 0) && !fx->wd_fired)
        event_base_loop(fx->base, EVLOOP_ONCE);
    event_free(wd);
    assert_false(fx->wd_fired);
    t_send(fx, &b);
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(b.rc, GW_OK);
    t_stats(fx, 2, 0, 1);
    t_cli_fini(&a);
    t_cli_fini(&b);
}

static void
test_upstream_idle_connection_closed_after_idle_timeout(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0};
    struct timeval tv = {10, 0};
    struct event *wd = evtimer_new(fx->base, on_t_watchdog, &fx->wd_fired);

    assert_true(net_uppool_set_idle_ms(fx->pool, 50));
    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    t_stats(fx, 1, 0, 1);
    evtimer_add(wd, &tv);
    while (!t_idle_is(fx, 0) && !fx->wd_fired)
        event_base_loop(fx->base, EVLOOP_ONCE);
    event_free(wd);
    assert_false(fx->wd_fired);
    t_run_until(fx, &fx->srv.eofs, 1); /* closed by the client, seen by the server */
    t_cli_fini(&a);
}

static void
test_upstream_pause_holds_buffered_body_until_resume(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                   "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    c.pause_in_body = true;
    t_send(fx, &c);
    t_run_until(fx, &c.n_body, 1);
    t_run_until(fx, &fx->srv.drained, 1);
    t_run_ready(fx);
    assert_int_equal(c.n_body, 1);
    assert_int_equal(c.n_end, 0);
    assert_int_equal(c.body.len, 5);
    net_upx_resume(c.x);
    assert_int_equal(c.n_body, 1); /* nothing is delivered inside resume */
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_OK);
    assert_int_equal(c.body.len, 11);
    assert_memory_equal(c.body.data, "hello world", 11);
    t_stats(fx, 1, 0, 1);
    t_cli_fini(&c);
}

static void
on_t_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (*(unsigned *)arg)++;
}

static void
test_upstream_pause_stops_reading_and_idle_timeout(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};
    unsigned ticks = 0;
    struct timeval tv = {0, 200 * 1000};
    struct event *tick = evtimer_new(fx->base, on_t_tick, &ticks);

    fx->srv.resp = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n";
    fx->req.idle_timeout_ms = 50;
    c.pause_in_body = true;
    t_send(fx, &c);
    t_run_until(fx, &c.n_body, 1);
    t_srv_write(fx->srv.conns, "6\r\n world\r\n0\r\n\r\n");
    /* Four idle timeouts pass while paused: no delivery, no timeout. */
    evtimer_add(tick, &tv);
    t_run_until(fx, &ticks, 1);
    event_free(tick);
    assert_int_equal(c.n_body, 1);
    assert_int_equal(c.n_end, 0);
    net_upx_resume(c.x);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_OK);
    assert_memory_equal(c.body.data, "hello world", 11);
    t_cli_fini(&c);
}

static void
test_upstream_tls_to_plain_port_gives_tls(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.mode = T_RAW_ON_READ;
    fx->srv.resp = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    fx->prov.tls = true;
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_E_UPSTREAM_TLS);
    t_stats(fx, 1, 0, 0);
}

/* A self-signed certificate for 127.0.0.1 / localhost, made now. */
static X509 *
t_make_cert(EVP_PKEY **keyp)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *crt = X509_new();
    X509_NAME *name;
    X509_EXTENSION *ext;
    X509V3_CTX v3;

    assert_non_null(key);
    assert_non_null(crt);
    X509_set_version(crt, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(crt), 1);
    X509_gmtime_adj(X509_getm_notBefore(crt), -3600);
    X509_gmtime_adj(X509_getm_notAfter(crt), 3600);
    X509_set_pubkey(crt, key);
    name = X509_get_subject_name(crt);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1,
                               0);
    X509_set_issuer_name(crt, name);
    X509V3_set_ctx(&v3, crt, crt, NULL, NULL, 0);
    ext = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost");
    assert_non_null(ext);
    X509_add_ext(crt, ext, -1);
    X509_EXTENSION_free(ext);
    assert_true(X509_sign(crt, key, EVP_sha256()) > 0);
    *keyp = key;
    return crt;
}

static void
t_tls_server(struct t_fx *fx, bool trust)
{
    EVP_PKEY *key;
    X509 *crt = t_make_cert(&key);

    fx->srv.ssl = SSL_CTX_new(TLS_server_method());
    assert_non_null(fx->srv.ssl);
    assert_int_equal(SSL_CTX_use_certificate(fx->srv.ssl, crt), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(fx->srv.ssl, key), 1);
    if (trust)
        assert_int_equal(X509_STORE_add_cert(SSL_CTX_get_cert_store(fx->cli_ssl), crt), 1);
    X509_free(crt);
    EVP_PKEY_free(key);
    fx->prov.tls = true;
}

static void
test_upstream_tls_verified_answer_and_reuse(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};

    t_tls_server(fx, true);
    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_OK);
    assert_memory_equal(a.body.data, "secret", 6);
    t_send(fx, &b);
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(b.rc, GW_OK);
    t_stats(fx, 1, 1, 1);
    t_cli_fini(&a);
    t_cli_fini(&b);
}

static void
test_upstream_tls_localhost_name_verified(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0};

    t_tls_server(fx, true);
    snprintf(fx->host, sizeof(fx->host), "localhost"); /* no evdns: means 127.0.0.1 */
    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_OK);
    t_cli_fini(&a);
}

static void
test_upstream_tls_untrusted_certificate_gives_tls_verify(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0};

    t_tls_server(fx, false);
    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_E_UPSTREAM_TLS_VERIFY);
    assert_int_equal(a.n_head, 0);
}

/* The scripted server plays the proxy: it answers the CONNECT, then (the tunnel being
 * the same TCP stream) the request sent through it. */
static char t_proxy_ip[] = "127.0.0.1";
static char t_proxy_auth[] = "u:p";

static void
t_via_proxy(struct t_fx *fx, bool auth)
{
    fx->prov.proxy_host = t_proxy_ip;
    fx->prov.proxy_port = fx->srv.port;
    fx->prov.proxy_auth = auth ? t_proxy_auth : NULL;
    snprintf(fx->host, sizeof(fx->host), "api.example.test"); /* never resolved: the
                                                                 proxy is an address */
    fx->prov.port = 8443;
}

static void
test_upstream_proxy_connect_tunnel_carries_the_request(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};
    const char *inner = "POST /v1/chat/completions HTTP/1.1\r\nHost: api.example.test:8443\r\n";

    char answer[4096];

    /* A head longer than one read of the client's: it is gathered across reads. */
    snprintf(answer, sizeof(answer),
             "HTTP/1.1 200 Connection established\r\nX-Pad: %03000d\r\n\r\n", 7);
    t_via_proxy(fx, true);
    fx->srv.first_resp = answer;
    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_OK);
    assert_memory_equal(a.body.data, "hello", 5);
    assert_string_equal(fx->srv.first_req.data,
                        "CONNECT api.example.test:8443 HTTP/1.1\r\nHost: api.example.test:8443\r\n"
                        "Proxy-Authorization: Basic dTpw\r\n\r\n");
    /* Through the tunnel: origin-form, the upstream's own Host. */
    assert_true(strncmp(fx->srv.last_req.data, inner, strlen(inner)) == 0);
    /* The tunnel is kept alive like any connection. */
    t_send(fx, &b);
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(b.rc, GW_OK);
    assert_int_equal(fx->srv.accepts, 1);
    assert_int_equal(fx->srv.requests, 3);
    t_stats(fx, 1, 1, 1);
    t_cli_fini(&a);
    t_cli_fini(&b);
}

static void
test_upstream_proxy_refusal_gives_proxy(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0};

    t_via_proxy(fx, false);
    fx->srv.resp = "HTTP/1.1 407 Proxy Authentication Required\r\n"
                   "Proxy-Authenticate: Basic realm=\"corp\"\r\nContent-Length: 0\r\n\r\n";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_E_UPSTREAM_PROXY);
    assert_int_equal(a.n_head, 0);
    assert_non_null(strstr(fx->srv.last_req.data, "CONNECT api.example.test:8443 HTTP/1.1\r\n"));
    assert_null(strstr(fx->srv.last_req.data, "Proxy-Authorization"));
}

static void
test_upstream_proxy_garbage_answer_gives_proxy(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0}, c = {0};
    static char huge[12000];

    t_via_proxy(fx, false);
    fx->srv.resp = "SSH-2.0-OpenSSH_9.2\r\n\r\n";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_E_UPSTREAM_PROXY);
    /* Bytes after the answer's head: not a tunnel gw can trust. */
    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    t_send(fx, &b);
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(b.rc, GW_E_UPSTREAM_PROXY);
    /* A head over 8 KiB. */
    snprintf(huge, sizeof(huge), "HTTP/1.1 200 OK\r\nX-Pad: %09000d\r\n\r\n", 1);
    fx->srv.resp = huge;
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_E_UPSTREAM_PROXY);
}

/* A tunnel and a direct connection to the same host:port are different pool keys. */
static void
test_upstream_proxied_and_direct_never_share_a_connection(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};

    fx->prov.proxy_host = t_proxy_ip;
    fx->prov.proxy_port = fx->srv.port; /* the upstream is the proxy's own address */
    fx->srv.first_resp = "HTTP/1.1 200 Connection established\r\n\r\n";
    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_OK);
    fx->prov.proxy_host = NULL;
    fx->prov.proxy_port = 0;
    fx->srv.first_resp = NULL; /* a direct connection: no CONNECT */
    t_send(fx, &b);
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(b.rc, GW_OK);
    t_stats(fx, 2, 0, 2);
    assert_int_equal(fx->srv.accepts, 2);
    t_cli_fini(&a);
    t_cli_fini(&b);
}

static void
test_upstream_pool_free_with_busy_exchange(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};

    fx->srv.mode = T_SILENT;
    t_send(fx, &c);
    t_run_until(fx, &fx->srv.requests, 1);
    net_uppool_free(fx->pool); /* no callback follows */
    fx->pool = NULL;
    t_run_until(fx, &fx->srv.eofs, 1);
    assert_int_equal(c.n_end, 0);
}

static void
test_upstream_tls_session_resumed_on_new_connection(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};
    struct timeval tv = {10, 0};
    struct event *wd = evtimer_new(fx->base, on_t_watchdog, &fx->wd_fired);

    t_tls_server(fx, true);
    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_OK);
    t_srv_close_all(&fx->srv);
    evtimer_add(wd, &tv);
    while (!t_idle_is(fx, 0) && !fx->wd_fired)
        event_base_loop(fx->base, EVLOOP_ONCE);
    event_free(wd);
    assert_false(fx->wd_fired);
    t_send(fx, &b);
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(b.rc, GW_OK);
    assert_int_equal(fx->srv.accepts, 2);
    assert_int_equal(fx->srv.resumed, 1);
    t_cli_fini(&a);
    t_cli_fini(&b);
}

/* A pool with an evdns_base that knows one name from a hosts file: the name has an
 * IPv6 address nobody listens on and the server's IPv4 one, so the client may have to
 * fall back to the next address. */
static void
test_upstream_name_resolved_with_evdns(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0}, d = {0};
    struct evdns_base *dns = evdns_base_new(fx->base, 0);
    char path[] = "/tmp/gw-test-hosts-XXXXXX";
    int fd = mkstemp(path);
    static const char hosts[] = "::1 gw-test-upstream\n127.0.0.1 gw-test-upstream\n";

    assert_non_null(dns);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, hosts, sizeof(hosts) - 1), (ssize_t)(sizeof(hosts) - 1));
    close(fd);
    assert_int_equal(evdns_base_load_hosts(dns, path), 0);
    unlink(path);
    net_uppool_free(fx->pool);
    fx->pool = net_uppool_new(fx->base, dns, fx->cli_ssl);
    assert_non_null(fx->pool);
    snprintf(fx->host, sizeof(fx->host), "gw-test-upstream");
    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    t_send(fx, &c);
    t_run_until(fx, &c.n_end, 1);
    assert_int_equal(c.rc, GW_OK);
    assert_string_equal(strstr(fx->srv.last_req.data, "Host: "),
                        strstr(fx->srv.last_req.data, "Host: gw-test-upstream:"));
    /* With no nameserver the lookup of another name waits: the connect timeout covers
     * it, and the pending lookup is cancelled cleanly. */
    snprintf(fx->host, sizeof(fx->host), "unknown.invalid");
    fx->req.connect_timeout_ms = 50;
    t_send(fx, &d);
    t_run_until(fx, &d.n_end, 1);
    assert_int_equal(d.rc, GW_E_UPSTREAM_TIMEOUT);
    net_uppool_free(fx->pool);
    fx->pool = NULL;
    evdns_base_free(dns, 1);
    t_cli_fini(&c);
}

static void
on_t_body_pause_each(void *arg, const char *data, size_t len)
{
    struct t_cli *c = arg;

    c->n_body++;
    t_buf_append(&c->body, data, len);
    net_upx_pause(c->x);
}

static const struct net_up_cbs t_cbs_pause_each = {
    .on_head = on_t_head,
    .on_body = on_t_body_pause_each,
    .on_end = on_t_end,
};

/* A 1 MiB chunked body, paused after every piece and resumed from the loop: every byte
 * arrives once, in order, with the chunk framing removed. */
static void
test_upstream_large_chunked_body_paused_after_every_piece(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli c = {0};
    enum { CHUNK = 10000, N = 105 };
    char *chunk = malloc(CHUNK);
    char line[32];
    unsigned seen = 0;
    size_t i;

    assert_non_null(chunk);
    fx->srv.mode = T_SILENT;
    c.pool = fx->pool;
    c.x = net_up_send(fx->pool, &fx->req, &t_cbs_pause_each, &c);
    assert_non_null(c.x);
    t_run_until(fx, &fx->srv.requests, 1);
    t_srv_write(fx->srv.conns, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (i = 0; i < N; i++) {
        memset(chunk, 'a' + (int)(i % 26), CHUNK);
        snprintf(line, sizeof(line), "%x\r\n", (unsigned)CHUNK);
        t_srv_write(fx->srv.conns, line);
        bufferevent_write(fx->srv.conns->bev, chunk, CHUNK);
        t_srv_write(fx->srv.conns, "\r\n");
    }
    t_srv_write(fx->srv.conns, "0\r\n\r\n");
    while (c.n_end == 0) {
        t_run_until(fx, &c.n_body, seen + 1);
        seen = c.n_body;
        net_upx_resume(c.x);
        /* The next piece (or the end) comes from the loop. */
        assert_int_equal(c.n_body, seen);
        if (c.body.len == (size_t)CHUNK * N) {
            t_run_until(fx, &c.n_end, 1);
            break;
        }
    }
    assert_int_equal(c.rc, GW_OK);
    assert_int_equal(c.body.len, (size_t)CHUNK * N);
    assert_true(c.n_body >= N);
    for (i = 0; i < N; i++)
        assert_int_equal(c.body.data[i * CHUNK], 'a' + (int)(i % 26));
    t_stats(fx, 1, 0, 1);
    free(chunk);
    t_cli_fini(&c);
}

static void
test_upstream_head_request_has_no_body_and_keeps_connection(void **state)
{
    struct t_fx *fx = *state;
    struct t_cli a = {0}, b = {0};

    fx->req.method = "HEAD";
    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    t_send(fx, &a);
    t_run_until(fx, &a.n_end, 1);
    assert_int_equal(a.rc, GW_OK);
    assert_int_equal(a.n_body, 0);
    fx->req.method = "GET";
    fx->srv.resp = "HTTP/1.1 204 No Content\r\n\r\n";
    t_send(fx, &b);
    t_run_until(fx, &b.n_end, 1);
    assert_int_equal(b.rc, GW_OK);
    assert_int_equal(b.status, 204);
    t_stats(fx, 1, 1, 1);
}

/* Every allocation of the client, one at a time, fails: each run either refuses at
 * net_uppool_new / net_up_send (NULL) or ends the exchange with exactly one on_end, and
 * nothing leaks (run under ASan). The last runs fail nothing and must succeed. */
static void
test_upstream_out_of_memory_at_each_allocation_ends_cleanly(void **state)
{
    struct t_fx *fx = *state;
    unsigned long n;
    int i;

    net_uppool_free(fx->pool);
    fx->pool = NULL;
    fx->srv.resp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Test: y\r\n\r\nok";
    for (n = 1; n <= 40; n++) {
        struct t_cli c[2] = {{0}, {0}};
        struct net_uppool *p;

        gw_alloc_fail_at(n);
        p = net_uppool_new(fx->base, NULL, fx->cli_ssl);
        for (i = 0; p && i < 2; i++) {
            c[i].x = net_up_send(p, &fx->req, &t_cbs, &c[i]);
            if (c[i].x) {
                t_run_until(fx, &c[i].n_end, 1);
                assert_int_equal(c[i].n_end, 1);
            }
        }
        gw_alloc_fail_at(0);
        if (n == 40) { /* nothing failed any more */
            assert_non_null(p);
            assert_int_equal(c[0].rc, GW_OK);
            assert_int_equal(c[1].rc, GW_OK);
        }
        net_uppool_free(p);
        t_srv_close_all(&fx->srv);
        t_cli_fini(&c[0]);
        t_cli_fini(&c[1]);
    }
}

/* The same through a proxy with a credential: the tunnel's allocations too. */
static void
test_upstream_out_of_memory_through_a_proxy_ends_cleanly(void **state)
{
    struct t_fx *fx = *state;

    t_via_proxy(fx, true);
    fx->srv.first_resp = "HTTP/1.1 200 Connection established\r\n\r\n";
    test_upstream_out_of_memory_at_each_allocation_ends_cleanly(state);
    assert_non_null(strstr(fx->srv.first_req.data, "Proxy-Authorization: Basic dTpw\r\n"));
}

#define T(f) cmocka_unit_test_setup_teardown(f, t_setup, t_teardown)

int
main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_upstream_content_length_answer),
        T(test_upstream_chunked_answer_delivered_incrementally),
        T(test_upstream_chunks_of_one_read_then_one_body_read),
        T(test_upstream_cancel_in_on_body_read_stops_and_closes),
        T(test_upstream_keepalive_reuses_connection),
        T(test_upstream_send_from_on_end_reuses_connection),
        T(test_upstream_refused_gives_connect),
        T(test_upstream_unresolvable_name_without_dns_gives_connect),
        T(test_upstream_close_mid_body_gives_dropped),
        T(test_upstream_close_delimited_body_ends_ok),
        T(test_upstream_interim_100_is_ignored),
        T(test_upstream_headers_split_across_reads),
        T(test_upstream_garbage_gives_protocol),
        T(test_upstream_head_timeout),
        T(test_upstream_idle_timeout_mid_body),
        T(test_upstream_cancel_in_on_body_stops_and_closes),
        T(test_upstream_cancel_outside_callbacks),
        T(test_upstream_stale_keepalive_is_retried_once),
        T(test_upstream_idle_connection_closed_by_upstream_is_dropped),
        T(test_upstream_idle_connection_closed_after_idle_timeout),
        T(test_upstream_pause_holds_buffered_body_until_resume),
        T(test_upstream_pause_stops_reading_and_idle_timeout),
        T(test_upstream_tls_to_plain_port_gives_tls),
        T(test_upstream_tls_verified_answer_and_reuse),
        T(test_upstream_tls_localhost_name_verified),
        T(test_upstream_tls_untrusted_certificate_gives_tls_verify),
        T(test_upstream_proxy_connect_tunnel_carries_the_request),
        T(test_upstream_proxy_refusal_gives_proxy),
        T(test_upstream_proxy_garbage_answer_gives_proxy),
        T(test_upstream_proxied_and_direct_never_share_a_connection),
        T(test_upstream_pool_free_with_busy_exchange),
        T(test_upstream_tls_session_resumed_on_new_connection),
        T(test_upstream_name_resolved_with_evdns),
        T(test_upstream_large_chunked_body_paused_after_every_piece),
        T(test_upstream_head_request_has_no_body_and_keeps_connection),
        T(test_upstream_out_of_memory_at_each_allocation_ends_cleanly),
        T(test_upstream_out_of_memory_through_a_proxy_ends_cleanly),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
