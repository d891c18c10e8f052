/* SPDX-License-Identifier: MIT
 * net/net-priv.h - the data plane's objects, shared by net/ files and net unit tests.
 *
 *   net_worker -> net_conn (client connection, HTTP/1.1)
 *                  -> net_stream (one exchange: the request pipeline's state)
 *                  or, speaking HTTP/2 (net/http2.c): -> net_h2 (its nghttp2 session)
 *                       -> net_h2s (one stream, with a request net_conn of its own
 *                          that is in no list: the pipeline reads its request there)
 *                            -> net_stream
 *                  or, upgraded to a WebSocket (net/ws.c): -> net_ws (wslay glue)
 *                       -> net_ws_turn (the running response.create, with a request
 *                          net_conn of its own, like an HTTP/2 stream) -> net_stream
 *                       -> net_upx (one try at an upstream, net/upstream.h)
 *              -> net_uppool (upstream connections of this worker)
 *
 * Owns:    a worker owns its conns; a conn owns its stream; a stream owns its upx.
 *          When a conn dies first it clears stream->conn (the stream may finish its
 *          upstream bookkeeping and then frees itself).
 * Threads: everything here lives on one worker's event_base.
 */
#ifndef GW_NET_NET_PRIV_H
#define GW_NET_NET_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "core/budget.h"
#include "core/conf.h"
#include "core/limits.h"
#include "core/quota.h"
#include "core/row-t.h" /* GW_NAME_MAX */
#include "core/snap.h"
#include "core/str.h"
#include "dialects/sigv4.h"
#include "net/deadline.h"
#include "net/endpoint.h"
#include "net/sockread.h"
#include "net/h1req.h"

#define NET_MAX_LISTEN 8
#define NET_MAX_HEADERS_HARD 256
#define NET_KEY_CACHE_MAX 256
#define NET_CONN_MAGIC 0x636f6e6eu
#define NET_STREAM_MAGIC 0x7374726du

struct store;
struct gw_sticky;

#define NET_SETTLE_MAX 64 /* settlements a worker keeps for its turn's end; more apply all */

/* The settlements of the requests a worker ended in this loop turn (net/settle.c):
 * applied together at its end, one lock per key and per quota set. Until then every
 * byte for a client waits (net_conn's cork), so that a client that has read its answer
 * finds the limits settled. */
struct net_settles {
    struct gw_limit_settlement lim[NET_SETTLE_MAX];
    struct {
        uint64_t conn;
        char req[GW_ROW_ID_LEN + 1];
    } who[NET_SETTLE_MAX]; /* lim[i]'s request: its alerts' context */
    unsigned n_lim;
    struct gw_quota_settlement quota[NET_SETTLE_MAX];
    unsigned n_quota;
    struct net_conn *corked; /* connections whose bytes wait (net_conn.cork) */
    /* The rows of the turn's finished requests, handed to the store after the bytes (so
     * that their encoding is not on the answers' path), and their memory, kept for the
     * next streams (net_settle_spare_row). */
    struct gw_row *rows[NET_SETTLE_MAX], *spare[NET_SETTLE_MAX];
    unsigned n_rows, n_spare;
};

struct net_stream;
struct net_probe;

struct net_worker {
    unsigned id;
    pthread_t thread;
    struct event_base *base;
    struct evdns_base *dns;
    struct net_uppool *pool;
    struct gw_thread gt; /* epoch record of this thread */
    struct store *store;
    struct gw_sticky *sticky; /* shared conversation table (net/deps.h) */
    int fds[NET_MAX_LISTEN];  /* listening sockets handed over by main */
    size_t n_fds;
    struct evconnlistener *listeners[NET_MAX_LISTEN];
    unsigned tls_fds; /* bit i: fds[i] is a TLS listener (server.tls) */
    void *tls_ctx0;   /* SSL_CTX at start: TLS listeners use it if a reload drops server.tls */
    /* The worker's base has no lock (EVENT_BASE_FLAG_NOLOCK: libevent's lock was a dozen
     * lock/unlock pairs a request); another thread reaches the worker through its
     * mailbox: an eventfd the worker reads (mail_ev) and a flag that saves the write
     * while a wake-up is already on its way (net_worker_mail). */
    int mail_fd;
    struct event *mail_ev;
    unsigned mail_pending;     /* 1: the eventfd was written and not yet read (__atomic) */
    struct event *drain_timer; /* drain deadline */
    struct event *drain_tick;  /* while draining: leave once no connection is left */
    unsigned drain_requested;  /* set by main (ck_pr) before its mail, read on the worker */
    bool draining;
    struct net_workers *ws;       /* the array this worker belongs to */
    struct event *grant_ev;       /* made active by the worker's own grants (mail: others') */
    struct event *accept_backoff; /* out of descriptors: accepting again after it */
    struct net_stream *grants;    /* MPSC stack of streams granted a slot (__atomic) */
    struct net_conn *conns;       /* every client connection of this worker */
    unsigned n_conns;
    uint64_t next_conn_id;
    uint64_t rng[2];                /* xorshift128+ for request ids */
    struct net_probe *probe;        /* worker 0: probes of cooling credentials (net/probe.h) */
    struct dl_sigv4_cache aws_keys; /* Bedrock signing keys of the day; wiped at the end */
    /* Freed streams kept for the next requests (net/pipeline.c), with their answer
     * buffers' memory: no allocation of the 5.6 KB stream per request after warm-up. */
    struct net_stream *stream_cache;
    unsigned n_stream_cache;
    struct net_settles settles;
};

