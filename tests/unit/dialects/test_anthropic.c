/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_anthropic.c - the Messages shape's errors and table
 * (dialects/anthropic.c): gateway refusals in the Messages error shape with our code,
 * the stream's unavailable frame, upstream error bodies read and rendered through the
 * one status table, every operation present in dl_anthropic_shape. And, until the
 * pipeline uses the shape's operations, the old Chat Completions <-> Anthropic Messages
 * converter: request mapping (max_tokens precedence, system, merges, images, tools, sampling),
 * each refusal, answer and usage conversion, error mapping, and streams (text, tool
 * call, error, malformed events), the converted chunks read back through the gateway's
 * OpenAI chunk inspector; every call also compared byte for byte with the jansson
 * route (the fast routes' proof), plus edge shapes for the fast routes.
 * See: dialects/anthropic.c
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
#include "dialects/anthropic-priv.h"
#include "dialects/anthropic.h"
#include "dialects/canon.h"
#include "dialects/openai.h"

#define T_MODEL GW_STR_LIT("claude-test")

/* ---- fast routes against the jansson routes ----
 * dl_anthropic_from_chat, dl_anthropic_answer_to_chat and dl_anthropic_stream_event take
 * allocation-free fast routes for common shapes. Every call in this file goes through
 * t_from_chat, t_answer_to_chat and t_stream_event (the #defines below), which also run
 * the jansson route (dialects/anthropic-priv.h) on a copy of the state and assert the
 * same code, the same bytes and the same state. Out of memory on either side skips the
 * comparison. */

static enum gw_code
t_from_chat(const char *body, size_t len, struct gw_str model, uint64_t spec_max_output,
            struct gw_buf *out, char *why, size_t whylen)
{
    struct gw_buf ref_out = {0};
    char ref_why[256] = "";
    size_t start = out->len;
    enum gw_code rc, ref_rc;

    rc = (dl_anthropic_from_chat)(body, len, model, spec_max_output, out, why, whylen);
    ref_rc = dl_anthropic_from_chat_jansson(body, len, model, spec_max_output, &ref_out, ref_why,
                                            whylen < sizeof(ref_why) ? whylen : sizeof(ref_why));
    if (rc != GW_E_NOMEM && ref_rc != GW_E_NOMEM) {
        assert_int_equal(rc, ref_rc);
        if (out->len - start != ref_out.len ||
            (ref_out.len && memcmp(out->data + start, ref_out.data, ref_out.len) != 0))
            print_error("fast:    %.*s\njansson: %.*s\n", (int)(out->len - start),
                        out->data ? out->data + start : "", (int)ref_out.len,
                        ref_out.data ? ref_out.data : "");
        assert_int_equal(out->len - start, ref_out.len);
        if (ref_out.len)
            assert_memory_equal(out->data + start, ref_out.data, ref_out.len);
        if (why && whylen && whylen <= sizeof(ref_why))
            assert_string_equal(why, ref_why);
    }
    gw_buf_fini(&ref_out);
    return rc;
}

static enum gw_code
t_stream_event(struct dl_anthropic_stream *st, struct gw_str event, struct gw_str data,
               struct gw_buf *out)
{
    struct dl_anthropic_stream ref;
    struct gw_buf ref_out = {0};
    size_t start = out->len;
    enum gw_code rc, ref_rc;

    memcpy(&ref, st, sizeof(ref));
    rc = (dl_anthropic_stream_event)(st, event, data, out);
    ref_rc = dl_anthropic_stream_event_jansson(&ref, event, data, &ref_out);
    if (rc != GW_E_NOMEM && ref_rc != GW_E_NOMEM) {
        assert_int_equal(rc, ref_rc);
        assert_int_equal(out->len - start, ref_out.len);
        if (ref_out.len)
            assert_memory_equal(out->data + start, ref_out.data, ref_out.len);
        assert_memory_equal(st, &ref, sizeof(ref));
    }
    gw_buf_fini(&ref_out);
    return rc;
}

static enum gw_code
t_answer_to_chat(const char *body, size_t len, uint64_t created_s, struct gw_buf *out,
                 struct gw_usage *usage)
{
    struct gw_buf ref_out = {0};
    struct gw_usage ref_usage;
    size_t start = out->len;
    enum gw_code rc, ref_rc;

    rc = (dl_anthropic_answer_to_chat)(body, len, created_s, out, usage);
    ref_rc = dl_anthropic_answer_to_chat_jansson(body, len, created_s, &ref_out, &ref_usage);
    if (rc != GW_E_NOMEM && ref_rc != GW_E_NOMEM) {
        assert_int_equal(rc, ref_rc);
        if (out->len - start != ref_out.len ||
            (ref_out.len && memcmp(out->data + start, ref_out.data, ref_out.len) != 0))
            print_error("fast:    %.*s\njansson: %.*s\n", (int)(out->len - start),
                        out->data ? out->data + start : "", (int)ref_out.len,
                        ref_out.data ? ref_out.data : "");
        assert_int_equal(out->len - start, ref_out.len);
        if (ref_out.len)
            assert_memory_equal(out->data + start, ref_out.data, ref_out.len);
        assert_memory_equal(usage, &ref_usage, sizeof(ref_usage));
    }
    gw_buf_fini(&ref_out);
    return rc;
}

#define dl_anthropic_from_chat t_from_chat
#define dl_anthropic_stream_event t_stream_event
#define dl_anthropic_answer_to_chat t_answer_to_chat

/* Asserts that <got> (JSON text) equals the JSON <want>, printing both when not. */
static void
t_json_eq(const char *got, size_t len, const char *want)
{
    json_t *g = json_loadb(got, len, 0, NULL);
    json_t *w = json_loads(want, 0, NULL);

    assert_non_null(w);
    if (!g || !json_equal(g, w)) {
        print_error("got:  %.*s\nwant: %s\n", (int)len, got, want);
        fail();
    }
    json_decref(g);
    json_decref(w);
}

/* Converts <body> expecting GW_OK and returns the parsed Messages body. */
static json_t *
t_convert(const char *body, uint64_t spec_max)
{
    struct gw_buf out = {0};
    char why[256] = "x";
    json_t *j;

    assert_int_equal(
        dl_anthropic_from_chat(body, strlen(body), T_MODEL, spec_max, &out, why, sizeof(why)),
        GW_OK);
    assert_string_equal(why, "");
    j = json_loadb(out.data, out.len, 0, NULL);
    assert_non_null(j);
    gw_buf_fini(&out);
    return j;
}

static void
t_convert_eq(const char *body, uint64_t spec_max, const char *want)
{
    struct gw_buf out = {0};
    char why[256];

    assert_int_equal(
        dl_anthropic_from_chat(body, strlen(body), T_MODEL, spec_max, &out, why, sizeof(why)),
        GW_OK);
    t_json_eq(out.data, out.len, want);
    gw_buf_fini(&out);
}

/* Converts <body> expecting a refusal whose message contains <field>. */
static void
t_refused(const char *body, const char *field)
{
    struct gw_buf out = {0};
    char why[256] = "";

    assert_int_equal(dl_anthropic_from_chat(body, strlen(body), T_MODEL, 0, &out, why, sizeof(why)),
                     GW_E_UNCONVERTIBLE);
    if (!strstr(why, field)) {
        print_error("why \"%s\" does not name \"%s\"\n", why, field);
        fail();
    }
    assert_int_equal(out.len, 0);
    gw_buf_fini(&out);
}

static uint64_t
t_max_tokens(const char *body, uint64_t spec_max)
{
    json_t *j = t_convert(body, spec_max);
    uint64_t v = (uint64_t)json_integer_value(json_object_get(j, "max_tokens"));

    json_decref(j);
    return v;
}

/* ---- request ---- */

static void
test_anthropic_request_maps_model_messages_and_stream(void **state)
{
    (void)state;
    t_convert_eq("{\"model\":\"gpt-x\",\"stream\":true,\"messages\":[{\"role\":\"user\","
                 "\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"hello\"},"
                 "{\"role\":\"user\",\"content\":\"bye\"}]}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":["
                 "{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\","
                 "\"content\":\"hello\"},{\"role\":\"user\",\"content\":\"bye\"}],"
                 "\"stream\":true}");
    /* stream false or absent: no "stream" key */
    t_convert_eq("{\"model\":\"m\",\"stream\":false,\"messages\":[{\"role\":\"user\","
                 "\"content\":\"hi\"}]}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":["
                 "{\"role\":\"user\",\"content\":\"hi\"}]}");
}

static void
test_anthropic_request_max_tokens_precedence_and_spec_fill(void **state)
{
    (void)state;
    assert_int_equal(t_max_tokens("{\"model\":\"m\",\"max_completion_tokens\":100,\"max_tokens\":"
                                  "200,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                                  300),
                     100);
    assert_int_equal(t_max_tokens("{\"model\":\"m\",\"max_tokens\":200,\"messages\":[{\"role\":"
                                  "\"user\",\"content\":\"x\"}]}",
                                  300),
                     200);
    assert_int_equal(t_max_tokens("{\"model\":\"m\",\"max_completion_tokens\":null,\"messages\":[{"
                                  "\"role\":\"user\",\"content\":\"x\"}]}",
                                  300),
                     300);
    assert_int_equal(
        t_max_tokens("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 0),
        DL_ANTHROPIC_FALLBACK_MAX_TOKENS);
    t_refused("{\"model\":\"m\",\"max_tokens\":0,\"messages\":[{\"role\":\"user\",\"content\":"
              "\"x\"}]}",
              "max_tokens");
}

static void
test_anthropic_request_system_and_developer_join_top_level_system(void **state)
{
    (void)state;
    t_convert_eq("{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                 "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                 "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"user\",\"content\":\"q\"}]}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"system\":\"be brief\\n\\na"
                 "\\n\\nb\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}");
}

static void
test_anthropic_request_merges_consecutive_same_role_messages(void **state)
{
    (void)state;
    t_convert_eq("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
                 "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"b\"}]},"
                 "{\"role\":\"assistant\",\"content\":\"c\"},{\"role\":\"assistant\","
                 "\"content\":\"d\"},{\"role\":\"user\",\"content\":\"e\"}]}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":["
                 "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
                 "{\"type\":\"text\",\"text\":\"b\"}]},"
                 "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"c\"},"
                 "{\"type\":\"text\",\"text\":\"d\"}]},"
                 "{\"role\":\"user\",\"content\":\"e\"}]}");
}

static void
test_anthropic_request_images_data_and_http_urls(void **state)
{
    (void)state;
    t_convert_eq("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":["
                 "{\"type\":\"text\",\"text\":\"look\",\"cache_control\":{\"type\":\"ephemeral\"}},"
                 "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,QUJD\"}},"
                 "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x.test/a.jpg\","
                 "\"detail\":\"low\"}},{\"type\":\"text\",\"text\":\"\"}]}]}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
                 "\"content\":[{\"type\":\"text\",\"text\":\"look\",\"cache_control\":{\"type\":"
                 "\"ephemeral\"}},{\"type\":\"image\",\"source\":{\"type\":\"base64\","
                 "\"media_type\":\"image/png\",\"data\":\"QUJD\"}},{\"type\":\"image\","
                 "\"source\":{\"type\":\"url\",\"url\":\"https://x.test/a.jpg\"}}]}]}");
    t_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
              "\"image_url\",\"image_url\":{\"url\":\"ftp://x/a.png\"}}]}]}",
              "messages[0].content[0].image_url.url");
    t_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
              "\"image_url\",\"image_url\":{\"url\":\"data:image/png,abc\"}}]}]}",
              "base64");
}

static void
test_anthropic_request_tools_and_tool_choice(void **state)
{
    static const char *const choices[][2] = {
        {"\"auto\"", "{\"type\":\"auto\"}"},
        {"\"required\"", "{\"type\":\"any\"}"},
        {"\"none\"", "{\"type\":\"none\"}"},
        {"{\"type\":\"function\",\"function\":{\"name\":\"f\"}}",
         "{\"type\":\"tool\",\"name\":\"f\"}"},
    };
    char body[512], want[512];
    size_t i;

    (void)state;
    t_convert_eq("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"get\","
                 "\"description\":\"gets\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                 "\"q\":{\"type\":\"string\"}}},\"strict\":true}},{\"type\":\"function\","
                 "\"function\":{\"name\":\"noargs\"}}],\"parallel_tool_calls\":false}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
                 "\"content\":\"x\"}],\"tools\":[{\"name\":\"get\",\"description\":\"gets\","
                 "\"input_schema\":{\"type\":\"object\",\"properties\":{\"q\":{\"type\":"
                 "\"string\"}}}},{\"name\":\"noargs\",\"input_schema\":{\"type\":\"object\","
                 "\"properties\":{}}}],\"tool_choice\":{\"type\":\"auto\","
                 "\"disable_parallel_tool_use\":true}}");
    for (i = 0; i < sizeof(choices) / sizeof(choices[0]); i++) {
        snprintf(body, sizeof(body),
                 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
                 "\"tool_choice\":%s}",
                 choices[i][0]);
        snprintf(want, sizeof(want),
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"x\"}],\"tools\":[{\"name\":\"f\",\"input_schema\":{"
                 "\"type\":\"object\",\"properties\":{}}}],\"tool_choice\":%s}",
                 choices[i][1]);
        t_convert_eq(body, 0, want);
    }
    /* no tools declared: tool_choice is dropped */
    t_convert_eq("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"tool_choice\":\"auto\"}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"x\"}]}");
}

static void
test_anthropic_request_tool_calls_and_results_round_trip(void **state)
{
    (void)state;
    t_convert_eq(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"weather?\"},"
        "{\"role\":\"assistant\",\"content\":\"checking\",\"tool_calls\":["
        "{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"w\",\"arguments\":"
        "\"{\\\"city\\\":\\\"Oslo\\\"}\"}},{\"id\":\"call_2\",\"type\":\"function\",\"function\":"
        "{\"name\":\"t\",\"arguments\":\"\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"rain\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":[{\"type\":\"text\","
        "\"text\":\"12:00\"}]},{\"role\":\"user\",\"content\":\"thanks\"}]}",
        0,
        "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":["
        "{\"role\":\"user\",\"content\":\"weather?\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"checking\"},"
        "{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"w\",\"input\":{\"city\":\"Oslo\"}},"
        "{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"t\",\"input\":{}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\","
        "\"content\":\"rain\"},{\"type\":\"tool_result\",\"tool_use_id\":\"call_2\","
        "\"content\":[{\"type\":\"text\",\"text\":\"12:00\"}]},{\"type\":\"text\","
        "\"text\":\"thanks\"}]}]}");
    /* null content with tool calls: only tool_use blocks */
    t_convert_eq("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
                 "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"c\","
                 "\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}]}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":["
                 "{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\",\"content\":["
                 "{\"type\":\"tool_use\",\"id\":\"c\",\"name\":\"f\",\"input\":{}}]}]}");
}

static void
test_anthropic_request_refuses_tool_arguments_not_an_object(void **state)
{
    (void)state;
    t_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
              "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
              "\"function\":{\"name\":\"f\",\"arguments\":\"[1,2]\"}}]}]}",
              "messages[1].tool_calls[0].function.arguments");
    t_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
              "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
              "\"function\":{\"name\":\"f\",\"arguments\":\"{oops\"}}]}]}",
              "function.arguments");
}

static void
test_anthropic_request_sampling_clamps_temperature_drops_top_p_with_it_stop_and_user(void **state)
{
    (void)state;
    t_convert_eq("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"temperature\":1.5,\"top_p\":0.5,\"stop\":\"END\",\"user\":\"u1\"}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"x\"}],\"temperature\":1.0,"
                 "\"stop_sequences\":[\"END\"],\"metadata\":{\"user_id\":\"u1\"}}");
    /* top_p alone is copied; safety_identifier stands in for user */
    t_convert_eq("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"top_p\":0.5,\"safety_identifier\":\"s1\"}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"x\"}],\"top_p\":0.5,\"metadata\":{\"user_id\":"
                 "\"s1\"}}");
    t_convert_eq("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"temperature\":0,\"stop\":[\"a\",\"b\"]}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"x\"}],\"temperature\":0,\"stop_sequences\":[\"a\","
                 "\"b\"]}");
}

static void
test_anthropic_request_ignores_fields_without_equivalent(void **state)
{
    (void)state;
    t_convert_eq("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                 "\"frequency_penalty\":1,\"presence_penalty\":1,\"seed\":7,\"logit_bias\":{"
                 "\"1\":2},\"stream_options\":{\"include_usage\":true},\"store\":true,"
                 "\"metadata\":{\"a\":\"b\"},\"service_tier\":\"auto\",\"reasoning_effort\":"
                 "\"low\",\"n\":1,\"logprobs\":false,\"response_format\":{\"type\":\"text\"},"
                 "\"modalities\":[\"text\"]}",
                 0,
                 "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"x\"}]}");
}

static void
test_anthropic_request_refuses_what_messages_cannot_express(void **state)
{
    static const char *const cases[][2] = {
        {"\"n\":2", "n:"},
        {"\"logprobs\":true", "logprobs"},
        {"\"top_logprobs\":3", "top_logprobs"},
        {"\"response_format\":{\"type\":\"json_object\"}", "response_format"},
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{}}", "response_format"},
        {"\"audio\":{\"voice\":\"x\"}", "audio"},
        {"\"modalities\":[\"text\",\"audio\"]", "modalities[1]"},
        {"\"functions\":[{\"name\":\"f\"}]", "functions"},
        {"\"function_call\":\"auto\"", "function_call"},
        {"\"prediction\":{\"type\":\"content\",\"content\":\"x\"}", "prediction"},
        {"\"tools\":[{\"type\":\"custom\",\"custom\":{\"name\":\"x\"}}]", "tools[0]"},
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],"
         "\"tool_choice\":{\"type\":\"allowed_tools\"}",
         "tool_choice"},
    };
    char body[512];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(body, sizeof(body),
                 "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s}",
                 cases[i][0]);
        t_refused(body, cases[i][1]);
    }
}

static void
test_anthropic_request_refuses_unconvertible_messages(void **state)
{
    (void)state;
    t_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"content\":\"hi\"},"
              "{\"role\":\"user\",\"content\":\"x\"}]}",
              "start with a user message");
    t_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}",
              "at least one user message");
    t_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
              "\"input_audio\",\"input_audio\":{\"data\":\"x\",\"format\":\"wav\"}}]}]}",
              "messages[0].content[0]: input_audio");
    t_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
              "{\"role\":\"function\",\"name\":\"f\",\"content\":\"x\"}]}",
              "messages[1].role");
    t_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
              "{\"role\":\"tool\",\"content\":\"x\"}]}",
              "messages[1].tool_call_id");
    t_refused("[1]", "JSON object");
    t_refused("{nope", "not valid JSON");
}

