/* SPDX-License-Identifier: MIT
 * net/linktest.h - the startup link test (DESIGN.md 5): the time to connect (and finish
 * the TLS handshake) to every upstream of a url-test group, the seed url-test orders by
 * until an upstream has 3 real samples. Runs once, on its own short-lived thread, with
 * blocking sockets and a timeout, so startup never waits for it.
 * Owns:    its thread.
 * Threads: start/join on main; the test on its own thread.
 * See:     net/linktest.c, core/health.h (gw_upstate_link_seed)
 */
#ifndef GW_NET_LINKTEST_H
#define GW_NET_LINKTEST_H

struct net_linktest;

/* Starts the test over the live snapshot's url-test members. NULL when there is
 * nothing to test or the thread cannot start. */
struct net_linktest *net_linktest_start(void);
/* Waits for the test to end (each connect is bounded) and frees it. NULL is fine. */
void net_linktest_join(struct net_linktest *t);

#endif
