/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_openai_answer.c - Chat Completions answers and the canonical
 * events (dialects/openai_answer.c, through dl_openai_shape): a recorded Chat stream
 * and answer under tests/fixtures/chat/ parsed to the exact canonical event sequence,
 * the edge chunks (late deltas, ids, usage order, errors, malformed data), canonical
 * events rendered to the exact chunk bytes the former Messages -> Chat converter wrote
 * (tests/fixtures/chat/stream_render_*.out.sse were written by dl_anthropic_stream_event,
 * since removed, from the same Messages streams), answers folded and rendered, and the
 * error bodies.
 * See: dialects/openai_answer.c, dialects/canon.h
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "core/arena.h"
#include "core/sse.h"
#include "dialects/openai.h"

#define FIX "tests/fixtures/chat/"

/* ---- helpers ---- */

static void
t_fixture(const char *name, struct gw_buf *out)
{
    char path[256], buf[4096];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), FIX "%s", name);
    f = fopen(path, "rb");
    if (!f) {
        print_error("cannot open %s (run from the repository's root)\n", path);
        fail();
    }
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        assert_int_equal(gw_buf_append(out, buf, n), GW_OK);
    fclose(f);
}

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

static void
t_text_eq(const struct gw_buf *got, const char *want)
{
    if (got->len != strlen(want) || (got->len && memcmp(got->data, want, got->len) != 0)) {
        print_error("got:\n%.*s\nwant:\n%s\n", (int)got->len, got->data ? got->data : "", want);
        fail();
    }
}

static const char *
t_block(enum dl_block b)
{
    return b == DL_BLOCK_TEXT ? "text" : b == DL_BLOCK_TOOL_CALL ? "tool_call" : "reasoning";
}

static const char *
t_finish(enum dl_finish f)
{
    static const char *const names[] = {"none",       "stop",           "length",
                                        "tool_calls", "content_filter", "error"};

    return names[f];
}

/* A dl_event_fn writing one line per event into the gw_buf <arg>. */
static int
t_dump(void *arg, const struct dl_event *ev)
{
    struct gw_buf *b = arg;
    const struct gw_usage *u = &ev->usage;

    switch (ev->kind) {
    case DL_EV_START:
        gw_buf_append_cstr(b, "START id=");
        gw_buf_append_json_str(b, ev->id);
        gw_buf_append_cstr(b, " model=");
        gw_buf_append_json_str(b, ev->model);
        gw_buf_printf(b, " created=%llu", (unsigned long long)ev->created);
        break;
    case DL_EV_BLOCK_START:
        gw_buf_printf(b, "BLOCK_START %u %s", ev->index, t_block(ev->block));
        if (ev->block == DL_BLOCK_TOOL_CALL) {
            gw_buf_append_cstr(b, " id=");
            gw_buf_append_json_str(b, ev->id);
            gw_buf_append_cstr(b, " name=");
            gw_buf_append_json_str(b, ev->name);
        }
        break;
    case DL_EV_DELTA:
        gw_buf_printf(b, "DELTA %u %s ", ev->index, t_block(ev->block));
        gw_buf_append_json_str(b, ev->text);
        break;
    case DL_EV_BLOCK_STOP: gw_buf_printf(b, "BLOCK_STOP %u", ev->index); break;
    case DL_EV_USAGE:
        gw_buf_printf(b, "USAGE input=%llu output=%llu cache_read=%llu cache_write=%llu",
                      (unsigned long long)u->input_tokens, (unsigned long long)u->output_tokens,
                      (unsigned long long)u->cache_read_tokens,
                      (unsigned long long)u->cache_write_tokens);
        break;
    case DL_EV_FINISH: gw_buf_printf(b, "FINISH %s", t_finish(ev->finish)); break;
    case DL_EV_ERROR:
        gw_buf_append_cstr(b, "ERROR type=");
        gw_buf_append_json_str(b, ev->error_type);
        gw_buf_printf(b, " status=%d message=", ev->status);
        gw_buf_append_json_str(b, ev->message);
        break;
    }
    gw_buf_append_cstr(b, "\n");
    return 0;
}

struct t_feed {
    struct dl_parse_state st;
    struct gw_buf dump;
    enum gw_code rc;
};

static int
t_on_sse(void *arg, const struct gw_sse_event *ev)
{
    struct t_feed *f = arg;

    f->rc = dl_openai_shape.event_parse(&f->st, ev->event, ev->data, t_dump, &f->dump);
    return f->rc != GW_OK;
}

/* Parses the SSE fixture <name> and compares the events with the fixture <want>. */
static void
t_stream_fixture(const char *name, const char *want_name)
{
    struct gw_buf sse = {0}, want = {0};
    struct gw_sse p;
    struct t_feed f = {.rc = GW_OK};

    t_fixture(name, &sse);
    t_fixture(want_name, &want);
    dl_openai_shape.parse_init(&f.st);
    gw_sse_init(&p, 0);
    assert_int_equal(gw_sse_feed(&p, sse.data, sse.len, t_on_sse, &f), GW_OK);
    assert_int_equal(f.rc, GW_OK);
    t_text_eq(&f.dump, want.data);
    gw_sse_fini(&p);
    gw_buf_fini(&sse);
    gw_buf_fini(&want);
    gw_buf_fini(&f.dump);
}

/* Parses the chunk datas <v> (NULL-terminated) and compares the events with <want>. */
static void
t_chunks(const char *const *v, const char *want)
{
    struct dl_parse_state st;
    struct gw_buf dump = {0};

    dl_openai_shape.parse_init(&st);
    for (; *v; v++)
        assert_int_equal(
            dl_openai_shape.event_parse(&st, GW_STR_LIT(""), gw_str_c(*v), t_dump, &dump), GW_OK);
    t_text_eq(&dump, want);
    gw_buf_fini(&dump);
}

#define CH(delta)                                                                                  \
    "{\"id\":\"c\",\"model\":\"m\",\"created\":1,\"choices\":[{\"index\":0,\"delta\":" delta "}]}"
#define CHF(delta, fin)                                                                            \
    "{\"id\":\"c\",\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":" delta                     \
    ",\"finish_reason\":\"" fin "\"}]}"
