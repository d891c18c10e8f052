/* SPDX-License-Identifier: MIT
 * bench/upstream_messages.c - `gwbench upstream`'s Anthropic Messages templates
 * (anthropic-version 2023-06-01): the message answer, the named-event stream
 * (message_start ... message_stop), thinking blocks with a signature (--reasoning),
 * tool_use blocks, the error bodies and events, the request checks and count_tokens.
 * Usage splits the estimated prompt into uncached input, cache reads (--cached) and
 * cache writes (--cache-write).
 * Owns:    nothing; renders into the worker's scratch buffers.
 * Threads: a connection's worker.
 * See:     bench/upstream-priv.h, docs/gwbench.md
 */
#include "bench/upstream-priv.h"

#include <string.h>

/* The error type of an Anthropic error body answered with HTTP <status>. */
static const char *
error_type(unsigned status)
{
    switch (status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 529: return "overloaded_error";
    default: return status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
    }
}

/* Replaces <b> with the Anthropic error body {"type":"error","error":{...}}. */
static void
render_error(struct gw_buf *b, const char *type, const char *msg)
{
    gw_buf_reset(b);
    (void)gw_buf_printf(b, "{\"type\":\"error\",\"error\":{\"type\":\"%s\",\"message\":", type);
    (void)gw_buf_append_json_str(b, gw_str_c(msg));
    (void)gw_buf_append_str(b, GW_STR_LIT("}}"));
}

static void
error_body(struct gw_buf *b, unsigned status)
{
    render_error(b, error_type(status), "fake failure");
}

/* Answers 400 invalid_request_error with <msg>, keep-alive. */
static void
send_invalid(struct bench_up_conn *c, const char *msg)
{
    struct gw_buf *b = &c->t->body;

    render_error(b, "invalid_request_error", msg);
    bench_up_send_simple(c, 400, "application/json", NULL, b->data, b->len);
}

/* The checks of the Messages API before any fault: anthropic-version, then (not for
 * count_tokens) a numeric max_tokens. */
static bool
prepare(struct bench_up_conn *c)
{
    if (!c->has_version) {
        send_invalid(c, "anthropic-version header is required");
        return true;
    }
    if (!c->counting && !c->has_max_tokens) {
        send_invalid(c, "max_tokens: Field required");
        return true;
    }
    return false;
}

/* Appends the usage object with <output> output tokens: input_tokens is the
 * estimated prompt less the cache reads and writes (never below 0). */
static void
render_usage(struct gw_buf *b, const struct bench_up_conn *c, uint64_t output)
{
    uint64_t cached = c->p.cached + c->p.cache_write;
    uint64_t input = c->prompt_tokens > cached ? c->prompt_tokens - cached : 0;

    (void)gw_buf_printf(b,
                        "\"usage\":{\"input_tokens\":%llu,\"cache_creation_input_tokens\":%llu,"
                        "\"cache_read_input_tokens\":%llu,\"output_tokens\":%llu}",
                        (unsigned long long)input, (unsigned long long)c->p.cache_write,
                        (unsigned long long)c->p.cached, (unsigned long long)output);
}

/* Appends the message object's head, up to and including `"content":[`. */
static void
message_head(struct bench_up_conn *c, struct gw_buf *b)
{
    struct gw_str model = bench_up_model(c);

    (void)gw_buf_printf(b,
                        "{\"id\":\"msg_bench_%llu\",\"type\":\"message\",\"role\":\"assistant\","
                        "\"model\":\"%.*s\",\"content\":[",
                        (unsigned long long)c->id, (int)model.len, model.ptr);
}

/* Appends the head of tool_use block <i>: type, id, name and `"input":`. */
static void
tool_use_head(const struct bench_up_conn *c, struct gw_buf *b, unsigned i)
{
    (void)gw_buf_printf(b,
                        "{\"type\":\"tool_use\",\"id\":\"toolu_bench_%llu_%u\",\"name\":\"%s\","
                        "\"input\":",
                        (unsigned long long)c->id, i, c->p.tool[i]);
}

/* The index of the first content block after the thinking block (if any). */
static unsigned
content_base(const struct bench_up_conn *c)
{
    return c->p.reasoning > 0 ? 1 : 0;
}

