/* SPDX-License-Identifier: MIT
 * dialects/anthropic_request.c - the Anthropic Messages request (DESIGN.md 11): a
 * client's body parsed into the canonical request (dialects/canon.h), and a canonical
 * request rendered as the body for a Messages upstream.
 *
 * Parse, decisions beyond the obvious field names:
 * - One validating pass (dialects/json_scan.h), no tree: strings are slices of the body
 *   unless they hold escapes (then decoded copies in the arena); tool inputs, tool
 *   schemas, metadata and the fields the hub does not model keep their raw JSON bytes.
 * - Refused with GW_E_BAD_REQUEST and a reason naming the field (never quoting the
 *   body): what is not JSON or not a Messages request (model, messages, roles, content
 *   blocks and the fields parse reads with the wrong type), and a body holding twice a
 *   top-level field parse reads (read_fields below; issue 8: the same-shape relay
 *   forwards the client's bytes, so the fields the gateway acts on must mean one thing).
 *   Other duplicate keys: the last one counts.
 * - max_tokens may be missing (the API requires it; count_tokens bodies have none): a
 *   Messages upstream answers for itself, another one gets the model's default.
 * - A user turn is split in order: each tool_result block becomes a DL_ROLE_TOOL
 *   message of its own, each run of other blocks a DL_ROLE_USER message (so a Chat
 *   upstream sees one "tool" message per result, then the user's text). A "system"
 *   role message (Claude Code sends one after the first user turn) joins the system
 *   parts after those of "system"; members of a message besides role and content (its
 *   per-turn output_config) are not carried.
 * - Blocks: text, image and document (base64, url, and text sources; a text source is
 *   kept as base64 of its text with its media type, rendered back as text), tool_use
 *   (input's JSON text as the arguments), tool_result (string or blocks, is_error),
 *   thinking (text, signature), redacted_thinking (data as the signature). Any other
 *   block (server tool use and results, search results, file or content sources) is a
 *   DL_PART_OTHER part with its raw JSON: only a Messages upstream can take it. Inner
 *   fields the hub does not model (citations, document context, a tool's
 *   input_examples...) are not carried.
 * - cache_control on a block, a system block or a tool: the part's cache hint and ttl.
 * - Tools without a type (or "custom") are functions; any other type (web_search_*,
 *   web_fetch_*, code_execution_*, computer_*, bash_*, text_editor_*, memory_*, MCP
 *   toolsets...) is a hosted tool kept as written, and sets DL_NEED_F_HOSTED_TOOLS:
 *   its schema or its execution is the provider's, so only a Messages upstream can
 *   honour it (DESIGN.md 11 refuses hosted tools elsewhere).
 * - tool_choice auto/any/tool/none; disable_parallel_tool_use true is
 *   parallel_tool_calls 0. thinking enabled (budget_tokens) / adaptive set thinking
 *   (and the budget); disabled leaves it off; another type is kept as an extra.
 *   metadata.user_id is the user, the metadata object kept raw. output_config is kept
 *   as an extra; its format (json_schema) also sets the canonical JSON schema format,
 *   so another shape can enforce it or refuse.
 * - Every other top-level field (context_management, service_tier, container,
 *   mcp_servers, inference_geo, top-level cache_control, ...) is a dl_extra: name and
 *   raw JSON, sent on to a Messages upstream, dropped by name by other renderers.
 *
 * Render (for a Messages upstream), decisions:
 * - max_tokens: the request's, else <max_output_default> (the model's spec), else
 *   DL_ANTHROPIC_FALLBACK_MAX_TOKENS.
 * - system parts: one string joined with "\n\n", or text blocks when one carries a
 *   cache hint. User and tool messages make user turns, assistant messages assistant
 *   turns; consecutive turns of one side merge (the API wants them alternating), so
 *   parallel tool results share one user turn; messages with nothing to send are
 *   skipped; a turn of one plain text is a string. The first turn must be the user's,
 *   and there must be one (refused otherwise: inventing a turn changes what the model
 *   sees).
 * - Images: base64 data, data: URLs with ";base64," and http(s) URLs; anything else, or
 *   an image in an assistant turn, is refused. Tool call arguments must be a JSON
 *   object (blank counts as {}); a tool call or result without an id is refused (the
 *   API pairs them by id: a legacy "function" message has none). Reasoning goes back as thinking
 * only with its signature (or as redacted_thinking); unsigned reasoning is dropped ("reasoning").
 * - Refused (GW_E_UNCONVERTIBLE, naming the field): n > 1, logprobs, audio or image
 *   output, hosted tools and DL_PART_OTHER parts of another shape, a JSON object or
 *   JSON schema response format from another shape.
 * - Dropped and named in <dropped>: seed, presence_penalty, frequency_penalty, top_p
 *   when temperature is set too (newer models refuse both: temperature wins), a tool's
 *   strict, an image's detail, a message's name, tool_choice without tools,
 *   prompt_cache_key, metadata of another shape (its user goes in metadata.user_id),
 *   reasoning_effort (a thinking budget cannot be guessed from it, and thinking
 *   changes what temperature and tool_choice may be), thinking asked without a budget
 *   by another shape, and every extra of another shape. temperature above 1 is
 *   clamped to 1 (Chat's range is 0..2).
 * - A request parsed from Messages renders back to the same request (its extras,
 *   hosted tools and OTHER parts as written), though the pipeline splices same-shape
 *   requests instead.
 * Owns:    nothing; what parse builds lives in the caller's arena.
 * Threads: any; one request on one thread.
 * See:     dialects/anthropic-priv.h, dialects/canon.h,
 *          tests/unit/dialects/test_anthropic_request.c, tests/fuzz/fuzz_messages.c
 */
#include "dialects/anthropic-priv.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define KEY_IS(j, k, lit) dl_json_key_is((j), (k), (lit), sizeof(lit) - 1)
#define PATH_MAX_LEN 96

/* ---- parse ---- */

/* The top-level fields parse reads, and so refuses to see twice (issue 8). A field
 * parse starts reading joins this list. */
enum read_field {
    RF_MODEL,
    RF_MESSAGES,
    RF_SYSTEM,
    RF_TOOLS,
    RF_TOOL_CHOICE,
    RF_MAX_TOKENS,
    RF_STREAM,
    RF_METADATA,
    RF_STOP_SEQUENCES,
    RF_TEMPERATURE,
    RF_TOP_P,
    RF_TOP_K,
    RF_THINKING,
    RF_OUTPUT_CONFIG,
    RF__COUNT,
};

static const struct {
    const char *name;
    size_t len;
} read_fields[RF__COUNT] = {
    [RF_MODEL] = {"model", 5},
    [RF_MESSAGES] = {"messages", 8},
    [RF_SYSTEM] = {"system", 6},
    [RF_TOOLS] = {"tools", 5},
    [RF_TOOL_CHOICE] = {"tool_choice", 11},
    [RF_MAX_TOKENS] = {"max_tokens", 10},
    [RF_STREAM] = {"stream", 6},
    [RF_METADATA] = {"metadata", 8},
    [RF_STOP_SEQUENCES] = {"stop_sequences", 14},
    [RF_TEMPERATURE] = {"temperature", 11},
    [RF_TOP_P] = {"top_p", 5},
    [RF_TOP_K] = {"top_k", 5},
    [RF_THINKING] = {"thinking", 8},
    [RF_OUTPUT_CONFIG] = {"output_config", 13},
};