#define START_LINE "START id=\"c\" model=\"m\" created=1\n"

/* ---- event parse ---- */

static void
test_openai_answer_stream_fixture_gives_the_exact_events(void **state)
{
    (void)state;
    t_stream_fixture("stream_tools.in.sse", "stream_tools.events.txt");
}

static void
test_openai_answer_stream_error_chunk_gives_error_and_nothing_after(void **state)
{
    struct dl_parse_state st;
    struct gw_buf dump = {0};

    (void)state;
    t_stream_fixture("stream_error.in.sse", "stream_error.events.txt");
    /* after an error, later chunks emit nothing */
    dl_openai_shape.parse_init(&st);
    assert_int_equal(dl_openai_shape.event_parse(&st, GW_STR_LIT(""),
                                                 GW_STR_LIT("{\"error\":\"down\"}"), t_dump, &dump),
                     GW_OK);
    assert_int_equal(dl_openai_shape.event_parse(
                         &st, GW_STR_LIT(""), GW_STR_LIT(CH("{\"content\":\"x\"}")), t_dump, &dump),
                     GW_OK);
    t_text_eq(&dump, "ERROR type=\"\" status=0 message=\"down\"\n");
    gw_buf_fini(&dump);
    /* an SSE event named "error" whose data has no "error" member */
    t_chunks((const char *const[]){NULL}, "");
    dl_openai_shape.parse_init(&st);
    assert_int_equal(dl_openai_shape.event_parse(&st, GW_STR_LIT("error"),
                                                 GW_STR_LIT("{\"message\":\"quota\",\"type\":"
                                                            "\"insufficient_quota\"}"),
                                                 t_dump, &dump),
                     GW_OK);
    t_text_eq(&dump, "ERROR type=\"insufficient_quota\" status=429 message=\"quota\"\n");
    gw_buf_fini(&dump);
}

static void
test_openai_answer_stream_blocks_stay_in_sequence(void **state)
{
    (void)state;
    /* text after a tool call opens a new text block; reasoning after text likewise */
    t_chunks((const char *const[]){CH("{\"content\":\"a\"}"),
                                   CH("{\"tool_calls\":[{\"index\":0,\"id\":\"t\",\"function\":"
                                      "{\"name\":\"f\",\"arguments\":\"{}\"}}]}"),
                                   CH("{\"content\":\"b\"}"), CH("{\"reasoning\":\"r\"}"),
                                   CH("{\"refusal\":\"no\"}"), NULL},
             START_LINE "BLOCK_START 0 text\n"
                        "DELTA 0 text \"a\"\n"
                        "BLOCK_STOP 0\n"
                        "BLOCK_START 1 tool_call id=\"t\" name=\"f\"\n"
                        "DELTA 1 tool_call \"{}\"\n"
                        "BLOCK_STOP 1\n"
                        "BLOCK_START 2 text\n"
                        "DELTA 2 text \"b\"\n"
                        "BLOCK_STOP 2\n"
                        "BLOCK_START 3 reasoning\n"
                        "DELTA 3 reasoning \"r\"\n"
                        "BLOCK_STOP 3\n"
                        "BLOCK_START 4 text\n"
                        "DELTA 4 text \"no\"\n");
}

static void
test_openai_answer_stream_late_tool_arguments_keep_their_block(void **state)
{
    (void)state;
    /* interleaved parallel calls: call 0's fragment after call 1 started goes to block 0 */
    t_chunks(
        (const char *const[]){
            CH("{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"f\","
               "\"arguments\":\"{\\\"x\\\"\"}}]}"),
            CH("{\"tool_calls\":[{\"index\":1,\"id\":\"b\",\"function\":{\"name\":\"g\","
               "\"arguments\":\"{}\"}}]}"),
            CH("{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]}"),
            CHF("{}", "tool_calls"), NULL},
        START_LINE "BLOCK_START 0 tool_call id=\"a\" name=\"f\"\n"
                   "DELTA 0 tool_call \"{\\\"x\\\"\"\n"
                   "BLOCK_STOP 0\n"
                   "BLOCK_START 1 tool_call id=\"b\" name=\"g\"\n"
                   "DELTA 1 tool_call \"{}\"\n"
                   "DELTA 0 tool_call \":1}\"\n"
                   "BLOCK_STOP 1\n"
                   "FINISH tool_calls\n");
}

static void
test_openai_answer_stream_calls_without_index_follow_their_ids(void **state)
{
    (void)state;
    /* no "index": an id starts the next call, the same id or none goes on with the last;
     * five entries in one chunk (more than the notes hold: read again) */
    t_chunks(
        (const char *const[]){
            CH("{\"tool_calls\":[{\"id\":\"x\",\"function\":{\"name\":\"a\",\"arguments\":"
               "\"{\"}}]}"),
            CH("{\"tool_calls\":[{\"function\":{\"arguments\":\"}\"}}]}"),
            CH("{\"tool_calls\":[{\"id\":\"x\",\"function\":{\"arguments\":\" \"}}]}"),
            CH("{\"tool_calls\":[{\"id\":\"p\",\"function\":{\"name\":\"b\"}},"
               "{\"id\":\"q\",\"function\":{\"name\":\"c\"}},{\"id\":\"r\",\"function\":"
               "{\"name\":\"d\"}},{\"id\":\"s\",\"function\":{\"name\":\"e\"}},"
               "{\"id\":\"t\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}"),
            NULL},
        START_LINE "BLOCK_START 0 tool_call id=\"x\" name=\"a\"\n"
                   "DELTA 0 tool_call \"{\"\n"
                   "DELTA 0 tool_call \"}\"\n"
                   "DELTA 0 tool_call \" \"\n"
                   "BLOCK_STOP 0\n"
                   "BLOCK_START 1 tool_call id=\"p\" name=\"b\"\n"
                   "BLOCK_STOP 1\n"
                   "BLOCK_START 2 tool_call id=\"q\" name=\"c\"\n"
                   "BLOCK_STOP 2\n"
                   "BLOCK_START 3 tool_call id=\"r\" name=\"d\"\n"
                   "BLOCK_STOP 3\n"
                   "BLOCK_START 4 tool_call id=\"s\" name=\"e\"\n"
                   "BLOCK_STOP 4\n"
                   "BLOCK_START 5 tool_call id=\"t\" name=\"f\"\n"
                   "DELTA 5 tool_call \"{}\"\n");
}

