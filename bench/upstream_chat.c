/* SPDX-License-Identifier: MIT
 * bench/upstream_chat.c - `gwbench upstream`'s OpenAI Chat Completions templates:
 * the chat.completion answer, the chat.completion.chunk stream ending in [DONE], the
 * in-stream error, and the echo of role "tool" messages. --reasoning does not apply.
 * Owns:    nothing; renders into the worker's scratch buffers.
 * Threads: a connection's worker.
 * See:     bench/upstream-priv.h, docs/gwbench.md
 */
#include "bench/upstream-priv.h"

#include <string.h>

static void
render_usage(struct gw_buf *b, const struct bench_up_conn *c, uint64_t completion)
{
    (void)gw_buf_printf(b,
                        "\"usage\":{\"prompt_tokens\":%llu,\"completion_tokens\":%llu,"
                        "\"total_tokens\":%llu,\"prompt_tokens_details\":{\"cached_tokens\":%llu}}",
                        (unsigned long long)c->prompt_tokens, (unsigned long long)completion,
                        (unsigned long long)(c->prompt_tokens + completion),
                        (unsigned long long)c->p.cached);
}

static void
render_answer(struct bench_up_conn *c, struct gw_buf *b)
{
    struct gw_str text = bench_up_chunk_text(c), model = bench_up_model(c);

    gw_buf_reset(b);
    (void)gw_buf_printf(b,
                        "{\"id\":\"chatcmpl-bench-%llu\",\"object\":\"chat.completion\","
                        "\"created\":%llu,\"model\":\"%.*s\",\"choices\":[{\"index\":0,"
                        "\"message\":{\"role\":\"assistant\",\"content\":",
                        (unsigned long long)c->id, (unsigned long long)c->created, (int)model.len,
                        model.ptr);
    if (c->ans == BENCH_UP_ANS_TOOL_CALL) {
        (void)gw_buf_append_str(b, GW_STR_LIT("null,\"tool_calls\":["));
        for (unsigned i = 0; i < c->p.tool_n; i++) {
            (void)gw_buf_printf(b,
                                "%s{\"id\":\"call_bench_%llu_%u\",\"type\":\"function\","
                                "\"function\":{\"name\":\"%s\",\"arguments\":\"",
                                i ? "," : "", (unsigned long long)c->id, i, c->p.tool[i]);
            bench_up_append_tool_args(b, i, true);
            (void)gw_buf_append_str(b, GW_STR_LIT("\"}}"));
        }
        (void)gw_buf_append_str(b, GW_STR_LIT("]},\"finish_reason\":\"tool_calls\"}]"));
    } else {
        (void)gw_buf_append(b, "\"", 1);
        for (uint64_t i = 0; i < c->p.chunks; i++)
            (void)gw_buf_append(b, text.ptr, text.len);
        (void)gw_buf_append_str(b, GW_STR_LIT("\"},\"finish_reason\":\"stop\"}]"));
    }
    if (!bench_up_g.no_usage) {
        (void)gw_buf_append(b, ",", 1);
        render_usage(b, c, c->p.chunks);
    }
    (void)gw_buf_append(b, "}", 1);
}

/* Replaces <b> with a chunk's members up to and including `"model":"M",`. */
static void
chunk_head(struct bench_up_conn *c, struct gw_buf *b)
{
    struct gw_str model = bench_up_model(c);

    gw_buf_reset(b);
    (void)gw_buf_printf(b,
                        "{\"id\":\"chatcmpl-bench-%llu\",\"object\":\"chat.completion.chunk\","
                        "\"created\":%llu,\"model\":\"%.*s\",",
                        (unsigned long long)c->id, (unsigned long long)c->created, (int)model.len,
                        model.ptr);
}

/* The role chunk (content null in a tool-call answer, "" otherwise). */
static void
stream_open(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;

    chunk_head(c, b);
    if (c->ans == BENCH_UP_ANS_TOOL_CALL)
        (void)gw_buf_append_str(
            b, GW_STR_LIT("\"choices\":[{\"index\":0,\"delta\":{\"role\":"
                          "\"assistant\",\"content\":null},\"finish_reason\":null}]}"));
    else
        (void)gw_buf_append_str(b, GW_STR_LIT("\"choices\":[{\"index\":0,\"delta\":{\"role\":"
                                              "\"assistant\",\"content\":\"\"},\"finish_reason\":"
                                              "null}]}"));
    bench_up_send_event(c, b, false);
}

/* Content chunk c->sent of a tool-call answer: the head of call i (index, id, type,
 * name, empty arguments) or one piece of its arguments. */