struct rp {
    struct dl_json j;
    struct gw_arena *a;
    struct dl_request *r;
    struct gw_buf *why;
    size_t cap_messages, cap_system, cap_tools, cap_stop, cap_extras;
    struct dl_part *late_system; /* of "system" role messages: after "system", wherever it is */
    size_t n_late_system, cap_late_system;
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

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* <s> as base64 in the arena; {NULL, 0} when out of memory. */
static struct gw_str
b64_encode(struct gw_arena *a, struct gw_str s)
{
    size_t n = (s.len + 2) / 3 * 4, i, o = 0;
    char *d;

    if (s.len == 0)
        return (struct gw_str){"", 0};
    d = gw_arena_alloc(a, n + 1);
    if (!d)
        return (struct gw_str){NULL, 0};
    for (i = 0; i + 2 < s.len; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)s.ptr[i] << 16 |
                     (uint32_t)(unsigned char)s.ptr[i + 1] << 8 | (unsigned char)s.ptr[i + 2];

        d[o++] = b64_chars[v >> 18];
        d[o++] = b64_chars[(v >> 12) & 63];
        d[o++] = b64_chars[(v >> 6) & 63];
        d[o++] = b64_chars[v & 63];
    }
    if (i < s.len) {
        uint32_t v = (uint32_t)(unsigned char)s.ptr[i] << 16;

        if (i + 1 < s.len)
            v |= (uint32_t)(unsigned char)s.ptr[i + 1] << 8;
        d[o++] = b64_chars[v >> 18];
        d[o++] = b64_chars[(v >> 12) & 63];
        d[o++] = i + 1 < s.len ? b64_chars[(v >> 6) & 63] : '=';
        d[o++] = '=';
    }
    d[o] = '\0';
    return (struct gw_str){d, o};
}

/* A cache_control value <f> onto <part>'s hint. */
static enum gw_code
rp_cache(struct rp *p, const struct dl_json *j, const struct dl_anth_field *f, const char *path,
         bool *cache, struct gw_str *ttl)
{
    struct dl_anth_field cc[] = {DL_ANTH_FIELD("ttl")};
    struct dl_json cj;

    if (f->kind == DA_ABSENT || f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_OBJ)
        return rp_bad(p, "%scache_control: must be an object", path);
    cj = dl_anthropic_at(j, f->at);
    if (!dl_anthropic_fields(&cj, cc, 1))
        return rp_json(p, &cj);
    *cache = true;
    if (cc[0].kind == DA_STR && ttl && !rp_str(p, &cj, &cc[0].str, ttl))
        return GW_E_NOMEM;
    return GW_OK;
}

/* Fields of a content block (one collector for every type). */
enum bf {
    BF_TYPE,
    BF_TEXT,
    BF_SOURCE,
    BF_ID,
    BF_NAME,
    BF_INPUT,
    BF_TOOL_USE_ID,
    BF_CONTENT,
    BF_IS_ERROR,
    BF_CACHE,
    BF_THINKING,
    BF_SIGNATURE,
    BF_DATA,
    BF_TITLE,
    BF__COUNT,
};

#define BLOCK_FIELDS                                                                               \
    {                                                                                              \
        DL_ANTH_FIELD("type"), DL_ANTH_FIELD("text"), DL_ANTH_FIELD("source"),                     \
            DL_ANTH_FIELD("id"), DL_ANTH_FIELD("name"), DL_ANTH_FIELD("input"),                    \
            DL_ANTH_FIELD("tool_use_id"), DL_ANTH_FIELD("content"), DL_ANTH_FIELD("is_error"),     \
            DL_ANTH_FIELD("cache_control"), DL_ANTH_FIELD("thinking"), DL_ANTH_FIELD("signature"), \
            DL_ANTH_FIELD("data"), DL_ANTH_FIELD("title")                                          \
    }

/* A required string field <f> of the block at <path> into <out>. */
static enum gw_code
rp_need_str(struct rp *p, const struct dl_json *j, const struct dl_anth_field *f, const char *path,
            struct gw_str *out)
{
    if (f->kind != DA_STR)
        return rp_bad(p, "%s%s: required string", path, f->name);
    return rp_str(p, j, &f->str, out) ? GW_OK : GW_E_NOMEM;
}

/* The source of an image or document block. *other: the source is one the hub does not
 * model (file, content, ...): the block is kept whole as DL_PART_OTHER. */
static enum gw_code
rp_source(struct rp *p, const struct dl_json *j, const struct dl_anth_field *f, const char *path,
          bool image, struct dl_part *part, bool *other)
{
    struct dl_anth_field s[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("media_type"),
                                DL_ANTH_FIELD("data"), DL_ANTH_FIELD("url")};
    char sub[PATH_MAX_LEN + 8];
    struct dl_json sj;
    enum gw_code rc;

    *other = false;
    if (f->kind != DA_OBJ)
        return rp_bad(p, "%ssource: required object", path);
    sj = dl_anthropic_at(j, f->at);
    if (!dl_anthropic_fields(&sj, s, 4))
        return rp_json(p, &sj);
    gw_path_join(sub, sizeof(sub), path, "source.");
    if (s[0].kind != DA_STR)
        return rp_bad(p, "%stype: required string", sub);
    if (dl_anthropic_is(&sj, &s[0], "base64")) {
        rc = rp_need_str(p, &sj, &s[1], sub, &part->media_type);
        return rc == GW_OK ? rp_need_str(p, &sj, &s[2], sub, &part->data) : rc;
    }
    if (dl_anthropic_is(&sj, &s[0], "url"))
        return rp_need_str(p, &sj, &s[3], sub, &part->url);
    if (!image && dl_anthropic_is(&sj, &s[0], "text")) {
        struct gw_str text;

        rc = rp_need_str(p, &sj, &s[2], sub, &text);
        if (rc != GW_OK)
            return rc;
        part->data = b64_encode(p->a, text);
        if (!part->data.ptr)
            return GW_E_NOMEM;
        if (s[1].kind == DA_STR)
            return rp_str(p, &sj, &s[1].str, &part->media_type) ? GW_OK : GW_E_NOMEM;
        part->media_type = GW_STR_LIT("text/plain");
        return GW_OK;
    }
    *other = true;
    return GW_OK;
}

static enum gw_code rp_blocks(struct rp *p, struct dl_json *j, const char *path, bool in_result,
                              struct dl_part **parts, size_t *n);

/* The content block at the cursor of <j> (path "messages[i].content[k]." style) into
 * <part>. <in_result>: inside a tool_result's content. */
