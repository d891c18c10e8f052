/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_responses_request.c - OpenAI Responses requests on the hub
 * (dialects/responses_request.c): a recorded Codex CLI request and an openai-node style
 * request parsed into the exact canonical request; both rendered back for a Responses
 * upstream (golden files, a fixed point) and converted for Chat and Messages upstreams
 * (golden files, dropped fields); every refusal of parse naming its field; items the
 * hub does not model kept whole; tool_choice, text.format, reasoning and logprobs
 * settings; Chat and Messages clients' requests rendered for a Responses upstream, with
 * what is dropped and what is refused; out of memory.
 * See: dialects/responses_request.c, tests/fixtures/responses/
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

#define T_UPSTREAM GW_STR_LIT("up-model")

static const struct dl_shape_ops *
t_ops(enum dl_shape s)
{
    const struct dl_shape_ops *o = dl_shape_ops(s);

    assert_non_null(o);
    return o;
}

static void
t_parse_as(enum dl_shape src, struct gw_arena *a, const char *body, size_t len,
           struct dl_request *r)
{
    struct gw_buf why = {0};
    enum gw_code rc = t_ops(src)->request_parse(a, body, len, r, &why);

    if (rc != GW_OK)
        print_error("parse: %s\n", why.data ? why.data : "");
    assert_int_equal(rc, GW_OK);
    gw_buf_fini(&why);
}

static void
t_parse(struct gw_arena *a, const char *body, struct dl_request *r)
{
    t_parse_as(DL_SHAPE_RESPONSES, a, body, strlen(body), r);
}

static bool
t_eq(struct gw_str s, const char *lit)
{
    return gw_str_eq(s, gw_str_c(lit));
}

#define T_STR_EQ(s, lit)                                                                           \
    do {                                                                                           \
        if (!t_eq((s), (lit))) {                                                                   \
            print_error("got \"%.*s\", want \"%s\"\n", (int)(s).len, (s).ptr ? (s).ptr : "",       \
                        (lit));                                                                    \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

/* The dropped names, space-separated in order. */
static void
t_dropped_is(const struct dl_dropped *d, const char *want)
{
    struct gw_buf b = {0};
    size_t k;

    for (k = 0; k < d->n; k++) {
        if (k)
            gw_buf_append_cstr(&b, " ");
        gw_buf_append_str(&b, d->name[k]);
    }
    if (strcmp(b.len ? b.data : "", want) != 0) {
        print_error("dropped: \"%s\", want \"%s\"\n", b.len ? b.data : "", want);
        fail();
    }
    gw_buf_fini(&b);
}

/* Renders <r> for <to> and compares with the JSON <want> and the dropped names. */
static void
t_render_is(const struct dl_request *r, enum dl_shape to, uint64_t def, const char *want,
            const char *dropped)
{
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};
    enum gw_code rc = t_ops(to)->request_render(r, T_UPSTREAM, def, &d, &out, &why);

    if (rc != GW_OK)
        print_error("render: %s\n", why.data ? why.data : "");
    assert_int_equal(rc, GW_OK);
    t_json_eq(out.data, out.len, want);
    t_dropped_is(&d, dropped);
    gw_buf_fini(&out);
    gw_buf_fini(&why);
}

/* Renders <r> for <to>: refused, <why> holding <reason>, <out> as it was (and, for this
 * shape's renderer, the dropped list too: nothing is dropped from a request not sent). */
static void
t_render_refused(const struct dl_request *r, enum dl_shape to, const char *reason)
{
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};

    assert_int_equal(gw_buf_append_cstr(&out, "kept"), GW_OK);
    assert_int_equal(t_ops(to)->request_render(r, T_UPSTREAM, 0, &d, &out, &why),
                     GW_E_UNCONVERTIBLE);
    assert_string_equal(out.data, "kept");
    if (to == DL_SHAPE_RESPONSES)
        assert_int_equal(d.n, 0);
    if (!why.data || !strstr(why.data, reason)) {
        print_error("why: \"%s\", want \"%s\" in it\n", why.data ? why.data : "", reason);
        fail();
    }
    gw_buf_fini(&out);
    gw_buf_fini(&why);
}

