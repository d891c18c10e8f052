/* SPDX-License-Identifier: MIT
 * net/worker.h - the data-plane worker threads: one event_base each, each with its own
 * SO_REUSEPORT listening sockets (the kernel spreads accepts), its own upstream pool.
 * Owns:    the worker array and every worker's thread, base and sockets.
 * Threads: start/drain/join on main; each worker runs on its own thread.
 * See:     net/worker.c, net/net-priv.h
 */
#ifndef GW_NET_WORKER_H
#define GW_NET_WORKER_H

#include <stddef.h>

#include "core/codes.h"
#include "core/conf.h"
#include "net/deps.h"

struct net_workers;

/* Binds <n_workers> SO_REUSEPORT sockets per data-plane address of <conf> (a port 0 is
 * chosen once and shared): server.listen, plain or (server.tls without listen) TLS, then
 * server.tls.listen in TLS with conf->server.tls_ctx (net/tls.h); and starts the
 * threads. The bound addresses are written to <bound> as "host:port" separated by
 * spaces, plain first, the TLS ones also to <tls_bound>. GW_E_INTERNAL with a message in
 * <err> when an address cannot be bound. Main thread. */
enum gw_code net_workers_start(const struct gw_conf *conf, unsigned n_workers,
                               const struct net_deps *deps, struct net_workers **out, char *bound,
                               size_t bound_len, char *tls_bound, size_t tls_bound_len, char *err,
                               size_t errlen);

/* Stops accepting, lets requests in flight finish for at most <drain_secs>, then
 * closes what is left, joins every thread and frees everything. Blocks (main). */
void net_workers_stop(struct net_workers *ws, unsigned drain_secs);

#endif
