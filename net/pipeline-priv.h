/* SPDX-License-Identifier: MIT
 * net/pipeline-priv.h - the request pipeline's stream object and what its stage files
 * share: net/pipeline.c (the stream's life, the endpoint table), auth.c (gateway keys),
 * admit.c (key gate, key limits, waits for slots), attempt.c (candidates, hops,
 * failover), relay.c (upstream answers to the client through the sink), listing.c
 * (model listings). No other module includes it (check-deps).
 * Owns:    struct net_stream's layout.
 * Threads: the owning worker only.
 * See:     net/pipeline.c, docs/ARCHITECTURE.md
 */
#ifndef GW_NET_PIPELINE_PRIV_H
#define GW_NET_PIPELINE_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "core/limits.h"
#include "core/quota.h"
#include "core/quota_learn.h"
#include "core/route.h"
#include "core/row.h"
#include "core/slots.h"
#include "core/speed.h"
#include "core/sse.h"
#include "core/arena.h"
#include "dialects/bedrock.h"
#include "dialects/canon.h"
#include "dialects/openai.h"
#include "net/endpoint.h"
#include "net/net-priv.h"
#include "net/sink.h"
#include "net/upstream.h"

#define NET_MAX_FWD_HEADERS 64
#define NET_MAX_ERRBODY (64 * 1024)
#define NET_MAX_ANSWER (64u * 1024 * 1024)
/* The largest eventstream message a Bedrock stream may send (the SSE parser's cap). */
#define NET_MAX_ES_MESSAGE (8u * 1024 * 1024)
#define NET_ANSWER_MAX_HDRS 8
#define NET_QUOTA_HDRS 16 /* rate-limit headers of a hop kept for core/quota_learn.h */

/* One rate-limit header of a hop's answer (x-ratelimit-*, anthropic-ratelimit-*,
 * retry-after*), copied at its head for gw_quota_learn. */
struct net_quota_hdr {
    char name[64];
    char value[96];
};