static void
test_anthropic_request_refusal_message_never_quotes_the_body(void **state)
{
    struct gw_buf out = {0};
    char why[256];
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"SECRET\",\"content\":\"x\"}]}";

    (void)state;
    assert_int_equal(dl_anthropic_from_chat(body, strlen(body), T_MODEL, 0, &out, why, sizeof(why)),
                     GW_E_UNCONVERTIBLE);
    assert_null(strstr(why, "SECRET"));
    gw_buf_fini(&out);
}

static void
test_anthropic_request_appends_to_out(void **state)
{
    struct gw_buf out = {0};
    char why[64];
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}";

    (void)state;
    assert_int_equal(gw_buf_append_cstr(&out, "P"), GW_OK);
    assert_int_equal(dl_anthropic_from_chat(body, strlen(body), T_MODEL, 0, &out, why, sizeof(why)),
                     GW_OK);
    assert_true(out.data[0] == 'P');
    t_json_eq(out.data + 1, out.len - 1,
              "{\"model\":\"claude-test\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
              "\"content\":\"x\"}]}");
    gw_buf_fini(&out);
}

/* ---- answer ---- */

static void
test_anthropic_answer_converts_text_tool_use_and_usage(void **state)
{
    struct gw_buf out = {0};
    struct gw_usage u;
    const char *body =
        "{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\","
        "\"content\":[{\"type\":\"thinking\",\"thinking\":\"hmm\",\"signature\":\"s\"},"
        "{\"type\":\"text\",\"text\":\"Hello \"},{\"type\":\"text\",\"text\":\"there\"},"
        "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get\",\"input\":{\"q\":\"a b\","
        "\"n\":[1,2]}}],\"stop_reason\":\"tool_use\",\"stop_sequence\":null,\"usage\":{"
        "\"input_tokens\":10,\"output_tokens\":20,\"cache_creation_input_tokens\":3,"
        "\"cache_read_input_tokens\":5}}";

    (void)state;
    assert_int_equal(dl_anthropic_answer_to_chat(body, strlen(body), 1700000000, &out, &u), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"id\":\"chatcmpl-msg_1\",\"object\":\"chat.completion\",\"created\":1700000000,"
              "\"model\":\"claude-x\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
              "\"assistant\",\"content\":\"Hello there\",\"tool_calls\":[{\"id\":\"toolu_1\","
              "\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":"
              "\"{\\\"q\\\":\\\"a b\\\",\\\"n\\\":[1,2]}\"}}]},\"logprobs\":null,"
              "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":18,"
              "\"completion_tokens\":20,\"total_tokens\":38,\"prompt_tokens_details\":{"
              "\"cached_tokens\":5}}}");
    assert_int_equal(u.input_tokens, 10);
    assert_int_equal(u.output_tokens, 20);
    assert_int_equal(u.cache_read_tokens, 5);
    assert_int_equal(u.cache_write_tokens, 3);
    gw_buf_fini(&out);
}

