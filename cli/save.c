/* SPDX-License-Identifier: MIT
 * cli/save.c - `gwctl group|key|provider set NAME --file F.json|-`, `gwctl
 * group|key|provider rm NAME` (PUT and DELETE /control/v1/groups|keys|providers/{name}:
 * the gateway edits only that entry of its config file, validates the whole result,
 * replaces the file atomically and reloads) and `gwctl reload` (POST /control/v1/reload:
 * what changed, or the problems that kept the running config).
 * The entry is a JSON object with the config's field names; "name" defaults to NAME,
 * another name renames the entry (a key keeps its usage totals). Secrets in it (a
 * provider's keys, a client's key_sha256/key_env) are sent, never printed.
 * Owns:    the request body of one call.
 * Threads: the main thread only; blocks on the network and on reading the file.
 * See:     cli/cli.h, net/control.c (on_entry), net/save.c, docs/gwctl.md
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli/cli.h"
#include "cli/http.h"
#include "core/str.h"

#define SAVE_MAX_FILE (1024 * 1024)

/* The bytes of <path> ("-": standard input) into <b>; false with a message printed. */
static bool
read_input(const char *path, struct gw_buf *b)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    char chunk[8192];
    size_t n;
    bool ok = true;

    if (!f) {
        fprintf(stderr, "gwctl: cannot open %s\n", path);
        return false;
    }
    while (ok && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        ok = b->len + n <= SAVE_MAX_FILE && gw_buf_append(b, chunk, n) == GW_OK;
    if (!ok || ferror(f)) {
        fprintf(stderr, "gwctl: cannot read %s (at most 1 MiB)\n", path);
        ok = false;
    }
    if (f != stdin)
        fclose(f);
    return ok;
}

static void
print_saved(const char *kind, json_t *ans)
{
    const char *name = json_string_value(json_object_get(ans, "name"));
    const char *from = json_string_value(json_object_get(ans, "renamed_from"));
    bool saved = json_is_true(json_object_get(ans, "saved"));
    bool reloaded = json_is_true(json_object_get(ans, "reloaded"));
    const char *what = json_is_true(json_object_get(ans, "removed"))   ? "removed"
                       : json_is_true(json_object_get(ans, "created")) ? "added"
                                                                       : "replaced";

    if (!saved) {
        printf("%s %s: the config file already said so: nothing saved\n", kind, name ? name : "?");
        return;
    }
    printf("%s %s: %s%s%s in the config file", kind, name ? name : "?", what,
           from ? ", renamed from " : "", from ? from : "");
    if (reloaded) {
        printf(", saved and reloaded\n");
    } else {
        json_t *err = json_object_get(json_object_get(ans, "reload"), "error");
        const char *code = json_string_value(json_object_get(err, "code"));
        const char *msg = json_string_value(json_object_get(err, "message"));

        /* saved, but the reload that read the file kept the old config (the file was
         * changed by hand since, or gwd is stopping) */
        printf(", saved; not reloaded: %s: %s\n", code ? code : "?", msg ? msg : "see gwd's log");
    }
}

/* A reload's answer ({"reloaded", "generation", "changed": {"providers": {"added": [..],
 * "removed", "changed"}, "groups", "clients"}, "settings": [..]}): one line per list and
 * kind of change, then the settings sections. */
static void
print_reload(json_t *ans)
{
    static const char *const parts[] = {"added", "removed", "changed"};
    json_t *changed = json_object_get(ans, "changed"), *settings, *v;
    json_int_t gen = json_integer_value(json_object_get(ans, "generation"));
    const char *k;
    bool any = false;
    size_t p, i;

    json_object_foreach(changed, k, v)
    {
        for (p = 0; json_is_object(v) && p < 3; p++) {
            json_t *arr = json_object_get(v, parts[p]);

            if (!json_is_array(arr) || json_array_size(arr) == 0)
                continue;
            printf("%s %s:", k, parts[p]);
            for (i = 0; i < json_array_size(arr); i++) {
                json_t *e = json_array_get(arr, i);

                printf(" %s", json_is_string(e) ? json_string_value(e) : "?");
            }
            fputc('\n', stdout);
            any = true;
        }
    }
    settings = json_object_get(ans, "settings");
    if (json_is_array(settings) && json_array_size(settings) > 0) {
        printf("settings changed:");
        for (i = 0; i < json_array_size(settings); i++) {
            v = json_array_get(settings, i);
            printf(" %s", json_is_string(v) ? json_string_value(v) : "?");
        }
        fputc('\n', stdout);
        any = true;
    }
    printf("reloaded (generation %lld)%s\n", (long long)gen, any ? "" : ": nothing changed");
}

