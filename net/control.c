/* SPDX-License-Identifier: MIT
 * net/control.c - the control thread: one event_base and one evhttp server on
 * control.listen answering /healthz, /readyz, /metrics (Prometheus text) and the bearer-token
 * protected /control/v1/ JSON API (DESIGN.md 14, 18): version, traffic, overview,
 * dry-run, events, POST reload (net/reload.h) and the saves: PUT provider-model-spec
 * and PUT/DELETE groups|keys|providers/{name}.
 * Each request acquires the live config snapshot (for the token) and releases it before
 * the handler returns; traffic pages are read from the store in their own read
 * transaction (store_rows_page), so nothing is held across callbacks. The dry-run calls
 * the data plane's own ordering (gw_route_order with advance = false) and conversation
 * key (net_conversation_key), so it answers what a request would get, changing nothing.
 * A save hands its file work (net/save.h: read the config file, edit its one entry with
 * core/yaml_edit.h, validate the whole text with gw_conf_parse as a reload would,
 * replace the file atomically) to a helper thread of its own, which fires the save's
 * event on this loop when it is done, so the loop never waits for the disk. The loop
 * then asks main for a reload (net/reload.h, the queue POST reload uses) and answers
 * with what that reload changed.
 * Owns:    the thread, its event_base, the evhttp server and listener, the stop event,
 *          the saves (and their helper threads, joined before a save is freed).
 * Threads: net_control_start/stop on main; every handler on the control thread, which
 *          blocks only on its own sockets and short LMDB reads.
 * See:     net/control.h, cli/ (gwctl), tests/unit/net/test_control.c, docs/gwctl.md
 */
#include "net/control.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <ck_pr.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <openssl/evp.h>

#include "core/alloc.h"
#include "core/codes.h"
#include "core/events.h"
#include "core/health.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/route.h"
#include "core/row.h"
#include "core/slots.h"
#include "core/snap.h"
#include "core/sticky.h"
#include "core/str.h"
#include "core/yaml_edit.h"
#include "dialects/json_scan.h"
#include "dialects/openai.h"
#include "net/calendar.h"
#include "net/egress.h"
#include "net/logger.h"
#include "net/metrics.h"
#include "net/net-priv.h"
#include "net/quota.h"
#include "net/reload.h"
#include "net/report.h"
#include "net/save.h"
#include "store/store.h"

#define CONTROL_LIMIT_DEFAULT 50
#define CONTROL_LIMIT_MAX 500
/* A dry-run carries a whole Chat Completions body: allow long conversations. */
#define CONTROL_MAX_BODY (4 * 1024 * 1024)
#define CONTROL_MAX_HEADERS (16 * 1024)
#define CONTROL_MAX_SUBS 64 /* event stream subscribers at once */
#define CONTROL_EVENTS_TICK_MS 100
#define CONTROL_SUB_MAX_BACKLOG (8u * 1024 * 1024) /* bytes queued to one event follower */
#define CONTROL_TIMEOUT_SECS 30
#define CONTROL_PREFIX "/control/v1/"
/* "2026-11-30T04:01:02.345Z" and its NUL */
/* A model-spec save waits this long for the reload to publish its entry. */
#define CONTROL_MAX_SAVES 16 /* saves waiting for their reload at once */

struct net_control;

/* One follower of GET /control/v1/events. */
struct event_sub {
    struct evhttp_request *req; /* evhttp's; ours until its connection closes */
    struct gw_event_filter f;   /* what it asked for (core/events.h) */
    uint64_t skipped;           /* events left out since its backlog was too long, untold */
};

/* A save (PUT provider-model-spec, PUT/DELETE groups|keys|providers/{name}): its file
 * work on a helper thread, then its answer waiting for the reload. */
struct save {
    struct net_control *c;
    struct evhttp_request *req; /* answered at the end; NULL once the client has gone */
    struct net_save *job;       /* owned: the request and what the file work did */
    struct event *ev;           /* owned: the helper's done event */
    pthread_t thread;           /* the helper thread ... */
    bool running;               /* ... not joined yet */
    bool reloading;             /* its reload is asked, not answered yet */
};

struct net_control {
    struct event_base *base;          /* owned; run by the thread only */
    struct evhttp *http;              /* owned */
    struct evhttp_bound_socket *sock; /* owned by http */
    struct event *stop_ev;            /* owned; made active by net_control_stop */
    struct net_deps deps;             /* copied; the objects are borrowed, may be NULL */
    uint64_t quota_saved_ms;          /* learned limits up to then are in the store */
    uint16_t port;
    int phase;    /* enum net_control_phase; ck_pr: set by main, read per request */
    bool running; /* the thread was started */
    pthread_t thread;
    struct gw_thread thr; /* the control thread's epoch record */
    /* GET /control/v1/events subscribers (SSE) and the tick that feeds them */
    struct event_sub subs[CONTROL_MAX_SUBS];
    size_t n_subs;
    struct event *ev_tick;
    unsigned ticks;
    uint64_t drops_told[GW_EV__COUNT]; /* ring drops per event name told so far */
    /* saves being written or waiting for their reload */
    struct save *saves[CONTROL_MAX_SAVES];
    size_t n_saves;
};

/* ---- JSON helpers ---- */

/* A JSON string from the fixed-size row field <s> (at most <cap> bytes, NUL within),
 * null when empty. Not-UTF-8 input (a model id cut mid-character) becomes '?'s. */
static json_t *
json_field(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap), i;
    char tmp[256];
    json_t *j;

    if (n == 0)
        return json_null();
    j = json_stringn(s, n);
    if (j || n > sizeof(tmp))
        return j;
    for (i = 0; i < n; i++)
        tmp[i] = (unsigned char)s[i] >= 0x80 ? '?' : s[i];
    return json_stringn(tmp, n);
}

static json_t *
json_code_or_null(unsigned code)
{
    return code == GW_OK ? json_null() : json_string(gw_code_str((enum gw_code)code));
}

static json_t *
json_ms_or_null(int32_t ms)
{
    return ms < 0 ? json_null() : json_integer(ms);
}

