/* SPDX-License-Identifier: MIT
 * dialects/gemini_render.c - a canonical request (dialects/canon.h) rendered as the body
 * of a generateContent / streamGenerateContent call to a Gemini upstream. The model goes
 * in the URL, never in the body; so does streaming (?alt=sse).
 *
 * Decisions:
 * - contents: user and tool messages make "user" turns, assistant messages "model"
 *   turns; consecutive messages of one side share one turn (parallel tool results are
 *   one user turn of functionResponse parts); messages with nothing to send are
 *   skipped. A conversation with nothing to send is refused (inventing a turn changes
 *   what the model sees).
 * - TEXT -> text (empty text is not sent: the API refuses empty text parts). IMAGE and
 *   DOCUMENT: base64 data and data:...;base64, URLs -> inlineData; any other URL ->
 *   fileData {fileUri, mimeType: the part's, else guessed from the URL's extension, else
 *   left out}; an image's detail and a document's title are dropped by name.
 * - TOOL_CALL -> functionCall {name, args: the arguments object (blank: {}), refused when
 *   they are not an object}. TOOL_RESULT -> functionResponse {name: the part's, else the
 *   name of the call its call_id points at (an earlier TOOL_CALL), refused when neither
 *   is known; response: the one text part when it is a JSON object (what a Gemini client
 *   sent), else {"output": the texts joined} ({"error": ...} when is_error); parts:
 *   inlineData of its images and documents with data, others dropped as "tool result
 *   content"}. "id" is sent only for a request parsed from Gemini whose client gave one
 *   (dl_gemini_call_id_is_generated tells the generated ones).
 * - Signatures: a REASONING part goes as a thought part only when a Gemini upstream made
 *   it (sig_shape), with its thoughtSignature; any other is dropped ("reasoning"). A
 *   REASONING part with a signature and no text followed by text or media (what parse
 *   made of a signature on such a part) puts the signature back on that part; with
 *   nothing to ride on it is an empty text part with the signature (Gemini ends some
 *   answers so). A
 *   TOOL_CALL's Gemini signature goes on its functionCall part; for a request from
 *   another shape, the first functionCall of a model turn without one gets
 *   DL_GEMINI_SKIP_SIGNATURE (Gemini 3 refuses function calls it cannot verify).
 * - systemInstruction: the system parts as text parts.
 * - tools: one {"functionDeclarations":[...]} with name, description, and the schema as
 *   parametersJsonSchema (JSON Schema), or for a Gemini client's OpenAPI schema its
 *   parameters as written (source_parameters); strict and cache hints dropped by name.
 *   Hosted tools and OTHER parts only for a request parsed from Gemini (refused
 *   otherwise, naming them), as written.
 * - toolConfig.functionCallingConfig: AUTO, NONE, REQUIRED -> ANY, NAMED -> ANY with
 *   allowedFunctionNames [name]; without tools (from another shape) dropped as
 *   "tool_choice"; parallel_tool_calls has no Gemini field: dropped.
 * - generationConfig: temperature, topP, topK, seed, presencePenalty, frequencyPenalty,
 *   stopSequences (at most 5, the API's limit: more are refused), maxOutputTokens (the
 *   request's, else <max_output_default>, else none), JSON_OBJECT -> responseMimeType
 *   application/json, JSON_SCHEMA -> that and responseJsonSchema (a Gemini client's
 *   responseSchema as written), thinkingConfig: a Gemini client's budget and level as
 *   given; from another shape the budget, else the effort as a budget (minimal 512, low
 *   1024, medium 8192, high and xhigh 24576; none and unknown efforts dropped as
 *   "reasoning_effort"), with includeThoughts true, or only includeThoughts when
 *   thinking was asked without either.
 * - Dropped by name (no Gemini field): parallel_tool_calls, user, metadata,
 *   prompt_cache_key, cache hints (cache_control), a message's name, and every
 *   extra of another shape. Refused (GW_E_UNCONVERTIBLE, naming the field) for another
 *   shape's request: n > 1, logprobs, audio or image output (the events carry one
 *   candidate's text and calls), hosted tools, OTHER parts, previous_response_id.
 * - A request parsed from Gemini renders back to the same request: its extras go back
 *   where they came from ("generationConfig.x" inside generationConfig, and so on), its
 *   hosted tools, OTHER parts and OpenAPI schemas as written, its VALIDATED mode.
 * Owns:    nothing beyond one call.
 * Threads: any; one request on one thread.
 * See:     dialects/gemini-priv.h, dialects/canon.h, docs/fields-gemini.md,
 *          tests/unit/dialects/test_gemini_request.c, tests/fuzz/fuzz_gemini.c
 */
#include "dialects/gemini-priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define GEMINI_MAX_STOP 5

struct rr {
    const struct dl_request *r;
    struct dl_dropped *dropped;
    struct gw_buf *out;
    struct gw_buf *why;
    bool own; /* the request was parsed from Gemini */
};

