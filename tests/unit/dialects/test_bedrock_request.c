/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_bedrock_request.c - canonical requests rendered as Converse
 * bodies (dialects/bedrock_request.c): a Chat request end to end against the expected
 * Converse body; a Messages request with cache hints, signed and foreign reasoning,
 * thinking and top_k, for a Claude, a Nova and a Llama model; turns merged and refused;
 * every tool choice (none with and without tool blocks in the conversation, stub tools);
 * images and documents; every refusal and drop by name; the output budget.
 * See: dialects/bedrock_request.c, tests/fixtures/bedrock/
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

#include "core/arena.h"
#include "dialects/bedrock-priv.h"
#include "t_messages.h"

#define CLAUDE "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
#define NOVA "amazon.nova-pro-v1:0"
#define LLAMA "meta.llama3-70b-instruct-v1:0"

/* The names of <d>, ", "-separated, in order. */
static void
t_dropped_is(const struct dl_dropped *d, const char *want)
{
    struct gw_buf b = {0};
    size_t i;

    for (i = 0; i < d->n; i++) {
        if (i)
            gw_buf_append_cstr(&b, ", ");
        gw_buf_append_str(&b, d->name[i]);
    }
    if (strcmp(b.len ? b.data : "", want) != 0) {
        print_error("dropped: got \"%s\", want \"%s\"\n", b.len ? b.data : "", want);
        fail();
    }
    gw_buf_fini(&b);
}

/* <body> parsed by the client shape <from>, into <r> in <a>. */
static void
t_parse(enum dl_shape from, struct gw_arena *a, const char *body, size_t len, struct dl_request *r)
{
    struct gw_buf why = {0};

    if (dl_shape_ops(from)->request_parse(a, body, len, r, &why) != GW_OK) {
        print_error("the %s shape refused the body: %s\n", dl_shape_name(from),
                    why.data ? why.data : "");
        fail();
    }
    gw_buf_fini(&why);
}

/* <body> of shape <from> rendered for Bedrock model <model>: the JSON <want>, the
 * dropped names <drops>. */
static void
t_render(enum dl_shape from, const char *body, const char *model, uint64_t spec, const char *want,
         const char *drops)
{
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};
    struct gw_arena a;
    struct dl_request r;
    enum gw_code rc;

    gw_arena_init(&a);
    t_parse(from, &a, body, strlen(body), &r);
    rc = dl_bedrock_shape.request_render(&r, gw_str_c(model), spec, &d, &out, &why);
    if (rc != GW_OK) {
        print_error("refused (%d): %s\n", rc, why.data ? why.data : "");
        fail();
    }
    t_json_eq(out.data, out.len, want);
    t_dropped_is(&d, drops);
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

/* <body> of shape <from> refused for Bedrock with a reason holding <what>, nothing
 * written and nothing dropped. */
static void
t_refused(enum dl_shape from, const char *body, const char *what)
{
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};
    struct gw_arena a;
    struct dl_request r;
    enum gw_code rc;

    gw_arena_init(&a);
    t_parse(from, &a, body, strlen(body), &r);
    dl_dropped_add(&d, GW_STR_LIT("before"));
    assert_int_equal(gw_buf_append_cstr(&out, "keep"), GW_OK);
    rc = dl_bedrock_shape.request_render(&r, GW_STR_LIT(CLAUDE), 100, &d, &out, &why);
    if (rc != GW_E_UNCONVERTIBLE || !why.data || !strstr(why.data, what)) {
        print_error("%s: rc %d, why \"%s\" (want \"%s\")\n", body, rc, why.data ? why.data : "",
                    what);
        fail();
    }
    assert_int_equal(out.len, 4);
    assert_int_equal(d.n, 1);
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

/* ---- end to end ---- */

static void
test_bedrock_render_chat_request_end_to_end(void **state)
{
    size_t in_len, out_len;
    char *in = t_fixture("request_chat.in.json", &in_len);
    char *want = t_fixture("request_chat.out.json", &out_len);

    (void)state;
    t_render(DL_SHAPE_CHAT, in, CLAUDE, 8192, want,
             "name, detail, top_p, parallel_tool_calls, strict, seed, user");
    free(in);
    free(want);
}

