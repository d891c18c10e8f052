/* SPDX-License-Identifier: MIT
 * tests/fuzz/fuzz_openai.c - fuzz target for the OpenAI Chat dialect: request parse,
 * render (checked: the output is a JSON object with the new model and, for a stream,
 * include_usage true; unchanged renders are the input byte for byte), answer usage and
 * error bodies, all on the same input (streamed chunks are the Chat shape's event parser's,
 * fuzzed by tests/fuzz/fuzz_chat_canon.c).
 * Differential check: the single-pass scanner of dialects/openai.c must decide and read
 * exactly what the former jansson implementation (kept below as the t_old_* oracle)
 * did: the same refusal reason (up to the line/column), model, stream, include_usage,
 * answer usage and content bytes. The deliberate differences:
 * - one body per request (issue 8): a JSON object holding twice a top-level field the
 *   gateway reads (T_READ_FIELDS), or include_usage twice in one stream_options object,
 *   is refused naming the first such duplicate, where jansson keeps the last copy.
 *   t_first_dup finds it independently of dialects/ (its own walk over the top-level
 *   members of a body jansson accepted, keys decoded by jansson): for such a body the
 *   refusal and its exact reason are checked, and the oracle only for the others;
 * - the input estimate counts every copy of a duplicate key inside "tools"/"functions"
 *   (jansson keeps the last), so estimates are compared only for bodies without any
 *   duplicate key (jansson's JSON_REJECT_DUPLICATES);
 * - a raw NUL byte is refused everywhere, where jansson's lexer drops one that directly
 *   follows a number or true/false/null (its unget loses it: "[1\0]" loads as [1]), so
 *   for input holding a raw NUL only "the new code refuses" is checked.
 * Owns:    one input at a time.
 * Threads: single-threaded.
 * See:     dialects/openai.c, tests/fuzz/corpus/openai/
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dialects/openai.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the oracle: the former jansson implementation ---- */

static size_t
t_str_bytes(const json_t *v)
{
    return json_is_string(v) ? json_string_length(v) : 0;
}

static uint64_t
t_get_count(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);

    if (json_is_integer(v))
        return json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
    if (json_is_real(v) && json_real_value(v) > 0 && json_real_value(v) < 1.8e19)
        return (uint64_t)json_real_value(v);
    return 0;
}

static size_t
t_tool_call_bytes(const json_t *calls)
{
    size_t i, n = 0;
    const json_t *c;

    json_array_foreach(calls, i, c)
    {
        const json_t *f = json_object_get(c, "function");

        n += t_str_bytes(json_object_get(f, "arguments"));
        n += t_str_bytes(json_object_get(f, "name"));
    }
    return n;
}

static size_t
t_content_bytes(const json_t *content)
{
    size_t i, n = 0;
    const json_t *part;

    if (json_is_string(content))
        return json_string_length(content);
    json_array_foreach(content, i, part) n += t_str_bytes(json_object_get(part, "text"));
    return n;
}

static size_t
t_delta_bytes(const json_t *d)
{
    return t_content_bytes(json_object_get(d, "content")) +
           t_str_bytes(json_object_get(d, "reasoning_content")) +
           t_str_bytes(json_object_get(d, "reasoning")) +
           t_str_bytes(json_object_get(d, "refusal")) +
           t_tool_call_bytes(json_object_get(d, "tool_calls"));
}

static void
t_read_usage(const json_t *u, struct gw_usage *usage)
{
    uint64_t prompt = t_get_count(u, "prompt_tokens");
    uint64_t cached = t_get_count(json_object_get(u, "prompt_tokens_details"), "cached_tokens");

    memset(usage, 0, sizeof(*usage));
    usage->cache_read_tokens = cached;
    usage->input_tokens = prompt > cached ? prompt - cached : 0;
    usage->output_tokens = t_get_count(u, "completion_tokens");
}

/* What the former dl_openai_req_parse said: a reason prefix ("" when accepted). */
struct t_old_req {
    const char *reason;
    json_t *root;
    bool stream, wants_usage;
    uint64_t estimate;
};

