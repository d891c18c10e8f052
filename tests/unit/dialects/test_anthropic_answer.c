/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_anthropic_answer.c - Messages answers both ways
 * (dialects/anthropic_answer.c): recorded upstream streams and answers parsed into the
 * exact canonical event sequences (thinking, server tool blocks skipped, tool calls,
 * stop sequences, errors, malformed and unnamed events, the receiver stopping, no
 * allocation on the relay's hot path); canonical sequences rendered into the exact SSE
 * bytes a Messages client reads (blocks started and stopped for the shapes that send
 * none, a usage after the finish, errors), a recorded stream through parse and render
 * and back; answers folded and rendered; usage read without a parse.
 * See: dialects/anthropic_answer.c, tests/fixtures/messages/
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
#include "core/arena.h"
#include "dialects/anthropic-priv.h"
#include "dialects/anthropic.h"
#include "dialects/canon.h"
#include "t_messages.h"

#define T_MAX_EVENTS 64

/* Feeds the SSE text <sse> to a fresh parser, recording the events into <got>; each
 * event must give <want_rc>. */
static void
t_parse_sse(const char *sse, size_t len, struct gw_buf *got)
{
    struct t_sse ev[T_MAX_EVENTS];
    struct dl_parse_state st;
    size_t n = t_sse_split(sse, len, ev, T_MAX_EVENTS), i;

    dl_anthropic_shape.parse_init(&st);
    for (i = 0; i < n; i++)
        assert_int_equal(
            dl_anthropic_shape.event_parse(&st, ev[i].event, ev[i].data, t_record, got), GW_OK);
}

static void
t_parse_fixture(const char *name, struct gw_buf *got)
{
    size_t len;
    char *sse = t_fixture(name, &len);

    t_parse_sse(sse, len, got);
    free(sse);
}

/* One event into a parser state, returning the code; recorded into <got>. */
static enum gw_code
t_event(struct dl_parse_state *st, const char *name, const char *data, struct gw_buf *got)
{
    return dl_anthropic_shape.event_parse(st, gw_str_c(name), gw_str_c(data), t_record, got);
}

static const char t_stream_thinking_tools_events[] =
    "START id=msg_01XFDUDYJgAACzvnptvVoYEL model=claude-sonnet-4-5-20250929\n"
    "USAGE in=472 out=2 read=2048 write=100\n"
    "BLOCK_START 0 reasoning\n"
    "DELTA 0 reasoning \"The user asks about \\\"weather\\\".\"\n"
    "DELTA 0 reasoning sig=\"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds\"\n"
    "BLOCK_STOP 0\n"
    "BLOCK_START 1 text\n"
    "DELTA 1 text \"Let me check\\n\"\n"
    "DELTA 1 text \" the weather.\"\n"
    "BLOCK_STOP 1\n"
    "BLOCK_START 2 tool id=toolu_01T1x1fJ34qAmk2tNTrN7Up6 name=get_weather\n"
    "DELTA 2 tool \"{\\\"location\\\":\"\n"
    "DELTA 2 tool \" \\\"Oslo\\\"}\"\n"
    "BLOCK_STOP 2\n"
    "USAGE in=472 out=89 read=2048 write=100\n"
    "FINISH tool_calls\n";

/* ---- upstream streams ---- */

static void
test_messages_events_of_a_recorded_stream_with_thinking_and_tools(void **state)
{
    struct gw_buf got = {0};

    (void)state;
    t_parse_fixture("stream_thinking_tools.sse", &got);
    /* the server tool's blocks (indexes 1 and 2) are skipped: canonical indexes 0.. */
    t_lines_eq(&got, t_stream_thinking_tools_events);
    gw_buf_fini(&got);
}

static void
test_messages_events_of_a_recorded_text_stream_with_stop_sequence(void **state)
{
    struct gw_buf got = {0};

    (void)state;
    t_parse_fixture("stream_text.sse", &got);
    t_lines_eq(&got, "START id=msg_9 model=claude-y\n"
                     "USAGE in=25 out=1 read=7 write=2\n"
                     "BLOCK_START 0 text\n"
                     "DELTA 0 text \"Hel\"\n"
                     "DELTA 0 text \"lo \xc3\xa9\\n\"\n"
                     "BLOCK_STOP 0\n"
                     "USAGE in=25 out=15 read=7 write=2\n"
                     "FINISH stop seq=\"END\"\n");
    gw_buf_fini(&got);
}

static void
test_messages_events_without_names_read_the_data_type(void **state)
{
    struct t_sse ev[T_MAX_EVENTS];
    struct gw_buf named = {0}, unnamed = {0};
    struct dl_parse_state st;
    size_t len, n, i;
    char *sse = t_fixture("stream_thinking_tools.sse", &len);

    (void)state;
    t_parse_sse(sse, len, &named);
    n = t_sse_split(sse, len, ev, T_MAX_EVENTS);
    dl_anthropic_shape.parse_init(&st);
    for (i = 0; i < n; i++)
        assert_int_equal(dl_anthropic_shape.event_parse(&st, (struct gw_str){"", 0}, ev[i].data,
                                                        t_record, &unnamed),
                         GW_OK);
    t_lines_eq(&unnamed, named.data);
    gw_buf_fini(&named);
    gw_buf_fini(&unnamed);
    free(sse);
}

static void
test_messages_events_malformed_data_is_upstream_protocol(void **state)
{
    static const char *const bad[][2] = {
        {"message_start", "not json"},
        {"message_start", "{\"type\":\"message_start\"}"},
        {"message_start", "[1]"},
        {"message_start", "{\"message\":{}} trailing"},
        {"content_block_start", "{\"index\":0}"},
        {"content_block_start", "{\"content_block\":{\"type\":\"tool_use\",\"id\":1}}"},
        {"content_block_start", "{\"content_block\":{\"type\":\"text\",\"text\":5}}"},
        {"content_block_delta", "{\"delta\":{\"type\":\"text_delta\"}}"},
        {"content_block_delta", "{\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":2}}"},
        {"content_block_delta", "{\"delta\":{\"type\":\"thinking_delta\"}}"},
        {"content_block_delta", "{\"delta\":\"x\"}"},
        {"content_block_delta", "{\"delta\":{\"text\":\"no type\"}}"},
        {"message_delta", "{\"delta\":[],\"usage\":{}}"},
        {"message_delta", "{\"usage\":7}"},
        {"error", "{\"type\":\"error\"}"},
        {"error", ""},
        {"", "{\"type\":\"content_block_delta\"}"},
        {"", "{nope"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct dl_parse_state st;
        struct gw_buf got = {0};

        dl_anthropic_shape.parse_init(&st);
        if (t_event(&st, bad[i][0], bad[i][1], &got) != GW_E_UPSTREAM_PROTOCOL) {
            print_error("case %zu (%s %s) not refused\n", i, bad[i][0], bad[i][1]);
            fail();
        }
        assert_int_equal(got.len, 0);
        gw_buf_fini(&got);
    }
}

static void
test_messages_events_ignored_ping_unknown_citations_and_stop_data(void **state)
{
    struct dl_parse_state st;
    struct gw_buf got = {0};

    (void)state;
    dl_anthropic_shape.parse_init(&st);
    /* ping and unknown events are not even read */
    assert_int_equal(t_event(&st, "ping", "garbage", &got), GW_OK);
    assert_int_equal(t_event(&st, "brand_new_event", "whatever", &got), GW_OK);
    assert_int_equal(t_event(&st, "", "{\"type\":\"brand_new_event\"}", &got), GW_OK);
    assert_int_equal(t_event(&st, "content_block_start",
                             "{\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
                             &got),
                     GW_OK);
    assert_int_equal(
        t_event(&st, "content_block_delta",
                "{\"index\":0,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}}}", &got),
        GW_OK);
    assert_int_equal(t_event(&st, "content_block_delta",
                             "{\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\"}}",
                             &got),
                     GW_OK);
    /* a stop whose data is not JSON stops the open block all the same */
    assert_int_equal(t_event(&st, "content_block_stop", "", &got), GW_OK);
    assert_int_equal(t_event(&st, "message_delta", "{\"delta\":{\"stop_reason\":null}}", &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "message_stop", "", &got), GW_OK);
    t_lines_eq(&got, "BLOCK_START 0 text\nBLOCK_STOP 0\nFINISH stop\n");
    /* after message_stop nothing */
    assert_int_equal(t_event(&st, "message_start", "{\"message\":{}}", &got), GW_OK);
    t_lines_eq(&got, "BLOCK_START 0 text\nBLOCK_STOP 0\nFINISH stop\n");
    gw_buf_fini(&got);
}

static void
test_messages_events_finish_reasons(void **state)
{
    static const char *const reasons[][2] = {
        {"end_turn", "stop"},       {"stop_sequence", "stop"},
        {"pause_turn", "stop"},     {"max_tokens", "length"},
        {"tool_use", "tool_calls"}, {"refusal", "content_filter"},
        {"something_new", "stop"},  {"model_context_window_exceeded", "length"},
    };
    char data[160], want[64];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++) {
        struct dl_parse_state st;
        struct gw_buf got = {0};

        snprintf(data, sizeof(data), "{\"delta\":{\"stop_reason\":\"%s\"}}", reasons[i][0]);
        snprintf(want, sizeof(want), "FINISH %s\n", reasons[i][1]);
        dl_anthropic_shape.parse_init(&st);
        assert_int_equal(t_event(&st, "message_delta", data, &got), GW_OK);
        /* after the finish: usage still counts, content does not, a start or a stop adds
         * nothing */
        assert_int_equal(t_event(&st, "content_block_delta",
                                 "{\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}",
                                 &got),
                         GW_OK);
        assert_int_equal(
            t_event(&st, "message_start", "{\"message\":{\"id\":\"m2\",\"model\":\"c\"}}", &got),
            GW_OK);
        assert_int_equal(t_event(&st, "message_delta", "{\"usage\":{\"output_tokens\":3}}", &got),
                         GW_OK);
        assert_int_equal(t_event(&st, "message_stop", "{}", &got), GW_OK);
        strcat(want, "USAGE in=0 out=3 read=0 write=0\n");
        t_lines_eq(&got, want);
        gw_buf_fini(&got);
    }
}

