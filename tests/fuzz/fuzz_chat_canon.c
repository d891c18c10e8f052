/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_chat_canon.c - fuzz target for the Chat Completions shape on the hub
 * (dl_openai_shape): its three parsers, each followed by the renderers it feeds. The
 * first byte of the input picks the parser, the rest is its input:
 *   'r' (and any byte not below): request_parse. When it accepts: request_render must
 *       give a body that request_parse accepts again, and rendering that gives the same
 *       bytes (render is idempotent: what one round loses, the next has nothing more to
 *       lose); the same request rendered as if parsed from another shape either refuses
 *       with GW_E_UNCONVERTIBLE or gives a body request_parse accepts. dl_openai_req_canon
 *       on a request dl_openai_req_parse accepted says the same as request_parse, and
 *       renders the same.
 *   's': the rest is an SSE stream (core/sse.h splits it); event_parse on each event.
 *       A chunk is refused (GW_E_UPSTREAM_PROTOCOL) exactly when its data is neither
 *       empty, [DONE] nor a JSON object jansson loads (or when it names a tool index past
 *       the parser's table); the events form a well-formed canonical stream (checker
 *       below); the events rendered for a Chat client give chunks that are each one
 *       JSON object or [DONE]; the events folded give an answer that renders to JSON.
 *   'a': answer_parse on the rest: well-formed events ending with FINISH (or one ERROR),
 *       nothing on a refusal; the folded answer renders to JSON; answer_usage reads the
 *       usage the events reported; upstream_error_read and _render do not fail.
 * A raw NUL byte is left to the scanner alone (jansson's lexer drops some, see
 * tests/fuzz/fuzz_openai.c).
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     dialects/openai_request.c, dialects/openai_answer.c, tests/fuzz/corpus/chat_canon/
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/sse.h"
#include "dialects/openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define T_CHECK(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c);                  \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static bool
t_is_object(const char *s, size_t n)
{
    json_t *j = json_loadb(s, n, JSON_ALLOW_NUL, NULL);
    bool ok = json_is_object(j);

    json_decref(j);
    return ok;
}

/* ---- request ---- */

/* dl_openai_req_canon (the pipeline's read of a request the Chat scanner accepted) says
 * what request_parse said (<rc>), and when it accepts, renders the same as <r>. */
static void
t_canon_as_parse(const char *s, size_t n, enum gw_code rc, const struct dl_request *r)
{
    struct dl_openai_req *req = NULL;
    struct gw_buf why = {0}, want = {0}, got = {0};
    struct dl_dropped d = {0};
    struct gw_arena a;
    struct dl_request c;
    enum gw_code crc;

    if (dl_openai_req_parse(s, n, &req, &why) != GW_OK) {
        T_CHECK(rc != GW_OK); /* the scanner's refusals are request_parse's too */
        gw_buf_fini(&why);
        return;
    }
    gw_arena_init(&a);
    crc = dl_openai_req_canon(req, &a, &c, &why);
    T_CHECK(crc == rc || crc == GW_E_NOMEM || rc == GW_E_NOMEM);
    if (crc == GW_OK && rc == GW_OK &&
        dl_openai_shape.request_render(r, GW_STR_LIT("m"), 0, &d, &want, NULL) == GW_OK) {
        d.n = 0;
        T_CHECK(dl_openai_shape.request_render(&c, GW_STR_LIT("m"), 0, &d, &got, NULL) == GW_OK);
        T_CHECK(got.len == want.len && memcmp(got.data, want.data, want.len) == 0);
    }
    dl_openai_req_free(req);
    gw_arena_fini(&a);
    gw_buf_fini(&why);
    gw_buf_fini(&want);
    gw_buf_fini(&got);
}