static void
test_openai_answer_stream_ids_generated_for_calls_without_one(void **state)
{
    (void)state;
    t_chunks(
        (const char *const[]){CH("{\"tool_calls\":[{\"index\":3,\"function\":{\"name\":\"a\"}}]}"),
                              CH("{\"function_call\":{\"name\":\"old\",\"arguments\":\"{}\"}}"),
                              NULL},
        START_LINE "BLOCK_START 0 tool_call id=\"call_3\" name=\"a\"\n"
                   "BLOCK_STOP 0\n"
                   "BLOCK_START 1 tool_call id=\"call_fn\" name=\"old\"\n"
                   "DELTA 1 tool_call \"{}\"\n");
}

static void
test_openai_answer_stream_usage_and_finish_order(void **state)
{
    (void)state;
    /* usage in the finish chunk: USAGE then FINISH; content after FINISH ignored; a later
     * usage chunk still gives USAGE */
    t_chunks(
        (const char *const[]){
            CH("{\"content\":\"x\"}"),
            "{\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}],"
            "\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}",
            CH("{\"content\":\"late\"}"),
            "{\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3,"
            "\"prompt_tokens_details\":{\"cached_tokens\":4}}}",
            "[DONE]", NULL},
        START_LINE "BLOCK_START 0 text\n"
                   "DELTA 0 text \"x\"\n"
                   "BLOCK_STOP 0\n"
                   "USAGE input=5 output=2 cache_read=0 cache_write=0\n"
                   "FINISH length\n"
                   "USAGE input=3 output=3 cache_read=4 cache_write=0\n");
}

static void
test_openai_answer_stream_finish_reasons(void **state)
{
    static const char *const map[][2] = {
        {"stop", "stop"},
        {"length", "length"},
        {"tool_calls", "tool_calls"},
        {"function_call", "tool_calls"},
        {"content_filter", "content_filter"},
        {"error", "error"},
        {"eos", "stop"},
    };
    char chunk[256], want[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        snprintf(chunk, sizeof(chunk),
                 "{\"id\":\"c\",\"model\":\"m\",\"created\":1,\"choices\":[{\"index\":0,\"delta\":"
                 "{},\"finish_reason\":\"%s\"}]}",
                 map[i][0]);
        snprintf(want, sizeof(want), START_LINE "FINISH %s\n", map[i][1]);
        t_chunks((const char *const[]){chunk, NULL}, want);
    }
}

static void
test_openai_answer_stream_other_choices_and_empty_data_give_nothing(void **state)
{
    (void)state;
    t_chunks(
        (const char *const[]){
            "", "  \n", "[DONE]", " [DONE] ",
            "{\"id\":\"c\",\"model\":\"m\",\"created\":1,\"choices\":[{\"index\":1,"
            "\"delta\":{\"content\":\"other\"}}]}",
            NULL},
        START_LINE);
}

static void
test_openai_answer_stream_malformed_data_is_upstream_protocol_with_no_event(void **state)
{
    static const char *const bad[] = {
        "not json",
        "[1]",
        "42",
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]",   /* cut */
        "{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}x", /* trailing bytes */
        "{\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":96,\"id\":\"a\"}]}}]}",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct dl_parse_state st;
        struct gw_buf dump = {0};

        dl_openai_shape.parse_init(&st);
        if (dl_openai_shape.event_parse(&st, GW_STR_LIT(""), gw_str_c(bad[i]), t_dump, &dump) !=
            GW_E_UPSTREAM_PROTOCOL) {
            print_error("case %zu not refused\n", i);
            fail();
        }
        assert_int_equal(dump.len, 0);
        gw_buf_fini(&dump);
    }
}

static void
test_openai_answer_stream_long_escaped_text_is_decoded(void **state)
{
    struct gw_buf chunk = {0}, want = {0};
    struct dl_parse_state st;
    struct gw_buf dump = {0};
    int i;

    (void)state;
    /* past the 256-byte stack buffer: decoded on the heap */
    gw_buf_append_cstr(&chunk, "{\"choices\":[{\"delta\":{\"content\":\"");
    gw_buf_append_cstr(&want, "START id=\"\" model=\"\" created=0\nBLOCK_START 0 text\n"
                              "DELTA 0 text \"");
    for (i = 0; i < 300; i++) {
        gw_buf_append_cstr(&chunk, "\\u00e9\\n");
        gw_buf_append_cstr(&want, "\xc3\xa9\\n");
    }
    gw_buf_append_cstr(&chunk, "\"}}]}");
    gw_buf_append_cstr(&want, "\"\n");
    dl_openai_shape.parse_init(&st);
    assert_int_equal(dl_openai_shape.event_parse(&st, GW_STR_LIT(""),
                                                 (struct gw_str){chunk.data, chunk.len}, t_dump,
                                                 &dump),
                     GW_OK);
    t_text_eq(&dump, want.data);
    gw_buf_fini(&chunk);
    gw_buf_fini(&want);
    gw_buf_fini(&dump);
}

static int
t_stop_after_two(void *arg, const struct dl_event *ev)
{
    int *n = arg;

    (void)ev;
    return ++*n >= 2;
}

static void
test_openai_answer_stream_receiver_can_stop_the_parse(void **state)
{
    struct dl_parse_state st;
    int n = 0;

    (void)state;
    dl_openai_shape.parse_init(&st);
    assert_int_equal(dl_openai_shape.event_parse(&st, GW_STR_LIT(""),
                                                 GW_STR_LIT(CH("{\"content\":\"x\"}")),
                                                 t_stop_after_two, &n),
                     GW_OK);
    assert_int_equal(n, 2); /* START, BLOCK_START; the DELTA not emitted */
}

/* ---- answer parse ---- */

