/* SPDX-License-Identifier: MIT
 * dialects/anthropic.h - the Anthropic Messages shape (DESIGN.md 11): dl_anthropic_shape,
 * its row of the hub's table (dialects/canon.h): a Messages request parsed to the
 * canonical request and rendered for a Messages upstream, a Messages upstream's stream
 * events and answers parsed to canonical events (also the inspector of the same-shape
 * relay), canonical events rendered as the frames and answers a Messages client
 * expects, and the shape's error bodies and frames. The files: anthropic_request.c
 * (request), anthropic_answer.c (events and answers, both sides), anthropic.c (errors,
 * the table, shared helpers), anthropic_models.c (the model listing).
 * Pure: no I/O, no clock.
 * Owns:    nothing beyond each call; stream states are caller-owned.
 * Threads: any; a stream state belongs to one thread at a time.
 * See:     dialects/anthropic.c, dialects/anthropic_request.c, dialects/anthropic_answer.c,
 *          dialects/canon.h, docs/fields-messages.md, tests/unit/dialects/test_anthropic*.c
 */
#ifndef GW_DIALECTS_ANTHROPIC_H
#define GW_DIALECTS_ANTHROPIC_H

#include "dialects/canon.h"

/* The Messages API version sent as `anthropic-version`. */
#define DL_ANTHROPIC_VERSION "2023-06-01"
/* max_tokens when neither the client nor the model's spec gives one. */
#define DL_ANTHROPIC_FALLBACK_MAX_TOKENS 4096

/* The shape's operations (dialects/canon.h; decisions in the files named above). */
extern const struct dl_shape_ops dl_anthropic_shape;

#endif
