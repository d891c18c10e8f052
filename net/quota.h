/* SPDX-License-Identifier: MIT
 * net/quota.h - upstream credentials and their quotas in the running gateway (DESIGN.md
 * 10, issue 11): the registry of core/quota.h attached to each provider of a snapshot,
 * windows rebuilt from the store, the set a hop chooses its credential from, the
 * credential_cooldown / credential_recovered events, the control thread's sweep, and the
 * JSON views (control overview, gwctl quota, dry-run).
 * Owns:    nothing: main owns the registry; the sets live in it for the process's life.
 * Threads: net_quota_attach on main before a snapshot is published; net_quota_set_of and
 *          the reports on any worker; the sweep and views on the control thread.
 * See:     net/quota.c, core/quota.h, net/attempt.c, docs/ARCHITECTURE.md
 */
#ifndef GW_NET_QUOTA_H
#define GW_NET_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "core/log.h"
#include "core/quota.h"

struct gw_conf;
struct gw_conf_provider;
struct store;

/* Points every provider of <conf> at <reg>: fingerprints of its keys (keys[i].fp), the
 * name its sets have in the registry (quota_name), its (provider, "") set and, with pool
 * model, one set per listed model. A provider whose sets are new (first start, or keys
 * changed by a reload) has its windows rebuilt from <st>'s rows since the start of the
 * UTC day (and the last minute), with the rule live settlement uses. Main thread; reads
 * the store. False when out of memory. */
bool net_quota_attach(struct gw_quota_reg *reg, struct store *st, struct gw_conf *conf,
                      uint64_t now_ms);

/* The credential set of provider <p> for upstream model <model>/<len> (the provider's
 * (name, "") set with pool account, or when the registry is full), created on first use
 * of a model of a "*" provider. NULL when <p> has no registry or no keys. Any thread. */
struct gw_quota_set *net_quota_set_of(const struct gw_conf_provider *p, const char *model,
                                      size_t len);

/* True when every credential of <set> is cooling at <now_ms> (the provider then counts
 * a failure, DESIGN.md 6); <*retry_at> (may be NULL) gets the earliest moment one admits. */
bool net_quota_all_cooling(struct gw_quota_set *set, uint64_t now_ms, uint64_t *retry_at);

/* Credential <fp> of provider <p> was benched by a <status> answer: a warn line and the
 * credential_cooldown event with the cooldown's source, since, until and hits. */
void net_quota_report_cooldown(const struct gw_conf_provider *p, const char *model, const char *fp,
                               unsigned status, const struct gw_quota_cooldown *c, uint64_t now_ms,
                               const struct gw_log_ctx *ctx);

/* Credential <fp> answered again after a cooldown (<how>: "answered", or "probe": its
 * probe passed, net/probe.c): credential_recovered. */
void net_quota_report_recovered(const struct gw_conf_provider *p, const char *model, const char *fp,
                                const char *how, const struct gw_log_ctx *ctx);
/* The same for provider name <provider> (a probe outlives the snapshot it was sent from). */
void net_quota_report_recovered_named(const char *provider, const char *model, const char *fp,
                                      const char *how, const struct gw_log_ctx *ctx);

/* The control thread's sweep of every set (leases neither settled nor kept for 2 min are
 * dropped): returns how many this call dropped (logged here). */
size_t net_quota_sweep(struct gw_quota_reg *reg, uint64_t now_ms);

/* Keeps in <st> the learned limits of <conf>'s credentials learned after <since_ms>
 * (control thread, every few seconds; the writer commits them). Returns the time to pass
 * as <since_ms> next. */
uint64_t net_quota_save_learned(const struct gw_conf *conf, struct store *st, uint64_t since_ms,
                                uint64_t now_ms);

/* Leases dropped by sweeps since start (for /metrics). */
uint64_t net_quota_dropped_total(void);

/* The quota view of <conf>'s providers at <now_ms>: an object keyed by provider name,
 * each {"pool", "sets": [{"model", "credentials": [{"fp", "windows": {rpm: {used,
 * limit, resets_at}, ...}, "leases", "leases_dropped", "seen", "cooldown": null |
 * {source, since, until, hits, authoritative, capped}, "learned": {win: {limit, origin,
 * at}}}]}]}. A new reference; NULL when out of memory. Any thread. */
json_t *net_quota_view(const struct gw_conf *conf, uint64_t now_ms);

/* Dry-run: the credential the next request for <model> on <p> would use and why the
 * others are skipped (gw_quota_peek: takes no lease, moves no turn). An object
 * {"chosen": fp | null, "retry_at": ..., "credentials": [{"fp", "verdict"}]}, or NULL
 * when <p> has no quota state. */
json_t *net_quota_peek_json(const struct gw_conf_provider *p, const char *model, size_t len,
                            uint64_t est_tokens, uint64_t now_ms);

/* Credential units /metrics shows at most (sets that counted something, in registry
 * order): bounds the page at about 12 series per unit; the rest is counted in
 * gw_quota_units_omitted. */
#define NET_QUOTA_METRICS_MAX_UNITS 256

/* Appends the gw_quota_* families of docs/metrics.md for <conf>'s providers at <now_ms>
 * to <b>: per unit (provider, credential fingerprint, model) each window's used and known
 * limit, open leases, cooling 0/1 with its source, the cooldown's end, leases dropped.
 * Never a secret. False when out of memory. Control thread. */
struct gw_buf;
bool net_quota_metrics(struct gw_buf *b, const struct gw_conf *conf, uint64_t now_ms);

#endif
