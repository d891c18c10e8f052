/* SPDX-License-Identifier: MIT
 * net/h1req.c - the strict HTTP/1.1 request reader (see net/h1req.h for what it
 * refuses and why). The head is gathered up to its empty line (memchr from line end to
 * line end), then read as a whole in one pass over its lines, so a refusal never
 * depends on how the bytes were split; the body is read by length, or chunk by chunk
 * with the size lines and their CRLFs checked byte by byte.
 *
 * What it takes is what http-parser 2.9 (Debian's lenient build, which it replaced)
 * took with the checks gw added on top, so that the fuzz target can hold the two to the
 * same requests: the methods of http-parser's list, any number of spaces between the
 * request line's parts, bare LF line ends, empty header values, trailers, and
 * `Connection` tokens read the way http-parser read them. It is stricter where
 * http-parser was lenient in ways a proxy should not be; each such refusal has its own
 * sentence (NET_H1_WHY_* in net/h1req.h).
 * Owns:    the buffers of struct net_h1req.
 * Threads: the owner's only; no I/O, no clock.
 * See:     net/h1req.h, net/http1.c, tests/unit/net/test_h1req.c, tests/fuzz/fuzz_h1req.c
 */
#include "net/h1req.h"

#include <string.h>

#include <emmintrin.h>

#include "core/alloc.h"

#define H1_BODY_KEEP (64 * 1024) /* a body buffer larger than this is freed between requests */
/* Raw head bytes allowed beyond max_header_bytes (which counts the target, the names
 * and the values, and 4 per header): the method, the version, line ends, blanks. */
#define H1_HEAD_SLACK 1024
#define H1_SIZE_LINE_MAX 1024 /* a chunk-size line with its extensions */

/* Connection (and Proxy-Connection) tokens, as http-parser's F_CONNECTION_* flags */

static enum http_method const h1_no_method = (enum http_method) - 1;

static const struct {
    const char *name;
    unsigned len;
    enum http_method m;
} h1_methods[] = {
#define XX(num, name, string) {#string, sizeof(#string) - 1, HTTP_##name},
    HTTP_METHOD_MAP(XX)
#undef XX
};

/* ---- helpers ---- */

static enum net_h1_ev
refuse(struct net_h1req *r, enum gw_code code, const char *why)
{
    if (r->refuse == GW_OK) {
        r->refuse = code;
        r->why = why;
    }
    return NET_H1_ERROR;
}

static enum net_h1_ev
malformed(struct net_h1req *r)
{
    return refuse(r, GW_E_HTTP_PARSE, "malformed HTTP request");
}

/* RFC 9110 5.6.2: tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." /
 * "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA, one byte per byte value: every byte of
 * every header name is looked up. */
#define T1(c) [c] = 1
const unsigned char net_h1_tchar[256] = {
    T1('!'), T1('#'), T1('$'), T1('%'), T1('&'), T1('\''), T1('*'), T1('+'), T1('-'), T1('.'),
    T1('^'), T1('_'), T1('`'), T1('|'), T1('~'), T1('0'),  T1('1'), T1('2'), T1('3'), T1('4'),
    T1('5'), T1('6'), T1('7'), T1('8'), T1('9'), T1('A'),  T1('B'), T1('C'), T1('D'), T1('E'),
    T1('F'), T1('G'), T1('H'), T1('I'), T1('J'), T1('K'),  T1('L'), T1('M'), T1('N'), T1('O'),
    T1('P'), T1('Q'), T1('R'), T1('S'), T1('T'), T1('U'),  T1('V'), T1('W'), T1('X'), T1('Y'),
    T1('Z'), T1('a'), T1('b'), T1('c'), T1('d'), T1('e'),  T1('f'), T1('g'), T1('h'), T1('i'),
    T1('j'), T1('k'), T1('l'), T1('m'), T1('n'), T1('o'),  T1('p'), T1('q'), T1('r'), T1('s'),
    T1('t'), T1('u'), T1('v'), T1('w'), T1('x'), T1('y'),  T1('z'),
};
#undef T1

