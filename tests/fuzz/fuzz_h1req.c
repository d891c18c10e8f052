/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_h1req.c - fuzz target for the strict HTTP/1.1 request reader
 * (net/h1req.c): heads, chunked framing, trailers, pipelined requests. The input is read
 * three times: by net/h1req.c whole and in pieces whose sizes come from the input itself
 * (resuming at each head and going on after each request as the server does), and by
 * the reference below, whole: http-parser 2.9 with the checks gw made on top of it,
 * the reader net/h1req.c replaced (DESIGN.md 2: a parser of the project's own is
 * checked against http-parser on the same corpus).
 *
 * - Whole and in pieces, net/h1req.c must see the same requests (method, version,
 *   keep-alive, url, header pairs, body) and end the same way (wanting more, or refused
 *   with the same code).
 * - Against the reference it must see the same requests. It may refuse where the
 *   reference took the input only with one of its stricter sentences (NET_H1_WHY_*: a
 *   CR without LF, obsolete folding, a control byte (http-parser let one through as the
 *   first byte of a trailer's value), another form of request target, a version other
 *   than HTTP/1.x, chunk framing, a head past its byte limit), each backed by the input
 *   holding what it names where the bytes show it. It may still want more of a head or
 *   trailers that the reference refused early (it reads them a whole line at a time),
 *   or ended early at a CR without LF. It never takes what the reference refused.
 *   The reference is the http-parser the build links: Debian's 2.9.4, whose patches
 *   differ from upstream's 2.9.4 (a name that begins with transfer-encoding).
 * - Every header kept has a token name and a value without control bytes; a body never
 *   passes max_body.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     net/h1req.c, tests/fuzz/corpus/h1req/
 */
#include <http_parser.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/str.h"
#include "net/h1req.h"
#include "tests/fuzz/fuzz_hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the reference: http-parser with gw's checks (net/h1req.c before it was gw's own) ---- */

enum ref_state {
    REF_IDLE = 0, /* before the first byte of a request */
    REF_IN_HEAD,
    REF_IN_BODY,
    REF_COMPLETE,
};

struct ref_req {
    http_parser parser;
    struct net_h1req_limits lim;
    enum ref_state state;
    enum http_method method;
    struct gw_buf url;
    struct gw_buf hbuf;
    struct net_req_hdr *hdrs;
    unsigned n_hdrs, cap_hdrs;
    bool last_was_value;
    bool keep_alive;
    bool chunked;
    bool has_body;
    uint64_t content_length;
    size_t head_bytes;
    struct gw_buf body;
    enum gw_code refuse;
    const char *why;
    enum net_h1_ev ev;
};

#define REF_BODY_KEEP (64 * 1024)

static int on_msg_begin(http_parser *p);
static int on_url(http_parser *p, const char *at, size_t len);
static int on_hdr_field(http_parser *p, const char *at, size_t len);
static int on_hdr_value(http_parser *p, const char *at, size_t len);
static int on_headers_complete(http_parser *p);
static int on_chunk_header(http_parser *p);
static int on_body(http_parser *p, const char *at, size_t len);
static int on_msg_complete(http_parser *p);

static const http_parser_settings ref_settings = {
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
refuse(struct ref_req *r, enum gw_code code, const char *why)
{
    if (r->refuse == GW_OK) {
        r->refuse = code;
        r->why = why;
    }
    return -1;
}

static struct gw_str
hdr_name(const struct ref_req *r, const struct net_req_hdr *h)
{
    return (struct gw_str){r->hbuf.data + h->name_off, h->name_len};
}

static struct gw_str
hdr_value(const struct ref_req *r, const struct net_req_hdr *h)
{
    return (struct gw_str){r->hbuf.data + h->val_off, h->val_len};
}

static void
request_reset(struct ref_req *r)
{
    gw_buf_reset(&r->url);
    gw_buf_reset(&r->hbuf);
    gw_buf_recycle(&r->body, REF_BODY_KEEP); /* no large body's memory on an idle conn */
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
    struct ref_req *r = p->data;

    request_reset(r);
    r->state = REF_IN_HEAD;
    return 0;
}

static int
count_head(struct ref_req *r, size_t len)
{
    r->head_bytes += len;
    if (r->head_bytes > r->lim.max_header_bytes)
        return refuse(r, GW_E_HEADERS_TOO_LARGE, "request head too large or too many headers");
    return 0;
}

static int
on_url(http_parser *p, const char *at, size_t len)
{
    struct ref_req *r = p->data;

    if (count_head(r, len))
        return -1;
    if (gw_buf_append(&r->url, at, len) != GW_OK)
        return refuse(r, GW_E_NOMEM, "out of memory");
    return 0;
}

static int
on_hdr_field(http_parser *p, const char *at, size_t len)
{
    struct ref_req *r = p->data;
    struct net_req_hdr *h;

    /* ": " and CRLF count once a header, not once a callback: the same head must
     * count the same however its bytes were split. */
    if (count_head(r, len + (r->last_was_value ? 4 : 0)))
        return -1;
    if (r->state != REF_IN_HEAD) {
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
    struct ref_req *r = p->data;
    struct net_req_hdr *h;

    if (count_head(r, len))
        return -1;
    if (r->state != REF_IN_HEAD) {
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
check_head(struct ref_req *r, const http_parser *p)
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
    struct ref_req *r = p->data;

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
    r->state = REF_IN_BODY;
    r->ev = NET_H1_HEAD;
    /* Stop before any body byte: the caller decides on the head alone. */
    http_parser_pause(p, 1);
    return 0;
}

static int
on_chunk_header(http_parser *p)
{
    struct ref_req *r = p->data;

    /* At once, not when the bytes arrive: a chunk declared past the limit is refused. */
    if (p->content_length > r->lim.max_body || r->body.len + p->content_length > r->lim.max_body)
        return refuse(r, GW_E_BODY_TOO_LARGE, "request body larger than server.max_body_mb");
    return 0;
}

static int
on_body(http_parser *p, const char *at, size_t len)
{
    struct ref_req *r = p->data;

    if (r->body.len + len > r->lim.max_body)
        return refuse(r, GW_E_BODY_TOO_LARGE, "request body larger than server.max_body_mb");
    if (gw_buf_append(&r->body, at, len) != GW_OK)
        return refuse(r, GW_E_NOMEM, "out of memory");
    return 0;
}

static int
on_msg_complete(http_parser *p)
{
    struct ref_req *r = p->data;

    r->state = REF_COMPLETE;
    r->ev = NET_H1_DONE;
    http_parser_pause(p, 1); /* the answer comes before the next request is read */
    return 0;
}

/* ---- API ---- */

static void
ref_init(struct ref_req *r, const struct net_h1req_limits *lim)
{
    memset(r, 0, sizeof(*r));
    r->lim = *lim;
    http_parser_init(&r->parser, HTTP_REQUEST);
    r->parser.data = r;
}

static void
ref_fini(struct ref_req *r)
{
    gw_buf_fini(&r->url);
    gw_buf_fini(&r->hbuf);
    gw_buf_fini(&r->body);
    GW_FREE(r->hdrs);
    r->n_hdrs = r->cap_hdrs = 0;
}

static enum net_h1_ev
ref_feed(struct ref_req *r, const char *data, size_t len, size_t *used)
{
    enum http_errno err;

    r->ev = NET_H1_MORE;
    *used = http_parser_execute(&r->parser, &ref_settings, data, len);
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

static void
ref_resume(struct ref_req *r)
{
    http_parser_pause(&r->parser, 0);
}

static void
ref_next(struct ref_req *r)
{
    request_reset(r);
    r->state = REF_IDLE;
    http_parser_pause(&r->parser, 0);
}

/* ---- the harness ---- */

#define T_MAX_REQS 16

static const struct net_h1req_limits t_lim = {2048, 16, 4096};

struct t_req {
    unsigned method, minor;
    bool keep_alive;
    uint64_t url_hash, hdr_hash, body_hash;
    size_t body_len;
};

struct t_run {
    struct t_req reqs[T_MAX_REQS];
    unsigned n;
    enum gw_code end; /* GW_OK: more input wanted */
    const char *why;  /* with a refusal */
    bool in_lines;    /* at the end: a head or trailers begun and not yet whole */
};

static void
t_check_head(const struct net_req_hdr *hdrs, unsigned n_hdrs, const char *hbuf)
{
    unsigned i;

    for (i = 0; i < n_hdrs; i++) {
        struct gw_str name = {hbuf + hdrs[i].name_off, hdrs[i].name_len};
        const unsigned char *v = (const unsigned char *)hbuf + hdrs[i].val_off;
        size_t j;

        if (!net_h1_is_token(name))
            abort(); /* a header that is not a token was kept */
        for (j = 0; j < hdrs[i].val_len; j++) {
            if ((v[j] < 0x20 && v[j] != '\t') || v[j] == 0x7f)
                abort();
        }
    }
}

static void
t_record(struct t_run *run, unsigned method, unsigned minor, bool keep_alive,
         const struct gw_buf *url, const struct net_req_hdr *hdrs, unsigned n_hdrs,
         const char *hbuf, const struct gw_buf *body)
{
    struct t_req *q = &run->reqs[run->n++];
    unsigned i;

    memset(q, 0, sizeof(*q));
    q->method = method;
    q->minor = minor;
    q->keep_alive = keep_alive;
    q->url_hash = fuzz_hash(FUZZ_HASH_START, url->data, url->len);
    q->hdr_hash = FUZZ_HASH_START;
    for (i = 0; i < n_hdrs; i++) {
        q->hdr_hash = fuzz_hash(q->hdr_hash, hbuf + hdrs[i].name_off, hdrs[i].name_len);
        q->hdr_hash = fuzz_hash(q->hdr_hash, ":", 1);
        q->hdr_hash = fuzz_hash(q->hdr_hash, hbuf + hdrs[i].val_off, hdrs[i].val_len);
        q->hdr_hash = fuzz_hash(q->hdr_hash, "\n", 1);
    }
    q->body_hash = fuzz_hash(FUZZ_HASH_START, body->data, body->len);
    q->body_len = body->len;
}

/* Reads <data> with net/h1req.c in pieces: <step> 0 = all at once, else piece sizes
 * from the input. */
static void
t_read(const uint8_t *data, size_t size, int step, struct t_run *run)
{
    struct net_h1req r;
    size_t off = 0, k = 0;

    memset(run, 0, sizeof(*run));
    net_h1req_init(&r, &t_lim);
    while (off < size && run->n < T_MAX_REQS) {
        size_t piece = size - off, used = 0;
        enum net_h1_ev ev;

        if (step) {
            piece = 1 + data[k++ % size] % 17;
            if (piece > size - off)
                piece = size - off;
        }
        ev = net_h1req_feed(&r, (const char *)data + off, piece, &used);
        if (used > piece || (ev == NET_H1_MORE && used != piece))
            abort(); /* bytes are left only at a stop */
        off += used;
        if (ev == NET_H1_ERROR) {
            run->end = r.refuse;
            run->why = r.why;
            break;
        }
        if (ev == NET_H1_HEAD) {
            t_check_head(r.hdrs, r.n_hdrs, r.hbuf.data);
            if (r.content_length > t_lim.max_body) {
                run->end = GW_E_BODY_TOO_LARGE; /* the server refuses it here */
                break;
            }
        } else if (ev == NET_H1_DONE) {
            if (r.body.len > t_lim.max_body)
                abort();
            t_record(run, (unsigned)r.method, r.http_minor, r.keep_alive, &r.url, r.hdrs, r.n_hdrs,
                     r.hbuf.data, &r.body);
            net_h1req_next(&r);
        }
    }
    run->in_lines = r.part == NET_H1P_HEAD || r.part == NET_H1P_TRAILER;
    net_h1req_fini(&r);
}

/* Reads <data> whole with the reference. */
static void
t_read_ref(const uint8_t *data, size_t size, struct t_run *run)
{
    struct ref_req r;
    size_t off = 0;

    memset(run, 0, sizeof(*run));
    ref_init(&r, &t_lim);
    while (off < size && run->n < T_MAX_REQS) {
        size_t used = 0;
        enum net_h1_ev ev = ref_feed(&r, (const char *)data + off, size - off, &used);

        off += used;
        if (ev == NET_H1_ERROR) {
            run->end = r.refuse;
            run->why = r.why;
            break;
        }
        if (ev == NET_H1_HEAD) {
            if (r.content_length > t_lim.max_body) {
                run->end = GW_E_BODY_TOO_LARGE;
                break;
            }
            ref_resume(&r);
        } else if (ev == NET_H1_DONE) {
            t_record(run, (unsigned)r.method, r.parser.http_minor, r.keep_alive, &r.url, r.hdrs,
                     r.n_hdrs, r.hbuf.data, &r.body);
            ref_next(&r);
        } else if (used == 0) {
            break;
        }
    }
    ref_fini(&r);
}

static bool
t_has(const uint8_t *data, size_t size, bool (*at)(const uint8_t *, size_t))
{
    size_t i;

    for (i = 0; i < size; i++) {
        if (at(data + i, size - i))
            return true;
    }
    return false;
}

static bool
t_bare_cr(const uint8_t *p, size_t n)
{
    return p[0] == '\r' && n > 1 && p[1] != '\n';
}

static bool
t_fold(const uint8_t *p, size_t n)
{
    return p[0] == '\n' && n > 1 && (p[1] == ' ' || p[1] == '\t');
}

static bool
t_ctl(const uint8_t *p, size_t n)
{
    (void)n;
    return (p[0] < 0x20 && p[0] != '\r' && p[0] != '\n') || p[0] == 0x7f;
}

/* net/h1req.c refused with <why> where the reference took the bytes: allowed for its
 * stricter sentences, each only when the input holds what it names. */
static bool
t_stricter(const char *why, const uint8_t *data, size_t size)
{
    if (!why)
        return false;
    if (strcmp(why, NET_H1_WHY_BARE_CR) == 0)
        return t_has(data, size, t_bare_cr);
    if (strcmp(why, NET_H1_WHY_FOLD) == 0)
        return t_has(data, size, t_fold);
    if (strcmp(why, NET_H1_WHY_CTL) == 0)
        return t_has(data, size, t_ctl);
    return strcmp(why, NET_H1_WHY_TARGET_FORM) == 0 || strcmp(why, NET_H1_WHY_VERSION) == 0 ||
           strcmp(why, NET_H1_WHY_CHUNK) == 0 || strcmp(why, NET_H1_WHY_HEAD_LONG) == 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct t_run *whole = malloc(sizeof(*whole)), *pieces = malloc(sizeof(*pieces));
    struct t_run *ref = malloc(sizeof(*ref));
    unsigned n;

    if (!whole || !pieces || !ref)
        abort();
    t_read(data, size, 0, whole);
    t_read(data, size, 1, pieces);
    /* the head is read whole and the body byte by byte: the split changes nothing */
    if (whole->n != pieces->n || whole->end != pieces->end ||
        memcmp(whole->reqs, pieces->reqs, whole->n * sizeof(whole->reqs[0])) != 0)
        abort();
    t_read_ref(data, size, ref);
    n = whole->n < ref->n ? whole->n : ref->n;
    if (memcmp(whole->reqs, ref->reqs, n * sizeof(whole->reqs[0])) != 0)
        abort(); /* a request read differently */
    if (whole->n > ref->n)
        abort(); /* a request taken that the reference did not complete */
    if (whole->n < ref->n) {
        /* a request the reference took: refused for a stricter reason, or a head or
         * trailers still being read that hold a CR without LF (where http-parser ended
         * heads, trailers and lines early), which it refuses once they are whole */
        if (whole->end == GW_OK ? !(whole->in_lines && t_has(data, size, t_bare_cr))
                                : !t_stricter(whole->why, data, size))
            abort();
    } else if (whole->end != GW_OK && ref->end == GW_OK) {
        if (!t_stricter(whole->why, data, size))
            abort();
    } else if (whole->end == GW_OK && ref->end != GW_OK) {
        if (!whole->in_lines)
            abort(); /* the reference refused what is being taken */
    }
    free(whole);
    free(pieces);
    free(ref);
    return 0;
}
