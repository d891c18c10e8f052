/* SPDX-License-Identifier: MIT
 * dialects/gemini_frames.c - canonical events rendered for a Gemini client (DESIGN.md
 * 11): the streamed GenerateContentResponse chunks and the whole answer that
 * @google/genai and gemini-cli read.
 *
 * Decisions:
 * - Each chunk is {"candidates":[{"content":{"role":"model","parts":[<one part>]},
 *   "index":0}],"modelVersion":<the model the client asked for>,"responseId":<the
 *   upstream's id, else the context's>}. The role is in every chunk: @google/genai's
 *   chat history keeps a chunk's content only when it has one. With ?alt=sse each chunk
 *   is "data: <json>\r\n\r\n" as the API writes it (the SDK splits on blank lines of
 *   either kind); without (ctx->json_array) the stream is one JSON array: "[" before the
 *   first element, "\r\n," between elements, "]" after the last.
 * - Text deltas -> {"text"}; reasoning deltas -> {"text","thought":true}; a reasoning
 *   signature (a redacted block's data too) -> "thoughtSignature" on that delta's part,
 *   or alone on an empty thought part, tagged with its origin (dl_sig_append_json) so
 *   that the history the client sends back says who made it. A tool call is gathered
 *   (its arguments in the context's arena, which tool calls need) and written when its
 *   block stops, as one {"functionCall":{"id","name","args"}} part, args the arguments
 *   object without the blanks between its tokens (a data line holds no line break; {}
 *   when they are not an object, e.g. cut by max tokens), id whenever the upstream
 *   gave one or the hub generated one (@google/genai accepts it; gemini-cli echoes it
 *   in its functionResponse, which keeps calls and results paired), the call's
 *   signature as the part's thoughtSignature.
 * - FINISH is held: render_end writes the last chunk, with no part, "finishReason"
 *   (STOP; MAX_TOKENS for LENGTH; STOP for TOOL_CALLS, as Gemini says it; SAFETY for
 *   CONTENT_FILTER; OTHER for ERROR) and "usageMetadata" of the latest USAGE (so a USAGE
 *   after the FINISH counts): promptTokenCount = input + cache read + cache write,
 *   candidatesTokenCount = output, totalTokenCount, cachedContentTokenCount when some
 *   input was cached (the canonical usage has no thoughts count: thoughts are in the
 *   candidates' count). Content after the FINISH is not part of the answer.
 * - ERROR ends the stream with the unavailable error (code 503, UNAVAILABLE, DESIGN.md
 *   11; the upstream's words are not shown): an SSE data event, or in the JSON array its
 *   last element and "]" (dl_gemini_render_abort, which the pipeline calls for a stream
 *   broken without an ERROR event too).
 * - The answer: one GenerateContentResponse with every part, finishReason and
 *   usageMetadata as above.
 * Owns:    nothing beyond each call; the render state is the caller's, what it keeps
 *          lives in ctx->arena.
 * Threads: any; a state belongs to one thread at a time.
 * See:     dialects/gemini-priv.h, dialects/canon.h, tests/unit/dialects/test_gemini_frames.c,
 *          tests/fuzz/fuzz_gemini.c
 */
#include "dialects/gemini-priv.h"

#include <assert.h>
#include <string.h>

struct gr {
    struct dl_render_ctx ctx;
    struct gw_usage usage;                      /* the latest USAGE */
    struct gw_str id, model;                    /* START's (arena copies) */
    struct gw_str call_id, call_name, call_sig; /* the open tool call's (arena copies) */
    char *args;                                 /* its arguments so far (arena) */
    size_t args_len, args_cap;
    uint32_t call_index; /* its canonical index */
    uint8_t finish;      /* enum dl_finish of the held FINISH */
    bool usage_seen;
    bool finish_held;
    bool call_open;
    bool wrote; /* an element of the JSON array was written */
    bool ended; /* the last chunk or an error was written */
};

static_assert(sizeof(struct gr) <= sizeof(struct dl_render_state), "render state too small");

void
dl_gemini_render_init(struct dl_render_state *st, const struct dl_render_ctx *ctx)
{
    struct gr *s = (struct gr *)st;

    memset(st, 0, sizeof(*st));
    s->ctx = *ctx;
}