static void
t_request(const char *s, size_t n)
{
    struct gw_arena a1, a2;
    struct dl_request r1, r2;
    struct gw_buf why = {0}, out1 = {0}, out2 = {0}, other = {0};
    struct dl_dropped d = {0};
    enum gw_code rc;

    gw_arena_init(&a1);
    gw_arena_init(&a2);
    rc = dl_openai_shape.request_parse(&a1, s, n, &r1, &why);
    t_canon_as_parse(s, n, rc, &r1);
    if (rc != GW_OK) {
        T_CHECK(rc == GW_E_BAD_REQUEST || rc == GW_E_NOMEM);
        T_CHECK(rc == GW_E_NOMEM || why.len > 0);
        goto out;
    }
    T_CHECK(r1.source == DL_SHAPE_CHAT && r1.model.len > 0);
    rc = dl_openai_shape.request_render(&r1, GW_STR_LIT("m"), 0, &d, &out1, &why);
    if (rc != GW_OK) {
        /* a Chat request refused back to Chat: only an image or document with no data */
        T_CHECK(rc == GW_E_UNCONVERTIBLE || rc == GW_E_NOMEM);
        T_CHECK(out1.len == 0);
        goto out;
    }
    T_CHECK(t_is_object(out1.data, out1.len));
    gw_buf_reset(&why);
    rc = dl_openai_shape.request_parse(&a2, out1.data, out1.len, &r2, &why);
    if (rc != GW_OK) {
        fprintf(stderr, "rendered body refused: %.*s\n%.*s\n", (int)why.len, why.data,
                (int)out1.len, out1.data);
        abort();
    }
    d.n = 0;
    T_CHECK(dl_openai_shape.request_render(&r2, GW_STR_LIT("m"), 0, &d, &out2, &why) == GW_OK);
    if (out1.len != out2.len || memcmp(out1.data, out2.data, out1.len) != 0) {
        fprintf(stderr, "render not idempotent:\n%.*s\n%.*s\n", (int)out1.len, out1.data,
                (int)out2.len, out2.data);
        abort();
    }
    /* as if from another shape: a refusal or a body Chat accepts */
    r1.source = DL_SHAPE_MESSAGES;
    d.n = 0;
    gw_buf_reset(&why);
    rc = dl_openai_shape.request_render(&r1, GW_STR_LIT("m"), 100, &d, &other, &why);
    T_CHECK(rc == GW_OK || rc == GW_E_UNCONVERTIBLE || rc == GW_E_NOMEM);
    if (rc == GW_E_UNCONVERTIBLE)
        T_CHECK(why.len > 0 && other.len == 0);
    if (rc == GW_OK) {
        struct gw_arena a3;
        struct dl_request r3;

        gw_arena_init(&a3);
        T_CHECK(dl_openai_shape.request_parse(&a3, other.data, other.len, &r3, &why) == GW_OK);
        T_CHECK(r3.extras == NULL || r3.n_extras == 0); /* extras are dropped, never sent */
        gw_arena_fini(&a3);
    }
out:
    gw_arena_fini(&a1);
    gw_arena_fini(&a2);
    gw_buf_fini(&why);
    gw_buf_fini(&out1);
    gw_buf_fini(&out2);
    gw_buf_fini(&other);
}

/* ---- events ---- */

/* The well-formedness of a canonical stream, checked event by event. */
struct t_check {
    bool started, finished, failed, open;
    unsigned open_index, n_blocks;
    enum dl_block kinds[4096];
    bool stopped[4096];
    size_t n_events;
    size_t delta_bytes; /* of every DELTA's text */
    /* where the events go besides */
    struct dl_render_state rs;
    struct gw_buf rendered;
    struct dl_answer ans;
    bool usage_seen;
    struct gw_usage usage;
};