static void
test_anthropic_answer_finish_reasons_and_null_content(void **state)
{
    static const char *const reasons[][2] = {
        {"end_turn", "stop"},     {"stop_sequence", "stop"},  {"pause_turn", "stop"},
        {"max_tokens", "length"}, {"tool_use", "tool_calls"}, {"refusal", "content_filter"},
    };
    char body[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        struct gw_buf out = {0};
        struct gw_usage u;
        json_t *j;

        snprintf(body, sizeof(body),
                 "{\"id\":\"m\",\"type\":\"message\",\"model\":\"c\",\"content\":[],"
                 "\"stop_reason\":\"%s\"}",
                 reasons[i][0]);
        assert_int_equal(dl_anthropic_answer_to_chat(body, strlen(body), 1, &out, &u), GW_OK);
        j = json_loadb(out.data, out.len, 0, NULL);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(
                                json_array_get(json_object_get(j, "choices"), 0), "finish_reason")),
                            reasons[i][1]);
        /* no text block: content null, no tool_calls, no usage */
        assert_true(json_is_null(json_object_get(
            json_object_get(json_array_get(json_object_get(j, "choices"), 0), "message"),
            "content")));
        assert_null(json_object_get(j, "usage"));
        assert_int_equal(u.input_tokens + u.output_tokens, 0);
        json_decref(j);
        gw_buf_fini(&out);
    }
}

static void
test_anthropic_answer_refuses_what_is_not_a_messages_answer(void **state)
{
    static const char *const bodies[] = {
        "not json",
        "[]",
        "{\"type\":\"message\"}",
        "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"x\"},\"content\":[]}",
        "{\"content\":[1]}",
        "{\"content\":[{\"type\":\"text\"}]}",
        "{\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"b\"}]}",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        struct gw_buf out = {0};
        struct gw_usage u;

        assert_int_equal(gw_buf_append_cstr(&out, "keep"), GW_OK);
        assert_int_equal(dl_anthropic_answer_to_chat(bodies[i], strlen(bodies[i]), 1, &out, &u),
                         GW_E_UPSTREAM_PROTOCOL);
        assert_string_equal(out.data, "keep");
        gw_buf_fini(&out);
    }
}

/* ---- errors ---- */

static void
t_error(const char *body, int status, const char *want)
{
    struct gw_buf out = {0};

    dl_anthropic_error_to_chat(body, strlen(body), status, &out);
    t_json_eq(out.data, out.len, want);
    gw_buf_fini(&out);
}

static void
test_anthropic_error_maps_types_to_openai(void **state)
{
    static const char *const map[][3] = {
        {"invalid_request_error", "invalid_request_error", "null"},
        {"authentication_error", "authentication_error", "null"},
        {"permission_error", "permission_error", "null"},
        {"not_found_error", "not_found_error", "null"},
        {"rate_limit_error", "requests", "\"rate_limit_exceeded\""},
        {"overloaded_error", "server_error", "null"},
        {"api_error", "server_error", "null"},
        {"billing_error", "insufficient_quota", "\"insufficient_quota\""},
    };
    char body[256], want[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        snprintf(body, sizeof(body),
                 "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"why \\\"q\\\"\"}}",
                 map[i][0]);
        snprintf(want, sizeof(want),
                 "{\"error\":{\"message\":\"why \\\"q\\\"\",\"type\":\"%s\",\"param\":null,"
                 "\"code\":%s}}",
                 map[i][1], map[i][2]);
        t_error(body, 400, want);
    }
}

static void
test_anthropic_error_not_anthropic_body_uses_status(void **state)
{
    (void)state;
    t_error("<html>bad gateway</html>", 502,
            "{\"error\":{\"message\":\"the upstream answered HTTP 502\",\"type\":\"server_error\","
            "\"param\":null,\"code\":null}}");
    t_error("", 429,
            "{\"error\":{\"message\":\"the upstream answered HTTP 429\",\"type\":\"requests\","
            "\"param\":null,\"code\":\"rate_limit_exceeded\"}}");
    t_error("{\"type\":\"error\",\"error\":{\"type\":\"something_new\"}}", 404,
            "{\"error\":{\"message\":\"the upstream answered HTTP 404\",\"type\":"
            "\"not_found_error\",\"param\":null,\"code\":null}}");
}

/* ---- stream ---- */

struct t_event {
    const char *name;
    const char *data;
};

/* Feeds <n> events, expecting GW_OK each, into <out>. */
static void
t_feed(struct dl_anthropic_stream *st, const struct t_event *ev, size_t n, struct gw_buf *out)
{
    size_t i;

    for (i = 0; i < n; i++)
        assert_int_equal(
            dl_anthropic_stream_event(st, gw_str_c(ev[i].name), gw_str_c(ev[i].data), out), GW_OK);
}

/* Splits <sse> into its "data: " payloads; returns how many (at most <max>). */
static size_t
t_split(const struct gw_buf *sse, struct gw_str *v, size_t max)
{
    size_t n = 0, i = 0;

    while (i < sse->len && n < max) {
        const char *end = strstr(sse->data + i, "\n\n");

        assert_non_null(end);
        assert_memory_equal(sse->data + i, "data: ", 6);
        v[n].ptr = sse->data + i + 6;
        v[n].len = (size_t)(end - v[n].ptr);
        n++;
        i = (size_t)(end - sse->data) + 2;
    }
    assert_int_equal(i, sse->len);
    return n;
}

static const struct t_event t_text_stream[] = {
    {"message_start",
     "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_9\",\"type\":\"message\",\"role\":"
     "\"assistant\",\"content\":[],\"model\":\"claude-y\",\"stop_reason\":null,\"usage\":{"
     "\"input_tokens\":25,\"output_tokens\":1,\"cache_read_input_tokens\":7,"
     "\"cache_creation_input_tokens\":2}}}"},
    {"content_block_start",
     "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\","
     "\"text\":\"\"}}"},
    {"ping", "{\"type\":\"ping\"}"},
    {"content_block_delta",
     "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
     "\"text\":\"Hel\"}}"},
    {"content_block_delta",
     "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\","
     "\"text\":\"lo\\n\"}}"},
    {"content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}"},
    {"message_delta",
     "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":"
     "null},\"usage\":{\"output_tokens\":15}}"},
    {"message_stop", "{\"type\":\"message_stop\"}"},
};

