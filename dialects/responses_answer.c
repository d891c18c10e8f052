/* SPDX-License-Identifier: MIT
 * dialects/responses_answer.c - OpenAI Responses answers, both ways (DESIGN.md 11): a
 * Responses upstream's stream events and non-streamed answers parsed into canonical
 * events, and canonical events rendered as the frames and the response object a
 * Responses client (openai-node's ResponseStream, openai-python, Codex CLI) expects.
 *
 * Upstream side, decisions:
 * - The event parser is also the inspector of the same-shape relay (its bytes go to the
 *   client untouched): one allocation-free pass of dialects/json_scan.h per event; a
 *   string with escapes is decoded on the stack (on the heap past 512 bytes) for the
 *   length of the emit call. An event without a name is named by its data's "type";
 *   events it does not need (in_progress, queued, keepalive, the .done events of text
 *   and arguments, annotations, hosted tools' progress...) are not scanned.
 * - Canonical blocks are numbered 0.. in the order they start: one per function call,
 *   reasoning item and content part of a message. The parse state maps an upstream's
 *   output_index (and content_index) to its block, for the last EP_SLOTS items.
 * - response.created (else response.in_progress) -> START (id, model, created_at);
 *   output_item.added of a function_call -> BLOCK_START (id = call_id, name), of a
 *   reasoning item -> BLOCK_START; of a message nothing: its text block starts at
 *   content_part.added (output_text or refusal) or at its first delta.
 *   output_text.delta and refusal.delta -> DELTA text; function_call_arguments.delta ->
 *   DELTA of the call; reasoning_summary_text.delta and reasoning_text.delta -> DELTA
 *   reasoning ("\n\n" between two summary parts). content_part.done -> BLOCK_STOP of
 *   its text; output_item.done -> BLOCK_STOP, after (reasoning) a DELTA with the
 *   encrypted_content as its signature. An item done that streamed nothing (servers
 *   that send whole items only) gives its content from the item: text, arguments,
 *   summary. A new block stops the open one; a text or reasoning delta of a stopped
 *   block starts a new block; an argument delta of a stopped call is emitted with the
 *   call's index (the answer fold accepts it).
 * - response.completed / response.incomplete -> BLOCK_STOP of the open block, USAGE
 *   (input_tokens less input_tokens_details.cached_tokens as input, the cached ones as
 *   the cache read, output_tokens; reasoning tokens are inside them) and FINISH: stop,
 *   tool_calls when a function call was output, length for status incomplete with
 *   reason max_output_tokens (or none), content_filter for content_filter. When nothing
 *   was streamed, the response's output gives the blocks first. response.failed and
 *   "error" -> ERROR (the code, else the type; the message; the HTTP status the code
 *   stands for: rate_limit_exceeded 429, server_error 500, ...). After any of them
 *   nothing more is emitted.
 * - Data that is not the JSON object an event needs is GW_E_UPSTREAM_PROTOCOL, with
 *   nothing emitted.
 * - A non-streamed answer (a response object) gives START, its output as above (each
 *   item's blocks started, filled and stopped), USAGE, then FINISH by its status (NONE
 *   for a status still in progress), or ERROR for a failed one; an {"error":...} body
 *   without output gives ERROR.
 *
 * Client side, decisions:
 * - Frames are "event: <type>\ndata: <json>\n\n", the data's "type" the same and its
 *   sequence_number counting from 0: response.created and response.in_progress (the
 *   response object, status in_progress, output [], usage null) at START (or before
 *   the first other frame); one output item per canonical block, its output_index
 *   counting from 0 in order: a text block is a message item ("msg_<id>_<n>") added at
 *   its first text (response.output_item.added, response.content_part.added), its
 *   deltas response.output_text.delta, and at its stop response.output_text.done,
 *   response.content_part.done, response.output_item.done; a reasoning block a
 *   reasoning item ("rs_<id>_<n>") added at its first text or signature, its text one
 *   summary_text part (reasoning_summary_part.added, reasoning_summary_text.delta/.done,
 *   reasoning_summary_part.done), its signature the item's encrypted_content (tagged
 *   for another shape's upstream, dl_sig_append_json); a tool call a function_call item
 *   ("fc_<id>_<n>", call_id the call's id, else "call_<id>_<n>") added at its start,
 *   function_call_arguments.delta, and .done with output_item.done once the next text
 *   or reasoning item opens or the answer ends: calls stay open together, so argument
 *   deltas of a stopped call (Chat upstreams may interleave parallel calls) still reach
 *   their item. A text or reasoning block that never says anything is no item; a delta
 *   of a block already closed opens a new item; an argument delta of a call already done
 *   is not rendered.
 * - What is rendered is folded (dl_answer_fold) into an answer kept in the render state
 *   (in ctx->arena: the renderer needs one), one block per output item, and the response
 *   object of the final frame is written from it by the code answer_render uses, so the
 *   stream's final response and a non-streamed answer can never differ.
 * - FINISH is held: render_end closes the open items and writes response.completed, or
 *   response.incomplete (max_output_tokens for length, content_filter) with the latest
 *   usage, so a USAGE after FINISH (Chat sends it there) counts. ERROR (or a FINISH of
 *   ERROR) writes response.failed with error {"code":"server_error", message, gw_code
 *   gw.upstream.failed} in gw's words (canon.h: an upstream's message is logged, never
 *   shown) and ends the stream. dl_responses_render_failed ends a stream the gateway
 *   broke the same way, naming the stream's own response (openai-node refuses a
 *   lifecycle frame of another response id) with its code.
 * - The response: id "resp_" + ctx->id (dl_responses_id_json), object "response",
 *   created_at (START's, else ctx->created), status, error, incomplete_details,
 *   instructions null, metadata {}, model (ctx->model, else START's), output (the items,
 *   as above), parallel_tool_calls true, temperature null, tool_choice "auto", tools [],
 *   top_p null, usage {input_tokens (cached and cache writes included),
 *   input_tokens_details {cached_tokens}, output_tokens, output_tokens_details
 *   {reasoning_tokens}, total_tokens} (null when no usage came).
 * Owns:    nothing beyond each call; the states are the caller's; a render state's
 *          answer is freed with ctx->arena (gw_arena_on_free).
 * Threads: any; a state belongs to one thread at a time.
 * See:     dialects/responses-priv.h, dialects/canon.h,
 *          tests/unit/dialects/test_responses_answer.c, tests/fuzz/fuzz_responses.c
 */
#include "dialects/responses-priv.h"

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

/* A DELTA of block <index> with the decoded string field <f> as its text (or, <sig>, its
 * signature); nothing when it is empty. */
static enum gw_code
emit_field(struct dl_emitter *e, uint32_t index, enum dl_block kind, const struct dl_json *j,
           const struct dl_anth_field *f, bool sig)
{
    struct dl_event ev = {.kind = DL_EV_DELTA, .index = index, .block = kind};
    struct dl_json_text t;

    if (f->kind != DA_STR || f->str.dlen == 0 || e->stopped)
        return GW_OK;
    if (!txt_field(&t, j, f))
        return GW_E_NOMEM;
    if (sig)
        ev.signature = t.s;
    else
        ev.text = t.s;
    dl_emit(e, &ev);
    dl_json_text_fini(&t);
    return GW_OK;
}

static bool
emit_simple(struct dl_emitter *e, enum dl_event_kind kind, uint32_t index, enum dl_block block)
{
    struct dl_event ev = {.kind = kind, .index = index, .block = block};

    return dl_emit(e, &ev);
}

static enum gw_code
scan_failed(const struct dl_json *j)
{
    return j->err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
}

/* ---- upstream side: reading items, usage, errors ---- */

#define USAGE_FIELDS                                                                               \
    {                                                                                              \
        DL_ANTH_FIELD("input_tokens"), DL_ANTH_FIELD("output_tokens"),                             \
            DL_ANTH_FIELD("input_tokens_details"), DL_ANTH_FIELD("output_tokens_details")          \
    }

/* The usage object whose members <u> (and <cached>, <reasoning> of its details) were
 * collected. */
static bool
usage_read(struct dl_json *j, const struct dl_anth_field *u, const struct dl_anth_field *cached,
           const struct dl_anth_field *reasoning, struct gw_usage *out)
{
    uint64_t in = 0, outt = 0, hit = 0, thought = 0;

    if ((u[0].kind == DA_NUM && !dl_json_num_count(j, &u[0].num, &in)) ||
        (u[1].kind == DA_NUM && !dl_json_num_count(j, &u[1].num, &outt)) ||
        (u[2].kind == DA_OBJ && cached->kind == DA_NUM &&
         !dl_json_num_count(j, &cached->num, &hit)) ||
        (u[3].kind == DA_OBJ && reasoning->kind == DA_NUM &&
         !dl_json_num_count(j, &reasoning->num, &thought)))
        return false;
    memset(out, 0, sizeof(*out));
    if (hit > in)
        hit = in;
    out->input_tokens = in - hit;
    out->cache_read_tokens = hit;
    out->output_tokens = outt;
    out->reasoning_tokens = thought < outt ? thought : outt;
    return true;
}

/* An error code or type of any Responses (or Chat) error -> the HTTP status it stands
 * for: the one table (STYLE.md 7). */
static const struct {
    const char *code;
    int status;
} status_by_code[] = {
    {"rate_limit_exceeded", 429},
    {"rate_limit_error", 429},
    {"insufficient_quota", 429},
    {"requests", 429},
    {"tokens", 429},
    {"server_error", 500},
    {"api_error", 500},
    {"server_is_overloaded", 503},
    {"slow_down", 503},
    {"overloaded_error", 529},
    {"invalid_prompt", 400},
    {"invalid_request_error", 400},
    {"context_length_exceeded", 400},
    {"bio_policy", 400},
    {"data_residency_mismatch", 400},
    {"authentication_error", 401},
    {"invalid_api_key", 401},
    {"permission_error", 403},
    {"not_found_error", 404},
    {"model_not_found", 404},
    {"timeout_error", 504},
    {"vector_store_timeout", 504},
};