static inline bool
is_tchar(unsigned char ch)
{
    return net_h1_tchar[ch];
}

bool
net_h1_is_token(struct gw_str s)
{
    size_t i;

    if (s.len == 0)
        return false;
    for (i = 0; i < s.len; i++) {
        if (!is_tchar((unsigned char)s.ptr[i]))
            return false;
    }
    return true;
}

/* A control byte a header value may not hold (HTAB is allowed; RFC 9110 5.5). */
static inline bool
is_ctl(unsigned char ch)
{
    return (ch < 0x20 && ch != '\t') || ch == 0x7f;
}

/* One bit per byte of the sixteen at <p> that a header value may not hold (is_ctl). */
static inline unsigned
ctl_mask(const char *p)
{
    const __m128i below = _mm_set1_epi8(0x1f), tab = _mm_set1_epi8('\t'), del = _mm_set1_epi8(0x7f);
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
    /* v <= 0x1f unsigned, but HTAB; or DEL */
    __m128i ctl =
        _mm_andnot_si128(_mm_cmpeq_epi8(v, tab), _mm_cmpeq_epi8(_mm_min_epu8(v, below), v));

    return (unsigned)_mm_movemask_epi8(_mm_or_si128(ctl, _mm_cmpeq_epi8(v, del)));
}

/* The first byte of [p, end) that a header value may not hold (is_ctl), or <end>;
 * sixteen bytes a step (values are tens of bytes: a key, a user agent). The rest after
 * the last whole step is the sixteen bytes before <end> when they start at <lo> or later
 * (the bytes of [lo, p) hold none, so a bit found is in the rest), else byte by byte. */
const char *
net_h1_value_ctl(const char *lo, const char *p, const char *end)
{
    unsigned m;

    for (; end - p >= 16; p += 16)
        if ((m = ctl_mask(p)) != 0)
            return p + __builtin_ctz(m);
    if (p == end)
        return end;
    if (end - lo >= 16) {
        m = ctl_mask(end - 16);
        return m ? end - 16 + __builtin_ctz(m) : end;
    }
    while (p < end && !is_ctl((unsigned char)*p))
        p++;
    return p;
}

/* The first byte of [p, end) that ends or spoils a request target: a space, any byte
 * below 0x20 (HTAB and CR too) or DEL; or <end>. Sixteen bytes a step. */
static const char *
target_stop(const char *p, const char *end)
{
    const __m128i space = _mm_set1_epi8(' '), del = _mm_set1_epi8(0x7f);

    for (; end - p >= 16; p += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        /* v <= 0x20 unsigned (the space and every control), or DEL */
        __m128i stop = _mm_cmpeq_epi8(_mm_min_epu8(v, space), v);
        int m = _mm_movemask_epi8(_mm_or_si128(stop, _mm_cmpeq_epi8(v, del)));

        if (m)
            return p + __builtin_ctz((unsigned)m);
    }
    while (p < end && (unsigned char)*p > ' ' && *p != 0x7f)
        p++;
    return p;
}

