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

/* Binds <n_workers> SO_REUSEPORT sockets per address of <listen> (a port 0 is chosen
 * once and shared) and starts the threads. The bound addresses are written to <bound>
 * as "host:port" separated by spaces. GW_E_INTERNAL with a message in <err> when an
 * address cannot be bound. Main thread. */
enum gw_code net_workers_start(const struct gw_conf_addr *listen, size_t n_listen,
                               unsigned n_workers, const struct net_deps *deps,
                               struct net_workers **out, char *bound, size_t bound_len, char *err,
                               size_t errlen);

/* Stops accepting, lets requests in flight finish for at most <drain_secs>, then
 * closes what is left, joins every thread and frees everything. Blocks (main). */
void net_workers_stop(struct net_workers *ws, unsigned drain_secs);

#endif
