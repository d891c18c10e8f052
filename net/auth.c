/* SPDX-License-Identifier: MIT
 * net/auth.c - gateway keys (DESIGN.md 4): read from Authorization: Bearer or x-api-key,
 * hashed with SHA-256 (the last key of a keep-alive connection and its digest are
 * cached on the connection) and looked up as a digest among the config's clients.
 * Owns:    nothing.
 * Threads: the owning worker only.
 * See:     net/pipeline-priv.h, core/conf.h (gw_conf_client_by_digest)
 */
#include "net/pipeline-priv.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <openssl/sha.h>

#include "core/alloc.h"
#include "core/assert.h"
#include "core/cost.h"
#include "core/events.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/retry.h"
#include "core/route.h"
#include "core/row.h"
#include "core/slots.h"
#include "core/speed.h"
#include "core/sse.h"
#include "core/sticky.h"
#include "dialects/anthropic.h"
#include "dialects/json_scan.h"
#include "dialects/openai.h"
#include "net/calendar.h"
#include "net/endpoint.h"
#include "net/logger.h"
#include "net/sink.h"
#include "net/upstream.h"
#include "store/store.h"

/* The gateway key a request carries, in the places the official SDKs put it
 * (DESIGN.md 4): Authorization: Bearer, x-api-key, x-goog-api-key, or ?key= in the URL
 * (percent-decoded into <buf>). The query's key is never logged (no URL is) nor sent on:
 * an upstream's URL is built anew. */
static bool
gateway_key(const struct net_conn *c, struct gw_str *key, char *buf, size_t cap)
{
    struct net_target t;
    struct gw_str v;
    int n;

    if (net_conn_header(c, GW_STR_LIT("authorization"), &v)) {
        if (v.len > 7 && gw_str_has_prefix_nocase(v, "bearer ")) {
            key->ptr = v.ptr + 7;
            key->len = v.len - 7;
            while (key->len && *key->ptr == ' ') {
                key->ptr++;
                key->len--;
            }
            return key->len > 0;
        }
    }
    if ((net_conn_header(c, GW_STR_LIT("x-api-key"), &v) ||
         net_conn_header(c, GW_STR_LIT("x-goog-api-key"), &v)) &&
        v.len) {
        *key = v;
        return true;
    }
    net_target_of(c->rq.method,
                  (struct gw_str){c->rq.url.data ? c->rq.url.data : "", c->rq.url.len}, 0, &t);
    if (t.key.len && (n = gw_pct_decode(t.key, buf, cap)) > 0) {
        *key = (struct gw_str){buf, (size_t)n};
        return true;
    }
    return false;
}

/* SHA-256 of <key>, reusing the digest of the connection's previous request when the
 * key is the same (a connection only ever compares against its own earlier key). */
static void
key_digest(struct net_conn *c, struct gw_str key, unsigned char digest[32])
{
    if (c->key_seen_len && key.len == c->key_seen_len &&
        memcmp(key.ptr, c->key_seen, key.len) == 0) {
        memcpy(digest, c->key_seen_digest, 32);
        return;
    }
    SHA256((const unsigned char *)key.ptr, key.len, digest);
    if (key.len <= NET_KEY_CACHE_MAX) {
        memcpy(c->key_seen, key.ptr, key.len);
        c->key_seen_len = (uint16_t)key.len;
        memcpy(c->key_seen_digest, digest, 32);
    }
}

/* The client whose gateway key <c>'s request carries, in <conf>; NULL with the refusal's
 * code and sentence in *<code>, *<why> when the key is missing or unknown. */
const struct gw_conf_client *
net_auth_client(struct net_conn *c, const struct gw_conf *conf, enum gw_code *code,
                const char **why)
{
    const struct gw_conf_client *cl;
    struct gw_str key;
    unsigned char digest[32];
    char qkey[512];

    if (!gateway_key(c, &key, qkey, sizeof(qkey))) {
        *code = GW_E_AUTH_MISSING_KEY;
        *why = "no gateway key: send Authorization: Bearer <key>, x-api-key or x-goog-api-key";
        return NULL;
    }
    key_digest(c, key, digest);
    cl = gw_conf_client_by_digest(conf, digest);
    if (!cl) {
        *code = GW_E_AUTH_INVALID_KEY;
        *why = "the gateway key is not valid";
    }
    return cl;
}
