/* SPDX-License-Identifier: MIT
 * net/h1req.h - reads one HTTP/1.1 request at a time from bytes, strictly (RFC 9112):
 * the project's own reader (DESIGN.md 2: http-parser, byte at a time, was the largest
 * single cost of a relayed request in `make bench`'s profile, docs/perf.md). It refuses
 * what a proxy must not guess about (RFC 9112 2.2, 5.1, 5.2, 6.1, 6.3, 7.1): header
 * names that are not tokens (`Content-Length : 5`), control bytes in values, a CR
 * without its LF, obsolete line folding, a missing or repeated Host on HTTP/1.1, a
 * Transfer-Encoding other than one `chunked`, Content-Length beside it or twice, chunk
 * sizes past the body limit. It stops twice per request: once the head is read (the
 * caller authenticates and reserves memory before any body byte is taken) and once the
 * message is complete. No libevent and no clock: the fuzz target tests/fuzz/fuzz_h1req.c
 * feeds it bytes directly, whole and in pieces, and checks it against a reader built on
 * http-parser (the reader this one replaced) on the same corpus.
 * Owns:    the request's url, header and body buffers until reset or fini.
 * Threads: the owner's only.
 * See:     net/h1req.c, net/http1.c, tests/unit/net/test_h1req.c
 */
#ifndef GW_NET_H1REQ_H
#define GW_NET_H1REQ_H

#include <http_parser.h> /* enum http_method only: the names every front end shares */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/str.h"

/* The refusals where this reader is stricter than http-parser's lenient build was (the
 * fuzz target allows a difference from its http-parser reference only with one of
 * these sentences). */
#define NET_H1_WHY_BARE_CR "a CR without its LF in the request framing"
#define NET_H1_WHY_FOLD "obsolete line folding in the request head"
#define NET_H1_WHY_CTL "a control byte in the request head"
#define NET_H1_WHY_TARGET_FORM "only an origin-form request target (/path) is served here"
#define NET_H1_WHY_VERSION "only HTTP/1.0 and HTTP/1.1 are served here"
#define NET_H1_WHY_CHUNK "malformed chunked framing"
#define NET_H1_WHY_HEAD_LONG "request head too large"

struct net_h1req_limits {
    unsigned max_header_bytes; /* request line and header bytes together */
    unsigned max_headers;
    size_t max_body;
};

/* One header of the current request: offsets into hbuf. */
struct net_req_hdr {
    uint32_t name_off, name_len, val_off, val_len;
};

enum net_h1_ev {
    NET_H1_MORE = 0, /* every byte was taken: feed more when it comes */
    NET_H1_HEAD,     /* the head is read: decide (a declared content_length over
                      * max_body included), then feed the body or refuse */
    NET_H1_DONE,     /* the request is complete (body included) */
    NET_H1_ERROR,    /* refused: <refuse> and <why> say why; close after answering */
};

/* Where the reader is within the message (net/h1req.c's own). */
enum net_h1_part {
    NET_H1P_IDLE = 0, /* CR and LF before a request are skipped (RFC 9112 2.2) */
    NET_H1P_HEAD,     /* gathering the head into hbuf up to its empty line */
    NET_H1P_HEAD_END, /* the head's last byte, left unread at NET_H1_HEAD */
    NET_H1P_BODY,     /* content_length bytes */
    NET_H1P_SIZE,     /* a chunk-size line */
    NET_H1P_DATA,     /* a chunk's bytes */
    NET_H1P_DATA_CR,  /* the CRLF after them */
    NET_H1P_DATA_LF,
    NET_H1P_TRAILER, /* trailer lines up to the empty one */
    NET_H1P_DONE,
};

