/* SPDX-License-Identifier: MIT
 * tests/unit/core/test_str.c - slices, buffers, JSON escaping, hex, constant-time compare,
 * and the allocation failure hook.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>

#include "core/alloc.h"
#include "core/str.h"

static void
test_str_trim_and_prefixes(void **state)
{
    struct gw_str t;

    (void)state;
    t = gw_str_trim(GW_STR_LIT(" \t\r\n image/png \n"));
    assert_int_equal(t.len, 9);
    assert_memory_equal(t.ptr, "image/png", 9);
    assert_int_equal(gw_str_trim(GW_STR_LIT(" \t ")).len, 0);
    assert_int_equal(gw_str_trim(GW_STR_LIT("\vx")).len, 2); /* only JSON's blanks */
    assert_true(gw_str_has_prefix_nocase(GW_STR_LIT("Image/PNG"), "image/"));
    assert_false(gw_str_has_prefix_nocase(GW_STR_LIT("ima"), "image/"));
    assert_true(gw_str_has_suffix_nocase(GW_STR_LIT("doc.PDF"), ".pdf"));
    assert_false(gw_str_has_suffix_nocase(GW_STR_LIT("pdf"), ".pdf"));
    assert_true(gw_str_has_prefix_nocase(GW_STR_LIT(""), ""));
}

static void
test_str_eq_nocase_matches_header_names(void **state)
{
    (void)state;
    assert_true(gw_str_eq_nocase(GW_STR_LIT("Content-Type"), GW_STR_LIT("content-type")));
    assert_false(gw_str_eq_nocase(GW_STR_LIT("content-typ"), GW_STR_LIT("content-type")));
    assert_false(gw_str_eq_nocase(GW_STR_LIT("x-api-kez"), GW_STR_LIT("x-api-key")));
}

/* Every pair of byte values: equal when they are equal after ASCII lowering, and
 * nothing but A-Z is lowered (not '@', '[', nor bytes above 0x7f). */
static void
test_str_eq_nocase_every_byte_pair(void **state)
{
    (void)state;
    for (unsigned x = 0; x < 256; x++) {
        for (unsigned y = 0; y < 256; y++) {
            char a = (char)x, b = (char)y;
            unsigned lx = x >= 'A' && x <= 'Z' ? x + 32 : x, ly = y >= 'A' && y <= 'Z' ? y + 32 : y;

            if (gw_str_eq_nocase((struct gw_str){&a, 1}, (struct gw_str){&b, 1}) != (lx == ly))
                fail_msg("bytes 0x%02x 0x%02x", x, y);
        }
    }
}

/* The eight-bytes-a-step compare against the byte-wise rule: every pair of byte values
 * at every position of names 1 to 19 bytes long (one word, a word and a tail, two words
 * and a tail), the other bytes equal or differing only in a letter's case. */
static void
test_mem_eq_nocase_every_byte_pair_at_every_position(void **state)
{
    static const char name[] = "X-Goog-Api-Key-Ab-C";
    char a[32], b[32];

    (void)state;
    for (size_t n = 1; n < sizeof(name); n++) {
        for (size_t at = 0; at < n; at++) {
            for (unsigned x = 0; x < 256; x++) {
                for (unsigned y = 0; y < 256; y++) {
                    unsigned lx = x >= 'A' && x <= 'Z' ? x + 32 : x;
                    unsigned ly = y >= 'A' && y <= 'Z' ? y + 32 : y;

                    memcpy(a, name, n);
                    for (size_t i = 0; i < n; i++) /* the same name, lowered */
                        b[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
                    a[at] = (char)x;
                    b[at] = (char)y;
                    if (gw_mem_eq_nocase(a, b, n) != (lx == ly))
                        fail_msg("length %zu, position %zu: bytes 0x%02x 0x%02x", n, at, x, y);
                }
            }
        }
    }
}

/* Hex of every byte value, and of every length from 0 to 40 (the sixteen-byte steps and
 * the byte-wise rest), against the two characters each byte must give. */
static void
test_hex_encode_every_byte_and_length(void **state)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char in[256];
    char out[2 * 256 + 1];

    (void)state;
    for (unsigned i = 0; i < 256; i++)
        in[i] = (unsigned char)(i * 7 + 3);
    for (size_t n = 0; n <= 40; n++) {
        memset(out, 'x', sizeof(out));
        gw_hex_encode(in + 256 - 40, n, out);
        for (size_t i = 0; i < n; i++) {
            assert_int_equal(out[2 * i], digits[in[256 - 40 + i] >> 4]);
            assert_int_equal(out[2 * i + 1], digits[in[256 - 40 + i] & 15]);
        }
        assert_int_equal(out[2 * n], '\0');
    }
    gw_hex_encode(in, 256, out);
    for (size_t i = 0; i < 256; i++) {
        assert_int_equal(out[2 * i], digits[in[i] >> 4]);
        assert_int_equal(out[2 * i + 1], digits[in[i] & 15]);
    }
}

