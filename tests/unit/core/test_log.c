/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_log.c - rate-limited lines (issue 8): one line of a kind a
 * second, the next one carrying the count of those held back, on a clock the test sets;
 * the text and JSON line formats (issue 12 point 6): keys, fields, escaping.
 * See: core/log.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/log.h"
#include "core/str.h"

static uint64_t t_now_ms;

static uint64_t
t_clock(void)
{
    return t_now_ms;
}

static void
test_log_rate_one_line_a_second_with_the_held_back_count(void **state)
{
    struct gw_log_rate r = {0, 0};
    uint64_t held = 99;
    int i;

    (void)state;
    gw_log_set_clock(t_clock);
    t_now_ms = 1000000;
    assert_true(gw_log_rate_pass(&r, &held));
    assert_int_equal(held, 0);
    for (i = 0; i < 1000; i++) /* a burst within the same second */
        assert_false(gw_log_rate_pass(&r, &held));
    t_now_ms += 999;
    assert_false(gw_log_rate_pass(&r, &held));
    t_now_ms += 1;
    assert_true(gw_log_rate_pass(&r, &held));
    assert_int_equal(held, 1001);
    t_now_ms += 5000;
    assert_true(gw_log_rate_pass(&r, &held));
    assert_int_equal(held, 0);
}

static void
test_log_rate_kinds_are_counted_apart(void **state)
{
    struct gw_log_rate a = {0, 0}, b = {0, 0};
    uint64_t held = 0;

    (void)state;
    gw_log_set_clock(t_clock);
    t_now_ms = 7000;
    assert_true(gw_log_rate_pass(&a, &held));
    assert_true(gw_log_rate_pass(&b, &held));
    assert_false(gw_log_rate_pass(&a, &held));
}

/* ---- line formats ---- */

#define T_TS 1764621662345ull /* 2025-12-01T20:41:02.345Z */

static char *
t_line(enum gw_log_format fmt, const struct gw_log_ctx *ctx, const char *code,
       const struct gw_log_field *f, size_t n, const char *msg, size_t msg_len)
{
    static char out[1024];
    struct gw_buf b = {0};

    assert_int_equal(gw_log_format_line(&b, fmt, T_TS, GW_LOG_INFO, ctx, code, f, n, msg, msg_len),
                     GW_OK);
    assert_non_null(b.data);
    assert_true(b.len < sizeof(out));
    memcpy(out, b.data, b.len + 1);
    gw_buf_fini(&b);
    return out;
}

static void
test_log_text_line_has_every_key_in_order(void **state)
{
    struct gw_log_ctx ctx = {1, 42, "0123456789abcdef0123456789abcdef"};
    const char *msg = "hello";

    (void)state;
    assert_string_equal(t_line(GW_LOG_TEXT, &ctx, "ready", NULL, 0, msg, strlen(msg)),
                        "ts=2025-12-01T20:41:02.345Z lvl=info code=ready wrk=1 conn=42 "
                        "req=0123456789abcdef0123456789abcdef msg=\"hello\"\n");
    assert_string_equal(t_line(GW_LOG_TEXT, NULL, NULL, NULL, 0, msg, strlen(msg)),
                        "ts=2025-12-01T20:41:02.345Z lvl=info code=- wrk=- conn=- req=- "
                        "msg=\"hello\"\n");
}

static void
test_log_json_line_has_the_same_keys(void **state)
{
    struct gw_log_ctx ctx = {0, 7, "abc"};
    struct gw_log_ctx none = {-1, 0, NULL};

    (void)state;
    assert_string_equal(t_line(GW_LOG_JSON, &ctx, "gw.upstream.http_5xx", NULL, 0, "x", 1),
                        "{\"ts\":\"2025-12-01T20:41:02.345Z\",\"lvl\":\"info\","
                        "\"code\":\"gw.upstream.http_5xx\",\"wrk\":0,\"conn\":7,"
                        "\"req\":\"abc\",\"msg\":\"x\"}\n");
    assert_string_equal(t_line(GW_LOG_JSON, &none, "c", NULL, 0, "", 0),
                        "{\"ts\":\"2025-12-01T20:41:02.345Z\",\"lvl\":\"info\",\"code\":\"c\","
                        "\"wrk\":null,\"conn\":null,\"req\":null,\"msg\":\"\"}\n");
}

static void
test_log_fields_in_text_and_json(void **state)
{
    struct gw_log_field f[] = {
        {"client", GW_LF_STR, {.s = "alice"}}, {"model", GW_LF_STR, {.s = "gpt 4o \"mini\""}},
        {"upstream", GW_LF_STR, {.s = NULL}},  {"status", GW_LF_U64, {.u = 200}},
        {"ttfb_ms", GW_LF_I64, {.i = -1}},     {"cost_usd", GW_LF_RAW, {.s = "0.000120"}},
        {"empty", GW_LF_STR, {.s = ""}},
    };
    struct gw_log_ctx ctx = {2, 0, "r1"};

    (void)state;
    assert_string_equal(t_line(GW_LOG_TEXT, &ctx, "request", f, 7, "m", 1),
                        "ts=2025-12-01T20:41:02.345Z lvl=info code=request wrk=2 conn=- req=r1 "
                        "client=alice model=\"gpt 4o \\\"mini\\\"\" upstream=- status=200 "
                        "ttfb_ms=-1 cost_usd=0.000120 empty=\"\" msg=\"m\"\n");
    assert_string_equal(
        t_line(GW_LOG_JSON, &ctx, "request", f, 7, "m", 1),
        "{\"ts\":\"2025-12-01T20:41:02.345Z\",\"lvl\":\"info\",\"code\":\"request\","
        "\"wrk\":2,\"conn\":null,\"req\":\"r1\",\"client\":\"alice\","
        "\"model\":\"gpt 4o \\\"mini\\\"\",\"upstream\":null,\"status\":200,"
        "\"ttfb_ms\":-1,\"cost_usd\":0.000120,\"empty\":\"\",\"msg\":\"m\"}\n");
}

