/* SPDX-License-Identifier: MIT
 * net/respstate.c - OpenAI Responses state (DESIGN.md 11): a Responses client's
 * previous_response_id, and the conversations the gateway keeps so it can honour it.
 *
 * A request with previous_response_id looks its record up in the store (store/,
 * store_resp_get), among the records of its own client (gateway key): another
 * client's is not found, as if it were not there. Found, made by a Responses
 * upstream: that upstream is tried first (routing's sticky slot) and gets the body
 * as it came; any other candidate gets the body expanded with the recorded items
 * (dialects/responses.h, dl_responses_expand), spliced for another Responses
 * upstream or converted through the hub. Not found: only Responses upstreams can
 * take it (the id may be theirs); every other one is passed over as unconvertible,
 * and with none left the client gets 400 gw.unconvertible.
 *
 * An answer to a Responses client with `store` not false is kept (unless
 * store.responses is false): the recorded items before it, this request's input items
 * and the answer's output items (rendered from the folded events by the one renderer of
 * Responses output items), under the response id the client saw. A Responses upstream's
 * encrypted reasoning is not kept: only its maker can read it, and the maker continues
 * its own response. Another shape's signatures are kept tagged with their shape
 * (dl_sig_append_json), so an expansion sends them to that shape only.
 * On a WebSocket turn (net/ws.c) the connection's last response is asked first
 * (net_ws_recall) and every answer is remembered there (net_ws_remember), store false
 * included: a Responses upstream told store false kept nothing, so it is expanded too.
 * Owns:    the stream's record buffers (freed with the stream).
 * Threads: the owning worker only; the store's get reads in its own read transaction.
 * See:     net/pipeline-priv.h, store/store.h, dialects/responses.h
 */
#include "net/pipeline-priv.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"
#include "dialects/responses.h"
#include "net/logger.h"
#include "store/store.h"

/* The answer goes into the store (store.responses, and the client's store not false). */
static bool
keeps_stored(const struct net_stream *s)
{
    return s->client_shape == DL_SHAPE_RESPONSES && s->w->store && s->conf->store.responses &&
           s->creq_ready && s->creq.store != 0;
}

/* A WebSocket turn: its connection remembers the answer whatever store says. */
static bool
ws_turn(const struct net_stream *s)
{
    return s->conn && s->conn->wst;
}

static bool
keeps(const struct net_stream *s)
{
    return keeps_stored(s) ||
           (s->client_shape == DL_SHAPE_RESPONSES && s->creq_ready && ws_turn(s));
}

enum gw_code
net_resp_prepare(struct net_stream *s, struct gw_buf *why)
{
    struct gw_str prev = s->creq.previous_response_id;
    struct gw_buf xbody = {0};
    enum gw_code rc;
    int shape = 0;

    if (s->client_shape != DL_SHAPE_RESPONSES)
        return GW_OK;
    s->resp_keep = keeps(s);
    if (s->resp_keep)
        dl_answer_init(&s->resp_fold, &s->arena);
    if (!prev.len)
        return GW_OK;
    s->prev_id = gw_arena_str(&s->arena, prev);
    if (!s->prev_id.ptr)
        return GW_E_NOMEM;
    if (ws_turn(s) && net_ws_recall(s->conn, prev, s->prev_provider, &shape, &s->prev_items)) {
        /* the response this connection served last (DESIGN.md 12), store false or not */
    } else if (!s->w->store || prev.len > 128) {
        return GW_OK; /* not ours: only a Responses upstream can continue it */
    } else {
        char id[129];

        memcpy(id, prev.ptr, prev.len);
        id[prev.len] = '\0';
        if (store_resp_get(s->w->store, id, s->row->client, s->prev_provider, &shape,
                           &s->prev_items) != GW_OK)
            return GW_OK;
    }
    s->prev_found = true;
    s->prev_shape = (enum dl_shape)shape;
    /* Every candidate but the one that made it needs the history in the body. */
    rc = dl_responses_expand(s->body.data, s->body.len,
                             (struct gw_str){s->prev_items.data, s->prev_items.len}, &xbody);
    if (rc != GW_OK) {
        gw_buf_fini(&xbody);
        if (rc != GW_E_NOMEM)
            gw_buf_append_cstr(why, "the request cannot be joined to its previous response");
        return rc;
    }
    s->xbody = xbody;
    memset(&s->creq, 0, sizeof(s->creq));
    rc = s->client_ops->request_parse(&s->arena, s->xbody.data, s->xbody.len, &s->creq, why);
    if (rc == GW_OK)
        s->est_input = dl_request_input_estimate(&s->creq);
    return rc;
}

const char *
net_resp_sticky(const struct net_stream *s)
{
    return s->prev_found && s->prev_shape == DL_SHAPE_RESPONSES ? s->prev_provider : NULL;
}

enum net_resp_body
net_resp_body_for(struct net_stream *s, const struct gw_conf_provider *p, enum dl_shape up)
{
    if (s->client_shape != DL_SHAPE_RESPONSES || !s->prev_id.len)
        return NET_RESP_AS_SENT;
    if (up == DL_SHAPE_RESPONSES && (!s->prev_found || strcmp(p->name, s->prev_provider) == 0))
        return NET_RESP_AS_SENT; /* it (may have) made the previous response */
    if (!s->prev_found) {
        snprintf(s->unconvertible, sizeof(s->unconvertible),
                 "previous_response_id %.*s is not a response this gateway kept; only a "
                 "Responses upstream can continue it",
                 (int)(s->prev_id.len < 60 ? s->prev_id.len : 60), s->prev_id.ptr);
        return NET_RESP_UNCONVERTIBLE;
    }
    return NET_RESP_EXPANDED;
}

