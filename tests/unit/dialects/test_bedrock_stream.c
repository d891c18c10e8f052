/* SPDX-License-Identifier: MIT
 * tests/unit/dialects/test_bedrock_stream.c - the eventstream decoder and encoder
 * (dialects/bedrock_stream.c) on AWS's eventstream test vectors (aws-sdk-js-v3
 * packages/eventstream-codec/src/TestVectors.fixture.ts: all_headers, empty_message,
 * int32_header, payload_no_headers, payload_one_str_header decode to their headers and
 * body; corrupted_headers, corrupted_header_len, corrupted_length, corrupted_payload are
 * refused): each cut at every byte and fed a byte a read, all of them in one feed, and
 * re-encoded byte for byte. Then what the decoder refuses (a bad prelude or message
 * CRC, a total under 16, headers past the total, a total over the maximum before its
 * bytes come, an unknown value type, a header past its block, a 17th header) and that a
 * refusal sticks; a receiver that stops; partial() at the end; what
 * dl_bedrock_es_event hands the shape; running out of memory.
 * See: dialects/bedrock_stream.c, dialects/bedrock.h, tests/fuzz/fuzz_bedrock_es.c
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <zlib.h>

#include "core/alloc.h"
#include "core/str.h"
#include "dialects/bedrock.h"

/* aws-sdk-js-v3 packages/eventstream-codec/src/TestVectors.fixture.ts, "encoded". */
static const unsigned char t_all_headers[] = {
    0x00, 0x00, 0x00, 0xcc, 0x00, 0x00, 0x00, 0xaf, 0x0f, 0xae, 0x64, 0xca, 0x0a, 0x65, 0x76, 0x65,
    0x6e, 0x74, 0x2d, 0x74, 0x79, 0x70, 0x65, 0x04, 0x00, 0x00, 0xa0, 0x0c, 0x0c, 0x63, 0x6f, 0x6e,
    0x74, 0x65, 0x6e, 0x74, 0x2d, 0x74, 0x79, 0x70, 0x65, 0x07, 0x00, 0x10, 0x61, 0x70, 0x70, 0x6c,
    0x69, 0x63, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x2f, 0x6a, 0x73, 0x6f, 0x6e, 0x0a, 0x62, 0x6f, 0x6f,
    0x6c, 0x20, 0x66, 0x61, 0x6c, 0x73, 0x65, 0x01, 0x09, 0x62, 0x6f, 0x6f, 0x6c, 0x20, 0x74, 0x72,
    0x75, 0x65, 0x00, 0x04, 0x62, 0x79, 0x74, 0x65, 0x02, 0xcf, 0x08, 0x62, 0x79, 0x74, 0x65, 0x20,
    0x62, 0x75, 0x66, 0x06, 0x00, 0x14, 0x49, 0x27, 0x6d, 0x20, 0x61, 0x20, 0x6c, 0x69, 0x74, 0x74,
    0x6c, 0x65, 0x20, 0x74, 0x65, 0x61, 0x70, 0x6f, 0x74, 0x21, 0x09, 0x74, 0x69, 0x6d, 0x65, 0x73,
    0x74, 0x61, 0x6d, 0x70, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x84, 0x5f, 0xed, 0x05, 0x69, 0x6e,
    0x74, 0x31, 0x36, 0x03, 0x00, 0x2a, 0x05, 0x69, 0x6e, 0x74, 0x36, 0x34, 0x05, 0x00, 0x00, 0x00,
    0x00, 0x02, 0x87, 0x57, 0xb2, 0x04, 0x75, 0x75, 0x69, 0x64, 0x09, 0x01, 0x02, 0x03, 0x04, 0x05,
    0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0x10, 0x7b, 0x27, 0x66, 0x6f, 0x6f,
    0x27, 0x3a, 0x27, 0x62, 0x61, 0x72, 0x27, 0x7d, 0xab, 0xa5, 0xf1, 0x0c,
};
static const unsigned char t_empty_message[] = {
    0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x05, 0xc2, 0x48, 0xeb, 0x7d, 0x98, 0xc8, 0xff,
};
static const unsigned char t_int32_header[] = {
    0x00, 0x00, 0x00, 0x2d, 0x00, 0x00, 0x00, 0x10, 0x41, 0xc4, 0x24, 0xb8, 0x0a, 0x65, 0x76,
    0x65, 0x6e, 0x74, 0x2d, 0x74, 0x79, 0x70, 0x65, 0x04, 0x00, 0x00, 0xa0, 0x0c, 0x7b, 0x27,
    0x66, 0x6f, 0x6f, 0x27, 0x3a, 0x27, 0x62, 0x61, 0x72, 0x27, 0x7d, 0x36, 0xf4, 0x80, 0xa0,
};
static const unsigned char t_payload_no_headers[] = {
    0x00, 0x00, 0x00, 0x1d, 0x00, 0x00, 0x00, 0x00, 0xfd, 0x52, 0x8c, 0x5a, 0x7b, 0x27, 0x66,
    0x6f, 0x6f, 0x27, 0x3a, 0x27, 0x62, 0x61, 0x72, 0x27, 0x7d, 0xc3, 0x65, 0x39, 0x36,
};
static const unsigned char t_payload_one_str_header[] = {
    0x00, 0x00, 0x00, 0x3d, 0x00, 0x00, 0x00, 0x20, 0x07, 0xfd, 0x83, 0x96, 0x0c, 0x63, 0x6f, 0x6e,
    0x74, 0x65, 0x6e, 0x74, 0x2d, 0x74, 0x79, 0x70, 0x65, 0x07, 0x00, 0x10, 0x61, 0x70, 0x70, 0x6c,
    0x69, 0x63, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x2f, 0x6a, 0x73, 0x6f, 0x6e, 0x7b, 0x27, 0x66, 0x6f,
    0x6f, 0x27, 0x3a, 0x27, 0x62, 0x61, 0x72, 0x27, 0x7d, 0x8d, 0x9c, 0x08, 0xb1,
};
static const unsigned char t_corrupted_headers[] = {
    0x00, 0x00, 0x00, 0x3d, 0x00, 0x00, 0x00, 0x20, 0x07, 0xfd, 0x83, 0x96, 0x0c, 0x63, 0x6f, 0x6e,
    0x74, 0x65, 0x6e, 0x74, 0x2d, 0x74, 0x79, 0x70, 0x65, 0x07, 0x00, 0x10, 0x61, 0x70, 0x70, 0x6c,
    0x69, 0x63, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x2f, 0x6a, 0x73, 0x6f, 0x6e, 0x7b, 0x61, 0x66, 0x6f,
    0x6f, 0x27, 0x3a, 0x27, 0x62, 0x61, 0x72, 0x27, 0x7d, 0x8d, 0x9c, 0x08, 0xb1,
};
static const unsigned char t_corrupted_header_len[] = {
    0x00, 0x00, 0x00, 0x3d, 0x00, 0x00, 0x00, 0x21, 0x07, 0xfd, 0x83, 0x96, 0x0c, 0x63, 0x6f, 0x6e,
    0x74, 0x65, 0x6e, 0x74, 0x2d, 0x74, 0x79, 0x70, 0x65, 0x07, 0x00, 0x10, 0x61, 0x70, 0x70, 0x6c,
    0x69, 0x63, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x2f, 0x6a, 0x73, 0x6f, 0x6e, 0x7b, 0x27, 0x66, 0x6f,
    0x6f, 0x27, 0x3a, 0x27, 0x62, 0x61, 0x72, 0x27, 0x7d, 0x8d, 0x9c, 0x08, 0xb1,
};
static const unsigned char t_corrupted_length[] = {
    0x00, 0x00, 0x00, 0x3e, 0x00, 0x00, 0x00, 0x20, 0x07, 0xfd, 0x83, 0x96, 0x0c, 0x63, 0x6f, 0x6e,
    0x74, 0x65, 0x6e, 0x74, 0x2d, 0x74, 0x79, 0x70, 0x65, 0x07, 0x00, 0x10, 0x61, 0x70, 0x70, 0x6c,
    0x69, 0x63, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x2f, 0x6a, 0x73, 0x6f, 0x6e, 0x7b, 0x27, 0x66, 0x6f,
    0x6f, 0x27, 0x3a, 0x27, 0x62, 0x61, 0x72, 0x27, 0x7d, 0x8d, 0x9c, 0x08, 0xb1,
};
static const unsigned char t_corrupted_payload[] = {
    0x00, 0x00, 0x00, 0x1d, 0x00, 0x00, 0x00, 0x00, 0xfd, 0x52, 0x8c, 0x5a, 0x5b, 0x27, 0x66,
    0x6f, 0x6f, 0x27, 0x3a, 0x27, 0x62, 0x61, 0x72, 0x27, 0x7d, 0xc3, 0x65, 0x39, 0x36,
};