/* Parses <body>: refused with GW_E_BAD_REQUEST, <why> holding <reason>. */
static void
t_refused(const char *body, const char *reason)
{
    struct gw_buf why = {0};
    struct dl_request r;
    struct gw_arena a;

    gw_arena_init(&a);
    assert_int_equal(dl_responses_shape.request_parse(&a, body, strlen(body), &r, &why),
                     GW_E_BAD_REQUEST);
    if (!why.data || !strstr(why.data, reason)) {
        print_error("body %s\nwhy: \"%s\", want \"%s\" in it\n", body, why.data ? why.data : "",
                    reason);
        fail();
    }
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

static void
t_fixture_is(const struct gw_buf *out, const char *name)
{
    size_t len;
    char *want = t_fixture(name, &len);

    t_json_is(out->data, out->len, want, len);
    free(want);
}

/* ---- the recorded requests ---- */

static void
test_responses_request_parse_codex_fields(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    size_t len;
    char *body = t_fixture("request_codex.in.json", &len);
    const struct dl_message *m;

    (void)state;
    gw_arena_init(&a);
    t_parse_as(DL_SHAPE_RESPONSES, &a, body, len, &r);
    assert_int_equal(r.source, DL_SHAPE_RESPONSES);
    T_STR_EQ(r.model, "gpt-5-codex");
    assert_true(r.stream);
    assert_int_equal(r.store, 0);
    assert_int_equal(r.parallel_tool_calls, 0);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_AUTO);
    T_STR_EQ(r.reasoning_effort, "medium");
    assert_true(r.thinking);
    T_STR_EQ(r.prompt_cache_key, "0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b");
    assert_int_equal(r.needs, DL_NEED_F_HOSTED_TOOLS);
    /* instructions first, then the developer message */
    assert_int_equal(r.n_system, 2);
    assert_non_null(strstr(r.system[0].text.ptr, "You are Codex"));
    assert_int_equal(strncmp(r.system[1].text.ptr, "<permissions instructions>", 26), 0);
    assert_int_equal(r.n_messages, 8);
    assert_int_equal(r.messages[0].role, DL_ROLE_USER);
    assert_int_equal(r.messages[1].role, DL_ROLE_USER);
    T_STR_EQ(r.messages[1].parts[0].text, "Why does `make test` fail? Fix it.");
    /* reasoning and the shell call join one assistant message */
    m = &r.messages[2];
    assert_int_equal(m->role, DL_ROLE_ASSISTANT);
    assert_int_equal(m->n_parts, 2);
    assert_int_equal(m->parts[0].kind, DL_PART_REASONING);
    T_STR_EQ(m->parts[0].id, "rs_68c1d9a4b5d08193a9a1b8b3c0e2f7d1");
    T_STR_EQ(m->parts[0].text, "**Inspecting the test failure**\n\nI'll run the tests first.");
    T_STR_EQ(m->parts[0].signature, "gAAAAABowdmkQ2r8xX1yZ9pW3qV7nT5mL0kJ8hG6fD4sA2");
    assert_int_equal(m->parts[0].sig_shape, DL_SHAPE_RESPONSES);
    assert_int_equal(m->parts[1].kind, DL_PART_TOOL_CALL);
    T_STR_EQ(m->parts[1].id, "call_Qm3lZ1Xv2Ww8tYk0aBc9dEf1");
    T_STR_EQ(m->parts[1].name, "shell");
    T_STR_EQ(m->parts[1].arguments, "{\"command\":[\"bash\",\"-lc\",\"make test 2>&1 | tail "
                                    "-20\"],\"workdir\":\"/home/dev/repo\",\"timeout_ms\":120000}");
    m = &r.messages[3];
    assert_int_equal(m->role, DL_ROLE_TOOL);
    assert_int_equal(m->parts[0].kind, DL_PART_TOOL_RESULT);
    T_STR_EQ(m->parts[0].call_id, "call_Qm3lZ1Xv2Ww8tYk0aBc9dEf1");
    assert_int_equal(m->parts[0].n_content, 1);
    T_STR_EQ(m->parts[0].content[0].text,
             "tests/test_x.c:12: assertion \"n == 3\" failed\nmake: *** [test] Error 1");
    /* a reasoning item with no summary, and the custom tool's call: a call whose
     * arguments are {"input": TEXT}, answered by its output */
    m = &r.messages[4];
    assert_int_equal(m->role, DL_ROLE_ASSISTANT);
    assert_int_equal(m->n_parts, 2);
    assert_int_equal(m->parts[0].text.len, 0);
    T_STR_EQ(m->parts[0].signature, "gAAAAABowdmwR7s9yY2zA0qX4rW8oU6nM1lK9iH7gE5tB3");
    assert_int_equal(m->parts[1].kind, DL_PART_TOOL_CALL);
    T_STR_EQ(m->parts[1].name, "apply_patch");
    T_STR_EQ(m->parts[1].id, "call_Ap9Zx8Yw7Vu6");
    T_STR_EQ(m->parts[1].arguments,
             "{\"input\":\"*** Begin Patch\\n*** Update File: tests/test_x.c\\n@@\\n-    "
             "assert(n == 3);\\n+    assert(n == 4);\\n*** End Patch\\n\"}");
    m = &r.messages[5];
    assert_int_equal(m->role, DL_ROLE_TOOL);
    assert_int_equal(m->parts[0].kind, DL_PART_TOOL_RESULT);
    T_STR_EQ(m->parts[0].call_id, "call_Ap9Zx8Yw7Vu6");
    assert_int_equal(r.messages[6].role, DL_ROLE_ASSISTANT);
    T_STR_EQ(r.messages[6].parts[0].text,
             "The expected count was off by one; the test now expects 4.");
    assert_int_equal(r.messages[7].role, DL_ROLE_USER);
    /* two function tools, the custom and the hosted one kept as written */
    assert_int_equal(r.n_tools, 4);
    T_STR_EQ(r.tools[0].name, "shell");
    assert_false(r.tools[0].strict);
    assert_int_equal(r.tools[0].hosted.len, 0);
    assert_int_equal(strncmp(r.tools[0].parameters.ptr, "{\"type\": \"object\"", 17), 0);
    /* the custom tool: a function of one string "input", its grammar in the
     * description, its JSON kept for a Responses upstream */
    T_STR_EQ(r.tools[2].name, "apply_patch");
    assert_int_equal(r.tools[2].hosted.len, 0);
    assert_true(r.tools[2].freeform.len > 0);
    assert_non_null(strstr(r.tools[2].parameters.ptr, "\"input\""));
    assert_non_null(strstr(r.tools[2].description.ptr, "The input follows this lark grammar:\n"));
    assert_ptr_equal(dl_request_freeform(&r, GW_STR_LIT("apply_patch")), &r.tools[2]);
    assert_null(dl_request_freeform(&r, GW_STR_LIT("shell")));
    T_STR_EQ(r.tools[3].name, "web_search");
    T_STR_EQ(r.tools[3].hosted, "{\"type\": \"web_search\"}");
    /* what the hub does not model: extras by name */
    assert_int_equal(r.n_extras, 3);
    T_STR_EQ(r.extras[0].name, "reasoning.summary");
    T_STR_EQ(r.extras[0].raw, "\"auto\"");
    T_STR_EQ(r.extras[1].name, "include");
    T_STR_EQ(r.extras[2].name, "text.verbosity");
    gw_arena_fini(&a);
    free(body);
}

/* <name> parsed renders for a Responses upstream as <golden>, and that render is a
 * fixed point (parsed and rendered again, the same bytes). */
static void
t_round_trip(const char *name, const char *golden)
{
    struct gw_buf out = {0}, again = {0}, why = {0};
    struct dl_request r, r2;
    struct dl_dropped d = {0};
    struct gw_arena a;
    size_t len;
    char *body = t_fixture(name, &len);

    gw_arena_init(&a);
    t_parse_as(DL_SHAPE_RESPONSES, &a, body, len, &r);
    assert_int_equal(dl_responses_shape.request_render(&r, T_UPSTREAM, 0, &d, &out, &why), GW_OK);
    assert_int_equal(d.n, 0); /* a Responses upstream takes everything */
    t_fixture_is(&out, golden);
    t_parse_as(DL_SHAPE_RESPONSES, &a, out.data, out.len, &r2);
    assert_int_equal(dl_responses_shape.request_render(&r2, T_UPSTREAM, 0, NULL, &again, &why),
                     GW_OK);
    assert_int_equal(again.len, out.len);
    assert_memory_equal(again.data, out.data, out.len);
    gw_buf_fini(&out);
    gw_buf_fini(&again);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
    free(body);
}

static void
test_responses_request_round_trip_codex(void **state)
{
    (void)state;
    /* instructions and the developer message joined; items, hosted tools, reasoning with
     * its ids and encrypted content, extras in their objects */
    t_round_trip("request_codex.in.json", "request_codex.out.json");
}

static void
test_responses_request_round_trip_plain(void **state)
{
    (void)state;
    t_round_trip("request_plain.in.json", "request_plain.responses.out.json");
}

static void
test_responses_request_codex_hosted_tool_refused_custom_tool_converted(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    size_t len;
    char *body = t_fixture("request_codex.in.json", &len);

    (void)state;
    gw_arena_init(&a);
    t_parse_as(DL_SHAPE_RESPONSES, &a, body, len, &r);
    /* web_search is a hosted tool: refused (DESIGN.md 11) */
    t_render_refused(&r, DL_SHAPE_CHAT, "hosted tools");
    t_render_refused(&r, DL_SHAPE_MESSAGES, "hosted tools");
    t_render_refused(&r, DL_SHAPE_GEMINI, "hosted tools");
    /* without it, every shape takes the request: apply_patch (custom) goes as a function
     * of one string, its call and output as a tool call and its result */
    r.n_tools = 3;
    r.needs = 0;
    for (int to = DL_SHAPE_CHAT; to <= DL_SHAPE_GEMINI; to++) {
        struct gw_buf out = {0}, why = {0};
        struct dl_dropped d = {0};

        assert_int_equal(
            t_ops((enum dl_shape)to)->request_render(&r, T_UPSTREAM, 0, &d, &out, &why), GW_OK);
        assert_non_null(strstr(out.data, "apply_patch"));
        assert_non_null(strstr(out.data, "Success. Updated the following files"));
        gw_buf_fini(&out);
        gw_buf_fini(&why);
    }
    gw_arena_fini(&a);
    free(body);
}

