/* SPDX-License-Identifier: MIT
 * dialects/openai_answer.c - Chat Completions answers and the canonical events
 * (dialects/canon.h): the event parser of a Chat upstream's stream (also the inspector
 * of the same-shape relay: a hot path, every chunk of every Chat stream), the parser of
 * a non-streamed answer, the client-side renderers (chunks and answer) for a Chat client
 * served by an upstream of another shape, and the upstream error reader and renderer.
 * Pure: no I/O, no clock.
 *
 * Event parse: one validating pass of dialects/json_scan.h over the chunk notes what
 * its first choice (index 0) carries; events are emitted only once the whole chunk is
 * known to be valid JSON, so a malformed chunk emits nothing and returns
 * GW_E_UPSTREAM_PROTOCOL. No allocation for the common chunks: text is a slice of the
 * data unless it holds escapes, then it is decoded on the stack (on the heap past
 * 256 bytes, freed before returning). What a chunk gives:
 * - START once, at the first chunk that is not an error (id, model, created).
 * - reasoning_content, else "reasoning" as some compatible servers spell it -> a
 *   REASONING block; content, and refusal -> a TEXT block; tool_calls[i] -> one
 *   TOOL_CALL block per Chat tool index (BLOCK_START with its id and name, then DELTAs
 *   of argument fragments); a legacy function_call -> a TOOL_CALL block of its own.
 *   Blocks come in sequence: a delta of another kind, or of a new tool index, stops the
 *   open block (BLOCK_STOP) and starts the next. Within one chunk: reasoning, content,
 *   refusal, then tool calls.
 * - A delta for a block already stopped: text or reasoning start a new block of their
 *   kind (nothing is lost, blocks stay in sequence); argument fragments of a tool call
 *   already stopped (only an upstream that interleaves parallel calls, which OpenAI does
 *   not) are emitted as a DELTA with that call's block index, after its BLOCK_STOP:
 *   consumers must accept it (the answer fold does) rather than lose the arguments.
 * - A tool call without an id gets "call_<tool index>" ("call_fn" for function_call). An
 *   entry without an "index" (some compatible servers send none): an id other than the
 *   last call's starts the next call, anything else goes on with the last call.
 * - finish_reason -> BLOCK_STOP of the open block, USAGE when the same chunk carries
 *   usage, then FINISH (stop -> STOP, length -> LENGTH, tool_calls/function_call ->
 *   TOOL_CALLS, content_filter -> CONTENT_FILTER, "error" -> ERROR, anything else STOP).
 *   Block events of later chunks are ignored.
 * - The usage chunk (choices empty, "usage" an object) -> USAGE. In a Chat stream it
 *   comes AFTER the finish chunk: FINISH is not always the last event, and consumers
 *   must accept USAGE after FINISH. Any chunk's usage gives USAGE (cumulative). Cached
 *   tokens (prompt_tokens_details.cached_tokens) are the cache read, input is the rest;
 *   reasoning tokens are inside completion_tokens already (gw_usage has no field).
 * - {"error": ...} (or an SSE event named "error") -> ERROR (type, message, status);
 *   every later chunk emits nothing. [DONE], empty data -> nothing.
 * - Choices other than index 0 emit nothing (n > 1 is never converted; on the
 *   same-shape relay their content is not counted).
 * - Data that is neither [DONE] nor one JSON object -> GW_E_UPSTREAM_PROTOCOL; so does
 *   a tool "index" >= CHAT_TOOL_SLOTS (no event), and, after the events of the chunk
 *   before it, a call without an index past the table or more than 65534 blocks.
 * Answer parse: the same notes over the whole body, and the same emission, then
 * BLOCK_STOP, USAGE and FINISH (NONE when finish_reason is null). An {"error": ...}
 * body -> ERROR. A body that is not an object with a "choices" array ->
 * GW_E_UPSTREAM_PROTOCOL with nothing emitted.
 *
 * Render (client side), the chunks the former pairwise Messages -> Chat converter wrote
 * (same bytes; tests/fixtures/chat/stream_render_*.out.sse hold them):
 * START -> the role chunk (delta {"role":"assistant","content":""}); text DELTA ->
 * {"content"}; reasoning DELTA -> {"reasoning_content"} (as DeepSeek-style servers
 * stream it; clients that do not know it ignore it); tool BLOCK_START -> the tool_calls
 * entry opening the call (index, id, type, name, arguments ""); argument DELTA -> its
 * fragment under the call's Chat index; FINISH -> the finish chunk; render_end (the
 * stream ended well) -> the usage chunk when the client asked (ctx->stream_usage) and
 * usage was seen, then data: [DONE], so a USAGE after FINISH is in it; after FINISH only
 * USAGE and ERROR count; FINISH with ERROR -> the error chunk, like ERROR;
 * ERROR -> data: {"error":...} mapped like an upstream error, with gw's own message
 * (canon.h: an upstream's message is logged, never shown), no [DONE]. Nothing after
 * [DONE] or an error. The id is "chatcmpl-" + START's id (cut to 63 bytes; the
 * fallback ctx->id when START has none), model START's else ctx->model, created
 * START's else ctx->created. Answer render: that converter's answer, plus
 * reasoning_content when the answer holds reasoning; a failed answer (a->failed) -> the
 * error body of its type (the caller answers with a->status).
 * Owns:    nothing beyond one call; the parse and render states are the caller's.
 * Threads: any; a state belongs to one thread at a time.
 * See:     dialects/openai-priv.h, dialects/canon.h, tests/unit/dialects/test_openai_answer.c,
 *          tests/fuzz/fuzz_chat_canon.c
 */
#include "dialects/openai-priv.h"

#include <stdio.h>
#include <string.h>

#include "core/alloc.h"

#define KEY_IS(j, k, lit) dl_json_key_is((j), (k), (lit), sizeof(lit) - 1)

/* Chat tool-call indexes the parser follows (0 .. CHAT_TOOL_SLOTS - 1). */
#define CHAT_TOOL_SLOTS 96
/* Block indexes are kept + 1 in 16 bits. */
#define CHAT_MAX_BLOCKS 65534u

/* <s> as a JSON string; a {NULL, 0} slice (an event field left empty) is "". */
static enum gw_code
json_str(struct gw_buf *out, struct gw_str s)
{
    return gw_buf_append_json_str(out, s.ptr ? s : GW_STR_LIT(""));
}

/* ---- decoding and emitting ---- */

/* A decoded string: a slice of the scanned bytes when it holds no escape, else a copy
 * in <buf>, or on the heap when longer (dec_fini frees it). One string per dec. */
struct dec {
    char *heap;
    char buf[256];
};

static bool
dec_str(const struct dl_json *j, const struct dl_json_str *s, struct dec *d, struct gw_str *out)
{
    char *p;

    if (!s->escaped) {
        *out = (struct gw_str){j->s + s->start, s->end - s->start};
        return true;
    }
    p = s->dlen <= sizeof(d->buf) ? d->buf : (d->heap = gw_malloc(s->dlen));
    if (!p)
        return false;
    dl_json_decode(j, s, p);
    *out = (struct gw_str){p, s->dlen};
    return true;
}

static void
dec_fini(struct dec *d)
{
    gw_free(d->heap);
    d->heap = NULL;
}

/* An event of <kind>, every other field zero. Copied from a zero template: the compiler
 * writes it with vector moves, where an initializer zeroes it with rep stos, whose
 * start-up costs a content chunk's parse some 10 %. */
static const struct dl_event ev_zero;

