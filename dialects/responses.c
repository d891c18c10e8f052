/* SPDX-License-Identifier: MIT
 * dialects/responses.c - the OpenAI Responses shape's file (DESIGN.md 11): its row of the
 * hub's table (dl_responses_shape), its error bodies and frames, the response id, and
 * the pure helpers of the gateway's conversation store (DESIGN.md 11 "OpenAI Responses
 * state"). The request is in responses_request.c, events and answers in
 * responses_answer.c.
 * Errors, decisions:
 * - A gateway refusal: {"error":{"message","type","param":null,"code"}}, code gw's
 *   stable code, type from one table (STYLE.md 7): by code where an SDK acts on it
 *   (DESIGN.md 8: the calendar key limits are insufficient_quota, so SDKs stop
 *   retrying; context_length_exceeded makes agents trim the conversation: the "code"
 *   is then OpenAI's and gw's is in "gw_code"), else by HTTP status as OpenAI answers
 *   (400/413/422 invalid_request_error, 401 authentication_error, 403
 *   permission_error, 404 not_found_error, 408/504 timeout_error, 429
 *   rate_limit_error, other 4xx invalid_request_error, 5xx server_error).
 * - A stream broken after content (error_frame, no state) ends with two events: an
 *   "error" event (code server_error, the message, the error nested too with gw_code),
 *   which openai-node and openai-python raise as an APIError, then response.failed
 *   (status "failed", error {"code":"server_error", message, gw_code}: DESIGN.md 11's
 *   unavailable frame), which Codex reads (it ignores error events; it retries
 *   server_error). Without state the frame cannot name the stream's response (its id
 *   is "resp_gw", and openai-node refuses a lifecycle frame of another id: hence the
 *   error event first) nor continue its sequence_number (DL_RESPONSES_ERROR_FRAME_SEQ
 *   and one more). A stream this shape rendered ends by dl_responses_render_failed
 *   (the row's render_abort), which has the render state. No "output" member: an SDK keeps what it
 * accumulated.
 * - An upstream's error body is Chat's ({"error":{"message","type","param","code"}}):
 *   read and rendered by the Chat shape's functions (dialects/openai_answer.c).
 * Conversation helpers, decisions: the body is scanned once (dialects/json_scan.h);
 * only the members named change, every other byte is copied; a string input becomes
 * {"type":"message","role":"user","content":[{"type":"input_text","text":<it>}]} with
 * the string's own bytes.
 * Pure: no I/O, no clock, no jansson.
 * Owns:    nothing beyond each call.
 * Threads: any.
 * See:     dialects/responses.h, dialects/responses-priv.h, dialects/canon.h,
 *          tests/unit/dialects/test_responses.c
 */
#include "dialects/responses.h"

#include <string.h>

#include "dialects/json_scan.h"
#include "dialects/openai-priv.h"
#include "dialects/responses-priv.h"

/* ---- the response id ---- */

enum gw_code
dl_responses_id_json(struct gw_buf *out, const struct dl_render_ctx *ctx)
{
    struct gw_str id = ctx->id.len ? ctx->id : GW_STR_LIT("gw");
    struct gw_buf b = {0};
    enum gw_code rc = GW_E_NOMEM;

    if (id.len >= 5 && memcmp(id.ptr, "resp_", 5) == 0)
        return gw_buf_append_json_str(out, id);
    if (gw_buf_append_cstr(&b, "resp_") == GW_OK && gw_buf_append_str(&b, id) == GW_OK)
        rc = gw_buf_append_json_str(out, (struct gw_str){b.data, b.len});
    gw_buf_fini(&b);
    return rc;
}

/* ---- errors ---- */

/* gw code -> the Responses error type, and OpenAI's own code where SDKs act on it. */
static const struct {
    enum gw_code code;
    const char *type;
    const char *theirs;
} resp_error_by_code[] = {
    {GW_E_KEY_LIMIT_REQUESTS_PER_PERIOD, "insufficient_quota", "insufficient_quota"},
    {GW_E_KEY_LIMIT_TOKENS_PER_PERIOD, "insufficient_quota", "insufficient_quota"},
    {GW_E_KEY_LIMIT_COST_PER_PERIOD, "insufficient_quota", "insufficient_quota"},
    {GW_E_CONTEXT_LENGTH, "invalid_request_error", "context_length_exceeded"},
};

/* HTTP status -> the Responses error type. */
static const struct {
    int status;
    const char *type;
} resp_error_by_status[] = {
    {400, "invalid_request_error"}, {413, "invalid_request_error"}, {422, "invalid_request_error"},
    {401, "authentication_error"},  {403, "permission_error"},      {404, "not_found_error"},
    {408, "timeout_error"},         {504, "timeout_error"},         {429, "rate_limit_error"},
};

