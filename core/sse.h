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
    struct gw_buf pending; /* bytes of the event in progress */
    struct gw_buf data;    /* scratch for joined data lines */
    size_t max_event;      /* an event larger than this is an error */
    size_t scan;           /* internal: how far pending was scanned */
    int state;             /* internal */
};

/* <max_event> bytes per event (0: 8 MiB). */
void gw_sse_init(struct gw_sse *p, size_t max_event);
void gw_sse_fini(struct gw_sse *p);

/* Feeds <len> bytes. Calls <fn> for each complete event. Returns GW_OK,
 * GW_E_UPSTREAM_PROTOCOL when an event exceeds max_event, GW_E_NOMEM. The event
 * slices are valid only during the callback. */
enum gw_code gw_sse_feed(struct gw_sse *p, const char *buf, size_t len, gw_sse_event_fn fn,
                         void *arg);
/* Details of gw_sse_feed:
 * - Every byte fed belongs to exactly one event's raw, in order, or is still pending:
 *   concatenating the raws gives back the stream byte for byte (a BOM included, in the
 *   first event's raw). When a CRLF that ends an event is split between two feeds, the
 *   event is dispatched at its CR and the LF opens the next event's raw.
 * - Every blank line dispatches, even when the event has no data field (a comment-only
 *   keep-alive, or a stray blank line): data is then empty and callers decide.
 * - max_event counts an event's bytes but not a leading BOM, nor the LF of a CRLF left
 *   over from the previous event, nor the LF of its own final CRLF (so the limit does
 *   not depend on how the stream was split).
 * - <id> is the event's own "id" field (not carried over from earlier events).
 * - A callback that returns non-zero stops the feed: GW_OK is returned and the bytes
 *   after that event stay pending; feed again (<len> 0 is fine) to go on.
 * - After GW_E_UPSTREAM_PROTOCOL every later feed returns it too. After GW_E_NOMEM the
 *   stream should be given up: an event that could not be dispatched stays pending,
 *   but a partial event that could not be stored is lost. */

/* Bytes of a partial event still held (not yet delivered). */
static inline size_t
gw_sse_pending(const struct gw_sse *p)
{
    return p->pending.len;
}

#endif
