/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_responses_answer.c - OpenAI Responses answers both ways
 * (dialects/responses_answer.c): a recorded upstream stream (reasoning with two summary
 * parts and its encrypted content, text, two parallel function calls) parsed into the
 * exact canonical events; unnamed, ignored and malformed events; errors, failures and
 * incomplete answers; items that stream nothing; the receiver stopping; no allocation on
 * the relay's hot path. Recorded non-streamed answers parsed; usage read without a parse.
 * Canonical events rendered into the exact frames a Responses client reads (golden files
 * for Chat, Messages and Responses upstreams; every frame checked for its type, its
 * sequence_number and its item), calls left open for late argument deltas, a usage
 * after the finish, length and content filter finishes, errors; the stream's final
 * response equal to the non-streamed answer of the same events; hub round trips through
 * Chat and Messages renderers; out of memory.
 * See: dialects/responses_answer.c, tests/fixtures/responses/
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/alloc.h"
#include "core/arena.h"
#include "dialects/canon.h"
#include "dialects/responses-priv.h"
#include "dialects/responses.h"

#define T_FIXTURES "tests/fixtures/responses/"
#include "t_messages.h"

#define T_MAX_EVENTS 256

#define T_CTX(a, up)                                                                               \
    {                                                                                              \
        .model = GW_STR_LIT("client-model"), .id = GW_STR_LIT("req42"), .created = 1700000000,     \
        .upstream = (up), .arena = (a)                                                             \
    }

/* Feeds the SSE text <sse> of a <shape> upstream to a fresh parser, recording the events
 * into <got>; each event must give GW_OK. */
static void
t_parse_sse_as(enum dl_shape shape, const char *sse, size_t len, struct gw_buf *got)
{
    static struct t_sse ev[T_MAX_EVENTS];
    const struct dl_shape_ops *ops = dl_shape_ops(shape);
    struct dl_parse_state st;
    size_t n = t_sse_split(sse, len, ev, T_MAX_EVENTS), i;

    ops->parse_init(&st);
    for (i = 0; i < n; i++)
        assert_int_equal(ops->event_parse(&st, ev[i].event, ev[i].data, t_record, got), GW_OK);
}

/* One event into a parser state, returning the code; recorded into <got>. */
static enum gw_code
t_event(struct dl_parse_state *st, const char *name, const char *data, struct gw_buf *got)
{
    return dl_responses_shape.event_parse(st, gw_str_c(name), gw_str_c(data), t_record, got);
}

static const char t_recorded_events[] =
    "START id=resp_68c1e0a1b2c38193a4b5c6d7e8f90a1b model=gpt-5-2025-08-07\n"
    "BLOCK_START 0 reasoning\n"
    "DELTA 0 reasoning \"**Checking the weather**\\n\\n\"\n"
    "DELTA 0 reasoning \"Two cities: call the tool twice.\"\n"
    "DELTA 0 reasoning \"\\n\\n\"\n"
    "DELTA 0 reasoning \"Then answer \\\"briefly\\\".\"\n"
    "DELTA 0 reasoning sig=\"gAAAAABowuCiZx9Encrypted0ReasoningBlob==\"\n"
    "BLOCK_STOP 0\n"
    "BLOCK_START 1 text\n"
    "DELTA 1 text \"Let me check \"\n"
    "DELTA 1 text \"both cities\"\n"
    "DELTA 1 text \"\xe2\x80\xa6\\n\"\n"
    "BLOCK_STOP 1\n"
    "BLOCK_START 2 tool id=call_Nq7eXQ2bN1pY5mK3 name=get_weather\n"
    "DELTA 2 tool \"{\\\"city\\\":\"\n"
    "DELTA 2 tool \"\\\"Paris\\\"}\"\n"
    "BLOCK_STOP 2\n"
    "BLOCK_START 3 tool id=call_Zr8fYR3cO2qZ6nL4 name=get_weather\n"
    "DELTA 3 tool \"{\\\"city\\\":\"\n"
    "DELTA 3 tool \"\\\"Oslo\\\"}\"\n"
    "BLOCK_STOP 3\n"
    "USAGE in=152 out=212 read=1280 write=0\n"
    "FINISH tool_calls\n";

/* ---- upstream streams ---- */

static void
test_responses_events_of_a_recorded_stream(void **state)
{
    struct gw_buf got = {0};
    size_t len;
    char *sse = t_fixture("stream_reasoning_text_tools.sse", &len);

    (void)state;
    t_parse_sse_as(DL_SHAPE_RESPONSES, sse, len, &got);
    t_lines_eq(&got, t_recorded_events);
    gw_buf_fini(&got);
    free(sse);
}

static void
test_responses_events_without_names_read_the_data_type(void **state)
{
    static struct t_sse ev[T_MAX_EVENTS];
    struct gw_buf got = {0};
    struct dl_parse_state st;
    size_t len, n, i;
    char *sse = t_fixture("stream_reasoning_text_tools.sse", &len);

    (void)state;
    n = t_sse_split(sse, len, ev, T_MAX_EVENTS);
    dl_responses_shape.parse_init(&st);
    for (i = 0; i < n; i++)
        assert_int_equal(
            dl_responses_shape.event_parse(&st, (struct gw_str){"", 0}, ev[i].data, t_record, &got),
            GW_OK);
    t_lines_eq(&got, t_recorded_events);
    gw_buf_fini(&got);
    free(sse);
}

static void
test_responses_events_malformed_data_is_upstream_protocol(void **state)
{
    static const char *const bad[][2] = {
        {"response.created", "not json"},
        {"response.created", "{\"response\":[]}"},
        {"response.output_text.delta", "{\"output_index\":0,\"delta\":7}"},
        {"response.output_text.delta", "{\"output_index\":0,\"delta\":\"a\"} trailing"},
        {"response.output_item.added", "{\"output_index\":0}"},
        {"response.output_item.added",
         "{\"output_index\":0,\"item\":{\"type\":\"function_call\"}}"},
        {"response.output_item.done",
         "{\"output_index\":0,\"item\":{\"type\":\"message\",\"content\":[{\"text\":1}]}}"},
        {"response.output_item.done",
         "{\"output_index\":0,\"item\":{\"type\":\"reasoning\",\"encrypted_content\":1}}"},
        {"response.content_part.added", "{\"output_index\":0,\"content_index\":0}"},
        {"response.completed", "{\"response\":\"done\"}"},
        {"response.completed",
         "{\"response\":{\"status\":\"completed\",\"output\":[{\"type\":\"function_call\"}]}}"},
        {"error", "[1]"},
        {"", "{\"type\":"},
    };
    struct gw_buf got = {0};
    struct dl_parse_state st;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        dl_responses_shape.parse_init(&st);
        assert_int_equal(t_event(&st, bad[i][0], bad[i][1], &got), GW_E_UPSTREAM_PROTOCOL);
        assert_int_equal(got.len, 0); /* a refused event emits nothing */
    }
    gw_buf_fini(&got);
}

