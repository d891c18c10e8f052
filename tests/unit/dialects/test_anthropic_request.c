/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_anthropic_request.c - the Messages request
 * (dialects/anthropic_request.c): parse of recorded requests (a Claude Code one; one
 * with images, documents, tool results and hosted tools) into the canonical fields;
 * parse -> render round trips against golden bodies; every refusal and duplicate
 * field; render of canonical requests such as a Chat client's (merges, images, tools,
 * sampling, max_tokens) with the fields it drops named and the ones it refuses; a Chat
 * client's request through the hub (the Chat shape's parse, then this render: what the
 * old pairwise converter did); out of memory at every allocation.
 * See: dialects/anthropic_request.c, tests/fixtures/messages/
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

#define T_UPSTREAM GW_STR_LIT("claude-upstream")

/* ---- helpers ---- */

static void
t_str_is(struct gw_str s, const char *want)
{
    if (!gw_str_eq(s, gw_str_c(want))) {
        print_error("got \"%.*s\", want \"%s\"\n", (int)s.len, s.ptr ? s.ptr : "", want);
        fail();
    }
}

/* True when <s> is a slice of the bytes <body>/<len> (no copy was made). */
static bool
t_in(struct gw_str s, const char *body, size_t len)
{
    return s.ptr >= body && s.ptr + s.len <= body + len;
}

/* Parses <body> expecting GW_OK. */
static void
t_parse(struct gw_arena *a, const char *body, size_t len, struct dl_request *r)
{
    struct gw_buf why = {0};
    enum gw_code rc = dl_anthropic_shape.request_parse(a, body, len, r, &why);

    if (rc != GW_OK) {
        print_error("refused (%d): %.*s\n", rc, (int)why.len, why.data ? why.data : "");
        fail();
    }
    assert_int_equal(why.len, 0);
    gw_buf_fini(&why);
}

/* Parses <body> expecting GW_E_BAD_REQUEST with a reason holding <what>. */
static void
t_parse_refused(const char *body, const char *what)
{
    struct gw_arena a;
    struct dl_request r;
    struct gw_buf why = {0};
    enum gw_code rc;

    gw_arena_init(&a);
    rc = dl_anthropic_shape.request_parse(&a, body, strlen(body), &r, &why);
    if (rc != GW_E_BAD_REQUEST || !why.data || !strstr(why.data, what)) {
        print_error("body %s: rc %d, why \"%s\" (want \"%s\")\n", body, rc,
                    why.data ? why.data : "", what);
        fail();
    }
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

static bool
t_dropped_has(const struct dl_dropped *d, const char *name)
{
    size_t i;

    for (i = 0; i < d->n; i++)
        if (gw_str_eq(d->name[i], gw_str_c(name)))
            return true;
    return false;
}

/* Renders <r> expecting GW_OK and the JSON <want>. */
static void
t_render(const struct dl_request *r, uint64_t spec, struct dl_dropped *d, const char *want)
{
    struct gw_buf out = {0}, why = {0};
    enum gw_code rc = dl_anthropic_shape.request_render(r, T_UPSTREAM, spec, d, &out, &why);

    if (rc != GW_OK) {
        print_error("refused (%d): %.*s\n", rc, (int)why.len, why.data ? why.data : "");
        fail();
    }
    t_json_eq(out.data, out.len, want);
    gw_buf_fini(&out);
    gw_buf_fini(&why);
}

/* Renders <r> expecting GW_E_UNCONVERTIBLE naming <what>, <out> and the dropped list
 * left as they were. */
static void
t_render_refused(const struct dl_request *r, const char *what)
{
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};

    dl_dropped_add(&d, GW_STR_LIT("before"));
    assert_int_equal(gw_buf_append_cstr(&out, "keep"), GW_OK);
    assert_int_equal(dl_anthropic_shape.request_render(r, T_UPSTREAM, 0, &d, &out, &why),
                     GW_E_UNCONVERTIBLE);
    if (!why.data || !strstr(why.data, what)) {
        print_error("why \"%s\" does not name \"%s\"\n", why.data ? why.data : "", what);
        fail();
    }
    assert_string_equal(out.data, "keep");
    assert_int_equal(d.n, 1);
    gw_buf_fini(&out);
    gw_buf_fini(&why);
}

/* ---- parse: recorded requests ---- */

static void
test_messages_request_parse_claude_code_fields(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    size_t len;
    char *body = t_fixture("request_claude_code.in.json", &len);
    const struct dl_message *m;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, body, len, &r);
    assert_int_equal(r.source, DL_SHAPE_MESSAGES);
    t_str_is(r.model, "claude-sonnet-4-5-20250929");
    assert_true(t_in(r.model, body, len)); /* no escape: a slice of the body */
    assert_true(r.stream);
    assert_int_equal(r.max_output_tokens, 32000);
    assert_true(r.thinking);
    assert_int_equal(r.thinking_budget, 31999);
    t_str_is(r.user, "user_2f8a0c_account_5d1e_session_9b7c3a1e-0f44-4b8e-9d2e-1c6f0a7b8e21");
    assert_true(r.metadata.len > 0 && r.metadata.ptr[0] == '{');
    assert_int_equal(r.needs, 0);
    /* system: two text blocks with cache hints, the second with a ttl */
    assert_int_equal(r.n_system, 2);
    t_str_is(r.system[0].text, "You are Claude Code, Anthropic's official CLI for Claude.");
    assert_true(r.system[0].cache);
    assert_int_equal(r.system[0].cache_ttl.len, 0);
    assert_true(r.system[1].cache);
    t_str_is(r.system[1].cache_ttl, "1h");
    assert_false(t_in(r.system[1].text, body, len)); /* held "\n" escapes: a copy */
    assert_non_null(strstr(r.system[1].text.ptr, "\n\nIMPORTANT"));
    /* messages: user text, assistant thinking + text + tool call, the tool result */
    assert_int_equal(r.n_messages, 3);
    m = &r.messages[0];
    assert_int_equal(m->role, DL_ROLE_USER);
    assert_int_equal(m->n_parts, 2);
    assert_false(m->parts[0].cache);
    assert_true(m->parts[1].cache);
    m = &r.messages[1];
    assert_int_equal(m->role, DL_ROLE_ASSISTANT);
    assert_int_equal(m->n_parts, 3);
    assert_int_equal(m->parts[0].kind, DL_PART_REASONING);
    assert_false(m->parts[0].redacted);
    t_str_is(m->parts[0].signature, "EqQBCkYIBxgCKkDsig==");
    assert_int_equal(m->parts[1].kind, DL_PART_TEXT);
    assert_int_equal(m->parts[2].kind, DL_PART_TOOL_CALL);
    t_str_is(m->parts[2].id, "toolu_01A09q90qw90lq917835lq9");
    t_str_is(m->parts[2].name, "Bash");
    t_json_eq(m->parts[2].arguments.ptr, m->parts[2].arguments.len,
              "{\"command\":\"ls -lS src/\",\"description\":\"List src/ by size\"}");
    assert_true(t_in(m->parts[2].arguments, body, len));
    m = &r.messages[2];
    assert_int_equal(m->role, DL_ROLE_TOOL);
    assert_int_equal(m->n_parts, 1);
    assert_int_equal(m->parts[0].kind, DL_PART_TOOL_RESULT);
    t_str_is(m->parts[0].call_id, "toolu_01A09q90qw90lq917835lq9");
    assert_false(m->parts[0].is_error);
    assert_true(m->parts[0].cache);
    assert_int_equal(m->parts[0].n_content, 1);
    assert_int_equal(m->parts[0].content[0].kind, DL_PART_TEXT);
    assert_non_null(strstr(m->parts[0].content[0].text.ptr, "9000 main.c"));
    /* tools: the schemas as raw JSON, cache hint on the second */
    assert_int_equal(r.n_tools, 2);
    t_str_is(r.tools[0].name, "Bash");
    assert_int_equal(r.tools[0].parameters.ptr[0], '{');
    assert_int_equal(r.tools[0].hosted.len, 0);
    assert_false(r.tools[0].cache);
    assert_true(r.tools[1].cache);
    /* what the hub does not model: extras, raw */
    assert_int_equal(r.n_extras, 2);
    t_str_is(r.extras[0].name, "context_management");
    t_json_eq(r.extras[0].raw.ptr, r.extras[0].raw.len,
              "{\"edits\":[{\"type\":\"clear_thinking_20251015\",\"keep\":\"all\"}]}");
    t_str_is(r.extras[1].name, "output_config");
    assert_int_equal(r.format, DL_FORMAT_TEXT); /* effort only, no format */
    assert_true(dl_request_input_estimate(&r) > 0);
    gw_arena_fini(&a);
    free(body);
}

