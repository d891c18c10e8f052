/* SPDX-License-Identifier: MIT
 * net/h1resp.c - the HTTP/1.x response reader (see net/h1resp.h). A head is found by
 * its lines (memchr for each LF), checked line by line, and reported where it lies:
 * in the bytes fed when it came whole, else in hbuf. Bodies are reported as slices of
 * the bytes fed. Chunk-size lines and trailers that come in pieces wait in hbuf too.
 * Owns:    hbuf.
 * Threads: the owner's only.
 * See:     net/h1resp.h, net/h1req.c (the byte rules both share),
 *          tests/unit/net/test_h1resp.c
 */
#include "net/h1resp.h"

#include <string.h>

#include "net/h1req.h"

/* A chunk-size line (size and extensions) may be this long. */
#define H1R_CHUNK_LINE_MAX 4096u

static enum net_h1r_ev
fail(struct net_h1resp *r, const char *why)
{
    r->why = why;
    return NET_H1R_ERROR;
}

void
net_h1resp_init(struct net_h1resp *r, unsigned max_head, unsigned max_headers, bool no_body)
{
    struct gw_buf keep = r->hbuf;

    memset(r, 0, sizeof(*r));
    gw_buf_reset(&keep);
    r->hbuf = keep;
    r->max_head = max_head;
    r->max_headers = max_headers;
    r->no_body = no_body;
}

void
net_h1resp_fini(struct net_h1resp *r)
{
    gw_buf_fini(&r->hbuf);
}

/* ---- the head ---- */

/* The end of the line at <p> without its CR (NULL when a CR is inside it): the line is
 * [p, *lend), the next one starts after <lf>. */
static const char *
line_end(const char *p, const char *lf)
{
    const char *e = lf > p && lf[-1] == '\r' ? lf - 1 : lf;

    return e > p && memchr(p, '\r', (size_t)(e - p)) ? NULL : e;
}

/* "HTTP/1.x NNN reason" (the reason may be absent, with or without its space). */
static enum net_h1r_ev
status_line(struct net_h1resp *r, const char *p, const char *e)
{
    size_t n = (size_t)(e - p);

    if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0 || (p[7] != '0' && p[7] != '1') || p[8] != ' ')
        return fail(r, "not an HTTP/1.x status line");
    if (p[9] < '1' || p[9] > '9' || p[10] < '0' || p[10] > '9' || p[11] < '0' || p[11] > '9' ||
        (n > 12 && p[12] != ' '))
        return fail(r, "not a three-digit status");
    if (net_h1_value_ctl(p, p + 12, e) != e) /* HTTP/1.x NNN holds none */
        return fail(r, "a control byte in the status line");
    r->http_minor = (unsigned)(p[7] - '0');
    r->status =
        (unsigned)(p[9] - '0') * 100 + (unsigned)(p[10] - '0') * 10 + (unsigned)(p[11] - '0');
    return NET_H1R_MORE;
}

/* What the head's headers say about the framing and the connection. */
struct h1r_facts {
    unsigned n_cl, n_te, conn;
    bool te_chunked; /* the last coding of the last Transfer-Encoding is chunked */
    uint64_t cl;
};

/* A Transfer-Encoding value (as it came, after its leading blanks): a list of codings,
 * each a token with blanks around it; *<chunked> when the last one is "chunked" (case
 * ignored; spaces, not tabs, after it, as http-parser took it). False for a list with
 * an empty or malformed element (",chunked"): how to frame such an answer is a guess. */
static bool
te_codings(const char *v, size_t n, bool *chunked)
{
    const char *p = v, *end = v + n;

    *chunked = false;
    for (;;) {
        const char *t, *te;

        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        t = p;
        while (p < end && net_h1_tchar[(unsigned char)*p])
            p++;
        te = p;
        if (te == t)
            return false;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p == end) {
            const char *sp = te;

            while (sp < end && *sp == ' ')
                sp++;
            *chunked = te - t == 7 && gw_mem_eq_nocase(t, "chunked", 7) && sp == end;
            return true;
        }
        if (*p++ != ',')
            return false;
    }
}

/* Splits a header line: the name up to the colon (a token), the value without its
 * blanks; false when the line is not one. */
static bool
header_split(const char *p, const char *e, struct gw_str *name, struct gw_str *value)
{
    const char *q = p, *v, *ve;

    while (q < e && net_h1_tchar[(unsigned char)*q])
        q++;
    if (q == p || q == e || *q != ':')
        return false;
    *name = (struct gw_str){p, (size_t)(q - p)};
    v = q + 1;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    ve = e;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    *value = (struct gw_str){v, (size_t)(ve - v)};
    return true;
}