/* Quotes, backslashes, line breaks and every control character are escaped: a message
 * cannot end its line early or forge a key; bytes that are not UTF-8 become U+FFFD. */
static void
test_log_escapes_quotes_newlines_control_and_bad_utf8(void **state)
{
    static const char msg[] = "a\"b\\c\nd\re\tf\001g\037h\177i \xc3\xa9 \xe2\x82\xac \xff\xc3 "
                              "\xed\xa0\x80 \xc0\xaf k=v";
    const char *want_msg = "\"a\\\"b\\\\c\\nd\\re\\tf\\u0001g\\u001fh\\u007fi \xc3\xa9 "
                           "\xe2\x82\xac \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd \\ufffd\\ufffd k=v\"";
    struct gw_log_field f[] = {{"model", GW_LF_STR, {.s = "x\ny"}}};
    char want[512];
    const char *line;

    (void)state;
    line = t_line(GW_LOG_TEXT, NULL, "c", f, 1, msg, sizeof(msg) - 1);
    snprintf(want, sizeof(want),
             "ts=2025-12-01T20:41:02.345Z lvl=info code=c wrk=- conn=- req=- "
             "model=\"x\\ny\" msg=%s\n",
             want_msg);
    assert_string_equal(line, want);
    assert_ptr_equal(strchr(line, '\n'), line + strlen(line) - 1); /* one line */
    line = t_line(GW_LOG_JSON, NULL, "c", f, 1, msg, sizeof(msg) - 1);
    snprintf(want, sizeof(want),
             "{\"ts\":\"2025-12-01T20:41:02.345Z\",\"lvl\":\"info\",\"code\":\"c\",\"wrk\":null,"
             "\"conn\":null,\"req\":null,\"model\":\"x\\ny\",\"msg\":%s}\n",
             want_msg);
    assert_string_equal(line, want);
    /* a NUL inside a message is a control character too */
    line = t_line(GW_LOG_JSON, NULL, "c", NULL, 0, "a\0b", 3);
    assert_non_null(strstr(line, "\"msg\":\"a\\u0000b\"}"));
}

static void
test_log_levels_by_name(void **state)
{
    enum gw_log_level l = GW_LOG_ERROR;

    (void)state;
    assert_true(gw_log_level_from_str("debug", &l));
    assert_int_equal(l, GW_LOG_DEBUG);
    assert_true(gw_log_level_from_str("warn", &l));
    assert_int_equal(l, GW_LOG_WARN);
    assert_false(gw_log_level_from_str("verbose", &l));
    assert_int_equal(l, GW_LOG_WARN);
    assert_string_equal(gw_log_level_str(GW_LOG_ERROR), "error");
    gw_log_set(GW_LOG_TEXT, GW_LOG_WARN);
    assert_false(gw_log_enabled(GW_LOG_INFO));
    assert_true(gw_log_enabled(GW_LOG_WARN));
    gw_log_set(GW_LOG_TEXT, GW_LOG_INFO);
}

/* A reload sets the format and the level at once, and a line is decided by one reading
 * of both: an info line whose writer checked the level before a reload to warn is not
 * written (in the new format or any other). */
static void
test_log_a_line_takes_format_and_level_from_one_configuration(void **state)
{
    char *line;

    (void)state;
    gw_log_attach();
    gw_log_set(GW_LOG_JSON, GW_LOG_WARN);
    assert_int_equal(gw_log_get_format(), GW_LOG_JSON);
    assert_false(gw_log_enabled(GW_LOG_INFO));
    gw_log_write(GW_LOG_INFO, NULL, "request", "checked before the reload");
    assert_null(gw_log_take());
    gw_log_write(GW_LOG_WARN, NULL, "w", "after");
    line = gw_log_take();
    assert_non_null(line);
    assert_int_equal(line[0], '{');
    assert_non_null(strstr(line, "\"lvl\":\"warn\""));
    gw_free(line);
    gw_log_detach();
    gw_log_set(GW_LOG_TEXT, GW_LOG_INFO);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_rate_one_line_a_second_with_the_held_back_count),
        cmocka_unit_test(test_log_rate_kinds_are_counted_apart),
        cmocka_unit_test(test_log_text_line_has_every_key_in_order),
        cmocka_unit_test(test_log_json_line_has_the_same_keys),
        cmocka_unit_test(test_log_fields_in_text_and_json),
        cmocka_unit_test(test_log_escapes_quotes_newlines_control_and_bad_utf8),
        cmocka_unit_test(test_log_levels_by_name),
        cmocka_unit_test(test_log_a_line_takes_format_and_level_from_one_configuration),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