static void
t_old_parse(const char *body, size_t len, struct t_old_req *o)
{
    json_error_t err;
    json_t *root, *v, *msgs, *m, *tools;
    uint64_t bytes = 0;
    size_t i;

    memset(o, 0, sizeof(*o));
    if (len == 0) {
        o->reason = "body: empty";
        return;
    }
    root = json_loadb(body, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!root) {
        if (json_error_code(&err) == json_error_numeric_overflow)
            o->reason = "body: number out of range at line ";
        else if (json_error_code(&err) == json_error_stack_overflow)
            o->reason = "body: nested too deep at line ";
        else
            o->reason = "body: not valid JSON at line ";
        return;
    }
    o->root = root;
    if (!json_is_object(root)) {
        o->reason = "body: must be a JSON object";
        return;
    }
    v = json_object_get(root, "model");
    if (!json_is_string(v) || json_string_length(v) == 0) {
        o->reason = "model: required string";
        return;
    }
    msgs = json_object_get(root, "messages");
    if (!json_is_array(msgs)) {
        o->reason = "messages: required array";
        return;
    }
    v = json_object_get(root, "stream");
    if (v && !json_is_boolean(v) && !json_is_null(v)) {
        o->reason = "stream: must be a boolean";
        return;
    }
    v = json_object_get(root, "stream_options");
    if (v && !json_is_object(v) && !json_is_null(v)) {
        o->reason = "stream_options: must be an object";
        return;
    }
    o->reason = "";
    o->stream = json_is_true(json_object_get(root, "stream"));
    o->wants_usage = json_is_true(json_object_get(v, "include_usage"));
    json_array_foreach(msgs, i, m)
    {
        bytes += t_content_bytes(json_object_get(m, "content"));
        bytes += t_tool_call_bytes(json_object_get(m, "tool_calls"));
    }
    tools = json_object_get(root, "tools");
    if (tools && !json_is_null(tools))
        bytes += json_dumpb(tools, NULL, 0, JSON_COMPACT);
    tools = json_object_get(root, "functions");
    if (tools && !json_is_null(tools))
        bytes += json_dumpb(tools, NULL, 0, JSON_COMPACT);
    o->estimate = (bytes + 3) / 4 + 4 * json_array_size(msgs);
}

static bool
t_old_answer(struct gw_str body, struct gw_usage *usage, size_t *content_bytes)
{
    json_error_t err;
    json_t *root, *choices, *c, *u;
    size_t i, n = 0;
    bool has = false;

    memset(usage, 0, sizeof(*usage));
    *content_bytes = 0;
    root = json_loadb(body.ptr, body.len, JSON_ALLOW_NUL, &err);
    if (!root)
        return false;
    choices = json_object_get(root, "choices");
    json_array_foreach(choices, i, c) n += t_delta_bytes(json_object_get(c, "message"));
    u = json_object_get(root, "usage");
    if (json_is_object(u)) {
        t_read_usage(u, usage);
        has = true;
    }
    *content_bytes = n;
    json_decref(root);
    return has;
}

static bool
t_usage_eq(const struct gw_usage *a, const struct gw_usage *b)
{
    return a->input_tokens == b->input_tokens && a->output_tokens == b->output_tokens &&
           a->cache_read_tokens == b->cache_read_tokens &&
           a->cache_write_tokens == b->cache_write_tokens && a->estimated == b->estimated;
}

/* True when <body> has no duplicate key anywhere (jansson's own check). */
static bool
t_no_duplicate_keys(const char *body, size_t len)
{
    json_error_t err;
    json_t *root = json_loadb(body, len, JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &err);

    json_decref(root);
    return root != NULL;
}

/* ---- the oracle of duplicate keys (issue 8) ---- */

/* The top-level fields the gateway reads (dialects/openai.c, read_fields). */
static const char *const T_READ_FIELDS[] = {
    "model",     "messages",         "stream",     "stream_options",        "tools",
    "functions", "prompt_cache_key", "max_tokens", "max_completion_tokens",
};
#define T_NFIELDS (sizeof(T_READ_FIELDS) / sizeof(T_READ_FIELDS[0]))

