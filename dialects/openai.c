/* SPDX-License-Identifier: MIT
 * dialects/openai.c - OpenAI Chat Completions: request parse and render, answer
 * inspection (content bytes, usage), error bodies and error chunks; streamed chunks are
 * read by the shape's event parser (openai_answer.c).
 * Pure converter: no I/O, no clock.
 * The hot paths (request parse, answer inspection) make one validating pass
 * over the bytes with dialects/json_scan.h and keep only what they need: no tree, no
 * allocation but the dl_openai_req itself. They accept and refuse exactly what
 * jansson's json_loadb does and read the same values, duplicate keys included (the last
 * one counts); tests/fuzz/fuzz_openai.c checks this against jansson. Known differences:
 * the line/column of a refusal may point a token earlier than jansson's, the input
 * estimate counts every copy of a duplicate key inside "tools"/"functions", and one
 * deliberate refusal: a request holding twice a top-level field the gateway reads
 * (read_fields below), or include_usage twice in stream_options, is refused (issue 8:
 * one body per request). The gateway would act on the last copy while a same-shape
 * upstream, which receives the client's bytes, may read the first: routed and allowed
 * on "model":"a", served as "model":"b". Only the fields the gateway reads are checked
 * (a duplicate it never reads changes nothing it decided, and the check stays a bit
 * per key, no allocation); a field that any caller starts reading joins read_fields.
 * Render edits the client's bytes in place (the "model" value, include_usage) at the
 * offsets the parse found, so that everything else, numbers included, reaches the
 * upstream exactly as the client wrote it; jansson's dump (which rewrites 0.7 as
 * 0.69999999999999996) is only the fallback for bodies the splice does not handle
 * (escaped keys, or duplicate keys in the rescan of a copy).
 * Owns:    a dl_openai_req owns a copy of the model; it keeps the parsed body's address
 *          and length only to recognise it. Every other call frees what it allocates
 *          before returning.
 * Threads: any; one request on one thread.
 * See:     dialects/openai.h, dialects/json_scan.h, tests/unit/dialects/test_openai.c,
 *          tests/fuzz/fuzz_openai.c
 */
#include "dialects/openai.h"

#include <jansson.h>
#include <string.h>

#include "core/alloc.h"
#include "dialects/json_scan.h"
#include "dialects/openai-priv.h"

/* What a value is, from its first byte (the scanner validates the rest). */
enum kind { K_ABSENT, K_NULL, K_TRUE, K_FALSE, K_STRING, K_NUMBER, K_OBJECT, K_ARRAY };

static enum kind
kind_of(int c)
{
    switch (c) {
    case 'n': return K_NULL;
    case 't': return K_TRUE;
    case 'f': return K_FALSE;
    case '"': return K_STRING;
    case '{': return K_OBJECT;
    case '[': return K_ARRAY;
    default: return K_NUMBER;
    }
}

#define KEY_IS(j, k, lit) dl_json_key_is((j), (k), (lit), sizeof(lit) - 1)

/* ---- byte counts: one value at the cursor each ---- */

/* Reads the value at the cursor into <*out> (a byte count); false on an error. */
typedef bool (*scan_fn)(struct dl_json *j, size_t *out);

/* Decoded bytes of a string; 0 for any other value (skipped). */
static bool
str_bytes(struct dl_json *j, size_t *out)
{
    struct dl_json_str s;

    *out = 0;
    if (dl_json_peek(j) != '"')
        return dl_json_skip(j, NULL);
    if (!dl_json_string(j, &s))
        return false;
    *out = s.dlen;
    return true;
}

/* An object's member <key> through <fn> (the last one, as jansson keeps it); 0 when it
 * is missing or the value is not an object. */
static inline bool
member_bytes(struct dl_json *j, const char *key, size_t klen, scan_fn fn, size_t *out)
{
    struct dl_json_str k;
    bool first = true;
    size_t v = 0;
    int rc;

    *out = 0;
    if (dl_json_peek(j) != '{')
        return dl_json_skip(j, NULL);
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0)
        if (!(dl_json_key_is(j, &k, key, klen) ? fn(j, &v) : dl_json_skip(j, NULL)))
            return false;
    *out = v;
    return rc == 0;
}

/* The sum of <fn> over an array's elements, and their number; 0 and 0 when the value is
 * not an array. */
