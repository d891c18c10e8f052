/* SPDX-License-Identifier: MIT
 * cli/traffic.c - `gwctl traffic [--limit N] [--cursor C] [-f]`: recent requests from
 * GET /control/v1/traffic as an aligned table (newest first) or raw JSON; -f follows by
 * polling once a second and printing the rows that appeared since (oldest first, like
 * tail -f).
 * Owns:    nothing beyond one call.
 * Threads: the main thread only; blocks on the network and sleeps between polls.
 * See:     cli/cli.h, net/control.c (the row shape), docs/gwctl.md
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/http.h"
#include "cli/table.h"
#include "core/alloc.h"
#include "core/str.h"

#define TRAFFIC_LIMIT_DEFAULT 50
#define TRAFFIC_LIMIT_MAX 500
/* Rows fetched per poll with -f: more new rows than this in one second are not shown. */
#define TRAFFIC_FOLLOW_PAGE 200
#define TRAFFIC_ID_LEN 32

enum {
    C_TIME,
    C_ID,
    C_CLIENT,
    C_MODEL,
    C_UPSTREAM,
    C_STATUS,
    C_CODE,
    C_OUTCOME,
    C_TOKENS,
    C_COST,
    C_TTFB,
    C_DURATION,
    C_ATTEMPTS,
    C__COUNT
};

/* Minimum widths keep a followed table aligned for typical rows that come later. */
static const struct cli_col traffic_cols[C__COUNT] = {
    [C_TIME] = {"TIME (UTC)", 19, false},
    [C_ID] = {"ID", 8, false},
    [C_CLIENT] = {"CLIENT", 8, false},
    [C_MODEL] = {"MODEL", 16, false},
    [C_UPSTREAM] = {"UPSTREAM", 10, false},
    [C_STATUS] = {"STATUS", 0, true},
    [C_CODE] = {"CODE", 10, false},
    [C_OUTCOME] = {"OUTCOME", 9, false},
    [C_TOKENS] = {"TOKENS IN/OUT", 0, true},
    [C_COST] = {"COST", 9, true},
    [C_TTFB] = {"TTFB", 6, true},
    [C_DURATION] = {"DURATION", 0, true},
    [C_ATTEMPTS] = {"ATTEMPTS", 0, false},
};

static const char *
str_or_dash(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));

    return s && *s ? s : "-";
}

static void
format_ms(char *buf, size_t size, json_t *v)
{
    json_int_t ms;

    if (!json_is_integer(v)) {
        snprintf(buf, size, "-");
        return;
    }
    ms = json_integer_value(v);
    if (ms < 1000)
        snprintf(buf, size, "%lldms", (long long)ms);
    else
        snprintf(buf, size, "%.1fs", (double)ms / 1000.0);
}

/* "a:failed(500) > b:failed(gw.upstream.connect) > c:ok" */
static void
format_attempts(struct gw_buf *b, json_t *attempts)
{
    size_t i;
    json_t *a;

    json_array_foreach(attempts, i, a)
    {
        const char *out = str_or_dash(a, "outcome");
        json_t *st = json_object_get(a, "status");
        const char *code = json_string_value(json_object_get(a, "code"));

        gw_buf_printf(b, "%s%s:%s", i ? " > " : "", str_or_dash(a, "upstream"), out);
        /* Why it failed: the upstream's status, else our code (no answer at all). */
        if (json_is_integer(st) && strcmp(out, "ok") != 0)
            gw_buf_printf(b, "(%lld)", (long long)json_integer_value(st));
        else if (code && strcmp(out, "ok") != 0)
            gw_buf_printf(b, "(%s)", code);
    }
    if (b->len == 0)
        gw_buf_printf(b, "-");
}

