/* SPDX-License-Identifier: MIT
 * dialects/bedrock_answer.c - a Bedrock upstream's answers as canonical events
 * (DESIGN.md 11, issue 15): the events of ConverseStream (each one eventstream message,
 * its name and JSON payload as dl_bedrock_es_event gives them: no framing here) and a
 * whole Converse answer, parsed into the same events; and the usage of an answer.
 *
 * Decisions:
 * - One allocation-free pass of dialects/json_scan.h per event (the field collector of
 *   dialects/anthropic-priv.h). A text with escapes (a tool call's input fragment always
 *   has some) is decoded on the stack in pieces of at most DELTA_PIECE bytes, each its
 *   own DELTA, split between characters; ids, names and messages are decoded on the
 *   stack, on the heap past 512 bytes, and so is a signature (one DELTA: a Messages
 *   client takes a signature_delta whole; Bedrock's are base64, without escapes, so a
 *   slice of the payload). Unknown members are skipped
 *   (Bedrock pads every payload with a "p" member of random length), unknown events
 *   ignored (AWS adds some). A payload that is not the JSON its event needs is
 *   GW_E_UPSTREAM_PROTOCOL and emits nothing.
 * - messageStart -> START (Converse gives no id and no model: the renderers fall back
 *   on the request's). contentBlockStart with start.toolUse -> BLOCK_START of a tool
 *   call (toolUseId, name); other starts are not blocks the hub models.
 *   contentBlockDelta -> DELTA: delta.text of a text block, delta.toolUse.input a
 *   fragment of a call's arguments, delta.reasoningContent.text / .signature /
 *   .redactedContent of a reasoning block (redacted: the base64 data as the signature);
 *   citation deltas are ignored, empty deltas dropped. Bedrock sends no start for text
 *   and reasoning blocks: a delta whose contentBlockIndex is not the open block (or of
 *   another kind) stops the open block and starts one (BLOCK_START before its first
 *   DELTA). contentBlockStop -> BLOCK_STOP of the open block when the index is its.
 *   Canonical indexes count the blocks emitted, 0.. in order.
 * - messageStop -> BLOCK_STOP of a block left open, then FINISH: end_turn and
 *   stop_sequence STOP (the sequence from additionalModelResponseFields.stop_sequence,
 *   which the render asks of Claude), tool_use TOOL_CALLS, max_tokens and
 *   model_context_window_exceeded LENGTH, guardrail_intervened and content_filtered
 *   CONTENT_FILTER, malformed_model_output and malformed_tool_use ERROR, anything newer
 *   STOP. metadata -> USAGE (it comes after messageStop: USAGE after FINISH is allowed);
 *   after FINISH only USAGE is emitted.
 * - A name ending in "Exception" (throttlingException, modelStreamErrorException, ...)
 *   or "error" -> ERROR: type the name, message the payload's "message" (the whole
 *   payload when it is not a JSON object: an "error" message's payload is its
 *   :error-message text), status from dl_bedrock_exception_status (500 when unknown);
 *   then nothing more. After FINISH it changes nothing (the answer was whole).
 * - usage: inputTokens (uncached input: Bedrock counts cache reads and writes apart, as
 *   Messages does), outputTokens, cacheReadInputTokens, cacheWriteInputTokens ->
 *   input, output, cache read, cache write of struct gw_usage.
 * - A non-streamed answer gives START, USAGE, per block of output.message.content
 *   BLOCK_START, DELTA, BLOCK_STOP (a toolUse's input as its JSON text), then FINISH
 *   (NONE when stopReason is missing). Every block is checked before the first event.
 * Owns:    nothing beyond each call; the parse state is the caller's.
 * Threads: any; a state belongs to one thread at a time.
 * See:     dialects/bedrock-priv.h, dialects/canon.h, docs/fields-bedrock.md,
 *          tests/unit/dialects/test_bedrock_answer.c, tests/fuzz/fuzz_bedrock.c
 */
#include "dialects/bedrock-priv.h"

#include <assert.h>
#include <string.h>

#include "core/alloc.h"
#include "dialects/anthropic-priv.h"
#include "dialects/json_scan.h"