/* Recycled: empty either way; the memory kept up to <keep> bytes, freed above. */
static void
test_buf_recycle_keeps_small_memory_only(void **state)
{
    struct gw_buf b = {0};
    char *kept;

    (void)state;
    assert_int_equal(gw_buf_append(&b, "hello", 5), GW_OK);
    kept = b.data;
    gw_buf_recycle(&b, b.cap);
    assert_int_equal(b.len, 0);
    assert_ptr_equal(b.data, kept);
    assert_string_equal(b.data, "");
    assert_int_equal(gw_buf_append(&b, "again", 5), GW_OK);
    gw_buf_recycle(&b, b.cap - 1);
    assert_int_equal(b.len, 0);
    assert_null(b.data);
    assert_int_equal(b.cap, 0);
}

static void
test_buf_append_printf_and_consume(void **state)
{
    struct gw_buf b = {0};
    int i;

    (void)state;
    for (i = 0; i < 1000; i++)
        assert_int_equal(gw_buf_printf(&b, "%d,", i), GW_OK);
    assert_int_equal(strncmp(b.data, "0,1,2,", 6), 0);
    assert_int_equal(b.data[b.len], '\0');
    gw_buf_consume(&b, 2);
    assert_int_equal(strncmp(b.data, "1,2,", 4), 0);
    gw_buf_consume(&b, b.len + 5);
    assert_int_equal(b.len, 0);
    gw_buf_fini(&b);
    assert_null(b.data);
}

static void
test_buf_json_string_escapes_controls_and_quotes(void **state)
{
    struct gw_buf b = {0};

    (void)state;
    assert_int_equal(gw_buf_append_json_str(&b, (struct gw_str){"a\"b\\c\n\x01\xc3\xa9", 9}),
                     GW_OK);
    assert_string_equal(b.data, "\"a\\\"b\\\\c\\n\\u0001\xc3\xa9\"");
    gw_buf_reset(&b);
    /* plain runs around escapes, a control character, an escape at the very end */
    assert_int_equal(gw_buf_append_json_str(&b, (struct gw_str){"plain run\t\x1f tail\r", 17}),
                     GW_OK);
    assert_string_equal(b.data, "\"plain run\\t\\u001f tail\\r\"");
    gw_buf_reset(&b);
    assert_int_equal(gw_buf_append_json_str(&b, (struct gw_str){"", 0}), GW_OK);
    assert_string_equal(b.data, "\"\"");
    gw_buf_reset(&b);
    /* a zeroed slice (a canonical field never set) is the empty string */
    assert_int_equal(gw_buf_append_json_str(&b, (struct gw_str){NULL, 0}), GW_OK);
    assert_string_equal(b.data, "\"\"");
    gw_buf_fini(&b);
}

/* The inside of a JSON string: the same escapes, no quotes, after what is there. */
static void
test_buf_json_inner_escapes_without_quotes(void **state)
{
    struct gw_buf b = {0};

    (void)state;
    assert_int_equal(gw_buf_append_cstr(&b, "\"pre-"), GW_OK);
    assert_int_equal(gw_buf_append_json_inner(&b, (struct gw_str){"a\"b\\c\n\x01\xc3\xa9", 9}),
                     GW_OK);
    assert_string_equal(b.data, "\"pre-a\\\"b\\\\c\\n\\u0001\xc3\xa9");
    assert_int_equal(gw_buf_append_json_inner(&b, (struct gw_str){NULL, 0}), GW_OK);
    assert_int_equal(gw_buf_append_json_inner(&b, (struct gw_str){"", 0}), GW_OK);
    assert_string_equal(b.data, "\"pre-a\\\"b\\\\c\\n\\u0001\xc3\xa9");
    gw_buf_fini(&b);
}

