/* SPDX-License-Identifier: MIT
 * cli/main.c - gwctl's main(): global flags, environment defaults, subcommand dispatch.
 *   gwctl [--url URL] [--token T] [--json] SUBCOMMAND ...
 * Owns:    nothing beyond the process.
 * Threads: the main thread only.
 * See:     cli/cli.h, docs/gwctl.md
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void
usage_print(FILE *f)
{
    fputs("usage: gwctl [--url URL] [--token TOKEN] [--json] SUBCOMMAND [ARGS]\n"
          "\n"
          "subcommands:\n"
          "  status                   health and API version of the gateway\n"
          "  health                   GET /healthz (no token): exit 0 when it answers 200\n"
          "  traffic [--limit N] [--cursor C] [-f]\n"
          "                           recent requests, newest first (-f: follow)\n"
          "  providers                upstreams: state, pause, slots, latency, success\n"
          "  groups                   groups: type, members, weights, balance_by\n"
          "  keys                     gateway keys: concurrency, each limit's use and reset\n"
          "  quota [PROVIDER]         upstream credentials: windows used/limit, leases,\n"
          "                           cooldowns (source, until, hits), learned limits\n"
          "  dry-run MODEL [--key NAME] [--body FILE]\n"
          "                           the upstreams a request would try, in order\n"
          "  events [--type T,..] [--client NAME] [--sample R]\n"
          "                           follow the gateway's events (request_finished,\n"
          "                           upstream_paused/resumed, key_limit_alert, ...)\n"
          "  spec set PROVIDER MODEL [--context-window N|none] [--max-output-tokens N|none]\n"
          "  spec rm PROVIDER MODEL   set or remove a providers[].model_specs entry in the\n"
          "                           gateway's config file (saved, then reloaded)\n"
          "  group set NAME --file F.json|-\n"
          "  key set NAME --file F.json|-\n"
          "  provider set NAME --file F.json|-\n"
          "                           add or replace one groups/clients/providers entry in\n"
          "                           the gateway's config file (a JSON object with the\n"
          "                           config's field names; another \"name\" renames it)\n"
          "  group|key|provider rm NAME\n"
          "                           remove that entry (saved, then reloaded)\n"
          "  reload                   reload the config file, print what changed\n"
          "  check FILE               validate a config file offline\n"
          "\n"
          "global flags (before the subcommand):\n"
          "  --url URL      control API address (env GW_CONTROL_URL, default " CLI_DEFAULT_URL ")\n"
          "  --token TOKEN  control token (env GW_CONTROL_TOKEN)\n"
          "  --json         print JSON for scripts\n"
          "\n"
          "exit codes: 0 ok, 1 error, 2 usage\n",
          f);
}

int
cli_usage(void)
{
    usage_print(stderr);
    return CLI_EXIT_USAGE;
}

const char *
cli_flag_value(int argc, char **argv, int *i, const char *flag, bool *missing)
{
    size_t n = strlen(flag);

    if (strncmp(argv[*i], flag, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = true;
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

int
main(int argc, char **argv)
{
    struct cli_opts o = {0};
    const char *v, *cmd;
    bool missing = false;
    int i;

    o.url = getenv("GW_CONTROL_URL");
    if (!o.url || !*o.url)
        o.url = CLI_DEFAULT_URL;
    o.token = getenv("GW_CONTROL_TOKEN");
    for (i = 1; i < argc && argv[i][0] == '-'; i++) {
        if ((v = cli_flag_value(argc, argv, &i, "--url", &missing)))
            o.url = v;
        else if ((v = cli_flag_value(argc, argv, &i, "--token", &missing)))
            o.token = v;
        else if (strcmp(argv[i], "--json") == 0)
            o.json = true;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage_print(stdout);
            return CLI_EXIT_OK;
        } else {
            if (!missing)
                fprintf(stderr, "gwctl: unknown flag %s\n", argv[i]);
            else
                fprintf(stderr, "gwctl: %s needs a value\n", argv[i]);
            return cli_usage();
        }
    }
    if (i >= argc) {
        fprintf(stderr, "gwctl: no subcommand\n");
        return cli_usage();
    }
    cmd = argv[i];
    if (strcmp(cmd, "status") == 0)
        return cli_cmd_status(&o, argc - i, argv + i);
    if (strcmp(cmd, "health") == 0)
        return cli_cmd_health(&o, argc - i, argv + i);
    if (strcmp(cmd, "traffic") == 0)
        return cli_cmd_traffic(&o, argc - i, argv + i);
    if (strcmp(cmd, "quota") == 0)
        return cli_cmd_quota(&o, argc - i, argv + i);
    if (strcmp(cmd, "providers") == 0)
        return cli_cmd_providers(&o, argc - i, argv + i);
    if (strcmp(cmd, "groups") == 0)
        return cli_cmd_groups(&o, argc - i, argv + i);
    if (strcmp(cmd, "keys") == 0)
        return cli_cmd_keys(&o, argc - i, argv + i);
    if (strcmp(cmd, "spec") == 0)
        return cli_cmd_spec(&o, argc - i, argv + i);
    if (strcmp(cmd, "group") == 0 || strcmp(cmd, "key") == 0 || strcmp(cmd, "provider") == 0)
        return cli_cmd_save(&o, argc - i, argv + i);
    if (strcmp(cmd, "reload") == 0)
        return cli_cmd_reload(&o, argc - i, argv + i);
    if (strcmp(cmd, "events") == 0)
        return cli_cmd_events(&o, argc - i, argv + i);
    if (strcmp(cmd, "dry-run") == 0)
        return cli_cmd_dry_run(&o, argc - i, argv + i);
    if (strcmp(cmd, "check") == 0)
        return cli_cmd_check(&o, argc - i, argv + i);
    if (strcmp(cmd, "help") == 0) {
        usage_print(stdout);
        return CLI_EXIT_OK;
    }
    fprintf(stderr, "gwctl: unknown subcommand %s\n", cmd);
    return cli_usage();
}
