/* SPDX-License-Identifier: MIT
 * dialects/responses_request.c - the OpenAI Responses request (DESIGN.md 11): a client's
 * POST /v1/responses body parsed into the canonical request (dialects/canon.h), and a
 * canonical request rendered as the body for a Responses upstream.
 *
 * Parse, decisions beyond the obvious field names:
 * - One validating pass (dialects/json_scan.h, the Messages shape's field collector), no
 *   tree: strings are slices of the body unless they hold escapes (then decoded copies in
 *   the arena); tool schemas, metadata, items and fields the hub does not model keep
 *   their raw JSON bytes.
 * - Refused with GW_E_BAD_REQUEST and a reason naming the field by path
 *   ("input[3].content[1].text: required string"), never quoting the body: what is not
 *   JSON or not a Responses request, fields parse reads with the wrong type, and a body
 *   holding twice a top-level field parse reads (read_fields below; issue 8: the
 *   same-shape relay forwards the client's bytes). Other duplicate keys: the last counts.
 * - instructions -> the first system part; "input" a string -> one user message; an
 *   array of items:
 *   - message (type "message" or absent), role user / assistant / system / developer,
 *     content a string or parts: input_text and output_text -> TEXT, refusal -> TEXT,
 *     input_image with image_url -> IMAGE (a base64 data: URL as media_type + data, any
 *     other URL as url; detail kept), input_file with file_data -> DOCUMENT (a data:
 *     URL split, raw base64 taken as a PDF; filename as its title) or file_url ->
 *     DOCUMENT by url. system and developer messages join the system parts after
 *     instructions, in their order. A message holding a part the hub does not model
 *     (a file_id image or file, input_audio, a media part where the role cannot hold one,
 *     a type newer than this file) is kept whole as one DL_PART_OTHER (named by that
 *     part's type, its data the item): only a Responses renderer sends it on, every
 *     other one refuses it by name.
 *   - function_call -> an assistant TOOL_CALL (id = call_id, name, arguments as the
 *     JSON text the string holds; the item's own "fc_" id is not kept).
 *   - function_call_output -> a DL_ROLE_TOOL message with one TOOL_RESULT (call_id;
 *     output a string -> one TEXT, an array of input_text / input_image / input_file
 *     parts -> those parts; an array holding another part -> the item kept whole).
 *   - reasoning -> an assistant REASONING part: text the summary texts joined with
 *     "\n\n" (the reasoning_text content when there is no summary), signature the
 *     encrypted_content (its origin read from a gw1 tag, dl_sig_origin), id the item's
 *     "rs_" id (a Responses renderer needs it back).
 *   - item_reference and every other item type (web_search_call, custom_tool_call,
 *     local_shell_call, computer_call, mcp_*, ...) -> one DL_PART_OTHER (name: the
 *     item's type, data: the item): items whose type ends in "_output" (and
 *     mcp_approval_response) in a tool message of their own, item_reference in a user
 *     message of its own, every other one with the assistant's items.
 *   Consecutive assistant items (messages, calls, reasoning, OTHER items) join one
 *   assistant message; a system or developer message between them does not part them.
 * - tools: {type:"function"} -> a function tool (name, description, parameters raw,
 *   strict); any other type (web_search*, file_search, code_interpreter, computer_use*,
 *   image_generation, local_shell, shell, apply_patch, custom, mcp, ...) -> a hosted tool
 *   kept as written (named by its name, else its type) and DL_NEED_F_HOSTED_TOOLS.
 * - tool_choice "auto" / "none" / "required" / {type:"function",name}; {type:
 *   "allowed_tools", mode, tools} -> its mode, and r->tools keeps only the tools it
 *   allows (what the model may call stays the same); a hosted tool's choice (e.g.
 *   {type:"web_search_preview"}, {type:"custom",name}) -> the extra "tool_choice".
 * - text.format text / json_object / json_schema (name, schema, strict) -> the
 *   response format; its description -> the extra "text.format.description"; a format
 *   type newer than this file -> the extra "text.format"; other members of "text"
 *   (verbosity) -> extras "text.<member>". reasoning.effort -> reasoning_effort and
 *   thinking (unless "none"); other members of "reasoning" (summary) -> extras
 *   "reasoning.<member>".
 * - top_logprobs > 0, or "message.output_text.logprobs" in include -> DL_NEED_F_LOGPROBS;
 *   both are also kept as extras (include unless empty).
 * - store -> r->store; previous_response_id, prompt_cache_key, user, metadata (raw)
 *   as such. Every other top-level field with a non-null value (truncation,
 *   service_tier, background, safety_identifier, prompt, conversation, stream_options,
 *   max_tool_calls, prompt_cache_retention, context_management, ...) -> a dl_extra by
 *   name (raw JSON). A null value asks for nothing and is not kept. A name holding '.'
 *   is refused: no Responses parameter has one, and dotted names are the extras of
 *   "text" and "reasoning" members.
 *
 * Render (canon -> a body for a Responses upstream), decisions:
 * - system parts -> "instructions", their texts joined with "\n\n".
 * - Each message walks its parts in order: runs of TEXT / IMAGE / DOCUMENT make one
 *   message item (role user for user and tool messages, assistant for assistant ones;
 *   input_text / input_image / input_file, or output_text for the assistant), and every
 *   other part an item of its own: TOOL_CALL -> function_call (call_id = the call's id,
 *   arguments as a JSON string, "{}" when empty), TOOL_RESULT -> function_call_output
 *   (output: the texts joined with "\n\n", or input_* parts when it holds media),
 *   REASONING -> a reasoning item only when a Responses upstream made its signature
 *   (sig_shape RESPONSES): its id when one was parsed (none else: with store off the
 *   API looks an id up and finds none; the encrypted content is what it reads),
 *   summary, encrypted_content; any other reasoning is dropped, named "reasoning".
 *   Empty texts make nothing. A text document of another shape (text/... data, as a
 *   Messages plain-text document arrives) -> input_text with its title on a first line;
 *   other data -> input_file with a data: URL (filename: its title, else "document" +
 *   ".pdf" for PDFs); a URL -> input_file by file_url.
 * - Refused (GW_E_UNCONVERTIBLE, naming the field): a tool call or result without an
 *   id, an image or document in an assistant message, an image with neither URL nor
 *   data, n > 1, logprobs, audio or image output, and hosted tools and OTHER parts of a
 *   request from another shape.
 * - tools -> function tools (parameters {"type":"object","properties":{}} when none,
 *   strict always written); tool_choice and parallel_tool_calls only beside tools
 *   (dropped by name without them, as for Chat).
 * - temperature and top_p passed; top_k, seed, presence_penalty, frequency_penalty and
 *   the stop sequences ("stop") dropped by name: Responses has none of them.
 * - max_output_tokens: the request's, else <max_output_default>, else none; from another
 *   shape raised to DL_RESPONSES_MIN_OUTPUT_TOKENS, the API's minimum.
 * - text.format for JSON object and JSON schema (name "response" when none was given).
 * - reasoning.effort: the request's effort, else a thinking budget's (<= 1024 low,
 *   <= 8192 medium, else high); with thinking asked, include
 *   ["reasoning.encrypted_content"] so the reasoning can be sent back (store is off).
 * - stream -> "stream":true (usage comes in response.completed, nothing else needed);
 *   "store":false: the gateway keeps conversations itself (DESIGN.md 11).
 * - prompt_cache_key and user passed; metadata of another shape dropped by name (as for
 *   Chat); cache hints ("cache_control"), a message's "name", a tool result's
 *   "is_error" dropped by name.
 * - A request parsed from Responses (r->source) goes back with its extras (top-level
 *   ones as members, "text.*" and "reasoning.*" in their objects, a hosted
 *   tool_choice as written), hosted tools, OTHER items, metadata, store and
 *   previous_response_id as written, and no needs refusal; extras of other shapes are
 *   dropped by name. The same-shape path splices instead; this keeps the shape honest.
 * Owns:    nothing; what parse builds lives in the caller's arena.
 * Threads: any; one request on one thread.
 * See:     dialects/responses-priv.h, dialects/canon.h, docs/fields-responses.md,
 *          tests/unit/dialects/test_responses_request.c, tests/fuzz/fuzz_responses.c
 */
#include "dialects/responses-priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define PATH_MAX_LEN 96

/* ---- parse ---- */

/* The top-level fields parse reads, and so refuses to see twice (issue 8). A field
 * parse starts reading joins this list. */
enum read_field {
    RF_MODEL,
    RF_INPUT,
    RF_INSTRUCTIONS,
    RF_TOOLS,
    RF_TOOL_CHOICE,
    RF_PARALLEL,
    RF_TEMPERATURE,
    RF_TOP_P,
    RF_MAX_OUTPUT,
    RF_TEXT,
    RF_REASONING,
    RF_STREAM,
    RF_STORE,
    RF_PREVIOUS,
    RF_CACHE_KEY,
    RF_USER,
    RF_METADATA,
    RF_TOP_LOGPROBS,
    RF_INCLUDE,
    RF__COUNT,
};

static const struct {
    const char *name;
    size_t len;
} read_fields[RF__COUNT] = {
    [RF_MODEL] = {"model", 5},
    [RF_INPUT] = {"input", 5},
    [RF_INSTRUCTIONS] = {"instructions", 12},
    [RF_TOOLS] = {"tools", 5},
    [RF_TOOL_CHOICE] = {"tool_choice", 11},
    [RF_PARALLEL] = {"parallel_tool_calls", 19},
    [RF_TEMPERATURE] = {"temperature", 11},
    [RF_TOP_P] = {"top_p", 5},
    [RF_MAX_OUTPUT] = {"max_output_tokens", 17},
    [RF_TEXT] = {"text", 4},
    [RF_REASONING] = {"reasoning", 9},
    [RF_STREAM] = {"stream", 6},
    [RF_STORE] = {"store", 5},
    [RF_PREVIOUS] = {"previous_response_id", 20},
    [RF_CACHE_KEY] = {"prompt_cache_key", 16},
    [RF_USER] = {"user", 4},
    [RF_METADATA] = {"metadata", 8},
    [RF_TOP_LOGPROBS] = {"top_logprobs", 12},
    [RF_INCLUDE] = {"include", 7},
};

struct rp {
    struct dl_json j; /* the body */
    struct gw_arena *a;
    struct dl_request *r;
    struct gw_buf *why;
    size_t cap_messages, cap_system, cap_tools, cap_extras, cap_offered;
    bool run;       /* the last message is an assistant message the next items may join */
    size_t cap_run; /* ... the capacity of its parts */
    struct dl_part *late_system; /* of system and developer messages: after instructions */
    size_t n_late_system, cap_late_system;
    struct gw_str allowed; /* tool_choice allowed_tools' "tools" array (raw), "" none */
};

