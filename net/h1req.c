/* SPDX-License-Identifier: MIT
 * net/h1req.c - the strict HTTP/1.1 request reader (see net/h1req.h for what it
 * refuses and why). http-parser frames; the callbacks collect the url, the headers
 * and the body within the limits, and the head is checked as a whole once it is
 * complete, so a refusal never depends on how the bytes were split.
 * Owns:    the buffers of struct net_h1req.
 * Threads: the owner's only; no I/O, no clock.
 * See:     net/h1req.h, net/http1.c, tests/unit/net/test_h1req.c, tests/fuzz/fuzz_h1req.c
 */
#include "net/h1req.h"

#include <string.h>

#include "core/alloc.h"

#define H1_BODY_KEEP (64 * 1024) /* a body buffer larger than this is freed between requests */

static int on_msg_begin(http_parser *p);
static int on_url(http_parser *p, const char *at, size_t len);
static int on_hdr_field(http_parser *p, const char *at, size_t len);
static int on_hdr_value(http_parser *p, const char *at, size_t len);
static int on_headers_complete(http_parser *p);
static int on_chunk_header(http_parser *p);
static int on_body(http_parser *p, const char *at, size_t len);
static int on_msg_complete(http_parser *p);

static const http_parser_settings h1_settings = {
    .on_message_begin = on_msg_begin,
    .on_url = on_url,
    .on_header_field = on_hdr_field,
    .on_header_value = on_hdr_value,
    .on_headers_complete = on_headers_complete,
    .on_chunk_header = on_chunk_header,
    .on_body = on_body,
    .on_message_complete = on_msg_complete,
};

/* ---- helpers ---- */

static int
refuse(struct net_h1req *r, enum gw_code code, const char *why)
{
    if (r->refuse == GW_OK) {
        r->refuse = code;
        r->why = why;
    }
    return -1;
}

bool
net_h1_is_token(struct gw_str s)
{
    /* RFC 9110 5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
     * "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA,
     * as a bitmap of the 256 byte values (bit c of word c / 64); every header name of
     * every request is checked. */
    static const uint64_t tchar[4] = {0x03ff6cfa00000000u, 0x57ffffffc7fffffeu, 0, 0};
    size_t i;

    if (s.len == 0)
        return false;
    for (i = 0; i < s.len; i++) {
        unsigned char ch = (unsigned char)s.ptr[i];

        if (!(tchar[ch >> 6] >> (ch & 63) & 1u))
            return false;
    }
    return true;
}

static struct gw_str
hdr_name(const struct net_h1req *r, const struct net_req_hdr *h)
{
    return (struct gw_str){r->hbuf.data + h->name_off, h->name_len};
}

static struct gw_str
hdr_value(const struct net_h1req *r, const struct net_req_hdr *h)
{
    return (struct gw_str){r->hbuf.data + h->val_off, h->val_len};
}

static void
request_reset(struct net_h1req *r)
{
    gw_buf_reset(&r->url);
    gw_buf_reset(&r->hbuf);
    gw_buf_recycle(&r->body, H1_BODY_KEEP); /* no large body's memory on an idle conn */
    r->n_hdrs = 0;
    r->last_was_value = true; /* the next field callback starts a header */
    r->keep_alive = false;
    r->chunked = false;
    r->has_body = false;
    r->content_length = 0;
    r->head_bytes = 0;
    r->refuse = GW_OK;
    r->why = NULL;
}

/* ---- parser callbacks ---- */

static int
on_msg_begin(http_parser *p)
{
    struct net_h1req *r = p->data;

    request_reset(r);
    r->state = NET_H1_IN_HEAD;
    return 0;
}

static int
count_head(struct net_h1req *r, size_t len)
{
    r->head_bytes += len;
    if (r->head_bytes > r->lim.max_header_bytes)
        return refuse(r, GW_E_HEADERS_TOO_LARGE, "request head too large or too many headers");
    return 0;
}

static int
on_url(http_parser *p, const char *at, size_t len)
{
    struct net_h1req *r = p->data;

    if (count_head(r, len))
        return -1;
    if (gw_buf_append(&r->url, at, len) != GW_OK)
        return refuse(r, GW_E_NOMEM, "out of memory");
    return 0;
}

