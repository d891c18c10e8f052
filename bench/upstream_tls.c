/* SPDX-License-Identifier: MIT
 * bench/upstream_tls.c - TLS on the listener of `gwbench upstream` (--tls-cert,
 * --tls-key, --tls-alpn): every accepted connection does a TLS handshake (OpenSSL,
 * TLS 1.2 and 1.3) whose ALPN offers h2 and http/1.1 (or what --tls-alpn keeps), then
 * the cleartext is relayed over a socketpair to the server code that plain TCP uses:
 * ALPN h2 to bench/upstream_h2.c (bench_up_h2_take), http/1.1 or nothing to an ordinary
 * HTTP/1.1 bench connection. The plain path never comes here, so its cost is unchanged;
 * a TLS connection costs one more hop (the relay), which a test upstream can afford.
 * A client that reads slowly stops the relay reading the bench side (TLS_OUT_HIGH), so
 * the bench connection's own queue holds the rest, as on plain TCP.
 * Owns:    the SSL_CTX (process lifetime) and the relays (freed when either side ends).
 * Threads: main loads the certificate before the workers start; a relay lives on the
 *          worker that accepted it; the counters are atomics.
 * See:     bench/upstream.c (on_accept), bench/upstream_h2.c, docs/gwbench.md
 */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "bench/upstream-priv.h"
#include "core/alloc.h"

#define TLS_ALPN_MAX 32           /* "h2,http/1.1" on the wire is 12 bytes */
#define TLS_OUT_HIGH (256u << 10) /* bytes queued for the client that stop the relay */
#define TLS_OUT_LOW (64u << 10)   /* ... until they are down to these */

bool bench_up_tls_on;
static SSL_CTX *tls_ctx;

/* The ALPN protocols we accept, in our order of preference, in wire format. */
static unsigned char alpn_wire[TLS_ALPN_MAX];
static unsigned alpn_len;

/* /_bench/stats: handshakes done and failed, and what ALPN chose for the done ones. */
static atomic_uint_fast64_t tls_conns, tls_failed, tls_h2, tls_h1, tls_none;

/* One TLS connection: the client's side (TLS) and our end of the socketpair whose
 * other end the bench server code reads as a plain connection. */
struct tls_relay {
    struct bench_up_thread *t;
    struct bufferevent *outer; /* TLS with the client */
    struct bufferevent *inner; /* cleartext to the bench connection; NULL before/after */
    bool handshaken;
    bool inner_gone; /* the bench side closed: send what is left, then close */
};

void
bench_up_tls_stats(struct gw_buf *b)
{
    (void)gw_buf_printf(
        b,
        ",\"tls_connections\":%llu,\"tls_handshake_failures\":%llu,"
        "\"tls_alpn_h2\":%llu,\"tls_alpn_http1\":%llu,\"tls_alpn_none\":%llu",
        (unsigned long long)atomic_load(&tls_conns), (unsigned long long)atomic_load(&tls_failed),
        (unsigned long long)atomic_load(&tls_h2), (unsigned long long)atomic_load(&tls_h1),
        (unsigned long long)atomic_load(&tls_none));
}

/* Parses --tls-alpn, "h2,http/1.1" and the like, into the wire format. */
static bool
parse_alpn(const char *s)
{
    alpn_len = 0;
    while (*s) {
        size_t n = strcspn(s, ",");

        if (!((n == 2 && memcmp(s, "h2", 2) == 0) || (n == 8 && memcmp(s, "http/1.1", 8) == 0)) ||
            alpn_len + 1 + n > sizeof(alpn_wire))
            return false;
        alpn_wire[alpn_len++] = (unsigned char)n;
        memcpy(alpn_wire + alpn_len, s, n);
        alpn_len += (unsigned)n;
        s += n;
        if (*s == ',' && *++s == '\0')
            return false; /* a trailing comma */
    }
    return alpn_len > 0;
}

/* Our first protocol that the client offers; none in common: no ALPN (HTTP/1.1). */
static int
on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
        unsigned inlen, void *arg)
{
    unsigned char *sel;

    (void)ssl;
    (void)arg;
    if (SSL_select_next_proto(&sel, outlen, alpn_wire, alpn_len, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

static void
tls_error(const char *what, const char *file)
{
    char e[256];

    ERR_error_string_n(ERR_get_error(), e, sizeof(e));
    fprintf(stderr, "gwbench upstream: %s %s: %s\n", what, file, e);
}

bool
bench_up_tls_init(const char *cert, const char *key, const char *alpn)
{
    SSL_CTX *ctx;

    if (!parse_alpn(alpn ? alpn : "h2,http/1.1")) {
        fprintf(stderr,
                "gwbench upstream: --tls-alpn wants h2,http/1.1 | http/1.1 | h2, got '%s'\n", alpn);
        return false;
    }
    ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION)) {
        fprintf(stderr, "gwbench upstream: cannot make a TLS context\n");
        SSL_CTX_free(ctx);
        return false;
    }
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        tls_error("cannot load the certificate chain (PEM)", cert);
        SSL_CTX_free(ctx);
        return false;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        tls_error("cannot load the private key (PEM) of the certificate", key);
        SSL_CTX_free(ctx);
        return false;
    }
    SSL_CTX_set_alpn_select_cb(ctx, on_alpn, NULL);
    tls_ctx = ctx;
    bench_up_tls_on = true;
    return true;
}

