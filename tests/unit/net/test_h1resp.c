/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_h1resp.c - the HTTP/1.x response reader (net/h1resp.c): framing
 * (length, chunked, to the close, none), interim heads, keep-alive, refusals, and the
 * same reading however the bytes are split.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "net/h1resp.h"

/* What a response read to its end gives. */
struct t_read {
    enum net_h1r_ev end; /* NET_H1R_DONE, NET_H1R_ERROR or NET_H1R_MORE (wants more) */
    unsigned status;
    bool keep_alive;
    char headers[512]; /* "name=value;" each */
    char body[2048];
    size_t body_len;
    size_t rest; /* bytes after the response, not taken */
};

/* Reads <raw> in pieces of <step> bytes (0: whole), as net/upstream.c does: feed what
 * is there, deliver, take what was used, feed the rest again (a new piece once all is
 * taken); then the close when <eof>. */
static void
t_read(const char *raw, size_t len, size_t step, bool no_body, bool eof, struct t_read *out)
{
    struct net_h1resp r = {0};
    char pend[4096];
    size_t have = 0, off = 0;

    memset(out, 0, sizeof(*out));
    net_h1resp_init(&r, 1024, 16, no_body);
    out->end = NET_H1R_MORE;
    for (;;) {
        struct gw_str body, name, value;
        enum net_h1r_ev ev;
        size_t used, hoff = 0;

        if (r.part == NET_H1R_P_DONE) {
            out->end = NET_H1R_DONE;
            out->keep_alive = r.keep_alive;
            break;
        }
        if (have == 0) {
            size_t n = step && len - off > step ? step : len - off;

            if (n == 0) {
                if (eof) {
                    out->end = net_h1resp_eof(&r);
                    out->keep_alive = r.keep_alive;
                }
                break;
            }
            memcpy(pend, raw + off, n);
            have = n;
            off += n;
        }
        ev = net_h1resp_feed(&r, pend, have, &used, &body);
        assert_true(used <= have);
        if (ev == NET_H1R_MORE)
            assert_int_equal(used, have); /* MORE takes every byte it is given */
        if (ev == NET_H1R_ERROR) {
            assert_non_null(r.why);
            out->end = NET_H1R_ERROR;
            break;
        }
        if (ev == NET_H1R_HEAD) {
            out->status = r.status;
            while (net_h1resp_header_next(&r, &hoff, &name, &value)) {
                size_t k = strlen(out->headers);

                snprintf(out->headers + k, sizeof(out->headers) - k, "%.*s=%.*s;", (int)name.len,
                         name.ptr, (int)value.len, value.ptr);
            }
        }
        if (ev == NET_H1R_BODY) {
            assert_true(body.ptr >= pend && body.ptr + body.len <= pend + have);
            assert_true(out->body_len + body.len <= sizeof(out->body));
            memcpy(out->body + out->body_len, body.ptr, body.len);
            out->body_len += body.len;
        }
        /* what was not taken is fed again, as an input buffer keeps it */
        have -= used;
        memmove(pend, pend + used, have);
        if (ev == NET_H1R_DONE) {
            out->end = NET_H1R_DONE;
            out->keep_alive = r.keep_alive;
            break;
        }
    }
    out->rest = have + (len - off);
    net_h1resp_fini(&r);
}

/* Read whole and in pieces of every size: the same. */
static void
t_read_all(const char *raw, bool no_body, bool eof, struct t_read *out)
{
    size_t len = strlen(raw), step;
    struct t_read again;

    t_read(raw, len, 0, no_body, eof, out);
    for (step = 1; step <= len; step++) {
        t_read(raw, len, step, no_body, eof, &again);
        assert_int_equal(again.end, out->end);
        if (out->end == NET_H1R_ERROR)
            continue;
        assert_int_equal(again.status, out->status);
        assert_string_equal(again.headers, out->headers);
        assert_int_equal(again.body_len, out->body_len);
        assert_memory_equal(again.body, out->body, out->body_len);
        assert_int_equal(again.keep_alive, out->keep_alive);
        if (out->end == NET_H1R_DONE)
            assert_int_equal(again.rest, out->rest);
    }
}

static void
test_h1resp_content_length(void **state)
{
    struct t_read t;

    (void)state;
    t_read_all("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n"
               "hello",
               false, false, &t);
    assert_int_equal(t.end, NET_H1R_DONE);
    assert_int_equal(t.status, 200);
    assert_string_equal(t.headers, "Content-Type=application/json;Content-Length=5;");
    assert_int_equal(t.body_len, 5);
    assert_memory_equal(t.body, "hello", 5);
    assert_true(t.keep_alive);
    assert_int_equal(t.rest, 0);
    /* what follows is not this response's */
    t_read_all("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200", false, false, &t);
    assert_int_equal(t.end, NET_H1R_DONE);
    assert_int_equal(t.body_len, 2);
    assert_int_equal(t.rest, 12);
    /* a body cut short by the close */
    t_read_all("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort", false, true, &t);
    assert_int_equal(t.end, NET_H1R_ERROR);
    /* 0: done at the head */
    t_read_all("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, false, &t);
    assert_int_equal(t.end, NET_H1R_DONE);
    assert_int_equal(t.body_len, 0);
}

static void
test_h1resp_chunked_with_extensions_and_trailers(void **state)
{
    struct t_read t;

    (void)state;
    t_read_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
               "5;ext=1\r\nhello\r\n6 \r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
               false, false, &t);
    assert_int_equal(t.end, NET_H1R_DONE);
    assert_int_equal(t.body_len, 11);
    assert_memory_equal(t.body, "hello world", 11);
    assert_true(t.keep_alive);
    t_read_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n",
               false, false, &t);
    assert_int_equal(t.end, NET_H1R_DONE);
    assert_int_equal(t.body_len, 10);
    /* framing errors */
    t_read_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nz\r\n", false, false, &t);
    assert_int_equal(t.end, NET_H1R_ERROR);
    t_read_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n", false, false,
               &t);
    assert_int_equal(t.end, NET_H1R_ERROR);
    t_read_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nab\r\n0\r\n\r\n", false,
               false, &t);
    assert_int_equal(t.end, NET_H1R_ERROR); /* a size line ends with CRLF */
    t_read_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n", false,
               false, &t);
    assert_int_equal(t.end, NET_H1R_ERROR); /* past 2^63 */
    /* the close in the middle: cut short */
    t_read_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel", false, true, &t);
    assert_int_equal(t.end, NET_H1R_ERROR);
}

