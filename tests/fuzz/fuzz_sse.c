/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_sse.c - fuzz target for the SSE parser: the input (after its first
 * byte) is fed once whole and once cut into pieces chosen by the first byte; both must
 * give the same events and the same result, and the raws put back together, followed
 * by what is pending, must be the input itself.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     core/sse.c, tests/fuzz/corpus/sse/
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/sse.h"
#include "tests/fuzz/fuzz_hash.h"

static uint64_t
sse_hash(uint64_t h, struct gw_str s)
{
    return fuzz_hash(h, s.ptr, s.len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct t_run {
    size_t n;          /* events */
    uint64_t fields;   /* hash of event names, data and ids, in order */
    struct gw_buf raw; /* every raw, concatenated */
};

static int
t_on_event(void *arg, const struct gw_sse_event *ev)
{
    struct t_run *r = arg;

    r->n++;
    r->fields = sse_hash(sse_hash(sse_hash(r->fields, ev->event), ev->data), ev->id);
    if (gw_buf_append_str(&r->raw, ev->raw) != GW_OK)
        abort();
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct t_run a = {0}, b = {0};
    struct gw_sse pa, pb;
    enum gw_code rca, rcb = GW_OK;
    const char *s = (const char *)data + 1;
    size_t n, cut, step, i, max;

    if (size < 1)
        return 0;
    n = size - 1;
    max = (data[0] & 0x80) ? 64 : 0; /* half the runs with a tiny event limit */
    cut = n ? (size_t)data[0] % (n + 1) : 0;
    step = 1 + (size_t)(data[0] % 7);

    gw_sse_init(&pa, max);
    rca = gw_sse_feed(&pa, s, n, t_on_event, &a);

    gw_sse_init(&pb, max);
    rcb = gw_sse_feed(&pb, s, cut, t_on_event, &b);
    for (i = cut; i < n && rcb == GW_OK; i += step)
        rcb = gw_sse_feed(&pb, s + i, n - i < step ? n - i : step, t_on_event, &b);

    /* Per-event raws may differ in one way only: a CRLF that ends an event and is cut
     * between feeds leaves its LF to the next raw (or pending), so compare the whole. */
    if (rca != rcb || a.n != b.n || a.fields != b.fields)
        abort();
    if ((a.raw.len && memcmp(a.raw.data, s, a.raw.len) != 0) ||
        (b.raw.len && memcmp(b.raw.data, s, b.raw.len) != 0))
        abort();
    if (rca == GW_OK &&
        (a.raw.len + gw_sse_pending(&pa) != n || b.raw.len + gw_sse_pending(&pb) != n))
        abort();
    gw_sse_fini(&pa);
    gw_sse_fini(&pb);
    gw_buf_fini(&a.raw);
    gw_buf_fini(&b.raw);
    return 0;
}