static int
status_of(struct gw_str code)
{
    size_t i;

    for (i = 0; i < sizeof(status_by_code) / sizeof(status_by_code[0]); i++)
        if (gw_str_eq(code, gw_str_c(status_by_code[i].code)))
            return status_by_code[i].status;
    /* invalid_image, image_too_large, empty_image_file, ...: the request's images */
    if ((code.len >= 8 && memcmp(code.ptr, "invalid_", 8) == 0) ||
        memmem(code.ptr, code.len, "image", 5))
        return 400;
    return 500;
}

/* ERROR from an error object's fields <x> (type, code, message). */
static enum gw_code
emit_error(struct dl_emitter *e, const struct dl_json *j, const struct dl_anth_field *x)
{
    struct dl_event ev = {.kind = DL_EV_ERROR};
    struct dl_json_text type, msg;

    if (!txt_field(&type, j, x[1].kind == DA_STR ? &x[1] : &x[0]))
        return GW_E_NOMEM;
    if (!txt_field(&msg, j, &x[2])) {
        dl_json_text_fini(&type);
        return GW_E_NOMEM;
    }
    ev.error_type = type.s.len ? type.s : GW_STR_LIT("server_error");
    ev.message = msg.s;
    ev.status = status_of(ev.error_type);
    dl_emit(e, &ev);
    dl_json_text_fini(&type);
    dl_json_text_fini(&msg);
    return GW_OK;
}

#define ERROR_FIELDS                                                                               \
    {                                                                                              \
        DL_ANTH_FIELD("type"), DL_ANTH_FIELD("code"), DL_ANTH_FIELD("message")                     \
    }

/* Fields of an output item (one collector for every type). */
enum itf {
    IT_TYPE,
    IT_CALL_ID,
    IT_NAME,
    IT_ARGUMENTS,
    IT_ENC,
    IT_SUMMARY,
    IT_CONTENT,
    IT__COUNT,
};

#define ITEM_FIELDS                                                                                \
    {                                                                                              \
        DL_ANTH_FIELD("type"), DL_ANTH_FIELD("call_id"), DL_ANTH_FIELD("name"),                    \
            DL_ANTH_FIELD("arguments"), DL_ANTH_FIELD("encrypted_content"),                        \
            DL_ANTH_FIELD("summary"), DL_ANTH_FIELD("content")                                     \
    }

/* Whether the array at <at> holds objects only, whose "text" and "refusal" members,
 * when present, are strings (the parts the parser reads). */
static bool
check_texts(const struct dl_json *doc, size_t at)
{
    struct dl_json j = dl_anthropic_at(doc, at);
    bool first = true;
    int r;

    if (!dl_json_arr_enter(&j))
        return false;
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        struct dl_anth_field f[] = {DL_ANTH_FIELD("text"), DL_ANTH_FIELD("refusal")};

        if (dl_json_peek(&j) != '{' || !dl_anthropic_fields(&j, f, 2) ||
            (f[0].kind != DA_ABSENT && f[0].kind != DA_STR) ||
            (f[1].kind != DA_ABSENT && f[1].kind != DA_STR))
            return false;
    }
    return r == 0;
}

/* Whether item <f> (collected from <j>) is well formed for what the parser reads. */
static bool
check_item(const struct dl_json *j, const struct dl_anth_field *f)
{
    if (f[IT_TYPE].kind != DA_STR)
        return false;
    if (dl_anthropic_is(j, &f[IT_TYPE], "function_call"))
        return f[IT_CALL_ID].kind == DA_STR && f[IT_NAME].kind == DA_STR &&
               (f[IT_ARGUMENTS].kind == DA_STR || f[IT_ARGUMENTS].kind == DA_ABSENT);
    if (dl_anthropic_is(j, &f[IT_TYPE], "message"))
        return f[IT_CONTENT].kind != DA_ARR || check_texts(j, f[IT_CONTENT].at);
    if (dl_anthropic_is(j, &f[IT_TYPE], "reasoning"))
        return (f[IT_SUMMARY].kind != DA_ARR || check_texts(j, f[IT_SUMMARY].at)) &&
               (f[IT_CONTENT].kind != DA_ARR || check_texts(j, f[IT_CONTENT].at)) &&
               (f[IT_ENC].kind == DA_STR || f[IT_ENC].kind == DA_NULL ||
                f[IT_ENC].kind == DA_ABSENT);
    return true;
}

/* Whether the output array at <at> holds well-formed items only. */
static bool
check_output(const struct dl_json *doc, size_t at)
{
    struct dl_json j = dl_anthropic_at(doc, at);
    bool first = true;
    int r;

    if (!dl_json_arr_enter(&j))
        return false;
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        struct dl_anth_field f[IT__COUNT] = ITEM_FIELDS;

        if (dl_json_peek(&j) != '{' || !dl_anthropic_fields(&j, f, IT__COUNT) || !check_item(&j, f))
            return false;
    }
    return r == 0;
}

/* The texts of the (checked) array at <at> as DELTAs of block <index>, "\n\n" between
 * two; message parts: "text" of output_text, "refusal" of refusal. *any: one was
 * emitted (in and out). */
static enum gw_code
emit_texts(struct dl_emitter *e, const struct dl_json *doc, size_t at, uint32_t index,
           enum dl_block kind, bool *any)
{
    struct dl_json j = dl_anthropic_at(doc, at);
    bool first = true;

    (void)dl_json_arr_enter(&j);
    while (!e->stopped && dl_json_arr_next(&j, &first) == 1) {
        struct dl_anth_field f[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("text"),
                                    DL_ANTH_FIELD("refusal")};
        const struct dl_anth_field *t;
        enum gw_code rc;

        (void)dl_anthropic_fields(&j, f, 3);
        t = dl_anthropic_is(&j, &f[0], "refusal") ? &f[2] : &f[1];
        if (t->kind != DA_STR || t->str.dlen == 0)
            continue;
        if (*any) {
            struct dl_event sep = {.kind = DL_EV_DELTA, .index = index, .block = kind};

            sep.text = GW_STR_LIT("\n\n");
            dl_emit(e, &sep);
        }
        rc = emit_field(e, index, kind, &j, t, false);
        if (rc != GW_OK)
            return rc;
        *any = true;
    }
    return GW_OK;
}

/* BLOCK_START of a function call <f>: id = call_id, name. */
static bool
emit_call_start(struct dl_emitter *e, uint32_t index, const struct dl_json *j,
                const struct dl_anth_field *f, bool *nomem)
{
    struct dl_event ev = {.kind = DL_EV_BLOCK_START, .index = index, .block = DL_BLOCK_TOOL_CALL};
    struct dl_json_text id, name;

    if (!txt_field(&id, j, &f[IT_CALL_ID])) {
        *nomem = true;
        return false;
    }
    if (!txt_field(&name, j, &f[IT_NAME])) {
        dl_json_text_fini(&id);
        *nomem = true;
        return false;
    }
    ev.id = id.s;
    ev.name = name.s;
    dl_emit(e, &ev);
    dl_json_text_fini(&id);
    dl_json_text_fini(&name);
    return !e->stopped;
}

/* The blocks of one checked output item <f>: started, filled, stopped. */
static enum gw_code
emit_item(struct dl_emitter *e, const struct dl_json *j, const struct dl_anth_field *f,
          uint32_t *next, bool *tool_called)
{
    enum gw_code rc = GW_OK;
    bool nomem = false, any = false;
    uint32_t index;

    if (dl_anthropic_is(j, &f[IT_TYPE], "message") && f[IT_CONTENT].kind == DA_ARR) {
        struct dl_json cj = dl_anthropic_at(j, f[IT_CONTENT].at);
        bool first = true;

        /* one text block per part that says something */
        (void)dl_json_arr_enter(&cj);
        while (!e->stopped && dl_json_arr_next(&cj, &first) == 1) {
            struct dl_anth_field p[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("text"),
                                        DL_ANTH_FIELD("refusal")};
            const struct dl_anth_field *t;

            (void)dl_anthropic_fields(&cj, p, 3);
            t = dl_anthropic_is(&cj, &p[0], "refusal") ? &p[2] : &p[1];
            if (t->kind != DA_STR || t->str.dlen == 0)
                continue;
            index = (*next)++;
            if (!emit_simple(e, DL_EV_BLOCK_START, index, DL_BLOCK_TEXT))
                return GW_OK;
            rc = emit_field(e, index, DL_BLOCK_TEXT, &cj, t, false);
            if (rc != GW_OK)
                return rc;
            emit_simple(e, DL_EV_BLOCK_STOP, index, DL_BLOCK_TEXT);
        }
        return GW_OK;
    }
    if (dl_anthropic_is(j, &f[IT_TYPE], "function_call")) {
        index = (*next)++;
        *tool_called = true;
        if (!emit_call_start(e, index, j, f, &nomem))
            return nomem ? GW_E_NOMEM : GW_OK;
        rc = emit_field(e, index, DL_BLOCK_TOOL_CALL, j, &f[IT_ARGUMENTS], false);
        if (rc == GW_OK)
            emit_simple(e, DL_EV_BLOCK_STOP, index, DL_BLOCK_TOOL_CALL);
        return rc;
    }
    if (!dl_anthropic_is(j, &f[IT_TYPE], "reasoning"))
        return GW_OK; /* hosted tools' calls: not part of the canonical answer */
    index = *next;
    if (!emit_simple(e, DL_EV_BLOCK_START, index, DL_BLOCK_REASONING))
        return GW_OK;
    (*next)++;
    if (f[IT_SUMMARY].kind == DA_ARR)
        rc = emit_texts(e, j, f[IT_SUMMARY].at, index, DL_BLOCK_REASONING, &any);
    if (rc == GW_OK && !any && f[IT_CONTENT].kind == DA_ARR)
        rc = emit_texts(e, j, f[IT_CONTENT].at, index, DL_BLOCK_REASONING, &any);
    if (rc == GW_OK)
        rc = emit_field(e, index, DL_BLOCK_REASONING, j, &f[IT_ENC], true);
    if (rc == GW_OK)
        emit_simple(e, DL_EV_BLOCK_STOP, index, DL_BLOCK_REASONING);
    return rc;
}

