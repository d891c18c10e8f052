/* SPDX-License-Identifier: MIT
 * dialects/anthropic.c - the Anthropic Messages shape's file (DESIGN.md 11): its row of
 * the hub's table (dl_anthropic_shape), its error bodies and frames, and the helpers
 * its other files share (a field collector over dialects/json_scan.h, number writing,
 * the status -> error type table); the request is in anthropic_request.c, events and
 * answers in anthropic_answer.c. Chapter "the Messages shape" at the end.
 *
 * Until the pipeline calls the shape's operations, this file also holds the old
 * pairwise converter, a Chat Completions client served by an Anthropic Messages
 * upstream: the request converted to a Messages body, the answer, the stream events
 * and the error bodies converted back to the Chat shape. Pure: jansson trees, no I/O,
 * no clock (the caller passes `created`). The common shapes (plain text requests and
 * answers, the text stream events) take allocation-free fast routes over
 * dialects/json_scan.h that write the same bytes (chapter "fast scans" below).
 *
 * Request (Chat -> Messages), decisions beyond the obvious field renames:
 * - system and developer messages, wherever they stand, join the top-level "system"
 *   string (texts joined with "\n\n").
 * - Consecutive messages of one role are merged by concatenating their content blocks
 *   (Anthropic requires alternation); tool results become tool_result blocks of a user
 *   turn, so tool results and a following user message share one turn, results first.
 * - A conversation whose first non-system message is an assistant message is refused
 *   (GW_E_UNCONVERTIBLE): prepending an invented user turn would change what the model
 *   sees. A conversation with no user/assistant message at all is refused likewise.
 * - Empty text parts are dropped (Anthropic refuses empty text blocks); a string
 *   content is kept as a string while the message is not merged with another.
 * - Assistant tool_calls become tool_use blocks after the message's text; arguments
 *   must be a JSON object (an empty or blank string counts as {}).
 * - Images: data: URLs with ";base64," become base64 sources, http(s) URLs url
 *   sources; anything else is refused. A "cache_control" object on a text or image
 *   part is carried over as written.
 * - temperature above 1 is clamped to 1; top_p copied unless temperature is set too
 *   (newer Anthropic models refuse both: temperature wins); stop -> stop_sequences;
 *   user (else safety_identifier) -> metadata.user_id; parallel_tool_calls false ->
 *   tool_choice.disable_parallel_tool_use (tool_choice "auto" when none was given);
 *   tool_choice is dropped when no tool is declared.
 * - Refused (GW_E_UNCONVERTIBLE, the message names the field): n > 1, logprobs,
 *   top_logprobs > 0, response_format json_object/json_schema, audio, modalities other
 *   than text, functions/function_call (legacy), prediction, web_search_options, tools
 *   other than "function", message parts other than text/image_url/refusal (input_audio,
 *   file), images in assistant messages, unknown roles (legacy "function" included).
 * - Ignored silently: frequency_penalty, presence_penalty, seed, logit_bias,
 *   stream_options, store, metadata (but user), service_tier, reasoning_effort (no
 *   mapping to "thinking": that needs a token budget and signed thinking blocks in the
 *   history), verbosity, prompt_cache_key, a message's "name", an assistant's
 *   "refusal"/"reasoning_content", a tool's "strict". Every other unknown field too.
 * - Known limit: Anthropic wants "tools" declared when the history holds tool_use or
 *   tool_result blocks; a client that sends tool history without tools gets the
 *   upstream's refusal.
 * Answer and stream (Messages -> Chat): text blocks joined, tool_use blocks become
 * tool_calls (input serialised compactly), thinking and server-tool blocks dropped.
 * prompt_tokens = input + cache read + cache creation; cached_tokens = cache read;
 * the gw_usage keeps the three apart (input = uncached). The usage chunk of a stream
 * is written only when the upstream reported usage (message_start or message_delta),
 * so the gateway's estimate applies otherwise.
 * Errors: Anthropic error types map to OpenAI's (table error_map below); not_found_error
 * stays not_found_error (the gateway's own 404 vocabulary) rather than OpenAI's
 * invalid_request_error + model_not_found; rate_limit_error becomes type "requests"
 * with code "rate_limit_exceeded" as OpenAI answers. The upstream's error message is
 * relayed (it is about the client's request), as a same-shape upstream's would be.
 * Numbers: jansson re-serialises reals with 17 significant digits (0.7 may read
 * 0.69999999999999996): the same double, never a different value.
 * Owns:    nothing beyond one call; struct dl_anthropic_stream is caller-owned state.
 * Threads: any; a stream state belongs to one thread at a time.
 * See:     dialects/anthropic.h, tests/unit/dialects/test_anthropic.c,
 *          tests/fuzz/fuzz_anthropic.c
 */
#include "dialects/anthropic.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "dialects/anthropic-priv.h"
#include "dialects/json_scan.h"

#define DUMP_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER)
#define T_LEN(s) (sizeof(s) - 1)

/* ---- helpers ---- */

/* True when <v> is the JSON string <lit> (length checked: NULs inside do not match). */
static bool
str_is(const json_t *v, const char *lit)
{
    size_t n = strlen(lit);

    return json_is_string(v) && json_string_length(v) == n &&
           memcmp(json_string_value(v), lit, n) == 0;
}

static struct gw_str
str_of(const json_t *v)
{
    if (!json_is_string(v))
        return (struct gw_str){"", 0};
    return (struct gw_str){json_string_value(v), json_string_length(v)};
}

/* A token count: a non-negative integer, else 0. */
static uint64_t
count_of(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
}