static enum net_h1r_ev
header_line(struct net_h1resp *r, const char *p, const char *e, struct h1r_facts *f)
{
    struct gw_str name, v;

    if (*p == ' ' || *p == '\t')
        return fail(r, "obsolete line folding in a response head");
    if (!header_split(p, e, &name, &v))
        return fail(r, "a header name is not a token");
    if (net_h1_value_ctl(p, v.ptr, v.ptr + v.len) != v.ptr + v.len) /* p: the name's */
        return fail(r, "a control byte in a header value");
    /* the framing headers are read as http-parser read them: with their trailing
     * blanks (a tab after a length refuses it) */
    switch (name.len) {
    case 10:
        if (gw_mem_eq_nocase(name.ptr, "connection", 10))
            f->conn |= net_h1_connection_tokens(v.ptr, (size_t)(e - v.ptr));
        break;
    case 14:
        if (gw_mem_eq_nocase(name.ptr, "content-length", 14)) {
            if (f->n_cl++ || !net_h1_content_length(v.ptr, (size_t)(e - v.ptr), &f->cl))
                return fail(r, "a malformed or repeated Content-Length");
        }
        break;
    case 17:
        if (gw_mem_eq_nocase(name.ptr, "transfer-encoding", 17)) {
            f->n_te++;
            if (!te_codings(v.ptr, (size_t)(e - v.ptr), &f->te_chunked))
                return fail(r, "a malformed Transfer-Encoding");
        }
        break;
    default: break;
    }
    return NET_H1R_MORE;
}

/* The head [h, h + n) (status line to its empty line, LF included), whole: checked,
 * and the framing it declares set. NET_H1R_HEAD for a final head, NET_H1R_MORE for a
 * 1xx one (dropped: the next head follows). */
static enum net_h1r_ev
head_parse(struct net_h1resp *r, const char *h, size_t n)
{
    const char *end = h + n, *p = h, *lf, *e;
    struct h1r_facts f = {0};
    unsigned lines = 0;
    bool http11;

    if (n > r->max_head)
        return fail(r, "a response head past its byte limit");
    lf = memchr(p, '\n', n);
    if (!(e = line_end(p, lf)))
        return fail(r, "a CR without its LF in a response head");
    if (status_line(r, p, e) == NET_H1R_ERROR)
        return NET_H1R_ERROR;
    for (p = lf + 1; p < end; p = lf + 1) {
        lf = memchr(p, '\n', (size_t)(end - p));
        if (!(e = line_end(p, lf)))
            return fail(r, "a CR without its LF in a response head");
        if (e == p)
            break; /* the empty line */
        if (++lines > r->max_headers)
            return fail(r, "too many header lines in a response head");
        if (header_line(r, p, e, &f) == NET_H1R_ERROR)
            return NET_H1R_ERROR;
    }
    if (f.n_te && f.n_cl)
        return fail(r, "Content-Length beside Transfer-Encoding");
    if (r->status == 101)
        return fail(r, "an upgrade nobody asked for");
    if (r->status < 200)
        return NET_H1R_MORE; /* interim: its head is dropped */
    r->head = (struct gw_str){h, n};
    http11 = r->http_minor == 1;
    r->keep_alive = http11 ? !(f.conn & NET_H1_CLOSE) : (f.conn & NET_H1_KEEP_ALIVE) != 0;
    if (r->no_body || r->status == 204 || r->status == 304) {
        r->part = NET_H1R_P_DONE;
    } else if (f.n_te) {
        r->part = f.te_chunked ? NET_H1R_P_SIZE : NET_H1R_P_CLOSE;
    } else if (f.n_cl) {
        r->left = f.cl;
        r->part = f.cl ? NET_H1R_P_LENGTH : NET_H1R_P_DONE;
    } else {
        r->part = NET_H1R_P_CLOSE;
    }
    if (r->part == NET_H1R_P_CLOSE)
        r->keep_alive = false;
    return NET_H1R_HEAD;
}

/* The offset just past the empty line that ends a head in [p, p + n), looking from
 * <from> (a line start), or 0 when it has not come; *<line> is where the last
 * unfinished line starts. */
static size_t
head_end(const char *p, size_t n, size_t from, size_t *line)
{
    const char *lf;
    size_t at = from;

    while (at < n && (lf = memchr(p + at, '\n', n - at)) != NULL) {
        size_t len = (size_t)(lf - (p + at));

        if (len == 0 || (len == 1 && p[at] == '\r'))
            return (size_t)(lf - p) + 1;
        at = (size_t)(lf - p) + 1;
    }
    *line = at;
    return 0;
}