static void
test_messages_request_parse_media_tools_fields(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    size_t len;
    char *body = t_fixture("request_media_tools.in.json", &len);
    const struct dl_part *p;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, body, len, &r);
    assert_int_equal(r.n_system, 1);
    t_str_is(r.system[0].text, "You describe pictures.\nBe \"brief\".");
    assert_false(r.stream);
    /* user turn: media parts in order, one OTHER block kept raw */
    assert_int_equal(r.n_messages, 5);
    assert_int_equal(r.messages[0].role, DL_ROLE_USER);
    assert_int_equal(r.messages[0].n_parts, 7);
    p = r.messages[0].parts;
    assert_int_equal(p[0].kind, DL_PART_IMAGE);
    t_str_is(p[0].media_type, "image/png");
    t_str_is(p[0].data, "iVBORw0KGgo=");
    assert_int_equal(p[1].kind, DL_PART_IMAGE);
    t_str_is(p[1].url, "https://example.test/cat.jpg");
    assert_true(p[1].cache);
    t_str_is(p[1].cache_ttl, "5m");
    assert_int_equal(p[2].kind, DL_PART_DOCUMENT);
    t_str_is(p[2].media_type, "application/pdf");
    t_str_is(p[2].text, "Spec");
    assert_int_equal(p[3].kind, DL_PART_DOCUMENT); /* a text source: its text in base64 */
    t_str_is(p[3].media_type, "text/plain");
    t_str_is(p[3].data, "Y2Fmw6kgbm90ZXMK");
    assert_int_equal(p[4].kind, DL_PART_DOCUMENT);
    t_str_is(p[4].url, "https://example.test/a.pdf");
    assert_int_equal(p[5].kind, DL_PART_OTHER);
    t_str_is(p[5].name, "search_result");
    assert_int_equal(p[5].data.ptr[0], '{');
    assert_int_equal(p[5].data.ptr[p[5].data.len - 1], '}');
    t_str_is(p[6].text, "What do these show? \xf0\x9f\x98\x80");
    /* assistant: redacted thinking (its data as the signature), two calls */
    assert_int_equal(r.messages[1].role, DL_ROLE_ASSISTANT);
    p = r.messages[1].parts;
    assert_int_equal(p[0].kind, DL_PART_REASONING);
    assert_true(p[0].redacted);
    t_str_is(p[0].signature, "EmwKAhgBEgy3va3pzix/LafPsn4a");
    t_str_is(p[2].arguments, "{}");
    /* the user turn with results: one tool message per result, then the user's text */
    assert_int_equal(r.messages[2].role, DL_ROLE_TOOL);
    p = r.messages[2].parts;
    t_str_is(p[0].call_id, "toolu_1");
    assert_int_equal(p[0].n_content, 2);
    assert_int_equal(p[0].content[0].kind, DL_PART_TEXT);
    assert_int_equal(p[0].content[1].kind, DL_PART_IMAGE);
    assert_int_equal(r.messages[3].role, DL_ROLE_TOOL);
    assert_true(r.messages[3].parts[0].is_error);
    t_str_is(r.messages[3].parts[0].content[0].text, "no network");
    assert_int_equal(r.messages[4].role, DL_ROLE_USER);
    t_str_is(r.messages[4].parts[0].text, "and now?");
    /* tools: a custom one is a function; a typed one is hosted, kept as written */
    assert_int_equal(r.n_tools, 3);
    assert_int_equal(r.tools[1].hosted.len, 0);
    t_str_is(r.tools[1].name, "web_search_helper");
    t_str_is(r.tools[2].name, "web_search");
    t_json_eq(r.tools[2].hosted.ptr, r.tools[2].hosted.len,
              "{\"type\":\"web_search_20250305\",\"name\":\"web_search\",\"max_uses\":3}");
    assert_true(r.needs & DL_NEED_F_HOSTED_TOOLS);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_REQUIRED);
    assert_int_equal(r.parallel_tool_calls, 0);
    assert_int_equal(r.n_stop, 2);
    t_str_is(r.stop[0], "\n\nHuman:");
    assert_true(r.has_temperature);
    assert_true(r.temperature > 0.69 && r.temperature < 0.71);
    assert_false(r.has_top_p);
    assert_true(r.has_top_k);
    assert_int_equal(r.top_k, 40);
    assert_int_equal(r.n_extras, 2);
    t_str_is(r.extras[0].name, "service_tier");
    t_str_is(r.extras[0].raw, "\"standard_only\"");
    t_str_is(r.extras[1].name, "inference_geo");
    gw_arena_fini(&a);
    free(body);
}

/* ---- parse -> render: a Messages request goes back as it came ---- */

static void
t_round_trip(const char *in, const char *out_name)
{
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};
    struct gw_arena a;
    struct dl_request r;
    size_t len, want_len;
    char *body = t_fixture(in, &len), *want = t_fixture(out_name, &want_len);

    gw_arena_init(&a);
    t_parse(&a, body, len, &r);
    assert_int_equal(dl_anthropic_shape.request_render(&r, T_UPSTREAM, 777, &d, &out, &why), GW_OK);
    t_json_is(out.data, out.len, want, want_len);
    assert_int_equal(d.n, 0); /* nothing dropped: the same shape takes everything */
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
    free(body);
    free(want);
}

static void
test_messages_request_round_trip_claude_code(void **state)
{
    (void)state;
    t_round_trip("request_claude_code.in.json", "request_claude_code.out.json");
}

/* A request of Claude Code 2.1 as it was recorded (texts shortened): a "system" role
 * message after the user's, adaptive thinking with a display, a deferred tool, per-turn
 * output_config. Back as Messages: the system message joins the system blocks, and what
 * the hub does not model (display, defer_loading, the message's output_config) is not
 * carried; same-shape requests are spliced, not rendered, so only this golden file says
 * so. */
static void
test_messages_request_round_trip_claude_code_2_1(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    size_t len;
    char *body = t_fixture("request_claude_code_2_1.in.json", &len);

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, body, len, &r);
    assert_int_equal(r.n_messages, 1);
    assert_int_equal(r.n_system, 4);
    assert_true(r.system[3].cache);
    assert_non_null(strstr(r.system[3].text.ptr, "# Environment"));
    assert_true(r.thinking);
    assert_int_equal(r.max_output_tokens, 128000);
    assert_int_equal(r.n_tools, 3);
    assert_int_equal(r.needs, 0);
    assert_int_equal(r.user.ptr[0], '{'); /* a JSON text in a string, kept as given */
    gw_arena_fini(&a);
    free(body);
    t_round_trip("request_claude_code_2_1.in.json", "request_claude_code_2_1.out.json");
}

static void
test_messages_request_round_trip_media_tools(void **state)
{
    (void)state;
    t_round_trip("request_media_tools.in.json", "request_media_tools.out.json");
}

/* ---- parse: refusals ---- */

