/* SPDX-License-Identifier: MIT
 * dialects/responses-priv.h - what the files of the OpenAI Responses shape share
 * (dialects/responses.c, responses_request.c, responses_answer.c) and their unit and
 * fuzz tests: the shape's operations one by one and the ids the answer renderers derive.
 * The field collector and number writers are the Messages shape's
 * (dialects/anthropic-priv.h), the upstream error reader and renderer the Chat shape's
 * (dialects/openai-priv.h): the Responses error body is Chat's.
 * Owns:    nothing beyond each call.
 * Threads: any; a stream state belongs to one thread at a time.
 * See:     dialects/responses.h, tests/unit/dialects/test_responses*.c,
 *          tests/fuzz/fuzz_responses.c
 */
#ifndef GW_DIALECTS_RESPONSES_PRIV_H
#define GW_DIALECTS_RESPONSES_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/str.h"
#include "dialects/anthropic-priv.h"
#include "dialects/canon.h"
#include "dialects/json_scan.h"
#include "dialects/responses.h"

/* ---- the shape's operations (the rows of dl_responses_shape; contracts in canon.h) ---- */

/* responses_request.c */
enum gw_code dl_responses_request_parse(struct gw_arena *a, const char *body, size_t len,
                                        struct dl_request *out, struct gw_buf *why);
enum gw_code dl_responses_request_render(const struct dl_request *r, struct gw_str model,
                                         uint64_t max_output_default, struct dl_dropped *dropped,
                                         struct gw_buf *out, struct gw_buf *why);
/* responses_answer.c: upstream side */
void dl_responses_parse_init(struct dl_parse_state *st);
enum gw_code dl_responses_event_parse(struct dl_parse_state *st, struct gw_str event,
                                      struct gw_str data, dl_event_fn emit, void *arg);
enum gw_code dl_responses_answer_parse(const char *body, size_t len, dl_event_fn emit, void *arg);
bool dl_responses_answer_usage(const char *body, size_t len, struct gw_usage *usage);
/* responses_answer.c: client side */
void dl_responses_render_init(struct dl_render_state *st, const struct dl_render_ctx *ctx);
enum gw_code dl_responses_event_render(struct dl_render_state *st, const struct dl_event *ev,
                                       struct gw_buf *out);
enum gw_code dl_responses_render_end(struct dl_render_state *st, struct gw_buf *out);
enum gw_code dl_responses_answer_render(const struct dl_answer *a, const struct dl_render_ctx *ctx,
                                        struct gw_buf *out);
/* responses.c: errors */
enum gw_code dl_responses_error_render(enum gw_code code, struct gw_str message,
                                       struct gw_buf *out);
enum gw_code dl_responses_error_frame(enum gw_code code, struct gw_str message, struct gw_buf *out);

/* ---- shared helpers (responses.c) ---- */

/* The sequence_number of the frames error_frame writes (this one and the next): that
 * frame has no state, so it cannot know the stream's count; a number above any stream's
 * keeps the sequence increasing (openai-node uses it only to skip replayed events; Codex
 * ignores it). */
#define DL_RESPONSES_ERROR_FRAME_SEQ 1000000000u

/* Appends the response id of <ctx> as a JSON string: "resp_" + ctx->id, or ctx->id as it
 * is when it already starts with "resp_" ("resp_gw" without one). */
enum gw_code dl_responses_id_json(struct gw_buf *out, const struct dl_render_ctx *ctx);

/* <s> restored to its state at <start> (after a failed append). */
static inline void
dl_responses_restore(struct gw_buf *out, size_t start)
{
    out->len = start;
    if (out->data)
        out->data[start] = '\0';
}

/* The "input" text of a free-form tool call's arguments {"input": TEXT} (canon.h,
 * dl_tool.freeform), appended as a JSON string; arguments of another form go whole, as
 * one string. */
enum gw_code dl_responses_freeform_input(struct gw_buf *out, struct gw_str args);

#endif
