/* SPDX-License-Identifier: MIT
 * net/upstream.c - the upstream HTTP client: per-worker keep-alive pools keyed by
 * (host, port, tls, TLS context, proxy, http2 mode), non-blocking connects (numeric
 * addresses directly, names through evdns), HTTP CONNECT tunnels through a proxy, TLS
 * with SNI, verification and ALPN, HTTP/1.1 request writing and response reading with
 * gw's own reader (net/h1resp.h), and HTTP/2 (h2c with prior knowledge, h2 by ALPN)
 * with one nghttp2 session per connection and many exchanges as its streams (see
 * "HTTP/2" below), streaming decoded body bytes to the caller.
 * Owns:    the pool owns its keys and idle connections; a live HTTP/1.1 exchange owns its
 *          connection (struct net_upconn) until it ends; an HTTP/2 connection owns its
 *          session (struct net_h2) and is owned by its key until it closes; a pending
 *          name lookup owns a small ticket that outlives a cancelled connection.
 * Threads: the worker that owns the pool's event_base; never blocks (names are never
 *          resolved with a blocking getaddrinfo).
 * See:     net/upstream.h, net/h1resp.h, tests/unit/net/test_upstream.c
 */
#include "net/sockread.h"
#include "net/upstream.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event_struct.h>
#include <event2/util.h>
#include <nghttp2/nghttp2.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/log.h"
#include "net/h1resp.h"
#include "net/deadline.h"
#include "net/upstream-priv.h"

/*
 * Choices worth knowing (also in docs/ARCHITECTURE.md, net):
 * - Name resolution: numeric hosts (IPv4/IPv6 literals) are parsed once per key with
 *   getaddrinfo(AI_NUMERICHOST), which never blocks. Names go through
 *   evdns_getaddrinfo on the pool's evdns_base (it also reads /etc/hosts). With no
 *   evdns_base, "localhost" means 127.0.0.1 and any other name fails the exchange with
 *   GW_E_UPSTREAM_CONNECT (never a blocking lookup).
 * - The TCP connect is ours (socket + non-blocking connect + one EV_WRITE event), so
 *   TCP_NODELAY is set before the first byte and a refused connect (_CONNECT) is told
 *   apart from a failed handshake (_TLS): the bufferevent is only created once TCP is up.
 * - A timeout of 0 ms means "no timeout" for that phase. connect_timeout_ms covers name
 *   lookup, TCP and TLS; head_timeout_ms runs from the connection being ready and is
 *   restarted when the request has been fully handed to the kernel; idle_timeout_ms is
 *   restarted on every read of the body and suspended while the exchange is paused
 *   (head_timeout_ms too, when paused before the head).
 * - A plain-HTTP server answering a TLS ClientHello gives GW_E_UPSTREAM_TLS (the
 *   handshake fails on a bad record or on the peer's close); a certificate the check
 *   refused gives GW_E_UPSTREAM_TLS_VERIFY.
 * - Through a proxy (the provider's proxy_host), TCP goes to the proxy and the CONNECT
 *   exchange runs on the raw socket before the bufferevent exists (see "CONNECT
 *   tunnels"); from then on the tunnel is an ordinary connection of its key.
 * - Keep-alive race: when a reused connection dies (EOF, reset) before any response
 *   byte arrived, the request is sent once more on a fresh connection; a copy of the
 *   request is kept only while that can still happen.
 * - Connection: no header is written (HTTP/1.1 means keep-alive); the response's own
 *   Connection/version decides whether the connection is pooled (net/h1resp.h keep_alive).
 * - Out of memory after net_up_send returned ends the exchange with
 *   GW_E_UPSTREAM_CONNECT (before the head) or GW_E_UPSTREAM_PROTOCOL (head too large
 *   to store), since on_end only reports upstream codes.
 */

#define NET_UP_CONN_MAGIC 0x55504331u /* "UPC1" */
#define NET_UPX_MAGIC 0x55505831u     /* "UPX1" */

enum {
    NET_UP_IDLE_MAX = 256,         /* idle connections kept per upstream */
    NET_UP_IDLE_SECS = 60,         /* an idle connection is closed after this */
    NET_UP_READ_HIWAT = 65536,     /* bytes buffered per connection while not parsed */
    NET_UP_HEAD_MAX = 65536,       /* bytes of header names and values kept */
    NET_UP_HDRS_MAX = 256,         /* response header lines */
    NET_UP_SPARE_MAX = 64,         /* spare buffers (and header offsets) a pool keeps */
    NET_UP_KEEP_HV = 64,           /* header offsets in a spare array, at most */
    NET_UP_TUNNEL_HEAD_MAX = 8192, /* bytes of a CONNECT answer's head */
};

/* ---- types ---- */

/* One upstream (host, port, tls) as reached (TLS context, proxy): its idle connections,
 * most recent first. Keys live as long as the pool; a worker talks to a handful of
 * upstreams. Two providers that differ in trust (ca_file) or route (proxy) never share
 * a connection or a TLS session. */
struct net_upkey {
    struct net_upkey *next;
    char *host; /* NUL-terminated copy: SNI, Host and the CONNECT target */
    uint16_t port;
    struct gw_buf host_field; /* "Host: <host_value>\r\n", built once for every request */
    bool tls;
    SSL_CTX *ctx;     /* the provider's (ca_file), NULL: the pool's */
    char *proxy_host; /* the CONNECT proxy, NULL: direct */
    uint16_t proxy_port;
    char *proxy_auth;  /* "user:password" for Proxy-Authorization, or NULL; a secret */
    bool is_ip;        /* host is an IP literal: no SNI, the certificate must name the IP */
    bool numeric;      /* addr is set: the connect target (the proxy when there is one,
                          else host) is an address, or "localhost" without evdns */
    bool unresolvable; /* the connect target is a name and there is no evdns_base */
    struct sockaddr_storage addr;
    socklen_t addrlen;
    struct net_upconn *idle_head; /* most recently used */
    struct net_upconn *idle_tail; /* oldest, closed first when over the cap */
    unsigned n_idle;
    SSL_SESSION *sess; /* the latest TLS session, offered for resumption */
    /* HTTP/2 (see "HTTP/2" below): providers[].http2, the sessions new streams may use
     * (one in practice; one after a GOAWAY stays listed until it closes), the connection being
     * opened for h2 (requests wait for it), and whether the upstream's ALPN chose http/1.1 (auto:
     * no more waiting). */
    enum gw_http2 h2mode;
    struct net_h2 *h2s;
    struct net_upconn *h2_connecting;
    bool alpn_h1;
};

/* A name lookup in flight. evdns calls back even after a cancel, possibly after the
 * connection is gone, so the callback gets this ticket; the connection clears
 * ticket->c when it dies first. Owned by the lookup; freed in on_dns. */
struct net_dns_ticket {
    struct net_upconn *c;
};

/* One upstream connection. Owned by its exchange (x != NULL) or by its key's idle
 * list (x == NULL, bev set). */
struct net_upconn {
    uint32_t magic_;
    struct net_uppool *pool;
    struct net_upkey *key;
    struct net_upx *x;              /* the exchange on it; NULL while idle */
    struct net_upconn *prev, *next; /* key's idle list */
    struct bufferevent *bev;        /* NULL until TCP is up */
    struct net_sockread rd;         /* reads bev's socket (plain HTTP/1.1: without FIONREAD) */
    int fd;                         /* the socket while connecting, before bev */
    struct event *cev;              /* EV_WRITE: the TCP connect finished */
    struct evdns_getaddrinfo_request *dreq;
    struct net_dns_ticket *ticket;
    struct evutil_addrinfo *ai;      /* lookup result (names only) */
    struct evutil_addrinfo *ai_next; /* next address to try */
    unsigned long served;            /* exchanges answered on it */
    struct gw_buf tun;               /* CONNECT: the request while written, then the answer */
    size_t tun_off;                  /* bytes of the CONNECT request written */
    bool tun_reading;                /* the request is sent: reading the proxy's answer */
    bool eof;                        /* the peer closed or reset */
    bool reset;                      /* ... by an error (reset), not a clean close */
    bool tls_bad;                    /* a TLS error: its session must not be resumed */
    bool h2_cand;                    /* opened for HTTP/2: no request written before
                                        ALPN (or at once for h2c) decides */
    struct net_h2 *h2;               /* the connection speaks HTTP/2: owned by this */
};

enum net_upx_phase {
    NET_UPX_CONNECTING, /* lookup, TCP, TLS */
    NET_UPX_HEAD,       /* request on its way, waiting for the head */
    NET_UPX_BODY,       /* head delivered, reading the body */
};

struct net_hoff {
    size_t name_off, name_len, val_off, val_len;
};

/* One exchange. Owned by the pool's live list until it ends; freed after on_end
 * (or at once by net_upx_cancel outside its callbacks). */
struct net_upx {
    uint32_t magic_;
    struct net_uppool *pool;
    struct net_upkey *key;
    struct net_upconn *conn;
    struct net_upx *prev, *next; /* pool's live list */
    struct net_up_cbs cbs;
    void *arg;
    struct event *defer;  /* deferred work (a failure, a resume, a lookup start): &defer_ev */
    struct gw_buf req;    /* request bytes not yet handed to a bufferevent */
    struct gw_buf retry;  /* copy kept while a keep-alive retry is possible */
    struct net_h1resp rr; /* reads the HTTP/1.x answer (net/h1resp.h) */
    struct gw_buf head;   /* HTTP/2: header names and values back to back */
    struct net_hoff *hv;  /* offsets into head */
    size_t n_hv, cap_hv;
    unsigned connect_ms, head_ms, idle_ms;
    enum net_upx_phase phase;
    enum gw_code defer_rc; /* failure waiting for the defer event; GW_OK if none */
    bool defer_lookup;     /* the defer event starts the name lookup */
    bool defer_on;         /* the defer event is active (x_defer until on_x_defer) */
    bool head_method;      /* HEAD: the response has no body */
    bool paused;
    bool in_send;   /* inside net_up_send: connection events wait for the loop */
    bool arm_due;   /* the phase's timeout is armed when x_drive has read what came */
    bool ended;     /* x_end has begun: on_end runs or ran */
    bool in_cb;     /* inside one of the caller's callbacks */
    bool cancelled; /* net_upx_cancel inside a callback: free when it returns */
    bool reused;    /* the connection came from the idle list */
    bool retried;
    bool got_bytes; /* some response byte arrived */
    bool complete;  /* the whole response arrived */
    bool keep_alive;
    /* HTTP/2 (see "HTTP/2" below) */
    struct net_h2 *h2;   /* the session of its stream; NULL once detached */
    int32_t sid;         /* its stream id; 0 before submission */
    struct gw_buf h2hdr; /* request headers, "name\0value\0" pairs, until submitted */
    size_t h2_nhdr;      /* pairs in h2hdr */
    size_t body_len;     /* the body: the tail of req */
    size_t body_off;     /* body bytes handed to nghttp2 */
    struct gw_buf pend;  /* DATA held while paused */
    int h2_status;       /* :status of the head being read */
    enum gw_code h2_rc;  /* how the stream ended, delivered after pend */
    bool h2_used;        /* the exchange runs on HTTP/2 */
    bool h2_wait;        /* waiting for the key's connection being opened for h2 */
    bool h2_eos;         /* END_STREAM arrived */
    bool h2_closed;      /* nghttp2 closed the stream (or it never opened) */
    bool h2_bad;         /* we reset it: a head we could not take */
    bool h2_got_body;    /* on the session's list of streams given body in this read */
    /* Kept by x_get (not zeroed): inside the exchange, assigned once for its pool's loop
     * when it is allocated. The phase's deadline (dl, on timer_ev) is lazy: its timer may
     * stay pending after the exchange ended, also while it waits in the cache (x_free
     * lifts the deadline, so on_x_timer finds nothing due); ending and starting exchanges
     * does not add and delete it each time. */
    struct event timer_ev, defer_ev;
    struct net_deadline dl;
};