/* ---- decoded strings for the length of one emit ---- */

/* The most bytes of decoded text one DELTA holds when the text had escapes. */
#define DELTA_PIECE 512

/* The string field <f> decoded ("" when it is NULL or not a string). */
static bool
txt_field(struct dl_json_text *x, const struct dl_json *j, const struct dl_anth_field *f)
{
    return dl_json_text_get(x, j, f && f->kind == DA_STR ? &f->str : NULL);
}

/* ---- the state and the emitter ---- */

struct ep {
    int64_t open_up;     /* contentBlockIndex of the open block, -1: none */
    uint32_t open_canon; /* its canonical index */
    uint32_t next;       /* the next canonical index */
    uint8_t open_kind;   /* its enum dl_block */
    bool started;        /* START emitted */
    bool finished;       /* FINISH emitted */
    bool done;           /* an exception: nothing more */
};

static_assert(sizeof(struct ep) <= sizeof(struct dl_parse_state), "parse state too small");

void
dl_bedrock_parse_init(struct dl_parse_state *st)
{
    struct ep *s = (struct ep *)st;

    memset(st, 0, sizeof(*st));
    s->open_up = -1;
}

static enum gw_code
bad(const struct dl_json *j)
{
    return j->err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
}

static bool
given(const struct dl_anth_field *f)
{
    return f->kind != DA_ABSENT && f->kind != DA_NULL;
}

/* START, once. */
static bool
ensure_started(struct ep *s, struct dl_emitter *e)
{
    struct dl_event ev = {.kind = DL_EV_START};

    if (s->started)
        return true;
    s->started = true;
    return dl_emit(e, &ev);
}

static bool
close_open(struct ep *s, struct dl_emitter *e)
{
    struct dl_event ev = {.kind = DL_EV_BLOCK_STOP};

    if (s->open_up < 0)
        return true;
    s->open_up = -1;
    ev.index = s->open_canon;
    ev.block = (enum dl_block)s->open_kind;
    return dl_emit(e, &ev);
}

/* Starts a block for contentBlockIndex <up> of <kind> (tool call: <id>, <name>). */
static bool
open_block(struct ep *s, struct dl_emitter *e, int64_t up, enum dl_block kind, struct gw_str id,
           struct gw_str name, bool redacted)
{
    struct dl_event ev = {.kind = DL_EV_BLOCK_START, .block = kind};

    if (!close_open(s, e))
        return false;
    s->open_up = up < 0 ? INT64_MAX : up;
    s->open_canon = s->next++;
    s->open_kind = (uint8_t)kind;
    ev.index = s->open_canon;
    ev.id = id;
    ev.name = name;
    ev.redacted = redacted;
    return dl_emit(e, &ev);
}

/* The contentBlockIndex member, or -1 when absent or not a non-negative integer. */
static int64_t
index_of(const struct dl_json *j, const struct dl_anth_field *f)
{
    int64_t v;

    if (f->kind != DA_NUM || !dl_json_int(j, &f->num, &v) || v < 0)
        return -1;
    return v;
}

#define USAGE_FIELDS                                                                               \
    {                                                                                              \
        DL_ANTH_FIELD("inputTokens"), DL_ANTH_FIELD("outputTokens"),                               \
            DL_ANTH_FIELD("cacheReadInputTokens"), DL_ANTH_FIELD("cacheWriteInputTokens")          \
    }

/* The usage members <u> (a count each; a negative or real one reads 0). */
static bool
usage_read(struct dl_json *j, const struct dl_anth_field *u, struct gw_usage *out)
{
    uint64_t *dst[4] = {&out->input_tokens, &out->output_tokens, &out->cache_read_tokens,
                        &out->cache_write_tokens};
    size_t k;

    memset(out, 0, sizeof(*out));
    for (k = 0; k < 4; k++)
        if (u[k].kind == DA_NUM && !dl_json_num_count(j, &u[k].num, dst[k]))
            return false;
    return true;
}

