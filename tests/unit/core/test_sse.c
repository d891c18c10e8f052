/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_sse.c - the incremental SSE parser: line ends, comments,
 * multi-line data, byte-exact raw slices, splits at every byte, size limit, BOM.
 * See: core/sse.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/alloc.h"
#include "core/sse.h"

#define T_MAX_EV 64

/* What the callback saw: copies, since the slices die with the callback. */
struct t_events {
    size_t n;
    char *raw[T_MAX_EV], *event[T_MAX_EV], *data[T_MAX_EV], *id[T_MAX_EV];
    struct gw_buf all_raw; /* every raw, concatenated */
    size_t stop_after;     /* non-zero: return 1 from the callback once n reaches it */
};

static char *
t_dup(struct gw_str s)
{
    char *c = malloc(s.len + 1);

    assert_non_null(c);
    if (s.len)
        memcpy(c, s.ptr, s.len);
    c[s.len] = '\0';
    return c;
}

static int
t_on_event(void *arg, const struct gw_sse_event *ev)
{
    struct t_events *t = arg;

    assert_true(t->n < T_MAX_EV);
    t->raw[t->n] = t_dup(ev->raw);
    t->event[t->n] = t_dup(ev->event);
    t->data[t->n] = t_dup(ev->data);
    t->id[t->n] = t_dup(ev->id);
    t->n++;
    assert_int_equal(gw_buf_append_str(&t->all_raw, ev->raw), GW_OK);
    return t->stop_after && t->n >= t->stop_after;
}

static void
t_events_fini(struct t_events *t)
{
    size_t i;

    for (i = 0; i < t->n; i++) {
        free(t->raw[i]);
        free(t->event[i]);
        free(t->data[i]);
        free(t->id[i]);
    }
    gw_buf_fini(&t->all_raw);
    memset(t, 0, sizeof(*t));
}

/* Feeds <s> in one go. */
static void
t_feed_all(const char *s, size_t len, struct t_events *t, size_t *pending)
{
    struct gw_sse p;

    gw_sse_init(&p, 0);
    assert_int_equal(gw_sse_feed(&p, s, len, t_on_event, t), GW_OK);
    if (pending)
        *pending = gw_sse_pending(&p);
    gw_sse_fini(&p);
}

/* Feeds <s> split at every position (two feeds), then byte by byte, and checks each
 * gives the same events as one feed; concatenated raws always equal the input up to
 * the pending tail. <exact_raw>: also compare each raw (false when a CRLF may be split
 * at an event's end, which moves the LF into the next raw by design). */
static void
t_check_splits(const char *s, size_t len, bool exact_raw)
{
    struct t_events one = {0};
    size_t pend_one, cut, i, k;

    t_feed_all(s, len, &one, &pend_one);
    assert_memory_equal(one.all_raw.data ? one.all_raw.data : "", s, len - pend_one);
    for (cut = 0; cut <= len + 1; cut++) {
        struct t_events two = {0};
        struct gw_sse p;

        gw_sse_init(&p, 0);
        if (cut <= len) {
            assert_int_equal(gw_sse_feed(&p, s, cut, t_on_event, &two), GW_OK);
            assert_int_equal(gw_sse_feed(&p, s + cut, len - cut, t_on_event, &two), GW_OK);
        } else {
            for (i = 0; i < len; i++)
                assert_int_equal(gw_sse_feed(&p, s + i, 1, t_on_event, &two), GW_OK);
        }
        assert_int_equal(two.n, one.n);
        assert_int_equal(gw_sse_pending(&p), pend_one);
        for (k = 0; k < one.n; k++) {
            assert_string_equal(two.event[k], one.event[k]);
            assert_string_equal(two.data[k], one.data[k]);
            assert_string_equal(two.id[k], one.id[k]);
            if (exact_raw)
                assert_string_equal(two.raw[k], one.raw[k]);
        }
        assert_int_equal(two.all_raw.len, one.all_raw.len);
        if (one.all_raw.len)
            assert_memory_equal(two.all_raw.data, one.all_raw.data, one.all_raw.len);
        gw_sse_fini(&p);
        t_events_fini(&two);
    }
    t_events_fini(&one);
}