static inline bool
is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool
eq_nocase(const char *a, size_t n, const char *lit)
{
    return gw_str_eq_nocase((struct gw_str){a, n}, (struct gw_str){lit, strlen(lit)});
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

/* A header name's bit in net_h1req.name_bits, the same for every case of the name (only
 * letters differ by case, in bit 0x20): a lookup of a name the request lacks is one test
 * mostly, and a request's headers are looked up by several names it does not carry. */
static inline uint64_t
name_bit(const char *p, size_t n)
{
    return n ? 1ull << ((n * 7 + ((unsigned char)p[0] | 32u) * 3 +
                         ((unsigned char)p[n - 1] | 32u)) &
                        63)
             : 1;
}

static void
request_reset(struct net_h1req *r)
{
    gw_buf_reset(&r->url);
    gw_buf_reset(&r->hbuf);
    gw_buf_reset(&r->trail);
    gw_buf_recycle(&r->body, H1_BODY_KEEP); /* no large body's memory on an idle conn */
    r->n_hdrs = 0;
    r->name_bits = 0;
    r->http_minor = 0;
    r->keep_alive = false;
    r->chunked = false;
    r->has_body = false;
    r->content_length = 0;
    r->head_bytes = 0;
    r->refuse = GW_OK;
    r->why = NULL;
    r->line_start = 0;
    r->left = 0;
    r->trailer_cl = false;
}

static enum http_method
method_of(const char *s, size_t n)
{
    size_t i;

    if (n == 4 && memcmp(s, "POST", 4) == 0)
        return HTTP_POST;
    if (n == 3 && memcmp(s, "GET", 3) == 0)
        return HTTP_GET;
    for (i = 0; i < sizeof(h1_methods) / sizeof(h1_methods[0]); i++) {
        if (h1_methods[i].len == n && memcmp(h1_methods[i].name, s, n) == 0)
            return h1_methods[i].m;
    }
    return h1_no_method;
}

/* A Content-Length value (after its leading blanks): digits, then only spaces, as
 * http-parser read it (a tab after the digits, or nothing, is refused). */
bool
net_h1_content_length(const char *v, size_t n, uint64_t *out)
{
    uint64_t x = 0;
    size_t i = 0;

    if (n == 0 || !is_digit(v[0]))
        return false;
    for (; i < n && is_digit(v[i]); i++) {
        if ((UINT64_MAX - 10) / 10 < x)
            return false;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    for (; i < n; i++) {
        if (v[i] != ' ')
            return false;
    }
    *out = x;
    return true;
}

/* The tokens of a Connection value (after its leading blanks) that decide keep-alive,
 * read exactly as http-parser 2.9 read them, so that a connection is kept or closed as
 * before: comma-separated, case ignored, "keep-alive" or "close" followed only by
 * spaces; a token start that is neither a token character (of the byte with bit 5 set,
 * as http-parser lowered it) nor a space ends the reading. */
unsigned
net_h1_connection_tokens(const char *v, size_t n)
{
    /* "upgrade" sets no flag the gateway reads, but it is matched like the others: a
     * mismatch takes its byte, a comma included, as http-parser's did */
    static const char *const words[3] = {"keep-alive", "close", "upgrade"};
    static const unsigned word_flag[3] = {NET_H1_KEEP_ALIVE, NET_H1_CLOSE, 0};
    enum { VALUE_START, TOKEN_START, MATCH, TOKEN, GOT, DEAD } st = VALUE_START;
    unsigned flags = 0, w = 0, i = 0;
    size_t k;

    for (k = 0; k < n && st != DEAD; k++) {
        unsigned char ch = (unsigned char)v[k], c = (unsigned char)(ch | 0x20);

        switch (st) {
        case VALUE_START:
        case TOKEN_START:
            if (c == 'k' || c == 'c' || c == 'u') {
                w = c == 'k' ? 0 : c == 'c' ? 1 : 2;
                i = 0;
                st = MATCH;
            } else if (st == VALUE_START || is_tchar(c)) {
                st = TOKEN;
            } else if (c != ' ') {
                st = DEAD;
            }
            break;
        case MATCH:
            i++;
            if (c != (unsigned char)words[w][i])
                st = TOKEN;
            else if (words[w][i + 1] == '\0')
                st = GOT;
            break;
        case GOT:
            if (ch == ',') {
                flags |= word_flag[w];
                st = TOKEN_START;
            } else if (ch != ' ') {
                st = TOKEN;
            }
            break;
        case TOKEN:
            if (ch == ',')
                st = TOKEN_START;
            break;
        case DEAD: break;
        }
    }
    if (st == GOT)
        flags |= word_flag[w];
    return flags;
}

/* ---- the head ---- */

/* The line at <line> up to its LF (which exists): *<lend> is its end without a CR
 * before the LF; the return is the byte after the LF. */
static const char *
line_end(const char *line, const char *end, const char **lend)
{
    const char *lf = memchr(line, '\n', (size_t)(end - line));

    *lend = lf > line && lf[-1] == '\r' ? lf - 1 : lf;
    return lf + 1;
}

/* The request line: method, target and version, with any number of spaces between
 * (as http-parser allowed). */
static enum net_h1_ev
request_line(struct net_h1req *r, const char *p, const char *lend)
{
    const char *m = p, *t;

    while (p < lend && *p != ' ')
        p++;
    r->method = method_of(m, (size_t)(p - m));
    if (r->method == h1_no_method || p == lend)
        return malformed(r);
    while (p < lend && *p == ' ')
        p++;
    t = p;
    p = target_stop(p, lend);
    if (p < lend && *p == '\r')
        return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_BARE_CR);
    if (p < lend && *p != ' ')
        return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_CTL);
    if (p == t)
        return malformed(r);
    if (*t != '/' && *t != '*')
        return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_TARGET_FORM);
    if (gw_buf_append(&r->url, t, (size_t)(p - t)) != GW_OK)
        return refuse(r, GW_E_NOMEM, "out of memory");
    r->head_bytes += (size_t)(p - t);
    while (p < lend && *p == ' ')
        p++;
    if (lend - p != 8 || memcmp(p, "HTTP/", 5) != 0 || !is_digit(p[5]) || p[6] != '.' ||
        !is_digit(p[7]) || p[5] != '1' || p[7] > '1')
        return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_VERSION);
    r->http_minor = (unsigned)(p[7] - '0');
    return NET_H1_MORE;
}

