/* SPDX-License-Identifier: MIT
 * dialects/openai.h - OpenAI Chat Completions: read a client request, render the
 * body sent upstream, inspect answers for content and usage (streamed chunks: the
 * shape's event parser, dl_openai_shape),
 * and build error bodies and error chunks in the OpenAI shape.
 * Pure converter: no I/O, no clock. Callers never see json_t. The hot paths make one
 * validating pass over the bytes (dialects/json_scan.h); jansson serves the rare cases.
 * Owns:    a dl_openai_req owns a copy of the model and the offsets render needs.
 * Threads: any; one request on one thread.
 * See:     dialects/openai.c, tests/unit/dialects/test_openai.c, tests/fuzz/fuzz_openai.c
 */
#ifndef GW_DIALECTS_OPENAI_H
#define GW_DIALECTS_OPENAI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/row-t.h"
#include "core/str.h"
#include "dialects/canon.h"

/* The Chat Completions row of the hub (dialects/canon.h): request parse and render,
 * stream event parse and render, answer parse and render, errors and usage, for a Chat
 * client served by an upstream of another shape and for a Chat upstream serving a client
 * of another shape (dialects/openai_request.c, dialects/openai_answer.c say what maps
 * where). The functions below serve the same-shape path (splice and inspection). */
extern const struct dl_shape_ops dl_openai_shape;

struct dl_openai_req;

/* Parses a Chat Completions request body. Requires a JSON object with a non-empty
 * string "model" and an array "messages"; "stream" must be a boolean when present.
 * A top-level field the gateway reads (model, messages, stream, stream_options, tools,
 * functions, prompt_cache_key, max_tokens, max_completion_tokens) given twice, or
 * include_usage twice in stream_options, is refused (<why>: duplicate key "model" in the
 * request body): the body forwarded must be the body checked. Other duplicate keys
 * are accepted, the last one counting (as jansson reads them).
 * GW_OK and <*out> (free with dl_openai_req_free); GW_E_BAD_REQUEST with a reason
 * for the client in <why> (never echoes the body); GW_E_NOMEM. */
enum gw_code dl_openai_req_parse(const char *body, size_t len, struct dl_openai_req **out,
                                 struct gw_buf *why);
void dl_openai_req_free(struct dl_openai_req *r);

/* The model the client asked for (valid while <r> lives). */
struct gw_str dl_openai_req_model(const struct dl_openai_req *r);
bool dl_openai_req_is_stream(const struct dl_openai_req *r);
/* True when the client itself set stream_options.include_usage to true. */
bool dl_openai_req_wants_usage(const struct dl_openai_req *r);
/* Estimated input tokens: bytes of message text, tool arguments and tool schemas / 4. */
uint64_t dl_openai_req_input_estimate(const struct dl_openai_req *r);

/* Writes the body to send upstream into <out>: the client's bytes with "model" set to
 * <model> and, for a stream, stream_options.include_usage forced to true. When nothing
 * changes the original bytes <body>/<len> are copied unchanged. GW_OK or GW_E_NOMEM.
 * <body>/<len> are the bytes given to dl_openai_req_parse: when they are the same buffer
 * the parse's offsets are used, otherwise they are scanned again (and GW_E_BAD_REQUEST
 * if they are not a JSON object). */
enum gw_code dl_openai_req_render(const struct dl_openai_req *r, const char *body, size_t len,
                                  struct gw_str model, struct gw_buf *out);

/* The request <r> in the hub's canonical form (into <a>), as dl_openai_shape.request_parse
 * reads it, without the checks dl_openai_req_parse made already: for a Chat client whose
 * request goes to an upstream of another shape. Reads the bytes given to
 * dl_openai_req_parse, which must still be there. GW_OK; GW_E_BAD_REQUEST with <why>;
 * GW_E_NOMEM. */
enum gw_code dl_openai_req_canon(const struct dl_openai_req *r, struct gw_arena *a,
                                 struct dl_request *out, struct gw_buf *why);

/* Reads a non-streamed answer body: usage when present (returns true; *<content_bytes>
 * is 0), else the bytes of its content for an estimate (returns false). The whole body
 * is checked as JSON either way: false and 0 bytes for one that is not. */
bool dl_openai_answer_usage(struct gw_str body, struct gw_usage *usage, size_t *content_bytes);

/* Appends the error body {"error":{"message","type","code","status"}} for <code> with
 * <message> (gw's own text, never upstream text). type follows OpenAI's vocabulary
 * (invalid_request_error, authentication_error, permission_error, not_found_error,
 * rate_limit_error, insufficient_quota, api_error, ...). code is gw's stable code,
 * except where OpenAI has one that clients act on: insufficient_quota for the calendar
 * key limits and context_length_exceeded; gw's code is then in an added "gw_code". */
enum gw_code dl_openai_error_body(enum gw_code code, struct gw_str message, struct gw_buf *out);
/* Appends "data: <error body>\n\n": the chunk that ends a broken Chat stream (no
 * [DONE] follows it). */
enum gw_code dl_openai_error_chunk(enum gw_code code, struct gw_str message, struct gw_buf *out);

/* What identifies the conversation of a request (DESIGN.md 5). Slices point into the
 * request's body (raw JSON string bytes, escapes left in); empty when absent. */
struct dl_openai_conv {
    struct gw_str cache_key;  /* prompt_cache_key */
    struct gw_str system;     /* content of the first system/developer message */
    struct gw_str first_user; /* content of the first user message */
    bool last_is_tool;        /* the last message is a tool result: a turn in progress */
};

/* Fills <out> from the body <r> was parsed from (a read-only second pass). */
void dl_openai_req_conversation(const struct dl_openai_req *r, struct dl_openai_conv *out);
/* True when the request carries tool results (its last message has role "tool"). */
bool dl_openai_req_has_tool_results(const struct dl_openai_req *r);
/* The scan behind both, over a validated body. */
void dl_openai_scan_conversation(const char *body, size_t len, struct dl_openai_conv *out);

/* One model of a listing; 0 for a figure that is not known. */
struct dl_model_entry {
    const char *id;
    const char *owned_by; /* the upstream describing it, "gw" for a group */
    uint64_t context_window;
    uint64_t max_output_tokens;
};

/* Appends ,"context_window":N,"max_output_tokens":N for the figures <e> knows: both
 * shapes' listings carry them (DESIGN.md 18). GW_OK or GW_E_NOMEM. */
enum gw_code dl_model_limits_append(const struct dl_model_entry *e, struct gw_buf *out);
/* Appends the OpenAI listing {"object":"list","data":[...]} of <n> entries, or with
 * <single> the one model object of v[0]. GW_OK or GW_E_NOMEM. */
enum gw_code dl_openai_models_render(const struct dl_model_entry *v, size_t n, bool single,
                                     struct gw_buf *out);

#endif
