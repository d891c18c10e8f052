/* SPDX-License-Identifier: MIT
 * dialects/gemini.h - the Google Gemini generateContent shape (DESIGN.md 4, 11):
 * dl_gemini_shape, its row of the hub's table (dialects/canon.h): a Gemini request parsed
 * to the canonical request and rendered for a Gemini upstream, a Gemini upstream's
 * streamed chunks and answers parsed to canonical events (also the inspector of the
 * same-shape relay), canonical events rendered as the chunks and answers a Gemini client
 * (@google/genai, gemini-cli) expects, and the shape's error bodies and frames. Besides
 * the row: the splitter of Gemini's non-SSE stream (one JSON array), the model listing
 * and the countTokens helpers.
 * The files: gemini_request.c (request parse, countTokens parse), gemini_render.c
 * (request render), gemini_answer.c (upstream side: chunks and answers to events),
 * gemini_frames.c (client side: events to chunks and answers), gemini.c (errors, the
 * table, shared helpers), gemini_stream.c (the array splitter), gemini_models.c
 * (listing, countTokens answer). docs/fields-gemini.md says what maps where.
 * Pure: no I/O, no clock.
 * Owns:    nothing beyond each call; stream states are caller-owned (the splitter owns
 *          the buffer of a partial element until dl_gemini_array_fini).
 * Threads: any; a state belongs to one thread at a time.
 * See:     dialects/canon.h, docs/fields-gemini.md, tests/unit/dialects/test_gemini*.c
 */
#ifndef GW_DIALECTS_GEMINI_H
#define GW_DIALECTS_GEMINI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/str.h"
#include "dialects/canon.h"

/* The shape's operations (dialects/canon.h). The model and streaming of a Gemini
 * request come from its URL: request_parse leaves model empty and stream false, the
 * net layer sets them; request_render writes no model (it goes in the upstream's URL,
 * models/<m>:generateContent or :streamGenerateContent?alt=sse). event_parse reads one
 * SSE data payload (a GenerateContentResponse; the event name is ignored) or one
 * element of the JSON-array stream. */
extern const struct dl_shape_ops dl_gemini_shape;

/* The thoughtSignature sent on the first functionCall of a model turn that carries no
 * signature a Gemini upstream made (a conversation from another shape): Gemini 3
 * refuses such calls otherwise, and documents this value to skip the check. */
#define DL_GEMINI_SKIP_SIGNATURE "skip_thought_signature_validator"

/* ---- client side, the JSON-array stream ---- */

/* Ends a stream broken after content for a Gemini client, in the mode <st> renders
 * (render_init's ctx->json_array): SSE, the error_frame of the row ("data:" + an
 * UNAVAILABLE error object); a JSON array, the error object as its last element and
 * the closing "]" (or "[" error "]" when no element was written). Nothing more is
 * written for <st> afterwards. GW_OK or GW_E_NOMEM (<out> unchanged). */
enum gw_code dl_gemini_render_abort(struct dl_render_state *st, enum gw_code code,
                                    struct gw_str message, struct gw_buf *out);

/* ---- the non-SSE stream: one JSON array of GenerateContentResponse objects ---- */

/* Splits "[{...}\r\n,{...}]" as it arrives, across any read boundaries, into its
 * elements. Pure: bytes in, elements out through a callback; allocates only the buffer
 * of an element that spans reads. */
struct dl_gemini_array {
    struct gw_buf partial; /* the bytes of an element that began in an earlier read */
    size_t max;            /* the largest element accepted, in bytes */
    uint32_t depth;        /* nesting inside the current element (0: between elements) */
    uint8_t state;         /* where the array is (gemini_stream.c) */
    bool in_string, escape;
};

/* Receives one complete element (<obj>, <len> bytes: a JSON value as the array held
 * it, not validated beyond its brackets and strings). A non-zero return stops the feed
 * at once: dl_gemini_array_feed returns GW_OK and the rest of that read is not
 * consumed (the caller knows why it stopped). */
typedef int (*dl_gemini_element_fn)(void *arg, const char *obj, size_t len);

/* Prepares <a> for a stream whose elements are at most <max> bytes. */
void dl_gemini_array_init(struct dl_gemini_array *a, size_t max);
/* Frees the partial element; <a> may be initialised again. */
void dl_gemini_array_fini(struct dl_gemini_array *a);
/* Feeds the next <n> bytes <p>; calls <fn> for each element completed in them, in
 * order. GW_OK; GW_E_UPSTREAM_PROTOCOL when the bytes are not a JSON array of objects
 * (or anything but blanks follows its "]"), or an element exceeds <max>; GW_E_NOMEM.
 * After an error every later feed fails the same way. */
enum gw_code dl_gemini_array_feed(struct dl_gemini_array *a, const char *p, size_t n,
                                  dl_gemini_element_fn fn, void *arg);
/* True once the array's "]" has been read: a stream that ends before it was cut. */
bool dl_gemini_array_done(const struct dl_gemini_array *a);

/* ---- listing and countTokens ---- */

struct dl_model_entry; /* dialects/openai.h */

/* Appends the Gemini listing {"models":[{"name":"models/<id>","baseModelId","version",
 * "displayName","inputTokenLimit","outputTokenLimit","supportedGenerationMethods"}]} of
 * <n> entries, or with <single> the one model object of v[0] (GET /v1beta/models/<id>).
 * The limits appear when known. GW_OK, GW_E_NOMEM, GW_E_INTERNAL (<single> and none). */
enum gw_code dl_gemini_models_render(const struct dl_model_entry *v, size_t n, bool single,
                                     struct gw_buf *out);

/* Reads a countTokens body ({"contents":[...]} or {"generateContentRequest":{...}}) into
 * <out> with the shape's request_parse (the same refusals and <why>; a body holding both
 * or neither is refused). What lives in <out> is in <a>. GW_OK, GW_E_BAD_REQUEST,
 * GW_E_NOMEM. */
enum gw_code dl_gemini_count_parse(struct gw_arena *a, const char *body, size_t len,
                                   struct dl_request *out, struct gw_buf *why);
/* Appends the countTokens answer {"totalTokens":<n>}. GW_OK or GW_E_NOMEM. */
enum gw_code dl_gemini_count_render(uint64_t n, struct gw_buf *out);

#endif