static void
test_messages_request_refuses_what_is_not_a_messages_request(void **state)
{
    static const char *const cases[][2] = {
        {"", "body: empty"},
        {"[1]", "body: must be a JSON object"},
        {"{nope", "body: not valid JSON at line 1 column 2"},
        {"{\"model\":\"m\",\"messages\":[],\"max_tokens\":1e999}", "number out of range"},
        {"{\"messages\":[]}", "model: required string"},
        {"{\"model\":\"\",\"messages\":[]}", "model: required string"},
        {"{\"model\":\"m\"}", "messages: required array"},
        {"{\"model\":\"m\",\"messages\":{}}", "messages: required array"},
        {"{\"model\":\"m\",\"messages\":[1]}", "messages[0]: must be an object"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}",
         "messages[0].role: must be user or assistant"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":5}]}",
         "messages[0].content: required string or array"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"x\"}]}]}",
         "messages[0].content[0].type: required string"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[7]}]}",
         "messages[0].content[0]: must be an object"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\"}]}]}",
         "messages[0].content[0].text: required string"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\"}]}]}",
         "messages[0].content[0].source: required object"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image\","
         "\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\"}}]}]}",
         "messages[0].content[0].source.data: required string"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":"
         "\"tool_use\",\"id\":\"a\",\"name\":\"b\",\"input\":\"{}\"}]}]}",
         "messages[0].content[0].input: required object"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"tool_result\",\"content\":\"x\"}]}]}",
         "messages[0].content[0].tool_use_id: required string"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
         "\"tool_result\",\"tool_use_id\":\"t\",\"content\":[{\"type\":\"text\"}]}]}]}",
         "messages[0].content[0].content[0].text: required string"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"content\":[{\"type\":"
         "\"tool_result\",\"tool_use_id\":\"t\"}]}]}",
         "belong in a user message"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
         "\"text\":\"x\",\"cache_control\":\"yes\"}]}]}",
         "messages[0].content[0].cache_control: must be an object"},
        {"{\"model\":\"m\",\"messages\":[],\"max_tokens\":0}", "max_tokens: must be a positive"},
        {"{\"model\":\"m\",\"messages\":[],\"max_tokens\":1.5}", "max_tokens: must be a positive"},
        {"{\"model\":\"m\",\"messages\":[],\"max_tokens\":\"9\"}",
         "max_tokens: must be a positive"},
        {"{\"model\":\"m\",\"messages\":[],\"stream\":\"yes\"}", "stream: must be a boolean"},
        {"{\"model\":\"m\",\"messages\":[],\"temperature\":\"hot\"}",
         "temperature: must be a number"},
        {"{\"model\":\"m\",\"messages\":[],\"top_k\":-1}", "top_k: must be a non-negative"},
        {"{\"model\":\"m\",\"messages\":[],\"stop_sequences\":[1]}", "stop_sequences[0]"},
        {"{\"model\":\"m\",\"messages\":[],\"stop_sequences\":\"x\"}", "stop_sequences: must be"},
        {"{\"model\":\"m\",\"messages\":[],\"system\":[{\"type\":\"image\",\"source\":{\"type\":"
         "\"url\",\"url\":\"http://x\"}}]}",
         "system[0]: a system prompt holds text blocks only"},
        {"{\"model\":\"m\",\"messages\":[],\"tools\":[{\"description\":\"x\"}]}",
         "tools[0].name: required string"},
        {"{\"model\":\"m\",\"messages\":[],\"tools\":{}}", "tools: must be an array"},
        {"{\"model\":\"m\",\"messages\":[],\"tools\":[{\"name\":\"f\",\"input_schema\":[]}]}",
         "tools[0].input_schema"},
        {"{\"model\":\"m\",\"messages\":[],\"tool_choice\":{\"type\":\"maybe\"}}",
         "tool_choice.type: must be auto, any, tool or none"},
        {"{\"model\":\"m\",\"messages\":[],\"tool_choice\":{\"type\":\"tool\"}}",
         "tool_choice.name: required string"},
        {"{\"model\":\"m\",\"messages\":[],\"thinking\":{\"type\":\"enabled\"}}",
         "thinking.budget_tokens"},
        {"{\"model\":\"m\",\"messages\":[],\"thinking\":{\"budget_tokens\":5}}",
         "thinking.type: required string"},
        {"{\"model\":\"m\",\"messages\":[],\"metadata\":\"u\"}", "metadata: must be an object"},
        {"{\"model\":\"m\",\"messages\":[],\"metadata\":{\"user_id\":5}}",
         "metadata.user_id: must be a string"},
        {"{\"model\":\"m\",\"messages\":[],\"output_config\":[]}", "output_config: must be"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        t_parse_refused(cases[i][0], cases[i][1]);
}

static void
test_messages_request_refusal_never_quotes_the_body(void **state)
{
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"SECRET\",\"content\":\"x\"}]}";
    struct gw_buf why = {0};
    struct dl_request r;
    struct gw_arena a;

    (void)state;
    gw_arena_init(&a);
    assert_int_equal(dl_anthropic_shape.request_parse(&a, body, strlen(body), &r, &why),
                     GW_E_BAD_REQUEST);
    assert_null(strstr(why.data, "SECRET"));
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

static void
test_messages_request_refuses_a_read_field_given_twice(void **state)
{
    static const char *const fields[][2] = {
        {"model", "\"m\""},
        {"messages", "[]"},
        {"system", "\"s\""},
        {"tools", "[]"},
        {"tool_choice", "{\"type\":\"auto\"}"},
        {"max_tokens", "5"},
        {"stream", "true"},
        {"metadata", "{}"},
        {"stop_sequences", "[]"},
        {"temperature", "1"},
        {"top_p", "1"},
        {"top_k", "1"},
        {"thinking", "{\"type\":\"disabled\"}"},
        {"output_config", "{}"},
    };
    char body[256], want[64];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":[],\"%s\":%s,\"%s\":%s}",
                 fields[i][0], fields[i][1], fields[i][0], fields[i][1]);
        if (i < 2) /* model and messages are already there once */
            snprintf(body, sizeof(body), "{\"model\":\"m\",\"messages\":[],\"%s\":%s}",
                     fields[i][0], fields[i][1]);
        snprintf(want, sizeof(want), "duplicate key \"%s\"", fields[i][0]);
        t_parse_refused(body, want);
    }
    /* an escaped spelling is the same key */
    t_parse_refused("{\"model\":\"m\",\"messages\":[],\"mod\\u0065l\":\"n\"}",
                    "duplicate key \"model\"");
    /* a syntax error after the duplicate is reported as such */
    t_parse_refused("{\"model\":\"m\",\"model\":\"n\",\"messages\":[] x", "not valid JSON");
}

static void
test_messages_request_duplicate_unknown_field_last_counts(void **state)
{
    const char *body = "{\"model\":\"m\",\"messages\":[],\"service_tier\":\"auto\","
                       "\"service_tier\":\"standard_only\"}";
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, body, strlen(body), &r);
    assert_int_equal(r.n_extras, 1);
    t_str_is(r.extras[0].raw, "\"standard_only\"");
    gw_arena_fini(&a);
}

/* ---- parse: lenient and odd shapes ---- */

static void
test_messages_request_without_max_tokens_is_accepted(void **state)
{
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, body, strlen(body), &r);
    assert_int_equal(r.max_output_tokens, 0);
    assert_int_equal(r.parallel_tool_calls, -1);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_UNSET);
    /* render: the model's spec, else the fallback */
    t_render(&r, 300, NULL,
             "{\"model\":\"claude-upstream\",\"max_tokens\":300,\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"}]}");
    t_render(&r, 0, NULL,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"}]}");
    gw_arena_fini(&a);
}

