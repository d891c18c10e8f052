/* SPDX-License-Identifier: MIT
 * dialects/gemini_stream.c - the splitter of Gemini's non-SSE stream: a
 * streamGenerateContent call without ?alt=sse answers one JSON array of
 * GenerateContentResponse objects, written as they come ("[{...}\r\n,{...}\r\n]" with
 * the API's own blanks), and arbitrary read boundaries cut it anywhere. The splitter
 * hands each complete element to a callback, in order.
 * Decisions:
 * - It follows only the array's own grammar: "[", objects separated by ",", "]", blanks
 *   around them; inside an element only brackets and strings (with their escapes)
 *   count, so that a "}" in a string does not end it. Whether an element is the JSON
 *   it must be is the event parser's business (dl_gemini_event_parse checks it).
 * - An element complete in one read is handed over as a slice of that read, without a
 *   copy; one that spans reads is gathered in a gw_buf (the only allocation), at most
 *   <max> bytes: beyond that the stream is refused, like a too long SSE event.
 * - After an error every later feed fails the same way; after "]" only blanks may come.
 * Pure: bytes in, elements out; no I/O.
 * Owns:    the partial element's buffer (dl_gemini_array_fini frees it).
 * Threads: any; one splitter on one thread.
 * See:     dialects/gemini.h, tests/unit/dialects/test_gemini_stream.c,
 *          tests/fuzz/fuzz_gemini_array.c
 */
#include "dialects/gemini.h"

#include <string.h>

enum {
    AS_OPEN = 0, /* before "[" */
    AS_FIRST,    /* after "[": an element or "]" */
    AS_ELEMENT,  /* inside an element */
    AS_AFTER,    /* after an element: "," or "]" */
    AS_NEXT,     /* after ",": an element */
    AS_DONE,     /* after "]": blanks only */
    AS_FAILED,
};

void
dl_gemini_array_init(struct dl_gemini_array *a, size_t max)
{
    memset(a, 0, sizeof(*a));
    a->max = max;
    a->state = AS_OPEN;
}

void
dl_gemini_array_fini(struct dl_gemini_array *a)
{
    gw_buf_fini(&a->partial);
}

bool
dl_gemini_array_done(const struct dl_gemini_array *a)
{
    return a->state == AS_DONE;
}

static enum gw_code
failed(struct dl_gemini_array *a)
{
    a->state = AS_FAILED;
    gw_buf_reset(&a->partial);
    return GW_E_UPSTREAM_PROTOCOL;
}

/* Moves past the element bytes of <p>[*i..n) up to its closing bracket: true when it
 * closed (at p[*i - 1]). */
static bool
scan_element(struct dl_gemini_array *a, const char *p, size_t n, size_t *i)
{
    while (*i < n) {
        char c = p[(*i)++];

        if (a->in_string) {
            if (a->escape)
                a->escape = false;
            else if (c == '\\')
                a->escape = true;
            else if (c == '"')
                a->in_string = false;
        } else if (c == '"') {
            a->in_string = true;
        } else if (c == '{' || c == '[') {
            a->depth++;
        } else if ((c == '}' || c == ']') && --a->depth == 0) {
            return true;
        }
    }
    return false;
}

enum gw_code
dl_gemini_array_feed(struct dl_gemini_array *a, const char *p, size_t n, dl_gemini_element_fn fn,
                     void *arg)
{
    size_t i = 0, start = 0;

    if (a->state == AS_FAILED)
        return GW_E_UPSTREAM_PROTOCOL;
    while (i < n) {
        char c = p[i];

        if (a->state == AS_ELEMENT) {
            const char *obj = p + start;
            size_t len;

            if (!scan_element(a, p, n, &i))
                break; /* the element goes on in the next read */
            len = i - start;
            if (a->partial.len) {
                if (a->partial.len + len > a->max)
                    return failed(a);
                if (gw_buf_append(&a->partial, p + start, len) != GW_OK)
                    return GW_E_NOMEM;
                obj = a->partial.data;
                len = a->partial.len;
            } else if (len > a->max) {
                return failed(a);
            }
            a->state = AS_AFTER;
            if (fn(arg, obj, len) != 0) {
                gw_buf_reset(&a->partial);
                return GW_OK;
            }
            gw_buf_reset(&a->partial);
            continue;
        }
        i++;
        if (gw_is_blank(c))
            continue;
        switch (a->state) {
        case AS_OPEN:
            if (c != '[')
                return failed(a);
            a->state = AS_FIRST;
            break;
        case AS_FIRST:
        case AS_NEXT:
            if (c == ']' && a->state == AS_FIRST) {
                a->state = AS_DONE;
                break;
            }
            if (c != '{')
                return failed(a);
            a->state = AS_ELEMENT;
            a->depth = 1;
            a->in_string = a->escape = false;
            start = i - 1;
            break;
        case AS_AFTER:
            if (c == ',')
                a->state = AS_NEXT;
            else if (c == ']')
                a->state = AS_DONE;
            else
                return failed(a);
            break;
        default: return failed(a);
        }
    }
    if (a->state == AS_ELEMENT) {
        /* what this read holds of an element that ends in a later one */
        if (a->partial.len + (n - start) > a->max)
            return failed(a);
        if (gw_buf_append(&a->partial, p + start, n - start) != GW_OK)
            return GW_E_NOMEM;
    }
    return GW_OK;
}