/* The blocks of every item of the checked output array at <at>. */
static enum gw_code
emit_output(struct dl_emitter *e, const struct dl_json *doc, size_t at, uint32_t *next,
            bool *tool_called)
{
    struct dl_json j = dl_anthropic_at(doc, at);
    bool first = true;

    (void)dl_json_arr_enter(&j);
    while (!e->stopped && dl_json_arr_next(&j, &first) == 1) {
        struct dl_anth_field f[IT__COUNT] = ITEM_FIELDS;
        enum gw_code rc;

        (void)dl_anthropic_fields(&j, f, IT__COUNT);
        rc = emit_item(e, &j, f, next, tool_called);
        if (rc != GW_OK)
            return rc;
    }
    return GW_OK;
}

/* The finish of a response's <status> and incomplete reason (<incomplete>: the event
 * said so). */
static enum dl_finish
finish_of(const struct dl_json *j, const struct dl_anth_field *status,
          const struct dl_anth_field *reason, bool incomplete, bool tool_called)
{
    if (incomplete || dl_anthropic_is(j, status, "incomplete"))
        return dl_anthropic_is(j, reason, "content_filter") ? DL_FINISH_CONTENT_FILTER
                                                            : DL_FINISH_LENGTH;
    if (dl_anthropic_is(j, status, "in_progress") || dl_anthropic_is(j, status, "queued"))
        return DL_FINISH_NONE;
    return tool_called ? DL_FINISH_TOOL_CALLS : DL_FINISH_STOP;
}

/* ---- upstream side: stream events ---- */

enum slot_kind {
    SK_FREE = 0,
    SK_TEXT,      /* a content part of a message: <part> its content_index */
    SK_TOOL,      /* a function call */
    SK_REASONING, /* a reasoning item: <part> the last summary index + 1 (0: none yet) */
};

#define SF_CONTENT 0x1u /* a delta of it was emitted */
#define SF_STOPPED 0x2u /* its BLOCK_STOP was emitted */

struct slot {
    uint32_t out;   /* output_index */
    uint32_t canon; /* its canonical block */
    uint32_t part;
    uint8_t kind; /* enum slot_kind */
    uint8_t flags;
};

#define EP_SLOTS 12

struct ep {
    struct slot slot[EP_SLOTS];
    uint32_t next;    /* the next canonical index */
    uint32_t n_slots; /* slots taken so far: past EP_SLOTS the oldest is reused */
    int32_t open;     /* the slot of the open block, -1: none */
    bool started;     /* START emitted */
    bool tool_called; /* a function call was output */
    bool done;        /* completed, incomplete, failed or error: nothing more */
};

static_assert(sizeof(struct ep) <= sizeof(struct dl_parse_state), "parse state too small");

void
dl_responses_parse_init(struct dl_parse_state *st)
{
    struct ep *s = (struct ep *)st;

    memset(st, 0, sizeof(*st));
    s->open = -1;
}

enum ev_kind {
    EV_OTHER = 0,
    EV_CREATED,
    EV_IN_PROGRESS,
    EV_ITEM_ADDED,
    EV_ITEM_DONE,
    EV_PART_ADDED,
    EV_PART_DONE,
    EV_TEXT_DELTA,
    EV_ARGS_DELTA,
    EV_SUMMARY_DELTA,
    EV_REASONING_DELTA,
    EV_COMPLETED,
    EV_INCOMPLETE,
    EV_FAILED,
    EV_ERROR,
};

static enum ev_kind
ev_kind_of(struct gw_str name)
{
#define K(lit, kind)                                                                               \
    {                                                                                              \
        lit, sizeof(lit) - 1, kind                                                                 \
    }
    static const struct {
        const char *name;
        size_t len;
        enum ev_kind kind;
    } kinds[] = {
        /* the frequent ones first: this runs for every event of a same-shape relay */
        K("response.output_text.delta", EV_TEXT_DELTA),
        K("response.function_call_arguments.delta", EV_ARGS_DELTA),
        K("response.reasoning_summary_text.delta", EV_SUMMARY_DELTA),
        K("response.reasoning_text.delta", EV_REASONING_DELTA),
        K("response.refusal.delta", EV_TEXT_DELTA),
        K("response.output_item.added", EV_ITEM_ADDED),
        K("response.output_item.done", EV_ITEM_DONE),
        K("response.content_part.added", EV_PART_ADDED),
        K("response.content_part.done", EV_PART_DONE),
        K("response.created", EV_CREATED),
        K("response.in_progress", EV_IN_PROGRESS),
        K("response.completed", EV_COMPLETED),
        K("response.incomplete", EV_INCOMPLETE),
        K("response.failed", EV_FAILED),
        K("error", EV_ERROR),
    };
#undef K
    size_t i;

    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (name.len == kinds[i].len && memcmp(name.ptr, kinds[i].name, name.len) == 0)
            return kinds[i].kind;
    return EV_OTHER;
}

/* The slot of <kind> for <out> (and <part>, text), or -1. */
static int32_t
slot_find(const struct ep *s, enum slot_kind kind, uint32_t out, uint32_t part)
{
    uint32_t n = s->n_slots < EP_SLOTS ? s->n_slots : EP_SLOTS;
    uint32_t i;

    for (i = 0; i < n; i++)
        if (s->slot[i].kind == kind && s->slot[i].out == out &&
            (kind != SK_TEXT || s->slot[i].part == part))
            return (int32_t)i;
    return -1;
}

/* Emits BLOCK_STOP for the open block, when one is. */
static bool
close_open(struct ep *s, struct dl_emitter *e)
{
    struct slot *sl;

    if (s->open < 0)
        return true;
    sl = &s->slot[s->open];
    s->open = -1;
    if (sl->flags & SF_STOPPED)
        return true;
    sl->flags |= SF_STOPPED;
    return emit_simple(e, DL_EV_BLOCK_STOP, sl->canon,
                       sl->kind == SK_TOOL        ? DL_BLOCK_TOOL_CALL
                       : sl->kind == SK_REASONING ? DL_BLOCK_REASONING
                                                  : DL_BLOCK_TEXT);
}

/* START with empty fields when the upstream sent none before its content. */
static bool
ensure_started(struct ep *s, struct dl_emitter *e)
{
    struct dl_event ev = {.kind = DL_EV_START};

    if (s->started)
        return true;
    s->started = true;
    return dl_emit(e, &ev);
}

/* A new slot for <kind>/<out>/<part> whose block starts now (the open one stops): the
 * slot's index, or -1 when the receiver stopped. <call>: a tool call's fields. */
static int32_t
slot_start(struct ep *s, struct dl_emitter *e, enum slot_kind kind, uint32_t out, uint32_t part,
           const struct dl_json *j, const struct dl_anth_field *call, bool *nomem)
{
    int32_t i = slot_find(s, kind, out, part);
    struct slot *sl;

    if (!ensure_started(s, e) || !close_open(s, e))
        return -1;
    if (i < 0) {
        i = (int32_t)(s->n_slots % EP_SLOTS);
        s->n_slots++;
    }
    sl = &s->slot[i];
    memset(sl, 0, sizeof(*sl));
    sl->kind = (uint8_t)kind;
    sl->out = out;
    sl->part = kind == SK_TEXT ? part : 0;
    sl->canon = s->next++;
    s->open = i;
    if (kind == SK_TOOL) {
        s->tool_called = true;
        if (!emit_call_start(e, sl->canon, j, call, nomem))
            return -1;
        return i;
    }
    if (!emit_simple(e, DL_EV_BLOCK_START, sl->canon,
                     kind == SK_REASONING ? DL_BLOCK_REASONING : DL_BLOCK_TEXT))
        return -1;
    return i;
}

/* A count member (output_index...), or 0 when it is not a non-negative integer. */
static uint32_t
index_of(const struct dl_json *j, const struct dl_anth_field *f)
{
    int64_t v;

    if (f->kind != DA_NUM || !dl_json_int(j, &f->num, &v) || v < 0 || v > UINT32_MAX)
        return 0;
    return (uint32_t)v;
}

static enum gw_code
on_start(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field r[] = {DL_ANTH_FIELD("id"), DL_ANTH_FIELD("model"),
                                DL_ANTH_FIELD("created_at")};
    struct dl_anth_field top[] = {DL_ANTH_FIELD("response")};
    struct dl_event ev = {.kind = DL_EV_START};
    struct dl_json_text id, model;

    top[0].sub = r;
    top[0].nsub = 3;
    if (!dl_anthropic_fields(j, top, 1) || !dl_json_end(j))
        return scan_failed(j);
    if (top[0].kind != DA_OBJ)
        return GW_E_UPSTREAM_PROTOCOL;
    if (s->started)
        return GW_OK;
    if (r[2].kind == DA_NUM && !dl_json_num_count(j, &r[2].num, &ev.created))
        return GW_E_NOMEM;
    if (!txt_field(&id, j, &r[0]))
        return GW_E_NOMEM;
    if (!txt_field(&model, j, &r[1])) {
        dl_json_text_fini(&id);
        return GW_E_NOMEM;
    }
    ev.id = id.s;
    ev.model = model.s;
    s->started = true;
    dl_emit(e, &ev);
    dl_json_text_fini(&id);
    dl_json_text_fini(&model);
    return GW_OK;
}

/* Fields of the item-scoped events (one collector for all). */
enum sf {
    SF_OUTPUT_INDEX,
    SF_CONTENT_INDEX,
    SF_SUMMARY_INDEX,
    SF_DELTA,
    SF_ITEM,
    SF_PART,
    SF__COUNT,
};

#define SCOPED_FIELDS                                                                              \
    {                                                                                              \
        DL_ANTH_FIELD("output_index"), DL_ANTH_FIELD("content_index"),                             \
            DL_ANTH_FIELD("summary_index"), DL_ANTH_FIELD("delta"), DL_ANTH_FIELD("item"),         \
            DL_ANTH_FIELD("part")                                                                  \
    }