static size_t
t_skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* The offset just past the value at <i> of a document jansson accepted (so: valid). */
static size_t
t_value_end(const char *s, size_t n, size_t i)
{
    size_t depth = 0;

    do {
        if (s[i] == '"') {
            for (i++; s[i] != '"'; i++)
                if (s[i] == '\\')
                    i++;
            i++;
        } else if (s[i] == '{' || s[i] == '[') {
            depth++;
            i++;
        } else if (s[i] == '}' || s[i] == ']') {
            depth--;
            i++;
        } else if (depth == 0) {
            while (i < n && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' &&
                   s[i] != '\t' && s[i] != '\n' && s[i] != '\r')
                i++;
        } else {
            i++;
        }
    } while (depth > 0);
    return i;
}

/* Walks the object at <*i>, calling <fn> on each member: the key (decoded by jansson)
 * and the offset of its value; stops early when <fn> returns a name. <*i> ends past the
 * object. */
typedef const char *(*t_member_fn)(const char *s, size_t n, const json_t *key, size_t at,
                                   unsigned *counts);

static const char *
t_walk(const char *s, size_t n, size_t *i, t_member_fn fn, unsigned *counts)
{
    size_t k = t_skip_ws(s, n, *i + 1);

    while (s[k] != '}') {
        size_t kend = t_value_end(s, n, k), at;
        json_t *key = json_loadb(s + k, kend - k, JSON_DECODE_ANY, NULL);
        const char *dup;

        if (!json_is_string(key))
            abort(); /* the document was valid: a key is a string */
        at = t_skip_ws(s, n, t_skip_ws(s, n, kend) + 1); /* past the ':' */
        dup = fn(s, n, key, at, counts);
        json_decref(key);
        if (dup)
            return dup;
        k = t_skip_ws(s, n, t_value_end(s, n, at));
        if (s[k] == ',')
            k = t_skip_ws(s, n, k + 1);
    }
    *i = k + 1;
    return NULL;
}

static bool
t_key_is(const json_t *key, const char *lit)
{
    return json_string_length(key) == strlen(lit) &&
           memcmp(json_string_value(key), lit, strlen(lit)) == 0;
}

static const char *
t_so_member(const char *s, size_t n, const json_t *key, size_t at, unsigned *counts)
{
    (void)s;
    (void)n;
    (void)at;
    if (t_key_is(key, "include_usage") && ++counts[0] == 2)
        return "stream_options.include_usage";
    return NULL;
}

static const char *
t_top_member(const char *s, size_t n, const json_t *key, size_t at, unsigned *counts)
{
    size_t f;

    for (f = 0; f < T_NFIELDS; f++)
        if (t_key_is(key, T_READ_FIELDS[f]))
            break;
    if (f == T_NFIELDS)
        return NULL;
    if (++counts[f] == 2)
        return T_READ_FIELDS[f];
    if (strcmp(T_READ_FIELDS[f], "stream_options") == 0 && s[at] == '{') {
        unsigned iu = 0;
        size_t i = at;

        return t_walk(s, n, &i, t_so_member, &iu);
    }
    return NULL;
}

/* The name the refusal of the JSON object <body> (jansson accepted it) must give: the
 * first read field met a second time, in document order; NULL when there is none. */
static const char *
t_first_dup(const char *body, size_t len)
{
    unsigned counts[T_NFIELDS] = {0};
    size_t i = t_skip_ws(body, len, 0);

    return t_walk(body, len, &i, t_top_member, counts);
}

/* Aborts unless the new parse agrees with the oracle. */
static void
t_diff_parse(const char *body, size_t size, enum gw_code rc, const struct dl_openai_req *r,
             const struct gw_buf *why)
{
    struct t_old_req o;
    const json_t *m;

    if (memchr(body, '\0', size)) {
        if (rc != GW_E_BAD_REQUEST)
            abort();
        return;
    }
    t_old_parse(body, size, &o);
    if (json_is_object(o.root)) {
        const char *dup = t_first_dup(body, size);
        char want[96];

        if (dup) {
            snprintf(want, sizeof(want), "duplicate key \"%s\" in the request body", dup);
            if (rc != GW_E_BAD_REQUEST || why->len != strlen(want) ||
                memcmp(why->data, want, why->len) != 0)
                abort();
            json_decref(o.root);
            return;
        }
    }
    if (o.reason[0] == '\0') {
        if (rc != GW_OK)
            abort();
        m = json_object_get(o.root, "model");
        if (!gw_str_eq(dl_openai_req_model(r),
                       (struct gw_str){json_string_value(m), json_string_length(m)}))
            abort();
        if (dl_openai_req_is_stream(r) != o.stream || dl_openai_req_wants_usage(r) != o.wants_usage)
            abort();
        if (dl_openai_req_input_estimate(r) != o.estimate && t_no_duplicate_keys(body, size))
            abort();
    } else if (rc != GW_E_BAD_REQUEST || why->len < strlen(o.reason) ||
               memcmp(why->data, o.reason, strlen(o.reason)) != 0) {
        abort();
    }
    json_decref(o.root);
}

