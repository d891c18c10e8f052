/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_h1req.c - fuzz target for the strict HTTP/1.1 request reader
 * (net/h1req.c): heads, chunked framing, trailers, pipelined requests. The input is read
 * twice, once whole and once in pieces whose sizes come from the input itself, resuming
 * at each head and going on after each request as the server does; both readings must
 * see the same requests (method, url, header pairs, body) and end the same way (wanting
 * more, or refused). Every header kept must have a token name and a value
 * without control bytes; a body never passes max_body.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     net/h1req.c, tests/fuzz/corpus/h1req/
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "net/h1req.h"
#include "tests/fuzz/fuzz_hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T_MAX_REQS 16

struct t_req {
    unsigned method;
    uint64_t url_hash, hdr_hash, body_hash;
    size_t body_len;
};

struct t_run {
    struct t_req reqs[T_MAX_REQS];
    unsigned n;
    enum gw_code end; /* GW_OK: more input wanted */
};

static void
t_check_head(const struct net_h1req *r)
{
    unsigned i;

    for (i = 0; i < r->n_hdrs; i++) {
        struct gw_str name, value;
        size_t j;

        net_h1req_header_at(r, i, &name, &value);
        if (!net_h1_is_token(name))
            abort(); /* a header that is not a token was kept */
        for (j = 0; j < value.len; j++) {
            unsigned char ch = (unsigned char)value.ptr[j];

            if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
                abort();
        }
    }
}

static void
t_record(struct t_run *run, const struct net_h1req *r)
{
    struct t_req *q = &run->reqs[run->n++];
    unsigned i;

    q->method = (unsigned)r->method;
    q->url_hash = fuzz_hash(FUZZ_HASH_START, r->url.data, r->url.len);
    q->hdr_hash = FUZZ_HASH_START;
    for (i = 0; i < r->n_hdrs; i++) {
        struct gw_str name, value;

        net_h1req_header_at(r, i, &name, &value);
        q->hdr_hash = fuzz_hash(q->hdr_hash, name.ptr, name.len);
        q->hdr_hash = fuzz_hash(q->hdr_hash, ":", 1);
        q->hdr_hash = fuzz_hash(q->hdr_hash, value.ptr, value.len);
        q->hdr_hash = fuzz_hash(q->hdr_hash, "\n", 1);
    }
    q->body_hash = fuzz_hash(FUZZ_HASH_START, r->body.data, r->body.len);
    q->body_len = r->body.len;
}

/* Reads <data> in pieces: <step> 0 = all at once, else piece sizes from the input. */
static void
t_read(const uint8_t *data, size_t size, int step, struct t_run *run)
{
    static const struct net_h1req_limits lim = {2048, 16, 4096};
    struct net_h1req r;
    size_t off = 0, k = 0;

    memset(run, 0, sizeof(*run));
    net_h1req_init(&r, &lim);
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
            break;
        }
        if (ev == NET_H1_HEAD) {
            t_check_head(&r);
            if (r.content_length > lim.max_body) {
                run->end = GW_E_BODY_TOO_LARGE; /* the server refuses it here */
                break;
            }
            net_h1req_resume(&r);
        } else if (ev == NET_H1_DONE) {
            if (r.body.len > lim.max_body)
                abort();
            t_record(run, &r);
            net_h1req_next(&r);
        }
    }
    net_h1req_fini(&r);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct t_run *whole = malloc(sizeof(*whole)), *pieces = malloc(sizeof(*pieces));

    if (!whole || !pieces)
        abort();
    t_read(data, size, 0, whole);
    t_read(data, size, 1, pieces);
    /* Which refusal comes first may depend on the split when the input holds two
     * problems (http-parser reports a partial header at the end of each piece, so a
     * header-count limit can be seen before a bad byte further on): both must refuse,
     * not necessarily with the same code. */
    if (whole->n != pieces->n || (whole->end == GW_OK) != (pieces->end == GW_OK) ||
        memcmp(whole->reqs, pieces->reqs, whole->n * sizeof(whole->reqs[0])) != 0)
        abort(); /* the way the bytes were split changed what was read */
    free(whole);
    free(pieces);
    return 0;
}
