/* SPDX-License-Identifier: MIT
 * dialects/anthropic_answer.c - Anthropic Messages answers, both ways (DESIGN.md 11):
 * an upstream's stream events and non-streamed answers parsed into canonical events,
 * and canonical events rendered as the frames and the answer a Messages client (the
 * @anthropic-ai/sdk, Claude Code) expects.
 *
 * Upstream side, decisions:
 * - The event parser is also the inspector of the same-shape relay (its bytes go to
 *   the client untouched): one allocation-free pass of dialects/json_scan.h per event;
 *   ping is not even scanned; a string with escapes is decoded on the stack (on the
 *   heap past 512 bytes) for the length of the emit call.
 * - message_start -> START (id, model) and USAGE (input, cache read and creation);
 *   content_block_start -> BLOCK_START (text, tool_use with id and name, thinking,
 *   redacted_thinking with its data as a signature DELTA; a start holding text or a
 *   non-empty input also gives its DELTA); content_block_delta text_delta,
 *   input_json_delta, thinking_delta, signature_delta -> DELTA (empty ones dropped,
 *   citations ignored); content_block_stop -> BLOCK_STOP; message_delta -> USAGE (the
 *   running totals: a member it lacks keeps its earlier value) then, with a
 *   stop_reason, FINISH (end_turn, stop_sequence, pause_turn: STOP; max_tokens,
 *   model_context_window_exceeded: LENGTH; tool_use: TOOL_CALLS; refusal:
 *   CONTENT_FILTER); message_stop -> FINISH only when no stop_reason came; error ->
 *   ERROR (type, message, the status its type stands for). FINISH is emitted where the
 *   stop_reason is (its stop sequence is a slice of that event's data); after it only
 *   USAGE can follow (an error event then changes nothing: the answer was whole); after
 *   message_stop or error nothing.
 * - Blocks the hub does not model (server_tool_use, web_search_tool_result, ...) are
 *   skipped: canonical indexes count the blocks emitted, so they stay 0.. in order.
 * - An event without a name is named by its data's "type"; unknown events are ignored
 *   (the API may add some). Data that is not the JSON the event needs is
 *   GW_E_UPSTREAM_PROTOCOL; content_block_stop and message_stop need none.
 * - A non-streamed answer gives START, USAGE, per block BLOCK_START, DELTA, BLOCK_STOP,
 *   then FINISH (NONE when stop_reason is null). A tool_use input's JSON text is the
 *   arguments as the body holds it.
 *
 * Client side, decisions:
 * - Frames are "event: <type>\ndata: <json>\n\n" in the order the SDK accumulates:
 *   message_start, then per block content_block_start / _delta / _stop with indexes
 *   0.. in order, then message_delta and message_stop. No ping.
 * - message_start is written with the first event after START that is not USAGE, so
 *   the input usage an upstream reports right after its start is in it. Its id is the
 *   upstream's, else "msg_" + the context's id; its model the one the client asked for.
 * - A delta whose block was never started (or was stopped) starts one; a new block
 *   stops the open one; a redacted block is started once its data (signature) comes.
 * - FINISH is held: message_delta (stop_reason, stop_sequence, the latest usage, so a
 *   USAGE after FINISH counts) and message_stop are written by render_end, when the
 *   upstream's stream ended well. ERROR writes event: error with overloaded_error (the
 *   unavailable frame of DESIGN.md 11; the upstream's words are not shown) and ends
 *   the stream.
 * - The answer: id, type, role, model, content (text; tool_use with the arguments as
 *   its input object, {} when they are not one, e.g. cut by max tokens; thinking with
 *   its signature; redacted_thinking), stop_reason, stop_sequence, usage.
 * Owns:    nothing beyond each call; the states are the caller's.
 * Threads: any; a state belongs to one thread at a time.
 * See:     dialects/anthropic-priv.h, dialects/canon.h,
 *          tests/unit/dialects/test_anthropic_answer.c, tests/fuzz/fuzz_messages.c
 */
#include "dialects/anthropic-priv.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"

/* ---- decoded strings for the length of one emit ---- */

/* The string field <f> decoded ("" when it is NULL or not a string). */
static bool
txt_field(struct dl_json_text *x, const struct dl_json *j, const struct dl_anth_field *f)
{
    return dl_json_text_get(x, j, f && f->kind == DA_STR ? &f->str : NULL);
}

/* ---- upstream side: stream events ---- */

struct ep {
    struct gw_usage usage; /* running totals */
    uint64_t skipped_lo;   /* upstream indexes below 64 of skipped blocks */
    uint32_t n_skipped;    /* skipped blocks so far */
    uint32_t next;         /* the next canonical index */
    int64_t up_open;       /* upstream index of the open block, -1: none */
    uint32_t canon_open;   /* its canonical index */
    uint8_t kind_open;     /* its enum dl_block */
    bool skip_open;        /* it is a block the hub does not model */
    bool finished;         /* FINISH emitted */
    bool done;             /* message_stop or error: nothing more */
};

static_assert(sizeof(struct ep) <= sizeof(struct dl_parse_state), "parse state too small");

enum ev_kind {
    EV_UNNAMED,
    EV_OTHER,
    EV_PING,
    EV_MESSAGE_START,
    EV_BLOCK_START,
    EV_BLOCK_DELTA,
    EV_BLOCK_STOP,
    EV_MESSAGE_DELTA,
    EV_MESSAGE_STOP,
    EV_ERROR,
};

static enum ev_kind
ev_kind_of(struct gw_str name)
{
    static const struct {
        const char *name;
        size_t len;
        enum ev_kind kind;
    } kinds[] = {
        {"content_block_delta", 19, EV_BLOCK_DELTA}, {"ping", 4, EV_PING},
        {"content_block_start", 19, EV_BLOCK_START}, {"content_block_stop", 18, EV_BLOCK_STOP},
        {"message_delta", 13, EV_MESSAGE_DELTA},     {"message_start", 13, EV_MESSAGE_START},
        {"message_stop", 12, EV_MESSAGE_STOP},       {"error", 5, EV_ERROR},
    };
    size_t i;

    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (name.len == kinds[i].len && memcmp(name.ptr, kinds[i].name, name.len) == 0)
            return kinds[i].kind;
    return EV_OTHER;
}

void
dl_anthropic_parse_init(struct dl_parse_state *st)
{
    struct ep *s = (struct ep *)st;

    memset(st, 0, sizeof(*st));
    s->up_open = -1;
}

#define USAGE_FIELDS                                                                               \
    {                                                                                              \
        DL_ANTH_FIELD("input_tokens"), DL_ANTH_FIELD("output_tokens"),                             \
            DL_ANTH_FIELD("cache_read_input_tokens"), DL_ANTH_FIELD("cache_creation_input_tokens") \
    }