static enum gw_code
on_item_added(struct ep *s, const struct dl_json *j, const struct dl_anth_field *f,
              const struct dl_anth_field *it, struct dl_emitter *e)
{
    uint32_t out = index_of(j, &f[SF_OUTPUT_INDEX]);
    bool nomem = false;
    int32_t i;

    if (dl_anthropic_is(j, &it[IT_TYPE], "function_call")) {
        i = slot_start(s, e, SK_TOOL, out, 0, j, it, &nomem);
        if (i < 0)
            return nomem ? GW_E_NOMEM : GW_OK;
        if (it[IT_ARGUMENTS].kind == DA_STR && it[IT_ARGUMENTS].str.dlen)
            s->slot[i].flags |= SF_CONTENT;
        return emit_field(e, s->slot[i].canon, DL_BLOCK_TOOL_CALL, j, &it[IT_ARGUMENTS], false);
    }
    if (dl_anthropic_is(j, &it[IT_TYPE], "reasoning"))
        (void)slot_start(s, e, SK_REASONING, out, 0, j, NULL, &nomem);
    /* a message's text block starts with its content part; other items are not modelled */
    return GW_OK;
}

static enum gw_code
on_part_added(struct ep *s, const struct dl_json *j, const struct dl_anth_field *f,
              const struct dl_anth_field *part, struct dl_emitter *e)
{
    uint32_t out = index_of(j, &f[SF_OUTPUT_INDEX]), ci = index_of(j, &f[SF_CONTENT_INDEX]);
    int32_t i = slot_find(s, SK_TEXT, out, ci);
    bool nomem = false;

    if (!dl_anthropic_is(j, part, "output_text") && !dl_anthropic_is(j, part, "refusal"))
        return GW_OK; /* reasoning_text parts: the reasoning block is started already */
    if (i >= 0 && !(s->slot[i].flags & SF_STOPPED))
        return GW_OK;
    (void)slot_start(s, e, SK_TEXT, out, ci, j, NULL, &nomem);
    return GW_OK;
}

static enum gw_code
on_part_done(struct ep *s, const struct dl_json *j, const struct dl_anth_field *f,
             struct dl_emitter *e)
{
    int32_t i =
        slot_find(s, SK_TEXT, index_of(j, &f[SF_OUTPUT_INDEX]), index_of(j, &f[SF_CONTENT_INDEX]));

    if (i >= 0 && i == s->open)
        close_open(s, e);
    return GW_OK;
}

static enum gw_code
on_delta(struct ep *s, enum ev_kind kind, const struct dl_json *j, const struct dl_anth_field *f,
         struct dl_emitter *e)
{
    uint32_t out = index_of(j, &f[SF_OUTPUT_INDEX]);
    enum slot_kind sk = kind == EV_TEXT_DELTA   ? SK_TEXT
                        : kind == EV_ARGS_DELTA ? SK_TOOL
                                                : SK_REASONING;
    uint32_t part = kind == EV_TEXT_DELTA ? index_of(j, &f[SF_CONTENT_INDEX]) : 0;
    uint32_t sub = kind == EV_SUMMARY_DELTA     ? index_of(j, &f[SF_SUMMARY_INDEX])
                   : kind == EV_REASONING_DELTA ? index_of(j, &f[SF_CONTENT_INDEX])
                                                : 0;
    int32_t i = slot_find(s, sk, out, part);
    bool nomem = false;
    struct slot *sl;

    if (f[SF_DELTA].kind != DA_STR)
        return GW_E_UPSTREAM_PROTOCOL;
    if (f[SF_DELTA].str.dlen == 0)
        return GW_OK;
    if (sk == SK_TOOL) {
        if (i < 0)
            return GW_OK; /* a call never added: its done item gives it whole */
    } else if (i < 0 || (s->slot[i].flags & SF_STOPPED)) {
        /* a delta of a block never started (or stopped already): a new block */
        i = slot_start(s, e, sk, out, part, j, NULL, &nomem);
        if (i < 0)
            return GW_OK;
    }
    sl = &s->slot[i];
    if (sk == SK_REASONING) {
        if ((sl->flags & SF_CONTENT) && sl->part != sub + 1) {
            struct dl_event sep = {.kind = DL_EV_DELTA, .index = sl->canon};

            sep.block = DL_BLOCK_REASONING;
            sep.text = GW_STR_LIT("\n\n"); /* the next summary part */
            if (!dl_emit(e, &sep))
                return GW_OK;
        }
        sl->part = sub + 1;
    }
    sl->flags |= SF_CONTENT;
    return emit_field(e, sl->canon,
                      sk == SK_TOOL        ? DL_BLOCK_TOOL_CALL
                      : sk == SK_REASONING ? DL_BLOCK_REASONING
                                           : DL_BLOCK_TEXT,
                      j, &f[SF_DELTA], false);
}

/* Whether any text slot of output item <out> emitted text. */
static bool
message_said(const struct ep *s, uint32_t out)
{
    uint32_t n = s->n_slots < EP_SLOTS ? s->n_slots : EP_SLOTS, i;

    for (i = 0; i < n; i++)
        if (s->slot[i].kind == SK_TEXT && s->slot[i].out == out && (s->slot[i].flags & SF_CONTENT))
            return true;
    return false;
}

static enum gw_code
on_item_done(struct ep *s, const struct dl_json *j, const struct dl_anth_field *f,
             const struct dl_anth_field *it, struct dl_emitter *e)
{
    uint32_t out = index_of(j, &f[SF_OUTPUT_INDEX]);
    bool nomem = false, any = false;
    enum gw_code rc = GW_OK;
    int32_t i;

    if (dl_anthropic_is(j, &it[IT_TYPE], "message")) {
        if (s->open >= 0 && s->slot[s->open].kind == SK_TEXT && s->slot[s->open].out == out &&
            !close_open(s, e))
            return GW_OK;
        if (message_said(s, out))
            return GW_OK;
        /* nothing streamed: the item's text */
        if (!ensure_started(s, e) || !close_open(s, e))
            return GW_OK;
        return emit_item(e, j, it, &s->next, &s->tool_called);
    }
    if (dl_anthropic_is(j, &it[IT_TYPE], "function_call")) {
        i = slot_find(s, SK_TOOL, out, 0);
        if (i < 0)
            i = slot_start(s, e, SK_TOOL, out, 0, j, it, &nomem);
        if (i < 0)
            return nomem ? GW_E_NOMEM : GW_OK;
        if (!(s->slot[i].flags & SF_CONTENT)) {
            s->slot[i].flags |= SF_CONTENT;
            rc = emit_field(e, s->slot[i].canon, DL_BLOCK_TOOL_CALL, j, &it[IT_ARGUMENTS], false);
        }
    } else if (dl_anthropic_is(j, &it[IT_TYPE], "reasoning")) {
        i = slot_find(s, SK_REASONING, out, 0);
        if (i < 0)
            i = slot_start(s, e, SK_REASONING, out, 0, j, NULL, &nomem);
        if (i < 0)
            return GW_OK;
        if (!(s->slot[i].flags & SF_CONTENT)) {
            s->slot[i].flags |= SF_CONTENT;
            if (it[IT_SUMMARY].kind == DA_ARR)
                rc =
                    emit_texts(e, j, it[IT_SUMMARY].at, s->slot[i].canon, DL_BLOCK_REASONING, &any);
            if (rc == GW_OK && !any && it[IT_CONTENT].kind == DA_ARR)
                rc =
                    emit_texts(e, j, it[IT_CONTENT].at, s->slot[i].canon, DL_BLOCK_REASONING, &any);
        }
        if (rc == GW_OK)
            rc = emit_field(e, s->slot[i].canon, DL_BLOCK_REASONING, j, &it[IT_ENC], true);
    } else {
        return GW_OK; /* hosted tools' items: not modelled */
    }
    if (rc == GW_OK && i == s->open)
        close_open(s, e);
    return rc;
}

/* Events naming an output item: added, done, parts, deltas. */
static enum gw_code
on_scoped(struct ep *s, enum ev_kind kind, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field it[IT__COUNT] = ITEM_FIELDS;
    struct dl_anth_field part[] = {DL_ANTH_FIELD("type")};
    struct dl_anth_field f[SF__COUNT] = SCOPED_FIELDS;

    f[SF_ITEM].sub = it;
    f[SF_ITEM].nsub = IT__COUNT;
    f[SF_PART].sub = part;
    f[SF_PART].nsub = 1;
    if (!dl_anthropic_fields(j, f, SF__COUNT) || !dl_json_end(j))
        return scan_failed(j);
    switch (kind) {
    case EV_ITEM_ADDED:
    case EV_ITEM_DONE:
        if (f[SF_ITEM].kind != DA_OBJ || !check_item(j, it))
            return GW_E_UPSTREAM_PROTOCOL;
        return kind == EV_ITEM_ADDED ? on_item_added(s, j, f, it, e) : on_item_done(s, j, f, it, e);
    case EV_PART_ADDED:
        if (f[SF_PART].kind != DA_OBJ)
            return GW_E_UPSTREAM_PROTOCOL;
        return on_part_added(s, j, f, part, e);
    case EV_PART_DONE: return on_part_done(s, j, f, e);
    case EV_TEXT_DELTA:
    case EV_ARGS_DELTA:
    case EV_SUMMARY_DELTA:
    case EV_REASONING_DELTA: return on_delta(s, kind, j, f, e);
    default: break;
    }
    return GW_OK;
}

