/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_gemini_request.c - the Gemini request (dialects/gemini_request.c,
 * dialects/gemini_render.c): parse of recorded requests (a gemini-cli style agent turn
 * with thoughts, parallel function calls and responses, images; one with hosted tools,
 * snake_case keys and every generationConfig need) into the canonical fields; parse ->
 * render round trips against golden bodies; the hub both ways (a Gemini client rendered
 * for Chat and Messages upstreams; Chat and Messages clients rendered for a Gemini
 * upstream), with the ids paired across turns; every refusal, drop and duplicate field;
 * countTokens bodies; out of memory at every allocation.
 * See: dialects/gemini_request.c, dialects/gemini_render.c, tests/fixtures/gemini/
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
#include "dialects/canon.h"
#include "dialects/gemini.h"
#include "t_gemini.h"

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

/* The fixture <name> rendered by <shape> must be the golden fixture <golden>. */
static void
t_golden(const struct dl_request *r, enum dl_shape shape, const char *golden, struct dl_dropped *d)
{
    size_t len;
    char *want = t_fixture(golden, &len);

    t_gm_render_as(shape, r, 0, d, want, len);
    free(want);
}

/* <body> through the Gemini parse and the render of <shape>, expecting <want>. */
static void
t_hub(const char *body, enum dl_shape shape, uint64_t spec, struct dl_dropped *d, const char *want)
{
    struct gw_arena a;
    struct dl_request r;

    gw_arena_init(&a);
    t_gm_parse(&a, body, strlen(body), &r);
    t_gm_render_as(shape, &r, spec, d, want, strlen(want));
    gw_arena_fini(&a);
}

/* <body> parsed by <shape> (a client of that shape) and rendered for a Gemini upstream. */
static void
t_to_gemini(enum dl_shape shape, const char *body, uint64_t spec, struct dl_dropped *d,
            const char *want)
{
    struct gw_buf why = {0};
    struct gw_arena a;
    struct dl_request r;

    gw_arena_init(&a);
    if (dl_shape_ops(shape)->request_parse(&a, body, strlen(body), &r, &why) != GW_OK) {
        print_error("the %s shape refused %s: %s\n", dl_shape_name(shape), body,
                    why.data ? why.data : "");
        fail();
    }
    t_gm_render_as(DL_SHAPE_GEMINI, &r, spec, d, want, strlen(want));
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

static void
t_to_gemini_refused(enum dl_shape shape, const char *body, const char *what)
{
    struct gw_buf why = {0};
    struct gw_arena a;
    struct dl_request r;

    gw_arena_init(&a);
    assert_int_equal(dl_shape_ops(shape)->request_parse(&a, body, strlen(body), &r, &why), GW_OK);
    t_gm_render_refused_as(DL_SHAPE_GEMINI, &r, what);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

/* ---- parse ---- */

static void
test_gemini_request_parse_agent_fields(void **state)
{
    size_t len;
    char *body = t_fixture("request_agent.in.json", &len);
    const struct dl_message *m;
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_gm_parse(&a, body, len, &r);
    assert_int_equal(r.source, DL_SHAPE_GEMINI);
    assert_int_equal(r.model.len, 0); /* the URL names it */
    assert_false(r.stream);
    assert_int_equal(r.n_system, 2);
    t_str_is(r.system[1].text, "Answer briefly.");
    assert_int_equal(r.n_messages, 6);
    /* the model turn: one reasoning part for the run of thoughts, signed by its last */
    m = &r.messages[1];
    assert_int_equal(m->role, DL_ROLE_ASSISTANT);
    assert_int_equal(m->n_parts, 3);
    assert_int_equal(m->parts[0].kind, DL_PART_REASONING);
    t_str_is(m->parts[0].text, "The user wants two forecasts. I will call the tool twice.");
    t_str_is(m->parts[0].signature, "c2lnLXRob3VnaHQ=");
    assert_int_equal(m->parts[0].sig_shape, DL_SHAPE_GEMINI);
    /* calls without ids get call_<name>_<turn>_<part>; a signature rides on its call */
    assert_int_equal(m->parts[1].kind, DL_PART_TOOL_CALL);
    t_str_is(m->parts[1].id, "call_get_weather_1_2");
    t_str_is(m->parts[1].arguments, "{\"city\": \"Paris\"}");
    assert_true(t_in(m->parts[1].arguments, body, len));
    t_str_is(m->parts[1].signature, "c2lnLWNhbGw=");
    assert_int_equal(m->parts[1].sig_shape, DL_SHAPE_GEMINI);
    t_str_is(m->parts[2].id, "call_get_weather_1_3");
    assert_int_equal(m->parts[2].signature.len, 0);
    /* each response a tool message, answering the earliest call of its name still open */
    assert_int_equal(r.messages[2].role, DL_ROLE_TOOL);
    assert_int_equal(r.messages[2].parts[0].kind, DL_PART_TOOL_RESULT);
    t_str_is(r.messages[2].parts[0].call_id, "call_get_weather_1_2");
    t_str_is(r.messages[2].parts[0].name, "get_weather");
    assert_int_equal(r.messages[2].parts[0].n_content, 1);
    t_str_is(r.messages[2].parts[0].content[0].text, "{\"temperature\": 21, \"sky\": \"clear\"}");
    t_str_is(r.messages[3].parts[0].call_id, "call_get_weather_1_3");
    /* media */
    m = &r.messages[5];
    assert_int_equal(m->role, DL_ROLE_USER);
    assert_int_equal(m->n_parts, 4);
    assert_int_equal(m->parts[1].kind, DL_PART_IMAGE);
    t_str_is(m->parts[1].media_type, "image/png");
    t_str_is(m->parts[1].data, "iVBORw0KGgo=");
    assert_int_equal(m->parts[2].kind, DL_PART_IMAGE);
    t_str_is(m->parts[2].url, "https://example.com/chart.png");
    assert_int_equal(m->parts[3].kind, DL_PART_DOCUMENT);
    t_str_is(m->parts[3].media_type, "application/pdf");
    /* tools: the OpenAPI schema lower-cased for others, kept as written for Gemini */
    assert_int_equal(r.n_tools, 2);
    t_str_is(r.tools[0].parameters,
             "{\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": "
             "{\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": "
             "[\"city\"]}");
    assert_true(t_in(r.tools[0].source_parameters, body, len));
    assert_int_equal(r.tools[1].source_parameters.len, 0);
    assert_true(t_in(r.tools[1].parameters, body, len)); /* JSON Schema: as written */
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_AUTO);
    assert_true(r.has_temperature && r.temperature == 0.7);
    assert_true(r.has_top_p && r.top_p == 0.95);
    assert_int_equal(r.max_output_tokens, 2048);
    assert_int_equal(r.n_stop, 1);
    assert_true(r.thinking);
    assert_int_equal(r.thinking_budget, 4096);
    assert_int_equal(r.n_extras, 1);
    t_str_is(r.extras[0].name, "generationConfig.thinkingConfig.includeThoughts");
    t_str_is(r.extras[0].raw, "true");
    assert_int_equal(r.needs, 0);
    gw_arena_fini(&a);
    free(body);
}

static void
test_gemini_request_parse_hosted_fields(void **state)
{
    size_t len;
    char *body = t_fixture("request_hosted.in.json", &len);
    struct gw_arena a;
    struct dl_request r;
    static const char *const extras[] = {
        "safetySettings",
        "cachedContent",
        "generationConfig.mediaResolution",
        "generationConfig.candidateCount",
        "generationConfig.responseLogprobs",
        "generationConfig.logprobs",
        "generationConfig.responseModalities",
        "generationConfig.thinkingConfig.includeThoughts",
        "toolConfig.functionCallingConfig.mode",
        "toolConfig.retrievalConfig",
    };
    size_t k;

    (void)state;
    gw_arena_init(&a);
    t_gm_parse(&a, body, len, &r); /* snake_case keys read as their lowerCamel twins */
    assert_int_equal(r.n_system, 1);
    assert_int_equal(r.n_messages, 3);
    /* parts the hub does not model, kept whole and named by their member */
    assert_int_equal(r.messages[1].parts[0].kind, DL_PART_OTHER);
    t_str_is(r.messages[1].parts[0].name, "executableCode");
    t_str_is(r.messages[1].parts[1].name, "codeExecutionResult");
    assert_int_equal(r.messages[1].parts[2].kind, DL_PART_TEXT);
    t_str_is(r.messages[2].parts[0].name, "videoMetadata");
    assert_true(t_in(r.messages[2].parts[0].data, body, len));
    /* every member of a tool but functionDeclarations is a hosted tool */
    assert_int_equal(r.n_tools, 3);
    t_str_is(r.tools[0].hosted, "{\"googleSearch\":{}}");
    t_str_is(r.tools[2].name, "urlContext");
    assert_int_equal(r.needs, DL_NEED_F_HOSTED_TOOLS | DL_NEED_F_N_CHOICES | DL_NEED_F_LOGPROBS |
                                  DL_NEED_F_IMAGE_OUT);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_AUTO); /* VALIDATED */
    /* the response schema lower-cased, data (an example) left as it is */
    assert_int_equal(r.format, DL_FORMAT_JSON_SCHEMA);
    t_str_is(r.format_schema, "{\"type\": \"array\", \"items\": {\"type\": \"object\", "
                              "\"properties\": {\"name\": {\"type\": \"string\"}, \"type\": "
                              "{\"type\": \"string\", \"example\": {\"type\": \"OBJECT\"}}}}}");
    assert_true(t_in(r.format_source_schema, body, len));
    t_str_is(r.reasoning_effort, "high");
    assert_true(r.thinking);
    assert_true(r.has_seed && r.seed == 42);
    assert_true(r.has_top_k && r.top_k == 40);
    assert_true(r.has_frequency && r.frequency_penalty == -0.25);
    assert_int_equal(r.n_extras, sizeof(extras) / sizeof(extras[0]));
    for (k = 0; k < r.n_extras; k++)
        t_str_is(r.extras[k].name, extras[k]);
    gw_arena_fini(&a);
    free(body);
}

