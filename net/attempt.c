/* SPDX-License-Identifier: MIT
 * net/attempt.c - candidates and hops (DESIGN.md 5, 6): the conversation key and
 * stickiness, paused and full members noted, each hop's body rendered for its upstream's
 * shape and sent with the provider's credential, failures counted and failed over, the
 * slow-start switch.
 * Owns:    the stream's current hop (net_upx) until it ends.
 * Threads: the owning worker only; never blocks.
 * See:     net/pipeline-priv.h, core/route.h, net/upstream.h
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
#include "core/quota.h"
#include "core/quota_learn.h"
#include "core/retry.h"
#include "core/route.h"
#include "core/row.h"
#include "core/slots.h"
#include "core/speed.h"
#include "core/sse.h"
#include "core/sticky.h"
#include "dialects/anthropic.h"
#include "dialects/bedrock.h"
#include "dialects/json_scan.h"
#include "dialects/openai.h"
#include "dialects/sigv4.h"
#include "net/calendar.h"
#include "net/logger.h"
#include "net/quota.h"
#include "net/report.h"
#include "net/sink.h"
#include "net/upstream.h"
#include "store/store.h"

/* True for the upstream shapes this build sends requests in: every dialect with a
 * shape in the hub (dialects/canon.c). */
bool
net_prov_spoken(const struct gw_conf_provider *p)
{
    return dl_shape_ops(net_prov_shape(p)) != NULL;
}

const struct gw_conf_provider *
net_stream_prov(const struct net_stream *s)
{
    return s->cands[s->cur].prov;
}

struct gw_attempt *
net_attempt_cur(struct net_stream *s)
{
    return s->row && s->row->n_attempts ? &s->row->attempts[s->row->n_attempts - 1] : NULL;
}

void
net_attempt_end(struct net_stream *s, enum gw_outcome outcome, int status, enum gw_code code)
{
    struct gw_attempt *a = net_attempt_cur(s);

    if (!a)
        return;
    a->outcome = (uint8_t)outcome;
    a->status = (uint16_t)status;
    a->code = (uint16_t)code;
}

static bool quota_take(struct net_stream *s, const struct gw_route_cand *c);

/* The current hop failed before anything reached the client: try the next one. */
/* Counts a failure of the current hop's upstream (DESIGN.md 6): not for a missing
 * model (404), which moves on without counting, nor for our own out-of-memory. */
void
net_hop_count_failure(struct net_stream *s, int status, enum gw_code code)
{
    uint64_t now = net_now_ms(), retry_ms;

    if (status == 404 || code == GW_E_NOMEM)
        return;
    retry_ms = gw_retry_after_ms(gw_str_c(s->retry_after), gw_str_c(s->retry_after_ms),
                                 (struct gw_str){s->errbody.data, s->errbody.len}, now);
    if (gw_upstate_failure(net_stream_prov(s)->state, now, s->conf, retry_ms)) {
        struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

        net_report_paused(net_stream_prov(s), now, status, code, retry_ms, &ctx);
    }
}

void
net_hop_timers_stop(struct net_stream *s)
{
    if (s->slow_timer)
        evtimer_del(s->slow_timer);
    if (s->speed_timer)
        evtimer_del(s->speed_timer);
}

void
net_hop_failed(struct net_stream *s, int status, enum gw_code code)
{
    const struct gw_conf_provider *p = net_stream_prov(s);
    struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

    net_hop_timers_stop(s);
    net_slot_give_back(s, &s->hop_slot);
    net_attempt_end(s, GW_OUT_FAILED, status, code);
    /* A hop that never connected gives its credential's count back. */
    net_hop_quota_settle(s, 0,
                         status != 0 || (code != GW_E_UPSTREAM_CONNECT && code != GW_E_NOMEM));
    s->nonquota_failed = true;
    net_hop_count_failure(s, status, code);
    GW_LOG(GW_LOG_WARN, &ctx, gw_code_str(code), "upstream %s failed (status %d, %zu body bytes)",
           p->name, status, s->errbody.len);
    s->fail_code = code;
    s->fail_status = status;
    s->cur++;
    net_hop_next(s);
}

/* The client headers a hop never passes on, by length first (every request's headers
 * pass through here). */
static bool
is_forwarded(struct gw_str name)
{
#define IS(lit) gw_mem_eq_nocase(name.ptr, lit, sizeof(lit) - 1)
    switch (name.len) {
    case 2: return !IS("te");
    case 4: return !IS("host");
    case 6: return !(IS("accept") || IS("cookie") || IS("expect"));
    case 7: return !(IS("trailer") || IS("upgrade"));
    case 9: return !IS("x-api-key");
    case 10: return !(IS("connection") || IS("keep-alive"));
    case 12: return !IS("content-type");
    case 13: return !IS("authorization");
    case 14: return !(IS("content-length") || IS("x-goog-api-key"));
    case 15: return !IS("accept-encoding");
    case 16:
        /* content-encoding: the body sent is always plain (net/decode.c) */
        return !(IS("content-encoding") || IS("proxy-connection"));
    case 17:
        /* anthropic-version: ours, for a converted hop */
        return !(IS("transfer-encoding") || IS("anthropic-version"));
    case 19: return !IS("proxy-authorization");
    default: return true;
    }
#undef IS
}