static enum gw_code rp_bad(struct rp *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* A refusal: <why> gets the reason (ours, never the body's bytes). */
static enum gw_code
rp_bad(struct rp *p, const char *fmt, ...)
{
    enum gw_code rc;
    va_list ap;

    va_start(ap, fmt);
    rc = dl_vrefuse(p->why, GW_E_BAD_REQUEST, fmt, ap);
    va_end(ap);
    return rc;
}

/* The refusal of bytes the scanner refused: their position only. */
static enum gw_code
rp_json(struct rp *p, const struct dl_json *j)
{
    return dl_refuse_json(p->why, j);
}

/* The bytes of string token <t> (a slice, or a copy when escaped); false: no memory. */
static bool
rp_str(struct rp *p, const struct dl_json *j, const struct dl_json_str *t, struct gw_str *out)
{
    *out = dl_json_text(j, t, p->a);
    return out->ptr != NULL;
}

static struct gw_str
raw_of(const struct dl_json *j, const struct dl_anth_field *f)
{
    return (struct gw_str){j->s + f->at, f->end - f->at};
}

static bool
is_none(const struct dl_anth_field *f)
{
    return f->kind == DA_ABSENT || f->kind == DA_NULL;
}

/* A required string field <f> (at "<path>.<name>") into <out>. */
static enum gw_code
rp_need_str(struct rp *p, const struct dl_json *j, const struct dl_anth_field *f, const char *path,
            struct gw_str *out)
{
    if (f->kind != DA_STR)
        return rp_bad(p, "%s.%s: required string", path, f->name);
    return rp_str(p, j, &f->str, out) ? GW_OK : GW_E_NOMEM;
}

/* An optional string field: null or absent leave <out> as it is. */
static enum gw_code
rp_opt_str(struct rp *p, const struct dl_json *j, const struct dl_anth_field *f, const char *path,
           struct gw_str *out)
{
    if (is_none(f))
        return GW_OK;
    return rp_need_str(p, j, f, path, out);
}

/* "data:<media type>[;param...];base64,<data>" -> media type and data. False for any
 * other URL (kept as a URL). */
static bool
data_url(struct gw_str url, struct gw_str *media_type, struct gw_str *data)
{
    const char *comma, *semi;
    size_t head;

    if (url.len < 5 || strncasecmp(url.ptr, "data:", 5) != 0)
        return false;
    comma = memchr(url.ptr + 5, ',', url.len - 5);
    if (!comma)
        return false;
    head = (size_t)(comma - url.ptr);
    if (head < 5 + 7 || memcmp(comma - 7, ";base64", 7) != 0)
        return false;
    semi = memchr(url.ptr + 5, ';', head - 5);
    *media_type = (struct gw_str){url.ptr + 5, (size_t)(semi - (url.ptr + 5))};
    *data = (struct gw_str){comma + 1, url.len - head - 1};
    return true;
}

/* Adds the extra <name> = <raw>; a later copy of a key replaces the earlier one. */
static enum gw_code
rp_extra(struct rp *p, struct gw_str name, struct gw_str raw)
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

/* The extra "<prefix>.<key>" (key decoded) = <raw>. */
static enum gw_code
rp_extra_sub(struct rp *p, const char *prefix, const struct dl_json *j,
             const struct dl_json_str *key, struct gw_str raw)
{
    size_t n = strlen(prefix);
    char *s = gw_arena_alloc(p->a, n + 1 + key->dlen + 1);

    if (!s)
        return GW_E_NOMEM;
    memcpy(s, prefix, n);
    s[n] = '.';
    dl_json_decode(j, key, s + n + 1);
    s[n + 1 + key->dlen] = '\0';
    return rp_extra(p, (struct gw_str){s, n + 1 + key->dlen}, raw);
}

/* ---- parse: messages ---- */

static struct dl_message *
rp_new_message(struct rp *p, enum dl_role role)
{
    struct dl_message *m = gw_arena_push(p->a, (void **)&p->r->messages, &p->r->n_messages,
                                         &p->cap_messages, sizeof(*m));

    if (m)
        m->role = role;
    return m;
}

/* Appends <parts> to the assistant message the items join (a new one when the last
 * message is not one). */
static enum gw_code
rp_assistant(struct rp *p, const struct dl_part *parts, size_t n)
{
    struct dl_message *m;
    size_t k;

    if (!p->run) {
        if (!rp_new_message(p, DL_ROLE_ASSISTANT))
            return GW_E_NOMEM;
        p->run = true;
        p->cap_run = 0;
    }
    m = &p->r->messages[p->r->n_messages - 1];
    for (k = 0; k < n; k++) {
        struct dl_part *d =
            gw_arena_push(p->a, (void **)&m->parts, &m->n_parts, &p->cap_run, sizeof(*d));

        if (!d)
            return GW_E_NOMEM;
        *d = parts[k];
    }
    return GW_OK;
}

/* A user or tool message of its own: it ends an assistant run. */
static enum gw_code
rp_message_of(struct rp *p, enum dl_role role, struct dl_part *parts, size_t n)
{
    struct dl_message *m = rp_new_message(p, role);

    if (!m)
        return GW_E_NOMEM;
    m->parts = parts;
    m->n_parts = n;
    p->run = false;
    return GW_OK;
}

static bool
has_suffix(struct gw_str s, const char *suffix)
{
    size_t n = strlen(suffix);

    return s.len >= n && memcmp(s.ptr + s.len - n, suffix, n) == 0;
}

/* An item the hub does not model, kept whole (<name>: the type that made it so). */
static enum gw_code
rp_other(struct rp *p, struct gw_str name, struct gw_str raw, enum dl_role role)
{
    struct dl_part *o = gw_arena_calloc(p->a, 1, sizeof(*o));

    if (!o)
        return GW_E_NOMEM;
    o->kind = DL_PART_OTHER;
    o->name = name;
    o->data = raw;
    if (role == DL_ROLE_ASSISTANT)
        return rp_assistant(p, o, 1);
    return rp_message_of(p, role, o, 1);
}

/* Fields of a content part (one collector for every type). */
enum pf {
    PF_TYPE,
    PF_TEXT,
    PF_IMAGE_URL,
    PF_FILE_ID,
    PF_DETAIL,
    PF_FILE_DATA,
    PF_FILENAME,
    PF_FILE_URL,
    PF_REFUSAL,
    PF__COUNT,
};

#define PART_FIELDS                                                                                \
    {                                                                                              \
        DL_ANTH_FIELD("type"), DL_ANTH_FIELD("text"), DL_ANTH_FIELD("image_url"),                  \
            DL_ANTH_FIELD("file_id"), DL_ANTH_FIELD("detail"), DL_ANTH_FIELD("file_data"),         \
            DL_ANTH_FIELD("filename"), DL_ANTH_FIELD("file_url"), DL_ANTH_FIELD("refusal")         \
    }

/* Where a content part stands: whether it may hold media (user messages, tool outputs). */
#define CP_MEDIA 0x1u

/* The image part <f> into <part>; *other when it is given by file_id. */
static enum gw_code
rp_image(struct rp *p, const struct dl_json *j, const struct dl_anth_field *f, const char *path,
         struct dl_part *part, bool *other)
{
    struct gw_str url;

    if (f[PF_IMAGE_URL].kind != DA_STR) {
        if (f[PF_FILE_ID].kind == DA_STR) {
            *other = true;
            return GW_OK;
        }
        return rp_bad(p, "%s.image_url: required string (or file_id)", path);
    }
    if (!rp_str(p, j, &f[PF_IMAGE_URL].str, &url))
        return GW_E_NOMEM;
    part->kind = DL_PART_IMAGE;
    if (!data_url(url, &part->media_type, &part->data))
        part->url = url;
    return rp_opt_str(p, j, &f[PF_DETAIL], path, &part->detail);
}

/* The file part <f> into <part>; *other when it is given by file_id. */
static enum gw_code
rp_file(struct rp *p, const struct dl_json *j, const struct dl_anth_field *f, const char *path,
        struct dl_part *part, bool *other)
{
    struct gw_str data;
    enum gw_code rc;

    part->kind = DL_PART_DOCUMENT;
    rc = rp_opt_str(p, j, &f[PF_FILENAME], path, &part->text);
    if (rc != GW_OK)
        return rc;
    if (f[PF_FILE_DATA].kind == DA_STR) {
        if (!rp_str(p, j, &f[PF_FILE_DATA].str, &data))
            return GW_E_NOMEM;
        if (!data_url(data, &part->media_type, &part->data)) {
            /* raw base64: the API's files by data are PDFs */
            part->media_type = GW_STR_LIT("application/pdf");
            part->data = data;
        }
        return GW_OK;
    }
    if (f[PF_FILE_URL].kind == DA_STR)
        return rp_str(p, j, &f[PF_FILE_URL].str, &part->url) ? GW_OK : GW_E_NOMEM;
    if (f[PF_FILE_ID].kind == DA_STR) {
        *other = true;
        return GW_OK;
    }
    return rp_bad(p, "%s: file_data, file_url or file_id required", path);
}

/* The content part at the cursor of <j> (<path> names it) into <part>. A part the hub
 * does not model (or one its place cannot hold) sets <*unsupported> to its type: the
 * caller keeps the whole item. */
static enum gw_code
rp_part(struct rp *p, struct dl_json *j, const char *path, unsigned allow, struct dl_part *part,
        struct gw_str *unsupported)
{
    struct dl_anth_field f[PF__COUNT] = PART_FIELDS;
    bool other = false;
    enum gw_code rc = GW_OK;

    if (dl_json_peek(j) != '{') {
        if (!dl_json_skip(j, NULL))
            return rp_json(p, j);
        return rp_bad(p, "%s: must be an object", path);
    }
    if (!dl_anthropic_fields(j, f, PF__COUNT))
        return rp_json(p, j);
    if (f[PF_TYPE].kind != DA_STR)
        return rp_bad(p, "%s.type: required string", path);
    if (dl_anthropic_is(j, &f[PF_TYPE], "input_text") ||
        dl_anthropic_is(j, &f[PF_TYPE], "output_text")) {
        part->kind = DL_PART_TEXT;
        return rp_need_str(p, j, &f[PF_TEXT], path, &part->text);
    }
    if (dl_anthropic_is(j, &f[PF_TYPE], "refusal")) {
        part->kind = DL_PART_TEXT;
        return rp_need_str(p, j, &f[PF_REFUSAL], path, &part->text);
    }
    if (dl_anthropic_is(j, &f[PF_TYPE], "input_image"))
        rc = rp_image(p, j, f, path, part, &other);
    else if (dl_anthropic_is(j, &f[PF_TYPE], "input_file"))
        rc = rp_file(p, j, f, path, part, &other);
    else
        other = true; /* input_audio, and types newer than this file */
    if (rc == GW_OK && (other || !(allow & CP_MEDIA)))
        return rp_str(p, j, &f[PF_TYPE].str, unsupported) ? GW_OK : GW_E_NOMEM;
    return rc;
}

/* The content array at <at> (<path> names it) into <*parts>, <*n>; stops at the first
 * part the hub does not model (<*unsupported> its type). */
static enum gw_code
rp_parts(struct rp *p, size_t at, const char *path, unsigned allow, struct dl_part **parts,
         size_t *n, struct gw_str *unsupported)
{
    struct dl_json j = dl_anthropic_at(&p->j, at);
    char sub[PATH_MAX_LEN + 32];
    bool first = true;
    size_t cap = 0, k = 0;
    int r;

    *parts = NULL;
    *n = 0;
    if (!dl_json_arr_enter(&j))
        return rp_json(p, &j);
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        struct dl_part *part = gw_arena_push(p->a, (void **)parts, n, &cap, sizeof(**parts));
        enum gw_code rc;

        if (!part)
            return GW_E_NOMEM;
        gw_path_item(sub, sizeof(sub), path, k++, "");
        rc = rp_part(p, &j, sub, allow, part, unsupported);
        if (rc != GW_OK || unsupported->len)
            return rc;
    }
    return r == 0 ? GW_OK : rp_json(p, &j);
}

/* Fields of an input item (one collector for every type). */
enum itf {
    IT_TYPE,
    IT_ROLE,
    IT_CONTENT,
    IT_CALL_ID,
    IT_NAME,
    IT_ARGUMENTS,
    IT_ID,
    IT_OUTPUT,
    IT_SUMMARY,
    IT_ENC,
    IT_INPUT,
    IT__COUNT,
};

#define ITEM_FIELDS                                                                                \
    {                                                                                              \
        DL_ANTH_FIELD("type"), DL_ANTH_FIELD("role"), DL_ANTH_FIELD("content"),                    \
            DL_ANTH_FIELD("call_id"), DL_ANTH_FIELD("name"), DL_ANTH_FIELD("arguments"),           \
            DL_ANTH_FIELD("id"), DL_ANTH_FIELD("output"), DL_ANTH_FIELD("summary"),                \
            DL_ANTH_FIELD("encrypted_content"), DL_ANTH_FIELD("input")                             \
    }

/* System and developer parts, after instructions whatever their place in the body. */
static enum gw_code
rp_late_system(struct rp *p, const struct dl_part *parts, size_t n)
{
    size_t k;

    for (k = 0; k < n; k++) {
        struct dl_part *s = gw_arena_push(p->a, (void **)&p->late_system, &p->n_late_system,
                                          &p->cap_late_system, sizeof(*s));

        if (!s)
            return GW_E_NOMEM;
        *s = parts[k];
    }
    return GW_OK;
}

/* input[<i>], a message item (its fields <f>, its bytes <raw>). */
static enum gw_code
rp_message_item(struct rp *p, const struct dl_anth_field *f, size_t i, struct gw_str raw)
{
    const struct dl_json *j = &p->j;
    struct gw_str unsupported = {"", 0};
    struct dl_part *parts;
    char path[PATH_MAX_LEN];
    bool user, assistant, system;
    size_t n;
    enum gw_code rc;

    user = dl_anthropic_is(j, &f[IT_ROLE], "user");
    assistant = dl_anthropic_is(j, &f[IT_ROLE], "assistant");
    system =
        dl_anthropic_is(j, &f[IT_ROLE], "system") || dl_anthropic_is(j, &f[IT_ROLE], "developer");
    if (!user && !assistant && !system)
        return rp_bad(p, "input[%zu].role: must be user, assistant, system or developer", i);
    if (f[IT_CONTENT].kind == DA_STR) {
        parts = gw_arena_calloc(p->a, 1, sizeof(*parts));
        if (!parts || !rp_str(p, j, &f[IT_CONTENT].str, &parts->text))
            return GW_E_NOMEM;
        parts->kind = DL_PART_TEXT;
        n = 1;
    } else if (f[IT_CONTENT].kind == DA_ARR) {
        gw_path_item(path, sizeof(path), "input", i, ".content");
        rc = rp_parts(p, f[IT_CONTENT].at, path, user ? CP_MEDIA : 0, &parts, &n, &unsupported);
        if (rc != GW_OK)
            return rc;
    } else {
        return rp_bad(p, "input[%zu].content: required string or array of content parts", i);
    }
    if (unsupported.len)
        return rp_other(p, unsupported, raw, assistant ? DL_ROLE_ASSISTANT : DL_ROLE_USER);
    if (system)
        return rp_late_system(p, parts, n);
    if (assistant)
        return rp_assistant(p, parts, n);
    return rp_message_of(p, DL_ROLE_USER, parts, n);
}

/* input[<i>], a function_call item. */
static enum gw_code
rp_call_item(struct rp *p, const struct dl_anth_field *f, size_t i)
{
    struct dl_part call = {.kind = DL_PART_TOOL_CALL};
    char path[PATH_MAX_LEN];
    enum gw_code rc;

    gw_path_item(path, sizeof(path), "input", i, "");
    rc = rp_need_str(p, &p->j, &f[IT_CALL_ID], path, &call.id);
    if (rc == GW_OK)
        rc = rp_need_str(p, &p->j, &f[IT_NAME], path, &call.name);
    if (rc == GW_OK)
        rc = rp_need_str(p, &p->j, &f[IT_ARGUMENTS], path, &call.arguments);
    return rc == GW_OK ? rp_assistant(p, &call, 1) : rc;
}

/* input[<i>], a custom_tool_call item {call_id, name, input}: a call whose arguments
 * are {"input": TEXT} (canon.h, dl_tool.freeform). */
static enum gw_code
rp_custom_call_item(struct rp *p, const struct dl_anth_field *f, size_t i)
{
    struct dl_part call = {.kind = DL_PART_TOOL_CALL};
    char path[PATH_MAX_LEN];
    struct gw_str input;
    struct gw_buf args = {0};
    enum gw_code rc;

    gw_path_item(path, sizeof(path), "input", i, "");
    rc = rp_need_str(p, &p->j, &f[IT_CALL_ID], path, &call.id);
    if (rc == GW_OK)
        rc = rp_need_str(p, &p->j, &f[IT_NAME], path, &call.name);
    if (rc == GW_OK)
        rc = rp_need_str(p, &p->j, &f[IT_INPUT], path, &input);
    if (rc != GW_OK)
        return rc;
    if (gw_buf_append_cstr(&args, "{\"input\":") != GW_OK ||
        gw_buf_append_json_str(&args, input) != GW_OK || gw_buf_append_cstr(&args, "}") != GW_OK) {
        gw_buf_fini(&args);
        return GW_E_NOMEM;
    }
    call.arguments = gw_arena_str(p->a, (struct gw_str){args.data, args.len});
    gw_buf_fini(&args);
    if (!call.arguments.ptr)
        return GW_E_NOMEM;
    return rp_assistant(p, &call, 1);
}

/* input[<i>], a function_call_output item (its bytes <raw>). */
static enum gw_code
rp_output_item(struct rp *p, const struct dl_anth_field *f, size_t i, struct gw_str raw)
{
    struct gw_str unsupported = {"", 0};
    char path[PATH_MAX_LEN];
    struct dl_part *result;
    enum gw_code rc;

    result = gw_arena_calloc(p->a, 1, sizeof(*result));
    if (!result)
        return GW_E_NOMEM;
    result->kind = DL_PART_TOOL_RESULT;
    gw_path_item(path, sizeof(path), "input", i, "");
    rc = rp_need_str(p, &p->j, &f[IT_CALL_ID], path, &result->call_id);
    if (rc != GW_OK)
        return rc;
    if (f[IT_OUTPUT].kind == DA_STR) {
        result->content = gw_arena_calloc(p->a, 1, sizeof(*result->content));
        if (!result->content || !rp_str(p, &p->j, &f[IT_OUTPUT].str, &result->content->text))
            return GW_E_NOMEM;
        result->content->kind = DL_PART_TEXT;
        result->n_content = 1;
    } else if (f[IT_OUTPUT].kind == DA_ARR) {
        gw_path_item(path, sizeof(path), "input", i, ".output");
        rc = rp_parts(p, f[IT_OUTPUT].at, path, CP_MEDIA, &result->content, &result->n_content,
                      &unsupported);
        if (rc != GW_OK)
            return rc;
        if (unsupported.len)
            return rp_other(p, unsupported, raw, DL_ROLE_TOOL);
    } else {
        return rp_bad(p, "input[%zu].output: required string or array of content parts", i);
    }
    return rp_message_of(p, DL_ROLE_TOOL, result, 1);
}

/* The texts of the array at <at> (objects with a string "text", <what> naming it), joined
 * with "\n\n" into <*out> (a slice when there is one). */
static enum gw_code
rp_texts(struct rp *p, size_t at, size_t i, const char *what, struct gw_str *out)
{
    struct dl_json j = dl_anthropic_at(&p->j, at);
    struct gw_buf b = {0};
    struct gw_str one = {"", 0};
    bool first = true;
    size_t k = 0;
    int r;

    if (!dl_json_arr_enter(&j))
        return rp_json(p, &j);
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        struct dl_anth_field t[] = {DL_ANTH_FIELD("text")};
        struct gw_str s;

        if (dl_json_peek(&j) != '{' || !dl_anthropic_fields(&j, t, 1) || t[0].kind != DA_STR) {
            gw_buf_fini(&b);
            if (j.err)
                return rp_json(p, &j);
            return rp_bad(p, "input[%zu].%s[%zu].text: required string", i, what, k);
        }
        if (!rp_str(p, &j, &t[0].str, &s)) {
            gw_buf_fini(&b);
            return GW_E_NOMEM;
        }
        if (k == 0)
            one = s;
        else if ((k == 1 && gw_buf_append_str(&b, one) != GW_OK) ||
                 gw_buf_append_cstr(&b, "\n\n") != GW_OK || gw_buf_append_str(&b, s) != GW_OK) {
            gw_buf_fini(&b);
            return GW_E_NOMEM;
        }
        k++;
    }
    if (r != 0) {
        gw_buf_fini(&b);
        return rp_json(p, &j);
    }
    *out = k > 1 ? gw_arena_str(p->a, (struct gw_str){b.data, b.len}) : one;
    gw_buf_fini(&b);
    return out->ptr ? GW_OK : GW_E_NOMEM;
}

