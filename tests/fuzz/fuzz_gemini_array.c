/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_gemini_array.c - fuzz target for the splitter of Gemini's JSON-array
 * stream (dl_gemini_array_feed, dialects/gemini_stream.c): the input fed whole, then cut
 * at every byte (at most 2048 cuts spread over longer inputs) and in three reads, must
 * give the same elements, the same code and the same end; an element is never longer
 * than the maximum (taken from the input's first byte, so that the limit is reached
 * too); an input that is a JSON array of objects (by jansson) is split into its
 * elements, each one of them.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     dialects/gemini_stream.c, tests/fuzz/corpus/gemini_array/
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "dialects/gemini.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct t_run {
    struct gw_buf elements; /* each element's length (8 bytes) then its bytes */
    size_t n, max;
};

static int
t_on_element(void *arg, const char *obj, size_t len)
{
    struct t_run *t = arg;

    if (len == 0 || len > t->max || obj[0] != '{' || (obj[len - 1] != '}' && obj[len - 1] != ']'))
        abort();
    if (gw_buf_append(&t->elements, &len, sizeof(len)) != GW_OK ||
        gw_buf_append(&t->elements, obj, len) != GW_OK)
        abort();
    t->n++;
    return 0;
}

/* Feeds <s> in reads ending at <cuts> (ascending) and at <len>: the last code. */
static enum gw_code
t_split(const char *s, size_t len, const size_t *cuts, size_t ncuts, struct t_run *t, bool *done)
{
    struct dl_gemini_array a;
    enum gw_code rc = GW_OK;
    size_t from = 0, k;

    dl_gemini_array_init(&a, t->max);
    for (k = 0; k <= ncuts && rc == GW_OK; k++) {
        size_t to = k < ncuts ? cuts[k] : len;

        rc = dl_gemini_array_feed(&a, s + from, to - from, t_on_element, t);
        from = to;
    }
    *done = dl_gemini_array_done(&a);
    dl_gemini_array_fini(&a);
    return rc;
}

static void
t_same(const char *s, size_t len, const size_t *cuts, size_t ncuts, const struct t_run *whole,
       enum gw_code whole_rc, bool whole_done)
{
    struct t_run t = {.elements = {0}, .max = whole->max};
    bool done;
    enum gw_code rc = t_split(s, len, cuts, ncuts, &t, &done);

    if (rc != whole_rc || done != whole_done || t.n != whole->n ||
        t.elements.len != whole->elements.len ||
        (t.elements.len && memcmp(t.elements.data, whole->elements.data, t.elements.len) != 0))
        abort();
    gw_buf_fini(&t.elements);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    struct t_run whole = {.elements = {0}};
    size_t cut, step, k;
    enum gw_code rc;
    bool done;
    json_t *j;

    whole.max = size ? 16 + (size_t)data[0] * 8 : 16;
    rc = t_split(s, size, NULL, 0, &whole, &done);
    if (rc != GW_OK && rc != GW_E_UPSTREAM_PROTOCOL)
        abort();
    /* a JSON array of objects, none over the limit: exactly its elements */
    j = json_loadb(s, size, JSON_ALLOW_NUL, NULL);
    if (json_is_array(j)) {
        bool objects = true, small;
        size_t i, at;

        for (i = 0; i < json_array_size(j); i++)
            objects &= json_is_object(json_array_get(j, i));
        small = rc == GW_OK; /* else an element was over the limit */
        if (objects && small && (!done || whole.n != json_array_size(j)))
            abort();
        for (i = 0, at = 0; objects && small && i < whole.n; i++) {
            size_t len;
            json_t *e;

            memcpy(&len, whole.elements.data + at, sizeof(len));
            e = json_loadb(whole.elements.data + at + sizeof(len), len, JSON_ALLOW_NUL, NULL);
            if (!json_equal(e, json_array_get(j, i)))
                abort();
            json_decref(e);
            at += sizeof(len) + len;
        }
    }
    json_decref(j);
    /* the same, cut anywhere */
    step = size > 2048 ? size / 2048 + 1 : 1;
    for (cut = 0; cut <= size; cut += step)
        t_same(s, size, &cut, 1, &whole, rc, done);
    for (k = 1; k < 8 && size > 2; k++) {
        size_t cuts[2] = {size * k / 9,
                          size * k / 9 + (size_t)data[k % size] % (size - size * k / 9)};

        t_same(s, size, cuts, 2, &whole, rc, done);
    }
    gw_buf_fini(&whole.elements);
    return 0;
}
