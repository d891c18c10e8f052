/* SPDX-License-Identifier: MIT
 * bench/upstream_responses.c - `gwbench upstream`'s OpenAI Responses templates: the
 * response object (a reasoning item with --reasoning, then a message item or one
 * function_call item per tool), the named-event stream with sequence numbers
 * (response.created ... response.completed), response.failed for error-mid, and the
 * echo of trailing function_call_output input items.
 * Usage: input_tokens P (cached_tokens K and cache_write_tokens W within it),
 * output_tokens = content chunks + reasoning deltas, reasoning_tokens = the latter.
 * Owns:    nothing; renders into the worker's scratch buffers.
 * Threads: a connection's worker.
 * See:     bench/upstream-priv.h, docs/gwbench.md
 */
#include "bench/upstream-priv.h"

#include <string.h>

/* ---- the response object and its items ---- */

/* Appends the response object's members up to and including `"output":[`. <error> is
 * the JSON of its error member. */
static void
response_head(const struct bench_up_conn *c, struct gw_buf *b, const char *status,
              const char *error)
{
    struct gw_str model = bench_up_model(c);

    (void)gw_buf_printf(b,
                        "{\"id\":\"resp_bench_%llu\",\"object\":\"response\",\"created_at\":%llu,"
                        "\"status\":\"%s\",\"background\":false,\"error\":%s,"
                        "\"incomplete_details\":null,\"instructions\":null,"
                        "\"max_output_tokens\":null,\"model\":\"%.*s\",\"output\":[",
                        (unsigned long long)c->id, (unsigned long long)c->created, status, error,
                        (int)model.len, model.ptr);
}

/* Appends the members after the output array and closes the object; <usage>: the
 * usage object (unless --no-usage, which leaves the member out), else "usage":null. */
static void
response_tail(const struct bench_up_conn *c, struct gw_buf *b, bool usage)
{
    uint64_t n = c->p.reasoning, out = c->p.chunks + n;

    (void)gw_buf_append_str(b, GW_STR_LIT("],\"parallel_tool_calls\":true,"
                                          "\"previous_response_id\":null,\"reasoning\":"
                                          "{\"effort\":null,\"summary\":null},\"store\":true,"
                                          "\"temperature\":1.0,\"text\":{\"format\":"
                                          "{\"type\":\"text\"}},\"tool_choice\":\"auto\","
                                          "\"tools\":[],\"top_p\":1.0,\"truncation\":"
                                          "\"disabled\","));
    if (!usage)
        (void)gw_buf_append_str(b, GW_STR_LIT("\"usage\":null,"));
    else if (!bench_up_g.no_usage)
        (void)gw_buf_printf(b,
                            "\"usage\":{\"input_tokens\":%llu,\"input_tokens_details\":"
                            "{\"cached_tokens\":%llu,\"cache_write_tokens\":%llu},"
                            "\"output_tokens\":%llu,\"output_tokens_details\":"
                            "{\"reasoning_tokens\":%llu},\"total_tokens\":%llu},",
                            (unsigned long long)c->prompt_tokens, (unsigned long long)c->p.cached,
                            (unsigned long long)c->p.cache_write, (unsigned long long)out,
                            (unsigned long long)n, (unsigned long long)(c->prompt_tokens + out));
    (void)gw_buf_append_str(b, GW_STR_LIT("\"user\":null,\"metadata\":{}}"));
}

/* The output index of the message or of the first function_call (after the reasoning). */
static unsigned
output_base(const struct bench_up_conn *c)
{
    return c->p.reasoning > 0 ? 1 : 0;
}

/* Appends the reasoning summary text: every delta's text. */
static void
append_summary(const struct bench_up_conn *c, struct gw_buf *b)
{
    for (uint64_t i = 0; i < c->p.reasoning; i++)
        (void)gw_buf_append_str(b, GW_STR_LIT(BENCH_UP_THINK));
}

/* Item renderers take the index of a call (<i>, unused by the others) and whether
 * the item is done (else just added). */

/* Appends the reasoning item: empty when it is just added, else its summary and the
 * encrypted content. */
static void
reasoning_item(const struct bench_up_conn *c, struct gw_buf *b, unsigned i, bool done)
{
    (void)i;
    (void)gw_buf_printf(b, "{\"id\":\"rs_bench_%llu\",\"type\":\"reasoning\",\"summary\":[",
                        (unsigned long long)c->id);
    if (done) {
        (void)gw_buf_append_str(b, GW_STR_LIT("{\"type\":\"summary_text\",\"text\":\""));
        append_summary(c, b);
        (void)gw_buf_append_str(
            b, GW_STR_LIT("\"}],\"encrypted_content\":\"" BENCH_UP_SIGNATURE "\"}"));
    } else {
        (void)gw_buf_append_str(b, GW_STR_LIT("]}"));
    }
}

