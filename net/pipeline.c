/* SPDX-License-Identifier: MIT
 * net/pipeline.c - the request pipeline's entry and the stream's life: the endpoint
 * table (net_pipeline_head judges a head before its body is read, net_pipeline_start
 * runs a complete request), plain answers and refusals through the sink (net/sink.h),
 * and the end of every exchange: the row closed, key limits settled, slots given back
 * (net_stream_settle) before the answer's last bytes, then the row handed to the store
 * and the stream freed (net_stream_finish). The stages live in their own files: auth.c,
 * admit.c, attempt.c, relay.c, listing.c.
 * Owns:    each net_stream: its config reference, parsed request, bodies, the
 *          current upstream exchange (net_upx) and the row until it is submitted.
 * Threads: the owning worker only; never blocks.
 * See:     net/pipeline-priv.h, net/http1.c, docs/ARCHITECTURE.md
 */
#include "net/pipeline-priv.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/cost.h"
#include "core/events.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/retry.h"
#include "core/route.h"
#include "core/row.h"
#include "core/slots.h"
#include "core/speed.h"
#include "core/sse.h"
#include "core/sticky.h"
#include "dialects/anthropic.h"
#include "dialects/gemini.h"
#include "dialects/json_scan.h"
#include "dialects/openai.h"
#include "net/calendar.h"
#include "net/decode.h"
#include "net/logger.h"
#include "net/metrics.h"
#include "net/report.h"
#include "net/sink.h"
#include "net/upstream.h"
#include "store/store.h"

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

void
net_slot_give_back(struct net_stream *s, struct gw_slots **sp)
{
    if (*sp) {
        gw_slots_release(*sp, net_slots_granted, s->w->ws);
        *sp = NULL;
    }
}

void
net_worker_request_id(struct net_worker *w, char out[33])
{
    unsigned char b[16];
    uint64_t ms = net_now_ms();
    int i;

    /* The wall clock's milliseconds first, big-endian, so that ids (and the Responses
     * ids made of them, the keys of the store's "responses") sort by time: a key that
     * sorts near the last lands in the tree's last leaf instead of a random one. */
    for (i = 0; i < 6; i++)
        b[i] = (unsigned char)(ms >> (40 - 8 * i));
    for (i = 0; i < 2; i++) {
        /* xorshift128+ for the other 80 bits: ids need to be unique, not secret. */
        uint64_t s1 = w->rng[0], s0 = w->rng[1], r;

        w->rng[0] = s0;
        s1 ^= s1 << 23;
        w->rng[1] = s1 ^ s0 ^ (s1 >> 17) ^ (s0 >> 26);
        r = w->rng[1] + s0;
        memcpy(b + 6 + 5 * i, &r, 5);
    }
    gw_hex_encode(b, sizeof(b), out);
}

size_t
net_retry_headers(struct net_retry_hdrs *r, uint64_t retry_ms, bool should_retry)
{
    uint64_t secs = (retry_ms + 999) / 1000;

    r->h[0] = (struct net_hdr){GW_STR_LIT("retry-after"),
                               {r->secs, gw_fmt_u64(r->secs, secs ? secs : 1)}};
    r->h[1] = (struct net_hdr){GW_STR_LIT("retry-after-ms"), {r->ms, gw_fmt_u64(r->ms, retry_ms)}};
    r->h[2] = (struct net_hdr){GW_STR_LIT("x-should-retry"),
                               should_retry ? GW_STR_LIT("true") : GW_STR_LIT("false")};
    return 3;
}

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

/* x-gw-dropped (DESIGN.md 11): the fields a conversion dropped, comma-separated, in
 * the arena. False when there are none. */
