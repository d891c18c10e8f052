/* SPDX-License-Identifier: MIT
 * net/wsproto.h - the pure parts of the Responses API's WebSocket mode (DESIGN.md 12):
 * wslay's event API driven over byte buffers (the frames a socket delivered go in, the
 * frames to write come out in a buffer), the handshake's Sec-WebSocket-Accept, a
 * client's response.create message turned into the POST /v1/responses body it stands
 * for, and the events the gateway itself writes on the socket (error, response.failed).
 * No libevent and no clock: tests/fuzz/fuzz_ws.c feeds it frames directly.
 * Owns:    the wslay context and the output buffer of a struct net_wsio.
 * Threads: the owner's only.
 * See:     net/ws.c, tests/unit/net/test_wsproto.c, tests/fuzz/fuzz_ws.c
 */
#ifndef GW_NET_WSPROTO_H
#define GW_NET_WSPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/codes.h"
#include "core/str.h"

/* WebSocket close codes (RFC 6455 7.4.1) the gateway sends */
#define NET_WS_CLOSE_NORMAL 1000
#define NET_WS_CLOSE_GOING_AWAY 1001 /* drain, idle timeout */

/* A complete text message (<p>, <n> bytes, valid UTF-8: wslay checked it); <binary>
 * for a binary one. Called from inside net_wsio_feed. */
typedef void (*net_wsio_msg_fn)(void *arg, const char *p, size_t n, bool binary);

struct net_wsio {
    void *ctx;      /* wslay_event_context_ptr */
    const char *in; /* the bytes being fed ... */
    size_t in_len, in_off;
    struct gw_buf out; /* frames to write to the socket, in order */
    net_wsio_msg_fn on_msg;
    void *arg;
    bool in_feed;    /* inside net_wsio_feed: queued frames are sent after it */
    bool failed;     /* out of memory or a wslay error: close the socket */
    bool frame_seen; /* any frame arrived since the flag was cleared (activity) */
};

/* A server-side context: messages over <max_msg> bytes close the connection with 1009
 * (wslay). GW_OK or GW_E_NOMEM. */
enum gw_code net_wsio_init(struct net_wsio *io, size_t max_msg, net_wsio_msg_fn on_msg, void *arg);
void net_wsio_fini(struct net_wsio *io);
/* Feeds <n> bytes the socket delivered (all of them are taken): complete messages go
 * to on_msg, pings are answered, a close is answered; the frames to write are in out. */
void net_wsio_feed(struct net_wsio *io, const char *p, size_t n);
/* Queues one text message (copied) and frames it into out. */
enum gw_code net_wsio_text(struct net_wsio *io, const char *p, size_t n);
/* Queues a close frame with <code> and <reason> (once; later calls do nothing). */
void net_wsio_close(struct net_wsio *io, uint16_t code, const char *reason);
/* The peer sent its close frame, or ours is written, or the context failed: nothing
 * more will be read (the socket closes once out is written). */
bool net_wsio_done(const struct net_wsio *io);
/* The peer's close frame came. */
bool net_wsio_close_received(const struct net_wsio *io);

/* Sec-WebSocket-Accept for the client's Sec-WebSocket-Key <key> (RFC 6455 4.2.2):
 * 28 characters and a NUL into <out>. False when <key> is not 16 bytes in base64. */
bool net_ws_accept_key(struct gw_str key, char out[29]);

/* A client message <p> (<n> bytes) as the Responses request it stands for: a JSON
 * object with "type":"response.create" becomes the same object without the WebSocket-only
 * "type", "stream_id" and "generate" and with "stream": true (streaming is implicit on a
 * socket). GW_OK with the body in <body>; its stream_id (the lane its events are tagged
 * with) is appended to <lane> as JSON text, quotes included, also when the message is
 * refused after it was read. GW_E_WS_BAD_MESSAGE with a sentence in *<why> (not JSON,
 * not an object, duplicate keys, another type, a stream_id that is no string or over
 * NET_WS_LANE_MAX bytes, background true, generate false); GW_E_NOMEM. */
enum gw_code net_ws_create_body(const char *p, size_t n, struct gw_buf *body, struct gw_buf *lane,
                                const char **why);
/* The longest stream_id taken */
#define NET_WS_LANE_MAX 128
/* <event> (a JSON object's text) with "stream_id": <lane> (a JSON string's text, quotes
 * included) as its last member, into <out>; an empty <lane>, or an event that is not an
 * object, is copied as it is. */
enum gw_code net_ws_tag(struct gw_str event, struct gw_str lane, struct gw_buf *out);

/* The `error` event of a refused message: {"type":"error","status":..,"error":{
 * "type","code","message","param":null,"gw_code"}}. */
enum gw_code net_ws_error_event(enum gw_code code, const char *message, struct gw_buf *out);
/* The response.failed event of a turn refused before any event (<status> and the gw
 * code <gw_code> of the refusal, the client's error body <err_body> as the pipeline
 * wrote it, whose error.message is kept), the response id made from <req_id>. An empty
 * <gw_code> (an upstream's error passed back) takes the body's error.code, else
 * gw.upstream.status. */
enum gw_code net_ws_failed_event(int status, struct gw_str gw_code, struct gw_str req_id,
                                 struct gw_str err_body, uint64_t created, struct gw_buf *out);
/* The type of event <data> ("response.completed", ...): what a turn's end is known by.
 * Empty when there is none. */
struct gw_str net_ws_event_type(struct gw_str data);
/* A turn ends at this event type. */
bool net_ws_event_final(struct gw_str type);

#endif