static enum net_h1r_ev
head_feed(struct net_h1resp *r, const char *data, size_t len, size_t *used)
{
    size_t line = 0, end;
    enum net_h1r_ev ev;

    if (r->hbuf.len == 0) {
        size_t skip = 0;

        /* CR and LF before a status line are skipped, as http-parser did */
        while (skip < len && (data[skip] == '\r' || data[skip] == '\n'))
            skip++;
        end = skip < len ? head_end(data + skip, len - skip, 0, &line) : 0;
        if (end) { /* the whole head in these bytes: read where it lies */
            *used = skip + end;
            return head_parse(r, data + skip, end);
        }
        data += skip;
        len -= skip;
        *used = skip;
        r->scanned = line;
        if (len == 0)
            return NET_H1R_MORE;
    } else {
        *used = 0;
    }
    /* in pieces: gathered in hbuf (up to the limit), looked at from the last unfinished
     * line */
    {
        size_t base = r->hbuf.len, room, take;

        if (base > (size_t)r->max_head + 2)
            return fail(r, "a response head past its byte limit");
        room = (size_t)r->max_head + 2 - base;
        take = len < room ? len : room;
        if (gw_buf_append(&r->hbuf, data, take) != GW_OK)
            return fail(r, "out of memory");
        end = head_end(r->hbuf.data, r->hbuf.len, r->scanned, &line);
        if (!end) {
            if (take < len)
                return fail(r, "a response head past its byte limit");
            r->scanned = line;
            *used += take;
            return NET_H1R_MORE;
        }
        *used += end - base;
        r->hbuf.len = end; /* what follows is fed again */
        ev = head_parse(r, r->hbuf.data, end);
        if (ev == NET_H1R_HEAD)
            r->held = true; /* r->head lies in hbuf until the next feed */
        else
            r->hbuf.len = 0; /* an interim head or an error: hbuf starts over */
        r->scanned = 0;
        return ev;
    }
}

/* ---- the body ---- */

/* A chunk-size line, whole (without its line end): the size in hex, spaces, and any
 * extensions after a ';'. */
static bool
chunk_size(const char *p, const char *e, uint64_t *out)
{
    uint64_t x = 0;
    const char *q = p;

    for (; q < e; q++) {
        int d = gw_hex_digit(*q);

        if (d < 0)
            break;
        if (x >> 59)
            return false; /* past 2^63 */
        x = x * 16 + (uint64_t)d;
    }
    if (q == p)
        return false;
    while (q < e && *q == ' ') /* spaces, not tabs: as http-parser */
        q++;
    if (q < e && *q != ';')
        return false;
    if (net_h1_value_ctl(p, q, e) != e) /* p: the size's digits and blanks */
        return false;
    *out = x;
    return true;
}

/* A trailer line (not kept): empty (the end), or a header line as in a head, but not
 * one that frames a message or controls the connection (RFC 9110 6.5.1:
 * Content-Length, Transfer-Encoding, Connection; keep-alive is the head's). */
static bool
trailer_ok(const char *p, const char *e)
{
    struct gw_str name, v;

    if (e == p)
        return true;
    if (*p == ' ' || *p == '\t' || !header_split(p, e, &name, &v) ||
        net_h1_value_ctl(p, v.ptr, v.ptr + v.len) != v.ptr + v.len)
        return false;
    return !gw_str_eq_nocase(name, GW_STR_LIT("content-length")) &&
           !gw_str_eq_nocase(name, GW_STR_LIT("transfer-encoding")) &&
           !gw_str_eq_nocase(name, GW_STR_LIT("connection"));
}

/* A whole line from <data> (or hbuf, then <data>): *<p>, *<e> the line without its end;
 * *<used> the bytes taken. False while it has not come (what came is kept). NULL *<p>:
 * refused (too long, or a CR inside). */
static bool
take_line(struct net_h1resp *r, const char *data, size_t len, size_t *used, size_t max,
          const char **p, const char **e)
{
    const char *lf = memchr(data, '\n', len);

    if (!lf) {
        if (r->hbuf.len + len > max || gw_buf_append(&r->hbuf, data, len) != GW_OK) {
            *p = NULL;
            return true;
        }
        *used = len;
        return false;
    }
    *used = (size_t)(lf - data) + 1;
    if (r->hbuf.len) {
        if (r->hbuf.len + *used > max || gw_buf_append(&r->hbuf, data, *used) != GW_OK) {
            *p = NULL;
            return true;
        }
        data = r->hbuf.data;
        lf = data + r->hbuf.len - 1;
    }
    *p = data;
    *e = line_end(data, lf);
    if (!*e)
        *p = NULL;
    return true;
}

