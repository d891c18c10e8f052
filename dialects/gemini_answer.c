/* SPDX-License-Identifier: MIT
 * dialects/gemini_answer.c - a Gemini upstream's answers as canonical events (DESIGN.md
 * 11): each streamed GenerateContentResponse (one SSE data payload of ?alt=sse, or one
 * element of the JSON-array stream, dl_gemini_array_feed) and a whole non-streamed
 * answer, parsed into the same events; and the usage of an answer.
 *
 * Decisions:
 * - The parser is also the inspector of the same-shape relay: one allocation-free pass
 *   of dialects/json_scan.h to check a chunk, one to emit (a string with escapes is
 *   decoded on the stack, on the heap past 512 bytes, for the length of the emit call).
 *   A chunk that is not the JSON it must be is GW_E_UPSTREAM_PROTOCOL and emits
 *   nothing; the event name is ignored.
 * - The first chunk gives START (id: responseId, model: modelVersion). Only the first
 *   candidate is read (a request asking for more is refused by other shapes' parse, and
 *   a Gemini client is relayed). Its content's parts, in order: text -> a DELTA of a
 *   text block (a new block when the open one is not text; blocks stay open across
 *   chunks); thought text -> a DELTA of a reasoning block the same way; a
 *   thoughtSignature -> on a thought, in its DELTA; on another part, a DELTA of the open
 *   reasoning block (or of a new one) with the signature alone, before the part's own
 *   events; functionCall -> BLOCK_START of a tool call (its id, else "call_<tag>_<n>"
 *   with <tag> eight hex digits of a hash of the responseId and <n> counting the
 *   answer's calls, so that ids stay unique across the turns of a conversation; its
 *   name; the part's thoughtSignature), one DELTA holding the whole args JSON ({} when
 *   none), BLOCK_STOP. Other parts (inlineData, executableCode...) are not part of the
 *   canonical answer. Canonical indexes count the blocks emitted, 0.. in order.
 * - usageMetadata (every chunk may hold it; the latest counts) -> USAGE: input =
 *   promptTokenCount + toolUsePromptTokenCount - cachedContentTokenCount, cache read =
 *   cachedContentTokenCount, output = candidatesTokenCount + thoughtsTokenCount. In a
 *   chunk, USAGE comes before FINISH.
 * - finishReason -> FINISH after the open block's BLOCK_STOP: STOP (TOOL_CALLS when the
 *   answer called a function), MAX_TOKENS -> LENGTH; SAFETY, RECITATION, BLOCKLIST,
 *   PROHIBITED_CONTENT, SPII and the IMAGE_ ones (safety, prohibited content,
 *   recitation) -> CONTENT_FILTER; MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL,
 *   TOO_MANY_TOOL_CALLS, LANGUAGE, OTHER, NO_IMAGE, IMAGE_OTHER and
 *   FINISH_REASON_UNSPECIFIED -> ERROR (the answer failed); a reason newer than this file
 *   -> STOP. promptFeedback.blockReason -> FINISH CONTENT_FILTER. After FINISH only
 *   USAGE is emitted.
 * - {"error":{"code","message","status"}} -> ERROR (type: status, the HTTP status:
 *   code, else the status name's), then nothing more; after a FINISH it changes nothing.
 * - A non-streamed answer gives the events of one chunk, then FINISH NONE when it held
 *   no finishReason.
 * Owns:    nothing beyond each call; the parse state is the caller's.
 * Threads: any; a state belongs to one thread at a time.
 * See:     dialects/gemini-priv.h, dialects/canon.h, tests/unit/dialects/test_gemini_answer.c,
 *          tests/fuzz/fuzz_gemini.c
 */
#include "dialects/gemini-priv.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"

/* ---- decoded strings for the length of one emit ---- */

/* The string field <f> decoded ("" when it is NULL or not a string). */
static bool
txt_field(struct dl_json_text *x, const struct dl_json *j, const struct dl_gm_field *f)
{
    return dl_json_text_get(x, j, f && f->kind == GK_STR ? &f->str : NULL);
}

/* ---- the state and the emitter ---- */