static int
add_row(struct cli_table *t, json_t *row)
{
    char time_s[20], id[9], status[8], tokens[48], cost[32], ttfb[24], dur[24];
    const char *ts = str_or_dash(row, "ts"), *cells[C__COUNT], *full_id;
    size_t id_len;
    json_t *usage = json_object_get(row, "usage");
    struct gw_buf att = {0};
    double usd = json_number_value(json_object_get(row, "cost_usd"));
    int rc;

    /* "2026-11-30T04:01:02.345Z" -> "2026-11-30 04:01:02" */
    snprintf(time_s, sizeof(time_s), "%s", ts);
    if (strlen(time_s) > 10 && time_s[10] == 'T')
        time_s[10] = ' ';
    /* The id's last 8 characters: its first 12 are the time it was made (the TIME
     * column), the rest random. */
    full_id = str_or_dash(row, "id");
    id_len = strlen(full_id);
    snprintf(id, sizeof(id), "%s",
             full_id + (id_len > sizeof(id) - 1 ? id_len - (sizeof(id) - 1) : 0));
    snprintf(status, sizeof(status), "%lld",
             (long long)json_integer_value(json_object_get(row, "status")));
    snprintf(tokens, sizeof(tokens), "%s%lld/%lld",
             json_is_true(json_object_get(usage, "estimated")) ? "~" : "",
             (long long)json_integer_value(json_object_get(usage, "input_tokens")),
             (long long)json_integer_value(json_object_get(usage, "output_tokens")));
    snprintf(cost, sizeof(cost), usd != 0.0 && usd < 0.01 ? "$%.6f" : "$%.4f", usd);
    format_ms(ttfb, sizeof(ttfb), json_object_get(row, "ttfb_ms"));
    format_ms(dur, sizeof(dur), json_object_get(row, "duration_ms"));
    format_attempts(&att, json_object_get(row, "attempts"));
    {
        json_t *dropped = json_object_get(row, "dropped"), *d;
        size_t k;

        json_array_foreach(dropped, k, d)
        {
            gw_buf_printf(&att, "%s%s", k ? ", " : " dropped: ", json_string_value(d));
        }
    }

    cells[C_TIME] = time_s;
    cells[C_ID] = id;
    cells[C_CLIENT] = str_or_dash(row, "client");
    cells[C_MODEL] = str_or_dash(row, "model");
    cells[C_UPSTREAM] = str_or_dash(row, "upstream");
    cells[C_STATUS] = status;
    cells[C_CODE] = str_or_dash(row, "code");
    cells[C_OUTCOME] = str_or_dash(row, "outcome");
    cells[C_TOKENS] = tokens;
    cells[C_COST] = cost;
    cells[C_TTFB] = ttfb;
    cells[C_DURATION] = dur;
    cells[C_ATTEMPTS] = att.data ? att.data : "-";
    rc = cli_table_add(t, cells);
    gw_buf_fini(&att);
    return rc;
}

static int
fetch_page(const struct cli_opts *o, unsigned limit, const char *cursor, json_t **page)
{
    char path[128];
    int rc;

    if (cursor)
        snprintf(path, sizeof(path), "/control/v1/traffic?limit=%u&cursor=%s", limit, cursor);
    else
        snprintf(path, sizeof(path), "/control/v1/traffic?limit=%u", limit);
    rc = cli_api_get(o, path, page);
    if (rc == CLI_EXIT_OK && !json_is_array(json_object_get(*page, "rows"))) {
        fprintf(stderr, "gwctl: %s: the answer has no \"rows\" array\n", path);
        json_decref(*page);
        *page = NULL;
        return CLI_EXIT_ERROR;
    }
    return rc;
}

static void
print_json(json_t *j)
{
    json_dumpf(j, stdout, JSON_COMPACT | JSON_REAL_PRECISION(15));
    fputc('\n', stdout);
    fflush(stdout);
}

/* Prints the first <count> rows of <rows> (a newest-first array) oldest first. */
static int
emit_oldest_first(const struct cli_opts *o, struct cli_table *t, json_t *rows, size_t count)
{
    size_t i;

    for (i = count; i-- > 0;) {
        json_t *row = json_array_get(rows, i);

        if (o->json)
            print_json(row);
        else if (add_row(t, row) != 0)
            return CLI_EXIT_ERROR;
    }
    if (!o->json)
        cli_table_flush(t, stdout);
    return CLI_EXIT_OK;
}

/* The ids of <rows> into <ids> (TRAFFIC_FOLLOW_PAGE entries); returns how many. */
static size_t
collect_ids(json_t *rows, char ids[][TRAFFIC_ID_LEN + 1])
{
    size_t i, n = 0;
    json_t *row;

    json_array_foreach(rows, i, row)
    {
        if (n == TRAFFIC_FOLLOW_PAGE)
            break;
        snprintf(ids[n++], TRAFFIC_ID_LEN + 1, "%s", str_or_dash(row, "id"));
    }
    return n;
}

static bool
seen(char ids[][TRAFFIC_ID_LEN + 1], size_t n, const char *id)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (strncmp(ids[i], id, TRAFFIC_ID_LEN) == 0)
            return true;
    return false;
}

/* -f: show the newest <limit> rows, then poll each second for rows not in the previous
 * page (a page is the newest TRAFFIC_FOLLOW_PAGE rows, so a row older than the previous
 * page cannot reappear). Runs until interrupted or an error. */