static inline struct dl_event
ev_of(enum dl_event_kind kind)
{
    struct dl_event ev = ev_zero;

    ev.kind = kind;
    return ev;
}

struct em {
    dl_event_fn fn;
    void *arg;
    bool stop; /* the receiver asked to stop: emit nothing more */
};

static bool
emit(struct em *e, const struct dl_event *ev)
{
    if (e->stop)
        return false;
    if (e->fn(e->arg, ev) != 0)
        e->stop = true;
    return !e->stop;
}

/* ---- the notes of one chunk or answer ---- */

struct tc_note {
    int64_t index; /* the entry's "index", -1 when not given */
    bool has_id, has_name, has_args;
    struct dl_json_str id, name, args;
};

#define NOTE_TOOLS 4

struct choice_note {
    int64_t index; /* the choice's "index", -1 when not given */
    bool has_content, has_reasoning, has_reasoning2, has_refusal, has_finish, has_fn;
    size_t content_parts; /* offset + 1 of a content array (answers of some servers) */
    /* reasoning: reasoning_content; reasoning2: "reasoning", read when the first is not */
    struct dl_json_str content, reasoning, reasoning2, refusal, finish;
    size_t n_tools;  /* entries of tool_calls */
    size_t tools_at; /* offset of tool_calls, read again when n_tools > NOTE_TOOLS */
    struct tc_note tools[NOTE_TOOLS];
    struct tc_note fn; /* the legacy function_call */
};

struct chunk_note {
    bool has_id, has_model, has_error, has_usage, has_choices;
    struct dl_json_str id, model;
    uint64_t created;
    size_t error_at;
    struct gw_usage usage;
    int keep; /* which of ch[] holds choice 0, -1: none */
    struct choice_note ch[2];
};

/* A non-negative integer at the cursor, -1 for anything else (skipped). */
static bool
read_index(struct dl_json *j, int64_t *out)
{
    struct dl_json_num num;
    uint64_t v;
    int c = dl_json_peek(j);

    *out = -1;
    if (c < '0' || c > '9')
        return dl_json_skip(j, NULL);
    if (!dl_json_number(j, &num))
        return false;
    if (num.real)
        return true;
    if (num.end - num.start == 1) { /* the common 0, 1, ...: no conversion */
        *out = j->s[num.start] - '0';
        return true;
    }
    if (!dl_json_num_count(j, &num, &v))
        return false;
    *out = v > INT64_MAX ? -1 : (int64_t)v;
    return true;
}

/* A string at the cursor into <s> (<*has> true), or any other value skipped (<*has>
 * false: null and other types carry nothing). */
static bool
read_str(struct dl_json *j, struct dl_json_str *s, bool *has)
{
    *has = false;
    if (dl_json_peek(j) != '"')
        return dl_json_skip(j, NULL);
    *has = true;
    return dl_json_string(j, s);
}

static bool
note_function(struct dl_json *j, struct tc_note *t)
{
    struct dl_json_str k;
    bool first = true;
    int rc;

    if (dl_json_peek(j) != '{')
        return dl_json_skip(j, NULL);
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        bool ok;

        if (KEY_IS(j, &k, "name"))
            ok = read_str(j, &t->name, &t->has_name);
        else if (KEY_IS(j, &k, "arguments"))
            ok = read_str(j, &t->args, &t->has_args);
        else
            ok = dl_json_skip(j, NULL);
        if (!ok)
            return false;
    }
    return rc == 0;
}

static void
tc_reset(struct tc_note *t)
{
    t->index = -1;
    t->has_id = t->has_name = t->has_args = false;
}

/* One tool_calls entry; <t> NULL: read and forgotten (past NOTE_TOOLS). An "index"
 * past the parser's table refuses the chunk (false with no scan error: the chunk is
 * refused before any of its events). */
static bool
note_tool(struct dl_json *j, struct tc_note *t)
{
    struct dl_json_str k;
    struct tc_note spare;
    bool first = true;
    int rc;

    if (!t)
        t = &spare;
    tc_reset(t);
    if (dl_json_peek(j) != '{')
        return dl_json_skip(j, NULL);
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        bool ok;

        if (KEY_IS(j, &k, "index"))
            ok = read_index(j, &t->index);
        else if (KEY_IS(j, &k, "id"))
            ok = read_str(j, &t->id, &t->has_id);
        else if (KEY_IS(j, &k, "function")) /* a second one replaces the first */
            ok = (t->has_name = t->has_args = false, note_function(j, t));
        else
            ok = dl_json_skip(j, NULL);
        if (!ok)
            return false;
    }
    return rc == 0 && t->index < CHAT_TOOL_SLOTS;
}

static bool
note_tools(struct dl_json *j, struct choice_note *c)
{
    bool first = true;
    int rc;

    c->n_tools = 0;
    if (dl_json_peek(j) != '[')
        return dl_json_skip(j, NULL);
    c->tools_at = j->i;
    if (!dl_json_arr_enter(j))
        return false;
    while ((rc = dl_json_arr_next(j, &first)) > 0) {
        if (!note_tool(j, c->n_tools < NOTE_TOOLS ? &c->tools[c->n_tools] : NULL))
            return false;
        c->n_tools++;
    }
    return rc == 0;
}

/* A delta (streamed) or a message (an answer). */
static bool
note_delta(struct dl_json *j, struct choice_note *c)
{
    struct dl_json_str k;
    bool first = true;
    int rc;

    /* a second delta (a duplicate key) replaces the first, as jansson reads it */
    c->has_content = c->has_reasoning = c->has_reasoning2 = c->has_refusal = c->has_fn = false;
    c->content_parts = 0;
    c->n_tools = 0;
    if (dl_json_peek(j) != '{')
        return dl_json_skip(j, NULL);
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        bool ok;

        if (KEY_IS(j, &k, "content")) {
            c->content_parts = dl_json_peek(j) == '[' ? j->i + 1 : 0;
            ok = read_str(j, &c->content, &c->has_content);
        } else if (KEY_IS(j, &k, "reasoning_content")) {
            ok = read_str(j, &c->reasoning, &c->has_reasoning);
        } else if (KEY_IS(j, &k, "reasoning")) {
            ok = read_str(j, &c->reasoning2, &c->has_reasoning2);
        } else if (KEY_IS(j, &k, "refusal")) {
            ok = read_str(j, &c->refusal, &c->has_refusal);
        } else if (KEY_IS(j, &k, "tool_calls")) {
            ok = note_tools(j, c);
        } else if (KEY_IS(j, &k, "function_call")) {
            c->has_fn = dl_json_peek(j) == '{';
            tc_reset(&c->fn);
            ok = note_function(j, &c->fn);
        } else {
            ok = dl_json_skip(j, NULL);
        }
        if (!ok)
            return false;
    }
    return rc == 0;
}

static bool
note_choice(struct dl_json *j, struct choice_note *c)
{
    struct dl_json_str k;
    bool first = true;
    int rc;

    c->index = -1;
    c->has_content = c->has_reasoning = c->has_reasoning2 = c->has_refusal = c->has_fn = false;
    c->has_finish = false;
    c->content_parts = 0;
    c->n_tools = 0;
    if (dl_json_peek(j) != '{')
        return dl_json_skip(j, NULL);
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        bool ok;

        if (KEY_IS(j, &k, "delta") || KEY_IS(j, &k, "message"))
            ok = note_delta(j, c);
        else if (KEY_IS(j, &k, "index"))
            ok = read_index(j, &c->index);
        else if (KEY_IS(j, &k, "finish_reason"))
            ok = read_str(j, &c->finish, &c->has_finish);
        else
            ok = dl_json_skip(j, NULL);
        if (!ok)
            return false;
    }
    return rc == 0;
}

