/* SPDX-License-Identifier: MIT
 * core/route.h - the routing engine (DESIGN.md 3 groups, 5): resolves the model a
 * client asked for to its candidates and orders them: fallback (file order), url-test
 * (median time to first content, link-test seed until 3 samples), cheapest (price of
 * the asked model), load-balance (nginx's smooth weighted round-robin over effective
 * weights max(1, round(weight * factor * 1000)), factor from balance_by).
 * One function, gw_route_order, serves the data plane (advance = true: charges the
 * round) and the control plane's dry-run (advance = false: same answer, no change).
 * Pure: the caller passes the time and a callback for the slot state.
 * Owns:    the registry owns every group's round state (gw_wrr), kept across reloads
 *          and started over when a group's members or weights change.
 * Threads: gw_route_order on any worker or the control thread; a spinlock per group
 *          is held from ordering to charging, for a few instructions, never across an
 *          allocation or a callback. Registry calls on main only.
 * See:     core/route.c, core/health.h, tests/unit/core/test_route.c
 */
#ifndef GW_CORE_ROUTE_H
#define GW_CORE_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/conf.h"
#include "core/health.h"

#define GW_ROUTE_MAX 16 /* candidates considered for one request */

struct gw_routes; /* registry: group name -> round state, and provider -> upstate */

enum gw_cand_state {
    GW_CAND_OK = 0,
    GW_CAND_PAUSED,   /* paused until facts.paused_until_ms: sits the round out */
    GW_CAND_FULL,     /* all slots taken right now (issue 4): sits the round out */
    GW_CAND_DISABLED, /* enabled: false (listed by dry-run only; never tried) */
};

struct gw_route_cand {
    const struct gw_conf_provider *prov;
    const char *model;   /* what this member is asked for (member, group or asked) */
    size_t model_len;    /* bytes of <model>: when it is the asked name (implicit
                          * group) it is the caller's rq->model, which need not be
                          * NUL-terminated; from the config it is terminated */
    unsigned weight;     /* as configured (1 outside load-balance) */
    double factor;       /* balance_by factor, 1.0 when not load-balance */
    unsigned eff_weight; /* max(1, round(weight * factor * 1000)); 0 outside lb */
    double price;        /* USD per 1M input tokens for cheapest; < 0 unknown */
    enum gw_cand_state state;
    struct gw_upfacts facts;
    bool sticky; /* the conversation's upstream, put first */
};

struct gw_route_req {
    const char *model; /* as asked by the client */
    size_t model_len;
    uint64_t now_ms;
    /* The conversation's upstream (provider name) or NULL; honoured when that member
     * is a candidate and not paused. */
    const char *sticky;
    /* Slot state (issue 4): true when provider <p> has no free slot now; NULL = never. */
    bool (*is_full)(void *arg, const struct gw_conf_provider *p);
    void *arg;
};

struct gw_route_result {
    const struct gw_conf_group *group; /* NULL: the implicit fallback over providers */
    size_t n;                          /* candidates in out[], in the order to try */
    /* The pick: index in out[] of the first candidate in state OK, or, when every
     * candidate is paused, the one whose pause ends first; -1 when none.
     * When none is OK but some are full, the first full one (issue 4 waits for its
     * slot): the pick is always out[0] unless out[] is empty or holds only disabled
     * members. */
    int pick;
};

/* ---- registry (main thread) ---- */

/* A new registry with its own upstate registry; NULL when out of memory. */
struct gw_routes *gw_routes_new(void);
/* Frees every round state and upstate. At exit, when no thread uses them any more. */
void gw_routes_free(struct gw_routes *r);
/* The upstate registry inside <r> (owned by <r>), for the startup link test and views
 * that look up a provider not in the current config. Main only. */
struct gw_upstates *gw_routes_upstates(struct gw_routes *r);
/* Points every provider of <c> at its upstate and every group at its round state,
 * creating what is new; a group whose members or weights differ from the state's
 * starts over. Call before publishing <c>. GW_E_NOMEM when out of memory. */
enum gw_code gw_routes_attach(struct gw_routes *r, struct gw_conf *c);

/* ---- ordering (any thread) ---- */

/* Resolves <rq>->model in <c> (a group of that name, else the enabled providers that
 * list the model, in file order, as a fallback group) and fills <out> (room for
 * GW_ROUTE_MAX) in the order the data plane tries them: candidates in state OK first,
 * in the policy's order (the sticky one first when it qualifies), then paused and full
 * ones by the end of their pause; disabled members are listed only when <advance> is
 * false (dry-run), last. With <advance> a load-balance group charges the leader, which
 * joins the round it is charged in, so a weight is the long-run share of requests.
 * Returns GW_OK, or GW_E_MODEL_NOT_FOUND when the model resolves to nothing.
 * Details: full candidates come before paused ones (a full one sorts as a pause
 * ending at 0), full ones in policy order, paused ones by pause end then policy order.
 * The sticky member qualifies when it is a candidate, enabled and not paused; it leads
 * even while full (its slot state is not asked: issue 4 waits for it) and is then in
 * state OK. The implicit group never lists disabled providers. A group of only disabled
 * or unknown members returns GW_OK with pick -1. Only the first GW_ROUTE_MAX members
 * of a group are considered. price is filled for cheapest groups only (else -1);
 * factor/eff_weight for load-balance only. <is_full> is called at most once per
 * candidate, before any lock is taken. */
enum gw_code gw_route_order(const struct gw_conf *c, const struct gw_route_req *rq, bool advance,
                            struct gw_route_cand *out, struct gw_route_result *res);

/* The balance_by factor of one member, from its facts and the median of the members'
 * TTFC medians (<median_of_medians_ms>, -1 when none): latency (median/own)^2 clamped to
 * [0.1, 10], health success_rate^2 floored at 0.05, latency-health their product; 1.0
 * for a measure without enough real samples. Exposed for tests and the views. */
double gw_route_factor(enum gw_balance_by by, const struct gw_upfacts *f,
                       int32_t median_of_medians_ms);

#endif
