/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_decode.c - fuzz target for the Content-Encoding decoder
 * (core/decode.c). The first byte picks the coding list (low 3 bits) and a small limit
 * (64 bytes to 8 KiB, the high bits); the rest is the body. Checked: the result is one
 * of the documented codes; a decoded body is within the limit and its buffer within the
 * limit and its slack; a failure leaves nothing behind; the hold hook ends at the
 * buffer's capacity (0 after a failure) and never saw more than two buffers' worth;
 * and the limit only cuts: decoded again with four times the limit, a body that fit
 * comes out the same, a refusal other than the limit's stays the same, and (one coding)
 * a body that fits the first limit after all is not refused by it.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     core/decode.c, tests/fuzz/corpus/decode/
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct t_hold {
    size_t now, peak;
};

static bool
t_on_hold(void *arg, size_t bytes)
{
    struct t_hold *h = arg;

    h->now = bytes;
    if (bytes > h->peak)
        h->peak = bytes;
    return true;
}

/* Decodes and checks what holds for any outcome; the caller frees *out. */
static enum gw_code
t_run(struct gw_str codings, struct gw_str in, size_t max, struct gw_buf *out)
{
    struct t_hold h = {0, 0};
    struct gw_decode_limit lim = {max, t_on_hold, &h};
    struct gw_buf why = {0};
    enum gw_code rc = gw_decode_body(codings, in, &lim, out, &why);

    switch (rc) {
    case GW_OK:
        if (out->len > max || out->cap > max + GW_DECODE_SLACK || h.now != out->cap ||
            (out->data && out->data[out->len] != '\0') || why.data)
            abort();
        break;
    case GW_E_BODY_TOO_LARGE:
    case GW_E_BAD_REQUEST:
    case GW_E_UNSUPPORTED_ENCODING:
        if (out->data || out->len || h.now != 0 || !why.data)
            abort();
        break;
    default: abort(); /* no NOMEM without a failing allocator, no BUSY from this hook */
    }
    if (h.peak > 2 * (max + GW_DECODE_SLACK))
        abort();
    gw_buf_fini(&why);
    return rc;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const lists[] = {
        "gzip", "deflate", "br", "zstd", "gzip, br", "br, zstd", "x-gzip, deflate", "identity",
    };
    struct gw_buf a = {0}, b = {0};
    struct gw_str codings, in;
    enum gw_code ra, rb;
    size_t max;

    if (size < 1)
        return 0;
    codings = gw_str_c(lists[data[0] & 7]);
    max = (size_t)64 << ((data[0] >> 3) & 7);
    in = (struct gw_str){(const char *)data + 1, size - 1};
    ra = t_run(codings, in, max, &a);
    rb = t_run(codings, in, 4 * max, &b);
    if (ra == GW_OK && (rb != GW_OK || a.len != b.len || (a.len && memcmp(a.data, b.data, a.len))))
        abort();
    /* one coding: a body that fits is never refused by the limit (stacked, a step
     * before the last may pass it with a result that fits) */
    if (rb == GW_OK && b.len <= max && ra != GW_OK && !memchr(codings.ptr, ',', codings.len))
        abort();
    if (ra != GW_OK && ra != GW_E_BODY_TOO_LARGE && rb != ra)
        abort(); /* only the limit may tell the two apart */
    gw_buf_fini(&a);
    gw_buf_fini(&b);
    return 0;
}
