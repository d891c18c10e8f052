/* SPDX-License-Identifier: MIT
 * net/pipeline.c - the request pipeline: one exchange from a complete client request
 * to its answer and its row. auth -> parse (dialect) -> candidates -> hops to
 * upstreams with failover -> relay (held until first content) -> row to the store.
 * Owns:    each net_stream: its config reference, parsed request, bodies, the
 *          current upstream exchange (net_upx) and the row until it is submitted.
 * Threads: the owning worker only; never blocks.
 * See:     net/net-priv.h, net/http1.c, net/upstream.h, dialects/openai.h
 */
#include "net/net-priv.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <openssl/sha.h>

#include "core/alloc.h"
#include "core/cost.h"
#include "core/events.h"
#include "core/assert.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/retry.h"
#include "core/route.h"
#include "core/row.h"
#include "core/speed.h"
#include "core/sse.h"
#include "core/slots.h"
#include "core/sticky.h"
#include "dialects/anthropic.h"
#include "dialects/json_scan.h"
#include "dialects/openai.h"
#include "net/calendar.h"
#include "net/logger.h"
#include "net/sink.h"
#include "net/upstream.h"
#include "store/store.h"

#define NET_MAX_FWD_HEADERS 64
#define NET_MAX_ERRBODY (64 * 1024)
#define NET_MAX_ANSWER (64u * 1024 * 1024)

struct net_stream {
    uint32_t magic_;
    struct net_worker *w;
    struct net_conn *conn; /* NULL once the client is gone */
    struct net_sink sink;  /* how the answer is written (net/sink.h; valid while conn is) */
    struct gw_conf *conf;  /* reference held for the whole exchange */
    char id[GW_ROW_ID_LEN + 1];
    uint64_t t0_us;
    const struct gw_conf_client *client;
    struct dl_openai_req *req;
    struct gw_buf body;                       /* the client's body (taken from the conn) */
    size_t body_held;                         /* its bytes in net_body_budget */
    struct gw_buf upbody;                     /* what is sent upstream ... */
    size_t upbody_for;                        /* ... to candidate cands[upbody_for] */
    bool upbody_ready;                        /* upbody holds that candidate's body */
    char unconvertible[160];                  /* why a candidate's shape could not take it */
    struct gw_route_cand cands[GW_ROUTE_MAX]; /* in the order to try (core/route.h) */
    size_t n_cands, cur;
    int pick;             /* the routing pick (tried even when paused) */
    uint64_t conv;        /* conversation key (core/sticky.h), 0 = none */
    bool within_turn;     /* the request carries tool results */
    char retry_after[40]; /* the hop's Retry-After / retry-after-ms values */
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
    struct net_upx *upx;
    int up_status;
    bool up_ok, up_sse, stream, wants_usage, headers_sent, chunked, paused;
    bool stream_error; /* the upstream sent an error event before content */
    bool up_bad;       /* the hop's answer is not the shape it claims (gw.upstream.protocol) */
    bool chunk_seen;   /* a data event of the hop parsed as a chunk (a JSON object) */
    bool up_anth;      /* the hop speaks Anthropic Messages: answers are converted */
    struct gw_sse sse;
    struct gw_sse sse_chat;          /* the converted stream, as Chat chunk events */
    struct gw_buf anth_out;          /* scratch: one converted event */
    struct dl_anthropic_stream anth; /* the converted stream's state */
    struct gw_buf out;               /* held events, or the non-streamed answer */
    struct gw_buf errbody;           /* a non-2xx upstream body (bounded, logged only) */
    uint64_t t_hop_us, t_first_us;
    size_t content_bytes;
    struct gw_usage usage;
    bool usage_seen;
    enum gw_code fail_code; /* the last real failure */
    int fail_status;
    struct gw_row *row;
};

/* True for the upstream shapes a Chat Completions request can be sent in by this build:
 * Chat itself and Anthropic Messages (converted, dialects/anthropic.h). */
static bool
spoken(const struct gw_conf_provider *p)
{
    return p->dialect == GW_DIALECT_OPENAI || p->dialect == GW_DIALECT_ANTHROPIC;
}

static const struct gw_conf_provider *
cur_prov(const struct net_stream *s)
{
    return s->cands[s->cur].prov;
}

struct net_stream *
net_stream_grant_next(struct net_stream *s)
{
    return s->grant_next;
}

void
net_stream_set_grant_next(struct net_stream *s, struct net_stream *next)
{
    s->grant_next = next;
}

static void
slot_give_back(struct net_stream *s, struct gw_slots **sp)
{
    if (*sp) {
        gw_slots_release(*sp, net_slots_granted, s->w->ws);
        *sp = NULL;
    }
}

/* ---- request ids ---- */