static bool
note_choices(struct dl_json *j, struct chunk_note *n)
{
    bool first = true;
    int slot = 0, rc;
    size_t pos = 0;

    n->keep = -1;
    n->has_choices = dl_json_peek(j) == '[';
    if (!n->has_choices)
        return dl_json_skip(j, NULL);
    if (!dl_json_arr_enter(j))
        return false;
    while ((rc = dl_json_arr_next(j, &first)) > 0) {
        struct choice_note *c = &n->ch[slot];

        if (!note_choice(j, c))
            return false;
        if (n->keep < 0 && (c->index == 0 || (c->index < 0 && pos == 0))) {
            n->keep = slot;
            slot = 1 - slot;
        }
        pos++;
    }
    return rc == 0;
}

static bool
is_digit_start(int c)
{
    return c == '-' || (c >= '0' && c <= '9');
}

/* The whole chunk or answer, the cursor at its '{'. <start>: read what START carries
 * (id, model, created); once a stream has started they are only validated. */
static bool
note_chunk(struct dl_json *j, struct chunk_note *n, bool start)
{
    struct dl_json_str k;
    bool first = true;
    int rc;

    n->has_id = n->has_model = n->has_error = n->has_usage = n->has_choices = false;
    n->created = 0;
    n->keep = -1;
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        int c = dl_json_peek(j);
        bool ok;

        if (KEY_IS(j, &k, "choices")) {
            ok = note_choices(j, n);
        } else if (KEY_IS(j, &k, "id")) {
            ok = read_str(j, &n->id, &n->has_id);
        } else if (KEY_IS(j, &k, "model")) {
            ok = read_str(j, &n->model, &n->has_model);
        } else if (start && KEY_IS(j, &k, "created")) {
            struct dl_json_num num;

            n->created = 0;
            ok = is_digit_start(c)
                     ? dl_json_number(j, &num) && dl_json_num_count(j, &num, &n->created)
                     : dl_json_skip(j, NULL);
        } else if (KEY_IS(j, &k, "usage")) {
            n->has_usage = c == '{';
            ok = c == '{' ? dl_openai_usage_scan(j, &n->usage) : dl_json_skip(j, NULL);
        } else if (KEY_IS(j, &k, "error")) {
            n->has_error = c != 'n';
            n->error_at = j->i;
            ok = dl_json_skip(j, NULL);
        } else {
            ok = dl_json_skip(j, NULL);
        }
        if (!ok)
            return false;
    }
    return rc == 0 && dl_json_end(j);
}

/* ---- errors in a chunk or a body ---- */

struct err_note {
    bool has_type, has_message, has_code;
    struct dl_json_str type, message, code;
    int status; /* 0: not given */
};

/* An HTTP status for an error type of any shape (0: not known). */
static int
status_of_type(const struct dl_json *j, const struct dl_json_str *t)
{
    static const struct {
        const char *type;
        int status;
    } map[] = {
        {"invalid_request_error", 400},
        {"authentication_error", 401},
        {"permission_error", 403},
        {"not_found_error", 404},
        {"request_too_large", 413},
        {"rate_limit_error", 429},
        {"requests", 429},
        {"tokens", 429},
        {"insufficient_quota", 429},
        {"server_error", 500},
        {"api_error", 500},
        {"overloaded_error", 529},
        {"timeout_error", 504},
    };
    size_t i;

    for (i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (dl_json_key_is(j, t, map[i].type, strlen(map[i].type)))
            return map[i].status;
    return 0;
}

/* The error at the cursor: {"message","type","code","status"} or a bare string. */
static bool
note_error(struct dl_json *j, struct err_note *e)
{
    struct dl_json_str k;
    bool first = true;
    int rc;

    memset(e, 0, sizeof(*e));
    if (dl_json_peek(j) == '"')
        return read_str(j, &e->message, &e->has_message);
    if (dl_json_peek(j) != '{')
        return dl_json_skip(j, NULL);
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        bool ok;

        if (KEY_IS(j, &k, "message")) {
            ok = read_str(j, &e->message, &e->has_message);
        } else if (KEY_IS(j, &k, "type")) {
            ok = read_str(j, &e->type, &e->has_type);
        } else if (KEY_IS(j, &k, "code") || KEY_IS(j, &k, "status")) {
            int64_t v;

            if (dl_json_peek(j) == '"') {
                ok = KEY_IS(j, &k, "code") ? read_str(j, &e->code, &e->has_code)
                                           : dl_json_skip(j, NULL);
            } else {
                ok = read_index(j, &v);
                if (v >= 400 && v <= 599)
                    e->status = (int)v;
            }
        } else {
            ok = dl_json_skip(j, NULL);
        }
        if (!ok)
            return false;
    }
    if (e->has_type && e->type.dlen == 0)
        e->has_type = false;
    if (!e->has_type && e->has_code) { /* {"code":"..."} alone names the error */
        e->type = e->code;
        e->has_type = true;
    }
    if (!e->status && e->has_type)
        e->status = status_of_type(j, &e->type);
    return rc == 0;
}

/* ERROR from the error value at <at> of the scanned <doc>. */
static enum gw_code
emit_error(struct em *e, const struct dl_json *doc, size_t at)
{
    struct dl_json j = *doc;
    struct dec dt = {0}, dm = {0};
    struct dl_event ev = ev_of(DL_EV_ERROR);
    struct err_note n;
    enum gw_code rc = GW_OK;

    j.i = at;
    if (!note_error(&j, &n))
        return j.err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
    if ((n.has_type && !dec_str(&j, &n.type, &dt, &ev.error_type)) ||
        (n.has_message && !dec_str(&j, &n.message, &dm, &ev.message)))
        rc = GW_E_NOMEM;
    ev.status = n.status;
    if (rc == GW_OK)
        emit(e, &ev);
    dec_fini(&dt);
    dec_fini(&dm);
    return rc;
}

/* ---- event parse: the state and the blocks ---- */

struct chat_parse {
    uint8_t started, finished, failed, open; /* open: a block is open */
    uint8_t open_kind;                       /* enum dl_block of the open block */
    uint32_t open_index;
    uint32_t n_blocks;                    /* blocks started */
    uint16_t fn_block;                    /* the legacy function_call's block + 1, 0: none */
    uint8_t n_tools;                      /* tool indexes used: the highest + 1 */
    uint8_t last_tool;                    /* the index of the last tool delta + 1, 0: none */
    uint32_t last_id_hash;                /* of the id of the last call started */
    uint16_t tool_block[CHAT_TOOL_SLOTS]; /* block + 1 of Chat tool index i, 0: none */
};

_Static_assert(sizeof(struct chat_parse) <= sizeof(struct dl_parse_state),
               "struct chat_parse must fit struct dl_parse_state");

static struct chat_parse *
parse_of(struct dl_parse_state *st)
{
    return (struct chat_parse *)(void *)st->u.u64;
}

void
dl_openai_parse_init(struct dl_parse_state *st)
{
    memset(parse_of(st), 0, sizeof(struct chat_parse));
}

static void
close_block(struct chat_parse *p, struct em *e)
{
    struct dl_event ev = ev_of(DL_EV_BLOCK_STOP);

    if (!p->open)
        return;
    p->open = 0;
    ev.index = p->open_index;
    ev.block = (enum dl_block)p->open_kind;
    emit(e, &ev);
}