static bool
each_bytes(struct dl_json *j, scan_fn fn, size_t *out, size_t *count)
{
    bool first = true;
    size_t sum = 0, n = 0, v;
    int rc;

    *out = 0;
    if (count)
        *count = 0;
    if (dl_json_peek(j) != '[')
        return dl_json_skip(j, NULL);
    if (!dl_json_arr_enter(j))
        return false;
    while ((rc = dl_json_arr_next(j, &first)) > 0) {
        if (!fn(j, &v))
            return false;
        sum += v;
        n++;
    }
    *out = sum;
    if (count)
        *count = n;
    return rc == 0;
}

static bool
part_text_bytes(struct dl_json *j, size_t *out)
{
    return member_bytes(j, "text", 4, str_bytes, out);
}

/* A message's content: a string, or the "text" of each content part. */
static bool
content_bytes(struct dl_json *j, size_t *out)
{
    if (dl_json_peek(j) == '[')
        return each_bytes(j, part_text_bytes, out, NULL);
    return str_bytes(j, out);
}

/* function.arguments and function.name of one tool call. */
static bool
function_bytes(struct dl_json *j, size_t *out)
{
    struct dl_json_str k;
    bool first = true;
    size_t args = 0, name = 0;
    int rc;

    *out = 0;
    if (dl_json_peek(j) != '{')
        return dl_json_skip(j, NULL);
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        bool ok;

        if (KEY_IS(j, &k, "arguments"))
            ok = str_bytes(j, &args);
        else if (KEY_IS(j, &k, "name"))
            ok = str_bytes(j, &name);
        else
            ok = dl_json_skip(j, NULL);
        if (!ok)
            return false;
    }
    *out = args + name;
    return rc == 0;
}

static bool
tool_call_bytes(struct dl_json *j, size_t *out)
{
    return member_bytes(j, "function", 8, function_bytes, out);
}

static bool
tool_calls_bytes(struct dl_json *j, size_t *out)
{
    return each_bytes(j, tool_call_bytes, out, NULL);
}

/* Bytes of a message (content, tool calls) or, with <answer>, of a streamed delta or an
 * answer's message (also reasoning, refusal). */
static bool
message_bytes(struct dl_json *j, bool answer, size_t *out)
{
    struct dl_json_str k;
    bool first = true;
    size_t content = 0, calls = 0, rc1 = 0, rc2 = 0, refusal = 0;
    int rc;

    *out = 0;
    if (dl_json_peek(j) != '{')
        return dl_json_skip(j, NULL);
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        bool ok;

        if (KEY_IS(j, &k, "content"))
            ok = content_bytes(j, &content);
        else if (KEY_IS(j, &k, "tool_calls"))
            ok = tool_calls_bytes(j, &calls);
        else if (answer && KEY_IS(j, &k, "reasoning_content"))
            ok = str_bytes(j, &rc1);
        else if (answer && KEY_IS(j, &k, "reasoning"))
            ok = str_bytes(j, &rc2);
        else if (answer && KEY_IS(j, &k, "refusal"))
            ok = str_bytes(j, &refusal);
        else
            ok = dl_json_skip(j, NULL);
        if (!ok)
            return false;
    }
    *out = content + calls + rc1 + rc2 + refusal;
    return rc == 0;
}

static bool
request_message_bytes(struct dl_json *j, size_t *out)
{
    return message_bytes(j, false, out);
}

static bool
answer_message_bytes(struct dl_json *j, size_t *out)
{
    return message_bytes(j, true, out);
}

static bool
choice_message_bytes(struct dl_json *j, size_t *out)
{
    return member_bytes(j, "message", 7, answer_message_bytes, out);
}

/* ---- request ---- */

/* The top-level fields the gateway reads, and so refuses to see twice (issue 8): model
 * (routing, the key's allowed models), messages, tools and functions (the input
 * estimate; messages also the conversation key of dialects/openai_conv.c), stream and
 * stream_options (the relay, the usage chunk), prompt_cache_key (the conversation key),
 * max_tokens and max_completion_tokens (the Anthropic conversion's max_tokens).
 * include_usage inside stream_options is checked too (DUP_INCLUDE_USAGE). A field that
 * this file, openai_conv.c, anthropic.c or net/ starts reading is added here; the fuzz
 * oracle (tests/fuzz/fuzz_openai.c) holds the same list. */
enum read_field {
    RF_MODEL,
    RF_MESSAGES,
    RF_STREAM,
    RF_STREAM_OPTIONS,
    RF_TOOLS,
    RF_FUNCTIONS,
    RF_PROMPT_CACHE_KEY,
    RF_MAX_TOKENS,
    RF_MAX_COMPLETION_TOKENS,
    RF__COUNT,
};

