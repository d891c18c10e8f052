/* SPDX-License-Identifier: MIT
 * core/route.c - order the candidate upstreams of a request (DESIGN.md 3, 5).
 * Resolution: a group of the asked name, else the enabled providers that list the
 * model (or "*") as an implicit fallback group. Each candidate gets its facts (read
 * first, one upstate lock at a time), its state (disabled, paused, full via the caller's
 * callback, called before any group lock) and, in a load-balance group, its balance_by
 * factor and effective weight. Then the policy orders the OK candidates (a qualifying
 * sticky one first) and the rest follow: full ones (in policy order: they may free a
 * slot at any moment, and sort as a pause ending at 0), then paused ones by the end of
 * their pause, then, for the dry-run only, disabled ones in file order.
 * Load-balance: nginx's smooth weighted round-robin. Under the group's lock: every
 * eligible (OK) member adds its effective weight to its current weight, the leader
 * (the sticky member when it qualifies, else the highest current weight, first in file
 * order on a tie) is charged the round's total. Paused and full members sit the round
 * out. The other OK members follow by current weight, highest first. The dry-run does
 * the same arithmetic on a copy and stores nothing, so it answers what the next
 * charging call would (given the same facts).
 * Locking: the group lock is a gw_spin (core/spin.h) held from reading the current
 * weights to charging: a copy in, a few additions, a copy out; never across an
 * allocation, the is_full callback or a facts read.
 * Round state lives in the registry, keyed by group name, for at most GW_ROUTE_MAX
 * members (the candidates one request considers); a reload that changes a group's
 * type, members or weights zeroes it in place, so a snapshot still in use elsewhere
 * never sees freed memory.
 * Owns:    the registry (gw_routes) owns the round states and the upstate registry.
 * Threads: gw_route_order on any thread, never blocks; registry calls on main only.
 * See:     core/route.h, core/health.c, tests/unit/core/test_route.c
 */
#include "core/route.h"

#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/spin.h"

/* ---- registry (main thread) ---- */

/* One group's round state. Owned by gw_routes.v; never freed before gw_routes_free. */
struct gw_wrr {
    char *name;                /* group name; main only */
    char *sig;                 /* type, member names and weights; main only */
    struct gw_spin lock;       /* only through wrr_lock/wrr_unlock */
    int64_t cur[GW_ROUTE_MAX]; /* current weights by member index; guarded by lock */
};

struct gw_routes {
    struct gw_upstates *ups;
    struct gw_wrr **v;
    size_t n, cap;
};

/* The previous holder's charges happen before our reads: gw_spin_lock's acquire pairs
 * with gw_spin_unlock's release in wrr_unlock. */
static void
wrr_lock(struct gw_wrr *w)
{
    gw_spin_lock(&w->lock);
}

static void
wrr_unlock(struct gw_wrr *w)
{
    gw_spin_unlock(&w->lock);
}

struct gw_routes *
gw_routes_new(void)
{
    struct gw_routes *r = gw_calloc(1, sizeof(*r));

    if (!r)
        return NULL;
    r->ups = gw_upstates_new();
    if (!r->ups) {
        gw_free(r);
        return NULL;
    }
    return r;
}

void
gw_routes_free(struct gw_routes *r)
{
    size_t i;

    if (!r)
        return;
    for (i = 0; i < r->n; i++) {
        gw_free(r->v[i]->name);
        gw_free(r->v[i]->sig);
        gw_free(r->v[i]);
    }
    gw_free(r->v);
    gw_upstates_free(r->ups);
    gw_free(r);
}

struct gw_upstates *
gw_routes_upstates(struct gw_routes *r)
{
    return r->ups;
}

/* "<type>;<name>:<weight>;..." of the members a round considers; NULL when out of
 * memory. Names are [a-z0-9._-], so the separators cannot occur in them. */
static char *
group_sig(const struct gw_conf_group *g)
{
    size_t i, len = 16, off;
    char *s;

    for (i = 0; i < g->n_members && i < GW_ROUTE_MAX; i++)
        len += strlen(g->members[i].provider) + 16;
    s = gw_malloc(len);
    if (!s)
        return NULL;
    off = (size_t)snprintf(s, len, "%d", (int)g->type);
    for (i = 0; i < g->n_members && i < GW_ROUTE_MAX; i++)
        off += (size_t)snprintf(s + off, len - off, ";%s:%u", g->members[i].provider,
                                g->members[i].weight);
    return s;
}