static void
t_convert(const char *golden, enum dl_shape to, const char *dropped)
{
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};
    struct dl_request r;
    struct gw_arena a;
    size_t len;
    char *body = t_fixture("request_plain.in.json", &len);

    gw_arena_init(&a);
    t_parse_as(DL_SHAPE_RESPONSES, &a, body, len, &r);
    assert_int_equal(t_ops(to)->request_render(&r, T_UPSTREAM, 0, &d, &out, &why), GW_OK);
    t_fixture_is(&out, golden);
    t_dropped_is(&d, dropped);
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
    free(body);
}

static void
test_responses_request_plain_to_chat(void **state)
{
    (void)state;
    /* system parts in one message, parallel calls in one assistant message, one tool
     * message per result; the Responses-only settings dropped by name */
    t_convert("request_plain.chat.out.json", DL_SHAPE_CHAT,
              "metadata truncation service_tier safety_identifier");
}

static void
test_responses_request_plain_to_messages(void **state)
{
    (void)state;
    t_convert("request_plain.messages.out.json", DL_SHAPE_MESSAGES,
              "detail strict top_p metadata truncation service_tier safety_identifier");
}

/* ---- parse: refusals ---- */

static void
test_responses_request_refuses_what_is_not_a_responses_request(void **state)
{
    static const char *const cases[][2] = {
        {"", "body: empty"},
        {"[1]", "body: must be a JSON object"},
        {"{\"model\":\"m\",", "body: not valid JSON at line 1"},
        {"{\"input\":\"hi\"}", "model: required string"},
        {"{\"model\":\"\"}", "model: required string"},
        {"{\"model\":7}", "model: required string"},
        {"{\"model\":\"m\",\"input\":7}", "input: must be a string or an array of items"},
        {"{\"model\":\"m\",\"input\":[1]}", "input[0]: must be an object"},
        {"{\"model\":\"m\",\"input\":[{\"type\":7}]}", "input[0].type: must be a string"},
        {"{\"model\":\"m\",\"input\":[{\"role\":\"tool\",\"content\":\"x\"}]}",
         "input[0].role: must be user, assistant, system or developer"},
        {"{\"model\":\"m\",\"input\":[{\"role\":\"user\"}]}",
         "input[0].content: required string or array of content parts"},
        {"{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":[7]}]}",
         "input[0].content[0]: must be an object"},
        {"{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":[{\"text\":\"x\"}]}]}",
         "input[0].content[0].type: required string"},
        {"{\"model\":\"m\",\"input\":[\"ok\",{\"role\":\"user\",\"content\":[{\"type\":"
         "\"input_text\"}]}]}",
         "input[0]: must be an object"},
        {"{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"input_text\",\"text\":1}]}]}",
         "input[0].content[0].text: required string"},
        {"{\"model\":\"m\",\"input\":[{\"role\":\"assistant\",\"content\":[{\"type\":"
         "\"refusal\"}]}]}",
         "input[0].content[0].refusal: required string"},
        {"{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"input_image\",\"detail\":\"low\"}]}]}",
         "input[0].content[0].image_url: required string (or file_id)"},
        {"{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"input_image\",\"image_url\":\"https://x\",\"detail\":3}]}]}",
         "input[0].content[0].detail: required string"},
        {"{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"input_file\",\"filename\":\"a.pdf\"}]}]}",
         "input[0].content[0]: file_data, file_url or file_id required"},
        {"{\"model\":\"m\",\"input\":[{\"type\":\"function_call\",\"name\":\"f\","
         "\"arguments\":\"{}\"}]}",
         "input[0].call_id: required string"},
        {"{\"model\":\"m\",\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\","
         "\"arguments\":\"{}\"}]}",
         "input[0].name: required string"},
        {"{\"model\":\"m\",\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\","
         "\"name\":\"f\",\"arguments\":{}}]}",
         "input[0].arguments: required string"},
        {"{\"model\":\"m\",\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\"}]}",
         "input[0].output: required string or array of content parts"},
        {"{\"model\":\"m\",\"input\":[{\"type\":\"function_call_output\",\"output\":\"x\"}]}",
         "input[0].call_id: required string"},
        {"{\"model\":\"m\",\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\","
         "\"output\":[{\"type\":\"input_text\"}]}]}",
         "input[0].output[0].text: required string"},
        {"{\"model\":\"m\",\"input\":[{\"type\":\"reasoning\",\"summary\":\"x\"}]}",
         "input[0].summary: must be an array"},
        {"{\"model\":\"m\",\"input\":[{\"type\":\"reasoning\",\"summary\":[{\"type\":"
         "\"summary_text\"}]}]}",
         "input[0].summary[0].text: required string"},
        {"{\"model\":\"m\",\"input\":[{\"type\":\"reasoning\",\"summary\":[],"
         "\"encrypted_content\":5}]}",
         "input[0].encrypted_content: required string"},
        {"{\"model\":\"m\",\"instructions\":[]}", "instructions: must be a string"},
        {"{\"model\":\"m\",\"tools\":{}}", "tools: must be an array"},
        {"{\"model\":\"m\",\"tools\":[3]}", "tools[0]: must be an object"},
        {"{\"model\":\"m\",\"tools\":[{\"name\":\"f\"}]}", "tools[0].type: required string"},
        {"{\"model\":\"m\",\"tools\":[{\"type\":\"function\"}]}", "tools[0].name: required string"},
        {"{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":[]}]}",
         "tools[0].parameters: must be a JSON schema object"},
        {"{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"strict\":1}]}",
         "tools[0].strict: must be a boolean"},
        {"{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"name\":\"f\","
         "\"description\":1}]}",
         "tools[0].description: required string"},
        {"{\"model\":\"m\",\"tool_choice\":\"any\"}",
         "tool_choice: must be auto, none, required or an object"},
        {"{\"model\":\"m\",\"tool_choice\":1}",
         "tool_choice: must be auto, none, required or an object"},
        {"{\"model\":\"m\",\"tool_choice\":{\"name\":\"f\"}}", "tool_choice.type: required string"},
        {"{\"model\":\"m\",\"tool_choice\":{\"type\":\"function\"}}",
         "tool_choice.name: required string"},
        {"{\"model\":\"m\",\"tool_choice\":{\"type\":\"allowed_tools\",\"mode\":\"none\","
         "\"tools\":[]}}",
         "tool_choice.mode: must be auto or required"},
        {"{\"model\":\"m\",\"tool_choice\":{\"type\":\"allowed_tools\",\"mode\":\"auto\"}}",
         "tool_choice.tools: required array"},
        {"{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],"
         "\"tool_choice\":{\"type\":\"allowed_tools\",\"mode\":\"auto\",\"tools\":[1]}}",
         "tool_choice.tools: must hold objects"},
        {"{\"model\":\"m\",\"parallel_tool_calls\":\"yes\"}",
         "parallel_tool_calls: must be a boolean"},
        {"{\"model\":\"m\",\"temperature\":\"hot\"}", "temperature: must be a number"},
        {"{\"model\":\"m\",\"top_p\":true}", "top_p: must be a number"},
        {"{\"model\":\"m\",\"max_output_tokens\":0}", "max_output_tokens: must be a positive"},
        {"{\"model\":\"m\",\"max_output_tokens\":1.5}", "max_output_tokens: must be a positive"},
        {"{\"model\":\"m\",\"text\":\"json\"}", "text: must be an object"},
        {"{\"model\":\"m\",\"text\":{\"format\":\"json\"}}", "text.format: must be an object"},
        {"{\"model\":\"m\",\"text\":{\"format\":{}}}", "text.format.type: required string"},
        {"{\"model\":\"m\",\"text\":{\"format\":{\"type\":\"json_schema\",\"schema\":{}}}}",
         "text.format.name: required string"},
        {"{\"model\":\"m\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"x\"}}}",
         "text.format.schema: required object"},
        {"{\"model\":\"m\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"x\","
         "\"schema\":{},\"strict\":\"yes\"}}}",
         "text.format.strict: must be a boolean"},
        {"{\"model\":\"m\",\"reasoning\":[]}", "reasoning: must be an object"},
        {"{\"model\":\"m\",\"reasoning\":{\"effort\":1}}", "reasoning.effort: must be a string"},
        {"{\"model\":\"m\",\"stream\":\"true\"}", "stream: must be a boolean"},
        {"{\"model\":\"m\",\"store\":1}", "store: must be a boolean"},
        {"{\"model\":\"m\",\"previous_response_id\":1}", "previous_response_id: must be a string"},
        {"{\"model\":\"m\",\"prompt_cache_key\":{}}", "prompt_cache_key: must be a string"},
        {"{\"model\":\"m\",\"user\":[]}", "user: must be a string"},
        {"{\"model\":\"m\",\"metadata\":\"x\"}", "metadata: must be an object"},
        {"{\"model\":\"m\",\"top_logprobs\":-1}", "top_logprobs: must be a non-negative"},
        {"{\"model\":\"m\",\"include\":\"x\"}", "include: must be an array of strings"},
        {"{\"model\":\"m\",\"include\":[1]}", "include[0]: must be a string"},
        {"{\"model\":\"m\",\"temperature\":1e999}", "body: number out of range"},
        {"{\"model\":\"m\",\"text.verbosity\":\"low\"}",
         "body: a parameter name holding '.' is not a Responses parameter"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        t_refused(cases[i][0], cases[i][1]);
}