static void
test_responses_events_ignored_ones_are_not_read(void **state)
{
    struct gw_buf got = {0};
    struct dl_parse_state st;

    (void)state;
    dl_responses_shape.parse_init(&st);
    /* events the hub does not need are not even scanned */
    assert_int_equal(t_event(&st, "response.output_text.done", "not json", &got), GW_OK);
    assert_int_equal(t_event(&st, "keepalive", "", &got), GW_OK);
    assert_int_equal(t_event(&st, "response.web_search_call.searching", "{}", &got), GW_OK);
    assert_int_equal(t_event(&st, "", "{\"type\":\"response.queued\",\"response\":{}}", &got),
                     GW_OK);
    assert_int_equal(got.len, 0);
    /* a hosted tool's item starts no block; a reasoning_text part starts none either */
    assert_int_equal(t_event(&st, "response.output_item.added",
                             "{\"output_index\":0,\"item\":{\"type\":\"web_search_call\"}}", &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "response.output_item.done",
                             "{\"output_index\":0,\"item\":{\"type\":\"web_search_call\"}}", &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "response.content_part.added",
                             "{\"output_index\":0,\"content_index\":0,\"part\":{\"type\":"
                             "\"reasoning_text\",\"text\":\"\"}}",
                             &got),
                     GW_OK);
    assert_int_equal(got.len, 0);
    /* response.in_progress stands in for a missing response.created */
    assert_int_equal(t_event(&st, "response.in_progress",
                             "{\"response\":{\"id\":\"r\",\"model\":\"m\",\"created_at\":5}}",
                             &got),
                     GW_OK);
    assert_int_equal(
        t_event(&st, "response.created", "{\"response\":{\"id\":\"r2\",\"model\":\"m2\"}}", &got),
        GW_OK);
    t_lines_eq(&got, "START id=r model=m\n");
    gw_buf_fini(&got);
}

static void
test_responses_events_errors_end_the_stream(void **state)
{
    struct gw_buf got = {0};
    struct dl_parse_state st;

    (void)state;
    dl_responses_shape.parse_init(&st);
    assert_int_equal(t_event(&st, "error",
                             "{\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":"
                             "\"Slow down\",\"param\":null,\"sequence_number\":3}",
                             &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "response.output_text.delta",
                             "{\"output_index\":0,\"content_index\":0,\"delta\":\"late\"}", &got),
                     GW_OK);
    t_lines_eq(&got, "ERROR type=rate_limit_exceeded status=429 message=\"Slow down\"\n");
    /* nested, as some providers send it */
    gw_buf_reset(&got);
    dl_responses_shape.parse_init(&st);
    assert_int_equal(t_event(&st, "",
                             "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\","
                             "\"message\":\"bad\"}}",
                             &got),
                     GW_OK);
    t_lines_eq(&got, "ERROR type=invalid_request_error status=400 message=\"bad\"\n");
    /* response.failed after content: the open block is stopped first */
    gw_buf_reset(&got);
    dl_responses_shape.parse_init(&st);
    assert_int_equal(t_event(&st, "response.output_text.delta",
                             "{\"output_index\":0,\"content_index\":0,\"delta\":\"par\"}", &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "response.failed",
                             "{\"response\":{\"status\":\"failed\",\"error\":{\"code\":"
                             "\"server_error\",\"message\":\"The server had an error\"}}}",
                             &got),
                     GW_OK);
    t_lines_eq(&got, "START id= model=\n"
                     "BLOCK_START 0 text\n"
                     "DELTA 0 text \"par\"\n"
                     "BLOCK_STOP 0\n"
                     "ERROR type=server_error status=500 message=\"The server had an error\"\n");
    /* the statuses codes stand for */
    gw_buf_reset(&got);
    dl_responses_shape.parse_init(&st);
    assert_int_equal(
        t_event(&st, "error", "{\"code\":\"invalid_image_url\",\"message\":\"\"}", &got), GW_OK);
    dl_responses_shape.parse_init(&st);
    assert_int_equal(t_event(&st, "error", "{\"code\":\"whatever\"}", &got), GW_OK);
    dl_responses_shape.parse_init(&st);
    assert_int_equal(t_event(&st, "error", "{}", &got), GW_OK);
    t_lines_eq(&got, "ERROR type=invalid_image_url status=400 message=\"\"\n"
                     "ERROR type=whatever status=500 message=\"\"\n"
                     "ERROR type=server_error status=500 message=\"\"\n");
    gw_buf_fini(&got);
}

static void
test_responses_events_finish_reasons(void **state)
{
    static const char *const cases[][3] = {
        {"response.incomplete",
         "{\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":"
         "\"max_output_tokens\"}}}",
         "FINISH length\n"},
        {"response.incomplete",
         "{\"response\":{\"status\":\"incomplete\",\"incomplete_details\":{\"reason\":"
         "\"content_filter\"}}}",
         "FINISH content_filter\n"},
        {"response.completed", "{\"response\":{\"status\":\"incomplete\"}}", "FINISH length\n"},
        {"response.completed", "{\"response\":{\"status\":\"completed\"}}", "FINISH stop\n"},
        {"response.completed", "{\"response\":{}}", "FINISH stop\n"},
    };
    struct gw_buf got = {0};
    struct dl_parse_state st;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gw_buf_reset(&got);
        dl_responses_shape.parse_init(&st);
        assert_int_equal(t_event(&st, "response.created", "{\"response\":{\"id\":\"r\"}}", &got),
                         GW_OK);
        assert_int_equal(t_event(&st, cases[i][0], cases[i][1], &got), GW_OK);
        assert_non_null(strstr(got.data, cases[i][2]));
        /* nothing after the end */
        assert_int_equal(t_event(&st, "response.completed", "{\"response\":{}}", &got), GW_OK);
        assert_ptr_equal(strstr(got.data, "FINISH"), strstr(got.data, cases[i][2]));
        assert_null(strstr(strstr(got.data, "FINISH") + 1, "FINISH"));
    }
    gw_buf_fini(&got);
}

static void
test_responses_events_whole_items_and_late_deltas(void **state)
{
    struct gw_buf got = {0};
    struct dl_parse_state st;

    (void)state;
    dl_responses_shape.parse_init(&st);
    /* servers that send whole items only: the content comes from the done item */
    assert_int_equal(
        t_event(&st, "response.output_item.done",
                "{\"output_index\":0,\"item\":{\"type\":\"reasoning\",\"summary\":[{\"type\":"
                "\"summary_text\",\"text\":\"a\"},{\"type\":\"summary_text\",\"text\":\"b\"}],"
                "\"encrypted_content\":\"enc\"}}",
                &got),
        GW_OK);
    assert_int_equal(t_event(&st, "response.output_item.done",
                             "{\"output_index\":1,\"item\":{\"type\":\"message\",\"content\":["
                             "{\"type\":\"output_text\",\"text\":\"hi\"},{\"type\":\"refusal\","
                             "\"refusal\":\"no\"},{\"type\":\"output_text\",\"text\":\"\"}]}}",
                             &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "response.output_item.done",
                             "{\"output_index\":2,\"item\":{\"type\":\"function_call\",\"call_id\":"
                             "\"c\",\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}",
                             &got),
                     GW_OK);
    /* a text delta without its part added starts the block; after its stop, a new one */
    assert_int_equal(t_event(&st, "response.refusal.delta",
                             "{\"output_index\":3,\"content_index\":0,\"delta\":\"r\"}", &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "response.content_part.done",
                             "{\"output_index\":3,\"content_index\":0}", &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "response.output_text.delta",
                             "{\"output_index\":3,\"content_index\":0,\"delta\":\"s\"}", &got),
                     GW_OK);
    /* an argument delta of a stopped call keeps its block index; an empty delta nothing */
    assert_int_equal(t_event(&st, "response.function_call_arguments.delta",
                             "{\"output_index\":2,\"delta\":\"!\"}", &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "response.function_call_arguments.delta",
                             "{\"output_index\":2,\"delta\":\"\"}", &got),
                     GW_OK);
    /* a call never added: its deltas wait for its done item */
    assert_int_equal(t_event(&st, "response.function_call_arguments.delta",
                             "{\"output_index\":9,\"delta\":\"lost?\"}", &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "response.completed",
                             "{\"response\":{\"status\":\"completed\",\"output\":[{\"type\":"
                             "\"message\",\"content\":[{\"type\":\"output_text\",\"text\":"
                             "\"not again\"}]}]}}",
                             &got),
                     GW_OK);
    t_lines_eq(&got, "START id= model=\n"
                     "BLOCK_START 0 reasoning\n"
                     "DELTA 0 reasoning \"a\"\n"
                     "DELTA 0 reasoning \"\\n\\n\"\n"
                     "DELTA 0 reasoning \"b\"\n"
                     "DELTA 0 reasoning sig=\"enc\"\n"
                     "BLOCK_STOP 0\n"
                     "BLOCK_START 1 text\n"
                     "DELTA 1 text \"hi\"\n"
                     "BLOCK_STOP 1\n"
                     "BLOCK_START 2 text\n"
                     "DELTA 2 text \"no\"\n"
                     "BLOCK_STOP 2\n"
                     "BLOCK_START 3 tool id=c name=f\n"
                     "DELTA 3 tool \"{\\\"x\\\":1}\"\n"
                     "BLOCK_STOP 3\n"
                     "BLOCK_START 4 text\n"
                     "DELTA 4 text \"r\"\n"
                     "BLOCK_STOP 4\n"
                     "BLOCK_START 5 text\n"
                     "DELTA 5 text \"s\"\n"
                     "DELTA 3 tool \"!\"\n"
                     "BLOCK_STOP 5\n"
                     "FINISH tool_calls\n");
    gw_buf_fini(&got);
}