/* The usage members <u> present (a count each; a negative or real one reads 0). */
static bool
usage_read(struct dl_json *j, const struct dl_anth_field *u, struct gw_usage *out)
{
    uint64_t *dst[4] = {&out->input_tokens, &out->output_tokens, &out->cache_read_tokens,
                        &out->cache_write_tokens};
    size_t k;

    for (k = 0; k < 4; k++) {
        uint64_t v = 0;

        if (u[k].kind != DA_NUM)
            continue;
        if (!dl_json_num_count(j, &u[k].num, &v))
            return false;
        *dst[k] = v;
    }
    return true;
}

/* The finish of a stop_reason field. */
static enum dl_finish
finish_of(const struct dl_json *j, const struct dl_anth_field *f)
{
    if (dl_anthropic_is(j, f, "max_tokens") ||
        dl_anthropic_is(j, f, "model_context_window_exceeded"))
        return DL_FINISH_LENGTH;
    if (dl_anthropic_is(j, f, "tool_use"))
        return DL_FINISH_TOOL_CALLS;
    if (dl_anthropic_is(j, f, "refusal"))
        return DL_FINISH_CONTENT_FILTER;
    return DL_FINISH_STOP; /* end_turn, stop_sequence, pause_turn, and anything newer */
}

/* The index member, or -1 when absent or not a non-negative integer. */
static int64_t
index_of(const struct dl_json *j, const struct dl_anth_field *f)
{
    int64_t v;

    if (f->kind != DA_NUM || !dl_json_int(j, &f->num, &v) || v < 0)
        return -1;
    return v;
}

/* Emits BLOCK_STOP for the open block (when one the hub models is open). */
static bool
close_open(struct ep *s, struct dl_emitter *e)
{
    struct dl_event ev = {.kind = DL_EV_BLOCK_STOP};
    bool skip = s->skip_open;

    if (s->up_open < 0)
        return true;
    s->up_open = -1;
    if (skip)
        return true;
    ev.index = s->canon_open;
    ev.block = (enum dl_block)s->kind_open;
    return dl_emit(e, &ev);
}

/* The canonical index of upstream block <up> (a delta's; -1: the open one), or -1 for
 * a skipped block. A block that was never started is counted as if the ones before it
 * had been. */
static int64_t
canon_of(const struct ep *s, int64_t up)
{
    uint64_t below;

    if (up < 0)
        up = s->up_open;
    if (up < 0)
        return -1;
    if (up == s->up_open)
        return s->skip_open ? -1 : (int64_t)s->canon_open;
    if (up < 64 && (s->skipped_lo >> up) & 1)
        return -1;
    below = up < 64 ? s->skipped_lo & ((UINT64_C(1) << up) - 1) : s->skipped_lo;
    return up - __builtin_popcountll(below);
}

static enum gw_code
on_message_start(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field u[] = USAGE_FIELDS;
    struct dl_anth_field m[] = {DL_ANTH_FIELD("id"), DL_ANTH_FIELD("model"),
                                DL_ANTH_FIELD("usage")};
    struct dl_anth_field top[] = {DL_ANTH_FIELD("message")};
    struct dl_event ev = {.kind = DL_EV_START};
    struct dl_json_text id, model;

    m[2].sub = u;
    m[2].nsub = 4;
    top[0].sub = m;
    top[0].nsub = 3;
    if (!dl_anthropic_fields(j, top, 1) || !dl_json_end(j))
        return j->err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
    if (top[0].kind != DA_OBJ)
        return GW_E_UPSTREAM_PROTOCOL;
    if (s->finished)
        return GW_OK; /* a start after the finish: the answer is whole */
    if (m[2].kind == DA_OBJ && !usage_read(j, u, &s->usage))
        return GW_E_NOMEM;
    if (!txt_field(&id, j, &m[0]))
        return GW_E_NOMEM;
    if (!txt_field(&model, j, &m[1])) {
        dl_json_text_fini(&id);
        return GW_E_NOMEM;
    }
    ev.id = id.s;
    ev.model = model.s;
    dl_emit(e, &ev);
    dl_json_text_fini(&id);
    dl_json_text_fini(&model);
    if (m[2].kind == DA_OBJ) {
        struct dl_event uv = {.kind = DL_EV_USAGE, .usage = s->usage};

        dl_emit(e, &uv);
    }
    return GW_OK;
}

/* A DELTA of <kind> for canonical block <index>: <text> or <sig> (decoded fields). */
static enum gw_code
emit_delta(struct dl_emitter *e, uint32_t index, enum dl_block kind, const struct dl_json *j,
           const struct dl_anth_field *text, const struct dl_anth_field *sig)
{
    struct dl_event ev = {.kind = DL_EV_DELTA, .index = index, .block = kind};
    struct dl_json_text t = {.heap = NULL}, g = {.heap = NULL};

    if ((!text || text->kind != DA_STR || text->str.dlen == 0) &&
        (!sig || sig->kind != DA_STR || sig->str.dlen == 0))
        return GW_OK;
    if ((text && !txt_field(&t, j, text)) || (sig && !txt_field(&g, j, sig))) {
        dl_json_text_fini(&t);
        return GW_E_NOMEM;
    }
    if (text)
        ev.text = t.s;
    if (sig)
        ev.signature = g.s;
    dl_emit(e, &ev);
    dl_json_text_fini(&t);
    dl_json_text_fini(&g);
    return GW_OK;
}

