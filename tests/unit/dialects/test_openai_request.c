/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_openai_request.c - the Chat Completions request and the
 * canonical request (dialects/openai_request.c, through dl_openai_shape): parse of the
 * fixtures under tests/fixtures/chat/ into canonical fields, refusals and their reasons,
 * render of a canonical request (as a Messages client's parse gives it) compared with
 * tests/fixtures/chat/request_render.out.json structurally, the dropped names, the
 * refusals of render, and what a request parsed from Chat gives back to Chat.
 * Fixtures are read from the repository's root (tools/test.sh runs from there).
 * See: dialects/openai_request.c, dialects/canon.h
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
#include "dialects/openai.h"

#define FIX "tests/fixtures/chat/"

/* ---- helpers ---- */

/* The bytes of fixture <name> into <out> (NUL-terminated). */
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

static bool
t_eq(struct gw_str s, const char *lit)
{
    if (gw_str_eq(s, gw_str_c(lit)))
        return true;
    print_error("got \"%.*s\", want \"%s\"\n", (int)s.len, s.ptr ? s.ptr : "", lit);
    return false;
}

static bool
t_in(struct gw_str s, const struct gw_buf *body)
{
    return s.ptr >= body->data && s.ptr + s.len <= body->data + body->len;
}

struct t_req {
    struct gw_arena arena;
    struct gw_buf body, why;
    struct dl_request r;
};

static enum gw_code
t_parse_str(struct t_req *t, const char *body)
{
    gw_arena_init(&t->arena);
    memset(&t->body, 0, sizeof(t->body));
    memset(&t->why, 0, sizeof(t->why));
    assert_int_equal(gw_buf_append_cstr(&t->body, body), GW_OK);
    return dl_openai_shape.request_parse(&t->arena, t->body.data, t->body.len, &t->r, &t->why);
}

static void
t_parse_fixture(struct t_req *t, const char *name)
{
    gw_arena_init(&t->arena);
    memset(&t->body, 0, sizeof(t->body));
    memset(&t->why, 0, sizeof(t->why));
    t_fixture(name, &t->body);
    if (dl_openai_shape.request_parse(&t->arena, t->body.data, t->body.len, &t->r, &t->why) !=
        GW_OK) {
        print_error("%s refused: %.*s\n", name, (int)t->why.len, t->why.data ? t->why.data : "");
        fail();
    }
}

static void
t_fini(struct t_req *t)
{
    gw_arena_fini(&t->arena);
    gw_buf_fini(&t->body);
    gw_buf_fini(&t->why);
}

static const struct dl_extra *
t_extra(const struct dl_request *r, const char *name)
{
    size_t i;

    for (i = 0; i < r->n_extras; i++)
        if (gw_str_eq(r->extras[i].name, gw_str_c(name)))
            return &r->extras[i];
    return NULL;
}

/* ---- parse ---- */

static void
test_openai_request_parse_full_fixture_maps_every_field(void **state)
{
    struct t_req t;
    const struct dl_request *r = &t.r;
    const struct dl_message *m;

    (void)state;
    t_parse_fixture(&t, "request_full.in.json");
    assert_int_equal(r->source, DL_SHAPE_CHAT);
    assert_true(t_eq(r->model, "gpt-4o"));
    assert_true(t_in(r->model, &t.body)); /* no escape: a slice of the body */
    /* system and developer: system text parts, in order */
    assert_int_equal(r->n_system, 2);
    assert_true(t_eq(r->system[0].text, "You are terse."));
    assert_true(t_eq(r->system[1].text, "Answer in French."));
    assert_int_equal(r->n_messages, 5);
    /* user: text (escaped: an arena copy), image by URL, image as data, a file */
    m = &r->messages[0];
    assert_int_equal(m->role, DL_ROLE_USER);
    assert_true(t_eq(m->name, "ann"));
    assert_int_equal(m->n_parts, 4);
    assert_int_equal(m->parts[0].kind, DL_PART_TEXT);
    assert_true(t_eq(m->parts[0].text, "What is in these images?\n"));
    assert_false(t_in(m->parts[0].text, &t.body));
    assert_int_equal(m->parts[1].kind, DL_PART_IMAGE);
    assert_true(t_eq(m->parts[1].url, "https://example.com/cat.png"));
    assert_true(t_eq(m->parts[1].detail, "high"));
    assert_int_equal(m->parts[2].kind, DL_PART_IMAGE);
    assert_int_equal(m->parts[2].url.len, 0);
    assert_true(t_eq(m->parts[2].media_type, "image/png"));
    assert_true(t_eq(m->parts[2].data, "iVBORw0KGgo="));
    assert_int_equal(m->parts[3].kind, DL_PART_DOCUMENT);
    assert_true(t_eq(m->parts[3].media_type, "application/pdf"));
    assert_true(t_eq(m->parts[3].data, "JVBERi0="));
    assert_true(t_eq(m->parts[3].text, "a.pdf"));
    /* assistant: reasoning first, then text, then the tool calls with their ids */
    m = &r->messages[1];
    assert_int_equal(m->role, DL_ROLE_ASSISTANT);
    assert_int_equal(m->n_parts, 4);
    assert_int_equal(m->parts[0].kind, DL_PART_REASONING);
    assert_true(t_eq(m->parts[0].text, "Look at them."));
    assert_int_equal(m->parts[1].kind, DL_PART_TEXT);
    assert_true(t_eq(m->parts[1].text, "A cat."));
    assert_int_equal(m->parts[2].kind, DL_PART_TOOL_CALL);
    assert_true(t_eq(m->parts[2].id, "call_1"));
    assert_true(t_eq(m->parts[2].name, "lookup"));
    assert_true(t_eq(m->parts[2].arguments, "{\"q\":\"cat\"}"));
    assert_true(t_eq(m->parts[3].id, "call_2"));
    assert_int_equal(m->parts[3].arguments.len, 0);
    /* tool results: a tool turn each, call_id = tool_call_id */
    m = &r->messages[2];
    assert_int_equal(m->role, DL_ROLE_TOOL);
    assert_int_equal(m->n_parts, 1);
    assert_int_equal(m->parts[0].kind, DL_PART_TOOL_RESULT);
    assert_true(t_eq(m->parts[0].call_id, "call_1"));
    assert_int_equal(m->parts[0].n_content, 1);
    assert_true(t_eq(m->parts[0].content[0].text, "a small cat"));
    assert_true(t_eq(r->messages[3].parts[0].call_id, "call_2"));
    assert_true(t_eq(r->messages[3].parts[0].content[0].text, "noon"));
    assert_true(t_eq(r->messages[4].parts[0].text, "Thanks \xc3\xa9"));
    /* tools: parameters kept as raw JSON */
    assert_int_equal(r->n_tools, 2);
    assert_true(t_eq(r->tools[0].name, "lookup"));
    assert_true(t_eq(r->tools[0].description, "Looks up."));
    assert_true(t_eq(r->tools[0].parameters,
                     "{\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}}}"));
    assert_true(r->tools[0].strict);
    assert_int_equal(r->tools[0].hosted.len, 0);
    assert_int_equal(r->tools[1].parameters.len, 0);
    assert_int_equal(r->tool_choice, DL_TOOL_CHOICE_NAMED);
    assert_true(t_eq(r->tool_choice_name, "lookup"));
    assert_int_equal(r->parallel_tool_calls, 0);
    /* sampling */
    assert_true(r->has_temperature && r->temperature == 0.7);
    assert_true(r->has_top_p && r->top_p == 0.9);
    assert_true(r->has_seed && r->seed == 42);
    assert_true(r->has_presence && r->presence_penalty == -0.5);
    assert_true(r->has_frequency && r->frequency_penalty == 1);
    assert_false(r->has_top_k);
    assert_int_equal(r->n_stop, 2);
    assert_true(t_eq(r->stop[0], "END"));
    assert_true(t_eq(r->stop[1], "STOP"));
    assert_int_equal(r->max_output_tokens, 200); /* max_completion_tokens wins */
    assert_int_equal(r->format, DL_FORMAT_JSON_SCHEMA);
    assert_true(t_eq(r->format_name, "answer"));
    assert_true(t_eq(r->format_schema, "{\"type\": \"object\"}"));
    assert_true(r->format_strict);
    assert_true(t_eq(r->reasoning_effort, "low"));
    assert_true(r->thinking);
    assert_true(r->stream);
    assert_true(r->stream_usage);
    assert_true(t_eq(r->user, "u-1"));
    assert_true(t_eq(r->metadata, "{\"k\": \"v\"}"));
    assert_true(t_eq(r->prompt_cache_key, "conv-9"));
    assert_int_equal(r->needs, 0);
    /* everything else, non-null, kept by name with its raw JSON */
    assert_int_equal(r->n_extras, 3);
    assert_true(
        t_eq(t_extra(r, "response_format.json_schema.description")->raw, "\"The answer.\""));
    assert_true(t_eq(t_extra(r, "logit_bias")->raw, "{\"50256\": -100}"));
    assert_true(t_eq(t_extra(r, "service_tier")->raw, "\"auto\""));
    assert_null(t_extra(r, "store")); /* null asks for nothing */
    t_fini(&t);
}

/* dl_openai_req_canon (the pipeline's read of a Chat request already parsed by
 * dl_openai_req_parse) gives what request_parse gives, without a second check, refusals
 * of what the scanner does not look into included. */
static void
test_openai_request_canon_of_a_parsed_request_is_request_parse(void **state)
{
    static const char *const fixtures[] = {"request_full.in.json", "request_legacy.in.json",
                                           "request_needs.in.json"};
    static const char unknown_role[] = "{\"model\":\"m\",\"messages\":[{\"role\":\"x\"}]}";
    struct dl_openai_req *req = NULL;
    struct gw_buf why = {0};
    struct dl_request canon;
    struct gw_arena a;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
        struct t_req t;
        struct dl_dropped d1 = {0}, d2 = {0};
        struct gw_buf want = {0}, got = {0};

        t_parse_fixture(&t, fixtures[i]);
        gw_arena_init(&a);
        assert_int_equal(dl_openai_req_parse(t.body.data, t.body.len, &req, &why), GW_OK);
        assert_int_equal(dl_openai_req_canon(req, &a, &canon, &why), GW_OK);
        assert_int_equal(
            dl_openai_shape.request_render(&t.r, GW_STR_LIT("m"), 100, &d1, &want, NULL), GW_OK);
        assert_int_equal(
            dl_openai_shape.request_render(&canon, GW_STR_LIT("m"), 100, &d2, &got, NULL), GW_OK);
        assert_int_equal(got.len, want.len);
        assert_memory_equal(got.data, want.data, want.len);
        assert_int_equal(d1.n, d2.n);
        dl_openai_req_free(req);
        gw_buf_fini(&want);
        gw_buf_fini(&got);
        gw_arena_fini(&a);
        t_fini(&t);
    }
    /* the scanner takes any role; the canonical reading refuses an unknown one */
    gw_arena_init(&a);
    assert_int_equal(dl_openai_req_parse(unknown_role, strlen(unknown_role), &req, &why), GW_OK);
    assert_int_equal(dl_openai_req_canon(req, &a, &canon, &why), GW_E_BAD_REQUEST);
    assert_non_null(strstr(why.data, "messages[0].role: unknown role"));
    dl_openai_req_free(req);
    gw_arena_fini(&a);
    gw_buf_fini(&why);
}