/* What the head's headers say about the framing and the connection. */
struct h1_facts {
    unsigned n_host, n_te, n_cl, conn;
    bool te_chunked;      /* the Transfer-Encoding's value is "chunked" */
    bool te_longer;       /* a name that begins with "transfer-encoding" */
    bool te_last_chunked; /* the last of those two kinds was a chunked Transfer-Encoding */
};

/* One header line (not empty, no LF): checked, kept, and noted in <f>. */
static enum net_h1_ev
header_line(struct net_h1req *r, const char *line, const char *lend, struct h1_facts *f)
{
    const char *p = line, *v, *ve;
    struct net_req_hdr *h;
    size_t nlen;

    if (*p == ' ' || *p == '\t')
        return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_FOLD);
    while (p < lend && is_tchar((unsigned char)*p))
        p++;
    if (p < lend && *p == '\r')
        return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_BARE_CR);
    if (p == line || p == lend || *p != ':')
        return refuse(r, GW_E_HTTP_PARSE, "a header name is not a valid token");
    nlen = (size_t)(p - line);
    p++;
    while (p < lend && (*p == ' ' || *p == '\t'))
        p++;
    v = p;
    p = net_h1_value_ctl(line, p, lend); /* the name, its colon and blanks hold none */
    if (p < lend)
        return refuse(r, GW_E_HTTP_PARSE, *p == '\r' ? NET_H1_WHY_BARE_CR : NET_H1_WHY_CTL);
    r->head_bytes += nlen + 4 + (size_t)(lend - v);
    if (r->n_hdrs >= r->lim.max_headers)
        return refuse(r, GW_E_HEADERS_TOO_LARGE, "request head too large or too many headers");
    if (r->n_hdrs == r->cap_hdrs) {
        unsigned cap = r->cap_hdrs ? r->cap_hdrs * 2 : 16;
        struct net_req_hdr *nv = gw_realloc(r->hdrs, cap * sizeof(*nv));

        if (!nv)
            return refuse(r, GW_E_NOMEM, "out of memory");
        r->hdrs = nv;
        r->cap_hdrs = cap;
    }
    ve = lend;
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
        ve--;
    h = &r->hdrs[r->n_hdrs++];
    r->name_bits |= name_bit(line, nlen);
    h->name_off = (uint32_t)(line - r->hbuf.data);
    h->name_len = (uint32_t)nlen;
    h->val_off = (uint32_t)(v - r->hbuf.data);
    h->val_len = (uint32_t)(ve - v);
    /* the names that frame the message or the connection, by length first */
    switch (nlen) {
    case 4:
        if (eq_nocase(line, nlen, "host"))
            f->n_host++;
        break;
    case 10:
    case 16:
        if (eq_nocase(line, nlen, nlen == 10 ? "connection" : "proxy-connection"))
            f->conn |= net_h1_connection_tokens(v, (size_t)(lend - v));
        break;
    case 14:
        if (eq_nocase(line, nlen, "content-length")) {
            if (f->n_cl++ || !net_h1_content_length(v, (size_t)(lend - v), &r->content_length))
                return refuse(r, GW_E_HTTP_PARSE, "malformed or repeated Content-Length");
        }
        break;
    default:
        /* http-parser (Debian's) took any name that begins with it for a
         * Transfer-Encoding once those 17 bytes matched, and forgot an earlier chunked
         * one: refused unless a chunked Transfer-Encoding comes after it, as before */
        if (nlen > 17 && eq_nocase(line, 17, "transfer-encoding")) {
            f->te_longer = true;
            f->te_last_chunked = false;
        }
        break;
    case 17:
        if (eq_nocase(line, nlen, "transfer-encoding")) {
            size_t n = (size_t)(lend - v);

            f->n_te++;
            f->te_chunked = n >= 7 && eq_nocase(v, 7, "chunked");
            while (f->te_chunked && n > 7 && v[n - 1] == ' ')
                n--;
            f->te_chunked = f->te_chunked && n == 7;
            f->te_last_chunked = f->te_chunked;
        }
        break;
    }
    return NET_H1_MORE;
}