void
net_worker_request_id(struct net_worker *w, char out[33])
{
    unsigned char b[16];
    int i;

    for (i = 0; i < 2; i++) {
        /* xorshift128+: ids need to be unique, not secret. */
        uint64_t s1 = w->rng[0], s0 = w->rng[1], r;

        w->rng[0] = s0;
        s1 ^= s1 << 23;
        w->rng[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
        r = w->rng[1] + s0;
        memcpy(b + 8 * i, &r, 8);
    }
    gw_hex_encode(b, sizeof(b), out);
}

/* ---- plain answers (through the sink, net/sink.h) ---- */

/* Retry-After, retry-after-ms and x-should-retry (DESIGN.md 18), as header pairs. */
struct retry_hdrs {
    struct net_hdr h[3];
    char secs[24], ms[24];
};

static size_t
retry_headers(struct retry_hdrs *r, uint64_t retry_ms, bool should_retry)
{
    uint64_t secs = (retry_ms + 999) / 1000;

    r->h[0] = (struct net_hdr){GW_STR_LIT("retry-after"),
                               {r->secs, gw_fmt_u64(r->secs, secs ? secs : 1)}};
    r->h[1] = (struct net_hdr){GW_STR_LIT("retry-after-ms"), {r->ms, gw_fmt_u64(r->ms, retry_ms)}};
    r->h[2] = (struct net_hdr){GW_STR_LIT("x-should-retry"),
                               should_retry ? GW_STR_LIT("true") : GW_STR_LIT("false")};
    return 3;
}

#define NET_ANSWER_MAX_HDRS 8

/* A whole answer on <k>: <status>, its content type, x-request-id <req_id>, the <extra>
 * header pairs, and <body>. */
static void
answer_on(struct net_sink *k, int status, const char *req_id, const char *ctype,
          const struct net_hdr *extra, size_t n_extra, const char *body, size_t len)
{
    struct net_hdr h[NET_ANSWER_MAX_HDRS];
    size_t n = 0, i;

    h[n++] = (struct net_hdr){GW_STR_LIT("content-type"), gw_str_c(ctype)};
    h[n++] = (struct net_hdr){GW_STR_LIT("x-request-id"), gw_str_c(req_id)};
    for (i = 0; i < n_extra && n < NET_ANSWER_MAX_HDRS; i++)
        h[n++] = extra[i];
    net_sink_head(k, status, h, n, len);
    net_sink_data(k, body, len);
    net_sink_end(k);
}

static void
answer(struct net_stream *s, int status, const char *ctype, const char *body, size_t len)
{
    answer_on(&s->sink, status, s->id, ctype, NULL, 0, body, len);
}

/* A gateway refusal with <code> on <k>: x-gw-code and an error body in the client's
 * shape (OpenAI Chat today) with the code inside. */
static void
refusal_on(struct net_sink *k, const char *req_id, enum gw_code code, const char *message,
           const struct net_hdr *extra, size_t n_extra)
{
    struct net_hdr h[NET_ANSWER_MAX_HDRS - 2];
    struct gw_buf body = {0};
    size_t n = 0, i;

    gw_code_count(code);
    dl_openai_error_body(code, gw_str_c(message), &body);
    h[n++] = (struct net_hdr){GW_STR_LIT("x-gw-code"), gw_str_c(gw_code_str(code))};
    for (i = 0; i < n_extra && n < NET_ANSWER_MAX_HDRS - 2; i++)
        h[n++] = extra[i];
    answer_on(k, gw_code_http_status(code), req_id, "application/json", h, n, body.data, body.len);
    gw_buf_fini(&body);
}

void
net_respond_error(struct net_conn *c, const char *req_id, enum gw_code code, const char *message,
                  const struct net_hdr *extra, size_t n_extra)
{
    struct net_sink k;
    char id[GW_ROW_ID_LEN + 1];

    if (!req_id) {
        net_worker_request_id(c->w, id);
        req_id = id;
    }
    net_conn_sink(c, &k);
    refusal_on(&k, req_id, code, message, extra, n_extra);
}

/* ---- the stream's life ---- */

static void
stream_free(struct net_stream *s)
{
    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (s->upx)
        net_upx_cancel(s->upx);
    if (s->slow_timer)
        event_free(s->slow_timer);
    if (s->speed_timer)
        event_free(s->speed_timer);
    if (s->wait_timer)
        event_free(s->wait_timer);
    if (s->limit_timer)
        event_free(s->limit_timer);
    gw_free(s->speed);
    dl_openai_req_free(s->req);
    gw_buf_fini(&s->body);
    net_body_release(&s->body_held);
    gw_buf_fini(&s->upbody);
    gw_buf_fini(&s->out);
    gw_buf_fini(&s->errbody);
    gw_sse_fini(&s->sse);
    gw_sse_fini(&s->sse_chat);
    gw_buf_fini(&s->anth_out);
    gw_free(s->row);
    gw_conf_release(s->conf);
    s->magic_ = 0;
    gw_free(s);
}

static uint32_t
ms_since(uint64_t from_us, uint64_t now_us)
{
    return now_us > from_us ? (uint32_t)((now_us - from_us) / 1000) : 0;
}

static bool
has_cost_limit(const struct gw_conf_client *cl)
{
    size_t i;

    for (i = 0; i < cl->n_limits; i++)
        if (cl->limits[i].has_cost)
            return true;
    return false;
}

/* key_limit_alert events (DESIGN.md 8): once per period at 80% and at the limit, to
 * the control plane's event stream and the log. */
/* A limit's amount as a JSON number, exact: a count, or micro-dollars as USD. */
static void
amount_json(uint64_t v, bool cost, char *out, size_t n)
{
    if (cost)
        snprintf(out, n, "%llu.%06llu", (unsigned long long)(v / 1000000),
                 (unsigned long long)(v % 1000000));
    else
        snprintf(out, n, "%llu", (unsigned long long)v);
}

static void
emit_alerts(struct net_stream *s)
{
    struct gw_limit_alert a[4];
    size_t n, i;

    n = gw_keylimits_take_alerts(s->client->usage, a, sizeof(a) / sizeof(a[0]));
    for (i = 0; i < n; i++) {
        struct gw_log_ctx ctx = {(int)s->w->id, 0, s->id};
        bool cost = a[i].measure == GW_LIMIT_COST;
        char resets[40], json[1024], used[32], max[32];
        time_t t = (time_t)(a[i].resets_at_ms / 1000);
        struct tm tm;

        gmtime_r(&t, &tm);
        strftime(resets, sizeof(resets), "%Y-%m-%dT%H:%M:%SZ", &tm);
        amount_json(a[i].used, cost, used, sizeof(used));
        amount_json(a[i].max, cost, max, sizeof(max));
        snprintf(json, sizeof(json),
                 "{\"type\":\"key_limit_alert\",\"client\":\"%s\",\"per\":\"%s\","
                 "\"measure\":\"%s\",\"percent\":%u,\"used\":%s,\"max\":%s,"
                 "\"resets_at\":\"%s\"}",
                 a[i].client, gw_limit_per_str(a[i].per), gw_limit_measure_str(a[i].measure),
                 a[i].percent, used, max, resets);
        gw_event_push(GW_EV_KEY_LIMIT_ALERT, json);
        GW_LOG(GW_LOG_INFO, &ctx, "key_limit_alert", "%s", json);
    }
}

/* Fills the row's totals, hands it to the store, frees the stream and lets the
 * connection go on. <status>/<code>/<outcome> describe what the client got. */
/* Closes the row (submitted to the store) and gives back what the request held: its
 * key-limit reservation is settled, its slot and permit released. Called before the
 * last bytes of the answer are written, so that a client sending its next request as
 * soon as it has read this answer finds the limits already settled (a refused request's
 * reservation given back). stream_finish calls it when the caller did not. */
static void
stream_settle(struct net_stream *s, int status, enum gw_code code, enum gw_outcome outcome)
{
    struct gw_row *r = s->row;
    uint64_t now = net_mono_us();

    if (s->settled)
        return;
    s->settled = true;
    if (r) {
        r->status = (uint16_t)status;
        r->code = (uint16_t)code;
        r->outcome = (uint8_t)outcome;
        r->duration_ms = ms_since(s->t0_us, now);
        r->ttfb_ms = s->t_first_us ? (int32_t)ms_since(s->t0_us, s->t_first_us) : -1;
        if (s->usage_seen) {
            r->usage = s->usage;
        } else if (r->n_attempts > 0 && s->req && (s->headers_sent || s->content_bytes)) {
            /* An answer without usage: the gateway's estimate, marked so. */
            r->usage.input_tokens = dl_openai_req_input_estimate(s->req);
            r->usage.output_tokens = (s->content_bytes + 3) / 4;
            r->usage.estimated = true;
        }
        if (s->given_up_input) {
            /* Hops given up at slow start may bill their input: kept, estimated,
             * and priced with the rest at the answering upstream's prices. */
            r->usage.input_tokens += s->given_up_input;
            r->usage.estimated = true;
        }
        if (r->upstream[0] && s->cur < s->n_cands) {
            /* Priced from the usage at the answering upstream's prices for the model it
             * was asked for (one resolve function: model_specs over prices.yaml). */
            struct gw_model_spec spec;

            gw_conf_model_spec(s->conf, s->cands[s->cur].prov, s->cands[s->cur].model, &spec);
            bool priced = true;

            r->cost_micros = gw_cost_micros(&spec, &r->usage, &priced);
            if (!priced && s->client && s->client->usage && has_cost_limit(s->client))
                gw_keylimits_note_unpriced(s->client->usage, s->cands[s->cur].model);
        }
        if (s->t_first_us && now > s->t_first_us + 1000 && r->usage.output_tokens)
            r->tokens_per_sec =
                (double)r->usage.output_tokens * 1e6 / (double)(now - s->t_first_us);
        if (s->speed && s->t_first_us) {
            /* With min_speed the row keeps the speed the judge measured. */
            double rate = gw_speed_rate(s->speed, net_now_ms());

            if (rate > 0)
                r->tokens_per_sec = rate;
        }
        if (s->quota.active && s->client && s->client->usage)
            gw_keylimits_settle(s->client->usage, &s->quota, net_now_ms(), &r->usage,
                                r->cost_micros, gw_keylimits_row_counts(r));
        if (s->client && s->client->usage && gw_keylimits_has_alerts(s->client->usage))
            emit_alerts(s);
        s->row = NULL;
        if (s->w->store)
            store_row_submit(s->w->store, &r);
        else
            gw_free(r);
    }
    slot_give_back(s, &s->hop_slot);
    slot_give_back(s, &s->key_slot);
}

static void
stream_finish(struct net_stream *s, int status, enum gw_code code, enum gw_outcome outcome)
{
    struct net_conn *c = s->conn;

    stream_settle(s, status, code, outcome);
    if (c) {
        c->stream = NULL;
        s->conn = NULL;
    }
    if (!s->zombie)
        stream_free(s); /* a zombie is freed when its grant message arrives */
    if (c)
        net_conn_response_done(c);
}

/* A refusal by the gateway: error body in the client's shape, row with no attempts. */
static void
stream_refuse_hdrs(struct net_stream *s, enum gw_code code, const char *message,
                   const struct net_hdr *extra, size_t n_extra, bool record)
{
    if (!record)
        GW_FREE(s->row);
    stream_settle(s, gw_code_http_status(code), code, GW_OUT_REFUSED);
    refusal_on(&s->sink, s->id, code, message, extra, n_extra);
    stream_finish(s, gw_code_http_status(code), code, GW_OUT_REFUSED);
}

static void
stream_refuse(struct net_stream *s, enum gw_code code, const char *message, bool record)
{
    if (!record)
        GW_FREE(s->row);
    stream_settle(s, gw_code_http_status(code), code, GW_OUT_REFUSED);
    refusal_on(&s->sink, s->id, code, message, NULL, 0);
    stream_finish(s, gw_code_http_status(code), code, GW_OUT_REFUSED);
}

/* ---- attempts ---- */

static struct gw_attempt *
attempt_cur(struct net_stream *s)
{
    return s->row && s->row->n_attempts ? &s->row->attempts[s->row->n_attempts - 1] : NULL;
}

static void
attempt_end(struct net_stream *s, enum gw_outcome outcome, int status, enum gw_code code)
{
    struct gw_attempt *a = attempt_cur(s);

    if (!a)
        return;
    a->outcome = (uint8_t)outcome;
    a->status = (uint16_t)status;
    a->code = (uint16_t)code;
}

static void hop_next(struct net_stream *s);

/* The current hop failed before anything reached the client: try the next one. */
/* Counts a failure of the current hop's upstream (DESIGN.md 6): not for a missing
 * model (404), which moves on without counting, nor for our own out-of-memory. */
static void
count_failure(struct net_stream *s, int status, enum gw_code code)
{
    uint64_t now = net_now_ms(), retry_ms;

    if (status == 404 || code == GW_E_NOMEM)
        return;
    retry_ms = gw_retry_after_ms(gw_str_c(s->retry_after), gw_str_c(s->retry_after_ms),
                                 (struct gw_str){s->errbody.data, s->errbody.len}, now);
    if (gw_upstate_failure(cur_prov(s)->state, now, s->conf, retry_ms)) {
        struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

        GW_LOG(GW_LOG_WARN, &ctx, "upstream_paused", "upstream %s paused", cur_prov(s)->name);
    }
}

static void
hop_timers_stop(struct net_stream *s)
{
    if (s->slow_timer)
        evtimer_del(s->slow_timer);
    if (s->speed_timer)
        evtimer_del(s->speed_timer);
}

static void
hop_failed(struct net_stream *s, int status, enum gw_code code)
{
    const struct gw_conf_provider *p = cur_prov(s);
    struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

    hop_timers_stop(s);
    slot_give_back(s, &s->hop_slot);
    attempt_end(s, GW_OUT_FAILED, status, code);
    count_failure(s, status, code);
    GW_LOG(GW_LOG_WARN, &ctx, gw_code_str(code), "upstream %s failed (status %d, %zu body bytes)",
           p->name, status, s->errbody.len);
    s->fail_code = code;
    s->fail_status = status;
    s->cur++;
    hop_next(s);
}

/* ---- writing the relayed answer (through the sink) ---- */

/* The head of a streamed answer: it leaves with the first bytes of the body. */
static void
write_stream_head(struct net_stream *s)
{
    struct net_hdr h[3] = {
        {GW_STR_LIT("content-type"), GW_STR_LIT("text/event-stream")},
        {GW_STR_LIT("cache-control"), GW_STR_LIT("no-cache")},
        {GW_STR_LIT("x-request-id"), {s->id, GW_ROW_ID_LEN}},
    };

    net_sink_head(&s->sink, 200, h, 3, NET_SINK_STREAMED);
    s->headers_sent = true;
}

static void
flush_out(struct net_stream *s)
{
    if (!s->headers_sent || !s->out.len)
        return;
    net_sink_data(&s->sink, s->out.data, s->out.len);
    gw_buf_reset(&s->out);
    if (s->upx && !s->paused && net_sink_queued(&s->sink) > NET_OUT_HIGH) {
        net_upx_pause(s->upx); /* a slow client slows the upstream read */
        s->paused = true;
    }
}

static void
write_stream_end(struct net_stream *s)
{
    net_sink_end(&s->sink);
}

/* ---- upstream callbacks ---- */

static bool
is_failover_status(int status)
{
    return status == 401 || status == 403 || status == 404 || status == 408 || status == 429 ||
           status >= 500;
}

static void
on_up_head(void *arg, int status, const struct net_hdr *hdrs, size_t n_hdrs)
{
    struct net_stream *s = arg;
    struct gw_attempt *a = attempt_cur(s);
    size_t i;

    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    s->up_status = status;
    s->up_ok = status >= 200 && status < 300;
    s->up_sse = s->up_bad = s->chunk_seen = false;
    if (a)
        a->ttfb_ms = (int32_t)ms_since(s->t_hop_us, net_mono_us());
    if (!s->up_ok) {
        for (i = 0; i < n_hdrs; i++) {
            const struct net_hdr *h = &hdrs[i];

            if (gw_str_eq_nocase(h->name, GW_STR_LIT("retry-after")) &&
                h->value.len < sizeof(s->retry_after))
                memcpy(s->retry_after, h->value.ptr, h->value.len);
            else if (gw_str_eq_nocase(h->name, GW_STR_LIT("retry-after-ms")) &&
                     h->value.len < sizeof(s->retry_after_ms))
                memcpy(s->retry_after_ms, h->value.ptr, h->value.len);
        }
        return;
    }
    if (!s->stream)
        return;
    for (i = 0; i < n_hdrs; i++) {
        if (gw_str_eq_nocase(hdrs[i].name, GW_STR_LIT("content-type")) && hdrs[i].value.len >= 17 &&
            strncasecmp(hdrs[i].value.ptr, "text/event-stream", 17) == 0)
            s->up_sse = true;
    }
}

static void on_speed_tick(evutil_socket_t fd, short what, void *arg);

/* The hop produced its first content: the hold ends, the sample is taken, and the
 * minimum-speed judge starts when the upstream has one. */
static void
on_first_content(struct net_stream *s)
{
    const struct gw_conf_provider *p = cur_prov(s);
    uint64_t now_us = net_mono_us();

    s->t_first_us = now_us;
    if (s->slow_timer)
        evtimer_del(s->slow_timer);
    gw_upstate_sample(p->state, net_now_ms(), ms_since(s->t_hop_us, now_us));
    write_stream_head(s);
    if (p->min_speed_tps) {
        struct timeval second = {1, 0};

        if (!s->speed)
            s->speed = gw_malloc(sizeof(*s->speed));
        if (!s->speed_timer)
            s->speed_timer = event_new(s->w->base, -1, EV_PERSIST, on_speed_tick, s);
        if (s->speed && s->speed_timer) {
            gw_speed_init(s->speed, p->min_speed_window_secs, p->min_speed_tps);
            s->speed_carry = 0;
            evtimer_add(s->speed_timer, &second);
        }
    }
}

/* True when <v> is one valid JSON object and nothing else (dialects/json_scan.h: the
 * hot path's scanner, no allocation). The shape check of an answer that the dialect's
 * inspection could not vouch for: a chunk that carried nothing, an answer without
 * usage. */
static bool
is_json_object(struct gw_str v)
{
    struct dl_json j;

    dl_json_init(&j, v.ptr, v.len);
    return dl_json_peek(&j) == '{' && dl_json_skip(&j, NULL) && dl_json_end(&j);
}

/* One event of a Chat stream (an OpenAI upstream's, or a converted Anthropic one's).
 * Data that is neither [DONE] nor a JSON object is a protocol error (s->up_bad): the
 * stream stops here and on_up_body fails the hop over or ends the client's stream.
 * Events without data (comments, keep-alives, stray lines) pass as they came. */
static int
on_sse_event(void *arg, const struct gw_sse_event *ev)
{
    struct net_stream *s = arg;
    struct dl_openai_chunk ch;

    if (dl_openai_chunk_inspect(ev->data, &ch) != GW_OK)
        memset(&ch, 0, sizeof(ch));
    if (ev->data.len && !ch.done) {
        /* Each true field means the inspection parsed the whole object; only a chunk
         * that carried nothing it reads is scanned again. */
        if (!ch.is_error && !ch.has_content && !ch.has_usage && !is_json_object(ev->data)) {
            s->up_bad = true;
            return 1;
        }
        s->chunk_seen = true;
    }
    if (ch.is_error && !s->headers_sent) {
        s->stream_error = true; /* fail over: nothing has reached the client */
        return 1;
    }
    if (ch.has_usage) {
        s->usage = ch.usage;
        s->usage_seen = true;
    }
    s->content_bytes += ch.content_bytes;
    if (!(ch.usage_only && !s->wants_usage))
        gw_buf_append_str(&s->out, ev->raw);
    if (ch.has_content && !s->headers_sent)
        on_first_content(s);
    if (ch.content_bytes && s->speed) {
        /* A token per 4 bytes of content delta (DESIGN.md 18); the rest carries over. */
        s->speed_carry += ch.content_bytes;
        gw_speed_add(s->speed, net_now_ms(), s->speed_carry / 4);
        s->speed_carry %= 4;
    }
    return 0;
}

/* One event of an Anthropic stream: converted to Chat chunk events, which then take the
 * path of an OpenAI upstream's events. The usage comes from the Messages events (cache
 * writes included, which a Chat chunk cannot carry). */
static int
on_anth_event(void *arg, const struct gw_sse_event *ev)
{
    struct net_stream *s = arg;
    enum gw_code rc;

    gw_buf_reset(&s->anth_out);
    if (ev->data.len == 0)
        return 0; /* a keep-alive comment */
    if (dl_anthropic_stream_event(&s->anth, ev->event, ev->data, &s->anth_out) != GW_OK) {
        s->up_bad = true; /* data that is not the JSON its event needs */
        return 1;
    }
    rc = gw_sse_feed(&s->sse_chat, s->anth_out.data, s->anth_out.len, on_sse_event, s);
    if (s->anth.usage_seen) {
        s->usage = s->anth.usage;
        s->usage_seen = true;
    }
    return rc != GW_OK || s->stream_error || s->up_bad;
}

/* The hop broke after content reached the client: the stream ends with an error chunk
 * carrying <code> and gw's own <message> (no [DONE]); the attempt and the row say
 * failed with <code>, and the upstream counts a failure. <log_code> names the log
 * line (the transport's own code when it differs from the client's). */
static void
stream_broke(struct net_stream *s, enum gw_code code, enum gw_code log_code, const char *message)
{
    const struct gw_conf_provider *p = cur_prov(s);
    struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

    GW_LOG(GW_LOG_WARN, &ctx, gw_code_str(log_code), "upstream %s: %s", p->name, message);
    hop_timers_stop(s);
    gw_buf_reset(&s->out);
    dl_openai_error_chunk(code, gw_str_c(message), &s->out);
    memcpy(s->row->upstream, p->name, strnlen(p->name, GW_NAME_MAX));
    attempt_end(s, GW_OUT_FAILED, s->up_status, code);
    count_failure(s, s->up_status, code);
    gw_code_count(code);
    stream_settle(s, 200, code, GW_OUT_FAILED);
    flush_out(s);
    write_stream_end(s);
    stream_finish(s, 200, code, GW_OUT_FAILED);
}

static void
on_up_body(void *arg, const char *data, size_t len)
{
    struct net_stream *s = arg;

    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (!s->up_ok) {
        size_t room = NET_MAX_ERRBODY - s->errbody.len;

        gw_buf_append(&s->errbody, data, len < room ? len : room);
        return;
    }
    if (!s->up_sse) {
        if (s->out.len + len > NET_MAX_ANSWER || gw_buf_append(&s->out, data, len) != GW_OK) {
            net_upx_cancel(s->upx);
            s->upx = NULL;
            gw_buf_reset(&s->out);
            hop_failed(s, s->up_status, GW_E_UPSTREAM_PROTOCOL);
        }
        return;
    }
    /* Not OK from the parser: an event over its cap (8 MiB, core/sse.c) or out of
     * memory; up_bad: an event that is not the shape it claims. */
    if (gw_sse_feed(&s->sse, data, len, s->up_anth ? on_anth_event : on_sse_event, s) != GW_OK ||
        s->stream_error || s->up_bad) {
        net_upx_cancel(s->upx);
        s->upx = NULL;
        if (s->headers_sent) {
            stream_broke(s, GW_E_UPSTREAM_PROTOCOL, GW_E_UPSTREAM_PROTOCOL,
                         "the upstream sent an invalid stream");
            return;
        }
        gw_buf_reset(&s->out);
        hop_failed(s, s->up_status,
                   s->stream_error && !s->up_bad ? GW_E_UPSTREAM_STATUS : GW_E_UPSTREAM_PROTOCOL);
        return;
    }
    flush_out(s);
}

/* min_speed (DESIGN.md 6): judged once a second from the first token. Too slow: the
 * answer ends with a 503 error chunk, the upstream connection is dropped, the upstream
 * gets one failure and the conversation does not stick to it this turn. */
static void
on_speed_tick(evutil_socket_t fd, short what, void *arg)
{
    struct net_stream *s = arg;
    const struct gw_conf_provider *p;
    struct gw_buf msg = {0};
    double tps = 0;

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (!s->upx || !s->speed || gw_speed_judge(s->speed, net_now_ms(), &tps) != GW_SPEED_TOO_SLOW)
        return;
    p = cur_prov(s);
    hop_timers_stop(s);
    net_upx_cancel(s->upx);
    s->upx = NULL;
    gw_buf_printf(&msg, "upstream %s streamed %.1f tokens/s, below its minimum of %u over %u s",
                  p->name, tps, p->min_speed_tps, p->min_speed_window_secs);
    {
        struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

        GW_LOG(GW_LOG_WARN, &ctx, gw_code_str(GW_E_UPSTREAM_TOO_SLOW), "%s",
               msg.data ? msg.data : "too slow");
    }
    gw_buf_reset(&s->out);
    dl_openai_error_chunk(GW_E_UPSTREAM_TOO_SLOW,
                          (struct gw_str){msg.data ? msg.data : "too slow", msg.len}, &s->out);
    gw_buf_fini(&msg);
    memcpy(s->row->upstream, p->name, strnlen(p->name, GW_NAME_MAX));
    attempt_end(s, GW_OUT_TOO_SLOW, s->up_status, GW_E_UPSTREAM_TOO_SLOW);
    gw_upstate_failure(p->state, net_now_ms(), s->conf, 0);
    if (s->conv && s->w->sticky)
        gw_sticky_forget(s->w->sticky, s->conv);
    gw_code_count(GW_E_UPSTREAM_TOO_SLOW);
    stream_settle(s, 200, GW_E_UPSTREAM_TOO_SLOW, GW_OUT_TOO_SLOW);
    flush_out(s);
    write_stream_end(s);
    stream_finish(s, 200, GW_E_UPSTREAM_TOO_SLOW, GW_OUT_TOO_SLOW);
}

/* The hop answered (client errors included): health, and the conversation's upstream. */
static void
count_answer(struct net_stream *s)
{
    const struct gw_conf_provider *p = cur_prov(s);
    uint64_t now = net_now_ms();

    hop_timers_stop(s);
    gw_upstate_success(p->state, now);
    memcpy(s->row->upstream, p->name, strnlen(p->name, GW_NAME_MAX));
    if (s->conv && s->w->sticky)
        gw_sticky_record(s->w->sticky, s->conv, p->name, now,
                         s->usage.cache_read_tokens + s->usage.cache_write_tokens);
}

static void
finish_ok(struct net_stream *s)
{
    if (s->stream && s->up_sse) {
        if (!s->chunk_seen) {
            /* Not one event parsed as a chunk (garbage lines, only [DONE], nothing):
             * not an answer. Content cannot have been relayed without a chunk. */
            gw_buf_reset(&s->out);
            hop_failed(s, s->up_status, GW_E_UPSTREAM_PROTOCOL);
            return;
        }
        attempt_end(s, GW_OUT_OK, s->up_status, GW_OK);
        count_answer(s);
        if (!s->headers_sent)
            write_stream_head(s); /* an answer without content: relay it as it is */
        stream_settle(s, 200, GW_OK, GW_OUT_OK);
        flush_out(s);
        write_stream_end(s);
        stream_finish(s, 200, GW_OK, GW_OUT_OK);
        return;
    }
    if (s->up_anth) {
        struct gw_buf chat = {0};
        struct gw_usage u;

        if (dl_anthropic_answer_to_chat(s->out.data, s->out.len, net_now_ms() / 1000, &chat, &u) !=
            GW_OK) {
            gw_buf_fini(&chat);
            gw_buf_reset(&s->out);
            hop_failed(s, s->up_status, GW_E_UPSTREAM_PROTOCOL);
            return;
        }
        gw_buf_fini(&s->out);
        s->out = chat;
        s->usage = u;
        s->usage_seen = true;
        s->content_bytes = 0;
    } else {
        struct gw_str body = {s->out.data, s->out.len};
        size_t content = 0;

        /* The minimal shape of an answer (a streamed request answered without SSE
         * too): one JSON object. With usage read, the scan has vouched for it. */
        if (dl_openai_answer_usage(body, &s->usage, &content)) {
            s->usage_seen = true;
        } else if (!is_json_object(body)) {
            gw_buf_reset(&s->out);
            hop_failed(s, s->up_status, GW_E_UPSTREAM_PROTOCOL);
            return;
        }
        s->content_bytes = content;
    }
    attempt_end(s, GW_OUT_OK, s->up_status, GW_OK);
    count_answer(s);
    s->t_first_us = net_mono_us();
    stream_settle(s, s->up_status, GW_OK, GW_OUT_OK);
    answer(s, s->up_status, "application/json", s->out.data, s->out.len);
    stream_finish(s, s->up_status, GW_OK, GW_OUT_OK);
}

static void
on_up_end(void *arg, enum gw_code rc)
{
    struct net_stream *s = arg;

    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    s->upx = NULL; /* freed by the pool after this returns */
    if (rc != GW_OK) {
        if (s->headers_sent) {
            /* Content was relayed: end the answer with an error chunk, no [DONE]. */
            enum gw_code code =
                rc == GW_E_UPSTREAM_TIMEOUT ? GW_E_UPSTREAM_TIMEOUT : GW_E_UPSTREAM_DROPPED;

            stream_broke(s, code, rc, "the upstream connection broke mid-stream");
            return;
        }
        gw_buf_reset(&s->out);
        hop_failed(s, s->up_status, rc);
        return;
    }
    if (!s->up_ok) {
        if (is_failover_status(s->up_status)) {
            hop_failed(s, s->up_status, GW_E_UPSTREAM_STATUS);
            return;
        }
        /* A request error (400, 413, 422, ...): the upstream's answer goes back as is;
         * the upstream answered, so it counts as a success for its health. */
        count_answer(s);
        attempt_end(s, GW_OUT_OK, s->up_status, GW_OK);
        if (s->up_anth) {
            struct gw_buf chat = {0};

            dl_anthropic_error_to_chat(s->errbody.data, s->errbody.len, s->up_status, &chat);
            gw_buf_fini(&s->errbody);
            s->errbody = chat;
        }
        stream_settle(s, s->up_status, GW_OK, GW_OUT_OK);
        answer(s, s->up_status, "application/json", s->errbody.data, s->errbody.len);
        stream_finish(s, s->up_status, GW_OK, GW_OUT_OK);
        return;
    }
    finish_ok(s);
}

static const struct net_up_cbs up_cbs = {
    .on_head = on_up_head,
    .on_body = on_up_body,
    .on_end = on_up_end,
};

/* ---- hops ---- */

static bool
is_forwarded(struct gw_str name)
{
    static const struct gw_str drop[] = {
        GW_STR_LIT("host"),
        GW_STR_LIT("content-length"),
        GW_STR_LIT("connection"),
        GW_STR_LIT("keep-alive"),
        GW_STR_LIT("proxy-connection"),
        GW_STR_LIT("te"),
        GW_STR_LIT("trailer"),
        GW_STR_LIT("transfer-encoding"),
        GW_STR_LIT("upgrade"),
        GW_STR_LIT("authorization"),
        GW_STR_LIT("x-api-key"),
        GW_STR_LIT("x-goog-api-key"),
        GW_STR_LIT("accept-encoding"),
        GW_STR_LIT("expect"),
        GW_STR_LIT("content-type"),
        GW_STR_LIT("accept"),
        GW_STR_LIT("cookie"),
        GW_STR_LIT("proxy-authorization"),
        GW_STR_LIT("anthropic-version"), /* ours, for a converted hop */
    };
    size_t i;

    for (i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        if (gw_str_eq_nocase(name, drop[i]))
            return false;
    return true;
}

/* Appends an attempt for candidate <c> with <outcome> (a hop being sent: GW_OUT_NONE). */
static struct gw_attempt *
attempt_add(struct net_stream *s, const struct gw_route_cand *c, enum gw_outcome outcome)
{
    struct gw_attempt *a = &s->row->attempts[s->row->n_attempts++];

    memset(a, 0, sizeof(*a));
    memcpy(a->upstream, c->prov->name, strnlen(c->prov->name, GW_NAME_MAX));
    memcpy(a->model, c->model, c->model_len < GW_MODEL_MAX ? c->model_len : GW_MODEL_MAX);
    a->outcome = (uint8_t)outcome;
    a->ttfb_ms = -1;
    return a;
}

/* next_on_slow_start (DESIGN.md 6): a streamed hop with no content by the deadline is
 * given up when a later candidate can take the request now; the last one waits. The
 * slow upstream is not paused nor counted as failed; its input is kept on the row. */
static void
on_slow_start(evutil_socket_t fd, short what, void *arg)
{
    struct net_stream *s = arg;
    struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};
    uint64_t now = net_now_ms();
    size_t j;

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (s->headers_sent || !s->upx)
        return;
    for (j = s->cur + 1; j < s->n_cands; j++) {
        const struct gw_route_cand *c = &s->cands[j];
        struct gw_upfacts f;

        if (!spoken(c->prov) || c->state == GW_CAND_DISABLED)
            continue;
        gw_upstate_facts(c->prov->state, now, &f);
        if (!f.paused_until_ms)
            break;
    }
    if (j == s->n_cands)
        return;             /* no one could take it now: this hop keeps its chance */
    net_upx_cancel(s->upx); /* the connection is dropped, so the upstream stops */
    s->upx = NULL;
    slot_give_back(s, &s->hop_slot);
    attempt_end(s, GW_OUT_SLOW_START, s->up_status, GW_OK);
    s->given_up_input += dl_openai_req_input_estimate(s->req);
    GW_LOG(GW_LOG_INFO, &ctx, "slow_start", "upstream %s sent no content in %u s; trying %s",
           cur_prov(s)->name, s->conf->failover.stream_start_wait_secs, s->cands[j].prov->name);
    s->cur++;
    hop_next(s);
}

/* Renders in s->upbody the body for candidate <idx> in its upstream's shape: the
 * client's bytes with the model spliced in, or the request converted to Anthropic
 * Messages with max_tokens from the model's spec (the one resolve function) when the
 * client set none. Kept for that candidate, so a later hop_send does not render again.
 * GW_OK; GW_E_UNCONVERTIBLE with the reason in s->unconvertible; GW_E_NOMEM. */
static enum gw_code
render_body(struct net_stream *s, size_t idx)
{
    const struct gw_route_cand *c = &s->cands[idx];
    struct gw_str model = {c->model, c->model_len};
    enum gw_code rc;

    if (s->upbody_ready && s->upbody_for == idx)
        return GW_OK;
    s->upbody_ready = false;
    gw_buf_reset(&s->upbody);
    if (c->prov->dialect == GW_DIALECT_ANTHROPIC) {
        struct gw_model_spec spec;

        gw_conf_model_spec(s->conf, c->prov, c->model, &spec);
        rc = dl_anthropic_from_chat(s->body.data, s->body.len, model,
                                    spec.max_output_tokens_known ? spec.max_output_tokens : 0,
                                    &s->upbody, s->unconvertible, sizeof(s->unconvertible));
    } else {
        rc = dl_openai_req_render(s->req, s->body.data, s->body.len, model, &s->upbody);
    }
    if (rc == GW_OK) {
        s->upbody_ready = true;
        s->upbody_for = idx;
    }
    return rc;
}

static void
hop_send(struct net_stream *s, const struct gw_route_cand *c)
{
    const struct gw_conf_provider *p = c->prov;
    struct net_hdr hdrs[NET_MAX_FWD_HEADERS + 4];
    struct gw_buf auth = {0}, path = {0};
    struct net_up_req rq;
    size_t n = 0;
    unsigned i;
    bool anth = p->dialect == GW_DIALECT_ANTHROPIC;

    attempt_add(s, c, GW_OUT_NONE)->queued_ms = s->hop_queued_ms;
    s->hop_queued_ms = 0;
    s->reached_upstream = true;
    s->retry_after[0] = s->retry_after_ms[0] = '\0';

    gw_buf_reset(&s->errbody);
    gw_buf_reset(&s->out);
    gw_sse_fini(&s->sse);
    gw_sse_init(&s->sse, 0);
    s->up_status = 0;
    s->up_ok = s->up_sse = s->stream_error = false;
    s->up_anth = anth;
    if (anth) {
        gw_sse_fini(&s->sse_chat);
        gw_sse_init(&s->sse_chat, 0);
        dl_anthropic_stream_init(&s->anth, net_now_ms() / 1000);
    }
    s->usage_seen = false;
    s->content_bytes = 0;
    if (render_body(s, (size_t)(c - s->cands)) != GW_OK ||
        (!anth && gw_buf_append(&auth, "Bearer ", 7) != GW_OK) ||
        gw_buf_append_cstr(&auth, p->keys[0].secret) != GW_OK ||
        gw_buf_append_cstr(&path, p->path_prefix) != GW_OK ||
        (anth ? gw_buf_append(&path, "/v1/messages", 12)
              : gw_buf_append(&path, "/v1/chat/completions", 20)) != GW_OK) {
        gw_buf_fini(&auth);
        gw_buf_fini(&path);
        hop_failed(s, 0, GW_E_NOMEM);
        return;
    }
    s->upbody_ready = false; /* sent: a later hop renders its own */
    if (anth) {
        hdrs[n++] = (struct net_hdr){GW_STR_LIT("x-api-key"), {auth.data, auth.len}};
        hdrs[n++] =
            (struct net_hdr){GW_STR_LIT("anthropic-version"), GW_STR_LIT(DL_ANTHROPIC_VERSION)};
    } else {
        hdrs[n++] = (struct net_hdr){GW_STR_LIT("authorization"), {auth.data, auth.len}};
    }
    hdrs[n++] = (struct net_hdr){GW_STR_LIT("content-type"), GW_STR_LIT("application/json")};
    hdrs[n++] = (struct net_hdr){GW_STR_LIT("accept"), s->stream ? GW_STR_LIT("text/event-stream")
                                                                 : GW_STR_LIT("application/json")};
    for (i = 0; i < s->conn->rq.n_hdrs && n < NET_MAX_FWD_HEADERS + 4; i++) {
        struct gw_str name, value;

        net_conn_header_at(s->conn, i, &name, &value);
        if (is_forwarded(name))
            hdrs[n++] = (struct net_hdr){name, value};
    }
    memset(&rq, 0, sizeof(rq));
    rq.prov = p;
    rq.method = "POST";
    rq.path = (struct gw_str){path.data, path.len};
    rq.hdrs = hdrs;
    rq.n_hdrs = n;
    rq.body = (struct gw_str){s->upbody.data, s->upbody.len};
    rq.connect_timeout_ms = s->conf->failover.connect_timeout_ms;
    rq.head_timeout_ms = s->conf->failover.first_byte_timeout_secs * 1000u;
    rq.idle_timeout_ms = s->conf->failover.read_idle_timeout_secs * 1000u;
    s->t_hop_us = net_mono_us();
    s->upx = net_up_send(s->w->pool, &rq, &up_cbs, s);
    gw_buf_fini(&auth);
    gw_buf_fini(&path);
    if (!s->upx) {
        hop_failed(s, 0, GW_E_NOMEM);
        return;
    }
    if (s->stream && s->conf->failover.next_on_slow_start) {
        struct timeval wait = {(time_t)s->conf->failover.stream_start_wait_secs, 0};

        if (!s->slow_timer)
            s->slow_timer = evtimer_new(s->w->base, on_slow_start, s);
        if (s->slow_timer)
            evtimer_add(s->slow_timer, &wait);
    }
}

static bool
prov_lists(const struct gw_conf_provider *p, const char *model, size_t len)
{
    size_t i;

    if (p->any_model)
        return true;
    for (i = 0; i < p->n_models; i++)
        if (strlen(p->models[i]) == len && memcmp(p->models[i], model, len) == 0)
            return true;
    return false;
}

/* ---- waiting for a slot (DESIGN.md 7) ---- */

static void on_wait_timeout(evutil_socket_t fd, short what, void *arg);

/* Arms the wait's timer for what is left of <until_us> (monotonic). */
static bool
wait_arm(struct net_stream *s, uint64_t until_us)
{
    uint64_t now = net_mono_us(), left = until_us > now ? until_us - now : 0;
    struct timeval tv = {(time_t)(left / 1000000), (suseconds_t)(left % 1000000)};

    if (!s->wait_timer)
        s->wait_timer = evtimer_new(s->w->base, on_wait_timeout, s);
    if (!s->wait_timer)
        return false;
    evtimer_add(s->wait_timer, &tv);
    return true;
}

static void after_key_gate(struct net_stream *s);
static void busy_remove(struct net_stream *s, unsigned idx);

/* Every candidate left is full: wait for the first of them to free, in candidate
 * order, until the request's deadline. When none can be waited for (no deadline left,
 * slot_wait_secs 0), the request ends at once as busy. */
static void
hop_wait(struct net_stream *s)
{
    unsigned i, idx;

    if (!s->n_busy || net_mono_us() >= s->deadline_us) {
        on_wait_timeout(-1, 0, s);
        return;
    }
    gw_slots_wait_init(&s->wait, s, s->w->id);
    s->waiting = NET_WAIT_HOP;
    s->wait_gave_up = false;
    s->wait_t0_us = net_mono_us();
    for (i = 0; i < s->n_busy; i++) {
        if (gw_slots_wait_add(&s->wait, s->cands[s->busy[i]].prov->slots, s->busy[i])) {
            /* a slot freed meanwhile: taken for us, no grant message will come */
            gw_slots_wait_cancel(&s->wait, &idx);
            s->waiting = NET_WAIT_NONE;
            s->hop_slot = s->cands[idx].prov->slots;
            s->hop_queued_ms += ms_since(s->wait_t0_us, net_mono_us());
            s->cur = idx;
            busy_remove(s, idx);
            hop_send(s, &s->cands[idx]);
            return;
        }
    }
    if (!wait_arm(s, s->deadline_us)) {
        if (gw_slots_wait_cancel(&s->wait, &idx)) {
            s->wait_gave_up = true; /* its grant message is on its way */
            s->wait_won = idx;
        }
        return;
    }
}

static bool
has_slot_limit(const struct gw_conf_provider *p)
{
    return p->max_concurrent && p->slots;
}

/* True when the request's estimated input fits the context window of the model
 * candidate <c> is asked for (unknown windows fit). */
static bool
fits_context(struct net_stream *s, const struct gw_route_cand *c)
{
    struct gw_model_spec spec;

    gw_conf_model_spec(s->conf, c->prov, c->model, &spec);
    return !spec.context_window_known ||
           dl_openai_req_input_estimate(s->req) <= spec.context_window;
}

/* Takes candidate <idx> out of the full ones: it was granted and is tried now. */
static void
busy_remove(struct net_stream *s, unsigned idx)
{
    unsigned i;

    for (i = 0; i < s->n_busy; i++)
        if (s->busy[i] == idx) {
            memmove(&s->busy[i], &s->busy[i + 1], (s->n_busy - i - 1) * sizeof(s->busy[0]));
            s->n_busy--;
            return;
        }
}

/* Remembers candidate <idx> as full, once: after a granted hop fails, the walk goes on
 * past candidates already found full. */
static void
busy_add(struct net_stream *s, unsigned idx)
{
    unsigned i;

    for (i = 0; i < s->n_busy; i++)
        if (s->busy[i] == idx)
            return;
    if (s->n_busy < GW_ROUTE_MAX)
        s->busy[s->n_busy++] = idx;
}

static void
hop_next(struct net_stream *s)
{
    enum gw_code code;

    while (s->cur < s->n_cands && s->row->n_attempts < GW_ROW_MAX_ATTEMPTS) {
        const struct gw_route_cand *c = &s->cands[s->cur];
        struct gw_upfacts f;

        /* Passed over without an attempt: a shape this build does not convert to. */
        if (!spoken(c->prov) || c->state == GW_CAND_DISABLED) {
            s->cur++;
            continue;
        }
        if (!prov_lists(c->prov, c->model, c->model_len)) {
            attempt_add(s, c, GW_OUT_SKIPPED_NO_MODEL);
            s->cur++;
            continue;
        }
        /* A paused member is skipped, unless it is the pick: when every candidate is
         * paused, the one whose pause ends first is tried rather than refusing. */
        if (c->state == GW_CAND_PAUSED && (int)s->cur != s->pick) {
            gw_upstate_facts(c->prov->state, net_now_ms(), &f);
            if (f.paused_until_ms) {
                attempt_add(s, c, GW_OUT_SKIPPED_PAUSED);
                s->cur++;
                continue;
            }
        }
        if (!fits_context(s, c)) {
            /* DESIGN.md 9: re-route to a candidate whose context window fits */
            attempt_add(s, c, GW_OUT_SKIPPED_CONTEXT);
            s->context_skipped = true;
            s->cur++;
            continue;
        }
        if (c->prov->dialect != GW_DIALECT_OPENAI) {
            /* Converted before a slot is taken: a request the shape cannot express
             * passes this candidate over (s->unconvertible says why). */
            code = render_body(s, s->cur);
            if (code == GW_E_UNCONVERTIBLE) {
                s->cur++;
                continue;
            }
            if (code != GW_OK) {
                stream_refuse(s, code, "out of memory", true);
                return;
            }
        }
        /* Every hop holds a slot, so in-flight counts show without a limit too
         * (max_concurrent 0: the try always succeeds). */
        if (c->prov->slots && !gw_slots_try(c->prov->slots)) {
            /* Full: the sticky upstream is waited for; others are skipped as busy. */
            busy_add(s, (unsigned)s->cur);
            if (c->sticky) {
                s->n_busy = 1;
                s->busy[0] = (unsigned)s->cur;
                hop_wait(s);
                return;
            }
            if (!s->busy_noted[s->cur])
                attempt_add(s, c, GW_OUT_SKIPPED_BUSY);
            s->cur++;
            continue;
        }
        s->hop_slot = c->prov->slots;
        hop_send(s, c);
        return;
    }
    if (s->n_busy) {
        /* every remaining candidate was full: wait for the first to free (after a
         * failure too; when none frees, the last real failure is answered) */
        hop_wait(s);
        return;
    }
    if (s->context_skipped && !s->reached_upstream) {
        stream_refuse(s, GW_E_CONTEXT_LENGTH,
                      "the request does not fit the context window of any upstream model", true);
        return;
    }
    if (s->unconvertible[0] && !s->reached_upstream) {
        stream_refuse(s, GW_E_UNCONVERTIBLE, s->unconvertible, true);
        return;
    }
    /* Every candidate failed, none with an answer of its own to pass back. */
    code = s->fail_code == GW_E_UPSTREAM_TIMEOUT ? GW_E_UPSTREAM_TIMEOUT : GW_E_UPSTREAM_FAILED;
    stream_settle(s, gw_code_http_status(code), code, GW_OUT_FAILED);
    refusal_on(&s->sink, s->id, code, "every upstream for this model failed", NULL, 0);
    stream_finish(s, gw_code_http_status(code), code, GW_OUT_FAILED);
}

/* The wait ran out (or could not start): the key gate answers gw.key_busy; an upstream
 * wait answers gw.busy_all when no hop reached an upstream, else the last failure. */
static void
on_wait_timeout(evutil_socket_t fd, short what, void *arg)
{
    struct net_stream *s = arg;
    struct retry_hdrs rh;
    unsigned idx;
    int kind = s->waiting;

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (kind != NET_WAIT_NONE) {
        if (gw_slots_wait_cancel(&s->wait, &idx)) {
            /* a grant won the race: its message is on its way and is handled there */
            s->wait_gave_up = true;
            s->wait_won = idx;
            return;
        }
        s->waiting = NET_WAIT_NONE;
        s->row->queued_ms += ms_since(s->wait_t0_us, net_mono_us());
    }
    if (kind == NET_WAIT_KEY) {
        s->row->n_attempts = 0; /* refused before any hop: no attempt chain */
        stream_refuse_hdrs(s, GW_E_KEY_BUSY,
                           "this key already runs its max_concurrent requests; retry shortly", rh.h,
                           retry_headers(&rh, 1000, true), true);
        return;
    }
    if (!s->reached_upstream) {
        stream_refuse_hdrs(s, GW_E_BUSY_ALL,
                           "every upstream for this model is at its concurrency limit", rh.h,
                           retry_headers(&rh, 1000, true), true);
        return;
    }
    s->n_busy = 0;
    s->cur = s->n_cands;
    hop_next(s); /* answers the last real failure */
}

void
net_stream_on_grant(struct net_stream *s)
{
    unsigned idx = 0;
    int kind;

    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (s->zombie) {
        stream_free(s); /* finished while its grant was on the way (the slot went back) */
        return;
    }
    kind = s->waiting;
    if (kind == NET_WAIT_NONE)
        return;
    if (s->wait_gave_up)
        idx = s->wait_won;
    else if (!gw_slots_wait_cancel(&s->wait, &idx))
        return; /* cannot happen: a grant message means a win */
    s->waiting = NET_WAIT_NONE;
    if (s->wait_timer)
        evtimer_del(s->wait_timer);
    if (kind == NET_WAIT_KEY) {
        s->key_slot = s->client->slots;
        s->row->queued_ms += ms_since(s->wait_t0_us, net_mono_us());
        after_key_gate(s);
        return;
    }
    s->hop_slot = s->cands[idx].prov->slots;
    s->hop_queued_ms += ms_since(s->wait_t0_us, net_mono_us());
    s->row->queued_ms += ms_since(s->wait_t0_us, net_mono_us());
    s->cur = idx;
    busy_remove(s, idx);
    hop_send(s, &s->cands[idx]);
}

/* ---- entry points ---- */

static bool
path_is(const struct net_conn *c, const char *p)
{
    size_t n = strlen(p), len = c->rq.url.len;
    const char *q = c->rq.url.data ? memchr(c->rq.url.data, '?', len) : NULL;

    if (q)
        len = (size_t)(q - c->rq.url.data);
    return len == n && memcmp(c->rq.url.data, p, n) == 0;
}

static bool
gateway_key(const struct net_conn *c, struct gw_str *key)
{
    struct gw_str v;

    if (net_conn_header(c, GW_STR_LIT("authorization"), &v)) {
        if (v.len > 7 && strncasecmp(v.ptr, "bearer ", 7) == 0) {
            key->ptr = v.ptr + 7;
            key->len = v.len - 7;
            while (key->len && *key->ptr == ' ') {
                key->ptr++;
                key->len--;
            }
            return key->len > 0;
        }
    }
    if (net_conn_header(c, GW_STR_LIT("x-api-key"), &v) && v.len) {
        *key = v;
        return true;
    }
    return false;
}

static uint64_t
conversation_key(const char *client, struct gw_str session_id, const struct dl_openai_conv *cv)
{
    const void *parts[4];
    size_t lens[4], n = 0;

    parts[n] = client;
    lens[n++] = strlen(client);
    if (session_id.len) {
        parts[n] = "h";
        lens[n++] = 1;
        parts[n] = session_id.ptr;
        lens[n++] = session_id.len;
    } else if (cv->cache_key.len) {
        parts[n] = "k";
        lens[n++] = 1;
        parts[n] = cv->cache_key.ptr;
        lens[n++] = cv->cache_key.len;
    } else {
        parts[n] = cv->system.len ? cv->system.ptr : "";
        lens[n++] = cv->system.len;
        parts[n] = cv->first_user.len ? cv->first_user.ptr : "";
        lens[n++] = cv->first_user.len;
    }
    return gw_sticky_key(parts, lens, n);
}

uint64_t
net_conversation_key(const char *client, struct gw_str session_id, const struct dl_openai_req *r)
{
    struct dl_openai_conv cv;

    dl_openai_req_conversation(r, &cv);
    return conversation_key(client, session_id, &cv);
}

/* True when <model> names a group whose order can change between requests
 * (load-balance, url-test, cheapest): there a conversation is kept on its upstream.
 * In a fallback group (and the implicit one) the order is the file order anyway, so
 * the body is not scanned a second time for a conversation key. */
static bool
order_varies(const struct gw_conf *c, struct gw_str model)
{
    const struct gw_conf_group *g = gw_conf_group_find(c, model.ptr, model.len);

    return g && g->type != GW_GROUP_FALLBACK;
}

/* The conversation this request belongs to (DESIGN.md 5): a session header when the
 * client sends one, else what the dialect says identifies it. */
static void
conversation(struct net_stream *s)
{
    static const struct gw_str session_headers[] = {
        GW_STR_LIT("x-claude-code-session-id"),
        GW_STR_LIT("x-session-id"),
        GW_STR_LIT("session_id"),
    };
    struct dl_openai_conv cv;
    struct gw_str v, id = {NULL, 0};
    size_t i;

    for (i = 0; i < sizeof(session_headers) / sizeof(session_headers[0]) && !id.len; i++)
        if (net_conn_header(s->conn, session_headers[i], &v) && v.len)
            id = v;
    dl_openai_req_conversation(s->req, &cv);
    s->conv = conversation_key(s->client->name, id, &cv);
    s->within_turn = cv.last_is_tool;
}

/* The routing order puts paused members last; they are recorded as skipped now, in
 * their place at the head of the chain, and taken out of the list (DESIGN.md 6: a hop
 * that cannot serve is recorded with its reason). The pick stays even when paused:
 * when every candidate is paused, the one whose pause ends first is tried. */
static void
skip_paused(struct net_stream *s)
{
    size_t i, k = 0;

    for (i = 0; i < s->n_cands; i++) {
        const struct gw_route_cand *c = &s->cands[i];

        if (c->state == GW_CAND_PAUSED && (int)i != s->pick && spoken(c->prov) &&
            s->row->n_attempts < GW_ROW_MAX_ATTEMPTS) {
            attempt_add(s, c, GW_OUT_SKIPPED_PAUSED);
            continue;
        }
        if ((int)i == s->pick)
            s->pick = (int)k;
        s->cands[k++] = s->cands[i];
    }
    s->n_cands = k;
    /* Full members are also put last by the router, behind every free one; they stay in
     * the list (they may be waited for), and their skip is noted at the head of the
     * chain once. When none is free (the pick is full), hop_next meets them in order. */
    if (s->pick < 0 || s->cands[s->pick].state != GW_CAND_OK)
        return;
    for (i = 0; i < s->n_cands; i++) {
        const struct gw_route_cand *c = &s->cands[i];

        if (c->state == GW_CAND_FULL && (int)i != s->pick && !c->sticky && spoken(c->prov) &&
            s->row->n_attempts < GW_ROW_MAX_ATTEMPTS) {
            attempt_add(s, c, GW_OUT_SKIPPED_BUSY);
            s->busy_noted[i] = true;
        }
    }
}
/* SHA-256 of <key>, reusing the digest of the connection's previous request when the
 * key is the same (a connection only ever compares against its own earlier key). */
static void
key_digest(struct net_conn *c, struct gw_str key, unsigned char digest[32])
{
    if (c->key_seen_len && key.len == c->key_seen_len &&
        memcmp(key.ptr, c->key_seen, key.len) == 0) {
        memcpy(digest, c->key_seen_digest, 32);
        return;
    }
    SHA256((const unsigned char *)key.ptr, key.len, digest);
    if (key.len <= NET_KEY_CACHE_MAX) {
        memcpy(c->key_seen, key.ptr, key.len);
        c->key_seen_len = (uint16_t)key.len;
        memcpy(c->key_seen_digest, digest, 32);
    }
}

/* The client whose gateway key <c>'s request carries, in <conf>; NULL with the refusal's
 * code and sentence in *<code>, *<why> when the key is missing or unknown. */
static const struct gw_conf_client *
client_of(struct net_conn *c, const struct gw_conf *conf, enum gw_code *code, const char **why)
{
    const struct gw_conf_client *cl;
    struct gw_str key;
    unsigned char digest[32];

    if (!gateway_key(c, &key)) {
        *code = GW_E_AUTH_MISSING_KEY;
        *why = "no gateway key: send Authorization: Bearer <key> or x-api-key";
        return NULL;
    }
    key_digest(c, key, digest);
    cl = gw_conf_client_by_digest(conf, digest);
    if (!cl) {
        *code = GW_E_AUTH_INVALID_KEY;
        *why = "the gateway key is not valid";
    }
    return cl;
}

/* The endpoints: which one a head asks for (method and path). */
enum endpoint {
    EP_NONE,    /* no such path: 404 */
    EP_METHOD,  /* a known path with another method: 405 */
    EP_CHAT,    /* POST /v1/chat/completions */
    EP_MODELS,  /* GET /v1/models, /v1/models/{id} */
    EP_HEALTHZ, /* GET /healthz */
    EP_READYZ,  /* GET /readyz */
};

static enum endpoint
endpoint_of(const struct net_conn *c)
{
    enum http_method m = c->rq.method;

    if (path_is(c, "/v1/chat/completions"))
        return m == HTTP_POST ? EP_CHAT : EP_METHOD;
    if (m == HTTP_GET && (path_is(c, "/v1/models") ||
                          (c->rq.url.len > 11 && memcmp(c->rq.url.data, "/v1/models/", 11) == 0)))
        return EP_MODELS;
    if (m == HTTP_GET && path_is(c, "/healthz"))
        return EP_HEALTHZ;
    if (m == HTTP_GET && path_is(c, "/readyz"))
        return EP_READYZ;
    return EP_NONE;
}

enum gw_code
net_pipeline_head(struct net_conn *c, const char **why)
{
    enum gw_code code = GW_OK;
    struct gw_conf *conf;

    switch (endpoint_of(c)) {
    case EP_NONE: *why = "no such endpoint"; return GW_E_NOT_FOUND;
    case EP_METHOD: *why = "use POST"; return GW_E_METHOD_NOT_ALLOWED;
    case EP_HEALTHZ:
    case EP_READYZ: return GW_OK; /* the stream takes its own snapshot */
    case EP_CHAT:
    case EP_MODELS: break;
    }
    /* The key is checked on the head, so a client without a valid one never has its
     * body read (DESIGN 4). The snapshot goes on to the stream, which reads the client
     * again from it once the body is in. */
    conf = gw_conf_acquire(&c->w->gt);
    if (conf && !client_of(c, conf, &code, why)) {
        gw_conf_release(conf);
        return code;
    }
    gw_conf_release(c->conf);
    c->conf = conf;
    return GW_OK;
}

/* Slot state for the routing engine: a full member sits the load-balance round out. */
static bool
prov_full(void *arg, const struct gw_conf_provider *p)
{
    unsigned max = 0, in_use = 0;

    (void)arg;
    if (!has_slot_limit(p))
        return false;
    gw_slots_stats(p->slots, &max, &in_use, NULL);
    return max && in_use >= max;
}

/* The key gate let the request in: from now on one deadline (failover.slot_wait_secs)
 * bounds every wait for an upstream slot (DESIGN.md 7). */
static void on_limit_wait(evutil_socket_t fd, short what, void *arg);

/* A key usage limit said no (DESIGN.md 8): 429 with the exact Retry-After. A calendar
 * limit tells the SDK not to retry (x-should-retry: false; OpenAI shape:
 * insufficient_quota); a rolling one may be retried. */
/* DESIGN.md 8: a running request reserves the cost of its input estimate at the input
 * price of the first candidate it will try (0 when that model has no price). */
static int64_t
input_cost_estimate(const struct net_stream *s)
{
    size_t i;

    for (i = 0; i < s->n_cands; i++) {
        const struct gw_route_cand *c = &s->cands[i];
        double price;

        if (!spoken(c->prov) || c->state == GW_CAND_DISABLED)
            continue;
        price = gw_conf_price_input(s->conf, c->prov, c->model);
        return price > 0 ? (int64_t)(price * (double)s->est_tokens + 0.5) : 0;
    }
    return 0;
}

static void
limit_refuse(struct net_stream *s, const struct gw_limit_verdict *v, bool calendar)
{
    struct retry_hdrs rh;
    size_t n = retry_headers(&rh, v->retry_after_ms, !calendar);

    s->row->n_attempts = 0; /* refused before any hop: no attempt chain (DESIGN.md 8) */
    stream_refuse_hdrs(s, v->code,
                       calendar
                           ? "this key's usage limit for the period is used up"
                           : "this key's rolling usage limit is reached; retry after the delay",
                       rh.h, n, true);
}

/* The rolling key limits (minute, hour): admitted now, waited for within the request's
 * deadline, or refused. The admission counts the request's reservation. */
static void
limit_admit(struct net_stream *s)
{
    struct gw_keylimits *k = s->client->usage;
    struct gw_limit_verdict v;
    struct gw_period cal;
    uint64_t now = net_now_ms();

    if (!k || !s->client->n_limits) {
        hop_next(s);
        return;
    }
    net_calendar(now, &cal);
    switch (gw_keylimits_admit(k, now, &cal, s->est_tokens, s->est_cost_micros, &s->quota, &v)) {
    case GW_LIMIT_OK:
        if (gw_keylimits_has_alerts(k))
            emit_alerts(s); /* a threshold crossed by the reservation: now, not at the end */
        hop_next(s);
        return;
    case GW_LIMIT_REFUSE_CALENDAR: limit_refuse(s, &v, true); return;
    case GW_LIMIT_WAIT_ROLLING:
        if (net_mono_us() + v.retry_after_ms * 1000 <= s->deadline_us) {
            struct timeval tv = {(time_t)(v.retry_after_ms / 1000),
                                 (suseconds_t)(v.retry_after_ms % 1000) * 1000};

            if (!s->limit_timer)
                s->limit_timer = evtimer_new(s->w->base, on_limit_wait, s);
            if (s->limit_timer && evtimer_add(s->limit_timer, &tv) == 0) {
                s->row->queued_ms += (uint32_t)v.retry_after_ms;
                return;
            }
        }
        limit_refuse(s, &v, false);
        return;
    }
}

static void
on_limit_wait(evutil_socket_t fd, short what, void *arg)
{
    struct net_stream *s = arg;

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    limit_admit(s);
}

static void
after_key_gate(struct net_stream *s)
{
    s->deadline_us = net_mono_us() + (uint64_t)s->conf->failover.slot_wait_secs * 1000000u;
    limit_admit(s);
}

/* The key's max_concurrent permit (held until the answer ends, streams included):
 * taken now, or waited for at most slot_wait_secs, then 429 gw.key_busy. */
static void
key_gate(struct net_stream *s)
{
    struct gw_slots *ks = s->client->slots;
    unsigned idx;

    /* Held without a limit too (max 0 always has room): the key view's in_flight. */
    if (!ks || gw_slots_try(ks)) {
        s->key_slot = ks;
        after_key_gate(s);
        return;
    }
    gw_slots_wait_init(&s->wait, s, s->w->id);
    s->waiting = NET_WAIT_KEY;
    s->wait_gave_up = false;
    s->wait_t0_us = net_mono_us();
    if (gw_slots_wait_add(&s->wait, ks, 0)) {
        gw_slots_wait_cancel(&s->wait, &idx); /* taken at once: no message will come */
        s->waiting = NET_WAIT_NONE;
        s->key_slot = ks;
        after_key_gate(s);
        return;
    }
    if (!s->conf->failover.slot_wait_secs ||
        !wait_arm(s, s->wait_t0_us + (uint64_t)s->conf->failover.slot_wait_secs * 1000000u))
        on_wait_timeout(-1, 0, s);
}

static void
chat_completions(struct net_stream *s)
{
    struct net_conn *c = s->conn;
    struct gw_buf why = {0};
    struct gw_str model;
    const char *why_auth;
    enum gw_code rc;

    s->client = client_of(c, s->conf, &rc, &why_auth);
    if (!s->client) {
        stream_refuse(s, rc, why_auth, false);
        return;
    }
    memcpy(s->row->client, s->client->name, strnlen(s->client->name, GW_NAME_MAX));
    /* The body now belongs to the stream: the conn may read the next request. */
    s->body = c->rq.body;
    memset(&c->rq.body, 0, sizeof(c->rq.body));
    s->body_held = c->body_held; /* its share of net_body_budget goes with it */
    c->body_held = 0;
    rc = dl_openai_req_parse(s->body.data, s->body.len, &s->req, &why);
    if (rc != GW_OK) {
        stream_refuse(s, rc, why.data ? why.data : "invalid request", true);
        gw_buf_fini(&why);
        return;
    }
    gw_buf_fini(&why);
    model = dl_openai_req_model(s->req);
    memcpy(s->row->model, model.ptr, model.len < GW_MODEL_MAX ? model.len : GW_MODEL_MAX);
    s->stream = dl_openai_req_is_stream(s->req);
    s->row->stream = s->stream;
    s->wants_usage = dl_openai_req_wants_usage(s->req);
    if (!gw_conf_client_allows(s->client, model.ptr, model.len)) {
        stream_refuse(s, GW_E_MODEL_NOT_ALLOWED, "this key may not use that model", true);
        return;
    }
    {
        struct gw_route_req rq;
        struct gw_route_result res;
        char sticky[GW_NAME_MAX + 1];

        memset(&rq, 0, sizeof(rq));
        rq.model = model.ptr;
        rq.model_len = model.len;
        rq.now_ms = net_now_ms();
        rq.is_full = prov_full;
        if (s->w->sticky && order_varies(s->conf, model))
            conversation(s);
        if (s->conv && gw_sticky_lookup(s->w->sticky, s->conv, rq.now_ms, s->within_turn, sticky))
            rq.sticky = sticky;
        if (gw_route_order(s->conf, &rq, true, s->cands, &res) != GW_OK || res.pick < 0) {
            stream_refuse(s, GW_E_MODEL_NOT_FOUND, "no upstream offers that model", true);
            return;
        }
        s->n_cands = res.n;
        s->pick = res.pick;
        skip_paused(s);
    }
    s->fail_code = GW_E_UPSTREAM_FAILED;
    if (s->client->usage && s->client->n_limits) {
        struct gw_limit_verdict v;
        struct gw_period cal;
        uint64_t now = net_now_ms();

        s->est_tokens = dl_openai_req_input_estimate(s->req);
        s->est_cost_micros = input_cost_estimate(s);
        /* DESIGN.md 7: calendar limits refuse before anything waits */
        net_calendar(now, &cal);
        if (gw_keylimits_check_calendar(s->client->usage, now, &cal, s->est_tokens,
                                        s->est_cost_micros, &v) == GW_LIMIT_REFUSE_CALENDAR) {
            limit_refuse(s, &v, true);
            return;
        }
    }
    key_gate(s);
}

/* ---- model listing (DESIGN.md 9): GET /v1/models, GET /v1/models/{id} ---- */

static bool
entry_listed(const struct dl_model_entry *v, size_t n, const char *id)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (strcmp(v[i].id, id) == 0)
            return true;
    return false;
}

