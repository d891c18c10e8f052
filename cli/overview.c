/* SPDX-License-Identifier: MIT
 * cli/overview.c - `gwctl providers`, `gwctl groups` and `gwctl keys`: tables from
 * GET /control/v1/overview (providers with health, pause and slots, then the failover
 * settings; groups with members, weights and balance_by; keys with their concurrency
 * and one line per usage limit), or, with --json, the answer's "providers" (with
 * "failover"), "groups" or "keys" part.
 * Owns:    nothing beyond one call.
 * Threads: the main thread only; blocks on the network.
 * See:     cli/cli.h, net/control.c (net_control_overview_json), docs/gwctl.md
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/http.h"
#include "cli/table.h"
#include "core/str.h"

static int
fetch_overview(const struct cli_opts *o, json_t **ov)
{
    int rc = cli_api_get(o, "/control/v1/overview", ov);

    if (rc == CLI_EXIT_OK && (!json_is_array(json_object_get(*ov, "providers")) ||
                              !json_is_array(json_object_get(*ov, "groups")))) {
        fprintf(stderr, "gwctl: /control/v1/overview: the answer has no providers/groups\n");
        json_decref(*ov);
        *ov = NULL;
        return CLI_EXIT_ERROR;
    }
    return rc;
}

/* Prints {"<k1>": ov[k1], "<k2>": ov[k2]} (k2 may be NULL) on one line. */
static int
print_parts(json_t *ov, const char *k1, const char *k2)
{
    json_t *out = json_object();
    int rc = 0;

    rc |= json_object_set(out, k1, json_object_get(ov, k1));
    if (k2)
        rc |= json_object_set(out, k2, json_object_get(ov, k2));
    if (rc) {
        json_decref(out);
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    json_dumpf(out, stdout, JSON_COMPACT | JSON_REAL_PRECISION(15));
    fputc('\n', stdout);
    json_decref(out);
    return CLI_EXIT_OK;
}

static void
int_or_dash(char *buf, size_t size, json_t *v, const char *unit)
{
    if (json_is_integer(v))
        snprintf(buf, size, "%lld%s", (long long)json_integer_value(v), unit);
    else
        snprintf(buf, size, "-");
}

/* ---- providers ---- */

enum {
    P_NAME,
    P_DIALECT,
    P_STATE,
    P_UNTIL,
    P_FAILS,
    P_SLOTS,
    P_WAITING,
    P_TTFC,
    P_SUCCESS,
    P_SAMPLES,
    P__COUNT
};

static const struct cli_col provider_cols[P__COUNT] = {
    [P_NAME] = {"NAME", 0, false},      [P_DIALECT] = {"DIALECT", 0, false},
    [P_STATE] = {"STATE", 0, false},    [P_UNTIL] = {"PAUSED UNTIL (UTC)", 0, false},
    [P_FAILS] = {"FAILS", 0, true},     [P_SLOTS] = {"IN FLIGHT", 0, true},
    [P_WAITING] = {"WAITING", 0, true}, [P_TTFC] = {"TTFC", 0, true},
    [P_SUCCESS] = {"SUCCESS", 0, true}, [P_SAMPLES] = {"SAMPLES/OUTCOMES", 0, true},
};

static int
add_provider(struct cli_table *t, json_t *p)
{
    char until[24], fails[16], slots[48], waiting[16], ttfc[24], success[16], samples[40];
    const char *cells[P__COUNT];
    json_t *v;

    v = json_object_get(p, "paused_until");
    snprintf(until, sizeof(until), "%.19s", json_is_string(v) ? json_string_value(v) : "-");
    if (strlen(until) > 10 && until[10] == 'T')
        until[10] = ' ';
    int_or_dash(fails, sizeof(fails), json_object_get(p, "consecutive_failures"), "");
    /* "in flight/max", or just "in flight" when unlimited */
    v = json_object_get(p, "max_concurrent");
    if (json_is_integer(v))
        snprintf(slots, sizeof(slots), "%lld/%lld",
                 (long long)json_integer_value(json_object_get(p, "in_flight")),
                 (long long)json_integer_value(v));
    else
        snprintf(slots, sizeof(slots), "%lld",
                 (long long)json_integer_value(json_object_get(p, "in_flight")));
    int_or_dash(waiting, sizeof(waiting), json_object_get(p, "waiting"), "");
    int_or_dash(ttfc, sizeof(ttfc), json_object_get(p, "ttfc_ms"), "ms");
    v = json_object_get(p, "success_rate");
    if (json_is_number(v))
        snprintf(success, sizeof(success), "%.1f%%", json_number_value(v) * 100.0);
    else
        snprintf(success, sizeof(success), "-");
    snprintf(samples, sizeof(samples), "%lld/%lld",
             (long long)json_integer_value(json_object_get(p, "samples")),
             (long long)json_integer_value(json_object_get(p, "outcomes")));

    cells[P_NAME] = json_string_value(json_object_get(p, "name"));
    cells[P_DIALECT] = json_string_value(json_object_get(p, "dialect"));
    cells[P_STATE] = json_string_value(json_object_get(p, "state"));
    cells[P_UNTIL] = until;
    cells[P_FAILS] = fails;
    cells[P_SLOTS] = slots;
    cells[P_WAITING] = waiting;
    cells[P_TTFC] = ttfc;
    cells[P_SUCCESS] = success;
    cells[P_SAMPLES] = samples;
    return cli_table_add(t, cells);
}

static long long
fo_int(json_t *fo, const char *k)
{
    return (long long)json_integer_value(json_object_get(fo, k));
}

int
cli_cmd_providers(const struct cli_opts *o, int argc, char **argv)
{
    struct cli_table t;
    json_t *ov = NULL, *p, *fo;
    size_t i;
    int rc;

    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "gwctl: providers takes no arguments\n");
        return cli_usage();
    }
    rc = fetch_overview(o, &ov);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o->json) {
        rc = print_parts(ov, "providers", "failover");
        json_decref(ov);
        return rc;
    }
    if (cli_table_init(&t, provider_cols, P__COUNT) != 0) {
        json_decref(ov);
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    json_array_foreach(json_object_get(ov, "providers"), i, p)
    {
        if (add_provider(&t, p) != 0) {
            fprintf(stderr, "gwctl: out of memory\n");
            rc = CLI_EXIT_ERROR;
            break;
        }
    }
    if (rc == CLI_EXIT_OK) {
        cli_table_flush(&t, stdout);
        fo = json_object_get(ov, "failover");
        if (json_is_object(fo))
            printf("failover: pause after %lld failures for %llds (doubling up to %llds); "
                   "stream start wait %llds, next on slow start %s; slot wait %llds\n",
                   fo_int(fo, "failures_to_pause"), fo_int(fo, "pause_secs"),
                   fo_int(fo, "max_pause_secs"), fo_int(fo, "stream_start_wait_secs"),
                   json_is_true(json_object_get(fo, "next_on_slow_start")) ? "on" : "off",
                   fo_int(fo, "slot_wait_secs"));
    }
    cli_table_fini(&t);
    json_decref(ov);
    return rc;
}