static const struct {
    const char *name;
    size_t len;
} read_fields[RF__COUNT] = {
    [RF_MODEL] = {"model", 5},
    [RF_MESSAGES] = {"messages", 8},
    [RF_STREAM] = {"stream", 6},
    [RF_STREAM_OPTIONS] = {"stream_options", 14},
    [RF_TOOLS] = {"tools", 5},
    [RF_FUNCTIONS] = {"functions", 9},
    [RF_PROMPT_CACHE_KEY] = {"prompt_cache_key", 16},
    [RF_MAX_TOKENS] = {"max_tokens", 10},
    [RF_MAX_COMPLETION_TOKENS] = {"max_completion_tokens", 21},
};

#define DUP_INCLUDE_USAGE "stream_options.include_usage"

/* What the one pass over a request body finds. Kinds and spans are those of the last
 * occurrence of each key (jansson keeps the last); render splices at the offsets. */
struct req_scan {
    size_t close;           /* offset of the top-level '}' */
    bool key_escaped;       /* some top-level key holds a backslash */
    unsigned seen;          /* bit 1 << RF_x: that read field was met */
    const char *dup;        /* the first read field met twice (its name), or NULL */
    unsigned model_n, so_n; /* occurrences of "model" and "stream_options" */
    enum kind model, messages, stream, so;
    struct dl_json_str model_str; /* the last "model" string */
    size_t model_at, model_end;   /* its value span, quotes included */
    size_t so_at, so_end;         /* the value span of the last "stream_options" */
    /* the last "stream_options", when it is an object */
    size_t so_close, so_members;
    bool so_key_escaped;
    unsigned iu_n; /* occurrences of "include_usage" in it */
    size_t iu_at, iu_end;
    bool iu_true;
    /* the estimate's parts */
    size_t msg_bytes, nmsg, tools_bytes, functions_bytes;
};

static bool
scan_stream_options(struct dl_json *j, struct req_scan *rs)
{
    struct dl_json_str k;
    bool first = true;
    int rc;

    rs->so_members = 0;
    rs->so_key_escaped = false;
    rs->iu_n = 0;
    rs->iu_true = false;
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        rs->so_members++;
        if (k.escaped)
            rs->so_key_escaped = true;
        if (KEY_IS(j, &k, "include_usage")) {
            if (++rs->iu_n == 2 && !rs->dup)
                rs->dup = DUP_INCLUDE_USAGE;
            rs->iu_at = j->i;
            rs->iu_true = j->i < j->n && j->s[j->i] == 't';
            if (!dl_json_skip(j, NULL))
                return false;
            rs->iu_end = j->i;
        } else if (!dl_json_skip(j, NULL)) {
            return false;
        }
    }
    rs->so_close = j->i - 1;
    return rc == 0;
}

/* Tool schemas travel as JSON: their compact form counts (jansson's json_dumpb of an
 * array or object; anything else dumps to nothing). */
static bool
schema_bytes(struct dl_json *j, size_t *out)
{
    int c = dl_json_peek(j);

    *out = 0;
    return dl_json_skip(j, c == '{' || c == '[' ? out : NULL);
}

/* True when the key <k> is read field <f> (a constant once inlined: the compare is too). */
static inline bool
is_field(const struct dl_json *j, const struct dl_json_str *k, enum read_field f)
{
    return dl_json_key_is(j, k, read_fields[f].name, read_fields[f].len);
}

/* Which read field the key <k> is (escapes decoded), or RF__COUNT for another key. Only
 * the fields of the key's length are compared, each with a constant. */
static enum read_field
read_field_of(const struct dl_json *j, const struct dl_json_str *k)
{
    _Static_assert(RF__COUNT == 9, "a read field added needs its case here");
    switch (k->dlen) {
    case 5:
        return is_field(j, k, RF_MODEL)   ? RF_MODEL
               : is_field(j, k, RF_TOOLS) ? RF_TOOLS
                                          : RF__COUNT;
    case 6: return is_field(j, k, RF_STREAM) ? RF_STREAM : RF__COUNT;
    case 8: return is_field(j, k, RF_MESSAGES) ? RF_MESSAGES : RF__COUNT;
    case 9: return is_field(j, k, RF_FUNCTIONS) ? RF_FUNCTIONS : RF__COUNT;
    case 10: return is_field(j, k, RF_MAX_TOKENS) ? RF_MAX_TOKENS : RF__COUNT;
    case 14: return is_field(j, k, RF_STREAM_OPTIONS) ? RF_STREAM_OPTIONS : RF__COUNT;
    case 16: return is_field(j, k, RF_PROMPT_CACHE_KEY) ? RF_PROMPT_CACHE_KEY : RF__COUNT;
    case 21: return is_field(j, k, RF_MAX_COMPLETION_TOKENS) ? RF_MAX_COMPLETION_TOKENS : RF__COUNT;
    default: return RF__COUNT;
    }
}

