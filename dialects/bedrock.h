/* SPDX-License-Identifier: MIT
 * dialects/bedrock.h - the AWS Bedrock Converse shape (DESIGN.md 11, issue 15), upstream
 * side only: dl_bedrock_shape, its row of the hub's table (dialects/canon.h): a canonical
 * request rendered as a Converse body, a Converse answer and ConverseStream events parsed
 * to canonical events, Bedrock's error answers and stream exceptions read. Besides the
 * row: the upstream path of a model, and the decoder of the binary eventstream framing
 * (application/vnd.amazon.eventstream) that carries ConverseStream's events.
 * The files: bedrock_request.c (request render), bedrock_answer.c (answers and stream
 * events to canonical events; errors), bedrock_stream.c (eventstream framing),
 * bedrock.c (the table, the path). docs/fields-bedrock.md says what maps where.
 * Pure: no I/O, no clock.
 * Owns:    nothing beyond each call; the eventstream decoder owns the buffer of a
 *          message that spans reads until dl_bedrock_es_fini.
 * Threads: any; a state belongs to one thread at a time.
 * See:     dialects/canon.h, dialects/sigv4.h, docs/fields-bedrock.md,
 *          tests/unit/dialects/test_bedrock*.c
 */
#ifndef GW_DIALECTS_BEDROCK_H
#define GW_DIALECTS_BEDROCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/str.h"
#include "dialects/canon.h"

/* The shape's operations (dialects/canon.h), upstream side only: request_render,
 * parse_init, event_parse, answer_parse, answer_usage, upstream_error_read; the client
 * side entries (request_parse, render_*, answer_render, error_*) are NULL: no client
 * speaks Converse to the gateway.
 * request_render writes no model and no stream flag: both go in the path
 * (dl_bedrock_path).
 * event_parse reads one eventstream message as dl_bedrock_es_event names it: <event>
 * messageStart, contentBlockStart, contentBlockDelta, contentBlockStop, messageStop,
 * metadata with its JSON payload in <data>; a name ending in "Exception"
 * (throttlingException, modelStreamErrorException, validationException,
 * serviceUnavailableException, internalServerException, ...) or "error" is an ERROR
 * event (status: throttling 429, unavailable 503, validation 400, internal and model
 * stream errors 500 or as the table in bedrock_answer.c says); any other name is
 * ignored (AWS adds events). */
extern const struct dl_shape_ops dl_bedrock_shape;

/* Appends "<prefix>/model/<model percent-encoded>/converse" (or "/converse-stream"
 * when <stream>) to <out>. The model id is encoded as a path segment (every byte but
 * RFC 3986 unreserved ones, so ':' is %3A and '/' of an ARN is %2F), as AWS's SDKs send
 * it. GW_OK or GW_E_NOMEM. */
enum gw_code dl_bedrock_path(struct gw_str prefix, struct gw_str model, bool stream,
                             struct gw_buf *out);

/* ---- eventstream framing (application/vnd.amazon.eventstream) ----
 * A message: prelude (total length u32 BE, headers length u32 BE, CRC32 of those 8
 * bytes), headers, payload, CRC32 of everything before it. A header: name length u8,
 * name, value type u8, value (types 0 true, 1 false, 2 byte, 3 short, 4 int, 5 long,
 * 6 bytes (u16 BE length), 7 string (u16 BE length), 8 timestamp, 9 uuid). */

enum dl_bedrock_es_type {
    DL_BEDROCK_ES_BOOL_TRUE = 0,
    DL_BEDROCK_ES_BOOL_FALSE = 1,
    DL_BEDROCK_ES_BYTE = 2,
    DL_BEDROCK_ES_SHORT = 3,
    DL_BEDROCK_ES_INT = 4,
    DL_BEDROCK_ES_LONG = 5,
    DL_BEDROCK_ES_BYTES = 6,
    DL_BEDROCK_ES_STRING = 7,
    DL_BEDROCK_ES_TIMESTAMP = 8,
    DL_BEDROCK_ES_UUID = 9,
};

struct dl_bedrock_es_header {
    struct gw_str name;
    enum dl_bedrock_es_type type;
    struct gw_str value; /* BYTES, STRING: the bytes; the fixed-size types: their raw
                          * big-endian bytes; the booleans: empty */
};

#define DL_BEDROCK_ES_MAX_HEADERS 16u

/* One decoded message; slices valid only during the callback. */
struct dl_bedrock_es_msg {
    struct dl_bedrock_es_header hdrs[DL_BEDROCK_ES_MAX_HEADERS];
    size_t n_hdrs;
    struct gw_str payload;
    /* The string headers the stream uses, empty when absent. */
    struct gw_str message_type;   /* :message-type: "event", "exception", "error" */
    struct gw_str event_type;     /* :event-type */
    struct gw_str exception_type; /* :exception-type */
    struct gw_str error_code;     /* :error-code */
    struct gw_str error_message;  /* :error-message */
    struct gw_str content_type;   /* :content-type */
};

/* Receives one message; non-zero stops the feed (which then returns GW_OK). */
typedef int (*dl_bedrock_es_fn)(void *arg, const struct dl_bedrock_es_msg *m);

struct dl_bedrock_es {
    struct gw_buf buf;  /* the bytes of a message that spans reads */
    size_t max_message; /* total length cap */
    bool broken;        /* a bad frame was seen: every later feed refuses */
};

/* <max_message>: the largest total length accepted (a bigger prelude is refused before
 * its bytes are awaited). */
void dl_bedrock_es_init(struct dl_bedrock_es *p, size_t max_message);
void dl_bedrock_es_fini(struct dl_bedrock_es *p);
/* Feeds bytes as they arrive, split anywhere; each complete message goes to <fn>.
 * GW_OK; GW_E_UPSTREAM_PROTOCOL on a bad frame (a prelude or message CRC that does not
 * match, lengths that cannot be: total < 16, headers past the payload, total over
 * max_message, a header that runs past its block, more than DL_BEDROCK_ES_MAX_HEADERS
 * headers, an unknown value type); GW_E_NOMEM. */
enum gw_code dl_bedrock_es_feed(struct dl_bedrock_es *p, const char *data, size_t len,
                                dl_bedrock_es_fn fn, void *arg);
/* True when bytes of an unfinished message are held (a stream that ends so is cut). */
bool dl_bedrock_es_partial(const struct dl_bedrock_es *p);
/* Appends one encoded message (the CRCs computed) to <out>: tests and fuzz seeds.
 * GW_OK; GW_E_NOMEM; GW_E_BAD_REQUEST for a header that cannot be written (a name over
 * 255 bytes, a fixed-size value of another size, a string or bytes over 65535). */
enum gw_code dl_bedrock_es_encode(struct gw_buf *out, const struct dl_bedrock_es_header *hdrs,
                                  size_t n_hdrs, struct gw_str payload);
/* What event_parse is handed for <m>: an event's :event-type and payload; an
 * exception's :exception-type and payload; an error message's "error" and its
 * :error-message. */
void dl_bedrock_es_event(const struct dl_bedrock_es_msg *m, struct gw_str *event,
                         struct gw_str *data);

#endif