/* The head, whole in hbuf (up to and with its empty line): RFC 9112's rules, then the
 * framing it declares. */
static enum net_h1_ev
head_parse(struct net_h1req *r)
{
    const char *line = r->hbuf.data, *end = line + r->hbuf.len, *lend, *next;
    struct h1_facts f = {0};
    bool http11;

    next = line_end(line, end, &lend);
    if (request_line(r, line, lend) == NET_H1_ERROR)
        return NET_H1_ERROR;
    for (line = next; line < end; line = next) {
        next = line_end(line, end, &lend);
        if (lend == line)
            break; /* the empty line that ends the head */
        /* a line that a folded one continues is refused for the fold, whatever it holds
         * (http-parser read "Content-Length:" and " 5" as one header) */
        if (next < end && (*next == ' ' || *next == '\t'))
            return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_FOLD);
        if (header_line(r, line, lend, &f) == NET_H1_ERROR)
            return NET_H1_ERROR;
    }
    if (r->head_bytes > r->lim.max_header_bytes)
        return refuse(r, GW_E_HEADERS_TOO_LARGE, "request head too large or too many headers");
    http11 = r->http_minor == 1;
    if (f.n_host > 1)
        return refuse(r, GW_E_HTTP_PARSE, "more than one Host header");
    if (http11 && f.n_host == 0)
        return refuse(r, GW_E_HTTP_PARSE, "an HTTP/1.1 request needs a Host header");
    if (f.n_te > 1 || (f.n_te && !http11) || (f.n_te && f.n_cl))
        return refuse(r, GW_E_HTTP_PARSE, "ambiguous Transfer-Encoding");
    if (f.n_te && !f.te_chunked)
        return refuse(r, GW_E_HTTP_PARSE, "only Transfer-Encoding: chunked is accepted");
    if (f.te_longer && (f.n_cl || !f.te_last_chunked))
        return refuse(r, GW_E_HTTP_PARSE, "ambiguous Transfer-Encoding");
    if (r->method == HTTP_CONNECT)
        return refuse(r, GW_E_HTTP_PARSE, "CONNECT is not supported here");
    /* An Upgrade (h2c, websocket) is not taken here: the request is answered as
     * HTTP/1.1, as RFC 9110 7.8 allows (net/ws.c takes the Responses WebSocket). */
    r->keep_alive = http11 ? !(f.conn & NET_H1_CLOSE) : (f.conn & NET_H1_KEEP_ALIVE) != 0;
    r->chunked = f.n_te == 1;
    r->has_body = r->chunked || r->content_length > 0;
    r->part = NET_H1P_HEAD_END;
    return NET_H1_HEAD;
}