/* The finish a stopReason stands for. */
static enum dl_finish
finish_of(const struct dl_json *j, const struct dl_anth_field *f)
{
    if (dl_anthropic_is(j, f, "tool_use"))
        return DL_FINISH_TOOL_CALLS;
    if (dl_anthropic_is(j, f, "max_tokens") ||
        dl_anthropic_is(j, f, "model_context_window_exceeded"))
        return DL_FINISH_LENGTH;
    if (dl_anthropic_is(j, f, "guardrail_intervened") || dl_anthropic_is(j, f, "content_filtered"))
        return DL_FINISH_CONTENT_FILTER;
    if (dl_anthropic_is(j, f, "malformed_model_output") ||
        dl_anthropic_is(j, f, "malformed_tool_use"))
        return DL_FINISH_ERROR;
    return DL_FINISH_STOP; /* end_turn, stop_sequence, and anything newer */
}

/* A DELTA of canonical block <index> with <text> and <sig> (fields, either may be NULL);
 * nothing when both are empty. A text with escapes is decoded on the stack in pieces,
 * each its own DELTA (split between characters; the signature rides on the last): no
 * allocation, however long it is. */
static enum gw_code
emit_delta(struct dl_emitter *e, uint32_t index, enum dl_block kind, const struct dl_json *j,
           const struct dl_anth_field *text, const struct dl_anth_field *sig)
{
    struct dl_event ev = {.kind = DL_EV_DELTA, .index = index, .block = kind};
    char piece[DELTA_PIECE];
    struct dl_json_text g;
    size_t at;

    if (!txt_field(&g, j, sig))
        return GW_E_NOMEM;
    ev.signature = g.s;
    if (text && text->kind == DA_STR && text->str.escaped) {
        for (at = text->str.start; at < text->str.end;) {
            ev.text.ptr = piece;
            ev.text.len = dl_json_decode_part(j, &text->str, &at, piece, sizeof(piece));
            ev.signature = at < text->str.end ? (struct gw_str){"", 0} : g.s;
            if (!dl_emit(e, &ev))
                break;
        }
    } else {
        if (text && text->kind == DA_STR)
            ev.text = (struct gw_str){j->s + text->str.start, text->str.dlen};
        if (ev.text.len || ev.signature.len)
            dl_emit(e, &ev);
    }
    dl_json_text_fini(&g);
    return GW_OK;
}

/* FINISH of a stopReason field <why> (absent: NONE), with <seq> the stop sequence. */
static enum gw_code
emit_finish(struct dl_emitter *e, const struct dl_json *j, const struct dl_anth_field *why,
            const struct dl_anth_field *seq)
{
    struct dl_event ev = {.kind = DL_EV_FINISH};
    struct dl_json_text t;

    if (!txt_field(&t, j, seq))
        return GW_E_NOMEM;
    ev.finish = why->kind == DA_STR ? finish_of(j, why) : DL_FINISH_NONE;
    ev.stop_sequence = t.s;
    dl_emit(e, &ev);
    dl_json_text_fini(&t);
    return GW_OK;
}

/* ---- stream events ---- */

static enum gw_code
on_message_start(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field top[] = {DL_ANTH_FIELD("role")};

    if (!dl_anthropic_fields(j, top, 1) || !dl_json_end(j))
        return bad(j);
    ensure_started(s, e);
    return GW_OK;
}

static enum gw_code
on_block_start(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field tu[] = {DL_ANTH_FIELD("toolUseId"), DL_ANTH_FIELD("name")};
    struct dl_anth_field st[] = {DL_ANTH_FIELD("toolUse")};
    struct dl_anth_field top[] = {DL_ANTH_FIELD("contentBlockIndex"), DL_ANTH_FIELD("start")};
    struct dl_json_text id, name;

    st[0].sub = tu;
    st[0].nsub = 2;
    top[1].sub = st;
    top[1].nsub = 1;
    if (!dl_anthropic_fields(j, top, 2) || !dl_json_end(j))
        return bad(j);
    if (top[1].kind != DA_OBJ)
        return GW_E_UPSTREAM_PROTOCOL;
    if (st[0].kind != DA_OBJ)
        return GW_OK; /* a start the hub does not model */
    if (tu[0].kind != DA_STR || tu[1].kind != DA_STR)
        return GW_E_UPSTREAM_PROTOCOL;
    if (s->finished || !ensure_started(s, e))
        return GW_OK;
    if (!txt_field(&id, j, &tu[0]))
        return GW_E_NOMEM;
    if (!txt_field(&name, j, &tu[1])) {
        dl_json_text_fini(&id);
        return GW_E_NOMEM;
    }
    open_block(s, e, index_of(j, &top[0]), DL_BLOCK_TOOL_CALL, id.s, name.s, false);
    dl_json_text_fini(&id);
    dl_json_text_fini(&name);
    return GW_OK;
}