static void
test_responses_events_completed_gives_what_was_not_streamed(void **state)
{
    struct gw_buf got = {0};
    struct dl_parse_state st;

    (void)state;
    dl_responses_shape.parse_init(&st);
    /* only the final event: its output makes the blocks */
    assert_int_equal(
        t_event(&st, "response.completed",
                "{\"response\":{\"id\":\"r9\",\"model\":\"m9\",\"created_at\":1,\"status\":"
                "\"completed\",\"output\":[{\"type\":\"web_search_call\",\"id\":\"ws\"},"
                "{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"x\"}]}],"
                "\"usage\":{\"input_tokens\":5,\"output_tokens\":1,\"input_tokens_details\":"
                "{\"cached_tokens\":9}}}}",
                &got),
        GW_OK);
    /* cached above input (a broken count) is capped at it */
    t_lines_eq(&got, "START id=r9 model=m9\n"
                     "BLOCK_START 0 text\n"
                     "DELTA 0 text \"x\"\n"
                     "BLOCK_STOP 0\n"
                     "USAGE in=0 out=1 read=5 write=0\n"
                     "FINISH stop\n");
    gw_buf_fini(&got);
}

static int
t_stop_after_two(void *arg, const struct dl_event *ev)
{
    struct gw_buf *b = arg;

    t_record(b, ev);
    return strchr(b->data, '\n') != strrchr(b->data, '\n'); /* stop at the second line */
}

static void
test_responses_events_receiver_stop_is_honoured(void **state)
{
    static const char done[] =
        "{\"response\":{\"id\":\"r\",\"status\":\"completed\",\"output\":[{\"type\":"
        "\"message\",\"content\":[{\"type\":\"output_text\",\"text\":\"x\"}]}],\"usage\":"
        "{\"input_tokens\":1,\"output_tokens\":1}}}";
    struct gw_buf got = {0};
    struct dl_parse_state st;

    (void)state;
    /* six events to give; the receiver stops at the second and nothing follows */
    dl_responses_shape.parse_init(&st);
    assert_int_equal(dl_responses_shape.event_parse(&st, GW_STR_LIT("response.completed"),
                                                    gw_str_c(done), t_stop_after_two, &got),
                     GW_OK);
    t_lines_eq(&got, "START id=r model=\nBLOCK_START 0 text\n");
    gw_buf_reset(&got);
    assert_int_equal(
        dl_responses_shape.answer_parse(done + 12, strlen(done) - 13, t_stop_after_two, &got),
        GW_OK);
    t_lines_eq(&got, "START id=r model=\nBLOCK_START 0 text\n");
    gw_buf_fini(&got);
}

static void
test_responses_events_relay_inspection_allocates_nothing(void **state)
{
    static struct t_sse ev[T_MAX_EVENTS];
    struct gw_buf got = {0};
    struct dl_parse_state st;
    size_t len, n, i;
    char *sse = t_fixture("stream_reasoning_text_tools.sse", &len);

    (void)state;
    assert_int_equal(gw_buf_reserve(&got, 8192), GW_OK); /* the recorder's own room */
    n = t_sse_split(sse, len, ev, T_MAX_EVENTS);
    dl_responses_shape.parse_init(&st);
    gw_alloc_fail_at(1); /* any allocation fails from here */
    for (i = 0; i < n; i++)
        assert_int_equal(
            dl_responses_shape.event_parse(&st, ev[i].event, ev[i].data, t_record, &got), GW_OK);
    gw_alloc_fail_at(0);
    t_lines_eq(&got, t_recorded_events);
    gw_buf_fini(&got);
    free(sse);
}

static void
test_responses_events_long_escaped_delta_and_out_of_memory(void **state)
{
    struct dl_parse_state st;
    struct gw_buf data = {0}, got = {0};
    size_t i;

    (void)state;
    assert_int_equal(
        gw_buf_append_cstr(&data, "{\"output_index\":0,\"content_index\":0,\"delta\":\""), GW_OK);
    for (i = 0; i < 300; i++)
        assert_int_equal(gw_buf_append_cstr(&data, "a\\n"), GW_OK);
    assert_int_equal(gw_buf_append_cstr(&data, "\"}"), GW_OK);
    dl_responses_shape.parse_init(&st);
    assert_int_equal(dl_responses_shape.event_parse(&st, GW_STR_LIT("response.output_text.delta"),
                                                    (struct gw_str){data.data, data.len}, t_record,
                                                    &got),
                     GW_OK);
    assert_non_null(strstr(got.data, "DELTA 0 text \"a\\na\\n"));
    gw_buf_reset(&got);
    gw_alloc_fail_at(1);
    assert_int_equal(dl_responses_shape.event_parse(&st, GW_STR_LIT("response.output_text.delta"),
                                                    (struct gw_str){data.data, data.len}, t_record,
                                                    &got),
                     GW_E_NOMEM);
    gw_alloc_fail_at(0);
    gw_buf_fini(&data);
    gw_buf_fini(&got);
}

/* ---- upstream answers ---- */

static void
t_answer_events(const char *name, struct gw_buf *got)
{
    size_t len;
    char *body = t_fixture(name, &len);

    assert_int_equal(dl_responses_shape.answer_parse(body, len, t_record, got), GW_OK);
    free(body);
}

static void
test_responses_answer_events_of_recorded_answers(void **state)
{
    struct gw_buf got = {0};

    (void)state;
    t_answer_events("answer_reasoning_tools.json", &got);
    /* the same blocks as the stream, each started, filled and stopped */
    t_lines_eq(&got, "START id=resp_68c1e0a1b2c38193a4b5c6d7e8f90a1b model=gpt-5-2025-08-07\n"
                     "BLOCK_START 0 reasoning\n"
                     "DELTA 0 reasoning \"**Checking the weather**\\n\\nTwo cities: call the tool "
                     "twice.\"\n"
                     "DELTA 0 reasoning \"\\n\\n\"\n"
                     "DELTA 0 reasoning \"Then answer \\\"briefly\\\".\"\n"
                     "DELTA 0 reasoning sig=\"gAAAAABowuCiZx9Encrypted0ReasoningBlob==\"\n"
                     "BLOCK_STOP 0\n"
                     "BLOCK_START 1 text\n"
                     "DELTA 1 text \"Let me check both cities\xe2\x80\xa6\\n\"\n"
                     "BLOCK_STOP 1\n"
                     "BLOCK_START 2 tool id=call_Nq7eXQ2bN1pY5mK3 name=get_weather\n"
                     "DELTA 2 tool \"{\\\"city\\\":\\\"Paris\\\"}\"\n"
                     "BLOCK_STOP 2\n"
                     "BLOCK_START 3 tool id=call_Zr8fYR3cO2qZ6nL4 name=get_weather\n"
                     "DELTA 3 tool \"{\\\"city\\\":\\\"Oslo\\\"}\"\n"
                     "BLOCK_STOP 3\n"
                     "USAGE in=152 out=212 read=1280 write=0\n"
                     "FINISH tool_calls\n");
    gw_buf_reset(&got);
    t_answer_events("answer_incomplete.json", &got);
    t_lines_eq(&got, "START id=resp_inc1 model=gpt-4.1-2025-04-14\n"
                     "BLOCK_START 0 text\n"
                     "DELTA 0 text \"The first part of a long\"\n"
                     "BLOCK_STOP 0\n"
                     "USAGE in=20 out=16 read=0 write=0\n"
                     "FINISH length\n");
    gw_buf_fini(&got);
}

