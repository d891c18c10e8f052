/* SPDX-License-Identifier: MIT
 * dialects/openai.c - OpenAI Chat Completions: request parse and render, streamed
 * chunk and answer inspection (content bytes, usage), error bodies and error chunks.
 * Pure converter over jansson: no I/O, no clock.
 * Render edits the client's bytes in place (the "model" value, include_usage) so that
 * everything else, numbers included, reaches the upstream exactly as the client wrote
 * it; jansson's dump (which rewrites 0.7 as 0.69999999999999996) is only the fallback
 * for bodies the splice does not handle (escaped or duplicate keys).
 * Owns:    a dl_openai_req owns its parsed document; every other call frees what it
 *          parses before returning.
 * Threads: any; one request on one thread.
 * See:     dialects/openai.h, tests/unit/dialects/test_openai.c, tests/fuzz/fuzz_openai.c
 */
#include "dialects/openai.h"

#include <jansson.h>
#include <string.h>

#include "core/alloc.h"

struct dl_openai_req {
    json_t *root;       /* the parsed body; owned */
    json_t *model_json; /* a reference to the client's "model" string: keeps <model> alive
                         * when a fallback render replaces it in <root> */
    struct gw_str model;
    bool stream;
    bool wants_usage;
    uint64_t estimate;
};

/* ---- small jansson helpers ---- */

static size_t
str_bytes(const json_t *v)
{
    return json_is_string(v) ? json_string_length(v) : 0;
}

/* A non-negative whole number of tokens; anything else counts as 0. */
static uint64_t
get_count(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);

    if (json_is_integer(v))
        return json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
    if (json_is_real(v) && json_real_value(v) > 0 && json_real_value(v) < 1.8e19)
        return (uint64_t)json_real_value(v);
    return 0;
}

/* Bytes of tool_calls[*].function.arguments and .name. */
static size_t
tool_call_bytes(const json_t *calls)
{
    size_t i, n = 0;
    const json_t *c;

    if (!json_is_array(calls))
        return 0;
    json_array_foreach(calls, i, c)
    {
        const json_t *f = json_object_get(c, "function");

        n += str_bytes(json_object_get(f, "arguments"));
        n += str_bytes(json_object_get(f, "name"));
    }
    return n;
}

/* ---- request ---- */

/* Bytes of a message's content: a string, or the "text" of each content part. */
static size_t
content_bytes_of(const json_t *content)
{
    size_t i, n = 0;
    const json_t *part;

    if (json_is_string(content))
        return json_string_length(content);
    if (!json_is_array(content))
        return 0;
    json_array_foreach(content, i, part) n += str_bytes(json_object_get(part, "text"));
    return n;
}

static uint64_t
estimate_input(const json_t *root)
{
    const json_t *msgs = json_object_get(root, "messages"), *m, *tools;
    uint64_t bytes = 0, nmsg = json_array_size(msgs);
    size_t i;

    json_array_foreach(msgs, i, m)
    {
        bytes += content_bytes_of(json_object_get(m, "content"));
        bytes += tool_call_bytes(json_object_get(m, "tool_calls"));
    }
    /* Tool schemas travel as JSON: count their compact form (json_dumpb with no
     * buffer only measures). "functions" is the legacy spelling. */
    tools = json_object_get(root, "tools");
    if (tools && !json_is_null(tools))
        bytes += json_dumpb(tools, NULL, 0, JSON_COMPACT);
    tools = json_object_get(root, "functions");
    if (tools && !json_is_null(tools))
        bytes += json_dumpb(tools, NULL, 0, JSON_COMPACT);
    return (bytes + 3) / 4 + 4 * nmsg;
}

static enum gw_code
refuse(struct gw_buf *why, const char *reason)
{
    if (why && gw_buf_append_str(why, gw_str_c(reason)) != GW_OK)
        return GW_E_NOMEM;
    return GW_E_BAD_REQUEST;
}