static bool
nonempty(const struct dl_anth_field *f)
{
    return f->kind == DA_STR && f->str.dlen > 0;
}

static enum gw_code
on_block_delta(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field rc[] = {DL_ANTH_FIELD("text"), DL_ANTH_FIELD("signature"),
                                 DL_ANTH_FIELD("redactedContent")};
    struct dl_anth_field tu[] = {DL_ANTH_FIELD("input")};
    struct dl_anth_field d[] = {DL_ANTH_FIELD("text"), DL_ANTH_FIELD("toolUse"),
                                DL_ANTH_FIELD("reasoningContent")};
    struct dl_anth_field top[] = {DL_ANTH_FIELD("contentBlockIndex"), DL_ANTH_FIELD("delta")};
    const struct dl_anth_field *text = NULL, *sig = NULL;
    enum dl_block kind;
    bool redacted = false;
    int64_t up;
    size_t k;

    d[1].sub = tu;
    d[1].nsub = 1;
    d[2].sub = rc;
    d[2].nsub = 3;
    top[1].sub = d;
    top[1].nsub = 3;
    if (!dl_anthropic_fields(j, top, 2) || !dl_json_end(j))
        return bad(j);
    if (top[1].kind != DA_OBJ)
        return GW_E_UPSTREAM_PROTOCOL;
    if (given(&d[0])) {
        if (d[0].kind != DA_STR)
            return GW_E_UPSTREAM_PROTOCOL;
        kind = DL_BLOCK_TEXT;
        text = &d[0];
    } else if (given(&d[1])) {
        if (d[1].kind != DA_OBJ || (given(&tu[0]) && tu[0].kind != DA_STR))
            return GW_E_UPSTREAM_PROTOCOL;
        kind = DL_BLOCK_TOOL_CALL;
        text = &tu[0];
    } else if (given(&d[2])) {
        if (d[2].kind != DA_OBJ)
            return GW_E_UPSTREAM_PROTOCOL;
        for (k = 0; k < 3; k++)
            if (given(&rc[k]) && rc[k].kind != DA_STR)
                return GW_E_UPSTREAM_PROTOCOL;
        kind = DL_BLOCK_REASONING;
        text = &rc[0];
        redacted = nonempty(&rc[2]);
        sig = redacted ? &rc[2] : &rc[1];
    } else {
        return GW_OK; /* a citation, and anything newer */
    }
    if (s->finished || (!nonempty(text) && !(sig && nonempty(sig))))
        return GW_OK;
    if (!ensure_started(s, e))
        return GW_OK;
    up = index_of(j, &top[0]);
    if (s->open_up < 0 || (up >= 0 && up != s->open_up) || s->open_kind != kind) {
        /* a block Bedrock started without saying so (text, reasoning) */
        if (!open_block(s, e, up, kind, (struct gw_str){"", 0}, (struct gw_str){"", 0}, redacted))
            return GW_OK;
    }
    return emit_delta(e, s->open_canon, kind, j, text, sig);
}

static enum gw_code
on_block_stop(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field top[] = {DL_ANTH_FIELD("contentBlockIndex")};
    int64_t up;

    if (!dl_anthropic_fields(j, top, 1) || !dl_json_end(j))
        return bad(j);
    up = index_of(j, &top[0]);
    if (s->open_up >= 0 && (up < 0 || up == s->open_up || s->open_up == INT64_MAX))
        close_open(s, e);
    return GW_OK;
}