enum net_conn_state {
    NET_CONN_IDLE = 0, /* waiting for the first byte of a request */
    NET_CONN_HEAD,     /* reading a request head */
    NET_CONN_BODY,     /* reading a request body */
    NET_CONN_BUSY,     /* the request is being answered */
};

#define NET_CONN_F_CLOSE_AFTER 0x1u /* close once the current response is written */
#define NET_CONN_F_CLOSING 0x2u     /* flushing, then linger, then free */
#define NET_CONN_F_LINGER 0x4u      /* half-closed, discarding input until EOF or timeout */
#define NET_CONN_F_TLS 0x8u         /* bev is TLS (net/tls.c): no direct socket writes */
#define NET_CONN_F_FRESH 0x10u      /* no byte read yet: the HTTP/2 preface may come */

struct net_conn {
    uint32_t magic_;
    struct net_worker *w;
    struct net_conn *prev, *next; /* in w->conns */
    uint64_t id;
    struct bufferevent *bev;
    struct net_sockread rd; /* reads bev's socket (plain: without FIONREAD) */
    enum net_conn_state state;
    unsigned flags;
    struct net_deadline dl; /* header, body, idle and linger deadlines (HTTP/1.1) */
    unsigned header_timeout_secs, body_timeout_secs, idle_timeout_secs;
    /* the request being read (method, url, headers, body; net/h1req.h) */
    struct net_h1req rq;
    struct net_target tgt; /* its endpoint: set by net_pipeline_head, read by _start */
    struct gw_conf *conf;  /* reference taken by the head check, handed to the stream */
    const struct gw_conf_client *client; /* the key's client the head check found in conf */
    size_t body_held;                    /* bytes of rq.body counted in net_body_budget */
    size_t linger_left;                  /* bytes a lingering close still discards before closing */
    struct net_stream *stream;           /* the exchange being answered, or NULL */
    /* the answer being written through the sink (net/sink.h): its head waits in
     * out_head until the first body bytes, so both leave in one write */
    struct gw_buf out_head;
    bool out_head_pending;
    bool out_chunked;
    /* The last gateway key seen on this connection and its SHA-256: clients send the
     * same key on every request of a keep-alive connection. Wiped on free. */
    unsigned char key_seen[NET_KEY_CACHE_MAX];
    uint16_t key_seen_len; /* 0: nothing cached */
    unsigned char key_seen_digest[32];
    struct net_h2 *h2;       /* this connection speaks HTTP/2 (net/http2.c) */
    struct net_h2s *h2s;     /* this is the request of an HTTP/2 stream (not a connection) */
    struct net_ws *ws;       /* this connection speaks WebSocket (net/ws.c) */
    struct net_ws_turn *wst; /* this is the request of a WebSocket turn (not a connection) */
    /* Bytes written while the worker held settlements (net/settle.c): sent at the turn's
     * end, after them; in w->settles.corked while it holds any. */
    struct gw_buf cork;
    struct net_conn *cork_prev, *cork_next;
    bool corked;
};

/* ---- settle.c: settlements applied once per loop turn ---- */

/* Keeps key-limit reservation <res> of key <k> to be settled at the turn's end (as
 * gw_keylimits_settle with usage <u>, the row's, and its alerts); <res> becomes inactive
 * now. <conn_id>/<req_id>: the request's, for the alerts. */
void net_settle_limits(struct net_worker *w, struct gw_keylimits *k,
                       struct gw_limit_reservation *res, const struct gw_usage *u,
                       int64_t cost_micros, bool reached_upstream, uint64_t conn_id,
                       const char *req_id);
/* The same for a quota lease of <set> (gw_quota_settle; nothing when <set> is NULL or
 * <lease> inactive); <lease> becomes inactive now. */
