/* SPDX-License-Identifier: MIT
 * net/quota.c - credentials and quota in the running gateway (DESIGN.md 10, issue 11):
 * the registry attached to a snapshot's providers, windows rebuilt from stored rows, the
 * set a hop chooses from, the credential events, the sweep and the views.
 * Owns:    nothing (see net/quota.h).
 * Threads: see net/quota.h.
 * See:     net/quota.h, core/quota.h, net/attempt.c
 */
#include "net/quota.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/sha.h>

#include "core/alloc.h"
#include "core/conf.h"
#include "core/events.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/quota.h"
#include "core/row.h"
#include "store/store.h"

static atomic_uint_fast64_t dropped_total;

/* The fingerprints of <p>'s keys (at most GW_QUOTA_MAX_CREDS: config refuses more). */
static size_t
prov_fps(const struct gw_conf_provider *p, char (*fps)[GW_QUOTA_FP_LEN + 1])
{
    size_t i, n = p->n_keys < GW_QUOTA_MAX_CREDS ? p->n_keys : GW_QUOTA_MAX_CREDS;

    for (i = 0; i < n; i++)
        memcpy(fps[i], p->keys[i].fp, GW_QUOTA_FP_LEN + 1);
    return n;
}

/* The model a set of <p> is kept for: "" with pool account. */
static void
set_model(const struct gw_conf_provider *p, const char *model, size_t len, char *out, size_t cap)
{
    if (p->quota_pool == GW_QUOTA_POOL_ACCOUNT || !model)
        len = 0;
    if (len >= cap)
        len = cap - 1;
    memcpy(out, model ? model : "", len);
    out[len] = '\0';
}

static struct gw_quota_set *
set_get(const struct gw_conf_provider *p, const char *m, bool *created)
{
    char fps[GW_QUOTA_MAX_CREDS][GW_QUOTA_FP_LEN + 1];
    struct gw_quota_set_conf c;
    struct gw_quota_set *s;
    size_t n;

    if (created)
        *created = false;
    s = gw_quota_reg_find(p->quota_reg, p->quota_name, m);
    if (s)
        return s;
    n = prov_fps(p, fps); /* for a new set only: found is every request's case */
    gw_quota_set_conf_of(p, m[0] ? m : NULL, &c);
    s = gw_quota_reg_get(p->quota_reg, p->quota_name, m, (const char(*)[GW_QUOTA_FP_LEN + 1]) fps,
                         n, &c, created);
    return s ? s : gw_quota_reg_find(p->quota_reg, p->quota_name, "");
}

struct gw_quota_set *
net_quota_set_of(const struct gw_conf_provider *p, const char *model, size_t len)
{
    char m[GW_MODEL_MAX + 1];

    if (!p->quota_reg || !p->n_keys)
        return NULL;
    set_model(p, model, len, m, sizeof(m));
    return set_get(p, m, NULL);
}

bool
net_quota_all_cooling(struct gw_quota_set *set, uint64_t now_ms, uint64_t *retry_at)
{
    struct gw_quota_choice why;
    size_t i;

    if (gw_quota_peek(set, now_ms, 0, &why) >= 0)
        return false;
    if (retry_at)
        *retry_at = why.retry_at_ms;
    for (i = 0; i < why.n; i++)
        if (why.v[i].skip != GW_QUOTA_SKIP_COOLING)
            return false;
    return why.n > 0;
}

/* ---- attach and rebuild ---- */

/* The providers whose sets a rebuild fills (new ones), by index in the snapshot. */
struct rebuild {
    struct gw_conf *conf;
    bool *fresh;
    uint64_t now_ms;
    size_t counted;
};

/* True for an attempt that may have reached its upstream (what live admission kept
 * counted: a connect failure gave its lease back). */
static bool
attempt_counts(const struct gw_attempt *a)
{
    switch ((enum gw_outcome)a->outcome) {
    case GW_OUT_OK:
    case GW_OUT_SLOW_START:
    case GW_OUT_CANCELLED:
    case GW_OUT_TOO_SLOW: return true;
    case GW_OUT_FAILED: return a->status != 0;
    default: return false;
    }
}