#define T_VEC(v)                                                                                   \
    {                                                                                              \
#v, (const char *)t_##v, sizeof t_##v                                                      \
    }
struct t_vec {
    const char *name, *bytes;
    size_t len;
};
static const struct t_vec t_good[] = {
    T_VEC(all_headers),        T_VEC(empty_message),          T_VEC(int32_header),
    T_VEC(payload_no_headers), T_VEC(payload_one_str_header),
};
static const struct t_vec t_bad[] = {
    T_VEC(corrupted_headers),
    T_VEC(corrupted_header_len),
    T_VEC(corrupted_length),
    T_VEC(corrupted_payload),
};

#define T_MAX 4096

/* ---- a receiver that writes each message as one line of text ---- */

struct t_run {
    struct gw_buf text;
    size_t n;
    size_t stop_after; /* 0: never stop */
};

static void
t_hex(struct gw_buf *b, struct gw_str s)
{
    char h[3];
    size_t i;

    for (i = 0; i < s.len; i++) {
        gw_hex_encode((const unsigned char *)s.ptr + i, 1, h);
        assert_int_equal(gw_buf_append(b, h, 2), GW_OK);
    }
}

static int
t_on_msg(void *arg, const struct dl_bedrock_es_msg *m)
{
    struct t_run *r = arg;
    size_t i;

    for (i = 0; i < m->n_hdrs; i++) {
        assert_int_equal(gw_buf_append_str(&r->text, m->hdrs[i].name), GW_OK);
        assert_int_equal(gw_buf_printf(&r->text, "/%d=", (int)m->hdrs[i].type), GW_OK);
        t_hex(&r->text, m->hdrs[i].value);
        assert_int_equal(gw_buf_append(&r->text, " ", 1), GW_OK);
    }
    assert_int_equal(gw_buf_append_cstr(&r->text, "| "), GW_OK);
    assert_int_equal(gw_buf_append_str(&r->text, m->payload), GW_OK);
    assert_int_equal(gw_buf_append(&r->text, "\n", 1), GW_OK);
    r->n++;
    return r->stop_after && r->n >= r->stop_after;
}

