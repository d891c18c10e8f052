/* SPDX-License-Identifier: MIT
 * dialects/gemini.c - the Gemini shape's file (DESIGN.md 11): its row of the hub's table
 * (dl_gemini_shape), its error bodies and frames, and the helpers its other files share
 * (a field collector that reads both spellings of a field, numbers, the status table,
 * generated call ids). The request is in gemini_request.c and gemini_render.c, events
 * and answers in gemini_answer.c (upstream side) and gemini_frames.c (client side).
 * Errors, decisions:
 * - The body is Google's: {"error":{"code":<HTTP status>,"message","status":<google.rpc
 *   code name>,"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":
 *   <gw code>,"domain":"gw"}]}}. @google/genai raises ApiError with the HTTP status and
 *   the body as its message; clients act on the status, so the name only has to agree
 *   with it. One table maps statuses to names: 400 INVALID_ARGUMENT, 401
 *   UNAUTHENTICATED, 403 PERMISSION_DENIED, 404 NOT_FOUND, 408 and 504
 *   DEADLINE_EXCEEDED, 409 ABORTED, 429 RESOURCE_EXHAUSTED, 499 CANCELLED, 500 INTERNAL,
 *   501 UNIMPLEMENTED, 502, 503 and 529 (an overloaded Anthropic upstream)
 *   UNAVAILABLE; any other 4xx INVALID_ARGUMENT (413,
 *   431: the request as sent cannot be served), anything else INTERNAL.
 * - A stream broken after content ends with that body as one more SSE data event, code
 *   503, status UNAVAILABLE (DESIGN.md 11), whatever broke; in the JSON-array stream it
 *   is the array's last element (dl_gemini_render_abort in gemini_frames.c).
 * - An upstream's error body: {"error":{...}} or the JSON-array stream's
 *   [{"error":{...}}]; its status name is the type, its message a slice of the body,
 *   escapes left in (re-escaped when rendered, never unsafe). A name that is not
 *   Google's, or stands for another status, is replaced from the status.
 * Pure: no I/O, no clock, no jansson.
 * Owns:    nothing beyond each call.
 * Threads: any.
 * See:     dialects/gemini.h, dialects/gemini-priv.h, dialects/canon.h,
 *          tests/unit/dialects/test_gemini.c
 */
#include "dialects/gemini.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dialects/gemini-priv.h"

/* ---- the field collector ---- */

enum dl_gm_kind
dl_gm_kind_of(int c)
{
    switch (c) {
    case 'n': return GK_NULL;
    case 't': return GK_TRUE;
    case 'f': return GK_FALSE;
    case '"': return GK_STR;
    case '{': return GK_OBJ;
    case '[': return GK_ARR;
    default: return GK_NUM;
    }
}

/* <key> (decoded, <klen> bytes) spelt as <camel> or as its snake_case. */
static bool
spelt_as(const char *key, size_t klen, const char *camel)
{
    size_t i = 0;

    for (; *camel; camel++) {
        char c = *camel;

        if (i < klen && key[i] == c) {
            i++;
        } else if (c >= 'A' && c <= 'Z' && i + 1 < klen && key[i] == '_' &&
                   key[i + 1] == (char)(c - 'A' + 'a')) {
            i += 2;
        } else {
            return false;
        }
    }
    return i == klen;
}

bool
dl_gm_key_is(const struct dl_json *j, const struct dl_json_str *key, const char *camel)
{
    char buf[96];

    if (!key->escaped)
        return spelt_as(j->s + key->start, key->dlen, camel);
    if (key->dlen > sizeof(buf))
        return false; /* longer than any name the shape reads */
    dl_json_decode(j, key, buf);
    return spelt_as(buf, key->dlen, camel);
}

bool
dl_gm_value(struct dl_json *j, struct dl_gm_field *f)
{
    f->kind = dl_gm_kind_of(dl_json_peek(j));
    f->at = j->i; /* after the blanks the peek skipped */
    if (f->kind == GK_STR && !dl_json_string(j, &f->str))
        return false;
    if (f->kind == GK_NUM && !dl_json_number(j, &f->num))
        return false;
    if (f->kind != GK_STR && f->kind != GK_NUM && !dl_json_skip(j, NULL))
        return false;
    f->end = j->i;
    return true;
}

