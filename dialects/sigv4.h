/* SPDX-License-Identifier: MIT
 * dialects/sigv4.h - AWS Signature Version 4 (the signing of a Bedrock upstream's
 * requests, issue 15): the canonical request, the string to sign, the derived key and
 * the Authorization header value, as AWS's published SigV4 test suite defines them.
 * Pure (STYLE.md 2 allows libcrypto's SHA-256 and HMAC here): the clock is an argument
 * (the x-amz-date text), so the signing is unit-tested against the test vectors.
 * Owns:    nothing; results go to the caller's buffers.
 * Threads: any; no state.
 * See:     dialects/sigv4.c, dialects/bedrock.h, net/attempt.c (the hop that signs),
 *          tests/unit/dialects/test_sigv4.c
 */
#ifndef GW_DIALECTS_SIGV4_H
#define GW_DIALECTS_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/str.h"

/* "YYYYMMDDTHHMMSSZ" and its NUL. */
#define DL_SIGV4_DATE_LEN 16
/* 64 hex characters and a NUL. */
#define DL_SIGV4_HASH_HEX 65

/* One header to sign, as it is sent (the name in any case, the value as written). */
struct dl_sigv4_hdr {
    struct gw_str name, value;
};

/* What one signature covers. */
struct dl_sigv4_input {
    struct gw_str method; /* "POST" */
    /* The path as it goes on the wire (already percent-encoded where the caller
     * encodes, e.g. "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"). The
     * canonical URI is that path normalized ("." and ".." segments, repeated '/') and
     * URI-encoded once more per RFC 3986 (every byte but unreserved ones and '/'), as
     * AWS's SDKs do for every service but S3 (so a '%' on the wire is "%25" here). */
    struct gw_str path;
    /* The query string without '?', as sent ("" when none): the canonical query sorts
     * the parameters by name then value, each percent-decoded then encoded as above
     * (spaces as %20), so "%E1%88%B4" and the raw UTF-8 sign alike. */
    struct gw_str query;
    /* Every header to sign, host and x-amz-date included (and x-amz-content-sha256,
     * x-amz-security-token when they are sent): canonical headers are the names in
     * lower case sorted, values with leading and trailing blanks trimmed and inner runs
     * of blanks made one space; repeated names joined with ','. */
    const struct dl_sigv4_hdr *hdrs;
    size_t n_hdrs;
    struct gw_str payload_hash; /* lower-case hex SHA-256 of the body (dl_sigv4_payload_hash) */
    struct gw_str amz_date;     /* "YYYYMMDDTHHMMSSZ", the x-amz-date header's value */
    struct gw_str region;       /* "us-east-1" */
    struct gw_str service;      /* "bedrock" */
    struct gw_str access_key_id;
    struct gw_str secret_access_key; /* a secret: never logged, never in an error */
    /* NULL: the signing key is derived from the secret here (four HMACs); else the key
     * dl_sigv4_signing_key gave for this secret, date (its first 8 characters), region
     * and service, which a caller may keep for the UTC day (secret_access_key unused). */
    const unsigned char *signing_key;
};

/* The length of a signing key (an HMAC-SHA256). */
#define DL_SIGV4_KEY_LEN 32

/* Fetches the SHA-256 digest every signature then uses (OpenSSL 3 looks an algorithm
 * up by name on each use otherwise: most of a signature's cost). Once, before any thread
 * signs (gwd's main at start); signing works without it, slower. */
void dl_sigv4_init(void);

/* <out> = "YYYYMMDDTHHMMSSZ" of <unix_s> (UTC), NUL-terminated. */
void dl_sigv4_amz_date(int64_t unix_s, char out[DL_SIGV4_DATE_LEN + 1]);
/* <out> = lower-case hex SHA-256 of <body>, NUL-terminated. */
void dl_sigv4_payload_hash(const void *body, size_t len, char out[DL_SIGV4_HASH_HEX]);

/* Appends the canonical request of <in> to <out> (the test suite's .creq). GW_OK or
 * GW_E_NOMEM; GW_E_BAD_REQUEST when <in> is unusable (no host header, a date that is not
 * 16 characters). */
enum gw_code dl_sigv4_canonical_request(const struct dl_sigv4_input *in, struct gw_buf *out);
/* Appends the string to sign of <in> (the test suite's .sts) to <out>. */
enum gw_code dl_sigv4_string_to_sign(const struct dl_sigv4_input *in, struct gw_buf *out);
/* <k> = the signing key of <in>'s secret, date, region and service. <scratch> holds
 * "AWS4" + the secret while it is hashed (wiped, then cut back). GW_OK or GW_E_NOMEM. */
enum gw_code dl_sigv4_signing_key(const struct dl_sigv4_input *in, struct gw_buf *scratch,
                                  unsigned char k[DL_SIGV4_KEY_LEN]);
/* Signing keys kept for their UTC day by whoever signs often (a gwd worker): deriving
 * one is four HMACs, most of a signature's cost. A few entries, each by secret, region,
 * service and day; the oldest is replaced. The secrets are copies: wipe the cache with
 * dl_sigv4_cache_wipe when done with it. Zero it to start. */
#define DL_SIGV4_CACHE_N 4
#define DL_SIGV4_CACHE_SECRET_MAX 128 /* longer secrets are not kept: derived each time */
#define DL_SIGV4_CACHE_NAME_MAX 32    /* region and service, likewise */
struct dl_sigv4_cache {
    struct {
        char secret[DL_SIGV4_CACHE_SECRET_MAX];
        size_t secret_len; /* 0: an empty entry */
        char region[DL_SIGV4_CACHE_NAME_MAX], service[DL_SIGV4_CACHE_NAME_MAX];
        char day[8]; /* YYYYMMDD */
        unsigned char key[DL_SIGV4_KEY_LEN];
    } e[DL_SIGV4_CACHE_N];
    unsigned next; /* the entry replaced next */
};
/* The signing key of <in> from <c>, derived and kept there when missing (<scratch> as
 * for dl_sigv4_signing_key). NULL when it cannot be kept (a secret or name too long) or
 * out of memory: then <in> signs without it (signing_key NULL). The pointer is valid
 * until the next call on <c>. */
const unsigned char *dl_sigv4_cache_key(struct dl_sigv4_cache *c, const struct dl_sigv4_input *in,
                                        struct gw_buf *scratch);
void dl_sigv4_cache_wipe(struct dl_sigv4_cache *c);
/* Appends the Authorization header's value of <in> (the test suite's .authz):
 * "AWS4-HMAC-SHA256 Credential=<id>/<date>/<region>/<service>/aws4_request,
 * SignedHeaders=<names>, Signature=<hex>". */
enum gw_code dl_sigv4_authorization(const struct dl_sigv4_input *in, struct gw_buf *out);

#endif