bool
net_stream_dropped_header(struct net_stream *s, struct net_hdr *out)
{
    struct gw_buf b = {0};
    size_t i;
    bool ok = true;

    if (!s->dropped.n)
        return false;
    for (i = 0; i < s->dropped.n; i++) {
        if (i)
            ok &= gw_buf_append(&b, ", ", 2) == GW_OK;
        ok &= gw_buf_append_str(&b, s->dropped.name[i]) == GW_OK;
    }
    if (s->dropped.more)
        ok &= gw_buf_append(&b, ", ...", 5) == GW_OK;
    out->name = GW_STR_LIT("x-gw-dropped");
    out->value =
        ok ? gw_arena_str(&s->arena, (struct gw_str){b.data, b.len}) : (struct gw_str){NULL, 0};
    gw_buf_fini(&b);
    return out->value.ptr != NULL;
}

void
net_stream_answer_with(struct net_stream *s, int status, const char *ctype,
                       const struct net_hdr *extra, size_t n_extra, const char *body, size_t len)
{
    answer_on(&s->sink, status, s->id, ctype, extra, n_extra, body, len);
}

void
net_stream_answer(struct net_stream *s, int status, const char *ctype, const char *body, size_t len)
{
    struct net_hdr dropped;
    bool d = net_stream_dropped_header(s, &dropped);

    answer_on(&s->sink, status, s->id, ctype, d ? &dropped : NULL, d ? 1 : 0, body, len);
}

/* What <c>'s request head asks for: the endpoint and the client's API shape (refusals
 * made before the pipeline knows more are answered in it), net/endpoint.c. */
static void
conn_target(const struct net_conn *c, struct net_target *t)
{
    unsigned hints = 0;
    struct gw_str v;

    if (net_conn_header(c, GW_STR_LIT("anthropic-version"), &v))
        hints |= NET_HINT_ANTHROPIC;
    if (net_conn_header(c, GW_STR_LIT("x-goog-api-key"), &v) ||
        net_conn_header(c, GW_STR_LIT("x-goog-api-client"), &v))
        hints |= NET_HINT_GOOGLE;
    net_target_of(c->rq.method,
                  (struct gw_str){c->rq.url.data ? c->rq.url.data : "", c->rq.url.len}, hints, t);
}

enum dl_shape
net_conn_shape(const struct net_conn *c)
{
    struct net_target t;

    conn_target(c, &t);
    return t.shape;
}

/* A gateway refusal with <code> on <k>: x-gw-code and an error body in the client's
 * <shape> with the code inside. */
void
net_sink_refusal(struct net_sink *k, enum dl_shape shape, const char *req_id, enum gw_code code,
                 const char *message, const struct net_hdr *extra, size_t n_extra)
{
    const struct dl_shape_ops *ops = dl_shape_ops(shape);
    struct net_hdr h[NET_ANSWER_MAX_HDRS - 2];
    struct gw_buf body = {0};
    size_t n = 0, i;

    gw_code_count(code);
    if (ops)
        ops->error_render(code, gw_str_c(message), &body);
    else
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
    {
        /* Refused before a stream existed (at the head: its key, its size): the request's
         * line, with the id its answer carries. */
        struct gw_log_ctx ctx = {(int)c->w->id, c->id, req_id};

        net_report_unrecorded(&ctx, NULL, gw_code_http_status(code), code, GW_OUT_REFUSED, 0);
    }
    net_conn_sink(c, &k);
    net_sink_refusal(&k, net_conn_shape(c), req_id, code, message, extra, n_extra);
    net_metrics_refused(c->w->id, gw_code_http_status(code), code);
}

/* ---- the worker's stream cache ----
 * A freed stream goes to its worker's cache (at most NET_STREAM_CACHE_MAX), keeping the
 * memory of its body, upstream body, hop path and credential, answer and error buffers
 * (up to NET_STREAM_KEEP_BUF each; the body's goes back to a connection:
 * net_stream_take_body) and up to NET_STREAM_KEEP_ARENA_BLOCKS of its arena's blocks; a
 * new one comes from there first. The profile showed the
 * stream's malloc and the buffers' regrowth on every request (docs/perf.md). The cache
 * holds as many streams as a busy worker has in flight: with 16, a closed loop of 64
 * connections freed and allocated again most of its streams, a loop turn's answers ending
 * more streams than the cache kept (malloc was 4% of gwd's cycles under perf). It never
 * holds more than were in flight at once. Streams are freed on their own worker (a
 * zombie's grant comes back to it), so the cache is the worker's alone. */