static void
test_responses_answer_failed_error_and_refused_bodies(void **state)
{
    static const char *const bad[] = {
        "",
        "[]",
        "{\"id\":\"r\"}",
        "{\"output\":{}}",
        "{\"output\":[1]}",
        "{\"output\":[{\"type\":\"function_call\",\"call_id\":\"c\"}]}",
        "{\"output\":[{\"type\":\"message\",\"content\":[{\"type\":\"output_text\",\"text\":"
        "[]}]}]}",
        "{\"output\":[]} x",
    };
    struct gw_buf got = {0};
    const char *failed = "{\"id\":\"r\",\"status\":\"failed\",\"output\":[],\"error\":{\"code\":"
                         "\"server_error\",\"message\":\"oops\"}}";
    const char *error = "{\"error\":{\"message\":\"Rate limit\",\"type\":\"tokens\",\"code\":"
                        "\"rate_limit_exceeded\"}}";
    const char *running = "{\"id\":\"r\",\"status\":\"in_progress\",\"output\":[]}";
    /* reasoning text without a summary (open-weight models); a hosted tool's item */
    const char *raw = "{\"id\":\"q\",\"output\":[{\"type\":\"web_search_call\"},{\"type\":"
                      "\"reasoning\",\"summary\":[],\"content\":[{\"type\":\"reasoning_text\","
                      "\"text\":\"r1\"},{\"type\":\"reasoning_text\",\"text\":\"r2\"}]}]}";
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(dl_responses_shape.answer_parse(bad[i], strlen(bad[i]), t_record, &got),
                         GW_E_UPSTREAM_PROTOCOL);
        assert_int_equal(got.len, 0);
    }
    assert_int_equal(dl_responses_shape.answer_parse(failed, strlen(failed), t_record, &got),
                     GW_OK);
    assert_int_equal(dl_responses_shape.answer_parse(error, strlen(error), t_record, &got), GW_OK);
    assert_int_equal(dl_responses_shape.answer_parse(running, strlen(running), t_record, &got),
                     GW_OK);
    assert_int_equal(dl_responses_shape.answer_parse(raw, strlen(raw), t_record, &got), GW_OK);
    t_lines_eq(&got, "START id=r model=\n"
                     "ERROR type=server_error status=500 message=\"oops\"\n"
                     "ERROR type=rate_limit_exceeded status=429 message=\"Rate limit\"\n"
                     "START id=r model=\n"
                     "FINISH none\n"
                     "START id=q model=\n"
                     "BLOCK_START 0 reasoning\n"
                     "DELTA 0 reasoning \"r1\"\n"
                     "DELTA 0 reasoning \"\\n\\n\"\n"
                     "DELTA 0 reasoning \"r2\"\n"
                     "BLOCK_STOP 0\n"
                     "FINISH stop\n");
    gw_buf_fini(&got);
}

static void
test_responses_answer_usage_without_a_parse(void **state)
{
    struct gw_usage u;
    size_t len;
    char *body = t_fixture("answer_reasoning_tools.json", &len);

    (void)state;
    assert_true(dl_responses_shape.answer_usage(body, len, &u));
    assert_int_equal(u.input_tokens, 152);
    assert_int_equal(u.cache_read_tokens, 1280);
    assert_int_equal(u.output_tokens, 212);
    assert_int_equal(u.cache_write_tokens, 0);
    assert_false(dl_responses_shape.answer_usage("{\"usage\":null}", 14, &u));
    assert_false(dl_responses_shape.answer_usage("{\"usage\":{}", 11, &u));
    assert_true(dl_responses_shape.answer_usage("{\"usage\":{}}", 12, &u));
    assert_int_equal(u.input_tokens + u.output_tokens, 0);
    free(body);
}

/* ---- client side: frames ---- */

/* What one canonical event does to a render state and a fold at once. */
struct t_both {
    struct dl_render_state rs;
    struct gw_buf frames;
    struct dl_answer fold;
    bool finished;
};

static int
t_on_both(void *arg, const struct dl_event *ev)
{
    struct t_both *b = arg;

    assert_int_equal(dl_responses_shape.event_render(&b->rs, ev, &b->frames), GW_OK);
    assert_int_equal(dl_answer_fold(&b->fold, ev), 0);
    if (ev->kind == DL_EV_FINISH)
        b->finished = true;
    return 0;
}

/* Parses <name> (a <from> upstream's stream) and renders it for a Responses client. */
static void
t_through(enum dl_shape from, const char *dir, const char *name, struct gw_arena *a,
          struct t_both *b)
{
    static struct t_sse ev[T_MAX_EVENTS];
    struct dl_render_ctx ctx = T_CTX(a, from);
    const struct dl_shape_ops *ops = dl_shape_ops(from);
    struct dl_parse_state st;
    char path[128];
    size_t len, n, i;
    char *sse;

    snprintf(path, sizeof(path), "../%s/%s", dir, name);
    sse = t_fixture(path, &len);
    memset(b, 0, sizeof(*b));
    dl_answer_init(&b->fold, a);
    dl_responses_shape.render_init(&b->rs, &ctx);
    n = t_sse_split(sse, len, ev, T_MAX_EVENTS);
    ops->parse_init(&st);
    for (i = 0; i < n; i++)
        assert_int_equal(ops->event_parse(&st, ev[i].event, ev[i].data, t_on_both, b), GW_OK);
    if (b->finished)
        assert_int_equal(dl_responses_shape.render_end(&b->rs, &b->frames), GW_OK);
    free(sse);
}

/* Every frame: "event: X\ndata: {json}\n\n" with type X, sequence_number 0, 1, 2...;
 * created first, one final frame last; items added in order, their events naming an
 * item added, their id the item's. Returns the final frame's response (decref it). */
static json_t *
t_check_frames(const struct gw_buf *f)
{
    static struct t_sse ev[T_MAX_EVENTS * 2];
    size_t n = t_sse_split(f->data, f->len, ev, T_MAX_EVENTS * 2), i;
    json_t *ids = json_array(), *final = NULL;

    assert_true(n >= 3);
    for (i = 0; i < n; i++) {
        json_t *j = json_loadb(ev[i].data.ptr, ev[i].data.len, 0, NULL);
        const char *type = json_string_value(json_object_get(j, "type"));
        json_t *oi = json_object_get(j, "output_index");

        assert_non_null(j);
        assert_non_null(type);
        assert_true(gw_str_eq(ev[i].event, gw_str_c(type)));
        assert_int_equal(json_integer_value(json_object_get(j, "sequence_number")), i);
        if (i == 0)
            assert_string_equal(type, "response.created");
        if (strcmp(type, "response.output_item.added") == 0) {
            json_t *item = json_object_get(j, "item");

            assert_int_equal(json_integer_value(oi), json_array_size(ids));
            json_array_append(ids, json_object_get(item, "id"));
        } else if (oi) {
            json_t *item = json_object_get(j, "item");
            json_t *id = item ? json_object_get(item, "id") : json_object_get(j, "item_id");

            assert_true((size_t)json_integer_value(oi) < json_array_size(ids));
            assert_true(json_equal(id, json_array_get(ids, (size_t)json_integer_value(oi))));
        }
        if (strcmp(type, "response.completed") == 0 || strcmp(type, "response.incomplete") == 0 ||
            strcmp(type, "response.failed") == 0) {
            assert_int_equal(i, n - 1);
            final = json_incref(json_object_get(j, "response"));
        }
        json_decref(j);
    }
    json_decref(ids);
    assert_non_null(final);
    return final;
}