/* Which read field the key <k> is, or RF__COUNT for another key; notes the first one met
 * twice in <rs->dup>. */
static enum read_field
note_field(const struct dl_json *j, const struct dl_json_str *k, struct req_scan *rs)
{
    enum read_field f = read_field_of(j, k);

    if (f == RF__COUNT)
        return RF__COUNT;
    if ((rs->seen & (1u << f)) && !rs->dup)
        rs->dup = read_fields[f].name;
    rs->seen |= 1u << f;
    return f;
}

/* The whole request, the cursor at its '{'. */
static bool
scan_request(struct dl_json *j, struct req_scan *rs)
{
    struct dl_json_str k;
    bool first = true;
    int rc;

    memset(rs, 0, sizeof(*rs));
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        int c = dl_json_peek(j);
        enum read_field f;
        bool ok;

        if (k.escaped)
            rs->key_escaped = true;
        f = note_field(j, &k, rs);
        if (f == RF_MODEL) {
            rs->model_n++;
            rs->model = kind_of(c);
            rs->model_at = j->i;
            ok = c == '"' ? dl_json_string(j, &rs->model_str) : dl_json_skip(j, NULL);
            rs->model_end = j->i;
        } else if (f == RF_MESSAGES) {
            rs->messages = kind_of(c);
            ok = each_bytes(j, request_message_bytes, &rs->msg_bytes, &rs->nmsg);
        } else if (f == RF_STREAM) {
            rs->stream = kind_of(c);
            ok = dl_json_skip(j, NULL);
        } else if (f == RF_STREAM_OPTIONS) {
            rs->so_n++;
            rs->so = kind_of(c);
            rs->so_at = j->i;
            ok = c == '{' ? scan_stream_options(j, rs) : dl_json_skip(j, NULL);
            rs->so_end = j->i;
        } else if (f == RF_TOOLS) {
            ok = schema_bytes(j, &rs->tools_bytes);
        } else if (f == RF_FUNCTIONS) { /* the legacy spelling */
            ok = schema_bytes(j, &rs->functions_bytes);
        } else {
            ok = dl_json_skip(j, NULL);
        }
        if (!ok)
            return false;
    }
    if (rc < 0)
        return false;
    rs->close = j->i - 1;
    return dl_json_end(j);
}

struct dl_openai_req {
    struct req_scan scan; /* offsets into <body>, for render */
    const char *body;     /* the bytes parsed: render recognises them, canon reads them */
    size_t len;
    struct gw_str model; /* points at <model_buf> */
    bool stream;
    bool wants_usage;
    uint64_t estimate;
    char model_buf[]; /* the decoded model, NUL-terminated */
};

static enum gw_code
refuse(struct gw_buf *why, const char *reason)
{
    if (why && gw_buf_append_str(why, gw_str_c(reason)) != GW_OK)
        return GW_E_NOMEM;
    return GW_E_BAD_REQUEST;
}

/* The checks every reading of a request makes (dl_openai_req_parse, dl_openai_req_check):
 * one validating pass into <rs>, then the refusals. */
static enum gw_code
req_checked(const char *body, size_t len, struct dl_json *j0, struct req_scan *rs0,
            struct gw_buf *why)
{
    struct dl_json j;
    struct req_scan rs;
    bool ok;
    int c;

    if (len == 0)
        return refuse(why, "body: empty, expected a JSON object");
    dl_json_init(&j, body, len);
    c = dl_json_peek(&j);
    /* a valid non-object gets its own reason */
    ok = c == '{' ? scan_request(&j, &rs) : dl_json_skip(&j, NULL) && dl_json_end(&j);
    if (!ok)
        return dl_refuse_json(why, &j);
    if (c != '{')
        return refuse(why, "body: must be a JSON object");
    if (rs.dup) {
        /* one body per request (issue 8): the name is ours, never the client's bytes */
        if (why && gw_buf_printf(why, "duplicate key \"%s\" in the request body", rs.dup) != GW_OK)
            return GW_E_NOMEM;
        return GW_E_BAD_REQUEST;
    }
    if (rs.model != K_STRING || rs.model_str.dlen == 0)
        return refuse(why, "model: required string");
    if (rs.messages != K_ARRAY)
        return refuse(why, "messages: required array");
    if (rs.stream != K_ABSENT && rs.stream != K_TRUE && rs.stream != K_FALSE && rs.stream != K_NULL)
        return refuse(why, "stream: must be a boolean");
    if (rs.so != K_ABSENT && rs.so != K_OBJECT && rs.so != K_NULL)
        return refuse(why, "stream_options: must be an object");
    *j0 = j;
    *rs0 = rs;
    return GW_OK;
}