/* The request line's method as far as it has come (hbuf, then <data>): letters A-Z and
 * '-' up to a space within its first 12 bytes (the longest method has 11). Checked at
 * every feed until the request line is whole, so that a client speaking another
 * protocol (a TLS hello on the plain port) is refused at once rather than at the head's
 * timeout; what comes later waits for whole lines. */
static bool
method_so_far(const struct net_h1req *r, const char *data, size_t len)
{
    size_t base = r->hbuf.len, n = base + len < 12 ? base + len : 12, k;

    for (k = 0; k < n; k++) {
        char c = k < base ? r->hbuf.data[k] : data[k - base];

        if (c == ' ')
            return k > 0;
        if (!((c >= 'A' && c <= 'Z') || c == '-'))
            return false;
    }
    return n < 12;
}

/* Gathers head bytes into hbuf until the empty line. Only whole lines are looked at, so
 * the head is read the same however it was split. */
static enum net_h1_ev
head_gather(struct net_h1req *r, const char *data, size_t len, size_t *used)
{
    size_t base = r->hbuf.len, off = 0;
    size_t cap = (size_t)r->lim.max_header_bytes + H1_HEAD_SLACK;
    const char *lf;

    if (r->line_start == 0 && !method_so_far(r, data, len))
        return malformed(r);
    while ((lf = memchr(data + off, '\n', len - off)) != NULL) {
        size_t at = base + (size_t)(lf - data), n = at - r->line_start;
        char first = n == 0                 ? '\n'
                     : r->line_start < base ? r->hbuf.data[r->line_start]
                                            : data[r->line_start - base];

        off = (size_t)(lf - data) + 1;
        /* the limit first, as when the bytes come one at a time */
        if (at + 1 > cap)
            return refuse(r, GW_E_HEADERS_TOO_LARGE, NET_H1_WHY_HEAD_LONG);
        /* A line that begins with a CR not before its LF: refused at once, as http-parser
         * ended the head at a CR and any byte. */
        if (first == '\r' && n > 1)
            return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_BARE_CR);
        /* the request line is never empty: CR and LF before it were skipped */
        if (n == 0 || (n == 1 && first == '\r')) {
            if (gw_buf_append(&r->hbuf, data, off) != GW_OK)
                return refuse(r, GW_E_NOMEM, "out of memory");
            *used = off - 1; /* the final LF waits for the next feed */
            return head_parse(r);
        }
        r->line_start = at + 1;
    }
    if (base + len > cap)
        return refuse(r, GW_E_HEADERS_TOO_LARGE, NET_H1_WHY_HEAD_LONG);
    if (gw_buf_append(&r->hbuf, data, len) != GW_OK)
        return refuse(r, GW_E_NOMEM, "out of memory");
    *used = len;
    return NET_H1_MORE;
}

/* ---- the body ---- */

static enum net_h1_ev
body_take(struct net_h1req *r, const char *data, size_t n)
{
    if (r->body.len + n > r->lim.max_body)
        return refuse(r, GW_E_BODY_TOO_LARGE, "request body larger than server.max_body_mb");
    if (gw_buf_append(&r->body, data, n) != GW_OK)
        return refuse(r, GW_E_NOMEM, "out of memory");
    return NET_H1_MORE;
}

static enum net_h1_ev
message_done(struct net_h1req *r)
{
    r->part = NET_H1P_DONE;
    return NET_H1_DONE;
}

/* One byte of a chunk-size line: hex digits, then optionally ';' or ' ' and extensions
 * (ignored; no control bytes), then CRLF. */