static enum gw_code
rp_block(struct rp *p, struct dl_json *j, const char *path, bool in_result, struct dl_part *part)
{
    struct dl_anth_field f[BF__COUNT] = BLOCK_FIELDS;
    size_t start = j->i;
    bool other = false;
    enum gw_code rc;

    if (dl_json_peek(j) != '{') {
        if (!dl_json_skip(j, NULL))
            return rp_json(p, j);
        return rp_bad(p, "%.*s: must be an object", (int)(strlen(path) - 1), path);
    }
    if (!dl_anthropic_fields(j, f, BF__COUNT))
        return rp_json(p, j);
    if (f[BF_TYPE].kind != DA_STR)
        return rp_bad(p, "%stype: required string", path);
    rc = rp_cache(p, j, &f[BF_CACHE], path, &part->cache, &part->cache_ttl);
    if (rc != GW_OK)
        return rc;
    if (dl_anthropic_is(j, &f[BF_TYPE], "text")) {
        part->kind = DL_PART_TEXT;
        return rp_need_str(p, j, &f[BF_TEXT], path, &part->text);
    }
    if (dl_anthropic_is(j, &f[BF_TYPE], "image") || dl_anthropic_is(j, &f[BF_TYPE], "document")) {
        bool image = dl_anthropic_is(j, &f[BF_TYPE], "image");

        part->kind = image ? DL_PART_IMAGE : DL_PART_DOCUMENT;
        rc = rp_source(p, j, &f[BF_SOURCE], path, image, part, &other);
        if (rc != GW_OK)
            return rc;
        if (!image && !other && f[BF_TITLE].kind == DA_STR &&
            !rp_str(p, j, &f[BF_TITLE].str, &part->text))
            return GW_E_NOMEM;
    } else if (!in_result && dl_anthropic_is(j, &f[BF_TYPE], "tool_use")) {
        part->kind = DL_PART_TOOL_CALL;
        rc = rp_need_str(p, j, &f[BF_ID], path, &part->id);
        if (rc == GW_OK)
            rc = rp_need_str(p, j, &f[BF_NAME], path, &part->name);
        if (rc != GW_OK)
            return rc;
        if (f[BF_INPUT].kind != DA_OBJ)
            return rp_bad(p, "%sinput: required object", path);
        part->arguments = raw_of(j, &f[BF_INPUT]);
    } else if (!in_result && dl_anthropic_is(j, &f[BF_TYPE], "tool_result")) {
        part->kind = DL_PART_TOOL_RESULT;
        rc = rp_need_str(p, j, &f[BF_TOOL_USE_ID], path, &part->call_id);
        if (rc != GW_OK)
            return rc;
        if (f[BF_IS_ERROR].kind == DA_TRUE)
            part->is_error = true;
        else if (f[BF_IS_ERROR].kind != DA_ABSENT && f[BF_IS_ERROR].kind != DA_FALSE &&
                 f[BF_IS_ERROR].kind != DA_NULL)
            return rp_bad(p, "%sis_error: must be a boolean", path);
        if (f[BF_CONTENT].kind == DA_STR) {
            part->content = gw_arena_calloc(p->a, 1, sizeof(*part->content));
            if (!part->content)
                return GW_E_NOMEM;
            part->n_content = 1;
            part->content->kind = DL_PART_TEXT;
            if (!rp_str(p, j, &f[BF_CONTENT].str, &part->content->text))
                return GW_E_NOMEM;
        } else if (f[BF_CONTENT].kind == DA_ARR) {
            struct dl_json cj = dl_anthropic_at(j, f[BF_CONTENT].at);
            char sub[PATH_MAX_LEN + 16];

            gw_path_join(sub, sizeof(sub), path, "content");
            return rp_blocks(p, &cj, sub, true, &part->content, &part->n_content);
        } else if (f[BF_CONTENT].kind != DA_ABSENT && f[BF_CONTENT].kind != DA_NULL) {
            return rp_bad(p, "%scontent: must be a string or an array of content blocks", path);
        }
    } else if (!in_result && dl_anthropic_is(j, &f[BF_TYPE], "thinking")) {
        part->kind = DL_PART_REASONING;
        rc = rp_need_str(p, j, &f[BF_THINKING], path, &part->text);
        if (rc == GW_OK && f[BF_SIGNATURE].kind == DA_STR &&
            !rp_str(p, j, &f[BF_SIGNATURE].str, &part->signature))
            rc = GW_E_NOMEM;
        part->sig_shape = dl_sig_origin(&part->signature, DL_SHAPE_MESSAGES);
        return rc;
    } else if (!in_result && dl_anthropic_is(j, &f[BF_TYPE], "redacted_thinking")) {
        part->kind = DL_PART_REASONING;
        part->redacted = true;
        rc = rp_need_str(p, j, &f[BF_DATA], path, &part->signature);
        part->sig_shape = dl_sig_origin(&part->signature, DL_SHAPE_MESSAGES);
        return rc;
    } else {
        other = true;
    }
    if (other) {
        /* kept as written for a Messages upstream; others refuse it by its type */
        memset(part, 0, sizeof(*part));
        part->kind = DL_PART_OTHER;
        part->data = (struct gw_str){j->s + start, j->i - start};
        if (!rp_str(p, j, &f[BF_TYPE].str, &part->name))
            return GW_E_NOMEM;
    }
    return GW_OK;
}

/* An array of content blocks at the cursor (<path> names it) into <*parts>, <*n>. */
static enum gw_code
rp_blocks(struct rp *p, struct dl_json *j, const char *path, bool in_result, struct dl_part **parts,
          size_t *n)
{
    char sub[PATH_MAX_LEN + 32];
    bool first = true;
    size_t cap = 0, k = 0;
    int r;

    *parts = NULL;
    *n = 0;
    if (!dl_json_arr_enter(j))
        return rp_json(p, j);
    while ((r = dl_json_arr_next(j, &first)) == 1) {
        struct dl_part *part = gw_arena_push(p->a, (void **)parts, n, &cap, sizeof(**parts));
        enum gw_code rc;

        if (!part)
            return GW_E_NOMEM;
        gw_path_item(sub, sizeof(sub), path, k++, ".");
        rc = rp_block(p, j, sub, in_result, part);
        if (rc != GW_OK)
            return rc;
    }
    return r == 0 ? GW_OK : rp_json(p, j);
}

static struct dl_message *
rp_push_message(struct rp *p, enum dl_role role, struct dl_part *parts, size_t n)
{
    struct dl_message *m = gw_arena_push(p->a, (void **)&p->r->messages, &p->r->n_messages,
                                         &p->cap_messages, sizeof(*m));

    if (m) {
        m->role = role;
        m->parts = parts;
        m->n_parts = n;
    }
    return m;
}

/* Text parts <parts> of "system" (or, <late>, of a "system" role message) onto the
 * system parts. */
static enum gw_code
rp_system_parts(struct rp *p, const char *path, const struct dl_part *parts, size_t n, bool late)
{
    size_t k;

    for (k = 0; k < n; k++) {
        struct dl_part *s;

        if (parts[k].kind != DL_PART_TEXT)
            return rp_bad(p, "%s[%zu]: a system prompt holds text blocks only", path, k);
        if (late)
            s = gw_arena_push(p->a, (void **)&p->late_system, &p->n_late_system,
                              &p->cap_late_system, sizeof(*s));
        else
            s = gw_arena_push(p->a, (void **)&p->r->system, &p->r->n_system, &p->cap_system,
                              sizeof(*s));
        if (!s)
            return GW_E_NOMEM;
        *s = parts[k];
    }
    return GW_OK;
}

/* messages[<i>] at the cursor. */
static enum gw_code
rp_message(struct rp *p, size_t i)
{
    struct dl_anth_field f[] = {DL_ANTH_FIELD("role"), DL_ANTH_FIELD("content")};
    struct dl_json *j = &p->j;
    char path[PATH_MAX_LEN];
    struct dl_part *parts;
    enum dl_role role;
    bool system;
    size_t n, k, run;
    enum gw_code rc;

    if (dl_json_peek(j) != '{') {
        if (!dl_json_skip(j, NULL))
            return rp_json(p, j);
        return rp_bad(p, "messages[%zu]: must be an object", i);
    }
    if (!dl_anthropic_fields(j, f, 2))
        return rp_json(p, j);
    system = dl_anthropic_is(j, &f[0], "system");
    if (dl_anthropic_is(j, &f[0], "user") || system)
        role = DL_ROLE_USER;
    else if (dl_anthropic_is(j, &f[0], "assistant"))
        role = DL_ROLE_ASSISTANT;
    else
        return rp_bad(p, "messages[%zu].role: must be user or assistant", i);
    if (f[1].kind == DA_STR) {
        parts = gw_arena_calloc(p->a, 1, sizeof(*parts));
        if (!parts || !rp_str(p, j, &f[1].str, &parts->text))
            return GW_E_NOMEM;
        parts->kind = DL_PART_TEXT;
        n = 1;
    } else if (f[1].kind == DA_ARR) {
        struct dl_json cj = dl_anthropic_at(j, f[1].at);

        gw_path_item(path, sizeof(path), "messages", i, ".content");
        rc = rp_blocks(p, &cj, path, false, &parts, &n);
        if (rc != GW_OK)
            return rc;
    } else {
        return rp_bad(p, "messages[%zu].content: required string or array of content blocks", i);
    }
    if (system) {
        gw_path_item(path, sizeof(path), "messages", i, ".content");
        return rp_system_parts(p, path, parts, n, true);
    }
    if (role == DL_ROLE_ASSISTANT) {
        for (k = 0; k < n; k++)
            if (parts[k].kind == DL_PART_TOOL_RESULT)
                return rp_bad(p,
                              "messages[%zu].content[%zu]: tool_result blocks belong in a "
                              "user message",
                              i, k);
        return rp_push_message(p, role, parts, n) ? GW_OK : GW_E_NOMEM;
    }
    if (n == 0)
        return rp_push_message(p, DL_ROLE_USER, parts, 0) ? GW_OK : GW_E_NOMEM;
    /* a user turn, split in order: one tool message per result, user runs between */
    for (k = 0; k < n; k = run) {
        if (parts[k].kind == DL_PART_TOOL_RESULT) {
            if (!rp_push_message(p, DL_ROLE_TOOL, &parts[k], 1))
                return GW_E_NOMEM;
            run = k + 1;
            continue;
        }
        for (run = k; run < n && parts[run].kind != DL_PART_TOOL_RESULT; run++)
            ;
        if (!rp_push_message(p, DL_ROLE_USER, &parts[k], run - k))
            return GW_E_NOMEM;
    }
    return GW_OK;
}