static void
test_openai_request_parse_sets_needs_and_keeps_what_canon_cannot_model(void **state)
{
    struct t_req t;
    const struct dl_request *r = &t.r;
    const struct dl_message *m;

    (void)state;
    t_parse_fixture(&t, "request_needs.in.json");
    assert_int_equal(r->needs, DL_NEED_F_N_CHOICES | DL_NEED_F_LOGPROBS | DL_NEED_F_HOSTED_TOOLS |
                                   DL_NEED_F_AUDIO_OUT);
    /* input_audio and a file by id: OTHER parts, type in name, the part in data */
    m = &r->messages[0];
    assert_int_equal(m->n_parts, 2);
    assert_int_equal(m->parts[0].kind, DL_PART_OTHER);
    assert_true(t_eq(m->parts[0].name, "input_audio"));
    assert_true(t_eq(m->parts[0].data, "{\"type\": \"input_audio\", \"input_audio\": {\"data\": "
                                       "\"UklGRg==\", \"format\": \"wav\"}}"));
    assert_int_equal(m->parts[1].kind, DL_PART_OTHER);
    assert_true(t_eq(m->parts[1].name, "file"));
    /* a custom tool's call: OTHER; its result stays a tool result */
    m = &r->messages[1];
    assert_int_equal(m->n_parts, 1);
    assert_int_equal(m->parts[0].kind, DL_PART_OTHER);
    assert_true(t_eq(m->parts[0].name, "custom"));
    assert_true(t_eq(r->messages[2].parts[0].call_id, "ct_1"));
    /* custom and provider tools: kept as written */
    assert_int_equal(r->n_tools, 2);
    assert_true(t_eq(r->tools[0].name, "grep"));
    assert_true(t_eq(r->tools[0].hosted, "{\"type\": \"custom\", \"custom\": {\"name\": \"grep\", "
                                         "\"description\": \"free text\"}}"));
    assert_true(t_eq(r->tools[1].name, "web_search"));
    assert_true(r->tools[1].hosted.len > 0);
    /* the fields behind the needs, kept for a Chat renderer */
    assert_true(t_eq(t_extra(r, "n")->raw, "2"));
    assert_true(t_eq(t_extra(r, "logprobs")->raw, "true"));
    assert_true(t_eq(t_extra(r, "top_logprobs")->raw, "3"));
    assert_true(t_eq(t_extra(r, "modalities")->raw, "[\"text\", \"audio\"]"));
    assert_non_null(t_extra(r, "audio"));
    assert_true(t_eq(t_extra(r, "web_search_options")->raw, "{}"));
    t_fini(&t);
}

