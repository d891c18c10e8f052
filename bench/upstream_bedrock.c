/* SPDX-License-Identifier: MIT
 * bench/upstream_bedrock.c - `gwbench upstream`'s AWS Bedrock Converse templates:
 * POST <prefix>/model/{modelId}/converse (a JSON answer) and .../converse-stream (the
 * ConverseStream events, each an application/vnd.amazon.eventstream message framed and
 * CRC'd here), toolUse and reasoningContent blocks, AWS's error answers (x-amzn-ErrorType
 * and {"message":...}), the throttlingException mid-stream, a frame with a broken CRC
 * (garbage-sse), and the SigV4 check of every request (bench/sigv4.c) when --aws-* keys
 * are given. The model id comes percent-decoded from the path.
 * Usage: inputTokens = P - cache reads (--cached) - cache writes (--cache-write),
 * outputTokens = reasoning deltas + content chunks, totalTokens the sum of all four.
 * Owns:    nothing; renders into the worker's scratch buffers.
 * Threads: a connection's worker.
 * See:     bench/upstream-priv.h, bench/sigv4.h, docs/gwbench.md
 */
#include "bench/upstream-priv.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include <http_parser.h>

#include "bench/sigv4.h"
#include "bench/util.h"

/* The message of a throttling answer or exception, as Bedrock words it. */
#define BR_THROTTLED "Too many requests, please wait before trying again."

/* What x-amzn-ErrorType carries after the type: the service's namespace. */
#define BR_NS_BEDROCK ":http://internal.amazon.com/coral/com.amazon.bedrock/"
#define BR_NS_AUTH ":http://internal.amazon.com/coral/com.amazon.coral.service/"

/* The "p" member every event's payload carries: Bedrock pads its events with one so
 * that their sizes say nothing about their content; a reader must ignore it. */
#define BR_PAD ",\"p\":\"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0\"}"

/* ---- the route ---- */

bool
bench_up_bedrock_route(struct bench_up_conn *c, const char *u, size_t n)
{
    static const char mark[] = "/model/";
    const char *m = NULL, *slash;
    size_t rest;

    for (const char *p = u; (p = memmem(p, n - (size_t)(p - u), mark, sizeof(mark) - 1)) != NULL;
         p++)
        m = p + sizeof(mark) - 1; /* the last one */
    if (m == NULL || (slash = memchr(m, '/', n - (size_t)(m - u))) == NULL || slash == m)
        return false;
    rest = n - (size_t)(slash - u);
    if (rest == 9 && memcmp(slash, "/converse", 9) == 0)
        c->bedrock_stream = false;
    else if (rest == 16 && memcmp(slash, "/converse-stream", 16) == 0)
        c->bedrock_stream = true;
    else
        return false;
    c->path_model_off = (size_t)(m - u);
    c->path_model_len = (size_t)(slash - m);
    return true;
}

/* ---- errors ---- */

/* The x-amzn-ErrorType line of an answer of HTTP <status>: the type Bedrock names. */
static const char *
error_headers(unsigned status)
{
#define ET(type) "x-amzn-ErrorType: " type BR_NS_BEDROCK "\r\n"
    switch (status) {
    case 400: return ET("ValidationException");
    case 403: return ET("AccessDeniedException");
    case 404: return ET("ResourceNotFoundException");
    case 408: return ET("ModelTimeoutException");
    case 424: return ET("ModelErrorException");
    case 429: return ET("ThrottlingException");
    case 503: return ET("ServiceUnavailableException");
    default:
        return status >= 400 && status < 500 ? ET("ValidationException")
                                             : ET("InternalServerException");
    }
#undef ET
}

/* Replaces <b> with {"message":<msg>}. */
static void
render_message(struct gw_buf *b, const char *msg)
{
    gw_buf_reset(b);
    (void)gw_buf_append_str(b, GW_STR_LIT("{\"message\":"));
    (void)gw_buf_append_json_str(b, gw_str_c(msg));
    (void)gw_buf_append(b, "}", 1);
}

static void
error_body(struct gw_buf *b, unsigned status)
{
    render_message(b, status == 429 ? BR_THROTTLED : "fake failure");
}

/* ---- eventstream framing ---- */