static void
test_messages_events_error_event_ends_the_stream(void **state)
{
    struct dl_parse_state st;
    struct gw_buf got = {0};
    size_t len;
    char *body = t_fixture("error_overloaded.json", &len);

    (void)state;
    dl_anthropic_shape.parse_init(&st);
    assert_int_equal(t_event(&st, "content_block_start",
                             "{\"index\":0,\"content_block\":{\"type\":\"text\"}}", &got),
                     GW_OK);
    assert_int_equal(dl_anthropic_shape.event_parse(&st, GW_STR_LIT("error"),
                                                    (struct gw_str){body, len}, t_record, &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "content_block_delta",
                             "{\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}",
                             &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "message_stop", "", &got), GW_OK);
    t_lines_eq(&got, "BLOCK_START 0 text\n"
                     "ERROR type=overloaded_error status=529 message=\"Overloaded\"\n");
    /* after the finish, the answer is whole: an error event changes nothing */
    gw_buf_reset(&got);
    dl_anthropic_shape.parse_init(&st);
    assert_int_equal(
        t_event(&st, "message_delta", "{\"delta\":{\"stop_reason\":\"end_turn\"}}", &got), GW_OK);
    assert_int_equal(dl_anthropic_shape.event_parse(&st, GW_STR_LIT("error"),
                                                    (struct gw_str){body, len}, t_record, &got),
                     GW_OK);
    t_lines_eq(&got, "FINISH stop\n");
    gw_buf_fini(&got);
    free(body);
}