/* Feeds <s> in the reads <cuts> (ascending, <n> of them) make; the result, and partial()
 * at the end in *partial. */
static enum gw_code
t_feed(const char *s, size_t len, const size_t *cuts, size_t n, size_t max, struct t_run *r,
       bool *partial)
{
    struct dl_bedrock_es es;
    enum gw_code rc = GW_OK;
    size_t from = 0, k;

    dl_bedrock_es_init(&es, max);
    for (k = 0; k <= n && rc == GW_OK; k++) {
        size_t to = k < n ? cuts[k] : len;

        rc = dl_bedrock_es_feed(&es, s + from, to - from, t_on_msg, r);
        from = to;
    }
    *partial = dl_bedrock_es_partial(&es);
    dl_bedrock_es_fini(&es);
    return rc;
}

/* <s> whole, then cut in two at every byte, then a byte a read: the same messages and
 * result each time; the whole run's text in <whole> (the caller frees it). */
static enum gw_code
t_every_split(const char *s, size_t len, struct t_run *whole)
{
    size_t cut, ones[T_MAX];
    bool pw, p;
    enum gw_code rc = t_feed(s, len, NULL, 0, T_MAX, whole, &pw);

    for (cut = 0; cut <= len; cut++) {
        struct t_run r = {0};

        assert_int_equal(t_feed(s, len, &cut, 1, T_MAX, &r, &p), rc);
        assert_int_equal(r.n, whole->n);
        assert_true(r.text.len == whole->text.len &&
                    (r.text.len == 0 || memcmp(r.text.data, whole->text.data, r.text.len) == 0));
        if (rc == GW_OK) /* after a refusal what is held means nothing */
            assert_int_equal(p, pw);
        gw_buf_fini(&r.text);
    }
    assert_true(len <= T_MAX);
    for (cut = 0; cut < len; cut++)
        ones[cut] = cut + 1;
    {
        struct t_run r = {0};

        assert_int_equal(t_feed(s, len, ones, len ? len - 1 : 0, T_MAX, &r, &p), rc);
        assert_int_equal(r.n, whole->n);
        assert_true(r.text.len == whole->text.len &&
                    (r.text.len == 0 || memcmp(r.text.data, whole->text.data, r.text.len) == 0));
        gw_buf_fini(&r.text);
    }
    return rc;
}