static void
test_openai_request_parse_legacy_functions_pair_call_and_result(void **state)
{
    struct t_req t;
    const struct dl_request *r = &t.r;

    (void)state;
    t_parse_fixture(&t, "request_legacy.in.json");
    assert_int_equal(r->n_messages, 3);
    assert_int_equal(r->messages[1].n_parts, 1);
    assert_int_equal(r->messages[1].parts[0].kind, DL_PART_TOOL_CALL);
    assert_true(t_eq(r->messages[1].parts[0].id, "call_fn_1"));
    assert_true(t_eq(r->messages[1].parts[0].name, "weather"));
    assert_true(t_eq(r->messages[1].parts[0].arguments, "{\"city\":\"Paris\"}"));
    assert_int_equal(r->messages[2].role, DL_ROLE_TOOL);
    assert_true(t_eq(r->messages[2].parts[0].call_id, "call_fn_1"));
    assert_true(t_eq(r->messages[2].parts[0].content[0].text, "sunny"));
    assert_int_equal(r->n_tools, 1);
    assert_true(t_eq(r->tools[0].name, "weather"));
    assert_true(t_eq(r->tools[0].parameters, "{\"type\": \"object\"}"));
    assert_int_equal(r->tool_choice, DL_TOOL_CHOICE_NAMED);
    assert_true(t_eq(r->tool_choice_name, "weather"));
    t_fini(&t);
}

