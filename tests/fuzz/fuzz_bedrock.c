/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_bedrock.c - fuzz target for the Bedrock Converse shape
 * (dl_bedrock_shape, dialects/bedrock*.c; its eventstream framing has its own target).
 * The same input goes to:
 * - event_parse: the whole input as the payload of each event name the parser knows
 *   (and of an exception), after a first good text delta; and each line "<name>
 *   <payload>" as one event on one state. Codes are GW_OK or GW_E_UPSTREAM_PROTOCOL
 *   (which emits nothing); START comes first (but for an ERROR) and once; BLOCK_START indexes only
 * grow, a DELTA or BLOCK_STOP is of the open block; nothing after ERROR, only USAGE after FINISH.
 * The events are folded into an answer and rendered for a Messages client, and rendered as a Chat
 * stream (converted answers must not break the other side).
 * - answer_parse: GW_OK (a JSON object; the events end with FINISH; a USAGE agrees with
 *   answer_usage) or GW_E_UPSTREAM_PROTOCOL with no event.
 * - upstream_error_read: a type and a message, always.
 * - the request render: the input parsed by the Chat, Messages, Responses and Gemini
 *   shapes, when accepted, rendered for a Claude, a Nova and another model: GW_OK (a
 *   JSON object jansson loads, with a messages array, no model, every extra named as
 *   dropped) or GW_E_UNCONVERTIBLE with a reason, nothing written or dropped.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     dialects/bedrock_answer.c, dialects/bedrock_request.c, tests/fuzz/corpus/bedrock/
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "dialects/bedrock-priv.h"
#include "dialects/canon.h"
#include "dialects/json_scan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A JSON object (checked with the scanner: jansson on every frame would be slow). */
static bool
t_is_object(const char *s, size_t n)
{
    struct dl_json j;

    dl_json_init(&j, s, n);
    return dl_json_peek(&j) == '{' && dl_json_skip(&j, NULL) && dl_json_end(&j);
}

/* ---- events ---- */

struct t_seq {
    bool started, error, finish, open;
    long last_start; /* index of the last BLOCK_START, -1 before any */
    unsigned open_index;
    size_t n; /* events */
    struct dl_render_state msg, chat;
    struct gw_buf msg_out, chat_out;
    struct dl_answer ans;
};

static int
t_on_event(void *arg, const struct dl_event *ev)
{
    struct t_seq *q = arg;

    q->n++;
    if (q->error || (q->finish && ev->kind != DL_EV_USAGE))
        abort(); /* nothing after ERROR, only USAGE after FINISH */
    if (ev->kind != DL_EV_ERROR && (ev->kind == DL_EV_START) == q->started)
        abort(); /* START first (an exception may come before it), and once */
    switch (ev->kind) {
    case DL_EV_START: q->started = true; break;
    case DL_EV_BLOCK_START:
        if ((long)ev->index <= q->last_start || q->open)
            abort();
        q->last_start = (long)ev->index;
        q->open = true;
        q->open_index = ev->index;
        break;
    case DL_EV_DELTA:
        if (!q->open || ev->index != q->open_index || (!ev->text.len && !ev->signature.len))
            abort();
        break;
    case DL_EV_BLOCK_STOP:
        if (!q->open || ev->index != q->open_index)
            abort();
        q->open = false;
        break;
    case DL_EV_ERROR:
        if (ev->status < 400 || ev->status > 599)
            abort();
        q->error = true;
        break;
    case DL_EV_FINISH:
        if (q->open)
            abort();
        q->finish = true;
        break;
    case DL_EV_USAGE: break;
    }
    if (dl_shape_ops(DL_SHAPE_MESSAGES)->event_render(&q->msg, ev, &q->msg_out) != GW_OK ||
        dl_shape_ops(DL_SHAPE_CHAT)->event_render(&q->chat, ev, &q->chat_out) != GW_OK)
        abort();
    if (dl_answer_fold(&q->ans, ev) != 0)
        abort();
    return 0;
}

static void
t_seq_init(struct t_seq *q, struct gw_arena *a)
{
    struct dl_render_ctx ctx = {
        .model = GW_STR_LIT("m"), .id = GW_STR_LIT("r1"), .upstream = DL_SHAPE_BEDROCK, .arena = a};

    memset(q, 0, sizeof(*q));
    q->last_start = -1;
    dl_shape_ops(DL_SHAPE_MESSAGES)->render_init(&q->msg, &ctx);
    dl_shape_ops(DL_SHAPE_CHAT)->render_init(&q->chat, &ctx);
    dl_answer_init(&q->ans, a);
}

static void
t_seq_fini(struct t_seq *q, struct gw_arena *a)
{
    struct dl_render_ctx ctx = {
        .model = GW_STR_LIT("m"), .id = GW_STR_LIT("r1"), .upstream = DL_SHAPE_BEDROCK, .arena = a};
    struct gw_buf out = {0};
    json_t *j;

    if (q->finish && !q->error &&
        (dl_shape_ops(DL_SHAPE_MESSAGES)->render_end(&q->msg, &q->msg_out) != GW_OK ||
         dl_shape_ops(DL_SHAPE_CHAT)->render_end(&q->chat, &q->chat_out) != GW_OK))
        abort();
    if (dl_shape_ops(DL_SHAPE_MESSAGES)->answer_render(&q->ans, &ctx, &out) != GW_OK)
        abort();
    j = json_loadb(out.data, out.len, JSON_ALLOW_NUL, NULL);
    if (!json_is_object(j))
        abort();
    json_decref(j);
    gw_buf_fini(&out);
    gw_buf_fini(&q->msg_out);
    gw_buf_fini(&q->chat_out);
    dl_answer_fini(&q->ans);
}