static enum gw_code
on_message_stop(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field amrf[] = {DL_ANTH_FIELD("stop_sequence")};
    struct dl_anth_field top[] = {DL_ANTH_FIELD("stopReason"),
                                  DL_ANTH_FIELD("additionalModelResponseFields")};

    top[1].sub = amrf;
    top[1].nsub = 1;
    if (!dl_anthropic_fields(j, top, 2) || !dl_json_end(j))
        return bad(j);
    if (top[0].kind != DA_STR)
        return GW_E_UPSTREAM_PROTOCOL;
    if (s->finished)
        return GW_OK;
    if (!ensure_started(s, e) || !close_open(s, e))
        return GW_OK;
    s->finished = true;
    return emit_finish(e, j, &top[0], &amrf[0]);
}

static enum gw_code
on_metadata(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field u[] = USAGE_FIELDS;
    struct dl_anth_field top[] = {DL_ANTH_FIELD("usage")};
    struct dl_event ev = {.kind = DL_EV_USAGE};

    top[0].sub = u;
    top[0].nsub = 4;
    if (!dl_anthropic_fields(j, top, 1) || !dl_json_end(j))
        return bad(j);
    if (given(&top[0]) && top[0].kind != DA_OBJ)
        return GW_E_UPSTREAM_PROTOCOL;
    if (top[0].kind != DA_OBJ)
        return GW_OK;
    if (!usage_read(j, u, &ev.usage))
        return GW_E_NOMEM;
    if (ensure_started(s, e))
        dl_emit(e, &ev);
    return GW_OK;
}

static enum gw_code
on_exception(struct ep *s, struct gw_str name, struct gw_str data, struct dl_emitter *e)
{
    struct dl_anth_field top[] = {DL_ANTH_FIELD("message"), DL_ANTH_FIELD("Message")};
    struct dl_event ev = {.kind = DL_EV_ERROR};
    struct dl_json_text msg = {.heap = NULL};
    struct dl_json j;
    int status = dl_bedrock_exception_status(name);

    s->done = true;
    if (s->finished)
        return GW_OK; /* the answer was whole: an error after its finish changes nothing */
    dl_json_init(&j, data.ptr, data.len);
    if (dl_json_peek(&j) == '{' && dl_anthropic_fields(&j, top, 2) && dl_json_end(&j)) {
        if (!txt_field(&msg, &j, top[0].kind == DA_STR ? &top[0] : &top[1]))
            return GW_E_NOMEM;
    } else {
        msg.s = data; /* not JSON: an error message's text */
    }
    ev.error_type = name;
    ev.message = msg.s;
    ev.status = status ? status : 500;
    dl_emit(e, &ev);
    dl_json_text_fini(&msg);
    return GW_OK;
}

static bool
name_is(struct gw_str name, const char *lit)
{
    return gw_str_eq(name, gw_str_c(lit));
}

static bool
is_exception(struct gw_str name)
{
    static const char suffix[] = "Exception";
    size_t n = sizeof(suffix) - 1;

    return name_is(name, "error") ||
           (name.len >= n && memcmp(name.ptr + name.len - n, suffix, n) == 0);
}

enum gw_code
dl_bedrock_event_parse(struct dl_parse_state *st, struct gw_str event, struct gw_str data,
                       dl_event_fn fn, void *arg)
{
    struct ep *s = (struct ep *)st;
    struct dl_emitter e = {fn, arg, false};
    struct dl_json j;

    if (s->done)
        return GW_OK;
    if (is_exception(event))
        return on_exception(s, event, data, &e);
    dl_json_init(&j, data.ptr, data.len);
    if (name_is(event, "contentBlockDelta"))
        return on_block_delta(s, &j, &e);
    if (name_is(event, "messageStart"))
        return on_message_start(s, &j, &e);
    if (name_is(event, "contentBlockStart"))
        return on_block_start(s, &j, &e);
    if (name_is(event, "contentBlockStop"))
        return on_block_stop(s, &j, &e);
    if (name_is(event, "messageStop"))
        return on_message_stop(s, &j, &e);
    if (name_is(event, "metadata"))
        return on_metadata(s, &j, &e);
    return GW_OK; /* an event newer than this file */
}