static int
call(const struct cli_opts *o, const char *kind, const char *method, const char *path,
     const char *body, size_t len, bool reload)
{
    json_t *ans = NULL;
    int rc = cli_api_call(o, method, path, body, len, &ans);

    if (rc != CLI_EXIT_OK)
        return rc;
    if (o->json) {
        json_dumpf(ans, stdout, JSON_COMPACT);
        fputc('\n', stdout);
    } else if (reload) {
        print_reload(ans);
    } else {
        print_saved(kind, ans);
    }
    json_decref(ans);
    return CLI_EXIT_OK;
}

static int
save_usage(const char *kind)
{
    fprintf(stderr, "gwctl: %s set NAME --file FILE.json|-, or %s rm NAME\n", kind, kind);
    return cli_usage();
}

int
cli_cmd_save(const struct cli_opts *o, int argc, char **argv)
{
    const char *kind = argv[0], *seg, *file = NULL, *v;
    struct gw_buf body = {0}, path = {0};
    bool missing = false, rm;
    json_error_t jerr;
    json_t *j;
    int i, rc;

    seg = strcmp(kind, "group") == 0 ? "groups" : strcmp(kind, "key") == 0 ? "keys" : "providers";
    if (argc < 3 || (strcmp(argv[1], "set") != 0 && strcmp(argv[1], "rm") != 0))
        return save_usage(kind);
    rm = strcmp(argv[1], "rm") == 0;
    for (i = 3; i < argc; i++) {
        if (!rm && (v = cli_flag_value(argc, argv, &i, "--file", &missing))) {
            file = v;
        } else {
            fprintf(stderr, missing ? "gwctl: %s needs a value\n" : "gwctl: unexpected %s\n",
                    argv[i]);
            return save_usage(kind);
        }
    }
    if (!rm && !file) {
        fprintf(stderr, "gwctl: %s set: give --file FILE.json (or - for standard input)\n", kind);
        return save_usage(kind);
    }
    if (strspn(argv[2], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
        strlen(argv[2])) {
        fprintf(stderr, "gwctl: %s: a name is made of a-z 0-9 . _ -\n", argv[2]);
        return CLI_EXIT_USAGE;
    }
    if (gw_buf_printf(&path, "/control/v1/%s/%s", seg, argv[2]) != GW_OK) {
        fprintf(stderr, "gwctl: out of memory\n");
        return CLI_EXIT_ERROR;
    }
    if (rm) {
        rc = call(o, kind, "DELETE", path.data, NULL, 0, false);
        gw_buf_fini(&path);
        return rc;
    }
    if (!read_input(file, &body)) {
        gw_buf_fini(&path);
        return CLI_EXIT_ERROR;
    }
    j = json_loadb(body.data ? body.data : "", body.len, 0, &jerr);
    if (!json_is_object(j)) {
        fprintf(stderr,
                "gwctl: %s: expected a JSON object (the entry, with the config's field "
                "names)%s%s\n",
                file, j ? "" : ": ", j ? "" : jerr.text);
        json_decref(j);
        gw_buf_fini(&body);
        gw_buf_fini(&path);
        return CLI_EXIT_USAGE;
    }
    json_decref(j);
    rc = call(o, kind, "PUT", path.data, body.data, body.len, false);
    gw_buf_fini(&body);
    gw_buf_fini(&path);
    return rc;
}

int
cli_cmd_reload(const struct cli_opts *o, int argc, char **argv)
{
    (void)argv;
    if (argc != 1) {
        fprintf(stderr, "gwctl: reload takes no arguments\n");
        return cli_usage();
    }
    return call(o, "reload", "POST", "/control/v1/reload", "{}", 2, true);
}