static void
entry_spec(const struct gw_conf *c, const struct gw_conf_provider *p, const char *model,
           struct dl_model_entry *e)
{
    struct gw_model_spec spec;

    gw_conf_model_spec(c, p, model, &spec);
    e->context_window = spec.context_window_known ? spec.context_window : 0;
    e->max_output_tokens = spec.max_output_tokens_known ? spec.max_output_tokens : 0;
}

/* Groups first (described by their first member), then every model an enabled provider
 * lists by name, described by the first upstream offering it; only what the key may use. */
static size_t
models_collect(const struct gw_conf *c, const struct gw_conf_client *cl, struct dl_model_entry *v,
               size_t max)
{
    size_t n = 0, i, j;

    for (i = 0; i < c->n_groups && n < max; i++) {
        const struct gw_conf_group *g = &c->groups[i];
        struct dl_model_entry *e = &v[n];

        if (!gw_conf_client_allows(cl, g->name, strlen(g->name)))
            continue;
        memset(e, 0, sizeof(*e));
        e->id = g->name;
        e->owned_by = "gw";
        if (g->n_members) {
            const struct gw_conf_member *m = &g->members[0];
            const struct gw_conf_provider *p =
                gw_conf_provider_find(c, m->provider, strlen(m->provider));

            if (p)
                entry_spec(c, p, m->model ? m->model : g->model ? g->model : g->name, e);
        }
        n++;
    }
    for (i = 0; i < c->n_providers; i++) {
        const struct gw_conf_provider *p = &c->providers[i];

        if (!p->enabled)
            continue;
        for (j = 0; j < p->n_models && n < max; j++) {
            const char *id = p->models[j];

            if (strcmp(id, "*") == 0 || entry_listed(v, n, id) ||
                !gw_conf_client_allows(cl, id, strlen(id)))
                continue;
            memset(&v[n], 0, sizeof(v[n]));
            v[n].id = id;
            v[n].owned_by = p->name;
            entry_spec(c, p, id, &v[n]);
            n++;
        }
    }
    return n;
}