/* response.completed, response.incomplete, response.failed. */
static enum gw_code
on_final(struct ep *s, enum ev_kind kind, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field cached[] = {DL_ANTH_FIELD("cached_tokens")};
    struct dl_anth_field reasoning[] = {DL_ANTH_FIELD("reasoning_tokens")};
    struct dl_anth_field u[] = USAGE_FIELDS;
    struct dl_anth_field reason[] = {DL_ANTH_FIELD("reason")};
    struct dl_anth_field err[] = ERROR_FIELDS;
    struct dl_anth_field r[] = {DL_ANTH_FIELD("id"),     DL_ANTH_FIELD("model"),
                                DL_ANTH_FIELD("status"), DL_ANTH_FIELD("usage"),
                                DL_ANTH_FIELD("output"), DL_ANTH_FIELD("incomplete_details"),
                                DL_ANTH_FIELD("error"),  DL_ANTH_FIELD("created_at")};
    struct dl_anth_field top[] = {DL_ANTH_FIELD("response")};
    struct dl_event ev = {.kind = DL_EV_USAGE};
    bool from_output;

    u[2].sub = cached;
    u[2].nsub = 1;
    u[3].sub = reasoning;
    u[3].nsub = 1;
    r[3].sub = u;
    r[3].nsub = 4;
    r[5].sub = reason;
    r[5].nsub = 1;
    r[6].sub = err;
    r[6].nsub = 3;
    top[0].sub = r;
    top[0].nsub = 8;
    if (!dl_anthropic_fields(j, top, 1) || !dl_json_end(j))
        return scan_failed(j);
    if (top[0].kind != DA_OBJ)
        return GW_E_UPSTREAM_PROTOCOL;
    from_output = s->next == 0 && r[4].kind == DA_ARR;
    if (from_output && !check_output(j, r[4].at))
        return GW_E_UPSTREAM_PROTOCOL;
    if (r[3].kind == DA_OBJ && !usage_read(j, u, cached, reasoning, &ev.usage))
        return GW_E_NOMEM;
    s->done = true;
    if (!s->started) {
        struct dl_event sv = {.kind = DL_EV_START};
        struct dl_json_text id, model;

        if (!txt_field(&id, j, &r[0]))
            return GW_E_NOMEM;
        if (!txt_field(&model, j, &r[1])) {
            dl_json_text_fini(&id);
            return GW_E_NOMEM;
        }
        sv.id = id.s;
        sv.model = model.s;
        if (r[7].kind == DA_NUM)
            (void)dl_json_num_count(j, &r[7].num, &sv.created);
        s->started = true;
        dl_emit(e, &sv);
        dl_json_text_fini(&id);
        dl_json_text_fini(&model);
    }
    if (!close_open(s, e))
        return GW_OK;
    if (from_output) {
        enum gw_code rc = emit_output(e, j, r[4].at, &s->next, &s->tool_called);

        if (rc != GW_OK || e->stopped)
            return rc;
    }
    if (r[3].kind == DA_OBJ && !dl_emit(e, &ev))
        return GW_OK;
    if (kind == EV_FAILED || dl_anthropic_is(j, &r[2], "failed"))
        return emit_error(e, j, err);
    ev = (struct dl_event){.kind = DL_EV_FINISH};
    ev.finish = finish_of(j, &r[2], &reason[0], kind == EV_INCOMPLETE, s->tool_called);
    if (ev.finish == DL_FINISH_NONE)
        ev.finish = s->tool_called ? DL_FINISH_TOOL_CALLS : DL_FINISH_STOP;
    dl_emit(e, &ev);
    return GW_OK;
}

static enum gw_code
on_error(struct ep *s, struct dl_json *j, struct dl_emitter *e)
{
    struct dl_anth_field nested[] = ERROR_FIELDS;
    struct dl_anth_field top[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("code"),
                                  DL_ANTH_FIELD("message"), DL_ANTH_FIELD("error")};

    top[3].sub = nested;
    top[3].nsub = 3;
    if (!dl_anthropic_fields(j, top, 4) || !dl_json_end(j))
        return scan_failed(j);
    s->done = true;
    /* {"type":"error","code","message"}, or the error object nested */
    if (top[3].kind == DA_OBJ)
        return emit_error(e, j, nested);
    top[0].kind = DA_ABSENT; /* "error", the event's own type */
    return emit_error(e, j, top);
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
        return scan_failed(&j);
    if (!txt_field(&t, &j, &top[0]))
        return GW_E_NOMEM;
    *kind = top[0].kind == DA_STR ? ev_kind_of(t.s) : EV_OTHER;
    dl_json_text_fini(&t);
    return GW_OK;
}

enum gw_code
dl_responses_event_parse(struct dl_parse_state *st, struct gw_str event, struct gw_str data,
                         dl_event_fn fn, void *arg)
{
    struct ep *s = (struct ep *)st;
    struct dl_emitter e = {fn, arg, false};
    enum ev_kind kind;
    struct dl_json j;

    if (s->done)
        return GW_OK;
    if (event.len) {
        kind = ev_kind_of(event);
    } else {
        enum gw_code rc = unnamed_kind(data, &kind);

        if (rc != GW_OK)
            return rc;
    }
    if (kind == EV_OTHER)
        return GW_OK;
    dl_json_init(&j, data.ptr, data.len);
    switch (kind) {
    case EV_CREATED:
    case EV_IN_PROGRESS: return on_start(s, &j, &e);
    case EV_COMPLETED:
    case EV_INCOMPLETE:
    case EV_FAILED: return on_final(s, kind, &j, &e);
    case EV_ERROR: return on_error(s, &j, &e);
    case EV_OTHER: break;
    default: return on_scoped(s, kind, &j, &e);
    }
    return GW_OK;
}

/* ---- upstream side: a non-streamed answer ---- */

enum gw_code
dl_responses_answer_parse(const char *body, size_t len, dl_event_fn fn, void *arg)
{
    struct dl_anth_field cached[] = {DL_ANTH_FIELD("cached_tokens")};
    struct dl_anth_field reasoning[] = {DL_ANTH_FIELD("reasoning_tokens")};
    struct dl_anth_field u[] = USAGE_FIELDS;
    struct dl_anth_field reason[] = {DL_ANTH_FIELD("reason")};
    struct dl_anth_field err[] = ERROR_FIELDS;
    struct dl_anth_field top[] = {DL_ANTH_FIELD("id"),     DL_ANTH_FIELD("model"),
                                  DL_ANTH_FIELD("status"), DL_ANTH_FIELD("usage"),
                                  DL_ANTH_FIELD("output"), DL_ANTH_FIELD("incomplete_details"),
                                  DL_ANTH_FIELD("error"),  DL_ANTH_FIELD("created_at")};
    struct dl_emitter e = {fn, arg, false};
    struct dl_event ev = {.kind = DL_EV_START};
    struct gw_usage usage = {0};
    bool tool_called = false;
    uint32_t next = 0;
    struct dl_json_text id, model;
    struct dl_json j;
    enum gw_code rc;

    u[2].sub = cached;
    u[2].nsub = 1;
    u[3].sub = reasoning;
    u[3].nsub = 1;
    top[3].sub = u;
    top[3].nsub = 4;
    top[5].sub = reason;
    top[5].nsub = 1;
    top[6].sub = err;
    top[6].nsub = 3;
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !dl_anthropic_fields(&j, top, 8) || !dl_json_end(&j))
        return scan_failed(&j);
    if (top[4].kind != DA_ARR) {
        if (top[6].kind != DA_OBJ)
            return GW_E_UPSTREAM_PROTOCOL;
        return emit_error(&e, &j, err); /* an error body */
    }
    /* every item is checked before the first event: a malformed answer emits nothing */
    if (!check_output(&j, top[4].at))
        return GW_E_UPSTREAM_PROTOCOL;
    if (top[3].kind == DA_OBJ && !usage_read(&j, u, cached, reasoning, &usage))
        return GW_E_NOMEM;
    if (top[7].kind == DA_NUM && !dl_json_num_count(&j, &top[7].num, &ev.created))
        return GW_E_NOMEM;
    if (!txt_field(&id, &j, &top[0]))
        return GW_E_NOMEM;
    if (!txt_field(&model, &j, &top[1])) {
        dl_json_text_fini(&id);
        return GW_E_NOMEM;
    }
    ev.id = id.s;
    ev.model = model.s;
    dl_emit(&e, &ev);
    dl_json_text_fini(&id);
    dl_json_text_fini(&model);
    rc = emit_output(&e, &j, top[4].at, &next, &tool_called);
    if (rc != GW_OK || e.stopped)
        return rc;
    if (top[3].kind == DA_OBJ) {
        struct dl_event uv = {.kind = DL_EV_USAGE, .usage = usage};

        if (!dl_emit(&e, &uv))
            return GW_OK;
    }
    if (dl_anthropic_is(&j, &top[2], "failed"))
        return emit_error(&e, &j, err);
    ev = (struct dl_event){.kind = DL_EV_FINISH};
    ev.finish = finish_of(&j, &top[2], &reason[0], false, tool_called);
    dl_emit(&e, &ev);
    return GW_OK;
}

bool
dl_responses_answer_usage(const char *body, size_t len, struct gw_usage *usage)
{
    struct dl_anth_field cached[] = {DL_ANTH_FIELD("cached_tokens")};
    struct dl_anth_field reasoning[] = {DL_ANTH_FIELD("reasoning_tokens")};
    struct dl_anth_field u[] = USAGE_FIELDS;
    struct dl_anth_field top[] = {DL_ANTH_FIELD("usage")};
    struct dl_json j;

    memset(usage, 0, sizeof(*usage));
    u[2].sub = cached;
    u[2].nsub = 1;
    u[3].sub = reasoning;
    u[3].nsub = 1;
    top[0].sub = u;
    top[0].nsub = 4;
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !dl_anthropic_fields(&j, top, 1) || !dl_json_end(&j) ||
        top[0].kind != DA_OBJ)
        return false;
    if (!usage_read(&j, u, cached, reasoning, usage)) {
        memset(usage, 0, sizeof(*usage));
        return false;
    }
    return true;
}

/* ---- client side: the response object and its items ---- */

/* Appends "<prefix><ctx id>_<n>" as a JSON string: an item's id, or a generated call_id. */
static enum gw_code
item_id_json(struct gw_buf *out, const char *prefix, const struct dl_render_ctx *ctx, size_t n)
{
    struct gw_buf b = {0};
    enum gw_code rc = GW_E_NOMEM;

    if (gw_buf_append_cstr(&b, prefix) == GW_OK &&
        gw_buf_append_str(&b, ctx->id.len ? ctx->id : GW_STR_LIT("gw")) == GW_OK &&
        gw_buf_append_cstr(&b, "_") == GW_OK && gw_buf_append_u64(&b, n) == GW_OK)
        rc = gw_buf_append_json_str(out, (struct gw_str){b.data, b.len});
    gw_buf_fini(&b);
    return rc;
}

static const char *
item_prefix(enum dl_block kind)
{
    return kind == DL_BLOCK_TOOL_CALL ? "fc_" : kind == DL_BLOCK_REASONING ? "rs_" : "msg_";
}