/* ---- groups ---- */

enum { G_NAME, G_TYPE, G_BALANCE, G_MODEL, G_MEMBERS, G__COUNT };

static const struct cli_col group_cols[G__COUNT] = {
    [G_NAME] = {"NAME", 0, false},          [G_TYPE] = {"TYPE", 0, false},
    [G_BALANCE] = {"BALANCE BY", 0, false}, [G_MODEL] = {"MODEL", 0, false},
    [G_MEMBERS] = {"MEMBERS", 0, false},
};

/* "relay:7 (gpt-4.1), official:3" for load-balance; "c, a, b" otherwise. A member's own
 * model follows in parentheses. */
static int
format_members(struct gw_buf *b, json_t *g, bool lb)
{
    json_t *names = json_object_get(g, "providers"), *weights = json_object_get(g, "weights"),
           *models = json_object_get(g, "models"), *n;
    size_t i;

    json_array_foreach(names, i, n)
    {
        const char *model = json_string_value(json_array_get(models, i));

        if (gw_buf_printf(b, "%s%s", i ? ", " : "", json_string_value(n)) != GW_OK)
            return -1;
        if (lb && gw_buf_printf(b, ":%lld",
                                (long long)json_integer_value(json_array_get(weights, i))) != GW_OK)
            return -1;
        if (model && gw_buf_printf(b, " (%s)", model) != GW_OK)
            return -1;
    }
    return 0;
}

