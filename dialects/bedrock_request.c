/* SPDX-License-Identifier: MIT
 * dialects/bedrock_request.c - a canonical request (dialects/canon.h) rendered as the
 * body of a Converse / ConverseStream call to a Bedrock upstream (DESIGN.md 11, issue
 * 15). The model and streaming are in the path (dl_bedrock_path), never in the body.
 * No client speaks Converse to the gateway: the request always comes from another
 * shape, so every extra of it is dropped by name and its own blocks are refused.
 *
 * Decisions (docs/fields-bedrock.md has the whole table):
 * - messages: user and tool messages make "user" turns, assistant messages "assistant"
 *   turns; consecutive messages of one side share one turn (Converse wants them
 *   alternating, parallel tool results are one user turn); messages with nothing to
 *   send are skipped; the first turn must be the user's and there must be one (refused
 *   otherwise: inventing a turn changes what the model sees).
 * - Blocks: TEXT -> {"text"} (empty text is not sent: Converse refuses blank text).
 *   IMAGE -> {"image":{"format","source":{"bytes"}}} from base64 data or a data: URL
 *   (png, jpeg, gif, webp; another media type is refused); an image by http(s) URL is
 *   refused (Converse takes bytes; fetching is not the gateway's business); detail is
 *   dropped. DOCUMENT -> {"document":{"format","name","source":{"bytes"}}} (pdf, csv,
 *   doc, docx, xls, xlsx, html, txt, md by media type); its name is the title when
 *   Converse allows it (letters, digits, single spaces, - ( ) [ ]), else
 *   "document-<n>" and the title dropped. TOOL_CALL -> {"toolUse":{"toolUseId","name",
 *   "input": the arguments object}} (blank: {}; not an object, or no id: refused).
 *   TOOL_RESULT -> {"toolResult":{"toolUseId","content":[{"text"}|{"image"}|
 *   {"document"}],"status":"error" when is_error}}: nothing to say is [{"json":{}}]
 *   (an empty text block is refused by Converse); status only for Claude and Nova (the
 *   families that take it, else is_error dropped). REASONING -> reasoningContent
 *   {reasoningText{text,signature}} or {redactedContent} only in an assistant turn and
 *   only when a Bedrock upstream made it (sig_shape, dl_sig_origin), else dropped
 *   ("reasoning"); a tool call's signature (Gemini's) is dropped. OTHER parts are
 *   refused.
 * - Cache hints: a {"cachePoint":{"type":"default"}} block after the hinted block,
 *   system text or tool (its ttl for Claude), for Claude and Nova; other families
 *   drop them ("cache_control").
 * - system: [{"text"}...] with their cache points.
 * - inferenceConfig: maxTokens (the request's, else <max_output_default>, else none),
 *   temperature (above 1 clamped to 1: Chat's range is 0..2, Bedrock's models take
 *   0..1), topP (dropped for Claude when temperature is set too, as newer Claude
 *   models refuse both), stopSequences.
 * - toolConfig: tools [{"toolSpec":{"name","description","inputSchema":{"json"}}}]
 *   (strict dropped), toolChoice auto -> {"auto":{}}, required -> {"any":{}}, named ->
 *   {"tool":{"name"}}. Converse has no "none": with tool choice none the tools are not
 *   sent at all, so the model cannot call one (exactly what none asks), unless the
 *   conversation holds tool calls or results: Converse then refuses a request without
 *   toolConfig, so the tools go with no toolChoice and "tool_choice" is dropped (the
 *   model may call a tool; refusing would make every such turn fail). A conversation
 *   with tool blocks and no tools gets a toolSpec per function name its calls use
 *   (schema: any object), for the same reason. parallel_tool_calls has no Converse
 *   field: dropped.
 * - additionalModelRequestFields, by the family the model id names
 *   (dl_bedrock_family): Claude takes top_k and thinking {type enabled, budget_tokens};
 *   Nova takes top_k as inferenceConfig.topK; elsewhere they are dropped ("top_k",
 *   "thinking"). A reasoning effort has no budget to give: dropped
 *   ("reasoning_effort"), and so is thinking asked without either. For Claude with stop
 *   sequences, additionalModelResponseFieldPaths ["/stop_sequence"] asks which one
 *   ended the answer.
 * - Dropped by name: seed, presence_penalty, frequency_penalty, user, metadata,
 *   prompt_cache_key, a message's name, tool_choice without tools, the offered tools
 *   and every extra. Refused (GW_E_UNCONVERTIBLE, naming the field): n > 1, logprobs,
 *   audio or image output, hosted tools, JSON output modes (response_format: this
 *   render does not write Converse's newer outputConfig, which only some models take,
 *   so nothing would enforce them), previous_response_id, OTHER parts.
 * Owns:    nothing beyond one call.
 * Threads: any; one request on one thread.
 * See:     dialects/bedrock-priv.h, dialects/canon.h, docs/fields-bedrock.md,
 *          tests/unit/dialects/test_bedrock_request.c
 */
