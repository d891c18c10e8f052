/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_gemini.c - fuzz target for every parser of the Gemini shape
 * (dl_gemini_shape, dialects/gemini*.c). The same input goes to:
 * - request_parse: a refusal is GW_E_BAD_REQUEST with a reason; an accepted body is a
 *   JSON object jansson loads, and the canonical request has no model and no stream.
 *   Its render for a Gemini upstream is GW_OK, a JSON object holding "contents" and no
 *   "model", with nothing dropped, that parses again and renders to the same bytes (a
 *   fixed point). Its render for every other shape of the table (Chat, Messages) is
 *   GW_OK (a JSON object, every extra named as dropped) or GW_E_UNCONVERTIBLE with <out>
 *   and the dropped list unchanged; and so is its render for Gemini as if from another
 *   shape. countTokens reads it too (GW_OK or GW_E_BAD_REQUEST).
 * - event_parse: the whole input as a chunk after a first good one, and each line as a
 *   chunk on one state. Codes are GW_OK or GW_E_UPSTREAM_PROTOCOL (which emits nothing);
 *   BLOCK_START indexes only grow; after ERROR nothing, after FINISH only USAGE. The
 *   events go on to the Gemini client renderer in both modes: SSE events whose data is a
 *   response the event parser accepts again (or the error object last); the JSON array
 *   one valid array once ended; and into the answer fold and its render (a JSON object).
 * - answer_parse: GW_OK (a JSON object, ending with FINISH or ERROR; a USAGE agrees
 *   with answer_usage) or GW_E_UPSTREAM_PROTOCOL with no event.
 * - upstream_error_read and upstream_error_render: always a JSON error object.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     dialects/gemini_request.c, dialects/gemini_answer.c, dialects/gemini_frames.c,
 *          tests/fuzz/corpus/gemini/
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "dialects/canon.h"
#include "dialects/gemini-priv.h"
#include "dialects/gemini.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T_NONE ((struct gw_str){"", 0})

static json_t *
t_load(const char *s, size_t n)
{
    return json_loadb(s, n, JSON_ALLOW_NUL, NULL);
}

/* A JSON object (checked with the scanner: jansson on every frame would be slow). */
static bool
t_is_object(const char *s, size_t n)
{
    struct dl_json j;

    dl_json_init(&j, s, n);
    return dl_json_peek(&j) == '{' && dl_json_skip(&j, NULL) && dl_json_end(&j);
}

/* ---- request ---- */

static void
t_check_gemini_body(const struct gw_buf *out)
{
    json_t *j = t_load(out->data, out->len);

    if (!json_is_object(j) || !json_is_array(json_object_get(j, "contents")) ||
        json_object_get(j, "model"))
        abort();
    json_decref(j);
}

/* <r> rendered by <o>: GW_OK and JSON, every extra named when <extras_dropped>; or
 * GW_E_UNCONVERTIBLE leaving <out> and the dropped list as they were. */