static int
on_rebuild_row(void *arg, const struct gw_row *row)
{
    struct rebuild *rb = arg;
    size_t i, j;

    for (i = 0; i < row->n_attempts && i < GW_ROW_MAX_ATTEMPTS; i++) {
        const struct gw_attempt *a = &row->attempts[i];
        uint64_t tokens = 0;
        char m[GW_MODEL_MAX + 1];

        if (!a->cred[0] || !attempt_counts(a))
            continue;
        for (j = 0; j < rb->conf->n_providers; j++)
            if (rb->fresh[j] && strcmp(rb->conf->providers[j].name, a->upstream) == 0)
                break;
        if (j == rb->conf->n_providers)
            continue;
        /* The answering hop carries the row's usage (the last attempt that answered). */
        if (a->outcome == GW_OUT_OK && i + 1 == row->n_attempts)
            tokens = gw_quota_usage_tokens(&row->usage);
        set_model(&rb->conf->providers[j], a->model, strlen(a->model), m, sizeof(m));
        if (!set_get(&rb->conf->providers[j], m, NULL))
            continue;
        if (gw_quota_reg_rebuild_add(rb->conf->providers[j].quota_reg, row->ts_ms,
                                     rb->conf->providers[j].quota_name, m, a->cred, tokens,
                                     rb->now_ms))
            rb->counted++;
    }
    return 0;
}

/* A learned limit kept in the store, restored into a new set of its provider. */
static int
on_learned(void *arg, const struct store_learned *l)
{
    struct rebuild *rb = arg;
    struct gw_quota_learned q;
    struct gw_quota_set *s;
    size_t j;
    int i;

    if (l->win >= GW_QUOTA_WINS || !l->limit)
        return 0;
    for (j = 0; j < rb->conf->n_providers; j++)
        if (rb->fresh[j] && strcmp(rb->conf->providers[j].name, l->provider) == 0)
            break;
    if (j == rb->conf->n_providers)
        return 0;
    s = set_get(&rb->conf->providers[j], l->model, NULL);
    i = s ? gw_quota_set_find(s, l->fp) : -1;
    if (i < 0)
        return 0; /* a key no longer configured */
    memset(&q, 0, sizeof(q));
    q.limit = l->limit;
    q.at_ms = l->at_ms;
    snprintf(q.origin, sizeof(q.origin), "%s", l->origin);
    gw_quota_learned_restore(s, (size_t)i, (enum gw_quota_win)l->win, &q);
    return 0;
}

/* quota_name: "<name>/<8 hex of SHA-256 over the fingerprints>". */
static void
quota_name(struct gw_conf_provider *p)
{
    unsigned char d[SHA256_DIGEST_LENGTH];
    char all[GW_QUOTA_MAX_CREDS * GW_QUOTA_FP_LEN];
    size_t i, n = p->n_keys < GW_QUOTA_MAX_CREDS ? p->n_keys : GW_QUOTA_MAX_CREDS;

    for (i = 0; i < n; i++)
        memcpy(all + i * GW_QUOTA_FP_LEN, p->keys[i].fp, GW_QUOTA_FP_LEN);
    SHA256((const unsigned char *)all, n * GW_QUOTA_FP_LEN, d);
    snprintf(p->quota_name, sizeof(p->quota_name), "%s/%02x%02x%02x%02x", p->name, d[0], d[1], d[2],
             d[3]);
}

struct reconf {
    const struct gw_conf_provider *p;
};

static void
on_reconf(void *arg, const char *provider, const char *model, struct gw_quota_set *s)
{
    const struct reconf *rc = arg;
    struct gw_quota_set_conf c;

    if (strcmp(provider, rc->p->quota_name) != 0)
        return;
    gw_quota_set_conf_of(rc->p, model[0] ? model : NULL, &c);
    gw_quota_set_configure(s, &c);
}