static void
resp_error_of(enum gw_code code, int status, const char **type, const char **theirs)
{
    size_t i;

    *theirs = NULL;
    for (i = 0; i < sizeof(resp_error_by_code) / sizeof(resp_error_by_code[0]); i++)
        if (resp_error_by_code[i].code == code) {
            *type = resp_error_by_code[i].type;
            *theirs = resp_error_by_code[i].theirs;
            return;
        }
    for (i = 0; i < sizeof(resp_error_by_status) / sizeof(resp_error_by_status[0]); i++)
        if (resp_error_by_status[i].status == status) {
            *type = resp_error_by_status[i].type;
            return;
        }
    *type = status >= 400 && status < 500 ? "invalid_request_error" : "server_error";
}

#define W(x)                                                                                       \
    do {                                                                                           \
        if ((x) != GW_OK)                                                                          \
            goto nomem;                                                                            \
    } while (0)

enum gw_code
dl_responses_error_render(enum gw_code code, struct gw_str message, struct gw_buf *out)
{
    int status = gw_code_http_status(code);
    const char *type, *theirs;
    size_t start = out->len;

    /* A config code (0) or GW_OK (200) in an error body is a caller bug: say 500. */
    if (status < 400)
        status = 500;
    resp_error_of(code, status, &type, &theirs);
    if (message.len == 0)
        message = gw_str_c(gw_code_str(code));
    W(gw_buf_append_cstr(out, "{\"error\":{\"message\":"));
    W(gw_buf_append_json_str(out, message));
    W(gw_buf_append_cstr(out, ",\"type\":\""));
    W(gw_buf_append_cstr(out, type));
    W(gw_buf_append_cstr(out, "\",\"param\":null,\"code\":"));
    W(gw_buf_append_json_str(out, gw_str_c(theirs ? theirs : gw_code_str(code))));
    if (theirs) {
        W(gw_buf_append_cstr(out, ",\"gw_code\":"));
        W(gw_buf_append_json_str(out, gw_str_c(gw_code_str(code))));
    }
    W(gw_buf_append_cstr(out, "}}"));
    return GW_OK;
nomem:
    dl_responses_restore(out, start);
    return GW_E_NOMEM;
}

enum gw_code
dl_responses_error_frame(enum gw_code code, struct gw_str message, struct gw_buf *out)
{
    size_t start = out->len;

    if (message.len == 0)
        message = gw_str_c(gw_code_str(code));
    /* an error event, which every SDK raises (openai-node whatever the response) */
    W(gw_buf_append_cstr(out, "event: error\ndata: {\"type\":\"error\",\"sequence_number\":"));
    W(gw_buf_append_u64(out, DL_RESPONSES_ERROR_FRAME_SEQ));
    W(gw_buf_append_cstr(out, ",\"code\":\"server_error\",\"message\":"));
    W(gw_buf_append_json_str(out, message));
    W(gw_buf_append_cstr(out, ",\"param\":null,\"error\":{\"type\":\"server_error\",\"code\":"
                              "\"server_error\",\"message\":"));
    W(gw_buf_append_json_str(out, message));
    W(gw_buf_append_cstr(out, ",\"param\":null,\"gw_code\":"));
    W(gw_buf_append_json_str(out, gw_str_c(gw_code_str(code))));
    /* then the failed response, which Codex reads (it ignores error events) */
    W(gw_buf_append_cstr(out, "}}\n\nevent: response.failed\ndata: {\"type\":\"response.failed\","
                              "\"sequence_number\":"));
    W(gw_buf_append_u64(out, DL_RESPONSES_ERROR_FRAME_SEQ + 1));
    W(gw_buf_append_cstr(out, ",\"response\":{\"id\":\"resp_gw\",\"object\":\"response\","
                              "\"created_at\":0,\"status\":\"failed\",\"error\":{\"code\":"
                              "\"server_error\",\"message\":"));
    W(gw_buf_append_json_str(out, message));
    W(gw_buf_append_cstr(out, ",\"gw_code\":"));
    W(gw_buf_append_json_str(out, gw_str_c(gw_code_str(code))));
    W(gw_buf_append_cstr(out, "},\"incomplete_details\":null,\"usage\":null}}\n\n"));
    return GW_OK;
nomem:
    dl_responses_restore(out, start);
    return GW_E_NOMEM;
}

/* ---- the conversation store's helpers ---- */