/* ---- the vectors ---- */

static const char t_all_headers_text[] =
    "event-type/4=0000a00c content-type/7=6170706c69636174696f6e2f6a736f6e bool false/1= "
    "bool true/0= byte/2=cf byte buf/6=49276d2061206c6974746c6520746561706f7421 "
    "timestamp/8=0000000000845fed int16/3=002a int64/5=00000000028757b2 "
    "uuid/9=0102030405060708090a0b0c0d0e0f10 | {'foo':'bar'}\n";

static void
test_es_vectors_decode(void **state)
{
    static const char *texts[] = {
        NULL, /* all_headers: below */
        "| \n",
        "event-type/4=0000a00c | {'foo':'bar'}\n",
        "| {'foo':'bar'}\n",
        "content-type/7=6170706c69636174696f6e2f6a736f6e | {'foo':'bar'}\n",
    };
    size_t i;

    (void)state;
    texts[0] = t_all_headers_text;
    for (i = 0; i < sizeof t_good / sizeof t_good[0]; i++) {
        struct t_run r = {0};

        assert_int_equal(t_every_split(t_good[i].bytes, t_good[i].len, &r), GW_OK);
        assert_int_equal(r.n, 1);
        if (strcmp(r.text.data, texts[i]) != 0)
            fail_msg("%s:\n%s\nwanted\n%s", t_good[i].name, r.text.data, texts[i]);
        gw_buf_fini(&r.text);
    }
}

/* The string headers the stream uses land in their fields, by their exact names
 * (all_headers's "content-type", without the ':', is not ":content-type"). */
static int
t_known(void *arg, const struct dl_bedrock_es_msg *m)
{
    *(struct dl_bedrock_es_msg *)arg = *m;
    return 0;
}

static void
test_es_known_headers(void **state)
{
#define T_S(n, v)                                                                                  \
    {                                                                                              \
        GW_STR_LIT(n), DL_BEDROCK_ES_STRING, GW_STR_LIT(v)                                         \
    }
    const struct dl_bedrock_es_header h[] = {
        T_S(":message-type", "exception"),
        T_S(":event-type", "e"),
        T_S(":exception-type", "x"),
        T_S(":error-code", "c"),
        T_S(":error-message", "m"),
        T_S(":content-type", "application/json"),
        {GW_STR_LIT(":event-type2"), DL_BEDROCK_ES_STRING, GW_STR_LIT("no")},
    };
#undef T_S
    struct dl_bedrock_es es;
    struct dl_bedrock_es_msg m;
    struct gw_buf b = {0};

    (void)state;
    assert_int_equal(dl_bedrock_es_encode(&b, h, 7, GW_STR_LIT("p")), GW_OK);
    dl_bedrock_es_init(&es, T_MAX);
    assert_int_equal(dl_bedrock_es_feed(&es, b.data, b.len, t_known, &m), GW_OK);
    assert_int_equal(m.n_hdrs, 7);
    assert_true(gw_str_eq(m.message_type, GW_STR_LIT("exception")));
    assert_true(gw_str_eq(m.event_type, GW_STR_LIT("e")));
    assert_true(gw_str_eq(m.exception_type, GW_STR_LIT("x")));
    assert_true(gw_str_eq(m.error_code, GW_STR_LIT("c")));
    assert_true(gw_str_eq(m.error_message, GW_STR_LIT("m")));
    assert_true(gw_str_eq(m.content_type, GW_STR_LIT("application/json")));
    assert_true(gw_str_eq(m.payload, GW_STR_LIT("p")));
    assert_int_equal(
        dl_bedrock_es_feed(&es, (const char *)t_all_headers, sizeof t_all_headers, t_known, &m),
        GW_OK);
    assert_int_equal(m.n_hdrs, 10);
    assert_int_equal(m.content_type.len, 0);
    assert_int_equal(m.event_type.len, 0); /* "event-type" there is an INT, and no ':' */
    dl_bedrock_es_fini(&es);
    gw_buf_fini(&b);
}