/* ---- round trips ---- */

/* <fixture> parsed and rendered for Gemini is <golden>, and a fixed point. */
static void
t_own_round_trip(const char *fixture, const char *golden)
{
    struct gw_buf out = {0}, again = {0}, why = {0};
    struct dl_dropped d = {0};
    struct gw_arena a, b;
    struct dl_request r, r2;
    size_t len;
    char *body = t_fixture(fixture, &len);

    gw_arena_init(&a);
    gw_arena_init(&b);
    t_gm_parse(&a, body, len, &r);
    t_golden(&r, DL_SHAPE_GEMINI, golden, &d);
    assert_int_equal(d.n, 0); /* the same shape takes everything */
    assert_int_equal(dl_gemini_shape.request_render(&r, GW_STR_LIT("m"), 0, NULL, &out, &why),
                     GW_OK);
    t_gm_parse(&b, out.data, out.len, &r2);
    assert_int_equal(dl_gemini_shape.request_render(&r2, GW_STR_LIT("m"), 0, NULL, &again, &why),
                     GW_OK);
    assert_int_equal(again.len, out.len);
    assert_memory_equal(again.data, out.data, out.len);
    gw_buf_fini(&out);
    gw_buf_fini(&again);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
    gw_arena_fini(&b);
    free(body);
}

static void
test_gemini_request_round_trip_agent(void **state)
{
    (void)state;
    t_own_round_trip("request_agent.in.json", "request_agent.gemini.json");
}

static void
test_gemini_request_round_trip_hosted(void **state)
{
    (void)state;
    t_own_round_trip("request_hosted.in.json", "request_hosted.gemini.json");
}

/* The agent request of a Gemini client, for Chat and Messages upstreams. */
static void
test_gemini_client_through_the_hub_to_chat_and_messages(void **state)
{
    size_t len;
    char *body = t_fixture("request_agent.in.json", &len);
    struct dl_dropped d = {0};
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_gm_parse(&a, body, len, &r);
    t_golden(&r, DL_SHAPE_CHAT, "request_agent.chat.json", &d);
    /* Gemini's signed thoughts mean nothing to others; includeThoughts has no field */
    assert_true(t_gm_dropped_has(&d, "reasoning"));
    assert_true(t_gm_dropped_has(&d, "generationConfig.thinkingConfig.includeThoughts"));
    memset(&d, 0, sizeof(d));
    t_golden(&r, DL_SHAPE_MESSAGES, "request_agent.messages.json", &d);
    assert_true(t_gm_dropped_has(&d, "reasoning"));
    assert_true(t_gm_dropped_has(&d, "top_p"));
    gw_arena_fini(&a);
    free(body);
}