/* Where the members the helpers edit are in a body. */
struct body_scan {
    size_t open;                /* the object's '{' */
    bool has_input, has_prev;   /* the members are there */
    size_t input_at, input_end; /* the input value's bytes */
    size_t prev_key, prev_end;  /* previous_response_id: from its key's quote to its value's end */
    size_t prev_before, prev_next; /* the end of the member before it (0: first), the key of the
                                    * member after it (0: last) */
    bool empty;                    /* the object has no member */
};

/* Scans <body>: one JSON object, each member of interest at most once. */
static bool
scan_body(const char *body, size_t len, struct body_scan *b)
{
    struct dl_json j;
    struct dl_json_str key;
    bool first = true, after_prev = false;
    size_t last_end = 0;
    int r;

    memset(b, 0, sizeof(*b));
    b->empty = true;
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{')
        return false;
    b->open = j.i;
    if (!dl_json_obj_enter(&j))
        return false;
    while ((r = dl_json_obj_next(&j, &first, &key)) == 1) {
        size_t at = j.i, key_at = key.start - 1;

        b->empty = false;
        if (after_prev) {
            b->prev_next = key_at;
            after_prev = false;
        }
        if (!dl_json_skip(&j, NULL))
            return false;
        if (dl_json_key_is(&j, &key, "input", 5)) {
            if (b->has_input)
                return false;
            b->has_input = true;
            b->input_at = at;
            b->input_end = j.i;
        } else if (dl_json_key_is(&j, &key, "previous_response_id", 20)) {
            if (b->has_prev)
                return false;
            b->has_prev = true;
            b->prev_key = key_at;
            b->prev_end = j.i;
            b->prev_before = last_end;
            after_prev = true;
        }
        last_end = j.i;
    }
    return r == 0 && dl_json_end(&j);
}

/* The items between the brackets of the JSON array <s> (trimmed); false when <s> is not
 * one JSON array. */
static bool
array_inner(struct gw_str s, struct gw_str *inner)
{
    struct dl_json j;

    s = gw_str_trim(s);
    dl_json_init(&j, s.ptr, s.len);
    if (dl_json_peek(&j) != '[' || !dl_json_skip(&j, NULL) || !dl_json_end(&j))
        return false;
    *inner = gw_str_trim((struct gw_str){s.ptr + 1, s.len - 2});
    return true;
}

/* Appends the body's own input items (no brackets): an array's items, or a string as one
 * user message item; nothing for null. <*any>: something was written. */
static enum gw_code
own_items(const char *body, const struct body_scan *b, struct gw_buf *out, bool *any)
{
    struct gw_str v = gw_str_trim((struct gw_str){body + b->input_at, b->input_end - b->input_at});
    struct gw_str inner;

    *any = false;
    if (!b->has_input || (v.len == 4 && memcmp(v.ptr, "null", 4) == 0))
        return GW_OK;
    if (v.len && v.ptr[0] == '"') {
        *any = true;
        if (gw_buf_append_cstr(out, "{\"type\":\"message\",\"role\":\"user\",\"content\":[{"
                                    "\"type\":\"input_text\",\"text\":") != GW_OK ||
            gw_buf_append_str(out, v) != GW_OK || gw_buf_append_cstr(out, "}]}") != GW_OK)
            return GW_E_NOMEM;
        return GW_OK;
    }
    if (!array_inner(v, &inner))
        return GW_E_BAD_REQUEST;
    *any = inner.len > 0;
    return gw_buf_append_str(out, inner);
}

/* "[" <items> "," <the body's own> "]" */
static enum gw_code
joined_input(const char *body, const struct body_scan *b, struct gw_str items, struct gw_buf *out)
{
    bool any;
    size_t mark;
    enum gw_code rc;

    if (gw_buf_append_cstr(out, "[") != GW_OK || gw_buf_append_str(out, items) != GW_OK)
        return GW_E_NOMEM;
    mark = out->len;
    if (items.len && gw_buf_append_cstr(out, ",") != GW_OK)
        return GW_E_NOMEM;
    rc = own_items(body, b, out, &any);
    if (rc != GW_OK)
        return rc;
    if (!any) {
        out->len = mark; /* no comma before nothing */
        out->data[mark] = '\0';
    }
    return gw_buf_append_cstr(out, "]");
}

static enum gw_code
copy(struct gw_buf *out, const char *body, size_t from, size_t to)
{
    return gw_buf_append(out, body + from, to - from);
}

static enum gw_code
expand(const char *body, size_t len, const struct body_scan *b, struct gw_str items,
       struct gw_buf *out)
{
    size_t cut_from = 0, cut_to = 0;
    enum gw_code rc;

    if (!b->has_input && b->has_prev) {
        /* the previous_response_id member becomes the input member, in its place */
        if (copy(out, body, 0, b->prev_key) != GW_OK ||
            gw_buf_append_cstr(out, "\"input\":") != GW_OK)
            return GW_E_NOMEM;
        rc = joined_input(body, b, items, out);
        return rc == GW_OK ? copy(out, body, b->prev_end, len) : rc;
    }
    if (!b->has_input) {
        if (copy(out, body, 0, b->open + 1) != GW_OK ||
            gw_buf_append_cstr(out, "\"input\":") != GW_OK)
            return GW_E_NOMEM;
        rc = joined_input(body, b, items, out);
        if (rc == GW_OK && !b->empty)
            rc = gw_buf_append_cstr(out, ",");
        return rc == GW_OK ? copy(out, body, b->open + 1, len) : rc;
    }
    if (b->has_prev) {
        /* the member and one comma beside it go */
        if (b->prev_before) {
            cut_from = b->prev_before;
            cut_to = b->prev_end;
        } else {
            cut_from = b->prev_key;
            cut_to = b->prev_next ? b->prev_next : b->prev_end;
        }
    }
    if (cut_to && cut_from < b->input_at) {
        if (copy(out, body, 0, cut_from) != GW_OK || copy(out, body, cut_to, b->input_at) != GW_OK)
            return GW_E_NOMEM;
    } else if (copy(out, body, 0, b->input_at) != GW_OK) {
        return GW_E_NOMEM;
    }
    rc = joined_input(body, b, items, out);
    if (rc != GW_OK)
        return rc;
    if (cut_to && cut_from > b->input_at) {
        if (copy(out, body, b->input_end, cut_from) != GW_OK ||
            copy(out, body, cut_to, len) != GW_OK)
            return GW_E_NOMEM;
        return GW_OK;
    }
    return copy(out, body, b->input_end, len);
}

enum gw_code
dl_responses_expand(const char *body, size_t len, struct gw_str items, struct gw_buf *out)
{
    struct body_scan b;
    struct gw_str inner;
    size_t start = out->len;
    enum gw_code rc;

    if (!scan_body(body, len, &b) || !array_inner(items, &inner))
        return GW_E_BAD_REQUEST;
    rc = expand(body, len, &b, inner, out);
    if (rc != GW_OK)
        dl_responses_restore(out, start);
    return rc;
}

enum gw_code
dl_responses_input_items(const char *body, size_t len, struct gw_buf *out)
{
    struct body_scan b;
    size_t start = out->len;
    enum gw_code rc;

    if (!scan_body(body, len, &b))
        return GW_E_BAD_REQUEST;
    rc = joined_input(body, &b, (struct gw_str){"", 0}, out);
    if (rc != GW_OK)
        dl_responses_restore(out, start);
    return rc;
}

/* ---- the table ---- */

const struct dl_shape_ops dl_responses_shape = {
    .shape = DL_SHAPE_RESPONSES,
    .name = "responses",
    .request_parse = dl_responses_request_parse,
    .request_render = dl_responses_request_render,
    .parse_init = dl_responses_parse_init,
    .event_parse = dl_responses_event_parse,
    .answer_parse = dl_responses_answer_parse,
    .render_init = dl_responses_render_init,
    .event_render = dl_responses_event_render,
    .render_end = dl_responses_render_end,
    .answer_render = dl_responses_answer_render,
    .error_render = dl_responses_error_render,
    .error_frame = dl_responses_error_frame,
    .render_abort = dl_responses_render_failed,
    .upstream_error_render = dl_openai_upstream_error_render,
    .upstream_error_read = dl_openai_upstream_error_read,
    .answer_usage = dl_responses_answer_usage,
};

enum gw_code
dl_responses_freeform_input(struct gw_buf *out, struct gw_str args)
{
    struct dl_json j;
    struct dl_json_str k, v;
    bool first = true;

    dl_json_init(&j, args.ptr, args.len);
    if (dl_json_peek(&j) == '{' && dl_json_obj_enter(&j)) {
        while (dl_json_obj_next(&j, &first, &k) > 0) {
            if (dl_json_key_is(&j, &k, "input", 5) && dl_json_peek(&j) == '"') {
                size_t at = j.i;

                if (!dl_json_string(&j, &v))
                    break;
                /* a valid JSON string already: its bytes as they are */
                return gw_buf_append(out, args.ptr + at, j.i - at);
            }
            if (!dl_json_skip(&j, NULL))
                break;
        }
    }
    return gw_buf_append_json_str(out, args);
}
