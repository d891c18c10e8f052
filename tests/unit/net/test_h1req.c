/* SPDX-License-Identifier: MIT
 * tests/unit/net/test_h1req.c - the strict HTTP/1.1 request reader (issue 8): it stops
 * at the head before any body byte, refuses request-smuggling shapes (a space before the
 * colon, Transfer-Encoding beside Content-Length or other than one chunked, two Hosts,
 * no Host on HTTP/1.1, control bytes in a value), refuses a chunk past the body limit at
 * its size line, never takes a trailer as a header, trims trailing blanks of values, and
 * reads pipelined requests one after the other.
 * See: net/h1req.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "net/h1req.h"

static const struct net_h1req_limits t_lim = {4096, 32, 1024};

/* Feeds <raw> as the server does (on past the head, stop at the end). Returns the
 * last event; *<r> keeps the request. */
static enum net_h1_ev
t_read(struct net_h1req *r, const char *raw)
{
    size_t len = strlen(raw), off = 0, used;
    enum net_h1_ev ev = NET_H1_MORE;

    net_h1req_init(r, &t_lim);
    while (off < len) {
        ev = net_h1req_feed(r, raw + off, len - off, &used);
        off += used;
        if (ev != NET_H1_MORE && ev != NET_H1_HEAD)
            break;
    }
    return ev;
}

static void
t_refused(const char *raw, enum gw_code code)
{
    struct net_h1req r;

    assert_int_equal(t_read(&r, raw), NET_H1_ERROR);
    assert_int_equal(r.refuse, code);
    assert_non_null(r.why);
    net_h1req_fini(&r);
}

static void
test_h1req_stops_at_the_head_before_the_body(void **state)
{
    const char *raw = "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n"
                      "Content-Length: 5\r\n\r\nhello";
    struct net_h1req r;
    size_t used = 0;

    (void)state;
    net_h1req_init(&r, &t_lim);
    assert_int_equal(net_h1req_feed(&r, raw, strlen(raw), &used), NET_H1_HEAD);
    assert_true(used < strlen(raw) - 5 + 1);
    assert_int_equal(r.body.len, 0);
    assert_int_equal(r.content_length, 5);
    assert_true(r.has_body);
    assert_int_equal(r.method, HTTP_POST);
    assert_int_equal(net_h1req_feed(&r, raw + used, strlen(raw) - used, &used), NET_H1_DONE);
    assert_int_equal(r.body.len, 5);
    assert_memory_equal(r.body.data, "hello", 5);
    net_h1req_fini(&r);
}

static void
test_issue_8_space_before_colon_is_refused(void **state)
{
    (void)state;
    t_refused("POST / HTTP/1.1\r\nHost: gw\r\nContent-Length : 2\r\nContent-Length: 3\r\n\r\nabc",
              GW_E_HTTP_PARSE);
    t_refused("POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding : chunked\r\n"
              "Content-Length: 3\r\n\r\nabc",
              GW_E_HTTP_PARSE);
    t_refused("GET / HTTP/1.1\r\nHost: gw\r\nAuthorization : Bearer x\r\n\r\n", GW_E_HTTP_PARSE);
    t_refused("GET / HTTP/1.1\r\nHost : gw\r\n\r\n", GW_E_HTTP_PARSE);
}

static void
test_issue_8_transfer_encoding_ambiguities_are_refused(void **state)
{
    (void)state;
    t_refused("POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n"
              "Content-Length: 3\r\n\r\n0\r\n\r\n",
              GW_E_HTTP_PARSE);
    t_refused("POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
              GW_E_HTTP_PARSE);
    t_refused("POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n"
              "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
              GW_E_HTTP_PARSE);
    t_refused("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", GW_E_HTTP_PARSE);
    t_refused("POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc",
              GW_E_HTTP_PARSE);
    /* a name that only begins with Transfer-Encoding (http-parser took it for one) */
    t_refused("POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encodings: chunked\r\n"
              "Content-Length: 3\r\n\r\nabc",
              GW_E_HTTP_PARSE);
}