bool
dl_gm_fields(struct dl_json *j, struct dl_gm_field *fields, size_t n)
{
    struct dl_json_str key;
    bool first = true;
    size_t k;
    int r;

    for (k = 0; k < n; k++) {
        fields[k].kind = GK_ABSENT;
        fields[k].count = 0;
    }
    if (dl_json_peek(j) != '{')
        return dl_json_fail(j, DL_JSON_E_SYNTAX);
    if (!dl_json_obj_enter(j))
        return false;
    while ((r = dl_json_obj_next(j, &first, &key)) == 1) {
        struct dl_gm_field *f = NULL;

        for (k = 0; k < n; k++)
            if (dl_gm_key_is(j, &key, fields[k].name)) {
                f = &fields[k];
                break;
            }
        if (!f) {
            if (!dl_json_skip(j, NULL))
                return false;
            continue;
        }
        f->count++;
        if (!dl_gm_value(j, f))
            return false;
    }
    return r == 0;
}

bool
dl_gm_int(struct dl_json *j, const struct dl_json_num *num, int64_t *out)
{
    double d;

    if (!num->real)
        return dl_json_int(j, num, out);
    /* 40.0 is 40 (the SDK writes numbers so); 40.5 is not an integer */
    if (!dl_json_num_real(j, num, &d) || d != d || d < -9.2e18 || d > 9.2e18 ||
        (double)(int64_t)d != d)
        return false;
    *out = (int64_t)d;
    return true;
}

bool
dl_gm_is(const struct dl_json *j, const struct dl_gm_field *f, const char *lit)
{
    return f->kind == GK_STR && dl_json_key_is(j, &f->str, lit, strlen(lit));
}

/* ---- generated call ids ---- */

struct gw_str
dl_gemini_call_id(struct gw_arena *a, struct gw_str name, size_t turn, size_t part)
{
    char tail[48];
    int n = snprintf(tail, sizeof(tail), "_%zu_%zu", turn, part);
    char *p = gw_arena_alloc(a, 5 + name.len + (size_t)n + 1);

    if (!p)
        return (struct gw_str){NULL, 0};
    memcpy(p, "call_", 5);
    if (name.len)
        memcpy(p + 5, name.ptr, name.len);
    memcpy(p + 5 + name.len, tail, (size_t)n + 1);
    return (struct gw_str){p, 5 + name.len + (size_t)n};
}

/* The digits of <s> from <*i> on (at least one), <*i> moved past them. */
static bool
digits(struct gw_str s, size_t *i)
{
    size_t from = *i;

    while (*i < s.len && s.ptr[*i] >= '0' && s.ptr[*i] <= '9')
        (*i)++;
    return *i > from;
}

bool
dl_gemini_call_id_is_generated(struct gw_str id, struct gw_str name)
{
    size_t i = 5 + name.len;

    if (id.len < i + 4 || memcmp(id.ptr, "call_", 5) != 0 ||
        (name.len && memcmp(id.ptr + 5, name.ptr, name.len) != 0) || id.ptr[i++] != '_' ||
        !digits(id, &i) || i >= id.len || id.ptr[i++] != '_' || !digits(id, &i))
        return false;
    return i == id.len;
}

/* ---- errors ---- */

/* HTTP status -> google.rpc code name: the one table (STYLE.md 7). */
static const struct {
    int status;
    const char *name;
} status_names[] = {
    {400, "INVALID_ARGUMENT"},   {401, "UNAUTHENTICATED"},   {403, "PERMISSION_DENIED"},
    {404, "NOT_FOUND"},          {408, "DEADLINE_EXCEEDED"}, {409, "ABORTED"},
    {429, "RESOURCE_EXHAUSTED"}, {499, "CANCELLED"},         {500, "INTERNAL"},
    {501, "UNIMPLEMENTED"},      {502, "UNAVAILABLE"},       {503, "UNAVAILABLE"},
    {504, "DEADLINE_EXCEEDED"},  {529, "UNAVAILABLE"}, /* Anthropic's overloaded */
};

