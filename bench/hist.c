/* SPDX-License-Identifier: MIT
 * bench/hist.c - a log-linear (HDR-style) histogram of microsecond values.
 * Owns:    its counts.
 * Threads: one writer at a time.
 * See:     bench/hist.h
 */
#include "bench/hist.h"

#include "core/alloc.h"

#define LINEAR 2048u /* values below are exact */
#define SUB 1024u    /* buckets per power of two above */
#define MAX_V ((1ull << 40) - 1)

static unsigned
bucket_of(uint64_t v)
{
    unsigned k;

    if (v < LINEAR)
        return (unsigned)v;
    if (v > MAX_V)
        v = MAX_V;
    k = 63u - (unsigned)__builtin_clzll(v); /* 11..39 */
    return LINEAR + (k - 11u) * SUB + (unsigned)((v >> (k - 10u)) - SUB);
}

static void
bucket_range(unsigned b, uint64_t *lo, uint64_t *width)
{
    unsigned k, sub;

    if (b < LINEAR) {
        *lo = b;
        *width = 1;
        return;
    }
    k = (b - LINEAR) / SUB + 11u;
    sub = (b - LINEAR) % SUB + SUB;
    *lo = (uint64_t)sub << (k - 10u);
    *width = 1ull << (k - 10u);
}

struct bench_hist *
bench_hist_new(void)
{
    return gw_calloc(1, sizeof(struct bench_hist));
}

void
bench_hist_free(struct bench_hist *h)
{
    gw_free(h);
}

void
bench_hist_add(struct bench_hist *h, uint64_t v)
{
    h->counts[bucket_of(v)]++;
    h->count++;
    if (v > h->max)
        h->max = v;
}

void
bench_hist_merge(struct bench_hist *dst, const struct bench_hist *src)
{
    for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    dst->count += src->count;
    if (src->max > dst->max)
        dst->max = src->max;
}

/* The value reported for bucket <b>: its midpoint, never above the recorded maximum. */
static uint64_t
bucket_value(const struct bench_hist *h, unsigned b)
{
    uint64_t lo, width, v;

    bucket_range(b, &lo, &width);
    v = lo + width / 2;
    return v > h->max ? h->max : v;
}

uint64_t
bench_hist_pct(const struct bench_hist *h, double p)
{
    uint64_t want, seen = 0;

    if (h->count == 0)
        return 0;
    want = (uint64_t)((p / 100.0) * (double)h->count + 0.5);
    if (want < 1)
        want = 1;
    if (want > h->count)
        want = h->count;
    for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= want)
            return bucket_value(h, i);
    }
    return h->max;
}

bool
bench_hist_next(const struct bench_hist *h, unsigned *i, uint64_t *v, uint64_t *n)
{
    for (; *i < BENCH_HIST_BUCKETS; (*i)++) {
        if (h->counts[*i]) {
            *v = bucket_value(h, *i);
            *n = h->counts[*i];
            (*i)++;
            return true;
        }
    }
    return false;
}