static enum net_h1_ev
size_byte(struct net_h1req *r, char c)
{
    int d;

    if (++r->size_len > H1_SIZE_LINE_MAX)
        return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_CHUNK);
    switch (r->size_at) {
    case NET_H1S_DIGITS: /* the size */
        d = gw_hex_digit(c);
        if (d >= 0) {
            if ((UINT64_MAX - 16) / 16 < r->left)
                return refuse(r, GW_E_HTTP_PARSE, "chunk size too large");
            r->left = r->left * 16 + (uint64_t)d;
        } else if (r->size_len > 1 && (c == ';' || c == ' ')) {
            r->size_at = NET_H1S_EXT;
        } else if (r->size_len > 1 && c == '\r') {
            r->size_at = NET_H1S_CR;
        } else {
            /* (http-parser took bytes past 0x7f for zeros: framing of its own) */
            return refuse(r, GW_E_HTTP_PARSE,
                          (unsigned char)c >= 0x80 ? NET_H1_WHY_CHUNK : "malformed chunk size");
        }
        return NET_H1_MORE;
    case NET_H1S_EXT: /* extensions */
        if (c == '\r')
            r->size_at = NET_H1S_CR;
        else if (is_ctl((unsigned char)c))
            return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_CHUNK);
        return NET_H1_MORE;
    default: /* NET_H1S_CR: the LF */
        if (c != '\n')
            return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_BARE_CR);
        /* At once, not when the bytes arrive: a chunk declared past the limit is refused. */
        if (r->left > r->lim.max_body || r->body.len + r->left > r->lim.max_body)
            return refuse(r, GW_E_BODY_TOO_LARGE, "request body larger than server.max_body_mb");
        if (r->left == 0) {
            r->part = NET_H1P_TRAILER;
            gw_buf_reset(&r->trail);
        } else {
            r->part = NET_H1P_DATA;
        }
        return NET_H1_MORE;
    }
}

/* One trailer line (not empty): checked as a header line is, counted against the head's
 * limit, never kept. Like http-parser, its name may hold spaces and a Content-Length
 * trailer must be well formed and alone. */
static enum net_h1_ev
trailer_line(struct net_h1req *r, const char *line, const char *lend)
{
    const char *p = line, *v, *ne;
    uint64_t cl;

    if (*p == ' ' || *p == '\t')
        return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_FOLD);
    while (p < lend && (is_tchar((unsigned char)*p) || *p == ' '))
        p++;
    if (p < lend && *p == '\r')
        return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_BARE_CR);
    if (p == line || p == lend || *p != ':')
        return malformed(r);
    ne = p;
    p++;
    while (p < lend && (*p == ' ' || *p == '\t'))
        p++;
    v = p;
    for (; p < lend; p++) {
        if (is_ctl((unsigned char)*p))
            return refuse(r, GW_E_HTTP_PARSE, *p == '\r' ? NET_H1_WHY_BARE_CR : NET_H1_WHY_CTL);
    }
    r->head_bytes += (size_t)(ne - line) + 4 + (size_t)(lend - v);
    if (r->head_bytes > r->lim.max_header_bytes)
        return refuse(r, GW_E_HEADERS_TOO_LARGE, "request head too large or too many headers");
    while (ne > line && ne[-1] == ' ')
        ne--;
    if (eq_nocase(line, (size_t)(ne - line), "content-length")) {
        /* (a line at a time: a folded line after it is not seen yet, and http-parser read
         * "Content-Length:" and " 5" as one) */
        if (r->trailer_cl || !net_h1_content_length(v, (size_t)(lend - v), &cl))
            return refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_CHUNK);
        r->trailer_cl = true;
    }
    return NET_H1_MORE;
}

/* Trailer bytes: whole lines are checked and dropped (a partial one waits in its own
 * buffer: hbuf holds the head, which the caller may point into while the body is read);
 * the empty line ends the message. */