/* ---- a non-streamed answer ---- */

/* The members of a content block, collected in one pass. */
struct blk {
    struct dl_anth_field tu[3]; /* toolUse: toolUseId, name, input */
    struct dl_anth_field rt[2]; /* reasoningText: text, signature */
    struct dl_anth_field rc[2]; /* reasoningContent: reasoningText, redactedContent */
    struct dl_anth_field b[3];  /* text, toolUse, reasoningContent */
};

static void
blk_init(struct blk *x)
{
    const struct blk init = {
        .tu = {DL_ANTH_FIELD("toolUseId"), DL_ANTH_FIELD("name"), DL_ANTH_FIELD("input")},
        .rt = {DL_ANTH_FIELD("text"), DL_ANTH_FIELD("signature")},
        .rc = {DL_ANTH_FIELD("reasoningText"), DL_ANTH_FIELD("redactedContent")},
        .b = {DL_ANTH_FIELD("text"), DL_ANTH_FIELD("toolUse"), DL_ANTH_FIELD("reasoningContent")},
    };

    *x = init;
    x->rc[0].sub = x->rt;
    x->rc[0].nsub = 2;
    x->b[1].sub = x->tu;
    x->b[1].nsub = 3;
    x->b[2].sub = x->rc;
    x->b[2].nsub = 2;
}

/* Reads the block at the cursor of <j> into <x> and checks the members it uses. */
static enum gw_code
blk_read(struct dl_json *j, struct blk *x)
{
    size_t k;

    blk_init(x);
    if (dl_json_peek(j) != '{' || !dl_anthropic_fields(j, x->b, 3))
        return bad(j);
    if (given(&x->b[0]) && x->b[0].kind != DA_STR)
        return GW_E_UPSTREAM_PROTOCOL;
    if (given(&x->b[1]) && (x->b[1].kind != DA_OBJ || x->tu[0].kind != DA_STR ||
                            x->tu[1].kind != DA_STR || x->tu[2].kind == DA_ABSENT))
        return GW_E_UPSTREAM_PROTOCOL;
    if (given(&x->b[2])) {
        if (x->b[2].kind != DA_OBJ || (given(&x->rc[0]) && x->rc[0].kind != DA_OBJ) ||
            (given(&x->rc[1]) && x->rc[1].kind != DA_STR))
            return GW_E_UPSTREAM_PROTOCOL;
        for (k = 0; k < 2; k++)
            if (given(&x->rt[k]) && x->rt[k].kind != DA_STR)
                return GW_E_UPSTREAM_PROTOCOL;
    }
    return GW_OK;
}

/* The events of the block <x> (of <j>), numbered from *<index>. */
static enum gw_code
answer_block(const struct dl_json *j, const struct blk *x, uint32_t *index, struct dl_emitter *e)
{
    struct dl_event ev = {.kind = DL_EV_BLOCK_START};
    struct dl_json_text id, name;
    enum gw_code rc = GW_OK;

    if (given(&x->b[0]))
        ev.block = DL_BLOCK_TEXT;
    else if (given(&x->b[1]))
        ev.block = DL_BLOCK_TOOL_CALL;
    else if (given(&x->b[2]) && (x->rc[0].kind == DA_OBJ || x->rc[1].kind == DA_STR))
        ev.block = DL_BLOCK_REASONING;
    else
        return GW_OK; /* citations, images, guard content: not part of the canonical answer */
    ev.index = (*index)++;
    ev.redacted = ev.block == DL_BLOCK_REASONING && x->rc[0].kind != DA_OBJ;
    if (!txt_field(&id, j, ev.block == DL_BLOCK_TOOL_CALL ? &x->tu[0] : NULL))
        return GW_E_NOMEM;
    if (!txt_field(&name, j, ev.block == DL_BLOCK_TOOL_CALL ? &x->tu[1] : NULL)) {
        dl_json_text_fini(&id);
        return GW_E_NOMEM;
    }
    ev.id = id.s;
    ev.name = name.s;
    dl_emit(e, &ev);
    dl_json_text_fini(&id);
    dl_json_text_fini(&name);
    if (e->stopped)
        return GW_OK;
    if (ev.block == DL_BLOCK_TEXT) {
        rc = emit_delta(e, ev.index, ev.block, j, &x->b[0], NULL);
    } else if (ev.block == DL_BLOCK_TOOL_CALL) {
        struct dl_event dv = {.kind = DL_EV_DELTA, .index = ev.index, .block = ev.block};

        dv.text = (struct gw_str){j->s + x->tu[2].at, x->tu[2].end - x->tu[2].at};
        dl_emit(e, &dv);
    } else if (ev.redacted) {
        rc = emit_delta(e, ev.index, ev.block, j, NULL, &x->rc[1]);
    } else {
        rc = emit_delta(e, ev.index, ev.block, j, &x->rt[0], &x->rt[1]);
    }
    if (rc == GW_OK && !e->stopped) {
        struct dl_event sv = {.kind = DL_EV_BLOCK_STOP, .index = ev.index, .block = ev.block};

        dl_emit(e, &sv);
    }
    return rc;
}