static void
t_golden(enum dl_shape from, const char *dir, const char *name, const char *golden)
{
    struct gw_arena a;
    struct t_both b;
    struct dl_render_ctx ctx = T_CTX(&a, from);
    struct gw_buf answer = {0};
    size_t len;
    char *want = t_fixture(golden, &len);
    json_t *final, *same;

    gw_arena_init(&a);
    t_through(from, dir, name, &a, &b);
    if (b.frames.len != len || memcmp(b.frames.data, want, len) != 0) {
        print_error("got:\n%s\nwant:\n%s\n", b.frames.data, want);
        fail();
    }
    /* the stream's final response is the non-streamed answer of the same events */
    final = t_check_frames(&b.frames);
    assert_int_equal(dl_responses_shape.answer_render(&b.fold, &ctx, &answer), GW_OK);
    same = json_loadb(answer.data, answer.len, 0, NULL);
    assert_true(json_equal(final, same));
    json_decref(same);
    /* and the conversation store's items of what was rendered are its output */
    gw_buf_reset(&answer);
    assert_int_equal(dl_responses_output_items(dl_responses_render_answer(&b.rs), &ctx, &answer),
                     GW_OK);
    same = json_loadb(answer.data, answer.len, 0, NULL);
    assert_true(json_equal(json_object_get(final, "output"), same));
    json_decref(final);
    json_decref(same);
    dl_answer_fini(&b.fold);
    gw_buf_fini(&answer);
    gw_buf_fini(&b.frames);
    gw_arena_fini(&a);
    free(want);
}

static void
test_responses_render_recorded_responses_stream(void **state)
{
    (void)state;
    /* ids of our own ("resp_" + the request id), one summary part, the encrypted content
     * as the upstream sent it, the usage with its cached tokens */
    t_golden(DL_SHAPE_RESPONSES, "responses", "stream_reasoning_text_tools.sse",
             "stream_render_from_responses.out.sse");
}

static void
test_responses_render_recorded_chat_stream(void **state)
{
    (void)state;
    /* Chat's usage after its finish lands in response.completed */
    t_golden(DL_SHAPE_CHAT, "chat", "stream_tools.in.sse", "stream_render_from_chat.out.sse");
}

static void
test_responses_render_recorded_messages_stream(void **state)
{
    (void)state;
    /* the thinking signature tagged with its origin */
    t_golden(DL_SHAPE_MESSAGES, "messages", "stream_thinking_tools.sse",
             "stream_render_from_messages.out.sse");
}

/* Renders canonical events <ev> (then render_end when <end>) into <out>. */
static void
t_render_events(struct gw_arena *a, const struct dl_event *ev, size_t n, bool end,
                struct gw_buf *out)
{
    struct dl_render_ctx ctx = T_CTX(a, DL_SHAPE_CHAT);
    struct dl_render_state rs;
    size_t i;

    dl_responses_shape.render_init(&rs, &ctx);
    for (i = 0; i < n; i++)
        assert_int_equal(dl_responses_shape.event_render(&rs, &ev[i], out), GW_OK);
    if (end)
        assert_int_equal(dl_responses_shape.render_end(&rs, out), GW_OK);
}

static json_t *
t_final_of(const struct gw_buf *out)
{
    return t_check_frames(out);
}