static json_t *
attempt_json(const struct gw_attempt *a)
{
    json_t *o = json_object();
    int rc = 0;

    rc |= json_object_set_new(o, "upstream", json_field(a->upstream, sizeof(a->upstream)));
    rc |= json_object_set_new(o, "model", json_field(a->model, sizeof(a->model)));
    rc |=
        json_object_set_new(o, "outcome", json_string(gw_outcome_str((enum gw_outcome)a->outcome)));
    rc |= json_object_set_new(o, "status", a->status ? json_integer(a->status) : json_null());
    rc |= json_object_set_new(o, "code", json_code_or_null(a->code));
    rc |= json_object_set_new(o, "queued_ms", json_integer(a->queued_ms));
    rc |= json_object_set_new(o, "ttfb_ms", json_ms_or_null(a->ttfb_ms));
    /* the credential's fingerprint (core/quota.h), null when the hop sent none */
    rc |= json_object_set_new(o, "credential",
                              a->cred[0] ? json_field(a->cred, sizeof(a->cred)) : json_null());
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The row's dropped fields (", "-separated) as a JSON array of names. */
static json_t *
dropped_json(const char *s, size_t cap)
{
    json_t *a = json_array();
    size_t len = strnlen(s, cap), i = 0;

    while (a && i < len) {
        size_t j = i;

        while (j < len && !(s[j] == ',' && j + 1 < len && s[j + 1] == ' '))
            j++;
        json_array_append_new(a, json_stringn(s + i, j - i));
        i = j + 2;
    }
    return a;
}

json_t *
net_control_row_json(const struct gw_row *r)
{
    char ts[GW_ISO_MS_LEN];
    json_t *o = json_object(), *usage = json_object(), *attempts = json_array();
    unsigned i, n = r->n_attempts < GW_ROW_MAX_ATTEMPTS ? r->n_attempts : GW_ROW_MAX_ATTEMPTS;
    double tps = isfinite(r->tokens_per_sec) ? r->tokens_per_sec : 0.0;
    int rc = 0;

    gw_fmt_iso_ms(r->ts_ms, ts);
    rc |=
        json_object_set_new(usage, "input_tokens", json_integer((json_int_t)r->usage.input_tokens));
    rc |= json_object_set_new(usage, "output_tokens",
                              json_integer((json_int_t)r->usage.output_tokens));
    rc |= json_object_set_new(usage, "cache_read_tokens",
                              json_integer((json_int_t)r->usage.cache_read_tokens));
    rc |= json_object_set_new(usage, "cache_write_tokens",
                              json_integer((json_int_t)r->usage.cache_write_tokens));
    rc |= json_object_set_new(usage, "reasoning_tokens",
                              json_integer((json_int_t)r->usage.reasoning_tokens));
    rc |= json_object_set_new(usage, "estimated", json_boolean(r->usage.estimated));
    for (i = 0; i < n; i++)
        rc |= json_array_append_new(attempts, attempt_json(&r->attempts[i]));

    rc |= json_object_set_new(o, "id", json_field(r->id, sizeof(r->id)));
    rc |= json_object_set_new(o, "ts", json_string(ts));
    rc |= json_object_set_new(o, "client", json_field(r->client, sizeof(r->client)));
    rc |= json_object_set_new(o, "model", json_field(r->model, sizeof(r->model)));
    rc |= json_object_set_new(o, "upstream", json_field(r->upstream, sizeof(r->upstream)));
    rc |= json_object_set_new(o, "status", json_integer(r->status));
    rc |= json_object_set_new(o, "code", json_code_or_null(r->code));
    rc |=
        json_object_set_new(o, "outcome", json_string(gw_outcome_str((enum gw_outcome)r->outcome)));
    rc |= json_object_set_new(o, "usage", usage);
    rc |= json_object_set_new(o, "cost_usd", json_real((double)r->cost_micros / 1e6));
    rc |= json_object_set_new(o, "ttfb_ms", json_ms_or_null(r->ttfb_ms));
    rc |= json_object_set_new(o, "duration_ms", json_integer(r->duration_ms));
    rc |= json_object_set_new(o, "tokens_per_sec", json_real(tps));
    rc |= json_object_set_new(o, "queued_ms", json_integer(r->queued_ms));
    rc |= json_object_set_new(o, "stream", json_boolean(r->stream != 0));
    rc |= json_object_set_new(o, "attempts", attempts);
    rc |= json_object_set_new(o, "dropped", dropped_json(r->dropped, sizeof(r->dropped)));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- overview ---- */

static json_t *
json_time_or_null(uint64_t ms)
{
    char ts[GW_ISO_MS_LEN];

    if (ms == 0)
        return json_null();
    gw_fmt_iso_ms(ms, ts);
    return json_string(ts);
}

static json_t *
json_rate_or_null(double rate)
{
    return rate < 0 ? json_null() : json_real(rate);
}

/* 0 means unlimited in the config; the API says null. */
static json_t *
json_limit_or_null(unsigned n)
{
    return n == 0 ? json_null() : json_integer(n);
}

/* A provider's facts; "nothing known" when it has no upstate (a config that was never
 * attached to a gw_routes registry). */
static void
facts_of(const struct gw_conf_provider *p, uint64_t now_ms, struct gw_upfacts *f)
{
    if (p->state) {
        gw_upstate_facts(p->state, now_ms, f);
        return;
    }
    memset(f, 0, sizeof(*f));
    f->ttfc_median_ms = -1;
    f->success_rate = -1.0;
    f->link_ms = -1;
}

static json_t *
string_list_json(char *const *v, size_t n)
{
    json_t *a = json_array();
    size_t i;
    int rc = 0;

    for (i = 0; i < n; i++)
        rc |= json_array_append_new(a, json_string(v[i]));
    if (rc) {
        json_decref(a);
        return NULL;
    }
    return a;
}

/* Requests holding and waiting for the slots of a limit (core/slots.h); 0 when the
 * limit object is not attached (unit tests) or there is no limit. */
static void
slots_of(struct gw_slots *sl, unsigned *in_flight, unsigned *waiting)
{
    *in_flight = *waiting = 0;
    if (sl)
        gw_slots_stats(sl, NULL, in_flight, waiting);
}

/* How the provider is reached: {proxy: "host:port" | null, proxy_from: "proxy" or the
 * variable's name | null, ca_file: path | null}. Never the proxy credential. */
static json_t *
egress_json(const struct gw_conf_provider *p)
{
    json_t *o = json_object();
    char hp[300];
    int rc = 0;

    if (p->proxy_host)
        snprintf(hp, sizeof(hp), "%s%s%s:%u", strchr(p->proxy_host, ':') ? "[" : "", p->proxy_host,
                 strchr(p->proxy_host, ':') ? "]" : "", (unsigned)p->proxy_port);
    rc |= json_object_set_new(o, "proxy", p->proxy_host ? json_string(hp) : json_null());
    rc |= json_object_set_new(o, "proxy_from",
                              p->proxy_from ? json_string(p->proxy_from) : json_null());
    rc |= json_object_set_new(o, "ca_file", p->ca_file ? json_string(p->ca_file) : json_null());
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *
provider_json(const struct gw_conf_provider *p, uint64_t now_ms)
{
    struct gw_upfacts f;
    json_t *o = json_object();
    const char *state;
    unsigned in_flight, waiting;
    int rc = 0;

    facts_of(p, now_ms, &f);
    state = !p->enabled ? "disabled" : f.paused_until_ms ? "paused" : "ok";
    rc |= json_object_set_new(o, "name", json_string(p->name));
    rc |= json_object_set_new(o, "dialect", json_string(gw_dialect_str(p->dialect)));
    rc |= json_object_set_new(o, "state", json_string(state));
    rc |= json_object_set_new(o, "paused_until", json_time_or_null(f.paused_until_ms));
    rc |= json_object_set_new(o, "consecutive_failures", json_integer(f.consecutive_failures));
    slots_of(p->slots, &in_flight, &waiting);
    rc |= json_object_set_new(o, "in_flight", json_integer(in_flight));
    rc |= json_object_set_new(o, "max_concurrent", json_limit_or_null(p->max_concurrent));
    rc |= json_object_set_new(o, "waiting", json_integer(waiting));
    rc |= json_object_set_new(o, "ttfc_ms", json_ms_or_null(f.ttfc_median_ms));
    rc |= json_object_set_new(o, "success_rate", json_rate_or_null(f.success_rate));
    rc |= json_object_set_new(o, "samples", json_integer(f.n_samples));
    rc |= json_object_set_new(o, "outcomes", json_integer(f.n_outcomes));
    rc |= json_object_set_new(o, "link_ms", json_ms_or_null(f.link_ms));
    rc |= json_object_set_new(o, "models", string_list_json(p->models, p->n_models));
    rc |= json_object_set_new(o, "egress", egress_json(p));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *
group_json(const struct gw_conf_group *g)
{
    json_t *o = json_object(), *names = json_array(), *weights = json_array(),
           *models = json_array();
    bool lb = g->type == GW_GROUP_LOAD_BALANCE;
    size_t i;
    int rc = 0;

    for (i = 0; i < g->n_members; i++) {
        const struct gw_conf_member *m = &g->members[i];

        rc |= json_array_append_new(names, json_string(m->provider));
        /* Outside load-balance every member counts once (as gw_route_order has it). */
        rc |= json_array_append_new(weights, json_integer(lb && m->weight ? m->weight : 1));
        rc |= json_array_append_new(models, m->model ? json_string(m->model) : json_null());
    }
    rc |= json_object_set_new(o, "name", json_string(g->name));
    rc |= json_object_set_new(o, "type", json_string(gw_group_type_str(g->type)));
    rc |= json_object_set_new(o, "model", g->model ? json_string(g->model) : json_null());
    rc |= json_object_set_new(o, "providers", names);
    rc |= json_object_set_new(o, "weights", weights);
    rc |= json_object_set_new(o, "models", models);
    rc |= json_object_set_new(o, "balance_by",
                              lb ? json_string(gw_balance_by_str(g->balance_by)) : json_null());
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Each limit of a key with its usage (DESIGN.md 18): {per, measure, max, used,
 * resets_at, reached}; cost in USD. */
static json_t *
key_limits_json(const struct gw_conf_client *cl, uint64_t now_ms)
{
    struct gw_limit_view v[16];
    struct gw_period cal;
    json_t *arr = json_array();
    size_t n, i;

    if (!cl->usage || !cl->n_limits)
        return arr;
    net_calendar(now_ms, &cal);
    n = gw_keylimits_view(cl->usage, now_ms, &cal, v, sizeof(v) / sizeof(v[0]));
    for (i = 0; i < n; i++) {
        bool cost = v[i].measure == GW_LIMIT_COST;
        json_t *o = json_pack(
            "{s:s,s:s,s:o,s:o,s:o,s:b}", "per", gw_limit_per_str(v[i].per), "measure",
            gw_limit_measure_str(v[i].measure), "max",
            cost ? json_real((double)v[i].max / 1e6) : json_integer((json_int_t)v[i].max), "used",
            cost ? json_real((double)v[i].used / 1e6) : json_integer((json_int_t)v[i].used),
            "resets_at", json_time_or_null(v[i].resets_at_ms), "reached", v[i].reached);

        if (o)
            json_array_append_new(arr, o);
    }
    return arr;
}

/* Models the key used that had no price: invisible to its cost limit (DESIGN.md 8). */
static json_t *
unpriced_json(const struct gw_conf_client *cl)
{
    char models[GW_KEYLIMITS_MAX_UNPRICED][GW_MODEL_MAX + 1];
    json_t *arr = json_array();
    size_t n, i;

    if (!cl->usage)
        return arr;
    n = gw_keylimits_unpriced(cl->usage, models, GW_KEYLIMITS_MAX_UNPRICED);
    for (i = 0; i < n; i++)
        json_array_append_new(arr, json_string(models[i]));
    return arr;
}

static json_t *
key_json(const struct gw_conf_client *cl, uint64_t now_ms)
{
    json_t *o = json_object();
    unsigned in_flight, waiting;
    int rc = 0;

    slots_of(cl->slots, &in_flight, &waiting);
    rc |= json_object_set_new(o, "name", json_string(cl->name));
    rc |= json_object_set_new(o, "max_concurrent", json_limit_or_null(cl->max_concurrent));
    rc |= json_object_set_new(o, "in_flight", json_integer(in_flight));
    rc |= json_object_set_new(o, "waiting", json_integer(waiting));
    rc |= json_object_set_new(
        o, "models", cl->n_models ? string_list_json(cl->models, cl->n_models) : json_null());
    rc |= json_object_set_new(o, "limits", key_limits_json(cl, now_ms));
    rc |= json_object_set_new(o, "unpriced_models", unpriced_json(cl));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *
net_control_overview_json(const struct gw_conf *c, uint64_t now_ms)
{
    json_t *o = json_object(), *provs = json_array(), *groups = json_array(), *keys = json_array(),
           *fo;
    size_t i;
    int rc = 0;

    for (i = 0; i < c->n_providers; i++)
        rc |= json_array_append_new(provs, provider_json(&c->providers[i], now_ms));
    for (i = 0; i < c->n_groups; i++)
        rc |= json_array_append_new(groups, group_json(&c->groups[i]));
    for (i = 0; i < c->n_clients; i++)
        rc |= json_array_append_new(keys, key_json(&c->clients[i], now_ms));
    fo = json_pack("{s:I,s:I,s:I,s:I,s:b,s:I}", "failures_to_pause",
                   (json_int_t)c->failover.failures_to_pause, "pause_secs",
                   (json_int_t)c->failover.pause_secs, "max_pause_secs",
                   (json_int_t)c->failover.max_pause_secs, "stream_start_wait_secs",
                   (json_int_t)c->failover.stream_start_wait_secs, "next_on_slow_start",
                   (int)c->failover.next_on_slow_start, "slot_wait_secs",
                   (json_int_t)c->failover.slot_wait_secs);
    rc |= json_object_set_new(o, "providers", provs);
    rc |= json_object_set_new(o, "groups", groups);
    rc |= json_object_set_new(o, "keys", keys);
    rc |= json_object_set_new(o, "failover", fo);
    rc |= json_object_set_new(o, "quota", net_quota_view(c, now_ms)); /* net/quota.h */
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* ---- dry-run ---- */

static const char *
cand_state_str(enum gw_cand_state st)
{
    switch (st) {
    case GW_CAND_OK: return "ok";
    case GW_CAND_PAUSED: return "paused";
    case GW_CAND_FULL: return "full";
    case GW_CAND_DISABLED: return "disabled";
    }
    return "unknown";
}

static json_t *
cand_json(const struct gw_route_cand *k)
{
    json_t *o = json_object();
    int rc = 0;

    rc |= json_object_set_new(o, "provider", json_string(k->prov->name));
    rc |= json_object_set_new(o, "model", json_stringn(k->model, k->model_len));
    rc |= json_object_set_new(o, "weight", json_integer(k->weight));
    rc |= json_object_set_new(o, "factor", json_real(k->factor));
    rc |= json_object_set_new(o, "effective_weight", json_integer(k->eff_weight));
    rc |= json_object_set_new(o, "price", k->price < 0 ? json_null() : json_real(k->price));
    rc |= json_object_set_new(o, "ttfc_ms", json_ms_or_null(k->facts.ttfc_median_ms));
    rc |= json_object_set_new(o, "success_rate", json_rate_or_null(k->facts.success_rate));
    rc |= json_object_set_new(o, "link_ms", json_ms_or_null(k->facts.link_ms));
    rc |= json_object_set_new(o, "state", json_string(cand_state_str(k->state)));
    rc |= json_object_set_new(o, "paused_until", json_time_or_null(k->facts.paused_until_ms));
    rc |= json_object_set_new(o, "sticky", json_boolean(k->sticky));
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The raw bytes of the top-level "body" value of the JSON object <s>/<n> (the last one,
 * as jansson keeps the last of duplicate keys), so the Chat Completions parser sees
 * exactly what the client would send to the data plane, not a re-serialisation. */
static bool
body_span(const char *s, size_t n, size_t *start, size_t *end)
{
    struct dl_json j;
    struct dl_json_str key;
    bool first = true, found = false;
    int r;

    dl_json_init(&j, s, n);
    if (dl_json_peek(&j) != '{' || !dl_json_obj_enter(&j))
        return false;
    while ((r = dl_json_obj_next(&j, &first, &key)) == 1) {
        size_t at = j.i;

        if (!dl_json_skip(&j, NULL))
            return false;
        if (dl_json_key_is(&j, &key, "body", 4)) {
            *start = at;
            *end = j.i;
            found = true;
        }
    }
    return r == 0 && found;
}

/* Checks the request object's fields: "model" a non-empty string (may be left out when a
 * body gives it), "client" a string, "body" an object; null counts as absent. */
static bool
dry_run_fields(json_t *j, char *why, size_t whylen)
{
    const char *k;
    json_t *v;

    json_object_foreach(j, k, v)
    {
        if (strcmp(k, "model") == 0) {
            if (!json_is_null(v) && (!json_is_string(v) || json_string_length(v) == 0)) {
                snprintf(why, whylen, "model: expected a non-empty string");
                return false;
            }
        } else if (strcmp(k, "client") == 0) {
            if (!json_is_null(v) && !json_is_string(v)) {
                snprintf(why, whylen, "client: expected a client name (a string)");
                return false;
            }
        } else if (strcmp(k, "body") == 0) {
            if (!json_is_null(v) && !json_is_object(v)) {
                snprintf(why, whylen, "body: expected a Chat Completions request object");
                return false;
            }
        } else {
            snprintf(why, whylen, "unknown field \"%.64s\" (expected model, client, body)", k);
            return false;
        }
    }
    if (!json_is_string(json_object_get(j, "model")) &&
        !json_is_object(json_object_get(j, "body"))) {
        snprintf(why, whylen, "model: required (or a body that names it)");
        return false;
    }
    return true;
}

static json_t *
dry_run_answer(const struct gw_conf_client *cl, struct gw_str model, const char *sticky,
               const struct gw_route_cand *out, const struct gw_route_result *res)
{
    json_t *o = json_object(), *cands = json_array();
    size_t i;
    int rc = 0;

    for (i = 0; i < res->n; i++) {
        json_t *cj = cand_json(&out[i]);
        /* the credential the next request would use, and why the others are skipped */
        json_t *q =
            cj ? net_quota_peek_json(out[i].prov, out[i].model, out[i].model_len, 0, net_now_ms())
               : NULL;

        if (q)
            json_object_set_new(cj, "quota", q);
        rc |= json_array_append_new(cands, cj);
    }
    rc |= json_object_set_new(o, "model", json_stringn(model.ptr, model.len));
    rc |= json_object_set_new(o, "client", cl ? json_string(cl->name) : json_null());
    rc |= json_object_set_new(o, "group", res->group ? json_string(res->group->name) : json_null());
    rc |= json_object_set_new(
        o, "type",
        json_string(gw_group_type_str(res->group ? res->group->type : GW_GROUP_FALLBACK)));
    rc |= json_object_set_new(o, "sticky", sticky ? json_string(sticky) : json_null());
    rc |= json_object_set_new(
        o, "pick", res->pick >= 0 ? json_string(out[res->pick].prov->name) : json_null());
    rc |= json_object_set_new(o, "candidates", cands);
    if (rc) {
        json_decref(o);
        return NULL;
    }
    return o;
}

enum gw_code
net_control_dry_run(const struct gw_conf *conf, struct gw_sticky *sticky, const char *req,
                    size_t len, uint64_t now_ms, json_t **out, char *why, size_t whylen)
{
    struct gw_route_cand cands[GW_ROUTE_MAX];
    struct gw_route_result res;
    struct gw_route_req rq;
    const struct gw_conf_client *cl = NULL;
    struct dl_openai_req *body = NULL;
    char stuck[GW_NAME_MAX + 1];
    bool have_stuck = false;
    struct gw_str model;
    json_error_t jerr;
    json_t *j, *v;
    enum gw_code rc;

    *out = NULL;
    j = json_loadb(req, len, 0, &jerr);
    if (!j || !json_is_object(j)) {
        snprintf(why, whylen, "expected a JSON object {\"model\", \"client\", \"body\"}%s%s",
                 j ? "" : ": ", j ? "" : jerr.text);
        json_decref(j);
        return GW_E_BAD_REQUEST;
    }
    if (!dry_run_fields(j, why, whylen)) {
        rc = GW_E_BAD_REQUEST;
        goto out;
    }
    v = json_object_get(j, "client");
    if (json_is_string(v)) {
        cl = gw_conf_client_find(conf, json_string_value(v), strlen(json_string_value(v)));
        if (!cl) {
            snprintf(why, whylen, "no client named \"%.64s\" in the config", json_string_value(v));
            rc = GW_E_CONTROL_UNKNOWN_CLIENT;
            goto out;
        }
    }
    if (json_is_object(json_object_get(j, "body"))) {
        struct gw_buf bwhy = {0};
        size_t b0 = 0, b1 = 0;

        if (!body_span(req, len, &b0, &b1)) {
            snprintf(why, whylen, "body: cannot locate the request object");
            rc = GW_E_BAD_REQUEST;
            goto out;
        }
        rc = dl_openai_req_parse(req + b0, b1 - b0, &body, &bwhy);
        if (rc != GW_OK) {
            snprintf(why, whylen, "body: %.*s", (int)(bwhy.len < 200 ? bwhy.len : 200),
                     bwhy.data ? bwhy.data : "not a Chat Completions request");
            gw_buf_fini(&bwhy);
            goto out;
        }
        gw_buf_fini(&bwhy);
    }
    v = json_object_get(j, "model");
    if (json_is_string(v)) {
        model.ptr = json_string_value(v);
        model.len = json_string_length(v);
    } else {
        model = dl_openai_req_model(body);
    }
    if (cl && !gw_conf_client_allows(cl, model.ptr, model.len)) {
        snprintf(why, whylen, "client \"%s\" may not use model \"%.*s\" (outside its scope)",
                 cl->name, (int)(model.len < 128 ? model.len : 128), model.ptr);
        rc = GW_E_MODEL_NOT_ALLOWED;
        goto out;
    }
    /* The data plane's stickiness: the same key and the same lookup; the dry-run has no
     * request headers, so no session header takes part. */
    if (cl && body && sticky) {
        uint64_t key = net_conversation_key(cl->name, (struct gw_str){NULL, 0}, body);

        have_stuck =
            gw_sticky_lookup(sticky, key, now_ms, dl_openai_req_has_tool_results(body), stuck);
    }
    memset(&rq, 0, sizeof(rq));
    rq.model = model.ptr;
    rq.model_len = model.len;
    rq.now_ms = now_ms;
    rq.sticky = have_stuck ? stuck : NULL;
    rc = gw_route_order(conf, &rq, false, cands, &res);
    if (rc == GW_E_MODEL_NOT_FOUND) {
        snprintf(why, whylen, "no group or enabled provider offers model \"%.*s\"",
                 (int)(model.len < 128 ? model.len : 128), model.ptr);
        goto out;
    }
    if (rc != GW_OK) {
        snprintf(why, whylen, "cannot order the candidates");
        goto out;
    }
    *out = dry_run_answer(cl, model, have_stuck ? stuck : NULL, cands, &res);
    if (!*out) {
        snprintf(why, whylen, "out of memory");
        rc = GW_E_NOMEM;
    }
out:
    dl_openai_req_free(body);
    json_decref(j);
    return rc;
}

/* ---- replies ---- */

static const char *
reason_of(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 409: return "Conflict";
    case 503: return "Service Unavailable";
    default: return "Internal Server Error";
    }
}

static void
send_body(struct evhttp_request *req, int status, const char *ctype, const char *body, size_t len)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    struct evbuffer *b = evbuffer_new();

    evhttp_add_header(h, "Content-Type", ctype);
    evhttp_add_header(h, "Cache-Control", "no-store");
    if (!b) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    if (evbuffer_add(b, body, len) != 0) {
        evbuffer_free(b);
        evhttp_send_error(req, 500, NULL);
        return;
    }
    evhttp_send_reply(req, status, reason_of(status), b);
    evbuffer_free(b);
}

/* Sends <j> (consumed) as the JSON body. */
static void
send_json(struct evhttp_request *req, int status, json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(15)) : NULL;
    static const char nomem[] =
        "{\"error\":{\"code\":\"gw.internal.nomem\",\"message\":\"out of memory\"}}";

    json_decref(j);
    if (!s) {
        send_body(req, 500, "application/json", nomem, sizeof(nomem) - 1);
        return;
    }
    send_body(req, status, "application/json", s, strlen(s));
    free(s); /* jansson's allocator */
}

/* {"error":{"code":"...","message":"..."}} with <status> (the code's own when 0). */
static void
send_error(struct evhttp_request *req, enum gw_code code, int status, const char *msg)
{
    json_t *j;

    if (status == 0)
        status = gw_code_http_status(code);
    j = json_pack("{s:{s:s,s:s}}", "error", "code", gw_code_str(code), "message", msg);
    send_json(req, status, j);
}

/* ---- handlers ---- */

/* Liveness: 200 once the data port accepts connections (draining included). */
static void
on_healthz(struct net_control *c, struct evhttp_request *req)
{
    /* Relaxed: a flag, no other memory is published with it. */
    if (ck_pr_load_int(&c->phase) == NET_CONTROL_STARTING) {
        send_error(req, GW_E_STARTING, 0, "the data port does not accept connections yet");
        return;
    }
    send_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

/* Readiness: 200 while the data port accepts and the process is not draining. */
static void
on_readyz(struct net_control *c, struct evhttp_request *req)
{
    switch (ck_pr_load_int(&c->phase)) {
    case NET_CONTROL_STARTING:
        send_error(req, GW_E_STARTING, 0, "the data port does not accept connections yet");
        return;
    case NET_CONTROL_DRAINING:
        send_error(req, GW_E_SHUTTING_DOWN, 0, "the gateway is draining");
        return;
    default: break;
    }
    send_json(req, 200, json_pack("{s:s}", "status", "ready"));
}

static void
on_metrics(struct net_control *c, struct evhttp_request *req)
{
    struct gw_buf b = {0};
    bool fail = false;
    unsigned i;

    fail |= gw_buf_printf(&b,
                          "# HELP gw_events_subscribers Clients following /control/v1/events.\n"
                          "# TYPE gw_events_subscribers gauge\ngw_events_subscribers %zu\n"
                          "# HELP gw_events_dropped_total Events dropped (ring full).\n"
                          "# TYPE gw_events_dropped_total counter\ngw_events_dropped_total %llu\n",
                          c->n_subs, (unsigned long long)gw_events_dropped()) != GW_OK;
    fail |= gw_buf_printf(&b,
                          "# HELP gw_client_connections Client connections open on the data "
                          "port.\n# TYPE gw_client_connections gauge\ngw_client_connections %u\n"
                          "# HELP gw_request_body_bytes Request body bytes being read or held "
                          "(server.max_buffered_body_mb).\n"
                          "# TYPE gw_request_body_bytes gauge\ngw_request_body_bytes %llu\n",
                          net_conns_open(),
                          (unsigned long long)gw_budget_used(&net_body_budget)) != GW_OK;
    fail |= gw_buf_printf(&b, "# HELP gw_code_total Occurrences of each gateway message code.\n"
                              "# TYPE gw_code_total counter\n") != GW_OK;
    for (i = 1; i < GW_CODE__COUNT; i++) {
        uint64_t n = gw_code_counter((enum gw_code)i);

        if (n)
            fail |= gw_buf_printf(&b, "gw_code_total{code=\"%s\"} %llu\n",
                                  gw_code_str((enum gw_code)i), (unsigned long long)n) != GW_OK;
    }
    if (c->deps.store) {
        struct store_stats st;

        store_stats_get(c->deps.store, &st);
        fail |= gw_buf_printf(&b,
                              "# HELP gw_store_rows_committed_total Request rows committed.\n"
                              "# TYPE gw_store_rows_committed_total counter\n"
                              "gw_store_rows_committed_total %llu\n"
                              "# HELP gw_store_rows_dropped_total Request rows dropped "
                              "(store queue full).\n"
                              "# TYPE gw_store_rows_dropped_total counter\n"
                              "gw_store_rows_dropped_total %llu\n"
                              "# HELP gw_store_batches_total Store write transactions "
                              "committed.\n"
                              "# TYPE gw_store_batches_total counter\n"
                              "gw_store_batches_total %llu\n"
                              "# HELP gw_store_rows_pruned_total Request rows removed by "
                              "retention.\n"
                              "# TYPE gw_store_rows_pruned_total counter\n"
                              "gw_store_rows_pruned_total %llu\n",
                              (unsigned long long)st.rows_committed,
                              (unsigned long long)st.rows_dropped, (unsigned long long)st.batches,
                              (unsigned long long)st.rows_pruned) != GW_OK;
    }
    fail |= net_metrics_render(&b, &c->thr, c->deps.store) != GW_OK;
    if (fail)
        send_error(req, GW_E_NOMEM, 0, "out of memory");
    else
        send_body(req, 200, "text/plain; version=0.0.4; charset=utf-8", b.data ? b.data : "",
                  b.len);
    gw_buf_fini(&b);
}

static void
on_version(struct evhttp_request *req)
{
    send_json(req, 200,
              json_pack("{s:i,s:s}", "control_api_version", NET_CONTROL_API_VERSION, "gw_version",
                        NET_CONTROL_GW_VERSION));
}

/* Parses a decimal unsigned integer of 1..20 digits; false on anything else. */
static bool
parse_u64(const char *s, uint64_t *out)
{
    size_t n = strlen(s), i;
    unsigned long long v;
    char *end;

    if (n == 0 || n > 20)
        return false;
    for (i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* A page cursor, "TS-SEQ" (store_cursor: the last row's request time in ms and its
 * sequence, in decimal); false on anything else. */
static bool
parse_cursor(const char *s, struct store_cursor *out)
{
    const char *dash = strchr(s, '-');
    char ts[24];

    if (!dash || (size_t)(dash - s) >= sizeof(ts))
        return false;
    memcpy(ts, s, (size_t)(dash - s));
    ts[dash - s] = '\0';
    return parse_u64(ts, &out->ts_ms) && parse_u64(dash + 1, &out->seq);
}

static void
on_traffic(struct net_control *c, struct evhttp_request *req)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq q = {0}; /* an empty queue; parse_query_str fills it */
    const char *v;
    uint64_t limit = CONTROL_LIMIT_DEFAULT;
    struct store_cursor cursor = {0}, next = {0};
    struct gw_row *rows = NULL;
    size_t n = 0, i;
    enum gw_code rc;
    json_t *page, *arr;
    int jrc = 0;

    if (query && evhttp_parse_query_str(query, &q) != 0) {
        send_error(req, GW_E_BAD_REQUEST, 400, "malformed query string");
        goto out;
    }
    v = evhttp_find_header(&q, "limit");
    if (v && (!parse_u64(v, &limit) || limit == 0)) {
        send_error(req, GW_E_BAD_REQUEST, 400, "limit: expected an integer from 1 to 500");
        goto out;
    }
    if (limit > CONTROL_LIMIT_MAX)
        limit = CONTROL_LIMIT_MAX;
    v = evhttp_find_header(&q, "cursor");
    if (v && *v && !parse_cursor(v, &cursor)) {
        send_error(req, GW_E_BAD_REQUEST, 400,
                   "cursor: expected the \"next\" value of a previous page");
        goto out;
    }
    if (!c->deps.store) {
        send_error(req, GW_E_STORE_IO, 503, "the store is not open");
        goto out;
    }
    rows = gw_malloc((size_t)limit * sizeof(*rows));
    if (!rows) {
        send_error(req, GW_E_NOMEM, 0, "out of memory");
        goto out;
    }
    rc = store_rows_page(c->deps.store, &cursor, rows, (size_t)limit, &n, &next);
    if (rc != GW_OK) {
        send_error(req, rc, 0, "cannot read the request rows");
        goto out;
    }
    page = json_object();
    arr = json_array();
    for (i = 0; i < n; i++)
        jrc |= json_array_append_new(arr, net_control_row_json(&rows[i]));
    jrc |= json_object_set_new(page, "rows", arr);
    if (!store_cursor_is_start(&next)) {
        char buf[48];

        snprintf(buf, sizeof(buf), "%llu-%llu", (unsigned long long)next.ts_ms,
                 (unsigned long long)next.seq);
        jrc |= json_object_set_new(page, "next", json_string(buf));
    } else {
        jrc |= json_object_set_new(page, "next", json_null());
    }
    if (jrc) {
        json_decref(page);
        send_error(req, GW_E_NOMEM, 0, "out of memory");
        goto out;
    }
    send_json(req, 200, page);
out:
    gw_free(rows);
    evhttp_clear_headers(&q);
}

static void
on_overview(struct evhttp_request *req, const struct gw_conf *conf)
{
    json_t *j = net_control_overview_json(conf, net_now_ms());

    if (!j)
        send_error(req, GW_E_NOMEM, 0, "out of memory");
    else
        send_json(req, 200, j);
}

static void
on_dry_run(struct net_control *c, struct evhttp_request *req, const struct gw_conf *conf)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    /* pullup makes the body contiguous; an empty body has no bytes to point at */
    const char *bytes = len ? (const char *)evbuffer_pullup(in, -1) : "";
    json_t *ans = NULL;
    enum gw_code rc;
    char why[512];

    if (!bytes) {
        send_error(req, GW_E_NOMEM, 0, "out of memory");
        return;
    }
    rc =
        net_control_dry_run(conf, c->deps.sticky, bytes, len, net_now_ms(), &ans, why, sizeof(why));
    if (rc != GW_OK)
        send_error(req, rc, 0, why);
    else
        send_json(req, 200, ans);
}

static void
sha256(const void *p, size_t n, unsigned char out[32])
{
    unsigned int len = 32;

    if (!EVP_Digest(p, n, out, &len, EVP_sha256(), NULL))
        memset(out, 0, 32);
}

/* True when the request carries "Authorization: Bearer <token>". The digests are
 * compared, not the strings, so neither the token's length nor its bytes leak through
 * timing. Otherwise sets <*why> to the message for the 401. */
static bool
authorized(struct evhttp_request *req, const struct gw_conf *conf, const char **why)
{
    const char *h = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    unsigned char want[32], got[32];
    const char *tok;

    if (!conf || !conf->control.token || !*conf->control.token) {
        *why = "the control API is disabled: the variable named by control.token_env is unset";
        return false;
    }
    if (!h) {
        *why = "missing Authorization: Bearer <token>";
        return false;
    }
    if (strncasecmp(h, "Bearer ", 7) != 0) {
        *why = "the Authorization header must be: Bearer <token>";
        return false;
    }
    tok = h + 7;
    while (*tok == ' ')
        tok++;
    sha256(tok, strlen(tok), got);
    sha256(conf->control.token, strlen(conf->control.token), want);
    if (!gw_ct_equal(got, want, sizeof(want))) {
        *why = "invalid control token";
        return false;
    }
    return true;
}

/* ---- saves: PUT provider-model-spec, PUT/DELETE groups|keys|providers/{name} ----
 * The file work (net/save.c) runs on a helper thread, one per save (at most
 * CONTROL_MAX_SAVES at once), which fires the save's event on this loop when it is done;
 * the answer then waits for the reload it asks of main (net/reload.h), so the loop never
 * blocks on the disk. */

/* The body: {"provider", "model", "context_window"?, "max_output_tokens"?}; a field
 * left out keeps what the file says, null removes it. */
static enum gw_code
spec_request(json_t *j, const char **prov, const char **model, struct gw_yaml_spec_edit *e,
             char *why, size_t whylen)
{
    static const char *const names[2] = {"context_window", "max_output_tokens"};
    enum gw_yaml_op *ops[2] = {&e->context_window_op, &e->max_output_tokens_op};
    uint64_t *vals[2] = {&e->context_window, &e->max_output_tokens};
    const char *k;
    json_t *v;
    int i;

    memset(e, 0, sizeof(*e));
    if (!json_is_object(j)) {
        snprintf(why, whylen,
                 "expected a JSON object {\"provider\", \"model\", "
                 "\"context_window\", \"max_output_tokens\"}");
        return GW_E_BAD_REQUEST;
    }
    json_object_foreach(j, k, v)
    {
        if (strcmp(k, "provider") != 0 && strcmp(k, "model") != 0 && strcmp(k, names[0]) != 0 &&
            strcmp(k, names[1]) != 0) {
            snprintf(why, whylen,
                     "unknown field \"%.64s\" (expected provider, model, context_window, "
                     "max_output_tokens)",
                     k);
            return GW_E_BAD_REQUEST;
        }
    }
    *prov = json_string_value(json_object_get(j, "provider"));
    *model = json_string_value(json_object_get(j, "model"));
    if (!*prov || !**prov) {
        snprintf(why, whylen, "provider: expected a provider name (a string)");
        return GW_E_BAD_REQUEST;
    }
    if (!*model) {
        snprintf(why, whylen, "model: expected a model id (a string)");
        return GW_E_BAD_REQUEST;
    }
    for (i = 0; i < 2; i++) {
        v = json_object_get(j, names[i]);
        if (!v)
            continue;
        if (json_is_null(v)) {
            *ops[i] = GW_YAML_REMOVE;
            continue;
        }
        if (!json_is_integer(v)) {
            snprintf(why, whylen, "%s: expected a whole number of tokens, or null to remove it",
                     names[i]);
            return GW_E_CFG_WRONG_TYPE;
        }
        if (json_integer_value(v) < 0) {
            snprintf(why, whylen, "%s: %lld (must be 1..100000000 tokens)", names[i],
                     (long long)json_integer_value(v));
            return GW_E_CFG_RANGE;
        }
        *ops[i] = GW_YAML_SET;
        *vals[i] = (uint64_t)json_integer_value(v);
    }
    if (e->context_window_op == GW_YAML_KEEP && e->max_output_tokens_op == GW_YAML_KEEP) {
        snprintf(why, whylen,
                 "give context_window and/or max_output_tokens (null removes one; "
                 "both null remove the entry)");
        return GW_E_BAD_REQUEST;
    }
    return GW_OK;
}

/* The answer: the entry as the file now holds it. */
static json_t *
spec_answer(const char *prov, const char *model, bool present, uint64_t cw, uint64_t mo, bool saved,
            bool reloaded)
{
    return json_pack("{s:s,s:s,s:o,s:o,s:b,s:b,s:b}", "provider", prov, "model", model,
                     "context_window", cw ? json_integer((json_int_t)cw) : json_null(),
                     "max_output_tokens", mo ? json_integer((json_int_t)mo) : json_null(),
                     "present", present, "saved", saved, "reloaded", reloaded);
}

/* Sends a refused config: <code> (GW_OK: the first problem's) with <status>, every
 * problem (up to 20) in the message and in "problems". */
static void
send_problems(struct evhttp_request *req, const struct gw_conf_problems *probs, enum gw_code code,
              int status, const char *lead)
{
    struct gw_buf msg = {0};
    json_t *arr = json_array(), *j;
    char line[1024];
    size_t i;

    gw_buf_append_cstr(&msg, lead);
    for (i = 0; i < probs->n && i < 20; i++) {
        gw_conf_problem_format(&probs->v[i], line, sizeof(line));
        gw_buf_printf(&msg, "%s%s", i ? "; " : ": ", line);
        json_array_append_new(arr,
                              json_pack("{s:s,s:s,s:s,s:s}", "code", gw_code_str(probs->v[i].code),
                                        "path", probs->v[i].path ? probs->v[i].path : "", "value",
                                        probs->v[i].value ? probs->v[i].value : "", "message",
                                        probs->v[i].msg ? probs->v[i].msg : ""));
    }
    if (code == GW_OK)
        code = probs->n ? probs->v[0].code : GW_E_CFG_SYNTAX;
    j = json_pack("{s:{s:s,s:s,s:o}}", "error", "code", gw_code_str(code), "message",
                  msg.data ? msg.data : lead, "problems", arr);
    gw_buf_fini(&msg);
    send_json(req, status, j);
}

static void
save_free(struct save *sv)
{
    struct net_control *c = sv->c;
    size_t i;

    for (i = 0; i < c->n_saves; i++) {
        if (c->saves[i] == sv) {
            c->saves[i] = c->saves[--c->n_saves];
            break;
        }
    }
    if (sv->running) /* only at shutdown: the thread ends after its disk work */
        pthread_join(sv->thread, NULL);
    if (sv->ev)
        event_free(sv->ev);
    net_save_free(sv->job);
    gw_free(sv);
}

static void
on_save_client_gone(struct evhttp_connection *evcon, void *arg)
{
    struct net_control *c = arg;
    size_t i;

    for (i = 0; i < c->n_saves; i++) {
        struct save *sv = c->saves[i];

        if (sv->req && evhttp_request_get_connection(sv->req) == evcon) {
            sv->req = NULL; /* evhttp frees the request after this */
            if (!sv->running && !sv->reloading)
                save_free(sv);
            return;
        }
    }
}

static const char *const save_kind_names[] = {
    [NET_SAVE_SPEC] = "provider-model-spec",
    [NET_SAVE_PROVIDER] = "provider",
    [NET_SAVE_GROUP] = "group",
    [NET_SAVE_CLIENT] = "key",
};

/* Answers <sv> (saved: the file was replaced; reloaded: the reload that read the saved
 * file took it, <res> what it changed; NULL when no reload ran) and frees it. */
static void
save_answer(struct save *sv, const struct net_reload_result *res)
{
    bool reloaded = res && res->reloaded;
    const struct net_save *j = sv->job;
    json_t *a;

    if (sv->req) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(sv->req), NULL, NULL);
        if (j->kind == NET_SAVE_SPEC)
            a = spec_answer(j->name, j->model, j->spec_present, j->spec_cw, j->spec_mo, j->changed,
                            reloaded);
        else
            a = json_pack("{s:s,s:s,s:b,s:b,s:b,s:b,s:o}", "kind", save_kind_names[j->kind], "name",
                          j->entry ? j->new_name : j->name, "saved", j->changed, "reloaded",
                          reloaded, "created", j->created, "removed", !j->entry, "renamed_from",
                          j->entry && strcmp(j->name, j->new_name) != 0 ? json_string(j->name)
                                                                        : json_null());
        if (a && res)
            json_object_set_new(a, "reload", net_reload_result_json(res));
        send_json(sv->req, 200, a);
        sv->req = NULL;
    }
    save_free(sv);
}

/* The reload asked after the file was replaced has run (it read the saved file). */
static void
on_save_reloaded(void *arg, const struct net_reload_result *res)
{
    struct save *sv = arg;

    sv->reloading = false;
    save_answer(sv, res);
}

/* The helper thread has done the file work: answer a refusal, or reload and wait. */
static void
on_save_done(evutil_socket_t fd, short what, void *arg)
{
    struct save *sv = arg;
    struct net_save *j = sv->job;

    (void)fd;
    (void)what;
    pthread_join(sv->thread, NULL); /* it has fired this event: it is returning */
    sv->running = false;
    if (!sv->req) {
        save_free(sv);
        return;
    }
    if (j->code != GW_OK) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(sv->req), NULL, NULL);
        if (j->probs.n)
            send_problems(sv->req, &j->probs,
                          j->code == GW_E_CONTROL_CONFIG_INVALID ? j->code : GW_OK,
                          j->status ? j->status : 400, j->lead ? j->lead : "the config is refused");
        else
            send_error(sv->req, j->code, j->status, j->why[0] ? j->why : gw_code_str(j->code));
        sv->req = NULL;
        save_free(sv);
        return;
    }
    if (!j->changed) {
        save_answer(sv, NULL);
        return;
    }
    GW_LOG(GW_LOG_INFO, NULL, "config_saved", "%s %s %s in %s", save_kind_names[j->kind],
           j->kind == NET_SAVE_SPEC ? j->name
           : j->entry               ? j->new_name
                                    : j->name,
           j->entry || j->kind == NET_SAVE_SPEC ? "saved" : "removed", j->conf_path);
    /* main reloads on its own loop, after every reload asked before this one: the file
     * it reads holds this save; the answer carries what the reload changed */
    sv->reloading = true; /* the reload's answer comes back to sv */
    if (net_control_reload(sv->c, "save", on_save_reloaded, sv) != GW_OK) {
        sv->reloading = false;
        save_answer(sv, NULL);
    }
}

static void *
save_thread(void *arg)
{
    struct save *sv = arg;

    pthread_setname_np(pthread_self(), "gw-save");
    net_save_run(sv->job);
    /* the control base is thread-aware (evthread_use_pthreads): this wakes its loop */
    event_active(sv->ev, EV_READ, 1);
    return NULL;
}

/* Runs <*jobp> (taken: NULL on return) on a helper thread and answers <req> when done. */
static void
save_start(struct net_control *c, struct evhttp_request *req, struct net_save **jobp)
{
    struct net_save *job = *jobp;
    struct save *sv;

    *jobp = NULL;
    if (c->n_saves == CONTROL_MAX_SAVES) {
        net_save_free(job);
        send_error(req, GW_E_BUSY, 503, "too many saves at once; try again");
        return;
    }
    sv = gw_calloc(1, sizeof(*sv));
    if (!sv) {
        net_save_free(job);
        send_error(req, GW_E_NOMEM, 500, "out of memory");
        return;
    }
    sv->c = c;
    sv->req = req;
    sv->job = job;
    sv->ev = event_new(c->base, -1, 0, on_save_done, sv);
    c->saves[c->n_saves++] = sv;
    if (!sv->ev || pthread_create(&sv->thread, NULL, save_thread, sv) != 0) {
        sv->req = NULL;
        save_free(sv);
        send_error(req, GW_E_BUSY, 503, "cannot start the save; try again");
        return;
    }
    sv->running = true;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_save_client_gone, c);
}

/* The request body as a JSON value (NULL: answered with 400). */
static json_t *
body_json(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t blen = evbuffer_get_length(in);
    const char *bytes = blen ? (const char *)evbuffer_pullup(in, -1) : "";
    char why[300];
    json_error_t jerr;
    json_t *j = bytes ? json_loadb(bytes, blen, 0, &jerr) : NULL;

    if (!j) {
        snprintf(why, sizeof(why), "the body is not JSON: %s", bytes ? jerr.text : "no memory");
        send_error(req, GW_E_BAD_REQUEST, 400, why);
    }
    return j;
}

static bool
saves_on(struct net_control *c, struct evhttp_request *req)
{
    if (c->deps.conf_path)
        return true;
    send_error(req, GW_E_CONTROL_CONFIG_IO, 503,
               "the gateway does not know its config file: saves are off");
    return false;
}

static void
on_model_spec(struct net_control *c, struct evhttp_request *req)
{
    struct net_save *job = NULL;
    const char *prov = NULL, *model = NULL;
    char why[1024];
    json_t *j;
    enum gw_code rc;

    if (!saves_on(c, req) || !(j = body_json(req)))
        return;
    job = net_save_new(NET_SAVE_SPEC, c->deps.conf_path, c->deps.store);
    if (!job) {
        send_error(req, GW_E_NOMEM, 500, "out of memory");
        goto out;
    }
    rc = spec_request(j, &prov, &model, &job->spec, why, sizeof(why));
    if (rc != GW_OK) {
        send_error(req, rc, 400, why);
        goto out;
    }
    snprintf(job->name, sizeof(job->name), "%s", prov);
    job->model = gw_strdup(model);
    if (strlen(prov) > GW_NAME_MAX || !job->model) {
        send_error(req, GW_E_CONTROL_UNKNOWN_PROVIDER, 0, "no provider with that name");
        goto out;
    }
    save_start(c, req, &job);
out:
    net_save_free(job);
    json_decref(j);
}

/* ---- POST /control/v1/reload ---- */

enum gw_code
net_control_reload(struct net_control *c, const char *source, net_reload_done_fn done, void *arg)
{
    if (!c->deps.reload)
        return GW_E_SHUTTING_DOWN;
    return net_reload_ask(c->deps.reload, c->base, source, done, arg);
}

/* A POST /control/v1/reload waiting for its answer; req is NULL once the client left. */
struct reload_wait {
    struct evhttp_request *req;
};

static void
on_reload_client_gone(struct evhttp_connection *evcon, void *arg)
{
    struct reload_wait *w = arg;

    (void)evcon;
    w->req = NULL; /* evhttp frees the request after this */
}

/* The answer of a reload: 200 and what changed, or the refusal with the control API's
 * codes (a refused file: 409 gw.control.config_invalid with every problem, as a save of
 * a file refused as it is; unreadable: gw.control.config_io). */
static void
send_reload_result(struct evhttp_request *req, const struct net_reload_result *res)
{
    json_t *j = net_reload_result_json(res), *err;
    enum gw_code code = res->code;
    int status;

    if (res->reloaded) {
        send_json(req, 200, j);
        return;
    }
    if (res->problems.n)
        code = GW_E_CONTROL_CONFIG_INVALID;
    else if (code == GW_E_CFG_IO)
        code = GW_E_CONTROL_CONFIG_IO;
    status = gw_code_http_status(code);
    err = j ? json_object_get(j, "error") : NULL;
    if (err)
        json_object_set_new(err, "code", json_string(gw_code_str(code)));
    send_json(req, status ? status : 500, j);
}

static void
on_reload_done(void *arg, const struct net_reload_result *res)
{
    struct reload_wait *w = arg;

    if (w->req) {
        evhttp_connection_set_closecb(evhttp_request_get_connection(w->req), NULL, NULL);
        send_reload_result(w->req, res);
    }
    gw_free(w);
}

static void
on_reload(struct net_control *c, struct evhttp_request *req)
{
    struct reload_wait *w = gw_calloc(1, sizeof(*w));
    enum gw_code rc;

    if (!w) {
        send_error(req, GW_E_NOMEM, 0, "out of memory");
        return;
    }
    w->req = req;
    rc = net_control_reload(c, "control", on_reload_done, w);
    if (rc != GW_OK) {
        gw_free(w);
        send_error(req, rc, 0,
                   rc == GW_E_BUSY            ? "too many reloads are waiting; try again"
                   : rc == GW_E_SHUTTING_DOWN ? "the gateway is stopping"
                                              : "out of memory");
        return;
    }
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_reload_client_gone, w);
}