enum gw_code
dl_openai_req_canon(const struct dl_openai_req *r, struct gw_arena *a, struct dl_request *out,
                    struct gw_buf *why)
{
    return dl_openai_request_read(a, r->body, r->len, out, why);
}

enum gw_code
dl_openai_req_check(const char *body, size_t len, struct gw_buf *why)
{
    struct req_scan rs;
    struct dl_json j;

    return req_checked(body, len, &j, &rs, why);
}

enum gw_code
dl_openai_req_parse(const char *body, size_t len, struct dl_openai_req **out, struct gw_buf *why)
{
    struct dl_openai_req *r;
    struct req_scan rs;
    struct dl_json j;
    enum gw_code rc;

    *out = NULL;
    rc = req_checked(body, len, &j, &rs, why);
    if (rc != GW_OK)
        return rc;
    r = gw_malloc(sizeof(*r) + rs.model_str.dlen + 1);
    if (!r)
        return GW_E_NOMEM;
    r->scan = rs;
    r->body = body;
    r->len = len;
    dl_json_decode(&j, &rs.model_str, r->model_buf);
    r->model_buf[rs.model_str.dlen] = '\0';
    r->model = (struct gw_str){r->model_buf, rs.model_str.dlen};
    r->stream = rs.stream == K_TRUE;
    r->wants_usage = rs.so == K_OBJECT && rs.iu_true;
    /* bytes of text, tool arguments and schemas / 4, rounded up, + 4 per message */
    r->estimate = (rs.msg_bytes + rs.tools_bytes + rs.functions_bytes + 3) / 4 + 4 * rs.nmsg;
    *out = r;
    return GW_OK;
}

