/* SPDX-License-Identifier: MIT
 * dialects/bedrock-priv.h - what the files of the Bedrock Converse shape share
 * (bedrock.c, bedrock_request.c, bedrock_answer.c) and their unit and fuzz tests: the
 * shape's operations one by one, the model families the render looks for in a model
 * id, and the table of Bedrock's exceptions and their HTTP statuses.
 * Owns:    nothing beyond each call.
 * Threads: any; a stream state belongs to one thread at a time.
 * See:     dialects/bedrock.h, tests/unit/dialects/test_bedrock*.c, tests/fuzz/fuzz_bedrock.c
 */
#ifndef GW_DIALECTS_BEDROCK_PRIV_H
#define GW_DIALECTS_BEDROCK_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/str.h"
#include "dialects/bedrock.h"
#include "dialects/canon.h"

/* ---- the shape's operations (the rows of dl_bedrock_shape; contracts in canon.h) ---- */

/* bedrock_request.c */
enum gw_code dl_bedrock_request_render(const struct dl_request *r, struct gw_str model,
                                       uint64_t max_output_default, struct dl_dropped *dropped,
                                       struct gw_buf *out, struct gw_buf *why);
/* bedrock_answer.c */
void dl_bedrock_parse_init(struct dl_parse_state *st);
enum gw_code dl_bedrock_event_parse(struct dl_parse_state *st, struct gw_str event,
                                    struct gw_str data, dl_event_fn emit, void *arg);
enum gw_code dl_bedrock_answer_parse(const char *body, size_t len, dl_event_fn emit, void *arg);
bool dl_bedrock_answer_usage(const char *body, size_t len, struct gw_usage *usage);
/* bedrock.c */
void dl_bedrock_upstream_error_read(const char *body, size_t len, int status, struct gw_str *type,
                                    struct gw_str *message);

/* ---- model families (bedrock.c) ---- */

/* What the render may send beyond Converse's common fields depends on the model behind
 * the id: Bedrock passes additionalModelRequestFields to the model's own API, and a few
 * Converse fields (cachePoint, a tool result's status) only some families take. */
enum dl_bedrock_family {
    DL_BEDROCK_OTHER = 0,
    DL_BEDROCK_CLAUDE, /* anthropic.claude-* */
    DL_BEDROCK_NOVA,   /* amazon.nova-* */
};

/* The family of <model>: a model id ("anthropic.claude-sonnet-4-5-20250929-v1:0"), an
 * inference profile id with its geography ("us.anthropic.claude-..."), or an ARN whose
 * resource names one of those (foundation-model/..., inference-profile/...). An
 * application inference profile's ARN names no model: DL_BEDROCK_OTHER. */
enum dl_bedrock_family dl_bedrock_family(struct gw_str model);

/* ---- exceptions (bedrock.c: the one table, STYLE.md 7) ---- */

/* The HTTP status an exception name stands for, with or without its capital
 * ("throttlingException" in a stream, "ThrottlingException" in x-amzn-ErrorType):
 * throttling 429, service unavailable 503, validation 400, ... (0 when unknown). */
int dl_bedrock_exception_status(struct gw_str name);
/* The exception name for an HTTP <status> ("ValidationException" for 400, ...). */
const char *dl_bedrock_exception_name(int status);

#endif