#define NET_STREAM_CACHE_MAX 256u
#define NET_STREAM_KEEP_BUF (16u * 1024u)
#define NET_STREAM_KEEP_ARENA_BLOCKS 4u /* of 4 KB: a converted request's canonical form */

static void
stream_bufs_fini(struct net_stream *s)
{
    gw_buf_fini(&s->body);
    gw_buf_fini(&s->upbody);
    gw_buf_fini(&s->hop_path);
    gw_buf_fini(&s->hop_auth); /* wiped by net_hop_send once sent */
    gw_buf_fini(&s->out);
    gw_buf_fini(&s->rendered);
    gw_buf_fini(&s->errbody);
    gw_arena_fini(&s->arena);
    gw_free(s->row_mem);
}

static void
stream_cache_put(struct net_stream *s)
{
    struct net_worker *w = s->w;

    if (w->n_stream_cache >= NET_STREAM_CACHE_MAX) {
        stream_bufs_fini(s);
        gw_free(s);
        return;
    }
    gw_buf_recycle(&s->body, NET_STREAM_KEEP_BUF);
    gw_buf_recycle(&s->upbody, NET_STREAM_KEEP_BUF);
    gw_buf_recycle(&s->hop_path, NET_STREAM_KEEP_BUF);
    gw_buf_recycle(&s->hop_auth, NET_STREAM_KEEP_BUF);
    gw_buf_recycle(&s->out, NET_STREAM_KEEP_BUF);
    gw_buf_recycle(&s->rendered, NET_STREAM_KEEP_BUF);
    gw_buf_recycle(&s->errbody, NET_STREAM_KEEP_BUF);
    s->cache_next = w->stream_cache;
    w->stream_cache = s;
    w->n_stream_cache++;
}

/* A stream with its first NET_STREAM_ZEROED bytes zeroed and its kept buffers empty,
 * or NULL when out of memory. */
static struct net_stream *
stream_cache_get(struct net_worker *w)
{
    struct net_stream *s = w->stream_cache;

    if (!s) {
        s = gw_malloc(sizeof(*s));
        if (s)
            memset(s, 0, NET_STREAM_ZEROED_NEW);
        return s;
    }
    w->stream_cache = s->cache_next;
    w->n_stream_cache--;
    memset(s, 0, NET_STREAM_ZEROED);
    return s;
}

void
net_stream_cache_free(struct net_worker *w)
{
    while (w->stream_cache) {
        struct net_stream *s = w->stream_cache;

        w->stream_cache = s->cache_next;
        stream_bufs_fini(s);
        gw_free(s);
    }
    w->n_stream_cache = 0;
}

void
net_stream_take_body(struct net_stream *s, struct net_conn *c)
{
    struct gw_buf mine = s->body; /* empty; its memory, if any, kept from a freed stream */

    s->body = c->rq.body;
    c->rq.body = mine;           /* the next request is read into it: no allocation */
    s->body_held = c->body_held; /* its share of net_body_budget goes with it */
    c->body_held = 0;
}

void
net_stream_free(struct net_stream *s)
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
    if (s->quota_timer)
        event_free(s->quota_timer);
    dl_openai_req_free(s->req);
    net_resp_fini(s);
    net_body_release(&s->body_held);
    gw_sse_fini(&s->sse);
    dl_bedrock_es_fini(&s->es);
    gw_arena_reset(&s->arena, NET_STREAM_KEEP_ARENA_BLOCKS);
    gw_free(s->qhdrs);
    gw_conf_release(s->conf);
    s->magic_ = 0;
    stream_cache_put(s);
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