static int
t_on_event(void *arg, const struct dl_event *ev)
{
    struct t_check *c = arg;

    T_CHECK(!c->failed); /* nothing after an error */
    c->n_events++;
    switch (ev->kind) {
    case DL_EV_START:
        T_CHECK(!c->started && c->n_blocks == 0);
        c->started = true;
        break;
    case DL_EV_BLOCK_START:
        T_CHECK(c->started && !c->finished && !c->open);
        T_CHECK(ev->index == c->n_blocks && ev->index < 4096);
        if (ev->block == DL_BLOCK_TOOL_CALL)
            T_CHECK(ev->id.len > 0);
        c->kinds[ev->index] = ev->block;
        c->stopped[ev->index] = false;
        c->open = true;
        c->open_index = ev->index;
        c->n_blocks++;
        break;
    case DL_EV_DELTA:
        T_CHECK(c->started && !c->finished && ev->index < c->n_blocks);
        T_CHECK(ev->block == c->kinds[ev->index] && ev->text.len > 0);
        /* into the open block, or arguments of a call already stopped (documented) */
        T_CHECK((c->open && ev->index == c->open_index) ||
                (c->stopped[ev->index] && ev->block == DL_BLOCK_TOOL_CALL));
        c->delta_bytes += ev->text.len;
        break;
    case DL_EV_BLOCK_STOP:
        T_CHECK(c->open && ev->index == c->open_index);
        c->open = false;
        c->stopped[ev->index] = true;
        break;
    case DL_EV_USAGE:
        T_CHECK(c->started);
        c->usage_seen = true;
        c->usage = ev->usage;
        break;
    case DL_EV_FINISH:
        T_CHECK(c->started && !c->finished && !c->open);
        c->finished = true;
        break;
    case DL_EV_ERROR: c->failed = true; break;
    }
    T_CHECK(dl_openai_shape.event_render(&c->rs, ev, &c->rendered) != GW_E_UPSTREAM_PROTOCOL);
    (void)dl_answer_fold(&c->ans, ev);
    return 0;
}

/* Every chunk of <b>: "data: <JSON object>\n\n" or "data: [DONE]\n\n". */
static void
t_chunks_valid(const struct gw_buf *b)
{
    size_t i = 0;

    while (i < b->len) {
        const char *end;

        T_CHECK(b->len - i > 6 && memcmp(b->data + i, "data: ", 6) == 0);
        end = strstr(b->data + i, "\n\n");
        T_CHECK(end != NULL);
        if (!((size_t)(end - b->data) - i - 6 == 6 && memcmp(b->data + i + 6, "[DONE]", 6) == 0))
            T_CHECK(t_is_object(b->data + i + 6, (size_t)(end - b->data) - i - 6));
        i = (size_t)(end - b->data) + 2;
    }
}

static void
t_answer_valid(struct t_check *c, struct gw_arena *a)
{
    struct dl_render_ctx ctx = {.model = GW_STR_LIT("asked"), .id = GW_STR_LIT("r"), .arena = a};
    struct gw_buf out = {0};

    if (dl_openai_shape.answer_render(&c->ans, &ctx, &out) == GW_OK)
        T_CHECK(t_is_object(out.data, out.len));
    gw_buf_fini(&out);
}

static void
t_check_init(struct t_check *c, struct gw_arena *a)
{
    struct dl_render_ctx ctx = {
        .model = GW_STR_LIT("asked"), .id = GW_STR_LIT("r"), .stream_usage = true, .arena = a};

    memset(c, 0, sizeof(*c));
    dl_openai_shape.render_init(&c->rs, &ctx);
    dl_answer_init(&c->ans, a);
}

static size_t
t_str_len(const json_t *v)
{
    return json_is_string(v) ? json_string_length(v) : 0;
}

/* The bytes of content a chunk's first choice carries, as jansson reads it: reasoning,
 * content (a string or text parts), refusal, tool call arguments, function_call
 * arguments. False when the chunk is ambiguous for this reading (both "delta" and
 * "message": the parser takes the later one, jansson cannot say which). */
