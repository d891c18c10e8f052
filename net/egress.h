/* SPDX-License-Identifier: MIT
 * net/egress.h - the trust of each provider's TLS upstream: providers[].ca_file read
 * into an SSL_CTX that trusts its certificates besides the system CAs (an upstream
 * behind a corporate TLS inspector). The proxy side of egress is in net/upstream.c.
 * Owns:    every such SSL_CTX, from the load that made it to net_egress_shutdown.
 * Threads: main (startup, reload, --check); the contexts are then used, read-only, by
 *          the workers and the link test.
 * See:     net/egress.c, core/conf.h (gw_conf_provider.ca_file, tls_ctx), docs/config.md
 */
#ifndef GW_NET_EGRESS_H
#define GW_NET_EGRESS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/conf.h"

/* For every provider of <conf> with a ca_file: reads the file and points the
 * provider's tls_ctx at a context trusting its PEM certificates besides the system
 * CAs. One context per (path, content): a reload with the same file reuses it, a
 * changed file gets a new one, and contexts are never freed before
 * net_egress_shutdown, so connections of an older snapshot keep theirs. A file that
 * cannot be read or holds no certificate is a problem (config.ca_file) in <probs>.
 * True when every file was good. Main thread only. */
bool net_egress_attach(struct gw_conf *conf, struct gw_conf_problems *probs);

/* NULL when the PEM file at <path> is readable and holds a certificate, else why not
 * (in <why>): struct gw_conf_env's check_ca_file, so that gw_conf_parse reports it with
 * every other problem of the file. Any thread. */
const char *net_egress_ca_check(void *arg, const char *path, char *why, size_t why_size);

/* What gwd's config loads read (gw_conf_parse): the process environment, SHA-256,
 * net_egress_ca_check and net_tls_check (server.tls, net/tls.h). One for the start, every
 * reload and every control API save, so a save is validated exactly as the reload that
 * follows it. */
extern const struct gw_conf_env net_conf_env;

/* The whole file at <path>, NUL-terminated, in a malloc'd buffer (free() it) of <*lenp>
 * bytes; NULL with <why> set when it cannot be read, is empty or is larger than <max>
 * bytes. Config files read on main (CA bundles, server.tls certificate and key). */
char *net_file_read(const char *path, size_t max, size_t *lenp, char *why, size_t why_size);

/* Frees every context; call after the workers and the link test have stopped. */
void net_egress_shutdown(void);

#endif