static int
add_group(struct cli_table *t, json_t *g)
{
    const char *type = json_string_value(json_object_get(g, "type"));
    bool lb = type && strcmp(type, "load-balance") == 0;
    const char *cells[G__COUNT];
    struct gw_buf members = {0};
    int rc;

    if (format_members(&members, g, lb) != 0) {
        gw_buf_fini(&members);
        return -1;
    }
    cells[G_NAME] = json_string_value(json_object_get(g, "name"));
    cells[G_TYPE] = type;
    cells[G_BALANCE] = json_string_value(json_object_get(g, "balance_by"));
    cells[G_MODEL] = json_string_value(json_object_get(g, "model"));
    cells[G_MEMBERS] = members.data ? members.data : "-";
    rc = cli_table_add(t, cells);
    gw_buf_fini(&members);
    return rc;
}

int
cli_cmd_groups(const struct cli_opts *o, int argc, char **argv)
{
    struct cli_table t;
    json_t *ov = NULL, *g, *groups;
    size_t i;
    int rc;

    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "gwctl: groups takes no arguments\n");
        return cli_usage();
    }
    rc = fetch_overview(o, &ov);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o->json) {
        rc = print_parts(ov, "groups", NULL);
        json_decref(ov);
        return rc;
    }
    groups = json_object_get(ov, "groups");
    if (json_array_size(groups) == 0) {
        printf("no groups: a model resolves to the providers that list it, in file order\n");
        json_decref(ov);
        return CLI_EXIT_OK;
    }
    if (cli_table_init(&t, group_cols, G__COUNT) != 0) {
        json_decref(ov);
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    json_array_foreach(groups, i, g)
    {
        if (add_group(&t, g) != 0) {
            fprintf(stderr, "gwctl: out of memory\n");
            rc = CLI_EXIT_ERROR;
            break;
        }
    }
    if (rc == CLI_EXIT_OK)
        cli_table_flush(&t, stdout);
    cli_table_fini(&t);
    json_decref(ov);
    return rc;
}

/* ---- keys ---- */

enum {
    K_NAME,
    K_SLOTS,
    K_WAITING,
    K_PER,
    K_MEASURE,
    K_USED,
    K_MAX,
    K_PCT,
    K_RESETS,
    K_REACHED,
    K__COUNT
};

static const struct cli_col key_cols[K__COUNT] = {
    [K_NAME] = {"NAME", 0, false},
    [K_SLOTS] = {"IN FLIGHT", 0, true},
    [K_WAITING] = {"WAITING", 0, true},
    [K_PER] = {"PER", 0, false},
    [K_MEASURE] = {"MEASURE", 0, false},
    [K_USED] = {"USED", 0, true},
    [K_MAX] = {"MAX", 0, true},
    [K_PCT] = {"USED%", 0, true},
    [K_RESETS] = {"RESETS (LOCAL)", 0, false},
    [K_REACHED] = {"REACHED", 0, false},
};

/* A limit's amount: USD with cents (more digits under a cent) for cost, else the count. */
static void
amount(char *buf, size_t size, json_t *v, bool cost)
{
    double d = json_number_value(v);

    if (!json_is_number(v))
        snprintf(buf, size, "-");
    else if (!cost)
        snprintf(buf, size, "%lld", (long long)json_integer_value(v));
    else if (d != 0 && d < 0.01)
        snprintf(buf, size, "$%.6f", d);
    else
        snprintf(buf, size, "$%.2f", d);
}

/* An RFC 3339 UTC time ("2026-12-01T00:00:00.000Z") as local "YYYY-MM-DD HH:MM:SS";
 * "-" when absent or unreadable. */