static const char messages_body[] =
    "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":1024,"
    "\"system\":[{\"type\":\"text\",\"text\":\"Be brief.\","
    "\"cache_control\":{\"type\":\"ephemeral\",\"ttl\":\"1h\"}}],"
    "\"messages\":["
    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Read the file.\","
    "\"cache_control\":{\"type\":\"ephemeral\"}}]},"
    "{\"role\":\"assistant\",\"content\":["
    "{\"type\":\"thinking\",\"thinking\":\"I need the file.\",\"signature\":\"gw1.bedrock.U0lH\"},"
    "{\"type\":\"thinking\",\"thinking\":\"From elsewhere.\",\"signature\":\"c2ln\"},"
    "{\"type\":\"redacted_thinking\",\"data\":\"gw1.bedrock.UkVE\"},"
    "{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read\",\"input\":{\"path\":\"a.txt\"}}]},"
    "{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"toolu_1\","
    "\"content\":\"no such file\",\"is_error\":true}]}],"
    "\"tools\":[{\"name\":\"read\",\"description\":\"Reads a file.\",\"input_schema\":"
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}},"
    "\"cache_control\":{\"type\":\"ephemeral\"}}],"
    "\"tool_choice\":{\"type\":\"auto\"},"
    "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":2048},"
    "\"top_k\":40,\"metadata\":{\"user_id\":\"u-7\"},\"service_tier\":\"auto\"}";

#define MESSAGES_TOOL_SPEC                                                                         \
    "{\"toolSpec\":{\"name\":\"read\",\"description\":\"Reads a "                                  \
    "file.\",\"inputSchema\":{\"json\":"                                                           \
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}}}"
#define MESSAGES_ASSISTANT                                                                         \
    "{\"role\":\"assistant\",\"content\":["                                                        \
    "{\"reasoningContent\":{\"reasoningText\":{\"text\":\"I need the file.\","                     \
    "\"signature\":\"U0lH\"}}},"                                                                   \
    "{\"reasoningContent\":{\"redactedContent\":\"UkVE\"}},"                                       \
    "{\"toolUse\":{\"toolUseId\":\"toolu_1\",\"name\":\"read\",\"input\":{\"path\":\"a.txt\"}}}]}"

static void
test_bedrock_render_messages_request_for_claude(void **state)
{
    (void)state;
    t_render(DL_SHAPE_MESSAGES, messages_body, CLAUDE, 0,
             "{\"messages\":["
             "{\"role\":\"user\",\"content\":[{\"text\":\"Read the file.\"},"
             "{\"cachePoint\":{\"type\":\"default\"}}]}," MESSAGES_ASSISTANT ","
             "{\"role\":\"user\",\"content\":[{\"toolResult\":{\"toolUseId\":\"toolu_1\","
             "\"content\":[{\"text\":\"no such file\"}],\"status\":\"error\"}}]}],"
             "\"system\":[{\"text\":\"Be brief.\"},{\"cachePoint\":{\"type\":\"default\","
             "\"ttl\":\"1h\"}}],"
             "\"inferenceConfig\":{\"maxTokens\":1024},"
             "\"toolConfig\":{\"tools\":[" MESSAGES_TOOL_SPEC ","
             "{\"cachePoint\":{\"type\":\"default\"}}],\"toolChoice\":{\"auto\":{}}},"
             "\"additionalModelRequestFields\":{\"top_k\":40,\"thinking\":{\"type\":\"enabled\","
             "\"budget_tokens\":2048}}}",
             "reasoning, user, metadata, service_tier");
}