static void
test_openai_request_parse_allowed_tools_keeps_only_the_allowed(void **state)
{
    struct t_req t;

    (void)state;
    assert_int_equal(
        t_parse_str(&t,
                    "{\"model\":\"m\",\"messages\":[],\"tools\":["
                    "{\"type\":\"function\",\"function\":{\"name\":\"a\"}},"
                    "{\"type\":\"function\",\"function\":{\"name\":\"b\"}},"
                    "{\"type\":\"function\",\"function\":{\"name\":\"c\"}}],"
                    "\"tool_choice\":{\"type\":\"allowed_tools\",\"allowed_tools\":{"
                    "\"mode\":\"required\",\"tools\":[{\"type\":\"function\",\"function\":"
                    "{\"name\":\"c\"}},{\"type\":\"function\",\"function\":{\"name\":\"a\"}}]}}}"),
        GW_OK);
    assert_int_equal(t.r.tool_choice, DL_TOOL_CHOICE_REQUIRED);
    assert_int_equal(t.r.n_tools, 2);
    assert_true(t_eq(t.r.tools[0].name, "a"));
    assert_true(t_eq(t.r.tools[1].name, "c"));
    t_fini(&t);
}

static void
test_openai_request_parse_duplicate_keys_last_one_counts_but_read_fields_refused(void **state)
{
    struct t_req t;

    (void)state;
    assert_int_equal(t_parse_str(&t, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\","
                                     "\"content\":\"a\",\"content\":\"b\"}],"
                                     "\"temperature\":1,\"temperature\":0.25}"),
                     GW_OK);
    assert_true(t_eq(t.r.messages[0].parts[0].text, "b"));
    assert_true(t.r.temperature == 0.25);
    t_fini(&t);
    /* the rule of dl_openai_req_parse holds: one body per request */
    assert_int_equal(t_parse_str(&t, "{\"model\":\"a\",\"messages\":[],\"model\":\"b\"}"),
                     GW_E_BAD_REQUEST);
    assert_non_null(strstr(t.why.data, "duplicate key \"model\""));
    t_fini(&t);
}

static void
test_openai_request_parse_safety_identifier_is_the_user_or_an_extra(void **state)
{
    struct t_req t;

    (void)state;
    /* safety_identifier: the user when there is none, else kept as an extra */
    assert_int_equal(t_parse_str(&t, "{\"model\":\"m\",\"messages\":[],\"safety_identifier\":"
                                     "\"s\\u0031\"}"),
                     GW_OK);
    assert_true(t_eq(t.r.user, "s1"));
    assert_int_equal(t.r.n_extras, 0);
    t_fini(&t);
    assert_int_equal(t_parse_str(&t, "{\"model\":\"m\",\"messages\":[],\"user\":\"u\","
                                     "\"safety_identifier\":\"s\"}"),
                     GW_OK);
    assert_true(t_eq(t.r.user, "u"));
    assert_true(t_eq(t_extra(&t.r, "safety_identifier")->raw, "\"s\""));
    t_fini(&t);
}

