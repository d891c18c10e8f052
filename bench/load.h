/* SPDX-License-Identifier: MIT
 * bench/load.h - `gwbench load`: closed-loop or constant-rate HTTP/1.1 load
 * generator with latency, time-to-first-content and chunk-gap percentiles.
 * Owns:    its worker threads, connections and histograms for one run.
 * Threads: the caller (main, progress and summary) plus --threads workers.
 * See:     bench/load.c, docs/gwbench.md
 */
#ifndef GW_BENCH_LOAD_H
#define GW_BENCH_LOAD_H

/* Runs `gwbench load` with the flags in <argv> (argv[0] is "load"), prints the
 * summary (a table, or one JSON object with --json) on stdout. Returns 0 when
 * the run completed (whatever the answers were), 2 on a usage error, 1 when
 * it could not start. Blocks for the whole run. */
int bench_load_main(int argc, char **argv);

#endif