bool
net_quota_attach(struct gw_quota_reg *reg, struct store *st, struct gw_conf *conf, uint64_t now_ms)
{
    bool *fresh = gw_calloc(conf->n_providers + 1, sizeof(bool)), any = false;
    size_t i, k;

    if (!fresh)
        return false;
    for (i = 0; i < conf->n_providers; i++) {
        struct gw_conf_provider *p = &conf->providers[i];
        bool created = false;

        fresh[i] = false;
        for (k = 0; k < p->n_keys; k++)
            gw_quota_fingerprint(p->keys[k].secret, strlen(p->keys[k].secret), p->keys[k].fp);
        p->quota_reg = NULL;
        if (!p->n_keys)
            continue;
        quota_name(p);
        p->quota_reg = reg;
        if (!set_get(p, "", &created)) {
            gw_free(fresh);
            return false;
        }
        fresh[i] = created;
        any |= created;
        for (k = 0; p->quota_pool == GW_QUOTA_POOL_MODEL && k < p->n_models; k++) {
            if (strcmp(p->models[k], "*") != 0 && !set_get(p, p->models[k], NULL)) {
                gw_free(fresh);
                return false;
            }
        }
        if (!created) {
            /* a reload that kept the keys: every set of the provider (a "*" provider's
             * models included) takes the new limits, its counts stay */
            struct reconf rc = {p};

            gw_quota_reg_each(reg, on_reconf, &rc);
        }
    }
    if (any && st) {
        /* Today's rows (UTC) and the last minute's: every window still counting them. */
        uint64_t since = now_ms - now_ms % GW_QUOTA_DAY_MS;
        struct rebuild rb = {conf, fresh, now_ms, 0};

        if (now_ms - 60000 < since)
            since = now_ms - 60000;
        store_rows_since(st, since, on_rebuild_row, &rb);
        store_learned_each(st, on_learned, &rb); /* limits learned before the restart */
        if (rb.counted)
            GW_LOG(GW_LOG_INFO, NULL, "quota_rebuilt", "%zu credential hops counted from the store",
                   rb.counted);
    }
    gw_free(fresh);
    return true;
}

/* ---- events ---- */

void
net_quota_report_cooldown(const struct gw_conf_provider *p, const char *model, const char *fp,
                          unsigned status, const struct gw_quota_cooldown *c, uint64_t now_ms,
                          const struct gw_log_ctx *ctx)
{
    char since[64], until[64], json[1536]; /* a model escaped: at most 6 x 128 bytes */
    json_t *m = json_string(model ? model : "");
    char *mj = m ? json_dumps(m, JSON_ENCODE_ANY) : NULL;

    gw_fmt_iso_ms(c->since_ms ? c->since_ms : now_ms, since);
    gw_fmt_iso_ms(c->until_ms, until);
    snprintf(json, sizeof(json),
             "{\"type\":\"credential_cooldown\",\"provider\":\"%s\",\"model\":%s,"
             "\"credential\":\"%s\",\"status\":%u,\"source\":\"%s\",\"since\":\"%s\","
             "\"until\":\"%s\",\"hits\":%u,\"authoritative\":%s,\"capped\":%s}",
             p->name, mj ? mj : "\"\"", fp, status, gw_quota_source_str(c->source), since, until,
             c->hits, c->authoritative ? "true" : "false", c->capped ? "true" : "false");
    free(mj);
    json_decref(m);
    gw_event_push(GW_EV_CREDENTIAL_COOLDOWN, json);
    GW_LOG(GW_LOG_WARN, ctx, "credential_cooldown",
           "upstream %s credential %s cooling until %s (%s, status %u, %u hits)", p->name, fp,
           until, gw_quota_source_str(c->source), status, c->hits);
}

void
net_quota_report_recovered(const struct gw_conf_provider *p, const char *model, const char *fp,
                           const char *how, const struct gw_log_ctx *ctx)
{
    net_quota_report_recovered_named(p->name, model, fp, how, ctx);
}

void
net_quota_report_recovered_named(const char *provider, const char *model, const char *fp,
                                 const char *how, const struct gw_log_ctx *ctx)
{
    char json[1280]; /* a model escaped: at most 6 x 128 bytes */
    json_t *m = json_string(model ? model : "");
    char *mj = m ? json_dumps(m, JSON_ENCODE_ANY) : NULL;

    snprintf(json, sizeof(json),
             "{\"type\":\"credential_recovered\",\"provider\":\"%s\",\"model\":%s,"
             "\"credential\":\"%s\",\"reason\":\"%s\"}",
             provider, mj ? mj : "\"\"", fp, how);
    free(mj);
    json_decref(m);
    gw_event_push(GW_EV_CREDENTIAL_RECOVERED, json);
    GW_LOG(GW_LOG_INFO, ctx, "credential_recovered", "upstream %s credential %s %s", provider, fp,
           how);
}