void
net_key_alerts_emit(struct gw_keylimits *k, const struct gw_log_ctx *ctx)
{
    struct gw_limit_alert a[4];
    size_t n, i;

    n = gw_keylimits_take_alerts(k, a, sizeof(a) / sizeof(a[0]));
    for (i = 0; i < n; i++) {
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
        gw_event_push_about(GW_EV_KEY_LIMIT_ALERT, a[i].client, ctx->req, json);
        GW_LOG(GW_LOG_INFO, ctx, "key_limit_alert", "%s", json);
    }
}

void
net_stream_emit_alerts(struct net_stream *s)
{
    struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

    net_key_alerts_emit(s->client->usage, &ctx);
}

/* Closes the row (its totals filled; net_stream_finish hands it to the store) and gives
 * back what the request held: its key-limit reservation and its credential's lease are
 * settled, its slot and permit released. <status>/<code>/<outcome> describe what the
 * client got. Called before the last bytes of the answer are written, so that a client
 * sending its next request as soon as it has read this answer finds the limits already
 * settled (a refused request's reservation given back): the settlements go to the
 * worker, which applies them at the loop turn's end before those bytes leave
 * (net/settle.c). net_stream_finish calls it when the caller did not. */
void
net_stream_settle(struct net_stream *s, int status, enum gw_code code, enum gw_outcome outcome)
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
        r->duration_ms = net_ms_since(s->t0_us, now);
        r->ttfb_ms = s->t_first_us ? (int32_t)net_ms_since(s->t0_us, s->t_first_us) : -1;
        if (s->usage_seen) {
            r->usage = s->usage;
        } else if (r->n_attempts > 0 && (s->headers_sent || s->content_bytes)) {
            /* An answer without usage: the gateway's estimate, marked so. */
            r->usage.input_tokens = s->est_input;
            r->usage.output_tokens = (s->content_bytes + 3) / 4;
            r->usage.estimated = true;
        }
        if (s->dropped.n) {
            /* The dropped fields, ", "-separated, as many as fit. */
            size_t off = 0, i;

            for (i = 0; i < s->dropped.n; i++) {
                size_t need = s->dropped.name[i].len + (off ? 2 : 0);

                if (off + need > GW_ROW_DROPPED_LEN)
                    break;
                if (off) {
                    memcpy(r->dropped + off, ", ", 2);
                    off += 2;
                }
                memcpy(r->dropped + off, s->dropped.name[i].ptr, s->dropped.name[i].len);
                off += s->dropped.name[i].len;
            }
            r->dropped[off] = '\0';
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
        /* Both settled at the loop turn's end with the turn's others (net/settle.c),
         * before this answer's bytes leave. */
        if (s->qset && s->qlease.active) {
            /* The hop's credential counts what the request really used, however long it
             * streamed (hops given up at slow start settled their own). */
            uint64_t t = gw_quota_usage_tokens(&r->usage);

            net_settle_quota(s->w, s->qset, &s->qlease,
                             t > s->given_up_input ? t - s->given_up_input : 0, true);
        }
        if (s->quota.active && s->client && s->client->usage)
            net_settle_limits(s->w, s->client->usage, &s->quota, &r->usage, r->cost_micros,
                              gw_keylimits_row_counts(r), s->conn ? s->conn->id : 0, s->id);
        else if (s->client && s->client->usage && gw_keylimits_has_alerts(s->client->usage))
            net_stream_emit_alerts(s); /* a refusal's: the limit stopped it */
        net_metrics_count(s->w->id, r);
        {
            struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

            net_report_request(r, &ctx); /* the `request` line, request_finished */
        }
        s->row = NULL;
        s->row_closed = r; /* to the store once the answer is out (net_stream_finish) */
    } else if (s->tgt.ep != NET_EP_HEALTHZ && s->tgt.ep != NET_EP_READYZ) {
        /* No row (not recorded, or not an API call): its line all the same; probes of
         * /healthz and /readyz are left out, they would drown the rest. */
        struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

        net_report_unrecorded(&ctx, s->client ? s->client->name : NULL, status, code, outcome,
                              net_ms_since(s->t0_us, now));
    }
    net_settle_quota(s->w, s->qset, &s->qlease, 0, true); /* no row: a lease held counts as sent */
    net_slot_give_back(s, &s->hop_slot);
    net_slot_give_back(s, &s->key_slot);
}

