/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_openai.c - OpenAI Chat Completions: request parse and
 * refusals, render (byte-exact forward, model rewrite, include_usage), chunk and
 * answer inspection, error bodies and error chunks.
 * See: dialects/openai.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/alloc.h"
#include "dialects/openai.h"

#define T_LEN(s) (sizeof(s) - 1)

static struct dl_openai_req *
t_parse_ok(const char *body, size_t len)
{
    struct dl_openai_req *r = NULL;
    struct gw_buf why = {0};

    assert_int_equal(dl_openai_req_parse(body, len, &r, &why), GW_OK);
    assert_non_null(r);
    assert_int_equal(why.len, 0);
    gw_buf_fini(&why);
    return r;
}

/* Parses <body> expecting a refusal; checks <why> names <reason_part> and does not
 * quote the body's marker text. */
static void
t_parse_refused(const char *body, const char *reason_part, const char *secret)
{
    struct dl_openai_req *r = (struct dl_openai_req *)1;
    struct gw_buf why = {0};

    assert_int_equal(dl_openai_req_parse(body, strlen(body), &r, &why), GW_E_BAD_REQUEST);
    assert_null(r);
    assert_true(why.len > 0);
    assert_non_null(strstr(why.data, reason_part));
    if (secret)
        assert_null(strstr(why.data, secret));
    gw_buf_fini(&why);
}

static void
t_render(const char *body, const char *model, struct gw_buf *out)
{
    struct dl_openai_req *r = t_parse_ok(body, strlen(body));

    assert_int_equal(dl_openai_req_render(r, body, strlen(body), gw_str_c(model), out), GW_OK);
    dl_openai_req_free(r);
}

/* ---- parse ---- */

static void
test_openai_parse_reads_model_stream_and_usage_flag(void **state)
{
    static const char body[] = "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\","
                               "\"content\":\"hi\"}],\"stream\":true,"
                               "\"stream_options\":{\"include_usage\":true}}";
    struct dl_openai_req *r;

    (void)state;
    r = t_parse_ok(body, T_LEN(body));
    assert_true(gw_str_eq(dl_openai_req_model(r), GW_STR_LIT("gpt-4o")));
    assert_true(dl_openai_req_is_stream(r));
    assert_true(dl_openai_req_wants_usage(r));
    dl_openai_req_free(r);
}

static void
test_openai_parse_defaults_not_stream_no_usage(void **state)
{
    static const char body[] = " {\"model\":\"m\",\"messages\":[],\"stream\":null} \n";
    struct dl_openai_req *r;

    (void)state;
    r = t_parse_ok(body, T_LEN(body));
    assert_false(dl_openai_req_is_stream(r));
    assert_false(dl_openai_req_wants_usage(r));
    assert_int_equal(dl_openai_req_input_estimate(r), 0);
    dl_openai_req_free(r);
}

static void
test_openai_parse_refuses_non_object(void **state)
{
    (void)state;
    t_parse_refused("[\"SECRET\"]", "body: must be a JSON object", "SECRET");
    t_parse_refused("\"SECRET\"", "body: must be a JSON object", "SECRET");
    t_parse_refused("", "body: empty", NULL);
}

static void
test_openai_parse_refuses_missing_or_empty_model(void **state)
{
    (void)state;
    t_parse_refused("{\"messages\":[]}", "model: required string", NULL);
    t_parse_refused("{\"model\":\"\",\"messages\":[]}", "model: required string", NULL);
    t_parse_refused("{\"model\":7,\"messages\":[]}", "model: required string", NULL);
}

static void
test_openai_parse_refuses_messages_not_array(void **state)
{
    (void)state;
    t_parse_refused("{\"model\":\"m\"}", "messages: required array", NULL);
    t_parse_refused("{\"model\":\"m\",\"messages\":\"SECRET\"}", "messages: required array",
                    "SECRET");
}

static void
test_openai_parse_refuses_stream_not_bool(void **state)
{
    (void)state;
    t_parse_refused("{\"model\":\"m\",\"messages\":[],\"stream\":\"yes\"}",
                    "stream: must be a boolean", NULL);
    t_parse_refused("{\"model\":\"m\",\"messages\":[],\"stream_options\":true}",
                    "stream_options: must be an object", NULL);
}

static void
test_openai_parse_invalid_json_reason_has_position_not_body(void **state)
{
    struct dl_openai_req *r = NULL;
    struct gw_buf why = {0};
    static const char body[] = "{\"model\": SECRETTOKEN}";

    (void)state;
    assert_int_equal(dl_openai_req_parse(body, T_LEN(body), &r, &why), GW_E_BAD_REQUEST);
    assert_null(r);
    assert_non_null(strstr(why.data, "body: not valid JSON at line 1 column"));
    assert_null(strstr(why.data, "SECRET"));
    assert_null(strstr(why.data, "near"));
    gw_buf_fini(&why);
    t_parse_refused("{\"model\":\"m\",\"messages\":[]} trailing", "not valid JSON", "trailing");
    t_parse_refused("{\"model\":\"m\",\"messages\":[],\"seed\":123456789012345678901234}",
                    "number out of range", "1234567890");
}