static void
test_anthropic_stream_text_converts_to_chat_chunks(void **state)
{
    struct dl_anthropic_stream st;
    struct gw_buf out = {0};
    struct gw_str c[16];
    size_t n;

    (void)state;
    dl_anthropic_stream_init(&st, 1700000001);
    t_feed(&st, t_text_stream, sizeof(t_text_stream) / sizeof(t_text_stream[0]), &out);
    n = t_split(&out, c, 16);
    assert_int_equal(n, 6);
    t_json_eq(c[0].ptr, c[0].len,
              "{\"id\":\"chatcmpl-msg_9\",\"object\":\"chat.completion.chunk\",\"created\":"
              "1700000001,\"model\":\"claude-y\",\"choices\":[{\"index\":0,\"delta\":{\"role\":"
              "\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}");
    t_json_eq(c[1].ptr, c[1].len,
              "{\"id\":\"chatcmpl-msg_9\",\"object\":\"chat.completion.chunk\",\"created\":"
              "1700000001,\"model\":\"claude-y\",\"choices\":[{\"index\":0,\"delta\":{"
              "\"content\":\"Hel\"},\"finish_reason\":null}]}");
    t_json_eq(c[2].ptr, c[2].len,
              "{\"id\":\"chatcmpl-msg_9\",\"object\":\"chat.completion.chunk\",\"created\":"
              "1700000001,\"model\":\"claude-y\",\"choices\":[{\"index\":0,\"delta\":{"
              "\"content\":\"lo\\n\"},\"finish_reason\":null}]}");
    t_json_eq(c[3].ptr, c[3].len,
              "{\"id\":\"chatcmpl-msg_9\",\"object\":\"chat.completion.chunk\",\"created\":"
              "1700000001,\"model\":\"claude-y\",\"choices\":[{\"index\":0,\"delta\":{},"
              "\"finish_reason\":\"stop\"}]}");
    t_json_eq(c[4].ptr, c[4].len,
              "{\"id\":\"chatcmpl-msg_9\",\"object\":\"chat.completion.chunk\",\"created\":"
              "1700000001,\"model\":\"claude-y\",\"choices\":[],\"usage\":{\"prompt_tokens\":34,"
              "\"completion_tokens\":15,\"total_tokens\":49,\"prompt_tokens_details\":{"
              "\"cached_tokens\":7}}}");
    assert_true(gw_str_eq(c[5], GW_STR_LIT("[DONE]")));
    assert_true(st.stopped);
    assert_true(st.usage_seen);
    assert_int_equal(st.usage.input_tokens, 25);
    assert_int_equal(st.usage.output_tokens, 15);
    assert_int_equal(st.usage.cache_read_tokens, 7);
    assert_int_equal(st.usage.cache_write_tokens, 2);
    /* after message_stop nothing more is written */
    gw_buf_reset(&out);
    t_feed(&st, t_text_stream + 3, 1, &out);
    assert_int_equal(out.len, 0);
    gw_buf_fini(&out);
}

static void
test_anthropic_stream_chunks_read_by_openai_inspector(void **state)
{
    struct dl_anthropic_stream st;
    struct dl_openai_chunk ck;
    struct gw_buf out = {0};
    struct gw_str c[16];
    size_t n;

    (void)state;
    dl_anthropic_stream_init(&st, 5);
    t_feed(&st, t_text_stream, sizeof(t_text_stream) / sizeof(t_text_stream[0]), &out);
    n = t_split(&out, c, 16);
    assert_int_equal(n, 6);
    /* role chunk: no content */
    assert_int_equal(dl_openai_chunk_inspect(c[0], &ck), GW_OK);
    assert_false(ck.has_content);
    assert_false(ck.is_error);
    assert_false(ck.has_usage);
    /* text delta: content with its bytes */
    assert_int_equal(dl_openai_chunk_inspect(c[1], &ck), GW_OK);
    assert_true(ck.has_content);
    assert_int_equal(ck.content_bytes, 3);
    assert_int_equal(dl_openai_chunk_inspect(c[2], &ck), GW_OK);
    assert_int_equal(ck.content_bytes, 3);
    /* finish chunk: nothing */
    assert_int_equal(dl_openai_chunk_inspect(c[3], &ck), GW_OK);
    assert_false(ck.has_content);
    assert_false(ck.has_usage);
    /* usage chunk: usage only; the inspector folds cache creation into input */
    assert_int_equal(dl_openai_chunk_inspect(c[4], &ck), GW_OK);
    assert_true(ck.has_usage);
    assert_true(ck.usage_only);
    assert_int_equal(ck.usage.input_tokens, 27);
    assert_int_equal(ck.usage.cache_read_tokens, 7);
    assert_int_equal(ck.usage.output_tokens, 15);
    assert_int_equal(dl_openai_chunk_inspect(c[5], &ck), GW_OK);
    assert_true(ck.done);
    gw_buf_fini(&out);
}

