/* SPDX-License-Identifier: MIT
 * dialects/gemini_request.c - a Gemini client's generateContent body parsed into the
 * canonical request (dialects/canon.h), and the countTokens body read the same way: the
 * body, contents, parts and systemInstruction here; tools, toolConfig and
 * generationConfig in gemini_config.c. (The render for a Gemini upstream is
 * gemini_render.c; docs/fields-gemini.md has the table of every field.)
 *
 * Decisions beyond the obvious field names:
 * - One validating pass of dialects/json_scan.h, no tree. Strings are slices of the
 *   body unless they hold escapes (then decoded copies in the arena); arguments,
 *   responses, schemas and the fields the hub does not model keep their raw JSON bytes.
 *   Every field is read in both spellings the API takes (lowerCamel and the proto's
 *   snake_case: "systemInstruction" and "system_instruction").
 * - The model and streaming come from the URL: model stays empty, stream false; a
 *   "model" member in the body (the countTokens generateContentRequest has one) is not
 *   read. source is DL_SHAPE_GEMINI.
 * - Refused with GW_E_BAD_REQUEST and a reason naming the field by path
 *   ("contents[2].parts[0].functionCall.name: required string"), never quoting the body:
 *   what is not JSON or not a generateContent request, and a body holding twice (in
 *   either spelling) a top-level field parse reads (contents, systemInstruction, tools,
 *   toolConfig, generationConfig): the same-shape relay forwards the client's bytes, so
 *   what the gateway acts on must mean one thing. Other duplicate keys: the last counts.
 * - contents: role "user" (or unset, or the older "function") and "model". A run of
 *   model contents is one assistant message (@google/genai's chat history keeps each
 *   streamed chunk as a content of its own). A user content is split in order: each
 *   functionResponse a DL_ROLE_TOOL message of its own, each run of other parts a user
 *   message. A content without parts says nothing and makes no message.
 * - Parts (one data member each, as the API requires): text; thought text -> REASONING,
 *   a run of thought parts up to the first one carrying a thoughtSignature making one
 *   part (the texts joined: streamed thoughts come as many parts, the signature on the
 *   last), its signature's origin by dl_sig_origin; a thoughtSignature on another part
 *   (text, media) -> a REASONING part with no text before it; inlineData -> IMAGE (image/...) or
 * DOCUMENT with media_type and data; fileData -> IMAGE or DOCUMENT by url (by its mimeType, or
 *   without one the URL's extension); functionCall (model turns only) -> TOOL_CALL, the
 *   arguments the raw JSON of args ("" when none), the id as given, else
 *   "call_<name>_<turn>_<part>" (dl_gemini_call_id: the same history always gets the
 *   same ids), its thoughtSignature on the call; functionResponse (user turns only) ->
 *   a TOOL_RESULT named after the function, content one TEXT part holding the raw JSON
 *   of response ("{}" without one) and its parts' inlineData as IMAGE / DOCUMENT parts,
 *   answering the call with its id when the previous model turn holds one, else the
 *   earliest call of that name there that no earlier response answered (gemini-cli
 *   sends ids of its own for calls that had none), else its own id or a generated one.
 *   A part holding any other member (executableCode, codeExecutionResult, toolCall,
 *   videoMetadata, mediaResolution, partMetadata...) is kept whole as DL_PART_OTHER,
 *   named by that member: only a Gemini upstream can take it. Empty text makes no part.
 * - systemInstruction: a Content of text parts (or a plain string) -> system parts.
 * - tools: functionDeclarations -> function tools (description; parametersJsonSchema as
 *   the JSON schema; parameters, Gemini's OpenAPI subset, with its upper-case type names
 *   lower-cased so that JSON Schema consumers accept it, the schema as written kept in
 *   source_parameters for a Gemini renderer; response, responseJsonSchema and behavior
 *   are not carried). Every other member of a tool (googleSearch, codeExecution,
 *   urlContext, googleSearchRetrieval, googleMaps, fileSearch, computerUse,
 *   mcpServers...) is a hosted tool {"<member>":<value>} and sets
 *   DL_NEED_F_HOSTED_TOOLS.
 * - toolConfig.functionCallingConfig: AUTO, NONE, ANY (REQUIRED; NAMED with exactly one
 *   allowed name), VALIDATED (AUTO, and the mode kept as the extra
 *   "toolConfig.functionCallingConfig.mode"). Allowed names beyond that one restrict
 *   r->tools to the function tools they name (what the model may call stays the same).
 *   Its other members, and toolConfig's (retrievalConfig...), are extras named by path.
 * - generationConfig: temperature, topP, topK, seed, presencePenalty, frequencyPenalty,
 *   maxOutputTokens, stopSequences; responseMimeType application/json -> JSON_OBJECT,
 *   with responseJsonSchema (or responseSchema, lower-cased as above) -> JSON_SCHEMA;
 *   thinkingConfig thinkingBudget > 0 -> thinking and its budget, -1 -> thinking
 *   (dynamic), thinkingLevel -> reasoning_effort in lower case and thinking.
 *   candidateCount > 1 (N_CHOICES), responseLogprobs / logprobs (LOGPROBS),
 *   responseModalities with IMAGE or AUDIO (IMAGE_OUT, AUDIO_OUT) set their needs and
 *   are kept as extras, as are includeThoughts, a thinkingBudget of 0 or -1, another
 *   responseMimeType (with its schema) and every other member (speechConfig,
 *   mediaResolution, imageConfig...): named "generationConfig.<member>" (and
 *   "generationConfig.thinkingConfig.<member>").
 * - Every other top-level field (safetySettings, cachedContent, labels, serviceTier...)
 *   with a non-null value is an extra by its name: sent on to a Gemini upstream,
 *   dropped by name by the other shapes.
 * Owns:    nothing; what parse builds lives in the caller's arena.
 * Threads: any; one request on one thread.
 * See:     dialects/gemini_config.c, dialects/gemini-priv.h, dialects/canon.h,
 *          docs/fields-gemini.md, tests/unit/dialects/test_gemini_request.c,
 *          tests/fuzz/fuzz_gemini.c
 */
