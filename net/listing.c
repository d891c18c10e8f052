/* SPDX-License-Identifier: MIT
 * net/listing.c - GET /v1/models and /v1/models/{id} (DESIGN.md 9): groups first, then
 * every model an enabled provider lists by name, described by the first upstream
 * offering it (context window, max output from the one resolve function), only what
 * the key may use.
 * Owns:    nothing beyond one call.
 * Threads: the owning worker only.
 * See:     net/pipeline-priv.h, dialects/openai_models.c
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
#include "dialects/json_scan.h"
#include "dialects/openai.h"
#include "net/calendar.h"
#include "net/logger.h"
#include "net/sink.h"
#include "net/upstream.h"
#include "store/store.h"

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

/* The one model a listing asks for: /v1/models/{id}, /v1beta/models/{m} (percent-decoded,
 * without the "models/" of Gemini's resource names); false for a whole listing. */
static bool
listing_one(struct net_stream *s, struct gw_str *want)
{
    const struct net_conn *c = s->conn;
    const char *q = memchr(c->rq.url.data, '?', c->rq.url.len);
    size_t plen = q ? (size_t)(q - c->rq.url.data) : c->rq.url.len;
    char *m;
    int n;

    if (s->client_shape != DL_SHAPE_GEMINI) {
        if (plen <= 11) /* "/v1/models/" + id */
            return false;
        *want = (struct gw_str){c->rq.url.data + 11, plen - 11};
        return true;
    }
    if (!s->tgt.model.len)
        return false;
    m = gw_arena_alloc(&s->arena, s->tgt.model.len);
    n = m ? gw_pct_decode(s->tgt.model, m, s->tgt.model.len) : -1;
    if (n < 0) {
        *want = (struct gw_str){"", 0}; /* found by no model */
        return true;
    }
    *want = (struct gw_str){m, (size_t)n};
    if (n > 7 && memcmp(m, "models/", 7) == 0)
        *want = (struct gw_str){m + 7, (size_t)n - 7};
    return true;
}

void
net_models_listing(struct net_stream *s)
{
    struct net_conn *c = s->conn;
    struct dl_model_entry *v;
    struct gw_buf body = {0};
    const char *why_auth = NULL;
    enum gw_code rc = GW_OK;
    size_t max = s->conf->n_groups, n, i;
    const char *id = NULL;
    struct gw_str want;
    /* In the Anthropic shape when the request carries anthropic-version, Gemini's under
     * /v1beta (DESIGN.md 4). */
    enum gw_code (*render)(const struct dl_model_entry *, size_t, bool, struct gw_buf *) =
        s->client_shape == DL_SHAPE_MESSAGES ? dl_anthropic_models_render
        : s->client_shape == DL_SHAPE_GEMINI ? dl_gemini_models_render
                                             : dl_openai_models_render;

    if (!s->client) /* not found by the head check in this snapshot */
        s->client = net_auth_client(c, s->conf, &rc, &why_auth);
    if (!s->client) {
        net_stream_refuse(s, rc, why_auth, false);
        return;
    }
    for (i = 0; i < s->conf->n_providers; i++)
        max += s->conf->providers[i].n_models;
    v = gw_arena_calloc(&s->arena, max ? max : 1, sizeof(*v));
    if (!v) {
        net_stream_refuse(s, GW_E_NOMEM, "out of memory", false);
        return;
    }
    n = models_collect(s->conf, s->client, v, max);
    if (listing_one(s, &want)) {
        for (i = 0; i < n; i++)
            if (strlen(v[i].id) == want.len && memcmp(v[i].id, want.ptr, want.len) == 0)
                id = v[i].id;
        if (!id) {
            net_stream_refuse(s, GW_E_MODEL_NOT_FOUND, "no such model for this key", false);
            return;
        }
        for (i = 0; i < n; i++)
            if (v[i].id == id)
                break;
        if (render(&v[i], 1, true, &body) != GW_OK)
            gw_buf_fini(&body);
    } else if (render(v, n, false, &body) != GW_OK) {
        gw_buf_fini(&body);
    }
    if (!body.data) {
        net_stream_refuse(s, GW_E_NOMEM, "out of memory", false);
        return;
    }
    net_stream_answer(s, 200, "application/json", body.data, body.len);
    gw_buf_fini(&body);
    net_stream_finish(s, 200, GW_OK, GW_OUT_OK);
}