struct net_uppool {
    struct event_base *base;
    struct evdns_base *dns;
    SSL_CTX *ssl_ctx;
    struct net_upkey *keys;
    struct net_upx *live;    /* exchanges not yet ended */
    struct net_upx *x_cache; /* ended exchanges kept for reuse (x_get, x_put) */
    unsigned n_x_cache;
    /* Memory exchanges gave up, for the next ones (spare_*): request and head buffers,
     * header offsets. */
    struct gw_buf spare_buf[NET_UP_SPARE_MAX];
    unsigned n_spare_buf;
    struct net_hoff *spare_hv[NET_UP_SPARE_MAX];
    size_t spare_cap_hv[NET_UP_SPARE_MAX];
    unsigned n_spare_hv;
    const struct timeval *idle_tv; /* a common timeout of NET_UP_IDLE_SECS */
    struct net_uppool_stats st;
    bool freeing; /* net_uppool_free runs: no connection is opened any more */
};

static void x_fail(struct net_upx *x, enum gw_code rc);
static void x_drive(struct net_upx *x, const char *p, size_t n);
static void conn_start(struct net_upconn *c);
static void on_conn_read(struct bufferevent *bev, void *arg);
static void on_conn_bytes(void *arg, const char *p, size_t n);
static void on_conn_write(struct bufferevent *bev, void *arg);
static void on_conn_event(struct bufferevent *bev, short what, void *arg);
struct net_h2;
static bool h2_set_alpn(struct net_upconn *c, SSL *ssl);
static void h2_start(struct net_upconn *c);
static void h2_alpn_done(struct net_upconn *c);
static void h2_on_read(struct net_h2 *h);
static void h2_on_event(struct net_h2 *h, short what);
static void h2_lead_gone(struct net_upkey *k, struct net_uppool *p, enum gw_code rc);
static void h2_detach(struct net_upx *x);
static void h2_x_deliver(struct net_upx *x);
static void h2_close(struct net_h2 *h);
static enum gw_code host_value(struct gw_buf *b, const char *host, uint16_t port,
                               bool default_port);

/* ---- small helpers ---- */

/* The phase's deadline <ms> from now (0: none). Lazy (net/deadline.h): every request has
 * an exchange with a head deadline, and adding and deleting the timer for each was most
 * of what a request's timing cost. */
static void
x_arm(struct net_upx *x, unsigned ms)
{
    if (ms == 0)
        net_deadline_lift(&x->dl);
    else
        net_deadline_set(&x->dl, ms);
}

/* Arms the timeout of the current phase, or suspends it while paused (reading phases). */
static void
x_arm_phase(struct net_upx *x)
{
    switch (x->phase) {
    case NET_UPX_CONNECTING: x_arm(x, x->connect_ms); break;
    case NET_UPX_HEAD: x_arm(x, x->paused ? 0 : x->head_ms); break;
    case NET_UPX_BODY: x_arm(x, x->paused ? 0 : x->idle_ms); break;
    }
}

static void
x_defer(struct net_upx *x)
{
    x->defer_on = true;
    event_active(x->defer, EV_TIMEOUT, 1);
}

static void
x_defer_fail(struct net_upx *x, enum gw_code rc)
{
    if (x->defer_rc == GW_OK)
        x->defer_rc = rc;
    x_defer(x);
}

static void
on_ref_free(const void *data, size_t len, void *arg)
{
    (void)data;
    (void)len;
    gw_free(arg);
}

/* Hands x->req to the connection's output buffer without copying. */
static bool
x_write_req(struct net_upx *x)
{
    struct evbuffer *out = bufferevent_get_output(x->conn->bev);
    char *data = x->req.data;
    size_t len = x->req.len;

    x->req = (struct gw_buf){0};
    if (evbuffer_add_reference(out, data, len, on_ref_free, data) != 0) {
        gw_free(data);
        return false;
    }
    return true;
}

/* Writes x->req on a reused connection: straight to the socket when nothing is queued
 * and the connection is plain TCP (a bufferevent would arm EV_WRITE and write on the
 * next loop turn: two epoll_ctl calls and a wake-up per request); what the socket does
 * not take, and everything on TLS, goes through the bufferevent. x->req is left as is.
 * False when out of memory. */
static bool
x_send_now(struct net_upx *x)
{
    struct bufferevent *bev = x->conn->bev;
    struct evbuffer *out = bufferevent_get_output(bev);
    ssize_t n = 0;

    if (!x->key->tls && evbuffer_get_length(out) == 0) {
        n = send(bufferevent_getfd(bev), x->req.data, x->req.len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0)
            n = 0; /* EAGAIN, or an error the bufferevent reports on its next read */
    }
    if ((size_t)n < x->req.len) {
        if (evbuffer_add(out, x->req.data + n, x->req.len - (size_t)n) != 0)
            return false;
        bufferevent_enable(bev, EV_WRITE);
    }
    net_sockread_enable(&x->conn->rd);
    return true;
}

static bool
host_is_ipv6(const char *h)
{
    return strchr(h, ':') != NULL;
}

/* The CONNECT request holds the proxy credential: wiped, not just freed. */
static void
tun_wipe(struct net_upconn *c)
{
    if (c->tun.data)
        explicit_bzero(c->tun.data, c->tun.len);
    gw_buf_fini(&c->tun);
    c->tun_off = 0;
}

/* ---- TLS sessions ---- */

/* The SSL ex_data slot that points from an SSL to its connection, so that a new session
 * (TLS 1.3 sends them after the handshake) is kept on the connection's key. */
static int up_ssl_idx = -1;
static pthread_once_t up_ssl_once = PTHREAD_ONCE_INIT;

static void
up_ssl_idx_init(void)
{
    up_ssl_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, NULL);
}

/* OpenSSL hands us a reference to a new session: keep it on the key (returns 1). Runs
 * inside SSL I/O of the connection, on its worker, so the key is ours. */
static int
on_ssl_new_session(SSL *ssl, SSL_SESSION *sess)
{
    struct net_upconn *c = up_ssl_idx >= 0 ? SSL_get_ex_data(ssl, up_ssl_idx) : NULL;

    if (!c)
        return 0;
    if (c->key->sess)
        SSL_SESSION_free(c->key->sess);
    c->key->sess = sess;
    return 1;
}

/* ---- keys and connections ---- */

static bool
str_same(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool
key_is(const struct net_upkey *k, const struct gw_conf_provider *prov, const char *host)
{
    return k->port == prov->port && k->tls == prov->tls && strcmp(k->host, host) == 0 &&
           k->ctx == (SSL_CTX *)prov->tls_ctx && str_same(k->proxy_host, prov->proxy_host) &&
           k->proxy_port == prov->proxy_port && str_same(k->proxy_auth, prov->proxy_auth) &&
           k->h2mode == prov->http2;
}

static void
key_free(struct net_upkey *k)
{
    if (k->sess)
        SSL_SESSION_free(k->sess);
    if (k->proxy_auth)
        explicit_bzero(k->proxy_auth, strlen(k->proxy_auth));
    gw_free(k->proxy_auth);
    gw_free(k->proxy_host);
    gw_free(k->host);
    gw_buf_fini(&k->host_field);
    gw_free(k);
}

/* Where TCP goes: the proxy when there is one, else the upstream. */
static const char *
key_target(const struct net_upkey *k, uint16_t *port)
{
    *port = k->proxy_host ? k->proxy_port : k->port;
    return k->proxy_host ? k->proxy_host : k->host;
}

static bool
is_ip_literal(const char *h)
{
    unsigned char b[16];

    return inet_pton(AF_INET, h, b) == 1 || inet_pton(AF_INET6, h, b) == 1;
}

static enum gw_code host_value(struct gw_buf *b, const char *host, uint16_t port,
                               bool default_port);

static struct net_upkey *
key_get(struct net_uppool *p, const struct gw_conf_provider *prov)
{
    struct net_upkey *k;
    struct addrinfo hints, *res = NULL;
    char port[8];
    const char *host = prov->host ? prov->host : "", *target;
    uint16_t tport;

    for (k = p->keys; k; k = k->next)
        if (key_is(k, prov, host))
            return k;
    k = gw_calloc(1, sizeof(*k));
    if (!k)
        return NULL;
    k->host = gw_strdup(host);
    k->proxy_host = prov->proxy_host ? gw_strdup(prov->proxy_host) : NULL;
    k->proxy_auth = prov->proxy_auth ? gw_strdup(prov->proxy_auth) : NULL;
    if (!k->host || (prov->proxy_host && !k->proxy_host) || (prov->proxy_auth && !k->proxy_auth)) {
        key_free(k);
        return NULL;
    }
    k->port = prov->port;
    k->tls = prov->tls;
    if (gw_buf_append(&k->host_field, "Host: ", 6) != GW_OK ||
        host_value(&k->host_field, k->host, k->port, k->port == (k->tls ? 443 : 80)) != GW_OK ||
        gw_buf_append(&k->host_field, "\r\n", 2) != GW_OK) {
        key_free(k);
        return NULL;
    }
    k->ctx = prov->tls_ctx;
    k->proxy_port = prov->proxy_port;
    k->h2mode = prov->http2;
    k->is_ip = is_ip_literal(host);
    target = key_target(k, &tport);
    snprintf(port, sizeof(port), "%u", (unsigned)tport);
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV; /* never blocks */
    if (getaddrinfo(target, port, &hints, &res) == 0 && res) {
        memcpy(&k->addr, res->ai_addr, res->ai_addrlen);
        k->addrlen = (socklen_t)res->ai_addrlen;
        k->numeric = true;
    } else if (!p->dns && strcmp(target, "localhost") == 0) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&k->addr;

        sin->sin_family = AF_INET;
        sin->sin_port = htons(tport);
        sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        k->addrlen = sizeof(*sin);
        k->numeric = true;
    } else if (!p->dns) {
        k->unresolvable = true;
    }
    if (res)
        freeaddrinfo(res);
    k->next = p->keys;
    p->keys = k;
    return k;
}

static void
conn_close(struct net_upconn *c)
{
    GW_CHECK_OBJ(c, NET_UP_CONN_MAGIC);
    if (c->key->h2_connecting == c)
        c->key->h2_connecting = NULL;
    if (c->dreq) {
        struct evdns_getaddrinfo_request *r = c->dreq;

        c->dreq = NULL;
        c->ticket->c = NULL; /* the callback still comes and frees the ticket */
        evdns_getaddrinfo_cancel(r);
    }
    if (c->ai)
        evutil_freeaddrinfo(c->ai);
    if (c->cev)
        event_free(c->cev);
    if (c->bev && c->key->tls && !c->tls_bad) {
        /* Closing without close_notify is how keep-alive connections end; without this
         * OpenSSL would mark the session not resumable when the SSL is freed. */
        SSL *ssl = bufferevent_openssl_get_ssl(c->bev);

        if (ssl)
            SSL_set_shutdown(ssl, SSL_SENT_SHUTDOWN | SSL_RECEIVED_SHUTDOWN);
    }
    net_sockread_fini(&c->rd); /* before the socket closes with the bufferevent */
    if (c->bev)
        bufferevent_free(c->bev); /* BEV_OPT_CLOSE_ON_FREE: the socket and SSL too */
    else if (c->fd >= 0)
        close(c->fd);
    tun_wipe(c);
    c->magic_ = 0;
    gw_free(c);
}

static void
idle_unlink(struct net_upconn *c)
{
    struct net_upkey *k = c->key;

    if (c->prev)
        c->prev->next = c->next;
    else
        k->idle_head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    else
        k->idle_tail = c->prev;
    c->prev = c->next = NULL;
    k->n_idle--;
    c->pool->st.idle--;
}

/* An idle connection that saw data, EOF, an error or its idle timeout. */
static void
idle_drop(struct net_upconn *c)
{
    idle_unlink(c);
    conn_close(c);
}

/* Puts a connection whose response ended cleanly back on its key's idle list. */
static void
idle_put(struct net_upconn *c)
{
    struct net_upkey *k = c->key;
    struct net_uppool *p = c->pool;

    c->x = NULL;
    c->served++;
    if (k->n_idle >= NET_UP_IDLE_MAX)
        idle_drop(k->idle_tail);
    c->prev = NULL;
    c->next = k->idle_head;
    if (k->idle_head)
        k->idle_head->prev = c;
    else
        k->idle_tail = c;
    k->idle_head = c;
    k->n_idle++;
    p->st.idle++;
    /* Reading stays on so that a close by the upstream is seen at once. */
    net_sockread_set_timeout(&c->rd, p->idle_tv);
    net_sockread_enable(&c->rd);
}

