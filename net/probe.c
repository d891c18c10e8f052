/* SPDX-License-Identifier: MIT
 * net/probe.c - see net/probe.h. A timer on worker 0 ticks a few times per pass
 * interval; when core's prober says a pass is due it gathers the credential sets of the
 * live snapshot's providers that allow probes, lets gw_quota_probe_pick choose, and sends
 * each chosen credential's model listing through the worker's upstream pool. The answer's
 * status decides (gw_quota_probe_done); the body is read and thrown away.
 * Owns:    struct net_probe: its timer, the set scratch arrays, the slots of the probes
 *          in flight (each slot copies the names it reports with: the snapshot it was
 *          sent from may be gone when the answer comes).
 * Threads: worker 0 (see net/probe.h).
 * See:     net/probe.h, core/quota.h, net/upstream.h, net/quota.h
 */
#include "net/probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/alloc.h"
#include "core/log.h"
#include "core/quota.h"
#include "dialects/anthropic.h"
#include "net/logger.h"
#include "net/net-priv.h"
#include "net/quota.h"
#include "net/upstream.h"

#define PROBE_ENV_DIV "GW_TEST_QUOTA_PROBE_DIV"
#define PROBE_DIV_MAX 600 /* a pass every 100 ms at most */

struct probe_slot {
    struct net_probe *pr;
    struct net_upx *x; /* NULL: the slot is free */
    struct gw_quota_set *set;
    size_t unit;
    int status; /* the answer's status, 0 until its head came */
    uint64_t sent_ms;
    char provider[128];
    char model[GW_MODEL_MAX + 1];
    char fp[GW_QUOTA_FP_LEN + 1];
};

struct net_probe {
    struct net_worker *w;
    struct event *tick;
    struct gw_quota_prober prober;
    struct gw_quota_set **sets; /* scratch of one pass: GW_QUOTA_MAX_SETS */
    size_t *prov_of;            /* the provider index of each */
    size_t n_sets;
    const struct gw_conf *conf; /* during a pass only */
    struct probe_slot slot[GW_QUOTA_PROBES_PER_PASS];
};

/* GW_TEST_QUOTA_PROBE_DIV when set to 1..PROBE_DIV_MAX, else 1. */
static unsigned
probe_div(void)
{
    const char *v = getenv(PROBE_ENV_DIV);
    char *end;
    unsigned long d;

    if (!v || !*v)
        return 1;
    d = strtoul(v, &end, 10);
    if (*end || d < 1 || d > PROBE_DIV_MAX) {
        GW_LOG(GW_LOG_WARN, NULL, "quota_probe", "%s=%s ignored: 1..%d expected", PROBE_ENV_DIV, v,
               PROBE_DIV_MAX);
        return 1;
    }
    GW_LOG(GW_LOG_WARN, NULL, "quota_probe",
           "%s=%lu: probe passes and thresholds divided by %lu (for tests only)", PROBE_ENV_DIV, d,
           d);
    return (unsigned)d;
}

/* ---- one probe ---- */

static void
on_probe_head(void *arg, int status, const struct net_hdr *hdrs, size_t n_hdrs)
{
    struct probe_slot *sl = arg;

    (void)hdrs;
    (void)n_hdrs;
    sl->status = status;
}

static void
on_probe_body(void *arg, const char *data, size_t len)
{
    (void)arg;
    (void)data;
    (void)len; /* only the status counts */
}

static void
on_probe_end(void *arg, enum gw_code rc)
{
    struct probe_slot *sl = arg;
    struct gw_log_ctx ctx = {(int)sl->pr->w->id, 0, NULL};
    struct gw_quota_unit_view v;
    uint64_t now_ms = net_now_ms();
    bool pass = sl->status >= 200 && sl->status < 300, was_cooling;

    gw_quota_view(sl->set, sl->unit, now_ms, &v);
    was_cooling = v.cool.source != GW_QUOTA_SRC_NONE && v.cool.until_ms > now_ms;
    gw_quota_probe_done(sl->set, sl->unit, now_ms, pass);
    GW_LOG(pass ? GW_LOG_INFO : GW_LOG_WARN, &ctx, "quota_probe",
           "upstream %s credential %s probe %s: status %d%s%s in %llu ms", sl->provider, sl->fp,
           pass ? "passed" : "failed", sl->status, rc == GW_OK ? "" : ", ",
           rc == GW_OK ? "" : gw_code_str(rc), (unsigned long long)(now_ms - sl->sent_ms));
    if (pass && was_cooling)
        net_quota_report_recovered_named(sl->provider, sl->model, sl->fp, "probe", &ctx);
    sl->x = NULL;
}

