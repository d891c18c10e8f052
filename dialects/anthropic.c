/* SPDX-License-Identifier: MIT
 * dialects/anthropic.c - the Anthropic Messages shape's file (DESIGN.md 11): its row of
 * the hub's table (dl_anthropic_shape), its error bodies and frames, and the helpers
 * its other files share (a field collector over dialects/json_scan.h, numbers, the
 * status -> error type table). The request is in anthropic_request.c, events and
 * answers in anthropic_answer.c, the model listing in anthropic_models.c.
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
 *   Messages type is kept when it stands for that same status.
 * Pure: no I/O, no clock, no jansson.
 * Owns:    nothing beyond each call.
 * Threads: any.
 * See:     dialects/anthropic.h, dialects/anthropic-priv.h, dialects/canon.h,
 *          tests/unit/dialects/test_anthropic.c
 */
#include "dialects/anthropic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dialects/anthropic-priv.h"
#include "dialects/json_scan.h"

/* ---- helpers the shape's files share ---- */

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

enum gw_code
dl_anthropic_append_double(struct gw_buf *out, double v)
{
    size_t at = out->len;

    if (gw_buf_append_double(out, v) != GW_OK)
        return GW_E_NOMEM;
    /* a double stays a real when read back (1.0, not 1) */
    if (!memchr(out->data + at, '.', out->len - at) && !memchr(out->data + at, 'e', out->len - at))
        return gw_buf_append(out, ".0", 2);
    return GW_OK;
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
