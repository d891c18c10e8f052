/* SPDX-License-Identifier: MIT
 * net/metrics.c - see net/metrics.h. The request series live in one core/metrics.h table
 * per worker, indexed by worker id in a static array: the worker creates its table on its
 * first request and publishes the pointer (release); a scrape sums every published table
 * into a table of its own (gw_metrics_add), so the data path shares no counter, lock or
 * cache line with another thread. The live gauges are read the way the overview reads
 * them (gw_upstate_facts, gw_slots_stats, gw_keylimits_view), at scrape time.
 * Owns:    the per-worker tables (never freed: a scrape may read them until exit; they
 *          stay reachable from the array), the reload counters.
 * Threads: see net/metrics.h.
 * See:     net/metrics.h, core/metrics.h, docs/metrics.md
 */
#include "net/metrics.h"

#include <stdint.h>
#include <stdio.h>

#include "core/conf.h"
#include "core/health.h"
#include "core/limits.h"
#include "core/metrics.h"
#include "core/slots.h"
#include "net/calendar.h"
#include "net/logger.h"
#include "net/quota.h"
#include "net/reload.h"
#include "store/store.h"

static struct gw_metrics *worker_tables[NET_METRICS_MAX_WORKERS];

/* Worker <worker>'s table, created on its first use; NULL when out of memory. */
static struct gw_metrics *
table_of(unsigned worker)
{
    struct gw_metrics *m;

    if (worker >= NET_METRICS_MAX_WORKERS)
        return NULL;
    /* Relaxed: only this worker ever stores its slot. */
    m = __atomic_load_n(&worker_tables[worker], __ATOMIC_RELAXED);
    if (!m) {
        m = gw_metrics_new();
        if (!m)
            return NULL;
        /* Release: the scrape sees the table initialised. */
        __atomic_store_n(&worker_tables[worker], m, __ATOMIC_RELEASE);
    }
    return m;
}

void
net_metrics_count(unsigned worker, const struct gw_row *r)
{
    struct gw_metrics *m = table_of(worker);

    if (m)
        gw_metrics_count_row(m, r);
}

void
net_metrics_refused(unsigned worker, int status, enum gw_code code)
{
    struct gw_metrics *m = table_of(worker);

    if (m)
        gw_metrics_count_refusal(m, status > 0 ? (unsigned)status : 0, code);
}

/* ---- rendering ---- */

/* `name{label="value"} ` with <value> escaped, ready for the number. */
static bool
series_start(struct gw_buf *b, const char *name, const char *label, const char *value)
{
    return gw_buf_printf(b, "%s{%s=\"", name, label) == GW_OK &&
           gw_metrics_append_label(b, gw_str_c(value)) == GW_OK &&
           gw_buf_append(b, "\"} ", 3) == GW_OK;
}

static bool
family(struct gw_buf *b, const char *name, const char *type, const char *help)
{
    return gw_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type) == GW_OK;
}

enum upstream_gauge { UG_PAUSED, UG_FAILURES, UG_IN_FLIGHT, UG_WAITING, UG_SLOTS, UG__COUNT };

static const struct {
    const char *name, *help;
} upstream_gauges[UG__COUNT] = {
    [UG_PAUSED] = {"gw_upstream_paused", "1 while the upstream is paused after failures."},
    [UG_FAILURES] = {"gw_upstream_consecutive_failures",
                     "Failures of the upstream since its last success or pause."},
    [UG_IN_FLIGHT] = {"gw_upstream_in_flight", "Requests holding one of the upstream's slots."},
    [UG_WAITING] = {"gw_upstream_waiting", "Requests waiting for one of the upstream's slots."},
    [UG_SLOTS] = {"gw_upstream_slots", "The upstream's max_concurrent; 0 = unlimited."},
};

static bool
render_upstreams(struct gw_buf *b, const struct gw_conf *conf, uint64_t now_ms)
{
    unsigned g;
    size_t i;
    bool ok = true;

    for (g = 0; g < UG__COUNT && ok; g++) {
        ok = family(b, upstream_gauges[g].name, "gauge", upstream_gauges[g].help);
        for (i = 0; conf && i < conf->n_providers && ok; i++) {
            const struct gw_conf_provider *p = &conf->providers[i];
            struct gw_upfacts f = {0};
            unsigned in_flight = 0, waiting = 0, v = 0;

            if (p->state)
                gw_upstate_facts(p->state, now_ms, &f);
            if (p->slots)
                gw_slots_stats(p->slots, NULL, &in_flight, &waiting);
            switch ((enum upstream_gauge)g) {
            case UG_PAUSED: v = f.paused_until_ms > now_ms; break;
            case UG_FAILURES: v = f.consecutive_failures; break;
            case UG_IN_FLIGHT: v = in_flight; break;
            case UG_WAITING: v = waiting; break;
            case UG_SLOTS: v = p->max_concurrent; break;
            case UG__COUNT: break;
            }
            ok = series_start(b, upstream_gauges[g].name, "upstream", p->name) &&
                 gw_buf_printf(b, "%u\n", v) == GW_OK;
        }
    }
    return ok;
}