/* input[<i>], a reasoning item. */
static enum gw_code
rp_reasoning_item(struct rp *p, const struct dl_anth_field *f, size_t i)
{
    struct dl_part part = {.kind = DL_PART_REASONING};
    char path[PATH_MAX_LEN];
    enum gw_code rc = GW_OK;

    gw_path_item(path, sizeof(path), "input", i, "");
    if (f[IT_SUMMARY].kind == DA_ARR)
        rc = rp_texts(p, f[IT_SUMMARY].at, i, "summary", &part.text);
    else if (!is_none(&f[IT_SUMMARY]))
        return rp_bad(p, "input[%zu].summary: must be an array", i);
    if (rc == GW_OK && part.text.len == 0 && f[IT_CONTENT].kind == DA_ARR)
        rc = rp_texts(p, f[IT_CONTENT].at, i, "content", &part.text);
    else if (rc == GW_OK && !is_none(&f[IT_CONTENT]) && f[IT_CONTENT].kind != DA_ARR)
        return rp_bad(p, "input[%zu].content: must be an array", i);
    if (rc == GW_OK)
        rc = rp_opt_str(p, &p->j, &f[IT_ENC], path, &part.signature);
    if (rc == GW_OK)
        rc = rp_opt_str(p, &p->j, &f[IT_ID], path, &part.id);
    if (rc != GW_OK)
        return rc;
    part.sig_shape = dl_sig_origin(&part.signature, DL_SHAPE_RESPONSES);
    return rp_assistant(p, &part, 1);
}