struct ep {
    uint32_t tag;        /* hash of the first responseId, for generated call ids */
    uint32_t next;       /* the next canonical index */
    uint32_t open_index; /* the open block's canonical index */
    uint32_t n_calls;    /* calls emitted */
    uint8_t open_kind;   /* its enum dl_block */
    bool open;           /* a block is open */
    bool has_tag;        /* the answer has a responseId */
    bool started;        /* START emitted */
    bool finished;       /* FINISH emitted */
    bool called;         /* a function call was emitted */
    bool done;           /* an error: nothing more */
};

static_assert(sizeof(struct ep) <= sizeof(struct dl_parse_state), "parse state too small");

void
dl_gemini_parse_init(struct dl_parse_state *st)
{
    memset(st, 0, sizeof(*st));
}

static bool
close_open(struct ep *s, struct dl_emitter *e)
{
    struct dl_event ev = {.kind = DL_EV_BLOCK_STOP};

    if (!s->open)
        return true;
    s->open = false;
    ev.index = s->open_index;
    ev.block = (enum dl_block)s->open_kind;
    return dl_emit(e, &ev);
}

/* The open block when it is of <kind>, else a new one. */
static bool
ensure_open(struct ep *s, struct dl_emitter *e, enum dl_block kind)
{
    struct dl_event ev = {.kind = DL_EV_BLOCK_START, .block = kind};

    if (s->open && s->open_kind == kind)
        return true;
    if (!close_open(s, e))
        return false;
    s->open = true;
    s->open_kind = (uint8_t)kind;
    s->open_index = s->next++;
    ev.index = s->open_index;
    return dl_emit(e, &ev);
}

/* ---- checking a chunk ---- */

enum cf {
    CF_CANDIDATES,
    CF_USAGE,
    CF_MODEL,
    CF_ID,
    CF_FEEDBACK,
    CF_ERROR,
    CF__COUNT,
};

#define CHUNK_FIELDS                                                                               \
    {                                                                                              \
        DL_GM_FIELD("candidates"), DL_GM_FIELD("usageMetadata"), DL_GM_FIELD("modelVersion"),      \
            DL_GM_FIELD("responseId"), DL_GM_FIELD("promptFeedback"), DL_GM_FIELD("error")         \
    }

/* What a chunk holds, offsets into its bytes. */
struct chunk {
    struct dl_gm_field f[CF__COUNT];
    struct dl_gm_field content, finish, parts, block;
};

enum pt {
    PT_TEXT,
    PT_THOUGHT,
    PT_SIGNATURE,
    PT_CALL,
    PT__COUNT,
};

#define PART_FIELDS                                                                                \
    {                                                                                              \
        DL_GM_FIELD("text"), DL_GM_FIELD("thought"), DL_GM_FIELD("thoughtSignature"),              \
            DL_GM_FIELD("functionCall")                                                            \
    }

static bool
present(const struct dl_gm_field *f)
{
    return f->kind != GK_ABSENT && f->kind != GK_NULL;
}

static enum gw_code
bad(const struct dl_json *j)
{
    return j->err == DL_JSON_E_NOMEM ? GW_E_NOMEM : GW_E_UPSTREAM_PROTOCOL;
}

/* The parts array at <c->parts>: each an object whose members have their types. */
static enum gw_code
check_parts(const struct dl_json *doc, const struct chunk *c)
{
    struct dl_json j = dl_gm_at(doc, c->parts.at);
    bool first = true;
    int r;

    if (!dl_json_arr_enter(&j))
        return bad(&j);
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        struct dl_gm_field p[PT__COUNT] = PART_FIELDS;

        if (!dl_gm_fields(&j, p, PT__COUNT))
            return bad(&j);
        if ((present(&p[PT_TEXT]) && p[PT_TEXT].kind != GK_STR) ||
            (present(&p[PT_SIGNATURE]) && p[PT_SIGNATURE].kind != GK_STR) ||
            (present(&p[PT_THOUGHT]) && p[PT_THOUGHT].kind != GK_TRUE &&
             p[PT_THOUGHT].kind != GK_FALSE))
            return GW_E_UPSTREAM_PROTOCOL;
        if (present(&p[PT_CALL])) {
            struct dl_gm_field fc[] = {DL_GM_FIELD("name"), DL_GM_FIELD("args"), DL_GM_FIELD("id")};
            struct dl_json cj = dl_gm_at(&j, p[PT_CALL].at);

            if (!dl_gm_fields(&cj, fc, 3))
                return bad(&cj);
            if (fc[0].kind != GK_STR || (present(&fc[1]) && fc[1].kind != GK_OBJ) ||
                (present(&fc[2]) && fc[2].kind != GK_STR))
                return GW_E_UPSTREAM_PROTOCOL;
        }
    }
    return r == 0 ? GW_OK : bad(&j);
}