/* CRC-32 (IEEE 802.3, reflected, as zlib's crc32), four bits at a time. */
static uint32_t
crc32_update(uint32_t crc, const unsigned char *p, size_t n)
{
    static const uint32_t t[16] = {
        0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac, 0x76dc4190, 0x6b6b51f4,
        0x4db26158, 0x5005713c, 0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c,
        0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c,
    };

    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        crc = (crc >> 4) ^ t[crc & 15];
        crc = (crc >> 4) ^ t[crc & 15];
    }
    return ~crc;
}

static void
put_u32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Replaces <out> with one eventstream message: the prelude (total length, headers
 * length, their CRC), <n> string headers (name, type 7, u16 length, value), <payload>
 * and the CRC of all that. <break_crc>: the last CRC is off by one bit. */
static void
es_encode(struct gw_buf *out, const char *const hdrs[][2], size_t n, const struct gw_buf *payload,
          bool break_crc)
{
    unsigned char pre[12], crc[4];
    size_t hlen = 0;

    for (size_t i = 0; i < n; i++)
        hlen += 1 + strlen(hdrs[i][0]) + 3 + strlen(hdrs[i][1]);
    put_u32(pre, (uint32_t)(12 + hlen + payload->len + 4));
    put_u32(pre + 4, (uint32_t)hlen);
    put_u32(pre + 8, crc32_update(0, pre, 8));
    gw_buf_reset(out);
    (void)gw_buf_append(out, pre, sizeof(pre));
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(hdrs[i][0]), vl = strlen(hdrs[i][1]);
        unsigned char h[3] = {7, (unsigned char)(vl >> 8), (unsigned char)vl};
        unsigned char l = (unsigned char)nl;

        (void)gw_buf_append(out, &l, 1);
        (void)gw_buf_append(out, hdrs[i][0], nl);
        (void)gw_buf_append(out, h, 3);
        (void)gw_buf_append(out, hdrs[i][1], vl);
    }
    (void)gw_buf_append(out, payload->data, payload->len);
    put_u32(crc, crc32_update(0, (const unsigned char *)out->data, out->len) ^ (break_crc ? 1 : 0));
    (void)gw_buf_append(out, crc, sizeof(crc));
}

/* Sends event <type> with the JSON object in <payload> (padded here) as its own HTTP
 * chunk; <last> ends the body. */
static void
send_event_ex(struct bench_up_conn *c, const char *type, struct gw_buf *payload, bool last,
              bool break_crc)
{
    const char *const hdrs[][2] = {
        {":event-type", type},
        {":content-type", "application/json"},
        {":message-type", "event"},
    };

    if (payload->len > 0 && payload->data[payload->len - 1] == '}') {
        payload->len--;
        (void)gw_buf_append_str(payload, GW_STR_LIT(BR_PAD));
    }
    es_encode(&c->t->es, hdrs, 3, payload, break_crc);
    bench_up_send_chunk(c, NULL, &c->t->es, NULL, last);
}

static void
send_event(struct bench_up_conn *c, const char *type, struct gw_buf *payload, bool last)
{
    send_event_ex(c, type, payload, last, false);
}

/* ---- the request ---- */

/* Refuses the request as AWS does: 403, x-amzn-ErrorType and {"message":...}; counted,
 * and said on stderr with the canonical request computed (<creq>, maybe empty). */
static void
send_refusal(struct bench_up_conn *c, const struct bench_sigv4_refusal *why,
             const struct gw_buf *creq)
{
    struct gw_buf *b = &c->t->body;
    char extra[160];

    bench_up_count_auth_refused();
    if (!bench_up_g.quiet)
        fprintf(stderr, "gwbench upstream: request %llu refused: %s (%s)%s%s\n",
                (unsigned long long)c->id, why->type, why->why,
                creq->len ? "; the canonical request here:\n" : "", creq->len ? creq->data : "");
    snprintf(extra, sizeof(extra), "x-amzn-ErrorType: %s" BR_NS_AUTH "\r\n", why->type);
    render_message(b, why->message);
    bench_up_send_simple(c, 403, "application/json", extra, b->data, b->len);
}