/* input[<i>] at the cursor. */
static enum gw_code
rp_item(struct rp *p, size_t i)
{
    struct dl_anth_field f[IT__COUNT] = ITEM_FIELDS;
    struct dl_json *j = &p->j;
    struct gw_str raw, type;
    size_t start;

    if (dl_json_peek(j) != '{') {
        if (!dl_json_skip(j, NULL))
            return rp_json(p, j);
        return rp_bad(p, "input[%zu]: must be an object", i);
    }
    start = j->i;
    if (!dl_anthropic_fields(j, f, IT__COUNT))
        return rp_json(p, j);
    raw = (struct gw_str){j->s + start, j->i - start};
    if (is_none(&f[IT_TYPE]) || dl_anthropic_is(j, &f[IT_TYPE], "message"))
        return rp_message_item(p, f, i, raw);
    if (f[IT_TYPE].kind != DA_STR)
        return rp_bad(p, "input[%zu].type: must be a string", i);
    if (dl_anthropic_is(j, &f[IT_TYPE], "function_call"))
        return rp_call_item(p, f, i);
    if (dl_anthropic_is(j, &f[IT_TYPE], "function_call_output") ||
        dl_anthropic_is(j, &f[IT_TYPE], "custom_tool_call_output"))
        return rp_output_item(p, f, i, raw);
    if (dl_anthropic_is(j, &f[IT_TYPE], "custom_tool_call"))
        return rp_custom_call_item(p, f, i);
    if (dl_anthropic_is(j, &f[IT_TYPE], "reasoning"))
        return rp_reasoning_item(p, f, i);
    if (!rp_str(p, j, &f[IT_TYPE].str, &type))
        return GW_E_NOMEM;
    /* item_reference, hosted tools' calls and outputs, custom tool calls, compaction... */
    if (gw_str_eq(type, GW_STR_LIT("item_reference")))
        return rp_other(p, type, raw, DL_ROLE_USER);
    if (has_suffix(type, "_output") || gw_str_eq(type, GW_STR_LIT("mcp_approval_response")))
        return rp_other(p, type, raw, DL_ROLE_TOOL);
    return rp_other(p, type, raw, DL_ROLE_ASSISTANT);
}

static enum gw_code
rp_input(struct rp *p, const struct dl_anth_field *f)
{
    struct dl_json *j = &p->j;
    bool first = true;
    size_t i = 0;
    int r;

    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind == DA_STR) {
        struct dl_part *part = gw_arena_calloc(p->a, 1, sizeof(*part));
        struct dl_json sj = dl_anthropic_at(j, f->at);

        if (!part || !rp_str(p, &sj, &f->str, &part->text))
            return GW_E_NOMEM;
        part->kind = DL_PART_TEXT;
        return rp_message_of(p, DL_ROLE_USER, part, 1);
    }
    if (f->kind != DA_ARR)
        return rp_bad(p, "input: must be a string or an array of items");
    *j = dl_anthropic_at(j, f->at);
    if (!dl_json_arr_enter(j))
        return rp_json(p, j);
    while ((r = dl_json_arr_next(j, &first)) == 1) {
        enum gw_code rc = rp_item(p, i++);

        if (rc != GW_OK)
            return rc;
    }
    return r == 0 ? GW_OK : rp_json(p, j);
}

/* ---- parse: tools ---- */

/* The schema of a free-form tool offered as a function (canon.h, dl_tool.freeform). */
#define FREEFORM_SCHEMA                                                                            \
    "{\"type\":\"object\",\"properties\":{\"input\":{\"type\":\"string\",\"description\":"         \
    "\"the tool's free-form input, as its description says\"}},\"required\":[\"input\"]}"

/* tools[<k>], a custom (free-form) tool {type, name, description, format} at <raw>: a
 * function of one string "input" for every shape, its JSON kept for Responses. A
 * grammar in its format goes into the description, so that a model of another shape
 * still knows how the input must read. */
static enum gw_code
rp_custom_tool(struct rp *p, struct dl_json *j, const struct dl_anth_field *f, size_t k,
               struct dl_tool *t, struct gw_str raw)
{
    struct dl_anth_field tf[] = {DL_ANTH_FIELD("format")};
    struct dl_anth_field ff[] = {DL_ANTH_FIELD("syntax"), DL_ANTH_FIELD("definition")};
    struct gw_str syntax = {"", 0}, def = {"", 0};
    char path[PATH_MAX_LEN];
    struct dl_json tj;
    struct gw_buf d = {0};
    enum gw_code rc;

    gw_path_item(path, sizeof(path), "tools", k, "");
    if (f[1].kind != DA_STR || f[1].str.dlen == 0)
        return rp_bad(p, "tools[%zu].name: required string", k);
    if (!rp_str(p, j, &f[1].str, &t->name))
        return GW_E_NOMEM;
    t->freeform = raw;
    t->parameters = GW_STR_LIT(FREEFORM_SCHEMA);
    rc = rp_opt_str(p, j, &f[2], path, &t->description);
    if (rc != GW_OK)
        return rc;
    dl_json_init(&tj, raw.ptr, raw.len);
    if (!dl_anthropic_fields(&tj, tf, 1) || tf[0].kind != DA_OBJ)
        return GW_OK;
    tj.i = tf[0].at;
    if (!dl_anthropic_fields(&tj, ff, 2) || ff[1].kind != DA_STR)
        return GW_OK;
    if ((ff[0].kind == DA_STR && !rp_str(p, &tj, &ff[0].str, &syntax)) ||
        !rp_str(p, &tj, &ff[1].str, &def))
        return GW_E_NOMEM;
    if (gw_buf_append_str(&d, t->description) != GW_OK ||
        gw_buf_append_cstr(&d, t->description.len ? "\n\nThe input follows this "
                                                  : "The input "
                                                    "follows this ") != GW_OK ||
        gw_buf_append_str(&d, syntax.len ? syntax : GW_STR_LIT("")) != GW_OK ||
        gw_buf_append_cstr(&d, syntax.len ? " grammar:\n" : "grammar:\n") != GW_OK ||
        gw_buf_append_str(&d, def) != GW_OK) {
        gw_buf_fini(&d);
        return GW_E_NOMEM;
    }
    t->description = gw_arena_str(p->a, (struct gw_str){d.data, d.len});
    gw_buf_fini(&d);
    return t->description.ptr ? GW_OK : GW_E_NOMEM;
}

static enum gw_code
rp_tool(struct rp *p, struct dl_json *j, size_t k)
{
    struct dl_anth_field f[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("name"),
                                DL_ANTH_FIELD("description"), DL_ANTH_FIELD("parameters"),
                                DL_ANTH_FIELD("strict")};
    struct dl_request *r = p->r;
    char path[PATH_MAX_LEN];
    struct dl_tool *t;
    enum gw_code rc;
    size_t start;

    if (dl_json_peek(j) != '{') {
        if (!dl_json_skip(j, NULL))
            return rp_json(p, j);
        return rp_bad(p, "tools[%zu]: must be an object", k);
    }
    start = j->i;
    if (!dl_anthropic_fields(j, f, 5))
        return rp_json(p, j);
    if (f[0].kind != DA_STR)
        return rp_bad(p, "tools[%zu].type: required string", k);
    if (dl_anthropic_is(j, &f[0], "namespace") || dl_anthropic_is(j, &f[0], "tool_search")) {
        /* tools the client runs that only a Responses model knows how to call: offered
         * to it, dropped by name for another shape's (dl_request_drop_offered) */
        t = gw_arena_push(p->a, (void **)&r->offered, &r->n_offered, &p->cap_offered, sizeof(*t));
        if (!t)
            return GW_E_NOMEM;
        t->hosted = (struct gw_str){j->s + start, j->i - start};
        return rp_str(p, j, &f[0].str, &t->name) ? GW_OK : GW_E_NOMEM;
    }
    t = gw_arena_push(p->a, (void **)&r->tools, &r->n_tools, &p->cap_tools, sizeof(*t));
    if (!t)
        return GW_E_NOMEM;
    gw_path_item(path, sizeof(path), "tools", k, "");
    if (dl_anthropic_is(j, &f[0], "custom"))
        return rp_custom_tool(p, j, f, k, t, (struct gw_str){j->s + start, j->i - start});
    if (!dl_anthropic_is(j, &f[0], "function")) {
        /* a provider's tool (or a custom one): kept as written, only a Responses
         * upstream can take it */
        t->hosted = (struct gw_str){j->s + start, j->i - start};
        r->needs |= DL_NEED_F_HOSTED_TOOLS;
        return rp_str(p, j, f[1].kind == DA_STR ? &f[1].str : &f[0].str, &t->name) ? GW_OK
                                                                                   : GW_E_NOMEM;
    }
    if (f[1].kind != DA_STR || f[1].str.dlen == 0)
        return rp_bad(p, "tools[%zu].name: required string", k);
    if (!rp_str(p, j, &f[1].str, &t->name))
        return GW_E_NOMEM;
    rc = rp_opt_str(p, j, &f[2], path, &t->description);
    if (rc != GW_OK)
        return rc;
    if (f[3].kind == DA_OBJ)
        t->parameters = raw_of(j, &f[3]);
    else if (!is_none(&f[3]))
        return rp_bad(p, "tools[%zu].parameters: must be a JSON schema object", k);
    if (f[4].kind != DA_TRUE && f[4].kind != DA_FALSE && !is_none(&f[4]))
        return rp_bad(p, "tools[%zu].strict: must be a boolean", k);
    t->strict = f[4].kind == DA_TRUE;
    return GW_OK;
}

static enum gw_code
rp_tools(struct rp *p, const struct dl_anth_field *f)
{
    struct dl_json j;
    bool first = true;
    size_t k = 0;
    int r;

    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_ARR)
        return rp_bad(p, "tools: must be an array");
    j = dl_anthropic_at(&p->j, f->at);
    if (!dl_json_arr_enter(&j))
        return rp_json(p, &j);
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        enum gw_code rc = rp_tool(p, &j, k++);

        if (rc != GW_OK)
            return rc;
    }
    return r == 0 ? GW_OK : rp_json(p, &j);
}

static enum gw_code
rp_tool_choice(struct rp *p, const struct dl_anth_field *f)
{
    struct dl_anth_field c[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("name"), DL_ANTH_FIELD("mode"),
                                DL_ANTH_FIELD("tools")};
    struct dl_request *r = p->r;
    struct dl_json j = dl_anthropic_at(&p->j, f->at);

    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind == DA_STR) {
        if (dl_anthropic_is(&j, f, "auto"))
            r->tool_choice = DL_TOOL_CHOICE_AUTO;
        else if (dl_anthropic_is(&j, f, "none"))
            r->tool_choice = DL_TOOL_CHOICE_NONE;
        else if (dl_anthropic_is(&j, f, "required"))
            r->tool_choice = DL_TOOL_CHOICE_REQUIRED;
        else
            return rp_bad(p, "tool_choice: must be auto, none, required or an object");
        return GW_OK;
    }
    if (f->kind != DA_OBJ)
        return rp_bad(p, "tool_choice: must be auto, none, required or an object");
    if (!dl_anthropic_fields(&j, c, 4))
        return rp_json(p, &j);
    if (c[0].kind != DA_STR)
        return rp_bad(p, "tool_choice.type: required string");
    if (dl_anthropic_is(&j, &c[0], "function")) {
        r->tool_choice = DL_TOOL_CHOICE_NAMED;
        return rp_need_str(p, &j, &c[1], "tool_choice", &r->tool_choice_name);
    }
    if (dl_anthropic_is(&j, &c[0], "allowed_tools")) {
        if (dl_anthropic_is(&j, &c[2], "auto"))
            r->tool_choice = DL_TOOL_CHOICE_AUTO;
        else if (dl_anthropic_is(&j, &c[2], "required"))
            r->tool_choice = DL_TOOL_CHOICE_REQUIRED;
        else
            return rp_bad(p, "tool_choice.mode: must be auto or required");
        if (c[3].kind != DA_ARR)
            return rp_bad(p, "tool_choice.tools: required array");
        p->allowed = raw_of(&j, &c[3]);
        return GW_OK;
    }
    /* a hosted or custom tool forced: only a Responses upstream has it */
    return rp_extra(p, GW_STR_LIT("tool_choice"), raw_of(&j, f));
}

