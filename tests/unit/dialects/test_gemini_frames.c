/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_gemini_frames.c - canonical events rendered for a Gemini client
 * (dialects/gemini_frames.c): recorded Chat and Messages streams through their parsers
 * into Gemini chunks (golden SSE, and the same elements as one JSON array); the held
 * finish with the usage that comes after it; tool call arguments gathered and checked;
 * signatures tagged with their origin; errors and aborts in both modes; the whole answer;
 * a Gemini stream through the hub and back; and a conversation that goes on: the history
 * @google/genai records from the chunks, sent back and rendered for the Messages upstream
 * that made it, keeps its tool ids and thinking signature.
 * See: dialects/gemini_frames.c, tests/fixtures/gemini/
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

#define T_MESSAGES_FIXTURES "tests/fixtures/messages/"
#define T_CHAT_FIXTURES "tests/fixtures/chat/"

/* The bytes of <path> (from the repository root); free with free(). */
static char *
t_read(const char *path, size_t *len)
{
    char name[128];

    /* t_fixture reads from the Gemini folder: climb out of it */
    snprintf(name, sizeof(name), "../../../%.100s", path);
    return t_fixture(name, len);
}

/* A renderer fed by an upstream parser, folding the answer on the side. */
struct t_pipe {
    struct gw_arena arena;
    struct dl_render_ctx ctx;
    struct dl_render_state rs;
    struct gw_buf out;
    struct dl_answer ans;
};

static int
t_pipe_event(void *arg, const struct dl_event *ev)
{
    struct t_pipe *p = arg;

    assert_int_equal(dl_gemini_shape.event_render(&p->rs, ev, &p->out), GW_OK);
    assert_int_equal(dl_answer_fold(&p->ans, ev), 0);
    return 0;
}

static void
t_pipe_init(struct t_pipe *p, enum dl_shape upstream, bool json_array)
{
    memset(p, 0, sizeof(*p));
    gw_arena_init(&p->arena);
    p->ctx = (struct dl_render_ctx){.model = GW_STR_LIT("gemini-client-model"),
                                    .id = GW_STR_LIT("req1"),
                                    .upstream = upstream,
                                    .json_array = json_array,
                                    .arena = &p->arena};
    dl_gemini_shape.render_init(&p->rs, &p->ctx);
    dl_answer_init(&p->ans, &p->arena);
}

static void
t_pipe_fini(struct t_pipe *p)
{
    gw_buf_fini(&p->out);
    dl_answer_fini(&p->ans);
    gw_arena_fini(&p->arena);
}

/* The SSE events of <text> (Chat or Messages framing) through <upstream>'s parser. */
static void
t_pipe_sse(struct t_pipe *p, enum dl_shape upstream, const char *text, size_t len)
{
    const struct dl_shape_ops *o = dl_shape_ops(upstream);
    struct t_sse v[64];
    struct dl_parse_state st;
    size_t n = t_sse_split(text, len, v, 64), k;

    o->parse_init(&st);
    for (k = 0; k < n; k++) {
        if (gw_str_eq(v[k].data, GW_STR_LIT("[DONE]")))
            continue;
        assert_int_equal(o->event_parse(&st, v[k].event, v[k].data, t_pipe_event, p), GW_OK);
    }
    assert_int_equal(dl_gemini_shape.render_end(&p->rs, &p->out), GW_OK);
}

/* Asserts that the SSE <got> holds the same data events as <want>, each the same JSON. */
static void
t_same_sse(const struct gw_buf *got, const char *want, size_t want_len)
{
    struct gw_str g[64], w[64];
    size_t ng = t_gm_sse_split(got->data, got->len, g, 64),
           nw = t_gm_sse_split(want, want_len, w, 64);
    size_t k;

    if (ng != nw) {
        print_error("got %zu events, want %zu:\n%.*s\n", ng, nw, (int)got->len, got->data);
        fail();
    }
    for (k = 0; k < ng; k++)
        t_json_is(g[k].ptr, g[k].len, w[k].ptr, w[k].len);
    /* framed as the API frames it */
    assert_true(got->len >= 4 && memcmp(got->data + got->len - 4, "\r\n\r\n", 4) == 0);
}

