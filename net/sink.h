/* SPDX-License-Identifier: MIT
 * net/sink.h - the sink (DESIGN.md 1): how the request pipeline answers a client without
 * writing protocol bytes. Four calls: head (status and headers), data, end, abort. The
 * protocol front end implements them: net/http1.c (status line, header block,
 * Content-Length or chunked framing, Connection: close), net/http2.c (HTTP/2 streams),
 * net/ws.c (WebSocket turns: nothing for the head, each SSE event's data one text
 * message, a refusal one response.failed event). The pipeline only ever builds header
 * pairs and body bytes (the answer in the client's API shape, dialects/).
 * Owns:    nothing; a sink borrows its front end's object (ctx).
 * Threads: the owning worker only.
 * See:     net/http1.c (net_conn_sink), net/pipeline.c
 */
#ifndef GW_NET_SINK_H
#define GW_NET_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/str.h"
#include "net/upstream.h" /* struct net_hdr */

/* head()'s <length> for a body sent in pieces until end() (HTTP/1.1: chunked). */
#define NET_SINK_STREAMED SIZE_MAX

struct net_sink;

struct net_sink_ops {
    /* The answer's <status> and header pairs (the front end adds its framing headers:
     * Content-Length, Transfer-Encoding, Connection). <length>: the body's length, or
     * NET_SINK_STREAMED. Called once, first. */
    void (*head)(struct net_sink *k, int status, const struct net_hdr *hdrs, size_t n_hdrs,
                 size_t length);
    /* Body bytes (the front end copies or sends them before returning). */
    void (*data)(struct net_sink *k, const char *p, size_t n);
    /* The body is complete. */
    void (*end)(struct net_sink *k);
    /* The answer cannot be completed (<code> says why): the front end ends it the way
     * its protocol marks a broken answer (HTTP/1.1 chunked: no last chunk, and the
     * connection closes). */
    void (*abort)(struct net_sink *k, enum gw_code code);
    /* Bytes written and not yet taken by the client: backpressure. */
    size_t (*queued)(const struct net_sink *k);
};

struct net_sink {
    const struct net_sink_ops *ops;
    void *ctx; /* the front end's object (HTTP/1.1: struct net_conn) */
};

static inline void
net_sink_head(struct net_sink *k, int status, const struct net_hdr *hdrs, size_t n_hdrs,
              size_t length)
{
    k->ops->head(k, status, hdrs, n_hdrs, length);
}

static inline void
net_sink_data(struct net_sink *k, const char *p, size_t n)
{
    if (n)
        k->ops->data(k, p, n);
}

static inline void
net_sink_end(struct net_sink *k)
{
    k->ops->end(k);
}

static inline void
net_sink_abort(struct net_sink *k, enum gw_code code)
{
    k->ops->abort(k, code);
}

static inline size_t
net_sink_queued(const struct net_sink *k)
{
    return k->ops->queued(k);
}

#endif
