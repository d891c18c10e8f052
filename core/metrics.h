/* SPDX-License-Identifier: MIT
 * core/metrics.h - the per-request Prometheus series of /metrics (issue 12, DESIGN.md 14):
 * one gw_metrics table per worker, written by its worker only, summed into a scrape-local
 * table by the control thread and rendered in the Prometheus text exposition format.
 *
 * Series kept here (label values are names, never keys or credentials):
 *   gw_requests_total{client,model,upstream,status_class,code}
 *   gw_attempts_total{upstream,outcome}
 *   gw_request_duration_seconds{upstream}       histogram, GW_METRICS_BUCKETS buckets
 *   gw_time_to_first_content_seconds{upstream}  histogram, requests with first content
 *   gw_tokens_total{client,model,kind}          kind = input|output|cache_read|cache_write
 *   gw_cost_usd_total{client,model}             USD (counted in micro-dollars, rendered
 *                                               with six decimals, so sums stay exact)
 * Bounds: each label dimension (client, model, upstream) holds at most
 * GW_METRICS_MAX_NAMES names per table; further names are counted under "_other" (no
 * client or provider name can be "_other": names are [a-z0-9.-]), and so are series
 * beyond the request and usage tables' capacity. A table never allocates after
 * gw_metrics_new, so a client sending many model names cannot grow memory.
 * A request refused before its client was known has client="" and model="" (the model it
 * sent is not shown: an unauthenticated sender could put anything there).
 *
 * Concurrency (no lock, no read-modify-write shared between threads): a table's counters
 * are written only by its owner with relaxed atomic stores of "value + n", and read by the
 * scraper with relaxed atomic loads; a new name or series is published with a release
 * store (name count, series key) that the scraper reads with an acquire load, so it never
 * sees a key whose names it cannot read. Sums are exact per counter, not a snapshot
 * across counters; each histogram's _count is rendered as the sum of its buckets, so a
 * histogram is always self-consistent.
 * Cost on the data path: gw_metrics_count_row hashes the row's short names (client,
 * model, answering upstream, each attempt's upstream) in the table's own open-addressing
 * index, probes two series tables and stores counters; no allocation, no lock, no shared
 * cache line with another worker.
 * Owns:    a table owns all its memory (one block).
 * Threads: count_row on the table's owner only; gw_metrics_add reads <src> from any
 *          thread while its owner counts; new/free/add-into-dst/render on the caller's.
 * See:     core/metrics.c, net/metrics.c (live gauges, the scrape), docs/metrics.md,
 *          tests/unit/core/test_metrics.c
 */
#ifndef GW_CORE_METRICS_H
#define GW_CORE_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/row-t.h"
#include "core/str.h"

#define GW_METRICS_MAX_NAMES 256 /* per label dimension, "_other" included */
#define GW_METRICS_NAME_LEN GW_MODEL_MAX
#define GW_METRICS_OTHER "_other"

/* Request histogram bucket upper bounds in ms: 5 ms .. 120 s, then +Inf. */
#define GW_METRICS_BUCKETS 14
extern const uint32_t gw_metrics_bounds_ms[GW_METRICS_BUCKETS];

struct gw_metrics;

/* A zeroed table, or NULL when out of memory. One block of a few hundred KB, touched
 * only as series appear. */
struct gw_metrics *gw_metrics_new(void);
void gw_metrics_free(struct gw_metrics *m);

/* Counts the finished request <r> into <m>: one gw_requests_total, one observation in
 * each histogram (time to first content only when r->ttfb_ms >= 0), one
 * gw_attempts_total per attempt, and its tokens and cost. Owner thread only. */
void gw_metrics_count_row(struct gw_metrics *m, const struct gw_row *r);

/* Counts a request refused before it became a request row (net_respond_error: a bad
 * head, a wrong key, the gateway busy): one gw_requests_total with client, model and
 * upstream "", no histogram observation (its start was not timed). Owner thread only. */
void gw_metrics_count_refusal(struct gw_metrics *m, unsigned status, enum gw_code code);

/* Adds every counter of <src> into <dst>, matching series by their label values. <src>
 * may be another thread's table being counted into meanwhile (relaxed/acquire loads);
 * <dst> is the caller's. GW_OK, or GW_E_NOMEM never (no allocation): series that do
 * not fit <dst> are added under "_other". */
void gw_metrics_add(struct gw_metrics *dst, const struct gw_metrics *src);

/* Appends the families listed above, with their HELP and TYPE lines, to <b>. A family
 * with no series yet is still announced (HELP/TYPE only). GW_OK or GW_E_NOMEM. */
enum gw_code gw_metrics_render(const struct gw_metrics *m, struct gw_buf *b);

/* ---- helpers shared with net/metrics.c ---- */

/* The index of the first bound >= <v> in <bounds> (sorted, <n> of them); <n> (the +Inf
 * bucket) when <v> exceeds them all. */
unsigned gw_metrics_bucket(const uint32_t *bounds, unsigned n, uint64_t v);

/* Appends <v> as a label value of the exposition format: backslash, double quote and
 * line feed escaped (\\ \" \n); other bytes outside printable ASCII become '?', so the
 * page is always valid UTF-8. */
enum gw_code gw_metrics_append_label(struct gw_buf *b, struct gw_str v);

/* Appends "<name>_bucket{<labels>le="..."} n" lines (cumulative, +Inf last), then
 * <name>_sum (<sum> / <sum_scale>, in seconds when <sum> is in 1/<sum_scale> s) and
 * <name>_count (the +Inf value). <bounds> are in the same unit as <sum>; <labels> is
 * "" or a rendered list ending with ',' (e.g. `upstream="a",`). */
enum gw_code gw_metrics_append_histogram(struct gw_buf *b, const char *name, const char *labels,
                                         const uint32_t *bounds, unsigned n_bounds,
                                         const uint64_t *counts, uint64_t sum, uint64_t sum_scale);

#endif