static void
t_from_fixture(enum dl_shape upstream, const char *path, const char *golden)
{
    size_t len, glen;
    char *text = t_read(path, &len), *want = t_fixture(golden, &glen);
    struct t_pipe p;

    t_pipe_init(&p, upstream, false);
    t_pipe_sse(&p, upstream, text, len);
    t_same_sse(&p.out, want, glen);
    t_pipe_fini(&p);
    free(text);
    free(want);
}

static void
test_gemini_frames_from_a_chat_stream(void **state)
{
    (void)state;
    t_from_fixture(DL_SHAPE_CHAT, T_CHAT_FIXTURES "stream_tools.in.sse",
                   "frames_from_chat.out.sse");
}

static void
test_gemini_frames_from_a_messages_stream(void **state)
{
    (void)state;
    t_from_fixture(DL_SHAPE_MESSAGES, T_MESSAGES_FIXTURES "stream_thinking_tools.sse",
                   "frames_from_messages.out.sse");
}

/* Without ?alt=sse: one JSON array of the same chunks. */
static void
test_gemini_frames_json_array_mode(void **state)
{
    size_t len, glen;
    char *text = t_read(T_MESSAGES_FIXTURES "stream_thinking_tools.sse", &len);
    char *want = t_fixture("frames_from_messages.out.sse", &glen);
    struct gw_str w[64];
    size_t nw = t_gm_sse_split(want, glen, w, 64), k;
    struct t_pipe p;
    json_t *arr;

    (void)state;
    t_pipe_init(&p, DL_SHAPE_MESSAGES, true);
    t_pipe_sse(&p, DL_SHAPE_MESSAGES, text, len);
    assert_int_equal(p.out.data[0], '[');
    assert_int_equal(p.out.data[p.out.len - 1], ']');
    assert_non_null(strstr(p.out.data, "}\r\n,{"));
    arr = json_loadb(p.out.data, p.out.len, 0, NULL);
    assert_true(json_is_array(arr));
    assert_int_equal(json_array_size(arr), nw);
    for (k = 0; k < nw; k++) {
        char *s = json_dumps(json_array_get(arr, k), 0);

        t_json_is(s, strlen(s), w[k].ptr, w[k].len);
        free(s);
    }
    json_decref(arr);
    t_pipe_fini(&p);
    free(text);
    free(want);
}

/* ---- events one by one ---- */

static void
t_render(struct dl_render_state *rs, const struct dl_event *ev, struct gw_buf *out)
{
    assert_int_equal(dl_gemini_shape.event_render(rs, ev, out), GW_OK);
}