static void
test_responses_render_calls_stay_open_for_late_arguments(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("x")},
        {.kind = DL_EV_BLOCK_START,
         .index = 0,
         .block = DL_BLOCK_TOOL_CALL,
         .id = GW_STR_LIT("call_a"),
         .name = GW_STR_LIT("a")},
        {.kind = DL_EV_DELTA,
         .index = 0,
         .block = DL_BLOCK_TOOL_CALL,
         .text = GW_STR_LIT("{\"p\"")},
        {.kind = DL_EV_BLOCK_STOP, .index = 0},
        {.kind = DL_EV_BLOCK_START,
         .index = 1,
         .block = DL_BLOCK_TOOL_CALL,
         .name = GW_STR_LIT("b")},
        /* interleaved, as some Chat servers send parallel calls */
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TOOL_CALL, .text = GW_STR_LIT(":1}")},
        {.kind = DL_EV_BLOCK_STOP, .index = 1},
        /* text closes the calls: a later delta of one is not rendered */
        {.kind = DL_EV_DELTA, .index = 2, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("ok")},
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TOOL_CALL, .text = GW_STR_LIT("!")},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_TOOL_CALLS},
    };
    struct gw_arena a;
    struct gw_buf out = {0};
    json_t *final, *want;

    (void)state;
    gw_arena_init(&a);
    t_render_events(&a, ev, sizeof(ev) / sizeof(ev[0]), true, &out);
    final = t_final_of(&out);
    want = json_loads(
        "[{\"id\":\"fc_req42_0\",\"type\":\"function_call\",\"status\":\"completed\",\"arguments\":"
        "\"{\\\"p\\\":1}\",\"call_id\":\"call_a\",\"name\":\"a\"},{\"id\":\"fc_req42_1\",\"type\":"
        "\"function_call\",\"status\":\"completed\",\"arguments\":\"{}\",\"call_id\":"
        "\"call_req42_1\",\"name\":\"b\"},{\"id\":\"msg_req42_2\",\"type\":\"message\",\"status\":"
        "\"completed\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":"
        "\"ok\",\"annotations\":[],\"logprobs\":[]}]}]",
        0, NULL);
    assert_true(json_equal(json_object_get(final, "output"), want));
    assert_string_equal(json_string_value(json_object_get(final, "status")), "completed");
    assert_true(json_is_null(json_object_get(final, "usage")));
    /* the .done frames of both calls come before the text's item */
    assert_true(strstr(out.data, "\"arguments\":\"{}\"}") <
                strstr(out.data, "event: response.output_item.added\ndata: {\"type\":"
                                 "\"response.output_item.added\",\"sequence_number\":10"));
    json_decref(final);
    json_decref(want);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_responses_render_free_form_tool_call_is_a_custom_tool_call(void **state)
{
    /* the client offered apply_patch as a custom tool: the upstream (of another shape)
     * called the function it went as, with {"input": TEXT} */
    struct dl_tool tools[] = {
        {.name = GW_STR_LIT("apply_patch"), .freeform = GW_STR_LIT("{\"type\":\"custom\"}")},
        {.name = GW_STR_LIT("shell")}};
    struct dl_request req = {.tools = tools, .n_tools = 2};
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("x")},
        {.kind = DL_EV_BLOCK_START,
         .index = 0,
         .block = DL_BLOCK_TOOL_CALL,
         .id = GW_STR_LIT("call_p"),
         .name = GW_STR_LIT("apply_patch")},
        {.kind = DL_EV_DELTA,
         .index = 0,
         .block = DL_BLOCK_TOOL_CALL,
         .text = GW_STR_LIT("{\"input\":\"*** Begin")},
        {.kind = DL_EV_DELTA,
         .index = 0,
         .block = DL_BLOCK_TOOL_CALL,
         .text = GW_STR_LIT(" Patch\\n\"}")},
        {.kind = DL_EV_BLOCK_STOP, .index = 0},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_TOOL_CALLS},
    };
    struct dl_render_ctx ctx = T_CTX(NULL, DL_SHAPE_MESSAGES);
    struct dl_render_state rs;
    struct gw_arena a;
    struct gw_buf out = {0};
    json_t *final, *want;
    size_t i;

    (void)state;
    gw_arena_init(&a);
    ctx.arena = &a;
    ctx.req = &req;
    dl_responses_shape.render_init(&rs, &ctx);
    for (i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
        assert_int_equal(dl_responses_shape.event_render(&rs, &ev[i], &out), GW_OK);
    assert_int_equal(dl_responses_shape.render_end(&rs, &out), GW_OK);
    final = t_final_of(&out);
    want = json_loads("[{\"id\":\"fc_req42_0\",\"type\":\"custom_tool_call\",\"status\":"
                      "\"completed\",\"input\":\"*** Begin Patch\\n\",\"call_id\":\"call_p\","
                      "\"name\":\"apply_patch\"}]",
                      0, NULL);
    assert_true(json_equal(json_object_get(final, "output"), want));
    /* added as a custom call; no argument frames (they held JSON, not the text) */
    assert_non_null(strstr(out.data, "\"type\":\"custom_tool_call\",\"status\":\"in_progress\""));
    assert_null(strstr(out.data, "function_call_arguments"));
    json_decref(final);
    json_decref(want);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_responses_render_many_parallel_calls(void **state)
{
    struct dl_event ev[3 * 20 + 1];
    char names[20][8];
    struct gw_arena a;
    struct gw_buf out = {0};
    json_t *final;
    size_t i, n = 0;

    (void)state;
    /* more calls than the renderer keeps open: the first ones are done early */
    for (i = 0; i < 20; i++) {
        snprintf(names[i], sizeof(names[i]), "f%zu", i);
        ev[n++] = (struct dl_event){.kind = DL_EV_BLOCK_START,
                                    .index = (unsigned)i,
                                    .block = DL_BLOCK_TOOL_CALL,
                                    .name = gw_str_c(names[i])};
        ev[n++] = (struct dl_event){.kind = DL_EV_DELTA,
                                    .index = (unsigned)i,
                                    .block = DL_BLOCK_TOOL_CALL,
                                    .text = GW_STR_LIT("{}")};
        ev[n++] = (struct dl_event){.kind = DL_EV_BLOCK_STOP, .index = (unsigned)i};
    }
    ev[n++] = (struct dl_event){.kind = DL_EV_FINISH, .finish = DL_FINISH_TOOL_CALLS};
    gw_arena_init(&a);
    t_render_events(&a, ev, n, true, &out);
    final = t_final_of(&out);
    assert_int_equal(json_array_size(json_object_get(final, "output")), 20);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(final, "output"), 19), "call_id")),
                        "call_req42_19");
    json_decref(final);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_responses_render_finishes_and_usage_after_the_finish(void **state)
{
    static const struct {
        enum dl_finish finish;
        const char *event, *status, *details;
    } cases[] = {
        {DL_FINISH_STOP, "response.completed", "completed", "null"},
        {DL_FINISH_LENGTH, "response.incomplete", "incomplete",
         "{\"reason\":\"max_output_tokens\"}"},
        {DL_FINISH_CONTENT_FILTER, "response.incomplete", "incomplete",
         "{\"reason\":\"content_filter\"}"},
        {DL_FINISH_ERROR, "response.failed", "failed", "null"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct dl_event ev[] = {
            {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("a")},
            {.kind = DL_EV_FINISH, .finish = cases[i].finish},
            /* after the finish: the usage counts, content does not */
            {.kind = DL_EV_USAGE,
             .usage = {.input_tokens = 10,
                       .output_tokens = 3,
                       .cache_read_tokens = 4,
                       .cache_write_tokens = 2}},
            {.kind = DL_EV_DELTA, .index = 1, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("b")},
        };
        struct gw_arena a;
        struct gw_buf out = {0};
        json_t *final, *details = json_loads(cases[i].details, JSON_DECODE_ANY, NULL);
        const char *last;

        gw_arena_init(&a);
        t_render_events(&a, ev, 4, true, &out);
        final = t_final_of(&out);
        last = strstr(out.data, cases[i].event);
        assert_non_null(last);
        assert_string_equal(json_string_value(json_object_get(final, "status")), cases[i].status);
        assert_true(json_equal(json_object_get(final, "incomplete_details"), details));
        assert_int_equal(json_array_size(json_object_get(final, "output")), 1);
        if (cases[i].finish == DL_FINISH_ERROR) {
            assert_string_equal(
                json_string_value(json_object_get(json_object_get(final, "error"), "code")),
                "server_error");
        } else {
            json_t *u = json_object_get(final, "usage");

            /* input counts the cached and the written tokens, as OpenAI's does */
            assert_int_equal(json_integer_value(json_object_get(u, "input_tokens")), 16);
            assert_int_equal(json_integer_value(json_object_get(
                                 json_object_get(u, "input_tokens_details"), "cached_tokens")),
                             4);
            assert_int_equal(json_integer_value(json_object_get(u, "output_tokens")), 3);
            assert_int_equal(json_integer_value(json_object_get(u, "total_tokens")), 19);
        }
        json_decref(final);
        json_decref(details);
        gw_buf_fini(&out);
        gw_arena_fini(&a);
    }
}

static void
test_responses_render_error_ends_with_response_failed(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("u1"), .model = GW_STR_LIT("m"), .created = 77},
        {.kind = DL_EV_BLOCK_START, .index = 0, .block = DL_BLOCK_REASONING},
        {.kind = DL_EV_DELTA,
         .index = 0,
         .block = DL_BLOCK_REASONING,
         .signature = GW_STR_LIT("sig")},
        {.kind = DL_EV_BLOCK_START, .index = 1, .block = DL_BLOCK_TEXT},
        {.kind = DL_EV_DELTA, .index = 1, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("par")},
        {.kind = DL_EV_ERROR,
         .error_type = GW_STR_LIT("overloaded_error"),
         .message = GW_STR_LIT("upstream words"),
         .status = 529},
        {.kind = DL_EV_DELTA, .index = 1, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("more")},
    };
    struct gw_arena a;
    struct gw_buf out = {0};
    json_t *final, *err;

    (void)state;
    gw_arena_init(&a);
    t_render_events(&a, ev, sizeof(ev) / sizeof(ev[0]), false, &out);
    final = t_final_of(&out);
    err = json_object_get(final, "error");
    assert_string_equal(json_string_value(json_object_get(final, "status")), "failed");
    assert_string_equal(json_string_value(json_object_get(err, "code")), "server_error");
    assert_string_equal(json_string_value(json_object_get(err, "gw_code")), "gw.upstream.failed");
    assert_null(strstr(out.data, "upstream words")); /* logged, never shown */
    assert_null(strstr(out.data, "more"));
    assert_int_equal(json_integer_value(json_object_get(final, "created_at")), 77);
    /* what was said before: the reasoning item (its signature tagged: Chat made it) and
     * the text */
    assert_int_equal(json_array_size(json_object_get(final, "output")), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(final, "output"), 0),
                                          "encrypted_content")),
        "gw1.chat.sig");
    json_decref(final);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_responses_render_failed_by_the_gateway_names_the_stream(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START},
        {.kind = DL_EV_BLOCK_START,
         .index = 0,
         .block = DL_BLOCK_TOOL_CALL,
         .id = GW_STR_LIT("call_1"),
         .name = GW_STR_LIT("f")},
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TOOL_CALL, .text = GW_STR_LIT("{}")},
        {.kind = DL_EV_DELTA, .index = 1, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("half")},
    };
    const struct dl_event late = {.kind = DL_EV_FINISH, .finish = DL_FINISH_STOP};
    struct gw_arena a;
    struct dl_render_ctx ctx = T_CTX(&a, DL_SHAPE_CHAT);
    struct dl_render_state rs;
    struct gw_buf out = {0};
    size_t i, before;
    json_t *final, *err;

    (void)state;
    gw_arena_init(&a);
    dl_responses_shape.render_init(&rs, &ctx);
    for (i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
        assert_int_equal(dl_responses_shape.event_render(&rs, &ev[i], &out), GW_OK);
    assert_int_equal(dl_responses_render_failed(&rs, GW_E_UPSTREAM_TOO_SLOW,
                                                GW_STR_LIT("the upstream is too slow"), &out),
                     GW_OK);
    /* its sequence goes on, its id is the stream's, the items said are closed in it */
    final = t_final_of(&out);
    err = json_object_get(final, "error");
    assert_string_equal(json_string_value(json_object_get(final, "id")), "resp_req42");
    assert_string_equal(json_string_value(json_object_get(final, "status")), "failed");
    assert_string_equal(json_string_value(json_object_get(err, "code")), "server_error");
    assert_string_equal(json_string_value(json_object_get(err, "message")),
                        "the upstream is too slow");
    assert_string_equal(json_string_value(json_object_get(err, "gw_code")), "gw.upstream.too_slow");
    assert_int_equal(json_array_size(json_object_get(final, "output")), 2);
    assert_non_null(strstr(out.data, "event: response.output_text.done"));
    assert_non_null(strstr(out.data, "event: response.function_call_arguments.done"));
    /* nothing after it */
    before = out.len;
    assert_int_equal(dl_responses_shape.event_render(&rs, &late, &out), GW_OK);
    assert_int_equal(dl_responses_shape.render_end(&rs, &out), GW_OK);
    assert_int_equal(dl_responses_render_failed(&rs, GW_E_UPSTREAM_FAILED, GW_STR_LIT("x"), &out),
                     GW_OK);
    assert_int_equal(out.len, before);
    json_decref(final);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_responses_render_blocks_that_say_nothing_are_no_items(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_BLOCK_START, .index = 0, .block = DL_BLOCK_TEXT},
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("")},
        {.kind = DL_EV_BLOCK_STOP, .index = 0},
        {.kind = DL_EV_BLOCK_START, .index = 1, .block = DL_BLOCK_REASONING},
        {.kind = DL_EV_BLOCK_STOP, .index = 1},
        /* a delta of a closed block opens a new item */
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("x")},
        {.kind = DL_EV_BLOCK_START, .index = 2, .block = DL_BLOCK_TEXT},
        {.kind = DL_EV_DELTA, .index = 2, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("y")},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_STOP},
    };
    struct gw_arena a;
    struct gw_buf out = {0};
    json_t *final, *o;

    (void)state;
    gw_arena_init(&a);
    t_render_events(&a, ev, sizeof(ev) / sizeof(ev[0]), true, &out);
    final = t_final_of(&out);
    o = json_object_get(final, "output");
    assert_int_equal(json_array_size(o), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(o, 0), "id")),
                        "msg_req42_0");
    assert_string_equal(json_string_value(json_object_get(json_array_get(o, 1), "id")),
                        "msg_req42_1");
    assert_string_equal(json_string_value(json_object_get(final, "model")), "client-model");
    assert_int_equal(json_integer_value(json_object_get(final, "created_at")), 1700000000);
    json_decref(final);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_responses_render_needs_an_arena(void **state)
{
    const struct dl_event ev = {.kind = DL_EV_START};
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("m")};
    struct dl_render_state rs;
    struct gw_buf out = {0};

    (void)state;
    dl_responses_shape.render_init(&rs, &ctx);
    assert_null(dl_responses_render_answer(&rs));
    assert_int_equal(dl_responses_shape.event_render(&rs, &ev, &out), GW_E_NOMEM);
    assert_int_equal(out.len, 0);
}