static void
test_es_corrupted_vectors_are_refused(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof t_bad / sizeof t_bad[0]; i++) {
        struct t_run r = {0};

        if (t_every_split(t_bad[i].bytes, t_bad[i].len, &r) != GW_E_UPSTREAM_PROTOCOL)
            fail_msg("%s was not refused", t_bad[i].name);
        assert_int_equal(r.n, 0);
        gw_buf_fini(&r.text);
    }
}

/* All five good vectors back to back, in one feed and cut everywhere. */
static void
test_es_several_messages_in_one_feed(void **state)
{
    struct gw_buf all = {0};
    struct t_run r = {0};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof t_good / sizeof t_good[0]; i++)
        assert_int_equal(gw_buf_append(&all, t_good[i].bytes, t_good[i].len), GW_OK);
    assert_int_equal(t_every_split(all.data, all.len, &r), GW_OK);
    assert_int_equal(r.n, 5);
    gw_buf_fini(&r.text);
    gw_buf_fini(&all);
}

/* ---- encode ---- */

static const struct dl_bedrock_es_header t_all_hdrs[] = {
    {GW_STR_LIT("event-type"), DL_BEDROCK_ES_INT, {"\x00\x00\xa0\x0c", 4}},
    {GW_STR_LIT("content-type"), DL_BEDROCK_ES_STRING, GW_STR_LIT("application/json")},
    {GW_STR_LIT("bool false"), DL_BEDROCK_ES_BOOL_FALSE, {"", 0}},
    {GW_STR_LIT("bool true"), DL_BEDROCK_ES_BOOL_TRUE, {"", 0}},
    {GW_STR_LIT("byte"), DL_BEDROCK_ES_BYTE, {"\xcf", 1}},
    {GW_STR_LIT("byte buf"), DL_BEDROCK_ES_BYTES, GW_STR_LIT("I'm a little teapot!")},
    {GW_STR_LIT("timestamp"), DL_BEDROCK_ES_TIMESTAMP, {"\x00\x00\x00\x00\x00\x84\x5f\xed", 8}},
    {GW_STR_LIT("int16"), DL_BEDROCK_ES_SHORT, {"\x00\x2a", 2}},
    {GW_STR_LIT("int64"), DL_BEDROCK_ES_LONG, {"\x00\x00\x00\x00\x02\x87\x57\xb2", 8}},
    {GW_STR_LIT("uuid"),
     DL_BEDROCK_ES_UUID,
     {"\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10", 16}},
};

/* The decoded form of all_headers and of the empty message encode to the vectors'
 * bytes exactly (both CRCs included). */
static void
test_es_encode_gives_the_vectors(void **state)
{
    struct gw_buf b = {0};

    (void)state;
    assert_int_equal(dl_bedrock_es_encode(&b, t_all_hdrs, 10, GW_STR_LIT("{'foo':'bar'}")), GW_OK);
    assert_int_equal(b.len, sizeof t_all_headers);
    assert_memory_equal(b.data, t_all_headers, sizeof t_all_headers);
    gw_buf_reset(&b);
    assert_int_equal(dl_bedrock_es_encode(&b, NULL, 0, (struct gw_str){"", 0}), GW_OK);
    assert_int_equal(b.len, sizeof t_empty_message);
    assert_memory_equal(b.data, t_empty_message, sizeof t_empty_message);
    gw_buf_reset(&b);
    assert_int_equal(dl_bedrock_es_encode(&b, &t_all_hdrs[1], 1, GW_STR_LIT("{'foo':'bar'}")),
                     GW_OK);
    assert_memory_equal(b.data, t_payload_one_str_header, sizeof t_payload_one_str_header);
    gw_buf_fini(&b);
}

