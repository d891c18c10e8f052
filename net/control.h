/* SPDX-License-Identifier: MIT
 * net/control.h - the control thread: the control API on control.listen (DESIGN.md 14,
 * 18): /healthz, /readyz, /metrics, /control/v1/version, /control/v1/traffic,
 * /control/v1/overview, /control/v1/events, POST /control/v1/dry-run and
 * PUT /control/v1/provider-model-spec (saves one model_specs entry to the config file
 * at deps->conf_path, then reloads by sending the process SIGHUP), POST /control/v1/reload
 * (asks main for a reload through deps->reload and answers what changed), with the
 * bearer token from control.token_env compared in constant time.
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
#include "net/deps.h"
#include "net/reload.h"

struct gw_sticky;
struct net_control;

/* Binds <listen> and starts the control thread. The token and other settings are read
 * from the live snapshot (core/snap.h) per request, so a reload applies at once.
 * <deps> is copied; the objects it points at are borrowed and must outlive
 * net_control_stop (deps->store NULL: traffic answers 503 and /metrics has no store
 * counters; deps->sticky NULL: dry-runs show no stickiness; deps->conf_path NULL:
 * model-spec saves answer 503). <deps> itself may be NULL (all NULL).
 * Caveat: a model-spec save sends SIGHUP to the process, so with conf_path set the
 * caller must handle SIGHUP (gwd's main reloads on it) before serving saves.
 * GW_E_INTERNAL with a message in <err> when the address cannot be bound. */
enum gw_code net_control_start(const struct gw_conf_addr *listen, const struct net_deps *deps,
                               struct net_control **out, char *err, size_t errlen);
/* Stops the thread and frees everything. Blocks until the thread has exited. NULL is
 * fine. Main thread (the caller of net_control_start); needs evthread_use_pthreads(). */
void net_control_stop(struct net_control *c);

/* Where the process is, for /healthz and /readyz on the control port (DESIGN.md 4):
 * STARTING until the workers' listeners accept connections (both answer 503
 * gw.starting), SERVING (both 200), DRAINING after SIGTERM (/healthz 200, /readyz 503
 * gw.shutting_down). A new control thread is STARTING. */
enum net_control_phase {
    NET_CONTROL_STARTING,
    NET_CONTROL_SERVING,
    NET_CONTROL_DRAINING,
};

/* Sets the phase of <c> (NULL is fine). gwd's main calls it with SERVING once
 * net_workers_start has returned (its listeners are bound and listening) and with
 * DRAINING when a stop signal arrives. Any thread; never blocks. */
void net_control_set_phase(struct net_control *c, enum net_control_phase phase);

/* The port <c> is bound to (the kernel's choice when control.listen asked for port 0).
 * Any thread; constant after net_control_start. */
uint16_t net_control_port(const struct net_control *c);

/* Asks main to reload the config file (net/reload.h: one reload per ask, run in order
 * on main's loop) and calls <done>(<arg>, outcome) later on the control thread, exactly
 * once, unless the control thread stops first. The outcome says what changed
 * (core/confdiff.h) or why the running config stays; net_reload_result_json renders it.
 * What POST /control/v1/reload uses; a save handler calls it after replacing the file
 * to answer with the diff. <source> ("control", "save", ...) is a static string shown
 * in the log line and the config_reloaded / config_refused event.
 * GW_OK when asked; otherwise <done> is never called and the caller answers at once:
 * GW_E_SHUTTING_DOWN (stopping, or no reload queue in deps), GW_E_BUSY (too many
 * waiting), GW_E_NOMEM. Control thread only; never blocks. */
enum gw_code net_control_reload(struct net_control *c, const char *source, net_reload_done_fn done,
                                void *arg);

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

/* The body of GET /control/v1/overview for config <c> at <now_ms> (wall clock, ms since
 * the epoch): {providers, groups, keys, failover} as in docs/gwctl.md. Health comes from
 * each provider's upstate (gw_upstate_facts); slots and key limits are not tracked yet,
 * so in_flight and waiting are 0 and limits []. Returns a new reference, NULL when out of
 * memory. Any thread holding <c> (an acquired snapshot); never blocks beyond the
 * upstates' spinlocks. */
json_t *net_control_overview_json(const struct gw_conf *c, uint64_t now_ms);

/* Answers POST /control/v1/dry-run: <req>/<len> are the request body bytes
 * ({"model", "client"?, "body"?}, docs/gwctl.md). Orders the candidates with
 * gw_route_order(advance = false), exactly as the data plane would for that client and
 * body at <now_ms>, without charging a load-balance round. Stickiness is looked up in
 * <sticky> (may be NULL) when both a client and a body are given.
 * GW_OK and the answer in <*out> (a new reference), or, with <*out> NULL and a message
 * for the caller in <why>: GW_E_BAD_REQUEST (not JSON, wrong field types, unknown
 * field, a body the Chat Completions parser refuses), GW_E_CONTROL_UNKNOWN_CLIENT,
 * GW_E_MODEL_NOT_ALLOWED (outside the client's scope), GW_E_MODEL_NOT_FOUND, GW_E_NOMEM.
 * Any thread holding <conf>; never blocks beyond short spinlocks. */
enum gw_code net_control_dry_run(const struct gw_conf *conf, struct gw_sticky *sticky,
                                 const char *req, size_t len, uint64_t now_ms, json_t **out,
                                 char *why, size_t whylen);

#endif