static uint64_t
sat_add(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

/* json_integer of a count, capped at the largest json_int_t. */
static json_t *
json_count(uint64_t v)
{
    return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* Appends the compact dump of <v> (any JSON value) to <out>. */
static enum gw_code
dump_append(const json_t *v, struct gw_buf *out)
{
    size_t n = json_dumpb(v, NULL, 0, DUMP_FLAGS | JSON_ENCODE_ANY);

    if (n == 0 || gw_buf_reserve(out, n) != GW_OK)
        return GW_E_NOMEM;
    if (json_dumpb(v, out->data + out->len, n, DUMP_FLAGS | JSON_ENCODE_ANY) != n)
        return GW_E_NOMEM;
    out->len += n;
    out->data[out->len] = '\0';
    return GW_OK;
}

/* Sets <obj>[<key>] = <v>, taking <v> (NULL means allocation failed). */
static enum gw_code
set_new(json_t *obj, const char *key, json_t *v)
{
    return v && json_object_set_new(obj, key, v) == 0 ? GW_OK : GW_E_NOMEM;
}

static enum gw_code
append_new(json_t *arr, json_t *v)
{
    return v && json_array_append_new(arr, v) == 0 ? GW_OK : GW_E_NOMEM;
}

/* Appends "<s>" (quoted, <s> needs no escape) then <tail>: printf's "\"%s\"<tail>". */
static enum gw_code
append_quoted(struct gw_buf *out, const char *s, const char *tail)
{
    if (gw_buf_append(out, "\"", 1) != GW_OK || gw_buf_append_cstr(out, s) != GW_OK ||
        gw_buf_append(out, "\"", 1) != GW_OK)
        return GW_E_NOMEM;
    return gw_buf_append_cstr(out, tail);
}

/* Appends the decimal <v> as printf's "%d" writes it. */
static enum gw_code
append_int(struct gw_buf *out, int v)
{
    if (v < 0 && gw_buf_append(out, "-", 1) != GW_OK)
        return GW_E_NOMEM;
    return gw_buf_append_u64(out, v < 0 ? (uint64_t)(-(int64_t)v) : (uint64_t)v);
}

/* Copies <s> into <dst> (<cap> bytes with the NUL), cut at a UTF-8 boundary. */
static void
copy_cut(char *dst, size_t cap, const char *prefix, struct gw_str s)
{
    size_t p = strlen(prefix), n = s.len;

    memcpy(dst, prefix, p);
    if (p + n > cap - 1) {
        n = cap - 1 - p;
        while (n > 0 && ((unsigned char)s.ptr[n] & 0xC0) == 0x80)
            n--;
    }
    if (n)
        memcpy(dst + p, s.ptr, n);
    dst[p + n] = '\0';
}

/* ---- fast scans ----
 * The hot paths (plain requests and answers, stream events) read the JSON with the
 * allocation-free scanner and render directly. A fast path handles only the common
 * shapes and returns false, having changed nothing, for anything else (malformed
 * input included): the jansson route then decides, so both give the same bytes
 * (tests/unit/dialects/test_anthropic.c and tests/fuzz/fuzz_anthropic.c compare them).
 * jansson keeps the last of duplicate keys; so does fs_scan. */

enum fs_kind { FS_ABSENT, FS_STR, FS_INT, FS_NULL, FS_TRUE, FS_OBJ, FS_ARR, FS_OTHER };

/* One member of interest of an object, as the last occurrence of its key left it. */
struct fs_field {
    const char *name;
    size_t len;
    enum fs_kind kind;
    struct dl_json_str str; /* FS_STR */
    struct dl_json_num num; /* FS_INT */
    size_t at;              /* FS_OBJ, FS_ARR: offset of the opening bracket */
    struct fs_field *sub;   /* when not NULL, an object value is scanned for these */
    size_t nsub;
};

#define FS_FIELD(lit)                                                                              \
    {                                                                                              \
        lit, T_LEN(lit), FS_ABSENT, {0}, {0}, 0, NULL, 0                                           \
    }

/* At '{': validates the object and fills the <n> <fields> it holds. Other keys are
 * skipped; when <strict>, the first one fails the scan. */
static bool
fs_scan_keys(struct dl_json *j, struct fs_field *fields, size_t n, bool strict)
{
    struct dl_json_str key;
    bool first = true;
    int r;

    if (dl_json_peek(j) != '{' || !dl_json_obj_enter(j))
        return false;
    while ((r = dl_json_obj_next(j, &first, &key)) == 1) {
        struct fs_field *f = NULL;
        size_t k;
        int c;

        for (k = 0; k < n; k++)
            if (dl_json_key_is(j, &key, fields[k].name, fields[k].len)) {
                f = &fields[k];
                break;
            }
        if (!f) {
            if (strict || !dl_json_skip(j, NULL))
                return false;
            continue;
        }
        c = dl_json_peek(j);
        f->at = j->i;
        if (c == '"') {
            f->kind = FS_STR;
            if (!dl_json_string(j, &f->str))
                return false;
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9')) {
            if (!dl_json_number(j, &f->num))
                return false;
            f->kind = f->num.real ? FS_OTHER : FS_INT;
            continue;
        }
        if (c == '{' && f->sub) {
            /* scanned in place; a later duplicate key starts afresh, as jansson's does */
            for (k = 0; k < f->nsub; k++)
                f->sub[k].kind = FS_ABSENT;
            f->kind = FS_OBJ;
            if (!fs_scan_keys(j, f->sub, f->nsub, false))
                return false;
            continue;
        }
        f->kind = c == '{'   ? FS_OBJ
                  : c == '[' ? FS_ARR
                  : c == 'n' ? FS_NULL
                  : c == 't' ? FS_TRUE
                             : FS_OTHER;
        if (!dl_json_skip(j, NULL))
            return false;
    }
    return r == 0;
}

static bool
fs_scan(struct dl_json *j, struct fs_field *fields, size_t n)
{
    return fs_scan_keys(j, fields, n, false);
}

/* Scans the whole document <s>/<n>: an object, nothing after it. */
static bool
fs_doc(struct dl_json *j, const char *s, size_t n, struct fs_field *fields, size_t nf)
{
    dl_json_init(j, s, n);
    return fs_scan(j, fields, nf) && dl_json_end(j);
}

/* A cursor on the (already validated) value at <at> of the document of <doc>. */
static struct dl_json
fs_at(const struct dl_json *doc, size_t at)
{
    struct dl_json j;

    dl_json_init(&j, doc->s, doc->n);
    j.i = at;
    return j;
}

/* A count as count_of reads it: a positive integer as is, else 0. */
static uint64_t
fs_count(const struct dl_json *j, const struct fs_field *f)
{
    uint64_t v = 0;
    size_t i;

    if (j->s[f->num.start] == '-')
        return 0;
    for (i = f->num.start; i < f->num.end; i++)
        v = v * 10 + (uint64_t)(j->s[i] - '0'); /* validated: at most INT64_MAX */
    return v;
}

/* The fields read_usage reads, for a usage object's <sub>. */
#define FS_USAGE_FIELDS                                                                            \
    {                                                                                              \
        FS_FIELD("input_tokens"), FS_FIELD("output_tokens"), FS_FIELD("cache_read_input_tokens"),  \
            FS_FIELD("cache_creation_input_tokens")                                                \
    }

/* read_usage over the FS_USAGE_FIELDS <k> of a usage object of <j>. */
static void
fs_usage(const struct dl_json *j, const struct fs_field *k, struct gw_usage *u)
{
    if (k[0].kind == FS_INT)
        u->input_tokens = fs_count(j, &k[0]);
    if (k[1].kind == FS_INT)
        u->output_tokens = fs_count(j, &k[1]);
    if (k[2].kind == FS_INT)
        u->cache_read_tokens = fs_count(j, &k[2]);
    if (k[3].kind == FS_INT)
        u->cache_write_tokens = fs_count(j, &k[3]);
}

/* The decoded bytes of a string token: the document's own bytes when it holds no
 * escape, else a copy (on the stack when small). */
struct fs_text {
    struct gw_str s;
    char *heap;
    char stack[512];
};

static bool
fs_text_get(const struct dl_json *j, const struct dl_json_str *t, struct fs_text *x)
{
    char *dst = x->stack;

    x->heap = NULL;
    if (!t->escaped) {
        x->s = (struct gw_str){j->s + t->start, t->dlen};
        return true;
    }
    if (t->dlen > sizeof(x->stack)) {
        dst = x->heap = gw_malloc(t->dlen);
        if (!dst)
            return false;
    }
    dl_json_decode(j, t, dst);
    x->s = (struct gw_str){dst, t->dlen};
    return true;
}

static void
fs_text_fini(struct fs_text *x)
{
    gw_free(x->heap);
}

/* finish_of for the FS_STR field <f>. */
static const char *
fs_finish(const struct dl_json *j, const struct fs_field *f)
{
    if (f->kind != FS_STR)
        return NULL;
    if (dl_json_key_is(j, &f->str, "max_tokens", 10) ||
        dl_json_key_is(j, &f->str, "model_context_window_exceeded", 29))
        return "length";
    if (dl_json_key_is(j, &f->str, "tool_use", 8))
        return "tool_calls";
    if (dl_json_key_is(j, &f->str, "refusal", 7))
        return "content_filter";
    return "stop";
}

/* Appends the bytes jansson's dump writes between the quotes of the string <s>: '"',
 * '\\' and the short control escapes, other control bytes as \u00XX (upper case). */
static enum gw_code
jdump_str_body(struct gw_buf *out, struct gw_str s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t i, run = 0;

    for (i = 0; i < s.len; i++) {
        unsigned char c = (unsigned char)s.ptr[i];
        char esc[6] = {'\\', 0, '0', '0', 0, 0};
        size_t n = 2;

        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        if (gw_buf_append(out, s.ptr + run, i - run) != GW_OK)
            return GW_E_NOMEM;
        run = i + 1;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        if (gw_buf_append(out, esc, n) != GW_OK)
            return GW_E_NOMEM;
    }
    return gw_buf_append(out, s.ptr + run, s.len - run);
}

/* Appends what jansson's dump writes for the decoded string token <t> of <j>, quotes
 * excluded. A string without escapes reads exactly as jansson writes it (no control
 * byte, quote or backslash can be in it): copied raw. */
static enum gw_code
jdump_tok_body(struct gw_buf *out, const struct dl_json *j, const struct dl_json_str *t)
{
    struct fs_text x;
    enum gw_code rc;

    if (!t->escaped)
        return gw_buf_append(out, j->s + t->start, t->dlen);
    if (!fs_text_get(j, t, &x))
        return GW_E_NOMEM;
    rc = jdump_str_body(out, x.s);
    fs_text_fini(&x);
    return rc;
}

/* jdump_tok_body of the FS_STR field <f> ("" when <f> is not a string). */
static enum gw_code
jdump_field_body(struct gw_buf *out, const struct dl_json *j, const struct fs_field *f)
{
    return f->kind == FS_STR ? jdump_tok_body(out, j, &f->str) : GW_OK;
}

/* Appends a count as jansson dumps json_count(<v>) (capped at INT64_MAX). */
static enum gw_code
append_count(struct gw_buf *out, uint64_t v)
{
    return gw_buf_append_u64(out, v > (uint64_t)INT64_MAX ? (uint64_t)INT64_MAX : v);
}

/* ---- request ----
 * Duplicate keys (issue 8, one body per request): both routes read the last copy of a
 * key, as jansson does, and the upstream gets a body built from what they read, never
 * the client's bytes; so what is forwarded is what was read. The body reaching here has
 * passed dl_openai_req_parse, which refuses a duplicate of the top-level fields the
 * gateway itself reads (model, messages, max_tokens, ...). */

struct req_conv {
    char *why;
    size_t whylen;
    json_t *msgs;         /* the Messages "messages" array */
    struct gw_buf system; /* the joined system text */
};

static enum gw_code refuse(struct req_conv *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static enum gw_code
refuse(struct req_conv *c, const char *fmt, ...)
{
    va_list ap;

    if (c->why && c->whylen) {
        va_start(ap, fmt);
        vsnprintf(c->why, c->whylen, fmt, ap);
        va_end(ap);
    }
    return GW_E_UNCONVERTIBLE;
}

/* A content value as a new array of blocks: an array as it is (a new reference), a
 * string as one text block (none when empty), anything else as no block. */
static json_t *
as_blocks(json_t *content)
{
    json_t *a;

    if (json_is_array(content))
        return json_incref(content);
    a = json_array();
    if (a && json_is_string(content) && json_string_length(content) > 0) {
        json_t *b = json_pack("{s:s,s:O}", "type", "text", "text", content);

        if (append_new(a, b) != GW_OK) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* Adds a message of <role> with <content> (taken), merged into the previous message
 * when that has the same role. */
static enum gw_code
push_message(struct req_conv *c, const char *role, json_t *content)
{
    size_t n = json_array_size(c->msgs);
    json_t *last = n ? json_array_get(c->msgs, n - 1) : NULL;
    json_t *m;

    if (!content)
        return GW_E_NOMEM;
    if (last && str_is(json_object_get(last, "role"), role)) {
        json_t *blocks = as_blocks(json_object_get(last, "content"));
        json_t *more = as_blocks(content);
        enum gw_code rc = GW_E_NOMEM;

        if (blocks && more && json_array_extend(blocks, more) == 0)
            rc = set_new(last, "content", json_incref(blocks));
        json_decref(blocks);
        json_decref(more);
        json_decref(content);
        return rc;
    }
    m = json_object();
    if (!m || set_new(m, "role", json_string(role)) != GW_OK) {
        json_decref(content);
        json_decref(m);
        return GW_E_NOMEM;
    }
    if (set_new(m, "content", content) != GW_OK) {
        json_decref(m);
        return GW_E_NOMEM;
    }
    return append_new(c->msgs, m);
}

/* Copies a part's "cache_control" object onto block <b>. */
static enum gw_code
copy_cache_control(const json_t *part, json_t *b)
{
    json_t *cc = json_object_get(part, "cache_control");

    return json_is_object(cc) ? set_new(b, "cache_control", json_incref(cc)) : GW_OK;
}

static bool
has_prefix(struct gw_str s, const char *p)
{
    size_t n = strlen(p);

    return s.len >= n && strncasecmp(s.ptr, p, n) == 0;
}

/* An image_url part of messages[<i>].content[<k>] -> an image block appended to <out>. */
static enum gw_code
convert_image(struct req_conv *c, size_t i, size_t k, const json_t *part, json_t *out)
{
    const json_t *iu = json_object_get(part, "image_url");
    const json_t *url = json_is_object(iu) ? json_object_get(iu, "url") : iu;
    struct gw_str u = str_of(url);
    json_t *src, *b;

    if (!json_is_string(url))
        return refuse(c, "messages[%zu].content[%zu].image_url.url: missing", i, k);
    if (has_prefix(u, "data:")) {
        const char *semi = memchr(u.ptr, ';', u.len);
        const char *b64 = memmem(u.ptr, u.len, ";base64,", T_LEN(";base64,"));
        const char *data;

        if (!semi || !b64)
            return refuse(c,
                          "messages[%zu].content[%zu].image_url.url: only base64 data URLs "
                          "can be sent to an Anthropic model",
                          i, k);
        data = b64 + T_LEN(";base64,");
        src = json_object();
        if (!src || set_new(src, "type", json_string("base64")) != GW_OK ||
            set_new(src, "media_type",
                    json_stringn(u.ptr + T_LEN("data:"),
                                 (size_t)(semi - u.ptr) - T_LEN("data:"))) != GW_OK ||
            set_new(src, "data", json_stringn(data, (size_t)(u.ptr + u.len - data))) != GW_OK) {
            json_decref(src);
            return GW_E_NOMEM;
        }
    } else if (has_prefix(u, "http://") || has_prefix(u, "https://")) {
        src = json_pack("{s:s,s:O}", "type", "url", "url", url);
        if (!src)
            return GW_E_NOMEM;
    } else {
        return refuse(c,
                      "messages[%zu].content[%zu].image_url.url: only data: and http(s) URLs "
                      "can be sent to an Anthropic model",
                      i, k);
    }
    b = json_object();
    if (!b || set_new(b, "type", json_string("image")) != GW_OK) {
        json_decref(src);
        json_decref(b);
        return GW_E_NOMEM;
    }
    if (set_new(b, "source", src) != GW_OK || copy_cache_control(part, b) != GW_OK) {
        json_decref(b);
        return GW_E_NOMEM;
    }
    return append_new(out, b);
}

/* A text block of <text> (a JSON string), with <part>'s cache_control, onto <out>;
 * nothing for an empty text. */
static enum gw_code
append_text(json_t *out, json_t *text, const json_t *part)
{
    json_t *b;

    if (json_string_length(text) == 0)
        return GW_OK;
    b = json_pack("{s:s,s:O}", "type", "text", "text", text);
    if (!b || (part && copy_cache_control(part, b) != GW_OK)) {
        json_decref(b);
        return GW_E_NOMEM;
    }
    return append_new(out, b);
}

/* The parts of messages[<i>].content (an array) -> blocks appended to <out>. */
static enum gw_code
convert_parts(struct req_conv *c, size_t i, const json_t *parts, bool assistant, json_t *out)
{
    const json_t *part;
    size_t k;

    json_array_foreach(parts, k, part)
    {
        const json_t *type = json_object_get(part, "type");
        enum gw_code rc;

        if (!json_is_object(part) || !json_is_string(type))
            return refuse(c, "messages[%zu].content[%zu]: a part needs a string \"type\"", i, k);
        if (str_is(type, "text")) {
            json_t *text = json_object_get(part, "text");

            if (!json_is_string(text))
                return refuse(c, "messages[%zu].content[%zu].text: missing", i, k);
            rc = append_text(out, text, part);
        } else if (str_is(type, "refusal") && assistant) {
            json_t *text = json_object_get(part, "refusal");

            if (!json_is_string(text))
                return refuse(c, "messages[%zu].content[%zu].refusal: missing", i, k);
            rc = append_text(out, text, NULL);
        } else if (str_is(type, "image_url")) {
            if (assistant)
                return refuse(c,
                              "messages[%zu].content[%zu]: an assistant message cannot hold "
                              "an image for an Anthropic model",
                              i, k);
            rc = convert_image(c, i, k, part, out);
        } else if (str_is(type, "input_audio") || str_is(type, "file")) {
            return refuse(c,
                          "messages[%zu].content[%zu]: %s parts cannot be sent to an "
                          "Anthropic model",
                          i, k, json_string_value(type));
        } else {
            return refuse(c,
                          "messages[%zu].content[%zu].type: this part type cannot be sent to "
                          "an Anthropic model",
                          i, k);
        }
        if (rc != GW_OK)
            return rc;
    }
    return GW_OK;
}

/* A content (string, array of parts, null) -> a new array of blocks in <*out>. */
static enum gw_code
content_blocks(struct req_conv *c, size_t i, json_t *content, bool assistant, json_t **out)
{
    enum gw_code rc = GW_OK;

    *out = json_array();
    if (!*out)
        return GW_E_NOMEM;
    if (json_is_string(content))
        rc = append_text(*out, content, NULL);
    else if (json_is_array(content))
        rc = convert_parts(c, i, content, assistant, *out);
    else if (content && !json_is_null(content))
        rc = refuse(c, "messages[%zu].content: must be a string or an array of parts", i);
    if (rc != GW_OK) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

static enum gw_code
system_append(struct req_conv *c, struct gw_str s)
{
    if (s.len == 0)
        return GW_OK;
    if (c->system.len && gw_buf_append(&c->system, "\n\n", 2) != GW_OK)
        return GW_E_NOMEM;
    return gw_buf_append_str(&c->system, s);
}

static enum gw_code
add_system(struct req_conv *c, size_t i, const json_t *m)
{
    const json_t *content = json_object_get(m, "content");
    const json_t *part;
    size_t k;

    if (json_is_string(content))
        return system_append(c, str_of(content));
    if (!json_is_array(content))
        return refuse(c, "messages[%zu].content: must be a string or an array of text parts", i);
    json_array_foreach(content, k, part)
    {
        const json_t *text = json_object_get(part, "text");
        enum gw_code rc;

        if (!str_is(json_object_get(part, "type"), "text") || !json_is_string(text))
            return refuse(c, "messages[%zu].content[%zu]: a system message holds text parts only",
                          i, k);
        rc = system_append(c, str_of(text));
        if (rc != GW_OK)
            return rc;
    }
    return GW_OK;
}

static enum gw_code
add_user(struct req_conv *c, size_t i, const json_t *m)
{
    json_t *content = json_object_get(m, "content");
    json_t *blocks;
    enum gw_code rc;

    if (json_is_string(content))
        return push_message(c, "user", json_incref(content));
    if (!json_is_array(content))
        return refuse(c, "messages[%zu].content: must be a string or an array of parts", i);
    rc = content_blocks(c, i, content, false, &blocks);
    return rc == GW_OK ? push_message(c, "user", blocks) : rc;
}

/* messages[<i>].tool_calls[<k>] -> a tool_use block appended to <out>. */
static enum gw_code
convert_tool_call(struct req_conv *c, size_t i, size_t k, const json_t *call, json_t *out)
{
    const json_t *fn = json_object_get(call, "function");
    json_t *id = json_object_get(call, "id");
    json_t *name = json_object_get(fn, "name");
    const json_t *args = json_object_get(fn, "arguments");
    const json_t *type = json_object_get(call, "type");
    struct gw_str a = str_of(args);
    json_t *input = NULL, *b;
    json_error_t err;
    size_t p = 0;

    if (!json_is_object(call) || (type && !str_is(type, "function")) || !json_is_object(fn))
        return refuse(c,
                      "messages[%zu].tool_calls[%zu]: only function tool calls can be sent "
                      "to an Anthropic model",
                      i, k);
    if (!json_is_string(id) || !json_is_string(name))
        return refuse(c, "messages[%zu].tool_calls[%zu]: needs an id and a function name", i, k);
    if (args && !json_is_string(args) && !json_is_null(args))
        return refuse(c, "messages[%zu].tool_calls[%zu].function.arguments: must be a string", i,
                      k);
    while (p < a.len &&
           (a.ptr[p] == ' ' || a.ptr[p] == '\t' || a.ptr[p] == '\n' || a.ptr[p] == '\r'))
        p++;
    if (p == a.len) {
        input = json_object();
        if (!input)
            return GW_E_NOMEM;
    } else {
        input = json_loadb(a.ptr, a.len, JSON_ALLOW_NUL, &err);
        if (!input && json_error_code(&err) == json_error_out_of_memory)
            return GW_E_NOMEM;
        if (!json_is_object(input)) {
            json_decref(input);
            return refuse(c,
                          "messages[%zu].tool_calls[%zu].function.arguments: must be a JSON "
                          "object for an Anthropic model",
                          i, k);
        }
    }
    b = json_pack("{s:s,s:O,s:O,s:o}", "type", "tool_use", "id", id, "name", name, "input", input);
    return append_new(out, b);
}

static enum gw_code
add_assistant(struct req_conv *c, size_t i, const json_t *m)
{
    json_t *content = json_object_get(m, "content");
    const json_t *calls = json_object_get(m, "tool_calls");
    const json_t *call;
    json_t *blocks;
    enum gw_code rc;
    size_t k;

    if (calls && !json_is_null(calls) && !json_is_array(calls))
        return refuse(c, "messages[%zu].tool_calls: must be an array", i);
    if (json_array_size(calls) == 0 && json_is_string(content))
        return push_message(c, "assistant", json_incref(content));
    rc = content_blocks(c, i, content, true, &blocks);
    if (rc != GW_OK)
        return rc;
    json_array_foreach(calls, k, call)
    {
        rc = convert_tool_call(c, i, k, call, blocks);
        if (rc != GW_OK) {
            json_decref(blocks);
            return rc;
        }
    }
    if (json_array_size(blocks) == 0) {
        /* Nothing to say (null content, no calls): Anthropic refuses empty turns. */
        json_decref(blocks);
        return GW_OK;
    }
    return push_message(c, "assistant", blocks);
}

static enum gw_code
add_tool(struct req_conv *c, size_t i, const json_t *m)
{
    json_t *id = json_object_get(m, "tool_call_id");
    json_t *content = json_object_get(m, "content");
    json_t *res, *b, *blocks;
    enum gw_code rc;

    if (!json_is_string(id))
        return refuse(c, "messages[%zu].tool_call_id: missing", i);
    if (json_is_array(content)) {
        rc = content_blocks(c, i, content, false, &res);
        if (rc != GW_OK)
            return rc;
    } else if (json_is_string(content)) {
        res = json_incref(content);
    } else if (!content || json_is_null(content)) {
        res = json_string("");
    } else {
        return refuse(c, "messages[%zu].content: must be a string or an array of parts", i);
    }
    if (!res)
        return GW_E_NOMEM;
    b = json_pack("{s:s,s:O,s:o}", "type", "tool_result", "tool_use_id", id, "content", res);
    blocks = json_array();
    if (!b || !blocks) {
        json_decref(b);
        json_decref(blocks);
        return GW_E_NOMEM;
    }
    if (append_new(blocks, b) != GW_OK) {
        json_decref(blocks);
        return GW_E_NOMEM;
    }
    return push_message(c, "user", blocks);
}

static enum gw_code
convert_messages(struct req_conv *c, const json_t *messages)
{
    const json_t *m;
    size_t i;

    if (!json_is_array(messages))
        return refuse(c, "messages: must be an array");
    json_array_foreach(messages, i, m)
    {
        const json_t *role = json_object_get(m, "role");
        enum gw_code rc;

        if (!json_is_object(m) || !json_is_string(role))
            return refuse(c, "messages[%zu]: needs a string \"role\"", i);
        if (str_is(role, "system") || str_is(role, "developer"))
            rc = add_system(c, i, m);
        else if (str_is(role, "user"))
            rc = add_user(c, i, m);
        else if (str_is(role, "assistant"))
            rc = add_assistant(c, i, m);
        else if (str_is(role, "tool"))
            rc = add_tool(c, i, m);
        else
            rc = refuse(c, "messages[%zu].role: this role cannot be sent to an Anthropic model", i);
        if (rc != GW_OK)
            return rc;
    }
    if (json_array_size(c->msgs) == 0)
        return refuse(c, "messages: an Anthropic model needs at least one user message");
    if (!str_is(json_object_get(json_array_get(c->msgs, 0), "role"), "user"))
        return refuse(c, "messages: an Anthropic model needs the conversation to start with a "
                         "user message, not an assistant message");
    return GW_OK;
}

/* Fields the Messages API cannot express. */
static enum gw_code
check_refusals(struct req_conv *c, const json_t *root)
{
    const json_t *v;
    size_t k;

    v = json_object_get(root, "n");
    if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 1))
        return refuse(c, "n: an Anthropic model returns one choice (n must be 1)");
    if (json_is_true(json_object_get(root, "logprobs")))
        return refuse(c, "logprobs: an Anthropic model does not return log probabilities");
    v = json_object_get(root, "top_logprobs");
    if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 0))
        return refuse(c, "top_logprobs: an Anthropic model does not return log probabilities");
    v = json_object_get(root, "response_format");
    if (v && !json_is_null(v) && !str_is(json_object_get(v, "type"), "text"))
        return refuse(c, "response_format: JSON output modes cannot be sent to an Anthropic "
                         "model (only type text)");
    v = json_object_get(root, "audio");
    if (v && !json_is_null(v))
        return refuse(c, "audio: an Anthropic model does not produce audio");
    v = json_object_get(root, "modalities");
    if (v && !json_is_null(v)) {
        const json_t *e;

        if (!json_is_array(v))
            return refuse(c, "modalities: must be an array");
        json_array_foreach(v, k, e)
        {
            if (!str_is(e, "text"))
                return refuse(c, "modalities[%zu]: an Anthropic model produces text only", k);
        }
    }
    v = json_object_get(root, "functions");
    if (v && !json_is_null(v))
        return refuse(c, "functions: the legacy functions field cannot be sent to an Anthropic "
                         "model (use tools)");
    v = json_object_get(root, "function_call");
    if (v && !json_is_null(v))
        return refuse(c, "function_call: the legacy function_call field cannot be sent to an "
                         "Anthropic model (use tool_choice)");
    v = json_object_get(root, "prediction");
    if (v && !json_is_null(v))
        return refuse(c, "prediction: predicted outputs cannot be sent to an Anthropic model");
    v = json_object_get(root, "web_search_options");
    if (v && !json_is_null(v))
        return refuse(c, "web_search_options: cannot be sent to an Anthropic model");
    return GW_OK;
}

/* A positive integer field: GW_OK with <*out> (0 when absent or null). */
static enum gw_code
read_max(struct req_conv *c, const json_t *root, const char *key, uint64_t *out)
{
    const json_t *v = json_object_get(root, key);

    *out = 0;
    if (!v || json_is_null(v))
        return GW_OK;
    if (!json_is_integer(v) || json_integer_value(v) <= 0)
        return refuse(c, "%s: must be a positive integer", key);
    *out = (uint64_t)json_integer_value(v);
    return GW_OK;
}

static enum gw_code
convert_tools(struct req_conv *c, const json_t *root, json_t *dst)
{
    const json_t *tools = json_object_get(root, "tools");
    const json_t *choice = json_object_get(root, "tool_choice");
    const json_t *t;
    json_t *out, *tc = NULL;
    size_t k;

    if (!tools || json_is_null(tools))
        return GW_OK;
    if (!json_is_array(tools))
        return refuse(c, "tools: must be an array");
    if (json_array_size(tools) == 0)
        return GW_OK;
    out = json_array();
    if (!out)
        return GW_E_NOMEM;
    json_array_foreach(tools, k, t)
    {
        const json_t *type = json_object_get(t, "type");
        const json_t *fn = json_object_get(t, "function");
        json_t *name = json_object_get(fn, "name");
        json_t *desc = json_object_get(fn, "description");
        json_t *params = json_object_get(fn, "parameters");
        json_t *o;

        if (!json_is_object(t) || !str_is(type, "function") || !json_is_object(fn)) {
            json_decref(out);
            return refuse(c, "tools[%zu]: only function tools can be sent to an Anthropic model",
                          k);
        }
        if (!json_is_string(name) || json_string_length(name) == 0) {
            json_decref(out);
            return refuse(c, "tools[%zu].function.name: missing", k);
        }
        if (params && !json_is_null(params) && !json_is_object(params)) {
            json_decref(out);
            return refuse(c, "tools[%zu].function.parameters: must be a JSON schema object", k);
        }
        o = json_pack("{s:O,s:O*,s:o}", "name", name, "description",
                      json_is_string(desc) ? desc : NULL, "input_schema",
                      json_is_object(params)
                          ? json_incref(params)
                          : json_pack("{s:s,s:{}}", "type", "object", "properties"));
        if (append_new(out, o) != GW_OK) {
            json_decref(out);
            return GW_E_NOMEM;
        }
    }
    if (set_new(dst, "tools", out) != GW_OK)
        return GW_E_NOMEM;

    if (json_is_string(choice)) {
        if (str_is(choice, "auto"))
            tc = json_pack("{s:s}", "type", "auto");
        else if (str_is(choice, "required"))
            tc = json_pack("{s:s}", "type", "any");
        else if (str_is(choice, "none"))
            tc = json_pack("{s:s}", "type", "none");
        else
            return refuse(c, "tool_choice: must be auto, required, none or a function");
        if (!tc)
            return GW_E_NOMEM;
    } else if (json_is_object(choice)) {
        json_t *name = json_object_get(json_object_get(choice, "function"), "name");

        if (!str_is(json_object_get(choice, "type"), "function") || !json_is_string(name))
            return refuse(c, "tool_choice: only auto, required, none or a named function can "
                             "be sent to an Anthropic model");
        tc = json_pack("{s:s,s:O}", "type", "tool", "name", name);
        if (!tc)
            return GW_E_NOMEM;
    } else if (choice && !json_is_null(choice)) {
        return refuse(c, "tool_choice: must be a string or an object");
    }
    if (json_is_false(json_object_get(root, "parallel_tool_calls")) &&
        !str_is(json_object_get(tc, "type"), "none")) {
        if (!tc)
            tc = json_pack("{s:s}", "type", "auto");
        if (!tc || json_object_set_new(tc, "disable_parallel_tool_use", json_true()) != 0) {
            json_decref(tc);
            return GW_E_NOMEM;
        }
    }
    return tc ? set_new(dst, "tool_choice", tc) : GW_OK;
}

/* temperature (clamped to 1), top_p, stop, user -> the Messages fields. */
static enum gw_code
convert_sampling(struct req_conv *c, const json_t *root, json_t *dst)
{
    json_t *t = json_object_get(root, "temperature");
    json_t *p = json_object_get(root, "top_p");
    json_t *stop = json_object_get(root, "stop");
    json_t *user = json_object_get(root, "user");
    enum gw_code rc = GW_OK;

    if (json_is_integer(t))
        rc = set_new(dst, "temperature",
                     json_integer(json_integer_value(t) > 1 ? 1 : json_integer_value(t)));
    else if (json_is_real(t))
        rc = set_new(dst, "temperature",
                     json_real(json_real_value(t) > 1.0 ? 1.0 : json_real_value(t)));
    else if (t && !json_is_null(t))
        return refuse(c, "temperature: must be a number");
    if (rc != GW_OK)
        return rc;
    if (p && !json_is_null(p) && !json_is_number(p))
        return refuse(c, "top_p: must be a number");
    /* Newer Anthropic models refuse temperature and top_p together: temperature wins. */
    if (json_is_number(p) && !json_is_number(t))
        rc = set_new(dst, "top_p", json_incref(p));
    if (rc != GW_OK)
        return rc;
    if (json_is_string(stop)) {
        if (json_string_length(stop) > 0)
            rc = set_new(dst, "stop_sequences", json_pack("[O]", stop));
    } else if (json_is_array(stop)) {
        json_t *s, *seq = json_array();
        size_t k;

        if (!seq)
            return GW_E_NOMEM;
        json_array_foreach(stop, k, s)
        {
            if (!json_is_string(s)) {
                json_decref(seq);
                return refuse(c, "stop[%zu]: must be a string", k);
            }
            if (json_string_length(s) > 0 && append_new(seq, json_incref(s)) != GW_OK) {
                json_decref(seq);
                return GW_E_NOMEM;
            }
        }
        if (json_array_size(seq) > 0)
            rc = set_new(dst, "stop_sequences", seq);
        else
            json_decref(seq);
    } else if (stop && !json_is_null(stop)) {
        return refuse(c, "stop: must be a string or an array of strings");
    }
    if (rc != GW_OK)
        return rc;
    if (!json_is_string(user) || json_string_length(user) == 0)
        user = json_object_get(root, "safety_identifier");
    if (json_is_string(user) && json_string_length(user) > 0)
        rc = set_new(dst, "metadata", json_pack("{s:O}", "user_id", user));
    return rc;
}

enum gw_code
dl_anthropic_from_chat_jansson(const char *body, size_t len, struct gw_str model,
                               uint64_t spec_max_output, struct gw_buf *out, char *why,
                               size_t whylen)
{
    struct req_conv c = {.why = why, .whylen = whylen};
    uint64_t max_completion, max_tokens, max;
    json_t *root, *dst = NULL;
    json_error_t err;
    size_t start = out->len;
    enum gw_code rc;

    if (why && whylen)
        why[0] = '\0';
    root = json_loadb(body, len, JSON_ALLOW_NUL, &err);
    if (!root)
        return json_error_code(&err) == json_error_out_of_memory
                   ? GW_E_NOMEM
                   : refuse(&c, "the body is not valid JSON");
    if (!json_is_object(root)) {
        rc = refuse(&c, "the body must be a JSON object");
        goto out;
    }
    rc = check_refusals(&c, root);
    if (rc == GW_OK)
        rc = read_max(&c, root, "max_completion_tokens", &max_completion);
    if (rc == GW_OK)
        rc = read_max(&c, root, "max_tokens", &max_tokens);
    if (rc != GW_OK)
        goto out;
    max = max_completion    ? max_completion
          : max_tokens      ? max_tokens
          : spec_max_output ? spec_max_output
                            : DL_ANTHROPIC_FALLBACK_MAX_TOKENS;
    rc = GW_E_NOMEM;
    c.msgs = json_array();
    dst = json_object();
    if (!c.msgs || !dst)
        goto out;
    if (set_new(dst, "model", json_stringn(model.len ? model.ptr : "", model.len)) != GW_OK ||
        set_new(dst, "max_tokens", json_count(max)) != GW_OK)
        goto out;
    rc = convert_messages(&c, json_object_get(root, "messages"));
    if (rc != GW_OK)
        goto out;
    rc = GW_E_NOMEM;
    if (c.system.len > 0 &&
        set_new(dst, "system", json_stringn_nocheck(c.system.data, c.system.len)) != GW_OK)
        goto out;
    if (set_new(dst, "messages", json_incref(c.msgs)) != GW_OK)
        goto out;
    rc = convert_tools(&c, root, dst);
    if (rc == GW_OK)
        rc = convert_sampling(&c, root, dst);
    if (rc == GW_OK && json_is_true(json_object_get(root, "stream")))
        rc = set_new(dst, "stream", json_true());
    if (rc == GW_OK)
        rc = dump_append(dst, out);
out:
    if (rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    json_decref(dst);
    json_decref(c.msgs);
    json_decref(root);
    gw_buf_fini(&c.system);
    return rc;
}

/* ---- request: fast path ----
 * The common request: messages of role system/developer, user or assistant, each with
 * a string content (and perhaps a "name"), max_tokens/max_completion_tokens, stream,
 * and top-level fields the jansson route ignores. Anything else (parts, tools, sampling,
 * refusals, more than FAST_REQ_MAX_MSGS messages) takes the jansson route. */

#define FAST_REQ_MAX_MSGS 64

enum fast_role { FR_SYSTEM, FR_USER, FR_ASSISTANT };

struct fast_msg {
    enum fast_role role;
    struct dl_json_str content;
};

/* read_max over the field <f>: false when the jansson route must refuse it. */
static bool
fast_read_max(const struct dl_json *j, const struct fs_field *f, uint64_t *out)
{
    *out = 0;
    if (f->kind == FS_ABSENT || f->kind == FS_NULL)
        return true;
    if (f->kind != FS_INT)
        return false;
    *out = fs_count(j, f);
    return *out > 0;
}

/* The messages array <f> of <doc> into <msgs> (<*n> of them). False when one is not of
 * the fast shape. */
static bool
fast_read_msgs(const struct dl_json *doc, const struct fs_field *f, struct fast_msg *msgs,
               size_t *n)
{
    struct dl_json j = fs_at(doc, f->at);
    bool first = true;
    int r;

    *n = 0;
    if (!dl_json_arr_enter(&j))
        return false;
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        struct fs_field m[] = {FS_FIELD("role"), FS_FIELD("content"), FS_FIELD("name")};
        struct fast_msg *x = &msgs[*n];

        if (*n == FAST_REQ_MAX_MSGS || dl_json_peek(&j) != '{' || !fs_scan_keys(&j, m, 3, true) ||
            m[0].kind != FS_STR || m[1].kind != FS_STR)
            return false;
        if (dl_json_key_is(&j, &m[0].str, "user", 4))
            x->role = FR_USER;
        else if (dl_json_key_is(&j, &m[0].str, "assistant", 9))
            x->role = FR_ASSISTANT;
        else if (dl_json_key_is(&j, &m[0].str, "system", 6) ||
                 dl_json_key_is(&j, &m[0].str, "developer", 9))
            x->role = FR_SYSTEM;
        else
            return false;
        x->content = m[1].str;
        (*n)++;
    }
    return r == 0;
}

/* Renders the turns: consecutive messages of one role (system messages between them do
 * not count) merge into one turn of text blocks, empty texts dropped; a lone message
 * keeps its string. */
static enum gw_code
fast_render_turns(const struct dl_json *j, const struct fast_msg *msgs, size_t n,
                  struct gw_buf *out)
{
    size_t i = 0, k;
    bool first_turn = true;

    while (i < n) {
        enum fast_role role = msgs[i].role;
        size_t end = i, count = 0;
        bool first_block = true;

        if (role == FR_SYSTEM) {
            i++;
            continue;
        }
        for (k = i; k < n; k++) {
            if (msgs[k].role == FR_SYSTEM)
                continue;
            if (msgs[k].role != role)
                break;
            count++;
            end = k + 1;
        }
        if (gw_buf_append_cstr(out, first_turn ? "{\"role\":\"" : ",{\"role\":\"") != GW_OK ||
            gw_buf_append_cstr(out, role == FR_USER ? "user" : "assistant") != GW_OK ||
            gw_buf_append_cstr(out, "\",\"content\":") != GW_OK)
            return GW_E_NOMEM;
        first_turn = false;
        if (count == 1) {
            if (gw_buf_append(out, "\"", 1) != GW_OK ||
                jdump_tok_body(out, j, &msgs[i].content) != GW_OK ||
                gw_buf_append(out, "\"}", 2) != GW_OK)
                return GW_E_NOMEM;
            i = end;
            continue;
        }
        if (gw_buf_append(out, "[", 1) != GW_OK)
            return GW_E_NOMEM;
        for (k = i; k < end; k++) {
            if (msgs[k].role == FR_SYSTEM || msgs[k].content.dlen == 0)
                continue;
            if (gw_buf_append_cstr(out, first_block ? "{\"type\":\"text\",\"text\":\""
                                                    : ",{\"type\":\"text\",\"text\":\"") != GW_OK ||
                jdump_tok_body(out, j, &msgs[k].content) != GW_OK ||
                gw_buf_append(out, "\"}", 2) != GW_OK)
                return GW_E_NOMEM;
            first_block = false;
        }
        if (gw_buf_append(out, "]}", 2) != GW_OK)
            return GW_E_NOMEM;
        i = end;
    }
    return GW_OK;
}

/* The fast route of dl_anthropic_from_chat: false (<out> as it was) when the jansson
 * route must decide, else true with the outcome in <*rc>. */
static bool
from_chat_fast(const char *body, size_t len, struct gw_str model, uint64_t spec_max_output,
               struct gw_buf *out, enum gw_code *rc)
{
    /* messages, the max fields and stream; then what the jansson route ignores */
    struct fs_field top[] = {
        FS_FIELD("messages"),
        FS_FIELD("max_completion_tokens"),
        FS_FIELD("max_tokens"),
        FS_FIELD("stream"),
        FS_FIELD("model"),
        FS_FIELD("stream_options"),
        FS_FIELD("frequency_penalty"),
        FS_FIELD("presence_penalty"),
        FS_FIELD("seed"),
        FS_FIELD("logit_bias"),
        FS_FIELD("store"),
        FS_FIELD("metadata"),
        FS_FIELD("service_tier"),
        FS_FIELD("reasoning_effort"),
        FS_FIELD("verbosity"),
        FS_FIELD("prompt_cache_key"),
    };
    struct fast_msg msgs[FAST_REQ_MAX_MSGS];
    uint64_t max_completion, max_tokens, max;
    size_t n, i, start = out->len;
    bool any_system = false;
    struct dl_json j;
    enum gw_code e = GW_E_NOMEM;

    /* the model is written raw: plain ASCII only (jansson checks and escapes the rest) */
    for (i = 0; i < model.len; i++) {
        unsigned char ch = (unsigned char)model.ptr[i];

        if (ch < 0x20 || ch >= 0x80 || ch == '"' || ch == '\\')
            return false;
    }
    dl_json_init(&j, body, len);
    if (!fs_scan_keys(&j, top, sizeof(top) / sizeof(top[0]), true) || !dl_json_end(&j) ||
        top[0].kind != FS_ARR || !fast_read_max(&j, &top[1], &max_completion) ||
        !fast_read_max(&j, &top[2], &max_tokens) || !fast_read_msgs(&j, &top[0], msgs, &n))
        return false;
    for (i = 0; i < n && msgs[i].role == FR_SYSTEM; i++)
        ;
    if (i == n || msgs[i].role != FR_USER)
        return false; /* refused: no turn, or an assistant turn first */
    max = max_completion    ? max_completion
          : max_tokens      ? max_tokens
          : spec_max_output ? spec_max_output
                            : DL_ANTHROPIC_FALLBACK_MAX_TOKENS;
    if (gw_buf_append_cstr(out, "{\"model\":\"") != GW_OK ||
        gw_buf_append(out, model.ptr, model.len) != GW_OK ||
        gw_buf_append_cstr(out, "\",\"max_tokens\":") != GW_OK || append_count(out, max) != GW_OK)
        goto done;
    for (i = 0; i < n; i++) {
        if (msgs[i].role != FR_SYSTEM || msgs[i].content.dlen == 0)
            continue;
        if (gw_buf_append_cstr(out, any_system ? "\\n\\n" : ",\"system\":\"") != GW_OK ||
            jdump_tok_body(out, &j, &msgs[i].content) != GW_OK)
            goto done;
        any_system = true;
    }
    if ((any_system && gw_buf_append(out, "\"", 1) != GW_OK) ||
        gw_buf_append_cstr(out, ",\"messages\":[") != GW_OK ||
        fast_render_turns(&j, msgs, n, out) != GW_OK || gw_buf_append(out, "]", 1) != GW_OK ||
        (top[3].kind == FS_TRUE && gw_buf_append_cstr(out, ",\"stream\":true") != GW_OK))
        goto done;
    e = gw_buf_append(out, "}", 1);
done:
    if (e != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    *rc = e;
    return true;
}

enum gw_code
dl_anthropic_from_chat(const char *body, size_t len, struct gw_str model, uint64_t spec_max_output,
                       struct gw_buf *out, char *why, size_t whylen)
{
    enum gw_code rc;

    if (why && whylen)
        why[0] = '\0';
    if (from_chat_fast(body, len, model, spec_max_output, out, &rc))
        return rc;
    return dl_anthropic_from_chat_jansson(body, len, model, spec_max_output, out, why, whylen);
}

/* ---- answer ---- */

/* Chat's finish_reason for a Messages stop_reason; NULL for none. */
static const char *
finish_of(const json_t *stop)
{
    if (!json_is_string(stop))
        return NULL;
    if (str_is(stop, "max_tokens") || str_is(stop, "model_context_window_exceeded"))
        return "length";
    if (str_is(stop, "tool_use"))
        return "tool_calls";
    if (str_is(stop, "refusal"))
        return "content_filter";
    return "stop"; /* end_turn, stop_sequence, pause_turn, and anything newer */
}

/* Reads an Anthropic usage object into <u>, only the fields it carries. */
static void
read_usage(const json_t *v, struct gw_usage *u)
{
    const json_t *f;

    if ((f = json_object_get(v, "input_tokens")) && json_is_integer(f))
        u->input_tokens = count_of(f);
    if ((f = json_object_get(v, "output_tokens")) && json_is_integer(f))
        u->output_tokens = count_of(f);
    if ((f = json_object_get(v, "cache_read_input_tokens")) && json_is_integer(f))
        u->cache_read_tokens = count_of(f);
    if ((f = json_object_get(v, "cache_creation_input_tokens")) && json_is_integer(f))
        u->cache_write_tokens = count_of(f);
}

static uint64_t
prompt_of(const struct gw_usage *u)
{
    return sat_add(sat_add(u->input_tokens, u->cache_read_tokens), u->cache_write_tokens);
}

static json_t *
chat_usage(const struct gw_usage *u)
{
    uint64_t prompt = prompt_of(u);

    return json_pack("{s:o,s:o,s:o,s:{s:o}}", "prompt_tokens", json_count(prompt),
                     "completion_tokens", json_count(u->output_tokens), "total_tokens",
                     json_count(sat_add(prompt, u->output_tokens)), "prompt_tokens_details",
                     "cached_tokens", json_count(u->cache_read_tokens));
}

/* "chatcmpl-" + <id> as a new JSON string. */
static json_t *
chat_id(const json_t *id)
{
    struct gw_buf b = {0};
    json_t *s = NULL;

    if (gw_buf_append_cstr(&b, "chatcmpl-") == GW_OK && gw_buf_append_str(&b, str_of(id)) == GW_OK)
        s = json_stringn_nocheck(b.data, b.len);
    gw_buf_fini(&b);
    return s;
}

/* The content blocks of an answer -> <*text> (joined text, NULL when none) and
 * <calls> (tool_calls entries). GW_E_UPSTREAM_PROTOCOL for malformed blocks. */
static enum gw_code
answer_blocks(const json_t *content, json_t **text, json_t *calls)
{
    struct gw_buf t = {0}, args = {0};
    bool any_text = false;
    const json_t *b;
    enum gw_code rc = GW_OK;
    size_t k;

    *text = NULL;
    json_array_foreach(content, k, b)
    {
        const json_t *type = json_object_get(b, "type");

        if (!json_is_object(b) || !json_is_string(type)) {
            rc = GW_E_UPSTREAM_PROTOCOL;
            break;
        }
        if (str_is(type, "text")) {
            const json_t *s = json_object_get(b, "text");

            if (!json_is_string(s)) {
                rc = GW_E_UPSTREAM_PROTOCOL;
                break;
            }
            any_text = true;
            if (gw_buf_append_str(&t, str_of(s)) != GW_OK) {
                rc = GW_E_NOMEM;
                break;
            }
        } else if (str_is(type, "tool_use")) {
            json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name");
            const json_t *input = json_object_get(b, "input");
            json_t *call;

            if (!json_is_string(id) || !json_is_string(name) || !input) {
                rc = GW_E_UPSTREAM_PROTOCOL;
                break;
            }
            gw_buf_reset(&args);
            if (dump_append(input, &args) != GW_OK) {
                rc = GW_E_NOMEM;
                break;
            }
            call = json_pack("{s:O,s:s,s:{s:O,s:s%}}", "id", id, "type", "function", "function",
                             "name", name, "arguments", args.data, args.len);
            if (append_new(calls, call) != GW_OK) {
                rc = GW_E_NOMEM;
                break;
            }
        }
        /* thinking, redacted_thinking, server tool blocks: not part of a Chat answer */
    }
    if (rc == GW_OK && any_text) {
        *text = json_stringn_nocheck(t.len ? t.data : "", t.len);
        if (!*text)
            rc = GW_E_NOMEM;
    }
    gw_buf_fini(&t);
    gw_buf_fini(&args);
    return rc;
}

enum gw_code
dl_anthropic_answer_to_chat_jansson(const char *body, size_t len, uint64_t created_s,
                                    struct gw_buf *out, struct gw_usage *usage)
{
    json_t *root, *calls = NULL, *text = NULL, *msg = NULL, *ans = NULL;
    const json_t *content, *type, *u;
    const char *finish;
    json_error_t err;
    size_t start = out->len;
    enum gw_code rc;

    memset(usage, 0, sizeof(*usage));
    root = json_loadb(body, len, JSON_ALLOW_NUL, &err);
    if (!root)
        return json_error_code(&err) == json_error_out_of_memory ? GW_E_NOMEM
                                                                 : GW_E_UPSTREAM_PROTOCOL;
    content = json_object_get(root, "content");
    type = json_object_get(root, "type");
    u = json_object_get(root, "usage");
    rc = GW_E_UPSTREAM_PROTOCOL;
    if (!json_is_object(root) || !json_is_array(content) || (type && !str_is(type, "message")))
        goto out;
    rc = GW_E_NOMEM;
    calls = json_array();
    if (!calls)
        goto out;
    rc = answer_blocks(content, &text, calls);
    if (rc != GW_OK)
        goto out;
    rc = GW_E_NOMEM;
    msg = json_pack("{s:s,s:o}", "role", "assistant", "content", text ? text : json_null());
    text = NULL;
    if (!msg ||
        (json_array_size(calls) > 0 && set_new(msg, "tool_calls", json_incref(calls)) != GW_OK))
        goto out;
    finish = finish_of(json_object_get(root, "stop_reason"));
    ans = json_pack("{s:o,s:s,s:o,s:s%,s:[{s:i,s:O,s:n,s:o}]}", "id",
                    chat_id(json_object_get(root, "id")), "object", "chat.completion", "created",
                    json_count(created_s), "model", str_of(json_object_get(root, "model")).ptr,
                    str_of(json_object_get(root, "model")).len, "choices", "index", 0, "message",
                    msg, "logprobs", "finish_reason", finish ? json_string(finish) : json_null());
    if (!ans)
        goto out;
    if (json_is_object(u)) {
        read_usage(u, usage);
        if (set_new(ans, "usage", chat_usage(usage)) != GW_OK)
            goto out;
    }
    rc = dump_append(ans, out);
out:
    if (rc != GW_OK) {
        memset(usage, 0, sizeof(*usage));
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    json_decref(text);
    json_decref(ans);
    json_decref(msg);
    json_decref(calls);
    json_decref(root);
    return rc;
}

/* ---- answer: fast path ---- */

/* The content of an answer holding text blocks (and blocks a Chat answer drops) only:
 * the joined text appended to <out> as a JSON value. False when a block is malformed
 * or a tool_use (the jansson route decides). */
static bool
answer_fast_text(const struct dl_json *doc, const struct fs_field *content, struct gw_buf *out,
                 enum gw_code *rc)
{
    struct dl_json j = fs_at(doc, content->at);
    size_t open = out->len;
    bool first = true, any_text = false;
    int r;

    *rc = GW_OK;
    if (!dl_json_arr_enter(&j) || gw_buf_append(out, "\"", 1) != GW_OK)
        return (*rc = GW_E_NOMEM), true;
    while ((r = dl_json_arr_next(&j, &first)) == 1) {
        struct fs_field b[] = {FS_FIELD("type"), FS_FIELD("text")};

        if (dl_json_peek(&j) != '{' || !fs_scan(&j, b, 2) || b[0].kind != FS_STR ||
            dl_json_key_is(&j, &b[0].str, "tool_use", 8))
            return false;
        if (!dl_json_key_is(&j, &b[0].str, "text", 4))
            continue; /* thinking, redacted_thinking, server tool blocks */
        if (b[1].kind != FS_STR)
            return false;
        any_text = true;
        if (jdump_field_body(out, &j, &b[1]) != GW_OK)
            return (*rc = GW_E_NOMEM), true;
    }
    if (r != 0)
        return false;
    if (!any_text) {
        out->len = open;
        return (*rc = gw_buf_append_cstr(out, "null")), true;
    }
    return (*rc = gw_buf_append(out, "\"", 1)), true;
}

/* The fast route of dl_anthropic_answer_to_chat: false (<out> and <*usage> as they
 * were) when the jansson route must decide, else true with the outcome in <*rc>. */
static bool
answer_fast(const char *body, size_t len, uint64_t created_s, struct gw_buf *out,
            struct gw_usage *usage, enum gw_code *rc)
{
    struct fs_field top[] = {FS_FIELD("content"), FS_FIELD("type"),  FS_FIELD("usage"),
                             FS_FIELD("id"),      FS_FIELD("model"), FS_FIELD("stop_reason")};
    struct fs_field u[] = FS_USAGE_FIELDS;
    size_t start = out->len;
    const char *finish;
    struct dl_json j;
    enum gw_code e = GW_E_NOMEM;

    top[2].sub = u;
    top[2].nsub = 4;
    if (!fs_doc(&j, body, len, top, 6) || top[0].kind != FS_ARR ||
        (top[1].kind != FS_ABSENT &&
         (top[1].kind != FS_STR || !dl_json_key_is(&j, &top[1].str, "message", 7))))
        return false;
    if (gw_buf_append_cstr(out, "{\"id\":\"chatcmpl-") != GW_OK ||
        jdump_field_body(out, &j, &top[3]) != GW_OK ||
        gw_buf_append_cstr(out, "\",\"object\":\"chat.completion\",\"created\":") != GW_OK ||
        append_count(out, created_s) != GW_OK ||
        gw_buf_append_cstr(out, ",\"model\":\"") != GW_OK ||
        jdump_field_body(out, &j, &top[4]) != GW_OK ||
        gw_buf_append_cstr(out, "\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                                "\"content\":") != GW_OK)
        goto done;
    if (!answer_fast_text(&j, &top[0], out, &e)) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
        return false;
    }
    if (e != GW_OK)
        goto done;
    e = GW_E_NOMEM;
    finish = fs_finish(&j, &top[5]);
    if (gw_buf_append_cstr(out, "},\"logprobs\":null,\"finish_reason\":") != GW_OK ||
        (finish ? append_quoted(out, finish, "}]") : gw_buf_append_cstr(out, "null}]")) != GW_OK)
        goto done;
    if (top[2].kind == FS_OBJ) {
        uint64_t prompt;

        fs_usage(&j, u, usage);
        prompt = prompt_of(usage);
        if (gw_buf_append_cstr(out, ",\"usage\":{\"prompt_tokens\":") != GW_OK ||
            append_count(out, prompt) != GW_OK ||
            gw_buf_append_cstr(out, ",\"completion_tokens\":") != GW_OK ||
            append_count(out, usage->output_tokens) != GW_OK ||
            gw_buf_append_cstr(out, ",\"total_tokens\":") != GW_OK ||
            append_count(out, sat_add(prompt, usage->output_tokens)) != GW_OK ||
            gw_buf_append_cstr(out, ",\"prompt_tokens_details\":{\"cached_tokens\":") != GW_OK ||
            append_count(out, usage->cache_read_tokens) != GW_OK ||
            gw_buf_append_cstr(out, "}}") != GW_OK)
            goto done;
    }
    e = gw_buf_append_cstr(out, "}");
done:
    if (e != GW_OK) {
        memset(usage, 0, sizeof(*usage));
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    *rc = e;
    return true;
}

enum gw_code
dl_anthropic_answer_to_chat(const char *body, size_t len, uint64_t created_s, struct gw_buf *out,
                            struct gw_usage *usage)
{
    enum gw_code rc;

    memset(usage, 0, sizeof(*usage));
    if (answer_fast(body, len, created_s, out, usage, &rc))
        return rc;
    return dl_anthropic_answer_to_chat_jansson(body, len, created_s, out, usage);
}

/* ---- errors ---- */

/* Anthropic error type -> OpenAI type and code (one table for this dialect, STYLE.md 7). */
static const struct {
    const char *anthropic;
    const char *type;
    const char *code; /* NULL: "code":null */
} error_map[] = {
    {"invalid_request_error", "invalid_request_error", NULL},
    {"request_too_large", "invalid_request_error", NULL},
    {"authentication_error", "authentication_error", NULL},
    {"permission_error", "permission_error", NULL},
    {"not_found_error", "not_found_error", NULL},
    {"billing_error", "insufficient_quota", "insufficient_quota"},
    {"rate_limit_error", "requests", "rate_limit_exceeded"},
    {"timeout_error", "timeout_error", NULL},
    {"overloaded_error", "server_error", NULL},
    {"api_error", "server_error", NULL},
};

static const struct {
    int status;
    const char *type;
    const char *code;
} error_by_status[] = {
    {400, "invalid_request_error", NULL},
    {413, "invalid_request_error", NULL},
    {401, "authentication_error", NULL},
    {402, "insufficient_quota", "insufficient_quota"},
    {403, "permission_error", NULL},
    {404, "not_found_error", NULL},
    {408, "timeout_error", NULL},
    {504, "timeout_error", NULL},
    {429, "requests", "rate_limit_exceeded"},
};

static void
map_error(const json_t *atype, int status, const char **type, const char **code)
{
    size_t i;

    for (i = 0; i < sizeof(error_map) / sizeof(error_map[0]); i++)
        if (str_is(atype, error_map[i].anthropic)) {
            *type = error_map[i].type;
            *code = error_map[i].code;
            return;
        }
    for (i = 0; i < sizeof(error_by_status) / sizeof(error_by_status[0]); i++)
        if (error_by_status[i].status == status) {
            *type = error_by_status[i].type;
            *code = error_by_status[i].code;
            return;
        }
    *type = status >= 400 && status < 500 ? "invalid_request_error" : "server_error";
    *code = NULL;
}

/* Appends {"error":{...}} for the Anthropic error object <e> (may be NULL), HTTP
 * <status> (0 in a stream: the type decides, else server_error). */
static enum gw_code
error_body(const json_t *e, int status, struct gw_buf *out)
{
    const json_t *msg = json_object_get(e, "message");
    const char *type, *code;
    enum gw_code rc;

    map_error(json_object_get(e, "type"), status, &type, &code);
    rc = gw_buf_append_cstr(out, "{\"error\":{\"message\":");
    if (rc == GW_OK && json_is_string(msg) && json_string_length(msg) > 0)
        rc = gw_buf_append_json_str(out, str_of(msg));
    else if (rc == GW_OK && status > 0)
        rc = gw_buf_printf(out, "\"the upstream answered HTTP %d\"", status);
    else if (rc == GW_OK)
        rc = gw_buf_append_cstr(out, "\"the upstream stream failed\"");
    if (rc == GW_OK)
        rc = gw_buf_printf(out, ",\"type\":\"%s\",\"param\":null,\"code\":", type);
    if (rc == GW_OK)
        rc = code ? gw_buf_printf(out, "\"%s\"}}", code) : gw_buf_append_cstr(out, "null}}");
    return rc;
}

void
dl_anthropic_error_to_chat(const char *body, size_t len, int status, struct gw_buf *out)
{
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
    const json_t *e = json_object_get(root, "error");
    size_t start = out->len;

    if (!json_is_object(e))
        e = NULL;
    if (error_body(e, status, out) != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    json_decref(root);
}

/* ---- stream ---- */

void
dl_anthropic_stream_init(struct dl_anthropic_stream *st, uint64_t created_s)
{
    memset(st, 0, sizeof(*st));
    st->created_s = created_s;
    st->tool_index = -1;
    copy_cut(st->id, sizeof(st->id), "chatcmpl-", (struct gw_str){"", 0});
}

/* "data: {"id":..,"object":"chat.completion.chunk","created":..,"model":..,"choices":" */
static enum gw_code
chunk_open(const struct dl_anthropic_stream *st, struct gw_buf *out)
{
    if (gw_buf_append_cstr(out, "data: {\"id\":") != GW_OK ||
        gw_buf_append_json_str(out, gw_str_c(st->id)) != GW_OK ||
        gw_buf_append_cstr(out, ",\"object\":\"chat.completion.chunk\",\"created\":") != GW_OK ||
        gw_buf_append_u64(out, st->created_s) != GW_OK ||
        gw_buf_append_cstr(out, ",\"model\":") != GW_OK ||
        gw_buf_append_json_str(out, gw_str_c(st->model)) != GW_OK ||
        gw_buf_append_cstr(out, ",\"choices\":") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
chunk_delta_open(const struct dl_anthropic_stream *st, struct gw_buf *out)
{
    if (chunk_open(st, out) != GW_OK ||
        gw_buf_append_cstr(out, "[{\"index\":0,\"delta\":") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
chunk_delta_close(struct gw_buf *out)
{
    return gw_buf_append_cstr(out, ",\"finish_reason\":null}]}\n\n");
}

static enum gw_code
chunk_text(const struct dl_anthropic_stream *st, struct gw_str text, struct gw_buf *out)
{
    if (chunk_delta_open(st, out) != GW_OK || gw_buf_append_cstr(out, "{\"content\":") != GW_OK ||
        gw_buf_append_json_str(out, text) != GW_OK || gw_buf_append_cstr(out, "}") != GW_OK)
        return GW_E_NOMEM;
    return chunk_delta_close(out);
}

static enum gw_code
chunk_tool_open(const struct dl_anthropic_stream *st, struct gw_str id, struct gw_str name,
                struct gw_buf *out)
{
    if (chunk_delta_open(st, out) != GW_OK ||
        gw_buf_append_cstr(out, "{\"tool_calls\":[{\"index\":") != GW_OK ||
        append_int(out, st->tool_index) != GW_OK || gw_buf_append_cstr(out, ",\"id\":") != GW_OK ||
        gw_buf_append_json_str(out, id) != GW_OK ||
        gw_buf_append_cstr(out, ",\"type\":\"function\",\"function\":{\"name\":") != GW_OK ||
        gw_buf_append_json_str(out, name) != GW_OK ||
        gw_buf_append_cstr(out, ",\"arguments\":\"\"}}]}") != GW_OK)
        return GW_E_NOMEM;
    return chunk_delta_close(out);
}

static enum gw_code
chunk_tool_args(const struct dl_anthropic_stream *st, struct gw_str args, struct gw_buf *out)
{
    if (chunk_delta_open(st, out) != GW_OK ||
        gw_buf_append_cstr(out, "{\"tool_calls\":[{\"index\":") != GW_OK ||
        append_int(out, st->tool_index) != GW_OK ||
        gw_buf_append_cstr(out, ",\"function\":{\"arguments\":") != GW_OK ||
        gw_buf_append_json_str(out, args) != GW_OK || gw_buf_append_cstr(out, "}}]}") != GW_OK)
        return GW_E_NOMEM;
    return chunk_delta_close(out);
}

static enum gw_code
chunk_finish(const struct dl_anthropic_stream *st, const char *finish, struct gw_buf *out)
{
    if (chunk_delta_open(st, out) != GW_OK ||
        gw_buf_append_cstr(out, "{},\"finish_reason\":") != GW_OK ||
        append_quoted(out, finish, "}]}\n\n") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
chunk_usage(const struct dl_anthropic_stream *st, struct gw_buf *out)
{
    const struct gw_usage *u = &st->usage;
    uint64_t prompt = prompt_of(u);

    if (chunk_open(st, out) != GW_OK ||
        gw_buf_append_cstr(out, "[],\"usage\":{\"prompt_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, prompt) != GW_OK ||
        gw_buf_append_cstr(out, ",\"completion_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, u->output_tokens) != GW_OK ||
        gw_buf_append_cstr(out, ",\"total_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, sat_add(prompt, u->output_tokens)) != GW_OK ||
        gw_buf_append_cstr(out, ",\"prompt_tokens_details\":{\"cached_tokens\":") != GW_OK ||
        gw_buf_append_u64(out, u->cache_read_tokens) != GW_OK ||
        gw_buf_append_cstr(out, "}}}\n\n") != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
on_message_start(struct dl_anthropic_stream *st, const json_t *ev, struct gw_buf *out)
{
    const json_t *m = json_object_get(ev, "message");
    const json_t *u = json_object_get(m, "usage");

    if (!json_is_object(m))
        return GW_E_UPSTREAM_PROTOCOL;
    copy_cut(st->id, sizeof(st->id), "chatcmpl-", str_of(json_object_get(m, "id")));
    copy_cut(st->model, sizeof(st->model), "", str_of(json_object_get(m, "model")));
    if (json_is_object(u)) {
        read_usage(u, &st->usage);
        st->usage_seen = true;
    }
    st->started = true;
    if (chunk_delta_open(st, out) != GW_OK ||
        gw_buf_append_cstr(out, "{\"role\":\"assistant\",\"content\":\"\"}") != GW_OK ||
        chunk_delta_close(out) != GW_OK)
        return GW_E_NOMEM;
    return GW_OK;
}

static enum gw_code
on_block_start(struct dl_anthropic_stream *st, const json_t *ev, struct gw_buf *out)
{
    const json_t *b = json_object_get(ev, "content_block");
    const json_t *type = json_object_get(b, "type");

    if (!json_is_object(b) || !json_is_string(type))
        return GW_E_UPSTREAM_PROTOCOL;
    st->block_is_tool = 0;
    if (str_is(type, "tool_use")) {
        const json_t *id = json_object_get(b, "id"), *name = json_object_get(b, "name");

        if (!json_is_string(id) || !json_is_string(name))
            return GW_E_UPSTREAM_PROTOCOL;
        st->tool_index++;
        st->block_is_tool = 1;
        return chunk_tool_open(st, str_of(id), str_of(name), out);
    }
    if (str_is(type, "text")) {
        const json_t *text = json_object_get(b, "text");

        if (text && !json_is_string(text))
            return GW_E_UPSTREAM_PROTOCOL;
        if (json_string_length(text) > 0)
            return chunk_text(st, str_of(text), out);
    }
    return GW_OK;
}

static enum gw_code
on_block_delta(struct dl_anthropic_stream *st, const json_t *ev, struct gw_buf *out)
{
    const json_t *d = json_object_get(ev, "delta");
    const json_t *type = json_object_get(d, "type");

    if (!json_is_object(d) || !json_is_string(type))
        return GW_E_UPSTREAM_PROTOCOL;
    if (str_is(type, "text_delta")) {
        const json_t *text = json_object_get(d, "text");

        if (!json_is_string(text))
            return GW_E_UPSTREAM_PROTOCOL;
        return json_string_length(text) > 0 ? chunk_text(st, str_of(text), out) : GW_OK;
    }
    if (str_is(type, "input_json_delta")) {
        const json_t *pj = json_object_get(d, "partial_json");

        if (!json_is_string(pj))
            return GW_E_UPSTREAM_PROTOCOL;
        /* A server tool's input (server_tool_use) is not the client's tool call. */
        if (!st->block_is_tool || json_string_length(pj) == 0)
            return GW_OK;
        return chunk_tool_args(st, str_of(pj), out);
    }
    return GW_OK; /* thinking_delta, signature_delta, citations_delta, ... */
}

static enum gw_code
on_message_delta(struct dl_anthropic_stream *st, const json_t *ev, struct gw_buf *out)
{
    const json_t *d = json_object_get(ev, "delta");
    const json_t *u = json_object_get(ev, "usage");
    const char *finish;

    if ((d && !json_is_object(d) && !json_is_null(d)) ||
        (u && !json_is_object(u) && !json_is_null(u)))
        return GW_E_UPSTREAM_PROTOCOL;
    if (json_is_object(u)) {
        read_usage(u, &st->usage);
        st->usage_seen = true;
    }
    finish = finish_of(json_object_get(d, "stop_reason"));
    return finish ? chunk_finish(st, finish, out) : GW_OK;
}

static enum gw_code
on_message_stop(struct dl_anthropic_stream *st, struct gw_buf *out)
{
    if (st->usage_seen && chunk_usage(st, out) != GW_OK)
        return GW_E_NOMEM;
    if (gw_buf_append_cstr(out, "data: [DONE]\n\n") != GW_OK)
        return GW_E_NOMEM;
    st->stopped = true;
    return GW_OK;
}

static enum gw_code
on_error(struct dl_anthropic_stream *st, const json_t *ev, struct gw_buf *out)
{
    const json_t *e = json_object_get(ev, "error");

    if (!json_is_object(e))
        return GW_E_UPSTREAM_PROTOCOL;
    if (gw_buf_append_cstr(out, "data: ") != GW_OK || error_body(e, 0, out) != GW_OK ||
        gw_buf_append_cstr(out, "\n\n") != GW_OK)
        return GW_E_NOMEM;
    st->failed = true;
    return GW_OK;
}

enum ev_kind {
    EV_UNNAMED, /* no "event:" line: the data's "type" names it */
    EV_OTHER,   /* ping, unknown: ignored */
    EV_BLOCK_STOP,
    EV_MESSAGE_STOP,
    EV_MESSAGE_START, /* the kinds from here on need their data */
    EV_BLOCK_START,
    EV_BLOCK_DELTA,
    EV_MESSAGE_DELTA,
    EV_ERROR,
};

static enum ev_kind
ev_kind_of(struct gw_str name)
{
    static const struct {
        const char *name;
        enum ev_kind kind;
    } kinds[] = {
        {"content_block_stop", EV_BLOCK_STOP},
        {"message_stop", EV_MESSAGE_STOP},
        {"message_start", EV_MESSAGE_START},
        {"content_block_start", EV_BLOCK_START},
        {"content_block_delta", EV_BLOCK_DELTA},
        {"message_delta", EV_MESSAGE_DELTA},
        {"error", EV_ERROR},
    };
    size_t i;

    for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (gw_str_eq(name, gw_str_c(kinds[i].name)))
            return kinds[i].kind;
    return EV_OTHER;
}

/* The jansson route of one event of kind <kind> (the caller checked stopped/failed). */
static enum gw_code
stream_event_slow(struct dl_anthropic_stream *st, enum ev_kind kind, struct gw_str data,
                  struct gw_buf *out)
{
    json_t *ev = NULL;
    json_error_t err;
    size_t start = out->len;
    enum gw_code rc = GW_OK;

    if (kind != EV_UNNAMED && kind < EV_MESSAGE_START)
        goto dispatch; /* ping, content_block_stop, message_stop: the data does not matter */
    ev = json_loadb(data.ptr, data.len, JSON_ALLOW_NUL, &err);
    if (!ev)
        return json_error_code(&err) == json_error_out_of_memory ? GW_E_NOMEM
                                                                 : GW_E_UPSTREAM_PROTOCOL;
    if (!json_is_object(ev)) {
        json_decref(ev);
        return GW_E_UPSTREAM_PROTOCOL;
    }
    if (kind == EV_UNNAMED)
        kind = ev_kind_of(str_of(json_object_get(ev, "type")));
dispatch:
    switch (kind) {
    case EV_BLOCK_STOP: st->block_is_tool = 0; break;
    case EV_MESSAGE_STOP: rc = on_message_stop(st, out); break;
    case EV_MESSAGE_START: rc = on_message_start(st, ev, out); break;
    case EV_BLOCK_START: rc = on_block_start(st, ev, out); break;
    case EV_BLOCK_DELTA: rc = on_block_delta(st, ev, out); break;
    case EV_MESSAGE_DELTA: rc = on_message_delta(st, ev, out); break;
    case EV_ERROR: rc = on_error(st, ev, out); break;
    case EV_UNNAMED:
    case EV_OTHER: break; /* unknown events are ignored, as the API asks */
    }
    if (rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    json_decref(ev);
    return rc;
}

/* ---- stream: fast paths ---- */

/* Appends a text chunk for the FS_STR field <f> of <j> unless it is empty. */
static enum gw_code
fast_text_chunk(const struct dl_anthropic_stream *st, const struct dl_json *j,
                const struct fs_field *f, bool args, struct gw_buf *out)
{
    struct fs_text x;
    enum gw_code rc;

    if (f->str.dlen == 0)
        return GW_OK;
    if (!fs_text_get(j, &f->str, &x))
        return GW_E_NOMEM;
    rc = args ? chunk_tool_args(st, x.s, out) : chunk_text(st, x.s, out);
    fs_text_fini(&x);
    return rc;
}

static bool
fast_block_delta(struct dl_anthropic_stream *st, struct gw_str data, struct gw_buf *out,
                 enum gw_code *rc)
{
    struct fs_field top[] = {FS_FIELD("delta")};
    struct fs_field d[] = {FS_FIELD("type"), FS_FIELD("text"), FS_FIELD("partial_json")};
    struct dl_json j;

    top[0].sub = d;
    top[0].nsub = 3;
    if (!fs_doc(&j, data.ptr, data.len, top, 1) || top[0].kind != FS_OBJ || d[0].kind != FS_STR)
        return false;
    if (dl_json_key_is(&j, &d[0].str, "text_delta", 10)) {
        if (d[1].kind != FS_STR)
            return false;
        *rc = fast_text_chunk(st, &j, &d[1], false, out);
        return true;
    }
    if (dl_json_key_is(&j, &d[0].str, "input_json_delta", 16)) {
        if (d[2].kind != FS_STR)
            return false;
        /* A server tool's input (server_tool_use) is not the client's tool call. */
        *rc = st->block_is_tool ? fast_text_chunk(st, &j, &d[2], true, out) : GW_OK;
        return true;
    }
    *rc = GW_OK; /* thinking_delta, signature_delta, citations_delta, ... */
    return true;
}

static bool
fast_message_delta(struct dl_anthropic_stream *st, struct gw_str data, struct gw_buf *out,
                   enum gw_code *rc)
{
    struct fs_field top[] = {FS_FIELD("delta"), FS_FIELD("usage")};
    struct fs_field d[] = {FS_FIELD("stop_reason")}, u[] = FS_USAGE_FIELDS;
    const char *finish = NULL;
    struct dl_json j;
    size_t k;

    top[0].sub = d;
    top[0].nsub = 1;
    top[1].sub = u;
    top[1].nsub = 4;
    if (!fs_doc(&j, data.ptr, data.len, top, 2))
        return false;
    for (k = 0; k < 2; k++)
        if (top[k].kind != FS_ABSENT && top[k].kind != FS_NULL && top[k].kind != FS_OBJ)
            return false;
    if (top[0].kind == FS_OBJ)
        finish = fs_finish(&j, &d[0]);
    if (top[1].kind == FS_OBJ) {
        fs_usage(&j, u, &st->usage);
        st->usage_seen = true;
    }
    *rc = finish ? chunk_finish(st, finish, out) : GW_OK;
    return true;
}

static bool
fast_block_start(struct dl_anthropic_stream *st, struct gw_str data, struct gw_buf *out,
                 enum gw_code *rc)
{
    struct fs_field top[] = {FS_FIELD("content_block")};
    struct fs_field b[] = {FS_FIELD("type"), FS_FIELD("text")};
    struct dl_json j;
    bool text;

    top[0].sub = b;
    top[0].nsub = 2;
    if (!fs_doc(&j, data.ptr, data.len, top, 1) || top[0].kind != FS_OBJ || b[0].kind != FS_STR ||
        dl_json_key_is(&j, &b[0].str, "tool_use", 8))
        return false;
    text = dl_json_key_is(&j, &b[0].str, "text", 4);
    if (text && b[1].kind != FS_ABSENT && b[1].kind != FS_STR)
        return false;
    st->block_is_tool = 0;
    *rc = text && b[1].kind == FS_STR ? fast_text_chunk(st, &j, &b[1], false, out) : GW_OK;
    return true;
}

/* copy_cut of the string field <f> of <j> ("" when it is not a string). */
static bool
fast_copy_cut(char *dst, size_t cap, const char *prefix, const struct dl_json *j,
              const struct fs_field *f)
{
    struct fs_text x;

    if (f->kind != FS_STR) {
        copy_cut(dst, cap, prefix, (struct gw_str){"", 0});
        return true;
    }
    if (!fs_text_get(j, &f->str, &x))
        return false;
    copy_cut(dst, cap, prefix, x.s);
    fs_text_fini(&x);
    return true;
}

static bool
fast_message_start(struct dl_anthropic_stream *st, struct gw_str data, struct gw_buf *out,
                   enum gw_code *rc)
{
    struct fs_field top[] = {FS_FIELD("message")};
    struct fs_field m[] = {FS_FIELD("id"), FS_FIELD("model"), FS_FIELD("usage")};
    struct fs_field u[] = FS_USAGE_FIELDS;
    char id[sizeof(st->id)], model[sizeof(st->model)];
    struct dl_json j;

    /* the bytes after the NUL stay as they were, as copy_cut leaves them */
    memcpy(id, st->id, sizeof(id));
    memcpy(model, st->model, sizeof(model));
    top[0].sub = m;
    top[0].nsub = 3;
    m[2].sub = u;
    m[2].nsub = 4;
    if (!fs_doc(&j, data.ptr, data.len, top, 1) || top[0].kind != FS_OBJ ||
        !fast_copy_cut(id, sizeof(id), "chatcmpl-", &j, &m[0]) ||
        !fast_copy_cut(model, sizeof(model), "", &j, &m[1]))
        return false;
    memcpy(st->id, id, sizeof(id));
    memcpy(st->model, model, sizeof(model));
    if (m[2].kind == FS_OBJ) {
        fs_usage(&j, u, &st->usage);
        st->usage_seen = true;
    }
    st->started = true;
    if (chunk_delta_open(st, out) != GW_OK ||
        gw_buf_append_cstr(out, "{\"role\":\"assistant\",\"content\":\"\"}") != GW_OK ||
        chunk_delta_close(out) != GW_OK)
        *rc = GW_E_NOMEM;
    else
        *rc = GW_OK;
    return true;
}

/* The fast route of one event: false (nothing changed) when the jansson route must
 * decide, else true with the outcome in <*rc>. */
static bool
stream_event_fast(struct dl_anthropic_stream *st, enum ev_kind kind, struct gw_str data,
                  struct gw_buf *out, enum gw_code *rc)
{
    switch (kind) {
    case EV_BLOCK_DELTA: return fast_block_delta(st, data, out, rc);
    case EV_MESSAGE_DELTA: return fast_message_delta(st, data, out, rc);
    case EV_BLOCK_START: return fast_block_start(st, data, out, rc);
    case EV_MESSAGE_START: return fast_message_start(st, data, out, rc);
    default: return false;
    }
}

enum gw_code
dl_anthropic_stream_event_jansson(struct dl_anthropic_stream *st, struct gw_str event,
                                  struct gw_str data, struct gw_buf *out)
{
    if (st->stopped || st->failed)
        return GW_OK; /* the Chat stream has ended: [DONE] or an error chunk went out */
    return stream_event_slow(st, event.len ? ev_kind_of(event) : EV_UNNAMED, data, out);
}

enum gw_code
dl_anthropic_stream_event(struct dl_anthropic_stream *st, struct gw_str event, struct gw_str data,
                          struct gw_buf *out)
{
    enum ev_kind kind = event.len ? ev_kind_of(event) : EV_UNNAMED;
    size_t start = out->len;
    enum gw_code rc;

    if (st->stopped || st->failed)
        return GW_OK; /* the Chat stream has ended: [DONE] or an error chunk went out */
    if (!stream_event_fast(st, kind, data, out, &rc))
        return stream_event_slow(st, kind, data, out);
    if (rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
    }
    return rc;
}

/* ==== the Messages shape (dialects/canon.h): shared helpers, errors, the table ====
 * The request lives in anthropic_request.c, events and answers in anthropic_answer.c.
 * Errors, decisions:
 * - One table maps HTTP statuses to Messages error types as the API answers them
 *   (400 invalid_request_error, 401 authentication_error, 402 billing_error, 403
 *   permission_error, 404 not_found_error, 413 request_too_large, 429
 *   rate_limit_error, 500 and 502 api_error, 503 and 529 overloaded_error, 408 and 504
 *   timeout_error: the SDK's GatewayTimeoutError); other 4xx are invalid_request_error,
 *   anything else api_error. The SDKs act on the status; the type is what they show.
 * - A gateway refusal carries our code in an added "gw_code" member of the error
 *   object. gw.context_length_exceeded's message starts "prompt is too long", the words
 *   Claude Code acts on (it compacts the conversation).
 * - A stream broken after content ends with event: error, type overloaded_error
 *   (DESIGN.md 11), whatever broke.
 * - An upstream's error body: {"type":"error","error":{"type","message"}} or any
 *   {"error":{"type","message"}}; the message is a slice of the body, escapes left in
 *   when it holds any (no memory to decode into: shown with its backslashes, re-escaped
 *   when rendered, never unsafe). A foreign or unknown type is mapped by the status; a
 *   Messages type is kept when it stands for that same status. */

static enum dl_anth_kind
da_kind(int c)
{
    switch (c) {
    case 'n': return DA_NULL;
    case 't': return DA_TRUE;
    case 'f': return DA_FALSE;
    case '"': return DA_STR;
    case '{': return DA_OBJ;
    case '[': return DA_ARR;
    default: return DA_NUM;
    }
}

bool
dl_anthropic_fields(struct dl_json *j, struct dl_anth_field *fields, size_t n)
{
    struct dl_json_str key;
    bool first = true;
    int r;

    if (dl_json_peek(j) != '{')
        return dl_json_fail(j, DL_JSON_E_SYNTAX);
    if (!dl_json_obj_enter(j))
        return false;
    while ((r = dl_json_obj_next(j, &first, &key)) == 1) {
        struct dl_anth_field *f = NULL;
        size_t k;
        bool ok;

        for (k = 0; k < n; k++)
            if (dl_json_key_is(j, &key, fields[k].name, fields[k].len)) {
                f = &fields[k];
                break;
            }
        if (!f) {
            if (!dl_json_skip(j, NULL))
                return false;
            continue;
        }
        f->count++;
        f->at = j->i;
        f->kind = da_kind(dl_json_peek(j));
        if (f->kind == DA_OBJ && f->sub) {
            for (k = 0; k < f->nsub; k++) {
                f->sub[k].kind = DA_ABSENT;
                f->sub[k].count = 0;
            }
            ok = dl_anthropic_fields(j, f->sub, f->nsub);
        } else if (f->kind == DA_STR)
            ok = dl_json_string(j, &f->str);
        else if (f->kind == DA_NUM)
            ok = dl_json_number(j, &f->num);
        else
            ok = dl_json_skip(j, NULL);
        if (!ok)
            return false;
        f->end = j->i;
    }
    return r == 0;
}

static bool
da_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

bool
dl_anthropic_json_object(struct gw_str s, struct gw_str *trimmed)
{
    struct dl_json j;

    while (s.len && da_ws(s.ptr[0])) {
        s.ptr++;
        s.len--;
    }
    while (s.len && da_ws(s.ptr[s.len - 1]))
        s.len--;
    if (trimmed)
        *trimmed = s;
    dl_json_init(&j, s.ptr, s.len);
    return dl_json_peek(&j) == '{' && dl_json_skip(&j, NULL) && dl_json_end(&j);
}

struct gw_str
dl_anthropic_str(const struct dl_json *j, const struct dl_json_str *t, struct gw_arena *a)
{
    char *p;

    if (!t->escaped)
        return (struct gw_str){j->s + t->start, t->dlen};
    p = gw_arena_alloc(a, t->dlen + 1);
    if (!p)
        return (struct gw_str){NULL, 0};
    dl_json_decode(j, t, p);
    p[t->dlen] = '\0';
    return (struct gw_str){p, t->dlen};
}

bool
dl_anthropic_int(const struct dl_json *j, const struct dl_json_num *num, int64_t *out)
{
    size_t i = num->start;
    bool neg = false;
    uint64_t v = 0;

    if (num->real)
        return false;
    if (j->s[i] == '-') {
        neg = true;
        i++;
    }
    for (; i < num->end; i++)
        v = v * 10 + (uint64_t)(j->s[i] - '0'); /* validated: fits int64 */
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

enum gw_code
dl_anthropic_append_double(struct gw_buf *out, double v)
{
    char buf[40];
    int prec, n = 0;

    if (v != v || v > 1.7976931348623157e308 || v < -1.7976931348623157e308)
        v = 0; /* never in a parsed request: JSON has no NaN or infinity */
    for (prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, sizeof(buf) - 2, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    if (n <= 0 || (size_t)n >= sizeof(buf) - 2)
        return GW_E_NOMEM;
    /* a double stays a real when read back (1.0, not 1) */
    if (!strpbrk(buf, ".eE")) {
        buf[n++] = '.';
        buf[n++] = '0';
    }
    return gw_buf_append(out, buf, (size_t)n);
}

enum gw_code
dl_anthropic_append_i64(struct gw_buf *out, int64_t v)
{
    if (v < 0 && gw_buf_append(out, "-", 1) != GW_OK)
        return GW_E_NOMEM;
    return gw_buf_append_u64(out, v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

/* ---- errors ---- */

/* HTTP status -> Messages error type: the one table (STYLE.md 7). */
static const struct {
    int status;
    const char *type;
} msg_error_types[] = {
    {400, "invalid_request_error"},
    {401, "authentication_error"},
    {402, "billing_error"},
    {403, "permission_error"},
    {404, "not_found_error"},
    {408, "timeout_error"},
    {413, "request_too_large"},
    {429, "rate_limit_error"},
    {500, "api_error"},
    {502, "api_error"},
    {503, "overloaded_error"},
    {504, "timeout_error"},
    {529, "overloaded_error"},
};

/* What an upstream error the gateway has no words of its own for says, by type. */
static const struct {
    const char *type;
    const char *message;
} msg_error_generic[] = {
    {"invalid_request_error", "the upstream refused the request"},
    {"authentication_error", "the upstream refused the gateway's credentials"},
    {"billing_error", "the upstream refused the request for billing reasons"},
    {"permission_error", "the upstream does not allow this request"},
    {"not_found_error", "the upstream does not know this model or path"},
    {"timeout_error", "the upstream timed out"},
    {"request_too_large", "the request is too large for the upstream"},
    {"rate_limit_error", "the upstream is rate limiting requests"},
    {"overloaded_error", "the upstream is overloaded"},
    {"api_error", "the upstream failed"},
};

const char *
dl_anthropic_error_type(int status)
{
    size_t i;

    for (i = 0; i < sizeof(msg_error_types) / sizeof(msg_error_types[0]); i++)
        if (msg_error_types[i].status == status)
            return msg_error_types[i].type;
    return status >= 400 && status < 500 ? "invalid_request_error" : "api_error";
}

int
dl_anthropic_error_status(struct gw_str type)
{
    static const struct {
        const char *type;
        int status;
    } by_type[] = {
        {"invalid_request_error", 400}, {"authentication_error", 401},
        {"billing_error", 402},         {"permission_error", 403},
        {"not_found_error", 404},       {"request_too_large", 413},
        {"rate_limit_error", 429},      {"api_error", 500},
        {"timeout_error", 504},         {"overloaded_error", 529},
    };
    size_t i;

    for (i = 0; i < sizeof(by_type) / sizeof(by_type[0]); i++)
        if (gw_str_eq(type, gw_str_c(by_type[i].type)))
            return by_type[i].status;
    return 0;
}

static const char *
msg_generic_message(const char *type)
{
    size_t i;

    for (i = 0; i < sizeof(msg_error_generic) / sizeof(msg_error_generic[0]); i++)
        if (strcmp(msg_error_generic[i].type, type) == 0)
            return msg_error_generic[i].message;
    return "the upstream failed";
}

/* {"type":"error","error":{"type":<type>,"message":<prefix><message>[,"gw_code":<code>]}} */
static enum gw_code
msg_error_body(const char *type, const char *prefix, struct gw_str message, const char *code,
               struct gw_buf *out)
{
    if (gw_buf_append_cstr(out, "{\"type\":\"error\",\"error\":{\"type\":\"") != GW_OK ||
        gw_buf_append_cstr(out, type) != GW_OK ||
        gw_buf_append_cstr(out, "\",\"message\":") != GW_OK)
        return GW_E_NOMEM;
    if (prefix) {
        struct gw_buf m = {0};
        enum gw_code rc = GW_E_NOMEM;

        if (gw_buf_append_cstr(&m, prefix) == GW_OK && gw_buf_append_str(&m, message) == GW_OK)
            rc = gw_buf_append_json_str(out, (struct gw_str){m.data, m.len});
        gw_buf_fini(&m);
        if (rc != GW_OK)
            return rc;
    } else if (gw_buf_append_json_str(out, message) != GW_OK) {
        return GW_E_NOMEM;
    }
    if (code && (gw_buf_append_cstr(out, ",\"gw_code\":") != GW_OK ||
                 gw_buf_append_json_str(out, gw_str_c(code)) != GW_OK))
        return GW_E_NOMEM;
    return gw_buf_append_cstr(out, "}}");
}

static bool
has_prefix_str(struct gw_str s, const char *p)
{
    size_t n = strlen(p);

    return s.len >= n && memcmp(s.ptr, p, n) == 0;
}

/* The body of a gateway refusal with <code> and <message> and an error <type>. */
static enum gw_code
msg_gw_error(enum gw_code code, const char *type, struct gw_str message, struct gw_buf *out)
{
    const char *prefix = NULL;

    if (message.len == 0)
        message = gw_str_c(gw_code_str(code));
    /* Claude Code compacts the conversation on these words. */
    if (code == GW_E_CONTEXT_LENGTH && !has_prefix_str(message, "prompt is too long"))
        prefix = "prompt is too long: ";
    return msg_error_body(type, prefix, message, gw_code_str(code), out);
}

static void
msg_restore(struct gw_buf *out, size_t start)
{
    out->len = start;
    if (out->data)
        out->data[start] = '\0';
}

enum gw_code
dl_anthropic_error_render(enum gw_code code, struct gw_str message, struct gw_buf *out)
{
    int status = gw_code_http_status(code);
    size_t start = out->len;

    /* A config code (0) or GW_OK (200) in an error body is a caller bug: say 500. */
    if (status < 400)
        status = 500;
    if (msg_gw_error(code, dl_anthropic_error_type(status), message, out) != GW_OK) {
        msg_restore(out, start);
        return GW_E_NOMEM;
    }
    return GW_OK;
}

enum gw_code
dl_anthropic_error_frame(enum gw_code code, struct gw_str message, struct gw_buf *out)
{
    size_t start = out->len;

    if (gw_buf_append_cstr(out, "event: error\ndata: ") != GW_OK ||
        msg_gw_error(code, "overloaded_error", message, out) != GW_OK ||
        gw_buf_append_cstr(out, "\n\n") != GW_OK) {
        msg_restore(out, start);
        return GW_E_NOMEM;
    }
    return GW_OK;
}

enum gw_code
dl_anthropic_upstream_error_render(int status, struct gw_str type, struct gw_str message,
                                   struct gw_buf *out)
{
    const char *t = dl_anthropic_error_type(status);
    size_t start = out->len;
    int known = dl_anthropic_error_status(type);
    char own[32];

    if (known && known == status && type.len < sizeof(own)) {
        memcpy(own, type.ptr, type.len);
        own[type.len] = '\0';
        t = own;
    }
    if (message.len == 0)
        message = gw_str_c(msg_generic_message(t));
    if (msg_error_body(t, NULL, message, NULL, out) != GW_OK) {
        msg_restore(out, start);
        return GW_E_NOMEM;
    }
    return GW_OK;
}

void
dl_anthropic_upstream_error_read(const char *body, size_t len, int status, struct gw_str *type,
                                 struct gw_str *message)
{
    struct dl_anth_field top[] = {DL_ANTH_FIELD("error")};
    struct dl_anth_field e[] = {DL_ANTH_FIELD("type"), DL_ANTH_FIELD("message")};
    const char *t = dl_anthropic_error_type(status);
    struct dl_json j, ej;

    *type = gw_str_c(t);
    *message = gw_str_c(msg_generic_message(t));
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !dl_anthropic_fields(&j, top, 1) || !dl_json_end(&j) ||
        top[0].kind != DA_OBJ)
        return;
    ej = dl_anthropic_at(&j, top[0].at);
    if (!dl_anthropic_fields(&ej, e, 2))
        return;
    if (e[0].kind == DA_STR && !e[0].str.escaped && e[0].str.dlen > 0)
        *type = (struct gw_str){body + e[0].str.start, e[0].str.dlen};
    if (e[1].kind == DA_STR && e[1].str.dlen > 0)
        *message = (struct gw_str){body + e[1].str.start, e[1].str.end - e[1].str.start};
}

/* ---- the table ---- */

const struct dl_shape_ops dl_anthropic_shape = {
    .shape = DL_SHAPE_MESSAGES,
    .name = "messages",
    .request_parse = dl_anthropic_request_parse,
    .request_render = dl_anthropic_request_render,
    .parse_init = dl_anthropic_parse_init,
    .event_parse = dl_anthropic_event_parse,
    .answer_parse = dl_anthropic_answer_parse,
    .render_init = dl_anthropic_render_init,
    .event_render = dl_anthropic_event_render,
    .render_end = dl_anthropic_render_end,
    .answer_render = dl_anthropic_answer_render,
    .error_render = dl_anthropic_error_render,
    .error_frame = dl_anthropic_error_frame,
    .upstream_error_render = dl_anthropic_upstream_error_render,
    .upstream_error_read = dl_anthropic_upstream_error_read,
    .answer_usage = dl_anthropic_answer_usage,
};
