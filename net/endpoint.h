/* SPDX-License-Identifier: MIT
 * net/endpoint.h - which data-plane endpoint a request head asks for (DESIGN.md 4), and
 * what its URL carries besides the path: the Gemini model and method from
 * /v1beta/models/{model}:{method}, the stream framing (?alt=sse), a gateway key given
 * as ?key=. Pure: bytes in, a verdict out (tests/unit/net/test_endpoint.c).
 * Owns:    nothing; the slices point into the URL given.
 * Threads: any.
 * See:     net/pipeline.c, net/auth.c
 */
#ifndef GW_NET_ENDPOINT_H
#define GW_NET_ENDPOINT_H

#include <http_parser.h>
#include <stdbool.h>

#include "core/str.h"
#include "dialects/canon.h"

enum net_endpoint {
    NET_EP_NONE = 0,      /* no such path: 404 */
    NET_EP_METHOD,        /* a known path with another method: 405 */
    NET_EP_CHAT,          /* POST /v1/chat/completions */
    NET_EP_RESPONSES,     /* POST /v1/responses */
    NET_EP_MESSAGES,      /* POST /v1/messages */
    NET_EP_COUNT,         /* POST /v1/messages/count_tokens */
    NET_EP_GEMINI,        /* POST /v1beta/models/{m}:generateContent, :streamGenerateContent */
    NET_EP_GEMINI_COUNT,  /* POST /v1beta/models/{m}:countTokens */
    NET_EP_MODELS,        /* GET /v1/models, /v1/models/{id} */
    NET_EP_GEMINI_MODELS, /* GET /v1beta/models, /v1beta/models/{m} */
    NET_EP_HEALTHZ,       /* GET /healthz */
    NET_EP_READYZ,        /* GET /readyz */
};

struct net_target {
    enum net_endpoint ep;
    enum dl_shape shape; /* the client's API shape: its refusals are answered in it */
    struct gw_str model; /* Gemini: the model of the path (percent-encoded as sent; see
                          * gw_pct_decode), "" for a listing of all */
    bool stream;         /* Gemini: streamGenerateContent */
    bool alt_sse;        /* Gemini: ?alt=sse (else a stream is one JSON array) */
    struct gw_str key;   /* ?key= as sent (percent-encoded), "" when absent */
};

/* What a request's headers say of its client, for the paths two shapes share: a
 * /v1/models listing is Anthropic's with anthropic-version, Gemini's with a Google
 * header (x-goog-api-key, x-goog-api-client) or ?key=; the @google/genai SDK's default
 * API version is v1, so its listing arrives there. */
#define NET_HINT_ANTHROPIC 0x1u
#define NET_HINT_GOOGLE 0x2u

/* Classifies <url> (path and query as sent) for <method> and NET_HINT_* <hints>. */
void net_target_of(enum http_method method, struct gw_str url, unsigned hints,
                   struct net_target *out);

/* Appends <in> to <out> with every byte but unreserved ones, '/', ':' and '@'
 * percent-encoded (a model name in an upstream's path). */
enum gw_code net_pct_encode_path(struct gw_str in, struct gw_buf *out);

#endif