/* ---- sweep ---- */

struct sweep {
    uint64_t now_ms;
    size_t dropped;
};

static void
on_sweep(void *arg, const char *provider, const char *model, struct gw_quota_set *s)
{
    struct sweep *sw = arg;
    size_t n = gw_quota_sweep(s, sw->now_ms);

    if (n)
        GW_LOG(GW_LOG_WARN, NULL, "quota_lease_dropped",
               "%zu quota leases of %s model '%s' dropped unsettled after 2 min", n, provider,
               model);
    sw->dropped += n;
}

size_t
net_quota_sweep(struct gw_quota_reg *reg, uint64_t now_ms)
{
    struct sweep sw = {now_ms, 0};

    if (!reg)
        return 0;
    gw_quota_reg_each(reg, on_sweep, &sw);
    atomic_fetch_add_explicit(&dropped_total, sw.dropped, memory_order_relaxed);
    return sw.dropped;
}

uint64_t
net_quota_dropped_total(void)
{
    return atomic_load_explicit(&dropped_total, memory_order_relaxed);
}

/* ---- learned limits kept ---- */

struct save {
    const struct gw_conf *conf;
    struct store *st;
    uint64_t since_ms, now_ms;
};

static void
on_save_set(void *arg, const char *provider, const char *model, struct gw_quota_set *s)
{
    struct save *sv = arg;
    size_t i, u;
    int w;

    for (i = 0; i < sv->conf->n_providers; i++)
        if (strcmp(sv->conf->providers[i].quota_name, provider) == 0)
            break;
    if (i == sv->conf->n_providers)
        return;
    for (u = 0; u < gw_quota_set_size(s); u++) {
        struct gw_quota_unit_view v;

        gw_quota_view(s, u, sv->now_ms, &v);
        for (w = 0; w < GW_QUOTA_WINS; w++) {
            struct store_learned l;

            if (!v.learned[w].limit || v.learned[w].at_ms <= sv->since_ms)
                continue;
            memset(&l, 0, sizeof(l));
            snprintf(l.provider, sizeof(l.provider), "%s", sv->conf->providers[i].name);
            snprintf(l.model, sizeof(l.model), "%s", model);
            memcpy(l.fp, v.fp, sizeof(l.fp));
            l.win = (unsigned)w;
            l.limit = v.learned[w].limit;
            l.at_ms = v.learned[w].at_ms;
            snprintf(l.origin, sizeof(l.origin), "%s", v.learned[w].origin);
            store_learned_put(sv->st, &l);
        }
    }
}

uint64_t
net_quota_save_learned(const struct gw_conf *conf, struct store *st, uint64_t since_ms,
                       uint64_t now_ms)
{
    struct save sv = {conf, st, since_ms, now_ms};
    size_t i;

    if (!st)
        return now_ms;
    for (i = 0; i < conf->n_providers; i++)
        if (conf->providers[i].quota_reg) {
            gw_quota_reg_each(conf->providers[i].quota_reg, on_save_set, &sv);
            break;
        }
    return now_ms;
}

/* ---- views ---- */

static json_t *
ts_json(uint64_t ms)
{
    char b[64];

    if (!ms)
        return json_null();
    gw_fmt_iso_ms(ms, b);
    return json_string(b);
}

