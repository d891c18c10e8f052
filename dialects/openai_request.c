/* SPDX-License-Identifier: MIT
 * dialects/openai_request.c - Chat Completions requests and the canonical request
 * (dialects/canon.h): a Chat client's body parsed into a struct dl_request, and a
 * struct dl_request rendered as the body for a Chat (OpenAI-compatible) upstream.
 * Pure: no I/O, no clock. Parse reads with dialects/json_scan.h (no tree): the checks
 * of dl_openai_req_parse first (a JSON object, model, messages, stream, and its
 * duplicate-key rule), then the members of interest by offset; of other duplicate keys
 * the last counts, as jansson reads them. Strings are slices into the body unless they
 * hold escapes (then arena copies).
 *
 * Parse (Chat -> canon), decisions beyond the obvious:
 * - system and developer messages, wherever they stand, become r->system text parts in
 *   order (the canonical form has no system turn); their position is not kept.
 * - Empty text (a "" content or text part) carries nothing and makes no part.
 * - assistant: reasoning_content (else "reasoning", as compatible servers spell it) ->
 *   a REASONING part first; content text and refusal parts, and "refusal" -> TEXT;
 *   tool_calls -> TOOL_CALL parts (id, name, arguments kept as given); a legacy
 *   function_call -> a TOOL_CALL with the generated id "call_fn_<message index>", which
 *   the next legacy "function" message answers (TOOL_RESULT with that call_id).
 * - tool -> a DL_ROLE_TOOL message with one TOOL_RESULT (call_id = tool_call_id).
 * - image_url -> IMAGE: a base64 data: URL as media_type + data, any other URL as url;
 *   detail kept. file with file_data -> DOCUMENT (media_type + data, filename as title).
 * - What the canonical form does not model is kept as Chat wrote it (DL_PART_OTHER,
 *   dl_tool.hosted, dl_extra), so that only a Chat renderer sends it and every other
 *   refuses or drops it by name: input_audio parts, files given by file_id, content parts
 *   of types newer than this file -> OTHER (name: the part's type, data: the part);
 *   custom tools' calls -> OTHER (name "custom"); custom tools and provider tools (any
 *   type but function) -> hosted tools (named by custom.name, else the type) and
 *   DL_NEED_F_HOSTED_TOOLS; a custom tool_choice -> the extra "tool_choice".
 * - n > 1 -> N_CHOICES; logprobs true or top_logprobs > 0 -> LOGPROBS; audio, or "audio"
 *   in modalities -> AUDIO_OUT; web_search_options -> HOSTED_TOOLS: each field that sets
 *   a need is also kept as an extra (a Chat renderer sends it, others refuse).
 * - tool_choice {"type":"allowed_tools"} -> its mode (auto/required), and r->tools
 *   keeps only the function tools it allows (what the model may call is the same).
 * - max_completion_tokens, else max_tokens -> max_output_tokens; reasoning_effort ->
 *   reasoning_effort and thinking (unless "none"); user, else safety_identifier -> user
 *   (a safety_identifier beside a user: an extra);
 *   stream_options.include_usage -> stream_usage; json_schema's description -> an extra
 *   named "response_format.json_schema.description".
 * - Every other top-level field with a non-null value -> a dl_extra (name, raw JSON), so
 *   that other renderers drop it by name (logit_bias, service_tier, store, prediction,
 *   verbosity, ...). A null value asks for nothing and is not kept.
 * - Refusals are GW_E_BAD_REQUEST with a reason naming the field by path
 *   ("messages[2].role: unknown role"), never quoting the body.
 *
 * Render (canon -> Chat body for an upstream), decisions:
 * - r->system -> one "system" message first, its texts joined with "\n\n" into one
 *   string (a string content is what every OpenAI-compatible server takes).
 * - A user or tool turn: each TOOL_RESULT -> a role "tool" message (in order, before the
 *   rest of the turn), its texts joined with "\n\n"; images and documents inside tool
 *   results (Chat tool messages hold text only) and the turn's own parts -> one user
 *   message after them (a string when it is one text, else an array of parts).
 *   is_error has no Chat field: dropped, named "is_error".
 * - assistant: texts concatenated into "content" (null when there is none but tool
 *   calls), TOOL_CALL -> tool_calls (ids kept, arguments as the JSON string Chat wants,
 *   "{}" when empty); REASONING parts are dropped, named "reasoning" (Chat requests have
 *   no field for them; compatible servers that return reasoning_content refuse it back).
 * - IMAGE -> image_url (a data: URL for base64); DOCUMENT with data -> a file part with
 *   file_data as a data: URL, except text/... data (a Messages plain-text document) -> a
 *   text part, its title on a first line (Chat's file parts take PDFs). Refused
 * (GW_E_UNCONVERTIBLE): a document by URL, an image or document in an assistant message, a tool
 * call outside one, an image with neither.
 * - tools -> function tools; tool_choice auto/none/required (Messages "any")/named
 *   {type function}; tool_choice and parallel_tool_calls only when tools are declared
 *   (OpenAI refuses them alone; without tools they change nothing).
 * - max_output_tokens -> "max_tokens" (what every OpenAI-compatible server reads;
 *   OpenAI's reasoning models want max_completion_tokens and refuse it), else
 *   <max_output_default> when non-zero, else omitted.
 * - reasoning_effort is passed as is; a thinking budget without an effort (Messages) is
 *   dropped, named "thinking" (whether the upstream reasons is not known here).
 * - Dropped by name: top_k, cache hints ("cache_control"), metadata (OpenAI takes it
 *   only with store), every extra. user and prompt_cache_key are Chat fields: passed.
 * - stream -> "stream":true and stream_options.include_usage true (the gateway needs the
 *   usage; the client's renderer decides what the client sees).
 * - Refused (GW_E_UNCONVERTIBLE, naming the field) for the needs flags, OTHER parts and
 *   hosted tools of a request from another shape.
 * - A request parsed from Chat (r->source) goes back with its extras (top-level ones as
 *   members, the json_schema description in its place), hosted tools, OTHER parts and
 *   metadata as written, and no needs refusal: the round trip loses nothing the client
 *   asked for (the same-shape path splices instead; this keeps the shape honest).
 * Owns:    nothing beyond one call; what parse builds belongs to the arena.
 * Threads: any; one request on one thread.
 * See:     dialects/openai-priv.h, dialects/canon.h, tests/unit/dialects/test_openai_request.c,
 *          tests/fuzz/fuzz_chat_canon.c
 */
#include "dialects/openai-priv.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- parse: the walk ---- */

struct plist {
    struct dl_part *v;
    size_t n, cap;
};

struct rq {
    struct gw_arena *a;
    const char *s;
    size_t n;
    struct dl_request *r;
    struct gw_buf *why;
    enum gw_code rc; /* the first failure; GW_OK while none */
    struct plist sys;
    size_t cap_messages, cap_extras, cap_stop, cap_tools;
    struct gw_str legacy_id; /* the id given to the last legacy function_call */
};

static struct dl_json
cur(const struct rq *q, size_t at)
{
    struct dl_json j;

    dl_json_init(&j, q->s, q->n);
    j.i = at;
    return j;
}