void
dl_openai_req_free(struct dl_openai_req *r)
{
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

/* <model> as a JSON string. Model names rarely need escapes: copy them whole then. */
static enum gw_code
append_model(struct gw_buf *out, struct gw_str model)
{
    size_t i;

    for (i = 0; i < model.len; i++) {
        unsigned char c = (unsigned char)model.ptr[i];

        if (c < 0x20 || c == '"' || c == '\\')
            return gw_buf_append_json_str(out, model);
    }
    if (gw_buf_reserve(out, model.len + 2) != GW_OK)
        return GW_E_NOMEM;
    out->data[out->len++] = '"';
    memcpy(out->data + out->len, model.ptr, model.len);
    out->len += model.len;
    out->data[out->len++] = '"';
    out->data[out->len] = '\0';
    return GW_OK;
}

struct splice {
    size_t from, to;  /* bytes of the original replaced (from == to: an insertion) */
    const char *text; /* replacement, or NULL for the model string */
};

/* True when the splice can edit these bytes: "model" once and unescaped keys at the top,
 * and, where include_usage must be set, one stream_options with unescaped keys and at
 * most one include_usage. (An escaped key could spell a wanted one in another way;
 * duplicates would leave an old value that a reader may take. The parse refuses those
 * duplicates; they reach here only when render rescans other bytes.) */
static bool
splice_fits(const struct req_scan *rs, bool set_usage)
{
    if (rs->key_escaped || rs->model_n != 1 || rs->so_n > 1)
        return false;
    if (set_usage && rs->so == K_OBJECT && (rs->so_key_escaped || rs->iu_n > 1))
        return false;
    return true;
}

static enum gw_code
render_splice(const struct req_scan *rs, const char *body, size_t len, struct gw_str model,
              bool set_model, bool set_usage, struct gw_buf *out)
{
    struct splice ed[2];
    size_t ned = 0, pos = 0, k, start = out->len;

    if (set_model)
        ed[ned++] = (struct splice){rs->model_at, rs->model_end, NULL};
    if (set_usage) {
        if (rs->so_n == 0)
            ed[ned++] = (struct splice){rs->close, rs->close,
                                        ",\"stream_options\":{\"include_usage\":true}"};
        else if (rs->so == K_NULL)
            ed[ned++] = (struct splice){rs->so_at, rs->so_end, "{\"include_usage\":true}"};
        else if (rs->iu_n == 1)
            ed[ned++] = (struct splice){rs->iu_at, rs->iu_end, "true"};
        else
            ed[ned++] = (struct splice){rs->so_close, rs->so_close,
                                        rs->so_members ? ",\"include_usage\":true"
                                                       : "\"include_usage\":true"};
    }
    if (ned == 2 && ed[1].from < ed[0].from) {
        struct splice t = ed[0];

        ed[0] = ed[1];
        ed[1] = t;
    }
    if (gw_buf_reserve(out, len + model.len * 6 + 48) != GW_OK)
        return GW_E_NOMEM;
    for (k = 0; k < ned; k++) {
        if (gw_buf_append(out, body + pos, ed[k].from - pos) != GW_OK)
            goto nomem;
        if (ed[k].text ? gw_buf_append_str(out, gw_str_c(ed[k].text)) : append_model(out, model))
            goto nomem;
        pos = ed[k].to;
    }
    if (gw_buf_append(out, body + pos, len - pos) != GW_OK)
        goto nomem;
    return GW_OK;
nomem:
    out->len = start;
    if (out->data)
        out->data[start] = '\0';
    return GW_E_NOMEM;
}

/* The fallback: parse with jansson, edit the document and dump it compactly, keys in
 * their order. Rare (escaped or duplicate keys), so the cost does not matter here. */
static enum gw_code
render_dump(const char *body, size_t len, struct gw_str model, bool set_usage, struct gw_buf *out)
{
    enum gw_code rc = GW_E_NOMEM;
    json_error_t err;
    json_t *root, *m, *so;
    size_t n;

    root = json_loadb(body, len, JSON_ALLOW_NUL, &err);
    if (!root)
        return json_error_code(&err) == json_error_out_of_memory ? GW_E_NOMEM : GW_E_BAD_REQUEST;
    if (!json_is_object(root)) {
        rc = GW_E_BAD_REQUEST;
        goto out;
    }
    m = json_stringn_nocheck(model.ptr, model.len);
    if (!m || json_object_set_new(root, "model", m) != 0)
        goto out;
    if (set_usage) {
        so = json_object_get(root, "stream_options");
        if (!json_is_object(so)) {
            so = json_object();
            if (!so || json_object_set_new(root, "stream_options", so) != 0)
                goto out;
        }
        if (json_object_set_new(so, "include_usage", json_true()) != 0)
            goto out;
    }
    n = json_dumpb(root, NULL, 0, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (n == 0 || gw_buf_reserve(out, n) != GW_OK)
        goto out;
    if (json_dumpb(root, out->data + out->len, n, JSON_COMPACT | JSON_PRESERVE_ORDER) != n)
        goto out;
    out->len += n;
    out->data[out->len] = '\0';
    rc = GW_OK;
out:
    json_decref(root);
    return rc;
}

enum gw_code
dl_openai_req_render(const struct dl_openai_req *r, const char *body, size_t len,
                     struct gw_str model, struct gw_buf *out)
{
    bool set_model = !gw_str_eq(model, r->model);
    bool set_usage = r->stream && !r->wants_usage;
    const struct req_scan *rs = &r->scan;
    struct req_scan again;

    if (!set_model && !set_usage)
        return gw_buf_append(out, body, len);
    if (body != r->body || len != r->len || body[rs->model_at] != '"' ||
        body[rs->model_end - 1] != '"' || body[rs->close] != '}') {
        /* Not the buffer parsed (a copy, or a caller's mistake): scan these bytes. The
         * byte checks are cheap insurance against a reused buffer. */
        struct dl_json j;

        dl_json_init(&j, body, len);
        if (dl_json_peek(&j) != '{' || !scan_request(&j, &again))
            return j.err == DL_JSON_E_NOMEM ? GW_E_NOMEM
                                            : render_dump(body, len, model, set_usage, out);
        rs = &again;
    }
    if (splice_fits(rs, set_usage))
        return render_splice(rs, body, len, model, set_model, set_usage, out);
    return render_dump(body, len, model, set_usage, out);
}

/* ---- streamed chunks and answers ---- */

/* A non-negative whole number of tokens; anything else counts as 0. */
static bool
read_count(struct dl_json *j, uint64_t *out)
{
    struct dl_json_num num;
    int c = dl_json_peek(j);

    *out = 0;
    if (c != '-' && (c < '0' || c > '9'))
        return dl_json_skip(j, NULL);
    return dl_json_number(j, &num) && dl_json_num_count(j, &num, out);
}

/* One count <name> of a *_tokens_details object (cached_tokens, reasoning_tokens). */
static bool
read_detail(struct dl_json *j, const char *name, size_t len, uint64_t *count)
{
    struct dl_json_str k;
    bool first = true;
    int rc;

    *count = 0;
    if (dl_json_peek(j) != '{')
        return dl_json_skip(j, NULL);
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0)
        if (!(dl_json_key_is(j, &k, name, len) ? read_count(j, count) : dl_json_skip(j, NULL)))
            return false;
    return rc == 0;
}

/* OpenAI usage -> gw usage, the cursor at the object: prompt_tokens counts cached tokens
 * too; gw keeps the uncached input apart from cache reads. */
static bool
read_usage(struct dl_json *j, struct gw_usage *usage)
{
    uint64_t prompt = 0, cached = 0, completion = 0, reasoning = 0;
    struct dl_json_str k;
    bool first = true;
    int rc;

    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        bool ok;

        if (KEY_IS(j, &k, "prompt_tokens"))
            ok = read_count(j, &prompt);
        else if (KEY_IS(j, &k, "completion_tokens"))
            ok = read_count(j, &completion);
        else if (KEY_IS(j, &k, "prompt_tokens_details"))
            ok = read_detail(j, "cached_tokens", 13, &cached);
        else if (KEY_IS(j, &k, "completion_tokens_details"))
            ok = read_detail(j, "reasoning_tokens", 16, &reasoning);
        else
            ok = dl_json_skip(j, NULL);
        if (!ok)
            return false;
    }
    memset(usage, 0, sizeof(*usage));
    usage->cache_read_tokens = cached;
    usage->input_tokens = prompt > cached ? prompt - cached : 0;
    usage->output_tokens = completion;
    usage->reasoning_tokens = reasoning;
    return rc == 0;
}