static void
test_openai_answer_parse_fixture_gives_the_exact_events(void **state)
{
    struct gw_buf body = {0}, want = {0}, dump = {0};

    (void)state;
    t_fixture("answer_tools.in.json", &body);
    t_fixture("answer_tools.events.txt", &want);
    assert_int_equal(dl_openai_shape.answer_parse(body.data, body.len, t_dump, &dump), GW_OK);
    t_text_eq(&dump, want.data);
    gw_buf_fini(&body);
    gw_buf_fini(&want);
    gw_buf_fini(&dump);
}

static void
test_openai_answer_parse_content_parts_error_body_and_refusals(void **state)
{
    static const char *const bad[] = {
        "", "nope", "[]", "{}", "{\"choices\":{}}", "{\"choices\":[]} x"};
    struct gw_buf dump = {0};
    size_t i;

    (void)state;
    assert_int_equal(
        dl_openai_shape.answer_parse(
            GW_STR_LIT("{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":"
                       "\"a\"},{\"type\":\"image_url\"},{\"type\":\"text\",\"text\":\"b\"}]},"
                       "\"finish_reason\":null}]}")
                .ptr,
            strlen("{\"choices\":[{\"message\":{\"content\":[{\"type\":\"text\",\"text\":"
                   "\"a\"},{\"type\":\"image_url\"},{\"type\":\"text\",\"text\":\"b\"}]},"
                   "\"finish_reason\":null}]}"),
            t_dump, &dump),
        GW_OK);
    t_text_eq(&dump, "START id=\"\" model=\"\" created=0\nBLOCK_START 0 text\n"
                     "DELTA 0 text \"a\"\nDELTA 0 text \"b\"\nBLOCK_STOP 0\nFINISH none\n");
    gw_buf_reset(&dump);
    assert_int_equal(dl_openai_shape.answer_parse(
                         "{\"error\":{\"message\":\"bad\",\"type\":\"invalid_request_error\","
                         "\"code\":\"x\"}}",
                         strlen("{\"error\":{\"message\":\"bad\",\"type\":\"invalid_request_"
                                "error\",\"code\":\"x\"}}"),
                         t_dump, &dump),
                     GW_OK);
    t_text_eq(&dump, "ERROR type=\"invalid_request_error\" status=400 message=\"bad\"\n");
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        gw_buf_reset(&dump);
        assert_int_equal(dl_openai_shape.answer_parse(bad[i], strlen(bad[i]), t_dump, &dump),
                         GW_E_UPSTREAM_PROTOCOL);
        assert_int_equal(dump.len, 0);
    }
    gw_buf_fini(&dump);
}

static void
test_openai_answer_usage_reads_the_answer(void **state)
{
    struct gw_buf body = {0};
    struct gw_usage u;

    (void)state;
    t_fixture("answer_tools.in.json", &body);
    assert_true(dl_openai_shape.answer_usage(body.data, body.len, &u));
    assert_int_equal(u.input_tokens, 20);
    assert_int_equal(u.cache_read_tokens, 30);
    assert_int_equal(u.output_tokens, 20);
    assert_false(dl_openai_shape.answer_usage("{\"choices\":[]}", 14, &u));
    gw_buf_fini(&body);
}

/* ---- event render ---- */

static const struct dl_render_ctx t_ctx_text = {.model = GW_STR_LIT("asked"),
                                                .id = GW_STR_LIT("req1"),
                                                .created = 1700000001,
                                                .stream_usage = true};

static void
t_render(const struct dl_event *ev, size_t n, const struct dl_render_ctx *ctx, bool end,
         struct gw_buf *out)
{
    struct dl_render_state st;
    size_t i;

    dl_openai_shape.render_init(&st, ctx);
    for (i = 0; i < n; i++)
        assert_int_equal(dl_openai_shape.event_render(&st, &ev[i], out), GW_OK);
    if (end)
        assert_int_equal(dl_openai_shape.render_end(&st, out), GW_OK);
}

#define EV_DELTA(i, b, t)                                                                          \
    {                                                                                              \
        .kind = DL_EV_DELTA, .index = (i), .block = (b), .text = GW_STR_LIT(t)                     \
    }

/* The events a Messages stream gives (test_anthropic.c's text stream, with an escaped
 * delta): what the former converter turned into stream_render_text.out.sse. */
static void
test_openai_answer_render_text_stream_matches_the_former_converter(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("msg_9"), .model = GW_STR_LIT("claude-y")},
        {.kind = DL_EV_USAGE, .usage = {25, 1, 7, 2, false}},
        {.kind = DL_EV_BLOCK_START, .index = 0, .block = DL_BLOCK_TEXT},
        EV_DELTA(0, DL_BLOCK_TEXT, "Hel"),
        EV_DELTA(0, DL_BLOCK_TEXT, "lo\n \"q\" \xc3\xa9"),
        {.kind = DL_EV_BLOCK_STOP, .index = 0},
        {.kind = DL_EV_USAGE, .usage = {25, 15, 7, 2, false}},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_STOP},
    };
    struct gw_buf out = {0}, want = {0};
    struct dl_render_ctx ctx = t_ctx_text;

    (void)state;
    t_fixture("stream_render_text.out.sse", &want);
    t_render(ev, sizeof(ev) / sizeof(ev[0]), &ctx, true, &out);
    t_text_eq(&out, want.data);
    /* without include_usage: the same minus the usage chunk */
    gw_buf_reset(&out);
    ctx.stream_usage = false;
    t_render(ev, sizeof(ev) / sizeof(ev[0]), &ctx, true, &out);
    assert_null(strstr(out.data, "usage"));
    assert_non_null(strstr(out.data, "\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"));
    gw_buf_fini(&out);
    gw_buf_fini(&want);
}