/* Appends an attempt for candidate <c> with <outcome> (a hop being sent: GW_OUT_NONE). */
struct gw_attempt *
net_attempt_add(struct net_stream *s, const struct gw_route_cand *c, enum gw_outcome outcome)
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

        if (!net_prov_spoken(c->prov) || c->state == GW_CAND_DISABLED)
            continue;
        gw_upstate_facts(c->prov->state, now, &f);
        if (!f.paused_until_ms)
            break;
    }
    if (j == s->n_cands)
        return;             /* no one could take it now: this hop keeps its chance */
    net_upx_cancel(s->upx); /* the connection is dropped, so the upstream stops */
    s->upx = NULL;
    net_slot_give_back(s, &s->hop_slot);
    net_attempt_end(s, GW_OUT_SLOW_START, s->up_status, GW_OK);
    net_hop_quota_settle(s, s->est_input, true); /* its input may be billed */
    s->given_up_input += s->est_input;
    GW_LOG(GW_LOG_INFO, &ctx, "slow_start", "upstream %s sent no content in %u s; trying %s",
           net_stream_prov(s)->name, s->conf->failover.stream_start_wait_secs,
           s->cands[j].prov->name);
    s->cur++;
    net_hop_next(s);
}

/* The shape an upstream of <p> speaks (DESIGN.md 3: its dialect). */
enum dl_shape
net_prov_shape(const struct gw_conf_provider *p)
{
    switch (p->dialect) {
    case GW_DIALECT_OPENAI: return DL_SHAPE_CHAT;
    case GW_DIALECT_RESPONSES: return DL_SHAPE_RESPONSES;
    case GW_DIALECT_ANTHROPIC: return DL_SHAPE_MESSAGES;
    case GW_DIALECT_GEMINI: return DL_SHAPE_GEMINI;
    case GW_DIALECT_BEDROCK: return DL_SHAPE_BEDROCK;
    }
    return DL_SHAPE_CHAT;
}

/* A Gemini client that asked for a stream without ?alt=sse reads one JSON array: its
 * frames are rendered even from a Gemini upstream (which is always asked for SSE). */
bool
net_stream_json_array(const struct net_stream *s)
{
    return s->client_shape == DL_SHAPE_GEMINI && s->stream && !s->tgt.alt_sse;
}

/* The client's request in canonical form, parsed once (into the arena) the first time a
 * hop needs it converted. */
static enum gw_code
canon_request(struct net_stream *s)
{
    struct gw_buf why = {0};
    enum gw_code rc;

    if (s->creq_ready)
        return GW_OK;
    if (s->req) /* a Chat request, checked when it was read */
        rc = dl_openai_req_canon(s->req, &s->arena, &s->creq, &why);
    else
        rc = s->client_ops->request_parse(&s->arena, s->body.data, s->body.len, &s->creq, &why);
    if (rc != GW_OK)
        snprintf(s->unconvertible, sizeof(s->unconvertible), "%s",
                 why.data ? why.data : "the request cannot be converted");
    gw_buf_fini(&why);
    s->creq_ready = rc == GW_OK;
    return rc;
}

/* Renders in s->upbody the body for candidate <idx> in its upstream's shape: the same
 * shape gets the client's bytes with the model spliced in (Chat also has
 * stream_options.include_usage forced on), another shape the request converted through
 * the hub (its fields a shape cannot express dropped by name into s->dropped, or the
 * request refused), with max_tokens from the model's spec (the one resolve function)
 * when the client set none. Kept for that candidate, so a later hop_send does not render
 * again. GW_OK; GW_E_UNCONVERTIBLE with the reason in s->unconvertible; GW_E_NOMEM. */