static void
test_issue_8_host_rules(void **state)
{
    struct net_h1req r;

    (void)state;
    t_refused("GET / HTTP/1.1\r\nX-A: 1\r\n\r\n", GW_E_HTTP_PARSE);
    t_refused("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n", GW_E_HTTP_PARSE);
    assert_int_equal(t_read(&r, "GET / HTTP/1.0\r\nX-A: 1\r\n\r\n"), NET_H1_DONE);
    net_h1req_fini(&r);
}

static void
test_h1req_only_http10_and_http11(void **state)
{
    (void)state;
    t_refused("GET /a\r\nX-A: 1\r\n\r\n", GW_E_HTTP_PARSE); /* HTTP/0.9 */
    t_refused("GET / HTTP/1.2\r\nHost: a\r\n\r\n", GW_E_HTTP_PARSE);
    t_refused("GET / HTTP/2.0\r\nHost: a\r\n\r\n", GW_E_HTTP_PARSE);
}

static void
test_h1req_upgrade_is_answered_as_http11_and_connect_refused(void **state)
{
    struct net_h1req r;

    (void)state;
    /* curl --http2 on plain http asks for h2c: the request is read as HTTP/1.1, body
     * included, and the next request after it too */
    assert_int_equal(t_read(&r, "POST / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings"
                                "\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAAP__\r\n"
                                "Content-Length: 2\r\n\r\nxy"),
                     NET_H1_DONE);
    assert_int_equal(r.body.len, 2);
    assert_true(r.keep_alive); /* Connection: Upgrade does not close it */
    net_h1req_fini(&r);
    t_refused("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", GW_E_HTTP_PARSE);
}

static void
test_issue_8_control_bytes_in_values_are_refused(void **state)
{
    (void)state;
    t_refused("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\001b\r\n\r\n", GW_E_HTTP_PARSE);
    t_refused("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\177b\r\n\r\n", GW_E_HTTP_PARSE);
}

/* Reads the <len> bytes of <raw> (NUL bytes too) as one feed; the last event. */
static enum net_h1_ev
t_read_n(struct net_h1req *r, const char *raw, size_t len)
{
    size_t used = 0;

    net_h1req_init(r, &t_lim);
    return net_h1req_feed(r, raw, len, &used);
}

static bool
t_is_ctl(unsigned char b)
{
    return (b < 0x20 && b != '\t') || b == 0x7f;
}

/* The value and target scans go sixteen bytes a step: every byte value (but LF, which
 * ends the line) at every position of values and targets of 1 to 34 bytes (two steps
 * and a tail) is taken or refused, with its reason, as the RFC's byte rules say. */
static void
test_h1req_every_byte_at_every_position_of_a_value_and_a_target(void **state)
{
    static const char tail[] = " HTTP/1.1\r\nHost: a\r\n\r\n";
    char raw[256], field[40];
    struct net_h1req r;
    struct gw_str v;
    size_t len, pos, n;
    unsigned b;

    (void)state;
    for (len = 1; len <= 34; len++)
        for (pos = 0; pos < len; pos++)
            for (b = 0; b < 256; b++) {
                if (b == '\n')
                    continue;
                memset(field, 'a', len);
                field[pos] = (char)b;
                /* a header value */
                n = (size_t)snprintf(raw, sizeof(raw), "GET / HTTP/1.1\r\nHost: a\r\nX-A: ");
                memcpy(raw + n, field, len);
                n += len;
                memcpy(raw + n, "\r\n\r\n", 4);
                n += 4;
                if (t_is_ctl((unsigned char)b)) {
                    assert_int_equal(t_read_n(&r, raw, n), NET_H1_ERROR);
                    assert_string_equal(r.why, b == '\r' ? NET_H1_WHY_BARE_CR : NET_H1_WHY_CTL);
                } else {
                    assert_int_equal(t_read_n(&r, raw, n), NET_H1_HEAD);
                    assert_true(net_h1req_header(&r, GW_STR_LIT("x-a"), &v));
                    /* blanks at either end are not the value's */
                    if ((b == ' ' || b == '\t') && (pos == 0 || pos == len - 1))
                        assert_int_equal(v.len, len - 1);
                    else
                        assert_memory_equal(v.ptr, field, len);
                }
                net_h1req_fini(&r);
                /* a request target (a space ends it: not this test's) */
                if (b == ' ')
                    continue;
                n = (size_t)snprintf(raw, sizeof(raw), "GET /");
                memcpy(raw + n, field, len);
                n += len;
                memcpy(raw + n, tail, strlen(tail));
                n += strlen(tail);
                if (t_is_ctl((unsigned char)b) || b == '\t') {
                    assert_int_equal(t_read_n(&r, raw, n), NET_H1_ERROR);
                    assert_string_equal(r.why, b == '\r' ? NET_H1_WHY_BARE_CR : NET_H1_WHY_CTL);
                } else {
                    assert_int_equal(t_read_n(&r, raw, n), NET_H1_HEAD);
                    assert_int_equal(r.url.len, len + 1);
                    assert_memory_equal(r.url.data + 1, field, len);
                }
                net_h1req_fini(&r);
            }
}

