/* SPDX-License-Identifier: MIT
 * cli/events.c - `gwctl events`: follows GET /control/v1/events (SSE) and prints each
 * event as it comes: one line for people, or with --json the event's JSON document.
 * Runs until the gateway closes the stream (or the user stops it).
 * Owns:    nothing beyond one call.
 * Threads: the main thread only.
 * See:     cli/cli.h, net/control.c, docs/gwctl.md
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/http.h"

struct events_state {
    const struct cli_opts *o;
    char event[64];
};

static int
on_line(void *arg, const char *line)
{
    struct events_state *st = arg;

    if (strncmp(line, "event: ", 7) == 0) {
        snprintf(st->event, sizeof(st->event), "%s", line + 7);
        return 0;
    }
    if (strncmp(line, "data: ", 6) != 0)
        return 0; /* comments, blank lines, chunk sizes */
    if (st->o->json) {
        printf("%s\n", line + 6);
    } else {
        json_t *j = json_loads(line + 6, 0, NULL);

        if (j && strcmp(st->event, "key_limit_alert") == 0)
            printf("%-16s %-12s %-6s %-8s %3lld%%  %g/%g  resets %s\n", st->event,
                   json_string_value(json_object_get(j, "client")),
                   json_string_value(json_object_get(j, "per")),
                   json_string_value(json_object_get(j, "measure")),
                   (long long)json_integer_value(json_object_get(j, "percent")),
                   json_number_value(json_object_get(j, "used")),
                   json_number_value(json_object_get(j, "max")),
                   json_string_value(json_object_get(j, "resets_at")));
        else
            printf("%-16s %s\n", st->event, line + 6);
        json_decref(j);
    }
    fflush(stdout);
    return 0;
}

int
cli_cmd_events(const struct cli_opts *o, int argc, char **argv)
{
    struct events_state st = {o, ""};
    char err[256];

    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "gwctl: events takes no arguments\n");
        return cli_usage();
    }
    if (cli_http_stream(o, "/control/v1/events", on_line, &st, err, sizeof(err)) != 0) {
        fprintf(stderr, "gwctl: %s\n", err);
        return CLI_EXIT_ERROR;
    }
    return CLI_EXIT_OK;
}