static void
test_responses_request_refusal_never_quotes_the_body(void **state)
{
    const char *body = "{\"model\":\"m\",\"input\":[{\"role\":\"secret-role-xyz\",\"content\":"
                       "\"secret-text-xyz\"}]}";
    struct gw_buf why = {0};
    struct dl_request r;
    struct gw_arena a;

    (void)state;
    gw_arena_init(&a);
    assert_int_equal(dl_responses_shape.request_parse(&a, body, strlen(body), &r, &why),
                     GW_E_BAD_REQUEST);
    assert_null(strstr(why.data, "secret"));
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

static void
test_responses_request_refuses_a_read_field_given_twice(void **state)
{
    (void)state;
    t_refused("{\"model\":\"a\",\"input\":\"x\",\"model\":\"b\"}",
              "duplicate key \"model\" in the request body");
    t_refused("{\"model\":\"a\",\"store\":false,\"store\":true}",
              "duplicate key \"store\" in the request body");
    t_refused("{\"model\":\"a\",\"previous_response_id\":\"r1\",\"previous_response_id\":\"r2\"}",
              "duplicate key \"previous_response_id\"");
    /* the key written with an escape is the same key */
    t_refused("{\"model\":\"a\",\"inp\\u0075t\":\"x\",\"input\":\"y\"}", "duplicate key \"input\"");
    /* a body that is not JSON is refused as such, whatever it repeats */
    t_refused("{\"model\":\"a\",\"model\":\"b\",}", "body: not valid JSON");
}

static void
test_responses_request_duplicate_unknown_field_last_counts(void **state)
{
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a,
            "{\"model\":\"m\",\"truncation\":\"auto\",\"truncation\":\"disabled\","
            "\"background\":null}",
            &r);
    assert_int_equal(r.n_extras, 1); /* a null asks for nothing */
    T_STR_EQ(r.extras[0].name, "truncation");
    T_STR_EQ(r.extras[0].raw, "\"disabled\"");
    gw_arena_fini(&a);
}

/* ---- parse: input ---- */

static void
test_responses_request_string_input_and_defaults(void **state)
{
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, "{\"model\":\"m\",\"input\":\"Tell me a \\\"joke\\\"\"}", &r);
    assert_int_equal(r.n_messages, 1);
    assert_int_equal(r.messages[0].role, DL_ROLE_USER);
    assert_int_equal(r.messages[0].parts[0].kind, DL_PART_TEXT);
    T_STR_EQ(r.messages[0].parts[0].text, "Tell me a \"joke\"");
    assert_int_equal(r.store, -1);
    assert_int_equal(r.parallel_tool_calls, -1);
    assert_false(r.stream);
    assert_int_equal(r.n_system, 0);
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[{\"type\":\"message\",\"role\":\"user\","
                "\"content\":[{\"type\":\"input_text\",\"text\":\"Tell me a \\\"joke\\\"\"}]}]}",
                "");
    /* no input at all (a continuation may carry nothing new) */
    t_parse(&a, "{\"model\":\"m\",\"input\":null,\"previous_response_id\":\"resp_1\"}", &r);
    assert_int_equal(r.n_messages, 0);
    T_STR_EQ(r.previous_response_id, "resp_1");
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[],\"previous_response_id\":\"resp_1\"}", "");
    gw_arena_fini(&a);
}