static const struct net_up_cbs probe_cbs = {
    .on_head = on_probe_head,
    .on_body = on_probe_body,
    .on_end = on_probe_end,
};

/* Sends the listing of provider <p> with its credential <unit> from slot <sl>. */
static void
probe_send(struct net_probe *pr, struct probe_slot *sl, const struct gw_conf_provider *p,
           const char *model, struct gw_quota_set *set, size_t unit)
{
    const char *secret = p->keys[unit].secret;
    char path[512], auth[1024];
    struct net_hdr h[3];
    struct net_up_req rq;
    size_t n = 0;

    switch (p->dialect) {
    case GW_DIALECT_GEMINI:
        snprintf(path, sizeof(path), "%s/v1beta/models?pageSize=1", p->path_prefix);
        h[n++] = (struct net_hdr){GW_STR_LIT("x-goog-api-key"), gw_str_c(secret)};
        break;
    case GW_DIALECT_ANTHROPIC:
        snprintf(path, sizeof(path), "%s/v1/models", p->path_prefix);
        h[n++] = (struct net_hdr){GW_STR_LIT("x-api-key"), gw_str_c(secret)};
        h[n++] =
            (struct net_hdr){GW_STR_LIT("anthropic-version"), GW_STR_LIT(DL_ANTHROPIC_VERSION)};
        break;
    case GW_DIALECT_OPENAI:
    case GW_DIALECT_RESPONSES:
    default:
        snprintf(path, sizeof(path), "%s/v1/models", p->path_prefix);
        snprintf(auth, sizeof(auth), "Bearer %s", secret);
        h[n++] = (struct net_hdr){GW_STR_LIT("authorization"), gw_str_c(auth)};
        break;
    }
    h[n++] = (struct net_hdr){GW_STR_LIT("accept"), GW_STR_LIT("application/json")};
    memset(&rq, 0, sizeof(rq));
    rq.prov = p;
    rq.method = "GET";
    rq.path = gw_str_c(path);
    rq.hdrs = h;
    rq.n_hdrs = n;
    rq.connect_timeout_ms = pr->conf->failover.connect_timeout_ms;
    rq.head_timeout_ms = pr->conf->failover.first_byte_timeout_secs * 1000u;
    rq.idle_timeout_ms = pr->conf->failover.read_idle_timeout_secs * 1000u;
    sl->pr = pr;
    sl->set = set;
    sl->unit = unit;
    sl->status = 0;
    sl->sent_ms = net_now_ms();
    snprintf(sl->provider, sizeof(sl->provider), "%s", p->name);
    snprintf(sl->model, sizeof(sl->model), "%s", model);
    memcpy(sl->fp, p->keys[unit].fp, sizeof(sl->fp));
    sl->x = net_up_send(pr->w->pool, &rq, &probe_cbs, sl);
    if (!sl->x)
        GW_LOG(GW_LOG_WARN, NULL, "quota_probe", "upstream %s credential %s: out of memory",
               sl->provider, sl->fp);
    memset(auth, 0, sizeof(auth));
}

/* ---- a pass ---- */

static void
on_pass_set(void *arg, const char *provider, const char *model, struct gw_quota_set *s)
{
    struct net_probe *pr = arg;
    size_t i;

    (void)model;
    if (pr->n_sets == GW_QUOTA_MAX_SETS)
        return;
    /* Only the sets of this snapshot's keys (quota_name names them), of providers that
     * allow probes. */
    for (i = 0; i < pr->conf->n_providers; i++)
        if (strcmp(pr->conf->providers[i].quota_name, provider) == 0)
            break;
    /* Bedrock lists models on another endpoint (bedrock.<region>, not bedrock-runtime):
     * its credential recovers by its cooldown ladder alone (docs/config.md). */
    if (i == pr->conf->n_providers || !pr->conf->providers[i].quota_probes ||
        pr->conf->providers[i].dialect == GW_DIALECT_BEDROCK ||
        gw_quota_set_size(s) > pr->conf->providers[i].n_keys)
        return;
    pr->sets[pr->n_sets] = s;
    pr->prov_of[pr->n_sets] = i;
    pr->n_sets++;
}