static json_t *
unit_json(struct gw_quota_set *s, size_t i, uint64_t now_ms)
{
    struct gw_quota_unit_view v;
    json_t *u = json_object(), *wins = json_object(), *learned = json_object();
    int w;

    gw_quota_view(s, i, now_ms, &v);
    if (!u || !wins || !learned) {
        json_decref(u);
        json_decref(wins);
        json_decref(learned);
        return NULL;
    }
    json_object_set_new(u, "fp", json_string(v.fp));
    for (w = 0; w < GW_QUOTA_WINS; w++) {
        json_t *o = json_object();

        json_object_set_new(o, "used", json_integer((json_int_t)v.win[w].used));
        json_object_set_new(
            o, "limit", v.win[w].limit ? json_integer((json_int_t)v.win[w].limit) : json_null());
        json_object_set_new(o, "resets_at", ts_json(v.win[w].resets_at_ms));
        if (v.win[w].held_until_ms)
            json_object_set_new(o, "held_until", ts_json(v.win[w].held_until_ms));
        json_object_set_new(wins, gw_quota_win_str((enum gw_quota_win)w), o);
        if (v.learned[w].limit) {
            json_t *l = json_object();

            json_object_set_new(l, "limit", json_integer((json_int_t)v.learned[w].limit));
            json_object_set_new(l, "origin", json_string(v.learned[w].origin));
            json_object_set_new(l, "at", ts_json(v.learned[w].at_ms));
            json_object_set_new(learned, gw_quota_win_str((enum gw_quota_win)w), l);
        }
    }
    json_object_set_new(u, "windows", wins);
    json_object_set_new(u, "leases", json_integer(v.open_leases));
    json_object_set_new(u, "leases_dropped", json_integer((json_int_t)v.leases_dropped));
    json_object_set_new(u, "seen", json_boolean(v.seen));
    if (v.cool.source != GW_QUOTA_SRC_NONE && v.cool.until_ms > now_ms) {
        json_t *c = json_object();

        json_object_set_new(c, "source", json_string(gw_quota_source_str(v.cool.source)));
        json_object_set_new(c, "since", ts_json(v.cool.since_ms));
        json_object_set_new(c, "until", ts_json(v.cool.until_ms));
        json_object_set_new(c, "hits", json_integer(v.cool.hits));
        json_object_set_new(c, "authoritative", json_boolean(v.cool.authoritative));
        json_object_set_new(c, "capped", json_boolean(v.cool.capped));
        json_object_set_new(u, "cooldown", c);
    } else {
        json_object_set_new(u, "cooldown", json_null());
    }
    json_object_set_new(u, "learned", learned);
    return u;
}

/* True when no unit of <s> counts anything, cools, or learned a limit. */
static bool
set_idle(struct gw_quota_set *s, uint64_t now_ms)
{
    size_t i;
    int w;

    for (i = 0; i < gw_quota_set_size(s); i++) {
        struct gw_quota_unit_view v;

        gw_quota_view(s, i, now_ms, &v);
        if (v.seen || v.open_leases || v.cool.source != GW_QUOTA_SRC_NONE)
            return false;
        for (w = 0; w < GW_QUOTA_WINS; w++)
            if (v.win[w].used || v.learned[w].limit)
                return false;
    }
    return true;
}

struct view {
    const struct gw_conf *conf;
    json_t *out;
    uint64_t now_ms;
};

static void
on_view_set(void *arg, const char *provider, const char *model, struct gw_quota_set *s)
{
    struct view *vw = arg;
    json_t *prov, *sets, *set, *creds;
    size_t i;

    /* Only the sets of this snapshot's keys (an old set of changed keys stays unseen). */
    for (i = 0; i < vw->conf->n_providers; i++)
        if (strcmp(vw->conf->providers[i].quota_name, provider) == 0)
            break;
    if (i == vw->conf->n_providers)
        return;
    if (!model[0] && vw->conf->providers[i].quota_pool == GW_QUOTA_POOL_MODEL &&
        set_idle(s, vw->now_ms))
        return; /* the fallback set of a pool-model provider, never used: noise */
    prov = json_object_get(vw->out, vw->conf->providers[i].name);
    if (!prov) {
        prov = json_object();
        json_object_set_new(prov, "pool",
                            json_string(vw->conf->providers[i].quota_pool == GW_QUOTA_POOL_ACCOUNT
                                            ? "account"
                                            : "model"));
        json_object_set_new(prov, "sets", json_array());
        json_object_set_new(vw->out, vw->conf->providers[i].name, prov);
    }
    sets = json_object_get(prov, "sets");
    set = json_object();
    creds = json_array();
    if (!set || !creds || !sets) {
        json_decref(set);
        json_decref(creds);
        return;
    }
    json_object_set_new(set, "model", json_string(model));
    for (i = 0; i < gw_quota_set_size(s); i++)
        json_array_append_new(creds, unit_json(s, i, vw->now_ms));
    json_object_set_new(set, "credentials", creds);
    json_array_append_new(sets, set);
}