static void
test_gemini_frames_finish_held_for_the_usage_after_it(void **state)
{
    struct gw_arena a;
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("m"), .id = GW_STR_LIT("r"), .arena = &a};
    struct dl_render_state rs;
    struct gw_buf out = {0};
    struct dl_event ev = {.kind = DL_EV_START, .id = GW_STR_LIT("up-id")};
    struct gw_str v[8];

    (void)state;
    gw_arena_init(&a);
    dl_gemini_shape.render_init(&rs, &ctx);
    t_render(&rs, &ev, &out);
    assert_int_equal(out.len, 0); /* no chunk without content */
    ev = (struct dl_event){.kind = DL_EV_DELTA, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("a")};
    t_render(&rs, &ev, &out);
    ev = (struct dl_event){.kind = DL_EV_FINISH, .finish = DL_FINISH_LENGTH};
    t_render(&rs, &ev, &out);
    /* content after the finish is not part of the answer; the usage after it is */
    ev = (struct dl_event){.kind = DL_EV_DELTA, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("b")};
    t_render(&rs, &ev, &out);
    ev = (struct dl_event){
        .kind = DL_EV_USAGE,
        .usage = {.input_tokens = 5, .output_tokens = 7, .cache_write_tokens = 2}};
    t_render(&rs, &ev, &out);
    assert_int_equal(t_gm_sse_split(out.data, out.len, v, 8), 1);
    assert_int_equal(dl_gemini_shape.render_end(&rs, &out), GW_OK);
    assert_int_equal(t_gm_sse_split(out.data, out.len, v, 8), 2);
    t_json_eq(v[0].ptr, v[0].len,
              "{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"a\"}]},"
              "\"index\":0}],\"modelVersion\":\"m\",\"responseId\":\"up-id\"}");
    t_json_eq(v[1].ptr, v[1].len,
              "{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[]},\"finishReason\":"
              "\"MAX_TOKENS\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":7,"
              "\"candidatesTokenCount\":7,\"totalTokenCount\":14},\"modelVersion\":\"m\","
              "\"responseId\":\"up-id\"}");
    /* nothing after the end */
    {
        size_t before = out.len;

        assert_int_equal(dl_gemini_shape.render_end(&rs, &out), GW_OK);
        assert_int_equal(out.len, before);
    }
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_gemini_frames_tool_calls_and_signatures(void **state)
{
    struct gw_arena a;
    struct dl_render_ctx ctx = {
        .model = GW_STR_LIT("m"), .id = GW_STR_LIT("r"), .upstream = DL_SHAPE_GEMINI, .arena = &a};
    struct dl_render_state rs;
    struct gw_buf out = {0};
    struct gw_str v[8];
    const struct dl_event evs[] = {
        {.kind = DL_EV_DELTA,
         .block = DL_BLOCK_REASONING,
         .index = 0,
         .text = GW_STR_LIT("hm"),
         .signature = GW_STR_LIT("S0")},
        {.kind = DL_EV_BLOCK_START,
         .block = DL_BLOCK_TOOL_CALL,
         .index = 1,
         .id = GW_STR_LIT("c1"),
         .name = GW_STR_LIT("f"),
         .signature = GW_STR_LIT("S1")},
        {.kind = DL_EV_DELTA,
         .block = DL_BLOCK_TOOL_CALL,
         .index = 1,
         .text = GW_STR_LIT("{\"a\"")},
        {.kind = DL_EV_DELTA, .block = DL_BLOCK_TOOL_CALL, .index = 1, .text = GW_STR_LIT(":1}")},
        {.kind = DL_EV_BLOCK_STOP, .index = 1},
        /* cut by the limit: not an object, so no arguments */
        {.kind = DL_EV_BLOCK_START,
         .block = DL_BLOCK_TOOL_CALL,
         .index = 2,
         .name = GW_STR_LIT("g")},
        {.kind = DL_EV_DELTA,
         .block = DL_BLOCK_TOOL_CALL,
         .index = 2,
         .text = GW_STR_LIT("{\"x\":")},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_TOOL_CALLS},
    };
    size_t k;

    (void)state;
    gw_arena_init(&a);
    dl_gemini_shape.render_init(&rs, &ctx);
    for (k = 0; k < sizeof(evs) / sizeof(evs[0]); k++)
        t_render(&rs, &evs[k], &out);
    assert_int_equal(dl_gemini_shape.render_end(&rs, &out), GW_OK);
    assert_int_equal(t_gm_sse_split(out.data, out.len, v, 8), 4);
    t_json_eq(v[0].ptr, v[0].len,
              "{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"hm\","
              "\"thought\":true,\"thoughtSignature\":\"S0\"}]},\"index\":0}],\"modelVersion\":"
              "\"m\",\"responseId\":\"r\"}");
    t_json_eq(v[1].ptr, v[1].len,
              "{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{"
              "\"id\":\"c1\",\"name\":\"f\",\"args\":{\"a\":1}},\"thoughtSignature\":\"S1\"}]},"
              "\"index\":0}],\"modelVersion\":\"m\",\"responseId\":\"r\"}");
    t_json_eq(v[2].ptr, v[2].len,
              "{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"functionCall\":{"
              "\"name\":\"g\",\"args\":{}}}]},\"index\":0}],\"modelVersion\":\"m\","
              "\"responseId\":\"r\"}");
    t_json_eq(v[3].ptr, v[3].len,
              "{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[]},\"finishReason\":"
              "\"STOP\",\"index\":0}],\"modelVersion\":\"m\",\"responseId\":\"r\"}");
    /* another upstream's signature goes tagged; a tool call needs the arena */
    gw_buf_reset(&out);
    ctx.upstream = DL_SHAPE_MESSAGES;
    dl_gemini_shape.render_init(&rs, &ctx);
    t_render(&rs, &evs[0], &out);
    assert_non_null(strstr(out.data, "\"thoughtSignature\":\"gw1.messages.S0\""));
    ctx.arena = NULL;
    dl_gemini_shape.render_init(&rs, &ctx);
    assert_int_equal(dl_gemini_shape.event_render(&rs, &evs[1], &out), GW_E_INTERNAL);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