#define TRY(x)                                                                                     \
    do {                                                                                           \
        enum gw_code try_rc_ = (x);                                                                \
        if (try_rc_ != GW_OK)                                                                      \
            return try_rc_;                                                                        \
    } while (0)

static enum gw_code rr_refuse(struct rr *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static enum gw_code
rr_refuse(struct rr *w, const char *fmt, ...)
{
    enum gw_code rc;
    va_list ap;

    va_start(ap, fmt);
    rc = dl_vrefuse(w->why, GW_E_UNCONVERTIBLE, fmt, ap);
    va_end(ap);
    return rc;
}

static void
rr_drop(struct rr *w, struct gw_str name)
{
    if (w->dropped)
        dl_dropped_add(w->dropped, name);
}

static enum gw_code
rr_lit(struct rr *w, const char *s)
{
    return gw_buf_append_cstr(w->out, s);
}

static enum gw_code
rr_json(struct rr *w, struct gw_str s)
{
    return gw_buf_append_json_str(w->out, s);
}

/* ,"key":"<s>" */
static enum gw_code
rr_member(struct rr *w, const char *key, struct gw_str s)
{
    TRY(rr_lit(w, ",\""));
    TRY(rr_lit(w, key));
    TRY(rr_lit(w, "\":"));
    return rr_json(w, s);
}

/* Writes each extra named <prefix><member> as "<member>":<raw>, except those whose
 * member starts with <except> (written inside a nested object), after <*comma>. */
static enum gw_code
rr_extras_under(struct rr *w, const char *prefix, const char *except, bool *comma)
{
    size_t n = strlen(prefix), x = except ? strlen(except) : 0, k;

    for (k = 0; k < w->r->n_extras; k++) {
        const struct dl_extra *e = &w->r->extras[k];
        struct gw_str rest;

        if (e->name.len <= n || memcmp(e->name.ptr, prefix, n) != 0)
            continue;
        rest = (struct gw_str){e->name.ptr + n, e->name.len - n};
        if (x && rest.len > x && memcmp(rest.ptr, except, x) == 0)
            continue;
        TRY(rr_lit(w, *comma ? "," : ""));
        *comma = true;
        TRY(rr_json(w, rest));
        TRY(rr_lit(w, ":"));
        TRY(gw_buf_append_str(w->out, gw_str_trim(e->raw)));
    }
    return GW_OK;
}

/* True when <name> is an extra written inside generationConfig or toolConfig. */
static bool
is_nested_extra(struct gw_str name)
{
    static const char *const prefixes[] = {"generationConfig.", "toolConfig."};
    size_t i;

    for (i = 0; i < 2; i++) {
        size_t n = strlen(prefixes[i]);

        if (name.len > n && memcmp(name.ptr, prefixes[i], n) == 0)
            return true;
    }
    return false;
}

/* The raw value of the extra <name>, or {NULL, 0}. */
static struct gw_str
extra_of(const struct dl_request *r, const char *name)
{
    size_t k;

    for (k = 0; k < r->n_extras; k++)
        if (gw_str_eq(r->extras[k].name, gw_str_c(name)))
            return gw_str_trim(r->extras[k].raw);
    return (struct gw_str){NULL, 0};
}

/* True when some extra's name starts with <prefix>. */
static bool
has_extras_under(const struct dl_request *r, const char *prefix)
{
    size_t n = strlen(prefix), k;

    for (k = 0; k < r->n_extras; k++)
        if (r->extras[k].name.len > n && memcmp(r->extras[k].name.ptr, prefix, n) == 0)
            return true;
    return false;
}

/* ---- parts ---- */

/* The media type a URL's extension names, or "". */
static struct gw_str
type_of_url(struct gw_str u)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".png", "image/png"},   {".jpg", "image/jpeg"},      {".jpeg", "image/jpeg"},
        {".gif", "image/gif"},   {".webp", "image/webp"},     {".heic", "image/heic"},
        {".heif", "image/heif"}, {".pdf", "application/pdf"},
    };
    const char *q = memchr(u.ptr, '?', u.len);
    size_t i;

    if (q)
        u.len = (size_t)(q - u.ptr);
    for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (gw_str_has_suffix_nocase(u, types[i].ext))
            return gw_str_c(types[i].type);
    return (struct gw_str){"", 0};
}

/* {"inlineData":{...}} or {"fileData":{...}} of an IMAGE or DOCUMENT part, without the
 * closing brace (a signature may follow). */
