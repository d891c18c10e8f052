/* SPDX-License-Identifier: MIT
 * core/quota_learn.h - what an upstream says about its quota (DESIGN.md 10, issue 11):
 * limits stated on a clear window in rate-limit headers and error bodies, what remains
 * and when it resets, a Retry-After, and whether a per-day quota is the one exhausted.
 * Pure: bytes and the caller's clock in, struct gw_quota_facts out (core/quota.h), for
 * gw_quota_fail / gw_quota_learn_apply.
 *
 * Read, each into its window (RPM, TPM, RPD, TPD):
 *   headers  x-ratelimit-{limit,remaining,reset}-{requests,req,tokens}[-{minute,day}]
 *            (OpenAI, Groq, Cerebras, Mistral; unsuffixed = per minute, except Groq's
 *            requests = per day; -hour/-month are not windows gw keeps and are ignored),
 *            anthropic-ratelimit-{requests,tokens,input-tokens}-{limit,remaining,reset}
 *            (per minute; output-tokens is not an axis gw counts), OpenRouter's plain
 *            x-ratelimit-{limit,remaining,reset} when the body names the window;
 *            Retry-After (seconds or HTTP-date) and retry-after-ms (core/retry.h).
 *   resets   Go durations ("1s", "6m0s", "20ms", "2m59.56s"), seconds ("11.38"), epoch
 *            seconds (>= 1e9), epoch ms (>= 1e12), RFC 3339 ("2026-01-01T00:00:30Z"),
 *            each turned into ms from now.
 *   bodies   "... on tokens per min (TPM): Limit 30000, Used ..., Requested ..." (OpenAI,
 *            Groq; TPM/RPM/TPD/RPD), "on requests per min. Limit: 200 / min." (older
 *            OpenAI), "of 30,000 input tokens per minute" (Anthropic), Gemini's QuotaFailure
 *            quotaId (PerDay / PerMinute, Requests / Tokens) with its quotaValue, Google's
 *            "limit '... per day ...'", OpenRouter's "free-models-per-day" / "-per-min"
 *            with X-RateLimit-* inside metadata.headers, Cerebras' "Requests per day limit
 *            exceeded"; retry delays ("try again in 9.8s", RetryInfo "retryDelay": "34s").
 * A statement whose window is not clear is not learned. Escaped JSON inside JSON (a
 * proxy's error wrapping an upstream's) reads the same.
 * Threads: any.
 * See:     core/quota_learn.c, tests/unit/core/test_quota_learn.c, tests/fuzz/fuzz_quota_learn.c
 */
#ifndef GW_CORE_QUOTA_LEARN_H
#define GW_CORE_QUOTA_LEARN_H

#include <stddef.h>
#include <stdint.h>

#include "core/quota.h"
#include "core/str.h"

/* Whose conventions an ambiguous header follows; from the upstream's host. */
enum gw_quota_vendor {
    GW_QUOTA_VENDOR_GENERIC = 0, /* OpenAI's: unsuffixed requests/tokens are per minute */
    GW_QUOTA_VENDOR_GROQ,        /* x-ratelimit-*-requests is per day */
};

/* GROQ for api.groq.com (and its subdomains), else GENERIC. */
enum gw_quota_vendor gw_quota_vendor_of_host(const char *host);

struct gw_quota_header {
    struct gw_str name, value;
};

/* Reads the <n> response headers <h> and the error <body> (may be empty) of one answer
 * received at <now_ms> into <*out> (zeroed first). One fact per window: the smallest
 * limit stated wins, with its origin (the header name, or "body: " and the phrase). */
void gw_quota_learn(enum gw_quota_vendor v, const struct gw_quota_header *h, size_t n,
                    struct gw_str body, uint64_t now_ms, struct gw_quota_facts *out);

/* A reset value (see the file comment) in ms from <now_ms>; 0 when unreadable or past. */
uint64_t gw_quota_reset_ms(struct gw_str v, uint64_t now_ms);

#endif