/* Appends the whole text of the answer: chunks times the chunk text. */
static void
append_text(const struct bench_up_conn *c, struct gw_buf *b)
{
    struct gw_str text = bench_up_chunk_text(c);

    for (uint64_t i = 0; i < c->p.chunks; i++)
        (void)gw_buf_append(b, text.ptr, text.len);
}

/* Appends an output_text part: empty when <full> is false, else the whole text. */
static void
output_text(const struct bench_up_conn *c, struct gw_buf *b, bool full)
{
    (void)gw_buf_append_str(b, GW_STR_LIT("{\"type\":\"output_text\",\"annotations\":[],"
                                          "\"logprobs\":[],\"text\":\""));
    if (full)
        append_text(c, b);
    (void)gw_buf_append_str(b, GW_STR_LIT("\"}"));
}

/* Appends the message item: in progress without content, or completed with its text. */
static void
message_item(const struct bench_up_conn *c, struct gw_buf *b, unsigned i, bool done)
{
    (void)i;
    (void)gw_buf_printf(b,
                        "{\"id\":\"msg_bench_%llu\",\"type\":\"message\",\"status\":\"%s\","
                        "\"content\":[",
                        (unsigned long long)c->id, done ? "completed" : "in_progress");
    if (done)
        output_text(c, b, true);
    (void)gw_buf_append_str(b, GW_STR_LIT("],\"role\":\"assistant\"}"));
}

/* Appends function_call item <i>: in progress with empty arguments, or completed. */
static void
call_item(const struct bench_up_conn *c, struct gw_buf *b, unsigned i, bool done)
{
    (void)gw_buf_printf(b,
                        "{\"id\":\"fc_bench_%llu_%u\",\"type\":\"function_call\","
                        "\"status\":\"%s\",\"arguments\":\"",
                        (unsigned long long)c->id, i, done ? "completed" : "in_progress");
    if (done)
        bench_up_append_tool_args(b, i, true);
    (void)gw_buf_printf(b, "\",\"call_id\":\"call_bench_%llu_%u\",\"name\":\"%s\"}",
                        (unsigned long long)c->id, i, c->p.tool[i]);
}

/* Appends the complete output items. */
static void
output_items(const struct bench_up_conn *c, struct gw_buf *b)
{
    if (c->p.reasoning > 0) {
        reasoning_item(c, b, 0, true);
        (void)gw_buf_append(b, ",", 1);
    }
    if (c->ans != BENCH_UP_ANS_TOOL_CALL) {
        message_item(c, b, 0, true);
        return;
    }
    for (unsigned i = 0; i < c->p.tool_n; i++) {
        if (i > 0)
            (void)gw_buf_append(b, ",", 1);
        call_item(c, b, i, true);
    }
}

static void
render_answer(struct bench_up_conn *c, struct gw_buf *b)
{
    gw_buf_reset(b);
    response_head(c, b, "completed", "null");
    output_items(c, b);
    response_tail(c, b, true);
}

/* ---- the stream ----
 * Every event is `event: TYPE` and data {"type":TYPE,"sequence_number":N,...}, N
 * counting the stream's events from 0. */

/* Replaces <b> with the opening of event <type>'s data, up to the comma after the
 * sequence number. */
static void
event_begin(const struct bench_up_conn *c, struct gw_buf *b, const char *type)
{
    gw_buf_reset(b);
    (void)gw_buf_printf(b, "{\"type\":\"%s\",\"sequence_number\":%llu,", type,
                        (unsigned long long)c->events);
}

/* Closes <b> and sends it as event <type>. */
static void
event_send(struct bench_up_conn *c, struct gw_buf *b, const char *type, bool last)
{
    (void)gw_buf_append(b, "}", 1);
    bench_up_send_named_event(c, type, b, last);
}

/* An event carrying the whole response: <type>, its <status> and <error>. */
static void
response_event(struct bench_up_conn *c, const char *type, const char *status, const char *error,
               bool last)
{
    struct gw_buf *b = &c->t->body;
    bool done = strcmp(status, "completed") == 0;

    event_begin(c, b, type);
    (void)gw_buf_append_str(b, GW_STR_LIT("\"response\":"));
    response_head(c, b, status, error);
    if (done)
        output_items(c, b);
    response_tail(c, b, done);
    event_send(c, b, type, last);
}