static enum gw_code
rr_media(struct rr *w, const struct dl_part *p)
{
    struct gw_str u = p->url;

    if (p->kind == DL_PART_IMAGE && p->detail.len)
        rr_drop(w, GW_STR_LIT("detail"));
    if (p->kind == DL_PART_DOCUMENT && p->text.len)
        rr_drop(w, GW_STR_LIT("title"));
    if (p->cache)
        rr_drop(w, GW_STR_LIT("cache_control"));
    if (p->data.len || !u.len) {
        TRY(rr_lit(w, "{\"inlineData\":{\"mimeType\":"));
        TRY(rr_json(w, p->media_type));
        TRY(rr_member(w, "data", p->data));
        return rr_lit(w, "}");
    }
    if (gw_str_has_prefix_nocase(u, "data:") &&
        !w->own) { /* a Gemini client's fileUri goes as given */
        const char *semi = memchr(u.ptr, ';', u.len);
        const char *b64 = memmem(u.ptr, u.len, ";base64,", 8);

        if (!semi || !b64)
            return rr_refuse(w, "url: only base64 data URLs can be sent to a Gemini model");
        TRY(rr_lit(w, "{\"inlineData\":{\"mimeType\":"));
        TRY(rr_json(w, (struct gw_str){u.ptr + 5, (size_t)(semi - u.ptr) - 5}));
        TRY(rr_member(w, "data", (struct gw_str){b64 + 8, (size_t)(u.ptr + u.len - (b64 + 8))}));
        return rr_lit(w, "}");
    }
    TRY(rr_lit(w, "{\"fileData\":{"));
    if (p->media_type.len || type_of_url(u).len) {
        TRY(rr_lit(w, "\"mimeType\":"));
        TRY(rr_json(w, p->media_type.len ? p->media_type : type_of_url(u)));
        TRY(rr_lit(w, ","));
    }
    TRY(rr_lit(w, "\"fileUri\":"));
    TRY(rr_json(w, u));
    return rr_lit(w, "}");
}

/* ,"thoughtSignature":<sig> */
static enum gw_code
rr_signature(struct rr *w, struct gw_str sig)
{
    return sig.len ? rr_member(w, "thoughtSignature", sig) : GW_OK;
}

static enum gw_code
rr_call(struct rr *w, const struct dl_part *p, bool first_call)
{
    struct gw_str args = gw_str_trim(p->arguments);

    if (args.len && !dl_json_is_object(args, NULL))
        return rr_refuse(w, "tool_calls.function.arguments: must be a JSON object for a Gemini "
                            "model");
    TRY(rr_lit(w, "{\"functionCall\":{\"name\":"));
    TRY(rr_json(w, p->name));
    TRY(rr_lit(w, ",\"args\":"));
    TRY(args.len ? gw_buf_append_str(w->out, args) : rr_lit(w, "{}"));
    if (w->own && p->id.len && !dl_gemini_call_id_is_generated(p->id, p->name))
        TRY(rr_member(w, "id", p->id));
    TRY(rr_lit(w, "}"));
    if (p->signature.len && p->sig_shape == DL_SHAPE_GEMINI) {
        TRY(rr_signature(w, p->signature));
    } else {
        if (p->signature.len)
            rr_drop(w, GW_STR_LIT("signature")); /* another provider's: opaque here */
        if (!w->own && first_call)
            TRY(rr_signature(w, GW_STR_LIT(DL_GEMINI_SKIP_SIGNATURE)));
    }
    if (p->cache)
        rr_drop(w, GW_STR_LIT("cache_control"));
    return rr_lit(w, "}");
}

/* The function name of the call <call_id> answers: the latest earlier TOOL_CALL with
 * that id in messages before <before>. */
static struct gw_str
call_name(const struct dl_request *r, size_t before, struct gw_str call_id)
{
    size_t i, k;

    for (i = before; i-- > 0;)
        for (k = r->messages[i].n_parts; k-- > 0;) {
            const struct dl_part *p = &r->messages[i].parts[k];

            if (p->kind == DL_PART_TOOL_CALL && gw_str_eq(p->id, call_id))
                return p->name;
        }
    return (struct gw_str){"", 0};
}

static bool
result_media(const struct dl_part *c)
{
    return (c->kind == DL_PART_IMAGE || c->kind == DL_PART_DOCUMENT) &&
           (c->data.len || gw_str_has_prefix_nocase(c->url, "data:"));
}

/* "response" of a tool result: see the file's header. */
static enum gw_code
rr_response(struct rr *w, const struct dl_part *p)
{
    size_t k, texts = 0, last = 0;
    bool first = true;
    struct gw_str obj;

    for (k = 0; k < p->n_content; k++)
        if (p->content[k].kind == DL_PART_TEXT) {
            texts++;
            last = k;
        }
    if (texts == 1 && dl_json_is_object(p->content[last].text, &obj)) {
        if (!p->is_error)
            return gw_buf_append_str(w->out, obj);
        TRY(rr_lit(w, "{\"error\":"));
        TRY(gw_buf_append_str(w->out, obj));
        return rr_lit(w, "}");
    }
    TRY(rr_lit(w, p->is_error ? "{\"error\":\"" : "{\"output\":\""));
    for (k = 0; k < p->n_content; k++) {
        size_t at;

        if (p->content[k].kind != DL_PART_TEXT)
            continue;
        if (!first)
            TRY(rr_lit(w, "\\n\\n"));
        first = false;
        /* the text escaped, without its quotes */
        at = w->out->len;
        TRY(rr_json(w, p->content[k].text));
        memmove(w->out->data + at, w->out->data + at + 1, w->out->len - at - 2);
        w->out->len -= 2;
        w->out->data[w->out->len] = '\0';
    }
    return rr_lit(w, "\"}");
}

