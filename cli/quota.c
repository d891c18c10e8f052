/* SPDX-License-Identifier: MIT
 * cli/quota.c - `gwctl quota`: upstream credentials and their quotas (DESIGN.md 10, issue
 * 11) from the overview's "quota" section, one table per provider: each credential's
 * fingerprint, its windows used/limit, when the minute frees, open leases, its cooldown
 * (source, until, hits) and the limits it learned with their origin.
 * Owns:    nothing beyond one call.
 * Threads: the main thread only.
 * See:     cli/overview.c, net/quota.h (the JSON), docs/gwctl.md
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/http.h"
#include "cli/table.h"

enum { Q_MODEL, Q_CRED, Q_RPM, Q_TPM, Q_RPD, Q_TPD, Q_RESETS, Q_LEASES, Q_COOL, Q_LEARNED, Q__N };

static const struct cli_col quota_cols[Q__N] = {
    [Q_MODEL] = {"MODEL", 0, false},
    [Q_CRED] = {"CREDENTIAL", 0, false},
    [Q_RPM] = {"RPM", 0, true},
    [Q_TPM] = {"TPM", 0, true},
    [Q_RPD] = {"RPD", 0, true},
    [Q_TPD] = {"TPD", 0, true},
    [Q_RESETS] = {"MINUTE FREES", 0, true},
    [Q_LEASES] = {"LEASES", 0, true},
    [Q_COOL] = {"COOLDOWN", 0, false},
    [Q_LEARNED] = {"LEARNED", 0, false},
};

/* Seconds from now to the RFC 3339 UTC time <v> (0 when past or not a time). */
static long
secs_until(json_t *v)
{
    struct tm tm;
    const char *s = json_string_value(v);
    time_t t;

    if (!s)
        return -1;
    memset(&tm, 0, sizeof(tm));
    if (!strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))
        return -1;
    t = timegm(&tm);
    return t > time(NULL) ? (long)(t - time(NULL)) : 0;
}

/* "3/10" (used / limit), or "3" when no limit is known. */
static void
window_cell(char *buf, size_t n, json_t *w)
{
    json_t *lim = json_object_get(w, "limit");

    if (json_is_integer(lim))
        snprintf(buf, n, "%lld/%lld", (long long)json_integer_value(json_object_get(w, "used")),
                 (long long)json_integer_value(lim));
    else
        snprintf(buf, n, "%lld", (long long)json_integer_value(json_object_get(w, "used")));
}

static int
add_credential(struct cli_table *t, const char *model, json_t *c)
{
    static const char *const wins[4] = {"rpm", "tpm", "rpd", "tpd"};
    char cells[Q__N][160];
    const char *row[Q__N];
    json_t *cool = json_object_get(c, "cooldown"), *learned = json_object_get(c, "learned"), *l;
    const char *k;
    size_t off = 0, i;
    long s;

    snprintf(cells[Q_MODEL], sizeof(cells[0]), "%s", model[0] ? model : "(all)");
    snprintf(cells[Q_CRED], sizeof(cells[0]), "%s", json_string_value(json_object_get(c, "fp")));
    for (i = 0; i < 4; i++)
        window_cell(cells[Q_RPM + i], sizeof(cells[0]),
                    json_object_get(json_object_get(c, "windows"), wins[i]));
    s = secs_until(
        json_object_get(json_object_get(json_object_get(c, "windows"), "rpm"), "resets_at"));
    snprintf(cells[Q_RESETS], sizeof(cells[0]), s > 0 ? "%lds" : "-", s);
    snprintf(cells[Q_LEASES], sizeof(cells[0]), "%lld",
             (long long)json_integer_value(json_object_get(c, "leases")));
    if (json_is_object(cool))
        snprintf(cells[Q_COOL], sizeof(cells[0]), "%s until +%lds, %lld hits%s",
                 json_string_value(json_object_get(cool, "source")),
                 secs_until(json_object_get(cool, "until")),
                 (long long)json_integer_value(json_object_get(cool, "hits")),
                 json_is_true(json_object_get(cool, "authoritative")) ? ", authoritative" : "");
    else
        snprintf(cells[Q_COOL], sizeof(cells[0]), "-");
    cells[Q_LEARNED][0] = '\0';
    json_object_foreach(learned, k, l)
    {
        int w =
            snprintf(cells[Q_LEARNED] + off, sizeof(cells[0]) - off, "%s%s=%lld (%s)",
                     off ? ", " : "", k, (long long)json_integer_value(json_object_get(l, "limit")),
                     json_string_value(json_object_get(l, "origin")));

        if (w < 0 || (size_t)w >= sizeof(cells[0]) - off)
            break;
        off += (size_t)w;
    }
    if (!off)
        snprintf(cells[Q_LEARNED], sizeof(cells[0]), "-");
    for (i = 0; i < Q__N; i++)
        row[i] = cells[i];
    return cli_table_add(t, row);
}

static int
print_provider(const char *name, json_t *p)
{
    struct cli_table t;
    json_t *set, *c;
    size_t i, j;
    int rc = 0;

    if (cli_table_init(&t, quota_cols, Q__N) != 0)
        return -1;
    printf("%s (pool %s)\n", name, json_string_value(json_object_get(p, "pool")));
    json_array_foreach(json_object_get(p, "sets"), i, set)
    {
        json_array_foreach(json_object_get(set, "credentials"), j, c)
        {
            rc |= add_credential(&t, json_string_value(json_object_get(set, "model")), c);
        }
    }
    cli_table_flush(&t, stdout);
    cli_table_fini(&t);
    return rc;
}

int
cli_cmd_quota(const struct cli_opts *o, int argc, char **argv)
{
    json_t *ov = NULL, *q, *p;
    const char *name;
    int rc;

    if (argc > 2) {
        fprintf(stderr, "gwctl: quota takes at most one argument (a provider)\n");
        return cli_usage();
    }
    rc = cli_api_get(o, "/control/v1/overview", &ov);
    if (rc != CLI_EXIT_OK)
        return rc;
    q = json_object_get(ov, "quota");
    if (!json_is_object(q)) {
        fprintf(stderr, "gwctl: /control/v1/overview: the answer has no quota section\n");
        json_decref(ov);
        return CLI_EXIT_ERROR;
    }
    if (argc == 2 && !json_object_get(q, argv[1])) {
        fprintf(stderr, "gwctl: no provider named %s with credentials\n", argv[1]);
        json_decref(ov);
        return CLI_EXIT_ERROR;
    }
    if (o->json) {
        json_dumpf(argc == 2 ? json_object_get(q, argv[1]) : q, stdout,
                   JSON_COMPACT | JSON_REAL_PRECISION(15));
        fputc('\n', stdout);
        json_decref(ov);
        return CLI_EXIT_OK;
    }
    json_object_foreach(q, name, p)
    {
        if (argc == 2 && strcmp(name, argv[1]) != 0)
            continue;
        if (print_provider(name, p) != 0) {
            fprintf(stderr, "gwctl: out of memory\n");
            rc = CLI_EXIT_ERROR;
            break;
        }
    }
    json_decref(ov);
    return rc;
}