static void
test_openai_answer_render_tool_stream_matches_the_former_converter(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("msg_t"), .model = GW_STR_LIT("c")},
        {.kind = DL_EV_USAGE, .usage = {3, 0, 0, 0, false}},
        {.kind = DL_EV_BLOCK_START, .index = 0, .block = DL_BLOCK_TEXT},
        EV_DELTA(0, DL_BLOCK_TEXT, "ok"),
        {.kind = DL_EV_BLOCK_STOP, .index = 0},
        {.kind = DL_EV_BLOCK_START,
         .index = 1,
         .block = DL_BLOCK_TOOL_CALL,
         .id = GW_STR_LIT("toolu_7"),
         .name = GW_STR_LIT("get")},
        EV_DELTA(1, DL_BLOCK_TOOL_CALL, ""),
        EV_DELTA(1, DL_BLOCK_TOOL_CALL, "{\"q\":"),
        EV_DELTA(1, DL_BLOCK_TOOL_CALL, "1}"),
        {.kind = DL_EV_BLOCK_STOP, .index = 1},
        {.kind = DL_EV_BLOCK_START,
         .index = 2,
         .block = DL_BLOCK_TOOL_CALL,
         .id = GW_STR_LIT("toolu_8"),
         .name = GW_STR_LIT("put")},
        {.kind = DL_EV_BLOCK_STOP, .index = 2},
        {.kind = DL_EV_USAGE, .usage = {3, 9, 0, 0, false}},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_TOOL_CALLS},
    };
    struct gw_buf out = {0}, want = {0};
    struct dl_render_ctx ctx = {.created = 9, .stream_usage = true};

    (void)state;
    t_fixture("stream_render_tools.out.sse", &want);
    t_render(ev, sizeof(ev) / sizeof(ev[0]), &ctx, true, &out);
    t_text_eq(&out, want.data);
    gw_buf_fini(&out);
    gw_buf_fini(&want);
}

static void
test_openai_answer_render_error_ends_the_stream_without_done(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("msg_e"), .model = GW_STR_LIT("c")},
        {.kind = DL_EV_BLOCK_START, .index = 0, .block = DL_BLOCK_TEXT},
        EV_DELTA(0, DL_BLOCK_TEXT, "par"),
        {.kind = DL_EV_ERROR,
         .error_type = GW_STR_LIT("overloaded_error"),
         .message = GW_STR_LIT("upstream words, logged only"),
         .status = 529},
        EV_DELTA(0, DL_BLOCK_TEXT, "more"),
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_STOP},
    };
    struct gw_buf out = {0}, want = {0};
    struct dl_render_ctx ctx = {.created = 5, .stream_usage = true};

    (void)state;
    t_fixture("stream_render_error.out.sse", &want);
    t_render(ev, sizeof(ev) / sizeof(ev[0]), &ctx, true, &out);
    t_text_eq(&out, want.data);
    gw_buf_fini(&out);
    gw_buf_fini(&want);
}

static void
test_openai_answer_render_holds_done_for_usage_after_finish(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START},
        {.kind = DL_EV_BLOCK_START, .index = 0, .block = DL_BLOCK_REASONING},
        EV_DELTA(0, DL_BLOCK_REASONING, "think"),
        {.kind = DL_EV_BLOCK_STOP, .index = 0},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_LENGTH},
        EV_DELTA(1, DL_BLOCK_TEXT, "after the finish: dropped"),
        {.kind = DL_EV_USAGE, .usage = {1, 2, 3, 4, false}},
    };
    struct gw_buf out = {0};
    struct dl_render_ctx ctx = {
        .model = GW_STR_LIT("asked"), .id = GW_STR_LIT("req1"), .created = 3, .stream_usage = true};

    (void)state;
    t_render(ev, sizeof(ev) / sizeof(ev[0]), &ctx, false, &out);
    /* START without id or model: the context's; reasoning as reasoning_content */
    t_text_eq(&out,
              "data: {\"id\":\"chatcmpl-req1\",\"object\":\"chat.completion.chunk\",\"created\":3,"
              "\"model\":\"asked\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\","
              "\"content\":\"\"},\"finish_reason\":null}]}\n\n"
              "data: {\"id\":\"chatcmpl-req1\",\"object\":\"chat.completion.chunk\",\"created\":3,"
              "\"model\":\"asked\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":"
              "\"think\"},\"finish_reason\":null}]}\n\n"
              "data: {\"id\":\"chatcmpl-req1\",\"object\":\"chat.completion.chunk\",\"created\":3,"
              "\"model\":\"asked\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":"
              "\"length\"}]}\n\n");
    gw_buf_reset(&out);
    {
        struct dl_render_state st;
        size_t i;

        dl_openai_shape.render_init(&st, &ctx);
        for (i = 0; i < sizeof(ev) / sizeof(ev[0]); i++)
            assert_int_equal(dl_openai_shape.event_render(&st, &ev[i], &out), GW_OK);
        gw_buf_reset(&out);
        assert_int_equal(dl_openai_shape.render_end(&st, &out), GW_OK);
        t_text_eq(&out, "data: {\"id\":\"chatcmpl-req1\",\"object\":\"chat.completion.chunk\","
                        "\"created\":3,\"model\":\"asked\",\"choices\":[],\"usage\":{"
                        "\"prompt_tokens\":8,\"completion_tokens\":2,\"total_tokens\":10,"
                        "\"prompt_tokens_details\":{\"cached_tokens\":3},"
                        "\"completion_tokens_details\":{\"reasoning_tokens\":0}}}\n\n"
                        "data: [DONE]\n\n");
        gw_buf_reset(&out);
        assert_int_equal(dl_openai_shape.render_end(&st, &out), GW_OK); /* once */
        assert_int_equal(out.len, 0);
    }
    gw_buf_fini(&out);
}

/* Chat chunks in, Chat chunks out: what a client reads from the rendered chunks is
 * what the upstream's chunks said (the parser and the renderer agree). */
struct t_pipe {
    struct dl_parse_state ps;
    struct dl_render_state rs;
    struct gw_buf out;
};

static int
t_pipe_render(void *arg, const struct dl_event *ev)
{
    struct t_pipe *p = arg;

    assert_int_equal(dl_openai_shape.event_render(&p->rs, ev, &p->out), GW_OK);
    return 0;
}

static int
t_pipe_sse(void *arg, const struct gw_sse_event *ev)
{
    struct t_pipe *p = arg;

    assert_int_equal(dl_openai_shape.event_parse(&p->ps, ev->event, ev->data, t_pipe_render, p),
                     GW_OK);
    return 0;
}