static void
test_messages_events_redacted_thinking_and_starts_with_content(void **state)
{
    struct dl_parse_state st;
    struct gw_buf got = {0};

    (void)state;
    dl_anthropic_shape.parse_init(&st);
    assert_int_equal(
        t_event(
            &st, "content_block_start",
            "{\"index\":0,\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"opaque\"}}",
            &got),
        GW_OK);
    /* a new start stops the open block */
    assert_int_equal(t_event(&st, "content_block_start",
                             "{\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"pre\"}}",
                             &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "content_block_start",
                             "{\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\","
                             "\"name\":\"f\",\"input\":{\"a\":1}}}",
                             &got),
                     GW_OK);
    /* a delta without an index goes to the open block */
    assert_int_equal(t_event(&st, "content_block_delta",
                             "{\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}",
                             &got),
                     GW_OK);
    assert_int_equal(t_event(&st, "message_stop", "", &got), GW_OK);
    t_lines_eq(&got, "BLOCK_START 0 reasoning redacted\n"
                     "DELTA 0 reasoning sig=\"opaque\"\n"
                     "BLOCK_STOP 0\n"
                     "BLOCK_START 1 text\n"
                     "DELTA 1 text \"pre\"\n"
                     "BLOCK_STOP 1\n"
                     "BLOCK_START 2 tool id=t name=f\n"
                     "DELTA 2 tool \"{\\\"a\\\":1}\"\n"
                     "BLOCK_STOP 2\n"
                     "FINISH stop\n");
    gw_buf_fini(&got);
}

/* A receiver that says stop after <*left> events. */
static int
t_stop_after(void *arg, const struct dl_event *ev)
{
    int *left = arg;

    (void)ev;
    return --*left <= 0;
}

static void
test_messages_events_receiver_stop_is_honoured(void **state)
{
    struct dl_parse_state st;
    int left = 1;

    (void)state;
    dl_anthropic_shape.parse_init(&st);
    /* START then USAGE: the receiver stops at START, and the call still succeeds */
    assert_int_equal(dl_anthropic_shape.event_parse(
                         &st, GW_STR_LIT("message_start"),
                         GW_STR_LIT("{\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":1}}}"),
                         t_stop_after, &left),
                     GW_OK);
    assert_int_equal(left, 0);
    left = 1;
    assert_int_equal(dl_anthropic_shape.event_parse(
                         &st, GW_STR_LIT("message_delta"),
                         GW_STR_LIT("{\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{}}"),
                         t_stop_after, &left),
                     GW_OK);
    assert_int_equal(left, 0);
}

static void
test_messages_events_relay_inspection_allocates_nothing(void **state)
{
    struct gw_buf got = {0};
    struct t_sse ev[T_MAX_EVENTS];
    struct dl_parse_state st;
    size_t len, n, i;
    char *sse = t_fixture("stream_text.sse", &len);

    (void)state;
    assert_int_equal(gw_buf_reserve(&got, 4096), GW_OK); /* the recorder's own room */
    n = t_sse_split(sse, len, ev, T_MAX_EVENTS);
    dl_anthropic_shape.parse_init(&st);
    gw_alloc_fail_at(1); /* any allocation fails from here */
    for (i = 0; i < n; i++)
        assert_int_equal(
            dl_anthropic_shape.event_parse(&st, ev[i].event, ev[i].data, t_record, &got), GW_OK);
    gw_alloc_fail_at(0);
    assert_non_null(strstr(got.data, "FINISH stop seq=\"END\""));
    gw_buf_fini(&got);
    free(sse);
}

