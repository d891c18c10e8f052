/* SPDX-License-Identifier: MIT
 * cli/status.c - `gwctl status`: GET /healthz and /control/v1/version, printed as a small
 * table (or, with --json, one merged JSON object).
 * Owns:    nothing beyond one call.
 * Threads: the main thread only; blocks on the network.
 * See:     cli/cli.h, docs/gwctl.md
 */
#include <stdio.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/http.h"
#include "cli/table.h"

int
cli_cmd_status(const struct cli_opts *o, int argc, char **argv)
{
    static const struct cli_col cols[] = {{NULL, 0, false}, {NULL, 0, false}};
    json_t *health = NULL, *version = NULL, *merged;
    struct cli_table t;
    const char *st;
    char api[32];
    int rc;

    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "gwctl: status takes no arguments\n");
        return cli_usage();
    }
    rc = cli_api_get(o, "/healthz", &health);
    if (rc != CLI_EXIT_OK)
        return rc;
    rc = cli_api_get(o, "/control/v1/version", &version);
    if (rc != CLI_EXIT_OK) {
        json_decref(health);
        return rc;
    }
    if (o->json) {
        merged = json_pack("{s:s}", "url", o->url);
        if (merged) {
            json_object_update(merged, health);
            json_object_update(merged, version);
            json_dumpf(merged, stdout, JSON_INDENT(2));
            fputc('\n', stdout);
        }
        json_decref(merged);
        json_decref(health);
        json_decref(version);
        return merged ? CLI_EXIT_OK : CLI_EXIT_ERROR;
    }
    st = json_string_value(json_object_get(health, "status"));
    snprintf(api, sizeof(api), "%lld",
             (long long)json_integer_value(json_object_get(version, "control_api_version")));
    if (cli_table_init(&t, cols, 2) != 0) {
        rc = CLI_EXIT_ERROR;
    } else {
        const char *r1[] = {"url", o->url};
        const char *r2[] = {"health", st ? st : "?"};
        const char *r3[] = {"api version", api};
        const char *r4[] = {"gw version",
                            json_string_value(json_object_get(version, "gw_version"))};

        if (cli_table_add(&t, r1) || cli_table_add(&t, r2) || cli_table_add(&t, r3) ||
            cli_table_add(&t, r4))
            rc = CLI_EXIT_ERROR;
        else
            cli_table_flush(&t, stdout);
        cli_table_fini(&t);
    }
    json_decref(health);
    json_decref(version);
    return rc;
}