static void
test_openai_parse_input_estimate_counts_text_tools_and_messages(void **state)
{
    /* text 8 + parts 4 + 4, tool args {"a":12} 8, tool schema [{"type":"function"}] 21:
     * 45 bytes -> 12 tokens (rounded up), + 4 per message (3) = 24 */
    static const char body[] =
        "{\"model\":\"m\",\"messages\":["
        "{\"role\":\"system\",\"content\":\"12345678\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"abcd\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:xxxxxxxxxxxxxxxxxxx\"}},"
        "{\"type\":\"text\",\"text\":\"efgh\"}]},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c1\","
        "\"type\":\"function\",\"function\":{\"name\":\"\",\"arguments\":\"{\\\"a\\\":12}\"}}]}],"
        "\"tools\":[{\"type\":\"function\"}]}";
    struct dl_openai_req *r;

    (void)state;
    r = t_parse_ok(body, T_LEN(body));
    assert_int_equal(dl_openai_req_input_estimate(r), 24);
    dl_openai_req_free(r);
}

static void
test_openai_parse_out_of_memory_is_clean(void **state)
{
    static const char body[] =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";
    struct dl_openai_req *r = NULL;
    unsigned long n;
    bool ok = false;

    (void)state;
    /* jansson allocates through malloc; gw's own allocation (the request) can fail */
    for (n = 1; n < 5 && !ok; n++) {
        enum gw_code rc;

        gw_alloc_fail_at(n);
        rc = dl_openai_req_parse(body, T_LEN(body), &r, NULL);
        gw_alloc_fail_at(0);
        if (rc == GW_OK) {
            ok = true;
            dl_openai_req_free(r);
        } else {
            assert_int_equal(rc, GW_E_NOMEM);
            assert_null(r);
        }
    }
    assert_true(ok);
}

/* ---- render ---- */

static void
test_openai_render_unchanged_copies_bytes(void **state)
{
    static const char body[] = "{ \"model\" : \"gpt-4o\", \"temperature\": 0.7,\n"
                               "  \"messages\": [ {\"role\":\"user\",\"content\":\"h\\u00e9\"} ] }";
    struct gw_buf out = {0};

    (void)state;
    t_render(body, "gpt-4o", &out);
    assert_int_equal(out.len, T_LEN(body));
    assert_memory_equal(out.data, body, out.len);
    gw_buf_fini(&out);
    /* a stream whose client already asked for usage is unchanged too */
    t_render("{\"model\":\"a\",\"messages\":[],\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true}}",
             "a", &out);
    assert_string_equal(out.data, "{\"model\":\"a\",\"messages\":[],\"stream\":true,"
                                  "\"stream_options\":{\"include_usage\":true}}");
    gw_buf_fini(&out);
}

static void
test_openai_render_rewrites_model_only(void **state)
{
    static const char body[] = "{\"model\":\"fast\",\"temperature\":0.7,\"messages\":[]}";
    struct gw_buf out = {0};

    (void)state;
    t_render(body, "gpt-4o-mini-2024", &out);
    /* numbers are forwarded as written (no 0.69999999999999996) */
    assert_string_equal(out.data, "{\"model\":\"gpt-4o-mini-2024\",\"temperature\":0.7,"
                                  "\"messages\":[]}");
    gw_buf_fini(&out);
}

static void
test_openai_render_forces_include_usage_keeping_fields_and_order(void **state)
{
    struct gw_buf out = {0};

    (void)state;
    /* no stream_options: added at the end */
    t_render("{\"model\":\"a\",\"stream\":true,\"messages\":[]}", "b", &out);
    assert_string_equal(out.data, "{\"model\":\"b\",\"stream\":true,\"messages\":[],"
                                  "\"stream_options\":{\"include_usage\":true}}");
    gw_buf_reset(&out);
    /* other stream_options fields kept, include_usage appended */
    t_render("{\"stream_options\":{\"x\":1},\"model\":\"a\",\"stream\":true,\"messages\":[]}", "a",
             &out);
    assert_string_equal(out.data, "{\"stream_options\":{\"x\":1,\"include_usage\":true},"
                                  "\"model\":\"a\",\"stream\":true,\"messages\":[]}");
    gw_buf_reset(&out);
    /* include_usage false turned true in place */
    t_render("{\"model\":\"a\",\"stream\":true,\"messages\":[],"
             "\"stream_options\":{\"include_usage\":false,\"y\":[1,{\"z\":\"}\"}]}}",
             "b", &out);
    assert_string_equal(out.data, "{\"model\":\"b\",\"stream\":true,\"messages\":[],"
                                  "\"stream_options\":{\"include_usage\":true,"
                                  "\"y\":[1,{\"z\":\"}\"}]}}");
    gw_buf_reset(&out);
    /* empty and null stream_options */
    t_render("{\"model\":\"a\",\"stream\":true,\"messages\":[],\"stream_options\":{ }}", "a", &out);
    assert_string_equal(out.data, "{\"model\":\"a\",\"stream\":true,\"messages\":[],"
                                  "\"stream_options\":{ \"include_usage\":true}}");
    gw_buf_reset(&out);
    t_render("{\"model\":\"a\",\"stream\":true,\"messages\":[],\"stream_options\":null}", "a",
             &out);
    assert_string_equal(out.data, "{\"model\":\"a\",\"stream\":true,\"messages\":[],"
                                  "\"stream_options\":{\"include_usage\":true}}");
    gw_buf_fini(&out);
}

static void
test_openai_render_keeps_unicode(void **state)
{
    static const char body[] = "{\"model\":\"a\",\"messages\":[{\"role\":\"user\","
                               "\"content\":\"h\xc3\xa9 \xf0\x9f\x98\x80 \\u00e9\"}]}";
    struct gw_buf out = {0};

    (void)state;
    t_render(body, "\xc3\xa9-model", &out);
    assert_string_equal(out.data, "{\"model\":\"\xc3\xa9-model\",\"messages\":[{\"role\":\"user\","
                                  "\"content\":\"h\xc3\xa9 \xf0\x9f\x98\x80 \\u00e9\"}]}");
    gw_buf_fini(&out);
}