void
net_resp_hop(struct net_stream *s)
{
    if (!s->resp_keep)
        return;
    dl_answer_fini(&s->resp_fold);
    dl_answer_init(&s->resp_fold, &s->arena);
}

void
net_resp_event(struct net_stream *s, const struct dl_event *ev)
{
    if (s->resp_keep)
        dl_answer_fold(&s->resp_fold, ev);
}

bool
net_resp_answer(struct net_stream *s, const char *body, size_t len)
{
    return s->resp_keep &&
           s->up_ops->answer_parse(body, len, dl_answer_fold, &s->resp_fold) == GW_OK;
}

/* Appends the items of JSON array <arr> (its text between the brackets) to the list
 * being built in <out>. */
static enum gw_code
append_items(struct gw_buf *out, struct gw_str arr)
{
    size_t a = 0, b = arr.len;

    while (a < b && arr.ptr[a] != '[')
        a++;
    while (b > a && arr.ptr[b - 1] != ']')
        b--;
    if (b <= a + 1)
        return GW_OK;
    a++;
    b--;
    while (a < b &&
           (arr.ptr[a] == ' ' || arr.ptr[a] == '\n' || arr.ptr[a] == '\r' || arr.ptr[a] == '\t'))
        a++;
    if (a == b)
        return GW_OK;
    if (out->len > 1 && gw_buf_append(out, ",", 1) != GW_OK)
        return GW_E_NOMEM;
    return gw_buf_append(out, arr.ptr + a, b - a);
}

void
net_resp_keep(struct net_stream *s)
{
    const struct gw_conf_provider *p = net_stream_prov(s);
    struct dl_render_ctx ctx = {.model = s->model,
                                .id = {s->id, GW_ROW_ID_LEN},
                                .created = net_now_ms() / 1000,
                                .upstream = s->up_shape,
                                .arena = &s->arena,
                                .req = &s->creq};
    struct gw_buf items = {0}, part = {0};
    char id[160];
    struct gw_str rid;
    enum gw_code rc;

    if (!s->resp_keep || s->resp_fold.failed)
        return;
    if (s->up_shape == DL_SHAPE_RESPONSES) {
        /* Its encrypted reasoning is for its maker alone, which continues the response
         * itself (previous_response_id goes back to it); the record serves the others. */
        size_t i;

        for (i = 0; i < s->resp_fold.n_blocks; i++)
            if (s->resp_fold.blocks[i].block == DL_BLOCK_REASONING)
                gw_buf_reset(&s->resp_fold.blocks[i].signature);
    }
    /* The id the client saw: the upstream's when relayed as it came, else the
     * renderer's, made from the request id (dialects/responses.c). */
    if (!s->convert && s->resp_fold.id.len) {
        rid = s->resp_fold.id;
    } else {
        int n = snprintf(id, sizeof(id), "resp_%s", s->id);

        rid = (struct gw_str){id, (size_t)n};
    }
    if (rid.len >= sizeof(id) - 1)
        return;
    if (rid.ptr != id) {
        memcpy(id, rid.ptr, rid.len);
        id[rid.len] = '\0';
    }
    rc = gw_buf_append(&items, "[", 1);
    if (rc == GW_OK && s->prev_found)
        rc = append_items(&items, (struct gw_str){s->prev_items.data, s->prev_items.len});
    if (rc == GW_OK)
        rc = dl_responses_input_items(s->body.data, s->body.len, &part);
    if (rc == GW_OK)
        rc = append_items(&items, (struct gw_str){part.data, part.len});
    gw_buf_reset(&part);
    if (rc == GW_OK)
        rc = dl_responses_output_items(&s->resp_fold, &ctx, &part);
    if (rc == GW_OK)
        rc = append_items(&items, (struct gw_str){part.data, part.len});
    if (rc == GW_OK)
        rc = gw_buf_append(&items, "]", 1);
    if (rc == GW_OK && ws_turn(s))
        /* a Responses upstream told store false keeps nothing: the others expand it */
        net_ws_remember(s->conn, id, s->creq.store != 0 ? p->name : "",
                        s->creq.store != 0 ? (int)s->up_shape : (int)DL_SHAPE_CHAT, items.data,
                        items.len);
    if (rc == GW_OK && keeps_stored(s))
        rc = store_resp_put(s->w->store, id, s->row->client, p->name, (int)s->up_shape,
                            net_now_ms(), items.data, items.len);
    if (rc != GW_OK) {
        struct gw_log_ctx lc = {(int)s->w->id, s->conn ? s->conn->id : 0, s->id};

        GW_LOG(GW_LOG_WARN, &lc, gw_code_str(rc),
               "response %s not kept: a later previous_response_id to it will not expand", id);
    }
    gw_buf_fini(&part);
    gw_buf_fini(&items);
}

void
net_resp_fini(struct net_stream *s)
{
    if (s->resp_keep)
        dl_answer_fini(&s->resp_fold);
    gw_buf_fini(&s->prev_items);
    gw_buf_fini(&s->xbody);
}