#include "dialects/bedrock-priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "dialects/anthropic-priv.h"
#include "dialects/json_scan.h"

#define DOC_NAME_MAX 200

struct rr {
    const struct dl_request *r;
    struct dl_dropped *dropped;
    struct gw_buf *out;
    struct gw_buf *why;
    enum dl_bedrock_family family;
    unsigned n_documents; /* documents written so far, for generated names */
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
rr_drop(struct rr *w, const char *name)
{
    dl_dropped_add(w->dropped, gw_str_c(name));
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

/* True for the families that take cachePoint blocks and a tool result's status. */
static bool
family_caches(const struct rr *w)
{
    return w->family == DL_BEDROCK_CLAUDE || w->family == DL_BEDROCK_NOVA;
}

/* ,{"cachePoint":{...}} after a block that carries a cache hint. */
static enum gw_code
rr_cache_point(struct rr *w, bool cache, struct gw_str ttl)
{
    if (!cache)
        return GW_OK;
    if (!family_caches(w)) {
        rr_drop(w, "cache_control");
        return GW_OK;
    }
    TRY(rr_lit(w, ",{\"cachePoint\":{\"type\":\"default\""));
    if (ttl.len && w->family == DL_BEDROCK_CLAUDE)
        TRY(rr_member(w, "ttl", ttl));
    return rr_lit(w, "}}");
}

/* ---- media ---- */

/* The base64 bytes and media type of an IMAGE or DOCUMENT part: its data, or a data:
 * URL's. False (with a refusal in <rc>) for anything else. <what> names the part. */
static bool
media_bytes(struct rr *w, const struct dl_part *p, const char *what, struct gw_str *type,
            struct gw_str *bytes, enum gw_code *rc)
{
    struct gw_str u = p->url;

    if (p->data.len || !u.len) {
        *type = p->media_type;
        *bytes = p->data;
        return true;
    }
    if (gw_str_has_prefix_nocase(u, "data:")) {
        const char *semi = memchr(u.ptr, ';', u.len);
        const char *b64 = memmem(u.ptr, u.len, ";base64,", 8);

        if (semi && b64) {
            *type = (struct gw_str){u.ptr + 5, (size_t)(semi - u.ptr) - 5};
            *bytes = (struct gw_str){b64 + 8, (size_t)(u.ptr + u.len - (b64 + 8))};
            return true;
        }
        *rc = rr_refuse(w, "%s url: only base64 data URLs can be sent to a Bedrock model", what);
        return false;
    }
    *rc = rr_refuse(w,
                    "%s url: a Bedrock model takes the %s's bytes, not a URL (send it as "
                    "base64 data)",
                    what, what);
    return false;
}

/* <type>, or words for a missing one, for a refusal. */
static struct gw_str
type_words(struct gw_str type)
{
    if (type.len == 0)
        return GW_STR_LIT("an unknown type");
    if (type.len > 64)
        type.len = 64;
    return type;
}

/* The Converse format of a media type, from <table> (pairs of media type, format), or
 * NULL. */
static const char *
format_of(struct gw_str type, const char *const (*table)[2], size_t n)
{
    size_t i;

    for (i = 0; i < n; i++)
        if (type.len == strlen(table[i][0]) && strncasecmp(type.ptr, table[i][0], type.len) == 0)
            return table[i][1];
    return NULL;
}

static enum gw_code
rr_image(struct rr *w, const struct dl_part *p)
{
    static const char *const formats[][2] = {
        {"image/png", "png"}, {"image/jpeg", "jpeg"}, {"image/jpg", "jpeg"},
        {"image/gif", "gif"}, {"image/webp", "webp"},
    };
    struct gw_str type, bytes;
    enum gw_code rc = GW_OK;
    const char *format;

    if (!media_bytes(w, p, "image", &type, &bytes, &rc))
        return rc;
    format = format_of(type, formats, sizeof(formats) / sizeof(formats[0]));
    if (!format) {
        type = type_words(type);
        return rr_refuse(w, "image: a Bedrock model takes png, jpeg, gif or webp images, not %.*s",
                         (int)type.len, type.ptr);
    }
    if (p->detail.len)
        rr_drop(w, "detail");
    TRY(rr_lit(w, "{\"image\":{\"format\":\""));
    TRY(rr_lit(w, format));
    TRY(rr_lit(w, "\",\"source\":{\"bytes\":"));
    TRY(rr_json(w, bytes));
    return rr_lit(w, "}}}");
}

/* True when Converse takes <s> as a document's name: letters, digits, single spaces,
 * hyphens, parentheses and square brackets. */
static bool
doc_name_ok(struct gw_str s)
{
    size_t i;

    if (s.len == 0 || s.len > DOC_NAME_MAX || s.ptr[0] == ' ' || s.ptr[s.len - 1] == ' ')
        return false;
    for (i = 0; i < s.len; i++) {
        char c = s.ptr[i];

        if (c == ' ' && s.ptr[i - 1] == ' ')
            return false;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == ' ' || c == '-' || c == '(' || c == ')' || c == '[' || c == ']'))
            return false;
    }
    return true;
}