static void
models_listing(struct net_stream *s)
{
    struct net_conn *c = s->conn;
    struct dl_model_entry *v;
    struct gw_buf body = {0};
    const char *why_auth;
    enum gw_code rc;
    size_t max = s->conf->n_groups, n, i, plen = 0;
    const char *q, *id = NULL;

    s->client = client_of(c, s->conf, &rc, &why_auth);
    if (!s->client) {
        stream_refuse(s, rc, why_auth, false);
        return;
    }
    for (i = 0; i < s->conf->n_providers; i++)
        max += s->conf->providers[i].n_models;
    v = gw_calloc(max ? max : 1, sizeof(*v));
    if (!v) {
        stream_refuse(s, GW_E_NOMEM, "out of memory", false);
        return;
    }
    n = models_collect(s->conf, s->client, v, max);
    q = memchr(c->rq.url.data, '?', c->rq.url.len);
    plen = q ? (size_t)(q - c->rq.url.data) : c->rq.url.len;
    if (plen > 11) { /* "/v1/models/" + id */
        char *want = gw_strndup(c->rq.url.data + 11, plen - 11);

        for (i = 0; want && i < n; i++)
            if (strcmp(v[i].id, want) == 0)
                id = v[i].id;
        gw_free(want);
        if (!id) {
            gw_free(v);
            stream_refuse(s, GW_E_MODEL_NOT_FOUND, "no such model for this key", false);
            return;
        }
        for (i = 0; i < n; i++)
            if (v[i].id == id)
                break;
        if (dl_openai_models_render(&v[i], 1, true, &body) != GW_OK)
            gw_buf_fini(&body);
    } else if (dl_openai_models_render(v, n, false, &body) != GW_OK) {
        gw_buf_fini(&body);
    }
    gw_free(v);
    if (!body.data) {
        stream_refuse(s, GW_E_NOMEM, "out of memory", false);
        return;
    }
    answer(s, 200, "application/json", body.data, body.len);
    gw_buf_fini(&body);
    stream_finish(s, 200, GW_OK, GW_OUT_OK);
}