static void
test_issue_8_chunk_past_the_limit_is_refused_at_its_size_line(void **state)
{
    (void)state;
    /* no byte of the chunk has come: the size alone refuses it */
    t_refused("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n401\r\n",
              GW_E_BODY_TOO_LARGE);
    /* two chunks that fit alone and not together: refused at the second size line */
    {
        char raw[1024];
        const char *h = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n200\r\n";
        size_t n = strlen(h);

        memcpy(raw, h, n);
        memset(raw + n, 'x', 512);
        memcpy(raw + n + 512, "\r\n300\r\n", 8);
        raw[n + 520] = '\0';
        t_refused(raw, GW_E_BODY_TOO_LARGE);
    }
}

static void
test_issue_8_chunk_size_overflow_is_refused(void **state)
{
    (void)state;
    t_refused("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
              "fffffffffffffffffffff\r\n",
              GW_E_HTTP_PARSE);
}

static void
test_h1req_trailers_are_not_headers(void **state)
{
    struct net_h1req r;
    struct gw_str v;

    (void)state;
    assert_int_equal(t_read(&r, "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                                "3\r\nabc\r\n0\r\nAuthorization: Bearer smuggled\r\n\r\n"),
                     NET_H1_DONE);
    assert_false(net_h1req_header(&r, (struct gw_str){"authorization", 13}, &v));
    assert_int_equal(r.body.len, 3);
    net_h1req_fini(&r);
}

static void
test_h1req_values_lose_trailing_blanks(void **state)
{
    struct net_h1req r;
    struct gw_str v;

    (void)state;
    assert_int_equal(t_read(&r, "GET / HTTP/1.1\r\nHost: a\r\nX-Trace:   two words \t \r\n\r\n"),
                     NET_H1_DONE);
    assert_true(net_h1req_header(&r, (struct gw_str){"x-trace", 7}, &v));
    assert_int_equal(v.len, 9);
    assert_memory_equal(v.ptr, "two words", 9);
    net_h1req_fini(&r);
}

/* Every header is found by its name in any case, and no name the request lacks is
 * found, whichever bit of the names' filter it shares (a second request on the reader
 * starts with an empty filter; headers added for HTTP/2 go in it too). */
static void
test_h1req_header_lookup_by_any_case_and_never_a_missing_name(void **state)
{
    static const char *names[] = {
        "Host", "Authorization", "x-api-key", "X-Goog-Api-Client", "Content-Type", "a",
        "Z9",   "User-Agent"};
    static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
    struct net_h1req r;
    struct gw_str v;
    char raw[1024], name[24];
    size_t n = 0, i, k, len;
    unsigned seed = 7;

    (void)state;
    n += (size_t)snprintf(raw + n, sizeof(raw) - n, "GET / HTTP/1.1\r\n");
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        n += (size_t)snprintf(raw + n, sizeof(raw) - n, "%s: v%zu\r\n", names[i], i);
    snprintf(raw + n, sizeof(raw) - n, "\r\n");
    assert_int_equal(t_read(&r, raw), NET_H1_DONE);
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char want[8];

        len = strlen(names[i]);
        snprintf(want, sizeof(want), "v%zu", i);
        for (k = 0; k < len; k++) /* upper, then lower */
            name[k] =
                (char)(names[i][k] >= 'a' && names[i][k] <= 'z' ? names[i][k] - 32 : names[i][k]);
        assert_true(net_h1req_header(&r, (struct gw_str){name, len}, &v));
        assert_int_equal(v.len, strlen(want));
        assert_memory_equal(v.ptr, want, v.len);
        for (k = 0; k < len; k++)
            name[k] =
                (char)(names[i][k] >= 'A' && names[i][k] <= 'Z' ? names[i][k] + 32 : names[i][k]);
        assert_true(net_h1req_header(&r, (struct gw_str){name, len}, &v));
    }
    for (i = 0; i < 20000; i++) { /* names it lacks: random tokens of 1 to 20 bytes */
        bool known = false;

        len = 1 + (seed = seed * 1103515245u + 12345u) % 20;
        for (k = 0; k < len; k++)
            name[k] = chars[(seed = seed * 1103515245u + 12345u) % (sizeof(chars) - 1)];
        for (k = 0; k < sizeof(names) / sizeof(names[0]); k++)
            known |= strlen(names[k]) == len && strncasecmp(names[k], name, len) == 0;
        if (!known)
            assert_false(net_h1req_header(&r, (struct gw_str){name, len}, &v));
    }
    net_h1req_next(&r); /* the next request starts with an empty filter */
    assert_false(net_h1req_header(&r, GW_STR_LIT("authorization"), &v));
    assert_int_equal(net_h1req_add_header(&r, GW_STR_LIT("x-h2-only"), GW_STR_LIT("yes")), GW_OK);
    assert_true(net_h1req_header(&r, GW_STR_LIT("X-H2-Only"), &v));
    assert_false(net_h1req_header(&r, GW_STR_LIT("host"), &v));
    net_h1req_fini(&r);
}

