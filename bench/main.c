/* SPDX-License-Identifier: MIT
 * bench/main.c - `gwbench`: dispatches to the `upstream` and `load` subcommands.
 * Owns:    nothing.
 * Threads: main.
 * See:     bench/upstream.h, bench/load.h, docs/gwbench.md
 */
#include <stdio.h>
#include <string.h>

#include "bench/load.h"
#include "bench/upstream.h"

static void
usage(void)
{
    fprintf(stderr, "usage: gwbench upstream [flags]   fake LLM API server (Chat, Responses, "
                    "Messages, Gemini)\n"
                    "       gwbench load [flags]       HTTP load generator\n"
                    "`gwbench SUBCOMMAND --help` lists the flags; see docs/gwbench.md\n");
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        usage();
        return 2;
    }
    if (strcmp(argv[1], "upstream") == 0)
        return bench_upstream_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "load") == 0)
        return bench_load_main(argc - 1, argv + 1);
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage();
        return 0;
    }
    fprintf(stderr, "gwbench: unknown subcommand '%s'\n", argv[1]);
    usage();
    return 2;
}