static enum gw_code
on_block_start(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field b[] = {DL_ANTH_FIELD("type"),     DL_ANTH_FIELD("id"),
                                DL_ANTH_FIELD("name"),     DL_ANTH_FIELD("text"),
                                DL_ANTH_FIELD("thinking"), DL_ANTH_FIELD("signature"),
                                DL_ANTH_FIELD("data"),     DL_ANTH_FIELD("input")};
    struct dl_anth_field top[] = {DL_ANTH_FIELD("index"), DL_ANTH_FIELD("content_block")};
    struct dl_event ev = {.kind = DL_EV_BLOCK_START};
    int64_t up;
    struct dl_json_text id, name;
    enum dl_block kind = DL_BLOCK_TEXT;
    bool modelled = true;

    top[1].sub = b;
    top[1].nsub = 8;
    if (!dl_anthropic_fields(j, top, 2) || !dl_json_end(j))
        return j->err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
    if (top[1].kind != DA_OBJ || b[0].kind != DA_STR)
        return GW_E_UPSTREAM_PROTOCOL;
    if (dl_anthropic_is(j, &b[0], "text")) {
        if (b[3].kind != DA_ABSENT && b[3].kind != DA_STR)
            return GW_E_UPSTREAM_PROTOCOL;
        kind = DL_BLOCK_TEXT;
    } else if (dl_anthropic_is(j, &b[0], "tool_use")) {
        if (b[1].kind != DA_STR || b[2].kind != DA_STR)
            return GW_E_UPSTREAM_PROTOCOL;
        kind = DL_BLOCK_TOOL_CALL;
    } else if (dl_anthropic_is(j, &b[0], "thinking") ||
               dl_anthropic_is(j, &b[0], "redacted_thinking")) {
        kind = DL_BLOCK_REASONING;
        ev.redacted = dl_anthropic_is(j, &b[0], "redacted_thinking");
    } else {
        modelled = false;
    }
    up = index_of(j, &top[0]);
    if (s->finished)
        return GW_OK; /* content after the finish is not part of the answer */
    if (!close_open(s, e))
        return GW_OK;
    if (up < 0)
        up = (int64_t)s->next + s->n_skipped;
    s->up_open = up;
    if (!modelled) {
        /* a block the hub does not model (server tools and their results) */
        s->skip_open = true;
        s->n_skipped++;
        if (up < 64)
            s->skipped_lo |= UINT64_C(1) << up;
        return GW_OK;
    }
    s->skip_open = false;
    s->canon_open = s->next++;
    s->kind_open = (uint8_t)kind;
    ev.index = s->canon_open;
    ev.block = kind;
    if (!txt_field(&id, j, &b[1]))
        return GW_E_NOMEM;
    if (!txt_field(&name, j, &b[2])) {
        dl_json_text_fini(&id);
        return GW_E_NOMEM;
    }
    if (kind == DL_BLOCK_TOOL_CALL) {
        ev.id = id.s;
        ev.name = name.s;
    }
    dl_emit(e, &ev);
    dl_json_text_fini(&id);
    dl_json_text_fini(&name);
    if (e->stopped)
        return GW_OK;
    if (kind == DL_BLOCK_TEXT)
        return emit_delta(e, s->canon_open, kind, j, &b[3], NULL);
    if (kind == DL_BLOCK_REASONING)
        return emit_delta(e, s->canon_open, kind, j, ev.redacted ? NULL : &b[4],
                          ev.redacted ? &b[6] : &b[5]);
    if (b[7].kind == DA_OBJ) {
        struct gw_str in = {j->s + b[7].at, b[7].end - b[7].at};
        size_t k, content = 0;

        for (k = 0; k < in.len; k++)
            if (in.ptr[k] != '{' && in.ptr[k] != '}' && in.ptr[k] != ' ' && in.ptr[k] != '\n' &&
                in.ptr[k] != '\r' && in.ptr[k] != '\t')
                content++;
        if (content) {
            struct dl_event dv = {.kind = DL_EV_DELTA, .index = s->canon_open, .block = kind};

            dv.text = in;
            dl_emit(e, &dv);
        }
    }
    return GW_OK;
}

static enum gw_code
on_block_delta(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field d[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("text"),
                                DL_ANTH_FIELD("partial_json"), DL_ANTH_FIELD("thinking"),
                                DL_ANTH_FIELD("signature")};
    struct dl_anth_field top[] = {DL_ANTH_FIELD("index"), DL_ANTH_FIELD("delta")};
    const struct dl_anth_field *text = NULL, *sig = NULL;
    enum dl_block kind;
    int64_t index;

    top[1].sub = d;
    top[1].nsub = 5;
    if (!dl_anthropic_fields(j, top, 2) || !dl_json_end(j))
        return j->err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
    if (top[1].kind != DA_OBJ || d[0].kind != DA_STR)
        return GW_E_UPSTREAM_PROTOCOL;
    if (dl_anthropic_is(j, &d[0], "text_delta")) {
        kind = DL_BLOCK_TEXT;
        text = &d[1];
    } else if (dl_anthropic_is(j, &d[0], "input_json_delta")) {
        kind = DL_BLOCK_TOOL_CALL;
        text = &d[2];
    } else if (dl_anthropic_is(j, &d[0], "thinking_delta")) {
        kind = DL_BLOCK_REASONING;
        text = &d[3];
    } else if (dl_anthropic_is(j, &d[0], "signature_delta")) {
        kind = DL_BLOCK_REASONING;
        sig = &d[4];
    } else {
        return GW_OK; /* citations_delta and anything newer */
    }
    if ((text && text->kind != DA_STR) || (sig && sig->kind != DA_STR))
        return GW_E_UPSTREAM_PROTOCOL;
    if (s->finished)
        return GW_OK;
    index = canon_of(s, index_of(j, &top[0]));
    if (index < 0)
        return GW_OK; /* a skipped block's delta (a server tool's input) */
    return emit_delta(e, (uint32_t)index, kind, j, text, sig);
}

static enum gw_code
on_block_stop(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field top[] = {DL_ANTH_FIELD("index")};
    int64_t up = -1;

    /* the data does not matter beyond its index */
    if (dl_anthropic_fields(j, top, 1) && dl_json_end(j))
        up = index_of(j, &top[0]);
    if (s->up_open < 0 || (up >= 0 && up != s->up_open))
        return GW_OK;
    close_open(s, e);
    return GW_OK;
}

static enum gw_code
on_message_delta(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field u[] = USAGE_FIELDS;
    struct dl_anth_field d[] = {DL_ANTH_FIELD("stop_reason"), DL_ANTH_FIELD("stop_sequence")};
    struct dl_anth_field top[] = {DL_ANTH_FIELD("delta"), DL_ANTH_FIELD("usage")};
    size_t k;

    top[0].sub = d;
    top[0].nsub = 2;
    top[1].sub = u;
    top[1].nsub = 4;
    if (!dl_anthropic_fields(j, top, 2) || !dl_json_end(j))
        return j->err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
    for (k = 0; k < 2; k++)
        if (top[k].kind != DA_ABSENT && top[k].kind != DA_NULL && top[k].kind != DA_OBJ)
            return GW_E_UPSTREAM_PROTOCOL;
    if (top[1].kind == DA_OBJ) {
        struct dl_event ev = {.kind = DL_EV_USAGE};

        if (!usage_read(j, u, &s->usage))
            return GW_E_NOMEM;
        ev.usage = s->usage;
        if (!dl_emit(e, &ev))
            return GW_OK;
    }
    if (top[0].kind == DA_OBJ && d[0].kind == DA_STR && !s->finished) {
        struct dl_event ev = {.kind = DL_EV_FINISH};
        struct dl_json_text seq;

        if (!close_open(s, e))
            return GW_OK;
        if (!txt_field(&seq, j, &d[1]))
            return GW_E_NOMEM;
        ev.finish = finish_of(j, &d[0]);
        ev.stop_sequence = seq.s;
        s->finished = true;
        dl_emit(e, &ev);
        dl_json_text_fini(&seq);
    }
    return GW_OK;
}