/* Reads and checks the chunk <j> into <c>. */
static enum gw_code
check_chunk(struct dl_json *j, struct chunk *c)
{
    struct dl_gm_field cand[] = {DL_GM_FIELD("content"), DL_GM_FIELD("finishReason")};
    struct dl_gm_field content[] = {DL_GM_FIELD("parts")};
    struct dl_gm_field feedback[] = {DL_GM_FIELD("blockReason")};
    struct dl_gm_field f[CF__COUNT] = CHUNK_FIELDS;
    struct dl_json cj;
    bool first = true;
    size_t k;

    c->content = (struct dl_gm_field)DL_GM_FIELD("content");
    c->finish = (struct dl_gm_field)DL_GM_FIELD("finishReason");
    c->parts = (struct dl_gm_field)DL_GM_FIELD("parts");
    c->block = (struct dl_gm_field)DL_GM_FIELD("blockReason");
    if (!dl_gm_fields(j, f, CF__COUNT) || !dl_json_end(j))
        return bad(j);
    memcpy(c->f, f, sizeof(f));
    for (k = 0; k < CF__COUNT; k++)
        if (present(&f[k]) && f[k].kind != (k == CF_CANDIDATES            ? GK_ARR
                                            : k == CF_MODEL || k == CF_ID ? GK_STR
                                                                          : GK_OBJ))
            return GW_E_UPSTREAM_PROTOCOL;
    if (present(&f[CF_FEEDBACK])) {
        cj = dl_gm_at(j, f[CF_FEEDBACK].at);
        if (!dl_gm_fields(&cj, feedback, 1))
            return bad(&cj);
        c->block = feedback[0];
    }
    if (!present(&f[CF_CANDIDATES]))
        return GW_OK;
    cj = dl_gm_at(j, f[CF_CANDIDATES].at);
    if (!dl_json_arr_enter(&cj))
        return bad(&cj);
    if (dl_json_arr_next(&cj, &first) != 1)
        return cj.err ? bad(&cj) : GW_OK; /* no candidate */
    if (!dl_gm_fields(&cj, cand, 2))
        return bad(&cj);
    if ((present(&cand[0]) && cand[0].kind != GK_OBJ) ||
        (present(&cand[1]) && cand[1].kind != GK_STR))
        return GW_E_UPSTREAM_PROTOCOL;
    c->content = cand[0];
    c->finish = cand[1];
    if (!present(&cand[0]))
        return GW_OK;
    cj = dl_gm_at(j, cand[0].at);
    if (!dl_gm_fields(&cj, content, 1))
        return bad(&cj);
    if (present(&content[0]) && content[0].kind != GK_ARR)
        return GW_E_UPSTREAM_PROTOCOL;
    c->parts = content[0];
    return present(&content[0]) ? check_parts(j, c) : GW_OK;
}

/* ---- emitting ---- */

