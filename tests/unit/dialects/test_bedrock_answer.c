/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_bedrock_answer.c - a Bedrock upstream's answers as canonical
 * events (dialects/bedrock_answer.c) and the rest of dialects/bedrock.c: a recorded
 * ConverseStream (reasoning with its signature, text without a start, a tool call,
 * padding, usage after the stop) fed one event at a time; every stop reason; the stream
 * exceptions and their statuses; unknown events and payloads that are not what they
 * must be; whole Converse answers and their usage; error bodies; the model path and
 * the model families.
 * See: dialects/bedrock_answer.c, dialects/bedrock.c, tests/fixtures/bedrock/
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#define T_FIXTURES "tests/fixtures/bedrock/"

#include "dialects/bedrock-priv.h"
#include "t_messages.h"

/* Feeds each line "<event> <json>" of <text> to one parser state, recording into
 * <rec>; every event must parse. */
static void
t_lines(const char *text, struct gw_buf *rec)
{
    struct dl_parse_state st;
    const char *p = text;

    dl_bedrock_shape.parse_init(&st);
    while (*p) {
        const char *nl = strchr(p, '\n'), *sp = strchr(p, ' ');
        size_t end = nl ? (size_t)(nl - p) : strlen(p);
        struct gw_str name, data;

        assert_non_null(sp);
        assert_true((size_t)(sp - p) < end);
        name = (struct gw_str){p, (size_t)(sp - p)};
        data = (struct gw_str){sp + 1, end - (size_t)(sp - p) - 1};
        if (dl_bedrock_shape.event_parse(&st, name, data, t_record, rec) != GW_OK) {
            print_error("refused: %.*s\n", (int)end, p);
            fail();
        }
        p += end + (nl ? 1 : 0);
    }
}

static void
test_bedrock_stream_reasoning_text_and_tool_call(void **state)
{
    size_t len;
    char *text = t_fixture("stream_tools.events", &len);
    struct gw_buf rec = {0};

    (void)state;
    t_lines(text, &rec);
    t_lines_eq(&rec, "START id= model=\n"
                     "BLOCK_START 0 reasoning\n"
                     "DELTA 0 reasoning \"The user wants the top song.\"\n"
                     "DELTA 0 reasoning \" I should call top_song.\"\n"
                     "DELTA 0 reasoning sig=\"ErcBCkgIAhABGAIiQLpy\"\n"
                     "BLOCK_STOP 0\n"
                     "BLOCK_START 1 text\n"
                     "DELTA 1 text \"I'll look\"\n"
                     "DELTA 1 text \" that up.\"\n"
                     "BLOCK_STOP 1\n"
                     "BLOCK_START 2 tool id=tooluse_kZJMlvQmRJ6eAyJE5GIl7Q name=top_song\n"
                     "DELTA 2 tool \"{\\\"sign\\\": \"\n"
                     "DELTA 2 tool \"\\\"WZPZ\\\"}\"\n"
                     "BLOCK_STOP 2\n"
                     "FINISH tool_calls\n"
                     "USAGE in=375 out=77 read=3000 write=0\n");
    gw_buf_fini(&rec);
    free(text);
}

/* Feeds <lines> (NULL-ended pairs of name, data) on one state into <rec>. */
static void
t_events(const char *const *lines, struct gw_buf *rec)
{
    struct dl_parse_state st;

    dl_bedrock_shape.parse_init(&st);
    for (; lines[0]; lines += 2)
        assert_int_equal(dl_bedrock_shape.event_parse(&st, gw_str_c(lines[0]), gw_str_c(lines[1]),
                                                      t_record, rec),
                         GW_OK);
}