static void
test_gemini_frames_errors_end_the_stream(void **state)
{
    struct gw_arena a;
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("m"), .id = GW_STR_LIT("r"), .arena = &a};
    struct dl_render_state rs;
    struct gw_buf out = {0};
    struct dl_event text = {.kind = DL_EV_DELTA, .block = DL_BLOCK_TEXT, .text = GW_STR_LIT("a")};
    struct dl_event err = {.kind = DL_EV_ERROR,
                           .error_type = GW_STR_LIT("x"),
                           .message = GW_STR_LIT("secret upstream words"),
                           .status = 500};
    struct gw_str v[8];
    json_t *j;
    size_t before;

    (void)state;
    gw_arena_init(&a);
    /* SSE: one more data event, the unavailable error, and nothing after it */
    dl_gemini_shape.render_init(&rs, &ctx);
    t_render(&rs, &text, &out);
    t_render(&rs, &err, &out);
    before = out.len;
    t_render(&rs, &text, &out);
    assert_int_equal(dl_gemini_shape.render_end(&rs, &out), GW_OK);
    assert_int_equal(out.len, before);
    assert_int_equal(t_gm_sse_split(out.data, out.len, v, 8), 2);
    assert_null(strstr(out.data, "secret"));
    t_json_eq(v[1].ptr, v[1].len,
              "{\"error\":{\"code\":503,\"message\":\"the upstream failed during the answer\","
              "\"status\":\"UNAVAILABLE\",\"details\":[{\"@type\":\"type.googleapis.com/"
              "google.rpc.ErrorInfo\",\"reason\":\"gw.upstream.failed\",\"domain\":\"gw\"}]}}");
    /* the JSON array: the error is its last element */
    ctx.json_array = true;
    gw_buf_reset(&out);
    dl_gemini_shape.render_init(&rs, &ctx);
    t_render(&rs, &text, &out);
    t_render(&rs, &err, &out);
    j = json_loadb(out.data, out.len, 0, NULL);
    assert_int_equal(json_array_size(j), 2);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(json_array_get(j, 1), "error"), "code")),
        503);
    json_decref(j);
    /* broken without an error event (the upstream went away): the abort, in each mode */
    gw_buf_reset(&out);
    dl_gemini_shape.render_init(&rs, &ctx);
    assert_int_equal(dl_gemini_render_abort(&rs, GW_E_UPSTREAM_DROPPED, GW_STR_LIT(""), &out),
                     GW_OK);
    j = json_loadb(out.data, out.len, 0, NULL);
    assert_int_equal(json_array_size(j), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_array_get(j, 0), "error"), "message")),
                        "gw.upstream.dropped");
    json_decref(j);
    before = out.len;
    assert_int_equal(dl_gemini_render_abort(&rs, GW_E_UPSTREAM_DROPPED, GW_STR_LIT(""), &out),
                     GW_OK);
    assert_int_equal(out.len, before);
    ctx.json_array = false;
    gw_buf_reset(&out);
    dl_gemini_shape.render_init(&rs, &ctx);
    t_render(&rs, &text, &out);
    assert_int_equal(dl_gemini_render_abort(&rs, GW_E_UPSTREAM_DROPPED, GW_STR_LIT("gone"), &out),
                     GW_OK);
    assert_int_equal(t_gm_sse_split(out.data, out.len, v, 8), 2);
    assert_non_null(strstr(v[1].ptr, "\"UNAVAILABLE\""));
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