static struct net_upconn *
idle_take(struct net_upkey *k)
{
    struct net_upconn *c = k->idle_head;

    if (!c)
        return NULL;
    idle_unlink(c);
    net_sockread_set_timeout(&c->rd, NULL);
    return c;
}

static struct net_upconn *
conn_new(struct net_uppool *p, struct net_upkey *k, struct net_upx *x)
{
    struct net_upconn *c = gw_calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->magic_ = NET_UP_CONN_MAGIC;
    c->pool = p;
    c->key = k;
    c->x = x;
    c->fd = -1;
    p->st.connects++;
    return c;
}

/* TCP is up on c->fd: wraps it in a bufferevent (TLS or not) and queues the request. */
static void
conn_tcp_up(struct net_upconn *c)
{
    struct net_upx *x = c->x;
    struct net_upkey *k = c->key;
    struct net_uppool *p = c->pool;
    const int opts = BEV_OPT_CLOSE_ON_FREE;

    if (k->tls) {
        SSL *ssl = SSL_new(k->ctx ? k->ctx : p->ssl_ctx);
        bool ok = ssl != NULL;

        if (ok && up_ssl_idx >= 0)
            ok = SSL_set_ex_data(ssl, up_ssl_idx, c) == 1;
        if (ok && k->sess)
            ok = SSL_set_session(ssl, k->sess) == 1;
        if (ok)
            ok = h2_set_alpn(c, ssl);
        if (ok && !k->is_ip)
            ok = SSL_set_tlsext_host_name(ssl, k->host) == 1 && SSL_set1_host(ssl, k->host) == 1;
        else if (ok)
            ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), k->host) == 1;
        if (ok)
            c->bev = bufferevent_openssl_socket_new(p->base, c->fd, ssl, BUFFEREVENT_SSL_CONNECTING,
                                                    opts);
        if (!c->bev) {
            SSL_free(ssl); /* NULL-safe */
            x_fail(x, GW_E_UPSTREAM_CONNECT);
            return;
        }
        /* Many servers close without close_notify; that is an EOF, not an error. */
        bufferevent_openssl_set_allow_dirty_shutdown(c->bev, 1);
    } else {
        c->bev = bufferevent_socket_new(p->base, c->fd, opts);
        if (!c->bev) {
            x_fail(x, GW_E_UPSTREAM_CONNECT);
            return;
        }
    }
    c->fd = -1; /* the bufferevent owns it */
    /* Plain HTTP/1.1 is read without FIONREAD; TLS and HTTP/2 sessions read through the
     * bufferevent (nghttp2 and OpenSSL take what they are given). */
    if (!net_sockread_init(&c->rd, p->base, c->bev, !k->tls && !c->h2_cand)) {
        x_fail(x, GW_E_UPSTREAM_CONNECT);
        return;
    }
    bufferevent_setcb(c->bev, on_conn_read, on_conn_write, on_conn_event, c);
    net_sockread_set_bytes(&c->rd, on_conn_read, on_conn_bytes);
    net_sockread_set_hiwat(&c->rd, NET_UP_READ_HIWAT);
    if (c->h2_cand) {
        /* h2c with prior knowledge starts at once; over TLS, ALPN decides after the
         * handshake (on_conn_event). Nothing is written before that. */
        bufferevent_enable(c->bev, EV_WRITE);
        net_sockread_enable(&c->rd);
        if (!k->tls)
            h2_start(c);
        return;
    }
    if (!x_write_req(x)) {
        x_fail(x, GW_E_UPSTREAM_CONNECT);
        return;
    }
    bufferevent_enable(c->bev, EV_WRITE);
    net_sockread_enable(&c->rd);
    if (!k->tls) {
        x->phase = NET_UPX_HEAD;
        x_arm_phase(x);
        if (x->paused)
            net_sockread_disable(&c->rd);
    }
    /* TLS: BEV_EVENT_CONNECTED after the handshake moves on to NET_UPX_HEAD. */
}

/* ---- CONNECT tunnels ----
 * TCP to the proxy is up on c->fd. Before any bufferevent exists, the CONNECT request is
 * written and the proxy's answer read on the raw socket (both small; the phase stays
 * CONNECTING, so connect_timeout_ms covers them); a 2xx opens the tunnel and
 * conn_tcp_up goes on as on a direct connection (TLS with the upstream's name, or plain
 * HTTP). Nothing may follow the answer's head: neither a TLS server nor an HTTP one
 * speaks first, so extra bytes mean a broken proxy. */

static void on_tunnel(evutil_socket_t fd, short what, void *arg);

/* Waits for <what> (EV_READ or EV_WRITE) on the socket. False when out of memory. */
static bool
tunnel_wait(struct net_upconn *c, short what)
{
    if (c->cev)
        event_free(c->cev);
    c->cev = event_new(c->pool->base, c->fd, what, on_tunnel, c);
    return c->cev && event_add(c->cev, NULL) == 0;
}

static void
tunnel_fail(struct net_upconn *c, const char *why, int status)
{
    const struct net_upkey *k = c->key;

    if (status)
        GW_LOG(GW_LOG_WARN, NULL, gw_code_str(GW_E_UPSTREAM_PROXY),
               "proxy %s:%u, CONNECT %s:%u: %s %d", k->proxy_host, k->proxy_port, k->host, k->port,
               why, status);
    else
        GW_LOG(GW_LOG_WARN, NULL, gw_code_str(GW_E_UPSTREAM_PROXY),
               "proxy %s:%u, CONNECT %s:%u: %s", k->proxy_host, k->proxy_port, k->host, k->port,
               why);
    x_fail(c->x, GW_E_UPSTREAM_PROXY);
}

/* "CONNECT host:port HTTP/1.1" with Host and, when set, Proxy-Authorization: Basic. */
static bool
tunnel_request(struct net_upconn *c)
{
    const struct net_upkey *k = c->key;
    struct gw_buf *b = &c->tun;
    char hp[300];
    bool ok;

    snprintf(hp, sizeof(hp), "%s%s%s:%u", host_is_ipv6(k->host) ? "[" : "", k->host,
             host_is_ipv6(k->host) ? "]" : "", (unsigned)k->port);
    ok = gw_buf_printf(b, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", hp, hp) == GW_OK;
    if (ok && k->proxy_auth) {
        size_t n = strlen(k->proxy_auth);
        size_t need = 4 * ((n + 2) / 3) + 1;

        ok = gw_buf_append_cstr(b, "Proxy-Authorization: Basic ") == GW_OK &&
             gw_buf_reserve(b, need + 2) == GW_OK;
        if (ok) {
            int w = EVP_EncodeBlock((unsigned char *)b->data + b->len,
                                    (const unsigned char *)k->proxy_auth, (int)n);

            b->len += (size_t)w;
            ok = gw_buf_append(b, "\r\n", 2) == GW_OK;
        }
    }
    return ok && gw_buf_append(b, "\r\n", 2) == GW_OK;
}

static void
tunnel_start(struct net_upconn *c)
{
    if (!tunnel_request(c) || !tunnel_wait(c, EV_WRITE)) {
        tun_wipe(c);
        x_fail(c->x, GW_E_UPSTREAM_CONNECT); /* out of memory */
    }
}

/* The status of a whole answer head "HTTP/1.x NNN ...\r\n...\r\n\r\n"; 0 when broken. */
static int
tunnel_status(const char *h, size_t len)
{
    if (len < 12 || memcmp(h, "HTTP/1.", 7) != 0 || (h[7] != '0' && h[7] != '1') || h[8] != ' ')
        return 0;
    if (h[9] < '1' || h[9] > '5' || h[10] < '0' || h[10] > '9' || h[11] < '0' || h[11] > '9')
        return 0;
    return (h[9] - '0') * 100 + (h[10] - '0') * 10 + (h[11] - '0');
}

static void
on_tunnel(evutil_socket_t fd, short what, void *arg)
{
    struct net_upconn *c = arg;
    char buf[1024];
    const char *end;
    ssize_t n;
    int status;

    (void)what;
    GW_CHECK_OBJ(c, NET_UP_CONN_MAGIC);
    if (!c->tun_reading) { /* writing the request */
        n = send(fd, c->tun.data + c->tun_off, c->tun.len - c->tun_off, MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            event_add(c->cev, NULL);
            return;
        }
        if (n < 0) {
            tunnel_fail(c, "the proxy closed the connection", 0);
            return;
        }
        c->tun_off += (size_t)n;
        if (c->tun_off < c->tun.len) {
            event_add(c->cev, NULL);
            return;
        }
        tun_wipe(c); /* the credential is sent; the buffer now collects the answer */
        c->tun_reading = true;
        if (!tunnel_wait(c, EV_READ))
            x_fail(c->x, GW_E_UPSTREAM_CONNECT);
        return;
    }
    n = recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        event_add(c->cev, NULL);
        return;
    }
    if (n <= 0) {
        tunnel_fail(c, "the proxy closed the connection before answering", 0);
        return;
    }
    if (c->tun.len + (size_t)n > NET_UP_TUNNEL_HEAD_MAX) {
        tunnel_fail(c, "the proxy's answer head is too long", 0);
        return;
    }
    if (gw_buf_append(&c->tun, buf, (size_t)n) != GW_OK) {
        x_fail(c->x, GW_E_UPSTREAM_CONNECT);
        return;
    }
    end = memmem(c->tun.data, c->tun.len, "\r\n\r\n", 4);
    if (!end) {
        event_add(c->cev, NULL);
        return;
    }
    status = tunnel_status(c->tun.data, c->tun.len);
    if (status == 0 || (size_t)(end + 4 - c->tun.data) != c->tun.len) {
        tunnel_fail(c, "the proxy's answer is not HTTP/1.x, or bytes follow it", 0);
        return;
    }
    if (status < 200 || status > 299) {
        tunnel_fail(c, "the proxy refused the tunnel: HTTP", status);
        return;
    }
    tun_wipe(c);
    event_free(c->cev);
    c->cev = NULL;
    conn_tcp_up(c); /* the tunnel is open: TLS or HTTP with the upstream, as if direct */
}

static void
on_connect_ready(evutil_socket_t fd, short what, void *arg)
{
    struct net_upconn *c = arg;
    int err = 0;
    socklen_t elen = sizeof(err);

    (void)what;
    GW_CHECK_OBJ(c, NET_UP_CONN_MAGIC);
    event_free(c->cev);
    c->cev = NULL;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0)
        err = errno;
    if (err == 0) {
        if (c->key->proxy_host)
            tunnel_start(c);
        else
            conn_tcp_up(c);
        return;
    }
    close(c->fd);
    c->fd = -1;
    if (c->ai_next) {
        conn_start(c); /* the next address of the name */
        return;
    }
    x_fail(c->x, GW_E_UPSTREAM_CONNECT);
}

/* Starts a non-blocking connect to <sa>. 0 when under way, -1 when it failed at once. */
static int
conn_connect_addr(struct net_upconn *c, const struct sockaddr *sa, socklen_t len)
{
    int one = 1;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, sa, len) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    c->cev = event_new(c->pool->base, fd, EV_WRITE, on_connect_ready, c);
    if (!c->cev || event_add(c->cev, NULL) != 0) {
        if (c->cev)
            event_free(c->cev);
        c->cev = NULL;
        close(fd);
        return -1;
    }
    c->fd = fd;
    return 0;
}

/* Connects to the next address: the key's own, or the next one from the lookup.
 * Failures are reported through the exchange's defer event (this may run inside
 * net_up_send). */
static void
conn_start(struct net_upconn *c)
{
    struct net_upkey *k = c->key;

    if (k->numeric) {
        if (conn_connect_addr(c, (const struct sockaddr *)&k->addr, k->addrlen) != 0)
            x_defer_fail(c->x, GW_E_UPSTREAM_CONNECT);
        return;
    }
    while (c->ai_next) {
        struct evutil_addrinfo *ai = c->ai_next;

        c->ai_next = ai->ai_next;
        if (conn_connect_addr(c, ai->ai_addr, (socklen_t)ai->ai_addrlen) == 0)
            return;
    }
    x_defer_fail(c->x, GW_E_UPSTREAM_CONNECT);
}

