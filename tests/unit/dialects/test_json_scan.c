/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_json_scan.c - the JSON scanner's fast paths against its own
 * full paths and against jansson: strings of every length around the 8- and 16-byte
 * blocks with a quote, a backslash, a control byte or UTF-8 at each position, with the
 * document ending right after the string (the last block) or going on; UTF-8 split at
 * a block boundary; numbers on both sides of the fast path; object members with
 * whitespace, escaped keys and errors; skips of scalars and containers; the depth limit.
 * Every document is copied to a buffer of its exact size, so a read past the end is an
 * ASan error in the asan build.
 * See: dialects/json_scan.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "dialects/json_scan.h"

#define T_LEN(s) (sizeof(s) - 1)

/* A string token's result, or its error. */
struct t_str {
    bool ok;
    struct dl_json_str str;
    size_t next; /* j.i after the call */
    enum dl_json_err err;
    size_t err_at;
};

/* dl_json_string on a copy of <doc> (<n> bytes, exactly) at offset <at>. */
static struct t_str
t_string(const char *doc, size_t n, size_t at)
{
    char *p = malloc(n ? n : 1);
    struct t_str r = {0};
    struct dl_json j;

    assert_non_null(p);
    memcpy(p, doc, n);
    dl_json_init(&j, p, n);
    j.i = at;
    r.ok = dl_json_string(&j, &r.str);
    r.next = j.i;
    r.err = j.err;
    r.err_at = j.err_at;
    free(p);
    return r;
}

/* <body> (the bytes between the quotes) as a string token twice: ending the document,
 * and followed by 40 more bytes (so that every block of it is a full one): both results
 * must agree, offsets aside. Returns the first. */
static struct t_str
t_string_both(const char *body, size_t len)
{
    char doc[256];
    struct t_str a, b;

    assert_true(len + 43 <= sizeof(doc));
    doc[0] = '"';
    memcpy(doc + 1, body, len);
    doc[len + 1] = '"';
    memset(doc + len + 2, ' ', 40);
    doc[len + 42] = ']';
    a = t_string(doc, len + 2, 0);
    b = t_string(doc, len + 43, 0);
    assert_int_equal(a.ok, b.ok);
    assert_int_equal(a.err, b.err);
    if (a.ok) {
        assert_int_equal(a.str.start, b.str.start);
        assert_int_equal(a.str.end, b.str.end);
        assert_int_equal(a.str.dlen, b.str.dlen);
        assert_int_equal(a.str.jlen, b.str.jlen);
        assert_int_equal(a.str.escaped, b.str.escaped);
        assert_int_equal(a.str.nul, b.str.nul);
        assert_int_equal(a.next, b.next);
    } else if (a.err_at < len + 2) {
        /* an error inside the string is where it is, whatever follows; an unterminated
         * string fails at the end of each document */
        assert_int_equal(a.err_at, b.err_at);
    }
    return a;
}

/* jansson's reading of the string token <body>: valid or not, and when valid its decoded
 * length and the bytes its compact dump writes (quotes excluded). */
static bool
t_jansson_string(const char *body, size_t len, size_t *dlen, size_t *jlen)
{
    char doc[256];
    json_error_t e;
    json_t *v;

    doc[0] = '[';
    doc[1] = '"';
    memcpy(doc + 2, body, len);
    doc[len + 2] = '"';
    doc[len + 3] = ']';
    v = json_loadb(doc, len + 4, JSON_ALLOW_NUL, &e);
    if (!v)
        return false;
    *dlen = json_string_length(json_array_get(v, 0));
    *jlen = json_dumpb(json_array_get(v, 0), NULL, 0, JSON_ENCODE_ANY | JSON_COMPACT) - 2;
    json_decref(v);
    return true;
}

static void
test_json_string_plain_every_length(void **state)
{
    char body[80];
    size_t len;

    (void)state;
    for (len = 0; len < sizeof(body); len++) {
        struct t_str r;

        memset(body, 'a' + (char)(len % 26), len);
        r = t_string_both(body, len);
        assert_true(r.ok);
        assert_int_equal(r.str.start, 1);
        assert_int_equal(r.str.end, len + 1);
        assert_int_equal(r.str.dlen, len);
        assert_int_equal(r.str.jlen, len);
        assert_false(r.str.escaped);
        assert_false(r.str.nul);
        assert_int_equal(r.next, len + 2);
    }
}