static enum gw_code
rr_result(struct rr *w, const struct dl_part *p, size_t msg)
{
    struct gw_str name = p->name.len ? p->name : call_name(w->r, msg, p->call_id);
    bool parts = false;
    size_t k;

    if (name.len == 0)
        return rr_refuse(w, "messages: a tool result whose call is not in the conversation cannot "
                            "be sent to a Gemini model (it needs the function's name)");
    TRY(rr_lit(w, "{\"functionResponse\":{\"name\":"));
    TRY(rr_json(w, name));
    TRY(rr_lit(w, ",\"response\":"));
    TRY(rr_response(w, p));
    if (w->own && p->call_id.len && !dl_gemini_call_id_is_generated(p->call_id, name))
        TRY(rr_member(w, "id", p->call_id));
    for (k = 0; k < p->n_content; k++) {
        const struct dl_part *c = &p->content[k];

        if (c->kind == DL_PART_TEXT)
            continue;
        if (c->kind == DL_PART_OTHER && !w->own)
            return rr_refuse(w, "messages: %.*s parts cannot be sent to a Gemini model",
                             (int)(c->name.len > 64 ? 64 : c->name.len), c->name.ptr);
        if (!result_media(c)) {
            rr_drop(w, GW_STR_LIT("tool result content"));
            continue;
        }
        TRY(rr_lit(w, parts ? "," : ",\"parts\":["));
        parts = true;
        TRY(rr_media(w, c));
        TRY(rr_lit(w, "}"));
    }
    if (parts)
        TRY(rr_lit(w, "]"));
    if (p->cache)
        rr_drop(w, GW_STR_LIT("cache_control"));
    return rr_lit(w, "}}");
}

/* Whether part <p> is sent. */
static bool
part_renders(const struct dl_part *p)
{
    switch (p->kind) {
    case DL_PART_TEXT: return p->text.len > 0;
    case DL_PART_REASONING:
        return p->sig_shape == DL_SHAPE_GEMINI && !p->redacted &&
               (p->text.len > 0 || p->signature.len > 0);
    case DL_PART_IMAGE:
    case DL_PART_DOCUMENT:
    case DL_PART_TOOL_CALL:
    case DL_PART_TOOL_RESULT:
    case DL_PART_OTHER: return true;
    }
    return false;
}

/* A reasoning part that only carries the signature of the part after it. */
static bool
is_carrier(const struct dl_message *m, size_t k)
{
    const struct dl_part *p = &m->parts[k], *next;

    if (p->kind != DL_PART_REASONING || p->text.len || !p->signature.len || k + 1 >= m->n_parts)
        return false;
    next = &m->parts[k + 1];
    return (next->kind == DL_PART_TEXT && next->text.len) || next->kind == DL_PART_IMAGE ||
           next->kind == DL_PART_DOCUMENT;
}

static size_t
message_parts(const struct dl_message *m)
{
    size_t k, n = 0;

    for (k = 0; k < m->n_parts; k++)
        n += part_renders(&m->parts[k]);
    return n;
}

/* The drops of message <m>'s parts that are not sent. */
static void
rr_message_drops(struct rr *w, const struct dl_message *m)
{
    size_t k;

    if (m->name.len)
        rr_drop(w, GW_STR_LIT("name"));
    for (k = 0; k < m->n_parts; k++) {
        const struct dl_part *p = &m->parts[k];

        if (p->kind == DL_PART_REASONING && !part_renders(p) && (p->text.len || p->signature.len))
            rr_drop(w, GW_STR_LIT("reasoning"));
    }
}

/* Part <k> of messages[<i>] (renders), after <*comma>; <*first_call>: no functionCall
 * written in this turn yet. */