/* ---- refusals ---- */

static void
test_gemini_request_refuses_what_is_not_a_gemini_request(void **state)
{
    (void)state;
    t_gm_parse_refused("", "body: empty");
    t_gm_parse_refused("[1]", "body: must be a JSON object");
    t_gm_parse_refused("{\"contents\":[}", "body: not valid JSON at line 1 column 14");
    t_gm_parse_refused("{}", "contents: required array");
    t_gm_parse_refused("{\"contents\":{}}", "contents: required array");
    t_gm_parse_refused("{\"contents\":[1]}", "contents[0]: must be an object");
    t_gm_parse_refused("{\"contents\":[{\"role\":\"system\",\"parts\":[]}]}",
                       "contents[0].role: must be user or model");
    t_gm_parse_refused("{\"contents\":[{\"parts\":{}}]}", "contents[0].parts: must be an array");
    t_gm_parse_refused("{\"contents\":[{\"parts\":[\"hi\"]}]}",
                       "contents[0].parts[0]: must be an object");
    t_gm_parse_refused("{\"contents\":[{\"parts\":[{}]}]}",
                       "contents[0].parts[0]: needs one of text");
    t_gm_parse_refused("{\"contents\":[{\"parts\":[{\"text\":1}]}]}",
                       "contents[0].parts[0].text: must be a string");
    t_gm_parse_refused("{\"contents\":[{\"parts\":[{\"text\":\"a\",\"thought\":1}]}]}",
                       "contents[0].parts[0].thought: must be a boolean");
    t_gm_parse_refused("{\"contents\":[{\"parts\":[{\"text\":\"a\",\"inlineData\":{\"mimeType\":"
                       "\"image/png\",\"data\":\"x\"}}]}]}",
                       "contents[0].parts[0]: a part holds one of");
    t_gm_parse_refused("{\"contents\":[{\"parts\":[{\"inlineData\":{\"data\":\"x\"}}]}]}",
                       "contents[0].parts[0].inlineData.mimeType: required string");
    t_gm_parse_refused("{\"contents\":[{\"parts\":[{\"fileData\":{\"mimeType\":\"image/png\"}}]}]}",
                       "contents[0].parts[0].fileData.fileUri: required string");
    t_gm_parse_refused("{\"contents\":[{\"parts\":[{\"functionCall\":{\"name\":\"f\"}}]}]}",
                       "contents[0].parts[0].functionCall: belongs in a model turn");
    t_gm_parse_refused("{\"contents\":[{\"role\":\"model\",\"parts\":[{\"functionCall\":{}}]}]}",
                       "contents[0].parts[0].functionCall.name: required string");
    t_gm_parse_refused("{\"contents\":[{\"role\":\"model\",\"parts\":[{\"functionCall\":{\"name\":"
                       "\"f\",\"args\":[1]}}]}]}",
                       "contents[0].parts[0].functionCall.args: must be an object");
    t_gm_parse_refused("{\"contents\":[{\"role\":\"model\",\"parts\":[{\"functionResponse\":{"
                       "\"name\":\"f\"}}]}]}",
                       "contents[0].parts[0].functionResponse: belongs in a user turn");
    t_gm_parse_refused("{\"contents\":[{\"parts\":[{\"functionResponse\":{\"name\":\"f\","
                       "\"response\":\"x\"}}]}]}",
                       "contents[0].parts[0].functionResponse.response: must be an object");
    t_gm_parse_refused("{\"contents\":[],\"systemInstruction\":1}",
                       "systemInstruction: must be a content object");
    t_gm_parse_refused("{\"contents\":[],\"systemInstruction\":{\"parts\":[{\"inlineData\":{"
                       "\"mimeType\":\"image/png\",\"data\":\"x\"}}]}}",
                       "systemInstruction.parts[0]: a system instruction holds text parts only");
    t_gm_parse_refused("{\"contents\":[],\"tools\":{}}", "tools: must be an array");
    t_gm_parse_refused("{\"contents\":[],\"tools\":[{\"functionDeclarations\":[{}]}]}",
                       "tools[0].functionDeclarations[0].name: required string");
    t_gm_parse_refused("{\"contents\":[],\"tools\":[{\"functionDeclarations\":[{\"name\":\"f\","
                       "\"parameters\":{},\"parametersJsonSchema\":{}}]}]}",
                       "parameters and parametersJsonSchema cannot both be given");
    t_gm_parse_refused("{\"contents\":[],\"toolConfig\":{\"functionCallingConfig\":{\"mode\":"
                       "\"SOMETIMES\"}}}",
                       "toolConfig.functionCallingConfig.mode: must be AUTO, ANY, NONE or "
                       "VALIDATED");
    t_gm_parse_refused("{\"contents\":[],\"generationConfig\":{\"temperature\":\"hot\"}}",
                       "generationConfig.temperature: must be a number");
    t_gm_parse_refused("{\"contents\":[],\"generationConfig\":{\"maxOutputTokens\":0}}",
                       "generationConfig.maxOutputTokens: must be an integer of at least 1");
    t_gm_parse_refused("{\"contents\":[],\"generationConfig\":{\"topK\":1.5}}",
                       "generationConfig.topK: must be an integer");
    t_gm_parse_refused("{\"contents\":[],\"generationConfig\":{\"stopSequences\":[1]}}",
                       "generationConfig.stopSequences[0]: must be a string");
    t_gm_parse_refused("{\"contents\":[],\"generationConfig\":{\"thinkingConfig\":{"
                       "\"thinkingBudget\":-2}}}",
                       "generationConfig.thinkingConfig.thinkingBudget: must be an integer of at "
                       "least -1");
    t_gm_parse_refused("{\"contents\":[],\"generationConfig\":{\"responseSchema\":{},"
                       "\"responseJsonSchema\":{}}}",
                       "responseSchema and responseJsonSchema cannot both be given");
}