static void
on_dns(int result, struct evutil_addrinfo *res, void *arg)
{
    struct net_dns_ticket *t = arg;
    struct net_upconn *c = t->c;

    gw_free(t);
    if (!c) { /* the connection is gone (cancelled lookup) */
        if (res)
            evutil_freeaddrinfo(res);
        return;
    }
    GW_CHECK_OBJ(c, NET_UP_CONN_MAGIC);
    c->dreq = NULL;
    c->ticket = NULL;
    if (result != 0 || !res) {
        if (res)
            evutil_freeaddrinfo(res);
        x_fail(c->x, GW_E_UPSTREAM_CONNECT);
        return;
    }
    c->ai = res;
    c->ai_next = res;
    conn_start(c);
}

/* Starts the name lookup (from the defer event, so that a lookup answered at once from
 * /etc/hosts never calls back inside net_up_send). */
static void
conn_lookup(struct net_upconn *c)
{
    struct evutil_addrinfo hints;
    struct net_dns_ticket *t;
    struct evdns_getaddrinfo_request *r;
    const char *host;
    uint16_t tport;
    char port[8];

    t = gw_calloc(1, sizeof(*t));
    if (!t) {
        x_fail(c->x, GW_E_UPSTREAM_CONNECT);
        return;
    }
    t->c = c;
    c->ticket = t;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_protocol = IPPROTO_TCP;
    hints.ai_flags = EVUTIL_AI_ADDRCONFIG;
    host = key_target(c->key, &tport);
    snprintf(port, sizeof(port), "%u", (unsigned)tport);
    r = evdns_getaddrinfo(c->pool->dns, host, port, &hints, on_dns, t);
    /* NULL: answered (or failed) at once; on_dns has run, freed the ticket and may have
     * ended the exchange and freed c: do not touch c. */
    if (r)
        c->dreq = r;
}

/* ---- exchange end ---- */

static void
x_unlink(struct net_upx *x)
{
    struct net_uppool *p = x->pool;

    if (x->prev)
        x->prev->next = x->next;
    else
        p->live = x->next;
    if (x->next)
        x->next->prev = x->prev;
    x->prev = x->next = NULL;
}

/* ---- the pool's exchange cache and spare memory ----
 * An ended exchange is kept by its pool (at most NET_UPX_CACHE_MAX). The memory an
 * exchange no longer needs goes to the pool's spares as soon as that is so: its request
 * at the answer's first byte (too late for a retry), its head and header offsets once
 * the head is delivered (a held stream keeps neither), the rest when it ends; the next
 * exchange's request, head and offsets take it from there (at most NET_UP_SPARE_MAX of
 * each, buffers of up to NET_UPX_KEEP_BUF bytes). No allocation per exchange after
 * warm-up, also with many in flight: a loop turn may end dozens of exchanges before it
 * starts the next ones (with 16 of each, 64 connections regrew most requests' buffers). */
#define NET_UPX_CACHE_MAX 256u
#define NET_UPX_KEEP_BUF (16u * 1024u)

/* Gives <b>'s memory to the pool's spares (freed when they are full or it is large). */
static void
spare_buf_put(struct net_uppool *p, struct gw_buf *b)
{
    if (b->data && b->cap <= NET_UPX_KEEP_BUF && p->n_spare_buf < NET_UP_SPARE_MAX && !p->freeing) {
        gw_buf_reset(b);
        p->spare_buf[p->n_spare_buf++] = *b;
        *b = (struct gw_buf){0};
    } else {
        gw_buf_fini(b);
    }
}

/* <b> without memory takes a spare's, if there is one. */
static void
spare_buf_take(struct net_uppool *p, struct gw_buf *b)
{
    if (!b->data && p->n_spare_buf)
        *b = p->spare_buf[--p->n_spare_buf];
}

static void
spare_hv_put(struct net_uppool *p, struct net_upx *x)
{
    if (x->hv && x->cap_hv <= NET_UP_KEEP_HV && p->n_spare_hv < NET_UP_SPARE_MAX && !p->freeing) {
        p->spare_hv[p->n_spare_hv] = x->hv;
        p->spare_cap_hv[p->n_spare_hv++] = x->cap_hv;
    } else {
        gw_free(x->hv);
    }
    x->hv = NULL;
    x->n_hv = x->cap_hv = 0;
}

static void
spare_hv_take(struct net_uppool *p, struct net_upx *x)
{
    if (!x->hv && p->n_spare_hv) {
        x->hv = p->spare_hv[--p->n_spare_hv];
        x->cap_hv = p->spare_cap_hv[p->n_spare_hv];
    }
}

static void
spares_free(struct net_uppool *p)
{
    while (p->n_spare_buf)
        gw_buf_fini(&p->spare_buf[--p->n_spare_buf]);
    while (p->n_spare_hv)
        gw_free(p->spare_hv[--p->n_spare_hv]);
}

/* The exchange's memory to the spares (freed, while the pool is being freed). */
static void
x_bufs_fini(struct net_upx *x)
{
    struct net_uppool *p = x->pool;

    spare_buf_put(p, &x->req);
    spare_buf_put(p, &x->retry);
    spare_buf_put(p, &x->head);
    spare_buf_put(p, &x->rr.hbuf); /* a head or chunk line that came in pieces */
    gw_buf_fini(&x->h2hdr);        /* HTTP/2 only */
    gw_buf_fini(&x->pend);
    spare_hv_put(p, x);
}

static void
x_put(struct net_upx *x)
{
    struct net_uppool *p = x->pool;

    x_bufs_fini(x);
    if (p->freeing || p->n_x_cache >= NET_UPX_CACHE_MAX) {
        net_deadline_stop(&x->dl); /* maybe still pending (x_arm) */
        gw_free(x);
        return;
    }
    x->next = p->x_cache;
    p->x_cache = x;
    p->n_x_cache++;
}

static void on_x_timer(evutil_socket_t fd, short what, void *arg);
static void on_x_defer(evutil_socket_t fd, short what, void *arg);

/* An exchange zeroed up to its events, which are assigned; or NULL. */
static struct net_upx *
x_get(struct net_uppool *p)
{
    struct net_upx *x = p->x_cache;

    if (x) {
        p->x_cache = x->next;
        p->n_x_cache--;
        memset(x, 0, offsetof(struct net_upx, timer_ev));
    } else {
        x = gw_calloc(1, sizeof(*x));
        if (!x)
            return NULL;
        event_assign(&x->timer_ev, p->base, -1, 0, on_x_timer, x);
        x->dl.ev = &x->timer_ev;
        event_assign(&x->defer_ev, p->base, -1, 0, on_x_defer, x);
    }
    x->defer = &x->defer_ev;
    return x;
}

static void
x_cache_free(struct net_uppool *p)
{
    while (p->x_cache) {
        struct net_upx *x = p->x_cache;

        p->x_cache = x->next;
        net_deadline_stop(&x->dl); /* maybe still pending (x_arm) */
        gw_free(x);
    }
    p->n_x_cache = 0;
    spares_free(p);
}

static void
x_free(struct net_upx *x)
{
    if (x->conn) {
        bool lead = x->conn->h2_cand;

        conn_close(x->conn);
        x->conn = NULL;
        if (lead)
            h2_lead_gone(x->key, x->pool, GW_OK); /* cancelled: a waiter opens the connection */
    }
    if (x->h2)
        h2_detach(x);
    x_unlink(x);
    net_deadline_lift(&x->dl); /* its timer may stay pending: on_x_timer finds nothing due */
    if (x->defer_on)
        event_del(x->defer);
    x->magic_ = 0;
    x_put(x);
}

/* Ends the exchange: the connection (if any is still attached) is closed, on_end runs
 * unless the caller cancelled, then the exchange is freed. */
static void
x_end(struct net_upx *x, enum gw_code rc)
{
    struct net_upconn *c = x->conn;

    if (c) {
        bool lead = c->h2_cand;

        x->conn = NULL;
        conn_close(c);
        if (lead)
            h2_lead_gone(x->key, x->pool, rc == GW_OK ? GW_E_UPSTREAM_PROTOCOL : rc);
    }
    /* The timer stays until x_free: nothing runs the loop in between. */
    x->ended = true;
    if (!x->cancelled) {
        x->in_cb = true;
        x->cbs.on_end(x->arg, rc);
        x->in_cb = false;
    }
    x_free(x);
}

static void
x_fail(struct net_upx *x, enum gw_code rc)
{
    x_end(x, rc);
}

/* The response is complete: the connection goes back to the pool when the upstream
 * allows it and nothing unexpected follows the response, then on_end(GW_OK). The
 * caller may send a new exchange from on_end, and it may get this very connection. */
static void
x_finish(struct net_upx *x)
{
    struct net_upconn *c = x->conn;

    x->conn = NULL;
    if (x->keep_alive && !c->eof && evbuffer_get_length(bufferevent_get_input(c->bev)) == 0)
        idle_put(c);
    else
        conn_close(c);
    x_end(x, GW_OK);
}

/* Sends the request again on a fresh connection (keep-alive race, see the top). */
static void
x_retry(struct net_upx *x)
{
    struct net_upconn *c = x->conn;

    x->conn = NULL;
    conn_close(c);
    x->retried = true;
    x->reused = false;
    x->req = x->retry;
    x->retry = (struct gw_buf){0};
    net_h1resp_init(&x->rr, NET_UP_HEAD_MAX, NET_UP_HDRS_MAX, x->head_method);
    x->conn = conn_new(x->pool, x->key, x);
    if (!x->conn) {
        x_fail(x, GW_E_UPSTREAM_CONNECT);
        return;
    }
    x->phase = NET_UPX_CONNECTING;
    x_arm_phase(x);
    if (x->key->numeric) {
        conn_start(x->conn); /* a failure comes through the defer event */
    } else {
        x->defer_lookup = true;
        x_defer(x);
    }
}

/* The connection is gone (EOF or error) and every buffered byte has been parsed. */
static void
x_on_gone(struct net_upx *x)
{
    if (!x->got_bytes && x->reused && !x->retried && x->retry.data) {
        x_retry(x);
        return;
    }
    if (x->phase == NET_UPX_BODY && !x->conn->reset && net_h1resp_eof(&x->rr) == NET_H1R_DONE) {
        /* A close-delimited body ends here; anything else is cut short. */
        x->complete = true;
        x->keep_alive = false;
        x_finish(x);
        return;
    }
    x_fail(x, GW_E_UPSTREAM_DROPPED);
}

/* ---- response parsing ---- */

/* HTTP/2: appends a header's name or value to the head (bounded by NET_UP_HEAD_MAX). */
static int
head_add(struct net_upx *x, const char *at, size_t len)
{
    if (x->head.len + len > NET_UP_HEAD_MAX)
        return -1;
    return gw_buf_append(&x->head, at, len) == GW_OK ? 0 : -1;
}

/* The head net/h1resp.c read, to the caller's on_head (its bytes, wherever they lie,
 * valid until the next feed). False when out of memory. */
static bool
deliver_head(struct net_upx *x)
{
    struct net_hdr stack[32];
    struct net_hdr *hdrs = stack;
    struct gw_str name, value;
    size_t n = 0, cap = sizeof(stack) / sizeof(stack[0]), off = 0;

    while (net_h1resp_header_next(&x->rr, &off, &name, &value)) {
        if (n == cap) {
            struct net_hdr *more = gw_malloc(2 * cap * sizeof(*more));

            if (!more) {
                if (hdrs != stack)
                    gw_free(hdrs);
                return false;
            }
            memcpy(more, hdrs, n * sizeof(*more));
            if (hdrs != stack)
                gw_free(hdrs);
            hdrs = more;
            cap *= 2;
        }
        hdrs[n++] = (struct net_hdr){name, value};
    }
    x->phase = NET_UPX_BODY;
    x->keep_alive = x->rr.keep_alive;
    x->arm_due = true; /* the body's timeout, once x_drive has read what came */
    x->in_cb = true;
    x->cbs.on_head(x->arg, (int)x->rr.status, hdrs, n);
    x->in_cb = false;
    if (hdrs != stack)
        gw_free(hdrs);
    return true;
}

/* Parses the answer's bytes, unless paused: first the <n> at <p> (a read's, where they
 * lie: net/sockread.h), then what the input holds; what is left of <p> is kept in the
 * input. Ends the exchange when the response is complete, broken, or the connection is
 * gone. */