/* Aborts unless <out> is a JSON object whose model is <model> and, when <stream>, whose
 * stream_options.include_usage is true. */
static void
t_check_render(const struct gw_buf *out, struct gw_str model, bool stream)
{
    json_error_t err;
    json_t *root, *m;

    root = json_loadb(out->data, out->len, JSON_ALLOW_NUL, &err);
    if (!root || !json_is_object(root))
        abort();
    m = json_object_get(root, "model");
    if (!json_is_string(m) || json_string_length(m) != model.len ||
        memcmp(json_string_value(m), model.ptr, model.len) != 0)
        abort();
    if (stream &&
        !json_is_true(json_object_get(json_object_get(root, "stream_options"), "include_usage")))
        abort();
    json_decref(root);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    struct dl_openai_req *r = NULL;
    struct gw_buf why = {0}, out = {0};
    struct gw_usage u;
    size_t bytes;
    enum gw_code rc;

    struct gw_usage ou;
    size_t obytes;
    bool has;

    rc = dl_openai_req_parse(body, size, &r, &why);
    t_diff_parse(body, size, rc, r, &why);
    if (rc == GW_OK) {
        struct gw_str asked = dl_openai_req_model(r);
        struct gw_str other = GW_STR_LIT("fuzz-\xc3\xa9-model\"\n");

        (void)dl_openai_req_input_estimate(r);
        if (dl_openai_req_render(r, body, size, asked, &out) != GW_OK)
            abort();
        if (!dl_openai_req_is_stream(r) || dl_openai_req_wants_usage(r)) {
            if (out.len != size || memcmp(out.data, body, size) != 0)
                abort();
        } else {
            t_check_render(&out, asked, true);
        }
        gw_buf_reset(&out);
        if (dl_openai_req_render(r, body, size, other, &out) != GW_OK)
            abort();
        t_check_render(&out, other, dl_openai_req_is_stream(r));
        {
            /* the same bytes elsewhere (re-scanned, not the parse's offsets): same output */
            char *copy = malloc(size);
            struct gw_buf again = {0};

            if (!copy)
                abort();
            memcpy(copy, body, size);
            if (dl_openai_req_render(r, copy, size, other, &again) != GW_OK ||
                again.len != out.len || memcmp(again.data, out.data, out.len) != 0)
                abort();
            free(copy);
            gw_buf_fini(&again);
        }
        dl_openai_req_free(r);
    } else if (rc != GW_E_BAD_REQUEST || r != NULL || why.len == 0) {
        abort();
    }
    has = dl_openai_answer_usage((struct gw_str){body, size}, &u, &bytes);
    if (memchr(body, '\0', size)) {
        /* refused as JSON: nothing read (see the top of the file) */
        if (has || bytes != 0)
            abort();
    } else {
        /* the content is counted for answers without usage only */
        if (has != t_old_answer((struct gw_str){body, size}, &ou, &obytes) ||
            bytes != (has ? 0 : obytes) || !t_usage_eq(&u, &ou))
            abort();
    }
    gw_buf_reset(&out);
    if (size > 0 &&
        dl_openai_error_chunk((enum gw_code)(1 + data[0] % (GW_CODE__COUNT - 1)),
                              (struct gw_str){body, size < 64 ? size : 64}, &out) != GW_OK)
        abort();
    gw_buf_fini(&out);
    gw_buf_fini(&why);
    return 0;
}