static void
test_messages_request_thinking_kinds_and_output_format(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    const char *adaptive = "{\"model\":\"m\",\"messages\":[],\"thinking\":{\"type\":\"adaptive\"}}";
    const char *disabled = "{\"model\":\"m\",\"messages\":[],\"thinking\":{\"type\":\"disabled\"}}";
    const char *newer = "{\"model\":\"m\",\"messages\":[],\"thinking\":{\"type\":\"dreaming\"}}";
    const char *format = "{\"model\":\"m\",\"messages\":[],\"output_config\":{\"format\":{\"type\":"
                         "\"json_schema\",\"schema\":{\"type\":\"object\"}}}}";

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, adaptive, strlen(adaptive), &r);
    assert_true(r.thinking);
    assert_int_equal(r.thinking_budget, 0);
    t_parse(&a, disabled, strlen(disabled), &r);
    assert_false(r.thinking);
    assert_int_equal(r.n_extras, 0);
    t_parse(&a, newer, strlen(newer), &r);
    assert_false(r.thinking);
    assert_int_equal(r.n_extras, 1);
    t_str_is(r.extras[0].name, "thinking");
    t_parse(&a, format, strlen(format), &r);
    assert_int_equal(r.format, DL_FORMAT_JSON_SCHEMA);
    t_str_is(r.format_schema, "{\"type\":\"object\"}");
    t_str_is(r.extras[0].name, "output_config");
    gw_arena_fini(&a);
}

static void
test_messages_request_system_role_message_joins_the_system(void **state)
{
    const char *body = "{\"model\":\"m\",\"system\":\"a\",\"messages\":[{\"role\":\"system\","
                       "\"content\":\"b\"},{\"role\":\"user\",\"content\":[]}]}";
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, body, strlen(body), &r);
    assert_int_equal(r.n_system, 2);
    t_str_is(r.system[1].text, "b");
    assert_int_equal(r.n_messages, 1);
    assert_int_equal(r.messages[0].n_parts, 0);
    gw_arena_fini(&a);
}

/* ---- render: canonical requests from another shape ---- */

#define T_TEXT(s)                                                                                  \
    {                                                                                              \
        .kind = DL_PART_TEXT, .text = GW_STR_LIT(s)                                                \
    }
#define T_MSG(r_, p_)                                                                              \
    {                                                                                              \
        .role = (r_), .parts = (p_), .n_parts = sizeof(p_) / sizeof((p_)[0])                       \
    }
#define T_REQ(m_)                                                                                  \
    .source = DL_SHAPE_CHAT, .messages = (m_), .n_messages = sizeof(m_) / sizeof((m_)[0]),         \
    .parallel_tool_calls = -1

static struct dl_part t_hi[] = {T_TEXT("hi")}, t_hello[] = {T_TEXT("hello")},
                      t_bye[] = {T_TEXT("bye")};

static void
test_messages_render_plain_conversation_and_stream(void **state)
{
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, t_hi), T_MSG(DL_ROLE_ASSISTANT, t_hello),
                             T_MSG(DL_ROLE_USER, t_bye)};
    struct dl_request r = {T_REQ(m), .stream = true, .stream_usage = true};
    struct dl_dropped d = {0};

    (void)state;
    t_render(&r, 0, &d,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"hello\"},{\"role\":"
             "\"user\",\"content\":\"bye\"}],\"stream\":true}");
    assert_int_equal(d.n, 0);
}

static void
test_messages_render_max_tokens_precedence(void **state)
{
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, t_hi)};
    struct dl_request r = {T_REQ(m), .max_output_tokens = 100};
    const char *tail = ",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    char want[256];

    (void)state;
    snprintf(want, sizeof(want), "{\"model\":\"claude-upstream\",\"max_tokens\":100%s", tail);
    t_render(&r, 300, NULL, want);
    r.max_output_tokens = 0;
    snprintf(want, sizeof(want), "{\"model\":\"claude-upstream\",\"max_tokens\":300%s", tail);
    t_render(&r, 300, NULL, want);
    snprintf(want, sizeof(want), "{\"model\":\"claude-upstream\",\"max_tokens\":%d%s",
             DL_ANTHROPIC_FALLBACK_MAX_TOKENS, tail);
    t_render(&r, 0, NULL, want);
}

static void
test_messages_render_system_joined_and_same_roles_merged(void **state)
{
    struct dl_part sys[] = {T_TEXT("be brief"), T_TEXT(""), T_TEXT("a\"b")};
    struct dl_part a[] = {T_TEXT("a")}, b[] = {T_TEXT("b"), T_TEXT("")}, c[] = {T_TEXT("c")},
                   e[] = {T_TEXT("e")};
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, a), T_MSG(DL_ROLE_USER, b),
                             T_MSG(DL_ROLE_ASSISTANT, c), T_MSG(DL_ROLE_ASSISTANT, t_hello),
                             T_MSG(DL_ROLE_USER, e)};
    struct dl_request r = {T_REQ(m), .system = sys, .n_system = 3};

    (void)state;
    t_render(
        &r, 0, NULL,
        "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"system\":\"be brief\\n\\na\\\"b\","
        "\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
        "{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":[{\"type\":"
        "\"text\",\"text\":\"c\"},{\"type\":\"text\",\"text\":\"hello\"}]},{\"role\":\"user\","
        "\"content\":\"e\"}]}");
    /* a cache hint on a system part keeps the parts as blocks */
    sys[2].cache = true;
    t_render(&r, 0, NULL,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"system\":[{\"type\":\"text\","
             "\"text\":\"be brief\"},{\"type\":\"text\",\"text\":\"a\\\"b\",\"cache_control\":{"
             "\"type\":\"ephemeral\"}}],\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
             "\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":"
             "\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"c\"},{\"type\":\"text\","
             "\"text\":\"hello\"}]},{\"role\":\"user\",\"content\":\"e\"}]}");
}

static void
test_messages_render_images_urls_and_refusals(void **state)
{
    struct dl_part u[] = {
        {.kind = DL_PART_TEXT, .text = GW_STR_LIT("look"), .cache = true},
        {.kind = DL_PART_IMAGE, .url = GW_STR_LIT("data:image/png;base64,QUJD")},
        {.kind = DL_PART_IMAGE,
         .url = GW_STR_LIT("https://x.test/a.jpg"),
         .detail = GW_STR_LIT("low")},
        {.kind = DL_PART_IMAGE, .media_type = GW_STR_LIT("image/gif"), .data = GW_STR_LIT("R0lG")},
    };
    struct dl_part ftp[] = {{.kind = DL_PART_IMAGE, .url = GW_STR_LIT("ftp://x/a.png")}};
    struct dl_part plain[] = {{.kind = DL_PART_IMAGE, .url = GW_STR_LIT("data:image/png,abc")}};
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, u)};
    struct dl_message m2[] = {T_MSG(DL_ROLE_USER, ftp)};
    struct dl_message m3[] = {T_MSG(DL_ROLE_USER, plain)};
    struct dl_message m4[] = {T_MSG(DL_ROLE_USER, t_hi), T_MSG(DL_ROLE_ASSISTANT, u)};
    struct dl_request r = {T_REQ(m)}, r2 = {T_REQ(m2)}, r3 = {T_REQ(m3)}, r4 = {T_REQ(m4)};
    struct dl_dropped d = {0};

    (void)state;
    t_render(&r, 0, &d,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
             "\"content\":[{\"type\":\"text\",\"text\":\"look\",\"cache_control\":{\"type\":"
             "\"ephemeral\"}},{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":"
             "\"image/png\",\"data\":\"QUJD\"}},{\"type\":\"image\",\"source\":{\"type\":\"url\","
             "\"url\":\"https://x.test/a.jpg\"}},{\"type\":\"image\",\"source\":{\"type\":"
             "\"base64\",\"media_type\":\"image/gif\",\"data\":\"R0lG\"}}]}]}");
    assert_true(t_dropped_has(&d, "detail"));
    t_render_refused(&r2, "image url: only data: and http(s) URLs");
    t_render_refused(&r3, "only base64 data URLs");
    t_render_refused(&r4, "an assistant message cannot hold an image");
}

