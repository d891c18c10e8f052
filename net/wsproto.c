/* SPDX-License-Identifier: MIT
 * net/wsproto.c - the pure parts of the Responses WebSocket mode (net/wsproto.h): wslay's
 * event API over byte buffers, the handshake key, messages to request bodies, and the
 * events the gateway writes itself. wslay does the framing (masking, fragments, control
 * frames, UTF-8 of text messages, the message size cap); this file only moves bytes.
 * Owns:    a net_wsio's wslay context and its output buffer.
 * Threads: the owner's only.
 * See:     net/wsproto.h, net/ws.c, tests/fuzz/fuzz_ws.c
 */
#include "net/wsproto.h"

#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <wslay/wslay.h>

#include "core/codes.h"

/* ---- wslay over buffers ---- */

static ssize_t
io_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
    struct net_wsio *io = user;
    size_t n = io->in_len - io->in_off;

    (void)flags;
    if (!n) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    if (n > len)
        n = len;
    memcpy(buf, io->in + io->in_off, n);
    io->in_off += n;
    return (ssize_t)n;
}

static ssize_t
io_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user)
{
    struct net_wsio *io = user;

    (void)flags;
    if (gw_buf_append(&io->out, (const char *)data, len) != GW_OK) {
        io->failed = true;
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return (ssize_t)len;
}

static void
io_frame_start(wslay_event_context_ptr ctx, const struct wslay_event_on_frame_recv_start_arg *arg,
               void *user)
{
    (void)ctx;
    (void)arg;
    ((struct net_wsio *)user)->frame_seen = true;
}

static void
io_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user)
{
    struct net_wsio *io = user;

    (void)ctx;
    /* control frames: wslay answers pings and closes itself */
    if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME)
        io->on_msg(io->arg, (const char *)arg->msg, arg->msg_length,
                   arg->opcode == WSLAY_BINARY_FRAME);
}

enum gw_code
net_wsio_init(struct net_wsio *io, size_t max_msg, net_wsio_msg_fn on_msg, void *arg)
{
    static const struct wslay_event_callbacks cbs = {
        .recv_callback = io_recv,
        .send_callback = io_send,
        .on_frame_recv_start_callback = io_frame_start,
        .on_msg_recv_callback = io_msg,
    };
    wslay_event_context_ptr ctx;

    memset(io, 0, sizeof(*io));
    if (wslay_event_context_server_init(&ctx, &cbs, io) != 0)
        return GW_E_NOMEM;
    wslay_event_config_set_max_recv_msg_length(ctx, max_msg);
    io->ctx = ctx;
    io->on_msg = on_msg;
    io->arg = arg;
    return GW_OK;
}

void
net_wsio_fini(struct net_wsio *io)
{
    if (io->ctx)
        wslay_event_context_free(io->ctx);
    io->ctx = NULL;
    gw_buf_fini(&io->out);
}

/* Frames what wslay has queued into out. */
static void
io_flush(struct net_wsio *io)
{
    if (io->failed || io->in_feed)
        return;
    if (wslay_event_want_write(io->ctx) && wslay_event_send(io->ctx) != 0)
        io->failed = true;
}

void
net_wsio_feed(struct net_wsio *io, const char *p, size_t n)
{
    if (io->failed)
        return;
    io->in = p;
    io->in_len = n;
    io->in_off = 0;
    io->in_feed = true;
    if (wslay_event_get_read_enabled(io->ctx) && wslay_event_recv(io->ctx) != 0)
        io->failed = true;
    io->in_feed = false;
    io->in = NULL;
    io->in_len = io->in_off = 0;
    io_flush(io);
}

enum gw_code
net_wsio_text(struct net_wsio *io, const char *p, size_t n)
{
    struct wslay_event_msg m = {WSLAY_TEXT_FRAME, (const uint8_t *)p, n};
    int rc;

    if (io->failed)
        return GW_E_INTERNAL;
    rc = wslay_event_queue_msg(io->ctx, &m);
    if (rc == WSLAY_ERR_NOMEM) {
        io->failed = true;
        return GW_E_NOMEM;
    }
    if (rc != 0)
        return GW_E_INTERNAL; /* closing: no more messages */
    io_flush(io);
    return io->failed ? GW_E_NOMEM : GW_OK;
}