/* Every google.rpc code name an upstream may send, with the HTTP status Google maps it
 * to (google/rpc/code.proto). */
static const struct {
    const char *name;
    int status;
} rpc_codes[] = {
    {"CANCELLED", 499},           {"UNKNOWN", 500},         {"INVALID_ARGUMENT", 400},
    {"DEADLINE_EXCEEDED", 504},   {"NOT_FOUND", 404},       {"ALREADY_EXISTS", 409},
    {"PERMISSION_DENIED", 403},   {"UNAUTHENTICATED", 401}, {"RESOURCE_EXHAUSTED", 429},
    {"FAILED_PRECONDITION", 400}, {"ABORTED", 409},         {"OUT_OF_RANGE", 400},
    {"UNIMPLEMENTED", 501},       {"INTERNAL", 500},        {"UNAVAILABLE", 503},
    {"DATA_LOSS", 500},
};

const char *
dl_gemini_status_name(int status)
{
    size_t i;

    for (i = 0; i < sizeof(status_names) / sizeof(status_names[0]); i++)
        if (status_names[i].status == status)
            return status_names[i].name;
    return status >= 400 && status < 500 ? "INVALID_ARGUMENT" : "INTERNAL";
}

int
dl_gemini_status_code(struct gw_str name)
{
    size_t i;

    for (i = 0; i < sizeof(rpc_codes) / sizeof(rpc_codes[0]); i++)
        if (gw_str_eq(name, gw_str_c(rpc_codes[i].name)))
            return rpc_codes[i].status;
    return 0;
}

/* What an upstream error the gateway has no words of its own for says, by name. */
static const char *
generic_message(const char *name)
{
    static const struct {
        const char *name;
        const char *message;
    } words[] = {
        {"INVALID_ARGUMENT", "the upstream refused the request"},
        {"UNAUTHENTICATED", "the upstream refused the gateway's credentials"},
        {"PERMISSION_DENIED", "the upstream does not allow this request"},
        {"NOT_FOUND", "the upstream does not know this model or path"},
        {"DEADLINE_EXCEEDED", "the upstream timed out"},
        {"RESOURCE_EXHAUSTED", "the upstream is rate limiting requests"},
        {"UNAVAILABLE", "the upstream is unavailable"},
    };
    size_t i;

    for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strcmp(words[i].name, name) == 0)
            return words[i].message;
    return "the upstream failed";
}

/* {"error":{"code":<status>,"message":<message>,"status":<name>[,"details":[ErrorInfo
 * with <reason>]]}} */
static enum gw_code
error_body(int status, const char *name, struct gw_str message, const char *reason,
           struct gw_buf *out)
{
    if (gw_buf_append_cstr(out, "{\"error\":{\"code\":") != GW_OK ||
        gw_buf_append_u64(out, (uint64_t)status) != GW_OK ||
        gw_buf_append_cstr(out, ",\"message\":") != GW_OK ||
        gw_buf_append_json_str(out, message) != GW_OK ||
        gw_buf_append_cstr(out, ",\"status\":\"") != GW_OK ||
        gw_buf_append_cstr(out, name) != GW_OK || gw_buf_append_cstr(out, "\"") != GW_OK)
        return GW_E_NOMEM;
    if (reason &&
        (gw_buf_append_cstr(out, ",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc."
                                 "ErrorInfo\",\"reason\":") != GW_OK ||
         gw_buf_append_json_str(out, gw_str_c(reason)) != GW_OK ||
         gw_buf_append_cstr(out, ",\"domain\":\"gw\"}]") != GW_OK))
        return GW_E_NOMEM;
    return gw_buf_append_cstr(out, "}}");
}

static void
restore(struct gw_buf *out, size_t start)
{
    out->len = start;
    if (out->data)
        out->data[start] = '\0';
}

/* The body of a gateway refusal <code> answered with HTTP <status>. */
static enum gw_code
gw_error(enum gw_code code, int status, const char *name, struct gw_str message, struct gw_buf *out)
{
    if (message.len == 0)
        message = gw_str_c(gw_code_str(code));
    return error_body(status, name, message, gw_code_str(code), out);
}