static void
test_gemini_request_refusal_never_quotes_the_body(void **state)
{
    struct gw_buf why = {0};
    struct gw_arena a;
    struct dl_request r;
    const char *body = "{\"contents\":[{\"role\":\"secret-token-123\"}]}";

    (void)state;
    gw_arena_init(&a);
    assert_int_equal(dl_gemini_shape.request_parse(&a, body, strlen(body), &r, &why),
                     GW_E_BAD_REQUEST);
    assert_null(strstr(why.data, "secret"));
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

static void
test_gemini_request_refuses_a_read_field_given_twice(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    const char *last = "{\"contents\":[],\"labels\":{\"a\":\"1\"},\"labels\":{\"b\":\"2\"}}";
    const char *model = "{\"model\":\"x\",\"model\":\"y\",\"contents\":[]}";

    (void)state;
    t_gm_parse_refused("{\"contents\":[],\"contents\":[]}", "duplicate key \"contents\"");
    /* either spelling is the same field */
    t_gm_parse_refused("{\"contents\":[],\"systemInstruction\":\"a\",\"system_instruction\":\"b\"}",
                       "duplicate key \"systemInstruction\"");
    t_gm_parse_refused("{\"contents\":[],\"generation_config\":{},\"generationConfig\":{}}",
                       "duplicate key \"generationConfig\"");
    t_gm_parse_refused("{\"tools\":[],\"tools\":[],\"contents\":[]}", "duplicate key \"tools\"");
    t_gm_parse_refused("{\"toolConfig\":{},\"contents\":[],\"tool_config\":{}}",
                       "duplicate key \"toolConfig\"");
    /* the JSON is checked before the duplicate is named */
    t_gm_parse_refused("{\"contents\":[],\"contents\":[],", "not valid JSON");
    /* other keys: the last counts, and the model in the body is not read */
    gw_arena_init(&a);
    t_gm_parse(&a, last, strlen(last), &r);
    assert_int_equal(r.n_extras, 1);
    t_str_is(r.extras[0].raw, "{\"b\":\"2\"}");
    t_gm_parse(&a, model, strlen(model), &r);
    assert_int_equal(r.n_extras, 0);
    assert_int_equal(r.model.len, 0);
    gw_arena_fini(&a);
}

/* ---- ids, pairs and runs ---- */

static void
test_gemini_request_ids_pair_calls_and_responses(void **state)
{
    struct gw_arena a;
    struct dl_request r, r2;
    /* ids given: kept and paired by id, whatever the order of the responses */
    const char *given =
        "{\"contents\":[{\"parts\":[{\"text\":\"go\"}]},{\"role\":\"model\",\"parts\":[{"
        "\"functionCall\":{\"id\":\"A\",\"name\":\"f\",\"args\":{}}},{\"functionCall\":{\"id\":"
        "\"B\",\"name\":\"f\",\"args\":{}}}]},{\"role\":\"user\",\"parts\":[{\"functionResponse\":"
        "{\"id\":\"B\",\"name\":\"f\",\"response\":{\"r\":2}}},{\"functionResponse\":{\"id\":\"A\","
        "\"name\":\"f\",\"response\":{\"r\":1}}}]}]}";
    /* no ids, and ids of the client's own (gemini-cli) that match no call: by name, the
     * earliest call still unanswered; streamed model contents make one assistant turn */
    const char *named =
        "{\"contents\":[{\"parts\":[{\"text\":\"go\"}]},{\"role\":\"model\",\"parts\":[{"
        "\"functionCall\":{\"name\":\"f\",\"args\":{\"n\":1}}}]},{\"role\":\"model\",\"parts\":[{"
        "\"functionCall\":{\"name\":\"g\"}},{\"functionCall\":{\"name\":\"f\",\"args\":{\"n\":2}}}"
        "]},{\"role\":\"user\",\"parts\":[{\"functionResponse\":{\"id\":\"f-1700000000-x\","
        "\"name\":\"f\",\"response\":{}}},{\"functionResponse\":{\"name\":\"f\",\"response\":{}}},"
        "{\"functionResponse\":{\"name\":\"g\",\"response\":{}}},{\"functionResponse\":{\"name\":"
        "\"h\",\"response\":{}}},{\"text\":\"and?\"}]}]}";

    (void)state;
    gw_arena_init(&a);
    t_gm_parse(&a, given, strlen(given), &r);
    assert_int_equal(r.n_messages, 4);
    t_str_is(r.messages[1].parts[0].id, "A");
    t_str_is(r.messages[2].parts[0].call_id, "B");
    t_str_is(r.messages[3].parts[0].call_id, "A");
    t_gm_parse(&a, named, strlen(named), &r);
    assert_int_equal(r.n_messages, 7);
    assert_int_equal(r.messages[1].n_parts, 3);
    t_str_is(r.messages[1].parts[0].id, "call_f_1_0");
    t_str_is(r.messages[1].parts[1].id, "call_g_2_0");
    t_str_is(r.messages[1].parts[2].id, "call_f_2_1");
    t_str_is(r.messages[2].parts[0].call_id, "call_f_1_0");
    t_str_is(r.messages[3].parts[0].call_id, "call_f_2_1");
    t_str_is(r.messages[4].parts[0].call_id, "call_g_2_0");
    /* a response no call asked for keeps a stable id of its own position */
    t_str_is(r.messages[5].parts[0].call_id, "call_h_3_3");
    t_str_is(r.messages[5].parts[0].name, "h");
    assert_int_equal(r.messages[6].role, DL_ROLE_USER);
    /* the same history, the same ids */
    t_gm_parse(&a, named, strlen(named), &r2);
    t_str_is(r2.messages[3].parts[0].call_id, "call_f_2_1");
    gw_arena_fini(&a);
}

static void
test_gemini_request_thought_runs_and_signatures(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    const char *body =
        "{\"contents\":[{\"parts\":[{\"text\":\"q\"}]},{\"role\":\"model\",\"parts\":[{\"text\":"
        "\"a\",\"thought\":true},{\"text\":\"b\",\"thought\":true}]},{\"role\":\"model\",\"parts\":"
        "[{\"text\":\"c\",\"thought\":true},{\"thought\":true,\"thoughtSignature\":\"S1\"},{"
        "\"text\":\"d\",\"thought\":true},{\"text\":\"answer\",\"thoughtSignature\":\"S2\"},{"
        "\"text\":\"x\",\"thought\":true,\"thoughtSignature\":\"gw1.messages.M1\"}]}]}";
    const char *want =
        "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"q\"}]},{\"role\":\"model\","
        "\"parts\":[{\"text\":\"abc\",\"thought\":true,\"thoughtSignature\":\"S1\"},{\"text\":"
        "\"d\",\"thought\":true},{\"text\":\"answer\",\"thoughtSignature\":\"S2\"}]}]}";
    struct dl_dropped d = {0};

    (void)state;
    gw_arena_init(&a);
    t_gm_parse(&a, body, strlen(body), &r);
    assert_int_equal(r.n_messages, 2);
    assert_int_equal(r.messages[1].n_parts, 5);
    /* a run of thoughts across streamed contents, closed by the part with a signature */
    t_str_is(r.messages[1].parts[0].text, "abc");
    t_str_is(r.messages[1].parts[0].signature, "S1");
    /* an unsigned run before a signed plain text stays apart: the text's signature has
     * a part of its own before it */
    t_str_is(r.messages[1].parts[1].text, "d");
    assert_int_equal(r.messages[1].parts[1].signature.len, 0);
    assert_int_equal(r.messages[1].parts[2].kind, DL_PART_REASONING);
    assert_int_equal(r.messages[1].parts[2].text.len, 0);
    t_str_is(r.messages[1].parts[2].signature, "S2");
    assert_int_equal(r.messages[1].parts[3].kind, DL_PART_TEXT);
    /* a signature another shape's upstream made comes back with its origin */
    t_str_is(r.messages[1].parts[4].signature, "M1");
    assert_int_equal(r.messages[1].parts[4].sig_shape, DL_SHAPE_MESSAGES);
    /* for Gemini: the text's signature back on the text, the foreign one dropped */
    t_gm_render_as(DL_SHAPE_GEMINI, &r, 0, &d, want, strlen(want));
    assert_true(t_gm_dropped_has(&d, "reasoning"));
    gw_arena_fini(&a);
}

static void
test_gemini_request_tool_config_modes(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    char body[512];
    const char *tools = "\"tools\":[{\"functionDeclarations\":[{\"name\":\"a\"},{\"name\":\"b\"},"
                        "{\"name\":\"c\"}]},{\"googleSearch\":{}}]";

    (void)state;
    gw_arena_init(&a);
    snprintf(body, sizeof(body),
             "{\"contents\":[],%s,\"toolConfig\":{\"functionCallingConfig\":{\"mode\":\"ANY\","
             "\"allowedFunctionNames\":[\"b\"]}}}",
             tools);
    t_gm_parse(&a, body, strlen(body), &r);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_NAMED);
    t_str_is(r.tool_choice_name, "b");
    assert_int_equal(r.n_tools, 4);
    /* more than one allowed name: the tools the model may call are those */
    snprintf(body, sizeof(body),
             "{\"toolConfig\":{\"functionCallingConfig\":{\"mode\":\"ANY\","
             "\"allowedFunctionNames\":[\"c\",\"a\"]}},\"contents\":[],%s}",
             tools);
    t_gm_parse(&a, body, strlen(body), &r);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_REQUIRED);
    assert_int_equal(r.n_tools, 3);
    t_str_is(r.tools[0].name, "a");
    t_str_is(r.tools[1].name, "c");
    assert_true(r.tools[2].hosted.len > 0);
    snprintf(body, sizeof(body),
             "{\"contents\":[],%s,\"toolConfig\":{\"functionCallingConfig\":{\"mode\":\"NONE\"}}}",
             tools);
    t_gm_parse(&a, body, strlen(body), &r);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_NONE);
    snprintf(body, sizeof(body),
             "{\"contents\":[],%s,\"toolConfig\":{\"functionCallingConfig\":{\"mode\":"
             "\"MODE_UNSPECIFIED\"}}}",
             tools);
    t_gm_parse(&a, body, strlen(body), &r);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_UNSET);
    snprintf(body, sizeof(body),
             "{\"contents\":[],%s,\"toolConfig\":{\"functionCallingConfig\":{"
             "\"mode\":\"ANY\"}}}",
             tools);
    t_gm_parse(&a, body, strlen(body), &r);
    assert_int_equal(r.tool_choice, DL_TOOL_CHOICE_REQUIRED);
    gw_arena_fini(&a);
}