/* "groups/NAME", "keys/NAME", "providers/NAME": the kind, and the name in <name>;
 * -1 when <sub> is none of them. */
static int
entry_kind_of(const char *sub, const char **name)
{
    static const struct {
        const char *prefix;
        enum net_save_kind kind;
    } t[] = {
        {"groups/", NET_SAVE_GROUP}, {"keys/", NET_SAVE_CLIENT}, {"providers/", NET_SAVE_PROVIDER}};
    size_t i;

    for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (strncmp(sub, t[i].prefix, strlen(t[i].prefix)) == 0) {
            *name = sub + strlen(t[i].prefix);
            return (int)t[i].kind;
        }
    }
    return -1;
}

static bool
name_ok(const char *n)
{
    size_t l = strlen(n);

    return l > 0 && l <= GW_NAME_MAX &&
           strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == l;
}

/* The entry of a PUT: a JSON object with the YAML's field names; "name" defaults to the
 * path's name, another name renames the entry. Written with "name" first, the other
 * fields in the order given. Returns the JSON text (gw_malloc'd) or NULL (answered). */
static char *
entry_text(struct evhttp_request *req, const char *path_name, char new_name[GW_NAME_MAX + 1])
{
    json_t *j = body_json(req), *out = NULL, *v;
    const char *k, *nm;
    char *text = NULL, *dump;

    if (!j)
        return NULL;
    if (!json_is_object(j)) {
        send_error(req, GW_E_BAD_REQUEST, 400,
                   "expected a JSON object: the entry with the config's field names");
        goto done;
    }
    v = json_object_get(j, "name");
    if (v && !json_is_string(v)) {
        send_error(req, GW_E_BAD_REQUEST, 400, "name: expected a string");
        goto done;
    }
    nm = v ? json_string_value(v) : path_name;
    if (!name_ok(nm)) {
        send_error(req, GW_E_BAD_REQUEST, 400, "name: expected 1 to 64 of a-z 0-9 . _ -");
        goto done;
    }
    snprintf(new_name, GW_NAME_MAX + 1, "%s", nm);
    out = json_object();
    if (!out || json_object_set_new(out, "name", json_string(nm)) != 0)
        goto nomem;
    json_object_foreach(j, k, v)
    {
        if (strcmp(k, "name") != 0 && json_object_set(out, k, v) != 0)
            goto nomem;
    }
    dump = json_dumps(out, JSON_PRESERVE_ORDER);
    if (!dump)
        goto nomem;
    text = gw_strdup(dump);
    free(dump);
    if (text)
        goto done;
nomem:
    send_error(req, GW_E_NOMEM, 500, "out of memory");
done:
    json_decref(out);
    json_decref(j);
    return text;
}