static struct gw_str
buf_str(const struct gw_buf *b)
{
    return (struct gw_str){b->len ? b->data : "", b->len};
}

/* Whether block <b> is an output item (a text or reasoning block that says nothing is
 * not). */
static bool
block_is_item(const struct dl_answer_block *b)
{
    return b->block == DL_BLOCK_TOOL_CALL || b->text.len > 0 || b->signature.len > 0;
}

#define W(x)                                                                                       \
    do {                                                                                           \
        if ((x) != GW_OK)                                                                          \
            return GW_E_NOMEM;                                                                     \
    } while (0)

/* A function call's arguments as its JSON string ("{}" when none came). */
static enum gw_code
arguments_json(struct gw_buf *out, const struct dl_answer_block *b)
{
    return gw_buf_append_json_str(out, b->text.len ? buf_str(&b->text) : GW_STR_LIT("{}"));
}

/* Output item <n> of block <b>, completed. */
static enum gw_code
item_json(struct gw_buf *out, const struct dl_answer_block *b, size_t n,
          const struct dl_render_ctx *ctx)
{
    W(gw_buf_append_cstr(out, "{\"id\":"));
    W(item_id_json(out, item_prefix(b->block), ctx, n));
    switch (b->block) {
    case DL_BLOCK_TEXT:
        W(gw_buf_append_cstr(out, ",\"type\":\"message\",\"status\":\"completed\",\"role\":"
                                  "\"assistant\",\"content\":[{\"type\":\"output_text\","
                                  "\"text\":"));
        W(gw_buf_append_json_str(out, buf_str(&b->text)));
        return gw_buf_append_cstr(out, ",\"annotations\":[],\"logprobs\":[]}]}");
    case DL_BLOCK_TOOL_CALL:
        if (dl_request_freeform(ctx->req, b->name)) {
            /* a free-form tool's call: its text, not the {"input": TEXT} it went as */
            W(gw_buf_append_cstr(out, ",\"type\":\"custom_tool_call\",\"status\":"
                                      "\"completed\",\"input\":"));
            W(dl_responses_freeform_input(out, buf_str(&b->text)));
        } else {
            W(gw_buf_append_cstr(out, ",\"type\":\"function_call\",\"status\":\"completed\","
                                      "\"arguments\":"));
            W(arguments_json(out, b));
        }
        W(gw_buf_append_cstr(out, ",\"call_id\":"));
        W(b->id.len ? gw_buf_append_json_str(out, b->id) : item_id_json(out, "call_", ctx, n));
        W(gw_buf_append_cstr(out, ",\"name\":"));
        W(gw_buf_append_json_str(out, b->name.ptr ? b->name : GW_STR_LIT("")));
        return gw_buf_append_cstr(out, "}");
    case DL_BLOCK_REASONING:
        W(gw_buf_append_cstr(out, ",\"type\":\"reasoning\",\"summary\":["));
        if (b->text.len) {
            W(gw_buf_append_cstr(out, "{\"type\":\"summary_text\",\"text\":"));
            W(gw_buf_append_json_str(out, buf_str(&b->text)));
            W(gw_buf_append_cstr(out, "}"));
        }
        W(gw_buf_append_cstr(out, "]"));
        if (b->signature.len) {
            W(gw_buf_append_cstr(out, ",\"encrypted_content\":"));
            W(dl_sig_append_json(out, DL_SHAPE_RESPONSES, ctx->upstream, buf_str(&b->signature)));
        }
        return gw_buf_append_cstr(out, "}");
    }
    return GW_OK;
}

static enum gw_code
items_json(struct gw_buf *out, const struct dl_answer *a, const struct dl_render_ctx *ctx)
{
    size_t k, n = 0;

    W(gw_buf_append_cstr(out, "["));
    for (k = 0; a && k < a->n_blocks; k++) {
        if (!block_is_item(&a->blocks[k]))
            continue;
        if (n)
            W(gw_buf_append_cstr(out, ","));
        W(item_json(out, &a->blocks[k], n, ctx));
        n++;
    }
    return gw_buf_append_cstr(out, "]");
}

enum gw_code
dl_responses_output_items(const struct dl_answer *a, const struct dl_render_ctx *ctx,
                          struct gw_buf *out)
{
    size_t start = out->len;

    if (items_json(out, a, ctx) != GW_OK) {
        dl_responses_restore(out, start);
        return GW_E_NOMEM;
    }
    return GW_OK;
}

static enum gw_code
usage_json(struct gw_buf *out, const struct gw_usage *u)
{
    uint64_t in = u->input_tokens + u->cache_read_tokens + u->cache_write_tokens;

    W(gw_buf_append_cstr(out, "{\"input_tokens\":"));
    W(gw_buf_append_u64(out, in));
    W(gw_buf_append_cstr(out, ",\"input_tokens_details\":{\"cached_tokens\":"));
    W(gw_buf_append_u64(out, u->cache_read_tokens));
    W(gw_buf_append_cstr(out, "},\"output_tokens\":"));
    W(gw_buf_append_u64(out, u->output_tokens));
    W(gw_buf_append_cstr(out, ",\"output_tokens_details\":{\"reasoning_tokens\":"));
    W(gw_buf_append_u64(out, u->reasoning_tokens));
    W(gw_buf_append_cstr(out, "},\"total_tokens\":"));
    W(gw_buf_append_u64(out, in + u->output_tokens));
    return gw_buf_append_cstr(out, "}");
}

/* Why a final response failed, in the gateway's words: the code and message of its error
 * object ({"code":"server_error", "message", "gw_code"}). */
struct failure {
    enum gw_code code;
    struct gw_str message;
};

static const struct failure upstream_failed = {GW_E_UPSTREAM_FAILED,
                                               {"the upstream failed during the answer", 37}};

/* The response object: in progress (<a> may be NULL: no output, no usage yet), or final
 * from answer <a>, failed when <fail> is given or the answer failed. */
static enum gw_code
response_json(struct gw_buf *out, const struct dl_answer *a, const struct dl_render_ctx *ctx,
              bool final, const struct failure *fail)
{
    bool failed = final && (fail || (a && (a->failed || a->finish == DL_FINISH_ERROR)));
    const char *status =
        !final   ? "in_progress"
        : failed ? "failed"
        : a && (a->finish == DL_FINISH_LENGTH || a->finish == DL_FINISH_CONTENT_FILTER)
            ? "incomplete"
            : "completed";
    uint64_t created = a && a->created ? a->created : ctx->created;
    struct gw_str model = ctx->model.len ? ctx->model : a ? a->model : GW_STR_LIT("");

    if (failed && !fail)
        fail = &upstream_failed;
    W(gw_buf_append_cstr(out, "{\"id\":"));
    W(dl_responses_id_json(out, ctx));
    W(gw_buf_append_cstr(out, ",\"object\":\"response\",\"created_at\":"));
    W(gw_buf_append_u64(out, created));
    W(gw_buf_append_cstr(out, ",\"status\":\""));
    W(gw_buf_append_cstr(out, status));
    W(gw_buf_append_cstr(out, "\",\"error\":"));
    if (failed) {
        /* the unavailable error (DESIGN.md 11): Codex retries server_error */
        W(gw_buf_append_cstr(out, "{\"code\":\"server_error\",\"message\":"));
        W(gw_buf_append_json_str(out, fail->message));
        W(gw_buf_append_cstr(out, ",\"gw_code\":"));
        W(gw_buf_append_json_str(out, gw_str_c(gw_code_str(fail->code))));
        W(gw_buf_append_cstr(out, "}"));
    } else {
        W(gw_buf_append_cstr(out, "null"));
    }
    W(gw_buf_append_cstr(out, ",\"incomplete_details\":"));
    if (final && !failed && a && a->finish == DL_FINISH_LENGTH)
        W(gw_buf_append_cstr(out, "{\"reason\":\"max_output_tokens\"}"));
    else if (final && !failed && a && a->finish == DL_FINISH_CONTENT_FILTER)
        W(gw_buf_append_cstr(out, "{\"reason\":\"content_filter\"}"));
    else
        W(gw_buf_append_cstr(out, "null"));
    W(gw_buf_append_cstr(out, ",\"instructions\":null,\"metadata\":{},\"model\":"));
    W(gw_buf_append_json_str(out, model.ptr ? model : GW_STR_LIT("")));
    W(gw_buf_append_cstr(out, ",\"output\":"));
    if (final)
        W(items_json(out, a, ctx));
    else
        W(gw_buf_append_cstr(out, "[]"));
    W(gw_buf_append_cstr(out, ",\"parallel_tool_calls\":true,\"temperature\":null,"
                              "\"tool_choice\":\"auto\",\"tools\":[],\"top_p\":null,"
                              "\"usage\":"));
    if (final && a && a->usage_seen)
        W(usage_json(out, &a->usage));
    else
        W(gw_buf_append_cstr(out, "null"));
    return gw_buf_append_cstr(out, "}");
}

enum gw_code
dl_responses_answer_render(const struct dl_answer *a, const struct dl_render_ctx *ctx,
                           struct gw_buf *out)
{
    size_t start = out->len;

    if (response_json(out, a, ctx, true, NULL) != GW_OK) {
        dl_responses_restore(out, start);
        return GW_E_NOMEM;
    }
    return GW_OK;
}

/* ---- client side: frames ---- */

/* Function calls open at once (see the header comment). */
#define ER_TOOLS 16

struct er {
    struct dl_render_ctx ctx;
    struct dl_answer *ans;         /* what was rendered, one block per output item (ctx.arena) */
    uint64_t seq;                  /* the next sequence_number */
    uint32_t n_out;                /* output items added */
    uint32_t open_canon;           /* the canonical block of the open text or reasoning item */
    uint32_t open_out;             /* its output index, when <item> */
    uint32_t tool_canon[ER_TOOLS]; /* calls started and not done, in order: canonical index */
    uint32_t tool_out[ER_TOOLS];   /* ... and output index; the first is live (its item
                                    * added, its deltas written), the others wait their
                                    * turn (folded only), so calls come one after another
                                    * as the API writes them */
    bool tool_stopped[ER_TOOLS];   /* ... its upstream block stopped */
    uint8_t n_tools;
    uint8_t open_kind; /* enum dl_block */
    bool open;         /* a text or reasoning block is open */
    bool item;         /* ... and its item was added (it said something) */
    bool summary;      /* ... and, reasoning, its summary part was added */
    bool started;      /* response.created written */
    bool finish_held;  /* FINISH seen */
    bool ended;        /* the final frame written */
};

