/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_gemini_stream.c - the splitter of Gemini's JSON-array stream
 * (dialects/gemini_stream.c): a sample cut at every byte (in two reads, and in three
 * around every pair of points of a short one), one byte a read, gives the same elements
 * as the whole; brackets and quotes inside strings; blanks; the empty array; what is
 * refused (not an array, junk between or after elements, an element over the maximum
 * whole or across reads) and that a refusal sticks; a receiver that stops; the end.
 * See: dialects/gemini_stream.c, tests/fuzz/fuzz_gemini_array.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/str.h"
#include "dialects/gemini.h"

/* The elements, each followed by a line feed. */
static int
t_collect(void *arg, const char *obj, size_t len)
{
    struct gw_buf *b = arg;

    assert_int_equal(gw_buf_append(b, obj, len), GW_OK);
    assert_int_equal(gw_buf_append(b, "\n", 1), GW_OK);
    return 0;
}

/* Feeds <s> in the reads that <cuts> (ascending, <n> of them) make; the elements into
 * <out>; the last code. */
static enum gw_code
t_feed(const char *s, size_t len, const size_t *cuts, size_t n, size_t max, struct gw_buf *out,
       bool *done)
{
    struct dl_gemini_array a;
    enum gw_code rc = GW_OK;
    size_t from = 0, k;

    dl_gemini_array_init(&a, max);
    for (k = 0; k <= n && rc == GW_OK; k++) {
        size_t to = k < n ? cuts[k] : len;

        rc = dl_gemini_array_feed(&a, s + from, to - from, t_collect, out);
        from = to;
    }
    *done = dl_gemini_array_done(&a);
    dl_gemini_array_fini(&a);
    return rc;
}

static const char t_sample[] =
    "[{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a } ] \\\" { [ \\\\\"}]}}],\n"
    "  \"x\": [1, {\"y\": []}]}\r\n,{\"candidates\": []}\r\n, {\"e\":\"\\u007d\"}\n]\r\n";

static const char t_elements[] =
    "{\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"a } ] \\\" { [ \\\\\"}]}}],\n"
    "  \"x\": [1, {\"y\": []}]}\n"
    "{\"candidates\": []}\n"
    "{\"e\":\"\\u007d\"}\n";

static void
test_gemini_array_every_split_gives_the_same_elements(void **state)
{
    size_t len = sizeof(t_sample) - 1, cut, k;
    struct gw_buf out = {0};
    bool done;

    (void)state;
    assert_int_equal(t_feed(t_sample, len, NULL, 0, 4096, &out, &done), GW_OK);
    assert_true(done);
    assert_string_equal(out.data, t_elements);
    for (cut = 0; cut <= len; cut++) {
        gw_buf_reset(&out);
        assert_int_equal(t_feed(t_sample, len, &cut, 1, 4096, &out, &done), GW_OK);
        assert_true(done);
        assert_string_equal(out.data, t_elements);
    }
    /* one byte a read */
    {
        size_t cuts[sizeof(t_sample)];

        for (k = 0; k < len; k++)
            cuts[k] = k + 1;
        gw_buf_reset(&out);
        assert_int_equal(t_feed(t_sample, len, cuts, len - 1, 4096, &out, &done), GW_OK);
        assert_true(done);
        assert_string_equal(out.data, t_elements);
    }
    gw_buf_fini(&out);
}

static void
test_gemini_array_every_pair_of_cuts(void **state)
{
    static const char s[] = "[ {\"a\":\"]\"} ,{\"b\":[{}]} ]";
    size_t len = sizeof(s) - 1, i, j;
    struct gw_buf out = {0};
    bool done;

    (void)state;
    for (i = 0; i <= len; i++)
        for (j = i; j <= len; j++) {
            size_t cuts[2] = {i, j};

            gw_buf_reset(&out);
            assert_int_equal(t_feed(s, len, cuts, 2, 64, &out, &done), GW_OK);
            assert_true(done);
            assert_string_equal(out.data, "{\"a\":\"]\"}\n{\"b\":[{}]}\n");
        }
    gw_buf_fini(&out);
}