static void
on_entry(struct net_control *c, struct evhttp_request *req, enum net_save_kind kind,
         const char *name)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    struct net_save *job;

    if (m != EVHTTP_REQ_PUT && m != EVHTTP_REQ_DELETE) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "PUT, DELETE");
        send_error(req, GW_E_METHOD_NOT_ALLOWED, 405, "this path answers PUT and DELETE only");
        return;
    }
    if (!name_ok(name)) {
        send_error(req, GW_E_BAD_REQUEST, 400,
                   "the name in the path: expected 1 to 64 of a-z 0-9 . _ -");
        return;
    }
    if (!saves_on(c, req))
        return;
    job = net_save_new(kind, c->deps.conf_path, c->deps.store);
    if (!job) {
        send_error(req, GW_E_NOMEM, 500, "out of memory");
        return;
    }
    snprintf(job->name, sizeof(job->name), "%s", name);
    snprintf(job->new_name, sizeof(job->new_name), "%s", name);
    if (m == EVHTTP_REQ_PUT) {
        job->entry = entry_text(req, name, job->new_name);
        if (!job->entry) {
            net_save_free(job);
            return;
        }
        job->entry_len = strlen(job->entry);
    }
    save_start(c, req, &job);
}

/* The /control/v1/ endpoints and the one method each answers. */
enum control_ep {
    EP_VERSION,
    EP_TRAFFIC,
    EP_OVERVIEW,
    EP_DRY_RUN,
    EP_EVENTS,
    EP_MODEL_SPEC,
    EP_RELOAD,
    EP__COUNT
};