static enum gw_code
rr_part(struct rr *w, size_t i, size_t k, bool *comma, bool *first_call)
{
    const struct dl_message *m = &w->r->messages[i];
    const struct dl_part *p = &m->parts[k];
    bool model = m->role == DL_ROLE_ASSISTANT;
    struct gw_str sig = {"", 0};

    if (is_carrier(m, k) && part_renders(p))
        return GW_OK; /* written with the next part */
    if (k > 0 && is_carrier(m, k - 1) && part_renders(&m->parts[k - 1]))
        sig = m->parts[k - 1].signature;
    TRY(rr_lit(w, *comma ? "," : ""));
    *comma = true;
    switch (p->kind) {
    case DL_PART_TEXT:
        TRY(rr_lit(w, "{\"text\":"));
        TRY(rr_json(w, p->text));
        if (p->cache)
            rr_drop(w, GW_STR_LIT("cache_control"));
        break;
    case DL_PART_REASONING:
        TRY(rr_lit(w, "{\"text\":"));
        TRY(rr_json(w, p->text));
        /* a signature alone is an empty text part, as Gemini ends some answers */
        if (p->text.len)
            TRY(rr_lit(w, ",\"thought\":true"));
        sig = p->signature;
        break;
    case DL_PART_IMAGE:
    case DL_PART_DOCUMENT: TRY(rr_media(w, p)); break;
    case DL_PART_TOOL_CALL:
        if (!model)
            return rr_refuse(w, "messages: a tool call in a user message cannot be sent to a "
                                "Gemini model");
        TRY(rr_call(w, p, *first_call));
        *first_call = false;
        return GW_OK;
    case DL_PART_TOOL_RESULT:
        if (model)
            return rr_refuse(w, "messages: a tool result in an assistant message cannot be sent "
                                "to a Gemini model");
        return rr_result(w, p, i);
    case DL_PART_OTHER:
        if (!w->own || !dl_json_is_object(p->data, NULL))
            return rr_refuse(w, "messages: %.*s parts cannot be sent to a Gemini model",
                             (int)(p->name.len > 64 ? 64 : p->name.len), p->name.ptr);
        return gw_buf_append_str(w->out, gw_str_trim(p->data));
    }
    TRY(rr_signature(w, sig));
    return rr_lit(w, "}");
}

/* One turn: messages [<from>, <to>) of one side. */
static enum gw_code
rr_turn(struct rr *w, size_t from, size_t to, bool first_turn)
{
    const struct dl_message *msgs = w->r->messages;
    bool model = msgs[from].role == DL_ROLE_ASSISTANT, comma = false, first_call = true;
    size_t i, k;

    TRY(rr_lit(w, first_turn ? "{\"role\":\"" : ",{\"role\":\""));
    TRY(rr_lit(w, model ? "model\",\"parts\":[" : "user\",\"parts\":["));
    for (i = from; i < to; i++) {
        rr_message_drops(w, &msgs[i]);
        for (k = 0; k < msgs[i].n_parts; k++)
            if (part_renders(&msgs[i].parts[k]))
                TRY(rr_part(w, i, k, &comma, &first_call));
    }
    return rr_lit(w, "]}");
}

static enum gw_code
rr_contents(struct rr *w)
{
    const struct dl_message *msgs = w->r->messages;
    size_t n = w->r->n_messages, i = 0, k;
    bool first_turn = true;

    TRY(rr_lit(w, "{\"contents\":["));
    while (i < n) {
        bool model = msgs[i].role == DL_ROLE_ASSISTANT;
        size_t end = i;

        if (message_parts(&msgs[i]) == 0) {
            rr_message_drops(w, &msgs[i]);
            i++;
            continue;
        }
        for (k = i; k < n; k++) {
            if (message_parts(&msgs[k]) == 0)
                continue;
            if ((msgs[k].role == DL_ROLE_ASSISTANT) != model)
                break;
            end = k + 1;
        }
        TRY(rr_turn(w, i, end, first_turn));
        first_turn = false;
        i = end;
    }
    if (first_turn && !w->own)
        return rr_refuse(w, "messages: a Gemini model needs at least one message with content");
    return rr_lit(w, "]");
}

static enum gw_code
rr_system(struct rr *w)
{
    const struct dl_request *r = w->r;
    bool first = true;
    size_t k;

    for (k = 0; k < r->n_system; k++) {
        if (r->system[k].cache)
            rr_drop(w, GW_STR_LIT("cache_control"));
        if (r->system[k].text.len == 0)
            continue;
        TRY(rr_lit(w, first ? ",\"systemInstruction\":{\"parts\":[" : ","));
        first = false;
        TRY(rr_lit(w, "{\"text\":"));
        TRY(rr_json(w, r->system[k].text));
        TRY(rr_lit(w, "}"));
    }
    return first ? GW_OK : rr_lit(w, "]}");
}

/* ---- tools ---- */

static enum gw_code
rr_declaration(struct rr *w, const struct dl_tool *t)
{
    TRY(rr_lit(w, "{\"name\":"));
    TRY(rr_json(w, t->name));
    if (t->description.len)
        TRY(rr_member(w, "description", t->description));
    if (w->own && t->source_parameters.len) {
        TRY(rr_lit(w, ",\"parameters\":"));
        TRY(gw_buf_append_str(w->out, gw_str_trim(t->source_parameters)));
    } else if (t->parameters.len) {
        TRY(rr_lit(w, ",\"parametersJsonSchema\":"));
        TRY(gw_buf_append_str(w->out, gw_str_trim(t->parameters)));
    }
    if (t->strict)
        rr_drop(w, GW_STR_LIT("strict"));
    if (t->cache)
        rr_drop(w, GW_STR_LIT("cache_control"));
    return rr_lit(w, "}");
}