static void
test_sse_lf_events_fields_and_raw(void **state)
{
    static const char s[] = "event: message\nid: 7\ndata: {\"a\":1}\n\n"
                            "data:no-space\n\n"
                            "data: x";
    struct t_events t = {0};
    size_t pend;

    (void)state;
    t_feed_all(s, sizeof(s) - 1, &t, &pend);
    assert_int_equal(t.n, 2);
    assert_string_equal(t.event[0], "message");
    assert_string_equal(t.id[0], "7");
    assert_string_equal(t.data[0], "{\"a\":1}");
    assert_string_equal(t.raw[0], "event: message\nid: 7\ndata: {\"a\":1}\n\n");
    assert_string_equal(t.event[1], "");
    assert_string_equal(t.id[1], "");
    assert_string_equal(t.data[1], "no-space");
    assert_string_equal(t.raw[1], "data:no-space\n\n");
    assert_int_equal(pend, 7);
    t_events_fini(&t);
    t_check_splits(s, sizeof(s) - 1, true);
}

static void
test_sse_multiline_data_joined_with_lf(void **state)
{
    static const char s[] = "data: one\ndata:  two\ndata\ndata: three\n\n";
    struct t_events t = {0};

    (void)state;
    t_feed_all(s, sizeof(s) - 1, &t, NULL);
    assert_int_equal(t.n, 1);
    /* one space removed, a second kept; "data" alone is an empty line of data */
    assert_string_equal(t.data[0], "one\n two\n\nthree");
    t_events_fini(&t);
    t_check_splits(s, sizeof(s) - 1, true);
}

static void
test_sse_crlf_cr_lf_mixes(void **state)
{
    static const char s[] = "data: a\r\n\r\n"
                            "data: b\r\rdata: c\n\n"
                            "event: e\rdata: d1\r\ndata: d2\n\r\n"
                            "data: f\r\n\n";
    struct t_events t = {0};

    (void)state;
    t_feed_all(s, sizeof(s) - 1, &t, NULL);
    assert_int_equal(t.n, 5);
    assert_string_equal(t.data[0], "a");
    assert_string_equal(t.raw[0], "data: a\r\n\r\n");
    assert_string_equal(t.data[1], "b");
    assert_string_equal(t.raw[1], "data: b\r\r");
    assert_string_equal(t.data[2], "c");
    assert_string_equal(t.raw[2], "data: c\n\n");
    t_events_fini(&t);
    /* the third event: "event: e" CR, data lines, then LF CRLF ends it */
    t_feed_all(s + 29, sizeof(s) - 1 - 29, &t, NULL);
    assert_int_equal(t.n, 2);
    assert_string_equal(t.event[0], "e");
    assert_string_equal(t.data[0], "d1\nd2");
    assert_string_equal(t.raw[0], "event: e\rdata: d1\r\ndata: d2\n\r\n");
    assert_string_equal(t.data[1], "f");
    t_events_fini(&t);
    t_check_splits(s, sizeof(s) - 1, false);
}

static void
test_sse_crlf_split_between_feeds_is_one_line_end(void **state)
{
    struct t_events t = {0};
    struct gw_sse p;

    (void)state;
    gw_sse_init(&p, 0);
    /* "data: a\r" + "\ndata: b\r\n\r" + "\n": no extra blank line from the split CRLFs */
    assert_int_equal(gw_sse_feed(&p, "data: a\r", 8, t_on_event, &t), GW_OK);
    assert_int_equal(gw_sse_feed(&p, "\ndata: b\r\n\r", 11, t_on_event, &t), GW_OK);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.data[0], "a\nb");
    assert_string_equal(t.raw[0], "data: a\r\ndata: b\r\n\r");
    assert_int_equal(gw_sse_feed(&p, "\n", 1, t_on_event, &t), GW_OK);
    assert_int_equal(t.n, 1); /* the LF pairs with the CR, it is no blank line */
    assert_int_equal(gw_sse_pending(&p), 1);
    assert_int_equal(gw_sse_feed(&p, "data: c\n\n", 9, t_on_event, &t), GW_OK);
    assert_int_equal(t.n, 2);
    assert_string_equal(t.data[1], "c");
    assert_string_equal(t.raw[1], "\ndata: c\n\n"); /* the LF travels with the next raw */
    gw_sse_fini(&p);
    t_events_fini(&t);
}