static enum gw_code
on_message_stop(struct ep *s, struct dl_emitter *e)
{
    s->done = true;
    if (!s->finished) {
        struct dl_event ev = {.kind = DL_EV_FINISH, .finish = DL_FINISH_STOP};

        s->finished = true;
        if (close_open(s, e))
            dl_emit(e, &ev);
    }
    return GW_OK;
}

static enum gw_code
on_error(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field x[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("message")};
    struct dl_anth_field top[] = {DL_ANTH_FIELD("error")};
    struct dl_event ev = {.kind = DL_EV_ERROR};
    struct dl_json_text type, msg;

    top[0].sub = x;
    top[0].nsub = 2;
    if (!dl_anthropic_fields(j, top, 1) || !dl_json_end(j))
        return j->err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
    if (top[0].kind != DA_OBJ)
        return GW_E_UPSTREAM_PROTOCOL;
    if (!txt_field(&type, j, &x[0]))
        return GW_E_NOMEM;
    if (!txt_field(&msg, j, &x[1])) {
        dl_json_text_fini(&type);
        return GW_E_NOMEM;
    }
    s->done = true;
    if (s->finished) {
        /* the answer was whole: an error after its finish changes nothing */
        dl_json_text_fini(&type);
        dl_json_text_fini(&msg);
        return GW_OK;
    }
    ev.error_type = type.s.len ? type.s : GW_STR_LIT("api_error");
    ev.message = msg.s;
    ev.status = dl_anthropic_error_status(ev.error_type);
    dl_emit(e, &ev);
    dl_json_text_fini(&type);
    dl_json_text_fini(&msg);
    return GW_OK;
}

/* The kind of an unnamed event, from its data's "type". */
static enum gw_code
unnamed_kind(struct gw_str data, enum ev_kind *kind)
{
    struct dl_anth_field top[] = {DL_ANTH_FIELD("type")};
    struct dl_json j;
    struct dl_json_text t;

    dl_json_init(&j, data.ptr, data.len);
    if (!dl_anthropic_fields(&j, top, 1) || !dl_json_end(&j))
        return j.err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
    if (!txt_field(&t, &j, &top[0]))
        return GW_E_NOMEM;
    *kind = top[0].kind == DA_STR ? ev_kind_of(t.s) : EV_OTHER;
    dl_json_text_fini(&t);
    return GW_OK;
}

enum gw_code
dl_anthropic_event_parse(struct dl_parse_state *st, struct gw_str event, struct gw_str data,
                         dl_event_fn fn, void *arg)
{
    struct ep *s = (struct ep *)st;
    struct dl_emitter e = {fn, arg, false};
    enum ev_kind kind = event.len ? ev_kind_of(event) : EV_UNNAMED;
    struct dl_json j;

    if (s->done || kind == EV_PING || kind == EV_OTHER)
        return GW_OK;
    if (kind == EV_MESSAGE_STOP)
        return on_message_stop(s, &e);
    if (kind == EV_UNNAMED) {
        enum gw_code rc = unnamed_kind(data, &kind);

        if (rc != GW_OK)
            return rc;
    }
    dl_json_init(&j, data.ptr, data.len);
    switch (kind) {
    case EV_MESSAGE_START: return on_message_start(s, &j, &e);
    case EV_BLOCK_START: return on_block_start(s, &j, &e);
    case EV_BLOCK_DELTA: return on_block_delta(s, &j, &e);
    case EV_BLOCK_STOP: return on_block_stop(s, &j, &e);
    case EV_MESSAGE_DELTA: return on_message_delta(s, &j, &e);
    case EV_MESSAGE_STOP: return on_message_stop(s, &e);
    case EV_ERROR: return on_error(s, &j, &e);
    case EV_UNNAMED:
    case EV_OTHER:
    case EV_PING: break;
    }
    return GW_OK;
}

/* ---- upstream side: a non-streamed answer ---- */

/* The members of a content block the answer's events are made of. */
enum { B_TYPE, B_ID, B_NAME, B_TEXT, B_THINKING, B_SIGNATURE, B_DATA, B_INPUT, B__N };

/* Reads and checks the content block at the cursor of <j> into <b> (B__N fields);
 * GW_OK, GW_E_UPSTREAM_PROTOCOL when it is not a block, or GW_E_NOMEM. */
static enum gw_code
block_read(struct dl_json *j, struct dl_anth_field *b)
{
    static const struct dl_anth_field init[B__N] = {
        DL_ANTH_FIELD("type"), DL_ANTH_FIELD("id"),       DL_ANTH_FIELD("name"),
        DL_ANTH_FIELD("text"), DL_ANTH_FIELD("thinking"), DL_ANTH_FIELD("signature"),
        DL_ANTH_FIELD("data"), DL_ANTH_FIELD("input")};

    memcpy(b, init, sizeof(init));
    if (dl_json_peek(j) != '{' || !dl_anthropic_fields(j, b, B__N) || b[B_TYPE].kind != DA_STR ||
        (dl_anthropic_is(j, &b[B_TYPE], "text") && b[B_TEXT].kind != DA_STR) ||
        (dl_anthropic_is(j, &b[B_TYPE], "tool_use") &&
         (b[B_ID].kind != DA_STR || b[B_NAME].kind != DA_STR || b[B_INPUT].kind == DA_ABSENT)))
        return j->err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
    return GW_OK;
}

/* Emits the events of content block <b> (read by block_read from <j>'s document). */
static enum gw_code
answer_block(const struct dl_json *j, const struct dl_anth_field *b, uint32_t *index,
             struct dl_emitter *e)
{
    struct dl_event ev = {.kind = DL_EV_BLOCK_START};
    struct dl_json_text id, name;
    enum gw_code rc = GW_OK;