static void
test_anthropic_stream_tool_call_opens_and_streams_arguments(void **state)
{
    static const struct t_event ev[] = {
        {"message_start", "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_t\",\"model\":"
                          "\"c\",\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}"},
        {"content_block_start", "{\"type\":\"content_block_start\",\"index\":0,"
                                "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}"},
        {"content_block_delta", "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{"
                                "\"type\":\"text_delta\",\"text\":\"ok\"}}"},
        {"content_block_stop", "{\"type\":\"content_block_stop\",\"index\":0}"},
        {"content_block_start",
         "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":"
         "\"tool_use\",\"id\":\"toolu_7\",\"name\":\"get\",\"input\":{}}}"},
        {"content_block_delta", "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{"
                                "\"type\":\"input_json_delta\",\"partial_json\":\"\"}}"},
        {"content_block_delta", "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{"
                                "\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\":\"}}"},
        {"content_block_delta", "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":{"
                                "\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}"},
        {"content_block_stop", "{\"type\":\"content_block_stop\",\"index\":1}"},
        {"content_block_start",
         "{\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":"
         "\"tool_use\",\"id\":\"toolu_8\",\"name\":\"put\",\"input\":{}}}"},
        {"content_block_stop", "{\"type\":\"content_block_stop\",\"index\":2}"},
        {"message_delta", "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},"
                          "\"usage\":{\"output_tokens\":9}}"},
        {"message_stop", "{\"type\":\"message_stop\"}"},
    };
    struct dl_anthropic_stream st;
    struct dl_openai_chunk ck;
    struct gw_buf out = {0};
    struct gw_str c[16];
    size_t n;

    (void)state;
    dl_anthropic_stream_init(&st, 9);
    t_feed(&st, ev, sizeof(ev) / sizeof(ev[0]), &out);
    n = t_split(&out, c, 16);
    assert_int_equal(n, 9);
    t_json_eq(c[2].ptr, c[2].len,
              "{\"id\":\"chatcmpl-msg_t\",\"object\":\"chat.completion.chunk\",\"created\":9,"
              "\"model\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
              "\"id\":\"toolu_7\",\"type\":\"function\",\"function\":{\"name\":\"get\","
              "\"arguments\":\"\"}}]},\"finish_reason\":null}]}");
    t_json_eq(c[3].ptr, c[3].len,
              "{\"id\":\"chatcmpl-msg_t\",\"object\":\"chat.completion.chunk\",\"created\":9,"
              "\"model\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
              "\"function\":{\"arguments\":\"{\\\"q\\\":\"}}]},\"finish_reason\":null}]}");
    t_json_eq(c[4].ptr, c[4].len,
              "{\"id\":\"chatcmpl-msg_t\",\"object\":\"chat.completion.chunk\",\"created\":9,"
              "\"model\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,"
              "\"function\":{\"arguments\":\"1}\"}}]},\"finish_reason\":null}]}");
    t_json_eq(c[5].ptr, c[5].len,
              "{\"id\":\"chatcmpl-msg_t\",\"object\":\"chat.completion.chunk\",\"created\":9,"
              "\"model\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,"
              "\"id\":\"toolu_8\",\"type\":\"function\",\"function\":{\"name\":\"put\","
              "\"arguments\":\"\"}}]},\"finish_reason\":null}]}");
    t_json_eq(c[6].ptr, c[6].len,
              "{\"id\":\"chatcmpl-msg_t\",\"object\":\"chat.completion.chunk\",\"created\":9,"
              "\"model\":\"c\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
              "\"tool_calls\"}]}");
    /* the inspector counts the arguments as content */
    assert_int_equal(dl_openai_chunk_inspect(c[4], &ck), GW_OK);
    assert_true(ck.has_content);
    assert_int_equal(ck.content_bytes, 2);
    assert_int_equal(st.usage.output_tokens, 9);
    assert_true(gw_str_eq(c[8], GW_STR_LIT("[DONE]")));
    gw_buf_fini(&out);
}

static void
test_anthropic_stream_error_event_ends_stream_with_error_chunk(void **state)
{
    struct dl_anthropic_stream st;
    struct dl_openai_chunk ck;
    struct gw_buf out = {0};
    struct gw_str c[4];

    (void)state;
    dl_anthropic_stream_init(&st, 1);
    t_feed(&st, t_text_stream, 1, &out);
    gw_buf_reset(&out);
    assert_int_equal(
        dl_anthropic_stream_event(&st, GW_STR_LIT("error"),
                                  GW_STR_LIT("{\"type\":\"error\",\"error\":{\"type\":"
                                             "\"overloaded_error\",\"message\":\"Overloaded\"}}"),
                                  &out),
        GW_OK);
    assert_int_equal(t_split(&out, c, 4), 1);
    t_json_eq(c[0].ptr, c[0].len,
              "{\"error\":{\"message\":\"Overloaded\",\"type\":\"server_error\",\"param\":null,"
              "\"code\":null}}");
    assert_int_equal(dl_openai_chunk_inspect(c[0], &ck), GW_OK);
    assert_true(ck.is_error);
    assert_true(st.failed);
    assert_false(st.stopped);
    /* no [DONE] after the error, whatever follows */
    gw_buf_reset(&out);
    t_feed(&st, t_text_stream + 3, 5, &out);
    assert_int_equal(out.len, 0);
    gw_buf_fini(&out);
}

static void
test_anthropic_stream_without_event_names_reads_data_type(void **state)
{
    struct dl_anthropic_stream st;
    struct gw_buf out = {0}, named = {0};
    size_t i;

    (void)state;
    dl_anthropic_stream_init(&st, 3);
    for (i = 0; i < sizeof(t_text_stream) / sizeof(t_text_stream[0]); i++)
        assert_int_equal(
            dl_anthropic_stream_event(&st, GW_STR_LIT(""), gw_str_c(t_text_stream[i].data), &out),
            GW_OK);
    dl_anthropic_stream_init(&st, 3);
    t_feed(&st, t_text_stream, sizeof(t_text_stream) / sizeof(t_text_stream[0]), &named);
    assert_int_equal(out.len, named.len);
    assert_memory_equal(out.data, named.data, out.len);
    gw_buf_fini(&out);
    gw_buf_fini(&named);
}

static void
test_anthropic_stream_malformed_events_are_upstream_protocol(void **state)
{
    static const struct t_event bad[] = {
        {"message_start", "not json"},
        {"message_start", "{\"type\":\"message_start\"}"},
        {"message_start", "[1]"},
        {"content_block_start", "{\"index\":0}"},
        {"content_block_start", "{\"content_block\":{\"type\":\"tool_use\",\"id\":1}}"},
        {"content_block_delta", "{\"delta\":{\"type\":\"text_delta\"}}"},
        {"content_block_delta", "{\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":2}}"},
        {"content_block_delta", "{\"delta\":\"x\"}"},
        {"message_delta", "{\"delta\":[],\"usage\":{}}"},
        {"error", "{\"type\":\"error\"}"},
        {"error", ""},
        {"", "{\"type\":\"content_block_delta\"}"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct dl_anthropic_stream st;
        struct gw_buf out = {0};

        dl_anthropic_stream_init(&st, 1);
        if (strcmp(bad[i].name, "message_start") != 0)
            t_feed(&st, t_text_stream, 1, &out);
        gw_buf_reset(&out);
        if (dl_anthropic_stream_event(&st, gw_str_c(bad[i].name), gw_str_c(bad[i].data), &out) !=
            GW_E_UPSTREAM_PROTOCOL) {
            print_error("case %zu (%s) not refused\n", i, bad[i].name);
            fail();
        }
        assert_int_equal(out.len, 0);
        gw_buf_fini(&out);
    }
}

static void
test_anthropic_stream_ignores_ping_thinking_and_unknown_events(void **state)
{
    static const struct t_event ev[] = {
        {"ping", "garbage"},
        {"content_block_start", "{\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}"},
        {"content_block_delta", "{\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}"},
        {"content_block_delta", "{\"delta\":{\"type\":\"signature_delta\",\"signature\":\"s\"}}"},
        {"content_block_stop", ""},
        {"brand_new_event", "whatever"},
        {"content_block_start", "{\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"s\","
                                "\"name\":\"web_search\"}}"},
        {"content_block_delta", "{\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":"
                                "\"{}\"}}"},
        {"message_delta", "{\"delta\":{\"stop_reason\":null}}"},
    };
    struct dl_anthropic_stream st;
    struct gw_buf out = {0};

    (void)state;
    dl_anthropic_stream_init(&st, 1);
    t_feed(&st, t_text_stream, 1, &out);
    gw_buf_reset(&out);
    t_feed(&st, ev, sizeof(ev) / sizeof(ev[0]), &out);
    assert_int_equal(out.len, 0);
    assert_int_equal(st.tool_index, -1);
    gw_buf_fini(&out);
}

static void
test_anthropic_stream_without_usage_writes_no_usage_chunk(void **state)
{
    struct dl_anthropic_stream st;
    struct gw_buf out = {0};

    (void)state;
    dl_anthropic_stream_init(&st, 1);
    t_feed(&st,
           (const struct t_event[]){
               {"message_start", "{\"message\":{\"id\":\"a\",\"model\":\"b\"}}"},
               {"message_stop", ""},
           },
           2, &out);
    assert_false(st.usage_seen);
    assert_non_null(strstr(out.data, "\"role\":\"assistant\""));
    assert_null(strstr(out.data, "usage"));
    assert_non_null(strstr(out.data, "data: [DONE]\n\n"));
    gw_buf_fini(&out);
}

static void
test_anthropic_stream_long_id_is_cut_to_fit(void **state)
{
    struct dl_anthropic_stream st;
    struct gw_buf out = {0};
    char data[512];

    (void)state;
    snprintf(data, sizeof(data), "{\"message\":{\"id\":\"%0200d\",\"model\":\"m\"}}", 7);
    dl_anthropic_stream_init(&st, 1);
    assert_int_equal(
        dl_anthropic_stream_event(&st, GW_STR_LIT("message_start"), gw_str_c(data), &out), GW_OK);
    assert_int_equal(strlen(st.id), sizeof(st.id) - 1);
    assert_memory_equal(st.id, "chatcmpl-000", 12);
    gw_buf_fini(&out);
}

static void
test_anthropic_out_of_memory_is_clean(void **state)
{
    const char *body =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},{\"role\":\"user\","
        "\"content\":\"a\"},{\"role\":\"user\",\"content\":\"b\"}],\"tools\":[{\"type\":"
        "\"function\",\"function\":{\"name\":\"f\"}}]}";
    unsigned long k;

    (void)state;
    /* gw_malloc failures (jansson allocates with malloc): each ends in GW_OK or NOMEM */
    for (k = 1; k < 40; k++) {
        struct dl_anthropic_stream st;
        struct gw_buf out = {0};
        char why[128];
        enum gw_code rc;

        gw_alloc_fail_at(k);
        rc = dl_anthropic_from_chat(body, strlen(body), T_MODEL, 0, &out, why, sizeof(why));
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || rc == GW_E_NOMEM);
        gw_buf_fini(&out);
        dl_anthropic_stream_init(&st, 1);
        gw_alloc_fail_at(k);
        rc = dl_anthropic_stream_event(&st, gw_str_c(t_text_stream[0].name),
                                       gw_str_c(t_text_stream[0].data), &out);
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || rc == GW_E_NOMEM);
        if (rc != GW_OK)
            assert_int_equal(out.len, 0);
        gw_buf_fini(&out);
    }
}

/* ---- fast routes: shapes at their edges ---- */

/* Data payloads the fast routes must treat exactly as the jansson routes do: escapes,
 * duplicate and unknown keys, odd types, malformed JSON. */