static int
on_hdr_field(http_parser *p, const char *at, size_t len)
{
    struct net_h1req *r = p->data;
    struct net_req_hdr *h;

    /* ": " and CRLF count once a header, not once a callback: the same head must
     * count the same however its bytes were split. */
    if (count_head(r, len + (r->last_was_value ? 4 : 0)))
        return -1;
    if (r->state != NET_H1_IN_HEAD) {
        r->last_was_value = false; /* a chunked trailer: counted, never taken as a header */
        return 0;
    }
    if (r->last_was_value) {
        if (r->n_hdrs >= r->lim.max_headers)
            return refuse(r, GW_E_HEADERS_TOO_LARGE, "request head too large or too many headers");
        if (r->n_hdrs == r->cap_hdrs) {
            unsigned cap = r->cap_hdrs ? r->cap_hdrs * 2 : 16;
            struct net_req_hdr *v = gw_realloc(r->hdrs, cap * sizeof(*v));

            if (!v)
                return refuse(r, GW_E_NOMEM, "out of memory");
            r->hdrs = v;
            r->cap_hdrs = cap;
        }
        h = &r->hdrs[r->n_hdrs++];
        h->name_off = (uint32_t)r->hbuf.len;
        h->name_len = 0;
        h->val_off = (uint32_t)r->hbuf.len;
        h->val_len = 0;
        r->last_was_value = false;
    }
    h = &r->hdrs[r->n_hdrs - 1];
    if (gw_buf_append(&r->hbuf, at, len) != GW_OK)
        return refuse(r, GW_E_NOMEM, "out of memory");
    h->name_len += (uint32_t)len;
    return 0;
}

static int
on_hdr_value(http_parser *p, const char *at, size_t len)
{
    struct net_h1req *r = p->data;
    struct net_req_hdr *h;

    if (count_head(r, len))
        return -1;
    if (r->state != NET_H1_IN_HEAD) {
        r->last_was_value = true; /* trailer */
        return 0;
    }
    if (r->n_hdrs == 0)
        return refuse(r, GW_E_HTTP_PARSE, "malformed HTTP request");
    h = &r->hdrs[r->n_hdrs - 1];
    if (!r->last_was_value) {
        h->val_off = (uint32_t)r->hbuf.len;
        h->val_len = 0;
        r->last_was_value = true;
    }
    if (gw_buf_append(&r->hbuf, at, len) != GW_OK)
        return refuse(r, GW_E_NOMEM, "out of memory");
    h->val_len += (uint32_t)len;
    return 0;
}

/* The head as a whole (RFC 9112): every name a token, no control bytes in values
 * (trailing blanks trimmed), one Host on HTTP/1.1, Transfer-Encoding only as one
 * `chunked` on HTTP/1.1. http-parser has already refused two Content-Lengths, a
 * Content-Length beside Transfer-Encoding and a malformed length. */
static int
check_head(struct net_h1req *r, const http_parser *p)
{
    unsigned i, n_host = 0, n_te = 0;
    bool http11 = p->http_major == 1 && p->http_minor == 1;

    if (p->http_major != 1 || p->http_minor > 1)
        return refuse(r, GW_E_HTTP_PARSE, "only HTTP/1.0 and HTTP/1.1 are served here");
    for (i = 0; i < r->n_hdrs; i++) {
        struct net_req_hdr *h = &r->hdrs[i];
        struct gw_str name = hdr_name(r, h), value;
        uint32_t j;

        if (!net_h1_is_token(name))
            return refuse(r, GW_E_HTTP_PARSE, "a header name is not a valid token");
        while (h->val_len && (r->hbuf.data[h->val_off + h->val_len - 1] == ' ' ||
                              r->hbuf.data[h->val_off + h->val_len - 1] == '\t'))
            h->val_len--;
        value = hdr_value(r, h);
        for (j = 0; j < value.len; j++) {
            unsigned char ch = (unsigned char)value.ptr[j];

            if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
                return refuse(r, GW_E_HTTP_PARSE, "a header value holds a control character");
        }
        if (gw_str_eq_nocase(name, GW_STR_LIT("host"))) {
            n_host++;
        } else if (gw_str_eq_nocase(name, GW_STR_LIT("transfer-encoding"))) {
            n_te++;
            if (!gw_str_eq_nocase(value, GW_STR_LIT("chunked")))
                return refuse(r, GW_E_HTTP_PARSE, "only Transfer-Encoding: chunked is accepted");
        }
    }
    if (n_host > 1)
        return refuse(r, GW_E_HTTP_PARSE, "more than one Host header");
    if (http11 && n_host == 0)
        return refuse(r, GW_E_HTTP_PARSE, "an HTTP/1.1 request needs a Host header");
    if (n_te > 1 || (n_te && !http11))
        return refuse(r, GW_E_HTTP_PARSE, "ambiguous Transfer-Encoding");
    if (n_te && !(p->flags & F_CHUNKED))
        return refuse(r, GW_E_HTTP_PARSE, "ambiguous Transfer-Encoding");
    return 0;
}

static int
on_headers_complete(http_parser *p)
{
    struct net_h1req *r = p->data;

    if (check_head(r, p))
        return -1;
    if (p->method == HTTP_CONNECT)
        return refuse(r, GW_E_HTTP_PARSE, "CONNECT is not supported here");
    /* An Upgrade (h2c, websocket) is not taken: the request is answered as HTTP/1.1,
     * as RFC 9110 7.8 allows, and the connection goes on in HTTP/1.1. Cleared here so
     * http-parser reads the body and the next request as usual. */
    p->upgrade = 0;
    r->method = (enum http_method)p->method;
    r->keep_alive = http_should_keep_alive(p) != 0;
    r->chunked = (p->flags & F_CHUNKED) != 0;
    r->content_length = (p->flags & F_CONTENTLENGTH) ? p->content_length : 0;
    r->has_body = r->chunked || r->content_length > 0;
    /* A declared length over max_body is the caller's to refuse at NET_H1_HEAD (after its
     * own checks: a client without a key learns nothing of the limits); on_body holds the
     * limit in any case. */
    r->state = NET_H1_IN_BODY;
    r->ev = NET_H1_HEAD;
    /* Stop before any body byte: the caller decides on the head alone. */
    http_parser_pause(p, 1);
    return 0;
}