struct net_stream {
    uint32_t magic_;
    struct net_worker *w;
    struct net_conn *conn; /* NULL once the client is gone */
    struct net_sink sink;  /* how the answer is written (net/sink.h; valid while conn is) */
    struct gw_conf *conf;  /* reference held for the whole exchange */
    char id[GW_ROW_ID_LEN + 1];
    uint64_t t0_us;
    const struct gw_conf_client *client;
    /* the client's API shape and request: a Chat body is read by the fast scanner
     * (dl_openai_req: the same-shape splice needs no more); any other shape, and a Chat
     * body about to be converted, is parsed into the canonical form in the arena */
    enum dl_shape client_shape;
    const struct dl_shape_ops *client_ops;
    struct net_target tgt;     /* the endpoint; its slices are valid while conn is */
    struct dl_openai_req *req; /* Chat clients */
    bool creq_ready;           /* creq (below) holds the canonical request */
    struct gw_str model;       /* the model the client asked for (a slice of its body) */
    uint64_t est_input;        /* estimated input tokens (DESIGN.md 18) */
    struct dl_dropped dropped; /* fields a conversion dropped (x-gw-dropped) */
    size_t body_held;          /* the body's bytes (body, below) in net_body_budget */
    size_t upbody_for;         /* upbody (below) is for candidate cands[upbody_for] */
    bool upbody_ready;         /* upbody holds that candidate's body */
    char unconvertible[160];   /* why a candidate's shape could not take it */
    size_t n_cands, cur;       /* cands (below) */
    int pick;                  /* the routing pick (tried even when paused) */
    uint64_t conv;             /* conversation key (core/sticky.h), 0 = none */
    bool within_turn;          /* the request carries tool results */
    char retry_after[40];      /* the hop's Retry-After / retry-after-ms values */
    char retry_after_ms[24];
    struct event *slow_timer;  /* next_on_slow_start: give up on a silent hop */
    struct event *speed_timer; /* min_speed: judge once a second */
    struct gw_speed *speed;    /* min_speed state while a hop streams */
    size_t speed_carry;        /* content bytes not yet counted as a token */
    uint64_t given_up_input;   /* estimated input of hops given up at slow start */
    /* admission (DESIGN.md 7): the key's permit, the current hop's upstream slot, and a
     * wait for either (core/slots.h; grants arrive through the worker's grant stack) */
    struct gw_slots *key_slot; /* held key permit, given back at the end */
    struct gw_slots *hop_slot; /* held upstream slot of the current hop */
    struct gw_slots_wait wait;
    enum { NET_WAIT_NONE, NET_WAIT_KEY, NET_WAIT_HOP } waiting;
    bool wait_gave_up;             /* cancel already called (deadline) and a grant won */
    unsigned wait_won;             /* ... on this candidate */
    bool zombie;                   /* finished, kept until its grant message arrives */
    bool settled;                  /* row closed, reservation settled, slots given back */
    struct net_stream *grant_next; /* link on the worker's grant stack */
    struct event *wait_timer;
    uint64_t wait_t0_us;               /* when the current wait started */
    uint64_t deadline_us;              /* slot_wait_secs, from the key gate on (0 = not set) */
    uint32_t hop_queued_ms;            /* waited before the next hop */
    bool reached_upstream;             /* some hop was sent */
    unsigned busy[GW_ROUTE_MAX];       /* candidates found full, in candidate order */
    bool busy_noted[GW_ROUTE_MAX];     /* a skipped:busy attempt is already on the row */
    bool context_skipped;              /* a candidate's context window was too small */
    struct gw_limit_reservation quota; /* the key's usage limits: what this request holds */
    uint64_t est_tokens;               /* ... reserving its input estimate ... */
    int64_t est_cost_micros;           /* ... at the first candidate's input price */
    struct event *limit_timer;         /* a rolling limit's wait */
    unsigned n_busy;
    /* credentials and quota (DESIGN.md 10, net/quota.h): the current hop's set, the
     * credential it sends (index in keys; -1 none) and its lease */
    struct gw_quota_set *qset;
    int qunit;
    struct gw_quota_lease qlease;
    uint64_t qkeep_ms;         /* the lease last marked alive (long streams) */
    bool quota_skipped;        /* some candidate was skipped for quota ... */
    bool nonquota_failed;      /* ... and some hop failed for another reason */
    uint64_t quota_retry_at;   /* the earliest moment a skipped candidate admits (ms) */
    struct event *quota_timer; /* waiting for it within the deadline */
    unsigned n_qhdrs;
    /* NET_QUOTA_HDRS of them, allocated at the first hop head that has one: 2.5 KB that
     * most answers never need, and the stream is zeroed per request */
    struct net_quota_hdr *qhdrs;
    struct net_upx *upx;
    int up_status;
    bool up_ok, up_sse, stream, wants_usage, headers_sent, paused;
    bool stream_error; /* the upstream sent an error event before content */
    bool up_bad;       /* the hop's answer is not the shape it claims (gw.upstream.protocol) */
    bool chunk_seen;   /* a data event of the hop parsed as a chunk (a JSON object) */
    bool up_failed;    /* the upstream sent an error event after content */
    int ev_err_status; /* the HTTP status the last error event maps to (0: unknown) */
    bool finish_seen;  /* the hop's stream carried its FINISH (a converted hop) */
    unsigned ev_n;     /* canonical events of the SSE event being read ... */
    enum dl_event_kind ev_last; /* ... and the kind of the last one */
    /* the hop's upstream shape; convert: it is not the client's, so its events go
     * through the hub (its parser -> canonical events -> the client shape's renderer) */
    enum dl_shape up_shape;
    const struct dl_shape_ops *up_ops;
    bool convert;
    struct gw_sse sse;
    /* a Bedrock hop's stream: binary eventstream messages instead of SSE (up_es) */
    struct dl_bedrock_es es;
    bool up_es;
    char up_errtype[64]; /* a Bedrock error answer's x-amzn-ErrorType, before any ':' */
    uint64_t t_hop_us, t_first_us;
    size_t content_bytes;
    struct gw_usage usage;
    bool usage_seen;
    enum gw_code fail_code; /* the last real failure */
    int fail_status;
    struct gw_row *row;
    struct gw_row *row_closed; /* settled, not yet handed to the store (net_stream_finish
                                * does, after the answer: off the answer's path) */
    /* Responses state (respstate.c) */
    struct gw_str prev_id;               /* previous_response_id, "" when none */
    bool prev_found;                     /* ... the gateway kept it: */
    enum dl_shape prev_shape;            /* the shape of the upstream that made it */
    char prev_provider[GW_NAME_MAX + 1]; /* ... and its provider */
    struct gw_buf prev_items;            /* its items (JSON array) */
    struct gw_buf xbody;                 /* the body expanded with them */
    bool resp_keep;                      /* this answer is to be kept */
    struct dl_answer resp_fold;          /* ... its events folded */
    /* ---- kept: buffers whose memory a freed stream keeps in its worker's cache
     * (pipeline.c stream_cache_put empties them; zeroed only when the stream is first
     * allocated), so a request does not allocate them again ---- */
    struct gw_buf body;     /* the client's body (taken from the conn) */
    struct gw_buf upbody;   /* what is sent upstream (to cands[upbody_for]) */
    struct gw_buf hop_path; /* the hop's upstream path, and its credential header */
    struct gw_buf hop_auth; /* (wiped once sent); both built by net_hop_send */
    struct gw_buf out;      /* held events, or the non-streamed answer */
    struct gw_buf rendered; /* a converted answer is rendered here, then swapped with out */
    struct gw_buf errbody;  /* a non-2xx upstream body (bounded, logged only) */
    struct gw_arena arena;  /* the request's arena (core/arena.h); reset, not freed, for
                             * the cache: its blocks serve the next request */
    struct gw_row *row_mem; /* what <row> points to while there is one: the stream's own,
                             * kept with it (the store copies it: store_row_submit) */
    /* ---- scratch: not zeroed when the stream is made (net_pipeline_start zeroes the
     * fields before the kept ones, NET_STREAM_ZEROED bytes); each is written before it
     * is read. Zeroing them showed in profiles (half of the stream's bytes, on every
     * request). ---- */
    struct net_stream *cache_next;            /* in its worker's stream_cache while it is there */
    struct gw_route_cand cands[GW_ROUTE_MAX]; /* in the order to try (core/route.h): the
                                               * first n_cands, written by gw_route_order */
    struct dl_parse_state pst;  /* the upstream shape's event parser: parse_init per hop */
    struct dl_render_state rst; /* the client shape's renderer: render_init per converted
                                 * hop, read only while convert */
    struct dl_request creq;     /* the canonical request: read only once creq_ready (every
                                 * request_parse clears it first) */
};