/* The escape of one byte as JSON wants it, or the byte itself: the test's own oracle. */
static size_t
t_json_byte(unsigned char c, char *out)
{
    static const char hex[] = "0123456789abcdef";

    if (c == '"' || c == '\\') {
        out[0] = '\\';
        out[1] = (char)c;
        return 2;
    }
    if (c >= 0x20) {
        out[0] = (char)c;
        return 1;
    }
    out[0] = '\\';
    out[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : 'u';
    if (out[1] != 'u')
        return 2;
    out[2] = '0';
    out[3] = '0';
    out[4] = hex[c >> 4];
    out[5] = hex[c & 15];
    return 6;
}

/* The runs are read sixteen bytes at a time: every byte value at every position of
 * strings of 1 to 48 bytes (around one, two and three blocks), among plain ASCII and
 * among bytes from 0x80 (UTF-8, copied as they are), against the byte-wise oracle. */
static void
test_buf_json_string_every_byte_at_every_position(void **state)
{
    struct gw_buf b = {0};
    char in[48], want[2 + 48 * 6];
    size_t len, pos, k, n;
    unsigned c, fill;

    (void)state;
    for (fill = 0; fill < 2; fill++) {
        for (len = 1; len <= sizeof(in); len++) {
            for (pos = 0; pos < len; pos++) {
                for (c = 0; c < 256; c++) {
                    for (k = 0; k < len; k++)
                        in[k] = fill ? (char)(0x80 + k) : (char)('a' + k % 26);
                    in[pos] = (char)c;
                    n = 0;
                    want[n++] = '"';
                    for (k = 0; k < len; k++)
                        n += t_json_byte((unsigned char)in[k], want + n);
                    want[n++] = '"';
                    gw_buf_reset(&b);
                    assert_int_equal(gw_buf_append_json_str(&b, (struct gw_str){in, len}), GW_OK);
                    assert_int_equal(b.len, n);
                    assert_memory_equal(b.data, want, n);
                }
            }
        }
    }
    gw_buf_fini(&b);
}

/* gw_fmt_hex_u64 (<hex>) or gw_fmt_u64 of <v> against printf's %llx or %llu. */
static void
t_fmt_one(bool hex, uint64_t v)
{
    char got[24], want[24];
    size_t n = hex ? gw_fmt_hex_u64(got, v) : gw_fmt_u64(got, v);
    int w = hex ? snprintf(want, sizeof want, "%llx", (unsigned long long)v)
                : snprintf(want, sizeof want, "%llu", (unsigned long long)v);

    assert_int_equal(n, (size_t)w);
    assert_memory_equal(got, want, n);
}

/* Every value below <small>, each power of the base (16 when <hex>, else 10) that fits
 * and its neighbours, and <spread> others of every size (a xorshift sequence, every
 * other one shifted down). */
static void
t_fmt_like_printf(bool hex, uint64_t small, unsigned spread)
{
    uint64_t v, p, base = hex ? 16 : 10, x = 0x9e3779b97f4a7c15u;
    unsigned i;

    for (v = 0; v < small; v++)
        t_fmt_one(hex, v);
    for (p = base;; p *= base) {
        t_fmt_one(hex, p - 1);
        t_fmt_one(hex, p);
        t_fmt_one(hex, p + 1);
        if (p > UINT64_MAX / base)
            break;
    }
    for (i = 0; i < spread; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t_fmt_one(hex, i % 2 ? x : x >> (i % 64));
    }
}

/* The digits of a number, against printf's: every value below 100 000, each power of
 * ten and its neighbours, a spread of others, the largest and 0. */
static void
test_fmt_u64_is_printf_s_decimal(void **state)
{
    char got[21];

    (void)state;
    t_fmt_like_printf(false, 100000, 100000);
    assert_int_equal(gw_fmt_u64(got, UINT64_MAX), 20);
    assert_memory_equal(got, "18446744073709551615", 20);
    assert_int_equal(gw_fmt_u64(got, 0), 1);
    assert_int_equal(got[0], '0');
}

/* The hex digits of a number (a chunk's size line), against printf's %llx: the same
 * kinds of values with powers of sixteen. */
static void
test_fmt_hex_u64_is_printf_s_hex(void **state)
{
    char got[17];

    (void)state;
    t_fmt_like_printf(true, 70000, 20000);
    assert_int_equal(gw_fmt_hex_u64(got, UINT64_MAX), 16);
    assert_memory_equal(got, "ffffffffffffffff", 16);
    assert_int_equal(gw_fmt_hex_u64(got, 0), 1);
    assert_int_equal(got[0], '0');
}

/* The paths an error names, against snprintf's: every room from one byte up to more
 * than the whole, so each cut (in the prefix, the index, the suffix) is checked. */
static void
test_path_join_and_item_are_snprintf_s(void **state)
{
    static const struct {
        const char *prefix, *suffix;
        size_t k;
    } c[] = {
        {"messages", ".content", 0},
        {"contents[12].parts", "", 3},
        {"", "", 18446744073709551615u},
        {"tools", ".", 1234567},
    };
    char got[48], want[48];
    size_t i, cap;

    (void)state;
    for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
        for (cap = 1; cap <= sizeof(got); cap++) {
            memset(got, 'x', sizeof(got));
            gw_path_item(got, cap, c[i].prefix, c[i].k, c[i].suffix);
            snprintf(want, cap, "%s[%llu]%s", c[i].prefix, (unsigned long long)c[i].k, c[i].suffix);
            assert_string_equal(got, want);
            if (cap < sizeof(got))
                assert_int_equal(got[cap], 'x'); /* nothing written past the room */
            memset(got, 'x', sizeof(got));
            gw_path_join(got, cap, c[i].prefix, c[i].suffix);
            snprintf(want, cap, "%s%s", c[i].prefix, c[i].suffix);
            assert_string_equal(got, want);
        }
    }
}

