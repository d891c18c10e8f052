/* SPDX-License-Identifier: MIT
 * cli/events.c - `gwctl events [--type T,..] [--client NAME] [--sample R]`: follows
 * GET /control/v1/events (SSE) with that filter and prints each event as it comes: one
 * line for people, or with --json the event's JSON document.
 * Runs until the gateway closes the stream (or the user stops it).
 * Owns:    nothing beyond one call.
 * Threads: the main thread only.
 * See:     cli/cli.h, net/control.c, docs/gwctl.md
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/http.h"
#include "core/events.h"
#include "core/str.h"

struct events_state {
    const struct cli_opts *o;
    char event[64];
};

static const char *
str_or_dash(json_t *j, const char *key)
{
    const char *s = json_string_value(json_object_get(j, key));

    return s && *s ? s : "-";
}

/* One line for people per event kind; the JSON as is for kinds it does not know. */
static void
print_human(const char *event, json_t *j, const char *raw)
{
    if (!j) {
        printf("%-17s %s\n", event, raw);
    } else if (strcmp(event, "key_limit_alert") == 0) {
        printf("%-17s %-12s %-6s %-8s %3lld%%  %g/%g  resets %s\n", event, str_or_dash(j, "client"),
               str_or_dash(j, "per"), str_or_dash(j, "measure"),
               (long long)json_integer_value(json_object_get(j, "percent")),
               json_number_value(json_object_get(j, "used")),
               json_number_value(json_object_get(j, "max")), str_or_dash(j, "resets_at"));
    } else if (strcmp(event, "request_finished") == 0) {
        json_t *u = json_object_get(j, "usage");

        printf("%-17s %s %-12s %-16s -> %-12s %3lld %-24s %zu att  %lld/%lld tok  $%.6f  %lld ms\n",
               event, str_or_dash(j, "id"), str_or_dash(j, "client"), str_or_dash(j, "model"),
               str_or_dash(j, "upstream"),
               (long long)json_integer_value(json_object_get(j, "status")), str_or_dash(j, "code"),
               json_array_size(json_object_get(j, "attempts")),
               (long long)json_integer_value(json_object_get(u, "input_tokens")),
               (long long)json_integer_value(json_object_get(u, "output_tokens")),
               json_number_value(json_object_get(j, "cost_usd")),
               (long long)json_integer_value(json_object_get(j, "duration_ms")));
    } else if (strcmp(event, "upstream_paused") == 0) {
        printf("%-17s %-12s until %s (%s, %s)\n", event, str_or_dash(j, "provider"),
               str_or_dash(j, "until"), str_or_dash(j, "reason"), str_or_dash(j, "code"));
    } else if (strcmp(event, "upstream_resumed") == 0) {
        printf("%-17s %-12s (%s)\n", event, str_or_dash(j, "provider"), str_or_dash(j, "reason"));
    } else if (strcmp(event, "events_dropped") == 0) {
        printf("%-17s %lld (%s)\n", event,
               (long long)json_integer_value(json_object_get(j, "dropped")),
               str_or_dash(j, "reason"));
    } else {
        printf("%-17s %s\n", event, raw);
    }
}

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

        print_human(st->event, j, line + 6);
        json_decref(j);
    }
    fflush(stdout);
    return 0;
}

/* The value of option <name> at argv[*a] ("--name V" or "--name=V"), or NULL when this
 * is not that option; *<missing> when it is but has no value. */
static const char *
opt_value(int argc, char **argv, int *a, const char *name, bool *missing)
{
    size_t n = strlen(name);

    if (strncmp(argv[*a], name, n) != 0)
        return NULL;
    if (argv[*a][n] == '=')
        return argv[*a] + n + 1;
    if (argv[*a][n] != '\0')
        return NULL;
    if (*a + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    return argv[++*a];
}

int
cli_cmd_events(const struct cli_opts *o, int argc, char **argv)
{
    struct events_state st = {o, ""};
    const char *type = NULL, *client = NULL, *sample = NULL, *bad;
    struct gw_event_filter f;
    struct gw_buf path = {0};
    char err[256];
    size_t bad_len;
    int a, rc;

    gw_event_filter_init(&f);
    for (a = 1; a < argc; a++) {
        bool missing = false;
        const char *v;

        if ((v = opt_value(argc, argv, &a, "--type", &missing)) != NULL)
            type = v;
        else if (!missing && (v = opt_value(argc, argv, &a, "--client", &missing)) != NULL)
            client = v;
        else if (!missing && (v = opt_value(argc, argv, &a, "--sample", &missing)) != NULL)
            sample = v;
        if (missing || !v) {
            fprintf(stderr, "gwctl: events: %s %s\n", missing ? "no value for" : "unknown argument",
                    argv[a]);
            return cli_usage();
        }
    }
    /* Checked here, with the gateway's own rules, so a typo is a usage error. */
    if (type && gw_event_filter_set_types(&f, type, &bad, &bad_len) != GW_OK) {
        fprintf(stderr, "gwctl: events: --type: no event is named \"%.*s\"\n", (int)bad_len, bad);
        return cli_usage();
    }
    if (client && gw_event_filter_set_client(&f, client) != GW_OK) {
        fprintf(stderr, "gwctl: events: --client: expected a client name\n");
        return cli_usage();
    }
    if (client && strspn(client, "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(client)) {
        fprintf(stderr, "gwctl: events: --client: names are [a-z0-9._-]\n");
        return cli_usage();
    }
    if (sample && gw_event_filter_set_sample(&f, sample) != GW_OK) {
        fprintf(stderr, "gwctl: events: --sample: expected a rate from 0 to 1\n");
        return cli_usage();
    }
    /* Every value is checked to hold only characters a query may carry as they are. */
    gw_buf_printf(&path, "/control/v1/events");
    if (type || client || sample)
        gw_buf_printf(&path, "?%s%s%s%s%s%s%s%s", type ? "type=" : "", type ? type : "",
                      type && (client || sample) ? "&" : "", client ? "client=" : "",
                      client ? client : "", client && sample ? "&" : "", sample ? "sample=" : "",
                      sample ? sample : "");
    if (!path.data) {
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    rc = cli_http_stream(o, path.data, on_line, &st, err, sizeof(err));
    gw_buf_fini(&path);
    if (rc != 0) {
        fprintf(stderr, "gwctl: %s\n", err);
        return CLI_EXIT_ERROR;
    }
    return CLI_EXIT_OK;
}
