/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_route.c - the routing engine: smooth weighted round-robin
 * sequences (7:3, 1:1:1, nginx's 5:1:1), round state across reloads, balance_by factors
 * and clamps, paused and full members sitting the round out, stickiness (it leads, and
 * the long-run share still follows the weights), the dry-run agreeing with the next
 * charging call, url-test, cheapest, the implicit fallback group, member model
 * resolution, all-paused picks, and 4 threads charging one group (exact 7:3).
 * Configs come from gw_conf_parse; times are passed in; no sleeps.
 * See:     core/route.h, core/route.c, core/health.h
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/conf.h"
#include "core/health.h"
#include "core/route.h"

#define T0 1700000000000ull

#define HEAD "server: {listen: [\"127.0.0.1:8080\"]}\nproviders:\n"
/* A provider <n> serving the models <models> (a flow list), plus extra fields. */
#define PROV(n, models, extra)                                                                     \
    "  - {name: " n                                                                                \
    ", dialect: openai, base_url: \"http://h\", keys: [{value: v}], models: " models extra "}\n"
#define ABC PROV("a", "[m]", "") PROV("b", "[m]", "") PROV("c", "[m]", "")

/* ---- fixtures ---- */

static struct gw_conf *
load(const char *yaml)
{
    struct gw_conf_problems p;
    struct gw_conf *c = NULL;
    enum gw_code rc;

    memset(&p, 0, sizeof(p));
    rc = gw_conf_parse(yaml, strlen(yaml), NULL, NULL, &c, &p);
    if (rc != GW_OK) {
        char buf[256];
        size_t i;

        for (i = 0; i < p.n; i++) {
            gw_conf_problem_format(&p.v[i], buf, sizeof(buf));
            print_error("%s\n", buf);
        }
        gw_conf_problems_fini(&p);
        fail_msg("config refused:\n%s", yaml);
    }
    return c;
}

/* A parsed and attached config. */
static struct gw_conf *
load_attached(struct gw_routes *r, const char *yaml)
{
    struct gw_conf *c;

    assert_non_null(r); /* gw_routes_new() may fail under `make test-oom` */
    c = load(yaml);
    assert_int_equal(gw_routes_attach(r, c), GW_OK);
    return c;
}

static struct gw_upstate *
up(const struct gw_conf *c, const char *name)
{
    size_t i;

    for (i = 0; i < c->n_providers; i++)
        if (strcmp(c->providers[i].name, name) == 0)
            return c->providers[i].state;
    fail_msg("no provider %s", name);
    return NULL;
}

/* Slot state for the tests: the names listed in the NULL-terminated array <arg>. */
static bool
is_full_listed(void *arg, const struct gw_conf_provider *p)
{
    const char *const *v;

    for (v = arg; *v; v++)
        if (strcmp(*v, p->name) == 0)
            return true;
    return false;
}

struct call {
    const char *sticky;
    const char *const *full; /* NULL-terminated, or NULL */
    uint64_t now;
};

static enum gw_code
order(const struct gw_conf *c, const char *model, const struct call *k, bool advance,
      struct gw_route_cand *out, struct gw_route_result *res)
{
    struct gw_route_req rq;

    memset(&rq, 0, sizeof(rq));
    rq.model = model;
    rq.model_len = strlen(model);
    rq.now_ms = k ? k->now : T0;
    rq.sticky = k ? k->sticky : NULL;
    if (k && k->full) {
        rq.is_full = is_full_listed;
        rq.arg = (void *)(uintptr_t)k->full;
    }
    return gw_route_order(c, &rq, advance, out, res);
}

/* The name of the picked provider of one charging call ("-" when none). */
static const char *
pick(const struct gw_conf *c, const char *model, const struct call *k)
{
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;

    assert_int_equal(order(c, model, k, true, out, &res), GW_OK);
    return res.pick < 0 ? "-" : out[res.pick].prov->name;
}

/* <n> picks as a string of first letters. */
static void
picks(const struct gw_conf *c, const char *model, size_t n, char *buf)
{
    size_t i;

    for (i = 0; i < n; i++)
        buf[i] = pick(c, model, NULL)[0];
    buf[n] = '\0';
}

/* The order of one call as a string of first letters. */
static void
order_str(const struct gw_conf *c, const char *model, const struct call *k, bool advance, char *buf)
{
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;
    size_t i;

    assert_int_equal(order(c, model, k, advance, out, &res), GW_OK);
    for (i = 0; i < res.n; i++)
        buf[i] = out[i].prov->name[0];
    buf[res.n] = '\0';
}

#define LB(weights) HEAD ABC "groups:\n  - {name: g, type: load-balance, providers: " weights "}\n"

/* ---- smooth weighted round-robin ---- */

static void
test_route_lb_7_3_interleaves_in_nginx_order(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, LB("[{name: a, weight: 7}, {name: b, weight: 3}]"));
    char seq[32];

    (void)state;
    picks(c, "g", 20, seq);
    assert_string_equal(seq, "abaaabaaba"
                             "abaaabaaba");
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_lb_equal_weights_cycle(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, LB("[a, b, c]"));
    char seq[16];

    (void)state;
    picks(c, "g", 9, seq);
    assert_string_equal(seq, "abcabcabc");
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_lb_5_1_1_matches_the_nginx_example(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c =
        load_attached(r, LB("[{name: a, weight: 5}, {name: b, weight: 1}, {name: c, weight: 1}]"));
    char seq[16];

    (void)state;
    picks(c, "g", 14, seq);
    assert_string_equal(seq, "aabacaa"
                             "aabacaa");
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_lb_round_starts_over_when_weights_change(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c1 = load_attached(r, LB("[{name: a, weight: 7}, {name: b, weight: 3}]"));
    struct gw_conf *c2;
    char seq[16];

    (void)state;
    picks(c1, "g", 1, seq); /* a; the next would be b */
    c2 = load_attached(r, LB("[{name: a, weight: 7}, {name: b, weight: 4}]"));
    assert_ptr_equal(c1->groups[0].wrr, c2->groups[0].wrr); /* same state, zeroed */
    picks(c2, "g", 11, seq);
    assert_string_equal(seq, "abaababaaba"); /* 7:4 from the start */
    gw_conf_free(c1);
    gw_conf_free(c2);
    gw_routes_free(r);
}

static void
test_route_lb_round_starts_over_when_members_change(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c1 = load_attached(r, LB("[a, b]"));
    struct gw_conf *c2;
    char seq[16];

    (void)state;
    picks(c1, "g", 1, seq); /* a; the next would be b */
    c2 = load_attached(r, LB("[a, c]"));
    picks(c2, "g", 4, seq);
    assert_string_equal(seq, "acac");
    gw_conf_free(c1);
    gw_conf_free(c2);
    gw_routes_free(r);
}

static void
test_route_lb_round_survives_an_unchanged_reload(void **state)
{
    static const char yaml[] = LB("[{name: a, weight: 7}, {name: b, weight: 3}]");
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c1 = load_attached(r, yaml);
    struct gw_conf *c2;
    char seq[16];

    (void)state;
    picks(c1, "g", 1, seq);
    c2 = load_attached(r, yaml);
    picks(c2, "g", 9, seq);
    assert_string_equal(seq, "baaabaaba"); /* the rest of the first cycle */
    gw_conf_free(c1);
    gw_conf_free(c2);
    gw_routes_free(r);
}

/* ---- balance_by factors ---- */

static struct gw_upfacts
facts_of(int32_t median, double rate)
{
    struct gw_upfacts f;

    memset(&f, 0, sizeof(f));
    f.ttfc_median_ms = median;
    f.success_rate = rate;
    f.link_ms = -1;
    return f;
}

static void
test_route_factor_latency_is_squared_ratio_clamped(void **state)
{
    struct gw_upfacts f;

    (void)state;
    f = facts_of(100, -1);
    assert_float_equal(gw_route_factor(GW_BALANCE_LATENCY, &f, 200), 4.0, 1e-12);
    f = facts_of(400, -1);
    assert_float_equal(gw_route_factor(GW_BALANCE_LATENCY, &f, 200), 0.25, 1e-12);
    f = facts_of(10, -1); /* (200/10)^2 = 400 -> 10 */
    assert_float_equal(gw_route_factor(GW_BALANCE_LATENCY, &f, 200), 10.0, 1e-12);
    f = facts_of(0, -1);
    assert_float_equal(gw_route_factor(GW_BALANCE_LATENCY, &f, 200), 10.0, 1e-12);
    f = facts_of(2000, -1); /* (200/2000)^2 = 0.01 -> 0.1 */
    assert_float_equal(gw_route_factor(GW_BALANCE_LATENCY, &f, 200), 0.1, 1e-12);
}

static void
test_route_factor_health_is_squared_rate_floored(void **state)
{
    struct gw_upfacts f;

    (void)state;
    f = facts_of(-1, 0.5);
    assert_float_equal(gw_route_factor(GW_BALANCE_HEALTH, &f, -1), 0.25, 1e-12);
    f = facts_of(-1, 0.1); /* 0.01 -> 0.05 */
    assert_float_equal(gw_route_factor(GW_BALANCE_HEALTH, &f, -1), 0.05, 1e-12);
    f = facts_of(-1, 0.0);
    assert_float_equal(gw_route_factor(GW_BALANCE_HEALTH, &f, -1), 0.05, 1e-12);
}

static void
test_route_factor_latency_health_is_the_product(void **state)
{
    struct gw_upfacts f = facts_of(100, 0.5);

    (void)state;
    assert_float_equal(gw_route_factor(GW_BALANCE_LATENCY_HEALTH, &f, 200), 1.0, 1e-12);
    f = facts_of(2000, 0.1);
    assert_float_equal(gw_route_factor(GW_BALANCE_LATENCY_HEALTH, &f, 200), 0.005, 1e-12);
    /* weights ignores the facts */
    assert_float_equal(gw_route_factor(GW_BALANCE_WEIGHTS, &f, 200), 1.0, 1e-12);
}

static void
test_route_factor_without_enough_samples_is_one(void **state)
{
    struct gw_upfacts f = facts_of(-1, -1);

    (void)state;
    f.link_ms = 5; /* a link seed is never a latency figure for balance_by */
    assert_float_equal(gw_route_factor(GW_BALANCE_LATENCY, &f, 200), 1.0, 1e-12);
    assert_float_equal(gw_route_factor(GW_BALANCE_HEALTH, &f, 200), 1.0, 1e-12);
    assert_float_equal(gw_route_factor(GW_BALANCE_LATENCY_HEALTH, &f, 200), 1.0, 1e-12);
    f = facts_of(100, -1); /* nobody has a median */
    assert_float_equal(gw_route_factor(GW_BALANCE_LATENCY, &f, -1), 1.0, 1e-12);
    f = facts_of(-1, 0.5); /* health known, latency not */
    assert_float_equal(gw_route_factor(GW_BALANCE_LATENCY_HEALTH, &f, 200), 0.25, 1e-12);
}

static void
samples(struct gw_upstate *u, uint32_t ms)
{
    int i;

    for (i = 0; i < 3; i++)
        gw_upstate_sample(u, T0, ms);
}

/* The candidate for provider <name> in <out>. */
static const struct gw_route_cand *
cand_of(const struct gw_route_cand *out, const struct gw_route_result *res, const char *name)
{
    size_t i;

    for (i = 0; i < res->n; i++)
        if (strcmp(out[i].prov->name, name) == 0)
            return &out[i];
    fail_msg("no candidate %s", name);
    return NULL;
}

static void
test_route_lb_median_of_medians_skips_link_seeds(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c =
        load_attached(r, HEAD ABC "groups:\n  - {name: g, type: load-balance, balance_by: latency, "
                                  "providers: [a, {name: b, weight: 2}, c]}\n");
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;

    (void)state;
    samples(up(c, "a"), 100);
    gw_upstate_link_seed(up(c, "b"), 10); /* seed only: neither a median nor a factor */
    samples(up(c, "c"), 400);
    assert_int_equal(order(c, "g", NULL, false, out, &res), GW_OK);
    /* median of medians = (100 + 400) / 2 = 250 */
    assert_float_equal(cand_of(out, &res, "a")->factor, 6.25, 1e-9);
    assert_int_equal(cand_of(out, &res, "a")->eff_weight, 6250);
    assert_float_equal(cand_of(out, &res, "b")->factor, 1.0, 1e-12);
    assert_int_equal(cand_of(out, &res, "b")->eff_weight, 2000);
    assert_int_equal(cand_of(out, &res, "b")->weight, 2);
    assert_float_equal(cand_of(out, &res, "c")->factor, 0.390625, 1e-9);
    assert_int_equal(cand_of(out, &res, "c")->eff_weight, 391);
    gw_conf_free(c);
    gw_routes_free(r);
}

#define LB_LAT                                                                                     \
    HEAD ABC                                                                                       \
        "groups:\n  - {name: g, type: load-balance, balance_by: latency, providers: [a, b, c]}\n"

/* a 100 ms, b 200 ms, c 400 ms: median 200, factors 4, 1, 0.25 -> eff 4000:1000:250. */
static struct gw_conf *
lat_group(struct gw_routes *r)
{
    struct gw_conf *c = load_attached(r, LB_LAT);

    samples(up(c, "a"), 100);
    samples(up(c, "b"), 200);
    samples(up(c, "c"), 400);
    return c;
}

static void
test_route_lb_paused_member_sits_out_but_counts_for_factors(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = lat_group(r);
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;
    unsigned n_a = 0, n_c = 0, i;

    (void)state;
    gw_upstate_failure(up(c, "b"), T0, c, 3600000); /* paused for an hour */
    assert_int_equal(order(c, "g", NULL, false, out, &res), GW_OK);
    assert_int_equal(res.n, 3);
    assert_int_equal(out[2].state, GW_CAND_PAUSED);
    assert_string_equal(out[2].prov->name, "b");
    /* b's median still counts: without it the median would be 250 and a's factor 6.25 */
    assert_float_equal(cand_of(out, &res, "a")->factor, 4.0, 1e-9);
    assert_float_equal(cand_of(out, &res, "c")->factor, 0.25, 1e-9);
    for (i = 0; i < 17; i++) {
        const char *p = pick(c, "g", NULL);

        n_a += p[0] == 'a';
        n_c += p[0] == 'c';
    }
    assert_int_equal(n_a, 16); /* 4000:250 over one full cycle */
    assert_int_equal(n_c, 1);
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_lb_full_member_sits_out_and_is_not_charged(void **state)
{
    static const char *const full_b[] = {"b", NULL};
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, LB("[a, b, c]"));
    struct call k = {NULL, full_b, T0};
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;
    char seq[16];
    int i;

    (void)state;
    assert_int_equal(order(c, "g", &k, false, out, &res), GW_OK);
    assert_int_equal(out[2].state, GW_CAND_FULL);
    assert_string_equal(out[2].prov->name, "b");
    for (i = 0; i < 4; i++)
        seq[i] = pick(c, "g", &k)[0];
    seq[4] = '\0';
    assert_string_equal(seq, "acac");
    /* b's current weight was left at 0: with its slot free it takes its turn in a
     * 1:1:1 round that starts from a and c at 0 again */
    picks(c, "g", 3, seq);
    assert_string_equal(seq, "abc");
    gw_conf_free(c);
    gw_routes_free(r);
}

/* ---- stickiness ---- */

static void
test_route_lb_sticky_share_keeps_the_weights(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, LB("[{name: a, weight: 7}, {name: b, weight: 3}]"));
    unsigned long rng = 12345;
    unsigned n_a = 0, n_b = 0, n_sticky = 0, i;

    (void)state;
    for (i = 0; i < 10000; i++) {
        struct call k = {NULL, NULL, T0};
        const char *p;

        rng = rng * 6364136223846793005ul + 1442695040888963407ul;
        if ((rng >> 33) % 10 < 3) { /* 30% of requests stick to a random member */
            k.sticky = (rng >> 20) & 1 ? "a" : "b";
            n_sticky++;
        }
        p = pick(c, "g", &k);
        if (k.sticky)
            assert_string_equal(p, k.sticky);
        n_a += p[0] == 'a';
        n_b += p[0] == 'b';
    }
    assert_true(n_sticky > 2500);
    /* the sticky picks are charged in rounds they joined, so the other picks make up
     * for them (charging without joining, or not charging, ends near 6400) */
    assert_in_range(n_a, 6990, 7010); /* within 0.1% */
    assert_int_equal(n_a + n_b, 10000);
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_sticky_member_leads_in_every_policy(void **state)
{
    static const char *const types[] = {"fallback", "url-test", "cheapest", "load-balance"};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        char yaml[512], buf[8];
        struct gw_routes *r = gw_routes_new();
        struct gw_conf *c;
        struct call k = {"c", NULL, T0};

        snprintf(yaml, sizeof(yaml),
                 HEAD ABC "groups:\n  - {name: g, type: %s, providers: [a, b, c]}\n", types[i]);
        c = load_attached(r, yaml);
        order_str(c, "g", &k, true, buf);
        assert_int_equal(buf[0], 'c');
        assert_int_equal(strlen(buf), 3);
        gw_conf_free(c);
        gw_routes_free(r);
    }
}

static void
test_route_sticky_paused_member_does_not_lead(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, HEAD ABC "groups:\n  - {name: g, providers: [a, b, c]}\n");
    struct call k = {"b", NULL, T0};
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;

    (void)state;
    gw_upstate_failure(up(c, "b"), T0, c, 60000);
    assert_int_equal(order(c, "g", &k, true, out, &res), GW_OK);
    assert_string_equal(out[0].prov->name, "a");
    assert_string_equal(out[2].prov->name, "b");
    assert_false(out[2].sticky);
    assert_int_equal(out[2].state, GW_CAND_PAUSED);
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_sticky_full_member_still_leads(void **state)
{
    static const char *const full_b[] = {"b", NULL};
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, LB("[{name: a, weight: 9}, b]"));
    struct call k = {"b", full_b, T0};
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;

    (void)state;
    assert_int_equal(order(c, "g", &k, true, out, &res), GW_OK);
    assert_int_equal(res.pick, 0);
    assert_string_equal(out[0].prov->name, "b");
    assert_true(out[0].sticky);
    assert_int_equal(out[0].state, GW_CAND_OK);
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_sticky_outside_the_candidates_is_ignored(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(
        r, HEAD ABC PROV("d", "[m]", "") "groups:\n  - {name: g, providers: [a, b]}\n");
    struct call k = {"d", NULL, T0};
    char buf[8];

    (void)state;
    order_str(c, "g", &k, true, buf);
    assert_string_equal(buf, "ab");
    gw_conf_free(c);
    gw_routes_free(r);
}

/* ---- dry-run ---- */

static void
test_route_dry_run_answers_the_next_call_and_changes_nothing(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c =
        load_attached(r, LB("[{name: a, weight: 5}, {name: b, weight: 1}, {name: c, weight: 1}]"));
    char dry1[8], dry2[8], real[8], seq[16];
    int i;

    (void)state;
    for (i = 0; i < 7; i++) {
        order_str(c, "g", NULL, false, dry1);
        order_str(c, "g", NULL, false, dry2);
        order_str(c, "g", NULL, true, real);
        assert_string_equal(dry1, real);
        assert_string_equal(dry2, real);
        seq[i] = real[0];
    }
    seq[7] = '\0';
    assert_string_equal(seq, "aabacaa"); /* the dry-runs did not move the round */
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_dry_run_lists_disabled_members_last(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c =
        load_attached(r, HEAD PROV("a", "[m]", ", enabled: false") PROV("b", "[m]", "")
                             PROV("c", "[m]", "") "groups:\n  - {name: g, providers: [a, b, c]}\n");
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;
    char buf[8];

    (void)state;
    assert_non_null(c->providers[0].state); /* attached although disabled */
    order_str(c, "g", NULL, true, buf);
    assert_string_equal(buf, "bc");
    assert_int_equal(order(c, "g", NULL, false, out, &res), GW_OK);
    assert_int_equal(res.n, 3);
    assert_string_equal(out[2].prov->name, "a");
    assert_int_equal(out[2].state, GW_CAND_DISABLED);
    assert_int_equal(res.pick, 0);
    gw_conf_free(c);
    gw_routes_free(r);
}

/* ---- url-test, cheapest, fallback ---- */

static void
test_route_url_test_uses_seeds_until_three_samples(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(
        r, HEAD ABC PROV("d", "[m]",
                         "") "groups:\n  - {name: g, type: url-test, providers: [a, b, c, d]}\n");
    char buf[8];

    (void)state;
    order_str(c, "g", NULL, true, buf);
    assert_string_equal(buf, "abcd"); /* no figures: file order */
    gw_upstate_link_seed(up(c, "a"), 50);
    gw_upstate_link_seed(up(c, "c"), 20);
    order_str(c, "g", NULL, true, buf);
    assert_string_equal(buf, "cabd"); /* seeds first, fastest first; the rest in file order */
    samples(up(c, "a"), 10);
    gw_upstate_sample(up(c, "c"), T0, 5);
    gw_upstate_sample(up(c, "c"), T0, 5); /* two real samples: c keeps its seed */
    order_str(c, "g", NULL, true, buf);
    assert_string_equal(buf, "acbd");
    gw_upstate_sample(up(c, "c"), T0, 5);
    samples(up(c, "d"), 30);
    order_str(c, "g", NULL, true, buf);
    assert_string_equal(buf, "cadb");
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_cheapest_orders_by_price_unknown_last(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(
        r, HEAD PROV("a", "[m]", ", model_specs: {m: {input: 3.0}}") PROV("b", "[m]", "")
               PROV("c", "[m]", ", model_specs: {m: {input: 1.0}}") PROV("d", "[m]", "")
                   PROV("e", "[m]", ", model_specs: {m: {input: 1.0}}")
                       PROV("f", "[m]",
                            ", billing: free") "groups:\n  - {name: g, type: cheapest, model: m, "
                                               "providers: [a, b, c, d, e, f]}\n");
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;
    char buf[8];

    (void)state;
    order_str(c, "g", NULL, true, buf);
    assert_string_equal(buf, "fceabd");
    assert_int_equal(order(c, "g", NULL, true, out, &res), GW_OK);
    assert_float_equal(out[0].price, 0.0, 1e-12);
    assert_float_equal(out[1].price, 1.0, 1e-12);
    assert_true(out[4].price < 0);
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_fallback_group_keeps_file_order(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, HEAD ABC "groups:\n  - {name: g, providers: [c, a, b]}\n");
    char buf[8];

    (void)state;
    order_str(c, "g", NULL, true, buf);
    assert_string_equal(buf, "cab");
    order_str(c, "g", NULL, true, buf); /* nothing rotates */
    assert_string_equal(buf, "cab");
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_implicit_group_is_enabled_providers_listing_the_model(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, HEAD PROV("a", "[m]", "") PROV("b", "[\"*\"]", "")
                                             PROV("c", "[m]", ", enabled: false")
                                                 PROV("d", "[x]", "") PROV("e", "[m, x]", ""));
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;
    char buf[8];

    (void)state;
    order_str(c, "m", NULL, true, buf);
    assert_string_equal(buf, "abe");
    order_str(c, "m", NULL, false, buf); /* not even the dry-run lists c */
    assert_string_equal(buf, "abe");
    order_str(c, "zzz", NULL, true, buf);
    assert_string_equal(buf, "b");
    assert_int_equal(order(c, "m", NULL, true, out, &res), GW_OK);
    assert_null(res.group);
    assert_int_equal(out[0].model_len, 1);
    assert_memory_equal(out[0].model, "m", 1);
    assert_int_equal(out[0].weight, 1);
    assert_float_equal(out[0].factor, 1.0, 1e-12);
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_unknown_model_is_not_found(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, HEAD ABC PROV("d", "[z]", ", enabled: false"));
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;

    (void)state;
    assert_int_equal(order(c, "nope", NULL, true, out, &res), GW_E_MODEL_NOT_FOUND);
    assert_int_equal(res.n, 0);
    assert_int_equal(res.pick, -1);
    /* only a disabled provider lists it */
    assert_int_equal(order(c, "z", NULL, true, out, &res), GW_E_MODEL_NOT_FOUND);
    assert_int_equal(order(c, "z", NULL, false, out, &res), GW_E_MODEL_NOT_FOUND);
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_member_model_then_group_model_then_asked_name(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c =
        load_attached(r, HEAD ABC "groups:\n"
                                  "  - {name: g, model: gm, providers: [{name: a, model: am}, b]}\n"
                                  "  - {name: h, providers: [{name: c, model: cm}, a]}\n");
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;

    (void)state;
    assert_int_equal(order(c, "g", NULL, true, out, &res), GW_OK);
    assert_ptr_equal(res.group, &c->groups[0]);
    assert_string_equal(out[0].model, "am");
    assert_int_equal(out[0].model_len, 2);
    assert_string_equal(out[1].model, "gm");
    assert_int_equal(order(c, "h", NULL, true, out, &res), GW_OK);
    assert_string_equal(out[0].model, "cm");
    assert_string_equal(out[1].model, "h");
    assert_int_equal(out[1].model_len, 1);
    gw_conf_free(c);
    gw_routes_free(r);
}

/* ---- paused and full ---- */

static void
test_route_all_paused_picks_the_pause_ending_first(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, HEAD ABC "groups:\n  - {name: g, providers: [a, b, c]}\n");
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;
    struct call k = {NULL, NULL, T0 + 1000};

    (void)state;
    gw_upstate_failure(up(c, "a"), T0, c, 300000);
    gw_upstate_failure(up(c, "b"), T0, c, 90000);
    gw_upstate_failure(up(c, "c"), T0, c, 120000);
    assert_int_equal(order(c, "g", &k, true, out, &res), GW_OK);
    assert_int_equal(res.n, 3);
    assert_int_equal(res.pick, 0);
    assert_string_equal(out[0].prov->name, "b");
    assert_string_equal(out[1].prov->name, "c");
    assert_string_equal(out[2].prov->name, "a");
    assert_int_equal(out[0].state, GW_CAND_PAUSED);
    assert_int_equal(out[0].facts.paused_until_ms, T0 + 90000);
    /* once b's pause is over it is OK again and leads */
    k.now = T0 + 90000;
    assert_int_equal(order(c, "g", &k, true, out, &res), GW_OK);
    assert_int_equal(out[0].state, GW_CAND_OK);
    assert_int_equal(out[0].facts.paused_until_ms, 0);
    assert_string_equal(out[0].prov->name, "b");
    gw_conf_free(c);
    gw_routes_free(r);
}

static void
test_route_ok_then_full_then_paused(void **state)
{
    static const char *const full_c[] = {"c", NULL};
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, HEAD ABC "groups:\n  - {name: g, providers: [a, b, c]}\n");
    struct call k = {NULL, full_c, T0};
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;
    char buf[8];

    (void)state;
    gw_upstate_failure(up(c, "a"), T0, c, 60000);
    order_str(c, "g", &k, true, buf);
    assert_string_equal(buf, "bca");
    /* nothing OK: the full one is the pick (issue 4 waits for its slot) */
    gw_upstate_failure(up(c, "b"), T0, c, 60000);
    assert_int_equal(order(c, "g", &k, true, out, &res), GW_OK);
    assert_int_equal(res.pick, 0);
    assert_string_equal(out[0].prov->name, "c");
    assert_int_equal(out[0].state, GW_CAND_FULL);
    gw_conf_free(c);
    gw_routes_free(r);
}

/* ---- threads ---- */

#define THREADS 4
#define PER_THREAD 100000

struct worker {
    const struct gw_conf *c;
    unsigned long n_a, n_b;
};

static void *
worker_main(void *arg)
{
    struct worker *w = arg;
    struct gw_route_cand out[GW_ROUTE_MAX];
    struct gw_route_result res;
    struct gw_route_req rq;
    int i;

    memset(&rq, 0, sizeof(rq));
    rq.model = "g";
    rq.model_len = 1;
    rq.now_ms = T0;
    for (i = 0; i < PER_THREAD; i++) {
        if (gw_route_order(w->c, &rq, true, out, &res) != GW_OK || res.pick < 0)
            return NULL;
        if (out[res.pick].prov->name[0] == 'a')
            w->n_a++;
        else
            w->n_b++;
        /* Record on the shared upstates too (what workers do after each hop), so TSan
         * sees the upstate lock under contention. Neither changes a weights-only
         * order: no failures, so nothing pauses. */
        gw_upstate_success(out[res.pick].prov->state, T0);
        gw_upstate_sample(out[res.pick].prov->state, T0, (uint32_t)(i % 500));
    }
    return w;
}

static void
test_route_lb_threads_charge_exactly_7_3(void **state)
{
    struct gw_routes *r = gw_routes_new();
    struct gw_conf *c = load_attached(r, LB("[{name: a, weight: 7}, {name: b, weight: 3}]"));
    pthread_t th[THREADS];
    void *ret[THREADS];
    struct worker w[THREADS];
    unsigned long n_a = 0, n_b = 0;
    int i;

    (void)state;
    memset(w, 0, sizeof(w));
    for (i = 0; i < THREADS; i++) {
        w[i].c = c;
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    /* every thread joined before an assertion can leave the test (its w[] with it) */
    for (i = 0; i < THREADS; i++)
        assert_int_equal(pthread_join(th[i], &ret[i]), 0);
    for (i = 0; i < THREADS; i++) {
        assert_non_null(ret[i]);
        n_a += w[i].n_a;
        n_b += w[i].n_b;
    }
    assert_int_equal(n_a, THREADS * PER_THREAD / 10 * 7);
    assert_int_equal(n_b, THREADS * PER_THREAD / 10 * 3);
    gw_conf_free(c);
    gw_routes_free(r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_lb_7_3_interleaves_in_nginx_order),
        cmocka_unit_test(test_route_lb_equal_weights_cycle),
        cmocka_unit_test(test_route_lb_5_1_1_matches_the_nginx_example),
        cmocka_unit_test(test_route_lb_round_starts_over_when_weights_change),
        cmocka_unit_test(test_route_lb_round_starts_over_when_members_change),
        cmocka_unit_test(test_route_lb_round_survives_an_unchanged_reload),
        cmocka_unit_test(test_route_factor_latency_is_squared_ratio_clamped),
        cmocka_unit_test(test_route_factor_health_is_squared_rate_floored),
        cmocka_unit_test(test_route_factor_latency_health_is_the_product),
        cmocka_unit_test(test_route_factor_without_enough_samples_is_one),
        cmocka_unit_test(test_route_lb_median_of_medians_skips_link_seeds),
        cmocka_unit_test(test_route_lb_paused_member_sits_out_but_counts_for_factors),
        cmocka_unit_test(test_route_lb_full_member_sits_out_and_is_not_charged),
        cmocka_unit_test(test_route_lb_sticky_share_keeps_the_weights),
        cmocka_unit_test(test_route_sticky_member_leads_in_every_policy),
        cmocka_unit_test(test_route_sticky_paused_member_does_not_lead),
        cmocka_unit_test(test_route_sticky_full_member_still_leads),
        cmocka_unit_test(test_route_sticky_outside_the_candidates_is_ignored),
        cmocka_unit_test(test_route_dry_run_answers_the_next_call_and_changes_nothing),
        cmocka_unit_test(test_route_dry_run_lists_disabled_members_last),
        cmocka_unit_test(test_route_url_test_uses_seeds_until_three_samples),
        cmocka_unit_test(test_route_cheapest_orders_by_price_unknown_last),
        cmocka_unit_test(test_route_fallback_group_keeps_file_order),
        cmocka_unit_test(test_route_implicit_group_is_enabled_providers_listing_the_model),
        cmocka_unit_test(test_route_unknown_model_is_not_found),
        cmocka_unit_test(test_route_member_model_then_group_model_then_asked_name),
        cmocka_unit_test(test_route_all_paused_picks_the_pause_ending_first),
        cmocka_unit_test(test_route_ok_then_full_then_paused),
        cmocka_unit_test(test_route_lb_threads_charge_exactly_7_3),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