static void
test_hex_round_trip_and_refusals(void **state)
{
    unsigned char bin[32], back[32];
    char hex[65];
    int i;

    (void)state;
    for (i = 0; i < 32; i++)
        bin[i] = (unsigned char)(i * 7 + 3);
    gw_hex_encode(bin, 32, hex);
    assert_int_equal(strlen(hex), 64);
    assert_true(gw_hex_decode32(gw_str_c(hex), back));
    assert_memory_equal(bin, back, 32);
    hex[10] = 'g';
    assert_false(gw_hex_decode32(gw_str_c(hex), back));
    assert_false(gw_hex_decode32(GW_STR_LIT("abcd"), back));
}

static void
test_ct_equal_detects_any_difference(void **state)
{
    unsigned char a[32] = {0}, b[32] = {0};

    (void)state;
    assert_true(gw_ct_equal(a, b, 32));
    b[31] = 1;
    assert_false(gw_ct_equal(a, b, 32));
    b[31] = 0;
    b[0] = 0x80;
    assert_false(gw_ct_equal(a, b, 32));
}

/* Every length up to 40 (whole words and the bytes after them), every position, every
 * bit: a difference anywhere is one; equal bytes of any value are equal. */
static void
test_ct_equal_every_length_position_and_bit(void **state)
{
    unsigned char a[40], b[40];
    size_t n, i;
    int bit;

    (void)state;
    for (i = 0; i < sizeof(a); i++)
        a[i] = (unsigned char)(i * 37 + 11);
    for (n = 0; n <= sizeof(a); n++) {
        memcpy(b, a, sizeof(a));
        assert_true(gw_ct_equal(a, b, n));
        for (i = 0; i < n; i++)
            for (bit = 0; bit < 8; bit++) {
                b[i] ^= (unsigned char)(1u << bit);
                assert_false(gw_ct_equal(a, b, n));
                if (i + 1 < n)
                    assert_true(gw_ct_equal(a + i + 1, b + i + 1, n - i - 1));
                b[i] ^= (unsigned char)(1u << bit);
            }
        if (n < sizeof(a)) {
            b[n] ^= 0xff; /* past the length: not compared */
            assert_true(gw_ct_equal(a, b, n));
        }
    }
}

static void
test_alloc_fail_at_fails_exactly_the_nth(void **state)
{
    struct gw_buf b = {0};
    void *p1, *p2;

    (void)state;
    gw_alloc_fail_at(2);
    p1 = gw_malloc(8);
    p2 = gw_malloc(8);
    assert_non_null(p1);
    assert_null(p2);
    gw_free(p1);
    p1 = gw_malloc(8); /* the hook is spent */
    assert_non_null(p1);
    gw_free(p1);
    gw_alloc_fail_at(1);
    assert_int_equal(gw_buf_append(&b, "x", 1), GW_E_NOMEM);
    assert_int_equal(b.len, 0);
    gw_alloc_fail_at(0);
}

static void
test_append_numbers_read_back_the_same(void **state)
{
    struct gw_buf out = {0};

    (void)state;
    assert_int_equal(gw_buf_append_i64(&out, -9223372036854775807 - 1), GW_OK);
    assert_int_equal(gw_buf_append(&out, " ", 1), GW_OK);
    assert_int_equal(gw_buf_append_double(&out, 0.1), GW_OK);
    assert_int_equal(gw_buf_append(&out, " ", 1), GW_OK);
    assert_int_equal(gw_buf_append_double(&out, 1.0 / 3), GW_OK);
    assert_int_equal(gw_buf_append(&out, " ", 1), GW_OK);
    assert_int_equal(gw_buf_append_double(&out, 2.0), GW_OK);
    assert_string_equal(out.data, "-9223372036854775808 0.1 0.3333333333333333 2");
    gw_buf_fini(&out);
}