static void
t_one(struct dl_parse_state *st, struct t_seq *q, struct gw_str name, struct gw_str d)
{
    size_t before = q->n;
    enum gw_code rc = dl_bedrock_shape.event_parse(st, name, d, t_on_event, q);

    if (rc != GW_OK && rc != GW_E_UPSTREAM_PROTOCOL)
        abort();
    if (rc != GW_OK && q->n != before)
        abort(); /* a refused event emits nothing */
}

static void
t_events(const char *body, size_t size)
{
    static const char *const names[] = {
        "messageStart", "contentBlockStart", "contentBlockDelta",   "contentBlockStop",
        "messageStop",  "metadata",          "throttlingException", "error",
    };
    struct gw_arena a;
    struct dl_parse_state st;
    struct t_seq q;
    size_t i, line;

    gw_arena_init(&a);
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        dl_bedrock_shape.parse_init(&st);
        t_seq_init(&q, &a);
        t_one(&st, &q, GW_STR_LIT("contentBlockDelta"),
              GW_STR_LIT("{\"contentBlockIndex\":0,\"delta\":{\"text\":\"a\"}}"));
        t_one(&st, &q, gw_str_c(names[i]), (struct gw_str){body, size});
        t_seq_fini(&q, &a);
    }
    /* each line "<name> <payload>" an event */
    dl_bedrock_shape.parse_init(&st);
    t_seq_init(&q, &a);
    for (i = 0; i < size; i = line + 1) {
        const char *nl = memchr(body + i, '\n', size - i);
        const char *sp;

        line = nl ? (size_t)(nl - body) : size;
        sp = memchr(body + i, ' ', line - i);
        if (sp)
            t_one(&st, &q, (struct gw_str){body + i, (size_t)(sp - (body + i))},
                  (struct gw_str){sp + 1, (size_t)(body + line - (sp + 1))});
    }
    t_seq_fini(&q, &a);
    gw_arena_fini(&a);
}

/* ---- answers and errors ---- */

struct t_usage {
    struct gw_usage u;
    bool seen;
};

static int
t_usage_of(void *arg, const struct dl_event *ev)
{
    struct t_usage *t = arg;

    if (ev->kind == DL_EV_USAGE) {
        t->u = ev->usage;
        t->seen = true;
    }
    return 0;
}

static void
t_answer(const char *body, size_t size)
{
    struct t_usage seen = {{0}, false};
    struct gw_usage read;
    struct gw_arena a;
    struct t_seq q;
    enum gw_code rc;

    gw_arena_init(&a);
    t_seq_init(&q, &a);
    rc = dl_bedrock_shape.answer_parse(body, size, t_on_event, &q);
    if (rc == GW_OK) {
        if (!t_is_object(body, size) || !q.finish)
            abort();
        if (dl_bedrock_shape.answer_parse(body, size, t_usage_of, &seen) != GW_OK)
            abort();
        if (seen.seen && (!dl_bedrock_shape.answer_usage(body, size, &read) ||
                          memcmp(&seen.u, &read, sizeof(read)) != 0))
            abort();
    } else if (rc != GW_E_UPSTREAM_PROTOCOL || q.n != 0) {
        abort();
    }
    t_seq_fini(&q, &a);
    gw_arena_fini(&a);
}

static void
t_error(const char *body, size_t size)
{
    struct gw_str type, message;

    dl_bedrock_shape.upstream_error_read(body, size, 400 + (int)(size % 200), &type, &message);
    if (type.len == 0 || message.len == 0)
        abort();
}

/* ---- requests ---- */

static void
t_render(const struct dl_request *r, const char *model, uint64_t spec)
{
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};
    enum gw_code rc;
    json_t *j;
    size_t k;

    dl_dropped_add(&d, GW_STR_LIT("before"));
    rc = dl_bedrock_shape.request_render(r, gw_str_c(model), spec, &d, &out, &why);
    if (rc == GW_OK) {
        j = json_loadb(out.data, out.len, JSON_ALLOW_NUL, NULL);
        if (!json_is_object(j) || !json_is_array(json_object_get(j, "messages")) ||
            json_object_get(j, "model") || json_object_get(j, "modelId"))
            abort();
        json_decref(j);
        for (k = 0; k < r->n_extras && k < DL_DROPPED_MAX - 1; k++) {
            size_t i;
            bool named = d.more;

            for (i = 0; i < d.n; i++)
                named |= gw_str_eq(d.name[i], r->extras[k].name);
            if (!named)
                abort();
        }
    } else if (rc != GW_E_UNCONVERTIBLE || out.len != 0 || d.n != 1 || why.len == 0) {
        abort();
    }
    gw_buf_fini(&out);
    gw_buf_fini(&why);
}

static void
t_requests(const char *body, size_t size)
{
    static const enum dl_shape from[] = {DL_SHAPE_CHAT, DL_SHAPE_MESSAGES, DL_SHAPE_RESPONSES,
                                         DL_SHAPE_GEMINI};
    size_t i;

    for (i = 0; i < sizeof(from) / sizeof(from[0]); i++) {
        struct gw_buf why = {0};
        struct gw_arena a;
        struct dl_request r;

        gw_arena_init(&a);
        if (dl_shape_ops(from[i])->request_parse(&a, body, size, &r, &why) == GW_OK) {
            t_render(&r, "us.anthropic.claude-sonnet-4-5-20250929-v1:0", 0);
            t_render(&r, "amazon.nova-pro-v1:0", 4096);
            t_render(&r, "meta.llama3-70b-instruct-v1:0", 100);
        }
        gw_buf_fini(&why);
        gw_arena_fini(&a);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;

    t_events(body, size);
    t_answer(body, size);
    t_error(body, size);
    t_requests(body, size);
    return 0;
}