enum gw_code
dl_openai_req_parse(const char *body, size_t len, struct dl_openai_req **out, struct gw_buf *why)
{
    struct dl_openai_req *r;
    json_error_t err;
    json_t *root, *v;

    *out = NULL;
    if (len == 0)
        return refuse(why, "body: empty, expected a JSON object");
    /* JSON_DECODE_ANY so that a valid non-object gets its own reason; JSON_ALLOW_NUL
     * since \u0000 is valid JSON. jansson's error text quotes the input ("near '...'"),
     * so only its position is used. */
    root = json_loadb(body, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!root) {
        enum json_error_code ec = json_error_code(&err);

        if (ec == json_error_out_of_memory)
            return GW_E_NOMEM;
        if (why && gw_buf_printf(why, "body: %s at line %d column %d",
                                 ec == json_error_numeric_overflow ? "number out of range"
                                                                   : "not valid JSON",
                                 err.line, err.column) != GW_OK)
            return GW_E_NOMEM;
        return GW_E_BAD_REQUEST;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return refuse(why, "body: must be a JSON object");
    }
    v = json_object_get(root, "model");
    if (!json_is_string(v) || json_string_length(v) == 0) {
        json_decref(root);
        return refuse(why, "model: required string");
    }
    if (!json_is_array(json_object_get(root, "messages"))) {
        json_decref(root);
        return refuse(why, "messages: required array");
    }
    v = json_object_get(root, "stream");
    if (v && !json_is_boolean(v) && !json_is_null(v)) {
        json_decref(root);
        return refuse(why, "stream: must be a boolean");
    }
    v = json_object_get(root, "stream_options");
    if (v && !json_is_object(v) && !json_is_null(v)) {
        json_decref(root);
        return refuse(why, "stream_options: must be an object");
    }
    r = gw_calloc(1, sizeof(*r));
    if (!r) {
        json_decref(root);
        return GW_E_NOMEM;
    }
    r->root = root;
    r->model_json = json_incref(json_object_get(root, "model"));
    r->model = (struct gw_str){json_string_value(r->model_json), json_string_length(r->model_json)};
    r->stream = json_is_true(json_object_get(root, "stream"));
    r->wants_usage = json_is_true(json_object_get(v, "include_usage"));
    r->estimate = estimate_input(root);
    *out = r;
    return GW_OK;
}

void
dl_openai_req_free(struct dl_openai_req *r)
{
    if (!r)
        return;
    json_decref(r->model_json);
    json_decref(r->root);
    gw_free(r);
}

struct gw_str
dl_openai_req_model(const struct dl_openai_req *r)
{
    return r->model;
}

bool
dl_openai_req_is_stream(const struct dl_openai_req *r)
{
    return r->stream;
}

bool
dl_openai_req_wants_usage(const struct dl_openai_req *r)
{
    return r->wants_usage;
}

uint64_t
dl_openai_req_input_estimate(const struct dl_openai_req *r)
{
    return r->estimate;
}

/* ---- render: splicing the client's bytes ---- */

/* The body was accepted by jansson, so this scanner only walks valid JSON; it still
 * checks bounds everywhere and reports failure instead of trusting that. */

static size_t
skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* At '"': moves past the closing quote. <*escaped>: the string holds a backslash. */
static bool
skip_string(const char *s, size_t n, size_t *i, bool *escaped)
{
    size_t k = *i + 1;

    *escaped = false;
    while (k < n && s[k] != '"') {
        if (s[k] == '\\') {
            *escaped = true;
            k++;
        }
        k++;
    }
    if (k >= n)
        return false;
    *i = k + 1;
    return true;
}

static bool
skip_value(const char *s, size_t n, size_t *i)
{
    size_t k = *i, depth = 0;
    bool esc;

    if (k >= n)
        return false;
    if (s[k] == '"')
        return skip_string(s, n, i, &esc);
    if (s[k] != '{' && s[k] != '[') { /* number, true, false, null */
        while (k < n && s[k] != ',' && s[k] != '}' && s[k] != ']' && s[k] != ' ' && s[k] != '\t' &&
               s[k] != '\n' && s[k] != '\r')
            k++;
        if (k == *i)
            return false;
        *i = k;
        return true;
    }
    while (k < n) {
        char c = s[k];

        if (c == '"') {
            if (!skip_string(s, n, &k, &esc))
                return false;
            continue;
        }
        if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']') {
            if (--depth == 0) {
                *i = k + 1;
                return true;
            }
        }
        k++;
    }
    return false;
}

#define SCAN_KEYS 2

/* One object level: where it closes, how many members it has, and the value spans of
 * up to SCAN_KEYS wanted keys (with how often each appears). */