static int
follow(const struct cli_opts *o, unsigned limit)
{
    char(*prev)[TRAFFIC_ID_LEN + 1] = gw_calloc(TRAFFIC_FOLLOW_PAGE, sizeof(*prev));
    struct cli_table t;
    json_t *page = NULL, *rows, *fresh;
    size_t n_prev, n, i;
    int rc;

    if (!prev || cli_table_init(&t, traffic_cols, C__COUNT) != 0) {
        gw_free(prev);
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    rc = fetch_page(o, TRAFFIC_FOLLOW_PAGE, NULL, &page);
    if (rc != CLI_EXIT_OK)
        goto out;
    rows = json_object_get(page, "rows");
    n_prev = collect_ids(rows, prev);
    n = json_array_size(rows) < limit ? json_array_size(rows) : limit;
    rc = emit_oldest_first(o, &t, rows, n);
    json_decref(page);
    page = NULL;
    while (rc == CLI_EXIT_OK) {
        struct timespec one = {1, 0};

        while (nanosleep(&one, &one) != 0 && errno == EINTR)
            ;
        rc = fetch_page(o, TRAFFIC_FOLLOW_PAGE, NULL, &page);
        if (rc != CLI_EXIT_OK)
            break;
        rows = json_object_get(page, "rows");
        fresh = json_array();
        if (!fresh) {
            rc = CLI_EXIT_ERROR;
            break;
        }
        /* Not in the previous page = new, even if it sorts below rows already shown
         * (a long stream is recorded when it ends). */
        for (i = 0; i < json_array_size(rows); i++) {
            json_t *row = json_array_get(rows, i);

            if (!seen(prev, n_prev, str_or_dash(row, "id")))
                json_array_append(fresh, row);
        }
        n = json_array_size(fresh);
        if (n == TRAFFIC_FOLLOW_PAGE && n_prev > 0)
            fprintf(stderr, "gwctl: more than %d new rows in a second; older ones skipped\n",
                    TRAFFIC_FOLLOW_PAGE);
        rc = emit_oldest_first(o, &t, fresh, n);
        json_decref(fresh);
        for (i = 0; i < n_prev; i++)
            prev[i][0] = '\0';
        n_prev = collect_ids(rows, prev);
        json_decref(page);
        page = NULL;
    }
out:
    json_decref(page);
    cli_table_fini(&t);
    gw_free(prev);
    return rc;
}

static int
parse_limit(const char *s, unsigned *out)
{
    char *end;
    unsigned long v;

    if (!s || !*s || strspn(s, "0123456789") != strlen(s))
        return -1;
    errno = 0;
    v = strtoul(s, &end, 10);
    if (errno || *end || v == 0 || v > TRAFFIC_LIMIT_MAX)
        return -1;
    *out = (unsigned)v;
    return 0;
}

int
cli_cmd_traffic(const struct cli_opts *o, int argc, char **argv)
{
    unsigned limit = TRAFFIC_LIMIT_DEFAULT;
    const char *cursor = NULL;
    bool follow_f = false;
    struct cli_table t;
    json_t *page = NULL, *rows, *row;
    size_t i;
    int a, rc;

    for (a = 1; a < argc; a++) {
        if (strcmp(argv[a], "-f") == 0 || strcmp(argv[a], "--follow") == 0) {
            follow_f = true;
        } else if (strcmp(argv[a], "--limit") == 0 || strncmp(argv[a], "--limit=", 8) == 0) {
            const char *v = argv[a][7] == '=' ? argv[a] + 8 : (a + 1 < argc ? argv[++a] : NULL);

            if (parse_limit(v, &limit) != 0) {
                fprintf(stderr, "gwctl: --limit expects an integer from 1 to %d\n",
                        TRAFFIC_LIMIT_MAX);
                return cli_usage();
            }
        } else if (strcmp(argv[a], "--cursor") == 0 || strncmp(argv[a], "--cursor=", 9) == 0) {
            cursor = argv[a][8] == '=' ? argv[a] + 9 : (a + 1 < argc ? argv[++a] : NULL);
            if (!cursor || !*cursor || strspn(cursor, "0123456789-") != strlen(cursor)) {
                fprintf(stderr, "gwctl: --cursor expects the \"next\" value of a page\n");
                return cli_usage();
            }
        } else {
            fprintf(stderr, "gwctl: traffic: unknown argument %s\n", argv[a]);
            return cli_usage();
        }
    }
    if (follow_f && cursor) {
        fprintf(stderr, "gwctl: traffic: -f and --cursor do not go together\n");
        return cli_usage();
    }
    if (follow_f)
        return follow(o, limit);

    rc = fetch_page(o, limit, cursor, &page);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o->json) {
        print_json(page);
        json_decref(page);
        return CLI_EXIT_OK;
    }
    if (cli_table_init(&t, traffic_cols, C__COUNT) != 0) {
        json_decref(page);
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    rows = json_object_get(page, "rows");
    json_array_foreach(rows, i, row)
    {
        if (add_row(&t, row) != 0) {
            rc = CLI_EXIT_ERROR;
            break;
        }
    }
    if (rc == CLI_EXIT_OK) {
        const char *next = json_string_value(json_object_get(page, "next"));

        cli_table_flush(&t, stdout);
        if (next)
            fprintf(stderr, "more: gwctl traffic --limit %u --cursor %s\n", limit, next);
    }
    cli_table_fini(&t);
    json_decref(page);
    return rc;
}