static enum gw_code
rr_tools(struct rr *w)
{
    const struct dl_request *r = w->r;
    bool any = false, comma = false;
    size_t k;

    for (k = 0; k < r->n_tools; k++) {
        if (r->tools[k].hosted.len)
            continue;
        TRY(rr_lit(w, any ? "," : ",\"tools\":[{\"functionDeclarations\":["));
        any = true;
        TRY(rr_declaration(w, &r->tools[k]));
    }
    if (any) {
        TRY(rr_lit(w, "]}"));
        comma = true;
    }
    for (k = 0; k < r->n_tools; k++) {
        if (!r->tools[k].hosted.len)
            continue;
        TRY(rr_lit(w, comma ? "," : ",\"tools\":["));
        comma = true;
        TRY(gw_buf_append_str(w->out, gw_str_trim(r->tools[k].hosted)));
    }
    return comma ? rr_lit(w, "]") : GW_OK;
}

static enum gw_code
rr_tool_config(struct rr *w)
{
    const struct dl_request *r = w->r;
    struct gw_str validated =
        w->own ? extra_of(r, "toolConfig.functionCallingConfig.mode") : (struct gw_str){NULL, 0};
    bool comma = false, fcc_extras;

    if (r->parallel_tool_calls >= 0 && !w->own)
        rr_drop(w, GW_STR_LIT("parallel_tool_calls"));
    if (r->n_tools == 0 && !w->own) {
        if (r->tool_choice != DL_TOOL_CHOICE_UNSET)
            rr_drop(w, GW_STR_LIT("tool_choice"));
        return GW_OK;
    }
    fcc_extras = w->own && has_extras_under(r, "toolConfig.functionCallingConfig.");
    if (r->tool_choice == DL_TOOL_CHOICE_UNSET && !fcc_extras &&
        !(w->own && has_extras_under(r, "toolConfig.")))
        return GW_OK;
    TRY(rr_lit(w, ",\"toolConfig\":{"));
    if (r->tool_choice != DL_TOOL_CHOICE_UNSET || fcc_extras) {
        bool inner = false;

        TRY(rr_lit(w, "\"functionCallingConfig\":{"));
        switch (r->tool_choice) {
        case DL_TOOL_CHOICE_UNSET: break;
        case DL_TOOL_CHOICE_AUTO:
            TRY(rr_lit(w, "\"mode\":"));
            TRY(validated.ptr ? gw_buf_append_str(w->out, validated) : rr_lit(w, "\"AUTO\""));
            inner = true;
            break;
        case DL_TOOL_CHOICE_NONE:
            TRY(rr_lit(w, "\"mode\":\"NONE\""));
            inner = true;
            break;
        case DL_TOOL_CHOICE_REQUIRED:
            TRY(rr_lit(w, "\"mode\":\"ANY\""));
            inner = true;
            break;
        case DL_TOOL_CHOICE_NAMED:
            TRY(rr_lit(w, "\"mode\":\"ANY\",\"allowedFunctionNames\":["));
            TRY(rr_json(w, r->tool_choice_name));
            TRY(rr_lit(w, "]"));
            inner = true;
            break;
        }
        if (w->own) {
            /* the mode extra is written above, as the mode */
            size_t k, n = strlen("toolConfig.functionCallingConfig.");

            for (k = 0; k < r->n_extras; k++) {
                const struct dl_extra *e = &r->extras[k];
                struct gw_str rest;

                if (e->name.len <= n ||
                    memcmp(e->name.ptr, "toolConfig.functionCallingConfig.", n) != 0)
                    continue;
                rest = (struct gw_str){e->name.ptr + n, e->name.len - n};
                if (gw_str_eq(rest, GW_STR_LIT("mode")))
                    continue;
                TRY(rr_lit(w, inner ? "," : ""));
                inner = true;
                TRY(rr_json(w, rest));
                TRY(rr_lit(w, ":"));
                TRY(gw_buf_append_str(w->out, gw_str_trim(e->raw)));
            }
        }
        TRY(rr_lit(w, "}"));
        comma = true;
    }
    if (w->own)
        TRY(rr_extras_under(w, "toolConfig.", "functionCallingConfig.", &comma));
    return rr_lit(w, "}");
}

/* ---- generationConfig ---- */

/* A budget for an effort ("" when none fits). */
static uint64_t
budget_of(struct gw_str effort)
{
    static const struct {
        const char *effort;
        uint64_t budget;
    } budgets[] = {
        {"minimal", 512}, {"low", 1024}, {"medium", 8192}, {"high", 24576}, {"xhigh", 24576},
    };
    size_t i;

    for (i = 0; i < sizeof(budgets) / sizeof(budgets[0]); i++)
        if (gw_str_eq(effort, gw_str_c(budgets[i].effort)))
            return budgets[i].budget;
    return 0;
}