static void
tool_chunk(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;
    unsigned i = (unsigned)(c->sent / BENCH_UP_TOOL_PIECES);
    unsigned k = (unsigned)(c->sent % BENCH_UP_TOOL_PIECES);

    chunk_head(c, b);
    if (k == 0) {
        (void)gw_buf_printf(b,
                            "\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%u,"
                            "\"id\":\"call_bench_%llu_%u\",\"type\":\"function\",\"function\":"
                            "{\"name\":\"%s\",\"arguments\":\"\"}}]},\"finish_reason\":null}]}",
                            i, (unsigned long long)c->id, i, c->p.tool[i]);
    } else {
        (void)gw_buf_printf(b,
                            "\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%u,"
                            "\"function\":{\"arguments\":\"",
                            i);
        (void)bench_up_append_json_inner(b, bench_up_tool_args[i][k - 1],
                                         strlen(bench_up_tool_args[i][k - 1]));
        (void)gw_buf_append_str(b, GW_STR_LIT("\"}}]},\"finish_reason\":null}]}"));
    }
    bench_up_send_event(c, b, false);
}

static void
stream_delta(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;
    struct gw_str text = bench_up_chunk_text(c);

    if (c->ans == BENCH_UP_ANS_TOOL_CALL) {
        tool_chunk(c);
        return;
    }
    chunk_head(c, b);
    (void)gw_buf_append_str(b, GW_STR_LIT("\"choices\":[{\"index\":0,\"delta\":{\"content\":\""));
    (void)gw_buf_append(b, text.ptr, text.len);
    (void)gw_buf_append_str(b, GW_STR_LIT("\"},\"finish_reason\":null}]}"));
    bench_up_send_event(c, b, false);
}

/* The finish chunk, the usage chunk when the request asked for it, [DONE]. */
static void
stream_close(struct bench_up_conn *c)
{
    static const struct gw_buf done = {(char *)(uintptr_t) "[DONE]", 6, 0};
    struct gw_buf *b = &c->t->body;

    chunk_head(c, b);
    (void)gw_buf_printf(b, "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"%s\"}]}",
                        c->ans == BENCH_UP_ANS_TOOL_CALL ? "tool_calls" : "stop");
    bench_up_send_event(c, b, false);
    if (c->include_usage && !bench_up_g.no_usage) {
        chunk_head(c, b);
        (void)gw_buf_append_str(b, GW_STR_LIT("\"choices\":[],"));
        render_usage(b, c, c->sent);
        (void)gw_buf_append(b, "}", 1);
        bench_up_send_event(c, b, false);
    }
    bench_up_send_event(c, &done, true);
}

/* An OpenAI error object as a data event: no finish chunk, no [DONE]. */
static void
stream_error(struct bench_up_conn *c)
{
    static const char err[] =
        "{\"error\":{\"message\":\"fake failure\",\"type\":\"server_error\"}}";
    static const struct gw_buf ev = {(char *)(uintptr_t)err, sizeof(err) - 1, 0};

    bench_up_send_event(c, &ev, true);
}

static void
stream_garbage(struct bench_up_conn *c)
{
    static const struct gw_buf ev = {(char *)(uintptr_t)BENCH_UP_GARBAGE,
                                     sizeof(BENCH_UP_GARBAGE) - 1, 0};

    bench_up_send_event(c, &ev, true);
}

/* The trailing run of role "tool" messages: content, tool_call_id. */
static bool
tool_results(struct bench_up_conn *c, json_t *root)
{
    json_t *msgs = json_object_get(root, "messages");
    size_t n = json_array_size(msgs), first = n;

    while (first > 0) {
        json_t *role = json_object_get(json_array_get(msgs, first - 1), "role");

        if (!json_is_string(role) || strcmp(json_string_value(role), "tool") != 0)
            break;
        first--;
    }
    for (size_t i = first; i < n; i++) {
        json_t *m = json_array_get(msgs, i);

        bench_up_append_tool_said(&c->answer, json_object_get(m, "content"),
                                  json_object_get(m, "tool_call_id"));
    }
    return first < n;
}

/* GET .../v1/models: one model in a list both OpenAI's (object, owned_by) and Anthropic's
 * (type, display_name, has_more) clients read. */
static void
models_answer(struct bench_up_conn *c, struct gw_buf *b)
{
    (void)c;
    gw_buf_reset(b);
    (void)gw_buf_append_str(
        b, GW_STR_LIT("{\"object\":\"list\",\"data\":[{\"id\":\"gpt-test\",\"object\":\"model\","
                      "\"type\":\"model\",\"created\":1700000000,\"created_at\":"
                      "\"2023-11-14T22:13:20Z\",\"owned_by\":\"gwbench\",\"display_name\":"
                      "\"gwbench fake model\"}],\"has_more\":false,\"first_id\":\"gpt-test\","
                      "\"last_id\":\"gpt-test\"}"));
}

const struct bench_up_shape bench_up_chat = {
    .stream_ctype = NULL,
    .tool_chunks = BENCH_UP_TOOL_PIECES,
    .reasoning = false,
    .prepare = NULL,
    .tool_results = tool_results,
    .render_answer = render_answer,
    .stream_open = stream_open,
    .stream_delta = stream_delta,
    .stream_close = stream_close,
    .stream_error = stream_error,
    .stream_garbage = stream_garbage,
    .error_body = NULL,
    .models_answer = models_answer,
};
