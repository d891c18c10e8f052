/* SPDX-License-Identifier: MIT
 * bench/upstream_gemini.c - `gwbench upstream`'s Google Gemini templates
 * (generativelanguage v1beta): the GenerateContentResponse, its stream as SSE
 * (?alt=sse) or as one JSON array, thought parts with a thoughtSignature
 * (--reasoning), functionCall parts, the Google error shape, the echo of
 * functionResponse parts, countTokens and the model listing. The model and whether
 * to stream come from the path, not the body.
 * Usage: promptTokenCount P, candidatesTokenCount = content chunks,
 * thoughtsTokenCount = reasoning deltas, cachedContentTokenCount K (when not 0).
 * Owns:    nothing; renders into the worker's scratch buffers.
 * Threads: a connection's worker.
 * See:     bench/upstream-priv.h, docs/gwbench.md
 */
#include "bench/upstream-priv.h"

#include <string.h>

/* The error-mid message: what Gemini says when it is overloaded. */
#define GEM_OVERLOADED "The model is overloaded. Please try again later."

/* The Google RPC status name of an error answered with HTTP <status>. */
static const char *
rpc_status(unsigned status)
{
    switch (status) {
    case 400: return "INVALID_ARGUMENT";
    case 401: return "UNAUTHENTICATED";
    case 403: return "PERMISSION_DENIED";
    case 404: return "NOT_FOUND";
    case 409: return "ABORTED";
    case 429: return "RESOURCE_EXHAUSTED";
    case 499: return "CANCELLED";
    case 501: return "NOT_IMPLEMENTED";
    case 503: return "UNAVAILABLE";
    case 504: return "DEADLINE_EXCEEDED";
    default: return status >= 400 && status < 500 ? "FAILED_PRECONDITION" : "INTERNAL";
    }
}

/* Replaces <b> with {"error":{"code":<code>,"message":<msg>,"status":...}}. */
static void
render_error(struct gw_buf *b, unsigned code, const char *msg)
{
    gw_buf_reset(b);
    (void)gw_buf_printf(b, "{\"error\":{\"code\":%u,\"message\":", code);
    (void)gw_buf_append_json_str(b, gw_str_c(msg));
    (void)gw_buf_printf(b, ",\"status\":\"%s\"}}", rpc_status(code));
}

static void
error_body(struct gw_buf *b, unsigned status)
{
    render_error(b, status, "fake failure");
}

/* The stream and the model come from the path: .../models/{model}:streamGenerateContent. */
static bool
prepare(struct bench_up_conn *c)
{
    c->stream = c->gemini_stream;
    gw_buf_reset(&c->model);
    (void)bench_up_append_json_inner(&c->model, c->url.data + c->path_model_off, c->path_model_len);
    return false;
}

static const char *
stream_ctype(const struct bench_up_conn *c)
{
    return c->gemini_sse ? "text/event-stream" : "application/json";
}

/* ---- the response ---- */

/* Appends a thought part of <n> deltas' text. */
static void
thought_part(struct gw_buf *b, uint64_t n)
{
    (void)gw_buf_append_str(b, GW_STR_LIT("{\"text\":\""));
    for (uint64_t i = 0; i < n; i++)
        (void)gw_buf_append_str(b, GW_STR_LIT(BENCH_UP_THINK));
    (void)gw_buf_append_str(b, GW_STR_LIT("\",\"thought\":true}"));
}

/* Closes a part, with the thoughtSignature when it is the first part after thoughts. */
static void
part_end(struct gw_buf *b, bool signed_part)
{
    if (signed_part)
        (void)gw_buf_append_str(b, GW_STR_LIT(",\"thoughtSignature\":\"" BENCH_UP_SIGNATURE "\""));
    (void)gw_buf_append(b, "}", 1);
}

/* Appends a text part of <copies> chunk texts. */
static void
text_part(const struct bench_up_conn *c, struct gw_buf *b, uint64_t copies, bool signed_part)
{
    struct gw_str text = bench_up_chunk_text(c);

    (void)gw_buf_append_str(b, GW_STR_LIT("{\"text\":\""));
    for (uint64_t i = 0; i < copies; i++)
        (void)gw_buf_append(b, text.ptr, text.len);
    (void)gw_buf_append(b, "\"", 1);
    part_end(b, signed_part);
}

