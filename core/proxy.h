/* SPDX-License-Identifier: MIT
 * core/proxy.h - upstream egress through an HTTP CONNECT proxy, the pure parts: which
 * upstreams the environment's NO_PROXY list exempts, and the proxy URL's pieces.
 * Owns:    nothing; a parsed URL's strings belong to the caller.
 * Threads: any; no state.
 * See:     core/proxy.c, core/conf.c (providers[].proxy), net/upstream.c (the tunnel),
 *          tests/unit/core/test_proxy.c, docs/config.md (providers)
 */
#ifndef GW_CORE_PROXY_H
#define GW_CORE_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True when <host>:<port> (host without brackets) is to be reached directly per the
 * NO_PROXY list <list> (NULL or "" exempts nothing). curl's rules: entries separated by
 * commas (and blanks), case-insensitive; "*" exempts every host; a name matches itself
 * and every name under it ("example.com" and ".example.com" both match example.com and
 * api.example.com, never notexample.com); a trailing dot is ignored on both sides; an IP
 * address (IPv6 with or without brackets) matches that address, and "addr/bits" every
 * address in that CIDR range; names never match addresses (no lookups). Beyond curl,
 * as Go and Python do: "host:port" or "[v6]:port" matches that port only. */
bool gw_no_proxy_match(const char *list, const char *host, uint16_t port);

/* A proxy URL, parsed: "http://[user:password@]host[:port][/]", or "host[:port]" (taken
 * as http:// as curl does). The port defaults to 1080 (curl's). */
struct gw_proxy_url {
    char *host; /* without brackets */
    uint16_t port;
    char *auth; /* "user:password" percent-decoded, or NULL; a secret */
};

/* Parses <url> into <out> (strings allocated with gw_malloc; free with
 * gw_proxy_url_fini). Userinfo is accepted only with <allow_userinfo> (a URL from the
 * environment; a URL in the config file must not hold a secret). Returns NULL when
 * fine, else the reason (then <out> holds nothing); "" means out of memory. */
const char *gw_proxy_url_parse(const char *url, bool allow_userinfo, struct gw_proxy_url *out);
/* Frees <u>'s strings (the secret wiped); <u> is zeroed. */
void gw_proxy_url_fini(struct gw_proxy_url *u);

/* The URL as it can be shown: userinfo replaced by "(hidden)@" (into <out>, truncated
 * to <size>). */
void gw_proxy_url_shown(const char *url, char *out, size_t size);

#endif