static const struct {
    const char *name;
    enum evhttp_cmd_type method;
    const char *allow;
} control_eps[EP__COUNT] = {
    [EP_VERSION] = {"version", EVHTTP_REQ_GET, "GET"},
    [EP_TRAFFIC] = {"traffic", EVHTTP_REQ_GET, "GET"},
    [EP_OVERVIEW] = {"overview", EVHTTP_REQ_GET, "GET"},
    [EP_DRY_RUN] = {"dry-run", EVHTTP_REQ_POST, "POST"},
    [EP_EVENTS] = {"events", EVHTTP_REQ_GET, "GET"},
    [EP_MODEL_SPEC] = {"provider-model-spec", EVHTTP_REQ_PUT, "PUT"},
    [EP_RELOAD] = {"reload", EVHTTP_REQ_POST, "POST"},
};

/* ---- GET /control/v1/events (SSE) ---- */

/* The union of the subscribers' filters, for the workers (core/events.h): they build a
 * request_finished only when someone may want it. */
static void
events_interest(struct net_control *c)
{
    uint32_t mask = 0;
    double rate = 0;
    size_t i;

    for (i = 0; i < c->n_subs; i++) {
        mask |= c->subs[i].f.types;
        if ((c->subs[i].f.types & GW_EVENT_MASK(GW_EV_REQUEST_FINISHED)) &&
            c->subs[i].f.sample > rate)
            rate = c->subs[i].f.sample;
    }
    gw_events_set_interest(mask, rate);
}