json_t *
net_quota_view(const struct gw_conf *conf, uint64_t now_ms)
{
    struct view vw = {conf, json_object(), now_ms};
    size_t i;

    if (!vw.out)
        return NULL;
    for (i = 0; i < conf->n_providers; i++)
        if (conf->providers[i].quota_reg) {
            gw_quota_reg_each(conf->providers[i].quota_reg, on_view_set, &vw);
            break; /* one registry per process */
        }
    return vw.out;
}

json_t *
net_quota_peek_json(const struct gw_conf_provider *p, const char *model, size_t len,
                    uint64_t est_tokens, uint64_t now_ms)
{
    struct gw_quota_set *s = net_quota_set_of(p, model, len);
    struct gw_quota_choice why;
    json_t *o, *creds;
    size_t i;
    int k;

    if (!s)
        return NULL;
    k = gw_quota_peek(s, now_ms, est_tokens, &why);
    o = json_object();
    creds = json_array();
    if (!o || !creds) {
        json_decref(o);
        json_decref(creds);
        return NULL;
    }
    json_object_set_new(o, "chosen",
                        k >= 0 && (size_t)k < p->n_keys ? json_string(p->keys[k].fp) : json_null());
    json_object_set_new(o, "retry_at", k < 0 ? ts_json(why.retry_at_ms) : json_null());
    for (i = 0; i < why.n && i < p->n_keys; i++) {
        char line[160];
        json_t *c = json_object();

        json_object_set_new(c, "fp", json_string(p->keys[i].fp));
        json_object_set_new(
            c, "verdict", json_string(gw_quota_verdict_str(&why.v[i], now_ms, line, sizeof(line))));
        json_array_append_new(creds, c);
    }
    json_object_set_new(o, "credentials", creds);
    return o;
}

/* ---- /metrics ---- */

/* One unit as /metrics shows it: the provider's config name, the set's model, the view. */
struct metric_unit {
    const char *provider, *model;
    struct gw_quota_unit_view v;
};

struct metrics {
    const struct gw_conf *conf;
    uint64_t now_ms;
    struct metric_unit *u;
    size_t n, omitted;
};

static void
on_metrics_set(void *arg, const char *provider, const char *model, struct gw_quota_set *s)
{
    struct metrics *mx = arg;
    size_t i, k;

    for (i = 0; i < mx->conf->n_providers; i++)
        if (strcmp(mx->conf->providers[i].quota_name, provider) == 0)
            break;
    if (i == mx->conf->n_providers || set_idle(s, mx->now_ms))
        return; /* an old set of changed keys, or a set that never counted anything */
    for (k = 0; k < gw_quota_set_size(s); k++) {
        if (mx->n == NET_QUOTA_METRICS_MAX_UNITS) {
            mx->omitted++;
            continue;
        }
        mx->u[mx->n].provider = mx->conf->providers[i].name;
        mx->u[mx->n].model = model; /* the registry keeps its names for the process's life */
        gw_quota_view(s, k, mx->now_ms, &mx->u[mx->n].v);
        mx->n++;
    }
}

/* `name{provider="..",credential="..",model=".."` (no closing brace). */
static bool
unit_labels(struct gw_buf *b, const char *name, const struct metric_unit *u)
{
    return gw_buf_printf(b, "%s{provider=\"", name) == GW_OK &&
           gw_metrics_append_label(b, gw_str_c(u->provider)) == GW_OK &&
           gw_buf_printf(b, "\",credential=\"%s\",model=\"", u->v.fp) == GW_OK &&
           gw_metrics_append_label(b, gw_str_c(u->model)) == GW_OK &&
           gw_buf_append(b, "\"", 1) == GW_OK;
}

static bool
metric_family(struct gw_buf *b, const char *name, const char *type, const char *help)
{
    return gw_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type) == GW_OK;
}

enum quota_series { QS_USED, QS_LIMIT, QS_LEASES, QS_COOLING, QS_UNTIL, QS_DROPPED, QS__COUNT };