/* After the answer: settles the stream if the caller did not, hands its row to the
 * store (a copy: the row's memory stays the stream's, or goes to the worker, below),
 * frees the stream and lets the connection go on. Every stream ends here (a zombie's
 * memory is freed later, net_stream_free). The row goes after the answer was handed to
 * the connection, so that its encoding and the queue are not on the answer's path (when
 * the answer's bytes wait in the cork for the turn's settlements, the worker hands the
 * row over after them, net/settle.c); nothing the client sees next depends on it (the
 * limits were settled before, in net_stream_settle; a row is the store's once its batch
 * commits). */
void
net_stream_finish(struct net_stream *s, int status, enum gw_code code, enum gw_outcome outcome)
{
    struct net_conn *c = s->conn;

    net_stream_settle(s, status, code, outcome);
    if (s->row_closed && s->w->store) {
        if (s->row_closed == s->row_mem && net_settle_row(s->w, s->row_closed))
            s->row_mem = NULL; /* the worker's, to the store after the answer's bytes */
        else
            store_row_submit(s->w->store, s->row_closed);
    }
    s->row_closed = NULL;
    if (c) {
        c->stream = NULL;
        s->conn = NULL;
    }
    if (!s->zombie)
        net_stream_free(s); /* a zombie is freed when its grant message arrives */
    if (c)
        net_conn_response_done(c);
}

/* A refusal that keeps no row (before authentication, an unknown path, shutting down):
 * counted in /metrics all the same, then dropped. */
static void
drop_row(struct net_stream *s, enum gw_code code)
{
    struct gw_row *r = s->row;

    if (r) {
        r->status = (uint16_t)gw_code_http_status(code);
        r->code = (uint16_t)code;
        r->outcome = GW_OUT_REFUSED;
        r->duration_ms = net_ms_since(s->t0_us, net_mono_us());
        r->ttfb_ms = -1;
        net_metrics_count(s->w->id, r);
    }
    s->row = NULL;
}

/* A refusal by the gateway: error body in the client's shape, row with no attempts. */
void
net_stream_refuse_hdrs(struct net_stream *s, enum gw_code code, const char *message,
                       const struct net_hdr *extra, size_t n_extra, bool record)
{
    if (!record)
        drop_row(s, code);
    net_stream_settle(s, gw_code_http_status(code), code, GW_OUT_REFUSED);
    net_sink_refusal(&s->sink, s->client_shape, s->id, code, message, extra, n_extra);
    net_stream_finish(s, gw_code_http_status(code), code, GW_OUT_REFUSED);
}

void
net_stream_refuse(struct net_stream *s, enum gw_code code, const char *message, bool record)
{
    if (!record)
        drop_row(s, code);
    net_stream_settle(s, gw_code_http_status(code), code, GW_OUT_REFUSED);
    net_sink_refusal(&s->sink, s->client_shape, s->id, code, message, NULL, 0);
    net_stream_finish(s, gw_code_http_status(code), code, GW_OUT_REFUSED);
}

