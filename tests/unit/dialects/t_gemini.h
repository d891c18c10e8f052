/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/t_gemini.h - helpers of the Gemini shape's unit tests
 * (test_gemini*.c): those of t_messages.h with the fixtures of tests/fixtures/gemini/,
 * Gemini's SSE ("data: <json>\r\n\r\n") split into its data payloads, a canonical
 * request parsed or refused, a render compared as JSON, the dropped list searched.
 * Owns:    what each helper returns (freed by the caller, as said).
 * Threads: single-threaded tests.
 */
#ifndef GW_TESTS_UNIT_DIALECTS_T_GEMINI_H
#define GW_TESTS_UNIT_DIALECTS_T_GEMINI_H

#define T_FIXTURES "tests/fixtures/gemini/"

#include "dialects/gemini-priv.h"
#include "t_messages.h"

/* Splits Gemini SSE <text> into at most <max> data payloads (blank lines of "\r\n\r\n"
 * or "\n\n" end an event, as @google/genai reads them). */
static inline size_t
t_gm_sse_split(const char *text, size_t len, struct gw_str *v, size_t max)
{
    size_t n = 0, i = 0;

    while (i < len && n < max) {
        const char *a = memmem(text + i, len - i, "\r\n\r\n", 4);
        const char *b = memmem(text + i, len - i, "\n\n", 2);
        const char *end = a && (!b || a < b) ? a : b;
        size_t skip = end == a ? 4 : 2;
        const char *stop = end ? end : text + len;

        if ((size_t)(stop - (text + i)) >= 6 && memcmp(text + i, "data: ", 6) == 0)
            v[n++] = (struct gw_str){text + i + 6, (size_t)(stop - (text + i)) - 6};
        if (!end)
            break;
        i = (size_t)(end - text) + skip;
    }
    return n;
}

/* Parses the Gemini body <body> expecting GW_OK. */
static inline void
t_gm_parse(struct gw_arena *a, const char *body, size_t len, struct dl_request *r)
{
    struct gw_buf why = {0};
    enum gw_code rc = dl_gemini_shape.request_parse(a, body, len, r, &why);

    if (rc != GW_OK) {
        print_error("refused (%d): %.*s\n", rc, (int)why.len, why.data ? why.data : "");
        fail();
    }
    assert_int_equal(why.len, 0);
    gw_buf_fini(&why);
}

/* Parses <body> expecting GW_E_BAD_REQUEST with a reason holding <what>. */
static inline void
t_gm_parse_refused(const char *body, const char *what)
{
    struct gw_arena a;
    struct dl_request r;
    struct gw_buf why = {0};
    enum gw_code rc;

    gw_arena_init(&a);
    rc = dl_gemini_shape.request_parse(&a, body, strlen(body), &r, &why);
    if (rc != GW_E_BAD_REQUEST || !why.data || !strstr(why.data, what)) {
        print_error("body %s: rc %d, why \"%s\" (want \"%s\")\n", body, rc,
                    why.data ? why.data : "", what);
        fail();
    }
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

static inline bool
t_gm_dropped_has(const struct dl_dropped *d, const char *name)
{
    size_t i;

    for (i = 0; i < d->n; i++)
        if (gw_str_eq(d->name[i], gw_str_c(name)))
            return true;
    return false;
}

/* Renders <r> with the operations of <shape> expecting GW_OK and the JSON <want>. */
static inline void
t_gm_render_as(enum dl_shape shape, const struct dl_request *r, uint64_t spec, struct dl_dropped *d,
               const char *want, size_t want_len)
{
    struct gw_buf out = {0}, why = {0};
    enum gw_code rc =
        dl_shape_ops(shape)->request_render(r, GW_STR_LIT("up-model"), spec, d, &out, &why);

    if (rc != GW_OK) {
        print_error("refused (%d): %.*s\n", rc, (int)why.len, why.data ? why.data : "");
        fail();
    }
    t_json_is(out.data, out.len, want, want_len);
    gw_buf_fini(&out);
    gw_buf_fini(&why);
}

/* Renders <r> with the operations of <shape> expecting GW_E_UNCONVERTIBLE naming <what>
 * and nothing written or dropped. */
static inline void
t_gm_render_refused_as(enum dl_shape shape, const struct dl_request *r, const char *what)
{
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};
    enum gw_code rc;

    dl_dropped_add(&d, GW_STR_LIT("before"));
    assert_int_equal(gw_buf_append_cstr(&out, "keep"), GW_OK);
    rc = dl_shape_ops(shape)->request_render(r, GW_STR_LIT("up-model"), 0, &d, &out, &why);
    if (rc != GW_E_UNCONVERTIBLE || !why.data || !strstr(why.data, what)) {
        print_error("rc %d, why \"%s\" (want \"%s\")\n", rc, why.data ? why.data : "", what);
        fail();
    }
    assert_int_equal(out.len, 4);
    assert_int_equal(d.n, 1);
    gw_buf_fini(&out);
    gw_buf_fini(&why);
}

#endif
