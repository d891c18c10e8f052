/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_messages.c - fuzz target for every parser of the Anthropic Messages
 * shape (dl_anthropic_shape, dialects/anthropic*.c). The same input goes to:
 * - request_parse: a refusal is GW_E_BAD_REQUEST with a reason; an accepted body is JSON
 *   jansson loads as an object; its render for a Messages upstream is GW_OK or
 *   GW_E_UNCONVERTIBLE, and when GW_OK a JSON object with the model and a positive
 *   max_tokens that parses again and renders to the same bytes (a fixed point); its
 *   render as if from another shape is GW_OK (JSON, every extra named as dropped) or
 *   GW_E_UNCONVERTIBLE with <out> unchanged.
 * - event_parse: the whole input under each event name, and each line as an event
 *   ("name<TAB>data" or data alone) on one state. Codes are GW_OK or
 *   GW_E_UPSTREAM_PROTOCOL (which emits nothing); BLOCK_START indexes only grow; after
 *   ERROR nothing, after FINISH only USAGE. The events go on to the client renderer:
 *   whole "event: x\ndata: {json}\n\n" frames whose data's type is x, message_start
 *   first, content block indexes 0.. in order, deltas and stops for the open block
 *   only, message_stop or error last; and into the answer fold (which fails only on a
 *   block index far past its blocks) and its render (JSON).
 * - answer_parse: GW_OK (a JSON object; answer_usage agrees with its USAGE) or
 *   GW_E_UPSTREAM_PROTOCOL with no event; the fold renders as a JSON answer.
 * - upstream_error_read and upstream_error_render: always a JSON error body.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     dialects/anthropic_request.c, dialects/anthropic_answer.c,
 *          tests/fuzz/corpus/messages/
 */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "dialects/anthropic-priv.h"
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

/* ---- request ---- */

static void
t_check_rendered_request(const struct gw_buf *out)
{
    json_t *j = t_load(out->data, out->len);

    if (!json_is_object(j) || !t_is(json_object_get(j, "model"), T_MODEL) ||
        json_integer_value(json_object_get(j, "max_tokens")) <= 0 ||
        !json_is_array(json_object_get(j, "messages")))
        abort();
    json_decref(j);
}

static void
t_request(const char *body, size_t size)
{
    struct gw_buf why = {0}, out = {0}, again = {0};
    struct dl_request r, r2;
    struct dl_arena_pair {
        struct gw_arena a, b;
    } ar;
    struct dl_dropped d = {0};
    enum gw_code rc;
    json_t *j;
    size_t k;

    gw_arena_init(&ar.a);
    gw_arena_init(&ar.b);
    rc = dl_anthropic_shape.request_parse(&ar.a, body, size, &r, &why);
    j = t_load(body, size);
    if (rc != GW_OK) {
        if (rc != GW_E_BAD_REQUEST || why.len == 0)
            abort();
        goto out;
    }
    if (!json_is_object(j) || why.len != 0)
        abort();
    (void)dl_request_input_estimate(&r);
    rc = dl_anthropic_shape.request_render(&r, gw_str_c(T_MODEL), 5000, &d, &out, &why);
    if (rc == GW_OK) {
        t_check_rendered_request(&out);
        if (d.n != 0) /* the same shape takes everything */
            abort();
        /* a fixed point: what was rendered parses, and renders to the same bytes */
        if (dl_anthropic_shape.request_parse(&ar.b, out.data, out.len, &r2, &why) != GW_OK ||
            dl_anthropic_shape.request_render(&r2, gw_str_c(T_MODEL), 5000, NULL, &again, &why) !=
                GW_OK ||
            again.len != out.len || memcmp(again.data, out.data, out.len) != 0)
            abort();
    } else if (rc != GW_E_UNCONVERTIBLE || out.len != 0 || why.len == 0) {
        abort();
    }
    /* as if from another shape: its extras are dropped by name, its own things refused */
    gw_buf_reset(&out);
    gw_buf_reset(&why);
    memset(&d, 0, sizeof(d));
    r.source = DL_SHAPE_CHAT;
    rc = dl_anthropic_shape.request_render(&r, gw_str_c(T_MODEL), 0, &d, &out, &why);
    if (rc == GW_OK) {
        t_check_rendered_request(&out);
        for (k = 0; k < r.n_extras && k < DL_DROPPED_MAX; k++) {
            size_t i;
            bool named = d.more;

            for (i = 0; i < d.n; i++)
                named |= gw_str_eq(d.name[i], r.extras[k].name);
            if (!named)
                abort();
        }
    } else if (rc != GW_E_UNCONVERTIBLE || out.len != 0 || d.n != 0) {
        abort();
    }
out:
    json_decref(j);
    gw_buf_fini(&why);
    gw_buf_fini(&out);
    gw_buf_fini(&again);
    gw_arena_fini(&ar.a);
    gw_arena_fini(&ar.b);
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

    size_t had = q->ans.n_blocks;

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
    if (dl_anthropic_shape.event_render(&q->rs, ev, &q->frames) != GW_OK)
        abort();
    /* the fold refuses only an index far past its blocks (an upstream's numbers) */
    if (dl_answer_fold(&q->ans, ev) != 0 &&
        (q->ans.status != 502 ||
         (ev->index < DL_ANSWER_MAX_BLOCKS && ev->index <= had + DL_ANSWER_MAX_GAP)))
        abort();
    return 0;
}