static void
test_openai_answer_parse_then_render_keeps_content_and_calls(void **state)
{
    struct dl_render_ctx ctx = {.created = 1, .stream_usage = true};
    struct gw_buf sse = {0}, text = {0}, reasoning = {0}, args[2] = {{0}};
    struct t_pipe p = {.out = {0}};
    struct gw_sse in;
    const char *c;
    json_t *usage = NULL;
    const char *finish = NULL;
    char *finish_copy = NULL;

    (void)state;
    t_fixture("stream_tools.in.sse", &sse);
    dl_openai_shape.parse_init(&p.ps);
    dl_openai_shape.render_init(&p.rs, &ctx);
    gw_sse_init(&in, 0);
    assert_int_equal(gw_sse_feed(&in, sse.data, sse.len, t_pipe_sse, &p), GW_OK);
    assert_int_equal(dl_openai_shape.render_end(&p.rs, &p.out), GW_OK);
    gw_sse_fini(&in);
    /* read the rendered chunks as a client does */
    for (c = p.out.data; c && (c = strstr(c, "data: ")) != NULL; c += 6) {
        const char *e = strstr(c, "\n\n");
        json_t *j, *d, *tc;
        size_t k;

        assert_non_null(e);
        if (strncmp(c + 6, "[DONE]", 6) == 0)
            break;
        j = json_loadb(c + 6, (size_t)(e - c - 6), 0, NULL);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "id")), "chatcmpl-1");
        assert_string_equal(json_string_value(json_object_get(j, "model")), "gpt-4o");
        if (json_object_get(j, "usage")) {
            usage = json_incref(json_object_get(j, "usage"));
        } else {
            d = json_object_get(json_array_get(json_object_get(j, "choices"), 0), "delta");
            if (json_is_string(json_object_get(d, "content")))
                gw_buf_append_cstr(&text, json_string_value(json_object_get(d, "content")));
            if (json_is_string(json_object_get(d, "reasoning_content")))
                gw_buf_append_cstr(&reasoning,
                                   json_string_value(json_object_get(d, "reasoning_content")));
            json_array_foreach(json_object_get(d, "tool_calls"), k, tc)
            {
                json_int_t i = json_integer_value(json_object_get(tc, "index"));
                json_t *fn = json_object_get(tc, "function");

                assert_true(i >= 0 && i < 2);
                gw_buf_append_cstr(&args[i], json_string_value(json_object_get(fn, "arguments")));
            }
            finish = json_string_value(
                json_object_get(json_array_get(json_object_get(j, "choices"), 0), "finish_reason"));
            if (finish) {
                free(finish_copy);
                finish_copy = strdup(finish);
            }
        }
        json_decref(j);
    }
    assert_string_equal(text.data, "Hello \"world\"\n");
    assert_string_equal(reasoning.data, "Thinking.");
    assert_string_equal(args[0].data, "{\"q\":1}");
    assert_string_equal(args[1].data, "{}");
    assert_string_equal(finish_copy, "tool_calls");
    assert_non_null(usage);
    assert_int_equal(json_integer_value(json_object_get(usage, "prompt_tokens")), 30);
    assert_int_equal(json_integer_value(json_object_get(usage, "completion_tokens")), 12);
    assert_non_null(strstr(p.out.data, "data: [DONE]\n\n"));
    json_decref(usage);
    free(finish_copy);
    gw_buf_fini(&sse);
    gw_buf_fini(&text);
    gw_buf_fini(&reasoning);
    gw_buf_fini(&args[0]);
    gw_buf_fini(&args[1]);
    gw_buf_fini(&p.out);
}

/* ---- answer render ---- */

static void
t_fold(const struct dl_event *ev, size_t n, struct gw_arena *a, struct dl_answer *ans)
{
    size_t i;

    dl_answer_init(ans, a);
    for (i = 0; i < n; i++)
        assert_int_equal(dl_answer_fold(ans, &ev[i]), 0);
}

static void
test_openai_answer_render_matches_the_former_converter(void **state)
{
    /* the events of test_anthropic.c's answer (a thinking block, two texts, a tool use) */
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("msg_1"), .model = GW_STR_LIT("claude-x")},
        {.kind = DL_EV_BLOCK_START, .index = 0, .block = DL_BLOCK_TEXT},
        EV_DELTA(0, DL_BLOCK_TEXT, "Hello "),
        {.kind = DL_EV_BLOCK_STOP, .index = 0},
        {.kind = DL_EV_BLOCK_START, .index = 1, .block = DL_BLOCK_TEXT},
        EV_DELTA(1, DL_BLOCK_TEXT, "there"),
        {.kind = DL_EV_BLOCK_STOP, .index = 1},
        {.kind = DL_EV_BLOCK_START,
         .index = 2,
         .block = DL_BLOCK_TOOL_CALL,
         .id = GW_STR_LIT("toolu_1"),
         .name = GW_STR_LIT("get")},
        EV_DELTA(2, DL_BLOCK_TOOL_CALL, "{\"q\":\"a b\",\"n\":[1,2]}"),
        {.kind = DL_EV_BLOCK_STOP, .index = 2},
        {.kind = DL_EV_USAGE, .usage = {10, 20, 5, 3, false}},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_TOOL_CALLS},
    };
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("asked"), .created = 1700000000};
    struct gw_buf out = {0}, want = {0};
    struct gw_arena a;
    struct dl_answer ans;

    (void)state;
    gw_arena_init(&a);
    t_fold(ev, sizeof(ev) / sizeof(ev[0]), &a, &ans);
    t_fixture("answer_render.out.json", &want);
    assert_int_equal(dl_openai_shape.answer_render(&ans, &ctx, &out), GW_OK);
    t_json_eq(out.data, out.len, want.data);
    dl_answer_fini(&ans);
    gw_arena_fini(&a);
    gw_buf_fini(&out);
    gw_buf_fini(&want);
}