static void
test_messages_events_long_escaped_delta_and_out_of_memory(void **state)
{
    struct dl_parse_state st;
    struct gw_buf data = {0}, got = {0};
    size_t i;

    (void)state;
    gw_buf_append_cstr(&data, "{\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"");
    for (i = 0; i < 300; i++)
        gw_buf_append_cstr(&data, "a\\n");
    gw_buf_append_cstr(&data, "\"}}");
    dl_anthropic_shape.parse_init(&st);
    assert_int_equal(dl_anthropic_shape.event_parse(&st, GW_STR_LIT("content_block_delta"),
                                                    (struct gw_str){data.data, data.len}, t_record,
                                                    &got),
                     GW_OK);
    assert_int_equal(strlen(got.data), strlen("DELTA 0 text \"\"\n") + 300 * 3);
    gw_alloc_fail_at(1);
    assert_int_equal(dl_anthropic_shape.event_parse(&st, GW_STR_LIT("content_block_delta"),
                                                    (struct gw_str){data.data, data.len}, t_record,
                                                    &got),
                     GW_E_NOMEM);
    gw_alloc_fail_at(0);
    gw_buf_fini(&data);
    gw_buf_fini(&got);
}

/* ---- upstream answers ---- */

static void
test_messages_answer_events_of_a_recorded_answer(void **state)
{
    struct gw_buf got = {0};
    size_t len;
    char *body = t_fixture("answer_thinking_tools.json", &len);

    (void)state;
    assert_int_equal(dl_anthropic_shape.answer_parse(body, len, t_record, &got), GW_OK);
    t_lines_eq(&got, "START id=msg_01Aq9w938a90dw8q model=claude-sonnet-4-5-20250929\n"
                     "USAGE in=2095 out=503 read=1500 write=0\n"
                     "BLOCK_START 0 reasoning\n"
                     "DELTA 0 reasoning \"Need the weather; call the tool.\" "
                     "sig=\"WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve\"\n"
                     "BLOCK_STOP 0\n"
                     "BLOCK_START 1 reasoning redacted\n"
                     "DELTA 1 reasoning sig=\"EmwKAhgBEgy3va3pzix\"\n"
                     "BLOCK_STOP 1\n"
                     "BLOCK_START 2 text\n"
                     "DELTA 2 text \"I'll check the \\\"current\\\" weather.\\n\"\n"
                     "BLOCK_STOP 2\n"
                     "BLOCK_START 3 tool id=toolu_01A09q90qw90lq917835lq9 name=get_weather\n"
                     "DELTA 3 tool \"{\\\"location\\\": \\\"San Francisco, CA\\\", \\\"unit\\\": "
                     "\\\"celsius\\\"}\"\n"
                     "BLOCK_STOP 3\n"
                     "FINISH tool_calls\n");
    gw_buf_fini(&got);
    free(body);
}

static void
test_messages_answer_refuses_what_is_not_a_messages_answer(void **state)
{
    static const char *const bodies[] = {
        "not json",
        "[]",
        "{\"type\":\"message\"}",
        "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"x\"},\"content\":[]}",
        "{\"content\":[1]}",
        "{\"content\":[{\"type\":\"text\"}]}",
        "{\"content\":[{\"type\":\"text\",\"text\":\"ok\"},{\"type\":\"tool_use\",\"id\":\"a\","
        "\"name\":\"b\"}]}",
        "{\"content\":[]} x",
        /* a bad block after the first four (those read once for check and events) */
        "{\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"},"
        "{\"type\":\"text\",\"text\":\"c\"},{\"type\":\"text\",\"text\":\"d\"},"
        "{\"type\":\"text\",\"text\":\"e\"},{\"type\":\"text\",\"text\":5}]}",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        struct gw_buf got = {0};

        assert_int_equal(
            dl_anthropic_shape.answer_parse(bodies[i], strlen(bodies[i]), t_record, &got),
            GW_E_UPSTREAM_PROTOCOL);
        assert_int_equal(got.len, 0); /* nothing emitted before the refusal */
        gw_buf_fini(&got);
    }
}

/* More blocks than are read once (four): those after them are read again for their
 * events, in order, with a skipped server tool block among the first four. */
static void
test_messages_answer_of_many_blocks(void **state)
{
    const char *body =
        "{\"id\":\"m\",\"model\":\"c\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\",\"input\":{}},"
        "{\"type\":\"text\",\"text\":\"b\"},{\"type\":\"text\",\"text\":\"c\"},"
        "{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{\"x\":[1]}},"
        "{\"type\":\"thinking\",\"thinking\":\"hm\",\"signature\":\"g\"} , "
        "{\"type\":\"text\",\"text\":\"d\"}],\"stop_reason\":\"end_turn\"}";
    struct gw_buf got = {0};

    (void)state;
    assert_int_equal(dl_anthropic_shape.answer_parse(body, strlen(body), t_record, &got), GW_OK);
    t_lines_eq(&got, "START id=m model=c\n"
                     "BLOCK_START 0 text\nDELTA 0 text \"a\"\nBLOCK_STOP 0\n"
                     "BLOCK_START 1 text\nDELTA 1 text \"b\"\nBLOCK_STOP 1\n"
                     "BLOCK_START 2 text\nDELTA 2 text \"c\"\nBLOCK_STOP 2\n"
                     "BLOCK_START 3 tool id=t name=f\nDELTA 3 tool \"{\\\"x\\\":[1]}\"\n"
                     "BLOCK_STOP 3\n"
                     "BLOCK_START 4 reasoning\nDELTA 4 reasoning \"hm\" sig=\"g\"\nBLOCK_STOP 4\n"
                     "BLOCK_START 5 text\nDELTA 5 text \"d\"\nBLOCK_STOP 5\n"
                     "FINISH stop\n");
    gw_buf_fini(&got);
}