static void
test_h1resp_body_to_the_close(void **state)
{
    struct t_read t;

    (void)state;
    t_read_all("HTTP/1.1 200 OK\r\n\r\nall of it", false, true, &t);
    assert_int_equal(t.end, NET_H1R_DONE);
    assert_int_equal(t.body_len, 9);
    assert_false(t.keep_alive);
    /* a coding other than chunked last: to the close too */
    t_read_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nxyz", false, true, &t);
    assert_int_equal(t.end, NET_H1R_DONE);
    assert_int_equal(t.body_len, 3);
    assert_false(t.keep_alive);
}

static void
test_h1resp_no_body_answers(void **state)
{
    struct t_read t;

    (void)state;
    t_read_all("HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", true, false, &t);
    assert_int_equal(t.end, NET_H1R_DONE); /* a HEAD request's */
    assert_int_equal(t.body_len, 0);
    t_read_all("HTTP/1.1 204 No Content\r\n\r\n", false, false, &t);
    assert_int_equal(t.end, NET_H1R_DONE);
    t_read_all("HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n", false, false, &t);
    assert_int_equal(t.end, NET_H1R_DONE);
    assert_int_equal(t.body_len, 0);
}

static void
test_h1resp_interim_heads_are_dropped_and_101_refused(void **state)
{
    struct t_read t;

    (void)state;
    t_read_all("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early\r\nLink: x\r\n\r\n"
               "HTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nx",
               false, false, &t);
    assert_int_equal(t.end, NET_H1R_DONE);
    assert_int_equal(t.status, 201);
    assert_string_equal(t.headers, "Content-Length=1;");
    assert_int_equal(t.body_len, 1);
    t_read_all("HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", false, false, &t);
    assert_int_equal(t.end, NET_H1R_ERROR);
}

static void
test_h1resp_keep_alive_rules(void **state)
{
    struct t_read t;

    (void)state;
    t_read_all("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false, false,
               &t);
    assert_false(t.keep_alive);
    t_read_all("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false, false, &t);
    assert_false(t.keep_alive);
    t_read_all("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", false,
               false, &t);
    assert_true(t.keep_alive);
    t_read_all("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n", false, false, &t);
    assert_int_equal(t.end, NET_H1R_DONE); /* no reason phrase */
    assert_true(t.keep_alive);
}

static void
test_h1resp_refusals(void **state)
{
    static const char *const bad[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A: a\rb\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A: a\001b\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\n\r\n",
        "HTTP/1.1 200 OK\r\nX A: a\r\n\r\n",
        "HTTP/1.1 200 OK\r\n: a\r\n\r\n",
        "HTTP/2.0 200 OK\r\n\r\n",
        "HTTP/1.1 20 OK\r\n\r\n",
        "HTTP/1.1 200OK\r\n\r\n",
        "SSH-2.0-x\r\n\r\n",
    };
    struct t_read t;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t_read_all(bad[i], false, true, &t);
        assert_int_equal(t.end, NET_H1R_ERROR);
    }
}

static void
test_h1resp_head_limits(void **state)
{
    char raw[2048];
    struct t_read t;
    int i, n;

    (void)state;
    /* 16 header lines are read, a 17th is refused (the test's limit) */
    n = snprintf(raw, sizeof(raw), "HTTP/1.1 200 OK\r\n");
    for (i = 0; i < 16; i++)
        n += snprintf(raw + n, sizeof(raw) - (size_t)n, "X-%d: v\r\n", i);
    snprintf(raw + n, sizeof(raw) - (size_t)n, "Content-Length: 0\r\n\r\n");
    t_read_all(raw, false, false, &t);
    assert_int_equal(t.end, NET_H1R_ERROR);
    /* a head past 1024 bytes, whole or in pieces */
    n = snprintf(raw, sizeof(raw), "HTTP/1.1 200 OK\r\nX-Long: ");
    memset(raw + n, 'a', 1100);
    snprintf(raw + n + 1100, sizeof(raw) - (size_t)n - 1100, "\r\n\r\n");
    t_read_all(raw, false, false, &t);
    assert_int_equal(t.end, NET_H1R_ERROR);
    /* leading line ends are skipped */
    t_read_all("\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, false, &t);
    assert_int_equal(t.end, NET_H1R_DONE);
    assert_int_equal(t.status, 200);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h1resp_content_length),
        cmocka_unit_test(test_h1resp_chunked_with_extensions_and_trailers),
        cmocka_unit_test(test_h1resp_body_to_the_close),
        cmocka_unit_test(test_h1resp_no_body_answers),
        cmocka_unit_test(test_h1resp_interim_heads_are_dropped_and_101_refused),
        cmocka_unit_test(test_h1resp_keep_alive_rules),
        cmocka_unit_test(test_h1resp_refusals),
        cmocka_unit_test(test_h1resp_head_limits),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
