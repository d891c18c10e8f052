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

#include "core/codes.h"
#include "core/conf.h"

struct store;
struct net_control;

/* Binds <listen> and starts the control thread. The token and other settings are read
 * from the live snapshot (core/snap.h) per request, so a reload applies at once.
 * GW_E_INTERNAL with a message in <err> when the address cannot be bound. */
enum gw_code net_control_start(const struct gw_conf_addr *listen, struct store *st,
                               struct net_control **out, char *err, size_t errlen);
/* Stops the thread and frees everything. Blocks until the thread has exited. */
void net_control_stop(struct net_control *c);

#endif