static enum gw_code
render_body(struct net_stream *s, size_t idx)
{
    const struct gw_route_cand *c = &s->cands[idx];
    struct gw_str model = {c->model, c->model_len};
    enum dl_shape up = net_prov_shape(c->prov);
    enum gw_code rc;

    if (s->upbody_ready && s->upbody_for == idx)
        return GW_OK;
    s->upbody_ready = false;
    gw_buf_reset(&s->upbody);
    memset(&s->dropped, 0, sizeof(s->dropped)); /* what this candidate's shape drops */
    switch (net_resp_body_for(s, c->prov, up)) {
    case NET_RESP_AS_SENT: break;
    case NET_RESP_UNCONVERTIBLE: return GW_E_UNCONVERTIBLE;
    case NET_RESP_EXPANDED:
        if (up == DL_SHAPE_RESPONSES) {
            /* another Responses upstream: the history in the body, the model spliced */
            rc = dl_splice_model(s->xbody.data, s->xbody.len, model, &s->upbody);
            goto rendered;
        }
        break; /* the canonical request was parsed from the expanded body */
    }
    if (up == s->client_shape && up == DL_SHAPE_CHAT) {
        rc = dl_openai_req_render(s->req, s->body.data, s->body.len, model, &s->upbody);
    } else if (up == s->client_shape && up == DL_SHAPE_GEMINI) {
        /* the model is in the upstream's URL, the body goes as it came */
        rc = gw_buf_append(&s->upbody, s->body.data, s->body.len);
    } else if (up == s->client_shape) {
        rc = dl_splice_model(s->body.data, s->body.len, model, &s->upbody);
    } else {
        const struct dl_shape_ops *ops = dl_shape_ops(up);
        struct gw_buf why = {0};
        struct gw_model_spec spec;

        if (!ops)
            return GW_E_UNCONVERTIBLE;
        rc = canon_request(s);
        if (rc != GW_OK)
            return rc == GW_E_NOMEM ? rc : GW_E_UNCONVERTIBLE;
        gw_conf_model_spec(s->conf, c->prov, c->model, &spec);
        rc = ops->request_render(&s->creq, model,
                                 spec.max_output_tokens_known ? spec.max_output_tokens : 0,
                                 &s->dropped, &s->upbody, &why);
        /* tools only the client's shape can express go without (named) */
        dl_request_drop_offered(&s->creq, up, &s->dropped);
        if (rc == GW_E_UNCONVERTIBLE)
            snprintf(s->unconvertible, sizeof(s->unconvertible), "%s",
                     why.data ? why.data : "the request cannot be converted");
        gw_buf_fini(&why);
    }
rendered:
    if (rc == GW_OK) {
        s->upbody_ready = true;
        s->upbody_for = idx;
    }
    return rc;
}

/* The path of an upstream request for candidate <c> under its base URL's prefix, and
 * the credential's header value (Bearer for the OpenAI shapes; the bare key for
 * Anthropic and Gemini). Gemini names the model in the path and is always asked for
 * SSE when streaming (DESIGN.md 11). */
static enum gw_code
upstream_target(const struct net_stream *s, const struct gw_route_cand *c, struct gw_buf *path,
                struct gw_buf *auth)
{
    const struct gw_conf_provider *p = c->prov;
    enum dl_shape up = net_prov_shape(p);

    if (up == DL_SHAPE_BEDROCK) /* signed, not keyed: bedrock_sign */
        return dl_bedrock_path(gw_str_c(p->path_prefix), (struct gw_str){c->model, c->model_len},
                               s->stream, path);
    if ((up == DL_SHAPE_CHAT || up == DL_SHAPE_RESPONSES) &&
        gw_buf_append(auth, "Bearer ", 7) != GW_OK)
        return GW_E_NOMEM;
    /* the credential the quota choice took (keys[0] for a provider without quota state) */
    if (gw_buf_append_cstr(auth, p->keys[s->qunit >= 0 ? s->qunit : 0].secret) != GW_OK ||
        gw_buf_append_cstr(path, p->path_prefix) != GW_OK)
        return GW_E_NOMEM;
    switch (up) {
    case DL_SHAPE_RESPONSES: return gw_buf_append_cstr(path, "/v1/responses");
    case DL_SHAPE_MESSAGES: return gw_buf_append_cstr(path, "/v1/messages");
    case DL_SHAPE_GEMINI:
        if (gw_buf_append_cstr(path, "/v1beta/models/") != GW_OK ||
            net_pct_encode_path((struct gw_str){c->model, c->model_len}, path) != GW_OK)
            return GW_E_NOMEM;
        return gw_buf_append_cstr(path, s->stream ? ":streamGenerateContent?alt=sse"
                                                  : ":generateContent");
    default: return gw_buf_append_cstr(path, "/v1/chat/completions");
    }
}

/* A Bedrock request's signature (AWS SigV4, dialects/sigv4.h): what the headers that
 * carry it hold until the request is written. */
struct aws_sig {
    char date[DL_SIGV4_DATE_LEN + 1];
    char sha[DL_SIGV4_HASH_HEX];
    struct gw_buf host, authz;
};

/* Signs the request to <p> of <path> and s->upbody at the wall clock's second and
 * appends its headers to <hdrs> (content-type and accept included; host is written by
 * net/upstream.c with the value signed here). GW_OK or GW_E_NOMEM. */
static enum gw_code
bedrock_sign(struct net_stream *s, const struct gw_conf_provider *p, struct gw_str path,
             struct aws_sig *g, struct net_hdr *hdrs, size_t *n)
{
    struct dl_sigv4_hdr sh[5];
    struct dl_sigv4_input in;
    size_t k = 0, i;
    const char *q = memchr(path.ptr, '?', path.len);