struct obj_scan {
    const char *want[SCAN_KEYS];
    size_t vstart[SCAN_KEYS], vend[SCAN_KEYS];
    unsigned count[SCAN_KEYS];
    size_t close; /* offset of the closing '}' */
    size_t members;
};

/* Scans the object opening at <at>. False when the bytes are not the expected shape or
 * a key is escaped (it could spell a wanted key in another way): the caller falls back. */
static bool
scan_object(const char *s, size_t n, size_t at, struct obj_scan *o)
{
    size_t i = skip_ws(s, n, at), k;

    if (i >= n || s[i] != '{')
        return false;
    i = skip_ws(s, n, i + 1);
    o->members = 0;
    memset(o->count, 0, sizeof(o->count));
    if (i < n && s[i] == '}') {
        o->close = i;
        return true;
    }
    for (;;) {
        size_t key = i + 1, keylen;
        bool esc, hit[SCAN_KEYS];

        if (i >= n || s[i] != '"' || !skip_string(s, n, &i, &esc) || esc)
            return false;
        keylen = i - 1 - key;
        i = skip_ws(s, n, i);
        if (i >= n || s[i] != ':')
            return false;
        i = skip_ws(s, n, i + 1);
        for (k = 0; k < SCAN_KEYS; k++) {
            hit[k] = o->want[k] && strlen(o->want[k]) == keylen &&
                     memcmp(s + key, o->want[k], keylen) == 0;
            if (hit[k]) {
                o->count[k]++;
                o->vstart[k] = i;
            }
        }
        if (!skip_value(s, n, &i))
            return false;
        for (k = 0; k < SCAN_KEYS; k++)
            if (hit[k])
                o->vend[k] = i;
        o->members++;
        i = skip_ws(s, n, i);
        if (i < n && s[i] == ',') {
            i = skip_ws(s, n, i + 1);
            continue;
        }
        if (i < n && s[i] == '}') {
            o->close = i;
            return true;
        }
        return false;
    }
}

struct splice {
    size_t from, to;  /* bytes of the original replaced (from == to: an insertion) */
    const char *text; /* replacement, or NULL for the model string */
};

/* Edits the client's bytes. False when the splice cannot be used (fall back). */
static bool
render_splice(const char *body, size_t len, struct gw_str model, bool set_model, bool set_usage,
              struct gw_buf *out, enum gw_code *rc)
{
    struct obj_scan top = {.want = {"model", "stream_options"}};
    struct obj_scan so = {.want = {"include_usage", NULL}};
    struct splice ed[2];
    size_t ned = 0, pos = 0, k, start = out->len;

    *rc = GW_OK;
    if (!scan_object(body, len, 0, &top) || top.count[0] != 1 || top.count[1] > 1)
        return false;
    if (set_model)
        ed[ned++] = (struct splice){top.vstart[0], top.vend[0], NULL};
    if (set_usage) {
        if (top.count[1] == 0) {
            ed[ned++] = (struct splice){top.close, top.close,
                                        ",\"stream_options\":{\"include_usage\":true}"};
        } else if (body[top.vstart[1]] == 'n') { /* null */
            ed[ned++] = (struct splice){top.vstart[1], top.vend[1], "{\"include_usage\":true}"};
        } else {
            if (!scan_object(body, len, top.vstart[1], &so) || so.count[0] > 1)
                return false;
            if (so.count[0] == 1)
                ed[ned++] = (struct splice){so.vstart[0], so.vend[0], "true"};
            else
                ed[ned++] = (struct splice){so.close, so.close,
                                            so.members ? ",\"include_usage\":true"
                                                       : "\"include_usage\":true"};
        }
    }
    if (ned == 2 && ed[1].from < ed[0].from) {
        struct splice t = ed[0];

        ed[0] = ed[1];
        ed[1] = t;
    }
    for (k = 0; k < ned; k++) {
        if (gw_buf_append(out, body + pos, ed[k].from - pos) != GW_OK)
            goto nomem;
        if (ed[k].text ? gw_buf_append_str(out, gw_str_c(ed[k].text))
                       : gw_buf_append_json_str(out, model))
            goto nomem;
        pos = ed[k].to;
    }
    if (gw_buf_append(out, body + pos, len - pos) != GW_OK)
        goto nomem;
    return true;
nomem:
    out->len = start;
    if (out->data)
        out->data[start] = '\0';
    *rc = GW_E_NOMEM;
    return true;
}

