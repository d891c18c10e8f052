/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_anthropic.c - fuzz target for the Messages shape across the hub, the
 * Chat shape on the other side (the conversions the pipeline makes; each shape's own
 * parsers are fuzzed by fuzz_messages and fuzz_chat_canon). The same input is:
 * - a Chat request: when the Chat shape accepts it, the Messages render is GW_OK (a JSON
 *   object with the model, a positive max_tokens, a first turn of the user, and a body
 *   the Messages shape accepts again) or GW_E_UNCONVERTIBLE with a reason and nothing
 *   written;
 * - a Messages request: when accepted, the Chat render is GW_OK (a body the Chat shape
 *   accepts) or GW_E_UNCONVERTIBLE with nothing written;
 * - lines of a Messages stream ("name<TAB>data" or data alone) rendered for a Chat
 *   client: every frame "data: <JSON object>\n\n" or the final "data: [DONE]\n\n";
 * - lines of a Chat stream (each line a chunk's data) rendered for a Messages client:
 *   every frame "event: <type>\ndata: <JSON object of that type>\n\n", message_start
 *   first (an error frame may come first), nothing after message_stop or error;
 * - a Messages answer rendered for a Chat client and a Chat answer for a Messages
 *   client: JSON objects.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     dialects/anthropic_request.c, dialects/anthropic_answer.c,
 *          tests/fuzz/corpus/anthropic/
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "dialects/anthropic.h"
#include "dialects/canon.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T_MODEL "claude-fuzz-\xc3\xa9"

static json_t *
t_load(const char *s, size_t n)
{
    return json_loadb(s, n, JSON_ALLOW_NUL, NULL);
}

static bool
t_is(const json_t *v, const char *lit)
{
    return json_is_string(v) && strcmp(json_string_value(v), lit) == 0;
}

/* Parses <body> with <from>, renders it with <to>; returns the render's code, the body
 * rendered in <out>. */
static enum gw_code
t_convert(const struct dl_shape_ops *from, const struct dl_shape_ops *to, const char *body,
          size_t size, struct gw_arena *a, struct gw_buf *out, bool *parsed)
{
    struct gw_buf why = {0};
    struct dl_dropped d = {0};
    struct dl_request r;
    enum gw_code rc;

    *parsed = from->request_parse(a, body, size, &r, &why) == GW_OK;
    if (!*parsed) {
        gw_buf_fini(&why);
        return GW_E_BAD_REQUEST;
    }
    gw_buf_reset(&why);
    rc = to->request_render(&r, gw_str_c(T_MODEL), size % 3 ? 0 : 8192, &d, out, &why);
    if (rc == GW_E_UNCONVERTIBLE && (why.len == 0 || out->len != 0))
        abort();
    if (rc != GW_OK && rc != GW_E_UNCONVERTIBLE)
        abort();
    gw_buf_fini(&why);
    return rc;
}

static void
t_requests(const char *body, size_t size)
{
    const struct dl_shape_ops *chat = dl_shape_ops(DL_SHAPE_CHAT), *msg = &dl_anthropic_shape;
    struct gw_buf out = {0}, why = {0};
    struct gw_arena a;
    struct dl_request again;
    bool parsed;

    gw_arena_init(&a);
    /* a Chat client's request for a Messages upstream */
    if (t_convert(chat, msg, body, size, &a, &out, &parsed) == GW_OK) {
        json_t *j = t_load(out.data, out.len);
        const json_t *first = json_array_get(json_object_get(j, "messages"), 0);

        if (!json_is_object(j) || !t_is(json_object_get(j, "model"), T_MODEL) ||
            json_integer_value(json_object_get(j, "max_tokens")) <= 0 ||
            !t_is(json_object_get(first, "role"), "user"))
            abort();
        json_decref(j);
        if (msg->request_parse(&a, out.data, out.len, &again, &why) != GW_OK)
            abort();
    }
    gw_buf_reset(&out);
    /* a Messages client's request for a Chat upstream */
    if (t_convert(msg, chat, body, size, &a, &out, &parsed) == GW_OK &&
        chat->request_parse(&a, out.data, out.len, &again, &why) != GW_OK)
        abort();
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    gw_arena_fini(&a);
}

/* ---- streams ---- */

struct t_pipe {
    const struct dl_shape_ops *client;
    struct dl_render_state rs;
    struct gw_buf out;
    bool finish, error;
};

static int
t_render(void *arg, const struct dl_event *ev)
{
    struct t_pipe *p = arg;

    if (ev->kind == DL_EV_ERROR) /* the pipeline ends the stream with error_frame */
        p->error = true;
    if (ev->kind == DL_EV_FINISH)
        p->finish = true;
    if (!p->error && p->client->event_render(&p->rs, ev, &p->out) != GW_OK)
        abort();
    return p->error;
}

static void
t_pipe_end(struct t_pipe *p)
{
    if (p->finish && !p->error && p->client->render_end &&
        p->client->render_end(&p->rs, &p->out) != GW_OK)
        abort();
}

/* Chat frames: "data: <object>\n\n", or [DONE] last. */
static void
t_check_chat_frames(const struct gw_buf *f)
{
    size_t i = 0;
    bool done = false;

    while (i < f->len) {
        const char *end = memmem(f->data + i, f->len - i, "\n\n", 2);
        const char *d = f->data + i + 6;
        json_t *j;

        if (done || !end || f->len - i < 8 || memcmp(f->data + i, "data: ", 6) != 0)
            abort();
        if ((size_t)(end - d) == 6 && memcmp(d, "[DONE]", 6) == 0) {
            done = true;
        } else {
            j = t_load(d, (size_t)(end - d));
            if (!json_is_object(j))
                abort();
            json_decref(j);
        }
        i = (size_t)(end - f->data) + 2;
    }
}

/* Messages frames: "event: <type>\ndata: <object of that type>\n\n", in order. */
static void
t_check_messages_frames(const struct gw_buf *f)
{
    size_t i = 0;
    bool started = false, ended = false;

    while (i < f->len) {
        const char *end = memmem(f->data + i, f->len - i, "\n\n", 2);
        const char *nl;
        const char *type;
        json_t *j;

        if (ended || !end || memcmp(f->data + i, "event: ", 7) != 0)
            abort();
        nl = memchr(f->data + i, '\n', (size_t)(end - (f->data + i)));
        if (!nl || memcmp(nl, "\ndata: ", 7) != 0)
            abort();
        j = t_load(nl + 7, (size_t)(end - (nl + 7)));
        type = json_string_value(json_object_get(j, "type"));
        if (!type || strlen(type) != (size_t)(nl - (f->data + i + 7)) ||
            memcmp(type, f->data + i + 7, strlen(type)) != 0)
            abort();
        if (strcmp(type, "error") == 0 || strcmp(type, "message_stop") == 0)
            ended = true;
        else if (strcmp(type, "message_start") == 0)
            started = true;
        else if (!started)
            abort();
        json_decref(j);
        i = (size_t)(end - f->data) + 2;
    }
}

static void
t_streams(const char *body, size_t size)
{
    struct gw_arena a;
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("m"),
                                .id = GW_STR_LIT("r1"),
                                .created = 1700000000,
                                .stream_usage = true,
                                .arena = &a};
    struct t_pipe to_chat = {.client = dl_shape_ops(DL_SHAPE_CHAT)};
    struct t_pipe to_msg = {.client = &dl_anthropic_shape};
    struct dl_parse_state from_msg, from_chat;
    size_t i, line;

    gw_arena_init(&a);
    to_chat.client->render_init(&to_chat.rs, &ctx);
    to_msg.client->render_init(&to_msg.rs, &ctx);
    dl_anthropic_shape.parse_init(&from_msg);
    dl_shape_ops(DL_SHAPE_CHAT)->parse_init(&from_chat);
    for (i = 0; i < size; i = line + 1) {
        const char *nl = memchr(body + i, '\n', size - i);
        const char *tab;
        struct gw_str name = {"", 0}, d;
        enum gw_code rc;

        line = nl ? (size_t)(nl - body) : size;
        d = (struct gw_str){body + i, line - i};
        /* the line as a Chat chunk's data */
        if (!to_msg.error) {
            rc = dl_shape_ops(DL_SHAPE_CHAT)
                     ->event_parse(&from_chat, (struct gw_str){"", 0}, d, t_render, &to_msg);
            if (rc != GW_OK && rc != GW_E_UPSTREAM_PROTOCOL)
                abort();
        }
        /* the line as a Messages event */
        tab = memchr(d.ptr, '\t', d.len);
        if (tab) {
            name = (struct gw_str){d.ptr, (size_t)(tab - d.ptr)};
            d = (struct gw_str){tab + 1, d.len - name.len - 1};
        }
        if (!to_chat.error) {
            rc = dl_anthropic_shape.event_parse(&from_msg, name, d, t_render, &to_chat);
            if (rc != GW_OK && rc != GW_E_UPSTREAM_PROTOCOL)
                abort();
        }
    }
    t_pipe_end(&to_chat);
    t_pipe_end(&to_msg);
    t_check_chat_frames(&to_chat.out);
    t_check_messages_frames(&to_msg.out);
    gw_buf_fini(&to_chat.out);
    gw_buf_fini(&to_msg.out);
    gw_arena_fini(&a);
}

/* ---- answers ---- */

static void
t_answer(const struct dl_shape_ops *up, const struct dl_shape_ops *client, const char *body,
         size_t size)
{
    struct gw_arena a;
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("m"), .id = GW_STR_LIT("r1"), .arena = &a};
    struct gw_buf out = {0};
    struct dl_answer ans;
    json_t *j;

    gw_arena_init(&a);
    dl_answer_init(&ans, &a);
    if (up->answer_parse(body, size, dl_answer_fold, &ans) == GW_OK && !ans.failed) {
        if (client->answer_render(&ans, &ctx, &out) != GW_OK)
            abort();
        j = t_load(out.data, out.len);
        if (!json_is_object(j))
            abort();
        json_decref(j);
    }
    dl_answer_fini(&ans);
    gw_buf_fini(&out);
    gw_arena_fini(&a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;

    t_requests(body, size);
    t_streams(body, size);
    t_answer(&dl_anthropic_shape, dl_shape_ops(DL_SHAPE_CHAT), body, size);
    t_answer(dl_shape_ops(DL_SHAPE_CHAT), &dl_anthropic_shape, body, size);
    return 0;
}