static struct gw_wrr *
wrr_find(struct gw_routes *r, const char *name)
{
    size_t i;

    for (i = 0; i < r->n; i++)
        if (strcmp(r->v[i]->name, name) == 0)
            return r->v[i];
    return NULL;
}

/* A new round state for <name> with signature <*sigp> (taken on success). */
static struct gw_wrr *
wrr_add(struct gw_routes *r, const char *name, char **sigp)
{
    struct gw_wrr *w;

    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 8;
        struct gw_wrr **v = gw_realloc(r->v, cap * sizeof(*v));

        if (!v)
            return NULL;
        r->v = v;
        r->cap = cap;
    }
    w = gw_calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    w->name = gw_strdup(name);
    if (!w->name) {
        gw_free(w);
        return NULL;
    }
    /* w->lock: gw_calloc's zeroes are an unlocked gw_spin. */
    w->sig = *sigp;
    *sigp = NULL;
    r->v[r->n++] = w;
    return w;
}

enum gw_code
gw_routes_attach(struct gw_routes *r, struct gw_conf *c)
{
    size_t i;

    for (i = 0; i < c->n_providers; i++) {
        c->providers[i].state = gw_upstates_get(r->ups, c->providers[i].name);
        if (!c->providers[i].state)
            return GW_E_NOMEM;
    }
    for (i = 0; i < c->n_groups; i++) {
        struct gw_conf_group *g = &c->groups[i];
        char *sig = group_sig(g);
        struct gw_wrr *w;

        if (!sig)
            return GW_E_NOMEM;
        w = wrr_find(r, g->name);
        if (!w) {
            w = wrr_add(r, g->name, &sig);
            if (!w) {
                gw_free(sig);
                return GW_E_NOMEM;
            }
        } else if (strcmp(w->sig, sig) != 0) {
            /* Members or weights changed: start over. Zeroed in place because the
             * previous snapshot may still be charging this state. */
            wrr_lock(w);
            memset(w->cur, 0, sizeof(w->cur));
            wrr_unlock(w);
            gw_free(w->sig);
            w->sig = sig;
        } else {
            gw_free(sig);
        }
        g->wrr = w;
    }
    return GW_OK;
}

/* ---- factors ---- */

double
gw_route_factor(enum gw_balance_by by, const struct gw_upfacts *f, int32_t median_of_medians_ms)
{
    double lat = 1.0, hl = 1.0;

    if ((by == GW_BALANCE_LATENCY || by == GW_BALANCE_LATENCY_HEALTH) && f->ttfc_median_ms >= 0 &&
        median_of_medians_ms >= 0) {
        if (f->ttfc_median_ms == 0) {
            lat = median_of_medians_ms == 0 ? 1.0 : 10.0;
        } else {
            double q = (double)median_of_medians_ms / f->ttfc_median_ms;

            lat = q * q;
        }
        if (lat < 0.1)
            lat = 0.1;
        if (lat > 10.0)
            lat = 10.0;
    }
    if ((by == GW_BALANCE_HEALTH || by == GW_BALANCE_LATENCY_HEALTH) && f->success_rate >= 0) {
        hl = f->success_rate * f->success_rate;
        if (hl < 0.05)
            hl = 0.05;
    }
    return lat * hl;
}

/* max(1, round(weight * factor * 1000)) without libm; factor is in [0.005, 10]. */
static unsigned
eff_weight(unsigned weight, double factor)
{
    double x = (double)weight * factor * 1000.0 + 0.5;
    unsigned e = x >= 4294967295.0 ? 4294967295u : (unsigned)x;

    return e ? e : 1;
}

/* ---- ordering ---- */

static void
facts_read(const struct gw_conf_provider *p, uint64_t now_ms, struct gw_upfacts *f)
{
    if (p->state) {
        gw_upstate_facts(p->state, now_ms, f);
        return;
    }
    /* Not attached (a config never published): nothing known. */
    memset(f, 0, sizeof(*f));
    f->ttfc_median_ms = -1;
    f->success_rate = -1.0;
    f->link_ms = -1;
}

/* Median of the members' TTFC medians (members with one, disabled ones left out);
 * -1 when none has one. */
