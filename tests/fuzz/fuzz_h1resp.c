/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_h1resp.c - fuzz target for the HTTP/1.x response reader
 * (net/h1resp.c). The input's first byte says whether the request was HEAD (bit 0) and
 * whether the connection closes after the bytes (bit 1); its second seeds the pieces;
 * the rest is what an upstream sent. It is read three times: by net/h1resp.c whole and
 * in pieces (as net/upstream.c feeds it: what is not taken is fed again with the next
 * piece), and by the reference, whole: http-parser 2.9 with the callbacks net/upstream.c
 * had (DESIGN.md 2: a parser of the project's own is checked against http-parser on the
 * same corpus).
 *
 * - Whole and in pieces, net/h1resp.c must read the same response (status, header
 *   pairs, body, keep-alive, bytes taken) and end the same way (complete, refused, or
 *   wanting more).
 * - A response it reads to the end the reference must read to the end too, with the
 *   same status, headers, body, keep-alive and bytes taken: it never frames a response
 *   otherwise. It may refuse what the reference took (it is stricter: bare CR, folding,
 *   control bytes, spaces in names, chunk lines without CRLF, a status outside 100-999,
 *   a version other than HTTP/1.x) and want more where the reference refused early.
 *   Where http-parser reads Transfer-Encoding otherwise than RFC 9112 (Debian's build
 *   takes a name that begins with transfer-encoding as one; a list of codings can hide
 *   a last chunked from it), inputs are not compared. The reference is told that 1xx,
 *   204 and 304 answers have no body (http-parser reads one to the close when their
 *   head has a Transfer-Encoding), and its values are compared without their trailing
 *   blanks, which http-parser kept.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     net/h1resp.c, tests/fuzz/corpus/h1resp/
 */
#include <http_parser.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/str.h"
#include "net/h1resp.h"
#include "tests/fuzz/fuzz_hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define F_MAX_HEAD 65536u
#define F_MAX_HEADERS 256u

/* What one reading saw. */
struct f_seen {
    int end; /* 1 complete, 0 wants more, -1 refused */
    unsigned status;
    bool keep_alive;
    uint64_t hdrs; /* fuzz_hash of the header names and values, in order */
    uint64_t body; /* fuzz_hash of the body, as one run of bytes */
    size_t body_len;
    size_t taken;    /* bytes up to the response's end */
    struct gw_buf b; /* the body (hashed at the end: pieces split it anywhere) */
};

/* ---- net/h1resp.c, in pieces of sizes from <seed> (0: whole) ---- */

static void
ours(const char *in, size_t len, bool no_body, bool eof, unsigned seed, struct f_seen *out)
{
    struct net_h1resp r = {0};
    struct gw_buf pend = {0};
    size_t off = 0, consumed = 0;
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;

    net_h1resp_init(&r, F_MAX_HEAD, F_MAX_HEADERS, no_body);
    out->end = 0;
    out->hdrs = FUZZ_HASH_START;
    for (;;) {
        struct gw_str body, name, value;
        enum net_h1r_ev ev;
        size_t used, hoff = 0;

        if (r.part == NET_H1R_P_DONE) {
            out->end = 1;
            out->keep_alive = r.keep_alive;
            break;
        }
        if (pend.len == 0 || (off < len && seed)) {
            size_t n = len - off;

            if (seed && n > 1) {
                rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
                n = 1 + (size_t)(rng % n);
            }
            if (n == 0 && pend.len == 0) {
                if (eof) {
                    out->end = net_h1resp_eof(&r) == NET_H1R_DONE ? 1 : -1;
                    out->keep_alive = r.keep_alive;
                }
                break;
            }
            if (gw_buf_append(&pend, in + off, n) != GW_OK)
                abort();
            off += n;
        }
        ev = net_h1resp_feed(&r, pend.data, pend.len, &used, &body);
        if (used > pend.len || (ev == NET_H1R_MORE && used != pend.len))
            abort(); /* MORE takes every byte it is given */
        if (ev == NET_H1R_ERROR) {
            if (!r.why)
                abort();
            out->end = -1;
            break;
        }
        if (ev == NET_H1R_HEAD) {
            out->status = r.status;
            while (net_h1resp_header_next(&r, &hoff, &name, &value)) {
                out->hdrs = fuzz_hash(out->hdrs, name.ptr, name.len);
                out->hdrs = fuzz_hash(out->hdrs, value.ptr, value.len);
            }
        }
        if (ev == NET_H1R_BODY) {
            if (body.ptr < pend.data || body.ptr + body.len > pend.data + pend.len)
                abort();
            if (gw_buf_append(&out->b, body.ptr, body.len) != GW_OK)
                abort();
        }
        consumed += used;
        memmove(pend.data, pend.data + used, pend.len - used);
        pend.len -= used;
        if (ev == NET_H1R_DONE) {
            out->end = 1;
            out->keep_alive = r.keep_alive;
            break;
        }
    }
    out->taken = consumed;
    out->body_len = out->b.len;
    out->body = fuzz_hash(FUZZ_HASH_START, out->b.data, out->b.len);
    gw_buf_fini(&out->b);
    gw_buf_fini(&pend);
    net_h1resp_fini(&r);
}