/* One line of gw_key_limit_used or _max: {client, per, measure}; cost in USD. */
static bool
key_limit_line(struct gw_buf *b, const char *name, const char *client,
               const struct gw_limit_view *v, uint64_t value)
{
    bool ok = gw_buf_printf(b, "%s{client=\"", name) == GW_OK &&
              gw_metrics_append_label(b, gw_str_c(client)) == GW_OK &&
              gw_buf_printf(b, "\",per=\"%s\",measure=\"%s\"} ", gw_limit_per_str(v->per),
                            gw_limit_measure_str(v->measure)) == GW_OK;

    if (v->measure == GW_LIMIT_COST)
        return ok && gw_buf_printf(b, "%llu.%06llu\n", (unsigned long long)(value / 1000000),
                                   (unsigned long long)(value % 1000000)) == GW_OK;
    return ok && gw_buf_printf(b, "%llu\n", (unsigned long long)value) == GW_OK;
}

static bool
render_key_limits(struct gw_buf *b, const struct gw_conf *conf, uint64_t now_ms)
{
    static const char *const names[2] = {"gw_key_limit_used", "gw_key_limit_max"};
    static const char *const helps[2] = {
        "Use of each limit of a client key in its current period (cost in USD).",
        "Each limit of a client key (cost in USD).",
    };
    struct gw_period cal;
    bool ok = true;
    unsigned k;

    net_calendar(now_ms, &cal);
    for (k = 0; k < 2 && ok; k++) {
        ok = family(b, names[k], "gauge", helps[k]);
        for (size_t i = 0; conf && i < conf->n_clients && ok; i++) {
            const struct gw_conf_client *cl = &conf->clients[i];
            struct gw_limit_view v[16];
            size_t n, j;

            if (!cl->usage || !cl->n_limits)
                continue;
            n = gw_keylimits_view(cl->usage, now_ms, &cal, v, sizeof(v) / sizeof(v[0]));
            for (j = 0; j < n && ok; j++)
                ok = key_limit_line(b, names[k], cl->name, &v[j], k ? v[j].max : v[j].used);
        }
    }
    return ok;
}

static bool
render_store(struct gw_buf *b, struct store *st)
{
    struct store_stats s;

    store_stats_get(st, &s);
    return family(b, "gw_store_queue_depth", "gauge",
                  "Request rows waiting for the store writer.") &&
           gw_buf_printf(b, "gw_store_queue_depth %llu\n", (unsigned long long)s.queue_depth) ==
               GW_OK &&
           family(b, "gw_store_batch_rows", "histogram", "Rows per committed store batch.") &&
           gw_metrics_append_histogram(b, "gw_store_batch_rows", "", store_batch_bounds,
                                       STORE_BATCH_BUCKETS, s.batch_rows, s.batch_rows_sum,
                                       1) == GW_OK &&
           family(b, "gw_store_commit_seconds", "histogram",
                  "Time of each store write transaction's commit.") &&
           gw_metrics_append_histogram(b, "gw_store_commit_seconds", "", store_commit_bounds_us,
                                       STORE_COMMIT_BUCKETS, s.commit_us, s.commit_us_sum,
                                       1000000) == GW_OK;
}

enum gw_code
net_metrics_render(struct gw_buf *b, struct gw_thread *thr, struct store *st)
{
    struct gw_metrics *sum = gw_metrics_new();
    struct gw_conf *conf;
    uint64_t now_ms = net_now_ms(), reloaded, refused;
    unsigned i;
    bool ok;

    if (!sum)
        return GW_E_NOMEM;
    for (i = 0; i < NET_METRICS_MAX_WORKERS; i++) {
        /* Acquire: pairs with the worker's publishing store. */
        const struct gw_metrics *m = __atomic_load_n(&worker_tables[i], __ATOMIC_ACQUIRE);

        if (m)
            gw_metrics_add(sum, m);
    }
    ok = gw_metrics_render(sum, b) == GW_OK;
    gw_metrics_free(sum);
    conf = gw_conf_acquire(thr);
    ok = ok && render_upstreams(b, conf, now_ms) && render_key_limits(b, conf, now_ms) &&
         net_quota_metrics(b, conf, now_ms);
    gw_conf_release(conf);
    ok = ok && (!st || render_store(b, st));
    net_reload_counts(&reloaded, &refused);
    ok = ok &&
         family(b, "gw_reloads_total", "counter",
                "Config reloads by outcome (refused: the old config was kept).") &&
         gw_buf_printf(b,
                       "gw_reloads_total{outcome=\"ok\"} %llu\n"
                       "gw_reloads_total{outcome=\"refused\"} %llu\n",
                       (unsigned long long)reloaded, (unsigned long long)refused) == GW_OK;
    return ok ? GW_OK : GW_E_NOMEM;
}