static void
x_drive(struct net_upx *x, const char *p, size_t n)
{
    struct net_upconn *c = x->conn;
    struct evbuffer *in = bufferevent_get_input(c->bev);
    bool gave_body = false;

    while (!x->paused && !x->complete) {
        struct evbuffer_iovec v = {(void *)(uintptr_t)p, n};
        struct gw_str body = {0};
        enum net_h1r_ev ev;
        size_t used;

        if (x->rr.part == NET_H1R_P_DONE) { /* the answer is whole (or has no body) */
            x->complete = true;
            x->keep_alive = x->rr.keep_alive;
            break;
        }
        if (n == 0 && (evbuffer_peek(in, -1, NULL, &v, 1) < 1 || v.iov_len == 0))
            break;
        if (!x->got_bytes) {
            x->got_bytes = true;
            spare_buf_put(x->pool, &x->retry); /* too late for a retry now */
        }
        ev = net_h1resp_feed(&x->rr, v.iov_base, v.iov_len, &used, &body);
        /* The head and body lie in the bytes read: delivered before they are let go. */
        switch (ev) {
        case NET_H1R_MORE: break;
        case NET_H1R_HEAD:
            if (!deliver_head(x)) { /* out of memory: a head too large to pass on */
                x_fail(x, GW_E_UPSTREAM_PROTOCOL);
                return;
            }
            break;
        case NET_H1R_BODY:
            x->in_cb = true;
            x->cbs.on_body(x->arg, body.ptr, body.len);
            x->in_cb = false;
            gave_body = true;
            break;
        case NET_H1R_DONE: break; /* the loop's next turn ends it */
        case NET_H1R_ERROR: x_fail(x, GW_E_UPSTREAM_PROTOCOL); return;
        }
        if (n > 0) {
            p += used;
            n -= used;
        } else {
            evbuffer_drain(in, used);
        }
        if (x->cancelled) {
            x_free(x);
            return;
        }
    }
    /* Kept before x_finish, which gives the connection back only when nothing follows
     * the answer. */
    if (n > 0 && !net_sockread_keep(&c->rd, p, n))
        return; /* out of memory, reported through on_conn_event */
    if (x->complete) {
        x_finish(x); /* on_end: the client gets what is left with the answer's end */
        return;
    }
    if (gave_body && x->cbs.on_body_read) {
        x->in_cb = true;
        x->cbs.on_body_read(x->arg);
        x->in_cb = false;
        if (x->cancelled) {
            x_free(x);
            return;
        }
    }
    if (x->arm_due) {
        x->arm_due = false;
        x_arm_phase(x);
    }
    if (c->eof && !x->paused && evbuffer_get_length(in) == 0)
        x_on_gone(x);
}

/* ---- connection events ---- */

/* Reads for connection <c>: the <n> bytes at <p> of a read (net/sockread.h, where they
 * lie; n == 0: none), then what the input holds. Bytes that are not for an exchange's
 * answer now are kept in the input first, to be read as they always were. */
static void
conn_read(struct net_upconn *c, const char *p, size_t n)
{
    struct net_upx *x = c->x;

    if (n > 0 && (c->h2 || !x || x->in_send || x->phase == NET_UPX_CONNECTING)) {
        if (!net_sockread_keep(&c->rd, p, n))
            return; /* out of memory, reported through on_conn_event */
        n = 0;
    }
    if (c->h2) {
        h2_on_read(c->h2);
        return;
    }
    if (c->h2_cand && x && x->phase == NET_UPX_CONNECTING)
        return; /* not before ALPN decides (on_conn_event) */
    if (!x) {   /* bytes on an idle connection: nobody asked; drop it */
        idle_drop(c);
        return;
    }
    if (x->in_send) { /* never call back inside net_up_send */
        x_defer(x);
        return;
    }
    /* The body's idle timeout starts again after this read (x_drive arms it unless the
     * answer ended: a whole answer in one read arms no timer). */
    if (x->phase == NET_UPX_BODY)
        x->arm_due = true;
    x_drive(x, p, n);
}

static void
on_conn_read(struct bufferevent *bev, void *arg)
{
    struct net_upconn *c = arg;

    (void)bev;
    GW_CHECK_OBJ(c, NET_UP_CONN_MAGIC);
    conn_read(c, NULL, 0);
}

/* A read's bytes while the input is empty (net/sockread.h). */
static void
on_conn_bytes(void *arg, const char *p, size_t n)
{
    struct net_upconn *c = arg;

    GW_CHECK_OBJ(c, NET_UP_CONN_MAGIC);
    conn_read(c, p, n);
}

static void
on_conn_write(struct bufferevent *bev, void *arg)
{
    struct net_upconn *c = arg;
    struct net_upx *x = c->x;

    (void)bev;
    if (c->h2)
        return;
    /* The request is in the kernel: "request sent" starts the head timeout again. */
    if (x && x->phase == NET_UPX_HEAD && !x->paused)
        x_arm(x, x->head_ms);
}

/* A failed handshake: _TLS_VERIFY when the certificate was refused (logged with the
 * reason, such as an unknown issuer: a missing providers[].ca_file), else _TLS. */
static enum gw_code
handshake_failed(struct net_upconn *c)
{
    SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
    long vr = ssl ? SSL_get_verify_result(ssl) : X509_V_OK;

    if (vr == X509_V_OK)
        return GW_E_UPSTREAM_TLS;
    GW_LOG(GW_LOG_WARN, NULL, gw_code_str(GW_E_UPSTREAM_TLS_VERIFY),
           "upstream %s:%u: certificate refused: %s", c->key->host, c->key->port,
           X509_verify_cert_error_string(vr));
    return GW_E_UPSTREAM_TLS_VERIFY;
}

static void
on_conn_event(struct bufferevent *bev, short what, void *arg)
{
    struct net_upconn *c = arg;
    struct net_upx *x = c->x;

    GW_CHECK_OBJ(c, NET_UP_CONN_MAGIC);
    if (c->h2) {
        h2_on_event(c->h2, what);
        return;
    }
    if (!x) { /* idle: closed by the upstream, an error, or the idle timeout */
        idle_drop(c);
        return;
    }
    if (x->in_send && !(what & BEV_EVENT_CONNECTED)) {
        /* Not expected from libevent 2.1 socket bufferevents, but never call back inside
         * net_up_send: note the loss, the defer event drives it. */
        c->eof = true;
        c->reset = (what & BEV_EVENT_ERROR) != 0;
        x_defer(x);
        return;
    }
    if (what & BEV_EVENT_CONNECTED) { /* TLS handshake done */
        if (c->h2_cand) {
            h2_alpn_done(c);
            return;
        }
        x->phase = NET_UPX_HEAD;
        x_arm_phase(x);
        if (x->paused)
            net_sockread_disable(&c->rd);
        return;
    }
    if (x->phase == NET_UPX_CONNECTING) {
        /* TCP is up (we connected it ourselves), so this is the handshake failing:
         * verification, a bad record, or the peer closing. */
        c->tls_bad = true;
        while (bufferevent_get_openssl_error(bev) != 0)
            ;
        x_fail(x, handshake_failed(c));
        return;
    }
    if (what & BEV_EVENT_TIMEOUT)
        return; /* we set no bufferevent timeouts on busy connections */
    /* EOF or error while waiting for or reading the response: parse what is buffered
     * first (the response may be whole), then x_on_gone decides. While paused, that
     * waits for net_upx_resume. */
    c->eof = true;
    if (what & BEV_EVENT_ERROR) {
        c->reset = true; /* a reset never ends a close-delimited body cleanly */
        while (bufferevent_get_openssl_error(bev) != 0)
            c->tls_bad = true;
    }
    if (!x->paused)
        x_drive(x, NULL, 0);
}

/* ---- timers and deferred work ---- */

static void
on_x_timer(evutil_socket_t fd, short what, void *arg)
{
    struct net_upx *x = arg;

    (void)fd;
    (void)what;
    /* Left pending by x_arm: an ended exchange (in the cache, magic_ 0) has its deadline
     * lifted, as has a paused one; an early timer is added again for the rest. */
    if (!net_deadline_fired(&x->dl))
        return;
    GW_CHECK_OBJ(x, NET_UPX_MAGIC);
    x_fail(x, GW_E_UPSTREAM_TIMEOUT);
}

static void
on_x_defer(evutil_socket_t fd, short what, void *arg)
{
    struct net_upx *x = arg;

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(x, NET_UPX_MAGIC);
    x->defer_on = false;
    if (x->defer_rc != GW_OK) {
        x_fail(x, x->defer_rc);
        return;
    }
    if (x->defer_lookup) {
        x->defer_lookup = false;
        conn_lookup(x->conn);
        return;
    }
    if (x->h2_used) {
        h2_x_deliver(x);
        return;
    }
    if (x->conn && x->conn->bev && x->phase != NET_UPX_CONNECTING && !x->paused)
        x_drive(x, NULL, 0);
}

/* ---- HTTP/2 ----
 * One nghttp2 client session per connection (struct net_h2, owned by the connection);
 * every exchange is one stream on it. A key whose requests may go over h2 (key_h2_maybe)
 * has at most one connection being opened for h2 (k->h2_connecting, opened by the first
 * request: the leader); requests that come meanwhile wait (x->h2_wait) and become
 * streams when the session starts, or each open an HTTP/1.1 connection when ALPN chose
 * http/1.1. New streams go to the key's first session that has not seen GOAWAY; nghttp2
 * holds requests beyond the upstream's SETTINGS_MAX_CONCURRENT_STREAMS in its queue
 * until a stream closes, so the upstream's limit holds on one connection per worker
 * and upstream (a second connection would evade the limit the upstream asked for).
 * Failures map to the HTTP/1.1 codes: a reset stream, a stream above a GOAWAY's
 * last_stream_id, or a connection lost under a stream is GW_E_UPSTREAM_DROPPED, before
 * or after the head (the caller tells a failover from a cut stream, as on HTTP/1.1); a
 * broken frame is GW_E_UPSTREAM_PROTOCOL. After a GOAWAY the session takes no new
 * streams, lets those below last_stream_id end, and closes when none is left.
 * Backpressure: automatic WINDOW_UPDATE is off. The connection window is given back
 * at once, a stream's only once its DATA reached the caller; DATA arriving while the
 * exchange is paused waits in x->pend (bounded by the stream window). */

#define NET_H2_MAGIC 0x55503248u /* "UP2H" */

enum {
    NET_H2_STREAM_WINDOW = 256 * 1024,     /* SETTINGS_INITIAL_WINDOW_SIZE we send */
    NET_H2_CONN_WINDOW = 16 * 1024 * 1024, /* our connection-level receive window */
    NET_H2_GOT_BODY = 64,                  /* streams told at the end of a read */
};

struct net_h2 {
    uint32_t magic_;
    struct net_upconn *c;
    struct net_upkey *k;
    struct net_uppool *pool;
    nghttp2_session *s;
    struct net_h2 *prev, *next; /* the key's sessions (after a GOAWAY too) */
    unsigned n_streams;         /* exchanges with an open stream */
    bool linked;                /* on the key's list */
    bool goaway;                /* GOAWAY received: no new streams */
    bool in_recv;               /* inside nghttp2_session_mem_recv: no send, no close */
    bool dead;                  /* failed: close once the receive loop is left */
    /* The streams given body in this read, told once it is all delivered (on_body_read):
     * by id, since a stream may end and its exchange go meanwhile. */
    int32_t got_body[NET_H2_GOT_BODY];
    unsigned n_got_body;
};

static bool
key_h2_maybe(const struct net_upkey *k)
{
    if (k->h2mode == GW_HTTP2_ON)
        return true;
    return k->h2mode == GW_HTTP2_AUTO && k->tls && !k->alpn_h1;
}

/* ALPN for an https upstream: h2 and http/1.1 (auto), h2 only (on), http/1.1 only
 * (off, and connections opened after ALPN chose http/1.1). False when out of memory. */
