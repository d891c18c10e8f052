/* SPDX-License-Identifier: MIT
 * cli/dry_run.c - `gwctl dry-run MODEL [--key NAME] [--body FILE]`: asks
 * POST /control/v1/dry-run which upstreams a request for MODEL would try, in order, and
 * prints them as a table with the pick marked (or, with --json, the answer as is). The
 * body file is sent byte for byte, so the gateway computes the same conversation key as
 * for the real request.
 * Owns:    the body file's bytes and the request of one call.
 * Threads: the main thread only; blocks on the file and the network.
 * See:     cli/cli.h, net/control.c (net_control_dry_run), docs/gwctl.md
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/http.h"
#include "cli/table.h"
#include "core/str.h"

/* The gateway refuses control bodies above 4 MiB. */
#define DRY_RUN_MAX_BODY (4u * 1024 * 1024)

enum {
    C_PICK,
    C_ORDER,
    C_PROVIDER,
    C_MODEL,
    C_WEIGHT,
    C_FACTOR,
    C_EFF,
    C_TTFC,
    C_SUCCESS,
    C_STATE,
    C_PRICE, /* cheapest groups only: last, so the other tables leave it out */
    C__COUNT
};

static const struct cli_col dry_run_cols[C__COUNT] = {
    [C_PICK] = {"", 1, false},
    [C_ORDER] = {"#", 0, true},
    [C_PROVIDER] = {"PROVIDER", 0, false},
    [C_MODEL] = {"MODEL", 0, false},
    [C_WEIGHT] = {"WEIGHT", 0, true},
    [C_FACTOR] = {"FACTOR", 0, true},
    [C_EFF] = {"EFF WEIGHT", 0, true},
    [C_TTFC] = {"TTFC", 0, true},
    [C_SUCCESS] = {"SUCCESS", 0, true},
    [C_STATE] = {"STATE", 0, false},
    [C_PRICE] = {"PRICE/1M IN", 0, true},
};

/* Reads <path> ("-": standard input) into <b>; 0, or -1 with a message printed. */
static int
read_body(const char *path, struct gw_buf *b)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    char chunk[16384];
    size_t n;
    int rc = 0;

    if (!f) {
        fprintf(stderr, "gwctl: %s: %s\n", path, strerror(errno));
        return -1;
    }
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (b->len + n > DRY_RUN_MAX_BODY) {
            fprintf(stderr, "gwctl: %s: larger than 4 MiB\n", path);
            rc = -1;
            break;
        }
        if (gw_buf_append(b, chunk, n) != GW_OK) {
            fprintf(stderr, "gwctl: out of memory\n");
            rc = -1;
            break;
        }
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, "gwctl: %s: %s\n", path, strerror(errno));
        rc = -1;
    }
    if (f != stdin)
        fclose(f);
    return rc;
}

/* Appends "<key>":<s as a JSON string> to <b>. */
static int
put_string(struct gw_buf *b, const char *key, const char *s)
{
    json_t *j = json_string(s);
    char *enc = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    int rc = enc && gw_buf_printf(b, "\"%s\":%s", key, enc) == GW_OK ? 0 : -1;

    free(enc); /* jansson's allocator */
    json_decref(j);
    return rc;
}

/* {"model":MODEL[,"client":KEY][,"body":<the file's bytes>]} into <req>. */
static int
build_request(struct gw_buf *req, const char *model, const char *key, const struct gw_buf *body)
{
    if (gw_buf_append(req, "{", 1) != GW_OK || put_string(req, "model", model) != 0)
        return -1;
    if (key && (gw_buf_append(req, ",", 1) != GW_OK || put_string(req, "client", key) != 0))
        return -1;
    if (body->len && (gw_buf_printf(req, ",\"body\":") != GW_OK ||
                      gw_buf_append(req, body->data, body->len) != GW_OK))
        return -1;
    return gw_buf_append(req, "}", 1) == GW_OK ? 0 : -1;
}