/* Appends the functionCall part of call <i>. */
static void
call_part(const struct bench_up_conn *c, struct gw_buf *b, unsigned i, bool signed_part)
{
    (void)gw_buf_printf(b, "{\"functionCall\":{\"name\":\"%s\",\"args\":", c->p.tool[i]);
    bench_up_append_tool_args(b, i, false);
    (void)gw_buf_append(b, "}", 1);
    part_end(b, signed_part);
}

static void
render_usage(const struct bench_up_conn *c, struct gw_buf *b)
{
    uint64_t p = c->prompt_tokens, n = c->p.reasoning;

    (void)gw_buf_printf(b,
                        ",\"usageMetadata\":{\"promptTokenCount\":%llu,\"candidatesTokenCount\":"
                        "%llu,\"totalTokenCount\":%llu",
                        (unsigned long long)p, (unsigned long long)c->p.chunks,
                        (unsigned long long)(p + c->p.chunks + n));
    if (c->p.cached > 0)
        (void)gw_buf_printf(b, ",\"cachedContentTokenCount\":%llu",
                            (unsigned long long)c->p.cached);
    (void)gw_buf_printf(b, ",\"promptTokensDetails\":[{\"modality\":\"TEXT\",\"tokenCount\":%llu}]",
                        (unsigned long long)p);
    if (n > 0)
        (void)gw_buf_printf(b, ",\"thoughtsTokenCount\":%llu", (unsigned long long)n);
    (void)gw_buf_append(b, "}", 1);
}

/* Replaces <b> with a response's head, up to and including `"parts":[`. */
static void
response_head(struct gw_buf *b)
{
    gw_buf_reset(b);
    (void)gw_buf_append_str(b, GW_STR_LIT("{\"candidates\":[{\"content\":{\"parts\":["));
}

/* Closes the parts and the response; <final>: with finishReason and usageMetadata. */
static void
response_tail(const struct bench_up_conn *c, struct gw_buf *b, bool final)
{
    struct gw_str model = bench_up_model(c);

    (void)gw_buf_append_str(b, GW_STR_LIT("],\"role\":\"model\"}"));
    if (final)
        (void)gw_buf_append_str(b, GW_STR_LIT(",\"finishReason\":\"STOP\""));
    (void)gw_buf_append_str(b, GW_STR_LIT(",\"index\":0}]"));
    if (final && !bench_up_g.no_usage)
        render_usage(c, b);
    (void)gw_buf_printf(b, ",\"modelVersion\":\"%.*s\",\"responseId\":\"bench-%llu\"}",
                        (int)model.len, model.ptr, (unsigned long long)c->id);
}

static void
render_answer(struct bench_up_conn *c, struct gw_buf *b)
{
    bool sig = c->p.reasoning > 0;

    response_head(b);
    if (sig) {
        thought_part(b, c->p.reasoning);
        (void)gw_buf_append(b, ",", 1);
    }
    if (c->ans == BENCH_UP_ANS_TOOL_CALL) {
        for (unsigned i = 0; i < c->p.tool_n; i++) {
            if (i > 0)
                (void)gw_buf_append(b, ",", 1);
            call_part(c, b, i, sig && i == 0);
        }
    } else {
        text_part(c, b, c->p.chunks, sig);
    }
    response_tail(c, b, true);
}

/* ---- the stream ----
 * With ?alt=sse every chunk is `data: JSON\r\n\r\n`; without, the body is one JSON
 * array whose elements come one per HTTP chunk: "[" before the first, "\r\n," before
 * the next ones, "\r\n]" at the end. */

/* Sends <b> as the stream's next element. */
static void
send_element(struct bench_up_conn *c, const struct gw_buf *b)
{
    if (c->gemini_sse)
        bench_up_send_chunk(c, "data: ", b, "\r\n\r\n", false);
    else
        bench_up_send_chunk(c, c->events == 0 ? "[" : "\r\n,", b, NULL, false);
}

/* Ends the body: the array's "]" unless it is SSE, and the terminating chunk. */
static void
send_end(struct bench_up_conn *c)
{
    bench_up_send_chunk(c, c->gemini_sse || c->events == 0 ? NULL : "\r\n]", NULL, NULL, true);
}

/* Nothing but the headers: Gemini has no opening event. */
static void
stream_open(struct bench_up_conn *c)
{
    (void)c;
}

/* One chunk: a thought, a text or a functionCall part (one call per chunk); the last
 * chunk of the answer also carries finishReason and usageMetadata. */