void
net_pipeline_start(struct net_conn *c)
{
    struct net_worker *w = c->w;
    struct net_stream *s;

    s = gw_calloc(1, sizeof(*s));
    if (s) {
        /* The attempts are cleared one by one as they are added (attempt_add): zeroing
         * the whole 3.7 KB row on every request showed in profiles. */
        s->row = gw_malloc(sizeof(*s->row));
        if (s->row)
            memset(s->row, 0, offsetof(struct gw_row, attempts));
    }
    if (!s || !s->row) {
        if (s)
            gw_free(s);
        c->flags |= NET_CONN_F_CLOSE_AFTER;
        net_respond_error(c, NULL, GW_E_NOMEM, "out of memory", NULL, 0);
        net_conn_response_done(c);
        return;
    }
    s->magic_ = NET_STREAM_MAGIC;
    s->w = w;
    s->conn = c;
    net_conn_sink(c, &s->sink);
    c->stream = s;
    s->t0_us = net_mono_us();
    gw_sse_init(&s->sse, 0);
    gw_sse_init(&s->sse_chat, 0);
    net_worker_request_id(w, s->id);
    memcpy(s->row->id, s->id, sizeof(s->row->id));
    s->row->ts_ms = net_now_ms();
    s->row->ttfb_ms = -1;
    s->conf = c->conf ? c->conf : gw_conf_acquire(&w->gt); /* the head check's, taken over */
    c->conf = NULL;
    if (!s->conf) {
        stream_refuse(s, GW_E_SHUTTING_DOWN, "the gateway is shutting down", false);
        return;
    }
    switch (endpoint_of(c)) {
    case EP_CHAT: chat_completions(s); return;
    case EP_MODELS:
        GW_FREE(s->row); /* not an API call: no row */
        models_listing(s);
        return;
    case EP_HEALTHZ:
        GW_FREE(s->row);
        answer(s, 200, "application/json", "{\"status\":\"ok\"}", 15);
        stream_finish(s, 200, GW_OK, GW_OUT_OK);
        return;
    case EP_READYZ:
        GW_FREE(s->row);
        if (w->draining) {
            stream_refuse(s, GW_E_SHUTTING_DOWN, "the gateway is draining", false);
        } else {
            answer(s, 200, "application/json", "{\"status\":\"ready\"}", 18);
            stream_finish(s, 200, GW_OK, GW_OUT_OK);
        }
        return;
    case EP_METHOD:
        GW_FREE(s->row);
        stream_refuse(s, GW_E_METHOD_NOT_ALLOWED, "use POST", false);
        return;
    case EP_NONE:
        GW_FREE(s->row);
        stream_refuse(s, GW_E_NOT_FOUND, "no such endpoint", false);
        return;
    }
}