static void
test_sse_comments_and_unknown_fields_are_skipped(void **state)
{
    static const char s[] = ": keep-alive\n\n"
                            ": note\ndata: x\nretry: 10\nfoo: bar\nid\n:data: no\n\n";
    struct t_events t = {0};

    (void)state;
    t_feed_all(s, sizeof(s) - 1, &t, NULL);
    assert_int_equal(t.n, 2);
    /* a comment-only event is reported with empty data: callers decide */
    assert_string_equal(t.data[0], "");
    assert_string_equal(t.raw[0], ": keep-alive\n\n");
    assert_string_equal(t.data[1], "x");
    assert_string_equal(t.id[1], "");
    t_events_fini(&t);
    t_check_splits(s, sizeof(s) - 1, true);
}

static void
test_sse_field_without_colon_has_empty_value(void **state)
{
    static const char s[] = "event\ndata\n\n";
    struct t_events t = {0};

    (void)state;
    t_feed_all(s, sizeof(s) - 1, &t, NULL);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.event[0], "");
    assert_string_equal(t.data[0], "");
    t_events_fini(&t);
}

static void
test_sse_bom_at_start_is_skipped_but_kept_in_raw(void **state)
{
    static const char s[] = "\xEF\xBB\xBF"
                            "data: a\n\n\xEF\xBB\xBF"
                            "data: b\n\n";
    struct t_events t = {0};

    (void)state;
    t_feed_all(s, sizeof(s) - 1, &t, NULL);
    assert_int_equal(t.n, 2);
    assert_string_equal(t.data[0], "a");
    assert_string_equal(t.raw[0], "\xEF\xBB\xBF"
                                  "data: a\n\n");
    /* only at stream start: later the BOM bytes are part of a (unknown) field name */
    assert_string_equal(t.data[1], "");
    t_events_fini(&t);
    t_check_splits(s, sizeof(s) - 1, true);
}

static void
test_sse_bom_prefix_then_other_bytes(void **state)
{
    static const char s[] = "\xEF\xBB"
                            "data: a\n\n";
    struct t_events t = {0};

    (void)state;
    t_feed_all(s, sizeof(s) - 1, &t, NULL);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.raw[0], s);
    t_events_fini(&t);
    t_check_splits(s, sizeof(s) - 1, true);
}

static void
test_sse_realistic_openai_stream_splits(void **state)
{
    static const char s[] =
        "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n"
        "data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"Hé\"}}]}\n\n"
        ": ping\n\n"
        "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":3}}\n\n"
        "data: [DONE]\n\n";
    struct t_events t = {0};
    size_t pend;

    (void)state;
    t_feed_all(s, sizeof(s) - 1, &t, &pend);
    assert_int_equal(t.n, 5);
    assert_int_equal(pend, 0);
    assert_string_equal(t.data[4], "[DONE]");
    t_events_fini(&t);
    t_check_splits(s, sizeof(s) - 1, true);
}

/* A line of every length from 1 to 40 bytes after "data: " and "event: ", ended by LF,
 * CR or CRLF, so that a line end falls at every place of a sixteen-byte step and of the
 * last, overlapping one, whole and split: each field's value is the line's text. */
static void
test_sse_line_ends_at_every_offset(void **state)
{
    static const char *const ends[] = {"\n", "\r", "\r\n"};
    size_t e, len, k;

    (void)state;
    for (e = 0; e < 3; e++) {
        const char *nl = ends[e];

        for (len = 1; len <= 40; len++) {
            char text[41], s[160];
            struct t_events t = {0};
            size_t pend;
            int n;

            for (k = 0; k < len; k++)
                text[k] = (char)('a' + k % 26);
            text[len] = '\0';
            /* the last blank line is an LF after CRLF: a CRLF split there would leave
             * its LF pending, as the next event's */
            n = snprintf(s, sizeof(s), "data: %s%s%sevent: %s%sdata: z%s%s", text, nl, nl, text, nl,
                         nl, e == 2 ? "\n" : nl);
            assert_true(n > 0 && (size_t)n < sizeof(s));
            t_feed_all(s, (size_t)n, &t, &pend);
            assert_int_equal(t.n, 2);
            assert_int_equal(pend, 0);
            assert_string_equal(t.data[0], text);
            assert_string_equal(t.event[0], "");
            assert_string_equal(t.event[1], text);
            assert_string_equal(t.data[1], "z");
            t_events_fini(&t);
            t_check_splits(s, (size_t)n, e != 2);
        }
    }
}