static int
on_chunk_header(http_parser *p)
{
    struct net_h1req *r = p->data;

    /* At once, not when the bytes arrive: a chunk declared past the limit is refused. */
    if (p->content_length > r->lim.max_body || r->body.len + p->content_length > r->lim.max_body)
        return refuse(r, GW_E_BODY_TOO_LARGE, "request body larger than server.max_body_mb");
    return 0;
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
    struct net_h1req *r = p->data;

    if (r->body.len + len > r->lim.max_body)
        return refuse(r, GW_E_BODY_TOO_LARGE, "request body larger than server.max_body_mb");
    if (gw_buf_append(&r->body, at, len) != GW_OK)
        return refuse(r, GW_E_NOMEM, "out of memory");
    return 0;
}

static int
on_msg_complete(http_parser *p)
{
    struct net_h1req *r = p->data;

    r->state = NET_H1_COMPLETE;
    r->ev = NET_H1_DONE;
    http_parser_pause(p, 1); /* the answer comes before the next request is read */
    return 0;
}

/* ---- API ---- */

void
net_h1req_init(struct net_h1req *r, const struct net_h1req_limits *lim)
{
    memset(r, 0, sizeof(*r));
    r->lim = *lim;
    http_parser_init(&r->parser, HTTP_REQUEST);
    r->parser.data = r;
}

void
net_h1req_fini(struct net_h1req *r)
{
    gw_buf_fini(&r->url);
    gw_buf_fini(&r->hbuf);
    gw_buf_fini(&r->body);
    GW_FREE(r->hdrs);
    r->n_hdrs = r->cap_hdrs = 0;
}

enum gw_code
net_h1req_add_header(struct net_h1req *r, struct gw_str name, struct gw_str value)
{
    struct net_req_hdr *h;

    r->head_bytes += name.len + value.len + 4;
    if (r->head_bytes > r->lim.max_header_bytes || r->n_hdrs >= r->lim.max_headers)
        return GW_E_HEADERS_TOO_LARGE;
    if (r->n_hdrs == r->cap_hdrs) {
        unsigned cap = r->cap_hdrs ? r->cap_hdrs * 2 : 16;
        struct net_req_hdr *v = gw_realloc(r->hdrs, cap * sizeof(*v));

        if (!v)
            return GW_E_NOMEM;
        r->hdrs = v;
        r->cap_hdrs = cap;
    }
    h = &r->hdrs[r->n_hdrs];
    h->name_off = (uint32_t)r->hbuf.len;
    h->name_len = (uint32_t)name.len;
    h->val_off = (uint32_t)(r->hbuf.len + name.len);
    h->val_len = (uint32_t)value.len;
    if (gw_buf_append_str(&r->hbuf, name) != GW_OK || gw_buf_append_str(&r->hbuf, value) != GW_OK)
        return GW_E_NOMEM;
    r->n_hdrs++;
    return GW_OK;
}

enum net_h1_ev
net_h1req_feed(struct net_h1req *r, const char *data, size_t len, size_t *used)
{
    enum http_errno err;

    r->ev = NET_H1_MORE;
    *used = http_parser_execute(&r->parser, &h1_settings, data, len);
    err = HTTP_PARSER_ERRNO(&r->parser);
    if (err == HPE_PAUSED)
        return r->ev;
    if (err != HPE_OK) {
        if (r->refuse == GW_OK) {
            r->refuse = GW_E_HTTP_PARSE;
            r->why = "malformed HTTP request";
        }
        return NET_H1_ERROR;
    }
    return NET_H1_MORE;
}

void
net_h1req_resume(struct net_h1req *r)
{
    http_parser_pause(&r->parser, 0);
}

void
net_h1req_next(struct net_h1req *r)
{
    request_reset(r);
    r->state = NET_H1_IDLE;
    http_parser_pause(&r->parser, 0);
}

bool
net_h1req_header(const struct net_h1req *r, struct gw_str name, struct gw_str *value)
{
    unsigned i;

    for (i = 0; i < r->n_hdrs; i++) {
        if (gw_str_eq_nocase(hdr_name(r, &r->hdrs[i]), name)) {
            *value = hdr_value(r, &r->hdrs[i]);
            return true;
        }
    }
    return false;
}

void
net_h1req_header_at(const struct net_h1req *r, unsigned i, struct gw_str *name,
                    struct gw_str *value)
{
    *name = hdr_name(r, &r->hdrs[i]);
    *value = hdr_value(r, &r->hdrs[i]);
}