enum net_h1r_ev
net_h1resp_feed(struct net_h1resp *r, const char *data, size_t len, size_t *used,
                struct gw_str *body)
{
    enum net_h1r_ev ev;
    const char *p, *e;
    size_t n;

    *used = 0;
    if (r->held) { /* the head reported last time is not needed any more */
        r->held = false;
        r->hbuf.len = 0;
    }
    for (;;) {
        switch (r->part) {
        case NET_H1R_P_HEAD:
            ev = head_feed(r, data, len, &n);
            *used += n;
            if (ev != NET_H1R_MORE || r->part != NET_H1R_P_HEAD || n == len)
                return ev;
            /* an interim head ended in these bytes: the next one follows */
            data += n;
            len -= n;
            continue;
        case NET_H1R_P_DONE: return NET_H1R_DONE;
        case NET_H1R_P_LENGTH:
        case NET_H1R_P_DATA:
        case NET_H1R_P_CLOSE:
            if (len == 0)
                return NET_H1R_MORE;
            n = r->part == NET_H1R_P_CLOSE || r->left > len ? len : (size_t)r->left;
            if (r->part != NET_H1R_P_CLOSE) {
                r->left -= n;
                if (r->left == 0)
                    r->part = r->part == NET_H1R_P_LENGTH ? NET_H1R_P_DONE : NET_H1R_P_DATA_LF;
            }
            *body = (struct gw_str){data, n};
            *used += n;
            return NET_H1R_BODY;
        case NET_H1R_P_DATA_LF:
            if (len == 0)
                return NET_H1R_MORE;
            if (!r->cr) {
                if (*data != '\r')
                    return fail(r, "chunk data not followed by CRLF");
                r->cr = true;
                data++, len--, (*used)++;
                continue;
            }
            if (*data != '\n')
                return fail(r, "chunk data not followed by CRLF");
            r->cr = false;
            data++, len--, (*used)++;
            r->part = NET_H1R_P_SIZE;
            continue;
        case NET_H1R_P_SIZE:
            if (len == 0)
                return NET_H1R_MORE;
            if (!take_line(r, data, len, &n, H1R_CHUNK_LINE_MAX, &p, &e)) {
                *used += n;
                return NET_H1R_MORE;
            }
            /* a size line ends with CRLF (*e is the CR; a bare LF is refused) */
            if (!p || *e != '\r' || !chunk_size(p, e, &r->left))
                return fail(r, "malformed chunked framing");
            r->hbuf.len = 0;
            data += n, len -= n, *used += n;
            r->part = r->left ? NET_H1R_P_DATA : NET_H1R_P_TRAILER;
            continue;
        case NET_H1R_P_TRAILER:
            if (len == 0)
                return NET_H1R_MORE;
            if (!take_line(r, data, len, &n, r->max_head, &p, &e)) {
                *used += n;
                return NET_H1R_MORE;
            }
            if (!p || (r->trailer_bytes += n) > r->max_head || !trailer_ok(p, e))
                return fail(r, "malformed or too long trailers");
            r->hbuf.len = 0;
            data += n, len -= n, *used += n;
            if (e == p)
                r->part = NET_H1R_P_DONE; /* the empty line */
            continue;
        }
    }
}

enum net_h1r_ev
net_h1resp_eof(struct net_h1resp *r)
{
    if (r->part == NET_H1R_P_CLOSE || r->part == NET_H1R_P_DONE) {
        r->part = NET_H1R_P_DONE;
        return NET_H1R_DONE;
    }
    return fail(r, "the connection closed before the response ended");
}

bool
net_h1resp_header_next(const struct net_h1resp *r, size_t *off, struct gw_str *name,
                       struct gw_str *value)
{
    const char *h = r->head.ptr, *end = h + r->head.len, *p, *lf, *e, *colon, *v;

    p = *off ? h + *off : (const char *)memchr(h, '\n', r->head.len) + 1;
    if (p >= end)
        return false;
    lf = memchr(p, '\n', (size_t)(end - p));
    e = lf > p && lf[-1] == '\r' ? lf - 1 : lf;
    if (e == p)
        return false; /* the empty line */
    *off = (size_t)(lf + 1 - h);
    /* checked when it was read: a token, a colon, the value */
    colon = memchr(p, ':', (size_t)(e - p));
    *name = (struct gw_str){p, (size_t)(colon - p)};
    v = colon + 1;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *value = (struct gw_str){v, (size_t)(e - v)};
    return true;
}