static void
test_openai_answer_render_reasoning_null_content_and_failure(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START},
        {.kind = DL_EV_BLOCK_START, .index = 0, .block = DL_BLOCK_REASONING},
        EV_DELTA(0, DL_BLOCK_REASONING, "why"),
        {.kind = DL_EV_BLOCK_START,
         .index = 1,
         .block = DL_BLOCK_TOOL_CALL,
         .id = GW_STR_LIT("c1"),
         .name = GW_STR_LIT("f")},
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_TOOL_CALLS},
    };
    const struct dl_event fail_ev = {.kind = DL_EV_ERROR,
                                     .error_type = GW_STR_LIT("api_error"),
                                     .message = GW_STR_LIT("upstream words"),
                                     .status = 500};
    struct dl_render_ctx ctx = {
        .model = GW_STR_LIT("asked"), .id = GW_STR_LIT("chatcmpl-r"), .created = 7};
    struct gw_buf out = {0};
    struct gw_arena a;
    struct dl_answer ans;

    (void)state;
    gw_arena_init(&a);
    t_fold(ev, sizeof(ev) / sizeof(ev[0]), &a, &ans);
    assert_int_equal(dl_openai_shape.answer_render(&ans, &ctx, &out), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"id\":\"chatcmpl-r\",\"object\":\"chat.completion\",\"created\":7,\"model\":"
              "\"asked\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":"
              "null,\"reasoning_content\":\"why\",\"tool_calls\":[{\"id\":\"c1\",\"type\":"
              "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"logprobs\":"
              "null,\"finish_reason\":\"tool_calls\"}]}");
    /* a failed answer: the error body, gw's words */
    assert_int_equal(dl_answer_fold(&ans, &fail_ev), 0);
    gw_buf_reset(&out);
    assert_int_equal(dl_openai_shape.answer_render(&ans, &ctx, &out), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"error\":{\"message\":\"the upstream answered HTTP 500\",\"type\":"
              "\"server_error\",\"param\":null,\"code\":null}}");
    dl_answer_fini(&ans);
    gw_arena_fini(&a);
    gw_buf_fini(&out);
}

/* Texts are escaped block by block into one string, and an id without the chatcmpl-
 * prefix gets it in front of its escaped bytes: the same as escaping the whole. */
static void
test_openai_answer_render_escapes_texts_block_by_block(void **state)
{
    const struct dl_event ev[] = {
        {.kind = DL_EV_START, .id = GW_STR_LIT("msg\"1"), .model = GW_STR_LIT("m")},
        {.kind = DL_EV_BLOCK_START, .index = 0, .block = DL_BLOCK_TEXT},
        EV_DELTA(0, DL_BLOCK_TEXT, "a\"b\n"),
        {.kind = DL_EV_BLOCK_START, .index = 1, .block = DL_BLOCK_REASONING},
        {.kind = DL_EV_BLOCK_START, .index = 2, .block = DL_BLOCK_TEXT},
        {.kind = DL_EV_BLOCK_START, .index = 3, .block = DL_BLOCK_TEXT},
        EV_DELTA(3, DL_BLOCK_TEXT, "\\c\x01\xc3\xa9"),
        {.kind = DL_EV_FINISH, .finish = DL_FINISH_LENGTH},
    };
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("asked"), .created = 9};
    struct gw_buf out = {0};
    struct gw_arena a;
    struct dl_answer ans;

    (void)state;
    gw_arena_init(&a);
    t_fold(ev, sizeof(ev) / sizeof(ev[0]), &a, &ans);
    /* in front of the render: what a caller wrote before stays */
    assert_int_equal(gw_buf_append_cstr(&out, "x"), GW_OK);
    assert_int_equal(dl_openai_shape.answer_render(&ans, &ctx, &out), GW_OK);
    /* an empty reasoning block writes no reasoning_content */
    assert_string_equal(out.data,
                        "x{\"id\":\"chatcmpl-msg\\\"1\",\"object\":\"chat.completion\","
                        "\"created\":9,\"model\":\"m\",\"choices\":[{\"index\":0,\"message\":"
                        "{\"role\":\"assistant\",\"content\":\"a\\\"b\\n\\\\c\\u0001\xc3\xa9\"},"
                        "\"logprobs\":null,\"finish_reason\":\"length\"}]}");
    dl_answer_fini(&ans);
    gw_arena_fini(&a);
    gw_buf_fini(&out);
}

/* ---- errors ---- */

static void
test_openai_answer_upstream_error_read_finds_type_and_message(void **state)
{
    static const struct {
        const char *body;
        const char *type, *message;
    } cases[] = {
        {"{\"error\":{\"message\":\"Bad model\",\"type\":\"invalid_request_error\",\"param\":null,"
         "\"code\":\"model_not_found\"}}",
         "invalid_request_error", "Bad model"},
        {"{\"error\":{\"message\":\"slow down\",\"code\":\"rate_limit_exceeded\"}}",
         "rate_limit_exceeded", "slow down"},
        {"{\"error\":\"plain words\"}", "", "plain words"},
        {"{\"object\":\"error\",\"message\":\"vllm says\",\"type\":\"BadRequestError\","
         "\"code\":400}",
         "BadRequestError", "vllm says"},
        {"<html>502</html>", "", ""},
        {"", "", ""},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_str type, msg;

        dl_openai_shape.upstream_error_read(cases[i].body, strlen(cases[i].body), 400, &type, &msg);
        if (!gw_str_eq(type, gw_str_c(cases[i].type)) ||
            !gw_str_eq(msg, gw_str_c(cases[i].message))) {
            print_error("case %zu: type \"%.*s\" message \"%.*s\"\n", i, (int)type.len, type.ptr,
                        (int)msg.len, msg.ptr);
            fail();
        }
    }
}

/* A recorded OpenAI error answer read (type and message; its code is not carried), then
 * rendered back from them. */
static void
test_openai_answer_upstream_error_fixture_read_and_rendered(void **state)
{
    struct gw_buf body = {0}, out = {0};
    struct gw_str type, msg;

    (void)state;
    t_fixture("error_context_length.json", &body);
    dl_openai_shape.upstream_error_read(body.data, body.len, 400, &type, &msg);
    assert_true(gw_str_eq(type, GW_STR_LIT("invalid_request_error")));
    assert_true(msg.len > 0 && memcmp(msg.ptr, "This model's maximum context length", 35) == 0);
    assert_int_equal(dl_openai_shape.upstream_error_render(400, type, msg, &out), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"error\":{\"message\":\"This model's maximum context length is 128000 tokens. "
              "However, your messages resulted in 130412 tokens. Please reduce the length of the "
              "messages.\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}");
    gw_buf_fini(&body);
    gw_buf_fini(&out);
}