static bool
probe_in_flight(const struct net_probe *pr, const struct gw_quota_set *s, size_t unit)
{
    for (size_t k = 0; k < GW_QUOTA_PROBES_PER_PASS; k++)
        if (pr->slot[k].x && pr->slot[k].set == s && pr->slot[k].unit == unit)
            return true;
    return false;
}

static struct probe_slot *
free_slot(struct net_probe *pr)
{
    for (size_t k = 0; k < GW_QUOTA_PROBES_PER_PASS; k++)
        if (!pr->slot[k].x)
            return &pr->slot[k];
    return NULL;
}

/* The name set <s> has in the registry (its model; "" with pool account). */
struct model_find {
    struct gw_quota_set *s;
    const char *model;
};

static void
on_find_model(void *arg, const char *provider, const char *model, struct gw_quota_set *s)
{
    struct model_find *f = arg;

    (void)provider;
    if (s == f->s)
        f->model = model;
}

static void
probe_pass(struct net_probe *pr, uint64_t now_ms)
{
    struct gw_quota_probe out[GW_QUOTA_PROBES_PER_PASS];
    const struct gw_quota_reg *reg = NULL;
    size_t i, k, n;

    for (i = 0; i < pr->conf->n_providers && !reg; i++)
        reg = pr->conf->providers[i].quota_reg; /* one registry per process */
    if (!reg)
        return;
    pr->n_sets = 0;
    gw_quota_reg_each(reg, on_pass_set, pr);
    n = gw_quota_probe_pick_by(&pr->prober, pr->sets, pr->n_sets, now_ms, out,
                               GW_QUOTA_PROBES_PER_PASS);
    for (i = 0; i < n; i++) {
        struct probe_slot *sl;
        struct model_find f = {out[i].set, ""};

        if (probe_in_flight(pr, out[i].set, out[i].unit) || !(sl = free_slot(pr)))
            continue; /* the last pass's probe of it still runs, or 3 still run */
        for (k = 0; k < pr->n_sets && pr->sets[k] != out[i].set; k++)
            ;
        if (k == pr->n_sets)
            continue;
        gw_quota_reg_each(reg, on_find_model, &f);
        probe_send(pr, sl, &pr->conf->providers[pr->prov_of[k]], f.model, out[i].set, out[i].unit);
    }
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct net_probe *pr = arg;
    uint64_t now_ms = net_now_ms();
    struct gw_conf *conf;

    (void)fd;
    (void)what;
    if (pr->w->draining || !gw_quota_prober_due(&pr->prober, now_ms))
        return;
    conf = gw_conf_acquire(&pr->w->gt);
    if (conf) {
        pr->conf = conf;
        probe_pass(pr, now_ms);
        pr->conf = NULL;
    }
    gw_conf_release(conf);
}

/* ---- life ---- */

struct net_probe *
net_probe_new(struct net_worker *w)
{
    struct net_probe *pr = gw_calloc(1, sizeof(*pr));
    uint64_t seed = 0;
    struct timeval tv;

    if (!pr)
        return NULL;
    pr->w = w;
    pr->sets = gw_calloc(GW_QUOTA_MAX_SETS, sizeof(*pr->sets));
    pr->prov_of = gw_calloc(GW_QUOTA_MAX_SETS, sizeof(*pr->prov_of));
    pr->tick = event_new(w->base, -1, EV_PERSIST, on_tick, pr);
    if (!pr->sets || !pr->prov_of || !pr->tick) {
        net_probe_free(pr);
        return NULL;
    }
    if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
        seed = net_now_ms();
    gw_quota_prober_init_scaled(&pr->prober, net_now_ms(), seed, probe_div());
    /* A few ticks per pass: a pass starts within a quarter interval of being due. */
    tv.tv_sec = (time_t)(pr->prober.every_ms / 4 / 1000);
    tv.tv_usec = (suseconds_t)(pr->prober.every_ms / 4 % 1000 * 1000);
    if (tv.tv_sec > 1)
        tv = (struct timeval){1, 0};
    event_add(pr->tick, &tv);
    return pr;
}

void
net_probe_free(struct net_probe *pr)
{
    if (!pr)
        return;
    if (pr->tick)
        event_free(pr->tick);
    gw_free(pr->sets);
    gw_free(pr->prov_of);
    gw_free(pr);
}
