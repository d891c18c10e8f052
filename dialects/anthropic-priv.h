/* SPDX-License-Identifier: MIT
 * dialects/anthropic-priv.h - the reference (jansson) routes of dialects/anthropic.c,
 * for the tests that hold the fast routes to them byte for byte.
 * dl_anthropic_from_chat, dl_anthropic_answer_to_chat and dl_anthropic_stream_event
 * try an allocation-free scan (dialects/json_scan.h) of the common shapes first and
 * fall back to these for everything else; these always take the jansson route.
 * Owns:    nothing beyond each call.
 * Threads: any; a stream state belongs to one thread at a time.
 * See:     dialects/anthropic.c, tests/unit/dialects/test_anthropic.c,
 *          tests/fuzz/fuzz_anthropic.c
 */
#ifndef GW_DIALECTS_ANTHROPIC_PRIV_H
#define GW_DIALECTS_ANTHROPIC_PRIV_H

#include "dialects/anthropic.h"

/* dl_anthropic_from_chat through jansson only: same contract, same output. */
enum gw_code dl_anthropic_from_chat_jansson(const char *body, size_t len, struct gw_str model,
                                            uint64_t spec_max_output, struct gw_buf *out, char *why,
                                            size_t whylen);

/* dl_anthropic_stream_event through jansson only: same contract, same output. */
enum gw_code dl_anthropic_stream_event_jansson(struct dl_anthropic_stream *st, struct gw_str event,
                                               struct gw_str data, struct gw_buf *out);

/* dl_anthropic_answer_to_chat through jansson only: same contract, same output. */
enum gw_code dl_anthropic_answer_to_chat_jansson(const char *body, size_t len, uint64_t created_s,
                                                 struct gw_buf *out, struct gw_usage *usage);

#endif