static void
test_responses_request_items_the_hub_does_not_model_are_kept_whole(void **state)
{
    static const char body[] =
        "{\"model\":\"m\",\"input\":["
        "{\"type\":\"item_reference\",\"id\":\"msg_1\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"a\"},{\"type\":"
        "\"input_image\",\"file_id\":\"file-1\"}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"input_file\",\"file_id\":\"file-2\"}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\",\"input_audio\":{}}]},"
        "{\"role\":\"developer\",\"content\":[{\"type\":\"input_image\",\"image_url\":\"https://"
        "x/i.png\"}]},"
        "{\"type\":\"web_search_call\",\"id\":\"ws_1\",\"status\":\"completed\"},"
        "{\"role\":\"assistant\",\"content\":\"found it\"},"
        "{\"type\":\"local_shell_call_output\",\"call_id\":\"c1\",\"output\":\"ok\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":[{\"type\":"
        "\"input_audio\"}]},"
        "{\"type\":\"mcp_approval_response\",\"approval_request_id\":\"a\",\"approve\":true}"
        "]}";
    static const struct {
        enum dl_role role;
        const char *name;
    } want[] = {
        {DL_ROLE_USER, "item_reference"},
        {DL_ROLE_USER, "input_image"},
        {DL_ROLE_USER, "input_file"},
        {DL_ROLE_USER, "input_audio"},
        {DL_ROLE_USER, "input_image"},
        {DL_ROLE_ASSISTANT, "web_search_call"},
        {DL_ROLE_TOOL, "local_shell_call_output"},
        {DL_ROLE_TOOL, "input_audio"},
        {DL_ROLE_TOOL, "mcp_approval_response"},
    };
    struct gw_buf out = {0}, why = {0};
    struct gw_arena a;
    struct dl_request r;
    size_t i;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, body, &r);
    assert_int_equal(r.n_messages, 9);
    for (i = 0; i < 9; i++) {
        const struct dl_part *p = &r.messages[i].parts[0];

        assert_int_equal(r.messages[i].role, want[i].role);
        assert_int_equal(p->kind, DL_PART_OTHER);
        T_STR_EQ(p->name, want[i].name);
        assert_int_equal(p->data.ptr[0], '{');
    }
    /* the search call and the assistant's text are one assistant message */
    assert_int_equal(r.messages[5].n_parts, 2);
    T_STR_EQ(r.messages[5].parts[1].text, "found it");
    /* the developer message's image: kept with its item, not in the system */
    assert_int_equal(r.n_system, 0);
    /* a Responses upstream gets every item back as it was written, in place */
    assert_int_equal(dl_responses_shape.request_render(&r, T_UPSTREAM, 0, NULL, &out, &why), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"model\":\"up-model\",\"input\":["
              "{\"type\":\"item_reference\",\"id\":\"msg_1\"},"
              "{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"a\"},{\"type\":"
              "\"input_image\",\"file_id\":\"file-1\"}]},"
              "{\"role\":\"user\",\"content\":[{\"type\":\"input_file\",\"file_id\":\"file-2\"}]},"
              "{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\",\"input_audio\":{}}]},"
              "{\"role\":\"developer\",\"content\":[{\"type\":\"input_image\",\"image_url\":"
              "\"https://x/i.png\"}]},"
              "{\"type\":\"web_search_call\",\"id\":\"ws_1\",\"status\":\"completed\"},"
              "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":"
              "\"output_text\",\"text\":\"found it\",\"annotations\":[]}]},"
              "{\"type\":\"local_shell_call_output\",\"call_id\":\"c1\",\"output\":\"ok\"},"
              "{\"type\":\"function_call_output\",\"call_id\":\"c2\",\"output\":[{\"type\":"
              "\"input_audio\"}]},"
              "{\"type\":\"mcp_approval_response\",\"approval_request_id\":\"a\",\"approve\":"
              "true}]}");
    /* every other shape refuses them by name */
    t_render_refused(&r, DL_SHAPE_CHAT, "\"item_reference\" part cannot be converted");
    t_render_refused(&r, DL_SHAPE_MESSAGES, "item_reference parts cannot be sent");
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

static void
test_responses_request_assistant_items_join_one_message(void **state)
{
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a,
            "{\"model\":\"m\",\"input\":["
            "{\"role\":\"system\",\"content\":\"first\"},"
            "{\"role\":\"user\",\"content\":\"q\"},"
            "{\"type\":\"reasoning\",\"summary\":[],\"content\":[{\"type\":\"reasoning_text\","
            "\"text\":\"raw one\"},{\"type\":\"reasoning_text\",\"text\":\"raw two\"}]},"
            "{\"role\":\"developer\",\"content\":[{\"type\":\"input_text\",\"text\":\"second\"}]},"
            "{\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"a\"},"
            "{\"type\":\"refusal\",\"refusal\":\"no\"}]},"
            "{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"\"},"
            "{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":\"r\"},"
            "{\"type\":\"function_call\",\"call_id\":\"d\",\"name\":\"f\",\"arguments\":\"{}\"}"
            "],\"instructions\":\"sys\"}",
            &r);
    /* instructions first wherever they stand; system and developer messages in order */
    assert_int_equal(r.n_system, 3);
    T_STR_EQ(r.system[0].text, "sys");
    T_STR_EQ(r.system[1].text, "first");
    T_STR_EQ(r.system[2].text, "second");
    assert_int_equal(r.n_messages, 4);
    assert_int_equal(r.messages[1].role, DL_ROLE_ASSISTANT);
    assert_int_equal(r.messages[1].n_parts, 4);
    /* the reasoning text when there is no summary */
    T_STR_EQ(r.messages[1].parts[0].text, "raw one\n\nraw two");
    assert_int_equal(r.messages[1].parts[0].signature.len, 0);
    T_STR_EQ(r.messages[1].parts[2].text, "no");
    assert_int_equal(r.messages[1].parts[3].kind, DL_PART_TOOL_CALL);
    assert_int_equal(r.messages[2].role, DL_ROLE_TOOL);
    assert_int_equal(r.messages[3].role, DL_ROLE_ASSISTANT);
    T_STR_EQ(r.messages[3].parts[0].id, "d");
    gw_arena_fini(&a);
}

static void
test_responses_request_media_parts(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    const struct dl_part *p;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a,
            "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":["
            "{\"type\":\"input_image\",\"image_url\":\"data:image/jpeg;base64,/9j/4A==\"},"
            "{\"type\":\"input_image\",\"image_url\":\"https://x/a.png\",\"detail\":\"high\"},"
            "{\"type\":\"input_file\",\"file_data\":\"JVBERi0=\"},"
            "{\"type\":\"input_file\",\"file_url\":\"https://x/b.pdf\",\"filename\":\"b.pdf\"}"
            "]}]}",
            &r);
    p = r.messages[0].parts;
    assert_int_equal(r.messages[0].n_parts, 4);
    assert_int_equal(p[0].kind, DL_PART_IMAGE);
    T_STR_EQ(p[0].media_type, "image/jpeg");
    T_STR_EQ(p[0].data, "/9j/4A==");
    T_STR_EQ(p[1].url, "https://x/a.png");
    T_STR_EQ(p[1].detail, "high");
    assert_int_equal(p[2].kind, DL_PART_DOCUMENT);
    T_STR_EQ(p[2].media_type, "application/pdf"); /* raw base64: a PDF */
    T_STR_EQ(p[2].data, "JVBERi0=");
    T_STR_EQ(p[3].url, "https://x/b.pdf");
    T_STR_EQ(p[3].text, "b.pdf");
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[{\"type\":\"message\",\"role\":\"user\","
                "\"content\":[{\"type\":\"input_image\",\"image_url\":\"data:image/jpeg;base64,"
                "/9j/4A==\"},{\"type\":\"input_image\",\"image_url\":\"https://x/a.png\","
                "\"detail\":\"high\"},{\"type\":\"input_file\",\"filename\":\"document.pdf\","
                "\"file_data\":\"data:application/pdf;base64,JVBERi0=\"},{\"type\":"
                "\"input_file\",\"file_url\":\"https://x/b.pdf\",\"filename\":\"b.pdf\"}]}]}",
                "");
    gw_arena_fini(&a);
}

/* ---- parse: settings ---- */

static void
test_responses_request_tool_choice_kinds(void **state)
{
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, "{\"model\":\"m\",\"tool_choice\":\"required\"}", &r);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_REQUIRED);
    t_parse(&a, "{\"model\":\"m\",\"tool_choice\":\"none\"}", &r);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_NONE);
    t_parse(&a, "{\"model\":\"m\",\"tool_choice\":{\"type\":\"function\",\"name\":\"f\"}}", &r);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_NAMED);
    T_STR_EQ(r.tool_choice_name, "f");
    /* allowed_tools: its mode, and only the tools it allows */
    t_parse(&a,
            "{\"model\":\"m\",\"tool_choice\":{\"type\":\"allowed_tools\",\"mode\":\"required\","
            "\"tools\":[{\"type\":\"function\",\"name\":\"b\"},{\"type\":\"web_search\"}]},"
            "\"tools\":[{\"type\":\"function\",\"name\":\"a\"},{\"type\":\"function\","
            "\"name\":\"b\"},{\"type\":\"web_search\"},{\"type\":\"file_search\","
            "\"vector_store_ids\":[]}]}",
            &r);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_REQUIRED);
    assert_int_equal(r.n_tools, 2);
    T_STR_EQ(r.tools[0].name, "b");
    T_STR_EQ(r.tools[1].name, "web_search");
    assert_int_equal(r.n_extras, 0);
    /* a hosted tool forced: an extra, sent as written to a Responses upstream only */
    t_parse(&a,
            "{\"model\":\"m\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],"
            "\"tool_choice\":{\"type\":\"web_search_preview\"}}",
            &r);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_UNSET);
    T_STR_EQ(r.extras[0].name, "tool_choice");
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[],\"tools\":[{\"type\":\"function\",\"name\":"
                "\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{}},\"strict\":false}],"
                "\"tool_choice\":{\"type\":\"web_search_preview\"}}",
                "");
    gw_arena_fini(&a);
}