static void
restore(struct gw_buf *out, size_t start)
{
    out->len = start;
    if (out->data)
        out->data[start] = '\0';
}

/* A copy of <v> in the context's arena ("" without one or for ""). */
static struct gw_str
keep(struct gr *s, struct gw_str v, bool *nomem)
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

/* ---- chunks ---- */

static enum gw_code
element_open(struct gr *s, struct gw_buf *out)
{
    if (!s->ctx.json_array)
        return gw_buf_append_cstr(out, "data: ");
    return gw_buf_append_cstr(out, s->wrote ? "\r\n," : "[");
}

static enum gw_code
element_close(struct gr *s, struct gw_buf *out)
{
    s->wrote = true;
    return s->ctx.json_array ? GW_OK : gw_buf_append_cstr(out, "\r\n\r\n");
}

static enum gw_code
chunk_open(struct gr *s, struct gw_buf *out)
{
    if (element_open(s, out) != GW_OK ||
        gw_buf_append_cstr(out, "{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[") !=
            GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static const char *
finish_reason(enum dl_finish f)
{
    switch (f) {
    case DL_FINISH_LENGTH: return "MAX_TOKENS";
    case DL_FINISH_CONTENT_FILTER: return "SAFETY";
    case DL_FINISH_ERROR: return "OTHER";
    case DL_FINISH_NONE:
    case DL_FINISH_STOP:
    case DL_FINISH_TOOL_CALLS: break;
    }
    return "STOP";
}

static enum gw_code
usage_json(struct gw_buf *out, const struct gw_usage *u)
{
    uint64_t prompt = u->input_tokens + u->cache_read_tokens + u->cache_write_tokens;
    /* Gemini counts thoughts apart from the candidates' tokens */
    uint64_t thoughts = u->reasoning_tokens < u->output_tokens ? u->reasoning_tokens : 0;

    if (gw_buf_append_cstr(out, ",\"usageMetadata\":{\"promptTokenCount\":") != GW_OK ||
        gw_buf_append_u64(out, prompt) != GW_OK ||
        gw_buf_append_cstr(out, ",\"candidatesTokenCount\":") != GW_OK ||
        gw_buf_append_u64(out, u->output_tokens - thoughts) != GW_OK ||
        gw_buf_append_cstr(out, ",\"totalTokenCount\":") != GW_OK ||
        gw_buf_append_u64(out, prompt + u->output_tokens) != GW_OK)
        return GW_E_NOMEM;
    if (u->cache_read_tokens &&
        (gw_buf_append_cstr(out, ",\"cachedContentTokenCount\":") != GW_OK ||
         gw_buf_append_u64(out, u->cache_read_tokens) != GW_OK))
        return GW_E_NOMEM;
    if (thoughts && (gw_buf_append_cstr(out, ",\"thoughtsTokenCount\":") != GW_OK ||
                     gw_buf_append_u64(out, thoughts) != GW_OK))
        return GW_E_NOMEM;
    return gw_buf_append_cstr(out, "}");
}

/* The tail of a GenerateContentResponse after its parts. */
static enum gw_code
response_tail(struct gw_buf *out, const char *finish, const struct gw_usage *usage,
              struct gw_str model, struct gw_str id)
{
    if (gw_buf_append_cstr(out, "]}") != GW_OK)
        return GW_E_NOMEM;
    if (finish &&
        (gw_buf_append_cstr(out, ",\"finishReason\":\"") != GW_OK ||
         gw_buf_append_cstr(out, finish) != GW_OK || gw_buf_append_cstr(out, "\"") != GW_OK))
        return GW_E_NOMEM;
    if (gw_buf_append_cstr(out, ",\"index\":0}]") != GW_OK ||
        (usage && usage_json(out, usage) != GW_OK) ||
        gw_buf_append_cstr(out, ",\"modelVersion\":") != GW_OK ||
        gw_buf_append_json_str(out, model) != GW_OK ||
        gw_buf_append_cstr(out, ",\"responseId\":") != GW_OK ||
        gw_buf_append_json_str(out, id) != GW_OK || gw_buf_append_cstr(out, "}") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
chunk_close(struct gr *s, const char *finish, bool usage, struct gw_buf *out)
{
    struct gw_str model = s->ctx.model.len ? s->ctx.model : s->model;
    struct gw_str id = s->id.len ? s->id : s->ctx.id;

    if (response_tail(out, finish, usage ? &s->usage : NULL, model, id) != GW_OK)
        return GW_E_NOMEM;
    return element_close(s, out);
}

/* {"text":<text>[,"thought":true][,"thoughtSignature":<sig>]} */
static enum gw_code
text_part(struct gw_buf *out, struct gw_str text, bool thought, struct gw_str sig,
          enum dl_shape origin)
{
    if (gw_buf_append_cstr(out, "{\"text\":") != GW_OK ||
        gw_buf_append_json_str(out, text) != GW_OK ||
        (thought && gw_buf_append_cstr(out, ",\"thought\":true") != GW_OK))
        return GW_E_NOMEM;
    if (sig.len && (gw_buf_append_cstr(out, ",\"thoughtSignature\":") != GW_OK ||
                    dl_sig_append_json(out, DL_SHAPE_GEMINI, origin, sig) != GW_OK))
        return GW_E_NOMEM;
    return gw_buf_append_cstr(out, "}");
}

/* Appends the JSON text <s> without the blanks between its tokens: an SSE data line
 * holds no line break, and JSON has none but blanks outside its strings. */
static enum gw_code
append_compact(struct gw_buf *out, struct gw_str s)
{
    size_t i, from = 0;
    bool in_string = false, escape = false;

    for (i = 0; i < s.len; i++) {
        char c = s.ptr[i];

        if (in_string) {
            if (escape)
                escape = false;
            else if (c == '\\')
                escape = true;
            else if (c == '"')
                in_string = false;
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            if (i > from && gw_buf_append(out, s.ptr + from, i - from) != GW_OK)
                return GW_E_NOMEM;
            from = i + 1;
        }
    }
    return i > from ? gw_buf_append(out, s.ptr + from, i - from) : GW_OK;
}

/* {"functionCall":{["id",]"name","args"}[,"thoughtSignature"]} */
static enum gw_code
call_part(struct gw_buf *out, struct gw_str id, struct gw_str name, struct gw_str args,
          struct gw_str sig, enum dl_shape origin)
{
    struct gw_str obj;

    if (!dl_json_is_object(args, &obj))
        obj = GW_STR_LIT("{}"); /* not an object (cut by max tokens?): none */
    if (gw_buf_append_cstr(out, "{\"functionCall\":{") != GW_OK)
        return GW_E_NOMEM;
    if (id.len &&
        (gw_buf_append_cstr(out, "\"id\":") != GW_OK || gw_buf_append_json_str(out, id) != GW_OK ||
         gw_buf_append_cstr(out, ",") != GW_OK))
        return GW_E_NOMEM;
    if (gw_buf_append_cstr(out, "\"name\":") != GW_OK ||
        gw_buf_append_json_str(out, name) != GW_OK ||
        gw_buf_append_cstr(out, ",\"args\":") != GW_OK || append_compact(out, obj) != GW_OK ||
        gw_buf_append_cstr(out, "}") != GW_OK)
        return GW_E_NOMEM;
    if (sig.len && (gw_buf_append_cstr(out, ",\"thoughtSignature\":") != GW_OK ||
                    dl_sig_append_json(out, DL_SHAPE_GEMINI, origin, sig) != GW_OK))
        return GW_E_NOMEM;
    return gw_buf_append_cstr(out, "}");
}

/* ---- tool calls ---- */

static enum gw_code
call_start(struct gr *s, const struct dl_event *ev)
{
    bool nomem = false;

    if (!s->ctx.arena)
        return GW_E_INTERNAL; /* a tool call's arguments are gathered in the arena */
    s->call_open = true;
    s->call_index = ev->index;
    s->call_id = keep(s, ev->kind == DL_EV_BLOCK_START ? ev->id : (struct gw_str){"", 0}, &nomem);
    s->call_name =
        keep(s, ev->kind == DL_EV_BLOCK_START ? ev->name : (struct gw_str){"", 0}, &nomem);
    s->call_sig = keep(s, ev->signature, &nomem);
    s->args = NULL;
    s->args_len = s->args_cap = 0;
    return nomem ? GW_E_NOMEM : GW_OK;
}

/* Appends <t> to the open call's arguments (grown by doubling in the arena). */
static enum gw_code
call_append(struct gr *s, struct gw_str t)
{
    if (t.len == 0)
        return GW_OK;
    if (s->args_len + t.len > s->args_cap) {
        size_t cap = (s->args_len + t.len) * 2;
        char *d = gw_arena_alloc(s->ctx.arena, cap < 256 ? 256 : cap);

        if (!d)
            return GW_E_NOMEM;
        if (s->args_len)
            memcpy(d, s->args, s->args_len);
        s->args = d;
        s->args_cap = cap < 256 ? 256 : cap;
    }
    memcpy(s->args + s->args_len, t.ptr, t.len);
    s->args_len += t.len;
    return GW_OK;
}

/* The open call as one chunk. */
static enum gw_code
call_flush(struct gr *s, struct gw_buf *out)
{
    if (!s->call_open)
        return GW_OK;
    s->call_open = false;
    if (chunk_open(s, out) != GW_OK ||
        call_part(out, s->call_id, s->call_name,
                  (struct gw_str){s->args ? s->args : "", s->args_len}, s->call_sig,
                  s->ctx.upstream) != GW_OK ||
        chunk_close(s, NULL, false, out) != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

/* ---- events ---- */

static enum gw_code
write_error(struct gr *s, enum gw_code code, struct gw_str message, struct gw_buf *out)
{
    struct gw_buf body = {0};
    enum gw_code rc;

    s->ended = true;
    if (!s->ctx.json_array)
        return dl_gemini_error_frame(code, message, out);
    /* the error frame's body, as the array's last element */
    rc = dl_gemini_error_frame(code, message, &body);
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, s->wrote ? "\r\n," : "[");
    if (rc == GW_OK) /* "data: " ... "\r\n\r\n" stripped */
        rc = gw_buf_append(out, body.data + 6, body.len - 10);
    if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, "]");
    gw_buf_fini(&body);
    return rc == GW_OK ? GW_OK : GW_E_NOMEM;
}

static enum gw_code
on_delta(struct gr *s, const struct dl_event *ev, struct gw_buf *out)
{
    if (ev->block == DL_BLOCK_TOOL_CALL) {
        enum gw_code rc = GW_OK;

        if (!s->call_open || s->call_index != ev->index) {
            /* a delta of a call never started here: one without a name */
            rc = call_flush(s, out);
            if (rc == GW_OK)
                rc = call_start(s, ev);
        }
        return rc == GW_OK ? call_append(s, ev->text) : rc;
    }
    if (ev->text.len == 0 && ev->signature.len == 0)
        return GW_OK;
    if (chunk_open(s, out) != GW_OK ||
        text_part(out, ev->text, ev->block == DL_BLOCK_REASONING,
                  ev->block == DL_BLOCK_REASONING ? ev->signature : (struct gw_str){"", 0},
                  s->ctx.upstream) != GW_OK ||
        chunk_close(s, NULL, false, out) != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
render_one(struct gr *s, const struct dl_event *ev, struct gw_buf *out)
{
    bool nomem = false;

    if (s->ended)
        return GW_OK;
    switch (ev->kind) {
    case DL_EV_START:
        if (s->id.len || s->model.len)
            return GW_OK;
        s->id = keep(s, ev->id, &nomem);
        s->model = keep(s, ev->model, &nomem);
        return nomem ? GW_E_NOMEM : GW_OK;
    case DL_EV_USAGE:
        s->usage = ev->usage;
        s->usage_seen = true;
        return GW_OK;
    case DL_EV_ERROR:
        return write_error(s, GW_E_UPSTREAM_FAILED,
                           GW_STR_LIT("the upstream failed during the answer"), out);
    case DL_EV_BLOCK_START:
    case DL_EV_DELTA:
    case DL_EV_BLOCK_STOP:
    case DL_EV_FINISH: break;
    }
    if (s->finish_held)
        return GW_OK; /* content after the finish is not part of the answer */
    switch (ev->kind) {
    case DL_EV_BLOCK_START:
        if (ev->block != DL_BLOCK_TOOL_CALL)
            return GW_OK;
        if (call_flush(s, out) != GW_OK)
            return GW_E_NOMEM;
        return call_start(s, ev);
    case DL_EV_DELTA: return on_delta(s, ev, out);
    case DL_EV_BLOCK_STOP:
        return s->call_open && s->call_index == ev->index ? call_flush(s, out) : GW_OK;
    case DL_EV_FINISH:
        if (call_flush(s, out) != GW_OK)
            return GW_E_NOMEM;
        s->finish_held = true;
        s->finish = (uint8_t)ev->finish;
        return GW_OK;
    case DL_EV_START:
    case DL_EV_USAGE:
    case DL_EV_ERROR: break;
    }
    return GW_OK;
}

enum gw_code
dl_gemini_event_render(struct dl_render_state *st, const struct dl_event *ev, struct gw_buf *out)
{
    struct gr *s = (struct gr *)st;
    size_t start = out->len;
    enum gw_code rc = render_one(s, ev, out);

    if (rc != GW_OK)
        restore(out, start);
    return rc;
}

enum gw_code
dl_gemini_render_end(struct dl_render_state *st, struct gw_buf *out)
{
    struct gr *s = (struct gr *)st;
    size_t start = out->len;

    if (s->ended)
        return GW_OK;
    if (call_flush(s, out) != GW_OK || chunk_open(s, out) != GW_OK ||
        chunk_close(s, finish_reason(s->finish_held ? (enum dl_finish)s->finish : DL_FINISH_NONE),
                    s->usage_seen, out) != GW_OK ||
        (s->ctx.json_array && gw_buf_append_cstr(out, "]") != GW_OK)) {
        restore(out, start);
        return GW_E_NOMEM;
    }
    s->ended = true;
    return GW_OK;
}

enum gw_code
dl_gemini_render_abort(struct dl_render_state *st, enum gw_code code, struct gw_str message,
                       struct gw_buf *out)
{
    struct gr *s = (struct gr *)st;
    size_t start = out->len;

    if (s->ended)
        return GW_OK;
    if (write_error(s, code, message, out) != GW_OK) {
        s->ended = false;
        restore(out, start);
        return GW_E_NOMEM;
    }
    return GW_OK;
}

/* ---- the answer ---- */

static enum gw_code
answer_part(struct gw_buf *out, const struct dl_answer_block *b, enum dl_shape upstream)
{
    struct gw_str text = {b->text.len ? b->text.data : "", b->text.len};
    struct gw_str sig = {b->signature.len ? b->signature.data : "", b->signature.len};

    switch (b->block) {
    case DL_BLOCK_TEXT: return text_part(out, text, false, (struct gw_str){"", 0}, upstream);
    case DL_BLOCK_REASONING: return text_part(out, text, true, sig, upstream);
    case DL_BLOCK_TOOL_CALL: return call_part(out, b->id, b->name, text, sig, upstream);
    }
    return GW_OK;
}

/* Whether block <b> is said in the answer (empty text and reasoning are not). */
static bool
answer_says(const struct dl_answer_block *b)
{
    if (b->block == DL_BLOCK_TOOL_CALL)
        return true;
    return b->text.len > 0 || (b->block == DL_BLOCK_REASONING && b->signature.len > 0);
}

enum gw_code
dl_gemini_answer_render(const struct dl_answer *a, const struct dl_render_ctx *ctx,
                        struct gw_buf *out)
{
    size_t start = out->len, k;
    bool first = true;

    if (gw_buf_append_cstr(out, "{\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[") !=
        GW_OK)
        goto nomem;
    for (k = 0; k < a->n_blocks; k++) {
        if (!answer_says(&a->blocks[k]))
            continue;
        if ((!first && gw_buf_append_cstr(out, ",") != GW_OK) ||
            answer_part(out, &a->blocks[k], ctx->upstream) != GW_OK)
            goto nomem;
        first = false;
    }
    if (response_tail(out, finish_reason(a->finish), a->usage_seen ? &a->usage : NULL,
                      ctx->model.len ? ctx->model : a->model, a->id.len ? a->id : ctx->id) != GW_OK)
        goto nomem;
    return GW_OK;
nomem:
    restore(out, start);
    return GW_E_NOMEM;
}