#include "dialects/gemini-priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- the walk ---- */

/* The top-level fields parse reads, and so refuses to see twice. */
enum read_field {
    RF_CONTENTS,
    RF_SYSTEM,
    RF_TOOLS,
    RF_TOOL_CONFIG,
    RF_GENERATION_CONFIG,
    RF_MODEL, /* read only to be left out of the extras: the URL names the model */
    RF__COUNT,
};

static const char *const read_fields[RF__COUNT] = {
    [RF_CONTENTS] = "contents",
    [RF_SYSTEM] = "systemInstruction",
    [RF_TOOLS] = "tools",
    [RF_TOOL_CONFIG] = "toolConfig",
    [RF_GENERATION_CONFIG] = "generationConfig",
    [RF_MODEL] = "model",
};

/* ---- helpers the parse's files share (gemini-priv.h) ---- */

/* A refusal: <why> gets the reason (ours, never the body's bytes). */
enum gw_code
dl_gm_bad(struct dl_gm_rp *p, const char *fmt, ...)
{
    enum gw_code rc;
    va_list ap;

    va_start(ap, fmt);
    rc = dl_vrefuse(p->why, GW_E_BAD_REQUEST, fmt, ap);
    va_end(ap);
    return rc;
}

/* The refusal of bytes the scanner refused: their position only. */
enum gw_code
dl_gm_bad_json(struct dl_gm_rp *p, const struct dl_json *j)
{
    return dl_refuse_json(p->why, j);
}

/* The bytes of string token <t> (a slice, or a copy when escaped); false: no memory. */
bool
dl_gm_take_str(struct dl_gm_rp *p, const struct dl_json *j, const struct dl_json_str *t,
               struct gw_str *out)
{
    *out = dl_json_text(j, t, p->a);
    return out->ptr != NULL;
}

/* The string field <f> into <out>: GW_OK, or a refusal naming <path>.<f> (null and
 * absent leave <out> as it is unless <required>). */
enum gw_code
dl_gm_want_str(struct dl_gm_rp *p, const struct dl_json *j, const struct dl_gm_field *f,
               const char *path, bool required, struct gw_str *out)
{
    if (f->kind == GK_STR)
        return dl_gm_take_str(p, j, &f->str, out) ? GW_OK : GW_E_NOMEM;
    if (!required && (f->kind == GK_ABSENT || f->kind == GK_NULL))
        return GW_OK;
    return dl_gm_bad(p, "%s.%s: %s string", path, f->name, required ? "required" : "must be a");
}

/* A copy of <a> + <b> in the arena; {NULL, 0} when out of memory. */
struct gw_str
dl_gm_cat(struct gw_arena *a, struct gw_str x, struct gw_str y)
{
    char *d = gw_arena_alloc(a, x.len + y.len + 1);

    if (!d)
        return (struct gw_str){NULL, 0};
    if (x.len)
        memcpy(d, x.ptr, x.len);
    if (y.len)
        memcpy(d + x.len, y.ptr, y.len);
    d[x.len + y.len] = '\0';
    return (struct gw_str){d, x.len + y.len};
}

/* Adds the extra <name> = <raw>; a later copy of a key replaces the earlier one. */
enum gw_code
dl_gm_extra(struct dl_gm_rp *p, struct gw_str name, struct gw_str raw)
{
    struct dl_request *r = p->r;
    struct dl_extra *x;
    size_t k;

    for (k = 0; k < r->n_extras; k++)
        if (gw_str_eq(r->extras[k].name, name)) {
            r->extras[k].raw = raw;
            return GW_OK;
        }
    x = gw_arena_push(p->a, (void **)&r->extras, &r->n_extras, &p->cap_extras, sizeof(*x));
    if (!x)
        return GW_E_NOMEM;
    x->name = name;
    x->raw = raw;
    return GW_OK;
}

/* The extra "<prefix><key>" (the key as the client spelt it) = <raw>. */
enum gw_code
dl_gm_extra_at(struct dl_gm_rp *p, const char *prefix, const struct dl_json *j,
               const struct dl_json_str *key, struct gw_str raw)
{
    struct gw_str k, name;

    if (!dl_gm_take_str(p, j, key, &k))
        return GW_E_NOMEM;
    name = dl_gm_cat(p->a, gw_str_c(prefix), k);
    return name.ptr ? dl_gm_extra(p, name, raw) : GW_E_NOMEM;
}