static const struct {
    const char *name, *type, *help;
} quota_series[QS__COUNT] = {
    [QS_USED] = {"gw_quota_window_used", "gauge",
                 "Requests or tokens an upstream credential's quota window counts, leases "
                 "included."},
    [QS_LIMIT] = {"gw_quota_window_limit", "gauge",
                  "The window's effective limit (configured or learned); absent when unknown."},
    [QS_LEASES] = {"gw_quota_leases", "gauge", "Requests in flight holding a lease."},
    [QS_COOLING] = {"gw_quota_cooling", "gauge",
                    "1 while the credential cools down, with the cooldown's source."},
    [QS_UNTIL] = {"gw_quota_cooldown_until_seconds", "gauge",
                  "End of the credential's cooldown (Unix time); 0 when not cooling."},
    [QS_DROPPED] = {"gw_quota_leases_dropped_total", "counter",
                    "Leases dropped unsettled after 2 min (a backstop against a bug)."},
};

/* The lines of series <q> for unit <u>. */
static bool
unit_series(struct gw_buf *b, enum quota_series q, const struct metric_unit *u, uint64_t now_ms)
{
    const struct gw_quota_unit_view *v = &u->v;
    bool cooling = v->cool.source != GW_QUOTA_SRC_NONE && v->cool.until_ms > now_ms;
    bool ok = true;
    int w;

    switch (q) {
    case QS_USED:
    case QS_LIMIT:
        for (w = 0; w < GW_QUOTA_WINS && ok; w++) {
            uint64_t x = q == QS_USED ? v->win[w].used : v->win[w].limit;

            if (q == QS_LIMIT && !x)
                continue;
            ok = unit_labels(b, quota_series[q].name, u) &&
                 gw_buf_printf(b, ",window=\"%s\"} %llu\n", gw_quota_win_str((enum gw_quota_win)w),
                               (unsigned long long)x) == GW_OK;
        }
        return ok;
    case QS_LEASES:
        return unit_labels(b, quota_series[q].name, u) &&
               gw_buf_printf(b, "} %u\n", (unsigned)v->open_leases) == GW_OK;
    case QS_COOLING:
        return unit_labels(b, quota_series[q].name, u) &&
               gw_buf_printf(b, ",source=\"%s\"} %d\n",
                             gw_quota_source_str(cooling ? v->cool.source : GW_QUOTA_SRC_NONE),
                             cooling) == GW_OK;
    case QS_UNTIL:
        return unit_labels(b, quota_series[q].name, u) &&
               gw_buf_printf(b, "} %llu.%03llu\n",
                             (unsigned long long)(cooling ? v->cool.until_ms / 1000 : 0),
                             (unsigned long long)(cooling ? v->cool.until_ms % 1000 : 0)) == GW_OK;
    case QS_DROPPED:
        return unit_labels(b, quota_series[q].name, u) &&
               gw_buf_printf(b, "} %llu\n", (unsigned long long)v->leases_dropped) == GW_OK;
    case QS__COUNT: break;
    }
    return ok;
}

bool
net_quota_metrics(struct gw_buf *b, const struct gw_conf *conf, uint64_t now_ms)
{
    struct metrics mx = {conf, now_ms, NULL, 0, 0};
    unsigned q;
    size_t i;
    bool ok = true;

    for (i = 0; conf && i < conf->n_providers; i++)
        if (conf->providers[i].quota_reg) {
            mx.u = gw_malloc(NET_QUOTA_METRICS_MAX_UNITS * sizeof(*mx.u));
            if (!mx.u)
                return false;
            gw_quota_reg_each(conf->providers[i].quota_reg, on_metrics_set, &mx);
            break; /* one registry per process */
        }
    for (q = 0; q < QS__COUNT && ok; q++) {
        ok = metric_family(b, quota_series[q].name, quota_series[q].type, quota_series[q].help);
        for (i = 0; i < mx.n && ok; i++)
            ok = unit_series(b, (enum quota_series)q, &mx.u[i], now_ms);
    }
    gw_free(mx.u);
    return ok &&
           metric_family(b, "gw_quota_units_omitted", "gauge",
                         "Credential units left off this page (over the series bound).") &&
           gw_buf_printf(b, "gw_quota_units_omitted %zu\n", mx.omitted) == GW_OK;
}
