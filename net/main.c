/* SPDX-License-Identifier: MIT
 * net/main.c - gwd's main(): load and validate the config, open the store, start the
 * logger, store writer, control and worker threads, then serve signals on the main
 * thread: SIGHUP reloads, SIGTERM/SIGINT drain (server.drain_secs), flush, exit 0.
 * `gwd --check FILE` validates a config and prints one line per problem.
 * Owns:    the process: every thread and the live snapshot.
 * Threads: main.
 * See:     net/worker.h, net/control.h, store/store.h, core/snap.h
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "core/alloc.h"
#include "core/conf.h"
#include "core/confdiff.h"
#include "core/events.h"
#include "core/limits.h"
#include "core/quota.h"
#include "core/log.h"
#include "core/route.h"
#include "core/slots.h"
#include "core/snap.h"
#include "core/sticky.h"
#include "dialects/sigv4.h"
#include "net/calendar.h"
#include "net/control.h"
#include "net/egress.h"
#include "net/linktest.h"
#include "net/logger.h"
#include "net/metrics.h"
#include "net/net-priv.h"
#include "net/reload.h"
#include "net/tls.h"
#include "net/rezone.h"
#include "net/worker.h"
#include "net/quota.h"
#include "store/store.h"

#define GWD_VERSION "0.1.0"
#define GWD_STORE_BATCH_MS 50
#define GWD_STICKY_ENTRIES 65536 /* conversations remembered */

struct gwd {
    const char *conf_path;
    struct gw_thread gt;
    struct event_base *base;
    struct store *store;
    struct net_control *control;
    unsigned long nofile; /* the descriptor limit at startup (0: none) */
    struct net_workers *workers;
    struct gw_routes *routes;       /* upstream health and group rounds, across reloads */
    struct gw_slots_reg *up_slots;  /* providers' max_concurrent, across reloads */
    struct gw_slots_reg *key_slots; /* clients' max_concurrent, across reloads */
    struct gw_keylimits_reg *usage; /* clients' usage totals for their limits */
    struct net_deps deps;
    struct net_linktest *linktest;
    struct net_rezone *rezone; /* recounts key totals when the local calendar moves */
    struct net_reload *reload; /* reloads asked by the control thread, run here */
    unsigned drain_secs;
};