/* Whether tool <t> is among the allowed_tools entries (function and custom tools by
 * name, other tools by type and, when the entry names one, name). */
static enum gw_code
rp_allowed(struct rp *p, const struct dl_tool *t, bool *allowed)
{
    struct dl_anth_field h[] = {DL_ANTH_FIELD("type")};
    struct gw_str type = GW_STR_LIT("function");
    struct dl_json j, tj;
    bool first = true;
    int r;

    *allowed = false;
    if (t->freeform.len)
        type = GW_STR_LIT("custom");
    if (t->hosted.len) {
        dl_json_init(&tj, t->hosted.ptr, t->hosted.len);
        if (!dl_anthropic_fields(&tj, h, 1) || h[0].kind != DA_STR)
            return rp_json(p, &tj);
        if (!rp_str(p, &tj, &h[0].str, &type))
            return GW_E_NOMEM;
    }
    dl_json_init(&j, p->allowed.ptr, p->allowed.len);
    if (!dl_json_arr_enter(&j))
        return rp_json(p, &j);
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        struct dl_anth_field e[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("name")};
        struct gw_str et, en;

        if (dl_json_peek(&j) != '{')
            return rp_bad(p, "tool_choice.tools: must hold objects");
        if (!dl_anthropic_fields(&j, e, 2))
            return rp_json(p, &j);
        if (e[0].kind != DA_STR)
            return rp_bad(p, "tool_choice.tools[].type: required string");
        if (!rp_str(p, &j, &e[0].str, &et))
            return GW_E_NOMEM;
        if (!gw_str_eq(et, type))
            continue;
        if (e[1].kind != DA_STR) {
            if (t->hosted.len)
                *allowed = true;
            continue;
        }
        if (!rp_str(p, &j, &e[1].str, &en))
            return GW_E_NOMEM;
        if (gw_str_eq(en, t->name))
            *allowed = true;
    }
    return r == 0 ? GW_OK : rp_json(p, &j);
}

/* tool_choice allowed_tools: r->tools keeps the tools it allows, in order. */
static enum gw_code
rp_filter_tools(struct rp *p)
{
    struct dl_request *r = p->r;
    size_t k, n = 0;

    for (k = 0; k < r->n_tools; k++) {
        bool allowed;
        enum gw_code rc = rp_allowed(p, &r->tools[k], &allowed);

        if (rc != GW_OK)
            return rc;
        if (allowed)
            r->tools[n++] = r->tools[k];
    }
    r->n_tools = n;
    return GW_OK;
}

/* ---- parse: text, reasoning and the rest ---- */

static enum gw_code
rp_format(struct rp *p, const struct dl_json *tj, const struct dl_json_str *key, size_t at,
          size_t end)
{
    struct dl_anth_field f[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("name"),
                                DL_ANTH_FIELD("schema"), DL_ANTH_FIELD("strict"),
                                DL_ANTH_FIELD("description")};
    struct dl_request *r = p->r;
    struct dl_json j = dl_anthropic_at(tj, at);
    struct gw_str raw = {tj->s + at, end - at};
    enum gw_code rc;

    if (dl_json_peek(&j) == 'n')
        return GW_OK;
    if (dl_json_peek(&j) != '{')
        return rp_bad(p, "text.format: must be an object");
    if (!dl_anthropic_fields(&j, f, 5))
        return rp_json(p, &j);
    if (f[0].kind != DA_STR)
        return rp_bad(p, "text.format.type: required string");
    if (dl_anthropic_is(&j, &f[0], "text")) {
        r->format = DL_FORMAT_TEXT;
        return GW_OK;
    }
    if (dl_anthropic_is(&j, &f[0], "json_object")) {
        r->format = DL_FORMAT_JSON_OBJECT;
        return GW_OK;
    }
    if (!dl_anthropic_is(&j, &f[0], "json_schema"))
        return rp_extra_sub(p, "text", tj, key, raw); /* a format newer than this file */
    r->format = DL_FORMAT_JSON_SCHEMA;
    rc = rp_need_str(p, &j, &f[1], "text.format", &r->format_name);
    if (rc != GW_OK)
        return rc;
    if (f[2].kind != DA_OBJ)
        return rp_bad(p, "text.format.schema: required object");
    r->format_schema = raw_of(&j, &f[2]);
    if (f[3].kind != DA_TRUE && f[3].kind != DA_FALSE && !is_none(&f[3]))
        return rp_bad(p, "text.format.strict: must be a boolean");
    r->format_strict = f[3].kind == DA_TRUE;
    if (f[4].kind == DA_STR)
        return rp_extra(p, GW_STR_LIT("text.format.description"), raw_of(&j, &f[4]));
    return GW_OK;
}

/* The members of object <f> ("text" or "reasoning"): <own> is read by <fn>, every other
 * non-null one is kept as the extra "<prefix>.<member>". */
typedef enum gw_code (*rp_member_fn)(struct rp *p, const struct dl_json *j,
                                     const struct dl_json_str *key, size_t at, size_t end);

static enum gw_code
rp_members(struct rp *p, const struct dl_anth_field *f, const char *prefix, const char *own,
           rp_member_fn fn)
{
    struct dl_json j = dl_anthropic_at(&p->j, f->at);
    struct dl_json_str key;
    bool first = true;
    int r;

    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_OBJ)
        return rp_bad(p, "%s: must be an object", prefix);
    if (!dl_json_obj_enter(&j))
        return rp_json(p, &j);
    while ((r = dl_json_obj_next(&j, &first, &key)) == 1) {
        size_t at = j.i;
        bool null = dl_json_peek(&j) == 'n';
        enum gw_code rc;

        if (!dl_json_skip(&j, NULL))
            return rp_json(p, &j);
        if (dl_json_key_is(&j, &key, own, strlen(own)))
            rc = fn(p, &j, &key, at, j.i);
        else if (!null)
            rc = rp_extra_sub(p, prefix, &j, &key, (struct gw_str){j.s + at, j.i - at});
        else
            rc = GW_OK;
        if (rc != GW_OK)
            return rc;
    }
    return r == 0 ? GW_OK : rp_json(p, &j);
}

static enum gw_code
rp_effort(struct rp *p, const struct dl_json *rj, const struct dl_json_str *key, size_t at,
          size_t end)
{
    struct dl_json j = dl_anthropic_at(rj, at);
    struct dl_json_str s;
    struct dl_request *r = p->r;

    (void)key;
    (void)end;
    if (dl_json_peek(&j) == 'n')
        return GW_OK;
    if (dl_json_peek(&j) != '"')
        return rp_bad(p, "reasoning.effort: must be a string");
    if (!dl_json_string(&j, &s))
        return rp_json(p, &j);
    if (!rp_str(p, &j, &s, &r->reasoning_effort))
        return GW_E_NOMEM;
    r->thinking = !gw_str_eq(r->reasoning_effort, GW_STR_LIT("none"));
    return GW_OK;
}

static enum gw_code
rp_include(struct rp *p, const struct dl_anth_field *f)
{
    struct dl_json j = dl_anthropic_at(&p->j, f->at);
    bool first = true;
    size_t k = 0;
    int r;

    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_ARR)
        return rp_bad(p, "include: must be an array of strings");
    if (!dl_json_arr_enter(&j))
        return rp_json(p, &j);
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        struct dl_json_str s;

        if (dl_json_peek(&j) != '"')
            return rp_bad(p, "include[%zu]: must be a string", k);
        if (!dl_json_string(&j, &s))
            return rp_json(p, &j);
        if (dl_json_key_is(&j, &s, "message.output_text.logprobs", 28))
            p->r->needs |= DL_NEED_F_LOGPROBS;
        k++;
    }
    if (r != 0)
        return rp_json(p, &j);
    return k ? rp_extra(p, GW_STR_LIT("include"), raw_of(&p->j, f)) : GW_OK;
}

/* A number field: <*has> and <*out> when given (null: not given). */
static enum gw_code
rp_number(struct rp *p, const struct dl_anth_field *f, bool *has, double *out)
{
    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_NUM)
        return rp_bad(p, "%s: must be a number", f->name);
    if (!dl_json_num_real(&p->j, &f->num, out))
        return GW_E_NOMEM;
    *has = true;
    return GW_OK;
}

/* A top-level string field (null: not given). */
static enum gw_code
rp_top_str(struct rp *p, const struct dl_anth_field *f, struct gw_str *out)
{
    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_STR)
        return rp_bad(p, "%s: must be a string", f->name);
    return rp_str(p, &p->j, &f->str, out) ? GW_OK : GW_E_NOMEM;
}

/* A boolean field (null: not given): -1, 0 or 1. */
static enum gw_code
rp_bool(struct rp *p, const struct dl_anth_field *f, int *out)
{
    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_TRUE && f->kind != DA_FALSE)
        return rp_bad(p, "%s: must be a boolean", f->name);
    *out = f->kind == DA_TRUE;
    return GW_OK;
}