/* "2026-11-30T04:12:00.000Z" -> "2026-11-30 04:12:00" */
static void
short_time(char *buf, size_t size, const char *ts)
{
    snprintf(buf, size, "%.19s", ts ? ts : "-");
    if (strlen(buf) > 10 && buf[10] == 'T')
        buf[10] = ' ';
}

static int
add_cand(struct cli_table *t, json_t *k, size_t i, bool picked)
{
    char order[24], weight[24], factor[16], eff[16], ttfc[24], success[16], state[64], price[32];
    char until[24];
    const char *cells[C__COUNT];
    json_t *v;
    const char *st = json_string_value(json_object_get(k, "state"));

    snprintf(order, sizeof(order), "%zu", i + 1);
    snprintf(weight, sizeof(weight), "%lld",
             (long long)json_integer_value(json_object_get(k, "weight")));
    snprintf(factor, sizeof(factor), "%.2f", json_number_value(json_object_get(k, "factor")));
    /* 0 outside load-balance: no round there */
    v = json_object_get(k, "effective_weight");
    if (json_integer_value(v) > 0)
        snprintf(eff, sizeof(eff), "%lld", (long long)json_integer_value(v));
    else
        snprintf(eff, sizeof(eff), "-");
    v = json_object_get(k, "ttfc_ms");
    if (json_is_integer(v))
        snprintf(ttfc, sizeof(ttfc), "%lldms", (long long)json_integer_value(v));
    else
        snprintf(ttfc, sizeof(ttfc), "-");
    v = json_object_get(k, "success_rate");
    if (json_is_number(v))
        snprintf(success, sizeof(success), "%.1f%%", json_number_value(v) * 100.0);
    else
        snprintf(success, sizeof(success), "-");
    v = json_object_get(k, "paused_until");
    if (st && strcmp(st, "paused") == 0 && json_is_string(v)) {
        short_time(until, sizeof(until), json_string_value(v));
        snprintf(state, sizeof(state), "paused until %s", until);
    } else {
        snprintf(state, sizeof(state), "%s%s", st ? st : "?",
                 json_is_true(json_object_get(k, "sticky")) ? ", sticky" : "");
    }
    v = json_object_get(k, "price");
    if (json_is_number(v))
        snprintf(price, sizeof(price), "$%.4g", json_number_value(v));
    else
        snprintf(price, sizeof(price), "-");

    cells[C_PICK] = picked ? "*" : "";
    cells[C_ORDER] = order;
    cells[C_PROVIDER] = json_string_value(json_object_get(k, "provider"));
    cells[C_MODEL] = json_string_value(json_object_get(k, "model"));
    cells[C_WEIGHT] = weight;
    cells[C_FACTOR] = factor;
    cells[C_EFF] = eff;
    cells[C_TTFC] = ttfc;
    cells[C_SUCCESS] = success;
    cells[C_STATE] = state;
    cells[C_PRICE] = price;
    return cli_table_add(t, cells);
}

static void print_credentials(json_t *cands);