void net_settle_quota(struct net_worker *w, struct gw_quota_set *set, struct gw_quota_lease *lease,
                      uint64_t real_tokens, bool sent);
/* True while <w> holds settlements not yet applied. */
static inline bool
net_settle_pending(const struct net_worker *w)
{
    return w->settles.n_lim || w->settles.n_quota;
}
/* Applies what <w> holds (the bytes stay corked): before anything another request may
 * see is done, a slot given to a waiter, frames sent on HTTP/2. */
void net_settle_apply(struct net_worker *w);
/* Keeps finished request's row <row> (the stream's memory, now the worker's) to be
 * handed to the store at the turn's end; false when <w> holds no settlement (nothing
 * waits: hand it now) or already as many rows as it keeps. */
bool net_settle_row(struct net_worker *w, struct gw_row *row);
/* A row's memory the worker kept after handing its row to the store, or NULL. */
struct gw_row *net_settle_spare_row(struct net_worker *w);
/* The loop turn's end: applies what <w> holds, sends every corked connection's bytes,
 * then hands the kept rows to the store. Also at the worker's end. */
void net_settle_turn_end(struct net_worker *w);
/* Sends <c>'s corked bytes now, the worker's settlements applied first (before a close,
 * a half-close or a free: nothing may stay behind). */
void net_conn_uncork(struct net_conn *c);

/* ---- pipeline.c ---- */

/* Frees the streams <w> keeps for reuse (its stream cache): when the worker ends. */
void net_stream_cache_free(struct net_worker *w);

/* ---- http1.c: the server side of HTTP/1.1 ---- */

/* Accept callback body: wraps <fd> in a connection owned by <w>. */
void net_conn_accept(struct net_worker *w, int fd);
/* The same for a TLS listener's <fd>: the handshake first (net/tls.h), with the server
 * context of the live config (or w->tls_ctx0), then HTTP/1.1 as on a plain one. */
void net_conn_accept_tls(struct net_worker *w, int fd);
/* The sink (net/sink.h) that answers the current request of <c> in HTTP/1.1. */
struct net_sink;
void net_conn_sink(struct net_conn *c, struct net_sink *out);
/* Writes bytes of the response (already framed by the caller): straight to the socket
 * when nothing is queued, the rest through the bufferevent. */
void net_conn_write(struct net_conn *c, const void *data, size_t len);
void net_conn_writev(struct net_conn *c, const struct iovec *iov, int n);
/* Bytes waiting in the output buffer (backpressure). */
size_t net_conn_output_len(const struct net_conn *c);
/* The current exchange is answered completely: parse the next request or close. */
void net_conn_response_done(struct net_conn *c);
/* A header value of the current request by (case-insensitive) name; false when absent. */
bool net_conn_header(const struct net_conn *c, struct gw_str name, struct gw_str *value);
/* The i-th header of the current request. */
void net_conn_header_at(const struct net_conn *c, unsigned i, struct gw_str *name,
                        struct gw_str *value);
/* The request bodies being read or held at once, every worker together
 * (server.max_buffered_body_mb; core/budget.h). */
extern struct gw_budget net_body_budget;
/* Gives back to net_body_budget the <*held> bytes a body held; sets *held to 0. */
void net_body_release(size_t *held);
/* server.max_connections when the config says 0 (main, from the descriptor limit). */
void net_conns_set_auto_max(unsigned max);
/* The connection limit in force with <conf>; 0 = none. */
unsigned net_conns_max(const struct gw_conf *conf);
/* Client connections open now, every worker together. */
unsigned net_conns_open(void);
/* Closes every idle connection and marks busy ones to close after their answer. */
void net_conns_drain(struct net_worker *w);
/* Frees every connection now (end of the worker). */
void net_conns_free_all(struct net_worker *w);
/* Closes <c> now: its streams are cancelled, its socket closed, <c> freed. */
void net_conn_close(struct net_conn *c);

/* ---- http2.c: the server side of HTTP/2 ---- */

/* The entry point of HTTP/2 on an accepted connection <c> (its bufferevent, whose input
 * buffer holds what was read so far: the client preface first, or nothing yet; h2c with
 * prior knowledge from http1.c, TLS with ALPN h2 from the TLS listener): from here on
 * the connection is an nghttp2 server session. <c> stays in w->conns, counted as one
 * connection; net_conn_close frees the session with it. */
void net_h2_start(struct net_conn *c);
/* 1: <p> (<n> bytes) is the HTTP/2 client preface, 0: a prefix of it (wait for more),
 * -1: not it. */
