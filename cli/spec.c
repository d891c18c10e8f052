/* SPDX-License-Identifier: MIT
 * cli/spec.c - `gwctl spec set PROVIDER MODEL [--context-window N|none]
 * [--max-output-tokens N|none]` and `gwctl spec rm PROVIDER MODEL`: one
 * providers[].model_specs entry, set or removed through
 * PUT /control/v1/provider-model-spec. The gateway edits only that entry of its config
 * file, validates the result, replaces the file atomically and reloads; gwctl prints
 * the entry as now written (or, with --json, the answer as is).
 * Owns:    the request body of one call.
 * Threads: the main thread only; blocks on the network.
 * See:     cli/cli.h, net/control.c (on_model_spec), core/yaml_edit.h, docs/gwctl.md
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/http.h"
#include "core/str.h"

#define SPEC_PATH "/control/v1/provider-model-spec"

/* A flag's value: "none"/"null" removes the field (JSON null); a decimal number is sent
 * as is, so the gateway judges its range (0, too large) with its own codes. */
static json_t *
flag_number(const char *flag, const char *v, bool *bad)
{
    size_t n = strlen(v), i;

    if (strcmp(v, "none") == 0 || strcmp(v, "null") == 0)
        return json_null();
    for (i = 0; i < n; i++)
        if (v[i] < '0' || v[i] > '9')
            break;
    if (n == 0 || i < n || n > 18) {
        fprintf(stderr, "gwctl: %s: expected a number of tokens or \"none\", got \"%s\"\n", flag,
                v);
        *bad = true;
        return NULL;
    }
    return json_integer((json_int_t)strtoll(v, NULL, 10));
}

static void
print_field(const char *name, json_t *v)
{
    if (json_is_integer(v))
        printf("  %-18s %lld\n", name, (long long)json_integer_value(v));
    else
        printf("  %-18s -\n", name);
}

static void
print_answer(json_t *ans)
{
    const char *prov = json_string_value(json_object_get(ans, "provider"));
    const char *model = json_string_value(json_object_get(ans, "model"));
    json_t *cw = json_object_get(ans, "context_window");
    json_t *mo = json_object_get(ans, "max_output_tokens");
    bool saved = json_is_true(json_object_get(ans, "saved"));
    bool reloaded = json_is_true(json_object_get(ans, "reloaded"));

    if (json_is_null(cw) && json_is_null(mo) && !json_is_true(json_object_get(ans, "present")))
        printf("%s %s: no model spec\n", prov ? prov : "?", model ? model : "?");
    else
        printf("%s %s:\n", prov ? prov : "?", model ? model : "?");
    print_field("context_window", cw);
    print_field("max_output_tokens", mo);
    if (!saved)
        printf("the config file already said so: nothing saved\n");
    else if (reloaded)
        printf("saved to the config file and reloaded\n");
    else
        printf("saved to the config file; the reload has not shown it yet (see gwd's log)\n");
}

static int
spec_put(const struct cli_opts *o, json_t *req)
{
    char *body = json_dumps(req, JSON_COMPACT);
    json_t *ans = NULL;
    int rc;

    json_decref(req);
    if (!body) {
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    rc = cli_api_call(o, "PUT", SPEC_PATH, body, strlen(body), &ans);
    free(body); /* jansson's allocator */
    if (rc != CLI_EXIT_OK)
        return rc;
    if (o->json) {
        json_dumpf(ans, stdout, JSON_COMPACT);
        fputc('\n', stdout);
    } else {
        print_answer(ans);
    }
    json_decref(ans);
    return CLI_EXIT_OK;
}

int
cli_cmd_spec(const struct cli_opts *o, int argc, char **argv)
{
    json_t *req, *cw = NULL, *mo = NULL;
    bool rm, missing = false, bad = false;
    const char *v;
    int i;

    if (argc < 4 || (strcmp(argv[1], "set") != 0 && strcmp(argv[1], "rm") != 0)) {
        fprintf(stderr, "gwctl: spec set PROVIDER MODEL [--context-window N|none] "
                        "[--max-output-tokens N|none], or spec rm PROVIDER MODEL\n");
        return cli_usage();
    }
    rm = strcmp(argv[1], "rm") == 0;
    for (i = 4; i < argc && !bad; i++) {
        if (!rm && (v = cli_flag_value(argc, argv, &i, "--context-window", &missing))) {
            json_decref(cw);
            cw = flag_number("--context-window", v, &bad);
        } else if (!rm && (v = cli_flag_value(argc, argv, &i, "--max-output-tokens", &missing))) {
            json_decref(mo);
            mo = flag_number("--max-output-tokens", v, &bad);
        } else {
            fprintf(stderr,
                    missing ? "gwctl: %s needs a value\n" : "gwctl: spec %s: unexpected %s\n",
                    missing ? argv[i] : argv[1], argv[i]);
            bad = true;
        }
    }
    if (!bad && !rm && !cw && !mo) {
        fprintf(stderr, "gwctl: spec set: give --context-window and/or --max-output-tokens\n");
        bad = true;
    }
    if (bad) {
        json_decref(cw);
        json_decref(mo);
        return cli_usage();
    }
    if (rm) {
        cw = json_null();
        mo = json_null();
    }
    req = json_pack("{s:s,s:s}", "provider", argv[2], "model", argv[3]);
    if (!req) {
        json_decref(cw);
        json_decref(mo);
    }
    if (!req || (cw && json_object_set_new(req, "context_window", cw) != 0) ||
        (mo && json_object_set_new(req, "max_output_tokens", mo) != 0)) {
        json_decref(req);
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    return spec_put(o, req);
}