/* ---- parts ---- */

static struct dl_part *
push_part(struct dl_gm_rp *p, struct dl_gm_plist *l, enum dl_part_kind kind)
{
    struct dl_part *part = gw_arena_push(p->a, (void **)&l->v, &l->n, &l->cap, sizeof(*l->v));

    if (part)
        part->kind = kind;
    return part;
}

/* A thought text <text> with signature <sig> ("" when none) onto <l>: it joins the run
 * of thought parts that ends <l> when that run has no signature yet. */
static enum gw_code
add_thought(struct dl_gm_rp *p, struct dl_gm_plist *l, struct gw_str text, struct gw_str sig)
{
    struct dl_part *last = l->n ? &l->v[l->n - 1] : NULL;

    if (last && last->kind == DL_PART_REASONING && !last->redacted && last->signature.len == 0 &&
        last->sig_shape == DL_SHAPE_GEMINI && text.len) {
        size_t need = last->text.len + text.len;

        if (last->text.ptr != p->run_buf || need > p->run_cap) {
            /* the run's own buffer, grown by doubling: many small parts cost linear time */
            size_t cap = need * 2 < 64 ? 64 : need * 2;
            char *d = gw_arena_alloc(p->a, cap);

            if (!d)
                return GW_E_NOMEM;
            if (last->text.len)
                memcpy(d, last->text.ptr, last->text.len);
            p->run_buf = d;
            p->run_cap = cap;
            last->text.ptr = d;
        }
        memcpy(p->run_buf + last->text.len, text.ptr, text.len);
        last->text.len = need;
    } else if (!(last && last->kind == DL_PART_REASONING && !last->redacted &&
                 last->signature.len == 0 && last->sig_shape == DL_SHAPE_GEMINI)) {
        last = push_part(p, l, DL_PART_REASONING);
        if (!last)
            return GW_E_NOMEM;
        last->text = text;
        last->sig_shape = DL_SHAPE_GEMINI;
    }
    if (sig.len) {
        last->signature = sig;
        last->sig_shape = dl_sig_origin(&last->signature, DL_SHAPE_GEMINI);
    }
    return GW_OK;
}

/* The thoughtSignature <sig> of a part that is not a thought: a REASONING part with no
 * text before it (a renderer for Gemini puts it back on the part that follows). */
static enum gw_code
add_carrier(struct dl_gm_rp *p, struct dl_gm_plist *l, struct gw_str sig)
{
    struct dl_part *part = push_part(p, l, DL_PART_REASONING);

    if (!part)
        return GW_E_NOMEM;
    part->text = (struct gw_str){"", 0};
    part->signature = sig;
    part->sig_shape = dl_sig_origin(&part->signature, DL_SHAPE_GEMINI);
    return GW_OK;
}

/* IMAGE or DOCUMENT from inlineData <f> of the part at <path>. */
static enum gw_code
rp_inline(struct dl_gm_rp *p, const struct dl_gm_field *f, const char *path, struct dl_part *part)
{
    struct dl_gm_field b[] = {DL_GM_FIELD("mimeType"), DL_GM_FIELD("data")};
    struct dl_json j = dl_gm_at(&p->j, f->at);
    char sub[160];
    enum gw_code rc;

    gw_path_join(sub, sizeof(sub), path, ".inlineData");
    if (f->kind != GK_OBJ)
        return dl_gm_bad(p, "%s: must be an object", sub);
    if (!dl_gm_fields(&j, b, 2))
        return dl_gm_bad_json(p, &j);
    rc = dl_gm_want_str(p, &j, &b[0], sub, true, &part->media_type);
    if (rc == GW_OK)
        rc = dl_gm_want_str(p, &j, &b[1], sub, true, &part->data);
    part->kind =
        gw_str_has_prefix_nocase(part->media_type, "image/") ? DL_PART_IMAGE : DL_PART_DOCUMENT;
    return rc;
}

/* Whether a URL without a media type names an image, by its extension. */
static bool
url_is_image(struct gw_str u)
{
    static const char *const ext[] = {".png", ".jpg", ".jpeg", ".gif", ".webp", ".heic", ".heif"};
    const char *q = memchr(u.ptr, '?', u.len);
    size_t i;

    if (q)
        u.len = (size_t)(q - u.ptr);
    for (i = 0; i < sizeof(ext) / sizeof(ext[0]); i++)
        if (gw_str_has_suffix_nocase(u, ext[i]))
            return true;
    return false;
}

/* IMAGE or DOCUMENT by URL from fileData <f>. */
static enum gw_code
rp_file(struct dl_gm_rp *p, const struct dl_gm_field *f, const char *path, struct dl_part *part)
{
    struct dl_gm_field b[] = {DL_GM_FIELD("mimeType"), DL_GM_FIELD("fileUri")};
    struct dl_json j = dl_gm_at(&p->j, f->at);
    char sub[160];
    enum gw_code rc;

    gw_path_join(sub, sizeof(sub), path, ".fileData");
    if (f->kind != GK_OBJ)
        return dl_gm_bad(p, "%s: must be an object", sub);
    if (!dl_gm_fields(&j, b, 2))
        return dl_gm_bad_json(p, &j);
    rc = dl_gm_want_str(p, &j, &b[0], sub, false, &part->media_type);
    if (rc == GW_OK)
        rc = dl_gm_want_str(p, &j, &b[1], sub, true, &part->url);
    if (rc != GW_OK)
        return rc;
    if (part->media_type.len)
        part->kind =
            gw_str_has_prefix_nocase(part->media_type, "image/") ? DL_PART_IMAGE : DL_PART_DOCUMENT;
    else
        part->kind = url_is_image(part->url) ? DL_PART_IMAGE : DL_PART_DOCUMENT;
    return rc;
}