static void
on_sub_close(struct evhttp_connection *evcon, void *arg)
{
    struct net_control *c = arg;
    size_t i;

    for (i = 0; i < c->n_subs; i++) {
        if (evhttp_request_get_connection(c->subs[i].req) == evcon) {
            c->subs[i] = c->subs[--c->n_subs];
            events_interest(c);
            return;
        }
    }
}

/* The subscriber's filter from the query: type=a,b client=NAME sample=0..1. False (the
 * error sent) when a value is wrong. */
static bool
events_filter(struct evhttp_request *req, struct gw_event_filter *f)
{
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq q = {0}; /* an empty queue; parse_query_str fills it */
    const char *v, *bad;
    char msg[160];
    size_t bad_len;
    bool ok = false;

    gw_event_filter_init(f);
    if (query && evhttp_parse_query_str(query, &q) != 0) {
        send_error(req, GW_E_BAD_REQUEST, 400, "malformed query string");
        goto out;
    }
    v = evhttp_find_header(&q, "type");
    if (v && gw_event_filter_set_types(f, v, &bad, &bad_len) != GW_OK) {
        snprintf(msg, sizeof(msg), "type: no event is named \"%.*s\" (%s)",
                 (int)(bad_len > 64 ? 64 : bad_len), bad,
                 "key_limit_alert, request_finished, upstream_paused, upstream_resumed, ...");
        send_error(req, GW_E_BAD_REQUEST, 400, msg);
        goto out;
    }
    v = evhttp_find_header(&q, "client");
    if (v && gw_event_filter_set_client(f, v) != GW_OK) {
        send_error(req, GW_E_BAD_REQUEST, 400, "client: expected a client name");
        goto out;
    }
    v = evhttp_find_header(&q, "sample");
    if (v && gw_event_filter_set_sample(f, v) != GW_OK) {
        send_error(req, GW_E_BAD_REQUEST, 400, "sample: expected a rate from 0 to 1");
        goto out;
    }
    ok = true;
out:
    evhttp_clear_headers(&q);
    return ok;
}