static void
test_gemini_request_generation_config_kinds(void **state)
{
    struct gw_arena a;
    struct dl_request r;
    const char *json = "{\"contents\":[],\"generationConfig\":{\"responseMimeType\":"
                       "\"application/json\",\"candidateCount\":1}}";
    const char *js = "{\"contents\":[],\"generationConfig\":{\"responseMimeType\":"
                     "\"application/json\",\"responseJsonSchema\":{\"type\":\"object\"}}}";
    const char *off = "{\"contents\":[],\"generationConfig\":{\"thinkingConfig\":{"
                      "\"thinkingBudget\":0}}}";
    const char *dyn = "{\"contents\":[],\"generationConfig\":{\"thinkingConfig\":{"
                      "\"thinkingBudget\":-1,\"thinkingLevel\":\"low\"}}}";
    const char *en = "{\"contents\":[],\"generationConfig\":{\"responseMimeType\":\"text/x.enum\","
                     "\"responseSchema\":{\"type\":\"STRING\",\"enum\":[\"a\"]}}}";
    const char *sys = "{\"contents\":[],\"systemInstruction\":\"plain\"}";

    (void)state;
    gw_arena_init(&a);
    t_gm_parse(&a, json, strlen(json), &r);
    assert_int_equal(r.format, DL_FORMAT_JSON_OBJECT);
    assert_int_equal(r.needs, 0); /* one candidate is what every shape gives */
    assert_int_equal(r.n_extras, 0);
    t_gm_parse(&a, js, strlen(js), &r);
    assert_int_equal(r.format, DL_FORMAT_JSON_SCHEMA);
    t_str_is(r.format_schema, "{\"type\":\"object\"}");
    assert_int_equal(r.format_source_schema.len, 0);
    /* a budget of 0 (off) or -1 (dynamic) has no canonical budget: kept for Gemini */
    t_gm_parse(&a, off, strlen(off), &r);
    assert_false(r.thinking);
    assert_int_equal(r.n_extras, 1);
    t_str_is(r.extras[0].name, "generationConfig.thinkingConfig.thinkingBudget");
    t_gm_parse(&a, dyn, strlen(dyn), &r);
    assert_true(r.thinking);
    assert_int_equal(r.thinking_budget, 0);
    t_str_is(r.reasoning_effort, "low");
    /* another output type takes its schema along, as written */
    t_gm_parse(&a, en, strlen(en), &r);
    assert_int_equal(r.format, DL_FORMAT_TEXT);
    assert_int_equal(r.n_extras, 2);
    t_str_is(r.extras[0].name, "generationConfig.responseMimeType");
    t_str_is(r.extras[1].name, "generationConfig.responseSchema");
    t_gm_parse(&a, sys, strlen(sys), &r);
    assert_int_equal(r.n_system, 1);
    t_str_is(r.system[0].text, "plain");
    gw_arena_fini(&a);
}