static void
test_messages_answer_without_stop_reason_or_usage(void **state)
{
    const char *body = "{\"id\":\"m\",\"model\":\"c\",\"content\":[],\"stop_reason\":null}";
    struct gw_buf got = {0};

    (void)state;
    assert_int_equal(dl_anthropic_shape.answer_parse(body, strlen(body), t_record, &got), GW_OK);
    t_lines_eq(&got, "START id=m model=c\nFINISH none\n");
    gw_buf_fini(&got);
}

static void
test_messages_answer_usage_without_a_parse(void **state)
{
    struct gw_usage u;
    size_t len;
    char *body = t_fixture("answer_thinking_tools.json", &len);

    (void)state;
    assert_true(dl_anthropic_shape.answer_usage(body, len, &u));
    assert_int_equal(u.input_tokens, 2095);
    assert_int_equal(u.output_tokens, 503);
    assert_int_equal(u.cache_read_tokens, 1500);
    assert_int_equal(u.cache_write_tokens, 0);
    assert_false(u.estimated);
    assert_false(dl_anthropic_shape.answer_usage("{\"content\":[]}", 14, &u));
    assert_false(dl_anthropic_shape.answer_usage("{\"usage\":null}", 14, &u));
    assert_false(dl_anthropic_shape.answer_usage("{\"usage\":{}", 11, &u));
    assert_false(dl_anthropic_shape.answer_usage("<html>", 6, &u));
    assert_int_equal(u.input_tokens + u.output_tokens, 0);
    free(body);
}

/* ---- client side: frames ---- */

#define T_CTX(a)                                                                                   \
    {                                                                                              \
        .model = GW_STR_LIT("claude-client"), .id = GW_STR_LIT("req42"), .created = 1700000000,    \
        .upstream = DL_SHAPE_MESSAGES, .arena = (a)                                                \
    }

/* Renders <n> events then, with <end>, the end of the stream, into <out>. */
static void
t_render_events(const struct dl_render_ctx *ctx, const struct dl_event *ev, size_t n, bool end,
                struct gw_buf *out)
{
    struct dl_render_state st;
    size_t i;

    dl_anthropic_shape.render_init(&st, ctx);
    for (i = 0; i < n; i++)
        assert_int_equal(dl_anthropic_shape.event_render(&st, &ev[i], out), GW_OK);
    if (end)
        assert_int_equal(dl_anthropic_shape.render_end(&st, out), GW_OK);
}

static void
t_bytes_eq(const struct gw_buf *got, const char *want)
{
    if (strcmp(got->len ? got->data : "", want) != 0) {
        print_error("got:\n%s\nwant:\n%s\n", got->len ? got->data : "", want);
        fail();
    }
}

#define T_START_FRAME(id, in, write, read)                                                         \
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"" id            \
    "\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-client\",\"content\":[],"   \
    "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":" #in                 \
    ",\"cache_creation_input_tokens\":" #write ",\"cache_read_input_tokens\":" #read               \
    ",\"output_tokens\":0}}}\n\n"