static enum gw_code
rp_messages(struct rp *p)
{
    struct dl_json *j = &p->j;
    bool first = true;
    size_t i = 0;
    int r;

    if (dl_json_peek(j) != '[') {
        if (!dl_json_skip(j, NULL))
            return rp_json(p, j);
        return rp_bad(p, "messages: required array");
    }
    if (!dl_json_arr_enter(j))
        return rp_json(p, j);
    while ((r = dl_json_arr_next(j, &first)) == 1) {
        enum gw_code rc = rp_message(p, i++);

        if (rc != GW_OK)
            return rc;
    }
    return r == 0 ? GW_OK : rp_json(p, j);
}

static enum gw_code
rp_system(struct rp *p, const struct dl_anth_field *f)
{
    struct dl_part *parts;
    struct dl_json cj;
    size_t n;
    enum gw_code rc;

    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind == DA_STR) {
        struct dl_part *s = gw_arena_push(p->a, (void **)&p->r->system, &p->r->n_system,
                                          &p->cap_system, sizeof(*s));

        if (!s || !rp_str(p, &p->j, &f->str, &s->text))
            return GW_E_NOMEM;
        s->kind = DL_PART_TEXT;
        return GW_OK;
    }
    if (f->kind != DA_ARR)
        return rp_bad(p, "system: must be a string or an array of text blocks");
    cj = dl_anthropic_at(&p->j, f->at);
    rc = rp_blocks(p, &cj, "system", true, &parts, &n);
    return rc == GW_OK ? rp_system_parts(p, "system", parts, n, false) : rc;
}

static enum gw_code
rp_tool(struct rp *p, struct dl_json *j, size_t k)
{
    struct dl_anth_field f[] = {DL_ANTH_FIELD("type"),          DL_ANTH_FIELD("name"),
                                DL_ANTH_FIELD("description"),   DL_ANTH_FIELD("input_schema"),
                                DL_ANTH_FIELD("cache_control"), DL_ANTH_FIELD("strict")};
    struct dl_request *r = p->r;
    char path[PATH_MAX_LEN];
    struct dl_tool *t;
    size_t start = j->i;

    if (dl_json_peek(j) != '{') {
        if (!dl_json_skip(j, NULL))
            return rp_json(p, j);
        return rp_bad(p, "tools[%zu]: must be an object", k);
    }
    if (!dl_anthropic_fields(j, f, 6))
        return rp_json(p, j);
    t = gw_arena_push(p->a, (void **)&r->tools, &r->n_tools, &p->cap_tools, sizeof(*t));
    if (!t)
        return GW_E_NOMEM;
    gw_path_item(path, sizeof(path), "tools", k, ".");
    if (f[0].kind != DA_ABSENT && f[0].kind != DA_NULL && f[0].kind != DA_STR)
        return rp_bad(p, "tools[%zu].type: must be a string", k);
    if (f[0].kind == DA_STR && !dl_anthropic_is(j, &f[0], "custom")) {
        /* a provider's tool: kept as written, only a Messages upstream can take it */
        t->hosted = (struct gw_str){j->s + start, j->i - start};
        r->needs |= DL_NEED_F_HOSTED_TOOLS;
        if (f[1].kind == DA_STR && !rp_str(p, j, &f[1].str, &t->name))
            return GW_E_NOMEM;
        return rp_cache(p, j, &f[4], path, &t->cache, NULL);
    }
    if (f[1].kind != DA_STR || f[1].str.dlen == 0)
        return rp_bad(p, "tools[%zu].name: required string", k);
    if (!rp_str(p, j, &f[1].str, &t->name) ||
        (f[2].kind == DA_STR && !rp_str(p, j, &f[2].str, &t->description)))
        return GW_E_NOMEM;
    if (f[3].kind == DA_OBJ)
        t->parameters = raw_of(j, &f[3]);
    else if (f[3].kind != DA_ABSENT && f[3].kind != DA_NULL)
        return rp_bad(p, "tools[%zu].input_schema: must be a JSON schema object", k);
    t->strict = f[5].kind == DA_TRUE;
    return rp_cache(p, j, &f[4], path, &t->cache, NULL);
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
    struct dl_anth_field c[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("name"),
                                DL_ANTH_FIELD("disable_parallel_tool_use")};
    struct dl_request *r = p->r;
    struct dl_json j;

    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_OBJ)
        return rp_bad(p, "tool_choice: must be an object");
    j = dl_anthropic_at(&p->j, f->at);
    if (!dl_anthropic_fields(&j, c, 3))
        return rp_json(p, &j);
    if (dl_anthropic_is(&j, &c[0], "auto"))
        r->tool_choice = DL_TOOL_CHOICE_AUTO;
    else if (dl_anthropic_is(&j, &c[0], "any"))
        r->tool_choice = DL_TOOL_CHOICE_REQUIRED;
    else if (dl_anthropic_is(&j, &c[0], "none"))
        r->tool_choice = DL_TOOL_CHOICE_NONE;
    else if (dl_anthropic_is(&j, &c[0], "tool")) {
        r->tool_choice = DL_TOOL_CHOICE_NAMED;
        if (c[1].kind != DA_STR)
            return rp_bad(p, "tool_choice.name: required string");
        if (!rp_str(p, &j, &c[1].str, &r->tool_choice_name))
            return GW_E_NOMEM;
    } else {
        return rp_bad(p, "tool_choice.type: must be auto, any, tool or none");
    }
    if (c[2].kind == DA_TRUE)
        r->parallel_tool_calls = 0;
    else if (c[2].kind != DA_ABSENT && c[2].kind != DA_FALSE && c[2].kind != DA_NULL)
        return rp_bad(p, "tool_choice.disable_parallel_tool_use: must be a boolean");
    return GW_OK;
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

/* A positive integer field (null: not given, 0). */
static enum gw_code
rp_count(struct rp *p, const struct dl_json *j, const struct dl_anth_field *f, const char *name,
         uint64_t *out)
{
    int64_t v;

    if (f->kind == DA_NULL || f->kind == DA_ABSENT)
        return GW_OK;
    if (f->kind != DA_NUM || !dl_json_int(j, &f->num, &v) || v <= 0)
        return rp_bad(p, "%s: must be a positive integer", name);
    *out = (uint64_t)v;
    return GW_OK;
}