static void
test_bedrock_render_messages_request_for_nova_and_llama(void **state)
{
    (void)state;
    /* Nova: cache points without ttl, top_k in its own inferenceConfig, no thinking */
    t_render(DL_SHAPE_MESSAGES, messages_body, NOVA, 0,
             "{\"messages\":["
             "{\"role\":\"user\",\"content\":[{\"text\":\"Read the file.\"},"
             "{\"cachePoint\":{\"type\":\"default\"}}]}," MESSAGES_ASSISTANT ","
             "{\"role\":\"user\",\"content\":[{\"toolResult\":{\"toolUseId\":\"toolu_1\","
             "\"content\":[{\"text\":\"no such file\"}],\"status\":\"error\"}}]}],"
             "\"system\":[{\"text\":\"Be brief.\"},{\"cachePoint\":{\"type\":\"default\"}}],"
             "\"inferenceConfig\":{\"maxTokens\":1024},"
             "\"toolConfig\":{\"tools\":[" MESSAGES_TOOL_SPEC ","
             "{\"cachePoint\":{\"type\":\"default\"}}],\"toolChoice\":{\"auto\":{}}},"
             "\"additionalModelRequestFields\":{\"inferenceConfig\":{\"topK\":40}}}",
             "reasoning, thinking, user, metadata, service_tier");
    /* Llama: none of the family fields */
    t_render(DL_SHAPE_MESSAGES, messages_body, LLAMA, 0,
             "{\"messages\":["
             "{\"role\":\"user\",\"content\":[{\"text\":\"Read the file.\"}]}," MESSAGES_ASSISTANT
             ","
             "{\"role\":\"user\",\"content\":[{\"toolResult\":{\"toolUseId\":\"toolu_1\","
             "\"content\":[{\"text\":\"no such file\"}]}}]}],"
             "\"system\":[{\"text\":\"Be brief.\"}],"
             "\"inferenceConfig\":{\"maxTokens\":1024},"
             "\"toolConfig\":{\"tools\":[" MESSAGES_TOOL_SPEC "],\"toolChoice\":{\"auto\":{}}}}",
             "cache_control, reasoning, is_error, top_k, thinking, user, metadata, service_tier");
}

/* ---- turns ---- */

static void
test_bedrock_render_merges_turns(void **state)
{
    (void)state;
    /* consecutive messages of a side share a turn; an empty one is skipped, its name
     * still dropped */
    t_render(DL_SHAPE_CHAT,
             "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"a\"},"
             "{\"role\":\"user\",\"content\":\"b\"},{\"role\":\"assistant\",\"content\":\"\","
             "\"name\":\"bot\"},{\"role\":\"assistant\",\"content\":\"c\"},"
             "{\"role\":\"assistant\",\"content\":\"d\"},{\"role\":\"user\",\"content\":\"e\"}]}",
             LLAMA, 0,
             "{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"a\"},{\"text\":\"b\"}]},"
             "{\"role\":\"assistant\",\"content\":[{\"text\":\"c\"},{\"text\":\"d\"}]},"
             "{\"role\":\"user\",\"content\":[{\"text\":\"e\"}]}]}",
             "name");
    t_refused(DL_SHAPE_CHAT,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"},"
              "{\"role\":\"assistant\",\"content\":\"hi\"},{\"role\":\"user\",\"content\":\"x\"}]}",
              "start with a user message");
    t_refused(DL_SHAPE_CHAT,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"s\"}]}",
              "at least one user message");
}

/* ---- tools ---- */

#define CHAT_TOOLS                                                                                 \
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":"               \
    "{\"type\":\"object\"}}}]"