static void
test_messages_render_text_with_usage_after_the_finish(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("chatcmpl-1"), .model = GW_STR_LIT("gpt-x")},
        {.kind = DL_EV_BLOCK_START, .index = 0, .block = DL_BLOCK_TEXT},
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("Hi")},
        {.kind = DL_EV_DELTA,
         .index = 0,
         .block = DL_BLOCK_TEXT,
         .text = GW_STR_LIT(" \"there\"\n")},
        {.kind = DL_EV_BLOCK_STOP, .index = 0},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_STOP},
        {.kind = DL_EV_USAGE,
         .usage = {.input_tokens = 10, .output_tokens = 3, .cache_read_tokens = 4}},
    };
    struct gw_arena a;
    struct dl_render_ctx ctx = T_CTX(&a);
    struct gw_buf out = {0};

    (void)state;
    gw_arena_init(&a);
    t_render_events(&ctx, ev, sizeof(ev) / sizeof(ev[0]), true, &out);
    t_bytes_eq(
        &out,
        T_START_FRAME(
            "chatcmpl-1", 0, 0,
            0) "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
               "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
               "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
               "\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
               "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
               "\"delta\":{\"type\":\"text_delta\",\"text\":\" \\\"there\\\"\\n\"}}\n\n"
               "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
               "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
               "\"end_turn\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":10,"
               "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":4,"
               "\"output_tokens\":3}}\n\n"
               "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_messages_render_blocks_a_shape_never_starts_or_stops(void **state)
{
    /* Chat-like: no block events; text at 0, tool calls at 1 and 2 with their starts */
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("")},
        {.kind = DL_EV_USAGE, .usage = {.input_tokens = 7, .cache_write_tokens = 2}},
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("ok")},
        {.kind = DL_EV_BLOCK_START,
         .index = 1,
         .block = DL_BLOCK_TOOL_CALL,
         .id = GW_STR_LIT("call_1"),
         .name = GW_STR_LIT("get")},
        {.kind = DL_EV_DELTA,
         .index = 1,
         .block = DL_BLOCK_TOOL_CALL,
         .text = GW_STR_LIT("{\"q\":")},
        {.kind = DL_EV_DELTA, .index = 1, .block = DL_BLOCK_TOOL_CALL, .text = GW_STR_LIT("1}")},
        {.kind = DL_EV_BLOCK_START,
         .index = 2,
         .block = DL_BLOCK_TOOL_CALL,
         .id = GW_STR_LIT("call_2"),
         .name = GW_STR_LIT("put")},
        {.kind = DL_EV_DELTA, .index = 2, .block = DL_BLOCK_TOOL_CALL, .text = GW_STR_LIT("{}")},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_TOOL_CALLS},
    };
    struct gw_arena a;
    struct dl_render_ctx ctx = T_CTX(&a);
    struct gw_buf out = {0};

    (void)state;
    gw_arena_init(&a);
    t_render_events(&ctx, ev, sizeof(ev) / sizeof(ev[0]), true, &out);
    t_bytes_eq(
        &out,
        T_START_FRAME(
            "msg_req42", 7, 2,
            0) "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
               "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
               "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
               "\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n"
               "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
               "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"
               "\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"get\","
               "\"input\":{}}}\n\n"
               "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
               "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\":\"}}\n\n"
               "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,"
               "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n"
               "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
               "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,"
               "\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"put\","
               "\"input\":{}}}\n\n"
               "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,"
               "\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n"
               "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n"
               "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
               "\"tool_use\",\"stop_sequence\":null},\"usage\":{\"input_tokens\":7,"
               "\"cache_creation_input_tokens\":2,\"cache_read_input_tokens\":0,"
               "\"output_tokens\":0}}\n\n"
               "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_messages_render_thinking_redacted_and_stop_sequence(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_BLOCK_START, .index = 0, .block = DL_BLOCK_REASONING},
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_REASONING, .text = GW_STR_LIT("hm")},
        {.kind = DL_EV_DELTA,
         .index = 0,
         .block = DL_BLOCK_REASONING,
         .signature = GW_STR_LIT("S")},
        {.kind = DL_EV_BLOCK_STOP, .index = 0},
        {.kind = DL_EV_BLOCK_START, .index = 1, .block = DL_BLOCK_REASONING, .redacted = true},
        {.kind = DL_EV_DELTA,
         .index = 1,
         .block = DL_BLOCK_REASONING,
         .signature = GW_STR_LIT("R")},
        {.kind = DL_EV_BLOCK_STOP, .index = 1},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_STOP, .stop_sequence = GW_STR_LIT("END")},
        /* content after the finish is not part of the answer */
        {.kind = DL_EV_DELTA, .index = 2, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("late")},
    };
    struct gw_arena a;
    struct dl_render_ctx ctx = T_CTX(&a);
    struct gw_buf out = {0};

    (void)state;
    gw_arena_init(&a);
    t_render_events(&ctx, ev, sizeof(ev) / sizeof(ev[0]), true, &out);
    t_bytes_eq(
        &out,
        T_START_FRAME(
            "msg_req42", 0, 0,
            0) "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
               "\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n"
               "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
               "\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}\n\n"
               "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
               "\"delta\":{\"type\":\"signature_delta\",\"signature\":\"S\"}}\n\n"
               "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
               "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,"
               "\"content_block\":{\"type\":\"redacted_thinking\",\"data\":\"R\"}}\n\n"
               "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n"
               "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":"
               "\"stop_sequence\",\"stop_sequence\":\"END\"},\"usage\":{\"input_tokens\":0,"
               "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,"
               "\"output_tokens\":0}}\n\n"
               "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_messages_render_error_ends_with_overloaded_frame(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("msg_1")},
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("par")},
        {.kind = DL_EV_ERROR,
         .error_type = GW_STR_LIT("server_error"),
         .message = GW_STR_LIT("secret upstream words"),
         .status = 500},
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("tial")},
    };
    struct gw_arena a;
    struct dl_render_ctx ctx = T_CTX(&a);
    struct gw_buf out = {0};
    const char *frame;

    (void)state;
    gw_arena_init(&a);
    t_render_events(&ctx, ev, sizeof(ev) / sizeof(ev[0]), true, &out);
    frame = strstr(out.data, "event: error\n");
    assert_non_null(frame);
    assert_string_equal(frame, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":"
                               "\"overloaded_error\",\"message\":\"the upstream failed during the "
                               "answer\",\"gw_code\":\"gw.upstream.failed\"}}\n\n");
    assert_null(strstr(out.data, "secret"));
    assert_null(strstr(out.data, "tial"));
    assert_null(strstr(out.data, "message_stop"));
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_messages_render_without_an_arena_writes_the_start_at_once(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("msg_x")},
        {.kind = DL_EV_USAGE, .usage = {.input_tokens = 9}},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_LENGTH, .stop_sequence = GW_STR_LIT("lost")},
    };
    struct dl_render_ctx ctx = T_CTX(NULL);
    struct gw_buf out = {0};

    (void)state;
    t_render_events(&ctx, ev, sizeof(ev) / sizeof(ev[0]), true, &out);
    assert_memory_equal(out.data, T_START_FRAME("msg_x", 0, 0, 0),
                        strlen(T_START_FRAME("msg_x", 0, 0, 0)));
    assert_non_null(strstr(out.data, "\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},"
                                     "\"usage\":{\"input_tokens\":9,"));
    gw_buf_fini(&out);
}

