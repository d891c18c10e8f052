/* SPDX-License-Identifier: MIT
 * core/row-t.h - the request row: what gw records about every request (DESIGN.md 13,
 * wire shape in 18). Built by the pipeline on a worker, handed to the store writer,
 * read back by the control plane. Plain data: fixed-size strings, no pointers, so a
 * row can be copied, queued and serialised as one block.
 * See: store/store.h (persistence), net/control.c (JSON rendering)
 */
#ifndef GW_CORE_ROW_T_H
#define GW_CORE_ROW_T_H

#include <stdbool.h>
#include <stdint.h>

#define GW_ROW_ID_LEN 32 /* x-request-id: 32 lowercase hex characters */
#define GW_NAME_MAX 64   /* provider and client names: [a-z0-9._-]{1,64} */
#define GW_MODEL_MAX 128 /* model ids longer than this are cut on the row */
#define GW_ROW_MAX_ATTEMPTS 16

/* Outcome of one attempt (hop) and of the whole request. Values are stored: append only. */
enum gw_outcome {
    GW_OUT_NONE = 0, /* request refused before any attempt */
    GW_OUT_OK = 1,
    GW_OUT_FAILED = 2,
    GW_OUT_SLOW_START = 3,
    GW_OUT_CANCELLED = 4,
    GW_OUT_TOO_SLOW = 5,
    GW_OUT_SKIPPED_PAUSED = 6,
    GW_OUT_SKIPPED_BUSY = 7,
    GW_OUT_SKIPPED_NO_MODEL = 8,
    GW_OUT_SKIPPED_CONTEXT = 9,
    GW_OUT_REFUSED = 10, /* the gateway refused the request (auth, limits, bad input) */
    GW_OUT_SKIPPED_UNCONVERTIBLE = 11, /* the request cannot be said in its shape */
    GW_OUT_SKIPPED_QUOTA = 12,         /* no credential's quota admits it now (core/quota.h) */
    GW_OUT__COUNT
};

struct gw_usage {
    uint64_t input_tokens; /* uncached input */
    uint64_t output_tokens;
    uint64_t cache_read_tokens;
    uint64_t cache_write_tokens;
    uint64_t reasoning_tokens; /* of output_tokens, the reasoning (thinking) part, when the
                                * upstream reports it (Chat, Responses, Gemini) */
    bool estimated;            /* the gateway's estimate, the upstream reported none */
};

struct gw_attempt {
    char upstream[GW_NAME_MAX + 1];
    char model[GW_MODEL_MAX + 1];
    uint8_t outcome; /* enum gw_outcome */
    uint16_t status; /* upstream HTTP status, 0 when none */
    uint16_t code;   /* enum gw_code, GW_OK when fine */
    uint32_t queued_ms;
    int32_t ttfb_ms; /* -1: no first byte */
    char cred[13];   /* the credential's fingerprint (core/quota.h), never the secret; "" none */
};

#define GW_ROW_DROPPED_LEN 191

struct gw_row {
    char id[GW_ROW_ID_LEN + 1];
    uint64_t ts_ms;                 /* request start, ms since the epoch (UTC) */
    char client[GW_NAME_MAX + 1];   /* empty: unknown client (refused before auth) */
    char model[GW_MODEL_MAX + 1];   /* as asked by the client */
    char upstream[GW_NAME_MAX + 1]; /* the one that answered; empty = null */
    uint16_t status;                /* HTTP status sent to the client */
    uint16_t code;                  /* enum gw_code; GW_OK = null */
    uint8_t outcome;                /* enum gw_outcome */
    uint8_t stream;                 /* 1 when the client asked for a stream */
    struct gw_usage usage;
    int64_t cost_micros; /* USD * 1e6 */
    int32_t ttfb_ms;     /* -1: none */
    uint32_t duration_ms;
    uint32_t queued_ms;
    double tokens_per_sec; /* output speed from first token, 0 when unknown */
    /* fields a conversion dropped (DESIGN.md 11), ", "-separated; empty: none */
    char dropped[GW_ROW_DROPPED_LEN + 1];
    uint16_t n_attempts;
    struct gw_attempt attempts[GW_ROW_MAX_ATTEMPTS];
};

#endif
