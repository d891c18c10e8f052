/* SPDX-License-Identifier: MIT
 * net/tls.h - TLS for clients of the data plane (server.tls): the server SSL_CTX made
 * from the certificate chain and private key of a config, and the bufferevent of an
 * accepted TLS connection. What is read and written through it is the same HTTP/1.1
 * as on a plain connection (net/http1.c).
 * Owns:    every server SSL_CTX, from the load that made it to net_tls_shutdown.
 * Threads: main (startup, reload, --check, control saves); the contexts are then used,
 *          read-only, by the workers (SSL_new on a shared SSL_CTX is thread-safe).
 * See:     net/tls.c, net/http1.c (net_conn_accept_tls), net/worker.c (TLS listeners),
 *          docs/config.md (server.tls)
 */
#ifndef GW_NET_TLS_H
#define GW_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "core/codes.h"
#include "core/conf.h"

struct bufferevent;
struct event_base;
struct net_conn;

/* struct gw_conf_env's check_tls: GW_OK when the PEM certificate chain at <cert> and the
 * PEM private key at <key> load and belong together, else GW_E_CFG_TLS_CERT or
 * GW_E_CFG_TLS_KEY with the reason in <why>. Reads both files. Any thread. */
enum gw_code net_tls_check(void *arg, const char *cert, const char *key, char *why,
                           size_t why_size);

/* Points conf->server.tls_ctx at the server context of its server.tls files (none: NULL).
 * One context per (paths, content): a reload with the same files reuses it, a renewed
 * certificate gets a new one, and contexts are never freed before net_tls_shutdown, so
 * connections accepted under an older snapshot keep theirs. Files that no longer load
 * are a problem (config.tls_cert / config.tls_key) in <probs>; false then. Main only. */
bool net_tls_attach(struct gw_conf *conf, struct gw_conf_problems *probs);

/* Frees every context; call after the workers have stopped. */
void net_tls_shutdown(void);

/* The bufferevent of an accepted TLS connection on <fd> with server context <ctx>: the
 * handshake runs on <base> as the first reads and writes. NULL when out of memory (<fd>
 * is then still the caller's to close). The worker's thread. */
struct bufferevent *net_tls_bev_new(struct event_base *base, int fd, void *ctx);

/* The handshake of <c> completed (BEV_EVENT_CONNECTED): true when the connection was
 * handed to HTTP/2 (ALPN chose h2: net_h2_start, which owns <c> from then on: its
 * bufferevent callbacks, timer and freeing; <c> arrives accepted and counted, nothing
 * read, its header_timeout_secs timer armed), false when it stays HTTP/1.1. */
bool net_tls_on_handshake(struct net_conn *c);

/* The connection <c> failed (BEV_EVENT_ERROR): a handshake that did not complete is
 * logged at debug level with OpenSSL's reason (a client offering only TLS 1.1, garbage
 * instead of a ClientHello), so an operator can see why clients cannot connect. */
void net_tls_on_error(struct net_conn *c);

/* Sends close_notify on a TLS connection whose answer is fully written (before the TCP
 * half-close of a lingering close, or before an idle close). */
void net_tls_close_notify(struct bufferevent *bev);

#endif