int net_h2_preface(const char *p, size_t n);
/* Called by http1.c for an HTTP/2 connection or stream request: */
void net_h2_free(struct net_h2 *h);    /* from net_conn_close */
void net_h2_drain(struct net_conn *c); /* GOAWAY, close once the streams ended */
void net_h2_sink(struct net_conn *rc, struct net_sink *out); /* the stream's sink */
void net_h2_response_done(struct net_conn *rc);              /* the pipeline is done with it */

/* ---- ws.c: the Responses API's WebSocket mode ---- */

/* The request head in <c> asks for the Responses WebSocket mode (GET /v1/responses with
 * Upgrade: websocket). */
bool net_ws_wanted(const struct net_conn *c);
/* Judges the upgrade (the gateway key as for POST /v1/responses, the handshake headers)
 * and on GW_OK answers 101 and takes the connection over (c->ws): its turns run through
 * the pipeline from then on. Else the refusal's code and a sentence in *<why>, for
 * http1.c to answer in HTTP before any upgrade. */
enum gw_code net_ws_upgrade(struct net_conn *c, const char **why);
/* Called by http1.c for a WebSocket connection or turn request: */
void net_ws_free(struct net_ws *ws);                         /* from net_conn_close */
void net_ws_drain(struct net_conn *c);                       /* close 1001 after the turn */
void net_ws_sink(struct net_conn *rc, struct net_sink *out); /* the turn's sink */
void net_ws_response_done(struct net_conn *rc);              /* the pipeline is done with it */
/* previous_response_id on a WebSocket turn <rc> (net/respstate.c): the response its
 * connection served last, when its id is <id>: its maker, shape and items. False when
 * <rc> is no turn or the id is another. */
struct gw_buf;
bool net_ws_recall(const struct net_conn *rc, struct gw_str id, char provider[GW_NAME_MAX + 1],
                   int *shape, struct gw_buf *items);
/* Remembers on <rc>'s connection the response <id> it just served (one a connection). */
void net_ws_remember(struct net_conn *rc, const char *id, const char *provider, int shape,
                     const char *items, size_t n);

/* Output above this pauses the upstream read; the write callback resumes it. */
#define NET_OUT_HIGH (256 * 1024)
#define NET_OUT_LOW (64 * 1024)

/* ---- pipeline.c: one exchange ---- */

/* The head of a request is in <c> (method, url, headers; no body byte read yet): GW_OK
 * to read its body, else the refusal's code with a sentence for the client in *<why>
 * (an unknown endpoint, a missing or invalid gateway key), answered before the body is
 * read. On GW_OK c->conf holds the snapshot the check used (a reference the request's
 * stream takes over; the conn releases it if it dies first). */
enum gw_code net_pipeline_head(struct net_conn *c, const char **why);
/* A complete request is in <c> (method, url, headers, body): answer it. */
void net_pipeline_start(struct net_conn *c);
/* The client connection is gone (or being freed): cancel upstream work, record, free. */
void net_stream_client_gone(struct net_stream *s);
/* The client's output buffer drained below NET_OUT_LOW. */
void net_stream_on_drain(struct net_stream *s);
/* A slot was granted to a waiting stream (core/slots.h grant fn): <ctx> is the worker
 * array; pushes the stream on its worker's grant stack and wakes that worker. Any
 * thread. */
struct gw_slots_wait;
struct net_workers;
void net_slots_granted(void *ctx, struct gw_slots_wait *g, unsigned index);
/* On the worker: a stream's grant arrived (from the grant stack). */
void net_stream_on_grant(struct net_stream *s);
/* The next stream on a grant stack (the link lives in the stream). */
struct net_stream *net_stream_grant_next(struct net_stream *s);
void net_stream_set_grant_next(struct net_stream *s, struct net_stream *next);
/* Writes a complete gateway refusal for <code> on <c> through its sink: x-gw-code, the
 * <extra> header pairs, the error body in the client's shape. <req_id> NULL: a new id. */
struct net_hdr;
void net_respond_error(struct net_conn *c, const char *req_id, enum gw_code code,
                       const char *message, const struct net_hdr *extra, size_t n_extra);
/* The stickiness key of a conversation (core/sticky.h) of <client>: from <session_id>
 * (a session header; empty when none), else from what the request identifies it by
 * (prompt_cache_key, else the system prompt and the first user message). The data
 * plane and the dry-run both use it. */
struct dl_openai_req;
uint64_t net_conversation_key(const char *client, struct gw_str session_id,
                              const struct dl_openai_req *r);
/* A fresh x-request-id (32 hex) into <out>: 12 of the wall clock's milliseconds, then 20
 * of the worker's generator, so that ids sort by the time they were made. */
void net_worker_request_id(struct net_worker *w, char out[33]);

#endif