static void
test_openai_request_parse_refusals_name_the_field_never_the_body(void **state)
{
    static const struct {
        const char *body;
        const char *why;
    } bad[] = {
        {"[]", "body: must be a JSON object"},
        {"{\"model\":\"m\"}", "messages: required array"},
        {"{\"model\":\"m\",\"messages\":[5]}", "messages[0]: must be an object"},
        {"{\"model\":\"m\",\"messages\":[{\"content\":\"SECRET\"}]}", "messages[0].role: required"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"SECRET\"}]}",
         "messages[0].role: unknown role"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":7}]}",
         "messages[0].content: must be"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"SECRET\"}]},"
         "{\"role\":\"system\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]"
         "}]}",
         "messages[1].content[0].type: not a part this role can hold"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\","
         "\"image_url\":{}}]}]}",
         "messages[0].content[0].image_url.url: required string"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"type\":"
         "\"function\",\"function\":{\"name\":\"SECRET\"}}]}]}",
         "messages[0].tool_calls[0].id: required string"},
        {"{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":\"SECRET\"}]}",
         "messages[0].tool_call_id: required string"},
        {"{\"model\":\"m\",\"messages\":[],\"temperature\":\"SECRET\"}",
         "temperature: must be a number"},
        {"{\"model\":\"m\",\"messages\":[],\"max_tokens\":-1}", "max_tokens: must be"},
        {"{\"model\":\"m\",\"messages\":[],\"seed\":1.5}", "seed: must be an integer"},
        {"{\"model\":\"m\",\"messages\":[],\"stop\":[1]}", "stop: must be"},
        {"{\"model\":\"m\",\"messages\":[],\"tool_choice\":\"SECRET\"}", "tool_choice: must be"},
        {"{\"model\":\"m\",\"messages\":[],\"tools\":[{\"type\":\"function\"}]}",
         "tools[0].function: required object"},
        {"{\"model\":\"m\",\"messages\":[],\"tools\":[{\"type\":\"function\",\"function\":"
         "{\"description\":\"SECRET\"}}]}",
         "tools[0].function.name: required string"},
        {"{\"model\":\"m\",\"messages\":[],\"functions\":[{}]}",
         "functions[0].name: required string"},
        {"{\"model\":\"m\",\"messages\":[],\"response_format\":{\"type\":\"SECRET\"}}",
         "response_format.type: must be"},
        {"{\"model\":\"m\",\"messages\":[],\"stream\":\"yes\"}", "stream: must be a boolean"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct t_req t;
        enum gw_code rc = t_parse_str(&t, bad[i].body);

        if (rc != GW_E_BAD_REQUEST || !t.why.data || !strstr(t.why.data, bad[i].why)) {
            print_error("case %zu: rc %d why \"%s\"\n", i, rc, t.why.data ? t.why.data : "");
            fail();
        }
        assert_null(strstr(t.why.data, "SECRET"));
        assert_int_equal(t.r.n_messages, 0); /* nothing half-built is left */
        t_fini(&t);
    }
}

/* ---- render ---- */

/* The canonical request a Messages client's parse gives (system with a cache hint, an
 * image and a document, thinking in the history, tool use and results with an image,
 * top_k, a thinking budget, metadata, an extra). */
static void
t_messages_request(struct dl_request *r)
{
    static struct dl_part sys[2], u0[3], a1[4], res0[1], res1[2], u2[3];
    static struct dl_message msgs[3];
    static struct dl_tool tools[2];
    static struct gw_str stop[1];
    static struct dl_extra extras[1];

    memset(r, 0, sizeof(*r));
    r->source = DL_SHAPE_MESSAGES;
    r->model = GW_STR_LIT("claude-x");
    sys[0] = (struct dl_part){
        .kind = DL_PART_TEXT, .text = GW_STR_LIT("You are Claude Code."), .cache = true};
    sys[1] = (struct dl_part){.kind = DL_PART_TEXT, .text = GW_STR_LIT("Be brief.")};
    r->system = sys;
    r->n_system = 2;
    u0[0] = (struct dl_part){.kind = DL_PART_TEXT, .text = GW_STR_LIT("Read the file")};
    u0[1] = (struct dl_part){
        .kind = DL_PART_IMAGE, .media_type = GW_STR_LIT("image/png"), .data = GW_STR_LIT("iVBO")};
    u0[2] = (struct dl_part){.kind = DL_PART_DOCUMENT,
                             .media_type = GW_STR_LIT("application/pdf"),
                             .data = GW_STR_LIT("JVBE"),
                             .text = GW_STR_LIT("spec.pdf")};
    a1[0] = (struct dl_part){.kind = DL_PART_REASONING,
                             .text = GW_STR_LIT("thinking..."),
                             .signature = GW_STR_LIT("sig")};
    a1[1] = (struct dl_part){.kind = DL_PART_TEXT, .text = GW_STR_LIT("I will read it.")};
    a1[2] = (struct dl_part){.kind = DL_PART_TOOL_CALL,
                             .id = GW_STR_LIT("toolu_1"),
                             .name = GW_STR_LIT("read"),
                             .arguments = GW_STR_LIT("{\"path\":\"a.txt\"}")};
    a1[3] = (struct dl_part){
        .kind = DL_PART_TOOL_CALL, .id = GW_STR_LIT("toolu_2"), .name = GW_STR_LIT("shot")};
    res0[0] = (struct dl_part){.kind = DL_PART_TEXT, .text = GW_STR_LIT("line 1")};
    res1[0] = (struct dl_part){.kind = DL_PART_TEXT, .text = GW_STR_LIT("ok")};
    res1[1] = (struct dl_part){.kind = DL_PART_IMAGE, .url = GW_STR_LIT("https://x/y.png")};
    u2[0] = (struct dl_part){.kind = DL_PART_TOOL_RESULT,
                             .call_id = GW_STR_LIT("toolu_1"),
                             .content = res0,
                             .n_content = 1};
    u2[1] = (struct dl_part){.kind = DL_PART_TOOL_RESULT,
                             .call_id = GW_STR_LIT("toolu_2"),
                             .content = res1,
                             .n_content = 2,
                             .is_error = true};
    u2[2] = (struct dl_part){.kind = DL_PART_TEXT, .text = GW_STR_LIT("Now summarize.")};
    msgs[0] = (struct dl_message){DL_ROLE_USER, u0, 3, {0}};
    msgs[1] = (struct dl_message){DL_ROLE_ASSISTANT, a1, 4, {0}};
    msgs[2] = (struct dl_message){DL_ROLE_USER, u2, 3, {0}};
    r->messages = msgs;
    r->n_messages = 3;
    tools[0] = (struct dl_tool){.name = GW_STR_LIT("read"),
                                .description = GW_STR_LIT("Reads a file."),
                                .parameters = GW_STR_LIT("{\"type\":\"object\"}"),
                                .cache = true};
    tools[1] = (struct dl_tool){.name = GW_STR_LIT("shot")};
    r->tools = tools;
    r->n_tools = 2;
    r->tool_choice = DL_TOOL_CHOICE_REQUIRED;
    r->parallel_tool_calls = 0;
    r->has_temperature = r->has_top_p = r->has_top_k = true;
    r->temperature = 0.5;
    r->top_p = 0.9;
    r->top_k = 40;
    stop[0] = GW_STR_LIT("\n\nHuman:");
    r->stop = stop;
    r->n_stop = 1;
    r->thinking = true;
    r->thinking_budget = 1024;
    r->stream = true;
    r->user = GW_STR_LIT("user_abc");
    r->metadata = GW_STR_LIT("{\"user_id\":\"user_abc\"}");
    extras[0] = (struct dl_extra){GW_STR_LIT("context_management"), GW_STR_LIT("{\"edits\":[]}")};
    r->extras = extras;
    r->n_extras = 1;
}

static bool
t_dropped(const struct dl_dropped *d, const char *name)
{
    size_t i;

    for (i = 0; i < d->n; i++)
        if (gw_str_eq(d->name[i], gw_str_c(name)))
            return true;
    return false;
}

static void
test_openai_request_render_messages_request_matches_fixture(void **state)
{
    static const char *const dropped[] = {
        "cache_control", "reasoning", "is_error",          "top_k",
        "thinking",      "metadata",  "context_management"};
    struct gw_buf out = {0}, why = {0}, want = {0};
    struct dl_dropped d = {0};
    struct dl_request r;
    size_t i;

    (void)state;
    t_messages_request(&r);
    assert_int_equal(dl_openai_shape.request_render(&r, GW_STR_LIT("gpt-up"), 4096, &d, &out, &why),
                     GW_OK);
    t_fixture("request_render.out.json", &want);
    t_json_eq(out.data, out.len, want.data);
    assert_int_equal(d.n, sizeof(dropped) / sizeof(dropped[0]));
    for (i = 0; i < d.n; i++)
        if (!t_dropped(&d, dropped[i])) {
            print_error("not dropped: %s\n", dropped[i]);
            fail();
        }
    assert_int_equal(why.len, 0);
    gw_buf_fini(&out);
    gw_buf_fini(&want);
    gw_buf_fini(&why);
}

static void
test_openai_request_render_max_tokens_tool_choice_and_effort(void **state)
{
    static struct dl_part text = {.kind = DL_PART_TEXT, .text = GW_STR_LIT("hi")};
    static struct dl_message msg = {DL_ROLE_USER, &text, 1, {0}};
    struct gw_buf out = {0};
    struct dl_dropped d = {0};
    struct dl_request r = {0};

    (void)state;
    r.source = DL_SHAPE_MESSAGES;
    r.messages = &msg;
    r.n_messages = 1;
    r.parallel_tool_calls = 1;
    r.tool_choice = DL_TOOL_CHOICE_NAMED; /* no tools: neither is sent */
    r.tool_choice_name = GW_STR_LIT("x");
    r.has_temperature = true;
    r.temperature = 0.7;
    r.reasoning_effort = GW_STR_LIT("high");
    r.thinking = true;
    assert_int_equal(dl_openai_shape.request_render(&r, GW_STR_LIT("m"), 0, &d, &out, NULL), GW_OK);
    t_json_eq(out.data, out.len,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
              "\"temperature\":0.7,\"reasoning_effort\":\"high\"}");
    assert_non_null(strstr(out.data, "\"temperature\":0.7,")); /* the shortest digits */
    assert_int_equal(d.n, 0);
    gw_buf_reset(&out);
    r.max_output_tokens = 0;
    assert_int_equal(dl_openai_shape.request_render(&r, GW_STR_LIT("m"), 777, &d, &out, NULL),
                     GW_OK);
    assert_non_null(strstr(out.data, "\"max_tokens\":777"));
    gw_buf_reset(&out);
    r.max_output_tokens = 5;
    assert_int_equal(dl_openai_shape.request_render(&r, GW_STR_LIT("m"), 777, &d, &out, NULL),
                     GW_OK);
    assert_non_null(strstr(out.data, "\"max_tokens\":5"));
    gw_buf_fini(&out);
}

static void
test_openai_request_render_text_document_becomes_text(void **state)
{
    static struct dl_part parts[2] = {
        {.kind = DL_PART_DOCUMENT,
         .media_type = GW_STR_LIT("text/plain"),
         .data = GW_STR_LIT("aMOpCnRoZXJl"),
         .text = GW_STR_LIT("notes")},
        {.kind = DL_PART_DOCUMENT,
         .media_type = GW_STR_LIT("text/plain"),
         .data = GW_STR_LIT("not base64!")},
    };
    static struct dl_message msg = {DL_ROLE_USER, parts, 2, {0}};
    struct gw_buf out = {0};
    struct dl_request r = {0};

    (void)state;
    r.source = DL_SHAPE_MESSAGES;
    r.messages = &msg;
    r.n_messages = 1;
    r.parallel_tool_calls = -1;
    assert_int_equal(dl_openai_shape.request_render(&r, GW_STR_LIT("m"), 0, NULL, &out, NULL),
                     GW_OK);
    /* base64 of "h\u00e9\nthere": a text part with its title; not base64: a file part */
    t_json_eq(out.data, out.len,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":["
              "{\"type\":\"text\",\"text\":\"notes\\n\\nh\u00e9\\nthere\"},"
              "{\"type\":\"file\",\"file\":{\"file_data\":\"data:text/plain;base64,not base64!\"}}"
              "]}]}");
    gw_buf_fini(&out);
}

static void
test_openai_request_render_refuses_what_chat_cannot_say(void **state)
{
    static struct dl_part url_doc = {.kind = DL_PART_DOCUMENT,
                                     .url = GW_STR_LIT("https://x/a.pdf")};
    static struct dl_part asst_img = {.kind = DL_PART_IMAGE, .url = GW_STR_LIT("https://x/a.png")};
    static struct dl_part other = {
        .kind = DL_PART_OTHER, .name = GW_STR_LIT("search_result"), .data = GW_STR_LIT("{}")};
    static struct dl_tool hosted = {.name = GW_STR_LIT("web_search"), .hosted = GW_STR_LIT("{}")};
    static const struct {
        unsigned needs;
        struct dl_message msg;
        bool hosted;
        const char *why;
    } cases[] = {
        {DL_NEED_F_N_CHOICES, {DL_ROLE_USER, NULL, 0, {0}}, false, "n:"},
        {DL_NEED_F_LOGPROBS, {DL_ROLE_USER, NULL, 0, {0}}, false, "logprobs:"},
        {DL_NEED_F_HOSTED_TOOLS, {DL_ROLE_USER, NULL, 0, {0}}, false, "tools:"},
        {DL_NEED_F_AUDIO_OUT, {DL_ROLE_USER, NULL, 0, {0}}, false, "modalities: audio"},
        {DL_NEED_F_IMAGE_OUT, {DL_ROLE_USER, NULL, 0, {0}}, false, "modalities: image"},
        {0, {DL_ROLE_USER, &url_doc, 1, {0}}, false, "messages[0].content[0]: a document by URL"},
        {0, {DL_ROLE_ASSISTANT, &asst_img, 1, {0}}, false, "messages[0].content[0]: an image"},
        {0, {DL_ROLE_USER, &other, 1, {0}}, false, "\"search_result\" part cannot be converted"},
        {0, {DL_ROLE_USER, NULL, 0, {0}}, true, "tools[0]: a tool the provider runs"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct gw_buf out = {0}, why = {0};
        struct dl_request r = {0};
        struct dl_dropped d = {0};
        struct dl_message msg = cases[i].msg;

        r.source = DL_SHAPE_MESSAGES;
        r.needs = cases[i].needs;
        r.messages = &msg;
        r.n_messages = 1;
        r.parallel_tool_calls = -1;
        if (cases[i].hosted) {
            r.tools = &hosted;
            r.n_tools = 1;
        }
        assert_int_equal(gw_buf_append_cstr(&out, "keep"), GW_OK);
        assert_int_equal(dl_openai_shape.request_render(&r, GW_STR_LIT("m"), 0, &d, &out, &why),
                         GW_E_UNCONVERTIBLE);
        assert_string_equal(out.data, "keep");
        if (!strstr(why.data, cases[i].why)) {
            print_error("case %zu: why \"%s\"\n", i, why.data);
            fail();
        }
        gw_buf_fini(&out);
        gw_buf_fini(&why);
    }
}

/* A request parsed from Chat goes back to Chat with what the canonical form does not
 * model (the fields behind the needs, custom and provider tools, OTHER parts). */
static void
test_openai_request_render_of_a_chat_request_gives_back_what_canon_keeps_aside(void **state)
{
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};
    json_t *in, *got, *im, *gm;
    struct t_req t;

    (void)state;
    t_parse_fixture(&t, "request_needs.in.json");
    assert_int_equal(dl_openai_shape.request_render(&t.r, GW_STR_LIT("up"), 0, &d, &out, &why),
                     GW_OK);
    in = json_loadb(t.body.data, t.body.len, 0, NULL);
    got = json_loadb(out.data, out.len, 0, NULL);
    assert_non_null(in);
    assert_non_null(got);
    assert_true(json_equal(json_object_get(got, "tools"), json_object_get(in, "tools")));
    assert_int_equal(json_integer_value(json_object_get(got, "n")), 2);
    assert_true(json_is_true(json_object_get(got, "logprobs")));
    assert_true(json_equal(json_object_get(got, "audio"), json_object_get(in, "audio")));
    assert_true(json_equal(json_object_get(got, "web_search_options"),
                           json_object_get(in, "web_search_options")));
    im = json_object_get(in, "messages");
    gm = json_object_get(got, "messages");
    assert_true(json_equal(json_array_get(gm, 0), json_array_get(im, 0)));
    assert_true(json_equal(json_object_get(json_array_get(gm, 1), "tool_calls"),
                           json_object_get(json_array_get(im, 1), "tool_calls")));
    assert_int_equal(d.n, 0);
    json_decref(in);
    json_decref(got);
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    t_fini(&t);
}

/* Parse then render of the full fixture: every canonical field reaches the Chat body. */
static void
test_openai_request_parse_then_render_keeps_the_conversation(void **state)
{
    struct gw_buf out = {0};
    struct dl_dropped d = {0};
    json_t *got, *m;
    struct t_req t;

    (void)state;
    t_parse_fixture(&t, "request_full.in.json");
    assert_int_equal(dl_openai_shape.request_render(&t.r, GW_STR_LIT("up"), 0, &d, &out, NULL),
                     GW_OK);
    got = json_loadb(out.data, out.len, 0, NULL);
    assert_non_null(got);
    m = json_object_get(got, "messages");
    assert_int_equal(json_array_size(m), 6); /* one system message, then the five */
    assert_string_equal(json_string_value(json_object_get(json_array_get(m, 0), "content")),
                        "You are terse.\n\nAnswer in French.");
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_array_get(json_object_get(json_array_get(m, 1), "content"), 2),
                            "image_url"),
            "url")),
        "data:image/png;base64,iVBORw0KGgo=");
    assert_int_equal(json_integer_value(json_object_get(got, "max_tokens")), 200);
    assert_int_equal(json_integer_value(json_object_get(got, "seed")), 42);
    assert_true(json_is_true(json_object_get(
        json_object_get(json_object_get(got, "response_format"), "json_schema"), "strict")));
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(got, "response_format"), "json_schema"),
                            "description")),
                        "The answer.");
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(got, "logit_bias"), "50256")), -100);
    assert_true(
        json_is_true(json_object_get(json_object_get(got, "stream_options"), "include_usage")));
    assert_true(t_dropped(&d, "reasoning")); /* Chat requests carry no reasoning back */
    json_decref(got);
    gw_buf_fini(&out);
    t_fini(&t);
}