/* One read field's value at the cursor. */
static enum gw_code
rp_field(struct rp *p, enum read_field rf)
{
    struct dl_anth_field f = {.name = read_fields[rf].name, .len = read_fields[rf].len};
    struct dl_request *r = p->r;
    struct dl_json *j = &p->j;
    int c = dl_json_peek(j), flag = -1;
    int64_t v;
    bool ok;

    f.at = j->i;
    f.kind = c == 'n'   ? DA_NULL
             : c == 't' ? DA_TRUE
             : c == 'f' ? DA_FALSE
             : c == '"' ? DA_STR
             : c == '{' ? DA_OBJ
             : c == '[' ? DA_ARR
                        : DA_NUM;
    if (f.kind == DA_STR)
        ok = dl_json_string(j, &f.str);
    else if (f.kind == DA_NUM)
        ok = dl_json_number(j, &f.num);
    else
        ok = dl_json_skip(j, NULL);
    if (!ok)
        return rp_json(p, j);
    f.end = j->i;
    switch (rf) {
    case RF_MODEL:
        if (f.kind != DA_STR || f.str.dlen == 0)
            return rp_bad(p, "model: required string");
        return rp_str(p, j, &f.str, &r->model) ? GW_OK : GW_E_NOMEM;
    case RF_INPUT: {
        /* items are read in place: the body's cursor is restored after */
        struct dl_json keep = *j;
        enum gw_code rc = rp_input(p, &f);

        *j = keep;
        return rc;
    }
    case RF_INSTRUCTIONS: {
        struct dl_part *s;

        if (f.kind == DA_NULL)
            return GW_OK;
        if (f.kind != DA_STR)
            return rp_bad(p, "instructions: must be a string");
        s = gw_arena_push(p->a, (void **)&r->system, &r->n_system, &p->cap_system, sizeof(*s));
        if (!s || !rp_str(p, j, &f.str, &s->text))
            return GW_E_NOMEM;
        s->kind = DL_PART_TEXT;
        return GW_OK;
    }
    case RF_TOOLS: return rp_tools(p, &f);
    case RF_TOOL_CHOICE: return rp_tool_choice(p, &f);
    case RF_PARALLEL: return rp_bool(p, &f, &r->parallel_tool_calls);
    case RF_TEMPERATURE: return rp_number(p, &f, &r->has_temperature, &r->temperature);
    case RF_TOP_P: return rp_number(p, &f, &r->has_top_p, &r->top_p);
    case RF_MAX_OUTPUT:
        if (f.kind == DA_NULL)
            return GW_OK;
        if (f.kind != DA_NUM || !dl_json_int(j, &f.num, &v) || v <= 0)
            return rp_bad(p, "max_output_tokens: must be a positive integer");
        r->max_output_tokens = (uint64_t)v;
        return GW_OK;
    case RF_TEXT: return rp_members(p, &f, "text", "format", rp_format);
    case RF_REASONING: return rp_members(p, &f, "reasoning", "effort", rp_effort);
    case RF_STREAM: {
        enum gw_code rc = rp_bool(p, &f, &flag);

        r->stream = flag == 1;
        return rc;
    }
    case RF_STORE: return rp_bool(p, &f, &r->store);
    case RF_PREVIOUS: return rp_top_str(p, &f, &r->previous_response_id);
    case RF_CACHE_KEY: return rp_top_str(p, &f, &r->prompt_cache_key);
    case RF_USER: return rp_top_str(p, &f, &r->user);
    case RF_METADATA:
        if (f.kind == DA_NULL)
            return GW_OK;
        if (f.kind != DA_OBJ)
            return rp_bad(p, "metadata: must be an object");
        r->metadata = raw_of(j, &f);
        return GW_OK;
    case RF_TOP_LOGPROBS:
        if (f.kind == DA_NULL)
            return GW_OK;
        if (f.kind != DA_NUM || !dl_json_int(j, &f.num, &v) || v < 0)
            return rp_bad(p, "top_logprobs: must be a non-negative integer");
        if (v > 0)
            r->needs |= DL_NEED_F_LOGPROBS;
        return rp_extra(p, GW_STR_LIT("top_logprobs"), raw_of(j, &f));
    case RF_INCLUDE: return rp_include(p, &f);
    case RF__COUNT: break;
    }
    return GW_OK;
}

enum gw_code
dl_responses_request_parse(struct gw_arena *a, const char *body, size_t len, struct dl_request *out,
                           struct gw_buf *why)
{
    struct rp p = {.a = a, .r = out, .why = why};
    struct dl_json *j = &p.j;
    struct dl_json_str key;
    const char *dup = NULL;
    unsigned seen = 0;
    bool first = true;
    size_t k;
    int r;

    memset(out, 0, sizeof(*out));
    out->source = DL_SHAPE_RESPONSES;
    out->parallel_tool_calls = -1;
    out->store = -1;
    if (len == 0)
        return rp_bad(&p, "body: empty, expected a JSON object");
    dl_json_init(j, body, len);
    if (dl_json_peek(j) != '{') {
        /* a valid non-object gets its own reason */
        if (!dl_json_skip(j, NULL) || !dl_json_end(j))
            return rp_json(&p, j);
        return rp_bad(&p, "body: must be a JSON object");
    }
    if (!dl_json_obj_enter(j))
        return rp_json(&p, j);
    while ((r = dl_json_obj_next(j, &first, &key)) == 1) {
        unsigned f;
        enum gw_code rc;

        for (f = 0; f < RF__COUNT; f++)
            if (dl_json_key_is(j, &key, read_fields[f].name, read_fields[f].len))
                break;
        if (f < RF__COUNT && !(seen & (1u << f))) {
            seen |= 1u << f;
            rc = rp_field(&p, (enum read_field)f);
        } else if (f < RF__COUNT) {
            /* one body per request: the second copy is refused below, once the whole
             * body is known to be JSON */
            if (!dup)
                dup = read_fields[f].name;
            rc = dl_json_skip(j, NULL) ? GW_OK : rp_json(&p, j);
        } else {
            struct gw_str name;
            size_t at = j->i;
            bool null = dl_json_peek(j) == 'n';

            if (!dl_json_skip(j, NULL))
                return rp_json(&p, j);
            if (null)
                continue; /* asks for nothing */
            if (!rp_str(&p, j, &key, &name))
                return GW_E_NOMEM;
            /* dotted names are the extras of "text" and "reasoning" members */
            if (memchr(name.ptr, '.', name.len))
                return rp_bad(&p, "body: a parameter name holding '.' is not a Responses "
                                  "parameter");
            rc = rp_extra(&p, name, (struct gw_str){body + at, j->i - at});
        }
        if (rc != GW_OK)
            return rc;
    }
    if (r < 0 || !dl_json_end(j))
        return rp_json(&p, j);
    if (dup)
        return rp_bad(&p, "duplicate key \"%s\" in the request body", dup);
    if (!(seen & (1u << RF_MODEL)))
        return rp_bad(&p, "model: required string");
    for (k = 0; k < p.n_late_system; k++) {
        struct dl_part *sp =
            gw_arena_push(a, (void **)&out->system, &out->n_system, &p.cap_system, sizeof(*sp));

        if (!sp)
            return GW_E_NOMEM;
        *sp = p.late_system[k];
    }
    return p.allowed.len ? rp_filter_tools(&p) : GW_OK;
}

/* ---- render ---- */

