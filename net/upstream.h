/* SPDX-License-Identifier: MIT
 * net/upstream.h - the upstream HTTP client: one keep-alive connection pool per worker
 * and upstream (host, port, TLS, trust, proxy, http2 mode), HTTP/1.1 request/response
 * exchanges with content-length, chunked and close-delimited bodies, or HTTP/2 streams
 * multiplexed on one connection (providers[].http2), TLS with verification and SNI,
 * HTTP CONNECT tunnels through a proxy.
 * Owns:    the pool owns its idle connections; an exchange owns its connection until it
 *          ends (back to the pool when reusable, closed otherwise).
 * Threads: the worker that owns the pool's event_base; never blocks.
 * See:     net/upstream.c, docs/ARCHITECTURE.md (net)
 */
#ifndef GW_NET_UPSTREAM_H
#define GW_NET_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/event.h>
#include <openssl/ssl.h>

#include "core/codes.h"
#include "core/conf.h"
#include "core/str.h"

struct evdns_base;
struct net_uppool;
struct net_upx; /* one request/response exchange */

struct net_hdr {
    struct gw_str name;
    struct gw_str value;
};

struct net_up_req {
    const struct gw_conf_provider *prov; /* host, port, tls, proxy_*, tls_ctx; borrowed
                                            for the call only */
    const char *method;                  /* "POST", "GET" */
    struct gw_str path;                  /* origin-form, prefix already applied */
    const struct net_hdr *hdrs;          /* extra headers; Host, Content-Length and
                                            Connection are written by the client */
    size_t n_hdrs;
    struct gw_str body;          /* copied before net_up_send returns */
    unsigned connect_timeout_ms; /* TCP + TLS */
    unsigned head_timeout_ms;    /* request sent -> response head complete */
    unsigned idle_timeout_ms;    /* silence while reading the body */
};

/* Appends the Host header value a request to <p> carries (what a signature such as
 * SigV4 must cover): host, in brackets when IPv6, and ":port" unless the default. */
enum gw_code net_up_host_value(const struct gw_conf_provider *p, struct gw_buf *out);

struct net_up_cbs {
    /* The response head. <hdrs> valid during the call only; names as the upstream sent
     * them (lower case over HTTP/2, whose pseudo-headers are not among them). */
    void (*on_head)(void *arg, int status, const struct net_hdr *hdrs, size_t n_hdrs);
    /* Decoded body bytes (chunked framing removed), valid during the call only. */
    void (*on_body)(void *arg, const char *data, size_t len);
    /* The exchange is over: GW_OK when the whole body arrived; otherwise
     * GW_E_UPSTREAM_CONNECT, _PROXY (the CONNECT proxy refused the tunnel or answered
     * garbage), _TLS, _TLS_VERIFY (the certificate was refused), _TIMEOUT, _DROPPED or
     * _PROTOCOL. Called exactly once
     * unless net_upx_cancel was called first; the exchange is freed after it returns. */
    void (*on_end)(void *arg, enum gw_code rc);
    /* May be NULL. After the on_body calls of one read from the upstream (over HTTP/1.1
     * all the chunks the read held; over HTTP/2 all the stream's DATA frames it held),
     * unless the exchange ended or was cancelled meanwhile: what they gave may be written
     * to the client now, in one write rather than one per chunk. */
    void (*on_body_read)(void *arg);
};

/* A pool for one worker. <ssl_ctx> is used for https upstreams (verification and the
 * system CA bundle already set up by the caller, see net_upstream_ssl_ctx_new), unless
 * the provider brings its own (tls_ctx, net/egress.h). A provider with a proxy_host is
 * reached through an HTTP CONNECT tunnel; pool keys include the context and the proxy,
 * so tunnels, direct connections and differently trusted ones are never mixed. */
struct net_uppool *net_uppool_new(struct event_base *base, struct evdns_base *dns,
                                  SSL_CTX *ssl_ctx);
/* Closes every connection, idle or busy (busy exchanges get no more callbacks). */
void net_uppool_free(struct net_uppool *p);

/* A client SSL_CTX: TLS 1.2+, peer verification on, the system CA bundle. NULL on failure. */
SSL_CTX *net_upstream_ssl_ctx_new(void);

/* Starts an exchange: reuses an idle connection to the same upstream or opens one.
 * Callbacks never run inside this call. Returns NULL only when out of memory. */
struct net_upx *net_up_send(struct net_uppool *p, const struct net_up_req *req,
                            const struct net_up_cbs *cbs, void *arg);

/* Backpressure: stop / resume reading the response body (a slow client). */
void net_upx_pause(struct net_upx *x);
void net_upx_resume(struct net_upx *x);

/* Ends the exchange now: the connection is closed (never pooled), no callback follows.
 * Safe inside any callback of <x>. */
void net_upx_cancel(struct net_upx *x);

struct net_uppool_stats {
    unsigned long connects;   /* connections opened */
    unsigned long reuses;     /* exchanges served by an idle connection */
    unsigned long idle;       /* idle connections now */
    unsigned long h2_conns;   /* connections that spoke HTTP/2 */
    unsigned long h2_streams; /* exchanges sent as HTTP/2 streams */
};
void net_uppool_stats_get(const struct net_uppool *p, struct net_uppool_stats *out);

#endif
