/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_gemini_answer.c - a Gemini upstream's answers as canonical
 * events (dialects/gemini_answer.c): a recorded stream with thoughts, a signed text part,
 * parallel function calls and usage in every chunk; every finish reason; prompt
 * feedback; errors in the stream and as a body; chunks that are not what they must be
 * (refused with no event); generated call ids; a whole answer and its usage; the
 * JSON-array stream through the splitter.
 * See: dialects/gemini_answer.c, tests/fixtures/gemini/
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/arena.h"
#include "dialects/canon.h"
#include "dialects/gemini.h"
#include "t_gemini.h"

#define T_NONE ((struct gw_str){"", 0})

/* Feeds each SSE event of <text> to one parser state, recording into <rec>; every
 * event must parse. */
static void
t_stream(const char *text, size_t len, struct gw_buf *rec)
{
    struct gw_str v[64];
    size_t n = t_gm_sse_split(text, len, v, 64), k;
    struct dl_parse_state st;

    dl_gemini_shape.parse_init(&st);
    for (k = 0; k < n; k++)
        assert_int_equal(dl_gemini_shape.event_parse(&st, T_NONE, v[k], t_record, rec), GW_OK);
}

/* The events of the chunks <c> (NULL-ended) on one state. */
static void
t_chunks(const char *const *c, struct gw_buf *rec)
{
    struct dl_parse_state st;

    dl_gemini_shape.parse_init(&st);
    for (; *c; c++)
        assert_int_equal(dl_gemini_shape.event_parse(&st, T_NONE, gw_str_c(*c), t_record, rec),
                         GW_OK);
}

/* Collects the signatures of tool calls' BLOCK_START, one line each. */
static int
t_call_sigs(void *arg, const struct dl_event *ev)
{
    struct gw_buf *b = arg;

    if (ev->kind == DL_EV_BLOCK_START && ev->block == DL_BLOCK_TOOL_CALL) {
        gw_buf_printf(b, "%u ", ev->index);
        gw_buf_append_str(b, ev->signature);
        gw_buf_append_cstr(b, "\n");
    }
    return 0;
}

static void
test_gemini_stream_thoughts_signed_text_and_parallel_calls(void **state)
{
    size_t len;
    char *sse = t_fixture("stream_thoughts_calls.sse", &len);
    struct gw_buf rec = {0}, sigs = {0};
    struct gw_str v[8];
    struct dl_parse_state st;
    size_t n, k;

    (void)state;
    t_stream(sse, len, &rec);
    t_lines_eq(&rec, "START id=pZJ0aO2bEoWn1MkP8oO-gAs model=gemini-2.5-pro\n"
                     "BLOCK_START 0 reasoning\n"
                     "DELTA 0 reasoning \"**Planning the lookup**\\n\\nThe user asks for two "
                     "cities.\"\n"
                     "USAGE in=120 out=0 read=0 write=0\n"
                     "DELTA 0 reasoning \" I should call get_weather for each.\"\n"
                     "USAGE in=120 out=40 read=0 write=0\n"
                     "DELTA 0 reasoning sig=\"Q2lzQkJ0aG91Z2h0\"\n"
                     "BLOCK_STOP 0\n"
                     "BLOCK_START 1 text\n"
                     "DELTA 1 text \"Let me check both.\"\n"
                     "USAGE in=120 out=45 read=0 write=0\n"
                     "BLOCK_STOP 1\n"
                     "BLOCK_START 2 tool id=call_90bb934f_0 name=get_weather\n"
                     "DELTA 2 tool \"{\\\"city\\\": \\\"Paris\\\"}\"\n"
                     "BLOCK_STOP 2\n"
                     "BLOCK_START 3 tool id=call_90bb934f_1 name=get_weather\n"
                     "DELTA 3 tool \"{\\\"city\\\": \\\"Rome\\\",\\\"unit\\\": \\\"celsius\\\"}\"\n"
                     "BLOCK_STOP 3\n"
                     "USAGE in=20 out=95 read=100 write=0\n"
                     "FINISH tool_calls\n");
    /* the call's own signature rides on its BLOCK_START */
    n = t_gm_sse_split(sse, len, v, 8);
    dl_gemini_shape.parse_init(&st);
    for (k = 0; k < n; k++)
        assert_int_equal(dl_gemini_shape.event_parse(&st, T_NONE, v[k], t_call_sigs, &sigs), GW_OK);
    t_lines_eq(&sigs, "2 Q2lzQ2FsbDE=\n3 \n");
    gw_buf_fini(&rec);
    gw_buf_fini(&sigs);
    free(sse);
}