/* The SigV4 check of the request against the --aws-* key; true when it refused. */
static bool
refused(struct bench_up_conn *c)
{
    struct bench_sigv4_creds k = {bench_up_g.aws_key_id, bench_up_g.aws_secret,
                                  bench_up_g.aws_region, "bedrock", bench_up_g.aws_token};
    const char *u = c->url.data, *q = strchr(u, '?');
    struct bench_sigv4_req r = {
        .method = gw_str_c(http_method_str((enum http_method)c->parser.method)),
        .path = {u, q ? (size_t)(q - u) : c->url.len},
        .query = q ? gw_str_c(q + 1) : GW_STR_LIT(""),
        .hdrs = c->hraw.data ? c->hraw.data : "",
        .hdrs_len = c->hraw.len,
        .body = c->body.data ? c->body.data : "",
        .body_len = c->body.len,
        .now = (int64_t)time(NULL),
    };
    struct bench_sigv4_refusal why;
    struct gw_buf creq = {0};
    bool ok = bench_sigv4_verify(&k, &r, &why, &creq);

    if (!ok)
        send_refusal(c, &why, &creq);
    gw_buf_fini(&creq);
    return !ok;
}

/* The model id percent-decoded from the path (JSON-escaped into c->model), whether to
 * stream from the path, then the SigV4 check when keys are set. */
static bool
prepare(struct bench_up_conn *c)
{
    const char *m = c->url.data + c->path_model_off;
    char id[512];
    int n = gw_pct_decode((struct gw_str){m, c->path_model_len}, id, sizeof(id));

    c->stream = c->bedrock_stream;
    gw_buf_reset(&c->model);
    if (n >= 0)
        (void)bench_up_append_json_inner(&c->model, id, (size_t)n);
    else
        (void)bench_up_append_json_inner(&c->model, m, c->path_model_len);
    return bench_up_g.aws_key_id != NULL && refused(c);
}

/* The toolResult blocks of a last user message: content (a lone {"json":...} block is
 * its object), toolUseId. */
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
        json_t *tr = json_object_get(blk, "toolResult"), *content, *only;

        if (!json_is_object(tr))
            continue;
        content = json_object_get(tr, "content");
        only = json_array_size(content) == 1 ? json_array_get(content, 0) : NULL;
        if (json_object_get(only, "json") != NULL)
            content = json_object_get(only, "json");
        bench_up_append_tool_said(&c->answer, content, json_object_get(tr, "toolUseId"));
        any = true;
    }
    return any;
}

/* ---- the answer ---- */

/* The index of the first content block after the reasoning block (if any). */
static unsigned
content_base(const struct bench_up_conn *c)
{
    return c->p.reasoning > 0 ? 1 : 0;
}

/* Appends "usage":{...} with <output> output tokens. */
static void
render_usage(const struct bench_up_conn *c, struct gw_buf *b, uint64_t output)
{
    uint64_t r = c->p.cached, w = c->p.cache_write;
    uint64_t input = c->prompt_tokens > r + w ? c->prompt_tokens - r - w : 0;

    (void)gw_buf_printf(
        b, "\"usage\":{\"inputTokens\":%llu,\"outputTokens\":%llu,\"totalTokens\":%llu",
        (unsigned long long)input, (unsigned long long)output,
        (unsigned long long)(input + output + r + w));
    if (r > 0)
        (void)gw_buf_printf(b, ",\"cacheReadInputTokens\":%llu", (unsigned long long)r);
    if (w > 0)
        (void)gw_buf_printf(b, ",\"cacheWriteInputTokens\":%llu", (unsigned long long)w);
    (void)gw_buf_append(b, "}", 1);
}

/* Appends "metrics":{"latencyMs":N}, N the time since the request came. */
static void
render_metrics(const struct bench_up_conn *c, struct gw_buf *b)
{
    uint64_t now = bench_now_us();

    (void)gw_buf_printf(b, "\"metrics\":{\"latencyMs\":%llu}",
                        (unsigned long long)(now > c->t0_us ? (now - c->t0_us) / 1000u : 0));
}

/* Appends the toolUse block of call <i>: toolUseId, name, input. */
static void
tool_use_block(const struct bench_up_conn *c, struct gw_buf *b, unsigned i)
{
    (void)gw_buf_printf(b,
                        "{\"toolUse\":{\"toolUseId\":\"tooluse_bench_%llu_%u\",\"name\":\"%s\","
                        "\"input\":",
                        (unsigned long long)c->id, i, c->p.tool[i]);
    bench_up_append_tool_args(b, i, false);
    (void)gw_buf_append_str(b, GW_STR_LIT("}}"));
}