/* Stops the open block and starts a new one of <kind>. */
static enum gw_code
open_block(struct chat_parse *p, struct em *e, enum dl_block kind, struct gw_str id,
           struct gw_str name)
{
    struct dl_event ev = ev_of(DL_EV_BLOCK_START);

    if (p->n_blocks >= CHAT_MAX_BLOCKS)
        return GW_E_UPSTREAM_PROTOCOL;
    close_block(p, e);
    ev.index = p->n_blocks++;
    ev.block = kind;
    ev.id = id;
    ev.name = name;
    p->open = 1;
    p->open_kind = (uint8_t)kind;
    p->open_index = ev.index;
    emit(e, &ev);
    return GW_OK;
}

/* A text or reasoning fragment: into the open block of its kind, else a new one. */
static enum gw_code
text_delta(struct chat_parse *p, struct em *e, enum dl_block kind, const struct dl_json *j,
           const struct dl_json_str *s)
{
    struct dl_event ev = ev_of(DL_EV_DELTA);
    struct dec d;
    enum gw_code rc;

    if (s->dlen == 0 || e->stop)
        return GW_OK;
    if (!p->open || p->open_kind != kind) {
        rc = open_block(p, e, kind, (struct gw_str){0}, (struct gw_str){0});
        if (rc != GW_OK)
            return rc;
    }
    d.heap = NULL;
    if (!dec_str(j, s, &d, &ev.text))
        return GW_E_NOMEM;
    ev.index = p->open_index;
    ev.block = kind;
    emit(e, &ev);
    dec_fini(&d);
    return GW_OK;
}

/* FNV-1a of a string token's raw bytes: tells one call's id from another's. */
static uint32_t
id_hash(const struct dl_json *j, const struct dl_json_str *s)
{
    uint32_t h = 2166136261u;
    size_t i;

    for (i = s->start; i < s->end; i++)
        h = (h ^ (unsigned char)j->s[i]) * 16777619u;
    return h;
}

/* The Chat tool index of an entry: its "index"; without one (some compatible servers
 * send none), an id other than the last call's starts the next call, else the entry
 * goes on with the last call (or, before any, takes its position in the array). */
static int64_t
tool_index(const struct chat_parse *p, const struct dl_json *j, const struct tc_note *t, size_t pos)
{
    if (t->index >= 0)
        return t->index;
    if (t->has_id && t->id.dlen && !(p->last_tool && id_hash(j, &t->id) == p->last_id_hash))
        return p->n_tools;
    return p->last_tool ? p->last_tool - 1 : (int64_t)pos;
}

/* A tool_calls entry (or the legacy function_call when <legacy>) at array position
 * <pos>: the call's block started at its first sight, then its argument fragment. */
static enum gw_code
tool_delta(struct chat_parse *p, struct em *e, const struct dl_json *j, const struct tc_note *t,
           size_t pos, bool legacy)
{
    struct dl_event ev = ev_of(DL_EV_DELTA);
    int64_t idx = legacy ? 0 : tool_index(p, j, t, pos);
    uint16_t *slot;
    struct dec d;
    enum gw_code rc = GW_OK;

    if (e->stop)
        return GW_OK;
    if (legacy)
        slot = &p->fn_block;
    else if (idx < CHAT_TOOL_SLOTS)
        slot = &p->tool_block[idx];
    else
        return GW_E_UPSTREAM_PROTOCOL;
    if (*slot == 0) {
        struct dec di, dn;
        struct gw_str id = {0}, name = {0};
        char gen[32];

        di.heap = dn.heap = NULL;
        if (t->has_id && t->id.dlen) {
            if (!dec_str(j, &t->id, &di, &id))
                return GW_E_NOMEM;
        } else {
            int n = legacy ? snprintf(gen, sizeof(gen), "call_fn")
                           : snprintf(gen, sizeof(gen), "call_%u", (unsigned)idx);

            id = (struct gw_str){gen, (size_t)n};
        }
        if (t->has_name && !dec_str(j, &t->name, &dn, &name))
            rc = GW_E_NOMEM;
        if (rc == GW_OK)
            rc = open_block(p, e, DL_BLOCK_TOOL_CALL, id, name);
        dec_fini(&di);
        dec_fini(&dn);
        if (rc != GW_OK)
            return rc;
        *slot = (uint16_t)(p->open_index + 1);
        if (!legacy) {
            if (idx + 1 > p->n_tools)
                p->n_tools = (uint8_t)(idx + 1);
            p->last_id_hash = t->has_id ? id_hash(j, &t->id) : 0;
        }
    }
    if (!legacy)
        p->last_tool = (uint8_t)(idx + 1);
    if (!t->has_args || t->args.dlen == 0)
        return GW_OK;
    d.heap = NULL;
    if (!dec_str(j, &t->args, &d, &ev.text))
        return GW_E_NOMEM;
    ev.index = (unsigned)(*slot - 1); /* a stopped call's too: see the file's comment */
    ev.block = DL_BLOCK_TOOL_CALL;
    emit(e, &ev);
    dec_fini(&d);
    return GW_OK;
}

/* The text parts of a content array (answers of some servers) as TEXT deltas. */
static enum gw_code
content_parts(struct chat_parse *p, struct em *e, const struct dl_json *doc, size_t at)
{
    struct dl_json j = *doc;
    bool first = true;
    enum gw_code rc;
    int r;

    j.i = at;
    if (!dl_json_arr_enter(&j))
        return GW_E_UPSTREAM_PROTOCOL;
    while ((r = dl_json_arr_next(&j, &first)) > 0) {
        struct dl_json_str k, t, text;
        bool obj_first = true, is_text = false, has_text = false;
        int r2;

        if (dl_json_peek(&j) != '{') {
            if (!dl_json_skip(&j, NULL))
                return GW_E_UPSTREAM_PROTOCOL;
            continue;
        }
        if (!dl_json_obj_enter(&j))
            return GW_E_UPSTREAM_PROTOCOL;
        while ((r2 = dl_json_obj_next(&j, &obj_first, &k)) > 0) {
            bool ok, has;

            if (KEY_IS(&j, &k, "type")) {
                ok = read_str(&j, &t, &has);
                is_text = has && KEY_IS(&j, &t, "text");
            } else if (KEY_IS(&j, &k, "text")) {
                ok = read_str(&j, &text, &has_text);
            } else {
                ok = dl_json_skip(&j, NULL);
            }
            if (!ok)
                return GW_E_UPSTREAM_PROTOCOL;
        }
        if (r2 < 0)
            return GW_E_UPSTREAM_PROTOCOL;
        if (is_text && has_text && (rc = text_delta(p, e, DL_BLOCK_TEXT, &j, &text)) != GW_OK)
            return rc;
    }
    return r == 0 ? GW_OK : GW_E_UPSTREAM_PROTOCOL;
}

/* An entry that says something of a call (an empty object, or not an object, does not). */
static bool
tc_any(const struct tc_note *t)
{
    return t->index >= 0 || t->has_id || t->has_name || t->has_args;
}

/* The tool_calls entries of a choice that holds more than NOTE_TOOLS: read again. */
static enum gw_code
tools_again(struct chat_parse *p, struct em *e, const struct dl_json *doc, size_t at)
{
    struct dl_json j = *doc;
    bool first = true;
    size_t pos = 0;
    enum gw_code rc;
    int r;

    j.i = at;
    if (!dl_json_arr_enter(&j))
        return GW_E_UPSTREAM_PROTOCOL;
    while ((r = dl_json_arr_next(&j, &first)) > 0) {
        struct tc_note t;

        if (!note_tool(&j, &t))
            return GW_E_UPSTREAM_PROTOCOL;
        if (tc_any(&t) && (rc = tool_delta(p, e, &j, &t, pos, false)) != GW_OK)
            return rc;
        pos++;
    }
    return r == 0 ? GW_OK : GW_E_UPSTREAM_PROTOCOL;
}

