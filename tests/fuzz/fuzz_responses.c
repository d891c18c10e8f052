/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_responses.c - fuzz target for every parser of the OpenAI Responses
 * shape (dl_responses_shape, dialects/responses*.c). The same input goes to:
 * - request_parse: a refusal is GW_E_BAD_REQUEST with a reason; an accepted body is a
 *   JSON object jansson loads; its render for a Responses upstream is GW_OK (a JSON
 *   object with the model and an input array, nothing dropped but reasoning it cannot
 *   send, and a fixed point: parsed and rendered again, the same bytes) or
 *   GW_E_UNCONVERTIBLE with <out> unchanged; its renders for Chat and Messages upstreams
 *   are GW_OK (a JSON object) or GW_E_UNCONVERTIBLE with <out> unchanged; as if from
 *   another shape, a render is GW_OK with every extra named as dropped, or refused.
 * - event_parse: the whole input under each event name (after a start and a text delta),
 *   and each line as an event ("name<TAB>data" or data alone) on one state. Codes are
 *   GW_OK or GW_E_UPSTREAM_PROTOCOL (which emits nothing); BLOCK_START indexes only grow;
 *   after ERROR or FINISH nothing. The events go on to the client renderer: whole
 *   "event: x\ndata: {json}\n\n" frames whose data's type is x, sequence numbers 0, 1,
 *   2..., response.created first, items added at the next output index and named by the
 *   events that follow, one final frame last (dl_responses_render_failed's when the
 *   stream did not end); and into the answer fold and its render.
 * - answer_parse: GW_OK (a JSON object that finished or failed; answer_usage agrees with
 *   its USAGE) or GW_E_UPSTREAM_PROTOCOL with no event; the fold renders as JSON.
 * - dl_responses_expand and dl_responses_input_items: GW_OK with a JSON object whose input
 *   is an array and which has no previous_response_id (a JSON array), or
 *   GW_E_BAD_REQUEST with <out> unchanged.
 * - upstream_error_read and upstream_error_render: always a JSON error body.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     dialects/responses_request.c, dialects/responses_answer.c, dialects/responses.c,
 *          tests/fuzz/corpus/responses/
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "dialects/canon.h"
#include "dialects/responses-priv.h"
#include "dialects/responses.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T_MODEL "gpt-fuzz-\xc3\xa9"

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

/* ---- request ---- */

static void
t_check_object(const struct gw_buf *out)
{
    json_t *j = t_load(out->data, out->len);

    if (!json_is_object(j) || !t_is(json_object_get(j, "model"), T_MODEL))
        abort();
    json_decref(j);
}

/* A render for <to> of <r>: GW_OK and a JSON object, or refused with <out> unchanged. */
static enum gw_code
t_render(const struct dl_request *r, enum dl_shape to, struct dl_dropped *d, struct gw_buf *out)
{
    struct gw_buf why = {0};
    enum gw_code rc;

    gw_buf_reset(out);
    rc = dl_shape_ops(to)->request_render(r, gw_str_c(T_MODEL), 4000, d, out, &why);
    if (rc == GW_OK)
        t_check_object(out);
    else if (rc != GW_E_UNCONVERTIBLE || out->len != 0 || why.len == 0)
        abort();
    gw_buf_fini(&why);
    return rc;
}