/* TOOL_CALL from functionCall <f> of part <k> of contents[<i>]. */
static enum gw_code
rp_call(struct dl_gm_rp *p, const struct dl_gm_field *f, const char *path, size_t i, size_t k,
        struct dl_part *part)
{
    struct dl_gm_field c[] = {DL_GM_FIELD("name"), DL_GM_FIELD("args"), DL_GM_FIELD("id")};
    struct dl_json j = dl_gm_at(&p->j, f->at);
    char sub[160];
    enum gw_code rc;

    gw_path_join(sub, sizeof(sub), path, ".functionCall");
    if (f->kind != GK_OBJ)
        return dl_gm_bad(p, "%s: must be an object", sub);
    if (!dl_gm_fields(&j, c, 3))
        return dl_gm_bad_json(p, &j);
    part->kind = DL_PART_TOOL_CALL;
    if (c[0].kind != GK_STR || c[0].str.dlen == 0)
        return dl_gm_bad(p, "%s.name: required string", sub);
    rc = dl_gm_want_str(p, &j, &c[0], sub, true, &part->name);
    if (rc == GW_OK)
        rc = dl_gm_want_str(p, &j, &c[2], sub, false, &part->id);
    if (rc != GW_OK)
        return rc;
    if (c[1].kind == GK_OBJ)
        part->arguments = dl_gm_raw(&j, &c[1]);
    else if (c[1].kind != GK_ABSENT && c[1].kind != GK_NULL)
        return dl_gm_bad(p, "%s.args: must be an object", sub);
    if (part->id.len == 0) {
        part->id = dl_gemini_call_id(p->a, part->name, i, k);
        if (!part->id.ptr)
            return GW_E_NOMEM;
    }
    return GW_OK;
}

/* The id of the call a functionResponse named <name> (id <given>, "" when none) at
 * contents[<i>].parts[<k>] answers: see the file's header. */
static struct gw_str
pair_call(struct dl_gm_rp *p, struct gw_str name, struct gw_str given, size_t i, size_t k)
{
    const struct dl_request *r = p->r;
    size_t pa = r->n_messages, c, m;

    while (pa > 0 && r->messages[pa - 1].role != DL_ROLE_ASSISTANT)
        pa--;
    if (pa > 0) {
        const struct dl_message *am = &r->messages[pa - 1];

        for (c = 0; given.len && c < am->n_parts; c++)
            if (am->parts[c].kind == DL_PART_TOOL_CALL && gw_str_eq(am->parts[c].id, given))
                return given;
        for (c = 0; c < am->n_parts; c++) {
            const struct dl_part *call = &am->parts[c];
            bool answered = false;

            if (call->kind != DL_PART_TOOL_CALL || !gw_str_eq(call->name, name))
                continue;
            for (m = pa; m < r->n_messages && !answered; m++)
                answered = r->messages[m].role == DL_ROLE_TOOL && r->messages[m].n_parts == 1 &&
                           gw_str_eq(r->messages[m].parts[0].call_id, call->id);
            if (!answered)
                return call->id;
        }
    }
    return given.len ? given : dl_gemini_call_id(p->a, name, i, k);
}

/* The parts of a functionResponse's "parts" (inline media) after its response text. */
static enum gw_code
rp_response_parts(struct dl_gm_rp *p, const struct dl_gm_field *f, const char *sub,
                  struct dl_gm_plist *l)
{
    struct dl_json j = dl_gm_at(&p->j, f->at);
    bool first = true;
    size_t n = 0;
    int r;

    if (!dl_json_arr_enter(&j))
        return dl_gm_bad_json(p, &j);
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        struct dl_gm_field m[] = {DL_GM_FIELD("inlineData"), DL_GM_FIELD("fileData")};
        struct dl_part *part;
        char path[192];
        enum gw_code rc;

        gw_path_item(path, sizeof(path), sub, n++, "");
        if (dl_json_peek(&j) != '{' || !dl_gm_fields(&j, m, 2)) {
            if (j.err)
                return dl_gm_bad_json(p, &j);
            return dl_gm_bad(p, "%s: must be an object", path);
        }
        part = push_part(p, l, DL_PART_DOCUMENT);
        if (!part)
            return GW_E_NOMEM;
        if (m[0].kind != GK_ABSENT && m[0].kind != GK_NULL)
            rc = rp_inline(p, &m[0], path, part);
        else if (m[1].kind != GK_ABSENT && m[1].kind != GK_NULL)
            rc = rp_file(p, &m[1], path, part);
        else
            rc = dl_gm_bad(p, "%s: needs inlineData or fileData", path);
        if (rc != GW_OK)
            return rc;
    }
    return r == 0 ? GW_OK : dl_gm_bad_json(p, &j);
}