bool
dl_openai_usage_scan(struct dl_json *j, struct gw_usage *u)
{
    return read_usage(j, u);
}

/* What an answer holds. */
struct resp_scan {
    enum kind choices; /* K_ABSENT, K_ARRAY or another kind */
    size_t choices_at; /* where the last "choices" value begins, and its depth */
    unsigned choices_depth;
    bool has_usage;
    struct gw_usage usage;
};

/* An answer, the cursor at its '{': "choices" is skipped (checked as JSON) and its
 * place kept, for dl_openai_answer_usage to count its content only when it must. */
static bool
scan_response(struct dl_json *j, struct resp_scan *rs)
{
    struct dl_json_str k;
    bool first = true;
    int rc;

    memset(rs, 0, sizeof(*rs));
    if (!dl_json_obj_enter(j))
        return false;
    while ((rc = dl_json_obj_next(j, &first, &k)) > 0) {
        int c = dl_json_peek(j);
        bool ok;

        if (KEY_IS(j, &k, "choices")) {
            rs->choices = kind_of(c);
            rs->choices_at = j->i;
            rs->choices_depth = j->depth;
            ok = dl_json_skip(j, NULL);
        } else if (KEY_IS(j, &k, "usage")) {
            rs->has_usage = c == '{';
            memset(&rs->usage, 0, sizeof(rs->usage));
            ok = c == '{' ? read_usage(j, &rs->usage) : dl_json_skip(j, NULL);
        } else {
            ok = dl_json_skip(j, NULL);
        }
        if (!ok)
            return false;
    }
    return rc == 0 && dl_json_end(j);
}

bool
dl_openai_answer_usage(struct gw_str body, struct gw_usage *usage, size_t *content_bytes)
{
    struct resp_scan rs;
    struct dl_json j;

    memset(usage, 0, sizeof(*usage));
    if (content_bytes)
        *content_bytes = 0;
    dl_json_init(&j, body.ptr, body.len);
    /* An array (valid or not) has neither choices nor usage; anything else but an
     * object is not JSON that jansson would load. */
    if (dl_json_peek(&j) != '{' || !scan_response(&j, &rs))
        return false;
    if (rs.has_usage) {
        *usage = rs.usage;
        return true;
    }
    /* No usage (rare): the choices' content is counted, from where they are (the scan
     * above has checked the whole body, so this reading cannot fail). */
    if (content_bytes && rs.choices == K_ARRAY) {
        j.i = rs.choices_at;
        j.depth = rs.choices_depth;
        if (!each_bytes(&j, choice_message_bytes, content_bytes, NULL))
            *content_bytes = 0;
    }
    return false;
}