static void
render_answer(struct bench_up_conn *c, struct gw_buf *b)
{
    struct gw_str text = bench_up_chunk_text(c);

    gw_buf_reset(b);
    message_head(c, b);
    if (c->p.reasoning > 0) {
        (void)gw_buf_append_str(b, GW_STR_LIT("{\"type\":\"thinking\",\"thinking\":\""));
        for (uint64_t i = 0; i < c->p.reasoning; i++)
            (void)gw_buf_append_str(b, GW_STR_LIT(BENCH_UP_THINK));
        (void)gw_buf_append_str(b, GW_STR_LIT("\",\"signature\":\"" BENCH_UP_SIGNATURE "\"},"));
    }
    if (c->ans == BENCH_UP_ANS_TOOL_CALL) {
        for (unsigned i = 0; i < c->p.tool_n; i++) {
            if (i > 0)
                (void)gw_buf_append(b, ",", 1);
            tool_use_head(c, b, i);
            bench_up_append_tool_args(b, i, false);
            (void)gw_buf_append(b, "}", 1);
        }
        (void)gw_buf_append_str(
            b, GW_STR_LIT("],\"stop_reason\":\"tool_use\",\"stop_sequence\":null"));
    } else {
        (void)gw_buf_append_str(b, GW_STR_LIT("{\"type\":\"text\",\"text\":\""));
        for (uint64_t i = 0; i < c->p.chunks; i++)
            (void)gw_buf_append(b, text.ptr, text.len);
        (void)gw_buf_append_str(
            b, GW_STR_LIT("\"}],\"stop_reason\":\"end_turn\",\"stop_sequence\":null"));
    }
    if (!bench_up_g.no_usage) {
        (void)gw_buf_append(b, ",", 1);
        render_usage(b, c, bench_up_steps(c));
    }
    (void)gw_buf_append(b, "}", 1);
}

/* Sends content_block_start of the text block at <index>. */
static void
text_block_start(struct bench_up_conn *c, unsigned index)
{
    struct gw_buf *b = &c->t->body;

    gw_buf_reset(b);
    (void)gw_buf_printf(b,
                        "{\"type\":\"content_block_start\",\"index\":%u,"
                        "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
                        index);
    bench_up_send_named_event(c, "content_block_start", b, false);
}

/* message_start, content_block_start of the first block (the thinking block with
 * --reasoning, else the text block; a tool-call answer opens its blocks with their
 * first chunk) and a ping, at once with the headers. */
static void
stream_open(struct bench_up_conn *c)
{
    static const char ping[] = "{\"type\":\"ping\"}";
    static const char think[] = "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
                                "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}";
    static const struct gw_buf ping_ev = {(char *)(uintptr_t)ping, sizeof(ping) - 1, 0};
    static const struct gw_buf think_ev = {(char *)(uintptr_t)think, sizeof(think) - 1, 0};
    struct gw_buf *b = &c->t->body;

    gw_buf_reset(b);
    (void)gw_buf_append_str(b, GW_STR_LIT("{\"type\":\"message_start\",\"message\":"));
    message_head(c, b);
    (void)gw_buf_append_str(b, GW_STR_LIT("],\"stop_reason\":null,\"stop_sequence\":null"));
    if (!bench_up_g.no_usage) {
        (void)gw_buf_append(b, ",", 1);
        render_usage(b, c, 1);
    }
    (void)gw_buf_append_str(b, GW_STR_LIT("}}"));
    bench_up_send_named_event(c, "message_start", b, false);
    if (c->p.reasoning > 0)
        bench_up_send_named_event(c, "content_block_start", &think_ev, false);
    else if (c->ans != BENCH_UP_ANS_TOOL_CALL)
        text_block_start(c, 0);
    bench_up_send_named_event(c, "ping", &ping_ev, false);
}

/* Sends content_block_stop of block <i>. */
static void
block_stop(struct bench_up_conn *c, unsigned i)
{
    struct gw_buf *b = &c->t->body;

    gw_buf_reset(b);
    (void)gw_buf_printf(b, "{\"type\":\"content_block_stop\",\"index\":%u}", i);
    bench_up_send_named_event(c, "content_block_stop", b, false);
}

/* After the reasoning: the thinking block's signature_delta and stop, and the start of
 * the text block (a tool-call answer opens its own blocks). */
static void
thinking_close(struct bench_up_conn *c)
{
    static const char sig[] =
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
        "{\"type\":\"signature_delta\",\"signature\":\"" BENCH_UP_SIGNATURE "\"}}";
    static const struct gw_buf sig_ev = {(char *)(uintptr_t)sig, sizeof(sig) - 1, 0};

    bench_up_send_named_event(c, "content_block_delta", &sig_ev, false);
    block_stop(c, 0);
    if (c->ans != BENCH_UP_ANS_TOOL_CALL)
        text_block_start(c, 1);
}

/* Content chunk <k> of a tool-call answer: for the head of call i, the stop of the
 * previous tool block and content_block_start of tool_use block i (input {}); else
 * one input_json_delta piece of its arguments. */
static void
tool_chunk(struct bench_up_conn *c, uint64_t k)
{
    struct gw_buf *b = &c->t->body;
    unsigned i = (unsigned)(k / BENCH_UP_TOOL_PIECES), piece = (unsigned)(k % BENCH_UP_TOOL_PIECES);
    unsigned index = content_base(c) + i;

    if (piece == 0) {
        if (i > 0)
            block_stop(c, index - 1);
        gw_buf_reset(b);
        (void)gw_buf_printf(
            b, "{\"type\":\"content_block_start\",\"index\":%u,\"content_block\":", index);
        tool_use_head(c, b, i);
        (void)gw_buf_append_str(b, GW_STR_LIT("{}}}"));
        bench_up_send_named_event(c, "content_block_start", b, false);
        return;
    }
    gw_buf_reset(b);
    (void)gw_buf_printf(b,
                        "{\"type\":\"content_block_delta\",\"index\":%u,\"delta\":"
                        "{\"type\":\"input_json_delta\",\"partial_json\":\"",
                        index);
    (void)bench_up_append_json_inner(b, bench_up_tool_args[i][piece - 1],
                                     strlen(bench_up_tool_args[i][piece - 1]));
    (void)gw_buf_append_str(b, GW_STR_LIT("\"}}"));
    bench_up_send_named_event(c, "content_block_delta", b, false);
}