/* output_item.added or .done of the item at <index>; <item> renders it (call <i>). */
static void
item_event(struct bench_up_conn *c, bool done, unsigned index,
           void (*item)(const struct bench_up_conn *, struct gw_buf *, unsigned, bool), unsigned i)
{
    const char *type = done ? "response.output_item.done" : "response.output_item.added";
    struct gw_buf *b = &c->t->body;

    event_begin(c, b, type);
    (void)gw_buf_printf(b, "\"output_index\":%u,\"item\":", index);
    item(c, b, i, done);
    event_send(c, b, type, false);
}

/* A reasoning summary event: part added or done, or the summary text done. */
static void
summary_event(struct bench_up_conn *c, const char *type, bool part, bool full)
{
    struct gw_buf *b = &c->t->body;

    event_begin(c, b, type);
    (void)gw_buf_printf(b,
                        "\"item_id\":\"rs_bench_%llu\",\"output_index\":0,\"summary_index\":0,"
                        "%s\"text\":\"",
                        (unsigned long long)c->id,
                        part ? "\"part\":{\"type\":\"summary_text\"," : "");
    if (full)
        append_summary(c, b);
    (void)gw_buf_append_str(b, part ? GW_STR_LIT("\"}") : GW_STR_LIT("\""));
    event_send(c, b, type, false);
}

/* The first reasoning delta opens the reasoning item and its summary part. */
static void
reasoning_open(struct bench_up_conn *c)
{
    item_event(c, false, 0, reasoning_item, 0);
    summary_event(c, "response.reasoning_summary_part.added", true, false);
}

/* After the last reasoning delta: the summary text and part done, the item done. */
static void
reasoning_close(struct bench_up_conn *c)
{
    summary_event(c, "response.reasoning_summary_text.done", false, true);
    summary_event(c, "response.reasoning_summary_part.done", true, true);
    item_event(c, true, 0, reasoning_item, 0);
}

static void
reasoning_delta(struct bench_up_conn *c)
{
    static const char type[] = "response.reasoning_summary_text.delta";
    struct gw_buf *b = &c->t->body;

    if (c->sent == 0)
        reasoning_open(c);
    event_begin(c, b, type);
    (void)gw_buf_printf(b,
                        "\"item_id\":\"rs_bench_%llu\",\"output_index\":0,\"summary_index\":0,"
                        "\"delta\":\"" BENCH_UP_THINK "\"",
                        (unsigned long long)c->id);
    event_send(c, b, type, false);
}

/* The content part events of the message: added (empty) or done (the whole text). */
static void
part_event(struct bench_up_conn *c, bool done)
{
    const char *type = done ? "response.content_part.done" : "response.content_part.added";
    struct gw_buf *b = &c->t->body;

    event_begin(c, b, type);
    (void)gw_buf_printf(b,
                        "\"item_id\":\"msg_bench_%llu\",\"output_index\":%u,\"content_index\":0,"
                        "\"part\":",
                        (unsigned long long)c->id, output_base(c));
    output_text(c, b, done);
    event_send(c, b, type, false);
}

/* The first text delta opens the message item and its output_text part. */
static void
message_open(struct bench_up_conn *c)
{
    item_event(c, false, output_base(c), message_item, 0);
    part_event(c, false);
}

/* After the last text delta: the text done, the part done, the item done. */
static void
message_close(struct bench_up_conn *c)
{
    static const char type[] = "response.output_text.done";
    struct gw_buf *b = &c->t->body;

    event_begin(c, b, type);
    (void)gw_buf_printf(b,
                        "\"item_id\":\"msg_bench_%llu\",\"output_index\":%u,\"content_index\":0,"
                        "\"logprobs\":[],\"text\":\"",
                        (unsigned long long)c->id, output_base(c));
    append_text(c, b);
    (void)gw_buf_append(b, "\"", 1);
    event_send(c, b, type, false);
    part_event(c, true);
    item_event(c, true, output_base(c), message_item, 0);
}

static void
text_delta(struct bench_up_conn *c)
{
    static const char type[] = "response.output_text.delta";
    struct gw_buf *b = &c->t->body;
    struct gw_str text = bench_up_chunk_text(c);

    event_begin(c, b, type);
    (void)gw_buf_printf(b,
                        "\"item_id\":\"msg_bench_%llu\",\"output_index\":%u,\"content_index\":0,"
                        "\"delta\":\"",
                        (unsigned long long)c->id, output_base(c));
    (void)gw_buf_append(b, text.ptr, text.len);
    (void)gw_buf_append_str(b, GW_STR_LIT("\",\"logprobs\":[]"));
    event_send(c, b, type, false);
}

/* Content chunk <k> of a tool-call answer: the head of call i (output_item.added), or
 * one piece of its arguments; after the last piece, arguments done and the item done. */