void
net_wsio_close(struct net_wsio *io, uint16_t code, const char *reason)
{
    if (io->failed || wslay_event_get_close_sent(io->ctx))
        return;
    /* a second close is refused by wslay (WSLAY_ERR_NO_MORE_MSG): nothing to do */
    (void)wslay_event_queue_close(io->ctx, code, (const uint8_t *)reason, strlen(reason));
    io_flush(io);
}

bool
net_wsio_done(const struct net_wsio *io)
{
    return io->failed || wslay_event_get_close_sent(io->ctx) ||
           (!wslay_event_get_read_enabled(io->ctx) && !wslay_event_want_write(io->ctx));
}

bool
net_wsio_close_received(const struct net_wsio *io)
{
    return wslay_event_get_close_received(io->ctx) != 0;
}

/* ---- the handshake ---- */

bool
net_ws_accept_key(struct gw_str key, char out[29])
{
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    unsigned char raw[24], md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    char cat[24 + sizeof(guid)];
    int n;

    /* 16 bytes in base64: 24 characters ending in "==" */
    if (key.len != 24 || key.ptr[22] != '=' || key.ptr[23] != '=')
        return false;
    n = EVP_DecodeBlock(raw, (const unsigned char *)key.ptr, 24);
    if (n != 18)
        return false;
    memcpy(cat, key.ptr, 24);
    memcpy(cat + 24, guid, sizeof(guid) - 1);
    if (!EVP_Digest(cat, 24 + sizeof(guid) - 1, md, &md_len, EVP_sha1(), NULL) || md_len != 20)
        return false;
    return EVP_EncodeBlock((unsigned char *)out, md, 20) == 28;
}

/* ---- messages and events ---- */