/* What may stand at one position of a string, and where it fails when it does (the
 * offset of the byte reported, from the piece's first byte; -1 when valid). */
static const struct {
    const char *bytes;
    int fails_at;
} t_pieces[] = {
    {"\\n", -1},
    {"\\\"", -1},
    {"\\\\", -1},
    {"\\/", -1},
    {"\\u0041", -1},
    {"\\u00e9", -1},
    {"\\u20ac", -1},
    {"\\u0000", -1},
    {"\\u001f", -1},
    {"\\ud83d\\ude00", -1},
    {"\x7f", -1},
    {"\xc3\xa9", -1},
    {"\xe2\x82\xac", -1},
    {"\xf0\x9f\x98\x80", -1},
    {"\x01", 0},
    {"\x1f", 0},
    {"\t", 0},
    {"\n", 0},
    {"\\x", 1},
    {"\\u12g4", 0},
    {"\\ud83d", 0},
    {"\\ude00", 0},
    {"\\ud83d\\u0041", 0},
    {"\xc3", 0},
    {"\xe2\x82", 0},
    {"\xff", 0},
    {"\xc0\x80", 0},
    {"\xed\xa0\x80", 0},
    {"\xf4\x90\x80\x80", 0},
};

static void
test_json_string_special_at_each_position(void **state)
{
    static const size_t lens[] = {0, 1, 6, 7, 8, 9, 14, 15, 16, 17, 23, 24, 31, 32, 33, 40};
    size_t p, l, k;

    (void)state;
    for (p = 0; p < sizeof(t_pieces) / sizeof(t_pieces[0]); p++)
        for (l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
            for (k = 0; k <= lens[l]; k++) {
                const char *piece = t_pieces[p].bytes;
                size_t pl = strlen(piece), len = 0, dlen, jlen;
                char body[80];
                struct t_str r;
                bool jok;

                memset(body, 'x', k);
                len = k;
                memcpy(body + len, piece, pl);
                len += pl;
                memset(body + len, 'y', lens[l] - k);
                len += lens[l] - k;
                r = t_string_both(body, len);
                jok = t_jansson_string(body, len, &dlen, &jlen);
                assert_int_equal(r.ok, jok);
                if (t_pieces[p].fails_at < 0) {
                    assert_true(r.ok);
                    assert_int_equal(r.str.end, len + 1);
                    assert_int_equal(r.str.dlen, dlen);
                    assert_int_equal(r.str.jlen, jlen);
                    assert_int_equal(r.str.escaped, piece[0] == '\\');
                    assert_int_equal(r.str.nul, strcmp(piece, "\\u0000") == 0);
                } else {
                    assert_false(r.ok);
                    assert_int_equal(r.err, DL_JSON_E_SYNTAX);
                    assert_int_equal(r.err_at, 1 + k + (size_t)t_pieces[p].fails_at);
                }
            }
}

/* A quote at each position ends the string there; the rest is the document's. */
static void
test_json_string_quote_at_each_position(void **state)
{
    char body[40];
    size_t len, k;

    (void)state;
    for (len = 1; len < sizeof(body); len++)
        for (k = 0; k < len; k++) {
            struct t_str r;

            memset(body, 'q', len);
            body[k] = '"';
            r = t_string_both(body, len);
            assert_true(r.ok);
            assert_int_equal(r.str.end, 1 + k);
            assert_int_equal(r.str.dlen, k);
            assert_int_equal(r.next, 2 + k);
        }
}

/* Multi-byte characters straddling every offset up to 40 (and so the 8- and 16-byte
 * block boundaries) are one character each, valid; cut at the end of the document, the
 * string is unterminated (the error at the end) or the sequence bad (at its lead byte). */
static void
test_json_string_utf8_split_at_block_boundaries(void **state)
{
    static const char *const chars[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"};
    size_t c, k;

    (void)state;
    for (c = 0; c < 3; c++)
        for (k = 0; k < 40; k++) {
            size_t cl = strlen(chars[c]), cut;
            char doc[64];
            struct t_str r;

            doc[0] = '"';
            memset(doc + 1, 'u', k);
            memcpy(doc + 1 + k, chars[c], cl);
            doc[1 + k + cl] = '"';
            r = t_string(doc, k + cl + 2, 0);
            assert_true(r.ok);
            assert_int_equal(r.str.dlen, k + cl);
            assert_false(r.str.escaped);
            for (cut = 1; cut < cl; cut++) {
                r = t_string(doc, 1 + k + cut, 0); /* ends inside the character */
                assert_false(r.ok);
                assert_int_equal(r.err, DL_JSON_E_SYNTAX);
                assert_int_equal(r.err_at, 1 + k);
            }
        }
}

static void
test_json_string_unterminated_fails_at_the_end(void **state)
{
    char doc[48];
    size_t len;

    (void)state;
    for (len = 0; len + 1 < sizeof(doc); len++) {
        struct t_str r;

        doc[0] = '"';
        memset(doc + 1, 'z', len);
        r = t_string(doc, len + 1, 0);
        assert_false(r.ok);
        assert_int_equal(r.err, DL_JSON_E_SYNTAX);
        assert_int_equal(r.err_at, len + 1);
        if (len) { /* a backslash last: the escape is cut */
            doc[len] = '\\';
            r = t_string(doc, len + 1, 0);
            assert_false(r.ok);
            assert_int_equal(r.err_at, len + 1);
        }
    }
}

/* ---- numbers ---- */

static void
t_number(const char *doc, bool ok, size_t end, bool real, enum dl_json_err err, size_t err_at)
{
    size_t n = strlen(doc);
    char *p = malloc(n);
    struct dl_json_num num;
    struct dl_json j;

    assert_non_null(p);
    memcpy(p, doc, n);
    dl_json_init(&j, p, n);
    assert_int_equal(dl_json_number(&j, &num), ok);
    if (ok) {
        assert_int_equal(num.start, 0);
        assert_int_equal(num.end, end);
        assert_int_equal(num.real, real);
        assert_int_equal(j.i, end);
    } else {
        assert_int_equal(j.err, err);
        assert_int_equal(j.err_at, err_at);
    }
    free(p);
}

static void
test_json_number_fast_and_full_paths(void **state)
{
    (void)state;
    /* integers, up to the fast path's 18 digits and past it */
    t_number("0", true, 1, false, 0, 0);
    t_number("0,", true, 1, false, 0, 0);
    t_number("-0}", true, 2, false, 0, 0);
    t_number("7]", true, 1, false, 0, 0);
    t_number("123456789012345678 ", true, 18, false, 0, 0);
    t_number("-123456789012345678", true, 19, false, 0, 0);
    t_number("1234567890123456789", true, 19, false, 0, 0);
    t_number("9223372036854775807", true, 19, false, 0, 0);
    t_number("-9223372036854775808", true, 20, false, 0, 0);
    t_number("9223372036854775808", false, 0, false, DL_JSON_E_RANGE, 19);
    t_number("-9223372036854775809,", false, 0, false, DL_JSON_E_RANGE, 20);
    t_number("12345678901234567890", false, 0, false, DL_JSON_E_RANGE, 20);
    /* reals: fractions of every length around the 8-byte blocks, exponents */
    t_number("1.5", true, 3, true, 0, 0);
    t_number("-0.12345678", true, 11, true, 0, 0);
    t_number("-0.123456789,", true, 12, true, 0, 0);
    t_number("-0.7410412392093212}", true, 19, true, 0, 0);
    t_number("0.12345678901234567", true, 19, true, 0, 0);
    t_number("123456789012345678.5", true, 20, true, 0, 0);
    t_number("1234567890123456789.5", true, 21, true, 0, 0);
    t_number("1e5", true, 3, true, 0, 0);
    t_number("1.5E-3,", true, 6, true, 0, 0);
    t_number("0.5e+10", true, 7, true, 0, 0);
    t_number("1e400", false, 0, false, DL_JSON_E_RANGE, 5);
    t_number("-1.5e308", true, 8, true, 0, 0);
    /* the grammar's errors, where they are */
    t_number("01", false, 0, false, DL_JSON_E_SYNTAX, 1);
    t_number("-01", false, 0, false, DL_JSON_E_SYNTAX, 2);
    t_number("-", false, 0, false, DL_JSON_E_SYNTAX, 1);
    t_number("-a", false, 0, false, DL_JSON_E_SYNTAX, 1);
    t_number("1.", false, 0, false, DL_JSON_E_SYNTAX, 2);
    t_number("1.x", false, 0, false, DL_JSON_E_SYNTAX, 2);
    t_number("1.5.", true, 3, true, 0, 0); /* the '.' is the container's to refuse */
    t_number("1e", false, 0, false, DL_JSON_E_SYNTAX, 2);
    t_number("1e+", false, 0, false, DL_JSON_E_SYNTAX, 3);
    /* the byte after a number: a bad UTF-8 sequence is the error, a good one is not */
    t_number("12\xff", false, 0, false, DL_JSON_E_SYNTAX, 2);
    t_number("0.25\xc3", false, 0, false, DL_JSON_E_SYNTAX, 4);
    t_number("12\xc3\xa9", true, 2, false, 0, 0);
    t_number("12x", true, 2, false, 0, 0);
}

/* ---- members and skips ---- */

/* The keys of the one object <doc>, joined by '|' into <out>, and the result of the last
 * dl_json_obj_next (0 closed, -1 an error at *<err_at>). Values are skipped. */
static int
t_members(const char *doc, char *out, size_t cap, size_t *err_at)
{
    size_t n = strlen(doc), o = 0;
    char *p = malloc(n);
    struct dl_json_str k;
    bool first = true;
    struct dl_json j;
    int rc;

    assert_non_null(p);
    memcpy(p, doc, n);
    dl_json_init(&j, p, n);
    assert_int_equal(dl_json_peek(&j), '{');
    assert_true(dl_json_obj_enter(&j));
    out[0] = '\0';
    while ((rc = dl_json_obj_next(&j, &first, &k)) > 0) {
        char key[64];

        assert_true(k.dlen < sizeof(key));
        dl_json_decode(&j, &k, key);
        o += (size_t)snprintf(out + o, cap - o, "%s%.*s", o ? "|" : "", (int)k.dlen, key);
        /* the cursor is on the value, whitespace skipped */
        assert_true(j.i < n && p[j.i] != ' ' && p[j.i] != '\n');
        if (!dl_json_skip(&j, NULL)) {
            rc = -1;
            break;
        }
    }
    if (rc == 0) {
        assert_int_equal(p[j.i - 1], '}');
        assert_int_equal(j.depth, 0);
    }
    *err_at = j.err_at;
    free(p);
    return rc;
}

static void
test_json_obj_next_members_and_errors(void **state)
{
    char keys[256];
    size_t at;

    (void)state;
    assert_int_equal(t_members("{}", keys, sizeof(keys), &at), 0);
    assert_string_equal(keys, "");
    assert_int_equal(t_members("{\"a\":1,\"bb\":\"x\",\"ccc\":[1,{\"d\":null}],\"e\":true}", keys,
                               sizeof(keys), &at),
                     0);
    assert_string_equal(keys, "a|bb|ccc|e");
    assert_int_equal(t_members(" { \"a\" :\t1 ,\n\"b\"\r\n:  false  } ", keys, sizeof(keys), &at),
                     0);
    assert_string_equal(keys, "a|b");
    /* keys that are not plain ASCII: escapes, UTF-8, one ending the last block */
    assert_int_equal(t_members("{\"m\\u006fdel\":1,\"caf\xc3\xa9\":2,\"a\\\"b\":3,"
                               "\"a_key_of_twenty_bytes\":4}",
                               keys, sizeof(keys), &at),
                     0);
    assert_string_equal(keys, "model|caf\xc3\xa9|a\"b|a_key_of_twenty_bytes");
    assert_int_equal(t_members("{\"k\":0,\"tail_key\":1}", keys, sizeof(keys), &at), 0);
    assert_string_equal(keys, "k|tail_key");
    /* errors, where they are */
    assert_int_equal(t_members("{\"a\\u0000b\":1}", keys, sizeof(keys), &at), -1);
    assert_int_equal(at, 2); /* a NUL in a key: at the key's first byte */
    assert_int_equal(t_members("{\"a\" 1}", keys, sizeof(keys), &at), -1);
    assert_int_equal(at, 5);
    assert_int_equal(t_members("{\"a\":1,}", keys, sizeof(keys), &at), -1);
    assert_int_equal(at, 7);
    assert_int_equal(t_members("{\"a\":1 \"b\":2}", keys, sizeof(keys), &at), -1);
    assert_int_equal(at, 7);
    assert_int_equal(t_members("{,\"a\":1}", keys, sizeof(keys), &at), -1);
    assert_int_equal(at, 1);
    assert_int_equal(t_members("{\"a\":1", keys, sizeof(keys), &at), -1);
    assert_int_equal(at, 6);
    assert_int_equal(t_members("{\"a\"", keys, sizeof(keys), &at), -1);
    assert_int_equal(at, 4);
    assert_int_equal(t_members("{\"abc", keys, sizeof(keys), &at), -1);
    assert_int_equal(at, 5);
    /* a number where a key was expected is lexed first: its range error wins */
    assert_int_equal(t_members("{\"a\":1,99999999999999999999}", keys, sizeof(keys), &at), -1);
    assert_int_equal(at, 27);
}

/* dl_json_skip of the whole <doc> (a copy of its exact size) agrees with jansson, and
 * its compact count with jansson's dump when there are no duplicate keys. */
static void
t_skip_vs_jansson(const char *doc)
{
    size_t n = strlen(doc), compact = 0;
    char *p = malloc(n);
    json_error_t e;
    struct dl_json j;
    json_t *v;
    bool ok;

    assert_non_null(p);
    memcpy(p, doc, n);
    dl_json_init(&j, p, n);
    (void)dl_json_peek(&j);
    ok = dl_json_skip(&j, &compact) && dl_json_end(&j);
    v = json_loadb(p, n, JSON_ALLOW_NUL | JSON_DECODE_ANY, &e);
    assert_int_equal(ok, v != NULL);
    if (v) {
        assert_int_equal(compact, json_dumpb(v, NULL, 0, JSON_ENCODE_ANY | JSON_COMPACT));
        json_decref(v);
    }
    dl_json_init(&j, p, n); /* and without the count */
    (void)dl_json_peek(&j);
    assert_int_equal(dl_json_skip(&j, NULL) && dl_json_end(&j), ok);
    free(p);
}

static void
test_json_skip_agrees_with_jansson(void **state)
{
    static const char *const docs[] = {
        "\"plain\"",
        "\"esc\\n\\u00e9\"",
        "-0.7410412392093212",
        "12",
        "true",
        "false",
        "null",
        "nul",
        "tru",
        "[]",
        "{}",
        "[1,-2.5,\"a\",true,false,null,{},[]]",
        "{\"a\":{\"b\":[{\"c\":\"d\"},{\"e\":[1,2,3]}]},\"f\":\"g\\\"h\"}",
        "{\"logprobs\":{\"content\":[{\"token\":\" The\",\"logprob\":-0.0001234567891,"
        "\"bytes\":[32,84,104,101],\"top_logprobs\":[]}]}}",
        " [ 1 , { \"a\" : [ ] } ] ",
        "[1,]",
        "[1 2]",
        "{\"a\":1,}",
        "{\"a\"}",
        "[\"unterminated]",
        "[1.]",
        "[01]",
        "[1e400]",
        "[99999999999999999999]",
        "{\"k\\u0000\":1}",
        "[\"\\u0000\"]",
        "[\"\xff\"]",
        "[1]x",
        "{\"a\":[1,2}",
    };
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(docs) / sizeof(docs[0]); k++)
        t_skip_vs_jansson(docs[k]);
}

/* jansson's limit: DL_JSON_MAX_DEPTH containers nest; a scalar counts as a level. */
static void
test_json_skip_depth_limit(void **state)
{
    size_t depth, n, k;
    char *doc;

    (void)state;
    for (depth = DL_JSON_MAX_DEPTH - 1; depth <= DL_JSON_MAX_DEPTH; depth++) {
        struct dl_json j;

        n = 2 * depth + 1;
        doc = malloc(n);
        assert_non_null(doc);
        for (k = 0; k < depth; k++) {
            doc[k] = '[';
            doc[n - 1 - k] = ']';
        }
        doc[depth] = '7';
        dl_json_init(&j, doc, n);
        if (depth < DL_JSON_MAX_DEPTH) {
            assert_true(dl_json_skip(&j, NULL));
            assert_int_equal(j.i, n);
        } else {
            assert_false(dl_json_skip(&j, NULL));
            assert_int_equal(j.err, DL_JSON_E_DEPTH);
            assert_int_equal(j.err_at, depth + 1); /* past the scalar, once lexed */
        }
        free(doc);
    }
    {
        /* at the limit already: a scalar is too deep once it lexes, a bad one is bad */
        struct dl_json j;

        dl_json_init(&j, "\"s\"", 3);
        j.depth = DL_JSON_MAX_DEPTH;
        assert_false(dl_json_skip(&j, NULL));
        assert_int_equal(j.err, DL_JSON_E_DEPTH);
        assert_int_equal(j.err_at, 3);
        dl_json_init(&j, "\"s", 2);
        j.depth = DL_JSON_MAX_DEPTH;
        assert_false(dl_json_skip(&j, NULL));
        assert_int_equal(j.err, DL_JSON_E_SYNTAX);
        dl_json_init(&j, "[", 1);
        j.depth = DL_JSON_MAX_DEPTH;
        assert_false(dl_json_skip(&j, NULL));
        assert_int_equal(j.err, DL_JSON_E_DEPTH);
        assert_int_equal(j.err_at, 0);
    }
}

/* The error of <token> as a value where DL_JSON_MAX_DEPTH containers are open (the
 * innermost an object when <in_obj>, an array else): ours, and jansson's by its code. */
static void
t_at_depth_limit(const char *token, bool in_obj)
{
    size_t k, n = DL_JSON_MAX_DEPTH - 1, tl = strlen(token);
    char *doc = malloc(n + 5 + tl);
    enum dl_json_err want;
    json_error_t e;
    struct dl_json j;

    assert_non_null(doc);
    for (k = 0; k < n; k++)
        doc[k] = '[';
    if (in_obj) {
        memcpy(doc + n, "{\"k\":", 5);
        n += 5;
    } else {
        doc[n++] = '[';
    }
    memcpy(doc + n, token, tl);
    n += tl;
    assert_null(json_loadb(doc, n, JSON_ALLOW_NUL, &e));
    want = json_error_code(&e) == json_error_stack_overflow     ? DL_JSON_E_DEPTH
           : json_error_code(&e) == json_error_numeric_overflow ? DL_JSON_E_RANGE
                                                                : DL_JSON_E_SYNTAX;
    dl_json_init(&j, doc, n);
    (void)dl_json_peek(&j);
    assert_false(dl_json_skip(&j, NULL));
    if (j.err != want)
        fail_msg("%s token \"%s\": ours %d, jansson's %d (%s)", in_obj ? "object" : "array", token,
                 (int)j.err, (int)want, e.text);
    free(doc);
}

/* jansson lexes a token before it judges the depth: only its lexer's errors come first
 * (bytes that are not UTF-8, bad strings, numbers out of range); an invalid token is too
 * deep, and so is the end, except in an array. */
static void
test_json_skip_at_depth_limit_errs_as_jansson(void **state)
{
    static const char *const tokens[] = {
        "1",        "1,",      "-0.5",     "1e5",      "-",      "-x",
        "01",       "1.",      "1.x",      "1e",       "1e+",    "99999999999999999999",
        "1e400",    "1\xff",   "-\xff",    "1.\xff",   "1e\xff", "\"s\"",
        "\"s",      "\"\\x\"", "\"\x01\"", "\"\xff\"", "true",   "true]",
        "true\xff", "tru",     "trux",     "nul",      "x",      "X\xc3",
        ",",        "}",       "]",        ":",        "#",      "\x01",
        "\xc3\xa9", "\xff",    "\xc3",     "",         " ",      "{",
        "[",
    };
    size_t k;

    (void)state;
    for (k = 0; k < sizeof(tokens) / sizeof(tokens[0]); k++) {
        t_at_depth_limit(tokens[k], false);
        t_at_depth_limit(tokens[k], true);
    }
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_string_plain_every_length),
        cmocka_unit_test(test_json_string_special_at_each_position),
        cmocka_unit_test(test_json_string_quote_at_each_position),
        cmocka_unit_test(test_json_string_utf8_split_at_block_boundaries),
        cmocka_unit_test(test_json_string_unterminated_fails_at_the_end),
        cmocka_unit_test(test_json_number_fast_and_full_paths),
        cmocka_unit_test(test_json_obj_next_members_and_errors),
        cmocka_unit_test(test_json_skip_agrees_with_jansson),
        cmocka_unit_test(test_json_skip_depth_limit),
        cmocka_unit_test(test_json_skip_at_depth_limit_errs_as_jansson),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