/* A TOOL message for functionResponse <f> of contents[<i>].parts[<k>]. */
static enum gw_code
rp_response(struct dl_gm_rp *p, const struct dl_gm_field *f, const char *path, size_t i, size_t k)
{
    struct dl_gm_field c[] = {DL_GM_FIELD("name"), DL_GM_FIELD("response"), DL_GM_FIELD("id"),
                              DL_GM_FIELD("parts")};
    struct dl_json j = dl_gm_at(&p->j, f->at);
    struct dl_gm_plist content = {0};
    struct gw_str name = {"", 0}, id = {"", 0};
    struct dl_part *result, *text;
    struct dl_message *m;
    char sub[160];
    enum gw_code rc;

    gw_path_join(sub, sizeof(sub), path, ".functionResponse");
    if (f->kind != GK_OBJ)
        return dl_gm_bad(p, "%s: must be an object", sub);
    if (!dl_gm_fields(&j, c, 4))
        return dl_gm_bad_json(p, &j);
    if (c[0].kind != GK_STR || c[0].str.dlen == 0)
        return dl_gm_bad(p, "%s.name: required string", sub);
    rc = dl_gm_want_str(p, &j, &c[0], sub, true, &name);
    if (rc == GW_OK)
        rc = dl_gm_want_str(p, &j, &c[2], sub, false, &id);
    if (rc != GW_OK)
        return rc;
    if (c[1].kind != GK_OBJ && c[1].kind != GK_ABSENT && c[1].kind != GK_NULL)
        return dl_gm_bad(p, "%s.response: must be an object", sub);
    text = push_part(p, &content, DL_PART_TEXT);
    if (!text)
        return GW_E_NOMEM;
    text->text = c[1].kind == GK_OBJ ? dl_gm_raw(&j, &c[1]) : GW_STR_LIT("{}");
    if (c[3].kind == GK_ARR) {
        rc = rp_response_parts(p, &c[3], sub, &content);
        if (rc != GW_OK)
            return rc;
    } else if (c[3].kind != GK_ABSENT && c[3].kind != GK_NULL) {
        return dl_gm_bad(p, "%s.parts: must be an array", sub);
    }
    result = gw_arena_calloc(p->a, 1, sizeof(*result));
    if (!result)
        return GW_E_NOMEM;
    result->kind = DL_PART_TOOL_RESULT;
    result->name = name;
    result->call_id = pair_call(p, name, id, i, k);
    if (!result->call_id.ptr)
        return GW_E_NOMEM;
    result->content = content.v;
    result->n_content = content.n;
    m = gw_arena_push(p->a, (void **)&p->r->messages, &p->r->n_messages, &p->cap_messages,
                      sizeof(*m));
    if (!m)
        return GW_E_NOMEM;
    m->role = DL_ROLE_TOOL;
    m->parts = result;
    m->n_parts = 1;
    return GW_OK;
}

/* The members of a part. */
enum pf {
    PF_TEXT,
    PF_THOUGHT,
    PF_SIGNATURE,
    PF_INLINE,
    PF_FILE,
    PF_CALL,
    PF_RESPONSE,
    PF__COUNT,
};

static const char *const part_members[PF__COUNT] = {
    "text",     "thought",      "thoughtSignature", "inlineData",
    "fileData", "functionCall", "functionResponse",
};

/* A part's members, and the first member the hub does not model (<other>: its key). */
struct part_scan {
    struct dl_gm_field f[PF__COUNT];
    struct dl_json_str other;
    bool has_other;
};

static enum gw_code
scan_part(struct dl_gm_rp *p, struct dl_json *j, struct part_scan *s)
{
    struct dl_json_str key;
    bool first = true;
    size_t k;
    int r;

    for (k = 0; k < PF__COUNT; k++)
        s->f[k] = (struct dl_gm_field)DL_GM_FIELD(part_members[k]);
    s->has_other = false;
    if (!dl_json_obj_enter(j))
        return dl_gm_bad_json(p, j);
    while ((r = dl_json_obj_next(j, &first, &key)) == 1) {
        struct dl_gm_field v;

        for (k = 0; k < PF__COUNT; k++)
            if (dl_gm_key_is(j, &key, part_members[k]))
                break;
        if (k < PF__COUNT) {
            s->f[k].count++;
            if (!dl_gm_value(j, &s->f[k]))
                return dl_gm_bad_json(p, j);
            continue;
        }
        v.name = "";
        if (!dl_gm_value(j, &v))
            return dl_gm_bad_json(p, j);
        if (v.kind != GK_NULL && !s->has_other) {
            s->has_other = true;
            s->other = key;
        }
    }
    return r == 0 ? GW_OK : dl_gm_bad_json(p, j);
}

/* The path "contents[<i>].parts[<k>]" into <path> (<cap> bytes). */
static void
part_path(char *path, size_t cap, size_t i, size_t k)
{
    char turn[48];

    gw_path_item(turn, sizeof(turn), "contents", i, ".parts");
    gw_path_item(path, cap, turn, k, "");
}

/* contents[<i>].parts[<k>] at the cursor of <j>, onto <l> (a model turn's parts when
 * <model>; a user turn's run otherwise, which a functionResponse flushes). */
