/* SPDX-License-Identifier: MIT
 * net/metrics.h - the /metrics page beyond the process counters of net/control.c: each
 * worker's request series (core/metrics.h) summed at scrape time, the live state of
 * upstreams and key limits read from the config snapshot, the store's queue and batch
 * figures, and the reload counter. Every series is listed in docs/metrics.md.
 * Owns:    one gw_metrics table per worker (allocated by the worker on its first
 *          request, kept to the end of the process). Reload counts are net/reload.c's.
 * Threads: net_metrics_count on a worker (its own table only: no lock, no shared write);
 *          net_metrics_render on the control thread.
 * See:     net/metrics.c, core/metrics.h, docs/metrics.md, tests/e2e/test_metrics.py
 */
#ifndef GW_NET_METRICS_H
#define GW_NET_METRICS_H

#include <stdbool.h>

#include "core/codes.h"
#include "core/row-t.h"
#include "core/snap.h"
#include "core/str.h"

struct store;

#define NET_METRICS_MAX_WORKERS 256 /* server.workers' upper bound */

/* Counts the finished request <r> into worker <worker>'s table. On that worker only.
 * The first call allocates the table; when that fails the request goes uncounted. */
void net_metrics_count(unsigned worker, const struct gw_row *r);

/* Counts a refusal answered before the request had a row (net_respond_error), on
 * worker <worker> only. */
void net_metrics_refused(unsigned worker, int status, enum gw_code code);

/* Appends the series of docs/metrics.md that net/control.c does not write itself to
 * <b>: the request series summed over every worker, upstream and key-limit gauges of
 * the live config (acquired with <thr>), the store's (when <st> is not NULL) and the
 * reloads. GW_OK or GW_E_NOMEM. Control thread. */
enum gw_code net_metrics_render(struct gw_buf *b, struct gw_thread *thr, struct store *st);

#endif