void
net_stream_client_gone(struct net_stream *s)
{
    unsigned idx;

    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    s->conn = NULL;
    if (s->waiting != NET_WAIT_NONE) {
        /* Gave up waiting. When a grant already won, its slot is ours to give back
         * and its message is on the way: the stream stays (zombie) until it arrives. */
        bool won = s->wait_gave_up;

        if (!won && gw_slots_wait_cancel(&s->wait, &idx)) {
            won = true;
            s->wait_won = idx;
        }
        if (won) {
            struct gw_slots *sl =
                s->waiting == NET_WAIT_KEY ? s->client->slots : s->cands[s->wait_won].prov->slots;

            gw_slots_release(sl, net_slots_granted, s->w->ws);
            s->zombie = true;
        }
        s->waiting = NET_WAIT_NONE;
        if (s->wait_timer)
            evtimer_del(s->wait_timer);
    }
    if (s->upx) {
        net_upx_cancel(s->upx); /* closes the upstream connection: it stops generating */
        s->upx = NULL;
    }
    if (attempt_cur(s) && attempt_cur(s)->outcome == GW_OUT_NONE) {
        /* a hop was in flight (a skipped or failed attempt, or a wait, is not one) */
        const struct gw_conf_provider *p = s->cands[s->cur < s->n_cands ? s->cur : 0].prov;

        hop_timers_stop(s);
        attempt_end(s, GW_OUT_CANCELLED, s->up_status, GW_E_CLIENT_CANCELLED);
        if (s->headers_sent)
            memcpy(s->row->upstream, p->name, strnlen(p->name, GW_NAME_MAX));
    }
    gw_code_count(GW_E_CLIENT_CANCELLED);
    stream_finish(s, 499, GW_E_CLIENT_CANCELLED, GW_OUT_CANCELLED);
}

void
net_stream_on_drain(struct net_stream *s)
{
    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    if (s->paused && s->upx) {
        s->paused = false;
        net_upx_resume(s->upx);
    }
}
