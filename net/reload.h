/* SPDX-License-Identifier: MIT
 * net/reload.h - reloads asked from any event loop and run one at a time on main's
 * loop (DESIGN.md 1, 14), with each asker's own answer posted back to its loop:
 * POST /control/v1/reload and the control API's saves ask here; SIGHUP runs the same
 * reload on main directly. Every reload, whoever asked, is announced on the operator
 * event stream (config_reloaded / config_refused, core/events.def).
 * The hand-over: an ask is queued under a mutex and main's event is made active; main
 * runs the queued asks in order (each reads the file again and reloads, so each answer
 * is the outcome of its own reload) and makes each asker's event active on the asker's
 * event_base, where the answer is delivered. Nobody blocks on anybody's loop.
 * Owns:    the queue of asks and each ask until its answer callback has run.
 * Threads: new/attach/close/free on main; net_reload_ask on any thread that runs an
 *          event_base (the answer comes on that base's thread); the run function on main.
 * See:     net/reload.c, net/main.c (the run function), net/control.c (the endpoint),
 *          core/confdiff.h (what changed), tests/e2e/test_reload_stress.py
 */
#ifndef GW_NET_RELOAD_H
#define GW_NET_RELOAD_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "core/codes.h"
#include "core/conf.h"
#include "core/confdiff.h"

struct event_base;
struct net_reload;

/* The outcome of one reload. */
struct net_reload_result {
    bool reloaded;           /* the new config is live */
    uint64_t generation;     /* the live snapshot's generation afterwards (core/snap.h) */
    struct gw_confdiff diff; /* what the reload changed (reloaded only) */
    /* Why the running config stays (refused only): the first problem's code when the file
     * was refused (all of them in <problems>), config.io when it could not be read,
     * gw.internal.nomem, gw.shutting_down when main stopped before running the ask. */
    enum gw_code code;
    char message[512];                /* one sentence for the operator, never a secret */
    struct gw_conf_problems problems; /* the config's or the price table's problems */
};

/* Frees what <res> holds; zeroed, it is reusable. */
void net_reload_result_fini(struct net_reload_result *res);

/* Runs one reload on main and fills <res> (zeroed by the caller). <source> says who
 * asked ("signal", "control", ...), for the log and the event. */
typedef void (*net_reload_run_fn)(void *arg, const char *source, struct net_reload_result *res);
/* Receives the outcome of an ask on the asker's thread. <res> lives until it returns. */
typedef void (*net_reload_done_fn)(void *arg, const struct net_reload_result *res);

/* A queue whose asks <run> serves. NULL when out of memory. Main, before the threads
 * that ask start. */
struct net_reload *net_reload_new(net_reload_run_fn run, void *arg);
/* Serves asks on <main_base> from now on (asks queued before wait until then). Main,
 * once its event_base exists. GW_E_NOMEM when the event cannot be made. */
enum gw_code net_reload_attach(struct net_reload *r, struct event_base *main_base);
/* No more reloads: every ask still queued is answered with gw.shutting_down (on its
 * asker's loop), later asks are refused. Main, once its loop has stopped, before the
 * asking threads stop. NULL is fine. */
void net_reload_close(struct net_reload *r);
/* Frees <r>. Main, after every asking thread has stopped. NULL is fine. */
void net_reload_free(struct net_reload *r);

/* At most this many asks wait at once; more are refused with gw.busy. */
#define NET_RELOAD_MAX_PENDING 64

/* Asks for a reload of the config file: <done>(<arg>, result) runs later on the thread
 * of <base>, exactly once, unless <base> stops first. <source> is a static string.
 * GW_OK when queued; else nothing is queued and <done> is never called:
 * GW_E_SHUTTING_DOWN (closed), GW_E_BUSY (NET_RELOAD_MAX_PENDING waiting), GW_E_NOMEM.
 * Any thread running <base>; never blocks beyond a short mutex. */
enum gw_code net_reload_ask(struct net_reload *r, struct event_base *base, const char *source,
                            net_reload_done_fn done, void *arg);

/* {"reloaded":true,"generation":N,"changed":{"providers":{"added":[..],"removed":[..],
 * "changed":[..]},"groups":{..},"clients":{..}},"settings":[..]} for a reload, or
 * {"reloaded":false,"generation":N,"error":{"code","message","problems":[{"code","path",
 * "value","message"}]}} for a refusal (the error object as the control API's other
 * refusals have it). Names and problems only, never a secret. A new reference, NULL
 * when out of memory. Any thread; pure. */
json_t *net_reload_result_json(const struct net_reload_result *res);

/* Queues the operator event of <res> (config_reloaded or config_refused): the body of
 * net_reload_result_json plus "type" (the event's name, as key_limit_alert has it) and
 * "source". Any thread; never blocks. */
void net_reload_announce(const struct net_reload_result *res, const char *source);

/* Reloads announced since the process started (net_reload_announce: every reload, by
 * SIGHUP, an ask or a save), by outcome: for /metrics. Any thread; relaxed reads. */
void net_reload_counts(uint64_t *reloaded, uint64_t *refused);

#endif
