/* SPDX-License-Identifier: MIT
 * net/decode.h - a request body sent with a Content-Encoding (gzip, deflate, br, zstd),
 * decoded before the pipeline reads it, so that every later stage (the shape's parser,
 * the splice, conversions, the body sent upstream) sees plain JSON.
 * Owns:    nothing beyond one call.
 * Threads: the owning worker only; never blocks (decoding is CPU work bounded by
 *          server.max_body_mb).
 * See:     net/decode.c, core/decode.h, tests/e2e/test_compressed_body.py
 */
#ifndef GW_NET_DECODE_H
#define GW_NET_DECODE_H

#include "core/codes.h"

struct net_stream;

/* When the request of <s> came with a Content-Encoding other than identity (its header
 * lines together, in order), decodes s->body with the decoded size bounded by
 * server.max_body_mb, replaces s->body with it and moves s->body_held in
 * net_body_budget from the raw body to the decoded one. GW_OK: the body is plain (no
 * coding, or decoded). Otherwise the refusal is answered in the client's shape and
 * recorded (413 gw.body_too_large, 400 gw.bad_request, 415 gw.unsupported_encoding,
 * 503 gw.busy with Retry-After when the budget is full, 500 gw.internal.nomem) and its
 * code returned; the stream is finished then. The request's headers are not changed:
 * the headers sent upstream never carry Content-Encoding (net/attempt.c). */
enum gw_code net_stream_decode_body(struct net_stream *s);

#endif