static void
test_gemini_array_empty_and_unfinished(void **state)
{
    struct gw_buf out = {0};
    bool done;

    (void)state;
    assert_int_equal(t_feed(" [ ] \n", 6, NULL, 0, 64, &out, &done), GW_OK);
    assert_true(done);
    assert_int_equal(out.len, 0);
    /* a stream that ends before its "]" was cut: not done */
    assert_int_equal(t_feed("[{\"a\":1}", 8, NULL, 0, 64, &out, &done), GW_OK);
    assert_false(done);
    assert_string_equal(out.data, "{\"a\":1}\n");
    gw_buf_reset(&out);
    assert_int_equal(t_feed("[{\"a\":1},{\"b\"", 13, NULL, 0, 64, &out, &done), GW_OK);
    assert_false(done);
    assert_string_equal(out.data, "{\"a\":1}\n");
    gw_buf_fini(&out);
}

static void
test_gemini_array_refusals_stick(void **state)
{
    static const char *const bad[] = {
        "{\"a\":1}",        /* not an array */
        "x[{}]",            /* junk before */
        "[1]",              /* not an object */
        "[{},,{}]",         /* two commas */
        "[,{}]",            /* a comma first */
        "[{}{}]",           /* no comma */
        "[{}] x",           /* junk after the end */
        "[{}],[{}]",        /* a second array */
        "[{\"a\":\"b\"}}]", /* a stray bracket */
    };
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        struct dl_gemini_array a;
        struct gw_buf out = {0};

        dl_gemini_array_init(&a, 64);
        if (dl_gemini_array_feed(&a, bad[k], strlen(bad[k]), t_collect, &out) !=
            GW_E_UPSTREAM_PROTOCOL) {
            print_error("accepted %s\n", bad[k]);
            fail();
        }
        /* and every later read */
        assert_int_equal(dl_gemini_array_feed(&a, "[{}]", 4, t_collect, &out),
                         GW_E_UPSTREAM_PROTOCOL);
        assert_false(dl_gemini_array_done(&a));
        dl_gemini_array_fini(&a);
        gw_buf_fini(&out);
    }
}

static void
test_gemini_array_element_over_the_maximum(void **state)
{
    static const char s[] = "[{\"text\":\"0123456789\"},{\"t\":1}]"; /* 21 and 7 bytes */
    size_t len = sizeof(s) - 1, cut;
    struct gw_buf out = {0};
    bool done;

    (void)state;
    assert_int_equal(t_feed(s, len, NULL, 0, 21, &out, &done), GW_OK);
    /* one byte short: refused whole or across reads, wherever the cut is */
    for (cut = 0; cut <= len; cut++) {
        gw_buf_reset(&out);
        assert_int_equal(t_feed(s, len, &cut, 1, 20, &out, &done), GW_E_UPSTREAM_PROTOCOL);
        assert_int_equal(out.len, 0);
    }
    gw_buf_fini(&out);
}

static int
t_stop_first(void *arg, const char *obj, size_t len)
{
    int *n = arg;

    (void)obj;
    (void)len;
    (*n)++;
    return 1;
}

static void
test_gemini_array_receiver_can_stop(void **state)
{
    struct dl_gemini_array a;
    int n = 0;

    (void)state;
    dl_gemini_array_init(&a, 64);
    assert_int_equal(dl_gemini_array_feed(&a, "[{\"a\":1},{\"b\":2}]", 17, t_stop_first, &n),
                     GW_OK);
    assert_int_equal(n, 1);
    assert_false(dl_gemini_array_done(&a));
    dl_gemini_array_fini(&a);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemini_array_every_split_gives_the_same_elements),
        cmocka_unit_test(test_gemini_array_every_pair_of_cuts),
        cmocka_unit_test(test_gemini_array_empty_and_unfinished),
        cmocka_unit_test(test_gemini_array_refusals_stick),
        cmocka_unit_test(test_gemini_array_element_over_the_maximum),
        cmocka_unit_test(test_gemini_array_receiver_can_stop),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
