/* SPDX-License-Identifier: MIT
 * dialects/openai-priv.h - what the files of the Chat Completions shape share: the
 * request checks and the usage reader of dialects/openai.c, and the operations of the
 * shape's row (dl_openai_shape) defined in dialects/openai_request.c and
 * dialects/openai_answer.c. Callers outside the shape use dl_openai_shape (openai.h);
 * the OpenAI Responses shape (dialects/responses.c), whose error bodies are Chat's,
 * takes the upstream error reader and renderer from here.
 * Owns:    nothing.
 * Threads: any; one request on one thread.
 * See:     dialects/openai.c, dialects/openai_request.c, dialects/openai_answer.c
 */
#ifndef GW_DIALECTS_OPENAI_PRIV_H
#define GW_DIALECTS_OPENAI_PRIV_H

#include "dialects/canon.h"
#include "dialects/json_scan.h"
#include "dialects/openai.h"

/* ---- dialects/openai.c ---- */

/* The checks of dl_openai_req_parse without building anything: a JSON object, "model"
 * a non-empty string, "messages" an array, "stream" a boolean, "stream_options" an
 * object, no duplicate of a field the gateway reads. GW_OK, GW_E_BAD_REQUEST with the
 * same <why>, or GW_E_NOMEM. */
enum gw_code dl_openai_req_check(const char *body, size_t len, struct gw_buf *why);

/* A Chat usage object at the cursor of <j> into <u> (input = prompt_tokens less
 * prompt_tokens_details.cached_tokens, which is the cache read). False on a scan error. */
bool dl_openai_usage_scan(struct dl_json *j, struct gw_usage *u);

/* ---- dialects/openai_request.c: the canonical request ---- */

/* The row's request_parse (canon.h), see openai_request.c for what maps where: the checks
 * of dl_openai_req_check, then dl_openai_request_read. */
enum gw_code dl_openai_request_parse(struct gw_arena *a, const char *body, size_t len,
                                     struct dl_request *out, struct gw_buf *why);
/* The canonical reading of a body dl_openai_req_check accepted, without the check. */
enum gw_code dl_openai_request_read(struct gw_arena *a, const char *body, size_t len,
                                    struct dl_request *out, struct gw_buf *why);
/* The row's request_render. */
enum gw_code dl_openai_request_render(const struct dl_request *r, struct gw_str model,
                                      uint64_t max_output_default, struct dl_dropped *dropped,
                                      struct gw_buf *out, struct gw_buf *why);

/* ---- dialects/openai_answer.c: answers and the canonical events ---- */

void dl_openai_parse_init(struct dl_parse_state *st);
enum gw_code dl_openai_event_parse(struct dl_parse_state *st, struct gw_str event,
                                   struct gw_str data, dl_event_fn emit, void *arg);
enum gw_code dl_openai_answer_parse(const char *body, size_t len, dl_event_fn emit, void *arg);
void dl_openai_render_init(struct dl_render_state *st, const struct dl_render_ctx *ctx);
enum gw_code dl_openai_event_render(struct dl_render_state *st, const struct dl_event *ev,
                                    struct gw_buf *out);
enum gw_code dl_openai_render_end(struct dl_render_state *st, struct gw_buf *out);
enum gw_code dl_openai_answer_render(const struct dl_answer *a, const struct dl_render_ctx *ctx,
                                     struct gw_buf *out);
enum gw_code dl_openai_upstream_error_render(int status, struct gw_str type, struct gw_str message,
                                             struct gw_buf *out);
void dl_openai_upstream_error_read(const char *body, size_t len, int status, struct gw_str *type,
                                   struct gw_str *message);

#endif