static bool fail(struct rq *q, enum gw_code rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Records refusal <rc> with a reason in our words (field paths, never the body's bytes);
 * the first failure wins. Always false. */
static bool
fail(struct rq *q, enum gw_code rc, const char *fmt, ...)
{
    va_list ap;

    if (q->rc != GW_OK)
        return false;
    q->rc = rc;
    if (q->why && fmt) {
        va_start(ap, fmt);
        if (gw_buf_vprintf(q->why, fmt, ap) != GW_OK)
            q->rc = GW_E_NOMEM;
        va_end(ap);
    }
    return false;
}

static bool
nomem(struct rq *q)
{
    return fail(q, GW_E_NOMEM, NULL);
}

#define BAD(q, ...) fail((q), GW_E_BAD_REQUEST, __VA_ARGS__)

/* A scan error on bytes the checks validated: only a long number's copy can fail. */
static bool
scan_failed(struct rq *q, const struct dl_json *j)
{
    if (j->err == DL_JSON_E_NOMEM)
        return nomem(q);
    return BAD(q, "body: not valid JSON");
}

/* A member of interest: the offset of its value + 1, 0 when absent. */
struct fld {
    const char *name;
    size_t len;
    size_t at;
};

#define FLD(s)                                                                                     \
    {                                                                                              \
        (s), sizeof(s) - 1, 0                                                                      \
    }
#define AT(f) ((f)->at - 1)

/* Fills <f> from the object at <at> (the last of duplicate keys counts). */
static bool
fields(struct rq *q, size_t at, struct fld *f, size_t nf)
{
    struct dl_json j = cur(q, at);
    struct dl_json_str k;
    bool first = true;
    size_t i;
    int rc;

    if (!dl_json_obj_enter(&j))
        return scan_failed(q, &j);
    while ((rc = dl_json_obj_next(&j, &first, &k)) > 0) {
        for (i = 0; i < nf; i++)
            if (dl_json_key_is(&j, &k, f[i].name, f[i].len)) {
                f[i].at = j.i + 1;
                break;
            }
        if (!dl_json_skip(&j, NULL))
            return scan_failed(q, &j);
    }
    return rc == 0 || scan_failed(q, &j);
}

/* The first byte of a value: 0 absent, 'n' null, '"', '{', '[', 't', 'f', or a number's. */
static int
kind_at(const struct rq *q, size_t at)
{
    return (unsigned char)q->s[at];
}

static int
kind(const struct rq *q, const struct fld *f)
{
    return f->at ? kind_at(q, AT(f)) : 0;
}

static bool
is_num(int c)
{
    return c == '-' || (c >= '0' && c <= '9');
}

/* A null or absent value. */
static bool
none(const struct rq *q, const struct fld *f)
{
    int c = kind(q, f);

    return c == 0 || c == 'n';
}

/* The validated string token <s> of <j> as a slice, or an arena copy when escaped. */
static bool
str_of(struct rq *q, const struct dl_json *j, const struct dl_json_str *s, struct gw_str *out)
{
    char *d;

    if (!s->escaped) {
        *out = (struct gw_str){q->s + s->start, s->end - s->start};
        return true;
    }
    d = gw_arena_alloc(q->a, s->dlen + 1);
    if (!d)
        return nomem(q);
    dl_json_decode(j, s, d);
    d[s->dlen] = '\0';
    *out = (struct gw_str){d, s->dlen};
    return true;
}

static bool
str_at(struct rq *q, size_t at, struct gw_str *out)
{
    struct dl_json j = cur(q, at);
    struct dl_json_str s;

    if (!dl_json_string(&j, &s))
        return scan_failed(q, &j);
    return str_of(q, &j, &s, out);
}

/* True when the string at <at> is <lit>. */
static bool
str_is(const struct rq *q, size_t at, const char *lit)
{
    struct dl_json j = cur(q, at);
    struct dl_json_str s;

    return kind_at(q, at) == '"' && dl_json_string(&j, &s) &&
           dl_json_key_is(&j, &s, lit, strlen(lit));
}

/* The value at <at> as raw JSON text (a slice of the body). */
static bool
raw_at(struct rq *q, size_t at, struct gw_str *out)
{
    struct dl_json j = cur(q, at);

    if (!dl_json_skip(&j, NULL))
        return scan_failed(q, &j);
    *out = (struct gw_str){q->s + at, j.i - at};
    return true;
}

/* What a typed read found: the value, nothing (absent or null), a value of another type
 * (the caller refuses, naming the field), or a failure already recorded. */
enum got { GOT_FAIL = -2, GOT_WRONG = -1, GOT_NONE = 0, GOT_YES = 1 };

static enum got
want_str(struct rq *q, const struct fld *f, struct gw_str *out)
{
    if (none(q, f))
        return GOT_NONE;
    if (kind(q, f) != '"')
        return GOT_WRONG;
    return str_at(q, AT(f), out) ? GOT_YES : GOT_FAIL;
}

static enum got
want_bool(const struct rq *q, const struct fld *f, bool *out)
{
    int c = kind(q, f);

    if (c == 0 || c == 'n')
        return GOT_NONE;
    if (c != 't' && c != 'f')
        return GOT_WRONG;
    *out = c == 't';
    return GOT_YES;
}

static enum got
want_num(struct rq *q, const struct fld *f, double *out)
{
    struct dl_json_num num;
    struct dl_json j;

    if (none(q, f))
        return GOT_NONE;
    if (!is_num(kind(q, f)))
        return GOT_WRONG;
    j = cur(q, AT(f));
    if (!dl_json_number(&j, &num) || !dl_json_num_real(&j, &num, out)) {
        scan_failed(q, &j);
        return GOT_FAIL;
    }
    return GOT_YES;
}

/* A whole number (an integer token, or a real with no fraction). */
static enum got
want_int(struct rq *q, const struct fld *f, int64_t *out)
{
    double v;
    enum got g = want_num(q, f, &v);
    struct dl_json_num num;
    struct dl_json j;
    char buf[24];
    size_t len;

    if (g != GOT_YES)
        return g;
    j = cur(q, AT(f));
    if (!dl_json_number(&j, &num)) {
        scan_failed(q, &j);
        return GOT_FAIL;
    }
    len = num.end - num.start;
    if (!num.real && len < sizeof(buf)) {
        memcpy(buf, q->s + num.start, len);
        buf[len] = '\0';
        *out = strtoll(buf, NULL, 10); /* in range: the scanner checked int64 */
        return GOT_YES;
    }
    if (v != floor(v) || v < -9.2e18 || v > 9.2e18)
        return GOT_WRONG;
    *out = (int64_t)v;
    return GOT_YES;
}

/* A count of tokens: a non-negative whole number. */
static enum got
want_count(struct rq *q, const struct fld *f, uint64_t *out)
{
    int64_t v;
    enum got g = want_int(q, f, &v);

    if (g != GOT_YES)
        return g;
    if (v < 0)
        return GOT_WRONG;
    *out = (uint64_t)v;
    return GOT_YES;
}

static struct dl_part *
push_part(struct rq *q, struct plist *l, enum dl_part_kind k)
{
    struct dl_part *p = gw_arena_push(q->a, (void **)&l->v, &l->n, &l->cap, sizeof(*p));

    if (!p) {
        nomem(q);
        return NULL;
    }
    p->kind = k;
    return p;
}

/* A TEXT part for the string at <at>, unless it is empty. */
static bool
text_part(struct rq *q, size_t at, struct plist *l)
{
    struct gw_str t;
    struct dl_part *p;

    if (!str_at(q, at, &t))
        return false;
    if (t.len == 0)
        return true;
    p = push_part(q, l, DL_PART_TEXT);
    if (!p)
        return false;
    p->text = t;
    return true;
}

/* "data:<media type>[;param...];base64,<data>" -> media type and data. False for any
 * other URL (kept as a URL). */
static bool
data_url(struct gw_str url, struct gw_str *media_type, struct gw_str *data)
{
    const char *comma, *semi;
    size_t head;

    if (url.len < 5 || memcmp(url.ptr, "data:", 5) != 0)
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

/* ---- parse: content ---- */

#define CP_TEXT 0x1u    /* text parts */
#define CP_MEDIA 0x2u   /* image_url, file, input_audio: user messages */
#define CP_REFUSAL 0x4u /* refusal parts: assistant messages */
#define CP_OTHER 0x8u   /* parts the canonical form does not model: user, assistant */

/* An OTHER part: the value at <at> (an object) kept as written, <type_at> its type. */
static bool
other_part(struct rq *q, size_t at, size_t type_at, struct plist *l)
{
    struct gw_str type, raw;
    struct dl_part *p;

    if (!str_at(q, type_at, &type) || !raw_at(q, at, &raw))
        return false;
    p = push_part(q, l, DL_PART_OTHER);
    if (!p)
        return false;
    p->name = type;
    p->data = raw;
    return true;
}

static bool
image_part(struct rq *q, size_t at, size_t i, size_t k, struct plist *l)
{
    struct fld f[] = {FLD("url"), FLD("detail")};
    struct gw_str url = {0}, detail = {0};
    struct dl_part *p;

    if (kind_at(q, at) == '"') { /* the early spelling: the URL itself */
        if (!str_at(q, at, &url))
            return false;
    } else if (kind_at(q, at) == '{') {
        if (!fields(q, at, f, 2))
            return false;
        if (kind(q, &f[0]) != '"')
            return BAD(q, "messages[%zu].content[%zu].image_url.url: required string", i, k);
        if (!str_at(q, AT(&f[0]), &url))
            return false;
        switch (want_str(q, &f[1], &detail)) {
        case GOT_WRONG:
            return BAD(q, "messages[%zu].content[%zu].image_url.detail: must be a string", i, k);
        case GOT_FAIL: return false;
        default: break;
        }
    } else {
        return BAD(q, "messages[%zu].content[%zu].image_url: required object", i, k);
    }
    p = push_part(q, l, DL_PART_IMAGE);
    if (!p)
        return false;
    p->detail = detail;
    if (!data_url(url, &p->media_type, &p->data))
        p->url = url;
    return true;
}

/* A file part (at <part>, its "file" object at <at>): DOCUMENT with data; a file stored
 * at OpenAI (file_id) is an OTHER part. */
static bool
file_part(struct rq *q, size_t part, size_t type_at, size_t at, size_t i, size_t k, struct plist *l)
{
    struct fld f[] = {FLD("file_data"), FLD("file_id"), FLD("filename")};
    struct gw_str data = {0}, name = {0};
    struct dl_part *p;

    if (kind_at(q, at) != '{')
        return BAD(q, "messages[%zu].content[%zu].file: required object", i, k);
    if (!fields(q, at, f, 3))
        return false;
    if (want_str(q, &f[2], &name) < GOT_NONE)
        return q->rc ? false
                     : BAD(q, "messages[%zu].content[%zu].file.filename: must be a string", i, k);
    switch (want_str(q, &f[0], &data)) {
    case GOT_FAIL: return false;
    case GOT_WRONG:
        return BAD(q, "messages[%zu].content[%zu].file.file_data: must be a string", i, k);
    case GOT_NONE:
        if (!none(q, &f[1]))
            return other_part(q, part, type_at, l);
        return BAD(q, "messages[%zu].content[%zu].file: file_data or file_id required", i, k);
    case GOT_YES: break;
    }
    p = push_part(q, l, DL_PART_DOCUMENT);
    if (!p)
        return false;
    p->text = name;
    if (!data_url(data, &p->media_type, &p->data)) {
        /* raw base64: Chat's file parts are PDFs */
        p->media_type = GW_STR_LIT("application/pdf");
        p->data = data;
    }
    return true;
}

/* One element of a content array. */
static bool
content_part(struct rq *q, size_t at, size_t i, size_t k, unsigned allow, struct plist *l)
{
    enum { P_TYPE, P_TEXT, P_IMAGE, P_FILE, P_REFUSAL, P__N };
    struct fld f[P__N] = {FLD("type"), FLD("text"), FLD("image_url"), FLD("file"), FLD("refusal")};
    size_t t;

    if (kind_at(q, at) != '{')
        return BAD(q, "messages[%zu].content[%zu]: must be an object", i, k);
    if (!fields(q, at, f, P__N))
        return false;
    if (kind(q, &f[P_TYPE]) != '"')
        return BAD(q, "messages[%zu].content[%zu].type: required string", i, k);
    t = AT(&f[P_TYPE]);
    if ((allow & CP_TEXT) && str_is(q, t, "text")) {
        if (kind(q, &f[P_TEXT]) != '"')
            return BAD(q, "messages[%zu].content[%zu].text: required string", i, k);
        return text_part(q, AT(&f[P_TEXT]), l);
    }
    if ((allow & CP_REFUSAL) && str_is(q, t, "refusal")) {
        if (kind(q, &f[P_REFUSAL]) != '"')
            return BAD(q, "messages[%zu].content[%zu].refusal: required string", i, k);
        return text_part(q, AT(&f[P_REFUSAL]), l);
    }
    if ((allow & CP_MEDIA) && str_is(q, t, "image_url")) {
        if (!f[P_IMAGE].at)
            return BAD(q, "messages[%zu].content[%zu].image_url: required object", i, k);
        return image_part(q, AT(&f[P_IMAGE]), i, k, l);
    }
    if ((allow & CP_MEDIA) && str_is(q, t, "file")) {
        if (!f[P_FILE].at)
            return BAD(q, "messages[%zu].content[%zu].file: required object", i, k);
        return file_part(q, at, t, AT(&f[P_FILE]), i, k, l);
    }
    if ((allow & CP_OTHER) && !str_is(q, t, "text") && !str_is(q, t, "refusal") &&
        !str_is(q, t, "image_url") && !str_is(q, t, "file"))
        return other_part(q, at, t, l); /* input_audio, and types newer than this file */
    return BAD(q, "messages[%zu].content[%zu].type: not a part this role can hold", i, k);
}

/* A message's content: a string, an array of parts, or null. */
static bool
content_parts(struct rq *q, const struct fld *f, size_t i, unsigned allow, struct plist *l)
{
    struct dl_json j;
    bool first = true;
    size_t k = 0;
    int rc;

    if (none(q, f))
        return true;
    if (kind(q, f) == '"')
        return text_part(q, AT(f), l);
    if (kind(q, f) != '[')
        return BAD(q, "messages[%zu].content: must be a string, an array or null", i);
    j = cur(q, AT(f));
    if (!dl_json_arr_enter(&j))
        return scan_failed(q, &j);
    while ((rc = dl_json_arr_next(&j, &first)) > 0) {
        size_t at = j.i;

        if (!dl_json_skip(&j, NULL))
            return scan_failed(q, &j);
        if (!content_part(q, at, i, k++, allow, l))
            return false;
    }
    return rc == 0 || scan_failed(q, &j);
}

/* ---- parse: messages ---- */

static bool
tool_call(struct rq *q, size_t at, size_t i, size_t k, struct plist *l)
{
    struct fld f[] = {FLD("id"), FLD("type"), FLD("function")};
    struct fld fn[] = {FLD("name"), FLD("arguments")};
    struct gw_str id = {0}, name = {0}, args = {0};
    struct dl_part *p;

    if (kind_at(q, at) != '{')
        return BAD(q, "messages[%zu].tool_calls[%zu]: must be an object", i, k);
    if (!fields(q, at, f, 3))
        return false;
    if (f[1].at && !str_is(q, AT(&f[1]), "function")) {
        if (kind(q, &f[1]) != '"')
            return BAD(q, "messages[%zu].tool_calls[%zu].type: must be a string", i, k);
        return other_part(q, at, AT(&f[1]), l); /* a custom tool's call */
    }
    if (kind(q, &f[0]) != '"')
        return BAD(q, "messages[%zu].tool_calls[%zu].id: required string", i, k);
    if (kind(q, &f[2]) != '{')
        return BAD(q, "messages[%zu].tool_calls[%zu].function: required object", i, k);
    if (!str_at(q, AT(&f[0]), &id) || !fields(q, AT(&f[2]), fn, 2))
        return false;
    if (kind(q, &fn[0]) != '"')
        return BAD(q, "messages[%zu].tool_calls[%zu].function.name: required string", i, k);
    if (!str_at(q, AT(&fn[0]), &name))
        return false;
    switch (want_str(q, &fn[1], &args)) {
    case GOT_WRONG:
        return BAD(q, "messages[%zu].tool_calls[%zu].function.arguments: must be a string", i, k);
    case GOT_FAIL: return false;
    default: break;
    }
    p = push_part(q, l, DL_PART_TOOL_CALL);
    if (!p)
        return false;
    p->id = id;
    p->name = name;
    p->arguments = args;
    return true;
}

static bool
tool_calls(struct rq *q, const struct fld *f, size_t i, struct plist *l)
{
    struct dl_json j;
    bool first = true;
    size_t k = 0;
    int rc;

    if (none(q, f))
        return true;
    if (kind(q, f) != '[')
        return BAD(q, "messages[%zu].tool_calls: must be an array", i);
    j = cur(q, AT(f));
    if (!dl_json_arr_enter(&j))
        return scan_failed(q, &j);
    while ((rc = dl_json_arr_next(&j, &first)) > 0) {
        size_t at = j.i;

        if (!dl_json_skip(&j, NULL))
            return scan_failed(q, &j);
        if (!tool_call(q, at, i, k++, l))
            return false;
    }
    return rc == 0 || scan_failed(q, &j);
}

/* The legacy function_call of an assistant message: a TOOL_CALL with a generated id. */
static bool
legacy_call(struct rq *q, const struct fld *f, size_t i, struct plist *l)
{
    struct fld fn[] = {FLD("name"), FLD("arguments")};
    struct gw_str name, args = {0};
    struct dl_part *p;
    char *id;

    if (none(q, f))
        return true;
    if (kind(q, f) != '{' || !fields(q, AT(f), fn, 2) || kind(q, &fn[0]) != '"')
        return q->rc ? false : BAD(q, "messages[%zu].function_call.name: required string", i);
    if (!str_at(q, AT(&fn[0]), &name) || want_str(q, &fn[1], &args) == GOT_FAIL)
        return false;
    id = gw_arena_alloc(q->a, 32);
    p = id ? push_part(q, l, DL_PART_TOOL_CALL) : NULL;
    if (!p)
        return nomem(q);
    snprintf(id, 32, "call_fn_%zu", i);
    q->legacy_id = gw_str_c(id);
    p->id = q->legacy_id;
    p->name = name;
    p->arguments = args;
    return true;
}

enum {
    M_ROLE,
    M_CONTENT,
    M_NAME,
    M_TOOL_CALLS,
    M_TOOL_CALL_ID,
    M_FUNCTION_CALL,
    M_REFUSAL,
    M_REASONING_CONTENT,
    M_REASONING,
    M__N
};

static bool
assistant_parts(struct rq *q, const struct fld *f, size_t i, struct plist *l)
{
    const struct fld *r =
        none(q, &f[M_REASONING_CONTENT]) ? &f[M_REASONING] : &f[M_REASONING_CONTENT];
    struct gw_str t;
    struct dl_part *p;

    switch (want_str(q, r, &t)) {
    case GOT_WRONG: return BAD(q, "messages[%zu].reasoning_content: must be a string", i);
    case GOT_FAIL: return false;
    case GOT_YES:
        if (t.len == 0)
            break;
        p = push_part(q, l, DL_PART_REASONING);
        if (!p)
            return false;
        p->text = t;
        break;
    case GOT_NONE: break;
    }
    if (!content_parts(q, &f[M_CONTENT], i, CP_TEXT | CP_REFUSAL, l))
        return false;
    if (!none(q, &f[M_REFUSAL])) {
        if (kind(q, &f[M_REFUSAL]) != '"')
            return BAD(q, "messages[%zu].refusal: must be a string", i);
        if (!text_part(q, AT(&f[M_REFUSAL]), l))
            return false;
    }
    return tool_calls(q, &f[M_TOOL_CALLS], i, l) && legacy_call(q, &f[M_FUNCTION_CALL], i, l);
}

/* A tool (or legacy function) result answering <call_id>. */
static bool
result_part(struct rq *q, const struct fld *f, size_t i, struct gw_str call_id, struct plist *l)
{
    struct plist c = {0};
    struct dl_part *p;

    if (!content_parts(q, &f[M_CONTENT], i, CP_TEXT, &c))
        return false;
    p = push_part(q, l, DL_PART_TOOL_RESULT);
    if (!p)
        return false;
    p->call_id = call_id;
    p->content = c.v;
    p->n_content = c.n;
    return true;
}

static bool
parse_message(struct rq *q, size_t at, size_t i)
{
    struct fld f[M__N] = {FLD("role"),       FLD("content"),           FLD("name"),
                          FLD("tool_calls"), FLD("tool_call_id"),      FLD("function_call"),
                          FLD("refusal"),    FLD("reasoning_content"), FLD("reasoning")};
    struct dl_message m = {0}, *mp;
    struct plist l = {0};
    struct gw_str call_id;
    size_t role;

    if (kind_at(q, at) != '{')
        return BAD(q, "messages[%zu]: must be an object", i);
    if (!fields(q, at, f, M__N))
        return false;
    if (kind(q, &f[M_ROLE]) != '"')
        return BAD(q, "messages[%zu].role: required string", i);
    role = AT(&f[M_ROLE]);
    if (str_is(q, role, "system") || str_is(q, role, "developer"))
        return content_parts(q, &f[M_CONTENT], i, CP_TEXT, &q->sys);
    switch (want_str(q, &f[M_NAME], &m.name)) {
    case GOT_WRONG: return BAD(q, "messages[%zu].name: must be a string", i);
    case GOT_FAIL: return false;
    default: break;
    }
    if (str_is(q, role, "user")) {
        m.role = DL_ROLE_USER;
        if (!content_parts(q, &f[M_CONTENT], i, CP_TEXT | CP_MEDIA | CP_OTHER, &l))
            return false;
    } else if (str_is(q, role, "assistant")) {
        m.role = DL_ROLE_ASSISTANT;
        if (!assistant_parts(q, f, i, &l))
            return false;
    } else if (str_is(q, role, "tool")) {
        m.role = DL_ROLE_TOOL;
        m.name = (struct gw_str){0};
        if (kind(q, &f[M_TOOL_CALL_ID]) != '"')
            return BAD(q, "messages[%zu].tool_call_id: required string", i);
        if (!str_at(q, AT(&f[M_TOOL_CALL_ID]), &call_id) || !result_part(q, f, i, call_id, &l))
            return false;
    } else if (str_is(q, role, "function")) {
        /* legacy: answers the last function_call (its generated id) */
        m.role = DL_ROLE_TOOL;
        m.name = (struct gw_str){0};
        if (!result_part(q, f, i, q->legacy_id, &l))
            return false;
    } else {
        return BAD(q, "messages[%zu].role: unknown role", i);
    }
    m.parts = l.v;
    m.n_parts = l.n;
    mp = gw_arena_push(q->a, (void **)&q->r->messages, &q->r->n_messages, &q->cap_messages,
                       sizeof(*mp));
    if (!mp)
        return nomem(q);
    *mp = m;
    return true;
}

static bool
parse_messages(struct rq *q, size_t at)
{
    struct dl_json j = cur(q, at);
    bool first = true;
    size_t i = 0;
    int rc;

    if (!dl_json_arr_enter(&j))
        return scan_failed(q, &j);
    while ((rc = dl_json_arr_next(&j, &first)) > 0) {
        size_t m = j.i;

        if (!dl_json_skip(&j, NULL))
            return scan_failed(q, &j);
        if (!parse_message(q, m, i++))
            return false;
    }
    if (rc != 0)
        return scan_failed(q, &j);
    q->r->system = q->sys.v;
    q->r->n_system = q->sys.n;
    return true;
}

/* ---- parse: tools ---- */

static struct dl_tool *
push_tool(struct rq *q)
{
    struct dl_tool *t =
        gw_arena_push(q->a, (void **)&q->r->tools, &q->r->n_tools, &q->cap_tools, sizeof(*t));

    if (!t)
        nomem(q);
    return t;
}

/* name, description, parameters of a function (Chat's "function" or a legacy entry of
 * "functions"); refusals name it <pre><k><post> ("tools[2].function"). */
static bool
function_def(struct rq *q, size_t at, const char *pre, size_t k, const char *post, bool with_strict)
{
    struct fld f[] = {FLD("name"), FLD("description"), FLD("parameters"), FLD("strict")};
    struct dl_tool t = {0}, *tp;
    enum got g;

    if (kind_at(q, at) != '{')
        return BAD(q, "%s%zu%s: must be an object", pre, k, post);
    if (!fields(q, at, f, 4))
        return false;
    if (kind(q, &f[0]) != '"')
        return BAD(q, "%s%zu%s.name: required string", pre, k, post);
    if (!str_at(q, AT(&f[0]), &t.name))
        return false;
    g = want_str(q, &f[1], &t.description);
    if (g == GOT_WRONG)
        return BAD(q, "%s%zu%s.description: must be a string", pre, k, post);
    if (g == GOT_FAIL)
        return false;
    if (!none(q, &f[2])) {
        if (kind(q, &f[2]) != '{')
            return BAD(q, "%s%zu%s.parameters: must be an object", pre, k, post);
        if (!raw_at(q, AT(&f[2]), &t.parameters))
            return false;
    }
    if (with_strict && want_bool(q, &f[3], &t.strict) == GOT_WRONG)
        return BAD(q, "%s%zu%s.strict: must be a boolean", pre, k, post);
    tp = push_tool(q);
    if (!tp)
        return false;
    *tp = t;
    return true;
}

/* A tool that is not a function (a custom tool, or one a provider runs), kept as
 * written: named by its custom.name, else by its type. */
static bool
hosted_tool(struct rq *q, size_t at, size_t type_at)
{
    struct fld f[] = {FLD("custom")};
    struct fld c[] = {FLD("name")};
    struct dl_tool *t;
    struct gw_str name, raw;

    if (!str_at(q, type_at, &name) || !raw_at(q, at, &raw) || !fields(q, at, f, 1))
        return false;
    if (kind(q, &f[0]) == '{' &&
        (!fields(q, AT(&f[0]), c, 1) || (kind(q, &c[0]) == '"' && !str_at(q, AT(&c[0]), &name))))
        return false;
    t = push_tool(q);
    if (!t)
        return false;
    t->name = name;
    t->hosted = raw;
    q->r->needs |= DL_NEED_F_HOSTED_TOOLS;
    return true;
}

static bool
parse_tools(struct rq *q, const struct fld *tf)
{
    struct dl_json j;
    bool first = true;
    size_t k = 0;
    int rc;

    if (none(q, tf))
        return true;
    if (kind(q, tf) != '[')
        return BAD(q, "tools: must be an array");
    j = cur(q, AT(tf));
    if (!dl_json_arr_enter(&j))
        return scan_failed(q, &j);
    while ((rc = dl_json_arr_next(&j, &first)) > 0) {
        struct fld f[] = {FLD("type"), FLD("function")};
        size_t at = j.i;

        if (!dl_json_skip(&j, NULL))
            return scan_failed(q, &j);
        if (kind_at(q, at) != '{')
            return BAD(q, "tools[%zu]: must be an object", k);
        if (!fields(q, at, f, 2))
            return false;
        if (kind(q, &f[0]) != '"')
            return BAD(q, "tools[%zu].type: required string", k);
        if (str_is(q, AT(&f[0]), "function")) {
            if (!f[1].at)
                return BAD(q, "tools[%zu].function: required object", k);
            if (!function_def(q, AT(&f[1]), "tools[", k, "].function", true))
                return false;
        } else if (!hosted_tool(q, at, AT(&f[0]))) { /* custom tools, provider tools */
            return false;
        }
        k++;
    }
    return rc == 0 || scan_failed(q, &j);
}

static bool
parse_functions(struct rq *q, const struct fld *ff)
{
    struct dl_json j;
    bool first = true;
    size_t k = 0;
    int rc;

    if (none(q, ff))
        return true;
    if (kind(q, ff) != '[')
        return BAD(q, "functions: must be an array");
    j = cur(q, AT(ff));
    if (!dl_json_arr_enter(&j))
        return scan_failed(q, &j);
    while ((rc = dl_json_arr_next(&j, &first)) > 0) {
        size_t at = j.i;

        if (!dl_json_skip(&j, NULL))
            return scan_failed(q, &j);
        if (!function_def(q, at, "functions[", k++, "]", false))
            return false;
    }
    return rc == 0 || scan_failed(q, &j);
}

/* Keeps in r->tools only the functions {"type":"allowed_tools"} names. */
static bool
allowed_tools(struct rq *q, size_t at)
{
    struct fld f[] = {FLD("mode"), FLD("tools")};
    struct dl_request *r = q->r;
    struct dl_json j;
    bool first = true;
    size_t keep = 0, t;
    int rc;

    if (kind_at(q, at) != '{' || !fields(q, at, f, 2))
        return q->rc ? false : BAD(q, "tool_choice.allowed_tools: required object");
    if (kind(q, &f[0]) == '"' && str_is(q, AT(&f[0]), "auto"))
        r->tool_choice = DL_TOOL_CHOICE_AUTO;
    else if (kind(q, &f[0]) == '"' && str_is(q, AT(&f[0]), "required"))
        r->tool_choice = DL_TOOL_CHOICE_REQUIRED;
    else
        return BAD(q, "tool_choice.allowed_tools.mode: must be auto or required");
    if (kind(q, &f[1]) != '[')
        return BAD(q, "tool_choice.allowed_tools.tools: required array");
    /* mark the allowed ones by moving them to the front, in their order */
    for (t = 0; t < r->n_tools; t++) {
        bool allowed = false;

        j = cur(q, AT(&f[1]));
        first = true;
        if (!dl_json_arr_enter(&j))
            return scan_failed(q, &j);
        while (!allowed && (rc = dl_json_arr_next(&j, &first)) > 0) {
            struct fld e[] = {FLD("type"), FLD("function")};
            struct fld fn[] = {FLD("name")};
            size_t el = j.i;
            struct gw_str name;

            if (!dl_json_skip(&j, NULL))
                return scan_failed(q, &j);
            if (kind_at(q, el) != '{' || !fields(q, el, e, 2) || kind(q, &e[1]) != '{' ||
                !fields(q, AT(&e[1]), fn, 1) || kind(q, &fn[0]) != '"')
                continue; /* hosted tools in the list: nothing of ours to keep */
            if (!str_at(q, AT(&fn[0]), &name))
                return false;
            allowed = gw_str_eq(name, r->tools[t].name);
        }
        if (q->rc)
            return false;
        if (allowed)
            r->tools[keep++] = r->tools[t];
    }
    r->n_tools = keep;
    return true;
}

static bool push_extra(struct rq *q, struct gw_str name, struct gw_str raw);

static bool
parse_tool_choice(struct rq *q, const struct fld *tc, const struct fld *fc)
{
    struct dl_request *r = q->r;
    struct fld f[] = {FLD("type"), FLD("function"), FLD("allowed_tools")};
    struct fld fn[] = {FLD("name")};
    size_t at;

    if (none(q, tc)) {
        /* the legacy function_call: "none", "auto" or {"name"} */
        if (none(q, fc))
            return true;
        at = AT(fc);
        if (str_is(q, at, "none"))
            r->tool_choice = DL_TOOL_CHOICE_NONE;
        else if (str_is(q, at, "auto"))
            r->tool_choice = DL_TOOL_CHOICE_AUTO;
        else if (kind_at(q, at) == '{' && fields(q, at, fn, 1) && kind(q, &fn[0]) == '"')
            return (r->tool_choice = DL_TOOL_CHOICE_NAMED),
                   str_at(q, AT(&fn[0]), &r->tool_choice_name);
        else
            return q->rc ? false : BAD(q, "function_call: must be none, auto or an object");
        return true;
    }
    at = AT(tc);
    if (kind_at(q, at) == '"') {
        if (str_is(q, at, "auto"))
            r->tool_choice = DL_TOOL_CHOICE_AUTO;
        else if (str_is(q, at, "none"))
            r->tool_choice = DL_TOOL_CHOICE_NONE;
        else if (str_is(q, at, "required"))
            r->tool_choice = DL_TOOL_CHOICE_REQUIRED;
        else
            return BAD(q, "tool_choice: must be auto, none, required or an object");
        return true;
    }
    if (kind_at(q, at) != '{')
        return BAD(q, "tool_choice: must be auto, none, required or an object");
    if (!fields(q, at, f, 3))
        return false;
    if (kind(q, &f[0]) == '"' && str_is(q, AT(&f[0]), "function")) {
        if (kind(q, &f[1]) != '{' || !fields(q, AT(&f[1]), fn, 1) || kind(q, &fn[0]) != '"')
            return q->rc ? false : BAD(q, "tool_choice.function.name: required string");
        r->tool_choice = DL_TOOL_CHOICE_NAMED;
        return str_at(q, AT(&fn[0]), &r->tool_choice_name);
    }
    if (kind(q, &f[0]) == '"' && str_is(q, AT(&f[0]), "allowed_tools"))
        return f[2].at ? allowed_tools(q, AT(&f[2]))
                       : BAD(q, "tool_choice.allowed_tools: required object");
    if (kind(q, &f[0]) == '"' && str_is(q, AT(&f[0]), "custom")) {
        /* a custom tool: only Chat has them; kept as written */
        struct gw_str raw;

        q->r->needs |= DL_NEED_F_HOSTED_TOOLS;
        return raw_at(q, at, &raw) && push_extra(q, GW_STR_LIT("tool_choice"), raw);
    }
    return BAD(q, "tool_choice.type: must be function or allowed_tools");
}

/* ---- parse: the rest of the top level ---- */

static bool
push_extra(struct rq *q, struct gw_str name, struct gw_str raw)
{
    struct dl_request *r = q->r;
    struct dl_extra *e;
    size_t i;

    for (i = 0; i < r->n_extras; i++)
        if (gw_str_eq(r->extras[i].name, name)) { /* a duplicate key: the last counts */
            r->extras[i].raw = raw;
            return true;
        }
    e = gw_arena_push(q->a, (void **)&r->extras, &r->n_extras, &q->cap_extras, sizeof(*e));
    if (!e)
        return nomem(q);
    e->name = name;
    e->raw = raw;
    return true;
}

static bool
parse_stop(struct rq *q, const struct fld *f)
{
    struct dl_request *r = q->r;
    struct dl_json j;
    bool first = true;
    int rc;

    if (none(q, f))
        return true;
    if (kind(q, f) == '"') {
        r->stop = gw_arena_alloc(q->a, sizeof(*r->stop));
        if (!r->stop)
            return nomem(q);
        r->n_stop = 1;
        return str_at(q, AT(f), &r->stop[0]);
    }
    if (kind(q, f) != '[')
        return BAD(q, "stop: must be a string or an array of strings");
    j = cur(q, AT(f));
    if (!dl_json_arr_enter(&j))
        return scan_failed(q, &j);
    while ((rc = dl_json_arr_next(&j, &first)) > 0) {
        size_t at = j.i;
        struct gw_str *s;

        if (!dl_json_skip(&j, NULL))
            return scan_failed(q, &j);
        if (kind_at(q, at) != '"')
            return BAD(q, "stop: must be a string or an array of strings");
        s = gw_arena_push(q->a, (void **)&r->stop, &r->n_stop, &q->cap_stop, sizeof(*s));
        if (!s)
            return nomem(q);
        if (!str_at(q, at, s))
            return false;
    }
    return rc == 0 || scan_failed(q, &j);
}

static bool keep_extra(struct rq *q, const struct fld *f, const char *name);

static bool
parse_format(struct rq *q, const struct fld *rf)
{
    struct fld f[] = {FLD("type"), FLD("json_schema")};
    struct fld s[] = {FLD("name"), FLD("schema"), FLD("strict"), FLD("description")};
    struct dl_request *r = q->r;

    if (none(q, rf))
        return true;
    if (kind(q, rf) != '{')
        return BAD(q, "response_format: must be an object");
    if (!fields(q, AT(rf), f, 2))
        return false;
    if (kind(q, &f[0]) != '"')
        return BAD(q, "response_format.type: required string");
    if (str_is(q, AT(&f[0]), "text"))
        return true;
    if (str_is(q, AT(&f[0]), "json_object")) {
        r->format = DL_FORMAT_JSON_OBJECT;
        return true;
    }
    if (!str_is(q, AT(&f[0]), "json_schema"))
        return BAD(q, "response_format.type: must be text, json_object or json_schema");
    if (kind(q, &f[1]) != '{')
        return BAD(q, "response_format.json_schema: required object");
    if (!fields(q, AT(&f[1]), s, 4))
        return false;
    r->format = DL_FORMAT_JSON_SCHEMA;
    if (kind(q, &s[0]) != '"')
        return BAD(q, "response_format.json_schema.name: required string");
    if (!str_at(q, AT(&s[0]), &r->format_name))
        return false;
    if (!none(q, &s[1])) {
        if (kind(q, &s[1]) != '{')
            return BAD(q, "response_format.json_schema.schema: must be an object");
        if (!raw_at(q, AT(&s[1]), &r->format_schema))
            return false;
    }
    if (want_bool(q, &s[2], &r->format_strict) == GOT_WRONG)
        return BAD(q, "response_format.json_schema.strict: must be a boolean");
    if (kind(q, &s[3]) == '"' && !keep_extra(q, &s[3], "response_format.json_schema.description"))
        return false;
    return q->rc == GW_OK;
}

/* True when the array at <f> holds the string <lit>. */
static bool
array_has(struct rq *q, const struct fld *f, const char *lit)
{
    struct dl_json j;
    bool first = true;

    if (kind(q, f) != '[')
        return false;
    j = cur(q, AT(f));
    if (!dl_json_arr_enter(&j))
        return false;
    while (dl_json_arr_next(&j, &first) > 0) {
        size_t at = j.i;

        if (!dl_json_skip(&j, NULL))
            return false;
        if (str_is(q, at, lit))
            return true;
    }
    return false;
}

enum {
    T_MODEL,
    T_MESSAGES,
    T_TOOLS,
    T_FUNCTIONS,
    T_TOOL_CHOICE,
    T_FUNCTION_CALL,
    T_PARALLEL,
    T_TEMPERATURE,
    T_TOP_P,
    T_SEED,
    T_PRESENCE,
    T_FREQUENCY,
    T_STOP,
    T_MAX_COMPLETION,
    T_MAX_TOKENS,
    T_FORMAT,
    T_EFFORT,
    T_STREAM,
    T_STREAM_OPTIONS,
    T_USER,
    T_SAFETY_ID,
    T_METADATA,
    T_CACHE_KEY,
    T_N,
    T_LOGPROBS,
    T_TOP_LOGPROBS,
    T_MODALITIES,
    T_AUDIO,
    T_WEB_SEARCH,
    T__N
};

/* The top level: known members into <f>, every other non-null one into the extras. */
static bool
top_fields(struct rq *q, struct fld *f)
{
    struct dl_json j = cur(q, 0);
    struct dl_json_str k;
    bool first = true;
    size_t i;
    int rc;

    (void)dl_json_peek(&j);
    if (!dl_json_obj_enter(&j))
        return scan_failed(q, &j);
    while ((rc = dl_json_obj_next(&j, &first, &k)) > 0) {
        size_t at = j.i;
        struct gw_str name;

        for (i = 0; i < T__N; i++)
            if (dl_json_key_is(&j, &k, f[i].name, f[i].len))
                break;
        if (!dl_json_skip(&j, NULL))
            return scan_failed(q, &j);
        if (i < T__N) {
            f[i].at = at + 1;
        } else if (kind_at(q, at) != 'n') {
            if (!str_of(q, &j, &k, &name) ||
                !push_extra(q, name, (struct gw_str){q->s + at, j.i - at}))
                return false;
        }
    }
    return rc == 0 || scan_failed(q, &j);
}

/* The member <f> kept as an extra named <name> (a field that sets a need: a renderer of
 * Chat passes it on, every other one refuses for the need). */
static bool
keep_extra(struct rq *q, const struct fld *f, const char *name)
{
    struct gw_str raw;

    return raw_at(q, AT(f), &raw) && push_extra(q, gw_str_c(name), raw);
}

/* The sampling numbers and flags. */
static bool
parse_knobs(struct rq *q, const struct fld *f)
{
    struct dl_request *r = q->r;
    static const struct {
        int field;
        const char *name;
    } reals[] = {{T_TEMPERATURE, "temperature"},
                 {T_TOP_P, "top_p"},
                 {T_PRESENCE, "presence_penalty"},
                 {T_FREQUENCY, "frequency_penalty"}};
    double *dst[] = {&r->temperature, &r->top_p, &r->presence_penalty, &r->frequency_penalty};
    bool *has[] = {&r->has_temperature, &r->has_top_p, &r->has_presence, &r->has_frequency};
    uint64_t n = 1, top = 0;
    bool b;
    size_t i;
    enum got g;

    for (i = 0; i < sizeof(reals) / sizeof(reals[0]); i++) {
        g = want_num(q, &f[reals[i].field], dst[i]);
        if (g == GOT_WRONG)
            return BAD(q, "%s: must be a number", reals[i].name);
        if (g == GOT_FAIL)
            return false;
        *has[i] = g == GOT_YES;
    }
    g = want_int(q, &f[T_SEED], &r->seed);
    if (g == GOT_WRONG)
        return BAD(q, "seed: must be an integer");
    r->has_seed = g == GOT_YES;
    g = want_count(q, &f[T_MAX_COMPLETION], &r->max_output_tokens);
    if (g == GOT_WRONG)
        return BAD(q, "max_completion_tokens: must be a non-negative integer");
    if (g == GOT_NONE && (g = want_count(q, &f[T_MAX_TOKENS], &r->max_output_tokens)) == GOT_WRONG)
        return BAD(q, "max_tokens: must be a non-negative integer");
    if ((g = want_count(q, &f[T_N], &n)) == GOT_WRONG)
        return BAD(q, "n: must be a non-negative integer");
    if (n > 1 && !keep_extra(q, &f[T_N], "n"))
        return false;
    r->needs |= n > 1 ? DL_NEED_F_N_CHOICES : 0;
    if (want_bool(q, &f[T_LOGPROBS], &b) == GOT_YES && b) {
        r->needs |= DL_NEED_F_LOGPROBS;
        if (!keep_extra(q, &f[T_LOGPROBS], "logprobs"))
            return false;
    }
    if ((g = want_count(q, &f[T_TOP_LOGPROBS], &top)) == GOT_WRONG)
        return BAD(q, "top_logprobs: must be a non-negative integer");
    if (top > 0) {
        r->needs |= DL_NEED_F_LOGPROBS;
        if (!keep_extra(q, &f[T_TOP_LOGPROBS], "top_logprobs"))
            return false;
    }
    if (!none(q, &f[T_AUDIO])) {
        r->needs |= DL_NEED_F_AUDIO_OUT;
        if (!keep_extra(q, &f[T_AUDIO], "audio"))
            return false;
    }
    if (array_has(q, &f[T_MODALITIES], "audio")) {
        r->needs |= DL_NEED_F_AUDIO_OUT;
        if (!keep_extra(q, &f[T_MODALITIES], "modalities"))
            return false;
    }
    if (!none(q, &f[T_WEB_SEARCH])) {
        r->needs |= DL_NEED_F_HOSTED_TOOLS;
        if (!keep_extra(q, &f[T_WEB_SEARCH], "web_search_options"))
            return false;
    }
    switch (want_bool(q, &f[T_PARALLEL], &b)) {
    case GOT_WRONG: return BAD(q, "parallel_tool_calls: must be a boolean");
    case GOT_YES: r->parallel_tool_calls = b; break;
    default: break;
    }
    return q->rc == GW_OK;
}

/* Strings of the top level: reasoning_effort, user, prompt_cache_key; metadata. */
static bool
parse_idents(struct rq *q, const struct fld *f)
{
    struct dl_request *r = q->r;
    struct fld so[] = {FLD("include_usage")};
    enum got g;

    if ((g = want_str(q, &f[T_EFFORT], &r->reasoning_effort)) == GOT_WRONG)
        return BAD(q, "reasoning_effort: must be a string");
    r->thinking = g == GOT_YES && !gw_str_eq(r->reasoning_effort, GW_STR_LIT("none"));
    if ((g = want_str(q, &f[T_USER], &r->user)) == GOT_WRONG)
        return BAD(q, "user: must be a string");
    if (g == GOT_NONE) {
        if (want_str(q, &f[T_SAFETY_ID], &r->user) == GOT_WRONG)
            return BAD(q, "safety_identifier: must be a string");
    } else if (!none(q, &f[T_SAFETY_ID])) { /* beside a user: kept as it came */
        if (kind(q, &f[T_SAFETY_ID]) != '"')
            return BAD(q, "safety_identifier: must be a string");
        if (!keep_extra(q, &f[T_SAFETY_ID], "safety_identifier"))
            return false;
    }
    if (want_str(q, &f[T_CACHE_KEY], &r->prompt_cache_key) == GOT_WRONG)
        return BAD(q, "prompt_cache_key: must be a string");
    if (!none(q, &f[T_METADATA])) {
        if (kind(q, &f[T_METADATA]) != '{')
            return BAD(q, "metadata: must be an object");
        if (!raw_at(q, AT(&f[T_METADATA]), &r->metadata))
            return false;
    }
    (void)want_bool(q, &f[T_STREAM], &r->stream); /* the checks made it a boolean */
    if (kind(q, &f[T_STREAM_OPTIONS]) == '{') {
        if (!fields(q, AT(&f[T_STREAM_OPTIONS]), so, 1))
            return false;
        if (want_bool(q, &so[0], &r->stream_usage) == GOT_WRONG)
            return BAD(q, "stream_options.include_usage: must be a boolean");
    }
    return q->rc == GW_OK;
}

enum gw_code
dl_openai_request_read(struct gw_arena *a, const char *body, size_t len, struct dl_request *out,
                       struct gw_buf *why)
{
    struct fld f[T__N] = {
        FLD("model"),
        FLD("messages"),
        FLD("tools"),
        FLD("functions"),
        FLD("tool_choice"),
        FLD("function_call"),
        FLD("parallel_tool_calls"),
        FLD("temperature"),
        FLD("top_p"),
        FLD("seed"),
        FLD("presence_penalty"),
        FLD("frequency_penalty"),
        FLD("stop"),
        FLD("max_completion_tokens"),
        FLD("max_tokens"),
        FLD("response_format"),
        FLD("reasoning_effort"),
        FLD("stream"),
        FLD("stream_options"),
        FLD("user"),
        FLD("safety_identifier"),
        FLD("metadata"),
        FLD("prompt_cache_key"),
        FLD("n"),
        FLD("logprobs"),
        FLD("top_logprobs"),
        FLD("modalities"),
        FLD("audio"),
        FLD("web_search_options"),
    };
    struct rq q = {0};

    memset(out, 0, sizeof(*out));
    out->parallel_tool_calls = -1;
    out->store = -1; /* a Responses field: unset */
    q.a = a;
    q.s = body;
    q.n = len;
    q.r = out;
    q.why = why;
    out->source = DL_SHAPE_CHAT;
    /* each step stops at the first refusal, recorded in q.rc */
    if (top_fields(&q, f) && str_at(&q, AT(&f[T_MODEL]), &out->model) &&
        parse_messages(&q, AT(&f[T_MESSAGES])) && parse_tools(&q, &f[T_TOOLS]) &&
        parse_functions(&q, &f[T_FUNCTIONS]) &&
        parse_tool_choice(&q, &f[T_TOOL_CHOICE], &f[T_FUNCTION_CALL]) && parse_knobs(&q, f) &&
        parse_stop(&q, &f[T_STOP]) && parse_format(&q, &f[T_FORMAT]))
        (void)parse_idents(&q, f);
    if (q.rc != GW_OK) {
        memset(out, 0, sizeof(*out));
        return q.rc;
    }
    return GW_OK;
}

enum gw_code
dl_openai_request_parse(struct gw_arena *a, const char *body, size_t len, struct dl_request *out,
                        struct gw_buf *why)
{
    enum gw_code rc = dl_openai_req_check(body, len, why);

    if (rc != GW_OK) {
        memset(out, 0, sizeof(*out));
        return rc;
    }
    return dl_openai_request_read(a, body, len, out, why);
}

/* ---- render ---- */

struct rn {
    struct gw_buf *b;
    bool nomem;
    bool same;       /* the request was parsed from a Chat body: its extras, hosted tools and
                      * OTHER parts go back as they were written */
    enum gw_code rc; /* a refusal */
    struct gw_buf *why;
    struct dl_dropped *dropped;
};

static void
w_bytes(struct rn *x, const char *p, size_t n)
{
    if (!x->nomem && gw_buf_append(x->b, p, n) != GW_OK)
        x->nomem = true;
}

#define W(x, lit) w_bytes((x), (lit), sizeof(lit) - 1)

static void
w_raw(struct rn *x, struct gw_str s)
{
    w_bytes(x, s.ptr, s.len);
}

static void
w_json(struct rn *x, struct gw_str s)
{
    if (!s.ptr)
        s = GW_STR_LIT(""); /* a field another shape's parse left empty */
    if (!x->nomem && gw_buf_append_json_str(x->b, s) != GW_OK)
        x->nomem = true;
}

/* <s> escaped as inside a JSON string, without the quotes. */
static void
w_esc(struct rn *x, struct gw_str s)
{
    size_t start, n;

    if (x->nomem)
        return;
    if (!s.ptr)
        s = GW_STR_LIT("");
    start = x->b->len;
    if (gw_buf_append_json_str(x->b, s) != GW_OK) {
        x->nomem = true;
        return;
    }
    /* drop the quotes gw_buf_append_json_str put around it */
    n = x->b->len - start - 2;
    memmove(x->b->data + start, x->b->data + start + 1, n);
    x->b->len = start + n;
    x->b->data[x->b->len] = '\0';
}

static void
w_u64(struct rn *x, uint64_t v)
{
    if (!x->nomem && gw_buf_append_u64(x->b, v) != GW_OK)
        x->nomem = true;
}

static void
w_i64(struct rn *x, int64_t v)
{
    if (v < 0) {
        W(x, "-");
        w_u64(x, (uint64_t)0 - (uint64_t)v);
        return;
    }
    w_u64(x, (uint64_t)v);
}

/* The shortest decimal that reads back as <v> (JSON has no NaN or infinity: 0). */
static void
w_real(struct rn *x, double v)
{
    char buf[40];
    int prec;

    if (!isfinite(v))
        v = 0;
    for (prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    w_bytes(x, buf, strlen(buf));
}

static void
w_bool(struct rn *x, bool v)
{
    if (v)
        W(x, "true");
    else
        W(x, "false");
}

static void
drop(struct rn *x, struct gw_str name)
{
    if (x->dropped)
        dl_dropped_add(x->dropped, name);
}

static bool refuse(struct rn *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records GW_E_UNCONVERTIBLE with a reason naming the field. Always false. */
static bool
refuse(struct rn *x, const char *fmt, ...)
{
    va_list ap;

    if (x->rc != GW_OK)
        return false;
    x->rc = GW_E_UNCONVERTIBLE;
    if (x->why) {
        va_start(ap, fmt);
        if (gw_buf_vprintf(x->why, fmt, ap) != GW_OK)
            x->nomem = true;
        va_end(ap);
    }
    return false;
}

/* "data:<media type>;base64,<data>" as a JSON string. */
static void
w_data_url(struct rn *x, const struct dl_part *p)
{
    W(x, "\"data:");
    w_esc(x, p->media_type);
    W(x, ";base64,");
    w_esc(x, p->data);
    W(x, "\"");
}

/* The texts of <p> joined with <sep> into one JSON string. */
static void
w_texts(struct rn *x, const struct dl_part *p, size_t n, const char *sep)
{
    bool any = false;
    size_t i;

    W(x, "\"");
    for (i = 0; i < n; i++) {
        if (p[i].kind != DL_PART_TEXT)
            continue;
        if (any && *sep)
            w_esc(x, gw_str_c(sep));
        w_esc(x, p[i].text);
        any = true;
    }
    W(x, "\"");
}

/* A text document (text/... data, as a Messages plain-text document arrives) as a text
 * part, its title on a first line: Chat's file parts take PDFs. False (nothing written)
 * when it is not one, or its data is not base64 of UTF-8 text. */
static bool
w_text_document(struct rn *x, const struct dl_part *p)
{
    struct gw_buf t = {0};
    bool ok;

    if (p->media_type.len < 5 || memcmp(p->media_type.ptr, "text/", 5) != 0)
        return false;
    if (p->text.len &&
        (gw_buf_append_str(&t, p->text) != GW_OK || gw_buf_append_cstr(&t, "\n\n") != GW_OK)) {
        x->nomem = true;
        gw_buf_fini(&t);
        return true;
    }
    ok = gw_base64_decode(p->data, &t) && gw_utf8_valid((struct gw_str){t.data, t.len});
    if (ok) {
        W(x, "{\"type\":\"text\",\"text\":");
        w_json(x, (struct gw_str){t.data, t.len});
        W(x, "}");
    }
    gw_buf_fini(&t);
    return ok;
}

/* One part of a user message's content array (TEXT, IMAGE, DOCUMENT). */
static bool
w_user_part(struct rn *x, const struct dl_part *p, size_t i, size_t k)
{
    switch (p->kind) {
    case DL_PART_TEXT:
        W(x, "{\"type\":\"text\",\"text\":");
        w_json(x, p->text);
        W(x, "}");
        return true;
    case DL_PART_IMAGE:
        W(x, "{\"type\":\"image_url\",\"image_url\":{\"url\":");
        if (p->url.len)
            w_json(x, p->url);
        else if (p->data.len)
            w_data_url(x, p);
        else
            return refuse(x, "messages[%zu].content[%zu]: an image with neither a URL nor data", i,
                          k);
        if (p->detail.len) {
            W(x, ",\"detail\":");
            w_json(x, p->detail);
        }
        W(x, "}}");
        return true;
    case DL_PART_DOCUMENT:
        if (!p->data.len)
            return refuse(x,
                          "messages[%zu].content[%zu]: a document by URL (Chat Completions takes "
                          "files as data only)",
                          i, k);
        if (!x->same && w_text_document(x, p)) /* a Chat client's file goes as it came */
            return true;
        W(x, "{\"type\":\"file\",\"file\":{");
        if (p->text.len) {
            W(x, "\"filename\":");
            w_json(x, p->text);
            W(x, ",");
        }
        W(x, "\"file_data\":");
        w_data_url(x, p);
        W(x, "}}");
        return true;
    case DL_PART_OTHER:
        if (!x->same)
            return refuse(x, "messages[%zu].content[%zu]: a \"%.*s\" part cannot be converted", i,
                          k, (int)(p->name.len > 64 ? 64 : p->name.len), p->name.ptr);
        w_raw(x, p->data);
        return true;
    case DL_PART_TOOL_CALL:
    case DL_PART_TOOL_RESULT:
    case DL_PART_REASONING: break;
    }
    return true;
}

/* Parts that go into a user message's content array besides text. */
static bool
is_media(const struct dl_part *p)
{
    return p->kind == DL_PART_IMAGE || p->kind == DL_PART_DOCUMENT || p->kind == DL_PART_OTHER;
}

/* A user or tool turn: its tool results as "tool" messages, then one user message with
 * the images and documents of those results and the turn's own parts. */
static bool
w_user_turn(struct rn *x, const struct dl_message *m, size_t i, bool *comma)
{
    size_t k, c, items = 0;
    const struct dl_part *only = NULL;
    bool first = true;

    for (k = 0; k < m->n_parts; k++) {
        const struct dl_part *p = &m->parts[k];

        if (p->cache)
            drop(x, GW_STR_LIT("cache_control"));
        if (p->kind == DL_PART_TOOL_CALL)
            return refuse(x, "messages[%zu].content[%zu]: a tool call outside an assistant turn", i,
                          k);
        if (p->kind == DL_PART_REASONING)
            drop(x, GW_STR_LIT("reasoning"));
        if (p->kind == DL_PART_TEXT || is_media(p)) {
            items++;
            only = p;
        }
        if (p->kind != DL_PART_TOOL_RESULT)
            continue;
        if (p->is_error)
            drop(x, GW_STR_LIT("is_error"));
        if (*comma)
            W(x, ",");
        *comma = true;
        W(x, "{\"role\":\"tool\",\"tool_call_id\":");
        w_json(x, p->call_id);
        W(x, ",\"content\":");
        w_texts(x, p->content, p->n_content, "\n\n");
        W(x, "}");
        for (c = 0; c < p->n_content; c++) {
            if (p->content[c].cache)
                drop(x, GW_STR_LIT("cache_control"));
            if (is_media(&p->content[c])) {
                items++;
                only = &p->content[c];
            }
        }
    }
    if (items == 0)
        return true;
    if (*comma)
        W(x, ",");
    *comma = true;
    W(x, "{\"role\":\"user\",");
    if (m->name.len) {
        W(x, "\"name\":");
        w_json(x, m->name);
        W(x, ",");
    }
    W(x, "\"content\":");
    if (items == 1 && only->kind == DL_PART_TEXT) {
        w_json(x, only->text);
        W(x, "}");
        return true;
    }
    W(x, "[");
    for (k = 0; k < m->n_parts; k++) { /* the results' media first, as the results came first */
        const struct dl_part *p = &m->parts[k];

        for (c = 0; p->kind == DL_PART_TOOL_RESULT && c < p->n_content; c++) {
            if (!is_media(&p->content[c]))
                continue;
            if (!first)
                W(x, ",");
            first = false;
            if (!w_user_part(x, &p->content[c], i, k))
                return false;
        }
    }
    for (k = 0; k < m->n_parts; k++) {
        const struct dl_part *p = &m->parts[k];

        if (p->kind != DL_PART_TEXT && !is_media(p))
            continue;
        if (!first)
            W(x, ",");
        first = false;
        if (!w_user_part(x, p, i, k))
            return false;
    }
    W(x, "]}");
    return true;
}

static bool
w_assistant(struct rn *x, const struct dl_message *m, size_t i, bool *comma)
{
    size_t k, texts = 0, calls = 0;

    for (k = 0; k < m->n_parts; k++) {
        const struct dl_part *p = &m->parts[k];

        if (p->cache)
            drop(x, GW_STR_LIT("cache_control"));
        if (p->kind == DL_PART_OTHER && !x->same)
            return refuse(x, "messages[%zu].content[%zu]: a \"%.*s\" part cannot be converted", i,
                          k, (int)(p->name.len > 64 ? 64 : p->name.len), p->name.ptr);
        if (p->kind == DL_PART_IMAGE || p->kind == DL_PART_DOCUMENT)
            return refuse(x,
                          "messages[%zu].content[%zu]: an image or document in an assistant "
                          "turn",
                          i, k);
        if (p->kind == DL_PART_TOOL_RESULT)
            return refuse(x, "messages[%zu].content[%zu]: a tool result in an assistant turn", i,
                          k);
        if (p->kind == DL_PART_REASONING)
            drop(x, GW_STR_LIT("reasoning"));
        texts += p->kind == DL_PART_TEXT;
        calls += p->kind == DL_PART_TOOL_CALL || p->kind == DL_PART_OTHER;
    }
    if (*comma)
        W(x, ",");
    *comma = true;
    W(x, "{\"role\":\"assistant\",");
    if (m->name.len) {
        W(x, "\"name\":");
        w_json(x, m->name);
        W(x, ",");
    }
    W(x, "\"content\":");
    if (texts || !calls)
        w_texts(x, m->parts, m->n_parts, "");
    else
        W(x, "null");
    if (calls) {
        bool first = true;

        W(x, ",\"tool_calls\":[");
        for (k = 0; k < m->n_parts; k++) {
            const struct dl_part *p = &m->parts[k];

            if (p->kind != DL_PART_TOOL_CALL && p->kind != DL_PART_OTHER)
                continue;
            if (!first)
                W(x, ",");
            first = false;
            if (p->kind == DL_PART_OTHER) { /* a custom tool's call, as written */
                w_raw(x, p->data);
                continue;
            }
            W(x, "{\"id\":");
            w_json(x, p->id);
            W(x, ",\"type\":\"function\",\"function\":{\"name\":");
            w_json(x, p->name);
            W(x, ",\"arguments\":");
            w_json(x, p->arguments.len ? p->arguments : GW_STR_LIT("{}"));
            W(x, "}}");
        }
        W(x, "]");
    }
    W(x, "}");
    return true;
}

static bool
w_messages(struct rn *x, const struct dl_request *r)
{
    bool comma = false;
    size_t i;

    W(x, ",\"messages\":[");
    if (r->n_system) {
        for (i = 0; i < r->n_system; i++)
            if (r->system[i].cache)
                drop(x, GW_STR_LIT("cache_control"));
        W(x, "{\"role\":\"system\",\"content\":");
        w_texts(x, r->system, r->n_system, "\n\n");
        W(x, "}");
        comma = true;
    }
    for (i = 0; i < r->n_messages; i++) {
        const struct dl_message *m = &r->messages[i];
        bool ok = m->role == DL_ROLE_ASSISTANT ? w_assistant(x, m, i, &comma)
                                               : w_user_turn(x, m, i, &comma);

        if (!ok)
            return false;
    }
    W(x, "]");
    return true;
}

static bool
w_tools(struct rn *x, const struct dl_request *r)
{
    size_t i;

    if (!r->n_tools)
        return true;
    W(x, ",\"tools\":[");
    for (i = 0; i < r->n_tools; i++) {
        const struct dl_tool *t = &r->tools[i];

        if (t->cache)
            drop(x, GW_STR_LIT("cache_control"));
        if (i)
            W(x, ",");
        if (t->hosted.len) {
            if (!x->same)
                return refuse(x, "tools[%zu]: a tool the provider runs cannot be converted", i);
            w_raw(x, t->hosted);
            continue;
        }
        W(x, "{\"type\":\"function\",\"function\":{\"name\":");
        w_json(x, t->name);
        if (t->description.len) {
            W(x, ",\"description\":");
            w_json(x, t->description);
        }
        if (t->parameters.len) {
            W(x, ",\"parameters\":");
            w_raw(x, t->parameters);
        }
        if (t->strict)
            W(x, ",\"strict\":true");
        W(x, "}}");
    }
    W(x, "]");
    switch (r->tool_choice) {
    case DL_TOOL_CHOICE_AUTO: W(x, ",\"tool_choice\":\"auto\""); break;
    case DL_TOOL_CHOICE_NONE: W(x, ",\"tool_choice\":\"none\""); break;
    case DL_TOOL_CHOICE_REQUIRED: W(x, ",\"tool_choice\":\"required\""); break;
    case DL_TOOL_CHOICE_NAMED:
        W(x, ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":");
        w_json(x, r->tool_choice_name);
        W(x, "}}");
        break;
    case DL_TOOL_CHOICE_UNSET: break;
    }
    if (r->parallel_tool_calls >= 0) {
        W(x, ",\"parallel_tool_calls\":");
        w_bool(x, r->parallel_tool_calls > 0);
    }
    return true;
}

static void
w_sampling(struct rn *x, const struct dl_request *r, uint64_t max_output_default)
{
    size_t i;

    if (r->has_temperature) {
        W(x, ",\"temperature\":");
        w_real(x, r->temperature);
    }
    if (r->has_top_p) {
        W(x, ",\"top_p\":");
        w_real(x, r->top_p);
    }
    if (r->has_top_k)
        drop(x, GW_STR_LIT("top_k"));
    if (r->has_seed) {
        W(x, ",\"seed\":");
        w_i64(x, r->seed);
    }
    if (r->has_presence) {
        W(x, ",\"presence_penalty\":");
        w_real(x, r->presence_penalty);
    }
    if (r->has_frequency) {
        W(x, ",\"frequency_penalty\":");
        w_real(x, r->frequency_penalty);
    }
    if (r->n_stop) {
        W(x, ",\"stop\":[");
        for (i = 0; i < r->n_stop; i++) {
            if (i)
                W(x, ",");
            w_json(x, r->stop[i]);
        }
        W(x, "]");
    }
    if (r->max_output_tokens || max_output_default) {
        W(x, ",\"max_tokens\":");
        w_u64(x, r->max_output_tokens ? r->max_output_tokens : max_output_default);
    }
}

static void
w_rest(struct rn *x, const struct dl_request *r)
{
    size_t i;

    if (r->format == DL_FORMAT_JSON_OBJECT)
        W(x, ",\"response_format\":{\"type\":\"json_object\"}");
    if (r->format == DL_FORMAT_JSON_SCHEMA) {
        W(x, ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":");
        w_json(x, r->format_name.len ? r->format_name : GW_STR_LIT("response"));
        if (r->format_schema.len) {
            W(x, ",\"schema\":");
            w_raw(x, r->format_schema);
        }
        if (r->format_strict)
            W(x, ",\"strict\":true");
        for (i = 0; x->same && i < r->n_extras; i++)
            if (gw_str_eq(r->extras[i].name,
                          GW_STR_LIT("response_format.json_schema.description"))) {
                W(x, ",\"description\":");
                w_raw(x, r->extras[i].raw);
            }
        W(x, "}}");
    }
    if (r->reasoning_effort.len) {
        W(x, ",\"reasoning_effort\":");
        w_json(x, r->reasoning_effort);
    } else if (r->thinking || r->thinking_budget) {
        drop(x, GW_STR_LIT("thinking"));
    }
    if (r->user.len) {
        W(x, ",\"user\":");
        w_json(x, r->user);
    }
    if (r->prompt_cache_key.len) {
        W(x, ",\"prompt_cache_key\":");
        w_json(x, r->prompt_cache_key);
    }
    if (r->metadata.len && x->same) {
        W(x, ",\"metadata\":");
        w_raw(x, r->metadata);
    } else if (r->metadata.len) {
        drop(x, GW_STR_LIT("metadata"));
    }
    for (i = 0; i < r->n_extras; i++) {
        const struct dl_extra *e = &r->extras[i];

        if (!x->same) {
            drop(x, e->name);
        } else if (!memchr(e->name.ptr, '.', e->name.len)) { /* a top-level field */
            W(x, ",");
            w_json(x, e->name);
            W(x, ":");
            w_raw(x, e->raw);
        }
    }
    if (r->stream)
        W(x, ",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
}

/* The needs a Chat body cannot carry from the canonical form (it keeps that they were
 * asked for, not how). */
static bool
check_needs(struct rn *x, unsigned needs)
{
    if (needs & DL_NEED_F_N_CHOICES)
        return refuse(x, "n: more than one choice cannot be converted");
    if (needs & DL_NEED_F_LOGPROBS)
        return refuse(x, "logprobs: log probabilities cannot be converted");
    if (needs & DL_NEED_F_HOSTED_TOOLS)
        return refuse(x, "tools: hosted tools (web search, code execution, file search, computer "
                         "use) cannot be converted");
    if (needs & DL_NEED_F_AUDIO_OUT)
        return refuse(x, "modalities: audio output cannot be converted");
    if (needs & DL_NEED_F_IMAGE_OUT)
        return refuse(x, "modalities: image output cannot be converted");
    return true;
}

enum gw_code
dl_openai_request_render(const struct dl_request *r, struct gw_str model,
                         uint64_t max_output_default, struct dl_dropped *dropped,
                         struct gw_buf *out, struct gw_buf *why)
{
    struct rn x = {.b = out, .why = why, .dropped = dropped};
    size_t start = out->len, n_dropped = dropped ? dropped->n : 0;
    bool more = dropped && dropped->more;

    x.same = r->source == DL_SHAPE_CHAT;
    if (x.same || check_needs(&x, r->needs)) {
        W(&x, "{\"model\":");
        w_json(&x, model);
        if (w_messages(&x, r) && w_tools(&x, r)) {
            w_sampling(&x, r, max_output_default);
            w_rest(&x, r);
            W(&x, "}");
        }
    }
    if (x.nomem || x.rc != GW_OK) {
        out->len = start;
        if (out->data)
            out->data[start] = '\0';
        if (dropped) { /* nothing is dropped from a request not sent */
            dropped->n = n_dropped;
            dropped->more = more;
        }
        return x.nomem ? GW_E_NOMEM : x.rc;
    }
    return GW_OK;
}