enum gw_code
dl_gemini_error_render(enum gw_code code, struct gw_str message, struct gw_buf *out)
{
    int status = gw_code_http_status(code);
    size_t start = out->len;

    /* A config code (0) or GW_OK (200) in an error body is a caller bug: say 500. */
    if (status < 400)
        status = 500;
    if (gw_error(code, status, dl_gemini_status_name(status), message, out) != GW_OK) {
        restore(out, start);
        return GW_E_NOMEM;
    }
    return GW_OK;
}

enum gw_code
dl_gemini_error_frame(enum gw_code code, struct gw_str message, struct gw_buf *out)
{
    size_t start = out->len;

    if (gw_buf_append_cstr(out, "data: ") != GW_OK ||
        gw_error(code, 503, "UNAVAILABLE", message, out) != GW_OK ||
        gw_buf_append_cstr(out, "\r\n\r\n") != GW_OK) {
        restore(out, start);
        return GW_E_NOMEM;
    }
    return GW_OK;
}

enum gw_code
dl_gemini_upstream_error_render(int status, struct gw_str type, struct gw_str message,
                                struct gw_buf *out)
{
    const char *name = dl_gemini_status_name(status);
    size_t start = out->len, i;

    /* the upstream's own name when it is Google's for this same status */
    for (i = 0; i < sizeof(rpc_codes) / sizeof(rpc_codes[0]); i++)
        if (rpc_codes[i].status == status && gw_str_eq(type, gw_str_c(rpc_codes[i].name)))
            name = rpc_codes[i].name;
    if (message.len == 0)
        message = gw_str_c(generic_message(name));
    if (status < 400 || status > 599)
        status = 500;
    if (error_body(status, name, message, NULL, out) != GW_OK) {
        restore(out, start);
        return GW_E_NOMEM;
    }
    return GW_OK;
}

void
dl_gemini_upstream_error_read(const char *body, size_t len, int status, struct gw_str *type,
                              struct gw_str *message)
{
    struct dl_gm_field top[] = {DL_GM_FIELD("error")};
    struct dl_gm_field e[] = {DL_GM_FIELD("status"), DL_GM_FIELD("message")};
    const char *name = dl_gemini_status_name(status);
    struct dl_json j, ej;
    bool first = true;

    *type = gw_str_c(name);
    *message = gw_str_c(generic_message(name));
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) == '[') {
        /* the JSON-array stream answers its errors as [{"error":{...}}] */
        if (!dl_json_arr_enter(&j) || dl_json_arr_next(&j, &first) != 1)
            return;
    }
    if (!dl_gm_fields(&j, top, 1) || top[0].kind != GK_OBJ)
        return;
    ej = dl_gm_at(&j, top[0].at);
    if (!dl_gm_fields(&ej, e, 2))
        return;
    if (e[0].kind == GK_STR && !e[0].str.escaped && e[0].str.dlen > 0)
        *type = (struct gw_str){body + e[0].str.start, e[0].str.dlen};
    if (e[1].kind == GK_STR && e[1].str.dlen > 0)
        *message = (struct gw_str){body + e[1].str.start, e[1].str.end - e[1].str.start};
}

/* ---- the table ---- */

const struct dl_shape_ops dl_gemini_shape = {
    .shape = DL_SHAPE_GEMINI,
    .name = "gemini",
    .request_parse = dl_gemini_request_parse,
    .request_render = dl_gemini_request_render,
    .parse_init = dl_gemini_parse_init,
    .event_parse = dl_gemini_event_parse,
    .answer_parse = dl_gemini_answer_parse,
    .render_init = dl_gemini_render_init,
    .event_render = dl_gemini_event_render,
    .render_end = dl_gemini_render_end,
    .answer_render = dl_gemini_answer_render,
    .error_render = dl_gemini_error_render,
    .error_frame = dl_gemini_error_frame,
    .render_abort = dl_gemini_render_abort,
    .upstream_error_render = dl_gemini_upstream_error_render,
    .upstream_error_read = dl_gemini_upstream_error_read,
    .answer_usage = dl_gemini_answer_usage,
};