static enum gw_code
rp_part(struct dl_gm_rp *p, struct dl_json *j, size_t i, size_t k, bool model,
        struct dl_gm_plist *l, bool *flush)
{
    struct part_scan s;
    struct gw_str sig = {"", 0}, text = {"", 0};
    struct dl_part *part;
    char path[96];
    size_t start = j->i, data = 0, d;
    bool thought = false;
    enum gw_code rc;

    *flush = false;
    part_path(path, sizeof(path), i, k);
    if (dl_json_peek(j) != '{') {
        if (!dl_json_skip(j, NULL))
            return dl_gm_bad_json(p, j);
        return dl_gm_bad(p, "%s: must be an object", path);
    }
    rc = scan_part(p, j, &s);
    if (rc != GW_OK)
        return rc;
    if (s.has_other) {
        /* kept as written for a Gemini upstream; others refuse it by its member's name */
        part = push_part(p, l, DL_PART_OTHER);
        if (!part || !dl_gm_take_str(p, j, &s.other, &part->name))
            return GW_E_NOMEM;
        part->data = (struct gw_str){j->s + start, j->i - start};
        return GW_OK;
    }
    if (s.f[PF_THOUGHT].kind == GK_TRUE)
        thought = true;
    else if (dl_gm_given(&s.f[PF_THOUGHT]) && s.f[PF_THOUGHT].kind != GK_FALSE)
        return dl_gm_bad(p, "%s.thought: must be a boolean", path);
    rc = dl_gm_want_str(p, j, &s.f[PF_SIGNATURE], path, false, &sig);
    if (rc == GW_OK)
        rc = dl_gm_want_str(p, j, &s.f[PF_TEXT], path, false, &text);
    if (rc != GW_OK)
        return rc;
    for (d = PF_TEXT; d < PF__COUNT; d++)
        data += d != PF_THOUGHT && d != PF_SIGNATURE && dl_gm_given(&s.f[d]);
    if (data > 1)
        return dl_gm_bad(p,
                         "%s: a part holds one of text, inlineData, fileData, functionCall and "
                         "functionResponse",
                         path);
    if (dl_gm_given(&s.f[PF_CALL])) {
        if (!model)
            return dl_gm_bad(p, "%s.functionCall: belongs in a model turn", path);
        part = push_part(p, l, DL_PART_TOOL_CALL);
        if (!part)
            return GW_E_NOMEM;
        rc = rp_call(p, &s.f[PF_CALL], path, i, k, part);
        part->signature = sig;
        part->sig_shape = dl_sig_origin(&part->signature, DL_SHAPE_GEMINI);
        return rc;
    }
    if (dl_gm_given(&s.f[PF_RESPONSE])) {
        if (model)
            return dl_gm_bad(p, "%s.functionResponse: belongs in a user turn", path);
        *flush = true;
        return GW_OK; /* the caller flushes the run, then calls rp_response */
    }
    if (dl_gm_given(&s.f[PF_INLINE]) || dl_gm_given(&s.f[PF_FILE])) {
        if (sig.len && (rc = add_carrier(p, l, sig)) != GW_OK)
            return rc;
        part = push_part(p, l, DL_PART_DOCUMENT);
        if (!part)
            return GW_E_NOMEM;
        return dl_gm_given(&s.f[PF_INLINE]) ? rp_inline(p, &s.f[PF_INLINE], path, part)
                                            : rp_file(p, &s.f[PF_FILE], path, part);
    }
    if (!dl_gm_given(&s.f[PF_TEXT]) && !thought && !sig.len)
        return dl_gm_bad(p,
                         "%s: needs one of text, inlineData, fileData, functionCall and "
                         "functionResponse",
                         path);
    if (thought || !dl_gm_given(&s.f[PF_TEXT]))
        return add_thought(p, l, text, sig);
    if (sig.len && (rc = add_carrier(p, l, sig)) != GW_OK)
        return rc;
    if (text.len == 0)
        return GW_OK; /* empty text carries nothing */
    part = push_part(p, l, DL_PART_TEXT);
    if (!part)
        return GW_E_NOMEM;
    part->text = text;
    return GW_OK;
}

/* ---- contents ---- */

static enum gw_code
push_message(struct dl_gm_rp *p, enum dl_role role, struct dl_gm_plist *l)
{
    struct dl_message *m;

    if (l->n == 0)
        return GW_OK;
    m = gw_arena_push(p->a, (void **)&p->r->messages, &p->r->n_messages, &p->cap_messages,
                      sizeof(*m));
    if (!m)
        return GW_E_NOMEM;
    m->role = role;
    m->parts = l->v;
    m->n_parts = l->n;
    *l = (struct dl_gm_plist){0};
    return GW_OK;
}

/* The open run of model contents, as one assistant message. */
static enum gw_code
flush_model(struct dl_gm_rp *p)
{
    p->model_open = false;
    return push_message(p, DL_ROLE_ASSISTANT, &p->model);
}

