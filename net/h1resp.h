/* SPDX-License-Identifier: MIT
 * net/h1resp.h - reads one HTTP/1.x response at a time from an upstream's bytes: the
 * project's own reader (DESIGN.md 2: http-parser, a byte at a time with a callback per
 * piece, was 2.3k of the 34k instructions of a relayed request in `make bench`'s
 * profile, docs/perf.md). Its framing is RFC 9112 6.3's: no body for a HEAD request's
 * answer, 1xx, 204 and 304; chunked when the last transfer coding is chunked; to the
 * connection's close for another coding or neither length; else Content-Length. It
 * refuses what a proxy must not guess about: a Content-Length beside a
 * Transfer-Encoding or twice, header names that are not tokens, control bytes in
 * values, a CR without its LF, obsolete line folding, a version other than HTTP/1.x,
 * an unasked-for 101. 1xx heads are read and dropped. A head that comes in one piece
 * is read where it lies (no copy); one split across reads is gathered in hbuf.
 * No libevent and no clock: tests/fuzz/fuzz_h1resp.c feeds it bytes, whole and in
 * pieces, and checks it against http-parser on the same corpus.
 * Owns:    hbuf until fini.
 * Threads: the owner's only.
 * See:     net/h1resp.c, net/upstream.c, tests/unit/net/test_h1resp.c
 */
#ifndef GW_NET_H1RESP_H
#define GW_NET_H1RESP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/str.h"

enum net_h1r_ev {
    NET_H1R_MORE = 0, /* every byte given was taken: feed more when it comes */
    NET_H1R_HEAD,     /* a final head is read: net_h1resp_head, status, keep_alive */
    NET_H1R_BODY,     /* *<body> holds body bytes (within the bytes fed) */
    NET_H1R_DONE,     /* the response is complete; what follows is not its */
    NET_H1R_ERROR,    /* not a response gw reads: <why> */
};

/* Where the reader is (net/h1resp.c's own). */
enum net_h1r_part {
    NET_H1R_P_HEAD = 0,
    NET_H1R_P_LENGTH,  /* Content-Length body: <left> bytes to come */
    NET_H1R_P_CLOSE,   /* body to the connection's close */
    NET_H1R_P_SIZE,    /* a chunk-size line */
    NET_H1R_P_DATA,    /* chunk data: <left> bytes to come */
    NET_H1R_P_DATA_LF, /* the line end after chunk data */
    NET_H1R_P_TRAILER, /* trailer lines, up to the empty one */
    NET_H1R_P_DONE,
};

struct net_h1resp {
    unsigned max_head;    /* bytes of one head (and of the trailers) */
    unsigned max_headers; /* header lines of one head */
    bool no_body;         /* the request was HEAD: its answer has no body */
    enum net_h1r_part part;
    unsigned status; /* of the final head */
    unsigned http_minor;
    bool keep_alive;      /* the connection may carry another request after this */
    uint64_t left;        /* body or chunk bytes still to come */
    struct gw_buf hbuf;   /* a head (or a chunk line) that came in pieces */
    size_t scanned;       /* hbuf bytes already looked at for a line end */
    size_t trailer_bytes; /* the trailers' so far */
    struct gw_str head;   /* the last head read: status line to its empty line */
    bool cr;              /* NET_H1R_P_DATA_LF: the CR came */
    bool held;            /* head lies in hbuf: emptied at the next feed */
    const char *why;      /* NET_H1R_ERROR */
};

/* Ready for a response; <no_body>: the request was HEAD. Keeps hbuf's memory. */
void net_h1resp_init(struct net_h1resp *r, unsigned max_head, unsigned max_headers, bool no_body);
void net_h1resp_fini(struct net_h1resp *r);
/* Reads from <data>: *<used> bytes are taken (the rest is to be fed again, after a
 * pause, or is not this response's after DONE). NET_H1R_HEAD: the head (and every byte
 * it lies in) is valid until the next feed. NET_H1R_BODY: *<body> is a slice of <data>.
 * After HEAD of a response without a body, the next feed (any bytes, or none) gives
 * DONE without taking any. */
enum net_h1r_ev net_h1resp_feed(struct net_h1resp *r, const char *data, size_t len, size_t *used,
                                struct gw_str *body);
/* The connection closed: DONE for a body that ends there, else ERROR. */
enum net_h1r_ev net_h1resp_eof(struct net_h1resp *r);
/* The header lines of the last head, one at a time: start with *<off> 0; false past
 * the last. Names and values as checked by the reader (values without their blanks). */
bool net_h1resp_header_next(const struct net_h1resp *r, size_t *off, struct gw_str *name,
                            struct gw_str *value);

#endif
