/* SPDX-License-Identifier: MIT
 * net/control.h - the control thread: the control API on control.listen (DESIGN.md 14,
 * 18): /healthz, /metrics, /control/v1/version, /control/v1/traffic, with the bearer
 * token from control.token_env compared in constant time.
 * Owns:    its thread, event_base and evhttp listener.
 * Threads: start/stop on main; everything else on the control thread.
 * See:     net/control.c, cli/ (gwctl), tests/e2e/test_control.py
 */
#ifndef GW_NET_CONTROL_H
#define GW_NET_CONTROL_H

#include <stdint.h>

#include <jansson.h>

#include "core/codes.h"
#include "core/conf.h"
#include "core/row-t.h"

struct store;
struct net_control;

/* Binds <listen> and starts the control thread. The token and other settings are read
 * from the live snapshot (core/snap.h) per request, so a reload applies at once.
 * GW_E_INTERNAL with a message in <err> when the address cannot be bound. */
enum gw_code net_control_start(const struct gw_conf_addr *listen, struct store *st,
                               struct net_control **out, char *err, size_t errlen);
/* Stops the thread and frees everything. Blocks until the thread has exited. NULL is
 * fine. Main thread (the caller of net_control_start); needs evthread_use_pthreads(). */
void net_control_stop(struct net_control *c);

/* The port <c> is bound to (the kernel's choice when control.listen asked for port 0).
 * Any thread; constant after net_control_start. */
uint16_t net_control_port(const struct net_control *c);

/* The control API version answered by /control/v1/version, and the gateway's version. */
#define NET_CONTROL_API_VERSION 1
#define NET_CONTROL_GW_VERSION "0.1.0"

/* Renders <r> as the traffic row object of DESIGN.md 18: id, ts (RFC 3339 UTC with
 * milliseconds), client, model, upstream, status, code, outcome, usage, cost_usd,
 * ttfb_ms, duration_ms, tokens_per_sec, queued_ms, stream, attempts. Empty strings, GW_OK
 * codes, ttfb -1 and attempt status 0 render as null; bytes that are not UTF-8 become
 * '?'. Returns a new reference (caller json_decref()s it), NULL when out of memory.
 * Any thread; pure. */
json_t *net_control_row_json(const struct gw_row *r);

#endif