struct net_h1req {
    struct net_h1req_limits lim;
    /* the request being read; valid from NET_H1_HEAD until net_h1req_next */
    enum http_method method;
    unsigned http_minor; /* HTTP/1.<http_minor>: 0 or 1 */
    struct gw_buf url;
    struct gw_buf hbuf; /* the head as read (names and values are offsets into it) */
    struct net_req_hdr *hdrs;
    unsigned n_hdrs, cap_hdrs;
    uint64_t name_bits; /* a bit per header name, by a hash of it that ignores case */
    bool keep_alive;
    bool chunked;            /* Transfer-Encoding: chunked */
    bool has_body;           /* chunked, or a Content-Length above 0 */
    uint64_t content_length; /* declared, when not chunked (0 when absent) */
    size_t head_bytes;
    struct gw_buf body;
    enum gw_code refuse; /* with NET_H1_ERROR: the code to answer */
    const char *why;     /* ... and a static sentence for the client */
    /* the reader's place */
    enum net_h1_part part;
    size_t line_start;   /* NET_H1P_HEAD: where the current line began in hbuf */
    struct gw_buf trail; /* NET_H1P_TRAILER: a trailer line begun in an earlier feed */
    uint64_t left;       /* NET_H1P_BODY, _DATA: bytes still to come */
    unsigned size_len;   /* NET_H1P_SIZE: bytes of the size line so far */
    enum { NET_H1S_DIGITS, NET_H1S_EXT, NET_H1S_CR } size_at; /* NET_H1P_SIZE: where */
    bool trailer_cl; /* a Content-Length trailer was seen */
};

/* Prepares <r> with <lim> for the first request. */
void net_h1req_init(struct net_h1req *r, const struct net_h1req_limits *lim);
/* Frees the buffers. */
void net_h1req_fini(struct net_h1req *r);
/* Feeds <len> bytes at <data>; *<used> tells how many were taken (the rest waits for
 * the next call). NET_H1_HEAD returns before any body byte: the next feed reads the
 * body. It leaves the head's last byte (its final LF) unread, so the caller always has a
 * byte to feed after it, even for a request without a body. NET_H1_DONE holds the
 * reader until net_h1req_next; NET_H1_ERROR is final for the connection. */
enum net_h1_ev net_h1req_feed(struct net_h1req *r, const char *data, size_t len, size_t *used);
/* True from a request's first byte until its head is read. */
static inline bool
net_h1req_in_head(const struct net_h1req *r)
{
    return r->part == NET_H1P_HEAD;
}
/* After NET_H1_DONE (the answer was written): forget the request, keep the buffers'
 * memory except a large body's, and read the next one. */
void net_h1req_next(struct net_h1req *r);
/* A header value of the current request by case-insensitive name; false if absent. */
bool net_h1req_header(const struct net_h1req *r, struct gw_str name, struct gw_str *value);
/* The i-th header (i < n_hdrs). */
void net_h1req_header_at(const struct net_h1req *r, unsigned i, struct gw_str *name,
                         struct gw_str *value);
/* For front ends that decode a request themselves (HTTP/2): adds one header to <r>,
 * counted against lim (max_headers, and max_header_bytes with the bytes of the url and
 * the headers before it). GW_OK, GW_E_HEADERS_TOO_LARGE or GW_E_NOMEM. */
enum gw_code net_h1req_add_header(struct net_h1req *r, struct gw_str name, struct gw_str value);
/* True for an RFC 9110 token (a valid header name); false for an empty one. */
bool net_h1_is_token(struct gw_str s);

/* ---- HTTP/1 byte rules, shared with the response reader (net/h1resp.c) ---- */

/* 1 for a token character (RFC 9110 5.6.2), by byte value. */
extern const unsigned char net_h1_tchar[256];
/* The first byte of [p, end) a header value may not hold (a control byte but HTAB, or
 * DEL), or <end>; sixteen bytes a step. The bytes of [lo, p) must hold none (a line's
 * name, colon and blanks; lo = p when nothing before p is known): the last step may
 * read them. */
const char *net_h1_value_ctl(const char *lo, const char *p, const char *end);
/* A Content-Length value (after its leading blanks): digits, then only spaces. */
bool net_h1_content_length(const char *v, size_t n, uint64_t *out);
/* The keep-alive and close tokens of a Connection value (after its leading blanks), as
 * http-parser 2.9 read them. */
#define NET_H1_KEEP_ALIVE 1u
#define NET_H1_CLOSE 2u
unsigned net_h1_connection_tokens(const char *v, size_t n);

#endif