static void
relay_free(struct tls_relay *r)
{
    if (r->inner)
        bufferevent_free(r->inner); /* closes our end: the bench side sees the peer go */
    bufferevent_free(r->outer);     /* frees the SSL and closes the socket */
    gw_free(r);
}

/* The bench side is done and all of it was sent: close_notify, then close. */
static void
relay_end(struct tls_relay *r)
{
    SSL *ssl = bufferevent_openssl_get_ssl(r->outer);

    if (ssl)
        (void)SSL_shutdown(ssl); /* nothing is queued: the alert goes out alone */
    relay_free(r);
}

static void
on_inner_read(struct bufferevent *bev, void *arg)
{
    struct tls_relay *r = arg;
    struct evbuffer *out = bufferevent_get_output(r->outer);

    evbuffer_add_buffer(out, bufferevent_get_input(bev));
    if (evbuffer_get_length(out) > TLS_OUT_HIGH)
        bufferevent_disable(bev, EV_READ); /* on_outer_write resumes it */
}

static void
on_inner_event(struct bufferevent *bev, short what, void *arg)
{
    struct tls_relay *r = arg;

    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    on_inner_read(bev, r);
    bufferevent_free(r->inner);
    r->inner = NULL;
    r->inner_gone = true;
    if (evbuffer_get_length(bufferevent_get_output(r->outer)) == 0)
        relay_end(r);
}

static void
on_outer_read(struct bufferevent *bev, void *arg)
{
    struct tls_relay *r = arg;

    if (r->inner)
        evbuffer_add_buffer(bufferevent_get_output(r->inner), bufferevent_get_input(bev));
    else if (r->inner_gone)
        evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
}

/* Called whenever a write left at most TLS_OUT_LOW bytes queued. */
static void
on_outer_write(struct bufferevent *bev, void *arg)
{
    struct tls_relay *r = arg;

    if (r->inner)
        bufferevent_enable(r->inner, EV_READ);
    else if (r->inner_gone && evbuffer_get_length(bufferevent_get_output(bev)) == 0)
        relay_end(r);
}

/* The handshake is done: count what ALPN chose and hand the cleartext to the server
 * code over a socketpair. false when that failed (the relay is then to be freed). */
static bool
relay_start(struct tls_relay *r)
{
    struct bench_up_thread *t = r->t;
    SSL *ssl = bufferevent_openssl_get_ssl(r->outer);
    const unsigned char *p = NULL;
    unsigned n = 0;
    bool h2;
    int sv[2];

    SSL_get0_alpn_selected(ssl, &p, &n);
    h2 = n == 2 && memcmp(p, "h2", 2) == 0;
    atomic_fetch_add(&tls_conns, 1);
    atomic_fetch_add(h2 ? &tls_h2 : n ? &tls_h1 : &tls_none, 1);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        return false;
    r->inner = bufferevent_socket_new(t->base, sv[1], BEV_OPT_CLOSE_ON_FREE);
    if (!r->inner) {
        close(sv[0]);
        close(sv[1]);
        return false;
    }
    /* a failing bench_up_conn_open closes sv[0]; a failing bench_up_h2_take leaves it */
    if (h2 ? !bench_up_h2_take(t, sv[0], "", 0) : !bench_up_conn_open(t, sv[0], false)) {
        if (h2)
            close(sv[0]);
        return false;
    }
    bufferevent_setcb(r->inner, on_inner_read, NULL, on_inner_event, r);
    bufferevent_enable(r->inner, EV_READ | EV_WRITE);
    on_outer_read(r->outer, r); /* what came with the end of the handshake */
    return true;
}

static void
on_outer_event(struct bufferevent *bev, short what, void *arg)
{
    struct tls_relay *r = arg;

    (void)bev;
    if (what & BEV_EVENT_CONNECTED) {
        r->handshaken = true;
        if (!relay_start(r))
            relay_free(r);
        return;
    }
    if (!(what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)))
        return;
    if (!r->handshaken)
        atomic_fetch_add(&tls_failed, 1);
    relay_free(r); /* the client went: so does the bench side */
}

void
bench_up_tls_take(struct bench_up_thread *t, int fd)
{
    struct tls_relay *r = gw_calloc(1, sizeof(*r));
    SSL *ssl = r ? SSL_new(tls_ctx) : NULL;

    if (!ssl) {
        gw_free(r);
        close(fd);
        return;
    }
    r->t = t;
    r->outer = bufferevent_openssl_socket_new(t->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                              BEV_OPT_CLOSE_ON_FREE);
    if (!r->outer) { /* the SSL and fd are ours again */
        SSL_free(ssl);
        close(fd);
        gw_free(r);
        return;
    }
    /* a client that closes without close_notify has still ended cleanly for us */
    bufferevent_openssl_set_allow_dirty_shutdown(r->outer, 1);
    bufferevent_setwatermark(r->outer, EV_WRITE, TLS_OUT_LOW, 0);
    bufferevent_setcb(r->outer, on_outer_read, on_outer_write, on_outer_event, r);
    bufferevent_enable(r->outer, EV_READ | EV_WRITE);
}
