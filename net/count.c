/* SPDX-License-Identifier: MIT
 * net/count.c - token counts: POST /v1/messages/count_tokens (issue 9) and Gemini's
 * POST /v1beta/models/{m}:countTokens (issue 10), forwarded to the first upstream of the
 * client's own shape among the model's candidates (Messages with the model rewritten,
 * Gemini with the model in the path); when none has it or that upstream does not
 * answer, the gateway's own estimate (DESIGN.md 18: a token per 4 bytes of the input),
 * marked with x-gw-estimated: true. A count is not an API
 * call of the key's: no row, no key limits, no slot.
 * Owns:    the stream's one exchange with the counting upstream.
 * Threads: the owning worker only; never blocks.
 * See:     net/pipeline-priv.h, dialects/canon.h
 */
#include "net/pipeline-priv.h"

#include <string.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/log.h"
#include "dialects/anthropic.h"
#include "net/logger.h"

#define NET_COUNT_MAX_ANSWER (64 * 1024)

/* The gateway's estimate, answered in the client's shape (Messages input_tokens,
 * Gemini totalTokens). */
static void
count_estimate(struct net_stream *s)
{
    static const struct net_hdr est = {GW_STR_LIT("x-gw-estimated"), GW_STR_LIT("true")};
    struct net_hdr h[2] = {est};
    char body[64];
    size_t n = 1;
    int len = snprintf(body, sizeof(body),
                       s->client_shape == DL_SHAPE_GEMINI ? "{\"totalTokens\":%llu}"
                                                          : "{\"input_tokens\":%llu}",
                       (unsigned long long)s->est_input);

    if (net_stream_dropped_header(s, &h[1]))
        n++;
    net_stream_settle(s, 200, GW_OK, GW_OUT_OK);
    net_stream_answer_with(s, 200, "application/json", h, n, body, (size_t)len);
    net_stream_finish(s, 200, GW_OK, GW_OUT_OK);
}

static void
on_count_head(void *arg, int status, const struct net_hdr *hdrs, size_t n_hdrs)
{
    struct net_stream *s = arg;

    (void)hdrs;
    (void)n_hdrs;
    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    s->up_status = status;
    s->up_ok = status == 200;
}

static void
on_count_body(void *arg, const char *data, size_t len)
{
    struct net_stream *s = arg;

    if (s->out.len + len <= NET_COUNT_MAX_ANSWER)
        gw_buf_append(&s->out, data, len);
    else
        s->up_ok = false; /* not a count: estimate */
}

static void
on_count_end(void *arg, enum gw_code rc)
{
    struct net_stream *s = arg;
    struct gw_log_ctx ctx = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

    GW_CHECK_OBJ(s, NET_STREAM_MAGIC);
    s->upx = NULL; /* freed by the pool after this returns */
    if (rc != GW_OK || !s->up_ok || !s->out.len) {
        GW_LOG(GW_LOG_INFO, &ctx, "count_estimated",
               "upstream %s did not count (status %d): the gateway's estimate answers",
               net_stream_prov(s)->name, s->up_status);
        count_estimate(s);
        return;
    }
    net_stream_settle(s, 200, GW_OK, GW_OUT_OK);
    net_stream_answer(s, 200, "application/json", s->out.data, s->out.len);
    net_stream_finish(s, 200, GW_OK, GW_OUT_OK);
}

static const struct net_up_cbs count_cbs = {
    .on_head = on_count_head,
    .on_body = on_count_body,
    .on_end = on_count_end,
};

/* The count request for candidate <c> of the client's own shape: Messages
 * /v1/messages/count_tokens with the model spliced in, Gemini :countTokens with the
 * model in the path and the body as it came. */
static enum gw_code
count_target(struct net_stream *s, const struct gw_route_cand *c, struct gw_buf *path,
             struct gw_buf *body)
{
    struct gw_str model = {c->model, c->model_len};

