/* SPDX-License-Identifier: MIT
 * core/decode.h - decodes a whole request body sent with a Content-Encoding (gzip,
 * deflate, br, zstd; coding CLIs compress what they send, Codex with zstd) with Debian's
 * zlib, libbrotlidec and libzstd. The decoded size is what a body limit applies to, so
 * the output is bounded while it is made: a decompression bomb stops at the limit,
 * having never allocated more than the limit and a couple of bytes for its output.
 * Pure: bytes in, bytes out; every allocation (the libraries' too) goes through
 * core/alloc.h.
 * Owns:    nothing beyond one call.
 * Threads: any; never blocks (CPU bound: about the decoded size's worth of work).
 * See:     core/decode.c, net/decode.c, tests/unit/core/test_decode.c,
 *          tests/fuzz/fuzz_decode.c
 */
#ifndef GW_CORE_DECODE_H
#define GW_CORE_DECODE_H

#include <stdbool.h>
#include <stddef.h>

#include "core/codes.h"
#include "core/str.h"

/* Codings one Content-Encoding list may stack (identity aside); more get 415. */
#define GW_DECODE_MAX_CODINGS 4
/* What an output buffer may hold beyond the limit: one byte that proves the body is
 * over it, and the NUL that keeps gw_buf data a C string. */
#define GW_DECODE_SLACK 2

/* Told the bytes the output buffers of one decode hold together (their capacity),
 * each time that changes: before it grows, with the new total (true lets it grow;
 * false stops the decode with GW_E_BUSY), and after it shrinks or they are freed
 * (the answer is ignored). The last total told is out->cap after GW_OK, and 0 after
 * any failure. How net counts a decoded body against server.max_buffered_body_mb. */
typedef bool (*gw_decode_hold_fn)(void *arg, size_t bytes);

struct gw_decode_limit {
    size_t max;             /* the decoded body may be this long, not a byte longer */
    gw_decode_hold_fn hold; /* NULL: nobody is told */
    void *arg;              /* for <hold> */
};

/* True when the Content-Encoding value <codings> asks for no decoding: empty, or only
 * "identity" elements. Any other value (an unknown coding too) needs gw_decode_body. */
bool gw_decode_is_identity(struct gw_str codings);

/* Decodes the body <in> sent with the Content-Encoding value <codings>: a list of
 * "gzip" (also "x-gzip"; a zlib stream is taken as well, and gzip members one after
 * another), "deflate" (zlib-wrapped, or raw deflate as some clients send), "br",
 * "zstd" (frames one after another) and "identity", case-insensitive, separated by
 * commas; the codings were applied in the order listed, so they are undone from the
 * last. An empty <in> decodes to an empty body. Each step's output is bounded by
 * <lim>->max.
 * <out> must be empty (zeroed) on entry. Returns:
 *   GW_OK: <out> holds the decoded body (NUL-terminated; its buffer shrunk to
 *     out->len + 1 unless that realloc failed; out->cap <= max + GW_DECODE_SLACK);
 *     the caller owns it (gw_buf_fini);
 *   GW_E_BODY_TOO_LARGE: a step's output passed <lim>->max (decoding stopped there);
 *   GW_E_BAD_REQUEST: the data is not valid for its coding (corrupt, truncated, bytes
 *     after its end); <why> says which coding and what is wrong;
 *   GW_E_UNSUPPORTED_ENCODING: a coding gw does not know, or more than
 *     GW_DECODE_MAX_CODINGS; <why> names it;
 *   GW_E_BUSY: <lim>->hold refused to let an output buffer grow;
 *   GW_E_NOMEM: an allocation failed;
 *   GW_E_INTERNAL: a library refused its own setup (never seen; no input causes it).
 * On failure <out> is empty. A sentence for the client is appended to <why> for every
 * code but GW_E_NOMEM and GW_E_INTERNAL (best effort: none when that append runs out
 * of memory). */
enum gw_code gw_decode_body(struct gw_str codings, struct gw_str in,
                            const struct gw_decode_limit *lim, struct gw_buf *out,
                            struct gw_buf *why);

#endif