static void
test_openai_answer_upstream_error_render_maps_foreign_types(void **state)
{
    static const struct {
        const char *type;
        int status;
        const char *want_type, *want_code;
    } map[] = {
        {"invalid_request_error", 400, "invalid_request_error", "null"},
        {"authentication_error", 401, "authentication_error", "null"},
        {"permission_error", 403, "permission_error", "null"},
        {"not_found_error", 404, "not_found_error", "null"},
        {"rate_limit_error", 429, "requests", "\"rate_limit_exceeded\""},
        {"overloaded_error", 529, "server_error", "null"},
        {"api_error", 500, "server_error", "null"},
        {"billing_error", 400, "insufficient_quota", "\"insufficient_quota\""},
        {"RESOURCE_EXHAUSTED", 429, "requests", "\"rate_limit_exceeded\""},
        {"UNAVAILABLE", 503, "server_error", "null"},
        {"ThrottlingException", 400, "requests", "\"rate_limit_exceeded\""},
        {"something_new", 404, "not_found_error", "null"},
        {"", 418, "invalid_request_error", "null"},
        {"", 502, "server_error", "null"},
    };
    char want[256];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        struct gw_buf out = {0};

        assert_int_equal(dl_openai_shape.upstream_error_render(map[i].status, gw_str_c(map[i].type),
                                                               GW_STR_LIT("why \"q\""), &out),
                         GW_OK);
        snprintf(want, sizeof(want),
                 "{\"error\":{\"message\":\"why \\\"q\\\"\",\"type\":\"%s\",\"param\":null,"
                 "\"code\":%s}}",
                 map[i].want_type, map[i].want_code);
        t_json_eq(out.data, out.len, want);
        gw_buf_fini(&out);
    }
    {
        struct gw_buf out = {0};

        assert_int_equal(
            dl_openai_shape.upstream_error_render(502, GW_STR_LIT(""), GW_STR_LIT(""), &out),
            GW_OK);
        t_json_eq(out.data, out.len,
                  "{\"error\":{\"message\":\"the upstream answered HTTP 502\",\"type\":"
                  "\"server_error\",\"param\":null,\"code\":null}}");
        gw_buf_fini(&out);
    }
}

static void
test_openai_answer_error_render_and_frame_are_the_shapes_error_body_and_chunk(void **state)
{
    struct gw_buf a = {0}, b = {0};

    (void)state;
    assert_int_equal(dl_openai_shape.error_render(GW_E_UNCONVERTIBLE, GW_STR_LIT("n: no"), &a),
                     GW_OK);
    assert_int_equal(dl_openai_error_body(GW_E_UNCONVERTIBLE, GW_STR_LIT("n: no"), &b), GW_OK);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    gw_buf_reset(&a);
    gw_buf_reset(&b);
    assert_int_equal(dl_openai_shape.error_frame(GW_E_UPSTREAM_DROPPED, GW_STR_LIT("x"), &a),
                     GW_OK);
    assert_int_equal(dl_openai_error_chunk(GW_E_UPSTREAM_DROPPED, GW_STR_LIT("x"), &b), GW_OK);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    assert_int_equal(dl_openai_shape.shape, DL_SHAPE_CHAT);
    assert_ptr_equal(dl_shape_ops(DL_SHAPE_CHAT), &dl_openai_shape);
    gw_buf_fini(&a);
    gw_buf_fini(&b);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai_answer_stream_fixture_gives_the_exact_events),
        cmocka_unit_test(test_openai_answer_stream_error_chunk_gives_error_and_nothing_after),
        cmocka_unit_test(test_openai_answer_stream_blocks_stay_in_sequence),
        cmocka_unit_test(test_openai_answer_stream_late_tool_arguments_keep_their_block),
        cmocka_unit_test(test_openai_answer_stream_calls_without_index_follow_their_ids),
        cmocka_unit_test(test_openai_answer_stream_ids_generated_for_calls_without_one),
        cmocka_unit_test(test_openai_answer_stream_usage_and_finish_order),
        cmocka_unit_test(test_openai_answer_stream_finish_reasons),
        cmocka_unit_test(test_openai_answer_stream_other_choices_and_empty_data_give_nothing),
        cmocka_unit_test(
            test_openai_answer_stream_malformed_data_is_upstream_protocol_with_no_event),
        cmocka_unit_test(test_openai_answer_stream_long_escaped_text_is_decoded),
        cmocka_unit_test(test_openai_answer_stream_receiver_can_stop_the_parse),
        cmocka_unit_test(test_openai_answer_parse_fixture_gives_the_exact_events),
        cmocka_unit_test(test_openai_answer_parse_content_parts_error_body_and_refusals),
        cmocka_unit_test(test_openai_answer_usage_reads_the_answer),
        cmocka_unit_test(test_openai_answer_render_text_stream_matches_the_former_converter),
        cmocka_unit_test(test_openai_answer_render_tool_stream_matches_the_former_converter),
        cmocka_unit_test(test_openai_answer_render_error_ends_the_stream_without_done),
        cmocka_unit_test(test_openai_answer_render_holds_done_for_usage_after_finish),
        cmocka_unit_test(test_openai_answer_parse_then_render_keeps_content_and_calls),
        cmocka_unit_test(test_openai_answer_render_matches_the_former_converter),
        cmocka_unit_test(test_openai_answer_render_reasoning_null_content_and_failure),
        cmocka_unit_test(test_openai_answer_render_escapes_texts_block_by_block),
        cmocka_unit_test(test_openai_answer_upstream_error_read_finds_type_and_message),
        cmocka_unit_test(test_openai_answer_upstream_error_fixture_read_and_rendered),
        cmocka_unit_test(test_openai_answer_upstream_error_render_maps_foreign_types),
        cmocka_unit_test(
            test_openai_answer_error_render_and_frame_are_the_shapes_error_body_and_chunk),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