    if (gw_buf_append_cstr(path, c->prov->path_prefix) != GW_OK)
        return GW_E_NOMEM;
    if (s->client_shape == DL_SHAPE_GEMINI) {
        if (gw_buf_append_cstr(path, "/v1beta/models/") != GW_OK ||
            net_pct_encode_path(model, path) != GW_OK ||
            gw_buf_append_cstr(path, ":countTokens") != GW_OK)
            return GW_E_NOMEM;
        return gw_buf_append(body, s->body.data, s->body.len);
    }
    if (gw_buf_append_cstr(path, "/v1/messages/count_tokens") != GW_OK)
        return GW_E_NOMEM;
    return dl_splice_model(s->body.data, s->body.len, model, body);
}

/* Sends the count to candidate <c> (an upstream of the client's shape). False when it
 * could not. */
static bool
count_send(struct net_stream *s, const struct gw_route_cand *c)
{
    const struct gw_conf_provider *p = c->prov;
    struct gw_buf path = {0}, body = {0};
    struct net_hdr h[3];
    struct net_up_req rq;
    struct gw_str v;
    size_t n = 0;

    if (count_target(s, c, &path, &body) != GW_OK) {
        gw_buf_fini(&path);
        gw_buf_fini(&body);
        return false;
    }
    if (s->client_shape == DL_SHAPE_GEMINI) {
        h[n++] = (struct net_hdr){GW_STR_LIT("x-goog-api-key"), gw_str_c(p->keys[0].secret)};
    } else {
        h[n++] = (struct net_hdr){GW_STR_LIT("x-api-key"), gw_str_c(p->keys[0].secret)};
        h[n++] =
            (struct net_hdr){GW_STR_LIT("anthropic-version"), GW_STR_LIT(DL_ANTHROPIC_VERSION)};
        if (net_conn_header(s->conn, GW_STR_LIT("anthropic-beta"), &v))
            h[n++] = (struct net_hdr){GW_STR_LIT("anthropic-beta"), v};
    }
    memset(&rq, 0, sizeof(rq));
    rq.prov = p;
    rq.method = "POST";
    rq.path = (struct gw_str){path.data, path.len};
    rq.hdrs = h;
    rq.n_hdrs = n;
    rq.body = (struct gw_str){body.data, body.len};
    rq.connect_timeout_ms = s->conf->failover.connect_timeout_ms;
    rq.head_timeout_ms = s->conf->failover.first_byte_timeout_secs * 1000u;
    rq.idle_timeout_ms = s->conf->failover.read_idle_timeout_secs * 1000u;
    s->cur = (size_t)(c - s->cands);
    s->upx = net_up_send(s->w->pool, &rq, &count_cbs, s);
    gw_buf_fini(&path);
    gw_buf_fini(&body);
    return s->upx != NULL;
}

void
net_count_tokens(struct net_stream *s)
{
    struct net_conn *c = s->conn;
    struct gw_route_req rq;
    struct gw_route_result res;
    const char *why_auth = NULL;
    enum gw_code rc = GW_OK;
    size_t i;

    if (!s->client) /* not found by the head check in this snapshot */
        s->client = net_auth_client(c, s->conf, &rc, &why_auth);
    if (!s->client) {
        net_stream_refuse(s, rc, why_auth, false);
        return;
    }
    net_stream_take_body(s, c);
    if (net_stream_read_request(s) != GW_OK)
        return;
    if (!gw_conf_client_allows(s->client, s->model.ptr, s->model.len)) {
        net_stream_refuse(s, GW_E_MODEL_NOT_ALLOWED, "this key may not use that model", false);
        return;
    }
    memset(&rq, 0, sizeof(rq));
    rq.model = s->model.ptr;
    rq.model_len = s->model.len;
    rq.now_ms = net_now_ms();
    /* The order without advancing it: a count takes no turn of a load-balance round. */
    if (gw_route_order(s->conf, &rq, false, s->cands, &res) != GW_OK || res.pick < 0) {
        net_stream_refuse(s, GW_E_MODEL_NOT_FOUND, "no upstream offers that model", false);
        return;
    }
    s->n_cands = res.n;
    for (i = 0; i < s->n_cands; i++)
        if (net_prov_shape(s->cands[i].prov) == s->client_shape &&
            s->cands[i].state != GW_CAND_DISABLED && count_send(s, &s->cands[i]))
            return;
    count_estimate(s);
}