static void
test_responses_render_out_of_memory_leaves_out_as_it_was(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START},
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("words")},
        {.kind = DL_EV_BLOCK_START,
         .index = 1,
         .block = DL_BLOCK_TOOL_CALL,
         .name = GW_STR_LIT("f")},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_STOP},
    };
    unsigned long k;
    bool ok_seen = false;

    (void)state;
    for (k = 1; k < 200 && !ok_seen; k++) {
        struct gw_arena a;
        struct dl_render_ctx ctx = T_CTX(&a, DL_SHAPE_CHAT);
        struct dl_render_state rs;
        struct gw_buf out = {0};
        enum gw_code rc = GW_OK;
        size_t i, before = 0;

        gw_arena_init(&a);
        dl_responses_shape.render_init(&rs, &ctx);
        gw_alloc_fail_at(k);
        for (i = 0; i < 4 && rc == GW_OK; i++) {
            before = out.len;
            rc = dl_responses_shape.event_render(&rs, &ev[i], &out);
        }
        if (rc == GW_OK) {
            before = out.len;
            rc = dl_responses_shape.render_end(&rs, &out);
        }
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || rc == GW_E_NOMEM);
        if (rc == GW_OK)
            ok_seen = true;
        else
            assert_int_equal(out.len, before); /* the failed call wrote nothing */
        gw_buf_fini(&out);
        gw_arena_fini(&a); /* the answer in the state is freed with it */
    }
    assert_true(ok_seen);
}

/* ---- client side: the answer ---- */

static void
test_responses_answer_folded_and_rendered(void **state)
{
    struct gw_arena a;
    struct dl_render_ctx ctx = T_CTX(&a, DL_SHAPE_RESPONSES);
    struct dl_answer ans;
    struct gw_buf out = {0}, items = {0};
    size_t len;
    char *body = t_fixture("answer_reasoning_tools.json", &len);
    json_t *j, *o;

    (void)state;
    gw_arena_init(&a);
    dl_answer_init(&ans, &a);
    assert_int_equal(dl_responses_shape.answer_parse(body, len, dl_answer_fold, &ans), GW_OK);
    assert_int_equal(dl_responses_shape.answer_render(&ans, &ctx, &out), GW_OK);
    t_json_eq(
        out.data, out.len,
        "{\"id\":\"resp_req42\",\"object\":\"response\",\"created_at\":1757536417,"
        "\"status\":\"completed\",\"error\":null,\"incomplete_details\":null,"
        "\"instructions\":null,\"metadata\":{},\"model\":\"client-model\",\"output\":["
        "{\"id\":\"rs_req42_0\",\"type\":\"reasoning\",\"summary\":[{\"type\":"
        "\"summary_text\",\"text\":\"**Checking the weather**\\n\\nTwo cities: call the "
        "tool twice.\\n\\nThen answer \\\"briefly\\\".\"}],\"encrypted_content\":"
        "\"gAAAAABowuCiZx9Encrypted0ReasoningBlob==\"},"
        "{\"id\":\"msg_req42_1\",\"type\":\"message\",\"status\":\"completed\",\"role\":"
        "\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Let me check both "
        "cities\xe2\x80\xa6\\n\",\"annotations\":[],\"logprobs\":[]}]},"
        "{\"id\":\"fc_req42_2\",\"type\":\"function_call\",\"status\":\"completed\","
        "\"arguments\":\"{\\\"city\\\":\\\"Paris\\\"}\",\"call_id\":\"call_Nq7eXQ2bN1pY5mK3\","
        "\"name\":\"get_weather\"},"
        "{\"id\":\"fc_req42_3\",\"type\":\"function_call\",\"status\":\"completed\","
        "\"arguments\":\"{\\\"city\\\":\\\"Oslo\\\"}\",\"call_id\":\"call_Zr8fYR3cO2qZ6nL4\","
        "\"name\":\"get_weather\"}],"
        "\"parallel_tool_calls\":true,\"temperature\":null,\"tool_choice\":\"auto\","
        "\"tools\":[],\"top_p\":null,\"usage\":{\"input_tokens\":1432,"
        "\"input_tokens_details\":{\"cached_tokens\":1280},\"output_tokens\":212,"
        "\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":1644}}");
    /* the conversation store's items: the same array */
    assert_int_equal(dl_responses_output_items(&ans, &ctx, &items), GW_OK);
    j = json_loadb(out.data, out.len, 0, NULL);
    o = json_loadb(items.data, items.len, 0, NULL);
    assert_true(json_equal(json_object_get(j, "output"), o));
    json_decref(j);
    json_decref(o);
    dl_answer_fini(&ans);
    gw_buf_fini(&out);
    gw_buf_fini(&items);
    gw_arena_fini(&a);
    free(body);
}