static void
local_time(char *buf, size_t size, json_t *v)
{
    const char *s = json_string_value(v);
    struct tm tm;
    time_t t;

    memset(&tm, 0, sizeof(tm));
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                     &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6) {
        snprintf(buf, size, "-");
        return;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    t = timegm(&tm);
    if (t == (time_t)-1 || !localtime_r(&t, &tm) ||
        strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(buf, size, "-");
}

/* One line per limit of key <k> (one line with "-" limits when it has none); the
 * concurrency cells only on the key's first line. */
static int
add_key(struct cli_table *t, json_t *k)
{
    char slots[48], waiting[16], used[32], max[32], pct[16], resets[40];
    json_t *limits = json_object_get(k, "limits"), *l, *v;
    const char *cells[K__COUNT];
    size_t i, n = json_array_size(limits);

    v = json_object_get(k, "max_concurrent");
    if (json_is_integer(v))
        snprintf(slots, sizeof(slots), "%lld/%lld",
                 (long long)json_integer_value(json_object_get(k, "in_flight")),
                 (long long)json_integer_value(v));
    else
        snprintf(slots, sizeof(slots), "%lld",
                 (long long)json_integer_value(json_object_get(k, "in_flight")));
    int_or_dash(waiting, sizeof(waiting), json_object_get(k, "waiting"), "");
    for (i = 0; i < (n ? n : 1); i++) {
        const char *measure;
        bool cost;
        double mx;

        memset(cells, 0, sizeof(cells));
        cells[K_NAME] = json_string_value(json_object_get(k, "name"));
        cells[K_SLOTS] = i == 0 ? slots : "";
        cells[K_WAITING] = i == 0 ? waiting : "";
        if (n == 0) { /* no limits: the other cells print "-" */
            if (cli_table_add(t, cells) != 0)
                return -1;
            break;
        }
        l = json_array_get(limits, i);
        measure = json_string_value(json_object_get(l, "measure"));
        cost = measure && strcmp(measure, "cost") == 0;
        amount(used, sizeof(used), json_object_get(l, "used"), cost);
        amount(max, sizeof(max), json_object_get(l, "max"), cost);
        mx = json_number_value(json_object_get(l, "max"));
        if (mx > 0)
            snprintf(pct, sizeof(pct), "%.0f%%",
                     json_number_value(json_object_get(l, "used")) * 100.0 / mx);
        else
            snprintf(pct, sizeof(pct), "-");
        local_time(resets, sizeof(resets), json_object_get(l, "resets_at"));
        cells[K_PER] = json_string_value(json_object_get(l, "per"));
        cells[K_MEASURE] = measure;
        cells[K_USED] = used;
        cells[K_MAX] = max;
        cells[K_PCT] = pct;
        cells[K_RESETS] = resets;
        cells[K_REACHED] = json_is_true(json_object_get(l, "reached")) ? "REACHED" : "";
        if (cli_table_add(t, cells) != 0)
            return -1;
    }
    return 0;
}

static bool
has_cost_limit(json_t *k)
{
    json_t *l;
    size_t i;

    json_array_foreach(json_object_get(k, "limits"), i, l)
    {
        const char *m = json_string_value(json_object_get(l, "measure"));

        if (m && strcmp(m, "cost") == 0)
            return true;
    }
    return false;
}

/* Under the table: the models a cost-limited key used that have no price (its cost
 * limit cannot see them, DESIGN.md 8). */
static void
print_unpriced(json_t *keys)
{
    json_t *k, *m;
    size_t i, j;

    json_array_foreach(keys, i, k)
    {
        json_t *un = json_object_get(k, "unpriced_models");

        if (!has_cost_limit(k) || json_array_size(un) == 0)
            continue;
        printf("%s: unpriced models, not counted by its cost limit:",
               json_string_value(json_object_get(k, "name")));
        json_array_foreach(un, j, m) printf("%s %s", j ? "," : "", json_string_value(m));
        printf("\n");
    }
}

int
cli_cmd_keys(const struct cli_opts *o, int argc, char **argv)
{
    struct cli_table t;
    json_t *ov = NULL, *k, *keys;
    size_t i;
    int rc;

    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "gwctl: keys takes no arguments\n");
        return cli_usage();
    }
    rc = fetch_overview(o, &ov);
    if (rc != CLI_EXIT_OK)
        return rc;
    keys = json_object_get(ov, "keys");
    if (!json_is_array(keys)) {
        fprintf(stderr, "gwctl: /control/v1/overview: the answer has no keys\n");
        json_decref(ov);
        return CLI_EXIT_ERROR;
    }
    if (o->json) {
        rc = print_parts(ov, "keys", NULL);
        json_decref(ov);
        return rc;
    }
    if (json_array_size(keys) == 0) {
        printf("no keys: the config has no clients\n");
        json_decref(ov);
        return CLI_EXIT_OK;
    }
    if (cli_table_init(&t, key_cols, K__COUNT) != 0) {
        json_decref(ov);
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    json_array_foreach(keys, i, k)
    {
        if (add_key(&t, k) != 0) {
            fprintf(stderr, "gwctl: out of memory\n");
            rc = CLI_EXIT_ERROR;
            break;
        }
    }
    if (rc == CLI_EXIT_OK) {
        cli_table_flush(&t, stdout);
        print_unpriced(keys);
    }
    cli_table_fini(&t);
    json_decref(ov);
    return rc;
}