static int
print_table(json_t *ans)
{
    json_t *cands = json_object_get(ans, "candidates"), *k;
    const char *type = json_string_value(json_object_get(ans, "type"));
    const char *group = json_string_value(json_object_get(ans, "group"));
    const char *client = json_string_value(json_object_get(ans, "client"));
    const char *sticky = json_string_value(json_object_get(ans, "sticky"));
    const char *pick = json_string_value(json_object_get(ans, "pick"));
    bool cheapest = type && strcmp(type, "cheapest") == 0, picked = false;
    struct cli_table t;
    size_t i;
    int rc = CLI_EXIT_OK;

    if (group)
        printf("model %s: group %s (%s)", json_string_value(json_object_get(ans, "model")), group,
               type ? type : "?");
    else
        printf("model %s: the providers that list it (fallback, file order)",
               json_string_value(json_object_get(ans, "model")));
    printf(", client %s, sticky %s\n", client ? client : "-", sticky ? sticky : "-");
    if (cli_table_init(&t, dry_run_cols, cheapest ? C__COUNT : C__COUNT - 1) != 0) {
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    json_array_foreach(cands, i, k)
    {
        const char *prov = json_string_value(json_object_get(k, "provider"));
        bool is_pick = !picked && pick && prov && strcmp(pick, prov) == 0;

        picked |= is_pick;
        if (add_cand(&t, k, i, is_pick) != 0) {
            fprintf(stderr, "gwctl: out of memory\n");
            rc = CLI_EXIT_ERROR;
            break;
        }
    }
    if (rc == CLI_EXIT_OK) {
        cli_table_flush(&t, stdout);
        if (pick)
            printf("pick: %s\n", pick);
        else
            printf("pick: none (no candidate is enabled)\n");
        print_credentials(cands);
    }
    cli_table_fini(&t);
    return rc;
}

/* Each candidate's credentials (DESIGN.md 10): the one the next request would use and
 * why the others are skipped, from the candidate's "quota" member. */
static void
print_credentials(json_t *cands)
{
    json_t *k, *q, *c;
    size_t i, j;

    json_array_foreach(cands, i, k)
    {
        q = json_object_get(k, "quota");
        if (!json_is_object(q))
            continue;
        printf("credentials of %s:\n", json_string_value(json_object_get(k, "provider")));
        json_array_foreach(json_object_get(q, "credentials"), j, c)
        {
            printf("  %s  %s\n", json_string_value(json_object_get(c, "fp")),
                   json_string_value(json_object_get(c, "verdict")));
        }
    }
}

int
cli_cmd_dry_run(const struct cli_opts *o, int argc, char **argv)
{
    const char *model = NULL, *key = NULL, *body_path = NULL;
    struct gw_buf body = {0}, req = {0};
    json_t *ans = NULL;
    int a, rc;

    for (a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--key") == 0 || strncmp(argv[a], "--key=", 6) == 0) {
            key = argv[a][5] == '=' ? argv[a] + 6 : (a + 1 < argc ? argv[++a] : NULL);
            if (!key || !*key) {
                fprintf(stderr, "gwctl: --key expects a client name\n");
                return cli_usage();
            }
        } else if (strcmp(argv[a], "--body") == 0 || strncmp(argv[a], "--body=", 7) == 0) {
            body_path = argv[a][6] == '=' ? argv[a] + 7 : (a + 1 < argc ? argv[++a] : NULL);
            if (!body_path || !*body_path) {
                fprintf(stderr, "gwctl: --body expects a file (- for standard input)\n");
                return cli_usage();
            }
        } else if (argv[a][0] == '-' && argv[a][1] != '\0') {
            fprintf(stderr, "gwctl: dry-run: unknown argument %s\n", argv[a]);
            return cli_usage();
        } else if (!model) {
            model = argv[a];
        } else {
            fprintf(stderr, "gwctl: dry-run takes one MODEL\n");
            return cli_usage();
        }
    }
    if (!model || !*model) {
        fprintf(stderr, "gwctl: dry-run needs a MODEL\n");
        return cli_usage();
    }
    if (body_path) {
        json_error_t jerr;
        json_t *check;

        if (read_body(body_path, &body) != 0)
            return CLI_EXIT_ERROR;
        check = json_loadb(body.data ? body.data : "", body.len, 0, &jerr);
        if (!json_is_object(check)) {
            fprintf(stderr, "gwctl: %s: not a JSON object%s%s\n", body_path, check ? "" : ": ",
                    check ? "" : jerr.text);
            json_decref(check);
            gw_buf_fini(&body);
            return CLI_EXIT_ERROR;
        }
        json_decref(check);
    }
    if (build_request(&req, model, key, &body) != 0) {
        fprintf(stderr, "gwctl: out of memory\n");
        rc = CLI_EXIT_ERROR;
        goto out;
    }
    rc = cli_api_call(o, "POST", "/control/v1/dry-run", req.data, req.len, &ans);
    if (rc != CLI_EXIT_OK)
        goto out;
    if (o->json) {
        json_dumpf(ans, stdout, JSON_COMPACT | JSON_REAL_PRECISION(15));
        fputc('\n', stdout);
    } else {
        rc = print_table(ans);
    }
out:
    json_decref(ans);
    gw_buf_fini(&req);
    gw_buf_fini(&body);
    return rc;
}