static bool
t_chunk_bytes(struct gw_str d, size_t *out)
{
    json_t *j = json_loadb(d.ptr, d.len, JSON_ALLOW_NUL, NULL);
    json_t *ch = NULL, *cv, *delta, *v, *e;
    size_t x, n = 0;
    bool ok = true;

    json_array_foreach(json_object_get(j, "choices"), x, cv)
    {
        json_t *i = json_object_get(cv, "index");
        bool idx0 = json_is_integer(i) && json_integer_value(i) == 0;
        bool none = !(json_is_integer(i) && json_integer_value(i) >= 0);

        if (idx0 || (none && x == 0)) {
            ch = cv;
            break;
        }
    }
    delta = json_object_get(ch, "delta") ? json_object_get(ch, "delta")
                                         : json_object_get(ch, "message");
    if (json_is_object(delta)) {
        v = json_object_get(delta, "reasoning_content");
        n += json_is_string(v) ? t_str_len(v) : t_str_len(json_object_get(delta, "reasoning"));
        n += t_str_len(json_object_get(delta, "refusal"));
        v = json_object_get(delta, "content");
        n += t_str_len(v);
        json_array_foreach(v, x, e)
        {
            const char *type = json_string_value(json_object_get(e, "type"));

            if (type && strcmp(type, "text") == 0 &&
                json_string_length(json_object_get(e, "type")) == 4)
                n += t_str_len(json_object_get(e, "text"));
        }
        json_array_foreach(json_object_get(delta, "tool_calls"), x, e)
        {
            json_t *fn = json_object_get(e, "function"), *i = json_object_get(e, "index");

            if (!json_is_object(fn))
                fn = NULL;
            if ((json_is_integer(i) && json_integer_value(i) >= 0) ||
                json_is_string(json_object_get(e, "id")) ||
                json_is_string(json_object_get(fn, "name")) ||
                json_is_string(json_object_get(fn, "arguments")))
                n += t_str_len(json_object_get(fn, "arguments"));
        }
        v = json_object_get(delta, "function_call");
        if (json_is_object(v))
            n += t_str_len(json_object_get(v, "arguments"));
        /* the parser checks for an object choice: a non-object delta holds nothing */
    }
    /* a duplicate "delta"/"message" key: the parser reads both spellings as one */
    if (json_object_get(ch, "delta") && json_object_get(ch, "message"))
        ok = false;
    json_decref(j);
    *out = n;
    return ok;
}

/* True when a choice of the chunk <d> names a tool call past the parser's table (an
 * "index" of 96 or more), or, with <noindex>, holds a tool call without an index (which
 * may land past the table: the parser finds it while emitting). */
static bool
t_tool_past_or(struct gw_str d, bool noindex)
{
    json_t *j = json_loadb(d.ptr, d.len, JSON_ALLOW_NUL, NULL);
    json_t *cv, *e;
    size_t x, y;
    bool past = false;

    json_array_foreach(json_object_get(j, "choices"), y, cv)
    {
        json_t *dv = json_object_get(cv, "delta");
        json_t *tv =
            json_object_get(json_is_object(dv) ? dv : json_object_get(cv, "message"), "tool_calls");

        json_array_foreach(tv, x, e)
        {
            json_t *i = json_object_get(e, "index");

            if ((json_is_integer(i) && json_integer_value(i) >= 96) ||
                (noindex && !(json_is_integer(i) && json_integer_value(i) >= 0)))
                past = true;
        }
    }
    json_decref(j);
    return past;
}

static bool
t_tool_past(struct gw_str d)
{
    return t_tool_past_or(d, false);
}

struct t_stream {
    struct dl_parse_state ps;
    struct t_check *c;
};

static bool
t_is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

