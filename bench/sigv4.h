/* SPDX-License-Identifier: MIT
 * bench/sigv4.h - `gwbench upstream`'s own check of AWS Signature Version 4 (the
 * Bedrock route, issue 15): the canonical request recomputed from what arrived, the
 * string to sign, the derived key and the signature compared, and AWS's refusals when
 * anything is off. Written apart from dialects/sigv4.c on purpose, so that a signer bug
 * there cannot hide itself in the tests (STYLE.md 2).
 * Owns:    nothing; results go to the caller's buffers.
 * Threads: any; no state.
 * See:     bench/sigv4.c, bench/upstream_bedrock.c, docs/gwbench.md
 */
#ifndef GW_BENCH_SIGV4_H
#define GW_BENCH_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/str.h"

/* The allowed distance of x-amz-date from the clock, as AWS allows. */
#define BENCH_SIGV4_SKEW_S (15 * 60)

/* What signatures are checked against. token NULL: no x-amz-security-token may come. */
struct bench_sigv4_creds {
    const char *key_id, *secret, *region, *service, *token;
};

/* One request as it arrived. */
struct bench_sigv4_req {
    struct gw_str method;
    struct gw_str path;  /* as on the wire, without the query */
    struct gw_str query; /* after '?', "" when none */
    /* The headers as "name\0value\0" pairs, names lower-cased, in arrival order. */
    const char *hdrs;
    size_t hdrs_len;
    const void *body;
    size_t body_len;
    int64_t now; /* the clock, unix seconds */
};

/* Why a request was refused: AWS's error type and message. */
struct bench_sigv4_refusal {
    const char *type; /* "InvalidSignatureException", "UnrecognizedClientException", ... */
    char message[320];
    char why[160]; /* what exactly did not match, for gwbench's stderr (never a secret) */
};

/* True when <r> carries a valid signature of <k>'s. Else false with <out> filled:
 * MissingAuthenticationTokenException (no Authorization header),
 * IncompleteSignatureException (an Authorization that is not SigV4's, a missing
 * parameter or x-amz-date, host not signed), UnrecognizedClientException (another
 * access key id; a session token that is not <k>'s, or one where none is expected),
 * InvalidSignatureException (the scope's date, region, service or terminator, a date
 * more than BENCH_SIGV4_SKEW_S away, x-amz-content-sha256 not the body's, or a
 * signature that differs). <creq>: the canonical request computed, when it got that
 * far (for diagnostics). */
bool bench_sigv4_verify(const struct bench_sigv4_creds *k, const struct bench_sigv4_req *r,
                        struct bench_sigv4_refusal *out, struct gw_buf *creq);

#endif