static enum gw_code
rp_metadata(struct rp *p, const struct dl_anth_field *f)
{
    struct dl_anth_field m[] = {DL_ANTH_FIELD("user_id")};
    struct dl_json j;

    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_OBJ)
        return rp_bad(p, "metadata: must be an object");
    j = dl_anthropic_at(&p->j, f->at);
    if (!dl_anthropic_fields(&j, m, 1))
        return rp_json(p, &j);
    p->r->metadata = raw_of(&p->j, f);
    if (m[0].kind == DA_STR)
        return rp_str(p, &j, &m[0].str, &p->r->user) ? GW_OK : GW_E_NOMEM;
    if (m[0].kind != DA_ABSENT && m[0].kind != DA_NULL)
        return rp_bad(p, "metadata.user_id: must be a string");
    return GW_OK;
}

static enum gw_code
rp_stop(struct rp *p, const struct dl_anth_field *f)
{
    struct dl_request *r = p->r;
    struct dl_json j;
    bool first = true;
    size_t k = 0;
    int c;

    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_ARR)
        return rp_bad(p, "stop_sequences: must be an array of strings");
    j = dl_anthropic_at(&p->j, f->at);
    if (!dl_json_arr_enter(&j))
        return rp_json(p, &j);
    while ((c = dl_json_arr_next(&j, &first)) == 1) {
        struct dl_json_str t;
        struct gw_str *s;

        if (dl_json_peek(&j) != '"')
            return rp_bad(p, "stop_sequences[%zu]: must be a string", k);
        if (!dl_json_string(&j, &t))
            return rp_json(p, &j);
        s = gw_arena_push(p->a, (void **)&r->stop, &r->n_stop, &p->cap_stop, sizeof(*s));
        if (!s || !rp_str(p, &j, &t, s))
            return GW_E_NOMEM;
        k++;
    }
    return c == 0 ? GW_OK : rp_json(p, &j);
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

static enum gw_code
rp_thinking(struct rp *p, const struct dl_anth_field *f)
{
    struct dl_anth_field t[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("budget_tokens")};
    struct dl_request *r = p->r;
    struct dl_json j;

    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_OBJ)
        return rp_bad(p, "thinking: must be an object");
    j = dl_anthropic_at(&p->j, f->at);
    if (!dl_anthropic_fields(&j, t, 2))
        return rp_json(p, &j);
    if (t[0].kind != DA_STR)
        return rp_bad(p, "thinking.type: required string");
    if (dl_anthropic_is(&j, &t[0], "enabled")) {
        r->thinking = true;
        if (t[1].kind == DA_ABSENT)
            return rp_bad(p, "thinking.budget_tokens: required positive integer");
        return rp_count(p, &j, &t[1], "thinking.budget_tokens", &r->thinking_budget);
    }
    if (dl_anthropic_is(&j, &t[0], "adaptive")) {
        r->thinking = true;
        return GW_OK;
    }
    if (dl_anthropic_is(&j, &t[0], "disabled"))
        return GW_OK;
    /* a kind this gateway does not know yet: passed on as written to Messages */
    return rp_extra(p, GW_STR_LIT("thinking"), raw_of(&p->j, f));
}

static enum gw_code
rp_output_config(struct rp *p, const struct dl_anth_field *f)
{
    struct dl_anth_field o[] = {DL_ANTH_FIELD("format")};
    struct dl_anth_field fm[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("schema")};
    struct dl_request *r = p->r;
    struct dl_json j, fj;

    if (f->kind == DA_NULL)
        return GW_OK;
    if (f->kind != DA_OBJ)
        return rp_bad(p, "output_config: must be an object");
    j = dl_anthropic_at(&p->j, f->at);
    if (!dl_anthropic_fields(&j, o, 1))
        return rp_json(p, &j);
    if (o[0].kind == DA_OBJ) {
        fj = dl_anthropic_at(&j, o[0].at);
        if (!dl_anthropic_fields(&fj, fm, 2))
            return rp_json(p, &fj);
        if (dl_anthropic_is(&fj, &fm[0], "json_schema") && fm[1].kind == DA_OBJ) {
            r->format = DL_FORMAT_JSON_SCHEMA;
            r->format_schema = raw_of(&fj, &fm[1]);
        }
    }
    return rp_extra(p, GW_STR_LIT("output_config"), raw_of(&p->j, f));
}

/* One read field's value at the cursor. */
static enum gw_code
rp_field(struct rp *p, enum read_field rf)
{
    struct dl_anth_field f = {.name = read_fields[rf].name, .len = read_fields[rf].len};
    struct dl_request *r = p->r;
    struct dl_json *j = &p->j;
    int c = dl_json_peek(j);
    bool ok;

    if (rf == RF_MESSAGES)
        return rp_messages(p);
    /* the value's kind and span, as the collector reads them */
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
    case RF_SYSTEM: return rp_system(p, &f);
    case RF_TOOLS: return rp_tools(p, &f);
    case RF_TOOL_CHOICE: return rp_tool_choice(p, &f);
    case RF_MAX_TOKENS: return rp_count(p, j, &f, "max_tokens", &r->max_output_tokens);
    case RF_STREAM:
        if (f.kind != DA_TRUE && f.kind != DA_FALSE && f.kind != DA_NULL)
            return rp_bad(p, "stream: must be a boolean");
        r->stream = f.kind == DA_TRUE;
        return GW_OK;
    case RF_METADATA: return rp_metadata(p, &f);
    case RF_STOP_SEQUENCES: return rp_stop(p, &f);
    case RF_TEMPERATURE: return rp_number(p, &f, &r->has_temperature, &r->temperature);
    case RF_TOP_P: return rp_number(p, &f, &r->has_top_p, &r->top_p);
    case RF_TOP_K:
        if (f.kind == DA_NULL)
            return GW_OK;
        if (f.kind != DA_NUM || !dl_json_int(j, &f.num, &r->top_k) || r->top_k < 0)
            return rp_bad(p, "top_k: must be a non-negative integer");
        r->has_top_k = true;
        return GW_OK;
    case RF_THINKING: return rp_thinking(p, &f);
    case RF_OUTPUT_CONFIG: return rp_output_config(p, &f);
    case RF_MESSAGES:
    case RF__COUNT: break;
    }
    return GW_OK;
}

enum gw_code
dl_anthropic_request_parse(struct gw_arena *a, const char *body, size_t len, struct dl_request *out,
                           struct gw_buf *why)
{
    struct rp p = {.a = a, .r = out, .why = why};
    struct dl_json *j = &p.j;
    struct dl_json_str key;
    const char *dup = NULL;
    unsigned seen = 0;
    bool first = true;
    int r;

    memset(out, 0, sizeof(*out));
    out->source = DL_SHAPE_MESSAGES;
    out->parallel_tool_calls = -1;
    out->store = -1; /* a Responses field: unset */
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

            if (!rp_str(&p, j, &key, &name))
                return GW_E_NOMEM;
            if (!dl_json_skip(j, NULL))
                return rp_json(&p, j);
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
    if (!(seen & (1u << RF_MESSAGES)))
        return rp_bad(&p, "messages: required array");
    for (size_t k = 0; k < p.n_late_system; k++) {
        struct dl_part *sp =
            gw_arena_push(a, (void **)&out->system, &out->n_system, &p.cap_system, sizeof(*sp));

        if (!sp)
            return GW_E_NOMEM;
        *sp = p.late_system[k];
    }
    return GW_OK;
}

/* ---- render ---- */