static bool
h2_set_alpn(struct net_upconn *c, SSL *ssl)
{
    static const unsigned char both[] = "\x02h2\x08http/1.1", h2[] = "\x02h2",
                               h1[] = "\x08http/1.1";
    const unsigned char *p = h1;
    unsigned n = sizeof(h1) - 1;

    if (c->h2_cand && c->key->h2mode == GW_HTTP2_ON) {
        p = h2;
        n = sizeof(h2) - 1;
    } else if (c->h2_cand) {
        p = both;
        n = sizeof(both) - 1;
    }
    return SSL_set_alpn_protos(ssl, p, n) == 0;
}

static bool
h2_connection_header(const char *n, size_t len)
{
    static const char *const bad[] = {"connection",        "keep-alive", "proxy-connection",
                                      "transfer-encoding", "upgrade",    "host",
                                      "content-length",    "te",         NULL};
    size_t i;

    for (i = 0; bad[i]; i++)
        if (strlen(bad[i]) == len && strncasecmp(bad[i], n, len) == 0)
            return true;
    return false;
}

static enum gw_code
h2_pair(struct net_upx *x, const char *n, size_t nl, const char *v, size_t vl, bool lower)
{
    struct gw_buf *b = &x->h2hdr;
    size_t at = b->len, i;

    if (gw_buf_append(b, n, nl) != GW_OK || gw_buf_append(b, "", 1) != GW_OK ||
        gw_buf_append(b, v, vl) != GW_OK || gw_buf_append(b, "", 1) != GW_OK)
        return GW_E_NOMEM;
    for (i = 0; lower && i < nl; i++)
        b->data[at + i] = (char)tolower((unsigned char)b->data[at + i]);
    x->h2_nhdr++;
    return GW_OK;
}

/* The request's header block, kept until the stream is submitted (the caller's
 * headers are borrowed for net_up_send only). */
static enum gw_code
h2_hdrs_build(struct net_upx *x, const struct net_up_req *req, const struct net_upkey *k)
{
    struct gw_buf auth = {0};
    char len[24];
    enum gw_code rc;
    size_t i;

    rc = host_value(&auth, k->host, k->port, k->port == (k->tls ? 443 : 80));
    snprintf(len, sizeof(len), "%zu", req->body.len);
    if (rc == GW_OK)
        rc = h2_pair(x, ":method", 7, req->method, strlen(req->method), false);
    if (rc == GW_OK)
        rc = h2_pair(x, ":scheme", 7, k->tls ? "https" : "http", k->tls ? 5 : 4, false);
    if (rc == GW_OK)
        rc = h2_pair(x, ":authority", 10, auth.data, auth.len, false);
    if (rc == GW_OK)
        rc = req->path.len ? h2_pair(x, ":path", 5, req->path.ptr, req->path.len, false)
                           : h2_pair(x, ":path", 5, "/", 1, false);
    if (rc == GW_OK && (req->body.len || strcmp(req->method, "POST") == 0))
        rc = h2_pair(x, "content-length", 14, len, strlen(len), false);
    for (i = 0; rc == GW_OK && i < req->n_hdrs; i++) {
        const struct net_hdr *h = &req->hdrs[i];

        if (!h2_connection_header(h->name.ptr, h->name.len))
            rc = h2_pair(x, h->name.ptr, h->name.len, h->value.ptr, h->value.len, true);
    }
    gw_buf_fini(&auth);
    return rc;
}

/* nghttp2 asks for request body bytes: the tail of x->req. The exchange is looked up
 * through the stream, so a cancelled one (user data cleared) is never touched. */
static ssize_t
h2_read_body(nghttp2_session *s, int32_t sid, uint8_t *buf, size_t length, uint32_t *flags,
             nghttp2_data_source *src, void *ud)
{
    struct net_upx *x = nghttp2_session_get_stream_user_data(s, sid);
    size_t n;

    (void)src;
    (void)ud;
    if (!x)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    n = x->body_len - x->body_off;
    if (n > length)
        n = length;
    memcpy(buf, x->req.data + x->req.len - x->body_len + x->body_off, n);
    x->body_off += n;
    if (x->body_off == x->body_len)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static void h2_close_rc(struct net_h2 *h, enum gw_code rc);

static void
h2_unlink(struct net_h2 *h)
{
    if (!h->linked)
        return;
    if (h->prev)
        h->prev->next = h->next;
    else
        h->k->h2s = h->next;
    if (h->next)
        h->next->prev = h->prev;
    h->prev = h->next = NULL;
    h->linked = false;
}

/* Writes what nghttp2 has to send into the connection's output. */
static void
h2_flush(struct net_h2 *h)
{
    struct evbuffer *out = bufferevent_get_output(h->c->bev);

    for (;;) {
        const uint8_t *d;
        ssize_t n = nghttp2_session_mem_send(h->s, &d);

        if (n < 0) {
            h->dead = true;
            return;
        }
        if (n == 0)
            return;
        if (evbuffer_add(out, d, (size_t)n) != 0) {
            h->dead = true;
            return;
        }
    }
}

/* After anything that may have queued frames or ended streams (never inside the
 * receive loop, which does this itself when it is left): sends, then closes the
 * connection when it failed, or has nothing left to do after a GOAWAY. */
static void
h2_after(struct net_h2 *h)
{
    if (h->in_recv)
        return;
    h2_flush(h);
    if (h->dead || (h->goaway && h->n_streams == 0) ||
        (!nghttp2_session_want_read(h->s) && !nghttp2_session_want_write(h->s))) {
        h2_close_rc(h, h->dead ? GW_E_UPSTREAM_PROTOCOL : GW_E_UPSTREAM_DROPPED);
        return;
    }
    /* No stream: the connection idles like an HTTP/1.1 one (closed after idle_tv). */
    net_sockread_set_timeout(&h->c->rd, h->n_streams ? NULL : h->pool->idle_tv);
}

/* Makes <x> a stream of <h>. A failure to submit ends the exchange from the loop. */
static void
h2_attach(struct net_upx *x, struct net_h2 *h)
{
    nghttp2_nv stack[32], *nv = stack;
    nghttp2_data_provider prd = {.source.ptr = NULL, .read_callback = h2_read_body};
    const char *p = x->h2hdr.data;
    int32_t sid = NGHTTP2_ERR_NOMEM;
    size_t i;

    x->h2_used = true;
    x->phase = NET_UPX_HEAD;
    x_arm_phase(x);
    if (x->h2_nhdr > sizeof(stack) / sizeof(stack[0]))
        nv = gw_malloc(x->h2_nhdr * sizeof(*nv));
    if (nv) {
        for (i = 0; i < x->h2_nhdr; i++) {
            nv[i].name = (uint8_t *)(uintptr_t)p;
            nv[i].namelen = strlen(p);
            p += nv[i].namelen + 1;
            nv[i].value = (uint8_t *)(uintptr_t)p;
            nv[i].valuelen = strlen(p);
            p += nv[i].valuelen + 1;
            nv[i].flags = NGHTTP2_NV_FLAG_NONE; /* copied: the block is freed below */
        }
        sid = nghttp2_submit_request(h->s, NULL, nv, x->h2_nhdr, x->body_len ? &prd : NULL, x);
    }
    if (nv != stack)
        gw_free(nv);
    gw_buf_fini(&x->h2hdr);
    if (sid < 0) {
        x->h2_closed = true;
        x_defer_fail(x, GW_E_UPSTREAM_PROTOCOL);
        return;
    }
    x->h2 = h;
    x->sid = sid;
    h->n_streams++;
    h->pool->st.h2_streams++;
    net_sockread_set_timeout(&h->c->rd, NULL);
}

/* Opens a connection for <x> (the path every new connection takes). False when out of
 * memory. */
static bool
x_open(struct net_upx *x)
{
    struct net_upkey *k = x->key;
    struct net_upconn *c = conn_new(x->pool, k, x);

    if (!c)
        return false;
    x->conn = c;
    if (key_h2_maybe(k) && !k->h2_connecting) {
        c->h2_cand = true;
        k->h2_connecting = c;
    }
    x->phase = NET_UPX_CONNECTING;
    x_arm_phase(x);
    if (k->unresolvable)
        x_defer_fail(x, GW_E_UPSTREAM_CONNECT);
    else if (k->numeric)
        conn_start(c);
    else {
        x->defer_lookup = true;
        x_defer(x);
    }
    return true;
}

/* The next exchange waiting for <k>'s h2 connection (and not already failing). */
static struct net_upx *
h2_next_waiter(struct net_uppool *p, struct net_upkey *k)
{
    struct net_upx *w;

    for (w = p->live; w; w = w->next)
        if (w->key == k && w->h2_wait && w->defer_rc == GW_OK)
            return w;
    return NULL;
}

/* The leader's connection closed before it spoke h2. rc GW_OK (the leader was
 * cancelled): the first waiter opens a connection instead; else every waiter fails with
 * rc (they would meet the same failure). */
static void
h2_lead_gone(struct net_upkey *k, struct net_uppool *p, enum gw_code rc)
{
    struct net_upx *w;

    if (p->freeing)
        return;
    while ((w = h2_next_waiter(p, k))) {
        if (rc != GW_OK) {
            x_defer_fail(w, rc); /* defer_rc set: h2_next_waiter skips it now */
            continue;
        }
        w->h2_wait = false;
        if (!x_open(w))
            x_defer_fail(w, GW_E_UPSTREAM_CONNECT);
        return;
    }
}

static int
h2_on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct net_upx *x = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);

    (void)ud;
    if (x && f->hd.type == NGHTTP2_HEADERS && x->phase == NET_UPX_HEAD) {
        x->n_hv = 0;
        spare_buf_take(x->pool, &x->head);
        spare_hv_take(x->pool, x);
        gw_buf_reset(&x->head);
        x->h2_status = 0;
    }
    return 0;
}

/* A response header of a stream still waiting for its head (trailers are dropped). */
static int
h2_on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nl,
             const uint8_t *value, size_t vl, uint8_t flags, void *ud)
{
    struct net_upx *x = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    struct net_hoff *h;

    (void)flags;
    (void)ud;
    if (!x || f->hd.type != NGHTTP2_HEADERS || x->phase != NET_UPX_HEAD)
        return 0;
    if (nl == 7 && memcmp(name, ":status", 7) == 0) {
        x->h2_status = (vl == 3 && isdigit(value[0]) && isdigit(value[1]) && isdigit(value[2]))
                           ? (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0')
                           : 0;
        return 0;
    }
    if (nl > 0 && name[0] == ':')
        return 0;
    x->h2_bad = true; /* until the header is stored */
    if (x->n_hv == NET_UP_HDRS_MAX)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (x->n_hv == x->cap_hv) {
        size_t cap = x->cap_hv ? x->cap_hv * 2 : 16;
        struct net_hoff *v = gw_realloc(x->hv, cap * sizeof(*v));

        if (!v)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        x->hv = v;
        x->cap_hv = cap;
    }
    h = &x->hv[x->n_hv];
    h->name_off = x->head.len;
    h->name_len = nl;
    h->val_off = x->head.len + nl;
    h->val_len = vl;
    if (head_add(x, (const char *)name, nl) != 0 || head_add(x, (const char *)value, vl) != 0)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    x->n_hv++;
    x->h2_bad = false;
    return 0;
}

/* The response head is whole: on_head, as on HTTP/1.1. */
static void
h2_head(struct net_upx *x)
{
    struct net_hdr stack[32];
    struct net_hdr *hdrs = stack;
    size_t i;

    if (x->n_hv > sizeof(stack) / sizeof(stack[0])) {
        hdrs = gw_malloc(x->n_hv * sizeof(*hdrs));
        if (!hdrs) {
            x_fail(x, GW_E_UPSTREAM_PROTOCOL);
            return;
        }
    }
    for (i = 0; i < x->n_hv; i++) {
        hdrs[i].name = (struct gw_str){x->head.data + x->hv[i].name_off, x->hv[i].name_len};
        hdrs[i].value = (struct gw_str){x->head.data + x->hv[i].val_off, x->hv[i].val_len};
    }
    x->phase = NET_UPX_BODY;
    x->got_bytes = true;
    x_arm_phase(x);
    x->in_cb = true;
    x->cbs.on_head(x->arg, x->h2_status, hdrs, x->n_hv);
    x->in_cb = false;
    if (hdrs != stack)
        gw_free(hdrs);
    spare_buf_put(x->pool, &x->head);
    spare_hv_put(x->pool, x);
    if (x->cancelled)
        x_free(x);
}

static int
h2_on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *ud)
{
    struct net_h2 *h = ud;
    struct net_upx *x;

    if (f->hd.type == NGHTTP2_GOAWAY) {
        /* Streams above last_stream_id are closed by nghttp2 (on_stream_close, or
         * on_frame_not_send for those not sent yet); those below may end. */
        h->goaway = true; /* stays on the key's list (closed from there), takes no stream */
        return 0;
    }
    if (f->hd.type != NGHTTP2_HEADERS && f->hd.type != NGHTTP2_DATA)
        return 0;
    x = nghttp2_session_get_stream_user_data(s, f->hd.stream_id);
    if (!x)
        return 0;
    if (f->hd.flags & NGHTTP2_FLAG_END_STREAM)
        x->h2_eos = true;
    if (f->hd.type == NGHTTP2_HEADERS && x->phase == NET_UPX_HEAD) {
        if (x->h2_status >= 100 && x->h2_status < 200 && !x->h2_eos)
            return 0; /* an interim head; the real one follows */
        x->h2_bad = x->h2_status < 200;
        if (x->h2_bad)
            return nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                             NGHTTP2_PROTOCOL_ERROR) == 0
                       ? 0
                       : NGHTTP2_ERR_CALLBACK_FAILURE;
        h2_head(x);
    }
    return 0;
}