/* Renders the events <lines> recorded from a stream: a receiver that renders. */
struct t_pipe {
    struct dl_render_state st;
    struct gw_buf out;
};

static int
t_render_fn(void *arg, const struct dl_event *ev)
{
    struct t_pipe *p = arg;

    assert_int_equal(dl_anthropic_shape.event_render(&p->st, ev, &p->out), GW_OK);
    return 0;
}

static void
test_messages_stream_through_the_hub_and_back(void **state)
{
    struct gw_arena a;
    struct dl_render_ctx ctx = T_CTX(&a);
    struct t_pipe p = {.out = {0}};
    struct gw_buf again = {0};
    struct t_sse ev[T_MAX_EVENTS];
    struct dl_parse_state st;
    size_t len, n, i;
    char *sse = t_fixture("stream_thinking_tools.sse", &len);
    char *want;

    (void)state;
    gw_arena_init(&a);
    dl_anthropic_shape.render_init(&p.st, &ctx);
    n = t_sse_split(sse, len, ev, T_MAX_EVENTS);
    dl_anthropic_shape.parse_init(&st);
    for (i = 0; i < n; i++)
        assert_int_equal(
            dl_anthropic_shape.event_parse(&st, ev[i].event, ev[i].data, t_render_fn, &p), GW_OK);
    assert_int_equal(dl_anthropic_shape.render_end(&p.st, &p.out), GW_OK);
    /* the frames rendered read back as the same events (the model is the client's) */
    t_parse_sse(p.out.data, p.out.len, &again);
    want = strdup(t_stream_thinking_tools_events);
    memcpy(strstr(want, "model=") + 6, "claude-client\n", 15);
    memmove(strstr(want, "model=") + 6 + 14, strstr(t_stream_thinking_tools_events, "USAGE"),
            strlen(strstr(t_stream_thinking_tools_events, "USAGE")) + 1);
    t_lines_eq(&again, want);
    /* every frame is JSON with the type its event line names */
    n = t_sse_split(p.out.data, p.out.len, ev, T_MAX_EVENTS);
    for (i = 0; i < n; i++) {
        json_t *j = json_loadb(ev[i].data.ptr, ev[i].data.len, 0, NULL);

        assert_non_null(j);
        assert_true(
            gw_str_eq(ev[i].event, gw_str_c(json_string_value(json_object_get(j, "type")))));
        json_decref(j);
    }
    free(want);
    free(sse);
    gw_buf_fini(&again);
    gw_buf_fini(&p.out);
    gw_arena_fini(&a);
}

static void
test_messages_render_out_of_memory_leaves_out_as_it_was(void **state)
{
    const struct dl_event ev = {.kind = DL_EV_DELTA,
                                .index = 0,
                                .block = DL_BLOCK_TEXT,
                                .text = GW_STR_LIT("some text that needs room")};
    unsigned long k;

    (void)state;
    for (k = 1; k < 20; k++) {
        struct gw_arena a;
        struct dl_render_ctx ctx = T_CTX(&a);
        struct dl_render_state st;
        struct gw_buf out = {0};
        enum gw_code rc;

        gw_arena_init(&a);
        dl_anthropic_shape.render_init(&st, &ctx);
        gw_alloc_fail_at(k);
        rc = dl_anthropic_shape.event_render(&st, &ev, &out);
        if (rc == GW_OK)
            rc = dl_anthropic_shape.render_end(&st, &out);
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || rc == GW_E_NOMEM);
        if (rc != GW_OK)
            assert_true(out.len == 0 || strstr(out.data, "content_block_stop"));
        gw_buf_fini(&out);
        gw_arena_fini(&a);
    }
}

/* ---- client side: the answer ---- */