struct rr {
    const struct dl_request *r;
    struct dl_dropped *dropped;
    struct gw_buf *out;
    struct gw_buf *why;
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
    if (w->dropped)
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

static bool
is_json_object(struct gw_str s)
{
    return dl_json_is_object(s, NULL);
}

static enum gw_code
rr_cache(struct rr *w, bool cache, struct gw_str ttl)
{
    if (!cache)
        return GW_OK;
    TRY(rr_lit(w, ",\"cache_control\":{\"type\":\"ephemeral\""));
    if (ttl.len)
        TRY(rr_member(w, "ttl", ttl));
    return rr_lit(w, "}");
}

/* A source for a base64 or URL payload: {"type":"base64","media_type","data"} or
 * {"type":"url","url"}; <what> names it in refusals. */
static enum gw_code
rr_source(struct rr *w, const struct dl_part *p, const char *what)
{
    struct gw_str u = p->url;

    if (p->data.len || !u.len) {
        TRY(rr_lit(w, "{\"type\":\"base64\""));
        TRY(rr_member(w, "media_type", p->media_type));
        TRY(rr_member(w, "data", p->data));
        return rr_lit(w, "}");
    }
    if (gw_str_has_prefix_nocase(u, "data:")) {
        const char *semi = memchr(u.ptr, ';', u.len);
        const char *b64 = memmem(u.ptr, u.len, ";base64,", 8);

        if (!semi || !b64)
            return rr_refuse(w, "%s url: only base64 data URLs can be sent to an Anthropic model",
                             what);
        TRY(rr_lit(w, "{\"type\":\"base64\""));
        TRY(rr_member(w, "media_type", (struct gw_str){u.ptr + 5, (size_t)(semi - u.ptr) - 5}));
        TRY(rr_member(w, "data", (struct gw_str){b64 + 8, (size_t)(u.ptr + u.len - (b64 + 8))}));
        return rr_lit(w, "}");
    }
    if (gw_str_has_prefix_nocase(u, "http://") || gw_str_has_prefix_nocase(u, "https://")) {
        TRY(rr_lit(w, "{\"type\":\"url\""));
        TRY(rr_member(w, "url", u));
        return rr_lit(w, "}");
    }
    return rr_refuse(w, "%s url: only data: and http(s) URLs can be sent to an Anthropic model",
                     what);
}

static enum gw_code
rr_image(struct rr *w, const struct dl_part *p, bool assistant)
{
    if (assistant)
        return rr_refuse(w, "messages: an assistant message cannot hold an image for an "
                            "Anthropic model");
    if (p->detail.len)
        rr_drop(w, "detail");
    TRY(rr_lit(w, "{\"type\":\"image\",\"source\":"));
    TRY(rr_source(w, p, "image"));
    TRY(rr_cache(w, p->cache, p->cache_ttl));
    return rr_lit(w, "}");
}

static enum gw_code
rr_document(struct rr *w, const struct dl_part *p)
{
    TRY(rr_lit(w, "{\"type\":\"document\",\"source\":"));
    if (p->data.len && gw_str_has_prefix_nocase(p->media_type, "text/")) {
        struct gw_buf text = {0};
        enum gw_code rc = GW_OK;

        /* a plain text document travels as text */
        if (gw_base64_decode(p->data, &text) &&
            gw_utf8_valid((struct gw_str){text.data, text.len})) {
            rc = rr_lit(w, "{\"type\":\"text\"");
            if (rc == GW_OK)
                rc = rr_member(w, "media_type", p->media_type);
            if (rc == GW_OK)
                rc = rr_member(w, "data", (struct gw_str){text.len ? text.data : "", text.len});
            if (rc == GW_OK)
                rc = rr_lit(w, "}");
        } else {
            rc = rr_source(w, p, "document");
        }
        gw_buf_fini(&text);
        TRY(rc);
    } else {
        TRY(rr_source(w, p, "document"));
    }
    if (p->text.len)
        TRY(rr_member(w, "title", p->text));
    TRY(rr_cache(w, p->cache, p->cache_ttl));
    return rr_lit(w, "}");
}

static enum gw_code
rr_other(struct rr *w, const struct dl_part *p)
{
    if (w->r->source != DL_SHAPE_MESSAGES || !is_json_object(p->data))
        return rr_refuse(w, "messages: %.*s parts cannot be sent to an Anthropic model",
                         (int)(p->name.len > 64 ? 64 : p->name.len), p->name.ptr);
    return gw_buf_append_str(w->out, p->data);
}

static enum gw_code
rr_text(struct rr *w, const struct dl_part *p)
{
    TRY(rr_lit(w, "{\"type\":\"text\",\"text\":"));
    TRY(rr_json(w, p->text));
    TRY(rr_cache(w, p->cache, p->cache_ttl));
    return rr_lit(w, "}");
}

static enum gw_code
rr_tool_use(struct rr *w, const struct dl_part *p)
{
    struct gw_str args = gw_str_trim(p->arguments);

    if (p->id.len == 0)
        return rr_refuse(w, "tool_calls: a tool call without an id cannot be sent to an "
                            "Anthropic model");
    if (args.len && !is_json_object(args))
        return rr_refuse(w, "tool_calls.function.arguments: must be a JSON object for an "
                            "Anthropic model");
    TRY(rr_lit(w, "{\"type\":\"tool_use\",\"id\":"));
    TRY(rr_json(w, p->id));
    TRY(rr_member(w, "name", p->name));
    TRY(rr_lit(w, ",\"input\":"));
    TRY(args.len ? gw_buf_append_str(w->out, args) : rr_lit(w, "{}"));
    TRY(rr_cache(w, p->cache, p->cache_ttl));
    return rr_lit(w, "}");
}

/* Whether a tool result's content part makes a block. */
static bool
result_part_renders(const struct dl_part *p)
{
    switch (p->kind) {
    case DL_PART_TEXT: return p->text.len > 0;
    case DL_PART_IMAGE:
    case DL_PART_DOCUMENT:
    case DL_PART_OTHER: return true;
    case DL_PART_TOOL_CALL:
    case DL_PART_TOOL_RESULT:
    case DL_PART_REASONING: break;
    }
    return false;
}

static enum gw_code
rr_tool_result(struct rr *w, const struct dl_part *p)
{
    size_t k, n = 0, last = 0;
    bool first = true;

    if (p->call_id.len == 0)
        return rr_refuse(w, "messages: a tool result without the id of its call cannot be sent "
                            "to an Anthropic model");
    TRY(rr_lit(w, "{\"type\":\"tool_result\",\"tool_use_id\":"));
    TRY(rr_json(w, p->call_id));
    for (k = 0; k < p->n_content; k++)
        if (result_part_renders(&p->content[k])) {
            n++;
            last = k;
        } else if (p->content[k].kind != DL_PART_TEXT) {
            rr_drop(w, "tool result content");
        }
    if (n == 0) {
        TRY(rr_lit(w, ",\"content\":\"\""));
    } else if (n == 1 && p->content[last].kind == DL_PART_TEXT && !p->content[last].cache) {
        TRY(rr_member(w, "content", p->content[last].text));
    } else {
        TRY(rr_lit(w, ",\"content\":["));
        for (k = 0; k < p->n_content; k++) {
            const struct dl_part *c = &p->content[k];

            if (!result_part_renders(c))
                continue;
            if (!first)
                TRY(rr_lit(w, ","));
            first = false;
            switch (c->kind) {
            case DL_PART_TEXT: TRY(rr_text(w, c)); break;
            case DL_PART_IMAGE: TRY(rr_image(w, c, false)); break;
            case DL_PART_DOCUMENT: TRY(rr_document(w, c)); break;
            case DL_PART_OTHER: TRY(rr_other(w, c)); break;
            case DL_PART_TOOL_CALL:
            case DL_PART_TOOL_RESULT:
            case DL_PART_REASONING: break;
            }
        }
        TRY(rr_lit(w, "]"));
    }
    if (p->is_error)
        TRY(rr_lit(w, ",\"is_error\":true"));
    TRY(rr_cache(w, p->cache, p->cache_ttl));
    return rr_lit(w, "}");
}

static enum gw_code
rr_reasoning(struct rr *w, const struct dl_part *p)
{
    if (p->redacted) {
        TRY(rr_lit(w, "{\"type\":\"redacted_thinking\",\"data\":"));
        TRY(rr_json(w, p->signature));
    } else {
        TRY(rr_lit(w, "{\"type\":\"thinking\",\"thinking\":"));
        TRY(rr_json(w, p->text));
        TRY(rr_member(w, "signature", p->signature));
    }
    TRY(rr_cache(w, p->cache, p->cache_ttl));
    return rr_lit(w, "}");
}

/* Whether part <p> of a message of <role> makes a block. Reasoning goes back only with
 * a signature a Messages upstream made, in an assistant turn; a Messages client's goes
 * as it came. */
static bool
part_renders(const struct rr *w, const struct dl_part *p, enum dl_role role)
{
    switch (p->kind) {
    case DL_PART_TEXT: return p->text.len > 0;
    case DL_PART_REASONING:
        return w->r->source == DL_SHAPE_MESSAGES ||
               (role == DL_ROLE_ASSISTANT && p->sig_shape == DL_SHAPE_MESSAGES &&
                (p->redacted || p->signature.len > 0));
    case DL_PART_IMAGE:
    case DL_PART_DOCUMENT:
    case DL_PART_TOOL_CALL:
    case DL_PART_TOOL_RESULT:
    case DL_PART_OTHER: return true;
    }
    return false;
}

static size_t
message_blocks(const struct rr *w, const struct dl_message *m)
{
    size_t k, n = 0;

    for (k = 0; k < m->n_parts; k++)
        n += part_renders(w, &m->parts[k], m->role);
    return n;
}

static bool
is_assistant(const struct dl_message *m)
{
    return m->role == DL_ROLE_ASSISTANT;
}

/* The drops of a message's parts that make no block. */
static void
rr_message_drops(struct rr *w, const struct dl_message *m)
{
    size_t k;

    if (m->name.len)
        rr_drop(w, "name");
    for (k = 0; k < m->n_parts; k++)
        if (m->parts[k].kind == DL_PART_REASONING && !part_renders(w, &m->parts[k], m->role))
            rr_drop(w, "reasoning");
}

static enum gw_code
rr_part(struct rr *w, const struct dl_part *p, bool assistant)
{
    switch (p->kind) {
    case DL_PART_TEXT: return rr_text(w, p);
    case DL_PART_IMAGE: return rr_image(w, p, assistant);
    case DL_PART_DOCUMENT: return rr_document(w, p);
    case DL_PART_TOOL_CALL: return rr_tool_use(w, p);
    case DL_PART_TOOL_RESULT: return rr_tool_result(w, p);
    case DL_PART_REASONING: return rr_reasoning(w, p);
    case DL_PART_OTHER: return rr_other(w, p);
    }
    return GW_OK;
}

/* One turn: messages [<from>, <to>) of one side, <blocks> blocks in all. */
static enum gw_code
rr_turn(struct rr *w, size_t from, size_t to, size_t blocks, bool first_turn)
{
    const struct dl_message *msgs = w->r->messages;
    bool assistant = is_assistant(&msgs[from]), first = true;
    size_t i, k;

    TRY(rr_lit(w, first_turn ? "{\"role\":\"" : ",{\"role\":\""));
    TRY(rr_lit(w, assistant ? "assistant\",\"content\":" : "user\",\"content\":"));
    for (i = from; i < to; i++)
        rr_message_drops(w, &msgs[i]);
    if (blocks == 1) {
        /* one plain text: a string */
        for (i = from; i < to; i++)
            for (k = 0; k < msgs[i].n_parts; k++) {
                const struct dl_part *p = &msgs[i].parts[k];

                if (part_renders(w, p, msgs[i].role) && p->kind == DL_PART_TEXT && !p->cache) {
                    TRY(rr_json(w, p->text));
                    return rr_lit(w, "}");
                }
            }
    }
    TRY(rr_lit(w, "["));
    for (i = from; i < to; i++)
        for (k = 0; k < msgs[i].n_parts; k++) {
            const struct dl_part *p = &msgs[i].parts[k];

            if (!part_renders(w, p, msgs[i].role))
                continue;
            if (!first)
                TRY(rr_lit(w, ","));
            first = false;
            TRY(rr_part(w, p, assistant));
        }
    return rr_lit(w, "]}");
}

static enum gw_code
rr_messages(struct rr *w)
{
    const struct dl_message *msgs = w->r->messages;
    size_t n = w->r->n_messages, i = 0, k;
    bool first_turn = true;

    TRY(rr_lit(w, ",\"messages\":["));
    while (i < n) {
        size_t blocks = message_blocks(w, &msgs[i]), end, total = 0;
        bool side = is_assistant(&msgs[i]);

        if (blocks == 0) {
            rr_message_drops(w, &msgs[i]);
            i++;
            continue;
        }
        if (first_turn && side)
            return rr_refuse(w, "messages: an Anthropic model needs the conversation to start "
                                "with a user message, not an assistant message");
        for (k = i, end = i; k < n; k++) {
            size_t b = message_blocks(w, &msgs[k]);

            if (b == 0)
                continue;
            if (is_assistant(&msgs[k]) != side)
                break;
            total += b;
            end = k + 1;
        }
        TRY(rr_turn(w, i, end, total, first_turn));
        first_turn = false;
        i = end;
    }
    if (first_turn)
        return rr_refuse(w, "messages: an Anthropic model needs at least one user message");
    return rr_lit(w, "]");
}

static enum gw_code
rr_system(struct rr *w)
{
    const struct dl_request *r = w->r;
    bool cache = false, first = true;
    size_t k;

    for (k = 0; k < r->n_system; k++)
        cache |= r->system[k].cache;
    if (cache) {
        TRY(rr_lit(w, ",\"system\":["));
        for (k = 0; k < r->n_system; k++) {
            if (r->system[k].text.len == 0)
                continue;
            if (!first)
                TRY(rr_lit(w, ","));
            first = false;
            TRY(rr_text(w, &r->system[k]));
        }
        return rr_lit(w, "]");
    }
    for (k = 0; k < r->n_system; k++) {
        struct gw_str t = r->system[k].text;

        if (t.len == 0)
            continue;
        TRY(rr_lit(w, first ? ",\"system\":\"" : "\\n\\n"));
        first = false;
        TRY(rr_json_inner(w, t));
    }
    return first ? GW_OK : rr_lit(w, "\"");
}

static enum gw_code
rr_tools(struct rr *w)
{
    const struct dl_request *r = w->r;
    size_t k;

    if (r->n_tools == 0 && r->source != DL_SHAPE_MESSAGES) {
        if (r->tool_choice != DL_TOOL_CHOICE_UNSET)
            rr_drop(w, "tool_choice");
        return GW_OK;
    }
    TRY(rr_lit(w, r->n_tools ? ",\"tools\":[" : ""));
    for (k = 0; k < r->n_tools; k++) {
        const struct dl_tool *t = &r->tools[k];

        if (k)
            TRY(rr_lit(w, ","));
        if (t->hosted.len) {
            TRY(gw_buf_append_str(w->out, t->hosted));
            continue;
        }
        TRY(rr_lit(w, "{\"name\":"));
        TRY(rr_json(w, t->name));
        if (t->description.len)
            TRY(rr_member(w, "description", t->description));
        TRY(rr_lit(w, ",\"input_schema\":"));
        TRY(t->parameters.len ? gw_buf_append_str(w->out, gw_str_trim(t->parameters))
                              : rr_lit(w, "{\"type\":\"object\",\"properties\":{}}"));
        if (t->strict) {
            if (r->source == DL_SHAPE_MESSAGES)
                TRY(rr_lit(w, ",\"strict\":true"));
            else
                rr_drop(w, "strict");
        }
        TRY(rr_cache(w, t->cache, (struct gw_str){"", 0}));
        TRY(rr_lit(w, "}"));
    }
    TRY(rr_lit(w, r->n_tools ? "]" : ""));
    switch (r->tool_choice) {
    case DL_TOOL_CHOICE_UNSET:
        if (r->parallel_tool_calls != 0)
            return GW_OK;
        return rr_lit(w, ",\"tool_choice\":{\"type\":\"auto\",\"disable_parallel_tool_use\":true}");
    case DL_TOOL_CHOICE_NONE: return rr_lit(w, ",\"tool_choice\":{\"type\":\"none\"}");
    case DL_TOOL_CHOICE_AUTO: TRY(rr_lit(w, ",\"tool_choice\":{\"type\":\"auto\"")); break;
    case DL_TOOL_CHOICE_REQUIRED: TRY(rr_lit(w, ",\"tool_choice\":{\"type\":\"any\"")); break;
    case DL_TOOL_CHOICE_NAMED:
        TRY(rr_lit(w, ",\"tool_choice\":{\"type\":\"tool\""));
        TRY(rr_member(w, "name", r->tool_choice_name));
        break;
    }
    if (r->parallel_tool_calls == 0)
        TRY(rr_lit(w, ",\"disable_parallel_tool_use\":true"));
    return rr_lit(w, "}");
}

static enum gw_code
rr_sampling(struct rr *w)
{
    const struct dl_request *r = w->r;
    size_t k;
    bool any = false;

    if (r->has_temperature) {
        TRY(rr_lit(w, ",\"temperature\":"));
        TRY(dl_anthropic_append_double(w->out, r->temperature > 1.0 ? 1.0 : r->temperature));
    }
    /* newer Anthropic models refuse temperature and top_p together: temperature wins
     * (a Messages client chose both knowing its API: both go) */
    if (r->has_top_p && r->has_temperature && r->source != DL_SHAPE_MESSAGES) {
        rr_drop(w, "top_p");
    } else if (r->has_top_p) {
        TRY(rr_lit(w, ",\"top_p\":"));
        TRY(dl_anthropic_append_double(w->out, r->top_p));
    }
    if (r->has_top_k) {
        TRY(rr_lit(w, ",\"top_k\":"));
        TRY(gw_buf_append_i64(w->out, r->top_k));
    }
    if (r->has_seed)
        rr_drop(w, "seed");
    if (r->has_presence)
        rr_drop(w, "presence_penalty");
    if (r->has_frequency)
        rr_drop(w, "frequency_penalty");
    for (k = 0; k < r->n_stop; k++) {
        if (r->stop[k].len == 0)
            continue;
        TRY(rr_lit(w, any ? "," : ",\"stop_sequences\":["));
        any = true;
        TRY(rr_json(w, r->stop[k]));
    }
    return any ? rr_lit(w, "]") : GW_OK;
}

static enum gw_code
rr_rest(struct rr *w)
{
    const struct dl_request *r = w->r;
    bool own = r->source == DL_SHAPE_MESSAGES;
    size_t k;

    if (r->user.len) {
        TRY(rr_lit(w, ",\"metadata\":{\"user_id\":"));
        TRY(rr_json(w, r->user));
        TRY(rr_lit(w, "}"));
    }
    if (r->metadata.len && !own)
        rr_drop(w, "metadata");
    if (r->thinking_budget) {
        TRY(rr_lit(w, ",\"thinking\":{\"type\":\"enabled\",\"budget_tokens\":"));
        TRY(gw_buf_append_u64(w->out, r->thinking_budget));
        TRY(rr_lit(w, "}"));
    } else if (r->thinking && own) {
        TRY(rr_lit(w, ",\"thinking\":{\"type\":\"adaptive\"}"));
    } else if (r->thinking && r->reasoning_effort.len == 0) {
        rr_drop(w, "thinking");
    }
    if (r->reasoning_effort.len && !own)
        rr_drop(w, "reasoning_effort");
    if (r->prompt_cache_key.len)
        rr_drop(w, "prompt_cache_key");
    if (r->stream)
        TRY(rr_lit(w, ",\"stream\":true"));
    for (k = 0; k < r->n_extras; k++) {
        if (!own) {
            if (w->dropped)
                dl_dropped_add(w->dropped, r->extras[k].name);
            continue;
        }
        TRY(rr_lit(w, ","));
        TRY(rr_json(w, r->extras[k].name));
        TRY(rr_lit(w, ":"));
        TRY(gw_buf_append_str(w->out, gw_str_trim(r->extras[k].raw)));
    }
    return GW_OK;
}

/* What the Messages API cannot express at all (DESIGN.md 11: refused). */
static enum gw_code
rr_refusals(struct rr *w)
{
    const struct dl_request *r = w->r;
    bool own = r->source == DL_SHAPE_MESSAGES;
    size_t k;

    if (r->needs & DL_NEED_F_N_CHOICES)
        return rr_refuse(w, "n: an Anthropic model returns one choice (n must be 1)");
    if (r->needs & DL_NEED_F_LOGPROBS)
        return rr_refuse(w, "logprobs: an Anthropic model does not return log probabilities");
    if (r->needs & DL_NEED_F_AUDIO_OUT)
        return rr_refuse(w, "audio: an Anthropic model does not produce audio");
    if (r->needs & DL_NEED_F_IMAGE_OUT)
        return rr_refuse(w, "modalities: an Anthropic model produces text only");
    if (r->format == DL_FORMAT_JSON_OBJECT || (r->format == DL_FORMAT_JSON_SCHEMA && !own))
        return rr_refuse(w, "response_format: JSON output modes cannot be sent to an Anthropic "
                            "model (only type text)");
    if ((r->needs & DL_NEED_F_HOSTED_TOOLS) && !own)
        return rr_refuse(w, "tools: hosted tools (web search, code execution, file search, "
                            "computer use) cannot be sent to an Anthropic model");
    for (k = 0; k < r->n_tools; k++)
        if (r->tools[k].hosted.len && (!own || !is_json_object(r->tools[k].hosted)))
            return rr_refuse(w, "tools: hosted tools (web search, code execution, file search, "
                                "computer use) cannot be sent to an Anthropic model");
    return GW_OK;
}

static enum gw_code
rr_body(struct rr *w, struct gw_str model, uint64_t max_output_default)
{
    const struct dl_request *r = w->r;
    uint64_t max = r->max_output_tokens ? r->max_output_tokens
                   : max_output_default ? max_output_default
                                        : DL_ANTHROPIC_FALLBACK_MAX_TOKENS;

    TRY(rr_refusals(w));
    TRY(rr_lit(w, "{\"model\":"));
    TRY(rr_json(w, model));
    TRY(rr_lit(w, ",\"max_tokens\":"));
    TRY(gw_buf_append_u64(w->out, max));
    TRY(rr_system(w));
    TRY(rr_messages(w));
    TRY(rr_tools(w));
    TRY(rr_sampling(w));
    TRY(rr_rest(w));
    return rr_lit(w, "}");
}

enum gw_code
dl_anthropic_request_render(const struct dl_request *r, struct gw_str model,
                            uint64_t max_output_default, struct dl_dropped *dropped,
                            struct gw_buf *out, struct gw_buf *why)
{
    struct dl_dropped none = {0};
    struct rr w = {r, dropped ? dropped : &none, out, why};
    size_t start = out->len, n_dropped = w.dropped->n;
    bool more = w.dropped->more;
    enum gw_code rc = rr_body(&w, model, max_output_default);

    if (rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
        w.dropped->n = n_dropped; /* nothing is dropped from a request not sent */
        w.dropped->more = more;
    }
    return rc;
}
