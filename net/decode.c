/* SPDX-License-Identifier: MIT
 * net/decode.c - decodes a compressed request body for the pipeline (see net/decode.h):
 * gathers the Content-Encoding lines, lets core/decode.c undo them with the decoded
 * size bounded by server.max_body_mb (a decompression bomb stops there), and counts
 * the decoded bytes in net_body_budget (server.max_buffered_body_mb) before they are
 * allocated. Caveat: the raw body's share covers the decoded bytes first, and they
 * count up to max_body_mb (struct hold), so for the length of one decode (synchronous,
 * on one worker) the memory held may pass the budget by the raw body's size (and a
 * stacked coding's step before the last).
 * Owns:    the decoded buffer until it replaces the stream's body.
 * Threads: the owning worker only; never blocks.
 * See:     net/decode.h, core/decode.h, net/pipeline.c (net_stream_read_request)
 */
#include "net/decode.h"

#include <string.h>

#include "core/assert.h"
#include "core/budget.h"
#include "core/decode.h"
#include "core/str.h"
#include "net/pipeline-priv.h"

/* Content-Encoding bytes read, every line together; past that it is no coding list a
 * client sends (GW_DECODE_MAX_CODINGS is 4), and core refuses it. */
#define NET_DECODE_MAX_CODINGS_LEN 256

/* What a decode holds in net_body_budget. The raw body's share (taken when it was
 * read) covers the decoded bytes first, since the raw body is freed as soon as the
 * decoded one replaces it; and the decoded bytes count up to server.max_body_mb, not
 * the byte or two of slack past it (core/decode.h). So a body that fits the budget
 * alone (which is at least max_body_mb) is never refused for being decoded. */
struct hold {
    size_t raw;   /* the raw body's share (the stream's body_held) */
    size_t max;   /* server.max_body_mb in bytes: counted at most */
    size_t extra; /* taken beyond the raw share for the decoded bytes */
};

/* What the decode's <bytes> count for in the budget. */
static size_t
hold_counted(const struct hold *h, size_t bytes)
{
    return bytes < h->max ? bytes : h->max;
}

/* core/decode.h's hold: takes from net_body_budget before the decode's buffers grow
 * past the raw body's share, gives back as they shrink. */
static bool
on_hold(void *arg, size_t bytes)
{
    struct hold *h = arg;
    size_t n = hold_counted(h, bytes);
    size_t want = n > h->raw ? n - h->raw : 0;

    if (want > h->extra) {
        if (!gw_budget_take(&net_body_budget, want - h->extra))
            return false;
    } else if (want < h->extra) {
        gw_budget_give(&net_body_budget, h->extra - want);
    }
    h->extra = want;
    return true;
}

/* Every Content-Encoding line of the request, joined with ", " (RFC 9110 5.3: lines of
 * one field are one list). False when there is none. */
static bool
codings_of(const struct net_conn *c, char *buf, size_t cap, struct gw_str *out)
{
    size_t len = 0;
    bool seen = false;
    unsigned i;

    for (i = 0; i < c->rq.n_hdrs; i++) {
        struct gw_str name, value;
        size_t n;

        net_conn_header_at(c, i, &name, &value);
        if (!gw_str_eq_nocase(name, GW_STR_LIT("content-encoding")))
            continue;
        if (seen && len + 2 <= cap) {
            memcpy(buf + len, ", ", 2);
            len += 2;
        }
        seen = true;
        n = value.len < cap - len ? value.len : cap - len;
        memcpy(buf + len, value.ptr, n);
        len += n;
    }
    *out = (struct gw_str){buf, len};
    return seen;
}

enum gw_code
net_stream_decode_body(struct net_stream *s)
{
    char buf[NET_DECODE_MAX_CODINGS_LEN];
    struct gw_buf out = {0}, why = {0};
    struct gw_decode_limit lim;
    struct gw_str codings;
    struct hold h;
    enum gw_code rc;

    if (!codings_of(s->conn, buf, sizeof(buf), &codings) || gw_decode_is_identity(codings))
        return GW_OK;
    h = (struct hold){s->body_held, s->conn->rq.lim.max_body, 0};
    lim = (struct gw_decode_limit){h.max, on_hold, &h};
    rc = gw_decode_body(codings, (struct gw_str){s->body.data, s->body.len}, &lim, &out, &why);
    if (rc == GW_OK) {
        /* The raw body goes, and with it what of its share the decoded body does not
         * use; the rest stays taken for as long as the stream holds the body
         * (net_stream_free gives it back). A failed decode took nothing (its hold
         * ended at 0): the raw body's share stays with the raw body. */
        size_t counted = hold_counted(&h, out.cap); /* h.raw + h.extra when larger */

        gw_buf_fini(&s->body);
        if (counted < h.raw)
            gw_budget_give(&net_body_budget, h.raw - counted);
        s->body = out;
        s->body_held = counted;
        gw_buf_fini(&why);
        return GW_OK;
    }
    GW_ASSERT(h.extra == 0); /* core's hold ends at 0 after a failure */
    if (rc == GW_E_BODY_TOO_LARGE) {
        net_stream_refuse(s, rc, "the decoded request body is larger than server.max_body_mb",
                          true);
    } else if (rc == GW_E_BUSY) {
        struct net_retry_hdrs r;
        size_t n = net_retry_headers(&r, 1000, true);

        net_stream_refuse_hdrs(s, rc,
                               "the gateway holds too many request bodies "
                               "(server.max_buffered_body_mb); retry shortly",
                               r.h, n, true);
    } else if (why.data) {
        net_stream_refuse(s, rc, why.data, true); /* 400 or 415: core says why */
    } else {
        net_stream_refuse(
            s, rc, rc == GW_E_NOMEM ? "out of memory" : "the request body could not be decoded",
            true);
    }
    gw_buf_fini(&why);
    return rc;
}