/* The frames a Messages client reads, in the order the SDK accumulates them (read with
 * the scanner: jansson on every frame would make the target slow). */
static void
t_check_frames(const struct gw_buf *f)
{
    size_t i = 0, next = 0, open = (size_t)-1;
    bool started = false, ended = false;

    while (i < f->len) {
        struct dl_anth_field et[] = {DL_ANTH_FIELD("type")};
        struct dl_anth_field us[] = {DL_ANTH_FIELD("output_tokens")};
        struct dl_anth_field top[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("index"),
                                      DL_ANTH_FIELD("message"), DL_ANTH_FIELD("error"),
                                      DL_ANTH_FIELD("usage")};
        const char *end = memmem(f->data + i, f->len - i, "\n\n", 2);
        const char *nl;
        struct dl_json j;
        struct gw_str name;
        int64_t index = -1;

        if (ended || !end || f->len - i < 14 || memcmp(f->data + i, "event: ", 7) != 0)
            abort();
        nl = memchr(f->data + i, '\n', (size_t)(end - (f->data + i)));
        if (!nl || memcmp(nl, "\ndata: ", 7) != 0)
            abort();
        name = (struct gw_str){f->data + i + 7, (size_t)(nl - (f->data + i + 7))};
        top[3].sub = et;
        top[3].nsub = 1;
        top[4].sub = us;
        top[4].nsub = 1;
        dl_json_init(&j, nl + 7, (size_t)(end - (nl + 7)));
        if (!dl_anthropic_fields(&j, top, 5) || !dl_json_end(&j) || top[0].kind != DA_STR ||
            top[0].str.escaped ||
            !gw_str_eq(name, (struct gw_str){j.s + top[0].str.start, top[0].str.dlen}))
            abort();
        if (top[1].kind == DA_NUM && !dl_json_int(&j, &top[1].num, &index))
            abort();
        if (gw_str_eq(name, GW_STR_LIT("error"))) {
            if (!dl_anthropic_is(&j, &et[0], "overloaded_error"))
                abort();
            ended = true;
        } else if (gw_str_eq(name, GW_STR_LIT("message_start"))) {
            if (started || top[2].kind != DA_OBJ)
                abort();
            started = true;
        } else if (!started) {
            abort();
        } else if (gw_str_eq(name, GW_STR_LIT("content_block_start"))) {
            if (open != (size_t)-1 || index != (int64_t)next++)
                abort();
            open = (size_t)index;
        } else if (gw_str_eq(name, GW_STR_LIT("content_block_delta"))) {
            if (index < 0 || (size_t)index != open)
                abort();
        } else if (gw_str_eq(name, GW_STR_LIT("content_block_stop"))) {
            if (index < 0 || (size_t)index != open)
                abort();
            open = (size_t)-1;
        } else if (gw_str_eq(name, GW_STR_LIT("message_delta"))) {
            if (open != (size_t)-1 || us[0].kind != DA_NUM)
                abort();
        } else if (gw_str_eq(name, GW_STR_LIT("message_stop"))) {
            ended = true;
        } else {
            abort();
        }
        i = (size_t)(end - f->data) + 2;
    }
}