static int
h2_on_data(nghttp2_session *s, uint8_t flags, int32_t sid, const uint8_t *data, size_t len,
           void *ud)
{
    struct net_upx *x = nghttp2_session_get_stream_user_data(s, sid);

    (void)flags;
    (void)ud;
    nghttp2_session_consume_connection(s, len);
    if (!x || x->phase != NET_UPX_BODY)
        return 0;
    if (x->paused || x->pend.len > 0) {
        if (gw_buf_append(&x->pend, (const char *)data, len) != GW_OK)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        return 0;
    }
    x_arm(x, x->idle_ms);
    x->in_cb = true;
    x->cbs.on_body(x->arg, (const char *)data, len);
    if (!x->cancelled && x->cbs.on_body_read && !x->h2_got_body) {
        struct net_h2 *h = x->h2;

        if (h && h->n_got_body < NET_H2_GOT_BODY) {
            h->got_body[h->n_got_body++] = sid; /* told at the end of the read */
            x->h2_got_body = true;
        } else {
            x->cbs.on_body_read(x->arg); /* a list full: told at once */
        }
    }
    x->in_cb = false;
    if (x->cancelled) {
        x_free(x);
        return 0;
    }
    nghttp2_session_consume_stream(s, sid, len);
    return 0;
}

/* The stream of <x> is over (nghttp2 closed it, or it was never sent): ends the exchange
 * with <rc>, after DATA still held for a paused caller. */
static void
h2_stream_gone(struct net_upx *x, enum gw_code rc)
{
    struct net_h2 *h = x->h2;

    if (h) {
        nghttp2_session_set_stream_user_data(h->s, x->sid, NULL);
        h->n_streams--;
    }
    x->h2 = NULL;
    x->h2_closed = true;
    x->h2_rc = rc;
    if (x->pend.len > 0)
        return; /* net_upx_resume delivers it, then ends */
    x_end(x, rc);
}

static int
h2_on_stream_close(nghttp2_session *s, int32_t sid, uint32_t err, void *ud)
{
    struct net_upx *x = nghttp2_session_get_stream_user_data(s, sid);
    enum gw_code rc = GW_OK;

    (void)ud;
    if (!x)
        return 0;
    if (x->h2_bad)
        rc = GW_E_UPSTREAM_PROTOCOL; /* a head we refused, as on HTTP/1.1 */
    else if (err != NGHTTP2_NO_ERROR)
        rc = GW_E_UPSTREAM_DROPPED; /* RST_STREAM, or refused by a GOAWAY */
    else if (x->phase != NET_UPX_BODY || !x->h2_eos)
        rc = GW_E_UPSTREAM_PROTOCOL;
    h2_stream_gone(x, rc);
    return 0;
}

/* A request HEADERS that could not be sent (a GOAWAY came first): the upstream never
 * saw it. Such a stream may not exist in nghttp2 yet, hence the search by id. */
static int
h2_on_not_send(nghttp2_session *s, const nghttp2_frame *f, int err, void *ud)
{
    struct net_h2 *h = ud;
    struct net_upx *x;

    (void)s;
    (void)err;
    if (f->hd.type != NGHTTP2_HEADERS)
        return 0;
    for (x = h->pool->live; x; x = x->next)
        if (x->h2 == h && x->sid == f->hd.stream_id && !x->h2_closed) {
            h2_stream_gone(x, GW_E_UPSTREAM_DROPPED);
            break;
        }
    return 0;
}

static nghttp2_session_callbacks *h2_cbs;
static pthread_once_t h2_cbs_once = PTHREAD_ONCE_INIT;

static void
h2_cbs_init(void)
{
    if (nghttp2_session_callbacks_new(&h2_cbs) != 0)
        return;
    nghttp2_session_callbacks_set_on_begin_headers_callback(h2_cbs, h2_on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(h2_cbs, h2_on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(h2_cbs, h2_on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(h2_cbs, h2_on_data);
    nghttp2_session_callbacks_set_on_stream_close_callback(h2_cbs, h2_on_stream_close);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(h2_cbs, h2_on_not_send);
}

/* Closes the connection of <h>: every stream still open on it ends with <rc>. */
static void
h2_close_rc(struct net_h2 *h, enum gw_code rc)
{
    struct net_upx *x;

    GW_CHECK_OBJ(h, NET_H2_MAGIC);
    h2_unlink(h);
    h->dead = true;
    h->in_recv = true; /* the endings below must not close it again */
    for (;;) {
        for (x = h->pool->live; x; x = x->next)
            if (x->h2 == h)
                break;
        if (!x)
            break;
        nghttp2_session_set_stream_user_data(h->s, x->sid, NULL);
        h->n_streams--;
        x->h2 = NULL;
        x->h2_closed = true;
        x->h2_rc = rc;
        if (x->pend.len == 0)
            x_end(x, rc);
    }
    nghttp2_session_del(h->s);
    h->c->h2 = NULL;
    conn_close(h->c);
    h->magic_ = 0;
    gw_free(h);
}

static void
h2_close(struct net_h2 *h)
{
    h2_close_rc(h, GW_E_UPSTREAM_DROPPED);
}

/* The streams given DATA in the read just handled: each told once (on_body_read), so that
 * what the frames of one read gave goes to its client in one write. A stream that ended
 * meanwhile is no longer found by its id (its end wrote what it had). */
static void
h2_tell_body_read(struct net_h2 *h)
{
    for (unsigned i = 0; i < h->n_got_body; i++) {
        struct net_upx *x = nghttp2_session_get_stream_user_data(h->s, h->got_body[i]);

        if (!x || !x->h2_got_body)
            continue;
        x->h2_got_body = false;
        if (x->ended || x->cancelled)
            continue;
        x->in_cb = true;
        x->cbs.on_body_read(x->arg);
        x->in_cb = false;
        if (x->cancelled)
            x_free(x);
    }
    h->n_got_body = 0;
}

/* Feeds nghttp2 what the input holds (callbacks run, streams may end); a broken frame
 * marks the session dead. Then tells the streams given DATA. */
static void
h2_recv_all(struct net_h2 *h)
{
    struct evbuffer *in = bufferevent_get_input(h->c->bev);
    size_t len;

    h->in_recv = true;
    while (!h->dead && (len = evbuffer_get_length(in)) > 0) {
        unsigned char *d = evbuffer_pullup(in, (ssize_t)len);
        ssize_t n = d ? nghttp2_session_mem_recv(h->s, d, len) : -1;

        if (n < 0) {
            h->dead = true;
            break;
        }
        evbuffer_drain(in, (size_t)n);
    }
    h2_tell_body_read(h); /* still in_recv: nothing closes the session under us */
    h->in_recv = false;
}

static void
h2_on_read(struct net_h2 *h)
{
    h2_recv_all(h);
    h2_after(h);
}

static void
h2_on_event(struct net_h2 *h, short what)
{
    if (what & BEV_EVENT_CONNECTED)
        return;
    if ((what & BEV_EVENT_TIMEOUT) && h->n_streams > 0)
        return; /* no timeout is set while streams are open */
    if (what & BEV_EVENT_ERROR)
        while (bufferevent_get_openssl_error(h->c->bev) != 0)
            h->c->tls_bad = true;
    /* The last frames may explain the close (GOAWAY, END_STREAM): read them first. */
    h2_recv_all(h);
    h2_close_rc(h, h->dead ? GW_E_UPSTREAM_PROTOCOL : GW_E_UPSTREAM_DROPPED);
}

/* The leader's connection is ready to speak h2 (h2c at once, or ALPN chose h2): the
 * session starts with our SETTINGS, and the leader and every waiter become streams. */
static void
h2_start(struct net_upconn *c)
{
    struct net_upx *x = c->x, *w;
    struct net_upkey *k = c->key;
    struct net_h2 *h;
    nghttp2_option *opt = NULL;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, NET_H2_STREAM_WINDOW},
    };
    int rv;

    pthread_once(&h2_cbs_once, h2_cbs_init);
    h = gw_calloc(1, sizeof(*h));
    if (!h || !h2_cbs || nghttp2_option_new(&opt) != 0) {
        gw_free(h);
        x_fail(x, GW_E_UPSTREAM_CONNECT);
        return;
    }
    nghttp2_option_set_no_auto_window_update(opt, 1);
    /* Until the upstream's SETTINGS arrive, one stream: requests sent before could
     * exceed a small SETTINGS_MAX_CONCURRENT_STREAMS and be refused. */
    nghttp2_option_set_peer_max_concurrent_streams(opt, 1);
    rv = nghttp2_session_client_new2(&h->s, h2_cbs, h, opt);
    nghttp2_option_del(opt);
    if (rv == 0)
        rv = nghttp2_submit_settings(h->s, NGHTTP2_FLAG_NONE, iv, sizeof(iv) / sizeof(iv[0]));
    if (rv == 0)
        rv = nghttp2_session_set_local_window_size(h->s, NGHTTP2_FLAG_NONE, 0, NET_H2_CONN_WINDOW);
    if (rv != 0) {
        if (h->s)
            nghttp2_session_del(h->s);
        gw_free(h);
        x_fail(x, GW_E_UPSTREAM_CONNECT);
        return;
    }
    h->magic_ = NET_H2_MAGIC;
    h->c = c;
    h->k = k;
    h->pool = c->pool;
    c->h2 = h;
    c->h2_cand = false;
    c->x = NULL;
    if (k->h2_connecting == c)
        k->h2_connecting = NULL;
    h->next = k->h2s;
    if (k->h2s)
        k->h2s->prev = h;
    k->h2s = h;
    h->linked = true;
    c->pool->st.h2_conns++;
    x->conn = NULL;
    h2_attach(x, h);
    while ((w = h2_next_waiter(c->pool, k))) {
        w->h2_wait = false;
        h2_attach(w, h);
    }
    h2_after(h);
}

/* Every waiter of <k> opens its own (HTTP/1.1) connection. */
static void
h2_release_waiters(struct net_uppool *p, struct net_upkey *k)
{
    struct net_upx *w;

    while ((w = h2_next_waiter(p, k))) {
        w->h2_wait = false;
        if (!x_open(w))
            x_defer_fail(w, GW_E_UPSTREAM_CONNECT);
    }
}

/* The TLS handshake of the leader's connection is done: ALPN decides. */
static void
h2_alpn_done(struct net_upconn *c)
{
    SSL *ssl = bufferevent_openssl_get_ssl(c->bev);
    struct net_upx *x = c->x;
    struct net_upkey *k = c->key;
    const unsigned char *proto = NULL;
    unsigned plen = 0;

    if (ssl)
        SSL_get0_alpn_selected(ssl, &proto, &plen);
    if (plen == 2 && memcmp(proto, "h2", 2) == 0) {
        h2_start(c);
        return;
    }
    if (k->h2mode == GW_HTTP2_ON) { /* on over https: h2 or nothing */
        GW_LOG(GW_LOG_WARN, NULL, gw_code_str(GW_E_UPSTREAM_PROTOCOL),
               "upstream %s:%u: http2 is on but the server's ALPN did not choose h2", k->host,
               k->port);
        x_fail(x, GW_E_UPSTREAM_PROTOCOL);
        return;
    }
    k->alpn_h1 = true; /* auto: HTTP/1.1 from now on, as for off */
    c->h2_cand = false;
    if (k->h2_connecting == c)
        k->h2_connecting = NULL;
    if (!x_write_req(x)) {
        x_fail(x, GW_E_UPSTREAM_CONNECT);
        return;
    }
    x->phase = NET_UPX_HEAD;
    x_arm_phase(x);
    if (x->paused)
        net_sockread_disable(&c->rd);
    h2_release_waiters(c->pool, k);
}

/* A request for an h2 key: a stream on an open session, or a wait for the connection
 * being opened. False: the caller opens a connection (which becomes the leader). */
static bool
h2_send(struct net_upx *x)
{
    struct net_h2 *h = x->key->h2s;

    while (h && (h->goaway || h->dead))
        h = h->next;
    if (h) {
        x->pool->st.reuses++;
        h2_attach(x, h);
        h2_flush(h); /* callbacks never run inside net_up_send; a close waits */
        return true;
    }
    if (x->key->h2_connecting) {
        x->h2_wait = true;
        x->phase = NET_UPX_CONNECTING;
        x_arm_phase(x);
        return true;
    }
    return false;
}

/* The exchange ends or is cancelled while its stream is open: RST_STREAM (CANCEL). */
static void
h2_detach(struct net_upx *x)
{
    struct net_h2 *h = x->h2;

    x->h2 = NULL;
    if (!x->h2_closed) {
        x->h2_closed = true;
        nghttp2_session_set_stream_user_data(h->s, x->sid, NULL);
        nghttp2_submit_rst_stream(h->s, NGHTTP2_FLAG_NONE, x->sid, NGHTTP2_CANCEL);
        h->n_streams--;
    }
    if (!x->pool->freeing)
        h2_after(h);
}

/* From the defer event after a resume: DATA held while paused, then the end. */
static void
h2_x_deliver(struct net_upx *x)
{
    if (x->ended || x->paused)
        return;
    if (x->pend.len > 0) {
        struct gw_buf b = x->pend;

        x->pend = (struct gw_buf){0};
        x_arm(x, x->idle_ms);
        x->in_cb = true;
        x->cbs.on_body(x->arg, b.data, b.len);
        if (!x->cancelled && x->cbs.on_body_read)
            x->cbs.on_body_read(x->arg);
        x->in_cb = false;
        if (!x->cancelled && x->h2) {
            /* the window update goes out now; a failed session is closed by its next
             * read or event (closing it here would end x under our feet) */
            nghttp2_session_consume_stream(x->h2->s, x->sid, b.len);
            h2_flush(x->h2);
        }
        gw_buf_fini(&b);
        if (x->cancelled) {
            x_free(x);
            return;
        }
    }
    if (x->h2_closed && !x->h2 && x->pend.len == 0 && !x->paused)
        x_end(x, x->h2_rc);
}

/* ---- API ---- */

SSL_CTX *
net_upstream_ssl_ctx_new(void)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

    if (!ctx)
        return NULL;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_default_verify_paths(ctx) != 1) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
    /* Upstreams often close idle connections without close_notify. OpenSSL 3 treats
     * that as a fatal error that also spoils the session for resumption; the HTTP
     * framing (length, chunks) is what tells a whole answer from a cut one, and a
     * close-delimited body was already accepted on a dirty close (libevent's
     * allow_dirty_shutdown), so nothing is lost by calling it a plain EOF. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
#endif
    /* Resumption: sessions are kept per upstream key (on_ssl_new_session), never in
     * the context's shared cache, so workers share nothing through it. */
    pthread_once(&up_ssl_once, up_ssl_idx_init);
    if (up_ssl_idx >= 0) {
        SSL_CTX_set_session_cache_mode(ctx,
                                       SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, on_ssl_new_session);
    }
    return ctx;
}