enum gw_code
net_pipeline_head(struct net_conn *c, const char **why)
{
    enum gw_code code = GW_OK;
    const struct gw_conf_client *cl;
    struct gw_conf *conf;

    /* Every request's head comes here before net_pipeline_start, which reads it back. */
    conn_target(c, &c->tgt);
    switch (c->tgt.ep) {
    case NET_EP_NONE: *why = "no such endpoint"; return GW_E_NOT_FOUND;
    case NET_EP_METHOD:
        *why = "this method is not served on this path";
        return GW_E_METHOD_NOT_ALLOWED;
    case NET_EP_HEALTHZ:
    case NET_EP_READYZ: return GW_OK; /* the stream takes its own snapshot */
    case NET_EP_CHAT:
    case NET_EP_RESPONSES:
    case NET_EP_MESSAGES:
    case NET_EP_COUNT:
    case NET_EP_GEMINI:
    case NET_EP_GEMINI_COUNT:
    case NET_EP_MODELS:
    case NET_EP_GEMINI_MODELS: break;
    }
    /* The key is checked on the head, so a client without a valid one never has its
     * body read (DESIGN 4). The snapshot goes on to the stream with the client found in
     * it, so the key is looked up once a request. */
    conf = gw_conf_acquire(&c->w->gt);
    cl = conf ? net_auth_client(c, conf, &code, why) : NULL;
    if (conf && !cl) {
        gw_conf_release(conf);
        return code;
    }
    gw_conf_release(c->conf);
    c->conf = conf;
    c->client = cl;
    return GW_OK;
}

/* A Gemini request names its model and whether it streams in the URL, not the body
 * (net/endpoint.c): they go into the canonical request. */
static enum gw_code
gemini_url_request(struct net_stream *s, struct gw_buf *why)
{
    char *m = gw_arena_alloc(&s->arena, s->tgt.model.len + 1);
    int n = m ? gw_pct_decode(s->tgt.model, m, s->tgt.model.len) : -1;

    if (!m)
        return GW_E_NOMEM;
    if (n <= 0) {
        gw_buf_append_cstr(why, "the model in the path is not valid");
        return GW_E_BAD_REQUEST;
    }
    /* "models/x" in the path's model is the SDK's resource name of x */
    if (n > 7 && memcmp(m, "models/", 7) == 0) {
        m += 7;
        n -= 7;
    }
    s->creq.model = (struct gw_str){m, (size_t)n};
    s->creq.stream = s->tgt.stream;
    return GW_OK;
}

/* Reads the client's body in its shape: a Chat body with the fast scanner (all the
 * same-shape splice needs), any other shape into the canonical form. Fills the model,
 * stream, usage wish and input estimate. GW_OK, or a refusal already answered. */
enum gw_code
net_stream_read_request(struct net_stream *s)
{
    struct gw_buf why = {0};
    enum gw_code rc;

    rc = net_stream_decode_body(s); /* a compressed body: plain from here on */
    if (rc != GW_OK)
        return rc;
    if (s->client_shape == DL_SHAPE_CHAT) {
        rc = dl_openai_req_parse(s->body.data, s->body.len, &s->req, &why);
        if (rc == GW_OK) {
            s->model = dl_openai_req_model(s->req);
            s->stream = dl_openai_req_is_stream(s->req);
            s->wants_usage = dl_openai_req_wants_usage(s->req);
            s->est_input = dl_openai_req_input_estimate(s->req);
        }
    } else {
        /* a Gemini countTokens body may wrap its request in generateContentRequest */
        rc = s->tgt.ep == NET_EP_GEMINI_COUNT
                 ? dl_gemini_count_parse(&s->arena, s->body.data, s->body.len, &s->creq, &why)
                 : s->client_ops->request_parse(&s->arena, s->body.data, s->body.len, &s->creq,
                                                &why);
        if (rc == GW_OK && s->client_shape == DL_SHAPE_GEMINI)
            rc = gemini_url_request(s, &why);
        if (rc == GW_OK) {
            s->creq_ready = true;
            /* A NUL-terminated copy: the parse left a slice into the body, and the
             * routing candidates of an implicit group, whose names the price and spec
             * lookups read as C strings, point at it (Chat's parser terminates its own). */
            s->model = gw_arena_str(&s->arena, s->creq.model);
            if (!s->model.ptr)
                rc = GW_E_NOMEM;
        }
        if (rc == GW_OK) {
            s->stream = s->creq.stream;
            s->est_input = dl_request_input_estimate(&s->creq);
            rc = net_resp_prepare(s, &why); /* may expand the request (and its estimate) */
        }
    }
    if (rc != GW_OK)
        net_stream_refuse(s, rc, why.data ? why.data : "invalid request", true);
    gw_buf_fini(&why);
    return rc;
}

