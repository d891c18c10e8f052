/* SPDX-License-Identifier: MIT
 * dialects/openai_conv.c - what identifies the conversation of a Chat Completions
 * request (DESIGN.md 5): prompt_cache_key, else the system prompt and the first user
 * message; and whether the request carries tool results (a turn in progress).
 * A second, read-only pass over the already validated body with the json_scan cursor:
 * no allocation, slices point into the body. Strings are taken as their raw bytes
 * (escapes left in): a conversation key only needs the same bytes to give the same key.
 * Owns:    nothing.
 * Threads: any.
 * See:     dialects/openai.h, net/pipeline.c (net_conversation_key)
 */
#include <string.h>

#include "dialects/json_scan.h"
#include "dialects/openai.h"

/* The raw bytes of the value at the cursor (string: inside the quotes), moving past it. */
static bool
raw_value(struct dl_json *j, struct gw_str *out)
{
    size_t start;

    if (dl_json_peek(j) == '"') {
        struct dl_json_str str;

        if (!dl_json_string(j, &str))
            return false;
        *out = (struct gw_str){j->s + str.start, str.end - str.start};
        return true;
    }
    start = j->i;
    if (!dl_json_skip(j, NULL))
        return false;
    *out = (struct gw_str){j->s + start, j->i - start};
    return true;
}

static bool
scan_message(struct dl_json *j, struct gw_str *role, struct gw_str *content)
{
    struct dl_json_str key;
    bool first = true;
    int more;

    if (!dl_json_obj_enter(j))
        return false;
    while ((more = dl_json_obj_next(j, &first, &key)) == 1) {
        if (dl_json_key_is(j, &key, "role", 4)) {
            if (!raw_value(j, role))
                return false;
        } else if (dl_json_key_is(j, &key, "content", 7)) {
            if (!raw_value(j, content))
                return false;
        } else if (!dl_json_skip(j, NULL)) {
            return false;
        }
    }
    return more == 0;
}

static bool
str_is(struct gw_str s, const char *lit)
{
    size_t n = strlen(lit);

    return s.len == n && memcmp(s.ptr, lit, n) == 0;
}

void
dl_openai_scan_conversation(const char *body, size_t len, struct dl_openai_conv *out)
{
    struct dl_json j;
    struct dl_json_str key;
    bool first = true;
    int more;

    memset(out, 0, sizeof(*out));
    dl_json_init(&j, body, len);
    if (dl_json_peek(&j) != '{' || !dl_json_obj_enter(&j))
        return;
    while ((more = dl_json_obj_next(&j, &first, &key)) == 1) {
        if (dl_json_key_is(&j, &key, "prompt_cache_key", 16) && dl_json_peek(&j) == '"') {
            if (!raw_value(&j, &out->cache_key))
                return;
        } else if (dl_json_key_is(&j, &key, "messages", 8) && dl_json_peek(&j) == '[') {
            bool afirst = true;
            int el;

            if (!dl_json_arr_enter(&j))
                return;
            while ((el = dl_json_arr_next(&j, &afirst)) == 1) {
                struct gw_str role = {NULL, 0}, content = {NULL, 0};

                if (dl_json_peek(&j) != '{') {
                    if (!dl_json_skip(&j, NULL))
                        return;
                    continue;
                }
                if (!scan_message(&j, &role, &content))
                    return;
                if (!out->system.len && (str_is(role, "system") || str_is(role, "developer")))
                    out->system = content;
                else if (!out->first_user.len && str_is(role, "user"))
                    out->first_user = content;
                out->last_is_tool = str_is(role, "tool");
            }
            if (el < 0)
                return;
        } else if (!dl_json_skip(&j, NULL)) {
            return;
        }
    }
}