/* The parts of contents[<i>] (the array at <f>), for a model turn when <model>. */
static enum gw_code
rp_parts(struct dl_gm_rp *p, const struct dl_gm_field *f, size_t i, bool model)
{
    struct dl_json j = dl_gm_at(&p->j, f->at);
    struct dl_gm_plist run = {0};
    bool first = true, flush;
    size_t k = 0;
    int r;
    enum gw_code rc;

    if (!dl_json_arr_enter(&j))
        return dl_gm_bad_json(p, &j);
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        size_t at = j.i;

        rc = rp_part(p, &j, i, k, model, model ? &p->model : &run, &flush);
        if (rc == GW_OK && flush) {
            struct dl_json pj = dl_gm_at(&p->j, at);
            struct dl_gm_field fr[] = {DL_GM_FIELD("functionResponse")};
            char path[96];

            part_path(path, sizeof(path), i, k);
            rc = push_message(p, DL_ROLE_USER, &run);
            if (rc == GW_OK && !dl_gm_fields(&pj, fr, 1))
                rc = dl_gm_bad_json(p, &pj);
            if (rc == GW_OK)
                rc = rp_response(p, &fr[0], path, i, k);
        }
        if (rc != GW_OK)
            return rc;
        k++;
    }
    if (r != 0)
        return dl_gm_bad_json(p, &j);
    return model ? GW_OK : push_message(p, DL_ROLE_USER, &run);
}

static enum gw_code
rp_content(struct dl_gm_rp *p, struct dl_json *j, size_t i)
{
    struct dl_gm_field f[] = {DL_GM_FIELD("role"), DL_GM_FIELD("parts")};
    bool model = false;
    enum gw_code rc;

    if (dl_json_peek(j) != '{') {
        if (!dl_json_skip(j, NULL))
            return dl_gm_bad_json(p, j);
        return dl_gm_bad(p, "contents[%zu]: must be an object", i);
    }
    if (!dl_gm_fields(j, f, 2))
        return dl_gm_bad_json(p, j);
    if (dl_gm_is(j, &f[0], "model"))
        model = true;
    else if (dl_gm_given(&f[0]) && !dl_gm_is(j, &f[0], "user") && !dl_gm_is(j, &f[0], "function"))
        return dl_gm_bad(p, "contents[%zu].role: must be user or model", i);
    if (dl_gm_given(&f[1]) && f[1].kind != GK_ARR)
        return dl_gm_bad(p, "contents[%zu].parts: must be an array", i);
    if (model) {
        p->model_open = true;
    } else if (p->model_open) {
        rc = flush_model(p);
        if (rc != GW_OK)
            return rc;
    }
    return f[1].kind == GK_ARR ? rp_parts(p, &f[1], i, model) : GW_OK;
}

static enum gw_code
rp_contents(struct dl_gm_rp *p, const struct dl_gm_field *f)
{
    struct dl_json j = dl_gm_at(&p->j, f->at);
    bool first = true;
    size_t i = 0;
    int r;

    if (f->kind != GK_ARR)
        return dl_gm_bad(p, "contents: required array");
    if (!dl_json_arr_enter(&j))
        return dl_gm_bad_json(p, &j);
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        enum gw_code rc = rp_content(p, &j, i++);

        if (rc != GW_OK)
            return rc;
    }
    if (r != 0)
        return dl_gm_bad_json(p, &j);
    return flush_model(p);
}

/* ---- systemInstruction ---- */

static enum gw_code
rp_system_text(struct dl_gm_rp *p, struct gw_str text)
{
    struct dl_part *s;

    if (text.len == 0)
        return GW_OK;
    s = gw_arena_push(p->a, (void **)&p->r->system, &p->r->n_system, &p->cap_system, sizeof(*s));
    if (!s)
        return GW_E_NOMEM;
    s->kind = DL_PART_TEXT;
    s->text = text;
    return GW_OK;
}

static enum gw_code
rp_system(struct dl_gm_rp *p, const struct dl_gm_field *f)
{
    struct dl_gm_field c[] = {DL_GM_FIELD("parts")};
    struct dl_json j = dl_gm_at(&p->j, f->at);
    struct gw_str text;
    bool first = true;
    size_t k = 0;
    int r;

    if (f->kind == GK_NULL)
        return GW_OK;
    if (f->kind == GK_STR)
        return dl_gm_take_str(p, &p->j, &f->str, &text) ? rp_system_text(p, text) : GW_E_NOMEM;
    if (f->kind != GK_OBJ)
        return dl_gm_bad(p, "systemInstruction: must be a content object");
    if (!dl_gm_fields(&j, c, 1))
        return dl_gm_bad_json(p, &j);
    if (!dl_gm_given(&c[0]))
        return GW_OK;
    if (c[0].kind != GK_ARR)
        return dl_gm_bad(p, "systemInstruction.parts: must be an array");
    j = dl_gm_at(&p->j, c[0].at);
    if (!dl_json_arr_enter(&j))
        return dl_gm_bad_json(p, &j);
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        struct part_scan s;
        size_t d;
        bool other;
        enum gw_code rc;

        if (dl_json_peek(&j) != '{') {
            if (!dl_json_skip(&j, NULL))
                return dl_gm_bad_json(p, &j);
            return dl_gm_bad(p, "systemInstruction.parts[%zu]: must be an object", k);
        }
        rc = scan_part(p, &j, &s);
        if (rc != GW_OK)
            return rc;
        other = s.has_other;
        for (d = PF_INLINE; d < PF__COUNT; d++)
            other |= dl_gm_given(&s.f[d]);
        if (other || s.f[PF_TEXT].kind != GK_STR)
            return dl_gm_bad(p,
                             "systemInstruction.parts[%zu]: a system instruction holds text parts "
                             "only",
                             k);
        if (!dl_gm_take_str(p, &j, &s.f[PF_TEXT].str, &text))
            return GW_E_NOMEM;
        rc = rp_system_text(p, text);
        if (rc != GW_OK)
            return rc;
        k++;
    }
    return r == 0 ? GW_OK : dl_gm_bad_json(p, &j);
}