static void
on_events(struct net_control *c, struct evhttp_request *req)
{
    struct gw_event_filter f;
    struct evbuffer *b;

    if (c->n_subs == CONTROL_MAX_SUBS) {
        send_error(req, GW_E_BUSY_ALL, 503, "too many event stream subscribers");
        return;
    }
    if (!events_filter(req, &f))
        return;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/event-stream");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-cache");
    evhttp_send_reply_start(req, 200, "OK");
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_sub_close, c);
    c->subs[c->n_subs++] = (struct event_sub){req, f, 0};
    /* Interest first, then the comment: a follower that has read ": subscribed" gets
     * every event of a request that finishes after it. */
    events_interest(c);
    b = evbuffer_new();
    if (b) {
        evbuffer_add_printf(b, ": subscribed\n\n");
        evhttp_send_reply_chunk(req, b);
        evbuffer_free(b);
    }
}

/* Bytes queued to <sub> and not yet written: past CONTROL_SUB_MAX_BACKLOG, a follower
 * that does not read is left out of events (counted, told when it catches up) instead of
 * growing the control thread's memory without bound. */
static size_t
sub_backlog(const struct event_sub *sub)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(sub->req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;

    return bev ? evbuffer_get_length(bufferevent_get_output(bev)) : 0;
}

/* Appends event <name> with <json> to <b> as one SSE event. */
static void
sse_add(struct evbuffer *b, const char *name, const char *json)
{
    evbuffer_add_printf(b, "event: %s\ndata: %s\n\n", name, json);
}

/* An events_dropped event when the rings dropped events since the last one told: how
 * many of each name. Rare events have their own ring (core/events.h), so this is about
 * request_finished bursts in practice; either way no loss is silent. */
static void
ring_drops(struct net_control *c, struct evbuffer *all)
{
    char json[512];
    size_t off;
    uint64_t total = 0;
    unsigned i;

    off = (size_t)snprintf(json, sizeof(json), "{\"type\":\"events_dropped\",\"by_type\":{");
    for (i = 0; i < GW_EV__COUNT; i++) {
        uint64_t now = gw_events_dropped_of((enum gw_event_name)i), d = now - c->drops_told[i];

        if (!d)
            continue;
        c->drops_told[i] = now;
        if (off < sizeof(json))
            off +=
                (size_t)snprintf(json + off, sizeof(json) - off, "%s\"%s\":%llu", total ? "," : "",
                                 gw_event_str((enum gw_event_name)i), (unsigned long long)d);
        total += d;
    }
    if (!total || off >= sizeof(json))
        return;
    snprintf(json + off, sizeof(json) - off, "},\"dropped\":%llu,\"reason\":\"queue_full\"}",
             (unsigned long long)total);
    sse_add(all, gw_event_str(GW_EV_EVENTS_DROPPED), json);
}

/* Sends <one> (consumed) to <sub>, or leaves it out when the follower is too far behind;
 * the first chunk after such a gap starts with an events_dropped telling how many. */
static void
sub_send(struct event_sub *sub, struct evbuffer *one, size_t n_events)
{
    if (sub_backlog(sub) > CONTROL_SUB_MAX_BACKLOG) {
        sub->skipped += n_events;
        return;
    }
    if (sub->skipped) {
        struct evbuffer *note = evbuffer_new();

        if (note) {
            evbuffer_add_printf(note,
                                "event: events_dropped\ndata: {\"type\":\"events_dropped\","
                                "\"dropped\":%llu,\"reason\":\"slow_reader\"}\n\n",
                                (unsigned long long)sub->skipped);
            evhttp_send_reply_chunk(sub->req, note);
            evbuffer_free(note);
            sub->skipped = 0;
        }
    }
    evhttp_send_reply_chunk(sub->req, one);
}

/* Broadcasts queued events (core/events.h) to every subscriber through its filter; a
 * comment line every 10 s keeps idle streams (and their proxies) alive. Tells
 * upstream_resumed for pauses that ran out first, so they go out in this tick. */
static void reserve_refill(void);

static void
on_events_tick(evutil_socket_t fd, short what, void *arg)
{
    struct net_control *c = arg;
    struct evbuffer *per[CONTROL_MAX_SUBS] = {0}, *common = evbuffer_new();
    size_t counts[CONTROL_MAX_SUBS] = {0}, i, n_common;
    const unsigned char *head;
    struct gw_event *ev;
    struct gw_conf *conf;

    reserve_refill(); /* the descriptor given up under EMFILE, once one is free again */

    (void)fd;
    (void)what;
    conf = gw_conf_acquire(&c->thr);
    net_report_sweep(conf, net_now_ms());
    if (c->ticks % (1000 / CONTROL_EVENTS_TICK_MS) == 0) {
        /* quota (net/quota.h), once a second: unsettled leases, learned limits kept */
        net_quota_sweep(c->deps.quota, net_now_ms());
        c->quota_saved_ms =
            net_quota_save_learned(conf, c->deps.store, c->quota_saved_ms, net_now_ms());
    }
    gw_conf_release(conf);
    if (!common)
        return;
    /* What every follower gets, ahead of its own events: drops told, the keepalive. */
    ring_drops(c, common);
    if (++c->ticks % (10000 / CONTROL_EVENTS_TICK_MS) == 0)
        evbuffer_add_printf(common, ": keepalive\n\n");
    n_common = evbuffer_get_length(common);
    head = n_common ? evbuffer_pullup(common, -1) : NULL;
    for (i = 0; i < c->n_subs; i++) {
        per[i] = evbuffer_new();
        if (per[i] && head)
            evbuffer_add(per[i], head, n_common);
    }
    while ((ev = gw_event_take()) != NULL) {
        for (i = 0; i < c->n_subs; i++) {
            if (per[i] && gw_event_filter_pass(&c->subs[i].f, ev)) {
                sse_add(per[i], gw_event_str(ev->name), ev->json);
                counts[i]++;
            }
        }
        gw_free(ev);
    }
    for (i = 0; i < c->n_subs; i++) {
        if (per[i] && evbuffer_get_length(per[i]))
            sub_send(&c->subs[i], per[i], counts[i]);
        if (per[i])
            evbuffer_free(per[i]);
    }
    evbuffer_free(common);
}

