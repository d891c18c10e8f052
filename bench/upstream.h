/* SPDX-License-Identifier: MIT
 * bench/upstream.h - `gwbench upstream`: a fake LLM API server (OpenAI Chat
 * Completions and Responses, Anthropic Messages, Google Gemini) with paced
 * streams, fault modes and /_bench/ introspection endpoints.
 * Owns:    its listeners, worker threads and connections, for the life of the process.
 * Threads: the caller (main) plus --threads workers, one event_base each.
 * See:     bench/upstream.c, docs/gwbench.md
 */
#ifndef GW_BENCH_UPSTREAM_H
#define GW_BENCH_UPSTREAM_H

/* Runs `gwbench upstream` with the flags in <argv> (argv[0] is "upstream").
 * Prints "gwbench upstream listening on 127.0.0.1:PORT" once listening and
 * serves until SIGTERM/SIGINT, then exits the process with status 0. Returns
 * only on a usage or startup error: 2 for usage, 1 otherwise. Blocks. */
int bench_upstream_main(int argc, char **argv);

#endif