static void
test_messages_render_tools_and_tool_choice(void **state)
{
    static const struct {
        enum dl_tool_choice choice;
        int parallel;
        const char *want;
    } choices[] = {
        {DL_TOOL_CHOICE_UNSET, -1, NULL},
        {DL_TOOL_CHOICE_AUTO, -1, "{\"type\":\"auto\"}"},
        {DL_TOOL_CHOICE_REQUIRED, -1, "{\"type\":\"any\"}"},
        {DL_TOOL_CHOICE_NONE, -1, "{\"type\":\"none\"}"},
        {DL_TOOL_CHOICE_NAMED, -1, "{\"type\":\"tool\",\"name\":\"get\"}"},
        {DL_TOOL_CHOICE_UNSET, 0, "{\"type\":\"auto\",\"disable_parallel_tool_use\":true}"},
        {DL_TOOL_CHOICE_REQUIRED, 0, "{\"type\":\"any\",\"disable_parallel_tool_use\":true}"},
        {DL_TOOL_CHOICE_NONE, 0, "{\"type\":\"none\"}"},
        {DL_TOOL_CHOICE_UNSET, 1, NULL},
    };
    struct dl_tool tools[] = {
        {.name = GW_STR_LIT("get"),
         .description = GW_STR_LIT("gets"),
         .parameters = GW_STR_LIT(" {\"type\":\"object\",\"properties\":{\"q\":{\"type\":"
                                  "\"string\"}}}\n"),
         .strict = true},
        {.name = GW_STR_LIT("noargs")},
    };
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, t_hi)};
    struct dl_request r = {T_REQ(m), .tools = tools, .n_tools = 2,
                           .tool_choice_name = GW_STR_LIT("get")};
    const char *head = "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":"
                       "\"user\",\"content\":\"hi\"}],\"tools\":[{\"name\":\"get\",\"description\":"
                       "\"gets\",\"input_schema\":{\"type\":\"object\",\"properties\":{\"q\":{"
                       "\"type\":\"string\"}}}},{\"name\":\"noargs\",\"input_schema\":{\"type\":"
                       "\"object\",\"properties\":{}}}]";
    char want[1024];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(choices) / sizeof(choices[0]); i++) {
        struct dl_dropped d = {0};

        r.tool_choice = choices[i].choice;
        r.parallel_tool_calls = choices[i].parallel;
        snprintf(want, sizeof(want), "%s%s%s}", head, choices[i].want ? ",\"tool_choice\":" : "",
                 choices[i].want ? choices[i].want : "");
        t_render(&r, 0, &d, want);
        assert_true(t_dropped_has(&d, "strict"));
    }
    /* no tools: tool_choice has nothing to choose from, dropped and named */
    {
        struct dl_request nt = {T_REQ(m), .tool_choice = DL_TOOL_CHOICE_AUTO};
        struct dl_dropped d = {0};

        t_render(&nt, 0, &d,
                 "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":"
                 "\"user\",\"content\":\"hi\"}]}");
        assert_true(t_dropped_has(&d, "tool_choice"));
    }
}

static void
test_messages_render_tool_calls_and_results_share_turns(void **state)
{
    struct dl_part q[] = {T_TEXT("weather?")};
    struct dl_part calls[] = {
        T_TEXT("checking"),
        {.kind = DL_PART_TOOL_CALL,
         .id = GW_STR_LIT("call_1"),
         .name = GW_STR_LIT("w"),
         .arguments = GW_STR_LIT("{\"city\":\"Oslo\"}")},
        {.kind = DL_PART_TOOL_CALL,
         .id = GW_STR_LIT("call_2"),
         .name = GW_STR_LIT("t"),
         .arguments = GW_STR_LIT("  ")},
    };
    struct dl_part rain[] = {T_TEXT("rain")}, noon[] = {T_TEXT("12:00"), T_TEXT("UTC")};
    struct dl_part res1[] = {{.kind = DL_PART_TOOL_RESULT,
                              .call_id = GW_STR_LIT("call_1"),
                              .content = rain,
                              .n_content = 1}};
    struct dl_part res2[] = {{.kind = DL_PART_TOOL_RESULT,
                              .call_id = GW_STR_LIT("call_2"),
                              .content = noon,
                              .n_content = 2,
                              .is_error = true}};
    struct dl_part thanks[] = {T_TEXT("thanks")};
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, q), T_MSG(DL_ROLE_ASSISTANT, calls),
                             T_MSG(DL_ROLE_TOOL, res1), T_MSG(DL_ROLE_TOOL, res2),
                             T_MSG(DL_ROLE_USER, thanks)};
    struct dl_request r = {T_REQ(m)};
    struct dl_part bad[] = {{.kind = DL_PART_TOOL_CALL,
                             .id = GW_STR_LIT("c"),
                             .name = GW_STR_LIT("f"),
                             .arguments = GW_STR_LIT("[1,2]")}};
    struct dl_message mb[] = {T_MSG(DL_ROLE_USER, q), T_MSG(DL_ROLE_ASSISTANT, bad)};
    struct dl_request rb = {T_REQ(mb)};

    (void)state;
    t_render(&r, 0, NULL,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":["
             "{\"role\":\"user\",\"content\":\"weather?\"},"
             "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"checking\"},"
             "{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"w\",\"input\":{\"city\":"
             "\"Oslo\"}},{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"t\",\"input\":{}}]},"
             "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":"
             "\"call_1\",\"content\":\"rain\"},{\"type\":\"tool_result\",\"tool_use_id\":"
             "\"call_2\",\"content\":[{\"type\":\"text\",\"text\":\"12:00\"},{\"type\":\"text\","
             "\"text\":\"UTC\"}],\"is_error\":true},{\"type\":\"text\",\"text\":\"thanks\"}]}]}");
    bad[0].arguments = GW_STR_LIT("[1,2]");
    t_render_refused(&rb, "arguments: must be a JSON object");
    bad[0].arguments = GW_STR_LIT("{oops");
    t_render_refused(&rb, "arguments: must be a JSON object");
}

static void
test_messages_render_sampling_clamps_and_drops_by_name(void **state)
{
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, t_hi)};
    struct gw_str stops[] = {GW_STR_LIT("END"), GW_STR_LIT(""), GW_STR_LIT("\n")};
    struct dl_request r = {T_REQ(m),
                           .has_temperature = true,
                           .temperature = 1.5,
                           .has_top_p = true,
                           .top_p = 0.5,
                           .has_seed = true,
                           .seed = 7,
                           .has_presence = true,
                           .has_frequency = true,
                           .stop = stops,
                           .n_stop = 3,
                           .user = GW_STR_LIT("u1"),
                           .metadata = GW_STR_LIT("{\"a\":\"b\"}"),
                           .prompt_cache_key = GW_STR_LIT("k"),
                           .reasoning_effort = GW_STR_LIT("low"),
                           .thinking = true};
    struct dl_dropped d = {0};
    static const char *const dropped[] = {
        "top_p",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "metadata",
        "prompt_cache_key",
        "reasoning_effort",
    };
    size_t i;

    (void)state;
    t_render(&r, 0, &d,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"}],\"temperature\":1.0,\"stop_sequences\":[\"END\",\"\\n\"],"
             "\"metadata\":{\"user_id\":\"u1\"}}");
    for (i = 0; i < sizeof(dropped) / sizeof(dropped[0]); i++)
        if (!t_dropped_has(&d, dropped[i])) {
            print_error("%s not named as dropped\n", dropped[i]);
            fail();
        }
    assert_false(t_dropped_has(&d, "thinking")); /* named once, as reasoning_effort */
    assert_int_equal(d.n, sizeof(dropped) / sizeof(dropped[0]));
    /* top_p alone is kept; a budget becomes thinking */
    r.has_temperature = false;
    r.has_seed = r.has_presence = r.has_frequency = false;
    r.n_stop = 0;
    r.user = r.metadata = r.prompt_cache_key = r.reasoning_effort = (struct gw_str){"", 0};
    r.thinking_budget = 2048;
    r.has_top_k = true;
    r.top_k = 5;
    t_render(&r, 0, NULL,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"}],\"top_p\":0.5,\"top_k\":5,\"thinking\":{\"type\":\"enabled\","
             "\"budget_tokens\":2048}}");
}

