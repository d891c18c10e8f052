/* SPDX-License-Identifier: MIT
 * cli/cli.h - gwctl's shared pieces: global options, exit codes, the subcommands.
 * gwctl queries a running gwd through its control API (DESIGN.md 14, 15, 18) and checks
 * config files offline. Blocking, single-threaded: it is a command line tool.
 * Owns:    nothing.
 * Threads: the main thread only.
 * See:     cli/main.c, docs/gwctl.md
 */
#ifndef GW_CLI_CLI_H
#define GW_CLI_CLI_H

#include <stdbool.h>

/* Exit codes: DESIGN.md 15. */
enum cli_exit {
    CLI_EXIT_OK = 0,
    CLI_EXIT_ERROR = 1, /* connection refused, HTTP error, invalid config */
    CLI_EXIT_USAGE = 2,
};

#define CLI_DEFAULT_URL "http://127.0.0.1:8081"

/* Global flags (before the subcommand), with defaults from the environment. */
struct cli_opts {
    const char *url;   /* --url, GW_CONTROL_URL, CLI_DEFAULT_URL */
    const char *token; /* --token, GW_CONTROL_TOKEN; NULL or "" = send none */
    bool json;         /* --json: raw JSON on stdout for scripts */
};

/* Prints the usage text to stderr and returns CLI_EXIT_USAGE. */
int cli_usage(void);

/* Reads "--flag VALUE" or "--flag=VALUE" at argv[*i] (moving *i past a separate value);
 * NULL when argv[*i] is not <flag>, or with <*missing> set when the value is absent. */
const char *cli_flag_value(int argc, char **argv, int *i, const char *flag, bool *missing);

/* Subcommands. <argc>/<argv> start at the subcommand's name. Each returns an exit code
 * (enum cli_exit) after printing its output to stdout and any error to stderr. */
int cli_cmd_status(const struct cli_opts *o, int argc, char **argv);
/* GET /healthz without needing a token; 0 on 200, 1 otherwise (container HEALTHCHECK). */
int cli_cmd_health(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_traffic(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_check(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_dry_run(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_providers(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_groups(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_events(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_keys(const struct cli_opts *o, int argc, char **argv);
/* `quota [PROVIDER]`: upstream credentials, windows, leases, cooldowns, learned limits. */
int cli_cmd_quota(const struct cli_opts *o, int argc, char **argv);
/* `spec set|rm`: <argv>[1] is "set" or "rm". */
int cli_cmd_spec(const struct cli_opts *o, int argc, char **argv);
/* `gwctl group|key|provider set NAME --file F|-` and `... rm NAME` (argv[0] is the kind);
 * `gwctl reload` (cli/save.c). */
int cli_cmd_save(const struct cli_opts *o, int argc, char **argv);
int cli_cmd_reload(const struct cli_opts *o, int argc, char **argv);

#endif
