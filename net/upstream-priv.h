/* SPDX-License-Identifier: MIT
 * net/upstream-priv.h - test hooks of the upstream client, for net/ and its unit tests
 * only (STYLE.md 4: no other module includes a -priv.h).
 * Owns:    nothing.
 * Threads: the pool's worker.
 * See:     net/upstream.c, tests/unit/net/test_upstream.c
 */
#ifndef GW_NET_UPSTREAM_PRIV_H
#define GW_NET_UPSTREAM_PRIV_H

#include "net/upstream.h"

/* Changes how long connections of <p> stay idle before they are closed (default 60 s)
 * for connections put back from now on. Returns false when out of memory (unchanged).
 * Tests use it to see the idle timeout without waiting a minute. */
bool net_uppool_set_idle_ms(struct net_uppool *p, unsigned ms);

#endif