/* ---- errors ---- */

/* OpenAI's error "type" for a gw code. Codes whose meaning an SDK acts on come first
 * (by code), then the HTTP status decides. One table per dialect (STYLE.md 7). */
static const struct {
    enum gw_code code;
    const char *type;
} openai_type_by_code[] = {
    /* Calendar limits (quotas): insufficient_quota, which the OpenAI SDKs do not retry. */
    {GW_E_KEY_LIMIT_REQUESTS_PER_PERIOD, "insufficient_quota"},
    {GW_E_KEY_LIMIT_TOKENS_PER_PERIOD, "insufficient_quota"},
    {GW_E_KEY_LIMIT_COST_PER_PERIOD, "insufficient_quota"},
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

/* Codes for which OpenAI has a code of its own that clients act on (DESIGN.md 8: a used
 * up quota stops the SDKs; context_length_exceeded makes agents trim the conversation):
 * the body's "code" is OpenAI's, and gw's stays in "gw_code" (and x-gw-code). */
static const struct {
    enum gw_code code;
    const char *openai_code;
} openai_code_by_code[] = {
    {GW_E_KEY_LIMIT_REQUESTS_PER_PERIOD, "insufficient_quota"},
    {GW_E_KEY_LIMIT_TOKENS_PER_PERIOD, "insufficient_quota"},
    {GW_E_KEY_LIMIT_COST_PER_PERIOD, "insufficient_quota"},
    {GW_E_CONTEXT_LENGTH, "context_length_exceeded"},
};

static const char *
openai_code_of(enum gw_code code)
{
    size_t i;

    for (i = 0; i < sizeof(openai_code_by_code) / sizeof(openai_code_by_code[0]); i++)
        if (openai_code_by_code[i].code == code)
            return openai_code_by_code[i].openai_code;
    return NULL;
}

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
    const char *theirs = openai_code_of(code);
    size_t start = out->len;

    /* A config code (0) or GW_OK (200) in an error body is a caller bug: say 500. */
    if (status < 400)
        status = 500;
    if (gw_buf_append_str(out, GW_STR_LIT("{\"error\":{\"message\":")) != GW_OK ||
        gw_buf_append_json_str(out, message) != GW_OK ||
        gw_buf_printf(out, ",\"type\":\"%s\",\"code\":", openai_error_type(code, status)) !=
            GW_OK ||
        gw_buf_append_json_str(out, gw_str_c(theirs ? theirs : gw_code_str(code))) != GW_OK ||
        (theirs && (gw_buf_append_str(out, GW_STR_LIT(",\"gw_code\":")) != GW_OK ||
                    gw_buf_append_json_str(out, gw_str_c(gw_code_str(code))) != GW_OK)) ||
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

/* ---- conversation identity (dialects/openai_conv.c) ---- */

void
dl_openai_req_conversation(const struct dl_openai_req *r, struct dl_openai_conv *out)
{
    dl_openai_scan_conversation(r->body, r->len, out);
}

bool
dl_openai_req_has_tool_results(const struct dl_openai_req *r)
{
    struct dl_openai_conv cv;

    dl_openai_scan_conversation(r->body, r->len, &cv);
    return cv.last_is_tool;
}

/* ---- the shape's row (dialects/canon.h) ---- */

static bool
answer_usage(const char *body, size_t len, struct gw_usage *usage)
{
    return dl_openai_answer_usage((struct gw_str){body, len}, usage, NULL);
}

const struct dl_shape_ops dl_openai_shape = {
    .shape = DL_SHAPE_CHAT,
    .name = "chat",
    .request_parse = dl_openai_request_parse,
    .request_render = dl_openai_request_render,
    .parse_init = dl_openai_parse_init,
    .event_parse = dl_openai_event_parse,
    .answer_parse = dl_openai_answer_parse,
    .render_init = dl_openai_render_init,
    .event_render = dl_openai_event_render,
    .render_end = dl_openai_render_end,
    .answer_render = dl_openai_answer_render,
    .error_render = dl_openai_error_body,
    .error_frame = dl_openai_error_chunk,
    .upstream_error_render = dl_openai_upstream_error_render,
    .upstream_error_read = dl_openai_upstream_error_read,
    .answer_usage = answer_usage,
};
