/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_anthropic.c - fuzz target for the Anthropic Messages dialect: the
 * same input goes to the request conversion (as a Chat body), the answer conversion,
 * the error conversion, and the stream conversion (whole, under every event name, and
 * split into lines read as "name<TAB>data" events on one stream state).
 * Checks: a converted request is a JSON object with the model, a positive max_tokens
 * and messages starting with a user turn, and a refusal says why; a converted answer is
 * a chat.completion object whose usage matches the gw_usage; an error body is always
 * {"error":{message,type,param,code}}; stream output is whole "data: ...\n\n" frames,
 * each JSON or [DONE], read by the OpenAI chunk inspector without complaint; nothing
 * follows [DONE] or an error chunk; a refused event writes nothing. Every request,
 * answer and stream event also goes through the jansson route (dialects/anthropic-priv.h): the fast
 * route must give the same code, the same bytes and the same stream state.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     dialects/anthropic.c, tests/fuzz/corpus/anthropic/
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dialects/anthropic-priv.h"
#include "dialects/anthropic.h"
#include "dialects/openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T_MODEL "claude-fuzz-\xc3\xa9"

static bool
t_is(const json_t *v, const char *lit)
{
    return json_is_string(v) && strcmp(json_string_value(v), lit) == 0;
}

static void
t_check_request(const struct gw_buf *out)
{
    json_t *j = json_loadb(out->data, out->len, JSON_ALLOW_NUL, NULL);
    const json_t *msgs = json_object_get(j, "messages");
    const json_t *first = json_array_get(msgs, 0);

    if (!json_is_object(j) || !t_is(json_object_get(j, "model"), T_MODEL) ||
        json_integer_value(json_object_get(j, "max_tokens")) <= 0 || json_array_size(msgs) == 0 ||
        !t_is(json_object_get(first, "role"), "user"))
        abort();
    json_decref(j);
}

static void
t_check_answer(const struct gw_buf *out, const struct gw_usage *u)
{
    json_t *j = json_loadb(out->data, out->len, JSON_ALLOW_NUL, NULL);
    const json_t *usage = json_object_get(j, "usage");
    struct gw_usage seen;

    if (!json_is_object(j) || !json_is_array(json_object_get(j, "choices")) ||
        !t_is(json_object_get(j, "object"), "chat.completion"))
        abort();
    if (usage) {
        /* the OpenAI reader sees the uncached input with cache creation folded in */
        if (!dl_openai_answer_usage((struct gw_str){out->data, out->len}, &seen, NULL))
            abort();
        if (seen.cache_read_tokens != u->cache_read_tokens ||
            seen.output_tokens != u->output_tokens)
            abort();
    } else if (u->input_tokens || u->output_tokens || u->cache_read_tokens ||
               u->cache_write_tokens) {
        abort();
    }
    json_decref(j);
}

static void
t_check_error(const struct gw_buf *out)
{
    json_t *j = json_loadb(out->data, out->len, JSON_ALLOW_NUL, NULL);
    const json_t *e = json_object_get(j, "error");

    if (!json_is_string(json_object_get(e, "message")) ||
        !json_is_string(json_object_get(e, "type")) || !json_is_null(json_object_get(e, "param")))
        abort();
    json_decref(j);
}

/* Checks the frames written from <from> on; true when one ended the stream. */
static bool
t_check_frames(const struct gw_buf *out, size_t from)
{
    bool ended = false;
    size_t i = from;

    while (i < out->len) {
        const char *end;
        struct gw_str d;
        struct dl_openai_chunk c;

        if (ended || out->len - i < 8 || memcmp(out->data + i, "data: ", 6) != 0)
            abort();
        end = memmem(out->data + i, out->len - i, "\n\n", 2);
        if (!end)
            abort();
        d.ptr = out->data + i + 6;
        d.len = (size_t)(end - d.ptr);
        if (dl_openai_chunk_inspect(d, &c) != GW_OK)
            abort();
        if (!c.done) {
            json_t *j = json_loadb(d.ptr, d.len, JSON_ALLOW_NUL, NULL);

            if (!json_is_object(j))
                abort();
            json_decref(j);
        }
        ended = c.done || c.is_error;
        i = (size_t)(end - out->data) + 2;
    }
    return ended;
}