#define CHAT_HISTORY                                                                               \
    "\"messages\":[{\"role\":\"user\",\"content\":\"go\"},{\"role\":\"assistant\","                \
    "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\","           \
    "\"arguments\":\"{}\"}},{\"id\":\"c2\",\"type\":\"function\",\"function\":{\"name\":\"f\","    \
    "\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"},"     \
    "{\"role\":\"tool\",\"tool_call_id\":\"c2\",\"content\":\"ok\"}]"
#define HISTORY_OUT                                                                                \
    "\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"go\"}]},{\"role\":\"assistant\","   \
    "\"content\":[{\"toolUse\":{\"toolUseId\":\"c1\",\"name\":\"f\",\"input\":{}}},"               \
    "{\"toolUse\":{\"toolUseId\":\"c2\",\"name\":\"f\",\"input\":{}}}]},{\"role\":\"user\","       \
    "\"content\":[{\"toolResult\":{\"toolUseId\":\"c1\",\"content\":[{\"text\":\"ok\"}]}},"        \
    "{\"toolResult\":{\"toolUseId\":\"c2\",\"content\":[{\"text\":\"ok\"}]}}]}]"
#define TOOL_F_OUT                                                                                 \
    "{\"toolSpec\":{\"name\":\"f\",\"inputSchema\":{\"json\":{\"type\":\"object\"}}}}"
#define ONE_USER "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define ONE_USER_OUT "\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"hi\"}]}]"

static void
test_bedrock_render_tool_choices(void **state)
{
    (void)state;
    t_render(DL_SHAPE_CHAT,
             "{\"model\":\"m\"," ONE_USER "," CHAT_TOOLS ",\"tool_choice\":\"auto\"}", LLAMA, 0,
             "{" ONE_USER_OUT ",\"toolConfig\":{\"tools\":[" TOOL_F_OUT "],"
             "\"toolChoice\":{\"auto\":{}}}}",
             "");
    t_render(DL_SHAPE_CHAT,
             "{\"model\":\"m\"," ONE_USER "," CHAT_TOOLS ",\"tool_choice\":{\"type\":\"function\","
             "\"function\":{\"name\":\"f\"}}}",
             LLAMA, 0,
             "{" ONE_USER_OUT ",\"toolConfig\":{\"tools\":[" TOOL_F_OUT "],"
             "\"toolChoice\":{\"tool\":{\"name\":\"f\"}}}}",
             "");
    /* unset: no toolChoice (Converse's default is auto) */
    t_render(DL_SHAPE_CHAT, "{\"model\":\"m\"," ONE_USER "," CHAT_TOOLS "}", LLAMA, 0,
             "{" ONE_USER_OUT ",\"toolConfig\":{\"tools\":[" TOOL_F_OUT "]}}", "");
    /* none without tool blocks: the tools are not sent, the model cannot call */
    t_render(DL_SHAPE_CHAT,
             "{\"model\":\"m\"," ONE_USER "," CHAT_TOOLS ",\"tool_choice\":\"none\"}", LLAMA, 0,
             "{" ONE_USER_OUT "}", "");
    /* none with tool blocks: Converse needs toolConfig and has no none */
    t_render(DL_SHAPE_CHAT,
             "{\"model\":\"m\"," CHAT_HISTORY "," CHAT_TOOLS ",\"tool_choice\":\"none\"}", LLAMA, 0,
             "{" HISTORY_OUT ",\"toolConfig\":{\"tools\":[" TOOL_F_OUT "]}}", "tool_choice");
    /* tool blocks and no tools: a stub per function name the calls use, once each */
    t_render(DL_SHAPE_CHAT, "{\"model\":\"m\"," CHAT_HISTORY "}", LLAMA, 0,
             "{" HISTORY_OUT ",\"toolConfig\":{\"tools\":[{\"toolSpec\":{\"name\":\"f\","
             "\"inputSchema\":{\"json\":{\"type\":\"object\"}}}}]}}",
             "");
    /* a choice without tools */
    t_render(DL_SHAPE_CHAT, "{\"model\":\"m\"," ONE_USER ",\"tool_choice\":\"required\"}", LLAMA, 0,
             "{" ONE_USER_OUT "}", "tool_choice");
}

static void
test_bedrock_render_tool_refusals(void **state)
{
    (void)state;
    t_refused(DL_SHAPE_CHAT,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"go\"},"
              "{\"role\":\"assistant\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
              "\"function\":{\"name\":\"f\",\"arguments\":\"[1]\"}}]}]}",
              "arguments: must be a JSON object");
    t_refused(DL_SHAPE_RESPONSES,
              "{\"model\":\"m\",\"input\":\"hi\",\"tools\":[{\"type\":\"web_search\"}]}",
              "tools: hosted tools");
    t_refused(DL_SHAPE_MESSAGES,
              "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":"
              "\"q\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"server_tool_use\","
              "\"id\":\"s1\",\"name\":\"web_search\",\"input\":{}}]}]}",
              "server_tool_use parts cannot be sent");
}

/* ---- media ---- */

static void
test_bedrock_render_images_and_documents(void **state)
{
    (void)state;
    t_render(DL_SHAPE_MESSAGES,
             "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":["
             "{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/jpeg\","
             "\"data\":\"/9j/\"}},"
             "{\"type\":\"document\",\"source\":{\"type\":\"base64\",\"media_type\":"
             "\"application/pdf\",\"data\":\"JVBERi0=\"},\"title\":\"Report (2024) [v2]\"},"
             "{\"type\":\"document\",\"source\":{\"type\":\"text\",\"media_type\":\"text/plain\","
             "\"data\":\"hello\"},\"title\":\"notes.txt\"}]}]}",
             CLAUDE, 0,
             "{\"messages\":[{\"role\":\"user\",\"content\":["
             "{\"image\":{\"format\":\"jpeg\",\"source\":{\"bytes\":\"/9j/\"}}},"
             "{\"document\":{\"format\":\"pdf\",\"name\":\"Report (2024) [v2]\",\"source\":"
             "{\"bytes\":\"JVBERi0=\"}}},"
             "{\"document\":{\"format\":\"txt\",\"name\":\"document-2\",\"source\":"
             "{\"bytes\":\"aGVsbG8=\"}}}]}],\"inferenceConfig\":{\"maxTokens\":5}}",
             "title");
    t_refused(DL_SHAPE_CHAT,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
              "\"image_url\",\"image_url\":{\"url\":\"https://example.com/cat.png\"}}]}]}",
              "image url: a Bedrock model takes the image's bytes");
    t_refused(DL_SHAPE_CHAT,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
              "\"image_url\",\"image_url\":{\"url\":\"data:image/tiff;base64,AAAA\"}}]}]}",
              "not image/tiff");
    t_refused(DL_SHAPE_CHAT,
              "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"file\","
              "\"file\":{\"filename\":\"a.zip\",\"file_data\":\"data:application/zip;base64,"
              "UEs=\"}}]}]}",
              "not application/zip");
}

static void
test_bedrock_render_tool_result_media_and_foreign_signatures(void **state)
{
    (void)state;
    /* a tool result's image goes as image bytes, its text as text (no tools: a stub) */
    t_render(DL_SHAPE_MESSAGES,
             "{\"model\":\"m\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":"
             "\"q\"},{\"role\":\"assistant\",\"content\":[{\"type\":\"tool_use\",\"id\":\"t1\","
             "\"name\":\"shot\",\"input\":{}}]},{\"role\":\"user\",\"content\":[{\"type\":"
             "\"tool_result\",\"tool_use_id\":\"t1\",\"content\":[{\"type\":\"text\",\"text\":"
             "\"here\"},{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":"
             "\"image/webp\",\"data\":\"UklG\"}}]}]}]}",
             CLAUDE, 0,
             "{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"q\"}]},"
             "{\"role\":\"assistant\",\"content\":[{\"toolUse\":{\"toolUseId\":\"t1\","
             "\"name\":\"shot\",\"input\":{}}}]},{\"role\":\"user\",\"content\":[{\"toolResult\":"
             "{\"toolUseId\":\"t1\",\"content\":[{\"text\":\"here\"},{\"image\":{\"format\":"
             "\"webp\",\"source\":{\"bytes\":\"UklG\"}}}]}}]}],"
             "\"inferenceConfig\":{\"maxTokens\":5},\"toolConfig\":{\"tools\":[{\"toolSpec\":"
             "{\"name\":\"shot\",\"inputSchema\":{\"json\":{\"type\":\"object\"}}}}]}}",
             "");
    /* Gemini's thought and call signatures are Google's: dropped */
    t_render(DL_SHAPE_GEMINI,
             "{\"contents\":[{\"role\":\"user\",\"parts\":[{\"text\":\"w?\"}]},{\"role\":"
             "\"model\",\"parts\":[{\"text\":\"think\",\"thought\":true,\"thoughtSignature\":"
             "\"c2ln\"},{\"functionCall\":{\"name\":\"f\",\"args\":{\"a\":1},\"id\":\"c1\"},"
             "\"thoughtSignature\":\"c2lnMg==\"}]},{\"role\":\"user\",\"parts\":[{"
             "\"functionResponse\":{\"name\":\"f\",\"id\":\"c1\",\"response\":{\"r\":2}}}]}]}",
             LLAMA, 0,
             "{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"w?\"}]},"
             "{\"role\":\"assistant\",\"content\":[{\"toolUse\":{\"toolUseId\":\"c1\","
             "\"name\":\"f\",\"input\":{\"a\":1}}}]},{\"role\":\"user\",\"content\":[{"
             "\"toolResult\":{\"toolUseId\":\"c1\",\"content\":[{\"text\":\"{\\\"r\\\":2}\"}]}}]}],"
             "\"toolConfig\":{\"tools\":[{\"toolSpec\":{\"name\":\"f\",\"inputSchema\":{\"json\":"
             "{\"type\":\"object\"}}}}]}}",
             "reasoning, signature");
}

/* ---- refusals and drops ---- */

static void
test_bedrock_render_refusals(void **state)
{
    (void)state;
    t_refused(DL_SHAPE_CHAT, "{\"model\":\"m\"," ONE_USER ",\"n\":2}", "n: ");
    t_refused(DL_SHAPE_CHAT, "{\"model\":\"m\"," ONE_USER ",\"logprobs\":true}", "logprobs");
    t_refused(DL_SHAPE_CHAT, "{\"model\":\"m\"," ONE_USER ",\"modalities\":[\"text\",\"audio\"]}",
              "audio");
    t_refused(DL_SHAPE_CHAT,
              "{\"model\":\"m\"," ONE_USER ",\"response_format\":{\"type\":\"json_object\"}}",
              "response_format");
    t_refused(DL_SHAPE_CHAT,
              "{\"model\":\"m\"," ONE_USER ",\"response_format\":{\"type\":\"json_schema\","
              "\"json_schema\":{\"name\":\"x\",\"schema\":{\"type\":\"object\"}}}}",
              "response_format");
    t_refused(DL_SHAPE_RESPONSES,
              "{\"model\":\"m\",\"input\":\"hi\",\"previous_response_id\":\"resp_1\"}",
              "previous_response_id");
}

static void
test_bedrock_render_drops(void **state)
{
    (void)state;
    t_render(DL_SHAPE_CHAT,
             "{\"model\":\"m\"," ONE_USER ",\"presence_penalty\":1,\"frequency_penalty\":1,"
             "\"prompt_cache_key\":\"k\",\"metadata\":{\"a\":\"b\"},\"reasoning_effort\":\"high\","
             "\"top_p\":0.5,\"logit_bias\":{\"1\":2}}",
             CLAUDE, 0, "{" ONE_USER_OUT ",\"inferenceConfig\":{\"topP\":0.5}}",
             "reasoning_effort, presence_penalty, frequency_penalty, metadata, prompt_cache_key, "
             "logit_bias");
    /* a Messages client's signature (made by Anthropic's API) means nothing to Bedrock;
     * top_p and temperature both go for a Messages client */
    t_render(DL_SHAPE_MESSAGES,
             "{\"model\":\"m\",\"max_tokens\":5,\"temperature\":0.2,\"top_p\":0.5,"
             "\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":\"assistant\","
             "\"content\":[{\"type\":\"thinking\",\"thinking\":\"t\",\"signature\":\"s\"},"
             "{\"type\":\"text\",\"text\":\"a\"}]},{\"role\":\"user\",\"content\":\"q2\"}]}",
             CLAUDE, 0,
             "{\"messages\":[{\"role\":\"user\",\"content\":[{\"text\":\"q\"}]},"
             "{\"role\":\"assistant\",\"content\":[{\"text\":\"a\"}]},"
             "{\"role\":\"user\",\"content\":[{\"text\":\"q2\"}]}],"
             "\"inferenceConfig\":{\"maxTokens\":5,\"temperature\":0.2,\"topP\":0.5}}",
             "reasoning");
}

static void
test_bedrock_render_output_budget(void **state)
{
    (void)state;
    /* the model's spec when the request has none; nothing at all without either */
    t_render(DL_SHAPE_CHAT, "{\"model\":\"m\"," ONE_USER "}", LLAMA, 4096,
             "{" ONE_USER_OUT ",\"inferenceConfig\":{\"maxTokens\":4096}}", "");
    t_render(DL_SHAPE_CHAT, "{\"model\":\"m\"," ONE_USER "}", LLAMA, 0, "{" ONE_USER_OUT "}", "");
    t_render(DL_SHAPE_CHAT, "{\"model\":\"m\"," ONE_USER ",\"max_tokens\":7,\"stop\":\"X\"}", LLAMA,
             4096,
             "{" ONE_USER_OUT ",\"inferenceConfig\":{\"maxTokens\":7,\"stopSequences\":[\"X\"]}}",
             "");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bedrock_render_chat_request_end_to_end),
        cmocka_unit_test(test_bedrock_render_messages_request_for_claude),
        cmocka_unit_test(test_bedrock_render_messages_request_for_nova_and_llama),
        cmocka_unit_test(test_bedrock_render_merges_turns),
        cmocka_unit_test(test_bedrock_render_tool_choices),
        cmocka_unit_test(test_bedrock_render_tool_refusals),
        cmocka_unit_test(test_bedrock_render_images_and_documents),
        cmocka_unit_test(test_bedrock_render_tool_result_media_and_foreign_signatures),
        cmocka_unit_test(test_bedrock_render_refusals),
        cmocka_unit_test(test_bedrock_render_drops),
        cmocka_unit_test(test_bedrock_render_output_budget),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