    dl_sigv4_amz_date((int64_t)(net_now_ms() / 1000), g->date);
    dl_sigv4_payload_hash(s->upbody.data, s->upbody.len, g->sha);
    if (net_up_host_value(p, &g->host) != GW_OK)
        return GW_E_NOMEM;
    sh[k++] = (struct dl_sigv4_hdr){GW_STR_LIT("host"), {g->host.data, g->host.len}};
    sh[k++] = (struct dl_sigv4_hdr){GW_STR_LIT("content-type"), GW_STR_LIT("application/json")};
    sh[k++] = (struct dl_sigv4_hdr){GW_STR_LIT("x-amz-date"), gw_str_c(g->date)};
    sh[k++] = (struct dl_sigv4_hdr){GW_STR_LIT("x-amz-content-sha256"), gw_str_c(g->sha)};
    if (p->aws_token.secret)
        sh[k++] = (struct dl_sigv4_hdr){GW_STR_LIT("x-amz-security-token"),
                                        gw_str_c(p->aws_token.secret)};
    memset(&in, 0, sizeof(in));
    in.method = GW_STR_LIT("POST");
    in.path = (struct gw_str){path.ptr, q ? (size_t)(q - path.ptr) : path.len};
    in.query = q ? (struct gw_str){q + 1, path.len - (size_t)(q - path.ptr) - 1} : GW_STR_LIT("");
    in.hdrs = sh;
    in.n_hdrs = k;
    in.payload_hash = gw_str_c(g->sha);
    in.amz_date = gw_str_c(g->date);
    in.region = gw_str_c(p->aws_region);
    in.service = GW_STR_LIT("bedrock");
    in.access_key_id = gw_str_c(p->aws_key_id.secret);
    in.secret_access_key = gw_str_c(p->aws_secret.secret);
    in.signing_key = dl_sigv4_cache_key(&s->w->aws_keys, &in, &g->authz);
    if (dl_sigv4_authorization(&in, &g->authz) != GW_OK)
        return GW_E_NOMEM;
    for (i = 1; i < k; i++) /* every signed header but host */
        hdrs[(*n)++] = (struct net_hdr){sh[i].name, sh[i].value};
    hdrs[(*n)++] = (struct net_hdr){GW_STR_LIT("authorization"), {g->authz.data, g->authz.len}};
    hdrs[(*n)++] = (struct net_hdr){GW_STR_LIT("accept"),
                                    s->stream ? GW_STR_LIT("application/vnd.amazon.eventstream")
                                              : GW_STR_LIT("application/json")};
    return GW_OK;
}

/* The credential header's bytes leave no copy in the stream's kept buffer. */
static void
hop_auth_wipe(struct net_stream *s)
{
    if (s->hop_auth.data)
        explicit_bzero(s->hop_auth.data, s->hop_auth.cap);
    gw_buf_reset(&s->hop_auth);
}