static void
render_answer(struct bench_up_conn *c, struct gw_buf *b)
{
    struct gw_str text = bench_up_chunk_text(c);
    bool tools = c->ans == BENCH_UP_ANS_TOOL_CALL;

    gw_buf_reset(b);
    (void)gw_buf_append_str(
        b, GW_STR_LIT("{\"output\":{\"message\":{\"role\":\"assistant\",\"content\":["));
    if (c->p.reasoning > 0) {
        (void)gw_buf_append_str(
            b, GW_STR_LIT("{\"reasoningContent\":{\"reasoningText\":{\"text\":\""));
        for (uint64_t i = 0; i < c->p.reasoning; i++)
            (void)gw_buf_append_str(b, GW_STR_LIT(BENCH_UP_THINK));
        (void)gw_buf_append_str(b, GW_STR_LIT("\",\"signature\":\"" BENCH_UP_SIGNATURE "\"}}},"));
    }
    if (tools) {
        for (unsigned i = 0; i < c->p.tool_n; i++) {
            if (i > 0)
                (void)gw_buf_append(b, ",", 1);
            tool_use_block(c, b, i);
        }
    } else {
        (void)gw_buf_append_str(b, GW_STR_LIT("{\"text\":\""));
        for (uint64_t i = 0; i < c->p.chunks; i++)
            (void)gw_buf_append(b, text.ptr, text.len);
        (void)gw_buf_append_str(b, GW_STR_LIT("\"}"));
    }
    (void)gw_buf_printf(b, "]}},\"stopReason\":\"%s\",", tools ? "tool_use" : "end_turn");
    if (!bench_up_g.no_usage) {
        render_usage(c, b, bench_up_steps(c));
        (void)gw_buf_append(b, ",", 1);
    }
    render_metrics(c, b);
    (void)gw_buf_append(b, "}", 1);
}

/* ---- the stream ----
 * messageStart with the headers; per paced delta a contentBlockDelta (reasoning text,
 * text) or, for the head of a tool call, contentBlockStart (text blocks have none);
 * contentBlockStop after each block; messageStop and metadata at the end. */

static const char *
stream_ctype(const struct bench_up_conn *c)
{
    (void)c;
    return "application/vnd.amazon.eventstream";
}

static void
stream_open(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;

    gw_buf_reset(b);
    (void)gw_buf_append_str(b, GW_STR_LIT("{\"role\":\"assistant\"}"));
    send_event(c, "messageStart", b, false);
}

static void
block_stop(struct bench_up_conn *c, unsigned index)
{
    struct gw_buf *b = &c->t->body;

    gw_buf_reset(b);
    (void)gw_buf_printf(b, "{\"contentBlockIndex\":%u}", index);
    send_event(c, "contentBlockStop", b, false);
}

/* After the reasoning: the signature delta and the stop of block 0. */
static void
reasoning_close(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;

    gw_buf_reset(b);
    (void)gw_buf_append_str(b,
                            GW_STR_LIT("{\"contentBlockIndex\":0,\"delta\":{\"reasoningContent\":"
                                       "{\"signature\":\"" BENCH_UP_SIGNATURE "\"}}}"));
    send_event(c, "contentBlockDelta", b, false);
    block_stop(c, 0);
}

/* Content chunk <k> of a tool-call answer: for the head of call i, the stop of the
 * previous tool block and contentBlockStart of block i; else one piece of its input. */
