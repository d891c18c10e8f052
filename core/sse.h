/* SPDX-License-Identifier: MIT
 * core/sse.h - incremental Server-Sent Events parser (the upstream side of every
 * streamed answer). Feeds arbitrary byte chunks; calls back once per complete event
 * with the event's raw bytes (for byte-exact relaying), its event name and its data
 * (data lines joined by '\n'). Handles LF, CRLF and CR line ends, comments, a BOM.
 * Owns:    its buffer of a partial event.
 * Threads: one stream on one thread.
 * See:     core/sse.c, tests/unit/core/test_sse.c, tests/fuzz/fuzz_sse.c
 */
#ifndef GW_CORE_SSE_H
#define GW_CORE_SSE_H

#include <stddef.h>
#include <sys/types.h>

#include "core/codes.h"
#include "core/str.h"

struct gw_sse_event {
    struct gw_str raw;   /* the event's bytes as received, terminating blank line included */
    struct gw_str event; /* "event:" field, empty when none */
    struct gw_str data;  /* data lines joined with '\n' */
    struct gw_str id;
};

/* Returns 0 to go on, non-zero to stop feeding (gw_sse_feed returns at once). */
typedef int (*gw_sse_event_fn)(void *arg, const struct gw_sse_event *ev);

struct gw_sse {
    struct gw_buf pending;  /* bytes of the event in progress */
    struct gw_buf data;     /* scratch for joined data lines */
    size_t max_event;       /* an event larger than this is an error */
    size_t scan;            /* internal: how far pending was scanned */
    int state;              /* internal */
};

/* <max_event> bytes per event (0: 8 MiB). */
void gw_sse_init(struct gw_sse *p, size_t max_event);
void gw_sse_fini(struct gw_sse *p);

/* Feeds <len> bytes. Calls <fn> for each complete event. Returns GW_OK,
 * GW_E_UPSTREAM_PROTOCOL when an event exceeds max_event, GW_E_NOMEM. The event
 * slices are valid only during the callback. */
enum gw_code gw_sse_feed(struct gw_sse *p, const char *buf, size_t len, gw_sse_event_fn fn,
                         void *arg);

/* Bytes of a partial event still held (not yet delivered). */
static inline size_t
gw_sse_pending(const struct gw_sse *p)
{
    return p->pending.len;
}

#endif