static void
test_bedrock_stream_stop_reasons(void **state)
{
    static const struct {
        const char *reason, *want;
    } reasons[] = {
        {"end_turn", "FINISH stop\n"},
        {"stop_sequence", "FINISH stop\n"},
        {"tool_use", "FINISH tool_calls\n"},
        {"max_tokens", "FINISH length\n"},
        {"model_context_window_exceeded", "FINISH length\n"},
        {"guardrail_intervened", "FINISH content_filter\n"},
        {"content_filtered", "FINISH content_filter\n"},
        {"malformed_model_output", "FINISH error\n"},
        {"malformed_tool_use", "FINISH error\n"},
        {"a_reason_from_2030", "FINISH stop\n"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        char stop[128];
        const char *lines[] = {"messageStart", "{\"role\":\"assistant\"}", "messageStop", stop,
                               NULL};
        struct gw_buf rec = {0}, want = {0};

        snprintf(stop, sizeof(stop), "{\"stopReason\":\"%s\"}", reasons[i].reason);
        t_events(lines, &rec);
        gw_buf_append_cstr(&want, "START id= model=\n");
        gw_buf_append_cstr(&want, reasons[i].want);
        t_lines_eq(&rec, want.data);
        gw_buf_fini(&rec);
        gw_buf_fini(&want);
    }
}

static void
test_bedrock_stream_stop_sequence_and_open_block(void **state)
{
    /* the stop sequence Claude reports when the render asked for it; a text block left
     * open is stopped before the finish; an escaped text is decoded */
    const char *lines[] = {
        "contentBlockDelta",
        "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"caf\\u00e9 \\\"x\\\"\"}}",
        "messageStop",
        "{\"stopReason\":\"stop_sequence\",\"additionalModelResponseFields\":"
        "{\"stop_sequence\":\"END\"}}",
        "contentBlockDelta",
        "{\"contentBlockIndex\":1,\"delta\":{\"text\":\"after the stop\"}}",
        "metadata",
        "{\"usage\":{\"inputTokens\":3,\"outputTokens\":4,\"totalTokens\":7}}",
        NULL,
    };
    struct gw_buf rec = {0};

    (void)state;
    t_events(lines, &rec);
    t_lines_eq(&rec, "START id= model=\n"
                     "BLOCK_START 0 text\n"
                     "DELTA 0 text \"caf\xc3\xa9 \\\"x\\\"\"\n"
                     "BLOCK_STOP 0\n"
                     "FINISH stop seq=\"END\"\n"
                     "USAGE in=3 out=4 read=0 write=0\n");
    gw_buf_fini(&rec);
}

static void
test_bedrock_stream_redacted_reasoning_and_index_changes(void **state)
{
    /* redacted reasoning is a reasoning block whose data is the signature; a delta of a
     * new index starts a new block even without a stop; an empty delta starts nothing */
    const char *lines[] = {
        "messageStart",
        "{\"role\":\"assistant\"}",
        "contentBlockDelta",
        "{\"contentBlockIndex\":0,\"delta\":{\"reasoningContent\":{\"redactedContent\":"
        "\"UmVkYWN0ZWQ=\"}}}",
        "contentBlockDelta",
        "{\"contentBlockIndex\":1,\"delta\":{\"text\":\"\"}}",
        "contentBlockDelta",
        "{\"contentBlockIndex\":1,\"delta\":{\"text\":\"Hi\"}}",
        "contentBlockDelta",
        "{\"contentBlockIndex\":1,\"delta\":{\"citation\":{\"title\":\"doc\"}}}",
        "contentBlockStop",
        "{\"contentBlockIndex\":7}",
        "contentBlockStop",
        "{\"contentBlockIndex\":1}",
        "messageStop",
        "{\"stopReason\":\"end_turn\"}",
        NULL,
    };
    struct gw_buf rec = {0};

    (void)state;
    t_events(lines, &rec);
    t_lines_eq(&rec, "START id= model=\n"
                     "BLOCK_START 0 reasoning redacted\n"
                     "DELTA 0 reasoning sig=\"UmVkYWN0ZWQ=\"\n"
                     "BLOCK_STOP 0\n"
                     "BLOCK_START 1 text\n"
                     "DELTA 1 text \"Hi\"\n"
                     "BLOCK_STOP 1\n"
                     "FINISH stop\n");
    gw_buf_fini(&rec);
}

static void
test_bedrock_stream_exceptions(void **state)
{
    static const struct {
        const char *name, *data, *want;
    } cases[] = {
        {"throttlingException", "{\"message\":\"Too many requests, please wait.\"}",
         "ERROR type=throttlingException status=429 message=\"Too many requests, please "
         "wait.\"\n"},
        {"serviceUnavailableException", "{\"message\":\"down\"}",
         "ERROR type=serviceUnavailableException status=503 message=\"down\"\n"},
        {"validationException", "{\"message\":\"bad\",\"p\":\"abc\"}",
         "ERROR type=validationException status=400 message=\"bad\"\n"},
        {"modelStreamErrorException",
         "{\"message\":\"stream broke\",\"originalStatusCode\":500,\"originalMessage\":\"x\"}",
         "ERROR type=modelStreamErrorException status=500 message=\"stream broke\"\n"},
        {"internalServerException", "{\"Message\":\"oops\"}",
         "ERROR type=internalServerException status=500 message=\"oops\"\n"},
        {"modelTimeoutException", "{}",
         "ERROR type=modelTimeoutException status=408 message=\"\"\n"},
        {"someNewException", "{\"message\":\"new\"}",
         "ERROR type=someNewException status=500 message=\"new\"\n"},
        {"error", "An internal error occurred", /* :error-message, not JSON */
         "ERROR type=error status=500 message=\"An internal error occurred\"\n"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *lines[] = {"contentBlockDelta",
                               "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"a\"}}",
                               cases[i].name,
                               cases[i].data,
                               "contentBlockDelta",
                               "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"b\"}}",
                               "messageStop",
                               "{\"stopReason\":\"end_turn\"}",
                               NULL};
        struct gw_buf rec = {0}, want = {0};

        t_events(lines, &rec);
        gw_buf_append_cstr(&want, "START id= model=\nBLOCK_START 0 text\nDELTA 0 text \"a\"\n");
        gw_buf_append_cstr(&want, cases[i].want);
        t_lines_eq(&rec, want.data); /* and nothing after the error */
        gw_buf_fini(&rec);
        gw_buf_fini(&want);
    }
}

static void
test_bedrock_stream_exception_after_finish_changes_nothing(void **state)
{
    const char *lines[] = {"messageStop",
                           "{\"stopReason\":\"end_turn\"}",
                           "throttlingException",
                           "{\"message\":\"late\"}",
                           "metadata",
                           "{\"usage\":{\"inputTokens\":1,\"outputTokens\":2}}",
                           NULL};
    struct gw_buf rec = {0};

    (void)state;
    t_events(lines, &rec);
    t_lines_eq(&rec, "START id= model=\nFINISH stop\n");
    gw_buf_fini(&rec);
}

static void
test_bedrock_stream_refuses_payloads_that_are_not_events(void **state)
{
    static const struct {
        const char *name, *data;
    } bad[] = {
        {"messageStart", "not json"},
        {"messageStart", "[]"},
        {"contentBlockDelta", "{\"contentBlockIndex\":0,\"delta\":{\"text\":5}}"},
        {"contentBlockDelta", "{\"contentBlockIndex\":0,\"delta\":\"x\"}"},
        {"contentBlockDelta", "{\"contentBlockIndex\":0,\"delta\":{\"toolUse\":{\"input\":{}}}}"},
        {"contentBlockDelta",
         "{\"contentBlockIndex\":0,\"delta\":{\"reasoningContent\":{\"text\":[]}}}"},
        {"contentBlockDelta", "{\"contentBlockIndex\":0,\"delta\":{\"text\":\"a\"}} x"},
        {"contentBlockStart", "{\"contentBlockIndex\":0,\"start\":{\"toolUse\":{\"name\":\"f\"}}}"},
        {"contentBlockStart", "{\"contentBlockIndex\":0}"},
        {"contentBlockStop", "{"},
        {"messageStop", "{\"stopReason\":null}"},
        {"metadata", "{\"usage\":[]}"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct dl_parse_state st;
        struct gw_buf rec = {0};

        dl_bedrock_shape.parse_init(&st);
        if (dl_bedrock_shape.event_parse(&st, gw_str_c(bad[i].name), gw_str_c(bad[i].data),
                                         t_record, &rec) != GW_E_UPSTREAM_PROTOCOL) {
            print_error("accepted %s %s\n", bad[i].name, bad[i].data);
            fail();
        }
        assert_int_equal(rec.len, 0); /* a refused event emits nothing */
        gw_buf_fini(&rec);
    }
}

static void
test_bedrock_stream_ignores_unknown_events_and_members(void **state)
{
    const char *lines[] = {"someFutureEvent",
                           "not even json",
                           "messageStart",
                           "{\"role\":\"assistant\",\"newMember\":{\"x\":[1,2]},\"p\":\"pad\"}",
                           "contentBlockStart",
                           "{\"contentBlockIndex\":0,\"start\":{\"image\":{\"format\":\"png\"}}}",
                           NULL};
    struct gw_buf rec = {0};

    (void)state;
    t_events(lines, &rec);
    t_lines_eq(&rec, "START id= model=\n");
    gw_buf_fini(&rec);
}

/* Gathers the text of DELTAs, checking that each is valid UTF-8 of at most 512 bytes. */
struct t_pieces {
    struct gw_buf text, sig;
    size_t n;
};

static int
t_piece(void *arg, const struct dl_event *ev)
{
    struct t_pieces *p = arg;

    if (ev->kind != DL_EV_DELTA)
        return 0;
    assert_true(ev->text.len <= 512);
    assert_true(gw_utf8_valid(ev->text));
    assert_int_equal(gw_buf_append_str(&p->text, ev->text), GW_OK);
    assert_int_equal(gw_buf_append_str(&p->sig, ev->signature), GW_OK);
    p->n++;
    return 0;
}

static void
test_bedrock_long_escaped_text_goes_in_pieces(void **state)
{
    static const char unit_json[] = "caf\\u00e9 \\\"q\\\" \\ud83d\\ude00\\n";
    static const char unit_text[] = "caf\xc3\xa9 \"q\" \xf0\x9f\x98\x80\n";
    struct gw_buf data = {0}, want = {0}, answer = {0};
    struct t_pieces got = {{0}, {0}, 0};
    struct dl_parse_state st;
    size_t k;

    (void)state;
    gw_buf_append_cstr(&data, "{\"contentBlockIndex\":0,\"delta\":{\"reasoningContent\":"
                              "{\"text\":\"");
    for (k = 0; k < 100; k++) {
        gw_buf_append_cstr(&data, unit_json);
        gw_buf_append_cstr(&want, unit_text);
    }
    gw_buf_append_cstr(&data, "\"}}}");
    dl_bedrock_shape.parse_init(&st);
    assert_int_equal(dl_bedrock_shape.event_parse(&st, GW_STR_LIT("contentBlockDelta"),
                                                  (struct gw_str){data.data, data.len}, t_piece,
                                                  &got),
                     GW_OK);
    assert_true(got.n > 1);
    assert_int_equal(got.text.len, want.len);
    assert_memory_equal(got.text.data, want.data, want.len);
    /* in a whole answer the signature rides on the last piece */
    gw_buf_reset(&got.text);
    got.n = 0;
    gw_buf_append_cstr(&answer, "{\"output\":{\"message\":{\"content\":[{\"reasoningContent\":"
                                "{\"reasoningText\":{\"signature\":\"SIG\",\"text\":\"");
    for (k = 0; k < 100; k++)
        gw_buf_append_cstr(&answer, unit_json);
    gw_buf_append_cstr(&answer, "\"}}}]}},\"stopReason\":\"end_turn\"}");
    assert_int_equal(dl_bedrock_shape.answer_parse(answer.data, answer.len, t_piece, &got), GW_OK);
    assert_true(got.n > 1);
    assert_int_equal(got.text.len, want.len);
    assert_memory_equal(got.text.data, want.data, want.len);
    assert_string_equal(got.sig.data, "SIG");
    gw_buf_fini(&data);
    gw_buf_fini(&want);
    gw_buf_fini(&answer);
    gw_buf_fini(&got.text);
    gw_buf_fini(&got.sig);
}

static int
t_stop_after_one(void *arg, const struct dl_event *ev)
{
    (void)ev;
    (*(int *)arg)++;
    return 1;
}

static void
test_bedrock_receiver_can_stop(void **state)
{
    size_t len;
    char *body = t_fixture("answer_tool_use.json", &len);
    struct dl_parse_state st;
    int n = 0;

    (void)state;
    assert_int_equal(dl_bedrock_shape.answer_parse(body, len, t_stop_after_one, &n), GW_OK);
    assert_int_equal(n, 1);
    n = 0;
    dl_bedrock_shape.parse_init(&st);
    assert_int_equal(dl_bedrock_shape.event_parse(
                         &st, GW_STR_LIT("contentBlockDelta"),
                         GW_STR_LIT("{\"contentBlockIndex\":0,\"delta\":{\"text\":\"a\"}}"),
                         t_stop_after_one, &n),
                     GW_OK);
    assert_int_equal(n, 1);
    free(body);
}

/* ---- whole answers ---- */

static void
test_bedrock_answer_text_and_usage(void **state)
{
    size_t len;
    char *body = t_fixture("answer_text.json", &len);
    struct gw_buf rec = {0};
    struct gw_usage u;

    (void)state;
    assert_int_equal(dl_bedrock_shape.answer_parse(body, len, t_record, &rec), GW_OK);
    t_lines_eq(&rec, "START id= model=\n"
                     "USAGE in=30 out=628 read=0 write=0\n"
                     "BLOCK_START 0 text\n"
                     "DELTA 0 text \"\\\"Here Comes the Sun\\\" by the Beatles is a popular "
                     "song.\"\n"
                     "BLOCK_STOP 0\n"
                     "FINISH stop\n");
    assert_true(dl_bedrock_shape.answer_usage(body, len, &u));
    assert_int_equal(u.input_tokens, 30);
    assert_int_equal(u.output_tokens, 628);
    gw_buf_fini(&rec);
    free(body);
}

static void
test_bedrock_answer_reasoning_and_tool_use(void **state)
{
    size_t len;
    char *body = t_fixture("answer_tool_use.json", &len);
    struct gw_buf rec = {0};
    struct gw_usage u;

    (void)state;
    assert_int_equal(dl_bedrock_shape.answer_parse(body, len, t_record, &rec), GW_OK);
    t_lines_eq(&rec, "START id= model=\n"
                     "USAGE in=375 out=77 read=3000 write=0\n"
                     "BLOCK_START 0 reasoning\n"
                     "DELTA 0 reasoning \"The user wants the top song; I should call top_song.\" "
                     "sig=\"ErcBCkgIAhABGAIiQLpy\"\n"
                     "BLOCK_STOP 0\n"
                     "BLOCK_START 1 reasoning redacted\n"
                     "DELTA 1 reasoning sig=\"UmVkYWN0ZWQ=\"\n"
                     "BLOCK_STOP 1\n"
                     "BLOCK_START 2 text\n"
                     "DELTA 2 text \"I'll look that up.\"\n"
                     "BLOCK_STOP 2\n"
                     "BLOCK_START 3 tool id=tooluse_kZJMlvQmRJ6eAyJE5GIl7Q name=top_song\n"
                     "DELTA 3 tool \"{\\n                            \\\"sign\\\": "
                     "\\\"WZPZ\\\"\\n                        }\"\n"
                     "BLOCK_STOP 3\n"
                     "FINISH tool_calls\n");
    assert_true(dl_bedrock_shape.answer_usage(body, len, &u));
    assert_int_equal(u.input_tokens, 375);
    assert_int_equal(u.cache_read_tokens, 3000);
    assert_int_equal(u.cache_write_tokens, 0);
    gw_buf_fini(&rec);
    free(body);
}

static void
test_bedrock_answer_without_stop_reason_and_skipped_blocks(void **state)
{
    const char *body = "{\"output\":{\"message\":{\"role\":\"assistant\",\"content\":["
                       "{\"image\":{\"format\":\"png\",\"source\":{\"bytes\":\"AA==\"}}},"
                       "{\"cachePoint\":{\"type\":\"default\"}},{\"text\":\"ok\"}]}},"
                       "\"usage\":{\"inputTokens\":5,\"outputTokens\":1,"
                       "\"cacheWriteInputTokens\":1024}}";
    struct gw_buf rec = {0};

    (void)state;
    assert_int_equal(dl_bedrock_shape.answer_parse(body, strlen(body), t_record, &rec), GW_OK);
    t_lines_eq(&rec, "START id= model=\n"
                     "USAGE in=5 out=1 read=0 write=1024\n"
                     "BLOCK_START 0 text\n"
                     "DELTA 0 text \"ok\"\n"
                     "BLOCK_STOP 0\n"
                     "FINISH none\n");
    gw_buf_fini(&rec);
}

static void
test_bedrock_answer_refuses_bodies_that_are_not_answers(void **state)
{
    static const char *const bad[] = {
        "",
        "[]",
        "{}",
        "{\"output\":{}}",
        "{\"output\":{\"message\":{\"content\":{}}}}",
        "{\"output\":{\"message\":{\"content\":[\"x\"]}}}",
        "{\"output\":{\"message\":{\"content\":[{\"text\":1}]}}}",
        "{\"output\":{\"message\":{\"content\":[{\"toolUse\":{\"name\":\"f\",\"input\":{}}}]}}}",
        "{\"output\":{\"message\":{\"content\":[{\"toolUse\":{\"toolUseId\":\"t\",\"name\":\"f\"}}]"
        "}"
        "}}",
        "{\"output\":{\"message\":{\"content\":[{\"text\":\"a\"},{\"reasoningContent\":"
        "{\"reasoningText\":{\"text\":2}}}]}}}",
        "{\"output\":{\"message\":{\"content\":[]}},\"stopReason\":1}",
        "{\"output\":{\"message\":{\"content\":[]}},\"usage\":5}",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct gw_buf rec = {0};

        if (dl_bedrock_shape.answer_parse(bad[i], strlen(bad[i]), t_record, &rec) !=
            GW_E_UPSTREAM_PROTOCOL) {
            print_error("accepted %s\n", bad[i]);
            fail();
        }
        assert_int_equal(rec.len, 0);
        gw_buf_fini(&rec);
    }
}

static void
test_bedrock_answer_usage_without_usage(void **state)
{
    struct gw_usage u;

    (void)state;
    assert_false(dl_bedrock_shape.answer_usage("{\"output\":{}}", 13, &u));
    assert_false(dl_bedrock_shape.answer_usage("nope", 4, &u));
    assert_true(dl_bedrock_shape.answer_usage("{\"usage\":{\"outputTokens\":9}}", 28, &u));
    assert_int_equal(u.output_tokens, 9);
    assert_int_equal(u.input_tokens, 0);
}

/* ---- errors ---- */

static void
t_error_is(const char *body, int status, const char *type, const char *message)
{
    struct gw_str t, m;

    dl_bedrock_shape.upstream_error_read(body, strlen(body), status, &t, &m);
    if (!gw_str_eq(t, gw_str_c(type)) || !gw_str_eq(m, gw_str_c(message))) {
        print_error("%s: got %.*s / %.*s\n", body, (int)t.len, t.ptr, (int)m.len, m.ptr);
        fail();
    }
}

static void
test_bedrock_upstream_error_read(void **state)
{
    (void)state;
    t_error_is("{\"message\":\"Malformed input request, please reformat your input and try "
               "again.\"}",
               400, "ValidationException",
               "Malformed input request, please reformat your input and try again.");
    t_error_is("{\"Message\":\"User: arn:aws:iam::1:user/x is not authorized\"}", 403,
               "AccessDeniedException", "User: arn:aws:iam::1:user/x is not authorized");
    t_error_is("{\"message\":\"Too many requests\",\"__type\":"
               "\"com.amazon.coral.availability#ThrottlingException\"}",
               429, "ThrottlingException", "Too many requests");
    t_error_is("{\"code\":\"ServiceUnavailableException:http://internal.amazon.com/x\"}", 503,
               "ServiceUnavailableException", "the upstream is unavailable");
    t_error_is("<html>bad gateway</html>", 502, "InternalServerException", "the upstream failed");
    t_error_is("{\"message\":\"\"}", 404, "ResourceNotFoundException",
               "the upstream does not know this model");
    t_error_is("{\"message\":\"a \\\"quoted\\\" word\"}", 424, "ModelErrorException",
               "a \\\"quoted\\\" word"); /* escapes left in */
    t_error_is("", 418, "ValidationException", "the upstream refused the request");
}

static void
test_bedrock_exception_table(void **state)
{
    (void)state;
    assert_int_equal(dl_bedrock_exception_status(GW_STR_LIT("throttlingException")), 429);
    assert_int_equal(dl_bedrock_exception_status(GW_STR_LIT("ThrottlingException")), 429);
    assert_int_equal(dl_bedrock_exception_status(GW_STR_LIT("ServiceUnavailableException")), 503);
    assert_int_equal(dl_bedrock_exception_status(GW_STR_LIT("validationException")), 400);
    assert_int_equal(dl_bedrock_exception_status(GW_STR_LIT("modelStreamErrorException")), 500);
    assert_int_equal(dl_bedrock_exception_status(GW_STR_LIT("internalServerException")), 500);
    assert_int_equal(dl_bedrock_exception_status(GW_STR_LIT("ModelNotReadyException")), 429);
    assert_int_equal(dl_bedrock_exception_status(GW_STR_LIT("AccessDeniedException")), 403);
    assert_int_equal(dl_bedrock_exception_status(GW_STR_LIT("throttlingexception")), 0);
    assert_int_equal(dl_bedrock_exception_status(GW_STR_LIT("")), 0);
    assert_string_equal(dl_bedrock_exception_name(429), "ThrottlingException");
    assert_string_equal(dl_bedrock_exception_name(503), "ServiceUnavailableException");
    assert_string_equal(dl_bedrock_exception_name(400), "ValidationException");
    assert_string_equal(dl_bedrock_exception_name(409), "ValidationException");
    assert_string_equal(dl_bedrock_exception_name(599), "InternalServerException");
}

/* ---- the path, the families ---- */

static void
t_path_is(const char *prefix, const char *model, bool stream, const char *want)
{
    struct gw_buf out = {0};

    assert_int_equal(dl_bedrock_path(gw_str_c(prefix), gw_str_c(model), stream, &out), GW_OK);
    assert_string_equal(out.data, want);
    gw_buf_fini(&out);
}

static void
test_bedrock_path_encodes_the_model(void **state)
{
    (void)state;
    t_path_is("", "anthropic.claude-sonnet-4-5-20250929-v1:0", false,
              "/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse");
    t_path_is("", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", true,
              "/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream");
    t_path_is("/proxy",
              "arn:aws:bedrock:us-east-1:123456789012:inference-profile/"
              "us.meta.llama3-2-1b-instruct-v1:0",
              false,
              "/proxy/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile"
              "%2Fus.meta.llama3-2-1b-instruct-v1%3A0/converse");
    t_path_is("", "a b~_%\xc3\xa9", true, "/model/a%20b~_%25%C3%A9/converse-stream");
}

static void
test_bedrock_families(void **state)
{
    (void)state;
    assert_int_equal(dl_bedrock_family(GW_STR_LIT("anthropic.claude-3-5-haiku-20241022-v1:0")),
                     DL_BEDROCK_CLAUDE);
    assert_int_equal(dl_bedrock_family(GW_STR_LIT("eu.anthropic.claude-sonnet-4-20250514-v1:0")),
                     DL_BEDROCK_CLAUDE);
    assert_int_equal(dl_bedrock_family(GW_STR_LIT("arn:aws:bedrock:us-east-1::foundation-model/"
                                                  "anthropic.claude-v2:1")),
                     DL_BEDROCK_CLAUDE);
    assert_int_equal(dl_bedrock_family(GW_STR_LIT("us.amazon.nova-pro-v1:0")), DL_BEDROCK_NOVA);
    assert_int_equal(dl_bedrock_family(GW_STR_LIT("meta.llama3-70b-instruct-v1:0")),
                     DL_BEDROCK_OTHER);
    assert_int_equal(dl_bedrock_family(GW_STR_LIT("notanthropic.claude")), DL_BEDROCK_OTHER);
    assert_int_equal(dl_bedrock_family(GW_STR_LIT("arn:aws:bedrock:us-east-1:1:application-"
                                                  "inference-profile/abc123")),
                     DL_BEDROCK_OTHER);
}

static void
test_bedrock_table_row(void **state)
{
    const struct dl_shape_ops *o = dl_shape_ops(DL_SHAPE_BEDROCK);

    (void)state;
    assert_ptr_equal(o, &dl_bedrock_shape);
    assert_string_equal(o->name, "bedrock");
    assert_non_null(o->request_render);
    assert_non_null(o->event_parse);
    assert_non_null(o->answer_parse);
    assert_non_null(o->answer_usage);
    assert_non_null(o->upstream_error_read);
    /* no client speaks Converse to the gateway */
    assert_null(o->request_parse);
    assert_null(o->event_render);
    assert_null(o->answer_render);
    assert_null(o->error_render);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bedrock_stream_reasoning_text_and_tool_call),
        cmocka_unit_test(test_bedrock_stream_stop_reasons),
        cmocka_unit_test(test_bedrock_stream_stop_sequence_and_open_block),
        cmocka_unit_test(test_bedrock_stream_redacted_reasoning_and_index_changes),
        cmocka_unit_test(test_bedrock_stream_exceptions),
        cmocka_unit_test(test_bedrock_stream_exception_after_finish_changes_nothing),
        cmocka_unit_test(test_bedrock_stream_refuses_payloads_that_are_not_events),
        cmocka_unit_test(test_bedrock_stream_ignores_unknown_events_and_members),
        cmocka_unit_test(test_bedrock_long_escaped_text_goes_in_pieces),
        cmocka_unit_test(test_bedrock_receiver_can_stop),
        cmocka_unit_test(test_bedrock_answer_text_and_usage),
        cmocka_unit_test(test_bedrock_answer_reasoning_and_tool_use),
        cmocka_unit_test(test_bedrock_answer_without_stop_reason_and_skipped_blocks),
        cmocka_unit_test(test_bedrock_answer_refuses_bodies_that_are_not_answers),
        cmocka_unit_test(test_bedrock_answer_usage_without_usage),
        cmocka_unit_test(test_bedrock_upstream_error_read),
        cmocka_unit_test(test_bedrock_exception_table),
        cmocka_unit_test(test_bedrock_path_encodes_the_model),
        cmocka_unit_test(test_bedrock_families),
        cmocka_unit_test(test_bedrock_table_row),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