/* ---- the body ---- */

/* One read field's value at the cursor. */
static enum gw_code
rp_field(struct dl_gm_rp *p, enum read_field rf)
{
    struct dl_gm_field f = DL_GM_FIELD("");

    f.name = read_fields[rf];
    if (!dl_gm_value(&p->j, &f))
        return dl_gm_bad_json(p, &p->j);
    switch (rf) {
    case RF_CONTENTS: return rp_contents(p, &f);
    case RF_SYSTEM: return rp_system(p, &f);
    case RF_TOOLS: return dl_gm_parse_tools(p, &f);
    case RF_TOOL_CONFIG:
        p->tool_config_at = f.at;
        p->has_tool_config = true;
        return GW_OK;
    case RF_GENERATION_CONFIG: return dl_gm_parse_generation(p, &f);
    case RF_MODEL:
    case RF__COUNT: break;
    }
    return GW_OK;
}

enum gw_code
dl_gemini_request_parse(struct gw_arena *a, const char *body, size_t len, struct dl_request *out,
                        struct gw_buf *why)
{
    struct dl_gm_rp p = {.a = a, .r = out, .why = why};
    struct dl_json *j = &p.j;
    struct dl_json_str key;
    const char *dup = NULL;
    unsigned seen = 0;
    bool first = true;
    int r;

    memset(out, 0, sizeof(*out));
    out->source = DL_SHAPE_GEMINI;
    out->parallel_tool_calls = -1;
    out->store = -1;
    if (len == 0)
        return dl_gm_bad(&p, "body: empty, expected a JSON object");
    dl_json_init(j, body, len);
    if (dl_json_peek(j) != '{') {
        /* a valid non-object gets its own reason */
        if (!dl_json_skip(j, NULL) || !dl_json_end(j))
            return dl_gm_bad_json(&p, j);
        return dl_gm_bad(&p, "body: must be a JSON object");
    }
    if (!dl_json_obj_enter(j))
        return dl_gm_bad_json(&p, j);
    while ((r = dl_json_obj_next(j, &first, &key)) == 1) {
        unsigned f;
        enum gw_code rc;

        for (f = 0; f < RF__COUNT; f++)
            if (dl_gm_key_is(j, &key, read_fields[f]))
                break;
        if (f < RF__COUNT && !(seen & (1u << f))) {
            seen |= 1u << f;
            rc = rp_field(&p, (enum read_field)f);
        } else if (f < RF__COUNT) {
            /* one body per request: the second copy is refused below, once the whole
             * body is known to be JSON */
            if (!dup && f != RF_MODEL)
                dup = read_fields[f];
            rc = dl_json_skip(j, NULL) ? GW_OK : dl_gm_bad_json(&p, j);
        } else {
            struct dl_gm_field v = DL_GM_FIELD("");

            if (!dl_gm_value(j, &v))
                return dl_gm_bad_json(&p, j);
            rc = v.kind == GK_NULL ? GW_OK : dl_gm_extra_at(&p, "", j, &key, dl_gm_raw(j, &v));
        }
        if (rc != GW_OK)
            return rc;
    }
    if (r < 0 || !dl_json_end(j))
        return dl_gm_bad_json(&p, j);
    if (dup)
        return dl_gm_bad(&p, "duplicate key \"%s\" in the request body", dup);
    if (!(seen & (1u << RF_CONTENTS)))
        return dl_gm_bad(&p, "contents: required array");
    return dl_gm_parse_tool_config(&p);
}

/* ---- countTokens ---- */

enum gw_code
dl_gemini_count_parse(struct gw_arena *a, const char *body, size_t len, struct dl_request *out,
                      struct gw_buf *why)
{
    struct dl_gm_field f[] = {DL_GM_FIELD("generateContentRequest"), DL_GM_FIELD("contents")};
    struct dl_json j;

    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) == '{' && dl_gm_fields(&j, f, 2) && dl_json_end(&j) &&
        dl_gm_given(&f[0])) {
        if (dl_gm_given(&f[1])) {
            memset(out, 0, sizeof(*out));
            return gw_buf_append_cstr(why, "countTokens: contents and generateContentRequest "
                                           "cannot both be given") == GW_OK
                       ? GW_E_BAD_REQUEST
                       : GW_E_NOMEM;
        }
        if (f[0].kind != GK_OBJ) {
            memset(out, 0, sizeof(*out));
            return gw_buf_append_cstr(why, "generateContentRequest: must be an object") == GW_OK
                       ? GW_E_BAD_REQUEST
                       : GW_E_NOMEM;
        }
        return dl_gemini_request_parse(a, body + f[0].at, f[0].end - f[0].at, out, why);
    }
    /* {"contents":[...]}, or what is not JSON: the parse says what is wrong with it */
    return dl_gemini_request_parse(a, body, len, out, why);
}