void
net_hop_send(struct net_stream *s, const struct gw_route_cand *c)
{
    const struct gw_conf_provider *p = c->prov;
    struct net_hdr hdrs[NET_MAX_FWD_HEADERS + 7];
    struct gw_buf *auth = &s->hop_auth, *path = &s->hop_path;
    struct aws_sig sig = {0};
    struct net_up_req rq;
    size_t n = 0;
    unsigned i;
    enum dl_shape up = net_prov_shape(p);
    bool anth = up == DL_SHAPE_MESSAGES;
    struct gw_attempt *a;

    if (!quota_take(s, c))
        return; /* skipped for quota: the walk went on */
    a = net_attempt_add(s, c, GW_OUT_NONE);
    a->queued_ms = s->hop_queued_ms;
    if (s->qunit >= 0)
        memcpy(a->cred, p->keys[s->qunit].fp, sizeof(a->cred));
    s->hop_queued_ms = 0;
    s->reached_upstream = true;
    s->retry_after[0] = s->retry_after_ms[0] = '\0';

    gw_buf_reset(&s->errbody);
    gw_buf_reset(&s->out);
    net_resp_hop(s);
    gw_sse_fini(&s->sse);
    gw_sse_init(&s->sse, 0);
    s->up_status = 0;
    s->up_ok = s->up_sse = s->stream_error = s->up_failed = s->finish_seen = false;
    s->ev_err_status = 0;
    s->up_shape = up;
    s->up_ops = dl_shape_ops(up);
    if (up == DL_SHAPE_BEDROCK) {
        dl_bedrock_es_fini(&s->es);
        dl_bedrock_es_init(&s->es, NET_MAX_ES_MESSAGE);
    }
    s->convert = up != s->client_shape || net_stream_json_array(s);
    if (s->up_ops)
        s->up_ops->parse_init(&s->pst);
    if (s->convert) {
        struct dl_render_ctx ctx = {.model = s->model,
                                    .id = {s->id, GW_ROW_ID_LEN},
                                    .created = net_now_ms() / 1000,
                                    .stream_usage = s->wants_usage,
                                    .upstream = up,
                                    .json_array = net_stream_json_array(s),
                                    .arena = &s->arena,
                                    .req = s->creq_ready ? &s->creq : NULL};

        s->client_ops->render_init(&s->rst, &ctx);
    }
    s->usage_seen = false;
    s->content_bytes = 0;
    gw_buf_reset(path);
    gw_buf_reset(auth); /* wiped when it was sent */
    if (render_body(s, (size_t)(c - s->cands)) != GW_OK ||
        upstream_target(s, c, path, auth) != GW_OK) {
        hop_auth_wipe(s);
        net_hop_failed(s, 0, GW_E_NOMEM);
        return;
    }
    s->upbody_ready = false; /* sent: a later hop renders its own */
    switch (up) {
    case DL_SHAPE_MESSAGES:
        hdrs[n++] = (struct net_hdr){GW_STR_LIT("x-api-key"), {auth->data, auth->len}};
        hdrs[n++] =
            (struct net_hdr){GW_STR_LIT("anthropic-version"), GW_STR_LIT(DL_ANTHROPIC_VERSION)};
        break;
    case DL_SHAPE_GEMINI:
        hdrs[n++] = (struct net_hdr){GW_STR_LIT("x-goog-api-key"), {auth->data, auth->len}};
        break;
    case DL_SHAPE_BEDROCK:
        if (bedrock_sign(s, p, (struct gw_str){path->data, path->len}, &sig, hdrs, &n) != GW_OK) {
            gw_buf_fini(&sig.host);
            gw_buf_fini(&sig.authz);
            net_hop_failed(s, 0, GW_E_NOMEM);
            return;
        }
        break;
    default: hdrs[n++] = (struct net_hdr){GW_STR_LIT("authorization"), {auth->data, auth->len}};
    }
    if (up != DL_SHAPE_BEDROCK) { /* bedrock_sign wrote and signed its own */
        hdrs[n++] = (struct net_hdr){GW_STR_LIT("content-type"), GW_STR_LIT("application/json")};
        hdrs[n++] =
            (struct net_hdr){GW_STR_LIT("accept"), s->stream ? GW_STR_LIT("text/event-stream")
                                                             : GW_STR_LIT("application/json")};
    }
    for (i = 0; i < s->conn->rq.n_hdrs && n < NET_MAX_FWD_HEADERS + 7; i++) {
        struct gw_str name, value;

        net_conn_header_at(s->conn, i, &name, &value);
        if (!is_forwarded(name))
            continue;
        /* Anthropic's beta flags mean something to a Messages upstream only: kept for
         * one, dropped by name for another (DESIGN.md 11). */
        if (!anth && gw_str_eq_nocase(name, GW_STR_LIT("anthropic-beta"))) {
            dl_dropped_add(&s->dropped, GW_STR_LIT("anthropic-beta"));
            continue;
        }
        hdrs[n++] = (struct net_hdr){name, value};
    }
    memset(&rq, 0, sizeof(rq));
    rq.prov = p;
    rq.method = "POST";
    rq.path = (struct gw_str){path->data, path->len};
    rq.hdrs = hdrs;
    rq.n_hdrs = n;
    rq.body = (struct gw_str){s->upbody.data, s->upbody.len};
    rq.connect_timeout_ms = s->conf->failover.connect_timeout_ms;
    rq.head_timeout_ms = s->conf->failover.first_byte_timeout_secs * 1000u;
    rq.idle_timeout_ms = s->conf->failover.read_idle_timeout_secs * 1000u;
    s->t_hop_us = net_mono_us();
    s->upx = net_up_send(s->w->pool, &rq, &net_relay_cbs, s);
    hop_auth_wipe(s); /* copied into the request bytes */
    gw_buf_fini(&sig.host);
    gw_buf_fini(&sig.authz);
    if (!s->upx) {
        net_hop_failed(s, 0, GW_E_NOMEM);
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

/* ---- credentials and quota (DESIGN.md 10, net/quota.h) ---- */

void
net_hop_quota_settle(struct net_stream *s, uint64_t tokens, bool sent)
{
    if (s->qset && s->qlease.active)
        gw_quota_settle(s->qset, &s->qlease, net_now_ms(), tokens, sent);
}

void
net_hop_quota_learn(struct net_stream *s, struct gw_str body, struct gw_quota_facts *out)
{
    struct gw_quota_header h[NET_QUOTA_HDRS];
    struct gw_quota_facts f;
    uint64_t now = net_now_ms();
    unsigned i;

    if (!out)
        out = &f;
    for (i = 0; i < s->n_qhdrs; i++) {
        h[i].name = gw_str_c(s->qhdrs[i].name);
        h[i].value = gw_str_c(s->qhdrs[i].value);
    }
    gw_quota_learn(gw_quota_vendor_of_host(net_stream_prov(s)->host), h, s->n_qhdrs, body, now,
                   out);
    if (s->qset && s->qunit >= 0 && out->n)
        gw_quota_learn_apply(s->qset, (size_t)s->qunit, now, out);
}

void
net_hop_quota_success(struct net_stream *s)
{
    if (!s->qset || s->qunit < 0)
        return;
    /* true only for a credential that had cooled: the common answer costs one lock */
    if (gw_quota_success(s->qset, (size_t)s->qunit, net_now_ms())) {
        const struct gw_route_cand *c = &s->cands[s->cur];
        char model[GW_MODEL_MAX + 1];
        struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};
        size_t n = c->model_len < GW_MODEL_MAX ? c->model_len : GW_MODEL_MAX;

        memcpy(model, c->model, n);
        model[n] = '\0';
        net_quota_report_recovered(c->prov, model, c->prov->keys[s->qunit].fp, "answered", &ctx);
    }
}

/* Takes a credential of candidate <c> for the hop about to be sent: true with s->qunit
 * (and its lease) set, or when the provider keeps no quota state. False: no credential
 * admits the request now; the candidate is recorded as skipped:quota, the earliest
 * moment one will is kept, and the walk has gone on to the next candidate. */
static bool
quota_take(struct net_stream *s, const struct gw_route_cand *c)
{
    struct gw_quota_choice why;
    struct gw_attempt *a;
    uint64_t now = net_now_ms();
    int i;

    net_hop_quota_settle(s, 0, true); /* every path settles its hop's lease; a backstop */
    s->qunit = -1;
    s->n_qhdrs = 0;
    s->qset = net_quota_set_of(c->prov, c->model, c->model_len);
    if (!s->qset)
        return true;
    i = gw_quota_choose(s->qset, now, s->est_input, &s->qlease, &why);
    if (i >= 0 && (size_t)i < c->prov->n_keys) {
        s->qunit = i;
        s->qkeep_ms = now;
        return true;
    }
    if (i >= 0)
        gw_quota_settle(s->qset, &s->qlease, now, 0, false); /* a set of other keys */
    net_slot_give_back(s, &s->hop_slot);
    a = net_attempt_add(s, c, GW_OUT_SKIPPED_QUOTA);
    a->code = GW_E_QUOTA_ALL;
    s->quota_skipped = true;
    if (why.retry_at_ms && (!s->quota_retry_at || why.retry_at_ms < s->quota_retry_at))
        s->quota_retry_at = why.retry_at_ms;
    if (gw_log_enabled(GW_LOG_DEBUG)) {
        struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

        for (size_t k = 0; k < why.n && k < c->prov->n_keys; k++) {
            char line[160];

            GW_LOG(GW_LOG_DEBUG, &ctx, "skipped_quota", "upstream %s credential %s: %s",
                   c->prov->name, c->prov->keys[k].fp,
                   gw_quota_verdict_str(&why.v[k], now, line, sizeof(line)));
        }
    }
    s->cur++;
    net_hop_next(s);
    return false;
}

void
net_hop_quota_failed(struct net_stream *s)
{
    const struct gw_route_cand *c = &s->cands[s->cur];
    struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};
    struct gw_quota_facts f;
    struct gw_quota_cooldown cool;
    struct gw_quota_hit hit = {(unsigned)s->up_status, &f};
    char model[GW_MODEL_MAX + 1];
    size_t n = c->model_len < GW_MODEL_MAX ? c->model_len : GW_MODEL_MAX;
    uint64_t now = net_now_ms(), retry_at = 0;

    net_hop_timers_stop(s);
    net_slot_give_back(s, &s->hop_slot);
    net_attempt_end(s, GW_OUT_FAILED, s->up_status, GW_E_UPSTREAM_STATUS);
    net_hop_quota_learn(s, (struct gw_str){s->errbody.data, s->errbody.len}, &f);
    gw_quota_fail(s->qset, (size_t)s->qunit, now, &hit, &cool);
    net_hop_quota_settle(s, 0, true);
    memcpy(model, c->model, n);
    model[n] = '\0';
    net_quota_report_cooldown(c->prov, model, c->prov->keys[s->qunit].fp, (unsigned)s->up_status,
                              &cool, now, &ctx);
    s->fail_code = GW_E_UPSTREAM_STATUS;
    s->fail_status = s->up_status;
    s->quota_skipped = true;
    if (net_quota_all_cooling(s->qset, now, &retry_at)) {
        /* Every credential cools: the provider itself counts a failure (DESIGN.md 6) and
         * the walk goes on to the next candidate. */
        net_hop_count_failure(s, s->up_status, GW_E_UPSTREAM_STATUS);
        if (retry_at && (!s->quota_retry_at || retry_at < s->quota_retry_at))
            s->quota_retry_at = retry_at;
        s->cur++;
    }
    /* else the same candidate again: its next choice skips the cooling credential */
    net_hop_next(s);
}

