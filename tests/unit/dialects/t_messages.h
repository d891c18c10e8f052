/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/t_messages.h - helpers of the Messages shape's unit tests
 * (test_anthropic_request.c, test_anthropic_answer.c; the Responses shape's too, with
 * its own T_FIXTURES): fixtures of tests/fixtures/messages/ read from the repository
 * root (where tools/test.sh runs the tests), JSON compared structurally (numbers by
 * value), SSE text split into events, canonical events written as one line each so a
 * sequence compares as text.
 * Owns:    what each helper returns (freed by the caller, as said).
 * Threads: single-threaded tests.
 */
#ifndef GW_TESTS_UNIT_DIALECTS_T_MESSAGES_H
#define GW_TESTS_UNIT_DIALECTS_T_MESSAGES_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/str.h"
#include "dialects/canon.h"

/* A test of another shape defines its own folder before including this file. */
#ifndef T_FIXTURES
#define T_FIXTURES "tests/fixtures/messages/"
#endif

/* The bytes of fixture <name> (NUL-terminated, free with free()); fails the test when
 * it cannot be read. */
static inline char *
t_fixture(const char *name, size_t *len)
{
    char path[256];
    FILE *f;
    char *buf;
    long n;

    snprintf(path, sizeof(path), T_FIXTURES "%s", name);
    f = fopen(path, "rb");
    if (!f) {
        print_error("cannot open %s (run the tests from the repository root)\n", path);
        fail();
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* jansson's json_equal, except that numbers compare by value (1 equals 1.0). */
static inline int
t_json_same(json_t *a, json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    if (json_typeof(a) != json_typeof(b))
        return 0;
    if (json_is_object(a)) {
        const char *k;
        json_t *v;

        if (json_object_size(a) != json_object_size(b))
            return 0;
        json_object_foreach(a, k, v)
        {
            json_t *w = json_object_get(b, k);

            if (!w || !t_json_same(v, w))
                return 0;
        }
        return 1;
    }
    if (json_is_array(a)) {
        size_t i;

        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (i = 0; i < json_array_size(a); i++)
            if (!t_json_same(json_array_get(a, i), json_array_get(b, i)))
                return 0;
        return 1;
    }
    return json_equal(a, b);
}

/* Asserts that the JSON text <got> is the JSON <want>, printing both when not. */
static inline void
t_json_is(const char *got, size_t len, const char *want, size_t want_len)
{
    json_t *g = json_loadb(got, len, JSON_ALLOW_NUL, NULL);
    json_t *w = json_loadb(want, want_len, JSON_ALLOW_NUL, NULL);

    assert_non_null(w);
    if (!g || !t_json_same(g, w)) {
        print_error("got:  %.*s\nwant: %.*s\n", (int)len, got, (int)want_len, want);
        fail();
    }
    json_decref(g);
    json_decref(w);
}

static inline void
t_json_eq(const char *got, size_t len, const char *want)
{
    t_json_is(got, len, want, strlen(want));
}

/* One SSE event of a text: its name and data (slices of the text). */
struct t_sse {
    struct gw_str event, data;
};

/* Splits <text> ("event: x\ndata: y\n\n" blocks) into at most <max> events. */
static inline size_t
t_sse_split(const char *text, size_t len, struct t_sse *v, size_t max)
{
    size_t n = 0, i = 0;

    while (i < len && n < max) {
        const char *end = memmem(text + i, len - i, "\n\n", 2);
        const char *line = text + i;
        const char *stop = end ? end : text + len;

        memset(&v[n], 0, sizeof(v[n]));
        while (line < stop) {
            const char *nl = memchr(line, '\n', (size_t)(stop - line));
            const char *eol = nl ? nl : stop;

            if ((size_t)(eol - line) >= 7 && memcmp(line, "event: ", 7) == 0)
                v[n].event = (struct gw_str){line + 7, (size_t)(eol - line) - 7};
            else if ((size_t)(eol - line) >= 6 && memcmp(line, "data: ", 6) == 0)
                v[n].data = (struct gw_str){line + 6, (size_t)(eol - line) - 6};
            line = eol + 1;
        }
        if (v[n].event.len || v[n].data.len)
            n++;
        if (!end)
            break;
        i = (size_t)(end - text) + 2;
    }
    return n;
}

/* Writes <s> quoted, with \n, \" and \\ escaped, into <b>. */
static inline void
t_quote(struct gw_buf *b, struct gw_str s)
{
    size_t i;

    gw_buf_append_cstr(b, "\"");
    for (i = 0; i < s.len; i++) {
        if (s.ptr[i] == '\n')
            gw_buf_append_cstr(b, "\\n");
        else if (s.ptr[i] == '"' || s.ptr[i] == '\\')
            gw_buf_printf(b, "\\%c", s.ptr[i]);
        else
            gw_buf_append(b, &s.ptr[i], 1);
    }
    gw_buf_append_cstr(b, "\"");
}

static inline const char *
t_block_name(enum dl_block b)
{
    return b == DL_BLOCK_TEXT ? "text" : b == DL_BLOCK_TOOL_CALL ? "tool" : "reasoning";
}

static inline const char *
t_finish_name(enum dl_finish f)
{
    static const char *const names[] = {"none",       "stop",           "length",
                                        "tool_calls", "content_filter", "error"};

    return names[f];
}

/* A dl_event_fn writing each event as one line of <arg> (a struct gw_buf). */
static inline int
t_record(void *arg, const struct dl_event *ev)
{
    struct gw_buf *b = arg;

    switch (ev->kind) {
    case DL_EV_START:
        gw_buf_append_cstr(b, "START id=");
        gw_buf_append_str(b, ev->id);
        gw_buf_append_cstr(b, " model=");
        gw_buf_append_str(b, ev->model);
        break;
    case DL_EV_BLOCK_START:
        gw_buf_printf(b, "BLOCK_START %u %s", ev->index, t_block_name(ev->block));
        if (ev->block == DL_BLOCK_TOOL_CALL) {
            gw_buf_append_cstr(b, " id=");
            gw_buf_append_str(b, ev->id);
            gw_buf_append_cstr(b, " name=");
            gw_buf_append_str(b, ev->name);
        }
        if (ev->redacted)
            gw_buf_append_cstr(b, " redacted");
        break;
    case DL_EV_DELTA:
        gw_buf_printf(b, "DELTA %u %s", ev->index, t_block_name(ev->block));
        if (ev->text.len) {
            gw_buf_append_cstr(b, " ");
            t_quote(b, ev->text);
        }
        if (ev->signature.len) {
            gw_buf_append_cstr(b, " sig=");
            t_quote(b, ev->signature);
        }
        break;
    case DL_EV_BLOCK_STOP: gw_buf_printf(b, "BLOCK_STOP %u", ev->index); break;
    case DL_EV_USAGE:
        gw_buf_printf(b, "USAGE in=%llu out=%llu read=%llu write=%llu",
                      (unsigned long long)ev->usage.input_tokens,
                      (unsigned long long)ev->usage.output_tokens,
                      (unsigned long long)ev->usage.cache_read_tokens,
                      (unsigned long long)ev->usage.cache_write_tokens);
        break;
    case DL_EV_FINISH:
        gw_buf_printf(b, "FINISH %s", t_finish_name(ev->finish));
        if (ev->stop_sequence.len) {
            gw_buf_append_cstr(b, " seq=");
            t_quote(b, ev->stop_sequence);
        }
        break;
    case DL_EV_ERROR:
        gw_buf_append_cstr(b, "ERROR type=");
        gw_buf_append_str(b, ev->error_type);
        gw_buf_printf(b, " status=%d message=", ev->status);
        t_quote(b, ev->message);
        break;
    }
    gw_buf_append_cstr(b, "\n");
    return 0;
}

/* Asserts that the recorded lines <got> are <want>. */
static inline void
t_lines_eq(const struct gw_buf *got, const char *want)
{
    const char *g = got->len ? got->data : "";

    if (strcmp(g, want) != 0) {
        print_error("got:\n%s\nwant:\n%s\n", g, want);
        fail();
    }
}

#endif
