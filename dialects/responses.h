/* SPDX-License-Identifier: MIT
 * dialects/responses.h - the OpenAI Responses shape (DESIGN.md 11): dl_responses_shape,
 * its row of the hub's table (dialects/canon.h): a Responses request (POST
 * /v1/responses) parsed to the canonical request and rendered for a Responses upstream,
 * a Responses upstream's stream events and answers parsed to canonical events (also the
 * inspector of the same-shape relay), canonical events rendered as the frames and the
 * response object a Responses client (openai-node, openai-python, Codex CLI) expects,
 * the shape's error bodies and frames; and the pure helpers of the gateway's own
 * conversation store (DESIGN.md 11 "OpenAI Responses state"). The files:
 * responses_request.c (request), responses_answer.c (events and answers, both sides),
 * responses.c (errors, the table, the conversation helpers).
 * Pure: no I/O, no clock.
 * Owns:    nothing beyond each call; stream states are caller-owned.
 * Threads: any; a stream state belongs to one thread at a time.
 * See:     dialects/responses.c, dialects/responses_request.c, dialects/responses_answer.c,
 *          dialects/canon.h, docs/fields-responses.md, tests/unit/dialects/test_responses*.c
 */
#ifndef GW_DIALECTS_RESPONSES_H
#define GW_DIALECTS_RESPONSES_H

#include <stddef.h>

#include "core/codes.h"
#include "core/str.h"
#include "dialects/canon.h"

/* The smallest max_output_tokens the Responses API takes: a smaller limit from another
 * shape is raised to it. */
#define DL_RESPONSES_MIN_OUTPUT_TOKENS 16

/* The shape's operations (dialects/canon.h; decisions in the files named above). */
extern const struct dl_shape_ops dl_responses_shape;

/* Appends to <out> the JSON array of the output items of answer <a> ("[...]"), exactly
 * as the response object of answer_render and of the stream's response.completed holds
 * them (item ids derived from <ctx>->id, signatures tagged for <ctx>->upstream): what the
 * gateway's conversation store keeps of a turn it served. GW_OK or GW_E_NOMEM (<out> as
 * it was). Any thread; never blocks. */
enum gw_code dl_responses_output_items(const struct dl_answer *a, const struct dl_render_ctx *ctx,
                                       struct gw_buf *out);

/* Ends the stream of render state <st> (a converted stream broken after content) with
 * response.failed for the response its frames named, at its next sequence_number, holding
 * the items said so far, status "failed" and error {"code":"server_error", <message>
 * (gw's words, else <code>'s name), "gw_code"}. The stateless error_frame of the row
 * cannot name that response (see dl_responses_error_frame): this is the row's
 * render_abort (canon.h), which the pipeline calls for a stream the renderer wrote.
 * Nothing after it is rendered. GW_OK or GW_E_NOMEM (<out> as it was). The state's
 * thread; never blocks. */
enum gw_code dl_responses_render_failed(struct dl_render_state *st, enum gw_code code,
                                        struct gw_str message, struct gw_buf *out);

/* The answer render state <st> has rendered so far: one block per output item, in
 * output_index order, so that dl_responses_output_items of it gives the items the client
 * saw (ids included); NULL before the first event. It lives in the render context's
 * arena. The state's thread. */
const struct dl_answer *dl_responses_render_answer(const struct dl_render_state *st);

/* The conversation store's expansion (DESIGN.md 11): appends to <out> the client's request
 * <body> with its top-level "previous_response_id" member removed and the value of
 * "input" replaced by the items of <items> (a JSON array of the earlier turns' input and
 * output items) followed by the body's own input items (a string input becomes one user
 * message item); with no "input", one is added holding <items>. Every other byte is kept
 * as the client wrote it. GW_OK; GW_E_BAD_REQUEST when <body> is not a JSON object, holds
 * "input" or "previous_response_id" twice, or has an input that is neither a string nor
 * an array, or when <items> is not a JSON array; GW_E_NOMEM. <out> is unchanged on
 * failure. Any thread; never blocks. */
enum gw_code dl_responses_expand(const char *body, size_t len, struct gw_str items,
                                 struct gw_buf *out);

/* Appends to <out> the input of request <body> as a JSON array of items (a string input
 * becomes one user message item, no input "[]"), for the conversation store to keep what
 * a turn sent. GW_OK; GW_E_BAD_REQUEST when <body> is not a JSON object or its input is
 * neither a string nor an array (or is given twice); GW_E_NOMEM. <out> is unchanged on
 * failure. Any thread; never blocks. */
enum gw_code dl_responses_input_items(const char *body, size_t len, struct gw_buf *out);

#endif
