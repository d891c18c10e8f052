/* SPDX-License-Identifier: MIT
 * cli/health.c - `gwctl health`: one GET /healthz, exit 0 on 200. No token needed, so a
 * container HEALTHCHECK (Dockerfile) can run it without the control token or a curl.
 * Owns:    nothing beyond one call.
 * Threads: the main thread only; blocks on the network (10 s at most, cli/http.c).
 * See:     cli/cli.h, docs/gwctl.md, docs/deploy.md
 */
#include <stdio.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/http.h"

int
cli_cmd_health(const struct cli_opts *o, int argc, char **argv)
{
    json_t *health = NULL;
    const char *st;
    int rc;

    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "gwctl: health takes no arguments\n");
        return cli_usage();
    }
    /* Any non-2xx answer (503 while starting) or no answer is exit 1 with one line. */
    rc = cli_api_get(o, "/healthz", &health);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o->json) {
        json_dumpf(health, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    } else {
        st = json_string_value(json_object_get(health, "status"));
        printf("%s\n", st ? st : "ok");
    }
    json_decref(health);
    return CLI_EXIT_OK;
}