/* What cannot be written is refused: an INT of 3 bytes, a 256-byte name. */
static void
test_es_encode_refuses_bad_headers(void **state)
{
    static char name[256];
    struct dl_bedrock_es_header h = {GW_STR_LIT("x"), DL_BEDROCK_ES_INT, {"abc", 3}};
    struct gw_buf b = {0};

    (void)state;
    assert_int_equal(dl_bedrock_es_encode(&b, &h, 1, GW_STR_LIT("")), GW_E_BAD_REQUEST);
    memset(name, 'n', sizeof name);
    h = (struct dl_bedrock_es_header){{name, sizeof name}, DL_BEDROCK_ES_BOOL_TRUE, {"", 0}};
    assert_int_equal(dl_bedrock_es_encode(&b, &h, 1, GW_STR_LIT("")), GW_E_BAD_REQUEST);
    assert_int_equal(b.len, 0);
    gw_buf_fini(&b);
}

/* ---- refusals ---- */

static void
t_put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Rewrites both CRCs of the message <m> of <len> bytes after a test changed it, so
 * only the change is wrong. */
static void
t_recrc(unsigned char *m, size_t len)
{
    t_put32(m + 8, (uint32_t)crc32(0, m, 8));
    t_put32(m + len - 4, (uint32_t)crc32(0, m, (uInt)(len - 4)));
}

/* <m> must be refused, whole and cut anywhere, and the refusal sticks. */
static void
t_refused(const unsigned char *m, size_t len, size_t max)
{
    struct dl_bedrock_es es;
    struct t_run r = {0};
    bool p;
    size_t cut;

    for (cut = 0; cut <= len; cut++)
        assert_int_equal(t_feed((const char *)m, len, &cut, 1, max, &r, &p),
                         GW_E_UPSTREAM_PROTOCOL);
    assert_int_equal(r.n, 0);
    dl_bedrock_es_init(&es, max);
    assert_int_equal(dl_bedrock_es_feed(&es, (const char *)m, len, t_on_msg, &r),
                     GW_E_UPSTREAM_PROTOCOL);
    assert_int_equal(dl_bedrock_es_feed(&es, (const char *)t_empty_message, 16, t_on_msg, &r),
                     GW_E_UPSTREAM_PROTOCOL);
    assert_int_equal(r.n, 0);
    dl_bedrock_es_fini(&es);
    gw_buf_fini(&r.text);
}

static void
test_es_bad_crcs(void **state)
{
    unsigned char m[sizeof t_int32_header];

    (void)state;
    memcpy(m, t_int32_header, sizeof m);
    m[11] ^= 1; /* the prelude CRC */
    t_refused(m, sizeof m, T_MAX);
    memcpy(m, t_int32_header, sizeof m);
    m[sizeof m - 1] ^= 0x80; /* the message CRC */
    t_refused(m, sizeof m, T_MAX);
    memcpy(m, t_int32_header, sizeof m);
    m[30] ^= 0x20; /* a payload byte: the message CRC no longer matches */
    t_refused(m, sizeof m, T_MAX);
}

/* Lengths that cannot be, with CRCs that match them: a total of 15; headers that run
 * into the message CRC; a total over the maximum, refused with only its prelude
 * given (its bytes are never awaited). */
static void
test_es_impossible_lengths(void **state)
{
    unsigned char m[sizeof t_int32_header];
    struct dl_bedrock_es es;
    struct t_run r = {0};

    (void)state;
    memcpy(m, t_empty_message, 16);
    t_put32(m, 15);
    t_recrc(m, 16);
    t_refused(m, 12, T_MAX); /* the prelude alone is enough to refuse it */
    memcpy(m, t_empty_message, 16);
    t_put32(m + 4, 1); /* 1 header byte in a 16-byte message */
    t_recrc(m, 16);
    t_refused(m, 16, T_MAX);
    memcpy(m, t_int32_header, sizeof m);
    t_refused(m, sizeof m, sizeof m - 1);
    dl_bedrock_es_init(&es, 1000);
    t_put32(m, 1001);
    t_recrc(m, sizeof m);
    assert_int_equal(dl_bedrock_es_feed(&es, (const char *)m, 12, t_on_msg, &r),
                     GW_E_UPSTREAM_PROTOCOL);
    assert_true(es.buf.cap < 1001); /* nothing was reserved for it */
    dl_bedrock_es_fini(&es);
}

/* Headers the format does not allow, in messages with good CRCs: an unknown value type,
 * a string whose length runs past the headers block, a name past it, 17 headers. */