enum gw_code
dl_bedrock_answer_parse(const char *body, size_t len, dl_event_fn fn, void *arg)
{
    struct dl_anth_field u[] = USAGE_FIELDS;
    struct dl_anth_field amrf[] = {DL_ANTH_FIELD("stop_sequence")};
    struct dl_anth_field msg[] = {DL_ANTH_FIELD("content")};
    struct dl_anth_field output[] = {DL_ANTH_FIELD("message")};
    struct dl_anth_field top[] = {DL_ANTH_FIELD("output"), DL_ANTH_FIELD("stopReason"),
                                  DL_ANTH_FIELD("usage"),
                                  DL_ANTH_FIELD("additionalModelResponseFields")};
    struct dl_emitter e = {fn, arg, false};
    struct dl_event sv = {.kind = DL_EV_START};
    struct gw_usage usage;
    struct dl_json j, cj;
    struct blk x;
    uint32_t index = 0;
    bool first = true;
    int r;

    output[0].sub = msg;
    output[0].nsub = 1;
    top[0].sub = output;
    top[0].nsub = 1;
    top[2].sub = u;
    top[2].nsub = 4;
    top[3].sub = amrf;
    top[3].nsub = 1;
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !dl_anthropic_fields(&j, top, 4) || !dl_json_end(&j))
        return bad(&j);
    if (top[0].kind != DA_OBJ || output[0].kind != DA_OBJ || msg[0].kind != DA_ARR ||
        (given(&top[1]) && top[1].kind != DA_STR) || (given(&top[2]) && top[2].kind != DA_OBJ))
        return GW_E_UPSTREAM_PROTOCOL;
    if (top[2].kind == DA_OBJ && !usage_read(&j, u, &usage))
        return GW_E_NOMEM;
    /* every block is checked before the first event: a malformed answer emits nothing */
    cj = dl_anthropic_at(&j, msg[0].at);
    if (!dl_json_arr_enter(&cj))
        return bad(&cj);
    while ((r = dl_json_arr_next(&cj, &first)) == 1) {
        enum gw_code rc = blk_read(&cj, &x);

        if (rc != GW_OK)
            return rc;
    }
    if (r != 0)
        return bad(&cj);
    dl_emit(&e, &sv);
    if (top[2].kind == DA_OBJ) {
        struct dl_event uv = {.kind = DL_EV_USAGE, .usage = usage};

        dl_emit(&e, &uv);
    }
    cj = dl_anthropic_at(&j, msg[0].at);
    first = true;
    (void)dl_json_arr_enter(&cj);
    while (!e.stopped && dl_json_arr_next(&cj, &first) == 1) {
        enum gw_code rc;

        (void)blk_read(&cj, &x); /* checked */
        rc = answer_block(&cj, &x, &index, &e);
        if (rc != GW_OK)
            return rc;
    }
    if (e.stopped)
        return GW_OK;
    return emit_finish(&e, &j, &top[1], &amrf[0]);
}

bool
dl_bedrock_answer_usage(const char *body, size_t len, struct gw_usage *usage)
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