static void
test_sse_stray_blank_lines_are_events_with_empty_raw_blank(void **state)
{
    static const char s[] = "\n\ndata: a\n\n\n";
    struct t_events t = {0};

    (void)state;
    t_feed_all(s, sizeof(s) - 1, &t, NULL);
    assert_int_equal(t.n, 4);
    assert_string_equal(t.raw[0], "\n");
    assert_string_equal(t.raw[2], "data: a\n\n");
    assert_string_equal(t.data[2], "a");
    assert_string_equal(t.raw[3], "\n");
    t_events_fini(&t);
}

static void
test_sse_oversize_event_is_protocol_error(void **state)
{
    struct t_events t = {0};
    struct gw_sse p;
    char big[100];
    size_t i;

    (void)state;
    memset(big, 'x', sizeof(big));
    memcpy(big, "data: ", 6);
    /* an event over the limit inside one feed */
    gw_sse_init(&p, 64);
    assert_int_equal(gw_sse_feed(&p, "data: ok\n\n", 10, t_on_event, &t), GW_OK);
    assert_int_equal(gw_sse_feed(&p, big, sizeof(big), t_on_event, &t), GW_E_UPSTREAM_PROTOCOL);
    assert_int_equal(gw_sse_feed(&p, "\n\n", 2, t_on_event, &t), GW_E_UPSTREAM_PROTOCOL);
    assert_int_equal(t.n, 1);
    gw_sse_fini(&p);
    /* growing byte by byte: refused once the partial event passes the limit */
    gw_sse_init(&p, 64);
    for (i = 0; i < sizeof(big); i++) {
        enum gw_code rc = gw_sse_feed(&p, big + i, 1, t_on_event, &t);

        if (i < 64)
            assert_int_equal(rc, GW_OK);
        else
            assert_int_equal(rc, GW_E_UPSTREAM_PROTOCOL);
    }
    assert_true(gw_sse_pending(&p) <= 65);
    gw_sse_fini(&p);
    /* a complete event over the limit in one feed */
    gw_sse_init(&p, 64);
    big[sizeof(big) - 2] = '\n';
    big[sizeof(big) - 1] = '\n';
    assert_int_equal(gw_sse_feed(&p, big, sizeof(big), t_on_event, &t), GW_E_UPSTREAM_PROTOCOL);
    assert_int_equal(t.n, 1);
    gw_sse_fini(&p);
    /* exactly at the limit is fine */
    gw_sse_init(&p, 64);
    assert_int_equal(gw_sse_feed(&p, big + (sizeof(big) - 64), 64, t_on_event, &t), GW_OK);
    assert_int_equal(t.n, 2);
    gw_sse_fini(&p);
    t_events_fini(&t);
}

/* issue 8: the cap gw_sse_init(0) sets, which the relay uses on every upstream stream,
 * is 8 MiB per event (its blank line included): one byte more is gw.upstream.protocol. */
static void
test_issue_8_default_cap_is_8_mib_per_event(void **state)
{
    const size_t cap = (size_t)8 << 20;
    char *ev = malloc(cap + 1);
    struct t_events t = {0};
    struct gw_sse p;

    (void)state;
    assert_non_null(ev);
    memset(ev, 'x', cap + 1);
    memcpy(ev, "data: ", 6);
    ev[cap - 2] = '\n';
    ev[cap - 1] = '\n';
    gw_sse_init(&p, 0);
    assert_int_equal(gw_sse_feed(&p, ev, cap, t_on_event, &t), GW_OK);
    assert_int_equal(t.n, 1);
    assert_int_equal(strlen(t.data[0]), cap - 8);
    gw_sse_fini(&p);

    ev[cap - 2] = 'x';
    ev[cap] = '\n';
    gw_sse_init(&p, 0);
    assert_int_equal(gw_sse_feed(&p, ev, cap + 1, t_on_event, &t), GW_E_UPSTREAM_PROTOCOL);
    assert_int_equal(t.n, 1);
    gw_sse_fini(&p);
    free(ev);
    t_events_fini(&t);
}