static void
test_messages_answer_folded_and_rendered(void **state)
{
    struct gw_arena a;
    struct dl_render_ctx ctx = T_CTX(&a);
    struct dl_answer ans;
    struct gw_buf out = {0};
    size_t len;
    char *body = t_fixture("answer_thinking_tools.json", &len);

    (void)state;
    gw_arena_init(&a);
    dl_answer_init(&ans, &a);
    assert_int_equal(dl_anthropic_shape.answer_parse(body, len, dl_answer_fold, &ans), GW_OK);
    assert_int_equal(dl_anthropic_shape.answer_render(&ans, &ctx, &out), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"id\":\"msg_01Aq9w938a90dw8q\",\"type\":\"message\",\"role\":\"assistant\","
              "\"model\":\"claude-client\",\"content\":[{\"type\":\"thinking\",\"thinking\":"
              "\"Need the weather; call the tool.\",\"signature\":"
              "\"WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve\"},{\"type\":\"redacted_thinking\","
              "\"data\":\"EmwKAhgBEgy3va3pzix\"},{\"type\":\"text\",\"text\":\"I'll check the "
              "\\\"current\\\" weather.\\n\"},{\"type\":\"tool_use\",\"id\":"
              "\"toolu_01A09q90qw90lq917835lq9\",\"name\":\"get_weather\",\"input\":{\"location\":"
              "\"San Francisco, CA\",\"unit\":\"celsius\"}}],\"stop_reason\":\"tool_use\","
              "\"stop_sequence\":null,\"usage\":{\"input_tokens\":2095,"
              "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":1500,"
              "\"output_tokens\":503}}");
    dl_answer_fini(&ans);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
    free(body);
}

static void
test_messages_answer_render_fallbacks(void **state)
{
    /* another shape's answer: no id, a tool call whose arguments were cut short */
    const struct dl_event ev[] = {
        {.kind = DL_EV_DELTA, .index = 0, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("")},
        {.kind = DL_EV_BLOCK_START,
         .index = 1,
         .block = DL_BLOCK_TOOL_CALL,
         .name = GW_STR_LIT("f")},
        {.kind = DL_EV_DELTA,
         .index = 1,
         .block = DL_BLOCK_TOOL_CALL,
         .text = GW_STR_LIT("{\"a\":")},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_LENGTH},
    };
    struct gw_arena a;
    struct dl_render_ctx ctx = T_CTX(&a);
    struct dl_answer ans;
    struct gw_buf out = {0};
    size_t i;

    (void)state;
    gw_arena_init(&a);
    dl_answer_init(&ans, &a);
    for (i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
        assert_int_equal(dl_answer_fold(&ans, &ev[i]), 0);
    assert_int_equal(dl_anthropic_shape.answer_render(&ans, &ctx, &out), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"id\":\"msg_req42\",\"type\":\"message\",\"role\":\"assistant\",\"model\":"
              "\"claude-client\",\"content\":[{\"type\":\"tool_use\",\"id\":\"toolu_gw_1\","
              "\"name\":\"f\",\"input\":{}}],\"stop_reason\":\"max_tokens\",\"stop_sequence\":null,"
              "\"usage\":{\"input_tokens\":0,\"cache_creation_input_tokens\":0,"
              "\"cache_read_input_tokens\":0,\"output_tokens\":0}}");
    dl_answer_fini(&ans);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_events_of_a_recorded_stream_with_thinking_and_tools),
        cmocka_unit_test(test_messages_events_of_a_recorded_text_stream_with_stop_sequence),
        cmocka_unit_test(test_messages_events_without_names_read_the_data_type),
        cmocka_unit_test(test_messages_events_malformed_data_is_upstream_protocol),
        cmocka_unit_test(test_messages_events_ignored_ping_unknown_citations_and_stop_data),
        cmocka_unit_test(test_messages_events_finish_reasons),
        cmocka_unit_test(test_messages_events_error_event_ends_the_stream),
        cmocka_unit_test(test_messages_events_redacted_thinking_and_starts_with_content),
        cmocka_unit_test(test_messages_events_receiver_stop_is_honoured),
        cmocka_unit_test(test_messages_events_relay_inspection_allocates_nothing),
        cmocka_unit_test(test_messages_events_long_escaped_delta_and_out_of_memory),
        cmocka_unit_test(test_messages_answer_events_of_a_recorded_answer),
        cmocka_unit_test(test_messages_answer_refuses_what_is_not_a_messages_answer),
        cmocka_unit_test(test_messages_answer_of_many_blocks),
        cmocka_unit_test(test_messages_answer_without_stop_reason_or_usage),
        cmocka_unit_test(test_messages_answer_usage_without_a_parse),
        cmocka_unit_test(test_messages_render_text_with_usage_after_the_finish),
        cmocka_unit_test(test_messages_render_blocks_a_shape_never_starts_or_stops),
        cmocka_unit_test(test_messages_render_thinking_redacted_and_stop_sequence),
        cmocka_unit_test(test_messages_render_error_ends_with_overloaded_frame),
        cmocka_unit_test(test_messages_render_without_an_arena_writes_the_start_at_once),
        cmocka_unit_test(test_messages_stream_through_the_hub_and_back),
        cmocka_unit_test(test_messages_render_out_of_memory_leaves_out_as_it_was),
        cmocka_unit_test(test_messages_answer_folded_and_rendered),
        cmocka_unit_test(test_messages_answer_render_fallbacks),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