/* What a choice carries, as deltas: reasoning, content, refusal, tool calls. */
static enum gw_code
choice_deltas(struct chat_parse *p, struct em *e, const struct dl_json *j,
              const struct choice_note *c)
{
    enum gw_code rc = GW_OK;
    size_t k;

    if (c->has_reasoning || c->has_reasoning2)
        rc = text_delta(p, e, DL_BLOCK_REASONING, j,
                        c->has_reasoning ? &c->reasoning : &c->reasoning2);
    if (rc == GW_OK && c->has_content)
        rc = text_delta(p, e, DL_BLOCK_TEXT, j, &c->content);
    if (rc == GW_OK && c->content_parts)
        rc = content_parts(p, e, j, c->content_parts - 1);
    if (rc == GW_OK && c->has_refusal)
        rc = text_delta(p, e, DL_BLOCK_TEXT, j, &c->refusal);
    if (rc == GW_OK && c->n_tools > NOTE_TOOLS) /* more than the notes hold: all read again */
        rc = tools_again(p, e, j, c->tools_at);
    for (k = 0; rc == GW_OK && c->n_tools <= NOTE_TOOLS && k < c->n_tools; k++)
        if (tc_any(&c->tools[k]))
            rc = tool_delta(p, e, j, &c->tools[k], k, false);
    if (rc == GW_OK && c->has_fn)
        rc = tool_delta(p, e, j, &c->fn, 0, true);
    return rc;
}

static enum dl_finish
finish_of(const struct dl_json *j, const struct choice_note *c)
{
    if (!c->has_finish)
        return DL_FINISH_NONE;
    if (KEY_IS(j, &c->finish, "length"))
        return DL_FINISH_LENGTH;
    if (KEY_IS(j, &c->finish, "tool_calls") || KEY_IS(j, &c->finish, "function_call"))
        return DL_FINISH_TOOL_CALLS;
    if (KEY_IS(j, &c->finish, "content_filter"))
        return DL_FINISH_CONTENT_FILTER;
    if (KEY_IS(j, &c->finish, "error"))
        return DL_FINISH_ERROR;
    return DL_FINISH_STOP; /* stop, and whatever a compatible server says instead */
}

static void
emit_usage(struct em *e, const struct gw_usage *u)
{
    struct dl_event ev = ev_of(DL_EV_USAGE);

    ev.usage = *u;
    emit(e, &ev);
}

static void
emit_finish(struct em *e, enum dl_finish f)
{
    struct dl_event ev = ev_of(DL_EV_FINISH);

    ev.finish = f;
    emit(e, &ev);
}

static enum gw_code
emit_start(struct chat_parse *p, struct em *e, const struct dl_json *j, const struct chunk_note *n)
{
    struct dl_event ev = ev_of(DL_EV_START);
    struct dec di, dm;
    enum gw_code rc = GW_OK;

    di.heap = dm.heap = NULL;
    if ((n->has_id && !dec_str(j, &n->id, &di, &ev.id)) ||
        (n->has_model && !dec_str(j, &n->model, &dm, &ev.model)))
        rc = GW_E_NOMEM;
    ev.created = n->created;
    if (rc == GW_OK) {
        p->started = 1;
        emit(e, &ev);
    }
    dec_fini(&di);
    dec_fini(&dm);
    return rc;
}

static bool
is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* True when <data> is [DONE] (whitespace around it allowed). */
static bool
is_done(struct gw_str data, size_t i)
{
    size_t k = i + 6;

    if (data.len - i < 6 || memcmp(data.ptr + i, "[DONE]", 6) != 0)
        return false;
    while (k < data.len && is_ws(data.ptr[k]))
        k++;
    return k == data.len;
}

enum gw_code
dl_openai_event_parse(struct dl_parse_state *st, struct gw_str event, struct gw_str data,
                      dl_event_fn fn, void *arg)
{
    struct chat_parse *p = parse_of(st);
    struct em e = {fn, arg, false};
    struct chunk_note n;
    const struct choice_note *c;
    struct dl_json j;
    enum gw_code rc = GW_OK;
    bool usage_done = false;
    size_t i = 0;

    while (i < data.len && is_ws(data.ptr[i]))
        i++;
    if (i == data.len || is_done(data, i))
        return GW_OK;
    if (data.ptr[i] != '{')
        return GW_E_UPSTREAM_PROTOCOL;
    dl_json_init(&j, data.ptr, data.len);
    j.i = i;
    if (!note_chunk(&j, &n, !p->started))
        return j.err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
    if (p->failed)
        return GW_OK;
    if (n.has_error || gw_str_eq(event, GW_STR_LIT("error"))) {
        p->failed = 1;
        return emit_error(&e, &j, n.has_error ? n.error_at : i);
    }
    if (!p->started && (rc = emit_start(p, &e, &j, &n)) != GW_OK)
        return rc;
    c = n.keep >= 0 ? &n.ch[n.keep] : NULL;
    if (c && !p->finished) {
        rc = choice_deltas(p, &e, &j, c);
        if (rc == GW_OK && c->has_finish) {
            close_block(p, &e);
            if (n.has_usage)
                emit_usage(&e, &n.usage);
            usage_done = true;
            emit_finish(&e, finish_of(&j, c));
            p->finished = 1;
        }
    }
    if (rc == GW_OK && n.has_usage && !usage_done)
        emit_usage(&e, &n.usage);
    return rc;
}

enum gw_code
dl_openai_answer_parse(const char *body, size_t len, dl_event_fn fn, void *arg)
{
    struct dl_parse_state st;
    struct chat_parse *p = parse_of(&st);
    struct em e = {fn, arg, false};
    struct chunk_note n;
    struct dl_json j;
    enum gw_code rc;

    dl_openai_parse_init(&st);
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !note_chunk(&j, &n, true))
        return j.err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
    if (n.has_error)
        return emit_error(&e, &j, n.error_at);
    if (!n.has_choices)
        return GW_E_UPSTREAM_PROTOCOL;
    rc = emit_start(p, &e, &j, &n);
    if (rc == GW_OK && n.keep >= 0)
        rc = choice_deltas(p, &e, &j, &n.ch[n.keep]);
    if (rc != GW_OK)
        return rc;
    close_block(p, &e);
    if (n.has_usage)
        emit_usage(&e, &n.usage);
    emit_finish(&e, n.keep >= 0 ? finish_of(&j, &n.ch[n.keep]) : DL_FINISH_NONE);
    return GW_OK;
}

/* ---- upstream errors ---- */

void
dl_openai_upstream_error_read(const char *body, size_t len, int status, struct gw_str *type,
                              struct gw_str *message)
{
    struct dl_json j;
    struct dl_json_str k;
    struct err_note e;
    bool first = true, found = false;
    int rc;

    (void)status;
    *type = (struct gw_str){"", 0};
    *message = (struct gw_str){"", 0};
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !dl_json_obj_enter(&j))
        return;
    /* {"error":{...}} or {"error":"..."}; some servers put message and type at the top */
    while ((rc = dl_json_obj_next(&j, &first, &k)) > 0) {
        if (KEY_IS(&j, &k, "error") && dl_json_peek(&j) != 'n') {
            if (!note_error(&j, &e))
                return;
            found = true;
        } else if (!dl_json_skip(&j, NULL)) {
            return;
        }
    }
    if (rc != 0 || !dl_json_end(&j))
        return;
    if (!found) {
        dl_json_init(&j, body, len);
        (void)dl_json_peek(&j);
        if (!note_error(&j, &e))
            return;
    }
    /* slices of the body: escapes, when the upstream wrote any, are left in */
    if (e.has_type)
        *type = (struct gw_str){body + e.type.start, e.type.end - e.type.start};
    if (e.has_message)
        *message = (struct gw_str){body + e.message.start, e.message.end - e.message.start};
}