/* ---- the answer ---- */

static void
test_gemini_answer_render_from_a_chat_answer(void **state)
{
    size_t len;
    char *text = t_read(T_CHAT_FIXTURES "stream_tools.in.sse", &len);
    struct gw_buf out = {0};
    struct t_pipe p;

    (void)state;
    t_pipe_init(&p, DL_SHAPE_CHAT, false);
    t_pipe_sse(&p, DL_SHAPE_CHAT, text, len);
    assert_int_equal(dl_gemini_shape.answer_render(&p.ans, &p.ctx, &out), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":"
              "\"Thinking.\",\"thought\":true},{\"text\":\"Hello \\\"world\\\"\\n\"},{"
              "\"functionCall\":{\"id\":\"call_a\",\"name\":\"get\",\"args\":{\"q\":1}}},{"
              "\"functionCall\":{\"id\":\"call_b\",\"name\":\"put\",\"args\":{}}}]},"
              "\"finishReason\":\"STOP\",\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":"
              "30,\"candidatesTokenCount\":12,\"totalTokenCount\":42,\"cachedContentTokenCount\":"
              "10},\"modelVersion\":\"gemini-client-model\",\"responseId\":\"chatcmpl-1\"}");
    gw_buf_fini(&out);
    t_pipe_fini(&p);
    free(text);
}

/* A Gemini answer parsed and rendered again for a Gemini client: the same parts. */
static void
test_gemini_answer_through_the_hub_and_back(void **state)
{
    size_t len;
    char *body = t_fixture("answer_text.json", &len);
    struct gw_buf out = {0};
    struct t_pipe p;

    (void)state;
    t_pipe_init(&p, DL_SHAPE_GEMINI, false);
    assert_int_equal(dl_gemini_shape.answer_parse(body, len, dl_answer_fold, &p.ans), GW_OK);
    p.ctx.model = GW_STR_LIT("");
    assert_int_equal(dl_gemini_shape.answer_render(&p.ans, &p.ctx, &out), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"Thinking "
              "about \\\"quotes\\\".\",\"thought\":true,\"thoughtSignature\":\"c2lnMQ==\"},{"
              "\"text\":\"Hello, \\\"world\\\"!\\n\"},{\"functionCall\":{\"id\":\"fc_9\","
              "\"name\":\"lookup\",\"args\":{\"q\":\"x\"}}}]},\"finishReason\":\"MAX_TOKENS\","
              "\"index\":0}],\"usageMetadata\":{\"promptTokenCount\":34,\"candidatesTokenCount\":"
              "20,\"totalTokenCount\":54},\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":"
              "\"abc123\"}");
    gw_buf_fini(&out);
    t_pipe_fini(&p);
    free(body);
}

/* ---- a conversation that goes on ---- */

/* The history @google/genai's chat records from a stream: each chunk's content with
 * parts, as it came. */
static void
t_history_from(const struct gw_buf *frames, json_t *contents)
{
    struct gw_str v[64];
    size_t n = t_gm_sse_split(frames->data, frames->len, v, 64), k;

    for (k = 0; k < n; k++) {
        json_t *c = json_loadb(v[k].ptr, v[k].len, 0, NULL);
        json_t *content =
            json_object_get(json_array_get(json_object_get(c, "candidates"), 0), "content");

        assert_non_null(c);
        if (json_array_size(json_object_get(content, "parts")) > 0)
            json_array_append(contents, content);
        json_decref(c);
    }
}