static void
t_request(const char *body, size_t size)
{
    struct gw_buf why = {0}, out = {0}, again = {0};
    struct dl_request r, r2;
    struct gw_arena a, b;
    struct dl_dropped d = {0};
    enum gw_code rc;
    json_t *j;
    size_t k;

    gw_arena_init(&a);
    gw_arena_init(&b);
    rc = dl_responses_shape.request_parse(&a, body, size, &r, &why);
    j = t_load(body, size);
    if (rc != GW_OK) {
        if (rc != GW_E_BAD_REQUEST || why.len == 0)
            abort();
        goto out;
    }
    if (!json_is_object(j) || why.len != 0)
        abort();
    (void)dl_request_input_estimate(&r);
    if (t_render(&r, DL_SHAPE_RESPONSES, &d, &out) == GW_OK) {
        json_t *o = t_load(out.data, out.len);

        if (!json_is_array(json_object_get(o, "input")))
            abort();
        json_decref(o);
        for (k = 0; k < d.n; k++) /* the same shape takes everything but foreign reasoning */
            if (!gw_str_eq(d.name[k], GW_STR_LIT("reasoning")))
                abort();
        /* a fixed point: what was rendered parses, and renders to the same bytes */
        if (dl_responses_shape.request_parse(&b, out.data, out.len, &r2, &why) != GW_OK ||
            dl_responses_shape.request_render(&r2, gw_str_c(T_MODEL), 4000, NULL, &again, &why) !=
                GW_OK ||
            again.len != out.len || memcmp(again.data, out.data, out.len) != 0)
            abort();
    }
    (void)t_render(&r, DL_SHAPE_CHAT, NULL, &out);
    (void)t_render(&r, DL_SHAPE_MESSAGES, NULL, &out);
    /* as if from another shape: its extras are dropped by name, its own things refused */
    memset(&d, 0, sizeof(d));
    r.source = DL_SHAPE_CHAT;
    if (t_render(&r, DL_SHAPE_RESPONSES, &d, &out) == GW_OK) {
        for (k = 0; k < r.n_extras && k < DL_DROPPED_MAX; k++) {
            size_t i;
            bool named = d.more;

            for (i = 0; i < d.n; i++)
                named |= gw_str_eq(d.name[i], r.extras[k].name);
            if (!named)
                abort();
        }
    } else if (d.n != 0) {
        abort();
    }
out:
    json_decref(j);
    gw_buf_fini(&why);
    gw_buf_fini(&out);
    gw_buf_fini(&again);
    gw_arena_fini(&a);
    gw_arena_fini(&b);
}

/* ---- events ---- */

/* What the events seen so far allow. */
struct t_seq {
    bool error, finish;
    long last_start; /* index of the last BLOCK_START, -1 before any */
    size_t n;        /* events */
    struct dl_render_state rs;
    struct gw_buf frames;
    struct dl_answer ans;
};

static int
t_on_event(void *arg, const struct dl_event *ev)
{
    struct t_seq *q = arg;

    q->n++;
    if (q->error || q->finish)
        abort(); /* nothing after ERROR or FINISH (this parser sends usage before) */
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
    if (dl_responses_shape.event_render(&q->rs, ev, &q->frames) != GW_OK)
        abort();
    if (dl_answer_fold(&q->ans, ev) != 0)
        abort();
    return 0;
}

/* The item id an item-scoped frame names: item.id or item_id, as a slice of <j>. */
static struct gw_str
t_item_id(const struct dl_json *j, const struct dl_anth_field *item_id,
          const struct dl_anth_field *id)
{
    const struct dl_anth_field *f = item_id->kind == DA_STR ? item_id : id;

    if (f->kind != DA_STR || f->str.escaped)
        abort();
    return (struct gw_str){j->s + f->str.start, f->str.dlen};
}

/* The frames a Responses client reads (read with the scanner: jansson on every frame
 * would make the target slow). */