static enum net_h1_ev
trailer_gather(struct net_h1req *r, const char *data, size_t len, size_t *used)
{
    size_t off = 0, cap = (size_t)r->lim.max_header_bytes + H1_HEAD_SLACK;
    const char *lf;

    while ((lf = memchr(data + off, '\n', len - off)) != NULL) {
        size_t n = (size_t)(lf - (data + off)) + 1; /* this piece of the line, LF included */
        const char *line = data + off, *lend;

        if (r->trail.len + n > cap)
            return refuse(r, GW_E_HEADERS_TOO_LARGE, NET_H1_WHY_HEAD_LONG);
        off += n;
        if (r->trail.len) { /* the line began in an earlier feed */
            if (gw_buf_append(&r->trail, line, n) != GW_OK)
                return refuse(r, GW_E_NOMEM, "out of memory");
            line = r->trail.data;
        }
        line_end(line, line + (r->trail.len ? r->trail.len : n), &lend);
        if (lend == line) {
            gw_buf_reset(&r->trail);
            *used = off;
            return message_done(r);
        }
        if (trailer_line(r, line, lend) == NET_H1_ERROR)
            return NET_H1_ERROR;
        gw_buf_reset(&r->trail); /* the line is not kept */
    }
    if (r->trail.len + (len - off) > cap)
        return refuse(r, GW_E_HEADERS_TOO_LARGE, NET_H1_WHY_HEAD_LONG);
    if (gw_buf_append(&r->trail, data + off, len - off) != GW_OK)
        return refuse(r, GW_E_NOMEM, "out of memory");
    *used = len;
    return NET_H1_MORE;
}

/* ---- API ---- */

void
net_h1req_init(struct net_h1req *r, const struct net_h1req_limits *lim)
{
    memset(r, 0, sizeof(*r));
    r->lim = *lim;
}

void
net_h1req_fini(struct net_h1req *r)
{
    gw_buf_fini(&r->url);
    gw_buf_fini(&r->hbuf);
    gw_buf_fini(&r->trail);
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
    r->name_bits |= name_bit(name.ptr, name.len);
    return GW_OK;
}

enum net_h1_ev
net_h1req_feed(struct net_h1req *r, const char *data, size_t len, size_t *used)
{
    enum net_h1_ev ev = NET_H1_MORE;
    size_t off = 0, n;

    while (off < len && ev == NET_H1_MORE) {
        switch (r->part) {
        case NET_H1P_IDLE:
            if (data[off] == '\r' || data[off] == '\n') {
                off++;
                break;
            }
            request_reset(r);
            r->part = NET_H1P_HEAD;
            break;
        case NET_H1P_HEAD:
            n = 0;
            ev = head_gather(r, data + off, len - off, &n);
            off += n;
            break;
        case NET_H1P_HEAD_END:
            off++; /* the head's final LF, read before */
            if (r->chunked) {
                r->part = NET_H1P_SIZE;
                r->size_len = 0;
                r->size_at = NET_H1S_DIGITS;
                r->left = 0;
            } else if (r->content_length > 0) {
                r->part = NET_H1P_BODY;
                r->left = r->content_length;
            } else {
                ev = message_done(r);
            }
            break;
        case NET_H1P_BODY:
        case NET_H1P_DATA:
            n = r->left < len - off ? (size_t)r->left : len - off;
            ev = body_take(r, data + off, n);
            off += n;
            r->left -= n;
            if (ev == NET_H1_MORE && r->left == 0) {
                if (r->part == NET_H1P_BODY)
                    ev = message_done(r);
                else
                    r->part = NET_H1P_DATA_CR;
            }
            break;
        case NET_H1P_SIZE: ev = size_byte(r, data[off++]); break;
        case NET_H1P_DATA_CR:
            if (data[off++] != '\r')
                ev = refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_CHUNK);
            r->part = NET_H1P_DATA_LF;
            break;
        case NET_H1P_DATA_LF:
            if (data[off++] != '\n')
                ev = refuse(r, GW_E_HTTP_PARSE, NET_H1_WHY_BARE_CR);
            r->part = NET_H1P_SIZE;
            r->size_len = 0;
            r->size_at = NET_H1S_DIGITS;
            r->left = 0;
            break;
        case NET_H1P_TRAILER:
            n = 0;
            ev = trailer_gather(r, data + off, len - off, &n);
            off += n;
            break;
        case NET_H1P_DONE: *used = off; return NET_H1_DONE; /* net_h1req_next comes first */
        }
    }
    *used = off;
    return ev;
}

void
net_h1req_next(struct net_h1req *r)
{
    request_reset(r);
    r->part = NET_H1P_IDLE;
}

bool
net_h1req_header(const struct net_h1req *r, struct gw_str name, struct gw_str *value)
{
    unsigned i;

    if (!(r->name_bits & name_bit(name.ptr, name.len)))
        return false;
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