/* An API call (Chat Completions, Messages): the key, the body in the client's shape,
 * the key's scope, the candidates, the calendar limits, then the key gate (admit.c). */
static void
api_request(struct net_stream *s)
{
    struct net_conn *c = s->conn;
    const char *why_auth = NULL;
    enum gw_code rc = GW_OK;

    if (!s->client) /* not found by the head check in this snapshot */
        s->client = net_auth_client(c, s->conf, &rc, &why_auth);
    if (!s->client) {
        net_stream_refuse(s, rc, why_auth, false);
        return;
    }
    memcpy(s->row->client, s->client->name, strnlen(s->client->name, GW_NAME_MAX));
    net_stream_take_body(s, c);
    if (net_stream_read_request(s) != GW_OK)
        return;
    memcpy(s->row->model, s->model.ptr, s->model.len < GW_MODEL_MAX ? s->model.len : GW_MODEL_MAX);
    s->row->stream = s->stream;
    if (!gw_conf_client_allows(s->client, s->model.ptr, s->model.len)) {
        net_stream_refuse(s, GW_E_MODEL_NOT_ALLOWED, "this key may not use that model", true);
        return;
    }
    {
        struct gw_route_req rq;
        struct gw_route_result res;
        char sticky[GW_NAME_MAX + 1];

        memset(&rq, 0, sizeof(rq));
        rq.model = s->model.ptr;
        rq.model_len = s->model.len;
        rq.now_ms = net_now_ms();
        rq.is_full = net_prov_full;
        if (s->w->sticky && net_order_varies(s->conf, s->model))
            net_stream_conversation(s);
        if (s->conv && gw_sticky_lookup(s->w->sticky, s->conv, rq.now_ms, s->within_turn, sticky))
            rq.sticky = sticky;
        if (net_resp_sticky(s))
            rq.sticky = net_resp_sticky(s); /* the upstream that made the previous response */
        if (gw_route_order(s->conf, &rq, true, s->cands, &res) != GW_OK || res.pick < 0) {
            net_stream_refuse(s, GW_E_MODEL_NOT_FOUND, "no upstream offers that model", true);
            return;
        }
        s->n_cands = res.n;
        s->pick = res.pick;
        net_skip_paused(s);
    }
    s->fail_code = GW_E_UPSTREAM_FAILED;
    if (s->client->usage && s->client->n_limits) {
        struct gw_limit_verdict v;
        struct gw_period cal;
        uint64_t now = net_now_ms();

        s->est_tokens = s->est_input;
        s->est_cost_micros = net_stream_input_cost(s);
        /* DESIGN.md 7: calendar limits refuse before anything waits */
        net_calendar(now, &cal);
        if (gw_keylimits_check_calendar(s->client->usage, now, &cal, s->est_tokens,
                                        s->est_cost_micros, &v) == GW_LIMIT_REFUSE_CALENDAR) {
            net_limit_refuse(s, &v, true);
            return;
        }
    }
    net_key_gate(s);
}