static void
test_messages_render_extras_pass_only_to_their_own_shape(void **state)
{
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, t_hi)};
    struct dl_extra x[] = {{GW_STR_LIT("service_tier"), GW_STR_LIT("\"auto\"")},
                           {GW_STR_LIT("logit_bias"), GW_STR_LIT("{\"1\":2}")}};
    struct dl_request r = {T_REQ(m), .extras = x, .n_extras = 2};
    struct dl_dropped d = {0};

    (void)state;
    t_render(&r, 0, &d,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"}]}");
    assert_true(t_dropped_has(&d, "service_tier"));
    assert_true(t_dropped_has(&d, "logit_bias"));
    r.source = DL_SHAPE_MESSAGES;
    x[1].name = GW_STR_LIT("container");
    x[1].raw = GW_STR_LIT(" \"c1\" ");
    t_render(&r, 0, NULL,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"}],\"service_tier\":\"auto\",\"container\":\"c1\"}");
}

static void
test_messages_render_refuses_what_messages_cannot_express(void **state)
{
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, t_hi)};
    struct dl_tool hosted[] = {{.name = GW_STR_LIT("web_search"),
                                .hosted = GW_STR_LIT("{\"type\":\"web_search_preview\"}")}};
    static const struct {
        unsigned needs;
        enum dl_format format;
        const char *what;
    } cases[] = {
        {DL_NEED_F_N_CHOICES, DL_FORMAT_TEXT, "n: "},
        {DL_NEED_F_LOGPROBS, DL_FORMAT_TEXT, "logprobs"},
        {DL_NEED_F_AUDIO_OUT, DL_FORMAT_TEXT, "audio"},
        {DL_NEED_F_IMAGE_OUT, DL_FORMAT_TEXT, "modalities"},
        {DL_NEED_F_HOSTED_TOOLS, DL_FORMAT_TEXT, "hosted tools"},
        {0, DL_FORMAT_JSON_OBJECT, "response_format"},
        {0, DL_FORMAT_JSON_SCHEMA, "response_format"},
    };
    struct dl_part other[] = {{.kind = DL_PART_OTHER,
                               .name = GW_STR_LIT("input_audio"),
                               .data = GW_STR_LIT("{\"type\":\"input_audio\"}")}};
    struct dl_message mo[] = {T_MSG(DL_ROLE_USER, other)};
    struct dl_request ro = {T_REQ(mo)};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct dl_request r = {T_REQ(m), .needs = cases[i].needs, .format = cases[i].format};

        t_render_refused(&r, cases[i].what);
    }
    /* a hosted tool of another shape, even without the need flag */
    {
        struct dl_request r = {T_REQ(m), .tools = hosted, .n_tools = 1};

        t_render_refused(&r, "hosted tools");
    }
    t_render_refused(&ro, "input_audio parts cannot be sent");
}

static void
test_messages_render_conversation_must_start_with_the_user(void **state)
{
    struct dl_part empty[] = {T_TEXT("")};
    struct dl_message first_assistant[] = {T_MSG(DL_ROLE_ASSISTANT, t_hello),
                                           T_MSG(DL_ROLE_USER, t_hi)};
    struct dl_message none[] = {T_MSG(DL_ROLE_USER, empty)};
    struct dl_message skipped[] = {T_MSG(DL_ROLE_ASSISTANT, empty), T_MSG(DL_ROLE_USER, t_hi),
                                   T_MSG(DL_ROLE_ASSISTANT, empty), T_MSG(DL_ROLE_USER, t_bye)};
    struct dl_request r1 = {T_REQ(first_assistant)}, r2 = {T_REQ(none)}, r3 = {T_REQ(skipped)};

    (void)state;
    t_render_refused(&r1, "start with a user message");
    t_render_refused(&r2, "at least one user message");
    /* empty turns are skipped, and the user turns around them merge */
    t_render(&r3, 0, NULL,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
             "\"content\":[{\"type\":\"text\",\"text\":\"hi\"},{\"type\":\"text\",\"text\":"
             "\"bye\"}]}]}");
}

static void
test_messages_render_reasoning_needs_its_signature(void **state)
{
    struct dl_part parts[] = {
        {.kind = DL_PART_REASONING,
         .text = GW_STR_LIT("hmm"),
         .signature = GW_STR_LIT("sig"),
         .sig_shape = DL_SHAPE_MESSAGES},
        {.kind = DL_PART_REASONING,
         .redacted = true,
         .signature = GW_STR_LIT("opaque"),
         .sig_shape = DL_SHAPE_MESSAGES},
        {.kind = DL_PART_REASONING, .text = GW_STR_LIT("unsigned")},
        /* made by a Responses upstream: opaque to Anthropic */
        {.kind = DL_PART_REASONING,
         .text = GW_STR_LIT("theirs"),
         .signature = GW_STR_LIT("enc"),
         .sig_shape = DL_SHAPE_RESPONSES},
        T_TEXT("ok"),
    };
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, t_hi), T_MSG(DL_ROLE_ASSISTANT, parts)};
    struct dl_request r = {T_REQ(m)};
    struct dl_dropped d = {0};

    (void)state;
    m[1].name = GW_STR_LIT("bot");
    t_render(&r, 0, &d,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\","
             "\"thinking\":\"hmm\",\"signature\":\"sig\"},{\"type\":\"redacted_thinking\","
             "\"data\":\"opaque\"},{\"type\":\"text\",\"text\":\"ok\"}]}]}");
    assert_true(t_dropped_has(&d, "reasoning"));
    assert_true(t_dropped_has(&d, "name"));
}

static void
test_messages_render_documents(void **state)
{
    struct dl_part parts[] = {
        {.kind = DL_PART_DOCUMENT,
         .media_type = GW_STR_LIT("application/pdf"),
         .data = GW_STR_LIT("JVBE"),
         .text = GW_STR_LIT("Spec")},
        {.kind = DL_PART_DOCUMENT,
         .media_type = GW_STR_LIT("text/plain"),
         .data = GW_STR_LIT("aGkK")},
        {.kind = DL_PART_DOCUMENT, .url = GW_STR_LIT("data:application/pdf;base64,JVBE")},
        {.kind = DL_PART_DOCUMENT,
         .media_type = GW_STR_LIT("text/plain"),
         .data = GW_STR_LIT("/w==")}, /* not UTF-8 once decoded: kept as base64 */
    };
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, parts)};
    struct dl_request r = {T_REQ(m)};

    (void)state;
    t_render(&r, 0, NULL,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
             "\"content\":[{\"type\":\"document\",\"source\":{\"type\":\"base64\",\"media_type\":"
             "\"application/pdf\",\"data\":\"JVBE\"},\"title\":\"Spec\"},{\"type\":\"document\","
             "\"source\":{\"type\":\"text\",\"media_type\":\"text/plain\",\"data\":\"hi\\n\"}},"
             "{\"type\":\"document\",\"source\":{\"type\":\"base64\",\"media_type\":"
             "\"application/pdf\",\"data\":\"JVBE\"}},{\"type\":\"document\",\"source\":{\"type\":"
             "\"base64\",\"media_type\":\"text/plain\",\"data\":\"/w==\"}}]}]}");
}

static void
test_messages_render_appends_to_out(void **state)
{
    struct dl_message m[] = {T_MSG(DL_ROLE_USER, t_hi)};
    struct dl_request r = {T_REQ(m)};
    struct gw_buf out = {0};

    (void)state;
    assert_int_equal(gw_buf_append_cstr(&out, "P"), GW_OK);
    assert_int_equal(dl_anthropic_shape.request_render(&r, T_UPSTREAM, 0, NULL, &out, NULL), GW_OK);
    assert_true(out.data[0] == 'P');
    t_json_eq(out.data + 1, out.len - 1,
              "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
              "\"content\":\"hi\"}]}");
    gw_buf_fini(&out);
}