static void
test_gemini_stream_finish_reasons(void **state)
{
    static const struct {
        const char *reason, *finish;
    } reasons[] = {
        {"STOP", "stop"},
        {"MAX_TOKENS", "length"},
        {"SAFETY", "content_filter"},
        {"RECITATION", "content_filter"},
        {"BLOCKLIST", "content_filter"},
        {"PROHIBITED_CONTENT", "content_filter"},
        {"SPII", "content_filter"},
        {"IMAGE_SAFETY", "content_filter"},
        {"MALFORMED_FUNCTION_CALL", "error"},
        {"UNEXPECTED_TOOL_CALL", "error"},
        {"TOO_MANY_TOOL_CALLS", "error"},
        {"LANGUAGE", "error"},
        {"OTHER", "error"},
        {"FINISH_REASON_UNSPECIFIED", "error"},
        {"SOMETHING_NEWER", "stop"},
    };
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(reasons) / sizeof(reasons[0]); k++) {
        char chunk[256], want[128];
        const char *c[] = {chunk, NULL};
        struct gw_buf rec = {0};

        snprintf(chunk, sizeof(chunk),
                 "{\"candidates\":[{\"content\":{\"role\":\"model\"},\"finishReason\":\"%s\"}],"
                 "\"responseId\":\"r\"}",
                 reasons[k].reason);
        snprintf(want, sizeof(want), "START id=r model=\nFINISH %s\n", reasons[k].finish);
        t_chunks(c, &rec);
        t_lines_eq(&rec, want);
        gw_buf_fini(&rec);
    }
}

static void
test_gemini_stream_after_the_finish_only_usage(void **state)
{
    /* usage in a chunk of its own after the finish (some servers do), and content after
     * the finish is not part of the answer */
    const char *c[] = {
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"hi\"}]},\"finishReason\":"
        "\"STOP\"}],\"modelVersion\":\"m\"}",
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"late\"}]},\"finishReason\":"
        "\"MAX_TOKENS\"}],\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":1}}",
        "{\"error\":{\"code\":500,\"message\":\"late\"}}",
        "{\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":2}}",
        NULL,
    };
    /* the prompt refused: a finish with no content */
    const char *blocked[] = {
        "{\"promptFeedback\":{\"blockReason\":\"SAFETY\"},\"usageMetadata\":{"
        "\"promptTokenCount\":9,\"totalTokenCount\":9},\"modelVersion\":\"m\"}",
        NULL,
    };
    const char *unspecified[] = {
        "{\"promptFeedback\":{\"blockReason\":\"BLOCKED_REASON_UNSPECIFIED\"}}",
        NULL,
    };
    struct gw_buf rec = {0};

    (void)state;
    t_chunks(c, &rec);
    t_lines_eq(&rec, "START id= model=m\n"
                     "BLOCK_START 0 text\n"
                     "DELTA 0 text \"hi\"\n"
                     "BLOCK_STOP 0\n"
                     "FINISH stop\n"
                     "USAGE in=3 out=1 read=0 write=0\n");
    gw_buf_reset(&rec);
    t_chunks(blocked, &rec);
    t_lines_eq(&rec, "START id= model=m\n"
                     "USAGE in=9 out=0 read=0 write=0\n"
                     "FINISH content_filter\n");
    gw_buf_reset(&rec);
    t_chunks(unspecified, &rec);
    t_lines_eq(&rec, "START id= model=\n");
    gw_buf_fini(&rec);
}

static void
test_gemini_stream_errors(void **state)
{
    size_t len;
    char *sse = t_fixture("stream_error.sse", &len);
    const char *by_name[] = {
        "{\"error\":{\"message\":\"quota\",\"status\":\"RESOURCE_EXHAUSTED\"}}",
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}]}}]}", NULL};
    struct gw_buf rec = {0};

    (void)state;
    t_stream(sse, len, &rec);
    t_lines_eq(&rec, "START id=r1 model=gemini-2.5-flash\n"
                     "BLOCK_START 0 text\n"
                     "DELTA 0 text \"Partial\"\n"
                     "ERROR type=UNAVAILABLE status=503 message=\"The model is overloaded. Please "
                     "try again later.\"\n");
    /* no code: the status name's; nothing after an error */
    gw_buf_reset(&rec);
    t_chunks(by_name, &rec);
    t_lines_eq(&rec, "ERROR type=RESOURCE_EXHAUSTED status=429 message=\"quota\"\n");
    gw_buf_fini(&rec);
    free(sse);
}