    if (dl_anthropic_is(j, &b[B_TYPE], "text")) {
        ev.block = DL_BLOCK_TEXT;
    } else if (dl_anthropic_is(j, &b[B_TYPE], "tool_use")) {
        ev.block = DL_BLOCK_TOOL_CALL;
    } else if (dl_anthropic_is(j, &b[B_TYPE], "thinking")) {
        ev.block = DL_BLOCK_REASONING;
    } else if (dl_anthropic_is(j, &b[B_TYPE], "redacted_thinking")) {
        ev.block = DL_BLOCK_REASONING;
        ev.redacted = true;
    } else {
        return GW_OK; /* server tool blocks: not part of the canonical answer */
    }
    ev.index = (*index)++;
    if (!txt_field(&id, j, &b[B_ID]))
        return GW_E_NOMEM;
    if (!txt_field(&name, j, &b[B_NAME])) {
        dl_json_text_fini(&id);
        return GW_E_NOMEM;
    }
    if (ev.block == DL_BLOCK_TOOL_CALL) {
        ev.id = id.s;
        ev.name = name.s;
    }
    dl_emit(e, &ev);
    dl_json_text_fini(&id);
    dl_json_text_fini(&name);
    if (e->stopped)
        return GW_OK;
    if (ev.block == DL_BLOCK_TEXT)
        rc = emit_delta(e, ev.index, ev.block, j, &b[B_TEXT], NULL);
    else if (ev.block == DL_BLOCK_REASONING)
        rc = emit_delta(e, ev.index, ev.block, j, ev.redacted ? NULL : &b[B_THINKING],
                        ev.redacted ? &b[B_DATA] : &b[B_SIGNATURE]);
    else {
        struct dl_event dv = {.kind = DL_EV_DELTA, .index = ev.index, .block = ev.block};

        dv.text = (struct gw_str){j->s + b[B_INPUT].at, b[B_INPUT].end - b[B_INPUT].at};
        dl_emit(e, &dv);
    }
    if (rc == GW_OK && !e->stopped) {
        struct dl_event sv = {.kind = DL_EV_BLOCK_STOP, .index = ev.index, .block = ev.block};

        dl_emit(e, &sv);
    }
    return rc;
}

/* Blocks of an answer read once, for both the check and the events: most answers have
 * one to three. Those after them are read again when their events are made. */
#define KEPT_BLOCKS 4

enum gw_code
dl_anthropic_answer_parse(const char *body, size_t len, dl_event_fn fn, void *arg)
{
    struct dl_anth_field u[] = USAGE_FIELDS;
    struct dl_anth_field top[] = {DL_ANTH_FIELD("type"),        DL_ANTH_FIELD("id"),
                                  DL_ANTH_FIELD("model"),       DL_ANTH_FIELD("content"),
                                  DL_ANTH_FIELD("stop_reason"), DL_ANTH_FIELD("stop_sequence"),
                                  DL_ANTH_FIELD("usage")};
    struct dl_anth_field kept[KEPT_BLOCKS][B__N], more[B__N];
    struct dl_emitter e = {fn, arg, false};
    struct dl_event ev = {.kind = DL_EV_START};
    struct gw_usage usage = {0};
    struct dl_json j, cj;
    struct dl_json_text id, model;
    uint32_t index = 0;
    size_t n = 0, k, after_kept = 0;
    bool first = true;
    int r;

    top[6].sub = u;
    top[6].nsub = 4;
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !dl_anthropic_fields(&j, top, 7) || !dl_json_end(&j))
        return j.err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
    if (top[3].kind != DA_ARR ||
        (top[0].kind != DA_ABSENT && !dl_anthropic_is(&j, &top[0], "message")))
        return GW_E_UPSTREAM_PROTOCOL;
    if (top[6].kind == DA_OBJ && !usage_read(&j, u, &usage))
        return GW_E_NOMEM;
    /* every block is checked before the first event: a malformed answer emits nothing */
    cj = dl_anthropic_at(&j, top[3].at);
    if (!dl_json_arr_enter(&cj))
        return GW_E_UPSTREAM_PROTOCOL;
    while ((r = dl_json_arr_next(&cj, &first)) == 1) {
        enum gw_code rc = block_read(&cj, n < KEPT_BLOCKS ? kept[n] : more);

        if (rc != GW_OK)
            return rc;
        if (++n == KEPT_BLOCKS)
            after_kept = cj.i;
    }
    if (r != 0)
        return GW_E_UPSTREAM_PROTOCOL;
    if (!txt_field(&id, &j, &top[1]))
        return GW_E_NOMEM;
    if (!txt_field(&model, &j, &top[2])) {
        dl_json_text_fini(&id);
        return GW_E_NOMEM;
    }
    ev.id = id.s;
    ev.model = model.s;
    dl_emit(&e, &ev);
    dl_json_text_fini(&id);
    dl_json_text_fini(&model);
    if (top[6].kind == DA_OBJ) {
        struct dl_event uv = {.kind = DL_EV_USAGE, .usage = usage};

        dl_emit(&e, &uv);
    }
    for (k = 0; k < n && k < KEPT_BLOCKS && !e.stopped; k++) {
        enum gw_code rc = answer_block(&j, kept[k], &index, &e);

        if (rc != GW_OK)
            return rc;
    }
    if (n > KEPT_BLOCKS) {
        /* in the array again, after the kept blocks: the rest read again */
        cj = dl_anthropic_at(&j, top[3].at);
        (void)dl_json_arr_enter(&cj);
        cj.i = after_kept;
        first = false;
        while (!e.stopped && dl_json_arr_next(&cj, &first) == 1) {
            enum gw_code rc = block_read(&cj, more);

            if (rc == GW_OK)
                rc = answer_block(&cj, more, &index, &e);
            if (rc != GW_OK)
                return rc;
        }
    }
    if (!e.stopped) {
        struct dl_event fv = {.kind = DL_EV_FINISH};
        struct dl_json_text seq;

        if (!txt_field(&seq, &j, &top[5]))
            return GW_E_NOMEM;
        fv.finish = top[4].kind == DA_STR ? finish_of(&j, &top[4]) : DL_FINISH_NONE;
        fv.stop_sequence = seq.s;
        dl_emit(&e, &fv);
        dl_json_text_fini(&seq);
    }
    return GW_OK;
}

bool
dl_anthropic_answer_usage(const char *body, size_t len, struct gw_usage *usage)
{
    struct dl_anth_field u[] = USAGE_FIELDS;
    struct dl_anth_field top[] = {DL_ANTH_FIELD("usage")};
    struct dl_json j;

    memset(usage, 0, sizeof(*usage));
    top[0].sub = u;
    top[0].nsub = 4;
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !dl_anthropic_fields(&j, top, 1) || !dl_json_end(&j) ||
        top[0].kind != DA_OBJ)
        return false;
    if (!usage_read(&j, u, usage)) {
        memset(usage, 0, sizeof(*usage));
        return false;
    }
    return true;
}

/* ---- client side: frames ---- */