/* The fallback: edit the parsed document and dump it compactly, keys in their order. */
static enum gw_code
render_dump(const struct dl_openai_req *r, struct gw_str model, bool set_usage, struct gw_buf *out)
{
    json_t *m, *so;
    size_t n;

    m = json_stringn_nocheck(model.ptr, model.len);
    if (!m || json_object_set_new(r->root, "model", m) != 0)
        return GW_E_NOMEM;
    if (set_usage) {
        so = json_object_get(r->root, "stream_options");
        if (!json_is_object(so)) {
            so = json_object();
            if (!so || json_object_set_new(r->root, "stream_options", so) != 0)
                return GW_E_NOMEM;
        }
        if (json_object_set_new(so, "include_usage", json_true()) != 0)
            return GW_E_NOMEM;
    }
    n = json_dumpb(r->root, NULL, 0, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (n == 0 || gw_buf_reserve(out, n) != GW_OK)
        return GW_E_NOMEM;
    if (json_dumpb(r->root, out->data + out->len, n, JSON_COMPACT | JSON_PRESERVE_ORDER) != n)
        return GW_E_NOMEM;
    out->len += n;
    out->data[out->len] = '\0';
    return GW_OK;
}

enum gw_code
dl_openai_req_render(const struct dl_openai_req *r, const char *body, size_t len,
                     struct gw_str model, struct gw_buf *out)
{
    bool set_model = !gw_str_eq(model, r->model);
    bool set_usage = r->stream && !r->wants_usage;
    enum gw_code rc;

    if (!set_model && !set_usage)
        return gw_buf_append(out, body, len);
    if (render_splice(body, len, model, set_model, set_usage, out, &rc))
        return rc;
    return render_dump(r, model, set_usage, out);
}

/* ---- streamed chunks and answers ---- */

/* OpenAI usage -> gw usage: prompt_tokens counts cached tokens too; gw keeps the
 * uncached input apart from cache reads. */
static void
read_usage(const json_t *u, struct gw_usage *usage)
{
    uint64_t prompt = get_count(u, "prompt_tokens");
    uint64_t cached = get_count(json_object_get(u, "prompt_tokens_details"), "cached_tokens");

    memset(usage, 0, sizeof(*usage));
    usage->cache_read_tokens = cached;
    usage->input_tokens = prompt > cached ? prompt - cached : 0;
    usage->output_tokens = get_count(u, "completion_tokens");
    usage->cache_write_tokens = 0;
}

/* Bytes of the text, reasoning, refusal and tool-call parts of a delta or message. */
static size_t
delta_bytes(const json_t *d)
{
    return content_bytes_of(json_object_get(d, "content")) +
           str_bytes(json_object_get(d, "reasoning_content")) +
           str_bytes(json_object_get(d, "reasoning")) + str_bytes(json_object_get(d, "refusal")) +
           tool_call_bytes(json_object_get(d, "tool_calls"));
}

enum gw_code
dl_openai_chunk_inspect(struct gw_str data, struct dl_openai_chunk *out)
{
    json_error_t err;
    json_t *root, *choices, *c, *u;
    size_t i = 0;

    memset(out, 0, sizeof(*out));
    while (i < data.len && (data.ptr[i] == ' ' || data.ptr[i] == '\t' || data.ptr[i] == '\n' ||
                            data.ptr[i] == '\r'))
        i++;
    if (data.len - i >= 6 && memcmp(data.ptr + i, "[DONE]", 6) == 0) {
        size_t k = i + 6;

        while (k < data.len && (data.ptr[k] == ' ' || data.ptr[k] == '\t' || data.ptr[k] == '\n' ||
                                data.ptr[k] == '\r'))
            k++;
        if (k == data.len) {
            out->done = true;
            return GW_OK;
        }
    }
    /* Only objects are chunks: skip the parse (and its allocations) for anything else. */
    if (i >= data.len || data.ptr[i] != '{')
        return GW_OK;
    root = json_loadb(data.ptr, data.len, JSON_ALLOW_NUL, &err);
    if (!root)
        return json_error_code(&err) == json_error_out_of_memory ? GW_E_NOMEM : GW_OK;
    if (!json_is_object(root)) {
        json_decref(root);
        return GW_OK;
    }
    c = json_object_get(root, "error");
    if (c && !json_is_null(c))
        out->is_error = true;
    choices = json_object_get(root, "choices");
    json_array_foreach(choices, i, c) out->content_bytes +=
        delta_bytes(json_object_get(c, "delta"));
    out->has_content = out->content_bytes > 0;
    u = json_object_get(root, "usage");
    if (json_is_object(u)) {
        out->has_usage = true;
        read_usage(u, &out->usage);
        /* The include_usage chunk has "choices": []; some servers leave it out. */
        out->usage_only =
            choices == NULL || (json_is_array(choices) && json_array_size(choices) == 0);
    }
    json_decref(root);
    return GW_OK;
}

bool
dl_openai_answer_usage(struct gw_str body, struct gw_usage *usage, size_t *content_bytes)
{
    json_error_t err;
    json_t *root, *choices, *c, *u;
    size_t i, n = 0;
    bool has = false;

    memset(usage, 0, sizeof(*usage));
    if (content_bytes)
        *content_bytes = 0;
    root = json_loadb(body.ptr, body.len, JSON_ALLOW_NUL, &err);
    if (!root)
        return false;
    choices = json_object_get(root, "choices");
    json_array_foreach(choices, i, c) n += delta_bytes(json_object_get(c, "message"));
    u = json_object_get(root, "usage");
    if (json_is_object(u)) {
        read_usage(u, usage);
        has = true;
    }
    if (content_bytes)
        *content_bytes = n;
    json_decref(root);
    return has;
}

/* ---- errors ---- */

/* OpenAI's error "type" for a gw code. Codes whose meaning an SDK acts on come first
 * (by code), then the HTTP status decides. One table per dialect (STYLE.md 7). */
static const struct {
    enum gw_code code;
    const char *type;
} openai_type_by_code[] = {
    /* Calendar limits (quotas) go here as { GW_E_..., "insufficient_quota" } so that
     * the OpenAI SDKs stop retrying. */
    {GW_OK, NULL},
};

static const struct {
    int status;
    const char *type;
} openai_type_by_status[] = {
    {400, "invalid_request_error"}, {413, "invalid_request_error"}, {422, "invalid_request_error"},
    {401, "authentication_error"},  {403, "permission_error"},      {404, "not_found_error"},
    {408, "timeout_error"},         {504, "timeout_error"},         {429, "rate_limit_error"},
};

static const char *
openai_error_type(enum gw_code code, int status)
{
    size_t i;

    for (i = 0; i < sizeof(openai_type_by_code) / sizeof(openai_type_by_code[0]); i++)
        if (openai_type_by_code[i].type && openai_type_by_code[i].code == code)
            return openai_type_by_code[i].type;
    for (i = 0; i < sizeof(openai_type_by_status) / sizeof(openai_type_by_status[0]); i++)
        if (openai_type_by_status[i].status == status)
            return openai_type_by_status[i].type;
    if (status >= 400 && status < 500)
        return "invalid_request_error";
    return "api_error";
}

enum gw_code
dl_openai_error_body(enum gw_code code, struct gw_str message, struct gw_buf *out)
{
    int status = gw_code_http_status(code);
    size_t start = out->len;

    /* A config code (0) or GW_OK (200) in an error body is a caller bug: say 500. */
    if (status < 400)
        status = 500;
    if (gw_buf_append_str(out, GW_STR_LIT("{\"error\":{\"message\":")) != GW_OK ||
        gw_buf_append_json_str(out, message) != GW_OK ||
        gw_buf_printf(out, ",\"type\":\"%s\",\"code\":", openai_error_type(code, status)) !=
            GW_OK ||
        gw_buf_append_json_str(out, gw_str_c(gw_code_str(code))) != GW_OK ||
        gw_buf_printf(out, ",\"status\":%d}}", status) != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
        return GW_E_NOMEM;
    }
    return GW_OK;
}

enum gw_code
dl_openai_error_chunk(enum gw_code code, struct gw_str message, struct gw_buf *out)
{
    size_t start = out->len;

    if (gw_buf_append_str(out, GW_STR_LIT("data: ")) != GW_OK ||
        dl_openai_error_body(code, message, out) != GW_OK ||
        gw_buf_append_str(out, GW_STR_LIT("\n\n")) != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
        return GW_E_NOMEM;
    }
    return GW_OK;
}