/* A hash of <s> (FNV-1a, folded to 32 bits): the tag of generated call ids. */
static uint32_t
tag_of(struct gw_str s)
{
    uint64_t h = 1469598103934665603ull;
    size_t i;

    for (i = 0; i < s.len; i++) {
        h ^= (unsigned char)s.ptr[i];
        h *= 1099511628211ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

/* The usage members of usageMetadata at <at> into <u>. */
static bool
usage_read(const struct dl_json *doc, size_t at, struct gw_usage *u)
{
    struct dl_gm_field m[] = {DL_GM_FIELD("promptTokenCount"), DL_GM_FIELD("candidatesTokenCount"),
                              DL_GM_FIELD("cachedContentTokenCount"),
                              DL_GM_FIELD("thoughtsTokenCount"),
                              DL_GM_FIELD("toolUsePromptTokenCount")};
    struct dl_json j = dl_gm_at(doc, at);
    uint64_t v[5] = {0};
    size_t k;

    if (!dl_gm_fields(&j, m, 5))
        return false;
    for (k = 0; k < 5; k++)
        if (m[k].kind == GK_NUM && !dl_json_num_count(&j, &m[k].num, &v[k]))
            return false;
    memset(u, 0, sizeof(*u));
    u->cache_read_tokens = v[2];
    u->input_tokens = v[0] + v[4] > v[2] ? v[0] + v[4] - v[2] : 0;
    u->output_tokens = v[1] + v[3];
    u->reasoning_tokens = v[3];
    return true;
}

/* The finish a finishReason stands for. */
static enum dl_finish
finish_of(const struct dl_json *j, const struct dl_gm_field *f, bool called)
{
    static const char *const filtered[] = {"SAFETY",
                                           "RECITATION",
                                           "BLOCKLIST",
                                           "PROHIBITED_CONTENT",
                                           "SPII",
                                           "IMAGE_SAFETY",
                                           "IMAGE_PROHIBITED_CONTENT",
                                           "IMAGE_RECITATION"};
    static const char *const failed[] = {"MALFORMED_FUNCTION_CALL",
                                         "UNEXPECTED_TOOL_CALL",
                                         "TOO_MANY_TOOL_CALLS",
                                         "LANGUAGE",
                                         "OTHER",
                                         "NO_IMAGE",
                                         "IMAGE_OTHER",
                                         "FINISH_REASON_UNSPECIFIED"};
    size_t i;

    if (dl_gm_is(j, f, "MAX_TOKENS"))
        return DL_FINISH_LENGTH;
    for (i = 0; i < sizeof(filtered) / sizeof(filtered[0]); i++)
        if (dl_gm_is(j, f, filtered[i]))
            return DL_FINISH_CONTENT_FILTER;
    for (i = 0; i < sizeof(failed) / sizeof(failed[0]); i++)
        if (dl_gm_is(j, f, failed[i]))
            return DL_FINISH_ERROR;
    return called ? DL_FINISH_TOOL_CALLS : DL_FINISH_STOP; /* STOP, and anything newer */
}

/* A DELTA of the open block of <kind> with <text> and <sig> (fields; either may be
 * absent). */
static enum gw_code
emit_delta(struct ep *s, struct dl_emitter *e, enum dl_block kind, const struct dl_json *j,
           const struct dl_gm_field *text, const struct dl_gm_field *sig)
{
    struct dl_event ev = {.kind = DL_EV_DELTA, .block = kind};
    struct dl_json_text t, g;

    if (!ensure_open(s, e, kind))
        return GW_OK;
    if (!txt_field(&t, j, text))
        return GW_E_NOMEM;
    if (!txt_field(&g, j, sig)) {
        dl_json_text_fini(&t);
        return GW_E_NOMEM;
    }
    ev.index = s->open_index;
    ev.text = t.s;
    ev.signature = g.s;
    dl_emit(e, &ev);
    dl_json_text_fini(&t);
    dl_json_text_fini(&g);
    return GW_OK;
}

static enum gw_code
emit_call(struct ep *s, struct dl_emitter *e, const struct dl_json *doc,
          const struct dl_gm_field *fc, const struct dl_gm_field *sig)
{
    struct dl_gm_field c[] = {DL_GM_FIELD("name"), DL_GM_FIELD("args"), DL_GM_FIELD("id")};
    struct dl_json j = dl_gm_at(doc, fc->at);
    struct dl_event ev = {.kind = DL_EV_BLOCK_START, .block = DL_BLOCK_TOOL_CALL};
    struct dl_json_text name, id, g;
    char gen[48];

    (void)dl_gm_fields(&j, c, 3); /* checked */
    if (!close_open(s, e))
        return GW_OK;
    if (!txt_field(&name, &j, &c[0]))
        return GW_E_NOMEM;
    if (!txt_field(&id, &j, &c[2])) {
        dl_json_text_fini(&name);
        return GW_E_NOMEM;
    }
    if (!txt_field(&g, doc, sig)) {
        dl_json_text_fini(&name);
        dl_json_text_fini(&id);
        return GW_E_NOMEM;
    }
    ev.index = s->next++;
    ev.name = name.s;
    ev.id = id.s;
    ev.signature = g.s;
    if (ev.id.len == 0) {
        int n = s->has_tag ? snprintf(gen, sizeof(gen), "call_%08x_%u", (unsigned)s->tag,
                                      (unsigned)s->n_calls)
                           : snprintf(gen, sizeof(gen), "call_%u", (unsigned)s->n_calls);

        ev.id = (struct gw_str){gen, (size_t)n};
    }
    s->n_calls++;
    s->called = true;
    dl_emit(e, &ev);
    dl_json_text_fini(&name);
    dl_json_text_fini(&id);
    dl_json_text_fini(&g);
    if (!e->stopped) {
        struct dl_event dv = {.kind = DL_EV_DELTA, .index = ev.index, .block = DL_BLOCK_TOOL_CALL};

        dv.text = c[1].kind == GK_OBJ ? dl_gm_raw(&j, &c[1]) : GW_STR_LIT("{}");
        if (dl_emit(e, &dv)) {
            struct dl_event sv = {
                .kind = DL_EV_BLOCK_STOP, .index = ev.index, .block = DL_BLOCK_TOOL_CALL};

            dl_emit(e, &sv);
        }
    }
    return GW_OK;
}

static enum gw_code
emit_parts(struct ep *s, struct dl_emitter *e, const struct dl_json *doc, const struct chunk *c)
{
    struct dl_json j = dl_gm_at(doc, c->parts.at);
    bool first = true;

    (void)dl_json_arr_enter(&j);
    while (!e->stopped && dl_json_arr_next(&j, &first) == 1) {
        struct dl_gm_field p[PT__COUNT] = PART_FIELDS;
        bool thought, text, sig;
        enum gw_code rc = GW_OK;

        (void)dl_gm_fields(&j, p, PT__COUNT); /* checked */
        thought = p[PT_THOUGHT].kind == GK_TRUE;
        text = p[PT_TEXT].kind == GK_STR && p[PT_TEXT].str.dlen > 0;
        sig = p[PT_SIGNATURE].kind == GK_STR && p[PT_SIGNATURE].str.dlen > 0;
        if (present(&p[PT_CALL])) {
            rc = emit_call(s, e, &j, &p[PT_CALL], &p[PT_SIGNATURE]);
        } else if (thought) {
            if (text || sig)
                rc = emit_delta(s, e, DL_BLOCK_REASONING, &j, &p[PT_TEXT], &p[PT_SIGNATURE]);
        } else {
            if (sig)
                rc = emit_delta(s, e, DL_BLOCK_REASONING, &j, NULL, &p[PT_SIGNATURE]);
            if (rc == GW_OK && text && !e->stopped)
                rc = emit_delta(s, e, DL_BLOCK_TEXT, &j, &p[PT_TEXT], NULL);
        }
        if (rc != GW_OK)
            return rc;
    }
    return GW_OK;
}

static enum gw_code
emit_error(struct ep *s, struct dl_emitter *e, const struct dl_json *doc, size_t at)
{
    struct dl_gm_field x[] = {DL_GM_FIELD("code"), DL_GM_FIELD("message"), DL_GM_FIELD("status")};
    struct dl_json j = dl_gm_at(doc, at);
    struct dl_event ev = {.kind = DL_EV_ERROR};
    struct dl_json_text msg, type;
    int64_t code = 0;

    s->done = true;
    if (s->finished)
        return GW_OK; /* the answer was whole: an error after its finish changes nothing */
    (void)dl_gm_fields(&j, x, 3);
    if (!txt_field(&msg, &j, &x[1]))
        return GW_E_NOMEM;
    if (!txt_field(&type, &j, &x[2])) {
        dl_json_text_fini(&msg);
        return GW_E_NOMEM;
    }
    if (x[0].kind != GK_NUM || !dl_gm_int(&j, &x[0].num, &code) || code < 400 || code > 599)
        code = dl_gemini_status_code(type.s);
    ev.error_type = type.s.len ? type.s : GW_STR_LIT("INTERNAL");
    ev.message = msg.s;
    ev.status = code ? (int)code : 500;
    dl_emit(e, &ev);
    dl_json_text_fini(&msg);
    dl_json_text_fini(&type);
    return GW_OK;
}

/* One checked chunk's events. */
static enum gw_code
emit_chunk(struct ep *s, struct dl_emitter *e, const struct dl_json *j, const struct chunk *c)
{
    enum gw_code rc = GW_OK;

    if (present(&c->f[CF_ERROR]))
        return emit_error(s, e, j, c->f[CF_ERROR].at);
    if (!s->started) {
        struct dl_event ev = {.kind = DL_EV_START};
        struct dl_json_text id, model;

        if (!txt_field(&id, j, &c->f[CF_ID]))
            return GW_E_NOMEM;
        if (!txt_field(&model, j, &c->f[CF_MODEL])) {
            dl_json_text_fini(&id);
            return GW_E_NOMEM;
        }
        s->started = true;
        s->has_tag = id.s.len > 0;
        s->tag = tag_of(id.s);
        ev.id = id.s;
        ev.model = model.s;
        dl_emit(e, &ev);
        dl_json_text_fini(&id);
        dl_json_text_fini(&model);
    }
    if (!s->finished && present(&c->parts))
        rc = emit_parts(s, e, j, c);
    if (rc != GW_OK || e->stopped)
        return rc;
    if (present(&c->f[CF_USAGE])) {
        struct dl_event ev = {.kind = DL_EV_USAGE};

        if (!usage_read(j, c->f[CF_USAGE].at, &ev.usage))
            return bad(j);
        if (!dl_emit(e, &ev))
            return GW_OK;
    }
    if (s->finished)
        return GW_OK;
    if (c->finish.kind == GK_STR || (c->block.kind == GK_STR && c->block.str.dlen &&
                                     !dl_gm_is(j, &c->block, "BLOCKED_REASON_UNSPECIFIED"))) {
        struct dl_event ev = {.kind = DL_EV_FINISH};

        ev.finish = c->finish.kind == GK_STR ? finish_of(j, &c->finish, s->called)
                                             : DL_FINISH_CONTENT_FILTER;
        s->finished = true;
        if (close_open(s, e))
            dl_emit(e, &ev);
    }
    return GW_OK;
}

enum gw_code
dl_gemini_event_parse(struct dl_parse_state *st, struct gw_str event, struct gw_str data,
                      dl_event_fn fn, void *arg)
{
    struct ep *s = (struct ep *)st;
    struct dl_emitter e = {fn, arg, false};
    struct chunk c;
    struct dl_json j;
    enum gw_code rc;

    (void)event; /* Gemini's SSE events are unnamed */
    if (s->done)
        return GW_OK;
    dl_json_init(&j, data.ptr, data.len);
    rc = check_chunk(&j, &c);
    if (rc != GW_OK)
        return rc;
    return emit_chunk(s, &e, &j, &c);
}

/* ---- a non-streamed answer ---- */

enum gw_code
dl_gemini_answer_parse(const char *body, size_t len, dl_event_fn fn, void *arg)
{
    struct dl_parse_state st;
    struct ep *s = (struct ep *)&st;
    struct dl_emitter e = {fn, arg, false};
    struct chunk c;
    struct dl_json j;
    enum gw_code rc;

    dl_gemini_parse_init(&st);
    dl_json_init(&j, body, len);
    rc = check_chunk(&j, &c);
    if (rc != GW_OK)
        return rc;
    rc = emit_chunk(s, &e, &j, &c);
    if (rc != GW_OK || e.stopped || s->done || s->finished)
        return rc;
    if (close_open(s, &e)) {
        struct dl_event fv = {.kind = DL_EV_FINISH, .finish = DL_FINISH_NONE};

        dl_emit(&e, &fv);
    }
    return GW_OK;
}

bool
dl_gemini_answer_usage(const char *body, size_t len, struct gw_usage *usage)
{
    struct dl_gm_field top[] = {DL_GM_FIELD("usageMetadata")};
    struct dl_json j;

    memset(usage, 0, sizeof(*usage));
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !dl_gm_fields(&j, top, 1) || !dl_json_end(&j) ||
        top[0].kind != GK_OBJ)
        return false;
    if (!usage_read(&j, top[0].at, usage)) {
        memset(usage, 0, sizeof(*usage));
        return false;
    }
    return true;
}