static void
on_control(struct net_control *c, struct evhttp_request *req, const char *sub)
{
    struct gw_conf *conf = gw_conf_acquire(&c->thr);
    const char *why = NULL, *name = NULL;
    char msg[160];
    unsigned ep;

    for (ep = 0; ep < EP__COUNT; ep++)
        if (strcmp(sub, control_eps[ep].name) == 0)
            break;

    if (!authorized(req, conf, &why)) {
        if (conf && !conf->control.token && conf->control.token_env) {
            snprintf(msg, sizeof(msg),
                     "the control API is disabled: control.token_env (%s) is unset",
                     conf->control.token_env);
            why = msg;
        }
        evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate", "Bearer");
        /* Counted (a /metrics signal of token guessing); other control errors are not,
         * so gw_code_total stays about the data plane. */
        gw_code_count(GW_E_CONTROL_UNAUTHORIZED);
        send_error(req, GW_E_CONTROL_UNAUTHORIZED, 401, why);
    } else if (ep == EP__COUNT && entry_kind_of(sub, &name) >= 0) {
        on_entry(c, req, (enum net_save_kind)entry_kind_of(sub, &name), name);
    } else if (ep == EP__COUNT) {
        send_error(req, GW_E_NOT_FOUND, 404, "no such control endpoint");
    } else if (evhttp_request_get_command(req) != control_eps[ep].method) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", control_eps[ep].allow);
        snprintf(msg, sizeof(msg), "%s answers %s only", sub, control_eps[ep].allow);
        send_error(req, GW_E_METHOD_NOT_ALLOWED, 405, msg);
    } else {
        switch ((enum control_ep)ep) {
        case EP_VERSION: on_version(req); break;
        case EP_TRAFFIC: on_traffic(c, req); break;
        case EP_OVERVIEW: on_overview(req, conf); break;
        case EP_DRY_RUN: on_dry_run(c, req, conf); break;
        case EP_EVENTS: on_events(c, req); break;
        case EP_MODEL_SPEC: on_model_spec(c, req); break;
        case EP_RELOAD: on_reload(c, req); break;
        case EP__COUNT: break;
        }
    }
    gw_conf_release(conf);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
    struct net_control *c = arg;
    const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));

    if (!path || !*path)
        path = "/";
    if (strncmp(path, CONTROL_PREFIX, strlen(CONTROL_PREFIX)) == 0) {
        /* each endpoint checks its own method, after the token */
        on_control(c, req, path + strlen(CONTROL_PREFIX));
    } else if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
        send_error(req, GW_E_METHOD_NOT_ALLOWED, 405, "only GET is served here");
    } else if (strcmp(path, "/healthz") == 0) {
        on_healthz(c, req);
    } else if (strcmp(path, "/readyz") == 0) {
        on_readyz(c, req);
    } else if (strcmp(path, "/metrics") == 0) {
        on_metrics(c, req);
    } else {
        send_error(req, GW_E_NOT_FOUND, 404, "no such path");
    }
}

/* ---- thread ---- */

static void
on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct net_control *c = arg;

    (void)fd;
    (void)what;
    event_base_loopbreak(c->base);
}

/* ---- a descriptor in reserve ----
 * Out of descriptors, the control port must stay up: the control thread keeps one
 * descriptor open (on /dev/null) and gives it up when its own accept fails with
 * EMFILE/ENFILE, so the next accept gets it. Taken back on the events tick. When the
 * reserve is spent too, the listener pauses 100 ms instead of spinning. One control
 * thread per process: file statics, touched on that thread only. */
#define CONTROL_ACCEPT_BACKOFF_MS 100

static int ctl_reserve_fd = -1;
static struct evconnlistener *ctl_listener;
static struct event *ctl_backoff;

static void
reserve_refill(void)
{
    if (ctl_reserve_fd < 0)
        ctl_reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC); /* fails while none is free */
}

static void
on_ctl_accept_error(struct evconnlistener *l, void *arg)
{
    static struct gw_log_rate rate;
    int err = EVUTIL_SOCKET_ERROR();
    uint64_t suppressed;

    (void)arg;
    if (gw_log_rate_pass(&rate, &suppressed))
        GW_LOG(GW_LOG_WARN, NULL, "accept_error",
               "control: accept failed: %s (%llu more such lines since the last one)",
               strerror(err), (unsigned long long)suppressed);
    if (err != EMFILE && err != ENFILE)
        return;
    if (ctl_reserve_fd >= 0) {
        close(ctl_reserve_fd); /* the listener is still readable: the next accept has it */
        ctl_reserve_fd = -1;
        return;
    }
    if (ctl_backoff && !evtimer_pending(ctl_backoff, NULL)) {
        struct timeval tv = {0, CONTROL_ACCEPT_BACKOFF_MS * 1000};

        evconnlistener_disable(l);
        evtimer_add(ctl_backoff, &tv);
    }
}

static void
on_ctl_backoff(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (ctl_listener)
        evconnlistener_enable(ctl_listener);
}

static void *
control_main(void *arg)
{
    struct net_control *c = arg;

    pthread_setname_np(pthread_self(), "gw-control");
    gw_thread_register(&c->thr);
    {
        struct timeval tick = {0, CONTROL_EVENTS_TICK_MS * 1000};

        event_add(c->ev_tick, &tick);
    }
    reserve_refill();
    event_base_dispatch(c->base);
    if (ctl_reserve_fd >= 0)
        close(ctl_reserve_fd);
    ctl_reserve_fd = -1;
    while (c->n_subs) /* end the streams; the close callbacks need the base no more */
        evhttp_send_reply_end(c->subs[--c->n_subs].req);
    gw_events_set_interest(0, 0);
    while (c->n_saves) /* saves still running or waiting; evhttp_free closes them */
        save_free(c->saves[0]);
    gw_thread_unregister(&c->thr);
    return NULL;
}

/* ---- lifecycle ---- */

static void
control_free(struct net_control *c)
{
    ctl_listener = NULL;
    if (ctl_backoff)
        event_free(ctl_backoff);
    ctl_backoff = NULL;
    if (c->http)
        evhttp_free(c->http);
    if (c->stop_ev)
        event_free(c->stop_ev);
    if (c->ev_tick)
        event_free(c->ev_tick);
    if (c->base)
        event_base_free(c->base);
    gw_free(c);
}

enum gw_code
net_control_start(const struct gw_conf_addr *listen, const struct net_deps *deps,
                  struct net_control **out, char *err, size_t errlen)
{
    struct net_control *c = gw_calloc(1, sizeof(*c));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    const char *host = listen->host && *listen->host ? listen->host : "127.0.0.1";
    int e;

    *out = NULL;
    if (!c) {
        snprintf(err, errlen, "control: out of memory");
        return GW_E_NOMEM;
    }
    if (deps)
        c->deps = *deps;
    c->base = event_base_new();
    c->http = c->base ? evhttp_new(c->base) : NULL;
    c->stop_ev = c->base ? event_new(c->base, -1, 0, on_stop, c) : NULL;
    c->ev_tick = c->base ? event_new(c->base, -1, EV_PERSIST, on_events_tick, c) : NULL;
    if (!c->http || !c->stop_ev || !c->ev_tick) {
        snprintf(err, errlen, "control: cannot create the event loop");
        control_free(c);
        return GW_E_INTERNAL;
    }
    evhttp_set_allowed_methods(c->http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                            EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH |
                                            EVHTTP_REQ_OPTIONS);
    evhttp_set_max_body_size(c->http, CONTROL_MAX_BODY);
    evhttp_set_max_headers_size(c->http, CONTROL_MAX_HEADERS);
    evhttp_set_timeout(c->http, CONTROL_TIMEOUT_SECS);
    evhttp_set_gencb(c->http, on_request, c);
    errno = 0;
    c->sock = evhttp_bind_socket_with_handle(c->http, host, listen->port);
    if (!c->sock) {
        snprintf(err, errlen, "control.listen %s:%u: cannot bind: %s", host, (unsigned)listen->port,
                 errno ? strerror(errno) : "address not usable");
        control_free(c);
        return GW_E_INTERNAL;
    }
    if (getsockname(evhttp_bound_socket_get_fd(c->sock), (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            c->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            c->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    if (!c->port)
        c->port = listen->port;
    ctl_listener = evhttp_bound_socket_get_listener(c->sock);
    ctl_backoff = evtimer_new(c->base, on_ctl_backoff, NULL);
    evconnlistener_set_error_cb(ctl_listener, on_ctl_accept_error);
    e = pthread_create(&c->thread, NULL, control_main, c);
    if (e != 0) {
        snprintf(err, errlen, "control: cannot start the thread: %s", strerror(e));
        control_free(c);
        return GW_E_INTERNAL;
    }
    c->running = true;
    *out = c;
    return GW_OK;
}

uint16_t
net_control_port(const struct net_control *c)
{
    return c->port;
}

void
net_control_set_phase(struct net_control *c, enum net_control_phase phase)
{
    if (c)
        ck_pr_store_int(&c->phase, (int)phase); /* relaxed: see on_healthz */
}

void
net_control_stop(struct net_control *c)
{
    if (!c)
        return;
    if (c->running) {
        /* event_active is thread-safe once evthread_use_pthreads() ran: it takes the
         * base's lock and wakes the loop, which breaks out on the control thread. An
         * activation before the loop starts stays pending and is run by its first turn. */
        event_active(c->stop_ev, EV_READ, 0);
        pthread_join(c->thread, NULL);
    }
    control_free(c);
}
