/* SPDX-License-Identifier: MIT
 * net/endpoint.c - the data plane's endpoint table (DESIGN.md 4): path and method to an
 * endpoint and the client's API shape, and the parts of a Gemini URL the pipeline needs.
 * Owns:    nothing.
 * Threads: any.
 * See:     net/endpoint.h, tests/unit/net/test_endpoint.c
 */
#include "net/endpoint.h"

#include <string.h>

static bool
starts(struct gw_str s, const char *p)
{
    size_t n = strlen(p);

    return s.len >= n && memcmp(s.ptr, p, n) == 0;
}

static bool
is(struct gw_str s, const char *p)
{
    return s.len == strlen(p) && starts(s, p);
}

/* The value of query parameter <name> in <query> (after the '?'), as sent. */
static bool
query_param(struct gw_str query, const char *name, struct gw_str *value)
{
    size_t n = strlen(name), i = 0;

    while (i < query.len) {
        const char *amp = memchr(query.ptr + i, '&', query.len - i);
        size_t end = amp ? (size_t)(amp - query.ptr) : query.len;

        if (end - i > n && memcmp(query.ptr + i, name, n) == 0 && query.ptr[i + n] == '=') {
            value->ptr = query.ptr + i + n + 1;
            value->len = end - i - n - 1;
            return true;
        }
        if (end - i == n && memcmp(query.ptr + i, name, n) == 0) {
            value->ptr = query.ptr + end;
            value->len = 0;
            return true;
        }
        i = end + 1;
    }
    return false;
}

/* /v1beta/models/{m}:{method} (and /v1/ the same, as the SDK's apiVersion may say):
 * the model and the method after the last ':'. The listing paths have no ':'. */
static void
gemini_target(enum http_method method, struct gw_str path, struct gw_str query,
              struct net_target *t)
{
    struct gw_str rest, verb, v;
    const char *colon;

    rest = starts(path, "/v1beta/models/") ? (struct gw_str){path.ptr + 15, path.len - 15}
                                           : (struct gw_str){path.ptr + 11, path.len - 11};
    colon = rest.len ? memrchr(rest.ptr, ':', rest.len) : NULL;
    t->shape = DL_SHAPE_GEMINI;
    if (!colon) {
        /* GET /v1beta/models/{m}: one model of the listing */
        if (starts(path, "/v1beta/")) {
            t->ep = method == HTTP_GET && rest.len ? NET_EP_GEMINI_MODELS : NET_EP_METHOD;
            t->model = rest;
        }
        return;
    }
    t->model = (struct gw_str){rest.ptr, (size_t)(colon - rest.ptr)};
    verb = (struct gw_str){colon + 1, rest.len - (size_t)(colon - rest.ptr) - 1};
    if (t->model.len == 0) {
        t->ep = NET_EP_NONE;
        return;
    }
    if (is(verb, "generateContent") || is(verb, "streamGenerateContent")) {
        t->ep = method == HTTP_POST ? NET_EP_GEMINI : NET_EP_METHOD;
        t->stream = verb.len == 21;
        t->alt_sse = query_param(query, "alt", &v) && v.len == 3 && memcmp(v.ptr, "sse", 3) == 0;
    } else if (is(verb, "countTokens")) {
        t->ep = method == HTTP_POST ? NET_EP_GEMINI_COUNT : NET_EP_METHOD;
    } else {
        t->ep = NET_EP_NONE; /* embedContent, batchGenerateContent...: not served */
    }
}

void
net_target_of(enum http_method method, struct gw_str url, unsigned hints, struct net_target *t)
{
    const char *q = url.len ? memchr(url.ptr, '?', url.len) : NULL;
    struct gw_str path = {url.ptr, q ? (size_t)(q - url.ptr) : url.len};
    struct gw_str query = {q ? q + 1 : "", q ? url.len - path.len - 1 : 0};

    memset(t, 0, sizeof(*t));
    t->shape = DL_SHAPE_CHAT;
    t->model = t->key = (struct gw_str){"", 0};
    if (!query_param(query, "key", &t->key))
        t->key = (struct gw_str){"", 0};
    if (is(path, "/v1/chat/completions")) {
        t->ep = method == HTTP_POST ? NET_EP_CHAT : NET_EP_METHOD;
    } else if (is(path, "/v1/responses")) {
        t->shape = DL_SHAPE_RESPONSES;
        t->ep = method == HTTP_POST ? NET_EP_RESPONSES : NET_EP_METHOD;
    } else if (is(path, "/v1/messages")) {
        t->shape = DL_SHAPE_MESSAGES;
        t->ep = method == HTTP_POST ? NET_EP_MESSAGES : NET_EP_METHOD;
    } else if (is(path, "/v1/messages/count_tokens")) {
        t->shape = DL_SHAPE_MESSAGES;
        t->ep = method == HTTP_POST ? NET_EP_COUNT : NET_EP_METHOD;
    } else if (is(path, "/v1beta/models") ||
               (is(path, "/v1/models") && method == HTTP_GET && (hints & NET_HINT_GOOGLE))) {
        t->shape = DL_SHAPE_GEMINI;
        t->ep = method == HTTP_GET ? NET_EP_GEMINI_MODELS : NET_EP_METHOD;
    } else if (starts(path, "/v1beta/models/") ||
               (method != HTTP_GET && starts(path, "/v1/models/") &&
                memchr(path.ptr, ':', path.len))) {
        /* Gemini under v1 too (the SDK's apiVersion); a GET there is an OpenAI model id,
         * which may hold ':' (fine-tuned models) */
        gemini_target(method, path, query, t);
    } else if (method == HTTP_GET && (is(path, "/v1/models") || starts(path, "/v1/models/"))) {
        t->ep = NET_EP_MODELS;
        if (hints & NET_HINT_ANTHROPIC) {
            t->shape = DL_SHAPE_MESSAGES;
        } else if ((hints & NET_HINT_GOOGLE) || t->key.len) {
            t->ep = NET_EP_GEMINI_MODELS;
            t->shape = DL_SHAPE_GEMINI;
            t->model = path.len > 11 ? (struct gw_str){path.ptr + 11, path.len - 11}
                                     : (struct gw_str){"", 0};
        }
    } else if (method == HTTP_GET && is(path, "/healthz")) {
        t->ep = NET_EP_HEALTHZ;
    } else if (method == HTTP_GET && is(path, "/readyz")) {
        t->ep = NET_EP_READYZ;
    }
}

enum gw_code
net_pct_encode_path(struct gw_str in, struct gw_buf *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i;

    for (i = 0; i < in.len; i++) {
        unsigned char c = (unsigned char)in.ptr[i];
        char esc[3] = {'%', hex[c >> 4], hex[c & 15]};

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            strchr("-._~/:@", c) != NULL) {
            if (gw_buf_append(out, (const char *)&in.ptr[i], 1) != GW_OK)
                return GW_E_NOMEM;
        } else if (gw_buf_append(out, esc, 3) != GW_OK) {
            return GW_E_NOMEM;
        }
    }
    return GW_OK;
}