/* Reads the whole file at <path> into a malloc'd buffer. NULL with errno set on failure. */
static char *
read_all(const char *path, size_t *lenp)
{
    char *data = NULL;
    size_t len = 0, cap = 0;
    FILE *f = fopen(path, "rb");

    if (!f)
        return NULL;
    for (;;) {
        size_t n;

        if (len == cap) {
            char *d = realloc(data, cap ? cap * 2 : 65536);

            if (!d) {
                fclose(f);
                free(data);
                errno = ENOMEM;
                return NULL;
            }
            data = d;
            cap = cap ? cap * 2 : 65536;
        }
        n = fread(data + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    fclose(f);
    *lenp = len;
    return data;
}

static void
print_problems(FILE *out, const char *prefix, const struct gw_conf_problems *probs)
{
    size_t i;

    for (i = 0; i < probs->n; i++) {
        char line[1024];

        gw_conf_problem_format(&probs->v[i], line, sizeof(line));
        fprintf(out, "%s%s\n", prefix, line);
    }
}

/* Moves the problems of <probs> into <keep> (NULL: frees them), each path prefixed with
 * <prefix> (the price table's file; NULL: none). <keep> is empty before. */
static void
keep_problems(struct gw_conf_problems *probs, const char *prefix, struct net_reload_result *keep)
{
    size_t i;

    if (keep && keep->problems.n == 0) {
        keep->problems = *probs;
        memset(probs, 0, sizeof(*probs));
        for (i = 0; prefix && i < keep->problems.n; i++) {
            struct gw_conf_problem *p = &keep->problems.v[i];
            size_t n = strlen(prefix) + strlen(p->path ? p->path : "") + 3;
            char *path = gw_malloc(n);

            if (!path)
                continue;
            snprintf(path, n, "%s: %s", prefix, p->path ? p->path : "");
            gw_free(p->path);
            p->path = path;
        }
    }
    gw_conf_problems_fini(probs);
}

/* Says in <keep> (NULL: nowhere) why the running config stays. */
static void keep_refusal(struct net_reload_result *keep, enum gw_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void
keep_refusal(struct net_reload_result *keep, enum gw_code code, const char *fmt, ...)
{
    va_list ap;

    if (!keep)
        return;
    keep->code = code;
    va_start(ap, fmt);
    vsnprintf(keep->message, sizeof(keep->message), fmt, ap);
    va_end(ap);
}

/* The price table named by the config (DESIGN.md 9): a missing default prices.yaml
 * means no table; a missing explicit one, or a refused one, refuses the config. A
 * refusal is also said in <keep> (may be NULL) for a reload's answer. */
static bool
load_prices(struct gw_conf *conf, FILE *out, struct net_reload_result *keep)
{
    struct gw_conf_problems probs = {0};
    struct gw_prices *prices = NULL;
    char prefix[1100];
    size_t len = 0;
    char *data = read_all(conf->prices_path, &len);
    enum gw_code rc;

    if (!data) {
        if (errno == ENOENT && !conf->prices_explicit)
            return true;
        fprintf(out, "prices: %s: %s (config.io) cannot read the price table\n", conf->prices_path,
                strerror(errno));
        keep_refusal(keep, GW_E_CFG_IO, "cannot read the price table %.300s: %s", conf->prices_path,
                     strerror(errno));
        return false;
    }
    rc = gw_prices_parse(data, len, &prices, &probs);
    free(data);
    if (rc != GW_OK) {
        snprintf(prefix, sizeof(prefix), "%s: ", conf->prices_path);
        print_problems(out, prefix, &probs);
        if (probs.n == 0)
            fprintf(out, "%s: (%s) the price table was refused\n", conf->prices_path,
                    gw_code_str(rc));
        keep_refusal(keep, probs.n ? probs.v[0].code : rc, "the price table %.300s was refused",
                     conf->prices_path);
        keep_problems(&probs, conf->prices_path, keep);
        return false;
    }
    gw_conf_problems_fini(&probs);
    gw_conf_set_prices(conf, &prices);
    return true;
}

/* Reads and validates <path> and its price table. Prints every problem to <out>, one a
 * line, and keeps them in <keep> (NULL: not kept) with the refusal's code. */
static struct gw_conf *
load_conf(const char *path, FILE *out, struct net_reload_result *keep)
{
    struct gw_conf_problems probs = {0};
    struct gw_conf *conf = NULL;
    char *data, *dircopy, dir[PATH_MAX];
    size_t len = 0;
    enum gw_code rc;

    data = read_all(path, &len);
    if (!data) {
        fprintf(out, "%s: %s (config.io) cannot read the config file\n", path, strerror(errno));
        keep_refusal(keep, GW_E_CFG_IO, "cannot read the config file %.300s: %s", path,
                     strerror(errno));
        return NULL;
    }
    dircopy = strdup(path);
    if (!dircopy || !realpath(dirname(dircopy), dir))
        snprintf(dir, sizeof(dir), ".");
    free(dircopy);
    rc = gw_conf_parse(data, len, dir, &net_conf_env, &conf, &probs);
    free(data);
    if (rc != GW_OK) {
        print_problems(out, "", &probs);
        if (probs.n == 0)
            fprintf(out, "%s: (%s) the config was refused\n", path, gw_code_str(rc));
        keep_refusal(keep, probs.n ? probs.v[0].code : rc, "the config file %.300s was refused",
                     path);
        keep_problems(&probs, NULL, keep);
        return NULL;
    }
    gw_conf_problems_fini(&probs);
    if (!net_egress_attach(conf, &probs)) { /* providers[].ca_file: files, so read here */
        print_problems(out, "", &probs);
        keep_refusal(keep, probs.n ? probs.v[0].code : GW_E_CFG_CA_FILE,
                     "the config file %.300s was refused", path);
        keep_problems(&probs, NULL, keep);
        gw_conf_free(conf);
        return NULL;
    }
    if (!net_tls_attach(conf, &probs)) { /* server.tls: the same, for the listener */
        print_problems(out, "", &probs);
        keep_refusal(keep, probs.n ? probs.v[0].code : GW_E_CFG_TLS_CERT,
                     "the config file %.300s was refused", path);
        keep_problems(&probs, NULL, keep);
        gw_conf_free(conf);
        return NULL;
    }
    if (!load_prices(conf, out, keep)) {
        gw_conf_free(conf);
        return NULL;
    }
    return conf;
}

/* Points providers and clients of <conf> at their concurrency limits (kept by name
 * across reloads, so slots in use stay counted) and sets each limit from the config:
 * a raised or removed limit grants waiters at once, a removed one releases them all. */
/* A provider or client the new config no longer names keeps its semaphore (requests
 * of the old snapshot may still hold slots) but loses its limit, so whoever waits on it
 * goes on at once rather than at its deadline. Main thread. */
static void
release_unnamed(struct gw_slots_reg *reg, const struct gw_conf *conf, bool providers, struct gwd *g)
{
    size_t i, j, n = providers ? conf->n_providers : conf->n_clients;

    for (i = 0; i < gw_slots_reg_count(reg); i++) {
        struct gw_slots *sl = gw_slots_reg_at(reg, i);
        const char *name = gw_slots_name(sl);

        for (j = 0; j < n; j++)
            if (strcmp(providers ? conf->providers[j].name : conf->clients[j].name, name) == 0)
                break;
        if (j == n)
            gw_slots_resize(sl, 0, net_slots_granted, g->workers);
    }
}

static bool
attach_slots(struct gwd *g, struct gw_conf *conf)
{
    size_t i;

    for (i = 0; i < conf->n_providers; i++) {
        struct gw_conf_provider *p = &conf->providers[i];

        p->slots = gw_slots_reg_get(g->up_slots, p->name);
        if (!p->slots)
            return false;
        gw_slots_resize(p->slots, p->max_concurrent, net_slots_granted, g->workers);
    }
    for (i = 0; i < conf->n_clients; i++) {
        struct gw_conf_client *cl = &conf->clients[i];

        cl->slots = gw_slots_reg_get(g->key_slots, cl->name);
        if (!cl->slots)
            return false;
        gw_slots_resize(cl->slots, cl->max_concurrent, net_slots_granted, g->workers);
    }
    release_unnamed(g->up_slots, conf, true, g);
    release_unnamed(g->key_slots, conf, false, g);
    return true;
}

static int
on_rebuild_row(void *arg, const struct gw_row *row)
{
    void **a = arg;

    gw_keylimits_rebuild_add(a[0], row, *(uint64_t *)a[1], a[2],
                             GW_KEYLIMITS_F_CALENDAR | GW_KEYLIMITS_F_ROLLING);
    return 0;
}

/* Points every client at its usage totals (kept by name across reloads) and sets its
 * limits. A key seen for the first time is rebuilt from the stored rows since the
 * earliest of this month's, this week's and today's starts and an hour ago, with the
 * same counting rule as live settlement (DESIGN.md 8). Main thread; reads the store. */
static bool
attach_usage(struct gwd *g, struct gw_conf *conf)
{
    uint64_t now = net_now_ms(), since;
    struct gw_period cal;
    size_t i;

    net_calendar(now, &cal);
    since = cal.month.start_ms < cal.week.start_ms ? cal.month.start_ms : cal.week.start_ms;
    if (now - 3600000 < since)
        since = now - 3600000;
    for (i = 0; i < conf->n_clients; i++) {
        struct gw_conf_client *cl = &conf->clients[i];
        bool created = false;

        cl->usage = gw_keylimits_reg_get(g->usage, cl->name, &created);
        if (!cl->usage)
            return false;
        gw_keylimits_configure(cl->usage, cl->limits, cl->n_limits);
        if (created && g->store) {
            void *a[3] = {cl->usage, &now, &cal};

            store_rows_by_client(g->store, cl->name, since, on_rebuild_row, a);
        }
    }
    /* Upstream credentials: their quota sets, rebuilt from the store when new. */
    return net_quota_attach(g->deps.quota, g->store, conf, now);
}

/* log.format and log.level: cheap to switch (core/log.h reads them per line), so a
 * reload applies them too. */
static void
apply_log(const struct gw_conf *conf)
{
    gw_log_set((enum gw_log_format)conf->log.format, (enum gw_log_level)conf->log.level);
}

/* load_conf for a reload. With log.format json the problems of a refused file become
 * log lines (code reload_problem), so that every line on stderr stays one JSON object;
 * in text they are printed as gwd --check prints them. */
static struct gw_conf *
reload_conf(const char *path, struct net_reload_result *keep)
{
    struct gw_conf *conf;
    char *buf = NULL, *line, *save = NULL;
    size_t len = 0;
    FILE *out;

    if (gw_log_get_format() != GW_LOG_JSON)
        return load_conf(path, stderr, keep);
    out = open_memstream(&buf, &len);
    if (!out)
        return load_conf(path, stderr, keep);
    conf = load_conf(path, out, keep);
    fclose(out);
    for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        GW_LOG(GW_LOG_ERROR, NULL, "reload_problem", "%s", line);
    free(buf);
    return conf;
}

/* ---- reloads ---- */

/* One reload of the config file (DESIGN.md 1): load and validate it, say what it
 * changes against the live snapshot, attach the shared state kept by name, publish.
 * A refused file leaves the running config; either way one log line and one operator
 * event. The run function of g->reload (net/reload.h) and of SIGHUP. Main thread. */
static void
reload_run(void *arg, const char *source, struct net_reload_result *res)
{
    struct gwd *g = arg;
    struct gw_conf *conf, *live;
    char changed[512];
    enum gw_code rc;

    conf = reload_conf(g->conf_path, res);
    live = gw_conf_acquire(&g->gt);
    res->generation = live ? live->generation : 0;
    rc = conf ? gw_confdiff_build(live, conf, &res->diff) : GW_OK;
    gw_conf_release(live);
    if (conf && (rc != GW_OK || gw_routes_attach(g->routes, conf) != GW_OK ||
                 !attach_slots(g, conf) || !attach_usage(g, conf))) {
        keep_refusal(res, GW_E_NOMEM, "out of memory attaching the new config");
        gw_confdiff_fini(&res->diff);
        gw_conf_free(conf);
        conf = NULL;
    }
    if (!conf) {
        GW_LOG(GW_LOG_ERROR, NULL, "reload_failed", "(%s, from %s) %s; the running config stays%s",
               gw_code_str(res->code), source, res->message,
               res->problems.n ? " (problems above)" : "");
        net_reload_announce(res, source);
        return;
    }
    g->drain_secs = conf->server.drain_secs;
    apply_log(conf);
    gw_conf_publish(&g->gt, conf);
    res->reloaded = true;
    res->generation = conf->generation; /* main publishes: conf stays live until the next */
    gw_confdiff_format(&res->diff, changed, sizeof(changed));
    GW_LOG(GW_LOG_INFO, NULL, "reloaded",
           "config %s reloaded (from %s, generation %llu): %s (listen and store changes need "
           "a restart)",
           g->conf_path, source, (unsigned long long)res->generation, changed);
    net_reload_announce(res, source);
}

/* ---- signals ---- */

static void
on_sighup(evutil_socket_t sig, short what, void *arg)
{
    struct net_reload_result res;

    (void)sig;
    (void)what;
    memset(&res, 0, sizeof(res));
    reload_run(arg, "signal", &res);
    net_reload_result_fini(&res);
}

static void
on_sigterm(evutil_socket_t sig, short what, void *arg)
{
    struct gwd *g = arg;

    (void)what;
    net_control_set_phase(g->control, NET_CONTROL_DRAINING); /* /readyz: 503 from now on */
    GW_LOG(GW_LOG_INFO, NULL, "stopping", "signal %d: draining for at most %u s", (int)sig,
           g->drain_secs);
    event_base_loopbreak(g->base);
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct gwd *g = arg;

    (void)fd;
    (void)what;
    gw_snap_poll(&g->gt); /* free snapshots retired by reloads */
}

/* server.max_connections when the config leaves it 0: what the descriptor limit
 * (ulimit -n) leaves after a reserve (the store, the log, the control port and its
 * clients, each worker's loop and DNS), halved, since each client connection may hold
 * an upstream connection. Sets *<nofile> to the limit read (0: none). */
static unsigned
conns_auto_max(unsigned n_workers, unsigned long *nofile)
{
    struct rlimit rl;
    unsigned long cur, reserve = 64 + 8ul * n_workers;

    *nofile = 0;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return 0;
    cur = (unsigned long)rl.rlim_cur;
    *nofile = cur;
    if (cur > 2000000)
        cur = 2000000;
    if (cur <= reserve + 2)
        return 1;
    return (unsigned)((cur - reserve) / 2);
}

static unsigned
worker_count(const struct gw_conf *conf)
{
    long n;

    if (conf->server.workers)
        return conf->server.workers;
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

static int
usage(FILE *f, int rc)
{
    fprintf(f, "usage: gwd -c FILE      run the gateway\n"
               "       gwd --check FILE validate a config, print one line per problem\n"
               "       gwd --version\n");
    return rc;
}

static int
run(struct gwd *g)
{
    struct gw_conf *conf;
    char err[512], bound[512] = "", tls_bound[512] = "";
    struct event *ev_hup, *ev_term, *ev_int, *ev_tick;
    struct timeval second = {1, 0};
    unsigned n_workers;
    int rc = 1;

    conf = load_conf(g->conf_path, stderr, NULL);
    if (!conf)
        return 1;
    apply_log(conf);
    if (evthread_use_pthreads() != 0) {
        fprintf(stderr, "gwd: evthread_use_pthreads failed\n");
        gw_conf_free(conf);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    gw_snap_init();
    gw_events_init();
    gw_thread_register(&g->gt);
    g->drain_secs = conf->server.drain_secs;
    n_workers = worker_count(conf);
    {
        unsigned long nofile;

        net_conns_set_auto_max(conns_auto_max(n_workers, &nofile));
        g->nofile = nofile;
    }
    g->routes = gw_routes_new();
    g->deps.sticky = gw_sticky_new(GWD_STICKY_ENTRIES);
    g->up_slots = gw_slots_reg_new();
    g->key_slots = gw_slots_reg_new();
    g->usage = gw_keylimits_reg_new();
    g->deps.quota = gw_quota_reg_new();
    if (!g->routes || !g->deps.sticky || !g->up_slots || !g->key_slots || !g->usage ||
        !g->deps.quota || gw_routes_attach(g->routes, conf) != GW_OK || !attach_slots(g, conf)) {
        fprintf(stderr, "gwd: out of memory at startup\n");
        gw_conf_free(conf);
        return 1;
    }
    gw_conf_publish(&g->gt, conf);
    conf = gw_conf_acquire(&g->gt); /* main's own reference for startup */

    if (store_open(conf->store.path, conf->store.map_size_mb, &g->store, err, sizeof(err)) !=
        GW_OK) {
        fprintf(stderr, "store.path: %s (gw.store.io) %s\n", conf->store.path, err);
        goto out;
    }
    g->deps.store = g->store;
    g->deps.conf_path = g->conf_path;
    g->reload = net_reload_new(reload_run, g);
    g->deps.reload = g->reload;
    /* The live snapshot is not read by any other thread yet: its clients get their
     * usage totals, rebuilt from the store, before the workers start. */
    if (!attach_usage(g, conf)) {
        fprintf(stderr, "gwd: out of memory at startup\n");
        goto out;
    }
    if (store_writer_start(g->store, GWD_STORE_BATCH_MS, conf->retention.row_days) != GW_OK) {
        fprintf(stderr, "gwd: cannot start the store writer\n");
        goto out;
    }
    net_logger_start();
    /* A control API save sends SIGHUP; until the event loop handles it (below), one
     * arriving early must not end the process. evsignal_new replaces this. */
    signal(SIGHUP, SIG_IGN);
    if (net_control_start(&conf->control.listen, &g->deps, &g->control, err, sizeof(err)) !=
        GW_OK) {
        fprintf(stderr, "control.listen: %s:%u: %s\n", conf->control.listen.host,
                conf->control.listen.port, err);
        goto out;
    }
    if (net_workers_start(conf, n_workers, &g->deps, &g->workers, bound, sizeof(bound), tls_bound,
                          sizeof(tls_bound), err, sizeof(err)) != GW_OK) {
        fprintf(stderr, "%s\n", err);
        goto out;
    }
    /* The listeners are bound and listening: the control port's /healthz and /readyz
     * answer 200 from now on (DESIGN.md 4), not before. */
    net_control_set_phase(g->control, NET_CONTROL_SERVING);
    g->base = event_base_new();
    ev_hup = evsignal_new(g->base, SIGHUP, on_sighup, g);
    ev_term = evsignal_new(g->base, SIGTERM, on_sigterm, g);
    ev_int = evsignal_new(g->base, SIGINT, on_sigterm, g);
    ev_tick = event_new(g->base, -1, EV_PERSIST, on_tick, g);
    if (!ev_hup || !ev_term || !ev_int || !ev_tick || !g->reload ||
        net_reload_attach(g->reload, g->base) != GW_OK) {
        fprintf(stderr, "gwd: cannot set up signal handling\n");
        goto out;
    }
    event_add(ev_hup, NULL);
    event_add(ev_term, NULL);
    event_add(ev_int, NULL);
    event_add(ev_tick, &second);
    if (net_rezone_start(g->base, g->usage, g->store, &g->rezone) != GW_OK) {
        fprintf(stderr, "gwd: cannot start the calendar watch\n");
        goto out;
    }
    g->linktest = net_linktest_start();
    GW_LOG(GW_LOG_INFO, NULL, "ready",
           "gwd %s data=%s%s%s control=%s:%u workers=%u max_connections=%u (descriptor limit "
           "%lu)",
           GWD_VERSION, bound, tls_bound[0] ? " tls=" : "", tls_bound, conf->control.listen.host,
           net_control_port(g->control), n_workers, net_conns_max(conf), g->nofile);
    /* Said at start, so an operator who forgot the token learns why gwctl gets 401. */
    if (!conf->control.token || !*conf->control.token)
        GW_LOG(GW_LOG_WARN, NULL, "control_no_token",
               "control.token_env (%s) is unset: the control API serves only /healthz, "
               "/readyz and /metrics",
               conf->control.token_env);
    gw_conf_release(conf);
    conf = NULL;

    event_base_dispatch(g->base);
    net_reload_close(g->reload); /* asks still queued: answered "stopping" */

    net_workers_stop(g->workers, g->drain_secs);
    g->workers = NULL;
    event_free(ev_hup);
    event_free(ev_term);
    event_free(ev_int);
    event_free(ev_tick);
    rc = 0;
out:
    gw_conf_release(conf);
    net_workers_stop(g->workers, 0);
    net_linktest_join(g->linktest);
    net_reload_close(g->reload);
    net_control_stop(g->control);
    net_rezone_stop(g->rezone); /* reads the store and the keys: before both go */
    if (g->store) {
        struct store_stats st;
        struct gw_conf *last = gw_conf_acquire(&g->gt);

        if (last) {
            /* every learned quota limit, for the next start (store_close commits them) */
            net_quota_save_learned(last, g->store, 0, net_now_ms());
            gw_conf_release(last);
        }
        store_writer_stop(g->store); /* commits every row queued so far */
        store_stats_get(g->store, &st);
        if (rc == 0)
            GW_LOG(GW_LOG_INFO, NULL, "stopped", "rows committed %llu, dropped %llu",
                   (unsigned long long)st.rows_committed, (unsigned long long)st.rows_dropped);
        store_close(g->store);
    }
    net_reload_free(g->reload); /* nothing asks any more */
    net_logger_stop();
    gw_snap_shutdown(&g->gt);
    net_egress_shutdown(); /* no snapshot, worker or link test uses a context any more */
    net_tls_shutdown();
    gw_sticky_free(g->deps.sticky);
    gw_routes_free(g->routes);
    gw_slots_reg_free(g->up_slots);
    gw_slots_reg_free(g->key_slots);
    gw_keylimits_reg_free(g->usage);
    gw_quota_reg_free(g->deps.quota);
    if (g->base)
        event_base_free(g->base);
    return rc;
}

int
main(int argc, char **argv)
{
    struct gwd g;

    memset(&g, 0, sizeof(g));
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("gwd %s\n", GWD_VERSION);
        return 0;
    }
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return usage(stdout, 0);
    if (argc == 3 && strcmp(argv[1], "--check") == 0) {
        struct gw_conf *conf = load_conf(argv[2], stdout, NULL);

        if (!conf)
            return 1;
        gw_conf_free(conf);
        net_egress_shutdown();
        net_tls_shutdown();
        printf("%s: ok\n", argv[2]);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "-c") == 0) {
        g.conf_path = argv[2];
        dl_sigv4_init(); /* before the workers sign Bedrock requests */
        return run(&g);
    }
    return usage(stderr, 2);
}