/* One content_block_delta: thinking, --text (or the tool results' echo), or a chunk
 * of a tool-call answer. */
static void
stream_delta(struct bench_up_conn *c)
{
    static const char think[] =
        "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
        "{\"type\":\"thinking_delta\",\"thinking\":\"" BENCH_UP_THINK "\"}}";
    static const struct gw_buf think_ev = {(char *)(uintptr_t)think, sizeof(think) - 1, 0};
    struct gw_buf *b = &c->t->body;
    struct gw_str text = bench_up_chunk_text(c);
    uint64_t k = bench_up_content_index(c);

    if (bench_up_in_reasoning(c)) {
        bench_up_send_named_event(c, "content_block_delta", &think_ev, false);
        return;
    }
    if (k == 0 && c->p.reasoning > 0)
        thinking_close(c);
    if (c->ans == BENCH_UP_ANS_TOOL_CALL) {
        tool_chunk(c, k);
        return;
    }
    gw_buf_reset(b);
    (void)gw_buf_printf(b,
                        "{\"type\":\"content_block_delta\",\"index\":%u,"
                        "\"delta\":{\"type\":\"text_delta\",\"text\":\"",
                        content_base(c));
    (void)gw_buf_append(b, text.ptr, text.len);
    (void)gw_buf_append_str(b, GW_STR_LIT("\"}}"));
    bench_up_send_named_event(c, "content_block_delta", b, false);
}

/* content_block_stop of the last block, message_delta (stop reason, output tokens),
 * message_stop and the end of the body. */
static void
stream_close(struct bench_up_conn *c)
{
    static const char stop[] = "{\"type\":\"message_stop\"}";
    static const struct gw_buf stop_ev = {(char *)(uintptr_t)stop, sizeof(stop) - 1, 0};
    struct gw_buf *b = &c->t->body;
    bool tools = c->ans == BENCH_UP_ANS_TOOL_CALL;

    if (c->p.chunks == 0 && c->p.reasoning > 0)
        thinking_close(c); /* no content chunk closed it */
    block_stop(c, content_base(c) + (tools ? c->p.tool_n - 1 : 0));
    gw_buf_reset(b);
    (void)gw_buf_printf(b,
                        "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"%s\","
                        "\"stop_sequence\":null}",
                        tools ? "tool_use" : "end_turn");
    if (!bench_up_g.no_usage)
        (void)gw_buf_printf(b, ",\"usage\":{\"output_tokens\":%llu}", (unsigned long long)c->sent);
    (void)gw_buf_append(b, "}", 1);
    bench_up_send_named_event(c, "message_delta", b, false);
    bench_up_send_named_event(c, "message_stop", &stop_ev, true);
}

/* The in-stream error event of an overloaded upstream, then the end of the body. */
static void
stream_error(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;

    render_error(b, "overloaded_error", "Overloaded");
    bench_up_send_named_event(c, "error", b, true);
}

static void
stream_garbage(struct bench_up_conn *c)
{
    static const struct gw_buf ev = {(char *)(uintptr_t)BENCH_UP_GARBAGE,
                                     sizeof(BENCH_UP_GARBAGE) - 1, 0};

    bench_up_send_named_event(c, "content_block_delta", &ev, true);
}

/* The tool_result blocks of a last user message: content, tool_use_id. */
static bool
tool_results(struct bench_up_conn *c, json_t *root)
{
    json_t *msgs = json_object_get(root, "messages");
    json_t *m = json_array_get(msgs, json_array_size(msgs) - 1), *role, *blk;
    bool any = false;
    size_t i;

    role = json_object_get(m, "role");
    if (!json_is_string(role) || strcmp(json_string_value(role), "user") != 0)
        return false;
    json_array_foreach(json_object_get(m, "content"), i, blk)
    {
        json_t *type = json_object_get(blk, "type");

        if (json_is_string(type) && strcmp(json_string_value(type), "tool_result") == 0) {
            bench_up_append_tool_said(&c->answer, json_object_get(blk, "content"),
                                      json_object_get(blk, "tool_use_id"));
            any = true;
        }
    }
    return any;
}

/* count_tokens: {"input_tokens":P}. */
static void
count_answer(struct bench_up_conn *c, struct gw_buf *b)
{
    gw_buf_reset(b);
    (void)gw_buf_printf(b, "{\"input_tokens\":%llu}", (unsigned long long)c->prompt_tokens);
}

const struct bench_up_shape bench_up_messages = {
    .stream_ctype = NULL,
    .tool_chunks = BENCH_UP_TOOL_PIECES,
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
    .models_answer = NULL,
};
