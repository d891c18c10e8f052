/* SPDX-License-Identifier: MIT
 * dialects/bedrock.c - the Bedrock Converse shape's file (DESIGN.md 11, issue 15): its
 * row of the hub's table (dl_bedrock_shape, upstream side only), the path of a model's
 * Converse call, the model families, the exception table and the reading of Bedrock's
 * error answers. The request render is in bedrock_request.c, answers and stream events
 * in bedrock_answer.c, the eventstream framing in bedrock_stream.c.
 * Decisions:
 * - The path segment of a model id is percent-encoded byte by byte, every byte but
 *   RFC 3986's unreserved ones (A-Z a-z 0-9 - . _ ~), upper-case hex, as AWS's SDKs
 *   encode a greedy-less path label: "anthropic.claude-v2:1" -> "anthropic.claude-v2%3A1",
 *   an ARN's ':' and '/' -> %3A and %2F.
 * - Exceptions and statuses, one table, from the SDK's service model (smithy httpError):
 *   throttling 429, model not ready 429, service unavailable 503, validation 400,
 *   conflict 400, service quota exceeded 400, access denied 403, resource not found
 *   404, model timeout 408, model error 424, internal server 500. A
 *   modelStreamErrorException is 500 here, where the model says 424: it is the
 *   upstream failing mid-answer, and the failover rules act on a 5xx, never on a 424.
 *   AWS's own authentication refusals (UnrecognizedClientException,
 *   InvalidSignatureException, ExpiredTokenException) are 403, as AWS answers them.
 * - An error answer's body is {"message": "..."} (some AWS front ends write "Message");
 *   its type is the body's "__type" or "code" when it has one (the shape name after a
 *   '#', before a ':'), else the exception the status stands for. The net layer has the
 *   x-amzn-ErrorType header, which names it better. The message is a slice of the body,
 *   escapes left in (re-escaped when rendered, never unsafe).
 * Pure: no I/O, no clock, no jansson.
 * Owns:    nothing beyond each call.
 * Threads: any.
 * See:     dialects/bedrock.h, dialects/bedrock-priv.h, docs/fields-bedrock.md,
 *          tests/unit/dialects/test_bedrock_answer.c
 */
#include "dialects/bedrock.h"

#include <string.h>
#include <strings.h>

#include "dialects/anthropic-priv.h"
#include "dialects/bedrock-priv.h"
#include "dialects/json_scan.h"

/* ---- the path ---- */

static bool
is_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

enum gw_code
dl_bedrock_path(struct gw_str prefix, struct gw_str model, bool stream, struct gw_buf *out)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t start = out->len, i;

    if (gw_buf_append_str(out, prefix) != GW_OK || gw_buf_append_cstr(out, "/model/") != GW_OK)
        goto nomem;
    for (i = 0; i < model.len; i++) {
        unsigned char c = (unsigned char)model.ptr[i];
        char enc[3] = {'%', hex[c >> 4], hex[c & 15]};

        if (is_unreserved(c) ? gw_buf_append(out, model.ptr + i, 1) != GW_OK
                             : gw_buf_append(out, enc, 3) != GW_OK)
            goto nomem;
    }
    if (gw_buf_append_cstr(out, stream ? "/converse-stream" : "/converse") != GW_OK)
        goto nomem;
    return GW_OK;
nomem:
    out->len = start;
    if (out->data)
        out->data[start] = '\0';
    return GW_E_NOMEM;
}

/* ---- model families ---- */

/* True when <s> holds <lit> where a model id starts: at its beginning or after a '.'
 * (a geography prefix, "us.") or a '/' (an ARN's resource type). */
static bool
names_family(struct gw_str s, const char *lit)
{
    size_t n = strlen(lit), i;

    for (i = 0; i + n <= s.len; i++)
        if ((i == 0 || s.ptr[i - 1] == '.' || s.ptr[i - 1] == '/') &&
            strncasecmp(s.ptr + i, lit, n) == 0)
            return true;
    return false;
}

enum dl_bedrock_family
dl_bedrock_family(struct gw_str model)
{
    if (names_family(model, "anthropic.claude"))
        return DL_BEDROCK_CLAUDE;
    if (names_family(model, "amazon.nova"))
        return DL_BEDROCK_NOVA;
    return DL_BEDROCK_OTHER;
}

/* ---- exceptions ---- */