static void
stream_delta(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;
    bool final = c->sent + 1 == bench_up_steps(c);
    bool sig = c->p.reasoning > 0 && c->sent == c->p.reasoning;
    uint64_t k = bench_up_content_index(c);

    response_head(b);
    if (bench_up_in_reasoning(c))
        thought_part(b, 1);
    else if (c->ans == BENCH_UP_ANS_TOOL_CALL)
        call_part(c, b, (unsigned)k, sig);
    else
        text_part(c, b, 1, sig);
    response_tail(c, b, final);
    send_element(c, b);
}

/* An answer without paced chunks still sends its final chunk (an empty text). */
static void
stream_close(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;

    if (bench_up_steps(c) == 0) {
        response_head(b);
        text_part(c, b, 0, false);
        response_tail(c, b, true);
        send_element(c, b);
    }
    send_end(c);
}

/* The error object as the next element (503 UNAVAILABLE), then the end of the body. */
static void
stream_error(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;

    render_error(b, 503, GEM_OVERLOADED);
    send_element(c, b);
    send_end(c);
}

/* The page where the next element is due, then the terminating chunk (the array is
 * not closed either). */
static void
stream_garbage(struct bench_up_conn *c)
{
    static const struct gw_buf page = {(char *)(uintptr_t)BENCH_UP_GARBAGE,
                                       sizeof(BENCH_UP_GARBAGE) - 1, 0};

    send_element(c, &page);
    bench_up_send_chunk(c, NULL, NULL, NULL, true);
}

/* The functionResponse parts of the last turn of contents: CONTENT is the response's
 * "output" member if it has one, else its "error" member, else the whole response;
 * ID is the part's id, else its name. */
static bool
tool_results(struct bench_up_conn *c, json_t *root)
{
    json_t *contents = json_object_get(root, "contents");
    json_t *turn = json_array_get(contents, json_array_size(contents) - 1), *part;
    bool any = false;
    size_t i;

    json_array_foreach(json_object_get(turn, "parts"), i, part)
    {
        json_t *fr = json_object_get(part, "functionResponse"), *resp, *content, *id;

        if (!json_is_object(fr))
            continue;
        resp = json_object_get(fr, "response");
        content = json_object_get(resp, "output");
        if (content == NULL)
            content = json_object_get(resp, "error");
        if (content == NULL)
            content = resp;
        id = json_object_get(fr, "id");
        bench_up_append_tool_said(&c->answer, content,
                                  json_is_string(id) ? id : json_object_get(fr, "name"));
        any = true;
    }
    return any;
}

/* countTokens: {"totalTokens":P,...}. */
static void
count_answer(struct bench_up_conn *c, struct gw_buf *b)
{
    gw_buf_reset(b);
    (void)gw_buf_printf(b,
                        "{\"totalTokens\":%llu,\"promptTokensDetails\":[{\"modality\":\"TEXT\","
                        "\"tokenCount\":%llu}]}",
                        (unsigned long long)c->prompt_tokens, (unsigned long long)c->prompt_tokens);
}

/* GET .../v1beta/models: two models, one page. */
static void
models_answer(struct bench_up_conn *c, struct gw_buf *b)
{
    static const char *const names[][2] = {{"gemini-2.5-flash", "Gemini 2.5 Flash"},
                                           {"gemini-2.5-pro", "Gemini 2.5 Pro"}};

    (void)c;
    gw_buf_reset(b);
    (void)gw_buf_append_str(b, GW_STR_LIT("{\"models\":["));
    for (unsigned i = 0; i < 2; i++)
        (void)gw_buf_printf(b,
                            "%s{\"name\":\"models/%s\",\"version\":\"001\",\"displayName\":\"%s\","
                            "\"description\":\"gwbench fake model\",\"inputTokenLimit\":1048576,"
                            "\"outputTokenLimit\":65536,\"supportedGenerationMethods\":"
                            "[\"generateContent\",\"countTokens\"],\"temperature\":1,"
                            "\"topP\":0.95,\"topK\":64,\"maxTemperature\":2,\"thinking\":true}",
                            i ? "," : "", names[i][0], names[i][1]);
    (void)gw_buf_append_str(b, GW_STR_LIT("]}"));
}

const struct bench_up_shape bench_up_gemini = {
    .stream_ctype = stream_ctype,
    .tool_chunks = 1,
    .reasoning = true,
    .prepare = prepare,
    .tool_results = tool_results,
    .render_answer = render_answer,
    .stream_open = stream_open,
    .stream_delta = stream_delta,
    .stream_close = stream_close,
    .stream_error = stream_error,
    .stream_garbage = stream_garbage,
    .error_body = error_body,
    .count_answer = count_answer,
    .models_answer = models_answer,
};