static enum gw_code
dump_into(json_t *j, struct gw_buf *out)
{
    size_t n = json_dumpb(j, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
    enum gw_code rc;

    if (!n)
        return GW_E_NOMEM;
    rc = gw_buf_reserve(out, n);
    if (rc != GW_OK)
        return rc;
    if (json_dumpb(j, out->data + out->len, n, JSON_COMPACT | JSON_ENCODE_ANY) != n)
        return GW_E_NOMEM;
    out->len += n;
    return GW_OK;
}

enum gw_code
net_ws_create_body(const char *p, size_t n, struct gw_buf *body, struct gw_buf *lane,
                   const char **why)
{
    json_t *j = json_loadb(p, n, JSON_REJECT_DUPLICATES, NULL);
    json_t *type, *sid;
    enum gw_code rc = GW_E_WS_BAD_MESSAGE;

    if (!j || !json_is_object(j)) {
        *why = "a message is a JSON object with a type";
        goto out;
    }
    /* the lane first: a refusal of this message is tagged with it too */
    sid = json_object_get(j, "stream_id");
    if (sid && (!json_is_string(sid) || json_string_length(sid) > NET_WS_LANE_MAX)) {
        *why = "stream_id is a string of at most 128 bytes";
        goto out;
    }
    if (sid && dump_into(sid, lane) != GW_OK) {
        rc = GW_E_NOMEM;
        goto out;
    }
    type = json_object_get(j, "type");
    if (!json_is_string(type)) {
        *why = "a message is a JSON object with a type";
        goto out;
    }
    if (json_string_length(type) != 15 || strcmp(json_string_value(type), "response.create") != 0) {
        *why = "the gateway serves response.create messages only";
        goto out;
    }
    if (json_is_true(json_object_get(j, "background"))) {
        *why = "background is not supported over WebSocket";
        goto out;
    }
    if (json_is_false(json_object_get(j, "generate"))) {
        /* a warm-up asks the model for nothing: no upstream can be asked for that */
        *why = "generate: false (a warm-up) is not supported by the gateway";
        goto out;
    }
    json_object_del(j, "type");
    json_object_del(j, "stream_id");
    json_object_del(j, "generate"); /* WebSocket-only: no upstream takes it */
    if (json_object_set_new(j, "stream", json_true()) != 0) {
        rc = GW_E_NOMEM;
        goto out;
    }
    rc = dump_into(j, body);
out:
    json_decref(j);
    return rc;
}

enum gw_code
net_ws_error_event(enum gw_code code, const char *message, struct gw_buf *out)
{
    int status = gw_code_http_status(code);
    json_t *j =
        json_pack("{s:s, s:i, s:{s:s, s:s, s:s, s:n, s:s}}", "type", "error", "status", status,
                  "error", "type", status >= 500 ? "server_error" : "invalid_request_error", "code",
                  gw_code_str(code), "message", message, "param", "gw_code", gw_code_str(code));
    enum gw_code rc;

    if (!j)
        return GW_E_NOMEM;
    rc = dump_into(j, out);
    json_decref(j);
    return rc;
}

enum gw_code
net_ws_failed_event(int status, struct gw_str gw_code, struct gw_str req_id, struct gw_str err_body,
                    uint64_t created, struct gw_buf *out)
{
    json_t *err = json_loadb(err_body.ptr, err_body.len, 0, NULL);
    json_t *msg = json_object_get(json_object_get(err, "error"), "message");
    json_t *theirs = json_object_get(json_object_get(err, "error"), "code");
    json_t *j;
    char id[96];
    enum gw_code rc;

    if (!gw_code.len) /* an upstream's error passed back: its own code, else gw's word */
        gw_code = json_is_string(theirs) && json_string_length(theirs)
                      ? (struct gw_str){json_string_value(theirs), json_string_length(theirs)}
                      : gw_str_c(gw_code_str(GW_E_UPSTREAM_STATUS));

    snprintf(id, sizeof(id), "resp_%.*s", (int)(req_id.len < 80 ? req_id.len : 80), req_id.ptr);
    j = json_pack("{s:s, s:i, s:{s:s, s:s, s:I, s:s, s:{s:s%, s:s%, s:i}, s:[], s:n, s:n}}", "type",
                  "response.failed", "sequence_number", 0, "response", "id", id, "object",
                  "response", "created_at", (json_int_t)created, "status", "failed", "error",
                  "code", gw_code.ptr, gw_code.len, "gw_code", gw_code.ptr, gw_code.len, "status",
                  status, "output", "incomplete_details", "usage");
    if (j && json_is_string(msg))
        json_object_set(json_object_get(json_object_get(j, "response"), "error"), "message", msg);
    else if (j)
        json_object_set_new(json_object_get(json_object_get(j, "response"), "error"), "message",
                            json_stringn(gw_code.ptr, gw_code.len));
    json_decref(err);
    if (!j)
        return GW_E_NOMEM;
    rc = dump_into(j, out);
    json_decref(j);
    return rc;
}

enum gw_code
net_ws_tag(struct gw_str event, struct gw_str lane, struct gw_buf *out)
{
    size_t end = event.len;
    enum gw_code rc;

    while (end && (event.ptr[end - 1] == ' ' || event.ptr[end - 1] == '\n' ||
                   event.ptr[end - 1] == '\r' || event.ptr[end - 1] == '\t'))
        end--;
    if (!lane.len || end < 2 || event.ptr[0] != '{' || event.ptr[end - 1] != '}')
        return gw_buf_append(out, event.ptr, event.len); /* not an object: as it is */
    rc = gw_buf_append(out, event.ptr, end - 1);
    /* "{}" takes the member alone, any other object one more member */
    if (rc == GW_OK && end > 2)
        rc = gw_buf_append(out, ",", 1);
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, "\"stream_id\":");
    if (rc == GW_OK)
        rc = gw_buf_append(out, lane.ptr, lane.len);
    if (rc == GW_OK)
        rc = gw_buf_append(out, "}", 1);
    return rc;
}

struct gw_str
net_ws_event_type(struct gw_str data)
{
    /* The events the gateway renders and the ones OpenAI sends start with their type:
     * read it there; anything else is not a type this file knows. */
    static const char pre[] = "{\"type\":\"";
    size_t i, k = sizeof(pre) - 1;

    if (data.len < k || memcmp(data.ptr, pre, k) != 0)
        return (struct gw_str){"", 0};
    for (i = k; i < data.len && data.ptr[i] != '"' && data.ptr[i] != '\\'; i++)
        ;
    if (i == data.len || data.ptr[i] != '"')
        return (struct gw_str){"", 0};
    return (struct gw_str){data.ptr + k, i - k};
}

bool
net_ws_event_final(struct gw_str type)
{
    return gw_str_eq(type, GW_STR_LIT("response.completed")) ||
           gw_str_eq(type, GW_STR_LIT("response.failed")) ||
           gw_str_eq(type, GW_STR_LIT("response.incomplete")) ||
           gw_str_eq(type, GW_STR_LIT("error"));
}