/* ---- the reference: http-parser with net/upstream.c's former callbacks ---- */

struct ref {
    http_parser p;
    bool no_body, interim, complete, last_was_value;
    bool trailers; /* past the head: header callbacks are the trailers' (not kept) */
    unsigned lines;
    struct gw_buf name, value; /* the header being read */
    uint64_t hdrs;
    struct gw_buf b;
};

static void
ref_flush(struct ref *r)
{
    if (r->name.len || r->value.len) {
        size_t vlen = r->value.len;

        /* http-parser keeps a value's trailing blanks; RFC 9110 5.5 and net/h1resp.c
         * do not */
        while (vlen && (r->value.data[vlen - 1] == ' ' || r->value.data[vlen - 1] == '\t'))
            vlen--;
        r->hdrs = fuzz_hash(r->hdrs, r->name.data ? r->name.data : "", r->name.len);
        r->hdrs = fuzz_hash(r->hdrs, r->value.data ? r->value.data : "", vlen);
    }
    gw_buf_reset(&r->name);
    gw_buf_reset(&r->value);
}

static int
ref_begin(http_parser *p)
{
    struct ref *r = p->data;

    r->hdrs = FUZZ_HASH_START;
    r->trailers = false;
    r->last_was_value = true;
    r->lines = 0;
    gw_buf_reset(&r->name);
    gw_buf_reset(&r->value);
    return 0;
}

static int
ref_field(http_parser *p, const char *at, size_t len)
{
    struct ref *r = p->data;

    if (r->trailers)
        return 0;
    if (r->last_was_value) {
        ref_flush(r);
        if (++r->lines > F_MAX_HEADERS)
            return -1;
        r->last_was_value = false;
    }
    return gw_buf_append(&r->name, at, len) == GW_OK ? 0 : -1;
}

static int
ref_value(http_parser *p, const char *at, size_t len)
{
    struct ref *r = p->data;

    if (r->trailers)
        return 0;
    r->last_was_value = true;
    return gw_buf_append(&r->value, at, len) == GW_OK ? 0 : -1;
}

static int
ref_headers_complete(http_parser *p)
{
    struct ref *r = p->data;

    ref_flush(r);
    r->trailers = true;
    if (p->status_code == 101)
        return -1;
    /* 1xx, 204 and 304 have no body (RFC 9112 6.3), whatever the head says: http-parser
     * reads one to the close when there is a Transfer-Encoding; told to skip it here */
    if (p->status_code >= 100 && p->status_code < 200) {
        r->interim = true;
        return 1;
    }
    return r->no_body || p->status_code == 204 || p->status_code == 304 ? 1 : 0;
}