static void
t_check_frames(const struct gw_buf *f, bool ended)
{
    struct gw_str ids[64];
    size_t i = 0, seq = 0, n_items = 0;
    bool final = false;

    while (i < f->len) {
        struct dl_anth_field item[] = {DL_ANTH_FIELD("id")};
        struct dl_anth_field top[] = {
            DL_ANTH_FIELD("type"),         DL_ANTH_FIELD("sequence_number"),
            DL_ANTH_FIELD("output_index"), DL_ANTH_FIELD("item_id"),
            DL_ANTH_FIELD("item"),         DL_ANTH_FIELD("response")};
        const char *end = memmem(f->data + i, f->len - i, "\n\n", 2);
        const char *nl;
        struct dl_json j;
        struct gw_str name;
        int64_t v = -1, oi = -1;

        if (final || !end || f->len - i < 14 || memcmp(f->data + i, "event: ", 7) != 0)
            abort();
        nl = memchr(f->data + i, '\n', (size_t)(end - (f->data + i)));
        if (!nl || memcmp(nl, "\ndata: ", 7) != 0)
            abort();
        name = (struct gw_str){f->data + i + 7, (size_t)(nl - (f->data + i + 7))};
        top[4].sub = item;
        top[4].nsub = 1;
        dl_json_init(&j, nl + 7, (size_t)(end - (nl + 7)));
        if (!dl_anthropic_fields(&j, top, 6) || !dl_json_end(&j) || top[0].kind != DA_STR ||
            top[0].str.escaped ||
            !gw_str_eq(name, (struct gw_str){j.s + top[0].str.start, top[0].str.dlen}))
            abort();
        if (top[1].kind != DA_NUM || !dl_json_int(&j, &top[1].num, &v) || v != (int64_t)seq)
            abort();
        if (seq == 0 && !gw_str_eq(name, GW_STR_LIT("response.created")))
            abort();
        seq++;
        if (top[2].kind == DA_NUM && !dl_json_int(&j, &top[2].num, &oi))
            abort();
        if (gw_str_eq(name, GW_STR_LIT("response.output_item.added"))) {
            if (oi != (int64_t)n_items)
                abort();
            if (n_items < 64)
                ids[n_items] = t_item_id(&j, &top[3], &item[0]);
            n_items++;
        } else if (oi >= 0) {
            if ((size_t)oi >= n_items ||
                ((size_t)oi < 64 && !gw_str_eq(ids[oi], t_item_id(&j, &top[3], &item[0]))))
                abort();
        }
        if (gw_str_eq(name, GW_STR_LIT("response.completed")) ||
            gw_str_eq(name, GW_STR_LIT("response.incomplete")) ||
            gw_str_eq(name, GW_STR_LIT("response.failed"))) {
            if (top[5].kind != DA_OBJ)
                abort();
            final = true;
        }
        i = (size_t)(end - f->data) + 2;
    }
    if (ended && !final)
        abort();
}

static void
t_check_answer_json(const struct gw_buf *out)
{
    struct dl_anth_field top[] = {DL_ANTH_FIELD("object"), DL_ANTH_FIELD("output"),
                                  DL_ANTH_FIELD("status")};
    struct dl_json j;

    dl_json_init(&j, out->data, out->len);
    if (!dl_anthropic_fields(&j, top, 3) || !dl_json_end(&j) ||
        !dl_anthropic_is(&j, &top[0], "response") || top[1].kind != DA_ARR || top[2].kind != DA_STR)
        abort();
}

static void
t_seq_init(struct t_seq *q, struct gw_arena *a, struct dl_render_ctx *ctx)
{
    memset(q, 0, sizeof(*q));
    q->last_start = -1;
    dl_responses_shape.render_init(&q->rs, ctx);
    dl_answer_init(&q->ans, a);
}

static void
t_seq_fini(struct t_seq *q, struct dl_render_ctx *ctx)
{
    struct gw_buf out = {0};
    bool end = q->finish && !q->error;

    if (end && dl_responses_shape.render_end(&q->rs, &q->frames) != GW_OK)
        abort();
    /* a stream that did not end: the gateway ends it, naming the stream's response */
    if (!end && !q->error && q->frames.len &&
        dl_responses_render_failed(&q->rs, GW_E_UPSTREAM_DROPPED, GW_STR_LIT("x"), &q->frames) !=
            GW_OK)
        abort();
    if (q->frames.len)
        t_check_frames(&q->frames, true);
    if (dl_responses_shape.answer_render(&q->ans, ctx, &out) != GW_OK)
        abort();
    t_check_answer_json(&out);
    gw_buf_fini(&out);
    gw_buf_fini(&q->frames);
    dl_answer_fini(&q->ans);
}

static void
t_one_event(struct dl_parse_state *st, struct t_seq *q, struct gw_str name, struct gw_str d)
{
    size_t before = q->n;
    enum gw_code rc = dl_responses_shape.event_parse(st, name, d, t_on_event, q);

    if (rc != GW_OK && rc != GW_E_UPSTREAM_PROTOCOL)
        abort();
    if (rc != GW_OK && q->n != before)
        abort(); /* a refused event emits nothing */
}