static enum gw_code
rr_document(struct rr *w, const struct dl_part *p)
{
    static const char *const formats[][2] = {
        {"application/pdf", "pdf"},
        {"text/csv", "csv"},
        {"application/msword", "doc"},
        {"application/vnd.openxmlformats-officedocument.wordprocessingml.document", "docx"},
        {"application/vnd.ms-excel", "xls"},
        {"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "xlsx"},
        {"text/html", "html"},
        {"text/plain", "txt"},
        {"text/markdown", "md"},
    };
    struct gw_str type, bytes;
    enum gw_code rc = GW_OK;
    const char *format;

    if (!media_bytes(w, p, "document", &type, &bytes, &rc))
        return rc;
    format = format_of(type, formats, sizeof(formats) / sizeof(formats[0]));
    if (!format) {
        type = type_words(type);
        return rr_refuse(w,
                         "document: a Bedrock model takes pdf, csv, doc, docx, xls, xlsx, "
                         "html, txt or md documents, not %.*s",
                         (int)type.len, type.ptr);
    }
    w->n_documents++;
    TRY(rr_lit(w, "{\"document\":{\"format\":\""));
    TRY(rr_lit(w, format));
    TRY(rr_lit(w, "\",\"name\":"));
    if (doc_name_ok(p->text)) {
        TRY(rr_json(w, p->text));
    } else {
        char gen[32];
        int n = snprintf(gen, sizeof(gen), "\"document-%u\"", w->n_documents);

        if (p->text.len)
            rr_drop(w, "title");
        TRY(gw_buf_append(w->out, gen, (size_t)n));
    }
    TRY(rr_lit(w, ",\"source\":{\"bytes\":"));
    TRY(rr_json(w, bytes));
    return rr_lit(w, "}}}");
}

/* ---- blocks ---- */

static enum gw_code
rr_text(struct rr *w, struct gw_str text)
{
    TRY(rr_lit(w, "{\"text\":"));
    TRY(rr_json(w, text));
    return rr_lit(w, "}");
}

static enum gw_code
rr_tool_use(struct rr *w, const struct dl_part *p)
{
    struct gw_str args = gw_str_trim(p->arguments);

    if (p->id.len == 0)
        return rr_refuse(w, "tool_calls: a tool call without an id cannot be sent to a Bedrock "
                            "model");
    if (args.len && !dl_json_is_object(args, NULL))
        return rr_refuse(w, "tool_calls.function.arguments: must be a JSON object for a "
                            "Bedrock model");
    if (p->signature.len)
        rr_drop(w, "signature"); /* another provider's: opaque here */
    TRY(rr_lit(w, "{\"toolUse\":{\"toolUseId\":"));
    TRY(rr_json(w, p->id));
    TRY(rr_member(w, "name", p->name));
    TRY(rr_lit(w, ",\"input\":"));
    TRY(args.len ? gw_buf_append_str(w->out, args) : rr_lit(w, "{}"));
    return rr_lit(w, "}}");
}

static enum gw_code
rr_tool_result(struct rr *w, const struct dl_part *p)
{
    bool first = true;
    size_t k;

    if (p->call_id.len == 0)
        return rr_refuse(w, "messages: a tool result without the id of its call cannot be sent "
                            "to a Bedrock model");
    TRY(rr_lit(w, "{\"toolResult\":{\"toolUseId\":"));
    TRY(rr_json(w, p->call_id));
    TRY(rr_lit(w, ",\"content\":["));
    for (k = 0; k < p->n_content; k++) {
        const struct dl_part *c = &p->content[k];

        if (c->cache)
            rr_drop(w, "cache_control"); /* Converse has no cache point inside a result */
        if (c->kind == DL_PART_TEXT && c->text.len == 0)
            continue;
        if (c->kind != DL_PART_TEXT && c->kind != DL_PART_IMAGE && c->kind != DL_PART_DOCUMENT) {
            rr_drop(w, "tool result content");
            continue;
        }
        if (!first)
            TRY(rr_lit(w, ","));
        first = false;
        if (c->kind == DL_PART_TEXT)
            TRY(rr_text(w, c->text));
        else if (c->kind == DL_PART_IMAGE)
            TRY(rr_image(w, c));
        else
            TRY(rr_document(w, c));
    }
    /* nothing to say: an empty object, as Converse refuses an empty text block */
    TRY(rr_lit(w, first ? "{\"json\":{}}]" : "]"));
    if (p->is_error) {
        if (family_caches(w))
            TRY(rr_lit(w, ",\"status\":\"error\""));
        else
            rr_drop(w, "is_error");
    }
    return rr_lit(w, "}}");
}

static enum gw_code
rr_reasoning(struct rr *w, const struct dl_part *p)
{
    if (p->redacted) {
        TRY(rr_lit(w, "{\"reasoningContent\":{\"redactedContent\":"));
        TRY(rr_json(w, p->signature));
        return rr_lit(w, "}}");
    }
    TRY(rr_lit(w, "{\"reasoningContent\":{\"reasoningText\":{\"text\":"));
    TRY(rr_json(w, p->text));
    TRY(rr_member(w, "signature", p->signature));
    return rr_lit(w, "}}}");
}

/* Whether part <p> of a message of <role> makes a block. Reasoning goes back only in an
 * assistant turn, signed by a Bedrock upstream (or redacted by one). */
static bool
part_renders(const struct dl_part *p, enum dl_role role)
{
    switch (p->kind) {
    case DL_PART_TEXT: return p->text.len > 0;
    case DL_PART_REASONING:
        return role == DL_ROLE_ASSISTANT && p->sig_shape == DL_SHAPE_BEDROCK &&
               p->signature.len > 0;
    case DL_PART_IMAGE:
    case DL_PART_DOCUMENT:
    case DL_PART_TOOL_CALL:
    case DL_PART_TOOL_RESULT:
    case DL_PART_OTHER: return true;
    }
    return false;
}

static size_t
message_blocks(const struct dl_message *m)
{
    size_t k, n = 0;

    for (k = 0; k < m->n_parts; k++)
        n += part_renders(&m->parts[k], m->role);
    return n;
}

/* The drops of a message besides its blocks' own. */
static void
rr_message_drops(struct rr *w, const struct dl_message *m)
{
    size_t k;

    if (m->name.len)
        rr_drop(w, "name");
    for (k = 0; k < m->n_parts; k++) {
        if (part_renders(&m->parts[k], m->role))
            continue;
        if (m->parts[k].kind == DL_PART_REASONING)
            rr_drop(w, "reasoning");
        if (m->parts[k].cache)
            rr_drop(w, "cache_control");
    }
}

static enum gw_code
rr_part(struct rr *w, const struct dl_part *p)
{
    switch (p->kind) {
    case DL_PART_TEXT: TRY(rr_text(w, p->text)); break;
    case DL_PART_IMAGE: TRY(rr_image(w, p)); break;
    case DL_PART_DOCUMENT: TRY(rr_document(w, p)); break;
    case DL_PART_TOOL_CALL: TRY(rr_tool_use(w, p)); break;
    case DL_PART_TOOL_RESULT: TRY(rr_tool_result(w, p)); break;
    case DL_PART_REASONING: TRY(rr_reasoning(w, p)); break;
    case DL_PART_OTHER:
        return rr_refuse(w, "messages: %.*s parts cannot be sent to a Bedrock model",
                         (int)(p->name.len > 64 ? 64 : p->name.len), p->name.ptr);
    }
    return rr_cache_point(w, p->cache, p->cache_ttl);
}

/* One turn: messages [<from>, <to>) of one side. */
static enum gw_code
rr_turn(struct rr *w, size_t from, size_t to, bool first_turn)
{
    const struct dl_message *msgs = w->r->messages;
    bool assistant = msgs[from].role == DL_ROLE_ASSISTANT, first = true;
    size_t i, k;

    TRY(rr_lit(w, first_turn ? "{\"role\":\"" : ",{\"role\":\""));
    TRY(rr_lit(w, assistant ? "assistant\",\"content\":[" : "user\",\"content\":["));
    for (i = from; i < to; i++) {
        rr_message_drops(w, &msgs[i]);
        for (k = 0; k < msgs[i].n_parts; k++) {
            const struct dl_part *p = &msgs[i].parts[k];

            if (!part_renders(p, msgs[i].role))
                continue;
            if (!first)
                TRY(rr_lit(w, ","));
            first = false;
            TRY(rr_part(w, p));
        }
    }
    return rr_lit(w, "]}");
}

static enum gw_code
rr_messages(struct rr *w)
{
    const struct dl_message *msgs = w->r->messages;
    size_t n = w->r->n_messages, i = 0, k;
    bool first_turn = true;

    TRY(rr_lit(w, "\"messages\":["));
    while (i < n) {
        bool side = msgs[i].role == DL_ROLE_ASSISTANT;
        size_t end = i;

        if (message_blocks(&msgs[i]) == 0) {
            rr_message_drops(w, &msgs[i]);
            i++;
            continue;
        }
        if (first_turn && side)
            return rr_refuse(w, "messages: a Bedrock model needs the conversation to start with "
                                "a user message, not an assistant message");
        for (k = i; k < n; k++) {
            if (message_blocks(&msgs[k]) == 0)
                continue;
            if ((msgs[k].role == DL_ROLE_ASSISTANT) != side)
                break;
            end = k + 1;
        }
        TRY(rr_turn(w, i, end, first_turn));
        first_turn = false;
        i = end;
    }
    if (first_turn)
        return rr_refuse(w, "messages: a Bedrock model needs at least one user message");
    return rr_lit(w, "]");
}

static enum gw_code
rr_system(struct rr *w)
{
    const struct dl_request *r = w->r;
    bool first = true;
    size_t k;

    for (k = 0; k < r->n_system; k++) {
        if (r->system[k].text.len == 0) {
            if (r->system[k].cache)
                rr_drop(w, "cache_control");
            continue;
        }
        TRY(rr_lit(w, first ? ",\"system\":[" : ","));
        first = false;
        TRY(rr_text(w, r->system[k].text));
        TRY(rr_cache_point(w, r->system[k].cache, r->system[k].cache_ttl));
    }
    return first ? GW_OK : rr_lit(w, "]");
}

/* ---- tools ---- */

/* True when some message holds a tool call or a tool result. */
static bool
has_tool_blocks(const struct dl_request *r)
{
    size_t i, k;

    for (i = 0; i < r->n_messages; i++)
        for (k = 0; k < r->messages[i].n_parts; k++)
            if (r->messages[i].parts[k].kind == DL_PART_TOOL_CALL ||
                r->messages[i].parts[k].kind == DL_PART_TOOL_RESULT)
                return true;
    return false;
}

static enum gw_code
rr_tool_spec(struct rr *w, const struct dl_tool *t)
{
    TRY(rr_lit(w, "{\"toolSpec\":{\"name\":"));
    TRY(rr_json(w, t->name));
    if (t->description.len)
        TRY(rr_member(w, "description", t->description));
    TRY(rr_lit(w, ",\"inputSchema\":{\"json\":"));
    TRY(t->parameters.len ? gw_buf_append_str(w->out, gw_str_trim(t->parameters))
                          : rr_lit(w, "{\"type\":\"object\",\"properties\":{}}"));
    TRY(rr_lit(w, "}}}"));
    if (t->strict)
        rr_drop(w, "strict");
    return rr_cache_point(w, t->cache, (struct gw_str){"", 0});
}

/* True when a TOOL_CALL before message <before>, part <part> has the name of <p>. */
static bool
named_before(const struct dl_request *r, size_t before, size_t part, struct gw_str name)
{
    size_t i, k;

    for (i = 0; i <= before && i < r->n_messages; i++)
        for (k = 0; k < r->messages[i].n_parts && (i < before || k < part); k++)
            if (r->messages[i].parts[k].kind == DL_PART_TOOL_CALL &&
                gw_str_eq(r->messages[i].parts[k].name, name))
                return true;
    return false;
}

/* A toolSpec for each function name the conversation's calls use (see the header). */
static enum gw_code
rr_stub_tools(struct rr *w, bool *any)
{
    const struct dl_request *r = w->r;
    size_t i, k;

    for (i = 0; i < r->n_messages; i++)
        for (k = 0; k < r->messages[i].n_parts; k++) {
            const struct dl_part *p = &r->messages[i].parts[k];

            if (p->kind != DL_PART_TOOL_CALL || p->name.len == 0 || named_before(r, i, k, p->name))
                continue;
            TRY(rr_lit(w, *any ? "," : ",\"toolConfig\":{\"tools\":["));
            *any = true;
            TRY(rr_lit(w, "{\"toolSpec\":{\"name\":"));
            TRY(rr_json(w, p->name));
            TRY(rr_lit(w, ",\"inputSchema\":{\"json\":{\"type\":\"object\"}}}}"));
        }
    return GW_OK;
}

static enum gw_code
rr_tool_choice(struct rr *w)
{
    const struct dl_request *r = w->r;

    switch (r->tool_choice) {
    case DL_TOOL_CHOICE_UNSET:
    case DL_TOOL_CHOICE_NONE: return GW_OK;
    case DL_TOOL_CHOICE_AUTO: return rr_lit(w, ",\"toolChoice\":{\"auto\":{}}");
    case DL_TOOL_CHOICE_REQUIRED: return rr_lit(w, ",\"toolChoice\":{\"any\":{}}");
    case DL_TOOL_CHOICE_NAMED:
        TRY(rr_lit(w, ",\"toolChoice\":{\"tool\":{\"name\":"));
        TRY(rr_json(w, r->tool_choice_name));
        return rr_lit(w, "}}");
    }
    return GW_OK;
}

static enum gw_code
rr_tools(struct rr *w)
{
    const struct dl_request *r = w->r;
    bool blocks = has_tool_blocks(r), any = false;
    size_t k;

    if (r->parallel_tool_calls >= 0)
        rr_drop(w, "parallel_tool_calls");
    if (r->tool_choice == DL_TOOL_CHOICE_NONE && !blocks)
        return GW_OK; /* no tools: no call, as none asks */
    if (r->n_tools == 0) {
        if (r->tool_choice != DL_TOOL_CHOICE_UNSET)
            rr_drop(w, "tool_choice");
        if (!blocks)
            return GW_OK;
        TRY(rr_stub_tools(w, &any));
        return any ? rr_lit(w, "]}") : GW_OK;
    }
    if (r->tool_choice == DL_TOOL_CHOICE_NONE)
        rr_drop(w, "tool_choice"); /* Converse needs the tools: it has no "none" */
    TRY(rr_lit(w, ",\"toolConfig\":{\"tools\":["));
    for (k = 0; k < r->n_tools; k++) {
        if (k)
            TRY(rr_lit(w, ","));
        TRY(rr_tool_spec(w, &r->tools[k]));
    }
    TRY(rr_lit(w, "]"));
    TRY(rr_tool_choice(w));
    return rr_lit(w, "}");
}

/* ---- inferenceConfig, additional fields ---- */

/* ,"<key>":<v> or "<key>":<v> inside an object. */
static enum gw_code
rr_real(struct rr *w, bool *comma, const char *key, double v)
{
    TRY(rr_lit(w, *comma ? ",\"" : "\""));
    *comma = true;
    TRY(rr_lit(w, key));
    TRY(rr_lit(w, "\":"));
    return dl_anthropic_append_double(w->out, v);
}

static enum gw_code
rr_inference(struct rr *w, uint64_t max_output_default)
{
    const struct dl_request *r = w->r;
    uint64_t max = r->max_output_tokens ? r->max_output_tokens : max_output_default;
    bool comma = false, stops = false;
    size_t at, k;

    TRY(rr_lit(w, ",\"inferenceConfig\":{"));
    at = w->out->len;
    if (max) {
        TRY(rr_lit(w, "\"maxTokens\":"));
        TRY(gw_buf_append_u64(w->out, max > INT32_MAX ? INT32_MAX : max));
        comma = true;
    }
    if (r->has_temperature)
        TRY(rr_real(w, &comma, "temperature", r->temperature > 1.0 ? 1.0 : r->temperature));
    if (r->has_top_p && r->has_temperature && w->family == DL_BEDROCK_CLAUDE &&
        r->source != DL_SHAPE_MESSAGES)
        rr_drop(w, "top_p");
    else if (r->has_top_p)
        TRY(rr_real(w, &comma, "topP", r->top_p));
    for (k = 0; k < r->n_stop; k++) {
        if (r->stop[k].len == 0)
            continue;
        TRY(rr_lit(w, stops ? "," : comma ? ",\"stopSequences\":[" : "\"stopSequences\":["));
        stops = comma = true;
        TRY(rr_json(w, r->stop[k]));
    }
    if (stops)
        TRY(rr_lit(w, "]"));
    if (w->out->len == at) {
        /* nothing to configure: no member at all */
        w->out->len = at - strlen(",\"inferenceConfig\":{");
        w->out->data[w->out->len] = '\0';
        return GW_OK;
    }
    return rr_lit(w, "}");
}

static bool
has_stops(const struct dl_request *r)
{
    size_t k;

    for (k = 0; k < r->n_stop; k++)
        if (r->stop[k].len)
            return true;
    return false;
}

static enum gw_code
rr_additional(struct rr *w)
{
    const struct dl_request *r = w->r;
    bool comma = false, claude = w->family == DL_BEDROCK_CLAUDE;

    if (r->reasoning_effort.len)
        rr_drop(w, "reasoning_effort"); /* no budget can be guessed from it */
    if (r->thinking && !r->thinking_budget && !r->reasoning_effort.len)
        rr_drop(w, "thinking");
    if (r->has_top_k && w->family == DL_BEDROCK_OTHER)
        rr_drop(w, "top_k");
    if (r->thinking_budget && !claude)
        rr_drop(w, "thinking");
    if ((r->has_top_k && w->family != DL_BEDROCK_OTHER) || (r->thinking_budget && claude)) {
        TRY(rr_lit(w, ",\"additionalModelRequestFields\":{"));
        if (r->has_top_k && claude) {
            TRY(rr_lit(w, "\"top_k\":"));
            TRY(gw_buf_append_i64(w->out, r->top_k));
            comma = true;
        } else if (r->has_top_k) {
            TRY(rr_lit(w, "\"inferenceConfig\":{\"topK\":"));
            TRY(gw_buf_append_i64(w->out, r->top_k));
            TRY(rr_lit(w, "}"));
            comma = true;
        }
        if (r->thinking_budget && claude) {
            TRY(rr_lit(w, comma ? ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"
                                : "\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"));
            TRY(gw_buf_append_u64(w->out, r->thinking_budget));
            TRY(rr_lit(w, "}"));
        }
        TRY(rr_lit(w, "}"));
    }
    if (claude && has_stops(r))
        TRY(rr_lit(w, ",\"additionalModelResponseFieldPaths\":[\"/stop_sequence\"]"));
    return GW_OK;
}

/* The fields Converse has no place for: dropped by name. */
static void
rr_drops(struct rr *w)
{
    const struct dl_request *r = w->r;
    size_t k;

    if (r->has_seed)
        rr_drop(w, "seed");
    if (r->has_presence)
        rr_drop(w, "presence_penalty");
    if (r->has_frequency)
        rr_drop(w, "frequency_penalty");
    if (r->user.len)
        rr_drop(w, "user");
    if (r->metadata.len)
        rr_drop(w, "metadata");
    if (r->prompt_cache_key.len)
        rr_drop(w, "prompt_cache_key");
    /* store is the gateway's own business (DESIGN.md 11), not the upstream's */
    dl_request_drop_offered(r, DL_SHAPE_BEDROCK, w->dropped);
    for (k = 0; k < r->n_extras; k++)
        dl_dropped_add(w->dropped, r->extras[k].name);
}

/* What Converse or the events of this gateway cannot carry (DESIGN.md 11: refused). */
static enum gw_code
rr_refusals(struct rr *w)
{
    const struct dl_request *r = w->r;
    size_t k;

    if (r->needs & DL_NEED_F_N_CHOICES)
        return rr_refuse(w, "n: a Bedrock model returns one choice (n must be 1)");
    if (r->needs & DL_NEED_F_LOGPROBS)
        return rr_refuse(w, "logprobs: a Bedrock model does not return log probabilities");
    if (r->needs & DL_NEED_F_AUDIO_OUT)
        return rr_refuse(w, "audio: audio output cannot be converted for a Bedrock model");
    if (r->needs & DL_NEED_F_IMAGE_OUT)
        return rr_refuse(w, "modalities: image output cannot be converted for a Bedrock model");
    if (r->format != DL_FORMAT_TEXT)
        return rr_refuse(w, "response_format: JSON output modes cannot be sent to a Bedrock "
                            "model (only type text)");
    for (k = 0; k < r->n_tools; k++)
        if (r->tools[k].hosted.len)
            break;
    if ((r->needs & DL_NEED_F_HOSTED_TOOLS) || k < r->n_tools)
        return rr_refuse(w, "tools: hosted tools (web search, code execution, file search, "
                            "computer use) cannot be sent to a Bedrock model");
    if (r->previous_response_id.len)
        return rr_refuse(w, "previous_response_id: a stored conversation cannot be sent to a "
                            "Bedrock model");
    return GW_OK;
}

static enum gw_code
rr_body(struct rr *w, uint64_t max_output_default)
{
    TRY(rr_refusals(w));
    TRY(rr_lit(w, "{"));
    TRY(rr_messages(w));
    TRY(rr_system(w));
    TRY(rr_inference(w, max_output_default));
    TRY(rr_tools(w));
    TRY(rr_additional(w));
    rr_drops(w);
    return rr_lit(w, "}");
}

enum gw_code
dl_bedrock_request_render(const struct dl_request *r, struct gw_str model,
                          uint64_t max_output_default, struct dl_dropped *dropped,
                          struct gw_buf *out, struct gw_buf *why)
{
    struct dl_dropped none = {0};
    struct rr w = {r, dropped ? dropped : &none, out, why, dl_bedrock_family(model), 0};
    size_t start = out->len, n_dropped = w.dropped->n;
    bool more = w.dropped->more;
    enum gw_code rc;

    /* the model goes in the upstream's path; its id says which family it is */
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