/* ---- render: other shapes' clients for a Gemini upstream ---- */

static void
test_gemini_render_chat_client_conversation(void **state)
{
    struct dl_dropped d = {0};

    (void)state;
    /* system, turns, tools, named choice, results named by their call, the first call of a
     * turn signed with the skip value, ids not sent, the model's default max output */
    t_to_gemini(
        DL_SHAPE_CHAT,
        "{\"model\":\"gpt-x\",\"user\":\"u1\",\"parallel_tool_calls\":false,\"prompt_cache_key\":"
        "\"k\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\","
        "\"content\":[{\"type\":\"text\",\"text\":\"look\"},{\"type\":\"image_url\",\"image_url\":"
        "{\"url\":\"data:image/jpeg;base64,AAAA\",\"detail\":\"high\"}},{\"type\":\"image_url\","
        "\"image_url\":{\"url\":\"https://x.test/a.webp?s=1\"}}]},{\"role\":\"assistant\","
        "\"content\":null,\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{"
        "\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}},{\"id\":\"c2\",\"type\":\"function\","
        "\"function\":{\"name\":\"g\",\"arguments\":\"\"}}]},{\"role\":\"tool\",\"tool_call_id\":"
        "\"c1\",\"content\":\"{\\\"ok\\\":true}\"},{\"role\":\"tool\",\"tool_call_id\":\"c2\","
        "\"content\":\"plain text\"}],\"tools\":[{\"type\":\"function\",\"function\":{\"name\":"
        "\"f\",\"description\":\"F\",\"parameters\":{\"type\":\"object\"},\"strict\":true}},{"
        "\"type\":\"function\",\"function\":{\"name\":\"g\"}}],\"tool_choice\":{\"type\":"
        "\"function\",\"function\":{\"name\":\"f\"}}}",
        4000, &d,
        "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"look\"},{\"inlineData\":{"
        "\"mimeType\":\"image/jpeg\",\"data\":\"AAAA\"}},{\"fileData\":{\"mimeType\":"
        "\"image/webp\",\"fileUri\":\"https://x.test/a.webp?s=1\"}}]},{\"role\":\"model\","
        "\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{\"a\":1}},\"thoughtSignature\":"
        "\"skip_thought_signature_validator\"},{\"functionCall\":{\"name\":\"g\",\"args\":{}}}]},"
        "{\"role\":\"user\",\"parts\":[{\"functionResponse\":{\"name\":\"f\",\"response\":{"
        "\"ok\":true}}},{\"functionResponse\":{\"name\":\"g\",\"response\":{\"output\":"
        "\"plain text\"}}}]}],\"systemInstruction\":{\"parts\":[{\"text\":\"be brief\"}]},"
        "\"tools\":[{\"functionDeclarations\":[{\"name\":\"f\",\"description\":\"F\","
        "\"parametersJsonSchema\":{\"type\":\"object\"}},{\"name\":\"g\"}]}],\"toolConfig\":{"
        "\"functionCallingConfig\":{\"mode\":\"ANY\",\"allowedFunctionNames\":[\"f\"]}},"
        "\"generationConfig\":{\"maxOutputTokens\":4000}}");
    assert_true(t_gm_dropped_has(&d, "detail"));
    assert_true(t_gm_dropped_has(&d, "strict"));
    assert_true(t_gm_dropped_has(&d, "user"));
    assert_true(t_gm_dropped_has(&d, "parallel_tool_calls"));
    assert_true(t_gm_dropped_has(&d, "prompt_cache_key"));
    assert_int_equal(d.n, 5);
}

static void
test_gemini_render_chat_client_sampling_and_format(void **state)
{
    struct dl_dropped d = {0};

    (void)state;
    t_to_gemini(
        DL_SHAPE_CHAT,
        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
        "\"temperature\":1.5,\"top_p\":0.5,\"seed\":7,\"presence_penalty\":0.25,"
        "\"frequency_penalty\":0.5,\"stop\":[\"a\",\"\",\"b\"],\"max_completion_tokens\":10,"
        "\"reasoning_effort\":\"medium\",\"response_format\":{\"type\":\"json_schema\","
        "\"json_schema\":{\"name\":\"s\",\"strict\":true,\"schema\":{\"type\":\"object\"}}},"
        "\"logit_bias\":{\"1\":2},\"stream\":true}",
        99, &d,
        "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"x\"}]}],"
        "\"generationConfig\":{\"temperature\":1.5,\"topP\":0.5,\"maxOutputTokens\":10,"
        "\"stopSequences\":[\"a\",\"b\"],\"seed\":7,\"presencePenalty\":0.25,"
        "\"frequencyPenalty\":0.5,\"responseMimeType\":\"application/json\","
        "\"responseJsonSchema\":{\"type\":\"object\"},\"thinkingConfig\":{"
        "\"thinkingBudget\":8192,\"includeThoughts\":true}}}");
    assert_true(t_gm_dropped_has(&d, "logit_bias"));
    memset(&d, 0, sizeof(d));
    /* JSON mode; an effort without a size; no max output at all */
    t_to_gemini(DL_SHAPE_CHAT,
                "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                "\"reasoning_effort\":\"none\",\"response_format\":{\"type\":\"json_object\"}}",
                0, &d,
                "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"x\"}]}],"
                "\"generationConfig\":{\"responseMimeType\":\"application/json\"}}");
    assert_true(t_gm_dropped_has(&d, "reasoning_effort"));
    /* nothing to configure: no generationConfig */
    t_to_gemini(DL_SHAPE_CHAT,
                "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}", 0, NULL,
                "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"x\"}]}]}");
    /* tool_choice without tools: dropped */
    memset(&d, 0, sizeof(d));
    t_to_gemini(DL_SHAPE_CHAT,
                "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                "\"tool_choice\":\"none\"}",
                0, &d, "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"x\"}]}]}");
    assert_true(t_gm_dropped_has(&d, "tool_choice"));
}