struct er {
    struct dl_render_ctx ctx;
    struct gw_usage usage;       /* the latest USAGE */
    struct gw_str id, model;     /* START's (arena copies) */
    struct gw_str stop_sequence; /* the held FINISH's (arena copy) */
    uint32_t open_canon;         /* canonical index of the open block */
    uint32_t open_out;           /* its Messages index */
    uint32_t next_out;           /* the next Messages index */
    uint8_t open_kind;           /* enum dl_block */
    uint8_t finish;              /* enum dl_finish of the held FINISH */
    bool start_pending;          /* START seen, message_start not written */
    bool started;                /* message_start written */
    bool open;                   /* a block is open */
    bool redacted_pending;       /* the open block is redacted thinking waiting for its data */
    bool finish_held;            /* FINISH seen */
    bool ended;                  /* message_stop or error written */
};

static_assert(sizeof(struct er) <= sizeof(struct dl_render_state), "render state too small");

void
dl_anthropic_render_init(struct dl_render_state *st, const struct dl_render_ctx *ctx)
{
    struct er *s = (struct er *)st;

    memset(st, 0, sizeof(*st));
    s->ctx = *ctx;
}

static enum gw_code
frame_open(struct gw_buf *out, const char *event)
{
    if (gw_buf_append_cstr(out, "event: ") != GW_OK || gw_buf_append_cstr(out, event) != GW_OK ||
        gw_buf_append_cstr(out, "\ndata: {\"type\":\"") != GW_OK ||
        gw_buf_append_cstr(out, event) != GW_OK || gw_buf_append_cstr(out, "\"") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
usage_json(struct gw_buf *out, const struct gw_usage *u)
{
    if (gw_buf_append_cstr(out, "{\"input_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, u->input_tokens) != GW_OK ||
        gw_buf_append_cstr(out, ",\"cache_creation_input_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, u->cache_write_tokens) != GW_OK ||
        gw_buf_append_cstr(out, ",\"cache_read_input_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, u->cache_read_tokens) != GW_OK ||
        gw_buf_append_cstr(out, ",\"output_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, u->output_tokens) != GW_OK || gw_buf_append_cstr(out, "}") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

/* The answer's id: the upstream's, else "msg_" + the context's. */
static enum gw_code
id_json(struct gw_buf *out, struct gw_str upstream, struct gw_str fallback)
{
    struct gw_buf b = {0};
    enum gw_code rc;

    if (upstream.len)
        return gw_buf_append_json_str(out, upstream);
    if (gw_buf_append_cstr(&b, "msg_") != GW_OK ||
        gw_buf_append_str(&b, fallback.len ? fallback : GW_STR_LIT("gw")) != GW_OK) {
        gw_buf_fini(&b);
        return GW_E_NOMEM;
    }
    rc = gw_buf_append_json_str(out, (struct gw_str){b.data, b.len});
    gw_buf_fini(&b);
    return rc;
}

static struct gw_str
model_of(const struct er *s, struct gw_str upstream)
{
    return s->ctx.model.len ? s->ctx.model : upstream;
}

static enum gw_code
write_start(struct er *s, struct gw_str id, struct gw_str model, struct gw_buf *out)
{
    if (frame_open(out, "message_start") != GW_OK ||
        gw_buf_append_cstr(out, ",\"message\":{\"id\":") != GW_OK ||
        id_json(out, id, s->ctx.id) != GW_OK ||
        gw_buf_append_cstr(out, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":") !=
            GW_OK ||
        gw_buf_append_json_str(out, model_of(s, model)) != GW_OK ||
        gw_buf_append_cstr(out, ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"
                                "\"usage\":") != GW_OK ||
        usage_json(out, &s->usage) != GW_OK || gw_buf_append_cstr(out, "}}\n\n") != GW_OK)
        return GW_E_NOMEM;
    s->started = true;
    s->start_pending = false;
    return GW_OK;
}

/* message_start, when it is still to be written. */
static enum gw_code
ensure_started(struct er *s, struct gw_buf *out)
{
    if (s->started)
        return GW_OK;
    return write_start(s, s->id, s->model, out);
}

static enum gw_code
write_block_stop(struct er *s, struct gw_buf *out)
{
    if (frame_open(out, "content_block_stop") != GW_OK ||
        gw_buf_append_cstr(out, ",\"index\":") != GW_OK ||
        gw_buf_append_u64(out, s->open_out) != GW_OK || gw_buf_append_cstr(out, "}\n\n") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
write_block_start_open(struct er *s, struct gw_buf *out)
{
    if (frame_open(out, "content_block_start") != GW_OK ||
        gw_buf_append_cstr(out, ",\"index\":") != GW_OK ||
        gw_buf_append_u64(out, s->open_out) != GW_OK ||
        gw_buf_append_cstr(out, ",\"content_block\":") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
write_redacted_start(struct er *s, struct gw_str data, struct gw_buf *out)
{
    if (write_block_start_open(s, out) != GW_OK ||
        gw_buf_append_cstr(out, "{\"type\":\"redacted_thinking\",\"data\":") != GW_OK ||
        dl_sig_append_json(out, DL_SHAPE_MESSAGES, s->ctx.upstream, data) != GW_OK ||
        gw_buf_append_cstr(out, "}}\n\n") != GW_OK)
        return GW_E_NOMEM;
    s->redacted_pending = false;
    return GW_OK;
}

/* content_block_stop of the open block, if any. */
static enum gw_code
close_block(struct er *s, struct gw_buf *out)
{
    if (!s->open)
        return GW_OK;
    if (s->redacted_pending && write_redacted_start(s, (struct gw_str){"", 0}, out) != GW_OK)
        return GW_E_NOMEM;
    s->open = false;
    return write_block_stop(s, out);
}

/* Opens Messages block for canonical block <index> of <kind> (tool call: <id>, <name>;
 * reasoning: <redacted>). */
static enum gw_code
open_block(struct er *s, uint32_t index, enum dl_block kind, struct gw_str id, struct gw_str name,
           bool redacted, struct gw_buf *out)
{
    char gen[40];
    enum gw_code rc;

    if (close_block(s, out) != GW_OK)
        return GW_E_NOMEM;
    s->open = true;
    s->open_canon = index;
    s->open_kind = (uint8_t)kind;
    s->open_out = s->next_out++;
    if (kind == DL_BLOCK_REASONING && redacted) {
        s->redacted_pending = true;
        return GW_OK;
    }
    if (write_block_start_open(s, out) != GW_OK)
        return GW_E_NOMEM;
    switch (kind) {
    case DL_BLOCK_TEXT: rc = gw_buf_append_cstr(out, "{\"type\":\"text\",\"text\":\"\"}"); break;
    case DL_BLOCK_REASONING:
        rc =
            gw_buf_append_cstr(out, "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}");
        break;
    case DL_BLOCK_TOOL_CALL:
    default:
        if (id.len == 0) {
            /* a call without an id (never from a shape that gives them): a stable one */
            size_t n = (size_t)snprintf(gen, sizeof(gen), "toolu_gw_%u", (unsigned)index);

            id = (struct gw_str){gen, n};
        }
        rc = gw_buf_append_cstr(out, "{\"type\":\"tool_use\",\"id\":");
        if (rc == GW_OK)
            rc = gw_buf_append_json_str(out, id);
        if (rc == GW_OK)
            rc = gw_buf_append_cstr(out, ",\"name\":");
        if (rc == GW_OK)
            rc = gw_buf_append_json_str(out, name);
        if (rc == GW_OK)
            rc = gw_buf_append_cstr(out, ",\"input\":{}}");
        break;
    }
    if (rc != GW_OK || gw_buf_append_cstr(out, "}\n\n") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
write_delta(struct er *s, const char *type, const char *key, struct gw_str v, struct gw_buf *out)
{
    if (frame_open(out, "content_block_delta") != GW_OK ||
        gw_buf_append_cstr(out, ",\"index\":") != GW_OK ||
        gw_buf_append_u64(out, s->open_out) != GW_OK ||
        gw_buf_append_cstr(out, ",\"delta\":{\"type\":\"") != GW_OK ||
        gw_buf_append_cstr(out, type) != GW_OK || gw_buf_append_cstr(out, "\",\"") != GW_OK ||
        gw_buf_append_cstr(out, key) != GW_OK || gw_buf_append_cstr(out, "\":") != GW_OK ||
        gw_buf_append_json_str(out, v) != GW_OK || gw_buf_append_cstr(out, "}}\n\n") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

/* A signature made by an upstream of another shape goes tagged (dl_sig_append_json). */
static enum gw_code
write_signature_delta(struct er *s, struct gw_str sig, struct gw_buf *out)
{
    if (frame_open(out, "content_block_delta") != GW_OK ||
        gw_buf_append_cstr(out, ",\"index\":") != GW_OK ||
        gw_buf_append_u64(out, s->open_out) != GW_OK ||
        gw_buf_append_cstr(out, ",\"delta\":{\"type\":\"signature_delta\",\"signature\":") !=
            GW_OK ||
        dl_sig_append_json(out, DL_SHAPE_MESSAGES, s->ctx.upstream, sig) != GW_OK ||
        gw_buf_append_cstr(out, "}}\n\n") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
on_delta(struct er *s, const struct dl_event *ev, struct gw_buf *out)
{
    if (ev->text.len == 0 && ev->signature.len == 0)
        return GW_OK;
    if (!s->open || s->open_canon != ev->index || s->open_kind != ev->block) {
        /* a delta of a block never started here (or stopped): start one */
        if (open_block(s, ev->index, ev->block, (struct gw_str){"", 0}, (struct gw_str){"", 0},
                       false, out) != GW_OK)
            return GW_E_NOMEM;
    }
    if (s->redacted_pending)
        return ev->signature.len ? write_redacted_start(s, ev->signature, out) : GW_OK;
    switch (ev->block) {
    case DL_BLOCK_TEXT:
        return ev->text.len ? write_delta(s, "text_delta", "text", ev->text, out) : GW_OK;
    case DL_BLOCK_TOOL_CALL:
        return ev->text.len ? write_delta(s, "input_json_delta", "partial_json", ev->text, out)
                            : GW_OK;
    case DL_BLOCK_REASONING:
        if (ev->text.len && write_delta(s, "thinking_delta", "thinking", ev->text, out) != GW_OK)
            return GW_E_NOMEM;
        if (ev->signature.len && write_signature_delta(s, ev->signature, out) != GW_OK)
            return GW_E_NOMEM;
        return GW_OK;
    }
    return GW_OK;
}

/* A copy of <v> in the context's arena ("" without one). */
static struct gw_str
keep(struct er *s, struct gw_str v, bool *nomem)
{
    struct gw_str c;

    if (v.len == 0 || !s->ctx.arena)
        return (struct gw_str){"", 0};
    c = gw_arena_str(s->ctx.arena, v);
    if (!c.ptr) {
        *nomem = true;
        return (struct gw_str){"", 0};
    }
    return c;
}

static enum gw_code
unavailable(struct er *s, struct gw_buf *out)
{
    s->ended = true;
    return dl_anthropic_error_frame(GW_E_UPSTREAM_FAILED,
                                    GW_STR_LIT("the upstream failed during the answer"), out);
}

static enum gw_code
render_one(struct er *s, const struct dl_event *ev, struct gw_buf *out)
{
    bool nomem = false;

    if (s->ended)
        return GW_OK;
    switch (ev->kind) {
    case DL_EV_START:
        if (s->started || s->start_pending)
            return GW_OK;
        if (!s->ctx.arena)
            return write_start(s, ev->id, ev->model, out);
        s->id = keep(s, ev->id, &nomem);
        s->model = keep(s, ev->model, &nomem);
        s->start_pending = true;
        return nomem ? GW_E_NOMEM : GW_OK;
    case DL_EV_USAGE: s->usage = ev->usage; return GW_OK;
    case DL_EV_ERROR: return unavailable(s, out);
    case DL_EV_BLOCK_START:
    case DL_EV_DELTA:
    case DL_EV_BLOCK_STOP:
    case DL_EV_FINISH: break;
    }
    if (ensure_started(s, out) != GW_OK)
        return GW_E_NOMEM;
    if (s->finish_held)
        return GW_OK; /* content after the finish is not part of the answer */
    switch (ev->kind) {
    case DL_EV_BLOCK_START:
        return open_block(s, ev->index, ev->block, ev->id, ev->name, ev->redacted, out);
    case DL_EV_DELTA: return on_delta(s, ev, out);
    case DL_EV_BLOCK_STOP:
        return s->open && s->open_canon == ev->index ? close_block(s, out) : GW_OK;
    case DL_EV_FINISH:
        if (close_block(s, out) != GW_OK)
            return GW_E_NOMEM;
        s->finish_held = true;
        s->finish = (uint8_t)ev->finish;
        s->stop_sequence = keep(s, ev->stop_sequence, &nomem);
        return nomem ? GW_E_NOMEM : GW_OK;
    case DL_EV_START:
    case DL_EV_USAGE:
    case DL_EV_ERROR: break;
    }
    return GW_OK;
}

enum gw_code
dl_anthropic_event_render(struct dl_render_state *st, const struct dl_event *ev, struct gw_buf *out)
{
    struct er *s = (struct er *)st;
    size_t start = out->len;
    enum gw_code rc = render_one(s, ev, out);

    if (rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    return rc;
}

/* The stop_reason of a finish (a stop sequence says which STOP it was). */
static const char *
stop_reason_of(enum dl_finish f, struct gw_str stop_sequence)
{
    switch (f) {
    case DL_FINISH_LENGTH: return "max_tokens";
    case DL_FINISH_TOOL_CALLS: return "tool_use";
    case DL_FINISH_CONTENT_FILTER: return "refusal";
    case DL_FINISH_STOP: return stop_sequence.len ? "stop_sequence" : "end_turn";
    case DL_FINISH_NONE:
    case DL_FINISH_ERROR: break;
    }
    return "end_turn";
}

static enum gw_code
stop_json(struct gw_buf *out, enum dl_finish f, struct gw_str seq)
{
    if (gw_buf_append_cstr(out, "\"stop_reason\":\"") != GW_OK ||
        gw_buf_append_cstr(out, stop_reason_of(f, seq)) != GW_OK ||
        gw_buf_append_cstr(out, "\",\"stop_sequence\":") != GW_OK ||
        (seq.len ? gw_buf_append_json_str(out, seq) : gw_buf_append_cstr(out, "null")) != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

enum gw_code
dl_anthropic_render_end(struct dl_render_state *st, struct gw_buf *out)
{
    struct er *s = (struct er *)st;
    size_t start = out->len;

    if (s->ended)
        return GW_OK;
    if (ensure_started(s, out) != GW_OK || close_block(s, out) != GW_OK ||
        frame_open(out, "message_delta") != GW_OK ||
        gw_buf_append_cstr(out, ",\"delta\":{") != GW_OK ||
        stop_json(out, s->finish_held ? (enum dl_finish)s->finish : DL_FINISH_NONE,
                  s->stop_sequence) != GW_OK ||
        gw_buf_append_cstr(out, "},\"usage\":") != GW_OK || usage_json(out, &s->usage) != GW_OK ||
        gw_buf_append_cstr(out, "}\n\n") != GW_OK || frame_open(out, "message_stop") != GW_OK ||
        gw_buf_append_cstr(out, "}\n\n") != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
        return GW_E_NOMEM;
    }
    s->ended = true;
    return GW_OK;
}

/* ---- client side: the answer ---- */

static enum gw_code
answer_block_json(struct gw_buf *out, const struct dl_answer_block *b, size_t index,
                  enum dl_shape upstream)
{
    struct gw_str text = {b->text.len ? b->text.data : "", b->text.len};
    struct gw_str sig = {b->signature.len ? b->signature.data : "", b->signature.len};
    struct gw_str input;
    char gen[40];

    switch (b->block) {
    case DL_BLOCK_TEXT:
        if (gw_buf_append_cstr(out, "{\"type\":\"text\",\"text\":") != GW_OK ||
            gw_buf_append_json_str(out, text) != GW_OK)
            return GW_E_NOMEM;
        break;
    case DL_BLOCK_TOOL_CALL: {
        struct gw_str id = b->id;

        if (id.len == 0) {
            size_t n = (size_t)snprintf(gen, sizeof(gen), "toolu_gw_%zu", index);

            id = (struct gw_str){gen, n};
        }
        if (!dl_json_is_object(text, &input))
            input = GW_STR_LIT("{}"); /* not an object (cut by max tokens?): none */
        if (gw_buf_append_cstr(out, "{\"type\":\"tool_use\",\"id\":") != GW_OK ||
            gw_buf_append_json_str(out, id) != GW_OK ||
            gw_buf_append_cstr(out, ",\"name\":") != GW_OK ||
            gw_buf_append_json_str(out, b->name) != GW_OK ||
            gw_buf_append_cstr(out, ",\"input\":") != GW_OK ||
            gw_buf_append_str(out, input) != GW_OK)
            return GW_E_NOMEM;
        break;
    }
    case DL_BLOCK_REASONING:
        if (b->redacted) {
            if (gw_buf_append_cstr(out, "{\"type\":\"redacted_thinking\",\"data\":") != GW_OK ||
                dl_sig_append_json(out, DL_SHAPE_MESSAGES, upstream, sig) != GW_OK)
                return GW_E_NOMEM;
            break;
        }
        if (gw_buf_append_cstr(out, "{\"type\":\"thinking\",\"thinking\":") != GW_OK ||
            gw_buf_append_json_str(out, text) != GW_OK ||
            gw_buf_append_cstr(out, ",\"signature\":") != GW_OK ||
            dl_sig_append_json(out, DL_SHAPE_MESSAGES, upstream, sig) != GW_OK)
            return GW_E_NOMEM;
        break;
    }
    return gw_buf_append_cstr(out, "}");
}

/* Whether block <b> is said in the answer (empty text and reasoning are not). */
static bool
answer_block_says(const struct dl_answer_block *b)
{
    if (b->block == DL_BLOCK_TOOL_CALL)
        return true;
    return b->text.len > 0 || b->signature.len > 0;
}

enum gw_code
dl_anthropic_answer_render(const struct dl_answer *a, const struct dl_render_ctx *ctx,
                           struct gw_buf *out)
{
    size_t start = out->len, k;
    bool first = true;

    if (gw_buf_append_cstr(out, "{\"id\":") != GW_OK || id_json(out, a->id, ctx->id) != GW_OK ||
        gw_buf_append_cstr(out, ",\"type\":\"message\",\"role\":\"assistant\",\"model\":") !=
            GW_OK ||
        gw_buf_append_json_str(out, ctx->model.len ? ctx->model : a->model) != GW_OK ||
        gw_buf_append_cstr(out, ",\"content\":[") != GW_OK)
        goto nomem;
    for (k = 0; k < a->n_blocks; k++) {
        if (!answer_block_says(&a->blocks[k]))
            continue;
        if ((!first && gw_buf_append_cstr(out, ",") != GW_OK) ||
            answer_block_json(out, &a->blocks[k], k, ctx->upstream) != GW_OK)
            goto nomem;
        first = false;
    }
    if (gw_buf_append_cstr(out, "],") != GW_OK || stop_json(out, a->finish, a->stop_sequence) ||
        gw_buf_append_cstr(out, ",\"usage\":") != GW_OK || usage_json(out, &a->usage) != GW_OK ||
        gw_buf_append_cstr(out, "}") != GW_OK)
        goto nomem;
    return GW_OK;
nomem:
    out->len = start;
    if (out->data)
        out->data[start] = '\0';
    return GW_E_NOMEM;
}