static void
test_sse_callback_stop_keeps_rest_pending(void **state)
{
    static const char s[] = "data: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4";
    struct t_events t = {0};
    struct gw_sse p;

    (void)state;
    t.stop_after = 1;
    gw_sse_init(&p, 0);
    assert_int_equal(gw_sse_feed(&p, s, sizeof(s) - 1, t_on_event, &t), GW_OK);
    assert_int_equal(t.n, 1);
    assert_int_equal(gw_sse_pending(&p), sizeof(s) - 1 - 9);
    t.stop_after = 2;
    assert_int_equal(gw_sse_feed(&p, NULL, 0, t_on_event, &t), GW_OK);
    assert_int_equal(t.n, 2);
    t.stop_after = 0;
    assert_int_equal(gw_sse_feed(&p, "\n\n", 2, t_on_event, &t), GW_OK);
    assert_int_equal(t.n, 4);
    assert_string_equal(t.data[1], "2");
    assert_string_equal(t.data[2], "3");
    assert_string_equal(t.data[3], "4");
    assert_int_equal(gw_sse_pending(&p), 0);
    assert_int_equal(t.all_raw.len, sizeof(s) - 1 + 2);
    gw_sse_fini(&p);
    t_events_fini(&t);
}

static void
test_sse_nul_bytes_pass_through_data(void **state)
{
    static const char s[] = "data: a\0b\nid: x\0y\n\n";
    struct t_events t = {0};
    struct gw_sse p;

    (void)state;
    gw_sse_init(&p, 0);
    assert_int_equal(gw_sse_feed(&p, s, sizeof(s) - 1, t_on_event, &t), GW_OK);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.id[0], ""); /* an id with NUL is ignored */
    assert_int_equal(t.all_raw.len, sizeof(s) - 1);
    gw_sse_fini(&p);
    t_events_fini(&t);
}

static void
test_sse_out_of_memory_is_reported_and_clean(void **state)
{
    struct t_events t = {0};
    struct gw_sse p;

    (void)state;
    /* the partial tail cannot be kept */
    gw_sse_init(&p, 0);
    gw_alloc_fail_at(1);
    assert_int_equal(gw_sse_feed(&p, "data: a", 7, t_on_event, &t), GW_E_NOMEM);
    gw_alloc_fail_at(0);
    gw_sse_fini(&p);
    /* joining two data lines needs the scratch buffer: the event stays pending */
    gw_sse_init(&p, 0);
    gw_alloc_fail_at(1);
    assert_int_equal(gw_sse_feed(&p, "data: a\ndata: b\n\n", 18, t_on_event, &t), GW_E_NOMEM);
    gw_alloc_fail_at(0);
    assert_int_equal(t.n, 0);
    assert_int_equal(gw_sse_feed(&p, NULL, 0, t_on_event, &t), GW_OK);
    assert_int_equal(t.n, 1);
    assert_string_equal(t.data[0], "a\nb");
    gw_sse_fini(&p);
    t_events_fini(&t);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sse_lf_events_fields_and_raw),
        cmocka_unit_test(test_sse_multiline_data_joined_with_lf),
        cmocka_unit_test(test_sse_crlf_cr_lf_mixes),
        cmocka_unit_test(test_sse_crlf_split_between_feeds_is_one_line_end),
        cmocka_unit_test(test_sse_comments_and_unknown_fields_are_skipped),
        cmocka_unit_test(test_sse_field_without_colon_has_empty_value),
        cmocka_unit_test(test_sse_bom_at_start_is_skipped_but_kept_in_raw),
        cmocka_unit_test(test_sse_bom_prefix_then_other_bytes),
        cmocka_unit_test(test_sse_realistic_openai_stream_splits),
        cmocka_unit_test(test_sse_line_ends_at_every_offset),
        cmocka_unit_test(test_sse_stray_blank_lines_are_events_with_empty_raw_blank),
        cmocka_unit_test(test_sse_oversize_event_is_protocol_error),
        cmocka_unit_test(test_issue_8_default_cap_is_8_mib_per_event),
        cmocka_unit_test(test_sse_callback_stop_keeps_rest_pending),
        cmocka_unit_test(test_sse_nul_bytes_pass_through_data),
        cmocka_unit_test(test_sse_out_of_memory_is_reported_and_clean),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