static void
test_messages_render_own_shape_keeps_what_the_client_chose(void **state)
{
    const char *body = "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},"
                       "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":"
                       "\"unsigned\"},{\"type\":\"text\",\"text\":\"ok\"}]}],\"temperature\":0.5,"
                       "\"top_p\":0.9,\"tool_choice\":{\"type\":\"none\"}}";
    struct dl_dropped d = {0};
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_parse(&a, body, strlen(body), &r);
    /* a Messages client chose temperature and top_p, unsigned thinking, tool_choice
     * without tools: its upstream answers for them, nothing is dropped */
    t_render(&r, 0, &d,
             "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
             "\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\","
             "\"thinking\":\"unsigned\",\"signature\":\"\"},{\"type\":\"text\",\"text\":\"ok\"}]}],"
             "\"tool_choice\":{\"type\":\"none\"},\"temperature\":0.5,\"top_p\":0.9}");
    assert_int_equal(d.n, 0);
    gw_arena_fini(&a);
}

/* ---- a Chat client's request through the hub (dl_openai_shape parses it) ----
 * What the old pairwise converter did for these bodies, now Chat parse -> canonical ->
 * Messages render; where the hub decides differently the test says why. */

/* Chat <body> through the hub expecting GW_OK and the Messages JSON <want>. */
static void
t_chat(const char *body, uint64_t spec, struct dl_dropped *d, const char *want)
{
    struct gw_buf why = {0};
    struct gw_arena a;
    struct dl_request r;

    gw_arena_init(&a);
    if (dl_shape_ops(DL_SHAPE_CHAT)->request_parse(&a, body, strlen(body), &r, &why) != GW_OK) {
        print_error("the Chat shape refused %s: %s\n", body, why.data ? why.data : "");
        fail();
    }
    t_render(&r, spec, d, want);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

/* Chat <body> through the hub expecting the Messages render to refuse, naming <what>. */
static void
t_chat_refused(const char *body, const char *what)
{
    struct gw_buf why = {0};
    struct gw_arena a;
    struct dl_request r;

    gw_arena_init(&a);
    assert_int_equal(dl_shape_ops(DL_SHAPE_CHAT)->request_parse(&a, body, strlen(body), &r, &why),
                     GW_OK);
    t_render_refused(&r, what);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

#define T_CHAT_USER_X "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"
#define T_WANT_USER_X                                                                              \
    "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","         \
    "\"content\":\"x\"}]"

static void
test_messages_chat_client_plain_turns_stream_and_max_tokens(void **state)
{
    char want[256];

    (void)state;
    t_chat("{\"model\":\"gpt-x\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":"
           "\"hi\"},{\"role\":\"assistant\",\"content\":\"hello\"},{\"role\":\"user\",\"content\":"
           "\"bye\"}]}",
           0, NULL,
           "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
           "\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":\"hello\"},{\"role\":\"user\","
           "\"content\":\"bye\"}],\"stream\":true}");
    /* max_completion_tokens, else max_tokens, else the model's spec, else the fallback */
    t_chat("{\"model\":\"m\",\"max_completion_tokens\":100,\"max_tokens\":200," T_CHAT_USER_X "}",
           300, NULL,
           "{\"model\":\"claude-upstream\",\"max_tokens\":100,\"messages\":[{\"role\":\"user\","
           "\"content\":\"x\"}]}");
    t_chat("{\"model\":\"m\",\"max_tokens\":200," T_CHAT_USER_X "}", 300, NULL,
           "{\"model\":\"claude-upstream\",\"max_tokens\":200,\"messages\":[{\"role\":\"user\","
           "\"content\":\"x\"}]}");
    t_chat("{\"model\":\"m\",\"max_completion_tokens\":null," T_CHAT_USER_X "}", 300, NULL,
           "{\"model\":\"claude-upstream\",\"max_tokens\":300,\"messages\":[{\"role\":\"user\","
           "\"content\":\"x\"}]}");
    snprintf(want, sizeof(want),
             "{\"model\":\"claude-upstream\",\"max_tokens\":%d,\"messages\":"
             "[{\"role\":\"user\",\"content\":\"x\"}]}",
             DL_ANTHROPIC_FALLBACK_MAX_TOKENS);
    t_chat("{\"model\":\"m\"," T_CHAT_USER_X "}", 0, NULL, want);
}

static void
test_messages_chat_client_system_merges_images_tools(void **state)
{
    struct dl_dropped d = {0};

    (void)state;
    /* system and developer messages join the top-level system */
    t_chat(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
        "{\"role\":\"developer\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":"
        "\"text\",\"text\":\"b\"}]},{\"role\":\"user\",\"content\":\"q\"}]}",
        0, NULL,
        "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"system\":\"be brief\\n\\na\\n\\nb\","
        "\"messages\":[{\"role\":\"user\",\"content\":\"q\"}]}");
    /* consecutive messages of one role merge */
    t_chat(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\","
        "\"content\":[{\"type\":\"text\",\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":"
        "\"c\"},{\"role\":\"assistant\",\"content\":\"d\"},{\"role\":\"user\",\"content\":\"e\"}]}",
        0, NULL,
        "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
        "\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"c\"},{\"type\":"
        "\"text\",\"text\":\"d\"}]},{\"role\":\"user\",\"content\":\"e\"}]}");
    /* images: a base64 data URL and an http URL; detail dropped by name */
    t_chat("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\","
           "\"text\":\"look\"},{\"type\":\"image_url\",\"image_url\":{\"url\":"
           "\"data:image/png;base64,QUJD\"}},{\"type\":\"image_url\",\"image_url\":{\"url\":"
           "\"https://x.test/a.jpg\",\"detail\":\"low\"}},{\"type\":\"text\",\"text\":\"\"}]}]}",
           0, &d,
           "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":[{\"role\":\"user\","
           "\"content\":[{\"type\":\"text\",\"text\":\"look\"},{\"type\":\"image\",\"source\":{"
           "\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"QUJD\"}},{\"type\":"
           "\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://x.test/a.jpg\"}}]}]}");
    assert_true(t_dropped_has(&d, "detail"));
    t_chat_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                   "\"image_url\",\"image_url\":{\"url\":\"ftp://x/a.png\"}}]}]}",
                   "image url");
    /* tools, parallel_tool_calls false as disable_parallel_tool_use, strict dropped */
    memset(&d, 0, sizeof(d));
    t_chat("{\"model\":\"m\"," T_CHAT_USER_X ",\"tools\":[{\"type\":\"function\",\"function\":"
           "{\"name\":\"get\",\"description\":\"gets\",\"parameters\":{\"type\":\"object\","
           "\"properties\":{\"q\":{\"type\":\"string\"}}},\"strict\":true}},{\"type\":\"function\","
           "\"function\":{\"name\":\"noargs\"}}],\"parallel_tool_calls\":false}",
           0, &d,
           T_WANT_USER_X ",\"tools\":[{\"name\":\"get\",\"description\":\"gets\",\"input_schema\":"
                         "{\"type\":\"object\",\"properties\":{\"q\":{\"type\":\"string\"}}}},{"
                         "\"name\":\"noargs\",\"input_schema\":{\"type\":\"object\",\"properties\":"
                         "{}}}],\"tool_choice\":{\"type\":\"auto\",\"disable_parallel_tool_use\":"
                         "true}}");
    assert_true(t_dropped_has(&d, "strict"));
    t_chat("{\"model\":\"m\"," T_CHAT_USER_X ",\"tools\":[{\"type\":\"function\",\"function\":"
           "{\"name\":\"f\"}}],\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":"
           "\"f\"}}}",
           0, NULL,
           T_WANT_USER_X
           ",\"tools\":[{\"name\":\"f\",\"input_schema\":{\"type\":\"object\","
           "\"properties\":{}}}],\"tool_choice\":{\"type\":\"tool\",\"name\":\"f\"}}");
}

static void
test_messages_chat_client_tool_round_trip_keeps_ids(void **state)
{
    (void)state;
    /* parallel results and the user's next words share one user turn, results first */
    t_chat(
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"weather?\"},"
        "{\"role\":\"assistant\",\"content\":\"checking\",\"tool_calls\":[{\"id\":\"call_1\","
        "\"type\":\"function\",\"function\":{\"name\":\"w\",\"arguments\":"
        "\"{\\\"city\\\":\\\"Oslo\\\"}\"}},{\"id\":\"call_2\",\"type\":\"function\",\"function\":"
        "{\"name\":\"t\",\"arguments\":\"\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"call_1\","
        "\"content\":\"rain\"},{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":[{"
        "\"type\":\"text\",\"text\":\"12:00\"}]},{\"role\":\"user\",\"content\":\"thanks\"}]}",
        0, NULL,
        "{\"model\":\"claude-upstream\",\"max_tokens\":4096,\"messages\":["
        "{\"role\":\"user\",\"content\":\"weather?\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"checking\"},"
        "{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"w\",\"input\":{\"city\":\"Oslo\"}},"
        "{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"t\",\"input\":{}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\","
        "\"content\":\"rain\"},{\"type\":\"tool_result\",\"tool_use_id\":\"call_2\","
        "\"content\":\"12:00\"},{\"type\":\"text\",\"text\":\"thanks\"}]}]}");
    t_chat_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
                   "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":\"function\","
                   "\"function\":{\"name\":\"f\",\"arguments\":\"[1,2]\"}}]}]}",
                   "function.arguments");
    /* a legacy function message answers no call by id: the API cannot pair it */
    t_chat_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
                   "{\"role\":\"function\",\"name\":\"f\",\"content\":\"x\"}]}",
                   "without the id of its call");
}

static void
test_messages_chat_client_sampling_and_dropped_fields(void **state)
{
    static const char *const named[] = {"seed",     "presence_penalty", "frequency_penalty",
                                        "metadata", "reasoning_effort", "logit_bias",
                                        "store",    "service_tier"};
    struct dl_dropped d = {0};
    size_t i;

    (void)state;
    memset(&d, 0, sizeof(d));
    t_chat("{\"model\":\"m\"," T_CHAT_USER_X ",\"temperature\":1.5,\"top_p\":0.5,\"stop\":\"END\","
           "\"user\":\"u1\"}",
           0, &d,
           T_WANT_USER_X ",\"temperature\":1.0,\"stop_sequences\":[\"END\"],\"metadata\":{"
                         "\"user_id\":\"u1\"}}");
    assert_true(t_dropped_has(&d, "top_p"));
    t_chat("{\"model\":\"m\"," T_CHAT_USER_X ",\"top_p\":0.5,\"safety_identifier\":\"s1\"}", 0,
           NULL, T_WANT_USER_X ",\"top_p\":0.5,\"metadata\":{\"user_id\":\"s1\"}}");
    /* what the old converter ignored silently is now dropped by name */
    memset(&d, 0, sizeof(d));
    t_chat("{\"model\":\"m\"," T_CHAT_USER_X ",\"frequency_penalty\":1,\"presence_penalty\":1,"
           "\"seed\":7,\"logit_bias\":{\"1\":2},\"stream_options\":{\"include_usage\":true},"
           "\"store\":true,\"metadata\":{\"a\":\"b\"},\"service_tier\":\"auto\","
           "\"reasoning_effort\":\"low\",\"n\":1,\"logprobs\":false,\"response_format\":{\"type\":"
           "\"text\"},\"modalities\":[\"text\"]}",
           0, &d, T_WANT_USER_X "}");
    for (i = 0; i < sizeof(named) / sizeof(named[0]); i++)
        if (!t_dropped_has(&d, named[i])) {
            print_error("%s not named as dropped\n", named[i]);
            fail();
        }
}

static void
test_messages_chat_client_refusals(void **state)
{
    static const char *const cases[][2] = {
        {"\"n\":2", "n: "},
        {"\"logprobs\":true", "logprobs"},
        {"\"top_logprobs\":3", "logprobs"},
        {"\"response_format\":{\"type\":\"json_object\"}", "response_format"},
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\","
         "\"schema\":{}}}",
         "response_format"},
        {"\"audio\":{\"voice\":\"x\",\"format\":\"wav\"},\"modalities\":[\"text\",\"audio\"]",
         "audio"},
        {"\"web_search_options\":{}", "hosted tools"},
    };
    char body[512];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(body, sizeof(body), "{\"model\":\"m\"," T_CHAT_USER_X ",%s}", cases[i][0]);
        t_chat_refused(body, cases[i][1]);
    }
    t_chat_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"content\":\"hi\"},"
                   "{\"role\":\"user\",\"content\":\"x\"}]}",
                   "start with a user message");
    t_chat_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}",
                   "at least one user message");
    t_chat_refused("{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                   "\"input_audio\",\"input_audio\":{\"data\":\"x\",\"format\":\"wav\"}}]}]}",
                   "input_audio parts cannot be sent");
}

