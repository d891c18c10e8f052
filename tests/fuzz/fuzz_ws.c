/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_ws.c - fuzz target for the frame path of the Responses WebSocket mode
 * (net/wsproto.c over wslay's callbacks): the input is what a client sends after the
 * handshake (frames, masked or not, fragmented, control frames, garbage). It is read
 * twice, once whole and once in pieces whose sizes come from the input itself; both
 * readings must deliver the same messages and end the same way. Every message delivered
 * is at most the cap (wslay's max_recv_msg_length), and goes through what the server does
 * with one: net_ws_create_body (a body it accepts is a JSON object with "stream": true and
 * no "type"; a message whose stream_id it read stays an object once tagged with it),
 * net_ws_event_type and the response.failed builder.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     net/wsproto.c, tests/fuzz/corpus/ws/
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "net/wsproto.h"
#include "tests/fuzz/fuzz_hash.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T_MAX_MSG 4096

struct t_run {
    unsigned n;
    uint64_t hash;
};

static void
t_check_body(const char *p, size_t n)
{
    struct gw_buf body = {0}, ev = {0}, lane = {0}, tagged = {0};
    const char *why = NULL;
    enum gw_code rc = net_ws_create_body(p, n, &body, &lane, &why);

    if (rc == GW_OK) {
        json_t *j = json_loadb(body.data, body.len, 0, NULL);

        if (!json_is_object(j) || !json_is_true(json_object_get(j, "stream")) ||
            json_object_get(j, "type"))
            abort(); /* an accepted message must become a streamed request body */
        json_decref(j);
    } else if (rc == GW_E_WS_BAD_MESSAGE && !why) {
        abort(); /* a refusal says why */
    }
    if (lane.len &&
        net_ws_tag((struct gw_str){p, n}, (struct gw_str){lane.data, lane.len}, &tagged) == GW_OK) {
        /* the message is a JSON object (its lane was read): tagged, it stays one */
        json_t *j = json_loadb(tagged.data, tagged.len, JSON_DECODE_ANY, NULL);

        if (!json_is_object(j))
            abort();
        json_decref(j);
    }
    gw_buf_fini(&tagged);
    gw_buf_fini(&lane);
    (void)net_ws_event_type((struct gw_str){p, n});
    if (net_ws_failed_event(429, GW_STR_LIT("gw.busy"), GW_STR_LIT("abc"), (struct gw_str){p, n}, 0,
                            &ev) == GW_OK) {
        json_t *j = json_loadb(ev.data, ev.len, 0, NULL);

        if (!json_is_object(j))
            abort(); /* the event is JSON whatever the refusal's body was */
        json_decref(j);
    }
    gw_buf_fini(&ev);
    gw_buf_fini(&body);
}

static void
t_on_msg(void *arg, const char *p, size_t n, bool binary)
{
    struct t_run *r = arg;

    if (n > T_MAX_MSG)
        abort(); /* past the cap */
    r->n++;
    r->hash = fuzz_hash(r->hash, &binary, sizeof(binary));
    r->hash = fuzz_hash(r->hash, p, n);
    if (!binary)
        t_check_body(p, n);
}

static bool
t_read(const uint8_t *data, size_t size, bool pieces, struct t_run *r)
{
    struct net_wsio io;
    size_t off = 0, k = 0;
    bool done;

    memset(r, 0, sizeof(*r));
    if (net_wsio_init(&io, T_MAX_MSG, t_on_msg, r) != GW_OK)
        return false;
    while (off < size) {
        size_t n = size - off;

        if (pieces) {
            n = (size_t)data[k++ % size] % 17 + 1;
            if (n > size - off)
                n = size - off;
        }
        net_wsio_feed(&io, (const char *)data + off, n);
        off += n;
        gw_buf_reset(&io.out); /* what a socket would take */
    }
    /* the server's own frames after the client's: an event, then a close */
    net_wsio_text(&io, "{\"type\":\"error\"}", 16);
    net_wsio_close(&io, NET_WS_CLOSE_GOING_AWAY, "bye");
    done = net_wsio_done(&io);
    net_wsio_fini(&io);
    return done;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct t_run whole, split;

    t_read(data, size, false, &whole);
    t_read(data, size, true, &split);
    if (whole.n != split.n || whole.hash != split.hash)
        abort(); /* the same bytes in other pieces delivered other messages */
    return 0;
}