static enum gw_code
rr_thinking(struct rr *w, bool *comma)
{
    const struct dl_request *r = w->r;
    bool inner = false;

    if (w->own) {
        if (!r->thinking_budget && !r->reasoning_effort.len &&
            !has_extras_under(r, "generationConfig.thinkingConfig."))
            return GW_OK;
        TRY(rr_lit(w, *comma ? ",\"thinkingConfig\":{" : "\"thinkingConfig\":{"));
        *comma = true;
        if (r->thinking_budget) {
            TRY(rr_lit(w, "\"thinkingBudget\":"));
            TRY(gw_buf_append_u64(w->out, r->thinking_budget));
            inner = true;
        }
        if (r->reasoning_effort.len) {
            char up[32];
            size_t i, n = r->reasoning_effort.len < sizeof(up) ? r->reasoning_effort.len : 0;

            for (i = 0; i < n; i++) {
                char c = r->reasoning_effort.ptr[i];

                up[i] = c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
            }
            TRY(rr_lit(w, inner ? ",\"thinkingLevel\":" : "\"thinkingLevel\":"));
            TRY(rr_json(w, n ? (struct gw_str){up, n} : r->reasoning_effort));
            inner = true;
        }
        TRY(rr_extras_under(w, "generationConfig.thinkingConfig.", NULL, &inner));
        return rr_lit(w, "}");
    }
    if (r->thinking_budget) {
        TRY(rr_lit(w, *comma ? ",\"thinkingConfig\":{" : "\"thinkingConfig\":{"));
        *comma = true;
        TRY(rr_lit(w, "\"thinkingBudget\":"));
        TRY(gw_buf_append_u64(w->out, r->thinking_budget));
        return rr_lit(w, ",\"includeThoughts\":true}");
    }
    if (r->reasoning_effort.len) {
        uint64_t b = budget_of(r->reasoning_effort);

        if (!b) {
            rr_drop(w, GW_STR_LIT("reasoning_effort")); /* "none", or one of no known size */
            return GW_OK;
        }
        TRY(rr_lit(w, *comma ? ",\"thinkingConfig\":{" : "\"thinkingConfig\":{"));
        *comma = true;
        TRY(rr_lit(w, "\"thinkingBudget\":"));
        TRY(gw_buf_append_u64(w->out, b));
        return rr_lit(w, ",\"includeThoughts\":true}");
    }
    if (r->thinking) {
        TRY(rr_lit(w, *comma ? ",\"thinkingConfig\":{" : "\"thinkingConfig\":{"));
        *comma = true;
        return rr_lit(w, "\"includeThoughts\":true}");
    }
    return GW_OK;
}

/* ,"<key>":<double> inside generationConfig */
static enum gw_code
rr_real(struct rr *w, bool *comma, const char *key, double v)
{
    TRY(rr_lit(w, *comma ? ",\"" : "\""));
    *comma = true;
    TRY(rr_lit(w, key));
    TRY(rr_lit(w, "\":"));
    return gw_buf_append_double(w->out, v);
}

static enum gw_code
rr_int(struct rr *w, bool *comma, const char *key, int64_t v)
{
    TRY(rr_lit(w, *comma ? ",\"" : "\""));
    *comma = true;
    TRY(rr_lit(w, key));
    TRY(rr_lit(w, "\":"));
    return gw_buf_append_i64(w->out, v);
}

static enum gw_code
rr_generation(struct rr *w, uint64_t max_output_default)
{
    const struct dl_request *r = w->r;
    uint64_t max = r->max_output_tokens ? r->max_output_tokens : max_output_default;
    size_t at, k;
    bool comma = false, stops = false;

    TRY(rr_lit(w, ",\"generationConfig\":{"));
    at = w->out->len;
    if (r->has_temperature)
        TRY(rr_real(w, &comma, "temperature", r->temperature));
    if (r->has_top_p)
        TRY(rr_real(w, &comma, "topP", r->top_p));
    if (r->has_top_k)
        TRY(rr_int(w, &comma, "topK", r->top_k));
    if (max)
        TRY(rr_int(w, &comma, "maxOutputTokens", (int64_t)(max > INT64_MAX ? INT64_MAX : max)));
    for (k = 0; k < r->n_stop; k++) {
        if (r->stop[k].len == 0)
            continue;
        TRY(rr_lit(w, stops ? "," : comma ? ",\"stopSequences\":[" : "\"stopSequences\":["));
        stops = comma = true;
        TRY(rr_json(w, r->stop[k]));
    }
    if (stops)
        TRY(rr_lit(w, "]"));
    if (r->has_seed)
        TRY(rr_int(w, &comma, "seed", r->seed));
    if (r->has_presence)
        TRY(rr_real(w, &comma, "presencePenalty", r->presence_penalty));
    if (r->has_frequency)
        TRY(rr_real(w, &comma, "frequencyPenalty", r->frequency_penalty));
    if (r->format != DL_FORMAT_TEXT) {
        TRY(rr_lit(w, comma ? ",\"responseMimeType\":\"application/json\""
                            : "\"responseMimeType\":\"application/json\""));
        comma = true;
    }
    if (r->format == DL_FORMAT_JSON_SCHEMA && w->own && r->format_source_schema.len) {
        TRY(rr_lit(w, ",\"responseSchema\":"));
        TRY(gw_buf_append_str(w->out, gw_str_trim(r->format_source_schema)));
    } else if (r->format == DL_FORMAT_JSON_SCHEMA && r->format_schema.len) {
        TRY(rr_lit(w, ",\"responseJsonSchema\":"));
        TRY(gw_buf_append_str(w->out, gw_str_trim(r->format_schema)));
    }
    TRY(rr_thinking(w, &comma));
    if (w->own)
        TRY(rr_extras_under(w, "generationConfig.", "thinkingConfig.", &comma));
    if (w->out->len == at) {
        /* nothing to configure: no member at all */
        w->out->len = at - strlen(",\"generationConfig\":{");
        w->out->data[w->out->len] = '\0';
        return GW_OK;
    }
    return rr_lit(w, "}");
}