/* The bytes of a stream that start zeroed for each request: everything before the kept
 * buffers; and for a stream just allocated, everything before the scratch fields. */
#define NET_STREAM_ZEROED offsetof(struct net_stream, body)
#define NET_STREAM_ZEROED_NEW offsetof(struct net_stream, cache_next)

/* Retry-After, retry-after-ms and x-should-retry (DESIGN.md 18), as header pairs. */
struct net_retry_hdrs {
    struct net_hdr h[3];
    char secs[24], ms[24];
};

/* Milliseconds from <from_us> to <now_us> (monotonic), 0 when not after. */
static inline uint32_t
net_ms_since(uint64_t from_us, uint64_t now_us)
{
    return now_us > from_us ? (uint32_t)((now_us - from_us) / 1000) : 0;
}

/* The upstream callbacks of a hop (relay.c). */
extern const struct net_up_cbs net_relay_cbs;

/* ---- pipeline.c: the stream's life and the endpoints ---- */

void net_slot_give_back(struct net_stream *s, struct gw_slots **sp);
size_t net_retry_headers(struct net_retry_hdrs *r, uint64_t retry_ms, bool should_retry);
void net_stream_answer(struct net_stream *s, int status, const char *ctype, const char *body,
                       size_t len);
/* A gateway refusal on <k> in the client's <shape>: x-gw-code, <extra> pairs, the body
 * from the shape's error_render. */
void net_sink_refusal(struct net_sink *k, enum dl_shape shape, const char *req_id,
                      enum gw_code code, const char *message, const struct net_hdr *extra,
                      size_t n_extra);
/* A whole answer with <extra> header pairs besides content-type and x-request-id. */
void net_stream_answer_with(struct net_stream *s, int status, const char *ctype,
                            const struct net_hdr *extra, size_t n_extra, const char *body,
                            size_t len);
/* Reads the client's body in its shape (model, stream, estimate); GW_OK, or the refusal
 * is answered. */
enum gw_code net_stream_read_request(struct net_stream *s);
/* POST /v1/messages/count_tokens (count.c). */
void net_count_tokens(struct net_stream *s);
/* The API shape of <c>'s request, from its path and headers. */
enum dl_shape net_conn_shape(const struct net_conn *c);
/* x-gw-dropped for <s>'s answer: false when nothing was dropped. */
bool net_stream_dropped_header(struct net_stream *s, struct net_hdr *out);
void net_stream_free(struct net_stream *s);
/* The client's body moves from <c> to <s> (with its share of net_body_budget), and <c>
 * gets the stream's empty body buffer, whose memory a freed stream may have kept. */
void net_stream_take_body(struct net_stream *s, struct net_conn *c);
/* Emits the key_limit_alert events <s>'s key holds (the event stream and the log). */
void net_stream_emit_alerts(struct net_stream *s);
/* The same for key <k>, in context <ctx> (net/settle.c). */
struct gw_log_ctx;
void net_key_alerts_emit(struct gw_keylimits *k, const struct gw_log_ctx *ctx);
void net_stream_settle(struct net_stream *s, int status, enum gw_code code,
                       enum gw_outcome outcome);
void net_stream_finish(struct net_stream *s, int status, enum gw_code code,
                       enum gw_outcome outcome);
