/* SPDX-License-Identifier: MIT
 * dialects/anthropic.h - the Anthropic Messages shape (DESIGN.md 11): dl_anthropic_shape,
 * its row of the hub's table (dialects/canon.h): a Messages request parsed to the
 * canonical request and rendered for a Messages upstream, a Messages upstream's stream
 * events and answers parsed to canonical events (also the inspector of the same-shape
 * relay), canonical events rendered as the frames and answers a Messages client
 * expects, and the shape's error bodies and frames. The files: anthropic_request.c
 * (request), anthropic_answer.c (events and answers, both sides), anthropic.c (errors,
 * the table, shared helpers).
 * Until the pipeline calls the shape's operations, this header also declares the old
 * pairwise Chat -> Messages converter (dl_anthropic_from_chat, _answer_to_chat,
 * _error_to_chat, _stream_*): a Chat Completions client served by a Messages upstream.
 * Pure: no I/O, no clock (the caller passes `created`).
 * Owns:    nothing beyond each call; stream states are caller-owned.
 * Threads: any; a stream state belongs to one thread at a time.
 * See:     dialects/anthropic.c, dialects/anthropic_request.c, dialects/anthropic_answer.c,
 *          tests/unit/dialects/test_anthropic*.c, dialects/canon.h
 */
#ifndef GW_DIALECTS_ANTHROPIC_H
#define GW_DIALECTS_ANTHROPIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/row-t.h"
#include "core/str.h"
#include "dialects/canon.h"

/* The Messages API version sent as `anthropic-version`. */
#define DL_ANTHROPIC_VERSION "2023-06-01"
/* max_tokens when neither the client nor the model's spec gives one. */
#define DL_ANTHROPIC_FALLBACK_MAX_TOKENS 4096

/* The shape's operations (dialects/canon.h; decisions in the files named above). */
extern const struct dl_shape_ops dl_anthropic_shape;

/* ---- the old pairwise converter (goes once the pipeline uses dl_anthropic_shape) ---- */

/* ---- request ---- */

/* Renders into <out> the Messages body for the Chat Completions request <body>/<len>
 * (already validated by dl_openai_req_parse, which refuses duplicates of the fields the
 * gateway reads; of other duplicate keys the last counts), sent to upstream model <model>.
 * max_tokens: the client's max_completion_tokens, else its max_tokens, else
 * <spec_max_output> (the model's max_output_tokens from the one resolve function, 0 when
 * unknown), else DL_ANTHROPIC_FALLBACK_MAX_TOKENS. "stream": true is copied from <body>.
 * GW_OK; GW_E_UNCONVERTIBLE with a message for the client in <why> (NUL-terminated,
 * <whylen> bytes; it names the field and never quotes the body) when the request uses
 * something the Messages API cannot express, or is not a JSON object; GW_E_NOMEM.
 * <out> is unchanged unless GW_OK. Pure. */
enum gw_code dl_anthropic_from_chat(const char *body, size_t len, struct gw_str model,
                                    uint64_t spec_max_output, struct gw_buf *out, char *why,
                                    size_t whylen);

/* ---- answer ---- */

/* Converts the Messages answer <body>/<len> into a Chat Completions answer
 * (object "chat.completion", created <created_s>) appended to <out>, and reads its usage
 * into <*usage> (input = uncached input, cache read and cache creation apart; all zero
 * when the answer carries no usage). GW_OK; GW_E_UPSTREAM_PROTOCOL when the body is not
 * a Messages answer; GW_E_NOMEM. <out> is unchanged and <*usage> zero unless GW_OK. Pure. */
enum gw_code dl_anthropic_answer_to_chat(const char *body, size_t len, uint64_t created_s,
                                         struct gw_buf *out, struct gw_usage *usage);

/* Appends to <out> a Chat error body {"error":{"message","type","code","param"}} for the
 * upstream's error answer <body>/<len> with HTTP <status>: the message and type of an
 * Anthropic error body ({"type":"error","error":{"type","message"}}) mapped to OpenAI's
 * vocabulary, or a generic message when the body is not one. Pure. */
void dl_anthropic_error_to_chat(const char *body, size_t len, int status, struct gw_buf *out);

/* ---- stream ---- */

/* The state of one converted stream. Caller-owned; dl_anthropic_stream_init before use. */
struct dl_anthropic_stream {
    char id[64];                  /* "chatcmpl-" + the message id, cut to fit */
    char model[GW_MODEL_MAX + 1]; /* from message_start */
    uint64_t created_s;
    struct gw_usage usage; /* as reported so far */
    bool usage_seen;       /* message_start or message_delta carried usage */
    bool started;          /* message_start was seen */
    bool stopped;          /* message_stop was seen ([DONE] written) */
    bool failed;           /* an error event was seen (error chunk written) */
    int tool_index;        /* index of the current tool call, -1 before any */
    int block_is_tool;     /* the open content block is a tool_use */
};

void dl_anthropic_stream_init(struct dl_anthropic_stream *st, uint64_t created_s);

/* Converts one Messages stream event (SSE <event> name and <data>) into zero or more
 * Chat chunk events appended to <out> as SSE text ("data: {...}\n\n"):
 *   message_start       -> a chunk with delta {"role":"assistant","content":""}
 *   content_block_delta -> a chunk with delta content (text_delta) or tool-call
 *                          arguments (input_json_delta); content_block_start of a
 *                          tool_use -> a chunk opening that tool call (id, name)
 *   message_delta       -> a chunk with finish_reason (end_turn/stop_sequence: stop,
 *                          max_tokens: length, tool_use: tool_calls, refusal:
 *                          content_filter); its usage is kept
 *   message_stop        -> a usage-only chunk ({"choices":[],"usage":{...}}), then
 *                          "data: [DONE]\n\n"
 *   error               -> a Chat error chunk "data: {"error":{...}}\n\n" (no [DONE])
 *   ping, content_block_start of text/thinking, content_block_stop, unknown events ->
 *                          nothing (thinking deltas are dropped)
 * The usage chunk is written only when usage was reported (st->usage_seen). An empty
 * <event> (no "event:" line) is named by the data's "type". Once stopped or failed,
 * every further event writes nothing. GW_OK; GW_E_UPSTREAM_PROTOCOL for data that is
 * not the JSON the event needs; GW_E_NOMEM. <out> gets nothing unless GW_OK. Pure. */
enum gw_code dl_anthropic_stream_event(struct dl_anthropic_stream *st, struct gw_str event,
                                       struct gw_str data, struct gw_buf *out);

#endif