static void
test_es_bad_headers(void **state)
{
    struct dl_bedrock_es_header h[DL_BEDROCK_ES_MAX_HEADERS + 1];
    struct gw_buf b = {0};
    struct t_run r = {0};
    bool p;
    size_t i;

    (void)state;
    assert_int_equal(dl_bedrock_es_encode(&b, &t_all_hdrs[1], 1, GW_STR_LIT("{}")), GW_OK);
    b.data[12 + 1 + 12] = 10; /* content-type's type byte: 10 is no type */
    t_recrc((unsigned char *)b.data, b.len);
    t_refused((unsigned char *)b.data, b.len, T_MAX);
    b.data[12 + 1 + 12] = DL_BEDROCK_ES_STRING;
    b.data[12 + 1 + 12 + 2] = 17; /* the string's length: 17, one past the block */
    t_recrc((unsigned char *)b.data, b.len);
    t_refused((unsigned char *)b.data, b.len, T_MAX);
    b.data[12 + 1 + 12 + 2] = 16;
    b.data[12] = 40; /* the name's length past the block */
    t_recrc((unsigned char *)b.data, b.len);
    t_refused((unsigned char *)b.data, b.len, T_MAX);
    gw_buf_reset(&b);
    for (i = 0; i <= DL_BEDROCK_ES_MAX_HEADERS; i++)
        h[i] = (struct dl_bedrock_es_header){GW_STR_LIT("b"), DL_BEDROCK_ES_BOOL_TRUE, {"", 0}};
    assert_int_equal(dl_bedrock_es_encode(&b, h, DL_BEDROCK_ES_MAX_HEADERS, GW_STR_LIT("")), GW_OK);
    assert_int_equal(t_feed(b.data, b.len, NULL, 0, T_MAX, &r, &p), GW_OK);
    assert_int_equal(r.n, 1); /* 16 is the most */
    gw_buf_reset(&b);
    assert_int_equal(dl_bedrock_es_encode(&b, h, DL_BEDROCK_ES_MAX_HEADERS + 1, GW_STR_LIT("")),
                     GW_OK);
    t_refused((unsigned char *)b.data, b.len, T_MAX);
    gw_buf_fini(&b);
    gw_buf_fini(&r.text);
}

/* ---- the receiver, the end, the event ---- */

/* A receiver that returns non-zero ends the feed with GW_OK: no later message of the
 * same read reaches it. */
static void
test_es_receiver_can_stop(void **state)
{
    struct gw_buf all = {0};
    struct t_run r = {.stop_after = 1};
    bool p;

    (void)state;
    assert_int_equal(gw_buf_append(&all, t_int32_header, sizeof t_int32_header), GW_OK);
    assert_int_equal(gw_buf_append(&all, t_empty_message, sizeof t_empty_message), GW_OK);
    assert_int_equal(t_feed(all.data, all.len, NULL, 0, T_MAX, &r, &p), GW_OK);
    assert_int_equal(r.n, 1);
    r.n = 0;
    assert_int_equal(t_feed(all.data, all.len, (size_t[]){5}, 1, T_MAX, &r, &p), GW_OK);
    assert_int_equal(r.n, 1);
    gw_buf_fini(&all);
    gw_buf_fini(&r.text);
}

/* partial(): false before any byte and after whole messages; true while a prelude or
 * a message is unfinished (a stream that ended there was cut). */
static void
test_es_partial_at_the_end(void **state)
{
    struct dl_bedrock_es es;
    struct t_run r = {0};
    const char *m = (const char *)t_int32_header;

    (void)state;
    dl_bedrock_es_init(&es, T_MAX);
    assert_false(dl_bedrock_es_partial(&es));
    assert_int_equal(dl_bedrock_es_feed(&es, m, 5, t_on_msg, &r), GW_OK);
    assert_true(dl_bedrock_es_partial(&es));
    assert_int_equal(dl_bedrock_es_feed(&es, m + 5, 20, t_on_msg, &r), GW_OK);
    assert_true(dl_bedrock_es_partial(&es));
    assert_int_equal(dl_bedrock_es_feed(&es, m + 25, sizeof t_int32_header - 25, t_on_msg, &r),
                     GW_OK);
    assert_false(dl_bedrock_es_partial(&es));
    assert_int_equal(r.n, 1);
    dl_bedrock_es_fini(&es);
    gw_buf_fini(&r.text);
}

struct t_event {
    char event[64], data[64];
};