static void
test_base64_decode_is_strict(void **state)
{
    struct gw_buf out = {0};

    (void)state;
    assert_true(gw_base64_decode(gw_str_c("aGVsbG8="), &out));
    assert_int_equal(out.len, 5);
    assert_memory_equal(out.data, "hello", 5);
    gw_buf_reset(&out);
    assert_true(gw_base64_decode(gw_str_c("aGVsbG8"), &out)); /* padding optional */
    assert_int_equal(out.len, 5);
    gw_buf_reset(&out);
    assert_true(gw_base64_decode(gw_str_c(""), &out));
    assert_int_equal(out.len, 0);
    assert_false(gw_base64_decode(gw_str_c("aGV sbG8="), &out));  /* not in the alphabet */
    assert_false(gw_base64_decode(gw_str_c("aG=VsbG8"), &out));   /* padding in the middle */
    assert_false(gw_base64_decode(gw_str_c("aGVsbG8==="), &out)); /* three pads */
    assert_false(gw_base64_decode(gw_str_c("a"), &out));          /* six bits left over */
    gw_buf_fini(&out);
}

static void
test_utf8_valid_refuses_overlongs_surrogates_and_past_the_range(void **state)
{
    (void)state;
    assert_true(gw_utf8_valid(gw_str_c("plain \xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80")));
    assert_true(gw_utf8_valid((struct gw_str){"", 0}));
    assert_false(gw_utf8_valid(gw_str_c("\xc0\xaf")));         /* overlong '/' */
    assert_false(gw_utf8_valid(gw_str_c("\xed\xa0\x80")));     /* a surrogate */
    assert_false(gw_utf8_valid(gw_str_c("\xf4\x90\x80\x80"))); /* past U+10FFFF */
    assert_false(gw_utf8_valid(gw_str_c("\xe2\x82")));         /* cut short */
    assert_false(gw_utf8_valid(gw_str_c("\x80")));             /* a lone continuation */
}

static void
test_fmt_iso_ms_writes_rfc3339_utc_and_clamps_past_9999(void **state)
{
    char out[GW_ISO_MS_LEN];

    (void)state;
    gw_fmt_iso_ms(0, out);
    assert_string_equal(out, "1970-01-01T00:00:00.000Z");
    gw_fmt_iso_ms(1764621662345ull, out);
    assert_string_equal(out, "2025-12-01T20:41:02.345Z");
    gw_fmt_iso_ms(253402300799999ull, out); /* the last millisecond of 9999 */
    assert_string_equal(out, "9999-12-31T23:59:59.999Z");
    gw_fmt_iso_ms(253402300800000ull, out);
    assert_string_equal(out, "9999-12-31T23:59:59.999Z");
    gw_fmt_iso_ms(UINT64_MAX, out);
    assert_string_equal(out, "9999-12-31T23:59:59.999Z");
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_str_eq_nocase_matches_header_names),
        cmocka_unit_test(test_str_eq_nocase_every_byte_pair),
        cmocka_unit_test(test_mem_eq_nocase_every_byte_pair_at_every_position),
        cmocka_unit_test(test_hex_encode_every_byte_and_length),
        cmocka_unit_test(test_buf_append_printf_and_consume),
        cmocka_unit_test(test_buf_recycle_keeps_small_memory_only),
        cmocka_unit_test(test_buf_json_string_escapes_controls_and_quotes),
        cmocka_unit_test(test_buf_json_inner_escapes_without_quotes),
        cmocka_unit_test(test_buf_json_string_every_byte_at_every_position),
        cmocka_unit_test(test_fmt_u64_is_printf_s_decimal),
        cmocka_unit_test(test_fmt_hex_u64_is_printf_s_hex),
        cmocka_unit_test(test_path_join_and_item_are_snprintf_s),
        cmocka_unit_test(test_hex_round_trip_and_refusals),
        cmocka_unit_test(test_ct_equal_detects_any_difference),
        cmocka_unit_test(test_ct_equal_every_length_position_and_bit),
        cmocka_unit_test(test_alloc_fail_at_fails_exactly_the_nth),
        cmocka_unit_test(test_append_numbers_read_back_the_same),
        cmocka_unit_test(test_base64_decode_is_strict),
        cmocka_unit_test(test_utf8_valid_refuses_overlongs_surrogates_and_past_the_range),
        cmocka_unit_test(test_fmt_iso_ms_writes_rfc3339_utc_and_clamps_past_9999),
        cmocka_unit_test(test_str_trim_and_prefixes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