struct rr {
    const struct dl_request *r;
    struct dl_dropped *dropped;
    struct gw_buf *out;
    struct gw_buf *why;
    bool own; /* the request was parsed from Responses */
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

/* Appends <s> JSON-escaped, without its quotes. */
static enum gw_code
rr_json_inner(struct rr *w, struct gw_str s)
{
    return gw_buf_append_json_inner(w->out, s);
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

/* The extra named <name> of the request, or NULL. */
static const struct dl_extra *
extra_of(const struct dl_request *r, const char *name)
{
    size_t k;

    for (k = 0; k < r->n_extras; k++)
        if (gw_str_eq(r->extras[k].name, gw_str_c(name)))
            return &r->extras[k];
    return NULL;
}

static bool
has_prefix(struct gw_str s, const char *prefix)
{
    size_t n = strlen(prefix);

    return s.len >= n && memcmp(s.ptr, prefix, n) == 0;
}

/* Writes the own extras whose names start with <prefix> ("text." ...) as members of the
 * object being written, "key":raw after a comma when <*comma>; those of its "format"
 * (written by rr_text) excepted. */
static enum gw_code
rr_sub_extras(struct rr *w, const char *prefix, bool *comma)
{
    size_t n = strlen(prefix), k;

    for (k = 0; k < w->r->n_extras; k++) {
        const struct dl_extra *x = &w->r->extras[k];
        struct gw_str key = {x->name.ptr + n, x->name.len - n};

        if (!has_prefix(x->name, prefix) || gw_str_eq(key, GW_STR_LIT("format")) ||
            has_prefix(key, "format."))
            continue;
        if (*comma)
            TRY(rr_lit(w, ","));
        *comma = true;
        TRY(rr_json(w, key));
        TRY(rr_lit(w, ":"));
        TRY(gw_buf_append_str(w->out, gw_str_trim(x->raw)));
    }
    return GW_OK;
}

/* ---- render: content ---- */

/* A text document (text/... data, as a Messages plain-text document arrives) as an
 * input_text part, its title on a first line. *done false (nothing written) when it is
 * not one, or its data is not base64 of UTF-8 text. */
static enum gw_code
rr_text_document(struct rr *w, const struct dl_part *p, bool *done)
{
    struct gw_buf t = {0};
    enum gw_code rc = GW_OK;

    *done = false;
    if (p->media_type.len < 5 || strncasecmp(p->media_type.ptr, "text/", 5) != 0)
        return GW_OK;
    if (p->text.len &&
        (gw_buf_append_str(&t, p->text) != GW_OK || gw_buf_append_cstr(&t, "\n\n") != GW_OK))
        rc = GW_E_NOMEM;
    if (rc == GW_OK && gw_base64_decode(p->data, &t) &&
        gw_utf8_valid((struct gw_str){t.data, t.len})) {
        *done = true;
        rc = rr_lit(w, "{\"type\":\"input_text\",\"text\":");
        if (rc == GW_OK)
            rc = rr_json(w, (struct gw_str){t.len ? t.data : "", t.len});
        if (rc == GW_OK)
            rc = rr_lit(w, "}");
    }
    gw_buf_fini(&t);
    return rc;
}

/* "data:<media type>;base64,<data>" as a JSON string. */
static enum gw_code
rr_data_url(struct rr *w, const struct dl_part *p)
{
    TRY(rr_lit(w, "\"data:"));
    TRY(rr_json_inner(w, p->media_type));
    TRY(rr_lit(w, ";base64,"));
    TRY(rr_json_inner(w, p->data));
    return rr_lit(w, "\"");
}

/* One TEXT, IMAGE or DOCUMENT part of a message item's content; <assistant>: of an
 * assistant message (text only). A Responses client's own file goes as it came. */
static enum gw_code
rr_content(struct rr *w, const struct dl_part *p, bool assistant)
{
    bool done;

    if (p->cache)
        rr_drop(w, "cache_control");
    switch (p->kind) {
    case DL_PART_TEXT:
        TRY(rr_lit(w, assistant ? "{\"type\":\"output_text\",\"text\":"
                                : "{\"type\":\"input_text\",\"text\":"));
        TRY(rr_json(w, p->text));
        return rr_lit(w, assistant ? ",\"annotations\":[]}" : "}");
    case DL_PART_IMAGE:
        TRY(rr_lit(w, "{\"type\":\"input_image\",\"image_url\":"));
        if (p->url.len)
            TRY(rr_json(w, p->url));
        else if (p->data.len)
            TRY(rr_data_url(w, p));
        else
            return rr_refuse(w, "input: an image with neither a URL nor data");
        if (p->detail.len)
            TRY(rr_member(w, "detail", p->detail));
        return rr_lit(w, "}");
    case DL_PART_DOCUMENT:
        if (p->data.len) {
            done = false;
            if (!w->own)
                TRY(rr_text_document(w, p, &done));
            if (done)
                return GW_OK;
            TRY(rr_lit(w, "{\"type\":\"input_file\",\"filename\":"));
            if (p->text.len)
                TRY(rr_json(w, p->text));
            else
                TRY(rr_lit(w, gw_str_eq_nocase(p->media_type, GW_STR_LIT("application/pdf"))
                                  ? "\"document.pdf\""
                                  : "\"document\""));
            TRY(rr_lit(w, ",\"file_data\":"));
            TRY(rr_data_url(w, p));
            return rr_lit(w, "}");
        }
        if (!p->url.len)
            return rr_refuse(w, "input: a document with neither a URL nor data");
        TRY(rr_lit(w, "{\"type\":\"input_file\",\"file_url\":"));
        TRY(rr_json(w, p->url));
        if (p->text.len)
            TRY(rr_member(w, "filename", p->text));
        return rr_lit(w, "}");
    case DL_PART_TOOL_CALL:
    case DL_PART_TOOL_RESULT:
    case DL_PART_REASONING:
    case DL_PART_OTHER: break;
    }
    return GW_OK;
}

/* ---- render: input items ---- */

/* The items being written: whether one was, and whether a message item is open. */
struct items {
    bool any;
    bool open;
};

static enum gw_code
item_start(struct rr *w, struct items *it)
{
    if (it->open) {
        TRY(rr_lit(w, "]}"));
        it->open = false;
    }
    if (it->any)
        TRY(rr_lit(w, ","));
    it->any = true;
    return GW_OK;
}

/* A content part of the message item of <role> being written (one opened if none is). */
static enum gw_code
rr_item_content(struct rr *w, struct items *it, const struct dl_part *p, enum dl_role role)
{
    bool assistant = role == DL_ROLE_ASSISTANT;

    if (assistant && p->kind != DL_PART_TEXT)
        return rr_refuse(w, "input: an assistant message cannot hold an image or a document for "
                            "a Responses model");
    if (it->open) {
        TRY(rr_lit(w, ","));
    } else {
        TRY(item_start(w, it));
        TRY(rr_lit(w, assistant ? "{\"type\":\"message\",\"role\":\"assistant\",\"content\":["
                                : "{\"type\":\"message\",\"role\":\"user\",\"content\":["));
        it->open = true;
    }
    return rr_content(w, p, assistant);
}

static enum gw_code
rr_call(struct rr *w, struct items *it, const struct dl_part *p)
{
    struct gw_str args = gw_str_trim(p->arguments);

    if (p->id.len == 0)
        return rr_refuse(w, "tool_calls: a tool call without an id cannot be sent to a "
                            "Responses model");
    TRY(item_start(w, it));
    if (dl_request_freeform(w->r, p->name)) {
        /* a free-form tool's call: its text, as Responses writes it */
        TRY(rr_lit(w, "{\"type\":\"custom_tool_call\",\"call_id\":"));
        TRY(rr_json(w, p->id));
        TRY(rr_member(w, "name", p->name));
        TRY(rr_lit(w, ",\"input\":"));
        TRY(dl_responses_freeform_input(w->out, args));
        return rr_lit(w, "}");
    }
    TRY(rr_lit(w, "{\"type\":\"function_call\",\"call_id\":"));
    TRY(rr_json(w, p->id));
    TRY(rr_member(w, "name", p->name));
    TRY(rr_member(w, "arguments", args.len ? args : GW_STR_LIT("{}")));
    if (p->cache)
        rr_drop(w, "cache_control");
    return rr_lit(w, "}");
}

/* Whether a tool result's content needs parts (it holds media), not one string. */
static bool
result_has_media(const struct dl_part *p)
{
    size_t k;

    for (k = 0; k < p->n_content; k++)
        if (p->content[k].kind == DL_PART_IMAGE || p->content[k].kind == DL_PART_DOCUMENT)
            return true;
    return false;
}

/* Whether the call <call_id> answers is one of a free-form tool. */
static bool
answers_freeform(const struct dl_request *r, struct gw_str call_id)
{
    size_t i, k;

    for (i = 0; i < r->n_messages; i++)
        for (k = 0; k < r->messages[i].n_parts; k++) {
            const struct dl_part *p = &r->messages[i].parts[k];

            if (p->kind == DL_PART_TOOL_CALL && gw_str_eq(p->id, call_id))
                return dl_request_freeform(r, p->name) != NULL;
        }
    return false;
}

static enum gw_code
rr_result(struct rr *w, struct items *it, const struct dl_part *p)
{
    bool first = true;
    size_t k;

    if (p->call_id.len == 0)
        return rr_refuse(w, "input: a tool result without the id of its call cannot be sent to "
                            "a Responses model");
    for (k = 0; k < p->n_content; k++)
        if (p->content[k].kind == DL_PART_OTHER)
            return rr_refuse(w,
                             "input: %.*s parts in a tool result cannot be sent to a "
                             "Responses model",
                             (int)(p->content[k].name.len > 64 ? 64 : p->content[k].name.len),
                             p->content[k].name.ptr);
    if (p->is_error)
        rr_drop(w, "is_error");
    if (p->cache)
        rr_drop(w, "cache_control");
    TRY(item_start(w, it));
    TRY(rr_lit(w, answers_freeform(w->r, p->call_id)
                      ? "{\"type\":\"custom_tool_call_output\",\"call_id\":"
                      : "{\"type\":\"function_call_output\",\"call_id\":"));
    TRY(rr_json(w, p->call_id));
    if (!result_has_media(p)) {
        /* texts joined: the string output every Responses server reads */
        TRY(rr_lit(w, ",\"output\":\""));
        for (k = 0; k < p->n_content; k++) {
            if (p->content[k].kind != DL_PART_TEXT)
                continue;
            if (!first)
                TRY(rr_lit(w, "\\n\\n"));
            first = false;
            TRY(rr_json_inner(w, p->content[k].text));
        }
        return rr_lit(w, "\"}");
    }
    TRY(rr_lit(w, ",\"output\":["));
    for (k = 0; k < p->n_content; k++) {
        const struct dl_part *c = &p->content[k];

        if (c->kind == DL_PART_TEXT && c->text.len == 0)
            continue;
        if (c->kind != DL_PART_TEXT && c->kind != DL_PART_IMAGE && c->kind != DL_PART_DOCUMENT)
            continue;
        if (!first)
            TRY(rr_lit(w, ","));
        first = false;
        TRY(rr_content(w, c, false));
    }
    return rr_lit(w, "]}");
}

/* Whether reasoning part <p> goes back: only what a Responses upstream made (its
 * encrypted content, or for a Responses client an item it stored by id). */
static bool
reasoning_renders(const struct rr *w, const struct dl_part *p)
{
    return !p->redacted && p->sig_shape == DL_SHAPE_RESPONSES &&
           (p->signature.len > 0 || (w->own && p->id.len > 0));
}

static enum gw_code
rr_reasoning(struct rr *w, struct items *it, const struct dl_part *p)
{
    if (!reasoning_renders(w, p)) {
        rr_drop(w, "reasoning");
        return GW_OK;
    }
    TRY(item_start(w, it));
    TRY(rr_lit(w, "{\"type\":\"reasoning\""));
    /* without the item's own id (another shape's client kept only the encrypted
     * content) none: with store off the API would look an id up and not find it */
    if (p->id.len)
        TRY(rr_member(w, "id", p->id));
    TRY(rr_lit(w, ",\"summary\":["));
    if (p->text.len) {
        TRY(rr_lit(w, "{\"type\":\"summary_text\",\"text\":"));
        TRY(rr_json(w, p->text));
        TRY(rr_lit(w, "}"));
    }
    TRY(rr_lit(w, "]"));
    if (p->signature.len)
        TRY(rr_member(w, "encrypted_content", p->signature));
    return rr_lit(w, "}");
}

static enum gw_code
rr_other(struct rr *w, struct items *it, const struct dl_part *p)
{
    if (!w->own || !dl_json_is_object(p->data, NULL))
        return rr_refuse(w, "input: %.*s parts cannot be sent to a Responses model",
                         (int)(p->name.len > 64 ? 64 : p->name.len), p->name.ptr);
    TRY(item_start(w, it));
    return gw_buf_append_str(w->out, gw_str_trim(p->data));
}

/* Message <i>: its parts in order, runs of content in message items. */
static enum gw_code
rr_message(struct rr *w, struct items *it, size_t i)
{
    const struct dl_message *m = &w->r->messages[i];
    size_t k;

    if (m->name.len)
        rr_drop(w, "name");
    for (k = 0; k < m->n_parts; k++) {
        const struct dl_part *p = &m->parts[k];

        switch (p->kind) {
        case DL_PART_TEXT:
            if (p->text.len) /* an empty text says nothing */
                TRY(rr_item_content(w, it, p, m->role));
            break;
        case DL_PART_IMAGE:
        case DL_PART_DOCUMENT: TRY(rr_item_content(w, it, p, m->role)); break;
        case DL_PART_TOOL_CALL:
            if (m->role != DL_ROLE_ASSISTANT)
                return rr_refuse(w, "input: a tool call outside an assistant message");
            TRY(rr_call(w, it, p));
            break;
        case DL_PART_TOOL_RESULT: TRY(rr_result(w, it, p)); break;
        case DL_PART_REASONING: TRY(rr_reasoning(w, it, p)); break;
        case DL_PART_OTHER: TRY(rr_other(w, it, p)); break;
        }
    }
    if (it->open) {
        TRY(rr_lit(w, "]}"));
        it->open = false;
    }
    return GW_OK;
}

static enum gw_code
rr_input(struct rr *w)
{
    struct items it = {false, false};
    size_t i;

    TRY(rr_lit(w, ",\"input\":["));
    for (i = 0; i < w->r->n_messages; i++)
        TRY(rr_message(w, &it, i));
    return rr_lit(w, "]");
}

static enum gw_code
rr_instructions(struct rr *w)
{
    const struct dl_request *r = w->r;
    bool first = true;
    size_t k;

    for (k = 0; k < r->n_system; k++) {
        struct gw_str t = r->system[k].text;

        if (r->system[k].cache)
            rr_drop(w, "cache_control");
        if (t.len == 0)
            continue;
        TRY(rr_lit(w, first ? ",\"instructions\":\"" : "\\n\\n"));
        first = false;
        TRY(rr_json_inner(w, t));
    }
    return first ? GW_OK : rr_lit(w, "\"");
}

/* ---- render: tools and the rest ---- */

static enum gw_code
rr_tool_choice(struct rr *w)
{
    const struct dl_request *r = w->r;
    const struct dl_extra *x = w->own ? extra_of(r, "tool_choice") : NULL;

    if (x) { /* a hosted tool forced, as the client wrote it */
        TRY(rr_lit(w, ",\"tool_choice\":"));
        return gw_buf_append_str(w->out, gw_str_trim(x->raw));
    }
    switch (r->tool_choice) {
    case DL_TOOL_CHOICE_UNSET: return GW_OK;
    case DL_TOOL_CHOICE_AUTO: return rr_lit(w, ",\"tool_choice\":\"auto\"");
    case DL_TOOL_CHOICE_NONE: return rr_lit(w, ",\"tool_choice\":\"none\"");
    case DL_TOOL_CHOICE_REQUIRED: return rr_lit(w, ",\"tool_choice\":\"required\"");
    case DL_TOOL_CHOICE_NAMED:
        TRY(rr_lit(w, ",\"tool_choice\":{\"type\":\"function\""));
        TRY(rr_member(w, "name", r->tool_choice_name));
        return rr_lit(w, "}");
    }
    return GW_OK;
}

static enum gw_code
rr_tools(struct rr *w)
{
    const struct dl_request *r = w->r;
    size_t k, n_offered = w->own ? r->n_offered : 0;

    if (r->n_tools == 0 && !w->own) {
        /* without tools they ask nothing of the model (OpenAI refuses them alone) */
        if (r->tool_choice != DL_TOOL_CHOICE_UNSET)
            rr_drop(w, "tool_choice");
        if (r->parallel_tool_calls != -1)
            rr_drop(w, "parallel_tool_calls");
        return GW_OK;
    }
    if (r->n_tools + n_offered)
        TRY(rr_lit(w, ",\"tools\":["));
    for (k = 0; k < n_offered; k++) { /* the client's own namespace and tool_search tools */
        TRY(rr_lit(w, k ? "," : ""));
        TRY(gw_buf_append_str(w->out, gw_str_trim(r->offered[k].hosted)));
    }
    for (k = 0; k < r->n_tools; k++) {
        const struct dl_tool *t = &r->tools[k];

        if (k + n_offered)
            TRY(rr_lit(w, ","));
        if (t->cache)
            rr_drop(w, "cache_control");
        if (t->hosted.len || (w->own && t->freeform.len)) {
            TRY(gw_buf_append_str(w->out, gw_str_trim(t->hosted.len ? t->hosted : t->freeform)));
            continue;
        }
        TRY(rr_lit(w, "{\"type\":\"function\",\"name\":"));
        TRY(rr_json(w, t->name));
        if (t->description.len)
            TRY(rr_member(w, "description", t->description));
        TRY(rr_lit(w, ",\"parameters\":"));
        TRY(t->parameters.len ? gw_buf_append_str(w->out, gw_str_trim(t->parameters))
                              : rr_lit(w, "{\"type\":\"object\",\"properties\":{}}"));
        TRY(rr_lit(w, t->strict ? ",\"strict\":true}" : ",\"strict\":false}"));
    }
    if (r->n_tools + n_offered)
        TRY(rr_lit(w, "]"));
    TRY(rr_tool_choice(w));
    if (r->parallel_tool_calls != -1)
        TRY(rr_lit(w, r->parallel_tool_calls ? ",\"parallel_tool_calls\":true"
                                             : ",\"parallel_tool_calls\":false"));
    return GW_OK;
}

static enum gw_code
rr_sampling(struct rr *w, uint64_t max_output_default)
{
    const struct dl_request *r = w->r;
    uint64_t max = r->max_output_tokens ? r->max_output_tokens : max_output_default;

    if (r->has_temperature) {
        TRY(rr_lit(w, ",\"temperature\":"));
        TRY(dl_anthropic_append_double(w->out, r->temperature));
    }
    if (r->has_top_p) {
        TRY(rr_lit(w, ",\"top_p\":"));
        TRY(dl_anthropic_append_double(w->out, r->top_p));
    }
    if (r->has_top_k)
        rr_drop(w, "top_k");
    if (r->has_seed)
        rr_drop(w, "seed");
    if (r->has_presence)
        rr_drop(w, "presence_penalty");
    if (r->has_frequency)
        rr_drop(w, "frequency_penalty");
    if (r->n_stop)
        rr_drop(w, "stop");
    if (max) {
        /* a Responses client's own limit goes as it wrote it */
        if (max < DL_RESPONSES_MIN_OUTPUT_TOKENS && !w->own)
            max = DL_RESPONSES_MIN_OUTPUT_TOKENS;
        TRY(rr_lit(w, ",\"max_output_tokens\":"));
        TRY(gw_buf_append_u64(w->out, max));
    }
    return GW_OK;
}

/* text: {"format":{...}} and, for a Responses client, its other members. */
static enum gw_code
rr_text(struct rr *w)
{
    const struct dl_request *r = w->r;
    const struct dl_extra *raw = w->own ? extra_of(r, "text.format") : NULL;
    const struct dl_extra *desc = w->own ? extra_of(r, "text.format.description") : NULL;
    bool comma = false, any = r->format != DL_FORMAT_TEXT || raw;
    size_t k;

    for (k = 0; w->own && !any && k < r->n_extras; k++)
        any = has_prefix(r->extras[k].name, "text.");
    if (!any)
        return GW_OK;
    TRY(rr_lit(w, ",\"text\":{"));
    if (raw) {
        TRY(rr_lit(w, "\"format\":"));
        TRY(gw_buf_append_str(w->out, gw_str_trim(raw->raw)));
        comma = true;
    } else if (r->format == DL_FORMAT_JSON_OBJECT) {
        TRY(rr_lit(w, "\"format\":{\"type\":\"json_object\"}"));
        comma = true;
    } else if (r->format == DL_FORMAT_JSON_SCHEMA) {
        TRY(rr_lit(w, "\"format\":{\"type\":\"json_schema\",\"name\":"));
        TRY(rr_json(w, r->format_name.len ? r->format_name : GW_STR_LIT("response")));
        TRY(rr_lit(w, ",\"schema\":"));
        TRY(r->format_schema.len ? gw_buf_append_str(w->out, gw_str_trim(r->format_schema))
                                 : rr_lit(w, "{}"));
        if (desc) {
            TRY(rr_lit(w, ",\"description\":"));
            TRY(gw_buf_append_str(w->out, gw_str_trim(desc->raw)));
        }
        TRY(rr_lit(w, r->format_strict ? ",\"strict\":true}" : ",\"strict\":false}"));
        comma = true;
    }
    if (w->own)
        TRY(rr_sub_extras(w, "text.", &comma));
    return rr_lit(w, "}");
}

/* The effort of a thinking budget (Messages, Gemini): the usual brackets. */
static const char *
effort_of_budget(uint64_t budget)
{
    return budget <= 1024 ? "low" : budget <= 8192 ? "medium" : "high";
}

static enum gw_code
rr_reasoning_settings(struct rr *w)
{
    const struct dl_request *r = w->r;
    bool comma = false, extras = false;
    size_t k;

    for (k = 0; w->own && k < r->n_extras; k++)
        extras |= has_prefix(r->extras[k].name, "reasoning.");
    if (r->reasoning_effort.len || r->thinking_budget || extras) {
        TRY(rr_lit(w, ",\"reasoning\":{"));
        if (r->reasoning_effort.len) {
            TRY(rr_lit(w, "\"effort\":"));
            TRY(rr_json(w, r->reasoning_effort));
            comma = true;
        } else if (r->thinking_budget) {
            TRY(rr_lit(w, "\"effort\":\""));
            TRY(rr_lit(w, effort_of_budget(r->thinking_budget)));
            TRY(rr_lit(w, "\""));
            comma = true;
        }
        if (w->own)
            TRY(rr_sub_extras(w, "reasoning.", &comma));
        TRY(rr_lit(w, "}"));
    }
    /* the reasoning comes back encrypted, so the next turn can send it (store is off) */
    if (r->thinking && !w->own)
        TRY(rr_lit(w, ",\"include\":[\"reasoning.encrypted_content\"]"));
    return GW_OK;
}

static enum gw_code
rr_rest(struct rr *w)
{
    const struct dl_request *r = w->r;
    size_t k;

    if (r->stream)
        TRY(rr_lit(w, ",\"stream\":true"));
    if (!w->own)
        TRY(rr_lit(w, ",\"store\":false"));
    else if (r->store != -1)
        TRY(rr_lit(w, r->store ? ",\"store\":true" : ",\"store\":false"));
    if (r->previous_response_id.len)
        TRY(rr_member(w, "previous_response_id", r->previous_response_id));
    if (r->prompt_cache_key.len)
        TRY(rr_member(w, "prompt_cache_key", r->prompt_cache_key));
    if (r->user.len)
        TRY(rr_member(w, "user", r->user));
    if (r->metadata.len && w->own) {
        TRY(rr_lit(w, ",\"metadata\":"));
        TRY(gw_buf_append_str(w->out, gw_str_trim(r->metadata)));
    } else if (r->metadata.len) {
        rr_drop(w, "metadata");
    }
    for (k = 0; k < r->n_extras; k++) {
        const struct dl_extra *x = &r->extras[k];

        if (!w->own) {
            dl_dropped_add(w->dropped, x->name);
            continue;
        }
        /* the dotted ones are in their objects; tool_choice has its place */
        if (memchr(x->name.ptr, '.', x->name.len) || gw_str_eq(x->name, GW_STR_LIT("tool_choice")))
            continue;
        TRY(rr_lit(w, ","));
        TRY(rr_json(w, x->name));
        TRY(rr_lit(w, ":"));
        TRY(gw_buf_append_str(w->out, gw_str_trim(x->raw)));
    }
    return GW_OK;
}

/* What the Responses API cannot express at all (DESIGN.md 11: refused). */
static enum gw_code
rr_refusals(struct rr *w)
{
    const struct dl_request *r = w->r;
    size_t k;

    if (r->needs & DL_NEED_F_N_CHOICES)
        return rr_refuse(w, "n: a Responses model returns one answer (n must be 1)");
    if (w->own)
        return GW_OK;
    if (r->needs & DL_NEED_F_LOGPROBS)
        return rr_refuse(w, "logprobs: log probabilities cannot be converted from a Responses "
                            "model's answer");
    if (r->needs & DL_NEED_F_AUDIO_OUT)
        return rr_refuse(w, "audio: a Responses model does not produce audio here");
    if (r->needs & DL_NEED_F_IMAGE_OUT)
        return rr_refuse(w, "modalities: a Responses model produces text only here");
    if (r->needs & DL_NEED_F_HOSTED_TOOLS)
        return rr_refuse(w, "tools: hosted tools (web search, code execution, file search, "
                            "computer use) of another API cannot be sent to a Responses model");
    for (k = 0; k < r->n_tools; k++)
        if (r->tools[k].hosted.len)
            return rr_refuse(w, "tools: hosted tools (web search, code execution, file search, "
                                "computer use) of another API cannot be sent to a Responses "
                                "model");
    return GW_OK;
}

static enum gw_code
rr_body(struct rr *w, struct gw_str model, uint64_t max_output_default)
{
    TRY(rr_refusals(w));
    TRY(rr_lit(w, "{\"model\":"));
    TRY(rr_json(w, model));
    TRY(rr_instructions(w));
    TRY(rr_input(w));
    TRY(rr_tools(w));
    TRY(rr_sampling(w, max_output_default));
    TRY(rr_text(w));
    TRY(rr_reasoning_settings(w));
    TRY(rr_rest(w));
    return rr_lit(w, "}");
}

enum gw_code
dl_responses_request_render(const struct dl_request *r, struct gw_str model,
                            uint64_t max_output_default, struct dl_dropped *dropped,
                            struct gw_buf *out, struct gw_buf *why)
{
    struct dl_dropped none = {0};
    struct rr w = {r, dropped ? dropped : &none, out, why, r->source == DL_SHAPE_RESPONSES};
    size_t start = out->len, n_dropped = w.dropped->n;
    bool more = w.dropped->more;
    enum gw_code rc = rr_body(&w, model, max_output_default);

    if (rc != GW_OK) {
        dl_responses_restore(out, start);
        w.dropped->n = n_dropped; /* nothing is dropped from a request not sent */
        w.dropped->more = more;
    }
    return rc;
}
