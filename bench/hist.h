/* SPDX-License-Identifier: MIT
 * bench/hist.h - a log-linear (HDR-style) histogram of microsecond values.
 * Values below 2048 are counted exactly; above, each power of two is split
 * into 1024 buckets, so a reported percentile is within 0.05% of a recorded
 * value. Values are capped at 2^40 us. Fixed size (256 KiB), no allocation
 * per sample.
 * Owns:    its counts.
 * Threads: one writer at a time; merge after the writers stopped.
 * See:     bench/hist.c, bench/load.c
 */
#ifndef GW_BENCH_HIST_H
#define GW_BENCH_HIST_H

#include <stdbool.h>
#include <stdint.h>

#define BENCH_HIST_BUCKETS 32768

struct bench_hist {
    uint64_t count;
    uint64_t max;
    uint64_t counts[BENCH_HIST_BUCKETS];
};

/* Allocates an empty histogram; NULL when out of memory. Free with
 * bench_hist_free(). */
struct bench_hist *bench_hist_new(void);
void bench_hist_free(struct bench_hist *h);

/* Counts one value <v> (microseconds). Never allocates. */
void bench_hist_add(struct bench_hist *h, uint64_t v);

/* Adds every count of <src> into <dst>. */
void bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src);

/* The value at percentile <p> (0 < p <= 100): the midpoint of the bucket
 * holding it, never above the recorded maximum. 0 when the histogram is empty. */
uint64_t bench_hist_pct(const struct bench_hist *h, double p);

/* The next bucket at or after <*i> that holds a value: its value as bench_hist_pct
 * reports it (the midpoint, never above the maximum) in <*v>, its count in <*n>, and
 * <*i> moved past it. false when none is left. For histograms printed whole, so that
 * runs can be pooled outside this process. */
bool bench_hist_next(const struct bench_hist *h, unsigned *i, uint64_t *v, uint64_t *n);

#endif