/* ---- the body ---- */

static enum gw_code
rr_rest(struct rr *w)
{
    const struct dl_request *r = w->r;
    size_t k;

    if (!w->own) {
        if (r->user.len)
            rr_drop(w, GW_STR_LIT("user"));
        if (r->metadata.len)
            rr_drop(w, GW_STR_LIT("metadata"));
        if (r->prompt_cache_key.len)
            rr_drop(w, GW_STR_LIT("prompt_cache_key"));
        /* store is the gateway's own business (DESIGN.md 11), not the upstream's */
    }
    for (k = 0; k < r->n_extras; k++) {
        const struct dl_extra *e = &r->extras[k];

        if (!w->own) {
            rr_drop(w, e->name);
            continue;
        }
        if (is_nested_extra(e->name))
            continue; /* written inside its object */
        TRY(rr_lit(w, ","));
        TRY(rr_json(w, e->name));
        TRY(rr_lit(w, ":"));
        TRY(gw_buf_append_str(w->out, gw_str_trim(e->raw)));
    }
    return GW_OK;
}

/* What the events of this gateway cannot carry from a Gemini upstream, or Gemini cannot
 * express (DESIGN.md 11: refused). */
static enum gw_code
rr_refusals(struct rr *w)
{
    const struct dl_request *r = w->r;
    size_t k, stops = 0;

    for (k = 0; k < r->n_stop; k++)
        stops += r->stop[k].len > 0;
    if (stops > GEMINI_MAX_STOP && !w->own)
        return rr_refuse(w, "stop: a Gemini model takes at most %d stop sequences",
                         GEMINI_MAX_STOP);
    if (r->previous_response_id.len)
        return rr_refuse(w, "previous_response_id: a stored conversation cannot be sent to a "
                            "Gemini model");
    if (w->own)
        return GW_OK;
    if (r->needs & DL_NEED_F_N_CHOICES)
        return rr_refuse(w, "n: more than one choice cannot be converted for a Gemini model");
    if (r->needs & DL_NEED_F_LOGPROBS)
        return rr_refuse(w, "logprobs: log probabilities cannot be converted for a Gemini model");
    if (r->needs & DL_NEED_F_AUDIO_OUT)
        return rr_refuse(w, "audio: audio output cannot be converted for a Gemini model");
    if (r->needs & DL_NEED_F_IMAGE_OUT)
        return rr_refuse(w, "modalities: image output cannot be converted for a Gemini model");
    for (k = 0; k < r->n_tools; k++)
        if (r->tools[k].hosted.len)
            break;
    if ((r->needs & DL_NEED_F_HOSTED_TOOLS) || k < r->n_tools)
        return rr_refuse(w, "tools: hosted tools (web search, code execution, file search, "
                            "computer use) cannot be sent to a Gemini model");
    return GW_OK;
}

static enum gw_code
rr_body(struct rr *w, uint64_t max_output_default)
{
    size_t k;

    TRY(rr_refusals(w));
    for (k = 0; w->own && k < w->r->n_tools; k++)
        if (w->r->tools[k].hosted.len && !dl_json_is_object(w->r->tools[k].hosted, NULL))
            return rr_refuse(w, "tools: hosted tools of another shape cannot be sent to a "
                                "Gemini model");
    TRY(rr_contents(w));
    TRY(rr_system(w));
    TRY(rr_tools(w));
    TRY(rr_tool_config(w));
    TRY(rr_generation(w, max_output_default));
    TRY(rr_rest(w));
    return rr_lit(w, "}");
}

enum gw_code
dl_gemini_request_render(const struct dl_request *r, struct gw_str model,
                         uint64_t max_output_default, struct dl_dropped *dropped,
                         struct gw_buf *out, struct gw_buf *why)
{
    struct dl_dropped none = {0};
    struct rr w = {r, dropped ? dropped : &none, out, why, r->source == DL_SHAPE_GEMINI};
    size_t start = out->len, n_dropped = w.dropped->n;
    bool more = w.dropped->more;
    enum gw_code rc;

    (void)model; /* the model goes in the upstream's URL */
    rc = rr_body(&w, max_output_default);
    if (rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
        w.dropped->n = n_dropped; /* nothing is dropped from a request not sent */
        w.dropped->more = more;
    }
    return rc;
}