static void
test_responses_request_text_format_reasoning_and_logprobs(void **state)
{
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a,
            "{\"model\":\"m\",\"text\":{\"format\":{\"type\":\"json_schema\",\"name\":\"pet\","
            "\"description\":\"A pet\",\"schema\":{\"type\":\"object\"},\"strict\":true},"
            "\"verbosity\":\"low\"},\"reasoning\":{\"effort\":\"high\",\"summary\":"
            "\"detailed\",\"generate_summary\":null}}",
            &r);
    assert_int_equal(r.format, DL_FORMAT_JSON_SCHEMA);
    T_STR_EQ(r.format_name, "pet");
    T_STR_EQ(r.format_schema, "{\"type\":\"object\"}");
    assert_true(r.format_strict);
    T_STR_EQ(r.reasoning_effort, "high");
    assert_true(r.thinking);
    assert_int_equal(r.n_extras, 3);
    T_STR_EQ(r.extras[0].name, "text.format.description");
    T_STR_EQ(r.extras[1].name, "text.verbosity");
    T_STR_EQ(r.extras[2].name, "reasoning.summary");
    /* back in their objects for a Responses upstream */
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[],\"text\":{\"format\":{\"type\":"
                "\"json_schema\",\"name\":\"pet\",\"schema\":{\"type\":\"object\"},"
                "\"description\":\"A pet\",\"strict\":true},\"verbosity\":\"low\"},"
                "\"reasoning\":{\"effort\":\"high\",\"summary\":\"detailed\"}}",
                "");
    /* Chat enforces the schema; the rest is dropped by name */
    t_render_is(&r, DL_SHAPE_CHAT, 0,
                "{\"model\":\"up-model\",\"messages\":[],\"response_format\":{\"type\":"
                "\"json_schema\",\"json_schema\":{\"name\":\"pet\",\"schema\":{\"type\":"
                "\"object\"},\"strict\":true}},\"reasoning_effort\":\"high\"}",
                "text.format.description text.verbosity reasoning.summary");
    t_parse(&a,
            "{\"model\":\"m\",\"text\":{\"format\":{\"type\":\"json_object\"}},\"reasoning\":"
            "{\"effort\":\"none\"}}",
            &r);
    assert_int_equal(r.format, DL_FORMAT_JSON_OBJECT);
    assert_false(r.thinking); /* effort none: no reasoning */
    /* a format type newer than this file: kept as written */
    t_parse(&a,
            "{\"model\":\"m\",\"text\":{\"format\":{\"type\":\"grammar\",\"x\":1},"
            "\"verbosity\":\"high\",\"a.b\":2}}",
            &r);
    assert_int_equal(r.format, DL_FORMAT_TEXT);
    T_STR_EQ(r.extras[0].name, "text.format");
    T_STR_EQ(r.extras[2].name, "text.a.b");
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[],\"text\":{\"format\":{\"type\":\"grammar\","
                "\"x\":1},\"verbosity\":\"high\",\"a.b\":2}}",
                "");
    t_render_is(&r, DL_SHAPE_CHAT, 0, "{\"model\":\"up-model\",\"messages\":[]}",
                "text.format text.verbosity text.a.b");
    /* log probabilities asked for two ways */
    t_parse(&a, "{\"model\":\"m\",\"top_logprobs\":3}", &r);
    assert_int_equal(r.needs, DL_NEED_F_LOGPROBS);
    t_render_refused(&r, DL_SHAPE_MESSAGES, "logprobs");
    t_parse(&a, "{\"model\":\"m\",\"top_logprobs\":0,\"include\":[]}", &r);
    assert_int_equal(r.needs, 0);
    assert_int_equal(r.n_extras, 1); /* an empty include asks nothing */
    t_parse(&a, "{\"model\":\"m\",\"include\":[\"message.output_text.logprobs\"]}", &r);
    assert_int_equal(r.needs, DL_NEED_F_LOGPROBS);
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[],\"include\":[\"message.output_text."
                "logprobs\"]}",
                "");
    gw_arena_fini(&a);
}