static void
t_events(const char *body, size_t size)
{
    static const char *const names[] = {
        "",
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.function_call_arguments.delta",
        "response.reasoning_summary_text.delta",
        "response.completed",
        "response.incomplete",
        "response.failed",
        "error",
    };
    struct gw_arena a;
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("m"), .id = GW_STR_LIT("r1"), .arena = &a};
    struct dl_parse_state st;
    struct t_seq q;
    size_t i, line;

    gw_arena_init(&a);
    /* the whole input under each name, after a start and a text delta */
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        dl_responses_shape.parse_init(&st);
        t_seq_init(&q, &a, &ctx);
        t_one_event(&st, &q, GW_STR_LIT("response.created"),
                    GW_STR_LIT("{\"response\":{\"id\":\"x\",\"model\":\"c\"}}"));
        t_one_event(&st, &q, GW_STR_LIT("response.output_text.delta"),
                    GW_STR_LIT("{\"output_index\":0,\"content_index\":0,\"delta\":\"a\"}"));
        t_one_event(&st, &q, gw_str_c(names[i]), (struct gw_str){body, size});
        t_seq_fini(&q, &ctx);
    }
    /* each line an event, "name\tdata" or data alone */
    dl_responses_shape.parse_init(&st);
    t_seq_init(&q, &a, &ctx);
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
        t_one_event(&st, &q, name, d);
    }
    t_seq_fini(&q, &ctx);
    gw_arena_fini(&a);
}

/* ---- answers, the conversation helpers, errors ---- */

static int
t_usage_of(void *arg, const struct dl_event *ev)
{
    struct gw_usage *u = arg;

    if (ev->kind == DL_EV_USAGE) {
        *u = ev->usage;
        u->estimated = true; /* marks "seen" */
    }
    return 0;
}

static void
t_answer(const char *body, size_t size)
{
    struct gw_arena a;
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("m"), .id = GW_STR_LIT("r1"), .arena = &a};
    struct gw_usage seen = {0}, read;
    struct t_seq q;
    enum gw_code rc;
    bool has;

    gw_arena_init(&a);
    t_seq_init(&q, &a, &ctx);
    rc = dl_responses_shape.answer_parse(body, size, t_on_event, &q);
    if (rc == GW_OK) {
        json_t *j = t_load(body, size);

        if (!json_is_object(j) || !(q.finish || q.error))
            abort();
        json_decref(j);
        has = dl_responses_shape.answer_usage(body, size, &read);
        if (dl_responses_shape.answer_parse(body, size, t_usage_of, &seen) != GW_OK)
            abort();
        if (seen.estimated && (!has || seen.input_tokens != read.input_tokens ||
                               seen.output_tokens != read.output_tokens ||
                               seen.cache_read_tokens != read.cache_read_tokens))
            abort();
    } else if (rc != GW_E_UPSTREAM_PROTOCOL || q.n != 0) {
        abort();
    }
    q.finish = false; /* an answer has no stream end */
    t_seq_fini(&q, &ctx);
    gw_arena_fini(&a);
}

static void
t_helpers(const char *body, size_t size)
{
    static const char items[] = "[{\"role\":\"user\",\"content\":\"earlier\"}]";
    struct gw_buf out = {0};
    enum gw_code rc;
    json_t *j;

    gw_buf_append_cstr(&out, "k");
    rc = dl_responses_expand(body, size, GW_STR_LIT(items), &out);
    if (rc == GW_OK) {
        j = t_load(out.data + 1, out.len - 1);
        if (!json_is_object(j) || !json_is_array(json_object_get(j, "input")) ||
            json_array_size(json_object_get(j, "input")) < 1 ||
            json_object_get(j, "previous_response_id"))
            abort();
        json_decref(j);
    } else if (rc != GW_E_BAD_REQUEST || out.len != 1) {
        abort();
    }
    gw_buf_reset(&out);
    rc = dl_responses_input_items(body, size, &out);
    if (rc == GW_OK) {
        j = t_load(out.data, out.len);
        if (!json_is_array(j))
            abort();
        json_decref(j);
    } else if (rc != GW_E_BAD_REQUEST || out.len != 0) {
        abort();
    }
    gw_buf_fini(&out);
}

static void
t_error(const char *body, size_t size)
{
    struct gw_str type, message;
    struct gw_buf out = {0};
    int status = 400 + (int)(size % 200);
    json_t *j;

    dl_responses_shape.upstream_error_read(body, size, status, &type, &message);
    if (dl_responses_shape.upstream_error_render(status, type, message, &out) != GW_OK)
        abort();
    j = t_load(out.data, out.len);
    if (!json_is_string(json_object_get(json_object_get(j, "error"), "type")) ||
        !json_is_string(json_object_get(json_object_get(j, "error"), "message")))
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
    t_helpers(body, size);
    t_error(body, size);
    return 0;
}