static int32_t
median_of_medians(const struct gw_route_cand *cand, size_t n)
{
    int32_t v[GW_ROUTE_MAX];
    size_t i, j, k = 0;

    for (i = 0; i < n; i++) {
        int32_t x = cand[i].facts.ttfc_median_ms;

        if (cand[i].state == GW_CAND_DISABLED || x < 0)
            continue;
        for (j = k; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
        k++;
    }
    if (k == 0)
        return -1;
    return k % 2 ? v[k / 2] : (int32_t)(((int64_t)v[k / 2 - 1] + v[k / 2]) / 2);
}

/* Per-candidate sort keys for one call. */
struct rank {
    unsigned cls;   /* 0 OK, 1 full, 2 paused, 3 disabled */
    uint64_t until; /* paused: end of the pause; else 0 */
    unsigned lead;  /* 0: the sticky member or the round's leader; 1: the others */
    double policy;  /* lower first */
};

/* Stable insertion sort of the permutation <ord> by (cls, until, lead, policy). */
static void
sort_order(unsigned *ord, size_t n, const struct rank *rk)
{
    size_t i, j;

    for (i = 1; i < n; i++) {
        unsigned x = ord[i];

        for (j = i; j > 0; j--) {
            const struct rank *a = &rk[ord[j - 1]], *b = &rk[x];

            if (a->cls != b->cls       ? a->cls < b->cls
                : a->until != b->until ? a->until < b->until
                : a->lead != b->lead   ? a->lead < b->lead
                                       : a->policy <= b->policy)
                break;
            ord[j] = ord[j - 1];
        }
        ord[j] = x;
    }
}

/* The smooth weighted round: marks the leader in rk[] and fills rk[].policy of the OK
 * candidates (current weight after this round's addition, highest first); with
 * <advance>, stores the round. <midx> maps candidates to member indexes. */
static void
wrr_round(struct gw_wrr *w, struct gw_route_cand *cand, const unsigned *midx, size_t n,
          bool advance, struct rank *rk)
{
    int64_t cur[GW_ROUTE_MAX], total = 0;
    size_t i;
    int lead = -1, sticky = -1;

    for (i = 0; i < n; i++)
        if (cand[i].state == GW_CAND_OK && cand[i].sticky)
            sticky = (int)i;
    if (w)
        wrr_lock(w);
    for (i = 0; i < n; i++) {
        if (cand[i].state != GW_CAND_OK)
            continue;
        cur[i] = (w ? w->cur[midx[i]] : 0) + cand[i].eff_weight;
        total += cand[i].eff_weight;
        if (lead < 0 || cur[i] > cur[lead])
            lead = (int)i;
    }
    if (sticky >= 0)
        lead = sticky;
    if (w && advance && lead >= 0) {
        for (i = 0; i < n; i++)
            if (cand[i].state == GW_CAND_OK)
                w->cur[midx[i]] = cur[i];
        w->cur[midx[lead]] -= total;
    }
    if (w)
        wrr_unlock(w);
    for (i = 0; i < n; i++)
        if (cand[i].state == GW_CAND_OK)
            rk[i].policy = -(double)cur[i];
    if (lead >= 0)
        rk[lead].lead = 0;
}

enum gw_code
gw_route_order(const struct gw_conf *c, const struct gw_route_req *rq, bool advance,
               struct gw_route_cand *out, struct gw_route_result *res)
{
    struct gw_route_cand cand[GW_ROUTE_MAX];
    struct rank rk[GW_ROUTE_MAX];
    unsigned midx[GW_ROUTE_MAX], ord[GW_ROUTE_MAX];
    const struct gw_conf_group *g;
    enum gw_group_type type = GW_GROUP_FALLBACK;
    bool have_sticky = false;
    size_t i, n = 0;

    res->n = 0;
    res->pick = -1;
    g = gw_conf_group_find(c, rq->model, rq->model_len);
    res->group = g;

    /* ---- resolve ---- */
    if (g) {
        type = g->type;
        for (i = 0; i < g->n_members && i < GW_ROUTE_MAX; i++) {
            const struct gw_conf_member *m = &g->members[i];
            const struct gw_conf_provider *p =
                gw_conf_provider_find(c, m->provider, strlen(m->provider));
            struct gw_route_cand *k = &cand[n];

            if (!p || (!p->enabled && advance))
                continue;
            memset(k, 0, sizeof(*k));
            k->prov = p;
            k->model = m->model ? m->model : g->model ? g->model : g->name;
            k->model_len = strlen(k->model);
            k->weight = type == GW_GROUP_LOAD_BALANCE ? (m->weight ? m->weight : 1) : 1;
            midx[n++] = (unsigned)i;
        }
    } else {
        const struct gw_conf_provider *pv[GW_ROUTE_MAX];
        size_t np = gw_conf_candidates(c, rq->model, rq->model_len, pv, GW_ROUTE_MAX);

        if (np == 0)
            return GW_E_MODEL_NOT_FOUND;
        for (i = 0; i < np; i++) {
            memset(&cand[n], 0, sizeof(cand[n]));
            cand[n].prov = pv[i];
            cand[n].model = rq->model;
            cand[n].model_len = rq->model_len;
            cand[n].weight = 1;
            midx[n++] = (unsigned)i;
        }
    }

    /* ---- facts, states (no lock held: the callback and facts come first) ---- */
    for (i = 0; i < n; i++) {
        struct gw_route_cand *k = &cand[i];

        k->factor = 1.0;
        k->price = -1.0;
        facts_read(k->prov, rq->now_ms, &k->facts);
        if (!k->prov->enabled)
            k->state = GW_CAND_DISABLED;
        else if (k->facts.paused_until_ms)
            k->state = GW_CAND_PAUSED;
        else
            k->state = GW_CAND_OK;
        if (k->state == GW_CAND_OK && rq->sticky && !have_sticky &&
            strcmp(k->prov->name, rq->sticky) == 0) {
            /* The conversation's upstream leads; while it is merely full it still
             * leads (issue 4 waits for its slot), so its slot state is not asked. */
            k->sticky = true;
            have_sticky = true;
        } else if (k->state == GW_CAND_OK && rq->is_full && rq->is_full(rq->arg, k->prov)) {
            k->state = GW_CAND_FULL;
        }
        if (type == GW_GROUP_CHEAPEST)
            k->price = gw_conf_price_input(c, k->prov, k->model);
    }

    /* ---- policy ---- */
    for (i = 0; i < n; i++) {
        static const unsigned cls[] = {
            [GW_CAND_OK] = 0, [GW_CAND_FULL] = 1, [GW_CAND_PAUSED] = 2, [GW_CAND_DISABLED] = 3};

        rk[i].cls = cls[cand[i].state];
        rk[i].until = cand[i].state == GW_CAND_PAUSED ? cand[i].facts.paused_until_ms : 0;
        rk[i].lead = cand[i].sticky ? 0 : 1; /* the sticky member leads in every policy */
        rk[i].policy = (double)i;            /* file order */
        ord[i] = (unsigned)i;
    }
    switch (type) {
    case GW_GROUP_FALLBACK: break;
    case GW_GROUP_URL_TEST:
        for (i = 0; i < n; i++) {
            const struct gw_upfacts *f = &cand[i].facts;

            /* A figure sorts by value; without one, after all figures, in file order. */
            if (f->ttfc_median_ms >= 0)
                rk[i].policy = f->ttfc_median_ms;
            else if (f->link_ms >= 0)
                rk[i].policy = f->link_ms;
            else
                rk[i].policy = 1e12 + (double)i;
        }
        break;
    case GW_GROUP_CHEAPEST:
        for (i = 0; i < n; i++)
            rk[i].policy = cand[i].price >= 0 ? cand[i].price : 1e300;
        break;
    case GW_GROUP_LOAD_BALANCE: {
        /* Factors over every candidate that could serve (paused and full included). */
        int32_t mm = median_of_medians(cand, n);

        for (i = 0; i < n; i++) {
            cand[i].factor = gw_route_factor(g->balance_by, &cand[i].facts, mm);
            cand[i].eff_weight = eff_weight(cand[i].weight, cand[i].factor);
        }
        wrr_round(g->wrr, cand, midx, n, advance, rk);
        break;
    }
    }
    sort_order(ord, n, rk);

    for (i = 0; i < n; i++)
        out[i] = cand[ord[i]];
    res->n = n;
    res->pick = n > 0 && out[0].state != GW_CAND_DISABLED ? 0 : -1;
    return GW_OK;
}