static_assert(sizeof(struct er) <= sizeof(struct dl_render_state), "render state too small");

void
dl_responses_render_init(struct dl_render_state *st, const struct dl_render_ctx *ctx)
{
    struct er *s = (struct er *)st;

    memset(st, 0, sizeof(*st));
    s->ctx = *ctx;
}

static void
answer_free(void *arg)
{
    dl_answer_fini(arg);
}

/* The render state's answer, made at the first need (the arena frees it). */
static enum gw_code
ensure_answer(struct er *s)
{
    struct dl_answer *a;

    if (s->ans)
        return GW_OK;
    if (!s->ctx.arena)
        return GW_E_NOMEM; /* the renderer needs an arena (canon.h: ctx->arena) */
    a = gw_arena_calloc(s->ctx.arena, 1, sizeof(*a));
    if (!a)
        return GW_E_NOMEM;
    dl_answer_init(a, s->ctx.arena);
    if (!gw_arena_on_free(s->ctx.arena, answer_free, a))
        return GW_E_NOMEM;
    s->ans = a;
    return GW_OK;
}

static enum gw_code
fold(struct er *s, const struct dl_event *ev)
{
    return dl_answer_fold(s->ans, ev) == 0 ? GW_OK : GW_E_NOMEM;
}

/* "event: <type>\ndata: {"type":"<type>","sequence_number":N" */
static enum gw_code
frame_open(struct er *s, struct gw_buf *out, const char *type)
{
    W(gw_buf_append_cstr(out, "event: "));
    W(gw_buf_append_cstr(out, type));
    W(gw_buf_append_cstr(out, "\ndata: {\"type\":\""));
    W(gw_buf_append_cstr(out, type));
    W(gw_buf_append_cstr(out, "\",\"sequence_number\":"));
    return gw_buf_append_u64(out, s->seq++);
}

static enum gw_code
frame_close(struct gw_buf *out)
{
    return gw_buf_append_cstr(out, "}\n\n");
}

/* A frame of <type> whose only other member is the response object. */
static enum gw_code
frame_response(struct er *s, struct gw_buf *out, const char *type, bool final,
               const struct failure *fail)
{
    W(frame_open(s, out, type));
    W(gw_buf_append_cstr(out, ",\"response\":"));
    W(response_json(out, s->ans, &s->ctx, final, fail));
    return frame_close(out);
}

/* ,"item_id":<id>,"output_index":<n> */
static enum gw_code
scoped(struct er *s, struct gw_buf *out, enum dl_block kind, uint32_t n)
{
    W(gw_buf_append_cstr(out, ",\"item_id\":"));
    W(item_id_json(out, item_prefix(kind), &s->ctx, n));
    W(gw_buf_append_cstr(out, ",\"output_index\":"));
    return gw_buf_append_u64(out, n);
}

static enum gw_code
ensure_created(struct er *s, struct gw_buf *out)
{
    if (s->started)
        return GW_OK;
    W(ensure_answer(s));
    s->started = true;
    W(frame_response(s, out, "response.created", false, NULL));
    return frame_response(s, out, "response.in_progress", false, NULL);
}

/* response.output_item.done of item <n>. */
static enum gw_code
item_done(struct er *s, struct gw_buf *out, uint32_t n)
{
    W(frame_open(s, out, "response.output_item.done"));
    W(gw_buf_append_cstr(out, ",\"output_index\":"));
    W(gw_buf_append_u64(out, n));
    W(gw_buf_append_cstr(out, ",\"item\":"));
    W(item_json(out, &s->ans->blocks[n], n, &s->ctx));
    return frame_close(out);
}

/* The .done frames of call <k> (its output item <n>). */
static enum gw_code
call_done(struct er *s, struct gw_buf *out, uint32_t n)
{
    const struct dl_answer_block *b = &s->ans->blocks[n];

    if (!dl_request_freeform(s->ctx.req, b->name)) {
        /* (a free-form call has its text whole in output_item.done: its arguments
         * came as {"input": ...} fragments, not the text's) */
        W(frame_open(s, out, "response.function_call_arguments.done"));
        W(scoped(s, out, DL_BLOCK_TOOL_CALL, n));
        W(gw_buf_append_cstr(out, ",\"name\":"));
        W(gw_buf_append_json_str(out, b->name.ptr ? b->name : GW_STR_LIT("")));
        W(gw_buf_append_cstr(out, ",\"arguments\":"));
        W(arguments_json(out, b));
        W(frame_close(out));
    }
    return item_done(s, out, n);
}

static enum gw_code item_added_frame(struct er *s, struct gw_buf *out, uint32_t n);
static enum gw_code args_delta_frame(struct er *s, struct gw_buf *out, uint32_t n,
                                     struct gw_str delta);

/* Closes the live call; the next one's turn comes: its item is added and what its
 * arguments hold so far written as one delta (and closed too when its block stopped). */
static enum gw_code
close_live_call(struct er *s, struct gw_buf *out)
{
    uint32_t n = s->tool_out[0];
    const struct dl_answer_block *b;

    W(call_done(s, out, n));
    s->n_tools--;
    memmove(s->tool_canon, s->tool_canon + 1, s->n_tools * sizeof(s->tool_canon[0]));
    memmove(s->tool_out, s->tool_out + 1, s->n_tools * sizeof(s->tool_out[0]));
    memmove(s->tool_stopped, s->tool_stopped + 1, s->n_tools * sizeof(s->tool_stopped[0]));
    if (s->n_tools == 0)
        return GW_OK;
    n = s->tool_out[0];
    b = &s->ans->blocks[n];
    W(item_added_frame(s, out, n));
    if (b->text.len && !dl_request_freeform(s->ctx.req, b->name))
        W(args_delta_frame(s, out, n, buf_str(&b->text)));
    return s->tool_stopped[0] ? close_live_call(s, out) : GW_OK;
}

/* The .done frames of the calls still open, in order. */
static enum gw_code
tools_done(struct er *s, struct gw_buf *out)
{
    while (s->n_tools)
        W(close_live_call(s, out));
    return GW_OK;
}

/* The .done frames of the open text or reasoning item; the block is closed. */
static enum gw_code
close_item(struct er *s, struct gw_buf *out)
{
    const struct dl_answer_block *b;
    struct gw_str text;
    bool reasoning = s->open_kind == DL_BLOCK_REASONING;

    if (!s->open)
        return GW_OK;
    s->open = false;
    if (!s->item)
        return GW_OK; /* it said nothing: no item */
    b = &s->ans->blocks[s->open_out];
    text = buf_str(&b->text);
    if (!reasoning || s->summary) {
        W(frame_open(s, out,
                     reasoning ? "response.reasoning_summary_text.done"
                               : "response.output_text.done"));
        W(scoped(s, out, (enum dl_block)s->open_kind, s->open_out));
        W(gw_buf_append_cstr(out, reasoning ? ",\"summary_index\":0,\"text\":"
                                            : ",\"content_index\":0,\"text\":"));
        W(gw_buf_append_json_str(out, text));
        W(gw_buf_append_cstr(out, reasoning ? "" : ",\"logprobs\":[]"));
        W(frame_close(out));
        W(frame_open(s, out,
                     reasoning ? "response.reasoning_summary_part.done"
                               : "response.content_part.done"));
        W(scoped(s, out, (enum dl_block)s->open_kind, s->open_out));
        W(gw_buf_append_cstr(out, reasoning ? ",\"summary_index\":0,\"part\":{\"type\":"
                                              "\"summary_text\",\"text\":"
                                            : ",\"content_index\":0,\"part\":{\"type\":"
                                              "\"output_text\",\"text\":"));
        W(gw_buf_append_json_str(out, text));
        W(gw_buf_append_cstr(out, reasoning ? "}" : ",\"annotations\":[],\"logprobs\":[]}"));
        W(frame_close(out));
    }
    return item_done(s, out, s->open_out);
}

/* response.output_item.added of item <n> of <kind> (a call: <id>, <name>), folded as
 * block <n>. */
static enum gw_code
item_added(struct er *s, struct gw_buf *out, enum dl_block kind, struct gw_str id,
           struct gw_str name)
{
    uint32_t n = s->n_out++;
    struct dl_event bs = {.kind = DL_EV_BLOCK_START, .index = n, .block = kind};
    struct gw_buf gen = {0};

    if (kind == DL_BLOCK_TOOL_CALL && id.len == 0) {
        /* a call without an id (never from a shape that gives them): a stable one */
        if (item_id_json(&gen, "call_", &s->ctx, n) != GW_OK) {
            gw_buf_fini(&gen);
            return GW_E_NOMEM;
        }
        id = (struct gw_str){gen.data + 1, gen.len - 2};
    }
    bs.id = id;
    bs.name = name;
    if (fold(s, &bs) != GW_OK) {
        gw_buf_fini(&gen);
        return GW_E_NOMEM;
    }
    gw_buf_fini(&gen);
    /* a call while another is live waits its turn (close_live_call) */
    if (kind == DL_BLOCK_TOOL_CALL && s->n_tools > 0)
        return GW_OK;
    return item_added_frame(s, out, n);
}

/* response.output_item.added of item <n> (folded already), and for a message its
 * content_part.added. */