static void
test_responses_request_signature_origins(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    const struct dl_part *p;

    (void)state;
    gw_arena_init(&a);
    /* a Messages thinking signature a Responses client got through the gateway */
    t_parse(&a,
            "{\"model\":\"m\",\"input\":[{\"role\":\"user\",\"content\":\"q\"},{\"type\":"
            "\"reasoning\",\"id\":\"rs_gw_1\",\"summary\":"
            "[{\"type\":\"summary_text\",\"text\":\"t\"}],\"encrypted_content\":"
            "\"gw1.messages.EqQBsig\"},{\"role\":\"assistant\",\"content\":\"a\"},"
            "{\"role\":\"user\",\"content\":\"b\"}]}",
            &r);
    p = &r.messages[1].parts[0];
    assert_int_equal(p->sig_shape, DL_SHAPE_MESSAGES);
    T_STR_EQ(p->signature, "EqQBsig");
    /* not this shape's: dropped here, sent to the shape that made it */
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[{\"type\":\"message\",\"role\":\"user\","
                "\"content\":[{\"type\":\"input_text\",\"text\":\"q\"}]},{\"type\":\"message\","
                "\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"a\","
                "\"annotations\":[]}]},"
                "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                "\"text\":\"b\"}]}]}",
                "reasoning");
    t_render_is(&r, DL_SHAPE_MESSAGES, 0,
                "{\"model\":\"up-model\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
                "\"content\":\"q\"},{\"role\":\"assistant\",\"content\":[{\"type\":"
                "\"thinking\",\"thinking\":\"t\",\"signature\":\"EqQBsig\"},{\"type\":\"text\","
                "\"text\":\"a\"}]},{\"role\":\"user\",\"content\":\"b\"}]}",
                "");
    gw_arena_fini(&a);
}

/* ---- render: requests of other shapes for a Responses upstream ---- */

static void
test_responses_render_chat_client_request(void **state)
{
    static const char chat[] =
        "{\"model\":\"gpt\",\"messages\":["
        "{\"role\":\"system\",\"content\":\"Be exact.\"},"
        "{\"role\":\"user\",\"name\":\"ann\",\"content\":[{\"type\":\"text\",\"text\":\"Look\"},"
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://x/p.png\",\"detail\":\"low\"}}"
        "]},"
        "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":"
        "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"42\"},"
        "{\"role\":\"user\",\"content\":\"thanks\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"
        "{\"type\":\"object\"}}}],\"tool_choice\":\"required\",\"parallel_tool_calls\":false,"
        "\"temperature\":0.2,\"seed\":7,\"stop\":[\"END\"],\"presence_penalty\":0.5,"
        "\"frequency_penalty\":0.1,\"max_completion_tokens\":300,\"reasoning_effort\":\"low\","
        "\"response_format\":{\"type\":\"json_object\"},\"stream\":true,\"stream_options\":"
        "{\"include_usage\":true},\"user\":\"u1\",\"prompt_cache_key\":\"k\","
        "\"logit_bias\":{\"1\":1}}";
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse_as(DL_SHAPE_CHAT, &a, chat, strlen(chat), &r);
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"instructions\":\"Be exact.\",\"input\":["
                "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                "\"text\":\"Look\"},{\"type\":\"input_image\",\"image_url\":\"https://x/p.png\","
                "\"detail\":\"low\"}]},"
                "{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"f\",\"arguments\":"
                "\"{\\\"a\\\":1}\"},"
                "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"42\"},"
                "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                "\"text\":\"thanks\"}]}],"
                "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":"
                "\"object\"},\"strict\":false}],\"tool_choice\":\"required\","
                "\"parallel_tool_calls\":false,\"temperature\":0.2,\"max_output_tokens\":300,"
                "\"text\":{\"format\":{\"type\":\"json_object\"}},\"reasoning\":{\"effort\":"
                "\"low\"},\"include\":[\"reasoning.encrypted_content\"],\"stream\":true,"
                "\"store\":false,\"prompt_cache_key\":\"k\",\"user\":\"u1\"}",
                "name seed presence_penalty frequency_penalty stop logit_bias");
    gw_arena_fini(&a);
}

static void
test_responses_render_messages_client_request(void **state)
{
    static const char msg[] =
        "{\"model\":\"claude\",\"max_tokens\":8,\"system\":[{\"type\":\"text\",\"text\":\"S\","
        "\"cache_control\":{\"type\":\"ephemeral\"}}],\"thinking\":{\"type\":\"enabled\","
        "\"budget_tokens\":4000},\"messages\":["
        "{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"title\":\"notes\",\"source\":"
        "{\"type\":\"text\",\"media_type\":\"text/plain\",\"data\":\"line one\"}}]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"hmm\","
        "\"signature\":\"anthropic-sig\"},{\"type\":\"thinking\",\"thinking\":\"via gw\","
        "\"signature\":\"gw1.responses.gAAAAenc\"},{\"type\":\"redacted_thinking\",\"data\":"
        "\"r\"},{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"f\",\"input\":{}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\","
        "\"is_error\":true,\"content\":[{\"type\":\"text\",\"text\":\"bad\"},{\"type\":\"image\","
        "\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"iVBO\"}}]},"
        "{\"type\":\"text\",\"text\":\"go on\"}]}],"
        "\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\"},\"cache_control\":"
        "{\"type\":\"ephemeral\"}}],\"top_k\":5,\"stop_sequences\":[\"X\"],\"metadata\":"
        "{\"user_id\":\"u-9\"},\"stream\":true}";
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse_as(DL_SHAPE_MESSAGES, &a, msg, strlen(msg), &r);
    /* max_tokens 8 raised to the API's minimum; the budget's effort; the Responses-made
     * reasoning (tagged) goes back, without an id (the client had none), the others are
     * dropped */
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"instructions\":\"S\",\"input\":["
                "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                "\"text\":\"notes\\n\\nline one\"}]},"
                "{\"type\":\"reasoning\",\"summary\":[{\"type\":"
                "\"summary_text\",\"text\":\"via gw\"}],\"encrypted_content\":\"gAAAAenc\"},"
                "{\"type\":\"function_call\",\"call_id\":\"toolu_1\",\"name\":\"f\",\"arguments\":"
                "\"{}\"},"
                "{\"type\":\"function_call_output\",\"call_id\":\"toolu_1\",\"output\":[{\"type\":"
                "\"input_text\",\"text\":\"bad\"},{\"type\":\"input_image\",\"image_url\":"
                "\"data:image/png;base64,iVBO\"}]},"
                "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\","
                "\"text\":\"go on\"}]}],"
                "\"tools\":[{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":"
                "\"object\"},\"strict\":false}],\"max_output_tokens\":16,\"reasoning\":{\"effort\":"
                "\"medium\"},\"include\":[\"reasoning.encrypted_content\"],\"stream\":true,"
                "\"store\":false,\"user\":\"u-9\"}",
                "cache_control reasoning is_error top_k stop metadata");
    gw_arena_fini(&a);
}