/* An error type of any shape -> OpenAI's type and code (one table, STYLE.md 7):
 * Chat's own, Anthropic's, Gemini's statuses, Bedrock's exceptions. */
static const struct {
    const char *theirs;
    const char *type;
    const char *code; /* NULL: "code":null */
} error_map[] = {
    {"invalid_request_error", "invalid_request_error", NULL},
    {"request_too_large", "invalid_request_error", NULL},
    {"authentication_error", "authentication_error", NULL},
    {"permission_error", "permission_error", NULL},
    {"not_found_error", "not_found_error", NULL},
    {"billing_error", "insufficient_quota", "insufficient_quota"},
    {"insufficient_quota", "insufficient_quota", "insufficient_quota"},
    {"rate_limit_error", "requests", "rate_limit_exceeded"},
    {"requests", "requests", "rate_limit_exceeded"},
    {"tokens", "tokens", "rate_limit_exceeded"},
    {"timeout_error", "timeout_error", NULL},
    {"overloaded_error", "server_error", NULL},
    {"api_error", "server_error", NULL},
    {"server_error", "server_error", NULL},
    {"INVALID_ARGUMENT", "invalid_request_error", NULL},
    {"FAILED_PRECONDITION", "invalid_request_error", NULL},
    {"UNAUTHENTICATED", "authentication_error", NULL},
    {"PERMISSION_DENIED", "permission_error", NULL},
    {"NOT_FOUND", "not_found_error", NULL},
    {"RESOURCE_EXHAUSTED", "requests", "rate_limit_exceeded"},
    {"DEADLINE_EXCEEDED", "timeout_error", NULL},
    {"UNAVAILABLE", "server_error", NULL},
    {"INTERNAL", "server_error", NULL},
    {"ValidationException", "invalid_request_error", NULL},
    {"AccessDeniedException", "permission_error", NULL},
    {"ResourceNotFoundException", "not_found_error", NULL},
    {"ThrottlingException", "requests", "rate_limit_exceeded"},
    {"ServiceQuotaExceededException", "insufficient_quota", "insufficient_quota"},
    {"ModelTimeoutException", "timeout_error", NULL},
    {"ServiceUnavailableException", "server_error", NULL},
    {"InternalServerException", "server_error", NULL},
};

static const struct {
    int status;
    const char *type;
    const char *code;
} error_by_status[] = {
    {400, "invalid_request_error", NULL},
    {413, "invalid_request_error", NULL},
    {401, "authentication_error", NULL},
    {402, "insufficient_quota", "insufficient_quota"},
    {403, "permission_error", NULL},
    {404, "not_found_error", NULL},
    {408, "timeout_error", NULL},
    {504, "timeout_error", NULL},
    {429, "requests", "rate_limit_exceeded"},
};

static void
map_error(struct gw_str theirs, int status, const char **type, const char **code)
{
    size_t i;

    for (i = 0; i < sizeof(error_map) / sizeof(error_map[0]); i++)
        if (gw_str_eq(theirs, gw_str_c(error_map[i].theirs))) {
            *type = error_map[i].type;
            *code = error_map[i].code;
            return;
        }
    for (i = 0; i < sizeof(error_by_status) / sizeof(error_by_status[0]); i++)
        if (error_by_status[i].status == status) {
            *type = error_by_status[i].type;
            *code = error_by_status[i].code;
            return;
        }
    *type = status >= 400 && status < 500 ? "invalid_request_error" : "server_error";
    *code = NULL;
}

/* {"error":{"message","type","param":null,"code"}}: <message>, else "the upstream
 * answered HTTP <status>" (status > 0), else "the upstream stream failed". */
static enum gw_code
error_body(int status, struct gw_str type, struct gw_str message, struct gw_buf *out)
{
    const char *t, *code;
    size_t start = out->len;
    enum gw_code rc;

    map_error(type, status, &t, &code);
    rc = gw_buf_append_cstr(out, "{\"error\":{\"message\":");
    if (rc == GW_OK && message.len > 0)
        rc = json_str(out, message);
    else if (rc == GW_OK && status > 0)
        rc = gw_buf_printf(out, "\"the upstream answered HTTP %d\"", status);
    else if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, "\"the upstream stream failed\"");
    if (rc == GW_OK)
        rc = gw_buf_printf(out, ",\"type\":\"%s\",\"param\":null,\"code\":", t);
    if (rc == GW_OK)
        rc = code ? gw_buf_printf(out, "\"%s\"}}", code) : gw_buf_append_cstr(out, "null}}");
    if (rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    return rc;
}

enum gw_code
dl_openai_upstream_error_render(int status, struct gw_str type, struct gw_str message,
                                struct gw_buf *out)
{
    return error_body(status, type, message, out);
}

/* ---- render: chunks for a Chat client ---- */

/* Chat tool-call indexes of the last tool blocks, for argument deltas. */
#define RENDER_TOOL_MAP 12

struct chat_render {
    char id[64];                  /* "chatcmpl-" + the answer's id, cut to fit */
    char model[GW_MODEL_MAX + 1]; /* the answer's model */
    uint64_t created;
    struct gw_usage usage;
    bool usage_seen, stream_usage, started, finished, stopped, failed;
    int32_t tool_index; /* the Chat index of the last tool call, -1 before any */
    uint32_t n_map;     /* tool blocks seen (the map is a ring of the last ones) */
    struct {
        uint32_t block;
        int32_t tool;
    } map[RENDER_TOOL_MAP];
};

_Static_assert(sizeof(struct chat_render) <= sizeof(struct dl_render_state),
               "struct chat_render must fit struct dl_render_state");

static struct chat_render *
render_of(struct dl_render_state *st)
{
    return (struct chat_render *)(void *)st->u.u64;
}

static bool
has_prefix(struct gw_str s, const char *p)
{
    size_t n = strlen(p);

    return s.len >= n && memcmp(s.ptr, p, n) == 0;
}

/* <prefix> + <s> into <dst> (<cap> bytes with the NUL), cut at a UTF-8 boundary. */
static void
copy_cut(char *dst, size_t cap, const char *prefix, struct gw_str s)
{
    size_t p = strlen(prefix), n = s.len;

    memcpy(dst, prefix, p);
    if (p + n > cap - 1) {
        n = cap - 1 - p;
        while (n > 0 && ((unsigned char)s.ptr[n] & 0xC0) == 0x80)
            n--;
    }
    if (n)
        memcpy(dst + p, s.ptr, n);
    dst[p + n] = '\0';
}

static void
set_id(struct chat_render *r, struct gw_str id)
{
    copy_cut(r->id, sizeof(r->id), has_prefix(id, "chatcmpl-") ? "" : "chatcmpl-", id);
}

void
dl_openai_render_init(struct dl_render_state *st, const struct dl_render_ctx *ctx)
{
    struct chat_render *r = render_of(st);

    memset(r, 0, sizeof(*r));
    set_id(r, ctx->id);
    copy_cut(r->model, sizeof(r->model), "", ctx->model);
    r->created = ctx->created;
    r->stream_usage = ctx->stream_usage;
    r->tool_index = -1;
}