static const struct {
    const char *name; /* as the stream names it; x-amzn-ErrorType capitalises it */
    int status;
} exceptions[] = {
    {"throttlingException", 429},           {"serviceUnavailableException", 503},
    {"validationException", 400},           {"internalServerException", 500},
    {"modelStreamErrorException", 500},     {"modelTimeoutException", 408},
    {"modelNotReadyException", 429},        {"modelErrorException", 424},
    {"accessDeniedException", 403},         {"resourceNotFoundException", 404},
    {"serviceQuotaExceededException", 400}, {"conflictException", 400},
    {"unrecognizedClientException", 403},   {"invalidSignatureException", 403},
    {"expiredTokenException", 403},
};

int
dl_bedrock_exception_status(struct gw_str name)
{
    size_t i;

    for (i = 0; i < sizeof(exceptions) / sizeof(exceptions[0]); i++) {
        const char *e = exceptions[i].name;
        size_t n = strlen(e);

        /* the first letter either way, the rest as written */
        if (name.len == n && (name.ptr[0] | 0x20) == e[0] &&
            memcmp(name.ptr + 1, e + 1, n - 1) == 0)
            return exceptions[i].status;
    }
    return 0;
}

const char *
dl_bedrock_exception_name(int status)
{
    static const struct {
        int status;
        const char *name;
    } by_status[] = {
        {400, "ValidationException"},         {401, "AccessDeniedException"},
        {403, "AccessDeniedException"},       {404, "ResourceNotFoundException"},
        {408, "ModelTimeoutException"},       {424, "ModelErrorException"},
        {429, "ThrottlingException"},         {500, "InternalServerException"},
        {503, "ServiceUnavailableException"},
    };
    size_t i;

    for (i = 0; i < sizeof(by_status) / sizeof(by_status[0]); i++)
        if (by_status[i].status == status)
            return by_status[i].name;
    return status >= 400 && status < 500 ? "ValidationException" : "InternalServerException";
}

/* What an error answer without a message says, by status. */
static const char *
generic_message(int status)
{
    switch (status) {
    case 400: return "the upstream refused the request";
    case 401:
    case 403: return "the upstream refused the gateway's credentials";
    case 404: return "the upstream does not know this model";
    case 408: return "the upstream timed out";
    case 424: return "the model failed";
    case 429: return "the upstream is throttling requests";
    case 503: return "the upstream is unavailable";
    default: break;
    }
    return status >= 400 && status < 500 ? "the upstream refused the request"
                                         : "the upstream failed";
}

/* The shape name of an AWS error code: "com.amazon.coral.service#ThrottlingException"
 * or "ThrottlingException:http://..." -> "ThrottlingException". */
static struct gw_str
shape_name(struct gw_str code)
{
    const char *hash = memrchr(code.ptr, '#', code.len);
    const char *colon;

    if (hash) {
        code.len -= (size_t)(hash + 1 - code.ptr);
        code.ptr = hash + 1;
    }
    colon = memchr(code.ptr, ':', code.len);
    if (colon)
        code.len = (size_t)(colon - code.ptr);
    return code;
}

void
dl_bedrock_upstream_error_read(const char *body, size_t len, int status, struct gw_str *type,
                               struct gw_str *message)
{
    struct dl_anth_field top[] = {DL_ANTH_FIELD("message"), DL_ANTH_FIELD("Message"),
                                  DL_ANTH_FIELD("__type"), DL_ANTH_FIELD("code")};
    struct dl_json j;
    size_t k;

    *type = gw_str_c(dl_bedrock_exception_name(status));
    *message = gw_str_c(generic_message(status));
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !dl_anthropic_fields(&j, top, 4) || !dl_json_end(&j))
        return;
    for (k = 0; k < 2; k++)
        if (top[k].kind == DA_STR && top[k].str.dlen > 0) {
            *message = (struct gw_str){body + top[k].str.start, top[k].str.end - top[k].str.start};
            break;
        }
    for (k = 2; k < 4; k++)
        if (top[k].kind == DA_STR && !top[k].str.escaped && top[k].str.dlen > 0) {
            struct gw_str t = shape_name((struct gw_str){body + top[k].str.start, top[k].str.dlen});

            if (t.len) {
                *type = t;
                break;
            }
        }
}

/* ---- the table ---- */

const struct dl_shape_ops dl_bedrock_shape = {
    .shape = DL_SHAPE_BEDROCK,
    .name = "bedrock",
    .request_render = dl_bedrock_request_render,
    .parse_init = dl_bedrock_parse_init,
    .event_parse = dl_bedrock_event_parse,
    .answer_parse = dl_bedrock_answer_parse,
    .upstream_error_read = dl_bedrock_upstream_error_read,
    .answer_usage = dl_bedrock_answer_usage,
};