static void
test_openai_render_escaped_keys_fall_back_to_dump(void **state)
{
    /* an escaped key could spell "model": the splice declines, jansson dumps compactly
     * in key order, unicode kept raw */
    static const char body[] = "{\"mod\\u0065l\":\"a\", \"messages\":[{\"content\":\"\\u00e9\"}],"
                               " \"stream\":true}";
    struct gw_buf out = {0};

    (void)state;
    t_render(body, "b", &out);
    assert_string_equal(out.data, "{\"model\":\"b\",\"messages\":[{\"content\":\"\xc3\xa9\"}],"
                                  "\"stream\":true,\"stream_options\":{\"include_usage\":true}}");
    gw_buf_fini(&out);
    /* a duplicate key the gateway does not read: the dump keeps the last, one body */
    t_render("{\"model\":\"x\",\"t\\u0065mperature\":1,\"temperature\":2,\"messages\":[]}", "b",
             &out);
    assert_string_equal(out.data, "{\"model\":\"b\",\"temperature\":2,\"messages\":[]}");
    gw_buf_fini(&out);
}

static void
test_openai_render_twice_with_other_models(void **state)
{
    static const char body[] = "{\"model\":\"a\",\"messages\":[],\"stream\":true}";
    struct dl_openai_req *r;
    struct gw_buf out = {0};

    (void)state;
    r = t_parse_ok(body, T_LEN(body));
    assert_int_equal(dl_openai_req_render(r, body, T_LEN(body), GW_STR_LIT("b"), &out), GW_OK);
    gw_buf_reset(&out);
    assert_int_equal(dl_openai_req_render(r, body, T_LEN(body), GW_STR_LIT("c"), &out), GW_OK);
    assert_string_equal(out.data, "{\"model\":\"c\",\"messages\":[],\"stream\":true,"
                                  "\"stream_options\":{\"include_usage\":true}}");
    assert_true(gw_str_eq(dl_openai_req_model(r), GW_STR_LIT("a")));
    gw_buf_fini(&out);
    dl_openai_req_free(r);
}

/* ---- chunks ---- */

/* ---- answers ---- */

/* With usage, the content is not counted (*bytes is 0): the estimate is for answers
 * without it; the same choices without usage are counted (the test after this). */
static void
test_openai_answer_usage_reads_usage_and_content(void **state)
{
    static const char body[] =
        "{\"id\":\"x\",\"object\":\"chat.completion\",\"choices\":[{\"index\":0,"
        "\"message\":{\"role\":\"assistant\",\"content\":\"Hello there\",\"tool_calls\":"
        "[{\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}"
        ","
        "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":7,"
        "\"prompt_tokens_details\":{\"cached_tokens\":20},"
        "\"completion_tokens_details\":{\"audio_tokens\":0,\"reasoning_tokens\":5}}}";
    struct gw_usage u;
    size_t bytes;

    (void)state;
    assert_true(dl_openai_answer_usage(gw_str_c(body), &u, &bytes));
    assert_int_equal(u.input_tokens, 30);
    assert_int_equal(u.cache_read_tokens, 20);
    assert_int_equal(u.output_tokens, 7);
    assert_int_equal(u.reasoning_tokens, 5);
    assert_int_equal(u.cache_write_tokens, 0);
    assert_int_equal(bytes, 0);
    /* the same answer without usage: its content, tool arguments and all */
    {
        char nou[sizeof(body)];
        const char *cut = strstr(body, ",\"usage\"");

        assert_non_null(cut);
        memcpy(nou, body, (size_t)(cut - body));
        strcpy(nou + (cut - body), "}");
        assert_false(dl_openai_answer_usage(gw_str_c(nou), &u, &bytes));
        assert_int_equal(bytes, 11 + 1 + 2);
    }
}

static void
test_openai_answer_without_usage_gives_content_bytes(void **state)
{
    struct gw_usage u;
    size_t bytes;

    (void)state;
    assert_false(
        dl_openai_answer_usage(GW_STR_LIT("{\"choices\":[{\"message\":{\"content\":\"abcdefgh\"}},"
                                          "{\"message\":{\"content\":\"ij\"}}]}"),
                               &u, &bytes));
    assert_int_equal(bytes, 10);
    assert_int_equal(u.input_tokens, 0);
    assert_false(dl_openai_answer_usage(GW_STR_LIT("not json"), &u, &bytes));
    assert_int_equal(bytes, 0);
    assert_false(dl_openai_answer_usage(GW_STR_LIT("{\"usage\":null}"), &u, NULL));
}

/* ---- the single-pass scanner: JSON edge cases (jansson decides the same) ---- */

/* A body with <inner> as the value of an extra member. */
static char *
t_body_with(const char *inner)
{
    static char buf[16384];

    snprintf(buf, sizeof(buf), "{\"model\":\"m\",\"messages\":[],\"x\":%s}", inner);
    return buf;
}

static void
t_accepts(const char *body, size_t len)
{
    struct dl_openai_req *r = t_parse_ok(body, len);

    dl_openai_req_free(r);
}