static void
tool_chunk(struct bench_up_conn *c, uint64_t k)
{
    static const char delta[] = "response.function_call_arguments.delta";
    static const char done[] = "response.function_call_arguments.done";
    struct gw_buf *b = &c->t->body;
    unsigned i = (unsigned)(k / BENCH_UP_TOOL_PIECES), piece = (unsigned)(k % BENCH_UP_TOOL_PIECES);
    unsigned index = output_base(c) + i;
    const char *arg;

    if (piece == 0) {
        item_event(c, false, index, call_item, i);
        return;
    }
    arg = bench_up_tool_args[i][piece - 1];
    event_begin(c, b, delta);
    (void)gw_buf_printf(b, "\"item_id\":\"fc_bench_%llu_%u\",\"output_index\":%u,\"delta\":\"",
                        (unsigned long long)c->id, i, index);
    (void)bench_up_append_json_inner(b, arg, strlen(arg));
    (void)gw_buf_append(b, "\"", 1);
    event_send(c, b, delta, false);
    if (piece < BENCH_UP_TOOL_PIECES - 1)
        return;
    event_begin(c, b, done);
    (void)gw_buf_printf(b,
                        "\"item_id\":\"fc_bench_%llu_%u\",\"output_index\":%u,\"name\":\"%s\","
                        "\"arguments\":\"",
                        (unsigned long long)c->id, i, index, c->p.tool[i]);
    bench_up_append_tool_args(b, i, true);
    (void)gw_buf_append(b, "\"", 1);
    event_send(c, b, done, false);
    item_event(c, true, index, call_item, i);
}

/* response.created and response.in_progress, at once with the headers. */
static void
stream_open(struct bench_up_conn *c)
{
    response_event(c, "response.created", "in_progress", "null", false);
    response_event(c, "response.in_progress", "in_progress", "null", false);
}

static void
stream_delta(struct bench_up_conn *c)
{
    uint64_t k = bench_up_content_index(c);

    if (bench_up_in_reasoning(c)) {
        reasoning_delta(c);
        return;
    }
    if (k == 0 && c->p.reasoning > 0)
        reasoning_close(c);
    if (c->ans == BENCH_UP_ANS_TOOL_CALL) {
        tool_chunk(c, k);
        return;
    }
    if (k == 0)
        message_open(c);
    text_delta(c);
}

/* The message's closing events (a tool-call answer closed each call after its last
 * piece), then response.completed with the whole response and the end of the body. */
static void
stream_close(struct bench_up_conn *c)
{
    if (c->p.chunks == 0 && c->p.reasoning > 0)
        reasoning_close(c); /* no content chunk closed it */
    if (c->ans != BENCH_UP_ANS_TOOL_CALL) {
        if (c->p.chunks == 0)
            message_open(c);
        message_close(c);
    }
    response_event(c, "response.completed", "completed", "null", true);
}

/* response.failed: the response with status failed and a server_error. */
static void
stream_error(struct bench_up_conn *c)
{
    response_event(c, "response.failed", "failed",
                   "{\"code\":\"server_error\",\"message\":\"fake failure\"}", true);
}

static void
stream_garbage(struct bench_up_conn *c)
{
    static const struct gw_buf ev = {(char *)(uintptr_t)BENCH_UP_GARBAGE,
                                     sizeof(BENCH_UP_GARBAGE) - 1, 0};

    bench_up_send_named_event(c, "response.output_text.delta", &ev, true);
}

/* The trailing run of function_call_output input items: output, call_id. */
static bool
tool_results(struct bench_up_conn *c, json_t *root)
{
    json_t *input = json_object_get(root, "input");
    size_t n = json_array_size(input), first = n;

    while (first > 0) {
        json_t *type = json_object_get(json_array_get(input, first - 1), "type");

        if (!json_is_string(type) || strcmp(json_string_value(type), "function_call_output") != 0)
            break;
        first--;
    }
    for (size_t i = first; i < n; i++) {
        json_t *item = json_array_get(input, i);

        bench_up_append_tool_said(&c->answer, json_object_get(item, "output"),
                                  json_object_get(item, "call_id"));
    }
    return first < n;
}

const struct bench_up_shape bench_up_responses = {
    .stream_ctype = NULL,
    .tool_chunks = BENCH_UP_TOOL_PIECES,
    .reasoning = true,
    .prepare = NULL,
    .tool_results = tool_results,
    .render_answer = render_answer,
    .stream_open = stream_open,
    .stream_delta = stream_delta,
    .stream_close = stream_close,
    .stream_error = stream_error,
    .stream_garbage = stream_garbage,
    .error_body = NULL,
    .count_answer = NULL,
    .models_answer = NULL,
};