static void
test_gemini_stream_refuses_chunks_that_are_not_responses(void **state)
{
    static const char *const bad[] = {
        "",
        "not json",
        "[1]",
        "{\"candidates\":{}}",
        "{\"candidates\":[1]}",
        "{\"candidates\":[{\"content\":[]}]}",
        "{\"candidates\":[{\"content\":{\"parts\":{}}}]}",
        "{\"candidates\":[{\"content\":{\"parts\":[1]}}]}",
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":1}]}}]}",
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\",\"thought\":\"yes\"}]}}]}",
        "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{}}]}}]}",
        "{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":1}}]"
        "}}]}",
        /* a good part before a bad one: still nothing is emitted */
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"ok\"},{\"text\":2}]}}]}",
        "{\"candidates\":[{\"finishReason\":1}]}",
        "{\"usageMetadata\":[]}",
        "{\"modelVersion\":1}",
        "{\"error\":\"x\"}",
        "{\"candidates\":[]} x",
    };
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        struct gw_buf rec = {0};
        struct dl_parse_state st;

        dl_gemini_shape.parse_init(&st);
        if (dl_gemini_shape.event_parse(&st, T_NONE, gw_str_c(bad[k]), t_record, &rec) !=
                GW_E_UPSTREAM_PROTOCOL ||
            rec.len != 0) {
            print_error("chunk %s: accepted or emitted %s\n", bad[k], rec.data ? rec.data : "");
            fail();
        }
        assert_int_equal(dl_gemini_shape.answer_parse(bad[k], strlen(bad[k]), t_record, &rec),
                         GW_E_UPSTREAM_PROTOCOL);
        assert_int_equal(rec.len, 0);
        gw_buf_fini(&rec);
    }
}

static void
test_gemini_stream_generated_ids_and_signature_only_parts(void **state)
{
    /* no responseId: call_<n>; a signature-only thought part; an empty text; media and
     * code parts are not canonical content */
    const char *c[] = {
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"t\",\"thought\":true},{\"text\":"
        "\"\",\"thought\":true,\"thoughtSignature\":\"S\"},{\"text\":\"\"},{\"inlineData\":{"
        "\"mimeType\":\"image/png\",\"data\":\"x\"}},{\"functionCall\":{\"name\":\"a\"}},{"
        "\"functionCall\":{\"id\":\"given\",\"name\":\"b\",\"args\":{\"k\":\"\\u00e9\"}}}]}}]}",
        "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"after\"}]},\"finishReason\":"
        "\"STOP\"}]}",
        NULL,
    };
    struct gw_buf rec = {0};

    (void)state;
    t_chunks(c, &rec);
    t_lines_eq(&rec, "START id= model=\n"
                     "BLOCK_START 0 reasoning\n"
                     "DELTA 0 reasoning \"t\"\n"
                     "DELTA 0 reasoning sig=\"S\"\n"
                     "BLOCK_STOP 0\n"
                     "BLOCK_START 1 tool id=call_0 name=a\n"
                     "DELTA 1 tool \"{}\"\n"
                     "BLOCK_STOP 1\n"
                     "BLOCK_START 2 tool id=given name=b\n"
                     "DELTA 2 tool \"{\\\"k\\\":\\\"\\\\u00e9\\\"}\"\n"
                     "BLOCK_STOP 2\n"
                     "BLOCK_START 3 text\n"
                     "DELTA 3 text \"after\"\n"
                     "BLOCK_STOP 3\n"
                     "FINISH tool_calls\n");
    gw_buf_fini(&rec);
}

static int
t_stop_after_two(void *arg, const struct dl_event *ev)
{
    int *n = arg;

    (void)ev;
    return ++*n >= 2;
}

static void
test_gemini_stream_receiver_can_stop(void **state)
{
    size_t len;
    char *sse = t_fixture("stream_thoughts_calls.sse", &len);
    struct gw_str v[8];
    struct dl_parse_state st;
    int n = 0;

    (void)state;
    assert_int_equal(t_gm_sse_split(sse, len, v, 8), 4);
    dl_gemini_shape.parse_init(&st);
    assert_int_equal(dl_gemini_shape.event_parse(&st, T_NONE, v[0], t_stop_after_two, &n), GW_OK);
    assert_int_equal(n, 2);
    n = 0;
    assert_int_equal(dl_gemini_shape.answer_parse(v[3].ptr, v[3].len, t_stop_after_two, &n), GW_OK);
    assert_int_equal(n, 2);
    free(sse);
}