static void
test_openai_parse_nesting_limit_is_jansson_2048(void **state)
{
    static char buf[8192];
    size_t k, n;

    (void)state;
    /* the body object is level 1: 2047 arrays inside it make 2048 levels, jansson's
     * JSON_PARSER_MAX_DEPTH; the scanner keeps one bit per level, so it cannot recurse */
    for (n = 2047; n <= 2048; n++) {
        size_t len = 0;

        len += (size_t)snprintf(buf, sizeof(buf), "{\"model\":\"m\",\"messages\":[],\"x\":");
        for (k = 0; k < n; k++)
            buf[len++] = '[';
        for (k = 0; k < n; k++)
            buf[len++] = ']';
        buf[len++] = '}';
        buf[len] = '\0';
        if (n == 2047)
            t_accepts(buf, len);
        else
            t_parse_refused(buf, "body: nested too deep at line 1 column", NULL);
    }
    /* a scalar is a level of its own for jansson: 2046 arrays around a number make 2048
     * levels with the body, 2047 make 2049 (a libFuzzer find: the scanner let it by) */
    for (n = 2046; n <= 2047; n++) {
        size_t len = 0;

        len += (size_t)snprintf(buf, sizeof(buf), "{\"model\":\"m\",\"messages\":[],\"x\":");
        for (k = 0; k < n; k++)
            buf[len++] = '[';
        buf[len++] = '5';
        for (k = 0; k < n; k++)
            buf[len++] = ']';
        buf[len++] = '}';
        buf[len] = '\0';
        if (n == 2046)
            t_accepts(buf, len);
        else
            t_parse_refused(buf, "body: nested too deep at line 1 column", NULL);
    }
    /* ... but at the limit a token its lexer refuses is invalid JSON, as jansson's lexer
     * says before its depth check (a libFuzzer find: the scanner said too deep), while a
     * token that lexes, even as an invalid one (a bad literal), is too deep (another
     * libFuzzer find: the scanner said invalid) */
    {
        size_t len = (size_t)snprintf(buf, sizeof(buf), "{\"model\":\"m\",\"messages\":[],\"x\":");

        for (k = 0; k < 2047; k++)
            buf[len++] = '[';
        buf[len++] = '\xa1';
        for (k = 0; k < 2047; k++)
            buf[len++] = ']';
        buf[len++] = '}';
        buf[len] = '\0';
        t_parse_refused(buf, "body: not valid JSON at line 1 column", NULL);
        buf[len - 2048 - 1] = 't'; /* a bad literal */
        t_parse_refused(buf, "body: nested too deep at line 1 column", NULL);
    }
    /* objects count the same way, and deep nesting where the parse looks (messages) */
    t_parse_refused("{\"model\":\"m\",\"messages\":[{\"content\":[[[[[[[[[[[[[[[[[[[[[[[["
                    "]]]]]]]]]]]]]]]]]]]]]]]}],\"x\":{\"a\":{\"b\":1}}",
                    "not valid JSON", NULL);
}

static void
test_openai_parse_model_escapes_are_decoded(void **state)
{
    static const char body[] = "{\"model\":\"gpt\\u002d4o\\/mini \\\"x\\\" \\u00e9\\ud83d\\ude00\","
                               "\"messages\":[]}";
    static const char nul[] = "{\"model\":\"a\\u0000b\",\"messages\":[]}";
    struct dl_openai_req *r;
    struct gw_buf out = {0};

    (void)state;
    r = t_parse_ok(body, T_LEN(body));
    assert_true(gw_str_eq(dl_openai_req_model(r),
                          GW_STR_LIT("gpt-4o/mini \"x\" \xc3\xa9\xf0\x9f\x98\x80")));
    /* the same model decoded: nothing changes, the bytes go as they came */
    assert_int_equal(dl_openai_req_render(r, body, T_LEN(body), dl_openai_req_model(r), &out),
                     GW_OK);
    assert_int_equal(out.len, T_LEN(body));
    assert_memory_equal(out.data, body, out.len);
    dl_openai_req_free(r);
    gw_buf_fini(&out);
    /* U+0000 is valid JSON in a value */
    r = t_parse_ok(nul, T_LEN(nul));
    assert_true(gw_str_eq(dl_openai_req_model(r), (struct gw_str){"a\0b", 3}));
    dl_openai_req_free(r);
}

static void
test_openai_parse_unicode_escapes_and_utf8(void **state)
{
    /* "\u00e9" 2 bytes, a surrogate pair 4, raw é 2, "\n" 1: 9 bytes -> 3 tokens + 4 */
    static const char body[] = "{\"model\":\"m\",\"messages\":[{\"content\":"
                               "\"\\u00e9\\ud83d\\ude00\xc3\xa9\\n\"}]}";
    struct dl_openai_req *r;

    (void)state;
    r = t_parse_ok(body, T_LEN(body));
    assert_int_equal(dl_openai_req_input_estimate(r), 3 + 4);
    dl_openai_req_free(r);
    t_parse_refused(t_body_with("\"\\ud800\""), "not valid JSON", NULL);        /* lone high */
    t_parse_refused(t_body_with("\"\\udc00\\ud800\""), "not valid JSON", NULL); /* lone low */
    t_parse_refused(t_body_with("\"\\ud800\\u0041\""), "not valid JSON", NULL); /* bad pair */
    t_parse_refused(t_body_with("\"\\u12\""), "not valid JSON", NULL);
    t_parse_refused(t_body_with("\"\\x\""), "not valid JSON", NULL);
    t_parse_refused(t_body_with("\"\xc0\x80\""), "not valid JSON", NULL);     /* overlong */
    t_parse_refused(t_body_with("\"\xed\xa0\x80\""), "not valid JSON", NULL); /* surrogate */
    t_parse_refused(t_body_with("\"\xf4\x90\x80\x80\""), "not valid JSON", NULL);
    t_parse_refused(t_body_with("\"\xe2\x82\""), "not valid JSON", NULL); /* cut short */
    t_parse_refused(t_body_with("\"\x80\""), "not valid JSON", NULL);
    t_accepts(t_body_with("\"\xf4\x8f\xbf\xbf \xef\xbf\xbf \\uffff\""),
              strlen(t_body_with("\"\xf4\x8f\xbf\xbf \xef\xbf\xbf \\uffff\"")));
}