static const char *const t_edge_data[] = {
    "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":"
    "\"a\\n\\\"b\\u00e9\\ud83d\\ude00\\/\\u0000\\u001f\\b\\f\\t\\r\\\\\"}}",
    "{\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"},\"delta\":{\"type\":\"text_delta\","
    "\"text\":\"y\"}}",
    "{\"delta\":{\"type\":\"text_delta\",\"text\":\"x\",\"text\":\"z\",\"extra\":[1,{\"a\":null}]}"
    "}",
    "{\"delta\":{\"type\":\"input_json_delta\",\"type\":\"text_delta\",\"text\":\"t\"}}",
    "{\"delta\":{\"text\":\"t\",\"type\":\"text_delta\"},\"index\":1.5e3,\"more\":true}",
    " \n{ \"delta\" : { \"type\" : \"text_\\u0064elta\" , \"text\" : \"sp\" } } \t",
    "{\"delta\":{\"type\":\"text_delta\",\"text\":\"\"}}",
    "{\"delta\":{\"type\":\"text_delta\",\"text\":null}}",
    "{\"delta\":{\"type\":\"text_delta\"}}",
    "{\"delta\":{\"type\":5,\"text\":\"a\"}}",
    "{\"delta\":null}",
    "{\"delta\":[]}",
    "{\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\":1\"}}",
    "{\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}",
    "{\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":7}}",
    "{\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hmm\"}}",
    "{\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}} x",
    "{\"delta\":{\"type\":\"text_delta\",\"text\":\"\xff\"}}",
    "{\"delta\":{\"type\":\"text_delta\",\"text\":\"a\",\"n\":99999999999999999999}}",
    "{\"delta\":{\"type\":\"text_delta\",\"text\":\"a\",\"r\":1e999}}",
    "{\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}",
    "{\"de\\u0000lta\":{}}",
    "[{\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}]",
    "",
    "{\"delta\":{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":{"
    "\"output_tokens\":15}}",
    "{\"delta\":{\"stop_reason\":\"max_\\u0074okens\"},\"usage\":{\"input_tokens\":-3,"
    "\"output_tokens\":1.5,\"cache_read_input_tokens\":\"7\",\"cache_creation_input_tokens\":"
    "9223372036854775807}}",
    "{\"delta\":{\"stop_reason\":\"model_context_window_exceeded\"},\"usage\":{\"input_tokens\":"
    "-0,\"input_tokens\":4,\"output_tokens\":2,\"output_tokens\":null}}",
    "{\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":null}",
    "{\"delta\":{\"stop_reason\":\"refusal\"},\"usage\":[]}",
    "{\"delta\":{\"stop_reason\":\"pause_turn\"}}",
    "{\"delta\":{\"stop_reason\":null},\"usage\":{\"output_tokens\":3}}",
    "{\"delta\":{\"stop_reason\":5}}",
    "{\"delta\":5}",
    "{\"usage\":{}}",
    "{}",
    "{\"message\":{\"id\":\"msg_\\u00e9\\n\",\"model\":\"claude-\\\"q\\\"\",\"usage\":{"
    "\"input_tokens\":25,\"output_tokens\":1,\"cache_read_input_tokens\":2}}}",
    "{\"message\":{\"id\":5,\"model\":null,\"usage\":7}}",
    "{\"message\":{\"id\":\"a\",\"id\":\"b\",\"usage\":null}}",
    "{\"message\":{\"id\":\"0123456789012345678901234567890123456789012345678901234567\\u00e9"
    "\\u00e9\\u00e9\"}}",
    "{\"message\":null}",
    "{\"message\":\"m\"}",
    "{\"content_block\":{\"type\":\"text\",\"text\":\"pre\\tfix\"}}",
    "{\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
    "{\"content_block\":{\"type\":\"text\"}}",
    "{\"content_block\":{\"type\":\"text\",\"text\":null}}",
    "{\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}",
    "{\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}",
    "{\"content_block\":{\"type\":\"tool_\\u0075se\",\"id\":\"t\",\"name\":\"f\"}}",
    "{\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"t\",\"name\":\"f\"}}",
    "{\"content_block\":{\"text\":\"a\"}}",
    "{\"content_block\":[]}",
    "{\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"u\"}}",
    "{\"type\":\"message_stop\"}",
    "{\"type\":\"ping\"}",
    "{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"o\"}}",
};

/* Every edge payload under every event name, on a fresh, a started and a tool stream:
 * the fast and the jansson routes agree (t_stream_event asserts it). */
static void
test_anthropic_fast_stream_matches_jansson_on_edge_events(void **state)
{
    static const char *const names[] = {
        "",      "message_start", "content_block_start", "content_block_delta",
        "ping",  "message_delta", "content_block_stop",  "message_stop",
        "error", "other",
    };
    size_t i, k, s;

    (void)state;
    for (s = 0; s < 3; s++)
        for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            for (i = 0; i < sizeof(t_edge_data) / sizeof(t_edge_data[0]); i++) {
                struct dl_anthropic_stream st;
                struct gw_buf out = {0};

                dl_anthropic_stream_init(&st, 1700000000);
                if (s > 0)
                    (void)dl_anthropic_stream_event(
                        &st, GW_STR_LIT("message_start"),
                        GW_STR_LIT("{\"message\":{\"id\":\"m\",\"model\":\"c\"}}"), &out);
                if (s > 1)
                    (void)dl_anthropic_stream_event(
                        &st, GW_STR_LIT("content_block_start"),
                        GW_STR_LIT("{\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\","
                                   "\"name\":\"f\"}}"),
                        &out);
                (void)dl_anthropic_stream_event(&st, gw_str_c(names[k]), gw_str_c(t_edge_data[i]),
                                                &out);
                gw_buf_fini(&out);
            }
}

/* A text delta longer than the fast route's stack copy, full of escapes. */
static void
test_anthropic_fast_stream_long_escaped_text_delta(void **state)
{
    struct dl_anthropic_stream st;
    struct gw_buf data = {0}, out = {0};
    size_t i;

    (void)state;
    assert_int_equal(gw_buf_append_cstr(&data, "{\"delta\":{\"type\":\"text_delta\",\"text\":\""),
                     GW_OK);
    for (i = 0; i < 400; i++)
        assert_int_equal(gw_buf_append_cstr(&data, "\\u00e9\\n\\\"x"), GW_OK);
    assert_int_equal(gw_buf_append_cstr(&data, "\"}}"), GW_OK);
    dl_anthropic_stream_init(&st, 1);
    assert_int_equal(dl_anthropic_stream_event(&st, GW_STR_LIT("content_block_delta"),
                                               (struct gw_str){data.data, data.len}, &out),
                     GW_OK);
    assert_non_null(strstr(out.data, "{\"content\":\"\xc3\xa9\\n\\\"x\xc3\xa9\\n"));
    gw_buf_fini(&data);
    gw_buf_fini(&out);
}

/* Answers the fast route must treat exactly as the jansson route does. */
static const char *const t_edge_answers[] = {
    "{\"id\":\"msg_1\",\"type\":\"message\",\"model\":\"claude-x\",\"content\":[{\"type\":"
    "\"text\",\"text\":\"Hi \\\"you\\\"\\n\\u0001\\u001f\\b\\f\\/\\u00e9\\ud83d\\ude00\"}],"
    "\"stop_reason\":\"end_turn\",\"usage\":{\"input_tokens\":10,\"output_tokens\":20}}",
    "{\"content\":[{\"type\":\"text\",\"text\":\"\"}]}",
    "{\"content\":[{\"type\":\"thinking\",\"thinking\":\"x\"},{\"type\":\"text\",\"text\":\"a\"},"
    "{\"type\":\"redacted_thinking\"},{\"type\":\"text\",\"text\":\"b\",\"citations\":[]}]}",
    "{\"content\":[{\"type\":\"thinking\"}],\"stop_reason\":\"refusal\"}",
    "{\"content\":[],\"type\":null}",
    "{\"content\":[],\"type\":\"other\"}",
    "{\"content\":[],\"type\":\"mess\\u0061ge\",\"id\":7,\"model\":[1]}",
    "{\"content\":{},\"content\":[{\"type\":\"text\",\"text\":\"last\"}]}",
    "{\"content\":[{\"type\":\"text\",\"text\":\"first\"}],\"content\":{}}",
    "{\"content\":[{\"type\":\"text\",\"text\":5}]}",
    "{\"content\":[{\"type\":\"text\",\"text\":null}]}",
    "{\"content\":[{\"type\":7}]}",
    "{\"content\":[{\"text\":\"a\"}]}",
    "{\"content\":[\"a\"]}",
    "{\"content\":[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"b\",\"input\":{\"x\":0.1}}]}",
    "{\"content\":[{\"type\":\"text\",\"text\":\"a\"}],\"usage\":{\"input_tokens\":"
    "9223372036854775807,\"cache_read_input_tokens\":9223372036854775807,\"output_tokens\":"
    "9223372036854775807,\"cache_creation_input_tokens\":1}}",
    "{\"content\":[],\"usage\":{\"input_tokens\":1.0,\"output_tokens\":-1,\"output_tokens\":3}}",
    "{\"content\":[],\"usage\":null,\"stop_reason\":\"max_tokens\"}",
    "{\"content\":[],\"usage\":\"u\",\"stop_reason\":null}",
    "{\"content\":[],\"stop_reason\":\"tool_\\u0075se\",\"model\":\"m\\u0000n\"}",
    "{\"content\":[{\"type\":\"text\",\"text\":\"a\"}]} x",
    "{\"content\":[{\"type\":\"text\",\"text\":\"a\"},]}",
    "{\"content\":[1e999]}",
    "[]",
    "",
};

static void
test_anthropic_fast_answer_matches_jansson_on_edge_answers(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(t_edge_answers) / sizeof(t_edge_answers[0]); i++) {
        struct gw_buf out = {0};
        struct gw_usage u;

        assert_int_equal(gw_buf_append_cstr(&out, "keep"), GW_OK);
        (void)dl_anthropic_answer_to_chat(t_edge_answers[i], strlen(t_edge_answers[i]),
                                          UINT64_MAX - (uint64_t)i, &out, &u);
        assert_memory_equal(out.data, "keep", 4);
        gw_buf_fini(&out);
    }
}

/* The fast route decodes escapes and writes them back as jansson does. */
static void
test_anthropic_fast_answer_reescapes_like_jansson(void **state)
{
    const char *body = "{\"id\":\"m\\u0031\",\"model\":\"c\",\"content\":[{\"type\":\"text\","
                       "\"text\":\"a\\/b\\u0001\\u00e9\"}]}";
    struct gw_buf out = {0};
    struct gw_usage u;

    (void)state;
    assert_int_equal(dl_anthropic_answer_to_chat(body, strlen(body), 5, &out, &u), GW_OK);
    assert_string_equal(out.data,
                        "{\"id\":\"chatcmpl-m1\",\"object\":\"chat.completion\",\"created\":5,"
                        "\"model\":\"c\",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                        "\"assistant\",\"content\":\"a/b\\u0001\xc3\xa9\"},\"logprobs\":null,"
                        "\"finish_reason\":null}]}");
    gw_buf_fini(&out);
}