/* A refused render drops nothing: the dropped list is as it was (found by
 * tests/fuzz/fuzz_gemini.c: "reasoning" stayed named for a request never sent). */
static void
test_openai_request_render_refused_leaves_the_dropped_list(void **state)
{
    static const char body[] =
        "{\"model\":\"c\",\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":\"q\"},"
        "{\"role\":\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\","
        "\"signature\":\"s\"},{\"type\":\"text\",\"text\":\"a\"}]},{\"role\":\"user\","
        "\"content\":[{\"type\":\"document\",\"source\":{\"type\":\"url\",\"url\":"
        "\"https://x.test/d.pdf\"}}]}]}";
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    assert_int_equal(
        dl_shape_ops(DL_SHAPE_MESSAGES)->request_parse(&a, body, sizeof(body) - 1, &r, &why),
        GW_OK);
    dl_dropped_add(&d, GW_STR_LIT("before"));
    assert_int_equal(dl_openai_shape.request_render(&r, GW_STR_LIT("m"), 0, &d, &out, &why),
                     GW_E_UNCONVERTIBLE);
    assert_int_equal(d.n, 1);
    assert_int_equal(out.len, 0);
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai_request_parse_full_fixture_maps_every_field),
        cmocka_unit_test(test_openai_request_canon_of_a_parsed_request_is_request_parse),
        cmocka_unit_test(test_openai_request_parse_sets_needs_and_keeps_what_canon_cannot_model),
        cmocka_unit_test(test_openai_request_parse_legacy_functions_pair_call_and_result),
        cmocka_unit_test(test_openai_request_parse_allowed_tools_keeps_only_the_allowed),
        cmocka_unit_test(
            test_openai_request_parse_duplicate_keys_last_one_counts_but_read_fields_refused),
        cmocka_unit_test(test_openai_request_parse_safety_identifier_is_the_user_or_an_extra),
        cmocka_unit_test(test_openai_request_parse_refusals_name_the_field_never_the_body),
        cmocka_unit_test(test_openai_request_render_messages_request_matches_fixture),
        cmocka_unit_test(test_openai_request_render_max_tokens_tool_choice_and_effort),
        cmocka_unit_test(test_openai_request_render_text_document_becomes_text),
        cmocka_unit_test(test_openai_request_render_refuses_what_chat_cannot_say),
        cmocka_unit_test(
            test_openai_request_render_of_a_chat_request_gives_back_what_canon_keeps_aside),
        cmocka_unit_test(test_openai_request_parse_then_render_keeps_the_conversation),
        cmocka_unit_test(test_openai_request_render_refused_leaves_the_dropped_list),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