static void
test_openai_parse_numbers_as_json_defines_them(void **state)
{
    static const char *good[] = {"-0",
                                 "0",
                                 "1e5",
                                 "1E+2",
                                 "-1.5e-3",
                                 "0.0",
                                 "1e-400",
                                 "9223372036854775807",
                                 "-9223372036854775808",
                                 "1.5e308"};
    static const char *bad[] = {"01",  "1.",  ".5",   "-",   "+1",  "1e",       "1e+",
                                "0x1", "-01", "1.e5", "--1", "NaN", "Infinity", "1 2"};
    static const char *range[] = {"9223372036854775808",
                                  "-9223372036854775809",
                                  "123456789012345678901234",
                                  "1e400",
                                  "-1e400",
                                  "1.8e308",
                                  "0.0000001e400"};
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(good) / sizeof(good[0]); k++)
        t_accepts(t_body_with(good[k]), strlen(t_body_with(good[k])));
    for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++)
        t_parse_refused(t_body_with(bad[k]), "body: not valid JSON", NULL);
    for (k = 0; k < sizeof(range) / sizeof(range[0]); k++)
        t_parse_refused(t_body_with(range[k]), "body: number out of range", NULL);
    /* jansson lexes a number where it expected ':' and reports its overflow first */
    t_parse_refused("{\"model\" 1e400:\"m\"}", "body: number out of range", NULL);
}