static void on_quota_wait(evutil_socket_t fd, short what, void *arg);

/* Every candidate left was skipped for quota (no other failure): wait for the earliest
 * window or cooldown to free when it does within the request's deadline and no hop has
 * reached an upstream yet (key rolling limits wait the same way), else 429 gw.quota_all
 * at once with Retry-After = that moment. */
static void
quota_all(struct net_stream *s)
{
    uint64_t now = net_now_ms();
    uint64_t ms = s->quota_retry_at > now ? s->quota_retry_at - now : 1;
    struct net_retry_hdrs rh;

    if (!s->reached_upstream && net_mono_us() + ms * 1000 <= s->deadline_us) {
        struct timeval tv = {(time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000};

        if (!s->quota_timer)
            s->quota_timer = evtimer_new(s->w->base, on_quota_wait, s);
        if (s->quota_timer && evtimer_add(s->quota_timer, &tv) == 0) {
            s->row->queued_ms += (uint32_t)ms;
            return;
        }
    }
    net_stream_refuse_hdrs(s, GW_E_QUOTA_ALL,
                           "every upstream credential for this model is at its quota or cooling "
                           "down; retry after the delay",
                           rh.h, net_retry_headers(&rh, ms, true), true);
}

/* The wait is over: the skips of the walk are taken off the row and it walks again. */
static void
on_quota_wait(evutil_socket_t fd, short what, void *arg)
{
    struct net_stream *s = arg;
    unsigned i, k = 0;

    (void)fd;
    (void)what;
    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    for (i = 0; i < s->row->n_attempts; i++) {
        enum gw_outcome o = (enum gw_outcome)s->row->attempts[i].outcome;

        if (o == GW_OUT_SKIPPED_QUOTA || o == GW_OUT_SKIPPED_NO_MODEL ||
            o == GW_OUT_SKIPPED_CONTEXT || o == GW_OUT_SKIPPED_UNCONVERTIBLE)
            continue; /* met again by this walk */
        if (k != i)
            s->row->attempts[k] = s->row->attempts[i];
        k++;
    }
    s->row->n_attempts = (uint16_t)k;
    s->quota_skipped = false;
    s->quota_retry_at = 0;
    s->cur = 0;
    net_hop_next(s);
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

/* True when the request's estimated input fits the context window of the model
 * candidate <c> is asked for (unknown windows fit). */
static bool
fits_context(struct net_stream *s, const struct gw_route_cand *c)
{
    struct gw_model_spec spec;

    gw_conf_model_spec(s->conf, c->prov, c->model, &spec);
    return !spec.context_window_known || s->est_input <= spec.context_window;
}

void
net_hop_next(struct net_stream *s)
{
    enum gw_code code;

    while (s->cur < s->n_cands && s->row->n_attempts < GW_ROW_MAX_ATTEMPTS) {
        const struct gw_route_cand *c = &s->cands[s->cur];
        struct gw_upfacts f;

        /* Passed over without an attempt: a shape this build does not convert to. */
        if (!net_prov_spoken(c->prov) || c->state == GW_CAND_DISABLED) {
            s->cur++;
            continue;
        }
        if (!prov_lists(c->prov, c->model, c->model_len)) {
            net_attempt_add(s, c, GW_OUT_SKIPPED_NO_MODEL);
            s->cur++;
            continue;
        }
        /* A paused member is skipped, unless it is the pick: when every candidate is
         * paused, the one whose pause ends first is tried rather than refusing. */
        if (c->state == GW_CAND_PAUSED && (int)s->cur != s->pick) {
            gw_upstate_facts(c->prov->state, net_now_ms(), &f);
            if (f.paused_until_ms) {
                net_attempt_add(s, c, GW_OUT_SKIPPED_PAUSED);
                s->cur++;
                continue;
            }
        }
        if (!fits_context(s, c)) {
            /* DESIGN.md 9: re-route to a candidate whose context window fits */
            net_attempt_add(s, c, GW_OUT_SKIPPED_CONTEXT);
            s->context_skipped = true;
            s->cur++;
            continue;
        }
        if (s->client_shape != DL_SHAPE_CHAT || net_prov_shape(c->prov) != DL_SHAPE_CHAT) {
            /* Converted before a slot is taken: a request the shape cannot express
             * passes this candidate over (s->unconvertible says why). */
            code = render_body(s, s->cur);
            if (code == GW_E_UNCONVERTIBLE) {
                net_attempt_add(s, c, GW_OUT_SKIPPED_UNCONVERTIBLE)->code = GW_E_UNCONVERTIBLE;
                s->cur++;
                continue;
            }
            if (code != GW_OK) {
                net_stream_refuse(s, code, "out of memory", true);
                return;
            }
        }
        /* Every hop holds a slot, so in-flight counts show without a limit too
         * (max_concurrent 0: the try always succeeds). */
        if (c->prov->slots && !gw_slots_try(c->prov->slots)) {
            /* Full: the sticky upstream is waited for; others are skipped as busy. */
            net_busy_add(s, (unsigned)s->cur);
            if (c->sticky) {
                s->n_busy = 1;
                s->busy[0] = (unsigned)s->cur;
                net_hop_wait(s);
                return;
            }
            if (!s->busy_noted[s->cur])
                net_attempt_add(s, c, GW_OUT_SKIPPED_BUSY);
            s->cur++;
            continue;
        }
        s->hop_slot = c->prov->slots;
        net_hop_send(s, c);
        return;
    }
    if (s->n_busy) {
        /* every remaining candidate was full: wait for the first to free (after a
         * failure too; when none frees, the last real failure is answered) */
        net_hop_wait(s);
        return;
    }
    if (s->quota_skipped && !s->nonquota_failed) {
        quota_all(s);
        return;
    }
    if (s->context_skipped && !s->reached_upstream) {
        net_stream_refuse(s, GW_E_CONTEXT_LENGTH,
                          "the request does not fit the context window of any upstream model",
                          true);
        return;
    }
    if (s->unconvertible[0] && !s->reached_upstream) {
        net_stream_refuse(s, GW_E_UNCONVERTIBLE, s->unconvertible, true);
        return;
    }
    /* Every candidate failed, none with an answer of its own to pass back. */
    code = s->fail_code == GW_E_UPSTREAM_TIMEOUT ? GW_E_UPSTREAM_TIMEOUT : GW_E_UPSTREAM_FAILED;
    net_stream_settle(s, gw_code_http_status(code), code, GW_OUT_FAILED);
    net_sink_refusal(&s->sink, s->client_shape, s->id, code, "every upstream for this model failed",
                     NULL, 0);
    net_stream_finish(s, gw_code_http_status(code), code, GW_OUT_FAILED);
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
bool
net_order_varies(const struct gw_conf *c, struct gw_str model)
{
    const struct gw_conf_group *g = gw_conf_group_find(c, model.ptr, model.len);

    return g && g->type != GW_GROUP_FALLBACK;
}

/* What identifies the conversation of a canonical request (DESIGN.md 5): its
 * prompt_cache_key, else its user id (Messages metadata.user_id, which Claude Code fills
 * with its session), else the first system text and the first user text. */
static void
canon_conversation(const struct dl_request *r, struct dl_openai_conv *cv)
{
    size_t i, j;

    memset(cv, 0, sizeof(*cv));
    cv->cache_key = r->prompt_cache_key.len ? r->prompt_cache_key : r->user;
    for (i = 0; i < r->n_system && !cv->system.len; i++)
        if (r->system[i].kind == DL_PART_TEXT)
            cv->system = r->system[i].text;
    for (i = 0; i < r->n_messages && !cv->first_user.len; i++) {
        if (r->messages[i].role != DL_ROLE_USER)
            continue;
        for (j = 0; j < r->messages[i].n_parts && !cv->first_user.len; j++)
            if (r->messages[i].parts[j].kind == DL_PART_TEXT)
                cv->first_user = r->messages[i].parts[j].text;
    }
    cv->last_is_tool = r->n_messages && r->messages[r->n_messages - 1].role == DL_ROLE_TOOL;
}

/* The conversation this request belongs to (DESIGN.md 5): a session header when the
 * client sends one, else what the dialect says identifies it. */
void
net_stream_conversation(struct net_stream *s)
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
    if (s->client_shape == DL_SHAPE_CHAT)
        dl_openai_req_conversation(s->req, &cv);
    else
        canon_conversation(&s->creq, &cv);
    s->conv = conversation_key(s->client->name, id, &cv);
    s->within_turn = cv.last_is_tool;
}

/* The routing order puts paused members last; they are recorded as skipped now, in
 * their place at the head of the chain, and taken out of the list (DESIGN.md 6: a hop
 * that cannot serve is recorded with its reason). The pick stays even when paused:
 * when every candidate is paused, the one whose pause ends first is tried. */
void
net_skip_paused(struct net_stream *s)
{
    size_t i, k = 0;

    for (i = 0; i < s->n_cands; i++) {
        const struct gw_route_cand *c = &s->cands[i];

        if (c->state == GW_CAND_PAUSED && (int)i != s->pick && net_prov_spoken(c->prov) &&
            s->row->n_attempts < GW_ROW_MAX_ATTEMPTS) {
            net_attempt_add(s, c, GW_OUT_SKIPPED_PAUSED);
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

        if (c->state == GW_CAND_FULL && (int)i != s->pick && !c->sticky &&
            net_prov_spoken(c->prov) && s->row->n_attempts < GW_ROW_MAX_ATTEMPTS) {
            net_attempt_add(s, c, GW_OUT_SKIPPED_BUSY);
            s->busy_noted[i] = true;
        }
    }
}

/* Slot state for the routing engine: a full member sits the load-balance round out. */
bool
net_prov_full(void *arg, const struct gw_conf_provider *p)
{
    unsigned max = 0, in_use = 0;

    (void)arg;
    if (!net_prov_has_slot_limit(p))
        return false;
    gw_slots_stats(p->slots, &max, &in_use, NULL);
    return max && in_use >= max;
}