/* One event on <st>: refusals write nothing, frames are whole, nothing after the end. */
static void
t_event(struct dl_anthropic_stream *st, struct gw_str name, struct gw_str d, struct gw_buf *out)
{
    bool was_over = st->stopped || st->failed;
    size_t before = out->len;
    struct dl_anthropic_stream ref;
    struct gw_buf ref_out = {0};
    enum gw_code rc, ref_rc;

    memcpy(&ref, st, sizeof(ref));
    rc = dl_anthropic_stream_event(st, name, d, out);
    ref_rc = dl_anthropic_stream_event_jansson(&ref, name, d, &ref_out);
    if (rc != ref_rc || out->len - before != ref_out.len ||
        (ref_out.len && memcmp(out->data + before, ref_out.data, ref_out.len) != 0) ||
        memcmp(st, &ref, sizeof(ref)) != 0)
        abort(); /* the fast route differs from the jansson route */
    gw_buf_fini(&ref_out);
    if (rc != GW_OK && rc != GW_E_UPSTREAM_PROTOCOL)
        abort();
    if ((rc != GW_OK || was_over) && out->len != before)
        abort();
    if (t_check_frames(out, before) != (!was_over && (st->stopped || st->failed)))
        abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {
        "",
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
        "error",
        "ping",
        "other",
    };
    const char *body = (const char *)data;
    struct dl_anthropic_stream st;
    struct gw_buf out = {0};
    struct gw_usage u;
    char why[200];
    enum gw_code rc;
    size_t i, line;

    /* request, against the jansson route */
    rc = dl_anthropic_from_chat_jansson(body, size, gw_str_c(T_MODEL), size % 3 ? 0 : 8192, &out,
                                        why, sizeof(why));
    {
        struct gw_buf fast = {0};
        char fwhy[200];

        if (dl_anthropic_from_chat(body, size, gw_str_c(T_MODEL), size % 3 ? 0 : 8192, &fast, fwhy,
                                   sizeof(fwhy)) != rc ||
            fast.len != out.len || (out.len && memcmp(fast.data, out.data, out.len) != 0) ||
            strcmp(fwhy, why) != 0)
            abort();
        gw_buf_fini(&fast);
        /* a plain model takes the fast route too */
        gw_buf_reset(&out);
        rc = dl_anthropic_from_chat_jansson(body, size, GW_STR_LIT("m-1"), size % 3 ? 0 : 8192,
                                            &out, why, sizeof(why));
        if (dl_anthropic_from_chat(body, size, GW_STR_LIT("m-1"), size % 3 ? 0 : 8192, &fast, fwhy,
                                   sizeof(fwhy)) != rc ||
            fast.len != out.len || (out.len && memcmp(fast.data, out.data, out.len) != 0) ||
            strcmp(fwhy, why) != 0)
            abort();
        gw_buf_fini(&fast);
        gw_buf_reset(&out);
    }
    rc = dl_anthropic_from_chat(body, size, gw_str_c(T_MODEL), size % 3 ? 0 : 8192, &out, why,
                                sizeof(why));
    if (rc == GW_OK)
        t_check_request(&out);
    else if (rc != GW_E_UNCONVERTIBLE || why[0] == '\0' || out.len != 0)
        abort();
    gw_buf_reset(&out);

    /* answer, against the jansson route */
    rc = dl_anthropic_answer_to_chat_jansson(body, size, 1700000000, &out, &u);
    {
        struct gw_buf fast = {0};
        struct gw_usage fu;

        if (dl_anthropic_answer_to_chat(body, size, 1700000000, &fast, &fu) != rc ||
            fast.len != out.len || (out.len && memcmp(fast.data, out.data, out.len) != 0) ||
            memcmp(&fu, &u, sizeof(u)) != 0)
            abort();
        gw_buf_fini(&fast);
    }
    if (rc == GW_OK)
        t_check_answer(&out, &u);
    else if (rc != GW_E_UPSTREAM_PROTOCOL || out.len != 0)
        abort();
    gw_buf_reset(&out);

    /* error */
    dl_anthropic_error_to_chat(body, size, 400 + (int)(size % 200), &out);
    t_check_error(&out);
    gw_buf_reset(&out);

    /* stream: the whole input under each name, on a started stream */
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        dl_anthropic_stream_init(&st, 1);
        t_event(
            &st, GW_STR_LIT("message_start"),
            GW_STR_LIT("{\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"c\"}}"),
            &out);
        t_event(&st, gw_str_c(names[i]), (struct gw_str){body, size}, &out);
        gw_buf_reset(&out);
    }
    /* stream: each line an event, "name\tdata" or data alone */
    dl_anthropic_stream_init(&st, 2);
    for (i = 0; i < size; i = line + 1) {
        const char *nl = memchr(body + i, '\n', size - i);
        const char *tab;
        struct gw_str name = {"", 0}, d;

        line = nl ? (size_t)(nl - body) : size;
        d = (struct gw_str){body + i, line - i};
        tab = memchr(d.ptr, '\t', d.len);
        if (tab) {
            name = (struct gw_str){d.ptr, (size_t)(tab - d.ptr)};
            d = (struct gw_str){tab + 1, d.len - name.len - 1};
        }
        t_event(&st, name, d, &out);
        if (st.tool_index < -1)
            abort();
    }
    gw_buf_fini(&out);
    return 0;
}