static void
test_openai_parse_refuses_malformed_documents(void **state)
{
    static const char body[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":"
                               "\"hi\"}],\"stream\":true,\"n\":-1.5e3,\"x\":[null,false]}";
    size_t k;

    (void)state;
    t_parse_refused("{\"model\":\"m\",\"messages\":[],}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"m\",\"messages\":[1,]}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"m\",\"messages\":[],\"x\":[,1]}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"m\",,\"messages\":[]}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"m\" \"messages\":[]}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"m\",\"messages\":[]}}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"m\",\"messages\":[]}{}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"a\nb\",\"messages\":[]}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"a\tb\",\"messages\":[]}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"a\x01\",\"messages\":[]}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"m\",\"messages\":[],\"x\":tru}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"m\",\"messages\":[],\"x\":nulls}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"m\",\"messages\":[],\"a\\u0000\":1}", "not valid JSON", NULL);
    t_parse_refused("{\"model\":\"m\",\"messages\":[],'x':1}", "not valid JSON", NULL);
    t_parse_refused("\xef\xbb\xbf{\"model\":\"m\",\"messages\":[]}", "not valid JSON", NULL);
    t_parse_refused(" \n\t ", "not valid JSON", NULL);
    /* every proper prefix of a valid body is refused */
    for (k = 1; k < T_LEN(body); k++) {
        struct dl_openai_req *r = NULL;
        struct gw_buf why = {0};

        assert_int_equal(dl_openai_req_parse(body, k, &r, &why), GW_E_BAD_REQUEST);
        assert_null(r);
        assert_non_null(strstr(why.data, "body: not valid JSON at line 1"));
        gw_buf_fini(&why);
    }
    t_accepts(body, T_LEN(body));
}

static void
test_openai_parse_refuses_raw_nul_after_a_token(void **state)
{
    /* jansson's lexer drops a NUL right after a number or literal (it loads this); a raw
     * NUL is never JSON, so the scanner refuses it: a deliberate difference */
    static const char body[] = "{\"model\":\"m\",\"messages\":[],\"x\":1\0}";
    struct dl_openai_req *r = NULL;
    struct gw_buf why = {0};

    (void)state;
    assert_int_equal(dl_openai_req_parse(body, T_LEN(body), &r, &why), GW_E_BAD_REQUEST);
    assert_null(r);
    assert_non_null(strstr(why.data, "body: not valid JSON"));
    gw_buf_fini(&why);
}

static void
test_openai_parse_error_position_counts_lines_and_characters(void **state)
{
    struct dl_openai_req *r = NULL;
    struct gw_buf why = {0};
    static const char body[] = "{\n  \"model\": \"\xc3\xa9\",\n  \"messages\": [}\n";

    (void)state;
    assert_int_equal(dl_openai_req_parse(body, T_LEN(body), &r, &why), GW_E_BAD_REQUEST);
    /* line 3, the '}' is the 16th character (jansson counts characters, not bytes) */
    assert_string_equal(why.data, "body: not valid JSON at line 3 column 16");
    gw_buf_fini(&why);
}

static void
test_openai_parse_nested_duplicate_keys_last_wins(void **state)
{
    struct dl_openai_req *r;
    static const char body[] = "{\"model\":\"b\",\"messages\":["
                               "{\"content\":\"abcdefgh\",\"content\":\"ab\"}],"
                               "\"stream\":true,"
                               "\"stream_options\":{\"x\":1,\"x\":2,\"include_usage\":true}}";

    (void)state;
    r = t_parse_ok(body, T_LEN(body));
    assert_true(gw_str_eq(dl_openai_req_model(r), GW_STR_LIT("b")));
    assert_true(dl_openai_req_is_stream(r));
    assert_true(dl_openai_req_wants_usage(r));
    assert_int_equal(dl_openai_req_input_estimate(r), 1 + 4);
    dl_openai_req_free(r);
    /* an escaped key is the key it decodes to */
    r = t_parse_ok("{\"mod\\u0065l\":\"c\",\"messag\\u0065s\":[],\"str\\u0065am\":true}",
                   strlen("{\"mod\\u0065l\":\"c\",\"messag\\u0065s\":[],\"str\\u0065am\":true}"));
    assert_true(gw_str_eq(dl_openai_req_model(r), GW_STR_LIT("c")));
    assert_true(dl_openai_req_is_stream(r));
    dl_openai_req_free(r);
}

/* ---- issue 8: one body per request ---- */

/* Parses <body> expecting the refusal that names the duplicated field <field>. */
static void
t_dup_refused(const char *body, const char *field)
{
    struct dl_openai_req *r = (struct dl_openai_req *)1;
    struct gw_buf why = {0};
    char want[128];

    snprintf(want, sizeof(want), "duplicate key \"%s\" in the request body", field);
    assert_int_equal(dl_openai_req_parse(body, strlen(body), &r, &why), GW_E_BAD_REQUEST);
    assert_null(r);
    assert_string_equal(why.data, want);
    gw_buf_fini(&why);
}

static void
test_issue_8_duplicate_model_refused(void **state)
{
    (void)state;
    /* routed on the last, served on the first by some upstreams: refused either way */
    t_dup_refused("{\"model\":\"allowed\",\"model\":\"other\",\"messages\":[]}", "model");
    t_dup_refused("{\"model\":\"other\",\"messages\":[],\"model\":\"allowed\"}", "model");
    /* the same value twice, or a value of another type: still two bodies in one */
    t_dup_refused("{\"model\":\"a\",\"model\":\"a\",\"messages\":[]}", "model");
    t_dup_refused("{\"model\":7,\"model\":\"a\",\"messages\":[]}", "model");
    /* another spelling of the same key */
    t_dup_refused("{\"model\":\"a\",\"mod\\u0065l\":\"b\",\"messages\":[]}", "model");
    t_dup_refused("{\"\\u006dodel\":\"a\",\"messages\":[],\"model\":\"b\"}", "model");
}

static void
test_issue_8_duplicate_read_fields_refused(void **state)
{
    static const char *const fields[][2] = {
        {"messages", "[]"},         {"stream", "true"},
        {"stream_options", "null"}, {"tools", "[]"},
        {"functions", "[]"},        {"prompt_cache_key", "\"k\""},
        {"max_tokens", "5"},        {"max_completion_tokens", "5"},
    };
    char body[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        snprintf(body, sizeof(body), "{\"model\":\"a\",\"%s\":%s,\"messages\":[],\"%s\":%s}",
                 fields[i][0], fields[i][1], fields[i][0], fields[i][1]);
        t_dup_refused(body, fields[i][0]);
    }
    /* the first field met twice is the one named */
    t_dup_refused("{\"model\":\"a\",\"stream\":true,\"messages\":[],\"stream\":false,"
                  "\"model\":\"b\"}",
                  "stream");
}

static void
test_issue_8_duplicate_include_usage_refused(void **state)
{
    (void)state;
    t_dup_refused("{\"model\":\"a\",\"messages\":[],\"stream\":true,"
                  "\"stream_options\":{\"include_usage\":false,\"include_usage\":true}}",
                  "stream_options.include_usage");
    t_dup_refused("{\"model\":\"a\",\"messages\":[],\"stream_options\":{\"include_usage\":true,"
                  "\"include_\\u0075sage\":false}}",
                  "stream_options.include_usage");
    /* include_usage once in each of two stream_options: the outer duplicate is named */
    t_dup_refused("{\"model\":\"a\",\"messages\":[],\"stream_options\":{\"include_usage\":true},"
                  "\"stream_options\":{\"include_usage\":false}}",
                  "stream_options");
}

static void
test_issue_8_unread_duplicates_accepted_and_forwarded_as_sent(void **state)
{
    /* a key the gateway never reads: nothing it decided depends on it */
    static const char body[] = "{\"model\":\"a\",\"messages\":[],\"temperature\":0.1,"
                               "\"temperature\":0.7,\"user\":\"x\",\"user\":\"y\"}";
    struct dl_openai_req *r;
    struct gw_buf out = {0};

    (void)state;
    r = t_parse_ok(body, T_LEN(body));
    assert_int_equal(dl_openai_req_render(r, body, T_LEN(body), GW_STR_LIT("a"), &out), GW_OK);
    assert_memory_equal(out.data, body, T_LEN(body));
    gw_buf_reset(&out);
    /* the model rewrite splices the one "model" and keeps the rest as sent */
    assert_int_equal(dl_openai_req_render(r, body, T_LEN(body), GW_STR_LIT("b"), &out), GW_OK);
    assert_string_equal(out.data, "{\"model\":\"b\",\"messages\":[],\"temperature\":0.1,"
                                  "\"temperature\":0.7,\"user\":\"x\",\"user\":\"y\"}");
    gw_buf_fini(&out);
    dl_openai_req_free(r);
}

static void
test_issue_8_invalid_json_wins_over_duplicate(void **state)
{
    (void)state;
    /* the whole body is validated first: a broken body says so, wherever the duplicate */
    t_parse_refused("{\"model\":\"a\",\"model\":\"b\",\"messages\":[}", "body: not valid JSON",
                    NULL);
    t_parse_refused("[{\"model\":\"a\",\"model\":\"b\"}]", "body: must be a JSON object", NULL);
    /* a duplicate is refused before the fields are checked */
    t_dup_refused("{\"model\":\"a\",\"model\":\"\",\"messages\":7}", "model");
}

static void
test_openai_parse_estimate_counts_tools_as_jansson_dumps_them(void **state)
{
    /* reals are dumped by jansson as %.17g (0.5 -> 0.5, 1e3 -> 1000.0, 0.1 ->
     * 0.10000000000000001), -0 as 0, escapes re-escaped its way */
    static const char tools[] = "[{\"type\":\"function\",\"function\":{\"name\":\"f\\u00e9\","
                                "\"parameters\":{\"a\":0.5,\"b\":1e3,\"c\":-0,\"d\":0.1,"
                                "\"e\":\"x\\/y\\u0001\\t\\\"\",\"f\":[ true , null ],"
                                "\"g\":-2.5E-7,\"h\":{}}}}]";
    char body[1024];
    json_error_t err;
    json_t *t;
    size_t dumped;
    struct dl_openai_req *r;

    (void)state;
    t = json_loads(tools, 0, &err);
    assert_non_null(t);
    dumped = json_dumpb(t, NULL, 0, JSON_COMPACT);
    json_decref(t);
    snprintf(body, sizeof(body),
             "{\"model\":\"m\",\"messages\":[],\"tools\":%s,"
             "\"functions\":%s}",
             tools, tools);
    r = t_parse_ok(body, strlen(body));
    assert_int_equal(dl_openai_req_input_estimate(r), (2 * dumped + 3) / 4);
    dl_openai_req_free(r);
    /* a scalar "tools" dumps to nothing */
    r = t_parse_ok("{\"model\":\"m\",\"messages\":[],\"tools\":\"abcdefgh\"}",
                   strlen("{\"model\":\"m\",\"messages\":[],\"tools\":\"abcdefgh\"}"));
    assert_int_equal(dl_openai_req_input_estimate(r), 0);
    dl_openai_req_free(r);
}

static void
test_openai_render_from_a_copy_of_the_body(void **state)
{
    static const char body[] = "{\"model\":\"a\",\"messages\":[],\"stream\":true}";
    char copy[sizeof(body)];
    struct dl_openai_req *r;
    struct gw_buf out = {0};

    (void)state;
    r = t_parse_ok(body, T_LEN(body));
    memcpy(copy, body, sizeof(body));
    assert_int_equal(dl_openai_req_render(r, copy, T_LEN(body), GW_STR_LIT("b"), &out), GW_OK);
    assert_string_equal(out.data, "{\"model\":\"b\",\"messages\":[],\"stream\":true,"
                                  "\"stream_options\":{\"include_usage\":true}}");
    gw_buf_fini(&out);
    dl_openai_req_free(r);
}

static void
test_openai_answer_refuses_invalid_and_reads_arrays_as_empty(void **state)
{
    struct gw_usage u;
    size_t bytes = 99;

    (void)state;
    assert_false(
        dl_openai_answer_usage(GW_STR_LIT("[{\"usage\":{\"prompt_tokens\":1}}]"), &u, &bytes));
    assert_int_equal(bytes, 0);
    assert_false(
        dl_openai_answer_usage(GW_STR_LIT("{\"choices\":[{\"message\":{\"content\":\"abc\"}}],"
                                          "\"usage\":{\"prompt_tokens\":1},\"x\":01}"),
                               &u, &bytes));
    assert_int_equal(bytes, 0);
    assert_int_equal(u.input_tokens, 0);
    assert_true(dl_openai_answer_usage(
        GW_STR_LIT(" {\"choices\":[{\"message\":{\"content\":\"abc\",\"reasoning\":\"d\"}}],"
                   "\"usage\":{\"prompt_tokens\":9223372036854775807}} "),
        &u, &bytes));
    assert_int_equal(bytes, 0); /* usage is there: no estimate to make */
    assert_int_equal(u.input_tokens, 9223372036854775807ULL);
}

/* ---- errors ---- */

static void
t_check_error_body(enum gw_code code, const char *type, int status)
{
    struct gw_buf out = {0};
    json_error_t err;
    json_t *root, *e;

    assert_int_equal(dl_openai_error_body(code, GW_STR_LIT("a \"quoted\"\nmessage \xc3\xa9"), &out),
                     GW_OK);
    root = json_loadb(out.data, out.len, 0, &err);
    assert_non_null(root);
    assert_int_equal(json_object_size(root), 1);
    e = json_object_get(root, "error");
    assert_true(json_is_object(e));
    assert_int_equal(json_object_size(e), 4);
    assert_string_equal(json_string_value(json_object_get(e, "message")),
                        "a \"quoted\"\nmessage \xc3\xa9");
    assert_string_equal(json_string_value(json_object_get(e, "type")), type);
    assert_string_equal(json_string_value(json_object_get(e, "code")), gw_code_str(code));
    assert_true(json_is_integer(json_object_get(e, "status")));
    assert_int_equal(json_integer_value(json_object_get(e, "status")), status);
    json_decref(root);
    gw_buf_fini(&out);
}

static void
test_openai_error_body_shape_per_code(void **state)
{
    (void)state;
    t_check_error_body(GW_E_BAD_REQUEST, "invalid_request_error", 400);
    t_check_error_body(GW_E_BODY_TOO_LARGE, "invalid_request_error", 413);
    t_check_error_body(GW_E_AUTH_INVALID_KEY, "authentication_error", 401);
    t_check_error_body(GW_E_MODEL_NOT_ALLOWED, "permission_error", 403);
    t_check_error_body(GW_E_MODEL_NOT_FOUND, "not_found_error", 404);
    t_check_error_body(GW_E_CLIENT_TIMEOUT, "timeout_error", 408);
    t_check_error_body(GW_E_UPSTREAM_TIMEOUT, "timeout_error", 504);
    t_check_error_body(GW_E_BUSY_ALL, "rate_limit_error", 429);
    t_check_error_body(GW_E_KEY_BUSY, "rate_limit_error", 429);
    t_check_error_body(GW_E_UPSTREAM_FAILED, "api_error", 502);
    t_check_error_body(GW_E_UPSTREAM_TOO_SLOW, "api_error", 503);
    t_check_error_body(GW_E_INTERNAL, "api_error", 500);
}

/* A used-up quota and a too long context carry OpenAI's own code, which clients act on;
 * gw's stays beside it. */
static void
test_openai_error_body_uses_openai_codes_clients_act_on(void **state)
{
    struct gw_buf out = {0};

    (void)state;
    assert_int_equal(dl_openai_error_body(GW_E_KEY_LIMIT_COST_PER_PERIOD, GW_STR_LIT("m"), &out),
                     GW_OK);
    assert_string_equal(out.data, "{\"error\":{\"message\":\"m\",\"type\":\"insufficient_quota\","
                                  "\"code\":\"insufficient_quota\","
                                  "\"gw_code\":\"gw.key_limit.cost_per_period\",\"status\":429}}");
    gw_buf_reset(&out);
    assert_int_equal(dl_openai_error_body(GW_E_CONTEXT_LENGTH, GW_STR_LIT("m"), &out), GW_OK);
    assert_string_equal(out.data,
                        "{\"error\":{\"message\":\"m\",\"type\":\"invalid_request_error\","
                        "\"code\":\"context_length_exceeded\","
                        "\"gw_code\":\"gw.context_length_exceeded\",\"status\":400}}");
    gw_buf_fini(&out);
}

static void
test_openai_error_body_appends(void **state)
{
    struct gw_buf out = {0};

    (void)state;
    assert_int_equal(gw_buf_append_str(&out, GW_STR_LIT("x")), GW_OK);
    assert_int_equal(dl_openai_error_body(GW_E_BAD_REQUEST, GW_STR_LIT("m"), &out), GW_OK);
    assert_string_equal(out.data,
                        "x{\"error\":{\"message\":\"m\",\"type\":\"invalid_request_error\","
                        "\"code\":\"gw.bad_request\",\"status\":400}}");
    gw_buf_fini(&out);
}

static void
test_openai_error_chunk_framing(void **state)
{
    struct gw_buf out = {0};

    (void)state;
    assert_int_equal(
        dl_openai_error_chunk(GW_E_UPSTREAM_DROPPED, GW_STR_LIT("upstream dropped"), &out), GW_OK);
    assert_string_equal(out.data, "data: {\"error\":{\"message\":\"upstream dropped\","
                                  "\"type\":\"api_error\",\"code\":\"gw.upstream.dropped\","
                                  "\"status\":502}}\n\n");
    gw_buf_fini(&out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai_parse_reads_model_stream_and_usage_flag),
        cmocka_unit_test(test_openai_parse_defaults_not_stream_no_usage),
        cmocka_unit_test(test_openai_parse_refuses_non_object),
        cmocka_unit_test(test_openai_parse_refuses_missing_or_empty_model),
        cmocka_unit_test(test_openai_parse_refuses_messages_not_array),
        cmocka_unit_test(test_openai_parse_refuses_stream_not_bool),
        cmocka_unit_test(test_openai_parse_invalid_json_reason_has_position_not_body),
        cmocka_unit_test(test_openai_parse_input_estimate_counts_text_tools_and_messages),
        cmocka_unit_test(test_openai_parse_out_of_memory_is_clean),
        cmocka_unit_test(test_openai_render_unchanged_copies_bytes),
        cmocka_unit_test(test_openai_render_rewrites_model_only),
        cmocka_unit_test(test_openai_render_forces_include_usage_keeping_fields_and_order),
        cmocka_unit_test(test_openai_render_keeps_unicode),
        cmocka_unit_test(test_openai_render_escaped_keys_fall_back_to_dump),
        cmocka_unit_test(test_openai_render_twice_with_other_models),
        cmocka_unit_test(test_openai_answer_usage_reads_usage_and_content),
        cmocka_unit_test(test_openai_answer_without_usage_gives_content_bytes),
        cmocka_unit_test(test_openai_parse_nesting_limit_is_jansson_2048),
        cmocka_unit_test(test_openai_parse_model_escapes_are_decoded),
        cmocka_unit_test(test_openai_parse_unicode_escapes_and_utf8),
        cmocka_unit_test(test_openai_parse_numbers_as_json_defines_them),
        cmocka_unit_test(test_openai_parse_refuses_malformed_documents),
        cmocka_unit_test(test_openai_parse_refuses_raw_nul_after_a_token),
        cmocka_unit_test(test_openai_parse_error_position_counts_lines_and_characters),
        cmocka_unit_test(test_openai_parse_nested_duplicate_keys_last_wins),
        cmocka_unit_test(test_issue_8_duplicate_model_refused),
        cmocka_unit_test(test_issue_8_duplicate_read_fields_refused),
        cmocka_unit_test(test_issue_8_duplicate_include_usage_refused),
        cmocka_unit_test(test_issue_8_unread_duplicates_accepted_and_forwarded_as_sent),
        cmocka_unit_test(test_issue_8_invalid_json_wins_over_duplicate),
        cmocka_unit_test(test_openai_parse_estimate_counts_tools_as_jansson_dumps_them),
        cmocka_unit_test(test_openai_render_from_a_copy_of_the_body),
        cmocka_unit_test(test_openai_answer_refuses_invalid_and_reads_arrays_as_empty),
        cmocka_unit_test(test_openai_error_body_shape_per_code),
        cmocka_unit_test(test_openai_error_body_uses_openai_codes_clients_act_on),
        cmocka_unit_test(test_openai_error_body_appends),
        cmocka_unit_test(test_openai_error_chunk_framing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