static enum gw_code
item_added_frame(struct er *s, struct gw_buf *out, uint32_t n)
{
    enum dl_block kind = s->ans->blocks[n].block;
    struct gw_str name = s->ans->blocks[n].name;

    W(frame_open(s, out, "response.output_item.added"));
    W(gw_buf_append_cstr(out, ",\"output_index\":"));
    W(gw_buf_append_u64(out, n));
    W(gw_buf_append_cstr(out, ",\"item\":{\"id\":"));
    W(item_id_json(out, item_prefix(kind), &s->ctx, n));
    switch (kind) {
    case DL_BLOCK_TEXT:
        W(gw_buf_append_cstr(out, ",\"type\":\"message\",\"status\":\"in_progress\",\"role\":"
                                  "\"assistant\",\"content\":[]}"));
        break;
    case DL_BLOCK_TOOL_CALL:
        W(gw_buf_append_cstr(out, dl_request_freeform(s->ctx.req, name)
                                      ? ",\"type\":\"custom_tool_call\",\"status\":"
                                        "\"in_progress\",\"input\":\"\",\"call_id\":"
                                      : ",\"type\":\"function_call\",\"status\":\"in_progress\","
                                        "\"arguments\":\"\",\"call_id\":"));
        W(gw_buf_append_json_str(out, s->ans->blocks[n].id));
        W(gw_buf_append_cstr(out, ",\"name\":"));
        W(gw_buf_append_json_str(out, s->ans->blocks[n].name));
        W(gw_buf_append_cstr(out, "}"));
        break;
    case DL_BLOCK_REASONING:
        W(gw_buf_append_cstr(out, ",\"type\":\"reasoning\",\"summary\":[]}"));
        break;
    }
    W(frame_close(out));
    if (kind != DL_BLOCK_TEXT)
        return GW_OK;
    W(frame_open(s, out, "response.content_part.added"));
    W(scoped(s, out, kind, n));
    W(gw_buf_append_cstr(out, ",\"content_index\":0,\"part\":{\"type\":\"output_text\",\"text\":"
                              "\"\",\"annotations\":[],\"logprobs\":[]}"));
    return frame_close(out);
}

static enum gw_code
on_tool_start(struct er *s, const struct dl_event *ev, struct gw_buf *out)
{
    W(close_item(s, out));
    if (s->n_tools == ER_TOOLS)
        W(tools_done(s, out));
    W(item_added(s, out, DL_BLOCK_TOOL_CALL, ev->id, ev->name));
    s->tool_stopped[s->n_tools] = false;
    s->tool_canon[s->n_tools] = ev->index;
    s->tool_out[s->n_tools++] = s->n_out - 1;
    return GW_OK;
}

static enum gw_code
on_tool_delta(struct er *s, const struct dl_event *ev, struct gw_buf *out)
{
    struct dl_event d = *ev;
    uint8_t k;

    for (k = 0; k < s->n_tools && s->tool_canon[k] != ev->index; k++)
        ;
    if (k == s->n_tools || ev->text.len == 0)
        return GW_OK; /* a call done already (or never started): not rendered */
    d.index = s->tool_out[k];
    d.signature = (struct gw_str){"", 0};
    W(fold(s, &d));
    if (k > 0 || dl_request_freeform(s->ctx.req, s->ans->blocks[s->tool_out[k]].name))
        return GW_OK; /* written when its turn comes / whole when done */
    return args_delta_frame(s, out, s->tool_out[k], ev->text);
}

static enum gw_code
args_delta_frame(struct er *s, struct gw_buf *out, uint32_t n, struct gw_str delta)
{
    W(frame_open(s, out, "response.function_call_arguments.delta"));
    W(scoped(s, out, DL_BLOCK_TOOL_CALL, n));
    W(gw_buf_append_cstr(out, ",\"delta\":"));
    W(gw_buf_append_json_str(out, delta));
    return frame_close(out);
}

/* A call's block stopped. Its arguments are whole then, except from a Chat upstream:
 * some Chat servers interleave parallel calls' arguments after the next call starts,
 * so a Chat upstream's calls stay open until text or the finish. */
static enum gw_code
on_tool_stop(struct er *s, const struct dl_event *ev, struct gw_buf *out)
{
    uint8_t k;

    if (s->ctx.upstream == DL_SHAPE_CHAT)
        return GW_OK;
    for (k = 0; k < s->n_tools && s->tool_canon[k] != ev->index; k++)
        ;
    if (k == s->n_tools)
        return GW_OK;
    s->tool_stopped[k] = true;
    return k == 0 ? close_live_call(s, out) : GW_OK;
}

/* A text or reasoning delta: the block's item is added at its first content. */
static enum gw_code
on_content_delta(struct er *s, const struct dl_event *ev, struct gw_buf *out)
{
    struct dl_event d = *ev;
    bool reasoning = ev->block == DL_BLOCK_REASONING;

    if (!s->open || s->open_canon != ev->index || s->open_kind != ev->block) {
        /* a delta of a block never started here (or closed): a new item */
        W(close_item(s, out));
        s->open = true;
        s->item = s->summary = false;
        s->open_canon = ev->index;
        s->open_kind = (uint8_t)ev->block;
    }
    if (ev->text.len == 0 && (!reasoning || ev->signature.len == 0))
        return GW_OK;
    if (!s->item) {
        W(tools_done(s, out));
        W(item_added(s, out, ev->block, (struct gw_str){"", 0}, (struct gw_str){"", 0}));
        s->item = true;
        s->open_out = s->n_out - 1;
    }
    d.index = s->open_out;
    if (!reasoning)
        d.signature = (struct gw_str){"", 0};
    W(fold(s, &d));
    if (ev->text.len == 0)
        return GW_OK; /* a signature: in the item's encrypted_content at its done */
    if (reasoning && !s->summary) {
        W(frame_open(s, out, "response.reasoning_summary_part.added"));
        W(scoped(s, out, DL_BLOCK_REASONING, s->open_out));
        W(gw_buf_append_cstr(out, ",\"summary_index\":0,\"part\":{\"type\":\"summary_text\","
                                  "\"text\":\"\"}"));
        W(frame_close(out));
        s->summary = true;
    }
    W(frame_open(s, out,
                 reasoning ? "response.reasoning_summary_text.delta"
                           : "response.output_text.delta"));
    W(scoped(s, out, ev->block, s->open_out));
    W(gw_buf_append_cstr(out, reasoning ? ",\"summary_index\":0,\"delta\":"
                                        : ",\"content_index\":0,\"delta\":"));
    W(gw_buf_append_json_str(out, ev->text));
    W(gw_buf_append_cstr(out, reasoning ? "" : ",\"logprobs\":[]"));
    return frame_close(out);
}

/* The final frame: the answer as it stands, by its finish. */
static enum gw_code
write_final(struct er *s, struct gw_buf *out)
{
    const struct dl_answer *a = s->ans;
    const char *type = a->failed || a->finish == DL_FINISH_ERROR ? "response.failed"
                       : a->finish == DL_FINISH_LENGTH || a->finish == DL_FINISH_CONTENT_FILTER
                           ? "response.incomplete"
                           : "response.completed";

    W(close_item(s, out));
    W(tools_done(s, out));
    s->ended = true;
    return frame_response(s, out, type, true, NULL);
}

static enum gw_code
render_one(struct er *s, const struct dl_event *ev, struct gw_buf *out)
{
    if (s->ended)
        return GW_OK;
    W(ensure_answer(s));
    switch (ev->kind) {
    case DL_EV_START: W(fold(s, ev)); return ensure_created(s, out);
    case DL_EV_USAGE: return fold(s, ev);
    case DL_EV_ERROR:
        W(ensure_created(s, out));
        W(fold(s, ev));
        return write_final(s, out);
    case DL_EV_BLOCK_START:
    case DL_EV_DELTA:
    case DL_EV_BLOCK_STOP:
    case DL_EV_FINISH: break;
    }
    W(ensure_created(s, out));
    if (s->finish_held)
        return GW_OK; /* content after the finish is not part of the answer */
    switch (ev->kind) {
    case DL_EV_BLOCK_START:
        if (ev->block == DL_BLOCK_TOOL_CALL)
            return on_tool_start(s, ev, out);
        W(close_item(s, out));
        s->open = true;
        s->item = s->summary = false;
        s->open_canon = ev->index;
        s->open_kind = (uint8_t)ev->block;
        return GW_OK;
    case DL_EV_DELTA:
        if (ev->block == DL_BLOCK_TOOL_CALL)
            return on_tool_delta(s, ev, out);
        return on_content_delta(s, ev, out);
    case DL_EV_BLOCK_STOP:
        if (s->open && s->open_canon == ev->index)
            return close_item(s, out);
        return on_tool_stop(s, ev, out);
    case DL_EV_FINISH: s->finish_held = true; return fold(s, ev);
    case DL_EV_START:
    case DL_EV_USAGE:
    case DL_EV_ERROR: break;
    }
    return GW_OK;
}

enum gw_code
dl_responses_event_render(struct dl_render_state *st, const struct dl_event *ev, struct gw_buf *out)
{
    struct er *s = (struct er *)st;
    size_t start = out->len;
    enum gw_code rc = render_one(s, ev, out);

    if (rc != GW_OK)
        dl_responses_restore(out, start);
    return rc;
}

enum gw_code
dl_responses_render_end(struct dl_render_state *st, struct gw_buf *out)
{
    struct er *s = (struct er *)st;
    size_t start = out->len;
    enum gw_code rc = GW_OK;

    if (s->ended)
        return GW_OK;
    rc = ensure_answer(s);
    if (rc == GW_OK)
        rc = ensure_created(s, out);
    if (rc == GW_OK)
        rc = write_final(s, out);
    if (rc != GW_OK)
        dl_responses_restore(out, start);
    return rc;
}

enum gw_code
dl_responses_render_failed(struct dl_render_state *st, enum gw_code code, struct gw_str message,
                           struct gw_buf *out)
{
    struct er *s = (struct er *)st;
    const struct failure fail = {code, message.len ? message : gw_str_c(gw_code_str(code))};
    size_t start = out->len;
    enum gw_code rc;

    if (s->ended)
        return GW_OK;
    rc = ensure_answer(s);
    if (rc == GW_OK)
        rc = ensure_created(s, out);
    if (rc == GW_OK) {
        /* what was said stays said: the items open are closed, as the final one holds them */
        s->ended = true;
        rc = close_item(s, out);
        if (rc == GW_OK)
            rc = tools_done(s, out);
        if (rc == GW_OK)
            rc = frame_response(s, out, "response.failed", true, &fail);
    }
    if (rc != GW_OK)
        dl_responses_restore(out, start);
    return rc;
}

const struct dl_answer *
dl_responses_render_answer(const struct dl_render_state *st)
{
    return ((const struct er *)st)->ans;
}
