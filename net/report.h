/* SPDX-License-Identifier: MIT
 * net/report.h - what the gateway tells operators about a finished request and about
 * upstream pauses: the request_finished / upstream_paused / upstream_resumed events
 * (core/events.h, followed on GET /control/v1/events) and their log lines (core/log.h):
 * one info line `code=request` per request with the row's fields. Never a body, a
 * gateway key or a credential: rows hold none, and only names and numbers are written.
 * Owns:    nothing beyond one call.
 * Threads: request and pause calls on the worker that ran the request; the sweep on the
 *          control thread. None blocks: lines and events go onto rings.
 * See:     net/report.c, core/events.h, core/log.h, docs/ARCHITECTURE.md
 */
#ifndef GW_NET_REPORT_H
#define GW_NET_REPORT_H

#include <stdint.h>

#include "core/codes.h"
#include "core/log.h"
#include "core/row-t.h"

struct gw_conf;
struct gw_conf_provider;

/* The request of row <r> is over (its row complete, about to go to the store): logs the
 * `request` line at info with <ctx> (worker, connection, request id) and, when a
 * subscriber wants it (interest and sample, core/events.h), queues its request_finished
 * event: the row as GET /control/v1/traffic renders it, plus "type". */
void net_report_request(const struct gw_row *r, const struct gw_log_ctx *ctx);

/* A request answered without a row (refused before its key was known, a listing, a
 * token count, a malformed or oversized request): its `request` line only, the fields it
 * has (<client> and <model> may be NULL), zeros and nulls for the rest. No event: events
 * are about recorded requests (the traffic view's rows). */
void net_report_unrecorded(const struct gw_log_ctx *ctx, const char *client, int status,
                           enum gw_code code, enum gw_outcome outcome, uint32_t duration_ms);

/* Upstream <p> has just been paused (gw_upstate_failure returned true) at <now_ms> by a
 * failure answered with <status> (0: none) and <code>; <retry_ms> is the Retry-After the
 * upstream asked for (0: none). Logs a warn line and queues upstream_paused with the
 * reason ("failures" or "retry_after"), the code, and until when. */
void net_report_paused(const struct gw_conf_provider *p, uint64_t now_ms, int status,
                       enum gw_code code, uint64_t retry_ms, const struct gw_log_ctx *ctx);

/* Upstream <p> is no longer paused: <reason> "answered" (a success ended the pause) or
 * "expired" (its time ran out; <until_ms> when). Logs an info line, queues
 * upstream_resumed. */
void net_report_resumed(const struct gw_conf_provider *p, const char *reason, uint64_t until_ms,
                        const struct gw_log_ctx *ctx);

/* Tells upstream_resumed for every provider of <c> whose pause ran out by <now_ms> and
 * was not told yet (gw_upstate_take_resumed). Control thread, on its events tick. */
void net_report_sweep(const struct gw_conf *c, uint64_t now_ms);

#endif