/* Requests the fast route must treat exactly as the jansson route does. */
static const char *const t_edge_requests[] = {
    "{\"model\":\"gpt\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello.\"}]}",
    "{\"model\":\"gpt\",\"stream\":true,\"stream_options\":{\"include_usage\":true},\"max_tokens\":"
    "64,\"messages\":[{\"role\":\"system\",\"content\":\"be \\\"brief\\\"\\n\"},{\"role\":\"user\","
    "\"content\":\"a\\u00e9\\/\\u0001\\b\\f\\t\\r\\ud83d\\ude00\"}]}",
    "{\"messages\":[{\"role\":\"developer\",\"content\":\"d\"},{\"role\":\"user\",\"content\":"
    "\"u1\"},"
    "{\"role\":\"system\",\"content\":\"\"},{\"role\":\"system\",\"content\":\"s2\"},{\"role\":"
    "\"user\",\"content\":\"\"},{\"role\":\"user\",\"content\":\"u3\",\"name\":\"bob\"},{\"role\":"
    "\"assistant\",\"content\":\"a1\"},{\"role\":\"user\",\"content\":\"\"},{\"role\":"
    "\"assistant\","
    "\"content\":\"\"},{\"role\":\"assistant\",\"content\":\"\"}],\"stream\":false}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"\"}],\"max_completion_tokens\":5,"
    "\"max_tokens\":9,\"seed\":1,\"store\":false,\"metadata\":{\"a\":\"b\"},\"frequency_penalty\":"
    "0.1,\"presence_penalty\":-2e-3,\"logit_bias\":{\"1\":2},\"service_tier\":\"auto\","
    "\"reasoning_effort\":\"low\",\"verbosity\":\"low\",\"prompt_cache_key\":\"k\"}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":null,"
    "\"max_completion_tokens\":null}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":9223372036854775807}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-1}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1.5}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"5\"}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":5,\"max_tokens\":6}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,\"stream\":false}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":false,\"stream\":true}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":\"true\"}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"messages\":[{\"role\":\"user\","
    "\"content\":\"y\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"x\",\"content\":\"y\",\"role\":\"user\"}]}",
    "{\"messages\":[{\"role\":\"assistant\",\"content\":\"x\"}]}",
    "{\"messages\":[{\"role\":\"system\",\"content\":\"x\"}]}",
    "{\"messages\":[]}",
    "{\"messages\":{}}",
    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"p\"}]}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":null}]}",
    "{\"messages\":[{\"role\":\"user\"}]}",
    "{\"messages\":[{\"role\":\"tool\",\"content\":\"r\",\"tool_call_id\":\"t\"}]}",
    "{\"messages\":[{\"role\":\"function\",\"content\":\"r\"}]}",
    "{\"messages\":[{\"role\":5,\"content\":\"r\"}]}",
    "{\"messages\":[\"x\"]}",
    "{\"messages\":[{\"role\":\"us\\u0065r\",\"content\":\"r\"}]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"r\"}],\"temperature\":0.7}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"r\"}],\"n\":2}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"r\"}],\"tools\":[]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"r\"}],\"user\":\"u\"}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"r\"}]} x",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"r\"}],}",
    "[]",
    "",
};

static void
test_anthropic_fast_request_matches_jansson_on_edge_requests(void **state)
{
    static const struct gw_str models[] = {
        GW_STR_LIT("claude-test"), GW_STR_LIT(""),        GW_STR_LIT("m\"q"),
        GW_STR_LIT("caf\xc3\xa9"), GW_STR_LIT("bad\xff"),
    };
    size_t i, k;

    (void)state;
    for (k = 0; k < sizeof(models) / sizeof(models[0]); k++)
        for (i = 0; i < sizeof(t_edge_requests) / sizeof(t_edge_requests[0]); i++) {
            struct gw_buf out = {0};
            char why[200];

            assert_int_equal(gw_buf_append_cstr(&out, "keep"), GW_OK);
            (void)dl_anthropic_from_chat(t_edge_requests[i], strlen(t_edge_requests[i]), models[k],
                                         i % 3 == 0   ? 0
                                         : i % 3 == 1 ? 8192
                                                      : UINT64_MAX,
                                         &out, why, sizeof(why));
            assert_memory_equal(out.data, "keep", 4);
            gw_buf_fini(&out);
        }
}

/* Allocation failures on the fast routes (buffer growth, the heap copy of a long
 * escaped string) end in GW_OK or GW_E_NOMEM with nothing written. */
static void
test_anthropic_fast_routes_out_of_memory_is_clean(void **state)
{
    const char *req = "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"system\","
                      "\"content\":\"s\\n\"},{\"role\":\"user\",\"content\":\"a\"},{\"role\":"
                      "\"user\",\"content\":\"b\\u00e9\"}]}";
    const char *ans = "{\"id\":\"m\",\"model\":\"c\",\"content\":[{\"type\":\"text\",\"text\":"
                      "\"a\\u0001\"}],\"usage\":{\"input_tokens\":1}}";
    struct gw_buf delta = {0};
    unsigned long k;
    size_t i;

    (void)state;
    assert_int_equal(gw_buf_append_cstr(&delta, "{\"delta\":{\"type\":\"text_delta\",\"text\":\""),
                     GW_OK);
    for (i = 0; i < 200; i++)
        assert_int_equal(gw_buf_append_cstr(&delta, "\\u00e9x"), GW_OK);
    assert_int_equal(gw_buf_append_cstr(&delta, "\"}}"), GW_OK);
    for (k = 1; k < 12; k++) {
        struct dl_anthropic_stream st;
        struct gw_buf out = {0};
        struct gw_usage u;
        char why[64];
        enum gw_code rc;

        gw_alloc_fail_at(k);
        rc = (dl_anthropic_from_chat)(req, strlen(req), T_MODEL, 0, &out, why, sizeof(why));
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || (rc == GW_E_NOMEM && out.len == 0));
        gw_buf_fini(&out);
        gw_alloc_fail_at(k);
        rc = (dl_anthropic_answer_to_chat)(ans, strlen(ans), 1, &out, &u);
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || (rc == GW_E_NOMEM && out.len == 0 && u.input_tokens == 0));
        gw_buf_fini(&out);
        dl_anthropic_stream_init(&st, 1);
        gw_alloc_fail_at(k);
        rc = (dl_anthropic_stream_event)(&st, GW_STR_LIT("content_block_delta"),
                                         (struct gw_str){delta.data, delta.len}, &out);
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || (rc == GW_E_NOMEM && out.len == 0));
        gw_buf_fini(&out);
    }
    gw_buf_fini(&delta);
}

/* ==== the Messages shape: errors and the table ==== */

static void
t_shape_error(enum gw_code code, const char *message, const char *want)
{
    struct gw_buf out = {0};

    assert_int_equal(dl_anthropic_shape.error_render(code, gw_str_c(message), &out), GW_OK);
    t_json_eq(out.data, out.len, want);
    gw_buf_fini(&out);
}

static void
test_messages_error_render_types_by_status_with_our_code(void **state)
{
    static const struct {
        enum gw_code code;
        const char *type;
    } cases[] = {
        {GW_E_BAD_REQUEST, "invalid_request_error"},
        {GW_E_UNCONVERTIBLE, "invalid_request_error"},
        {GW_E_AUTH_MISSING_KEY, "authentication_error"},
        {GW_E_AUTH_INVALID_KEY, "authentication_error"},
        {GW_E_MODEL_NOT_ALLOWED, "permission_error"},
        {GW_E_MODEL_NOT_FOUND, "not_found_error"},
        {GW_E_BODY_TOO_LARGE, "request_too_large"},
        {GW_E_BUSY_ALL, "rate_limit_error"},
        {GW_E_KEY_LIMIT_TOKENS_PER_PERIOD, "rate_limit_error"},
        {GW_E_INTERNAL, "api_error"},
        {GW_E_UPSTREAM_FAILED, "api_error"},
        {GW_E_UPSTREAM_TOO_SLOW, "overloaded_error"},
        {GW_E_UPSTREAM_TIMEOUT, "timeout_error"},
        {GW_E_CLIENT_TIMEOUT, "timeout_error"},
        {GW_E_METHOD_NOT_ALLOWED, "invalid_request_error"},
        {GW_OK, "api_error"}, /* not an error: a caller's bug, said as 500 */
    };
    char want[512];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(want, sizeof(want),
                 "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"why \\\"x\\\"\","
                 "\"gw_code\":\"%s\"}}",
                 cases[i].type, gw_code_str(cases[i].code));
        t_shape_error(cases[i].code, "why \"x\"", want);
    }
    /* no message: the code says it */
    t_shape_error(GW_E_BAD_REQUEST, "",
                  "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
                  "\"gw.bad_request\",\"gw_code\":\"gw.bad_request\"}}");
}

static void
test_messages_error_context_length_says_prompt_is_too_long(void **state)
{
    (void)state;
    /* the words Claude Code compacts the conversation on */
    t_shape_error(GW_E_CONTEXT_LENGTH, "210000 tokens > 200000 maximum",
                  "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
                  "\"prompt is too long: 210000 tokens > 200000 maximum\",\"gw_code\":"
                  "\"gw.context_length_exceeded\"}}");
    t_shape_error(GW_E_CONTEXT_LENGTH, "prompt is too long: 9 > 8",
                  "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":"
                  "\"prompt is too long: 9 > 8\",\"gw_code\":\"gw.context_length_exceeded\"}}");
}