static void
test_responses_answer_render_id_and_failed_answers(void **state)
{
    struct gw_arena a;
    struct dl_render_ctx ctx = T_CTX(&a, DL_SHAPE_CHAT);
    struct dl_answer ans;
    struct gw_buf out = {0};
    const struct dl_event ev = {.kind = DL_EV_ERROR, .error_type = GW_STR_LIT("x")};
    json_t *j;

    (void)state;
    gw_arena_init(&a);
    ctx.id = GW_STR_LIT("resp_given");
    dl_answer_init(&ans, &a);
    assert_int_equal(dl_answer_fold(&ans, &ev), 0);
    assert_int_equal(dl_responses_shape.answer_render(&ans, &ctx, &out), GW_OK);
    j = json_loadb(out.data, out.len, 0, NULL);
    /* an id already "resp_" is kept as it is */
    assert_string_equal(json_string_value(json_object_get(j, "id")), "resp_given");
    assert_string_equal(json_string_value(json_object_get(j, "status")), "failed");
    assert_true(json_is_null(json_object_get(j, "usage")));
    json_decref(j);
    dl_answer_fini(&ans);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

/* ---- hub round trips: a Responses upstream for other clients ---- */

/* A Responses upstream's events rendered for a client of another shape. */
struct t_client {
    const struct dl_shape_ops *to;
    struct dl_render_state rs;
    struct gw_buf frames;
    bool finished;
};

static int
t_on_client(void *arg, const struct dl_event *ev)
{
    struct t_client *c = arg;

    assert_int_equal(c->to->event_render(&c->rs, ev, &c->frames), GW_OK);
    c->finished |= ev->kind == DL_EV_FINISH;
    return 0;
}

static void
t_to_client(enum dl_shape client, struct gw_buf *frames)
{
    static struct t_sse ev[T_MAX_EVENTS];
    struct gw_arena a;
    struct dl_render_ctx ctx = T_CTX(&a, DL_SHAPE_RESPONSES);
    struct dl_parse_state st;
    struct t_client c = {.to = dl_shape_ops(client)};
    size_t len, n, i;
    char *sse = t_fixture("stream_reasoning_text_tools.sse", &len);

    gw_arena_init(&a);
    ctx.stream_usage = true;
    c.to->render_init(&c.rs, &ctx);
    n = t_sse_split(sse, len, ev, T_MAX_EVENTS);
    dl_responses_shape.parse_init(&st);
    for (i = 0; i < n; i++)
        assert_int_equal(
            dl_responses_shape.event_parse(&st, ev[i].event, ev[i].data, t_on_client, &c), GW_OK);
    assert_true(c.finished);
    assert_int_equal(c.to->render_end(&c.rs, &c.frames), GW_OK);
    *frames = c.frames;
    gw_arena_fini(&a);
    free(sse);
}

static void
test_responses_stream_through_the_hub_to_chat(void **state)
{
    struct gw_buf f = {0};

    (void)state;
    t_to_client(DL_SHAPE_CHAT, &f);
    /* reasoning as reasoning_content, the text, both calls, their finish, the usage
     * (Chat's prompt tokens count the cached ones) and [DONE] */
    assert_non_null(strstr(f.data, "\"reasoning_content\":\"**Checking the weather**\\n\\n\""));
    assert_non_null(strstr(f.data, "\"content\":\"both cities\""));
    assert_non_null(strstr(f.data, "\"index\":0,\"id\":\"call_Nq7eXQ2bN1pY5mK3\""));
    assert_non_null(strstr(f.data, "\"index\":1,\"id\":\"call_Zr8fYR3cO2qZ6nL4\""));
    assert_non_null(strstr(f.data, "\"finish_reason\":\"tool_calls\""));
    assert_non_null(strstr(f.data, "\"prompt_tokens\":1432"));
    assert_non_null(strstr(f.data, "\"cached_tokens\":1280"));
    assert_non_null(strstr(f.data, "\"completion_tokens\":212"));
    assert_int_equal(strcmp(f.data + f.len - 14, "data: [DONE]\n\n"), 0);
    gw_buf_fini(&f);
}

static void
test_responses_stream_through_the_hub_to_messages(void **state)
{
    struct gw_buf f = {0};

    (void)state;
    t_to_client(DL_SHAPE_MESSAGES, &f);
    /* the encrypted content as the thinking block's signature, tagged with its origin so
     * that it comes back to a Responses upstream only */
    assert_non_null(strstr(f.data, "\"type\":\"signature_delta\",\"signature\":"
                                   "\"gw1.responses.gAAAAABowuCiZx9Encrypted0ReasoningBlob==\""));
    assert_non_null(strstr(f.data, "\"type\":\"tool_use\",\"id\":\"call_Zr8fYR3cO2qZ6nL4\""));
    assert_non_null(strstr(f.data, "\"stop_reason\":\"tool_use\""));
    assert_non_null(strstr(f.data, "\"input_tokens\":152,\"cache_creation_input_tokens\":0,"
                                   "\"cache_read_input_tokens\":1280,\"output_tokens\":212"));
    assert_non_null(strstr(f.data, "event: message_stop"));
    gw_buf_fini(&f);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_responses_events_of_a_recorded_stream),
        cmocka_unit_test(test_responses_events_without_names_read_the_data_type),
        cmocka_unit_test(test_responses_events_malformed_data_is_upstream_protocol),
        cmocka_unit_test(test_responses_events_ignored_ones_are_not_read),
        cmocka_unit_test(test_responses_events_errors_end_the_stream),
        cmocka_unit_test(test_responses_events_finish_reasons),
        cmocka_unit_test(test_responses_events_whole_items_and_late_deltas),
        cmocka_unit_test(test_responses_events_completed_gives_what_was_not_streamed),
        cmocka_unit_test(test_responses_events_receiver_stop_is_honoured),
        cmocka_unit_test(test_responses_events_relay_inspection_allocates_nothing),
        cmocka_unit_test(test_responses_events_long_escaped_delta_and_out_of_memory),
        cmocka_unit_test(test_responses_answer_events_of_recorded_answers),
        cmocka_unit_test(test_responses_answer_failed_error_and_refused_bodies),
        cmocka_unit_test(test_responses_answer_usage_without_a_parse),
        cmocka_unit_test(test_responses_render_recorded_responses_stream),
        cmocka_unit_test(test_responses_render_recorded_chat_stream),
        cmocka_unit_test(test_responses_render_recorded_messages_stream),
        cmocka_unit_test(test_responses_render_calls_stay_open_for_late_arguments),
        cmocka_unit_test(test_responses_render_free_form_tool_call_is_a_custom_tool_call),
        cmocka_unit_test(test_responses_render_many_parallel_calls),
        cmocka_unit_test(test_responses_render_finishes_and_usage_after_the_finish),
        cmocka_unit_test(test_responses_render_error_ends_with_response_failed),
        cmocka_unit_test(test_responses_render_failed_by_the_gateway_names_the_stream),
        cmocka_unit_test(test_responses_render_blocks_that_say_nothing_are_no_items),
        cmocka_unit_test(test_responses_render_needs_an_arena),
        cmocka_unit_test(test_responses_render_out_of_memory_leaves_out_as_it_was),
        cmocka_unit_test(test_responses_answer_folded_and_rendered),
        cmocka_unit_test(test_responses_answer_render_id_and_failed_answers),
        cmocka_unit_test(test_responses_stream_through_the_hub_to_chat),
        cmocka_unit_test(test_responses_stream_through_the_hub_to_messages),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