static int
ref_body(http_parser *p, const char *at, size_t len)
{
    struct ref *r = p->data;

    if (r->interim)
        return 0;
    return gw_buf_append(&r->b, at, len) == GW_OK ? 0 : -1;
}

static int
ref_complete(http_parser *p)
{
    struct ref *r = p->data;

    if (r->interim) {
        r->interim = false;
        gw_buf_reset(&r->b);
        return 0;
    }
    r->complete = true;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings ref_settings = {
    .on_message_begin = ref_begin,
    .on_header_field = ref_field,
    .on_header_value = ref_value,
    .on_headers_complete = ref_headers_complete,
    .on_body = ref_body,
    .on_message_complete = ref_complete,
};

static void
reference(const char *in, size_t len, bool no_body, bool eof, struct f_seen *out)
{
    struct ref r;
    size_t n;

    memset(&r, 0, sizeof(r));
    r.no_body = no_body;
    http_parser_init(&r.p, HTTP_RESPONSE);
    r.p.data = &r;
    n = http_parser_execute(&r.p, &ref_settings, in, len);
    out->end = 0;
    if (r.complete) {
        out->end = 1;
    } else if (HTTP_PARSER_ERRNO(&r.p) != HPE_OK || n != len) {
        out->end = -1;
    } else if (eof) {
        http_parser_execute(&r.p, &ref_settings, NULL, 0);
        out->end = r.complete ? 1 : -1;
    }
    out->status = r.p.status_code;
    out->keep_alive = r.complete && http_should_keep_alive(&r.p) != 0;
    out->hdrs = r.hdrs;
    out->taken = n;
    out->body_len = r.b.len;
    out->body = fuzz_hash(FUZZ_HASH_START, r.b.data, r.b.len);
    gw_buf_fini(&r.b);
    gw_buf_fini(&r.name);
    gw_buf_fini(&r.value);
}

/* Where http-parser's Transfer-Encoding reading is not RFC 9112's: a header name longer
 * than 17 bytes that begins with transfer-encoding (Debian's build reads it as one), or
 * a list of codings (an element that begins with 'c' and is not chunked swallows the
 * comma after it: "c, chunked" is not chunked to it). */
static bool
te_quirk(const char *in, size_t len)
{
    size_t i;

    for (i = 0; i + 18 <= len; i++) {
        const char *lf;

        if ((i != 0 && in[i - 1] != '\n') || !gw_mem_eq_nocase(in + i, "transfer-encoding", 17))
            continue;
        if (in[i + 17] != ':')
            return true;
        lf = memchr(in + i, '\n', len - i);
        if (memchr(in + i, ',', (size_t)((lf ? lf : in + len) - (in + i))))
            return true;
    }
    return false;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct f_seen whole = {0}, split = {0}, ref = {0};
    const char *in = (const char *)data + 2;
    bool no_body, eof;
    size_t len;

    if (size < 2)
        return 0;
    no_body = data[0] & 1;
    eof = (data[0] & 2) != 0;
    len = size - 2;
    ours(in, len, no_body, eof, 0, &whole);
    ours(in, len, no_body, eof, 1u + data[1], &split);
    if (whole.end != split.end)
        abort();
    if (whole.end >= 0 &&
        (whole.status != split.status || whole.hdrs != split.hdrs || whole.body != split.body ||
         whole.body_len != split.body_len || whole.keep_alive != split.keep_alive))
        abort();
    if (whole.end == 1 && whole.taken != split.taken)
        abort();
    if (whole.end != 1 || te_quirk(in, len))
        return 0;
    reference(in, len, no_body, eof, &ref);
    if (ref.end != 1 || ref.status != whole.status || ref.hdrs != whole.hdrs ||
        ref.body != whole.body || ref.body_len != whole.body_len ||
        ref.keep_alive != whole.keep_alive)
        abort();
    /* a response that ends at the close has no end of its own in the bytes */
    if (!(eof && ref.taken == len) && ref.taken != whole.taken)
        abort();
    return 0;
}