static int
t_on_sse(void *arg, const struct gw_sse_event *ev)
{
    struct t_stream *t = arg;
    struct gw_str d = ev->data;
    size_t i = 0, k;
    bool empty_or_done, nul = memchr(d.ptr, 0, d.len) != NULL;
    size_t before = t->c->n_events, bytes = t->c->delta_bytes, want;
    bool quiet = t->c->finished || t->c->failed;
    enum gw_code rc;

    while (i < d.len && t_is_ws(d.ptr[i]))
        i++;
    k = d.len;
    while (k > i && t_is_ws(d.ptr[k - 1]))
        k--;
    empty_or_done = i == d.len || (k - i == 6 && memcmp(d.ptr + i, "[DONE]", 6) == 0);
    rc = dl_openai_shape.event_parse(&t->ps, ev->event, d, t_on_event, t->c);
    T_CHECK(rc == GW_OK || rc == GW_E_UPSTREAM_PROTOCOL || rc == GW_E_NOMEM);
    if (rc == GW_E_UPSTREAM_PROTOCOL && t->c->n_events != before)
        /* a refused chunk emits nothing, but for the refusals found while emitting (a
         * call without an index past the table, too many blocks): JSON objects */
        T_CHECK(!nul && !empty_or_done && t_is_object(d.ptr, d.len) && !t_tool_past(d) &&
                t_tool_past_or(d, true));
    if (!nul && rc != GW_E_NOMEM) {
        bool object = !empty_or_done && t_is_object(d.ptr, d.len);

        /* refused exactly when not an object, or when a tool call is past the table */
        if (rc == GW_OK)
            T_CHECK(empty_or_done || object);
        else if (object)
            T_CHECK(t_tool_past_or(d, t->c->n_blocks > 0));
        /* every byte of content the chunk carries is in its deltas, once */
        if (rc == GW_OK && object && !quiet && !t->c->failed && t_chunk_bytes(d, &want) &&
            t->c->delta_bytes - bytes != want) {
            fprintf(stderr, "chunk content %zu bytes, deltas %zu: %.*s\n", want,
                    t->c->delta_bytes - bytes, (int)d.len, d.ptr);
            abort();
        }
    }
    return rc != GW_OK;
}

static void
t_stream(const char *s, size_t n)
{
    static struct t_check c;
    struct t_stream t = {.c = &c};
    struct gw_arena a;
    struct gw_sse p;

    gw_arena_init(&a);
    t_check_init(&c, &a);
    dl_openai_shape.parse_init(&t.ps);
    gw_sse_init(&p, 1 << 20);
    (void)gw_sse_feed(&p, s, n, t_on_sse, &t);
    if (c.finished && !c.failed)
        T_CHECK(dl_openai_shape.render_end(&c.rs, &c.rendered) == GW_OK);
    t_chunks_valid(&c.rendered);
    t_answer_valid(&c, &a);
    gw_sse_fini(&p);
    dl_answer_fini(&c.ans);
    gw_buf_fini(&c.rendered);
    gw_arena_fini(&a);
}

/* ---- answer ---- */

static void
t_answer(const char *s, size_t n)
{
    static struct t_check c;
    struct gw_arena a;
    struct gw_usage u;
    struct gw_str type, message;
    struct gw_buf err = {0};
    enum gw_code rc;

    gw_arena_init(&a);
    t_check_init(&c, &a);
    rc = dl_openai_shape.answer_parse(s, n, t_on_event, &c);
    T_CHECK(rc == GW_OK || rc == GW_E_UPSTREAM_PROTOCOL || rc == GW_E_NOMEM);
    if (rc == GW_E_UPSTREAM_PROTOCOL)
        T_CHECK(c.n_events == 0);
    if (rc == GW_OK) {
        T_CHECK(c.finished || c.failed);
        if (!memchr(s, 0, n))
            T_CHECK(t_is_object(s, n));
        t_answer_valid(&c, &a);
        if (c.usage_seen) {
            T_CHECK(dl_openai_shape.answer_usage(s, n, &u));
            T_CHECK(memcmp(&u, &c.usage, sizeof(u)) == 0);
        }
    }
    dl_openai_shape.upstream_error_read(s, n, 400, &type, &message);
    T_CHECK(type.len <= n && message.len <= n);
    T_CHECK(dl_openai_shape.upstream_error_render(400, type, message, &err) == GW_OK);
    T_CHECK(t_is_object(err.data, err.len));
    dl_answer_fini(&c.ans);
    gw_buf_fini(&c.rendered);
    gw_buf_fini(&err);
    gw_arena_fini(&a);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data + 1;

    if (size == 0)
        return 0;
    switch (data[0]) {
    case 's': t_stream(s, size - 1); break;
    case 'a': t_answer(s, size - 1); break;
    default: t_request(s, size - 1); break;
    }
    return 0;
}