static void
test_gemini_render_messages_client_thinking_and_results(void **state)
{
    struct dl_dropped d = {0};

    (void)state;
    /* Anthropic thinking means nothing to Gemini; a Gemini signature a Messages client got
     * from the gateway goes back where it came from; results keep their call's name */
    t_to_gemini(
        DL_SHAPE_MESSAGES,
        "{\"model\":\"c\",\"max_tokens\":100,\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"
        "2000},\"system\":[{\"type\":\"text\",\"text\":\"S\",\"cache_control\":{\"type\":"
        "\"ephemeral\"}}],\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
        "\"assistant\",\"content\":[{\"type\":\"thinking\",\"thinking\":\"anthropic\","
        "\"signature\":\"A1\"},{\"type\":\"thinking\",\"thinking\":\"gemini\",\"signature\":"
        "\"gw1.gemini.G1\"},{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}]},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"t1\","
        "\"is_error\":true,\"content\":[{\"type\":\"text\",\"text\":\"boom\"},{\"type\":\"image\","
        "\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"PNG\"}},{\"type\":"
        "\"image\",\"source\":{\"type\":\"url\",\"url\":\"https://x.test/i.png\"}}]}]}]}",
        0, &d,
        "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"q\"}]},{\"role\":\"model\","
        "\"parts\":[{\"text\":\"gemini\",\"thought\":true,\"thoughtSignature\":\"G1\"},{"
        "\"functionCall\":{\"name\":\"f\",\"args\":{}},\"thoughtSignature\":"
        "\"skip_thought_signature_validator\"}]},{\"role\":\"user\",\"parts\":[{"
        "\"functionResponse\":{\"name\":\"f\",\"response\":{\"error\":\"boom\"},\"parts\":[{"
        "\"inlineData\":{\"mimeType\":\"image/png\",\"data\":\"PNG\"}}]}}]}],"
        "\"systemInstruction\":{\"parts\":[{\"text\":\"S\"}]},\"generationConfig\":{"
        "\"maxOutputTokens\":100,\"thinkingConfig\":{\"thinkingBudget\":2000,"
        "\"includeThoughts\":true}}}");
    assert_true(t_gm_dropped_has(&d, "reasoning"));
    assert_true(t_gm_dropped_has(&d, "cache_control"));
    assert_true(t_gm_dropped_has(&d, "tool result content"));
}

static void
test_gemini_render_refuses_what_gemini_cannot_carry(void **state)
{
    (void)state;
    t_to_gemini_refused(DL_SHAPE_CHAT,
                        "{\"model\":\"m\",\"n\":2,\"messages\":[{\"role\":\"user\",\"content\":"
                        "\"x\"}]}",
                        "n: more than one choice");
    t_to_gemini_refused(DL_SHAPE_CHAT,
                        "{\"model\":\"m\",\"logprobs\":true,\"messages\":[{\"role\":\"user\","
                        "\"content\":\"x\"}]}",
                        "logprobs");
    t_to_gemini_refused(DL_SHAPE_CHAT,
                        "{\"model\":\"m\",\"modalities\":[\"text\",\"audio\"],\"messages\":[{"
                        "\"role\":\"user\",\"content\":\"x\"}]}",
                        "audio output");
    t_to_gemini_refused(DL_SHAPE_CHAT,
                        "{\"model\":\"m\",\"tools\":[{\"type\":\"web_search\"}],\"messages\":[{"
                        "\"role\":\"user\",\"content\":\"x\"}]}",
                        "hosted tools");
    t_to_gemini_refused(DL_SHAPE_CHAT,
                        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                        "\"input_audio\",\"input_audio\":{\"data\":\"x\",\"format\":\"wav\"}}]}]}",
                        "input_audio parts cannot be sent to a Gemini model");
    t_to_gemini_refused(DL_SHAPE_CHAT,
                        "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"tool_call_id\":"
                        "\"nowhere\",\"content\":\"x\"}]}",
                        "it needs the function's name");
    t_to_gemini_refused(DL_SHAPE_CHAT,
                        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"},{"
                        "\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c\",\"type\":"
                        "\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]}",
                        "must be a JSON object for a Gemini model");
    t_to_gemini_refused(DL_SHAPE_CHAT,
                        "{\"model\":\"m\",\"stop\":[\"1\",\"2\",\"3\",\"4\",\"5\",\"6\"],"
                        "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}",
                        "at most 5 stop sequences");
    t_to_gemini_refused(DL_SHAPE_CHAT,
                        "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}",
                        "needs at least one message");
    t_to_gemini_refused(DL_SHAPE_CHAT,
                        "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                        "\"image_url\",\"image_url\":{\"url\":\"data:image/png,raw\"}}]}]}",
                        "only base64 data URLs");
}

/* A Gemini client's own fields reach a Gemini renderer only; every other shape names
 * them as dropped or refuses. */
static void
test_gemini_client_fields_only_for_gemini(void **state)
{
    size_t len;
    char *body = t_fixture("request_hosted.in.json", &len);
    struct gw_arena a;
    struct dl_request r;

    (void)state;
    gw_arena_init(&a);
    t_gm_parse(&a, body, len, &r);
    t_gm_render_refused_as(DL_SHAPE_CHAT, &r, "n: more than one choice");
    t_gm_render_refused_as(DL_SHAPE_MESSAGES, &r, "n: an Anthropic model returns one choice");
    r.needs = DL_NEED_F_HOSTED_TOOLS;
    t_gm_render_refused_as(DL_SHAPE_CHAT, &r, "hosted tools");
    /* as if from another shape, Gemini refuses them too */
    r.source = DL_SHAPE_CHAT;
    t_gm_render_refused_as(DL_SHAPE_GEMINI, &r, "hosted tools");
    r.needs = 0;
    r.n_tools = 0;
    t_gm_render_refused_as(DL_SHAPE_GEMINI, &r, "executableCode parts cannot be sent");
    gw_arena_fini(&a);
    free(body);
}