static void
t_check_answer_json(const struct gw_buf *out)
{
    struct dl_anth_field top[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("content"),
                                  DL_ANTH_FIELD("stop_reason")};
    struct dl_json j;

    dl_json_init(&j, out->data, out->len);
    if (!dl_anthropic_fields(&j, top, 3) || !dl_json_end(&j) ||
        !dl_anthropic_is(&j, &top[0], "message") || top[1].kind != DA_ARR || top[2].kind != DA_STR)
        abort();
}

static void
t_seq_init(struct t_seq *q, struct gw_arena *a, struct dl_render_ctx *ctx)
{
    memset(q, 0, sizeof(*q));
    q->last_start = -1;
    dl_anthropic_shape.render_init(&q->rs, ctx);
    dl_answer_init(&q->ans, a);
}

static void
t_seq_fini(struct t_seq *q, struct dl_render_ctx *ctx)
{
    struct gw_buf out = {0};

    if (q->finish && !q->error && dl_anthropic_shape.render_end(&q->rs, &q->frames) != GW_OK)
        abort();
    t_check_frames(&q->frames);
    if (dl_anthropic_shape.answer_render(&q->ans, ctx, &out) != GW_OK)
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
    enum gw_code rc = dl_anthropic_shape.event_parse(st, name, d, t_on_event, q);

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
    struct gw_arena a;
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("m"), .id = GW_STR_LIT("r1"), .arena = &a};
    struct dl_parse_state st;
    struct t_seq q;
    size_t i, line;

    gw_arena_init(&a);
    /* the whole input under each name, after a start and an open text block */
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        dl_anthropic_shape.parse_init(&st);
        t_seq_init(&q, &a, &ctx);
        t_one_event(&st, &q, GW_STR_LIT("message_start"),
                    GW_STR_LIT("{\"message\":{\"id\":\"m\",\"model\":\"c\"}}"));
        t_one_event(
            &st, &q, GW_STR_LIT("content_block_start"),
            GW_STR_LIT("{\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}"));
        t_one_event(&st, &q, gw_str_c(names[i]), (struct gw_str){body, size});
        t_seq_fini(&q, &ctx);
    }
    /* each line an event, "name\tdata" or data alone */
    dl_anthropic_shape.parse_init(&st);
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

/* ---- answers and errors ---- */

static int
t_usage_of(void *arg, const struct dl_event *ev)
{
    struct gw_usage *u = arg;

    if (ev->kind == DL_EV_USAGE)
        *u = ev->usage;
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
    rc = dl_anthropic_shape.answer_parse(body, size, t_on_event, &q);
    if (rc == GW_OK) {
        json_t *j = t_load(body, size);

        if (!json_is_object(j) || !q.finish)
            abort();
        json_decref(j);
        has = dl_anthropic_shape.answer_usage(body, size, &read);
        if (dl_anthropic_shape.answer_parse(body, size, t_usage_of, &seen) != GW_OK)
            abort();
        if (has && memcmp(&seen, &read, sizeof(read)) != 0)
            abort();
    } else if (rc != GW_E_UPSTREAM_PROTOCOL || q.n != 0) {
        abort();
    }
    t_seq_fini(&q, &ctx);
    gw_arena_fini(&a);
}

static void
t_error(const char *body, size_t size)
{
    struct gw_str type, message;
    struct gw_buf out = {0};
    int status = 400 + (int)(size % 200);
    json_t *j;

    dl_anthropic_shape.upstream_error_read(body, size, status, &type, &message);
    if (type.len == 0 || message.len == 0)
        abort();
    if (dl_anthropic_shape.upstream_error_render(status, type, message, &out) != GW_OK)
        abort();
    j = t_load(out.data, out.len);
    if (!t_is(json_object_get(j, "type"), "error") ||
        !json_is_string(json_object_get(json_object_get(j, "error"), "type")) ||
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
    t_error(body, size);
    return 0;
}