/* net_h1_value_ctl against the byte rule: a clean prefix of 0 to 20 bytes before the
 * value (what the last step may read), values of 0 to 40 bytes, every byte value at
 * every position (the rest clean), the first bad byte or the end. */
static void
test_h1_value_ctl_every_byte_at_every_position(void **state)
{
    char buf[64];

    (void)state;
    for (size_t pre = 0; pre <= 20; pre++) {
        for (size_t n = 0; n <= 40; n++) {
            const char *p = buf + pre, *end = p + n;

            memset(buf, 'v', sizeof(buf));
            assert_ptr_equal(net_h1_value_ctl(buf, p, end), end);
            for (size_t at = 0; at < n; at++) {
                for (unsigned b = 0; b < 256; b++) {
                    bool bad = (b < 0x20 && b != '\t') || b == 0x7f;

                    buf[pre + at] = (char)b;
                    if (net_h1_value_ctl(buf, p, end) != (bad ? p + at : end))
                        fail_msg("prefix %zu, length %zu, byte 0x%02x at %zu", pre, n, b, at);
                }
                buf[pre + at] = 'v';
            }
        }
    }
}

static void
test_h1req_reads_pipelined_requests_in_turn(void **state)
{
    const char *raw = "POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nxy"
                      "GET /b HTTP/1.1\r\nHost: a\r\n\r\n";
    size_t len = strlen(raw), off = 0, used;
    struct net_h1req r;

    (void)state;
    net_h1req_init(&r, &t_lim);
    assert_int_equal(net_h1req_feed(&r, raw, len, &used), NET_H1_HEAD);
    off += used;
    assert_int_equal(net_h1req_feed(&r, raw + off, len - off, &used), NET_H1_DONE);
    off += used;
    assert_int_equal(r.url.len, 2);
    assert_memory_equal(r.body.data, "xy", 2);
    net_h1req_next(&r);
    assert_int_equal(net_h1req_feed(&r, raw + off, len - off, &used), NET_H1_HEAD);
    off += used;
    assert_memory_equal(r.url.data, "/b", 2);
    assert_false(r.has_body);
    assert_int_equal(net_h1req_feed(&r, raw + off, len - off, &used), NET_H1_DONE);
    assert_int_equal(off + used, len);
    net_h1req_fini(&r);
}

