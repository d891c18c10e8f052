/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_bedrock_es.c - fuzz target for the eventstream decoder
 * (dialects/bedrock_stream.c): the input (after its first byte) is fed once whole and
 * once cut in two at a point chosen by the first byte, then the rest in reads of 1..8
 * bytes; both must give the same messages, result and partial(). Every message decoded
 * must also encode back (dl_bedrock_es_encode) to exactly the bytes it came from, so the
 * decoder cannot have misread a length, a header or a CRC it accepted.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     dialects/bedrock_stream.c, tests/fuzz/corpus/bedrock_es/
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dialects/bedrock.h"
#include "tests/fuzz/fuzz_hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct t_run {
    const char *in; /* the input, to check the re-encoding against */
    size_t at;      /* where the next message starts in it */
    size_t n;       /* messages */
    uint64_t hash;  /* of every header and payload, in order */
    struct gw_buf enc;
};

static int
t_on_msg(void *arg, const struct dl_bedrock_es_msg *m)
{
    struct t_run *r = arg;
    size_t i;

    for (i = 0; i < m->n_hdrs; i++) {
        unsigned char t = (unsigned char)m->hdrs[i].type;

        r->hash = fuzz_hash(r->hash, m->hdrs[i].name.ptr, m->hdrs[i].name.len);
        r->hash = fuzz_hash(r->hash, &t, 1);
        r->hash = fuzz_hash(r->hash, m->hdrs[i].value.ptr, m->hdrs[i].value.len);
    }
    r->hash = fuzz_hash(r->hash, m->payload.ptr, m->payload.len);
    r->n++;
    gw_buf_reset(&r->enc);
    if (dl_bedrock_es_encode(&r->enc, m->hdrs, m->n_hdrs, m->payload) != GW_OK)
        abort();
    if (memcmp(r->enc.data, r->in + r->at, r->enc.len) != 0)
        abort();
    r->at += r->enc.len;
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct t_run a = {0}, b = {0};
    struct dl_bedrock_es pa, pb;
    enum gw_code rca, rcb;
    const char *s = (const char *)data + 1;
    size_t n, cut, step, i, max;

    if (size < 1)
        return 0;
    n = size - 1;
    max = (data[0] & 0x80) ? 64 : 1u << 20; /* half the runs with a small maximum */
    cut = n ? (size_t)data[0] % (n + 1) : 0;
    step = 1 + (size_t)(data[0] % 8);
    a.in = b.in = s;

    dl_bedrock_es_init(&pa, max);
    rca = dl_bedrock_es_feed(&pa, s, n, t_on_msg, &a);

    dl_bedrock_es_init(&pb, max);
    rcb = dl_bedrock_es_feed(&pb, s, cut, t_on_msg, &b);
    for (i = cut; i < n && rcb == GW_OK; i += step)
        rcb = dl_bedrock_es_feed(&pb, s + i, n - i < step ? n - i : step, t_on_msg, &b);

    if (rca != rcb || a.n != b.n || a.hash != b.hash || a.at != b.at)
        abort();
    /* After whole messages only, nothing is held; a cut one is partial either way. */
    if (rca == GW_OK && (dl_bedrock_es_partial(&pa) != dl_bedrock_es_partial(&pb) ||
                         dl_bedrock_es_partial(&pa) != (a.at < n)))
        abort();
    dl_bedrock_es_fini(&pa);
    dl_bedrock_es_fini(&pb);
    gw_buf_fini(&a.enc);
    gw_buf_fini(&b.enc);
    return 0;
}