static void
test_gemini_render_own_ids_only_when_the_client_gave_them(void **state)
{
    (void)state;
    t_hub("{\"contents\":[{\"parts\":[{\"text\":\"go\"}]},{\"role\":\"model\",\"parts\":[{"
          "\"functionCall\":{\"id\":\"A\",\"name\":\"f\",\"args\":{}}},{\"functionCall\":{"
          "\"name\":\"g\"}}]},{\"parts\":[{\"functionResponse\":{\"id\":\"A\",\"name\":\"f\","
          "\"response\":{}}},{\"functionResponse\":{\"name\":\"g\",\"response\":{}}}]}]}",
          DL_SHAPE_GEMINI, 0, NULL,
          "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"go\"}]},{\"role\":\"model\","
          "\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{},\"id\":\"A\"}},{"
          "\"functionCall\":{\"name\":\"g\",\"args\":{}}}]},{\"role\":\"user\",\"parts\":[{"
          "\"functionResponse\":{\"name\":\"f\",\"response\":{},\"id\":\"A\"}},{"
          "\"functionResponse\":{\"name\":\"g\",\"response\":{}}}]}]}");
    /* the generated ids pair calls and results for Chat */
    t_hub("{\"contents\":[{\"parts\":[{\"text\":\"go\"}]},{\"role\":\"model\",\"parts\":[{"
          "\"functionCall\":{\"name\":\"g\"}}]},{\"parts\":[{\"functionResponse\":{\"name\":\"g\","
          "\"response\":{\"v\":1}}}]}]}",
          DL_SHAPE_CHAT, 0, NULL,
          "{\"model\":\"up-model\",\"messages\":[{\"role\":\"user\",\"content\":\"go\"},{"
          "\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_g_1_0\","
          "\"type\":\"function\",\"function\":{\"name\":\"g\",\"arguments\":\"{}\"}}]},{\"role\":"
          "\"tool\",\"tool_call_id\":\"call_g_1_0\",\"content\":\"{\\\"v\\\":1}\"}]}");
}

/* ---- countTokens ---- */

static void
test_gemini_count_parse_both_forms(void **state)
{
    struct gw_buf why = {0}, out = {0};
    struct gw_arena a;
    struct dl_request r;
    const char *plain = "{\"contents\":[{\"parts\":[{\"text\":\"hello\"}]}]}";
    const char *wrapped = "{\"generateContentRequest\":{\"model\":\"models/x\",\"contents\":[{"
                          "\"parts\":[{\"text\":\"hi\"}]}],\"systemInstruction\":\"s\"}}";
    const char *both = "{\"contents\":[],\"generateContentRequest\":{\"contents\":[]}}";

    (void)state;
    gw_arena_init(&a);
    assert_int_equal(dl_gemini_count_parse(&a, plain, strlen(plain), &r, &why), GW_OK);
    t_str_is(r.messages[0].parts[0].text, "hello");
    assert_int_equal(dl_gemini_count_parse(&a, wrapped, strlen(wrapped), &r, &why), GW_OK);
    t_str_is(r.messages[0].parts[0].text, "hi");
    assert_int_equal(r.n_system, 1);
    assert_int_equal(r.n_extras, 0);
    assert_int_equal(dl_gemini_count_parse(&a, both, strlen(both), &r, &why), GW_E_BAD_REQUEST);
    assert_non_null(strstr(why.data, "cannot both be given"));
    gw_buf_reset(&why);
    assert_int_equal(dl_gemini_count_parse(&a, "{}", 2, &r, &why), GW_E_BAD_REQUEST);
    assert_non_null(strstr(why.data, "contents: required array"));
    gw_buf_reset(&why);
    assert_int_equal(dl_gemini_count_parse(&a, "{\"generateContentRequest\":1}", 28, &r, &why),
                     GW_E_BAD_REQUEST);
    assert_int_equal(dl_gemini_count_render(42, &out), GW_OK);
    t_json_eq(out.data, out.len, "{\"totalTokens\":42}");
    gw_buf_fini(&why);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

/* ---- out of memory ---- */

static void
test_gemini_request_out_of_memory_is_clean(void **state)
{
    static const char *const fixtures[] = {"request_agent.in.json", "request_hosted.in.json"};
    size_t f;

    (void)state;
    for (f = 0; f < 2; f++) {
        size_t len;
        char *body = t_fixture(fixtures[f], &len);
        unsigned long k;
        bool ok_seen = false;

        for (k = 1; k < 600 && !ok_seen; k++) {
            struct gw_buf out = {0}, why = {0};
            struct dl_request r;
            struct gw_arena a;
            enum gw_code rc;

            gw_arena_init(&a);
            gw_alloc_fail_at(k);
            rc = dl_gemini_shape.request_parse(&a, body, len, &r, &why);
            if (rc == GW_OK)
                rc = dl_gemini_shape.request_render(&r, GW_STR_LIT("m"), 0, NULL, &out, &why);
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
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemini_request_parse_agent_fields),
        cmocka_unit_test(test_gemini_request_parse_hosted_fields),
        cmocka_unit_test(test_gemini_request_round_trip_agent),
        cmocka_unit_test(test_gemini_request_round_trip_hosted),
        cmocka_unit_test(test_gemini_client_through_the_hub_to_chat_and_messages),
        cmocka_unit_test(test_gemini_request_refuses_what_is_not_a_gemini_request),
        cmocka_unit_test(test_gemini_request_refusal_never_quotes_the_body),
        cmocka_unit_test(test_gemini_request_refuses_a_read_field_given_twice),
        cmocka_unit_test(test_gemini_request_ids_pair_calls_and_responses),
        cmocka_unit_test(test_gemini_request_thought_runs_and_signatures),
        cmocka_unit_test(test_gemini_request_tool_config_modes),
        cmocka_unit_test(test_gemini_request_generation_config_kinds),
        cmocka_unit_test(test_gemini_render_chat_client_conversation),
        cmocka_unit_test(test_gemini_render_chat_client_sampling_and_format),
        cmocka_unit_test(test_gemini_render_messages_client_thinking_and_results),
        cmocka_unit_test(test_gemini_render_refuses_what_gemini_cannot_carry),
        cmocka_unit_test(test_gemini_client_fields_only_for_gemini),
        cmocka_unit_test(test_gemini_render_own_ids_only_when_the_client_gave_them),
        cmocka_unit_test(test_gemini_count_parse_both_forms),
        cmocka_unit_test(test_gemini_request_out_of_memory_is_clean),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