void
net_pipeline_start(struct net_conn *c)
{
    struct net_worker *w = c->w;
    struct net_stream *s;

    s = stream_cache_get(w);
    if (s) {
        /* The attempts are cleared one by one as they are added (attempt_add): zeroing
         * the whole 3.7 KB row on every request showed in profiles. */
        if (!s->row_mem)
            s->row_mem = net_settle_spare_row(w);
        if (!s->row_mem)
            s->row_mem = gw_malloc(sizeof(*s->row_mem));
        s->row = s->row_mem;
        if (s->row)
            memset(s->row, 0, offsetof(struct gw_row, attempts));
    }
    if (!s || !s->row) {
        if (s) {
            stream_bufs_fini(s);
            gw_free(s);
        }
        c->flags |= NET_CONN_F_CLOSE_AFTER;
        net_respond_error(c, NULL, GW_E_NOMEM, "out of memory", NULL, 0);
        net_conn_response_done(c);
        return;
    }
    s->magic_ = NET_STREAM_MAGIC;
    s->qunit = -1;
    s->w = w;
    s->conn = c;
    net_conn_sink(c, &s->sink);
    c->stream = s;
    s->tgt = c->tgt; /* net_pipeline_head's */
    s->client_shape = s->tgt.shape;
    s->client_ops = dl_shape_ops(s->client_shape);
    s->t0_us = net_mono_us();
    gw_sse_init(&s->sse, 0);
    net_worker_request_id(w, s->id);
    memcpy(s->row->id, s->id, sizeof(s->row->id));
    s->row->ts_ms = net_now_ms();
    s->row->ttfb_ms = -1;
    /* the head check's snapshot taken over, with the client it found there */
    s->client = c->conf ? c->client : NULL;
    s->conf = c->conf ? c->conf : gw_conf_acquire(&w->gt);
    c->conf = NULL;
    c->client = NULL;
    if (!s->conf) {
        net_stream_refuse(s, GW_E_SHUTTING_DOWN, "the gateway is shutting down", false);
        return;
    }
    switch (s->tgt.ep) {
    case NET_EP_CHAT:
    case NET_EP_RESPONSES:
    case NET_EP_MESSAGES:
    case NET_EP_GEMINI: api_request(s); return;
    case NET_EP_COUNT:
    case NET_EP_GEMINI_COUNT:
        s->row = NULL; /* a count is not an API call of the key's: no row, no limits */
        net_count_tokens(s);
        return;
    case NET_EP_MODELS:
    case NET_EP_GEMINI_MODELS:
        s->row = NULL; /* not an API call: no row */
        net_models_listing(s);
        return;
    case NET_EP_HEALTHZ:
        s->row = NULL;
        net_stream_answer(s, 200, "application/json", "{\"status\":\"ok\"}", 15);
        net_stream_finish(s, 200, GW_OK, GW_OUT_OK);
        return;
    case NET_EP_READYZ:
        s->row = NULL;
        if (w->draining) {
            net_stream_refuse(s, GW_E_SHUTTING_DOWN, "the gateway is draining", false);
        } else {
            net_stream_answer(s, 200, "application/json", "{\"status\":\"ready\"}", 18);
            net_stream_finish(s, 200, GW_OK, GW_OUT_OK);
        }
        return;
    case NET_EP_METHOD:
        s->row = NULL;
        net_stream_refuse(s, GW_E_METHOD_NOT_ALLOWED, "this method is not served on this path",
                          false);
        return;
    case NET_EP_NONE:
        s->row = NULL;
        net_stream_refuse(s, GW_E_NOT_FOUND, "no such endpoint", false);
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
    if (net_attempt_cur(s) && net_attempt_cur(s)->outcome == GW_OUT_NONE) {
        /* a hop was in flight (a skipped or failed attempt, or a wait, is not one) */
        const struct gw_conf_provider *p = s->cands[s->cur < s->n_cands ? s->cur : 0].prov;

        net_hop_timers_stop(s);
        net_attempt_end(s, GW_OUT_CANCELLED, s->up_status, GW_E_CLIENT_CANCELLED);
        if (s->headers_sent)
            memcpy(s->row->upstream, p->name, strnlen(p->name, GW_NAME_MAX));
    }
    gw_code_count(GW_E_CLIENT_CANCELLED);
    net_stream_finish(s, 499, GW_E_CLIENT_CANCELLED, GW_OUT_CANCELLED);
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