static void
test_h1req_token(void **state)
{
    (void)state;
    assert_true(net_h1_is_token((struct gw_str){"Content-Length", 14}));
    assert_true(net_h1_is_token((struct gw_str){"x-a!#$%&'*+.^_`|~9", 18}));
    assert_false(net_h1_is_token((struct gw_str){"Content-Length ", 15}));
    assert_false(net_h1_is_token((struct gw_str){"a\tb", 3}));
    assert_false(net_h1_is_token((struct gw_str){"a:b", 3}));
    assert_false(net_h1_is_token((struct gw_str){"a\0b", 3}));
    assert_false(net_h1_is_token((struct gw_str){"", 0}));
}

/* Every byte value against RFC 9110's tchar, written out as the RFC says it. */
static void
test_h1req_token_every_byte(void **state)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";

    (void)state;
    for (unsigned c = 0; c < 256; c++) {
        char b = (char)c;
        bool want = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    (c != 0 && memchr(extra, (int)c, sizeof(extra) - 1) != NULL);

        if (net_h1_is_token((struct gw_str){&b, 1}) != want)
            fail_msg("byte 0x%02x: token %d, want %d", c, !want, want);
    }
}

/* Where http-parser's lenient build guessed, this reader refuses, each with its own
 * sentence (net/h1req.h NET_H1_WHY_*). */
static void
t_refused_why(const char *raw, const char *why)
{
    struct net_h1req r;

    assert_int_equal(t_read(&r, raw), NET_H1_ERROR);
    assert_int_equal(r.refuse, GW_E_HTTP_PARSE);
    assert_string_equal(r.why, why);
    net_h1req_fini(&r);
}

static void
test_h1req_cr_without_lf_is_refused(void **state)
{
    (void)state;
    /* http-parser ended the head at a CR and any byte: "\r\r\n" smuggled the next line */
    t_refused_why("GET / HTTP/1.1\r\nHost: a\r\n\rXGET /b HTTP/1.1\r\n\r\n", NET_H1_WHY_BARE_CR);
    t_refused_why("GET / HTTP/1.1\r\nHost: a\r\nX-A:\rXB: c\r\n\r\n", NET_H1_WHY_BARE_CR);
    t_refused_why("GET / HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n", NET_H1_WHY_BARE_CR);
    t_refused_why("GET /\ra HTTP/1.1\r\nHost: a\r\n\r\n", NET_H1_WHY_BARE_CR);
    /* in chunked framing: after the size, after the data */
    t_refused_why("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3\rXabc\r\n0\r\n\r\n",
                  NET_H1_WHY_BARE_CR);
    t_refused_why("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3\r\nabc\rX0\r\n\r\n",
                  NET_H1_WHY_BARE_CR);
    t_refused_why("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3\r\nabcXY0\r\n\r\n",
                  NET_H1_WHY_CHUNK);
    t_refused_why("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "3;x\ny\r\nabc\r\n0\r\n\r\n",
                  NET_H1_WHY_CHUNK);
}

static void
test_h1req_folding_target_and_version_are_strict(void **state)
{
    struct net_h1req r;

    (void)state;
    t_refused_why("GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", NET_H1_WHY_FOLD);
    t_refused_why("GET / HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tc\r\n\r\n", NET_H1_WHY_FOLD);
    t_refused_why("GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n", NET_H1_WHY_CTL);
    t_refused_why("GET / HTTP/1.1\r\nHost: a\r\nX-A: a\001b\r\n\r\n", NET_H1_WHY_CTL);
    t_refused_why("GET http://a/b HTTP/1.1\r\nHost: a\r\n\r\n", NET_H1_WHY_TARGET_FORM);
    t_refused_why("GET / HTXP/1.1\r\nHost: a\r\n\r\n", NET_H1_WHY_VERSION);
    t_refused_why("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", NET_H1_WHY_VERSION);
    t_refused("get / HTTP/1.1\r\nHost: a\r\n\r\n", GW_E_HTTP_PARSE);
    /* what http-parser took, taken: spaces between the parts, bare LF line ends, an
     * empty value, leading blank lines, the methods of its list */
    assert_int_equal(t_read(&r, "\r\n\nM-SEARCH   *  HTTP/1.1\nHost: a\nX-Empty:\n\n"),
                     NET_H1_DONE);
    assert_int_equal(r.method, HTTP_MSEARCH);
    assert_int_equal(r.url.len, 1);
    assert_int_equal(r.n_hdrs, 2);
    net_h1req_fini(&r);
}