static void
test_gemini_conversation_goes_on_with_ids_and_signatures(void **state)
{
    size_t len;
    char *text = t_read(T_MESSAGES_FIXTURES "stream_thinking_tools.sse", &len);
    json_t *req = json_pack("{s:[{s:s,s:[{s:s}]}]}", "contents", "role", "user", "parts", "text",
                            "Weather in Oslo?");
    json_t *contents = json_object_get(req, "contents");
    struct gw_buf out = {0}, why = {0};
    struct dl_request r;
    struct t_pipe p;
    char *body, *msgs;
    json_t *j;

    (void)state;
    t_pipe_init(&p, DL_SHAPE_MESSAGES, false);
    t_pipe_sse(&p, DL_SHAPE_MESSAGES, text, len);
    t_history_from(&p.out, contents);
    /* gemini-cli answers the call it got, echoing its id */
    json_array_append_new(contents,
                          json_pack("{s:s,s:[{s:{s:s,s:s,s:{s:s}}}]}", "role", "user", "parts",
                                    "functionResponse", "id", "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                                    "name", "get_weather", "response", "output", "-3 C"));
    body = json_dumps(req, JSON_COMPACT);
    t_gm_parse(&p.arena, body, strlen(body), &r);
    assert_int_equal(dl_shape_ops(DL_SHAPE_MESSAGES)
                         ->request_render(&r, GW_STR_LIT("claude"), 0, NULL, &out, &why),
                     GW_OK);
    j = json_loadb(out.data, out.len, 0, NULL);
    msgs = json_dumps(json_object_get(j, "messages"), JSON_COMPACT);
    /* the streamed chunks make one assistant turn: the thinking with the signature its
     * upstream made, the texts, the call with its id, answered by that id */
    t_json_eq(msgs, strlen(msgs),
              "[{\"role\":\"user\",\"content\":\"Weather in Oslo?\"},{\"role\":\"assistant\","
              "\"content\":[{\"type\":\"thinking\",\"thinking\":\"The user asks about "
              "\\\"weather\\\".\",\"signature\":\"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pki"
              "MOYds\"},{\"type\":\"text\",\"text\":\"Let me check\\n\"},{\"type\":\"text\","
              "\"text\":\" the weather.\"},{\"type\":\"tool_use\",\"id\":"
              "\"toolu_01T1x1fJ34qAmk2tNTrN7Up6\",\"name\":\"get_weather\",\"input\":{"
              "\"location\":\"Oslo\"}}]},{\"role\":\"user\",\"content\":[{\"type\":"
              "\"tool_result\",\"tool_use_id\":\"toolu_01T1x1fJ34qAmk2tNTrN7Up6\",\"content\":"
              "\"{\\\"output\\\":\\\"-3 C\\\"}\"}]}]");
    free(msgs);
    json_decref(j);
    json_decref(req);
    free(body);
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    t_pipe_fini(&p);
    free(text);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemini_frames_from_a_chat_stream),
        cmocka_unit_test(test_gemini_frames_from_a_messages_stream),
        cmocka_unit_test(test_gemini_frames_json_array_mode),
        cmocka_unit_test(test_gemini_frames_finish_held_for_the_usage_after_it),
        cmocka_unit_test(test_gemini_frames_tool_calls_and_signatures),
        cmocka_unit_test(test_gemini_frames_errors_end_the_stream),
        cmocka_unit_test(test_gemini_answer_render_from_a_chat_answer),
        cmocka_unit_test(test_gemini_answer_through_the_hub_and_back),
        cmocka_unit_test(test_gemini_conversation_goes_on_with_ids_and_signatures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