static void
test_gemini_answer_parse_and_usage(void **state)
{
    size_t len;
    char *body = t_fixture("answer_text.json", &len);
    struct gw_buf rec = {0};
    struct gw_usage u;
    const char *open = "{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}]}}]}";

    (void)state;
    assert_int_equal(dl_gemini_shape.answer_parse(body, len, t_record, &rec), GW_OK);
    t_lines_eq(&rec, "START id=abc123 model=gemini-2.5-flash\n"
                     "BLOCK_START 0 reasoning\n"
                     "DELTA 0 reasoning \"Thinking about \\\"quotes\\\".\" sig=\"c2lnMQ==\"\n"
                     "BLOCK_STOP 0\n"
                     "BLOCK_START 1 text\n"
                     "DELTA 1 text \"Hello, \\\"world\\\"!\\n\"\n"
                     "BLOCK_STOP 1\n"
                     "BLOCK_START 2 tool id=fc_9 name=lookup\n"
                     "DELTA 2 tool \"{\\\"q\\\": \\\"x\\\"}\"\n"
                     "BLOCK_STOP 2\n"
                     "USAGE in=34 out=20 read=0 write=0\n"
                     "FINISH length\n");
    /* input counts the tool-use prompt; output the thoughts */
    assert_true(dl_gemini_shape.answer_usage(body, len, &u));
    assert_int_equal(u.input_tokens, 34);
    assert_int_equal(u.output_tokens, 20);
    assert_false(dl_gemini_shape.answer_usage(open, strlen(open), &u));
    /* without a finishReason: FINISH none */
    gw_buf_reset(&rec);
    assert_int_equal(dl_gemini_shape.answer_parse(open, strlen(open), t_record, &rec), GW_OK);
    t_lines_eq(&rec, "START id= model=\nBLOCK_START 0 text\nDELTA 0 text \"x\"\nBLOCK_STOP 0\n"
                     "FINISH none\n");
    /* an error body */
    free(body);
    body = t_fixture("error_invalid.json", &len);
    gw_buf_reset(&rec);
    assert_int_equal(dl_gemini_shape.answer_parse(body, len, t_record, &rec), GW_OK);
    t_lines_eq(&rec, "ERROR type=INVALID_ARGUMENT status=400 message=\"* "
                     "GenerateContentRequest.contents: contents is not specified\\n\"\n");
    gw_buf_fini(&rec);
    free(body);
}

/* Each element the splitter hands over goes to the event parser. */
struct t_array {
    struct dl_parse_state st;
    struct gw_buf rec;
};

static int
t_on_element(void *arg, const char *obj, size_t len)
{
    struct t_array *t = arg;

    assert_int_equal(
        dl_gemini_shape.event_parse(&t->st, T_NONE, (struct gw_str){obj, len}, t_record, &t->rec),
        GW_OK);
    return 0;
}

static void
test_gemini_array_stream_gives_the_events_of_sse(void **state)
{
    size_t len, cut;
    char *body = t_fixture("stream_array.json", &len);
    const char *want = "START id=arr1 model=gemini-2.5-flash\n"
                       "BLOCK_START 0 text\n"
                       "DELTA 0 text \"Hello\"\n"
                       "DELTA 0 text \" {world} \\\"]\\\" [\"\n"
                       "USAGE in=4 out=3 read=0 write=0\n"
                       "BLOCK_STOP 0\n"
                       "FINISH stop\n";

    (void)state;
    for (cut = 0; cut <= len; cut++) {
        struct dl_gemini_array a;
        struct t_array t = {.rec = {0}};

        dl_gemini_shape.parse_init(&t.st);
        dl_gemini_array_init(&a, 1 << 16);
        assert_int_equal(dl_gemini_array_feed(&a, body, cut, t_on_element, &t), GW_OK);
        assert_int_equal(dl_gemini_array_feed(&a, body + cut, len - cut, t_on_element, &t), GW_OK);
        assert_true(dl_gemini_array_done(&a));
        t_lines_eq(&t.rec, want);
        dl_gemini_array_fini(&a);
        gw_buf_fini(&t.rec);
    }
    free(body);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemini_stream_thoughts_signed_text_and_parallel_calls),
        cmocka_unit_test(test_gemini_stream_finish_reasons),
        cmocka_unit_test(test_gemini_stream_after_the_finish_only_usage),
        cmocka_unit_test(test_gemini_stream_errors),
        cmocka_unit_test(test_gemini_stream_refuses_chunks_that_are_not_responses),
        cmocka_unit_test(test_gemini_stream_generated_ids_and_signature_only_parts),
        cmocka_unit_test(test_gemini_stream_receiver_can_stop),
        cmocka_unit_test(test_gemini_answer_parse_and_usage),
        cmocka_unit_test(test_gemini_array_stream_gives_the_events_of_sse),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