static void
test_responses_render_max_output_tokens_and_tools_alone(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    static const char chat[] = "{\"model\":\"gpt\",\"messages\":[{\"role\":\"user\",\"content\":"
                               "\"hi\"}],\"tool_choice\":\"none\",\"parallel_tool_calls\":true}";

    (void)state;
    gw_arena_init(&a);
    t_parse_as(DL_SHAPE_CHAT, &a, chat, strlen(chat), &r);
    /* the model's default when the request has none; tool settings without tools dropped */
    t_render_is(&r, DL_SHAPE_RESPONSES, 32000,
                "{\"model\":\"up-model\",\"input\":[{\"type\":\"message\",\"role\":\"user\","
                "\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}],"
                "\"max_output_tokens\":32000,\"store\":false}",
                "tool_choice parallel_tool_calls");
    /* thinking budgets to efforts */
    r.thinking = true;
    r.thinking_budget = 1024;
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[{\"type\":\"message\",\"role\":\"user\","
                "\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}],\"reasoning\":"
                "{\"effort\":\"low\"},\"include\":[\"reasoning.encrypted_content\"],"
                "\"store\":false}",
                "tool_choice parallel_tool_calls");
    r.thinking_budget = 20000;
    r.parallel_tool_calls = -1;
    r.tool_choice = DL_TOOL_CHOICE_UNSET;
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[{\"type\":\"message\",\"role\":\"user\","
                "\"content\":[{\"type\":\"input_text\",\"text\":\"hi\"}]}],\"reasoning\":"
                "{\"effort\":\"high\"},\"include\":[\"reasoning.encrypted_content\"],"
                "\"store\":false}",
                "");
    gw_arena_fini(&a);
}

static void
test_responses_render_refuses_what_responses_cannot_take(void **state)
{
    static const char *const chat[][2] = {
        {"{\"model\":\"g\",\"n\":2,\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", "n:"},
        {"{\"model\":\"g\",\"logprobs\":true,\"messages\":[{\"role\":\"user\",\"content\":"
         "\"x\"}]}",
         "logprobs"},
        {"{\"model\":\"g\",\"modalities\":[\"text\",\"audio\"],\"audio\":{\"voice\":\"a\"},"
         "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
         "audio"},
        {"{\"model\":\"g\",\"web_search_options\":{},\"messages\":[{\"role\":\"user\","
         "\"content\":\"x\"}]}",
         "hosted tools"},
        {"{\"model\":\"g\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"input_audio\",\"input_audio\":{\"data\":\"x\",\"format\":\"wav\"}}]}]}",
         "input_audio parts cannot be sent to a Responses model"},
    };
    struct dl_part parts[2] = {{.kind = DL_PART_TOOL_CALL, .name = GW_STR_LIT("f")},
                               {.kind = DL_PART_IMAGE, .url = GW_STR_LIT("https://x")}};
    struct dl_part result = {.kind = DL_PART_TOOL_RESULT};
    struct dl_message m = {.role = DL_ROLE_ASSISTANT, .parts = parts, .n_parts = 1};
    struct dl_request r = {.source = DL_SHAPE_CHAT, .messages = &m, .n_messages = 1};
    struct gw_arena a;
    size_t i;

    (void)state;
    gw_arena_init(&a);
    for (i = 0; i < sizeof(chat) / sizeof(chat[0]); i++) {
        struct dl_request c;

        t_parse_as(DL_SHAPE_CHAT, &a, chat[i][0], strlen(chat[i][0]), &c);
        t_render_refused(&c, DL_SHAPE_RESPONSES, chat[i][1]);
    }
    t_render_refused(&r, DL_SHAPE_RESPONSES, "a tool call without an id");
    m.parts = &parts[1];
    t_render_refused(&r, DL_SHAPE_RESPONSES, "an assistant message cannot hold an image");
    m.role = DL_ROLE_USER;
    m.parts = parts;
    parts[0].id = GW_STR_LIT("c");
    t_render_refused(&r, DL_SHAPE_RESPONSES, "a tool call outside an assistant message");
    m.parts = &result;
    t_render_refused(&r, DL_SHAPE_RESPONSES, "a tool result without the id of its call");
    parts[1].url = (struct gw_str){"", 0};
    m.parts = &parts[1];
    t_render_refused(&r, DL_SHAPE_RESPONSES, "an image with neither a URL nor data");
    gw_arena_fini(&a);
}

static void
test_responses_render_own_request_keeps_what_the_client_wrote(void **state)
{
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    /* a Responses client's text file and small limit go as written (the API judges them);
     * from another shape they are converted */
    t_parse(&a,
            "{\"model\":\"m\",\"max_output_tokens\":5,\"input\":[{\"role\":\"user\","
            "\"content\":[{\"type\":\"input_file\",\"filename\":\"a.txt\",\"file_data\":"
            "\"data:text/plain;base64,aGk=\"}]}]}",
            &r);
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[{\"type\":\"message\",\"role\":\"user\","
                "\"content\":[{\"type\":\"input_file\",\"filename\":\"a.txt\",\"file_data\":"
                "\"data:text/plain;base64,aGk=\"}]}],\"max_output_tokens\":5}",
                "");
    r.source = DL_SHAPE_MESSAGES;
    t_render_is(&r, DL_SHAPE_RESPONSES, 0,
                "{\"model\":\"up-model\",\"input\":[{\"type\":\"message\",\"role\":\"user\","
                "\"content\":[{\"type\":\"input_text\",\"text\":\"a.txt\\n\\nhi\"}]}],"
                "\"max_output_tokens\":16,\"store\":false}",
                "");
    gw_arena_fini(&a);
}

static void
test_responses_render_appends_to_out(void **state)
{
    struct gw_buf out = {0};
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, "{\"model\":\"m\",\"input\":\"x\"}", &r);
    assert_int_equal(gw_buf_append_cstr(&out, "before:"), GW_OK);
    assert_int_equal(dl_responses_shape.request_render(&r, T_UPSTREAM, 0, NULL, &out, NULL), GW_OK);
    assert_int_equal(strncmp(out.data, "before:{\"model\":\"up-model\"", 26), 0);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

/* ---- out of memory ---- */

static void
t_oom(const char *name, enum dl_shape to)
{
    size_t len;
    char *body = t_fixture(name, &len);
    unsigned long k;
    bool ok_seen = false;

    for (k = 1; k < 600 && !ok_seen; k++) {
        struct gw_buf out = {0}, why = {0};
        struct dl_request r;
        struct gw_arena a;
        enum gw_code rc;

        gw_arena_init(&a);
        gw_alloc_fail_at(k);
        rc = dl_responses_shape.request_parse(&a, body, len, &r, &why);
        if (rc == GW_OK)
            rc = t_ops(to)->request_render(&r, T_UPSTREAM, 0, NULL, &out, &why);
        gw_alloc_fail_at(0);
        assert_true(rc == GW_OK || rc == GW_E_NOMEM);
        if (rc == GW_OK)
            ok_seen = true; /* the Nth allocation came after the last one */
        else
            assert_int_equal(out.len, 0);
        gw_buf_fini(&out);
        gw_buf_fini(&why);
        gw_arena_fini(&a);
    }
    assert_true(ok_seen);
    free(body);
}

static void
test_responses_request_out_of_memory_is_clean(void **state)
{
    (void)state;
    t_oom("request_codex.in.json", DL_SHAPE_RESPONSES);
    t_oom("request_plain.in.json", DL_SHAPE_RESPONSES);
    t_oom("request_plain.in.json", DL_SHAPE_CHAT);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_responses_request_parse_codex_fields),
        cmocka_unit_test(test_responses_request_round_trip_codex),
        cmocka_unit_test(test_responses_request_round_trip_plain),
        cmocka_unit_test(test_responses_request_codex_hosted_tool_refused_custom_tool_converted),
        cmocka_unit_test(test_responses_request_plain_to_chat),
        cmocka_unit_test(test_responses_request_plain_to_messages),
        cmocka_unit_test(test_responses_request_refuses_what_is_not_a_responses_request),
        cmocka_unit_test(test_responses_request_refusal_never_quotes_the_body),
        cmocka_unit_test(test_responses_request_refuses_a_read_field_given_twice),
        cmocka_unit_test(test_responses_request_duplicate_unknown_field_last_counts),
        cmocka_unit_test(test_responses_request_string_input_and_defaults),
        cmocka_unit_test(test_responses_request_items_the_hub_does_not_model_are_kept_whole),
        cmocka_unit_test(test_responses_request_assistant_items_join_one_message),
        cmocka_unit_test(test_responses_request_media_parts),
        cmocka_unit_test(test_responses_request_tool_choice_kinds),
        cmocka_unit_test(test_responses_request_text_format_reasoning_and_logprobs),
        cmocka_unit_test(test_responses_request_signature_origins),
        cmocka_unit_test(test_responses_render_chat_client_request),
        cmocka_unit_test(test_responses_render_messages_client_request),
        cmocka_unit_test(test_responses_render_max_output_tokens_and_tools_alone),
        cmocka_unit_test(test_responses_render_refuses_what_responses_cannot_take),
        cmocka_unit_test(test_responses_render_own_request_keeps_what_the_client_wrote),
        cmocka_unit_test(test_responses_render_appends_to_out),
        cmocka_unit_test(test_responses_request_out_of_memory_is_clean),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