static void
test_messages_error_frame_is_overloaded_whatever_broke(void **state)
{
    struct gw_buf out = {0};

    (void)state;
    assert_int_equal(gw_buf_append_cstr(&out, "P"), GW_OK);
    assert_int_equal(
        dl_anthropic_shape.error_frame(GW_E_UPSTREAM_TOO_SLOW, GW_STR_LIT("too slow"), &out),
        GW_OK);
    assert_string_equal(out.data, "Pevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                                  "\"overloaded_error\",\"message\":\"too slow\",\"gw_code\":"
                                  "\"gw.upstream.too_slow\"}}\n\n");
    gw_buf_reset(&out);
    assert_int_equal(dl_anthropic_shape.error_frame(GW_E_BAD_REQUEST, GW_STR_LIT("x"), &out),
                     GW_OK);
    assert_non_null(strstr(out.data, "\"type\":\"overloaded_error\""));
    gw_buf_fini(&out);
}

static void
test_messages_upstream_error_read(void **state)
{
    static const struct {
        const char *body;
        int status;
        const char *type, *message;
    } cases[] = {
        {"{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"},"
         "\"request_id\":\"req_1\"}",
         529, "overloaded_error", "Overloaded"},
        /* an OpenAI error body reads the same way */
        {"{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"code\":"
         "\"rate_limit_exceeded\"}}",
         429, "requests", "Rate limit reached"},
        /* escapes are left in the slice */
        {"{\"error\":{\"type\":\"invalid_request_error\",\"message\":\"role \\\"x\\\"\"}}", 400,
         "invalid_request_error", "role \\\"x\\\""},
        /* not an error body: the status decides */
        {"<html>bad gateway</html>", 502, "api_error", "the upstream failed"},
        {"", 429, "rate_limit_error", "the upstream is rate limiting requests"},
        {"{\"error\":{\"type\":5}}", 404, "not_found_error",
         "the upstream does not know this model or path"},
        {"{\"error\":\"x\"}", 503, "overloaded_error", "the upstream is overloaded"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_str type, message;

        dl_anthropic_shape.upstream_error_read(cases[i].body, strlen(cases[i].body),
                                               cases[i].status, &type, &message);
        if (!gw_str_eq(type, gw_str_c(cases[i].type)) ||
            !gw_str_eq(message, gw_str_c(cases[i].message))) {
            print_error("case %zu: %.*s / %.*s\n", i, (int)type.len, type.ptr, (int)message.len,
                        message.ptr);
            fail();
        }
    }
}

static void
test_messages_upstream_error_render_maps_foreign_types_by_status(void **state)
{
    static const struct {
        int status;
        const char *type, *message, *want_type, *want_message;
    } cases[] = {
        {529, "overloaded_error", "Overloaded", "overloaded_error", "Overloaded"},
        {400, "invalid_request_error", "bad", "invalid_request_error", "bad"},
        {402, "billing_error", "pay", "billing_error", "pay"},
        {500, "server_error", "oops", "api_error", "oops"},
        {429, "rate_limit_exceeded", "slow down", "rate_limit_error", "slow down"},
        {429, "requests", "slow down", "rate_limit_error", "slow down"},
        {401, "invalid_request_error", "bad key", "authentication_error", "bad key"},
        {404, "invalid_request_error", "no model", "not_found_error", "no model"},
        {422, "", "", "invalid_request_error", "the upstream refused the request"},
        {503, "x", "", "overloaded_error", "the upstream is overloaded"},
        {418, "not_found_error", "teapot", "invalid_request_error", "teapot"},
    };
    char want[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_buf out = {0};

        assert_int_equal(dl_anthropic_shape.upstream_error_render(cases[i].status,
                                                                  gw_str_c(cases[i].type),
                                                                  gw_str_c(cases[i].message), &out),
                         GW_OK);
        snprintf(want, sizeof(want),
                 "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":\"%s\"}}",
                 cases[i].want_type, cases[i].want_message);
        t_json_eq(out.data, out.len, want);
        gw_buf_fini(&out);
    }
}

static void
test_messages_shape_table_has_every_operation(void **state)
{
    const struct dl_shape_ops *ops = &dl_anthropic_shape;

    (void)state;
    assert_int_equal(ops->shape, DL_SHAPE_MESSAGES);
    assert_string_equal(ops->name, "messages");
    assert_non_null(ops->request_parse);
    assert_non_null(ops->request_render);
    assert_non_null(ops->parse_init);
    assert_non_null(ops->event_parse);
    assert_non_null(ops->answer_parse);
    assert_non_null(ops->render_init);
    assert_non_null(ops->event_render);
    assert_non_null(ops->render_end);
    assert_non_null(ops->answer_render);
    assert_non_null(ops->error_render);
    assert_non_null(ops->error_frame);
    assert_non_null(ops->upstream_error_render);
    assert_non_null(ops->upstream_error_read);
    assert_non_null(ops->answer_usage);
}

static void
test_messages_error_out_of_memory_leaves_out_as_it_was(void **state)
{
    unsigned long k;

    (void)state;
    for (k = 1; k < 12; k++) {
        struct gw_buf out = {0};
        enum gw_code rc;

        assert_int_equal(gw_buf_append_cstr(&out, "keep"), GW_OK);
        gw_alloc_fail_at(k);
        rc = dl_anthropic_shape.error_render(GW_E_CONTEXT_LENGTH, GW_STR_LIT("a long message"),
                                             &out);
        if (rc == GW_OK)
            rc = dl_anthropic_shape.error_frame(GW_E_UPSTREAM_FAILED, GW_STR_LIT("m"), &out);
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || rc == GW_E_NOMEM);
        if (rc != GW_OK)
            assert_true(strncmp(out.data, "keep", 4) == 0 &&
                        (out.len == 4 || out.data[out.len - 1] == '}'));
        gw_buf_fini(&out);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_anthropic_request_maps_model_messages_and_stream),
        cmocka_unit_test(test_anthropic_request_max_tokens_precedence_and_spec_fill),
        cmocka_unit_test(test_anthropic_request_system_and_developer_join_top_level_system),
        cmocka_unit_test(test_anthropic_request_merges_consecutive_same_role_messages),
        cmocka_unit_test(test_anthropic_request_images_data_and_http_urls),
        cmocka_unit_test(test_anthropic_request_tools_and_tool_choice),
        cmocka_unit_test(test_anthropic_request_tool_calls_and_results_round_trip),
        cmocka_unit_test(test_anthropic_request_refuses_tool_arguments_not_an_object),
        cmocka_unit_test(
            test_anthropic_request_sampling_clamps_temperature_drops_top_p_with_it_stop_and_user),
        cmocka_unit_test(test_anthropic_request_ignores_fields_without_equivalent),
        cmocka_unit_test(test_anthropic_request_refuses_what_messages_cannot_express),
        cmocka_unit_test(test_anthropic_request_refuses_unconvertible_messages),
        cmocka_unit_test(test_anthropic_request_refusal_message_never_quotes_the_body),
        cmocka_unit_test(test_anthropic_request_appends_to_out),
        cmocka_unit_test(test_anthropic_answer_converts_text_tool_use_and_usage),
        cmocka_unit_test(test_anthropic_answer_finish_reasons_and_null_content),
        cmocka_unit_test(test_anthropic_answer_refuses_what_is_not_a_messages_answer),
        cmocka_unit_test(test_anthropic_error_maps_types_to_openai),
        cmocka_unit_test(test_anthropic_error_not_anthropic_body_uses_status),
        cmocka_unit_test(test_anthropic_stream_text_converts_to_chat_chunks),
        cmocka_unit_test(test_anthropic_stream_chunks_read_by_openai_inspector),
        cmocka_unit_test(test_anthropic_stream_tool_call_opens_and_streams_arguments),
        cmocka_unit_test(test_anthropic_stream_error_event_ends_stream_with_error_chunk),
        cmocka_unit_test(test_anthropic_stream_without_event_names_reads_data_type),
        cmocka_unit_test(test_anthropic_stream_malformed_events_are_upstream_protocol),
        cmocka_unit_test(test_anthropic_stream_ignores_ping_thinking_and_unknown_events),
        cmocka_unit_test(test_anthropic_stream_without_usage_writes_no_usage_chunk),
        cmocka_unit_test(test_anthropic_stream_long_id_is_cut_to_fit),
        cmocka_unit_test(test_anthropic_out_of_memory_is_clean),
        cmocka_unit_test(test_anthropic_fast_stream_matches_jansson_on_edge_events),
        cmocka_unit_test(test_anthropic_fast_stream_long_escaped_text_delta),
        cmocka_unit_test(test_anthropic_fast_answer_matches_jansson_on_edge_answers),
        cmocka_unit_test(test_anthropic_fast_answer_reescapes_like_jansson),
        cmocka_unit_test(test_anthropic_fast_request_matches_jansson_on_edge_requests),
        cmocka_unit_test(test_anthropic_fast_routes_out_of_memory_is_clean),
        cmocka_unit_test(test_messages_error_render_types_by_status_with_our_code),
        cmocka_unit_test(test_messages_error_context_length_says_prompt_is_too_long),
        cmocka_unit_test(test_messages_error_frame_is_overloaded_whatever_broke),
        cmocka_unit_test(test_messages_upstream_error_read),
        cmocka_unit_test(test_messages_upstream_error_render_maps_foreign_types_by_status),
        cmocka_unit_test(test_messages_shape_table_has_every_operation),
        cmocka_unit_test(test_messages_error_out_of_memory_leaves_out_as_it_was),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