/* "data: {"id":..,"object":"chat.completion.chunk","created":..,"model":..,"choices":" */
static enum gw_code
chunk_open(const struct chat_render *r, struct gw_buf *out)
{
    if (gw_buf_append_cstr(out, "data: {\"id\":") != GW_OK ||
        json_str(out, gw_str_c(r->id)) != GW_OK ||
        gw_buf_append_cstr(out, ",\"object\":\"chat.completion.chunk\",\"created\":") != GW_OK ||
        gw_buf_append_u64(out, r->created) != GW_OK ||
        gw_buf_append_cstr(out, ",\"model\":") != GW_OK ||
        json_str(out, gw_str_c(r->model)) != GW_OK ||
        gw_buf_append_cstr(out, ",\"choices\":") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

/* A delta chunk: chunk_open, then [{"index":0,"delta":<head><value><tail>,
 * "finish_reason":null}]. <value> (JSON-quoted) is left out when NULL. */
static enum gw_code
chunk_delta(const struct chat_render *r, const char *head, const struct gw_str *value,
            const char *tail, struct gw_buf *out)
{
    if (chunk_open(r, out) != GW_OK ||
        gw_buf_append_cstr(out, "[{\"index\":0,\"delta\":") != GW_OK ||
        gw_buf_append_cstr(out, head) != GW_OK || (value && json_str(out, *value) != GW_OK) ||
        gw_buf_append_cstr(out, tail) != GW_OK ||
        gw_buf_append_cstr(out, ",\"finish_reason\":null}]}\n\n") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
chunk_tool_open(const struct chat_render *r, const struct dl_event *ev, struct gw_buf *out)
{
    if (chunk_open(r, out) != GW_OK ||
        gw_buf_append_cstr(out, "[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":") != GW_OK ||
        gw_buf_append_u64(out, (uint64_t)r->tool_index) != GW_OK ||
        gw_buf_append_cstr(out, ",\"id\":") != GW_OK || json_str(out, ev->id) != GW_OK ||
        gw_buf_append_cstr(out, ",\"type\":\"function\",\"function\":{\"name\":") != GW_OK ||
        json_str(out, ev->name) != GW_OK ||
        gw_buf_append_cstr(out, ",\"arguments\":\"\"}}]},\"finish_reason\":null}]}\n\n") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
chunk_tool_args(const struct chat_render *r, int32_t tool, struct gw_str args, struct gw_buf *out)
{
    if (chunk_open(r, out) != GW_OK ||
        gw_buf_append_cstr(out, "[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":") != GW_OK ||
        gw_buf_append_u64(out, (uint64_t)tool) != GW_OK ||
        gw_buf_append_cstr(out, ",\"function\":{\"arguments\":") != GW_OK ||
        json_str(out, args) != GW_OK ||
        gw_buf_append_cstr(out, "}}]},\"finish_reason\":null}]}\n\n") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

/* prompt_tokens counts every input token: uncached, cache read and cache write. */
static uint64_t
prompt_of(const struct gw_usage *u)
{
    return sat_add(sat_add(u->input_tokens, u->cache_read_tokens), u->cache_write_tokens);
}

static enum gw_code
usage_object(const struct gw_usage *u, struct gw_buf *out)
{
    uint64_t prompt = prompt_of(u);

    if (gw_buf_append_cstr(out, "{\"prompt_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, prompt) != GW_OK ||
        gw_buf_append_cstr(out, ",\"completion_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, u->output_tokens) != GW_OK ||
        gw_buf_append_cstr(out, ",\"total_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, sat_add(prompt, u->output_tokens)) != GW_OK ||
        gw_buf_append_cstr(out, ",\"prompt_tokens_details\":{\"cached_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, u->cache_read_tokens) != GW_OK ||
        gw_buf_append_cstr(out, "},\"completion_tokens_details\":{\"reasoning_tokens\":") !=
            GW_OK ||
        gw_buf_append_u64(out, u->reasoning_tokens) != GW_OK ||
        gw_buf_append_cstr(out, "}}") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static const char *
finish_name(enum dl_finish f)
{
    switch (f) {
    case DL_FINISH_LENGTH: return "length";
    case DL_FINISH_TOOL_CALLS: return "tool_calls";
    case DL_FINISH_CONTENT_FILTER: return "content_filter";
    case DL_FINISH_STOP:
    case DL_FINISH_ERROR: return "stop";
    case DL_FINISH_NONE: break;
    }
    return NULL;
}

static enum gw_code
render_finish(struct chat_render *r, const struct dl_event *ev, struct gw_buf *out)
{
    const char *f = finish_name(ev->finish);

    if (ev->finish == DL_FINISH_ERROR) {
        /* the answer failed: the error chunk ends it, no [DONE] */
        r->failed = true;
        if (gw_buf_append_cstr(out, "data: ") != GW_OK ||
            error_body(0, (struct gw_str){0}, (struct gw_str){0}, out) != GW_OK ||
            gw_buf_append_cstr(out, "\n\n") != GW_OK)
            return GW_E_NOMEM;
        return GW_OK;
    }
    if (f && (chunk_open(r, out) != GW_OK ||
              gw_buf_append_cstr(out, "[{\"index\":0,\"delta\":{},\"finish_reason\":\"") != GW_OK ||
              gw_buf_append_cstr(out, f) != GW_OK || gw_buf_append_cstr(out, "\"}]}\n\n") != GW_OK))
        return GW_E_NOMEM;
    r->finished = true; /* the usage chunk and [DONE] wait for render_end */
    return GW_OK;
}

/* The end of a good stream: the usage chunk when the client asked for it, [DONE]. */
static enum gw_code
render_done(struct chat_render *r, struct gw_buf *out)
{
    if (r->stream_usage && r->usage_seen &&
        (chunk_open(r, out) != GW_OK || gw_buf_append_cstr(out, "[],\"usage\":") != GW_OK ||
         usage_object(&r->usage, out) != GW_OK || gw_buf_append_cstr(out, "}\n\n") != GW_OK))
        return GW_E_NOMEM;
    if (gw_buf_append_cstr(out, "data: [DONE]\n\n") != GW_OK)
        return GW_E_NOMEM;
    r->stopped = true;
    return GW_OK;
}

/* The Chat index of the tool block <block>: from the map, else the last call's. */
static int32_t
tool_of(const struct chat_render *r, unsigned block)
{
    uint32_t i, n = r->n_map < RENDER_TOOL_MAP ? r->n_map : RENDER_TOOL_MAP;

    for (i = 0; i < n; i++)
        if (r->map[i].block == block)
            return r->map[i].tool;
    return r->tool_index;
}

static enum gw_code
render_event(struct chat_render *r, const struct dl_event *ev, struct gw_buf *out)
{
    switch (ev->kind) {
    case DL_EV_START:
        if (ev->id.len)
            set_id(r, ev->id);
        if (ev->model.len)
            copy_cut(r->model, sizeof(r->model), "", ev->model);
        if (ev->created)
            r->created = ev->created;
        r->started = true;
        return chunk_delta(r, "{\"role\":\"assistant\",\"content\":\"\"}", NULL, "", out);
    case DL_EV_BLOCK_START:
        if (ev->block != DL_BLOCK_TOOL_CALL)
            return GW_OK;
        r->tool_index++;
        r->map[r->n_map % RENDER_TOOL_MAP].block = ev->index;
        r->map[r->n_map % RENDER_TOOL_MAP].tool = r->tool_index;
        r->n_map++;
        return chunk_tool_open(r, ev, out);
    case DL_EV_DELTA:
        if (ev->text.len == 0)
            return GW_OK; /* a signature, or nothing */
        if (ev->block == DL_BLOCK_TEXT)
            return chunk_delta(r, "{\"content\":", &ev->text, "}", out);
        if (ev->block == DL_BLOCK_REASONING)
            return chunk_delta(r, "{\"reasoning_content\":", &ev->text, "}", out);
        if (tool_of(r, ev->index) < 0)
            return GW_OK; /* arguments of a call never started */
        return chunk_tool_args(r, tool_of(r, ev->index), ev->text, out);
    case DL_EV_BLOCK_STOP: return GW_OK;
    case DL_EV_USAGE:
        r->usage = ev->usage;
        r->usage_seen = true;
        return GW_OK;
    case DL_EV_FINISH: return r->finished ? GW_OK : render_finish(r, ev, out);
    case DL_EV_ERROR:
        r->failed = true;
        if (gw_buf_append_cstr(out, "data: ") != GW_OK ||
            error_body(0, ev->error_type, (struct gw_str){0}, out) != GW_OK ||
            gw_buf_append_cstr(out, "\n\n") != GW_OK)
            return GW_E_NOMEM;
        return GW_OK;
    }
    return GW_OK;
}

enum gw_code
dl_openai_event_render(struct dl_render_state *st, const struct dl_event *ev, struct gw_buf *out)
{
    struct chat_render *r = render_of(st);
    size_t start = out->len;
    enum gw_code rc = GW_OK;

    if (r->stopped || r->failed)
        return GW_OK;
    if (r->finished && ev->kind != DL_EV_USAGE && ev->kind != DL_EV_ERROR)
        return GW_OK; /* the answer is complete: only its usage or a failure may follow */
    if (!r->started && ev->kind != DL_EV_START && ev->kind != DL_EV_ERROR &&
        ev->kind != DL_EV_USAGE) {
        /* content before START (a parser that has no start): the role chunk first */
        struct dl_event start_ev = {.kind = DL_EV_START};

        rc = render_event(r, &start_ev, out);
    }
    if (rc == GW_OK)
        rc = render_event(r, ev, out);
    if (rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    return rc;
}

enum gw_code
dl_openai_render_end(struct dl_render_state *st, struct gw_buf *out)
{
    struct chat_render *r = render_of(st);
    size_t start = out->len;
    enum gw_code rc;

    if (r->stopped || r->failed)
        return GW_OK;
    rc = render_done(r, out);
    if (rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    return rc;
}

/* ---- render: a non-streamed answer for a Chat client ---- */

/* The text of the answer's <kind> blocks, one after another, as one JSON string ("null"
 * when it has none of them; escaping a piece at a time is escaping the whole). */
static enum gw_code
answer_text(const struct dl_answer *a, enum dl_block kind, struct gw_buf *out)
{
    bool any = false;
    size_t i;

    for (i = 0; i < a->n_blocks; i++) {
        if (a->blocks[i].block != kind)
            continue;
        if ((!any && gw_buf_append(out, "\"", 1) != GW_OK) ||
            gw_buf_append_json_inner(
                out, (struct gw_str){a->blocks[i].text.data, a->blocks[i].text.len}) != GW_OK)
            return GW_E_NOMEM;
        any = true;
    }
    return any ? gw_buf_append(out, "\"", 1) : gw_buf_append(out, "null", 4);
}

/* Whether the answer has text of <kind> (a block of it that is not empty). */
static bool
answer_says(const struct dl_answer *a, enum dl_block kind)
{
    size_t i;

    for (i = 0; i < a->n_blocks; i++)
        if (a->blocks[i].block == kind && a->blocks[i].text.len)
            return true;
    return false;
}

static enum gw_code
answer_tool_calls(const struct dl_answer *a, struct gw_buf *out)
{
    bool first = true;
    size_t i;

    for (i = 0; i < a->n_blocks; i++) {
        const struct dl_answer_block *b = &a->blocks[i];
        struct gw_str args = {b->text.data, b->text.len};

        if (b->block != DL_BLOCK_TOOL_CALL)
            continue;
        if (gw_buf_append_cstr(out, first ? ",\"tool_calls\":[" : ",") != GW_OK ||
            gw_buf_append_cstr(out, "{\"id\":") != GW_OK || json_str(out, b->id) != GW_OK ||
            gw_buf_append_cstr(out, ",\"type\":\"function\",\"function\":{\"name\":") != GW_OK ||
            json_str(out, b->name) != GW_OK ||
            gw_buf_append_cstr(out, ",\"arguments\":") != GW_OK ||
            json_str(out, args.len ? args : GW_STR_LIT("{}")) != GW_OK ||
            gw_buf_append_cstr(out, "}}") != GW_OK)
            return GW_E_NOMEM;
        first = false;
    }
    return first || gw_buf_append_cstr(out, "]") == GW_OK ? GW_OK : GW_E_NOMEM;
}

static enum gw_code
answer_body(const struct dl_answer *a, const struct dl_render_ctx *ctx, struct gw_buf *out)
{
    struct gw_str id = a->id.len ? a->id : ctx->id;
    const char *f = finish_name(a->finish);

    if (gw_buf_append_cstr(out, has_prefix(id, "chatcmpl-") ? "{\"id\":\""
                                                            : "{\"id\":\"chatcmpl-") != GW_OK ||
        gw_buf_append_json_inner(out, id) != GW_OK ||
        gw_buf_append_cstr(out, "\",\"object\":\"chat.completion\",\"created\":") != GW_OK ||
        gw_buf_append_u64(out, a->created ? a->created : ctx->created) != GW_OK ||
        gw_buf_append_cstr(out, ",\"model\":") != GW_OK ||
        json_str(out, a->model.len ? a->model : ctx->model) != GW_OK ||
        gw_buf_append_cstr(out, ",\"choices\":[{\"index\":0,\"message\":{\"role\":"
                                "\"assistant\",\"content\":") != GW_OK ||
        answer_text(a, DL_BLOCK_TEXT, out) != GW_OK)
        return GW_E_NOMEM;
    if (answer_says(a, DL_BLOCK_REASONING) &&
        (gw_buf_append_cstr(out, ",\"reasoning_content\":") != GW_OK ||
         answer_text(a, DL_BLOCK_REASONING, out) != GW_OK))
        return GW_E_NOMEM;
    if (answer_tool_calls(a, out) != GW_OK ||
        gw_buf_append_cstr(out, "},\"logprobs\":null,\"finish_reason\":") != GW_OK ||
        (f ? gw_buf_append(out, "\"", 1) != GW_OK || gw_buf_append_cstr(out, f) != GW_OK ||
                 gw_buf_append(out, "\"}]", 3) != GW_OK
           : gw_buf_append_cstr(out, "null}]") != GW_OK))
        return GW_E_NOMEM;
    if (a->usage_seen &&
        (gw_buf_append_cstr(out, ",\"usage\":") != GW_OK || usage_object(&a->usage, out) != GW_OK))
        return GW_E_NOMEM;
    return gw_buf_append_cstr(out, "}");
}

enum gw_code
dl_openai_answer_render(const struct dl_answer *a, const struct dl_render_ctx *ctx,
                        struct gw_buf *out)
{
    size_t start = out->len;
    enum gw_code rc;

    if (a->failed) /* the error body; the caller answers with a->status */
        return error_body(a->status, a->error_type, (struct gw_str){0}, out);
    rc = answer_body(a, ctx, out);
    if (rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    return rc;
}