static void
test_h1req_content_length_forms(void **state)
{
    struct net_h1req r;

    (void)state;
    assert_int_equal(t_read(&r, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \t 3  \r\n\r\nabc"),
                     NET_H1_DONE);
    assert_int_equal(r.content_length, 3);
    assert_memory_equal(r.body.data, "abc", 3);
    net_h1req_fini(&r);
    t_refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\t\r\n\r\nabc", GW_E_HTTP_PARSE);
    t_refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", GW_E_HTTP_PARSE);
    t_refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3 3\r\n\r\nabc", GW_E_HTTP_PARSE);
    t_refused("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n",
              GW_E_HTTP_PARSE);
}

/* Keep-alive as http-parser decided it: HTTP/1.1 unless a "close" token, HTTP/1.0 only
 * with a "keep-alive" token; Proxy-Connection counts like Connection. */
static void
test_h1req_connection_tokens(void **state)
{
    static const struct {
        const char *raw;
        bool keep_alive;
    } cases[] = {
        {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, CLOSE  \r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\t\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: x,\tclose\r\n\r\n", true},
        /* a failed "upgrade" takes its comma: the close is inside the same token */
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgr,close\r\n\r\n", true},
        {"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade,close\r\n\r\n", false},
        {"GET / HTTP/1.1\r\nHost: a\r\nProxy-Connection: close\r\n\r\n", false},
        {"GET / HTTP/1.0\r\n\r\n", false},
        {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", true},
        {"GET / HTTP/1.0\r\nConnection: foo, keep-alive\r\n\r\n", true},
        {"GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", true},
    };
    unsigned i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct net_h1req r;

        assert_int_equal(t_read(&r, cases[i].raw), NET_H1_DONE);
        if (r.keep_alive != cases[i].keep_alive)
            fail_msg("case %u: keep_alive %d", i, r.keep_alive);
        net_h1req_fini(&r);
    }
}

/* The same request split in two at every byte reads the same: the head is read only
 * once whole, and the head's last byte is left for the feed after it. */
static void
test_h1req_every_split_reads_the_same(void **state)
{
    const char *raw =
        "POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-A:  v \r\n"
        "Transfer-Encoding: chunked\r\n\r\n2;e=1\r\nab\r\n1\r\nc\r\n0\r\nT: x\r\n\r\n";
    size_t len = strlen(raw), cut;

    (void)state;
    for (cut = 0; cut <= len; cut++) {
        struct net_h1req r;
        size_t off = 0, used, end = cut;
        enum net_h1_ev ev = NET_H1_MORE;
        struct gw_str v;

        net_h1req_init(&r, &t_lim);
        while (ev != NET_H1_DONE && off < len) {
            if (off >= end)
                end = len;
            ev = net_h1req_feed(&r, raw + off, end - off, &used);
            off += used;
            assert_int_not_equal(ev, NET_H1_ERROR);
            if (ev == NET_H1_HEAD) {
                assert_true(r.chunked);
                assert_true(net_h1req_header(&r, GW_STR_LIT("x-a"), &v));
                assert_true(gw_str_eq(v, GW_STR_LIT("v")));
            }
        }
        assert_int_equal(ev, NET_H1_DONE);
        assert_int_equal(off, len);
        assert_int_equal(r.body.len, 3);
        assert_memory_equal(r.body.data, "abc", 3);
        assert_int_equal(r.n_hdrs, 3); /* the trailer is not a header */
        net_h1req_fini(&r);
    }
}

static void
test_h1req_head_without_end_is_refused_at_its_byte_limit(void **state)
{
    static char raw[8192];
    static const char head[] = "GET / HTTP/1.1\r\nHost: a\r\nX-A:";
    struct net_h1req r;

    (void)state;
    /* blanks the head's byte count does not see still count against the raw limit */
    memcpy(raw, head, sizeof(head) - 1);
    memset(raw + sizeof(head) - 1, ' ', sizeof(raw) - sizeof(head));
    assert_int_equal(t_read(&r, raw), NET_H1_ERROR);
    assert_int_equal(r.refuse, GW_E_HEADERS_TOO_LARGE);
    assert_string_equal(r.why, NET_H1_WHY_HEAD_LONG);
    net_h1req_fini(&r);
}

/* The caller may point into the head while the body is read (net_pipeline_head keeps
 * header values): trailers, however long, leave the head's bytes where they are. */
static void
test_h1req_trailers_leave_the_head_in_place(void **state)
{
    static char raw[4096];
    const char *head = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    struct net_h1req r;
    size_t n = strlen(head), off = 0, used, len;
    const char *data;
    struct gw_str host;
    unsigned i;

    (void)state;
    memcpy(raw, head, n);
    len = n;
    len += (size_t)snprintf(raw + len, sizeof(raw) - len, "1\r\nx\r\n0\r\n");
    for (i = 0; i < 20; i++)
        len += (size_t)snprintf(raw + len, sizeof(raw) - len, "T%u: %090u\r\n", i, i);
    len += (size_t)snprintf(raw + len, sizeof(raw) - len, "\r\n");
    net_h1req_init(&r, &t_lim);
    assert_int_equal(net_h1req_feed(&r, raw, len, &used), NET_H1_HEAD);
    off = used;
    assert_true(net_h1req_header(&r, GW_STR_LIT("host"), &host));
    data = r.hbuf.data;
    n = r.hbuf.len;
    while (off < len) { /* in small pieces, so trailer lines wait in between */
        size_t piece = len - off < 7 ? len - off : 7;
        enum net_h1_ev ev = net_h1req_feed(&r, raw + off, piece, &used);

        off += used;
        if (ev == NET_H1_DONE)
            break;
        assert_int_equal(ev, NET_H1_MORE);
    }
    assert_int_equal(off, len);
    assert_ptr_equal(r.hbuf.data, data);
    assert_int_equal(r.hbuf.len, n);
    assert_memory_equal(host.ptr, "a", 1);
    net_h1req_fini(&r);
}

/* Another protocol on the port (a TLS hello: no LF in sight) is refused at its first
 * bytes, not at the head's timeout; a method still coming is waited for. */
static void
test_h1req_a_bad_method_is_refused_before_the_line_ends(void **state)
{
    static const char hello[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    struct net_h1req r;
    size_t used;

    (void)state;
    net_h1req_init(&r, &t_lim);
    assert_int_equal(net_h1req_feed(&r, hello, sizeof(hello) - 1, &used), NET_H1_ERROR);
    assert_int_equal(r.refuse, GW_E_HTTP_PARSE);
    net_h1req_fini(&r);
    net_h1req_init(&r, &t_lim);
    assert_int_equal(net_h1req_feed(&r, "M-SEAR", 6, &used), NET_H1_MORE);
    assert_int_equal(net_h1req_feed(&r, "CH / HT", 7, &used), NET_H1_MORE);
    assert_int_equal(net_h1req_feed(&r, "TP/1.1\r\nHost: a\r\n\r", 18, &used), NET_H1_MORE);
    assert_int_equal(net_h1req_feed(&r, "\n", 1, &used), NET_H1_HEAD);
    assert_int_equal(r.method, HTTP_MSEARCH);
    net_h1req_fini(&r);
    net_h1req_init(&r, &t_lim);
    assert_int_equal(net_h1req_feed(&r, "POSTPOSTPOSTPOST", 16, &used), NET_H1_ERROR);
    net_h1req_fini(&r);
    net_h1req_init(&r, &t_lim);
    assert_int_equal(net_h1req_feed(&r, "Get / HTTP/1.1", 14, &used), NET_H1_ERROR);
    net_h1req_fini(&r);
}

/* HTTP/2 builds its requests header by header (net/http2.c): the same limits hold. */
static void
test_h1req_add_header_keeps_the_limits(void **state)
{
    struct net_h1req r;
    struct gw_str v;
    char name[16];
    unsigned i;

    (void)state;
    net_h1req_init(&r, &t_lim);
    assert_int_equal(net_h1req_add_header(&r, GW_STR_LIT("authorization"), GW_STR_LIT("Bearer k")),
                     GW_OK);
    assert_true(net_h1req_header(&r, GW_STR_LIT("Authorization"), &v));
    assert_true(gw_str_eq(v, GW_STR_LIT("Bearer k")));
    for (i = 1; i < t_lim.max_headers; i++) {
        snprintf(name, sizeof(name), "x-h%u", i);
        assert_int_equal(net_h1req_add_header(&r, gw_str_c(name), GW_STR_LIT("v")), GW_OK);
    }
    assert_int_equal(r.n_hdrs, t_lim.max_headers);
    assert_int_equal(net_h1req_add_header(&r, GW_STR_LIT("x-one-more"), GW_STR_LIT("v")),
                     GW_E_HEADERS_TOO_LARGE);
    net_h1req_fini(&r);

    /* bytes: max_header_bytes counts names, values and 4 bytes a header */
    net_h1req_init(&r, &t_lim);
    {
        static char big[4000];

        memset(big, 'a', sizeof(big));
        assert_int_equal(
            net_h1req_add_header(&r, GW_STR_LIT("x-big"), (struct gw_str){big, sizeof(big)}),
            GW_OK);
        assert_int_equal(net_h1req_add_header(&r, GW_STR_LIT("x-more"), (struct gw_str){big, 100}),
                         GW_E_HEADERS_TOO_LARGE);
    }
    net_h1req_fini(&r);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_h1req_stops_at_the_head_before_the_body),
        cmocka_unit_test(test_issue_8_space_before_colon_is_refused),
        cmocka_unit_test(test_issue_8_transfer_encoding_ambiguities_are_refused),
        cmocka_unit_test(test_issue_8_host_rules),
        cmocka_unit_test(test_h1req_only_http10_and_http11),
        cmocka_unit_test(test_h1req_upgrade_is_answered_as_http11_and_connect_refused),
        cmocka_unit_test(test_issue_8_control_bytes_in_values_are_refused),
        cmocka_unit_test(test_h1req_every_byte_at_every_position_of_a_value_and_a_target),
        cmocka_unit_test(test_issue_8_chunk_past_the_limit_is_refused_at_its_size_line),
        cmocka_unit_test(test_issue_8_chunk_size_overflow_is_refused),
        cmocka_unit_test(test_h1req_trailers_are_not_headers),
        cmocka_unit_test(test_h1req_trailers_leave_the_head_in_place),
        cmocka_unit_test(test_h1req_a_bad_method_is_refused_before_the_line_ends),
        cmocka_unit_test(test_h1req_values_lose_trailing_blanks),
        cmocka_unit_test(test_h1_value_ctl_every_byte_at_every_position),
        cmocka_unit_test(test_h1req_header_lookup_by_any_case_and_never_a_missing_name),
        cmocka_unit_test(test_h1req_reads_pipelined_requests_in_turn),
        cmocka_unit_test(test_h1req_token),
        cmocka_unit_test(test_h1req_token_every_byte),
        cmocka_unit_test(test_h1req_add_header_keeps_the_limits),
        cmocka_unit_test(test_h1req_cr_without_lf_is_refused),
        cmocka_unit_test(test_h1req_folding_target_and_version_are_strict),
        cmocka_unit_test(test_h1req_content_length_forms),
        cmocka_unit_test(test_h1req_connection_tokens),
        cmocka_unit_test(test_h1req_every_split_reads_the_same),
        cmocka_unit_test(test_h1req_head_without_end_is_refused_at_its_byte_limit),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