struct net_uppool *
net_uppool_new(struct event_base *base, struct evdns_base *dns, SSL_CTX *ssl_ctx)
{
    struct net_uppool *p = gw_calloc(1, sizeof(*p));
    struct timeval tv = {NET_UP_IDLE_SECS, 0};

    if (!p)
        return NULL;
    p->base = base;
    p->dns = dns;
    p->ssl_ctx = ssl_ctx;
    /* Every idle connection waits the same time: one O(1) queue instead of the heap. */
    p->idle_tv = event_base_init_common_timeout(base, &tv);
    if (!p->idle_tv) {
        gw_free(p);
        return NULL;
    }
    return p;
}

void
net_uppool_free(struct net_uppool *p)
{
    struct net_upkey *k;

    if (!p)
        return;
    p->freeing = true;
    while (p->live) {
        p->live->cancelled = true;
        x_free(p->live);
    }
    while ((k = p->keys)) {
        p->keys = k->next;
        while (k->idle_head)
            idle_drop(k->idle_head);
        while (k->h2s)
            h2_close(k->h2s);
        key_free(k);
    }
    x_cache_free(p);
    gw_free(p);
}

/* The Host header's value: the name (an IPv6 address in brackets), ":port" unless the
 * scheme's default. */
static enum gw_code
host_value(struct gw_buf *b, const char *host, uint16_t port, bool default_port)
{
    bool v6 = host_is_ipv6(host);

    if ((v6 && gw_buf_append(b, "[", 1) != GW_OK) || gw_buf_append_cstr(b, host) != GW_OK ||
        (v6 && gw_buf_append(b, "]", 1) != GW_OK))
        return GW_E_NOMEM;
    if (!default_port && (gw_buf_append(b, ":", 1) != GW_OK || gw_buf_append_u64(b, port) != GW_OK))
        return GW_E_NOMEM;
    return GW_OK;
}

enum gw_code
net_up_host_value(const struct gw_conf_provider *p, struct gw_buf *out)
{
    return host_value(out, p->host, p->port, p->port == (p->tls ? 443 : 80));
}

static enum gw_code
req_build(struct gw_buf *b, const struct net_up_req *req, const struct net_upkey *k)
{
    size_t need = 128 + strlen(req->method) + req->path.len + k->host_field.len + req->body.len;
    size_t i;
    enum gw_code rc;

    for (i = 0; i < req->n_hdrs; i++)
        need += req->hdrs[i].name.len + req->hdrs[i].value.len + 4;
    rc = gw_buf_reserve(b, need);
    if (rc != GW_OK)
        return rc;
    /* Appends only (room was reserved above): no printf on the per-request path. */
    gw_buf_append_cstr(b, req->method);
    gw_buf_append(b, " ", 1);
    if (req->path.len)
        gw_buf_append_str(b, req->path);
    else
        gw_buf_append(b, "/", 1);
    gw_buf_append(b, " HTTP/1.1\r\n", 11);
    gw_buf_append(b, k->host_field.data, k->host_field.len);
    gw_buf_append(b, "Content-Length: ", 16);
    rc = gw_buf_append_u64(b, req->body.len);
    if (rc == GW_OK)
        rc = gw_buf_append(b, "\r\n", 2);
    for (i = 0; rc == GW_OK && i < req->n_hdrs; i++) {
        rc = gw_buf_append_str(b, req->hdrs[i].name);
        if (rc == GW_OK)
            rc = gw_buf_append(b, ": ", 2);
        if (rc == GW_OK)
            rc = gw_buf_append_str(b, req->hdrs[i].value);
        if (rc == GW_OK)
            rc = gw_buf_append(b, "\r\n", 2);
    }
    if (rc == GW_OK)
        rc = gw_buf_append(b, "\r\n", 2);
    if (rc == GW_OK && req->body.len)
        rc = gw_buf_append(b, req->body.ptr, req->body.len);
    return rc;
}

struct net_upx *
net_up_send(struct net_uppool *p, const struct net_up_req *req, const struct net_up_cbs *cbs,
            void *arg)
{
    struct net_upx *x;
    struct net_upkey *k;
    struct net_upconn *c;

    k = key_get(p, req->prov);
    if (!k)
        return NULL;
    x = x_get(p);
    if (!x)
        return NULL;
    x->magic_ = NET_UPX_MAGIC;
    x->pool = p;
    x->key = k;
    x->cbs = *cbs;
    x->arg = arg;
    x->connect_ms = req->connect_timeout_ms;
    x->head_ms = req->head_timeout_ms;
    x->idle_ms = req->idle_timeout_ms;
    x->head_method = strcmp(req->method, "HEAD") == 0;
    net_h1resp_init(&x->rr, NET_UP_HEAD_MAX, NET_UP_HDRS_MAX, x->head_method);
    spare_buf_take(p, &x->req);
    if (req_build(&x->req, req, k) != GW_OK)
        goto fail;
    x->body_len = req->body.len;
    if (key_h2_maybe(k) && h2_hdrs_build(x, req, k) != GW_OK)
        goto fail;
    x->next = p->live;
    if (p->live)
        p->live->prev = x;
    p->live = x;

    x->in_send = true;
    if (key_h2_maybe(k) && h2_send(x)) {
        x->in_send = false;
        return x;
    }
    c = key_h2_maybe(k) ? NULL : idle_take(k);
    if (c) {
        c->x = x;
        x->conn = c;
        x->reused = true;
        x->phase = NET_UPX_HEAD;
        p->st.reuses++;
        if (!x_send_now(x))
            x_defer_fail(x, GW_E_UPSTREAM_CONNECT); /* out of memory */
        /* The request stays whole in x->retry for the keep-alive race (see the top):
         * moved, not copied; dropped at the first response byte. */
        x->retry = x->req;
        x->req = (struct gw_buf){0};
        x_arm_phase(x);
        x->in_send = false;
        return x;
    }
    if (!x_open(x)) {
        x->in_send = false;
        x_unlink(x);
        goto fail;
    }
    x->in_send = false;
    return x;

fail:
    net_deadline_stop(&x->dl);
    event_del(x->defer);
    x_bufs_fini(x);
    gw_free(x);
    return NULL;
}

void
net_upx_pause(struct net_upx *x)
{
    GW_CHECK_OBJ(x, NET_UPX_MAGIC);
    if (x->paused || x->ended)
        return;
    x->paused = true;
    if (x->phase == NET_UPX_CONNECTING)
        return;       /* applied when the connection is ready */
    if (x->h2_used) { /* DATA is held in x->pend; the stream's window stops the peer */
        x_arm_phase(x);
        return;
    }
    net_sockread_disable(&x->conn->rd);
    x_arm_phase(x); /* suspends the head or idle timeout */
}

void
net_upx_resume(struct net_upx *x)
{
    struct net_upconn *c;

    GW_CHECK_OBJ(x, NET_UPX_MAGIC);
    if (!x->paused || x->ended)
        return;
    x->paused = false;
    if (x->phase == NET_UPX_CONNECTING)
        return;
    if (x->h2_used) {
        x_arm_phase(x);
        if (x->pend.len > 0 || x->h2_closed)
            x_defer(x);
        return;
    }
    c = x->conn;
    if (!c->eof)
        net_sockread_enable(&c->rd);
    x_arm_phase(x);
    /* Bytes held back while paused (or a close seen meanwhile) are handled from the
     * loop, never inside this call. */
    if (evbuffer_get_length(bufferevent_get_input(c->bev)) > 0 || c->eof)
        x_defer(x);
}

void
net_upx_cancel(struct net_upx *x)
{
    GW_CHECK_OBJ(x, NET_UPX_MAGIC);
    if (x->in_cb) {
        /* Freed by whoever called the callback, once it returns. */
        x->cancelled = true;
        return;
    }
    x->cancelled = true;
    x_free(x);
}

bool
net_uppool_set_idle_ms(struct net_uppool *p, unsigned ms)
{
    struct timeval tv = {ms / 1000, (long)(ms % 1000) * 1000};
    const struct timeval *ctv = event_base_init_common_timeout(p->base, &tv);

    if (!ctv)
        return false;
    p->idle_tv = ctv;
    return true;
}

void
net_uppool_stats_get(const struct net_uppool *p, struct net_uppool_stats *out)
{
    *out = p->st;
}