/* ---- out of memory ---- */

static void
test_messages_request_out_of_memory_is_clean(void **state)
{
    size_t len;
    char *body = t_fixture("request_media_tools.in.json", &len);
    unsigned long k;
    bool ok_seen = false;

    (void)state;
    for (k = 1; k < 400 && !ok_seen; k++) {
        struct gw_buf out = {0}, why = {0};
        struct dl_request r;
        struct gw_arena a;
        enum gw_code rc;

        gw_arena_init(&a);
        gw_alloc_fail_at(k);
        rc = dl_anthropic_shape.request_parse(&a, body, len, &r, &why);
        if (rc == GW_OK)
            rc = dl_anthropic_shape.request_render(&r, T_UPSTREAM, 0, NULL, &out, &why);
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_request_parse_claude_code_fields),
        cmocka_unit_test(test_messages_request_parse_media_tools_fields),
        cmocka_unit_test(test_messages_request_round_trip_claude_code),
        cmocka_unit_test(test_messages_request_round_trip_claude_code_2_1),
        cmocka_unit_test(test_messages_request_round_trip_media_tools),
        cmocka_unit_test(test_messages_request_refuses_what_is_not_a_messages_request),
        cmocka_unit_test(test_messages_request_refusal_never_quotes_the_body),
        cmocka_unit_test(test_messages_request_refuses_a_read_field_given_twice),
        cmocka_unit_test(test_messages_request_duplicate_unknown_field_last_counts),
        cmocka_unit_test(test_messages_request_without_max_tokens_is_accepted),
        cmocka_unit_test(test_messages_request_thinking_kinds_and_output_format),
        cmocka_unit_test(test_messages_request_system_role_message_joins_the_system),
        cmocka_unit_test(test_messages_render_plain_conversation_and_stream),
        cmocka_unit_test(test_messages_render_max_tokens_precedence),
        cmocka_unit_test(test_messages_render_system_joined_and_same_roles_merged),
        cmocka_unit_test(test_messages_render_images_urls_and_refusals),
        cmocka_unit_test(test_messages_render_tools_and_tool_choice),
        cmocka_unit_test(test_messages_render_tool_calls_and_results_share_turns),
        cmocka_unit_test(test_messages_render_sampling_clamps_and_drops_by_name),
        cmocka_unit_test(test_messages_render_extras_pass_only_to_their_own_shape),
        cmocka_unit_test(test_messages_render_refuses_what_messages_cannot_express),
        cmocka_unit_test(test_messages_render_conversation_must_start_with_the_user),
        cmocka_unit_test(test_messages_render_reasoning_needs_its_signature),
        cmocka_unit_test(test_messages_render_documents),
        cmocka_unit_test(test_messages_render_appends_to_out),
        cmocka_unit_test(test_messages_render_own_shape_keeps_what_the_client_chose),
        cmocka_unit_test(test_messages_chat_client_plain_turns_stream_and_max_tokens),
        cmocka_unit_test(test_messages_chat_client_system_merges_images_tools),
        cmocka_unit_test(test_messages_chat_client_tool_round_trip_keeps_ids),
        cmocka_unit_test(test_messages_chat_client_sampling_and_dropped_fields),
        cmocka_unit_test(test_messages_chat_client_refusals),
        cmocka_unit_test(test_messages_request_out_of_memory_is_clean),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