static int
t_on_event(void *arg, const struct dl_bedrock_es_msg *m)
{
    struct t_event *e = arg;
    struct gw_str ev, data;

    dl_bedrock_es_event(m, &ev, &data);
    snprintf(e->event, sizeof e->event, "%.*s", (int)ev.len, ev.ptr);
    snprintf(e->data, sizeof e->data, "%.*s", (int)data.len, data.ptr);
    return 0;
}

/* An event's :event-type and payload; an exception's :exception-type and payload; an
 * error's "error" and :error-message; all through encode and feed. */
static void
test_es_event_names(void **state)
{
#define T_S(n, v)                                                                                  \
    {                                                                                              \
        GW_STR_LIT(n), DL_BEDROCK_ES_STRING, GW_STR_LIT(v)                                         \
    }
    const struct dl_bedrock_es_header event[] = {T_S(":message-type", "event"),
                                                 T_S(":event-type", "contentBlockDelta"),
                                                 T_S(":content-type", "application/json")};
    const struct dl_bedrock_es_header exc[] = {T_S(":message-type", "exception"),
                                               T_S(":exception-type", "throttlingException")};
    const struct dl_bedrock_es_header err[] = {T_S(":message-type", "error"),
                                               T_S(":error-code", "InternalFailure"),
                                               T_S(":error-message", "it broke")};
#undef T_S
    struct {
        const struct dl_bedrock_es_header *h;
        size_t n;
        const char *event, *data;
    } cases[] = {
        {event, 3, "contentBlockDelta", "{\"delta\":{\"text\":\"hi\"}}"},
        {exc, 2, "throttlingException", "{\"message\":\"slow down\"}"},
        {err, 3, "error", "it broke"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < 3; i++) {
        struct dl_bedrock_es es;
        struct t_event e;
        struct gw_buf b = {0};
        struct gw_str payload = gw_str_c(i == 2 ? "" : cases[i].data);

        memset(&e, 0, sizeof e);
        assert_int_equal(dl_bedrock_es_encode(&b, cases[i].h, cases[i].n, payload), GW_OK);
        dl_bedrock_es_init(&es, T_MAX);
        assert_int_equal(dl_bedrock_es_feed(&es, b.data, b.len, t_on_event, &e), GW_OK);
        assert_string_equal(e.event, cases[i].event);
        assert_string_equal(e.data, cases[i].data);
        dl_bedrock_es_fini(&es);
        gw_buf_fini(&b);
    }
}

static int
t_count(void *arg, const struct dl_bedrock_es_msg *m)
{
    (void)m;
    ++*(size_t *)arg;
    return 0;
}

/* The spanning buffer cannot grow: GW_E_NOMEM, and the stream is over. A message whole
 * in one read needs no memory at all. */
static void
test_es_out_of_memory(void **state)
{
    struct dl_bedrock_es es;
    const char *m = (const char *)t_int32_header;
    size_t n = 0;

    (void)state;
    dl_bedrock_es_init(&es, T_MAX);
    gw_alloc_fail_at(1);
    assert_int_equal(dl_bedrock_es_feed(&es, m, sizeof t_int32_header, t_count, &n), GW_OK);
    assert_int_equal(dl_bedrock_es_feed(&es, m, 20, t_count, &n), GW_E_NOMEM);
    gw_alloc_fail_at(0);
    assert_int_equal(dl_bedrock_es_feed(&es, m + 20, 5, t_count, &n), GW_E_UPSTREAM_PROTOCOL);
    dl_bedrock_es_fini(&es);
    assert_int_equal(n, 1);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_es_vectors_decode),
        cmocka_unit_test(test_es_known_headers),
        cmocka_unit_test(test_es_corrupted_vectors_are_refused),
        cmocka_unit_test(test_es_several_messages_in_one_feed),
        cmocka_unit_test(test_es_encode_gives_the_vectors),
        cmocka_unit_test(test_es_encode_refuses_bad_headers),
        cmocka_unit_test(test_es_bad_crcs),
        cmocka_unit_test(test_es_impossible_lengths),
        cmocka_unit_test(test_es_bad_headers),
        cmocka_unit_test(test_es_receiver_can_stop),
        cmocka_unit_test(test_es_partial_at_the_end),
        cmocka_unit_test(test_es_event_names),
        cmocka_unit_test(test_es_out_of_memory),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
