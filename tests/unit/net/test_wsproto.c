/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_wsproto.c - the pure parts of the Responses WebSocket mode
 * (net/wsproto.c): the handshake key (RFC 6455's own example), client frames in pieces
 * to messages, pings answered, the size cap closing with 1009, a close answered, text
 * messages framed unmasked, response.create to a request body, and the gateway's error
 * and response.failed events.
 * See: net/wsproto.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "net/wsproto.h"

struct t_msgs {
    unsigned n;
    char last[256];
    bool binary;
};

static void
t_on_msg(void *arg, const char *p, size_t n, bool binary)
{
    struct t_msgs *m = arg;

    m->n++;
    m->binary = binary;
    snprintf(m->last, sizeof(m->last), "%.*s", (int)n, p);
}

/* A client frame: FIN, <op>, masked with a fixed key. */
static size_t
t_frame(unsigned char *out, int op, const char *p, size_t n)
{
    static const unsigned char mask[4] = {0x37, 0xfa, 0x21, 0x3d};
    size_t off = 0, i;

    out[off++] = (unsigned char)(0x80 | op);
    if (n < 126) {
        out[off++] = (unsigned char)(0x80 | n);
    } else {
        out[off++] = 0x80 | 126;
        out[off++] = (unsigned char)(n >> 8);
        out[off++] = (unsigned char)n;
    }
    memcpy(out + off, mask, 4);
    off += 4;
    for (i = 0; i < n; i++)
        out[off + i] = (unsigned char)p[i] ^ mask[i % 4];
    return off + n;
}

static void
test_ws_accept_key(void **state)
{
    char out[29];

    (void)state;
    /* RFC 6455 1.3 */
    assert_true(net_ws_accept_key(gw_str_c("dGhlIHNhbXBsZSBub25jZQ=="), out));
    assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    assert_false(net_ws_accept_key(gw_str_c("short"), out));
    assert_false(net_ws_accept_key(gw_str_c("dGhlIHNhbXBsZSBub25jZQ"), out));
    assert_false(net_ws_accept_key(gw_str_c("!!!!!!!!!!!!!!!!!!!!!!=="), out));
}

static void
test_ws_frames_in_pieces_make_messages(void **state)
{
    static const char msg[] = "{\"type\":\"response.create\",\"model\":\"m\"}";
    unsigned char buf[512];
    struct t_msgs m = {0};
    struct net_wsio io;
    size_t n, i;

    (void)state;
    assert_int_equal(net_wsio_init(&io, 1024, t_on_msg, &m), GW_OK);
    n = t_frame(buf, 1, msg, sizeof(msg) - 1);
    n += t_frame(buf + n, 9, "hi", 2); /* a ping */
    for (i = 0; i < n; i++)            /* one byte at a time */
        net_wsio_feed(&io, (const char *)buf + i, 1);
    assert_int_equal(m.n, 1);
    assert_false(m.binary);
    assert_string_equal(m.last, msg);
    /* the pong: unmasked, FIN, opcode 10, the ping's payload */
    assert_int_equal(io.out.len, 4);
    assert_memory_equal(io.out.data, "\x8a\x02hi", 4);
    gw_buf_reset(&io.out);
    /* a text message from the gateway: one unmasked frame */
    assert_int_equal(net_wsio_text(&io, "{}", 2), GW_OK);
    assert_int_equal(io.out.len, 4);
    assert_memory_equal(io.out.data, "\x81\x02{}", 4);
    assert_false(net_wsio_done(&io));
    net_wsio_fini(&io);
}

static void
test_ws_message_over_the_cap_closes_with_1009(void **state)
{
    char big[300];
    unsigned char buf[512];
    struct t_msgs m = {0};
    struct net_wsio io;
    size_t n;

    (void)state;
    memset(big, 'x', sizeof(big));
    assert_int_equal(net_wsio_init(&io, 200, t_on_msg, &m), GW_OK);
    n = t_frame(buf, 1, big, sizeof(big));
    net_wsio_feed(&io, (const char *)buf, n);
    assert_int_equal(m.n, 0);
    assert_true(io.out.len >= 4);
    assert_int_equal((unsigned char)io.out.data[0], 0x88); /* close */
    assert_int_equal(((unsigned char)io.out.data[2] << 8) | (unsigned char)io.out.data[3], 1009);
    assert_true(net_wsio_done(&io));
    net_wsio_fini(&io);
}

static void
test_ws_close_is_answered(void **state)
{
    unsigned char buf[64];
    struct t_msgs m = {0};
    struct net_wsio io;
    size_t n;

    (void)state;
    assert_int_equal(net_wsio_init(&io, 1024, t_on_msg, &m), GW_OK);
    n = t_frame(buf, 8, "\x03\xe8", 2); /* 1000 */
    net_wsio_feed(&io, (const char *)buf, n);
    assert_true(net_wsio_close_received(&io));
    assert_true(net_wsio_done(&io));
    assert_int_equal((unsigned char)io.out.data[0], 0x88);
    assert_int_equal(net_wsio_text(&io, "{}", 2), GW_E_INTERNAL); /* nothing after a close */
    net_wsio_fini(&io);
}

static void
test_ws_create_body(void **state)
{
    static const char create[] = "{\"type\":\"response.create\",\"model\":\"m\","
                                 "\"stream\":false,\"stream_id\":\"a\",\"generate\":true}";
    struct gw_buf body = {0}, lane = {0}, tagged = {0};
    const char *why = NULL;
    json_t *j;

    (void)state;
    assert_int_equal(net_ws_create_body(create, sizeof(create) - 1, &body, &lane, &why), GW_OK);
    j = json_loadb(body.data, body.len, 0, NULL);
    assert_non_null(j);
    assert_null(json_object_get(j, "type"));
    assert_null(json_object_get(j, "stream_id"));
    assert_null(json_object_get(j, "generate"));
    assert_true(json_is_true(json_object_get(j, "stream")));
    assert_string_equal(json_string_value(json_object_get(j, "model")), "m");
    json_decref(j);
    gw_buf_fini(&body);
    /* the stream_id, as JSON text; an event tagged with it ends with it */
    assert_int_equal(lane.len, 3);
    assert_memory_equal(lane.data, "\"a\"", 3);
    assert_int_equal(
        net_ws_tag(gw_str_c("{\"type\":\"x\"}\n"), (struct gw_str){lane.data, lane.len}, &tagged),
        GW_OK);
    assert_int_equal(tagged.len, strlen("{\"type\":\"x\",\"stream_id\":\"a\"}"));
    assert_memory_equal(tagged.data, "{\"type\":\"x\",\"stream_id\":\"a\"}", tagged.len);
    gw_buf_reset(&tagged);
    assert_int_equal(net_ws_tag(gw_str_c("{}"), (struct gw_str){lane.data, lane.len}, &tagged),
                     GW_OK);
    assert_memory_equal(tagged.data, "{\"stream_id\":\"a\"}", tagged.len);
    gw_buf_reset(&tagged);
    assert_int_equal(net_ws_tag(gw_str_c("[1]"), (struct gw_str){lane.data, lane.len}, &tagged),
                     GW_OK);
    assert_memory_equal(tagged.data, "[1]", tagged.len); /* no object: as it is */
    gw_buf_fini(&tagged);
    gw_buf_reset(&lane);
    assert_int_equal(net_ws_create_body("{\"type\":\"response.create\",\"stream_id\":7}", 40, &body,
                                        &lane, &why),
                     GW_E_WS_BAD_MESSAGE);
    assert_int_equal(net_ws_create_body("nope", 4, &body, &lane, &why), GW_E_WS_BAD_MESSAGE);
    assert_non_null(why);
    assert_int_equal(net_ws_create_body("{\"type\":\"response.steer\"}", 25, &body, &lane, &why),
                     GW_E_WS_BAD_MESSAGE);
    assert_int_equal(net_ws_create_body("{\"type\":1}", 10, &body, &lane, &why),
                     GW_E_WS_BAD_MESSAGE);
    assert_int_equal(net_ws_create_body("{\"type\":\"response.create\",\"generate\":false}", 43,
                                        &body, &lane, &why),
                     GW_E_WS_BAD_MESSAGE);
    assert_int_equal(
        net_ws_create_body("{\"type\":\"response.create\",\"type\":\"x\"}", 38, &body, &lane, &why),
        GW_E_WS_BAD_MESSAGE); /* duplicate keys: which one counts is not guessed */
    gw_buf_fini(&body);
    gw_buf_fini(&lane);
}

static void
test_ws_events(void **state)
{
    static const char err[] = "{\"error\":{\"message\":\"limit reached\",\"type\":\"x\"}}";
    struct gw_buf out = {0};
    json_t *j, *e;

    (void)state;
    assert_int_equal(net_ws_error_event(GW_E_WS_TURN_RUNNING, "busy", &out), GW_OK);
    j = json_loadb(out.data, out.len, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "type")), "error");
    assert_int_equal(json_integer_value(json_object_get(j, "status")), 409);
    e = json_object_get(j, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "gw.ws.turn_running");
    assert_string_equal(json_string_value(json_object_get(e, "message")), "busy");
    json_decref(j);
    gw_buf_reset(&out);
    assert_int_equal(net_ws_failed_event(429, gw_str_c("gw.key_busy"), gw_str_c("abc"),
                                         (struct gw_str){err, sizeof(err) - 1}, 7, &out),
                     GW_OK);
    j = json_loadb(out.data, out.len, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "type")), "response.failed");
    e = json_object_get(j, "response");
    assert_string_equal(json_string_value(json_object_get(e, "id")), "resp_abc");
    assert_string_equal(json_string_value(json_object_get(e, "status")), "failed");
    assert_int_equal(json_integer_value(json_object_get(e, "created_at")), 7);
    e = json_object_get(e, "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "gw.key_busy");
    assert_string_equal(json_string_value(json_object_get(e, "message")), "limit reached");
    json_decref(j);
    /* an upstream's error passed back has no gw code: its own, else gw.upstream.status */
    gw_buf_reset(&out);
    assert_int_equal(net_ws_failed_event(400, gw_str_c(""), gw_str_c("abc"),
                                         gw_str_c("{\"error\":{\"code\":\"too_long\"}}"), 7, &out),
                     GW_OK);
    j = json_loadb(out.data, out.len, 0, NULL);
    e = json_object_get(json_object_get(j, "response"), "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "too_long");
    json_decref(j);
    gw_buf_reset(&out);
    assert_int_equal(
        net_ws_failed_event(502, gw_str_c(""), gw_str_c("abc"), gw_str_c("<html>"), 7, &out),
        GW_OK);
    j = json_loadb(out.data, out.len, 0, NULL);
    e = json_object_get(json_object_get(j, "response"), "error");
    assert_string_equal(json_string_value(json_object_get(e, "code")), "gw.upstream.status");
    assert_string_equal(json_string_value(json_object_get(e, "message")), "gw.upstream.status");
    json_decref(j);
    gw_buf_fini(&out);
    assert_true(gw_str_eq(net_ws_event_type(gw_str_c("{\"type\":\"response.completed\",\"x\":1}")),
                          gw_str_c("response.completed")));
    assert_int_equal(net_ws_event_type(gw_str_c("{\"x\":1}")).len, 0);
    assert_true(net_ws_event_final(gw_str_c("response.incomplete")));
    assert_false(net_ws_event_final(gw_str_c("response.output_text.delta")));
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ws_accept_key),
        cmocka_unit_test(test_ws_frames_in_pieces_make_messages),
        cmocka_unit_test(test_ws_message_over_the_cap_closes_with_1009),
        cmocka_unit_test(test_ws_close_is_answered),
        cmocka_unit_test(test_ws_create_body),
        cmocka_unit_test(test_ws_events),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