static void
tool_chunk(struct bench_up_conn *c, uint64_t k)
{
    struct gw_buf *b = &c->t->body;
    unsigned i = (unsigned)(k / BENCH_UP_TOOL_PIECES), piece = (unsigned)(k % BENCH_UP_TOOL_PIECES);
    unsigned index = content_base(c) + i;

    if (piece == 0) {
        if (i > 0)
            block_stop(c, index - 1);
        gw_buf_reset(b); /* block_stop used it */
        (void)gw_buf_printf(b,
                            "{\"contentBlockIndex\":%u,\"start\":{\"toolUse\":{\"toolUseId\":"
                            "\"tooluse_bench_%llu_%u\",\"name\":\"%s\"}}}",
                            index, (unsigned long long)c->id, i, c->p.tool[i]);
        send_event(c, "contentBlockStart", b, false);
        return;
    }
    gw_buf_reset(b);
    (void)gw_buf_printf(b, "{\"contentBlockIndex\":%u,\"delta\":{\"toolUse\":{\"input\":\"", index);
    (void)bench_up_append_json_inner(b, bench_up_tool_args[i][piece - 1],
                                     strlen(bench_up_tool_args[i][piece - 1]));
    (void)gw_buf_append_str(b, GW_STR_LIT("\"}}}"));
    send_event(c, "contentBlockDelta", b, false);
}

/* Renders the text delta of block <index> into <b>. */
static void
text_delta(struct bench_up_conn *c, struct gw_buf *b, unsigned index)
{
    struct gw_str text = bench_up_chunk_text(c);

    gw_buf_reset(b);
    (void)gw_buf_printf(b, "{\"contentBlockIndex\":%u,\"delta\":{\"text\":\"", index);
    (void)gw_buf_append(b, text.ptr, text.len);
    (void)gw_buf_append_str(b, GW_STR_LIT("\"}}"));
}

static void
stream_delta(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;
    uint64_t k = bench_up_content_index(c);

    if (bench_up_in_reasoning(c)) {
        gw_buf_reset(b);
        (void)gw_buf_append_str(b, GW_STR_LIT("{\"contentBlockIndex\":0,\"delta\":{"
                                              "\"reasoningContent\":{\"text\":\"" BENCH_UP_THINK
                                              "\"}}}"));
        send_event(c, "contentBlockDelta", b, false);
        return;
    }
    if (k == 0 && c->p.reasoning > 0)
        reasoning_close(c);
    if (c->ans == BENCH_UP_ANS_TOOL_CALL) {
        tool_chunk(c, k);
        return;
    }
    text_delta(c, b, content_base(c));
    send_event(c, "contentBlockDelta", b, false);
}

/* The stop of the last block (if there was one), messageStop, metadata (unless
 * --no-usage) and the end of the body. */
static void
stream_close(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;
    bool tools = c->ans == BENCH_UP_ANS_TOOL_CALL;

    if (c->p.chunks == 0 && c->p.reasoning > 0)
        reasoning_close(c); /* no content chunk closed it */
    if (c->p.chunks > 0)
        block_stop(c, content_base(c) + (tools ? c->p.tool_n - 1 : 0));
    gw_buf_reset(b);
    (void)gw_buf_printf(b, "{\"stopReason\":\"%s\"}", tools ? "tool_use" : "end_turn");
    send_event(c, "messageStop", b, bench_up_g.no_usage);
    if (bench_up_g.no_usage)
        return;
    gw_buf_reset(b);
    (void)gw_buf_append(b, "{", 1);
    render_usage(c, b, c->sent);
    (void)gw_buf_append(b, ",", 1);
    render_metrics(c, b);
    (void)gw_buf_append(b, "}", 1);
    send_event(c, "metadata", b, true);
}

/* A throttlingException message (:message-type exception), then the end of the body. */
static void
stream_error(struct bench_up_conn *c)
{
    static const char *const hdrs[][2] = {
        {":exception-type", "throttlingException"},
        {":content-type", "application/json"},
        {":message-type", "exception"},
    };
    struct gw_buf *b = &c->t->body;

    render_message(b, BR_THROTTLED);
    es_encode(&c->t->es, hdrs, 3, b, false);
    bench_up_send_chunk(c, NULL, &c->t->es, NULL, true);
}

/* The next text delta (its first, for a tool-call answer) as a message whose CRC does
 * not match, then the end of the body. */
static void
stream_garbage(struct bench_up_conn *c)
{
    struct gw_buf *b = &c->t->body;

    text_delta(c, b, content_base(c));
    send_event_ex(c, "contentBlockDelta", b, true, true);
}

const struct bench_up_shape bench_up_bedrock = {
    .stream_ctype = stream_ctype,
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
    .error_headers = error_headers,
    .count_answer = NULL,
    .models_answer = NULL,
};