static void
t_render_other(const struct dl_shape_ops *o, const struct dl_request *r, bool extras_dropped)
{
    struct gw_buf out = {0}, why = {0};
    struct dl_dropped d = {0};
    enum gw_code rc;
    size_t k;

    dl_dropped_add(&d, GW_STR_LIT("before"));
    rc = o->request_render(r, GW_STR_LIT("m"), 100, &d, &out, &why);
    if (rc == GW_OK) {
        if (!t_is_object(out.data, out.len))
            abort();
        for (k = 0; extras_dropped && k < r->n_extras && k < DL_DROPPED_MAX - 1; k++) {
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
t_request(const char *body, size_t size)
{
    struct gw_buf why = {0}, out = {0}, again = {0};
    struct gw_arena a, b;
    struct dl_request r, r2;
    struct dl_dropped d = {0};
    enum gw_code rc;
    json_t *j;
    int s;

    gw_arena_init(&a);
    gw_arena_init(&b);
    rc = dl_gemini_shape.request_parse(&a, body, size, &r, &why);
    j = t_load(body, size);
    if (rc != GW_OK) {
        if (rc != GW_E_BAD_REQUEST || why.len == 0)
            abort();
        goto count;
    }
    if (!json_is_object(j) || why.len != 0 || r.model.len || r.stream ||
        r.source != DL_SHAPE_GEMINI)
        abort();
    (void)dl_request_input_estimate(&r);
    /* the same shape takes everything, and renders a fixed point */
    if (dl_gemini_shape.request_render(&r, GW_STR_LIT("m"), 0, &d, &out, &why) != GW_OK || d.n)
        abort();
    t_check_gemini_body(&out);
    if (dl_gemini_shape.request_parse(&b, out.data, out.len, &r2, &why) != GW_OK ||
        dl_gemini_shape.request_render(&r2, GW_STR_LIT("m"), 0, NULL, &again, &why) != GW_OK ||
        again.len != out.len || memcmp(again.data, out.data, out.len) != 0)
        abort();
    /* every other shape of the table */
    for (s = 0; s < DL_SHAPE__COUNT; s++) {
        const struct dl_shape_ops *o = dl_shape_ops((enum dl_shape)s);

        if (o && s != DL_SHAPE_GEMINI)
            t_render_other(o, &r, true);
    }
    /* as if from another shape: its extras dropped by name, its own things refused */
    r.source = DL_SHAPE_CHAT;
    t_render_other(&dl_gemini_shape, &r, true);
count:
    gw_buf_reset(&why);
    rc = dl_gemini_count_parse(&b, body, size, &r, &why);
    if (rc != GW_OK && (rc != GW_E_BAD_REQUEST || why.len == 0))
        abort();
    json_decref(j);
    gw_buf_fini(&why);
    gw_buf_fini(&out);
    gw_buf_fini(&again);
    gw_arena_fini(&a);
    gw_arena_fini(&b);
}

/* ---- events ---- */

/* What the events seen so far allow, and the renderers they feed. */
struct t_seq {
    bool error, finish;
    long last_start; /* index of the last BLOCK_START, -1 before any */
    size_t n;        /* events */
    struct dl_render_state sse, arr;
    struct gw_buf sse_out, arr_out;
    struct dl_answer ans;
};

static int
t_on_event(void *arg, const struct dl_event *ev)
{
    struct t_seq *q = arg;

    q->n++;
    if (q->error)
        abort(); /* nothing after ERROR */
    if (q->finish && ev->kind != DL_EV_USAGE)
        abort(); /* only USAGE after FINISH */
    switch (ev->kind) {
    case DL_EV_BLOCK_START:
        if ((long)ev->index <= q->last_start)
            abort();
        q->last_start = (long)ev->index;
        break;
    case DL_EV_ERROR: q->error = true; break;
    case DL_EV_FINISH: q->finish = true; break;
    case DL_EV_START:
    case DL_EV_DELTA:
    case DL_EV_BLOCK_STOP:
    case DL_EV_USAGE: break;
    }
    if (dl_gemini_shape.event_render(&q->sse, ev, &q->sse_out) != GW_OK ||
        dl_gemini_shape.event_render(&q->arr, ev, &q->arr_out) != GW_OK)
        abort();
    if (dl_answer_fold(&q->ans, ev) != 0)
        abort();
    return 0;
}

static int
t_count(void *arg, const struct dl_event *ev)
{
    (void)ev;
    (*(size_t *)arg)++;
    return 0;
}

/* The SSE a Gemini client reads: "data: <json>\r\n\r\n" events, each a response the
 * event parser accepts, or the error object that ends the stream. */
static void
t_check_sse(const struct gw_buf *f)
{
    struct dl_parse_state st;
    size_t i = 0;
    bool ended = false;

    dl_gemini_shape.parse_init(&st);
    while (i < f->len) {
        const char *end = memmem(f->data + i, f->len - i, "\r\n\r\n", 4);
        struct gw_str d;
        size_t n = 0;

        if (ended || !end || f->len - i < 8 || memcmp(f->data + i, "data: {", 7) != 0)
            abort();
        d = (struct gw_str){f->data + i + 6, (size_t)(end - (f->data + i + 6))};
        if (!t_is_object(d.ptr, d.len) ||
            dl_gemini_shape.event_parse(&st, T_NONE, d, t_count, &n) != GW_OK)
            abort();
        ended = memmem(d.ptr, d.len, "\"error\":{\"code\":503", 19) != NULL;
        i = (size_t)(end - f->data) + 4;
    }
}

static void
t_seq_init(struct t_seq *q, struct gw_arena *a)
{
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("m"),
                                .id = GW_STR_LIT("r1"),
                                .upstream = DL_SHAPE_MESSAGES, /* signatures tagged */
                                .arena = a};

    memset(q, 0, sizeof(*q));
    q->last_start = -1;
    dl_gemini_shape.render_init(&q->sse, &ctx);
    ctx.json_array = true;
    dl_gemini_shape.render_init(&q->arr, &ctx);
    dl_answer_init(&q->ans, a);
}

static void
t_seq_fini(struct t_seq *q, struct gw_arena *a)
{
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("m"), .id = GW_STR_LIT("r1"), .arena = a};
    struct gw_buf out = {0};
    json_t *j;

    if (q->finish && !q->error) {
        if (dl_gemini_shape.render_end(&q->sse, &q->sse_out) != GW_OK ||
            dl_gemini_shape.render_end(&q->arr, &q->arr_out) != GW_OK)
            abort();
    } else if (!q->error) {
        /* broken: the pipeline aborts the stream */
        if (dl_gemini_render_abort(&q->sse, GW_E_UPSTREAM_DROPPED, T_NONE, &q->sse_out) != GW_OK ||
            dl_gemini_render_abort(&q->arr, GW_E_UPSTREAM_DROPPED, T_NONE, &q->arr_out) != GW_OK)
            abort();
    }
    t_check_sse(&q->sse_out);
    j = t_load(q->arr_out.data, q->arr_out.len);
    if (!json_is_array(j) || json_array_size(j) == 0)
        abort();
    json_decref(j);
    if (dl_gemini_shape.answer_render(&q->ans, &ctx, &out) != GW_OK ||
        !t_is_object(out.data, out.len))
        abort();
    gw_buf_fini(&out);
    gw_buf_fini(&q->sse_out);
    gw_buf_fini(&q->arr_out);
    dl_answer_fini(&q->ans);
}

static void
t_one_chunk(struct dl_parse_state *st, struct t_seq *q, struct gw_str d)
{
    size_t before = q->n;
    enum gw_code rc = dl_gemini_shape.event_parse(st, T_NONE, d, t_on_event, q);

    if (rc != GW_OK && rc != GW_E_UPSTREAM_PROTOCOL)
        abort();
    if (rc != GW_OK && q->n != before)
        abort(); /* a refused chunk emits nothing */
}

static void
t_events(const char *body, size_t size)
{
    struct gw_arena a;
    struct dl_parse_state st;
    struct t_seq q;
    size_t i, line;

    gw_arena_init(&a);
    /* the whole input after a first chunk with an open text block */
    dl_gemini_shape.parse_init(&st);
    t_seq_init(&q, &a);
    t_one_chunk(&st, &q,
                GW_STR_LIT("{\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"}]}}],"
                           "\"responseId\":\"r\"}"));
    t_one_chunk(&st, &q, (struct gw_str){body, size});
    t_seq_fini(&q, &a);
    /* each line a chunk */
    dl_gemini_shape.parse_init(&st);
    t_seq_init(&q, &a);
    for (i = 0; i < size; i = line + 1) {
        const char *nl = memchr(body + i, '\n', size - i);

        line = nl ? (size_t)(nl - body) : size;
        t_one_chunk(&st, &q, (struct gw_str){body + i, line - i});
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
    struct gw_arena a;
    struct t_usage seen = {{0}, false};
    struct gw_usage read;
    struct t_seq q;
    enum gw_code rc;

    gw_arena_init(&a);
    t_seq_init(&q, &a);
    rc = dl_gemini_shape.answer_parse(body, size, t_on_event, &q);
    if (rc == GW_OK) {
        if (!t_is_object(body, size) || (!q.finish && !q.error))
            abort();
        if (dl_gemini_shape.answer_parse(body, size, t_usage_of, &seen) != GW_OK)
            abort();
        if (seen.seen && (!dl_gemini_shape.answer_usage(body, size, &read) ||
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
    struct gw_buf out = {0};
    int status = 400 + (int)(size % 200);
    json_t *j, *e;

    dl_gemini_shape.upstream_error_read(body, size, status, &type, &message);
    if (type.len == 0 || message.len == 0)
        abort();
    if (dl_gemini_shape.upstream_error_render(status, type, message, &out) != GW_OK)
        abort();
    j = t_load(out.data, out.len);
    e = json_object_get(j, "error");
    if (!json_is_integer(json_object_get(e, "code")) ||
        !json_is_string(json_object_get(e, "message")) ||
        !json_is_string(json_object_get(e, "status")))
        abort();
    json_decref(j);
    gw_buf_fini(&out);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;

    t_request(body, size);
    t_events(body, size);
    t_answer(body, size);
    t_error(body, size);
    return 0;
}
