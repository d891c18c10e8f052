/* SPDX-License-Identifier: MIT
 * net/probe.h - probes of cooling upstream credentials (DESIGN.md 10, issue 11 point 5):
 * once a minute (the first pass jittered after start) at most 3 credentials whose
 * heuristic cooldown has served half with at least 60 s left (core/quota.h,
 * gw_quota_probe_pick) get the upstream's model listing with that credential: GET
 * <base>/v1/models (OpenAI chat and Responses shapes; Anthropic with x-api-key and
 * anthropic-version), GET <base>/v1beta/models?pageSize=1 (Gemini). Every dialect gw
 * speaks has one, so no completion is ever spent on a probe. A 2xx clears the cooldown
 * (credential_recovered, reason "probe"); anything else backs the next probe off (2, 4,
 * 8, 15 min) and leaves the cooldown as it was. A probe is no client's request: no row,
 * no client limit, no quota window counts it; a log line says what it found. Providers
 * with `quota.probes: false` are never probed.
 * Runs on worker 0: probes need an upstream connection, and connections live in a
 * worker's pool (net/upstream.h). The environment variable GW_TEST_QUOTA_PROBE_DIV
 * (read at start, tests only) divides the pass interval and the minimum time left.
 * Owns:    the prober, its timer, the probes in flight (at most 3).
 * Threads: net_probe_new / net_probe_free on main or the worker after its loop; the
 *          timer and the exchanges on worker 0.
 * See:     net/probe.c, core/quota.h (gw_quota_probe_pick), net/quota.h, docs/config.md
 */
#ifndef GW_NET_PROBE_H
#define GW_NET_PROBE_H

struct net_worker;
struct net_probe;

/* The prober of worker <w> (its base and pool must exist): a timer on w->base that runs
 * the passes while the worker is not draining. NULL when out of memory. */
struct net_probe *net_probe_new(struct net_worker *w);

/* Frees the prober. Call after the worker's pool is freed (a probe in flight then gets
 * no callback) or before its loop ever ran. NULL is fine. */
void net_probe_free(struct net_probe *pr);

#endif