void net_stream_refuse_hdrs(struct net_stream *s, enum gw_code code, const char *message,
                            const struct net_hdr *extra, size_t n_extra, bool record);
void net_stream_refuse(struct net_stream *s, enum gw_code code, const char *message, bool record);

/* ---- auth.c: gateway keys ---- */

const struct gw_conf_client *net_auth_client(struct net_conn *c, const struct gw_conf *conf,
                                             enum gw_code *code, const char **why);

/* ---- admit.c: admission (DESIGN.md 7, 8) ---- */

void net_hop_wait(struct net_stream *s);
bool net_prov_has_slot_limit(const struct gw_conf_provider *p);
void net_busy_add(struct net_stream *s, unsigned idx);
int64_t net_stream_input_cost(const struct net_stream *s);
void net_limit_refuse(struct net_stream *s, const struct gw_limit_verdict *v, bool calendar);
void net_key_gate(struct net_stream *s);

/* ---- attempt.c: candidates, hops, failover (DESIGN.md 5, 6) ---- */

bool net_prov_spoken(const struct gw_conf_provider *p);
enum dl_shape net_prov_shape(const struct gw_conf_provider *p);
bool net_stream_json_array(const struct net_stream *s);
const struct gw_conf_provider *net_stream_prov(const struct net_stream *s);
struct gw_attempt *net_attempt_cur(struct net_stream *s);
void net_attempt_end(struct net_stream *s, enum gw_outcome outcome, int status, enum gw_code code);
void net_hop_count_failure(struct net_stream *s, int status, enum gw_code code);
void net_hop_timers_stop(struct net_stream *s);
void net_hop_failed(struct net_stream *s, int status, enum gw_code code);
/* The hop's credential answered 429/402/403 (core/quota.h): it cools, and the request goes
 * on to another credential of the same provider, then the next candidate. */
void net_hop_quota_failed(struct net_stream *s);
/* Settles the current hop's quota lease (<sent>: it may have reached the upstream; its
 * <tokens>); nothing when none is held. */
void net_hop_quota_settle(struct net_stream *s, uint64_t tokens, bool sent);
/* The hop answered (2xx, or a client error): its credential's ladder is cleared. */
void net_hop_quota_success(struct net_stream *s);
/* What the hop's rate-limit headers (and <body>) say, applied to its credential; <out>
 * (may be NULL) gets the facts. */
void net_hop_quota_learn(struct net_stream *s, struct gw_str body, struct gw_quota_facts *out);
struct gw_attempt *net_attempt_add(struct net_stream *s, const struct gw_route_cand *c,
                                   enum gw_outcome outcome);
void net_hop_send(struct net_stream *s, const struct gw_route_cand *c);
void net_hop_next(struct net_stream *s);
bool net_order_varies(const struct gw_conf *c, struct gw_str model);
void net_stream_conversation(struct net_stream *s);
void net_skip_paused(struct net_stream *s);
bool net_prov_full(void *arg, const struct gw_conf_provider *p);

/* ---- respstate.c: Responses state (DESIGN.md 11) ---- */
/* After a Responses body is parsed: what to keep, and previous_response_id looked up
 * (found: s->xbody and the canonical request expanded with its items). GW_OK, or a
 * refusal's code with <why>. */
enum gw_code net_resp_prepare(struct net_stream *s, struct gw_buf *why);
/* The provider a previous_response_id goes back to first, or NULL. */
const char *net_resp_sticky(const struct net_stream *s);
enum net_resp_body {
    NET_RESP_AS_SENT,      /* the client's body (no previous response, or its maker) */
    NET_RESP_EXPANDED,     /* s->xbody / the expanded canonical request */
    NET_RESP_UNCONVERTIBLE /* s->unconvertible says why */
};
enum net_resp_body net_resp_body_for(struct net_stream *s, const struct gw_conf_provider *p,
                                     enum dl_shape up);
/* A hop starts: what an earlier hop's answer folded is dropped (a hop that failed over
 * after its answer was read, say a 200 with an error body, must not be kept, nor mark
 * the kept conversation failed). */
void net_resp_hop(struct net_stream *s);
/* Folds a canonical event, or a whole upstream answer, of the hop being kept. The
 * latter is true when it read the answer whole (its usage, if any, is then the fold's:
 * s->resp_fold.usage_seen), false when nothing is kept or the answer did not parse. */
void net_resp_event(struct net_stream *s, const struct dl_event *ev);
bool net_resp_answer(struct net_stream *s, const char *body, size_t len);
/* The hop answered well: keep the conversation when asked. */
void net_resp_keep(struct net_stream *s);
void net_resp_fini(struct net_stream *s);

/* ---- listing.c: model listings (DESIGN.md 9) ---- */

void net_models_listing(struct net_stream *s);

#endif
